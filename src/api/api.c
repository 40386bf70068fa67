/* api.c - include/pooled.h over the internal API: models (GGUF, backend, weights and
 * tokenizer in one handle), tokens, chat templates, sessions and generation with a token
 * callback, stop strings and a cancel flag. A thin layer: the work is done by the runtime
 * exactly as the pooled command does it (the same ids for the same options). */
#include <pooled.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "api_internal.h"

#include "../base/json.h"
#include "../base/thread.h"
#include "../grammar/token_mask.h"
#include "../runtime/backend_open.h"
#include "../runtime/batcher.h"
#include "../runtime/chat_ids.h"
#include "../runtime/generate.h"
#include "../runtime/logprobs.h"
#include "../runtime/stop.h"

/* only the pooled_* functions leave the shared library (Makefile: -fvisibility=hidden) */

struct pooled_model {
    pl_model_parts p; /* the file, backend, weights, tokenizer, state options, stages */
    char *dawn_lib, *tune_cache, *profile; /* copies the GPU options borrow */
    char *gpu_options;                     /* a copy, cut into the settings they borrow */
    char note[192];                        /* the backend's remark at opening, or "" */
    /* the turn (one pass at a time on the backend) and, with n_parallel > 1, the batched
     * decode steps of the sessions generating at once (runtime/batcher.h) */
    pl_batcher *bt;
    pl_batch *batch; /* NULL: none (n_parallel 1, or a model without batched steps) */
    pl_mutex slots;  /* slot_used */
    bool *slot_used; /* [n_parallel]: the batch's cache slots held by sessions */
    int n_parallel;
    pl_vocab_trie *trie; /* json_schema's, built by the first generation that has one */
    pl_sampler *greedy;  /* pooled_sessions_step's picks, made by its first call */
};

struct pooled_session {
    pooled_model *m;
    pl_session *s;
    int slot; /* the batch's cache slot it holds, -1: none */
    atomic_int cancel;
};

static int fail_arg(const char *what) {
    return (int)pl_fail(PL_ERR_ARG, "%s", what);
}

const char *pooled_last_error(void) {
    return pl_last_error();
}

#define STR2(x) #x
#define STR(x)  STR2(x)
const char *pooled_version(int *major, int *minor, int *patch) {
    if (major) *major = POOLED_VERSION_MAJOR;
    if (minor) *minor = POOLED_VERSION_MINOR;
    if (patch) *patch = POOLED_VERSION_PATCH;
    return STR(POOLED_VERSION_MAJOR) "." STR(POOLED_VERSION_MINOR) "." STR(POOLED_VERSION_PATCH);
}

void pooled_free(void *p) {
    free(p);
}

/* Options of any size: the caller's first `size` bytes over the defaults in dst. */
int pl_api_take_opts(void *dst, size_t cap, const void *src, const char *what) {
    if (!src) return POOLED_OK;
    size_t n = *(const size_t *)src;
    if (n < sizeof(size_t) || n > (1u << 20))
        return (int)pl_fail(PL_ERR_ARG, "%s: size %zu is not sizeof the struct (%zu)", what, n,
                            cap);
    memcpy(dst, src, n < cap ? n : cap);
    *(size_t *)dst = cap;
    return POOLED_OK;
}

static char *dup_or_null(const char *s, int *nomem) {
    if (!s) return NULL;
    char *d = strdup(s);
    if (!d) *nomem = 1;
    return d;
}

/* ------------------------------------------------------------------ models */

pooled_model_opts pooled_model_opts_default(void) {
    return (pooled_model_opts){
        .size = sizeof(pooled_model_opts), .backend = "auto", .spec = POOLED_SPEC_LOOKUP};
}

void pooled_model_close(pooled_model *m) {
    if (!m) return;
    if (m->p.tok) pl_tok_free(m->p.tok);
    pl_vocab_trie_free(m->trie);
    pl_sampler_free(m->greedy);
    pl_batcher_free(m->bt);
    pl_batch_free(m->batch); /* (after its slots' sessions, which the caller freed) */
    for (int i = 0; i < m->p.n_stages; i++) { /* (after the sessions: the caller's) */
        pl_stage_free(m->p.stages[i]);
        pl_model_free(m->p.parts[i]);
    }
    pl_model_free(m->p.m);
    pl_be_destroy(m->p.be);
    pl_gguf_free(m->p.g);
    free(m->dawn_lib);
    free(m->tune_cache);
    free(m->profile);
    free(m->gpu_options);
    pl_mutex_destroy(&m->slots);
    free(m->slot_used);
    free(m);
}

/* --split's stages: n local stages over equal shares of the layers, each its own partial
 * model, after the host's embedding and head. */
static pl_status load_stages(pooled_model *m, int n) {
    pl_model_parts *p = &m->p;
    int L = pl_model_get_info(p->m)->n_layer;
    if (n > L) return pl_fail(PL_ERR_ARG, "n_stages %d: the model has only %d layers", n, L);
    for (int i = 0; i < n; i++) {
        int first = L * i / n, last = L * (i + 1) / n;
        pl_model_opts mo = {
            .prefault = true, .layer_first = first, .layer_last = last, .ends = PL_ENDS_NONE};
        pl_status s = pl_model_load(p->g, p->be, &mo, &p->parts[i]);
        if (!s) s = pl_stage_local_new(p->parts[i], &p->so, first, last, &p->stages[i]);
        p->n_stages += p->parts[i] != NULL; /* (what was made is freed with the model) */
        if (s) return s;
    }
    return PL_OK;
}

uint32_t pl_api_kv_type(int kv) {
    return kv == POOLED_KV_F32 ? PL_TYPE_F32 : kv == POOLED_KV_Q8 ? PL_TYPE_Q8_0 : PL_TYPE_F16;
}

