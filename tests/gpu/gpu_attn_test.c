/* gpu_attn_test.c - the attention kernels on the machine's adapter, fresh random inputs,
 * outputs poisoned with NaNs: the split-K decode kernel and its combine (pl_wgsl_attn)
 * against the CPU reference (kernel_ref.h) across splits, blocks of rows, GQA, head dims,
 * f16/f32 caches and subgroup statistics; the prefill kernel (pl_wgsl_attn_prefill)
 * against both the reference and the decode kernel on the same inputs, with the cache's
 * rows past the last position poisoned too (it must not read them) and an output row past
 * the last left alone. */
#include "test.h"

#include "gpu/kernel_ref.h"
#include "gpu/wgsl_gen.h"
#include "gpu_test_util.h"

/* Random q rows and caches of ctx positions; with `poison_from` < ctx, cache positions from
 * there on are NaNs. */
typedef struct {
    float *q;
    unsigned char *kc, *vc;
    pl_gpu_buf *bq, *bk, *bv;
} attn_in;

static attn_in attn_inputs(pl_gpu *g, const pl_attn_params_gpu *p, uint32_t ctx, uint32_t nrows,
                           uint32_t poison_from) {
    attn_in in;
    size_t es = p->kv_f16 ? 2 : 4, nq = (size_t)nrows * p->n_head * p->head_dim;
    size_t kw = (size_t)p->n_kv_head * p->head_dim, vw = (size_t)p->n_kv_head * p->head_dim_v;
    in.q = malloc(nq * 4);
    in.kc = malloc(ctx * kw * es), in.vc = malloc(ctx * vw * es);
    gt_fill(in.q, nq, -1, 1);
    for (size_t i = 0; i < ctx * kw; i++) {
        if (p->kv_f16)
            ((uint16_t *)in.kc)[i] = i / kw >= poison_from ? 0xffff : gt_f16(-2, 2);
        else
            ((float *)in.kc)[i] = i / kw >= poison_from ? NAN : gt_unif(-2, 2);
    }
    for (size_t i = 0; i < ctx * vw; i++) {
        if (p->kv_f16)
            ((uint16_t *)in.vc)[i] = i / vw >= poison_from ? 0xffff : gt_f16(-1, 1);
        else
            ((float *)in.vc)[i] = i / vw >= poison_from ? NAN : gt_unif(-1, 1);
    }
    in.bq = gt_buf(g, in.q, nq * 4);
    in.bk = gt_buf(g, in.kc, ctx * kw * es), in.bv = gt_buf(g, in.vc, ctx * vw * es);
    return in;
}

static void attn_in_free(attn_in *in) {
    pl_gpu_buf_free(in->bq), pl_gpu_buf_free(in->bk), pl_gpu_buf_free(in->bv);
    free(in->q), free(in->kc), free(in->vc);
}

/* The decode kernel over rows 0..nrows-1 into bo, in blocks of block_rows as the backend
 * issues them; 0 on a failure (reported). */
