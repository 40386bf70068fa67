/* gpu_gemm_test.c - prefill's q8x GEMM and its Q8_0 pre-pass (wgsl_gemm.c) on the machine's
 * adapter, with fresh random inputs and NaN-poisoned outputs:
 * - the pre-pass gives exactly the quants and scales of the CPU's pl_quant_act_q8_0, and
 *   with the norm, exactly those of the normalised x it also stores;
 * - the GEMM (Q4_0, Q8_0; plain with bias, accumulate, gate/up with its side outputs, the
 *   q/k/v split, the norm through the pre-pass) matches the q8x reference (kernel_ref.c)
 *   for n = 17, 33, 100 columns (not multiples of the tile) and K = 160 (5 blocks: not a
 *   multiple of the 4-block step), 70 rows (not a multiple of the tile's 64);
 * - a column's bits do not depend on the batch: column j of one GEMM equals, bit for bit,
 *   the same column at another place of a batch of another size, another tile shape and
 *   another kernel version (v1-v4: Q4_0 unpacked at each use or once when staged, the
 *   sums converted to f32 or through the exponent trick);
 * - the q8x GEMV reading the pre-pass's blocks (xpre, decode's option) gives the bits of
 *   the q8x GEMV that quantises x itself;
 * - versions 5-7 on subgroup matrices (where the device offers them: not lavapipe): v5 the
 *   bits of v3, v7 the reference within f16 rounding; everywhere, with the builtins
 *   emulated in plain WGSL: v5 and v6 the bits of the others (fixed order), v7 the
 *   reference; their parameter checks, the configuration the GEMM picks and the backend's
 *   POOLED_GPU_SMX choice. */
#include "test.h"

#include "gpu/gpu.h"
#include "gpu/gpu_internal.h"
#include "gpu/kernel_ref.h"
#include "gpu/wgsl_gen.h"
#include "gpu_test_util.h"

#include "gpu_mat_util.h"

#define ROWS 70
#define COLS 160
#define NB   (COLS / 32)

/* Tiles: the software adapter's (2 blocks per step: K's 5 blocks end in a half step) for
 * every case, and the GPU's (64 x 64, 4 x 4 per thread, 4 blocks per step) for the
 * fixed-order check. Each kernel costs lavapipe seconds to compile: few variants. */
static const pl_gemm_params tile_a = {.tm = 16, .tn = 16, .rm = 2, .rn = 2, .bk = 2, .version = 4};
static const pl_gemm_params tile_b = {.tm = 64, .tn = 64, .rm = 4, .rn = 4, .bk = 4, .version = 3};
static const pl_gemm_params tile_gu_small = {
    .tm = 32, .tn = 64, .rm = 2, .rn = 4, .bk = 4, .version = 3};
/* the other kernel versions (wgsl_gen.h): the same bits as v4 */
static const pl_gemm_params tile_v1 = {.tm = 32, .tn = 16, .rm = 4, .rn = 2, .bk = 4, .version = 1};
static const pl_gemm_params tile_v2 = {.tm = 16, .tn = 32, .rm = 2, .rn = 4, .bk = 2, .version = 2};
/* the double-buffered versions: v8 (Q4_0 unpacked when staged) with every thread holding
 * whole shares, v9 (packed) with shares past the pieces' counts (guarded), v10 (v8 with
 * each 32 invocations on 8 columns x 4 rows of the 8 x 8 thread grid); K's 5 blocks end
 * in a half step */
static const pl_gemm_params tile_v8 = {.tm = 32, .tn = 16, .rm = 4, .rn = 2, .bk = 2, .version = 8};
static const pl_gemm_params tile_v9 = {.tm = 16, .tn = 32, .rm = 2, .rn = 4, .bk = 2, .version = 9};
static const pl_gemm_params tile_v10 = {
    .tm = 32, .tn = 16, .rm = 4, .rn = 2, .bk = 2, .version = 10};
/* the tiles real GPUs take for few columns (pl_gpu_gemm_base: 17-32 and 33-192 columns, and
 * gate/up past that) */
static const pl_gemm_params tile_few = {
    .tm = 32, .tn = 16, .rm = 2, .rn = 2, .bk = 4, .version = 10};
static const pl_gemm_params tile_few_gu = {
    .tm = 32, .tn = 32, .rm = 2, .rn = 2, .bk = 2, .version = 10};
static const pl_gemm_params tile_mid = {
    .tm = 32, .tn = 64, .rm = 2, .rn = 4, .bk = 2, .version = 10};
/* versions 5-7 with the subgroup-matrix builtins emulated (.mock): 8 x 8 matrices (K 8, or
 * 16 bytes for v6), 8 subgroups of 32 with 2 tiles each */
static const pl_gemm_params tile_m5 = {.tm = 32,
                                       .tn = 32,
                                       .rm = 2,
                                       .rn = 2,
                                       .bk = 1,
                                       .version = 5,
                                       .sm = 8,
                                       .sn = 8,
                                       .sk = 8,
                                       .sg = 32,
                                       .mock = 1};
static const pl_gemm_params tile_m6 = {.tm = 32,
                                       .tn = 32,
                                       .rm = 2,
                                       .rn = 2,
                                       .bk = 2,
                                       .version = 6,
                                       .sm = 8,
                                       .sn = 8,
                                       .sk = 16,
                                       .sg = 32,
                                       .mock = 1};
static const pl_gemm_params tile_m7 = {.tm = 32,
                                       .tn = 32,
                                       .rm = 2,
                                       .rn = 2,
                                       .bk = 2,
                                       .version = 7,
                                       .sm = 8,
                                       .sn = 8,
                                       .sk = 8,
                                       .sg = 32,
                                       .mock = 1};