/* The sessions' state options: context, cache, the verify pass and draft state of o->spec. */
static pl_status state_opts(pooled_model *m, const pooled_model_opts *o) {
    pl_model_parts *p = &m->p;
    p->so = pl_state_opts_default(p->m);
    if (o->n_ctx) p->so.n_ctx = o->n_ctx;
    if (o->n_batch) p->so.n_batch = o->n_batch;
    if (p->so.n_batch > p->so.n_ctx) p->so.n_batch = p->so.n_ctx;
    p->so.kv_type = pl_api_kv_type(o->kv_type);
    if (o->spec == POOLED_SPEC_OFF) return PL_OK;
    /* a verify pass: 1 + PL_SPEC_MAX columns, each kept */
    int cols = PL_SPEC_MAX + 1 < p->so.n_batch ? PL_SPEC_MAX + 1 : p->so.n_batch;
    p->so.n_logits = p->so.n_snap = cols;
    /* the MTP block is loaded with the head (so a chain's host has it too) */
    const pl_model_info *in = pl_model_get_info(p->m);
    if (o->spec == POOLED_SPEC_MTP && !in->has_draft)
        return pl_fail(PL_ERR_ARG, "spec mtp: this model (%s) has no MTP block (use lookup)",
                       in->arch);
    p->so.draft = in->has_draft && (o->spec == POOLED_SPEC_MTP || o->spec == POOLED_SPEC_AUTO);
    return PL_OK;
}

/* The backend, the weights (all of them, or a room host's: the ends and layers [first,
 * last)), the sessions' state options, --split's stages and, with n_parallel, the batch
 * whose slots the sessions' caches are; the turn. *backend_failed: the backend did not open
 * (not the file's fault). */
static pl_status load_weights(pooled_model *m, const pooled_model_opts *o, const int *host,
                              bool *backend_failed) {
    pl_model_parts *p = &m->p;
    pl_backend_open_opts bo = {.name = o->backend ? o->backend : "auto", .n_threads = o->n_threads};
    bo.gpu.dawn_lib = m->dawn_lib;
    bo.gpu.tune_cache = m->tune_cache;
    bo.gpu.profile_path = m->profile;
    bo.cpu.anon_weights = o->cpu_weights;
    if (m->gpu_options) {
        pl_status s = pl_gpu_opts_parse(m->gpu_options, &bo.gpu);
        if (s) return s;
    }
    const char *note;
    pl_status s = pl_backend_open_with(&bo, &p->be, &note);
    if (s) return *backend_failed = true, s;
    snprintf(m->note, sizeof m->note, "%s", note ? note : "");
    p->be->act_q8 = o->act_type == POOLED_ACT_Q8;
    pl_model_opts mo = {.prefault = true,
                        .progress = o->progress,
                        .progress_ud = o->progress_user,
                        .layer_first = host ? host[0] : 0,
                        .layer_last = host ? host[1] : 0,
                        .ends = host || o->n_stages ? PL_ENDS_EMBED | PL_ENDS_HEAD : PL_ENDS_AUTO};
    if ((s = pl_model_load(p->g, p->be, &mo, &p->m))) return s;
    if ((s = state_opts(m, o))) return s;
    p->chain = pl_chain_opts_default();
    if (o->chain_frame) p->chain.frame_cols = o->chain_frame;
    p->chain.no_prepare = o->chain_prepare < 0;
    if (o->n_stages && (s = load_stages(m, o->n_stages))) return s;
    /* n_parallel sessions' caches as slots of one batch, their steps in one pass */
    m->n_parallel = o->n_parallel > 1 ? o->n_parallel : 1;
    if (m->n_parallel > 1 && !host && !o->n_stages && pl_model_can_batch(p->m)) {
        if ((s = pl_batch_new_slots(p->m, m->n_parallel, &p->so, &m->batch))) return s;
        if (!(m->slot_used = calloc((size_t)m->n_parallel, sizeof *m->slot_used)))
            return pl_fail(PL_ERR_NOMEM, "out of memory");
    }
    return pl_batcher_new(m->batch, m->n_parallel, &m->bt);
}