static int decode_run(pl_gpu *g, const pl_attn_params_gpu *p, const attn_in *in, pl_gpu_buf *bo,
                      uint32_t pos0, uint32_t nrows, const char *label) {
    size_t pn = (size_t)p->block_rows * p->n_head * p->max_splits * (p->head_dim_v + 2);
    pl_gpu_buf *bp = gt_buf(g, NULL, pn * 4);
    char *src = NULL;
    pl_gpu_kernel *ka = gt_kernel(g, pl_wgsl_attn(p, &src), &src, label);
    pl_attn_combine_params cp = {p->n_head, p->head_dim_v, p->max_splits, 64};
    pl_gpu_kernel *kc2 = gt_kernel(g, pl_wgsl_attn_combine(&cp, &src), &src, "combine");
    int ok = ka && kc2;
    for (uint32_t r0 = 0; ok && r0 < nrows; r0 += p->block_rows) {
        uint32_t nr = nrows - r0 < p->block_rows ? nrows - r0 : p->block_rows;
        uint32_t ns = (pos0 + r0 + nr + p->chunk - 1) / p->chunk;
        pl_gpu_args a = {{pos0, r0, nr, ns}};
        pl_gpu_buf *ba = gt_args(g, &a);
        pl_gpu_ref ra[6] = {{in->bq, 0, 0}, {in->bk, 0, 0}, {in->bv, 0, 0},
                            {bo, 0, 0},     {bp, 0, 0},     {ba, 0, 0}};
        pl_gpu_ref rc[3] = {{bp, 0, 0}, {bo, 0, 0}, {ba, 0, 0}};
        pl_gpu_bind *b1 = NULL, *b2 = NULL;
        ok = pl_gpu_bind_new(g, ka, ra, 6, &b1) == PL_OK &&
             pl_gpu_bind_new(g, kc2, rc, 3, &b2) == PL_OK;
        if (ok) {
            pl_gpu_begin(g);
            pl_gpu_dispatch(g, ka, b1, nr * p->n_head * ns);
            if (ns > 1) pl_gpu_dispatch(g, kc2, b2, nr * p->n_head);
            ok = pl_gpu_submit(g) == PL_OK;
        }
        CHECK(ok, "%s: %s", label, pl_last_error());
        pl_gpu_bind_free(b1), pl_gpu_bind_free(b2), pl_gpu_buf_free(ba);
    }
    pl_gpu_kernel_free(ka), pl_gpu_kernel_free(kc2), pl_gpu_buf_free(bp);
    return ok;
}

/* Values of n outputs that differ from ref by more than tol (NaN counts). */
static int n_off(const float *o, const float *ref, size_t n, float tol) {
    int bad = 0;
    for (size_t i = 0; i < n; i++) bad += !(fabsf(o[i] - ref[i]) <= tol);
    return bad;
}

/* ------------------------------------------------------------------ decode kernel */

static void attn_case(pl_gpu *g, pl_attn_params_gpu p, uint32_t ctx, uint32_t pos0,
                      uint32_t nrows) {
    size_t no = (size_t)nrows * p.n_head * p.head_dim_v;
    attn_in in = attn_inputs(g, &p, ctx, nrows, ctx);
    float *o = malloc(no * 4), *ref = malloc(no * 4);
    pl_gpu_buf *bo = gt_buf(g, NULL, no * 4);
    char label[112];
    snprintf(label, sizeof label, "attn %u/%u hd%u/%u chunk%u T%u f16 %d pos0 %u rows %u", p.n_head,
             p.n_kv_head, p.head_dim, p.head_dim_v, p.chunk, p.threads, p.kv_f16, pos0, nrows);
    if (decode_run(g, &p, &in, bo, pos0, nrows, label)) {
        gt_read(g, bo, o, no * 4);
        pl_gpu_ref_attn(&p, in.q, in.kc, in.vc, pos0, 0, nrows, ref);
        int bad = n_off(o, ref, no, 2e-5f);
        CHECK(bad == 0, "%s: %d wrong (o0 %g vs %g)", label, bad, o[0], ref[0]);
    }
    pl_gpu_buf_free(bo);
    attn_in_free(&in);
    free(o), free(ref);
}

/* Attention parameters by name: positional initialisers silently shifted when kv_q8 and ctx
 * were added before scale (scale became 0, sg never 1). */
static pl_attn_params_gpu ap(uint32_t heads, uint32_t kv_heads, uint32_t hd, uint32_t hdv,
                             uint32_t splits, uint32_t rows, uint32_t chunk, uint32_t threads,
                             int f16, float scale, int sg) {
    return (pl_attn_params_gpu){.n_head = heads,
                                .n_kv_head = kv_heads,
                                .head_dim = hd,
                                .head_dim_v = hdv,
                                .max_splits = splits,
                                .block_rows = rows,
                                .chunk = chunk,
                                .threads = threads,
                                .kv_f16 = f16,
                                .scale = scale,
                                .sg = sg};
}