static pl_gpu_ref whole(pl_gpu_buf *b) {
    return (pl_gpu_ref){b, 0, 0};
}

/* Pre-pass of n columns of x (with nw: normalised, xn gets the normalised x). */
static void prepass(pl_gpu *g, uint32_t n, const float *x, const float *nw, pl_gpu_buf **xq,
                    pl_gpu_buf **xd, pl_gpu_buf **xn) {
    pl_q8pre_params pp = {.threads = 64, .norm = nw != NULL, .norm_out = nw != NULL, .eps = 1e-5f};
    pl_gpu_buf *xb = gt_buf(g, x, (size_t)n * COLS * 4), *nb = NULL, *args;
    *xq = gt_buf(g, NULL, (size_t)n * NB * 32);
    *xd = gt_buf(g, NULL, (size_t)n * NB * 4);
    pl_gpu_ref refs[6];
    int k = 0;
    refs[k++] = whole(xb), refs[k++] = whole(*xq), refs[k++] = whole(*xd);
    if (nw) {
        nb = gt_buf(g, nw, COLS * 4), refs[k++] = whole(nb);
        *xn = gt_buf(g, NULL, (size_t)n * COLS * 4), refs[k++] = whole(*xn);
    }
    pl_gpu_args a = {{n, COLS}};
    args = gt_args(g, &a), refs[k++] = whole(args);
    char *src = NULL;
    pl_gpu_kernel *kk = gt_kernel(g, pl_wgsl_q8pre(&pp, &src), &src, "q8pre");
    gt_run(g, kk, refs, k, n);
    pl_gpu_kernel_free(kk);
    pl_gpu_buf_free(xb), pl_gpu_buf_free(nb), pl_gpu_buf_free(args);
}

/* The pre-pass against pl_quant_act_q8_0, bit for bit. */
static void test_prepass(pl_gpu *g) {
    uint32_t n = 17;
    float *x = malloc((size_t)n * COLS * 4), *nw = malloc(COLS * 4), *xn = malloc(n * COLS * 4);
    gt_fill(x, (size_t)n * COLS, -3, 3);
    gt_fill(nw, COLS, 0.5f, 1.5f);
    memset(x + 32, 0, 32 * 4); /* an all-zero block: scale 0 */
    for (int j = 0; j < 32; j++) x[3 * COLS + 64 + j] = (float)(j - 16) * 0.25f; /* ties */
    /* found on lavapipe: 1 / (max / 127) one ulp off made x * (1 / d) 70.5, not 70.49998 */
    for (int j = 0; j < 32; j++) x[5 * COLS + 32 + j] = (float)j / 64.0f;
    x[5 * COLS + 32] = 0x1.e842cap+0f, x[5 * COLS + 33] = 0x1.0f0adep+0f;
    for (int norm = 0; norm < 2; norm++) {
        pl_gpu_buf *xq, *xd, *xnb = NULL;
        prepass(g, n, x, norm ? nw : NULL, &xq, &xd, &xnb);
        int8_t *q = malloc((size_t)n * COLS), *want = malloc((size_t)n * COLS);
        float *d = malloc((size_t)n * NB * 4);
        uint16_t *wd = malloc((size_t)n * NB * 2);
        gt_read(g, xq, q, (size_t)n * COLS);
        gt_read(g, xd, d, (size_t)n * NB * 4);
        const float *src = x;
        if (norm) { /* quantised: exactly the normalised x it stored, close to the CPU's */
            gt_read(g, xnb, xn, (size_t)n * COLS * 4);
            float *xr = malloc((size_t)n * COLS * 4);
            pl_rmsnorm_params np = {COLS, 32, 1e-5f, 0, 0};
            pl_gpu_ref_rmsnorm(&np, n, x, nw, xr);
            int bad = 0;
            for (size_t i = 0; i < (size_t)n * COLS; i++)
                bad += !(fabsf(xn[i] - xr[i]) <= 2e-6f * (fabsf(xr[i]) + 1e-3f));
            CHECK(bad == 0, "pre-pass normalised x: %d of %u off", bad, n * COLS);
            free(xr);
            src = xn;
        }
        for (uint32_t c = 0; c < n; c++)
            pl_quant_act_q8_0(src + (size_t)c * COLS, COLS, want + (size_t)c * COLS,
                              wd + (size_t)c * NB);
        CHECK(!memcmp(q, want, (size_t)n * COLS), "pre-pass quants (norm %d) differ", norm);
        int bad = 0;
        for (uint32_t i = 0; i < n * NB; i++) bad += d[i] != pl_f16_to_f32(wd[i]);
        CHECK(bad == 0, "pre-pass scales (norm %d): %d differ", norm, bad);
        free(q), free(want), free(d), free(wd);
        pl_gpu_buf_free(xq), pl_gpu_buf_free(xd), pl_gpu_buf_free(xnb);
    }
    free(x), free(nw), free(xn);
}

/* Outputs of one GEMM read back: y gathered into whole rows [n][ROWS], side outputs. */
typedef struct {
    float *y, *go, *uo;
} outs;

/* The GEMM p over the pre-quantised columns xq/xd with the matrices m (y0: the starting y
 * of ACCUM). */
