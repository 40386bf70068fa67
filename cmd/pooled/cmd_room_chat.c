/* cmd_room_chat.c - `pooled room chat ADDR --key K`: a guest of a room. It lends nothing:
 * it dials the host, says hello as a guest, and asks. The guest keeps the conversation and
 * sends all of it every turn (the host keeps nothing between turns); the reply streams to
 * stdout as the host generates it. With -p it asks once and prints the text as `pooled run`
 * would (through the model's chat template; --raw: the prompt as it is, exactly as `pooled
 * run -p` runs it). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "args.h"
#include "model_args.h"
#include "../../room/guest.h"

int room_chat(int argc, char **argv);

static const char *const usage =
    "usage: pooled room chat ADDR:PORT --key SECRET [-p PROMPT [--raw]] [options]\n"
    "  --key SECRET         the room key the host printed\n"
    "  -p/--prompt PROMPT   ask once, print the reply (as `pooled run` prints it) and exit;\n"
    "                       without it: lines from standard input, replies as they come\n"
    "                       (/reset forgets the conversation, /quit ends)\n"
    "  --raw                -p runs as it is (no chat template), as `pooled run -p` does\n"
    "  --system TEXT        a system message first\n"
    "  -n/--n-predict N     most ids per reply (default: until the model ends its turn)\n"
    "  --temp T             temperature, 0 greedy (default 0.8)\n"
    "  --seed S             the sampler's seed (default: from the clock)\n"
    "  --timeout MS         give up when the host says nothing for this long (default 60000)\n";

typedef struct {
    pl_wire_ask ask;
    char *text[PL_WIRE_MAX_TURNS]; /* the turns' own copies */
    size_t bytes;
} conversation;

static void conv_clear(conversation *c, int keep) {
    while (c->ask.n_turns > keep) {
        c->ask.n_turns--;
        c->bytes -= c->ask.turns[c->ask.n_turns].n;
        free(c->text[c->ask.n_turns]);
    }
}

/* Add a turn (a copy of n bytes of t); false with a line when it does not fit an ask. */
static bool conv_add(conversation *c, pl_wire_role role, const char *t, size_t n) {
    if (c->ask.n_turns >= PL_WIRE_MAX_TURNS || c->bytes + n > PL_WIRE_MAX_ASK_TEXT) {
        fprintf(stderr,
                "pooled: the conversation would pass the room's limit (%d messages, %u bytes): "
                "/reset to start over\n",
                PL_WIRE_MAX_TURNS, PL_WIRE_MAX_ASK_TEXT);
        return false;
    }
    char *copy = malloc(n + 1);
    if (!copy) return die("out of memory"), false;
    memcpy(copy, t, n), copy[n] = 0;
    c->text[c->ask.n_turns] = copy;
    c->ask.turns[c->ask.n_turns++] = (pl_wire_turn){(uint8_t)role, (uint32_t)n, copy};
    c->bytes += n;
    return true;
}

typedef struct {
    char *text;
    size_t n, cap;
    bool failed; /* stdout or memory */
} reply;

static int on_text(void *ud, const char *t, size_t n) {
    reply *r = ud;
    if (r->n + n + 1 > r->cap) {
        size_t nc = (r->n + n + 1) * 2;
        char *b = realloc(r->text, nc);
        if (!b) return r->failed = true, 1;
        r->text = b, r->cap = nc;
    }
    memcpy(r->text + r->n, t, n), r->n += n, r->text[r->n] = 0;
    fwrite(t, 1, n, stdout);
    if (!out_flush()) return r->failed = true, 1;
    return 0;
}

