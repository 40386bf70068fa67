/* engine.c - the server's calls into libpooled: prompts as ids, tokenize / detokenize, and
 * one generation with stop strings held back until they can no longer match. */
#include "engine.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/strbuf.h"
#include "grammar/grammar.h"
#include "grammar/token_mask.h"
#include "runtime/batcher.h"
#include "runtime/chat_ids.h"
#include "base/json.h"
#include "runtime/generate.h"
#include "runtime/sampler.h"
#include "runtime/session.h"
#include "tokenizer/tokenizer.h"
#include "tool_force.h"

/* A slot: one session (its own KV cache) and whether a generation holds it. */
typedef struct {
    pl_session *ses;
    bool busy;
    uint64_t used; /* when it was last taken (for the least recently used among equals) */
} slot;

struct srv_engine {
    const pl_model *m;
    const pl_tokenizer *tok;
    int n_vocab;
    bool ignore_eos;     /* an end-of-generation id is text like any other */
    pl_vocab_trie *trie; /* for response_format, built at the first request that has one */
    pthread_mutex_t mu;  /* the slots' table */
    pthread_cond_t freed;
    uint64_t n_taken;
    /* the turn (one model pass at a time on the shared backend) and continuous batching
     * (the decode steps of all decoding slots in one pass; runtime/batcher.h) */
    pl_batcher *bt;
    pl_batch *batch; /* NULL: one slot, or a model without a batched step */
    bool own_batch;  /* made it (else the caller's) */
    int n_slots;
    slot slots[];
};

srv_engine *srv_engine_new(const pl_model *m, const pl_tokenizer *tok, pl_session *const *ses,
                           int n_slots, pl_batch *batch) {
    if (n_slots < 1) return NULL;
    srv_engine *e = calloc(1, sizeof *e + sizeof(slot) * (size_t)n_slots);
    if (!e) return NULL;
    e->m = m, e->tok = tok, e->n_vocab = pl_model_get_info(m)->n_vocab, e->n_slots = n_slots;
    for (int i = 0; i < n_slots; i++) e->slots[i].ses = ses[i];
    pthread_mutex_init(&e->mu, NULL);
    pthread_cond_init(&e->freed, NULL);
    if (n_slots > 1 && pl_model_can_batch(m)) {
        e->batch = batch, e->own_batch = !batch;
        if (!batch && pl_batch_new(m, n_slots, &e->batch)) {
            srv_engine_free(e);
            return NULL;
        }
    }
    if (pl_batcher_new(e->batch, n_slots, &e->bt)) {
        srv_engine_free(e);
        return NULL;
    }
    return e;
}

void srv_engine_set_ignore_eos(srv_engine *e, bool on) {
    e->ignore_eos = on;
}

bool srv_engine_batched(const srv_engine *e) {
    return e->batch != NULL;
}

void srv_engine_batch_stats(srv_engine *e, uint64_t *steps, uint64_t *columns) {
    pl_batcher_stats(e->bt, steps, columns);
}

void srv_engine_free(srv_engine *e) {
    if (!e) return;
    pl_batcher_free(e->bt);
    if (e->own_batch) pl_batch_free(e->batch);
    pl_vocab_trie_free(e->trie);
    pthread_mutex_destroy(&e->mu);
    pthread_cond_destroy(&e->freed);
    free(e);
}

int64_t srv_engine_n_ctx(const srv_engine *e) {
    return pl_session_n_ctx(e->slots[0].ses);
}

int srv_engine_n_slots(const srv_engine *e) {
    return e->n_slots;
}

static int64_t common_prefix(const int32_t *a, int64_t na, const int32_t *b, int64_t nb) {
    int64_t i = 0;
    while (i < na && i < nb && a[i] == b[i]) i++;
    return i;
}

/* A free slot for a prompt: the one whose cache shares the longest prefix with it when
 * that prefix is at least half the prompt, else the least recently used (a slot never used
 * first), so that a new conversation sharing only a BOS or a short system prompt keeps the
 * others' caches. Waits while every slot is busy (the server runs no more generations than
 * slots). */
