/* cpu_qdot_wasm.c - wasm simd128 versions of cpu_qdot.c's act_q8 tiles (Q4_0 and Q8_0
 * weights against Q8_0 activations): the decode tile (8 weight rows x 1 activation row),
 * the batch tile (2 x 4) and the prefill GEMM tile (4 rows x 8 or 16 packed columns).
 *
 * wasm has no run-time CPU detection: a module either uses simd128 or fails to load, so the
 * choice is made when compiling (-msimd128 defines __wasm_simd128__; without it this file
 * is empty and cpu_qdot.c runs the portable code). pl_cpu_portable still selects the
 * portable paths, as it does on x86, so the tests compare both in one module.
 *
 * Bit-identical to the portable reference (row_scalar in cpu_qdot.c): each block's integer
 * dot is exact (weights and activations widened i8 -> i16, i32x4_dot_i16x8 adds products in
 * pairs into int32, and int32 additions in any order give the same sum: a block's is at most
 * 32 * 128 * 127 in size), and each output lane then does sum + ((float)dot * d_w) * d_x,
 * one IEEE operation at a time in the reference's order (wasm has no fused multiply-add). */
#include "cpu_internal.h"

#ifdef PL_QDOT_WASM
#include <wasm_simd128.h>

#include "format/quant.h"

static inline float half(const unsigned char *p) {
    uint16_t h;
    memcpy(&h, p, 2);
    return pl_f16_to_f32(h);
}

/* [sum(a), sum(b), sum(c), sum(d)] of four int32x4 (exact). */
static inline v128_t hsum4(v128_t a, v128_t b, v128_t c, v128_t d) {
    v128_t ab = wasm_i32x4_add(wasm_i32x4_shuffle(a, b, 0, 4, 1, 5),
                               wasm_i32x4_shuffle(a, b, 2, 6, 3, 7)); /* a02 b02 a13 b13 */
    v128_t cd =
        wasm_i32x4_add(wasm_i32x4_shuffle(c, d, 0, 4, 1, 5), wasm_i32x4_shuffle(c, d, 2, 6, 3, 7));
    return wasm_i32x4_add(wasm_i32x4_shuffle(ab, cd, 0, 1, 4, 5),
                          wasm_i32x4_shuffle(ab, cd, 2, 3, 6, 7));
}

/* A weight block's 32 values as four int16x8 in element order: Q4_0 the nibbles minus 8
 * (low nibbles are elements 0..15, high ones 16..31), Q8_0 the signed quants. */
static inline void weights16(int q4, const unsigned char *p, v128_t v[4]) {
    if (q4) {
        const v128_t q = wasm_v128_load(p + 2), lo = wasm_i8x16_splat(15),
                     eight = wasm_i8x16_splat(8);
        v128_t a = wasm_i8x16_sub(wasm_v128_and(q, lo), eight);
        v128_t b = wasm_i8x16_sub(wasm_u8x16_shr(q, 4), eight);
        v[0] = wasm_i16x8_extend_low_i8x16(a), v[1] = wasm_i16x8_extend_high_i8x16(a);
        v[2] = wasm_i16x8_extend_low_i8x16(b), v[3] = wasm_i16x8_extend_high_i8x16(b);
    } else {
        v128_t a = wasm_v128_load(p + 2), b = wasm_v128_load(p + 18);
        v[0] = wasm_i16x8_extend_low_i8x16(a), v[1] = wasm_i16x8_extend_high_i8x16(a);
        v[2] = wasm_i16x8_extend_low_i8x16(b), v[3] = wasm_i16x8_extend_high_i8x16(b);
    }
}

/* One block's dot as an int32x4 whose lanes add up to it. */
static inline v128_t dot4(const v128_t w[4], const v128_t y[4]) {
    return wasm_i32x4_add(
        wasm_i32x4_add(wasm_i32x4_dot_i16x8(w[0], y[0]), wasm_i32x4_dot_i16x8(w[1], y[1])),
        wasm_i32x4_add(wasm_i32x4_dot_i16x8(w[2], y[2]), wasm_i32x4_dot_i16x8(w[3], y[3])));
}

