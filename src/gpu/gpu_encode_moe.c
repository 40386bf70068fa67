/* gpu_encode_moe.c - records the mixture-of-experts ops: the router's row softmax and
 * top-k, the gathered expert GEMV (the dense GEMV template reading each slot's expert id
 * on the device, so nothing is read back; gate and up experts in one sweep with SwiGLU when
 * fused; prefill's batches through q8x weights take the grouped GEMM of gpu_encode_gemm.c)
 * and the weighted combine. */
#include <string.h>

#include "gpu_internal.h"

static pl_status enc_softmax(gpu_backend *gb, const op *o) {
    pl_softmax_params p;
    memset(&p, 0, sizeof p);
    p.cols = (uint32_t)o->cols;
    p.threads = pl_gpu_threads_for((uint64_t)o->cols, 32, 256);
    p.inplace = o->a == o->out;
    pl_gpu_kernel *k;
    if (pl_gpu_get_kernel(gb, F_SOFTMAX, &p, sizeof p, (pl_gpu_gen_fn)pl_wgsl_softmax, "softmax",
                          &k) != PL_OK)
        return PL_ERR;
    pl_gpu_ref refs[3];
    int n = 0;
    refs[n++] = pl_gpu_at(o->a);
    if (!p.inplace) refs[n++] = pl_gpu_at(o->out);
    if (pl_gpu_args_ref(gb, (pl_gpu_args){{(uint32_t)o->rows}}, &refs[n++]) != PL_OK) return PL_ERR;
    return pl_gpu_run(gb, k, refs, n, (uint32_t)o->rows);
}

/* The GEMV shape of the expert matrices: not tuned (a replayed expert GEMV would measure
 * weights warm in L2); q8x on a GPU takes the shape the dense q8x GEMVs use for matrices
 * under 4096 x 4096 (selftest.c), everything else the built-in shape of its type. */
static gemv_tune expert_tune(const gpu_backend *gb, const gbuf *w) {
    int cls = pl_gpu_tune_class(gb, w);
    if (cls >= 4 && !gb->tune_fixed && !gb->info->software) return (gemv_tune){64, 8, 0, 0, 1};
    return gb->tune[cls];
}

static pl_status enc_matmul_id(gpu_backend *gb, const op *o) {
    if (pl_gpu_gemm_id_applies(gb, o)) return pl_gpu_encode_gemm_id(gb, o);
    const gbuf *w = o->a, *up = o->fgate.w_up; /* up: gate/up experts with SwiGLU (fused) */
    uint32_t slots = (uint32_t)(o->n * o->count);
    gemv_tune tu = expert_tune(gb, w);
    pl_gemv_params p;
    pl_gpu_gemv_base(gb, w, &tu, &p);
    p.rows = (uint32_t)(w->h.ne1 / o->k);
    p.ids = 1;
    p.n_exp = (uint32_t)o->k;
    p.n_used = (uint32_t)o->count;
    p.x_shared = o->acc;
    if (up) {
        p.mode = PL_GEMV_GATE_UP;
        p.gate_out = o->fgate.gate_out != NULL;
        p.up_out = o->fgate.up_out != NULL;
    }
    if (w->parts > 1 &&
        (w->rows_per_part % pl_gemv_rows_per_group(&p) || p.rows % pl_gemv_rows_per_group(&p))) {
        /* a workgroup must stay inside one part: one row each */
        p.threads = 64, p.rows_per_wg = 1, p.subgroups = 0, p.sg_rows = 0, p.unroll = 1;
        p.preload = 0;
    }
    while (p.rows_per_wg > 1 && pl_gemv_wg_bytes(&p) > gb->info->max_wg_storage) p.rows_per_wg /= 2;
    if (pl_gemv_bindings(&p) - 1 > (int)gb->info->max_storage_buffers)
        return pl_fail(PL_ERR, "GPU: an expert weight in %u parts needs %d storage bindings (%u)",
                       w->parts, pl_gemv_bindings(&p) - 1, gb->info->max_storage_buffers);
    pl_gpu_kernel *k;
    if (pl_gpu_get_kernel(gb, F_GEMV, &p, sizeof p, (pl_gpu_gen_fn)pl_wgsl_gemv, "expert gemv",
                          &k) != PL_OK)
        return PL_ERR;
    pl_gpu_ref refs[BIND_MAX];
    memset(refs, 0, sizeof refs);
    int n = 0;
    refs[n++] = pl_gpu_at(o->b);
    refs[n++] = pl_gpu_at(o->out);
    pl_gpu_weight_refs(w, refs, &n);
    if (up) pl_gpu_weight_refs(up, refs, &n);
    if (p.gate_out) refs[n++] = pl_gpu_at(o->fgate.gate_out);
    if (p.up_out) refs[n++] = pl_gpu_at(o->fgate.up_out);
    refs[n++] = pl_gpu_at(o->c);
    if (pl_gpu_args_ref(gb, (pl_gpu_args){{slots}}, &refs[n++]) != PL_OK) return PL_ERR;
    return pl_gpu_run(gb, k, refs, n, pl_gemv_groups(&p) * slots);
}

