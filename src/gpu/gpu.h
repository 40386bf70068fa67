/* gpu.h - the WebGPU backend: backend.h's ops on a GPU through our WGSL kernels.
 *
 * Ops are recorded, not run: a whole token's work goes into one command buffer, submitted
 * once when the host reads a result (the sampled id) or writes input. Neighbouring ops are
 * fused where the model asks for it (pl_be_fuse: RMSNorm into the next projections,
 * gate/up/SwiGLU, q/k norm + RoPE + KV store) unless fusion is turned off; a test pins
 * that both give the same ids.
 *
 * Opening runs a self-test of every kernel family against its CPU reference (kernel_ref.h)
 * and fails with the reason if a pipeline is rejected or a result is wrong, so a caller
 * can fall back to the CPU. */
#ifndef PL_GPU_GPU_H
#define PL_GPU_GPU_H

#include "../backend/backend.h"

/* Every setting of the GPU backend; the library reads no environment variable (the pooled
 * command maps its POOLED_GPU_* / POOLED_DAWN variables onto these, README). Strings are
 * borrowed: they must outlive the backend. All zero / NULL: the defaults. */
typedef struct {
    const char *dawn_lib; /* NULL: default search (device.h) */
    int no_fuse;       /* 1: one kernel per op (the simple path the fused one is checked against) */
    int no_tune;       /* 1: skip the load-time autotune, use the built-in choices */
    int no_selftest;   /* 1: skip the self-test (tests that run the kernels themselves) */
    int hardware_only; /* 1: fail on a software adapter (lavapipe), before any self-test */
    int tune_verbose;  /* 1: the autotune prints each shape it measures on stderr */
    /* folder of the GEMV tuning cache (gpu-tune.txt, one line per adapter and shape),
     * created with its parent when missing; NULL: no cache (each open tunes afresh) */
    const char *tune_cache;
    const char *gemv;    /* "threads,rows,sg-reduce,sg-rows,unroll": one fixed GEMV shape for
                            every weight type, no autotune (experiments); NULL: tuned */
    const char *gemm;    /* prefill GEMM tile "tm,tn,rm,rn,bk[,version]" for every matrix,
                            or "off": batches always through the GEMV; NULL or "": the
                            built-in tiles per shape */
    int robust;          /* 1: keep Dawn's robustness checks (default: off, faster) */
    const char *toggles; /* more Dawn device toggles, comma-separated (NULL: none) */
    int q8_preload;      /* 1: q8x GEMVs load every row's block first (not yet measured) */
    /* q8x GEMVs of up to 16 columns (decode, verify) read x quantised by one pre-pass
     * dispatch (the prefill GEMM's) instead of quantising it in every workgroup: 0 auto
     * (the default: the GEMVs with a fused RMSNorm and at least 4,096 columns, measured
     * fastest on the H200, gpu-notes.md), -1 never, 1 the GEMVs with a fused RMSNorm, 2 all
     * of them. The GEMV's bits are the same either way. */
    int gemv_xpre;
    /* prefill GEMM on subgroup matrices (the tensor cores; pl_gemm_params versions 5-7)
     * where the device took them: 0 auto (the default version where offered, else the
     * portable kernel), -1 never, 5, 6 or 7 that version (refused where not offered) */
    int smx;
    /* the MoE router's top-k (rows of at most 1024 values): 0 auto (the default: 1), -1 the
     * per-pick reduction kernel, 1 by rank (each value's place counted, one pass) */
    int topk_rank;
    /* the MoE shared expert's 1-row gate GEMV folded into the router's top-k kernel (asked
     * for by moe.c, PL_FUSE_SHARED_GATE; needs the rank top-k): 0 auto (on), -1 never */
    int moe_shgate;
    /* the MoE's weighted combine also adds the gated shared expert (moe.c asks,
     * PL_FUSE_COMBINE_SHARED; no sigmoid_mul dispatch): 0 auto (on), -1 never */
    int moe_comb;
    /* attention of more than 16 query rows (prefill, chain frames) through the prefill
     * kernel, one dispatch per layer (wgsl_attn_prefill.c; F16/F32 caches, adapters with
     * subgroups): 0 auto (on, except on a software adapter: lavapipe takes 5-40 s to
     * compile one), -1 never (the decode kernel per 8 rows), 1 on (also software) */
    int fa;
    /* the delta rule of more than 16 columns (prefill) in chunks of tokens staged in
     * workgroup memory, their norms, gates and betas computed before the serial loop: 0
     * auto (on), -1 never (token by token, as decode), 1 on */
    int dr_chunk;
    /* a flush that a read then waits on is submitted in command buffers of this many
     * dispatches, so the GPU starts on the first while the rest are recorded (a room's
     * stage, which cannot record its step before the input comes): 0 auto
     * (PL_GPU_SUBMIT_EVERY), -1 never (one command buffer a flush), N > 0 that many */
    int submit_every;
    /* q8x GEMVs of 2-16 columns (a verify pass, a batch of decode steps): columns a
     * workgroup, each weight block read once for all of them (wgsl_gemv.c, ncols; the
     * same bits per column as one column a workgroup): 0 auto (per weight type,
     * PL_GPU_GEMV_COLS / _Q4_0; one on a software adapter), -1 one column a workgroup, 2..8 at
     * most that many */
    int gemv_cols;
    /* with several columns a workgroup, the rows a workgroup are halved until rows x
     * matrices x columns (the accumulators of a thread) is at most this: 0 auto (per weight
     * type, PL_GPU_GEMV_COLS_ACC / _Q4_0) */
    int gemv_cols_acc;
    /* q8x matmuls of more than this many columns go through the prefill GEMM (fewer through
     * the GEMV, each column with decode's bits): 0 auto (PL_GPU_GEMM_MIN_COLS, 16: a verify
     * pass of 1 + 15 drafts keeps decode's bits), N >= 1 that many */
    int gemm_min_cols;
    /* q8x matmuls of gemm_exact_min..gemm_exact_max columns (a batch of decode steps, a
     * verify pass, a short prompt) go through the GEMM in the one-column GEMV's order
     * (pl_gemm_params.gt): decode's bits per column, instead of the GEMV of several columns
     * a workgroup (up to gemm_min_cols) or the in-order GEMM. Off by default: slower than
     * both on the H200 so far (docs/gpu-notes.md, twelfth session). min: 0 or -1 never,
     * N >= 2 from N; max: 0 auto (PL_GPU_GEMM_EXACT_MAX) */
    int gemm_exact_min, gemm_exact_max;
    const char *profile_path; /* per-op profile of one decode step appended here (NULL: off) */
    int profile_at;           /* the read (flush) that is profiled; <= 0: 40 */
} pl_gpu_backend_opts;

