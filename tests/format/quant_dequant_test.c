/* quant_dequant_test.c - dequantization is bit-exact with llama.cpp's: for every file and
 * tensor listed in shared/fixtures/quant/expected.json, the SHA-256 of our float32 output
 * equals the recorded `sha256_dequant_f32`, and the type and shape match. Then the
 * stories260K Q8_0/Q4_0 files made by llama-quantize stay within a per-block bound of the
 * F32 original (bounds stated at check_close).
 *
 * expected.json is read at run time by the small reader below, which knows just this
 * file's shape: {"files": {FILE: {TENSOR: {"type": S, "shape_rows_cols": [..],
 * "sha256_dequant_f32": S, ...}}}}; everything else is skipped. */
#include <ctype.h>
#include <stdint.h>

#include "base/file_map.h"
#include "base/sha256.h"
#include "format/gguf.h"
#include "format/quant.h"
#include "format/quant_blocks.h"
#include "test.h"

/* ---- a minimal JSON reader: a cursor over the text ---- */

typedef struct {
    const char *p, *end;
    int bad;
} json;

static void ws(json *j) {
    while (j->p < j->end && isspace((unsigned char)*j->p)) j->p++;
}

static int peek(json *j, char c) {
    ws(j);
    return j->p < j->end && *j->p == c;
}

static int eat(json *j, char c) {
    if (peek(j, c)) {
        j->p++;
        return 1;
    }
    return 0;
}

/* A string without escapes (all this file has) into buf; marks the reader bad otherwise. */
static void str(json *j, char *buf, size_t cap) {
    size_t n = 0;
    if (!eat(j, '"')) {
        j->bad = 1;
        return;
    }
    while (j->p < j->end && *j->p != '"') {
        if (*j->p == '\\' || n + 1 >= cap) j->bad = 1;
        if (n + 1 < cap) buf[n++] = *j->p;
        j->p++;
    }
    buf[n] = 0;
    if (!eat(j, '"')) j->bad = 1;
}

static void skip(json *j) {
    char tmp[256];
    ws(j);
    if (j->p >= j->end) {
        j->bad = 1;
    } else if (*j->p == '"') {
        str(j, tmp, sizeof tmp);
    } else if (*j->p == '{' || *j->p == '[') {
        char close = *j->p == '{' ? '}' : ']';
        j->p++;
        if (eat(j, close)) return;
        do {
            if (close == '}') {
                str(j, tmp, sizeof tmp);
                if (!eat(j, ':')) j->bad = 1;
            }
            skip(j);
        } while (!j->bad && eat(j, ','));
        if (!eat(j, close)) j->bad = 1;
    } else {
        while (j->p < j->end && !strchr(",]} \n\r\t", *j->p)) j->p++; /* number or literal */
    }
}

/* Iterate the members of an object: returns 1 with the next key read, 0 at its end. */
static int member(json *j, int *first, char *key, size_t cap) {
    if (*first) {
        *first = 0;
        if (!eat(j, '{')) j->bad = 1;
        if (eat(j, '}')) return 0;
    } else if (!eat(j, ',')) {
        if (!eat(j, '}')) j->bad = 1;
        return 0;
    }
    str(j, key, cap);
    if (!eat(j, ':')) j->bad = 1;
    return !j->bad;
}

/* ---- the checks ---- */

typedef struct {
    char type[16], sha[80];
    int64_t shape[2];
    int n_dims;
} expect;

static void read_expect(json *j, expect *e) {
    char key[64];
    int first = 1;
    memset(e, 0, sizeof *e);
    while (member(j, &first, key, sizeof key)) {
        if (!strcmp(key, "type")) {
            str(j, e->type, sizeof e->type);
        } else if (!strcmp(key, "sha256_dequant_f32")) {
            str(j, e->sha, sizeof e->sha);
        } else if (!strcmp(key, "shape_rows_cols")) {
            if (!eat(j, '[')) j->bad = 1;
            while (!j->bad && !eat(j, ']')) {
                char *endp;
                long long v = strtoll(j->p, &endp, 10);
                if (endp == j->p || e->n_dims >= 2)
                    j->bad = 1;
                else
                    e->shape[e->n_dims++] = v, j->p = endp;
                eat(j, ',');
            }
        } else {
            skip(j);
        }
    }
}

/* Dequantize a whole tensor (row-major float32) into a malloc'd buffer. */
static float *dequant_tensor(const pl_gguf_tensor *t, int64_t *count) {
    int64_t n = t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3];
    float *out = malloc((size_t)n * sizeof *out);
    if (!out) return NULL;
    if (pl_dequant_row(t->type, t->data, out, n) != PL_OK) {
        free(out);
        return NULL;
    }
    *count = n;
    return out;
}

static void check_tensor(const pl_gguf *g, const char *file, const char *name, const expect *e) {
    const pl_gguf_tensor *t = pl_gguf_find_tensor(g, name);
    CHECK(t != NULL, "%s: no tensor %s", file, name);
    if (!t) return;
    const pl_type_traits *tr = pl_type_get(t->type);
    CHECK(tr && !strcasecmp(tr->name, e->type), "%s %s: type %s, expected %s", file, name,
          tr ? tr->name : "?", e->type);
    /* shape_rows_cols is [rows, cols] for matrices, [n] for vectors */
    int64_t rows = e->n_dims == 2 ? e->shape[0] : 1, cols = e->shape[e->n_dims - 1];
    CHECK(e->n_dims >= 1 && t->ne[0] == cols && t->ne[1] == rows, "%s %s: shape", file, name);
    int64_t n = 0;
    float *v = dequant_tensor(t, &n);
    CHECK(v != NULL, "%s %s: dequant failed: %s", file, name, pl_last_error());
    if (!v) return;
    char hex[65];
    pl_sha256_hex(v, (size_t)n * sizeof *v, hex);
    CHECK(!strcmp(hex, e->sha), "%s %s (%s): sha256 %s, expected %s (first values %g %g %g)", file,
          name, e->type, hex, e->sha, v[0], v[1], v[2]);
    free(v);
}

