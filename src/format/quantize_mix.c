/* quantize_mix.c - llama.cpp's file types and the type each tensor gets under them.
 *
 * A file type such as Q4_K_M is a default type (Q4_K) plus a mixture: rules that give some
 * tensors more bits (the output matrix, attn_v and ffn_down of some layers...). These are
 * llama-quantize's rules for the file types we can write, so that `pooled quantize` without
 * --pure makes the same choices it does. */
#include "quantize_mix.h"

#include <stdlib.h>
#include <string.h>

#include "quant.h"
#include "quantize.h"

/* ---- file types ---- */

/* llama.cpp's LLAMA_FTYPE_* ids for the file types we write. */
enum {
    FT_F32 = 0,
    FT_F16 = 1,
    FT_Q4_0 = 2,
    FT_Q4_1 = 3,
    FT_Q8_0 = 7,
    FT_Q5_0 = 8,
    FT_Q5_1 = 9,
    FT_Q2_K = 10,
    FT_Q3_K_S = 11,
    FT_Q3_K_M = 12,
    FT_Q3_K_L = 13,
    FT_Q4_K_S = 14,
    FT_Q4_K_M = 15,
    FT_Q5_K_S = 16,
    FT_Q5_K_M = 17,
    FT_Q6_K = 18,
    FT_IQ4_NL = 25,
    FT_IQ4_XS = 30,
    FT_BF16 = 32,
    FT_TQ1_0 = 36,
    FT_TQ2_0 = 37,
};

static const struct {
    const char *name; /* as users type it; the plain K names mean llama-quantize's _M */
    int file_type;
    uint32_t base;
} file_types[] = {
    {"f32", FT_F32, PL_TYPE_F32},          {"f16", FT_F16, PL_TYPE_F16},
    {"bf16", FT_BF16, PL_TYPE_BF16},       {"q8_0", FT_Q8_0, PL_TYPE_Q8_0},
    {"q5_1", FT_Q5_1, PL_TYPE_Q5_1},       {"q5_0", FT_Q5_0, PL_TYPE_Q5_0},
    {"q4_1", FT_Q4_1, PL_TYPE_Q4_1},       {"q4_0", FT_Q4_0, PL_TYPE_Q4_0},
    {"q6_k", FT_Q6_K, PL_TYPE_Q6_K},       {"q5_k_m", FT_Q5_K_M, PL_TYPE_Q5_K},
    {"q5_k", FT_Q5_K_M, PL_TYPE_Q5_K},     {"q5_k_s", FT_Q5_K_S, PL_TYPE_Q5_K},
    {"q4_k_m", FT_Q4_K_M, PL_TYPE_Q4_K},   {"q4_k", FT_Q4_K_M, PL_TYPE_Q4_K},
    {"q4_k_s", FT_Q4_K_S, PL_TYPE_Q4_K},   {"q3_k_l", FT_Q3_K_L, PL_TYPE_Q3_K},
    {"q3_k_m", FT_Q3_K_M, PL_TYPE_Q3_K},   {"q3_k", FT_Q3_K_M, PL_TYPE_Q3_K},
    {"q3_k_s", FT_Q3_K_S, PL_TYPE_Q3_K},   {"q2_k", FT_Q2_K, PL_TYPE_Q2_K},
    {"iq4_xs", FT_IQ4_XS, PL_TYPE_IQ4_XS}, {"iq4_nl", FT_IQ4_NL, PL_TYPE_IQ4_NL},
    {"tq2_0", FT_TQ2_0, PL_TYPE_TQ2_0},    {"tq1_0", FT_TQ1_0, PL_TYPE_TQ1_0},
};
#define N_FILE_TYPES (int)(sizeof file_types / sizeof *file_types)

int pl_quantize_file_type_from_name(const char *name) {
    for (int i = 0; i < N_FILE_TYPES; i++)
        if (!strcasecmp(name, file_types[i].name)) return file_types[i].file_type;
    return -1;
}

int pl_quantize_base_type(int file_type) {
    for (int i = 0; i < N_FILE_TYPES; i++)
        if (file_types[i].file_type == file_type) return (int)file_types[i].base;
    return -1;
}

const char *pl_quantize_file_type_names(void) {
    return "f32 f16 bf16 q8_0 q5_1 q5_0 q4_1 q4_0 q6_k q5_k_m q5_k_s q4_k_m q4_k_s q3_k_l "
           "q3_k_m q3_k_s q2_k iq4_xs iq4_nl tq2_0 tq1_0 (q5_k, q4_k, q3_k: the _m kinds)";
}

/* ---- which tensors ---- */

