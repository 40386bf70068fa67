/* gpu_kernels_test.c - every generated kernel family against its CPU reference
 * (kernel_ref.h) on the machine's adapter, with fresh random inputs and outputs poisoned
 * with NaNs, across the template parameters: weight types, threads, rows per workgroup,
 * fusions (RMSNorm, bias, accumulate, gate/up), matrices split over several bindings,
 * subgroup reductions, RoPE modes, attention splits, top-k ties and NaNs. */
#include "test.h"

#include "gpu/kernel_ref.h"
#include "gpu/repack.h"
#include "gpu/wgsl_gen.h"
#include "gpu_test_util.h"

/* ------------------------------------------------------------------ matrices */

/* A random matrix made the way a model's is: GGML rows, then repacked for the GPU. */
typedef struct {
    pl_gpu_wtype t;
    uint32_t rows, cols;
    void *q;
    uint16_t *s;
} mat;

static uint32_t ggml_of(pl_gpu_wtype t) {
    return t == PL_GW_Q4_0 ? PL_TYPE_Q4_0 : t == PL_GW_Q8_0 ? PL_TYPE_Q8_0
                                          : t == PL_GW_F16  ? PL_TYPE_F16
                                                            : PL_TYPE_F32;
}

static mat make_mat(pl_gpu_wtype t, uint32_t rows, uint32_t cols) {
    mat m = {t, rows, cols, NULL, NULL};
    int64_t rb = pl_row_size(ggml_of(t), cols);
    unsigned char *src = malloc((size_t)rb * rows);
    for (uint64_t r = 0; r < rows; r++) {
        unsigned char *row = src + r * (uint64_t)rb;
        if (t == PL_GW_Q4_0 || t == PL_GW_Q8_0) {
            size_t bs = t == PL_GW_Q4_0 ? 18 : 34;
            for (uint32_t b = 0; b < cols / 32; b++) {
                uint16_t d = gt_f16(0.01f, 0.1f) | (gt_u32() & 1 ? 0x8000 : 0);
                memcpy(row + b * bs, &d, 2);
                for (size_t j = 2; j < bs; j++) row[b * bs + j] = (unsigned char)gt_u32();
            }
        } else if (t == PL_GW_F16) {
            for (uint32_t c = 0; c < cols; c++) {
                uint16_t h = gt_f16(-1, 1);
                memcpy(row + 2 * c, &h, 2);
            }
        } else {
            gt_fill((float *)row, cols, -1, 1);
        }
    }
    m.q = malloc(pl_gpu_quant_bytes(t, cols, rows) + 16);
    m.s = malloc(pl_gpu_scale_bytes(t, cols, rows) + 16);
    CHECK(pl_gpu_repack_rows(ggml_of(t), src, cols, rows, t, m.q, m.s, NULL) == PL_OK, "repack");
    /* the repacked layout holds exactly the GGML block values */
    for (int i = 0; i < 64; i++) {
        uint32_t r = gt_u32() % rows, c = gt_u32() % cols;
        const unsigned char *row = src + (uint64_t)r * (uint64_t)rb;
        float want;
        if (t == PL_GW_Q4_0 || t == PL_GW_Q8_0) {
            size_t bs = t == PL_GW_Q4_0 ? 18 : 34;
            const unsigned char *blk = row + (c / 32) * bs;
            uint16_t d;
            memcpy(&d, blk, 2);
            int j = c % 32, v;
            if (t == PL_GW_Q4_0) v = (j < 16 ? blk[2 + j] & 15 : blk[2 + j - 16] >> 4) - 8;
            else v = (int8_t)blk[2 + j];
            want = (float)v * pl_f16_to_f32(d);
        } else if (t == PL_GW_F16) {
            uint16_t h;
            memcpy(&h, row + 2 * c, 2);
            want = pl_f16_to_f32(h);
        } else {
            memcpy(&want, row + 4 * c, 4);
        }
        float got = pl_gpu_ref_weight(t, m.q, m.s, cols, r, c);
        if (got != want) {
            CHECK(0, "repack type %d (%u,%u): %g != %g", t, r, c, got, want);
            break;
        }
    }
    free(src);
    return m;
}

static void free_mat(mat *m) { free(m->q), free(m->s); }

