/* cpu.c - the CPU backend's buffers, its methods table and the element-wise ops, whose
 * rows pl_cpu_rows splits between the pool's threads (prefill's rows: on one thread these
 * ops were most of a prompt's time at 16 threads), each row computed as on one thread.
 * The matrix products live in cpu_matmul.c, attention in cpu_attention.c, the
 * mixture-of-experts ops in cpu_moe.c, the Gated DeltaNet ops in cpu_ssm.c. */
#include "cpu_internal.h"

#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- buffers ---- */

static pl_status buf_new(pl_backend *be, uint32_t type, int64_t ne0, int64_t ne1, pl_buf **out) {
    cpu_buf *b = calloc(1, sizeof *b);
    size_t bytes = (size_t)pl_row_size(type, ne0) * (size_t)ne1;
    if (type == PL_TYPE_I32) bytes = (size_t)ne0 * (size_t)ne1 * 4;
    if (!b) return pl_fail(PL_ERR_NOMEM, "out of memory");
    pl_status s = pl_cpu_buf_alloc(cpu_of(be), bytes, b);
    if (s) {
        free(b);
        return s;
    }
    b->h = (pl_buf){.be = be, .type = type, .ne0 = ne0, .ne1 = ne1};
    *out = &b->h;
    return PL_OK;
}

static pl_status buf_weight(pl_backend *be, uint32_t type, int64_t ne0, int64_t ne1,
                            const void *data, pl_buf **out) {
    cpu_buf *b = calloc(1, sizeof *b);
    if (!b) return pl_fail(PL_ERR_NOMEM, "out of memory");
    b->h = (pl_buf){.be = be, .type = type, .ne0 = ne0, .ne1 = ne1, .weight = true};
    pl_status s = pl_cpu_weight_place(cpu_of(be), b, data);
    if (s) {
        free(b);
        return s;
    }
    *out = &b->h;
    return PL_OK;
}

/* A view: the parent's bytes from row0 on, not owned. */
static pl_status buf_view(pl_backend *be, pl_buf *parent, int64_t row0, int64_t rows,
                          pl_buf **out) {
    cpu_buf *b = calloc(1, sizeof *b);
    if (!b) return pl_fail(PL_ERR_NOMEM, "out of memory");
    (void)be;
    pl_cpu_view_of((const cpu_buf *)parent, row0, rows, b);
    *out = &b->h;
    return PL_OK;
}

static void buf_free(pl_backend *be, pl_buf *h) {
    cpu_buf *b = (cpu_buf *)h;
    if (b->owned) free(b->data);
    pl_cpu_piece_release(cpu_of(be), b->piece);
    free(b);
}

static pl_status buf_write(pl_backend *be, pl_buf *dst, int64_t off, const void *src, int64_t n) {
    (void)be;
    memcpy((char *)vptr(dst) + off, src, (size_t)n);
    return PL_OK;
}

static pl_status buf_read(pl_backend *be, const pl_buf *src, int64_t off, void *dst, int64_t n) {
    (void)be;
    const cpu_buf *b = (const cpu_buf *)src;
    if (!b->x8_rows) {
        memcpy(dst, (const char *)vptr(src) + off, (size_t)n);
        return PL_OK;
    }
    /* interleaved rows: the GGUF layout the caller wrote, rebuilt a block at a time */
    int64_t row = pl_row_size(src->type, src->ne0);
    int q4 = src->type == PL_TYPE_Q4_0, bs = (int)pl_row_size(src->type, 32); /* a block */
    for (int64_t at = off; at < off + n;) {
        int64_t r = at / row, in = at % row;
        const unsigned char *g = NULL;
        int lane = 0;
        const unsigned char *p = pl_cpu_wrow_at(src, r, &g, &lane);
        unsigned char blk[34];
        int64_t len = row - in;
        if (p) {
            p += in;
        } else { /* the block holding byte `in` */
            pl_x8_block(q4, g, lane, in / bs, blk);
            p = blk + in % bs;
            len = bs - in % bs;
        }
        if (len > off + n - at) len = off + n - at;
        memcpy((char *)dst + (at - off), p, (size_t)len);
        at += len;
    }
    return PL_OK;
}

/* Nothing to wait for on the CPU: the reads one after another. */
static pl_status buf_read_many(pl_backend *be, const pl_read_range *r, int n) {
    pl_status st = PL_OK;
    for (int i = 0; i < n && !st; i++)
        st = buf_read(be, r[i].src, r[i].offset, r[i].dst, r[i].nbytes);
    return st;
}

/* The CPU runs each op as it is issued (can_prepare 0): there is never a pass to prepare. */
static pl_status op_prepare(pl_backend *be, pl_buf *input, const pl_read_range *r, int n) {
    (void)be, (void)input, (void)r, (void)n;
    return pl_fail(PL_ERR_ARG, "the CPU backend runs each op as it comes: no pass to prepare");
}

