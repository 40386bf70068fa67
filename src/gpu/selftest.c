/* selftest.c - the load-time self-test and GEMV autotune of the GPU backend (selftest.h).
 *
 * The self-test drives the backend's own ops (so recording, fusion and encoding are
 * checked too) on fresh random inputs: a normalised projection per weight type, a fused
 * gate/up, q/k norm + RoPE + cache store + attention, argmax with ties and an embedding,
 * and compares every buffer they write with kernel_ref.h on the host. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "kernel_ref.h"
#include "repack.h"
#include "selftest.h"

typedef struct {
    gpu_backend *gb;
    uint64_t rng;
    char why[200];
    pl_buf *bufs[64];
    int n_bufs;
} st_ctx;

static uint32_t rnd(st_ctx *c) {
    c->rng ^= c->rng << 13, c->rng ^= c->rng >> 7, c->rng ^= c->rng << 17;
    return (uint32_t)(c->rng >> 16);
}
static float unif(st_ctx *c, float lo, float hi) { return lo + (hi - lo) * (rnd(c) / 4294967296.0f); }
static void fill(st_ctx *c, float *x, size_t n, float lo, float hi) {
    for (size_t i = 0; i < n; i++) x[i] = unif(c, lo, hi);
}

static const pl_backend_methods *M(st_ctx *c) { return c->gb->be.m; }

static pl_buf *act(st_ctx *c, uint32_t type, int64_t ne0, int64_t ne1, const void *data) {
    pl_buf *b = NULL;
    if (c->n_bufs == 64 || M(c)->buf_new(&c->gb->be, type, ne0, ne1, &b) != PL_OK) return NULL;
    c->bufs[c->n_bufs++] = b;
    size_t es = type == PL_TYPE_F16 ? 2 : 4;
    if (data && M(c)->write(&c->gb->be, b, 0, data, ne0 * ne1 * (int64_t)es) != PL_OK) return NULL;
    return b;
}

static pl_buf *weight(st_ctx *c, uint32_t type, int64_t ne0, int64_t ne1, const void *data) {
    pl_buf *b = NULL;
    if (c->n_bufs == 64 || M(c)->buf_weight(&c->gb->be, type, ne0, ne1, data, &b) != PL_OK)
        return NULL;
    c->bufs[c->n_bufs++] = b;
    return b;
}

static int readf(st_ctx *c, pl_buf *b, void *dst, size_t bytes) {
    return M(c)->read(&c->gb->be, b, 0, dst, (int64_t)bytes) == PL_OK;
}

/* Compare n values; on failure note which check and return 0. */
static int close_to(st_ctx *c, const char *what, const float *got, const float *want, size_t n,
                    float rel, float abs_tol) {
    for (size_t i = 0; i < n; i++) {
        if (!(fabsf(got[i] - want[i]) <= rel * fabsf(want[i]) + abs_tol)) {
            snprintf(c->why, sizeof c->why, "%s: value %zu is %g, expected %g", what, i,
                     (double)got[i], (double)want[i]);
            return 0;
        }
    }
    return 1;
}

/* Random GGML rows of a type (valid f16 scales), and the same rows in GPU layout. */
static unsigned char *ggml_rows(st_ctx *c, uint32_t type, uint32_t cols, uint32_t rows) {
    int64_t rb = pl_row_size(type, cols);
    unsigned char *d = malloc((size_t)rb * rows);
    if (!d) return NULL;
    for (int64_t i = 0; i < rb * rows; i++) d[i] = (unsigned char)rnd(c);
    if (type == PL_TYPE_F32) {
        fill(c, (float *)d, (size_t)cols * rows, -1, 1);
    } else if (type == PL_TYPE_F16) {
        for (size_t i = 0; i < (size_t)cols * rows; i++) ((uint16_t *)d)[i] = pl_f32_to_f16(unif(c, -1, 1));
    } else {
        size_t bs = type == PL_TYPE_Q4_0 ? 18 : 34;
        for (size_t b = 0; b < (size_t)rows * cols / 32; b++) {
            uint16_t s = pl_f32_to_f16(unif(c, -0.05f, 0.05f));
            memcpy(d + b * bs, &s, 2);
        }
    }
    return d;
}

/* ------------------------------------------------------------------ the checks */