/* Upload rows [r0, r1) of m: quants (or values) and scales as separate buffers. */
static void upload_part(pl_gpu *g, const mat *m, uint32_t r0, uint32_t r1, pl_gpu_buf **q,
                        pl_gpu_buf **s, pl_gpu_ref_mat *ref, int part) {
    uint64_t qo = pl_gpu_quant_bytes(m->t, m->cols, r0), so = pl_gpu_scale_bytes(m->t, m->cols, r0);
    *q = gt_buf(g, (char *)m->q + qo, pl_gpu_quant_bytes(m->t, m->cols, r1 - r0));
    ref->q[part] = (char *)m->q + qo;
    ref->s[part] = NULL;
    *s = NULL;
    if (pl_gpu_scale_bytes(m->t, m->cols, 1)) {
        *s = gt_buf(g, (char *)m->s + so, pl_gpu_scale_bytes(m->t, m->cols, r1 - r0));
        ref->s[part] = (const uint16_t *)((char *)m->s + so);
    }
}

/* ------------------------------------------------------------------ GEMV */

static int n_gemv_cases;

static void gemv_case(pl_gpu *g, pl_gemv_params p) {
    n_gemv_cases++;
    double tstart = pl_gpu_now();
    int nm = p.mode == PL_GEMV_GATE_UP ? 2 : 1;
    unsigned parts = p.parts ? p.parts : 1;
    mat m[2];
    for (int i = 0; i < nm; i++) m[i] = make_mat(p.type, p.rows, p.cols);
    float *x = malloc(p.cols * 4), *nw = malloc(p.cols * 4), *bias = malloc(p.rows * 4);
    float *y0 = malloc(p.rows * 4), *y = malloc(p.rows * 4), *ref = malloc(p.rows * 4);
    double *mag = malloc(p.rows * sizeof(double));
    gt_fill(x, p.cols, -1, 1);
    gt_fill(nw, p.cols, 0.5f, 1.5f);
    gt_fill(bias, p.rows, -1, 1);
    gt_fill(y0, p.rows, -2, 2);

    pl_gpu_ref refs[16];
    pl_gpu_buf *bufs[16] = {0};
    int nb = 0;
    bufs[nb] = gt_buf(g, x, p.cols * 4), refs[nb] = (pl_gpu_ref){bufs[nb], 0, 0}, nb++;
    bufs[nb] = gt_buf(g, p.mode == PL_GEMV_ACCUM ? y0 : NULL, p.rows * 4);
    refs[nb] = (pl_gpu_ref){bufs[nb], 0, 0}, nb++;
    pl_gpu_ref_mat rm[2];
    for (int i = 0; i < nm; i++) {
        for (unsigned q = 0; q < parts; q++) {
            uint32_t r0 = parts > 1 ? q * p.rows_per_part : 0;
            uint32_t r1 = parts > 1 && r0 + p.rows_per_part < p.rows ? r0 + p.rows_per_part : p.rows;
            pl_gpu_buf *qb, *sb;
            upload_part(g, &m[i], r0, r1, &qb, &sb, &rm[i], (int)q);
            bufs[nb] = qb, refs[nb] = (pl_gpu_ref){qb, 0, 0}, nb++;
            if (sb) bufs[nb] = sb, refs[nb] = (pl_gpu_ref){sb, 0, 0}, nb++;
        }
    }
    if (p.norm) bufs[nb] = gt_buf(g, nw, p.cols * 4), refs[nb] = (pl_gpu_ref){bufs[nb], 0, 0}, nb++;
    if (p.bias) bufs[nb] = gt_buf(g, bias, p.rows * 4), refs[nb] = (pl_gpu_ref){bufs[nb], 0, 0}, nb++;
    CHECK(nb == pl_gemv_bindings(&p), "binding count %d != %d", nb, pl_gemv_bindings(&p));

    char label[96];
    snprintf(label, sizeof label, "gemv t%d %ux%u T%u R%u mode%d norm%d bias%d parts%u sg%d", p.type,
             p.rows, p.cols, p.threads, p.rows_per_wg, p.mode, p.norm, p.bias, parts, p.subgroups);
    char *src = NULL;
    pl_gpu_kernel *k = gt_kernel(g, pl_wgsl_gemv(&p, &src), &src, label);
    if (k && gt_run(g, k, refs, nb, pl_gemv_groups(&p))) {
        gt_read(g, bufs[1], y, p.rows * 4);
        /* reference, and for gate/up each projection alone to bound the error */
        memcpy(ref, y0, p.rows * 4);
        pl_gpu_ref_gemv(&p, rm, x, nw, bias, ref, mag);
        float *gv = NULL, *uv = NULL;
        double *gm = NULL, *um = NULL;
        if (nm == 2) {
            pl_gemv_params one = p;
            one.mode = PL_GEMV_STORE;
            gv = malloc(p.rows * 4), uv = malloc(p.rows * 4);
            gm = malloc(p.rows * 8), um = malloc(p.rows * 8);
            pl_gpu_ref_gemv(&one, &rm[0], x, nw, NULL, gv, gm);
            pl_gpu_ref_gemv(&one, &rm[1], x, nw, NULL, uv, um);
        }
        int bad = 0;
        for (uint32_t r = 0; r < p.rows && bad < 3; r++) {
            double tol = 1e-5 * mag[r] + 1e-6 * fabs(ref[r]) + 1e-30;
            if (nm == 2) {
                double sg = gv[r] / (1 + exp(-(double)gv[r]));
                tol = 1e-5 * (1.1 * gm[r] * fabs(uv[r]) + um[r] * fabs(sg)) + 1e-6 * fabs(ref[r]) + 1e-30;
            }
            if (!(fabs((double)y[r] - ref[r]) <= tol)) {
                CHECK(0, "%s: row %u: %.9g vs %.9g (tol %.3g)", label, r, y[r], ref[r], tol);
                bad++;
            }
        }
        if (!bad) CHECK(1, "ok");
        free(gv), free(uv), free(gm), free(um);
    }
    pl_gpu_kernel_free(k);
    for (int i = 0; i < nb; i++) pl_gpu_buf_free(bufs[i]);
    for (int i = 0; i < nm; i++) free_mat(&m[i]);
    free(x), free(nw), free(bias), free(y0), free(y), free(ref), free(mag);
    if (getenv("GT_TIME")) fprintf(stderr, "gemv %ux%u t%d: %.3fs\n", p.rows, p.cols, p.type, pl_gpu_now() - tstart);
}

