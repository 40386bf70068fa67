/* gpu_fuse.c - merges neighbouring ops of the recorded queue into fused kernels, where the
 * model asked for them (pl_be_fuse: a group of ops and the PL_FUSE_* kinds it wants).
 *
 * Each pattern is tried only inside one group asking for its kind. A try ends one of three
 * ways: FUSED; BLOCKED, the ops are there but this device or these weights cannot take the
 * fused kernel (formats differ, too many bindings) - they run unfused, as they must; or NONE,
 * the ops of the pattern are not where the pattern says. A group whose requested kind saw
 * no FUSED or BLOCKED try counts as missed (pl_gpu_backend_fusions_missed): the model's op
 * order and its request disagree, so a reordering cannot lose a fusion silently.
 *
 * Patterns (what the dense models issue per layer), each checked for the exact buffers and
 * shapes it needs and skipped otherwise:
 *   RMSNorm(x -> xb) + MatMul(W, xb)...      every following projection of xb reads x and
 *                                            normalises it itself; the first also stores xb
 *   MatMul(Wg, x -> g) + MatMul(Wu, x -> u) + SwiGLU(g, u -> o)
 *                                            one gate/up GEMV writing o (and g, u unless o
 *                                            is one of them); the same with MatMulID
 *                                            (the experts', same ids) for MoE
 *   TopKRows(x -> ids, vals) + SoftmaxRows(vals in place)
 *                                            the top-k kernel normalises the k values
 *   TopKRows(...) [+ its softmax] + MatMul(w, xn) of a 1-row F32 w
 *                                            the rank top-k kernel also computes w . xn
 *   MoECombine(y, wts -> x) + SigmoidMul(ysh, g -> x), both accumulating
 *                                            the combine adds the gated shared expert
 *   RMSNorm(q in place, per head) ... RoPE(q)  the RoPE kernel normalises each head first
 *   RoPE(k) + KVStore(k) + KVStore(v)        the RoPE kernel also writes both caches
 *   RoPE(q) + RoPE(k)                        one dispatch rotates both
 *   RMSNorm(o in place) + SwiGLU(z, o)       the norm's kernel gates too (g = silu(z) * o)
 *   MatMul(Wq, x) + MatMul(Wk, x) + MatMul(Wv, x) [+ MatMul(Wu, x)]
 *                                            one sweep over a copy of the three (four)
 *                                            weights (made on the GPU at first use), one
 *                                            output each; the fourth joins where it can
 * A fused kernel writes every buffer the ops it replaces would have written. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_internal.h"
#include "repack.h"

typedef enum { NONE, BLOCKED, FUSED } fuse_result;

/* Ops i and j may fuse under `kind`: both in the same group, which asks for it. */
static bool asked(const op *a, const op *b, unsigned kind) {
    return (a->fmask & kind) && a->group == b->group && b->fmask == a->fmask;
}

/* The first op after i that is not dead, or NULL. */
static op *next_live(gpu_backend *gb, int i) {
    int j = i + 1;
    while (j < gb->n_ops && gb->ops[j].dead) j++;
    return j < gb->n_ops ? &gb->ops[j] : NULL;
}

/* Does op o read or write buffer b? */
/* x and b are one buffer, or share bytes (views: rows of one parent). */
static bool same(const gbuf *x, const gbuf *b) {
    if (x == b) return true;
    if (!x || !b || !x->buf || x->buf != b->buf) return false;
    uint64_t xe = x->h.view ? x->off + x->bytes : UINT64_MAX;
    uint64_t be = b->h.view ? b->off + b->bytes : UINT64_MAX;
    return x->off < be && b->off < xe;
}

static bool touches(const op *o, const gbuf *b) {
    return same(o->a, b) || same(o->b, b) || same(o->c, b) || same(o->d, b) || same(o->e, b) ||
           same(o->out, b) || same(o->vals, b) || same(o->out2, b) || same(o->out3, b) ||
           same(o->seq, b) || (o->kind == OP_ROPE && (const gbuf *)o->rope.factors == b);
}

/* Storage bindings of a GEMV with these weights and fusions (args excluded). */
static int gemv_storage(const gbuf *w, int mats, int extra) {
    int per = w->s[0] ? 2 : 1;
    return 2 + mats * (int)w->parts * per + extra;
}