/* RMSNorm + projection (+ bias) of 2 vectors: the fused GEMV and its normalised-x output. */
static int check_gemv(st_ctx *c, uint32_t type) {
    uint32_t rows = 64, cols = 128, n = 2;
    unsigned char *w = ggml_rows(c, type, cols, rows);
    float x[256], nw[128], bias[64], y[128], xb[256], ry[128], rxb[256];
    fill(c, x, n * cols, -2, 2), fill(c, nw, cols, 0.5f, 1.5f), fill(c, bias, rows, -1, 1);
    pl_gpu_wtype wt;
    int ok = w && pl_gpu_repack_type(type, cols, &wt) == PL_OK;
    void *q = malloc(pl_gpu_quant_bytes(wt, cols, rows) + 16);
    uint16_t *s = malloc(pl_gpu_scale_bytes(wt, cols, rows) + 16);
    pl_buf *W = ok ? weight(c, type, cols, rows, w) : NULL, *NW = weight(c, PL_TYPE_F32, cols, 1, nw);
    pl_buf *B = weight(c, PL_TYPE_F32, rows, 1, bias), *X = act(c, PL_TYPE_F32, cols, n, x);
    pl_buf *XB = act(c, PL_TYPE_F32, cols, n, NULL), *Y = act(c, PL_TYPE_F32, rows, n, NULL);
    ok = ok && q && s && W && NW && B && X && XB && Y &&
         M(c)->rms_norm(&c->gb->be, X, NW, n, cols, 1e-5f, XB) == PL_OK &&
         M(c)->matmul(&c->gb->be, W, XB, B, n, false, Y) == PL_OK && readf(c, Y, y, n * rows * 4) &&
         readf(c, XB, xb, n * cols * 4) &&
         pl_gpu_repack_rows(type, w, cols, rows, wt, q, s, NULL) == PL_OK;
    if (ok) {
        pl_rmsnorm_params np = {cols, 32, 1e-5f, 0};
        pl_gpu_ref_rmsnorm(&np, n, x, nw, rxb);
        pl_gemv_params gp = {.type = wt, .rows = rows, .cols = cols, .mode = PL_GEMV_STORE,
                             .bias = 1, .parts = 1};
        pl_gpu_ref_mat m = {{q}, {s}};
        pl_gpu_ref_gemv(&gp, &m, n, rxb, NULL, bias, ry, NULL);
        ok = close_to(c, "normalised x", xb, rxb, n * cols, 1e-5f, 1e-6f) &&
             close_to(c, "projection", y, ry, n * rows, 1e-4f, 1e-4f);
    }
    free(w), free(q), free(s);
    return ok;
}

/* Gate/up projections and SwiGLU, fused into one GEMV with the up output kept. */
static int check_gate_up(st_ctx *c, uint32_t type) {
    uint32_t rows = 64, cols = 128;
    unsigned char *wg = ggml_rows(c, type, cols, rows), *wu = ggml_rows(c, type, cols, rows);
    float x[128], h[64], u[64], rh[64], ru[64];
    fill(c, x, cols, -1, 1);
    pl_gpu_wtype wt;
    pl_gpu_repack_type(type, cols, &wt);
    void *qg = malloc(pl_gpu_quant_bytes(wt, cols, rows)), *qu = malloc(pl_gpu_quant_bytes(wt, cols, rows));
    uint16_t *sg = malloc(pl_gpu_scale_bytes(wt, cols, rows) + 2), *su = malloc(pl_gpu_scale_bytes(wt, cols, rows) + 2);
    pl_buf *WG = wg ? weight(c, type, cols, rows, wg) : NULL, *WU = wu ? weight(c, type, cols, rows, wu) : NULL;
    pl_buf *X = act(c, PL_TYPE_F32, cols, 1, x), *G = act(c, PL_TYPE_F32, rows, 1, NULL);
    pl_buf *U = act(c, PL_TYPE_F32, rows, 1, NULL);
    int ok = qg && qu && sg && su && WG && WU && X && G && U &&
             M(c)->matmul(&c->gb->be, WG, X, NULL, 1, false, G) == PL_OK &&
             M(c)->matmul(&c->gb->be, WU, X, NULL, 1, false, U) == PL_OK &&
             M(c)->swiglu(&c->gb->be, G, U, rows, G) == PL_OK && readf(c, G, h, rows * 4) &&
             readf(c, U, u, rows * 4) && pl_gpu_repack_rows(type, wg, cols, rows, wt, qg, sg, NULL) == PL_OK &&
             pl_gpu_repack_rows(type, wu, cols, rows, wt, qu, su, NULL) == PL_OK;
    if (ok) {
        pl_gemv_params gp = {.type = wt, .rows = rows, .cols = cols, .mode = PL_GEMV_GATE_UP, .parts = 1};
        pl_gpu_ref_mat m[2] = {{{qg}, {sg}}, {{qu}, {su}}};
        pl_gpu_ref_gemv(&gp, m, 1, x, NULL, NULL, rh, NULL);
        gp.mode = PL_GEMV_STORE;
        pl_gpu_ref_gemv(&gp, &m[1], 1, x, NULL, NULL, ru, NULL);
        ok = close_to(c, "gate/up", h, rh, rows, 1e-4f, 1e-4f) &&
             close_to(c, "up projection", u, ru, rows, 1e-4f, 1e-4f);
    }
    free(wg), free(wu), free(qg), free(qu), free(sg), free(su);
    return ok;
}

