/* gguf_fuzz.c - libFuzzer target for the GGUF parser (pl_gguf_parse from memory).
 *
 * For each input: parse; a failure must leave a one-line message. A success is walked
 * completely (every key, string, array element, tensor name and tensor data byte range,
 * which must lie in the input), then written back with pl_gguf_write_header: the header
 * must be as long as the parsed one, and header + the input's data section must parse
 * again to the same keys and tensors. pl_gguf_parse_header takes every input
 * pl_gguf_parse takes and the header as written alone (tensors without data), and
 * its failures are one line. Seeds in corpus/gguf_fuzz/ come from tests/format/gguf_samples.h
 * (POOLED_WRITE_FUZZ_SEEDS=DIR build/tests/gguf_hardening_test). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../format/gguf_samples.h"

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
    pl_gguf_free(g);
    return 0;
}
