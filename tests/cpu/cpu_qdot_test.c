/* cpu_qdot_test.c - the act_q8 tiles (cpu_qdot.c, cpu_qdot_neon.c, cpu_qdot_wasm.c) and the
 * matmul built on them (cpu_matmul.c). The dispatched tile (8 weight rows x 1 activation
 * row, or 2 x 4: AVX2 where the CPU has it, with AVX-VNNI or without; NEON on arm64 with or
 * without SDOT; wasm simd128 in a -msimd128 build, see make wasm-test) is bit-identical to
 * the portable row dot on fresh random rows of every allowed tile shape, short tiles
 * included, extreme values included (nibbles 0 and 15, quants -128 and 127, activations
 * +-127); the portable dot equals the sum written out directly: each block's integer dot,
 * then (float)dot * d_w * d_x added in block order. pl_be_matmul with act_q8 on Q4_0/Q8_0
 * weights, on shapes that are not multiples of the tiles (rows, columns), with bias and
 * accumulate, on a 1- and a 3-thread backend, gives exactly the portable dot of each weight
 * row with each quantised activation row. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/cpu.h"
#include "cpu/cpu_internal.h"
#include "format/quant.h"
#include "cpu_matmul_run.h"
#include "test.h"

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint32_t rnd(void) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (uint32_t)(rng >> 11);
}

static float direct(int q4, const unsigned char *w, const int8_t *y, const float *yd, int nb) {
    float sum = 0;
    for (int b = 0; b < nb; b++) {
        const unsigned char *blk = w + b * (q4 ? 18 : 34);
        int32_t s = 0;
        for (int j = 0; j < 32; j++) {
            int wq =
                q4 ? (j < 16 ? (blk[2 + j] & 15) : (blk[2 + j - 16] >> 4)) - 8 : (int8_t)blk[2 + j];
            s += wq * y[b * 32 + j];
        }
        uint16_t dh;
        memcpy(&dh, blk, 2);
        sum += (float)s * pl_f16_to_f32(dh) * yd[b];
    }
    return sum;
}

/* Random weight blocks (scales in +-0.5; some blocks all nibbles 0 or 15 / quants -128) */
static void fill_weights(int q4, unsigned char *w, int nblocks, int iter) {
    int bs = q4 ? 18 : 34;
    for (int i = 0; i < nblocks * bs; i++) w[i] = (unsigned char)rnd();
    for (int b = 0; b < nblocks; b++) {
        uint16_t d = pl_f32_to_f16((float)(rnd() % 1000) / 1000.0f - 0.5f);
        memcpy(w + b * bs, &d, 2);
        if (iter % 5 == 0) memset(w + b * bs + 2, iter % 10 == 0 ? 0x00 : 0xff, (size_t)bs - 2);
        if (iter % 11 == 0 && !q4) memset(w + b * bs + 2, 0x80, 32); /* -128 */
    }
}

/* Activations as pl_quant_act_q8_0 makes them (-127..127), f16-exact scales, block sums. */
static void fill_acts(int8_t *y, float *yd, int32_t *ys, int nblocks, int iter) {
    for (int i = 0; i < nblocks * 32; i++)
        y[i] = (int8_t)(iter % 7 == 0 ? ((rnd() & 1) ? 127 : -127) : (int)(rnd() % 255) - 127);
    for (int b = 0; b < nblocks; b++) {
        yd[b] = pl_f16_to_f32(pl_f32_to_f16((float)(rnd() % 1000) / 50000.0f));
        ys[b] = 0;
        for (int j = 0; j < 32; j++) ys[b] += y[b * 32 + j];
    }
}

/* Random rows for the tile tests: nw contiguous weight rows of nb blocks and ny activation
 * rows (at most 16 each), and the row pointers the kernels take. */
typedef struct {
    unsigned char *w;
    int8_t *y;
    float *yd;
    int32_t *ys;
    const unsigned char *wr[16];
    const int8_t *yr[16];
    const float *ydr[16];
    const int32_t *ysr[16];
} rows;