static slot *slot_take(srv_engine *e, const int32_t *ids, int64_t n) {
    pthread_mutex_lock(&e->mu);
    slot *best = NULL, *lru = NULL;
    for (;;) {
        int64_t best_len = -1;
        for (int i = 0; i < e->n_slots; i++) {
            slot *s = &e->slots[i];
            if (s->busy) continue;
            int64_t nc;
            const int32_t *c = pl_session_ids(s->ses, &nc);
            int64_t len = common_prefix(c, nc, ids, n);
            if (len > best_len) best = s, best_len = len;
            if (!lru || s->used < lru->used) lru = s;
        }
        if (best && best_len * 2 < n) best = lru;
        if (best) break;
        pthread_cond_wait(&e->freed, &e->mu);
    }
    best->busy = true;
    best->used = ++e->n_taken;
    pthread_mutex_unlock(&e->mu);
    return best;
}

static void slot_give(srv_engine *e, slot *s) {
    pthread_mutex_lock(&e->mu);
    s->busy = false;
    pthread_cond_signal(&e->freed);
    pthread_mutex_unlock(&e->mu);
}

static bool lib_fail(char *err, size_t cap) {
    snprintf(err, cap, "%s", pl_last_error());
    return false;
}

bool srv_chat_context(const srv_request *r, pl_json_doc **msgs, pl_json_doc **tools, char *err,
                      size_t cap) {
    *msgs = *tools = NULL;
    pl_strbuf b = {0};
    pl_sb_putc(&b, '[');
    for (int i = 0; i < r->n_msgs; i++) {
        const srv_msg *m = &r->msgs[i];
        pl_sb_puts(&b, i ? ",{\"role\":" : "{\"role\":");
        pl_json_quote(&b, m->role, strlen(m->role), false);
        pl_sb_puts(&b, ",\"content\":");
        pl_json_quote(&b, m->content, strlen(m->content), false);
        if (m->reasoning) {
            pl_sb_puts(&b, ",\"reasoning_content\":");
            pl_json_quote(&b, m->reasoning, strlen(m->reasoning), false);
        }
        if (m->tool_calls) pl_sb_printf(&b, ",\"tool_calls\":%s", m->tool_calls);
        if (m->tool_call_id) {
            pl_sb_puts(&b, ",\"tool_call_id\":");
            pl_json_quote(&b, m->tool_call_id, strlen(m->tool_call_id), false);
        }
        pl_sb_putc(&b, '}');
    }
    pl_sb_putc(&b, ']');
    if (b.failed) return pl_sb_free(&b), snprintf(err, cap, "out of memory"), false;
    pl_status s = pl_json_parse(b.s, b.len, msgs);
    pl_sb_free(&b);
    if (!s && r->tools && r->tool_choice != SRV_TOOLS_NONE)
        s = pl_json_parse(r->tools, strlen(r->tools), tools);
    if (!s) return true;
    pl_json_doc_free(*msgs), pl_json_doc_free(*tools);
    *msgs = *tools = NULL;
    return lib_fail(err, cap);
}

static bool render_chat(srv_engine *e, const srv_request *r, char **text, char *err, size_t cap) {
    pl_json_doc *msgs, *tools;
    if (!srv_chat_context(r, &msgs, &tools, err, cap)) return false;
    /* a response_format or a forced call leaves no room for thinking: it is the whole
     * answer; the client may turn it off too (srv_request.no_think) */
    pl_chat_opts co = {.add_generation_prompt = true,
                       .enable_thinking = !r->grammar && !tf_forced(r) && !r->no_think};
    pl_status s = pl_chat_render_json(e->tok, pl_json_root(msgs),
                                      tools ? pl_json_root(tools) : NULL, &co, text);
    pl_json_doc_free(msgs), pl_json_doc_free(tools);
    return s ? lib_fail(err, cap) : true;
}

/* How the reply is split: <think> where the template knows it (and whether the prompt
 * opened it), tool calls in the template's format when the request offers tools. */