static void check_fixtures(void) {
    char *text;
    size_t len;
    const char *path = test_shared("fixtures/quant/expected.json");
    CHECK(pl_file_read_all(path, &text, &len) == PL_OK, "%s", pl_last_error());
    if (!text) return;
    json j = {text, text + len, 0};
    char key[256], file[256], tensor[256];
    int first = 1, n_files = 0, n_tensors = 0;
    while (member(&j, &first, key, sizeof key)) {
        if (strcmp(key, "files")) {
            skip(&j);
            continue;
        }
        int ffirst = 1;
        while (member(&j, &ffirst, file, sizeof file)) {
            char rel[300];
            snprintf(rel, sizeof rel, "fixtures/quant/%s", file);
            pl_gguf *g = NULL;
            pl_status st = pl_gguf_open(test_shared(rel), &g);
            CHECK(st == PL_OK, "%s: %s", file, pl_last_error());
            int tfirst = 1, in_file = 0;
            while (member(&j, &tfirst, tensor, sizeof tensor)) {
                expect e;
                read_expect(&j, &e);
                if (j.bad || !g) continue;
                check_tensor(g, file, tensor, &e);
                n_tensors++;
                in_file++;
            }
            CHECK(!g || in_file == pl_gguf_tensor_count(g), "%s: %d of %lld tensors listed", file,
                  in_file, (long long)pl_gguf_tensor_count(g));
            pl_gguf_free(g);
            n_files++;
        }
    }
    CHECK(!j.bad, "expected.json: could not read it near offset %ld", (long)(j.p - text));
    /* the README lists 14 quantized files of 12 tensors each */
    CHECK(n_files >= 14 && n_tensors >= 14 * 12, "only %d files, %d tensors checked", n_files,
          n_tensors);
    free(text);
}

/* Max |q - f| over one tensor, per block compared against bound_factor * |block scale|:
 *   Q8_0: q = round(x / d) with d = amax/127, so |err| <= d/2 plus the f16 rounding of d
 *         (relative 2^-11, times |q| <= 127: 0.062 d): bound 0.57 * |d16|.
 *   Q4_0: q = trunc(x/d + 8.5) clamped to 15, d = max/-8; the clamp costs up to one step on
 *         the side opposite the max, plus the f16 rounding of d (8 * 2^-11 d): bound 1.01 |d16|. */
static void check_close(const char *qfile, uint32_t qtype, double bound_factor) {
    pl_gguf *f32 = NULL, *q = NULL;
    CHECK(pl_gguf_open(test_shared("models/stories260K.gguf"), &f32) == PL_OK, "%s",
          pl_last_error());
    CHECK(pl_gguf_open(test_shared(qfile), &q) == PL_OK, "%s", pl_last_error());
    if (!f32 || !q) goto done;
    int n_quant = 0;
    for (int64_t i = 0; i < pl_gguf_tensor_count(q); i++) {
        const pl_gguf_tensor *tq = pl_gguf_tensor_at(q, i);
        char name[128];
        snprintf(name, sizeof name, "%.*s", (int)tq->name.len, tq->name.ptr);
        const pl_gguf_tensor *tf = pl_gguf_find_tensor(f32, name);
        CHECK(tf && tf->type == PL_TYPE_F32, "%s: %s missing in the F32 model", qfile, name);
        if (!tf) continue;
        int64_t n = 0;
        float *v = dequant_tensor(tq, &n);
        CHECK(v && n == tf->ne[0] * tf->ne[1], "%s: %s", qfile, name);
        if (!v) continue;
        const float *x = tf->data;
        if (tq->type == PL_TYPE_F32) {
            CHECK(!memcmp(v, x, (size_t)n * 4), "%s: F32 tensor %s differs", qfile, name);
        } else {
            CHECK(tq->type == qtype, "%s: %s has type %u", qfile, name, tq->type);
            n_quant++;
            const uint8_t *blocks = tq->data;
            int bs = pl_type_get(qtype)->type_size;
            double worst = 0; /* largest err / bound */
            for (int64_t b = 0; b < n / PL_QK; b++) {
                pl_half h;
                memcpy(&h, blocks + b * bs, 2); /* both formats start with the f16 scale */
                double bound = bound_factor * fabs(pl_f16_to_f32(h)) + 1e-30;
                for (int k = 0; k < PL_QK; k++) {
                    double err = fabs((double)v[b * PL_QK + k] - x[b * PL_QK + k]);
                    if (err / bound > worst) worst = err / bound;
                }
            }
            CHECK(worst <= 1.0, "%s: %s error reaches %.3f of the bound", qfile, name, worst);
        }
        free(v);
    }
    CHECK(n_quant == 32, "%s: %d quantized tensors, SOURCES.md says 32", qfile, n_quant);
done:
    pl_gguf_free(f32);
    pl_gguf_free(q);
}

static void run_tests(void) {
    check_fixtures();
    check_close("models/stories260K-Q8_0.gguf", PL_TYPE_Q8_0, 0.57);
    check_close("models/stories260K-Q4_0.gguf", PL_TYPE_Q4_0, 1.01);
}
