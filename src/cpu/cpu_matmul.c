/* cpu_matmul.c - out[i, :] (+)= W x[i, :] + bias on the CPU, for a weight of any readable
 * format, and the gathered expert matmul (matmul_id) built on the same kernels.
 *
 * Each weight row is dequantised once into float and then dotted with every activation row
 * of the batch, so a prompt's tokens share the dequantisation. The output rows are split
 * between the pool's threads in chunks; each output value is computed by exactly one
 * thread in one fixed order, so results do not depend on the thread count.
 *
 * With act_q8 (backend.h) and a Q4_0/Q8_0 weight, the activation rows are quantised to Q8_0
 * blocks once, and each block product is an integer dot scaled by the two f16 scales,
 * summed in block order: llama.cpp's arithmetic, and no dequantisation at all. The work
 * goes in tiles (cpu_qdot.c): 8 weight rows x 1 activation row for one row (decode, the
 * next tile's rows prefetched), 2 x 4 for a batch, so each weight block is unpacked once
 * for 4 activation rows and each activation block loaded once for 2 weight rows;
 * bit-identical to the one-row dot whatever the tile. A Q4_0 or Q8_0 weight laid out 8 rows
 * interleaved (cpu_x8.c: copied weights on AVX2) takes that layout's tile instead, 8 rows
 * x 1-4 activation rows, for each whole group of 8 (other rows are rebuilt in the GGUF
 * layout a tile at a time). Batches of GEMM_MIN_N rows or more
 * (prefill) take the GEMM instead where AVX2 or NEON (arm64) is present (mm_run_gemm): the
 * quantised rows are packed 8 columns to a group, each item's 4-row weight tiles unpacked
 * once and run past a column range of groups (at least GEMM_GROUPS, as many as half the L2
 * holds), the items split in row x column ranges; the same
 * bits again. The activation rows are quantised (and packed) by the pool's threads.
 *
 * With act_q8 and a Q4_1/Q5_0/Q5_1/IQ4_NL/IQ4_XS weight, the same quantised rows meet the
 * tiles of cpu_qdot_more.c (the same shapes); from GEMM_MIN_N rows Q5_0/IQ4_NL/IQ4_XS take
 * the GEMM above, their int8 levels unpacked into Q8_0's layout, and Q4_1/Q5_1 (whose min
 * term that GEMM lacks) stay on the 2 x 4 tiles.
 *
 * With act_q8 and a Q4_K/Q5_K/Q6_K weight, the activation rows are quantised per 256 values
 * (pl_cpu_quant_act_k) and each super-block product is an integer dot (cpu_kdot.c): one
 * weight row x 1 or 4 activation rows (decode, short batches), or from GEMM_MIN_N rows with
 * AVX2 or NEON the K-quants' GEMM (4 weight rows x 16 columns) on the same 2-D split.
 *
 * matmul_id groups the (token, slot) pairs by expert and runs each used expert's rows as one
 * matmul over the rows of x routed to it (read and written through row maps), so an expert
 * chosen by several tokens is dequantised once and an expert chosen by none is never read.
 *
 * Fused (pl_be_fuse's QKV and GATE_UP: the model says the next matmuls read one x): such
 * matmuls of a few rows (no GEMM) are held back (cpu_fused) and run as one pool job when a
 * matmul of another x, another op or a read comes (pl_cpu_flush, which every other method
 * calls first, cpu.c), x quantised once for all of them. At 16 threads a decode step's
 * hand-overs and the caller's work between them were a third of its time. Each output row
 * is computed as it would be alone, so the same bits. */
#include <stdatomic.h>
#include <stdlib.h>

#include "cpu_internal.h"

typedef struct {
    cpu_backend *c; /* (its per-thread scratch) */
    const pl_buf *w, *x, *bias;
    const int8_t *xq;  /* act_q8: the quantised activation rows, and their block scales */
    const float *xd;   /* (the f16 scales widened once, not once per weight row) */
    const int32_t *xs; /* and each block's sum of quants (Q4_0's AVX2 tile) */
    /* act_q8 for K-quants: the rows quantised per 256 values (pl_cpu_quant_act_k): quants,
     * scales, sums of 16 */
    const int8_t *kq;
    const float *kd;
    const int16_t *ks;
    /* Row maps (matmul_id): batch row i reads x row xrow[i] and writes out row orow[i];
     * NULL: row i. */
    const int64_t *xrow, *orow;
    /* The prefill GEMM's packed activations (pl_cpu_gemm_pack; NULL: the tiles above), in
     * groups of 8 columns, the last one padded with its last column; items are (row range,
     * column range): col_items column ranges of col_groups groups for each row range. */
    int8_t *pq;
    float *pd;
    int32_t *ps;
    int16_t *kps; /* (the K-quants' GEMM: pl_cpu_kgemm_pack's sums; pq and pd as above) */
    int64_t groups, col_items, col_groups; /* col_groups: groups a column range */
    pl_buf *out;
    int64_t n, rows_per_item;
    bool accumulate;
    atomic_int failed; /* set if a dequantisation failed (cannot happen after the wrapper checks) */
} mm_job;

