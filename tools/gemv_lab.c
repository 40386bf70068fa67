/* gemv_lab.c - time GEMV kernel variants on one GPU, on random weights of a model's shapes.
 *
 * A developer's tool for choosing kernels (docs/gpu-notes.md records what it showed): for
 * each weight shape of a model (q/k/v, o, gate/up, down, LM head) and each weight type, it
 * builds every variant of the GEMV generator in its list, checks the first rows against the
 * CPU reference (kernel_ref.c), and times 20 dispatches in one command buffer (each waits
 * for the one before, as in a decode step), median of 5. Build: `make lab`; run from the
 * repo root (it finds Dawn like pooled does): build/gemv_lab [--model 8b|1.7b|27b] [--only S]
 * [--cold]. --cold streams 128 MB through a copy before each GEMV, so its weights come
 * from memory as in a real decode step rather than from L2 (50 MB on an H200), and
 * reports the time over that of the copies alone. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format/quant.h"
#include "gpu/device.h"
#include "gpu/kernel_ref.h"
#include "gpu/wgsl_gen.h"
#include "lab_util.h"

typedef struct {
    const char *name;
    uint32_t rows, cols;
    pl_gemv_mode mode;
    int norm;
} shape;

typedef struct {
    uint32_t T, R, U, sg, sgrows;
    int q8x;
} variant;

int main(int argc, char **argv) {
    const char *model = "8b", *only = NULL, *only_type = NULL;
    int cold = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--model") && i + 1 < argc)
            model = argv[++i];
        else if (!strcmp(argv[i], "--cold"))
            cold = 1;
        else if (!strcmp(argv[i], "--only") && i + 1 < argc)
            only = argv[++i];
        else if (!strcmp(argv[i], "--type") && i + 1 < argc)
            only_type = argv[++i];
        else {
            fprintf(stderr, "usage: gemv_lab [--model 8b|1.7b|27b] [--only SHAPE] [--type q4_0|q8_0] [--cold]\n");
            return 2;
        }
    }
    int big = !strcmp(model, "8b"), q27 = !strcmp(model, "27b");
    uint32_t H = q27 ? 5120 : big ? 4096 : 2048, F = q27 ? 17408 : big ? 12288 : 6144;
    /* qwen3.5-27b: the DeltaNet's merged q/k/v/z/beta projection, the full attention's o
     * (24 heads of 256), and gate/up also without its fused norm (the norm prologue's cost) */
    shape shapes[] = {
        {"qkv", q27 ? 16432 : big ? 6144 : 4096, H, PL_GEMV_STORE, 1},
        {"o", H, q27 ? 6144 : H, PL_GEMV_ACCUM, 0},
        {"gate_up", F, H, PL_GEMV_GATE_UP, 1},
        {"gate_up_nonorm", F, H, PL_GEMV_GATE_UP, 0},
        {"down", H, F, PL_GEMV_ACCUM, 0},
        {"lm_head", q27 ? 248320 : 151936, H, PL_GEMV_STORE, 1},
    };
    variant vs[64];
    int nv = 0;
    /* the float path's current shapes, then the int8-activation path over a grid */
    vs[nv++] = (variant){64, 4, 1, 0, 0, 0};
    vs[nv++] = (variant){128, 4, 1, 0, 0, 0};
    vs[nv++] = (variant){64, 8, 1, 0, 0, 0};
    vs[nv++] = (variant){64, 4, 2, 0, 0, 0};
    for (uint32_t T = 32; T <= 256; T *= 2)
        for (uint32_t R = 2; R <= 32; R *= 2) vs[nv++] = (variant){T, R, 1, 0, 0, 1};
    vs[nv++] = (variant){128, 8, 2, 0, 0, 1};
    vs[nv++] = (variant){64, 4, 2, 0, 0, 1};
    vs[nv++] = (variant){64, 8, 2, 0, 0, 1};
    vs[nv++] = (variant){32, 8, 2, 0, 0, 1};
    vs[nv++] = (variant){128, 8, 1, 1, 0, 1};
    vs[nv++] = (variant){128, 16, 1, 1, 0, 1};
    vs[nv++] = (variant){256, 8, 1, 1, 0, 1};
    vs[nv++] = (variant){64, 16, 1, 1, 0, 1};
    vs[nv++] = (variant){32, 4, 1, 0, 32, 1};
    vs[nv++] = (variant){128, 2, 1, 0, 32, 1};
    vs[nv++] = (variant){128, 4, 1, 0, 32, 1};

    pl_gpu *g = NULL;
    if (pl_gpu_open(NULL, &g) != PL_OK) {
        fprintf(stderr, "gemv_lab: %s\n", pl_last_error());
        return 1;
    }
    const pl_gpu_info *info = pl_gpu_get_info(g);
    pl_gpu_buf *F1 = NULL, *F2 = NULL;
    const uint64_t fbytes = 128ull << 20;
    if (cold && (pl_gpu_buf_new(g, fbytes, PL_GPU_STORAGE, "flush a", &F1) != PL_OK ||
                 pl_gpu_buf_new(g, fbytes, PL_GPU_STORAGE, "flush b", &F2) != PL_OK)) {
        fprintf(stderr, "gemv_lab: %s\n", pl_last_error());
        return 1;
    }
    printf("# %s\n# shape type variant: us per GEMV (median of 5 x 20), GB/s of weights, max "
           "error / magnitude over the checked rows\n",
           info->name);
    pl_gpu_wtype types[] = {PL_GW_Q4_0, PL_GW_Q8_0};
    for (size_t si = 0; si < sizeof shapes / sizeof *shapes; si++) {
        const shape *sh = &shapes[si];
        if (only && strcmp(only, sh->name)) continue;
        for (int ti = 0; ti < 2; ti++) {
            pl_gpu_wtype wt = types[ti];
            if (only_type && strcmp(only_type, wt == PL_GW_Q4_0 ? "q4_0" : "q8_0")) continue;
            uint32_t R = sh->rows, K = sh->cols, NB = K / 32;
            int nm = sh->mode == PL_GEMV_GATE_UP ? 2 : 1;
            uint64_t qb = (uint64_t)R * NB * (wt == PL_GW_Q4_0 ? 16 : 32),
                     sb = (uint64_t)R * NB * 2;
            unsigned char *q[2];
            uint16_t *s[2];
            pl_gpu_buf *Q[2], *S[2];
            for (int m = 0; m < nm; m++) {
                q[m] = malloc(qb), s[m] = malloc(sb + 4);
                for (uint64_t i = 0; i < qb; i++) q[m][i] = (unsigned char)rnd();
                for (uint64_t i = 0; i < (uint64_t)R * NB; i++)
                    s[m][i] = pl_f32_to_f16(unif(-0.02f, 0.02f));
                Q[m] = upload(g, q[m], qb, "q"), S[m] = upload(g, s[m], sb + 4, "s");
            }
            float *x = malloc((size_t)K * 4), *nw = malloc((size_t)K * 4),
                  *y0 = malloc((size_t)R * 4);
            for (uint32_t i = 0; i < K; i++) x[i] = unif(-2, 2), nw[i] = unif(0.5f, 1.5f);
            for (uint32_t i = 0; i < R; i++) y0[i] = unif(-1, 1);
            pl_gpu_buf *X = upload(g, x, (uint64_t)K * 4, "x"),
                       *NW = upload(g, nw, (uint64_t)K * 4, "nw");
            pl_gpu_buf *Y = upload(g, y0, (uint64_t)R * 4, "y"), *A = NULL;
            pl_gpu_buf_new(g, 32, PL_GPU_UNIFORM, "args", &A);
            pl_gpu_args args = {{1}};
            pl_gpu_write(g, A, 0, &args, sizeof args);
            /* reference for the first rows (ACCUM adds into y0, and the timed runs keep
             * adding, so each variant's check is one dispatch on a fresh copy of y0) */
            uint32_t chk = R < 2048 ? R : 2048;
            float *ref[2], *got = malloc((size_t)R * 4);
            double *mag = malloc((size_t)chk * 8);
            for (int qx = 0; qx < 2; qx++) {
                ref[qx] = malloc((size_t)chk * 4);
                memcpy(ref[qx], y0, (size_t)chk * 4);
                pl_gemv_params rp = {.type = wt,
                                     .rows = chk,
                                     .cols = K,
                                     .mode = sh->mode,
                                     .norm = sh->norm,
                                     .eps = 1e-6f,
                                     .parts = 1,
                                     .q8x = qx};
                pl_gpu_ref_mat rm[2] = {{{q[0]}, {s[0]}},
                                        {{nm > 1 ? q[1] : NULL}, {nm > 1 ? s[1] : NULL}}};
                pl_gpu_ref_gemv(&rp, rm, 1, x, nw, NULL, ref[qx], mag);
            }
            double bytes = (double)nm * (qb + sb);
            for (int vi = 0; vi < nv; vi++) {
                const variant *v = &vs[vi];
                if (v->sgrows && !info->has_subgroups) continue;
                if ((v->sg || v->sgrows) && !info->has_subgroups) continue;
                pl_gemv_params p = {.type = wt,
                                    .rows = R,
                                    .cols = K,
                                    .threads = v->T,
                                    .rows_per_wg = v->R,
                                    .mode = sh->mode,
                                    .norm = sh->norm,
                                    .eps = 1e-6f,
                                    .parts = 1,
                                    .subgroups = (int)v->sg,
                                    .sg_rows = v->sgrows,
                                    .unroll = v->U,
                                    .q8x = v->q8x};
                char *src = NULL, label[96];
                snprintf(label, sizeof label, "%ux%u u%u%s%s %s", v->T, v->R, v->U,
                         v->sg ? " sg" : "", v->sgrows ? " sgrows" : "", v->q8x ? "q8x" : "f32x");
                pl_gpu_kernel *k = NULL;
                if (pl_wgsl_gemv(&p, &src) != PL_OK ||
                    pl_gpu_kernel_new(g, src, label, &k) != PL_OK) {
                    printf("%s %s %s: FAILED %s\n", sh->name, wt == PL_GW_Q4_0 ? "q4_0" : "q8_0",
                           label, pl_last_error());
                    free(src);
                    continue;
                }
                free(src);
                pl_gpu_ref refs[9];
                int n = 0;
                refs[n++] = (pl_gpu_ref){X, 0, 0};
                refs[n++] = (pl_gpu_ref){Y, 0, 0};
                for (int m = 0; m < nm; m++) {
                    refs[n++] = (pl_gpu_ref){Q[m], 0, 0};
                    refs[n++] = (pl_gpu_ref){S[m], 0, 0};
                }
                if (sh->norm) refs[n++] = (pl_gpu_ref){NW, 0, 0};
                refs[n++] = (pl_gpu_ref){A, 0, 32};
                pl_gpu_bind *b = NULL;
                if (pl_gpu_bind_new(g, k, refs, n, &b) != PL_OK) {
                    printf("%s: bind failed: %s\n", label, pl_last_error());
                    pl_gpu_kernel_free(k);
                    continue;
                }
                uint32_t groups = pl_gemv_groups(&p);
                /* check: one dispatch on y0 */
                pl_gpu_write(g, Y, 0, y0, (size_t)R * 4);
                pl_gpu_begin(g);
                pl_gpu_dispatch(g, k, b, groups);
                double err = -1;
                if (pl_gpu_submit(g) == PL_OK &&
                    pl_gpu_download(g, Y, 0, got, (size_t)chk * 4) == PL_OK) {
                    err = 0;
                    for (uint32_t i = 0; i < chk; i++) {
                        double e = fabs((double)got[i] - ref[v->q8x][i]) / (mag[i] + 1e-30);
                        if (!(e <= err)) err = e; /* NaN sticks */
                    }
                }
                /* keep the GPU busy ~40 ms first (its clocks drop when idle), then time
                 * 110 and 10 dispatches per submit: the difference is 100 GEMVs without
                 * the fixed cost of a submit and wait */
                double w0 = pl_gpu_now();
                while (pl_gpu_now() - w0 < 0.04) {
                    pl_gpu_begin(g);
                    for (int i = 0; i < 20; i++) pl_gpu_dispatch(g, k, b, groups);
                    pl_gpu_submit(g);
                    pl_gpu_finish(g);
                }
                double t[5];
                for (int r = 0; r < 5; r++) {
                    double tn[2];
                    for (int j = 0; j < 2; j++) {
                        double t0 = pl_gpu_now();
                        pl_gpu_begin(g);
                        if (cold) { /* j = 0: the copies alone; j = 1: copy, GEMV, ... */
                            for (int i = 0; i < 20; i++) {
                                pl_gpu_copy(g, F1, 0, F2, 0, fbytes);
                                if (j) pl_gpu_dispatch(g, k, b, groups);
                            }
                        } else {
                            for (int i = 0; i < (j ? 110 : 10); i++)
                                pl_gpu_dispatch(g, k, b, groups);
                        }
                        pl_gpu_submit(g);
                        pl_gpu_finish(g);
                        tn[j] = pl_gpu_now() - t0;
                    }
                    t[r] = (tn[1] - tn[0]) / (cold ? 20 : 100);
                }
                qsort(t, 5, sizeof *t, cmpd);
                printf("%s %s %s: %.2f us %.0f GB/s err %.2g\n", sh->name,
                       wt == PL_GW_Q4_0 ? "q4_0" : "q8_0", label, t[2] * 1e6, bytes / t[2] / 1e9,
                       err);
                fflush(stdout);
                pl_gpu_bind_free(b);
                pl_gpu_kernel_free(k);
            }
            for (int m = 0; m < nm; m++)
                pl_gpu_buf_free(Q[m]), pl_gpu_buf_free(S[m]), free(q[m]), free(s[m]);
            pl_gpu_buf_free(X), pl_gpu_buf_free(NW), pl_gpu_buf_free(Y), pl_gpu_buf_free(A);
            free(x), free(nw), free(y0), free(got), free(mag), free(ref[0]), free(ref[1]);
        }
    }
    pl_gpu_buf_free(F1), pl_gpu_buf_free(F2);
    pl_gpu_close(g);
    return 0;
}
