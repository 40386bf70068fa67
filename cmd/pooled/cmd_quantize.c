/* cmd_quantize.c - `pooled quantize IN OUT TYPE [--tensor-type PATTERN=TYPE]... [--pure]`:
 * convert a GGUF's weights to TYPE (the work is pl_quantize_file in src/format/quantize.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "commands.h"
#include "format/quant.h"
#include "format/quantize.h"

/* Files from this size up get a progress line per tensor. */
#define PROGRESS_FROM_BYTES (64ull << 20)

static void usage(FILE *f) {
    fprintf(
        f, "usage: pooled quantize IN.gguf OUT.gguf TYPE [--tensor-type PATTERN=TYPE]... [--pure]\n"
           "\n"
           "Store the 2-D weight tensors of IN in TYPE (1-D tensors such as norms stay as they\n"
           "are) and write OUT with the same metadata.\n"
           "\n"
           "  TYPE   f32 f16 bf16 q8_0 q5_1 q5_0 q4_1 q4_0 q6_k q4_k (q4_k_m = q4_k)\n"
           "  --tensor-type PATTERN=TYPE   tensors whose name matches PATTERN (an extended\n"
           "         regex, found anywhere in the name, e.g. ffn_down or 'blk\\.[0-3]\\.attn_v')\n"
           "         get TYPE; the first matching option wins; may be repeated\n"
           "  --pure every weight in TYPE; without it output.weight is q6_k (unless TYPE is\n"
           "         q8_0), and for q4_k/q5_k the attn_v and ffn_down of some layers too,\n"
           "         as llama-quantize does\n"
           "\n"
           "A row length the type cannot hold (not a multiple of its block) falls back to a\n"
           "type that can (q4_k->q5_0, q6_k->q8_0, otherwise f16), with a note on stderr.\n");
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
    pl_quant_override *ov = calloc((size_t)argc, sizeof *ov);
    if (!ov) return die("out of memory");
    pl_quantize_params p = {.overrides = ov, .note = print_note, .progress = print_progress};
    int rc = 1;
    for (int i = 1; i < argc; i++) {
        const char *v;
        bool err = false;
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            rc = 0;
            goto out;
        } else if (!strcmp(argv[i], "--pure")) {
            p.pure = true;
        } else if (arg_take(argc, argv, &i, "--tensor-type", NULL, &v, &err)) {
            if (err) goto out;
            const char *eq = strrchr(v, '=');
            int t = eq ? pl_quantize_type_from_name(eq + 1) : -1;
            if (!eq || eq == v || t < 0) {
                die("--tensor-type: expected PATTERN=TYPE with a known type, got '%s'", v);
                goto out;
            }
            /* argv outlives the call: cut the pattern off in place */
            argv[i][eq - argv[i]] = 0;
            ov[p.n_overrides++] = (pl_quant_override){argv[i], (uint32_t)t};
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
    int t = pl_quantize_type_from_name(pos[2]);
    if (t < 0) {
        die("quantize: unknown type '%s' (see pooled quantize --help)", pos[2]);
        goto out;
    }
    p.type = (uint32_t)t;
    FILE *in = fopen(pos[0], "rb");
    uint64_t in_size = 0;
    if (in && !fseek(in, 0, SEEK_END) && ftell(in) > 0) in_size = (uint64_t)ftell(in);
    if (in) fclose(in);
    p.ctx = &in_size;
    if (pl_quantize_file(pos[0], pos[1], &p)) {
        die("%s", pl_last_error());
        goto out;
    }
    rc = 0;
out:
    free(ov);
    return rc;
}
