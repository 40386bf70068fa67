/* cpu_internal.h - the CPU backend's structs, shared by its files only. */
#ifndef PL_CPU_INTERNAL_H
#define PL_CPU_INTERNAL_H

#include <stdatomic.h>
#include <string.h>

#include "cpu.h"
#include "pool.h"

/* The kernels' bits (every path the same, cpu_qdot.c) depend on a * b + c never being fused
 * into one FMA, which arm64 always has: GCC does not fuse in ISO C mode (-std=c11; the
 * Makefile also says -ffp-contract=off), clang does unless told, here, for every file of
 * the backend from this point on. */
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif

/* A piece of anonymous memory holding copies of weights, or big buffers (cpu_weights.c). */
typedef struct cpu_piece cpu_piece;

typedef struct {
    pl_buf h;   /* must be first: the seam sees only this */
    void *data; /* the values: malloc'd (owned), in a piece, or a weight's mapped file */
    bool owned;
    cpu_piece *piece; /* the piece data lies in (a copied weight, a big buffer), or NULL */
    /* A Q4_0 or Q8_0 weight whose rows lie 8 to a group, interleaved (cpu_x8.c): rows [0,
     * x8_rows) of this buffer are in groups, the buffer's row 0 being row x8_off (0..7)
     * of its group (a view may start inside one); 0 rows: the GGUF layout throughout. */
    int64_t x8_rows;
    int x8_off;
} cpu_buf;

/* Matmuls held back to run as one pool job (cpu_matmul.c, PL_FUSE_QKV / PL_FUSE_GATE_UP). */
typedef struct cpu_fused cpu_fused;

/* A per-head op held under PL_FUSE_NORM_ROPE / ROPE_PAIR / ROPE_STORE (cpu_heads.c): an
 * in-place rms_norm of x's rows, a rope of x, or a kv_store of x into cache. */
enum { HEAD_NORM, HEAD_ROPE, HEAD_STORE };
#define CPU_HEAD_OPS 8
typedef struct {
    int kind;
    pl_buf *x;
    const pl_buf *w;             /* HEAD_NORM's weights */
    pl_buf *cache;               /* HEAD_STORE's */
    int64_t n, pos0, rows, cols; /* ROPE/STORE: n rows at pos0; NORM: rows x cols */
    float eps;
    pl_rope_params rp;
} cpu_head_op;

/* Memory kept between ops and grown when an op needs more: a fresh malloc per op (often
 * mmap'd afresh, past glibc's threshold) paid its page faults again every time, about 4% of
 * a prompt's time. */
typedef struct {
    void *p;
    size_t cap;
} cpu_scratch;

/* s's memory, at least bytes of it (contents not kept when it grows), or NULL (no memory). */
void *pl_cpu_scratch(cpu_scratch *s, size_t bytes);

typedef struct {
    pl_backend base; /* must be first */
    pl_pool *pool;
    /* The matmuls' quantised activations and the GEMM's packed ones (used by the calling
     * thread between pool jobs: the backend serves one thread at a time, pooled.h), and
     * each pool thread's own (per_thread[thread], pl_pool_fn's thread) for its work items:
     * unpacked weight rows, dequantised rows, attention's rows. */
    cpu_scratch act, pack, *per_thread;
    int64_t l2_bytes; /* the L2 cache's size (1 MiB where the system does not say) */
    /* weights (cpu_weights.c): pl_cpu_opts.anon_weights; whether buf_weight copies now;
     * the piece being filled; bytes the loader announced and not yet placed; what the
     * device line says (0 nothing yet, 1 copied, -1 mapped) */
    int anon_mode;
    int x8_mode; /* pl_cpu_opts.interleave */
    bool copying;
    cpu_piece *cur;
    cpu_piece *buf_cur; /* the piece buf_new's big buffers are being laid in */
    uint64_t expect_left;
    int weights_said;
    unsigned fuse;        /* the fusions the model asks for now (pl_be_fuse) */
    int64_t swiglu_fused; /* swiglus run with their gate/up matmuls (a count, for tests) */
    struct {
        cpu_head_op op[CPU_HEAD_OPS];
        int n;
        int64_t fused; /* times they ran as one job (a count, for tests) */
    } heads;           /* per-head ops held (cpu_heads.c) */
    cpu_fused *fused;  /* matmuls held back under them, or NULL (cpu_matmul.c) */
    /* op_rope's angles for the last positions and parameters asked (cpu.c): a decode step's
     * layers all rotate at one position, so its cosines and sines are worked out once */
    struct {
        double *cs;      /* [n][2][rope_dim / 2]: cosines, then sines */
        float *factors;  /* the rope factors they were made with, [rope_dim / 2], or NULL */
        int64_t pos0, n; /* positions pos0 .. pos0 + n - 1; n 0: none */
        float base, scale;
        int dim;
        size_t cap; /* doubles cs has room for */
    } rope;
    float f16[65536]; /* every half value as float: the KV cache is read through it */
} cpu_backend;

