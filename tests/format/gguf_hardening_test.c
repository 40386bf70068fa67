/* gguf_hardening_test.c - the GGUF parser on bad input: every truncation of small files
 * (and a sample of cut points across a model), thousands of seeded random byte flips,
 * hand-made files with absurd counts, lengths, offsets, dimensions, overflowing sizes, deep
 * nesting and duplicate names. Each must give PL_OK (and then a walk over everything the
 * result points at stays inside the buffer) or an error with a one-line message; never a
 * crash, a hang or a huge allocation (ASan runs this too).
 *
 * With POOLED_WRITE_FUZZ_SEEDS=DIR it also writes the small samples there (the seed corpus
 * of tests/fuzz/gguf_fuzz.c was made that way). */
#include <time.h>

#include "format/gguf.h"
#include "format/gguf_samples.h"
#include "format/quant.h"
#include "test.h"

/* ---- result checks ---- */

static int n_ok, n_err;

/* Parse buf; true if it parsed. Checks the outcome is a valid result or a one-line error. */
static bool parse_checked(const uint8_t *buf, size_t len, const char *what) {
    pl_gguf *g = NULL;
    pl_clear_error();
    pl_status st = pl_gguf_parse(buf, len, &g);
    if (st) {
        const char *e = pl_last_error();
        CHECK(g == NULL, "%s: result set on failure", what);
        CHECK(e[0] && !strchr(e, '\n'), "%s: error message must be one non-empty line: '%s'", what,
              e);
        n_err++;
        return false;
    }
    uint64_t h;
    CHECK(sample_walk(g, buf, len, &h), "%s: a tensor's data lies outside the buffer", what);
    pl_gguf_free(g);
    n_ok++;
    return true;
}

/* Parse must fail and the message contain `needle`. */
static void expect_fail(const uint8_t *buf, size_t len, const char *needle, const char *what) {
    bool ok = parse_checked(buf, len, what);
    CHECK(!ok, "%s: parsed, expected an error", what);
    if (!ok)
        CHECK(strstr(pl_last_error(), needle), "%s: message '%s' lacks '%s'", what, pl_last_error(),
              needle);
}

/* ---- a raw byte builder for hand-made (malformed) files ---- */

typedef struct {
    uint8_t *p;
    size_t n, cap;
} raw;

static void r_bytes(raw *r, const void *src, size_t n) {
    if (r->n + n > r->cap) {
        r->cap = (r->n + n) * 2 + 64;
        r->p = realloc(r->p, r->cap);
        if (!r->p) exit(2);
    }
    if (n) memcpy(r->p + r->n, src, n);
    r->n += n;
}
static void r_u32(raw *r, uint32_t v) {
    r_bytes(r, &v, 4);
}
static void r_u64(raw *r, uint64_t v) {
    r_bytes(r, &v, 8);
}
static void r_str(raw *r, const char *s) {
    r_u64(r, strlen(s));
    r_bytes(r, s, strlen(s));
}
static void r_zeros(raw *r, size_t n) {
    while (n--) r_bytes(r, "", 1);
}
static void r_pad(raw *r, size_t align) {
    r_zeros(r, (align - r->n % align) % align);
}
static void r_header(raw *r, uint64_t n_tensors, uint64_t n_kv) {
    r->n = 0;
    r_bytes(r, "GGUF", 4);
    r_u32(r, 3);
    r_u64(r, n_tensors);
    r_u64(r, n_kv);
}
/* a header with one key "k" of the given type; its value follows */
static void r_one_key(raw *r, uint32_t type) {
    r_header(r, 0, 1);
    r_str(r, "k");
    r_u32(r, type);
}
/* one tensor info with a shape of n dims */
static void r_tensor(raw *r, const char *name, uint32_t n_dims, const uint64_t *ne, uint32_t type,
                     uint64_t offset) {
    r_str(r, name);
    r_u32(r, n_dims);
    for (uint32_t d = 0; d < n_dims && d < 5; d++) r_u64(r, ne[d]);
    r_u32(r, type);
    r_u64(r, offset);
}

/* ---- the cases ---- */

static uint64_t rng_next(uint64_t *s) { /* xorshift64* */
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * 0x2545f4914f6cdd1dull;
}

