/* model.h - a transformer read from a GGUF and run through the backend seam.
 *
 * pl_model holds the configuration and the weights (backend buffers wrapping the file's
 * tensors); pl_state holds everything one sequence needs while it runs: the KV cache and
 * the activation buffers. The forward pass is split so that a caller can run any layer
 * range on its own (the room runs layers k..m on one device):
 *
 *     ids --pl_model_embed--> hidden --pl_model_layers[first,last)--> hidden
 *         --pl_model_head--> logits
 *
 * The state's buffers are backend buffers: the ids, the hidden state and the logits can be
 * read or written with pl_be_read/pl_be_write, and an argmax can feed the next token's id
 * without the host in between. The model code never names a backend. */
#ifndef PL_MODEL_MODEL_H
#define PL_MODEL_MODEL_H

#include <stdbool.h>
#include <stdint.h>

#include "../backend/backend.h"
#include "../format/gguf.h"

typedef struct pl_model pl_model;
typedef struct pl_state pl_state;

/* What a loaded model is, for reports and for the runtime. */
typedef struct {
    char arch[32]; /* general.architecture: "llama", "qwen2", "qwen3", "qwen3moe", ... */
    char name[64]; /* general.name, or "" */
    int n_vocab;
    int n_embd;
    int n_layer;
    int n_ctx_train;       /* context the model was trained with */
    int n_expert;          /* experts per mixture-of-experts layer, 0: dense */
    int n_expert_used;     /* experts each token runs through (MoE) */
    int64_t n_params;      /* values in all weight tensors */
    uint64_t weight_bytes; /* bytes of all weight tensors in the file */
    uint64_t loaded_bytes; /* bytes of the weight tensors loaded: the layers and ends asked
                              (what a state's memory check leaves room for) */
    uint64_t decode_bytes; /* weight bytes one decoded token reads: of the loaded layers, the
                              experts it runs (not all), one embedding row unless tied,
                              not the multi-token-prediction block */
    char weight_type[16];  /* the format holding most of the weight values ("q4_0") */
    int layer_first;       /* the layers loaded: [layer_first, layer_last) */
    int layer_last;
    bool has_embed;     /* the token embedding is loaded (layer_first == 0, or asked) */
    bool has_head;      /* the final norm and output matrix are (layer_last == n_layer, or
                           asked: pl_model_opts.ends) */
    bool has_draft;     /* a multi-token-prediction (MTP) block is loaded (with the head):
                           pl_model_draft can run */
    char nonfinite[64]; /* the first weight tensor holding NaN or Inf values, or "" (its
                           outputs will be meaningless: the caller should say so) */
} pl_model_info;

typedef struct {
    /* Called as tensors are prepared, with bytes done and total (may be NULL). */
    void (*progress)(void *ud, uint64_t done, uint64_t total);
    void *progress_ud;
    /* Read every weight page once while loading, so the disk reads happen here (with
     * progress) rather than in the first forward pass. */
    bool prefault;
    /* Load only layers [layer_first, layer_last) (both 0: all), with the embedding only
     * when the range starts at 0 and the head only when it ends at the last layer: one
     * device's part of a model split across several. */
    int layer_first, layer_last;
    /* Which ends to load. PL_ENDS_AUTO (0, the default): as the range says, above.
     * Otherwise exactly the ends named, whatever the range: PL_ENDS_EMBED | PL_ENDS_HEAD
     * (a room's host: the embedding and the head, with some or none of the layers) or
     * PL_ENDS_NONE (a worker: layers only); and the range is then taken as written,
     * [layer_first, layer_last) with layer_first <= layer_last <= n_layer, empty when
     * equal (0, 0 too), as long as something is loaded. */
    int ends;
} pl_model_opts;

enum { PL_ENDS_AUTO = 0, PL_ENDS_NONE = 1, PL_ENDS_EMBED = 2, PL_ENDS_HEAD = 4 };

/* Read the architecture, configuration and weights of g. The GGUF (and its mapping) must
 * outlive the model: weights are views of it. Fails with a one-line reason for an unknown
 * architecture, a missing tensor, a tensor of the wrong shape or an unreadable format. */
