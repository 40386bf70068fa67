/* device.h - pooled's small GPU interface: a device, buffers, compute kernels, bindings,
 * recording dispatches into one command buffer, one submit, and reading results back.
 *
 * dawn.c implements it over the standard webgpu.h C API (Dawn, loaded with dlopen at run
 * time), so libpooled links no GPU library and runs without one. Everything above this
 * header (kernels, the GPU backend, tests) speaks only these calls.
 *
 * Model of use: at load, create buffers, upload weights (pl_gpu_write stages at most 8 MB
 * between submits), build kernels from WGSL text and bind buffers to them once. Per token:
 * pl_gpu_write the few changing parameters, then record every dispatch between
 * pl_gpu_begin and pl_gpu_submit, then pl_gpu_read the few bytes of the answer. */
#ifndef PL_GPU_DEVICE_H
#define PL_GPU_DEVICE_H

#include <stddef.h>
#include <stdint.h>

#include "../base/status.h"

typedef struct pl_gpu pl_gpu;
typedef struct pl_gpu_buf pl_gpu_buf;
typedef struct pl_gpu_kernel pl_gpu_kernel;
typedef struct pl_gpu_bind pl_gpu_bind;

/* What the adapter is and what it allows; filled by pl_gpu_open. */
typedef struct {
    char name[192];    /* "NVIDIA H200 (Vulkan; NVIDIA: 580.159.04 ...)" */
    int software;      /* a CPU adapter (lavapipe): correct but slow */
    int has_subgroups; /* WGSL `enable subgroups;` is allowed */
    uint32_t subgroup_min, subgroup_max;
    uint64_t max_binding;         /* bytes one storage binding may span */
    uint64_t max_buffer;          /* bytes one buffer may hold */
    uint32_t max_groups_per_dim;  /* workgroups per dispatch dimension (65535) */
    uint32_t max_invocations;     /* threads per workgroup */
    uint32_t max_wg_storage;      /* bytes of var<workgroup> */
    uint32_t max_storage_buffers; /* storage bindings per shader */
    uint32_t storage_align;       /* storage binding offsets must be multiples of this */
    uint32_t uniform_align;       /* uniform binding offsets must be multiples of this */
    /* Subgroup matrices (Dawn's chromium-experimental-subgroup-matrix: Vulkan cooperative
     * matrices, tensor cores): what the adapter offers (n_smx configs, at most 16 kept),
     * and has_smx: the device took the feature and shader-f16 (WGSL may enable both);
     * f16_offered: the adapter lists shader-f16 (the pinned Dawn never does on NVIDIA) */
    int has_f16, has_smx, n_smx, f16_offered;
    struct {
        uint32_t type, result; /* 1 f32, 2 f16, 3 u32, 4 i32 (Dawn's component types) */
        uint32_t m, n, k;
    } smx[16];
} pl_gpu_info;

/* Counters for benchmarks and notes. */
typedef struct {
    uint64_t dispatches, submits, bytes_uploaded, bytes_read;
} pl_gpu_stats;

/* Open the first usable adapter. lib: path of the Dawn library, NULL for the default
 * (node_modules/bun-webgpu-linux-x64/libwebgpu_wrapper.so in the current directory, next
 * to the executable or one folder above it). Fails with the reason (library missing, no
 * Vulkan adapter, only Dawn's Null backend, device refused). */
pl_status pl_gpu_open(const char *lib, pl_gpu **out);

/* pl_gpu_open with the device's settings (strings borrowed for the call). */
typedef struct {
    const char *dawn_lib; /* as pl_gpu_open's lib */
    int robust;           /* 1: keep Dawn's robustness checks (default off: faster) */
    const char *toggles;  /* more Dawn toggles, comma-separated ("skip_validation"), or NULL */
    /* subgroup matrices: 1 list the adapter's configs (info.smx) and take the feature
     * (with shader-f16) where offered; 0 or -1 neither (no probe, and no allow_unsafe_apis
     * toggle, which Dawn asks for to list them) */
    int smx;
} pl_gpu_open_opts;

/* "f16 x f16 -> f32 16x16x16" for config i of info (buf of at least 48 bytes). */
const char *pl_gpu_smx_name(const pl_gpu_info *info, int i, char *buf, size_t cap);
/* The config the prefill GEMM uses: f16 x f16 -> f32 with M, N, K dividing 32 (and
 * M, N at least 8); index into info->smx, or -1 (none, or the device did not take it). */
int pl_gpu_smx_pick(const pl_gpu_info *info);
pl_status pl_gpu_open_with(const pl_gpu_open_opts *o, pl_gpu **out);
void pl_gpu_close(pl_gpu *g);
const pl_gpu_info *pl_gpu_get_info(const pl_gpu *g);
const pl_gpu_stats *pl_gpu_get_stats(const pl_gpu *g);

