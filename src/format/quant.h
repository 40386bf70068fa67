/* quant.h - the weight formats GGUF files carry: type ids, block layouts, and one traits
 * row per type (the table in quant_traits.c).
 *
 * Type ids are GGML's, pinned: they are what is stored in the file. A format is a row of
 * the traits table; the CPU and GPU backends both read it, so layouts cannot drift.
 * Blocks are byte-compatible with ggml's (static_asserts in quant_blocks.h). */
#ifndef PL_FORMAT_QUANT_H
#define PL_FORMAT_QUANT_H

#include <stddef.h>
#include <stdint.h>

#include "../base/status.h"

typedef enum {
    PL_TYPE_F32 = 0,
    PL_TYPE_F16 = 1,
    PL_TYPE_Q4_0 = 2,
    PL_TYPE_Q4_1 = 3,
    PL_TYPE_Q5_0 = 6,
    PL_TYPE_Q5_1 = 7,
    PL_TYPE_Q8_0 = 8,
    PL_TYPE_Q8_1 = 9,
    PL_TYPE_Q2_K = 10,
    PL_TYPE_Q3_K = 11,
    PL_TYPE_Q4_K = 12,
    PL_TYPE_Q5_K = 13,
    PL_TYPE_Q6_K = 14,
    PL_TYPE_Q8_K = 15,
    PL_TYPE_IQ2_XXS = 16,
    PL_TYPE_IQ2_XS = 17,
    PL_TYPE_IQ3_XXS = 18,
    PL_TYPE_IQ1_S = 19,
    PL_TYPE_IQ4_NL = 20,
    PL_TYPE_IQ3_S = 21,
    PL_TYPE_IQ2_S = 22,
    PL_TYPE_IQ4_XS = 23,
    PL_TYPE_I8 = 24,
    PL_TYPE_I16 = 25,
    PL_TYPE_I32 = 26,
    PL_TYPE_I64 = 27,
    PL_TYPE_F64 = 28,
    PL_TYPE_IQ1_M = 29,
    PL_TYPE_BF16 = 30,
    PL_TYPE_TQ1_0 = 34,
    PL_TYPE_TQ2_0 = 35,
    PL_TYPE_MXFP4 = 39,
    PL_TYPE_COUNT = 40, /* one past the largest id; gaps are retired ggml types */
} pl_type;

/* Dequantize n values (n a multiple of the block size) from src to float. The inner loop:
 * no checks. src and dst must not overlap; any bytes are a valid input (a broken file gives
 * odd values, never a crash). Bit-exact with ggml's dequantization. */
typedef void (*pl_dequant_fn)(const void *src, float *dst, int64_t n);
/* Quantize n floats (n a multiple of the block size) into blocks at dst, byte-exact with
 * llama-quantize (without an importance matrix). NaN/Inf input gives unspecified blocks. */
typedef void (*pl_quant_fn)(const float *src, void *dst, int64_t n);

typedef struct {
    const char *name;      /* "q4_0": lower case, as users type it */
    int block_size;        /* values per block (1 for plain types) */
    int type_size;         /* bytes per block */
    pl_dequant_fn dequant; /* NULL: we cannot read this format's values */
    pl_quant_fn quant;     /* NULL: we cannot write this format */
} pl_type_traits;

/* The traits row of type t, or NULL if t is not a known GGML type id. */
const pl_type_traits *pl_type_get(uint32_t t);

/* Parse a type name ("Q4_0", "q8_0", "f16"...), case-insensitive. Returns -1 if unknown. */
int pl_type_from_name(const char *name);

/* Bytes of one row of n values, or -1 if n is not a multiple of the block size
 * or the type is unknown. */
int64_t pl_row_size(uint32_t t, int64_t n);

/* Dequantize a row; fails (with a message) if the type cannot be read or n is bad. */
pl_status pl_dequant_row(uint32_t t, const void *src, float *dst, int64_t n);

/* The index of the first NaN or infinite value among the n values of type t at data, or
 * -1 if there is none. Block formats are judged by their float fields (scales, minimums:
 * the quants themselves are integers; Q8_K's full-float scale also counts when its values
 * overflow), so the index is that of the block's first value.
 * Reads only; types we cannot read, and an n that is not whole blocks, give -1. */
int64_t pl_find_nonfinite(uint32_t t, const void *data, int64_t n);

/* Quantize a row; fails if the type cannot be written or n is bad. */
pl_status pl_quant_row(uint32_t t, const float *src, void *dst, int64_t n);

/* Activations quantised for integer dot products with Q4_0/Q8_0 weights (llama.cpp's
 * Q8_0 rule, the same bits as pl_quant_q8_0 but split): per block of 32 values, scale
 * s = max|x| / 127 stored as f16 in d[b], quant q = roundf(x * (1 / s)) (0 when s is 0).
 * n is a multiple of 32. */
void pl_quant_act_q8_0(const float *x, int64_t n, int8_t *q, uint16_t *d);

/* IEEE half and bfloat16 conversions (round-to-nearest-even, as ggml does). */
uint16_t pl_f32_to_f16(float f);
/* n values at once, the bits pl_f32_to_f16 / pl_f16_to_f32 give one by one: with F16C on
 * x86, 8 at a time (a room's frames: a 512-column prompt is 2 M values each way). */
void pl_f32_to_f16_row(const float *x, uint16_t *out, int64_t n);
void pl_f16_to_f32_row(const uint16_t *h, float *out, int64_t n);
float pl_bf16_to_f32(uint16_t h);
uint16_t pl_f32_to_bf16(float f);

/* Half to float, inline because every block of every format reads one or two halves: the
 * exponent and mantissa bits move into float position and a multiply by 2^112 rebiases the
 * exponent, exactly, normals and subnormals alike (a subnormal half lands on a subnormal
 * float, and the product is the normal float it stands for); the all-ones exponent (inf,
 * NaN) is set by hand. Needs the default float environment (no flush-to-zero). */
static inline float pl_f16_to_f32(uint16_t h) {
    union {
        uint32_t u;
        float f;
    } v = {(uint32_t)(h & 0x7fff) << 13};
    v.f *= 0x1p112f;
    if ((h & 0x7c00) == 0x7c00) v.u |= 0x7f800000u; /* inf/NaN: exponent all ones */
    v.u |= (uint32_t)(h & 0x8000) << 16;
    return v.f;
}

#endif
