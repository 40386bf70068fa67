/* tok_vocab.c - build a pl_tokenizer from a GGUF's tokenizer.* metadata: the token texts
 * and their hash map, scores and types, special ids and flags, the byte tokens, the list
 * of tokens matched in text, and the end-of-generation set. Defaults follow llama.cpp's
 * for each vocabulary type where a key is absent. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tok_internal.h"
#include "unicode.h"

/* ---- the string map ---- */

static uint64_t hash_bytes(const char *s, size_t len) {
    uint64_t h = 0x9E3779B97F4A7C15ull ^ (len * 0xff51afd7ed558ccdull);
    while (len >= 8) {
        uint64_t w;
        memcpy(&w, s, 8);
        h = (h ^ w) * 0xC2B2AE3D27D4EB4Full;
        h ^= h >> 29;
        s += 8, len -= 8;
    }
    uint64_t w = 0;
    memcpy(&w, s, len);
    h = (h ^ w) * 0x165667B19E3779F9ull;
    h ^= h >> 32;
    return h;
}

int32_t pl_tok_find(const pl_tokenizer *t, const char *s, size_t len) {
    if (!t->map.slots) return -1;
    uint32_t i = (uint32_t)hash_bytes(s, len) & t->map.mask;
    for (;;) {
        uint32_t v = t->map.slots[i];
        if (!v) return -1;
        int32_t id = (int32_t)(v - 1);
        if (t->len[id] == len && memcmp(t->pool + t->off[id], s, len) == 0) return id;
        i = (i + 1) & t->map.mask;
    }
}

/* Insert id (its text already in the pool); a later id with the same text replaces the
 * earlier one, as in llama.cpp's token_to_id. */
static void map_insert(pl_tokenizer *t, int32_t id) {
    const char *s = t->pool + t->off[id];
    uint32_t len = t->len[id];
    uint32_t i = (uint32_t)hash_bytes(s, len) & t->map.mask;
    for (;;) {
        uint32_t v = t->map.slots[i];
        if (!v) break;
        int32_t o = (int32_t)(v - 1);
        if (t->len[o] == len && memcmp(t->pool + t->off[o], s, len) == 0) break;
        i = (i + 1) & t->map.mask;
    }
    t->map.slots[i] = (uint32_t)id + 1;
}

/* Size the map for n strings (load factor <= 1/2). */
static bool map_alloc(pl_tokenizer *t, uint64_t n) {
    uint64_t cap = 16;
    while (cap < n * 2) cap <<= 1;
    if (cap > (1ull << 31)) return false;
    free(t->map.slots);
    t->map.slots = calloc(cap, sizeof *t->map.slots);
    t->map.mask = (uint32_t)(cap - 1);
    return t->map.slots != NULL;
}

/* ---- loading ---- */

static int32_t get_id(const pl_gguf *g, const char *key, int32_t dflt, int32_t n_vocab) {
    int64_t v;
    if (!pl_gguf_get_int(g, key, &v)) return dflt;
    return v >= 0 && v < n_vocab ? (int32_t)v : -1;
}

static bool get_flag(const pl_gguf *g, const char *key, bool dflt) {
    bool b;
    return pl_gguf_get_bool(g, key, &b) ? b : dflt;
}

typedef struct {
    uint32_t len;
    int32_t id;
} len_id;

/* Longest first (llama.cpp matches longer special tokens before shorter ones), then by id. */
static int cmp_special(const void *a, const void *b) {
    const len_id *x = a, *y = b;
    if (x->len != y->len) return x->len > y->len ? -1 : 1;
    return x->id < y->id ? -1 : x->id > y->id;
}

static bool add_eog(pl_tokenizer *t, int32_t id) {
    if (id < 0) return true;
    for (int32_t i = 0; i < t->n_eog; i++)
        if (t->eog[i] == id) return true;
    int32_t *v = realloc(t->eog, (size_t)(t->n_eog + 1) * sizeof *v);
    if (!v) return false;
    t->eog = v;
    t->eog[t->n_eog++] = id;
    return true;
}

/* Tokens that end a turn although the metadata may not say so (llama.cpp's list). */
static const char *const k_eog_texts[] = {
    "<|eot_id|>",    "<|im_end|>", "<|end|>", "<|return|>", "<|call|>",        "<end_of_turn>",
    "<|endoftext|>", "<|eom_id|>", "<EOT>",   "_<EOT>",     "<|end_of_text|>", "<end_of_utterance>",
};

