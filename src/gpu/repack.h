/* repack.h - GGUF weight rows -> the GPU layouts of wgsl_gen.h.
 *
 * Q4_0 / Q8_0 blocks (f16 scale + quants, interleaved) are split into a quants array and a
 * scales array, so a GEMV's threads read contiguous stripes of each; the f16 scales stay
 * f16, two per u32 (on a little-endian host that is simply an array of uint16). F32 and F16
 * rows are used as they are. Other formats are converted at load:
 *   BF16                          -> F32 (exact);
 *   any other format we can read  -> Q8_0, requantised from its float values with
 *                                    pl_quant_act_q8_0 (lossy: about 0.4% of a block's
 *                                    largest value), or F32 when a row is not a whole
 *                                    number of 32-value blocks. */
#ifndef PL_GPU_REPACK_H
#define PL_GPU_REPACK_H

#include <stddef.h>
#include <stdint.h>

#include "../base/status.h"
#include "wgsl_gen.h"

/* The GPU type a tensor of GGML type `ggml_type` with rows of `cols` values becomes;
 * fails for a type we cannot read. */
pl_status pl_gpu_repack_type(uint32_t ggml_type, uint32_t cols, pl_gpu_wtype *out);

/* Bytes of quants (or plain values) and of scales for n_rows rows in GPU type t. */
uint64_t pl_gpu_quant_bytes(pl_gpu_wtype t, uint32_t cols, uint64_t n_rows);
uint64_t pl_gpu_scale_bytes(pl_gpu_wtype t, uint32_t cols, uint64_t n_rows);

/* Convert n_rows rows of GGML data into GPU type `t` (from pl_gpu_repack_type): quants (or
 * values) to q, f16 scales to s (NULL for F32/F16). tmp: scratch of cols floats, used when
 * the format is converted. */
pl_status pl_gpu_repack_rows(uint32_t ggml_type, const void *src, uint32_t cols, uint32_t n_rows,
                             pl_gpu_wtype t, void *q, uint16_t *s, float *tmp);

#endif