pl_status pl_model_load(const pl_gguf *g, pl_backend *be, const pl_model_opts *opts,
                        pl_model **out);
void pl_model_free(pl_model *m);
const pl_model_info *pl_model_get_info(const pl_model *m);
pl_backend *pl_model_backend(const pl_model *m);

typedef struct {
    int n_ctx;        /* KV cache rows (positions) */
    uint32_t kv_type; /* PL_TYPE_F16, PL_TYPE_F32 or PL_TYPE_Q8_0 (int8, an f16 scale per 32) */
    int n_batch;      /* most tokens one forward call may take */
    int n_logits;     /* most rows of logits one call may produce (1: last token only) */
    /* Recurrent models (qwen35): a pl_model_layers call of at most n_snap tokens keeps the
     * state after each of them, so pl_state_rewind can go back to any of those positions
     * (speculative decoding, the room). 0: none kept; at most n_batch. Costs n_snap copies
     * of every recurrent layer's state; attention-only models ignore it. */
    int n_snap;
    /* Run the model's draft block (has_draft) after every pl_model_forward, so that
     * pl_model_draft can draft from the positions run: its own KV cache (n_ctx rows) and
     * the last pass's hidden rows. Refused for a model without the block. */
    bool draft;
    /* Cache slots (llama-family models, f16 or f32 caches): n_slots > 0 makes every layer's
     * caches hold n_slots sequences of n_ctx positions (slot s's position p at row
     * s * n_ctx + p), for a batch state that steps them together (pl_model_forward_batch:
     * one RoPE, cache store and attention for all columns). slot_of (such a state, of the
     * same model, n_ctx and kv_type) gives this state slot `slot` of its caches instead of
     * caches of its own; it must outlive this state. */
    int n_slots;
    const pl_state *slot_of;
    int slot;
} pl_state_opts;

/* n_ctx 4096 capped at the training context, f16 cache, batch 512 (capped at n_ctx), 1 logit
 * row, no snapshots. */
pl_state_opts pl_state_opts_default(const pl_model *m);

pl_status pl_state_new(const pl_model *m, const pl_state_opts *o, pl_state **out);
void pl_state_free(pl_state *s);
const pl_state_opts *pl_state_get_opts(const pl_state *s);
/* Bytes of backend memory the state holds (KV cache and activations). */
int64_t pl_state_bytes(const pl_state *s);

/* The state's buffers: ids I32 [n_batch]; hidden F32 [n_batch, n_embd];
 * logits F32 [n_logits, n_vocab]. */
pl_buf *pl_state_ids(pl_state *s);
pl_buf *pl_state_hidden(pl_state *s);
pl_buf *pl_state_logits(pl_state *s);

/* A state holds KV caches (and recurrent states) for the model's loaded layers only. */

/* Rewinding: make the state hold exactly the first n_past positions again, so the next
 * pl_model_layers call runs at pos0 = n_past. A KV cache needs nothing (later positions
 * are overwritten), so attention-only models can always rewind. A recurrent state (the
 * Gated DeltaNet layers of qwen35) cannot be undone: it can go to n_past when that is
 * where it is now, 0 (a fresh start), or a position whose state the last layers call kept
 * (opts n_snap) and that later calls have not replaced. pl_state_can_rewind says whether
 * pl_state_rewind will succeed; pl_state_rewind fails with a one-line reason otherwise
 * and leaves the state as it was. 0 <= n_past <= n_ctx. */
bool pl_state_can_rewind(const pl_state *s, int64_t n_past);
pl_status pl_state_rewind(pl_state *s, int64_t n_past);
/* Whether the state holds KV caches only: any rewind succeeds and changes nothing but
 * where the next call runs, so a layers call whose work never ran (a dropped prepared
 * pass, backend.h) leaves nothing to undo. */
bool pl_state_rewinds_free(const pl_state *s);

/* hidden[0..n) = embeddings of ids[0..n) (the ids buffer). Needs has_embed. */
pl_status pl_model_embed(const pl_model *m, pl_state *s, int64_t n);
/* Run layers [first, last) (within the loaded ones) over hidden rows 0..n-1 at positions
 * pos0..pos0+n-1, storing their keys and values in the cache. Every position before pos0
 * must already be cached for these layers. A recurrent layer's state must be at pos0
 * (else a one-line error, see pl_state_rewind); pos0 == 0 starts it afresh. */