/* RMSNorm(x -> xb) followed by projections of xb. */
static fuse_result fuse_norm_matmul(gpu_backend *gb, int i) {
    op *nrm = &gb->ops[i];
    if (nrm->a == nrm->out) return NONE; /* in place: a GEMV cannot both read and store x */
    bool first = true;
    fuse_result r = NONE;
    for (int j = i + 1; j < gb->n_ops; j++) {
        op *m = &gb->ops[j];
        if (m->dead) continue;
        if (m->kind != OP_MATMUL || !asked(nrm, m, PL_FUSE_NORM_MATMUL) || m->b != nrm->out ||
            m->n != nrm->rows || m->a->h.ne0 != nrm->cols || m->out == nrm->a ||
            m->out == nrm->out || m->out == nrm->b || m->fnorm.x)
            break;
        if (gemv_storage(m->a, 1, 2 + (m->c != NULL)) > (int)gb->info->max_storage_buffers) {
            if (first) r = BLOCKED;
            break;
        }
        m->fnorm.x = nrm->a;
        m->fnorm.w = nrm->b;
        m->fnorm.eps = nrm->eps;
        if (first) m->fnorm.out = nrm->out, nrm->dead = true;
        first = false;
        r = FUSED;
    }
    return r;
}

/* The outputs of a fused gate/up GEMV: swiglu's into g->out, the gate's and the up
 * matrix's own products as side outputs unless the SwiGLU overwrites them. */
static void set_gate_up(op *g, op *u, op *s) {
    g->fgate.w_up = u->a;
    g->fgate.gate_out = s->out == g->out ? NULL : g->out;
    g->fgate.up_out = s->out == u->out ? NULL : u->out;
    g->out = s->out;
    u->dead = s->dead = true;
}

/* MatMulID gate + MatMulID up (same x, same expert ids) + SwiGLU over all their slots. */
static fuse_result fuse_gate_up_id(gpu_backend *gb, op *g, op *u, op *s) {
    if (u->kind != OP_MATMUL_ID || s->kind != OP_SWIGLU || !asked(g, u, PL_FUSE_GATE_UP) ||
        !asked(g, s, PL_FUSE_GATE_UP) || g->b != u->b || g->c != u->c || g->n != u->n ||
        g->count != u->count || g->k != u->k || g->acc != u->acc || s->a != g->out ||
        s->b != u->out || g->out == u->out)
        return NONE;
    const gbuf *wg = g->a, *wu = u->a;
    if (wg->wt != wu->wt || wg->h.type != wu->h.type || wg->h.ne0 != wu->h.ne0 ||
        wg->h.ne1 != wu->h.ne1 || wg->parts != wu->parts ||
        wg->rows_per_part != wu->rows_per_part || s->count != g->n * g->count * (wg->h.ne1 / g->k))
        return BLOCKED; /* weights the one kernel cannot sweep together */
    if (s->out == g->b || s->out == g->c || g->out == g->b || u->out == g->b || g->out == g->c ||
        u->out == g->c)
        return BLOCKED;
    int extra = 1 + (s->out != g->out) + (s->out != u->out); /* ids, side outputs */
    if (gemv_storage(wg, 2, extra) > (int)gb->info->max_storage_buffers) return BLOCKED;
    set_gate_up(g, u, s);
    return FUSED;
}

