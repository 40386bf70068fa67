/* wgsl_gen.h - WGSL kernels generated from C templates.
 *
 * Each kernel family is one function that writes WGSL text from a parameter struct: the
 * shape (baked in as constants), thread count, rows per workgroup, widths and fusions. One
 * source serves every device: the autotuner and the backend pick the parameters.
 * kernel_ref.h holds the CPU reference of every family on the same buffer layouts.
 *
 * Conventions of every generated kernel:
 * - entry point `main`; bindings are @group(0) @binding(0..n-1) in the order documented at
 *   each generator (that order is the pl_gpu_ref array given to pl_gpu_bind_new);
 * - scalars that change from call to call (positions, row counts, offsets) come from a
 *   32-byte uniform, pl_gpu_args, bound last; what is fixed per model is baked in;
 * - the workgroup index is wid.x + wid.y * nwg.x (pl_gpu_dispatch's 2-D grid) and groups
 *   past the count do nothing;
 * - f16 data (block scales, F16 weights, an F16 KV cache) stays packed two per u32 and is
 *   read with unpack2x16float: no shader-f16 is needed, and nothing accumulates in f16;
 * - an output that is also an input (an in-place op) is bound once, read_write: WebGPU
 *   forbids binding one buffer range twice when one of the bindings is writable. */
#ifndef PL_GPU_WGSL_GEN_H
#define PL_GPU_WGSL_GEN_H

#include <stddef.h>
#include <stdint.h>

#include "../base/status.h"

/* The per-dispatch scalars; each kernel documents what a0..a7 mean for it. */
typedef struct {
    uint32_t a[8];
} pl_gpu_args;

/* Weight layouts on the GPU (repack.h makes them):
 * F32  : row-major f32.
 * F16  : row-major f16, two per u32 (element e is half e&1 of word e>>1).
 * Q4_0 : quants: 16 bytes per 32-weight block (byte j: low nibble weight j, high nibble
 *        weight j+16; value = (nibble - 8) * scale); scales: f16, two per u32, by block.
 * Q8_0 : quants: 32 signed bytes per block; scales as Q4_0.
 * Blocks are numbered row * (cols / 32) + column block, so a row is a contiguous stripe. */
typedef enum { PL_GW_F32, PL_GW_F16, PL_GW_Q4_0, PL_GW_Q8_0 } pl_gpu_wtype;

#define PL_GEMV_MAX_PARTS 4

typedef enum {
    PL_GEMV_STORE,   /* y = W x (+ bias) */
    PL_GEMV_ACCUM,   /* y += W x: output projections add into the residual */
    PL_GEMV_GATE_UP, /* y = silu(Wg x) * (Wu x): both FFN projections in one sweep */
} pl_gemv_mode;

/* Cooperative GEMV: a workgroup of `threads` sweeps `rows_per_wg` rows together, thread t
 * taking blocks t, t+threads, ... so each read of a row is a contiguous stripe. x holds n
 * vectors (args.a0 = n): workgroup g works on vector g / row_groups.
 * Bindings: 0 x f32[n][cols], 1 y f32[n][rows], then for each matrix (gate then up in
 * GATE_UP) and each part p: quants_p (and scales_p for Q4_0/Q8_0); then the norm weight
 * f32[cols] if `norm`; the normalised x f32[n][cols] if `norm_out`; the bias f32[rows] if
 * `bias`; W_gate x if `gate_out` and W_up x if `up_out` (f32[n][rows], GATE_UP); then args.
 * The side outputs let a fused kernel write every buffer the unfused ops would have.
 * Parts: a matrix too big for one binding is cut into `parts` row ranges of
 * `rows_per_part` rows (a multiple of rows_per_wg), each bound separately. */