static int open_model(const char *path, const pooled_model_opts *opts, const int *host,
                      pooled_model **out) {
    if (!out) return fail_arg("pooled_model_open: out is NULL");
    *out = NULL;
    if (!path) return fail_arg("pooled_model_open: path is NULL");
    pooled_model_opts o = pooled_model_opts_default();
    if (pl_api_take_opts(&o, sizeof o, opts, "pooled_model_opts")) return POOLED_ERR_ARG;
    if (o.n_threads < 0 || o.n_threads > 1024) return fail_arg("n_threads: expected 0 to 1024");
    if (o.n_ctx < 0 || o.n_ctx > (1 << 24)) return fail_arg("n_ctx: expected 0 to 16777216");
    if (o.kv_type != POOLED_KV_F16 && o.kv_type != POOLED_KV_F32 && o.kv_type != POOLED_KV_Q8)
        return fail_arg("kv_type: expected POOLED_KV_F16, POOLED_KV_F32 or POOLED_KV_Q8");
    if (o.act_type != POOLED_ACT_Q8 && o.act_type != POOLED_ACT_F32)
        return fail_arg("act_type: expected POOLED_ACT_Q8 or POOLED_ACT_F32");
    if (o.n_parallel < 0 || o.n_parallel > POOLED_MAX_PARALLEL)
        return fail_arg("n_parallel: expected 0 to 64");
    if (o.cpu_weights < -1 || o.cpu_weights > 1)
        return fail_arg("cpu_weights: expected -1 (the mapped file), 0 (auto) or 1 (a copy)");
    if (o.spec < POOLED_SPEC_OFF || o.spec > POOLED_SPEC_MTP)
        return fail_arg("spec: expected POOLED_SPEC_OFF, _LOOKUP, _AUTO or _MTP");
    if (o.n_stages < 0 || o.n_stages > PL_CHAIN_MAX_STAGES - 1)
        return fail_arg("n_stages: expected 0 (none) to 63");
    if (o.n_batch < 0 || o.n_batch > (1 << 24)) return fail_arg("n_batch: expected 0 to 16777216");
    if (o.chain_prepare < -1 || o.chain_prepare > 0)
        return fail_arg("chain_prepare: expected 0 (auto) or -1 (off)");
    if (o.chain_frame < 0 || o.chain_frame > PL_CHAIN_MAX_FRAME)
        return fail_arg("chain_frame: expected 0 (512) or 1 to 4096 columns");
    if (host && o.n_stages) return fail_arg("n_stages: not with a room's host");
    if (!o.vocab_only && pl_backend_check_name(o.backend ? o.backend : "auto"))
        return POOLED_ERR_ARG;
    pooled_model *m = calloc(1, sizeof *m);
    if (!m) return (int)pl_fail(PL_ERR_NOMEM, "out of memory");
    pl_mutex_init(&m->slots);
    int nomem = 0;
    m->dawn_lib = dup_or_null(o.dawn_lib, &nomem);
    m->tune_cache = dup_or_null(o.gpu_tune_cache, &nomem);
    m->profile = dup_or_null(o.gpu_profile, &nomem);
    m->gpu_options = dup_or_null(o.gpu_options, &nomem);
    bool backend_failed = false;
    pl_status s = nomem ? pl_fail(PL_ERR_NOMEM, "out of memory") : pl_gguf_open(path, &m->p.g);
    if (!s && !o.vocab_only) s = load_weights(m, &o, host, &backend_failed);
    if (!s) s = pl_tok_load(m->p.g, &m->p.tok);
    if (s) {
        /* the file's name leads the reason, as the command says it (the backend's own
         * failure is not the file's: its name instead) */
        char msg[600];
        snprintf(msg, sizeof msg, "%s", pl_last_error());
        pooled_model_close(m);
        if (backend_failed)
            return (int)pl_fail(s, "backend %.40s: %s", o.backend ? o.backend : "auto", msg);
        size_t pl = strlen(path); /* (file errors name their path already) */
        if (!strncmp(msg, path, pl) && msg[pl] == ':') return (int)pl_fail(s, "%s", msg);
        return (int)pl_fail(s, "%.300s: %s", path, msg);
    }
    *out = m;
    return POOLED_OK;
}

int pooled_model_open(const char *path, const pooled_model_opts *o, pooled_model **out) {
    return open_model(path, o, NULL, out);
}

int pl_api_open_host(const char *path, const pooled_model_opts *o, int first, int last,
                     pooled_model **out) {
    int host[2] = {first, last};
    return open_model(path, o, host, out);
}

pl_model_parts *pl_api_parts(pooled_model *m) {
    return m && m->p.m ? &m->p : NULL;
}

/* A result struct of ours (n bytes, its size first) into the caller's, which may be older
 * and smaller: as many bytes as the caller's size says, and that count back in its size. */
static int put_sized(void *dst, const void *src, size_t n) {
    size_t cap = *(size_t *)dst, w = cap < n ? cap : n;
    memcpy(dst, src, w);
    *(size_t *)dst = w; /* what was written */
    return POOLED_OK;
}

/* A vocab_only model's info: what the file says and the vocabulary; no backend. */
static int vocab_info(const pooled_model *m, pooled_model_info *info) {
    pooled_model_info r = {.size = sizeof r,
                           .n_vocab = pl_tok_n_vocab(m->p.tok),
                           .bos = pl_tok_bos(m->p.tok),
                           .eos = pl_tok_eos(m->p.tok)};
    char *arch = pl_gguf_get_string(m->p.g, "general.architecture");
    char *name = pl_gguf_get_string(m->p.g, "general.name");
    snprintf(r.arch, sizeof r.arch, "%s", arch ? arch : "");
    snprintf(r.name, sizeof r.name, "%s", name ? name : "");
    snprintf(r.backend, sizeof r.backend, "none (vocab_only)");
    free(arch), free(name);
    return put_sized(info, &r, sizeof r);
}

int pooled_model_get_info(const pooled_model *m, pooled_model_info *info) {
    if (!m || !info) return fail_arg("pooled_model_get_info: NULL argument");
    if (info->size < sizeof(size_t)) return fail_arg("pooled_model_info: size is not set");
    if (!m->p.m) return vocab_info(m, info);
    const pl_model_info *in = pl_model_get_info(m->p.m);
    pooled_model_info r = {.size = sizeof r,
                           .n_ctx_train = in->n_ctx_train,
                           .n_ctx = m->p.so.n_ctx,
                           .n_vocab = in->n_vocab,
                           .n_embd = in->n_embd,
                           .n_layer = in->n_layer,
                           .n_params = in->n_params,
                           .bos = pl_tok_bos(m->p.tok),
                           .eos = pl_tok_eos(m->p.tok)};
    snprintf(r.arch, sizeof r.arch, "%s", in->arch);
    snprintf(r.name, sizeof r.name, "%s", in->name);
    snprintf(r.backend, sizeof r.backend, "%s", m->p.be->device);
    r.weight_bytes = in->weight_bytes;
    snprintf(r.weight_type, sizeof r.weight_type, "%s", in->weight_type);
    r.n_expert = in->n_expert;
    r.n_expert_used = in->n_expert_used;
    r.kv_type = m->p.so.kv_type == PL_TYPE_F32    ? POOLED_KV_F32
                : m->p.so.kv_type == PL_TYPE_Q8_0 ? POOLED_KV_Q8
                                                  : POOLED_KV_F16;
    snprintf(r.note, sizeof r.note, "%s", m->note);
    snprintf(r.nonfinite, sizeof r.nonfinite, "%s", in->nonfinite);
    snprintf(r.backend_name, sizeof r.backend_name, "%s", m->p.be->name);
    r.decode_bytes = in->decode_bytes;
    r.loaded_bytes = in->loaded_bytes;
    r.spec = m->p.so.draft          ? POOLED_SPEC_MTP
             : m->p.so.n_logits > 1 ? POOLED_SPEC_LOOKUP
                                    : POOLED_SPEC_OFF;
    return put_sized(info, &r, sizeof r);
}