/* MatMul gate + MatMul up (same x) + SwiGLU. */
static fuse_result fuse_gate_up(gpu_backend *gb, int i) {
    op *g = &gb->ops[i];
    int j = i + 1, k;
    while (j < gb->n_ops && gb->ops[j].dead) j++;
    k = j + 1;
    while (k < gb->n_ops && gb->ops[k].dead) k++;
    if (k >= gb->n_ops) return NONE;
    op *u = &gb->ops[j], *s = &gb->ops[k];
    if (g->kind == OP_MATMUL_ID) return fuse_gate_up_id(gb, g, u, s);
    if (u->kind != OP_MATMUL || s->kind != OP_SWIGLU || !asked(g, u, PL_FUSE_GATE_UP) ||
        !asked(g, s, PL_FUSE_GATE_UP) || g->acc || u->acc || g->b != u->b || g->n != u->n ||
        g->fnorm.x != u->fnorm.x || g->fnorm.w != u->fnorm.w || u->fnorm.out || s->a != g->out ||
        s->b != u->out || g->out == u->out)
        return NONE;
    if (g->c || u->c || g->a->wt != u->a->wt || g->a->h.type != u->a->h.type ||
        g->a->h.ne0 != u->a->h.ne0 || g->a->h.ne1 != u->a->h.ne1 || g->a->parts != u->a->parts ||
        s->count != g->n * g->a->h.ne1)
        return BLOCKED; /* biases, or weights the one kernel cannot sweep together */
    const gbuf *x = g->fnorm.x ? g->fnorm.x : g->b;
    if (s->out == x || g->out == x || u->out == x) return BLOCKED;
    int extra =
        (g->fnorm.x ? 1 : 0) + (g->fnorm.out ? 1 : 0) + (s->out != g->out) + (s->out != u->out);
    if (gemv_storage(g->a, 2, extra) > (int)gb->info->max_storage_buffers) return BLOCKED;
    set_gate_up(g, u, s);
    return FUSED;
}

/* RMSNorm in place on heads, then (after ops not touching it) RoPE of the same rows. */
static fuse_result fuse_norm_rope(gpu_backend *gb, int i) {
    op *nrm = &gb->ops[i];
    if (nrm->a != nrm->out) return NONE;
    for (int j = i + 1; j < gb->n_ops; j++) {
        op *r = &gb->ops[j];
        if (r->dead) continue;
        if (!asked(nrm, r, PL_FUSE_NORM_ROPE)) return NONE;
        if (r->kind == OP_ROPE && r->out == nrm->out) {
            if (r->rope.head_dim != nrm->cols || r->n * r->rope.n_heads != nrm->rows || r->frope.nw)
                return NONE;
            r->frope.nw = nrm->b;
            r->frope.eps = nrm->eps;
            nrm->dead = true;
            return FUSED;
        }
        if (touches(r, nrm->out) || touches(r, nrm->b)) return NONE;
    }
    return NONE;
}

/* RoPE(k) followed at once by KVStore(k) and KVStore(v) of the same rows. */
static fuse_result fuse_rope_store(gpu_backend *gb, int i) {
    op *r = &gb->ops[i];
    int j = i + 1, k;
    while (j < gb->n_ops && gb->ops[j].dead) j++;
    if (j >= gb->n_ops) return NONE;
    op *sk = &gb->ops[j];
    int64_t row = (int64_t)r->rope.n_heads * r->rope.head_dim;
    if (sk->kind != OP_STORE || !asked(r, sk, PL_FUSE_ROPE_STORE) || sk->a != r->out ||
        sk->n != r->n || sk->pos0 != r->pos0 || sk->seq != r->seq || sk->out->h.ne0 != row)
        return NONE;
    if (sk->out->h.type == PL_TYPE_F16 && r->rope.head_dim % 2) return BLOCKED;
    if (sk->out->h.type == PL_TYPE_Q8_0) return BLOCKED; /* quantised by its own kernel */
    r->frope.kc = sk->out;
    r->ctx = sk->ctx; /* (columns: the cache's slot rows) */
    sk->dead = true;
    k = j + 1;
    while (k < gb->n_ops && gb->ops[k].dead) k++;
    if (k >= gb->n_ops) return FUSED;
    op *sv = &gb->ops[k];
    if (sv->kind != OP_STORE || !asked(r, sv, PL_FUSE_ROPE_STORE) || sv->n != r->n ||
        sv->pos0 != r->pos0 || sv->seq != r->seq || sv->ctx != sk->ctx || sv->out == sk->out ||
        sv->a == r->out || sv->out->h.type != sk->out->h.type || sv->out->h.ne0 % r->rope.n_heads ||
        sv->a->h.ne0 != sv->out->h.ne0 ||
        (sv->out->h.type == PL_TYPE_F16 && (sv->out->h.ne0 / r->rope.n_heads) % 2))
        return FUSED;
    r->frope.v = sv->a;
    r->frope.vc = sv->out;
    sv->dead = true;
    return FUSED;
}

