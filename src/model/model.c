/* model.c - loading a model from a GGUF (the family table, metadata and tensor helpers),
 * the per-sequence state's shared buffers, and the family-independent steps of the forward
 * pass (argument checks, the whole-pass convenience). Everything a family does itself goes
 * through its pl_family methods (model_internal.h). */
#include "model_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../format/gguf_hash.h"

/* pl_gguf_select (which tensors a part holds) takes the same ends flags. */
_Static_assert((int)PL_ENDS_NONE == (int)PL_GGUF_ENDS_NONE &&
                   (int)PL_ENDS_EMBED == (int)PL_GGUF_ENDS_EMBED &&
                   (int)PL_ENDS_HEAD == (int)PL_GGUF_ENDS_HEAD,
               "model ends and gguf ends differ");

/* ---- loader helpers ---- */

static pl_status key_name(pl_loader *ld, const char *suffix, char *buf, size_t cap) {
    int n = snprintf(buf, cap, "%s.%s", ld->m->info.arch, suffix);
    if (n < 0 || (size_t)n >= cap) return pl_fail(PL_ERR_FORMAT, "metadata key too long");
    return PL_OK;
}

pl_status pl_load_int(pl_loader *ld, const char *suffix, bool required, int64_t dflt,
                      int64_t *out) {
    char key[128];
    pl_status s = key_name(ld, suffix, key, sizeof key);
    if (s) return s;
    const pl_gguf_value *v = pl_gguf_get(ld->g, key);
    if (v && v->type == PL_GGUF_ARRAY)
        return pl_fail(PL_ERR_FORMAT, "%s: per-layer values are not supported", key);
    if (!pl_gguf_get_int(ld->g, key, out)) {
        if (v) return pl_fail(PL_ERR_FORMAT, "%s: expected an integer", key);
        if (required) return pl_fail(PL_ERR_FORMAT, "missing metadata %s", key);
        *out = dflt;
    }
    return PL_OK;
}

pl_status pl_load_int_in(pl_loader *ld, const char *suffix, bool required, int64_t dflt, int lo,
                         int hi, int *out) {
    int64_t v;
    pl_status s = pl_load_int(ld, suffix, required, dflt, &v);
    if (s) return s;
    if (v < lo || v > hi)
        return pl_fail(PL_ERR_FORMAT, "%s.%s = %lld is outside [%d, %d]", ld->m->info.arch, suffix,
                       (long long)v, lo, hi);
    *out = (int)v;
    return PL_OK;
}

pl_status pl_load_attn_keys(pl_loader *ld, int n_embd, pl_attn_keys *a) {
    TRY(pl_load_int_in(ld, "attention.head_count", true, 0, 1, MAX_DIM, &a->n_head));
    TRY(pl_load_int_in(ld, "attention.head_count_kv", false, a->n_head, 1, a->n_head,
                       &a->n_head_kv));
    if (a->n_head % a->n_head_kv)
        return pl_fail(PL_ERR_FORMAT, "%d heads cannot share %d kv heads", a->n_head, a->n_head_kv);
    TRY(pl_load_int_in(ld, "attention.key_length", false, n_embd / a->n_head, 1, MAX_DIM,
                       &a->head_dim));
    TRY(pl_load_int_in(ld, "attention.value_length", false, a->head_dim, 1, MAX_DIM,
                       &a->head_dim_v));
    TRY(pl_load_int_in(ld, "rope.dimension_count", false, a->head_dim, 2, a->head_dim,
                       &a->rope_dim));
    if (a->rope_dim % 2) return pl_fail(PL_ERR_FORMAT, "odd RoPE dimension %d", a->rope_dim);
    TRY(pl_load_int_in(ld, "context_length", false, 4096, 1, 1 << 30, &a->n_ctx_train));
    double eps, base;
    TRY(pl_load_float(ld, "attention.layer_norm_rms_epsilon", true, 0, &eps));
    TRY(pl_load_float(ld, "rope.freq_base", false, 10000.0, &base));
    if (!(eps >= 0 && eps < 1)) return pl_fail(PL_ERR_FORMAT, "bad RMSNorm epsilon %g", eps);
    if (!(base > 1 && base < 1e12)) return pl_fail(PL_ERR_FORMAT, "bad RoPE base %g", base);
    a->rms_eps = (float)eps;
    a->rope_base = (float)base;
    return PL_OK;
}

pl_status pl_load_float(pl_loader *ld, const char *suffix, bool required, double dflt,
                        double *out) {
    char key[128];
    pl_status s = key_name(ld, suffix, key, sizeof key);
    if (s) return s;
    if (!pl_gguf_get_float(ld->g, key, out)) {
        if (pl_gguf_get(ld->g, key)) return pl_fail(PL_ERR_FORMAT, "%s: expected a number", key);
        if (required) return pl_fail(PL_ERR_FORMAT, "missing metadata %s", key);
        *out = dflt;
    }
    return PL_OK;
}

static pl_status remember(void ***arr, int *n, int *cap, void *p) {
    if (*n == *cap) {
        int nc = *cap ? *cap * 2 : 64;
        void **na = realloc(*arr, sizeof *na * (size_t)nc);
        if (!na) return pl_fail(PL_ERR_NOMEM, "out of memory loading the model");
        *arr = na;
        *cap = nc;
    }
    (*arr)[(*n)++] = p;
    return PL_OK;
}

