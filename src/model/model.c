/* model.c - loading a model from a GGUF (the family table, metadata and tensor helpers),
 * the per-sequence state's shared buffers, and the family-independent steps of the forward
 * pass (argument checks, the whole-pass convenience). Everything a family does itself goes
 * through its pl_family methods (model_internal.h). */
#include "model_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
    if ((s = pl_be_buf_weight(ld->m->be, type, ne0, rows, data, out)))
        return pl_fail(s, "%s: %s", name, pl_last_error());
    if ((s = remember((void ***)&ld->m->bufs, &ld->m->n_bufs, &ld->m->cap_bufs, *out))) {
        pl_be_buf_free(*out);
        *out = NULL;
        return s;
    }
    ld->m->info.n_params += ne0 * rows;
    ld->done += t->nbytes;
    if (ld->opts && ld->opts->progress)
        ld->opts->progress(ld->opts->progress_ud, ld->done, ld->total);
    return PL_OK;
}

pl_status pl_load_layer_range(pl_loader *ld, int n_layer) {
    int first = ld->opts ? ld->opts->layer_first : 0;
    int last = ld->opts && ld->opts->layer_last ? ld->opts->layer_last : n_layer;
    if (first < 0 || first >= last || last > n_layer)
        return pl_fail(PL_ERR_ARG, "layer range [%d, %d) outside the model's [0, %d)", first, last,
                       n_layer);
    pl_model_info *info = &ld->m->info;
    info->layer_first = first;
    info->layer_last = last;
    info->has_embed = first == 0;
    info->has_head = last == n_layer;
    return PL_OK;
}

void pl_load_printable(char *s) {
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 || *s == 0x7f) *s = '?';
}

/* ---- model ---- */

/* Every model family this build runs; a GGUF's general.architecture picks one. */
static const pl_family *const families[] = {&pl_family_llama};
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
    if (o->kv_type != PL_TYPE_F16 && o->kv_type != PL_TYPE_F32)
        return pl_fail(PL_ERR_ARG, "the KV cache is f16 or f32");
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
    return pl_model_head(m, s, n, all_rows);
}
