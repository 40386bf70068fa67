/* backend.h - the seam between the model code and the device that runs it.
 *
 * A backend is one methods struct (every slot filled) plus the buffers it owns. The model
 * code (src/model/) only ever calls the pl_be_* wrappers below; it never names a backend.
 * src/cpu/ implements the methods with plain C, src/gpu/ over WebGPU.
 *
 * Execution model, chosen so a GPU can record a whole token's work into one command buffer
 * and submit it once:
 *   - Ops take backend-owned buffers (pl_buf). Weights are wrapped once at load time (on
 *     the CPU a zero-copy view of the mapped file; a GPU uploads them). Activations, the
 *     token ids and the KV cache are buffers too, so nothing has to leave the device
 *     between ops: the next token's id can be written by argmax and read by embed on the
 *     device.
 *   - Ops and writes take effect in call order. A backend may defer them (record them);
 *     only pl_be_read() waits for the work before it and returns bytes to the host.
 *   - Every op validates its arguments in backend.c before the backend sees them, so a
 *     backend may assume shapes, types and ranges are consistent.
 *
 * Shapes are written [rows, cols] with cols the contiguous (innermost) dimension, which is
 * GGUF's ne0. A buffer has a fixed capacity of ne1 rows of ne0 values; ops name how many
 * rows they use. All activations are F32. */
#ifndef PL_BACKEND_BACKEND_H
#define PL_BACKEND_BACKEND_H

#include <stdbool.h>
#include <stdint.h>

#include "../base/status.h"
#include "../format/quant.h"

typedef struct pl_backend pl_backend;

/* What every buffer carries; a backend allocates a larger struct with this as its first
 * member. Fields are read-only outside the owning backend. */
typedef struct pl_buf {
    pl_backend *be;
    uint32_t
        type;    /* pl_type: F32 / F16 / I32 for buffers made by buf_new, any format for weights */
    int64_t ne0; /* values per row */
    int64_t ne1; /* rows */
    bool weight; /* made by buf_weight: read-only, never an op's destination */
    bool view;   /* made by buf_view: rows of another buffer */
} pl_buf;

/* RoPE pair layout. NORMAL rotates adjacent pairs (x[2i], x[2i+1]) - llama GGUFs, whose q/k
 * rows the converter permuted; NEOX rotates the halves (x[i], x[i + rope_dim/2]) - qwen2/3. */
typedef enum { PL_ROPE_NORMAL = 0, PL_ROPE_NEOX = 2 } pl_rope_mode;

typedef struct {
    pl_rope_mode mode;
    int n_heads;           /* heads in a row */
    int head_dim;          /* values per head */
    int rope_dim;          /* the first rope_dim values of each head rotate (even, <= head_dim) */
    float theta_base;      /* frequency base: theta_i = pos * freq_scale * base^(-2i/rope_dim) */
    float freq_scale;      /* 1 / linear scaling factor (1 = none) */
    const pl_buf *factors; /* NULL, or F32 [rope_dim/2]: theta_i is divided by factors[i]
                            * (Llama 3 rope_freqs) */
} pl_rope_params;

typedef struct {
    int n_head;     /* query heads */
    int n_head_kv;  /* key/value heads; n_head is a multiple (grouped-query attention) */
    int head_dim;   /* query/key values per head */
    int head_dim_v; /* value values per head */
    float scale;    /* multiplies q.k before the softmax, usually 1/sqrt(head_dim) */
} pl_attn_params;

/* Gated DeltaNet shapes (the linear attention of the Qwen3.5 family). */
typedef struct {
    int n_k_heads; /* query/key heads */
    int n_v_heads; /* value heads, a multiple of n_k_heads; value head h reads query/key head
                    * h % n_k_heads (the tiled order llama.cpp's converter writes) */
    int d_k;       /* values per query/key head */
    int d_v;       /* values per value head */
    float eps;     /* of the L2 norms of q and k: x / sqrt(sum(x^2) + eps) */
} pl_delta_params;