/* RoPE(q) followed at once by RoPE(k) of the same rows and geometry. */
static fuse_result fuse_rope_pair(gpu_backend *gb, int i) {
    op *q = &gb->ops[i], *k = next_live(gb, i);
    if (!k || q->frope.kc || q->pair) return NONE;
    const pl_rope_params *a = &q->rope, *b = &k->rope;
    if (k->kind != OP_ROPE || !asked(q, k, PL_FUSE_ROPE_PAIR) || k->pair || k->out == q->out ||
        k->n != q->n || k->pos0 != q->pos0 || k->seq != q->seq || k->k != q->k)
        return NONE;
    if (a->mode != b->mode || a->head_dim != b->head_dim || a->rope_dim != b->rope_dim ||
        a->theta_base != b->theta_base || a->freq_scale != b->freq_scale ||
        a->factors != b->factors || (q->frope.nw && k->frope.nw && q->frope.eps != k->frope.eps))
        return BLOCKED;
    q->pair = k;
    k->dead = true;
    return FUSED;
}

/* RMSNorm(o in place, per head) then at once SwiGLU(z, o -> g) over the same values: the
 * norm's kernel also writes g (the gated RMSNorm of a DeltaNet output). */
static fuse_result fuse_norm_gate(gpu_backend *gb, int i) {
    op *nrm = &gb->ops[i], *s = next_live(gb, i);
    if (nrm->a != nrm->out || nrm->c || !s) return NONE;
    if (s->kind != OP_SWIGLU || !asked(nrm, s, PL_FUSE_NORM_GATE) || s->b != nrm->out ||
        s->count != nrm->rows * nrm->cols)
        return NONE;
    if (s->a == nrm->out || s->a == nrm->b || s->out == nrm->out || s->out == nrm->b ||
        (s->out != s->a && touches(nrm, s->out)))
        return BLOCKED; /* the one kernel reads z and w while it writes o and g */
    nrm->c = s->a;
    nrm->out2 = s->out;
    s->dead = true;
    return FUSED;
}

void pl_gpu_drop_merged(gpu_backend *gb, gbuf *b) {
    gbuf *owner = b->merged ? b : b->merged_owner;
    if (!owner || !owner->merged) return;
    gbuf *m = owner->merged;
    pl_gpu_retire(gb, m->q[0]);
    pl_gpu_retire(gb, m->s[0]);
    free(m);
    owner->merged = NULL;
    if (owner->merge_k) ((gbuf *)owner->merge_k)->merged_owner = NULL;
    if (owner->merge_v) ((gbuf *)owner->merge_v)->merged_owner = NULL;
    if (owner->merge_u) ((gbuf *)owner->merge_u)->merged_owner = NULL;
    owner->merge_k = owner->merge_v = owner->merge_u = NULL;
}

/* The q, k, v (and u, unless NULL) weights as one (rows of q, then k, v, u), copied on the
 * GPU in the command buffer being recorded; NULL if it cannot be made. */
