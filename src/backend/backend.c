/* backend.c - the checked entry points of the backend seam.
 *
 * Each wrapper verifies that the buffers belong to one backend, have the types the op
 * needs and are large enough for the rows it touches, then calls the method. A backend
 * therefore never sees an inconsistent call, and a bug in the model code becomes a one-line
 * error instead of an out-of-bounds write on some device. */
#include "backend.h"

#include <stddef.h>

#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond)) return pl_fail(PL_ERR_ARG, __VA_ARGS__);                                      \
    } while (0)

static const char *tname(uint32_t t) {
    const pl_type_traits *tr = pl_type_get(t);
    return tr ? tr->name : "?";
}

static int64_t nvals(const pl_buf *b) {
    return b->ne0 * b->ne1;
}

/* An activation buffer of type t with at least `rows` rows of `cols` values. */
static pl_status want(const char *op, const char *what, const pl_buf *b, uint32_t t, int64_t cols,
                      int64_t rows) {
    CHECK(b, "%s: %s is missing", op, what);
    CHECK(b->type == t, "%s: %s has type %s, expected %s", op, what, tname(b->type), tname(t));
    CHECK(cols < 0 || b->ne0 == cols, "%s: %s rows hold %lld values, expected %lld", op, what,
          (long long)b->ne0, (long long)cols);
    CHECK(rows <= b->ne1, "%s: %s has %lld rows, %lld needed", op, what, (long long)b->ne1,
          (long long)rows);
    return PL_OK;
}

/* Every buffer of one call must belong to the same backend. */
static pl_status same_be(const char *op, const pl_buf *a, const pl_buf *b) {
    CHECK(!a || !b || a->be == b->be, "%s: buffers of different backends", op);
    return PL_OK;
}

static pl_status writable(const char *op, const pl_buf *b) {
    CHECK(!b->weight, "%s: destination is a weight", op);
    return PL_OK;
}

#define TRY(x)                                                                                     \
    do {                                                                                           \
        pl_status s_ = (x);                                                                        \
        if (s_) return s_;                                                                         \
    } while (0)

/* PL_BACKEND_SLOTS names every slot: the struct holds exactly that many function pointers. */
#define COUNT_SLOT(name) +1
_Static_assert(sizeof(pl_backend_methods) ==
                   (0 PL_BACKEND_SLOTS(COUNT_SLOT)) * sizeof(void (*)(void)),
               "PL_BACKEND_SLOTS must list every slot of pl_backend_methods");
#undef COUNT_SLOT

