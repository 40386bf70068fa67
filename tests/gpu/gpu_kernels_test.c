/* gpu_kernels_test.c - every generated kernel family against its CPU reference
 * (kernel_ref.h) on the machine's adapter, with fresh random inputs and outputs poisoned
 * with NaNs, across the template parameters: weight types, threads, rows per workgroup,
 * fusions (RMSNorm, bias, accumulate, gate/up), matrices split over several bindings,
 * subgroup reductions, RoPE modes, top-k ties and NaNs (attention: gpu_attn_test.c). */
#include "test.h"

#include "gpu/kernel_ref.h"
#include "gpu/repack.h"
#include "gpu/wgsl_gen.h"
#include "gpu_test_util.h"

#include "gpu_mat_util.h"

/* ------------------------------------------------------------------ GEMV */

static int n_gemv_cases;

/* One GEMV over nv vectors. */
static void gemv_case(pl_gpu *g, pl_gemv_params p, uint32_t nv) {
    n_gemv_cases++;
    double t_start = pl_gpu_now();
    int nm = p.mode == PL_GEMV_GATE_UP ? 2 : 1;
    unsigned parts = p.parts ? p.parts : 1;
    size_t nx = (size_t)nv * p.cols, ny = (size_t)nv * p.rows;
    mat m[2];
    for (int i = 0; i < nm; i++) m[i] = make_mat(p.type, p.rows, p.cols);
    float *x = malloc(nx * 4), *nw = malloc(p.cols * 4), *bias = malloc(p.rows * 4);
    float *y0 = malloc(ny * 4), *y = malloc(ny * 4), *ref = malloc(ny * 4);
    double *mag = malloc(ny * sizeof(double));
    gt_fill(x, nx, -1, 1);
    gt_fill(nw, p.cols, 0.5f, 1.5f);
    gt_fill(bias, p.rows, -1, 1);
    gt_fill(y0, ny, -2, 2);

    pl_gpu_ref refs[16];
    pl_gpu_buf *bufs[16] = {0};
    int nb = 0;
    bufs[nb] = gt_buf(g, x, nx * 4), refs[nb] = (pl_gpu_ref){bufs[nb], 0, 0}, nb++;
    bufs[nb] = gt_buf(g, p.mode == PL_GEMV_ACCUM ? y0 : NULL, ny * 4);
    refs[nb] = (pl_gpu_ref){bufs[nb], 0, 0}, nb++;
    pl_gpu_ref_mat rm[2];
    for (int i = 0; i < nm; i++) {
        for (unsigned q = 0; q < parts; q++) {
            uint32_t r0 = parts > 1 ? q * p.rows_per_part : 0;
            uint32_t r1 =
                parts > 1 && r0 + p.rows_per_part < p.rows ? r0 + p.rows_per_part : p.rows;
            pl_gpu_buf *qb, *sb;
            upload_part(g, &m[i], r0, r1, &qb, &sb, &rm[i], (int)q);
            bufs[nb] = qb, refs[nb] = (pl_gpu_ref){qb, 0, 0}, nb++;
            if (sb) bufs[nb] = sb, refs[nb] = (pl_gpu_ref){sb, 0, 0}, nb++;
        }
    }
    if (p.norm) bufs[nb] = gt_buf(g, nw, p.cols * 4), refs[nb] = (pl_gpu_ref){bufs[nb], 0, 0}, nb++;
    int ixn = nb, igo = 0, iuo = 0;
    if (p.norm_out)
        bufs[nb] = gt_buf(g, NULL, nx * 4), refs[nb] = (pl_gpu_ref){bufs[nb], 0, 0}, nb++;
    if (p.bias)
        bufs[nb] = gt_buf(g, bias, p.rows * 4), refs[nb] = (pl_gpu_ref){bufs[nb], 0, 0}, nb++;
    if (p.gate_out)
        igo = nb, bufs[nb] = gt_buf(g, NULL, ny * 4), refs[nb] = (pl_gpu_ref){bufs[nb], 0, 0}, nb++;
    if (p.up_out)
        iuo = nb, bufs[nb] = gt_buf(g, NULL, ny * 4), refs[nb] = (pl_gpu_ref){bufs[nb], 0, 0}, nb++;
    int iy1 = nb;
    /* with a split, y holds rows [0, split0) and y1, y2 (, y3) the next ranges */
    int n_ranges = p.split[0] ? (p.split[2] ? 4 : 3) : 0;
    uint32_t offs[5] = {0, p.split[0], p.split[1], p.split[2], p.rows};
    if (n_ranges == 3) offs[3] = p.rows;
    for (int o = 1; o < n_ranges; o++) {
        bufs[nb] = gt_buf(g, NULL, (size_t)nv * (offs[o + 1] - offs[o]) * 4);
        refs[nb] = (pl_gpu_ref){bufs[nb], 0, 0}, nb++;
    }
    pl_gpu_args a = {{nv}};
    bufs[nb] = gt_args(g, &a), refs[nb] = (pl_gpu_ref){bufs[nb], 0, 0}, nb++;
    CHECK(nb == pl_gemv_bindings(&p), "binding count %d != %d", nb, pl_gemv_bindings(&p));

    char label[112];
    snprintf(label, sizeof label, "gemv t%d %ux%u x%u T%u R%u mode%d norm%d bias%d parts%u sg%d",
             p.type, p.rows, p.cols, nv, p.threads, p.rows_per_wg, p.mode, p.norm, p.bias, parts,
             p.subgroups);
    char *src = NULL;
    pl_gpu_kernel *k = gt_kernel(g, pl_wgsl_gemv(&p, &src), &src, label);
    if (k && gt_run(g, k, refs, nb, pl_gemv_groups(&p) * nv)) {
        if (p.split[0]) { /* gather the ranges back into whole rows */
            for (int o = 0; o < n_ranges; o++) {
                uint32_t len = offs[o + 1] - offs[o];
                float *part = malloc((size_t)nv * len * 4);
                gt_read(g, bufs[o ? iy1 + o - 1 : 1], part, (size_t)nv * len * 4);
                for (uint32_t v = 0; v < nv; v++)
                    memcpy(y + (size_t)v * p.rows + offs[o], part + (size_t)v * len, len * 4);
                free(part);
            }
        } else {
            gt_read(g, bufs[1], y, ny * 4);
        }
        /* reference, and for gate/up each projection alone to bound the error */
        memcpy(ref, y0, ny * 4);
        pl_gpu_ref_gemv(&p, rm, nv, x, nw, bias, ref, mag);
        float *gv = NULL, *uv = NULL;
        double *gm = NULL, *um = NULL;
        if (nm == 2) {
            pl_gemv_params one = p;
            one.mode = PL_GEMV_STORE;
            gv = malloc(ny * 4), uv = malloc(ny * 4);
            gm = malloc(ny * 8), um = malloc(ny * 8);
            pl_gpu_ref_gemv(&one, &rm[0], nv, x, nw, NULL, gv, gm);
            pl_gpu_ref_gemv(&one, &rm[1], nv, x, nw, NULL, uv, um);
        }
        /* q8x with the norm quantises the GPU's normalised x, which may differ from the
         * reference's in the last bit (its 1/rms comes from float sums in another order):
         * now and then a quant or a block's f16 scale then rounds the other way, moving
         * an output by ~1e-4 of the magnitude of its terms (seen: 2.5e-3 on an output of
         * 12 whose terms sum to ~15 in magnitude). Everything else: float accuracy. */
        double rel = p.q8x && p.norm ? 2e-3 : 1e-5;
        int bad = 0;
        for (size_t r = 0; r < ny && bad < 3; r++) {
            double tol = rel * mag[r] + 1e-6 * fabs(ref[r]) + 1e-30;
            if (nm == 2) {
                double sg = gv[r] / (1 + exp(-(double)gv[r]));
                tol = rel * (1.1 * gm[r] * fabs(uv[r]) + um[r] * fabs(sg)) + 1e-6 * fabs(ref[r]) +
                      1e-30;
            }
            if (!(fabs((double)y[r] - ref[r]) <= tol)) {
                CHECK(0, "%s: value %zu: %.9g vs %.9g (tol %.3g)", label, r, y[r], ref[r], tol);
                bad++;
            }
        }
        if (!bad) CHECK(1, "ok");
        /* side outputs hold what the unfused ops would have written */
        float *side = malloc((nx > ny ? nx : ny) * 4);
        if (p.norm_out) {
            gt_read(g, bufs[ixn], side, nx * 4);
            pl_rmsnorm_params np = {p.cols, 32, p.eps, 0, 0};
            float *xr = malloc(nx * 4);
            pl_gpu_ref_rmsnorm(&np, nv, x, nw, xr);
            int sb = 0;
            for (size_t i = 0; i < nx; i++)
                sb += !(fabsf(side[i] - xr[i]) <= 2e-6f * (fabsf(xr[i]) + 1e-3f));
            CHECK(sb == 0, "%s: normalised x: %d wrong", label, sb);
            free(xr);
        }
        for (int o = 0; o < 2; o++) {
            int idx = o ? iuo : igo;
            if (!idx) continue;
            gt_read(g, bufs[idx], side, ny * 4);
            const float *want = o ? uv : gv;
            const double *wm = o ? um : gm;
            int sb = 0;
            for (size_t i = 0; i < ny; i++)
                sb += !(fabs((double)side[i] - want[i]) <= 1e-5 * wm[i] + 1e-30);
            CHECK(sb == 0, "%s: %s side output: %d wrong", label, o ? "up" : "gate", sb);
        }
        free(side);
        free(gv), free(uv), free(gm), free(um);
    }
    pl_gpu_kernel_free(k);
    for (int i = 0; i < nb; i++) pl_gpu_buf_free(bufs[i]);
    for (int i = 0; i < nm; i++) free_mat(&m[i]);
    free(x), free(nw), free(bias), free(y0), free(y), free(ref), free(mag);
    if (pl_gpu_now() - t_start > 1.0)
        fprintf(stderr, "slow: %s %.1fs\n", label, pl_gpu_now() - t_start);
}