static rows rows_new(int q4, int nb, int nw, int ny, int iter) {
    int bs = q4 ? 18 : 34;
    rows t = {.w = malloc((size_t)nw * nb * bs),
              .y = malloc((size_t)ny * nb * 32),
              .yd = malloc((size_t)ny * nb * sizeof(float)),
              .ys = malloc((size_t)ny * nb * sizeof(int32_t))};
    fill_weights(q4, t.w, nw * nb, iter);
    fill_acts(t.y, t.yd, t.ys, ny * nb, iter);
    for (int r = 0; r < nw; r++) t.wr[r] = t.w + (int64_t)r * nb * bs;
    for (int c = 0; c < ny; c++)
        t.yr[c] = t.y + c * nb * 32, t.ydr[c] = t.yd + c * nb, t.ysr[c] = t.ys + c * nb;
    return t;
}

static void rows_free(rows *t) {
    free(t->w), free(t->y), free(t->yd), free(t->ys);
}

static void test_tiles(void) {
    int bad_tile = 0, bad_direct = 0, cases = 0;
    for (int iter = 0; iter < 3000; iter++) {
        int q4 = iter & 1, nb = 1 + (int)(rnd() % 40);
        int nc = (iter >> 1) % 3 == 0 ? 1 : 1 + (int)(rnd() % 4);
        int nr = nc == 1 ? 1 + (int)(rnd() % 8) : 1 + (int)(rnd() % 2);
        /* 16 contiguous weight rows: the tile's, then the next tile's (prefetched) */
        rows t = rows_new(q4, nb, 16, 4, iter);
        const unsigned char *const *wr = t.wr;
        const int8_t *const *yr = t.yr;
        const float *const *ydr = t.ydr;
        float got[8], want[8];
        const unsigned char *pf = iter % 3 ? t.wr[nr] : NULL;
        pl_cpu_qdot_tile(q4, nr, nc, wr, yr, ydr, t.ysr, nb, pf, got);
        pl_cpu_qdot_tile_portable(q4, nr, nc, wr, yr, ydr, t.ysr, nb, want);
        for (int r = 0; r < nr; r++)
            for (int c = 0; c < nc; c++) {
                float p = pl_cpu_qdot_row_portable(q4, wr[r], yr[c], ydr[c], nb);
                float d = direct(q4, wr[r], yr[c], ydr[c], nb);
                bad_tile += memcmp(&got[r * nc + c], &p, sizeof p) != 0;
                bad_tile += memcmp(&want[r * nc + c], &p, sizeof p) != 0;
                bad_direct += memcmp(&p, &d, sizeof p) != 0;
                cases++;
            }
        rows_free(&t);
    }
    CHECK(bad_tile == 0, "tile vs portable row: %d of %d values differ", bad_tile, cases);
    CHECK(bad_direct == 0, "portable vs direct sum: %d of %d values differ", bad_direct, cases);
}

/* One pl_be_matmul (act_q8) of n_out x k weights of type on n rows, bias and accumulate
 * chosen by the caller, against the portable dot of each weight row and quantised row;
 * the 1- and 3-thread results must both match it bit for bit. */
