/* gpu_encode_gemm.c - prefill's matmuls: a batch of more than PL_GPU_GEMM_MIN_COLS columns
 * through Q4_0/Q8_0 weights with quantised activations becomes a Q8_0 pre-pass of x (with
 * the fused RMSNorm, and its side output) into scratch, then one tiled GEMM over it
 * (wgsl_gemm.c) with the matmul's fusions: bias, accumulate, q/k/v split, gate/up with
 * SwiGLU and their side outputs. One pre-pass per matmul: fused q/k/v and gate/up are one
 * matmul, so each input is quantised once. */
#include <string.h>

#include "gpu_internal.h"

/* The tile of a matmul, pinned per shape from gemm_lab's tables on the H200 (gpu-notes.md,
 * gemm3, eighth session): gate/up 128 x 64 outputs, 8 x 4 per thread, 2 blocks per step,
 * Q4_0 unpacked when staged (v4); the others 64 x 64, 4 x 4, 2 blocks, unpacked and
 * double-buffered with warps of 8 columns x 4 rows (v10: 12-18% faster than v3 on the 8B's
 * and 27B's q/k/v, o and down at 512 columns; gemm_sweep.sh). A software
 * adapter: 16 x 16, 2 x 2, 2 blocks (lavapipe compiles it in half the time). opts.gemm:
 * its one tile. */
void pl_gpu_gemm_base(const gpu_backend *gb, const gbuf *w, int gate_up, uint32_t n,
                      pl_gemm_params *p) {
    /* small_gu: a gate/up pair of at most SMALL_GU_ROWS rows (the MoE's shared expert, 512)
     * gets tiles of 32 x 64 instead of 128 x 64 (128 workgroups instead of 32 at 512 columns):
     * the big tile leaves most of the H200's 132 SMs idle (gemm_lab --model 35b, 512 x 2048:
     * 172 us, 64 x 64 90 us, 32 x 64 59.7 us; docs/gpu-notes.md, eighth session).
     * Few columns (a batch of 17-192 decode steps, a short prompt) the same way: 64-row
     * tiles give a column tile as few workgroups as the matrix has 64-row blocks (the 8B's
     * o and down: 64), so the tiles shrink with n (gemm_lab --model 8b --n 16..256 on the
     * H200, twelfth session: the 8B's four matmuls a layer 759 -> 302 us at 32 columns,
     * 783 -> 497 us at 64, 1,034 -> 850 us at 128). Past 192 columns the 27B's gate/up
     * (17,408 rows) too: 32 x 64 v10 2,675 us against 128 x 64 v4's 2,901 at 512 (pp512
     * 1,178 -> 1,225 tok/s), where the 8B's (12,288 rows) lost 0.7% of its pp512.
     * A tile never changes a column's bits (wgsl_gen.h), so choosing by n is free. */
    enum { SMALL_GU_ROWS = 1024, BIG_GU_ROWS = 16384 };
    static const uint32_t soft[6] = {16, 16, 2, 2, 2, 4}, gu[6] = {128, 64, 8, 4, 2, 4},
                          small_gu[6] = {32, 64, 2, 4, 4, 3}, other[6] = {64, 64, 4, 4, 2, 10},
                          mid[6] = {32, 64, 2, 4, 2, 10}, few[6] = {32, 16, 2, 2, 4, 10},
                          few_gu16[6] = {32, 16, 2, 2, 2, 10}, few_gu32[6] = {32, 32, 2, 2, 2, 10};
    const uint32_t smx[6] = {64, 64, 4, 4, 2, (uint32_t)gb->smx};
    const uint32_t *t = gb->gemm_fixed                         ? gb->gemm_tile
                        : gb->smx                              ? smx
                        : gb->info->software                   ? soft
                        : gate_up && w->h.ne1 <= SMALL_GU_ROWS ? small_gu
                        : n <= 16                              ? (gate_up ? few_gu16 : few)
                        : n <= 32                              ? (gate_up ? few_gu32 : few)
                        : n <= 192                             ? mid
                        : gate_up && w->h.ne1 > BIG_GU_ROWS    ? mid
                        : gate_up                              ? gu
                                                               : other;
    memset(p, 0, sizeof *p);
    p->type = w->wt;
    p->rows = (uint32_t)w->h.ne1;
    p->cols = (uint32_t)w->h.ne0;
    p->mode = gate_up ? PL_GEMV_GATE_UP : PL_GEMV_STORE;
    p->tm = t[0], p->tn = t[1], p->rm = t[2], p->rn = t[3], p->bk = t[4], p->version = t[5];
    pl_gpu_gemm_smx_shape(gb, p);
}

