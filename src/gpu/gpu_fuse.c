/* gpu_fuse.c - merges neighbouring ops of the recorded queue into fused kernels.
 *
 * Patterns (what the dense models issue per layer), each checked for the exact buffers and
 * shapes it needs and skipped otherwise:
 *   RMSNorm(x -> xb) + MatMul(W, xb)...      every following projection of xb reads x and
 *                                            normalises it itself; the first also stores xb
 *   MatMul(Wg, x -> g) + MatMul(Wu, x -> u) + SwiGLU(g, u -> o)
 *                                            one gate/up GEMV writing o (and g, u unless o
 *                                            is one of them)
 *   RMSNorm(q in place, per head) ... RoPE(q)  the RoPE kernel normalises each head first
 *   RoPE(k) + KVStore(k) + KVStore(v)        the RoPE kernel also writes both caches
 *   RoPE(q) + RoPE(k)                        one dispatch rotates both
 * A fused kernel writes every buffer the ops it replaces would have written. */
#include "gpu_internal.h"

/* Does op o read or write buffer b? */
static bool touches(const op *o, const gbuf *b) {
    return o->a == b || o->b == b || o->c == b || o->out == b || o->vals == b ||
           (o->kind == OP_ROPE && (const gbuf *)o->rope.factors == b);
}

/* Storage bindings of a GEMV with these weights and fusions (args excluded). */
static int gemv_storage(const gbuf *w, int mats, int extra) {
    int per = w->s[0] ? 2 : 1;
    return 2 + mats * (int)w->parts * per + extra;
}

/* RMSNorm(x -> xb) followed by projections of xb. */
static void fuse_norm_matmul(gpu_backend *gb, int i) {
    op *nrm = &gb->ops[i];
    if (nrm->a == nrm->out) return; /* in place: a GEMV cannot both read and store x */
    bool first = true;
    for (int j = i + 1; j < gb->n_ops; j++) {
        op *m = &gb->ops[j];
        if (m->dead) continue;
        if (m->kind != OP_MATMUL || m->b != nrm->out || m->n != nrm->rows ||
            m->a->h.ne0 != nrm->cols || m->out == nrm->a || m->out == nrm->out ||
            m->out == nrm->b || m->fnorm.x)
            break;
        if (gemv_storage(m->a, 1, 2 + (m->c != NULL)) > (int)gb->info->max_storage_buffers)
            break;
        m->fnorm.x = nrm->a;
        m->fnorm.w = nrm->b;
        m->fnorm.eps = nrm->eps;
        if (first) m->fnorm.out = nrm->out, nrm->dead = true;
        first = false;
    }
}

/* MatMul gate + MatMul up (same x) + SwiGLU. */
static void fuse_gate_up(gpu_backend *gb, int i) {
    op *g = &gb->ops[i];
    int j = i + 1, k;
    while (j < gb->n_ops && gb->ops[j].dead) j++;
    k = j + 1;
    while (k < gb->n_ops && gb->ops[k].dead) k++;
    if (k >= gb->n_ops) return;
    op *u = &gb->ops[j], *s = &gb->ops[k];
    if (u->kind != OP_MATMUL || s->kind != OP_SWIGLU || g->acc || u->acc || g->c || u->c ||
        g->b != u->b || g->n != u->n || g->fnorm.x != u->fnorm.x || g->fnorm.w != u->fnorm.w ||
        u->fnorm.out || g->a->wt != u->a->wt || g->a->h.ne0 != u->a->h.ne0 ||
        g->a->h.ne1 != u->a->h.ne1 || g->a->parts != u->a->parts || s->a != g->out ||
        s->b != u->out || s->count != g->n * g->a->h.ne1 || g->out == u->out)
        return;
    const gbuf *x = g->fnorm.x ? g->fnorm.x : g->b;
    if (s->out == x || g->out == x || u->out == x) return;
    gbuf *gate_out = s->out == g->out ? NULL : g->out, *up_out = s->out == u->out ? NULL : u->out;
    int extra = (g->fnorm.x ? 1 : 0) + (g->fnorm.out ? 1 : 0) + (gate_out != NULL) + (up_out != NULL);
    if (gemv_storage(g->a, 2, extra) > (int)gb->info->max_storage_buffers) return;
    g->fgate.w_up = u->a;
    g->fgate.gate_out = gate_out;
    g->fgate.up_out = up_out;
    g->out = s->out;
    u->dead = s->dead = true;
}