/* ---- buffers ---- */
typedef enum {
    PL_GPU_STORAGE = 1,  /* read/written by kernels, written by pl_gpu_write, copied */
    PL_GPU_UNIFORM = 2,  /* small parameters (var<uniform>), written by pl_gpu_write */
    PL_GPU_READBACK = 4, /* destination of pl_gpu_copy, read by pl_gpu_read */
} pl_gpu_usage;

/* size is rounded up to a multiple of 4. Contents start as zero. */
pl_status pl_gpu_buf_new(pl_gpu *g, uint64_t size, pl_gpu_usage usage, const char *label,
                         pl_gpu_buf **out);
void pl_gpu_buf_free(pl_gpu_buf *b);
uint64_t pl_gpu_buf_size(const pl_gpu_buf *b);

/* Queue a write of n bytes (off and n multiples of 4). Ordered with submits: it lands after
 * everything submitted before and before everything submitted after. Large writes go out in
 * chunks with a submit and wait every 8 MB, so staging memory stays bounded. */
pl_status pl_gpu_write(pl_gpu *g, pl_gpu_buf *b, uint64_t off, const void *src, size_t n);

/* ---- kernels ---- */
/* Compile WGSL with entry point `main` into a compute pipeline, inside error scopes: a
 * rejected shader fails with the compiler's first message (label names it). */
pl_status pl_gpu_kernel_new(pl_gpu *g, const char *wgsl, const char *label, pl_gpu_kernel **out);
void pl_gpu_kernel_free(pl_gpu_kernel *k);

/* A buffer range for binding i (@group(0) @binding(i)). size 0: to the end of the buffer.
 * offset must be a multiple of info.storage_align, size at most info.max_binding. */
typedef struct {
    pl_gpu_buf *buf;
    uint64_t offset, size;
} pl_gpu_ref;

/* Bind buffers to a kernel's bindings 0..n-1 once; reuse the binding every token. */
pl_status pl_gpu_bind_new(pl_gpu *g, const pl_gpu_kernel *k, const pl_gpu_ref *refs, int n,
                          pl_gpu_bind **out);
void pl_gpu_bind_free(pl_gpu_bind *b);

/* ---- recording and submitting ---- */
/* Start recording a command buffer. Dispatches recorded in order see each other's writes. */
void pl_gpu_begin(pl_gpu *g);
/* Record n_groups workgroups of k. Counts above the per-dimension limit are spread over
 * two dimensions: the kernel computes its group index as wid.x + wid.y * nwg.x and must
 * ignore indices >= n_groups (the grid may round up). */
void pl_gpu_dispatch(pl_gpu *g, const pl_gpu_kernel *k, const pl_gpu_bind *b, uint32_t n_groups);
/* Record a copy (offsets and n multiples of 4). */
void pl_gpu_copy(pl_gpu *g, pl_gpu_buf *src, uint64_t src_off, pl_gpu_buf *dst, uint64_t dst_off,
                 uint64_t n);
/* Finish the recording and submit it. Fails if any call since the last check was invalid
 * (the device reports it) or the device was lost. */
pl_status pl_gpu_submit(pl_gpu *g);
/* A finished recording kept to be submitted later (a pass prepared before its input
 * arrives, gpu_backend.c). */
typedef struct pl_gpu_cmd pl_gpu_cmd;
/* Finish the recording without submitting it: *out its command buffer (NULL when nothing
 * was recorded). Fails as pl_gpu_submit does. */
pl_status pl_gpu_end(pl_gpu *g, pl_gpu_cmd **out);
/* Submit a command buffer pl_gpu_end made, and free it (NULL: nothing). */
pl_status pl_gpu_submit_cmd(pl_gpu *g, pl_gpu_cmd *c);
/* Free one never submitted (NULL is fine). */
void pl_gpu_cmd_free(pl_gpu *g, pl_gpu_cmd *c);
/* Wait until everything submitted has run. */
pl_status pl_gpu_finish(pl_gpu *g);

/* Map a READBACK buffer (its copy must have been submitted), wait, copy n bytes out. */
pl_status pl_gpu_read(pl_gpu *g, pl_gpu_buf *b, uint64_t off, void *dst, size_t n);
/* Read any STORAGE buffer range now: records a copy, submits, waits (tests, one-offs). */
pl_status pl_gpu_download(pl_gpu *g, pl_gpu_buf *b, uint64_t off, void *dst, size_t n);

/* Seconds of a monotonic clock (for timing loops). */
double pl_gpu_now(void);

#endif