/* Per-head q/k norm, RoPE, the cache store and attention at position 6 of an f16 cache. */
static int check_attention(st_ctx *c) {
    enum { NH = 4, NKV = 2, HD = 32, CTX = 16, POS = 6 };
    float q[NH * HD], k[NKV * HD], v[NKV * HD], qn[HD], kn[HD], att[NH * HD], ratt[NH * HD];
    uint16_t kc[CTX * NKV * HD], vc[CTX * NKV * HD], gk[CTX * NKV * HD];
    fill(c, q, NH * HD, -1, 1), fill(c, k, NKV * HD, -1, 1), fill(c, v, NKV * HD, -1, 1);
    fill(c, qn, HD, 0.5f, 1.5f), fill(c, kn, HD, 0.5f, 1.5f);
    for (int i = 0; i < CTX * NKV * HD; i++) {
        kc[i] = pl_f32_to_f16(unif(c, -1, 1));
        vc[i] = pl_f32_to_f16(unif(c, -1, 1));
    }
    pl_buf *Q = act(c, PL_TYPE_F32, NH * HD, 1, q), *K = act(c, PL_TYPE_F32, NKV * HD, 1, k);
    pl_buf *V = act(c, PL_TYPE_F32, NKV * HD, 1, v), *O = act(c, PL_TYPE_F32, NH * HD, 1, NULL);
    pl_buf *KC = act(c, PL_TYPE_F16, NKV * HD, CTX, kc), *VC = act(c, PL_TYPE_F16, NKV * HD, CTX, vc);
    pl_buf *QN = weight(c, PL_TYPE_F32, HD, 1, qn), *KN = weight(c, PL_TYPE_F32, HD, 1, kn);
    pl_rope_params rp = {.mode = PL_ROPE_NEOX, .n_heads = NH, .head_dim = HD, .rope_dim = HD,
                         .theta_base = 10000.0f, .freq_scale = 1.0f};
    pl_attn_params ap = {.n_head = NH, .n_head_kv = NKV, .head_dim = HD, .head_dim_v = HD,
                         .scale = 0.17677669f};
    pl_backend *be = &c->gb->be;
    pl_rope_params rk = rp;
    rk.n_heads = NKV;
    int ok = Q && K && V && O && KC && VC && QN && KN &&
             M(c)->rms_norm(be, Q, QN, NH, HD, 1e-6f, Q) == PL_OK &&
             M(c)->rms_norm(be, K, KN, NKV, HD, 1e-6f, K) == PL_OK &&
             M(c)->rope(be, Q, 1, POS, &rp) == PL_OK && M(c)->rope(be, K, 1, POS, &rk) == PL_OK &&
             M(c)->kv_store(be, K, 1, POS, KC) == PL_OK && M(c)->kv_store(be, V, 1, POS, VC) == PL_OK &&
             M(c)->attention(be, Q, KC, VC, 1, POS, &ap, O) == PL_OK && readf(c, O, att, sizeof att) &&
             readf(c, KC, gk, sizeof gk);
    if (ok) {
        float tab[(POS + 1) * HD];
        pl_gpu_rope_table(POS + 1, HD, 10000.0f, 1.0f, NULL, tab);
        pl_rope_params_gpu g = {.n_heads = NH, .head_dim = HD, .rot_dim = HD, .neox = 1,
                                .norm = 1, .eps = 1e-6f};
        pl_gpu_ref_rope(&g, tab, POS, 1, q, qn, NULL, NULL, NULL);
        g.n_heads = NKV, g.store = g.store_v = g.cache_f16 = 1, g.head_dim_v = HD;
        pl_gpu_ref_rope(&g, tab, POS, 1, k, kn, kc, v, vc);
        pl_attn_params_gpu a = {.n_head = NH, .n_kv_head = NKV, .head_dim = HD, .head_dim_v = HD,
                                .kv_f16 = 1, .scale = ap.scale};
        pl_gpu_ref_attn(&a, q, kc, vc, POS, 0, 1, ratt);
        float gkf[NKV * HD], rkf[NKV * HD];
        for (int i = 0; i < NKV * HD; i++) {
            gkf[i] = pl_f16_to_f32(gk[POS * NKV * HD + i]);
            rkf[i] = pl_f16_to_f32(kc[POS * NKV * HD + i]);
        }
        ok = close_to(c, "K cache", gkf, rkf, NKV * HD, 2e-3f, 1e-6f) &&
             close_to(c, "attention", att, ratt, NH * HD, 1e-3f, 1e-4f);
    }
    return ok;
}

