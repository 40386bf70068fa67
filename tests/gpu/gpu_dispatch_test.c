/* gpu_dispatch_test.c - each model's kernel dispatches per decoded token, pinned.
 *
 * One decode step on the WebGPU backend (lavapipe in CI) is pl_model_forward of one id,
 * then the argmax into the ids buffer and a 4-byte read. The number of dispatches it
 * records follows from what llama.c issues and what gpu_fuse.c merges, so a model change
 * that reorders its ops and loses a fusion (or a fusion that stops matching) changes the
 * count and fails here. The expected numbers are worked out from the op list, not copied
 * from a run:
 *
 *   token = EMBED + n_layer * per_layer + HEAD + ARGMAX
 *   EMBED  = 1   embedding rows
 *   HEAD   = 3   copy of the last row, RMSNorm in place (in place: not fused into the
 *                output GEMV, which cannot both read and store xb), the output GEMV
 *   ARGMAX = 1   one workgroup takes the whole row (every vocabulary here is at most
 *                1024 ids: one top-k chunk; a larger one adds the merge of the chunks)
 *
 * Per layer, fused (the default):
 *   1  q/k/v GEMV: the attention RMSNorm folded in, the three weights merged into one
 *      (qwen2's q/k/v biases stop the merge: 3 GEMVs)
 *   1  RoPE of q and k in one dispatch, which also stores k and v into the caches
 *      (qwen3: the per-head q/k RMSNorms folded in too)
 *   1  attention (a second, the combine of the splits, once the cache passes 256
 *      positions: ATTN_CHUNK in gpu_encode.c)
 *   1  output projection, residual add fused
 *   1  gate/up GEMV with the FFN RMSNorm and SwiGLU folded in
 *   1  down projection, residual add fused
 *   = 6 (llama, qwen3), 8 (qwen2); + 1 past 256 positions.
 * Unfused (POOLED_GPU_FUSE=0, one kernel per op): norm, q, k, v, rope q, rope k, store k,
 * store v, attention, wo, norm, gate, up, swiglu, down = 15, + 2 per-head norms for qwen3
 * (a bias is part of its GEMV).
 *
 * Models whose layers differ (the hybrids, MoE) sum their layer kinds:
 *   token = EMBED + sum over kinds of n_layers_of_kind * per_layer_of_kind + HEAD + ARGMAX
 * MoE feed-forward (moe.c), fused: the router GEMV with the FFN RMSNorm folded in, top-k
 * (one workgroup: 8 experts) with the softmax of the k weights folded in, the experts'
 * gate/up GEMV with SwiGLU in one sweep (MatMulID pair fused), the experts' down GEMV, the
 * weighted combine into x = 5; with a gated shared expert + its gate/up GEMV with SwiGLU,
 * its down GEMV = 7 (its gate vector, a 1-row F32 GEMV issued right after the top-k, is
 * computed by the top-k kernel: SHARED_GATE, with the rank top-k, the default; its
 * sigmoid-scaled add into x is done by the combine's kernel: COMBINE_SHARED). Unfused: norm,
 * router, top-k, softmax, gate, up, SwiGLU, down, combine = 9;
 * + gate vector, gate, up, SwiGLU, down, sigmoid_mul = 15.
 *   qwen3_moe: 4 layers of qwen3 attention (4 fused, 12 unfused: the dense qwen3 layer
 *   without its FFN's norm, gate, up, SwiGLU, down) + MoE without a shared expert:
 *   fused 4 + 5 = 9, unfused 12 + 9 = 21.
 *   qwen3_5_moe: 8 layers, every 4th full attention, MoE with a gated shared expert.
 *   Gated DeltaNet layer, fused: the q/k/v + z + beta + alpha GEMV (norm folded in, the
 *   weights merged: alpha is the fourth projection of the same x), conv1d, delta rule, the
 *   gated RMSNorm (SwiGLU(z, o) folded into the norm), the output GEMV (residual add
 *   fused) = 5; unfused: norm + 4 GEMVs + conv1d, delta rule, norm, SwiGLU, output = 10.
 *   Gated attention layer, fused: q/k/v + output-gate GEMV (norm folded in, the four
 *   weights merged), RoPE of q and k with the per-head norms and the cache stores, the
 *   attention, the sigmoid output gate, the output GEMV = 5; unfused: norm, q, k, v, gate,
 *   2 per-head norms, 2 RoPEs, 2 stores, attention, sigmoid_mul, wo = 14.
 *   So 6 x (5 + 7) + 2 x (5 + 7) = 96 fused, 6 x (10 + 15) + 2 x (14 + 15) = 208 unfused.
 *
 * With quantised activations (act q8) and gemv_xpre 1, each q8x GEMV with the RMSNorm
 * folded in reads x quantised by one pre-pass dispatch of its own: + 1 per normed
 * q8x GEMV (the q/k/v sweep and gate/up: 2 per dense layer, qwen2's three q/k/v GEMVs: 4;
 * the MoE layers' attention sweep: 1, their router is not q8x; stories260K is f32: 0). The
 * other checks open the backend with gemv_xpre = -1 (never), the formula above. The default
 * (auto) does it only from 4,096 columns, which no fixture has (xpre_rule_test).
 *
 * Each model's layer count is pinned too, and the totals written out, so a fixture with
 * another shape is noticed rather than silently giving another number.
 *
 * The model asks for its fusions (pl_be_fuse); every kind it asks for must have found its
 * ops (pl_gpu_backend_fusions_missed stays 0), and a group whose ops come in another order
 * than its pattern must count as missed (fusion_request_test below). */
