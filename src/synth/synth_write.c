/* synth_write.c - fill a synthetic GGUF with seeded random values, streaming.
 *
 * Every row of every tensor has its own random stream, seeded from (seed, tensor name, row),
 * so the bytes do not depend on the number of threads or on which other tensors exist.
 * Rows are made in chunks of about CHUNK_VALUES values, split over the threads, converted
 * to the tensor's type with pl_quant_row and written; memory stays a few tens of MB
 * whatever the size of the model. A 3-D tensor (stacked experts) is rows too: row r of
 * expert e is row e * ne[1] + r. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../base/file_write.h"
#include "../base/thread.h"
#include "../format/quant.h"
#include "synth.h"

#define CHUNK_VALUES (4 << 20)
#define MAX_THREADS  64

typedef enum { K_MATRIX, K_NORM, K_BIAS, K_ROPE, K_SSM_A } kind;

/* splitmix64's output function: a bijective mix of a 64-bit counter */
static inline uint64_t mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static uint64_t hash_name(const char *p, uint64_t len) {
    uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a */
    for (uint64_t i = 0; i < len; i++) h = (h ^ (uint8_t)p[i]) * 0x100000001b3ull;
    return h;
}

static bool ends_with(pl_gguf_str s, const char *suffix) {
    size_t n = strlen(suffix);
    return s.len >= n && !memcmp(s.ptr + s.len - n, suffix, n);
}

static kind kind_of(const pl_gguf_tensor *t) {
    if (pl_gguf_str_eq(t->name, "rope_freqs.weight")) return K_ROPE;
    if (ends_with(t->name, ".ssm_a")) return K_SSM_A;
    if (ends_with(t->name, "norm.weight")) return K_NORM;
    if (ends_with(t->name, ".bias")) return K_BIAS;
    return K_MATRIX;
}

/* n values uniform in [-a, a) from the stream seeded by s: two per 64-bit draw */
static void uniform(uint64_t s, float a, float *dst, int64_t n) {
    const float k = a / 2147483648.0f;
    int64_t i = 0;
    for (; i + 1 < n; i += 2) {
        uint64_t z = mix64(s += 0x9e3779b97f4a7c15ull);
        dst[i] = (float)(int32_t)(uint32_t)z * k;
        dst[i + 1] = (float)(int32_t)(uint32_t)(z >> 32) * k;
    }
    if (i < n) dst[i] = (float)(int32_t)(uint32_t)mix64(s + 0x9e3779b97f4a7c15ull) * k;
}

/* Llama 3's RoPE scaling as the converter stores it (rope_freqs.weight): for each of the
 * head_dim/2 frequencies, the factor its angle is divided by: 1 for short wavelengths,
 * `factor` for long ones, a smooth blend in between. */
static void rope_factors(const pl_synth_config *c, float *dst, int64_t n) {
    double lo_wavelen = c->rope_orig_ctx / c->rope_low_freq;
    double hi_wavelen = c->rope_orig_ctx / c->rope_high_freq;
    for (int64_t i = 0; i < n; i++) {
        double freq = 1.0 / pow(c->rope_theta, (double)(2 * i) / c->head_dim);
        double wavelen = 2 * M_PI / freq;
        double f;
        if (wavelen < hi_wavelen)
            f = 1;
        else if (wavelen > lo_wavelen)
            f = c->rope_factor;
        else {
            double smooth = (c->rope_orig_ctx / wavelen - c->rope_low_freq) /
                            (c->rope_high_freq - c->rope_low_freq);
            f = 1 / ((1 - smooth) / c->rope_factor + smooth);
        }
        dst[i] = (float)f;
    }
}