static void test_attn(pl_gpu *g) {
    /* (heads, kv heads, head dim, value head dim, max splits, block rows, chunk, threads, f16,
     * scale) */
    pl_attn_params_gpu a = ap(4, 2, 16, 16, 4, 4, 16, 32, 1, 0.25f, 0);
    const uint32_t pos[5] = {0, 6, 15, 16, 49};
    for (int i = 0; i < 5; i++) attn_case(g, a, 64, pos[i], 1);
    attn_case(g, a, 64, 10, 7); /* prefill rows in two blocks, causal per row */
    a.kv_f16 = 0;
    attn_case(g, a, 64, 30, 3);
    attn_case(g, ap(2, 1, 128, 128, 3, 1, 64, 128, 1, 0.0883883476f, 0), 160, 149, 1);
    attn_case(g, ap(8, 4, 8, 8, 5, 2, 8, 64, 1, 0.35355339f, 0), 40, 32, 1);
    attn_case(g, ap(4, 4, 32, 16, 2, 1, 256, 256, 0, 0.17677669f, 0), 300, 298, 1);
    attn_case(g, ap(2, 2, 4, 4, 1, 8, 64, 16, 1, 0.5f, 0), 10, 0, 8);
    /* softmax statistics through subgroups */
    if (pl_gpu_get_info(g)->has_subgroups) {
        attn_case(g, ap(4, 2, 16, 16, 4, 4, 16, 64, 1, 0.25f, 1), 64, 49, 1);
        attn_case(g, ap(4, 2, 16, 16, 4, 4, 16, 32, 0, 0.25f, 1), 64, 10, 7);
        attn_case(g, ap(8, 2, 128, 128, 2, 1, 256, 256, 1, 0.0883883476f, 1), 300, 80, 1);
        attn_case(g, ap(2, 1, 8, 8, 1, 1, 64, 16, 1, 0.35f, 1), 64, 0, 1);
    }
}

/* ------------------------------------------------------------------ prefill kernel */

/* n rows at pos0 through the prefill kernel (poisoned cache past pos0 + n, one poisoned
 * output row past n) against the reference and the decode kernel (split in chunks of 64). */
static void prefill_case(pl_gpu *g, pl_attn_prefill_params f, uint32_t pos0, uint32_t n) {
    uint32_t ctx = pos0 + n + 3, HDV = f.head_dim_v;
    pl_attn_params_gpu p = ap(f.n_head, f.n_kv_head, f.head_dim, HDV, (ctx + 63) / 64, 8, 64, 64,
                              f.kv_f16, f.scale, 0);
    size_t no = (size_t)n * f.n_head * HDV, nob = no + (size_t)f.n_head * HDV;
    attn_in in = attn_inputs(g, &p, ctx, n, pos0 + n);
    float *o = malloc(nob * 4), *od = malloc(no * 4), *ref = malloc(no * 4);
    pl_gpu_buf *bo = gt_buf(g, NULL, nob * 4), *bd = gt_buf(g, NULL, no * 4);
    char *src = NULL, label[128];
    snprintf(label, sizeof label,
             "prefill attn %u/%u hd%u/%u f16 %d lanes %u rows %u keys %u pos0 %u n %u", f.n_head,
             f.n_kv_head, f.head_dim, HDV, f.kv_f16, f.lanes, f.rows, f.keys, pos0, n);
    pl_gpu_kernel *k = gt_kernel(g, pl_wgsl_attn_prefill(&f, &src), &src, label);
    pl_gpu_args a = {{pos0, n}};
    pl_gpu_buf *ba = gt_args(g, &a);
    pl_gpu_ref refs[5] = {{in.bq, 0, 0}, {in.bk, 0, 0}, {in.bv, 0, 0}, {bo, 0, 0}, {ba, 0, 0}};
    int ok = k && gt_run(g, k, refs, 5, pl_attn_prefill_groups(&f, n));
    CHECK(ok, "%s: %s", label, pl_last_error());
    if (ok && decode_run(g, &p, &in, bd, pos0, n, label)) {
        gt_read(g, bo, o, nob * 4);
        gt_read(g, bd, od, no * 4);
        pl_gpu_ref_attn(&p, in.q, in.kc, in.vc, pos0, 0, n, ref);
        int bad = n_off(o, ref, no, 2e-5f), bad_d = n_off(o, od, no, 2e-5f), kept = 0;
        for (size_t i = no; i < nob; i++) kept += o[i] != o[i];
        CHECK(bad == 0, "%s: %d wrong (o0 %g vs %g)", label, bad, o[0], ref[0]);
        CHECK(bad_d == 0, "%s: %d off the decode kernel's", label, bad_d);
        CHECK(kept == (int)(nob - no), "%s: wrote %d values past the last row", label,
              (int)(nob - no) - kept);
    }
    pl_gpu_kernel_free(k);
    pl_gpu_buf_free(bo), pl_gpu_buf_free(bd), pl_gpu_buf_free(ba);
    attn_in_free(&in);
    free(o), free(od), free(ref);
}