int pooled_model_get_stats(const pooled_model *m, pooled_model_stats *stats) {
    if (!m || !stats) return fail_arg("pooled_model_get_stats: NULL argument");
    if (stats->size < sizeof(size_t)) return fail_arg("pooled_model_stats: size is not set");
    pooled_model_stats r = {.size = sizeof r, .batched = m->batch != NULL};
    if (m->bt) pl_batcher_stats(m->bt, &r.n_batched_steps, &r.n_batched_columns);
    return put_sized(stats, &r, sizeof r);
}

int pooled_token_is_eog(const pooled_model *m, int32_t id) {
    return m && id >= 0 && id < pl_tok_n_vocab(m->p.tok) && pl_tok_is_eog(m->p.tok, id);
}

/* ------------------------------------------------------------------ tokens and text */

static int check_ids(const pooled_model *m, const int32_t *ids, size_t n) {
    int32_t nv = pl_tok_n_vocab(m->p.tok);
    for (size_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= nv)
            return (int)pl_fail(PL_ERR_ARG, "id %d is outside the vocabulary (0 to %d)", ids[i],
                                nv - 1);
    return POOLED_OK;
}

int pooled_tokenize(const pooled_model *m, const char *text, size_t len, int add_special,
                    int parse_special, int32_t **ids, size_t *n_ids) {
    if (!m || (!text && len) || !ids || !n_ids) return fail_arg("pooled_tokenize: NULL argument");
    *ids = NULL;
    *n_ids = 0;
    int64_t n = 0;
    pl_status s = pl_tok_encode(m->p.tok, text ? text : "", len, add_special != 0,
                                parse_special != 0, ids, &n);
    if (!s) *n_ids = (size_t)n;
    return (int)s;
}

int pooled_detokenize(const pooled_model *m, const int32_t *ids, size_t n_ids, int show_special,
                      char **text, size_t *len) {
    if (!m || (!ids && n_ids) || !text) return fail_arg("pooled_detokenize: NULL argument");
    *text = NULL;
    if (check_ids(m, ids, n_ids)) return POOLED_ERR_ARG;
    return (int)pl_tok_decode(m->p.tok, ids, (int64_t)n_ids, show_special != 0, text, len);
}

int pooled_token_piece(const pooled_model *m, int32_t id, int show_special, char **text,
                       size_t *len) {
    if (!m || !text) return fail_arg("pooled_token_piece: NULL argument");
    *text = NULL;
    size_t l = 0;
    pl_status s = pl_tok_piece_str(m->p.tok, id, show_special != 0, text, &l);
    if (len) *len = l;
    return (int)s;
}

/* ------------------------------------------------------------------ chat templates */

pooled_chat_opts pooled_chat_opts_default(void) {
    return (pooled_chat_opts){.size = sizeof(pooled_chat_opts), .add_generation_prompt = 1};
}

const char *pooled_chat_template(const pooled_model *m) {
    return m ? pl_tok_chat_template(m->p.tok) : NULL;
}

/* The caller's options (of any size) as the renderer takes them. */
static int chat_opts(const pooled_chat_opts *opts, pl_chat_opts *co) {
    pooled_chat_opts o = pooled_chat_opts_default();
    if (pl_api_take_opts(&o, sizeof o, opts, "pooled_chat_opts")) return POOLED_ERR_ARG;
    *co = (pl_chat_opts){.add_generation_prompt = o.add_generation_prompt != 0,
                         .enable_thinking = !o.no_think,
                         .tmpl = o.template_source};
    return POOLED_OK;
}

/* The conversation msgs[0..n) rendered (the model's template or opts' own). */
static int chat_text(const pooled_model *m, const pooled_message *msgs, size_t n,
                     const pooled_chat_opts *opts, char **text) {
    *text = NULL;
    if (!m || (!msgs && n)) return fail_arg("chat: NULL argument");
    if (n > (1u << 20)) return fail_arg("chat: more than 1048576 messages");
    pl_chat_opts co;
    if (chat_opts(opts, &co)) return POOLED_ERR_ARG;
    for (size_t i = 0; i < n; i++)
        if (!msgs[i].role || !msgs[i].content)
            return (int)pl_fail(PL_ERR_ARG, "chat: message %zu has no role or content", i);
    pl_chat_msg *pm = malloc(sizeof *pm * (n ? n : 1));
    if (!pm) return (int)pl_fail(PL_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < n; i++) pm[i] = (pl_chat_msg){msgs[i].role, msgs[i].content};
    int rc = (int)pl_chat_render(m->p.tok, pm, (int)n, &co, text);
    free(pm);
    return rc;
}

/* Text ids as a conversation's: special tokens parsed, BOS settled (chat_ids.h). */
static int text_ids(const pooled_model *m, const char *text, int32_t **ids, size_t *n_ids) {
    int64_t nn = 0;
    int rc = (int)pl_chat_text_ids(m->p.tok, text, ids, &nn);
    if (!rc) *n_ids = (size_t)nn;
    return rc;
}

int pooled_chat_render(const pooled_model *m, const pooled_message *msgs, size_t n,
                       const pooled_chat_opts *o, char **text) {
    if (!text) return fail_arg("pooled_chat_render: text is NULL");
    return chat_text(m, msgs, n, o, text);
}

int pooled_chat_tokenize(const pooled_model *m, const pooled_message *msgs, size_t n,
                         const pooled_chat_opts *o, int32_t **ids, size_t *n_ids) {
    if (!ids || !n_ids) return fail_arg("pooled_chat_tokenize: NULL argument");
    *ids = NULL;
    *n_ids = 0;
    char *text = NULL;
    int rc = chat_text(m, msgs, n, o, &text);
    if (!rc) rc = text_ids(m, text, ids, n_ids);
    free(text);
    return rc;
}