#include "gpu/gpu.h"
#include "gpu/gpu_internal.h"
#include "model/model.h"
#include "test.h"

#define EMBED  1
#define HEAD   3
#define ARGMAX 1

/* One kind of layer: how many the model has, its dispatches fused and one kernel per op. */
typedef struct {
    int n, fused, simple, xpre; /* xpre: normed q8x GEMVs (a pre-pass each, act q8) */
} layer_kind;

typedef struct {
    const char *file; /* under shared/ */
    int n_layer;
    layer_kind kinds[2]; /* uniform models: one */
    int fused_total;     /* EMBED + sum of n * fused over the kinds + HEAD + ARGMAX, written out */
    int simple_total;    /* the same with simple */
    int xpre_total;      /* fused_total + sum of n * xpre over the kinds */
} pinned;

static const pinned models[] = {
    {"models/stories260K.gguf", 5, {{5, 6, 15, 0}}, 35, 80, 35}, /* 1+5*6+3+1, 1+5*15+3+1 */
    /* 1+4*6+3+1, 1+4*15+3+1, 29+4*2 */
    {"fixtures/hf/llama/llama-q8_0.gguf", 4, {{4, 6, 15, 2}}, 29, 65, 37},
    /* 1+4*8+3+1, 1+4*15+3+1, 37+4*4 */
    {"fixtures/hf/qwen2/qwen2-q8_0.gguf", 4, {{4, 8, 15, 4}}, 37, 65, 53},
    /* 1+4*6+3+1, 1+4*17+3+1, 29+4*2 */
    {"fixtures/hf/qwen3/qwen3-q8_0.gguf", 4, {{4, 6, 17, 2}}, 29, 73, 37},
    /* 1+4*9+3+1, 1+4*21+3+1, 41+4*1 */
    {"fixtures/hf/qwen3_moe/qwen3_moe-q8_0.gguf", 4, {{4, 9, 21, 1}}, 41, 89, 45},
    /* 1+6*12+2*12+3+1, 1+6*25+2*29+3+1, 101+6*1+2*1 */
    {"fixtures/hf/qwen3_5_moe/qwen3_5_moe-q8_0.gguf",
     8,
     {{6, 12, 25, 1}, {2, 12, 29, 1}},
     101,
     213,
     109},
    /* the dense hybrid (the 27B's family): a DeltaNet or gated attention layer, 5 fused / 10
     * or 14 unfused, + the dense FFN, 2 fused (gate/up with norm and SwiGLU, down with the
     * add) / 5 unfused (norm, gate, up, SwiGLU, down); xpre: the projection sweep and
     * gate/up. 1+6*7+2*7+3+1, 1+6*15+2*19+3+1, 61+6*2+2*2 */
    {"fixtures/hf/qwen3_5/qwen3_5-q8_0.gguf", 8, {{6, 7, 15, 2}, {2, 7, 19, 2}}, 61, 133, 77},
};