static void test_gemv(pl_gpu *g) {
    const pl_gpu_wtype types[4] = {PL_GW_F32, PL_GW_F16, PL_GW_Q4_0, PL_GW_Q8_0};
    int sg = pl_gpu_get_info(g)->has_subgroups;
    for (int ti = 0; ti < 4; ti++) {
        pl_gpu_wtype t = types[ti];
        int plain = t == PL_GW_F32 || t == PL_GW_F16;
        /* (rows, cols, threads, rows/wg, mode, norm, bias, parts, rows/part, subgroups, vectors) */
        struct {
            uint32_t rows, cols, T, R;
            pl_gemv_mode mode;
            int norm, bias;
            uint32_t parts, rpp;
            int sg;
            uint32_t nv;
            int only; /* -1: every type, else only this type (the heavy variants compile for
                       * seconds on lavapipe, so each runs for one type) */
        } cs[] = {
            {37, 64, 64, 4, PL_GEMV_STORE, 0, 0, 1, 0, 0, 1, -1},
            {64, 256, 32, 2, PL_GEMV_STORE, 1, 1, 1, 0, 0, 3, -1},
            {50, 128, 16, 1, PL_GEMV_ACCUM, 0, 1, 1, 0, 0, 2, -1},
            {45, 96, 64, 2, PL_GEMV_GATE_UP, 1, 0, 1, 0, 0, 1, -1},
            {70, 64, 64, 3, PL_GEMV_STORE, 0, 1, 3, 24, 0, 2, -1},
            {33, 64, 64, 4, PL_GEMV_ACCUM, 1, 0, 1, 0, 1, 2, -1},
            {45, 96, 128, 8, PL_GEMV_GATE_UP, 1, 0, 1, 0, 0, 1, PL_GW_F32},
            {29, 160, 32, 4, PL_GEMV_GATE_UP, 0, 0, 2, 16, 0, 1, PL_GW_Q8_0},
            {40, 128, 256, 2, PL_GEMV_GATE_UP, 1, 0, 1, 0, 1, 1, PL_GW_Q4_0},
        };
        for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++) {
            if ((cs[i].sg && !sg) || (cs[i].only >= 0 && cs[i].only != (int)t)) continue;
            pl_gemv_params p = {.type = t,
                                .rows = cs[i].rows,
                                .cols = cs[i].cols,
                                .threads = cs[i].T,
                                .rows_per_wg = cs[i].R,
                                .mode = cs[i].mode,
                                .norm = cs[i].norm,
                                .eps = 1e-5f,
                                .bias = cs[i].bias,
                                .parts = cs[i].parts,
                                .rows_per_part = cs[i].rpp,
                                .subgroups = cs[i].sg};
            /* side outputs on every other fused case */
            p.norm_out = p.norm && i % 2;
            p.gate_out = p.up_out = p.mode == PL_GEMV_GATE_UP && i % 2;
            if (pl_gemv_bindings(&p) - 1 > (int)pl_gpu_get_info(g)->max_storage_buffers)
                p.norm_out = p.gate_out = p.up_out = 0;
            gemv_case(g, p, cs[i].nv);
        }
        if (plain) {
            /* rows that are not a whole number of vectors: the scalar paths */
            uint32_t odd = t == PL_GW_F32 ? 172 : 20;
            gemv_case(g,
                      (pl_gemv_params){.type = t,
                                       .rows = 31,
                                       .cols = odd,
                                       .threads = 32,
                                       .rows_per_wg = 2,
                                       .mode = PL_GEMV_STORE,
                                       .norm = 1,
                                       .eps = 1e-6f,
                                       .bias = 1,
                                       .norm_out = 1,
                                       .parts = 1},
                      2);
            gemv_case(g,
                      (pl_gemv_params){.type = t,
                                       .rows = 17,
                                       .cols = odd,
                                       .threads = 64,
                                       .rows_per_wg = 4,
                                       .mode = PL_GEMV_GATE_UP,
                                       .up_out = 1,
                                       .parts = 2,
                                       .rows_per_part = 12},
                      1);
            gemv_case(g,
                      (pl_gemv_params){.type = t,
                                       .rows = 9,
                                       .cols = odd,
                                       .threads = 8,
                                       .rows_per_wg = 1,
                                       .mode = PL_GEMV_ACCUM,
                                       .norm = 1,
                                       .eps = 1e-5f,
                                       .bias = 1,
                                       .parts = 1},
                      3);
        }
    }
    /* subgroup rows: each subgroup owns its rows, no workgroup memory (fixed subgroup size) */
    const pl_gpu_info *info = pl_gpu_get_info(g);
    uint32_t S =
        info->has_subgroups && info->subgroup_min == info->subgroup_max ? info->subgroup_min : 0;
    CHECK(S || !info->has_subgroups || info->subgroup_min != info->subgroup_max, "subgroup size");
    for (int ti = 0; S && ti < 4; ti++) {
        pl_gpu_wtype t = types[ti];
        uint32_t cols = t == PL_GW_F32 ? 172 : t == PL_GW_F16 ? 96 : 128;
        gemv_case(g,
                  (pl_gemv_params){.type = t,
                                   .rows = 37,
                                   .cols = cols,
                                   .threads = 4 * S,
                                   .rows_per_wg = 2,
                                   .mode = PL_GEMV_STORE,
                                   .norm = 1,
                                   .eps = 1e-5f,
                                   .bias = 1,
                                   .norm_out = 1,
                                   .parts = 1,
                                   .sg_rows = S},
                  2);
        gemv_case(g,
                  (pl_gemv_params){.type = t,
                                   .rows = 29,
                                   .cols = cols,
                                   .threads = 2 * S,
                                   .rows_per_wg = 1,
                                   .mode = PL_GEMV_GATE_UP,
                                   .norm = 1,
                                   .eps = 1e-6f,
                                   .norm_out = 1,
                                   .up_out = 1,
                                   .parts = 1,
                                   .sg_rows = S},
                  1);
        gemv_case(g,
                  (pl_gemv_params){.type = t,
                                   .rows = 70,
                                   .cols = cols,
                                   .threads = S,
                                   .rows_per_wg = 4,
                                   .mode = PL_GEMV_ACCUM,
                                   .parts = 3,
                                   .rows_per_part = 24,
                                   .sg_rows = S},
                  3);
    }
    /* quantised activations (q8x, Q4_0/Q8_0): every mode, the norm, bias, parts, several
     * vectors, unrolled sweeps, up to 32 rows per workgroup, subgroup reduction and rows,
     * and the preloading sweep (the heavier shapes for one type each: lavapipe compiles
     * them for seconds). Fields: type, rows, cols, threads, rows/wg, mode, norm, bias, parts,
     * rows/part, unroll, subgroup reduce, subgroup rows (1: the adapter's size), preload,
     * side outputs, vectors. */
    static const struct {
        pl_gpu_wtype t;
        uint32_t rows, cols, T, R;
        pl_gemv_mode mode;
        int norm, bias;
        uint32_t parts, rpp, unroll;
        int sg, sgrows, preload, side;
        uint32_t nv;
    } q8[] = {
        {PL_GW_Q4_0, 37, 256, 32, 4, PL_GEMV_STORE, 1, 1, 1, 0, 1, 0, 0, 0, 1, 3},
        {PL_GW_Q8_0, 37, 256, 32, 4, PL_GEMV_STORE, 1, 1, 1, 0, 1, 0, 0, 0, 1, 3},
        {PL_GW_Q8_0, 70, 128, 32, 4, PL_GEMV_ACCUM, 0, 0, 3, 24, 1, 0, 0, 0, 0, 2},
        {PL_GW_Q4_0, 45, 96, 32, 4, PL_GEMV_GATE_UP, 1, 0, 1, 0, 2, 0, 0, 0, 1, 1},
        {PL_GW_Q4_0, 33, 64, 64, 32, PL_GEMV_STORE, 0, 0, 1, 0, 1, 1, 0, 0, 0, 1},
        {PL_GW_Q4_0, 45, 96, 32, 4, PL_GEMV_GATE_UP, 1, 0, 1, 0, 1, 0, 0, 1, 1, 1},
        {PL_GW_Q8_0, 70, 128, 32, 4, PL_GEMV_ACCUM, 0, 1, 3, 24, 1, 0, 0, 1, 0, 2},
        {PL_GW_Q4_0, 37, 128, 2, 2, PL_GEMV_STORE, 1, 0, 1, 0, 1, 0, 1, 0, 1, 2},
    };
    for (size_t i = 0; i < sizeof q8 / sizeof q8[0]; i++) {
        if ((q8[i].sg && !sg) || (q8[i].sgrows && !S)) continue;
        pl_gemv_params p = {.type = q8[i].t,
                            .rows = q8[i].rows,
                            .cols = q8[i].cols,
                            .threads = q8[i].sgrows ? q8[i].T * S : q8[i].T,
                            .rows_per_wg = q8[i].R,
                            .mode = q8[i].mode,
                            .norm = q8[i].norm,
                            .eps = 1e-5f,
                            .bias = q8[i].bias,
                            .parts = q8[i].parts,
                            .rows_per_part = q8[i].rpp,
                            .unroll = q8[i].unroll,
                            .subgroups = q8[i].sg,
                            .sg_rows = q8[i].sgrows ? S : 0,
                            .q8x = 1,
                            .preload = q8[i].preload};
        if (q8[i].side) {
            p.norm_out = p.norm && p.mode != PL_GEMV_GATE_UP;
            p.gate_out = p.up_out = p.mode == PL_GEMV_GATE_UP;
        }
        gemv_case(g, p, q8[i].nv);
    }
    /* q, k and v of one sweep: three output ranges */
    for (int ti = 0; ti < 4; ti++) {
        pl_gpu_wtype t = types[ti];
        gemv_case(g,
                  (pl_gemv_params){.type = t,
                                   .rows = 48,
                                   .cols = 64,
                                   .threads = 32,
                                   .rows_per_wg = 4,
                                   .mode = PL_GEMV_STORE,
                                   .norm = 1,
                                   .eps = 1e-6f,
                                   .norm_out = 1,
                                   .parts = 1,
                                   .split = {32, 40}},
                  2);
    }
    if (S)
        gemv_case(g,
                  (pl_gemv_params){.type = PL_GW_Q4_0,
                                   .rows = 96,
                                   .cols = 128,
                                   .threads = 2 * S,
                                   .rows_per_wg = 2,
                                   .mode = PL_GEMV_STORE,
                                   .norm = 1,
                                   .eps = 1e-6f,
                                   .parts = 1,
                                   .sg_rows = S,
                                   .unroll = 2,
                                   .split = {64, 80}},
                  1);
    /* four ranges (q, k, v and a gate; DeltaNet's qkv, z, beta, alpha), two columns, act q8 */
    gemv_case(g,
              (pl_gemv_params){.type = PL_GW_Q8_0,
                               .rows = 72,
                               .cols = 96,
                               .threads = 32,
                               .rows_per_wg = 4,
                               .mode = PL_GEMV_STORE,
                               .norm = 1,
                               .eps = 1e-6f,
                               .norm_out = 1,
                               .parts = 1,
                               .q8x = 1,
                               .split = {40, 56, 64}},
              2);
    gemv_case(g,
              (pl_gemv_params){.type = PL_GW_F32,
                               .rows = 52,
                               .cols = 64,
                               .threads = 64,
                               .rows_per_wg = 4,
                               .mode = PL_GEMV_STORE,
                               .parts = 1,
                               .split = {4, 8, 48}},
              3);
    /* several blocks per loop turn (the last turn partly past the row) */
    for (int ti = 0; ti < 4; ti++) {
        pl_gpu_wtype t = types[ti];
        uint32_t cols = t == PL_GW_F32 ? 172 : t == PL_GW_F16 ? 96 : 224;
        gemv_case(g,
                  (pl_gemv_params){.type = t,
                                   .rows = 21,
                                   .cols = cols,
                                   .threads = 16,
                                   .rows_per_wg = 4,
                                   .mode = PL_GEMV_GATE_UP,
                                   .norm = 1,
                                   .eps = 1e-5f,
                                   .norm_out = 1,
                                   .parts = 1,
                                   .unroll = ti % 2 ? 4 : 2},
                  2);
        if (S)
            gemv_case(g,
                      (pl_gemv_params){.type = t,
                                       .rows = 19,
                                       .cols = cols,
                                       .threads = 2 * S,
                                       .rows_per_wg = 2,
                                       .mode = PL_GEMV_ACCUM,
                                       .norm = 1,
                                       .eps = 1e-6f,
                                       .bias = 1,
                                       .parts = 1,
                                       .sg_rows = S,
                                       .unroll = ti % 2 ? 2 : 4},
                      1);
    }
    /* a head taller than one grid dimension: rows spread over a 2-D grid */
    uint32_t tall = pl_gpu_get_info(g)->max_groups_per_dim + 300;
    gemv_case(g,
              (pl_gemv_params){.type = PL_GW_F32,
                               .rows = tall,
                               .cols = 8,
                               .threads = 8,
                               .rows_per_wg = 1,
                               .mode = PL_GEMV_STORE,
                               .parts = 1},
              1);
    /* parameters a kernel cannot be built from are refused */
    char *src = NULL;
    pl_gemv_params bad = {.type = PL_GW_Q4_0,
                          .rows = 10,
                          .cols = 48,
                          .threads = 64,
                          .rows_per_wg = 4,
                          .mode = PL_GEMV_STORE,
                          .parts = 1};
    CHECK(pl_wgsl_gemv(&bad, &src) != PL_OK && !src, "48 columns of Q4_0 accepted");
    bad.cols = 64, bad.threads = 48;
    CHECK(pl_wgsl_gemv(&bad, &src) != PL_OK, "48 threads accepted");
    bad.threads = 64, bad.parts = 2, bad.rows_per_part = 6;
    CHECK(pl_wgsl_gemv(&bad, &src) != PL_OK, "part of 6 rows with 4 rows per group accepted");
    bad.parts = 1, bad.norm_out = 1;
    CHECK(pl_wgsl_gemv(&bad, &src) != PL_OK, "normalised-x output without the norm accepted");
    bad.norm_out = 0, bad.sg_rows = 48;
    CHECK(pl_wgsl_gemv(&bad, &src) != PL_OK, "subgroups of 48 accepted");
    bad.sg_rows = 0, bad.unroll = 3;
    CHECK(pl_wgsl_gemv(&bad, &src) != PL_OK, "unroll 3 accepted");
}

