/* cmd_synth.c - `pooled synth`: write a GGUF with random weights and a real model's shapes
 * (pooled_synth of pooled.h).
 *
 * The shapes and metadata come from a preset (src/synth/synth_presets.c); the values from
 * a seed. Big files are streamed; on a terminal the progress shows on stderr. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <pooled.h>

#include "args.h"
#include "commands.h"

#define MIN_VOCAB 259 /* 256 byte tokens and the three specials (pooled_synth_opts.n_vocab) */

static void usage(FILE *f) {
    fprintf(f,
            "usage: pooled synth --preset NAME [--arch ARCH] [--type TYPE] -o, --out OUT.gguf\n"
            "                    [--seed N] [--vocab-from FILE] [--layers N] [--vocab N]\n"
            "                    [--threads N] [--zeros]\n"
            "\n"
            "Write a GGUF with seeded random weights and the exact shapes and metadata of a\n"
            "real model (as llama.cpp's converter names them).\n"
            "  --preset NAME     the model to imitate (below)\n"
            "  --arch ARCH       llama, qwen2, qwen3, qwen3moe, qwen35 or qwen35moe; must\n"
            "                    match the preset (optional)\n"
            "  --type TYPE       type of the 2-D weights: f32, f16, bf16, q8_0, q4_0, ...\n"
            "                    (default f16); norms stay f32; matrices whose rows do not\n"
            "                    fit the type's block are stored as f16 (a note says so)\n"
            "  -o OUT            the file to write\n"
            "  --seed N          random seed (default 1): same seed, same bytes\n"
            "  --vocab-from FILE copy the tokenizer (every tokenizer.* key) from FILE; its\n"
            "                    token count becomes the vocabulary size\n"
            "  --layers N        use N layers instead of the preset's (smaller test files;\n"
            "                    qwen35*: a multiple of the full-attention interval)\n"
            "  --vocab N         vocabulary size of the synthetic tokenizer (>= %d)\n"
            "  --threads N       threads making the values (default 2)\n"
            "  --zeros           every weight zero, written as a sparse file: the exact\n"
            "                    shapes in no time and little disk (for shape and loader\n"
            "                    tests; such a model computes nothing useful)\n"
            "Without --vocab-from the tokenizer is byte-level BPE (tokenizer.ggml.model gpt2):\n"
            "256 byte tokens, <|endoftext|> (BOS), <|im_start|>, <|im_end|> (EOS), then\n"
            "[PADn] filler tokens up to the vocabulary size, no merges, a ChatML template.\n"
            "\npresets:\n",
            MIN_VOCAB);
    pooled_synth_preset p, *c = &p;
    for (int i = 0; !pooled_synth_preset_at(i, &p); i++) {
        fprintf(f,
                "  %-15s %-9s %2d layers, hidden %4d, heads %2d/%d, head_dim %3d, ffn %5d, vocab "
                "%6d%s\n",
                c->name, c->arch, c->n_layer, c->n_embd, c->n_head, c->n_head_kv, c->head_dim,
                c->n_ff, c->n_vocab, c->tied ? ", tied" : "");
        if (c->n_expert)
            fprintf(f, "  %27s %d experts of %d, %d used%s\n", "", c->n_expert, c->n_ff_exp,
                    c->n_expert_used, c->n_ff_shexp ? ", a shared expert" : "");
        if (c->full_attn_interval)
            fprintf(f, "  %27s full attention every %d layers, Gated DeltaNet %d/%d heads of %d\n",
                    "", c->full_attn_interval, c->ssm_k_heads, c->ssm_v_heads, c->ssm_v_dim);
    }
}

typedef struct {
    bool tty;
    double last; /* time of the last progress line */
    struct timespec start;
} progress_state;

static double seconds_since(const struct timespec *a) {
    struct timespec b;
    clock_gettime(CLOCK_MONOTONIC, &b);
    return (double)(b.tv_sec - a->tv_sec) + (double)(b.tv_nsec - a->tv_nsec) * 1e-9;
}

static void on_progress(void *ctx, uint64_t done, uint64_t total) {
    progress_state *p = ctx;
    if (!p->tty) return;
    double t = seconds_since(&p->start);
    if (done < total && t - p->last < 0.25) return;
    p->last = t;
    fprintf(stderr, "\rsynth: %.2f / %.2f GiB (%3.0f%%) %.0f s", (double)done / (1 << 30),
            (double)total / (1 << 30), total ? 100.0 * (double)done / (double)total : 100.0, t);
    if (done >= total) fputc('\n', stderr);
}