static bool ends_with(const char *s, const char *suffix) {
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && !strcmp(s + a - b, suffix);
}

bool pl_quant_mix_quantizable(const char *name, uint32_t n_dims) {
    /* llama.cpp's list: routers and embeddings that are small or need full precision,
     * SSM/RWKV/T5 small matrices, multimodal projections and codebooks */
    static const char *const keep[] = {"_norm.weight",
                                       "ffn_gate_inp.weight",
                                       "ffn_gate_tid2eid.weight",
                                       "altup",
                                       "laurel",
                                       "per_layer_model_proj",
                                       "ssm_conv1d",
                                       "shortconv.conv.weight",
                                       "indexer.k_proj.weight",
                                       "indexer.q_proj.weight",
                                       "time_mix_first.weight",
                                       "time_mix_w0.weight",
                                       "time_mix_w1.weight",
                                       "time_mix_w2.weight",
                                       "time_mix_v0.weight",
                                       "time_mix_v1.weight",
                                       "time_mix_v2.weight",
                                       "time_mix_a0.weight",
                                       "time_mix_a1.weight",
                                       "time_mix_a2.weight",
                                       "time_mix_g1.weight",
                                       "time_mix_g2.weight",
                                       "time_mix_decay_w1.weight",
                                       "time_mix_decay_w2.weight",
                                       "time_mix_lerp_fused.weight",
                                       "attn_rel_b.weight",
                                       ".position_embd",
                                       "sam.pos_embd",
                                       "sam.neck.",
                                       "sam.net_",
                                       ".rel_pos",
                                       ".patch_embd",
                                       ".patch_merger",
                                       "a.rvq.codebook",
                                       "mm.a.code_embd"};
    if (n_dims < 2 || !ends_with(name, "weight")) return false;
    if (!strcmp(name, "position_embd.weight") || !strcmp(name, "token_types.weight")) return false;
    for (size_t i = 0; i < sizeof keep / sizeof *keep; i++)
        if (strstr(name, keep[i])) return false;
    return true;
}

/* ---- which type ---- */

typedef enum {
    C_TOKEN_EMBD,
    C_ATTN_V,
    C_ATTN_K,
    C_ATTN_OUT,
    C_FFN_DOWN,
    C_OUTPUT,
    C_OTHER
} category;

/* llama.cpp's tensor categories (substring tests, in its order). */
static category category_of(const char *name) {
    if (!strcmp(name, "output.weight")) return C_OUTPUT;
    if (!strcmp(name, "token_embd.weight") || !strcmp(name, "per_layer_token_embd.weight"))
        return C_TOKEN_EMBD;
    if (strstr(name, "attn_qkv.weight") || strstr(name, "attn_kv_b.weight") ||
        strstr(name, "attn_v.weight"))
        return C_ATTN_V;
    if (strstr(name, "attn_k.weight")) return C_ATTN_K;
    if (strstr(name, "attn_q.weight")) return C_OTHER;
    if (strstr(name, "attn_output.weight")) return C_ATTN_OUT;
    if (strstr(name, "ffn_up") || strstr(name, "ffn_gate")) return C_OTHER;
    if (strstr(name, "ffn_down")) return C_FFN_DOWN;
    return C_OTHER;
}

bool pl_quant_mix_is_attn_v(const char *name) {
    return category_of(name) == C_ATTN_V;
}

/* The layers that get more bits in the _M mixtures: the first and last eighth, and every
 * third layer in between. */
static bool more_bits(int i, int n) {
    return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2;
}

static uint32_t pick_attn_v(pl_quant_mix *m, uint32_t t) {
    const int ft = m->file_type, i = m->i_attn_v++;
    if (ft == FT_Q2_K)
        t = m->n_gqa >= 4 ? PL_TYPE_Q4_K : PL_TYPE_Q3_K;
    else if (ft == FT_Q3_K_M)
        t = i < 2 ? PL_TYPE_Q5_K : PL_TYPE_Q4_K;
    else if (ft == FT_Q3_K_L)
        t = PL_TYPE_Q5_K;
    else if ((ft == FT_IQ4_NL || ft == FT_IQ4_XS) && m->n_gqa >= 4)
        t = PL_TYPE_Q5_K;
    else if ((ft == FT_Q4_K_M || ft == FT_Q5_K_M) && more_bits(i, m->n_attn_v))
        t = PL_TYPE_Q6_K;
    else if (ft == FT_Q4_K_S && i < 4)
        t = PL_TYPE_Q5_K;
    /* 70B: attn_v is 8x smaller than attn_q, so more bits cost little */
    if (m->is_70b && (t == PL_TYPE_Q3_K || t == PL_TYPE_Q4_K)) t = PL_TYPE_Q5_K;
    if (m->n_expert == 8) t = PL_TYPE_Q8_0;
    return t;
}