static const gbuf *merged_qkv(gpu_backend *gb, gbuf *q, gbuf *k, gbuf *v, gbuf *u) {
    if (q->merged && q->merge_k == k && q->merge_v == v && q->merge_u == u) return q->merged;
    pl_gpu_drop_merged(gb, q);
    if (u) pl_gpu_drop_merged(gb, u); /* (it may head or join another copy) */
    gbuf *m = calloc(1, sizeof *m);
    if (!m) return NULL;
    uint32_t cols = (uint32_t)q->h.ne0,
             rows = (uint32_t)(q->h.ne1 + k->h.ne1 + v->h.ne1 + (u ? u->h.ne1 : 0));
    m->h = q->h;
    m->h.ne1 = rows;
    m->wt = q->wt, m->parts = 1, m->rows_per_part = rows;
    uint64_t qb = pl_gpu_quant_bytes(m->wt, cols, rows), sb = pl_gpu_scale_bytes(m->wt, cols, rows);
    if (pl_gpu_buf_new(gb->g, (qb + 15) & ~15ull, PL_GPU_STORAGE, "q/k/v weights", &m->q[0]) ||
        (sb &&
         pl_gpu_buf_new(gb->g, (sb + 15) & ~15ull, PL_GPU_STORAGE, "q/k/v scales", &m->s[0]))) {
        pl_gpu_buf_free(m->q[0]);
        free(m);
        pl_clear_error();
        return NULL;
    }
    pl_gpu_begin(gb->g);
    uint64_t qo = 0, so = 0;
    const gbuf *src[4] = {q, k, v, u};
    for (int i = 0; i < (u ? 4 : 3); i++) {
        uint64_t n = (uint64_t)src[i]->h.ne1;
        uint64_t a = pl_gpu_quant_bytes(m->wt, cols, n), b = pl_gpu_scale_bytes(m->wt, cols, n);
        pl_gpu_copy(gb->g, src[i]->q[0], 0, m->q[0], qo, a);
        if (b) pl_gpu_copy(gb->g, src[i]->s[0], 0, m->s[0], so, b);
        qo += a, so += b;
    }
    m->buf = m->q[0];
    m->bytes = pl_gpu_buf_size(m->q[0]);
    q->merged = m, q->merge_k = k, q->merge_v = v, q->merge_u = u;
    k->merged_owner = v->merged_owner = q;
    if (u) u->merged_owner = q;
    return m;
}

/* Can projection o sweep with m0's merged weight, whose workgroups cover rw rows? (Copies
 * move whole words.) */
static bool qkv_fits(const op *o, const op *m0, uint32_t rw) {
    const gbuf *w = o->a, *w0 = m0->a;
    return !(o->acc || o->c || o->fgate.w_up || o->fqkv.w || o->b != m0->b || o->n != m0->n ||
             o->fnorm.x != m0->fnorm.x || o->fnorm.w != m0->fnorm.w || (o != m0 && o->fnorm.out) ||
             w->wt != w0->wt || w->h.type != w0->h.type || w->h.ne0 != w0->h.ne0 || w->parts != 1 ||
             w->h.ne1 % rw ||
             pl_gpu_quant_bytes(w->wt, (uint32_t)w->h.ne0, (uint64_t)w->h.ne1) % 4 ||
             pl_gpu_scale_bytes(w->wt, (uint32_t)w->h.ne0, (uint64_t)w->h.ne1) % 4);
}

/* Three projections of the same x next to each other (q, k, v), and a fourth right after
 * them when it can join (a gated attention's gate; DeltaNet's z, beta, alpha). */
static fuse_result fuse_qkv(gpu_backend *gb, int i) {
    op *m[4] = {NULL, NULL, NULL, NULL};
    int at = i;
    for (int j = 0; j < 4; j++) {
        while (at < gb->n_ops && gb->ops[at].dead) at++;
        if (at >= gb->n_ops) {
            if (j < 3) return NONE;
            break;
        }
        m[j] = &gb->ops[at++];
    }
    for (int j = 0; j < 3; j++)
        if (m[j]->kind != OP_MATMUL || !asked(m[0], m[j], PL_FUSE_QKV) || m[j]->b != m[0]->b ||
            m[j]->n != m[0]->n || m[j]->fnorm.x != m[0]->fnorm.x)
            return NONE;
    const gbuf *w0 = m[0]->a;
    const gemv_tune *tu =
        &gb->tune[pl_gpu_tune_class(gb, w0)]; /* the merged weight may tune to another */
    uint32_t rw = tu->sg_rows ? tu->threads / tu->sg_rows * tu->rows : tu->rows;
    const gbuf *x = m[0]->fnorm.x ? m[0]->fnorm.x : m[0]->b;
    for (int j = 0; j < 3; j++) {
        const op *o = m[j];
        if (!qkv_fits(o, m[0], rw)) return BLOCKED;
        if (o->out == x || (j >= 1 && o->out == m[0]->out) || (j == 2 && o->out == m[1]->out))
            return BLOCKED;
    }
    /* the fourth joins only where everything fits; else it runs alone, as before */
    op *u = m[3];
    int extra = 2 + (m[0]->fnorm.x != NULL) + (m[0]->fnorm.out != NULL); /* y1, y2, norm */
    if (u && (u->kind != OP_MATMUL || !asked(m[0], u, PL_FUSE_QKV) || !qkv_fits(u, m[0], rw) ||
              u->out == x || u->out == m[0]->out || u->out == m[1]->out || u->out == m[2]->out ||
              gemv_storage(w0, 1, extra + 1) > (int)gb->info->max_storage_buffers))
        u = NULL;
    uint64_t split0 = (uint64_t)w0->h.ne1, split1 = split0 + (uint64_t)m[1]->a->h.ne1;
    uint64_t split2 = split1 + (uint64_t)m[2]->a->h.ne1;
    if (split2 + (u ? (uint64_t)u->a->h.ne1 : 0) > UINT32_MAX) return BLOCKED;
    const gbuf *w =
        merged_qkv(gb, (gbuf *)m[0]->a, (gbuf *)m[1]->a, (gbuf *)m[2]->a, u ? (gbuf *)u->a : NULL);
    if (!w) return BLOCKED;
    m[0]->fqkv.w = w;
    m[0]->fqkv.y1 = m[1]->out;
    m[0]->fqkv.y2 = m[2]->out;
    m[0]->fqkv.y3 = u ? u->out : NULL;
    m[0]->fqkv.split[0] = (uint32_t)split0;
    m[0]->fqkv.split[1] = (uint32_t)split1;
    m[0]->fqkv.split[2] = u ? (uint32_t)split2 : 0;
    m[1]->dead = m[2]->dead = true;
    if (u) u->dead = true;
    return FUSED;
}