/* Every prefix shorter than the end of the last tensor's data must fail. */
static void truncations(const uint8_t *buf, size_t len, size_t step_after, const char *what) {
    pl_gguf *g;
    if (pl_gguf_parse(buf, len, &g)) {
        CHECK(0, "%s: does not parse: %s", what, pl_last_error());
        return;
    }
    uint64_t need = pl_gguf_data_offset(g);
    for (int64_t i = 0; i < pl_gguf_tensor_count(g); i++) {
        const pl_gguf_tensor *t = pl_gguf_tensor_at(g, i);
        if (pl_gguf_data_offset(g) + t->offset + t->nbytes > need)
            need = pl_gguf_data_offset(g) + t->offset + t->nbytes;
    }
    uint64_t header = pl_gguf_data_offset(g);
    pl_gguf_free(g);
    int wrong = 0, tried = 0;
    for (size_t cut = 0; cut < need; cut += cut < header + 64 ? 1 : step_after) {
        /* a copy of exactly `cut` bytes, so ASan sees any read past the end */
        uint8_t *p = malloc(cut ? cut : 1);
        memcpy(p, buf, cut);
        char w[96];
        snprintf(w, sizeof w, "%s cut at %zu", what, cut);
        if (parse_checked(p, cut, w)) wrong++;
        free(p);
        tried++;
    }
    CHECK(wrong == 0, "%s: %d of %d truncated copies parsed", what, wrong, tried);
    CHECK(tried > 100, "%s: only %d cuts tried", what, tried);
}

/* Random flips of 1-4 bytes (a random byte, a flipped bit, or 8 bytes of 0xff) within the
 * first `region` bytes; each copy parses or fails cleanly. */
static void flips(const uint8_t *buf, size_t len, size_t region, int rounds, uint64_t seed,
                  const char *what) {
    uint8_t *p = malloc(len);
    memcpy(p, buf, len);
    uint64_t s = seed;
    int parsed = 0;
    for (int r = 0; r < rounds; r++) {
        size_t at[4];
        uint8_t old[4][8];
        int k = 1 + (int)(rng_next(&s) % 4);
        for (int j = 0; j < k; j++) {
            at[j] = (size_t)(rng_next(&s) % (region - 8));
            memcpy(old[j], p + at[j], 8);
            uint64_t kind = rng_next(&s) % 3;
            if (kind == 0)
                p[at[j]] = (uint8_t)rng_next(&s);
            else if (kind == 1)
                p[at[j]] ^= (uint8_t)(1u << (rng_next(&s) % 8));
            else
                memset(p + at[j], 0xff, 8);
        }
        char w[96];
        snprintf(w, sizeof w, "%s flip round %d", what, r);
        parsed += parse_checked(p, len, w);
        for (int j = k - 1; j >= 0; j--) memcpy(p + at[j], old[j], 8);
    }
    CHECK(!memcmp(p, buf, len), "%s: flips were not undone", what);
    /* sanity: the mutations are not all rejected for one trivial reason, nor all harmless */
    CHECK(parsed > 0 && parsed < rounds, "%s: %d of %d flipped copies parsed", what, parsed,
          rounds);
    free(p);
}

static void absurd_headers(void) {
    raw r = {0};
    r_header(&r, 0, 0);
    CHECK(parse_checked(r.p, r.n, "empty GGUF"), "a GGUF with no keys and no tensors is valid");

    r.n = 0;
    r_bytes(&r, "GGUG", 4);
    r_u32(&r, 3);
    r_u64(&r, 0);
    r_u64(&r, 0);
    expect_fail(r.p, r.n, "bad magic", "bad magic");
    uint32_t versions[] = {0, 1, 4, 0x03000000, 0xffffffff};
    for (int i = 0; i < 5; i++) {
        memcpy(r.p + 4, &versions[i], 4);
        memcpy(r.p, "GGUF", 4);
        expect_fail(r.p, r.n, "unsupported version", "bad version");
    }
    uint64_t counts[] = {UINT64_MAX, (uint64_t)1 << 62, 1000, 2};
    for (int i = 0; i < 4; i++) {
        r_header(&r, 0, counts[i]);
        r_zeros(&r, 20);
        expect_fail(r.p, r.n, i < 3 ? "metadata count" : "", "absurd metadata count");
        r_header(&r, counts[i], 0);
        r_zeros(&r, 40);
        expect_fail(r.p, r.n, i < 3 ? "tensor count" : "", "absurd tensor count");
    }
    free(r.p);
}