/* ------------------------------------------------------------------ RMSNorm */

/* ------------------------------------------------------------------ expert GEMV */

/* The gathered expert GEMV: p.n_exp experts of p.rows rows, n_tok tokens of p.n_used slots,
 * random expert ids with bad ones among them (zero rows); the row after the last slot must
 * stay poisoned. */
static void gemv_ids_case(pl_gpu *g, pl_gemv_params p, uint32_t n_tok) {
    uint32_t slots = n_tok * p.n_used, nxv = p.x_shared ? n_tok : slots;
    uint32_t all = p.rows * p.n_exp;
    unsigned parts = p.parts ? p.parts : 1;
    int nm = p.mode == PL_GEMV_GATE_UP ? 2 : 1;
    mat m[2];
    for (int i = 0; i < nm; i++) m[i] = make_mat(p.type, all, p.cols);
    int32_t *ids = malloc(slots * 4);
    for (uint32_t s = 0; s < slots; s++) {
        uint32_t r = gt_u32() % 8;
        ids[s] = r == 0 ? -1 : r == 1 ? (int32_t)p.n_exp : (int32_t)(gt_u32() % p.n_exp);
    }
    size_t nx = (size_t)nxv * p.cols, ny = (size_t)(slots + 1) * p.rows;
    float *x = malloc(nx * 4), *y = malloc(ny * 4), *ref = malloc(ny * 4);
    float *side = malloc(ny * 4), *one[2] = {malloc(ny * 4), malloc(ny * 4)};
    double *mag = malloc(ny * sizeof *mag), *om[2] = {malloc(ny * 8), malloc(ny * 8)};
    gt_fill(x, nx, -1, 1);
    pl_gpu_buf *bufs[16] = {0};
    pl_gpu_ref refs[16];
    int nb = 0, iside[2] = {0, 0};
    bufs[nb] = gt_buf(g, x, nx * 4), refs[nb] = (pl_gpu_ref){bufs[nb], 0, 0}, nb++;
    bufs[nb] = gt_buf(g, NULL, ny * 4), refs[nb] = (pl_gpu_ref){bufs[nb], 0, 0}, nb++;
    pl_gpu_ref_mat rm[2];
    for (int i = 0; i < nm; i++) {
        for (unsigned q = 0; q < parts; q++) {
            uint32_t r0 = parts > 1 ? q * p.rows_per_part : 0;
            uint32_t r1 = parts > 1 && r0 + p.rows_per_part < all ? r0 + p.rows_per_part : all;
            pl_gpu_buf *qb, *sb;
            upload_part(g, &m[i], r0, r1, &qb, &sb, &rm[i], (int)q);
            bufs[nb] = qb, refs[nb] = (pl_gpu_ref){qb, 0, 0}, nb++;
            if (sb) bufs[nb] = sb, refs[nb] = (pl_gpu_ref){sb, 0, 0}, nb++;
        }
    }
    for (int o = 0; o < 2; o++) /* the gate's and the up matrix's own products */
        if (o ? p.up_out : p.gate_out) {
            iside[o] = nb;
            bufs[nb] = gt_buf(g, NULL, ny * 4), refs[nb] = (pl_gpu_ref){bufs[nb], 0, 0}, nb++;
        }
    bufs[nb] = gt_buf(g, ids, slots * 4), refs[nb] = (pl_gpu_ref){bufs[nb], 0, 0}, nb++;
    pl_gpu_args a = {{slots}};
    bufs[nb] = gt_args(g, &a), refs[nb] = (pl_gpu_ref){bufs[nb], 0, 0}, nb++;
    CHECK(nb == pl_gemv_bindings(&p), "binding count %d != %d", nb, pl_gemv_bindings(&p));
    char label[128];
    snprintf(label, sizeof label,
             "expert gemv t%d mode %d %u x %ux%u, %u x %u%s T%u R%u sg%u/%d u%u parts %u q8x %d",
             p.type, p.mode, p.n_exp, p.rows, p.cols, n_tok, p.n_used, p.x_shared ? " shared" : "",
             p.threads, p.rows_per_wg, p.sg_rows, p.subgroups, p.unroll, parts, p.q8x);
    char *src = NULL;
    pl_gpu_kernel *k = gt_kernel(g, pl_wgsl_gemv(&p, &src), &src, label);
    if (k && gt_run(g, k, refs, nb, pl_gemv_groups(&p) * slots)) {
        gt_read(g, bufs[1], y, ny * 4);
        pl_gpu_ref_matmul_id(&p, rm, ids, slots, x, ref, mag);
        /* each matrix alone, to bound the error of gate/up (as gemv_case does) */
        pl_gemv_params sp = p;
        sp.mode = PL_GEMV_STORE, sp.gate_out = sp.up_out = 0;
        for (int i = 0; i < nm; i++)
            pl_gpu_ref_matmul_id(&sp, &rm[i], ids, slots, x, one[i], om[i]);
        int bad = 0;
        for (size_t i = 0; i < ny && bad < 3; i++) {
            int past = i >= (size_t)slots * p.rows;
            double tol = 1e-5 * mag[i] + 1e-6 * fabs(ref[i]) + 1e-30;
            if (nm == 2 && !past) {
                double sg = one[0][i] / (1 + exp(-(double)one[0][i]));
                tol = 1e-5 * (1.1 * om[0][i] * fabs(one[1][i]) + om[1][i] * fabs(sg)) +
                      1e-6 * fabs(ref[i]) + 1e-30;
            }
            if (past ? y[i] == y[i] : !(fabs((double)y[i] - ref[i]) <= tol)) {
                CHECK(0, "%s: value %zu: %.9g vs %.9g", label, i, y[i], past ? NAN : ref[i]);
                bad++;
            }
        }
        for (int o = 0; o < 2 && !bad; o++) {
            if (!iside[o]) continue;
            gt_read(g, bufs[iside[o]], side, ny * 4);
            for (size_t i = 0; i < (size_t)slots * p.rows && bad < 3; i++)
                if (!(fabs((double)side[i] - one[o][i]) <= 1e-5 * om[o][i] + 1e-30)) {
                    CHECK(0, "%s: %s side output %zu: %.9g vs %.9g", label, o ? "up" : "gate", i,
                          side[i], one[o][i]);
                    bad++;
                }
        }
        if (!bad) CHECK(1, "ok");
    }
    pl_gpu_kernel_free(k);
    for (int i = 0; i < nb; i++) pl_gpu_buf_free(bufs[i]);
    for (int i = 0; i < nm; i++) free_mat(&m[i]);
    free(ids), free(x), free(y), free(ref), free(mag), free(side);
    free(one[0]), free(one[1]), free(om[0]), free(om[1]);
}

