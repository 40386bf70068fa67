/* cmd_chat.c - `pooled chat`: an interactive, multi-turn conversation using the model's
 * chat template. Each turn renders the whole conversation, and the session runs only the
 * ids that are not already in its KV cache. Replies stream to stdout as they are made.
 * Lines starting with / are commands: /reset forgets the conversation, /quit ends.
 * An input line longer than PL_LIMIT_CHAT_LINE (1 MiB), or holding a NUL byte, ends the
 * chat with one error line and status 1 (`chat < /dev/zero` stays within that memory).
 * On the public API (pooled.h) only. */
#include <errno.h>
#include <inttypes.h>
#include <pooled.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "args.h"
#include "base/limits.h"
#include "cmd_opts.h"
#include "commands.h"

static const char *const usage =
    "usage: pooled chat -m FILE [options]     (then type; /reset clears, /quit or EOF ends)\n"
    "  --system TEXT        a system message to start every conversation with\n"
    "  -n, --n-predict N    most ids per reply (default: until the model ends its turn)\n"
    "  --no-think           ask Qwen3-style templates to skip thinking\n"
    "  --timings            after each reply, one line on stderr: ids run / reused, speed\n"
    "Ctrl-C during a reply stops it (the conversation keeps what was said); at the prompt\n"
    "it ends the chat.\n";

typedef struct {
    pooled_message *msgs;
    int n, cap;
} conversation;

static bool conv_add(conversation *c, const char *role, const char *content) {
    if (c->n == c->cap) {
        int nc = c->cap ? c->cap * 2 : 8;
        pooled_message *m = realloc(c->msgs, sizeof *m * (size_t)nc);
        if (!m) return false;
        c->msgs = m;
        c->cap = nc;
    }
    char *copy = strdup(content);
    if (!copy) return false;
    c->msgs[c->n++] = (pooled_message){.role = role, .content = copy};
    return true;
}

static void conv_clear(conversation *c, const char *system) {
    for (int i = 0; i < c->n; i++) free((char *)c->msgs[i].content);
    c->n = 0;
    if (system) conv_add(c, "system", system);
}

/* One line of standard input into *buf (grown as needed, up to the limit), without its end
 * of line. Returns its length, -1 at the end of input, or -2 after printing why the line
 * is refused (too long, a NUL byte) or the input could not be read. */
static ssize_t read_line(char **buf, size_t *cap) {
    size_t n = 0;
    int c = 0;
    for (;;) {
        if (n + 2 > *cap) { /* room for one more byte and the terminator */
            size_t nc = *cap ? *cap * 2 : 256;
            if (nc > PL_LIMIT_CHAT_LINE + 1) nc = PL_LIMIT_CHAT_LINE + 1;
            char *b = nc > *cap ? realloc(*buf, nc) : NULL;
            if (!b && nc > *cap) {
                die("chat: out of memory");
                return -2;
            }
            if (b) *buf = b, *cap = nc;
        }
        if ((c = getchar()) == EOF || c == '\n') break;
        if (n >= PL_LIMIT_CHAT_LINE) {
            die("chat: an input line is longer than the limit of %zu MiB",
                PL_LIMIT_CHAT_LINE >> 20);
            return -2;
        }
        (*buf)[n++] = (char)c;
    }
    if (ferror(stdin)) {
        die("reading standard input: %s", strerror(errno));
        return -2;
    }
    if (c == EOF && n == 0) return -1;
    (*buf)[n] = 0;
    const char *nul = memchr(*buf, 0, n);
    if (nul) {
        die("chat: an input line holds a NUL byte (at byte %zu)", (size_t)(nul - *buf));
        return -2;
    }
    return (ssize_t)n;
}

/* The reply as it streams (the library holds back what may begin a stop string): printed,
 * and kept as text for the conversation. */
typedef struct {
    char *text;
    size_t len, cap;
    bool nomem;
} reply;

static void reply_add(reply *r, const char *s, size_t n) {
    if (r->len + n + 1 > r->cap) {
        size_t nc = (r->len + n + 1) * 2;
        char *t = realloc(r->text, nc);
        if (!t) {
            r->nomem = true;
            return;
        }
        r->text = t;
        r->cap = nc;
    }
    memcpy(r->text + r->len, s, n);
    r->len += n;
    r->text[r->len] = 0;
    fwrite(s, 1, n, stdout);
}