static void test_gemv(pl_gpu *g) {
    const pl_gpu_wtype types[4] = {PL_GW_F32, PL_GW_F16, PL_GW_Q4_0, PL_GW_Q8_0};
    int sg = pl_gpu_get_info(g)->has_subgroups;
    for (int ti = 0; ti < 4; ti++) {
        pl_gpu_wtype t = types[ti];
        int plain = t == PL_GW_F32 || t == PL_GW_F16;
        /* (rows, cols, threads, rows/wg, mode, norm, bias, parts, rows/part, subgroups) */
        struct {
            uint32_t rows, cols, T, R;
            pl_gemv_mode mode;
            int norm, bias;
            uint32_t parts, rpp;
            int sg;
        } cs[] = {
            {37, 64, 64, 4, PL_GEMV_STORE, 0, 0, 1, 0, 0},
            {64, 256, 32, 2, PL_GEMV_STORE, 1, 1, 1, 0, 0},
            {50, 128, 16, 1, PL_GEMV_ACCUM, 0, 0, 1, 0, 0},
            {45, 96, 128, 8, PL_GEMV_GATE_UP, 1, 0, 1, 0, 0},
            {70, 64, 64, 3, PL_GEMV_STORE, 0, 1, 3, 24, 0},
            {29, 160, 32, 4, PL_GEMV_GATE_UP, 0, 0, 2, 16, 0},
            {33, 64, 64, 4, PL_GEMV_ACCUM, 1, 0, 1, 0, 1},
            {40, 128, 256, 2, PL_GEMV_GATE_UP, 1, 0, 1, 0, 1},
        };
        for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++) {
            if (cs[i].sg && !sg) continue;
            pl_gemv_params p = {t, cs[i].rows, cs[i].cols, cs[i].T, cs[i].R, cs[i].mode,
                                cs[i].norm, 1e-5f, cs[i].bias, cs[i].parts, cs[i].rpp, cs[i].sg};
            gemv_case(g, p);
        }
        if (plain) {
            /* rows that are not a whole number of vectors: the scalar paths */
            uint32_t odd = t == PL_GW_F32 ? 172 : 20;
            gemv_case(g, (pl_gemv_params){t, 31, odd, 32, 2, PL_GEMV_STORE, 1, 1e-6f, 1, 1, 0, 0});
            gemv_case(g, (pl_gemv_params){t, 17, odd, 64, 4, PL_GEMV_GATE_UP, 0, 0, 0, 2, 12, 0});
            gemv_case(g, (pl_gemv_params){t, 9, odd, 8, 1, PL_GEMV_ACCUM, 1, 1e-5f, 0, 1, 0, 0});
        }
    }
    /* a head taller than one grid dimension: rows spread over a 2-D grid */
    uint32_t tall = pl_gpu_get_info(g)->max_groups_per_dim + 300;
    gemv_case(g, (pl_gemv_params){PL_GW_F32, tall, 8, 8, 1, PL_GEMV_STORE, 0, 0, 0, 1, 0, 0});
    /* parameters a kernel cannot be built from are refused */
    char *src = NULL;
    pl_gemv_params bad = {PL_GW_Q4_0, 10, 48, 64, 4, PL_GEMV_STORE, 0, 0, 0, 1, 0, 0};
    CHECK(pl_wgsl_gemv(&bad, &src) != PL_OK && !src, "48 columns of Q4_0 accepted");
    bad.cols = 64, bad.threads = 48;
    CHECK(pl_wgsl_gemv(&bad, &src) != PL_OK, "48 threads accepted");
    bad.threads = 64, bad.parts = 2, bad.rows_per_part = 6;
    CHECK(pl_wgsl_gemv(&bad, &src) != PL_OK, "part of 6 rows with 4 rows per group accepted");
}

