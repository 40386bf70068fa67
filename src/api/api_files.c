/* api_files.c - include/pooled.h's file tools: a GGUF's header, metadata and tensor table
 * (format/gguf.c's reader, its values handed out as pooled_gguf_value), quantizing a model
 * (format/quantize.c) and writing a synthetic one (synth/). The pooled command's info,
 * quantize and synth are these calls and their printing. */
#include <pooled.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api_internal.h"

#include "../base/file_write.h"
#include "../format/gguf.h"
#include "../format/quant.h"
#include "../format/quantize.h"
#include "../synth/synth.h"

_Static_assert((int)POOLED_GGUF_FLOAT64 == (int)PL_GGUF_FLOAT64 &&
                   (int)POOLED_GGUF_ARRAY == (int)PL_GGUF_ARRAY &&
                   (int)POOLED_GGUF_STRING == (int)PL_GGUF_STRING &&
                   (int)POOLED_GGUF_BOOL == (int)PL_GGUF_BOOL,
               "pooled.h's GGUF value types are the file's codes");
_Static_assert(PL_TYPE_COUNT <= POOLED_TENSOR_TYPES, "POOLED_TENSOR_TYPES covers every type id");
_Static_assert(PL_GGUF_MAX_DIMS == 4, "pooled_gguf_tensor.ne has 4 dimensions");

static int fail_arg(const char *what) {
    return (int)pl_fail(PL_ERR_ARG, "%s", what);
}

/* ------------------------------------------------------------------ GGUF files */

struct pooled_gguf {
    pl_gguf *g;
};

pooled_gguf *pl_api_gguf_wrap(pl_gguf *g) {
    pooled_gguf *h = g ? calloc(1, sizeof *h) : NULL;
    if (h)
        h->g = g;
    else
        pl_gguf_free(g);
    return h;
}

int pooled_gguf_open(const char *path, pooled_gguf **out) {
    if (!out) return fail_arg("pooled_gguf_open: out is NULL");
    *out = NULL;
    if (!path) return fail_arg("pooled_gguf_open: path is NULL");
    pooled_gguf *h = calloc(1, sizeof *h);
    if (!h) return (int)pl_fail(PL_ERR_NOMEM, "out of memory");
    pl_status st = pl_gguf_open(path, &h->g);
    if (st) {
        free(h);
        return (int)st;
    }
    *out = h;
    return POOLED_OK;
}

void pooled_gguf_close(pooled_gguf *g) {
    if (!g) return;
    pl_gguf_free(g->g);
    free(g);
}

int pooled_gguf_get_header(const pooled_gguf *g, pooled_gguf_header *h) {
    if (!g || !h) return fail_arg("pooled_gguf_get_header: NULL argument");
    if (h->size < sizeof(size_t)) return fail_arg("pooled_gguf_header: size is not set");
    pooled_gguf_header r = {.size = sizeof r,
                            .version = pl_gguf_version(g->g),
                            .alignment = pl_gguf_alignment(g->g),
                            .data_offset = pl_gguf_data_offset(g->g),
                            .file_size = pl_gguf_file_size(g->g),
                            .n_kv = pl_gguf_kv_count(g->g),
                            .n_tensors = pl_gguf_tensor_count(g->g)};
    size_t w = h->size < sizeof r ? h->size : sizeof r;
    memcpy(h, &r, w);
    h->size = w;
    return POOLED_OK;
}

/* v as pooled.h gives it; ref: where an array's elements are (the reader's value, which
 * lives as long as the file). */