/* Ctrl-C while a reply is made: stop it after the current id, keep the chat going. */
static volatile sig_atomic_t interrupted;
static void on_interrupt(int sig) {
    (void)sig;
    interrupted = 1;
}

static int on_token(void *ud, int32_t id, const char *text, size_t len) {
    reply *r = ud;
    (void)id;
    reply_add(r, text, len);
    /* stdout failed: stop (main reports it) */
    return !out_flush() || interrupted || r->nomem;
}

/* The conversation as ids, for the model's template. */
static bool conv_ids(pooled_model *m, const conversation *c, bool think, int32_t **ids, size_t *n) {
    pooled_chat_opts o = pooled_chat_opts_default();
    o.no_think = !think;
    return !pooled_chat_tokenize(m, c->msgs, (size_t)c->n, &o, ids, n);
}

int chat_opts_parse(int argc, char **argv, chat_opts *o) {
    *o = (chat_opts){.ma = model_args_defaults(),
                     .sp = pooled_sample_opts_default(),
                     .n_predict = -1,
                     .think = true};
    bool err = false;
    for (int i = 1; i < argc && !err; i++) {
        const char *v;
        if (model_args_take(argc, argv, &i, &o->ma, &err)) continue;
        if (sampler_args_take(argc, argv, &i, &o->sp, &o->seeded, &err)) continue;
        if (stop_args_take(argc, argv, &i, &o->stop, &err)) continue;
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            printf("%s%s%s%s", usage, stop_args_help, sampler_args_help, model_args_help);
            return 2;
        } else if (!strcmp(argv[i], "--no-think")) {
            o->think = false;
        } else if (!strcmp(argv[i], "--timings")) {
            o->timings = true;
        } else if (arg_take(argc, argv, &i, "--system", NULL, &v, &err)) {
            o->system = v;
        } else if (arg_take(argc, argv, &i, "--n-predict", "-n", &v, &err)) {
            err = err || !arg_int("-n", v, -1, INT32_MAX, &o->n_predict);
        } else if (!err) {
            /* argv[0]: "chat", or "room host" when the room passes its options on */
            return die("%s: unknown option '%s' (pooled %s --help)", argv[0], argv[i], argv[0]);
        }
    }
    return err ? 1 : 0;
}

int cmd_chat(int argc, char **argv) {
    chat_opts co_;
    int pr = chat_opts_parse(argc, argv, &co_);
    if (pr) return pr == 2 ? 0 : 1;
    return chat_with(&co_, NULL, NULL);
}