/* TopKRows(x -> ids, vals) + SoftmaxRows(vals in place) over its k values. */
static fuse_result fuse_router(gpu_backend *gb, int i) {
    op *t = &gb->ops[i], *s = next_live(gb, i);
    if (!s) return NONE;
    if (s->kind != OP_SOFTMAX || !asked(t, s, PL_FUSE_ROUTER) || !t->vals || s->a != t->vals ||
        s->rows != t->rows || s->cols != t->k)
        return NONE;
    if (s->out != t->vals) return BLOCKED; /* the kernel replaces the values it picked */
    t->fsoftmax = true;
    s->dead = true;
    return FUSED;
}

/* TopKRows(x -> ids, vals) (with its softmax fused, or none) then MatMul(w, xn -> g) of a
 * 1-row F32 weight (the MoE shared expert's gate): the rank top-k kernel computes g too,
 * so no 1-row GEMV runs. */
static fuse_result fuse_shared_gate(gpu_backend *gb, int i) {
    op *t = &gb->ops[i], *m = next_live(gb, i);
    if (!m) return NONE;
    const gbuf *w = m->a;
    if (m->kind != OP_MATMUL || !asked(t, m, PL_FUSE_SHARED_GATE) || w->h.ne1 != 1 ||
        m->n != t->rows)
        return NONE;
    if (!gb->moe_shgate || !pl_gpu_topk_by_rank(gb, t) || w->wt != PL_GW_F32 || w->parts != 1 ||
        m->acc || m->c || m->fnorm.x || m->fgate.w_up || m->fqkv.w || touches(t, m->out) ||
        m->b == t->out || m->b == t->vals)
        return BLOCKED;
    t->fshgate.w = w;
    t->fshgate.x = m->b;
    t->fshgate.out = m->out;
    m->dead = true;
    return FUSED;
}

/* MoECombine(y, wts -> x, acc) + SigmoidMul(ysh, g -> x, acc, one g per row): the combine
 * kernel adds the gated shared expert too. */
static fuse_result fuse_combine_shared(gpu_backend *gb, int i) {
    op *c = &gb->ops[i], *s = next_live(gb, i);
    if (!s) return NONE;
    if (s->kind != OP_SIGMOID_MUL || !asked(c, s, PL_FUSE_COMBINE_SHARED) || !c->acc || !s->acc ||
        s->out != c->out || s->rows != c->n || s->cols != c->a->h.ne0 || s->k != 1 ||
        s->a == c->out || s->b == c->out)
        return NONE;
    if (!gb->moe_comb) return BLOCKED;
    c->fcomb.y = s->a;
    c->fcomb.g = s->b;
    s->dead = true;
    return FUSED;
}