static pl_status op_run_prepared(pl_backend *be, const void *src, int64_t nbytes) {
    (void)be, (void)src, (void)nbytes;
    return pl_fail(PL_ERR_ARG, "no prepared pass");
}

static bool op_has_prepared(const pl_backend *be) {
    (void)be;
    return false;
}

/* ---- weight rows in the GGUF layout (pl_cpu_wrow*, cpu_internal.h) ---- */

const unsigned char *pl_cpu_wrow(const pl_buf *w, int64_t r, unsigned char *tmp) {
    const unsigned char *g = NULL;
    int lane = 0;
    const unsigned char *p = pl_cpu_wrow_at(w, r, &g, &lane);
    if (p) return p;
    int64_t bs = pl_row_size(w->type, 32); /* a block */
    int q4 = w->type == PL_TYPE_Q4_0;
    for (int64_t b = 0; b < w->ne0 / 32; b++) pl_x8_block(q4, g, lane, b, tmp + b * bs);
    return tmp;
}

pl_status pl_cpu_dequant_wrow(const pl_buf *w, int64_t r, float *out) {
    const unsigned char *g = NULL;
    int lane = 0;
    const unsigned char *p = pl_cpu_wrow_at(w, r, &g, &lane);
    if (p) return pl_dequant_row(w->type, p, out, w->ne0);
    for (int64_t b = 0; b < w->ne0 / 32; b++) {
        unsigned char blk[34];
        pl_x8_block(w->type == PL_TYPE_Q4_0, g, lane, b, blk);
        pl_status s = pl_dequant_row(w->type, blk, out + b * 32, 32);
        if (s) return s;
    }
    return PL_OK;
}

void pl_cpu_view_of(const cpu_buf *parent, int64_t row0, int64_t rows, cpu_buf *out) {
    const pl_buf *p = &parent->h;
    out->h = (pl_buf){.be = p->be, .type = p->type, .ne0 = p->ne0, .ne1 = rows};
    out->data = (char *)parent->data + row0 * pl_row_size(p->type, p->ne0);
    int64_t in = parent->x8_rows - row0; /* of the parent's interleaved rows, those past row0 */
    out->x8_rows = in <= 0 ? 0 : in < rows ? in : rows;
    out->x8_off = out->x8_rows ? (int)((row0 + parent->x8_off) % 8) : 0;
}

/* ---- scratch kept between ops ---- */

void *pl_cpu_scratch(cpu_scratch *s, size_t bytes) {
    if (bytes <= s->cap) return s->p;
    free(s->p);
    size_t cap = bytes + bytes / 4; /* room for the next op a little larger */
    s->p = malloc(cap);
    s->cap = s->p ? cap : 0;
    return s->p;
}

/* ---- row splitting ---- */

typedef struct {
    pl_cpu_rows_fn *fn;
    void *ctx;
    int64_t rows, per_item;
} rows_job;

static void rows_item(void *ctx, int64_t item, int thread) {
    (void)thread;
    const rows_job *j = ctx;
    int64_t r0 = item * j->per_item, r1 = r0 + j->per_item;
    j->fn(j->ctx, r0, r1 < j->rows ? r1 : j->rows);
}

void pl_cpu_rows(cpu_backend *c, int64_t rows, int64_t row_work, pl_cpu_rows_fn *fn, void *ctx) {
    int threads = pl_pool_threads(c->pool);
    if (rows <= 0) return;
    if (threads == 1 || rows == 1 || rows * row_work < CPU_PAR_MIN_WORK) {
        fn(ctx, 0, rows);
        return;
    }
    /* 4 ranges a thread: a thread the machine delays leaves its share to the others */
    int64_t items = 4 * (int64_t)threads < rows ? 4 * (int64_t)threads : rows;
    rows_job j = {fn, ctx, rows, (rows + items - 1) / items};
    pl_pool_run(c->pool, (rows + j.per_item - 1) / j.per_item, rows_item, &j);
}

/* ---- small ops ---- */

/* The arguments of the element-wise ops below, each its rows (or values) r0..r1. */
typedef struct {
    const pl_buf *a, *b;
    pl_buf *out;
    int64_t cols, pos0;
    float eps;
    const pl_rope_params *rope;
    const double *angles; /* pl_cpu_rope_angles' */
    atomic_int failed;
} ew_job;

static void embed_rows(void *ctx, int64_t r0, int64_t r1) {
    ew_job *j = ctx;
    const pl_buf *table = j->a;
    const int32_t *id = vptr(j->b);
    int64_t d = table->ne0;
    for (int64_t i = r0; i < r1; i++) {
        float *o = fptr(j->out) + i * d;
        if (id[i] < 0 || id[i] >= table->ne1)
            memset(o, 0, (size_t)d * sizeof *o);
        else if (pl_cpu_dequant_wrow(table, id[i], o))
            atomic_store(&j->failed, 1);
    }
}