static void test_gemv_ids(pl_gpu *g) {
    const pl_gpu_info *info = pl_gpu_get_info(g);
    uint32_t S =
        info->has_subgroups && info->subgroup_min == info->subgroup_max ? info->subgroup_min : 0;
    /* type, rows per expert, cols, experts, used, shared, threads, rows/wg, subgroup rows (1:
     * the adapter's size), subgroup reduce, unroll, parts, rows/part, q8x, preload, tokens */
    static const struct {
        pl_gpu_wtype t;
        uint32_t rows, cols, n_exp, n_used;
        int shared;
        uint32_t T, R, sgrows;
        int sg;
        uint32_t unroll, parts, rpp;
        int q8x, preload;
        uint32_t n_tok;
    } cs[] = {
        {PL_GW_F32, 13, 40, 5, 2, 1, 32, 1, 0, 0, 1, 1, 0, 0, 0, 2},
        {PL_GW_F16, 24, 64, 4, 3, 0, 64, 4, 0, 0, 1, 1, 0, 0, 0, 2},
        {PL_GW_Q4_0, 37, 96, 6, 2, 1, 64, 8, 0, 0, 1, 1, 0, 1, 0, 3},
        {PL_GW_Q8_0, 32, 128, 3, 3, 0, 128, 16, 0, 0, 1, 1, 0, 1, 0, 1},
        {PL_GW_Q4_0, 21, 64, 4, 2, 0, 64, 4, 0, 0, 2, 1, 0, 0, 0, 2},
        {PL_GW_Q8_0, 16, 64, 5, 2, 1, 64, 4, 0, 0, 1, 3, 28, 1, 0, 2},
        {PL_GW_F32, 16, 32, 5, 1, 0, 32, 4, 0, 0, 1, 2, 40, 0, 0, 3},
        {PL_GW_Q4_0, 30, 64, 3, 2, 1, 32, 2, 0, 0, 1, 1, 0, 1, 1, 2},
        {PL_GW_Q8_0, 19, 96, 4, 2, 1, 32, 2, 1, 0, 2, 1, 0, 1, 0, 2},
        {PL_GW_F16, 22, 96, 4, 4, 0, 64, 2, 0, 1, 1, 1, 0, 0, 0, 1},
    };
    for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++) {
        if ((cs[i].sgrows && !S) || (cs[i].sg && !info->has_subgroups)) continue;
        gemv_ids_case(g,
                      (pl_gemv_params){.type = cs[i].t,
                                       .rows = cs[i].rows,
                                       .cols = cs[i].cols,
                                       .threads = cs[i].sgrows ? cs[i].T * S / 32 : cs[i].T,
                                       .rows_per_wg = cs[i].R,
                                       .mode = PL_GEMV_STORE,
                                       .parts = cs[i].parts,
                                       .rows_per_part = cs[i].rpp,
                                       .subgroups = cs[i].sg,
                                       .sg_rows = cs[i].sgrows ? S : 0,
                                       .unroll = cs[i].unroll,
                                       .q8x = cs[i].q8x,
                                       .preload = cs[i].preload,
                                       .ids = 1,
                                       .n_exp = cs[i].n_exp,
                                       .n_used = cs[i].n_used,
                                       .x_shared = cs[i].shared},
                      cs[i].n_tok);
    }
    /* gate and up experts in one sweep (SwiGLU), with and without their side outputs */
    static const struct {
        pl_gpu_wtype t;
        uint32_t T, R, parts, rpp;
        int q8x, side;
    } gu[] = {
        {PL_GW_Q4_0, 64, 4, 1, 0, 1, 1},
        {PL_GW_Q8_0, 32, 2, 1, 0, 0, 0},
        {PL_GW_F16, 64, 4, 2, 40, 0, 1},
        {PL_GW_F32, 32, 1, 1, 0, 0, 0},
    };
    for (size_t i = 0; i < sizeof gu / sizeof gu[0]; i++)
        gemv_ids_case(g,
                      (pl_gemv_params){.type = gu[i].t,
                                       .rows = 16,
                                       .cols = 64,
                                       .threads = gu[i].T,
                                       .rows_per_wg = gu[i].R,
                                       .mode = PL_GEMV_GATE_UP,
                                       .gate_out = gu[i].side,
                                       .up_out = gu[i].side,
                                       .parts = gu[i].parts,
                                       .rows_per_part = gu[i].rpp,
                                       .q8x = gu[i].q8x,
                                       .ids = 1,
                                       .n_exp = 5,
                                       .n_used = 3,
                                       .x_shared = 1},
                      2);
    /* gathered experts take no bias and no norm, and a part must hold whole workgroups of
     * every expert */
    char *src = NULL;
    pl_gemv_params bad = {.type = PL_GW_F32,
                          .rows = 10,
                          .cols = 32,
                          .threads = 32,
                          .rows_per_wg = 4,
                          .mode = PL_GEMV_STORE,
                          .parts = 2,
                          .rows_per_part = 24,
                          .ids = 1,
                          .n_exp = 4,
                          .n_used = 2};
    CHECK(pl_wgsl_gemv(&bad, &src) != PL_OK && !src, "10 rows per expert in parts of 4-row groups");
    bad.parts = 1, bad.bias = 1;
    CHECK(pl_wgsl_gemv(&bad, &src) != PL_OK, "gathered experts with a bias accepted");
}

static void test_rmsnorm(pl_gpu *g) {
    const uint32_t cs[4] = {64, 172, 1000, 16}, ts[4] = {64, 32, 256, 16}, rows[4] = {1, 3, 2, 24};
    for (int i = 0; i < 8; i++) {
        pl_rmsnorm_params p = {cs[i % 4], ts[i % 4], 1e-6f, i >= 4, 0};
        uint32_t n = rows[i % 4] * p.cols;
        float *x = malloc(n * 4), *w = malloc(p.cols * 4), *y = malloc(n * 4), *ref = malloc(n * 4);
        gt_fill(x, n, -3, 3);
        gt_fill(w, p.cols, -2, 2);
        pl_gpu_args a = {{rows[i % 4]}};
        pl_gpu_buf *bx = gt_buf(g, x, n * 4), *by = p.inplace ? NULL : gt_buf(g, NULL, n * 4);
        pl_gpu_buf *bw = gt_buf(g, w, p.cols * 4), *ba = gt_args(g, &a);
        char *src = NULL;
        pl_gpu_kernel *k = gt_kernel(g, pl_wgsl_rmsnorm(&p, &src), &src, "rmsnorm");
        pl_gpu_ref refs[4] = {{bx, 0, 0}, {by, 0, 0}, {bw, 0, 0}, {ba, 0, 0}};
        if (p.inplace) refs[1] = refs[2], refs[2] = refs[3];
        if (k && gt_run(g, k, refs, p.inplace ? 3 : 4, rows[i % 4])) {
            gt_read(g, p.inplace ? bx : by, y, n * 4);
            pl_gpu_ref_rmsnorm(&p, rows[i % 4], x, w, ref);
            int bad = 0;
            for (uint32_t j = 0; j < n; j++)
                bad += !(fabsf(y[j] - ref[j]) <= 2e-6f * (fabsf(ref[j]) + 1e-3f));
            CHECK(bad == 0, "rmsnorm %u x %u inplace %d: %d wrong (y0 %g vs %g)", rows[i % 4],
                  p.cols, p.inplace, bad, y[0], ref[0]);
        }
        pl_gpu_kernel_free(k);
        pl_gpu_buf_free(bx), pl_gpu_buf_free(by), pl_gpu_buf_free(bw), pl_gpu_buf_free(ba);
        free(x), free(w), free(y), free(ref);
    }
}

/* The gated RMSNorm (in place, per head) on random shapes: x normalised and g = silu(z) *
 * x, into z itself (gate 1) or a poisoned buffer of its own (gate 2). */
static void test_rmsnorm_gate(pl_gpu *g) {
    for (int i = 0; i < 6; i++) {
        uint32_t T = 16u << gt_u32() % 5, rows = 1 + gt_u32() % 12;
        pl_rmsnorm_params p = {8 + gt_u32() % 250, T, 1e-6f, 1, 1 + i % 2};
        uint32_t n = rows * p.cols;
        float *x = malloc(n * 4), *w = malloc(p.cols * 4), *z = malloc(n * 4);
        float *y = malloc(n * 4), *gv = malloc(n * 4), *ref = malloc(n * 4);
        gt_fill(x, n, -3, 3);
        gt_fill(w, p.cols, -2, 2);
        gt_fill(z, n, -6, 6);
        pl_gpu_args a = {{rows}};
        pl_gpu_buf *bx = gt_buf(g, x, n * 4), *bw = gt_buf(g, w, p.cols * 4);
        pl_gpu_buf *bz = gt_buf(g, z, n * 4), *bg = p.gate == 2 ? gt_buf(g, NULL, n * 4) : NULL;
        pl_gpu_buf *ba = gt_args(g, &a);
        char *src = NULL;
        pl_gpu_kernel *k = gt_kernel(g, pl_wgsl_rmsnorm(&p, &src), &src, "rmsnorm gate");
        pl_gpu_ref refs[5] = {{bx, 0, 0}, {bw, 0, 0}, {bz, 0, 0}, {bg, 0, 0}, {ba, 0, 0}};
        if (p.gate == 1) refs[3] = refs[4];
        if (k && gt_run(g, k, refs, p.gate == 1 ? 4 : 5, rows)) {
            gt_read(g, bx, y, n * 4);
            gt_read(g, p.gate == 1 ? bz : bg, gv, n * 4);
            pl_gpu_ref_rmsnorm(&p, rows, x, w, ref);
            int bad = 0;
            for (uint32_t j = 0; j < n; j++) {
                double want = z[j] / (1.0 + exp(-(double)z[j])) * ref[j];
                bad += !(fabsf(y[j] - ref[j]) <= 2e-6f * (fabsf(ref[j]) + 1e-3f));
                bad += !(fabs(gv[j] - want) <= 1e-5 * (fabs(want) + 1e-3));
            }
            CHECK(bad == 0, "gated rmsnorm %u x %u T %u gate %d: %d wrong (g0 %g)", rows, p.cols, T,
                  p.gate, bad, gv[0]);
        }
        pl_gpu_kernel_free(k);
        pl_gpu_buf_free(bx), pl_gpu_buf_free(bw), pl_gpu_buf_free(bz), pl_gpu_buf_free(bg);
        pl_gpu_buf_free(ba);
        free(x), free(w), free(z), free(y), free(gv), free(ref);
    }
    pl_rmsnorm_params bad = {64, 32, 1e-6f, 0, 1};
    char *src = NULL;
    CHECK(pl_wgsl_rmsnorm(&bad, &src) != PL_OK && !src, "a gate on a norm not in place accepted");
}

/* ------------------------------------------------------------------ RoPE */