typedef struct pl_gemv_params_s {
    pl_gpu_wtype type;
    uint32_t rows, cols;
    uint32_t threads;     /* power of two, 8..1024 */
    uint32_t rows_per_wg; /* 1..32 */
    pl_gemv_mode mode;
    int norm; /* fused RMSNorm of x: x * (1/sqrt(mean(x^2) + eps)) * norm_weight */
    float eps;
    int bias;
    int norm_out, gate_out, up_out; /* side outputs */
    uint32_t parts, rows_per_part;  /* parts 1 (rows_per_part ignored) .. PL_GEMV_MAX_PARTS */
    int subgroups;                  /* reduce with subgroupAdd (needs the subgroups feature) */
    /* Subgroup rows (needs subgroups of exactly sg_rows invocations): each subgroup of the
     * workgroup owns rows_per_wg rows on its own and reduces with subgroupAdd alone - no
     * workgroup memory, no barrier; a workgroup then covers threads / sg_rows *
     * rows_per_wg rows. 0: the workgroup sweeps its rows together (above). */
    uint32_t sg_rows;
    /* Blocks a sweeper takes per loop turn (1, 2 or 4): their loads are all issued before
     * any is used, so more bytes are in flight per thread. 0 counts as 1. */
    uint32_t unroll;
    /* Split output (q/k/v in one sweep): rows [0, split[0]) go to y, [split[0], split[1])
     * to y1 and the rest to y2 - or, with split[2], [split[1], split[2]) to y2 and the rest
     * to y3 - each its own f32[n][rows of its range] buffer bound after the other bindings
     * (before args). All multiples of the rows per workgroup; split[0] 0: none. */
    uint32_t split[3];
    /* Q4_0 / Q8_0 only: the activations are quantised to Q8_0 blocks inside the kernel
     * (per 32 values: scale = max|x| / 127 rounded to f16, quant = round-half-away(x /
     * scale), exactly pl_act_q8_0's rule) and each block's dot product is an integer one
     * (dot4I8Packed), scaled by the weight's and the activation's f16 scales. With `norm`,
     * 1/rms comes from a first pass over x and the normalised x (x * inv) * w is quantised,
     * as the CPU backend quantises its rms_norm output. */
    int q8x;
    /* q8x with unroll 1: every row's weight block and scale is loaded before the x block
     * is read and quantised (all of them in flight at once) */
    int preload;
    /* Gathered experts (matmul_id): the weight stacks n_exp matrices of `rows` rows, and
     * args.a0 counts slots, not vectors. Slot s reads expert e = ids[s] (an i32 binding
     * after the others, before args): rows [e * rows, (e + 1) * rows) of the weight; x
     * vector s / n_used if x_shared, else s; y row s. An e outside [0, n_exp) gives a
     * zero row and reads no weight. STORE or GATE_UP (gate and up experts in one sweep,
     * both at expert e's rows), no norm, bias or split; with parts,
     * `rows` must be a multiple of the rows per workgroup. */
    int ids;
    uint32_t n_exp, n_used;
    int x_shared;
    /* q8x, no norm, not gathered: x comes already quantised, as the GEMM's pre-pass
     * (pl_wgsl_q8pre) writes it: binding 0 is xq vec4<u32>[n][cols/32][2] and the block
     * scales xd f32[n][cols/32] take the norm weight's place. The pre-pass quantises with
     * the kernel's own rule, so each block's quants are those the kernel would make from
     * the same x: the workgroups skip the prologue (the norm's pass over x and every
     * block's quantisation), which on a decode step costs as much as a wave of loads. */
    int xpre;
    /* Columns per workgroup (xpre, not gathered, no subgroup rows, unroll 1; 0 or 1: one):
     * each workgroup loads a weight block once and meets it with the x of up to `ncols`
     * columns (a verify pass, a batch of decode steps), so the matrix is read once for all
     * of them, not once per column. x comes pre-quantised (xpre: the same quants as the
     * kernel's own, made once per column instead of once per column and workgroup). Each column's
     * partial sums, their order and the workgroup's reduction are those of the one-column kernel
     * with the same threads: the same bits per column, whatever the rows per workgroup. Columns
     * past args.a0 in the last workgroup repeat the last column and are not written. */
    uint32_t ncols;
} pl_gemv_params;

#define PL_GEMV_MAX_COLS 8