static void on_note(void *ctx, const char *line) {
    (void)ctx;
    printf("note: %s\n", line);
}

int cmd_synth(int argc, char **argv) {
    const char *preset = NULL, *arch = NULL, *type_name = "f16", *out = NULL, *vocab_path = NULL;
    const char *v;
    int64_t seed = 1, layers = 0, vocab = 0, threads = 2;
    bool zeros = false;
    for (int i = 1; i < argc; i++) {
        bool err = false;
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            return 0;
        }
        if (!strcmp(argv[i], "--zeros"))
            zeros = true;
        else if (arg_take(argc, argv, &i, "--preset", NULL, &v, &err))
            preset = v;
        else if (arg_take(argc, argv, &i, "--arch", NULL, &v, &err))
            arch = v;
        else if (arg_take(argc, argv, &i, "--type", NULL, &v, &err))
            type_name = v;
        else if (arg_take(argc, argv, &i, "--out", "-o", &v, &err))
            out = v;
        else if (arg_take(argc, argv, &i, "--vocab-from", NULL, &v, &err))
            vocab_path = v;
        else if (arg_take(argc, argv, &i, "--seed", NULL, &v, &err)) {
            if (!err && !arg_int("--seed", v, 0, INT64_MAX, &seed)) return 1;
        } else if (arg_take(argc, argv, &i, "--layers", NULL, &v, &err)) {
            if (!err && !arg_int("--layers", v, 1, 1000, &layers)) return 1;
        } else if (arg_take(argc, argv, &i, "--vocab", NULL, &v, &err)) {
            if (!err && !arg_int("--vocab", v, MIN_VOCAB, 1 << 22, &vocab)) return 1;
        } else if (arg_take(argc, argv, &i, "--threads", NULL, &v, &err)) {
            if (!err && !arg_int("--threads", v, 1, 64, &threads)) return 1;
        } else
            return die("synth: unknown argument '%s' (see pooled synth --help)", argv[i]);
        if (err) return 1;
    }
    if (!preset) return die("synth: --preset is required (see pooled synth --help for the list)");
    if (!out) return die("synth: -o OUT.gguf is required");
    pooled_synth_preset p = {0};
    int i = 0;
    while (!pooled_synth_preset_at(i, &p) && strcmp(p.name, preset)) i++;
    if (pooled_synth_preset_at(i, &p))
        return die("synth: unknown preset '%s' (see pooled synth --help)", preset);
    if (arch && strcmp(arch, p.arch))
        return die("synth: preset %s is a %s model, not %s", preset, p.arch, arch);
    pooled_synth_opts o = pooled_synth_opts_default();
    progress_state ps = {isatty(2) != 0, 0, {0, 0}};
    o.preset = preset, o.type = type_name, o.seed = (uint64_t)seed, o.vocab_from = vocab_path;
    o.n_layer = (int)layers, o.n_vocab = (int)vocab, o.n_threads = (int)threads;
    o.zeros = zeros, o.note = on_note, o.progress = zeros ? NULL : on_progress, o.user = &ps;
    if (vocab && vocab_path) return die("synth: --vocab and --vocab-from exclude each other");
    clock_gettime(CLOCK_MONOTONIC, &ps.start);
    if (pooled_synth(out, &o)) {
        if (ps.tty && !zeros) fputc('\n', stderr);
        return die("%s", pooled_last_error());
    }
    /* what was written, read back from the file */
    pooled_gguf *g;
    pooled_gguf_header h = {.size = sizeof h};
    if (pooled_gguf_open(out, &g) || pooled_gguf_get_header(g, &h))
        return die("synth: %s: wrote it but cannot read it back: %s", out, pooled_last_error());
    uint64_t params = 0, bytes = 0;
    for (int64_t t = 0; t < h.n_tensors; t++) {
        pooled_gguf_tensor x;
        if (pooled_gguf_tensor_at(g, t, &x)) break;
        params += (uint64_t)(x.ne[0] * x.ne[1] * x.ne[2] * x.ne[3]);
        bytes += x.nbytes;
    }
    pooled_gguf_close(g);
    printf("wrote %s: %s %s, %lld tensors, %llu parameters, %.3f GiB of weights in %.1f s\n", out,
           p.arch, p.name, (long long)h.n_tensors, (unsigned long long)params,
           (double)bytes / (1 << 30), seconds_since(&ps.start));
    return 0;
}
