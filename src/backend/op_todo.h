/* op_todo.h - TEMPORARY (integration branch i10 only, removed before main): methods that
 * fail with "not implemented yet" so a backend passes pl_be_check_methods while the new ops
 * are being written. Never merge this file into main. */
#ifndef PL_BACKEND_OP_TODO_H
#define PL_BACKEND_OP_TODO_H
#include <stdio.h>

#include "backend.h"

#define PL_TODO_BODY(op)                                                                           \
    return pl_fail(PL_ERR, "%s backend: %s is not implemented yet", be->name, op)
static inline pl_status todo_softmax_rows(pl_backend *be, const pl_buf *x, int64_t r, int64_t c,
                                          pl_buf *o) {
    (void)x, (void)r, (void)c, (void)o;
    PL_TODO_BODY("softmax_rows");
}
static inline pl_status todo_topk_rows(pl_backend *be, const pl_buf *x, int64_t r, int64_t c,
                                       int64_t k, pl_buf *i, pl_buf *v) {
    (void)x, (void)r, (void)c, (void)k, (void)i, (void)v;
    PL_TODO_BODY("topk_rows");
}
static inline pl_status todo_matmul_id(pl_backend *be, const pl_buf *w, int64_t ne, const pl_buf *x,
                                       const pl_buf *ids, int64_t n, int64_t nu, bool xs,
                                       pl_buf *o) {
    (void)w, (void)ne, (void)x, (void)ids, (void)n, (void)nu, (void)xs, (void)o;
    PL_TODO_BODY("matmul_id");
}
static inline pl_status todo_moe_combine(pl_backend *be, const pl_buf *y, const pl_buf *w,
                                         int64_t n, int64_t nu, bool acc, pl_buf *o) {
    (void)y, (void)w, (void)n, (void)nu, (void)acc, (void)o;
    PL_TODO_BODY("moe_combine");
}
static inline pl_status todo_sigmoid_mul(pl_backend *be, const pl_buf *x, const pl_buf *g,
                                         int64_t r, int64_t c, int64_t gc, bool acc, pl_buf *o) {
    (void)x, (void)g, (void)r, (void)c, (void)gc, (void)acc, (void)o;
    PL_TODO_BODY("sigmoid_mul");
}
static inline pl_status todo_ssm_conv(pl_backend *be, const pl_buf *x, const pl_buf *w, pl_buf *st,
                                      int64_t n, pl_buf *sn, pl_buf *o) {
    (void)x, (void)w, (void)st, (void)n, (void)sn, (void)o;
    PL_TODO_BODY("ssm_conv");
}
static inline pl_status todo_delta_rule(pl_backend *be, const pl_buf *qkv, const pl_buf *a,
                                        const pl_buf *b, const pl_buf *sa, const pl_buf *dt,
                                        pl_buf *st, int64_t n, const pl_delta_params *p, pl_buf *sn,
                                        pl_buf *o) {
    (void)qkv, (void)a, (void)b, (void)sa, (void)dt, (void)st, (void)n, (void)p, (void)sn, (void)o;
    PL_TODO_BODY("delta_rule");
}
/* The CPU has the mixture-of-experts ops; the GPU has none of these yet. */
#define PL_TODO_DN_METHODS                                                                         \
    .sigmoid_mul = todo_sigmoid_mul, .ssm_conv = todo_ssm_conv, .delta_rule = todo_delta_rule,
#define PL_TODO_METHODS                                                                            \
    .softmax_rows = todo_softmax_rows, .topk_rows = todo_topk_rows, .matmul_id = todo_matmul_id,   \
    .moe_combine = todo_moe_combine, PL_TODO_DN_METHODS
#endif