/* Rows one workgroup covers, and workgroups per vector of x. */
uint32_t pl_gemv_rows_per_group(const pl_gemv_params *p);
uint32_t pl_gemv_groups(const pl_gemv_params *p);
/* Workgroups of a dispatch over n vectors (the column groups times pl_gemv_groups). */
uint32_t pl_gemv_dispatch(const pl_gemv_params *p, uint32_t n);
/* Bytes of workgroup memory the generated GEMV declares. */
uint32_t pl_gemv_wg_bytes(const pl_gemv_params *p);
/* Number of bindings the generated GEMV declares (args included). */
int pl_gemv_bindings(const pl_gemv_params *p);

/* RMSNorm of args.a0 rows of `cols` values, one workgroup per row:
 * y = x * (1/sqrt(mean(x^2) + eps)) * w. Bindings: 0 x, 1 y, 2 w f32[cols], 3 args;
 * in place: 0 x (read and written), 1 w, 2 args. Gate (the gated RMSNorm, in place only):
 * also g = silu(z) * y over the same rows (z, g laid out as x), exactly SwiGLU(z, y); the
 * bindings 2 z (g too when gate is 1), 3 g when gate is 2, then args. */
typedef struct {
    uint32_t cols, threads;
    float eps;
    int inplace;
    int gate; /* 0: none; 1: g is z (in place); 2: g its own buffer */
} pl_rmsnorm_params;

/* RoPE in place on rows of n_heads heads: row r (r < args.a1) is at position
 * args.a0 + r; workgroup g rotates head g % n_heads of row g / n_heads. Fusions: `norm`
 * applies a per-head RMSNorm first (Qwen3's q/k norm); `store` also writes the rotated
 * head into the K cache row of its position ([positions][n_heads * head_dim], F16 or F32);
 * `store_v` also copies the same head of v (head_dim_v values) into the V cache.
 * Pair (pair_heads > 0): one dispatch for q and k. The first n * n_heads workgroups rotate
 * q (with `norm`), the next n * pair_heads rotate k (with `pair_norm`, `store`, `store_v`).
 * Bindings: 0 x f32[n][n_heads * head_dim], 1 table f32[positions][rot_dim/2][2] (cos, sin,
 * pl_gpu_rope_table), then the norm weight f32[head_dim] if norm; if pair: k, then k's norm
 * weight if pair_norm; then the K cache if store, v f32[n][heads * head_dim_v] and the V
 * cache if store_v, then (cols) the columns i32[n][2], then args. cols: row r is at
 * position cols[2r + 1] and stores into cache row cols[2r] * args.a2 + that position (the
 * *_cols ops of backend.h). */
typedef struct {
    uint32_t n_heads, head_dim, rot_dim;
    int neox; /* rotate pairs (i, i + rot_dim/2); else adjacent pairs (2i, 2i+1) */
    uint32_t threads;
    int norm;
    float eps;
    int store, store_v, cache_f16;
    uint32_t head_dim_v;
    uint32_t pair_heads;
    int pair_norm;
    int sg; /* the norm's sum of squares through subgroupAdd (one barrier) */
    int cols;
} pl_rope_params_gpu;

/* Element types a copy reads and writes. */
typedef enum { PL_GE_F32, PL_GE_F16, PL_GE_I32 } pl_gpu_etype;

/* dst[a1 + i] = convert(src[a0 + i]) for i < a2 (element offsets), one thread per 32-bit
 * word of dst, so F16 destinations are written a word at a time without races. F32 <-> F16
 * converts (f16 rounding by pack2x16float); I32 only copies to I32. KV-cache stores and the
 * backend's copy op. Bindings: 0 src, 1 dst, 2 args; in place: 0 buffer, 1 args.
 * Workgroups: pl_copy_groups. */
typedef struct {
    pl_gpu_etype src, dst;
    uint32_t threads;
    int inplace;
} pl_copy_params;

uint32_t pl_copy_groups(const pl_copy_params *p, uint32_t dst0, uint32_t count);

/* KV store into a Q8_0 cache (backend.h's layout): blocks args.a0 .. a0+a1-1 of the cache
 * (32 values each, counted over the whole cache) from consecutive blocks of src, quantised
 * as pl_quant_act_q8_0 (the CPU's rounding, pl_wgsl_q8_helpers); the f16 scales start at
 * word args.a2. One thread per scale word (two blocks), keeping the other half of a word
 * whose second block is outside the range. Bindings: 0 src f32, 1 cache u32, 2 args. */