static pl_status op_embed(pl_backend *be, const pl_buf *table, const pl_buf *ids, int64_t n,
                          pl_buf *out) {
    ew_job j = {.a = table, .b = ids, .out = out};
    atomic_init(&j.failed, 0);
    pl_cpu_rows(cpu_of(be), n, table->ne0, embed_rows, &j);
    if (!atomic_load(&j.failed)) return PL_OK;
    /* again on this thread, for the error (a worker's is lost with its thread) */
    const int32_t *id = vptr(ids);
    int64_t d = table->ne0;
    for (int64_t i = 0; i < n; i++) {
        if (id[i] < 0 || id[i] >= table->ne1) continue;
        pl_status s = pl_cpu_dequant_wrow(table, id[i], fptr(out) + i * d);
        if (s) return s;
    }
    return pl_fail(PL_ERR_FORMAT, "embed: a row could not be read");
}

/* The sum of the squares of x[0..n), in double (rows can be thousands wide), in 8 partial
 * sums (value i into sum i % 8, then paired up in a fixed order): the same value on every
 * machine and thread count, and 8 independent additions in flight instead of one chain (a
 * decode step's norms - 4 a layer, the q/k norms' rows only 128 wide - ran on the caller
 * alone between the pool's jobs). Each square of a float is exact in double. */
static double sum_squares(const float *x, int64_t n) {
    double p[8] = {0};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int t = 0; t < 8; t++) p[t] += (double)x[i + t] * x[i + t];
    for (int t = 0; i < n; i++, t++) p[t] += (double)x[i] * x[i];
    return ((p[0] + p[1]) + (p[2] + p[3])) + ((p[4] + p[5]) + (p[6] + p[7]));
}

void pl_cpu_rms_row(const float *x, const float *w, int64_t cols, float eps, float *o) {
    float scale = (float)(1.0 / sqrt(sum_squares(x, cols) / (double)cols + eps));
    for (int64_t i = 0; i < cols; i++) o[i] = (x[i] * scale) * w[i];
}

static void rms_norm_rows(void *ctx, int64_t r0, int64_t r1) {
    const ew_job *j = ctx;
    int64_t cols = j->cols;
    for (int64_t r = r0; r < r1; r++)
        pl_cpu_rms_row(fptr(j->a) + r * cols, fptr(j->b), cols, j->eps, fptr(j->out) + r * cols);
}

static pl_status op_rms_norm(pl_backend *be, const pl_buf *x, const pl_buf *w, int64_t rows,
                             int64_t cols, float eps, pl_buf *out) {
    ew_job j = {.a = x, .b = w, .out = out, .cols = cols, .eps = eps};
    pl_cpu_rows(cpu_of(be), rows, cols, rms_norm_rows, &j);
    return PL_OK;
}

static void add_values(void *ctx, int64_t i0, int64_t i1) {
    const ew_job *j = ctx;
    const float *av = fptr(j->a), *bv = fptr(j->b);
    float *o = fptr(j->out);
    for (int64_t i = i0; i < i1; i++) o[i] = av[i] + bv[i];
}

static pl_status op_add(pl_backend *be, const pl_buf *a, const pl_buf *b, int64_t count,
                        pl_buf *out) {
    ew_job j = {.a = a, .b = b, .out = out};
    pl_cpu_rows(cpu_of(be), count, 1, add_values, &j);
    return PL_OK;
}

/* One head's pairs, the cosines and sines as separate runs so the NEOX layout's loop (pairs
 * k and k + half: both contiguous) vectorises; each value rotated in double, as before. */
void pl_cpu_rope_head(float *v, const double *cs, int half, int mode) {
    const double *sn = cs + half;
    if (mode == PL_ROPE_NEOX) {
        float *w = v + half;
        for (int k = 0; k < half; k++) {
            float x0 = v[k], x1 = w[k];
            v[k] = (float)(x0 * cs[k] - x1 * sn[k]);
            w[k] = (float)(x0 * sn[k] + x1 * cs[k]);
        }
    } else {
        for (int k = 0; k < half; k++) {
            float x0 = v[2 * k], x1 = v[2 * k + 1];
            v[2 * k] = (float)(x0 * cs[k] - x1 * sn[k]);
            v[2 * k + 1] = (float)(x0 * sn[k] + x1 * cs[k]);
        }
    }
}

static void rope_rows(void *ctx, int64_t r0, int64_t r1) {
    const ew_job *j = ctx;
    const pl_rope_params *p = j->rope;
    int half = p->rope_dim / 2;
    int64_t row = (int64_t)p->n_heads * p->head_dim;
    for (int64_t i = r0; i < r1; i++)
        for (int h = 0; h < p->n_heads; h++)
            pl_cpu_rope_head(fptr(j->out) + i * row + (int64_t)h * p->head_dim,
                             j->angles + i * 2 * half, half, p->mode);
}

