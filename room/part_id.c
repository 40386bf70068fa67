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
#include "room.h"

pl_status pl_room_part_id(const pl_gguf *g, int first, int last, const char *cache,
                          uint8_t out[32]) {
    pl_gguf_sel sel;
    pl_status s = pl_gguf_select(g, first, last, PL_GGUF_ENDS_NONE, &sel);
    if (s) return s;
    int64_t n = pl_gguf_tensor_count(g);
    pl_tensor_hash *h = calloc((size_t)(n ? n : 1), sizeof *h);
    if (!h) return pl_fail(PL_ERR_NOMEM, "out of memory hashing %lld tensors", (long long)n);
    pl_hash_opts ho = {.cache_path = cache};
    s = pl_gguf_hash_tensors(g, &sel, &ho, h);
    if (s && cache) { /* an unwritable cache: hash without it */
        pl_clear_error();
        s = pl_gguf_hash_tensors(g, &sel, NULL, h);
    }
    if (!s) s = pl_gguf_part_identity(g, &sel, h, out);
    free(h);
    return s;
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

bool pl_room_hash_cache(const char *path, char *out, size_t cap) {
    const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    char dir[1024];
    int k = xdg && *xdg == '/' ? snprintf(dir, sizeof dir, "%s/pooled", xdg)
            : home && *home    ? snprintf(dir, sizeof dir, "%s/.cache/pooled", home)
                               : -1;
    struct stat st;
    if (k < 0 || (size_t)k >= sizeof dir || stat(path, &st) || !make_dirs(dir)) return false;
    char *real = realpath(path, NULL), key[1200], hex[65];
    snprintf(key, sizeof key, "%s\n%lld\n%lld.%09ld", real ? real : path, (long long)st.st_size,
             (long long)st.st_mtim.tv_sec, st.st_mtim.tv_nsec);
    free(real);
    pl_sha256_hex(key, strlen(key), hex);
    k = snprintf(out, cap, "%s/hashes-%.32s", dir, hex);
    return k > 0 && (size_t)k < cap;
}
