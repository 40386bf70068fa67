/* moe_model_test.c - the mixture-of-experts block (moe.c) and a MoE model's state.
 *
 * pl_moe_ffn on random weights against the block written out in double precision here:
 * router, top-k by logit, weights normalised over the chosen experts (norm_topk) or the
 * softmax over all of them, each expert's SwiGLU, the weighted sum added to the residual,
 * and a shared expert, ungated or gated by sigmoid(ffn_gate_inp_shexp . x) (the gated case
 * is skipped, with a note, while the backend has no sigmoid_mul).
 *
 * The state (tiny_model.h's qwen3moe: no dense FFN, not even its feed_forward_length): the
 * state-size check counts the MoE scratch buffers (the largest, [n_batch*n_used,
 * max(n_embd, n_ff_exp)], fits a device whose largest buffer is exactly its size and is
 * refused by one a byte smaller), and pl_state_bytes counts them too (the growth of the
 * state per token of batch). */
#include "cpu/cpu.h"
#include "model/fixture.h"
#include "model/model.h"
#include "model/moe.h"
#include "model/tiny_model.h"
#include "test.h"

static uint64_t rng = 0x853c49e6748fea9bull;
static double frand(void) { /* [-1, 1) */
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (double)(rng >> 11) / 4503599627370496.0 - 1.0;
}

enum { E = 64, NT = 5 }; /* n_embd, tokens */

/* A random f32 weight [rows, cols], its values also in *v (malloc'd). */
static pl_buf *rand_weight(pl_backend *be, int64_t cols, int64_t rows, float **v) {
    *v = malloc(sizeof(float) * (size_t)(rows * cols));
    for (int64_t i = 0; i < rows * cols; i++) (*v)[i] = (float)(frand() / sqrt((double)cols));
    pl_buf *b = NULL;
    CHECK(pl_be_buf_weight(be, PL_TYPE_F32, cols, rows, *v, &b) == PL_OK, "%s", pl_last_error());
    return b;
}

static double dot(const float *w, const double *x, int n) {
    double s = 0;
    for (int i = 0; i < n; i++) s += w[i] * x[i];
    return s;
}

/* down(silu(gate x) * up x) for one expert's matrices, into out [E]. */
static void swiglu_ref(const float *g, const float *u, const float *d, int ff, const double *x,
                       double *out) {
    double *h = malloc(sizeof(double) * (size_t)ff);
    for (int r = 0; r < ff; r++) {
        double a = dot(g + (int64_t)r * E, x, E);
        h[r] = a / (1 + exp(-a)) * dot(u + (int64_t)r * E, x, E);
    }
    for (int c = 0; c < E; c++) out[c] = dot(d + (int64_t)c * ff, h, ff);
    free(h);
}

/* One configuration: returns false when skipped (no sigmoid_mul yet). */
static bool ffn_case(pl_backend *be, bool norm_topk, int n_ff_sh, bool gated) {
    pl_moe_config c = {
        .n_expert = 6, .n_used = 3, .n_ff_exp = 32, .n_ff_shexp = n_ff_sh, .norm_topk = norm_topk};
    int ne = c.n_expert, k = c.n_used, ff = c.n_ff_exp;
    pl_moe_weights w = {0};
    float *vr, *vg, *vu, *vd, *sg = NULL, *su = NULL, *sd = NULL, *sgi = NULL;
    w.router = rand_weight(be, E, ne, &vr);
    w.gate_exps = rand_weight(be, E, (int64_t)ne * ff, &vg);
    w.up_exps = rand_weight(be, E, (int64_t)ne * ff, &vu);
    w.down_exps = rand_weight(be, ff, (int64_t)ne * E, &vd);
    if (n_ff_sh) {
        w.gate_shexp = rand_weight(be, E, n_ff_sh, &sg);
        w.up_shexp = rand_weight(be, E, n_ff_sh, &su);
        w.down_shexp = rand_weight(be, n_ff_sh, E, &sd);
        if (gated) w.gate_inp_shexp = rand_weight(be, E, 1, &sgi);
    }
    /* inputs whose router logits are apart (a clear top-k in float and double alike) */
    float xn[NT * E], x0[NT * E];
    double lg[NT][8];
    for (bool clear = false; !clear;) {
        clear = true;
        for (int i = 0; i < NT * E; i++) xn[i] = (float)frand(), x0[i] = (float)(3 * frand());
        for (int t = 0; t < NT; t++)
            for (int e = 0; e < ne; e++) {
                double xd[E];
                for (int i = 0; i < E; i++) xd[i] = xn[t * E + i];
                lg[t][e] = dot(vr + e * E, xd, E);
                for (int f = 0; f < e; f++) clear &= fabs(lg[t][e] - lg[t][f]) > 1e-3;
            }
    }
    pl_moe_state st;
    pl_buf *bxn = NULL, *bx = NULL;
    pl_status s = pl_moe_state_new(be, &c, E, NT, &st);
    if (!s) s = pl_be_buf_new(be, PL_TYPE_F32, E, NT, &bxn);
    if (!s) s = pl_be_buf_new(be, PL_TYPE_F32, E, NT, &bx);
    if (!s) s = pl_be_write(bxn, 0, xn, sizeof xn);
    if (!s) s = pl_be_write(bx, 0, x0, sizeof x0);
    if (!s) s = pl_moe_ffn(&c, &w, &st, bxn, NT, bx);
    bool skipped = s && gated && strstr(pl_last_error(), "not implemented yet");
    if (skipped) fprintf(stderr, "note: gated shared expert skipped: %s\n", pl_last_error());
    CHECK(s == PL_OK || skipped, "moe_ffn: %s", pl_last_error());
    float got[NT * E];
    if (!s) pl_be_read(bx, 0, got, sizeof got);
    double worst = 0;
    for (int t = 0; t < NT && !s; t++) {
        double xd[E], want[E], y[E];
        for (int i = 0; i < E; i++) xd[i] = xn[t * E + i], want[i] = x0[t * E + i];
        /* the k largest logits, by selection */
        int ids[8];
        bool taken[8] = {0};
        for (int j = 0; j < k; j++) {
            int b = -1;
            for (int e = 0; e < ne; e++)
                if (!taken[e] && (b < 0 || lg[t][e] > lg[t][b])) b = e;
            ids[j] = b, taken[b] = true;
        }
        double mx = lg[t][ids[0]], sum_k = 0, sum_all = 0;
        for (int j = 0; j < k; j++) sum_k += exp(lg[t][ids[j]] - mx);
        for (int e = 0; e < ne; e++) sum_all += exp(lg[t][e] - mx);
        for (int j = 0; j < k; j++) {
            int e = ids[j];
            double wt = exp(lg[t][e] - mx) / (norm_topk ? sum_k : sum_all);
            swiglu_ref(vg + (int64_t)e * ff * E, vu + (int64_t)e * ff * E, vd + (int64_t)e * E * ff,
                       ff, xd, y);
            for (int i = 0; i < E; i++) want[i] += wt * y[i];
        }
        if (n_ff_sh) {
            swiglu_ref(sg, su, sd, n_ff_sh, xd, y);
            double gate = gated ? 1 / (1 + exp(-dot(sgi, xd, E))) : 1;
            for (int i = 0; i < E; i++) want[i] += gate * y[i];
        }
        for (int i = 0; i < E; i++) {
            double e = fabs(got[t * E + i] - want[i]) / (1 + fabs(want[i]));
            worst = e > worst ? e : worst;
        }
    }
    CHECK(worst < 2e-6, "moe_ffn (norm_topk %d, shared %d, gated %d): %.3g from the reference",
          norm_topk, n_ff_sh, gated, worst);
    pl_moe_state_free(&st);
    pl_be_buf_free(bxn), pl_be_buf_free(bx);
    pl_buf *all[] = {w.router,     w.gate_exps, w.up_exps,    w.down_exps,
                     w.gate_shexp, w.up_shexp,  w.down_shexp, w.gate_inp_shexp};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) pl_be_buf_free(all[i]);
    free(vr), free(vg), free(vu), free(vd), free(sg), free(su), free(sd), free(sgi);
    return !skipped;
}