static inline cpu_backend *cpu_of(pl_backend *be) {
    return (cpu_backend *)be;
}
static inline float *fptr(const pl_buf *b) {
    return ((const cpu_buf *)b)->data;
}
static inline void *vptr(const pl_buf *b) {
    return ((const cpu_buf *)b)->data;
}

/* A Q8_0 KV cache (see kv_store in backend.h): the int8 quants of value e (row-major
 * index) at q8_quants(b)[e], its block's f16 scale at q8_scales(b)[e / 32]. */
static inline int8_t *q8_quants(const pl_buf *b) {
    return vptr(b);
}
static inline uint16_t *q8_scales(const pl_buf *b) {
    return (uint16_t *)((char *)vptr(b) + b->ne0 * b->ne1);
}

/* Q4_0 and Q8_0 weights 8 rows interleaved (cpu_x8.c; made by pl_cpu_weight_place where
 * pl_x8_available()), q4 choosing Q4_0 (else Q8_0): whether the kernels for them run here
 * (AVX2); one group of 8 GGUF rows (src, nb blocks each) into the interleaved layout at dst
 * (the same 8 blocks' bytes a block) and back; block b of the group's row `lane` in the GGUF
 * layout (18 or 34 bytes). pl_x8_tile: the group g against nc (1..4) activation rows as
 * pl_cpu_qdot_tile takes them, out[r * nc + c], each value bit-identical to
 * pl_cpu_qdot_row_portable on the row (AVX2 + F16C, AVX-VNNI where present; else the
 * portable reference, pl_x8_tile_portable). pl_x8_gemm_unpack: the group's rows 4h..4h+3
 * as pl_cpu_gemm_unpack lays out 4 rows. */
int pl_x8_available(void);
void pl_x8_pack_group(int q4, const unsigned char *src, int64_t nb, unsigned char *dst);
void pl_x8_unpack_group(int q4, const unsigned char *group, int64_t nb, unsigned char *dst);
void pl_x8_block(int q4, const unsigned char *group, int lane, int64_t b, unsigned char *out);
void pl_x8_tile(int q4, const unsigned char *g, int nc, const int8_t *const y[],
                const float *const yd[], const int32_t *const ys[], int64_t nb, float *out);
void pl_x8_tile_portable(int q4, const unsigned char *g, int nc, const int8_t *const y[],
                         const float *const yd[], int64_t nb, float *out);
void pl_x8_gemm_unpack(int q4, const unsigned char *g, int h, int64_t nb, unsigned char *wu,
                       float *wd);

/* Where row r of weight b lies, for the readers that need the GGUF layout: its bytes, or
 * (a row inside an interleaved group) NULL, with *group and *lane set. */
static inline const unsigned char *pl_cpu_wrow_at(const pl_buf *w, int64_t r,
                                                  const unsigned char **group, int *lane) {
    const cpu_buf *b = (const cpu_buf *)w;
    int64_t row = pl_row_size(w->type, w->ne0);
    const unsigned char *base = b->data;
    if (r >= b->x8_rows) return base + r * row;
    int64_t a = r + b->x8_off; /* rows from the first group's start */
    *group = base + (a / 8 * 8 - b->x8_off) * row;
    *lane = (int)(a % 8);
    return NULL;
}
/* Row r of weight w in the GGUF layout: its bytes where they lie, or rebuilt into tmp
 * (pl_row_size bytes). */
const unsigned char *pl_cpu_wrow(const pl_buf *w, int64_t r, unsigned char *tmp);
/* Row r of weight w dequantised into out (pl_dequant_row's status). */
pl_status pl_cpu_dequant_wrow(const pl_buf *w, int64_t r, float *out);
/* out: a view of rows [row0, row0 + rows) of weight (or view) parent, its interleaving
 * carried over (the rest of *out as calloc leaves it). */
void pl_cpu_view_of(const cpu_buf *parent, int64_t row0, int64_t rows, cpu_buf *out);