/* Fused kernels a model may ask for (pl_be_fuse), as a mask. Each names a pattern of
 * consecutive ops (dead-end ops of other kinds may sit between them where said):
 *   NORM_MATMUL  rms_norm(x -> xn) then the matmuls reading xn: they normalise x themselves
 *   QKV          three matmuls of the same x (q, k, v): one sweep over the three weights
 *   NORM_ROPE    an in-place per-head rms_norm, then (later) the rope of the same rows
 *   ROPE_STORE   rope(k) then kv_store(k) and kv_store(v) of the same rows
 *   ROPE_PAIR    rope(q) then rope(k) at the same positions
 *   GATE_UP      matmul(Wg, x -> g), matmul(Wu, x -> u), swiglu(g, u): one gate/up pass;
 *                also matmul_id(Wg, ...), matmul_id(Wu, ...) of the same x and ids + swiglu
 *   ROUTER       topk_rows(x -> ids, vals) then softmax_rows(vals in place) over the k
 *   NORM_GATE    an in-place rms_norm(o) then swiglu(z, o): the gated RMSNorm in one pass
 *   SHARED_GATE  topk_rows(x -> ids, vals) [+ its ROUTER softmax] then matmul(w, xn) of a
 *                1-row F32 w (the MoE shared expert's gate): one kernel writes both
 *   COMBINE_SHARED  moe_combine(y, wts -> x, accumulate) then sigmoid_mul(ysh, g -> x,
 *                accumulate, one g per row): the routed experts and the gated shared one
 *                added to x in one pass
 * QKV also takes a fourth matmul of the same x right after the three where it can. */
enum {
    PL_FUSE_NORM_MATMUL = 1u << 0,
    PL_FUSE_QKV = 1u << 1,
    PL_FUSE_NORM_ROPE = 1u << 2,
    PL_FUSE_ROPE_STORE = 1u << 3,
    PL_FUSE_ROPE_PAIR = 1u << 4,
    PL_FUSE_GATE_UP = 1u << 5,
    PL_FUSE_ROUTER = 1u << 6,
    PL_FUSE_NORM_GATE = 1u << 7,
    PL_FUSE_SHARED_GATE = 1u << 8,
    PL_FUSE_COMBINE_SHARED = 1u << 9,
    PL_FUSE_ALL = (1u << 10) - 1
};

/* One read of pl_be_read_many: bytes [offset, offset + nbytes) of src into dst. */
typedef struct {
    const pl_buf *src;
    int64_t offset;
    void *dst;
    int64_t nbytes;
} pl_read_range;
#define PL_READ_MANY_MAX 8

/* The methods a backend fills in. Arguments arrive already checked by backend.c.
 * n = rows used in this call. */