/* Weight rows are taken MM_BLOCK at a time: the block's dequantised rows stay in cache
 * while every activation row of the batch passes over them once. */
#define MM_BLOCK 8

static inline int64_t x_row(const mm_job *j, int64_t i) {
    return j->xrow ? j->xrow[i] : i;
}
static inline int64_t out_row(const mm_job *j, int64_t i) {
    return j->orow ? j->orow[i] : i;
}

/* The act_q8 path: rows r0..r1 of a Q4_0/Q8_0 weight against every quantised row, in
 * tiles (pl_cpu_qdot_tile): 8 weight rows x 1 activation row for a single row (decode), 2 x 4
 * for a batch, the batch taken MM_COLS activation rows at a time so those stay in cache
 * while the item's weight rows pass over them. */
#define MM_COLS 16

/* The GEMM (mm_run_gemm) takes batches of at least GEMM_MIN_N rows, at least GEMM_GROUPS
 * groups of 8 columns an item. */
#define GEMM_MIN_N  8
#define GEMM_GROUPS 16 /* 8 before the AVX-512 tiles: fewer unpacks of each weight tile */
/* What the act_q8 items read of their job. */
typedef struct {
    int64_t k, n_out, nb, row_bytes;
    int q4;
    uint32_t more; /* a type of pl_cpu_qdot_more_tile, or 0 (Q4_0/Q8_0: pl_cpu_qdot_tile) */
    const unsigned char *wdata;
    const float *bias;
    float *out;
} q8_view;

static q8_view q8_view_of(const mm_job *j) {
    int64_t k = j->w->ne0;
    return (q8_view){.k = k,
                     .n_out = j->w->ne1,
                     .nb = k / 32,
                     .row_bytes = pl_row_size(j->w->type, k),
                     .q4 = j->w->type == PL_TYPE_Q4_0,
                     .more = pl_cpu_qdot_more_type(j->w->type) ? j->w->type : 0,
                     .wdata = vptr(j->w),
                     .bias = j->bias ? fptr(j->bias) : NULL,
                     .out = fptr(j->out)};
}

/* Output value v (+ the bias of weight row r) of batch row i into out, or added to it. */
static inline void put_out(const mm_job *j, const q8_view *m, int64_t i, int64_t r, float v) {
    float *o = m->out + out_row(j, i) * m->n_out + r;
    v += m->bias ? m->bias[r] : 0.0f;
    *o = j->accumulate ? *o + v : v;
}

/* A GEMM tile's outputs (pl_cpu_gemm_tile's layout: sums[(t / 8) * 32 + a * 8 + t % 8] for
 * column t of nc and weight row a of nr) for batch rows i0.. and weight rows r..: each
 * value as put_out makes it. Without a row map, a column's 4 outputs are contiguous and
 * written together, the bias and accumulate choices made once a tile rather than per
 * value (the bias, or 0: v + 0.0f as put_out, which makes -0 +0). */
static inline void put_tile(const mm_job *j, const q8_view *m, int64_t i0, int nc, int64_t r,
                            int nr, const float *sums) {
    if (j->orow || nr < 4) {
        for (int t = 0; t < nc; t++)
            for (int a = 0; a < nr; a++)
                put_out(j, m, i0 + t, r + a, sums[(t / 8) * 32 + a * 8 + t % 8]);
        return;
    }
    float b[4] = {0, 0, 0, 0};
    if (m->bias) memcpy(b, m->bias + r, sizeof b);
    float *o = m->out + i0 * m->n_out + r;
    for (int t = 0; t < nc; t++, o += m->n_out) {
        const float *s = sums + (t / 8) * 32 + t % 8;
        float v[4] = {s[0] + b[0], s[8] + b[1], s[16] + b[2], s[24] + b[3]};
        if (j->accumulate)
            for (int a = 0; a < 4; a++) o[a] = o[a] + v[a];
        else
            memcpy(o, v, sizeof v);
    }
}

/* The quantised activation rows i..i+nc-1 (nc <= 4) as the tiles take them. */
typedef struct {
    int nc;
    const int8_t *y[4];
    const float *yd[4];
    const int32_t *ys[4];
} q8_cols;

static q8_cols q8_cols_of(const mm_job *j, int64_t i, int nc) {
    int64_t k = j->w->ne0, nb = k / 32;
    q8_cols c = {.nc = nc};
    for (int t = 0; t < nc; t++) {
        int64_t xi = x_row(j, i + t);
        c.y[t] = j->xq + xi * k, c.yd[t] = j->xd + xi * nb, c.ys[t] = j->xs + xi * nb;
    }
    return c;
}

/* A tile's sums[a * nc + t] (weight row r + a, batch row i + t) out. */
static void put_rows(const mm_job *j, const q8_view *m, int64_t i, int nc, int64_t r, int nr,
                     const float *sums) {
    for (int a = 0; a < nr; a++)
        for (int t = 0; t < nc; t++) put_out(j, m, i + t, r + a, sums[a * nc + t]);
}

