/* cpu_heads.c - the per-head ops between the q/k/v projections and attention, held and run
 * as one pool job (PL_FUSE_NORM_ROPE, ROPE_PAIR, ROPE_STORE).
 *
 * Why: qwen3's q/k norms (rows 128 wide, one per head), the RoPE of q and k and the cache
 * stores of k and v are each too small to share out, so they ran on the caller alone: at
 * 16 threads about 6% of a 0.6b decode step, with every worker waiting. Asked for by the
 * model's fusion group, they are held as they come and run when anything else comes (the
 * group's end): one item per (row, head) of q and of k - its norm, RoPE and store in the
 * order they came - and one per row of v's store. Each value is computed by the same
 * function as the op alone (cpu.c), so the same bits. Anything the plan below does not
 * cover (a norm not in place, ops of one buffer over different rows, a rope of other
 * positions) runs the held ops one by one, in order, as they would have run. */
#include "cpu_internal.h"

/* The ops held on one buffer (q, k or v), cut into heads of hd values, h of them a row,
 * n rows. */
typedef struct {
    pl_buf *x;
    int64_t n, h, hd;
    int ops[CPU_HEAD_OPS]; /* indexes into c->heads.op, in order */
    int n_ops;
} head_lane;

typedef struct {
    cpu_backend *c;
    head_lane lane[CPU_HEAD_OPS];
    int n_lanes;
    int64_t first[CPU_HEAD_OPS + 1]; /* lane k's items: first[k] .. first[k + 1] - 1 */
    const double *angles;            /* every held RoPE's (one set: checked) */
} heads_job;

bool pl_cpu_head_hold(cpu_backend *c, const cpu_head_op *op) {
    unsigned want = op->kind == HEAD_NORM ? PL_FUSE_NORM_ROPE
                    : op->kind == HEAD_STORE
                        ? PL_FUSE_ROPE_STORE
                        : PL_FUSE_ROPE_PAIR | PL_FUSE_NORM_ROPE | PL_FUSE_ROPE_STORE;
    if (!(c->fuse & want) || pl_pool_threads(c->pool) < 2 || c->heads.n == CPU_HEAD_OPS)
        return false;
    c->heads.op[c->heads.n++] = *op;
    return true;
}

/* The held ops one by one, as the plain ops. */
static pl_status run_in_order(cpu_backend *c) {
    for (int i = 0; i < c->heads.n; i++) {
        pl_status s = pl_cpu_head_run(c, &c->heads.op[i]);
        if (s) return s;
    }
    return PL_OK;
}

/* Whether two RoPEs rotate by the same angles (their heads may differ). */
static bool same_angles(const cpu_head_op *a, const cpu_head_op *b) {
    return a->n == b->n && a->pos0 == b->pos0 && a->rp.mode == b->rp.mode &&
           a->rp.rope_dim == b->rp.rope_dim && a->rp.theta_base == b->rp.theta_base &&
           a->rp.freq_scale == b->rp.freq_scale && a->rp.factors == b->rp.factors;
}

/* The held ops as lanes of (row, head) items; false where they do not fit that plan (or
 * the angles could not be made: then the ops one by one say so). */
static bool plan(cpu_backend *c, heads_job *j) {
    const cpu_head_op *rope = NULL;
    for (int i = 0; i < c->heads.n; i++) {
        const cpu_head_op *o = &c->heads.op[i];
        if (o->kind == HEAD_ROPE) {
            if (rope && !same_angles(rope, o)) return false;
            rope = o;
        }
        int k = 0;
        while (k < j->n_lanes && j->lane[k].x != o->x) k++;
        if (k == j->n_lanes) j->lane[j->n_lanes++] = (head_lane){.x = o->x};
        head_lane *l = &j->lane[k];
        l->ops[l->n_ops++] = i;
    }
    for (int k = 0; k < j->n_lanes; k++) {
        head_lane *l = &j->lane[k];
        /* the heads: from a RoPE on the buffer, else one "head" a whole stored row */
        for (int i = 0; i < l->n_ops && !l->n; i++) {
            const cpu_head_op *o = &c->heads.op[l->ops[i]];
            if (o->kind == HEAD_ROPE) l->n = o->n, l->h = o->rp.n_heads, l->hd = o->rp.head_dim;
        }
        for (int i = 0; i < l->n_ops && !l->n; i++) {
            const cpu_head_op *o = &c->heads.op[l->ops[i]];
            if (o->kind == HEAD_STORE) l->n = o->n, l->h = 1, l->hd = o->cache->ne0;
        }
        if (!l->n) return false; /* a norm alone */
        for (int i = 0; i < l->n_ops; i++) {
            const cpu_head_op *o = &c->heads.op[l->ops[i]];
            if (o->kind == HEAD_NORM && (o->rows != l->n * l->h || o->cols != l->hd)) return false;
            if (o->kind == HEAD_ROPE && (o->n != l->n || o->rp.n_heads != l->h)) return false;
            /* a store's row is the lane's heads; Q8_0 caches in whole blocks a head */
            if (o->kind == HEAD_STORE && (o->n != l->n || o->cache->ne0 != l->h * l->hd ||
                                          (o->cache->type == PL_TYPE_Q8_0 && l->hd % 32)))
                return false;
        }
        j->first[k + 1] = j->first[k] + l->n * l->h;
    }
    j->angles = rope ? pl_cpu_rope_angles(c, rope->n, rope->pos0, &rope->rp) : NULL;
    return !rope || j->angles;
}

static void head_item(void *ctx, int64_t item, int thread) {
    (void)thread;
    const heads_job *j = ctx;
    int k = 0;
    while (item >= j->first[k + 1]) k++;
    const head_lane *l = &j->lane[k];
    int64_t r = (item - j->first[k]) / l->h, h = (item - j->first[k]) % l->h;
    float *v = fptr(l->x) + (r * l->h + h) * l->hd;
    for (int i = 0; i < l->n_ops; i++) {
        const cpu_head_op *o = &j->c->heads.op[l->ops[i]];
        if (o->kind == HEAD_NORM) {
            pl_cpu_rms_row(v, fptr(o->w), l->hd, o->eps, v);
        } else if (o->kind == HEAD_ROPE) {
            int half = o->rp.rope_dim / 2;
            pl_cpu_rope_head(v, j->angles + r * 2 * half, half, o->rp.mode);
        } else {
            pl_cpu_kv_span(v, o->cache, (o->pos0 + r) * o->cache->ne0 + h * l->hd, l->hd);
        }
    }
}

pl_status pl_cpu_head_flush(cpu_backend *c) {
    if (!c->heads.n) return PL_OK;
    heads_job j = {.c = c};
    pl_status s = PL_OK;
    if (plan(c, &j)) {
        pl_pool_run(c->pool, j.first[j.n_lanes], head_item, &j);
        c->heads.fused++;
    } else
        s = run_in_order(c);
    c->heads.n = 0;
    return s;
}