/* data (which outlives the model) as a weight buffer of rows x ne0, freed with the model. */
static pl_status wrap_weight(pl_loader *ld, const char *name, uint32_t type, int64_t ne0,
                             int64_t rows, const void *data, pl_buf **out) {
    pl_status s = pl_be_buf_weight(ld->m->be, type, ne0, rows, data, out);
    if (s) return pl_fail(s, "%s: %s", name, pl_last_error());
    if ((s = remember((void ***)&ld->m->bufs, &ld->m->n_bufs, &ld->m->cap_bufs, *out))) {
        pl_be_buf_free(*out);
        *out = NULL;
    }
    return s;
}

/* Tensor t is loaded: count its values and bytes, report progress. */
static void loaded(pl_loader *ld, const pl_gguf_tensor *t, int64_t values) {
    ld->m->info.n_params += values;
    ld->done += t->nbytes;
    if (ld->opts && ld->opts->progress)
        ld->opts->progress(ld->opts->progress_ud, ld->done, ld->total);
}

pl_status pl_load_tensor(pl_loader *ld, const char *name, int64_t ne0, int64_t ne1, bool required,
                         pl_buf **out) {
    return pl_load_tensor3(ld, name, ne0, ne1, 1, required, out);
}

pl_status pl_load_tensor3(pl_loader *ld, const char *name, int64_t ne0, int64_t ne1, int64_t ne2,
                          bool required, pl_buf **out) {
    *out = NULL;
    const pl_gguf_tensor *t = pl_gguf_find_tensor(ld->g, name);
    if (!t) return required ? pl_fail(PL_ERR_FORMAT, "missing tensor %s", name) : PL_OK;
    if (t->ne[0] != ne0 || t->ne[1] != ne1 || t->ne[2] != ne2 || t->ne[3] != 1) {
        char want[96];
        if (ne2 == 1)
            snprintf(want, sizeof want, "[%lld, %lld]", (long long)ne0, (long long)ne1);
        else
            snprintf(want, sizeof want, "[%lld, %lld, %lld]", (long long)ne0, (long long)ne1,
                     (long long)ne2);
        return pl_fail(PL_ERR_FORMAT, "tensor %s has shape [%lld, %lld, %lld, %lld], expected %s",
                       name, (long long)t->ne[0], (long long)t->ne[1], (long long)t->ne[2],
                       (long long)t->ne[3], want);
    }
    int64_t rows = ne1 * ne2; /* the file holds that many rows: its shape was checked */
    const pl_type_traits *tr = pl_type_get(t->type);
    if (!tr || !tr->dequant)
        return pl_fail(PL_ERR_FORMAT, "tensor %s is stored as %s, which this build cannot read",
                       name, tr ? tr->name : "an unknown type");
    if (pl_row_size(t->type, ne0) <= 0)
        return pl_fail(PL_ERR_FORMAT, "tensor %s: rows of %lld are not whole %s blocks", name,
                       (long long)ne0, tr->name);
    const void *data = t->data;
    uint32_t type = t->type;
    pl_status s;
    /* NaN/Inf weights make every output meaningless: note the first tensor that has them.
     * The scan reads every page, so it also does the prefault's work. */
    if (!ld->m->info.nonfinite[0] && pl_find_nonfinite(type, data, ne0 * rows) >= 0) {
        snprintf(ld->m->info.nonfinite, sizeof ld->m->info.nonfinite, "%s", name);
        pl_load_printable(ld->m->info.nonfinite);
    } else if (ld->m->info.nonfinite[0] && ld->opts && ld->opts->prefault) {
        /* one byte a page brings the file in */
        volatile unsigned char sink = 0;
        for (uint64_t off = 0; off < t->nbytes; off += 4096)
            sink ^= ((const unsigned char *)data)[off];
        (void)sink;
    }
    if (rows == 1 && type != PL_TYPE_F32) {
        float *copy = malloc(sizeof(float) * (size_t)ne0);
        if (!copy) return pl_fail(PL_ERR_NOMEM, "out of memory loading %s", name);
        if ((s = remember(&ld->m->owned, &ld->m->n_owned, &ld->m->cap_owned, copy))) {
            free(copy);
            return s;
        }
        if ((s = pl_dequant_row(type, data, copy, ne0))) return s;
        data = copy;
        type = PL_TYPE_F32;
    }
    if ((s = wrap_weight(ld, name, type, ne0, rows, data, out))) return s;
    loaded(ld, t, ne0 * rows);
    return PL_OK;
}

/* The bytes of the tensors a load of info's range takes (what the backend is told to
 * expect), by pl_gguf_selected's rule (the one this loader follows). */
static uint64_t range_bytes(const pl_gguf *g, const pl_model_info *in, int n_layer) {
    pl_gguf_sel sel = {in->layer_first, in->layer_last, in->has_embed, in->has_head, n_layer};
    uint64_t bytes = 0;
    for (int64_t i = 0; i < pl_gguf_tensor_count(g); i++)
        if (pl_gguf_selected(g, &sel, i)) bytes += pl_gguf_tensor_at(g, i)->nbytes;
    return bytes;
}