static outs gemm_run(pl_gpu *g, const pl_gemm_params *p, pl_gpu_buf *xq, pl_gpu_buf *xd,
                     const mat *m, uint32_t n, const float *y0, const float *bias) {
    size_t ny = (size_t)n * p->rows;
    outs o = {calloc(ny, 4), p->gate_out ? calloc(ny, 4) : NULL, p->up_out ? calloc(ny, 4) : NULL};
    pl_gpu_buf *bufs[16] = {0};
    pl_gpu_ref refs[16];
    int k = 0;
    refs[k++] = whole(xq), refs[k++] = whole(xd);
    /* the output ranges: [0, split[0]) in y, then y1, y2 (and y3 with split[2]) */
    int parts = p->split[2] ? 4 : p->split[0] ? 3 : 1;
    uint32_t offs[5] = {0, p->split[0], p->split[1], p->split[2], 0}, lens[4];
    offs[parts] = p->rows;
    for (int s = 0; s < parts; s++) lens[s] = offs[s + 1] - offs[s];
    int iy = k;
    bufs[k] = gt_buf(g, y0, (size_t)n * lens[0] * 4), refs[k] = whole(bufs[k]), k++;
    for (unsigned i = 0; i < (p->mode == PL_GEMV_GATE_UP ? 2u : 1u); i++) {
        pl_gpu_ref_mat rm;
        pl_gpu_buf *qb, *sb;
        upload_part(g, &m[i], 0, p->rows, &qb, &sb, &rm, 0);
        bufs[k] = qb, refs[k] = whole(qb), k++;
        bufs[k] = sb, refs[k] = whole(sb), k++;
    }
    if (p->bias) bufs[k] = gt_buf(g, bias, p->rows * 4), refs[k] = whole(bufs[k]), k++;
    int igo = k;
    if (p->gate_out) bufs[k] = gt_buf(g, NULL, ny * 4), refs[k] = whole(bufs[k]), k++;
    int iuo = k;
    if (p->up_out) bufs[k] = gt_buf(g, NULL, ny * 4), refs[k] = whole(bufs[k]), k++;
    int iy1 = k;
    for (int s = 1; s < parts; s++)
        bufs[k] = gt_buf(g, NULL, (size_t)n * lens[s] * 4), refs[k] = whole(bufs[k]), k++;
    pl_gpu_args a = pl_gemm_args(p, n);
    bufs[k] = gt_args(g, &a), refs[k] = whole(bufs[k]), k++;
    CHECK(k == pl_gemm_bindings(p), "binding count %d != %d", k, pl_gemm_bindings(p));
    CHECK(pl_gemm_check_shape(p) == PL_OK, "GEMM shape: %s", pl_last_error());
    pl_gemm_params key = pl_gemm_kernel_key(p);
    char *src = NULL;
    pl_gpu_kernel *kk = gt_kernel(g, pl_wgsl_gemm(&key, &src), &src, "gemm");
    if (kk && gt_run(g, kk, refs, k, pl_gemm_groups(p, n))) {
        for (int s = 0; s < parts; s++) {
            float *part = malloc((size_t)n * lens[s] * 4);
            gt_read(g, bufs[s ? iy1 + s - 1 : iy], part, (size_t)n * lens[s] * 4);
            for (uint32_t v = 0; v < n; v++)
                memcpy(o.y + (size_t)v * p->rows + offs[s], part + (size_t)v * lens[s],
                       lens[s] * 4);
            free(part);
        }
        if (p->gate_out) gt_read(g, bufs[igo], o.go, ny * 4);
        if (p->up_out) gt_read(g, bufs[iuo], o.uo, ny * 4);
    }
    pl_gpu_kernel_free(kk);
    for (int i = 0; i < k; i++) pl_gpu_buf_free(bufs[i]);
    return o;
}

static void free_outs(outs *o) {
    free(o->y), free(o->go), free(o->uo);
}

/* got within rel * mag of want, everywhere. */
static int near(const float *got, const float *want, const double *mag, size_t n, double rel) {
    int bad = 0;
    for (size_t i = 0; i < n; i++)
        bad += !(fabs((double)got[i] - want[i]) <= rel * mag[i] + 1e-6 * fabs(want[i]) + 1e-30);
    return bad;
}

/* One GEMM case against the q8x reference. The GPU quantises x exactly as the reference
 * (test_prepass), so only the float sums' order differs: 1e-5 of the sum of the terms'
 * magnitudes. With the norm, the reference quantises the GPU's normalised x (the CPU's 1/rms
 * may differ in the last bit, now and then flipping a quant: 2e-3 would be needed, and
 * with few blocks even that was exceeded once in three runs). */