/* ------------------------------------------------------------------ RMSNorm */

static void test_rmsnorm(pl_gpu *g) {
    const uint32_t ns[3] = {64, 172, 1000}, ts[3] = {64, 32, 256};
    for (int i = 0; i < 3; i++) {
        pl_rmsnorm_params p = {ns[i], ts[i], 1e-6f};
        float *x = malloc(p.n * 4), *w = malloc(p.n * 4), *y = malloc(p.n * 4), *ref = malloc(p.n * 4);
        gt_fill(x, p.n, -3, 3);
        gt_fill(w, p.n, -2, 2);
        pl_gpu_buf *bx = gt_buf(g, x, p.n * 4), *by = gt_buf(g, NULL, p.n * 4), *bw = gt_buf(g, w, p.n * 4);
        char *src = NULL;
        pl_gpu_kernel *k = gt_kernel(g, pl_wgsl_rmsnorm(&p, &src), &src, "rmsnorm");
        pl_gpu_ref refs[3] = {{bx, 0, 0}, {by, 0, 0}, {bw, 0, 0}};
        if (k && gt_run(g, k, refs, 3, 1)) {
            gt_read(g, by, y, p.n * 4);
            pl_gpu_ref_rmsnorm(&p, x, w, ref);
            int bad = 0;
            for (uint32_t j = 0; j < p.n; j++) bad += !(fabsf(y[j] - ref[j]) <= 2e-6f * (fabsf(ref[j]) + 1e-3f));
            CHECK(bad == 0, "rmsnorm n=%u: %d wrong (y0 %g vs %g)", p.n, bad, y[0], ref[0]);
        }
        pl_gpu_kernel_free(k);
        pl_gpu_buf_free(bx), pl_gpu_buf_free(by), pl_gpu_buf_free(bw);
        free(x), free(w), free(y), free(ref);
    }
}

/* ------------------------------------------------------------------ RoPE + cache */

static float half_of(uint32_t w, int hi) { return pl_f16_to_f32((uint16_t)(hi ? w >> 16 : w)); }