static void mm_item_q8(mm_job *j, int64_t r0, int64_t r1, cpu_scratch *scratch) {
    q8_view m = q8_view_of(j);
    int64_t nb = m.nb, row_bytes = m.row_bytes;
    const unsigned char *wdata = m.wdata;
    int q4 = m.q4;
    int R = j->n == 1 ? 8 : 2, C = j->n == 1 ? 1 : 4;
    /* interleaved Q4_0/Q8_0 (cpu_x8.c): whole groups take its 8-row tile, any other rows are
     * rebuilt in the GGUF layout for the tiles below */
    const cpu_buf *wb = (const cpu_buf *)j->w;
    unsigned char *tmp = NULL;
    if (wb->x8_rows && !(tmp = pl_cpu_scratch(scratch, (size_t)(8 * row_bytes)))) {
        atomic_store(&j->failed, 1);
        return;
    }
    for (int64_t c0 = 0; c0 < j->n; c0 += MM_COLS) {
        int64_t c1 = c0 + MM_COLS < j->n ? c0 + MM_COLS : j->n;
        for (int64_t r = r0, step; r < r1; r += step) {
            if (wb->x8_rows && (r + wb->x8_off) % 8 == 0 && r + 8 <= wb->x8_rows && r + 8 <= r1) {
                step = 8;
                for (int64_t i = c0; i < c1; i += 4) {
                    q8_cols cl = q8_cols_of(j, i, c1 - i < 4 ? (int)(c1 - i) : 4);
                    float sums[32];
                    pl_x8_tile(q4, wdata + r * row_bytes, cl.nc, cl.y, cl.yd, cl.ys, nb, sums);
                    put_rows(j, &m, i, cl.nc, r, 8, sums);
                }
                continue;
            }
            step = R;
            int nr = r1 - r < R ? (int)(r1 - r) : R;
            const unsigned char *w[8];
            for (int t = 0; t < nr; t++)
                w[t] = tmp ? pl_cpu_wrow(j->w, r + t, tmp + t * row_bytes)
                           : wdata + (r + t) * row_bytes;
            for (int64_t i = c0; i < c1; i += C) {
                q8_cols cl = q8_cols_of(j, i, c1 - i < C ? (int)(c1 - i) : C);
                float sums[8];
                /* decode: the next tile's rows are prefetched (those of this item only) */
                const unsigned char *pf =
                    j->n == 1 && !tmp && r + 2 * R <= r1 ? w[0] + R * row_bytes : NULL;
                if (m.more)
                    pl_cpu_qdot_more_tile(m.more, nr, cl.nc, w, cl.y, cl.yd, cl.ys, nb, pf, sums);
                else
                    pl_cpu_qdot_tile(q4, nr, cl.nc, w, cl.y, cl.yd, cl.ys, nb, pf, sums);
                put_rows(j, &m, i, cl.nc, r, nr, sums);
            }
        }
    }
}

/* The K-quants' act_q8 path (pl_cpu_kdot): rows r0..r1, each against the batch 4 activation
 * rows at a time, MM_COLS rows a pass so they stay in cache while the item's weight rows
 * pass over them. */
static void mm_item_k(const mm_job *j, int64_t r0, int64_t r1) {
    int64_t k = j->w->ne0, nsb = k / 256, row_bytes = pl_row_size(j->w->type, k);
    q8_view m = q8_view_of(j);
    if (j->n == 1) { /* decode: tiles of 4 weight rows */
        int64_t xi = x_row(j, 0);
        const int8_t *y = j->kq + xi * k;
        const float *yd = j->kd + xi * nsb;
        const int16_t *ys = j->ks + xi * nsb * 16;
        for (int64_t r = r0; r < r1; r += 4) {
            int nr = r1 - r < 4 ? (int)(r1 - r) : 4;
            const unsigned char *w[4];
            for (int a = 0; a < nr; a++) w[a] = m.wdata + (r + a) * row_bytes;
            float sums[4];
            pl_cpu_kdot_rows(j->w->type, nr, w, y, yd, ys, nsb, sums);
            for (int a = 0; a < nr; a++) put_out(j, &m, 0, r + a, sums[a]);
        }
        return;
    }
    for (int64_t c0 = 0; c0 < j->n; c0 += MM_COLS) {
        int64_t c1 = c0 + MM_COLS < j->n ? c0 + MM_COLS : j->n;
        for (int64_t r = r0; r < r1; r++) {
            const unsigned char *w = m.wdata + r * row_bytes;
            for (int64_t i = c0; i < c1; i += 4) {
                int nc = c1 - i < 4 ? (int)(c1 - i) : 4;
                const int8_t *y[4];
                const float *yd[4];
                const int16_t *ys[4];
                for (int t = 0; t < nc; t++) {
                    int64_t xi = x_row(j, i + t);
                    y[t] = j->kq + xi * k, yd[t] = j->kd + xi * nsb, ys[t] = j->ks + xi * nsb * 16;
                }
                float sums[4];
                pl_cpu_kdot(j->w->type, w, nc, y, yd, ys, nsb, sums);
                for (int t = 0; t < nc; t++) put_out(j, &m, i + t, r, sums[t]);
            }
        }
    }
}

/* The GEMM: rows r0..r1 against column groups g0..g1, 4 weight rows (unpacked once) x 8
 * columns a tile. */
