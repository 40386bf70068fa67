/* quantize.h - convert a GGUF file's weights to another format (what `pooled quantize` does).
 *
 * Which tensors change: the 2-D (and higher) ".weight" tensors, except a few llama.cpp also
 * leaves alone (norms, MoE routers, position/token-type embeddings, small SSM/RWKV
 * matrices). 1-D tensors and everything else are copied byte for byte. Metadata is copied
 * in order; general.quantization_version and general.file_type are set at the end, and
 * tensors are written in llama.cpp's order (non-layer tensors by name, then layer by layer
 * by name), so a run that makes llama-quantize's choices gives llama-quantize's file.
 *
 * The input is mapped, and the output is written tensor by tensor in bounded chunks of rows:
 * memory stays small whatever the model's size. */
#ifndef PL_FORMAT_QUANTIZE_H
#define PL_FORMAT_QUANTIZE_H

#include <stdbool.h>
#include <stdint.h>

#include "../base/status.h"

typedef struct {
    const char *pattern; /* POSIX extended regex, searched anywhere in the tensor name */
    uint32_t type;       /* pl_type to store matching tensors in */
} pl_quant_override;

typedef struct {
    /* llama.cpp's general.file_type id (see pl_quantize_file_type_from_name): its default
     * type (Q4_K for Q4_K_M) is the type of the weights; must be one we write */
    int file_type;
    /* per-tensor types: the first pattern that matches a quantizable tensor wins */
    const pl_quant_override *overrides;
    int n_overrides;
    /* false: llama-quantize's mixture rules for file_type apply (e.g. output.weight in
     * Q6_K; for Q4_K_M attn_v and ffn_down of some layers in Q6_K).
     * true: every quantized tensor gets the default type (llama-quantize --pure). */
    bool pure;
    /* Called with one line (no newline) for each decision the user should hear about: a
     * fallback type for a row length the type cannot hold, requantizing. May be NULL. */
    void (*note)(void *ctx, const char *line);
    /* Called after each tensor: index (0-based), count, bytes of the input read so far and
     * in all. May be NULL. */
    void (*progress)(void *ctx, int64_t i, int64_t n, uint64_t done, uint64_t total,
                     const char *name);
    void *ctx;
    /* Threads converting rows (0: one per online CPU, at most PL_QUANTIZE_MAX_THREADS).
     * The output does not depend on it. */
    int n_threads;
} pl_quantize_params;

#define PL_QUANTIZE_MAX_THREADS 32

/* Read in_path, write out_path. On failure the partial output file is removed. */
pl_status pl_quantize_file(const char *in_path, const char *out_path, const pl_quantize_params *p);

/* llama.cpp's general.file_type id for a name as llama-quantize takes it ("Q4_K_M",
 * "q8_0", "f16"; case-insensitive; "Q4_K" means Q4_K_M as in llama-quantize), or -1 if we
 * cannot write that file type. */
int pl_quantize_file_type_from_name(const char *name);

/* The default tensor type (pl_type) of a file type, or -1 if unknown. */
int pl_quantize_base_type(int file_type);

/* The names pl_quantize_file_type_from_name knows, space-separated (for usage text). */
const char *pl_quantize_file_type_names(void);

#endif