static pl_status load_texts(pl_tokenizer *t, const pl_gguf_value *toks) {
    uint64_t n = toks->arr.count, total = 0;
    for (uint64_t i = 0; i < n; i++) total += toks->arr.items[i].str.len;
    if (total > UINT32_MAX / 2) return pl_fail(PL_ERR_FORMAT, "tokenizer: token texts too large");
    t->pool = malloc(total + 1);
    t->off = malloc(n * sizeof *t->off);
    t->len = malloc(n * sizeof *t->len);
    t->type = malloc(n);
    if (!t->pool || !t->off || !t->len || !t->type || !map_alloc(t, n))
        return pl_fail(PL_ERR_NOMEM, "tokenizer: out of memory");
    uint64_t o = 0;
    for (uint64_t i = 0; i < n; i++) {
        pl_gguf_str s = toks->arr.items[i].str;
        memcpy(t->pool + o, s.ptr, s.len);
        t->off[i] = (uint32_t)o;
        t->len[i] = (uint32_t)s.len;
        if (s.len > t->max_len) t->max_len = (uint32_t)s.len;
        o += s.len;
    }
    t->pool[o] = 0;
    t->n_vocab = t->n_text = (int32_t)n;
    for (int32_t i = 0; i < t->n_vocab; i++) map_insert(t, i);
    return PL_OK;
}

static pl_status load_types_scores(pl_tokenizer *t, const pl_gguf *g) {
    const pl_gguf_value *ty = pl_gguf_get(g, "tokenizer.ggml.token_type");
    const pl_gguf_value *sc = pl_gguf_get(g, "tokenizer.ggml.scores");
    bool ty_ok =
        ty && ty->type == PL_GGUF_ARRAY && ty->arr.data && ty->arr.count == (uint64_t)t->n_vocab;
    for (int32_t i = 0; i < t->n_vocab; i++) {
        int64_t v = ty_ok ? pl_gguf_arr_int(ty, (uint64_t)i) : PL_TT_NORMAL;
        t->type[i] = (uint8_t)(v >= 0 && v <= PL_TT_BYTE ? v : PL_TT_NORMAL);
    }
    if (sc && sc->type == PL_GGUF_ARRAY && sc->arr.data && sc->arr.count == (uint64_t)t->n_vocab) {
        t->scores = malloc((size_t)t->n_vocab * sizeof *t->scores);
        if (!t->scores) return pl_fail(PL_ERR_NOMEM, "tokenizer: out of memory");
        for (int32_t i = 0; i < t->n_vocab; i++)
            t->scores[i] = (float)pl_gguf_arr_float(sc, (uint64_t)i);
    }
    return PL_OK;
}

static void load_specials(pl_tokenizer *t, const pl_gguf *g) {
    int32_t n = t->n_vocab;
    pl_tok_specials d = {-1, -1, -1, -1, -1, -1, -1, -1, -1};
    if (t->kind == PL_TOK_SPM) d.bos = 1, d.eos = 2, d.unk = 0;
    if (t->kind == PL_TOK_WPM) d.bos = 101, d.unk = 100, d.sep = 102, d.pad = 0, d.mask = 103;
    for (int32_t *p = &d.bos; p <= &d.mask; p++)
        if (*p >= n) *p = -1;
    t->sp.bos = get_id(g, "tokenizer.ggml.bos_token_id", d.bos, n);
    t->sp.eos = get_id(g, "tokenizer.ggml.eos_token_id", d.eos, n);
    t->sp.unk = get_id(g, "tokenizer.ggml.unknown_token_id", d.unk, n);
    t->sp.sep = get_id(g, "tokenizer.ggml.seperator_token_id", d.sep, n);
    t->sp.pad = get_id(g, "tokenizer.ggml.padding_token_id", d.pad, n);
    t->sp.eot = get_id(g, "tokenizer.ggml.eot_token_id", -1, n);
    t->sp.eom = get_id(g, "tokenizer.ggml.eom_token_id", -1, n);
    t->sp.cls = get_id(g, "tokenizer.ggml.cls_token_id", -1, n);
    t->sp.mask = get_id(g, "tokenizer.ggml.mask_token_id", d.mask, n);
    /* BERT's "BOS" is [CLS] */
    if (t->kind == PL_TOK_WPM && t->sp.cls >= 0) t->sp.bos = t->sp.cls;
}

static void load_byte_tokens(pl_tokenizer *t) {
    for (int b = 0; b < 256; b++) {
        char buf[8];
        int32_t id = -1;
        if (t->kind == PL_TOK_BPE) {
            int n = pl_utf8_encode(pl_tok_byte_to_cp((uint8_t)b), buf);
            id = pl_tok_find(t, buf, (size_t)n);
        } else {
            snprintf(buf, sizeof buf, "<0x%02X>", b);
            id = pl_tok_find(t, buf, 6);
            if (id < 0 || id >= t->n_vocab) {
                buf[0] = (char)b;
                id = pl_tok_find(t, buf, 1);
            }
        }
        /* a text found only among the merges' extra texts is no token */
        t->byte_tok[b] = id < t->n_vocab ? id : -1;
    }
}

