/* cmd_room.c - `pooled room host|bench|join`: one model split across machines.
 *
 * host: load the embedding and the head (and --host-layers), listen, wait for --workers
 * joiners that prove the room key, plan (layers by speed within the memory lent, printed),
 * deal and check each worker's identity, answer the prompt through them exactly as `pooled
 * run` would (stdout the same), say bye and exit; without a prompt, chat through them as
 * `pooled chat` does; bench (or host --bench): `pooled bench` through them.
 * join: probe, dial the host, load the dealt layers from this machine's copy of the model,
 * link to the next worker, serve frames until the host says bye (exit 0), Ctrl-C/kill (bye
 * to the host, exit 0), or a failure (one line, exit 1). Everything about the room goes to
 * stderr. */
#include <signal.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "base/file_map.h"
#include "cmd_opts.h"
#include "commands.h"
#include "api/api_internal.h"
#include "../../room/guest.h"
#include "../../room/room.h"
#include "../../room/room_io.h"
#include "../../serve/engine.h"
#include "../../serve/server.h"
#include "format/gguf_hash.h"
#include "runtime/probe.h"

static const char *const usage =
    "usage: pooled room host -m FILE [-p PROMPT | -f/--file FILE | --prompt-ids IDS] [options]\n"
    "                        [run options]\n"
    "       pooled room bench -m FILE [options] [-p 512] [-n 128] [-r 5] [bench options]\n"
    "       pooled room join ADDR:PORT --key SECRET [-m FILE] [options]\n"
    "       pooled room chat ADDR:PORT --key SECRET [-p PROMPT] [options] (pooled room chat -h)\n"
    "host:\n"
    "  --listen ADDR:PORT   where joiners dial (default 0.0.0.0:7700; port 0: any free one)\n"
    "  --key SECRET         the room key (default: a random one, printed)\n"
    "  --workers N          workers to wait for (default 1)\n"
    "  --host-layers A-B    layers [A, B) the host runs itself (default none)\n"
    "  --wire f16|f32       hidden state on the wire (default f16; f32 is bit-exact)\n"
    "  --lap-timeout MS     a worker must answer a frame within this (default 30000)\n"
    "  --lend MEMORY        memory the host lends for layers and the ends, in bytes or with\n"
    "                       K/M/G/T (default: 90% of what /proc/meminfo says is available)\n"
    "  --bench              measure prefill and decode through the room as `pooled bench`\n"
    "                       does (its -p, -n, -r, --json): the same as `pooled room bench`\n"
    "  --emulate-latency-ms N   (host and join; measurements only) hold every frame, result\n"
    "                       and rewind N ms once received: N ms more per hop, one way\n"
    "  --wait MS            give up when the workers have not joined by then (default 0:\n"
    "                       wait without end)\n"
    "  --serve              answer guests (`pooled room chat`) one at a time, until Ctrl-C,\n"
    "                       in place of a prompt or a chat on this terminal\n"
    "  --http ADDR:PORT     once the room runs, answer `pooled serve`'s HTTP API (OpenAI,\n"
    "                       Anthropic; docs/serve.md) on ADDR:PORT through it, one request\n"
    "                       at a time, until Ctrl-C (port 0: a free one, printed)\n"
    "  --api-key K, --queue N, --allow-origin LIST   as for `pooled serve`, with --http\n"
    "  and every option of `pooled run` (-p, --prompt-ids, -n, --temp, --seed, --ids, ...);\n"
    "  without a prompt, an interactive chat as `pooled chat` (and its options)\n"
    "join:\n"
    "  --key SECRET         the room key the host printed\n"
    "  --lend MEMORY        memory this device lends, in bytes or with K/M/G/T (told the host;\n"
    "                       default: 90% of what /proc/meminfo says is available)\n"
    "  --layers A-B         run exactly layers [A, B) (every worker or none gives it; tests)\n"
    "  --listen ADDR:PORT   where the previous worker of the chain dials this one (default\n"
    "                       0.0.0.0:0: any free port, told the host; none: no chain, every\n"
    "                       frame goes through the host)\n"
    "  -m/--model, --backend, -t/--threads, -c/--ctx/--ctx-size, --kv, --act, --spec\n"
    "                       as for `pooled run` (--kv and --act as the host's); without -m\n"
    "                       the dealt layers come from the host into $XDG_CACHE_HOME/pooled\n"
    "                       (or ~/.cache/pooled; the 4 most recently used parts are kept)\n";

static volatile sig_atomic_t stop_flag;