pl_status pl_load_layer_range(pl_loader *ld, int n_layer) {
    int ends = ld->opts ? ld->opts->ends : PL_ENDS_AUTO;
    int first = ld->opts ? ld->opts->layer_first : 0;
    int last = ld->opts ? ld->opts->layer_last : 0;
    if (ends & ~(PL_ENDS_NONE | PL_ENDS_EMBED | PL_ENDS_HEAD))
        return pl_fail(PL_ERR_ARG, "unknown model ends %d (PL_ENDS_*)", ends);
    if (ends == PL_ENDS_AUTO && !last) last = n_layer;     /* (0, 0): the whole model */
    bool empty_ok = ends & (PL_ENDS_EMBED | PL_ENDS_HEAD); /* a host holding no layer */
    if (first < 0 || first > last || last > n_layer)
        return pl_fail(PL_ERR_ARG, "layer range [%d, %d) outside the model's [0, %d)", first, last,
                       n_layer);
    if (first == last && !empty_ok)
        return pl_fail(PL_ERR_ARG,
                       "layer range [%d, %d) is empty and no embedding or head is "
                       "asked: nothing to load",
                       first, last);
    pl_model_info *info = &ld->m->info;
    info->layer_first = first;
    info->layer_last = last;
    info->has_embed = ends ? (ends & PL_ENDS_EMBED) != 0 : first == 0;
    info->has_head = ends ? (ends & PL_ENDS_HEAD) != 0 : last == n_layer;
    return pl_be_weights_expect(ld->m->be, range_bytes(ld->g, info, n_layer));
}

pl_status pl_load_tensor_split(pl_loader *ld, const char *name, int64_t ne0, int64_t ne1,
                               int64_t chunk, int n_parts, pl_buf **outs) {
    for (int p = 0; p < n_parts; p++) outs[p] = NULL;
    const pl_gguf_tensor *t = pl_gguf_find_tensor(ld->g, name);
    if (!t) return pl_fail(PL_ERR_FORMAT, "missing tensor %s", name);
    if (t->ne[0] != ne0 || t->ne[1] != ne1 || t->ne[2] != 1 || t->ne[3] != 1)
        return pl_fail(PL_ERR_FORMAT,
                       "tensor %s has shape [%lld, %lld, %lld, %lld], expected [%lld, %lld]", name,
                       (long long)t->ne[0], (long long)t->ne[1], (long long)t->ne[2],
                       (long long)t->ne[3], (long long)ne0, (long long)ne1);
    int64_t row = pl_row_size(t->type, ne0);
    const pl_type_traits *tr = pl_type_get(t->type);
    if (!tr || !tr->dequant || row <= 0)
        return pl_fail(PL_ERR_FORMAT, "tensor %s: rows of %lld in %s cannot be read", name,
                       (long long)ne0, tr ? tr->name : "an unknown type");
    if (chunk < 1 || n_parts < 1 || ne1 % (chunk * n_parts))
        return pl_fail(PL_ERR_FORMAT, "tensor %s: %lld rows do not split into %d parts of %lld",
                       name, (long long)ne1, n_parts, (long long)chunk);
    int64_t part_rows = ne1 / n_parts, groups = ne1 / chunk;
    if (!ld->m->info.nonfinite[0] && pl_find_nonfinite(t->type, t->data, ne0 * ne1) >= 0) {
        snprintf(ld->m->info.nonfinite, sizeof ld->m->info.nonfinite, "%s", name);
        pl_load_printable(ld->m->info.nonfinite);
    }
    for (int p = 0; p < n_parts; p++) {
        char *copy = malloc((size_t)(row * part_rows));
        if (!copy) return pl_fail(PL_ERR_NOMEM, "out of memory loading %s", name);
        pl_status s = remember(&ld->m->owned, &ld->m->n_owned, &ld->m->cap_owned, copy);
        if (s) {
            free(copy);
            return s;
        }
        for (int64_t g = p, k = 0; g < groups; g += n_parts, k++)
            memcpy(copy + k * chunk * row, (const char *)t->data + g * chunk * row,
                   (size_t)(chunk * row));
        if ((s = wrap_weight(ld, name, t->type, ne0, part_rows, copy, &outs[p]))) return s;
    }
    loaded(ld, t, ne0 * ne1);
    return PL_OK;
}

/* The vocabulary's size without the embedding (a part of a model holding layers only,
 * pl_gguf_extract): the tokenizer's token list, whose length the file's own bytes bound
 * (not a number in the metadata: the state's logits are sized by it). */
static bool vocab_from_metadata(const pl_loader *ld, int *n_vocab) {
    const pl_gguf_value *tok = pl_gguf_get(ld->g, "tokenizer.ggml.tokens");
    if (!tok || tok->type != PL_GGUF_ARRAY || tok->arr.count < 1 || tok->arr.count > INT32_MAX)
        return false;
    *n_vocab = (int)tok->arr.count;
    return true;
}