void pl_gpu_gemm_smx_shape(const gpu_backend *gb, pl_gemm_params *p) {
    if (p->version < 5 || p->version > 7 || gb->smx_cfg < 0) return;
    const pl_gpu_info *in = gb->info;
    p->sg = in->subgroup_max;
    if (p->version == 6) /* not in the pinned Dawn's list: NVIDIA's int8 shape (gpu-notes.md) */
        p->sm = 16, p->sn = 16, p->sk = 32;
    else
        p->sm = in->smx[gb->smx_cfg].m, p->sn = in->smx[gb->smx_cfg].n,
        p->sk = in->smx[gb->smx_cfg].k;
}

/* The version the default tiles take where the device offers f16 subgroup matrices
 * (opts.smx 0): none (the portable kernel) until versions 5-7 are measured on the H200
 * (docs/gpu-notes.md, sixth session: no device time was left to run them). opts.smx 5-7
 * takes that version (an error where not offered), -1 none. */
#define SMX_AUTO 0

int pl_gpu_smx_wanted(int opt) {
    return opt < 0 ? -1 : opt >= 5 || SMX_AUTO ? 1 : 0;
}
pl_status pl_gpu_smx_choose(gpu_backend *gb) {
    int want = gb->o.smx, pick = pl_gpu_smx_pick(gb->info);
    gb->smx = 0, gb->smx_cfg = pick;
    if (want < -1 || (want > 0 && want < 5) || want > 7)
        return pl_fail(PL_ERR_ARG, "POOLED_GPU_SMX: 0 (never), 5, 6 or 7");
    if (want < 0 || (want == 0 && (!SMX_AUTO || pick < 0 || gb->info->software))) return PL_OK;
    if (pick < 0)
        return pl_fail(PL_ERR_ARG,
                       "POOLED_GPU_SMX=%d: the GPU offers no f16 subgroup matrices (%d configs)",
                       want, gb->info->n_smx);
    gb->smx = want ? want : SMX_AUTO;
    return PL_OK;
}

/* Fewer blocks per step until the staged tiles fit the adapter's workgroup memory. */
static void fit(const gpu_backend *gb, pl_gemm_params *p) {
    while (p->bk > 1 && pl_gemm_wg_bytes(p) > gb->info->max_wg_storage) p->bk /= 2;
}

/* Bytes of the pre-quantised columns: quants (32 per block) and f32 scales. */
static uint64_t xq_bytes(uint32_t cols, uint64_t n) {
    return n * (cols / 32) * 32;
}
static uint64_t xd_bytes(uint32_t cols, uint64_t n) {
    return n * (cols / 32) * 4;
}

/* The tile for matmul o in the GEMV's order of gt threads (0: in order): double-buffered
 * (the order's K loop is written for versions 8-10: v4's tiles take v8, its staging). */
static void tile_for(const gpu_backend *gb, const op *o, uint32_t gt, pl_gemm_params *p) {
    const gbuf *w = o->fqkv.w ? o->fqkv.w : o->a;
    pl_gpu_gemm_base(gb, w, o->fgate.w_up != NULL, (uint32_t)o->n, p);
    if (gt && (p->version < 8 || p->version > 10)) p->version = 8;
    p->gt = gt;
    p->gj = gt ? (p->cols / 32 + gt - 1) / gt : 0;
    fit(gb, p);
}

int pl_gpu_gemm_fits(const gpu_backend *gb, const op *o, uint32_t gt) {
    const gbuf *w = o->fqkv.w ? o->fqkv.w : o->a, *up = o->fgate.w_up;
    if (gb->gemm_off || !pl_gpu_q8x(gb, w) || w->parts != 1 ||
        (up && (up->parts != 1 || up->wt != w->wt)))
        return 0;
    pl_gemm_params p;
    tile_for(gb, o, gt, &p);
    /* a tile POOLED_GPU_GEMM fixed may not suit this weight type or mode (versions 8-10
     * stage more per thread for Q8_0 and gate/up): the GEMV then, not an error */
    return pl_gemm_check_shape(&p) == PL_OK && pl_gemm_wg_bytes(&p) <= gb->info->max_wg_storage &&
           xq_bytes(p.cols, (uint64_t)o->n) <= gb->info->max_binding &&
           (uint64_t)o->n * p.rows * 4 <= gb->info->max_binding &&
           pl_gemm_groups(&p, (uint32_t)o->n) <=
               (uint64_t)gb->info->max_groups_per_dim * gb->info->max_groups_per_dim;
}

int pl_gpu_gemm_applies(const gpu_backend *gb, const op *o) {
    return o->n > gb->gemm_min && pl_gpu_gemm_fits(gb, o, 0);
}