/* Argmax with ties (lowest index wins) and an embedding lookup from GPU ids. */
static int check_argmax_embed(st_ctx *c) {
    enum { NV = 3000, D = 64, ROWS = 50 };
    float *x = malloc(NV * sizeof *x), emb[2 * D], remb[2 * D], rv;
    if (!x) return 0;
    for (int i = 0; i < NV; i++) x[i] = (float)(rnd(c) % 50);
    uint32_t rid;
    pl_gpu_ref_topk(x, NV, 1, &rv, &rid);
    unsigned char *t = ggml_rows(c, PL_TYPE_Q8_0, D, ROWS);
    int32_t ids[2] = {0, (int32_t)(rnd(c) % ROWS)}, gid[2];
    pl_buf *X = act(c, PL_TYPE_F32, NV, 1, x), *I = act(c, PL_TYPE_I32, 2, 1, ids);
    pl_buf *T = t ? weight(c, PL_TYPE_Q8_0, D, ROWS, t) : NULL, *E = act(c, PL_TYPE_F32, D, 2, NULL);
    pl_backend *be = &c->gb->be;
    /* argmax writes ids[0], then the embedding reads both ids on the GPU */
    int ok = X && I && T && E && M(c)->argmax(be, X, 1, I, 0) == PL_OK &&
             M(c)->embed(be, T, I, 2, E) == PL_OK && readf(c, E, emb, sizeof emb) &&
             readf(c, I, gid, sizeof gid);
    if (ok && gid[0] != (int32_t)rid) {
        snprintf(c->why, sizeof c->why, "argmax: id %d, expected %u", gid[0], rid);
        ok = 0;
    }
    if (ok) {
        void *q = malloc(ROWS * D);
        uint16_t *s = malloc(ROWS * D / 16 + 4);
        int32_t rids[2] = {(int32_t)rid, ids[1]};
        pl_embed_params ep = {.type = PL_GW_Q8_0, .rows = ROWS, .cols = D, .parts = 1};
        ok = q && s && pl_gpu_repack_rows(PL_TYPE_Q8_0, t, D, ROWS, PL_GW_Q8_0, q, s, NULL) == PL_OK;
        pl_gpu_ref_mat m = {{q}, {s}};
        if (ok) pl_gpu_ref_embed(&ep, &m, rids, 2, remb);
        ok = ok && close_to(c, "embedding", emb, remb, 2 * D, 0, 0);
        free(q), free(s);
    }
    free(x), free(t);
    return ok;
}

pl_status pl_gpu_selftest(gpu_backend *gb) {
    st_ctx c;
    memset(&c, 0, sizeof c);
    c.gb = gb;
    c.rng = (uint64_t)time(NULL) * 2654435761u + 1;
    static const uint32_t types[4] = {PL_TYPE_F32, PL_TYPE_F16, PL_TYPE_Q4_0, PL_TYPE_Q8_0};
    int ok = 1;
    for (int i = 0; ok && i < 4; i++) ok = check_gemv(&c, types[i]);
    ok = ok && check_gate_up(&c, PL_TYPE_Q4_0) && check_attention(&c) && check_argmax_embed(&c);
    char err[300];
    snprintf(err, sizeof err, "%s", c.why[0] ? c.why : pl_last_error());
    for (int i = c.n_bufs - 1; i >= 0; i--) gb->be.m->buf_free(&gb->be, c.bufs[i]);
    if (!ok) return pl_fail(PL_ERR, "GPU self-test failed: %s", err);
    return PL_OK;
}

/* ------------------------------------------------------------------ autotune */