/* Weights and big buffers (cpu_weights.c). init: the mode and the device line. expect: the
 * weights_expect slot. place: the bytes a weight buffer reads (b->data: data itself, or its
 * copy in b->piece). buf_alloc: bytes zeroed for buf_new's b (b->data; in b->piece from
 * CPU_BIG_BUF bytes on where there is mmap, else calloc'd and b->owned). release: a buffer
 * of that piece is freed (NULL is fine). */
#define CPU_BIG_BUF ((size_t)256 << 10)
void pl_cpu_weights_init(cpu_backend *c, int mode);
pl_status pl_cpu_weights_expect(pl_backend *be, uint64_t bytes);
pl_status pl_cpu_weight_place(cpu_backend *c, cpu_buf *b, const void *data);
pl_status pl_cpu_buf_alloc(cpu_backend *c, size_t bytes, cpu_buf *b);
void pl_cpu_piece_release(cpu_backend *c, cpu_piece *piece);

/* Runs what is held back under a fusion - the matmuls (cpu_matmul.c), then the per-head ops
 * (cpu_heads.c): every method but matmul and those that make buffers calls it first
 * (cpu.c; matmul runs the per-head ops), so no op or read sees their outputs unwritten. A
 * failure of theirs is reported here. fused_free: at the backend's end. */
pl_status pl_cpu_flush(cpu_backend *c);
void pl_cpu_fused_free(cpu_backend *c);
/* (the matmuls alone: the per-head ops below hold on after them) */
pl_status pl_cpu_flush_matmuls(cpu_backend *c);
/* PL_FUSE_GATE_UP's swiglu(gate, up -> out) where the gate and up matmuls are the ones held
 * (out one of them): each item of one pool job computes a range of both matmuls' rows and
 * then their swiglu, while the rows are in its cache (a decode step's hand-over fewer a
 * layer); *done then, else nothing is run. pl_cpu_swiglu_range: the swiglu of values
 * i0..i1 - 1, the one formula of both ways (cpu.c). */
pl_status pl_cpu_swiglu_held(cpu_backend *c, const pl_buf *gate, const pl_buf *up, int64_t count,
                             pl_buf *out, bool *done);
void pl_cpu_swiglu_range(const float *g, const float *u, float *o, int64_t i0, int64_t i1);

/* The per-head ops (cpu_heads.c): hold one if the fusion group asks for its kind (true),
 * and run those held as one pool job (pl_cpu_flush does). The row functions they share
 * with the plain ops (cpu.c): an rms_norm row, one head's RoPE by a position's angles
 * (pl_cpu_rope_angles: rope_dim / 2 cosines then as many sines a position, in c->rope),
 * count values into a cache from value e0 on. */
bool pl_cpu_head_hold(cpu_backend *c, const cpu_head_op *op);
pl_status pl_cpu_head_flush(cpu_backend *c);
/* one such op as the plain op runs it (cpu.c) */
pl_status pl_cpu_head_run(cpu_backend *c, const cpu_head_op *op);
void pl_cpu_rms_row(const float *x, const float *w, int64_t cols, float eps, float *o);
void pl_cpu_rope_head(float *v, const double *cs, int half, int mode);
const double *pl_cpu_rope_angles(cpu_backend *c, int64_t n, int64_t pos0, const pl_rope_params *p);
void pl_cpu_kv_span(const float *s, pl_buf *cache, int64_t e0, int64_t count);

/* The work of a job below this many multiply-adds runs on the caller's thread alone:
 * waking the pool costs more than it saves. */
#define CPU_PAR_MIN_WORK 32768

/* A row-wise op's rows [r0, r1) (ctx: the op's arguments). */
typedef void pl_cpu_rows_fn(void *ctx, int64_t r0, int64_t r1);
/* fn over rows [0, rows): on the caller's thread in one call when rows * row_work (the
 * values one row touches) is below CPU_PAR_MIN_WORK (decode's small ops: waking the pool
 * costs more), else split in contiguous ranges between the pool's threads. Every row is
 * computed by exactly one call, the same way whatever the range it falls in, so the results
 * do not depend on the thread count (backend_ops_test checks 1 against 4 threads). */
void pl_cpu_rows(cpu_backend *c, int64_t rows, int64_t row_work, pl_cpu_rows_fn *fn, void *ctx);

/* x rounded to the nearest half-precision value (ties to even), kept as a float: equal to
 * pl_f16_to_f32(pl_f32_to_f16(x)). Values in the normal half range take a bit trick (drop
 * 13 mantissa bits with rounding); the rest go through the exact conversion. */
