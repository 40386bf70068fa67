/* gguf_samples.h - small GGUFs built in memory, and a walk over a parsed GGUF, shared by the
 * parser tests (gguf_hardening_test.c) and the fuzz target (tests/fuzz/gguf_fuzz.c).
 *
 * sample_walk touches every byte a parsed pl_gguf points at (keys, strings, array elements,
 * tensor names, tensor data) so ASan reports any pointer the parser got wrong, and checks
 * that each tensor's data lies inside the buffer. */
#ifndef PL_TESTS_GGUF_SAMPLES_H
#define PL_TESTS_GGUF_SAMPLES_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format/gguf.h"
#include "format/quant.h"

/* Serialize a built GGUF (every tensor has data) into a malloc'd buffer. */
static inline uint8_t *sample_serialize(const pl_gguf *g, size_t *len) {
    char *mem = NULL;
    size_t size = 0;
    FILE *f = open_memstream(&mem, &size);
    if (!f) return NULL;
    pl_status st = pl_gguf_write_header(g, f);
    for (int64_t i = 0; i < pl_gguf_tensor_count(g) && !st; i++) {
        const pl_gguf_tensor *t = pl_gguf_tensor_at(g, i);
        if (t->nbytes && fwrite(t->data, 1, t->nbytes, f) != t->nbytes) st = PL_ERR_IO;
        if (!st) st = pl_gguf_write_padding(g, f, t->nbytes);
    }
    fclose(f);
    if (st) {
        free(mem);
        return NULL;
    }
    *len = size;
    return (uint8_t *)mem;
}

/* Set key to a scalar of the given type, from the little-endian bytes of `bits`. */
static inline void sample_scalar(pl_gguf *g, const char *key, uint32_t type, uint64_t bits) {
    uint8_t raw[8];
    memcpy(raw, &bits, 8);
    pl_gguf_value arr = {.type = PL_GGUF_ARRAY}, v;
    arr.arr.elem_type = type;
    arr.arr.count = 1;
    arr.arr.data = raw;
    pl_gguf_arr_at(&arr, 0, &v);
    pl_gguf_set_value(g, key, &v);
}

/* A GGUF with one key of every scalar type, numeric arrays of every type, string arrays
 * (with UTF-8, an empty string and a NUL byte), nested arrays, and tensors of several types
 * and ranks, including an empty one. About 1.5 KB. */
static inline uint8_t *sample_rich(size_t *len, uint32_t alignment) {
    pl_gguf *g = pl_gguf_new();
    if (!g) return NULL;
    if (alignment != PL_GGUF_DEFAULT_ALIGNMENT) pl_gguf_set_u32(g, "general.alignment", alignment);
    pl_gguf_set_str(g, "general.architecture", "llama");
    pl_gguf_set_str(g, "general.name", "sample \xe2\x9c\x93 \"quoted\"\n");
    pl_gguf_set_u32(g, "llama.block_count", 1);
    pl_gguf_set_f32(g, "llama.rope.freq_base", 10000.0f);
    pl_gguf_set_bool(g, "general.flag", true);
    pl_gguf_set_i32(g, "general.i32", -7);
    pl_gguf_set_u64(g, "general.u64", (uint64_t)1 << 40);
    sample_scalar(g, "general.u8", PL_GGUF_UINT8, 200);
    sample_scalar(g, "general.i8", PL_GGUF_INT8, 0x80);
    sample_scalar(g, "general.u16", PL_GGUF_UINT16, 65535);
    sample_scalar(g, "general.i16", PL_GGUF_INT16, 0x8001);
    sample_scalar(g, "general.i64", PL_GGUF_INT64, (uint64_t)-5);
    double pi = 3.141592653589793;
    uint64_t pib;
    memcpy(&pib, &pi, 8);
    sample_scalar(g, "general.f64", PL_GGUF_FLOAT64, pib);

    static const uint8_t bytes[24] = {1,  2,  3,  4,  5,  6,  7,  8,  9,  10, 11, 12,
                                      13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24};
    for (uint32_t t = 0; t < PL_GGUF_TYPE_COUNT; t++) {
        size_t es = pl_gguf_type_size(t);
        if (!es) continue;
        char key[64];
        snprintf(key, sizeof key, "sample.arr_%s", pl_gguf_type_name(t));
        pl_gguf_set_arr(g, key, t, bytes, sizeof bytes / es);
    }
    const char *strs[] = {"<s>", "", "\xc4\xa0the", "caf\xc3\xa9", "bad \xff utf8"};
    pl_gguf_set_str_arr(g, "tokenizer.ggml.tokens", strs, 5);
    pl_gguf_set_arr(g, "sample.empty", PL_GGUF_INT32, NULL, 0);
    pl_gguf_set_str_arr(g, "sample.empty_str", NULL, 0);

    /* [[1,2,3],[4,5,6]] of i32, and [["a"],[]] of strings, inside one more array */
    static const int32_t ints[6] = {1, 2, 3, 4, 5, 6};
    pl_gguf_value inner[2], strv[1], mixed[2], outer;
    memset(inner, 0, sizeof inner);
    for (int k = 0; k < 2; k++) {
        inner[k].type = PL_GGUF_ARRAY;
        inner[k].arr.elem_type = PL_GGUF_INT32;
        inner[k].arr.count = 3;
        inner[k].arr.data = ints + 3 * k;
    }
    pl_gguf_value nested = {.type = PL_GGUF_ARRAY};
    nested.arr.elem_type = PL_GGUF_ARRAY;
    nested.arr.count = 2;
    nested.arr.items = inner;
    pl_gguf_set_value(g, "sample.nested", &nested);
    memset(strv, 0, sizeof strv);
    strv[0].type = PL_GGUF_STRING;
    strv[0].str.ptr = "a";
    strv[0].str.len = 1;
    memset(mixed, 0, sizeof mixed);
    mixed[0].type = mixed[1].type = PL_GGUF_ARRAY;
    mixed[0].arr.elem_type = mixed[1].arr.elem_type = PL_GGUF_STRING;
    mixed[0].arr.count = 1;
    mixed[0].arr.items = strv;
    memset(&outer, 0, sizeof outer);
    outer.type = PL_GGUF_ARRAY;
    outer.arr.elem_type = PL_GGUF_ARRAY;
    outer.arr.count = 2;
    outer.arr.items = mixed;
    pl_gguf_set_value(g, "sample.nested_str", &outer);

    /* tensor data: a pattern; q8_0 blocks are 34 bytes (f16 scale + 32 int8) */
    static uint8_t data[512];
    for (size_t i = 0; i < sizeof data; i++) data[i] = (uint8_t)(i * 7 + 3);
    int64_t e1[2] = {8, 4}, e2[2] = {32, 2}, e3[1] = {8}, e4[4] = {2, 2, 2, 2}, e5[2] = {0, 3};
    pl_gguf_add_tensor(g, "token_embd.weight", PL_TYPE_F32, 2, e1, data);
    pl_gguf_add_tensor(g, "blk.0.attn_q.weight", PL_TYPE_Q8_0, 2, e2, data);
    pl_gguf_add_tensor(g, "output_norm.weight", PL_TYPE_F16, 1, e3, data);
    pl_gguf_add_tensor(g, "sample.cube", PL_TYPE_F32, 4, e4, data);
    pl_gguf_add_tensor(g, "sample.empty", PL_TYPE_F32, 2, e5, data);
    uint8_t *buf = sample_serialize(g, len);
    pl_gguf_free(g);
    return buf;
}