/* The cosines and sines of positions pos0 .. pos0 + n - 1 under p, per position rope_dim / 2
 * cosines then as many sines:
 * c->rope's when they are the last ones made (every layer of a step asks for the same), else
 * made there; NULL: out of memory. */
const double *pl_cpu_rope_angles(cpu_backend *c, int64_t n, int64_t pos0, const pl_rope_params *p) {
    int half = p->rope_dim / 2;
    const float *factors = p->factors ? fptr(p->factors) : NULL;
    if (c->rope.n == n && c->rope.pos0 == pos0 && c->rope.dim == p->rope_dim &&
        c->rope.base == p->theta_base && c->rope.scale == p->freq_scale &&
        !factors == !c->rope.factors &&
        (!factors || !memcmp(factors, c->rope.factors, sizeof(float) * (size_t)half)))
        return c->rope.cs;
    c->rope.n = 0;
    size_t need = (size_t)n * 2 * (size_t)half + 1;
    if (need > c->rope.cap) {
        free(c->rope.cs);
        c->rope.cs = malloc(sizeof(double) * need);
        c->rope.cap = c->rope.cs ? need : 0;
    }
    free(c->rope.factors);
    c->rope.factors = factors ? malloc(sizeof(float) * (size_t)half) : NULL;
    if (!c->rope.cs || (factors && !c->rope.factors)) return NULL;
    if (factors) memcpy(c->rope.factors, factors, sizeof(float) * (size_t)half);
    for (int k = 0; k < half; k++) {
        /* theta = pos * scale * base^(-2k/rope_dim) / factor_k, in double: the float64
         * reference computes it so, and float rounding at large positions is visible */
        double freq = pow(p->theta_base, -2.0 * k / p->rope_dim);
        for (int64_t i = 0; i < n; i++) {
            double th = (double)(pos0 + i) * p->freq_scale * freq;
            if (factors) th /= factors[k];
            c->rope.cs[i * 2 * half + k] = cos(th);
            c->rope.cs[i * 2 * half + half + k] = sin(th);
        }
    }
    c->rope.n = n, c->rope.pos0 = pos0, c->rope.dim = p->rope_dim;
    c->rope.base = p->theta_base, c->rope.scale = p->freq_scale;
    return c->rope.cs;
}

static pl_status op_rope(pl_backend *be, pl_buf *x, int64_t n, int64_t pos0,
                         const pl_rope_params *p) {
    const double *angles = pl_cpu_rope_angles(cpu_of(be), n, pos0, p);
    if (!angles) return pl_fail(PL_ERR_NOMEM, "out of memory in rope");
    ew_job j = {.out = x, .pos0 = pos0, .rope = p, .angles = angles};
    /* a row: the pairs' rotations */
    pl_cpu_rows(cpu_of(be), n, (int64_t)p->n_heads * p->head_dim, rope_rows, &j);
    return PL_OK;
}

void pl_cpu_kv_span(const float *s, pl_buf *cache, int64_t e0, int64_t count) {
    if (cache->type == PL_TYPE_F32) {
        memcpy(fptr(cache) + e0, s, (size_t)count * sizeof(float));
    } else if (cache->type == PL_TYPE_Q8_0) { /* whole blocks: one run of them */
        pl_quant_act_q8_0(s, count, q8_quants(cache) + e0, q8_scales(cache) + e0 / 32);
    } else {
        pl_f32_to_f16_row(s, (uint16_t *)vptr(cache) + e0, count);
    }
}

static void kv_store_rows(void *ctx, int64_t r0, int64_t r1) {
    const ew_job *j = ctx;
    int64_t d = j->out->ne0;
    pl_cpu_kv_span(fptr(j->a) + r0 * d, j->out, (j->pos0 + r0) * d, (r1 - r0) * d);
}

static pl_status op_kv_store(pl_backend *be, const pl_buf *src, int64_t n, int64_t pos0,
                             pl_buf *cache) {
    ew_job j = {.a = src, .out = cache, .pos0 = pos0};
    pl_cpu_rows(cpu_of(be), n, cache->ne0, kv_store_rows, &j);
    return PL_OK;
}

bool pl_cpu_col(const pl_buf *cols, int64_t i, const pl_buf *cache, int64_t n_ctx, int64_t max_keys,
                int64_t *slot, int64_t *pos) {
    const int32_t *c = vptr(cols);
    *slot = c[2 * i], *pos = c[2 * i + 1];
    if (*slot >= 0 && *slot < cache->ne1 / n_ctx && *pos >= 0 && *pos < max_keys) return true;
    pl_fail(PL_ERR_ARG, "column %lld: slot %lld, position %lld outside %lld slots of %lld",
            (long long)i, (long long)*slot, (long long)*pos, (long long)(cache->ne1 / n_ctx),
            (long long)max_keys);
    return false;
}