typedef struct {
    uint32_t threads;
} pl_kv_q8_params;

uint32_t pl_kv_q8_groups(const pl_kv_q8_params *p, uint32_t blk0, uint32_t count);

/* Split-K flash-decoding attention over the KV cache (rows are positions, [ctx][kv heads *
 * head dim], F16, F32 or Q8_0). This dispatch takes query rows args.a1 .. a1+a2-1 (row r is at
 * position args.a0 + r and sees cache positions 0..that) split into args.a3 chunks of
 * `chunk` positions: workgroup (row, head, split). With one split it writes the normalised
 * output, else (acc[head_dim_v], max, sum) for pl_wgsl_attn_combine.
 * Bindings: 0 q f32[rows][n_head*head_dim], 1 k cache, 2 v cache, 3 out
 * f32[rows][n_head*head_dim_v], 4 partials f32[block_rows][n_head][max_splits][hdv + 2],
 * 5 args. cols (F16/F32 caches): query row r is a column of its own sequence (backend.h
 * attention_cols): position cols[2r + 1] over cache rows from cols[2r] * args.a4 on; binding
 * 5 the columns i32[rows][2], 6 args. A column whose position needs fewer splits than the
 * dispatch's gets empty ones, as a row of a block does. */
typedef struct {
    uint32_t n_head, n_kv_head, head_dim, head_dim_v;
    uint32_t max_splits; /* partials kept per (row, head) */
    uint32_t block_rows; /* query rows one dispatch may take */
    uint32_t chunk;      /* positions per split (<= 4096) */
    uint32_t threads;    /* power of two */
    int kv_f16;          /* cache of f16 pairs (else f32) */
    int kv_q8;           /* Q8_0 cache (backend.h: quants, then f16 scales): needs head dims
                            that are multiples of 4 */
    uint32_t ctx;        /* the Q8_0 cache's rows (where its scales start); 0 otherwise */
    float scale;
    /* softmax statistics through subgroups: each thread's (max, sum) pair is merged by
     * subgroupMax / subgroupAdd and one barrier, instead of two workgroup reductions */
    int sg;
    int cols;
} pl_attn_params_gpu;

/* Prefill attention (wgsl_attn_prefill.c): n query rows at positions args.a0 ..
 * a0 + args.a1 - 1 over an F16 or F32 cache in one dispatch (causal: row r sees positions
 * 0..a0 + r). Query vector v of kv head kvh is (row v / GQ, head kvh * GQ + v % GQ);
 * workgroup (kvh, tile) owns `rows` consecutive vectors, `lanes` threads each (one
 * subgroup's neighbours: a score is reduced by subgroupShuffleXor), and walks the cache in
 * tiles of `keys` positions staged in workgroup memory with an online softmax.
 * Bindings: 0 q f32[rows][n_head*head_dim], 1 k cache, 2 v cache, 3 out
 * f32[rows][n_head*head_dim_v], 4 args. */
typedef struct {
    uint32_t n_head, n_kv_head, head_dim, head_dim_v;
    uint32_t rows;  /* query vectors per workgroup */
    uint32_t lanes; /* threads per query vector: a power of two <= the subgroup size that
                       divides the words of a key and of a value row; 1: no subgroups */
    uint32_t keys;  /* cache positions per staged tile */
    int kv_f16;     /* cache of f16 pairs (else f32) */
    float scale;
} pl_attn_prefill_params;

/* Bytes of workgroup memory the kernel stages (a tile of keys and one of values). */
uint32_t pl_attn_prefill_wg_bytes(const pl_attn_prefill_params *p);
/* Workgroups for n query rows. */
uint32_t pl_attn_prefill_groups(const pl_attn_prefill_params *p, uint32_t n);

/* Merge the splits of the rows of one attention dispatch: workgroup (row, head).
 * Bindings: 0 partials, 1 out, 2 args (the attention's). */