static void mm_item_gemm(mm_job *j, int64_t r0, int64_t r1, int64_t g0, int64_t g1,
                         cpu_scratch *scratch) {
    q8_view m = q8_view_of(j);
    int64_t nb = m.nb;
    const cpu_buf *wb = (const cpu_buf *)j->w;
    /* the unpacked tile, then (interleaved rows outside whole half-groups) 4 rows rebuilt in
     * the GGUF layout */
    size_t head = (size_t)nb * 4 * (64 + sizeof(float));
    unsigned char *wu = pl_cpu_scratch(scratch, head + (wb->x8_rows ? 4 * (size_t)m.row_bytes : 0));
    if (!wu) {
        atomic_store(&j->failed, 1);
        return;
    }
    float *wd = (float *)(wu + nb * 4 * 64);
    for (int64_t r = r0; r < r1; r += 4) {
        int nr = r1 - r < 4 ? (int)(r1 - r) : 4;
        const unsigned char *w[4], *grp = NULL;
        int lane = 0;
        if (wb->x8_rows && nr == 4 && r + 4 <= wb->x8_rows &&
            !pl_cpu_wrow_at(j->w, r, &grp, &lane) && lane % 4 == 0) {
            pl_x8_gemm_unpack(m.q4, grp, lane / 4, nb, wu, wd); /* a half-group */
        } else {
            for (int t = 0; t < nr; t++)
                w[t] = wb->x8_rows ? pl_cpu_wrow(j->w, r + t, wu + head + t * m.row_bytes)
                                   : m.wdata + (r + t) * m.row_bytes;
            if (!m.more || !pl_cpu_qdot_more_unpack(m.more, nr, w, nb, wu, wd))
                pl_cpu_gemm_unpack(m.q4, nr, w, nb, wu, wd);
        }
        for (int64_t g = g0; g < g1; g += 2) {
            float sums[64];
            int ng = g + 1 < g1 ? 2 : 1;
            pl_cpu_gemm_tile(m.q4, ng, wu, wd, nb, j->pq + g * nb * 256, j->pd + g * nb * 8,
                             j->ps + g * nb * 8, sums);
            /* column g * 8 + t: its nr outputs are contiguous */
            int nc = j->n - g * 8 < 8 * ng ? (int)(j->n - g * 8) : 8 * ng;
            put_tile(j, &m, g * 8, nc, r, nr, sums);
        }
    }
}

/* The K-quants' GEMM: as mm_item_gemm, on pl_cpu_kgemm_*'s layouts. */
static void mm_item_kgemm(mm_job *j, int64_t r0, int64_t r1, int64_t g0, int64_t g1,
                          cpu_scratch *scratch) {
    q8_view m = q8_view_of(j);
    int64_t nsb = m.k / 256;
    uint32_t t = j->w->type;
    uint8_t *wq =
        pl_cpu_scratch(scratch, (size_t)nsb * 4 * (256 + 16 * sizeof(int16_t) + 2 * sizeof(float)));
    if (!wq) {
        atomic_store(&j->failed, 1);
        return;
    }
    float *wd = (float *)(wq + nsb * 4 * 256);
    int16_t *wsc = (int16_t *)(wd + nsb * 4 * 2);
    for (int64_t r = r0; r < r1; r += 4) {
        int nr = r1 - r < 4 ? (int)(r1 - r) : 4;
        const unsigned char *w[4];
        for (int a = 0; a < nr; a++) w[a] = m.wdata + (r + a) * m.row_bytes;
        pl_cpu_kgemm_unpack(t, nr, w, nsb, wq, wsc, wd);
        for (int64_t g = g0, ng; g < g1; g += ng) {
            float sums[128];
            ng = g1 - g >= 4 ? 4 : g1 - g >= 2 ? 2 : 1;
            pl_cpu_kgemm_tile(t, (int)ng, wq, wsc, wd, nsb, j->pq + g * nsb * 2048,
                              j->pd + g * nsb * 8, j->kps + g * nsb * 128, sums);
            int nc = j->n - g * 8 < 8 * ng ? (int)(j->n - g * 8) : 8 * ng;
            put_tile(j, &m, g * 8, nc, r, nr, sums);
        }
    }
}