static inline float pl_cpu_round_half(float x) {
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    uint32_t e = (u >> 23) & 0xff;
    if (e == 0)
        u &= 0x80000000u; /* zero and float denormals: far below half's smallest */
    else if (e < 113 || e > 141)
        return pl_f16_to_f32(pl_f32_to_f16(x));
    else
        u += 0x0fff + ((u >> 13) & 1);
    u &= 0xffffe000u;
    memcpy(&x, &u, sizeof x);
    return x;
}

/* Dot product of two float rows (several accumulators so the compiler can vectorise).
 * Inline: attention calls it for every key with rows of a few dozen values. */
static inline float pl_cpu_dot(const float *a, const float *b, int64_t n) {
    float s[8] = {0};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; j++) s[j] += a[i + j] * b[i + j];
    float t = ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
    for (; i < n; i++) t += a[i] * b[i];
    return t;
}

/* Whether the CPU has AVX2 and F16C (cpuid, asked once): the x86 kernels' run-time choice.
 * Never while pl_cpu_portable is set (tests set it to run the portable paths). */
int pl_cpu_have_avx2(void);
extern int pl_cpu_portable;
/* Whether the AVX2 kernels may use AVX-VNNI (vpdpbusd) for their byte dots: the CPU has it
 * (cpuid), pl_cpu_have_avx2() holds, and pl_cpu_no_vnni is not set (tests set it to run the
 * plain AVX2 kernels on a VNNI CPU). The same bits either way. */
int pl_cpu_have_vnni(void);
extern int pl_cpu_no_vnni;
/* Whether the prefill GEMM may take its 16-column tiles on AVX-512 with VNNI (512-bit
 * vpdpbusd): the CPU and the OS have AVX-512 F/BW/VL/VNNI, pl_cpu_have_avx2() holds, and
 * pl_cpu_no_avx512 is not set (tests). The same bits. */
int pl_cpu_have_avx512vnni(void);
extern int pl_cpu_no_avx512;
/* Whether the f16 attention may take 16 lanes at a time (cpu_attention.c): the CPU and the
 * OS have AVX-512 F, pl_cpu_have_avx2() holds, and pl_cpu_no_avx512 is not set. */
int pl_cpu_have_avx512f(void);

/* arm64's kernels (cpu_qdot_neon.c): 2 where the CPU has the ARMv8.2 dot product (SDOT,
 * HWCAP_ASIMDDP, asked once) and the build has SDOT kernels (PL_SDOT, cpu_neon.h), 1 for
 * plain NEON (every arm64 CPU), 0 off arm64 or while pl_cpu_portable is set.
 * pl_cpu_qdot_tile_neon, pl_cpu_gemm_tile_neon and pl_cpu_kdot_neon (arm64 only) give
 * pl_cpu_qdot_tile's, pl_cpu_gemm_tile's and pl_cpu_kdot's NEON kernels (cpu_qdot_neon.c,
 * cpu_kdot_neon.c), the same contracts and bits; their callers dispatch to them. */
int pl_cpu_neon_level(void);
/* A K-quant dot kernel (cpu_kdot.c, cpu_kdot_neon.c): one weight row of nsb super-blocks
 * against 1 or 4 activation rows (as pl_cpu_kdot below), into out. */
typedef void pl_cpu_kdot_fn(const unsigned char *w, const int8_t *const y[],
                            const float *const yd[], const int16_t *const ys[], int64_t nsb,
                            float *out);
void pl_cpu_qdot_tile_neon(int q4, int nr, int nc, const unsigned char *const w[],
                           const int8_t *const y[], const float *const yd[], int64_t nb,
                           float *out);
void pl_cpu_gemm_tile_neon(int q4, int ng, const unsigned char *wu, const float *wd, int64_t nb,
                           const int8_t *q, const float *d, const int32_t *s, float *out);
/* pl_cpu_kdot_neon: the kernel for type t and 1 (four == 0) or 4 activation rows, all given
 * (pl_cpu_kdot pads short batches), SDOT or plain as the CPU has it. */
pl_cpu_kdot_fn *pl_cpu_kdot_neon(uint32_t t, int four);
/* The K-quants' GEMM on NEON (cpu_kdot_neon.c): one super-block blk of type t unpacked as
 * pl_cpu_kgemm_unpack lays out a row's (wq: 256 quants, sc: 16 scales), and the tile. */
void pl_cpu_kq_row_neon(uint32_t t, const unsigned char *blk, uint8_t *wq, int16_t *sc);
void pl_cpu_kgemm_tile_neon(uint32_t t, int ng, const uint8_t *wq, const int16_t *wsc,
                            const float *wd, int64_t nsb, const int8_t *q, const float *d,
                            const int16_t *s, float *out);