static void absurd_metadata(void) {
    raw r = {0};
    /* key lengths: huge, past the end, zero, too long */
    uint64_t lens[] = {UINT64_MAX, 1000, 0, 70000};
    const char *msgs[] = {"truncated", "truncated", "bad length", "bad length"};
    for (int i = 0; i < 4; i++) {
        r_header(&r, 0, 1);
        r_u64(&r, lens[i]);
        r_zeros(&r, i == 3 ? 70100 : 16);
        expect_fail(r.p, r.n, msgs[i], "absurd key length");
    }
    /* value types */
    uint32_t types[] = {13, 0xffffffff};
    for (int i = 0; i < 2; i++) {
        r_one_key(&r, types[i]);
        r_zeros(&r, 16);
        expect_fail(r.p, r.n, "bad type", "bad value type");
    }
    /* string value lengths */
    r_one_key(&r, PL_GGUF_STRING);
    r_u64(&r, UINT64_MAX);
    r_zeros(&r, 16);
    expect_fail(r.p, r.n, "truncated", "huge string length");
    r_one_key(&r, PL_GGUF_STRING);
    r_u64(&r, 5);
    r_bytes(&r, "abcd", 4);
    expect_fail(r.p, r.n, "truncated", "string one byte short");
    /* array counts that overrun, for every element type; bad element types */
    for (uint32_t et = 0; et < PL_GGUF_TYPE_COUNT; et++) {
        uint64_t ns[] = {UINT64_MAX, UINT64_MAX / 8 + 1, 1u << 20};
        for (int i = 0; i < 3; i++) {
            r_one_key(&r, PL_GGUF_ARRAY);
            r_u32(&r, et);
            r_u64(&r, ns[i]);
            r_zeros(&r, 64);
            char w[64];
            snprintf(w, sizeof w, "array of %s with count %llu", pl_gguf_type_name(et),
                     (unsigned long long)ns[i]);
            expect_fail(r.p, r.n, "overruns", w);
        }
    }
    r_one_key(&r, PL_GGUF_ARRAY);
    r_u32(&r, 13);
    r_u64(&r, 1);
    r_zeros(&r, 16);
    expect_fail(r.p, r.n, "bad array element type", "bad array element type");
    /* an array of strings whose count promises more than is there: refused before the
     * item array is allocated (see skip_value) */
    r_one_key(&r, PL_GGUF_ARRAY);
    r_u32(&r, PL_GGUF_STRING);
    r_u64(&r, 100000);
    for (int i = 0; i < 1000; i++) r_str(&r, "tok");
    r_zeros(&r, 8 * 100000 - 11000);
    expect_fail(r.p, r.n, "", "string array shorter than its count");

    /* nesting: 9 levels of arrays parse, 10 and 10000 do not (and do not blow the stack) */
    int depths[] = {9, 10, 10000};
    for (int i = 0; i < 3; i++) {
        r_one_key(&r, PL_GGUF_ARRAY);
        for (int d = 1; d < depths[i]; d++) {
            r_u32(&r, PL_GGUF_ARRAY);
            r_u64(&r, 1);
        }
        r_u32(&r, PL_GGUF_INT32);
        r_u64(&r, 1);
        r_u32(&r, 42);
        char w[64];
        snprintf(w, sizeof w, "arrays nested %d deep", depths[i]);
        if (i == 0)
            CHECK(parse_checked(r.p, r.n, w), "%s: should parse", w);
        else
            expect_fail(r.p, r.n, "nested too deeply", w);
    }
    /* duplicate keys, also far apart */
    r_header(&r, 0, 3);
    r_str(&r, "general.name");
    r_u32(&r, PL_GGUF_UINT8);
    r_bytes(&r, "x", 1);
    r_str(&r, "other");
    r_u32(&r, PL_GGUF_UINT8);
    r_bytes(&r, "x", 1);
    r_str(&r, "general.name");
    r_u32(&r, PL_GGUF_STRING);
    r_str(&r, "again");
    expect_fail(r.p, r.n, "duplicate key 'general.name'", "duplicate key");
    /* general.alignment: zero, not a power of two, too big, wrong type */
    struct {
        uint32_t type;
        uint64_t v;
    } al[] = {{PL_GGUF_UINT32, 0},
              {PL_GGUF_UINT32, 48},
              {PL_GGUF_UINT32, 1u << 31},
              {PL_GGUF_UINT64, 32},
              {PL_GGUF_INT32, 32}};
    for (int i = 0; i < 5; i++) {
        r_header(&r, 0, 1);
        r_str(&r, "general.alignment");
        r_u32(&r, al[i].type);
        r_bytes(&r, &al[i].v, pl_gguf_type_size(al[i].type));
        expect_fail(r.p, r.n, "general.alignment", "bad alignment");
    }
    free(r.p);
}