/* True if no token holds U+2581 right after a character other than U+2581. */
static bool spm_words_safe(const pl_tokenizer *t) {
    for (int32_t id = 0; id < t->n_vocab; id++) {
        const char *s = t->pool + t->off[id];
        uint32_t n = t->len[id];
        for (uint32_t p = 1; p + 3 <= n; p++) {
            if (memcmp(s + p, "\xe2\x96\x81", 3) != 0) continue;
            if (p < 3 || memcmp(s + p - 3, "\xe2\x96\x81", 3) != 0) return false;
        }
    }
    return true;
}

static pl_status load_special_list(pl_tokenizer *t) {
    int32_t n = 0;
    for (int32_t i = 0; i < t->n_vocab; i++) {
        uint8_t ty = t->type[i];
        if ((ty == PL_TT_CONTROL || ty == PL_TT_USER_DEFINED || ty == PL_TT_UNKNOWN) && t->len[i])
            n++;
    }
    t->specials = malloc((size_t)(n ? n : 1) * sizeof *t->specials);
    len_id *tmp = malloc((size_t)(n ? n : 1) * sizeof *tmp);
    if (!t->specials || !tmp) {
        free(tmp);
        return pl_fail(PL_ERR_NOMEM, "tokenizer: out of memory");
    }
    for (int32_t i = 0; i < t->n_vocab; i++) {
        uint8_t ty = t->type[i];
        if ((ty == PL_TT_CONTROL || ty == PL_TT_USER_DEFINED || ty == PL_TT_UNKNOWN) && t->len[i])
            tmp[t->n_specials++] = (len_id){t->len[i], i};
    }
    qsort(tmp, (size_t)t->n_specials, sizeof *tmp, cmp_special);
    for (int32_t i = 0; i < t->n_specials; i++) t->specials[i] = tmp[i].id;
    free(tmp);
    t->sp_by_byte = malloc((size_t)(n ? n : 1) * sizeof *t->sp_by_byte);
    if (!t->sp_by_byte) return pl_fail(PL_ERR_NOMEM, "tokenizer: out of memory");
    int32_t count[256] = {0};
    for (int32_t k = 0; k < t->n_specials; k++) count[(uint8_t)t->pool[t->off[t->specials[k]]]]++;
    t->sp_byte_start[0] = 0;
    for (int b = 0; b < 256; b++) t->sp_byte_start[b + 1] = t->sp_byte_start[b] + count[b];
    int32_t fill[256];
    memcpy(fill, t->sp_byte_start, sizeof fill);
    for (int32_t k = 0; k < t->n_specials; k++)
        t->sp_by_byte[fill[(uint8_t)t->pool[t->off[t->specials[k]]]]++] = k;

    if (!add_eog(t, t->sp.eos) || !add_eog(t, t->sp.eot) || !add_eog(t, t->sp.eom))
        return pl_fail(PL_ERR_NOMEM, "tokenizer: out of memory");
    for (size_t i = 0; i < sizeof k_eog_texts / sizeof k_eog_texts[0]; i++) {
        int32_t id = pl_tok_find(t, k_eog_texts[i], strlen(k_eog_texts[i]));
        if (id >= 0 && id < t->n_vocab && !add_eog(t, id))
            return pl_fail(PL_ERR_NOMEM, "tokenizer: out of memory");
    }
    return PL_OK;
}

