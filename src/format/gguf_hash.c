/* gguf_hash.c - per-tensor SHA-256, the model's identity, and which tensors a part of a
 * model holds (see gguf_hash.h). */
#include "gguf_hash.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../base/file_map.h"
#include "../base/file_write.h"
#include "../base/sha256.h"
#include "../base/strbuf.h"

/* ---- which tensors a part holds ---- */

static bool key_int(const pl_gguf *g, const char *arch, const char *suffix, int64_t *v) {
    char key[96];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    return pl_gguf_get_int(g, key, v);
}

pl_status pl_gguf_select(const pl_gguf *g, int first, int last, int ends, pl_gguf_sel *out) {
    char *arch = pl_gguf_get_string(g, "general.architecture");
    if (!arch) return pl_fail(PL_ERR_FORMAT, "no general.architecture in the file");
    int64_t blocks = 0, nextn = 0;
    bool ok = key_int(g, arch, "block_count", &blocks);
    key_int(g, arch, "nextn_predict_layers", &nextn);
    free(arch);
    if (!ok || blocks < 1 || blocks > 100000 || nextn < 0 || nextn >= blocks)
        return pl_fail(PL_ERR_FORMAT, "the file has no valid block_count");
    int n_layer = (int)(blocks - nextn);
    if (ends & ~(PL_GGUF_ENDS_NONE | PL_GGUF_ENDS_EMBED | PL_GGUF_ENDS_HEAD))
        return pl_fail(PL_ERR_ARG, "unknown model ends %d (PL_ENDS_*)", ends);
    if (!ends && !last) last = n_layer;
    if (first < 0 || first > last || last > n_layer)
        return pl_fail(PL_ERR_ARG, "layer range [%d, %d) outside the model's [0, %d)", first, last,
                       n_layer);
    bool embed = ends ? (ends & PL_GGUF_ENDS_EMBED) != 0 : first == 0;
    bool head = ends ? (ends & PL_GGUF_ENDS_HEAD) != 0 : last == n_layer;
    if (first == last && !embed && !head)
        return pl_fail(PL_ERR_ARG, "layer range [%d, %d) with no ends holds nothing", first, last);
    *out = (pl_gguf_sel){first, last, embed, head, n_layer};
    return PL_OK;
}

bool pl_gguf_selected(const pl_gguf *g, const pl_gguf_sel *sel, int64_t i) {
    const pl_gguf_tensor *t = pl_gguf_tensor_at(g, i);
    if (!t) return false;
    if (!sel) return true;
    char name[128];
    snprintf(name, sizeof name, "%.*s", (int)(t->name.len < 127 ? t->name.len : 127), t->name.ptr);
    int l;
    char dot;
    if (sscanf(name, "blk.%d%c", &l, &dot) == 2 && dot == '.')
        return (l >= sel->first && l < sel->last) || (l >= sel->n_layer && sel->head);
    if (!strcmp(name, "token_embd.weight"))
        return sel->embed || (sel->head && !pl_gguf_find_tensor(g, "output.weight"));
    if (!strcmp(name, "output.weight") || !strcmp(name, "output_norm.weight")) return sel->head;
    return true;
}

void pl_gguf_layer_bytes(const pl_gguf *g, const pl_gguf_sel *sel, uint64_t *out, uint64_t *ends) {
    for (int l = 0; l < sel->n_layer; l++) out[l] = 0;
    *ends = 0;
    for (int64_t i = 0; i < pl_gguf_tensor_count(g); i++) {
        const pl_gguf_tensor *t = pl_gguf_tensor_at(g, i);
        char name[32];
        snprintf(name, sizeof name, "%.*s", (int)(t->name.len < 31 ? t->name.len : 31),
                 t->name.ptr);
        int l;
        char dot;
        if (sscanf(name, "blk.%d%c", &l, &dot) == 2 && dot == '.' && l >= 0 && l < sel->n_layer)
            out[l] += t->nbytes;
        else
            *ends += t->nbytes;
    }
}

/* ---- the cache: "pooled-tensor-hashes 1 COUNT DATA_OFFSET", then one line a tensor:
 * "INDEX OFFSET NBYTES TYPE HEX" ---- */

static bool unhex(const char *s, uint8_t out[32]) {
    for (int i = 0; i < 32; i++) {
        unsigned v;
        if (sscanf(s + 2 * i, "%2x", &v) != 1) return false;
        out[i] = (uint8_t)v;
    }
    return true;
}

