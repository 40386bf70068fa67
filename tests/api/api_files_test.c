/* api_files_test.c - pooled.h's file tools as a program sees them: the GGUF reader on a file
 * this test writes byte by byte (every value type, arrays of strings and of arrays, two
 * tensors), damaged and missing files; quantize's options (the file type's mixture, pure,
 * per-tensor types, notes, progress) read back through the reader; synth's options (layers,
 * vocabulary, seed, zeros) and its presets. Includes nothing of the library but pooled.h. */
#include <pooled.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>

#include "test.h"

/* ---- a GGUF written by hand (little-endian, as the format says) ---- */

typedef struct {
    unsigned char b[4096];
    size_t n;
} bytes;

static void put(bytes *w, const void *p, size_t n) {
    memcpy(w->b + w->n, p, n);
    w->n += n;
}
static void u32(bytes *w, uint32_t v) {
    put(w, &v, 4);
}
static void u64(bytes *w, uint64_t v) {
    put(w, &v, 8);
}
static void str(bytes *w, const char *s) {
    u64(w, strlen(s));
    put(w, s, strlen(s));
}
static void key(bytes *w, const char *k, uint32_t type) {
    str(w, k);
    u32(w, type);
}

#define N_KV 16

/* Writes the file; returns its path. */
static const char *write_gguf(void) {
    static bytes w;
    static char path[512];
    w.n = 0;
    put(&w, "GGUF", 4);
    u32(&w, 3);
    u64(&w, 2);    /* tensors */
    u64(&w, N_KV); /* metadata items */
    key(&w, "general.architecture", POOLED_GGUF_STRING), str(&w, "llama");
    uint8_t a8 = 200;
    key(&w, "t.u8", POOLED_GGUF_UINT8), put(&w, &a8, 1);
    int8_t b8 = -5;
    key(&w, "t.i8", POOLED_GGUF_INT8), put(&w, &b8, 1);
    uint16_t a16 = 60000;
    key(&w, "t.u16", POOLED_GGUF_UINT16), put(&w, &a16, 2);
    int16_t b16 = -300;
    key(&w, "t.i16", POOLED_GGUF_INT16), put(&w, &b16, 2);
    key(&w, "t.u32", POOLED_GGUF_UINT32), u32(&w, 4000000000u);
    int32_t b32 = -7;
    key(&w, "t.i32", POOLED_GGUF_INT32), put(&w, &b32, 4);
    float f = 1.5f;
    key(&w, "t.f32", POOLED_GGUF_FLOAT32), put(&w, &f, 4);
    uint8_t t = 1;
    key(&w, "t.bool", POOLED_GGUF_BOOL), put(&w, &t, 1);
    key(&w, "t.u64", POOLED_GGUF_UINT64), u64(&w, (1ull << 40) + 3);
    int64_t b64 = -(1ll << 40);
    key(&w, "t.i64", POOLED_GGUF_INT64), put(&w, &b64, 8);
    double d = 0.125;
    key(&w, "t.f64", POOLED_GGUF_FLOAT64), put(&w, &d, 8);
    key(&w, "t.arr_i32", POOLED_GGUF_ARRAY), u32(&w, POOLED_GGUF_INT32), u64(&w, 3);
    int32_t ai[3] = {1, -2, 3};
    put(&w, ai, sizeof ai);
    key(&w, "t.arr_str", POOLED_GGUF_ARRAY), u32(&w, POOLED_GGUF_STRING), u64(&w, 2);
    str(&w, "a"), str(&w, "bc");
    /* [[1, 2], [3]] of u8 */
    key(&w, "t.nested", POOLED_GGUF_ARRAY), u32(&w, POOLED_GGUF_ARRAY), u64(&w, 2);
    uint8_t n1[2] = {1, 2}, n2 = 3;
    u32(&w, POOLED_GGUF_UINT8), u64(&w, 2), put(&w, n1, 2);
    u32(&w, POOLED_GGUF_UINT8), u64(&w, 1), put(&w, &n2, 1);
    key(&w, "t.empty", POOLED_GGUF_STRING), str(&w, "");
    /* tensors: "w" f32 [4, 2] at 0 (32 bytes), "q" q8_0 [32] at 32 (34 bytes) */
    str(&w, "w"), u32(&w, 2), u64(&w, 4), u64(&w, 2), u32(&w, 0), u64(&w, 0);
    str(&w, "q"), u32(&w, 1), u64(&w, 32), u32(&w, 8), u64(&w, 32);
    while (w.n % 32) w.b[w.n++] = 0;
    size_t data = w.n;
    for (int i = 0; i < 66; i++) w.b[w.n++] = (unsigned char)i;
    snprintf(path, sizeof path, "%s/hand.gguf", test_tmpdir());
    FILE *fp = fopen(path, "wb");
    CHECK(fp && fwrite(w.b, 1, w.n, fp) == w.n, "write %s", path);
    if (fp) fclose(fp);
    CHECK(data % 32 == 0 && data > 0, "data offset %zu", data);
    return path;
}