static int matmul_case(pl_backend *bes[2], uint32_t type, int n_out, int k, int n, bool bias,
                       bool acc, int iter) {
    int q4 = type == PL_TYPE_Q4_0, nb = k / 32;
    int64_t row_bytes = pl_row_size(type, k);
    unsigned char *w = malloc((size_t)(row_bytes * n_out));
    fill_weights(q4, w, n_out * nb, iter);
    float *x, *bv, *o0, *got = malloc(sizeof(float) * (size_t)n * n_out);
    act_q8_inputs(rnd, n, k, n_out, &x, &bv, &o0);
    /* the reference: the activation rows quantised as the matmul does, the portable dot */
    int8_t *xq = malloc((size_t)n * k);
    uint16_t *xh = malloc(sizeof *xh * (size_t)n * nb);
    float *xd = malloc(sizeof *xd * (size_t)n * nb);
    for (int i = 0; i < n; i++)
        pl_quant_act_q8_0(x + (int64_t)i * k, k, xq + (int64_t)i * k, xh + (int64_t)i * nb);
    for (int i = 0; i < n * nb; i++) xd[i] = pl_f16_to_f32(xh[i]);
    int bad = 0;
    float *dot = malloc(sizeof(float) * (size_t)n * n_out);
    for (int i = 0; i < n; i++)
        for (int r = 0; r < n_out; r++)
            dot[i * n_out + r] = pl_cpu_qdot_row_portable(
                q4, w + r * row_bytes, xq + (int64_t)i * k, xd + (int64_t)i * nb, nb);
    for (int t = 0; t < 2; t++) {
        if (!act_q8_matmul(bes[t], type, k, n_out, n, w, x, bias ? bv : NULL, acc, o0, got))
            return 1;
        bad += act_q8_mismatches(n, n_out, dot, bias ? bv : NULL, acc, o0, got);
    }
    free(w), free(x), free(bv), free(o0), free(got), free(xq), free(xh), free(xd), free(dot);
    return bad;
}

static void test_matmul(void) {
    pl_backend *bes[2];
    if (!act_q8_backends(bes)) return;
    /* n: one row (the 8 x 1 tile), short and odd batches, past one 16-column chunk; rows
     * not a multiple of 8 or 2; large enough to be split between threads */
    static const int ns[] = {1, 2, 3, 5, 17, 35};
    int bad = 0, cases = 0;
    for (int iter = 0; iter < 24; iter++) {
        uint32_t type = iter & 1 ? PL_TYPE_Q4_0 : PL_TYPE_Q8_0;
        int n = ns[(iter / 2) % 6], n_out = 8 * (1 + (int)(rnd() % 12)) + (int)(rnd() % 8);
        int k = 32 * (1 + (int)(rnd() % 12));
        if (iter % 4 == 3) n_out = 101, k = 32 * 13; /* past the one-thread cutoff */
        bad += matmul_case(bes, type, n_out, k, n, iter % 3 != 0, iter % 4 == 1, iter);
        cases++;
    }
    CHECK(bad == 0, "matmul act_q8: %d values differ from the portable dot (%d cases)", bad, cases);
    pl_be_destroy(bes[0]), pl_be_destroy(bes[1]);
}

/* The GEMM tile (4 unpacked weight rows x 8 or 16 packed columns), AVX2 (AVX-512 VNNI,
 * AVX-VNNI), NEON or wasm simd128, and portable, against the portable row dot: every row
 * count 1..4 (missing rows repeat the
 * last), 1..9 blocks, extreme values included. */