/* A tile of R weight rows x C activation rows (R * C == 8): lane k = r * C + c, as the x86
 * tile. Per block each weight block is widened once for its C columns and each activation
 * block once for its R rows. */
__attribute__((always_inline)) static inline void
tile(const int q4, const int R, const int C, const unsigned char *const w[],
     const int8_t *const y[], const float *const yd[], int64_t nb, float out[8]) {
    const int bs = q4 ? 18 : 34;
    v128_t acc[2] = {wasm_f32x4_splat(0), wasm_f32x4_splat(0)};
    for (int64_t b = 0; b < nb; b++) {
        v128_t yv[4][4], d[8];
        float dw[8], dx[8];
        for (int c = 0; c < C; c++) {
            v128_t a = wasm_v128_load(y[c] + b * 32), e = wasm_v128_load(y[c] + b * 32 + 16);
            yv[c][0] = wasm_i16x8_extend_low_i8x16(a), yv[c][1] = wasm_i16x8_extend_high_i8x16(a);
            yv[c][2] = wasm_i16x8_extend_low_i8x16(e), yv[c][3] = wasm_i16x8_extend_high_i8x16(e);
            dx[c] = yd[c][b];
        }
        for (int r = 0; r < R; r++) { /* a row's widened block is dead after its C dots */
            v128_t wv[4];
            weights16(q4, w[r] + b * bs, wv);
            dw[r] = half(w[r] + b * bs);
            for (int c = 0; c < C; c++) d[r * C + c] = dot4(wv, yv[c]);
        }
        for (int h = 0; h < 2; h++) { /* lanes 4h..4h+3 */
            v128_t s = hsum4(d[4 * h], d[4 * h + 1], d[4 * h + 2], d[4 * h + 3]);
            const int k = 4 * h;
            v128_t vw =
                wasm_f32x4_make(dw[k / C], dw[(k + 1) / C], dw[(k + 2) / C], dw[(k + 3) / C]);
            v128_t vx =
                wasm_f32x4_make(dx[k % C], dx[(k + 1) % C], dx[(k + 2) % C], dx[(k + 3) % C]);
            v128_t t = wasm_f32x4_mul(wasm_f32x4_mul(wasm_f32x4_convert_i32x4(s), vw), vx);
            acc[h] = wasm_f32x4_add(acc[h], t);
        }
    }
    wasm_v128_store(out, acc[0]);
    wasm_v128_store(out + 4, acc[1]);
}

/* The four instances: Q4_0 or Q8_0, 8 x 1 or 2 x 4. */
#define PL_TILE(name, q4, R, C)                                                                    \
    static void name(const unsigned char *const w[], const int8_t *const y[],                      \
                     const float *const yd[], int64_t nb, float out[8]) {                          \
        tile(q4, R, C, w, y, yd, nb, out);                                                         \
    }
PL_TILE(tile_q4_8x1, 1, 8, 1)
PL_TILE(tile_q4_2x4, 1, 2, 4)
PL_TILE(tile_q8_8x1, 0, 8, 1)
PL_TILE(tile_q8_2x4, 0, 2, 4)

void pl_cpu_qdot_tile_wasm(int q4, int nr, int nc, const unsigned char *const w[],
                           const int8_t *const y[], const float *const yd[], int64_t nb,
                           float *out) {
    /* the kernel's fixed shape, missing rows/columns standing in for the last ones */
    int R = nc == 1 ? 8 : 2, C = 8 / R;
    const unsigned char *wt[8];
    const int8_t *yt[4];
    const float *ydt[4];
    for (int r = 0; r < R; r++) wt[r] = w[r < nr ? r : nr - 1];
    for (int c = 0; c < C; c++) {
        int cc = c < nc ? c : nc - 1;
        yt[c] = y[cc], ydt[c] = yd[cc];
    }
    float o[8];
    if (nc == 1)
        (q4 ? tile_q4_8x1 : tile_q8_8x1)(wt, yt, ydt, nb, o);
    else
        (q4 ? tile_q4_2x4 : tile_q8_2x4)(wt, yt, ydt, nb, o);
    for (int r = 0; r < nr; r++)
        for (int c = 0; c < nc; c++) out[r * nc + c] = o[r * C + c];
}