static bool is(const char *p, uint64_t n, const char *want) {
    return p && n == strlen(want) && !memcmp(p, want, n);
}

static void check_reader(void) {
    const char *path = write_gguf();
    pooled_gguf *g = NULL;
    CHECK(pooled_gguf_open(path, &g) == POOLED_OK && g, "open: %s", pooled_last_error());
    if (!g) return;
    pooled_gguf_header h = {.size = sizeof h};
    CHECK(pooled_gguf_get_header(g, &h) == POOLED_OK, "header");
    struct stat st;
    stat(path, &st);
    CHECK(h.size == sizeof h && h.version == 3 && h.alignment == 32 && h.n_kv == N_KV &&
              h.n_tensors == 2 && h.file_size == (uint64_t)st.st_size &&
              h.data_offset + 66 == h.file_size,
          "header: v%u align %u kv %lld tensors %lld size %llu data %llu", h.version, h.alignment,
          (long long)h.n_kv, (long long)h.n_tensors, (unsigned long long)h.file_size,
          (unsigned long long)h.data_offset);
    /* an older caller's smaller struct: only its bytes written */
    struct {
        size_t size;
        uint32_t version;
    } old = {sizeof old, 0};
    CHECK(pooled_gguf_get_header(g, (pooled_gguf_header *)(void *)&old) == POOLED_OK &&
              old.size == sizeof old && old.version == 3,
          "a smaller header struct");

    /* every item in order, with its type and value */
    const char *keys[N_KV] = {"general.architecture",
                              "t.u8",
                              "t.i8",
                              "t.u16",
                              "t.i16",
                              "t.u32",
                              "t.i32",
                              "t.f32",
                              "t.bool",
                              "t.u64",
                              "t.i64",
                              "t.f64",
                              "t.arr_i32",
                              "t.arr_str",
                              "t.nested",
                              "t.empty"};
    int types[N_KV] = {
        POOLED_GGUF_STRING, POOLED_GGUF_UINT8,  POOLED_GGUF_INT8,  POOLED_GGUF_UINT16,
        POOLED_GGUF_INT16,  POOLED_GGUF_UINT32, POOLED_GGUF_INT32, POOLED_GGUF_FLOAT32,
        POOLED_GGUF_BOOL,   POOLED_GGUF_UINT64, POOLED_GGUF_INT64, POOLED_GGUF_FLOAT64,
        POOLED_GGUF_ARRAY,  POOLED_GGUF_ARRAY,  POOLED_GGUF_ARRAY, POOLED_GGUF_STRING};
    pooled_gguf_value v[N_KV];
    for (int i = 0; i < N_KV; i++) {
        const char *k = NULL;
        uint64_t kl = 0;
        CHECK(pooled_gguf_kv_at(g, i, &k, &kl, &v[i]) == POOLED_OK && is(k, kl, keys[i]) &&
                  v[i].type == types[i],
              "item %d: %.*s type %d", i, (int)kl, k ? k : "", v[i].type);
    }
    CHECK(is(v[0].str, v[0].len, "llama"), "string value");
    CHECK(v[1].u == 200 && v[2].i == -5 && v[3].u == 60000 && v[4].i == -300 &&
              v[5].u == 4000000000u && v[6].i == -7 && v[7].f == 1.5 && v[8].u == 1 &&
              v[9].u == (1ull << 40) + 3 && v[10].i == -(1ll << 40) && v[11].f == 0.125,
          "scalars");
    CHECK(v[15].len == 0, "empty string");
    pooled_gguf_value x;
    CHECK(v[12].elem_type == POOLED_GGUF_INT32 && v[12].count == 3, "i32 array head");
    const int64_t want_i[3] = {1, -2, 3};
    for (uint64_t i = 0; i < 3; i++)
        CHECK(pooled_gguf_array_at(&v[12], i, &x) == POOLED_OK && x.type == POOLED_GGUF_INT32 &&
                  x.i == want_i[i],
              "i32 array [%llu] = %lld", (unsigned long long)i, (long long)x.i);
    CHECK(pooled_gguf_array_at(&v[12], 3, &x) == POOLED_ERR_ARG, "past the array's end");
    CHECK(pooled_gguf_array_at(&v[1], 0, &x) == POOLED_ERR_ARG, "a scalar is no array");
    CHECK(v[13].elem_type == POOLED_GGUF_STRING && v[13].count == 2 &&
              pooled_gguf_array_at(&v[13], 1, &x) == POOLED_OK && is(x.str, x.len, "bc"),
          "string array");
    /* nested: [[1, 2], [3]] */
    pooled_gguf_value in, e;
    CHECK(v[14].elem_type == POOLED_GGUF_ARRAY && v[14].count == 2, "nested head");
    CHECK(pooled_gguf_array_at(&v[14], 0, &in) == POOLED_OK && in.type == POOLED_GGUF_ARRAY &&
              in.elem_type == POOLED_GGUF_UINT8 && in.count == 2 &&
              pooled_gguf_array_at(&in, 1, &e) == POOLED_OK && e.u == 2,
          "nested [0][1]");
    CHECK(pooled_gguf_array_at(&v[14], 1, &in) == POOLED_OK && in.count == 1 &&
              pooled_gguf_array_at(&in, 0, &e) == POOLED_OK && e.u == 3,
          "nested [1][0]");
    CHECK(pooled_gguf_find(g, "t.u32", &x) == POOLED_OK && x.u == 4000000000u, "find");
    CHECK(pooled_gguf_find(g, "t.nope", &x) == POOLED_ERR_ARG &&
              strstr(pooled_last_error(), "t.nope"),
          "find a missing key: %s", pooled_last_error());
    const char *k;
    uint64_t kl;
    CHECK(pooled_gguf_kv_at(g, N_KV, &k, &kl, &x) == POOLED_ERR_ARG &&
              pooled_gguf_kv_at(g, -1, &k, &kl, &x) == POOLED_ERR_ARG,
          "items out of range");

    pooled_gguf_tensor t;
    CHECK(pooled_gguf_tensor_at(g, 0, &t) == POOLED_OK && is(t.name, t.name_len, "w") &&
              t.type == 0 && !strcmp(t.type_name, "f32") && t.n_dims == 2 && t.ne[0] == 4 &&
              t.ne[1] == 2 && t.ne[2] == 1 && t.ne[3] == 1 && t.offset == 0 && t.nbytes == 32,
          "tensor w: %s %lld x %lld, %llu bytes", t.type_name, (long long)t.ne[0],
          (long long)t.ne[1], (unsigned long long)t.nbytes);
    CHECK(pooled_gguf_tensor_at(g, 1, &t) == POOLED_OK && is(t.name, t.name_len, "q") &&
              t.type == 8 && !strcmp(t.type_name, "q8_0") && t.n_dims == 1 && t.ne[0] == 32 &&
              t.offset == 32 && t.nbytes == 34,
          "tensor q: %s, offset %llu, %llu bytes", t.type_name, (unsigned long long)t.offset,
          (unsigned long long)t.nbytes);
    CHECK(pooled_gguf_tensor_at(g, 2, &t) == POOLED_ERR_ARG, "tensor out of range");
    pooled_gguf_close(g);
    pooled_gguf_close(NULL);

    CHECK(!strcmp(pooled_gguf_type_name(POOLED_GGUF_UINT32), "u32") &&
              !strcmp(pooled_gguf_type_name(POOLED_GGUF_ARRAY), "arr") &&
              !strcmp(pooled_gguf_type_name(99), "?") && !strcmp(pooled_gguf_type_name(-1), "?"),
          "value type names");
    CHECK(!strcmp(pooled_tensor_type_name(2), "q4_0") &&
              !strcmp(pooled_tensor_type_name(12), "q4_k") && !pooled_tensor_type_name(4) &&
              !pooled_tensor_type_name(POOLED_TENSOR_TYPES) && !pooled_tensor_type_name(-1),
          "tensor type names (4: a retired id)");

    /* damaged: cut inside the metadata; not a GGUF; missing */
    char cut[600];
    snprintf(cut, sizeof cut, "%s/cut.gguf", test_tmpdir());
    FILE *in_f = fopen(path, "rb"), *out_f = fopen(cut, "wb");
    unsigned char buf[100];
    size_t got = in_f ? fread(buf, 1, sizeof buf, in_f) : 0;
    if (out_f) fwrite(buf, 1, got, out_f);
    if (in_f) fclose(in_f);
    if (out_f) fclose(out_f);
    g = (pooled_gguf *)1;
    CHECK(pooled_gguf_open(cut, &g) == POOLED_ERR_FORMAT && !g, "cut file: %s",
          pooled_last_error());
    CHECK(pooled_gguf_open("/nonexistent/x.gguf", &g) == POOLED_ERR_IO && !g, "missing: %s",
          pooled_last_error());
    CHECK(pooled_gguf_open(NULL, &g) == POOLED_ERR_ARG && pooled_gguf_open(path, NULL),
          "NULL arguments");
}

