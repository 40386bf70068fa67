/* gpu_gemv_cols_test.c - the q8x GEMV over several columns per workgroup
 * (pl_gemv_params.ncols: a verify pass or a batch of decode steps reads each weight block
 * once for all its columns). The promise is exactness: every column's outputs, the side
 * outputs (normalised x, gate, up) included, are bit for bit those of the one-column kernel
 * with the same threads, whatever the rows per workgroup and however many columns the last
 * workgroup holds. The one-column kernel itself is checked against the reference in
 * gpu_kernels_test.c. */
#include "test.h"

#include "gpu/wgsl_gen.h"
#include "gpu_test_util.h"

#include "gpu_mat_util.h"

typedef struct {
    pl_gpu_buf *x, *xq, *xd, *nw, *bias, *y0;
    mat m[2];
    uint32_t nv;
} inputs;

/* Every output of one dispatch of p over in->nv vectors, concatenated (y and its split
 * ranges, the normalised x, gate, up), in *out (malloc'd, *len floats). 0 on failure.
 * With gm, the GEMM gm (the same matmul, p's outputs) instead of the GEMV. */
static int run(pl_gpu *g, const pl_gemv_params *p, const pl_gemm_params *gm, const inputs *in,
               float **out, size_t *len) {
    uint32_t nv = in->nv, parts = p->parts ? p->parts : 1;
    int nm = p->mode == PL_GEMV_GATE_UP ? 2 : 1;
    pl_gpu_ref refs[20];
    pl_gpu_buf *own[20] = {0}, *outs[8];
    size_t osz[8];
    int nb = 0, no = 0, nown = 0;
#define BIND(b) (refs[nb++] = (pl_gpu_ref){(b), 0, 0})
#define OUT(bytes)                                                                                 \
    do {                                                                                           \
        osz[no] = (bytes);                                                                         \
        outs[no] = own[nown++] = gt_buf(g, NULL, osz[no]);                                         \
        BIND(outs[no]);                                                                            \
        no++;                                                                                      \
    } while (0)
    BIND(p->xpre ? in->xq : in->x);
    if (gm) BIND(in->xd);
    /* y: ACCUM adds to y0 (a fresh copy each run) */
    osz[no] = (size_t)nv * p->rows * 4;
    if (p->mode == PL_GEMV_ACCUM) {
        float *y0 = malloc(osz[no]);
        gt_read(g, in->y0, y0, osz[no]);
        outs[no] = own[nown++] = gt_buf(g, y0, osz[no]);
        free(y0);
    } else {
        outs[no] = own[nown++] = gt_buf(g, NULL, osz[no]);
    }
    BIND(outs[no]), no++;
    for (int i = 0; i < nm; i++)
        for (unsigned q = 0; q < parts; q++) {
            uint32_t r0 = parts > 1 ? q * p->rows_per_part : 0;
            uint32_t r1 =
                parts > 1 && r0 + p->rows_per_part < p->rows ? r0 + p->rows_per_part : p->rows;
            pl_gpu_buf *qb, *sb;
            pl_gpu_ref_mat rm;
            upload_part(g, &in->m[i], r0, r1, &qb, &sb, &rm, (int)q);
            own[nown++] = qb, BIND(qb);
            if (sb) own[nown++] = sb, BIND(sb);
        }
    if (p->xpre && !gm) BIND(in->xd);
    if (p->norm) BIND(in->nw);
    if (p->norm_out) OUT((size_t)nv * p->cols * 4);
    if (p->bias) BIND(in->bias);
    if (p->gate_out) OUT((size_t)nv * p->rows * 4);
    if (p->up_out) OUT((size_t)nv * p->rows * 4);
    if (p->split[0]) { /* y holds [0, split0); then the other ranges */
        uint32_t e[4] = {p->split[1], p->split[2] ? p->split[2] : p->rows, p->rows, 0};
        uint32_t s[3] = {p->split[0], p->split[1], p->split[2]};
        osz[0] = (size_t)nv * p->split[0] * 4;
        for (int r = 0; r < (p->split[2] ? 3 : 2); r++) OUT((size_t)nv * (e[r] - s[r]) * 4);
    }
    pl_gpu_args a = gm ? pl_gemm_args(gm, nv) : (pl_gpu_args){{nv}};
    own[nown] = gt_args(g, &a), BIND(own[nown]), nown++;
#undef OUT
#undef BIND
    int want_nb = gm ? pl_gemm_bindings(gm) : pl_gemv_bindings(p);
    CHECK(nb == want_nb, "binding count %d != %d", nb, want_nb);
    char *src = NULL;
    pl_gemm_params key = gm ? pl_gemm_kernel_key(gm) : (pl_gemm_params){0};
    pl_gpu_kernel *k = gt_kernel(g, gm ? pl_wgsl_gemm(&key, &src) : pl_wgsl_gemv(p, &src), &src,
                                 gm ? "gemm" : "gemv");
    int ok = k && gt_run(g, k, refs, nb, gm ? pl_gemm_groups(gm, nv) : pl_gemv_dispatch(p, nv));
    *len = 0;
    for (int i = 0; i < no; i++) *len += osz[i] / 4;
    *out = malloc(*len * 4);
    float *o = *out;
    for (int i = 0; ok && i < no; i++) gt_read(g, outs[i], o, osz[i]), o += osz[i] / 4;
    pl_gpu_kernel_free(k);
    for (int i = 0; i < nown; i++) pl_gpu_buf_free(own[i]);
    return ok;
}

