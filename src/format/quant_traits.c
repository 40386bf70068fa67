/* quant_traits.c - one row per GGML type: name, block geometry, and the row converters.
 *
 * A NULL dequant/quant means we cannot read/write that format's values (yet); the type is
 * still known so files that contain it parse and `pooled info` can show them. */
#include <ctype.h>

#include "quant.h"
#include "quant_rows.h"

static const pl_type_traits traits[PL_TYPE_COUNT] = {
    [PL_TYPE_F32] = {"f32", 1, 4, pl_dequant_f32, pl_quant_f32},
    [PL_TYPE_F16] = {"f16", 1, 2, pl_dequant_f16, pl_quant_f16},
    [PL_TYPE_BF16] = {"bf16", 1, 2, pl_dequant_bf16, pl_quant_bf16},
    [PL_TYPE_Q4_0] = {"q4_0", 32, 18, pl_dequant_q4_0, pl_quant_q4_0},
    [PL_TYPE_Q4_1] = {"q4_1", 32, 20, pl_dequant_q4_1, pl_quant_q4_1},
    [PL_TYPE_Q5_0] = {"q5_0", 32, 22, pl_dequant_q5_0, pl_quant_q5_0},
    [PL_TYPE_Q5_1] = {"q5_1", 32, 24, pl_dequant_q5_1, pl_quant_q5_1},
    [PL_TYPE_Q8_0] = {"q8_0", 32, 34, pl_dequant_q8_0, pl_quant_q8_0},
    [PL_TYPE_Q8_1] = {"q8_1", 32, 36, NULL, NULL},
    [PL_TYPE_Q2_K] = {"q2_k", 256, 84, pl_dequant_q2_K, pl_quant_q2_K},
    [PL_TYPE_Q3_K] = {"q3_k", 256, 110, pl_dequant_q3_K, pl_quant_q3_K},
    [PL_TYPE_Q4_K] = {"q4_k", 256, 144, pl_dequant_q4_K, pl_quant_q4_K},
    [PL_TYPE_Q5_K] = {"q5_k", 256, 176, pl_dequant_q5_K, pl_quant_q5_K},
    [PL_TYPE_Q6_K] = {"q6_k", 256, 210, pl_dequant_q6_K, pl_quant_q6_K},
    [PL_TYPE_Q8_K] = {"q8_k", 256, 292, pl_dequant_q8_K, NULL},
    [PL_TYPE_IQ2_XXS] = {"iq2_xxs", 256, 66, NULL, NULL},
    [PL_TYPE_IQ2_XS] = {"iq2_xs", 256, 74, NULL, NULL},
    [PL_TYPE_IQ3_XXS] = {"iq3_xxs", 256, 98, NULL, NULL},
    [PL_TYPE_IQ1_S] = {"iq1_s", 256, 50, NULL, NULL},
    [PL_TYPE_IQ4_NL] = {"iq4_nl", 32, 18, pl_dequant_iq4_nl, pl_quant_iq4_nl},
    [PL_TYPE_IQ3_S] = {"iq3_s", 256, 110, NULL, NULL},
    [PL_TYPE_IQ2_S] = {"iq2_s", 256, 82, NULL, NULL},
    [PL_TYPE_IQ4_XS] = {"iq4_xs", 256, 136, pl_dequant_iq4_xs, pl_quant_iq4_xs},
    [PL_TYPE_I8] = {"i8", 1, 1, NULL, NULL},
    [PL_TYPE_I16] = {"i16", 1, 2, NULL, NULL},
    [PL_TYPE_I32] = {"i32", 1, 4, NULL, NULL},
    [PL_TYPE_I64] = {"i64", 1, 8, NULL, NULL},
    [PL_TYPE_F64] = {"f64", 1, 8, NULL, NULL},
    [PL_TYPE_IQ1_M] = {"iq1_m", 256, 56, NULL, NULL},
    [PL_TYPE_TQ1_0] = {"tq1_0", 256, 54, pl_dequant_tq1_0, pl_quant_tq1_0},
    [PL_TYPE_TQ2_0] = {"tq2_0", 256, 66, pl_dequant_tq2_0, pl_quant_tq2_0},
    [PL_TYPE_MXFP4] = {"mxfp4", 32, 17, NULL, NULL},
};

const pl_type_traits *pl_type_get(uint32_t t) {
    return t < PL_TYPE_COUNT && traits[t].name ? &traits[t] : NULL;
}

int pl_type_from_name(const char *name) {
    for (int t = 0; t < PL_TYPE_COUNT; t++) {
        if (!traits[t].name) continue;
        const char *a = traits[t].name, *b = name;
        while (*a && *b && tolower((unsigned char)*a) == tolower((unsigned char)*b)) a++, b++;
        if (!*a && !*b) return t;
    }
    return -1;
}

int64_t pl_row_size(uint32_t t, int64_t n) {
    const pl_type_traits *tr = pl_type_get(t);
    if (!tr || n < 0 || n % tr->block_size) return -1;
    return n / tr->block_size * tr->type_size;
}

pl_status pl_dequant_row(uint32_t t, const void *src, float *dst, int64_t n) {
    const pl_type_traits *tr = pl_type_get(t);
    if (!tr) return pl_fail(PL_ERR_ARG, "unknown tensor type %u", t);
    if (!tr->dequant) return pl_fail(PL_ERR_FORMAT, "cannot read %s weights", tr->name);
    if (n % tr->block_size)
        return pl_fail(PL_ERR_ARG, "%s row of %lld is not a multiple of %d", tr->name, (long long)n,
                       tr->block_size);
    tr->dequant(src, dst, n);
    return PL_OK;
}

pl_status pl_quant_row(uint32_t t, const float *src, void *dst, int64_t n) {
    const pl_type_traits *tr = pl_type_get(t);
    if (!tr) return pl_fail(PL_ERR_ARG, "unknown tensor type %u", t);
    if (!tr->quant) return pl_fail(PL_ERR_FORMAT, "cannot write %s weights", tr->name);
    if (n % tr->block_size)
        return pl_fail(PL_ERR_ARG, "%s row of %lld is not a multiple of %d", tr->name, (long long)n,
                       tr->block_size);
    tr->quant(src, dst, n);
    return PL_OK;
}
