/* gguf_hash.h - a model's identity: SHA-256 of each tensor's bytes, and of the whole model.
 *
 * A room's worker that has its own copy of the model proves it is the host's model by
 * comparing per-tensor hashes of the tensors it loads (only those: hashing a layer range
 * never reads the rest of the file) and the identity, one hash of
 *   - the metadata that affects the math: every key except general.* (names, licences,
 *     descriptions; general.architecture and general.alignment are kept) and tokenizer.*
 *     (the host alone tokenizes), in key order, with its type and value, and
 *   - the list of tensors in file order: name, type, shape, bytes and SHA-256 of the data.
 *
 * Which tensors a part of a model holds (pl_gguf_select, the rule pl_model_load follows):
 * blk.N.* for N in [first, last); token_embd.weight with the embedding, or with the head
 * when there is no output.weight (tied); output.weight and output_norm.weight with the
 * head, and the multi-token-prediction blocks (blk.N, N >= n_layer) too; any other tensor
 * (rope_freqs.weight) always.
 *
 * Hashing reads the tensors in place (the file's mapping) in pieces of PL_HASH_PIECE bytes,
 * so memory stays bounded whatever the file's size; a progress callback sees bytes done
 * and total. A cache file (opts.cache_path: the caller keys it by path, size and mtime)
 * keeps the hashes already computed; an unreadable or mismatched cache is recomputed. */
#ifndef PL_FORMAT_GGUF_HASH_H
#define PL_FORMAT_GGUF_HASH_H

#include <stdbool.h>
#include <stdint.h>

#include "gguf.h"

#define PL_HASH_PIECE     (UINT64_C(1) << 20) /* bytes hashed between progress calls */
#define PL_HASH_CACHE_MAX (64u << 20)         /* largest cache file read */

/* The values of pl_model_opts.ends (PL_ENDS_*, model.h; model.c asserts they agree). */
enum { PL_GGUF_ENDS_NONE = 1, PL_GGUF_ENDS_EMBED = 2, PL_GGUF_ENDS_HEAD = 4 };

/* A part of a model: layers [first, last) and its ends (resolved from the same arguments as
 * pl_model_opts: layer_first, layer_last, ends). */
typedef struct {
    int first, last;
    bool embed, head;
    int n_layer; /* the model's layers ({arch}.block_count less nextn_predict_layers) */
} pl_gguf_sel;

/* Resolve a range as pl_model_load does (PL_ENDS_* values; AUTO with (0, 0): everything).
 * Fails with one line for a range outside the model or one that selects nothing. */
pl_status pl_gguf_select(const pl_gguf *g, int layer_first, int layer_last, int ends,
                         pl_gguf_sel *out);
/* True when tensor i belongs to the part (sel NULL: every tensor does). */
bool pl_gguf_selected(const pl_gguf *g, const pl_gguf_sel *sel, int64_t i);

/* Bytes of the tensors each layer holds (out[l] for l < sel->n_layer: blk.l.*) and of the
 * rest (*ends: embedding, head, multi-token-prediction blocks, rope_freqs): what the plan
 * deals (pl_plan_model). sel from pl_gguf_select (its n_layer is used). */
void pl_gguf_layer_bytes(const pl_gguf *g, const pl_gguf_sel *sel, uint64_t *out, uint64_t *ends);

typedef struct {
    uint8_t sha[32];
    bool done; /* sha holds the hash of the tensor's bytes */
} pl_tensor_hash;

typedef struct {
    void (*progress)(void *ud, uint64_t done, uint64_t total);
    void *progress_ud;
    const char *cache_path; /* NULL: no cache */
} pl_hash_opts;

/* Hash the tensors of the part sel (NULL: all) into out[i] (pl_gguf_tensor_count entries;
 * others are left with done false). opts may be NULL. */
pl_status pl_gguf_hash_tensors(const pl_gguf *g, const pl_gguf_sel *sel, const pl_hash_opts *opts,
                               pl_tensor_hash *out);

/* The digest of the metadata that affects the math (see above). */
pl_status pl_gguf_meta_digest(const pl_gguf *g, uint8_t out[32]);

/* The model's identity from its metadata and every tensor's hash (all must be done: hashes
 * of a part may come from the host for the tensors not held here). */
pl_status pl_gguf_identity(const pl_gguf *g, const pl_tensor_hash *hashes, uint8_t out[32]);

/* The identity of a part (a room worker's layer range): the metadata digest, the range and
 * the name, type, shape, bytes and hash of every tensor the part holds, in file order (its
 * hashes from pl_gguf_hash_tensors with the same sel). Two files give the same part identity
 * exactly when the part's tensors and the math metadata are the same. */
pl_status pl_gguf_part_identity(const pl_gguf *g, const pl_gguf_sel *sel, const pl_tensor_hash *h,
                                uint8_t out[32]);

#endif
