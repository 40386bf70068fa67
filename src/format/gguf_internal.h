/* gguf_internal.h - the pl_gguf struct, shared by gguf_read.c and gguf.c only. */
#ifndef PL_FORMAT_GGUF_INTERNAL_H
#define PL_FORMAT_GGUF_INTERNAL_H

#include "gguf.h"

struct pl_gguf {
    uint32_t version;
    uint32_t alignment;
    uint64_t data_offset; /* of the parsed buffer (pl_gguf_data_offset recomputes if built) */
    uint64_t size;        /* of the parsed buffer */
    pl_gguf_kv *kv;
    uint64_t n_kv, kv_cap;
    pl_gguf_tensor *tensors;
    uint64_t n_tensors, tensor_cap;
    pl_file_map map; /* when opened from a file */
    /* Every heap block the values, keys and names point to (item arrays, copied strings),
     * freed together by pl_gguf_free. Parsed strings point into the buffer instead. */
    void **allocs;
    uint64_t n_allocs, allocs_cap;
};

/* malloc (zeroed) a block that lives as long as g; NULL on failure. */
void *pl_gguf_alloc(pl_gguf *g, size_t size);
void pl_gguf_load_scalar(pl_gguf_value *v, uint32_t t, const void *p);
/* Make room for entry i of an array of elem-byte entries that grows by doubling, to at most
 * `limit` entries (new entries zeroed). */
pl_status pl_gguf_grow(void **arr, uint64_t *cap, uint64_t i, uint64_t limit, size_t elem);

#endif