static pl_status enc_moe_combine(gpu_backend *gb, const op *o) {
    pl_moe_combine_params p;
    memset(&p, 0, sizeof p);
    p.cols = (uint32_t)o->a->h.ne0;
    p.n_used = (uint32_t)o->count;
    p.threads = 256;
    p.acc = o->acc;
    p.shared = o->fcomb.y != NULL;
    pl_gpu_kernel *k;
    if (pl_gpu_get_kernel(gb, F_MOE_COMBINE, &p, sizeof p, (pl_gpu_gen_fn)pl_wgsl_moe_combine,
                          "moe combine", &k) != PL_OK)
        return PL_ERR;
    pl_gpu_ref refs[6] = {pl_gpu_at(o->a), pl_gpu_at(o->b), pl_gpu_at(o->out), {0}};
    int n = 3;
    if (p.shared) refs[n++] = pl_gpu_at(o->fcomb.y), refs[n++] = pl_gpu_at(o->fcomb.g);
    if (pl_gpu_args_ref(gb, (pl_gpu_args){{(uint32_t)o->n}}, &refs[n++]) != PL_OK) return PL_ERR;
    uint64_t count = (uint64_t)o->n * p.cols;
    return pl_gpu_run(gb, k, refs, n, (uint32_t)((count + p.threads - 1) / p.threads));
}

/* Can the router's top-k of these rows run by rank (one pass, pl_wgsl_topk_rank)? */
bool pl_gpu_topk_by_rank(const gpu_backend *gb, const op *o) {
    return gb->topk_rank && o->kind == OP_TOPK_ROWS && o->cols <= PL_TOPK_RANK_MAX &&
           o->k <= PL_TOPK_RANK_MAX;
}

/* The router's top-k by rank, with the shared expert's gate row where fused. */
static pl_status enc_topk_rank(gpu_backend *gb, const op *o) {
    pl_topk_params p;
    memset(&p, 0, sizeof p);
    p.n = (uint32_t)o->cols;
    p.k = (uint32_t)o->k;
    p.chunk = p.n;
    p.threads = pl_gpu_threads_for(p.n, 32, 256);
    p.direct = p.rank = 1;
    p.vals = o->vals != NULL;
    p.softmax = o->fsoftmax;
    p.gate_cols = o->fshgate.w ? (uint32_t)o->fshgate.w->h.ne0 : 0;
    pl_gpu_kernel *k;
    if (pl_gpu_get_kernel(gb, F_TOPK, &p, sizeof p, (pl_gpu_gen_fn)pl_wgsl_topk, "top-k by rank",
                          &k) != PL_OK)
        return PL_ERR;
    pl_gpu_ref r[7];
    int n = 0;
    r[n++] = pl_gpu_at(o->a);
    r[n++] = pl_gpu_at(o->out);
    if (o->vals) r[n++] = pl_gpu_at(o->vals);
    if (p.gate_cols) {
        r[n++] = pl_gpu_at(o->fshgate.x);
        r[n++] = pl_gpu_whole(o->fshgate.w->q[0]);
        r[n++] = pl_gpu_at(o->fshgate.out);
    }
    if (pl_gpu_args_ref(gb, (pl_gpu_args){{0, (uint32_t)o->rows, 0}}, &r[n++]) != PL_OK)
        return PL_ERR;
    return pl_gpu_run(gb, k, r, n, (uint32_t)o->rows);
}

pl_status pl_gpu_encode_moe(gpu_backend *gb, op *o) {
    switch (o->kind) {
    case OP_SOFTMAX: return o->rows ? enc_softmax(gb, o) : PL_OK;
    case OP_TOPK_ROWS:
        if (o->rows && pl_gpu_topk_by_rank(gb, o)) return enc_topk_rank(gb, o);
        return o->rows ? pl_gpu_enc_topk(gb, o->a, (uint32_t)o->cols, 0, (uint32_t)o->rows,
                                         (uint32_t)o->k, o->out, 0, o->vals, o->fsoftmax)
                       : PL_OK;
    case OP_MATMUL_ID: return o->n ? enc_matmul_id(gb, o) : PL_OK;
    case OP_MOE_COMBINE: return o->n ? enc_moe_combine(gb, o) : PL_OK;
    default: return pl_fail(PL_ERR, "GPU: op %d is not a MoE op", (int)o->kind);
    }
}