static void gemm_case(pl_gpu *g, const pl_gemm_params *tile, pl_gpu_wtype t, pl_gemv_mode mode,
                      int norm, int bias, int split, uint32_t n) {
    pl_gemm_params p = *tile;
    p.type = t, p.rows = ROWS, p.cols = COLS, p.mode = mode, p.bias = bias;
    p.gate_out = p.up_out = mode == PL_GEMV_GATE_UP;
    if (split) p.split[0] = 24, p.split[1] = 45;
    if (split == 2) p.split[2] = 57; /* a fourth projection (DeltaNet's alpha, the gate) */
    size_t nx = (size_t)n * COLS, ny = (size_t)n * ROWS;
    mat m[2] = {make_mat(t, ROWS, COLS), make_mat(t, ROWS, COLS)};
    float *x = malloc(nx * 4), *nw = malloc(COLS * 4), *b = malloc(ROWS * 4), *y0 = malloc(ny * 4);
    gt_fill(x, nx, -1, 1), gt_fill(nw, COLS, 0.5f, 1.5f), gt_fill(b, ROWS, -1, 1);
    gt_fill(y0, ny, -2, 2);
    pl_gpu_buf *xq, *xd, *xn = NULL;
    prepass(g, n, x, norm ? nw : NULL, &xq, &xd, &xn);
    outs o = gemm_run(g, &p, xq, xd, m, n, mode == PL_GEMV_ACCUM ? y0 : NULL, b);
    /* with the norm, the reference starts from the normalised x the pre-pass stored
     * (test_prepass checks it against the CPU's and its quantisation bit for bit) */
    if (norm) gt_read(g, xn, x, nx * 4);
    /* the reference: each matrix alone (STORE), then the mode's combination */
    pl_gemv_params rp = {
        .type = t, .rows = ROWS, .cols = COLS, .mode = PL_GEMV_STORE, .bias = bias, .q8x = 1};
    pl_gpu_ref_mat rm[2];
    for (int i = 0; i < 2; i++) rm[i] = (pl_gpu_ref_mat){{m[i].q}, {m[i].s}};
    float *r0 = malloc(ny * 4), *r1 = malloc(ny * 4), *want = malloc(ny * 4);
    double *m0 = malloc(ny * 8), *m1 = malloc(ny * 8), *mw = malloc(ny * 8);
    pl_gpu_ref_gemv(&rp, &rm[0], n, x, nw, b, r0, m0);
    pl_gpu_ref_gemv(&rp, &rm[1], n, x, nw, b, r1, m1);
    for (size_t i = 0; i < ny; i++) {
        want[i] = r0[i], mw[i] = m0[i];
        if (mode == PL_GEMV_ACCUM) want[i] += y0[i], mw[i] += fabs(y0[i]);
        if (mode == PL_GEMV_GATE_UP) {
            double sg = r0[i] / (1 + exp(-(double)r0[i]));
            want[i] = (float)(sg * r1[i]);
            mw[i] = 1.1 * m0[i] * fabs(r1[i]) + m1[i] * fabs(sg);
        }
    }
    double rel = 1e-5;
    char label[96];
    snprintf(label, sizeof label, "gemm type %d mode %d norm %d bias %d split %d n %u", t, mode,
             norm, bias, split, n);
    CHECK(near(o.y, want, mw, ny, rel) == 0, "%s: y off", label);
    if (o.go) CHECK(near(o.go, r0, m0, ny, rel) == 0, "%s: gate side output off", label);
    if (o.uo) CHECK(near(o.uo, r1, m1, ny, rel) == 0, "%s: up side output off", label);
    free_outs(&o);
    pl_gpu_buf_free(xq), pl_gpu_buf_free(xd), pl_gpu_buf_free(xn);
    free_mat(&m[0]), free_mat(&m[1]);
    free(x), free(nw), free(b), free(y0), free(r0), free(r1), free(want), free(m0), free(m1),
        free(mw);
}

/* Every mode on Q4_0; on Q8_0 (only the weight staging differs) the plain and the gate/up
 * GEMM. The double-buffered versions differ from v3/v4 only in the staging (v10 also in the
 * threads' places; the stores are shared), and each kernel costs lavapipe seconds to
 * compile: v8 plain (test_fixed_order's kernel) and gate/up on Q4_0, plain on Q8_0 (v9's
 * Q8_0 text is v8's); v9 and v10 the gate/up on Q4_0 (and their plain GEMM there). */
static void test_gemm(pl_gpu *g) {
    const uint32_t ns[3] = {17, 33, 100};
    for (int ni = 0; ni < 3; ni++) {
        gemm_case(g, &tile_a, PL_GW_Q4_0, PL_GEMV_STORE, 0, 1, 0, ns[ni]);
        gemm_case(g, &tile_a, PL_GW_Q4_0, PL_GEMV_ACCUM, 1, 0, 0, ns[ni]);
        gemm_case(g, &tile_a, PL_GW_Q4_0, PL_GEMV_GATE_UP, 1, 0, 0, ns[ni]);
        gemm_case(g, &tile_a, PL_GW_Q4_0, PL_GEMV_STORE, 1, 0, 1, ns[ni]);
        gemm_case(g, &tile_a, PL_GW_Q4_0, PL_GEMV_STORE, 1, 0, 2, ns[ni]);
        gemm_case(g, &tile_a, PL_GW_Q8_0, PL_GEMV_STORE, 0, 1, 0, ns[ni]);
        gemm_case(g, &tile_a, PL_GW_Q8_0, PL_GEMV_GATE_UP, 1, 0, 0, ns[ni]);
        gemm_case(g, &tile_v8, PL_GW_Q4_0, PL_GEMV_STORE, 0, 0, 0, ns[ni]);
        gemm_case(g, &tile_v8, PL_GW_Q4_0, PL_GEMV_GATE_UP, 1, 0, 0, ns[ni]);
        gemm_case(g, &tile_v8, PL_GW_Q8_0, PL_GEMV_STORE, 0, 0, 0, ns[ni]);
        gemm_case(g, &tile_v9, PL_GW_Q4_0, PL_GEMV_GATE_UP, 1, 0, 0, ns[ni]);
        gemm_case(g, &tile_v10, PL_GW_Q4_0, PL_GEMV_GATE_UP, 1, 0, 0, ns[ni]);
        /* the small gate/up pairs' tile on real GPUs (pl_gpu_gemm_base: 32 x 64, v3) */
        gemm_case(g, &tile_gu_small, PL_GW_Q4_0, PL_GEMV_GATE_UP, 1, 0, 0, ns[ni]);
    }
    /* the few-column tiles at batch sizes they are taken for (a q/k/v split, gate/up; the
     * stores of the other modes are every tile's) */
    gemm_case(g, &tile_few, PL_GW_Q4_0, PL_GEMV_STORE, 1, 0, 1, 29);
    gemm_case(g, &tile_few_gu, PL_GW_Q4_0, PL_GEMV_GATE_UP, 1, 0, 0, 31);
    gemm_case(g, &tile_mid, PL_GW_Q4_0, PL_GEMV_GATE_UP, 1, 0, 0, 100);
}