/* Outputs of got (gl floats) whose bits differ from want's (wl), the first at *first; all
 * of them when the lengths differ. */
static size_t differ(const float *got, size_t gl, const float *want, size_t wl, size_t *first) {
    if (gl != wl) return wl ? wl : 1;
    size_t bad = 0;
    for (size_t i = 0; i < gl; i++)
        if (memcmp(&got[i], &want[i], 4) && !bad++) *first = i;
    return bad;
}

/* p over nv vectors: the one-column kernel, then each count of columns a workgroup in
 * ncs (0-terminated) at p's rows per workgroup and at half of them, compared bit for bit.
 * `base_unroll`: the one-column kernel's sweep (the several-column one sweeps one block a
 * turn: the order of each column's sums is the same). */
static void cols_case(pl_gpu *g, pl_gemv_params p, uint32_t nv, const uint32_t *ncs,
                      uint32_t base_unroll) {
    inputs in = {.nv = nv};
    int nm = p.mode == PL_GEMV_GATE_UP ? 2 : 1;
    size_t nx = (size_t)nv * p.cols, nb = (size_t)nv * p.cols / 32, ny = (size_t)nv * p.rows;
    float *x = malloc(nx * 4), *nw = malloc(p.cols * 4), *bias = malloc(p.rows * 4);
    float *y0 = malloc(ny * 4), *xd = malloc(nb * 4);
    uint32_t *xq = malloc(nb * 32);
    gt_fill(x, nx, -2, 2), gt_fill(nw, p.cols, 0.5f, 1.5f), gt_fill(bias, p.rows, -1, 1);
    gt_fill(y0, ny, -1, 1), gt_fill(xd, nb, 1e-3f, 2e-2f);
    for (size_t i = 0; i < nb * 8; i++) xq[i] = gt_u32();
    in.x = gt_buf(g, x, nx * 4), in.nw = gt_buf(g, nw, p.cols * 4);
    in.bias = gt_buf(g, bias, p.rows * 4), in.y0 = gt_buf(g, y0, ny * 4);
    in.xq = gt_buf(g, xq, nb * 32), in.xd = gt_buf(g, xd, nb * 4);
    for (int i = 0; i < nm; i++) in.m[i] = make_mat(p.type, p.rows, p.cols);

    pl_gemv_params one = p;
    one.ncols = 0, one.unroll = base_unroll;
    float *want = NULL, *got = NULL;
    size_t wl = 0, gl = 0;
    int ok = run(g, &one, NULL, &in, &want, &wl);
    for (size_t i = 0; ok && i < wl; i++) ok = want[i] == want[i]; /* every output written */
    CHECK(ok, "one-column GEMV %ux%u mode %d: not run or an output unwritten", p.rows, p.cols,
          p.mode);
    for (const uint32_t *nc = ncs; ok && *nc; nc++) {
        for (int half = 0; half < 2; half++) {
            pl_gemv_params q = p;
            q.ncols = *nc, q.unroll = 1;
            if (half && q.rows_per_wg > 1) q.rows_per_wg /= 2;
            if (half && q.rows_per_wg == p.rows_per_wg) continue;
            if (!run(g, &q, NULL, &in, &got, &gl)) {
                free(got);
                continue;
            }
            size_t first = 0, bad = differ(got, gl, want, wl, &first);
            CHECK(bad == 0,
                  "%ux%u type %d mode %d norm %d xpre %d split %u parts %u sg %d, %u vectors, %u "
                  "columns a workgroup, %u rows: %zu of %zu outputs differ (first %zu: %.9g vs "
                  "%.9g)",
                  p.rows, p.cols, p.type, p.mode, p.norm, p.xpre, p.split[0], p.parts, p.subgroups,
                  nv, q.ncols, q.rows_per_wg, bad, wl, first, bad ? got[first] : 0.0,
                  bad ? want[first] : 0.0);
            free(got), got = NULL;
        }
    }
    /* the GEMM in the GEMV's order (pl_gemm_params.gt): the same bits as the one-column
     * kernel, as many columns as it likes (one matrix part, the workgroup reduction) */
    if (ok && p.parts <= 1 && !p.subgroups && p.xpre) {
        pl_gemm_params gm = {.type = p.type,
                             .rows = p.rows,
                             .cols = p.cols,
                             .mode = p.mode,
                             .bias = p.bias,
                             .gate_out = p.gate_out,
                             .up_out = p.up_out,
                             .split = {p.split[0], p.split[1], p.split[2]},
                             .tm = 16,
                             .tn = 16,
                             .rm = 2,
                             .rn = 2,
                             .bk = 2,
                             .version = 10,
                             .gt = p.threads,
                             .gj = (p.cols / 32 + p.threads - 1) / p.threads};
        if (run(g, &p, &gm, &in, &got, &gl)) {
            size_t first = 0, bad = differ(got, gl, want, wl, &first);
            CHECK(bad == 0,
                  "GEMM in the GEMV's order, %ux%u type %d mode %d split %u, %u threads, %u "
                  "vectors: %zu of %zu outputs differ (first %zu: %.9g vs %.9g)",
                  p.rows, p.cols, p.type, p.mode, p.split[0], p.threads, nv, bad, wl, first,
                  bad ? got[first] : 0.0, bad ? want[first] : 0.0);
        }
        free(got), got = NULL;
    }
    free(want);
    pl_gpu_buf_free(in.x), pl_gpu_buf_free(in.nw), pl_gpu_buf_free(in.bias);
    pl_gpu_buf_free(in.y0), pl_gpu_buf_free(in.xq), pl_gpu_buf_free(in.xd);
    for (int i = 0; i < nm; i++) free_mat(&in.m[i]);
    free(x), free(nw), free(bias), free(y0), free(xd), free(xq);
}

