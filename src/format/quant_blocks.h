/* quant_blocks.h - the byte layout of every block format we read or write, exactly as ggml
 * stores it in GGUF files (ggml-common.h is the definition; these structs are ours).
 *
 * A quantized row of n values is n / block_size blocks laid end to end, no padding. Every
 * field is a byte, a byte array or a little-endian 16-bit half (pl_half), except Q8_K's
 * float scale, so the structs have no padding and alignment 2 (4 for Q8_K); the
 * static_asserts pin the sizes to ggml's. The CPU kernels and the WGSL generator read these
 * layouts; the traits table (quant_traits.c) holds the same sizes. */
#ifndef PL_FORMAT_QUANT_BLOCKS_H
#define PL_FORMAT_QUANT_BLOCKS_H

#include <assert.h>
#include <stdint.h>

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the block structs read GGUF's little-endian fields in place: big-endian hosts need swaps"
#endif

#define PL_QK   32  /* values per block of the legacy formats and IQ4_NL */
#define PL_QK_K 256 /* values per super-block of the K-quants, IQ4_XS and the ternary formats */

typedef uint16_t pl_half; /* IEEE binary16 bits (pl_f16_to_f32 reads them) */

/* ---- legacy formats: 32 values, one scale (and a min for the _1 kinds) ---- */

typedef struct {
    pl_half d;             /* scale: value = d * (q - 8) */
    uint8_t qs[PL_QK / 2]; /* byte j: value j in the low nibble, value j+16 in the high nibble */
} pl_block_q4_0;
static_assert(sizeof(pl_block_q4_0) == 18, "q4_0 block size");

typedef struct {
    pl_half d;             /* scale: value = d * q + m */
    pl_half m;             /* the block minimum */
    uint8_t qs[PL_QK / 2]; /* nibbles as in q4_0 */
} pl_block_q4_1;
static_assert(sizeof(pl_block_q4_1) == 20, "q4_1 block size");

typedef struct {
    pl_half d;             /* scale: value = d * (q - 16), q has 5 bits */
    uint8_t qh[4];         /* bit j of this little-endian u32: the 5th bit of value j */
    uint8_t qs[PL_QK / 2]; /* low 4 bits, nibbles as in q4_0 */
} pl_block_q5_0;
static_assert(sizeof(pl_block_q5_0) == 22, "q5_0 block size");

typedef struct {
    pl_half d;             /* scale: value = d * q + m, q has 5 bits */
    pl_half m;             /* the block minimum */
    uint8_t qh[4];         /* 5th bits, as in q5_0 */
    uint8_t qs[PL_QK / 2]; /* low 4 bits, as in q4_0 */
} pl_block_q5_1;
static_assert(sizeof(pl_block_q5_1) == 24, "q5_1 block size");

typedef struct {
    pl_half d;        /* scale: value = d * q */
    int8_t qs[PL_QK]; /* one signed byte per value */
} pl_block_q8_0;
static_assert(sizeof(pl_block_q8_0) == 34, "q8_0 block size");

typedef struct {
    pl_half d;        /* scale: value = d * q */
    pl_half s;        /* d * sum(qs), for dot products */
    int8_t qs[PL_QK]; /* one signed byte per value */
} pl_block_q8_1;
static_assert(sizeof(pl_block_q8_1) == 36, "q8_1 block size");

/* ---- K-quants: 256 values in 8 or 16 sub-blocks, with quantized sub-block scales ---- */

typedef struct {
    uint8_t scales[PL_QK_K / 16]; /* per 16 values: low nibble scale, high nibble min */
    uint8_t qs[PL_QK_K / 4];      /* 2-bit quants: byte l of each 32-byte half holds values
                                     l, l+32, l+64, l+96 of that 128 (bits 0-1, 2-3, 4-5, 6-7) */
    pl_half d;                    /* super-block scale of the scales */
    pl_half dmin;                 /* super-block scale of the mins */
} pl_block_q2_K;
static_assert(sizeof(pl_block_q2_K) == 84, "q2_K block size");

typedef struct {
    uint8_t hmask[PL_QK_K / 8]; /* high bit: byte l bit k belongs to value 32k + l; a SET bit
                                   means no -4 offset */
    uint8_t qs[PL_QK_K / 4];    /* low 2 bits, packed as in q2_K */
    uint8_t scales[12];         /* 16 6-bit scales (offset 32): low 4 bits in bytes 0-7
                                   (nibbles), high 2 bits in bytes 8-11 */
    pl_half d;                  /* super-block scale */
} pl_block_q3_K;
static_assert(sizeof(pl_block_q3_K) == 110, "q3_K block size");