/* Column j's bits do not depend on the batch size, its place, the tile shape or the kernel
 * version, versions 5 and 6 (emulated subgroup matrices) included (Q4_0): what lets real
 * GPUs choose the tile by the number of columns (pl_gpu_gemm_base). */
static void test_fixed_order(pl_gpu *g) {
    mat m = make_mat(PL_GW_Q4_0, ROWS, COLS);
    float *x = malloc((size_t)100 * COLS * 4);
    gt_fill(x, (size_t)100 * COLS, -1, 1);
    /* (batch size, first column of x, tile) */
    const struct {
        uint32_t n, c0;
        const pl_gemm_params *tile;
    } runs[12] = {{100, 0, &tile_a},  {33, 40, &tile_a},   {17, 50, &tile_b},  {40, 7, &tile_v1},
                  {21, 60, &tile_v2}, {30, 10, &tile_m5},  {25, 70, &tile_m6}, {37, 20, &tile_v8},
                  {50, 45, &tile_v9}, {29, 71, &tile_v10}, {23, 5, &tile_few}, {60, 30, &tile_mid}};
    outs o[12];
    for (int r = 0; r < 12; r++) {
        pl_gemm_params p = *runs[r].tile;
        p.type = PL_GW_Q4_0, p.rows = ROWS, p.cols = COLS, p.mode = PL_GEMV_STORE;
        pl_gpu_buf *xq, *xd, *xn = NULL;
        prepass(g, runs[r].n, x + (size_t)runs[r].c0 * COLS, NULL, &xq, &xd, &xn);
        o[r] = gemm_run(g, &p, xq, xd, &m, runs[r].n, NULL, NULL);
        pl_gpu_buf_free(xq), pl_gpu_buf_free(xd);
    }
    for (int r = 1; r < 12; r++)
        CHECK(!memcmp(o[r].y, o[0].y + (size_t)runs[r].c0 * ROWS, (size_t)runs[r].n * ROWS * 4),
              "columns %u.. of a batch of %u (tile %u, v%u) differ from the batch of 100",
              runs[r].c0, runs[r].n, runs[r].tile->tm, runs[r].tile->version);
    for (int r = 0; r < 12; r++) free_outs(&o[r]);
    free_mat(&m);
    free(x);
}

/* The kernel cache keeps parameter structs of at most 128 bytes (pl_gemv_params had grown
 * to 100 bytes of a 96-byte key, written past it): a bigger one is refused, never copied.
 */
static pl_status tiny_kernel(const void *params, char **out) {
    (void)params;
    *out = strdup("@compute @workgroup_size(1)\nfn main() {}\n");
    return *out ? PL_OK : PL_ERR_NOMEM;
}

static void test_cache_key(void) {
    pl_backend *be = gt_backend();
    if (!be) return;
    unsigned char big[200];
    memset(big, 7, sizeof big);
    pl_gpu_kernel *k = NULL;
    gpu_backend *gb = (gpu_backend *)be;
    CHECK(pl_gpu_get_kernel(gb, F_GEMM, big, sizeof big, tiny_kernel, "big", &k) != PL_OK,
          "a 200-byte kernel key was taken");
    CHECK(pl_gpu_get_kernel(gb, F_GEMM, big, 128, tiny_kernel, "128", &k) == PL_OK && k,
          "a 128-byte key: %s", pl_last_error());
    pl_be_destroy(be);
}

/* One q8x GEMV (64 threads, 4 rows per workgroup) of the n columns of x, or with xpre of
 * the pre-pass's blocks xq/xd: y [n][ROWS]. */
static float *gemv_run(pl_gpu *g, pl_gemv_params p, const mat *m, uint32_t n, const float *x,
                       pl_gpu_buf *xq, pl_gpu_buf *xd, const float *y0) {
    pl_gpu_buf *bufs[12] = {0};
    pl_gpu_ref refs[12];
    int k = 0;
    bufs[k] = p.xpre ? NULL : gt_buf(g, x, (size_t)n * COLS * 4);
    refs[k] = whole(p.xpre ? xq : bufs[k]), k++;
    bufs[k] = gt_buf(g, y0, (size_t)n * ROWS * 4), refs[k] = whole(bufs[k]), k++;
    pl_gpu_ref_mat rm;
    for (int i = 0; i < (p.mode == PL_GEMV_GATE_UP ? 2 : 1); i++) {
        pl_gpu_buf *qb, *sb;
        upload_part(g, &m[i], 0, ROWS, &qb, &sb, &rm, 0);
        bufs[k] = qb, refs[k] = whole(qb), k++;
        bufs[k] = sb, refs[k] = whole(sb), k++;
    }
    if (p.xpre) refs[k++] = whole(xd); /* borrowed: not in bufs */
    pl_gpu_args a = {{n}};
    bufs[k] = gt_args(g, &a), refs[k] = whole(bufs[k]), k++;
    CHECK(k == pl_gemv_bindings(&p), "gemv binding count %d != %d", k, pl_gemv_bindings(&p));
    float *y = calloc((size_t)n * ROWS, 4);
    char *src = NULL;
    pl_gpu_kernel *kk = gt_kernel(g, pl_wgsl_gemv(&p, &src), &src, "gemv");
    if (kk && gt_run(g, kk, refs, k, pl_gemv_groups(&p) * n))
        gt_read(g, bufs[1], y, (size_t)n * ROWS * 4);
    pl_gpu_kernel_free(kk);
    for (int i = 0; i < k; i++)
        if (bufs[i]) pl_gpu_buf_free(bufs[i]);
    return y;
}