/* Dispatches of one decode step of id at position pos. */
static uint64_t step(pl_backend *be, const pl_model *m, pl_state *st, int32_t id, int64_t pos,
                     pl_status *s) {
    uint64_t d0, d1, s0, s1;
    pl_gpu_backend_counters(be, &d0, &s0);
    int32_t next = 0;
    *s = pl_model_forward(m, st, &id, 1, pos, false);
    if (!*s) *s = pl_be_argmax(pl_state_logits(st), 1, pl_state_ids(st), 0);
    if (!*s) *s = pl_be_read(pl_state_ids(st), 0, &next, sizeof next);
    pl_gpu_backend_counters(be, &d1, &s1);
    return d1 - d0;
}

/* Prefill `fill` positions, then two decode steps; both must record `want` dispatches. */
static void check_model(pl_backend *be, const pinned *p, int fill, int want, const char *mode) {
    pl_gguf *g = NULL;
    pl_model *m = NULL;
    pl_state *st = NULL;
    uint64_t missed0 = pl_gpu_backend_fusions_missed(be, NULL);
    pl_status s = pl_gguf_open(test_shared(p->file), &g);
    if (!s) s = pl_model_load(g, be, NULL, &m);
    if (!s) {
        CHECK(pl_model_get_info(m)->n_layer == p->n_layer, "%s: %d layers, pinned %d", p->file,
              pl_model_get_info(m)->n_layer, p->n_layer);
        pl_state_opts o = pl_state_opts_default(m);
        o.n_ctx = 320;
        o.n_batch = 32;
        s = pl_state_new(m, &o, &st);
    }
    int32_t ids[32];
    for (int i = 0; i < 32; i++) ids[i] = 1 + (i * 37) % 200;
    for (int pos = 0; !s && pos < fill; pos += 32) {
        int n = fill - pos < 32 ? fill - pos : 32;
        s = pl_model_forward(m, st, ids, n, pos, false);
    }
    float first = 0; /* a read runs (and counts) what the prefill recorded */
    if (!s) s = pl_be_read(pl_state_logits(st), 0, &first, sizeof first);
    for (int t = 0; !s && t < 2; t++) {
        uint64_t d = step(be, m, st, ids[t], fill + t, &s);
        if (s) break;
        fprintf(stderr, "%s, %s, position %d: %llu dispatches per token\n", p->file, mode, fill + t,
                (unsigned long long)d);
        CHECK(d == (uint64_t)want, "%s, %s, position %d: %llu dispatches per token, pinned %d",
              p->file, mode, fill + t, (unsigned long long)d, want);
    }
    CHECK(s == PL_OK, "%s: %s", p->file, pl_last_error());
    const char *last_missed = NULL;
    uint64_t missed = pl_gpu_backend_fusions_missed(be, &last_missed) - missed0;
    CHECK(missed == 0, "%s, %s: %llu requested fusions missed, the last: %s", p->file, mode,
          (unsigned long long)missed, last_missed);
    pl_state_free(st);
    pl_model_free(m);
    pl_gguf_free(g);
}

/* A gate/up/SwiGLU group issued in the pattern's order fuses into one dispatch; issued as
 * up, gate, SwiGLU(gate, up) it cannot, and the request counts as missed. */