/* JSON text parsed for the renderer: an array, or an object (messages) / null (tools). */
static int parse_conv(const char *what, const char *json, bool tools, pl_json_doc **doc) {
    *doc = NULL;
    if (!json) return POOLED_OK;
    if (pl_json_parse(json, strlen(json), doc)) {
        char msg[300];
        snprintf(msg, sizeof msg, "%s", pl_last_error());
        return (int)pl_fail(PL_ERR_ARG, "%s: not JSON: %s", what,
                            strncmp(msg, "json: ", 6) ? msg : msg + 6);
    }
    int t = pl_json_root(*doc)->type;
    if (t == PL_JSON_ARRAY || t == (tools ? PL_JSON_NULL : PL_JSON_OBJECT)) return POOLED_OK;
    pl_json_doc_free(*doc);
    *doc = NULL;
    return (int)pl_fail(PL_ERR_ARG, "%s: expected a JSON array%s", what,
                        tools ? " or null" : " of messages or {\"messages\": [...]}");
}

int pooled_chat_render_json(const pooled_model *m, const char *messages_json,
                            const char *tools_json, const pooled_chat_opts *opts, char **text) {
    if (!text) return fail_arg("pooled_chat_render_json: text is NULL");
    *text = NULL;
    if (!m || !messages_json) return fail_arg("pooled_chat_render_json: NULL argument");
    pl_chat_opts co;
    pl_json_doc *md = NULL, *td = NULL;
    int rc = chat_opts(opts, &co);
    if (!rc) rc = parse_conv("messages", messages_json, false, &md);
    if (!rc) rc = parse_conv("tools", tools_json, true, &td);
    const pl_json *msgs = md ? pl_json_root(md) : NULL;
    const pl_json *tools = td ? pl_json_root(td) : NULL;
    if (!rc && msgs->type == PL_JSON_OBJECT) { /* {"messages": [...], "tools": [...]} */
        if (!tools) tools = pl_json_get(msgs, "tools");
        msgs = pl_json_get(msgs, "messages");
        if (!msgs || msgs->type != PL_JSON_ARRAY)
            rc = (int)pl_fail(PL_ERR_ARG, "messages: expected an array of messages or "
                                          "{\"messages\": [...]}");
    }
    if (!rc && tools && tools->type != PL_JSON_ARRAY && tools->type != PL_JSON_NULL)
        rc = (int)pl_fail(PL_ERR_ARG, "tools: expected a JSON array");
    if (tools && tools->type == PL_JSON_NULL) tools = NULL;
    if (!rc) rc = (int)pl_chat_render_json(m->p.tok, msgs, tools, &co, text);
    pl_json_doc_free(md);
    pl_json_doc_free(td);
    return rc;
}

int pooled_chat_tokenize_json(const pooled_model *m, const char *messages_json,
                              const char *tools_json, const pooled_chat_opts *o, int32_t **ids,
                              size_t *n_ids) {
    if (!ids || !n_ids) return fail_arg("pooled_chat_tokenize_json: NULL argument");
    *ids = NULL;
    *n_ids = 0;
    char *text = NULL;
    int rc = pooled_chat_render_json(m, messages_json, tools_json, o, &text);
    if (!rc) rc = text_ids(m, text, ids, n_ids);
    free(text);
    return rc;
}

/* ------------------------------------------------------------------ sessions */

/* The batch slot s held, free again. */
static void slot_free(pooled_session *s) {
    if (s->slot < 0) return;
    pl_mutex_lock(&s->m->slots);
    s->m->slot_used[s->slot] = false;
    pl_mutex_unlock(&s->m->slots);
    s->slot = -1;
}

int pooled_session_new(pooled_model *m, pooled_session **out) {
    if (!m || !out) return fail_arg("pooled_session_new: NULL argument");
    *out = NULL;
    if (!m->p.m) return fail_arg("pooled_session_new: the model was opened vocab_only");
    pooled_session *s = calloc(1, sizeof *s);
    if (!s) return (int)pl_fail(PL_ERR_NOMEM, "out of memory");
    s->m = m;
    s->slot = -1;
    atomic_init(&s->cancel, 0);
    if (m->batch) { /* a free slot of the batch */
        pl_mutex_lock(&m->slots);
        for (int i = 0; i < m->n_parallel && s->slot < 0; i++)
            if (!m->slot_used[i]) s->slot = i, m->slot_used[i] = true;
        pl_mutex_unlock(&m->slots);
        if (s->slot < 0) {
            free(s);
            return (int)pl_fail(PL_ERR_ARG,
                                "pooled_session_new: all %d sessions of n_parallel "
                                "are in use",
                                m->n_parallel);
        }
    }
    pl_batcher_take(m->bt); /* the state's buffers come from the shared backend */
    pl_status st = m->batch        ? pl_batch_session_new(m->batch, s->slot, &m->p.so, &s->s)
                   : m->p.n_stages ? pl_session_new_chain(m->p.m, &m->p.so, m->p.stages,
                                                          m->p.n_stages, &m->p.chain, &s->s)
                                   : pl_session_new(m->p.m, &m->p.so, &s->s);
    pl_batcher_give(m->bt);
    if (st) {
        slot_free(s);
        free(s);
        return (int)st;
    }
    *out = s;
    return POOLED_OK;
}

/* ------------------------------------------------------------------ single passes */

/* After work the backend may only have recorded (the GPU queue is asynchronous), wait for
 * it: reading a logit does. */
static pl_status wait_logits(pl_session *s) {
    float first;
    return pl_be_read(pl_state_logits(pl_session_state(s)), 0, &first, sizeof first);
}

int pooled_session_eval(pooled_session *ses, const int32_t *ids, size_t n) {
    if (!ses || (!ids && n)) return fail_arg("pooled_session_eval: NULL argument");
    if (!n) return fail_arg("pooled_session_eval: no ids");
    if (check_ids(ses->m, ids, n)) return POOLED_ERR_ARG;
    pl_batcher_take(ses->m->bt);
    pl_status st = pl_session_append(ses->s, ids, (int64_t)n); /* (it checks the context) */
    if (!st) st = wait_logits(ses->s);
    pl_batcher_give(ses->m->bt);
    return (int)st;
}