/* The float values of one row of t. */
static void fill_row(const pl_gguf_tensor *t, kind k, const pl_synth_config *c, uint64_t seed,
                     uint64_t name_hash, int64_t row, float *dst) {
    int64_t n = t->ne[0];
    uint64_t s = mix64(seed ^ mix64(name_hash + (uint64_t)row * 0x9e3779b97f4a7c15ull));
    switch (k) {
    case K_ROPE: rope_factors(c, dst, n); break;
    case K_NORM:
        uniform(s, 0.05f, dst, n);
        for (int64_t i = 0; i < n; i++) dst[i] += 1.0f;
        break;
    case K_BIAS: uniform(s, 0.02f, dst, n); break; /* also the DeltaNet's ssm_dt.bias */
    case K_SSM_A: /* -exp(A_log), A_log uniform in +-0.5: a decay rate in [-1.65, -0.61] */
        uniform(s, 0.5f, dst, n);
        for (int64_t i = 0; i < n; i++) dst[i] = -expf(dst[i]);
        break;
    case K_MATRIX: uniform(s, 0.87f / sqrtf((float)n), dst, n); break;
    }
}

typedef struct {
    const pl_gguf_tensor *t;
    const pl_synth_config *c;
    kind k;
    uint64_t seed, name_hash;
    int64_t row0, n_rows;
    uint8_t *out; /* row0's bytes */
    size_t row_bytes;
    float *tmp; /* one row of floats */
    pl_status st;
} job;

static void *run_job(void *p) {
    job *j = p;
    for (int64_t r = 0; r < j->n_rows && !j->st; r++) {
        uint8_t *dst = j->out + (size_t)r * j->row_bytes;
        bool direct = j->t->type == PL_TYPE_F32;
        float *row = direct ? (float *)dst : j->tmp;
        fill_row(j->t, j->k, j->c, j->seed, j->name_hash, j->row0 + r, row);
        if (!direct) j->st = pl_quant_row(j->t->type, row, dst, j->t->ne[0]);
    }
    return NULL;
}

static int64_t rows_of(const pl_gguf_tensor *t) {
    return t->ne[1] * t->ne[2] * t->ne[3];
}

/* Make rows [row0, row0+n) of t into out, split over n_threads threads. */
static pl_status make_rows(const pl_gguf_tensor *t, const pl_synth_config *c, uint64_t seed,
                           int64_t row0, int64_t n, uint8_t *out, size_t row_bytes, float **tmp,
                           int n_threads) {
    job jobs[MAX_THREADS];
    pl_thread th[MAX_THREADS];
    bool started[MAX_THREADS] = {false};
    if (n_threads > n) n_threads = (int)n;
    int64_t per = (n + n_threads - 1) / n_threads;
    uint64_t h = hash_name(t->name.ptr, t->name.len);
    for (int i = 0; i < n_threads; i++) {
        int64_t a = i * per, b = a + per < n ? a + per : n;
        jobs[i] = (job){t,         c,        kind_of(t), seed,
                        h,         row0 + a, b - a,      out + (size_t)a * row_bytes,
                        row_bytes, tmp[i],   PL_OK};
        /* the calling thread takes the first share itself */
        if (i > 0 && b > a) started[i] = pl_thread_start(&th[i], run_job, &jobs[i]) == 0;
        if (i > 0 && b > a && !started[i]) run_job(&jobs[i]);
    }
    run_job(&jobs[0]);
    pl_status st = jobs[0].st;
    for (int i = 1; i < n_threads; i++) {
        if (started[i]) pl_thread_join(th[i]);
        if (!st) st = jobs[i].st;
    }
    return st;
}

pl_status pl_synth_values(const pl_gguf *plan, const pl_synth_config *c, uint64_t seed,
                          const char *name, int64_t row0, int64_t n_rows, float *out) {
    const pl_gguf_tensor *t = pl_gguf_find_tensor(plan, name);
    if (!t) return pl_fail(PL_ERR_ARG, "synth: no tensor %s", name);
    if (row0 < 0 || n_rows < 0 || row0 + n_rows > rows_of(t))
        return pl_fail(PL_ERR_ARG, "synth: rows %lld..%lld are outside %s", (long long)row0,
                       (long long)(row0 + n_rows), name);
    uint64_t h = hash_name(t->name.ptr, t->name.len);
    for (int64_t r = 0; r < n_rows; r++)
        fill_row(t, kind_of(t), c, seed, h, row0 + r, out + r * t->ne[0]);
    return PL_OK;
}