/* Each column: the single-sequence op on its row at its position (so the same bits). */
static pl_status op_rope_cols(pl_backend *be, pl_buf *x, int64_t n, const pl_buf *cols,
                              int64_t n_pos, const pl_rope_params *p) {
    for (int64_t i = 0; i < n; i++) {
        int32_t pos = ((const int32_t *)vptr(cols))[2 * i + 1];
        if (pos < 0 || pos >= n_pos)
            return pl_fail(PL_ERR_ARG, "column %lld: position %d of %lld", (long long)i, pos,
                           (long long)n_pos);
        cpu_buf r = pl_cpu_row_view(x, i, 1);
        pl_status st = op_rope(be, &r.h, 1, pos, p);
        if (st) return st;
    }
    return PL_OK;
}

static pl_status op_kv_store_cols(pl_backend *be, const pl_buf *src, int64_t n, const pl_buf *cols,
                                  int64_t n_ctx, pl_buf *cache) {
    for (int64_t i = 0; i < n; i++) {
        int64_t slot, pos;
        if (!pl_cpu_col(cols, i, cache, n_ctx, n_ctx, &slot, &pos)) return PL_ERR_ARG;
        cpu_buf r = pl_cpu_row_view(src, i, 1);
        pl_status st = op_kv_store(be, &r.h, 1, slot * n_ctx + pos, cache);
        if (st) return st;
    }
    return PL_OK;
}

void pl_cpu_swiglu_range(const float *g, const float *u, float *o, int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; i++) o[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
}

static void swiglu_values(void *ctx, int64_t i0, int64_t i1) {
    const ew_job *j = ctx;
    pl_cpu_swiglu_range(fptr(j->a), fptr(j->b), fptr(j->out), i0, i1);
}

static pl_status op_swiglu(pl_backend *be, const pl_buf *gate, const pl_buf *up, int64_t count,
                           pl_buf *out) {
    ew_job j = {.a = gate, .b = up, .out = out};
    /* a value's expf weighs about 16 multiply-adds: a decode step's few thousand values
     * are shared out (on one thread they took ~1% of a 1-thread 0.6b decode) */
    pl_cpu_rows(cpu_of(be), count, 16, swiglu_values, &j);
    return PL_OK;
}

/* The first largest non-NaN value of v[i0, i1): its index, or -1 (all NaN). */
static int64_t argmax_range(const float *v, int64_t i0, int64_t i1) {
    int64_t best = -1;
    for (int64_t i = i0; i < i1; i++)
        if (!isnan(v[i]) && (best < 0 || v[i] > v[best])) best = i;
    return best;
}

/* Rows this wide or wider (a vocabulary's logits) are searched in ARGMAX_CHUNKS chunks by
 * the threads. */
#define ARGMAX_SPLIT  65536
#define ARGMAX_CHUNKS 64
typedef struct {
    const float *v;
    int64_t n;
    int64_t best[ARGMAX_CHUNKS]; /* each chunk's */
} argmax_job;

static void argmax_chunks(void *ctx, int64_t c0, int64_t c1) {
    argmax_job *j = ctx;
    for (int64_t c = c0; c < c1; c++) {
        int64_t i0 = c * j->n / ARGMAX_CHUNKS, i1 = (c + 1) * j->n / ARGMAX_CHUNKS;
        j->best[c] = argmax_range(j->v, i0, i1);
    }
}

static pl_status op_argmax(pl_backend *be, const pl_buf *x, int64_t rows, pl_buf *ids,
                           int64_t dst0) {
    int32_t *o = (int32_t *)vptr(ids) + dst0;
    for (int64_t r = 0; r < rows; r++) {
        argmax_job j = {.v = fptr(x) + r * x->ne0, .n = x->ne0};
        if (j.n < ARGMAX_SPLIT) { /* NaN is skipped, as the GPU does */
            o[r] = (int32_t)argmax_range(j.v, 0, j.n);
            continue;
        }
        /* the chunks' winners taken in order, a later one only when strictly larger: the
         * first largest, as one pass finds it */
        pl_cpu_rows(cpu_of(be), ARGMAX_CHUNKS, j.n / ARGMAX_CHUNKS, argmax_chunks, &j);
        int64_t best = -1;
        for (int c = 0; c < ARGMAX_CHUNKS; c++)
            if (j.best[c] >= 0 && (best < 0 || j.v[j.best[c]] > j.v[best])) best = j.best[c];
        o[r] = (int32_t)best;
    }
    return PL_OK;
}

