/* gguf.h - the GGUF file format (versions 2 and 3): read, inspect, build, write.
 *
 * Reading parses the header, metadata and tensor infos of a buffer (normally the mmap of
 * the file) and points into it: tensor data is never copied. Every count, length, offset
 * and dimension is checked against the buffer before it is used, so a hostile file gives a
 * one-line error, never a crash or a huge allocation.
 *
 * Writing: build a pl_gguf (pl_gguf_new + set/add calls, or a parsed one), then either
 * pl_gguf_write_file() when all tensor data is in memory, or pl_gguf_write_header() and
 * then stream each tensor's bytes followed by pl_gguf_write_padding() (multi-GB files). */
#ifndef PL_FORMAT_GGUF_H
#define PL_FORMAT_GGUF_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "../base/file_map.h"
#include "../base/status.h"

#define PL_GGUF_MAX_DIMS          4
#define PL_GGUF_DEFAULT_ALIGNMENT 32

typedef enum {
    PL_GGUF_UINT8 = 0,
    PL_GGUF_INT8 = 1,
    PL_GGUF_UINT16 = 2,
    PL_GGUF_INT16 = 3,
    PL_GGUF_UINT32 = 4,
    PL_GGUF_INT32 = 5,
    PL_GGUF_FLOAT32 = 6,
    PL_GGUF_BOOL = 7,
    PL_GGUF_STRING = 8,
    PL_GGUF_ARRAY = 9,
    PL_GGUF_UINT64 = 10,
    PL_GGUF_INT64 = 11,
    PL_GGUF_FLOAT64 = 12,
    PL_GGUF_TYPE_COUNT = 13,
} pl_gguf_type;

typedef struct {
    const char *ptr; /* NOT NUL-terminated: points into the file or into owned memory */
    uint64_t len;
} pl_gguf_str;

/* A metadata value. Scalars are widened into u/i/f; arrays of numbers keep a pointer to
 * their little-endian bytes; arrays of strings and of arrays have one item per element. */
typedef struct pl_gguf_value {
    uint32_t type; /* pl_gguf_type */
    union {
        uint64_t u;      /* UINT8..UINT64, BOOL */
        int64_t i;       /* INT8..INT64 */
        double f;        /* FLOAT32, FLOAT64 */
        pl_gguf_str str; /* STRING */
        struct {
            uint32_t elem_type;
            uint64_t count;
            const void *data;            /* numeric/bool elements, packed, little-endian */
            struct pl_gguf_value *items; /* STRING or ARRAY elements (count of them) */
        } arr;
    };
} pl_gguf_value;

typedef struct {
    pl_gguf_str key;
    pl_gguf_value value;
} pl_gguf_kv;

typedef struct {
    pl_gguf_str name;
    uint32_t n_dims;
    int64_t ne[PL_GGUF_MAX_DIMS]; /* ne[0] is the row length (innermost); unused dims are 1 */
    uint32_t type;                /* pl_type */
    uint64_t offset;              /* from the start of the data section, aligned */
    uint64_t nbytes;
    const void *data; /* into the mapped file; NULL for a tensor being built */
} pl_gguf_tensor;

typedef struct pl_gguf pl_gguf;

/* ---- reading ---- */

/* Parse a GGUF held in memory (buf must outlive the result). */
pl_status pl_gguf_parse(const void *buf, size_t len, pl_gguf **out);
/* Parse only the header, metadata and tensor infos: buf may end anywhere after the infos
 * (what a room's worker without the file receives from the host). Tensors have data NULL;
 * each must end within PL_GGUF_MAX_EXTENT bytes of the data section. */
#define PL_GGUF_MAX_EXTENT (UINT64_C(1) << 50)
pl_status pl_gguf_parse_header(const void *buf, size_t len, pl_gguf **out);
/* Map and parse a file. */
pl_status pl_gguf_open(const char *path, pl_gguf **out);
void pl_gguf_free(pl_gguf *g);

uint32_t pl_gguf_version(const pl_gguf *g);
uint32_t pl_gguf_alignment(const pl_gguf *g);
uint64_t pl_gguf_data_offset(const pl_gguf *g); /* byte offset of the data section */
uint64_t pl_gguf_file_size(const pl_gguf *g);   /* of the parsed buffer */