/* The activation quantisation's NEON helpers (pl_cpu_quant_act, _k): the largest |x| of n
 * (a multiple of 4) values into *amax, or 0 if any is NaN or infinite; q[0..32) =
 * roundf(x * is) as pl_quant_act_q8_0 rounds (finite x). */
int pl_cpu_amax_neon(const float *x, int n, float *amax);
void pl_cpu_round32_neon(const float *x, float is, int8_t *q);

/* One row of Q4_0 (q4) or Q8_0 blocks (GGUF layout) against nb blocks of activations
 * quantised by pl_quant_act_q8_0 (so in -127..127; weights may be any byte), with their
 * f16 block scales already widened to float in yd: sum over blocks of (float)integer_dot
 * * d_w * d_x, in block order. The portable reference of the tiles below. */
float pl_cpu_qdot_row_portable(int q4, const unsigned char *w, const int8_t *y, const float *yd,
                               int64_t nb);
/* A tile: nr weight rows w[r] against nc activation rows y[c] (ys[c]: each activation
 * block's sum of its 32 quants, used by the Q4_0 AVX2 path), nr * nc values into
 * out[r * nc + c], each bit-identical to pl_cpu_qdot_row_portable (AVX2 + F16C when the CPU
 * has them, chosen at run time). Shapes: nc == 1 with nr <= 8 (decode), or nr <= 2 with
 * nc <= 4 (a batch); the AVX2 kernel computes a fixed 8x1 or 2x4 tile, so rows and columns
 * short of it cost as much as a full tile. pf (or NULL): where the next tile's weight rows
 * start, contiguous, to be prefetched while this one runs (nr * row bytes of them). */
void pl_cpu_qdot_tile(int q4, int nr, int nc, const unsigned char *const w[],
                      const int8_t *const y[], const float *const yd[], const int32_t *const ys[],
                      int64_t nb, const unsigned char *pf, float *out);
void pl_cpu_qdot_tile_portable(int q4, int nr, int nc, const unsigned char *const w[],
                               const int8_t *const y[], const float *const yd[],
                               const int32_t *const ys[], int64_t nb, float *out);

/* The act_q8 tiles for Q4_1, Q5_0, Q5_1, IQ4_NL and IQ4_XS weights (cpu_qdot_more.c, which
 * gives the one float formula per format) against the same Q8_0 activation rows: whether
 * type t takes them; the portable reference row dot (ys: the activation blocks' sums of
 * quants, the _1 formats' mins need them; nb blocks of 32, IQ4_XS: nb / 8 super-blocks);
 * and the tile, pl_cpu_qdot_tile's shapes (nc == 1 with nr <= 8, or nr <= 2 with nc <= 4),
 * each value bit-identical to the portable row dot (AVX2 + F16C, with AVX-VNNI where the
 * CPU has it, chosen at run time; elsewhere, NEON and wasm included, the portable one).
 * pf (or NULL): where the next tile's weight rows start, as for pl_cpu_qdot_tile. */
int pl_cpu_qdot_more_type(uint32_t t);
float pl_cpu_qdot_more_row_portable(uint32_t t, const unsigned char *w, const int8_t *y,
                                    const float *yd, const int32_t *ys, int64_t nb);
void pl_cpu_qdot_more_tile(uint32_t t, int nr, int nc, const unsigned char *const w[],
                           const int8_t *const y[], const float *const yd[],
                           const int32_t *const ys[], int64_t nb, const unsigned char *pf,
                           float *out);
/* The prefill GEMM for those of them whose block value is d_w x an int8 level (Q5_0,
 * IQ4_NL, IQ4_XS: pl_cpu_qdot_more_gemm_type): pl_cpu_qdot_more_unpack lays nr <= 4 weight
 * rows out as pl_cpu_gemm_unpack does Q8_0's (the levels, their absolute values, d_w), and
 * pl_cpu_gemm_tile(q4 = 0, ...) then computes ((float)dot * d_w) * d_x per block in order:
 * the formula of cpu_qdot_more.c, so the same bits as the tiles. Returns 0 (nothing done)
 * for other types. The _1 formats' min term has no place in that GEMM: they take the tiles. */
int pl_cpu_qdot_more_gemm_type(uint32_t t);
int pl_cpu_qdot_more_unpack(uint32_t t, int nr, const unsigned char *const w[], int64_t nb,
                            unsigned char *wu, float *wd);