void pl_cpu_topk_row(const float *v, int64_t cols, int64_t k, int32_t *oi, float *ov) {
    int64_t have = 0;
    /* Insertion into a sorted list of k: a strictly larger value moves ahead, so among
     * equal values the lower index (seen first) stays first. */
    for (int64_t i = 0; i < cols; i++) {
        if (isnan(v[i]) || (have == k && !(v[i] > ov[k - 1]))) continue;
        int64_t j = have < k ? have++ : k - 1;
        while (j > 0 && v[i] > ov[j - 1]) {
            ov[j] = ov[j - 1];
            oi[j] = oi[j - 1];
            j--;
        }
        ov[j] = v[i];
        oi[j] = (int32_t)i;
    }
    for (; have < k; have++) { /* fewer than k numbers: the GPU's filler */
        ov[have] = -INFINITY;
        oi[have] = -1;
    }
}

static pl_status op_topk(pl_backend *be, const pl_buf *x, int64_t row, int64_t k, pl_buf *ids,
                         pl_buf *vals) {
    (void)be;
    pl_cpu_topk_row(fptr(x) + row * x->ne0, x->ne0, k, vptr(ids), fptr(vals));
    return PL_OK;
}

static pl_status op_copy(pl_backend *be, const pl_buf *src, int64_t src0, int64_t count,
                         pl_buf *dst, int64_t dst0) {
    (void)be;
    size_t es = src->type == PL_TYPE_F16 ? 2 : 4;
    memcpy((char *)vptr(dst) + dst0 * es, (const char *)vptr(src) + src0 * es, (size_t)count * es);
    return PL_OK;
}

/* The fusions asked for: QKV and GATE_UP hold matmuls back to run them as one pool job
 * (cpu_matmul.c), NORM_ROPE / ROPE_PAIR / ROPE_STORE the per-head ops (cpu_heads.c); the
 * others name ops that already run in one pass over their rows. */
pl_status pl_cpu_flush(cpu_backend *c) {
    pl_status s = pl_cpu_flush_matmuls(c);
    return s ? s : pl_cpu_head_flush(c);
}

static pl_status op_fuse(pl_backend *be, unsigned kinds) {
    cpu_of(be)->fuse = kinds;
    return PL_OK;
}

static void destroy(pl_backend *be) {
    cpu_backend *c = cpu_of(be);
    pl_cpu_fused_free(c); /* (matmuls still held: nobody can read their outputs now) */
    c->heads.n = 0;       /* (and per-head ops) */
    if (c->per_thread)
        for (int i = 0; i < pl_pool_threads(c->pool); i++) free(c->per_thread[i].p);
    free(c->per_thread);
    free(c->act.p);
    free(c->pack.p);
    free(c->rope.cs);
    free(c->rope.factors);
    pl_pool_free(c->pool);
    free(c);
}

/* ---- the methods: each op first runs what a fusion holds back (pl_cpu_flush) ---- */

#define FLUSHED(op, params, args)                                                                  \
    static pl_status op##_f params {                                                               \
        pl_status s = pl_cpu_flush(cpu_of(be));                                                    \
        return s ? s : op args;                                                                    \
    }
static void buf_free_f(pl_backend *be, pl_buf *b) {
    pl_cpu_flush(cpu_of(be)); /* (a held matmul may write b; its failure has no one to tell) */
    buf_free(be, b);
}
FLUSHED(buf_write, (pl_backend * be, pl_buf *dst, int64_t offset, const void *src, int64_t nbytes),
        (be, dst, offset, src, nbytes))
FLUSHED(buf_read_many, (pl_backend * be, const pl_read_range *r, int n), (be, r, n))
FLUSHED(buf_read, (pl_backend * be, const pl_buf *src, int64_t offset, void *dst, int64_t nbytes),
        (be, src, offset, dst, nbytes))
FLUSHED(op_embed, (pl_backend * be, const pl_buf *table, const pl_buf *ids, int64_t n, pl_buf *out),
        (be, table, ids, n, out))
FLUSHED(op_add, (pl_backend * be, const pl_buf *a, const pl_buf *b, int64_t count, pl_buf *out),
        (be, a, b, count, out))
/* The per-head ops: held where the fusion group asks (cpu_heads.c), after the matmuls; else
 * what is held runs, then the op as the plain one. */