static void rope_case(pl_gpu *g, pl_rope_params p, float base) {
    uint32_t HD = p.head_dim, nq = p.n_head * HD, nqkv = (p.n_head + 2 * p.n_kv_head) * HD;
    size_t cw = (size_t)p.n_kv_head * p.ctx * HD / 2, tn = (size_t)p.ctx * (p.rot_dim / 2) * 2;
    float *qkv = malloc(nqkv * 4), *tab = malloc(tn * 4 + 4), *qn = malloc(HD * 4), *kn = malloc(HD * 4);
    float *qo = malloc(nq * 4), *qref = malloc(nq * 4);
    uint32_t *kc = malloc(cw * 4), *vc = malloc(cw * 4), *kref = malloc(cw * 4), *vref = malloc(cw * 4);
    gt_fill(qkv, nqkv, -2, 2);
    gt_fill(qn, HD, 0.5f, 1.5f);
    gt_fill(kn, HD, 0.5f, 1.5f);
    pl_gpu_rope_table(p.ctx, p.rot_dim, base, tab);
    memset(kref, 0xff, cw * 4);
    memset(vref, 0xff, cw * 4);
    pl_gpu_step st = {gt_u32() % p.ctx, 0, 0, 0};
    st.n_kv = st.pos + 1;
    pl_gpu_buf *b[8];
    b[0] = gt_buf(g, qkv, nqkv * 4), b[1] = gt_buf(g, NULL, nq * 4);
    b[2] = gt_buf(g, NULL, cw * 4), b[3] = gt_buf(g, NULL, cw * 4), b[4] = gt_buf(g, tab, tn * 4);
    pl_gpu_buf *ub = NULL;
    CHECK(pl_gpu_buf_new(g, sizeof st, PL_GPU_UNIFORM, "step", &ub) == PL_OK, "%s", pl_last_error());
    CHECK(pl_gpu_write(g, ub, 0, &st, sizeof st) == PL_OK, "%s", pl_last_error());
    b[5] = ub, b[6] = gt_buf(g, qn, HD * 4), b[7] = gt_buf(g, kn, HD * 4);
    pl_gpu_ref refs[8];
    for (int i = 0; i < 8; i++) refs[i] = (pl_gpu_ref){b[i], 0, 0};
    char *src = NULL, label[80];
    snprintf(label, sizeof label, "rope %u/%u hd%u rot%u neox%d norm%d", p.n_head, p.n_kv_head, HD,
             p.rot_dim, p.neox, p.qk_norm);
    pl_gpu_kernel *k = gt_kernel(g, pl_wgsl_rope(&p, &src), &src, label);
    if (k && gt_run(g, k, refs, p.qk_norm ? 8 : 6, p.n_head + p.n_kv_head)) {
        gt_read(g, b[1], qo, nq * 4);
        gt_read(g, b[2], kc, cw * 4);
        gt_read(g, b[3], vc, cw * 4);
        pl_gpu_ref_rope(&p, qkv, tab, st.pos, qn, kn, qref, kref, vref);
        int bad = 0;
        for (uint32_t i = 0; i < nq; i++) bad += !(fabsf(qo[i] - qref[i]) <= 1e-5f * (1 + fabsf(qref[i])));
        CHECK(bad == 0, "%s: %d of q wrong (q0 %g vs %g)", label, bad, qo[0], qref[0]);
        /* the new position holds k and v within an f16 rounding; every other slot untouched */
        int kbad = 0, other = 0;
        for (size_t i = 0; i < cw; i++) {
            if (kref[i] == 0xffffffffu) {
                other += kc[i] != 0xffffffffu || vc[i] != 0xffffffffu;
                continue;
            }
            for (int h = 0; h < 2; h++) {
                float a = half_of(kc[i], h), e = half_of(kref[i], h);
                float va = half_of(vc[i], h), ve = half_of(vref[i], h);
                kbad += !(fabsf(a - e) <= 1e-3f * fabsf(e) + 1e-6f);
                kbad += !(fabsf(va - ve) <= 1e-3f * fabsf(ve) + 1e-6f);
            }
        }
        CHECK(kbad == 0 && other == 0, "%s: cache: %d wrong, %d other slots written", label, kbad, other);
    }
    pl_gpu_kernel_free(k);
    for (int i = 0; i < 8; i++) pl_gpu_buf_free(b[i]);
    free(qkv), free(tab), free(qn), free(kn), free(qo), free(qref), free(kc), free(vc), free(kref), free(vref);
}