static void cache_read(const pl_gguf *g, const char *path, pl_tensor_hash *cached) {
    char *text = NULL;
    size_t len = 0;
    if (pl_file_read(path, PL_HASH_CACHE_MAX, PL_READ_TEXT, &text, &len)) {
        pl_clear_error(); /* no cache yet, or an unreadable one: hash again */
        return;
    }
    int64_t n = pl_gguf_tensor_count(g);
    unsigned long long count, data;
    char *p = text, *nl = strchr(p, '\n');
    if (!nl || sscanf(p, "pooled-tensor-hashes 1 %llu %llu", &count, &data) != 2 ||
        count != (unsigned long long)n || data != pl_gguf_data_offset(g)) {
        free(text);
        return;
    }
    for (p = nl + 1; (nl = strchr(p, '\n')); p = nl + 1) {
        long long i;
        unsigned long long off, nbytes;
        unsigned type;
        char hex[65];
        uint8_t sha[32];
        if (sscanf(p, "%lld %llu %llu %u %64s", &i, &off, &nbytes, &type, hex) != 5 || i < 0 ||
            i >= n || strlen(hex) != 64 || !unhex(hex, sha))
            continue;
        const pl_gguf_tensor *t = pl_gguf_tensor_at(g, i);
        if (t->offset != off || t->nbytes != nbytes || t->type != type) continue;
        memcpy(cached[i].sha, sha, 32);
        cached[i].done = true;
    }
    free(text);
}

static pl_status cache_write(const pl_gguf *g, const char *path, const pl_tensor_hash *h) {
    pl_strbuf b = {.max = PL_HASH_CACHE_MAX};
    int64_t n = pl_gguf_tensor_count(g);
    pl_sb_printf(&b, "pooled-tensor-hashes 1 %lld %llu\n", (long long)n,
                 (unsigned long long)pl_gguf_data_offset(g));
    for (int64_t i = 0; i < n; i++) {
        if (!h[i].done) continue;
        const pl_gguf_tensor *t = pl_gguf_tensor_at(g, i);
        char hex[65];
        pl_sha256_to_hex(h[i].sha, hex);
        pl_sb_printf(&b, "%lld %llu %llu %u %s\n", (long long)i, (unsigned long long)t->offset,
                     (unsigned long long)t->nbytes, t->type, hex);
    }
    size_t len;
    char *text = pl_sb_take(&b, &len);
    if (!text) return pl_fail(PL_ERR_NOMEM, "hash cache %s: out of memory", path);
    pl_status s = pl_file_write_all(path, text, len);
    free(text);
    return s;
}

/* ---- hashing ---- */

pl_status pl_gguf_hash_tensors(const pl_gguf *g, const pl_gguf_sel *sel, const pl_hash_opts *o,
                               pl_tensor_hash *out) {
    int64_t n = pl_gguf_tensor_count(g);
    pl_tensor_hash *cached = calloc((size_t)(n ? n : 1), sizeof *cached);
    if (!cached) return pl_fail(PL_ERR_NOMEM, "out of memory hashing %lld tensors", (long long)n);
    const char *cache = o ? o->cache_path : NULL;
    if (cache) cache_read(g, cache, cached);
    uint64_t total = 0, done = 0;
    bool fresh = false;
    for (int64_t i = 0; i < n; i++) {
        out[i].done = false;
        if (pl_gguf_selected(g, sel, i) && !cached[i].done)
            total += pl_gguf_tensor_at(g, i)->nbytes;
    }
    for (int64_t i = 0; i < n; i++) {
        if (!pl_gguf_selected(g, sel, i)) continue;
        if (cached[i].done) {
            out[i] = cached[i];
            continue;
        }
        const pl_gguf_tensor *t = pl_gguf_tensor_at(g, i);
        if (!t->data && t->nbytes) {
            free(cached);
            return pl_fail(PL_ERR_ARG, "hash: tensor %lld has no data here", (long long)i);
        }
        pl_sha256 s;
        pl_sha256_init(&s);
        for (uint64_t off = 0; off < t->nbytes; off += PL_HASH_PIECE) {
            uint64_t len = t->nbytes - off < PL_HASH_PIECE ? t->nbytes - off : PL_HASH_PIECE;
            pl_sha256_update(&s, (const uint8_t *)t->data + off, (size_t)len);
            done += len;
            if (o && o->progress) o->progress(o->progress_ud, done, total);
        }
        pl_sha256_final(&s, out[i].sha);
        out[i].done = true;
        cached[i] = out[i];
        fresh = true;
    }
    pl_status st = cache && fresh ? cache_write(g, cache, cached) : PL_OK;
    free(cached);
    return st;
}

/* ---- identity ---- */

static void put_u64(pl_sha256 *s, uint64_t v) {
    uint8_t b[8];
    for (int i = 0; i < 8; i++) b[i] = (uint8_t)(v >> (8 * i));
    pl_sha256_update(s, b, 8);
}

static void put_str(pl_sha256 *s, pl_gguf_str str) {
    put_u64(s, str.len);
    pl_sha256_update(s, str.ptr, (size_t)str.len);
}

static void put_value(pl_sha256 *s, const pl_gguf_value *v, int depth) {
    put_u64(s, v->type);
    switch (v->type) {
    case PL_GGUF_STRING: put_str(s, v->str); break;
    case PL_GGUF_ARRAY:
        put_u64(s, v->arr.elem_type);
        put_u64(s, v->arr.count);
        if (v->arr.items) {
            for (uint64_t i = 0; i < v->arr.count && depth < 8; i++)
                put_value(s, &v->arr.items[i], depth + 1);
        } else if (v->arr.data) {
            pl_sha256_update(s, v->arr.data,
                             (size_t)(v->arr.count * pl_gguf_type_size(v->arr.elem_type)));
        }
        break;
    case PL_GGUF_FLOAT32:
    case PL_GGUF_FLOAT64: {
        uint64_t bits;
        memcpy(&bits, &v->f, 8);
        put_u64(s, bits);
        break;
    }
    default: put_u64(s, v->u); break; /* integers and bools (i shares u's bits) */
    }
}