/* Two f16 cache values within the f32 checks' absolute slack, 1e-6 * (2 + |w|). */
static int f16_close(uint16_t u, uint16_t w) {
    float a = pl_f16_to_f32(u), b = pl_f16_to_f32(w);
    return fabsf(a - b) <= 1e-6f * (2 + fabsf(b));
}

static void rope_case(pl_gpu *g, pl_rope_params_gpu p, uint32_t n, float base, int factors) {
    uint32_t positions = 64, pos0 = gt_u32() % (positions - n + 1);
    uint32_t HD = p.head_dim, HDV = p.head_dim_v ? p.head_dim_v : HD;
    size_t nx = (size_t)n * p.n_heads * HD, nv = (size_t)n * p.n_heads * HDV,
           tn = (size_t)positions * p.rot_dim;
    size_t es = p.cache_f16 ? 2 : 4, kn = (size_t)positions * p.n_heads * HD,
           vn = (size_t)positions * p.n_heads * HDV;
    float *x = malloc(nx * 4), *ref = malloc(nx * 4), *tab = malloc(tn * 4), fac[512],
          *nw = malloc(HD * 4);
    float *v = malloc(nv * 4);
    unsigned char *kc = malloc(kn * es), *vc = malloc(vn * es), *kr = malloc(kn * es),
                  *vr = malloc(vn * es);
    gt_fill(x, nx, -2, 2);
    gt_fill(v, nv, -2, 2);
    gt_fill(nw, HD, 0.5f, 1.5f);
    gt_fill(fac, p.rot_dim / 2, 1, 8);
    memset(kr, 0xff, kn * es), memset(vr, 0xff, vn * es); /* poison: untouched rows stay so */
    pl_gpu_rope_table(positions, p.rot_dim, base, 0.5f, factors ? fac : NULL, tab);
    pl_gpu_args a = {{pos0, n}};
    pl_gpu_buf *bufs[8] = {0};
    pl_gpu_ref refs[8];
    int nb = 0;
    bufs[nb] = gt_buf(g, x, nx * 4), refs[nb] = (pl_gpu_ref){bufs[nb], 0, 0}, nb++;
    bufs[nb] = gt_buf(g, tab, tn * 4), refs[nb] = (pl_gpu_ref){bufs[nb], 0, 0}, nb++;
    if (p.norm) bufs[nb] = gt_buf(g, nw, HD * 4), refs[nb] = (pl_gpu_ref){bufs[nb], 0, 0}, nb++;
    int ik = nb, iv = 0;
    if (p.store) bufs[nb] = gt_buf(g, NULL, kn * es), refs[nb] = (pl_gpu_ref){bufs[nb], 0, 0}, nb++;
    if (p.store_v) {
        bufs[nb] = gt_buf(g, v, nv * 4), refs[nb] = (pl_gpu_ref){bufs[nb], 0, 0}, nb++;
        iv = nb;
        bufs[nb] = gt_buf(g, NULL, vn * es), refs[nb] = (pl_gpu_ref){bufs[nb], 0, 0}, nb++;
    }
    bufs[nb] = gt_args(g, &a), refs[nb] = (pl_gpu_ref){bufs[nb], 0, 0}, nb++;
    char *src = NULL, label[120];
    snprintf(label, sizeof label,
             "rope %u heads hd%u rot%u neox%d rows %u norm%d store%d/%d f16 %d", p.n_heads, HD,
             p.rot_dim, p.neox, n, p.norm, p.store, p.store_v, p.cache_f16);
    pl_gpu_kernel *k = gt_kernel(g, pl_wgsl_rope(&p, &src), &src, label);
    if (k && gt_run(g, k, refs, nb, n * p.n_heads)) {
        float *y = malloc(nx * 4);
        gt_read(g, bufs[0], y, nx * 4);
        memcpy(ref, x, nx * 4);
        pl_gpu_ref_rope(&p, tab, pos0, n, ref, nw, kr, v, vr);
        int bad = 0;
        for (size_t i = 0; i < nx; i++)
            bad += !(fabsf(y[i] - ref[i]) <= 1e-6f * (2 + fabsf(ref[i])));
        CHECK(bad == 0, "%s: %d wrong (%g vs %g)", label, bad, y[0], ref[0]);
        for (int c = 0; c < 2; c++) {
            if (!(c == 0 ? p.store : p.store_v)) continue;
            size_t cn = c == 0 ? kn : vn;
            unsigned char *got = c == 0 ? kc : vc, *want = c == 0 ? kr : vr;
            gt_read(g, bufs[c == 0 ? ik : iv], got, cn * es);
            int cb = 0;
            for (size_t i = 0; i < cn; i++) {
                if (es == 4) {
                    float u, w;
                    memcpy(&u, got + 4 * i, 4), memcpy(&w, want + 4 * i, 4);
                    cb += memcmp(&u, &w, 4) != 0 && !(fabsf(u - w) <= 1e-6f * (2 + fabsf(w)));
                } else {
                    uint16_t u, w;
                    memcpy(&u, got + 2 * i, 2), memcpy(&w, want + 2 * i, 2);
                    /* a rotated value may differ in its last f32 bits, so its f16 by one step,
                     * or by the f32 check's absolute slack near zero (subnormal f16 steps
                     * are 6e-8: a*c - b*s of values ~1 cancels to there) */
                    cb += u != w && !(w != 0xffff && (u - w == 1 || w - u == 1 || f16_close(u, w)));
                }
            }
            CHECK(cb == 0, "%s: %s cache: %d wrong", label, c ? "V" : "K", cb);
        }
        free(y);
    }
    pl_gpu_kernel_free(k);
    for (int i = 0; i < nb; i++) pl_gpu_buf_free(bufs[i]);
    free(x), free(ref), free(tab), free(nw), free(v), free(kc), free(vc), free(kr), free(vr);
}

/* q and k in one dispatch: q (norm) then k (norm, both caches), against two references. */
static void rope_pair_case(pl_gpu *g, uint32_t nq, uint32_t nk, uint32_t HD, int neox, int f16,
                           uint32_t n) {
    uint32_t positions = 32, pos0 = gt_u32() % (positions - n + 1);
    size_t xq = (size_t)n * nq * HD, xk = (size_t)n * nk * HD, tn = (size_t)positions * HD;
    size_t es = f16 ? 2 : 4, cn = (size_t)positions * nk * HD;
    float *q = malloc(xq * 4), *k = malloc(xk * 4), *v = malloc(xk * 4), *tab = malloc(tn * 4);
    float *qn = malloc(HD * 4), *kn = malloc(HD * 4), *rq = malloc(xq * 4), *rk = malloc(xk * 4);
    unsigned char *kr = malloc(cn * es), *vr = malloc(cn * es), *got = malloc(cn * es);
    gt_fill(q, xq, -2, 2), gt_fill(k, xk, -2, 2), gt_fill(v, xk, -2, 2);
    gt_fill(qn, HD, 0.5f, 1.5f), gt_fill(kn, HD, 0.5f, 1.5f);
    memset(kr, 0xff, cn * es), memset(vr, 0xff, cn * es);
    pl_gpu_rope_table(positions, HD, 1e6f, 1.0f, NULL, tab);
    pl_rope_params_gpu p = {.n_heads = nq,
                            .head_dim = HD,
                            .rot_dim = HD,
                            .neox = neox,
                            .threads = 32,
                            .norm = 1,
                            .eps = 1e-6f,
                            .store = 1,
                            .store_v = 1,
                            .cache_f16 = f16,
                            .head_dim_v = HD,
                            .pair_heads = nk,
                            .pair_norm = 1,
                            .sg = f16 && pl_gpu_get_info(g)->has_subgroups};
    pl_gpu_args a = {{pos0, n}};
    pl_gpu_buf *b[10];
    b[0] = gt_buf(g, q, xq * 4), b[1] = gt_buf(g, tab, tn * 4), b[2] = gt_buf(g, qn, HD * 4);
    b[3] = gt_buf(g, k, xk * 4), b[4] = gt_buf(g, kn, HD * 4), b[5] = gt_buf(g, NULL, cn * es);
    b[6] = gt_buf(g, v, xk * 4), b[7] = gt_buf(g, NULL, cn * es), b[8] = gt_args(g, &a);
    pl_gpu_ref refs[9];
    for (int i = 0; i < 9; i++) refs[i] = (pl_gpu_ref){b[i], 0, 0};
    char *src = NULL;
    pl_gpu_kernel *kk = gt_kernel(g, pl_wgsl_rope(&p, &src), &src, "rope pair");
    if (kk && gt_run(g, kk, refs, 9, n * (nq + nk))) {
        float *gq = malloc(xq * 4), *gk = malloc(xk * 4);
        gt_read(g, b[0], gq, xq * 4);
        gt_read(g, b[3], gk, xk * 4);
        memcpy(rq, q, xq * 4), memcpy(rk, k, xk * 4);
        pl_rope_params_gpu one = p;
        one.pair_heads = 0, one.pair_norm = 0, one.store = one.store_v = 0, one.sg = 0;
        pl_gpu_ref_rope(&one, tab, pos0, n, rq, qn, NULL, NULL, NULL);
        one.n_heads = nk, one.store = one.store_v = 1;
        pl_gpu_ref_rope(&one, tab, pos0, n, rk, kn, kr, v, vr);
        int bad = 0;
        for (size_t i = 0; i < xq; i++)
            bad += !(fabsf(gq[i] - rq[i]) <= 1e-6f * (2 + fabsf(rq[i])));
        for (size_t i = 0; i < xk; i++)
            bad += !(fabsf(gk[i] - rk[i]) <= 1e-6f * (2 + fabsf(rk[i])));
        for (int c = 0; c < 2; c++) {
            gt_read(g, b[c ? 7 : 5], got, cn * es);
            unsigned char *want = c ? vr : kr;
            for (size_t i = 0; i < cn; i++) {
                if (es == 4) {
                    float u, w;
                    memcpy(&u, got + 4 * i, 4), memcpy(&w, want + 4 * i, 4);
                    bad += memcmp(&u, &w, 4) != 0 && !(fabsf(u - w) <= 1e-6f * (2 + fabsf(w)));
                } else {
                    uint16_t u, w;
                    memcpy(&u, got + 2 * i, 2), memcpy(&w, want + 2 * i, 2);
                    bad +=
                        u != w && !(w != 0xffff && (u - w == 1 || w - u == 1 || f16_close(u, w)));
                }
            }
        }
        CHECK(bad == 0, "rope pair %u+%u heads hd%u neox%d f16 %d rows %u: %d wrong", nq, nk, HD,
              neox, f16, n, bad);
        free(gq), free(gk);
    }
    pl_gpu_kernel_free(kk);
    for (int i = 0; i < 9; i++) pl_gpu_buf_free(b[i]);
    free(q), free(k), free(v), free(tab), free(qn), free(kn), free(rq), free(rk);
    free(kr), free(vr), free(got);
}