typedef struct pl_backend_methods {
    /* ---- buffers ---- */
    /* A zeroed buffer of ne1 rows x ne0 values of type F32, F16 or I32. */
    pl_status (*buf_new)(pl_backend *be, uint32_t type, int64_t ne0, int64_t ne1, pl_buf **out);
    /* A weight tensor [ne1, ne0] of any readable type whose bytes (pl_row_size(type, ne0) *
     * ne1 of them) stay valid and unchanged until the buffer is freed (the mapped file). */
    pl_status (*buf_weight)(pl_backend *be, uint32_t type, int64_t ne0, int64_t ne1,
                            const void *data, pl_buf **out);
    /* The weight buffers made from now until the next call are about `bytes` in all (one
     * model, or a part of one, as its loader announces them): a backend that keeps weights
     * in memory of its own may decide here whether they fit, and size that memory (the CPU
     * backend's pl_cpu_opts.anon_weights). A hint: more or fewer may come. */
    pl_status (*weights_expect)(pl_backend *be, uint64_t bytes);
    void (*buf_free)(pl_backend *be, pl_buf *b);
    /* A buffer that is rows [row0, row0 + rows) of parent (F32 or F16, made by buf_new, not
     * itself a view): ops and reads through it see and change the parent's values. Freed
     * with buf_free, before the parent. It lets a batched pass hand one column's rows to an
     * op without copying them out and back (llama.c's batched decode step). A backend may
     * refuse a placement it cannot bind (WebGPU: the byte offset must be a multiple of the
     * adapter's storage alignment) with a failure; callers then copy. */
    pl_status (*buf_view)(pl_backend *be, pl_buf *parent, int64_t row0, int64_t rows, pl_buf **out);
    /* Host -> buffer, bytes [offset, offset+nbytes); in call order with the ops. */
    pl_status (*write)(pl_backend *be, pl_buf *dst, int64_t offset, const void *src,
                       int64_t nbytes);
    /* Buffer -> host. Waits for every op issued before it: the only synchronising call. */
    pl_status (*read)(pl_backend *be, const pl_buf *src, int64_t offset, void *dst, int64_t nbytes);
    /* n reads (2 to PL_READ_MANY_MAX, all of this backend's buffers) after ONE wait for the
     * ops before them: what n reads in a row give, where a GPU pays its fixed cost of a
     * read back once (a room's host reads the picked id and the next hidden row). */
    pl_status (*read_many)(pl_backend *be, const pl_read_range *r, int n);
    /* ---- a pass prepared before its input arrives (a room's stage between frames) ----
     * Only on a backend with can_prepare set, which records ops until a read or write.
     * prepare: the ops issued since the last write, read or prepare form a pass; the backend
     * gets it ready to run (the GPU: its command buffers encoded, not submitted) with the
     * reads r[0..n) after it (1 to PL_READ_MANY_MAX). Nothing runs. run_prepared: writes
     * src's nbytes into input at offset 0, runs the pass, waits once, fills the reads: what
     * write + the same ops + read_many give, the write first though the ops were issued
     * before it. Any other call on the backend before run_prepared (an op, a write, a read,
     * a free) drops the pass unrun (has_prepared then false, run_prepared fails): the
     * caller then issues the ops again. */
    pl_status (*prepare)(pl_backend *be, pl_buf *input, const pl_read_range *r, int n);
    pl_status (*run_prepared)(pl_backend *be, const void *src, int64_t nbytes);
    bool (*has_prepared)(const pl_backend *be);

    /* ---- ops (all F32 activations unless said otherwise) ---- */
    /* out[i, :] = table[ids[i], :] dequantised.  table [n_vocab, d] any type; ids I32 [>=n];
     * out [>=n, d]. An id outside [0, n_vocab) gives a zero row (the runtime checks ids). */
    pl_status (*embed)(pl_backend *be, const pl_buf *table, const pl_buf *ids, int64_t n,
                       pl_buf *out);
    /* out[r, :] = x[r, :] / sqrt(mean(x[r, :]^2) + eps) * w.  x, out: rows x cols values
     * read as contiguous rows (so a [n, heads*hd] buffer can be normed per head with
     * rows = n*heads, cols = hd); w F32 [cols]. out may be x. */
    pl_status (*rms_norm)(pl_backend *be, const pl_buf *x, const pl_buf *w, int64_t rows,
                          int64_t cols, float eps, pl_buf *out);
    /* out[i, :] (+)= W x[i, :] + bias for i < n.  W [n_out, k] any type; x [>=n, k];
     * bias NULL or F32 [n_out]; out [>=n, n_out]; accumulate adds into out (the residual
     * add fused). out must not be x. With the backend's act_q8 set and W in Q4_0 or Q8_0,
     * each row of x is first quantised to Q8_0 blocks (pl_quant_act_q8_0) and every block
     * product is an integer dot scaled by the two block scales, as llama.cpp does (the CPU
     * also quantises per 256 values for Q4_K/Q5_K/Q6_K weights, and to Q8_0 blocks for
     * Q4_1/Q5_0/Q5_1/IQ4_NL/IQ4_XS weights: docs/backend.md, src/cpu/cpu_qdot_more.c). */
    pl_status (*matmul)(pl_backend *be, const pl_buf *w, const pl_buf *x, const pl_buf *bias,
                        int64_t n, bool accumulate, pl_buf *out);
    /* out[i] = a[i] + b[i] for the first count values. out may be a or b. */
    pl_status (*add)(pl_backend *be, const pl_buf *a, const pl_buf *b, int64_t count, pl_buf *out);
    /* Rotate x in place: row i is at position pos0 + i.  x [>=n, n_heads*head_dim]. */
    pl_status (*rope)(pl_backend *be, pl_buf *x, int64_t n, int64_t pos0, const pl_rope_params *p);
    /* cache[pos0 + i, :] = src[i, :] for i < n, converted to the cache's type (F32, F16 or
     * Q8_0). src [>=n, d]; cache [n_ctx, d]; pos0 + n <= n_ctx. A Q8_0 cache (d a multiple
     * of 32) holds every row's int8 quants (n_ctx * d bytes, row by row), then one f16
     * scale per 32 consecutive values of a row (n_ctx * d / 32 halves), each block
     * quantised as pl_quant_act_q8_0 does: the same bytes on every backend. */
    pl_status (*kv_store)(pl_backend *be, const pl_buf *src, int64_t n, int64_t pos0,
                          pl_buf *cache);
    /* Causal attention over the cache: query row i (position pos0 + i) attends cache rows
     * 0..pos0+i.  q [>=n, n_head*head_dim]; k_cache [n_ctx, n_head_kv*head_dim];
     * v_cache [n_ctx, n_head_kv*head_dim_v] (F32, F16 or Q8_0, both the same);
     * out [>=n, n_head*head_dim_v]. Query head h uses kv head h / (n_head / n_head_kv).
     * F32 caches: float32 arithmetic. Q8_0 caches: each value dequantised (quant x scale,
     * exact in float32), then the F32 arithmetic. F16 caches: a backend may compute at half
     * precision (the CPU backend rounds q and the value accumulator to f16 as llama.cpp's
     * one-token path does, see cpu_attention.c, and like llama.cpp takes calls of 64 rows
     * or more in float32 tiles, cpu_attention_tiled.c: there a row's result depends on the
     * call's size); compare backends on F16 caches with an f16-sized tolerance. */
    pl_status (*attention)(pl_backend *be, const pl_buf *q, const pl_buf *k_cache,
                           const pl_buf *v_cache, int64_t n, int64_t pos0, const pl_attn_params *p,
                           pl_buf *out);
    /* ---- columns of separate sequences (a batched decode step, llama.c) ----
     * Row i of a batch belongs to its own sequence: cols I32 [>= 2n] holds its slot
     * cols[2i] and its position cols[2i+1]. A cache of slots keeps n_ctx rows for each:
     * slot s's position p is row s * n_ctx + p (F32 or F16 only). Each column gets exactly
     * what the single-sequence op gives a row of its own at its position over its slot's
     * rows (a view of them), so a batched step matches each sequence's own. Positions are
     * below max_keys <= n_ctx, slots below cache rows / n_ctx: the CPU refuses others; a
     * GPU cannot read the ids before it runs, so the callers keep to this. */
    /* rope: row i at position cols[2i+1] (below n_pos). */
    pl_status (*rope_cols)(pl_backend *be, pl_buf *x, int64_t n, const pl_buf *cols, int64_t n_pos,
                           const pl_rope_params *p);
    /* kv_store: src row i into its slot's row of its position. */
    pl_status (*kv_store_cols)(pl_backend *be, const pl_buf *src, int64_t n, const pl_buf *cols,
                               int64_t n_ctx, pl_buf *cache);
    /* attention: query row i over rows 0..cols[2i+1] of its slot. */
    pl_status (*attention_cols)(pl_backend *be, const pl_buf *q, const pl_buf *k_cache,
                                const pl_buf *v_cache, int64_t n, const pl_buf *cols, int64_t n_ctx,
                                int64_t max_keys, const pl_attn_params *p, pl_buf *out);
    /* out[i] = silu(gate[i]) * up[i] for the first count values; silu(x) = x / (1 + e^-x). */
    pl_status (*swiglu)(pl_backend *be, const pl_buf *gate, const pl_buf *up, int64_t count,
                        pl_buf *out);
    /* ids[dst0 + r] = index of the largest value of x row r, for r < rows (ties: lowest
     * index; NaN values are skipped, and a row of NaN alone gives -1).  x [>=rows, cols];
     * ids I32. */
    pl_status (*argmax)(pl_backend *be, const pl_buf *x, int64_t rows, pl_buf *ids, int64_t dst0);
    /* The k largest values of x row `row`, descending (ties: lower index first; NaN values
     * are skipped, and places left over get id -1, value -inf): ids I32 [>=k], vals F32
     * [>=k]. */
    pl_status (*topk)(pl_backend *be, const pl_buf *x, int64_t row, int64_t k, pl_buf *ids,
                      pl_buf *vals);
    /* dst values [dst0, dst0+count) = src values [src0, src0+count); same type, F32/F16/I32. */
    pl_status (*copy)(pl_backend *be, const pl_buf *src, int64_t src0, int64_t count, pl_buf *dst,
                      int64_t dst0);

    /* ---- mixture of experts ---- */
    /* out[r, :] = softmax(x[r, :]) for r < rows: exp(x - max) / sum, in float32. x, out
     * [>=rows, cols] read as contiguous rows (like rms_norm); out may be x. */
    pl_status (*softmax_rows)(pl_backend *be, const pl_buf *x, int64_t rows, int64_t cols,
                              pl_buf *out);
    /* For each of rows rows of cols values (read as contiguous rows): the k largest values,
     * descending, ties by lower index first, NaN skipped (places left over: id -1, value
     * -inf), into ids[r*k + j] (I32) and vals[r*k + j] (F32), read flat. */
    pl_status (*topk_rows)(pl_backend *be, const pl_buf *x, int64_t rows, int64_t cols, int64_t k,
                           pl_buf *ids, pl_buf *vals);
    /* Gathered expert matmul. w stacks n_exp matrices of [n_out, k] as one [n_exp*n_out, k]
     * weight (a GGUF [k, n_out, n_exp] tensor); expert e is rows [e*n_out, (e+1)*n_out).
     * For token i < n and slot j < n_used, with e = ids[i*n_used + j] (I32, read flat):
     *   out[i*n_used + j, :] = W_e x_r,  x_r = x[i] when x_shared, else x[i*n_used + j].
     * An e outside [0, n_exp) gives a zero row. out [>= n*n_used, n_out], not x. act_q8
     * applies as in matmul. Only the selected experts' rows are read. */
    pl_status (*matmul_id)(pl_backend *be, const pl_buf *w, int64_t n_exp, const pl_buf *x,
                           const pl_buf *ids, int64_t n, int64_t n_used, bool x_shared,
                           pl_buf *out);
    /* out[i, :] (+)= sum over j < n_used, in order, of wts[i*n_used + j] * y[i*n_used + j, :]
     * for i < n.  y [>= n*n_used, d]; wts F32 read flat; out [>= n, d], not y; accumulate
     * adds into out (the residual). */
    pl_status (*moe_combine)(pl_backend *be, const pl_buf *y, const pl_buf *wts, int64_t n,
                             int64_t n_used, bool accumulate, pl_buf *out);

    /* ---- gates and the Gated DeltaNet ---- */
    /* out[r, c] (+)= x[r, c] * sigmoid(g[r, g_cols == 1 ? 0 : c]) for r < rows, c < cols:
     * a gate per value (g_cols == cols) or one per row (g_cols == 1, e.g. a shared expert's
     * gate). x, out [>=rows, cols] and g [>=rows, g_cols] read as contiguous rows; out may
     * be x unless accumulate. */
    pl_status (*sigmoid_mul)(pl_backend *be, const pl_buf *x, const pl_buf *g, int64_t rows,
                             int64_t cols, int64_t g_cols, bool accumulate, pl_buf *out);
    /* Causal depthwise convolution over time followed by SiLU, per channel. w F32
     * [channels, K] (the GGUF's ssm_conv1d [K, channels]); state F32 [K-1, channels]: the
     * inputs at the K-1 positions before x's first row (zeros at a sequence's start),
     * replaced by the last K-1 inputs on return. With in = the state's rows then x's rows:
     *   out[t, c] = silu(sum over j < K of w[c, j] * in[t + j, c])  for t < n.
     * x, out [>= n, channels], out not x. snaps NULL, or F32 [>= n*(K-1), channels]: rows
     * [t*(K-1), (t+1)*(K-1)) get the state as it is after row t (for rewinding). */
    pl_status (*ssm_conv)(pl_backend *be, const pl_buf *x, const pl_buf *w, pl_buf *state,
                          int64_t n, pl_buf *snaps, pl_buf *out);
    /* The gated delta rule over n tokens, in order. qkv [>= n, 2*n_k*d_k + n_v*d_v]: row t
     * holds q (n_k heads of d_k), k (n_k heads of d_k), v (n_v heads of d_v). a, b F32
     * [>= n, n_v] (the alpha and beta projections); ssm_a F32 [n_v] (= -exp(A_log), the
     * GGUF's ssm_a); dt_bias F32 [n_v]. state F32 [n_v, d_k*d_v]: head h's S[i][j] (i < d_k,
     * j < d_v) at row h, i*d_v + j; zeros at a sequence's start; updated. For token t and
     * value head h, with kh = h % n_k:
     *   q = l2norm(q_kh) / sqrt(d_k),  k = l2norm(k_kh),  beta = sigmoid(b[t, h]),
     *   g = exp(ssm_a[h] * softplus(a[t, h] + dt_bias[h]))   (softplus(x) = x above 20)
     *   S = g * S;  S += k (beta * (v_h - S^T k))^T;  out[t, h*d_v + j] = (S^T q)_j
     * out [>= n, n_v*d_v]. snaps NULL, or F32 [>= n*n_v, d_k*d_v]: rows [t*n_v, (t+1)*n_v)
     * get the state as it is after token t. */
    pl_status (*delta_rule)(pl_backend *be, const pl_buf *qkv, const pl_buf *a, const pl_buf *b,
                            const pl_buf *ssm_a, const pl_buf *dt_bias, pl_buf *state, int64_t n,
                            const pl_delta_params *p, pl_buf *snaps, pl_buf *out);

    /* ---- fusion requests ---- */
    /* The ops issued from now until the next fuse call form one group, which asks for the
     * fused kernels in `kinds` (PL_FUSE_*; 0: no group). A backend with fused kernels fuses
     * only inside groups that ask, and counts a requested kind that found no ops of its
     * pattern in the group (the model's order changed): see pl_gpu_backend_fusions_missed.
     * A kind whose ops were found but cannot be fused on this device or for these weight
     * types (different formats, binding limits) is not missed. A backend without fused
     * kernels ignores the call (the CPU). */
    pl_status (*fuse)(pl_backend *be, unsigned kinds);

    /* ---- lifetime ---- */
    /* Free the backend; every buffer must have been freed before. */
    void (*destroy)(pl_backend *be);
} pl_backend_methods;

