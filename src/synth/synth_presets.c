/* synth_presets.c - the published configurations `pooled synth` can imitate.
 *
 * Each row is the model's Hugging Face config.json (hidden_size, num_hidden_layers,
 * num_attention_heads, num_key_value_heads, head_dim, intermediate_size, vocab_size,
 * max_position_embeddings, rope_theta, rms_norm_eps, tie_word_embeddings, rope_scaling):
 *   HuggingFaceTB/SmolLM2-135M, meta-llama/Llama-3.2-1B, Qwen/Qwen2.5-0.5B,
 *   Qwen/Qwen3-0.6B, Qwen/Qwen3-1.7B, Qwen/Qwen3-4B, Qwen/Qwen3-8B.
 * The mixture-of-experts and hybrid presets below say where each of their numbers comes
 * from. Like llama.cpp's converter with --no-mtp, the hybrids leave out the Qwen3.5
 * checkpoints' multi-token-prediction layer (mtp_num_hidden_layers 1) and the vision tower. */
#include <string.h>

#include "synth.h"

/* clang-format off */
/* A dense model's row (the fields the MoE and hybrid presets add stay zero). */
#define DENSE(preset, arch, name, size, layers, embd, ff, heads, kv, hdim, vocab, ctx, theta, eps, \
              tied, rfactor, rlow, rhigh, rctx, pre)                                              \
    {preset, arch, name, size, layers, embd, ff, heads, kv, hdim, vocab, ctx, theta, eps, tied,    \
     rfactor, rlow, rhigh, rctx, pre, .n_expert = 0}