static const char *cache_path(char *buf, size_t cap) {
    const char *x = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    if (x && *x) snprintf(buf, cap, "%s/pooled", x);
    else if (home && *home) snprintf(buf, cap, "%s/.cache/pooled", home);
    else return NULL;
    return buf;
}

/* The cache key: the adapter name with anything odd replaced. */
static void adapter_key(const gpu_backend *gb, char *key, size_t cap) {
    snprintf(key, cap, "%s", gb->info->name);
    for (char *p = key; *p; p++)
        if (*p == ' ' || *p == '\n' || *p == '=') *p = '_';
}

static int load_tune(gpu_backend *gb) {
    char dir[512], path[600], key[200], line[400];
    if (!cache_path(dir, sizeof dir)) return 0;
    snprintf(path, sizeof path, "%s/gpu-tune.txt", dir);
    adapter_key(gb, key, sizeof key);
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    int found = 0;
    while (fgets(line, sizeof line, f)) {
        char k[200];
        unsigned t[20];
        int n = 0, off = 0;
        if (sscanf(line, "%199s%n", k, &off) != 1 || strcmp(k, key)) continue;
        for (const char *q = line + off; n < 20; n++) {
            int used;
            if (sscanf(q, "%u%n", &t[n], &used) != 1) break;
            q += used;
        }
        if (n != 20) continue;
        for (int i = 0; i < 4; i++) {
            unsigned *v = &t[5 * i];
            int sg_ok = v[3] == 0 || (gb->info->has_subgroups && v[3] == gb->info->subgroup_min &&
                                      v[3] == gb->info->subgroup_max && v[0] % v[3] == 0);
            if (v[0] >= 8 && v[0] <= 1024 && !(v[0] & (v[0] - 1)) && v[1] >= 1 && v[1] <= 8 &&
                (v[2] == 0 || (v[2] == 1 && gb->info->has_subgroups)) && sg_ok &&
                (v[4] == 1 || v[4] == 2 || v[4] == 4))
                gb->tune[i] = (gemv_tune){v[0], v[1], v[2], v[3], v[4]};
        }
        found = 1;
    }
    fclose(f);
    return found;
}

static void save_tune(const gpu_backend *gb) {
    char dir[512], path[600], key[200];
    if (!cache_path(dir, sizeof dir)) return;
    char parent[512];
    snprintf(parent, sizeof parent, "%s", dir);
    char *slash = strrchr(parent, '/');
    if (slash) *slash = 0, mkdir(parent, 0755);
    mkdir(dir, 0755);
    snprintf(path, sizeof path, "%s/gpu-tune.txt", dir);
    adapter_key(gb, key, sizeof key);
    FILE *f = fopen(path, "a");
    if (!f) return;
    fprintf(f, "%s", key);
    for (int i = 0; i < 4; i++)
        fprintf(f, " %u %u %u %u %u", gb->tune[i].threads, gb->tune[i].rows,
                gb->tune[i].subgroups, gb->tune[i].sg_rows, gb->tune[i].unroll);
    fprintf(f, "\n");
    fclose(f);
}

/* Median seconds per GEMV of (threads, rows) over a 4096 x 4096 weight w. */
static double time_gemv(gpu_backend *gb, pl_buf *w, pl_buf *x, pl_buf *y, gemv_tune cand) {
    gemv_tune saved = gb->tune[((gbuf *)w)->wt];
    gb->tune[((gbuf *)w)->wt] = cand;
    double best[5];
    for (int rep = 0; rep < 5; rep++) {
        float dummy;
        double t0 = pl_gpu_now();
        for (int i = 0; i < 20; i++) gb->be.m->matmul(&gb->be, w, x, NULL, 1, false, y);
        if (gb->be.m->read(&gb->be, y, 0, &dummy, 4) != PL_OK) return 1e9;
        best[rep] = (pl_gpu_now() - t0) / 20;
    }
    gb->tune[((gbuf *)w)->wt] = saved;
    /* the median of 5 */
    for (int i = 0; i < 5; i++)
        for (int j = i + 1; j < 5; j++)
            if (best[j] < best[i]) {
                double tmp = best[i];
                best[i] = best[j], best[j] = tmp;
            }
    return best[2];
}

