/* gguf_fuzz.c - libFuzzer target for the GGUF parser (pl_gguf_parse from memory).
 *
 * For each input: parse; a failure must leave a one-line message. A success is walked
 * completely (every key, string, array element, tensor name and tensor data byte range,
 * which must lie in the input), then written back with pl_gguf_write_header: the header
 * must be as long as the parsed one, and header + the input's data section must parse
 * again to the same keys and tensors. pl_gguf_parse_header takes every input
 * pl_gguf_parse takes and the header as written alone (tensors without data), and
 * its failures are one line. Last, the parsed file is walked through pooled.h's reader
 * (pooled_gguf_*: every item, nested arrays element by element, every tensor) against the
 * internal one. Seeds in corpus/gguf_fuzz/ come from tests/format/gguf_samples.h
 * (POOLED_WRITE_FUZZ_SEEDS=DIR build/tests/gguf_hardening_test). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../format/gguf_samples.h"
#include "api/api_internal.h"

#define REQUIRE(cond)                                                                              \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "gguf_fuzz: %s failed (line %d): %s\n", #cond, __LINE__,               \
                    pl_last_error());                                                              \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

static bool same_tensors(const pl_gguf *a, const pl_gguf *b) {
    if (pl_gguf_tensor_count(a) != pl_gguf_tensor_count(b)) return false;
    for (int64_t i = 0; i < pl_gguf_tensor_count(a); i++) {
        const pl_gguf_tensor *x = pl_gguf_tensor_at(a, i), *y = pl_gguf_tensor_at(b, i);
        if (x->name.len != y->name.len || memcmp(x->name.ptr, y->name.ptr, x->name.len) ||
            x->type != y->type || x->n_dims != y->n_dims || x->offset != y->offset ||
            x->nbytes != y->nbytes || memcmp(x->ne, y->ne, sizeof x->ne))
            return false;
    }
    return true;
}

/* v and its elements, depth first, through pooled_gguf_array_at; *budget bounds the visits
 * (an array of millions of strings is walked in part). */
static void walk_value(const pooled_gguf_value *v, int64_t *budget) {
    if (--*budget < 0) return;
    REQUIRE(v->type >= POOLED_GGUF_UINT8 && v->type <= POOLED_GGUF_FLOAT64);
    REQUIRE(strcmp(pooled_gguf_type_name(v->type), "?"));
    if (v->type == POOLED_GGUF_STRING) REQUIRE(v->str || !v->len);
    if (v->type != POOLED_GGUF_ARRAY) return;
    pooled_gguf_value x;
    for (uint64_t i = 0; i<v->count && * budget> 0; i++) {
        REQUIRE(pooled_gguf_array_at(v, i, &x) == POOLED_OK);
        REQUIRE(x.type == v->elem_type);
        walk_value(&x, budget);
    }
    REQUIRE(pooled_gguf_array_at(v, v->count, &x) == POOLED_ERR_ARG);
}

/* g through the public reader: the same counts, keys, types and tensors as the internal one
 * (pooled_gguf_close frees g). */
static void walk_public(pl_gguf *g) {
    int64_t n_kv = pl_gguf_kv_count(g), n_t = pl_gguf_tensor_count(g);
    const pl_gguf_kv *first = n_kv ? pl_gguf_kv_at(g, 0) : NULL;
    pooled_gguf *pg = pl_api_gguf_wrap(g);
    REQUIRE(pg);
    pooled_gguf_header h = {.size = sizeof h};
    REQUIRE(pooled_gguf_get_header(pg, &h) == POOLED_OK && h.n_kv == n_kv && h.n_tensors == n_t);
    int64_t budget = 1 << 16;
    for (int64_t i = 0; i < n_kv; i++) {
        const char *key;
        uint64_t kl;
        pooled_gguf_value v;
        REQUIRE(pooled_gguf_kv_at(pg, i, &key, &kl, &v) == POOLED_OK);
        REQUIRE(v.type == (int)pl_gguf_kv_at(g, i)->value.type &&
                kl == pl_gguf_kv_at(g, i)->key.len);
        walk_value(&v, &budget);
    }
    pooled_gguf_value v;
    const char *key;
    uint64_t kl;
    REQUIRE(pooled_gguf_kv_at(pg, n_kv, &key, &kl, &v) == POOLED_ERR_ARG);
    if (first && !memchr(first->key.ptr, 0, first->key.len) && first->key.len < 256) {
        char k[256];
        memcpy(k, first->key.ptr, first->key.len);
        k[first->key.len] = 0;
        REQUIRE(pooled_gguf_find(pg, k, &v) == POOLED_OK && v.type == (int)first->value.type);
    }
    for (int64_t i = 0; i < n_t; i++) {
        pooled_gguf_tensor t;
        REQUIRE(pooled_gguf_tensor_at(pg, i, &t) == POOLED_OK);
        const pl_gguf_tensor *x = pl_gguf_tensor_at(g, i);
        REQUIRE(t.name_len == x->name.len && t.nbytes == x->nbytes && t.offset == x->offset &&
                t.type_name && t.n_dims == (int)x->n_dims);
    }
    REQUIRE(pooled_gguf_tensor_at(pg, n_t, &(pooled_gguf_tensor){0}) == POOLED_ERR_ARG);
    pooled_gguf_close(pg);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    pl_gguf *g;
    /* the header alone (pl_gguf_parse_header): one line, or tensors without data */
    pl_clear_error();
    pl_status header_st = pl_gguf_parse_header(data, size, &g);
    if (header_st == PL_OK) {
        for (int64_t i = 0; i < pl_gguf_tensor_count(g); i++)
            REQUIRE(!pl_gguf_tensor_at(g, i)->data);
        pl_gguf_free(g);
    } else {
        REQUIRE(pl_last_error()[0] && !strchr(pl_last_error(), '\n'));
    }
    pl_clear_error();
    if (pl_gguf_parse(data, size, &g)) {
        const char *e = pl_last_error();
        REQUIRE(e[0] && !strchr(e, '\n'));
        return 0;
    }
    REQUIRE(header_st == PL_OK);
    uint64_t h;
    REQUIRE(sample_walk(g, data, size, &h));

    char *mem = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&mem, &n);
    REQUIRE(f);
    REQUIRE(pl_gguf_write_header(g, f) == PL_OK);
    fclose(f);
    uint64_t off = pl_gguf_data_offset(g);
    if (pl_gguf_tensor_count(g))
        REQUIRE(n == off);
    else
        REQUIRE(n <= off);

    /* the header as written parses alone to the same tensors */
    pl_gguf *hg;
    REQUIRE(pl_gguf_parse_header(mem, n, &hg) == PL_OK);
    REQUIRE(same_tensors(g, hg));
    pl_gguf_free(hg);

    /* header as written + the original data section */
    size_t tail = pl_gguf_tensor_count(g) ? size - (size_t)off : 0;
    uint8_t *again = malloc(n + tail + 1);
    REQUIRE(again);
    memcpy(again, mem, n);
    if (tail) memcpy(again + n, data + off, tail);
    pl_gguf *g2;
    REQUIRE(pl_gguf_parse(again, n + tail, &g2) == PL_OK);
    REQUIRE(pl_gguf_kv_count(g2) == pl_gguf_kv_count(g));
    REQUIRE(pl_gguf_alignment(g2) == pl_gguf_alignment(g));
    REQUIRE(same_tensors(g, g2));
    REQUIRE(sample_walk(g2, again, n + tail, &h));
    pl_gguf_free(g2);
    free(again);
    free(mem);
    walk_public(g); /* frees g */
    return 0;
}