pl_status pl_cpu_head_run(cpu_backend *c, const cpu_head_op *o) {
    pl_backend *be = &c->base;
    if (o->kind == HEAD_NORM) return op_rms_norm(be, o->x, o->w, o->rows, o->cols, o->eps, o->x);
    if (o->kind == HEAD_ROPE) return op_rope(be, o->x, o->n, o->pos0, &o->rp);
    return op_kv_store(be, o->x, o->n, o->pos0, o->cache);
}
static pl_status head_op(cpu_backend *c, const cpu_head_op *op, bool holdable) {
    pl_status s = holdable ? pl_cpu_flush_matmuls(c) : pl_cpu_flush(c);
    if (s || (holdable && pl_cpu_head_hold(c, op))) return s;
    s = pl_cpu_head_flush(c);
    return s ? s : pl_cpu_head_run(c, op);
}
static pl_status op_rms_norm_f(pl_backend *be, const pl_buf *x, const pl_buf *w, int64_t rows,
                               int64_t cols, float eps, pl_buf *out) {
    if (x != out) { /* (not a per-head norm) */
        pl_status s = pl_cpu_flush(cpu_of(be));
        return s ? s : op_rms_norm(be, x, w, rows, cols, eps, out);
    }
    cpu_head_op op = {.kind = HEAD_NORM, .x = out, .w = w, .rows = rows, .cols = cols, .eps = eps};
    return head_op(cpu_of(be), &op, x->type == PL_TYPE_F32);
}
static pl_status op_rope_f(pl_backend *be, pl_buf *x, int64_t n, int64_t pos0,
                           const pl_rope_params *p) {
    cpu_head_op op = {.kind = HEAD_ROPE, .x = x, .n = n, .pos0 = pos0, .rp = *p};
    return head_op(cpu_of(be), &op, true);
}
static pl_status op_kv_store_f(pl_backend *be, const pl_buf *src, int64_t n, int64_t pos0,
                               pl_buf *cache) {
    /* (held, src is read later: it is written by nothing before - every op flushes first) */
    cpu_head_op op = {.kind = HEAD_STORE, .x = (pl_buf *)src, .n = n, .pos0 = pos0, .cache = cache};
    return head_op(cpu_of(be), &op, src->type == PL_TYPE_F32);
}
FLUSHED(pl_cpu_attention,
        (pl_backend * be, const pl_buf *q, const pl_buf *k_cache, const pl_buf *v_cache, int64_t n,
         int64_t pos0, const pl_attn_params *p, pl_buf *out),
        (be, q, k_cache, v_cache, n, pos0, p, out))
FLUSHED(op_rope_cols,
        (pl_backend * be, pl_buf *x, int64_t n, const pl_buf *cols, int64_t n_pos,
         const pl_rope_params *p),
        (be, x, n, cols, n_pos, p))
FLUSHED(op_kv_store_cols,
        (pl_backend * be, const pl_buf *src, int64_t n, const pl_buf *cols, int64_t n_ctx,
         pl_buf *cache),
        (be, src, n, cols, n_ctx, cache))
FLUSHED(pl_cpu_attention_cols,
        (pl_backend * be, const pl_buf *q, const pl_buf *k_cache, const pl_buf *v_cache, int64_t n,
         const pl_buf *cols, int64_t n_ctx, int64_t max_keys, const pl_attn_params *p, pl_buf *out),
        (be, q, k_cache, v_cache, n, cols, n_ctx, max_keys, p, out))
/* (PL_FUSE_GATE_UP: the gate and up matmuls held for it run with it, cpu_matmul.c) */
static pl_status op_swiglu_f(pl_backend *be, const pl_buf *gate, const pl_buf *up, int64_t count,
                             pl_buf *out) {
    bool done;
    pl_status s = pl_cpu_swiglu_held(cpu_of(be), gate, up, count, out, &done);
    if (s || done) return s;
    s = pl_cpu_flush(cpu_of(be));
    return s ? s : op_swiglu(be, gate, up, count, out);
}
FLUSHED(op_argmax, (pl_backend * be, const pl_buf *x, int64_t rows, pl_buf *ids, int64_t dst0),
        (be, x, rows, ids, dst0))
FLUSHED(op_topk,
        (pl_backend * be, const pl_buf *x, int64_t row, int64_t k, pl_buf *ids, pl_buf *vals),
        (be, x, row, k, ids, vals))
FLUSHED(op_copy,
        (pl_backend * be, const pl_buf *src, int64_t src0, int64_t count, pl_buf *dst,
         int64_t dst0),
        (be, src, src0, count, dst, dst0))
FLUSHED(pl_cpu_softmax_rows,
        (pl_backend * be, const pl_buf *x, int64_t rows, int64_t cols, pl_buf *out),
        (be, x, rows, cols, out))
FLUSHED(pl_cpu_topk_rows,
        (pl_backend * be, const pl_buf *x, int64_t rows, int64_t cols, int64_t k, pl_buf *ids,
         pl_buf *vals),
        (be, x, rows, cols, k, ids, vals))
FLUSHED(pl_cpu_matmul_id,
        (pl_backend * be, const pl_buf *w, int64_t n_exp, const pl_buf *x, const pl_buf *ids,
         int64_t n, int64_t n_used, bool x_shared, pl_buf *out),
        (be, w, n_exp, x, ids, n, n_used, x_shared, out))
FLUSHED(pl_cpu_moe_combine,
        (pl_backend * be, const pl_buf *y, const pl_buf *wts, int64_t n, int64_t n_used,
         bool accumulate, pl_buf *out),
        (be, y, wts, n, n_used, accumulate, out))