static void test_refused(void) {
    pl_gemv_params p = {.type = PL_GW_Q4_0,
                        .rows = 64,
                        .cols = 64,
                        .threads = 32,
                        .rows_per_wg = 4,
                        .q8x = 1,
                        .xpre = 1,
                        .ncols = 4};
    char *src = NULL;
    CHECK(pl_wgsl_gemv(&p, &src) == PL_OK, "4 columns: %s", pl_last_error());
    free(src), src = NULL;
    pl_gemv_params bad[5] = {p, p, p, p, p};
    bad[0].xpre = 0;     /* x quantised in the workgroups */
    bad[1].unroll = 2;   /* several blocks a turn */
    bad[2].sg_rows = 32; /* subgroup rows */
    bad[3].ncols = PL_GEMV_MAX_COLS + 1;
    bad[4].ids = 1, bad[4].n_exp = 4, bad[4].n_used = 2; /* gathered experts */
    for (int i = 0; i < 5; i++) {
        CHECK(pl_wgsl_gemv(&bad[i], &src) != PL_OK, "bad several-column GEMV %d accepted", i);
        free(src), src = NULL;
    }
    CHECK(pl_gemv_dispatch(&p, 9) == pl_gemv_groups(&p) * 3, "9 vectors in 3 column groups");
    p.ncols = 0;
    CHECK(pl_gemv_dispatch(&p, 9) == pl_gemv_groups(&p) * 9, "one column a workgroup");
}