static void test_rope(pl_gpu *g) {
    rope_case(g, (pl_rope_params){4, 2, 16, 16, 64, 1, 1, 1e-6f, 32}, 1e6f);
    rope_case(g, (pl_rope_params){8, 4, 8, 8, 40, 0, 0, 0, 64}, 1e4f);
    rope_case(g, (pl_rope_params){2, 2, 32, 16, 50, 1, 0, 0, 16}, 1e4f);
    rope_case(g, (pl_rope_params){2, 1, 128, 128, 20, 1, 1, 1e-6f, 64}, 1e6f);
    rope_case(g, (pl_rope_params){2, 2, 4, 4, 10, 0, 0, 0, 8}, 1e4f);
}

/* ------------------------------------------------------------------ attention */

static void attn_case(pl_gpu *g, pl_attn_params p, uint32_t n_kv) {
    uint32_t HD = p.head_dim, nq = p.n_head * HD, maxs = (p.ctx + p.chunk - 1) / p.chunk;
    size_t cw = (size_t)p.n_kv_head * p.ctx * HD / 2, pn = (size_t)p.n_head * maxs * (HD + 2);
    float *q = malloc(nq * 4), *o = malloc(nq * 4), *ref = malloc(nq * 4);
    uint32_t *kc = malloc(cw * 4), *vc = malloc(cw * 4);
    gt_fill(q, nq, -1, 1);
    for (size_t i = 0; i < cw; i++) {
        kc[i] = gt_f16(-2, 2) | (uint32_t)gt_f16(-2, 2) << 16;
        vc[i] = gt_f16(-1, 1) | (uint32_t)gt_f16(-1, 1) << 16;
    }
    pl_gpu_step st = {n_kv - 1, n_kv, pl_attn_splits(&p, n_kv), 0};
    pl_gpu_buf *bq = gt_buf(g, q, nq * 4), *bk = gt_buf(g, kc, cw * 4), *bv = gt_buf(g, vc, cw * 4);
    pl_gpu_buf *bo = gt_buf(g, NULL, nq * 4), *bp = gt_buf(g, NULL, pn * 4), *ub = NULL;
    CHECK(pl_gpu_buf_new(g, sizeof st, PL_GPU_UNIFORM, "step", &ub) == PL_OK, "%s", pl_last_error());
    CHECK(pl_gpu_write(g, ub, 0, &st, sizeof st) == PL_OK, "%s", pl_last_error());
    char *src = NULL, label[96];
    snprintf(label, sizeof label, "attn %u/%u hd%u chunk%u T%u n_kv %u", p.n_head, p.n_kv_head, HD,
             p.chunk, p.threads, n_kv);
    pl_gpu_kernel *ka = gt_kernel(g, pl_wgsl_attn(&p, &src), &src, label);
    pl_attn_combine_params cp = {p.n_head, HD, p.ctx, p.chunk, 64};
    pl_gpu_kernel *kc2 = gt_kernel(g, pl_wgsl_attn_combine(&cp, &src), &src, "combine");
    pl_gpu_ref ra[6] = {{bq, 0, 0}, {bk, 0, 0}, {bv, 0, 0}, {bo, 0, 0}, {bp, 0, 0}, {ub, 0, 0}};
    pl_gpu_ref rc[3] = {{bp, 0, 0}, {bo, 0, 0}, {ub, 0, 0}};
    pl_gpu_bind *ba = NULL, *bc = NULL;
    if (ka && kc2 && pl_gpu_bind_new(g, ka, ra, 6, &ba) == PL_OK &&
        pl_gpu_bind_new(g, kc2, rc, 3, &bc) == PL_OK) {
        pl_gpu_begin(g);
        pl_gpu_dispatch(g, ka, ba, p.n_head * st.n_splits);
        if (st.n_splits > 1) pl_gpu_dispatch(g, kc2, bc, p.n_head);
        CHECK(pl_gpu_submit(g) == PL_OK, "%s", pl_last_error());
        gt_read(g, bo, o, nq * 4);
        pl_gpu_ref_attn(&p, q, kc, vc, n_kv, ref);
        int bad = 0;
        for (uint32_t i = 0; i < nq; i++) bad += !(fabsf(o[i] - ref[i]) <= 2e-5f);
        CHECK(bad == 0, "%s (%u splits): %d wrong (o0 %g vs %g)", label, st.n_splits, bad, o[0], ref[0]);
    } else {
        CHECK(0, "%s: %s", label, pl_last_error());
    }
    pl_gpu_bind_free(ba), pl_gpu_bind_free(bc);
    pl_gpu_kernel_free(ka), pl_gpu_kernel_free(kc2);
    pl_gpu_buf_free(bq), pl_gpu_buf_free(bk), pl_gpu_buf_free(bv), pl_gpu_buf_free(bo);
    pl_gpu_buf_free(bp), pl_gpu_buf_free(ub);
    free(q), free(o), free(ref), free(kc), free(vc);
}