static void mm_item(void *ctx, int64_t item, int thread) {
    mm_job *j = ctx;
    cpu_scratch *scratch = &j->c->per_thread[thread];
    if (j->pq) {
        int64_t rc = item / j->col_items, cc = item % j->col_items;
        int64_t r0 = rc * j->rows_per_item, r1 = r0 + j->rows_per_item;
        int64_t g0 = cc * j->col_groups, g1 = g0 + j->col_groups;
        (j->kq ? mm_item_kgemm : mm_item_gemm)(j, r0, r1 < j->w->ne1 ? r1 : j->w->ne1, g0,
                                               g1 < j->groups ? g1 : j->groups, scratch);
        return;
    }
    if (j->xq || j->kq) {
        int64_t r0 = item * j->rows_per_item, r1 = r0 + j->rows_per_item;
        if (j->xq)
            mm_item_q8(j, r0, r1 < j->w->ne1 ? r1 : j->w->ne1, scratch);
        else
            mm_item_k(j, r0, r1 < j->w->ne1 ? r1 : j->w->ne1);
        return;
    }
    int64_t k = j->w->ne0, n_out = j->w->ne1;
    int64_t r0 = item * j->rows_per_item, r1 = r0 + j->rows_per_item;
    if (r1 > n_out) r1 = n_out;
    const float *x = fptr(j->x), *bias = j->bias ? fptr(j->bias) : NULL;
    float *out = fptr(j->out);
    float *tmp = NULL;
    if (j->w->type != PL_TYPE_F32 &&
        !(tmp = pl_cpu_scratch(scratch, (size_t)(k * MM_BLOCK) * sizeof *tmp))) {
        atomic_store(&j->failed, 1);
        return;
    }
    const float *rows[MM_BLOCK];
    for (int64_t rb = r0; rb < r1; rb += MM_BLOCK) {
        int nb = r1 - rb < MM_BLOCK ? (int)(r1 - rb) : MM_BLOCK;
        for (int b = 0; b < nb; b++) {
            if (!tmp) { /* F32: the rows as they lie */
                rows[b] = fptr(j->w) + (rb + b) * k;
                continue;
            }
            if (pl_cpu_dequant_wrow(j->w, rb + b, tmp + b * k)) {
                atomic_store(&j->failed, 1);
                return;
            }
            rows[b] = tmp + b * k;
        }
        for (int64_t i = 0; i < j->n; i++) {
            const float *xi = x + x_row(j, i) * k;
            float *o = out + out_row(j, i) * n_out + rb;
            for (int b = 0; b < nb; b++) {
                float v = pl_cpu_dot(rows[b], xi, k) + (bias ? bias[rb + b] : 0.0f);
                o[b] = j->accumulate ? o[b] + v : v;
            }
        }
    }
}

/* act_q8 (backend.h): Q4_0/Q8_0 weights and those of pl_cpu_qdot_more_type (Q4_1, Q5_0,
 * Q5_1, IQ4_NL, IQ4_XS) take Q8_0-quantised activations (1), Q4_K, Q5_K
 * and Q6_K weights activations quantised per 256 values (2); others none (0). */
static int wants_q8(const pl_backend *be, const pl_buf *w) {
    if (!be->act_q8) return 0;
    if (w->type == PL_TYPE_Q4_0 || w->type == PL_TYPE_Q8_0 || pl_cpu_qdot_more_type(w->type))
        return 1;
    return pl_cpu_kdot_type(w->type) ? 2 : 0;
}

/* The act_q8 activations: the first n rows of x (k values each) quantised to Q8_0 blocks,
 * q [n*k], the block scales widened to float, d [n*k/32], and each block's sum of its
 * quants, s [n*k/32]; or (kind 2) per 256 values, d [n*k/256] and the sums of 16, s16
 * [n*k/16]; in the backend's act scratch. */
typedef struct {
    int8_t *q;
    float *d;
    int32_t *s;
    int16_t *s16;
} q8act;

/* a's quantised rows as j's activations */
static void q8act_use(mm_job *j, const q8act *a) {
    if (a->s16)
        j->kq = a->q, j->kd = a->d, j->ks = a->s16;
    else
        j->xq = a->q, j->xd = a->d, j->xs = a->s;
}

/* Rows of quantise_rows' job, a pool item each. */
typedef struct {
    const float *x;
    int64_t k;
    q8act *a;
} quant_job;

static void quant_item(void *ctx, int64_t i, int thread) {
    (void)thread;
    const quant_job *j = ctx;
    const q8act *a = j->a;
    const float *x = j->x + i * j->k;
    if (a->s16) {
        int64_t nsb = j->k / 256;
        pl_cpu_quant_act_k(x, j->k, a->q + i * j->k, a->d + i * nsb, a->s16 + i * nsb * 16);
        return;
    }
    int64_t nb = j->k / 32;
    pl_cpu_quant_act(x, j->k, a->q + i * j->k, a->d + i * nb, a->s + i * nb);
}

/* kind: as wants_q8 says (1 or 2). */
static pl_status quantise_rows(cpu_backend *c, const pl_buf *x, int64_t n, int64_t k, int kind,
                               q8act *a) {
    int64_t nbt = n * (k / 32), nst = n * (k / 256);
    /* floats and sums first (aligned), then the quants */
    size_t head = kind == 2 ? (size_t)nst * (sizeof(float) + 16 * sizeof(int16_t))
                            : (size_t)nbt * (sizeof(float) + sizeof(int32_t));
    char *mem = pl_cpu_scratch(&c->act, head + (size_t)(n * k) + 1);
    *a = (q8act){0};
    if (!mem) return pl_fail(PL_ERR_NOMEM, "matmul: out of memory");
    a->d = (float *)mem;
    if (kind == 2) {
        a->s16 = (int16_t *)(a->d + nst);
        a->q = (int8_t *)(a->s16 + nst * 16);
    } else {
        a->s = (int32_t *)(a->d + nbt);
        a->q = (int8_t *)(a->s + nbt);
    }
    quant_job j = {fptr(x), k, a};
    if (n * k < CPU_PAR_MIN_WORK) /* decode: not worth waking the pool */
        for (int64_t i = 0; i < n; i++) quant_item(&j, i, 0);
    else
        pl_pool_run(c->pool, n, quant_item, &j);
    return PL_OK;
}

