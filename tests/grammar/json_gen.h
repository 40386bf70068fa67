/* json_gen.h - a constrained generation for the grammar tests: stories260K-style prompt
 * (BOS "Once upon"), a JSON constraint on the sampler, the pieces collected. Include after
 * test.h. */
#ifndef PL_TEST_JSON_GEN_H
#define PL_TEST_JSON_GEN_H

#include "base/strbuf.h"
#include "grammar/grammar.h"
#include "grammar/token_mask.h"
#include "runtime/generate.h"
#include "tokenizer/tokenizer.h"

typedef struct {
    const pl_tokenizer *t;
    pl_strbuf text;
    int n;
    bool eog;
} gen_out;

static bool on_token(void *ud, int32_t id) {
    gen_out *o = ud;
    if (pl_tok_is_eog(o->t, id)) return o->eog = true, false;
    char *p;
    size_t len;
    if (pl_tok_piece_str(o->t, id, false, &p, &len) == PL_OK) pl_sb_append(&o->text, p, len);
    free(p);
    o->n++;
    return true;
}

/* Generate up to n_predict ids after BOS "Once upon" under grammar g (seed 0: greedy,
 * else temperature 1 with that seed) into o (o->t set by the caller). */
static pl_status jc_generate(const pl_model *m, pl_vocab_trie *v, const pl_grammar *g,
                             uint64_t seed, int n_predict, gen_out *o) {
    pl_state_opts so = pl_state_opts_default(m);
    so.n_ctx = 256;
    pl_session *s = NULL;
    pl_sampler *smp = NULL;
    pl_json_constraint *c = NULL;
    pl_sampler_params sp = pl_sampler_defaults();
    sp.temp = seed ? 1.0f : 0;
    sp.seed = seed;
    pl_status st = pl_session_new(m, &so, &s);
    if (!st) st = pl_sampler_new(&sp, pl_model_get_info(m)->n_vocab, &smp);
    if (!st) st = pl_json_constraint_new(g, v, &c);
    if (!st) st = pl_json_constraint_attach(c, smp);
    int32_t prompt[] = {1, 403, 407};
    pl_gen_opts go = {.n_predict = n_predict, .on_token = on_token, .ud = o};
    pl_gen_stats gs;
    if (!st) st = pl_generate(s, smp, prompt, 3, &go, &gs);
    pl_json_constraint_free(c);
    pl_sampler_free(smp);
    pl_session_free(s);
    return st;
}

/* stories260K's file, tokenizer and vocabulary trie (NULL where something failed, a CHECK
 * failure said so), and their release. */
static void jc_open_stories(pl_gguf **gg, pl_tokenizer **t, pl_vocab_trie **v) {
    *gg = NULL, *t = NULL, *v = NULL;
    CHECK(pl_gguf_open(test_shared("models/stories260K.gguf"), gg) == PL_OK, "%s", pl_last_error());
    if (*gg) CHECK(pl_tok_load(*gg, t) == PL_OK, "%s", pl_last_error());
    if (*t) CHECK(pl_vocab_trie_from_tok(*t, v) == PL_OK, "%s", pl_last_error());
}

static void jc_close_stories(pl_gguf *gg, pl_tokenizer *t, pl_vocab_trie *v) {
    pl_vocab_trie_free(v);
    pl_tok_free(t);
    pl_gguf_free(gg);
}

#endif
