/* gguf_extract.c - write one part of a model as its own GGUF from pieces checked against
 * the tensors' hashes, and serve those pieces (see gguf_extract.h). */
#include "gguf_extract.h"

#include <stdlib.h>
#include <string.h>

#include "../base/file_write.h"
#include "../base/sha256.h"

static const char *tname(const pl_gguf_tensor *t, char *buf, size_t cap) {
    snprintf(buf, cap, "%.*s", (int)(t->name.len < 64 ? t->name.len : 64), t->name.ptr);
    return buf;
}

pl_status pl_gguf_read_piece(const pl_gguf *g, const pl_gguf_sel *sel, int64_t i, uint64_t off,
                             void *buf, size_t len) {
    const pl_gguf_tensor *t = pl_gguf_tensor_at(g, i);
    char nm[80];
    if (!t || i < 0)
        return pl_fail(PL_ERR_ARG, "piece of tensor %lld: the model has %lld tensors", (long long)i,
                       (long long)pl_gguf_tensor_count(g));
    if (!pl_gguf_selected(g, sel, i))
        return pl_fail(PL_ERR_ARG, "piece of tensor %s: not in the part asked for",
                       tname(t, nm, sizeof nm));
    if (len > PL_PIECE_MAX)
        return pl_fail(PL_ERR_ARG, "piece of %zu bytes: at most %zu", len, PL_PIECE_MAX);
    if (off > t->nbytes || len > t->nbytes - off)
        return pl_fail(PL_ERR_ARG, "piece [%llu, +%zu) of tensor %s: past its %llu bytes",
                       (unsigned long long)off, len, tname(t, nm, sizeof nm),
                       (unsigned long long)t->nbytes);
    if (!t->data) return pl_fail(PL_ERR_ARG, "tensor %s has no data here", tname(t, nm, sizeof nm));
    memcpy(buf, (const uint8_t *)t->data + off, len);
    return PL_OK;
}

typedef struct {
    const pl_gguf *g;
    const pl_gguf_sel *sel;
} own_reader;

static pl_status read_own(void *ud, int64_t i, uint64_t off, void *buf, size_t len) {
    own_reader *r = ud;
    return pl_gguf_read_piece(r->g, r->sel, i, off, buf, len);
}

/* The header of the part: every key of src, the part's tensors in src's order. */
static pl_status part_header(const pl_gguf *src, const pl_gguf_sel *sel, pl_gguf **out) {
    pl_gguf *g = pl_gguf_new();
    if (!g) return pl_fail(PL_ERR_NOMEM, "out of memory building the part's header");
    char name[1024];
    pl_status s = PL_OK;
    for (int64_t i = 0; !s && i < pl_gguf_kv_count(src); i++) {
        const pl_gguf_kv *kv = pl_gguf_kv_at(src, i);
        if (kv->key.len >= sizeof name || memchr(kv->key.ptr, 0, (size_t)kv->key.len)) {
            s = pl_fail(PL_ERR_FORMAT, "metadata key %lld is too long to copy", (long long)i);
            break;
        }
        snprintf(name, sizeof name, "%.*s", (int)kv->key.len, kv->key.ptr);
        s = pl_gguf_set_value(g, name, &kv->value);
    }
    for (int64_t i = 0; !s && i < pl_gguf_tensor_count(src); i++) {
        const pl_gguf_tensor *t = pl_gguf_tensor_at(src, i);
        if (!pl_gguf_selected(src, sel, i)) continue;
        if (t->name.len >= sizeof name || memchr(t->name.ptr, 0, (size_t)t->name.len)) {
            s = pl_fail(PL_ERR_FORMAT, "tensor %lld has a name too long to copy", (long long)i);
            break;
        }
        snprintf(name, sizeof name, "%.*s", (int)t->name.len, t->name.ptr);
        s = pl_gguf_add_tensor(g, name, t->type, t->n_dims, t->ne, NULL);
        if (s == PL_ERR_NOMEM) s = pl_fail(s, "out of memory building the part's header");
    }
    if (s) {
        pl_gguf_free(g);
        return s;
    }
    *out = g;
    return PL_OK;
}

pl_status pl_gguf_extract(const pl_gguf *src, const pl_gguf_sel *sel, const pl_tensor_hash *want,
                          const char *path, const pl_extract_opts *o) {
    own_reader own = {src, sel};
    pl_piece_reader read = o && o->read ? o->read : read_own;
    void *ud = o && o->read ? o->read_ud : &own;
    size_t piece = o && o->piece_bytes ? o->piece_bytes : PL_PIECE_DEFAULT;
    if (piece > PL_PIECE_MAX)
        return pl_fail(PL_ERR_ARG, "pieces of %zu bytes: at most %zu", piece, PL_PIECE_MAX);
    uint64_t total = 0, done = 0;
    char nm[80];
    for (int64_t i = 0; i < pl_gguf_tensor_count(src); i++) {
        if (!pl_gguf_selected(src, sel, i)) continue;
        if (!want || !want[i].done)
            return pl_fail(PL_ERR_ARG, "extract: no expected hash for tensor %s",
                           tname(pl_gguf_tensor_at(src, i), nm, sizeof nm));
        total += pl_gguf_tensor_at(src, i)->nbytes;
    }
    pl_gguf *part = NULL;
    pl_status s = part_header(src, sel, &part);
    if (s) return s;
    uint8_t *buf = malloc(piece);
    pl_file_out out = {0};
    if (!buf) s = pl_fail(PL_ERR_NOMEM, "out of memory for a piece of %zu bytes", piece);
    if (!s) s = pl_file_out_open(&out, path);
    if (!s) s = pl_gguf_write_header(part, out.f);
    for (int64_t i = 0; !s && i < pl_gguf_tensor_count(src); i++) {
        if (!pl_gguf_selected(src, sel, i)) continue;
        const pl_gguf_tensor *t = pl_gguf_tensor_at(src, i);
        pl_sha256 h;
        pl_sha256_init(&h);
        for (uint64_t off = 0; !s && off < t->nbytes; off += piece) {
            size_t len = t->nbytes - off < piece ? (size_t)(t->nbytes - off) : piece;
            if ((s = read(ud, i, off, buf, len))) break;
            pl_sha256_update(&h, buf, len);
            if (fwrite(buf, 1, len, out.f) != len) s = pl_file_out_failed(&out);
            done += len;
            if (!s && o && o->progress) o->progress(o->progress_ud, done, total);
        }
        if (s) break;
        uint8_t got[32];
        pl_sha256_final(&h, got);
        if (memcmp(got, want[i].sha, 32))
            s = pl_fail(PL_ERR_FORMAT, "tensor %s: the bytes received do not match its hash",
                        tname(t, nm, sizeof nm));
        else
            s = pl_gguf_write_padding(part, out.f, t->nbytes);
    }
    if (!s) s = pl_file_out_commit(&out);
    pl_file_out_abort(&out);
    free(buf);
    pl_gguf_free(part);
    return s;
}
