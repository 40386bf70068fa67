/* synth_presets.c - the published configurations `pooled synth` can imitate.
 *
 * Each row is the model's Hugging Face config.json (hidden_size, num_hidden_layers,
 * num_attention_heads, num_key_value_heads, head_dim, intermediate_size, vocab_size,
 * max_position_embeddings, rope_theta, rms_norm_eps, tie_word_embeddings, rope_scaling):
 *   HuggingFaceTB/SmolLM2-135M, meta-llama/Llama-3.2-1B, Qwen/Qwen2.5-0.5B,
 *   Qwen/Qwen3-0.6B, Qwen/Qwen3-1.7B, Qwen/Qwen3-4B, Qwen/Qwen3-8B. */
#include <string.h>

#include "synth.h"

/* clang-format off */
static const pl_synth_config presets[] = {
    /* preset          arch     name             size   layers embd   ff     heads kv  hdim vocab   ctx     theta     eps    tied */
    {"smollm2-135m",  "llama", "SmolLM2 135M",  "135M", 30, 576,  1536,  9,  3,  64, 49152,  8192,   100000.f, 1e-5f, true,
     0, 0, 0, 0, "smollm"},
    {"llama3.2-1b",   "llama", "Llama 3.2 1B",  "1B",   16, 2048, 8192,  32, 8,  64, 128256, 131072, 500000.f, 1e-5f, true,
     32.f, 1.f, 4.f, 8192, "llama-bpe"},
    {"qwen2.5-0.5b",  "qwen2", "Qwen2.5 0.5B",  "0.5B", 24, 896,  4864,  14, 2,  64, 151936, 32768,  1e6f,     1e-6f, true,
     0, 0, 0, 0, "qwen2"},
    {"qwen3-0.6b",    "qwen3", "Qwen3 0.6B",    "0.6B", 28, 1024, 3072,  16, 8,  128, 151936, 40960, 1e6f,     1e-6f, true,
     0, 0, 0, 0, "qwen2"},
    {"qwen3-1.7b",    "qwen3", "Qwen3 1.7B",    "1.7B", 28, 2048, 6144,  16, 8,  128, 151936, 40960, 1e6f,     1e-6f, true,
     0, 0, 0, 0, "qwen2"},
    {"qwen3-4b",      "qwen3", "Qwen3 4B",      "4B",   36, 2560, 9728,  32, 8,  128, 151936, 40960, 1e6f,     1e-6f, true,
     0, 0, 0, 0, "qwen2"},
    {"qwen3-8b",      "qwen3", "Qwen3 8B",      "8B",   36, 4096, 12288, 32, 8,  128, 151936, 40960, 1e6f,     1e-6f, false,
     0, 0, 0, 0, "qwen2"},
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