pl_status pl_be_check_methods(const pl_backend *be) {
    const char *name = be && be->name ? be->name : "?";
    if (!be || !be->m) return pl_fail(PL_ERR, "%s backend: no methods", name);
#define CHECK_SLOT(slot)                                                                           \
    if (!be->m->slot) return pl_fail(PL_ERR, "%s backend: method slot %s is empty", name, #slot);
    PL_BACKEND_SLOTS(CHECK_SLOT)
#undef CHECK_SLOT
    return PL_OK;
}

int64_t pl_be_buf_bytes(const pl_buf *b) {
    int64_t row = pl_row_size(b->type, b->ne0);
    return row < 0 ? 0 : row * b->ne1;
}

pl_status pl_be_buf_new(pl_backend *be, uint32_t type, int64_t ne0, int64_t ne1, pl_buf **out) {
    *out = NULL;
    CHECK(type == PL_TYPE_F32 || type == PL_TYPE_F16 || type == PL_TYPE_I32 || type == PL_TYPE_Q8_0,
          "buffer type %s is not f32, f16, i32 or q8_0", tname(type));
    CHECK(type != PL_TYPE_Q8_0 || ne0 % 32 == 0,
          "a q8_0 KV cache needs rows of whole 32-value blocks (this one's hold %lld values): "
          "use an f16 or f32 cache",
          (long long)ne0);
    CHECK(ne0 > 0 && ne1 > 0 && ne0 <= (INT64_C(1) << 40) / ne1, "bad buffer shape [%lld, %lld]",
          (long long)ne1, (long long)ne0);
    TRY(be->m->buf_new(be, type, ne0, ne1, out));
    be->live_bufs++;
    return PL_OK;
}

pl_status pl_be_buf_weight(pl_backend *be, uint32_t type, int64_t ne0, int64_t ne1,
                           const void *data, pl_buf **out) {
    *out = NULL;
    const pl_type_traits *tr = pl_type_get(type);
    CHECK(tr, "unknown weight type %u", type);
    if (!tr->dequant) return pl_fail(PL_ERR_FORMAT, "cannot read %s weights", tr->name);
    CHECK(ne0 > 0 && ne1 > 0 && ne0 <= (INT64_C(1) << 40) / ne1, "bad weight shape [%lld, %lld]",
          (long long)ne1, (long long)ne0);
    CHECK(pl_row_size(type, ne0) > 0, "%s rows of %lld values are not whole blocks", tr->name,
          (long long)ne0);
    CHECK(data, "weight without data");
    TRY(be->m->buf_weight(be, type, ne0, ne1, data, out));
    be->live_bufs++;
    return PL_OK;
}

pl_status pl_be_weights_expect(pl_backend *be, uint64_t bytes) {
    return be->m->weights_expect(be, bytes);
}

pl_status pl_be_buf_view(pl_buf *parent, int64_t row0, int64_t rows, pl_buf **out) {
    *out = NULL;
    CHECK(parent, "view: missing buffer");
    CHECK(!parent->weight && !parent->view &&
              (parent->type == PL_TYPE_F32 || parent->type == PL_TYPE_F16),
          "view: only rows of an f32 or f16 buffer of its own (this one: %s%s)",
          tname(parent->type), parent->view ? ", a view" : "");
    CHECK(row0 >= 0 && rows > 0 && row0 + rows <= parent->ne1,
          "view: rows [%lld, %lld) outside a buffer of %lld", (long long)row0,
          (long long)(row0 + rows), (long long)parent->ne1);
    pl_backend *be = parent->be;
    TRY(be->m->buf_view(be, parent, row0, rows, out));
    (*out)->view = true;
    be->live_bufs++;
    return PL_OK;
}

void pl_be_buf_free(pl_buf *b) {
    if (!b) return;
    pl_backend *be = b->be;
    be->live_bufs--;
    be->m->buf_free(be, b);
}

pl_status pl_be_write(pl_buf *dst, int64_t offset, const void *src, int64_t nbytes) {
    CHECK(dst && src, "write: missing buffer");
    TRY(writable("write", dst));
    CHECK(offset >= 0 && nbytes >= 0 && offset + nbytes <= pl_be_buf_bytes(dst),
          "write: bytes [%lld, %lld) outside a buffer of %lld", (long long)offset,
          (long long)(offset + nbytes), (long long)pl_be_buf_bytes(dst));
    return dst->be->m->write(dst->be, dst, offset, src, nbytes);
}

pl_status pl_be_read(const pl_buf *src, int64_t offset, void *dst, int64_t nbytes) {
    CHECK(src && dst, "read: missing buffer");
    CHECK(offset >= 0 && nbytes >= 0 && offset + nbytes <= pl_be_buf_bytes(src),
          "read: bytes [%lld, %lld) outside a buffer of %lld", (long long)offset,
          (long long)(offset + nbytes), (long long)pl_be_buf_bytes(src));
    return src->be->m->read(src->be, src, offset, dst, nbytes);
}

static pl_status check_reads(const char *op, const pl_read_range *r, int n) {
    CHECK(r && n >= 1 && n <= PL_READ_MANY_MAX, "%s: 1 to %d reads, got %d", op, PL_READ_MANY_MAX,
          n);
    for (int i = 0; i < n; i++) {
        const pl_buf *src = r[i].src;
        CHECK(src && r[i].dst, "%s: read %d: missing buffer", op, i);
        CHECK(r[i].offset >= 0 && r[i].nbytes >= 0 &&
                  r[i].offset + r[i].nbytes <= pl_be_buf_bytes(src),
              "%s: read %d: bytes [%lld, %lld) outside a buffer of %lld", op, i,
              (long long)r[i].offset, (long long)(r[i].offset + r[i].nbytes),
              (long long)pl_be_buf_bytes(src));
        CHECK(src->be == r[0].src->be, "%s: read %d: another backend's buffer", op, i);
    }
    return PL_OK;
}

pl_status pl_be_read_many(const pl_read_range *r, int n) {
    TRY(check_reads("read_many", r, n));
    if (n == 1) return pl_be_read(r[0].src, r[0].offset, r[0].dst, r[0].nbytes);
    return r[0].src->be->m->read_many(r[0].src->be, r, n);
}

pl_status pl_be_prepare(pl_buf *input, const pl_read_range *r, int n) {
    CHECK(input, "prepare: missing input");
    CHECK(input->type == PL_TYPE_F32, "prepare: the input must be f32");
    TRY(check_reads("prepare", r, n));
    CHECK(r[0].src->be == input->be, "prepare: the reads are another backend's");
    CHECK(input->be->can_prepare, "prepare: the %s backend runs ops as they come", input->be->name);
    return input->be->m->prepare(input->be, input, r, n);
}

pl_status pl_be_run_prepared(pl_backend *be, const void *src, int64_t nbytes) {
    CHECK(be && src, "run_prepared: missing argument");
    CHECK(nbytes > 0 && nbytes % 4 == 0, "run_prepared: %lld bytes (a multiple of 4 needed)",
          (long long)nbytes);
    return be->m->run_prepared(be, src, nbytes);
}

bool pl_be_has_prepared(const pl_backend *be) {
    return be && be->m->has_prepared(be);
}

pl_status pl_be_embed(const pl_buf *table, const pl_buf *ids, int64_t n, pl_buf *out) {
    CHECK(table && table->weight, "embed: table must be a weight");
    CHECK(n >= 0, "embed: negative row count");
    TRY(want("embed", "ids", ids, PL_TYPE_I32, -1, 0));
    CHECK(n <= nvals(ids), "embed: %lld ids needed, buffer holds %lld", (long long)n,
          (long long)nvals(ids));
    TRY(want("embed", "out", out, PL_TYPE_F32, table->ne0, n));
    TRY(writable("embed", out));
    TRY(same_be("embed", table, ids));
    TRY(same_be("embed", table, out));
    return table->be->m->embed(table->be, table, ids, n, out);
}

pl_status pl_be_rms_norm(const pl_buf *x, const pl_buf *w, int64_t rows, int64_t cols, float eps,
                         pl_buf *out) {
    CHECK(x && w && out, "rms_norm: missing buffer");
    CHECK(rows >= 0 && cols > 0, "rms_norm: bad shape");
    CHECK(x->type == PL_TYPE_F32 && out->type == PL_TYPE_F32, "rms_norm: x and out must be f32");
    CHECK(w->type == PL_TYPE_F32 && w->ne0 * w->ne1 == cols, "rms_norm: weight must be f32 [%lld]",
          (long long)cols);
    CHECK(rows * cols <= nvals(x) && rows * cols <= nvals(out),
          "rms_norm: %lld x %lld values do not fit the buffers", (long long)rows, (long long)cols);
    CHECK(eps >= 0, "rms_norm: negative eps");
    TRY(writable("rms_norm", out));
    TRY(same_be("rms_norm", x, w));
    TRY(same_be("rms_norm", x, out));
    return x->be->m->rms_norm(x->be, x, w, rows, cols, eps, out);
}

pl_status pl_be_matmul(const pl_buf *w, const pl_buf *x, const pl_buf *bias, int64_t n,
                       bool accumulate, pl_buf *out) {
    CHECK(w && w->weight, "matmul: w must be a weight");
    CHECK(n >= 0, "matmul: negative row count");
    TRY(want("matmul", "x", x, PL_TYPE_F32, w->ne0, n));
    TRY(want("matmul", "out", out, PL_TYPE_F32, w->ne1, n));
    CHECK(out != x, "matmul: out must not be x");
    if (bias) {
        CHECK(bias->type == PL_TYPE_F32 && bias->ne0 * bias->ne1 == w->ne1,
              "matmul: bias must be f32 [%lld]", (long long)w->ne1);
        TRY(same_be("matmul", w, bias));
    }
    TRY(writable("matmul", out));
    TRY(same_be("matmul", w, x));
    TRY(same_be("matmul", w, out));
    return w->be->m->matmul(w->be, w, x, bias, n, accumulate, out);
}

pl_status pl_be_add(const pl_buf *a, const pl_buf *b, int64_t count, pl_buf *out) {
    CHECK(a && b && out, "add: missing buffer");
    CHECK(a->type == PL_TYPE_F32 && b->type == PL_TYPE_F32 && out->type == PL_TYPE_F32,
          "add: buffers must be f32");
    CHECK(count >= 0 && count <= nvals(a) && count <= nvals(b) && count <= nvals(out),
          "add: %lld values do not fit the buffers", (long long)count);
    TRY(writable("add", out));
    TRY(same_be("add", a, b));
    TRY(same_be("add", a, out));
    return a->be->m->add(a->be, a, b, count, out);
}

static pl_status rope_check(pl_buf *x, int64_t n, int64_t pos0, const pl_rope_params *p) {
    CHECK(x && p, "rope: missing argument");
    CHECK(p->mode == PL_ROPE_NORMAL || p->mode == PL_ROPE_NEOX, "rope: unknown mode %d", p->mode);
    CHECK(p->n_heads > 0 && p->head_dim > 0 && p->rope_dim > 0 && p->rope_dim % 2 == 0 &&
              p->rope_dim <= p->head_dim,
          "rope: bad head geometry (%d heads of %d, rope %d)", p->n_heads, p->head_dim,
          p->rope_dim);
    CHECK(p->theta_base > 0 && p->freq_scale > 0, "rope: bad frequency base or scale");
    CHECK(n >= 0 && pos0 >= 0, "rope: negative rows or position");
    TRY(want("rope", "x", x, PL_TYPE_F32, (int64_t)p->n_heads * p->head_dim, n));
    TRY(writable("rope", x));
    if (p->factors) {
        CHECK(p->factors->type == PL_TYPE_F32 &&
                  p->factors->ne0 * p->factors->ne1 == p->rope_dim / 2,
              "rope: frequency factors must be f32 [%d]", p->rope_dim / 2);
        TRY(same_be("rope", x, p->factors));
    }
    return PL_OK;
}

pl_status pl_be_rope(pl_buf *x, int64_t n, int64_t pos0, const pl_rope_params *p) {
    TRY(rope_check(x, n, pos0, p));
    return x->be->m->rope(x->be, x, n, pos0, p);
}

pl_status pl_be_kv_store(const pl_buf *src, int64_t n, int64_t pos0, pl_buf *cache) {
    CHECK(src && cache, "kv_store: missing buffer");
    CHECK(cache->type == PL_TYPE_F32 || cache->type == PL_TYPE_F16 || cache->type == PL_TYPE_Q8_0,
          "kv_store: cache must be f32, f16 or q8_0");
    CHECK(n >= 0 && pos0 >= 0 && pos0 + n <= cache->ne1,
          "kv_store: rows [%lld, %lld) outside a cache of %lld", (long long)pos0,
          (long long)(pos0 + n), (long long)cache->ne1);
    TRY(want("kv_store", "src", src, PL_TYPE_F32, cache->ne0, n));
    TRY(writable("kv_store", cache));
    TRY(same_be("kv_store", src, cache));
    return src->be->m->kv_store(src->be, src, n, pos0, cache);
}

static pl_status attention_check(const pl_buf *q, const pl_buf *k_cache, const pl_buf *v_cache,
                                 int64_t n, int64_t pos0, const pl_attn_params *p,
                                 const pl_buf *out) {
    CHECK(q && k_cache && v_cache && out && p, "attention: missing argument");
    CHECK(p->n_head > 0 && p->n_head_kv > 0 && p->n_head % p->n_head_kv == 0 && p->head_dim > 0 &&
              p->head_dim_v > 0,
          "attention: bad head geometry (%d heads, %d kv heads)", p->n_head, p->n_head_kv);
    CHECK(n >= 0 && pos0 >= 0, "attention: negative rows or position");
    CHECK(k_cache->type == v_cache->type &&
              (k_cache->type == PL_TYPE_F32 || k_cache->type == PL_TYPE_F16 ||
               k_cache->type == PL_TYPE_Q8_0),
          "attention: caches must both be f32, both f16 or both q8_0");
    CHECK(k_cache->ne0 == (int64_t)p->n_head_kv * p->head_dim &&
              v_cache->ne0 == (int64_t)p->n_head_kv * p->head_dim_v,
          "attention: cache rows do not match the kv heads");
    CHECK(pos0 + n <= k_cache->ne1 && pos0 + n <= v_cache->ne1,
          "attention: position %lld past a cache of %lld", (long long)(pos0 + n),
          (long long)k_cache->ne1);
    TRY(want("attention", "q", q, PL_TYPE_F32, (int64_t)p->n_head * p->head_dim, n));
    TRY(want("attention", "out", out, PL_TYPE_F32, (int64_t)p->n_head * p->head_dim_v, n));
    CHECK(out != q, "attention: out must not be q");
    TRY(writable("attention", out));
    TRY(same_be("attention", q, k_cache));
    TRY(same_be("attention", q, v_cache));
    TRY(same_be("attention", q, out));
    return PL_OK;
}

pl_status pl_be_attention(const pl_buf *q, const pl_buf *k_cache, const pl_buf *v_cache, int64_t n,
                          int64_t pos0, const pl_attn_params *p, pl_buf *out) {
    TRY(attention_check(q, k_cache, v_cache, n, pos0, p, out));
    return q->be->m->attention(q->be, q, k_cache, v_cache, n, pos0, p, out);
}

/* The checks every *_cols op shares: cols I32 of 2n values on x's backend. */
static pl_status cols_ok(const char *op, const pl_buf *x, int64_t n, const pl_buf *cols) {
    CHECK(cols, "%s: missing columns", op);
    CHECK(cols->type == PL_TYPE_I32 && cols->ne0 * cols->ne1 >= 2 * n,
          "%s: columns must be i32 [>= 2 x %lld]", op, (long long)n);
    return same_be(op, x, cols);
}

/* A cache of slots: f32 or f16, whole slots of n_ctx rows. */
static pl_status slots_ok(const char *op, const pl_buf *cache, int64_t n_ctx) {
    CHECK(cache->type == PL_TYPE_F32 || cache->type == PL_TYPE_F16,
          "%s: a cache of slots must be f32 or f16", op);
    CHECK(n_ctx > 0 && cache->ne1 % n_ctx == 0, "%s: %lld cache rows are not slots of %lld", op,
          (long long)cache->ne1, (long long)n_ctx);
    return PL_OK;
}

pl_status pl_be_rope_cols(pl_buf *x, int64_t n, const pl_buf *cols, int64_t n_pos,
                          const pl_rope_params *p) {
    CHECK(x && p, "rope: missing argument");
    TRY(cols_ok("rope", x, n, cols));
    CHECK(n_pos > 0 && n_pos <= (INT64_C(1) << 30), "rope: %lld positions", (long long)n_pos);
    TRY(rope_check(x, n, 0, p)); /* the plain op's checks, at position 0 */
    return n ? x->be->m->rope_cols(x->be, x, n, cols, n_pos, p) : PL_OK;
}

pl_status pl_be_kv_store_cols(const pl_buf *src, int64_t n, const pl_buf *cols, int64_t n_ctx,
                              pl_buf *cache) {
    CHECK(src && cache, "kv_store: missing buffer");
    CHECK(n >= 0, "kv_store: negative rows");
    TRY(cols_ok("kv_store", src, n, cols));
    TRY(slots_ok("kv_store", cache, n_ctx));
    TRY(want("kv_store", "src", src, PL_TYPE_F32, cache->ne0, n));
    TRY(writable("kv_store", cache));
    TRY(same_be("kv_store", src, cache));
    return n ? src->be->m->kv_store_cols(src->be, src, n, cols, n_ctx, cache) : PL_OK;
}

pl_status pl_be_attention_cols(const pl_buf *q, const pl_buf *k_cache, const pl_buf *v_cache,
                               int64_t n, const pl_buf *cols, int64_t n_ctx, int64_t max_keys,
                               const pl_attn_params *p, pl_buf *out) {
    CHECK(q && k_cache && v_cache && out && p, "attention: missing argument");
    CHECK(n >= 0, "attention: negative rows");
    TRY(cols_ok("attention", q, n, cols));
    TRY(slots_ok("attention", k_cache, n_ctx));
    CHECK(v_cache->ne1 == k_cache->ne1, "attention: the caches hold different slots");
    CHECK(max_keys > 0 && max_keys <= n_ctx, "attention: %lld keys for slots of %lld",
          (long long)max_keys, (long long)n_ctx);
    TRY(attention_check(q, k_cache, v_cache, n, 0, p, out)); /* the plain op's, at 0 */
    return n ? q->be->m->attention_cols(q->be, q, k_cache, v_cache, n, cols, n_ctx, max_keys, p,
                                        out)
             : PL_OK;
}

pl_status pl_be_swiglu(const pl_buf *gate, const pl_buf *up, int64_t count, pl_buf *out) {
    CHECK(gate && up && out, "swiglu: missing buffer");
    CHECK(gate->type == PL_TYPE_F32 && up->type == PL_TYPE_F32 && out->type == PL_TYPE_F32,
          "swiglu: buffers must be f32");
    CHECK(count >= 0 && count <= nvals(gate) && count <= nvals(up) && count <= nvals(out),
          "swiglu: %lld values do not fit the buffers", (long long)count);
    TRY(writable("swiglu", out));
    TRY(same_be("swiglu", gate, up));
    TRY(same_be("swiglu", gate, out));
    return gate->be->m->swiglu(gate->be, gate, up, count, out);
}

pl_status pl_be_argmax(const pl_buf *x, int64_t rows, pl_buf *ids, int64_t dst0) {
    CHECK(x && ids, "argmax: missing buffer");
    TRY(want("argmax", "x", x, PL_TYPE_F32, -1, rows));
    CHECK(rows >= 0 && ids->type == PL_TYPE_I32 && dst0 >= 0 && dst0 + rows <= nvals(ids),
          "argmax: ids must be i32 with room for %lld values at %lld", (long long)rows,
          (long long)dst0);
    TRY(writable("argmax", ids));
    TRY(same_be("argmax", x, ids));
    return x->be->m->argmax(x->be, x, rows, ids, dst0);
}

pl_status pl_be_topk(const pl_buf *x, int64_t row, int64_t k, pl_buf *ids, pl_buf *vals) {
    CHECK(x && ids && vals, "topk: missing buffer");
    CHECK(x->type == PL_TYPE_F32 && row >= 0 && row < x->ne1, "topk: row %lld outside x",
          (long long)row);
    CHECK(k > 0 && k <= x->ne0, "topk: k = %lld outside [1, %lld]", (long long)k,
          (long long)x->ne0);
    CHECK(ids->type == PL_TYPE_I32 && nvals(ids) >= k, "topk: ids must be i32 [>=%lld]",
          (long long)k);
    CHECK(vals->type == PL_TYPE_F32 && nvals(vals) >= k, "topk: vals must be f32 [>=%lld]",
          (long long)k);
    CHECK(ids != vals, "topk: ids and vals must differ");
    TRY(writable("topk", ids));
    TRY(writable("topk", vals));
    TRY(same_be("topk", x, ids));
    TRY(same_be("topk", x, vals));
    return x->be->m->topk(x->be, x, row, k, ids, vals);
}

pl_status pl_be_copy(const pl_buf *src, int64_t src0, int64_t count, pl_buf *dst, int64_t dst0) {
    CHECK(src && dst, "copy: missing buffer");
    CHECK(!src->weight, "copy: source is a weight");
    CHECK(src->type == dst->type, "copy: types differ (%s, %s)", tname(src->type),
          tname(dst->type));
    CHECK(src->type != PL_TYPE_Q8_0, "copy: q8_0 buffers are not copied by value");
    CHECK(src0 >= 0 && dst0 >= 0 && count >= 0 && src0 + count <= nvals(src) &&
              dst0 + count <= nvals(dst),
          "copy: %lld values outside the buffers", (long long)count);
    CHECK(src != dst || src0 + count <= dst0 || dst0 + count <= src0, "copy: overlapping ranges");
    TRY(writable("copy", dst));
    TRY(same_be("copy", src, dst));
    return src->be->m->copy(src->be, src, src0, count, dst, dst0);
}

/* An F32 (or I32) buffer holding at least `count` values, read flat. */
static pl_status want_flat(const char *op, const char *what, const pl_buf *b, uint32_t t,
                           int64_t count) {
    CHECK(b, "%s: %s is missing", op, what);
    CHECK(b->type == t, "%s: %s has type %s, expected %s", op, what, tname(b->type), tname(t));
    CHECK(count <= nvals(b), "%s: %s holds %lld values, %lld needed", op, what, (long long)nvals(b),
          (long long)count);
    return PL_OK;
}

pl_status pl_be_fuse(pl_backend *be, unsigned kinds) {
    CHECK(be, "fuse: missing backend");
    CHECK((kinds & ~(unsigned)PL_FUSE_ALL) == 0, "fuse: unknown kinds 0x%x", kinds);
    return be->m->fuse(be, kinds);
}

pl_status pl_be_softmax_rows(const pl_buf *x, int64_t rows, int64_t cols, pl_buf *out) {
    CHECK(x && out, "softmax_rows: missing buffer");
    CHECK(rows >= 0 && cols > 0 && rows <= INT64_MAX / cols, "softmax_rows: bad shape");
    TRY(want_flat("softmax_rows", "x", x, PL_TYPE_F32, rows * cols));
    TRY(want_flat("softmax_rows", "out", out, PL_TYPE_F32, rows * cols));
    TRY(writable("softmax_rows", out));
    TRY(same_be("softmax_rows", x, out));
    return x->be->m->softmax_rows(x->be, x, rows, cols, out);
}

pl_status pl_be_topk_rows(const pl_buf *x, int64_t rows, int64_t cols, int64_t k, pl_buf *ids,
                          pl_buf *vals) {
    CHECK(x && ids && vals, "topk_rows: missing buffer");
    CHECK(rows >= 0 && cols > 0 && rows <= INT64_MAX / cols, "topk_rows: bad shape");
    CHECK(k > 0 && k <= cols, "topk_rows: k = %lld outside [1, %lld]", (long long)k,
          (long long)cols);
    TRY(want_flat("topk_rows", "x", x, PL_TYPE_F32, rows * cols));
    TRY(want_flat("topk_rows", "ids", ids, PL_TYPE_I32, rows * k));
    TRY(want_flat("topk_rows", "vals", vals, PL_TYPE_F32, rows * k));
    CHECK(ids != vals && x != vals, "topk_rows: x, ids and vals must differ");
    TRY(writable("topk_rows", ids));
    TRY(writable("topk_rows", vals));
    TRY(same_be("topk_rows", x, ids));
    TRY(same_be("topk_rows", x, vals));
    return x->be->m->topk_rows(x->be, x, rows, cols, k, ids, vals);
}

pl_status pl_be_matmul_id(const pl_buf *w, int64_t n_exp, const pl_buf *x, const pl_buf *ids,
                          int64_t n, int64_t n_used, bool x_shared, pl_buf *out) {
    CHECK(w && w->weight, "matmul_id: w must be a weight");
    CHECK(n_exp > 0 && w->ne1 % n_exp == 0, "matmul_id: %lld rows are not %lld experts",
          (long long)w->ne1, (long long)n_exp);
    CHECK(n >= 0 && n_used > 0 && n_used <= n_exp && n <= INT64_MAX / n_used,
          "matmul_id: bad token or slot count");
    int64_t slots = n * n_used;
    TRY(want("matmul_id", "x", x, PL_TYPE_F32, w->ne0, x_shared ? n : slots));
    TRY(want("matmul_id", "out", out, PL_TYPE_F32, w->ne1 / n_exp, slots));
    TRY(want_flat("matmul_id", "ids", ids, PL_TYPE_I32, slots));
    CHECK(out != x && out != ids, "matmul_id: out must not be x or ids");
    TRY(writable("matmul_id", out));
    TRY(same_be("matmul_id", w, x));
    TRY(same_be("matmul_id", w, ids));
    TRY(same_be("matmul_id", w, out));
    return w->be->m->matmul_id(w->be, w, n_exp, x, ids, n, n_used, x_shared, out);
}

pl_status pl_be_moe_combine(const pl_buf *y, const pl_buf *wts, int64_t n, int64_t n_used,
                            bool accumulate, pl_buf *out) {
    CHECK(y && wts && out, "moe_combine: missing buffer");
    CHECK(n >= 0 && n_used > 0 && n <= INT64_MAX / n_used, "moe_combine: bad shape");
    TRY(want("moe_combine", "y", y, PL_TYPE_F32, -1, n * n_used));
    TRY(want("moe_combine", "out", out, PL_TYPE_F32, y->ne0, n));
    TRY(want_flat("moe_combine", "wts", wts, PL_TYPE_F32, n * n_used));
    CHECK(out != y && out != wts, "moe_combine: out must not be y or wts");
    TRY(writable("moe_combine", out));
    TRY(same_be("moe_combine", y, wts));
    TRY(same_be("moe_combine", y, out));
    return y->be->m->moe_combine(y->be, y, wts, n, n_used, accumulate, out);
}

pl_status pl_be_sigmoid_mul(const pl_buf *x, const pl_buf *g, int64_t rows, int64_t cols,
                            int64_t g_cols, bool accumulate, pl_buf *out) {
    CHECK(x && g && out, "sigmoid_mul: missing buffer");
    CHECK(rows >= 0 && cols > 0 && rows <= INT64_MAX / cols, "sigmoid_mul: bad shape");
    CHECK(g_cols == 1 || g_cols == cols, "sigmoid_mul: g_cols must be 1 or %lld", (long long)cols);
    TRY(want_flat("sigmoid_mul", "x", x, PL_TYPE_F32, rows * cols));
    TRY(want_flat("sigmoid_mul", "g", g, PL_TYPE_F32, rows * g_cols));
    TRY(want_flat("sigmoid_mul", "out", out, PL_TYPE_F32, rows * cols));
    CHECK(out != g, "sigmoid_mul: out must not be g");
    CHECK(!accumulate || out != x, "sigmoid_mul: out must not be x when accumulating");
    TRY(writable("sigmoid_mul", out));
    TRY(same_be("sigmoid_mul", x, g));
    TRY(same_be("sigmoid_mul", x, out));
    return x->be->m->sigmoid_mul(x->be, x, g, rows, cols, g_cols, accumulate, out);
}

pl_status pl_be_ssm_conv(const pl_buf *x, const pl_buf *w, pl_buf *state, int64_t n, pl_buf *snaps,
                         pl_buf *out) {
    CHECK(w && w->weight && w->type == PL_TYPE_F32, "ssm_conv: w must be an f32 weight");
    CHECK(w->ne0 >= 2 && w->ne0 <= 16, "ssm_conv: kernel width %lld outside [2, 16]",
          (long long)w->ne0);
    CHECK(n >= 0, "ssm_conv: negative row count");
    int64_t ch = w->ne1, km1 = w->ne0 - 1;
    TRY(want("ssm_conv", "x", x, PL_TYPE_F32, ch, n));
    TRY(want("ssm_conv", "out", out, PL_TYPE_F32, ch, n));
    TRY(want("ssm_conv", "state", state, PL_TYPE_F32, ch, km1));
    if (snaps) {
        TRY(want("ssm_conv", "snaps", snaps, PL_TYPE_F32, ch, n * km1));
        TRY(writable("ssm_conv", snaps));
        TRY(same_be("ssm_conv", w, snaps));
    }
    CHECK(out != x && out != state && state != x &&
              (!snaps || (snaps != out && snaps != x && snaps != state)),
          "ssm_conv: x, state, snaps and out must differ");
    TRY(writable("ssm_conv", out));
    TRY(writable("ssm_conv", state));
    TRY(same_be("ssm_conv", w, x));
    TRY(same_be("ssm_conv", w, state));
    TRY(same_be("ssm_conv", w, out));
    return w->be->m->ssm_conv(w->be, x, w, state, n, snaps, out);
}

pl_status pl_be_delta_rule(const pl_buf *qkv, const pl_buf *a, const pl_buf *b, const pl_buf *ssm_a,
                           const pl_buf *dt_bias, pl_buf *state, int64_t n,
                           const pl_delta_params *p, pl_buf *snaps, pl_buf *out) {
    CHECK(p, "delta_rule: missing parameters");
    CHECK(p->n_k_heads > 0 && p->n_v_heads > 0 && p->n_v_heads % p->n_k_heads == 0,
          "delta_rule: %d value heads cannot share %d key heads", p->n_v_heads, p->n_k_heads);
    CHECK(p->d_k > 0 && p->d_v > 0 && p->d_k <= 1024 && p->d_v <= 1024,
          "delta_rule: head sizes %d, %d outside [1, 1024]", p->d_k, p->d_v);
    CHECK(p->eps >= 0, "delta_rule: negative eps");
    CHECK(n >= 0, "delta_rule: negative row count");
    int64_t nk = p->n_k_heads, nv = p->n_v_heads, dk = p->d_k, dv = p->d_v;
    TRY(want("delta_rule", "qkv", qkv, PL_TYPE_F32, 2 * nk * dk + nv * dv, n));
    TRY(want("delta_rule", "a", a, PL_TYPE_F32, nv, n));
    TRY(want("delta_rule", "b", b, PL_TYPE_F32, nv, n));
    TRY(want_flat("delta_rule", "ssm_a", ssm_a, PL_TYPE_F32, nv));
    TRY(want_flat("delta_rule", "dt_bias", dt_bias, PL_TYPE_F32, nv));
    TRY(want("delta_rule", "state", state, PL_TYPE_F32, dk * dv, nv));
    TRY(want("delta_rule", "out", out, PL_TYPE_F32, nv * dv, n));
    if (snaps) {
        TRY(want("delta_rule", "snaps", snaps, PL_TYPE_F32, dk * dv, n * nv));
        TRY(writable("delta_rule", snaps));
        TRY(same_be("delta_rule", qkv, snaps));
        CHECK(snaps != out && snaps != state && snaps != qkv && snaps != a && snaps != b,
              "delta_rule: snaps must differ from the other buffers");
    }
    CHECK(out != qkv && out != a && out != b && out != state && state != qkv && state != a &&
              state != b,
          "delta_rule: out and state must differ from the inputs and each other");
    TRY(writable("delta_rule", out));
    TRY(writable("delta_rule", state));
    const pl_buf *all[] = {a, b, ssm_a, dt_bias, state, out};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) TRY(same_be("delta_rule", qkv, all[i]));
    return qkv->be->m->delta_rule(qkv->be, qkv, a, b, ssm_a, dt_bias, state, n, p, snaps, out);
}

void pl_be_destroy(pl_backend *be) {
    if (be) be->m->destroy(be);
}