static void on_stop(int sig) {
    (void)sig;
    stop_flag = 1;
}

/* SIGINT and SIGTERM set stop_flag (unless the caller ignores them); restore: the default. */
static void catch_stop(bool on) {
    static const int sigs[] = {SIGINT, SIGTERM};
    for (size_t i = 0; i < sizeof sigs / sizeof *sigs; i++) {
        struct sigaction old, sa = {.sa_handler = on ? on_stop : SIG_DFL};
        if (sigaction(sigs[i], NULL, &old) == 0 && old.sa_handler != SIG_IGN)
            sigaction(sigs[i], &sa, NULL);
    }
}

/* "ADDR:PORT" -> "tcp://ADDR:PORT"; a URL with a scheme stays as it is. */
static void to_url(const char *addr, char *url, size_t cap) {
    snprintf(url, cap, strstr(addr, "://") ? "%s" : "tcp://%s", addr);
}

typedef struct {
    const char *listen, *key, *model;
    int64_t workers, lap_ms, wait_ms;
    uint64_t lend; /* --lend (0: what the machine can spare) */
    pl_wire_dtype dtype;
    char key_buf[33];
    bool serve;                           /* --serve: keep listening, for guests */
    pl_listener *L;                       /* with serve: the listener, once the workers joined */
    const char *http, *api_key, *origins; /* --http ADDR:PORT, --api-key, --allow-origin */
    int64_t queue;                        /* --queue */
} host_opts;

/* What this machine can spare when --lend is not given: 90% of the memory Linux reports
 * available now (MemAvailable in /proc/meminfo: free memory plus what the page cache can
 * give back), the rest left to the system. 0 where it cannot be read. */
static uint64_t spare_memory(void) {
    return pl_mem_available() / 10 * 9;
}

/* The host's own share of the plan (no --host-layers): a local stage over its own partial
 * model, in layer order among the workers' stages. */
static pl_status host_stage(pl_model_parts *lm, int first, int last, int at) {
    pl_model_opts mo = {
        .prefault = true, .layer_first = first, .layer_last = last, .ends = PL_ENDS_NONE};
    pl_status s = pl_model_load(lm->g, lm->be, &mo, &lm->parts[at]);
    if (!s) s = pl_stage_local_new(lm->parts[at], &lm->so, first, last, &lm->stages[at]);
    return s;
}