static void test_gemm_tile(void) {
    int bad = 0, cases = 0;
    for (int iter = 0; iter < 1500; iter++) {
        int q4 = iter & 1, nb = 1 + (int)(rnd() % 9), nr = 1 + iter / 2 % 4;
        int ng = 1 + iter / 8 % 2;
        rows t = rows_new(q4, nb, 4, 16, iter);
        unsigned char *wu = malloc((size_t)nb * 4 * 64);
        int8_t *pq = malloc((size_t)nb * 512);
        float *wd = malloc((size_t)nb * 4 * sizeof *wd), *pd = malloc((size_t)nb * 16 * sizeof *pd);
        int32_t *ps = malloc((size_t)nb * 16 * sizeof *ps);
        const unsigned char *const *wr = t.wr;
        const int8_t *const *yr = t.yr;
        const float *const *ydr = t.ydr;
        const int32_t *const *ysr = t.ysr;
        for (int k = 0; k < 2; k++) /* two groups, one after the other */
            pl_cpu_gemm_pack(yr + 8 * k, ydr + 8 * k, ysr + 8 * k, nb, pq + k * nb * 256,
                             pd + k * nb * 8, ps + k * nb * 8);
        for (int portable = 0; portable < 2; portable++) {
            pl_cpu_portable = portable;
            float got[64];
            pl_cpu_gemm_unpack(q4, nr, wr, nb, wu, wd);
            pl_cpu_gemm_tile(q4, ng, wu, wd, nb, pq, pd, ps, got);
            for (int k = 0; k < ng; k++)
                for (int r = 0; r < 4; r++)
                    for (int c = 0; c < 8; c++) {
                        int cc = 8 * k + c;
                        float p = pl_cpu_qdot_row_portable(q4, wr[r < nr ? r : nr - 1], yr[cc],
                                                           ydr[cc], nb);
                        bad += memcmp(&got[(k * 4 + r) * 8 + c], &p, sizeof p) != 0;
                        cases++;
                    }
        }
        pl_cpu_portable = 0;
        rows_free(&t);
        free(wu), free(pq), free(wd), free(pd), free(ps);
    }
    CHECK(bad == 0, "GEMM tile vs portable row: %d of %d values differ", bad, cases);
}

/* pl_cpu_quant_act gives pl_quant_act_q8_0's bits (quants, scales) and the block sums:
 * random blocks at scales from denormal to 1e30, blocks whose quants fall on .5 exactly
 * (max 127, so the scale is 1) and just below, zero blocks, NaN and infinities. */
static void test_quant_act(void) {
    int bad = 0, blocks = 0;
    float x[32 * 8];
    for (int iter = 0; iter < 2000; iter++) {
        static const float scales[] = {1e-42f, 1e-30f, 1e-3f, 1.0f, 3e4f, 1e30f};
        for (int i = 0; i < 32 * 8; i++) {
            float v = ((float)(rnd() % 200001) / 100000.0f - 1.0f) * scales[iter % 6];
            x[i] = v;
        }
        int b = iter % 8, kind = (iter / 8) % 6;
        float *blk = x + 32 * b;
        if (kind == 1) /* max 127: quants exactly k + 0.5, and just below 0.5 */
            for (int i = 0; i < 32; i++)
                blk[i] =
                    i == 0 ? 127.0f
                           : (i % 3 == 0 ? 0.49999997f : (float)((int)(rnd() % 253) - 126) + 0.5f);
        if (kind == 2) memset(blk, 0, sizeof(float) * 32);
        if (kind == 3) blk[rnd() % 32] = NAN;
        if (kind == 4) blk[rnd() % 32] = (rnd() & 1) ? INFINITY : -INFINITY;
        int8_t q0[256], q1[256];
        uint16_t h0[8];
        float d1[8];
        int32_t s1[8];
        pl_quant_act_q8_0(x, 256, q0, h0);
        pl_cpu_quant_act(x, 256, q1, d1, s1);
        for (int k = 0; k < 8; k++) {
            int32_t sum = 0;
            for (int i = 0; i < 32; i++) sum += q0[32 * k + i];
            float d0 = pl_f16_to_f32(h0[k]);
            bad += memcmp(q0 + 32 * k, q1 + 32 * k, 32) != 0 || memcmp(&d0, &d1[k], 4) != 0 ||
                   sum != s1[k];
            blocks++;
        }
    }
    CHECK(bad == 0, "quant_act vs pl_quant_act_q8_0: %d of %d blocks differ", bad, blocks);
}

/* The GEMM through pl_be_matmul: every batch size 1..33 (the tiles below 8, the GEMM from 8
 * with a padded last group), and batches past one item's column range (GEMM_GROUPS x 8
 * columns on the 3-thread backend, act_q8_backends) split in 2-D between 3 threads. */