/* Every slot of pl_backend_methods, in order, as an X-macro: X(name) for each. backend.c
 * statically asserts that the list covers the whole struct, so a slot added to the struct
 * but not here fails the build. */
#define PL_BACKEND_SLOTS(X)                                                                        \
    X(buf_new)                                                                                     \
    X(buf_weight)                                                                                  \
    X(weights_expect)                                                                              \
    X(buf_free)                                                                                    \
    X(buf_view)                                                                                    \
    X(write)                                                                                       \
    X(read)                                                                                        \
    X(read_many)                                                                                   \
    X(prepare)                                                                                     \
    X(run_prepared)                                                                                \
    X(has_prepared)                                                                                \
    X(embed)                                                                                       \
    X(rms_norm)                                                                                    \
    X(matmul)                                                                                      \
    X(add)                                                                                         \
    X(rope)                                                                                        \
    X(kv_store)                                                                                    \
    X(attention)                                                                                   \
    X(rope_cols)                                                                                   \
    X(kv_store_cols)                                                                               \
    X(attention_cols) X(swiglu) X(argmax) X(topk) X(copy) X(softmax_rows) X(topk_rows)             \
        X(matmul_id) X(moe_combine) X(sigmoid_mul) X(ssm_conv) X(delta_rule) X(fuse) X(destroy)