static uint32_t pick_ffn_down(pl_quant_mix *m, const char *name, uint32_t t) {
    const int ft = m->file_type, n = m->n_layer;
    int i = m->i_ffn_down++;
    /* experts' tensors are not in layer order: take the layer from the name */
    if (m->n_expert > 1 && !strncmp(name, "blk.", 4)) i = atoi(name + 4);
    if (ft == FT_Q2_K)
        t = PL_TYPE_Q3_K;
    else if (ft == FT_Q3_K_M)
        t = i < n / 16 ? PL_TYPE_Q5_K : !m->falcon || more_bits(i, n) ? PL_TYPE_Q4_K : PL_TYPE_Q3_K;
    else if (ft == FT_Q3_K_L)
        t = m->falcon ? PL_TYPE_Q4_K : PL_TYPE_Q5_K;
    else if (ft == FT_Q4_K_M) {
        if (m->falcon)
            t = i < n / 16 ? PL_TYPE_Q6_K : more_bits(i, n) ? PL_TYPE_Q5_K : PL_TYPE_Q4_K;
        else if (more_bits(i, n))
            t = PL_TYPE_Q6_K;
    } else if (i < n / 8 && (ft == FT_IQ4_NL || ft == FT_IQ4_XS))
        t = PL_TYPE_Q5_K;
    else if (ft == FT_Q5_K_M && more_bits(i, n))
        t = PL_TYPE_Q6_K;
    else if (ft == FT_Q4_K_S && !m->falcon && i < n / 8)
        t = PL_TYPE_Q5_K;
    return t;
}

static uint32_t pick_attn_out(const pl_quant_mix *m, uint32_t t) {
    const int ft = m->file_type;
    if (m->falcon) return ft == FT_Q3_K_L ? PL_TYPE_Q4_K : t;
    if (m->n_expert == 8)
        return ft == FT_Q2_K || ft == FT_Q3_K_S || ft == FT_Q3_K_M || ft == FT_IQ4_NL ||
                       ft == FT_Q4_K_S || ft == FT_Q4_K_M || ft == FT_IQ4_XS
                   ? PL_TYPE_Q5_K
                   : t;
    if (ft == FT_Q2_K) return PL_TYPE_Q3_K;
    if (ft == FT_Q3_K_M) return PL_TYPE_Q4_K;
    if (ft == FT_Q3_K_L) return PL_TYPE_Q5_K;
    return t;
}

uint32_t pl_quant_mix_pick(pl_quant_mix *m, const char *name, int64_t ne0) {
    const uint32_t t = m->base;
    const category c = category_of(name);
    if (c == C_OUTPUT || (m->tied && c == C_TOKEN_EMBD)) {
        if (m->falcon || ne0 % pl_type_get(t)->block_size) return PL_TYPE_Q8_0;
        return t == PL_TYPE_Q8_0 ? t : PL_TYPE_Q6_K;
    }
    switch (c) {
    case C_TOKEN_EMBD:
        return m->file_type == FT_TQ1_0 || m->file_type == FT_TQ2_0 ? PL_TYPE_Q4_K : t;
    case C_ATTN_V: return pick_attn_v(m, t);
    case C_ATTN_K: return m->n_expert == 8 ? PL_TYPE_Q8_0 : t;
    case C_FFN_DOWN: return pick_ffn_down(m, name, t);
    case C_ATTN_OUT: return pick_attn_out(m, t);
    default: return t;
    }
}

uint32_t pl_quant_mix_fallback(uint32_t t, int64_t ne0) {
    switch (t) {
    case PL_TYPE_IQ4_XS: t = PL_TYPE_IQ4_NL; break;
    case PL_TYPE_Q2_K:
    case PL_TYPE_Q3_K:
    case PL_TYPE_TQ1_0:
    case PL_TYPE_TQ2_0: t = PL_TYPE_Q4_0; break;
    case PL_TYPE_Q4_K: t = PL_TYPE_Q5_0; break;
    case PL_TYPE_Q5_K: t = PL_TYPE_Q5_1; break;
    case PL_TYPE_Q6_K: t = PL_TYPE_Q8_0; break;
    default: return PL_TYPE_F16; /* llama-quantize stops here; we store f16 and say so */
    }
    return ne0 % pl_type_get(t)->block_size == 0 ? t : PL_TYPE_F16;
}