int64_t pl_gguf_kv_count(const pl_gguf *g);
const pl_gguf_kv *pl_gguf_kv_at(const pl_gguf *g, int64_t i);
/* Find a key; NULL if absent. */
const pl_gguf_value *pl_gguf_get(const pl_gguf *g, const char *key);

/* Typed getters: true if the key exists with a compatible type (any integer type for
 * get_int, any number for get_float), storing the value. */
bool pl_gguf_get_int(const pl_gguf *g, const char *key, int64_t *out);
bool pl_gguf_get_float(const pl_gguf *g, const char *key, double *out);
bool pl_gguf_get_bool(const pl_gguf *g, const char *key, bool *out);
/* Returns a malloc'd NUL-terminated copy or NULL. */
char *pl_gguf_get_string(const pl_gguf *g, const char *key);

/* Array helpers: element i of a numeric array as int/float. */
int64_t pl_gguf_arr_int(const pl_gguf_value *v, uint64_t i);
double pl_gguf_arr_float(const pl_gguf_value *v, uint64_t i);
/* Element i of any array as a value of its own (numbers widened as for scalars; strings
 * and nested arrays point into the parent). False if v is not an array or i is past it. */
bool pl_gguf_arr_at(const pl_gguf_value *v, uint64_t i, pl_gguf_value *out);

int64_t pl_gguf_tensor_count(const pl_gguf *g);
const pl_gguf_tensor *pl_gguf_tensor_at(const pl_gguf *g, int64_t i);
const pl_gguf_tensor *pl_gguf_find_tensor(const pl_gguf *g, const char *name);

/* Helpers on strings and sizes. */
bool pl_gguf_str_eq(pl_gguf_str s, const char *c);
const char *pl_gguf_type_name(uint32_t t); /* "u32", "str", "arr"... */
size_t pl_gguf_type_size(uint32_t t);      /* bytes of a scalar element, 0 for str/arr */

/* ---- building and writing ---- */

/* An empty GGUF (version 3, alignment 32) to fill in. */
pl_gguf *pl_gguf_new(void);

/* Set (replace or append) a metadata value. Strings and arrays are deep-copied. */
pl_status pl_gguf_set_u32(pl_gguf *g, const char *key, uint32_t v);
pl_status pl_gguf_set_i32(pl_gguf *g, const char *key, int32_t v);
pl_status pl_gguf_set_u64(pl_gguf *g, const char *key, uint64_t v);
pl_status pl_gguf_set_f32(pl_gguf *g, const char *key, float v);
pl_status pl_gguf_set_bool(pl_gguf *g, const char *key, bool v);
pl_status pl_gguf_set_str(pl_gguf *g, const char *key, const char *v);
/* Numeric array of `count` elements of elem_type, packed little-endian at data. */
pl_status pl_gguf_set_arr(pl_gguf *g, const char *key, uint32_t elem_type, const void *data,
                          uint64_t count);
pl_status pl_gguf_set_str_arr(pl_gguf *g, const char *key, const char *const *strs, uint64_t count);
/* Copy any value (e.g. from another file) under key. */
pl_status pl_gguf_set_value(pl_gguf *g, const char *key, const pl_gguf_value *v);
/* Remove a key if present. */
void pl_gguf_remove(pl_gguf *g, const char *key);

/* Append a tensor info; its offset is placed after the previous tensor, aligned.
 * data may be NULL when the bytes will be streamed. ne has n_dims entries. */
pl_status pl_gguf_add_tensor(pl_gguf *g, const char *name, uint32_t type, uint32_t n_dims,
                             const int64_t *ne, const void *data);

/* Write header + metadata + tensor infos + padding up to the data section. */
pl_status pl_gguf_write_header(const pl_gguf *g, FILE *f);
/* Zero bytes that follow a tensor of nbytes so the next one is aligned. */
pl_status pl_gguf_write_padding(const pl_gguf *g, FILE *f, uint64_t nbytes);
/* Write the whole file; every tensor must have data. */
pl_status pl_gguf_write_file(const pl_gguf *g, const char *path);

#endif