typedef struct {
    uint32_t n_head, head_dim_v, max_splits, threads;
} pl_attn_combine_params;

/* Top-k (k = 1 is argmax) with ties broken towards the lower index, in two stages.
 * Stage 1: workgroup (row r, chunk c) takes values [c * chunk, ...) of row args.a0 + r of
 * f32[.][n] and writes its k best as (value bits, index) pairs at (r * chunks + c) * k.
 * Stage 2: workgroup r reads the n = chunks * k pairs of row r and writes the k best, in
 * order: indices (as i32, -1 for none) to ids[args.a0 + r * k + j], values (if `vals`) to
 * vals[r * k + j].
 * Stage 1 bindings: 0 x, 1 pairs, 2 args. Stage 2: 0 pairs, 1 ids, [2 vals], then args.
 * Direct (one chunk holds the row): stage 1 writes stage 2's outputs itself, to
 * ids[args.a2 + r * k + j] (and vals); bindings as stage 2 with x in place of the pairs.
 * softmax (stage 2 or direct, with vals): vals get the softmax of the k values picked,
 * exp(v - max) / sum in float32 (the MoE router's top-k weights; a -inf pick gives 0). */
typedef struct {
    uint32_t n, k, chunk, threads;
    int stage2, vals, direct, softmax;
    /* direct with n <= PL_TOPK_RANK_MAX only (pl_wgsl_topk_rank, wgsl_moe.c): the row goes
     * to workgroup memory once and each value's place is the count of the values before it
     * (larger, or equal at a lower index): the same ids and values with three barriers (four
     * with softmax) instead of two per pick */
    int rank;
    /* rank only: also the MoE shared expert's gate, gout[r] = sum_c gw[c] * gx[r * gate_cols
     * + c] (bindings after vals: gx, gw, gout); 0: none */
    uint32_t gate_cols;
} pl_topk_params;

#define PL_TOPK_RANK_MAX 1024

uint32_t pl_topk_chunks(const pl_topk_params *p);

/* Embedding: row r (< args.a0) of the output = row ids[r] of the table, dequantised; an
 * id outside the table gives zeros. Bindings: 0 ids i32[], 1 out f32[n][cols], then the
 * table's quants_p (and scales_p) for each part, then args. */
typedef struct {
    pl_gpu_wtype type;
    uint32_t rows, cols, threads;
    uint32_t parts, rows_per_part;
} pl_embed_params;

/* out[i] = a[i] + b[i] (ADD) or silu(a[i]) * b[i] (SWIGLU) for i < args.a0.
 * alias: 0 none, 1 out is a, 2 out is b, 3 out is a and b. Bindings: the distinct buffers
 * in the order a, b, out, then args. */
typedef enum { PL_EW_ADD, PL_EW_SWIGLU } pl_ew_op;
typedef struct {
    pl_ew_op op;
    int alias;
    uint32_t threads;
} pl_ew_params;

/* out[r, :] = softmax(x[r, :]) over `cols` values, one workgroup per row, r < args.a0.
 * Bindings: 0 x, 1 out, 2 args; in place: 0 x (read and written), 1 args. */
typedef struct {
    uint32_t cols, threads;
    int inplace;
} pl_softmax_params;

/* out[i, c] (+)= sum over j < n_used, in order, of wts[i * n_used + j] * y[i * n_used + j, c]
 * for i < args.a0, c < cols; one thread per output value.
 * Bindings: 0 y, 1 wts, 2 out, 3 args.
 * shared (with acc): then out[i, c] += ysh[i, c] * sigmoid(g[i]) (the gated shared expert,
 * as sigmoid_mul's kernel computes it); bindings 0 y, 1 wts, 2 out, 3 ysh, 4 g, 5 args. */
typedef struct {
    uint32_t cols, n_used, threads;
    int acc, shared;
} pl_moe_combine_params;

/* out[i] (+)= x[i] * sigmoid(g[per_row ? i / cols : i]) for i < args.a0, one thread each.
 * Bindings: 0 x, 1 g, 2 out, 3 args; with inplace (out is x, not acc): 0 x, 1 g, 2 args. */
