/* tokenizer.h - text <-> token ids from the tokenizer stored in a GGUF (tokenizer.ggml.*),
 * streaming detokenisation, and chat-template rendering.
 *
 * This is the contract the rest of libpooled codes against; the tokenizer folder owns the
 * implementation (spm, bpe, wpm, pre-tokenizers, unicode tables, jinja subset). */
#ifndef PL_TOKENIZER_TOKENIZER_H
#define PL_TOKENIZER_TOKENIZER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../base/json.h"
#include "../base/status.h"
#include "../format/gguf.h"

typedef struct pl_tokenizer pl_tokenizer;

/* Build the tokenizer described by a GGUF's metadata (copies what it needs: the GGUF may be
 * freed afterwards). Fails with a one-line reason for an unknown/unsupported model. */
pl_status pl_tok_load(const pl_gguf *g, pl_tokenizer **out);
void pl_tok_free(pl_tokenizer *t);

int32_t pl_tok_n_vocab(const pl_tokenizer *t);
int32_t pl_tok_bos(const pl_tokenizer *t); /* -1 if none */
int32_t pl_tok_eos(const pl_tokenizer *t); /* -1 if none */
/* true for ids that end a generation (eos, eot, <|im_end|>, ...) */
bool pl_tok_is_eog(const pl_tokenizer *t, int32_t id);
/* Whether encode with add_special adds BOS (tokenizer.ggml.add_bos_token, else the
 * llama.cpp default for the vocabulary type). */
bool pl_tok_adds_bos(const pl_tokenizer *t);

/* Tokenize len bytes of text. add_special: add BOS/EOS as the vocabulary asks;
 * parse_special: control/user-defined tokens written in the text become their ids.
 * *ids is malloc'd (caller frees). */
pl_status pl_tok_encode(const pl_tokenizer *t, const char *text, size_t len, bool add_special,
                        bool parse_special, int32_t **ids, int64_t *n_ids);

/* The bytes token id stands for, as text (byte-level BPE mapping undone, SPM's U+2581 made
 * a space, <0xNN> made the byte). Special tokens give their text only if show_special.
 * Returns the byte count written (may be more than cap: then call again with more room),
 * or -1 for an invalid id. */
int64_t pl_tok_piece(const pl_tokenizer *t, int32_t id, bool show_special, char *buf, size_t cap);
/* The same as a whole string: *out is malloc'd, NUL-terminated (it may hold NULs: use *len).
 * Fails with a one-line message for an invalid id. */
pl_status pl_tok_piece_str(const pl_tokenizer *t, int32_t id, bool show_special, char **out,
                           size_t *len);

/* A whole sequence back to text, pieces concatenated; the space an SPM vocabulary puts in
 * front of the text (add_space_prefix) is removed again. *out is malloc'd, NUL-terminated
 * (out_len may be NULL). Fails for an invalid id. */
pl_status pl_tok_decode(const pl_tokenizer *t, const int32_t *ids, int64_t n, bool show_special,
                        char **out, size_t *out_len);

/* Streaming detokeniser: feed ids one by one, get text that is always whole UTF-8 (a
 * partial sequence is held until its last byte arrives). */
typedef struct pl_tok_stream pl_tok_stream;
pl_tok_stream *pl_tok_stream_new(const pl_tokenizer *t, bool show_special);
/* Returns a NUL-terminated string valid until the next call (possibly ""). */
const char *pl_tok_stream_push(pl_tok_stream *s, int32_t id);
/* Whatever is still held back (an incomplete sequence at the end), then reset. */
const char *pl_tok_stream_flush(pl_tok_stream *s);
void pl_tok_stream_free(pl_tok_stream *s);

/* ---- chat templates ---- */

typedef struct {
    const char *role; /* "system", "user", "assistant", "tool" */
    const char *content;
} pl_chat_msg;

typedef struct {
    bool add_generation_prompt;
    bool enable_thinking; /* Qwen3's switch; default true */
    /* a Jinja template used instead of the model's (its bos_token / eos_token still the
     * model's; no fallback when it does not parse); NULL: the model's */
    const char *tmpl;
} pl_chat_opts;

/* Render messages with the model's template (tokenizer.chat_template interpreted as Jinja;
 * a table of known templates as fallback). *out is malloc'd. */
pl_status pl_chat_render(const pl_tokenizer *t, const pl_chat_msg *msgs, int n_msgs,
                         const pl_chat_opts *opts, char **out);

/* The same for a conversation given as JSON: messages is an array of objects with role and
 * content (content may be null or a list of parts) and any other fields the template reads
 * (tool_calls, reasoning_content, name, ...); tools is an array of tool schemas or NULL. */
pl_status pl_chat_render_json(const pl_tokenizer *t, const pl_json *messages, const pl_json *tools,
                              const pl_chat_opts *opts, char **out);

/* Render with an explicit template source (bos/eos: the texts the template sees as
 * bos_token/eos_token, may be NULL). */
pl_status pl_chat_render_template(const char *tmpl, const char *bos, const char *eos,
                                  const pl_json *messages, const pl_json *tools,
                                  const pl_chat_opts *opts, char **out);

/* tokenizer.chat_template of the model, or NULL. */
const char *pl_tok_chat_template(const pl_tokenizer *t);

#endif