static bool host_attach(pl_model_parts *lm, void *ud) {
    host_opts *h = ud;
    const pl_model_info *in = pl_model_get_info(lm->m);
    int n = (int)h->workers, left = in->n_layer - (in->layer_last - in->layer_first);
    if (n > left)
        return die("room host: %d workers cannot share the %d layers the host leaves (each "
                   "needs one)",
                   n, left),
               false;
    char url[256];
    to_url(h->listen, url, sizeof url);
    pl_listener *L = NULL;
    if (pl_link_listen(url, h->key, NULL, &L))
        return die("room host: cannot listen on %s: %s", h->listen, pl_last_error()), false;
    const char *bound = pl_listener_url(L);
    fprintf(stderr,
            "room: waiting for %d worker%s; on each, run:\n"
            "    pooled room join %s --key %s [-m MODEL]\n",
            (int)h->workers, h->workers == 1 ? "" : "s",
            strncmp(bound, "tcp://", 6) ? bound : bound + 6, h->key);
    pl_room_worker w[PL_ROOM_MAX_WORKERS];
    memset(w, 0, sizeof w);
    uint8_t meta[32];
    pl_status s = pl_gguf_meta_digest(lm->g, meta);
    if (!s) s = pl_room_gather(L, n, (int)h->wait_ms, &stop_flag, true, meta, w);
    if (h->serve && !s)
        h->L = L; /* guests dial here once the room runs */
    else
        pl_listener_close(L);
    catch_stop(false); /* from here a signal ends the host; workers see it leave */
    char cache[1200];
    pl_probe_result pr = {0};
    if (!s && pl_probe_speed(lm->g, lm->be, NULL, &pr)) pl_clear_error(); /* the slowest */
    pl_room_deal_opts d = {.g = lm->g,
                           .n_ctx = lm->so.n_ctx,
                           .kv_type = lm->so.kv_type,
                           .dtype = h->dtype,
                           /* --spec: the workers keep what the host's state keeps */
                           .n_snap = lm->so.n_snap,
                           .hash_cache =
                               pl_room_hash_cache(h->model, cache, sizeof cache) ? cache : NULL,
                           .host_lend = h->lend ? h->lend : spare_memory(),
                           .host_speed = pr.layers_per_s,
                           .host_backend = lm->be->name,
                           .host_device = lm->be->device,
                           .host_first = in->layer_first,
                           .host_last = in->layer_last,
                           .model_path = h->model,
                           .verbose = true};
    int hf = 0, hl = 0, nw = n;
    if (!s) s = pl_room_plan(w, &nw, &d, &hf, &hl);
    if (!s) s = pl_room_deal(w, nw, &d, hf, hl);
    /* the stages in layer order: the workers', and the host's own share when the plan gave
     * it one (its --host-layers are its model's own, outside the stages) */
    bool own = hf < hl && in->layer_first == in->layer_last;
    bool chain = !s && pl_room_chain(w, nw, false);
    for (int i = 0, k; !s && i <= nw; i += k) {
        if (own && (i == nw || w[i].first >= hl)) {
            own = false;
            s = host_stage(lm, hf, hl, lm->n_stages);
            lm->n_stages++; /* closing the model frees what was made */
        }
        if (s || i == nw) break;
        /* in a chain, the workers up to the host's layers (or the end) are one stage */
        for (k = 1; chain && i + k < nw && w[i + k].first == w[i + k - 1].last &&
                    !(in->layer_first < in->layer_last && w[i + k].first == in->layer_last);
             k++) {
        }
        pl_stage **st = &lm->stages[lm->n_stages];
        s = pl_room_stage_new(&w[i], k, in->n_layer, in->n_embd, lm->so.n_ctx, h->dtype,
                              (int)h->lap_ms, st);
        if (!s) lm->n_stages++;
        /* a lost worker's layers: the host loads them from its own file (room.h) */
        if (!s) s = pl_room_stage_survive(*st, lm->g, lm->be, &lm->so);
    }
    if (s) {
        char line[512];
        snprintf(line, sizeof line, "%s", pl_last_error());
        for (int i = 0; i < nw; i++) { /* those still waiting hear why */
            if (w[i].link) pl_room_send_error(w[i].link, PL_WERR_INTERNAL, line);
            pl_room_worker_bye(w[i].link);
        }
        return die("room host: %s", line), false;
    }
    for (int i = 0, k = 0; i < lm->n_stages; i++) {
        if (!strcmp(lm->stages[i]->m->kind, "local"))
            fprintf(stderr, "room: the host runs layers %d..%d\n", lm->stages[i]->first,
                    lm->stages[i]->last);
        else
            fprintf(stderr, "room: %s %d runs layers %d..%d\n", chain ? "chain" : "worker", ++k,
                    lm->stages[i]->first, lm->stages[i]->last);
    }
    return true;
}

/* The room host's model: the embedding, the head and its --host-layers, then the workers
 * gathered, the layers dealt and their stages appended to the chain (host_attach). */
static pooled_model *host_open(const model_args *a, void *ud) {
    pooled_model_opts o;
    if (!model_opts(a, 0, &o)) return NULL;
    load_progress_state ps = {.last_pct = -1};
    if (isatty(2)) o.progress = load_progress, o.progress_user = &ps;
    pooled_model *m = NULL;
    int rc = pl_api_open_host(a->path, &o, a->host_first, a->host_last, &m);
    if (!(m = model_opened(a, rc, m, &ps))) return NULL;
    if (host_attach(pl_api_parts(m), ud)) return m;
    pooled_model_close(m);
    return NULL;
}

static bool parse_mem(const char *v, uint64_t *out);

/* host --serve: the room answers its guests (`pooled room chat`), one ask at a time, until
 * Ctrl-C or SIGTERM (then bye to every worker and guest). All answers go through one
 * session, so a guest's turn reuses what the previous one left in the caches. */
static int room_serve(const chat_opts *co, host_opts *h) {
    pooled_model *m = host_open(&co->ma, h);
    if (!m) {
        if (h->L) pl_listener_close(h->L);
        return 1;
    }
    pooled_session *ses = NULL;
    int rc = 1;
    if (pooled_session_new(m, &ses)) {
        die("room host: %s", pooled_last_error());
        goto done;
    }
    model_open_report(m);
    const char *bound = pl_listener_url(h->L);
    fprintf(stderr,
            "room: serving guests (Ctrl-C ends); on each, run:\n"
            "    pooled room chat %s --key %s\n",
            strncmp(bound, "tcp://", 6) ? bound : bound + 6, h->key);
    pl_room_answerer a = {.m = m, .ses = ses, .sp = co->sp, .think = co->think};
    pl_room_guest_opts o = {
        .answer = pl_room_answer, .ud = &a, .stop = &stop_flag, .verbose = true};
    stop_flag = 0;
    catch_stop(true);
    rc = pl_room_guests_serve(h->L, &o) ? die("room host: %s", pl_last_error()) : 0;
    catch_stop(false);
done:
    pooled_session_free(ses);
    if (h->L) pl_listener_close(h->L);
    pooled_model_close(m);
    return rc;
}