static void test_rope(pl_gpu *g) {
    rope_pair_case(g, 4, 2, 32, 1, 1, 1);
    rope_pair_case(g, 8, 2, 16, 0, 0, 3);
    /* (heads, head dim, rot, neox, threads, norm, eps, store, store_v, f16, hdv) */
    rope_case(g, (pl_rope_params_gpu){4, 16, 16, 1, 32, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, 1, 1e6f, 0);
    rope_case(g, (pl_rope_params_gpu){8, 8, 8, 0, 64, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, 5, 1e4f, 0);
    rope_case(g, (pl_rope_params_gpu){2, 32, 16, 1, 16, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, 3, 1e4f, 1);
    rope_case(g, (pl_rope_params_gpu){2, 128, 128, 1, 64, 1, 1e-6f, 0, 0, 0, 0, 0, 0, 0, 0}, 2,
              1e6f, 0);
    rope_case(g, (pl_rope_params_gpu){2, 4, 4, 0, 8, 0, 0, 1, 1, 1, 4, 0, 0, 0, 0}, 1, 1e4f, 1);
    rope_case(g, (pl_rope_params_gpu){4, 32, 32, 1, 32, 1, 1e-6f, 1, 1, 1, 32, 0, 0, 0, 0}, 3, 1e6f,
              0);
    rope_case(g, (pl_rope_params_gpu){2, 16, 8, 0, 32, 1, 1e-5f, 1, 1, 0, 8, 0, 0, 0, 0}, 2, 1e4f,
              0);
    rope_case(g, (pl_rope_params_gpu){4, 16, 16, 1, 16, 0, 0, 1, 0, 1, 0, 0, 0, 0, 0}, 1, 1e4f, 0);
}

/* ------------------------------------------------------------------ copies */

static size_t esize(pl_gpu_etype e) {
    return e == PL_GE_F16 ? 2 : 4;
}

static void copy_case(pl_gpu *g, pl_gpu_etype se, pl_gpu_etype de, int inplace, uint32_t src0,
                      uint32_t dst0, uint32_t count) {
    uint32_t ns = 200, nd = 200;
    pl_copy_params p = {se, de, 32, inplace};
    unsigned char *s = malloc(ns * 4), *d = malloc(nd * 4), *ref = malloc(nd * 4),
                  *got = malloc(nd * 4);
    for (uint32_t i = 0; i < ns; i++) {
        if (se == PL_GE_F16)
            ((uint16_t *)s)[i] = gt_f16(-100, 100);
        else if (se == PL_GE_F32)
            ((float *)s)[i] = gt_unif(-100, 100);
        else
            ((int32_t *)s)[i] = (int32_t)gt_u32();
    }
    for (uint32_t i = 0; i < nd * 4; i++) d[i] = (unsigned char)gt_u32();
    if (inplace) memcpy(d, s, ns * esize(se));
    pl_gpu_args a = {{src0, dst0, count}};
    pl_gpu_buf *bs = gt_buf(g, inplace ? d : s, ns * esize(se)),
               *bd = inplace ? NULL : gt_buf(g, d, nd * esize(de));
    pl_gpu_buf *ba = gt_args(g, &a);
    char *src = NULL, label[80];
    snprintf(label, sizeof label, "copy %d->%d inplace %d [%u..+%u] -> %u", se, de, inplace, src0,
             count, dst0);
    pl_gpu_kernel *k = gt_kernel(g, pl_wgsl_copy(&p, &src), &src, label);
    pl_gpu_ref refs[3] = {{bs, 0, 0}, {bd, 0, 0}, {ba, 0, 0}};
    if (inplace) refs[1] = refs[2];
    if (k && gt_run(g, k, refs, inplace ? 2 : 3, pl_copy_groups(&p, dst0, count))) {
        size_t bytes = nd * esize(de);
        if (inplace) bytes = ns * esize(se);
        gt_read(g, inplace ? bs : bd, got, bytes);
        memcpy(ref, d, bytes);
        pl_gpu_ref_copy(&p, inplace ? d : s, ref, src0, dst0, count);
        /* f32 -> f16 may round either way on some devices: allow one f16 step there */
        int bad = 0;
        for (size_t i = 0; i < bytes / esize(de); i++) {
            if (de == PL_GE_F16) {
                uint16_t x = ((uint16_t *)got)[i], y = ((uint16_t *)ref)[i];
                bad += x != y && !(se == PL_GE_F32 && (x - y == 1 || y - x == 1));
            } else {
                bad += memcmp(got + 4 * i, ref + 4 * i, 4) != 0;
            }
        }
        CHECK(bad == 0, "%s: %d elements wrong", label, bad);
    }
    pl_gpu_kernel_free(k);
    pl_gpu_buf_free(bs), pl_gpu_buf_free(bd), pl_gpu_buf_free(ba);
    free(s), free(d), free(ref), free(got);
}

static void test_copy(pl_gpu *g) {
    copy_case(g, PL_GE_F32, PL_GE_F32, 0, 3, 17, 100);
    copy_case(g, PL_GE_I32, PL_GE_I32, 0, 0, 5, 1);
    copy_case(g, PL_GE_F32, PL_GE_F16, 0, 1, 7, 64);  /* odd start: a shared first word */
    copy_case(g, PL_GE_F32, PL_GE_F16, 0, 0, 10, 33); /* odd end */
    copy_case(g, PL_GE_F16, PL_GE_F16, 0, 5, 2, 99);
    copy_case(g, PL_GE_F16, PL_GE_F32, 0, 9, 0, 150);
    copy_case(g, PL_GE_F32, PL_GE_F32, 1, 0, 120, 50);
    copy_case(g, PL_GE_F16, PL_GE_F16, 1, 1, 151, 40);
}

/* ------------------------------------------------------------------ top-k */

/* direct: one workgroup per row writes the k best itself (no merge stage); softmax: the
 * values written are the softmax of the k picked (the fused MoE router) */
/* rank: the one-pass kernel by rank (the MoE router's, direct only), with random workgroup
 * sizes; gate > 0: it also computes the shared expert's gate, a dot product of gate values */
static void topk_case_r(pl_gpu *g, uint32_t n, uint32_t k, uint32_t rows, int vals, int direct,
                        int softmax, int rank, uint32_t gate) {
    size_t nx = (size_t)n * (rows + 1);
    float *x = malloc(nx * 4);
    for (size_t i = 0; i < nx; i++) {
        uint32_t r = gt_u32();
        /* few distinct values so ties are common, plus NaNs and infinities */
        x[i] = (float)(r % 23) - 11.0f;
        if (r % 97 == 0) x[i] = NAN;
        if (r % 101 == 0) x[i] = -INFINITY;
    }
    uint32_t row0 = 1, dst0 = 2; /* skip a row of x and two ids: offsets are honoured */
    pl_topk_params s1 = {n,
                         k,
                         direct ? n : 256,
                         rank ? 32u << gt_u32() % 4 : 64,
                         0,
                         direct ? vals : 0,
                         direct,
                         direct ? softmax : 0,
                         rank,
                         gate};
    uint32_t nc = pl_topk_chunks(&s1);
    pl_topk_params s2 = {nc * k, k, 0, 64, 1, vals, 0, softmax, 0, 0};
    /* the gate's x (rows + 1 rows: row0 is honoured), weight and output (poisoned) */
    size_t ngx = (size_t)gate * (rows + 1);
    float *gx = malloc((ngx + gate + rows + 1) * 4 + 4), *gw = gx + ngx, *go = gw + gate;
    for (size_t i = 0; i < ngx + gate; i++) gx[i] = (float)((int)(gt_u32() % 2001) - 1000) / 997.0f;
    memset(go, 0xff, (rows + 1) * 4);
    pl_gpu_buf *bgx = gate ? gt_buf(g, gx, ngx * 4) : NULL,
               *bgw = gate ? gt_buf(g, gw, gate * 4) : NULL,
               *bgo = gate ? gt_buf(g, go, (rows + 1) * 4) : NULL;
    pl_gpu_args a1 = {{row0, rows, dst0}}, a2 = {{dst0, rows}};
    pl_gpu_buf *bx = gt_buf(g, x, nx * 4), *bp = gt_buf(g, NULL, (size_t)rows * nc * k * 8);
    float *poison = malloc((dst0 + rows * k) * 4);
    memset(poison, 0xff, (dst0 + rows * k) * 4); /* NaN, and id -1 */
    pl_gpu_buf *bi = gt_buf(g, poison, (dst0 + rows * k) * 4),
               *bv = gt_buf(g, poison, rows * k * 4);
    pl_gpu_buf *ba1 = gt_args(g, &a1), *ba2 = gt_args(g, &a2);
    char *src = NULL;
    pl_gpu_kernel *k1 = gt_kernel(g, pl_wgsl_topk(&s1, &src), &src, "topk1");
    pl_gpu_kernel *k2 = gt_kernel(g, pl_wgsl_topk(&s2, &src), &src, "topk2");
    pl_gpu_ref r1[7] = {{bx, 0, 0}, {bp, 0, 0}, {ba1, 0, 0}};
    pl_gpu_ref r2[4] = {{bp, 0, 0}, {bi, 0, 0}, {bv, 0, 0}, {ba2, 0, 0}};
    if (!vals) r2[2] = r2[3];
    int n1 = 3;
    if (direct) { /* x, then stage 2's outputs, the gate's bindings */
        n1 = 0;
        r1[n1++] = (pl_gpu_ref){bx, 0, 0};
        r1[n1++] = (pl_gpu_ref){bi, 0, 0};
        if (vals) r1[n1++] = (pl_gpu_ref){bv, 0, 0};
        if (gate) {
            r1[n1++] = (pl_gpu_ref){bgx, 0, 0};
            r1[n1++] = (pl_gpu_ref){bgw, 0, 0};
            r1[n1++] = (pl_gpu_ref){bgo, 0, 0};
        }
        r1[n1++] = (pl_gpu_ref){ba1, 0, 0};
    }
    pl_gpu_bind *b1 = NULL, *b2 = NULL;
    if (k1 && k2 && pl_gpu_bind_new(g, k1, r1, n1, &b1) == PL_OK &&
        pl_gpu_bind_new(g, k2, r2, vals ? 4 : 3, &b2) == PL_OK) {
        pl_gpu_begin(g);
        pl_gpu_dispatch(g, k1, b1, rows * nc);
        if (!direct) pl_gpu_dispatch(g, k2, b2, rows);
        CHECK(pl_gpu_submit(g) == PL_OK, "%s", pl_last_error());
        int32_t *ids = malloc((dst0 + rows * k) * 4);
        float *gv = malloc(rows * k * 4), *rv = malloc(k * 4), *sm = malloc(k * 4);
        uint32_t *rid = malloc(k * 4);
        gt_read(g, bi, ids, (dst0 + rows * k) * 4);
        if (vals) gt_read(g, bv, gv, rows * k * 4);
        int bad = 0;
        for (uint32_t r = 0; r < rows; r++) {
            pl_gpu_ref_topk(x + (size_t)(row0 + r) * n, n, k, rv, rid);
            if (softmax) pl_gpu_ref_softmax(rv, 1, k, sm);
            for (uint32_t j = 0; j < k; j++) {
                bad += ids[dst0 + r * k + j] != (int32_t)rid[j];
                float v = gv[r * k + j];
                if (vals && !softmax) bad += memcmp(&v, &rv[j], 4) != 0;
                if (softmax && sm[j] == sm[j])
                    bad += !(fabsf(v - sm[j]) <= 1e-6f * fabsf(sm[j]) + 1e-7f);
                if (softmax && sm[j] != sm[j]) bad += v == v;
            }
        }
        CHECK(bad == 0, "top-%u of %u x %u rows%s%s%s: %d differ", k, n, rows,
              direct ? ", direct" : "", softmax ? ", softmax" : "", rank ? ", by rank" : "", bad);
        if (gate) {
            float *gr = malloc((rows + 1) * 4);
            gt_read(g, bgo, gr, (rows + 1) * 4);
            int gbad = 0;
            double worst = 0; /* error over the sum of |terms| */
            for (uint32_t r = 0; r < rows; r++) {
                double want = 0, mag = 0;
                for (uint32_t c = 0; c < gate; c++) {
                    double t = (double)gw[c] * gx[(size_t)(row0 + r) * gate + c];
                    want += t, mag += fabs(t);
                }
                gbad += !(fabs(gr[row0 + r] - want) <= 1e-6 * mag + 1e-7);
                if (mag > 0 && fabs(gr[row0 + r] - want) / mag > worst)
                    worst = fabs(gr[row0 + r] - want) / mag;
            }
            fprintf(stderr, "shared gate of %u by the top-k kernel: error %.2e of sum |w x|\n",
                    gate, worst);
            uint32_t untouched = 0xffffffffu; /* row 0 is before row0: not written */
            gbad += memcmp(&gr[0], &untouched, 4) != 0;
            CHECK(gbad == 0, "top-%u of %u x %u rows by rank, shared gate of %u: %d differ", k, n,
                  rows, gate, gbad);
            free(gr);
        }
        free(ids), free(gv), free(rv), free(rid), free(sm);
    } else {
        CHECK(0, "top-k: %s", pl_last_error());
    }
    pl_gpu_bind_free(b1), pl_gpu_bind_free(b2);
    pl_gpu_kernel_free(k1), pl_gpu_kernel_free(k2);
    pl_gpu_buf_free(bx), pl_gpu_buf_free(bp), pl_gpu_buf_free(bi), pl_gpu_buf_free(bv);
    pl_gpu_buf_free(ba1), pl_gpu_buf_free(ba2);
    pl_gpu_buf_free(bgx), pl_gpu_buf_free(bgw), pl_gpu_buf_free(bgo);
    free(x), free(poison), free(gx);
}

static void topk_case(pl_gpu *g, uint32_t n, uint32_t k, uint32_t rows, int vals, int direct,
                      int softmax) {
    topk_case_r(g, n, k, rows, vals, direct, softmax, 0, 0);
    if (direct && n <= PL_TOPK_RANK_MAX) topk_case_r(g, n, k, rows, vals, direct, softmax, 1, 0);
}

static void test_topk(pl_gpu *g) {
    topk_case(g, 1, 1, 1, 0, 0, 0);
    topk_case(g, 2, 3, 1, 1, 0, 0); /* fewer values than k: the rest are (-inf, -1) */
    topk_case(g, 100, 1, 3, 0, 0, 0);
    topk_case(g, 1000, 5, 1, 1, 0, 0);
    topk_case(g, 5000, 40, 1, 1, 0, 0);
    topk_case(g, 70000, 1, 2, 0, 0, 0);
    topk_case(g, 2, 3, 2, 1, 1, 0);
    topk_case(g, 300, 8, 3, 1, 1, 0);
    topk_case(g, 1000, 1, 2, 0, 1, 0);
    /* the router: softmax of the k picked, one workgroup or merged; random shapes */
    topk_case(g, 256, 8, 3, 1, 1, 1);
    topk_case(g, 2, 3, 2, 1, 1, 1);
    topk_case(g, 3000, 6, 2, 1, 0, 1);
    for (int i = 0; i < 3; i++) {
        uint32_t n = 1 + gt_u32() % 1024, k = 1 + gt_u32() % (n < 16 ? n : 16);
        topk_case(g, n, k, 1 + gt_u32() % 4, 1, 1, 1);
    }
    /* the MoE router by rank with the shared expert's gate row (qwen3.5-35b-a3b: 256
     * experts, 8 used, 2048 columns), softmax or not, and a random shape */
    topk_case_r(g, 256, 8, 2, 1, 1, 1, 1, 2048);
    topk_case_r(g, 256, 8, 1, 1, 1, 0, 1, 64);
    topk_case_r(g, 1 + gt_u32() % 1024, 1 + gt_u32() % 16, 1 + gt_u32() % 3, 1, 1, 1, 1,
                1 + gt_u32() % 3000);
}

/* ------------------------------------------------------------------ embedding */

static void embed_case(pl_gpu *g, pl_gpu_wtype t, uint32_t cols, uint32_t parts) {
    uint32_t rows = 50, rpp = parts == 2 ? 28 : 20, n = 4;
    mat m = make_mat(t, rows, cols);
    pl_embed_params p = {t, rows, cols, 64, parts, parts > 1 ? rpp : 0};
    int32_t ids[4] = {(int32_t)(gt_u32() % rows), -3, (int32_t)rows, (int32_t)(gt_u32() % rows)};
    pl_gpu_buf *bufs[12] = {0};
    pl_gpu_ref refs[12];
    int nb = 0;
    bufs[nb] = gt_buf(g, ids, sizeof ids), refs[nb] = (pl_gpu_ref){bufs[nb], 0, 0}, nb++;
    bufs[nb] = gt_buf(g, NULL, n * cols * 4), refs[nb] = (pl_gpu_ref){bufs[nb], 0, 0}, nb++;
    pl_gpu_ref_mat rm;
    for (uint32_t q = 0; q < parts; q++) {
        uint32_t r0 = parts > 1 ? q * rpp : 0, r1 = parts > 1 && r0 + rpp < rows ? r0 + rpp : rows;
        pl_gpu_buf *qb, *sb;
        upload_part(g, &m, r0, r1, &qb, &sb, &rm, (int)q);
        bufs[nb] = qb, refs[nb] = (pl_gpu_ref){qb, 0, 0}, nb++;
        if (sb) bufs[nb] = sb, refs[nb] = (pl_gpu_ref){sb, 0, 0}, nb++;
    }
    pl_gpu_args a = {{n}};
    bufs[nb] = gt_args(g, &a), refs[nb] = (pl_gpu_ref){bufs[nb], 0, 0}, nb++;
    char *src = NULL;
    pl_gpu_kernel *k = gt_kernel(g, pl_wgsl_embed(&p, &src), &src, "embed");
    if (k && gt_run(g, k, refs, nb, n)) {
        float *x = malloc(n * cols * 4), *ref = malloc(n * cols * 4);
        gt_read(g, bufs[1], x, n * cols * 4);
        pl_gpu_ref_embed(&p, &rm, ids, n, ref);
        CHECK(!memcmp(x, ref, n * cols * 4), "embed type %d parts %u: x0 %g vs %g", t, parts, x[0],
              ref[0]);
        free(x), free(ref);
    }
    pl_gpu_kernel_free(k);
    for (int i = 0; i < nb; i++) pl_gpu_buf_free(bufs[i]);
    free_mat(&m);
}

static void test_embed(pl_gpu *g) {
    embed_case(g, PL_GW_F32, 20, 1);
    embed_case(g, PL_GW_F32, 64, 3);
    embed_case(g, PL_GW_F16, 20, 1);
    embed_case(g, PL_GW_F16, 64, 2);
    embed_case(g, PL_GW_Q4_0, 64, 1);
    embed_case(g, PL_GW_Q4_0, 96, 3);
    embed_case(g, PL_GW_Q8_0, 64, 1);
    embed_case(g, PL_GW_Q8_0, 96, 2);
}

/* ------------------------------------------------------------------ element-wise */

static void test_ew(pl_gpu *g) {
    for (int op = 0; op < 2; op++) {
        for (int alias = 0; alias < 4; alias++) {
            uint32_t n = 300;
            float *a = malloc(n * 4), *b = malloc(n * 4), *o = malloc(n * 4), *ref = malloc(n * 4);
            gt_fill(a, n, -6, 6);
            gt_fill(b, n, -2, 2);
            pl_ew_params p = {(pl_ew_op)op, alias, 64};
            pl_gpu_args args = {{n - 7}}; /* the last values must stay untouched */
            pl_gpu_buf *ba = gt_buf(g, a, n * 4), *bb = alias == 3 ? NULL : gt_buf(g, b, n * 4);
            pl_gpu_buf *bo = alias == 0 ? gt_buf(g, NULL, n * 4) : NULL, *bg = gt_args(g, &args);
            pl_gpu_ref refs[4];
            int nb = 0;
            refs[nb++] = (pl_gpu_ref){ba, 0, 0};
            if (bb) refs[nb++] = (pl_gpu_ref){bb, 0, 0};
            if (bo) refs[nb++] = (pl_gpu_ref){bo, 0, 0};
            refs[nb++] = (pl_gpu_ref){bg, 0, 0};
            char *src = NULL;
            pl_gpu_kernel *k = gt_kernel(g, pl_wgsl_ew(&p, &src), &src, "ew");
            if (k && gt_run(g, k, refs, nb, (n + 63) / 64)) {
                pl_gpu_buf *res = alias == 0 ? bo : alias == 2 ? bb : ba;
                gt_read(g, res, o, n * 4);
                const float *rb = alias == 3 ? a : b;
                memcpy(ref, alias == 0 ? o : alias == 2 ? b : a, n * 4);
                if (alias == 0)
                    for (uint32_t i = n - 7; i < n; i++) memset(&ref[i], 0xff, 4);
                pl_gpu_ref_ew(p.op, a, rb, n - 7, ref);
                int bad = 0;
                for (uint32_t i = 0; i < n; i++) {
                    if (i >= n - 7)
                        bad += memcmp(&o[i], &ref[i], 4) != 0;
                    else
                        bad += !(fabsf(o[i] - ref[i]) <= 1e-6f * (1 + fabsf(ref[i])));
                }
                CHECK(bad == 0, "element-wise op %d alias %d: %d wrong", op, alias, bad);
            }
            pl_gpu_kernel_free(k);
            pl_gpu_buf_free(ba), pl_gpu_buf_free(bb), pl_gpu_buf_free(bo), pl_gpu_buf_free(bg);
            free(a), free(b), free(o), free(ref);
        }
    }
}

/* ------------------------------------------------------------------ delta rule */

/* One run of the delta-rule kernel p over n tokens from state st0: out (n + 1 rows, the last
 * must stay poisoned), the final state, snapshots (n + 1 heads' rows, likewise). */
typedef struct {
    float *out, *st, *sn;
} dr_run;

static dr_run dr_kernel(pl_gpu *g, const pl_delta_rule_params *p, uint32_t n, const float *qkv,
                        const float *a, const float *b, const float *sa, const float *dt,
                        const float *st0) {
    uint32_t row = 2 * p->n_k * p->d_k + p->n_v * p->d_v, nv = p->n_v;
    size_t hs = (size_t)p->d_k * p->d_v, no = (size_t)(n + 1) * nv * p->d_v;
    size_t nsn = (size_t)(n + 1) * nv * hs;
    dr_run r = {malloc(no * 4), malloc(nv * hs * 4), p->snaps ? malloc(nsn * 4) : NULL};
    const void *in[6] = {qkv, a, b, sa, dt, st0};
    size_t bytes[8] = {(size_t)n * row * 4,
                       (size_t)n * nv * 4,
                       (size_t)n * nv * 4,
                       nv * 4,
                       nv * 4,
                       nv * hs * 4,
                       no * 4,
                       nsn * 4};
    pl_gpu_buf *bufs[9] = {0};
    pl_gpu_ref refs[9];
    int nb = 0;
    for (; nb < 8; nb++) {
        if (nb == 7 && !p->snaps) break;
        bufs[nb] = gt_buf(g, nb < 6 ? in[nb] : NULL, bytes[nb]);
        refs[nb] = (pl_gpu_ref){bufs[nb], 0, 0};
    }
    pl_gpu_args args = {{n}};
    bufs[nb] = gt_args(g, &args), refs[nb] = (pl_gpu_ref){bufs[nb], 0, 0}, nb++;
    char label[96], *src = NULL;
    snprintf(label, sizeof label, "delta_rule %u/%u heads of %u/%u, %ux%u threads, chunk %u",
             p->n_k, nv, p->d_k, p->d_v, p->cols, p->parts, p->chunk);
    pl_gpu_kernel *k = gt_kernel(g, pl_wgsl_delta_rule(p, &src), &src, label);
    if (k && gt_run(g, k, refs, nb, pl_delta_rule_groups(p))) {
        gt_read(g, bufs[6], r.out, no * 4);
        gt_read(g, bufs[5], r.st, nv * hs * 4);
        if (p->snaps) gt_read(g, bufs[7], r.sn, nsn * 4);
    } else {
        memset(r.out, 0xff, no * 4), memset(r.st, 0xff, nv * hs * 4);
        if (r.sn) memset(r.sn, 0xff, nsn * 4);
    }
    pl_gpu_kernel_free(k);
    for (int i = 0; i < nb; i++) pl_gpu_buf_free(bufs[i]);
    return r;
}

static double dr_max_abs, dr_max_rel;

/* got[0..n) within 1e-4 relative + 1e-5 of want (the seam's tolerance against the double
 * reference; tol_old: against the token kernel, noting the largest differences), and
 * got[n..total) still NaN. */
static void dr_compare(const char *what, const float *got, const float *want, size_t n,
                       size_t total, int old) {
    size_t bad = 0, first = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)got[i] - want[i]);
        if (!(d <= 1e-4 * fabs(want[i]) + 1e-5) && !bad++) first = i;
        if (old && d > dr_max_abs) dr_max_abs = d;
        if (old && fabs(want[i]) > 1e-3 && d / fabs(want[i]) > dr_max_rel)
            dr_max_rel = d / fabs(want[i]);
    }
    for (size_t i = n; i < total; i++) bad += !isnan(got[i]);
    CHECK(bad == 0, "%s: %zu values wrong (first %zu: %.9g, expected %.9g)", what, bad, first,
          got[first], want[first]);
}