void pl_cpu_qdot_more_tile_portable(uint32_t t, int nr, int nc, const unsigned char *const w[],
                                    const int8_t *const y[], const float *const yd[],
                                    const int32_t *const ys[], int64_t nb, float *out);

/* wasm simd128 (cpu_qdot_wasm.c; compiled in with -msimd128, wasm having no run-time CPU
 * detection): pl_cpu_qdot_tile's and pl_cpu_gemm_tile's contracts, bit-identical to the
 * portable reference; they take over from the portable paths unless pl_cpu_portable is set. */
#ifdef __wasm_simd128__
#define PL_QDOT_WASM 1
void pl_cpu_qdot_tile_wasm(int q4, int nr, int nc, const unsigned char *const w[],
                           const int8_t *const y[], const float *const yd[], int64_t nb,
                           float *out);
void pl_cpu_gemm_tile_wasm(int q4, int ng, const unsigned char *wu, const float *wd, int64_t nb,
                           const int8_t *q, const float *d, float *out);
#endif

/* One activation row of k values (a multiple of 32) quantised as pl_quant_act_q8_0 does
 * (the same bits; AVX2 where the CPU has it): quants q [k], each block's scale widened to
 * float d [k/32] and its sum of quants s [k/32]. */
void pl_cpu_quant_act(const float *x, int64_t k, int8_t *q, float *d, int32_t *s);

/* The K-quants' activations (act_q8 with Q4_K/Q5_K/Q6_K weights; cpu_kdot.c): one row of k
 * values (a multiple of 256) quantised per super-block of 256: q [k] = roundf(x / d) in
 * -127..127 with d = max|x| / 127 a float, d [k/256], and s [k/16] the sums of each 16
 * quants. The AVX2 path (finite blocks) and the portable one give the same bits. */
void pl_cpu_quant_act_k(const float *x, int64_t k, int8_t *q, float *d, int16_t *s);
void pl_cpu_quant_act_k_portable(const float *x, int64_t k, int8_t *q, float *d, int16_t *s);

/* Whether type t takes pl_cpu_kdot (Q4_K, Q5_K, Q6_K). */
int pl_cpu_kdot_type(uint32_t t);
/* One weight row w of nsb super-blocks of type t against nc <= 4 activation rows y[c]
 * (yd[c], ys[c]: their scales and 16-sums, as pl_cpu_quant_act_k makes them) into
 * out[c]: per super-block the exact integer dot, then (float)isum * (d_w * d_x) -
 * (float)imin * (dmin_w * d_x) added in super-block order (cpu_kdot.c says how), each value
 * bit-identical to pl_cpu_kdot_row_portable (AVX2 + F16C chosen at run time; the AVX2
 * kernel computes 1 or 4 columns, so 2 or 3 cost as much as 4). */
void pl_cpu_kdot(uint32_t t, const unsigned char *w, int nc, const int8_t *const y[],
                 const float *const yd[], const int16_t *const ys[], int64_t nsb, float *out);
float pl_cpu_kdot_row_portable(uint32_t t, const unsigned char *w, const int8_t *y, const float *yd,
                               const int16_t *ys, int64_t nsb);
/* Decode's tile: nr <= 4 weight rows w[r] (nsb super-blocks of type t each) against the one
 * activation row y (yd, ys as above) into out[r], each value bit-identical to
 * pl_cpu_kdot_row_portable (AVX2 + F16C, with AVX-VNNI or AVX-512 VNNI where the CPU has
 * them, chosen at run time: a 4-row kernel, so fewer rows cost as much; elsewhere
 * pl_cpu_kdot row by row). */
void pl_cpu_kdot_rows(uint32_t t, int nr, const unsigned char *const w[], const int8_t *y,
                      const float *yd, const int16_t *ys, int64_t nsb, float *out);
/* A Q4_K/Q5_K super-block's 8 six-bit scales then its 8 mins, one byte each in o's 16
 * bytes: pl_k4_scale_min for all 8 at once, four bytes a word (little-endian). */
static inline void pl_cpu_k4_scales(const unsigned char *blk, uint32_t o[4]) {
    uint32_t u[3];
    memcpy(u, blk + 4, 12);
    o[0] = u[0] & 0x3f3f3f3f;                                            /* scales 0-3 */
    o[1] = (u[2] & 0x0f0f0f0f) | ((u[0] >> 6) & 0x03030303) << 4;        /* scales 4-7 */
    o[2] = u[1] & 0x3f3f3f3f;                                            /* mins 0-3 */
    o[3] = ((u[2] >> 4) & 0x0f0f0f0f) | ((u[1] >> 6) & 0x03030303) << 4; /* mins 4-7 */
}

