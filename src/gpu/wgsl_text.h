/* wgsl_text.h - a growable text buffer the WGSL generators write into (printf-style), and
 * the WGSL helper functions several kernel families share. */
#ifndef PL_GPU_WGSL_TEXT_H
#define PL_GPU_WGSL_TEXT_H

#include <stddef.h>

#include "../base/status.h"

typedef struct {
    char *s;
    size_t n, cap;
    int oom;
} pl_wtext;

/* Append formatted text; an allocation failure is remembered and reported by finish. */
void pl_wtext_add(pl_wtext *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Hand the text to *out (caller frees) or fail with PL_ERR_NOMEM. */
pl_status pl_wtext_finish(pl_wtext *t, char **out);
/* Free an unfinished text (on a failure path). */
void pl_wtext_drop(pl_wtext *t);

/* Append the workgroup-index prologue: `let g = wid.x + wid.y * nwg.x;` and an early
 * return past `groups` (uniform across the workgroup, so barriers after it are legal). */
void pl_wtext_group_index(pl_wtext *t, unsigned groups);
/* The same with the group count a WGSL expression (a uniform, e.g. "args.a0"). */
void pl_wtext_group_guard(pl_wtext *t, const char *count);
/* The entry point's builtin parameters: workgroup id, grid size, local index. */
#define PL_WGSL_MAIN_ARGS                                                                          \
    "@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, "             \
    "@builtin(local_invocation_index) lid: u32"

/* Declare the pl_gpu_args uniform `args` (fields a0..a7) at `binding`. */
void pl_wtext_args(pl_wtext *t, int binding);

/* An f32 literal that parses back to exactly v. */
void pl_wtext_f32(pl_wtext *t, float v);
/* Sum (or max) red[c * threads + 0..threads) into red[c * threads] for each copy c < copies,
 * by all threads; ends with a barrier. Needs red2 and PARTS from pl_wtext_reduce_decl. */
void pl_wtext_reduce(pl_wtext *t, unsigned threads, unsigned copies, int max);
void pl_wtext_reduce_decl(pl_wtext *t, unsigned threads, unsigned copies);

/* wgsl_gemv.c: store the result of row `row` for vector `col` (WGSL names in scope: row,
 * col, yo = col * rows) as p's mode, bias, split and side outputs say: v0 the dot (of the
 * gate matrix), v1 the up matrix's dot in GATE_UP. The GEMV and the GEMM share it. */
struct pl_gemv_params_s;
/* wgsl_gemv.c: the WGSL functions of the activation quantiser (f16r, cdiv, q8r), and the
 * quantisation of one block's x values x0..x7 (vec4 each) in scope: packed quants p0..p7,
 * the f16-rounded scale dx and, with `sum`, the quants' sum ps (for Q4_0's offset of 8).
 * Exactly pl_quant_act_q8_0's rule (format/quant_act.c). */
extern const char *const pl_wgsl_q8_helpers;
void pl_wgsl_quantize_block(pl_wtext *t, int sum);
void pl_wgsl_gemv_store(pl_wtext *t, const struct pl_gemv_params_s *p, const char *v0,
                        const char *v1);

#endif