static tp_opts reply_format(const srv_engine *e, const srv_request *r, const char *prompt) {
    const char *t = pl_tok_chat_template(e->tok);
    tp_opts o = {.think = t && strstr(t, "<think>")};
    const char *open = NULL;
    for (const char *p = prompt; (p = strstr(p, "<think>")); p++) open = p;
    o.in_think = o.think && open && !strstr(open, "</think>");
    bool xml;
    if (r->tools && r->tool_choice != SRV_TOOLS_NONE) o.calls = tf_calls_format(t, &xml);
    return o;
}

bool srv_engine_prompt(srv_engine *e, const srv_request *r, int32_t **ids, int64_t *n_ids,
                       tp_opts *fmt, char *err, size_t cap) {
    *ids = NULL;
    *n_ids = 0;
    if (fmt) *fmt = (tp_opts){0};
    if (r->kind == SRV_COMPLETION) {
        if (pl_tok_encode(e->tok, r->prompt, strlen(r->prompt), true, false, ids, n_ids))
            return lib_fail(err, cap);
        if (*n_ids == 0) {
            snprintf(err, cap, "the prompt is empty (and the model has no BOS)");
            return false;
        }
        return true;
    }
    char *text = NULL;
    if (!render_chat(e, r, &text, err, cap)) return false;
    if (fmt) *fmt = reply_format(e, r, text);
    pl_status s = pl_tok_encode(e->tok, text, strlen(text), false, true, ids, n_ids);
    free(text);
    if (s) return lib_fail(err, cap);
    int32_t bos = pl_tok_bos(e->tok);
    if (pl_tok_adds_bos(e->tok) && bos >= 0 && (*n_ids == 0 || (*ids)[0] != bos)) {
        int32_t *w = realloc(*ids, sizeof *w * (size_t)(*n_ids + 1));
        if (!w) {
            free(*ids), *ids = NULL, *n_ids = 0;
            return snprintf(err, cap, "out of memory"), false;
        }
        memmove(w + 1, w, sizeof *w * (size_t)*n_ids);
        w[0] = bos;
        *ids = w;
        (*n_ids)++;
    }
    return true;
}

bool srv_engine_tokenize(srv_engine *e, const srv_request *r, int32_t **ids, int64_t *n_ids,
                         char ***pieces, char *err, size_t cap) {
    *pieces = NULL;
    if (pl_tok_encode(e->tok, r->prompt, strlen(r->prompt), r->add_special, r->parse_special, ids,
                      n_ids))
        return lib_fail(err, cap);
    if (!r->with_pieces) return true;
    if (!(*pieces = calloc((size_t)*n_ids + 1, sizeof **pieces)))
        return snprintf(err, cap, "out of memory"), false;
    for (int64_t i = 0; i < *n_ids; i++) {
        size_t len;
        if (pl_tok_piece_str(e->tok, (*ids)[i], true, &(*pieces)[i], &len))
            return lib_fail(err, cap);
    }
    return true;
}

bool srv_engine_piece(srv_engine *e, int32_t id, char **text, size_t *n) {
    *text = NULL;
    return !pl_tok_piece_str(e->tok, id, true, text, n);
}

bool srv_engine_detokenize(srv_engine *e, const int32_t *ids, int64_t n, char **text, char *err,
                           size_t cap) {
    for (int64_t i = 0; i < n; i++)
        if (ids[i] >= e->n_vocab) {
            snprintf(err, cap, "tokens[%lld]: id %d is outside the vocabulary (0 to %d)",
                     (long long)i, ids[i], e->n_vocab - 1);
            return false;
        }
    return pl_tok_decode(e->tok, ids, n, false, text, NULL) ? lib_fail(err, cap) : true;
}

/* The generation in progress: text not yet emitted waits in held while it could still be
 * the start of a stop string. */