static void test_gemm_matmul(void) {
    pl_backend *bes[2];
    if (!act_q8_backends(bes)) return;
    int bad = 0, cases = 0;
    for (int n = 1; n <= 33; n++, cases++) {
        uint32_t type = n & 1 ? PL_TYPE_Q4_0 : PL_TYPE_Q8_0;
        int n_out = 1 + (int)(rnd() % 23), k = 32 * (1 + (int)(rnd() % 4));
        bad += matmul_case(bes, type, n_out, k, n, n % 3 == 0, n % 4 == 1, n);
    }
    static const int big[][3] = {{130, 101, 13}, {200, 67, 3}, {65, 9, 40}};
    for (int i = 0; i < 6; i++, cases++)
        bad += matmul_case(bes, i & 1 ? PL_TYPE_Q4_0 : PL_TYPE_Q8_0, big[i / 2][1],
                           32 * big[i / 2][2], big[i / 2][0], i % 3 == 0, i % 2 == 0, i);
    CHECK(bad == 0, "GEMM matmul: %d values differ from the portable dot (%d cases)", bad, cases);
    pl_be_destroy(bes[0]), pl_be_destroy(bes[1]);
}

/* Q4_0 and Q8_0 interleaved 8 rows to a group (cpu_x8.c): packing and unpacking give the
 * rows back byte for byte (the whole group, and block by block); the group's tile
 * (dispatched: AVX2 with or without AVX-VNNI, else portable) and its portable reference
 * against the portable row dot of each GGUF row, nc 1..4, bit for bit, extreme values
 * included (nibbles 0 and 15, quants -128 and 127); the GEMM's unpack of each half-group
 * (AVX2, and portable) equals pl_cpu_gemm_unpack's of its 4 GGUF rows. */
static void test_x8_kernels(void) {
    int bad_pack = 0, bad_tile = 0, bad_unpack = 0, cases = 0;
    for (int iter = 0; iter < 2400; iter++) {
        int q4 = iter & 1, bs = q4 ? 18 : 34, wbs = q4 ? 32 : 64;
        int nb = 1 + (int)(rnd() % 40), nc = 1 + iter / 2 % 4;
        rows t = rows_new(q4, nb, 8, 4, iter);
        size_t bytes = (size_t)nb * bs * 8;
        unsigned char *g = malloc(bytes), *back = malloc(bytes);
        pl_x8_pack_group(q4, t.w, nb, g);
        pl_x8_unpack_group(q4, g, nb, back);
        bad_pack += memcmp(back, t.w, bytes) != 0;
        for (int k = 0; k < 4; k++) {
            int lane = (int)(rnd() % 8), b = (int)(rnd() % (unsigned)nb);
            unsigned char blk[34];
            pl_x8_block(q4, g, lane, b, blk);
            bad_pack += memcmp(blk, t.wr[lane] + b * bs, (size_t)bs) != 0;
        }
        float got[32], ref[32];
        pl_x8_tile(q4, g, nc, t.yr, t.ydr, t.ysr, nb, got);
        pl_x8_tile_portable(q4, g, nc, t.yr, t.ydr, nb, ref);
        for (int r = 0; r < 8; r++)
            for (int c = 0; c < nc; c++, cases++) {
                float p = pl_cpu_qdot_row_portable(q4, t.wr[r], t.yr[c], t.ydr[c], nb);
                bad_tile += memcmp(&got[r * nc + c], &p, 4) != 0;
                bad_tile += memcmp(&ref[r * nc + c], &p, 4) != 0;
            }
        size_t ub = (size_t)nb * 4 * wbs;
        unsigned char *wu0 = malloc(ub), *wu1 = malloc(ub);
        float *wd0 = malloc(sizeof(float) * (size_t)nb * 4),
              *wd1 = malloc(sizeof(float) * (size_t)nb * 4);
        for (int h = 0; h < 4; h++) { /* halves 0, 1, then again on the portable paths */
            pl_cpu_portable = h >= 2;
            pl_cpu_gemm_unpack(q4, 4, t.wr + 4 * (h % 2), nb, wu0, wd0);
            pl_x8_gemm_unpack(q4, g, h % 2, nb, wu1, wd1);
            bad_unpack +=
                memcmp(wu0, wu1, ub) != 0 || memcmp(wd0, wd1, sizeof(float) * (size_t)nb * 4) != 0;
        }
        pl_cpu_portable = 0;
        free(wu0), free(wu1), free(wd0), free(wd1), free(g), free(back);
        rows_free(&t);
    }
    CHECK(bad_pack == 0, "x8 pack/unpack: %d mismatches", bad_pack);
    CHECK(bad_tile == 0, "x8 tile vs portable row: %d of %d values differ", bad_tile, cases);
    CHECK(bad_unpack == 0, "x8 GEMM unpack vs GGUF rows: %d mismatches", bad_unpack);
}