pl_status pl_load_ends(pl_loader *ld, int n_embd, int n_blocks, int n_layer, int *n_vocab,
                       pl_buf **tok_embd, pl_buf **out_norm, pl_buf **output) {
    pl_status s = pl_load_layer_range(ld, n_layer);
    if (s) return s;
    const pl_model_info *in = &ld->m->info;
    /* a hostile header cannot make us prepare thousands of layers from a few tensors */
    int64_t held = in->layer_last - in->layer_first + (in->has_head ? n_blocks - n_layer : 0);
    if (held > pl_gguf_tensor_count(ld->g))
        return pl_fail(PL_ERR_FORMAT, "%lld layers but only %lld tensors", (long long)held,
                       (long long)pl_gguf_tensor_count(ld->g));
    bool need_embd =
        in->has_embed || (in->has_head && !pl_gguf_find_tensor(ld->g, "output.weight"));
    const pl_gguf_tensor *te = pl_gguf_find_tensor(ld->g, "token_embd.weight");
    if (!te && (need_embd || !vocab_from_metadata(ld, n_vocab)))
        return pl_fail(PL_ERR_FORMAT, "missing tensor token_embd.weight");
    if (te && (te->ne[1] < 1 || te->ne[1] > INT32_MAX))
        return pl_fail(PL_ERR_FORMAT, "token_embd.weight has %lld rows", (long long)te->ne[1]);
    if (te) *n_vocab = (int)te->ne[1];
    bool head = in->has_head;
    if (need_embd)
        if ((s = pl_load_tensor(ld, "token_embd.weight", n_embd, *n_vocab, true, tok_embd)))
            return s;
    if (!head) return PL_OK;
    if ((s = pl_load_tensor(ld, "output_norm.weight", n_embd, 1, true, out_norm)) ||
        (s = pl_load_tensor(ld, "output.weight", n_embd, *n_vocab, false, output)))
        return s;
    if (!*output) *output = *tok_embd; /* tied */
    return PL_OK;
}

void pl_load_printable(char *s) {
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 || *s == 0x7f) *s = '?';
}

/* ---- model ---- */

/* Every model family this build runs; a GGUF's general.architecture picks one. */
static const pl_family *const families[] = {&pl_family_llama, &pl_family_qwen35};
#define N_FAMILIES (sizeof families / sizeof families[0])

size_t pl_family_count(void) {
    return N_FAMILIES;
}
const pl_family *pl_family_at(size_t i) {
    return i < N_FAMILIES ? families[i] : NULL;
}

const pl_family *pl_family_find(const char *arch) {
    for (size_t f = 0; f < N_FAMILIES; f++)
        for (const char *const *a = families[f]->archs; *a; a++)
            if (strcmp(*a, arch) == 0) return families[f];
    return NULL;
}

pl_status pl_family_check(const pl_family *f) {
    if (!f || !f->archs || !f->archs[0])
        return pl_fail(PL_ERR, "a model family serves no architecture");
#define CHECK_SLOT(slot)                                                                           \
    if (!f->slot)                                                                                  \
        return pl_fail(PL_ERR, "model family %s: method slot %s is empty", f->archs[0], #slot);
    PL_FAMILY_SLOTS(CHECK_SLOT)
    if (f->draft_absorb || f->draft || f->draft_logits) { /* a drafter has all three */
        PL_FAMILY_DRAFT_SLOTS(CHECK_SLOT)
    }
#undef CHECK_SLOT
    return PL_OK;
}

/* "llama, qwen2, qwen3": the architectures this build runs, for the error message. */
static void list_archs(char *buf, size_t cap) {
    size_t len = 0;
    buf[0] = 0;
    for (size_t f = 0; f < N_FAMILIES; f++)
        for (const char *const *a = families[f]->archs; *a && len < cap; a++) {
            int k = snprintf(buf + len, cap - len, "%s%s", len ? ", " : "", *a);
            if (k < 0) break;
            len += (size_t)k;
        }
}

/* The format holding most weight values (a "Q4_0 file" keeps its norms and odd-sized
 * matrices in other formats), and the total bytes. */
static void summarise_types(const pl_gguf *g, pl_model_info *info) {
    uint64_t by_type[PL_TYPE_COUNT] = {0};
    for (int64_t i = 0; i < pl_gguf_tensor_count(g); i++) {
        const pl_gguf_tensor *t = pl_gguf_tensor_at(g, i);
        info->weight_bytes += t->nbytes;
        if (t->type < PL_TYPE_COUNT)
            by_type[t->type] += (uint64_t)(t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3]);
    }
    int best = 0;
    for (int t = 1; t < PL_TYPE_COUNT; t++)
        if (by_type[t] > by_type[best]) best = t;
    const pl_type_traits *tr = pl_type_get((uint32_t)best);
    snprintf(info->weight_type, sizeof info->weight_type, "%s", tr ? tr->name : "?");
}

/* The weight bytes one decoded token reads, by the converter's tensor names: the loaded
 * layers' tensors (not the multi-token-prediction blocks past n_layer), of expert tensors
 * (*_exps) the n_used of n_expert a token runs, of the token embedding one row unless it
 * is also the output matrix (tied), and the rest whole. */