/* xpre: the GEMV over the pre-pass's blocks equals, bit for bit, the GEMV quantising x in
 * its workgroups, for every mode on both weight types and 1 and 3 columns. */
static void test_gemv_xpre(pl_gpu *g) {
    const pl_gemv_mode modes[3] = {PL_GEMV_STORE, PL_GEMV_ACCUM, PL_GEMV_GATE_UP};
    for (int ti = 0; ti < 2; ti++) {
        pl_gpu_wtype t = ti ? PL_GW_Q8_0 : PL_GW_Q4_0;
        for (int mi = 0; mi < 3; mi++) {
            uint32_t n = mi == 1 ? 3 : 1;
            mat m[2] = {make_mat(t, ROWS, COLS), make_mat(t, ROWS, COLS)};
            float *x = malloc((size_t)n * COLS * 4), *y0 = malloc((size_t)n * ROWS * 4);
            gt_fill(x, (size_t)n * COLS, -2, 2), gt_fill(y0, (size_t)n * ROWS, -1, 1);
            pl_gemv_params p = {.type = t,
                                .rows = ROWS,
                                .cols = COLS,
                                .threads = 64,
                                .rows_per_wg = 4,
                                .mode = modes[mi],
                                .q8x = 1};
            float *want = gemv_run(g, p, m, n, x, NULL, NULL, y0);
            pl_gpu_buf *xq, *xd, *xn = NULL;
            prepass(g, n, x, NULL, &xq, &xd, &xn);
            p.xpre = 1;
            float *got = gemv_run(g, p, m, n, NULL, xq, xd, y0);
            int bad = 0;
            for (size_t i = 0; i < (size_t)n * ROWS; i++)
                bad += memcmp(&got[i], &want[i], 4) != 0 || want[i] != want[i];
            CHECK(bad == 0, "xpre GEMV type %d mode %d n %u: %d of %u outputs differ", t, modes[mi],
                  n, bad, n * ROWS);
            pl_gpu_buf_free(xq), pl_gpu_buf_free(xd);
            free(want), free(got), free(x), free(y0);
            free_mat(&m[0]), free_mat(&m[1]);
        }
    }
    pl_gemv_params bad = {.type = PL_GW_Q4_0,
                          .rows = ROWS,
                          .cols = COLS,
                          .threads = 64,
                          .rows_per_wg = 4,
                          .q8x = 1,
                          .xpre = 1,
                          .norm = 1};
    char *src = NULL;
    CHECK(pl_wgsl_gemv(&bad, &src) != PL_OK, "xpre with the norm was accepted");
    free(src);
}

/* Kernel versions 1-4, 8 and 9 only (5-7 need their matrix shape); v8/v9 hold at most
 * PL_GEMM_DB_REGS elements of a staged piece a thread and twice v4/v3's workgroup memory;
 * v10 needs whole warps of 8 x 4 threads; the expert GEMM (ids) neither accumulates nor
 * splits. */
static void test_params(void) {
    pl_gemm_params p = tile_b;
    p.type = PL_GW_Q4_0, p.rows = ROWS, p.cols = COLS, p.mode = PL_GEMV_STORE;
    for (uint32_t v = 0; v <= 11; v++) {
        p.version = v;
        CHECK((pl_gemm_check_shape(&p) == PL_OK) == ((v >= 1 && v <= 4) || (v >= 8 && v <= 10)),
              "version %u", v);
    }
    /* v10's warps of 8 x 4 threads: 4 columns of threads do not make one */
    pl_gemm_params q = tile_v10;
    q.type = PL_GW_Q4_0, q.rows = ROWS, q.cols = COLS, q.mode = PL_GEMV_STORE, q.tn = 8;
    CHECK(pl_gemm_check_shape(&q) != PL_OK, "v10 with 4 columns of threads taken");
    q.version = 8;
    CHECK(pl_gemm_check_shape(&q) == PL_OK, "v8 32x8: %s", pl_last_error());
    /* 32 threads staging 128 rows x 8 blocks of two Q8_0 matrices: 128 vectors each */
    pl_gemm_params w = {.type = PL_GW_Q8_0, .rows = ROWS, .cols = COLS, .mode = PL_GEMV_GATE_UP};
    w.tm = 128, w.tn = 16, w.rm = 8, w.rn = 8, w.bk = 8, w.version = 4;
    CHECK(pl_gemm_check_shape(&w) == PL_OK, "v4 wide tile: %s", pl_last_error());
    uint32_t single = pl_gemm_wg_bytes(&w);
    w.version = 8;
    CHECK(pl_gemm_check_shape(&w) != PL_OK && strstr(pl_last_error(), "at most"),
          "v8 tile of 128 staged vectors a thread taken");
    w.bk = 1, w.mode = PL_GEMV_STORE;
    CHECK(pl_gemm_check_shape(&w) == PL_OK, "v8 one block: %s", pl_last_error());
    w.bk = 8, w.mode = PL_GEMV_GATE_UP, w.version = 8;
    CHECK(pl_gemm_wg_bytes(&w) == 2 * single, "v8 stages %u bytes, v4 %u", pl_gemm_wg_bytes(&w),
          single);
    p.version = 3, p.ids = 1;
    CHECK(pl_gemm_check_shape(&p) == PL_OK, "ids store: %s", pl_last_error());
    p.mode = PL_GEMV_ACCUM;
    CHECK(pl_gemm_check_shape(&p) != PL_OK, "ids accumulate taken");
    p.mode = PL_GEMV_STORE, p.split[0] = 24, p.split[1] = 45;
    CHECK(pl_gemm_check_shape(&p) != PL_OK, "ids split taken");
}