/* host --http: `pooled serve`'s API answered through the room (serve/), one request at a
 * time (the chain's stages keep one conversation's caches), until Ctrl-C or SIGTERM. */
static int room_http(const chat_opts *co, host_opts *h) {
    char host[256];
    const char *colon = strrchr(h->http, ':');
    int64_t port = -1;
    if (!colon || colon == h->http || (size_t)(colon - h->http) >= sizeof host ||
        !arg_int("--http", colon + 1, 0, 65535, &port))
        return die("room host: --http: expected ADDR:PORT, got '%s'", h->http);
    snprintf(host, sizeof host, "%.*s", (int)(colon - h->http), h->http);
    if (host[0] == '[' && host[strlen(host) - 1] == ']') /* [::1]:8080 */
        memmove(host, host + 1, strlen(host)), host[strlen(host) - 1] = 0;
    if (!srv_check_host(host)) return 1;
    signal(SIGPIPE, SIG_IGN); /* a client gone mid-stream is the server's to notice */
    pooled_model *m = host_open(&co->ma, h);
    if (!m) return 1;
    int rc = 1;
    char why[512];
    srv_engine *e = srv_engine_new(m, 1, why, sizeof why);
    if (!e) {
        die("room host: %s", why);
    } else {
        model_open_report(m);
        const char *id = strrchr(co->ma.path, '/');
        stop_flag = 0;
        catch_stop(true);
        srv_config c = {.host = host,
                        .port = (int)port,
                        .api_key = h->api_key,
                        .queue = (int)h->queue,
                        .model_id = id ? id + 1 : co->ma.path,
                        .stop = &stop_flag,
                        .allow_origins = h->origins};
        rc = srv_serve(e, &c);
        catch_stop(false);
    }
    srv_engine_free(e);
    pooled_model_close(m); /* (the workers hear the host's bye) */
    return rc;
}

/* "A-B" with 0 <= A <= B. */
static bool parse_range(const char *opt, const char *v, int *a, int *b) {
    char *e1, *e2;
    long x = strtol(v, &e1, 10), y = e1 && *e1 == '-' ? strtol(e1 + 1, &e2, 10) : -1;
    if (*e1 != '-' || *e2 || e1 == v || x < 0 || y < x || y > PL_WIRE_MAX_LAYERS) {
        die("%s: expected A-B with 0 <= A <= B <= %d, got '%s'", opt, PL_WIRE_MAX_LAYERS, v);
        return false;
    }
    *a = (int)x, *b = (int)y;
    return true;
}