static void test_attn(pl_gpu *g) {
    pl_attn_params a = {4, 2, 16, 64, 16, 32, 0.25f};
    const uint32_t lens[5] = {1, 7, 16, 17, 50};
    for (int i = 0; i < 5; i++) attn_case(g, a, lens[i]);
    attn_case(g, (pl_attn_params){2, 1, 128, 160, 64, 128, 0.0883883476f}, 150);
    attn_case(g, (pl_attn_params){8, 4, 8, 40, 8, 64, 0.35355339f}, 33);
    attn_case(g, (pl_attn_params){4, 4, 32, 300, 256, 256, 0.17677669f}, 299);
}

/* ------------------------------------------------------------------ top-k */

static void topk_case(pl_gpu *g, uint32_t n, uint32_t k) {
    double tstart = pl_gpu_now();
    float *x = malloc(n * 4);
    for (uint32_t i = 0; i < n; i++) {
        uint32_t r = gt_u32();
        /* few distinct values so ties are common, plus NaNs and infinities */
        x[i] = (float)(r % 23) - 11.0f;
        if (r % 97 == 0) x[i] = NAN;
        if (r % 101 == 0) x[i] = -INFINITY;
    }
    pl_topk_params s1 = {n, k, 256, 64, 0, 0};
    uint32_t groups = pl_topk_groups(&s1);
    pl_topk_params s2 = {groups * k, k, 0, 64, 1, 1};
    pl_gpu_buf *bx = gt_buf(g, x, n * 4), *bp = gt_buf(g, NULL, groups * k * 8);
    pl_gpu_buf *bo = gt_buf(g, NULL, k * 8), *bi = gt_buf(g, NULL, k * 4);
    char *src = NULL;
    pl_gpu_kernel *k1 = gt_kernel(g, pl_wgsl_topk(&s1, &src), &src, "topk1");
    pl_gpu_kernel *k2 = gt_kernel(g, pl_wgsl_topk(&s2, &src), &src, "topk2");
    pl_gpu_ref r1[2] = {{bx, 0, 0}, {bp, 0, 0}}, r2[3] = {{bp, 0, 0}, {bo, 0, 0}, {bi, 0, 0}};
    pl_gpu_bind *b1 = NULL, *b2 = NULL;
    if (k1 && k2 && pl_gpu_bind_new(g, k1, r1, 2, &b1) == PL_OK && pl_gpu_bind_new(g, k2, r2, 3, &b2) == PL_OK) {
        pl_gpu_begin(g);
        pl_gpu_dispatch(g, k1, b1, groups);
        pl_gpu_dispatch(g, k2, b2, 1);
        CHECK(pl_gpu_submit(g) == PL_OK, "%s", pl_last_error());
        uint32_t *pairs = malloc(k * 8), *ids = malloc(k * 4), *rid = malloc(k * 4);
        float *rv = malloc(k * 4);
        gt_read(g, bo, pairs, k * 8);
        gt_read(g, bi, ids, k * 4);
        pl_gpu_ref_topk(x, n, k, rv, rid);
        int bad = 0;
        for (uint32_t j = 0; j < k; j++) {
            float v;
            memcpy(&v, &pairs[2 * j], 4);
            bad += pairs[2 * j + 1] != rid[j] || ids[j] != rid[j] || memcmp(&v, &rv[j], 4) != 0;
        }
        CHECK(bad == 0, "top-%u of %u: %d differ (first id %u vs %u)", k, n, bad, ids[0], rid[0]);
        free(pairs), free(ids), free(rid), free(rv);
    } else {
        CHECK(0, "top-k: %s", pl_last_error());
    }
    pl_gpu_bind_free(b1), pl_gpu_bind_free(b2);
    pl_gpu_kernel_free(k1), pl_gpu_kernel_free(k2);
    pl_gpu_buf_free(bx), pl_gpu_buf_free(bp), pl_gpu_buf_free(bo), pl_gpu_buf_free(bi);
    free(x);
    if (getenv("GT_TIME")) fprintf(stderr, "topk %u %u: %.3fs\n", n, k, pl_gpu_now() - tstart);
}