/* RMSNorm in place on heads, then (after ops not touching it) RoPE of the same rows. */
static void fuse_norm_rope(gpu_backend *gb, int i) {
    op *nrm = &gb->ops[i];
    if (nrm->a != nrm->out) return;
    for (int j = i + 1; j < gb->n_ops; j++) {
        op *r = &gb->ops[j];
        if (r->dead) continue;
        if (r->kind == OP_ROPE && r->out == nrm->out) {
            if (r->rope.head_dim != nrm->cols || r->n * r->rope.n_heads != nrm->rows || r->frope.nw)
                return;
            r->frope.nw = nrm->b;
            r->frope.eps = nrm->eps;
            nrm->dead = true;
            return;
        }
        if (touches(r, nrm->out) || touches(r, nrm->b)) return;
    }
}

/* RoPE(k) followed at once by KVStore(k) and KVStore(v) of the same rows. */
static void fuse_rope_store(gpu_backend *gb, int i) {
    op *r = &gb->ops[i];
    int j = i + 1, k;
    while (j < gb->n_ops && gb->ops[j].dead) j++;
    if (j >= gb->n_ops) return;
    op *sk = &gb->ops[j];
    int64_t row = (int64_t)r->rope.n_heads * r->rope.head_dim;
    if (sk->kind != OP_STORE || sk->a != r->out || sk->n != r->n || sk->pos0 != r->pos0 ||
        sk->out->h.ne0 != row || (sk->out->h.type == PL_TYPE_F16 && r->rope.head_dim % 2))
        return;
    r->frope.kc = sk->out;
    sk->dead = true;
    k = j + 1;
    while (k < gb->n_ops && gb->ops[k].dead) k++;
    if (k >= gb->n_ops) return;
    op *sv = &gb->ops[k];
    if (sv->kind != OP_STORE || sv->n != r->n || sv->pos0 != r->pos0 || sv->out == sk->out ||
        sv->a == r->out || sv->out->h.type != sk->out->h.type || sv->out->h.ne0 % r->rope.n_heads ||
        sv->a->h.ne0 != sv->out->h.ne0 ||
        (sv->out->h.type == PL_TYPE_F16 && (sv->out->h.ne0 / r->rope.n_heads) % 2))
        return;
    r->frope.v = sv->a;
    r->frope.vc = sv->out;
    sv->dead = true;
}

/* RoPE(q) followed at once by RoPE(k) of the same rows and geometry. */
static void fuse_rope_pair(gpu_backend *gb, int i) {
    op *q = &gb->ops[i];
    int j = i + 1;
    while (j < gb->n_ops && gb->ops[j].dead) j++;
    if (j >= gb->n_ops || q->frope.kc || q->pair) return;
    op *k = &gb->ops[j];
    const pl_rope_params *a = &q->rope, *b = &k->rope;
    if (k->kind != OP_ROPE || k->pair || k->out == q->out || k->n != q->n || k->pos0 != q->pos0 ||
        a->mode != b->mode || a->head_dim != b->head_dim || a->rope_dim != b->rope_dim ||
        a->theta_base != b->theta_base || a->freq_scale != b->freq_scale ||
        a->factors != b->factors ||
        (q->frope.nw && k->frope.nw && q->frope.eps != k->frope.eps))
        return;
    q->pair = k;
    k->dead = true;
}

void pl_gpu_fuse(gpu_backend *gb) {
    if (gb->o.no_fuse) return;
    for (int i = 0; i < gb->n_ops; i++) {
        op *o = &gb->ops[i];
        if (o->dead) continue;
        if (o->kind == OP_NORM) {
            fuse_norm_matmul(gb, i);
            if (!o->dead) fuse_norm_rope(gb, i);
        }
    }
    for (int i = 0; i < gb->n_ops; i++) {
        op *o = &gb->ops[i];
        if (o->dead) continue;
        if (o->kind == OP_MATMUL) fuse_gate_up(gb, i);
        else if (o->kind == OP_ROPE) fuse_rope_store(gb, i);
    }
    for (int i = 0; i < gb->n_ops; i++)
        if (!gb->ops[i].dead && gb->ops[i].kind == OP_ROPE) fuse_rope_pair(gb, i);
}
