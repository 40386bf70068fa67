/* cmd_quantize.c - `pooled quantize IN OUT TYPE [--tensor-type PATTERN=TYPE]... [--pure]`:
 * convert a GGUF's weights to TYPE (pooled_quantize of pooled.h does the work). */
#include <pooled.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "args.h"
#include "commands.h"

/* Files from this size up get a progress line per tensor. */
#define PROGRESS_FROM_BYTES (64ull << 20)

/* Print words at column 9, wrapped before column 88. */
static void print_wrapped(FILE *f, const char *words) {
    int col = 9;
    for (const char *w = words; *w;) {
        int len = (int)strcspn(w, " ");
        if (col > 9 && col + 1 + len > 88) {
            fprintf(f, "\n%9s", "");
            col = 9;
        } else if (col > 9) {
            fputc(' ', f), col++;
        }
        fprintf(f, "%.*s", len, w);
        col += len;
        w += len;
        while (*w == ' ') w++;
    }
    fputc('\n', f);
}

static void usage(FILE *f) {
    fprintf(f, "usage: pooled quantize IN.gguf OUT.gguf TYPE [--tensor-type PATTERN=TYPE]... "
               "[--pure]\n"
               "\n"
               "Store the weight matrices of IN in TYPE (1-D tensors such as norms stay as they\n"
               "are) and write OUT with the same metadata, as llama-quantize does.\n"
               "\n"
               "  TYPE   ");
    print_wrapped(f, pooled_quantize_types());
    fprintf(f,
            "  --tensor-type PATTERN=TYPE   tensors whose name matches PATTERN (an extended\n"
            "         regex, found anywhere in the name, e.g. ffn_down or 'blk\\.[0-3]\\.attn_v')\n"
            "         get TYPE (a plain type: q8_0, q4_k, f16, ...); the first match wins;\n"
            "         may be repeated\n"
            "  --pure every weight in TYPE's own type; without it llama-quantize's mixture for\n"
            "         TYPE applies (output.weight in q6_k unless TYPE is q8_0; for q4_k_m\n"
            "         attn_v and ffn_down of some layers in q6_k; ...)\n"
            "\n"
            "A row length a type cannot hold (not a multiple of its block) falls back to one\n"
            "that can (q4_k->q5_0, q6_k->q8_0, ..., otherwise f16), with a note on stderr.\n");
}

static void print_note(void *ctx, const char *line) {
    (void)ctx;
    fprintf(stderr, "pooled: note: %s\n", line);
}

static void print_progress(void *ctx, int64_t i, int64_t n, uint64_t done, uint64_t total,
                           const char *name) {
    if (*(const uint64_t *)ctx < PROGRESS_FROM_BYTES) return;
    fprintf(stderr, "[%4lld/%4lld] %5.1f%%  %s\n", (long long)i + 1, (long long)n,
            total ? 100.0 * (double)done / (double)total : 100.0, name);
}

int cmd_quantize(int argc, char **argv) {
    const char *pos[3];
    int n_pos = 0;
    const char **tt = calloc((size_t)argc, sizeof *tt);
    if (!tt) return die("out of memory");
    pooled_quantize_opts o = pooled_quantize_opts_default();
    o.tensor_types = tt, o.note = print_note, o.progress = print_progress;
    int rc = 1;
    for (int i = 1; i < argc; i++) {
        const char *v;
        bool err = false;
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            rc = 0;
            goto out;
        } else if (!strcmp(argv[i], "--pure")) {
            o.pure = 1;
        } else if (arg_take(argc, argv, &i, "--tensor-type", NULL, &v, &err)) {
            if (err) goto out;
            tt[o.n_tensor_types++] = v; /* PATTERN=TYPE, checked by pooled_quantize */
        } else if (argv[i][0] == '-' && argv[i][1]) {
            die("quantize: unknown option '%s' (see pooled quantize --help)", argv[i]);
            goto out;
        } else if (n_pos < 3) {
            pos[n_pos++] = argv[i];
        } else {
            die("quantize: too many arguments (see pooled quantize --help)");
            goto out;
        }
    }
    if (n_pos != 3) {
        die("quantize: expected IN OUT TYPE (see pooled quantize --help)");
        goto out;
    }
    o.type = pos[2];
    /* stat, not open: opening a FIFO would block (pooled_quantize refuses it) */
    struct stat in_st;
    uint64_t in_size = !stat(pos[0], &in_st) && in_st.st_size > 0 ? (uint64_t)in_st.st_size : 0;
    o.user = &in_size;
    if (pooled_quantize(pos[0], pos[1], &o)) {
        die("%s", pooled_last_error());
        goto out;
    }
    rc = 0;
out:
    free(tt);
    return rc;
}