/* One group of 8 columns of j's quantised rows into the GEMM's layout. */
static void pack_item(void *ctx, int64_t g, int thread) {
    (void)thread;
    mm_job *j = ctx;
    int64_t k = j->w->ne0, nb = k / 32;
    if (j->kq) {
        int64_t nsb = k / 256;
        const int8_t *y[8];
        const float *yd[8];
        const int16_t *ys[8];
        for (int c = 0; c < 8; c++) {
            int64_t i = g * 8 + c < j->n ? g * 8 + c : j->n - 1, xi = x_row(j, i);
            y[c] = j->kq + xi * k, yd[c] = j->kd + xi * nsb, ys[c] = j->ks + xi * nsb * 16;
        }
        pl_cpu_kgemm_pack(y, yd, ys, nsb, j->pq + g * nsb * 2048, j->pd + g * nsb * 8,
                          j->kps + g * nsb * 128);
        return;
    }
    const int8_t *y[8];
    const float *yd[8];
    const int32_t *ys[8];
    for (int c = 0; c < 8; c++) {
        int64_t i = g * 8 + c < j->n ? g * 8 + c : j->n - 1, xi = x_row(j, i);
        y[c] = j->xq + xi * k, yd[c] = j->xd + xi * nb, ys[c] = j->xs + xi * nb;
    }
    pl_cpu_gemm_pack(y, yd, ys, nb, j->pq + g * nb * 256, j->pd + g * nb * 8, j->ps + g * nb * 8);
}

/* The GEMM for j if it pays (a batch of at least GEMM_MIN_N rows, AVX2 or NEON) and its
 * packed activations fit in memory (else the tiles do the job); run, true, or false. The
 * work is split in 2-D: column ranges of col_groups groups (their packed activations stay
 * in cache while the range's weight rows pass) x row ranges of whole 4-row tiles, about 4 x
 * threads items in all. */
static bool mm_run_gemm(cpu_backend *c, mm_job *j) {
    if (j->n < GEMM_MIN_N || !(pl_cpu_have_avx2() || pl_cpu_neon_level())) return false;
    if (j->xq && pl_cpu_qdot_more_type(j->w->type) && !pl_cpu_qdot_more_gemm_type(j->w->type))
        return false; /* Q4_1, Q5_1: the tiles */
    int64_t nb = j->w->ne0 / 32, n_out = j->w->ne1;
    j->groups = (j->n + 7) / 8;
    /* per group and 32 values: 256 quant bytes; and scales and sums per block (Q4_0/Q8_0)
     * or per 256 values (K-quants: a float and 128 int16) */
    size_t per = j->kq ? 256 + (8 * sizeof(float) + 128 * sizeof(int16_t)) / 8
                       : 256 + 8 * sizeof(float) + 8 * sizeof(int32_t);
    char *mem = pl_cpu_scratch(&c->pack, (size_t)(j->groups * nb) * per);
    if (!mem) return false;
    j->pd = (float *)mem;
    if (j->kq) {
        j->kps = (int16_t *)(j->pd + j->groups * nb);
        j->pq = (int8_t *)(j->kps + j->groups * nb * 16);
    } else {
        j->ps = (int32_t *)(j->pd + j->groups * nb * 8);
        j->pq = (int8_t *)(j->ps + j->groups * nb * 8);
    }
    int threads = pl_pool_threads(c->pool);
    pl_pool_run(c->pool, j->groups, pack_item, j);
    /* Each column range unpacks every weight tile again: ranges as wide as half the L2
     * holds of packed activations, at least GEMM_GROUPS groups, whole pairs of groups. */
    int64_t fit = c->l2_bytes / 2 / ((int64_t)per * nb) / 2 * 2;
    j->col_groups = fit > GEMM_GROUPS ? fit : GEMM_GROUPS;
    j->col_items = (j->groups + j->col_groups - 1) / j->col_groups;
    int64_t row_items = (4 * threads + j->col_items - 1) / j->col_items;
    if (row_items > (n_out + 3) / 4) row_items = (n_out + 3) / 4;
    j->rows_per_item = ((n_out + row_items - 1) / row_items + 3) / 4 * 4;
    row_items = (n_out + j->rows_per_item - 1) / j->rows_per_item;
    pl_pool_run(c->pool, row_items * j->col_items, mm_item, j);
    return true;
}

/* j's weight rows in items for the pool's threads (the tiles' path): j->rows_per_item set,
 * the number of items returned. */
static int64_t mm_plan(cpu_backend *c, mm_job *j) {
    int64_t n_out = j->w->ne1;
    int threads = pl_pool_threads(c->pool);
    int64_t work = j->n * n_out * j->w->ne0;
    int64_t items = work < CPU_PAR_MIN_WORK ? 1 : (int64_t)threads * 4;
    if (items > n_out) items = n_out;
    j->rows_per_item = (n_out + items - 1) / items;
    if (j->xq) j->rows_per_item = (j->rows_per_item + 7) / 8 * 8; /* whole 8-row tiles */
    if (j->kq && j->n == 1) j->rows_per_item = (j->rows_per_item + 3) / 4 * 4; /* 4-row tiles */
    return (n_out + j->rows_per_item - 1) / j->rows_per_item;
}