/* A backend instance; the implementation embeds it as its first member. */
struct pl_backend {
    const pl_backend_methods *m;
    const char *name;  /* "cpu", "webgpu" */
    char device[160];  /* one line for reports: "cpu, 2 threads" */
    int64_t live_bufs; /* maintained by backend.c: buffers not yet freed */
    /* Quantised activations for Q4_0/Q8_0 weights (see matmul). 0 when a backend is
     * created: exact float activations, the reference; pl_backend_open sets it as asked
     * (on by default: it is llama.cpp's arithmetic, and 1.5-2x faster on a GPU). */
    int act_q8;
    /* The largest buffer one op can bind, in bytes (a GPU's max buffer / storage binding
     * size), or 0: only the machine's memory limits it. Callers check big allocations (the
     * KV cache) against it up front, for a clear error. */
    uint64_t max_buf_bytes;
    /* The backend records ops and runs them at a read (the GPU), so it can prepare a pass
     * before its input is known (pl_be_prepare); 0: ops run as they are issued (the CPU). */
    int can_prepare;
};

/* Fails with "<name> backend: method slot <slot> is empty" for the first NULL slot of
 * be->m (or a missing methods struct). Every backend's constructor calls it before the
 * backend is used, so a slot left out of a designated initializer is caught at creation,
 * never called. */