static int room_host(int argc, char **argv, bool bench) {
    host_opts h = {.listen = "0.0.0.0:7700",
                   .workers = 1,
                   .lap_ms = PL_ROOM_LAP_MS,
                   .dtype = PL_WIRE_F16,
                   .queue = 16};
    int host_first = 0, host_last = 0;
    char **rest = calloc((size_t)argc + 1, sizeof *rest);
    if (!rest) return die("out of memory");
    int nrest = 0;
    rest[nrest++] = "room host";
    bool err = false, prompt = false;
    for (int i = 1; i < argc && !err; i++) {
        const char *v;
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            free(rest);
            printf("%s", usage);
            return 0;
        } else if (arg_take(argc, argv, &i, "--listen", NULL, &v, &err)) {
            h.listen = v;
        } else if (arg_take(argc, argv, &i, "--key", NULL, &v, &err)) {
            h.key = v;
            if (!*v || strlen(v) > PL_LINK_MAX_KEY)
                err = die("--key: 1 to %d bytes", PL_LINK_MAX_KEY);
        } else if (arg_take(argc, argv, &i, "--workers", NULL, &v, &err)) {
            err = err || !arg_int("--workers", v, 1, PL_ROOM_MAX_WORKERS, &h.workers);
        } else if (arg_take(argc, argv, &i, "--lap-timeout", NULL, &v, &err)) {
            err = err || !arg_int("--lap-timeout", v, 1, PL_LINK_MAX_TIMEOUT_MS, &h.lap_ms);
        } else if (arg_take(argc, argv, &i, "--wait", NULL, &v, &err)) {
            err = err || !arg_int("--wait", v, 0, PL_LINK_MAX_TIMEOUT_MS, &h.wait_ms);
        } else if (arg_take(argc, argv, &i, "--host-layers", NULL, &v, &err)) {
            err = err || !parse_range("--host-layers", v, &host_first, &host_last);
        } else if (arg_take(argc, argv, &i, "--lend", NULL, &v, &err)) {
            err = err || !parse_mem(v, &h.lend);
        } else if (!strcmp(argv[i], "--bench")) {
            bench = true;
        } else if (!strcmp(argv[i], "--serve")) {
            h.serve = true;
        } else if (arg_take(argc, argv, &i, "--http", NULL, &v, &err)) {
            h.http = v;
        } else if (arg_take(argc, argv, &i, "--api-key", NULL, &v, &err)) {
            h.api_key = v;
            if (!err && !*v) err = die("--api-key: the key is empty");
        } else if (arg_take(argc, argv, &i, "--allow-origin", NULL, &v, &err)) {
            h.origins = v;
        } else if (arg_take(argc, argv, &i, "--queue", NULL, &v, &err)) {
            err = err || !arg_int("--queue", v, 0, SRV_MAX_QUEUE, &h.queue);
        } else if (arg_take(argc, argv, &i, "--emulate-latency-ms", NULL, &v, &err)) {
            int64_t ms = 0;
            err = err || !arg_int("--emulate-latency-ms", v, 0, PL_ROOM_MAX_LATENCY_MS, &ms);
            pl_room_emulate_latency((int)ms);
        } else if (arg_take(argc, argv, &i, "--wire", NULL, &v, &err)) {
            if (!err && !strcmp(v, "f16"))
                h.dtype = PL_WIRE_F16;
            else if (!err && !strcmp(v, "f32"))
                h.dtype = PL_WIRE_F32;
            else if (!err)
                err = die("--wire: expected f16 or f32, got '%s'", v);
        } else {
            if (!strcmp(argv[i], "-p") || !strcmp(argv[i], "--prompt") ||
                !strcmp(argv[i], "--prompt-ids") || !strcmp(argv[i], "-f") ||
                !strcmp(argv[i], "--file"))
                prompt = true;
            rest[nrest++] = argv[i];
        }
    }
    run_opts ro;
    chat_opts co;
    bench_opts bo;
    int pr = err      ? 1
             : bench  ? bench_opts_parse(nrest, rest, &bo)
             : prompt ? run_opts_parse(nrest, rest, &ro)
                      : chat_opts_parse(nrest, rest, &co);
    free(rest);
    if (pr) return pr == 2 ? 0 : 1;
    model_args *ma = bench ? &bo.ma : prompt ? &ro.ma : &co.ma;
    if (ma->split) return die("room host: --split is for `pooled run`");
    if (!h.key) { /* 128 random bits as 32 hex digits */
        unsigned char raw[16];
        if (sodium_init() < 0) return die("room host: libsodium cannot start");
        randombytes_buf(raw, sizeof raw);
        sodium_bin2hex(h.key_buf, sizeof h.key_buf, raw, sizeof raw);
        h.key = h.key_buf;
    }
    h.model = ma->path;
    ma->room_host = true;
    ma->host_first = host_first;
    ma->host_last = host_last;
    catch_stop(true);
    if (h.serve && (bench || prompt))
        return die("room host: --serve answers guests: no -p, no --bench");
    if (h.http && (bench || prompt || h.serve))
        return die("room host: --http answers HTTP requests: no -p, no --bench, no --serve");
    if ((h.api_key || h.queue != 16 || h.origins) && !h.http)
        return die("room host: --api-key, --queue and --allow-origin go with --http");
    if (h.serve) return room_serve(&co, &h);
    if (h.http) return room_http(&co, &h);
    if (bench) return bench_with(&bo, host_open, &h);
    return prompt ? run_with(&ro, host_open, &h) : chat_with(&co, host_open, &h);
}

/* "123", "4K", "16G": bytes. */
static bool parse_mem(const char *v, uint64_t *out) {
    char *e;
    double x = strtod(v, &e);
    double mul = 1;
    if (e != v && *e && !e[1]) {
        const char *u = strchr("KMGT", *e == 'k' ? 'K' : *e);
        mul = u ? (double)(1ull << (10 * (u - "KMGT" + 1))) : 0;
        if (u) e++;
    }
    if (e == v || *e || !(x >= 0) || x * mul > 1e18) {
        die("--lend: expected bytes, or a number with K, M, G or T, got '%s'", v);
        return false;
    }
    *out = (uint64_t)(x * mul);
    return true;
}