int pooled_session_logits(pooled_session *ses, float *out, size_t n) {
    if (!ses || !out) return fail_arg("pooled_session_logits: NULL argument");
    size_t nv = (size_t)pl_tok_n_vocab(ses->m->p.tok);
    if (n < nv)
        return (int)pl_fail(PL_ERR_ARG,
                            "pooled_session_logits: room for %zu, the vocabulary has %zu", n, nv);
    pl_batcher_take(ses->m->bt);
    pl_status st = pl_session_logits(ses->s, out);
    pl_batcher_give(ses->m->bt);
    return (int)st;
}

int pooled_session_verify(pooled_session *ses, const int32_t *ids, size_t n, int32_t *next) {
    if (!ses || !ids || !next) return fail_arg("pooled_session_verify: NULL argument");
    if (n < 1 || n > PL_SPEC_MAX + 1) return fail_arg("pooled_session_verify: 1 to 16 ids");
    if (check_ids(ses->m, ids, n)) return POOLED_ERR_ARG;
    pl_batcher_take(ses->m->bt);
    pl_status st = pl_session_verify(ses->s, ids, (int)n, next);
    pl_batcher_give(ses->m->bt);
    return (int)st;
}

int pooled_session_truncate(pooled_session *ses, size_t n) {
    if (!ses) return fail_arg("pooled_session_truncate: NULL argument");
    pl_batcher_take(ses->m->bt);
    int64_t have;
    pl_session_ids(ses->s, &have);
    pl_status st = pl_session_truncate(ses->s, n < (size_t)have ? (int64_t)n : have);
    /* a recurrent state ran the ids again: wait for that here, not in the next call */
    if (!st && pl_session_has_logits(ses->s)) st = wait_logits(ses->s);
    pl_batcher_give(ses->m->bt);
    return (int)st;
}

int pooled_sessions_step(pooled_session *const *ss, const int32_t *ids, size_t n, int32_t *next) {
    enum { MOST = 256 };
    if (!ss || !ids || !next) return fail_arg("pooled_sessions_step: NULL argument");
    if (n < 1 || n > MOST) return fail_arg("pooled_sessions_step: 1 to 256 sessions");
    pooled_model *m = ss[0] ? ss[0]->m : NULL;
    pl_session *in[MOST];
    for (size_t i = 0; i < n; i++) {
        if (!ss[i] || ss[i]->m != m) return fail_arg("pooled_sessions_step: sessions of one model");
        for (size_t j = 0; j < i; j++)
            if (ss[j] == ss[i]) return fail_arg("pooled_sessions_step: a session given twice");
        in[i] = ss[i]->s;
    }
    if (check_ids(m, ids, n)) return POOLED_ERR_ARG;
    bool batched = m->batch && n > 1 && n <= (size_t)m->n_parallel;
    pl_batcher_take(m->bt);
    pl_status st = PL_OK;
    bool picked = false;
    if (batched) { /* one pass, every column's greedy id in one read */
        st = pl_session_push_batch(m->batch, in, ids, (int)n);
        if (!st) picked = !pl_batch_argmax(m->batch, (int)n, next);
        for (size_t j = 0; picked && j < n; j++) picked = next[j] >= 0;
        if (!st && !picked) pl_clear_error(); /* each is picked alone below (its error) */
    } else {
        for (size_t j = 0; j < n && !st; j++) st = pl_session_push(in[j], ids[j]);
    }
    if (!st && !picked && !m->greedy) {
        pl_sampler_params gp = pl_sampler_defaults();
        gp.temp = 0;
        st = pl_sampler_new(&gp, pl_tok_n_vocab(m->p.tok), &m->greedy);
    }
    for (size_t j = 0; j < n && !st && !picked; j++)
        st = pl_session_pick(in[j], m->greedy, &next[j]);
    pl_batcher_give(m->bt);
    return (int)st;
}

int64_t pooled_session_bytes(const pooled_session *ses) {
    return ses ? pl_state_bytes(pl_session_state(ses->s)) : 0;
}

void pooled_session_free(pooled_session *s) {
    if (!s) return;
    pl_batcher_take(s->m->bt);
    pl_session_free(s->s);
    pl_batcher_give(s->m->bt);
    slot_free(s);
    free(s);
}

void pooled_session_reset(pooled_session *s) {
    if (!s) return;
    pl_batcher_take(s->m->bt);
    pl_session_reset(s->s);
    pl_batcher_give(s->m->bt);
}

int pooled_session_ids(const pooled_session *s, int32_t **ids, size_t *n_ids) {
    if (!s || !ids || !n_ids) return fail_arg("pooled_session_ids: NULL argument");
    *ids = NULL;
    *n_ids = 0;
    int64_t n = 0;
    const int32_t *have = pl_session_ids(s->s, &n);
    if (n <= 0) return POOLED_OK;
    if (!(*ids = malloc(sizeof **ids * (size_t)n)))
        return (int)pl_fail(PL_ERR_NOMEM, "out of memory");
    memcpy(*ids, have, sizeof **ids * (size_t)n);
    *n_ids = (size_t)n;
    return POOLED_OK;
}

void pooled_session_cancel(pooled_session *s) {
    if (s) atomic_store(&s->cancel, 1);
}

/* ------------------------------------------------------------------ generation */

pooled_sample_opts pooled_sample_opts_default(void) {
    pl_sampler_params p = pl_sampler_defaults();
    return (pooled_sample_opts){.size = sizeof(pooled_sample_opts),
                                .temperature = p.temp,
                                .top_k = p.top_k,
                                .top_p = p.top_p,
                                .min_p = p.min_p,
                                .repeat_penalty = p.repeat_penalty,
                                .presence_penalty = p.presence_penalty,
                                .frequency_penalty = p.frequency_penalty,
                                .repeat_last_n = p.penalty_last_n,
                                .seed = p.seed,
                                .max_tokens = -1};
}