typedef struct {
    srv_engine *e;
    const srv_request *r;
    const srv_gen_io *io;
    pl_tok_stream *stream;
    pl_strbuf held;
    srv_gen_result *res;
    bool emit_failed;
    srv_logprob lp; /* the last pick's, from the sampler's watcher */
    double t0, t_last;
    pl_json_constraint *con; /* response_format */
    tp_think think;          /* io->think: counting the reasoning ids */
} gen_state;

_Static_assert(SRV_MAX_TOP_LOGPROBS <= PL_MAX_TOP_LOGPROBS, "top_logprobs past pl_logprobs");

/* The sampler's watcher: the pick's logprobs and the r->logprobs most likely ids'. */
static void watch_logits(void *ud, const float *l, int n_vocab, int32_t id) {
    gen_state *g = ud;
    pl_logprobs_of(l, n_vocab, id, g->r->logprobs, &g->lp);
}

static bool emit(gen_state *g, size_t n) {
    if (n && !g->io->emit(g->io->ud, g->held.s, n)) g->emit_failed = true;
    memmove(g->held.s, g->held.s + n, g->held.len - n + 1);
    g->held.len -= n;
    return !g->emit_failed;
}

/* Add text; emit what is settled. False when a stop string matched (the text before it
 * emitted, finish set) or the output failed. final: nothing follows, emit everything. */
static bool settle(gen_state *g, const char *text, bool final) {
    pl_sb_puts(&g->held, text);
    if (g->held.failed) return g->emit_failed = true, false;
    if (!g->held.s) return true; /* nothing held, nothing added */
    const srv_request *r = g->r;
    size_t first = g->held.len;
    int which = -1;
    for (int i = 0; i < r->n_stop; i++) {
        const char *p = strstr(g->held.s, r->stop[i]);
        if (p && (size_t)(p - g->held.s) < first) first = (size_t)(p - g->held.s), which = i;
    }
    if (which >= 0) {
        emit(g, first);
        g->held.len = 0, g->held.s[0] = 0;
        g->res->finish = SRV_FINISH_STOP;
        g->res->stop_index = which;
        return false;
    }
    size_t keep = 0; /* the longest tail that begins some stop string */
    for (int i = 0; i < r->n_stop && !final; i++) {
        size_t sl = strlen(r->stop[i]);
        for (size_t k = sl - 1; k > keep; k--)
            if (k <= g->held.len && !memcmp(g->held.s + g->held.len - k, r->stop[i], k)) {
                keep = k;
                break;
            }
    }
    return emit(g, g->held.len - keep);
}

/* Each id, without the turn: the text and the client's stream are handled while the
 * other slots' passes run. */
static bool on_token(void *ud, int32_t id) {
    gen_state *g = ud;
    g->t_last = pl_now();
    if (g->res->t_first < 0) g->res->t_first = g->t_last - g->t0;
    if (atomic_load(g->io->cancel)) {
        g->res->finish = SRV_FINISH_CANCEL;
        return false;
    }
    if (!g->e->ignore_eos && pl_tok_is_eog(g->e->tok, id)) {
        g->res->finish = SRV_FINISH_EOG;
        return false;
    }
    g->res->n_completion++;
    if (g->r->logprobs >= 0 && g->io->logprob) g->io->logprob(g->io->ud, &g->lp);
    const char *text = pl_tok_stream_push(g->stream, id);
    if (g->io->think && tp_think_id(&g->think, text)) g->res->n_reasoning++;
    if (!settle(g, text, false)) return false;
    if (g->con && pl_gstate_done(pl_json_constraint_state(g->con))) {
        g->res->finish = SRV_FINISH_EOG; /* the JSON value is closed: nothing may follow */
        return false;
    }
    if (atomic_load(g->io->cancel)) {
        g->res->finish = SRV_FINISH_CANCEL;
        return false;
    }
    return true;
}

static uint64_t clock_seed(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return ((uint64_t)ts.tv_sec * 1000000007u) ^ (uint64_t)ts.tv_nsec ^ ((uint64_t)getpid() << 40);
}

bool srv_engine_forced_call(srv_engine *e, const srv_request *r, pl_grammar **g, char *err,
                            size_t cap) {
    return tf_grammar(r, pl_tok_chat_template(e->tok), g, err, cap);
}