/* ---- quantize and synth ---- */

typedef struct {
    int notes, progress;
    int64_t last_i, n;
    uint64_t done, total;
} seen;

static void on_note(void *u, const char *line) {
    (void)line;
    ((seen *)u)->notes++;
}
static void on_progress(void *u, int64_t i, int64_t n, uint64_t done, uint64_t total,
                        const char *name) {
    seen *s = u;
    CHECK(i == s->last_i + 1 && name && *name, "progress in order: %lld after %lld", (long long)i,
          (long long)s->last_i);
    s->progress++, s->last_i = i, s->n = n, s->done = done, s->total = total;
}

/* The type of tensor name in path, -1 when absent. */
static int type_of(const char *path, const char *name) {
    pooled_gguf *g;
    if (pooled_gguf_open(path, &g)) return -2;
    pooled_gguf_header h = {.size = sizeof h};
    pooled_gguf_get_header(g, &h);
    int type = -1;
    for (int64_t i = 0; i < h.n_tensors; i++) {
        pooled_gguf_tensor t;
        if (!pooled_gguf_tensor_at(g, i, &t) && is(t.name, t.name_len, name)) type = t.type;
    }
    pooled_gguf_close(g);
    return type;
}

/* Tensors in path (-1: cannot open), and the vocabulary (token_embd's rows). */
static int64_t tensors_of(const char *path, int64_t *vocab) {
    pooled_gguf *g;
    if (pooled_gguf_open(path, &g)) return -1;
    pooled_gguf_header h = {.size = sizeof h};
    pooled_gguf_get_header(g, &h);
    for (int64_t i = 0; i < h.n_tensors; i++) {
        pooled_gguf_tensor t;
        if (!pooled_gguf_tensor_at(g, i, &t) && is(t.name, t.name_len, "token_embd.weight"))
            *vocab = t.ne[1];
    }
    pooled_gguf_close(g);
    return h.n_tensors;
}

