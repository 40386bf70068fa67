/* qdot_bench.c - a rough timing of the act_q8 decode tile (pl_cpu_qdot_tile, 8 rows x 1) and
 * batch tile (2 x 4) over a 1024 x 4096 Q4_0 or Q8_0 matrix: the dispatched kernels against
 * the portable ones (pl_cpu_portable), and the prefill GEMM tile (4 x 16, unpack included). Built
 * for wasm32 to compare the simd128 kernels under node (docs/cpu-notes.md, "wasm32"); not part of
 * the tests. Prints ns per weight block. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cpu/cpu_internal.h"
#include "format/quant.h"

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

int main(void) {
    enum { ROWS = 1024, K = 4096, NB = K / 32 };
    for (int q4 = 1; q4 >= 0; q4--) {
        const int bs = q4 ? 18 : 34;
        unsigned char *w = malloc((size_t)ROWS * NB * bs);
        int8_t *y = malloc(4 * K);
        float yd[4][NB], out[8], sink = 0;
        int32_t ys[4][NB];
        srand(1);
        for (int i = 0; i < ROWS * NB * bs; i++) w[i] = (unsigned char)rand();
        for (int i = 0; i < ROWS * NB; i++) { /* finite block scales */
            uint16_t h = pl_f32_to_f16(0.01f);
            memcpy(w + (size_t)i * bs, &h, 2);
        }
        for (int i = 0; i < 4 * K; i++) y[i] = (int8_t)(rand() % 255 - 127);
        for (int c = 0; c < 4; c++)
            for (int b = 0; b < NB; b++) yd[c][b] = 0.02f, ys[c][b] = 0;
        const int8_t *yr[4] = {y, y + K, y + 2 * K, y + 3 * K};
        const float *ydr[4] = {yd[0], yd[1], yd[2], yd[3]};
        const int32_t *ysr[4] = {ys[0], ys[1], ys[2], ys[3]};
        for (int nc = 1; nc <= 4; nc += 3) {
            const int nr = nc == 1 ? 8 : 2;
            double t[2];
            for (int portable = 1; portable >= 0; portable--) {
                pl_cpu_portable = portable;
                double best = 1e9;
                for (int rep = 0; rep < 5; rep++) {
                    double t0 = now();
                    for (int r = 0; r < ROWS; r += nr) {
                        const unsigned char *wr[8];
                        for (int i = 0; i < nr; i++) wr[i] = w + (size_t)(r + i) * NB * bs;
                        pl_cpu_qdot_tile(q4, nr, nc, wr, yr, ydr, ysr, NB, NULL, out);
                        sink += out[0];
                    }
                    double dt = now() - t0;
                    best = dt < best ? dt : best;
                }
                t[portable] = best;
            }
            pl_cpu_portable = 0;
            double blocks = (double)ROWS * NB * nc;
            printf("%s %dx%d: portable %.2f ns/block, dispatched %.2f ns/block (%.2fx)\n",
                   q4 ? "Q4_0" : "Q8_0", nr, nc, 1e9 * t[1] / blocks, 1e9 * t[0] / blocks,
                   t[1] / t[0]);
        }
        { /* the prefill GEMM tile: 4 unpacked rows x 16 packed columns */
            const int8_t *y16[16];
            const float *yd16[16];
            const int32_t *ys16[16];
            for (int c = 0; c < 16; c++)
                y16[c] = yr[c % 4], yd16[c] = ydr[c % 4], ys16[c] = ysr[c % 4];
            int8_t *pq = malloc((size_t)NB * 512);
            float *pd = malloc(sizeof(float) * NB * 16), *wd = malloc(sizeof(float) * NB * 4),
                  go[64];
            int32_t *ps = malloc(sizeof(int32_t) * NB * 16);
            unsigned char *wu = malloc((size_t)NB * 4 * 64);
            for (int k = 0; k < 2; k++)
                pl_cpu_gemm_pack(y16 + 8 * k, yd16 + 8 * k, ys16 + 8 * k, NB, pq + k * NB * 256,
                                 pd + k * NB * 8, ps + k * NB * 8);
            double t[2];
            for (int portable = 1; portable >= 0; portable--) {
                pl_cpu_portable = portable;
                double best = 1e9;
                for (int rep = 0; rep < 3; rep++) {
                    double t0 = now();
                    for (int r = 0; r < ROWS; r += 4) {
                        const unsigned char *wr[4];
                        for (int i = 0; i < 4; i++) wr[i] = w + (size_t)(r + i) * NB * bs;
                        pl_cpu_gemm_unpack(q4, 4, wr, NB, wu, wd);
                        pl_cpu_gemm_tile(q4, 2, wu, wd, NB, pq, pd, ps, go);
                        sink += go[0];
                    }
                    double dt = now() - t0;
                    best = dt < best ? dt : best;
                }
                t[portable] = best;
            }
            pl_cpu_portable = 0;
            double blocks = (double)ROWS * NB * 16;
            printf("%s GEMM 4x16: portable %.2f ns/block, dispatched %.2f ns/block (%.2fx)\n",
                   q4 ? "Q4_0" : "Q8_0", 1e9 * t[1] / blocks, 1e9 * t[0] / blocks, t[1] / t[0]);
            free(pq), free(pd), free(wd), free(ps), free(wu);
        }
        if (sink == 12345.0f) printf("%g\n", (double)sink);
        free(w), free(y);
    }
    return 0;
}