pl_status pl_be_check_methods(const pl_backend *be);

/* ---- checked wrappers: what the model and runtime call ---- */

pl_status pl_be_buf_new(pl_backend *be, uint32_t type, int64_t ne0, int64_t ne1, pl_buf **out);
pl_status pl_be_buf_weight(pl_backend *be, uint32_t type, int64_t ne0, int64_t ne1,
                           const void *data, pl_buf **out);
pl_status pl_be_weights_expect(pl_backend *be, uint64_t bytes);
/* NULL is fine. */
void pl_be_buf_free(pl_buf *b);
/* Rows [row0, row0 + rows) of parent as a buffer of their own (buf_view above). */
pl_status pl_be_buf_view(pl_buf *parent, int64_t row0, int64_t rows, pl_buf **out);
pl_status pl_be_write(pl_buf *dst, int64_t offset, const void *src, int64_t nbytes);
pl_status pl_be_read(const pl_buf *src, int64_t offset, void *dst, int64_t nbytes);
/* r[0..n) read after one wait (1 <= n <= PL_READ_MANY_MAX, one backend's buffers): the
 * bytes n pl_be_read calls in a row give. */
pl_status pl_be_read_many(const pl_read_range *r, int n);
/* A pass prepared before its input arrives (the prepare slot above): input an F32 buffer
 * of be's, r as read_many's. Fails on a backend without can_prepare. */