/* One generation's text path: detokenised, through the stop strings (stop.h), handed to
 * the callback. */
typedef struct {
    pooled_session *ses;
    const pooled_sample_opts *o;
    pl_tok_stream *stream;
    pl_stop stop;
    pooled_token_fn fn;
    void *user;
    int reason;
    bool nomem;
    pl_json_constraint *con; /* json_schema */
} gen_ctx;

_Static_assert(sizeof(pooled_logprob) == sizeof(pl_logprobs) &&
                   POOLED_MAX_TOP_LOGPROBS == PL_MAX_TOP_LOGPROBS,
               "pooled_logprob is pl_logprobs");

/* The sampler's watcher: the pick's logprobs, handed on before its token callback. */
static void watch_logits(void *ud, const float *l, int n_vocab, int32_t id) {
    gen_ctx *c = ud;
    pl_logprobs lp;
    pooled_logprob out; /* the same layout (asserted above) */
    pl_logprobs_of(l, n_vocab, id, c->o->top_logprobs, &lp);
    memcpy(&out, &lp, sizeof out);
    c->o->on_logprob(c->o->logprob_user, &out);
}

/* Pass piece on as far as it is final. Returns false to stop (c->reason or c->nomem set). */
static bool text_step(gen_ctx *c, int32_t id, const char *piece, bool last) {
    const char *out;
    size_t n;
    bool hit;
    if (pl_stop_feed(&c->stop, piece, strlen(piece), last, &out, &n, &hit)) {
        c->nomem = true;
        return false;
    }
    int r = c->fn && (n || id >= 0) ? c->fn(c->user, id, out, n) : 0; /* -1: only text */
    if (hit)
        c->reason = POOLED_STOP_STRING;
    else if (r)
        c->reason = POOLED_STOP_CALLBACK;
    return !hit && !r;
}

static bool on_token(void *ud, int32_t id) {
    gen_ctx *c = ud;
    const pooled_model *m = c->ses->m;
    if (!c->o->ignore_eos && pl_tok_is_eog(m->p.tok, id)) {
        c->reason = POOLED_STOP_EOG;
        return false;
    }
    if (!text_step(c, id, pl_tok_stream_push(c->stream, id), false)) return false;
    if (c->con && pl_gstate_done(pl_json_constraint_state(c->con))) {
        c->reason = POOLED_STOP_EOG; /* the JSON value is complete: nothing may follow */
        return false;
    }
    if (atomic_load(&c->ses->cancel)) {
        c->reason = POOLED_STOP_CANCELLED;
        return false;
    }
    return true;
}

/* json_schema compiled, or its reason as "json_schema: ...". */
static int compile_schema(const char *schema, pl_grammar **g) {
    *g = NULL;
    if (!pl_grammar_compile(schema, strlen(schema), g)) return POOLED_OK;
    char msg[400];
    snprintf(msg, sizeof msg, "%s", pl_last_error());
    return (int)pl_fail(PL_ERR_ARG, "json_schema: %s", msg);
}

/* json_prefix / json_suffix around the grammar's value. */
static int wrap_schema(pl_grammar *g, const char *prefix, const char *suffix) {
    if (!prefix && !suffix) return POOLED_OK;
    const char *p = prefix ? prefix : "", *q = suffix ? suffix : "";
    if (pl_grammar_wrap(g, p, strlen(p), q, strlen(q))) {
        char msg[400];
        snprintf(msg, sizeof msg, "%s", pl_last_error());
        return (int)pl_fail(PL_ERR_ARG, "json_prefix / json_suffix: %s", msg);
    }
    return POOLED_OK;
}

int pooled_json_schema_check(const char *schema) {
    if (!schema) return fail_arg("pooled_json_schema_check: schema is NULL");
    pl_grammar *g = NULL;
    int rc = compile_schema(schema, &g);
    pl_grammar_free(g);
    return rc;
}

pl_sampler_params pl_api_sampler_params(const pooled_sample_opts *o) {
    return (pl_sampler_params){.temp = o->temperature,
                               .top_k = o->top_k,
                               .top_p = o->top_p,
                               .min_p = o->min_p,
                               .repeat_penalty = o->repeat_penalty,
                               .presence_penalty = o->presence_penalty,
                               .frequency_penalty = o->frequency_penalty,
                               .penalty_last_n = o->repeat_last_n,
                               .seed = o->seed};
}

/* The drafter of spec (POOLED_SPEC_*; *out NULL for off) over s, a session of p's state
 * options: the model's MTP block when the state keeps its draft state (mtp, or auto on a
 * model with the block), else prompt lookup (auto: pausing while drafts fail). */
static pl_status drafter_new(const pl_model_parts *p, pl_session *s, int spec, pl_drafter **out) {
    *out = NULL;
    if (spec == POOLED_SPEC_OFF) return PL_OK;
    if (p->so.draft) return pl_drafter_mtp_new(s, 0, spec == POOLED_SPEC_AUTO, out);
    return pl_drafter_lookup_new(PL_SPEC_MAX, spec == POOLED_SPEC_AUTO, out);
}

static int check_sample_opts(const pooled_sample_opts *o) {
    if (o->top_logprobs < 0 || o->top_logprobs > POOLED_MAX_TOP_LOGPROBS)
        return fail_arg("top_logprobs: expected 0 to 20");
    if (o->spec < POOLED_SPEC_OFF || o->spec > POOLED_SPEC_MTP)
        return fail_arg("spec: expected POOLED_SPEC_OFF, _LOOKUP, _AUTO or _MTP");
    if (!(o->top_p > 0) || o->top_p > 1 || !(o->min_p >= 0) || o->min_p > 1 ||
        !(o->repeat_penalty > 0) || !(o->temperature >= 0) || o->repeat_last_n < -1)
        return fail_arg("sampling options out of range (top_p in (0,1], min_p in [0,1], "
                        "repeat_penalty > 0, temperature >= 0, repeat_last_n >= -1)");
    return POOLED_OK;
}