static void to_public(const pl_gguf_value *v, pooled_gguf_value *out) {
    memset(out, 0, sizeof *out);
    out->type = (int)v->type;
    switch (v->type) {
    case PL_GGUF_INT8:
    case PL_GGUF_INT16:
    case PL_GGUF_INT32:
    case PL_GGUF_INT64: out->i = v->i; break;
    case PL_GGUF_FLOAT32:
    case PL_GGUF_FLOAT64: out->f = v->f; break;
    case PL_GGUF_STRING:
        out->str = v->str.ptr;
        out->len = v->str.len;
        break;
    case PL_GGUF_ARRAY:
        out->elem_type = (int)v->arr.elem_type;
        out->count = v->arr.count;
        out->ref = v;
        break;
    default: out->u = v->u; break; /* unsigned integers, bool */
    }
}

int pooled_gguf_kv_at(const pooled_gguf *g, int64_t i, const char **key, uint64_t *key_len,
                      pooled_gguf_value *v) {
    if (!g || !key || !key_len || !v) return fail_arg("pooled_gguf_kv_at: NULL argument");
    if (i < 0 || i >= pl_gguf_kv_count(g->g))
        return (int)pl_fail(PL_ERR_ARG, "pooled_gguf_kv_at: no item %lld (the file has %lld)",
                            (long long)i, (long long)pl_gguf_kv_count(g->g));
    const pl_gguf_kv *kv = pl_gguf_kv_at(g->g, i);
    *key = kv->key.ptr;
    *key_len = kv->key.len;
    to_public(&kv->value, v);
    return POOLED_OK;
}

int pooled_gguf_find(const pooled_gguf *g, const char *key, pooled_gguf_value *v) {
    if (!g || !key || !v) return fail_arg("pooled_gguf_find: NULL argument");
    const pl_gguf_value *x = pl_gguf_get(g->g, key);
    if (!x) return (int)pl_fail(PL_ERR_ARG, "no key %s in the file", key);
    to_public(x, v);
    return POOLED_OK;
}

int pooled_gguf_array_at(const pooled_gguf_value *arr, uint64_t i, pooled_gguf_value *out) {
    if (!arr || !out) return fail_arg("pooled_gguf_array_at: NULL argument");
    const pl_gguf_value *a = arr->ref;
    if (arr->type != POOLED_GGUF_ARRAY || !a)
        return fail_arg("pooled_gguf_array_at: not an array value of an open file");
    if (i >= a->arr.count)
        return (int)pl_fail(PL_ERR_ARG, "pooled_gguf_array_at: no element %llu (it has %llu)",
                            (unsigned long long)i, (unsigned long long)a->arr.count);
    if (a->arr.elem_type == PL_GGUF_STRING || a->arr.elem_type == PL_GGUF_ARRAY) {
        to_public(&a->arr.items[i], out); /* kept by the reader: a nested array's ref */
        return POOLED_OK;
    }
    pl_gguf_value x;
    if (!pl_gguf_arr_at(a, i, &x)) return fail_arg("pooled_gguf_array_at: unreadable element");
    to_public(&x, out);
    return POOLED_OK;
}

int pooled_gguf_tensor_at(const pooled_gguf *g, int64_t i, pooled_gguf_tensor *t) {
    if (!g || !t) return fail_arg("pooled_gguf_tensor_at: NULL argument");
    if (i < 0 || i >= pl_gguf_tensor_count(g->g))
        return (int)pl_fail(PL_ERR_ARG, "pooled_gguf_tensor_at: no tensor %lld (the file has %lld)",
                            (long long)i, (long long)pl_gguf_tensor_count(g->g));
    const pl_gguf_tensor *x = pl_gguf_tensor_at(g->g, i);
    const char *tn = pooled_tensor_type_name((int)x->type);
    *t = (pooled_gguf_tensor){.name = x->name.ptr,
                              .name_len = x->name.len,
                              .type = (int)x->type,
                              .type_name = tn ? tn : "?",
                              .n_dims = (int)x->n_dims,
                              .offset = x->offset,
                              .nbytes = x->nbytes};
    for (int d = 0; d < 4; d++) t->ne[d] = x->ne[d];
    return POOLED_OK;
}