pl_status pl_be_prepare(pl_buf *input, const pl_read_range *r, int n);
/* Write src's nbytes (a multiple of 4, within the input) into the prepared pass's input,
 * run it, fill its reads. Fails when no pass is prepared (another call dropped it). */
pl_status pl_be_run_prepared(pl_backend *be, const void *src, int64_t nbytes);
bool pl_be_has_prepared(const pl_backend *be);

pl_status pl_be_embed(const pl_buf *table, const pl_buf *ids, int64_t n, pl_buf *out);
pl_status pl_be_rms_norm(const pl_buf *x, const pl_buf *w, int64_t rows, int64_t cols, float eps,
                         pl_buf *out);
pl_status pl_be_matmul(const pl_buf *w, const pl_buf *x, const pl_buf *bias, int64_t n,
                       bool accumulate, pl_buf *out);
pl_status pl_be_add(const pl_buf *a, const pl_buf *b, int64_t count, pl_buf *out);
pl_status pl_be_rope(pl_buf *x, int64_t n, int64_t pos0, const pl_rope_params *p);
pl_status pl_be_kv_store(const pl_buf *src, int64_t n, int64_t pos0, pl_buf *cache);
pl_status pl_be_rope_cols(pl_buf *x, int64_t n, const pl_buf *cols, int64_t n_pos,
                          const pl_rope_params *p);