int pooled_generate(pooled_session *ses, const int32_t *prompt, size_t n_prompt,
                    const pooled_sample_opts *opts, pooled_token_fn fn, void *user,
                    pooled_result *res) {
    if (res && res->size < sizeof(size_t)) return fail_arg("pooled_result: size is not set");
    if (!ses || (!prompt && n_prompt)) return fail_arg("pooled_generate: NULL argument");
    pooled_model *m = ses->m;
    pooled_sample_opts o = pooled_sample_opts_default();
    int rc = pl_api_take_opts(&o, sizeof o, opts, "pooled_sample_opts");
    if (!rc) rc = check_sample_opts(&o);
    gen_ctx c = {.ses = ses, .o = &o, .fn = fn, .user = user};
    if (!rc && o.n_stop > PL_STOP_MAX) rc = fail_arg("stop: at most 16 stop strings");
    if (!rc) rc = (int)pl_stop_init(&c.stop, o.stop, (int)o.n_stop, "stop");
    if (!rc && !n_prompt) rc = fail_arg("the prompt is empty");
    if (!rc) rc = check_ids(m, prompt, n_prompt);
    if (!rc && n_prompt > (size_t)m->p.so.n_ctx)
        rc = (int)pl_fail(PL_ERR_ARG, "the prompt is %zu tokens, longer than the context of %d",
                          n_prompt, m->p.so.n_ctx);
    if (rc) {
        atomic_store(&ses->cancel, 0);
        return rc;
    }
    pl_sampler_params sp = pl_api_sampler_params(&o);
    pl_sampler *smp = NULL;
    pl_drafter *dr = NULL;
    pl_grammar *gr = NULL;
    if (o.json_schema &&
        (compile_schema(o.json_schema, &gr) || wrap_schema(gr, o.json_prefix, o.json_suffix))) {
        pl_grammar_free(gr);
        pl_stop_free(&c.stop);
        atomic_store(&ses->cancel, 0);
        return POOLED_ERR_ARG;
    }
    /* one pick per emitted id, masked and watched in order: no drafts */
    if (gr || o.on_logprob) o.spec = POOLED_SPEC_OFF;
    /* up to the end of the context: n ids leave n - 1 of them in the cache */
    int64_t room = (int64_t)m->p.so.n_ctx - (int64_t)n_prompt + 1;
    int64_t n = o.max_tokens < 0 || o.max_tokens > room ? room : o.max_tokens;
    pl_gen_stats st = {0};
    pl_batcher_take(m->bt);
    pl_status s = pl_sampler_new(&sp, pl_tok_n_vocab(m->p.tok), &smp);
    if (!s && o.on_logprob) pl_sampler_set_watch(smp, watch_logits, &c);
    if (!s && gr && !m->trie) s = pl_vocab_trie_from_tok(m->p.tok, &m->trie);
    if (!s && gr) s = pl_json_constraint_new(gr, m->trie, &c.con);
    if (!s && gr) s = pl_json_constraint_attach(c.con, smp);
    if (!s && o.spec == POOLED_SPEC_MTP && !m->p.so.draft)
        s = pl_fail(PL_ERR_ARG, "spec mtp: the model was not opened for it "
                                "(pooled_model_opts.spec POOLED_SPEC_MTP)");
    if (!s) s = drafter_new(&m->p, ses->s, o.spec, &dr);
    if (!s && !(c.stream = pl_tok_stream_new(m->p.tok, false)))
        s = pl_fail(PL_ERR_NOMEM, "out of memory");
    if (!s) {
        pl_gen_opts go = {.n_predict = n, .on_token = on_token, .ud = &c, .drafter = dr};
        s = pl_batcher_generate(m->bt, ses->s, smp, prompt, (int64_t)n_prompt, &go, &st);
    }
    pl_batcher_give(m->bt);
    if (!s && c.reason != POOLED_STOP_STRING && c.reason != POOLED_STOP_CALLBACK && !c.nomem) {
        /* the end: the text held back comes with id -1 (a stop string may still cut it) */
        int why = c.reason ? c.reason : POOLED_STOP_LENGTH;
        text_step(&c, -1, pl_tok_stream_flush(c.stream), true);
        if (c.reason != POOLED_STOP_STRING) c.reason = why;
    }
    if (!s && c.nomem) s = pl_fail(PL_ERR_NOMEM, "out of memory for the generated text");
    if (res) {
        pooled_result r = {.size = sizeof r,
                           .n_prompt = (int64_t)n_prompt,
                           .n_prompt_run = st.n_prompt_run,
                           .n_gen = st.n_generated,
                           .stop_reason = c.reason,
                           .t_prompt = st.t_prompt,
                           .t_gen = st.t_decode,
                           .n_shared = st.n_shared,
                           .n_decoded = st.n_decoded,
                           .n_steps = st.n_steps,
                           .n_drafted = st.n_drafted,
                           .n_accepted = st.n_accepted};
        put_sized(res, &r, sizeof r);
    }
    if (c.stream) pl_tok_stream_free(c.stream);
    pl_stop_free(&c.stop);
    pl_drafter_free(dr);
    pl_sampler_free(smp);
    pl_json_constraint_free(c.con);
    pl_grammar_free(gr);
    atomic_store(&ses->cancel, 0);
    return (int)s;
}

int pooled_generate_text(pooled_session *ses, const char *prompt, const pooled_sample_opts *o,
                         pooled_token_fn fn, void *user, pooled_result *res) {
    if (!ses || !prompt) return fail_arg("pooled_generate_text: NULL argument");
    int32_t *ids = NULL;
    size_t n = 0;
    int rc = pooled_tokenize(ses->m, prompt, strlen(prompt), 1, 0, &ids, &n);
    if (!rc) rc = pooled_generate(ses, ids, n, o, fn, user, res);
    free(ids);
    return rc;
}
