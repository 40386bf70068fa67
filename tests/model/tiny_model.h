/* tiny_model.h - a few-kilobyte random-weight GGUF of the llama family (llama, qwen2 with
 * q/k/v biases, qwen3 with q/k norms, qwen3moe with q/k norms and TINY_EXPERTS experts of
 * which TINY_USED run per token) for tests that need a model of a given shape, and
 * the seed corpus of the model fuzzer. Header-only, included by test programs. */
#ifndef PL_TEST_TINY_MODEL_H
#define PL_TEST_TINY_MODEL_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format/gguf.h"
#include "format/quant.h"

enum { TINY_EMBD = 8, TINY_HEADS = 2, TINY_KV = 1, TINY_HD = 4, TINY_FF = 16, TINY_VOCAB = 16 };
enum { TINY_EXPERTS = 4, TINY_USED = 2, TINY_FF_EXP = 8 };

/* Deterministic values in [-0.5, 0.5). */
static inline void tiny_fill(float *v, int64_t n, uint32_t *seed) {
    for (int64_t i = 0; i < n; i++) {
        *seed = *seed * 1664525u + 1013904223u;
        v[i] = (float)(*seed >> 8) / 16777216.0f - 0.5f;
    }
}

/* Write a tiny model of `arch` with n_layer layers, weights of type wtype (F32 or F16),
 * to path. Returns 0 on success. */
static inline int tiny_model_write(const char *path, const char *arch, int n_layer,
                                   uint32_t wtype) {
    pl_gguf *g = pl_gguf_new();
    char key[96];
#define KEY(suffix) (snprintf(key, sizeof key, "%s.%s", arch, suffix), key)
    pl_gguf_set_str(g, "general.architecture", arch);
    pl_gguf_set_u32(g, KEY("block_count"), (uint32_t)n_layer);
    pl_gguf_set_u32(g, KEY("embedding_length"), TINY_EMBD);
    bool moe = !strcmp(arch, "qwen3moe"); /* no dense FFN, and no feed_forward_length */
    if (!moe) pl_gguf_set_u32(g, KEY("feed_forward_length"), TINY_FF);
    pl_gguf_set_u32(g, KEY("attention.head_count"), TINY_HEADS);
    pl_gguf_set_u32(g, KEY("attention.head_count_kv"), TINY_KV);
    pl_gguf_set_u32(g, KEY("context_length"), 64);
    pl_gguf_set_f32(g, KEY("attention.layer_norm_rms_epsilon"), 1e-6f);
    pl_gguf_set_f32(g, KEY("rope.freq_base"), 10000.0f);
    if (moe) {
        pl_gguf_set_u32(g, KEY("expert_count"), TINY_EXPERTS);
        pl_gguf_set_u32(g, KEY("expert_used_count"), TINY_USED);
        pl_gguf_set_u32(g, KEY("expert_feed_forward_length"), TINY_FF_EXP);
    }
#undef KEY
    /* every tensor's bytes live in one block freed at the end */
    enum { MAXT = 64 };
    void *blocks[MAXT];
    int nb = 0;
    uint32_t seed = 7;
    bool qwen2 = !strcmp(arch, "qwen2"), qwen3 = !strcmp(arch, "qwen3") || moe;
#define ADD(name, ne0, ne1, type) ADD3(name, ne0, ne1, 1, type)
#define ADD3(name, ne0, ne1, ne2, type)                                                            \
    do {                                                                                           \
        int64_t ne_[3] = {ne0, ne1, ne2};                                                          \
        float *f_ = malloc(sizeof(float) * (size_t)(ne0 * ne1 * ne2));                             \
        tiny_fill(f_, ne0 *ne1 *ne2, &seed);                                                       \
        uint32_t t_ = (ne1 == 1) ? PL_TYPE_F32 : (type);                                           \
        void *d_ = f_;                                                                             \
        if (t_ != PL_TYPE_F32) {                                                                   \
            d_ = malloc((size_t)pl_row_size(t_, ne0 * ne1 * ne2));                                 \
            pl_quant_row(t_, f_, d_, ne0 *ne1 *ne2);                                               \
            free(f_);                                                                              \
        }                                                                                          \
        blocks[nb++] = d_;                                                                         \
        pl_gguf_add_tensor(g, name, t_, ne2 > 1 ? 3 : ne1 == 1 ? 1 : 2, ne_, d_);                  \
    } while (0)
    ADD("token_embd.weight", TINY_EMBD, TINY_VOCAB, wtype);
    ADD("output_norm.weight", TINY_EMBD, 1, wtype);
    char nm[64];
    for (int l = 0; l < n_layer && nb < MAXT - 16; l++) {
#define LAYER(suffix, ne0, ne1) LAYER3(suffix, ne0, ne1, 1)
#define LAYER3(suffix, ne0, ne1, ne2)                                                              \
    do {                                                                                           \
        snprintf(nm, sizeof nm, "blk.%d.%s", l, suffix);                                           \
        ADD3(nm, ne0, ne1, ne2, wtype);                                                            \
    } while (0)
        LAYER("attn_norm.weight", TINY_EMBD, 1);
        LAYER("attn_q.weight", TINY_EMBD, TINY_HEADS * TINY_HD);
        LAYER("attn_k.weight", TINY_EMBD, TINY_KV * TINY_HD);
        LAYER("attn_v.weight", TINY_EMBD, TINY_KV * TINY_HD);
        if (qwen2) {
            LAYER("attn_q.bias", TINY_HEADS * TINY_HD, 1);
            LAYER("attn_k.bias", TINY_KV * TINY_HD, 1);
            LAYER("attn_v.bias", TINY_KV * TINY_HD, 1);
        }
        if (qwen3) {
            LAYER("attn_q_norm.weight", TINY_HD, 1);
            LAYER("attn_k_norm.weight", TINY_HD, 1);
        }
        LAYER("attn_output.weight", TINY_HEADS * TINY_HD, TINY_EMBD);
        LAYER("ffn_norm.weight", TINY_EMBD, 1);
        if (moe) {
            snprintf(nm, sizeof nm, "blk.%d.ffn_gate_inp.weight", l);
            ADD(nm, TINY_EMBD, TINY_EXPERTS, PL_TYPE_F32); /* the router stays f32 */
            LAYER3("ffn_gate_exps.weight", TINY_EMBD, TINY_FF_EXP, TINY_EXPERTS);
            LAYER3("ffn_up_exps.weight", TINY_EMBD, TINY_FF_EXP, TINY_EXPERTS);
            LAYER3("ffn_down_exps.weight", TINY_FF_EXP, TINY_EMBD, TINY_EXPERTS);
            continue;
        }
        LAYER("ffn_gate.weight", TINY_EMBD, TINY_FF);
        LAYER("ffn_up.weight", TINY_EMBD, TINY_FF);
        LAYER("ffn_down.weight", TINY_FF, TINY_EMBD);
#undef LAYER
#undef LAYER3
    }
#undef ADD
#undef ADD3
    int rc = pl_gguf_write_file(g, path) == PL_OK ? 0 : -1;
    pl_gguf_free(g);
    for (int i = 0; i < nb; i++) free(blocks[i]);
    return rc;
}

#endif