static uint64_t decode_bytes(const pl_gguf *g, const pl_model_info *in) {
    bool tied = !pl_gguf_find_tensor(g, "output.weight");
    double bytes = 0;
    for (int64_t i = 0; i < pl_gguf_tensor_count(g); i++) {
        const pl_gguf_tensor *t = pl_gguf_tensor_at(g, i);
        char name[128]; /* (a longer name is no tensor we know) */
        snprintf(name, sizeof name, "%.*s", (int)(t->name.len < 127 ? t->name.len : 127),
                 t->name.ptr);
        int l;
        if (sscanf(name, "blk.%d.", &l) == 1) {
            if (l < in->layer_first || l >= in->layer_last) continue;
            if (strstr(name, "_exps.") && in->n_expert > 0)
                bytes += (double)t->nbytes * in->n_expert_used / in->n_expert;
            else
                bytes += (double)t->nbytes;
        } else if (!strcmp(name, "token_embd.weight")) {
            if (tied && in->has_head) /* the output matrix: read whole */
                bytes += (double)t->nbytes;
            else if (in->has_embed) /* one row */
                bytes += t->ne[1] <= 0 ? (double)t->nbytes : (double)t->nbytes / t->ne[1];
        } else if (in->has_head) {
            bytes += (double)t->nbytes; /* output, its norm (rope_freqs: a few bytes) */
        }
    }
    return (uint64_t)bytes;
}

pl_status pl_model_load(const pl_gguf *g, pl_backend *be, const pl_model_opts *opts,
                        pl_model **out) {
    *out = NULL;
    char *arch = pl_gguf_get_string(g, "general.architecture");
    if (!arch) return pl_fail(PL_ERR_FORMAT, "no general.architecture in the file");
    const pl_family *fam = pl_family_find(arch);
    if (!fam) {
        char known[256];
        list_archs(known, sizeof known);
        pl_load_printable(arch);
        pl_status s = pl_fail(PL_ERR_FORMAT,
                              "unsupported architecture '%.40s' (this build runs %s)", arch, known);
        free(arch);
        return s;
    }
    pl_status fs = pl_family_check(fam);
    if (fs) {
        free(arch);
        return fs;
    }
    pl_model *m = calloc(1, sizeof *m);
    if (!m) {
        free(arch);
        return pl_fail(PL_ERR_NOMEM, "out of memory loading the model");
    }
    m->be = be;
    m->family = fam;
    snprintf(m->info.arch, sizeof m->info.arch, "%s", arch);
    free(arch);
    char *name = pl_gguf_get_string(g, "general.name");
    if (name) snprintf(m->info.name, sizeof m->info.name, "%s", name);
    free(name);
    pl_load_printable(m->info.name);
    summarise_types(g, &m->info);
    pl_loader ld = {.g = g, .m = m, .opts = opts, .total = m->info.weight_bytes};
    pl_status s = fam->load(&ld);
    if (s) {
        pl_model_free(m);
        return s;
    }
    m->info.decode_bytes = decode_bytes(g, &m->info);
    m->info.loaded_bytes = ld.done;
    *out = m;
    return PL_OK;
}

void pl_model_free(pl_model *m) {
    if (!m) return;
    for (int i = 0; i < m->n_bufs; i++) pl_be_buf_free(m->bufs[i]);
    for (int i = 0; i < m->n_owned; i++) free(m->owned[i]);
    free(m->bufs);
    free(m->owned);
    m->family->model_free(m);
    free(m);
}

const pl_model_info *pl_model_get_info(const pl_model *m) {
    return &m->info;
}
pl_backend *pl_model_backend(const pl_model *m) {
    return m->be;
}

/* ---- state ---- */

pl_state_opts pl_state_opts_default(const pl_model *m) {
    int ctx = m->info.n_ctx_train > 0 && m->info.n_ctx_train < 4096 ? m->info.n_ctx_train : 4096;
    return (pl_state_opts){
        .n_ctx = ctx, .kv_type = PL_TYPE_F16, .n_batch = ctx < 512 ? ctx : 512, .n_logits = 1};
}