const char *pooled_gguf_type_name(int type) {
    return type >= 0 && type < PL_GGUF_TYPE_COUNT ? pl_gguf_type_name((uint32_t)type) : "?";
}

const char *pooled_tensor_type_name(int type) {
    const pl_type_traits *tr = type >= 0 ? pl_type_get((uint32_t)type) : NULL;
    return tr ? tr->name : NULL;
}

/* ------------------------------------------------------------------ quantize */

pooled_quantize_opts pooled_quantize_opts_default(void) {
    return (pooled_quantize_opts){.size = sizeof(pooled_quantize_opts)};
}

const char *pooled_quantize_types(void) {
    return pl_quantize_file_type_names();
}

#define MAX_TENSOR_TYPES 256

int pooled_quantize(const char *in_path, const char *out_path, const pooled_quantize_opts *opts) {
    pooled_quantize_opts o = pooled_quantize_opts_default();
    int rc = pl_api_take_opts(&o, sizeof o, opts, "pooled_quantize_opts");
    if (rc) return rc;
    if (!in_path || !out_path) return fail_arg("pooled_quantize: NULL path");
    if (!o.type) return fail_arg("pooled_quantize: no type given");
    int ft = pl_quantize_file_type_from_name(o.type);
    if (ft < 0)
        return (int)pl_fail(PL_ERR_ARG, "quantize: unknown or unsupported type '%s' (one of: %s)",
                            o.type, pl_quantize_file_type_names());
    if (o.n_tensor_types > MAX_TENSOR_TYPES || (o.n_tensor_types && !o.tensor_types))
        return fail_arg("tensor_types: at most 256 PATTERN=TYPE items");
    if (o.n_threads < 0 || o.n_threads > PL_QUANTIZE_MAX_THREADS)
        return fail_arg("n_threads: expected 0 (one per core) to 32");
    /* the patterns cut from their types in copies (the caller's strings stay as they are) */
    pl_quant_override *ov = calloc(o.n_tensor_types + 1, sizeof *ov);
    char **pat = calloc(o.n_tensor_types + 1, sizeof *pat);
    if (!ov || !pat) rc = (int)pl_fail(PL_ERR_NOMEM, "out of memory");
    for (size_t i = 0; !rc && i < o.n_tensor_types; i++) {
        const char *v = o.tensor_types[i], *eq = v ? strrchr(v, '=') : NULL;
        int t = eq ? pl_type_from_name(eq + 1) : -1;
        if (!eq || eq == v || t < 0) {
            rc = (int)pl_fail(PL_ERR_ARG,
                              "--tensor-type: expected PATTERN=TYPE with a known type, got '%s'",
                              v ? v : "(null)");
            break;
        }
        if (!(pat[i] = strndup(v, (size_t)(eq - v)))) {
            rc = (int)pl_fail(PL_ERR_NOMEM, "out of memory");
            break;
        }
        ov[i] = (pl_quant_override){pat[i], (uint32_t)t};
    }
    if (!rc) {
        pl_quantize_params p = {.file_type = ft,
                                .overrides = ov,
                                .n_overrides = (int)o.n_tensor_types,
                                .pure = o.pure != 0,
                                .note = o.note,
                                .progress = o.progress,
                                .ctx = o.user,
                                .n_threads = o.n_threads};
        rc = (int)pl_quantize_file(in_path, out_path, &p);
    }
    for (size_t i = 0; pat && i < o.n_tensor_types; i++) free(pat[i]);
    free(pat);
    free(ov);
    return rc;
}

/* ------------------------------------------------------------------ synth */