int room_chat(int argc, char **argv) {
    const char *addr = NULL, *key = NULL, *prompt = NULL, *system = NULL;
    int64_t n_predict = 0, seed = 0, timeout_ms = 60000;
    double temp = 0.8;
    bool err = false, seeded = false, raw = false;
    for (int i = 1; i < argc && !err; i++) {
        const char *v;
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            printf("%s", usage);
            return 0;
        } else if (arg_take(argc, argv, &i, "--key", NULL, &v, &err)) {
            key = v;
        } else if (arg_take(argc, argv, &i, "--prompt", "-p", &v, &err)) {
            prompt = v;
        } else if (arg_take(argc, argv, &i, "--system", NULL, &v, &err)) {
            system = v;
        } else if (!strcmp(argv[i], "--raw")) {
            raw = true;
        } else if (arg_take(argc, argv, &i, "--n-predict", "-n", &v, &err)) {
            err = err || !arg_int("-n", v, 1, PL_WIRE_MAX_CTX, &n_predict);
        } else if (arg_take(argc, argv, &i, "--temp", NULL, &v, &err)) {
            err = err || !arg_float("--temp", v, 0, PL_WIRE_MAX_TEMP, &temp);
        } else if (arg_take(argc, argv, &i, "--seed", NULL, &v, &err)) {
            err = err || !arg_int("--seed", v, 0, INT64_MAX, &seed);
            seeded = true;
        } else if (arg_take(argc, argv, &i, "--timeout", NULL, &v, &err)) {
            err = err || !arg_int("--timeout", v, 1, PL_LINK_MAX_TIMEOUT_MS, &timeout_ms);
        } else if (argv[i][0] != '-' && !addr) {
            addr = argv[i];
        } else if (!err) {
            return die("room chat: unknown option '%s' (pooled room --help)", argv[i]);
        }
    }
    if (err) return 1;
    if (!addr) return die("room chat: give the host's ADDR:PORT");
    if (!key || !*key) return die("room chat: give the room key with --key SECRET");
    if (raw && (!prompt || system)) return die("room chat: --raw is for one -p prompt alone");
    char url[256];
    snprintf(url, sizeof url, strstr(addr, "://") ? "%s" : "tcp://%s", addr);
    pl_link *l = NULL;
    if (pl_room_guest_dial(url, key, 20000, &l)) return die("room chat: %s", pl_last_error());
    conversation c = {.ask = {.n_predict = (uint32_t)n_predict,
                              .temp = (float)temp,
                              .seed = seeded ? (uint64_t)seed : sampler_args_clock_seed(),
                              .flags = (seeded ? PL_ASK_SEEDED : 0) | (raw ? PL_ASK_RAW : 0)}};
    int rc = 1, keep = 0;
    if (system && !conv_add(&c, PL_ROLE_SYSTEM, system, strlen(system))) goto done;
    keep = c.ask.n_turns;
    char *line = NULL;
    size_t cap = 0;
    bool tty = isatty(0) && isatty(1);
    for (;;) {
        const char *say = prompt;
        ssize_t got = 0;
        if (!prompt) {
            if (tty) fputs("> ", stdout), fflush(stdout);
            errno = 0;
            if ((got = getline(&line, &cap, stdin)) < 0) {
                rc = errno ? die("reading standard input: %s", strerror(errno)) : 0;
                break;
            }
            while (got > 0 && (line[got - 1] == '\n' || line[got - 1] == '\r')) line[--got] = 0;
            if ((size_t)got != strlen(line)) {
                die("room chat: an input line holds a NUL byte");
                break;
            }
            if (!strcmp(line, "/quit") || !strcmp(line, "/exit")) {
                rc = 0;
                break;
            }
            if (!strcmp(line, "/reset")) {
                conv_clear(&c, keep);
                fprintf(stderr, "(conversation cleared)\n");
                continue;
            }
            if (!got) continue;
            say = line;
        }
        if (!conv_add(&c, PL_ROLE_USER, say, strlen(say))) {
            if (prompt) break;
            continue;
        }
        reply r = {0};
        pl_wire_done done;
        pl_status s = pl_room_guest_ask(l, &c.ask, on_text, &r, (int)timeout_ms, &done);
        if (!prompt || isatty(1)) putchar('\n');
        bool kept = !s && conv_add(&c, PL_ROLE_ASSISTANT, r.text ? r.text : "", r.n);
        free(r.text);
        if (s || r.failed) {
            if (!r.failed) die("room chat: %s", pl_last_error());
            break;
        }
        if (prompt) {
            rc = 0;
            break;
        }
        if (!kept) conv_clear(&c, keep);
    }
    free(line);
done:
    conv_clear(&c, 0);
    pl_link_close(l);
    return rc;
}
