/* tiny_hybrid.h - a few-kilobyte random-weight qwen35 GGUF (Gated DeltaNet layers and a
 * gated full-attention layer every TINY_H_INTERVAL-th, optionally an MTP block) for tests
 * and the seed corpus of the model fuzzer, like tiny_model.h for the llama family.
 * Header-only, included by test programs. */
#ifndef PL_TEST_TINY_HYBRID_H
#define PL_TEST_TINY_HYBRID_H

#include "model/tiny_model.h"

enum {
    TINY_H_INTERVAL = 2, /* layers 1, 3, ... are full attention */
    TINY_H_NK = 1,       /* linear-attention key heads */
    TINY_H_NV = 2,       /* value heads */
    TINY_H_DK = 4,
    TINY_H_DV = 4,
    TINY_H_CONV = 3,
    TINY_H_CONV_DIM = 2 * TINY_H_NK * TINY_H_DK + TINY_H_NV * TINY_H_DV
};

/* Write a tiny qwen35 of n_layer layers (plus n_nextn MTP blocks), 2-D weights of type
 * wtype (F32 or F16; the conv kernel and vectors stay F32), to path. 0 on success. */
static inline int tiny_hybrid_write(const char *path, int n_layer, int n_nextn, uint32_t wtype) {
    pl_gguf *g = pl_gguf_new();
    pl_gguf_set_str(g, "general.architecture", "qwen35");
    pl_gguf_set_u32(g, "qwen35.block_count", (uint32_t)(n_layer + n_nextn));
    if (n_nextn) pl_gguf_set_u32(g, "qwen35.nextn_predict_layers", (uint32_t)n_nextn);
    pl_gguf_set_u32(g, "qwen35.embedding_length", TINY_EMBD);
    pl_gguf_set_u32(g, "qwen35.feed_forward_length", TINY_FF);
    pl_gguf_set_u32(g, "qwen35.attention.head_count", TINY_HEADS);
    pl_gguf_set_u32(g, "qwen35.attention.head_count_kv", TINY_KV);
    pl_gguf_set_u32(g, "qwen35.attention.key_length", TINY_HD);
    pl_gguf_set_u32(g, "qwen35.attention.value_length", TINY_HD);
    pl_gguf_set_u32(g, "qwen35.rope.dimension_count", 2);
    pl_gguf_set_u32(g, "qwen35.context_length", 64);
    pl_gguf_set_f32(g, "qwen35.attention.layer_norm_rms_epsilon", 1e-6f);
    pl_gguf_set_f32(g, "qwen35.rope.freq_base", 10000000.0f);
    pl_gguf_set_u32(g, "qwen35.full_attention_interval", TINY_H_INTERVAL);
    pl_gguf_set_u32(g, "qwen35.ssm.conv_kernel", TINY_H_CONV);
    pl_gguf_set_u32(g, "qwen35.ssm.state_size", TINY_H_DK);
    pl_gguf_set_u32(g, "qwen35.ssm.group_count", TINY_H_NK);
    pl_gguf_set_u32(g, "qwen35.ssm.time_step_rank", TINY_H_NV);
    pl_gguf_set_u32(g, "qwen35.ssm.inner_size", TINY_H_NV * TINY_H_DV);
    const int32_t sections[4] = {1, 0, 0, 0};
    pl_gguf_set_arr(g, "qwen35.rope.dimension_sections", PL_GGUF_INT32, sections, 4);
    enum { MAXT = 96 };
    void *blocks[MAXT];
    int nb = 0;
    uint32_t seed = 11;
    char nm[64];
#define ADD(name, ne0, ne1, type)                                                                  \
    do {                                                                                           \
        int64_t ne_[2] = {ne0, ne1};                                                               \
        float *f_ = malloc(sizeof(float) * (size_t)((ne0) * (ne1)));                               \
        tiny_fill(f_, (ne0) * (ne1), &seed);                                                       \
        uint32_t t_ = (ne1) == 1 ? PL_TYPE_F32 : (type);                                           \
        void *d_ = f_;                                                                             \
        if (t_ != PL_TYPE_F32) {                                                                   \
            d_ = malloc((size_t)pl_row_size(t_, (ne0) * (ne1)));                                   \
            pl_quant_row(t_, f_, d_, (ne0) * (ne1));                                               \
            free(f_);                                                                              \
        }                                                                                          \
        blocks[nb++] = d_;                                                                         \
        pl_gguf_add_tensor(g, name, t_, (ne1) == 1 ? 1 : 2, ne_, d_);                              \
    } while (0)
#define LAYER(suffix, ne0, ne1, type)                                                              \
    do {                                                                                           \
        snprintf(nm, sizeof nm, "blk.%d.%s", l, suffix);                                           \
        ADD(nm, ne0, ne1, type);                                                                   \
    } while (0)
    ADD("token_embd.weight", TINY_EMBD, TINY_VOCAB, wtype);
    ADD("output_norm.weight", TINY_EMBD, 1, wtype);
    for (int l = 0; l < n_layer + n_nextn && nb < MAXT - 20; l++) {
        LAYER("attn_norm.weight", TINY_EMBD, 1, wtype);
        LAYER("post_attention_norm.weight", TINY_EMBD, 1, wtype);
        LAYER("ffn_gate.weight", TINY_EMBD, TINY_FF, wtype);
        LAYER("ffn_up.weight", TINY_EMBD, TINY_FF, wtype);
        LAYER("ffn_down.weight", TINY_FF, TINY_EMBD, wtype);
        if (l >= n_layer || (l + 1) % TINY_H_INTERVAL == 0) { /* gated full attention */
            LAYER("attn_q.weight", TINY_EMBD, 2 * TINY_HEADS * TINY_HD, wtype);
            LAYER("attn_k.weight", TINY_EMBD, TINY_KV * TINY_HD, wtype);
            LAYER("attn_v.weight", TINY_EMBD, TINY_KV * TINY_HD, wtype);
            LAYER("attn_q_norm.weight", TINY_HD, 1, wtype);
            LAYER("attn_k_norm.weight", TINY_HD, 1, wtype);
            LAYER("attn_output.weight", TINY_HEADS * TINY_HD, TINY_EMBD, wtype);
        } else { /* Gated DeltaNet */
            LAYER("attn_qkv.weight", TINY_EMBD, TINY_H_CONV_DIM, wtype);
            LAYER("attn_gate.weight", TINY_EMBD, TINY_H_NV * TINY_H_DV, wtype);
            LAYER("ssm_beta.weight", TINY_EMBD, TINY_H_NV, wtype);
            LAYER("ssm_alpha.weight", TINY_EMBD, TINY_H_NV, wtype);
            LAYER("ssm_conv1d.weight", TINY_H_CONV, TINY_H_CONV_DIM, PL_TYPE_F32);
            LAYER("ssm_a", TINY_H_NV, 1, wtype);
            LAYER("ssm_dt.bias", TINY_H_NV, 1, wtype);
            LAYER("ssm_norm.weight", TINY_H_DV, 1, wtype);
            LAYER("ssm_out.weight", TINY_H_NV * TINY_H_DV, TINY_EMBD, wtype);
        }
        if (l >= n_layer) { /* the MTP block's own tensors */
            LAYER("nextn.eh_proj.weight", 2 * TINY_EMBD, TINY_EMBD, wtype);
            LAYER("nextn.enorm.weight", TINY_EMBD, 1, wtype);
            LAYER("nextn.hnorm.weight", TINY_EMBD, 1, wtype);
            LAYER("nextn.shared_head_norm.weight", TINY_EMBD, 1, wtype);
        }
    }
#undef LAYER
#undef ADD
    int rc = pl_gguf_write_file(g, path) == PL_OK ? 0 : -1;
    pl_gguf_free(g);
    for (int i = 0; i < nb; i++) free(blocks[i]);
    return rc;
}

#endif
