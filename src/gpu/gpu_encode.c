/* gpu_encode.c - turns one recorded (possibly fused) op into kernels, bindings, argument
 * slots and dispatches in the open command buffer. Kernels are cached by their parameters
 * and bindings by their buffer ranges, so a decode step after the first creates nothing. */
#include <stdlib.h>
#include <string.h>

#include "gpu_internal.h"
#include "kernel_ref.h"

#define ATTN_CHUNK 256  /* cache positions per attention split */
#define ATTN_BLOCK 8    /* query rows per attention dispatch (sizes the partials) */
#define TOPK_CHUNK 1024 /* values per first-stage top-k workgroup */

/* Whether a q8x GEMV of `cols` columns reads x quantised by a pre-pass (gpu_internal.h,
 * gemv_xpre). Auto: the normed GEMVs of at least PL_GPU_XPRE_MIN_COLS columns, where each
 * workgroup's own norm and quantiser of x cost more than the pre-pass's dispatch (H200,
 * seventh session: 8B Q4_0 decode 272 -> 312 tok/s, 27B 85 -> 100; the 1.7B's 2,048 columns
 * 611 -> 574, so not there). */
int pl_gpu_xpre_applies(int mode, int norm, uint32_t cols) {
    return mode == PL_GPU_XPRE_ALL || (mode == PL_GPU_XPRE_NORMED && norm) ||
           (mode == PL_GPU_XPRE_AUTO && norm && cols >= PL_GPU_XPRE_MIN_COLS);
}

/* ------------------------------------------------------------------ caches */