/* The chunked kernel (prefill) against the token kernel and the double reference. */
static void delta_case(pl_gpu *g, uint32_t nk, uint32_t nv, uint32_t dk, uint32_t dv, uint32_t n,
                       uint32_t cols, uint32_t parts, uint32_t chunk, int snaps) {
    pl_delta_rule_params p = {.n_k = nk, .n_v = nv, .d_k = dk, .d_v = dv, .eps = 1e-6f};
    p.cols = cols, p.parts = parts, p.snaps = snaps;
    uint32_t row = 2 * nk * dk + nv * dv;
    size_t hs = (size_t)dk * dv, no = (size_t)n * nv * dv;
    float *qkv = malloc((size_t)n * row * 4), *a = malloc((size_t)n * nv * 4);
    float *b = malloc((size_t)n * nv * 4), *sa = malloc(nv * 4), *dt = malloc(nv * 4);
    float *st = malloc(nv * hs * 4), *want = malloc(no * 4), *wsn = malloc(n * nv * hs * 4);
    gt_fill(qkv, (size_t)n * row, -1, 1);
    gt_fill(a, (size_t)n * nv, -4, 4);
    gt_fill(b, (size_t)n * nv, -4, 4);
    gt_fill(dt, nv, -1, 1);
    gt_fill(st, nv * hs, -0.5f, 0.5f);
    for (uint32_t h = 0; h < nv; h++) sa[h] = -expf(gt_unif(-2, 1));
    if (n > 2) a[nv] = 30; /* softplus of a large value is the value */
    dr_run old = dr_kernel(g, &p, n, qkv, a, b, sa, dt, st);
    p.chunk = chunk;
    dr_run got = dr_kernel(g, &p, n, qkv, a, b, sa, dt, st);
    pl_gpu_ref_delta_rule(&p, qkv, a, b, sa, dt, st, n, snaps ? wsn : NULL, want);
    char what[128];
    snprintf(what, sizeof what, "delta_rule %u/%u heads of %u/%u, %u tokens, chunk %u%s", nk, nv,
             dk, dv, n, chunk, snaps ? ", snapshots" : "");
    dr_compare(what, got.out, old.out, no, no + (size_t)nv * dv, 1);
    dr_compare(what, got.out, want, no, 0, 0);
    dr_compare("delta_rule state against the token kernel", got.st, old.st, nv * hs, 0, 1);
    dr_compare("delta_rule state", got.st, st, nv * hs, 0, 0);
    if (snaps) {
        dr_compare("delta_rule snapshots against the token kernel", got.sn, old.sn, n * nv * hs,
                   (n + 1) * nv * hs, 1);
        dr_compare("delta_rule snapshots", got.sn, wsn, n * nv * hs, 0, 0);
        /* the last snapshot is the final state, bit for bit */
        CHECK(!memcmp(got.sn + (size_t)(n - 1) * nv * hs, got.st, nv * hs * 4),
              "%s: the last snapshot is not the final state", what);
    }
    free(qkv), free(a), free(b), free(sa), free(dt), free(st), free(want), free(wsn);
    free(old.out), free(old.st), free(old.sn), free(got.out), free(got.st), free(got.sn);
}