static const char *const kind_names[] = {"norm_matmul", "qkv",           "norm_rope", "rope_store",
                                         "rope_pair",   "gate_up",       "router",    "norm_gate",
                                         "shared_gate", "combine_shared"};

/* What the tries found for each group of this queue, indexed by group - first group. */
typedef struct {
    unsigned asked, found; /* kinds requested; kinds that saw a FUSED or BLOCKED try */
    int first_op;
} group_seen;

static void note(group_seen *g, const op *o, uint32_t g0, unsigned kind, fuse_result r) {
    if (g && o->fmask && r != NONE) g[o->group - g0].found |= kind;
}

void pl_gpu_fuse(gpu_backend *gb) {
    if (gb->o.no_fuse || gb->n_ops == 0) return;
    /* groups are numbered in issue order, so this queue's span [g0, g1] */
    uint32_t g0 = UINT32_MAX, g1 = 0;
    for (int i = 0; i < gb->n_ops; i++)
        if (gb->ops[i].fmask) {
            if (gb->ops[i].group < g0) g0 = gb->ops[i].group;
            if (gb->ops[i].group > g1) g1 = gb->ops[i].group;
        }
    group_seen *gs = g0 <= g1 ? calloc((size_t)(g1 - g0) + 1, sizeof *gs) : NULL;
    if (gs)
        for (int i = gb->n_ops - 1; i >= 0; i--) {
            const op *o = &gb->ops[i];
            if (o->fmask) gs[o->group - g0].asked = o->fmask, gs[o->group - g0].first_op = i;
        }
    for (int i = 0; i < gb->n_ops; i++) {
        op *o = &gb->ops[i];
        if (o->dead || !o->fmask) continue;
        if (o->kind == OP_NORM) {
            note(gs, o, g0, PL_FUSE_NORM_MATMUL, fuse_norm_matmul(gb, i));
            if (!o->dead) note(gs, o, g0, PL_FUSE_NORM_ROPE, fuse_norm_rope(gb, i));
            if (!o->dead && (o->fmask & PL_FUSE_NORM_GATE))
                note(gs, o, g0, PL_FUSE_NORM_GATE, fuse_norm_gate(gb, i));
        }
    }
    for (int i = 0; i < gb->n_ops; i++) {
        op *o = &gb->ops[i];
        if (o->dead || !o->fmask) continue;
        if (o->kind == OP_MATMUL || o->kind == OP_MATMUL_ID)
            note(gs, o, g0, PL_FUSE_GATE_UP, fuse_gate_up(gb, i));
        if (!o->dead && o->kind == OP_MATMUL && !o->fgate.w_up)
            note(gs, o, g0, PL_FUSE_QKV, fuse_qkv(gb, i));
        else if (o->kind == OP_ROPE)
            note(gs, o, g0, PL_FUSE_ROPE_STORE, fuse_rope_store(gb, i));
        else if (o->kind == OP_TOPK_ROWS) {
            note(gs, o, g0, PL_FUSE_ROUTER, fuse_router(gb, i));
            note(gs, o, g0, PL_FUSE_SHARED_GATE, fuse_shared_gate(gb, i));
        } else if (o->kind == OP_MOE_COMBINE)
            note(gs, o, g0, PL_FUSE_COMBINE_SHARED, fuse_combine_shared(gb, i));
    }
    for (int i = 0; i < gb->n_ops; i++) {
        op *o = &gb->ops[i];
        if (!o->dead && o->fmask && o->kind == OP_ROPE)
            note(gs, o, g0, PL_FUSE_ROPE_PAIR, fuse_rope_pair(gb, i));
    }
    for (uint32_t g = 0; gs && g <= g1 - g0; g++) {
        unsigned missed = gs[g].asked & ~gs[g].found;
        if (!missed) continue;
        {
            int k = 0;
            while (!(missed & (1u << k))) k++;
            snprintf(gb->last_missed, sizeof gb->last_missed,
                     "%s, asked for by the group starting at op %d of a queue of %d", kind_names[k],
                     gs[g].first_op, gb->n_ops);
        }
        gb->fusions_missed += (uint64_t)__builtin_popcount(missed);
    }
    free(gs);
}