pl_status pl_tok_load(const pl_gguf *g, pl_tokenizer **out) {
    *out = NULL;
    char *model = pl_gguf_get_string(g, "tokenizer.ggml.model");
    if (!model) return pl_fail(PL_ERR_FORMAT, "tokenizer: no tokenizer.ggml.model in the file");
    pl_tok_kind kind;
    if (!strcmp(model, "llama"))
        kind = PL_TOK_SPM;
    else if (!strcmp(model, "gpt2"))
        kind = PL_TOK_BPE;
    else if (!strcmp(model, "bert"))
        kind = PL_TOK_WPM;
    else {
        pl_status st =
            pl_fail(PL_ERR_FORMAT, "tokenizer: unsupported tokenizer model '%.40s'", model);
        free(model);
        return st;
    }
    free(model);
    const pl_gguf_value *toks = pl_gguf_get(g, "tokenizer.ggml.tokens");
    if (!toks || toks->type != PL_GGUF_ARRAY || toks->arr.elem_type != PL_GGUF_STRING ||
        toks->arr.count == 0 || toks->arr.count > (1u << 30))
        return pl_fail(PL_ERR_FORMAT, "tokenizer: missing or bad tokenizer.ggml.tokens");

    pl_tokenizer *t = calloc(1, sizeof *t);
    if (!t) return pl_fail(PL_ERR_NOMEM, "tokenizer: out of memory");
    t->kind = kind;
    pl_status st = load_texts(t, toks);
    if (st == PL_OK) st = load_types_scores(t, g);
    if (st != PL_OK) goto fail;
    load_specials(t, g);

    pl_pretok_info info = {0};
    bool bos_default = kind != PL_TOK_BPE;
    if (kind == PL_TOK_BPE) {
        char *pre = pl_gguf_get_string(g, "tokenizer.ggml.pre");
        st = pl_pretok_new(pre, &t->pre, &info);
        /* Qwen's real tokenizers normalise to NFC (transformers does, llama.cpp does not; we
         * follow transformers). The GGUF does not record the normaliser, so this is keyed on
         * the Qwen pre-tokenizer with a full-size vocabulary (the tiny test vocabularies that
         * reuse the qwen2 split have no normaliser). */
        t->nfc = pre && (!strcmp(pre, "qwen2") || !strcmp(pre, "qwen35")) && t->n_vocab >= 100000;
        free(pre);
        if (st != PL_OK) goto fail;
        t->ignore_merges = info.ignore_merges;
        bos_default = info.add_bos;
        st = pl_tok_bpe_load_merges(t, pl_gguf_get(g, "tokenizer.ggml.merges"));
        if (st != PL_OK) goto fail;
    }
    t->add_bos = get_flag(g, "tokenizer.ggml.add_bos_token", bos_default) && t->sp.bos >= 0;
    t->add_eos = get_flag(g, "tokenizer.ggml.add_eos_token", kind == PL_TOK_WPM) &&
                 (kind == PL_TOK_WPM ? t->sp.sep >= 0 : t->sp.eos >= 0);
    t->add_space_prefix = get_flag(g, "tokenizer.ggml.add_space_prefix", kind == PL_TOK_SPM);
    load_byte_tokens(t);
    if (kind == PL_TOK_SPM) t->spm_words = spm_words_safe(t);
    st = load_special_list(t);
    if (st != PL_OK) goto fail;
    t->chat_template = pl_gguf_get_string(g, "tokenizer.chat_template");
    const pl_gguf_value *ct = pl_gguf_get(g, "tokenizer.chat_template");
    /* a NUL inside would cut the template short: chat.c refuses such a template */
    t->chat_template_nul = t->chat_template && ct->type == PL_GGUF_STRING &&
                           memchr(ct->str.ptr, 0, ct->str.len) != NULL;
    t->name = pl_gguf_get_string(g, "general.name");
    *out = t;
    return PL_OK;
fail:
    pl_tok_free(t);
    return st;
}

void pl_tok_free(pl_tokenizer *t) {
    if (!t) return;
    free(t->pool), free(t->off), free(t->len), free(t->scores), free(t->type);
    free(t->map.slots);
    pl_pretok_free(t->pre);
    free(t->merges.keys), free(t->merges.rank), free(t->merges.merged);
    free(t->specials), free(t->sp_by_byte), free(t->eog);
    free(t->chat_template), free(t->name);
    free(t);
}

int32_t pl_tok_intern_extra(pl_tokenizer *t, const char *s, size_t len, size_t *pool_cap,
                            size_t *id_cap) {
    int32_t id = pl_tok_find(t, s, len);
    if (id >= 0) return id;
    size_t used = t->n_text ? t->off[t->n_text - 1] + t->len[t->n_text - 1] : 0;
    if (used + len + 1 > *pool_cap) {
        size_t cap = (*pool_cap + len + 1) * 2;
        char *p = realloc(t->pool, cap);
        if (!p) return -1;
        t->pool = p, *pool_cap = cap;
    }
    if ((size_t)t->n_text + 1 > *id_cap) {
        size_t cap = *id_cap * 2 + 16;
        uint32_t *o = realloc(t->off, cap * sizeof *o);
        if (!o) return -1;
        t->off = o;
        uint32_t *l = realloc(t->len, cap * sizeof *l);
        if (!l) return -1;
        t->len = l, *id_cap = cap;
    }
    if ((uint64_t)(t->n_text + 1) * 2 > (uint64_t)t->map.mask + 1) {
        /* grow the map and re-insert everything */
        if (!map_alloc(t, (uint64_t)(t->n_text + 1) * 2)) return -1;
        for (int32_t i = 0; i < t->n_text; i++) map_insert(t, i);
    }
    memcpy(t->pool + used, s, len);
    t->pool[used + len] = 0;
    id = t->n_text++;
    t->off[id] = (uint32_t)used;
    t->len[id] = (uint32_t)len;
    map_insert(t, id);
    return id;
}