typedef struct {
    pl_half d;               /* super-block scale of the 6-bit scales */
    pl_half dmin;            /* super-block scale of the 6-bit mins */
    uint8_t scales[12];      /* 8 scales and 8 mins, 6 bits each (see k4_scale_min) */
    uint8_t qs[PL_QK_K / 2]; /* 4-bit quants: each 32 bytes hold 64 values, low nibbles
                                first, then high nibbles */
} pl_block_q4_K;
static_assert(sizeof(pl_block_q4_K) == 144, "q4_K block size");

typedef struct {
    pl_half d;               /* super-block scale of the 6-bit scales */
    pl_half dmin;            /* super-block scale of the 6-bit mins */
    uint8_t scales[12];      /* packed as in q4_K */
    uint8_t qh[PL_QK_K / 8]; /* 5th bits: byte l, bits 2j and 2j+1, for values 64j+l, 64j+32+l */
    uint8_t qs[PL_QK_K / 2]; /* low 4 bits, packed as in q4_K */
} pl_block_q5_K;
static_assert(sizeof(pl_block_q5_K) == 176, "q5_K block size");

typedef struct {
    uint8_t ql[PL_QK_K / 2];     /* low 4 bits: per 128 values, 64 bytes; byte l holds values
                                    l (low) and l+64 (high), byte l+32 holds l+32 and l+96 */
    uint8_t qh[PL_QK_K / 4];     /* high 2 bits: per 128 values, byte l holds values l, l+32,
                                    l+64, l+96 (bits 0-1, 2-3, 4-5, 6-7) */
    int8_t scales[PL_QK_K / 16]; /* signed 8-bit scale per 16 values */
    pl_half d;                   /* super-block scale: value = d * scale * (q - 32) */
} pl_block_q6_K;
static_assert(sizeof(pl_block_q6_K) == 210, "q6_K block size");

typedef struct {
    float d;                     /* scale (a full float: Q8_K is ggml's dot-product operand) */
    int8_t qs[PL_QK_K];          /* one signed byte per value */
    int16_t bsums[PL_QK_K / 16]; /* sum of each 16 quants */
} pl_block_q8_K;
static_assert(sizeof(pl_block_q8_K) == 292, "q8_K block size");

/* ---- non-linear 4-bit: indices into a fixed 16-entry table ---- */

typedef struct {
    pl_half d;             /* scale: value = d * table[q] */
    uint8_t qs[PL_QK / 2]; /* nibbles as in q4_0 */
} pl_block_iq4_nl;
static_assert(sizeof(pl_block_iq4_nl) == 18, "iq4_nl block size");

typedef struct {
    pl_half d;                      /* super-block scale */
    uint16_t scales_h;              /* high 2 bits of the 8 sub-block scales (bits 2j, 2j+1) */
    uint8_t scales_l[PL_QK_K / 64]; /* low 4 bits of the 8 scales (nibbles; offset 32) */
    uint8_t qs[PL_QK_K / 2];        /* per 32 values, 16 bytes, nibbles as in q4_0 */
} pl_block_iq4_xs;
static_assert(sizeof(pl_block_iq4_xs) == 136, "iq4_xs block size");

/* ---- ternary: values in {-1, 0, 1} times one scale ---- */

typedef struct {
    uint8_t qs[(PL_QK_K - 4 * PL_QK_K / 64) / 5]; /* 5 trits per byte (240 values), base 3
                                                     scaled to 0..255 (see quant_ternary.c) */
    uint8_t qh[PL_QK_K / 64];                     /* 4 trits per byte (the last 16 values) */
    pl_half d;                                    /* scale */
} pl_block_tq1_0;
static_assert(sizeof(pl_block_tq1_0) == 54, "tq1_0 block size");

typedef struct {
    uint8_t qs[PL_QK_K / 4]; /* 2 bits per value (q - 1 is the trit), packed as in q2_K */
    pl_half d;               /* scale */
} pl_block_tq2_0;
static_assert(sizeof(pl_block_tq2_0) == 66, "tq2_0 block size");

#endif