pl_status pl_gpu_autotune(gpu_backend *gb) {
    const char *env = getenv("POOLED_GPU_TUNE");
    int verbose = env && !strcmp(env, "verbose");
    if ((env && !strcmp(env, "0")) || (!verbose && load_tune(gb))) return PL_OK;
    /* (threads, rows, subgroup reduce, subgroup rows); subgroup rows need a fixed size */
    uint32_t S = gb->info->has_subgroups && gb->info->subgroup_min == gb->info->subgroup_max
                     ? gb->info->subgroup_min : 0;
    uint32_t sgr = gb->info->has_subgroups ? 1 : 0;
    const gemv_tune cand[] = {
        {64, 4, 0, 0, 1}, {128, 4, 0, 0, 1}, {64, 8, 0, 0, 1}, {32, 8, 0, 0, 1},
        {64, 4, 0, 0, 2}, {64, 2, 0, 0, 2}, {128, 4, 0, 0, 2}, {64, 2, 0, 0, 4},
        {128, 2, 0, 0, 4}, {64, 4, sgr, 0, 2},
        /* subgroup rows from here on */
        {128, 2, 0, S, 2}, {128, 4, 0, S, 2}, {256, 2, 0, S, 2}, {128, 1, 0, S, 4}};
    const size_t first_sg = 10;
    static const uint32_t types[2] = {PL_TYPE_Q4_0, PL_TYPE_Q8_0};
    /* a small and a big projection: latency and bandwidth both count */
    static const uint32_t shapes[2][2] = {{2048, 2048}, {8192, 4096}};
    st_ctx c;
    memset(&c, 0, sizeof c);
    c.gb = gb;
    c.rng = 12345;
    float *xv = malloc(4096 * sizeof *xv);
    if (!xv) return pl_fail(PL_ERR_NOMEM, "out of memory");
    fill(&c, xv, 4096, -1, 1);
    pl_status st = PL_OK;
    for (int t = 0; st == PL_OK && t < 2; t++) {
        double score[sizeof cand / sizeof cand[0]];
        memset(score, 0, sizeof score);
        pl_gpu_wtype wt = PL_GW_Q4_0;
        for (int s = 0; st == PL_OK && s < 2; s++) {
            uint32_t rows = shapes[s][0], cols = shapes[s][1];
            unsigned char *w = ggml_rows(&c, types[t], cols, rows);
            pl_buf *W = w ? weight(&c, types[t], cols, rows, w) : NULL;
            pl_buf *x = act(&c, PL_TYPE_F32, cols, 1, xv), *y = act(&c, PL_TYPE_F32, rows, 1, NULL);
            free(w);
            if (!W || !x || !y) {
                st = PL_ERR;
                break;
            }
            wt = ((gbuf *)W)->wt;
            double base = time_gemv(gb, W, x, y, gb->tune[wt]);
            double bytes = (double)rows * cols * (t == 0 ? 18 : 34) / 32;
            for (size_t i = 0; i < sizeof cand / sizeof cand[0]; i++) {
                if (i >= first_sg && !S) { /* subgroup rows need a fixed subgroup size */
                    score[i] = 1e9;
                    continue;
                }
                double secs = time_gemv(gb, W, x, y, cand[i]);
                score[i] += secs / base;
                if (verbose)
                    fprintf(stderr, "tune %s %ux%u %ux%u u%u%s%s: %.2f us, %.0f GB/s\n",
                            t == 0 ? "q4_0" : "q8_0", rows, cols, cand[i].threads, cand[i].rows,
                            cand[i].unroll, cand[i].subgroups ? " sg-reduce" : "",
                            cand[i].sg_rows ? " sg-rows" : "", secs * 1e6, bytes / secs / 1e9);
            }
            while (c.n_bufs) gb->be.m->buf_free(&gb->be, c.bufs[--c.n_bufs]);
        }
        /* the built-in choice scores 2 (1 per shape): a candidate must beat it by 5% */
        size_t best = 0;
        for (size_t i = 1; i < sizeof cand / sizeof cand[0]; i++)
            if (score[i] < score[best]) best = i;
        if (st == PL_OK && score[best] < 0.95 * 2) gb->tune[wt] = cand[best];
    }
    /* F32 and F16 weights (small models) follow the Q8_0 choice */
    gb->tune[PL_GW_F32] = gb->tune[PL_GW_F16] = gb->tune[PL_GW_Q8_0];
    while (c.n_bufs) gb->be.m->buf_free(&gb->be, c.bufs[--c.n_bufs]);
    free(xv);
    if (st == PL_OK) save_tune(gb);
    return st == PL_OK ? PL_OK : pl_fail(PL_ERR, "GPU autotune failed: %s", pl_last_error());
}