static void fusion_request_test(pl_backend *be) {
    enum { K = 64, N_FF = 32 };
    float wv[N_FF * K], xv[K];
    for (int i = 0; i < N_FF * K; i++) wv[i] = (float)((i * 7) % 13 - 6) / 16.0f;
    for (int i = 0; i < K; i++) xv[i] = (float)(i % 5 - 2) / 4.0f;
    pl_buf *wg = NULL, *wu = NULL, *x = NULL, *g = NULL, *u = NULL;
    pl_status s = pl_be_buf_weight(be, PL_TYPE_F32, K, N_FF, wv, &wg);
    if (!s) s = pl_be_buf_weight(be, PL_TYPE_F32, K, N_FF, wv, &wu);
    if (!s) s = pl_be_buf_new(be, PL_TYPE_F32, K, 1, &x);
    if (!s) s = pl_be_buf_new(be, PL_TYPE_F32, N_FF, 1, &g);
    if (!s) s = pl_be_buf_new(be, PL_TYPE_F32, N_FF, 1, &u);
    if (!s) s = pl_be_write(x, 0, xv, sizeof xv);
    for (int bad = 0; !s && bad < 2; bad++) {
        uint64_t m0 = pl_gpu_backend_fusions_missed(be, NULL), d0, d1, s0, s1;
        float out[N_FF];
        pl_gpu_backend_counters(be, &d0, &s0);
        s = pl_be_fuse(be, PL_FUSE_GATE_UP);
        if (!s && bad) s = pl_be_matmul(wu, x, NULL, 1, false, u);
        if (!s) s = pl_be_matmul(wg, x, NULL, 1, false, g);
        if (!s && !bad) s = pl_be_matmul(wu, x, NULL, 1, false, u);
        if (!s) s = pl_be_swiglu(g, u, N_FF, g);
        if (!s) s = pl_be_fuse(be, 0);
        if (!s) s = pl_be_read(g, 0, out, sizeof out);
        pl_gpu_backend_counters(be, &d1, &s1);
        uint64_t missed = pl_gpu_backend_fusions_missed(be, NULL) - m0;
        CHECK(!s && missed == (uint64_t)bad, "gate/up request, %s order: %llu missed, want %d",
              bad ? "wrong" : "pattern", (unsigned long long)missed, bad);
        CHECK(!s && d1 - d0 == (bad ? 3u : 1u), "gate/up request, %s order: %llu dispatches",
              bad ? "wrong" : "pattern", (unsigned long long)(d1 - d0));
    }
    CHECK(s == PL_OK, "fusion request test: %s", pl_last_error());
    pl_be_buf_free(wg), pl_be_buf_free(wu), pl_be_buf_free(x), pl_be_buf_free(g);
    pl_be_buf_free(u);
}

/* Which GEMVs the pre-pass serves, by mode: auto only the normed ones of >= 4,096 columns. */
static void xpre_rule_test(void) {
    CHECK(!pl_gpu_xpre_applies(PL_GPU_XPRE_NONE, 1, 8192), "none took a GEMV");
    CHECK(pl_gpu_xpre_applies(PL_GPU_XPRE_NORMED, 1, 64), "normed missed a normed GEMV");
    CHECK(!pl_gpu_xpre_applies(PL_GPU_XPRE_NORMED, 0, 8192), "normed took a plain GEMV");
    CHECK(pl_gpu_xpre_applies(PL_GPU_XPRE_ALL, 0, 64), "all missed a plain GEMV");
    CHECK(pl_gpu_xpre_applies(PL_GPU_XPRE_AUTO, 1, 4096), "auto missed a normed 4096");
    CHECK(!pl_gpu_xpre_applies(PL_GPU_XPRE_AUTO, 1, 2048), "auto took a normed 2048");
    CHECK(!pl_gpu_xpre_applies(PL_GPU_XPRE_AUTO, 0, 8192), "auto took a plain GEMV");
}

/* A batched decode step (pl_model_forward_batch) of N sequences; on stories260K pinned:
 *   EMBED + n_layer * (4 + C N) + 2 + N
 * per layer: the norm and q/k/v in one GEMV over all rows (1), the output projection (1),
 * the FFN fused as in the single step (2); per row: RoPE of q and k with the cache stores
 * (1) and attention (1) on views of the batch's rows (C = 2), or, where the adapter cannot
 * bind a row at its offset (storage alignment), also its q, k, v copied to its own state
 * and its output copied back (C = 6); the head over all rows: the norm and the output GEMV
 * (2); each row's logits copied to its sequence (N). The fusions asked must all find
 * their ops. */