/* Split j's weight rows between the pool's threads and run them. */
static void mm_run(cpu_backend *c, mm_job *j) {
    if ((j->xq || j->kq) && mm_run_gemm(c, j)) return;
    pl_pool_run(c->pool, mm_plan(c, j), mm_item, j);
}

/* ---- fused matmuls (PL_FUSE_QKV, PL_FUSE_GATE_UP) ---- */

#define FUSED_MAX 4 /* QKV's three and a fourth of the same x (backend.h) */
struct cpu_fused {
    mm_job jobs[FUSED_MAX];
    int64_t first[FUSED_MAX + 1]; /* job k's items are first[k] .. first[k + 1] - 1 */
    int n;
    int kind; /* wants_q8's, of every job held */
};

static void fused_item(void *ctx, int64_t item, int thread) {
    cpu_fused *f = ctx;
    int k = 0;
    while (item >= f->first[k + 1]) k++;
    mm_item(&f->jobs[k], item - f->first[k], thread);
}

pl_status pl_cpu_flush_matmuls(cpu_backend *c) {
    cpu_fused *f = c->fused;
    if (!f || !f->n) return PL_OK;
    f->first[0] = 0;
    for (int k = 0; k < f->n; k++) f->first[k + 1] = f->first[k] + mm_plan(c, &f->jobs[k]);
    int n = f->n;
    f->n = 0; /* (whatever happens next, these are done) */
    pl_pool_run(c->pool, f->first[n], fused_item, f);
    for (int k = 0; k < n; k++)
        if (atomic_load(&f->jobs[k].failed))
            return pl_fail(PL_ERR_NOMEM, "matmul: out of memory or unreadable weights");
    return PL_OK;
}

/* The held gate (jobs[0]) and up (jobs[1]) matmuls, item by item, each item's rows then
 * through the swiglu (pl_cpu_swiglu_held). */
typedef struct {
    cpu_fused *f;
    float *out;
} swiglu_pair;

static void swiglu_pair_item(void *ctx, int64_t item, int thread) {
    const swiglu_pair *p = ctx;
    mm_job *g = &p->f->jobs[0], *u = &p->f->jobs[1];
    mm_item(g, item, thread);
    mm_item(u, item, thread);
    int64_t n_out = g->w->ne1, r0 = item * g->rows_per_item, r1 = r0 + g->rows_per_item;
    if (r1 > n_out) r1 = n_out;
    for (int64_t i = 0; i < g->n; i++)
        pl_cpu_swiglu_range(fptr(g->out) + i * n_out, fptr(u->out) + i * n_out, p->out + i * n_out,
                            r0, r1);
}

pl_status pl_cpu_swiglu_held(cpu_backend *c, const pl_buf *gate, const pl_buf *up, int64_t count,
                             pl_buf *out, bool *done) {
    *done = false;
    cpu_fused *f = c->fused;
    if (!(c->fuse & PL_FUSE_GATE_UP) || !f || f->n != 2) return PL_OK;
    mm_job *g = &f->jobs[0], *u = &f->jobs[1];
    /* the pair the model issued: gate then up, each writing its own rows (no bias, no
     * accumulation, no row maps), both of one shape and cut into the same items */
    if (g->out != gate || u->out != up || (out != gate && out != up) || g->accumulate ||
        u->accumulate || g->bias || u->bias || g->w->ne1 != u->w->ne1 ||
        count != g->n * g->w->ne1 || gate->ne0 != g->w->ne1 || up->ne0 != g->w->ne1)
        return PL_OK;
    int64_t items = mm_plan(c, g);
    if (mm_plan(c, u) != items || u->rows_per_item != g->rows_per_item) return PL_OK;
    f->n = 0; /* (whatever happens next, these are done) */
    swiglu_pair p = {f, fptr(out)};
    pl_pool_run(c->pool, items, swiglu_pair_item, &p);
    *done = true;
    c->swiglu_fused++;
    if (atomic_load(&g->failed) || atomic_load(&u->failed))
        return pl_fail(PL_ERR_NOMEM, "matmul: out of memory or unreadable weights");
    return PL_OK;
}

void pl_cpu_fused_free(cpu_backend *c) {
    free(c->fused);
    c->fused = NULL;
}

/* Whether a matmul over n rows of x into out waits for the others of its fused group (the
 * group asked for, tiles not the GEMM, x the group's, out none of theirs: the group's jobs
 * run at once, so two writing one output would race); flushes what it cannot join. */
