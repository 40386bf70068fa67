/* part_id.c - the identity of a worker's layer range, hashed through a cache file on disk
 * (room.h). The cache lives on the program side ($XDG_CACHE_HOME/pooled), never in the
 * library: gguf_hash.c only reads and writes the file it is given. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/sha256.h"
#include "format/gguf_hash.h"
#include "fetch.h"
#include "room.h"

/* The hashes of the tensors of layers [first, last) of g into *h (calloc'd, one per tensor
 * of g; the others not done), through the cache file cache (NULL: none). */
static pl_status range_hashes(const pl_gguf *g, int first, int last, const char *cache,
                              pl_gguf_sel *sel, pl_tensor_hash **h) {
    *h = NULL;
    pl_status s = pl_gguf_select(g, first, last, PL_GGUF_ENDS_NONE, sel);
    if (s) return s;
    int64_t n = pl_gguf_tensor_count(g);
    if (!(*h = calloc((size_t)(n ? n : 1), sizeof **h)))
        return pl_fail(PL_ERR_NOMEM, "out of memory hashing %lld tensors", (long long)n);
    pl_hash_opts ho = {.cache_path = cache};
    s = pl_gguf_hash_tensors(g, sel, &ho, *h);
    if (s && cache) { /* an unwritable cache: hash without it */
        pl_clear_error();
        s = pl_gguf_hash_tensors(g, sel, NULL, *h);
    }
    if (s) free(*h), *h = NULL;
    return s;
}

pl_status pl_room_part_id(const pl_gguf *g, int first, int last, const char *cache,
                          uint8_t out[32]) {
    pl_gguf_sel sel;
    pl_tensor_hash *h;
    pl_status s = range_hashes(g, first, last, cache, &sel, &h);
    if (!s) s = pl_gguf_part_identity(g, &sel, h, out);
    free(h);
    return s;
}

pl_status pl_room_part_offer(const pl_gguf *g, int first, int last, const char *hash_cache,
                             uint8_t **hashes, uint32_t *n_tensors, pl_wire_part *part) {
    *hashes = NULL, *n_tensors = 0;
    *part = (pl_wire_part){.header_bytes = pl_gguf_data_offset(g)};
    int64_t n = pl_gguf_tensor_count(g);
    if (n < 1 || n > PL_WIRE_MAX_TENSORS)
        return pl_fail(PL_ERR_FORMAT, "a model of %lld tensors cannot be sent (1..%d)",
                       (long long)n, PL_WIRE_MAX_TENSORS);
    if (part->header_bytes < 1 || part->header_bytes > PL_WIRE_MAX_HEADER)
        return pl_fail(PL_ERR_FORMAT,
                       "the model file's header of %llu bytes cannot be sent "
                       "(at most %u)",
                       (unsigned long long)part->header_bytes, PL_WIRE_MAX_HEADER);
    pl_gguf_sel sel;
    pl_tensor_hash *h;
    pl_status s = range_hashes(g, first, last, hash_cache, &sel, &h);
    uint8_t *list = s ? NULL : calloc((size_t)n, 32);
    if (!s && !list)
        s = pl_fail(PL_ERR_NOMEM, "out of memory for %lld tensor hashes", (long long)n);
    for (int64_t i = 0; !s && i < n; i++) {
        if (!pl_gguf_selected(g, &sel, i)) continue;
        memcpy(list + 32 * i, h[i].sha, 32);
        part->part_bytes += pl_gguf_tensor_at(g, i)->nbytes;
    }
    if (!s) s = pl_gguf_part_identity(g, &sel, h, part->part_id);
    free(h);
    if (s) {
        free(list);
        return s;
    }
    *hashes = list, *n_tensors = (uint32_t)n;
    return PL_OK;
}

/* mkdir -p of dir (which has room for the edits), mode 0700. */
static bool make_dirs(char *dir) {
    for (char *p = dir + 1; *p; p++) {
        if (*p != '/') continue;
        *p = 0;
        bool ok = !mkdir(dir, 0700) || errno == EEXIST;
        *p = '/';
        if (!ok) return false;
    }
    return !mkdir(dir, 0700) || errno == EEXIST;
}

bool pl_room_cache_dir(char *out, size_t cap) {
    const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    int k = xdg && *xdg == '/' ? snprintf(out, cap, "%s/pooled", xdg)
            : home && *home    ? snprintf(out, cap, "%s/.cache/pooled", home)
                               : -1;
    return k >= 0 && (size_t)k < cap && make_dirs(out);
}

bool pl_room_hash_cache(const char *path, char *out, size_t cap) {
    char dir[1024];
    struct stat st;
    if (stat(path, &st) || !pl_room_cache_dir(dir, sizeof dir)) return false;
    char *real = realpath(path, NULL), key[1200], hex[65];
    snprintf(key, sizeof key, "%s\n%lld\n%lld.%09ld", real ? real : path, (long long)st.st_size,
             (long long)st.st_mtim.tv_sec, st.st_mtim.tv_nsec);
    free(real);
    pl_sha256_hex(key, strlen(key), hex);
    int k = snprintf(out, cap, "%s/hashes-%.32s", dir, hex);
    return k > 0 && (size_t)k < cap;
}
