/* probe.c - a short timed run of a model's largest layer matrix on a backend (probe.h). */
#include "probe.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "generate.h" /* pl_now */

static bool in_layer0(const pl_gguf_tensor *t) {
    return t->name.len > 6 && !memcmp(t->name.ptr, "blk.0.", 6);
}

static bool is_experts(const pl_gguf_tensor *t) {
    for (uint64_t i = 0; i + 6 <= t->name.len; i++)
        if (!memcmp(t->name.ptr + i, "_exps.", 6)) return true;
    return false;
}

/* The bytes one token reads of layer 0, and its largest 2-D matrix. */
static pl_status layer_shape(const pl_gguf *g, double *layer_bytes, const pl_gguf_tensor **big) {
    char *arch = pl_gguf_get_string(g, "general.architecture");
    char key[96];
    int64_t n_exp = 0, n_used = 0;
    snprintf(key, sizeof key, "%s.expert_count", arch ? arch : "");
    pl_gguf_get_int(g, key, &n_exp);
    snprintf(key, sizeof key, "%s.expert_used_count", arch ? arch : "");
    pl_gguf_get_int(g, key, &n_used);
    free(arch);
    *layer_bytes = 0;
    *big = NULL;
    for (int64_t i = 0; i < pl_gguf_tensor_count(g); i++) {
        const pl_gguf_tensor *t = pl_gguf_tensor_at(g, i);
        if (!in_layer0(t) || t->ne[1] < 2) continue; /* norms and biases: a few bytes */
        if (is_experts(t) && n_exp > 0 && n_used > 0 && n_used <= n_exp) {
            *layer_bytes += (double)t->nbytes * (double)n_used / (double)n_exp;
            continue;
        }
        *layer_bytes += (double)t->nbytes;
        if (t->ne[2] == 1 && t->ne[3] == 1 && (!*big || t->nbytes > (*big)->nbytes)) *big = t;
    }
    if (!*big) return pl_fail(PL_ERR_FORMAT, "probe: the model has no layer-0 matrix to time");
    return PL_OK;
}

pl_status pl_probe_speed(const pl_gguf *g, pl_backend *be, const pl_probe_opts *o,
                         pl_probe_result *out) {
    memset(out, 0, sizeof *out);
    if (!be) return pl_fail(PL_ERR_ARG, "probe: no backend");
    double budget = o && o->budget_s > 0 ? o->budget_s : 0.25;
    if (budget > PL_PROBE_MAX_S) budget = PL_PROBE_MAX_S;
    double layer_bytes;
    const pl_gguf_tensor *t;
    pl_status s = layer_shape(g, &layer_bytes, &t);
    if (s) return s;
    snprintf(out->matrix, sizeof out->matrix, "%.*s", (int)(t->name.len < 63 ? t->name.len : 63),
             t->name.ptr);
    int64_t k = t->ne[0], rows = t->ne[1];
    uint64_t row_bytes = t->nbytes / (uint64_t)rows;
    if (t->nbytes > PL_PROBE_MAX_BYTES) rows = (int64_t)(PL_PROBE_MAX_BYTES / row_bytes);
    if (rows < 1)
        return pl_fail(PL_ERR_FORMAT, "probe: %s has rows of %llu bytes", out->matrix,
                       (unsigned long long)row_bytes);
    uint64_t bytes = row_bytes * (uint64_t)rows;
    void *zeros = calloc(1, (size_t)bytes);
    pl_buf *w = NULL, *x = NULL, *y = NULL;
    if (!zeros)
        return pl_fail(PL_ERR_NOMEM, "probe: out of memory for %llu bytes",
                       (unsigned long long)bytes);
    if (!(s = pl_be_buf_weight(be, t->type, k, rows, zeros, &w)) &&
        !(s = pl_be_buf_new(be, PL_TYPE_F32, k, 1, &x)))
        s = pl_be_buf_new(be, PL_TYPE_F32, rows, 1, &y);
    float sink;
    /* a first product outside the timing: pipelines compiled, pages touched */
    if (!s && !(s = pl_be_matmul(w, x, NULL, 1, false, y))) s = pl_be_read(y, 0, &sink, 4);
    double t0 = pl_now(), el = 0;
    int calls = 0, batch = 1;
    while (!s && el < budget && calls < PL_PROBE_MAX_CALLS) {
        for (int i = 0; !s && i < batch; i++) s = pl_be_matmul(w, x, NULL, 1, false, y);
        if (!s) s = pl_be_read(y, 0, &sink, 4);
        calls += batch;
        el = pl_now() - t0;
        if (batch < 64) batch *= 2; /* a GPU's read back is not timed once per product */
    }
    pl_be_buf_free(y);
    pl_be_buf_free(x);
    pl_be_buf_free(w);
    free(zeros);
    if (s) {
        char why[256]; /* pl_fail writes where pl_last_error points */
        snprintf(why, sizeof why, "%s", pl_last_error());
        return pl_fail(s, "probe on %s: %s", be->name ? be->name : "the backend", why);
    }
    double per_layer = el / calls * (layer_bytes / (double)bytes);
    out->layers_per_s = per_layer > 0 ? 1.0 / per_layer : 0;
    out->seconds = el;
    out->calls = calls;
    if (!(out->layers_per_s > 0) || !isfinite(out->layers_per_s))
        return pl_fail(PL_ERR, "probe: %d products in %g s give no speed", calls, el);
    return PL_OK;
}