/* Versions 5-7 (subgroup matrices): whole matrix tiles shared evenly by the subgroups,
 * one tile row per subgroup, no expert GEMM; the text enables what it uses. */
static void test_smx_params(void) {
    pl_gemm_params p = {.type = PL_GW_Q4_0,
                        .rows = ROWS,
                        .cols = COLS,
                        .mode = PL_GEMV_GATE_UP,
                        .tm = 64,
                        .tn = 64,
                        .rm = 4,
                        .rn = 4,
                        .bk = 1,
                        .sm = 16,
                        .sn = 16,
                        .sk = 16,
                        .sg = 32};
    for (uint32_t v = 5; v <= 7; v++) {
        p.version = v, p.sk = v == 6 ? 32 : 16;
        CHECK(pl_gemm_check_shape(&p) == PL_OK, "v%u: %s", v, pl_last_error());
        CHECK(pl_gemm_wg_bytes(&p) <= 32768, "v%u gate/up needs %u bytes", v, pl_gemm_wg_bytes(&p));
        char *src = NULL;
        pl_gemm_params key = pl_gemm_kernel_key(&p);
        CHECK(pl_wgsl_gemm(&key, &src) == PL_OK && src &&
                  strstr(src, "enable chromium_experimental_subgroup_matrix;") &&
                  strstr(src, "subgroupMatrixMultiplyAccumulate") &&
                  !strstr(src, "enable f16;") == (v == 6) &&
                  !!strstr(src, "subgroup_matrix_left<i8,") == (v == 6),
              "v%u text", v);
        free(src);
    }
    const struct {
        uint32_t tn, sm, sk, sg; /* tn 48: 2 tiles a subgroup, 3 a row */
        int ids;
    } bad[6] = {{64, 0, 16, 32, 0},  {64, 16, 12, 32, 0}, {64, 16, 16, 0, 0},
                {48, 16, 16, 32, 0}, {64, 16, 16, 48, 0}, {64, 16, 16, 32, 1}};
    for (int i = 0; i < 6; i++) {
        pl_gemm_params q = p;
        q.version = 5, q.mode = PL_GEMV_STORE, q.tn = bad[i].tn, q.sm = bad[i].sm, q.sk = bad[i].sk;
        q.sg = bad[i].sg, q.ids = bad[i].ids;
        CHECK(pl_gemm_check_shape(&q) != PL_OK, "bad subgroup-matrix tile %d taken", i);
    }
}

/* The configuration the GEMM takes: f16 x f16 -> f32 with M, N >= 8 and M, N, K dividing
 * 32, the largest M x N, then the longest K; none unless the device took the feature. */
static void test_smx_pick(void) {
    pl_gpu_info in;
    memset(&in, 0, sizeof in);
    const uint32_t c[6][5] = {{2, 2, 16, 16, 16}, {2, 1, 16, 16, 8},  {1, 1, 16, 16, 8},
                              {2, 1, 8, 8, 16},   {2, 1, 16, 16, 16}, {2, 1, 32, 24, 16}};
    for (int i = 0; i < 6; i++)
        in.smx[i].type = c[i][0], in.smx[i].result = c[i][1], in.smx[i].m = c[i][2],
        in.smx[i].n = c[i][3], in.smx[i].k = c[i][4];
    in.n_smx = 6;
    CHECK(pl_gpu_smx_pick(&in) == -1, "picked without the device's feature");
    in.has_smx = 1;
    CHECK(pl_gpu_smx_pick(&in) == 4, "picked %d, not 16x16x16 f16 -> f32", pl_gpu_smx_pick(&in));
    in.n_smx = 4;
    CHECK(pl_gpu_smx_pick(&in) == 1, "picked %d, not 16x16x8", pl_gpu_smx_pick(&in));
    in.n_smx = 1;
    CHECK(pl_gpu_smx_pick(&in) == -1, "picked an f16 result");
    char nm[64];
    CHECK(!strcmp(pl_gpu_smx_name(&in, 4, nm, sizeof nm), "f16 x f16 -> f32 16x16x16"), "name %s",
          nm);
}

/* Versions 5 and 7 where the device took subgroup matrices: v5 gives v3's bits, v7 the
 * reference within f16 rounding of its operands. Elsewhere (lavapipe) only a note. */
