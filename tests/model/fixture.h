/* fixture.h - reading the reference files of shared/fixtures in tests: a number array out
 * of a JSON file (found by the keys leading to it), raw float32 logit files, and the
 * relative logit comparison every model test uses. Header-only, included by test programs. */
#ifndef PL_TEST_FIXTURE_H
#define PL_TEST_FIXTURE_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/file_map.h"
#include "model/model.h"

/* The numbers of the array that follows the keys path[0], path[1], ... (each searched after
 * the previous one) in a JSON text: `"key": [1, 2, ...]`; nested arrays are flattened in
 * order. Returns the count (<= cap) or -1. */
static inline int fixture_numbers(const char *json, const char *const *path, int n_path,
                                  double *out, int cap) {
    const char *p = json;
    char quoted[256];
    for (int i = 0; i < n_path; i++) {
        snprintf(quoted, sizeof quoted, "\"%s\"", path[i]);
        p = strstr(p, quoted);
        if (!p) return -1;
        p += strlen(quoted);
    }
    while (*p == ' ' || *p == ':' || *p == '\n') p++;
    if (*p != '[') return -1;
    int n = 0, depth = 0;
    for (;;) {
        while (*p == ' ' || *p == '\n' || *p == ',') p++;
        if (*p == '[') {
            depth++;
            p++;
        } else if (*p == ']') {
            p++;
            if (--depth == 0) return n;
        } else {
            char *end;
            double v = strtod(p, &end);
            if (end == p || n == cap) return -1;
            out[n++] = v;
            p = end;
        }
    }
}

/* Same, as token ids. */
static inline int fixture_ids(const char *json, const char *const *path, int n_path, int32_t *out,
                              int cap) {
    double *tmp = malloc(sizeof(double) * (size_t)cap);
    int n = tmp ? fixture_numbers(json, path, n_path, tmp, cap) : -1;
    for (int i = 0; i < n; i++) out[i] = (int32_t)tmp[i];
    free(tmp);
    return n;
}

/* A whole text file (malloc'd) or NULL. */
static inline char *fixture_text(const char *path) {
    char *t = NULL;
    size_t len;
    return pl_file_read_all(path, &t, &len) == PL_OK ? t : NULL;
}

/* Raw little-endian float32 values of a file (malloc'd), count in *n; NULL if unreadable. */
static inline float *fixture_f32(const char *path, int64_t *n) {
    char *t = NULL;
    size_t len = 0;
    if (pl_file_read_all(path, &t, &len) != PL_OK) return NULL;
    *n = (int64_t)(len / 4);
    return (float *)t;
}

/* max |a - b| / max |b|: the logit error relative to the largest reference logit. */
static inline double fixture_rel_err(const float *a, const float *b, int64_t n) {
    double mx = 0, err = 0;
    for (int64_t i = 0; i < n; i++) {
        double d = a[i] > b[i] ? a[i] - b[i] : b[i] - a[i];
        double m = b[i] < 0 ? -b[i] : b[i];
        if (d > err) err = d;
        if (m > mx) mx = m;
    }
    return mx > 0 ? err / mx : err;
}

/* A new GGUF holding every metadata key of src (to add edited tensors to). */
static inline pl_gguf *fixture_gguf_copy_kv(const pl_gguf *src) {
    pl_gguf *g = pl_gguf_new();
    for (int64_t i = 0; g && i < pl_gguf_kv_count(src); i++) {
        const pl_gguf_kv *kv = pl_gguf_kv_at(src, i);
        char key[256];
        snprintf(key, sizeof key, "%.*s", (int)kv->key.len, kv->key.ptr);
        pl_gguf_set_value(g, key, &kv->value);
    }
    return g;
}

/* A loaded model and a state for it (everything NULL on failure, with pl_last_error set). */
typedef struct {
    pl_gguf *g;
    pl_model *m;
    pl_state *st;
} fixture_model;

static inline pl_status fixture_model_open(fixture_model *fm, pl_backend *be, const char *path,
                                           const pl_state_opts *o) {
    memset(fm, 0, sizeof *fm);
    pl_status s = pl_gguf_open(path, &fm->g);
    if (!s) s = pl_model_load(fm->g, be, NULL, &fm->m);
    if (!s) s = pl_state_new(fm->m, o, &fm->st);
    return s;
}

static inline void fixture_model_close(fixture_model *fm) {
    pl_state_free(fm->st);
    pl_model_free(fm->m);
    pl_gguf_free(fm->g);
    memset(fm, 0, sizeof *fm);
}

#endif