/* One tensor `name` with the given dims/type/offset after a header; data section of
 * `data_bytes` zeros. */
static void one_tensor(raw *r, uint32_t n_dims, const uint64_t *ne, uint32_t type, uint64_t offset,
                       size_t data_bytes) {
    r_header(r, 1, 0);
    r_tensor(r, "t", n_dims, ne, type, offset);
    r_pad(r, 32);
    r_zeros(r, data_bytes);
}

static void absurd_tensors(void) {
    raw r = {0};
    uint64_t ne[5] = {32, 2, 1, 1, 1};
    one_tensor(&r, 2, ne, PL_TYPE_F32, 0, 256);
    CHECK(parse_checked(r.p, r.n, "plain tensor"), "a well-formed tensor must parse");
    one_tensor(&r, 2, ne, PL_TYPE_F32, 0, 255);
    expect_fail(r.p, r.n, "past the end", "tensor data one byte short");
    one_tensor(&r, 2, ne, PL_TYPE_F32, 32, 256);
    expect_fail(r.p, r.n, "past the end", "tensor data offset past the end");
    one_tensor(&r, 2, ne, PL_TYPE_F32, UINT64_MAX - 31, 256);
    expect_fail(r.p, r.n, "past the end", "tensor offset near 2^64");
    one_tensor(&r, 2, ne, PL_TYPE_F32, 4, 256);
    expect_fail(r.p, r.n, "not aligned", "unaligned tensor offset");
    uint32_t dims[] = {0, 5, 0xffffffff};
    for (int i = 0; i < 3; i++) {
        one_tensor(&r, dims[i], ne, PL_TYPE_F32, 0, 64);
        expect_fail(r.p, r.n, "dimensions", "bad dimension count");
    }
    uint32_t types[] = {4, 5, 31, PL_TYPE_COUNT, 0xffffffff};
    for (int i = 0; i < 5; i++) {
        one_tensor(&r, 2, ne, types[i], 0, 256);
        expect_fail(r.p, r.n, "unknown type", "unknown tensor type");
    }
    uint64_t odd[2] = {33, 1};
    one_tensor(&r, 2, odd, PL_TYPE_Q4_0, 0, 64);
    expect_fail(r.p, r.n, "not a multiple", "row not a multiple of the block");
    uint64_t big[2] = {(uint64_t)1 << 63, 1};
    one_tensor(&r, 2, big, PL_TYPE_F32, 0, 64);
    expect_fail(r.p, r.n, "absurd", "dimension of 2^63");
    /* sizes that overflow 64 bits: 2^61 f64 values (2^64 bytes, 0 after wrapping), four
     * dims of 2^31, and a q8_k row whose byte size alone overflows */
    uint64_t wrap[1] = {(uint64_t)1 << 61};
    one_tensor(&r, 1, wrap, PL_TYPE_F64, 0, 64);
    expect_fail(r.p, r.n, "too large", "2^61 f64 (byte size wraps to 0)");
    uint64_t cube[4] = {1u << 31, 1u << 31, 1u << 31, 1u << 31};
    one_tensor(&r, 4, cube, PL_TYPE_I8, 0, 64);
    expect_fail(r.p, r.n, "too large", "four dims of 2^31");
    uint64_t kq[1] = {((uint64_t)1 << 62) - 256};
    one_tensor(&r, 1, kq, PL_TYPE_Q8_K, 0, 64);
    expect_fail(r.p, r.n, "too large", "huge q8_k row");
    /* zero-sized dims are allowed (no data), even next to huge ones that fit the limit */
    uint64_t zero[4] = {0, (uint64_t)1 << 40, 1, 1};
    one_tensor(&r, 4, zero, PL_TYPE_F32, 0, 0);
    CHECK(parse_checked(r.p, r.n, "zero-sized tensor"), "a zero-sized tensor must parse");
    /* names: empty, too long, duplicate */
    r_header(&r, 1, 0);
    r_tensor(&r, "", 2, ne, PL_TYPE_F32, 0);
    r_zeros(&r, 300);
    expect_fail(r.p, r.n, "bad name length", "empty tensor name");
    char *longname = malloc(5001);
    memset(longname, 'a', 5000);
    longname[5000] = 0;
    r_header(&r, 1, 0);
    r_tensor(&r, longname, 2, ne, PL_TYPE_F32, 0);
    r_zeros(&r, 300);
    expect_fail(r.p, r.n, "bad name length", "5000-byte tensor name");
    free(longname);
    r_header(&r, 3, 0);
    r_tensor(&r, "a", 2, ne, PL_TYPE_F32, 0);
    r_tensor(&r, "b", 2, ne, PL_TYPE_F32, 256);
    r_tensor(&r, "a", 2, ne, PL_TYPE_F32, 512);
    r_pad(&r, 32);
    r_zeros(&r, 768);
    expect_fail(r.p, r.n, "duplicate tensor 'a'", "duplicate tensor");
    free(r.p);
}