static pl_attn_prefill_params fp(uint32_t heads, uint32_t kv_heads, uint32_t hd, uint32_t hdv,
                                 int f16, uint32_t lanes, uint32_t rows, uint32_t keys) {
    return (pl_attn_prefill_params){.n_head = heads,
                                    .n_kv_head = kv_heads,
                                    .head_dim = hd,
                                    .head_dim_v = hdv,
                                    .rows = rows,
                                    .lanes = lanes,
                                    .keys = keys,
                                    .kv_f16 = f16,
                                    .scale = 1.0f / sqrtf((float)hd)};
}

static void test_attn_prefill(pl_gpu *g) {
    const pl_gpu_info *info = pl_gpu_get_info(g);
    uint32_t sg = info->has_subgroups ? info->subgroup_min : 1, l8 = sg >= 8 ? 8 : sg >= 4 ? 4 : 1;
    /* random start positions: a fresh prompt (0), inside and across tiles and splits */
    uint32_t p1 = gt_u32() % 40, p2 = 200 + gt_u32() % 100;
    /* lanes without subgroups, value head dim != key's, uneven tiles of rows and keys */
    prefill_case(g, fp(2, 1, 8, 4, 0, 1, 5, 7), 0, 17);
    if (l8 == 1) return;
    /* GQA 4, f16, past 256 positions */
    prefill_case(g, fp(4, 1, 64, 64, 1, l8 >= 4 ? 4 : l8, 8, 8), p2, 33);
    /* lavapipe takes 5-15 s a shape (compiling both kernels): the rest on hardware only (and
     * head dims 64/128/256, GQA 1/4/8 through the backend in backend_ops_test) */
    if (info->software) return;
    prefill_case(g, fp(4, 2, 32, 16, 0, 2, 3, 5), p1, 23);
    prefill_case(g, fp(2, 2, 64, 64, 1, l8 >= 4 ? 4 : l8, 32, 32), p1, 33);
    prefill_case(g, fp(8, 2, 128, 128, 0, l8, 32, 32), p2, 19);
    prefill_case(g, fp(8, 1, 256, 256, 1, l8, 32, 16), p2, 18);
}

static void run_tests(void) {
    gt_seed();
    pl_gpu *g = gt_open();
    if (!g) return;
    double t0 = pl_gpu_now();
    test_attn(g);
    fprintf(stderr, "decode kernel %.2fs\n", pl_gpu_now() - t0);
    t0 = pl_gpu_now();
    test_attn_prefill(g);
    fprintf(stderr, "prefill kernel %.2fs\n", pl_gpu_now() - t0);
    pl_gpu_close(g);
}