static void test_topk(pl_gpu *g) {
    topk_case(g, 1, 1);
    topk_case(g, 2, 3); /* fewer values than k: the rest are (-inf, none) */
    topk_case(g, 100, 1);
    topk_case(g, 1000, 5);
    topk_case(g, 5000, 40);
    topk_case(g, 70000, 1);
}

/* ------------------------------------------------------------------ embedding */

static void embed_case(pl_gpu *g, pl_gpu_wtype t, uint32_t cols, uint32_t parts) {
    uint32_t rows = 50, rpp = parts == 2 ? 28 : 20;
    mat m = make_mat(t, rows, cols);
    pl_embed_params p = {t, rows, cols, 64, parts, parts > 1 ? rpp : 0, 1, t == PL_GW_F32 ? 1.0f : 0.5f};
    uint32_t ids[3] = {gt_u32(), gt_u32() % rows, gt_u32()};
    pl_gpu_buf *bufs[10] = {0};
    pl_gpu_ref refs[10];
    int nb = 0;
    bufs[nb] = gt_buf(g, ids, sizeof ids), refs[nb] = (pl_gpu_ref){bufs[nb], 0, 0}, nb++;
    bufs[nb] = gt_buf(g, NULL, cols * 4), refs[nb] = (pl_gpu_ref){bufs[nb], 0, 0}, nb++;
    pl_gpu_ref_mat rm;
    for (uint32_t q = 0; q < parts; q++) {
        uint32_t r0 = parts > 1 ? q * rpp : 0, r1 = parts > 1 && r0 + rpp < rows ? r0 + rpp : rows;
        pl_gpu_buf *qb, *sb;
        upload_part(g, &m, r0, r1, &qb, &sb, &rm, (int)q);
        bufs[nb] = qb, refs[nb] = (pl_gpu_ref){qb, 0, 0}, nb++;
        if (sb) bufs[nb] = sb, refs[nb] = (pl_gpu_ref){sb, 0, 0}, nb++;
    }
    char *src = NULL;
    pl_gpu_kernel *k = gt_kernel(g, pl_wgsl_embed(&p, &src), &src, "embed");
    if (k && gt_run(g, k, refs, nb, 1)) {
        float *x = malloc(cols * 4), *ref = malloc(cols * 4);
        gt_read(g, bufs[1], x, cols * 4);
        pl_gpu_ref_embed(&p, &rm, ids[1], ref);
        CHECK(!memcmp(x, ref, cols * 4), "embed type %d parts %u id %u: x0 %g vs %g", t, parts,
              ids[1], x[0], ref[0]);
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

/* ------------------------------------------------------------------ Q8_0 requantiser */

static void test_quantize_q8_0(void) {
    float x[96];
    int8_t q[96];
    uint16_t s[3];
    gt_fill(x, 96, -5, 5);
    x[40] = 0; /* a block of zeros has scale 0 */
    for (int j = 64; j < 96; j++) x[j] = 0;
    pl_gpu_quantize_q8_0(x, 96, q, s);
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
    test_rmsnorm(g);
    test_rope(g);
    fprintf(stderr, "rmsnorm+rope %.2fs\n", pl_gpu_now() - t0);
    test_attn(g);
    fprintf(stderr, "attn %.2fs\n", pl_gpu_now() - t0);
    test_topk(g);
    fprintf(stderr, "topk %.2fs\n", pl_gpu_now() - t0);
    test_embed(g);
    pl_gpu_close(g);
}