static void run_tests(void) {
    test_refused();
    gt_seed();
    pl_gpu *g = gt_open();
    if (!g) return;
    static const uint32_t n25[] = {2, 5, 0}, n48[] = {4, 8, 0}, n2[] = {2, 0}, n3[] = {3, 0},
                          n4[] = {4, 0};
    /* a bias, 5 vectors: 2 a workgroup (the last holds one) and all 5 in one */
    cols_case(g,
              (pl_gemv_params){.type = PL_GW_Q4_0,
                               .rows = 37,
                               .cols = 256,
                               .threads = 32,
                               .rows_per_wg = 4,
                               .mode = PL_GEMV_STORE,
                               .bias = 1,
                               .xpre = 1,
                               .q8x = 1},
              5, n25, 1);
    /* accumulate, a matrix in 3 parts, preloading one-column kernel, 7 vectors */
    cols_case(g,
              (pl_gemv_params){.type = PL_GW_Q8_0,
                               .rows = 70,
                               .cols = 128,
                               .threads = 32,
                               .rows_per_wg = 4,
                               .mode = PL_GEMV_ACCUM,
                               .parts = 3,
                               .rows_per_part = 24,
                               .xpre = 1,
                               .q8x = 1,
                               .preload = 1},
              7, n3, 1);
    /* gate/up with both side outputs */
    cols_case(g,
              (pl_gemv_params){.type = PL_GW_Q4_0,
                               .rows = 45,
                               .cols = 96,
                               .threads = 32,
                               .rows_per_wg = 4,
                               .mode = PL_GEMV_GATE_UP,
                               .gate_out = 1,
                               .up_out = 1,
                               .xpre = 1,
                               .q8x = 1},
              3, n3, 1);
    /* q/k/v ranges; 8 columns a workgroup (the most) */
    cols_case(g,
              (pl_gemv_params){.type = PL_GW_Q4_0,
                               .rows = 48,
                               .cols = 64,
                               .threads = 32,
                               .rows_per_wg = 4,
                               .mode = PL_GEMV_STORE,
                               .split = {32, 40},
                               .xpre = 1,
                               .q8x = 1},
              8, n48, 1);
    /* four ranges (DeltaNet's projections) */
    cols_case(g,
              (pl_gemv_params){.type = PL_GW_Q8_0,
                               .rows = 72,
                               .cols = 96,
                               .threads = 32,
                               .rows_per_wg = 4,
                               .mode = PL_GEMV_STORE,
                               .split = {40, 56, 64},
                               .xpre = 1,
                               .q8x = 1},
              2, n2, 1);
    /* against a one-column kernel sweeping two blocks a turn (7 blocks, 16 threads: the
     * last turn partly past the row) */
    cols_case(g,
              (pl_gemv_params){.type = PL_GW_Q8_0,
                               .rows = 21,
                               .cols = 224,
                               .threads = 16,
                               .rows_per_wg = 4,
                               .mode = PL_GEMV_GATE_UP,
                               .xpre = 1,
                               .q8x = 1},
              3, n3, 2);
    /* 25 blocks a row for 16 threads: two blocks a thread for the first 9, the GEMM's K
     * loop with empty places (and 8 threads: every thread one run) */
    cols_case(g,
              (pl_gemv_params){.type = PL_GW_Q4_0,
                               .rows = 19,
                               .cols = 800,
                               .threads = 16,
                               .rows_per_wg = 4,
                               .mode = PL_GEMV_ACCUM,
                               .xpre = 1,
                               .q8x = 1},
              3, n3, 1);
    cols_case(g,
              (pl_gemv_params){.type = PL_GW_Q8_0,
                               .rows = 23,
                               .cols = 288,
                               .threads = 8,
                               .rows_per_wg = 2,
                               .mode = PL_GEMV_STORE,
                               .bias = 1,
                               .xpre = 1,
                               .q8x = 1},
              2, n2, 1);
    if (pl_gpu_get_info(g)->has_subgroups) /* the subgroup reduction */
        cols_case(g,
                  (pl_gemv_params){.type = PL_GW_Q4_0,
                                   .rows = 33,
                                   .cols = 128,
                                   .threads = 64,
                                   .rows_per_wg = 8,
                                   .mode = PL_GEMV_ACCUM,
                                   .subgroups = 1,
                                   .xpre = 1,
                                   .q8x = 1},
                  6, n4, 1);
    pl_gpu_close(g);
}