/* The float step of one K-quant super-block (dw, dm: the block's d and dmin; isum, imin its
 * integer sums), the same on every path (cpu_kdot.c, cpu_kdot_neon.c): sum + (float)isum *
 * (dw * dy) - (float)imin * (dm * dy), never fused. */
static inline float pl_cpu_k_step(float sum, uint32_t t, float dw, float dm, int32_t isum,
                                  int32_t imin, float dy) {
    if (t == PL_TYPE_Q6_K) return sum + (float)isum * (dw * dy);
    return sum + ((float)isum * (dw * dy) - (float)imin * (dm * dy));
}

/* The K-quants' prefill GEMM (cpu_kdot.c; AVX2 - with AVX-VNNI or AVX-512 VNNI where the CPU
 * has them - or NEON: the unpack and the tile return 0, doing nothing, without them): 4
 * weight rows x 8, 16 or 32 columns, each value bit-identical to pl_cpu_kdot_row_portable.
 * pl_cpu_kgemm_pack lays out 8 columns (as pl_cpu_kdot takes them) of nsb super-blocks: q
 * [nsb][8][256] (per 32 values, pl_cpu_gemm_pack's [g][c][4]), d [nsb][8] the scales, s
 * [nsb][8][8][2] the sums of 16 (j, column c: sums 2j and 2j+1); a pack's groups lie one after the
 * other (q nsb * 2048 bytes apart, d nsb * 8 and s nsb * 128 values). pl_cpu_kgemm_unpack: nr <= 4
 * weight rows (missing ones repeat the last) into wq [nsb][4][256] unsigned quants in element
 * order, wsc [nsb][4][16] int16 scales (Q4_K/Q5_K: 8 scales, 8 mins; Q6_K: 16 scales), wd
 * [nsb][4][2] d and dmin. pl_cpu_kgemm_tile: out[(k * 4 + r) * 8 + c] for the ng (1, 2 or
 * 4) groups from q/d/s on (4: one 4 x 32 tile on AVX-512 VNNI, each weight broadcast meeting
 * 32 columns; else two of 2). */
void pl_cpu_kgemm_pack(const int8_t *const y[8], const float *const yd[8],
                       const int16_t *const ys[8], int64_t nsb, int8_t *q, float *d, int16_t *s);
int pl_cpu_kgemm_unpack(uint32_t t, int nr, const unsigned char *const w[], int64_t nsb,
                        uint8_t *wq, int16_t *wsc, float *wd);
int pl_cpu_kgemm_tile(uint32_t t, int ng, const uint8_t *wq, const int16_t *wsc, const float *wd,
                      int64_t nsb, const int8_t *q, const float *d, const int16_t *s, float *out);

/* The prefill GEMM (act_q8, Q4_0/Q8_0, a batch): 4 weight rows x 8 or 16 activation
 * columns a tile, each value bit-identical to pl_cpu_qdot_row_portable.
 * pl_cpu_gemm_pack lays out a group of 8 columns (y[c], yd[c], ys[c] as for
 * pl_cpu_qdot_tile) for the tile: q [nb][256] (block b: [g 0..7][c 0..7][4], the quants
 * 4g..4g+3 of column c), d [nb][8] the scales, s [nb][8] 8 x the block sums; a pack's
 * groups lie one after the other (q nb * 256 bytes apart, d and s nb * 8 values apart).
 * pl_cpu_gemm_unpack unpacks nr <= 4 weight rows (missing rows repeat the last):
 * wu [nb][4][32] (Q4_0: the nibbles 0..15 in element order) or [nb][4][64] (Q8_0: the
 * quants, then their absolute values), wd [nb][4] the scales as floats.
 * pl_cpu_gemm_tile: the ng (1 or 2) groups from q/d/s on: out[(k * 4 + r) * 8 + c], the dot
 * of unpacked row r with column c of group k (AVX2 where the CPU has it, else the portable
 * reference on the same layouts). */
void pl_cpu_gemm_pack(const int8_t *const y[8], const float *const yd[8],
                      const int32_t *const ys[8], int64_t nb, int8_t *q, float *d, int32_t *s);
void pl_cpu_gemm_unpack(int q4, int nr, const unsigned char *const w[], int64_t nb,
                        unsigned char *wu, float *wd);
void pl_cpu_gemm_tile(int q4, int ng, const unsigned char *wu, const float *wd, int64_t nb,
                      const int8_t *q, const float *d, const int32_t *s, float *out);