pl_status pl_be_kv_store_cols(const pl_buf *src, int64_t n, const pl_buf *cols, int64_t n_ctx,
                              pl_buf *cache);
pl_status pl_be_attention_cols(const pl_buf *q, const pl_buf *k_cache, const pl_buf *v_cache,
                               int64_t n, const pl_buf *cols, int64_t n_ctx, int64_t max_keys,
                               const pl_attn_params *p, pl_buf *out);
pl_status pl_be_attention(const pl_buf *q, const pl_buf *k_cache, const pl_buf *v_cache, int64_t n,
                          int64_t pos0, const pl_attn_params *p, pl_buf *out);
pl_status pl_be_swiglu(const pl_buf *gate, const pl_buf *up, int64_t count, pl_buf *out);
pl_status pl_be_argmax(const pl_buf *x, int64_t rows, pl_buf *ids, int64_t dst0);
pl_status pl_be_topk(const pl_buf *x, int64_t row, int64_t k, pl_buf *ids, pl_buf *vals);
pl_status pl_be_copy(const pl_buf *src, int64_t src0, int64_t count, pl_buf *dst, int64_t dst0);

pl_status pl_be_softmax_rows(const pl_buf *x, int64_t rows, int64_t cols, pl_buf *out);
pl_status pl_be_topk_rows(const pl_buf *x, int64_t rows, int64_t cols, int64_t k, pl_buf *ids,
                          pl_buf *vals);
pl_status pl_be_matmul_id(const pl_buf *w, int64_t n_exp, const pl_buf *x, const pl_buf *ids,
                          int64_t n, int64_t n_used, bool x_shared, pl_buf *out);
pl_status pl_be_moe_combine(const pl_buf *y, const pl_buf *wts, int64_t n, int64_t n_used,
                            bool accumulate, pl_buf *out);
pl_status pl_be_sigmoid_mul(const pl_buf *x, const pl_buf *g, int64_t rows, int64_t cols,
                            int64_t g_cols, bool accumulate, pl_buf *out);
pl_status pl_be_ssm_conv(const pl_buf *x, const pl_buf *w, pl_buf *state, int64_t n, pl_buf *snaps,
                         pl_buf *out);
pl_status pl_be_delta_rule(const pl_buf *qkv, const pl_buf *a, const pl_buf *b, const pl_buf *ssm_a,
                           const pl_buf *dt_bias, pl_buf *state, int64_t n,
                           const pl_delta_params *p, pl_buf *snaps, pl_buf *out);

/* Ask for the fused kernels `kinds` over the ops issued until the next call (0: none). */
pl_status pl_be_fuse(pl_backend *be, unsigned kinds);

/* Destroy a backend (NULL is fine). */
void pl_be_destroy(pl_backend *be);

/* Bytes a buffer holds (its rows x row size). */
int64_t pl_be_buf_bytes(const pl_buf *b);

#endif