typedef struct {
    uint32_t cols, threads;
    int per_row, acc, inplace;
} pl_sigmoid_mul_params;

/* Causal depthwise conv1d + SiLU (backend.h ssm_conv) over args.a0 rows of `channels`.
 * Workgroup g takes channels [g * cw, (g + 1) * cw); its threads are cw channels x
 * threads / cw lanes of rows. The state rows it replaces are read first, then written after
 * a barrier, so no workgroup reads another's channels. Bindings: 0 x, 1 w f32[channels][k],
 * 2 state f32[k-1][channels], 3 out, 4 snaps if `snaps`, then args. */
typedef struct {
    uint32_t channels, k, cw, threads;
    int snaps;
} pl_ssm_conv_params;

uint32_t pl_ssm_conv_groups(const pl_ssm_conv_params *p);

/* The gated delta rule (backend.h delta_rule) over args.a0 tokens in order. Workgroup g
 * owns value head g / slices and value columns [(g % slices) * cols, ...) of its state:
 * thread t holds column t % cols and the rows_per_thread key rows of part t / cols in
 * registers for every token, so the state is read and written once per call. Per token
 * the parts of a column add their partial dot products (S k, S q, |k|^2, |q|^2, k.q) in
 * workgroup memory: one barrier. With `chunk` C > 0 (prefill) the workgroup first stages C
 * tokens at a time in workgroup memory - their k and q, its columns of v, the gate,
 * beta, 1/|k|, 1/|q| and k.q, all computed in parallel before the serial loop - so the
 * loop reads no global memory and adds only S k and S q over the parts (one barrier per
 * token, three per chunk). Bindings: 0 qkv, 1 a, 2 b, 3 ssm_a, 4 dt_bias, 5 state, 6 out,
 * 7 snaps if `snaps`, then args. */
typedef struct {
    uint32_t n_k, n_v, d_k, d_v;
    uint32_t cols, parts; /* threads = cols * parts, a power of two each */
    float eps;
    int snaps;
    uint32_t chunk; /* 0: token by token; else tokens staged at a time, a power of two */
} pl_delta_rule_params;

uint32_t pl_delta_rule_groups(const pl_delta_rule_params *p);
/* Rows of key dimension each thread holds: d_k / parts, rounded up. */
uint32_t pl_delta_rule_rows(const pl_delta_rule_params *p);
/* Bytes of workgroup memory the kernel declares. */
uint32_t pl_delta_rule_wg_bytes(const pl_delta_rule_params *p);

/* Prefill's q8x GEMM (wgsl_gemm.c): y (+)= W x for n columns of x given as Q8_0 blocks
 * (the pre-pass below), Q4_0/Q8_0 weights of one part. A workgroup computes a tile of tm
 * rows x tn columns, each of its (tm / rm) * (tn / rn) threads an rm x rn register tile,
 * stepping over K bk blocks at a time through workgroup memory. Each output sums its
 * blocks in order 0 .. cols/32 - 1, each block's term f32(integer dot) * weight scale *
 * activation scale: the same bits for a column whatever n, the tile or its place. Modes,
 * bias, split and side outputs as pl_gemv_params (no norm: the pre-pass does it).
 * The shape is not baked in (one kernel serves every matrix of a kind; a software
 * adapter compiles each for seconds): args a0 n, a1 rows, a2 cols / 32, a3 / a4 / a5 the
 * split (pl_gemm_args); the kernel cache keys on pl_gemm_kernel_key.
 * Bindings: 0 xq vec4<u32>[n][cols/32][2], 1 xd f32[n][cols/32] (the block scales as
 * f32), 2 y, then quants and scales of each matrix (gate then up), the bias if `bias`, go
 * if gate_out, uo if up_out, y1 and y2 if split (y3 if split[2]), then args. Workgroups:
 * pl_gemm_groups. */