/* GEMV columns: 4 (and so 4 rows, 2 for gate/up) a workgroup; on an H100 8 columns over 2
 * rows re-read too much x per weight block (docs/gpu-notes.md, nineteenth session). Q4_0: 2
 * columns over 4 rows (2 for gate/up), 8 accumulators (twentieth session) */
#define PL_GPU_SUBMIT_EVERY       64
#define PL_GPU_GEMV_COLS          4
#define PL_GPU_GEMV_COLS_ACC      16
#define PL_GPU_GEMV_COLS_Q4_0     2
#define PL_GPU_GEMV_COLS_ACC_Q4_0 8
#define PL_GPU_GEMM_EXACT_MAX     64

/* The tuning settings of o (all but dawn_lib, tune_cache and profile_path) from text:
 * NAME=VALUE items separated by ';' or newlines, NAME one of fuse, tune, gemv, gemm, robust,
 * toggles, preload, xpre, smx, topk, moesh, moecomb, fa, dr, chunk, mc, exact, gemm_min,
 * profile_at, VALUE as the pooled command's POOLED_GPU_<NAME> variable takes it
 * (README). text is modified (cut into its items) and o borrows its strings. Fails for an
 * unknown name or an item without '='; a bad value is refused when the backend opens. */
pl_status pl_gpu_opts_parse(char *text, pl_gpu_backend_opts *o);

/* Open the GPU and make a backend; o may be NULL. Fails (with the reason) without a usable
 * adapter or if the self-test fails. */
pl_status pl_gpu_backend_new(const pl_gpu_backend_opts *o, pl_backend **out);

/* True when the backend's adapter is a software rasteriser (lavapipe): correct, slow. */
int pl_gpu_backend_is_software(const pl_backend *be);

/* Fused kernels a model asked for (pl_be_fuse) whose ops were not found in their group, so
 * far; *last (optional) describes the latest ("gate_up, asked for by the group starting at
 * op 12 of a queue of 80"), or "". */
uint64_t pl_gpu_backend_fusions_missed(const pl_backend *be, const char **last);

/* Dispatches and submits recorded so far (for benchmarks and notes). */
void pl_gpu_backend_counters(const pl_backend *be, uint64_t *dispatches, uint64_t *submits);

#endif