pl_status pl_model_layers(const pl_model *m, pl_state *s, int64_t n, int64_t pos0, int first,
                          int last);
/* Final norm and output matrix: logits of hidden rows 0..n-1 (all_rows, n <= n_logits)
 * or of row n-1 only (into logits row 0). Needs has_head. */
pl_status pl_model_head(const pl_model *m, pl_state *s, int64_t n, bool all_rows);

/* The whole pass for host ids: write ids, embed, every layer, head (a whole model only).
 * 1 <= n <= n_batch and pos0 + n <= n_ctx, else a one-line error. */
pl_status pl_model_forward(const pl_model *m, pl_state *s, const int32_t *ids, int64_t n,
                           int64_t pos0, bool all_rows);

/* One decode step of n sequences at once (continuous batching): id ids[i] at position
 * pos[i] of seqs[i], each sequence its own state (its own caches) of this whole model. b
 * is a state of the same model whose scratch carries the n columns (n_batch and n_logits
 * at least n; its own caches are not used: n_ctx 1 will do). The weights are read once for
 * all of them; each column's attention runs over its own sequence's cache. Afterwards
 * seqs[i]'s logits row 0 holds what pl_model_forward(m, seqs[i], &ids[i], 1, pos[i],
 * false) would give, and its caches and recurrent states (snapshots included) are those
 * that step leaves (bit for bit on the CPU; on the GPU up to the matmuls' summation order
 * for n rows). Both families have the step (llama, qwen2, qwen3, qwen3moe, qwen35,
 * qwen35moe). A part of a model, drafting states, or shapes out of range: a one-line
 * error. */
pl_status pl_model_forward_batch(const pl_model *m, pl_state *b, pl_state *const *seqs,
                                 const int32_t *ids, const int64_t *pos, int n);
/* Whether pl_model_forward_batch can run on m (its family has a batched step, and m is
 * whole). */
bool pl_model_can_batch(const pl_model *m);
/* Whether the model's states can keep cache slots (pl_state_opts.n_slots, slot_of). */
bool pl_model_keeps_slots(const pl_model *m);

/* ---- the model's own draft block (multi-token prediction, qwen35's nextn) ----
 *
 * The block's cache entry at position p is made from the main model's final-normed hidden
 * state at p and the embedding of the id at p + 1 (x = eh_proj([enorm(e), hnorm(h)]), one
 * full-attention layer at position p over the block's own cache). pl_model_forward on a
 * state with opts.draft makes the entries of positions pos0-1 .. pos0+n-2 (pos0-1 only
 * when the previous pass ran it) and keeps the n hidden rows; pl_model_layers called on
 * its own makes none and forgets the kept rows. */

/* Up to k drafts (k <= n_batch) of the ids at positions pos+2.. into out: next is the id
 * at pos + 1 (chosen, not yet run), pos a position the last pl_model_forward ran. Each
 * step is the block at position pos+j, shared_head_norm, the output matrix and the argmax,
 * its normed output and the argmax feeding the next step. Returns in *n_out how many ids
 * (fewer when pos was not in the last pass: 0, or an argmax found nothing finite). Writes
 * the block's cache entries at pos..pos+k-1 (the next forward pass overwrites them). */
pl_status pl_model_draft(const pl_model *m, pl_state *s, int64_t pos, int32_t next, int k,
                         int32_t *out, int *n_out);
/* What pl_model_forward does after its head on a state with opts.draft (nothing on one
 * without), for a pass whose layers ran elsewhere (a chain of stages, chain.h): hidden rows
 * 0..n-1 hold the final hidden states of positions pos0..pos0+n-1 and the ids buffer their
 * ids. Needs the head (the block is loaded with it). */
pl_status pl_model_draft_absorb(const pl_model *m, pl_state *s, int64_t n, int64_t pos0);
/* The logits [1, n_vocab] of the last draft step. */
pl_buf *pl_state_draft_logits(pl_state *s);

#endif