typedef struct {
    pl_gpu_wtype type; /* Q4_0 or Q8_0 */
    uint32_t rows, cols;
    pl_gemv_mode mode;
    int bias, gate_out, up_out;
    uint32_t split[3];
    uint32_t tm, tn, rm, rn, bk;
    /* kernel version (1-4, 8-10; every one gives the same bits): 1 gemm2's (Q4_0 staged
     * packed, unpacked at each use), 2 Q4_0 unpacked to signed bytes once when staged, 3 as
     * 1 and 4 as 2 with the block sums turned into f32 by an exponent trick instead of an
     * int-to-float conversion; 8 as 4 and 9 as 3 with two staging buffers (twice the
     * workgroup memory): each thread loads its share of the next step into registers
     * (at most PL_GEMM_DB_REGS elements of each staged piece) before the step's products
     * and stores it after them, one barrier a step; 10 as 8 with each 32 invocations on
     * 8 neighbouring columns x 4 rows of the thread grid (tn / rn a multiple of 8, tm / rm
     * of 4) */
    uint32_t version;
    /* versions 5-7 run the block products on subgroup matrices (Dawn's
     * chromium-experimental-subgroup-matrix: Vulkan cooperative matrices, the tensor
     * cores) of sm x sn outputs and sk terms per multiply, in subgroups of sg invocations
     * (the adapter's subgroupMaxSize, which Dawn runs them at):
     * 5: f16 operands (the integer quants, exact in f16) with an f32 result per block:
     *    integer sums < 2^24, so exact, then scaled as versions 1-4 (the same bits);
     * 6: the same with i8 operands and an i32 result (Dawn's i8 subgroup matrices);
     * 7: f16 operands already scaled (f16(q * d) for weights and activations), f32 sums over
     *    all of K in the matrix units: faster, within f16 rounding of the others.
     * The products pass through workgroup memory (tm x tn f32): versions 5-7 need ids 0. */
    uint32_t sm, sn, sk, sg;
    /* tests: the subgroup-matrix builtins emulated in plain WGSL (every invocation computes
     * a whole matrix, f32 operands), so versions 5-7 run on any adapter */
    int mock;
    /* ids: the MoE's gathered expert matmul (pl_gpu_encode_gemm_id): the weights are
     * n_exp experts of `rows` rows each; the columns are the (token, slot) pairs grouped
     * by expert by pl_wgsl_moe_group, a workgroup owns (row tile, tile of one expert's
     * pairs) from its tile list; STORE or GATE_UP only. Args: a0 slots, a1 rows, a2
     * cols / 32, a3 n_exp, a4 slots per x column (n_used if x is shared, else 1); binding
     * `grp` (the grouping) before args. */
    int ids;
    /* 0: each output sums its blocks in order. gt > 0 (versions 8-10, not ids): in the
     * order of the one-column q8x GEMV with gt threads and the workgroup reduction
     * (wgsl_gemv.c, pl_wtext_reduce): thread t's slice t, t + gt, ... from 0.0, then the
     * slices of each of min(gt, 8) runs in turn, then the runs: every column's outputs
     * bit for bit those of a decode step (a verify pass, a batch of decode steps) at GEMM
     * speed. The K loop walks the blocks in that order (thread-major). gj: the blocks of
     * the longest slice, ceil(cols / 32 / gt), baked into the kernel (so its K loop's
     * divisions are by constants): the kernel serves matrices of that many only. */
    uint32_t gt, gj;
} pl_gemm_params;

/* Versions 8 and 9: registers a thread holds per staged piece (weights, their scales,
 * activations, their scales) at most; bigger tiles per thread are refused. */
#define PL_GEMM_DB_REGS 8

uint32_t pl_gemm_threads(const pl_gemm_params *p);
uint32_t pl_gemm_groups(const pl_gemm_params *p, uint32_t n);
uint32_t pl_gemm_wg_bytes(const pl_gemm_params *p);
int pl_gemm_bindings(const pl_gemm_params *p);
/* The whole check (the generator checks only what the kernel bakes in). */
pl_status pl_gemm_check_shape(const pl_gemm_params *p);
/* p without its shape: what the generated text depends on. */
pl_gemm_params pl_gemm_kernel_key(const pl_gemm_params *p);
pl_gpu_args pl_gemm_args(const pl_gemm_params *p, uint32_t n);

