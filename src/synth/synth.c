/* synth.c - the plan of a synthetic GGUF: metadata, tokenizer and tensor infos, named and
 * shaped as llama.cpp's convert_hf_to_gguf.py writes them for llama, qwen2, qwen3, qwen3moe
 * (experts stacked into 3-D ffn_*_exps), qwen35 and qwen35moe (the Gated DeltaNet hybrids).
 *
 * Tensor order follows the converter too: generated tensors (rope_freqs) first, then the
 * checkpoint's tensors in name order (lm_head, embed_tokens, each layer's tensors sorted by
 * their Hugging Face names, model.norm). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../format/quant.h"
#include "../format/quantize.h"
#include "synth.h"

/* A ChatML template (the format the synthetic vocabulary's special tokens are for). */
static const char chatml[] =
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] "
    "+ '<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ "
    "'<|im_start|>assistant\\n' "
    "}}{% endif %}";

static void note(const pl_synth_opts *o, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void note(const pl_synth_opts *o, const char *fmt, ...) {
    if (!o->note) return;
    char line[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    o->note(o->ctx, line);
}

static bool is_arch(const pl_synth_config *c, const char *a) {
    return !strcmp(c->arch, a);
}

/* qwen35 and qwen35moe: Gated DeltaNet layers with a full-attention layer every
 * full_attn_interval layers */
static bool hybrid(const pl_synth_config *c) {
    return is_arch(c, "qwen35") || is_arch(c, "qwen35moe");
}

static bool moe(const pl_synth_config *c) {
    return is_arch(c, "qwen3moe") || is_arch(c, "qwen35moe");
}

static pl_status check_config(const pl_synth_config *c) {
    static const char *archs[] = {"llama", "qwen2", "qwen3", "qwen3moe", "qwen35", "qwen35moe"};
    bool known = false;
    for (size_t i = 0; i < sizeof archs / sizeof archs[0]; i++) known |= is_arch(c, archs[i]);
    if (!known)
        return pl_fail(PL_ERR_ARG,
                       "synth: unknown architecture '%s' (llama, qwen2, qwen3, qwen3moe, qwen35, "
                       "qwen35moe)",
                       c->arch);
    /* qwen35moe has no dense FFN (no feed_forward_length) */
    if (c->n_layer < 1 || c->n_embd < 1 || (c->n_ff < 1 && !is_arch(c, "qwen35moe")) ||
        c->n_head < 1 || c->n_head_kv < 1 || c->head_dim < 2 || c->n_vocab < 1 || c->n_ctx < 1)
        return pl_fail(PL_ERR_ARG, "synth: every size of the configuration must be positive");
    if (c->n_head % c->n_head_kv)
        return pl_fail(PL_ERR_ARG, "synth: %d heads do not share %d kv heads evenly", c->n_head,
                       c->n_head_kv);
    if (c->head_dim % 2)
        return pl_fail(PL_ERR_ARG, "synth: head_dim %d is odd (RoPE pairs)", c->head_dim);
    /* qwen2 GGUFs carry no key_length: readers take n_embd / n_head */
    if (is_arch(c, "qwen2") && c->head_dim * c->n_head != c->n_embd)
        return pl_fail(PL_ERR_ARG, "synth: qwen2 needs head_dim = hidden / heads (%d / %d)",
                       c->n_embd, c->n_head);
    if (moe(c) && (c->n_expert < 1 || c->n_expert_used < 1 || c->n_expert_used > c->n_expert ||
                   c->n_ff_exp < 1 || (is_arch(c, "qwen35moe") && c->n_ff_shexp < 1)))
        return pl_fail(PL_ERR_ARG,
                       "synth: %s needs experts (%d, %d used) and positive expert FFN widths",
                       c->arch, c->n_expert, c->n_expert_used);
    if (hybrid(c)) {
        if (c->full_attn_interval < 1 || c->ssm_conv < 1 || c->ssm_k_heads < 1 ||
            c->ssm_v_heads < 1 || c->ssm_k_dim < 1 || c->ssm_v_dim < 1 || c->rope_dims < 2 ||
            c->rope_dims > c->head_dim || c->rope_dims % 2)
            return pl_fail(PL_ERR_ARG,
                           "synth: %s needs a full-attention interval, linear-attention sizes and "
                           "an even RoPE width of at most head_dim",
                           c->arch);
        /* whole groups of linear-attention layers and their full-attention layer */
        if (c->n_layer % c->full_attn_interval)
            return pl_fail(PL_ERR_ARG,
                           "synth: %s needs a layer count that is a multiple of its "
                           "full-attention interval %d, not %d",
                           c->arch, c->full_attn_interval, c->n_layer);
        if (c->ssm_v_heads % c->ssm_k_heads)
            return pl_fail(PL_ERR_ARG,
                           "synth: %d linear-attention value heads do not share %d key heads "
                           "evenly",
                           c->ssm_v_heads, c->ssm_k_heads);
    }
    return PL_OK;
}

/* GPT-2's byte-level alphabet: byte b as the text of its token (UTF-8). Printable bytes
 * stand for themselves; the others (controls, space, a few Latin-1 ones) are shifted to
 * U+0100 and up, in byte order. */
static void byte_token(int b, char out[4]) {
    int cp;
    if ((b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff)) {
        cp = b;
    } else {
        int k = 0; /* how many unprintable bytes come before b */
        for (int x = 0; x < b; x++)
            if (!((x >= 0x21 && x <= 0x7e) || (x >= 0xa1 && x <= 0xac) || (x >= 0xae && x <= 0xff)))
                k++;
        cp = 0x100 + k;
    }
    if (cp < 0x80) {
        out[0] = (char)cp;
        out[1] = 0;
    } else {
        out[0] = (char)(0xc0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3f));
        out[2] = 0;
    }
}

/* tokenizer.* for the synthetic vocabulary of n tokens (n >= PL_SYNTH_MIN_VOCAB). */
static pl_status synthetic_vocab(pl_gguf *g, const pl_synth_config *c, int n) {
    enum { BOS = 256, IM_START = 257, EOS = 258 };
    const size_t slot = 16; /* "[PAD151935]" and every byte token fit */
    char *text = malloc((size_t)n * slot);
    const char **tokens = malloc((size_t)n * sizeof *tokens);
    int32_t *types = malloc((size_t)n * sizeof *types);
    pl_status st = PL_OK;
    if (!text || !tokens || !types) {
        st = pl_fail(PL_ERR_NOMEM, "synth: out of memory for the vocabulary");
        goto done;
    }
    for (int i = 0; i < n; i++) {
        char *t = text + (size_t)i * slot;
        tokens[i] = t;
        if (i < 256) {
            byte_token(i, t);
            types[i] = 1; /* normal */
        } else if (i <= EOS) {
            static const char *special[] = {"<|endoftext|>", "<|im_start|>", "<|im_end|>"};
            snprintf(t, slot, "%s", special[i - 256]);
            types[i] = 3; /* control */
        } else {
            snprintf(t, slot, "[PAD%d]", i);
            types[i] = 5; /* unused */
        }
    }
    if (!st) st = pl_gguf_set_str(g, "tokenizer.ggml.model", "gpt2");
    if (!st) st = pl_gguf_set_str(g, "tokenizer.ggml.pre", c->tok_pre ? c->tok_pre : "default");
    if (!st) st = pl_gguf_set_str_arr(g, "tokenizer.ggml.tokens", tokens, (uint64_t)n);
    if (!st)
        st = pl_gguf_set_arr(g, "tokenizer.ggml.token_type", PL_GGUF_INT32, types, (uint64_t)n);
    if (!st) st = pl_gguf_set_str_arr(g, "tokenizer.ggml.merges", NULL, 0);
    if (!st) st = pl_gguf_set_u32(g, "tokenizer.ggml.bos_token_id", BOS);
    if (!st) st = pl_gguf_set_u32(g, "tokenizer.ggml.eos_token_id", EOS);
    if (!st) st = pl_gguf_set_u32(g, "tokenizer.ggml.padding_token_id", BOS);
    if (!st) st = pl_gguf_set_bool(g, "tokenizer.ggml.add_bos_token", !strcmp(c->arch, "llama"));
    if (!st) st = pl_gguf_set_str(g, "tokenizer.chat_template", chatml);
done:
    free(text);
    free(tokens);
    free(types);
    return st;
}

/* Copy every tokenizer.* key of src; *n_vocab = its number of tokens. */
static pl_status copy_vocab(pl_gguf *g, const pl_gguf *src, int *n_vocab) {
    const pl_gguf_value *tok = pl_gguf_get(src, "tokenizer.ggml.tokens");
    if (!tok || tok->type != PL_GGUF_ARRAY || tok->arr.elem_type != PL_GGUF_STRING ||
        tok->arr.count == 0 || tok->arr.count > (1u << 30))
        return pl_fail(PL_ERR_FORMAT, "synth: --vocab-from file has no tokenizer.ggml.tokens");
    *n_vocab = (int)tok->arr.count;
    for (int64_t i = 0; i < pl_gguf_kv_count(src); i++) {
        const pl_gguf_kv *kv = pl_gguf_kv_at(src, i);
        if (kv->key.len < 10 || memcmp(kv->key.ptr, "tokenizer.", 10)) continue;
        char key[256];
        if (kv->key.len >= sizeof key || memchr(kv->key.ptr, 0, kv->key.len)) continue;
        memcpy(key, kv->key.ptr, kv->key.len);
        key[kv->key.len] = 0;
        pl_status st = pl_gguf_set_value(g, key, &kv->value);
        if (st) return st;
    }
    return PL_OK;
}

/* llama.cpp's general.file_type for a file whose matrices are `type` (q4_k: Q4_K_M, as
 * llama-quantize reads "Q4_K"), or -1 when we cannot write that type. */
static int file_type_of(uint32_t type) {
    const pl_type_traits *tr = pl_type_get(type);
    return tr && tr->quant ? pl_quantize_file_type_from_name(tr->name) : -1;
}

/* The keys in the order llama.cpp's converter writes them for c->arch (see the fixtures in
 * shared/fixtures/hf: qwen3moe, qwen35 and qwen35moe add theirs among the common ones). */
static pl_status arch_metadata(pl_gguf *g, const pl_synth_config *c, int n_vocab, uint32_t type) {
    char key[96];
    pl_status st = PL_OK;
#define ARCH_U32(suffix, v)                                                                        \
    (snprintf(key, sizeof key, "%s." suffix, c->arch), pl_gguf_set_u32(g, key, (uint32_t)(v)))
#define ARCH_F32(suffix, v)                                                                        \
    (snprintf(key, sizeof key, "%s." suffix, c->arch), pl_gguf_set_f32(g, key, v))
    char name[96];
    snprintf(name, sizeof name, "synthetic %s", c->name);
    if (!st) st = pl_gguf_set_str(g, "general.architecture", c->arch);
    if (!st) st = pl_gguf_set_str(g, "general.type", "model");
    if (!st) st = pl_gguf_set_str(g, "general.name", name);
    if (!st) st = pl_gguf_set_str(g, "general.size_label", c->size_label);
    if (!st) st = ARCH_U32("block_count", c->n_layer);
    if (!st) st = ARCH_U32("context_length", c->n_ctx);
    if (!st) st = ARCH_U32("embedding_length", c->n_embd);
    if (!st && !is_arch(c, "qwen35moe")) st = ARCH_U32("feed_forward_length", c->n_ff);
    if (!st) st = ARCH_U32("attention.head_count", c->n_head);
    if (!st) st = ARCH_U32("attention.head_count_kv", c->n_head_kv);
    if (!st && hybrid(c)) {
        snprintf(key, sizeof key, "%s.rope.dimension_sections", c->arch);
        st = pl_gguf_set_arr(g, key, PL_GGUF_INT32, c->rope_sections, 4);
    }
    if (!st) st = ARCH_F32("rope.freq_base", c->rope_theta);
    if (!st) st = ARCH_F32("attention.layer_norm_rms_epsilon", c->rms_eps);
    if (!st && moe(c)) st = ARCH_U32("expert_count", c->n_expert);
    if (!st && moe(c)) st = ARCH_U32("expert_used_count", c->n_expert_used);
    /* the converter writes key/value lengths when config.json names head_dim (all but
     * qwen2) */
    if (!is_arch(c, "qwen2")) {
        if (!st) st = ARCH_U32("attention.key_length", c->head_dim);
        if (!st) st = ARCH_U32("attention.value_length", c->head_dim);
    }
    if (!st) st = pl_gguf_set_u32(g, "general.file_type", (uint32_t)file_type_of(type));
    if (!st && moe(c)) st = ARCH_U32("expert_feed_forward_length", c->n_ff_exp);
    if (!st && is_arch(c, "qwen35moe"))
        st = ARCH_U32("expert_shared_feed_forward_length", c->n_ff_shexp);
    if (hybrid(c)) {
        if (!st) st = ARCH_U32("ssm.conv_kernel", c->ssm_conv);
        if (!st) st = ARCH_U32("ssm.state_size", c->ssm_k_dim);
        if (!st) st = ARCH_U32("ssm.group_count", c->ssm_k_heads);
        if (!st) st = ARCH_U32("ssm.time_step_rank", c->ssm_v_heads);
        if (!st) st = ARCH_U32("ssm.inner_size", c->ssm_v_heads * c->ssm_v_dim);
        if (!st) st = ARCH_U32("full_attention_interval", c->full_attn_interval);
        if (!st) st = ARCH_U32("rope.dimension_count", c->rope_dims);
    }
    if (is_arch(c, "llama")) {
        if (!st) st = ARCH_U32("vocab_size", n_vocab);
        if (!st) st = ARCH_U32("rope.dimension_count", c->head_dim);
    }
    if (!st) st = pl_gguf_set_u32(g, "general.quantization_version", 2);
#undef ARCH_U32
#undef ARCH_F32
    return st;
}

typedef struct {
    pl_gguf *g;
    uint32_t type;
    const pl_synth_opts *o;
    int fallbacks; /* 2-D tensors stored as f16 instead of type */
    int64_t fallback_ne0;
    pl_status st;
} adder;

/* Add tensor `name` of n_dims dimensions ne. Matrices (quant) take the file's type, or f16
 * when their rows do not fit its block; the rest is F32. */
static void add_t(adder *a, const char *name, bool quant, uint32_t n_dims, int64_t ne0, int64_t ne1,
                  int64_t ne2) {
    if (a->st) return;
    uint32_t t = PL_TYPE_F32;
    if (quant) {
        t = a->type;
        if (ne0 % pl_type_get(t)->block_size) {
            t = PL_TYPE_F16;
            a->fallbacks++;
            a->fallback_ne0 = ne0;
        }
    }
    int64_t ne[3] = {ne0, ne1, ne2};
    a->st = pl_gguf_add_tensor(a->g, name, t, n_dims, ne, NULL);
}

/* a vector (F32) when ne1 is 0, else a matrix of the file's type */
static void add(adder *a, const char *name, int64_t ne0, int64_t ne1) {
    add_t(a, name, ne1 != 0, ne1 ? 2 : 1, ne0, ne1, 1);
}

/* F32 whatever the file's type: the conv1d taps and the MoE routers */
static void add_f32(adder *a, const char *name, int64_t ne0, int64_t ne1) {
    add_t(a, name, false, 2, ne0, ne1, 1);
}

/* one matrix per expert, stacked: [ne0, ne1, n_expert] */
static void add_experts(adder *a, const char *name, int64_t ne0, int64_t ne1, int64_t n_expert) {
    add_t(a, name, true, 3, ne0, ne1, n_expert);
}

#define L(suffix) (snprintf(n, sizeof n, "blk.%d." suffix, il), n)

/* The FFN part of layer il, in the converter's order (its checkpoint names sorted: mlp.*
 * then post_attention_layernorm; qwen3moe's norm is ffn_norm). */
static void add_ffn(adder *a, const pl_synth_config *c, int il) {
    char n[64];
    if (!moe(c)) {
        add(a, L("ffn_down.weight"), c->n_ff, c->n_embd);
        add(a, L("ffn_gate.weight"), c->n_embd, c->n_ff);
        add(a, L("ffn_up.weight"), c->n_embd, c->n_ff);
    } else {
        add_experts(a, L("ffn_down_exps.weight"), c->n_ff_exp, c->n_embd, c->n_expert);
        add_experts(a, L("ffn_gate_exps.weight"), c->n_embd, c->n_ff_exp, c->n_expert);
        add_experts(a, L("ffn_up_exps.weight"), c->n_embd, c->n_ff_exp, c->n_expert);
        add_f32(a, L("ffn_gate_inp.weight"), c->n_embd, c->n_expert);
    }
    if (is_arch(c, "qwen35moe")) {
        add(a, L("ffn_down_shexp.weight"), c->n_ff_shexp, c->n_embd);
        add(a, L("ffn_gate_shexp.weight"), c->n_embd, c->n_ff_shexp);
        add(a, L("ffn_up_shexp.weight"), c->n_embd, c->n_ff_shexp);
        add_f32(a, L("ffn_gate_inp_shexp.weight"), c->n_embd, 1);
    }
    add(a, hybrid(c) ? L("post_attention_norm.weight") : L("ffn_norm.weight"), c->n_embd, 0);
}

/* Attention: the hybrid's full-attention attn_q also holds the output gate (2 x the
 * query width); qwen2 has q/k/v biases, qwen3* q/k norms. */
static void add_attention(adder *a, const pl_synth_config *c, int il) {
    char n[64];
    int64_t q = (int64_t)c->n_head * c->head_dim, kv = (int64_t)c->n_head_kv * c->head_dim;
    bool qwen2 = is_arch(c, "qwen2"), qk_norm = !qwen2 && !is_arch(c, "llama");
    if (qk_norm) add(a, L("attn_k_norm.weight"), c->head_dim, 0);
    if (qwen2) add(a, L("attn_k.bias"), kv, 0);
    add(a, L("attn_k.weight"), c->n_embd, kv);
    add(a, L("attn_output.weight"), q, c->n_embd);
    if (qk_norm) add(a, L("attn_q_norm.weight"), c->head_dim, 0);
    if (qwen2) add(a, L("attn_q.bias"), q, 0);
    add(a, L("attn_q.weight"), c->n_embd, hybrid(c) ? 2 * q : q);
    if (qwen2) add(a, L("attn_v.bias"), kv, 0);
    add(a, L("attn_v.weight"), c->n_embd, kv);
}

/* Gated DeltaNet: A_log, conv1d, dt_bias, in_proj_a/b/qkv/z, norm, out_proj, as
 * ssm_a, ssm_conv1d [taps, conv channels], ssm_dt.bias, ssm_alpha, ssm_beta, attn_qkv,
 * attn_gate, ssm_norm [value head dim], ssm_out. */
static void add_deltanet(adder *a, const pl_synth_config *c, int il) {
    char n[64];
    int64_t v = (int64_t)c->ssm_v_heads * c->ssm_v_dim;
    int64_t conv = 2 * (int64_t)c->ssm_k_heads * c->ssm_k_dim + v; /* q, k and v channels */
    add(a, L("ssm_a"), c->ssm_v_heads, 0);
    add_f32(a, L("ssm_conv1d.weight"), c->ssm_conv, conv);
    add(a, L("ssm_dt.bias"), c->ssm_v_heads, 0);
    add(a, L("ssm_alpha.weight"), c->n_embd, c->ssm_v_heads);
    add(a, L("ssm_beta.weight"), c->n_embd, c->ssm_v_heads);
    add(a, L("attn_qkv.weight"), c->n_embd, conv);
    add(a, L("attn_gate.weight"), c->n_embd, v);
    add(a, L("ssm_norm.weight"), c->ssm_v_dim, 0);
    add(a, L("ssm_out.weight"), v, c->n_embd);
}

/* Layer il in the converter's order: its checkpoint's names sorted (input_layernorm,
 * linear_attn.*, mlp.*, post_attention_layernorm, self_attn.*). */
static void add_layer(adder *a, const pl_synth_config *c, int il) {
    char n[64];
    add(a, L("attn_norm.weight"), c->n_embd, 0);
    bool full = !hybrid(c) || (il + 1) % c->full_attn_interval == 0;
    if (!full) add_deltanet(a, c, il);
    add_ffn(a, c, il);
    if (full) add_attention(a, c, il);
}
#undef L

pl_status pl_synth_plan(const pl_synth_config *c, const pl_synth_opts *o, pl_gguf **out) {
    *out = NULL;
    pl_status st = check_config(c);
    if (st) return st;
    const pl_type_traits *tr = pl_type_get(o->type);
    if (file_type_of(o->type) < 0)
        return pl_fail(PL_ERR_ARG, "synth: cannot write %s weights",
                       tr ? tr->name : "unknown-type");
    pl_gguf *g = pl_gguf_new();
    if (!g) return pl_fail(PL_ERR_NOMEM, "synth: out of memory");

    int n_vocab = c->n_vocab;
    pl_gguf *tok = pl_gguf_new(); /* tokenizer keys go last, as the converter writes them */
    if (!tok)
        st = pl_fail(PL_ERR_NOMEM, "synth: out of memory");
    else if (o->vocab_from)
        st = copy_vocab(tok, o->vocab_from, &n_vocab);
    else if (n_vocab < PL_SYNTH_MIN_VOCAB)
        st = pl_fail(PL_ERR_ARG, "synth: the synthetic vocabulary needs at least %d tokens, not %d",
                     PL_SYNTH_MIN_VOCAB, n_vocab);
    else
        st = synthetic_vocab(tok, c, n_vocab);
    if (!st && n_vocab != c->n_vocab)
        note(o, "vocabulary of %d tokens from --vocab-from (the preset has %d): %s", n_vocab,
             c->n_vocab, c->tied ? "token_embd uses it" : "token_embd and output use it");

    if (!st) st = arch_metadata(g, c, n_vocab, o->type);
    for (int64_t i = 0; !st && i < pl_gguf_kv_count(tok); i++) {
        const pl_gguf_kv *kv = pl_gguf_kv_at(tok, i);
        char key[256];
        snprintf(key, sizeof key, "%.*s", (int)kv->key.len, kv->key.ptr);
        st = pl_gguf_set_value(g, key, &kv->value);
    }
    pl_gguf_free(tok);

    adder a = {g, o->type, o, 0, 0, st};
    if (c->rope_factor > 0) add(&a, "rope_freqs.weight", c->head_dim / 2, 0);
    if (!c->tied) add(&a, "output.weight", c->n_embd, n_vocab);
    add(&a, "token_embd.weight", c->n_embd, n_vocab);
    for (int il = 0; il < c->n_layer; il++) add_layer(&a, c, il);
    add(&a, "output_norm.weight", c->n_embd, 0);
    st = a.st;
    if (!st && a.fallbacks)
        note(o,
             "%d matrices are stored as f16: their rows (e.g. %lld) are not a multiple of "
             "%s's block of %d",
             a.fallbacks, (long long)a.fallback_ne0, tr->name, tr->block_size);
    if (st) {
        pl_gguf_free(g);
        return st;
    }
    *out = g;
    return PL_OK;
}