pl_status pl_cpu_matmul(pl_backend *be, const pl_buf *w, const pl_buf *x, const pl_buf *bias,
                        int64_t n, bool accumulate, pl_buf *out);
pl_status pl_cpu_matmul_id(pl_backend *be, const pl_buf *w, int64_t n_exp, const pl_buf *x,
                           const pl_buf *ids, int64_t n, int64_t n_used, bool x_shared,
                           pl_buf *out);
/* A buffer on the stack that is rows [row0, row0 + rows) of b (the *_cols ops run each
 * column as the single-sequence op on such rows). */
static inline cpu_buf pl_cpu_row_view(const pl_buf *b, int64_t row0, int64_t rows) {
    cpu_buf v = {.h = *b,
                 .data = (char *)((const cpu_buf *)b)->data + row0 * pl_row_size(b->type, b->ne0)};
    v.h.ne1 = rows;
    return v;
}
/* Column i's slot and position from cols (backend.h), checked against the slots of cache
 * (n_ctx rows each) and max_keys: false with the error recorded. */
bool pl_cpu_col(const pl_buf *cols, int64_t i, const pl_buf *cache, int64_t n_ctx, int64_t max_keys,
                int64_t *slot, int64_t *pos);
pl_status pl_cpu_attention_cols(pl_backend *be, const pl_buf *q, const pl_buf *k_cache,
                                const pl_buf *v_cache, int64_t n, const pl_buf *cols, int64_t n_ctx,
                                int64_t max_keys, const pl_attn_params *p, pl_buf *out);
pl_status pl_cpu_attention(pl_backend *be, const pl_buf *q, const pl_buf *k_cache,
                           const pl_buf *v_cache, int64_t n, int64_t pos0, const pl_attn_params *p,
                           pl_buf *out);
/* d[0..n) = the halves s[0..n) as floats (exact): cpu_attention.c's F16C / AVX-512 / NEON
 * conversions where there. */
void pl_cpu_from_half(float *d, const uint16_t *s, int64_t n);
/* One attention call's arguments, shared by its work items (failed: one ran out of memory). */
typedef struct {
    cpu_backend *c;
    const pl_buf *q, *k, *v;
    pl_buf *out;
    int64_t n, pos0;
    const pl_attn_params *p;
    int64_t parts; /* a kv head's query heads are split into this many work items */
    atomic_int failed;
} pl_cpu_attn_job;
/* cpu_attention_tiled.c: pl_cpu_attention's calls of PL_CPU_ATTN_TILED_ROWS query rows or
 * more over an F16 cache, in float32 tiles (llama.cpp's choice for its prompt batches). */
#define PL_CPU_ATTN_TILED_ROWS 64
pl_status pl_cpu_attention_tiled(pl_cpu_attn_job *j);
/* cpu_ssm.c: the gates and the Gated DeltaNet ops (contracts in backend.h). */
pl_status pl_cpu_sigmoid_mul(pl_backend *be, const pl_buf *x, const pl_buf *g, int64_t rows,
                             int64_t cols, int64_t g_cols, bool accumulate, pl_buf *out);
pl_status pl_cpu_ssm_conv(pl_backend *be, const pl_buf *x, const pl_buf *w, pl_buf *state,
                          int64_t n, pl_buf *snaps, pl_buf *out);
pl_status pl_cpu_delta_rule(pl_backend *be, const pl_buf *qkv, const pl_buf *a, const pl_buf *b,
                            const pl_buf *ssm_a, const pl_buf *dt_bias, pl_buf *state, int64_t n,
                            const pl_delta_params *p, pl_buf *snaps, pl_buf *out);

/* The k largest of v[0..cols), as the topk op orders them (backend.h): into oi/ov [k]. */
void pl_cpu_topk_row(const float *v, int64_t cols, int64_t k, int32_t *oi, float *ov);

/* cpu_moe.c: the row softmax, row top-k and the weighted expert combine of backend.h. */
pl_status pl_cpu_softmax_rows(pl_backend *be, const pl_buf *x, int64_t rows, int64_t cols,
                              pl_buf *out);
pl_status pl_cpu_topk_rows(pl_backend *be, const pl_buf *x, int64_t rows, int64_t cols, int64_t k,
                           pl_buf *ids, pl_buf *vals);
pl_status pl_cpu_moe_combine(pl_backend *be, const pl_buf *y, const pl_buf *wts, int64_t n,
                             int64_t n_used, bool accumulate, pl_buf *out);

#endif