pl_status pl_gpu_encode_q8pre(gpu_backend *gb, const gbuf *x, uint32_t cols, uint32_t n,
                              const gbuf *nw, float eps, const gbuf *xn, uint32_t threads) {
    pl_q8pre_params p;
    memset(&p, 0, sizeof p);
    p.threads = threads ? threads : pl_gpu_threads_for(cols / 32, 32, 256);
    p.norm = nw != NULL, p.eps = nw ? eps : 0, p.norm_out = xn != NULL;
    pl_gpu_kernel *k;
    if (pl_gpu_scratch(gb, &gb->gemm_xq, xq_bytes(cols, n), "gemm x quants") != PL_OK ||
        pl_gpu_scratch(gb, &gb->gemm_xd, xd_bytes(cols, n), "gemm x scales") != PL_OK ||
        pl_gpu_get_kernel(gb, F_Q8PRE, &p, sizeof p, (pl_gpu_gen_fn)pl_wgsl_q8pre, "q8 pre-pass",
                          &k) != PL_OK)
        return PL_ERR;
    pl_gpu_ref refs[6];
    memset(refs, 0, sizeof refs);
    int nr = 0;
    refs[nr++] = pl_gpu_at(x);
    refs[nr++] = pl_gpu_whole(gb->gemm_xq);
    refs[nr++] = pl_gpu_whole(gb->gemm_xd);
    if (nw) refs[nr++] = pl_gpu_at(nw);
    if (xn) refs[nr++] = pl_gpu_at(xn);
    if (pl_gpu_args_ref(gb, (pl_gpu_args){{n, cols}}, &refs[nr++]) != PL_OK) return PL_ERR;
    return pl_gpu_run(gb, k, refs, nr, n);
}

/* The GEMM's first bindings (the pre-quantised x, the output, the weights) into refs
 * (cleared); returns how many. */
static int gemm_refs(const gpu_backend *gb, const op *o, pl_gpu_ref *refs) {
    const gbuf *w = o->fqkv.w ? o->fqkv.w : o->a, *up = o->fgate.w_up;
    int nr = 0;
    memset(refs, 0, BIND_MAX * sizeof *refs);
    refs[nr++] = pl_gpu_whole(gb->gemm_xq);
    refs[nr++] = pl_gpu_whole(gb->gemm_xd);
    refs[nr++] = pl_gpu_at(o->out);
    pl_gpu_weight_refs(w, refs, &nr);
    if (up) pl_gpu_weight_refs(up, refs, &nr);
    return nr;
}

pl_status pl_gpu_encode_gemm(gpu_backend *gb, const op *o, uint32_t gt, uint32_t pre_threads) {
    const gbuf *up = o->fgate.w_up;
    uint32_t n = (uint32_t)o->n;
    pl_gemm_params p;
    tile_for(gb, o, gt, &p);
    if (o->acc && !up) p.mode = PL_GEMV_ACCUM;
    p.bias = o->c != NULL;
    p.gate_out = o->fgate.gate_out != NULL;
    p.up_out = o->fgate.up_out != NULL;
    p.split[0] = o->fqkv.split[0];
    p.split[1] = o->fqkv.split[1];
    p.split[2] = o->fqkv.split[2];
    if (pl_gemm_check_shape(&p) != PL_OK) return PL_ERR;
    const gbuf *x = o->fnorm.x ? o->fnorm.x : o->b;
    if (pl_gpu_encode_q8pre(gb, x, p.cols, n, o->fnorm.x ? o->fnorm.w : NULL, o->fnorm.eps,
                            o->fnorm.out, pre_threads) != PL_OK)
        return PL_ERR;
    pl_gpu_kernel *k;
    pl_gemm_params key = pl_gemm_kernel_key(&p);
    if (pl_gpu_get_kernel(gb, F_GEMM, &key, sizeof key, (pl_gpu_gen_fn)pl_wgsl_gemm, "gemm", &k) !=
        PL_OK)
        return PL_ERR;
    pl_gpu_ref refs[BIND_MAX];
    int nr = gemm_refs(gb, o, refs);
    pl_gpu_matmul_side_refs(o, refs, &nr);
    if (pl_gpu_args_ref(gb, pl_gemm_args(&p, n), &refs[nr++]) != PL_OK) return PL_ERR;
    return pl_gpu_run(gb, k, refs, nr, pl_gemm_groups(&p, n));
}

/* The expert matmul's tile: fewer pairs per tile than the dense GEMM's columns (pp512 of
 * 256 experts, 8 used: 16 pairs per expert on average). */