static inline uint64_t sample_walk_value(const pl_gguf_value *v) {
    uint64_t h = v->type;
    if (v->type == PL_GGUF_STRING) {
        for (uint64_t i = 0; i < v->str.len; i++) h = h * 31 + (uint8_t)v->str.ptr[i];
    } else if (v->type == PL_GGUF_ARRAY) {
        for (uint64_t i = 0; i < v->arr.count; i++) {
            pl_gguf_value x;
            if (!pl_gguf_arr_at(v, i, &x)) return 0;
            h = h * 31 + sample_walk_value(&x);
            if (pl_gguf_type_size(v->arr.elem_type))
                h += (uint64_t)pl_gguf_arr_int(v, i) + (uint64_t)(pl_gguf_arr_float(v, i) != 0);
        }
    } else {
        h = h * 31 + v->u;
    }
    return h;
}

/* Touch everything g points at; false if a tensor's data is not inside buf[0..len). */
static inline bool sample_walk(const pl_gguf *g, const uint8_t *buf, size_t len, uint64_t *hash) {
    uint64_t h = pl_gguf_version(g) + pl_gguf_alignment(g) + pl_gguf_file_size(g);
    for (int64_t i = 0; i < pl_gguf_kv_count(g); i++) {
        const pl_gguf_kv *kv = pl_gguf_kv_at(g, i);
        for (uint64_t k = 0; k < kv->key.len; k++) h = h * 31 + (uint8_t)kv->key.ptr[k];
        h += sample_walk_value(&kv->value);
    }
    int64_t iv;
    double fv;
    bool bv;
    if (pl_gguf_get_int(g, "llama.block_count", &iv)) h += (uint64_t)iv;
    if (pl_gguf_get_float(g, "llama.rope.freq_base", &fv)) h += (uint64_t)(fv != 0);
    if (pl_gguf_get_bool(g, "general.flag", &bv)) h += bv;
    char *arch = pl_gguf_get_string(g, "general.architecture");
    if (arch) h += strlen(arch);
    free(arch);
    uint64_t data_off = pl_gguf_data_offset(g);
    for (int64_t i = 0; i < pl_gguf_tensor_count(g); i++) {
        const pl_gguf_tensor *t = pl_gguf_tensor_at(g, i);
        for (uint64_t k = 0; k < t->name.len; k++) h = h * 31 + (uint8_t)t->name.ptr[k];
        const uint8_t *d = t->data;
        if (!d || d < buf + data_off || t->nbytes > len || d + t->nbytes > buf + len) return false;
        /* all of a small tensor, the ends of a big one */
        if (t->nbytes <= 4096)
            for (uint64_t k = 0; k < t->nbytes; k++) h += d[k];
        else
            h += d[0] + d[t->nbytes - 1];
        char name[128];
        if (t->name.len < sizeof name && !memchr(t->name.ptr, 0, t->name.len)) {
            memcpy(name, t->name.ptr, t->name.len);
            name[t->name.len] = 0;
            if (pl_gguf_find_tensor(g, name) != t) return false; /* names are unique */
        }
    }
    *hash = h;
    return true;
}

#endif