static bool same_file(const char *a, const char *b) {
    FILE *x = fopen(a, "rb"), *y = fopen(b, "rb");
    bool same = x && y;
    for (int c; same && (c = fgetc(x)) == fgetc(y) && c != EOF;) {
    }
    if (same) same = feof(x) && feof(y);
    if (x) fclose(x);
    if (y) fclose(y);
    return same;
}

static void check_synth_quantize(void) {
    char f16[512], f16b[512], f16c[512], q[512], qp[512], qt[512], z[512];
    const char *d = test_tmpdir();
    snprintf(f16, sizeof f16, "%s/s.gguf", d), snprintf(f16b, sizeof f16b, "%s/s2.gguf", d);
    snprintf(f16c, sizeof f16c, "%s/s3.gguf", d), snprintf(q, sizeof q, "%s/q.gguf", d);
    snprintf(qp, sizeof qp, "%s/qp.gguf", d), snprintf(qt, sizeof qt, "%s/qt.gguf", d);
    snprintf(z, sizeof z, "%s/z.gguf", d);

    pooled_synth_preset p;
    int found = -1;
    for (int i = 0; !pooled_synth_preset_at(i, &p); i++)
        if (!strcmp(p.name, "qwen3-0.6b")) found = i;
    CHECK(found >= 0, "preset qwen3-0.6b listed");
    CHECK(!pooled_synth_preset_at(found, &p) && !strcmp(p.arch, "qwen3") && p.n_embd == 1024 &&
              p.n_layer == 28 && p.n_head == 16 && p.n_head_kv == 8 && p.tied,
          "qwen3-0.6b: the published config (hidden 1024, 28 layers, 16/8 heads, tied)");
    CHECK(pooled_synth_preset_at(-1, &p) == POOLED_ERR_ARG &&
              pooled_synth_preset_at(100000, &p) == POOLED_ERR_ARG,
          "presets out of range");

    /* two layers and a small vocabulary; the same seed gives the same bytes */
    pooled_synth_opts so = pooled_synth_opts_default();
    so.preset = "qwen3-0.6b", so.n_layer = 2, so.n_vocab = 512, so.seed = 7;
    CHECK(pooled_synth(f16, &so) == POOLED_OK, "synth: %s", pooled_last_error());
    CHECK(pooled_synth(f16b, &so) == POOLED_OK && same_file(f16, f16b), "same seed, same bytes");
    so.seed = 8;
    CHECK(pooled_synth(f16c, &so) == POOLED_OK && !same_file(f16, f16c), "another seed");
    int64_t vocab = 0, nt = tensors_of(f16, &vocab);
    int64_t vocab1 = 0;
    so.n_layer = 1;
    CHECK(pooled_synth(f16c, &so) == POOLED_OK, "one layer");
    int64_t nt1 = tensors_of(f16c, &vocab1);
    /* a qwen3 layer: 2 norms, q/k norms, q, k, v, o, gate, up, down = 11 tensors */
    CHECK(nt > 0 && nt - nt1 == 11 && vocab == 512 && vocab1 == 512,
          "layers and vocabulary: %lld vs %lld tensors, vocab %lld", (long long)nt, (long long)nt1,
          (long long)vocab);
    CHECK(type_of(f16, "blk.1.attn_q.weight") == 1 && type_of(f16c, "blk.1.attn_q.weight") == -1,
          "f16 by default; blk.1 only in the 2-layer file");
    so.zeros = 1, so.n_layer = 2;
    CHECK(pooled_synth(z, &so) == POOLED_OK && tensors_of(z, &vocab1) == nt, "zeros: same shapes");
    pooled_synth_opts bad = pooled_synth_opts_default();
    bad.preset = "no-such-model";
    CHECK(pooled_synth(z, &bad) == POOLED_ERR_ARG, "unknown preset");
    bad.preset = "qwen3-0.6b", bad.n_vocab = 10;
    CHECK(pooled_synth(z, &bad) == POOLED_ERR_ARG, "vocabulary too small");
    bad.n_vocab = 0, bad.type = "q9_9";
    CHECK(pooled_synth(z, &bad) == POOLED_ERR_ARG, "unknown type");
    bad.type = NULL, bad.vocab_from = z;
    CHECK(pooled_synth(z, &bad) == POOLED_ERR_ARG && tensors_of(z, &vocab1) == nt,
          "vocab_from the output itself: refused, the file kept");

    /* quantize: Q4_K_M's mixture puts output in q6_k; pure keeps q4_k; a per-tensor type */
    pooled_quantize_opts qo = pooled_quantize_opts_default();
    seen s = {.last_i = -1};
    qo.type = "Q4_K_M", qo.note = on_note, qo.progress = on_progress, qo.user = &s;
    CHECK(pooled_quantize(f16, q, &qo) == POOLED_OK, "quantize: %s", pooled_last_error());
    CHECK(s.progress == nt && s.n == nt && s.done == s.total && s.total > 0,
          "progress once per tensor: %d of %lld", s.progress, (long long)nt);
    /* tied: token_embd is the output matrix, q6_k under the mixture */
    CHECK(type_of(q, "blk.0.attn_q.weight") == 12 && type_of(q, "token_embd.weight") == 14 &&
              type_of(q, "blk.0.attn_norm.weight") == 0,
          "q4_k_m: attn_q q4_k %d, token_embd q6_k %d, norms f32",
          type_of(q, "blk.0.attn_q.weight"), type_of(q, "token_embd.weight"));
    qo.pure = 1, qo.progress = NULL;
    CHECK(pooled_quantize(f16, qp, &qo) == POOLED_OK && type_of(qp, "token_embd.weight") == 12,
          "pure: token_embd q4_k (%d)", type_of(qp, "token_embd.weight"));
    const char *tt[] = {"blk\\.1\\.attn_q=q8_0", "attn_k=q5_0"};
    qo.tensor_types = tt, qo.n_tensor_types = 2;
    CHECK(pooled_quantize(f16, qt, &qo) == POOLED_OK && type_of(qt, "blk.1.attn_q.weight") == 8 &&
              type_of(qt, "blk.0.attn_q.weight") == 12 && type_of(qt, "blk.0.attn_k.weight") == 6,
          "per-tensor types: %d %d %d", type_of(qt, "blk.1.attn_q.weight"),
          type_of(qt, "blk.0.attn_q.weight"), type_of(qt, "blk.0.attn_k.weight"));
    CHECK(!strcmp(tt[0], "blk\\.1\\.attn_q=q8_0"), "the caller's strings unchanged");
    const char *bad_tt[] = {"attn_q"};
    qo.tensor_types = bad_tt, qo.n_tensor_types = 1;
    CHECK(pooled_quantize(f16, z, &qo) == POOLED_ERR_ARG && strstr(pooled_last_error(), "attn_q"),
          "PATTERN without =TYPE: %s", pooled_last_error());
    qo.n_tensor_types = 0, qo.type = "Q9_X";
    CHECK(pooled_quantize(f16, z, &qo) == POOLED_ERR_ARG && strstr(pooled_last_error(), "Q9_X"),
          "unknown type: %s", pooled_last_error());
    qo.type = NULL;
    CHECK(pooled_quantize(f16, z, &qo) == POOLED_ERR_ARG, "no type");
    CHECK(strstr(pooled_quantize_types(), "q4_k_m") != NULL, "types listed: %s",
          pooled_quantize_types());
    qo.type = "q8_0";
    CHECK(pooled_quantize("/nonexistent/in.gguf", z, &qo) != POOLED_OK &&
              tensors_of(z, &vocab1) == nt,
          "missing input: fails, the output's old file kept");
}

static void run_tests(void) {
    check_reader();
    check_synth_quantize();
}