/* response_format or a forced call: every pick of smp keeps the text a prefix of a value
 * gr allows. */
static bool constrain(srv_engine *e, const pl_grammar *gr, pl_sampler *smp,
                      pl_json_constraint **con) {
    if (!e->trie && pl_vocab_trie_from_tok(e->tok, &e->trie)) return false;
    if (pl_json_constraint_new(gr, e->trie, con)) return false;
    if (!pl_json_constraint_attach(*con, smp)) return true;
    pl_json_constraint_free(*con);
    *con = NULL;
    return false;
}

bool srv_engine_generate(srv_engine *e, const srv_request *r, const pl_grammar *gr,
                         const int32_t *ids, int64_t n, const srv_gen_io *io, srv_gen_result *res,
                         char *err, size_t cap) {
    *res = (srv_gen_result){.finish = SRV_FINISH_LENGTH, .n_prompt = n, .t_first = -1};
    int64_t n_ctx = srv_engine_n_ctx(e);
    if (n >= n_ctx) {
        snprintf(err, cap, "the prompt is %lld tokens, the context holds %lld (the server's --ctx)",
                 (long long)n, (long long)n_ctx);
        return false;
    }
    pl_sampler_params sp = pl_sampler_defaults();
    sp.temp = (float)r->temperature;
    sp.top_k = 0;
    sp.min_p = 0;
    sp.top_p = (float)r->top_p;
    sp.presence_penalty = (float)r->presence_penalty;
    sp.frequency_penalty = (float)r->frequency_penalty;
    sp.seed = r->has_seed ? r->seed : clock_seed();
    pl_sampler *smp = NULL;
    gen_state g = {.e = e, .r = r, .io = io, .res = res, .t0 = pl_now()};
    g.think.in = io->think == 2;
    if (pl_sampler_new(&sp, e->n_vocab, &smp)) return lib_fail(err, cap);
    if (r->logprobs >= 0) pl_sampler_set_watch(smp, watch_logits, &g);
    bool con_ok = true;
    if (gr) { /* (the vocabulary trie is built once, by whoever needs it first) */
        pl_batcher_take(e->bt);
        con_ok = constrain(e, gr, smp, &g.con);
        pl_batcher_give(e->bt);
    }
    if (!con_ok) {
        pl_sampler_free(smp);
        return lib_fail(err, cap);
    }
    if (!(g.stream = pl_tok_stream_new(e->tok, false))) {
        pl_json_constraint_free(g.con);
        pl_sampler_free(smp);
        return snprintf(err, cap, "out of memory"), false;
    }
    int64_t room = n_ctx - n + 1;
    int64_t want = r->max_tokens >= 0 && r->max_tokens < room ? r->max_tokens : room;
    pl_gen_opts go = {.n_predict = want, .on_token = on_token, .ud = &g};
    pl_gen_stats st;
    slot *sl = slot_take(e, ids, n);
    pl_batcher_take(e->bt);
    bool ok = !pl_batcher_generate(e->bt, sl->ses, smp, ids, n, &go, &st) || lib_fail(err, cap);
    if (!ok) pl_session_reset(sl->ses); /* a failed pass may leave the cache half-written */
    pl_batcher_give(e->bt);
    slot_give(e, sl);
    res->n_cached = n - st.n_prompt_run;
    pl_status s = ok ? PL_OK : PL_ERR;
    if (res->t_first >= 0) res->t_decode = g.t_last - g.t0 - res->t_first;
    if (!s && res->finish != SRV_FINISH_STOP && res->finish != SRV_FINISH_CANCEL && !g.emit_failed)
        settle(&g, pl_tok_stream_flush(g.stream), true);
    if (g.emit_failed && res->finish != SRV_FINISH_STOP) res->finish = SRV_FINISH_CANCEL;
    pl_sb_free(&g.held);
    pl_tok_stream_free(g.stream);
    pl_sampler_free(smp);
    pl_json_constraint_free(g.con);
    return !s;
}
