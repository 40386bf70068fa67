/* api_internal.h - an open pooled_model's parts through the internal API, for the programs
 * of this repository that need more than pooled.h offers: the room's host (its own layers,
 * the workers' stages appended to the chain), the option fuzzer, and api.c's own files.
 * Not installed: a program on pooled.h alone never includes it. */
#ifndef PL_API_INTERNAL_H
#define PL_API_INTERNAL_H

#include <pooled.h>

#include "../format/gguf.h"
#include "../runtime/draft.h"
#include "../runtime/sampler.h"
#include "../runtime/session.h"
#include "../tokenizer/tokenizer.h"

typedef struct {
    pl_gguf *g;
    pl_backend *be;
    pl_model *m; /* with stages: the embedding, the head (and a room host's own layers) */
    pl_tokenizer *tok;
    pl_state_opts so; /* the sessions' state options */
    /* the chain in layer order (n_stages 0: m runs every layer): each stage with the
     * partial model it runs over (parts[i]; NULL for a remote stage), freed with the model.
     * A caller may append stages before the first session is made. */
    int n_stages;
    pl_model *parts[PL_CHAIN_MAX_STAGES];
    pl_stage *stages[PL_CHAIN_MAX_STAGES];
    pl_chain_opts chain;
} pl_model_parts;

/* The parts of an open model (valid while it is open; NULL for NULL or a vocab_only one). */
pl_model_parts *pl_api_parts(pooled_model *m);

/* pooled_model_open for a room's host: the embedding, the head and only layers [first,
 * last) (maybe none) loaded, no stages (the caller appends the workers'). */
int pl_api_open_host(const char *path, const pooled_model_opts *o, int first, int last,
                     pooled_model **out);

/* pooled.h's sampling options as the sampler takes them. */
pl_sampler_params pl_api_sampler_params(const pooled_sample_opts *o);
/* A cache type of pooled.h (POOLED_KV_*) as the state options take it (PL_TYPE_*). */
uint32_t pl_api_kv_type(int kv);

/* Options of any size (pooled.h's rule): the caller's src, its first `size` bytes, over the
 * defaults in dst (cap bytes); what: the struct's name for the error. */
int pl_api_take_opts(void *dst, size_t cap, const void *src, const char *what);

/* g (parsed from memory, say) as pooled.h's handle, which owns it from now on (NULL when
 * out of memory: g is freed). For the GGUF fuzzer's walk through the public reader. */
pooled_gguf *pl_api_gguf_wrap(pl_gguf *g);

#endif
