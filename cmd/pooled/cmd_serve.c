/* cmd_serve.c - `pooled serve`: the model behind an OpenAI- and Anthropic-compatible HTTP
 * API (serve/, docs/serve.md). This file parses the options and opens the model; the
 * server and the engine it drives live in serve/. Like the server, it reaches the library
 * through pooled.h only. */
#include <pooled.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "commands.h"
#include "model_args.h"
#include "../../serve/engine.h"
#include "../../serve/server.h"

static const char *const usage =
    "usage: pooled serve -m FILE [options]   (docs/serve.md: the endpoints and limits)\n"
    "  --host H             address to listen on (default 127.0.0.1)\n"
    "  --port P             TCP port (default 8080; 0 takes a free one, printed)\n"
    "  --api-key K          require this key: Authorization: Bearer K, or x-api-key: K\n"
    "                       on the Anthropic routes (default: none)\n"
    "  --parallel N         requests generated at once, each in its own slot (a session\n"
    "                       with its own --ctx cache; default 1, at most 64)\n"
    "  --queue N            requests that may wait while every slot runs one; more get\n"
    "                       503 (default 16)\n"
    "  --allow-origin LIST  web pages of these origins (comma-separated, e.g.\n"
    "                       http://localhost:3000; * for any) may call the API from a\n"
    "                       browser; others are refused (default: only the chat page at /)\n"
    "  --ignore-eos         keep generating after an end-of-generation id (until\n"
    "                       max_tokens, the context's end, a stop string or the client\n"
    "                       leaves)\n";

int cmd_serve(int argc, char **argv) {
    model_args ma = model_args_defaults();
    const char *host = "127.0.0.1", *key = NULL, *origins = NULL;
    int64_t port = 8080, parallel = 1, queue = 16;
    bool err = false, ignore_eos = false;
    for (int i = 1; i < argc && !err; i++) {
        const char *v;
        if (model_args_take(argc, argv, &i, &ma, &err)) continue;
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            printf("%s%s", usage, model_args_help);
            return 0;
        } else if (arg_take(argc, argv, &i, "--host", NULL, &v, &err)) {
            host = v;
        } else if (arg_take(argc, argv, &i, "--port", NULL, &v, &err)) {
            err = err || !arg_int("--port", v, 0, 65535, &port);
        } else if (arg_take(argc, argv, &i, "--api-key", NULL, &v, &err)) {
            key = v;
            if (!err && !*key) return die("--api-key: the key is empty");
        } else if (arg_take(argc, argv, &i, "--parallel", "-np", &v, &err)) {
            err = err || !arg_int("--parallel", v, 1, SRV_MAX_PARALLEL, &parallel);
        } else if (arg_take(argc, argv, &i, "--queue", NULL, &v, &err)) {
            err = err || !arg_int("--queue", v, 0, SRV_MAX_QUEUE, &queue);
        } else if (arg_take(argc, argv, &i, "--allow-origin", NULL, &v, &err)) {
            origins = v;
        } else if (!strcmp(argv[i], "--ignore-eos")) {
            ignore_eos = true;
        } else if (!err) {
            return die("serve: unknown option '%s' (pooled serve --help)", argv[i]);
        }
    }
    if (err) return 1;
    if (ma.split) return die("serve: --split is for `pooled run`");
    if (!srv_check_host(host)) return 1;
    /* SIGINT/SIGTERM are taken by the server's sigwait: blocked before any thread starts
     * (the backend's pool, the server's), so every thread inherits the mask */
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    signal(SIGPIPE, SIG_IGN);
    pooled_model *m = model_open(&ma, (int)parallel);
    if (!m) return 1;
    int rc = 1;
    char why[512];
    srv_engine *e = srv_engine_new(m, (int)parallel, why, sizeof why);
    if (!e) {
        die("--parallel %lld: %s", (long long)parallel, why);
    } else {
        model_open_report(m);
        srv_engine_set_ignore_eos(e, ignore_eos);
        srv_engine_set_spec(e, ma.spec);
        const char *id = strrchr(ma.path, '/');
        srv_config c = {.host = host,
                        .port = (int)port,
                        .api_key = key,
                        .queue = (int)queue,
                        .model_id = id ? id + 1 : ma.path,
                        .allow_origins = origins};
        rc = srv_serve(e, &c);
    }
    srv_engine_free(e); /* (its sessions, before the model) */
    pooled_model_close(m);
    return rc;
}