static void id_params(const gpu_backend *gb, const op *o, pl_gemm_params *p) {
    const gbuf *w = o->a, *up = o->fgate.w_up;
    static const uint32_t hw[6] = {64, 32, 4, 2, 4, 3};
    pl_gpu_gemm_base(gb, w, up != NULL, (uint32_t)o->n, p);
    /* v5-7: no ids (v8/v9 stage the pairs' columns as v3/v4 do) */
    if ((!gb->gemm_fixed && !gb->info->software) || (p->version >= 5 && p->version <= 7))
        p->tm = hw[0], p->tn = hw[1], p->rm = hw[2], p->rn = hw[3], p->bk = hw[4],
        p->version = hw[5];
    p->rows = (uint32_t)(w->h.ne1 / (o->k ? o->k : 1));
    p->ids = 1;
    p->gate_out = up && o->fgate.gate_out;
    p->up_out = up && o->fgate.up_out;
    fit(gb, p);
}

int pl_gpu_gemm_id_applies(const gpu_backend *gb, const op *o) {
    const gbuf *w = o->a, *up = o->fgate.w_up;
    if (gb->gemm_off || o->n <= gb->gemm_min || !pl_gpu_q8x(gb, w) || w->parts != 1 || o->k < 1 ||
        o->k > 4096 || o->count < 1 || w->h.ne1 % o->k ||
        (up && (up->parts != 1 || up->wt != w->wt)))
        return 0;
    pl_gemm_params p;
    id_params(gb, o, &p);
    uint64_t slots = (uint64_t)o->n * o->count, nx = o->acc ? (uint64_t)o->n : slots;
    return pl_gemm_check_shape(&p) == PL_OK && slots <= UINT32_MAX / 8 &&
           pl_gemm_wg_bytes(&p) + 4 * p.tn + 16 <= gb->info->max_wg_storage &&
           (o->k + 1) * 4 <= gb->info->max_wg_storage &&
           xq_bytes(p.cols, nx) <= gb->info->max_binding &&
           slots * p.rows * 4 <= gb->info->max_binding &&
           4 * pl_gemm_grp_words((uint32_t)o->k, p.tn, (uint32_t)slots) <= gb->info->max_binding &&
           (uint64_t)((p.rows + p.tm - 1) / p.tm) *
                   pl_gemm_max_tiles((uint32_t)o->k, p.tn, (uint32_t)slots) <=
               (uint64_t)gb->info->max_groups_per_dim * gb->info->max_groups_per_dim;
}

pl_status pl_gpu_encode_gemm_id(gpu_backend *gb, const op *o) {
    uint32_t slots = (uint32_t)(o->n * o->count), nx = o->acc ? (uint32_t)o->n : slots;
    uint32_t E = (uint32_t)o->k;
    pl_gemm_params p;
    id_params(gb, o, &p);
    if (pl_gemm_check_shape(&p) != PL_OK) return PL_ERR;
    if (pl_gpu_encode_q8pre(gb, o->b, p.cols, nx, NULL, 0, NULL, 0) != PL_OK) return PL_ERR;
    /* the grouping */
    pl_moe_group_params gp = {E, p.tn};
    pl_gpu_kernel *k;
    pl_gpu_ref refs[BIND_MAX];
    memset(refs, 0, sizeof refs);
    if (pl_gpu_scratch(gb, &gb->gemm_grp, 4 * pl_gemm_grp_words(E, p.tn, slots), "moe grouping") !=
            PL_OK ||
        pl_gpu_get_kernel(gb, F_MOE_GROUP, &gp, sizeof gp, (pl_gpu_gen_fn)pl_wgsl_moe_group,
                          "moe grouping", &k) != PL_OK)
        return PL_ERR;
    refs[0] = pl_gpu_at(o->c);
    refs[1] = pl_gpu_whole(gb->gemm_grp);
    if (pl_gpu_args_ref(gb, (pl_gpu_args){{slots}}, &refs[2]) != PL_OK ||
        pl_gpu_run(gb, k, refs, 3, 1) != PL_OK)
        return PL_ERR;
    /* one GEMM over every expert's pairs */
    pl_gemm_params key = pl_gemm_kernel_key(&p);
    if (pl_gpu_get_kernel(gb, F_GEMM, &key, sizeof key, (pl_gpu_gen_fn)pl_wgsl_gemm, "expert gemm",
                          &k) != PL_OK)
        return PL_ERR;
    int nr = gemm_refs(gb, o, refs);
    if (p.gate_out) refs[nr++] = pl_gpu_at(o->fgate.gate_out);
    if (p.up_out) refs[nr++] = pl_gpu_at(o->fgate.up_out);
    refs[nr++] = pl_gpu_whole(gb->gemm_grp);
    pl_gpu_args a = {{slots, p.rows, p.cols / 32, E, o->acc ? (uint32_t)o->count : 1}};
    if (pl_gpu_args_ref(gb, a, &refs[nr++]) != PL_OK) return PL_ERR;
    return pl_gpu_run(gb, k, refs, nr,
                      ((p.rows + p.tm - 1) / p.tm) * pl_gemm_max_tiles(E, p.tn, slots));
}