FLUSHED(pl_cpu_sigmoid_mul,
        (pl_backend * be, const pl_buf *x, const pl_buf *g, int64_t rows, int64_t cols,
         int64_t g_cols, bool accumulate, pl_buf *out),
        (be, x, g, rows, cols, g_cols, accumulate, out))
FLUSHED(pl_cpu_ssm_conv,
        (pl_backend * be, const pl_buf *x, const pl_buf *w, pl_buf *state, int64_t n, pl_buf *snaps,
         pl_buf *out),
        (be, x, w, state, n, snaps, out))
FLUSHED(pl_cpu_delta_rule,
        (pl_backend * be, const pl_buf *qkv, const pl_buf *a, const pl_buf *b, const pl_buf *ssm_a,
         const pl_buf *dt_bias, pl_buf *state, int64_t n, const pl_delta_params *p, pl_buf *snaps,
         pl_buf *out),
        (be, qkv, a, b, ssm_a, dt_bias, state, n, p, snaps, out))
FLUSHED(op_fuse, (pl_backend * be, unsigned kinds), (be, kinds))

static const pl_backend_methods cpu_methods = {
    .buf_new = buf_new,
    .buf_weight = buf_weight,
    .weights_expect = pl_cpu_weights_expect,
    .buf_free = buf_free_f,
    .buf_view = buf_view,
    .write = buf_write_f,
    .read = buf_read_f,
    .read_many = buf_read_many_f,
    .prepare = op_prepare,
    .run_prepared = op_run_prepared,
    .has_prepared = op_has_prepared,
    .embed = op_embed_f,
    .rms_norm = op_rms_norm_f,
    .matmul = pl_cpu_matmul,
    .add = op_add_f,
    .rope = op_rope_f,
    .kv_store = op_kv_store_f,
    .attention = pl_cpu_attention_f,
    .rope_cols = op_rope_cols_f,
    .kv_store_cols = op_kv_store_cols_f,
    .attention_cols = pl_cpu_attention_cols_f,
    .swiglu = op_swiglu_f,
    .argmax = op_argmax_f,
    .topk = op_topk_f,
    .copy = op_copy_f,
    .softmax_rows = pl_cpu_softmax_rows_f,
    .topk_rows = pl_cpu_topk_rows_f,
    .matmul_id = pl_cpu_matmul_id_f,
    .moe_combine = pl_cpu_moe_combine_f,
    .sigmoid_mul = pl_cpu_sigmoid_mul_f,
    .ssm_conv = pl_cpu_ssm_conv_f,
    .delta_rule = pl_cpu_delta_rule_f,
    .fuse = op_fuse_f,
    .destroy = destroy,
};

pl_status pl_cpu_new(int n_threads, pl_backend **out) {
    pl_cpu_opts o = {.n_threads = n_threads};
    return pl_cpu_new_with(&o, out);
}

pl_status pl_cpu_new_with(const pl_cpu_opts *o, pl_backend **out) {
    *out = NULL;
    pl_cpu_opts d = {0};
    if (!o) o = &d;
    if (o->anon_weights < -1 || o->anon_weights > 1)
        return pl_fail(PL_ERR_ARG, "CPU backend: anon_weights %d (expected -1 off, 0 auto, 1 on)",
                       o->anon_weights);
    if (o->interleave < -1 || o->interleave > 0)
        return pl_fail(PL_ERR_ARG, "CPU backend: interleave %d (expected -1 never, 0 auto)",
                       o->interleave);
    int n_threads = o->n_threads;
    if (n_threads <= 0) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        n_threads = n > 0 ? (int)(n < 64 ? n : 64) : 1;
    }
    cpu_backend *c = calloc(1, sizeof *c);
    if (!c) return pl_fail(PL_ERR_NOMEM, "out of memory for the CPU backend");
    pl_status s = pl_pool_new(n_threads, &c->pool);
    if (s) {
        free(c);
        return s;
    }
    c->per_thread = calloc((size_t)pl_pool_threads(c->pool), sizeof *c->per_thread);
    if (!c->per_thread) {
        destroy(&c->base);
        return pl_fail(PL_ERR_NOMEM, "out of memory for the CPU backend");
    }
    c->l2_bytes = 1 << 20;
#ifdef _SC_LEVEL2_CACHE_SIZE
    long l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
    if (l2 >= 65536 && l2 <= (64l << 20)) c->l2_bytes = l2;
#endif
    for (uint32_t i = 0; i < 65536; i++) c->f16[i] = pl_f16_to_f32((uint16_t)i);
    c->base.m = &cpu_methods;
    c->base.name = "cpu";
    if ((s = pl_be_check_methods(&c->base))) {
        destroy(&c->base);
        return s;
    }
    c->x8_mode = o->interleave;
    pl_cpu_weights_init(c, o->anon_weights); /* and the device line */
    *out = &c->base;
    return PL_OK;
}