int chat_with(const chat_opts *co_in, model_opener open, void *ud) {
    chat_opts co_ = *co_in;
    pooled_sample_opts so = co_.sp;
    const char *system = co_.system;
    int64_t n_predict = co_.n_predict;
    bool think = co_.think, timings = co_.timings;
    if (!co_.seeded) so.seed = sampler_args_clock_seed();
    so.ignore_eos = 0;
    so.stop = co_.stop.s;
    so.n_stop = (size_t)co_.stop.n;
    so.spec = co_.ma.spec;
    pooled_model *m = open ? open(&co_.ma, ud) : model_open(&co_.ma, 0);
    if (!m) return 1;
    int rc = 1;
    pooled_session *ses = NULL;
    conversation conv = {0};
    reply r = {0};
    char *line = NULL;
    size_t line_cap = 0;
    pooled_model_info in = {.size = sizeof in};
    pooled_model_get_info(m, &in);
    int64_t n_ctx = in.n_ctx;
    if (pooled_session_new(m, &ses)) {
        die("%s", pooled_last_error());
        goto done;
    }
    conv_clear(&conv, system);
    { /* no template, or a system message that cannot fit: no turn could ever run */
        int32_t *ids = NULL;
        size_t n_ids = 0;
        /* with an empty user message: templates may insist on one */
        if (!conv_add(&conv, "user", "")) {
            die("out of memory");
            goto done;
        }
        bool ok = conv_ids(m, &conv, think, &ids, &n_ids);
        conv_clear(&conv, system);
        pooled_free(ids);
        if (!ok) {
            die("%s: %s", co_.ma.path, pooled_last_error());
            goto done;
        }
        if ((int64_t)n_ids >= n_ctx) {
            die("%s takes %lld tokens, the context holds %lld (%sraise --ctx)",
                system ? "--system: the system message" : "the chat template alone",
                (long long)n_ids, (long long)n_ctx, system ? "shorten it or " : "");
            goto done;
        }
    }
    model_open_report(m);
    bool tty = isatty(0) && isatty(1);
    int turn = 0;
    for (;;) {
        if (tty) fputs("> ", stdout), fflush(stdout);
        ssize_t got = read_line(&line, &line_cap);
        if (got == -2) goto done;
        if (got < 0) break;
        while (got > 0 && (line[got - 1] == '\n' || line[got - 1] == '\r')) line[--got] = 0;
        if (!strcmp(line, "/quit") || !strcmp(line, "/exit")) break;
        if (!strcmp(line, "/reset")) {
            conv_clear(&conv, system);
            pooled_session_reset(ses);
            fprintf(stderr, "(conversation cleared)\n");
            continue;
        }
        if (!got) continue;
        if (line[0] == '/') {
            fprintf(stderr, "(unknown command %s: /reset or /quit)\n", line);
            continue;
        }
        if (!conv_add(&conv, "user", line)) {
            die("out of memory");
            goto done;
        }
        int32_t *ids = NULL;
        size_t n_ids = 0;
        if (!conv_ids(m, &conv, think, &ids, &n_ids)) {
            die("%s", pooled_last_error());
            goto done;
        }
        r.len = 0;
        if (r.text) r.text[0] = 0;
        int64_t room = n_ctx - (int64_t)n_ids + 1;
        if ((int64_t)n_ids >= n_ctx) { /* say so, drop the message, carry on */
            pooled_free(ids);
            conv.n--;
            free((char *)conv.msgs[conv.n].content);
            if (conv.n > (system ? 1 : 0)) /* earlier turns take room: /reset frees it */
                fprintf(stderr,
                        "pooled: the conversation no longer fits the context of %lld; "
                        "/reset to start over\n",
                        (long long)n_ctx);
            else
                fprintf(stderr,
                        "pooled: the message takes %lld tokens with the template, the "
                        "context holds %lld (raise --ctx)\n",
                        (long long)n_ids, (long long)n_ctx);
            continue;
        }
        so.max_tokens = n_predict; /* (-1: until the turn ends or the context is full) */
        pooled_result res = {.size = sizeof res};
        struct sigaction old, sa = {.sa_handler = on_interrupt};
        interrupted = 0;
        sigaction(SIGINT, &sa, &old);
        int s = pooled_generate(ses, ids, n_ids, &so, on_token, &r, &res);
        sigaction(SIGINT, &old, NULL);
        pooled_free(ids);
        fputs("\n", stdout);
        if (interrupted) fprintf(stderr, "(reply stopped)\n");
        if (!out_flush()) break; /* nobody can read the replies: end (main reports it) */
        turn++;
        if (s) { /* the model failed (non-finite logits, a device error): nothing to retry */
            die("%s", pooled_last_error());
            goto done;
        }
        if (r.nomem) {
            die("out of memory");
            goto done;
        }
        if (res.stop_reason == POOLED_STOP_LENGTH && !(n_predict >= 0 && n_predict < room))
            fprintf(stderr,
                    "pooled: reply cut short: the context of %lld is full; /reset to start "
                    "over\n",
                    (long long)n_ctx);
        if (!conv_add(&conv, "assistant", r.text ? r.text : "")) {
            die("out of memory");
            goto done;
        }
        if (timings)
            fprintf(stderr,
                    "turn %d: %lld prompt ids run (%lld reused) in %.1f ms | %lld generated "
                    "in %.1f ms, %.1f tok/s\n",
                    turn, (long long)res.n_prompt_run, (long long)(res.n_prompt - res.n_prompt_run),
                    res.t_prompt * 1e3, (long long)res.n_gen, res.t_gen * 1e3,
                    res.t_gen > 0 ? res.n_decoded / res.t_gen : 0.0);
        if (timings && so.spec != POOLED_SPEC_OFF) spec_report(&res);
    }
    rc = 0;
done:
    free(line);
    conv_clear(&conv, NULL);
    free(conv.msgs);
    free(r.text);
    pooled_session_free(ses);
    pooled_model_close(m);
    return rc;
}