static int room_join(int argc, char **argv) {
    model_args ma = model_args_defaults();
    const char *addr = NULL, *key = NULL;
    uint64_t lend = 0;
    int want_first = 0, want_last = 0;
    const char *listen = "0.0.0.0:0";
    bool err = false;
    for (int i = 1; i < argc && !err; i++) {
        const char *v;
        if (model_args_take(argc, argv, &i, &ma, &err)) continue;
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            printf("%s", usage);
            return 0;
        } else if (arg_take(argc, argv, &i, "--key", NULL, &v, &err)) {
            key = v;
        } else if (arg_take(argc, argv, &i, "--lend", NULL, &v, &err)) {
            err = err || !parse_mem(v, &lend);
        } else if (arg_take(argc, argv, &i, "--listen", NULL, &v, &err)) {
            listen = v;
        } else if (arg_take(argc, argv, &i, "--emulate-latency-ms", NULL, &v, &err)) {
            int64_t ms = 0;
            err = err || !arg_int("--emulate-latency-ms", v, 0, PL_ROOM_MAX_LATENCY_MS, &ms);
            pl_room_emulate_latency((int)ms);
        } else if (arg_take(argc, argv, &i, "--layers", NULL, &v, &err)) {
            err = err || !parse_range("--layers", v, &want_first, &want_last);
            if (!err && want_first == want_last) err = die("--layers: an empty range '%s'", v);
        } else if (argv[i][0] != '-' && !addr) {
            addr = argv[i];
        } else if (!err) {
            return die("room join: unknown option '%s' (pooled room --help)", argv[i]);
        }
    }
    if (err) return 1;
    if (!addr) return die("room join: give the host's ADDR:PORT");
    if (!key || !*key) return die("room join: give the room key with --key SECRET");
    char url[256], cache[1200], listen_url[256], parts[1024];
    to_url(addr, url, sizeof url);
    to_url(listen, listen_url, sizeof listen_url);
    bool parts_dir = pl_room_cache_dir(parts, sizeof parts);
    if (!ma.path && !parts_dir)
        return die("room join: without -m the layers are fetched into $XDG_CACHE_HOME/pooled or "
                   "~/.cache/pooled: neither can be made (set XDG_CACHE_HOME, or give -m FILE)");
    pl_room_join_opts o = {
        .url = url,
        .want_first = want_first,
        .listen = strcmp(listen, "none") ? listen_url : NULL,
        .want_last = want_last,
        .hash_cache = ma.path && pl_room_hash_cache(ma.path, cache, sizeof cache) ? cache : NULL,
        .cache_dir = parts_dir ? parts : NULL,
        .key = key,
        .model = ma.path,
        .backend = ma.backend,
        .threads = (int)ma.threads,
        .kv_type = pl_api_kv_type(ma.kv),
        .act_q8 = ma.act_q8,
        .lend = lend ? lend : spare_memory(),
        .stop = &stop_flag,
        .verbose = true,
        /* POOLED_ROOM_PREPARE=0: the next frame's pass is not prepared ahead (for A/B) */
        .no_prepare = getenv("POOLED_ROOM_PREPARE") && !strcmp(getenv("POOLED_ROOM_PREPARE"), "0")};
    catch_stop(true);
    if (pl_room_join(&o)) return die("room join: %s", pl_last_error());
    fprintf(stderr, stop_flag ? "room: left the room\n" : "room: the host said bye\n");
    return 0;
}

int room_chat(int argc, char **argv); /* cmd_room_chat.c */

int cmd_room(int argc, char **argv) {
    if (argc >= 2 && !strcmp(argv[1], "chat")) return room_chat(argc - 1, argv + 1);
    if (argc >= 2 && !strcmp(argv[1], "host")) return room_host(argc - 1, argv + 1, false);
    if (argc >= 2 && !strcmp(argv[1], "bench")) return room_host(argc - 1, argv + 1, true);
    if (argc >= 2 && !strcmp(argv[1], "join")) return room_join(argc - 1, argv + 1);
    if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        printf("%s", usage);
        return 0;
    }
    return die("room: expected `room host`, `room bench`, `room join` or `room chat` (pooled room "
               "--help)");
}