/* A Q4_0 or Q8_0 weight copied into the backend's memory lies interleaved where the CPU has AVX2
 * (interleave 0) and never with interleave -1: its whole groups (not the tail rows
 * past them) are, it reads back as the file's bytes (whole, and an odd piece), and matmuls
 * over it and matmul_id over experts whose rows start inside a group (the rows outside
 * whole groups rebuilt) give the portable dot of each row, for decode, a short batch and
 * the GEMM. */
static void test_x8_weights(void) {
    for (int it = 0; it < 4; it++) { /* interleave 0, then -1; Q4_0, then Q8_0 */
        int mode = it < 2 ? 0 : -1, q4 = !(it & 1);
        uint32_t type = q4 ? PL_TYPE_Q4_0 : PL_TYPE_Q8_0;
        pl_backend *be = NULL;
        pl_cpu_opts o = {.n_threads = 2, .anon_weights = 1, .interleave = mode};
        CHECK(pl_cpu_new_with(&o, &be) == PL_OK, "%s", pl_last_error());
        if (!be) return;
        int n_out = 75, k = 32 * 7 /* 9 groups and 3 rows; 3 experts of 25 rows */, nb = k / 32;
        int64_t row_bytes = pl_row_size(type, k);
        unsigned char *w = malloc((size_t)(row_bytes * n_out)),
                      *back = malloc((size_t)(row_bytes * n_out));
        fill_weights(q4, w, n_out * nb, 3);
        pl_buf *bw = NULL;
        CHECK(pl_be_buf_weight(be, type, k, n_out, w, &bw) == PL_OK, "%s", pl_last_error());
        if (!bw) break;
        int64_t want = mode == 0 && pl_x8_available() ? n_out / 8 * 8 : 0;
        CHECK(((cpu_buf *)bw)->x8_rows == want,
              "interleave %d, q4 %d: %lld rows interleaved, want %lld", mode, q4,
              (long long)((cpu_buf *)bw)->x8_rows, (long long)want);
        CHECK(pl_be_read(bw, 0, back, row_bytes * n_out) == PL_OK &&
                  !memcmp(back, w, (size_t)(row_bytes * n_out)),
              "interleave %d: the weight does not read back as written", mode);
        /* an odd piece read back: from inside row 9's third block to inside row 12 */
        int64_t off = 9 * row_bytes + 2 * (q4 ? 18 : 34) + 5, len = 3 * row_bytes + 7;
        CHECK(pl_be_read(bw, off, back, len) == PL_OK && !memcmp(back, w + off, (size_t)len),
              "interleave %d: a piece of the weight does not read back", mode);
        /* the whole weight, then three experts of 25 rows (matmul_id's views start at rows
         * 0, 25, 50: inside groups, ending inside others), every token routed to one */
        static const int ns[] = {1, 5, 17};
        int bad = 0;
        for (int v = 0; v < 4; v++)
            for (int in = 0; in < 3; in++) {
                int n_exp = v == 0 ? 1 : 3, rows = v == 0 ? n_out : 25, e = v == 0 ? 0 : v - 1;
                int n = ns[in];
                pl_buf *bx = NULL, *bo = NULL, *bi = NULL;
                float *x, *bv, *o0, *got = malloc(sizeof(float) * (size_t)n * rows);
                int32_t ids[17];
                for (int i = 0; i < n; i++) ids[i] = e;
                act_q8_inputs(rnd, n, k, rows, &x, &bv, &o0);
                pl_be_buf_new(be, PL_TYPE_F32, k, n, &bx);
                pl_be_buf_new(be, PL_TYPE_F32, rows, n, &bo);
                pl_be_buf_new(be, PL_TYPE_I32, n, 1, &bi);
                pl_be_write(bx, 0, x, (int64_t)n * k * 4);
                pl_be_write(bi, 0, ids, (int64_t)n * 4);
                be->act_q8 = 1;
                pl_status st = v == 0 ? pl_be_matmul(bw, bx, NULL, n, false, bo)
                                      : pl_be_matmul_id(bw, n_exp, bx, bi, n, 1, true, bo);
                CHECK(st == PL_OK, "%s", pl_last_error());
                be->act_q8 = 0;
                pl_be_read(bo, 0, got, (int64_t)n * rows * 4);
                int8_t *xq = malloc((size_t)k);
                uint16_t xh[64];
                float xd[64];
                for (int i = 0; i < n; i++) {
                    pl_quant_act_q8_0(x + (int64_t)i * k, k, xq, xh);
                    for (int b = 0; b < nb; b++) xd[b] = pl_f16_to_f32(xh[b]);
                    for (int r = 0; r < rows; r++) {
                        const unsigned char *wr = w + (int64_t)(e * 25 + r) * row_bytes;
                        float p = pl_cpu_qdot_row_portable(q4, wr, xq, xd, nb);
                        bad += memcmp(&p, &got[i * rows + r], 4) != 0;
                    }
                }
                free(xq), free(x), free(bv), free(o0), free(got);
                pl_be_buf_free(bi), pl_be_buf_free(bx), pl_be_buf_free(bo);
            }
        CHECK(bad == 0, "interleave %d: %d matmul values over views differ from the portable dot",
              mode, bad);
        pl_be_buf_free(bw);
        free(w), free(back);
        pl_be_destroy(be);
    }
    pl_backend *be = NULL;
    pl_cpu_opts bad_opt = {.interleave = 1};
    CHECK(pl_cpu_new_with(&bad_opt, &be) != PL_OK && strstr(pl_last_error(), "interleave"),
          "interleave 1 accepted");
}

/* Which kernels the dispatch takes here, checked against POOLED_EXPECT_NEON where the
 * cross run (tests/qemu_run.sh) sets it: 2 under a CPU model with the dot product, 1
 * without, so each arm64 run is known to test the kernels it means to. */
static void test_neon_level(void) {
    const char *want = getenv("POOLED_EXPECT_NEON");
    printf("dispatch: avx2 %d, neon level %d\n", pl_cpu_have_avx2(), pl_cpu_neon_level());
    if (want)
        CHECK(pl_cpu_neon_level() == atoi(want), "NEON level %d, expected %s", pl_cpu_neon_level(),
              want);
}

static void run_tests(void) {
    test_neon_level();
    /* the SIMD kernels once per level the CPU has: AVX-512 VNNI (the GEMM's 16-column
     * tiles), AVX-VNNI (vpdpbusd on 256 bits), plain AVX2 (elsewhere: one pass) */
    for (int pass = simd_first_pass(); pass < 3; pass++) {
        simd_pass(pass);
        test_tiles();
        test_matmul();
        test_gemm_tile();
        test_gemm_matmul();
        test_x8_kernels();
        test_x8_weights();
    }
    pl_cpu_no_vnni = pl_cpu_no_avx512 = 0;
    test_quant_act();
}