static bool math_key(pl_gguf_str k) {
    if (pl_gguf_str_eq(k, "general.architecture") || pl_gguf_str_eq(k, "general.alignment"))
        return true;
    return !(k.len >= 8 && !memcmp(k.ptr, "general.", 8)) &&
           !(k.len >= 10 && !memcmp(k.ptr, "tokenizer.", 10));
}

static int key_cmp(const void *a, const void *b) {
    const pl_gguf_str *x = &(*(const pl_gguf_kv *const *)a)->key;
    const pl_gguf_str *y = &(*(const pl_gguf_kv *const *)b)->key;
    int c = memcmp(x->ptr, y->ptr, (size_t)(x->len < y->len ? x->len : y->len));
    return c ? c : (x->len > y->len) - (x->len < y->len);
}

pl_status pl_gguf_meta_digest(const pl_gguf *g, uint8_t out[32]) {
    int64_t n = pl_gguf_kv_count(g);
    const pl_gguf_kv **kvs = malloc(sizeof *kvs * (size_t)(n ? n : 1));
    if (!kvs) return pl_fail(PL_ERR_NOMEM, "out of memory hashing the metadata");
    int64_t k = 0;
    for (int64_t i = 0; i < n; i++)
        if (math_key(pl_gguf_kv_at(g, i)->key)) kvs[k++] = pl_gguf_kv_at(g, i);
    qsort(kvs, (size_t)k, sizeof *kvs, key_cmp);
    pl_sha256 s;
    pl_sha256_init(&s);
    pl_sha256_update(&s, "pooled-metadata-1", 17);
    put_u64(&s, (uint64_t)k);
    for (int64_t i = 0; i < k; i++) {
        put_str(&s, kvs[i]->key);
        put_value(&s, &kvs[i]->value, 0);
    }
    pl_sha256_final(&s, out);
    free(kvs);
    return PL_OK;
}

/* One tensor's entry of an identity: name, type, shape, bytes and the hash of its data. */
static void put_tensor(pl_sha256 *s, const pl_gguf_tensor *t, const uint8_t sha[32]) {
    put_str(s, t->name);
    put_u64(s, t->type);
    put_u64(s, t->n_dims);
    for (int d = 0; d < PL_GGUF_MAX_DIMS; d++) put_u64(s, (uint64_t)t->ne[d]);
    put_u64(s, t->nbytes);
    pl_sha256_update(s, sha, 32);
}

static pl_status no_hash(const pl_gguf_tensor *t, int64_t i) {
    return pl_fail(PL_ERR_ARG, "identity: tensor %lld (%.*s) has no hash", (long long)i,
                   (int)(t->name.len < 64 ? t->name.len : 64), t->name.ptr);
}

pl_status pl_gguf_identity(const pl_gguf *g, const pl_tensor_hash *h, uint8_t out[32]) {
    uint8_t meta[32];
    pl_status st = pl_gguf_meta_digest(g, meta);
    if (st) return st;
    pl_sha256 s;
    pl_sha256_init(&s);
    pl_sha256_update(&s, "pooled-model-identity-1", 23);
    pl_sha256_update(&s, meta, 32);
    int64_t n = pl_gguf_tensor_count(g);
    put_u64(&s, (uint64_t)n);
    for (int64_t i = 0; i < n; i++) {
        const pl_gguf_tensor *t = pl_gguf_tensor_at(g, i);
        if (!h[i].done) return no_hash(t, i);
        put_tensor(&s, t, h[i].sha);
    }
    pl_sha256_final(&s, out);
    return PL_OK;
}

pl_status pl_gguf_part_identity(const pl_gguf *g, const pl_gguf_sel *sel, const pl_tensor_hash *h,
                                uint8_t out[32]) {
    uint8_t meta[32];
    pl_status st = pl_gguf_meta_digest(g, meta);
    if (st) return st;
    pl_sha256 s;
    pl_sha256_init(&s);
    pl_sha256_update(&s, "pooled-part-identity-1", 22);
    pl_sha256_update(&s, meta, 32);
    put_u64(&s, (uint64_t)sel->first);
    put_u64(&s, (uint64_t)sel->last);
    put_u64(&s, (uint64_t)sel->embed << 1 | (uint64_t)sel->head);
    for (int64_t i = 0; i < pl_gguf_tensor_count(g); i++) {
        if (!pl_gguf_selected(g, sel, i)) continue;
        const pl_gguf_tensor *t = pl_gguf_tensor_at(g, i);
        if (!h[i].done) return no_hash(t, i);
        put_tensor(&s, t, h[i].sha);
    }
    pl_sha256_final(&s, out);
    return PL_OK;
}
