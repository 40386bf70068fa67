/* op_todo.h - TEMPORARY (integration branch i10 only, removed before main): methods that
 * fail with "not implemented yet" so a backend passes pl_be_check_methods while the new ops
 * are being written. Never merge this file into main. */
#ifndef PL_BACKEND_OP_TODO_H
#define PL_BACKEND_OP_TODO_H
#include <stdio.h>

#include "backend.h"

#define PL_TODO_BODY(op)                                                                           \
    return pl_fail(PL_ERR, "%s backend: %s is not implemented yet", be->name, op)
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
/* The Gated DeltaNet ops the CPU does not have yet (the GPU has every op). */
#define PL_TODO_DN_METHODS                                                                         \
    .sigmoid_mul = todo_sigmoid_mul, .ssm_conv = todo_ssm_conv, .delta_rule = todo_delta_rule,
#endif
