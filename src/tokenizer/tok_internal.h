/* tok_internal.h - the tokenizer's insides, shared by the files of src/tokenizer/ only:
 * the vocabulary (texts, scores, types, hash maps), the per-model encoders, and helpers. */
#ifndef PL_TOKENIZER_TOK_INTERNAL_H
#define PL_TOKENIZER_TOK_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pretok.h"
#include "tokenizer.h"

/* tokenizer.ggml.token_type values */
enum {
    PL_TT_UNDEFINED = 0,
    PL_TT_NORMAL = 1,
    PL_TT_UNKNOWN = 2,
    PL_TT_CONTROL = 3,
    PL_TT_USER_DEFINED = 4,
    PL_TT_UNUSED = 5,
    PL_TT_BYTE = 6,
};

typedef enum { PL_TOK_SPM, PL_TOK_BPE, PL_TOK_WPM } pl_tok_kind;

/* Open-addressing map from a string (a token's text) to its id. The strings themselves live
 * in the tokenizer's pool; a slot holds id + 1 (0 = empty). */
typedef struct {
    uint32_t *slots;
    uint32_t mask;
} pl_tok_strmap;

/* Open-addressing map from a pair of ids to a merge (rank and the merged id). */
typedef struct {
    uint64_t *keys; /* (left << 32 | right) + 1; 0 = empty */
    uint32_t *rank, *merged;
    uint32_t mask;
} pl_tok_pairmap;

/* The vocabulary's special token ids; -1 = none. */
typedef struct {
    int32_t bos, eos, unk, sep, pad, eot, eom, cls, mask;
} pl_tok_specials;

struct pl_tokenizer {
    pl_tok_kind kind;
    int32_t n_vocab;
    /* texts of ids 0..n_vocab-1, then of "extra" strings that appear only in merges */
    int32_t n_text;
    char *pool;
    uint32_t *off, *len;
    float *scores; /* n_vocab, or NULL */
    uint8_t *type; /* n_vocab */
    pl_tok_strmap map;
    uint32_t max_len; /* longest token text in bytes */

    pl_tok_specials sp;
    bool add_bos, add_eos, add_space_prefix, ignore_merges, nfc;
    bool spm_words; /* SPM: no token has U+2581 after another character (see tok_spm.c) */
    /* Tests only: take the plain paths (regex engine, no chunks, no piece cache, no word
     * split), to check that the fast ones give the same ids. */
    bool slow;
    int32_t byte_tok[256]; /* token of each byte value (SPM <0xNN>, BPE mapped char); -1 none */
    int32_t byte_sym[256]; /* BPE: id (maybe extra) of each byte's mapped char; -1 none */

    /* byte-level BPE */
    pl_pretok *pre;
    pl_tok_pairmap merges;

    /* tokens matched in text before the model runs (control, user-defined, unknown),
     * longest first */
    int32_t *specials;
    int32_t n_specials;
    /* the same, bucketed by first byte: sp_by_byte[sp_byte_start[b] .. sp_byte_start[b+1])
     * are indices into specials of the tokens whose text starts with byte b */
    int32_t *sp_by_byte;
    int32_t sp_byte_start[257];
    int32_t *eog;
    int32_t n_eog;

    char *chat_template;    /* tokenizer.chat_template or NULL */
    bool chat_template_nul; /* the template holds a NUL byte (refused when rendering) */
    char *name;             /* general.name or NULL */
};

static inline const char *pl_tok_text(const pl_tokenizer *t, int32_t id, uint32_t *len) {
    *len = t->len[id];
    return t->pool + t->off[id];
}

/* Look up a text among ids 0..n_text-1; -1 if absent. */
int32_t pl_tok_find(const pl_tokenizer *t, const char *s, size_t len);

/* The token a byte falls back to when a symbol is not a token: its byte token, else the
 * unknown token. A vocabulary with neither (some real BPE ones lack control bytes) cannot
 * represent the text: the encoder fails with a message naming the byte rather than drop
 * it (llama.cpp and transformers drop it). -1 with the error set. */
static inline int32_t pl_tok_byte_fallback(const pl_tokenizer *t, uint8_t b) {
    int32_t id = t->byte_tok[b] >= 0 ? t->byte_tok[b] : t->sp.unk;
    if (id < 0)
        pl_fail(PL_ERR_FORMAT,
                "tokenize: the vocabulary has no token for byte 0x%02X and no unknown token", b);
    return id;
}

/* A growable array of ids. */
typedef struct {
    int32_t *v;
    int64_t n, cap;
} pl_idvec;
bool pl_idvec_push(pl_idvec *v, int32_t id);

/* Encoders of a raw-text fragment (no special tokens inside), appending to out. */
pl_status pl_tok_spm_encode(const pl_tokenizer *t, const char *text, size_t len, bool add_prefix,
                            pl_idvec *out);
pl_status pl_tok_bpe_encode(const pl_tokenizer *t, const char *text, size_t len, pl_idvec *out);
pl_status pl_tok_wpm_encode(const pl_tokenizer *t, const char *text, size_t len, pl_idvec *out);

/* Byte-level BPE's reversible byte <-> code point mapping (GPT-2's bytes_to_unicode). */
uint32_t pl_tok_byte_to_cp(uint8_t b);
int pl_tok_cp_to_byte(uint32_t cp); /* -1 if cp is not one of the 256 */

/* The id of a text among ids 0..n_text-1, adding it as an "extra" text (id >= n_vocab) if
 * absent, so that merges can be keyed by id pairs; -1 when out of memory. *pool_cap and
 * *id_cap track the allocated sizes of pool and off/len. */
int32_t pl_tok_intern_extra(pl_tokenizer *t, const char *s, size_t len, size_t *pool_cap,
                            size_t *id_cap);

/* Build the BPE merge map from tokenizer.ggml.merges (adds extra texts as needed). */
pl_status pl_tok_bpe_load_merges(pl_tokenizer *t, const pl_gguf_value *merges);

#endif