pl_status pl_synth_write_zeros(const pl_gguf *plan, const char *path) {
    pl_file_out fo = {0};
    pl_status st = pl_file_out_open(&fo, path);
    FILE *f = fo.f;
    if (!st) st = pl_gguf_write_header(plan, f);
    for (int64_t i = 0; i < pl_gguf_tensor_count(plan) && !st; i++) {
        const pl_gguf_tensor *t = pl_gguf_tensor_at(plan, i);
        /* a hole up to the tensor's last byte, which is written so the file has its size */
        if (t->nbytes && (fseeko(f, (off_t)(t->nbytes - 1), SEEK_CUR) || fputc(0, f) == EOF))
            st = pl_file_out_failed(&fo);
        if (!st) st = pl_gguf_write_padding(plan, f, t->nbytes);
    }
    if (!st) st = pl_file_out_commit(&fo);
    pl_file_out_abort(&fo);
    return st;
}

pl_status pl_synth_write(const pl_gguf *plan, const pl_synth_config *c, uint64_t seed,
                         int n_threads, const char *path, pl_synth_progress progress, void *ctx) {
    if (n_threads < 1) n_threads = 1;
    if (n_threads > MAX_THREADS) n_threads = MAX_THREADS;
    int64_t max_row = 1;
    uint64_t total = 0, done = 0;
    for (int64_t i = 0; i < pl_gguf_tensor_count(plan); i++) {
        const pl_gguf_tensor *t = pl_gguf_tensor_at(plan, i);
        if (t->ne[0] > max_row) max_row = t->ne[0];
        total += t->nbytes;
    }
    /* chunks hold at least one row, else about CHUNK_VALUES values */
    size_t chunk_bytes = (size_t)(max_row > CHUNK_VALUES ? max_row : CHUNK_VALUES) * 4;
    uint8_t *out = malloc(chunk_bytes);
    float *tmp[MAX_THREADS] = {NULL};
    pl_status st = out ? PL_OK : pl_fail(PL_ERR_NOMEM, "synth: out of memory");
    for (int i = 0; i < n_threads && !st; i++)
        if (!(tmp[i] = malloc((size_t)max_row * sizeof(float))))
            st = pl_fail(PL_ERR_NOMEM, "synth: out of memory");
    /* streamed into a temporary file renamed over `path` when complete */
    pl_file_out fo = {0};
    if (!st) st = pl_file_out_open(&fo, path);
    FILE *f = fo.f;
    if (f) setvbuf(f, NULL, _IOFBF, 1 << 20);
    if (!st) st = pl_gguf_write_header(plan, f);

    for (int64_t i = 0; i < pl_gguf_tensor_count(plan) && !st; i++) {
        const pl_gguf_tensor *t = pl_gguf_tensor_at(plan, i);
        int64_t rows = rows_of(t);
        size_t row_bytes = (size_t)pl_row_size(t->type, t->ne[0]);
        int64_t chunk = (int64_t)(chunk_bytes / 4) / t->ne[0];
        if (chunk < 1) chunk = 1;
        for (int64_t r = 0; r < rows && !st; r += chunk) {
            int64_t n = rows - r < chunk ? rows - r : chunk;
            st = make_rows(t, c, seed, r, n, out, row_bytes, tmp, n_threads);
            if (!st && fwrite(out, row_bytes, (size_t)n, f) != (size_t)n)
                st = pl_file_out_failed(&fo);
            done += (uint64_t)n * row_bytes;
            if (!st && progress) progress(ctx, done, total);
        }
        if (!st) st = pl_gguf_write_padding(plan, f, t->nbytes);
    }
    if (!st) st = pl_file_out_commit(&fo);
    pl_file_out_abort(&fo);
    free(out);
    for (int i = 0; i < n_threads; i++) free(tmp[i]);
    return st;
}