static void test_delta_rule(pl_gpu *g) {
    double t0 = pl_gpu_now();
    /* (each kernel costs lavapipe seconds to compile: few cases, at most 10 rows a thread;
     * the seam test runs the models' 128 x 128 heads through the encoder's choice)
     * three chunks, the last partial, 4 column slices, snapshots */
    delta_case(g, 2, 4, 32, 64, 37, 16, 4, 16, 1);
    /* fewer tokens than a chunk, rows past d_k in the last part, columns past d_v */
    delta_case(g, 2, 2, 30, 9, 3, 4, 4, 16, 0);
    /* one thread for a chunk of 32 tokens */
    delta_case(g, 1, 1, 4, 1, 70, 1, 1, 32, 1);
    fprintf(stderr,
            "delta rule, chunked against the token kernel: max abs %.3g, max rel %.3g (%.2fs)\n",
            dr_max_abs, dr_max_rel, pl_gpu_now() - t0);
}

/* ------------------------------------------------------------------ Q8_0 requantiser */

static void test_quantize_q8_0(void) {
    float x[96];
    int8_t q[96];
    uint16_t s[3];
    gt_fill(x, 96, -5, 5);
    x[40] = 0; /* a block of zeros has scale 0 */
    for (int j = 64; j < 96; j++) x[j] = 0;
    pl_quant_act_q8_0(x, 96, q, s);
    int bad = 0;
    for (int j = 0; j < 96; j++) {
        float d = pl_f16_to_f32(s[j / 32]);
        bad += !(fabsf(q[j] * d - x[j]) <= 0.57f * d + 1e-7f); /* + f16 rounding of d */
    }
    CHECK(bad == 0 && s[2] == 0, "Q8_0 requantisation: %d values off", bad);
}

static void run_tests(void) {
    gt_seed();
    test_quantize_q8_0();
    pl_gpu *g = gt_open();
    if (!g) return;
    double t0 = pl_gpu_now();
    test_gemv(g);
    fprintf(stderr, "%d GEMV variants %.2fs\n", n_gemv_cases, pl_gpu_now() - t0);
    test_gemv_ids(g);
    test_rmsnorm(g);
    test_rmsnorm_gate(g);
    test_rope(g);
    test_copy(g);
    test_topk(g);
    test_embed(g);
    test_ew(g);
    test_delta_rule(g);
    fprintf(stderr, "all %.2fs\n", pl_gpu_now() - t0);
    pl_gpu_close(g);
}