static void batch_step_check(pl_backend *be, const char *file, int want, bool slots) {
    enum { N = 3 };
    pl_gguf *g = NULL;
    pl_model *m = NULL;
    pl_state *st[N] = {NULL}, *b = NULL;
    pl_status s = pl_gguf_open(test_shared(file), &g);
    if (!s) s = pl_model_load(g, be, NULL, &m);
    pl_state_opts o = m ? pl_state_opts_default(m) : (pl_state_opts){0}, ob = o;
    o.n_ctx = 64, o.n_batch = 8;
    ob.n_ctx = 1, ob.n_batch = ob.n_logits = N;
    if (slots) ob.n_ctx = o.n_ctx, ob.n_slots = N; /* the sequences are slots of b's caches */
    if (!s) s = pl_state_new(m, &ob, &b);
    for (int i = 0; !s && i < N; i++) {
        o.slot_of = slots ? b : NULL, o.slot = i;
        s = pl_state_new(m, &o, &st[i]);
    }
    int32_t p[4] = {1, 40, 90, 7}, ids[N] = {11, 22, 33};
    int64_t pos[N];
    for (int i = 0; !s && i < N; i++)
        s = pl_model_forward(m, st[i], p, 2 + i, 0, false), pos[i] = 2 + i;
    float first = 0;
    if (!s) s = pl_be_read(pl_state_logits(st[N - 1]), 0, &first, sizeof first);
    uint64_t d0, d1, s0, s1, missed0 = pl_gpu_backend_fusions_missed(be, NULL);
    pl_gpu_backend_counters(be, &d0, &s0);
    if (!s) s = pl_model_forward_batch(m, b, st, ids, pos, N);
    if (!s) s = pl_be_read(pl_state_logits(st[0]), 0, &first, sizeof first);
    pl_gpu_backend_counters(be, &d1, &s1);
    CHECK(s == PL_OK, "batched step: %s", pl_last_error());
    fprintf(stderr, "%s, a batched step of %d: %llu dispatches\n", file, N,
            (unsigned long long)(d1 - d0));
    if (want) /* 0: not pinned, the fusions only */
        CHECK(!s && d1 - d0 == (uint64_t)want,
              "%s, a batched step of %d: %llu dispatches, "
              "pinned %d",
              file, N, (unsigned long long)(d1 - d0), want);
    const char *last = NULL;
    uint64_t missed = pl_gpu_backend_fusions_missed(be, &last) - missed0;
    CHECK(missed == 0, "%s, a batched step: %llu requested fusions missed, the last: %s", file,
          (unsigned long long)missed, last);
    for (int i = 0; i < N; i++) pl_state_free(st[i]);
    pl_state_free(b); /* (after its slots) */
    pl_model_free(m);
    pl_gguf_free(g);
}