pl_status pl_state_new(const pl_model *m, const pl_state_opts *o, pl_state **out) {
    *out = NULL;
    if (o->n_ctx < 1 || o->n_batch < 1 || o->n_logits < 1)
        return pl_fail(PL_ERR_ARG, "context, batch and logit rows must be at least 1");
    if (o->kv_type != PL_TYPE_F16 && o->kv_type != PL_TYPE_F32 && o->kv_type != PL_TYPE_Q8_0)
        return pl_fail(PL_ERR_ARG, "the KV cache is f16, f32 or q8_0");
    if (o->n_snap < 0 || o->n_snap > o->n_batch)
        return pl_fail(PL_ERR_ARG, "%d snapshots per call: 0 to the batch of %d", o->n_snap,
                       o->n_batch);
    if (o->draft && !m->info.has_draft)
        return pl_fail(PL_ERR_ARG, "this model (%s) has no draft (MTP) block", m->info.arch);
    if ((o->n_slots || o->slot_of) && !m->family->slots)
        return pl_fail(PL_ERR_ARG, "this model (%s) keeps no cache slots", m->info.arch);
    if ((o->n_slots || o->slot_of) && o->kv_type == PL_TYPE_Q8_0)
        return pl_fail(PL_ERR_ARG, "cache slots are f16 or f32, not q8_0");
    if (o->n_slots < 0 || (o->n_slots && o->slot_of))
        return pl_fail(PL_ERR_ARG, "a state either keeps slots or takes one");
    const pl_state *so = o->slot_of;
    if (so && (so->m != m || so->o.n_slots < 1 || o->slot < 0 || o->slot >= so->o.n_slots ||
               so->o.n_ctx != o->n_ctx || so->o.kv_type != o->kv_type))
        return pl_fail(PL_ERR_ARG,
                       "slot %d: not a slot of a state of this model with the same context "
                       "and cache type",
                       o->slot);
    pl_state *s = calloc(1, sizeof *s);
    if (!s) return pl_fail(PL_ERR_NOMEM, "out of memory for the state");
    s->m = m;
    s->o = *o;
    /* the family first: it refuses a context or batch too big before anything is made */
    pl_backend *be = m->be;
    pl_status st = m->family->state_new(s);
    if (!st) st = pl_be_buf_new(be, PL_TYPE_I32, o->n_batch, 1, &s->ids);
    if (!st) st = pl_be_buf_new(be, PL_TYPE_F32, m->info.n_embd, o->n_batch, &s->x);
    if (!st) st = pl_be_buf_new(be, PL_TYPE_F32, m->info.n_vocab, o->n_logits, &s->logits);
    if (st) {
        pl_state_free(s);
        return st;
    }
    *out = s;
    return PL_OK;
}

void pl_state_free(pl_state *s) {
    if (!s) return;
    s->m->family->state_free(s);
    pl_be_buf_free(s->ids);
    pl_be_buf_free(s->x);
    pl_be_buf_free(s->logits);
    free(s);
}

const pl_state_opts *pl_state_get_opts(const pl_state *s) {
    return &s->o;
}

int64_t pl_state_bytes(const pl_state *s) {
    return pl_be_buf_bytes(s->ids) + pl_be_buf_bytes(s->x) + pl_be_buf_bytes(s->logits) +
           s->m->family->state_bytes(s);
}

pl_buf *pl_state_ids(pl_state *s) {
    return s->ids;
}
pl_buf *pl_state_hidden(pl_state *s) {
    return s->x;
}
pl_buf *pl_state_logits(pl_state *s) {
    return s->logits;
}

pl_status pl_check_state_size(const pl_state *s, const pl_state_size *z) {
    const pl_backend *be = s->m->be;
    const double mib = 1024.0 * 1024.0, gib = mib * 1024.0;
    double n_ctx = s->o.n_ctx, n_batch = s->o.n_batch;
    double limit = (double)be->max_buf_bytes;
    if (limit > 0 && z->ctx_row > 0 && z->ctx_row * n_ctx > limit)
        return pl_fail(PL_ERR_ARG,
                       "a context of %d tokens needs %.1f MiB of KV cache per layer, "
                       "more than the %s device's largest buffer of %.1f MiB (--ctx "
                       "%.0f at most)",
                       s->o.n_ctx, z->ctx_row * n_ctx / mib, be->name, limit / mib,
                       floor(limit / z->ctx_row));
    if (limit > 0 && z->act_row * n_batch > limit)
        return pl_fail(PL_ERR_ARG,
                       "a batch of %d tokens needs %.1f MiB per activation buffer, "
                       "more than the %s device's largest buffer of %.1f MiB (%.0f "
                       "tokens at most)",
                       s->o.n_batch, z->act_row * n_batch / mib, be->name, limit / mib,
                       floor(limit / z->act_row));
    if (limit > 0 && z->fixed_buf > limit)
        return pl_fail(PL_ERR_ARG,
                       "a recurrent state buffer of %.1f MiB (with %d snapshots) is more "
                       "than the %s device's largest buffer of %.1f MiB",
                       z->fixed_buf / mib, s->o.n_snap, be->name, limit / mib);
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    if (pages <= 0 || page <= 0) return PL_OK;
    double mem = (double)pages * (double)page;
    mem -= (double)s->m->info.loaded_bytes; /* the weights need their room too */
    double act = z->act_tok * n_batch + z->fixed;
    if (act > mem)
        return pl_fail(PL_ERR_ARG,
                       "a batch of %d tokens needs %.1f GiB of activations and recurrent "
                       "state, more than the %.1f GiB of this machine's memory the weights leave",
                       s->o.n_batch, act / gib, mem > 0 ? mem / gib : 0.0);
    if (z->ctx_tok * n_ctx + act > mem)
        return pl_fail(PL_ERR_ARG,
                       "a context of %d tokens needs %.1f GiB of KV cache, more than "
                       "the %.1f GiB of this machine's memory the weights and "
                       "activations leave (--ctx %.0f at most)",
                       s->o.n_ctx, z->ctx_tok * n_ctx / gib, (mem - act) / gib,
                       z->ctx_tok > 0 ? floor((mem - act) / z->ctx_tok) : 0.0);
    return PL_OK;
}

