/* synth.h - random-weight GGUFs with a real model's exact shapes and metadata.
 *
 * A preset is the published configuration of a model (hidden size, layers, heads, FFN,
 * vocabulary, RoPE, norm epsilon, tied embeddings). pl_synth_plan turns a configuration
 * into a pl_gguf holding the metadata and tensor infos that llama.cpp's converter would
 * write for that model (tensor names, shapes, key names), plus a tokenizer; pl_synth_write
 * streams the file out tensor by tensor with seeded random values, so a multi-GB model
 * never sits in memory and the same seed always gives the same bytes.
 *
 * The values are chosen so a forward pass stays finite: norm weights near 1, matrices
 * uniform in +-(0.87 / sqrt(row length)) (an output of about half the input's RMS), biases
 * small, and Llama 3's RoPE scaling factors computed as the converter does. The hybrid's
 * ssm_a (-exp(A_log)) is negative, -exp(uniform +-0.5), so its decay stays in (0, 1). */
#ifndef PL_SYNTH_SYNTH_H
#define PL_SYNTH_SYNTH_H

#include <stdbool.h>
#include <stdint.h>

#include "../format/gguf.h"

typedef struct {
    const char *preset; /* "qwen3-8b" */
    const char *arch;   /* GGUF architecture: llama, qwen2, qwen3, qwen3moe, qwen35, qwen35moe */
    const char *name;   /* general.name: the model the shapes come from */
    const char *size_label; /* general.size_label: "8B" */
    int n_layer, n_embd, n_ff, n_head, n_head_kv, head_dim, n_vocab, n_ctx;
    float rope_theta, rms_eps;
    bool tied; /* no output.weight: the model reuses token_embd */
    /* Llama 3 RoPE scaling (rope_scaling.rope_type "llama3"); factor 0 means none */
    float rope_factor, rope_low_freq, rope_high_freq;
    int rope_orig_ctx;
    const char *tok_pre; /* tokenizer.ggml.pre of the synthetic vocabulary */
    /* Mixture of experts (qwen3moe, qwen35moe): n_expert experts of FFN width n_ff_exp,
     * n_expert_used active per token; qwen35moe adds a shared expert of width n_ff_shexp.
     * n_ff is then only the feed_forward_length key (qwen3moe) or unused (qwen35moe). */
    int n_expert, n_expert_used, n_ff_exp, n_ff_shexp;
    /* Hybrid (qwen35, qwen35moe): layer l is full attention when (l + 1) % full_attn_interval
     * == 0, Gated DeltaNet otherwise (ssm_k_heads key heads and ssm_v_heads value heads of
     * ssm_k_dim / ssm_v_dim values, causal conv1d of ssm_conv taps). Full attention rotates
     * the first rope_dims values of each head (partial RoPE) with M-RoPE rope_sections. */
    int full_attn_interval, rope_dims, rope_sections[4];
    int ssm_conv, ssm_k_heads, ssm_v_heads, ssm_k_dim, ssm_v_dim;
} pl_synth_config;

/* The preset called `name`, or NULL. arch may be NULL (any architecture). */
const pl_synth_config *pl_synth_preset(const char *arch, const char *name);
/* Presets by index, 0..count-1 (for listing); NULL past the end. */
const pl_synth_config *pl_synth_preset_at(int i);

/* Tokens of the synthetic vocabulary before its padding: 256 byte tokens, then
 * <|endoftext|> (BOS), <|im_start|>, <|im_end|> (EOS). */
#define PL_SYNTH_MIN_VOCAB 259

typedef struct {
    uint32_t type; /* pl_type of the 2-D weight matrices (norms, biases stay F32) */
    /* Copy every tokenizer.* key from this GGUF, and size token_embd/output by its
     * tokenizer.ggml.tokens; NULL: write the synthetic byte-level vocabulary. */
    const pl_gguf *vocab_from;
    /* Told one line (no newline) per decision worth hearing (a fallback type, a vocabulary
     * size taken from vocab_from). May be NULL. */
    void (*note)(void *ctx, const char *line);
    void *ctx;
} pl_synth_opts;

/* Check c, and build the metadata and tensor infos (no data) of its GGUF into *out. */
pl_status pl_synth_plan(const pl_synth_config *c, const pl_synth_opts *o, pl_gguf **out);

/* Called after each chunk written: bytes of tensor data done and in all. */
typedef void (*pl_synth_progress)(void *ctx, uint64_t done, uint64_t total);

/* Write plan (from pl_synth_plan with the same c) to path with the values seed gives,
 * using n_threads threads (1 or more) to make them. On failure the partial file is
 * removed. */
pl_status pl_synth_write(const pl_gguf *plan, const pl_synth_config *c, uint64_t seed,
                         int n_threads, const char *path, pl_synth_progress progress, void *ctx);

/* Write plan with every tensor's bytes zero (norms too), as a sparse file: the full shapes
 * of a big model in no time and almost no disk, for shape and loader tests. Such a model
 * computes zeros; it is not for running. */
pl_status pl_synth_write_zeros(const pl_gguf *plan, const char *path);

/* The values pl_synth_write stores for tensor `name` of plan, rows [row0, row0 + n_rows),
 * as float32 before conversion to the tensor's type (for tests). */
pl_status pl_synth_values(const pl_gguf *plan, const pl_synth_config *c, uint64_t seed,
                          const char *name, int64_t row0, int64_t n_rows, float *out);

#endif