int pooled_synth_preset_at(int i, pooled_synth_preset *p) {
    if (!p) return fail_arg("pooled_synth_preset_at: NULL argument");
    const pl_synth_config *c = i >= 0 ? pl_synth_preset_at(i) : NULL;
    if (!c) return (int)pl_fail(PL_ERR_ARG, "no preset %d", i);
    *p = (pooled_synth_preset){.name = c->preset,
                               .arch = c->arch,
                               .n_layer = c->n_layer,
                               .n_embd = c->n_embd,
                               .n_head = c->n_head,
                               .n_head_kv = c->n_head_kv,
                               .head_dim = c->head_dim,
                               .n_ff = c->n_ff,
                               .n_vocab = c->n_vocab,
                               .tied = c->tied,
                               .n_expert = c->n_expert,
                               .n_expert_used = c->n_expert_used,
                               .n_ff_exp = c->n_ff_exp,
                               .n_ff_shexp = c->n_ff_shexp,
                               .full_attn_interval = c->full_attn_interval,
                               .ssm_k_heads = c->ssm_k_heads,
                               .ssm_v_heads = c->ssm_v_heads,
                               .ssm_v_dim = c->ssm_v_dim};
    return POOLED_OK;
}

pooled_synth_opts pooled_synth_opts_default(void) {
    return (pooled_synth_opts){.size = sizeof(pooled_synth_opts), .type = "f16", .seed = 1};
}

int pooled_synth(const char *out_path, const pooled_synth_opts *opts) {
    pooled_synth_opts o = pooled_synth_opts_default();
    int rc = pl_api_take_opts(&o, sizeof o, opts, "pooled_synth_opts");
    if (rc) return rc;
    if (!out_path) return fail_arg("pooled_synth: out_path is NULL");
    if (!o.preset) return fail_arg("synth: no preset given");
    const pl_synth_config *found = pl_synth_preset(NULL, o.preset);
    if (!found) return (int)pl_fail(PL_ERR_ARG, "synth: unknown preset '%s'", o.preset);
    const char *type_name = o.type ? o.type : "f16";
    /* a plain type ("q4_k") or a llama-quantize file type ("Q4_K_M": its main type) */
    int ft = pl_quantize_file_type_from_name(type_name);
    int type = ft >= 0 ? pl_quantize_base_type(ft) : pl_type_from_name(type_name);
    if (type < 0) return (int)pl_fail(PL_ERR_ARG, "synth: unknown type '%s'", type_name);
    if (o.n_layer < 0 || o.n_layer > 1000) return fail_arg("synth: n_layer: expected 0 to 1000");
    if (o.n_vocab && (o.n_vocab < PL_SYNTH_MIN_VOCAB || o.n_vocab > (1 << 22)))
        return (int)pl_fail(PL_ERR_ARG, "synth: n_vocab: expected 0 or %d to %d",
                            PL_SYNTH_MIN_VOCAB, 1 << 22);
    if (o.n_threads < 0 || o.n_threads > 64) return fail_arg("synth: n_threads: expected 0 to 64");
    if (o.n_vocab && o.vocab_from)
        return fail_arg("synth: n_vocab and vocab_from exclude each other");
    if (o.vocab_from && pl_file_same(o.vocab_from, out_path))
        return (int)pl_fail(PL_ERR_ARG, "synth: %s: output would overwrite the vocab_from file",
                            out_path);
    pl_synth_config c = *found;
    if (o.n_layer) c.n_layer = o.n_layer;
    if (o.n_vocab) c.n_vocab = o.n_vocab;
    pl_gguf *vocab_src = NULL;
    if (o.vocab_from && (rc = (int)pl_gguf_open(o.vocab_from, &vocab_src))) return rc;
    pl_synth_opts so = {(uint32_t)type, vocab_src, o.note, o.user};
    pl_gguf *plan = NULL;
    rc = (int)pl_synth_plan(&c, &so, &plan);
    pl_gguf_free(vocab_src); /* the plan holds copies of what it took */
    if (rc) return rc;
    rc = o.zeros ? (int)pl_synth_write_zeros(plan, out_path)
                 : (int)pl_synth_write(plan, &c, o.seed, o.n_threads ? o.n_threads : 2, out_path,
                                       o.progress, o.user);
    pl_gguf_free(plan);
    return rc;
}