static void run_tests(void) {
    xpre_rule_test();
    /* the pinned totals are the formula's */
    for (size_t i = 0; i < sizeof models / sizeof models[0]; i++) {
        const pinned *p = &models[i];
        int layers = 0, fused = EMBED + HEAD + ARGMAX, simple = EMBED + HEAD + ARGMAX, xpre = 0;
        for (int k = 0; k < 2; k++) {
            layers += p->kinds[k].n;
            fused += p->kinds[k].n * p->kinds[k].fused;
            simple += p->kinds[k].n * p->kinds[k].simple;
            xpre += p->kinds[k].n * p->kinds[k].xpre;
        }
        CHECK(layers == p->n_layer && p->fused_total == fused && p->simple_total == simple &&
                  p->xpre_total == fused + xpre,
              "%s: pinned totals do not follow the formula", p->file);
    }
    if (!getenv("XDG_RUNTIME_DIR")) setenv("XDG_RUNTIME_DIR", "/tmp", 0); /* loader noise */
    pl_backend *fused = NULL, *simple = NULL, *xpre = NULL;
    pl_gpu_backend_opts fo = {.no_tune = 1, .no_selftest = 1, .gemv_xpre = -1};
    pl_gpu_backend_opts so = {.no_tune = 1, .no_selftest = 1, .no_fuse = 1, .gemv_xpre = -1};
    pl_gpu_backend_opts xo = {.no_tune = 1, .no_selftest = 1, .gemv_xpre = 1};
    pl_status s = pl_gpu_backend_new(&fo, &fused);
    if (!s) s = pl_gpu_backend_new(&so, &simple);
    if (!s) s = pl_gpu_backend_new(&xo, &xpre);
    if (s) {
        test_no_gpu("the webgpu backend", pl_last_error());
        pl_be_destroy(fused);
        pl_be_destroy(simple);
        return;
    }
    fusion_request_test(fused);
    /* views of stories260K's k rows (4 kv heads x 8 floats: 128 bytes) place where the
     * adapter's storage alignment allows (lavapipe), else the rows are copied */
    pl_buf *kb = NULL, *kv = NULL;
    int per_col = 6;
    if (pl_be_buf_new(fused, PL_TYPE_F32, 32, 2, &kb) == PL_OK &&
        pl_be_buf_view(kb, 1, 1, &kv) == PL_OK)
        per_col = 2;
    pl_clear_error();
    pl_be_buf_free(kv);
    pl_be_buf_free(kb);
    fprintf(stderr, "batched step: %d dispatches per column and layer\n", per_col);
    batch_step_check(fused, "models/stories260K.gguf", EMBED + 5 * (4 + per_col * 3) + 2 + 3,
                     false);
    /* cache slots: per layer the q/k/v GEMV, one RoPE with both stores for all columns, one
     * attention (one split: no combine), the output projection and the FFN (2) */
    batch_step_check(fused, "models/stories260K.gguf", EMBED + 5 * 6 + 2 + 3, true);
    batch_step_check(fused, "fixtures/hf/qwen3_5/qwen3_5-q8_0.gguf", 0, false); /* the hybrid's */
    for (size_t i = 0; i < sizeof models / sizeof models[0]; i++) {
        const pinned *p = &models[i];
        for (int q8 = 0; q8 < 2; q8++) { /* quantised activations add no dispatch */
            fused->act_q8 = q8;
            check_model(fused, p, 3, p->fused_total, q8 ? "fused, act q8" : "fused");
        }
        check_model(simple, p, 3, p->simple_total, "one kernel per op");
        xpre->act_q8 = 1;
        check_model(xpre, p, 3, p->xpre_total, "fused, act q8, xpre 1");
    }
    /* past ATTN_CHUNK = 256 cached positions each attention adds its combine dispatch */
    const pinned *st = &models[0];
    check_model(fused, st, 260, st->fused_total + st->n_layer, "fused, 260 positions");
    /* the switches of the side-by-side measurement: without the shared gate's fusion (or
     * without the rank top-k it needs) each MoE layer runs its 1-row gate GEMV again;
     * without the combine's, its sigmoid_mul */
    const pinned *moe = &models[5];
    static const char *const off_what[] = {"fused, no shared gate fusion",
                                           "fused, top-k by reduction", "fused, no combine fusion"};
    for (int v = 0; v < 3; v++) {
        pl_backend *off = NULL;
        pl_gpu_backend_opts oo = fo;
        oo.moe_shgate = v == 0 ? -1 : 0;
        oo.topk_rank = v == 1 ? -1 : 0;
        oo.moe_comb = v == 2 ? -1 : 0;
        s = pl_gpu_backend_new(&oo, &off);
        CHECK(s == PL_OK, "backend: %s", pl_last_error());
        if (!s) check_model(off, moe, 3, moe->fused_total + moe->n_layer, off_what[v]);
        pl_be_destroy(off);
    }
    pl_be_destroy(fused);
    pl_be_destroy(simple);
    pl_be_destroy(xpre);
}