static const pl_synth_config presets[] = {
    /*     preset          arch     name             size   layers embd   ff     heads kv  hdim vocab   ctx     theta     eps    tied */
    DENSE("smollm2-135m",  "llama", "SmolLM2 135M",  "135M", 30, 576,  1536,  9,  3,  64, 49152,  8192,   100000.f, 1e-5f, true,
     0, 0, 0, 0, "smollm"),
    DENSE("llama3.2-1b",   "llama", "Llama 3.2 1B",  "1B",   16, 2048, 8192,  32, 8,  64, 128256, 131072, 500000.f, 1e-5f, true,
     32.f, 1.f, 4.f, 8192, "llama-bpe"),
    DENSE("qwen2.5-0.5b",  "qwen2", "Qwen2.5 0.5B",  "0.5B", 24, 896,  4864,  14, 2,  64, 151936, 32768,  1e6f,     1e-6f, true,
     0, 0, 0, 0, "qwen2"),
    DENSE("qwen3-0.6b",    "qwen3", "Qwen3 0.6B",    "0.6B", 28, 1024, 3072,  16, 8,  128, 151936, 40960, 1e6f,     1e-6f, true,
     0, 0, 0, 0, "qwen2"),
    DENSE("qwen3-1.7b",    "qwen3", "Qwen3 1.7B",    "1.7B", 28, 2048, 6144,  16, 8,  128, 151936, 40960, 1e6f,     1e-6f, true,
     0, 0, 0, 0, "qwen2"),
    DENSE("qwen3-4b",      "qwen3", "Qwen3 4B",      "4B",   36, 2560, 9728,  32, 8,  128, 151936, 40960, 1e6f,     1e-6f, true,
     0, 0, 0, 0, "qwen2"),
    DENSE("qwen3-8b",      "qwen3", "Qwen3 8B",      "8B",   36, 4096, 12288, 32, 8,  128, 151936, 40960, 1e6f,     1e-6f, false,
     0, 0, 0, 0, "qwen2"),
    /* Qwen/Qwen3-30B-A3B config.json (Qwen3MoeForCausalLM): hidden_size 2048,
     * num_hidden_layers 48, num_attention_heads 32, num_key_value_heads 4, head_dim 128,
     * intermediate_size 6144 (only the feed_forward_length key: every layer is MoE,
     * decoder_sparse_step 1, mlp_only_layers []), num_experts 128, num_experts_per_tok 8,
     * moe_intermediate_size 768, norm_topk_prob true, vocab_size 151936,
     * max_position_embeddings 40960, rope_theta 1e6, rms_norm_eps 1e-6,
     * tie_word_embeddings false; as quoted from the config by a Qwen3-30B-A3B parameter
     * count walk-through (30.53B parameters, lm_head 2048 -> 151936) and by a benchmark's
     * QWEN3_30B_A3B_BASELINE (intermediate 6144, 40960 positions, theta 1e6; transformers'
     * Qwen3MoeConfig defaults are the same sizes), cross-checked with MindSpeed-RL's
     * qwen3_30b_a3b.yaml (48 layers, 128 experts, top 8, expert FFN 768, 4 query groups,
     * kv_channels 128, rotary base 1e6, untied). */
    {.preset = "qwen3-30b-a3b", .arch = "qwen3moe", .name = "Qwen3 30B A3B", .size_label = "30B-A3B",
     .n_layer = 48, .n_embd = 2048, .n_ff = 6144, .n_head = 32, .n_head_kv = 4, .head_dim = 128,
     .n_vocab = 151936, .n_ctx = 40960, .rope_theta = 1e6f, .rms_eps = 1e-6f, .tied = false,
     .tok_pre = "qwen2", .n_expert = 128, .n_expert_used = 8, .n_ff_exp = 768},
    /* Qwen/Qwen3.5-27B config.json, text_config (Qwen3_5ForConditionalGeneration,
     * model_type qwen3_5_text): hidden_size 5120, num_hidden_layers 64 (layer_types: three
     * linear_attention then one full_attention, full_attention_interval 4),
     * num_attention_heads 24, num_key_value_heads 4, head_dim 256, attn_output_gate true,
     * intermediate_size 17408, linear_num_key_heads 16, linear_num_value_heads 48,
     * linear_key_head_dim 128, linear_value_head_dim 128, linear_conv_kernel_dim 4,
     * vocab_size 248320, tie_word_embeddings false, max_position_embeddings 262144,
     * rms_norm_eps 1e-6, rope_parameters {rope_theta 1e7, partial_rotary_factor 0.25 (64 of
     * 256 dims), mrope_section [11, 11, 10], mrope_interleaved}. Cross-checked: THUDM/slime
     * scripts/models/qwen3.5-27B.sh (24 heads, 4 query groups, kv-channels 256, 64 layers,
     * hidden 5120, ffn 17408, rotary-percent 0.25, base 1e7, vocab 248320, untied), the
     * Qwen3_5Config defaults of Modular MAX (linear heads 16 key / 48 value of 128), and
     * the 27.78B parameters of the checkpoint's 55.56 GB bf16 safetensors index (26.9B here
     * without the vision tower and the MTP layer). The tokenizer's pre-tokenizer is
     * llama.cpp's "qwen35". */
    {.preset = "qwen3.5-27b", .arch = "qwen35", .name = "Qwen3.5 27B", .size_label = "27B",
     .n_layer = 64, .n_embd = 5120, .n_ff = 17408, .n_head = 24, .n_head_kv = 4, .head_dim = 256,
     .n_vocab = 248320, .n_ctx = 262144, .rope_theta = 1e7f, .rms_eps = 1e-6f, .tied = false,
     .tok_pre = "qwen35", .full_attn_interval = 4, .rope_dims = 64, .rope_sections = {11, 11, 10, 0},
     .ssm_conv = 4, .ssm_k_heads = 16, .ssm_v_heads = 48, .ssm_k_dim = 128, .ssm_v_dim = 128},
    /* Qwen/Qwen3.5-35B-A3B config.json, text_config (Qwen3_5MoeForConditionalGeneration,
     * model_type qwen3_5_moe_text): hidden_size 2048, num_hidden_layers 40
     * (full_attention_interval 4), num_attention_heads 16, num_key_value_heads 2, head_dim
     * 256, num_experts 256, num_experts_per_tok 8, moe_intermediate_size 512,
     * shared_expert_intermediate_size 512 (with its sigmoid gate), linear_num_key_heads 16,
     * linear_num_value_heads 32, linear_key_head_dim 128, linear_value_head_dim 128,
     * linear_conv_kernel_dim 4, vocab_size 248320, tie_word_embeddings false,
     * max_position_embeddings 262144, rms_norm_eps 1e-6, rope_parameters {rope_theta 1e7,
     * partial_rotary_factor 0.25, mrope_section [11, 11, 10]}. Cross-checked: THUDM/slime
     * scripts/models/qwen3.5-35B-A3B.sh (40 layers, hidden 2048, 16 heads, 2 query groups,
     * kv-channels 256, 256 experts top 8, expert FFN 512, shared expert 512 with gate,
     * linear-attention-freq 4, conv 4, key/value heads 16/32 of 128, vocab
     * 248320, untied, rotary-percent 0.25, base 1e7). */
    {.preset = "qwen3.5-35b-a3b", .arch = "qwen35moe", .name = "Qwen3.5 35B A3B",
     .size_label = "35B-A3B", .n_layer = 40, .n_embd = 2048, .n_head = 16, .n_head_kv = 2,
     .head_dim = 256, .n_vocab = 248320, .n_ctx = 262144, .rope_theta = 1e7f, .rms_eps = 1e-6f,
     .tied = false, .tok_pre = "qwen35", .n_expert = 256, .n_expert_used = 8, .n_ff_exp = 512,
     .n_ff_shexp = 512, .full_attn_interval = 4, .rope_dims = 64, .rope_sections = {11, 11, 10, 0},
     .ssm_conv = 4, .ssm_k_heads = 16, .ssm_v_heads = 32, .ssm_k_dim = 128, .ssm_v_dim = 128},
};
/* clang-format on */

enum { N_PRESETS = sizeof presets / sizeof presets[0] };

const pl_synth_config *pl_synth_preset(const char *arch, const char *name) {
    for (int i = 0; i < N_PRESETS; i++)
        if (!strcmp(presets[i].preset, name) && (!arch || !strcmp(presets[i].arch, arch)))
            return &presets[i];
    return NULL;
}

const pl_synth_config *pl_synth_preset_at(int i) {
    return i >= 0 && i < N_PRESETS ? &presets[i] : NULL;
}