pl_status pl_rope_attend(pl_buf *q, pl_buf *k, const pl_buf *v, pl_buf *kc, pl_buf *vc, int64_t n,
                         int64_t pos0, const pl_rope_params *rp, const pl_attn_params *ap,
                         pl_buf *att) {
    pl_rope_params r = *rp;
    r.n_heads = ap->n_head;
    TRY(pl_be_rope(q, n, pos0, &r));
    r.n_heads = ap->n_head_kv;
    TRY(pl_be_rope(k, n, pos0, &r));
    TRY(pl_be_kv_store(k, n, pos0, kc));
    TRY(pl_be_kv_store(v, n, pos0, vc));
    TRY(pl_be_fuse(q->be, 0)); /* the caller's fusion group ends with the stores */
    return pl_be_attention(q, kc, vc, n, pos0, ap, att);
}

pl_status pl_rope_attend_cols(pl_buf *q, pl_buf *k, const pl_buf *v, pl_buf *kc, pl_buf *vc,
                              int64_t n, const pl_buf *cols, int64_t n_ctx, int64_t max_keys,
                              const pl_rope_params *rp, const pl_attn_params *ap, pl_buf *att) {
    pl_rope_params r = *rp;
    r.n_heads = ap->n_head;
    TRY(pl_be_rope_cols(q, n, cols, max_keys, &r));
    r.n_heads = ap->n_head_kv;
    TRY(pl_be_rope_cols(k, n, cols, max_keys, &r));
    TRY(pl_be_kv_store_cols(k, n, cols, n_ctx, kc));
    TRY(pl_be_kv_store_cols(v, n, cols, n_ctx, vc));
    TRY(pl_be_fuse(q->be, 0)); /* the caller's fusion group ends with the stores */
    return pl_be_attention_cols(q, kc, vc, n, cols, n_ctx, max_keys, ap, att);
}

pl_status pl_swiglu_ffn(const pl_buf *w_gate, const pl_buf *w_up, const pl_buf *w_down,
                        const pl_buf *xn, int64_t n, int64_t n_ff, pl_buf *gate, pl_buf *up,
                        pl_buf *x) {
    TRY(pl_be_matmul(w_gate, xn, NULL, n, false, gate));
    TRY(pl_be_matmul(w_up, xn, NULL, n, false, up));
    TRY(pl_be_swiglu(gate, up, n * n_ff, gate));
    TRY(pl_be_fuse(x->be, 0)); /* the caller's fusion group ends with the SwiGLU */
    return pl_be_matmul(w_down, gate, NULL, n, true, x); /* residual add fused */
}

pl_status pl_run_head(pl_state *s, const pl_buf *norm, const pl_buf *output, float eps, pl_buf *xb,
                      int64_t n, bool all_rows) {
    int64_t d = s->m->info.n_embd;
    pl_status st;
    if (all_rows) {
        if ((st = pl_be_rms_norm(s->x, norm, n, d, eps, xb))) return st;
    } else { /* only the last token's row is needed for the next token */
        if ((st = pl_be_copy(s->x, (n - 1) * d, d, xb, 0))) return st;
        if ((st = pl_be_rms_norm(xb, norm, 1, d, eps, xb))) return st;
    }
    return pl_be_matmul(output, xb, NULL, all_rows ? n : 1, false, s->logits);
}

bool pl_state_can_rewind(const pl_state *s, int64_t n_past) {
    if (n_past < 0 || n_past > s->o.n_ctx) return false;
    return !s->m->family->can_rewind || s->m->family->can_rewind(s, n_past);
}

bool pl_state_rewinds_free(const pl_state *s) {
    return !s->m->family->can_rewind;
}

pl_status pl_state_rewind(pl_state *s, int64_t n_past) {
    if (n_past < 0 || n_past > s->o.n_ctx)
        return pl_fail(PL_ERR_ARG, "cannot rewind to position %lld: the context holds 0 to %d",
                       (long long)n_past, s->o.n_ctx);
    return s->m->family->rewind ? s->m->family->rewind(s, n_past) : PL_OK;
}

/* ---- forward ---- */

static pl_status check_rows(const pl_state *s, int64_t n, int64_t pos0) {
    if (n < 1 || n > s->o.n_batch)
        return pl_fail(PL_ERR_ARG, "%lld tokens in one call (the batch holds 1 to %d)",
                       (long long)n, s->o.n_batch);
    if (pos0 < 0 || pos0 + n > s->o.n_ctx)
        return pl_fail(PL_ERR_ARG, "context full: positions up to %lld do not fit --ctx %d",
                       (long long)(pos0 + n), s->o.n_ctx);
    return PL_OK;
}

pl_status pl_model_embed(const pl_model *m, pl_state *s, int64_t n) {
    pl_status st = check_rows(s, n, 0);
    if (st) return st;
    if (!m->info.has_embed)
        return pl_fail(PL_ERR_ARG, "this part of the model (layers %d..%d) has no embedding",
                       m->info.layer_first, m->info.layer_last);
    return m->family->embed(m, s, n);
}

pl_status pl_model_layers(const pl_model *m, pl_state *s, int64_t n, int64_t pos0, int first,
                          int last) {
    pl_status st = check_rows(s, n, pos0);
    if (st) return st;
    if (first < m->info.layer_first || last > m->info.layer_last || first > last)
        return pl_fail(PL_ERR_ARG, "layer range [%d, %d) outside the loaded [%d, %d)", first, last,
                       m->info.layer_first, m->info.layer_last);
    return m->family->layers(m, s, n, pos0, first, last);
}