/* The prefill GEMM tile on pl_cpu_gemm_pack's layout (block b of a group: [g][c][4], the
 * quants 4g..4g+3 of column c) and pl_cpu_gemm_unpack's (wu: Q4_0 nibbles 0..15, Q8_0 the
 * signed quants first). Per group g of four elements a weight row's four values, widened
 * and repeated ([w0..w3, w0..w3]), meet two columns' four quants in one i32x4_dot_i16x8:
 * lanes (2 per column) of pair sums, added up over the 8 groups and then in adjacent pairs. */
void pl_cpu_gemm_tile_wasm(int q4, int ng, const unsigned char *wu, const float *wd, int64_t nb,
                           const int8_t *q, const float *d, float *out) {
    const int wbs = q4 ? 32 : 64;
    const v128_t eight = wasm_i16x8_splat(8);
    for (int k = 0; k < ng; k++) {
        const int8_t *qk = q + k * nb * 256;
        const float *dk = d + k * nb * 8;
        v128_t acc[4][2];
        for (int r = 0; r < 4; r++) acc[r][0] = acc[r][1] = wasm_f32x4_splat(0);
        for (int64_t b = 0; b < nb; b++) {
            v128_t dot[4][4]; /* [row][column pair]: lanes c0 c0 c1 c1 of the pair */
            for (int r = 0; r < 4; r++)
                for (int p = 0; p < 4; p++) dot[r][p] = wasm_i32x4_splat(0);
            for (int g = 0; g < 8; g++) {
                const int8_t *qg = qk + b * 256 + g * 32;
                v128_t a = wasm_v128_load(qg), e = wasm_v128_load(qg + 16), yv[4];
                yv[0] = wasm_i16x8_extend_low_i8x16(a), yv[1] = wasm_i16x8_extend_high_i8x16(a);
                yv[2] = wasm_i16x8_extend_low_i8x16(e), yv[3] = wasm_i16x8_extend_high_i8x16(e);
                for (int r = 0; r < 4; r++) {
                    v128_t w4 = wasm_v128_load32_splat(wu + (b * 4 + r) * wbs + 4 * g);
                    v128_t wv = q4 ? wasm_i16x8_sub(wasm_u16x8_extend_low_u8x16(w4), eight)
                                   : wasm_i16x8_extend_low_i8x16(w4);
                    for (int p = 0; p < 4; p++)
                        dot[r][p] = wasm_i32x4_add(dot[r][p], wasm_i32x4_dot_i16x8(wv, yv[p]));
                }
            }
            v128_t dx[2] = {wasm_v128_load(dk + b * 8), wasm_v128_load(dk + b * 8 + 4)};
            for (int r = 0; r < 4; r++) {
                v128_t dw = wasm_f32x4_splat(wd[b * 4 + r]);
                for (int h = 0; h < 2; h++) { /* columns 4h..4h+3 */
                    v128_t x = dot[r][2 * h], z = dot[r][2 * h + 1];
                    v128_t s = wasm_i32x4_add(wasm_i32x4_shuffle(x, z, 0, 2, 4, 6),
                                              wasm_i32x4_shuffle(x, z, 1, 3, 5, 7));
                    v128_t t = wasm_f32x4_mul(wasm_f32x4_convert_i32x4(s), dw);
                    acc[r][h] = wasm_f32x4_add(acc[r][h], wasm_f32x4_mul(t, dx[h]));
                }
            }
        }
        for (int r = 0; r < 4; r++) {
            wasm_v128_store(out + (k * 4 + r) * 8, acc[r][0]);
            wasm_v128_store(out + (k * 4 + r) * 8 + 4, acc[r][1]);
        }
    }
}
#endif
