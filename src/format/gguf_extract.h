/* gguf_extract.h - one part of a model as a GGUF of its own, and the pieces it is made of.
 *
 * A room's worker without the model file receives only the tensors of its layers (the
 * part: pl_gguf_select) in bounded pieces and keeps them as a valid GGUF that
 * pl_model_load opens with the same range: every metadata key of the source, the part's
 * tensors in the source's order. The host serves those pieces from its own mapped file
 * (pl_gguf_read_piece); locally the same function feeds the extraction.
 *
 * The file is written through pl_file_out (a temporary name in the target's folder,
 * renamed when complete): an interrupted or refused extraction leaves no file at the final
 * name. Each tensor's bytes are hashed as they arrive and checked against the expected hash
 * (pl_gguf_hash_tensors of the host) when the tensor is complete; a mismatch aborts. */
#ifndef PL_FORMAT_GGUF_EXTRACT_H
#define PL_FORMAT_GGUF_EXTRACT_H

#include <stddef.h>
#include <stdint.h>

#include "gguf_hash.h"

#define PL_PIECE_DEFAULT ((size_t)1 << 20)  /* bytes of a piece unless asked */
#define PL_PIECE_MAX     ((size_t)16 << 20) /* the most one piece may hold */

/* Copy bytes [off, off + len) of tensor i into buf, for a peer that holds the part sel
 * (NULL: the whole model). Refuses a tensor outside the part, a range past the tensor's
 * end and len > PL_PIECE_MAX, with one line. */
pl_status pl_gguf_read_piece(const pl_gguf *g, const pl_gguf_sel *sel, int64_t i, uint64_t off,
                             void *buf, size_t len);

/* Fill buf with bytes [off, off + len) of tensor i (of the header the extraction follows). */
typedef pl_status (*pl_piece_reader)(void *ud, int64_t i, uint64_t off, void *buf, size_t len);

typedef struct {
    pl_piece_reader read; /* NULL: pl_gguf_read_piece on the source itself */
    void *read_ud;
    size_t piece_bytes; /* 0: PL_PIECE_DEFAULT; at most PL_PIECE_MAX */
    void (*progress)(void *ud, uint64_t done, uint64_t total);
    void *progress_ud;
} pl_extract_opts;

/* Write the part sel of src to path. src gives the metadata and tensor infos (its data is
 * read only when opts->read is NULL); want[i] is the expected hash of each tensor of the
 * part (all must be done). opts may be NULL. */
pl_status pl_gguf_extract(const pl_gguf *src, const pl_gguf_sel *sel, const pl_tensor_hash *want,
                          const char *path, const pl_extract_opts *opts);

#endif