static pl_status fused_join(cpu_backend *c, const pl_buf *x, const pl_buf *out, int64_t n, int kind,
                            bool *join) {
    *join = false;
    cpu_fused *f = c->fused;
    bool fusable = (c->fuse & (PL_FUSE_QKV | PL_FUSE_GATE_UP)) && pl_pool_threads(c->pool) > 1 &&
                   (n < GEMM_MIN_N || !kind);
    bool same_out = false;
    for (int k = 0; f && k < f->n; k++) same_out |= f->jobs[k].out == out;
    if (f && f->n &&
        (!fusable || f->jobs[0].x != x || f->jobs[0].n != n || f->kind != kind ||
         f->n == FUSED_MAX || same_out)) {
        pl_status s = pl_cpu_flush_matmuls(c);
        if (s) return s;
    }
    if (!fusable) return PL_OK;
    if (!c->fused && !(c->fused = calloc(1, sizeof *c->fused))) return PL_OK; /* (then unfused) */
    *join = true;
    return PL_OK;
}

pl_status pl_cpu_matmul(pl_backend *be, const pl_buf *w, const pl_buf *x, const pl_buf *bias,
                        int64_t n, bool accumulate, pl_buf *out) {
    mm_job j = {.c = cpu_of(be),
                .w = w,
                .x = x,
                .bias = bias,
                .out = out,
                .n = n,
                .accumulate = accumulate};
    atomic_init(&j.failed, 0);
    q8act a = {0};
    cpu_backend *c = cpu_of(be);
    int kind = wants_q8(be, w);
    bool join;
    pl_status s = pl_cpu_head_flush(c); /* (x may be a held head op's) */
    if (s) return s;
    s = fused_join(c, x, out, n, kind, &join);
    if (s) return s;
    cpu_fused *f = c->fused;
    if (join && f->n) { /* x already quantised for the group's first */
        mm_job *j0 = &f->jobs[0];
        j.xq = j0->xq, j.xd = j0->xd, j.xs = j0->xs, j.kq = j0->kq, j.kd = j0->kd, j.ks = j0->ks;
    } else if (kind) {
        s = quantise_rows(c, x, n, w->ne0, kind, &a);
        if (s) return s;
        q8act_use(&j, &a);
    }
    if (join) {
        f->kind = kind;
        f->jobs[f->n] = j; /* (its failed flag is still clear) */
        atomic_init(&f->jobs[f->n].failed, 0);
        f->n++;
        return PL_OK;
    }
    mm_run(c, &j);
    if (atomic_load(&j.failed))
        return pl_fail(PL_ERR_NOMEM, "matmul: out of memory or unreadable weights");
    return PL_OK;
}

pl_status pl_cpu_matmul_id(pl_backend *be, const pl_buf *w, int64_t n_exp, const pl_buf *x,
                           const pl_buf *ids, int64_t n, int64_t n_used, bool x_shared,
                           pl_buf *out) {
    int64_t slots = n * n_used, n_out = w->ne1 / n_exp;
    const int32_t *id = vptr(ids);
    /* Counting sort of the slots by expert: the slots of expert e are order[start[e] ..
     * start[e+1]), in slot order; xrow[] the x row each of them reads. */
    int64_t *start = calloc(2 * (size_t)n_exp + 1, sizeof *start), *fill = start + n_exp + 1;
    int64_t *order = malloc(2 * (size_t)slots * sizeof *order + 1), *xrow = order + slots;
    if (!start || !order) {
        free(start), free(order);
        return pl_fail(PL_ERR_NOMEM, "matmul_id: out of memory");
    }
    for (int64_t s = 0; s < slots; s++) {
        if (id[s] >= 0 && id[s] < n_exp)
            start[id[s] + 1]++;
        else /* no such expert: a zero row */
            memset(fptr(out) + s * n_out, 0, (size_t)n_out * sizeof(float));
    }
    for (int64_t e = 0; e < n_exp; e++) start[e + 1] += start[e];
    for (int64_t e = 0; e < n_exp; e++) fill[e] = start[e];
    for (int64_t s = 0; s < slots; s++) {
        if (id[s] < 0 || id[s] >= n_exp) continue;
        int64_t at = fill[id[s]]++;
        order[at] = s;
        xrow[at] = x_shared ? s / n_used : s;
    }
    q8act a = {0};
    pl_status st = PL_OK;
    int kind = wants_q8(be, w);
    if (kind) st = quantise_rows(cpu_of(be), x, x_shared ? n : slots, w->ne0, kind, &a);
    /* each used expert: its n_out rows of w as a view, over the rows routed to it */
    bool failed = false;
    for (int64_t e = 0; e < n_exp && !st && !failed; e++) {
        int64_t m = start[e + 1] - start[e];
        if (m == 0) continue;
        cpu_buf view = {0};
        pl_cpu_view_of((const cpu_buf *)w, e * n_out, n_out, &view);
        mm_job j = {.c = cpu_of(be), .w = &view.h, .x = x, .out = out, .n = m};
        if (kind) q8act_use(&j, &a);
        j.xrow = xrow + start[e], j.orow = order + start[e];
        atomic_init(&j.failed, 0);
        mm_run(cpu_of(be), &j);
        failed = atomic_load(&j.failed);
    }
    free(start), free(order);
    if (st) return st;
    if (failed) return pl_fail(PL_ERR_NOMEM, "matmul_id: out of memory or unreadable weights");
    return PL_OK;
}