/* Many entries: duplicate detection must not be quadratic (a 100000-tensor file of empty
 * tensors is 4 MB and parses in milliseconds; pairwise name comparison would take minutes). */
static void many_entries(void) {
    raw r = {0};
    enum { N = 100000 };
    r_header(&r, N, N);
    char name[32];
    for (int i = 0; i < N; i++) {
        snprintf(name, sizeof name, "key.%07d", i);
        r_str(&r, name);
        r_u32(&r, PL_GGUF_UINT8);
        r_bytes(&r, "x", 1);
    }
    uint64_t ne[1] = {0};
    size_t last = 0;
    for (int i = 0; i < N; i++) {
        snprintf(name, sizeof name, "blk.%07d.w", i);
        last = r.n;
        r_tensor(&r, name, 1, ne, PL_TYPE_F32, 0);
    }
    r_pad(&r, 32);
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    pl_gguf *g;
    pl_status st = pl_gguf_parse(r.p, r.n, &g);
    clock_gettime(CLOCK_MONOTONIC, &b);
    double secs = (double)(b.tv_sec - a.tv_sec) + (double)(b.tv_nsec - a.tv_nsec) * 1e-9;
    CHECK(st == PL_OK, "100000 keys and tensors: %s", pl_last_error());
    if (!st) {
        CHECK(pl_gguf_kv_count(g) == N && pl_gguf_tensor_count(g) == N, "counts");
        pl_gguf_free(g);
    }
    CHECK(secs < 3.0, "100000 keys and tensors took %.2f s to parse", secs);
    /* the same with the last name repeated: found */
    memcpy(r.p + last + 8, "blk.0000000.w", 13); /* rename the last tensor to the first's name */
    expect_fail(r.p, r.n, "duplicate tensor 'blk.0000000.w'", "duplicate among 100000");
    free(r.p);
}

static void write_seeds(const uint8_t *rich, size_t rich_len) {
    const char *dir = getenv("POOLED_WRITE_FUZZ_SEEDS");
    if (!dir || !*dir) return;
    char path[512];
    snprintf(path, sizeof path, "%s/rich.gguf", dir);
    FILE *f = fopen(path, "wb");
    if (f) {
        fwrite(rich, 1, rich_len, f);
        fclose(f);
    }
    size_t n;
    uint8_t *b = sample_rich(&n, 64);
    snprintf(path, sizeof path, "%s/rich-align64.gguf", dir);
    f = fopen(path, "wb");
    if (f && b) fwrite(b, 1, n, f);
    if (f) fclose(f);
    free(b);
}