pl_status pl_model_head(const pl_model *m, pl_state *s, int64_t n, bool all_rows) {
    pl_status st = check_rows(s, n, 0);
    if (st) return st;
    if (!m->info.has_head)
        return pl_fail(PL_ERR_ARG, "this part of the model (layers %d..%d) has no output head",
                       m->info.layer_first, m->info.layer_last);
    if (all_rows && n > s->o.n_logits)
        return pl_fail(PL_ERR_ARG, "%lld rows of logits asked, the state holds %d", (long long)n,
                       s->o.n_logits);
    return m->family->head(m, s, n, all_rows);
}

pl_status pl_model_forward(const pl_model *m, pl_state *s, const int32_t *ids, int64_t n,
                           int64_t pos0, bool all_rows) {
    pl_status st = check_rows(s, n, pos0);
    if (st) return st;
    if (!m->info.has_embed || !m->info.has_head)
        return pl_fail(PL_ERR_ARG, "a whole forward pass needs the whole model");
    for (int64_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= m->info.n_vocab)
            return pl_fail(PL_ERR_ARG, "token id %d outside the vocabulary of %d", ids[i],
                           m->info.n_vocab);
    if ((st = pl_be_write(s->ids, 0, ids, n * (int64_t)sizeof *ids))) return st;
    if ((st = pl_model_embed(m, s, n))) return st;
    if ((st = pl_model_layers(m, s, n, pos0, 0, m->info.n_layer))) return st;
    if ((st = pl_model_head(m, s, n, all_rows))) return st;
    return s->o.draft ? m->family->draft_absorb(m, s, n, pos0) : PL_OK;
}

bool pl_model_can_batch(const pl_model *m) {
    return m->family->layers_batch && m->info.has_embed && m->info.has_head &&
           m->info.layer_first == 0 && m->info.layer_last == m->info.n_layer;
}

bool pl_model_keeps_slots(const pl_model *m) {
    return m->family->slots && pl_model_can_batch(m);
}

pl_status pl_model_forward_batch(const pl_model *m, pl_state *b, pl_state *const *seqs,
                                 const int32_t *ids, const int64_t *pos, int n) {
    if (!pl_model_can_batch(m))
        return pl_fail(PL_ERR_ARG, "%s: no batched decode step (a whole model only)", m->info.arch);
    if (n < 1 || b->m != m || n > b->o.n_batch || n > b->o.n_logits)
        return pl_fail(PL_ERR_ARG, "%d sequences in one step (the batch state holds %d)", n,
                       b->o.n_batch < b->o.n_logits ? b->o.n_batch : b->o.n_logits);
    for (int i = 0; i < n; i++) {
        if (seqs[i]->m != m || seqs[i] == b || seqs[i]->o.draft)
            return pl_fail(PL_ERR_ARG, "sequence %d: not a plain state of this model", i);
        pl_status st = check_rows(seqs[i], 1, pos[i]);
        if (st) return st;
        for (int j = 0; j < i; j++)
            if (seqs[j] == seqs[i])
                return pl_fail(PL_ERR_ARG, "sequence %d appears twice in one step", i);
        if (ids[i] < 0 || ids[i] >= m->info.n_vocab)
            return pl_fail(PL_ERR_ARG, "token id %d outside the vocabulary of %d", ids[i],
                           m->info.n_vocab);
    }
    pl_status st;
    if ((st = pl_be_write(b->ids, 0, ids, n * (int64_t)sizeof *ids))) return st;
    if ((st = m->family->embed(m, b, n))) return st;
    if ((st = m->family->layers_batch(m, b, seqs, n, pos))) return st;
    if ((st = m->family->head(m, b, n, true))) return st;
    int64_t v = m->info.n_vocab;
    for (int i = 0; i < n && !st; i++) st = pl_be_copy(b->logits, i * v, v, seqs[i]->logits, 0);
    return st;
}

pl_status pl_model_draft(const pl_model *m, pl_state *s, int64_t pos, int32_t next, int k,
                         int32_t *out, int *n_out) {
    *n_out = 0;
    if (!s->o.draft) return pl_fail(PL_ERR_ARG, "the state was not made to draft (opts.draft)");
    if (next < 0 || next >= m->info.n_vocab)
        return pl_fail(PL_ERR_ARG, "token id %d outside the vocabulary of %d", next,
                       m->info.n_vocab);
    if (pos < 0 || pos >= s->o.n_ctx) return PL_OK;
    if (k > s->o.n_batch) k = s->o.n_batch;
    if (k > s->o.n_ctx - pos) k = (int)(s->o.n_ctx - pos);
    if (k < 1) return PL_OK;
    return m->family->draft(m, s, pos, next, k, out, n_out);
}

pl_status pl_model_draft_absorb(const pl_model *m, pl_state *s, int64_t n, int64_t pos0) {
    pl_status st = check_rows(s, n, pos0);
    if (st || !s->o.draft) return st;
    return m->family->draft_absorb(m, s, n, pos0); /* a state drafts only where has_draft */
}

pl_buf *pl_state_draft_logits(pl_state *s) {
    return s->o.draft ? s->m->family->draft_logits(s) : NULL;
}