enum { B = 8 };

static pl_status open_tiny(pl_backend *be, const char *path, fixture_model *fm) {
    pl_state_opts o = {.n_ctx = 8, .n_batch = B, .n_logits = 1, .kv_type = PL_TYPE_F32};
    return fixture_model_open(fm, be, path, &o);
}

static void run_tests(void) {
    pl_backend *be = NULL;
    CHECK(pl_cpu_new(1, &be) == PL_OK, "%s", pl_last_error());
    if (!be) return;
    for (int norm = 0; norm < 2; norm++) ffn_case(be, norm, 0, false);
    ffn_case(be, true, 48, false);
    ffn_case(be, true, 48, true);

    char path[600];
    snprintf(path, sizeof path, "%s/tiny-qwen3moe.gguf", test_tmpdir());
    CHECK(tiny_model_write(path, "qwen3moe", 1, PL_TYPE_F32) == 0, "%s", path);

    /* the largest buffer of the state: an expert output per (token, slot) */
    int64_t widest = (int)TINY_EMBD > (int)TINY_FF_EXP ? TINY_EMBD : TINY_FF_EXP;
    int64_t largest = (int64_t)B * TINY_USED * widest * 4;
    fixture_model fm;
    be->max_buf_bytes = (uint64_t)largest;
    pl_status s = open_tiny(be, path, &fm);
    CHECK(s == PL_OK, "a device whose largest buffer is %lld bytes: %s", (long long)largest,
          pl_last_error());
    if (!s) {
        /* a state for 2B tokens holds B more tokens' worth of every activation, the MoE
         * scratch included: router logits, ids, weights, gate, up and y of every slot */
        fixture_model f2;
        pl_state_opts o2 = *pl_state_get_opts(fm.st);
        o2.n_batch = 2 * B;
        be->max_buf_bytes = 0;
        CHECK(fixture_model_open(&f2, be, path, &o2) == PL_OK, "%s", pl_last_error());
        int64_t per_tok = f2.st ? (pl_state_bytes(f2.st) - pl_state_bytes(fm.st)) / B : 0;
        int64_t moe =
            (TINY_EXPERTS + 2 * TINY_USED + TINY_USED * (2 * TINY_FF_EXP + TINY_EMBD)) * 4;
        CHECK(per_tok >= moe + TINY_EMBD * 4,
              "a token adds %lld bytes of state, the MoE scratch alone is %lld", (long long)per_tok,
              (long long)moe);
        fixture_model_close(&f2);
        const int32_t ids[B] = {1, 2, 3, 4, 5, 6, 7, 8};
        CHECK(pl_model_forward(fm.m, fm.st, ids, B, 0, false) == PL_OK, "%s", pl_last_error());
    }
    fixture_model_close(&fm);
    be->max_buf_bytes = (uint64_t)largest - 1;
    s = open_tiny(be, path, &fm);
    CHECK(s != PL_OK && strstr(pl_last_error(), "per activation buffer"),
          "a device whose largest buffer is a byte too small: %s",
          s ? pl_last_error() : "accepted");
    fixture_model_close(&fm);
    be->max_buf_bytes = 0;
    CHECK(be->live_bufs == 0, "%lld buffers leaked", (long long)be->live_bufs);
    pl_be_destroy(be);
}