static void test_smx_kernel(pl_gpu *g) {
    const pl_gpu_info *in = pl_gpu_get_info(g);
    int pk = pl_gpu_smx_pick(in);
    if (pk < 0) {
        fprintf(stderr, "note: no subgroup matrices (%d configs): versions 5-7 not run\n",
                in->n_smx);
        return;
    }
    uint32_t n = 40;
    mat m = make_mat(PL_GW_Q8_0, ROWS, COLS);
    float *x = malloc((size_t)n * COLS * 4);
    gt_fill(x, (size_t)n * COLS, -1, 1);
    pl_gpu_buf *xq, *xd, *xn = NULL;
    prepass(g, n, x, NULL, &xq, &xd, &xn);
    pl_gemm_params p = tile_b;
    p.type = PL_GW_Q8_0, p.rows = ROWS, p.cols = COLS, p.mode = PL_GEMV_STORE;
    outs o3 = gemm_run(g, &p, xq, xd, &m, n, NULL, NULL);
    p.sm = in->smx[pk].m, p.sn = in->smx[pk].n, p.sk = in->smx[pk].k, p.sg = in->subgroup_max;
    p.bk = 1, p.version = 5;
    outs o5 = gemm_run(g, &p, xq, xd, &m, n, NULL, NULL);
    CHECK(!memcmp(o5.y, o3.y, (size_t)n * ROWS * 4), "v5 (%ux%ux%u) differs from v3", p.sm, p.sn,
          p.sk);
    p.version = 7;
    outs o7 = gemm_run(g, &p, xq, xd, &m, n, NULL, NULL);
    float *ref = malloc((size_t)n * ROWS * 4);
    double *mag = malloc((size_t)n * ROWS * 8);
    pl_gemv_params rp = {
        .type = PL_GW_Q8_0, .rows = ROWS, .cols = COLS, .mode = PL_GEMV_STORE, .q8x = 1};
    pl_gpu_ref_mat rm = {{m.q}, {m.s}};
    pl_gpu_ref_gemv(&rp, &rm, n, x, NULL, NULL, ref, mag);
    int bad = near(o7.y, ref, mag, (size_t)n * ROWS, 2e-3);
    CHECK(!bad, "v7: %d outputs off by more than 2e-3 of their terms' magnitude", bad);
    free(ref), free(mag), free(x);
    free_outs(&o3), free_outs(&o5), free_outs(&o7);
    pl_gpu_buf_free(xq), pl_gpu_buf_free(xd);
    free_mat(&m);
}

/* Version 7 with the subgroup-matrix builtins emulated (pl_gemm_params.mock), on any
 * adapter: Q8_0 gate/up (two matrices staged) against the reference of each matrix (its
 * side outputs) within 1e-5 of the terms' magnitude (the emulation keeps f32 operands).
 * Versions 5 and 6 emulated are in test_fixed_order (Q4_0: v4's bits). */
static void test_smx_mock(pl_gpu *g) {
    uint32_t n = 40;
    size_t ny = (size_t)n * ROWS;
    float *x = malloc((size_t)n * COLS * 4);
    gt_fill(x, (size_t)n * COLS, -1, 1);
    pl_gpu_buf *xq, *xd, *xn = NULL;
    prepass(g, n, x, NULL, &xq, &xd, &xn);
    mat m[2] = {make_mat(PL_GW_Q8_0, ROWS, COLS), make_mat(PL_GW_Q8_0, ROWS, COLS)};
    pl_gemm_params p = tile_m7;
    p.type = PL_GW_Q8_0, p.rows = ROWS, p.cols = COLS, p.mode = PL_GEMV_GATE_UP;
    p.gate_out = p.up_out = 1;
    CHECK(pl_gemm_wg_bytes(&p) <= pl_gpu_get_info(g)->max_wg_storage, "v7 needs %u bytes",
          pl_gemm_wg_bytes(&p));
    outs o = gemm_run(g, &p, xq, xd, m, n, NULL, NULL);
    float *ref = malloc(ny * 4);
    double *mag = malloc(ny * 8);
    pl_gemv_params rp = {
        .type = PL_GW_Q8_0, .rows = ROWS, .cols = COLS, .mode = PL_GEMV_STORE, .q8x = 1};
    for (int i = 0; i < 2; i++) {
        pl_gpu_ref_mat rm = {{m[i].q}, {m[i].s}};
        pl_gpu_ref_gemv(&rp, &rm, n, x, NULL, NULL, ref, mag);
        int bad = near(i ? o.uo : o.go, ref, mag, ny, 1e-5);
        CHECK(!bad, "emulated v7: %d %s outputs off the reference", bad, i ? "up" : "gate");
    }
    free(ref), free(mag), free_outs(&o);
    free_mat(&m[0]), free_mat(&m[1]);
    pl_gpu_buf_free(xq), pl_gpu_buf_free(xd);
    free(x);
}

/* The backend's choice: POOLED_GPU_SMX's versions are refused where the device offers no
 * f16 subgroup matrices (one line saying so), and a version outside 5-7 everywhere. */
static void test_smx_choice(void) {
    pl_gpu_backend_opts o;
    memset(&o, 0, sizeof o);
    o.no_selftest = 1, o.no_tune = 1, o.smx = 9;
    pl_backend *be = NULL;
    CHECK(pl_gpu_backend_new(&o, &be) != PL_OK && strstr(pl_last_error(), "POOLED_GPU_SMX"),
          "version 9 taken");
    if (be) be->m->destroy(be), be = NULL;
    o.smx = 7;
    pl_status st = pl_gpu_backend_new(&o, &be);
    if (be) {
        const gpu_backend *gb = (const gpu_backend *)be;
        CHECK(gb->smx == 7 && pl_gpu_smx_pick(gb->info) >= 0 &&
                  strstr(be->device, "matrix units v7"),
              "smx %d on %s", gb->smx, be->device);
        be->m->destroy(be);
    } else {
        CHECK(st != PL_OK && strstr(pl_last_error(), "offers no f16 subgroup matrices"),
              "refused with: %s", pl_last_error());
    }
}

static void run_tests(void) {
    test_params();
    test_smx_params();
    test_smx_pick();
    gt_seed();
    if (!getenv("XDG_RUNTIME_DIR")) setenv("XDG_RUNTIME_DIR", "/tmp", 0);
    pl_gpu_open_opts go = {.smx = 1}; /* takes subgroup matrices where offered */
    pl_gpu *g = NULL;
    if (pl_gpu_open_with(&go, &g) != PL_OK) {
        gt_no_gpu("the GPU adapter");
        return;
    }
    test_prepass(g);
    test_gemm(g);
    test_fixed_order(g);
    test_gemv_xpre(g);
    test_smx_mock(g);
    test_smx_kernel(g);
    pl_gpu_close(g);
    test_cache_key();
    test_smx_choice();
}