/* Numbers of a float array read as integers (what a model's loader does with an array it
 * expects of ints: rope sections, token types): in range, truncated; NaN and floats past
 * int64's range give 0, not undefined behaviour (UBSan reports it; gguf_fuzz found it). */
static void check_arr_int_of_floats(void) {
    pl_gguf *g = pl_gguf_new();
    double d[6] = {3.7, -2.5, 1e300, -1e300, NAN, 9.3e18};
    float f[3] = {INFINITY, -INFINITY, 12.0f};
    CHECK(g && !pl_gguf_set_arr(g, "d", PL_GGUF_FLOAT64, d, 6) &&
              !pl_gguf_set_arr(g, "f", PL_GGUF_FLOAT32, f, 3),
          "building the arrays");
    const pl_gguf_value *vd = g ? pl_gguf_get(g, "d") : NULL, *vf = g ? pl_gguf_get(g, "f") : NULL;
    CHECK(vd && pl_gguf_arr_int(vd, 0) == 3 && pl_gguf_arr_int(vd, 1) == -2 &&
              pl_gguf_arr_int(vd, 2) == 0 && pl_gguf_arr_int(vd, 3) == 0 &&
              pl_gguf_arr_int(vd, 4) == 0 && pl_gguf_arr_int(vd, 5) == 0,
          "f64 elements as ints");
    CHECK(vf && pl_gguf_arr_int(vf, 0) == 0 && pl_gguf_arr_int(vf, 1) == 0 &&
              pl_gguf_arr_int(vf, 2) == 12,
          "f32 elements as ints");
    pl_gguf_free(g);
}

static void run_tests(void) {
    check_arr_int_of_floats();
    size_t rich_len;
    uint8_t *rich = sample_rich(&rich_len, PL_GGUF_DEFAULT_ALIGNMENT);
    CHECK(rich != NULL, "building the sample failed");
    if (!rich) return;
    CHECK(parse_checked(rich, rich_len, "rich sample"), "the rich sample must parse");
    pl_gguf *g;
    if (!pl_gguf_parse(rich, rich_len, &g)) {
        const pl_gguf_value *v = pl_gguf_get(g, "sample.nested_str");
        CHECK(v && v->arr.count == 2 && v->arr.items[0].arr.count == 1 &&
                  v->arr.items[1].arr.count == 0,
              "nested string arrays read back");
        int64_t i16;
        CHECK(pl_gguf_get_int(g, "general.i16", &i16) && i16 == -32767, "i16 read back");
        CHECK(pl_gguf_tensor_count(g) == 5, "5 tensors");
        pl_gguf_free(g);
    }
    size_t r64_len;
    uint8_t *r64 = sample_rich(&r64_len, 64);
    CHECK(r64 && parse_checked(r64, r64_len, "rich sample, alignment 64"), "alignment 64 sample");
    write_seeds(rich, rich_len);

    truncations(rich, rich_len, 1, "rich sample");
    if (r64) truncations(r64, r64_len, 1, "rich sample (align 64)");
    flips(rich, rich_len, rich_len, 3000, 0x9e3779b97f4a7c15ull, "rich sample");
    free(r64);

    pl_file_map m;
    const char *path = test_shared("models/stories260K-Q4_0.gguf");
    if (pl_file_map_open(&m, path)) {
        CHECK(0, "%s", pl_last_error());
    } else {
        truncations(m.data, m.size, 997, "stories260K-Q4_0");
        pl_gguf *s;
        if (!pl_gguf_parse(m.data, m.size, &s)) {
            size_t header = (size_t)pl_gguf_data_offset(s);
            pl_gguf_free(s);
            flips(m.data, m.size, header, 1500, 12345, "stories260K-Q4_0 header");
        }
        pl_file_map_close(&m);
    }

    absurd_headers();
    absurd_metadata();
    absurd_tensors();
    many_entries();
    free(rich);
    printf("parsed %d inputs: %d accepted, %d refused\n", n_ok + n_err, n_ok, n_err);
}