static uint64_t fnv(const void *p, size_t n, uint64_t h) {
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

pl_status pl_gpu_get_kernel(gpu_backend *gb, int family, const void *params, size_t size,
                            pl_gpu_gen_fn gen, const char *label, pl_gpu_kernel **out) {
    if (size > sizeof((kcache_entry *)0)->params)
        return pl_fail(PL_ERR, "GPU: kernel parameters of %zu bytes", size);
    uint64_t h = fnv(params, size, fnv(&family, sizeof family, 1469598103934665603ull));
    kcache_entry **slot = &gb->kernels[h % 64];
    for (kcache_entry *e = *slot; e; e = e->next) {
        if (e->family == family && !memcmp(e->params, params, size)) {
            *out = e->k;
            return PL_OK;
        }
    }
    char *src = NULL;
    pl_status st = gen(params, &src);
    pl_gpu_kernel *k = NULL;
    if (st == PL_OK) st = pl_gpu_kernel_new(gb->g, src, label, &k);
    free(src);
    if (st != PL_OK) return st;
    kcache_entry *e = calloc(1, sizeof *e);
    if (!e) {
        pl_gpu_kernel_free(k);
        return pl_fail(PL_ERR_NOMEM, "out of memory");
    }
    e->family = family;
    memcpy(e->params, params, size);
    e->k = k;
    e->next = *slot;
    *slot = e;
    *out = k;
    return PL_OK;
}

static pl_status get_bind(gpu_backend *gb, const pl_gpu_kernel *k, pl_gpu_ref *refs, int n,
                          pl_gpu_bind **out) {
    uint64_t h = fnv(refs, (size_t)n * sizeof *refs, fnv(&k, sizeof k, 1469598103934665603ull));
    bcache_entry **slot = &gb->binds[h % 1024];
    for (bcache_entry *e = *slot; e; e = e->next) {
        if (e->k == k && e->n == n && !memcmp(e->refs, refs, (size_t)n * sizeof *refs)) {
            *out = e->b;
            return PL_OK;
        }
    }
    bcache_entry *e = calloc(1, sizeof *e);
    if (!e) return pl_fail(PL_ERR_NOMEM, "out of memory");
    if (pl_gpu_bind_new(gb->g, k, refs, n, &e->b) != PL_OK) {
        free(e);
        return PL_ERR;
    }
    e->k = k, e->n = n;
    memcpy(e->refs, refs, (size_t)n * sizeof *refs);
    e->next = *slot;
    *slot = e;
    *out = e->b;
    return PL_OK;
}

void pl_gpu_forget_buf(gpu_backend *gb, const pl_gpu_buf *b) {
    for (int i = 0; i < 1024; i++) {
        for (bcache_entry **pp = &gb->binds[i]; *pp;) {
            bcache_entry *e = *pp;
            int uses = 0;
            for (int j = 0; j < e->n; j++) uses |= e->refs[j].buf == b;
            if (uses) {
                *pp = e->next;
                pl_gpu_bind_free(e->b);
                free(e);
            } else {
                pp = &e->next;
            }
        }
    }
}

void pl_gpu_caches_free(gpu_backend *gb) {
    for (int i = 0; i < 1024; i++) {
        while (gb->binds[i]) {
            bcache_entry *e = gb->binds[i];
            gb->binds[i] = e->next;
            pl_gpu_bind_free(e->b);
            free(e);
        }
    }
    for (int i = 0; i < 64; i++) {
        while (gb->kernels[i]) {
            kcache_entry *e = gb->kernels[i];
            gb->kernels[i] = e->next;
            pl_gpu_kernel_free(e->k);
            free(e);
        }
    }
}

/* A fresh argument slot; when all are used, submit what is recorded (with its arguments)
 * and start again from slot 0 in a new command buffer. */
pl_status pl_gpu_args_ref(gpu_backend *gb, pl_gpu_args a, pl_gpu_ref *ref) {
    if (gb->args_used == gb->args_cap) {
        if (pl_gpu_end_chunk(gb) != PL_OK) return PL_ERR;
        pl_gpu_begin(gb->g);
    }
    uint32_t slot = gb->args_used++;
    memcpy(gb->args_host + (size_t)slot * gb->args_stride, &a, sizeof a);
    *ref = (pl_gpu_ref){gb->args, (uint64_t)slot * gb->args_stride, sizeof a};
    return PL_OK;
}

pl_status pl_gpu_run(gpu_backend *gb, const pl_gpu_kernel *k, pl_gpu_ref *refs, int n,
                     uint32_t groups) {
    pl_gpu_bind *b = NULL;
    if (get_bind(gb, k, refs, n, &b) != PL_OK) return PL_ERR;
    pl_gpu_dispatch(gb->g, k, b, groups);
    return PL_OK;
}

pl_status pl_gpu_scratch(gpu_backend *gb, pl_gpu_buf **b, uint64_t bytes, const char *label) {
    if (*b && pl_gpu_buf_size(*b) >= bytes) return PL_OK;
    pl_gpu_retire(gb, *b);
    *b = NULL;
    return pl_gpu_buf_new(gb->g, bytes < 4096 ? 4096 : bytes, PL_GPU_STORAGE, label, b);
}

uint32_t pl_gpu_threads_for(uint64_t n, uint32_t lo, uint32_t hi) {
    uint32_t t = lo;
    while (t < hi && t < n) t *= 2;
    return t;
}

static pl_gpu_etype etype(uint32_t type) {
    return type == PL_TYPE_F16 ? PL_GE_F16 : type == PL_TYPE_I32 ? PL_GE_I32 : PL_GE_F32;
}

/* ------------------------------------------------------------------ ops */

void pl_gpu_gemv_base(const gpu_backend *gb, const gbuf *w, const gemv_tune *t, pl_gemv_params *p) {
    memset(p, 0, sizeof *p);
    p->type = w->wt;
    p->rows = (uint32_t)w->h.ne1;
    p->cols = (uint32_t)w->h.ne0;
    p->q8x = pl_gpu_q8x(gb, w);
    p->threads = t->threads;
    p->rows_per_wg = t->rows;
    p->subgroups = (int)t->subgroups;
    p->sg_rows = t->sg_rows;
    p->unroll = t->unroll;
    p->mode = PL_GEMV_STORE;
    p->parts = w->parts;
    p->rows_per_part = w->parts > 1 ? w->rows_per_part : 0;
    p->preload = p->q8x && gb->q8_preload && p->unroll <= 1;
}

void pl_gpu_weight_refs(const gbuf *w, pl_gpu_ref *refs, int *n) {
    for (uint32_t q = 0; q < w->parts; q++) {
        refs[(*n)++] = pl_gpu_whole(w->q[q]);
        if (w->s[q]) refs[(*n)++] = pl_gpu_whole(w->s[q]);
    }
}

void pl_gpu_matmul_side_refs(const op *o, pl_gpu_ref *refs, int *n) {
    if (o->c) refs[(*n)++] = pl_gpu_at(o->c);
    if (o->fgate.gate_out) refs[(*n)++] = pl_gpu_at(o->fgate.gate_out);
    if (o->fgate.up_out) refs[(*n)++] = pl_gpu_at(o->fgate.up_out);
    if (o->fqkv.split[0]) {
        refs[(*n)++] = pl_gpu_at(o->fqkv.y1);
        refs[(*n)++] = pl_gpu_at(o->fqkv.y2);
        if (o->fqkv.split[2]) refs[(*n)++] = pl_gpu_at(o->fqkv.y3);
    }
}

/* n columns (2..16) of a q8x GEMV: how many a workgroup takes (0: one), so that each
 * weight block is read once for all of them (a verify pass, a batch of decode steps), as
 * evenly as the most a workgroup (gb->gemv_cols) allows: 9 columns go 5 + 4, not 8 + 1.
 * Not with subgroup rows (their reduction is another). */
/* The most columns a workgroup and the accumulators a thread for p's weights: the
 * options' where they were given, else the type's default (PL_GPU_GEMV_COLS*: Q4_0 gives
 * fewer columns more rows, its nibbles' unpacking shared by the rows). */
static uint32_t cols_most(const gpu_backend *gb, const pl_gemv_params *p) {
    if (gb->gemv_cols) return gb->gemv_cols > 1 ? (uint32_t)gb->gemv_cols : 1;
    return p->type == PL_GW_Q4_0 ? PL_GPU_GEMV_COLS_Q4_0 : PL_GPU_GEMV_COLS;
}
static uint32_t cols_acc(const gpu_backend *gb, const pl_gemv_params *p) {
    if (gb->gemv_cols_acc) return (uint32_t)gb->gemv_cols_acc;
    if (gb->gemv_cols) return PL_GPU_GEMV_COLS_ACC; /* columns given, accumulators not */
    return p->type == PL_GW_Q4_0 ? PL_GPU_GEMV_COLS_ACC_Q4_0 : PL_GPU_GEMV_COLS_ACC;
}

static uint32_t gemv_cols_for(const gpu_backend *gb, const pl_gemv_params *p, uint32_t n) {
    uint32_t most = cols_most(gb, p);
    if (n < 2 || most < 2 || !p->q8x || p->sg_rows || p->ids) return 0;
    uint32_t groups = (n + most - 1) / most;
    return (n + groups - 1) / groups;
}

/* nc columns a workgroup for p (x pre-quantised by then): the same bits per column
 * (wgsl_gemv.c); only the rows a workgroup shrink, to keep each thread's accumulators (rows
 * x matrices x columns) within gb->gemv_cols_acc and every column's partial sums within
 * workgroup memory, and the sweep takes one block a turn (each column's order unchanged). */
static void gemv_cols(const gpu_backend *gb, pl_gemv_params *p, uint32_t nc) {
    uint32_t m = p->mode == PL_GEMV_GATE_UP ? 2 : 1;
    p->ncols = nc, p->unroll = 1;
    while (p->rows_per_wg % 2 == 0 && (p->rows_per_wg * m * nc > cols_acc(gb, p) ||
                                       pl_gemv_wg_bytes(p) > gb->info->max_wg_storage))
        p->rows_per_wg /= 2;
    if (pl_gemv_wg_bytes(p) > gb->info->max_wg_storage) p->ncols = 0;
}

/* The one-column GEMV of matmul o (its shape, fusions and modes; x not yet pre-quantised):
 * what a decode step runs, whose threads and reduction set every column's bits. */
static void gemv_shape(const gpu_backend *gb, const op *o, pl_gemv_params *pp) {
    const gbuf *w = o->fqkv.w ? o->fqkv.w : o->a, *up = o->fgate.w_up;
    pl_gemv_params p;
    pl_gpu_gemv_base(gb, w, pl_gpu_tune_for(gb, w), &p);
    if (w->parts > 1 && w->rows_per_part % pl_gemv_rows_per_group(&p)) {
        /* parts are cut at multiples of 8 rows: keep the workgroup inside one */
        p.threads = 64, p.rows_per_wg = 4, p.subgroups = 0, p.sg_rows = 0, p.unroll = 1;
    }
    p.mode = up ? PL_GEMV_GATE_UP : o->acc ? PL_GEMV_ACCUM : PL_GEMV_STORE;
    p.norm = o->fnorm.x != NULL;
    p.eps = p.norm ? o->fnorm.eps : 0;
    p.bias = o->c != NULL;
    p.norm_out = o->fnorm.out != NULL;
    p.gate_out = o->fgate.gate_out != NULL;
    p.up_out = o->fgate.up_out != NULL;
    p.split[0] = o->fqkv.split[0];
    p.split[1] = o->fqkv.split[1];
    p.split[2] = o->fqkv.split[2];
    if (p.split[0] &&
        (p.split[0] % pl_gemv_rows_per_group(&p) || p.split[1] % pl_gemv_rows_per_group(&p) ||
         p.split[2] % pl_gemv_rows_per_group(&p))) {
        /* workgroups must not straddle the q/k/v boundaries: the built-in shape does not */
        const gemv_tune *d = &gb->tune[pl_gpu_tune_class(gb, w)];
        p.threads = d->threads, p.rows_per_wg = d->rows, p.subgroups = (int)d->subgroups;
        p.sg_rows = d->sg_rows, p.unroll = d->unroll;
    }
    p.preload = p.q8x && gb->q8_preload && p.unroll <= 1;
    *pp = p;
}

/* Threads of the Q8_0 pre-pass that stands in for the quantisation inside the one-column
 * GEMV p (0: the pre-pass's own): where a decode step's GEMV normalises x itself, the
 * pre-pass takes its threads, so that 1/rms comes from the same sums in the same order. */
static uint32_t q8pre_threads(const gpu_backend *gb, const pl_gemv_params *p) {
    return p->norm && !pl_gpu_xpre_applies(gb->gemv_xpre, p->norm, p->cols) && !p->subgroups &&
                   !p->sg_rows
               ? p->threads
               : 0;
}

static pl_status enc_matmul(gpu_backend *gb, const op *o) {
    const gbuf *w = o->fqkv.w ? o->fqkv.w : o->a, *up = o->fgate.w_up;
    pl_gemv_params p;
    gemv_shape(gb, o, &p);
    /* a batch of decode steps or a verify pass: the GEMM in the GEMV's order (decode's
     * bits), where it replaces the GEMV or the in-order GEMM (opts.gemm_exact) */
    if (o->n >= (int64_t)gb->exact_min && o->n <= (int64_t)gb->exact_max && p.q8x && !p.subgroups &&
        !p.sg_rows && pl_gpu_gemm_fits(gb, o, p.threads))
        return pl_gpu_encode_gemm(gb, o, p.threads, q8pre_threads(gb, &p));
    if (pl_gpu_gemm_applies(gb, o)) return pl_gpu_encode_gemm(gb, o, 0, 0);
    /* x quantised once by a pre-pass (with the norm and its side output) for every
     * workgroup, where asked (opts.gemv_xpre) and for several columns a workgroup */
    const gbuf *xsrc = p.norm ? o->fnorm.x : o->b;
    uint32_t nc = gemv_cols_for(gb, &p, (uint32_t)o->n);
    if (p.q8x && (nc || pl_gpu_xpre_applies(gb->gemv_xpre, p.norm, p.cols))) {
        if (pl_gpu_encode_q8pre(gb, xsrc, p.cols, (uint32_t)o->n, p.norm ? o->fnorm.w : NULL, p.eps,
                                p.norm_out ? o->fnorm.out : NULL, q8pre_threads(gb, &p)) != PL_OK)
            return PL_ERR;
        p.xpre = 1, p.norm = 0, p.eps = 0, p.norm_out = 0;
    }
    /* fewer rows per workgroup where the partial sums would not fit workgroup memory */
    while (p.rows_per_wg > 1 && pl_gemv_wg_bytes(&p) > gb->info->max_wg_storage) p.rows_per_wg /= 2;
    if (nc) gemv_cols(gb, &p, nc);
    pl_gpu_kernel *k;
    if (pl_gpu_get_kernel(gb, F_GEMV, &p, sizeof p, (pl_gpu_gen_fn)pl_wgsl_gemv, "gemv", &k) !=
        PL_OK)
        return PL_ERR;
    pl_gpu_ref refs[BIND_MAX];
    memset(refs, 0, sizeof refs);
    int n = 0;
    refs[n++] = p.xpre ? pl_gpu_whole(gb->gemm_xq) : pl_gpu_at(xsrc);
    refs[n++] = pl_gpu_at(o->out);
    pl_gpu_weight_refs(w, refs, &n);
    if (up) pl_gpu_weight_refs(up, refs, &n);
    if (p.xpre) refs[n++] = pl_gpu_whole(gb->gemm_xd);
    if (p.norm) refs[n++] = pl_gpu_at(o->fnorm.w);
    if (p.norm_out) refs[n++] = pl_gpu_at(o->fnorm.out);
    pl_gpu_matmul_side_refs(o, refs, &n);
    if (pl_gpu_args_ref(gb, (pl_gpu_args){{(uint32_t)o->n}}, &refs[n++]) != PL_OK) return PL_ERR;
    return pl_gpu_run(gb, k, refs, n, pl_gemv_dispatch(&p, (uint32_t)o->n));
}

static pl_status enc_norm(gpu_backend *gb, const op *o) {
    pl_rmsnorm_params p;
    memset(&p, 0, sizeof p);
    p.cols = (uint32_t)o->cols;
    p.threads = pl_gpu_threads_for((uint64_t)o->cols / 4, 32, 256);
    p.eps = o->eps;
    p.inplace = o->a == o->out;
    p.gate = o->c ? (o->out2 == o->c ? 1 : 2) : 0; /* the fused gate (gpu_fuse.c) */
    pl_gpu_kernel *k;
    if (pl_gpu_get_kernel(gb, F_NORM, &p, sizeof p, (pl_gpu_gen_fn)pl_wgsl_rmsnorm, "rmsnorm",
                          &k) != PL_OK)
        return PL_ERR;
    pl_gpu_ref refs[5];
    memset(refs, 0, sizeof refs);
    int n = 0;
    refs[n++] = pl_gpu_at(o->a);
    if (!p.inplace) refs[n++] = pl_gpu_at(o->out);
    refs[n++] = pl_gpu_at(o->b);
    if (p.gate) refs[n++] = pl_gpu_at(o->c);
    if (p.gate == 2) refs[n++] = pl_gpu_at(o->out2);
    if (pl_gpu_args_ref(gb, (pl_gpu_args){{(uint32_t)o->rows}}, &refs[n++]) != PL_OK) return PL_ERR;
    return pl_gpu_run(gb, k, refs, n, (uint32_t)o->rows);
}

/* The RoPE table covering positions [0, need) for this configuration. */
static pl_status rope_table(gpu_backend *gb, const pl_rope_params *r, uint32_t need) {
    const void *factors = r->factors ? ((const gbuf *)r->factors)->host : NULL;
    int same = gb->rope_tab && gb->rope_dim == (uint32_t)r->rope_dim &&
               gb->rope_base == r->theta_base && gb->rope_scale == r->freq_scale &&
               gb->rope_factors == factors;
    if (same && gb->rope_positions >= need) return PL_OK;
    uint32_t positions = (need + 1023) & ~1023u;
    if (same && positions < 2 * gb->rope_positions) positions = 2 * gb->rope_positions;
    size_t n = (size_t)positions * (size_t)r->rope_dim;
    float *tab = malloc(n * sizeof *tab);
    if (!tab) return pl_fail(PL_ERR_NOMEM, "out of memory for the RoPE table");
    pl_gpu_rope_table(positions, (uint32_t)r->rope_dim, r->theta_base, r->freq_scale, factors, tab);
    pl_gpu_retire(gb, gb->rope_tab);
    gb->rope_tab = NULL;
    pl_status st = pl_gpu_buf_new(gb->g, n * sizeof *tab, PL_GPU_STORAGE, "rope", &gb->rope_tab);
    if (st == PL_OK) st = pl_gpu_write(gb->g, gb->rope_tab, 0, tab, n * sizeof *tab);
    free(tab);
    if (st != PL_OK) return st;
    gb->rope_positions = positions, gb->rope_dim = (uint32_t)r->rope_dim;
    gb->rope_base = r->theta_base, gb->rope_scale = r->freq_scale, gb->rope_factors = factors;
    return PL_OK;
}

static pl_status enc_rope(gpu_backend *gb, const op *o) {
    const pl_rope_params *r = &o->rope;
    const op *k = o->pair ? o->pair : o; /* the op whose stores and v the kernel does */
    /* positions up to pos0 + n, or (columns) below k */
    if (rope_table(gb, r, (uint32_t)(o->seq ? o->k : o->pos0 + o->n)) != PL_OK) return PL_ERR;
    pl_rope_params_gpu p;
    memset(&p, 0, sizeof p);
    p.n_heads = (uint32_t)r->n_heads;
    p.head_dim = (uint32_t)r->head_dim;
    p.rot_dim = (uint32_t)r->rope_dim;
    p.neox = r->mode == PL_ROPE_NEOX;
    p.threads = pl_gpu_threads_for((uint64_t)r->head_dim / 2, 32, 128);
    p.norm = o->frope.nw != NULL;
    p.eps = p.norm ? o->frope.eps : o->pair && o->pair->frope.nw ? o->pair->frope.eps : 0;
    p.store = k->frope.kc != NULL;
    p.store_v = k->frope.vc != NULL;
    p.cache_f16 = p.store && k->frope.kc->h.type == PL_TYPE_F16;
    p.head_dim_v = p.store_v ? (uint32_t)(k->frope.vc->h.ne0 / k->rope.n_heads) : 0;
    p.pair_heads = o->pair ? (uint32_t)o->pair->rope.n_heads : 0;
    p.pair_norm = o->pair && o->pair->frope.nw;
    p.sg = (p.norm || p.pair_norm) && gb->info->has_subgroups;
    p.cols = o->seq != NULL;
    pl_gpu_kernel *kk;
    if (pl_gpu_get_kernel(gb, F_ROPE, &p, sizeof p, (pl_gpu_gen_fn)pl_wgsl_rope, "rope", &kk) !=
        PL_OK)
        return PL_ERR;
    pl_gpu_ref refs[10];
    memset(refs, 0, sizeof refs);
    int n = 0;
    refs[n++] = pl_gpu_at(o->out);
    refs[n++] = pl_gpu_whole(gb->rope_tab);
    if (p.norm) refs[n++] = pl_gpu_at(o->frope.nw);
    if (o->pair) {
        refs[n++] = pl_gpu_at(o->pair->out);
        if (p.pair_norm) refs[n++] = pl_gpu_at(o->pair->frope.nw);
    }
    if (p.store) refs[n++] = pl_gpu_at(k->frope.kc);
    if (p.store_v) {
        refs[n++] = pl_gpu_at(k->frope.v);
        refs[n++] = pl_gpu_at(k->frope.vc);
    }
    if (p.cols) refs[n++] = pl_gpu_at(o->seq);
    pl_gpu_args a = {{(uint32_t)o->pos0, (uint32_t)o->n, (uint32_t)k->ctx}};
    if (pl_gpu_args_ref(gb, a, &refs[n++]) != PL_OK) return PL_ERR;
    return pl_gpu_run(gb, kk, refs, n, (uint32_t)o->n * (p.n_heads + p.pair_heads));
}

/* A copy of count elements from src[src0] to dst[dst0], converting (STORE, COPY). */
static pl_status enc_copy(gpu_backend *gb, const gbuf *src, uint64_t src0, gbuf *dst, uint64_t dst0,
                          uint64_t count) {
    if (!count) return PL_OK;
    pl_copy_params p;
    memset(&p, 0, sizeof p);
    p.src = etype(src->h.type);
    p.dst = etype(dst->h.type);
    p.threads = 64;
    p.inplace = src == dst;
    pl_gpu_kernel *k;
    if (pl_gpu_get_kernel(gb, F_COPY, &p, sizeof p, (pl_gpu_gen_fn)pl_wgsl_copy, "copy", &k) !=
        PL_OK)
        return PL_ERR;
    pl_gpu_ref refs[3];
    memset(refs, 0, sizeof refs);
    int n = 0;
    refs[n++] = pl_gpu_at(src);
    if (!p.inplace) refs[n++] = pl_gpu_at(dst);
    pl_gpu_args a = {{(uint32_t)src0, (uint32_t)dst0, (uint32_t)count}};
    if (pl_gpu_args_ref(gb, a, &refs[n++]) != PL_OK) return PL_ERR;
    return pl_gpu_run(gb, k, refs, n, pl_copy_groups(&p, (uint32_t)dst0, (uint32_t)count));
}

/* A KV store of columns into their slots (pl_wgsl_store_cols). */
static pl_status enc_store_cols(gpu_backend *gb, const op *o) {
    pl_store_cols_params p;
    memset(&p, 0, sizeof p);
    p.d = (uint32_t)o->out->h.ne0;
    p.f16 = o->out->h.type == PL_TYPE_F16;
    p.threads = pl_gpu_threads_for(p.f16 ? p.d / 2 : p.d, 32, 128);
    pl_gpu_kernel *k;
    if (pl_gpu_get_kernel(gb, F_STORE_COLS, &p, sizeof p, (pl_gpu_gen_fn)pl_wgsl_store_cols,
                          "column store", &k) != PL_OK)
        return PL_ERR;
    pl_gpu_ref refs[4] = {pl_gpu_at(o->a), pl_gpu_at(o->out), pl_gpu_at(o->seq), {0}};
    pl_gpu_args a = {{(uint32_t)o->ctx, (uint32_t)o->n}};
    if (pl_gpu_args_ref(gb, a, &refs[3]) != PL_OK) return PL_ERR;
    return pl_gpu_run(gb, k, refs, 4, (uint32_t)o->n);
}

/* A KV store of n rows at pos0 into a Q8_0 cache: blocks of 32 quantised on the device
 * (pl_wgsl_kv_q8). */
static pl_status enc_store_q8(gpu_backend *gb, const op *o) {
    if (!o->n) return PL_OK;
    pl_kv_q8_params p = {.threads = 64};
    pl_gpu_kernel *k;
    if (pl_gpu_get_kernel(gb, F_KV_Q8, &p, sizeof p, (pl_gpu_gen_fn)pl_wgsl_kv_q8, "kv store q8",
                          &k) != PL_OK)
        return PL_ERR;
    uint64_t nb = (uint64_t)o->out->h.ne0 / 32; /* blocks per row */
    uint32_t blk0 = (uint32_t)((uint64_t)o->pos0 * nb), count = (uint32_t)((uint64_t)o->n * nb);
    uint32_t scales = (uint32_t)((uint64_t)o->out->h.ne1 * (uint64_t)o->out->h.ne0 / 4);
    pl_gpu_ref refs[3] = {pl_gpu_at(o->a), pl_gpu_at(o->out), {0}};
    if (pl_gpu_args_ref(gb, (pl_gpu_args){{blk0, count, scales}}, &refs[2]) != PL_OK) return PL_ERR;
    return pl_gpu_run(gb, k, refs, 3, pl_kv_q8_groups(&p, blk0, count));
}

/* The prefill attention kernel's parameters for o (wgsl_attn_prefill.c: the sizes and why),
 * or 0 where it does not apply: turned off (opts.fa), PL_GPU_FA_MIN_ROWS rows or fewer, a
 * Q8_0 cache (the decode kernel dequantises it), no subgroups, or tiles that cannot fit. */
static int attn_prefill_params(const gpu_backend *gb, const op *o, pl_attn_prefill_params *p) {
    const pl_attn_params *a = &o->attn;
    memset(p, 0, sizeof *p);
    uint32_t type = o->b->h.type;
    if (!gb->fa || o->n < PL_GPU_FA_MIN_ROWS || !gb->info->has_subgroups ||
        (type != PL_TYPE_F16 && type != PL_TYPE_F32))
        return 0;
    p->n_head = (uint32_t)a->n_head;
    p->n_kv_head = (uint32_t)a->n_head_kv;
    p->head_dim = (uint32_t)a->head_dim;
    p->head_dim_v = (uint32_t)a->head_dim_v;
    p->kv_f16 = type == PL_TYPE_F16;
    p->scale = a->scale;
    uint32_t e = p->kv_f16 ? 2 : 1, nwk = p->head_dim / e, nwv = p->head_dim_v / e;
    if (p->head_dim % e || p->head_dim_v % e) return 0;
    /* lanes per query vector: 16 registers of q per thread, within one subgroup */
    uint32_t lanes = p->head_dim <= 64 ? 4 : p->head_dim <= 128 ? 8 : 16;
    uint32_t sg = gb->info->subgroup_min ? gb->info->subgroup_min : 1;
    while (lanes > 1 && (lanes > sg || nwk % lanes || nwv % lanes)) lanes /= 2;
    p->lanes = lanes;
    p->rows = gb->info->software ? 8 : 32;
    while (p->rows > 1 && p->rows * lanes > gb->info->max_invocations) p->rows /= 2;
    p->keys = 32;
    while (p->keys > 1 && pl_attn_prefill_wg_bytes(p) > gb->info->max_wg_storage) p->keys /= 2;
    return pl_attn_prefill_wg_bytes(p) <= gb->info->max_wg_storage;
}

/* All the rows of o in one dispatch (wgsl_attn_prefill.c). */
static pl_status enc_attn_prefill(gpu_backend *gb, const op *o, const pl_attn_prefill_params *p) {
    pl_gpu_kernel *k;
    if (pl_gpu_get_kernel(gb, F_ATTN_PREFILL, p, sizeof *p, (pl_gpu_gen_fn)pl_wgsl_attn_prefill,
                          "prefill attention", &k) != PL_OK)
        return PL_ERR;
    pl_gpu_args args = {{(uint32_t)o->pos0, (uint32_t)o->n}};
    pl_gpu_ref refs[5] = {
        pl_gpu_at(o->a), pl_gpu_at(o->b), pl_gpu_at(o->c), pl_gpu_at(o->out), {0}};
    if (pl_gpu_args_ref(gb, args, &refs[4]) != PL_OK) return PL_ERR;
    return pl_gpu_run(gb, k, refs, 5, pl_attn_prefill_groups(p, (uint32_t)o->n));
}

static pl_status enc_attn(gpu_backend *gb, const op *o) {
    const pl_attn_params *a = &o->attn;
    pl_attn_prefill_params fp;
    if (!o->seq && attn_prefill_params(gb, o, &fp)) return enc_attn_prefill(gb, o, &fp);
    pl_attn_params_gpu p;
    memset(&p, 0, sizeof p);
    p.n_head = (uint32_t)a->n_head;
    p.n_kv_head = (uint32_t)a->n_head_kv;
    p.head_dim = (uint32_t)a->head_dim;
    p.head_dim_v = (uint32_t)a->head_dim_v;
    p.chunk = ATTN_CHUNK;
    /* splits of a cache, or of one slot (columns: o->ctx rows each) */
    int64_t rows = o->seq ? o->ctx : o->b->h.ne1;
    p.max_splits = (uint32_t)((rows + ATTN_CHUNK - 1) / ATTN_CHUNK);
    p.cols = o->seq != NULL;
    p.block_rows = ATTN_BLOCK;
    p.threads = gb->info->software ? 32 : 256;
    p.kv_f16 = o->b->h.type == PL_TYPE_F16;
    p.kv_q8 = o->b->h.type == PL_TYPE_Q8_0;
    p.ctx = p.kv_q8 ? (uint32_t)o->b->h.ne1 : 0;
    p.scale = a->scale;
    p.sg = gb->info->has_subgroups;
    pl_attn_combine_params cp;
    memset(&cp, 0, sizeof cp);
    cp.n_head = p.n_head, cp.head_dim_v = p.head_dim_v, cp.max_splits = p.max_splits;
    cp.threads = pl_gpu_threads_for(p.head_dim_v, 32, 128);
    pl_gpu_kernel *ka, *kc;
    if (pl_gpu_get_kernel(gb, F_ATTN, &p, sizeof p, (pl_gpu_gen_fn)pl_wgsl_attn, "attention",
                          &ka) != PL_OK ||
        pl_gpu_get_kernel(gb, F_COMBINE, &cp, sizeof cp, (pl_gpu_gen_fn)pl_wgsl_attn_combine,
                          "combine", &kc) != PL_OK)
        return PL_ERR;
    uint64_t pbytes = (uint64_t)ATTN_BLOCK * p.n_head * p.max_splits * (p.head_dim_v + 2) * 4;
    if (pl_gpu_scratch(gb, &gb->partials, pbytes, "attention partials") != PL_OK) return PL_ERR;
    for (int64_t r0 = 0; r0 < o->n; r0 += ATTN_BLOCK) {
        uint32_t nr = (uint32_t)(o->n - r0 < ATTN_BLOCK ? o->n - r0 : ATTN_BLOCK);
        /* keys of the block's last row, or (columns) below o->k */
        int64_t keys = o->seq ? o->k : o->pos0 + r0 + nr;
        uint32_t ns = (uint32_t)((keys + ATTN_CHUNK - 1) / ATTN_CHUNK);
        pl_gpu_args args = {{(uint32_t)o->pos0, (uint32_t)r0, nr, ns, (uint32_t)o->ctx}};
        pl_gpu_ref refs[7] = {pl_gpu_at(o->a),
                              pl_gpu_at(o->b),
                              pl_gpu_at(o->c),
                              pl_gpu_at(o->out),
                              pl_gpu_whole(gb->partials),
                              {0},
                              {0}};
        int nb = 5;
        if (o->seq) refs[nb++] = pl_gpu_at(o->seq);
        if (pl_gpu_args_ref(gb, args, &refs[nb]) != PL_OK) return PL_ERR;
        if (pl_gpu_run(gb, ka, refs, nb + 1, nr * p.n_head * ns) != PL_OK) return PL_ERR;
        if (ns > 1) {
            pl_gpu_ref cr[3] = {pl_gpu_whole(gb->partials), pl_gpu_at(o->out), refs[nb]};
            if (pl_gpu_run(gb, kc, cr, 3, nr * p.n_head) != PL_OK) return PL_ERR;
        }
    }
    return PL_OK;
}

pl_status pl_gpu_enc_topk(gpu_backend *gb, const gbuf *x, uint32_t cols, uint32_t row0,
                          uint32_t rows, uint32_t k, gbuf *ids, uint32_t dst0, gbuf *vals,
                          bool softmax) {
    pl_topk_params s1, s2;
    memset(&s1, 0, sizeof s1);
    memset(&s2, 0, sizeof s2);
    s1.n = cols;
    s1.k = k;
    s1.chunk = TOPK_CHUNK;
    s1.threads = gb->info->software ? 64 : 256;
    uint32_t nc = pl_topk_chunks(&s1);
    s2.n = nc * k;
    s2.k = k;
    s2.threads = pl_gpu_threads_for(s2.n, 32, 256);
    s2.stage2 = 1;
    s2.vals = vals != NULL;
    s2.softmax = softmax;
    pl_gpu_kernel *k1, *k2;
    if (nc == 1) { /* the row in one workgroup: no merge stage */
        s1.direct = 1, s1.vals = vals != NULL, s1.softmax = softmax;
        if (pl_gpu_get_kernel(gb, F_TOPK, &s1, sizeof s1, (pl_gpu_gen_fn)pl_wgsl_topk, "top-k",
                              &k1) != PL_OK)
            return PL_ERR;
        pl_gpu_ref r[4];
        int n = 0;
        r[n++] = pl_gpu_at(x);
        r[n++] = pl_gpu_at(ids);
        if (vals) r[n++] = pl_gpu_at(vals);
        if (pl_gpu_args_ref(gb, (pl_gpu_args){{row0, rows, dst0}}, &r[n++]) != PL_OK) return PL_ERR;
        return pl_gpu_run(gb, k1, r, n, rows);
    }
    if (pl_gpu_get_kernel(gb, F_TOPK, &s1, sizeof s1, (pl_gpu_gen_fn)pl_wgsl_topk, "top-k", &k1) !=
            PL_OK ||
        pl_gpu_get_kernel(gb, F_TOPK, &s2, sizeof s2, (pl_gpu_gen_fn)pl_wgsl_topk, "top-k merge",
                          &k2) != PL_OK)
        return PL_ERR;
    if (pl_gpu_scratch(gb, &gb->pairs, (uint64_t)rows * nc * k * 8, "top-k pairs") != PL_OK)
        return PL_ERR;
    pl_gpu_ref r1[3] = {pl_gpu_at(x), pl_gpu_whole(gb->pairs), {0}};
    if (pl_gpu_args_ref(gb, (pl_gpu_args){{row0, rows}}, &r1[2]) != PL_OK) return PL_ERR;
    if (pl_gpu_run(gb, k1, r1, 3, rows * nc) != PL_OK) return PL_ERR;
    pl_gpu_ref r2[4];
    memset(r2, 0, sizeof r2);
    int n = 0;
    r2[n++] = pl_gpu_whole(gb->pairs);
    r2[n++] = pl_gpu_at(ids);
    if (vals) r2[n++] = pl_gpu_at(vals);
    if (pl_gpu_args_ref(gb, (pl_gpu_args){{dst0, rows}}, &r2[n++]) != PL_OK) return PL_ERR;
    return pl_gpu_run(gb, k2, r2, n, rows);
}

static pl_status enc_embed(gpu_backend *gb, const op *o) {
    const gbuf *t = o->a;
    pl_embed_params p;
    memset(&p, 0, sizeof p);
    p.type = t->wt;
    p.rows = (uint32_t)t->h.ne1;
    p.cols = (uint32_t)t->h.ne0;
    p.threads = pl_gpu_threads_for(p.cols, 32, 256);
    p.parts = t->parts;
    p.rows_per_part = t->parts > 1 ? t->rows_per_part : 0;
    pl_gpu_kernel *k;
    if (pl_gpu_get_kernel(gb, F_EMBED, &p, sizeof p, (pl_gpu_gen_fn)pl_wgsl_embed, "embed", &k) !=
        PL_OK)
        return PL_ERR;
    pl_gpu_ref refs[BIND_MAX];
    memset(refs, 0, sizeof refs);
    int n = 0;
    refs[n++] = pl_gpu_at(o->b);
    refs[n++] = pl_gpu_at(o->out);
    for (uint32_t q = 0; q < t->parts; q++) {
        refs[n++] = pl_gpu_whole(t->q[q]);
        if (t->s[q]) refs[n++] = pl_gpu_whole(t->s[q]);
    }
    if (pl_gpu_args_ref(gb, (pl_gpu_args){{(uint32_t)o->n}}, &refs[n++]) != PL_OK) return PL_ERR;
    return pl_gpu_run(gb, k, refs, n, (uint32_t)o->n);
}

static pl_status enc_ew(gpu_backend *gb, const op *o) {
    pl_ew_params p;
    memset(&p, 0, sizeof p);
    p.op = o->kind == OP_ADD ? PL_EW_ADD : PL_EW_SWIGLU;
    p.alias = o->a == o->b     ? (o->out == o->a ? 3 : -1)
              : o->out == o->a ? 1
              : o->out == o->b ? 2
                               : 0;
    p.threads = 256;
    if (p.alias < 0) { /* a == b but out apart: read the one buffer twice, no writes to it */
        p.alias = 0;
    }
    pl_gpu_kernel *k;
    if (pl_gpu_get_kernel(gb, F_EW, &p, sizeof p, (pl_gpu_gen_fn)pl_wgsl_ew, "element-wise", &k) !=
        PL_OK)
        return PL_ERR;
    pl_gpu_ref refs[4];
    memset(refs, 0, sizeof refs);
    int n = 0;
    refs[n++] = pl_gpu_at(o->a);
    if (p.alias != 3) refs[n++] = pl_gpu_at(o->b);
    if (p.alias == 0) refs[n++] = pl_gpu_at(o->out);
    if (pl_gpu_args_ref(gb, (pl_gpu_args){{(uint32_t)o->count}}, &refs[n++]) != PL_OK)
        return PL_ERR;
    return pl_gpu_run(gb, k, refs, n, (uint32_t)((o->count + p.threads - 1) / p.threads));
}

pl_status pl_gpu_encode_op(gpu_backend *gb, op *o) {
    switch (o->kind) {
    case OP_EMBED: return o->n ? enc_embed(gb, o) : PL_OK;
    case OP_NORM: return o->rows ? enc_norm(gb, o) : PL_OK;
    case OP_MATMUL: return o->n ? enc_matmul(gb, o) : PL_OK;
    case OP_ADD:
    case OP_SWIGLU: return o->count ? enc_ew(gb, o) : PL_OK;
    case OP_ROPE: return o->n ? enc_rope(gb, o) : PL_OK;
    case OP_STORE:
        if (o->seq) return o->n ? enc_store_cols(gb, o) : PL_OK;
        if (o->out->h.type == PL_TYPE_Q8_0) return enc_store_q8(gb, o);
        return enc_copy(gb, o->a, 0, o->out, (uint64_t)o->pos0 * (uint64_t)o->out->h.ne0,
                        (uint64_t)o->n * (uint64_t)o->out->h.ne0);
    case OP_ATTN: return o->n ? enc_attn(gb, o) : PL_OK;
    case OP_ARGMAX:
        return o->rows ? pl_gpu_enc_topk(gb, o->a, (uint32_t)o->a->h.ne0, 0, (uint32_t)o->rows, 1,
                                         o->out, (uint32_t)o->dst0, NULL, false)
                       : PL_OK;
    case OP_TOPK:
        return pl_gpu_enc_topk(gb, o->a, (uint32_t)o->a->h.ne0, (uint32_t)o->rows, 1,
                               (uint32_t)o->k, o->out, 0, o->vals, false);
    case OP_COPY:
        return enc_copy(gb, o->a, (uint64_t)o->src0, o->out, (uint64_t)o->dst0, (uint64_t)o->count);
    case OP_SOFTMAX:
    case OP_TOPK_ROWS:
    case OP_MATMUL_ID:
    case OP_MOE_COMBINE: return pl_gpu_encode_moe(gb, o);
    case OP_SIGMOID_MUL:
    case OP_SSM_CONV:
    case OP_DELTA_RULE: return pl_gpu_encode_ssm(gb, o);
    }
    return pl_fail(PL_ERR, "GPU: unknown op %d", (int)o->kind);
}

/* Seconds to record, submit and finish n dispatches of k in one command buffer; -1 on error. */
static double timed_dispatches(gpu_backend *gb, const pl_gpu_kernel *k, const pl_gpu_bind *b,
                               uint32_t groups, int n) {
    double t0 = pl_gpu_now();
    pl_gpu_begin(gb->g);
    for (int i = 0; i < n; i++) pl_gpu_dispatch(gb->g, k, b, groups);
    if (pl_gpu_submit(gb->g) != PL_OK || pl_gpu_finish(gb->g) != PL_OK) return -1;
    return pl_gpu_now() - t0;
}

double pl_gpu_time_gemv(gpu_backend *gb, const gbuf *w, gemv_tune t, pl_gpu_buf *x, pl_gpu_buf *y) {
    pl_gemv_params p;
    pl_gpu_gemv_base(gb, w, &t, &p);
    p.parts = 1;
    pl_gpu_kernel *k;
    if (pl_gpu_get_kernel(gb, F_GEMV, &p, sizeof p, (pl_gpu_gen_fn)pl_wgsl_gemv, "gemv", &k) !=
        PL_OK)
        return -1;
    pl_gpu_args a = {{1}};
    if (pl_gpu_write(gb->g, gb->args, 0, &a, sizeof a) != PL_OK)
        return -1; /* slot 0: nothing is recorded */
    pl_gpu_ref refs[5] = {
        pl_gpu_whole(x), pl_gpu_whole(y), pl_gpu_whole(w->q[0]), pl_gpu_whole(w->s[0]), {0}};
    int n = w->s[0] ? 4 : 3;
    refs[n++] = (pl_gpu_ref){gb->args, 0, sizeof a};
    pl_gpu_bind *b = NULL;
    if (pl_gpu_bind_new(gb->g, k, refs, n, &b) != PL_OK) return -1;
    /* The GPU's clocks drop when it idles (seen on the H200: the first candidates of a
     * shape measured 2-4x slow), so it runs this kernel for ~20 ms first; then each run
     * times 60 and 10 GEMVs in one command buffer each, and their difference is 50 GEMVs
     * without the fixed cost of a submit and a wait (gemv_lab's method). */
    double runs[5] = {0}, w0 = pl_gpu_now();
    int ok = 1;
    while (ok && pl_gpu_now() - w0 < 0.02)
        ok = timed_dispatches(gb, k, b, pl_gemv_groups(&p), 10) >= 0;
    for (int r = 0; ok && r < 5; r++) {
        double t10 = timed_dispatches(gb, k, b, pl_gemv_groups(&p), 10);
        double t60 = timed_dispatches(gb, k, b, pl_gemv_groups(&p), 60);
        ok = t10 >= 0 && t60 >= 0;
        runs[r] = (t60 - t10) / 50;
    }
    pl_gpu_bind_free(b);
    if (!ok) return -1;
    for (int i = 0; i < 5; i++) /* the median */
        for (int j = i + 1; j < 5; j++)
            if (runs[j] < runs[i]) {
                double tmp = runs[i];
                runs[i] = runs[j], runs[j] = tmp;
            }
    return runs[2];
}
