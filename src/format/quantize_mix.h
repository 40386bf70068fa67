/* quantize_mix.h - which type each tensor gets when a model is quantized (internal to
 * quantize.c): llama.cpp's file types and their mixtures, the tensors that are never
 * quantized, and the fallbacks for row lengths a type cannot hold. */
#ifndef PL_FORMAT_QUANTIZE_MIX_H
#define PL_FORMAT_QUANTIZE_MIX_H

#include <stdbool.h>
#include <stdint.h>

/* What the mixture rules need to know about the model, plus their running counters. */
typedef struct {
    int file_type; /* llama.cpp's general.file_type id */
    uint32_t base; /* its default tensor type */
    int n_layer;   /* <arch>.block_count */
    int n_gqa;     /* query heads per KV head */
    int n_expert;  /* <arch>.expert_count, 0 without experts */
    bool tied;     /* no output.weight: token_embd doubles as the output */
    bool falcon;   /* the falcon architecture has rules of its own */
    bool is_70b;   /* llama/qwen2 with 80 layers and GQA: attn_v gets more bits */
    int n_attn_v;  /* attn_v-like tensors (attn_v, attn_qkv, attn_kv_b) in the file */
    int i_attn_v;  /* counters, advanced as the rules see those tensors in file order */
    int i_ffn_down;
} pl_quant_mix;

/* Whether a tensor is a weight the quantizer converts (2-D or more, "...weight", not on
 * llama.cpp's keep-as-is list: norms, routers, position embeddings, small SSM/RWKV/T5 and
 * multimodal matrices). */
bool pl_quant_mix_quantizable(const char *name, uint32_t n_dims);

/* Whether the mixture counts this tensor as attn_v-like (for n_attn_v). */
bool pl_quant_mix_is_attn_v(const char *name);

/* The type llama.cpp's mixture rules give a quantizable tensor with rows of ne0 values
 * (before fallbacks); advances the counters. */
uint32_t pl_quant_mix_pick(pl_quant_mix *m, const char *name, int64_t ne0);

/* The type a row of ne0 values gets when `t` cannot hold it: llama.cpp's fallback (Q4_K ->
 * Q5_0, Q6_K -> Q8_0, ...), or F16 where llama.cpp has none or the fallback cannot hold it
 * either. */
uint32_t pl_quant_mix_fallback(uint32_t t, int64_t ne0);

#endif