/* The GEMM's pre-pass: column g < args.a0 of x f32[n][args.a1] (RMS-normalised with the
 * norm weight first if `norm`, exactly as the q8x GEMV's prologue with `threads` threads;
 * also stored to xn if `norm_out`) quantised to Q8_0 by pl_quant_act_q8_0's rule: packed
 * quants to xq[g][block][2] (vec4<u32>), each block's f16-rounded scale as an f32 to
 * xd[g][block]. One workgroup per column. Bindings: 0 x, 1 xq, 2 xd, then the norm weight
 * f32[cols] if norm, xn if norm_out, then args. */
typedef struct {
    uint32_t threads;
    int norm, norm_out;
    float eps;
} pl_q8pre_params;

/* Each generator returns malloc'd WGSL in *out, or fails on parameters it cannot build. */
pl_status pl_wgsl_gemv(const pl_gemv_params *p, char **out);
pl_status pl_wgsl_gemm(const pl_gemm_params *p, char **out);
/* The MoE prefill's grouping of slots by expert (one workgroup of 256 threads): counts per
 * expert (ids outside 0..n_exp - 1 in one more bucket, whose outputs are zeros), their
 * prefix sums, a list of tiles of at most tn pairs of one expert, and the slots scattered
 * by expert. grp: [0] tiles, [1 + e] first pair of expert e (e = 0..n_exp + 1), then at
 * TB = n_exp + 3 the tiles (expert, first pair, end) for at most MT = ceil(slots / tn) +
 * min(n_exp + 1, slots), then at TB + 3 MT the slots (pl_gemm_grp_words). Bindings: 0 eids
 * i32[slots], 1 grp, 2 args (a0 slots). */
typedef struct {
    uint32_t n_exp, tn;
} pl_moe_group_params;
uint64_t pl_gemm_grp_words(uint32_t n_exp, uint32_t tn, uint32_t slots);
uint32_t pl_gemm_max_tiles(uint32_t n_exp, uint32_t tn, uint32_t slots);
pl_status pl_wgsl_moe_group(const pl_moe_group_params *p, char **out);
pl_status pl_wgsl_q8pre(const pl_q8pre_params *p, char **out);
pl_status pl_wgsl_rmsnorm(const pl_rmsnorm_params *p, char **out);
pl_status pl_wgsl_rope(const pl_rope_params_gpu *p, char **out);
pl_status pl_wgsl_copy(const pl_copy_params *p, char **out);

/* The KV store of columns (backend.h kv_store_cols): workgroup r copies src row r (d
 * values) into cache row cols[2r] * args.a0 + cols[2r + 1], converted as the copy kernel
 * converts (f16: pack2x16float of each pair; d even). Rows r < args.a1. Bindings: 0 src,
 * 1 cache, 2 cols i32[n][2], 3 args. */
typedef struct {
    uint32_t d, threads;
    int f16;
} pl_store_cols_params;
pl_status pl_wgsl_store_cols(const pl_store_cols_params *p, char **out);
pl_status pl_wgsl_kv_q8(const pl_kv_q8_params *p, char **out);
pl_status pl_wgsl_attn(const pl_attn_params_gpu *p, char **out);
pl_status pl_wgsl_attn_combine(const pl_attn_combine_params *p, char **out);
pl_status pl_wgsl_attn_prefill(const pl_attn_prefill_params *p, char **out);
pl_status pl_wgsl_topk(const pl_topk_params *p, char **out);
pl_status pl_wgsl_topk_rank(const pl_topk_params *p, char **out);
pl_status pl_wgsl_embed(const pl_embed_params *p, char **out);
pl_status pl_wgsl_ew(const pl_ew_params *p, char **out);
pl_status pl_wgsl_softmax(const pl_softmax_params *p, char **out);
pl_status pl_wgsl_moe_combine(const pl_moe_combine_params *p, char **out);
pl_status pl_wgsl_sigmoid_mul(const pl_sigmoid_mul_params *p, char **out);
pl_status pl_wgsl_ssm_conv(const pl_ssm_conv_params *p, char **out);
pl_status pl_wgsl_delta_rule(const pl_delta_rule_params *p, char **out);

#endif
