/* fetch.c - weights over the link: a worker without the model file fetches the part of its
 * layers from the host into its cache (or finds it there), and the host answers the
 * requests (fetch.h, docs/room-protocol.md "Weights over the link"). */
#include "fetch.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "base/sha256.h"
#include "conn.h"
#include "format/gguf_extract.h"
#include "room_io.h"

/* ---------------------------------------------------------------- the worker */

typedef struct {
    const pl_room_fetch_opts *o;
    int pieces;
    uint64_t total; /* bytes of the part's tensors */
    int64_t shown;  /* when the last progress line went out (ms) */
} fetcher;

static const char *piece_name(uint32_t tensor, char *buf, size_t cap) {
    if (tensor == PL_WIRE_TENSOR_HEADER) return "the header";
    snprintf(buf, cap, "tensor %u", tensor);
    return buf;
}

/* Ask the host for bytes [off, off + len) of tensor i (PL_WIRE_TENSOR_HEADER: the file's
 * header) and take exactly that into buf: a piece of anything else is refused. */
static pl_status ask(fetcher *f, uint32_t i, uint64_t off, void *buf, size_t len) {
    const pl_room_fetch_opts *o = f->o;
    if (o->die_after && f->pieces >= o->die_after)
        return pl_fail(PL_ERR_IO, "test: the worker dies after %d pieces", f->pieces);
    pl_wire_msg m = {.type = PL_MSG_WEIGHT_REQ};
    m.weight_req = (pl_wire_weight_req){.tensor = i, .offset = off, .n = (uint32_t)len};
    if (pl_room_send(o->link, &m, PL_ROOM_SEND_MS))
        return pl_fail(PL_ERR_IO, "the host left the room");
    pl_status s;
    for (int waited = 0; (s = pl_room_recv(o->link, &m, 200)) == PL_ERR; waited += 200) {
        if (o->stop && *o->stop) return pl_fail(PL_ERR_ARG, "stopped while fetching");
        if (waited >= PL_ROOM_PIECE_MS)
            return pl_fail(PL_ERR, "the host sent no weight piece within %d ms", PL_ROOM_PIECE_MS);
    }
    if (s == PL_ERR_IO) return pl_fail(PL_ERR_IO, "the host left the room");
    if (s) return pl_fail(s, "the host sent a bad weight piece: %s", pl_last_error());
    if (m.type == PL_MSG_ERROR)
        return pl_fail(PL_ERR, "the host refused this worker: %s", m.error.text);
    if (m.type != PL_MSG_WEIGHT)
        return pl_fail(PL_ERR_FORMAT, "the host sent a %s where a weight piece was due",
                       pl_wire_type_name(m.type));
    const pl_wire_weight *p = &m.weight;
    char a[32], b[32];
    if (p->tensor != i || p->offset != off || p->n != len)
        return pl_fail(PL_ERR_FORMAT,
                       "the host sent a piece of %s at [%llu, +%u) where %s at [%llu, +%zu) was "
                       "asked: refused",
                       piece_name(p->tensor, a, sizeof a), (unsigned long long)p->offset, p->n,
                       piece_name(i, b, sizeof b), (unsigned long long)off, len);
    memcpy(buf, p->data, len);
    f->pieces++;
    return PL_OK;
}

static pl_status read_piece(void *ud, int64_t i, uint64_t off, void *buf, size_t len) {
    return ask(ud, (uint32_t)i, off, buf, len);
}

static void progress(void *ud, uint64_t done, uint64_t total) {
    fetcher *f = ud;
    int64_t t = conn_now_ms();
    if (!f->o->verbose || (done < total && t - f->shown < 1000)) return;
    f->shown = t;
    fprintf(stderr, "room: fetching layers %d..%d from the host: %.1f of %.1f MiB\n", f->o->first,
            f->o->last, (double)done / (1 << 20), (double)total / (1 << 20));
}

/* The header, then the part's tensors into path (pl_gguf_extract: a temporary name, renamed
 * when every tensor matched its hash). */
static pl_status fetch(fetcher *f, const char *path) {
    const pl_room_fetch_opts *o = f->o;
    uint64_t hn = o->part->header_bytes;
    uint8_t *hdr = malloc(hn);
    pl_gguf *src = NULL;
    pl_tensor_hash *want = NULL;
    pl_status s = hdr ? PL_OK
                      : pl_fail(PL_ERR_NOMEM, "out of memory for a header of %llu bytes",
                                (unsigned long long)hn);
    for (uint64_t off = 0; !s && off < hn; off += PL_ROOM_PIECE_BYTES)
        s = ask(f, PL_WIRE_TENSOR_HEADER, off, hdr + off,
                hn - off < PL_ROOM_PIECE_BYTES ? (size_t)(hn - off) : PL_ROOM_PIECE_BYTES);
    if (!s && (s = pl_gguf_parse_header(hdr, hn, &src)))
        s = pl_fail(s, "the host's model header: %s", pl_last_error());
    pl_gguf_sel sel;
    if (!s) s = pl_gguf_select(src, o->first, o->last, PL_GGUF_ENDS_NONE, &sel);
    int64_t nt = src ? pl_gguf_tensor_count(src) : 0;
    if (!s && nt != (int64_t)o->plan->n_tensors)
        s = pl_fail(PL_ERR_FORMAT, "the host's model header lists %lld tensors, its plan %u",
                    (long long)nt, o->plan->n_tensors);
    if (!s && !(want = calloc((size_t)nt, sizeof *want)))
        s = pl_fail(PL_ERR_NOMEM, "out of memory for %lld tensor hashes", (long long)nt);
    for (int64_t i = 0; !s && i < nt; i++) {
        if (!pl_gguf_selected(src, &sel, i)) continue;
        f->total += pl_gguf_tensor_at(src, i)->nbytes;
        memcpy(want[i].sha, o->plan->hashes + 32 * i, 32);
        want[i].done = true;
    }
    if (!s && f->total != o->part->part_bytes)
        s = pl_fail(PL_ERR_FORMAT,
                    "the host's model header gives layers %d..%d %llu bytes, its part message "
                    "%llu: refused",
                    o->first, o->last, (unsigned long long)f->total,
                    (unsigned long long)o->part->part_bytes);
    struct statvfs fs;
    if (!s && !statvfs(o->cache_dir, &fs) &&
        (uint64_t)fs.f_bavail * fs.f_frsize < f->total + hn + (64u << 20))
        s = pl_fail(PL_ERR, "%s has %.0f MiB free; layers %d..%d need %.0f MiB (and 64 MiB spare)",
                    o->cache_dir, (double)fs.f_bavail * fs.f_frsize / (1 << 20), o->first, o->last,
                    (double)(f->total + hn) / (1 << 20));
    if (!s) {
        pl_extract_opts eo = {.read = read_piece,
                              .read_ud = f,
                              .piece_bytes = PL_ROOM_PIECE_BYTES,
                              .progress = progress,
                              .progress_ud = f};
        s = pl_gguf_extract(src, &sel, want, path, &eo);
    }
    free(want);
    pl_gguf_free(src);
    free(hdr);
    return s;
}

/* The identity of layers [first, last) of the part file at path (false: no such file, or
 * not one that opens). */
static bool file_part_id(const char *path, int first, int last, uint8_t id[32]) {
    pl_gguf *g = NULL;
    bool ok = !pl_gguf_open(path, &g) && !pl_room_part_id(g, first, last, NULL, id);
    pl_gguf_free(g);
    if (!ok) pl_clear_error();
    return ok;
}

/* The cache keeps the PL_ROOM_PARTS_KEEP most recently used part files (keep, the one in
 * use, among them) and no download's temporary file untouched for PL_ROOM_STALE_S. Only
 * names this module makes are ever removed. */
typedef struct {
    char path[1200];
    time_t t;
} cached;

static int newest_first(const void *a, const void *b) {
    time_t x = ((const cached *)a)->t, y = ((const cached *)b)->t;
    return (x < y) - (x > y);
}

static void prune(const char *dir, const char *keep) {
    enum { MAX_SEEN = 256 };
    cached *e = malloc(MAX_SEEN * sizeof *e);
    DIR *d = e ? opendir(dir) : NULL;
    if (!d) {
        free(e);
        return;
    }
    int n = 0;
    time_t now = time(NULL);
    for (struct dirent *de; (de = readdir(d));) {
        const char *nm = de->d_name;
        size_t len = strlen(nm);
        bool part = len == 5 + 32 + 5 && !strncmp(nm, "part-", 5) && !strcmp(nm + 37, ".gguf");
        bool tmp = !strncmp(nm, ".part-", 6) && strstr(nm, ".gguf.");
        char p[1200];
        struct stat st;
        if ((!part && !tmp) || (size_t)snprintf(p, sizeof p, "%s/%s", dir, nm) >= sizeof p ||
            lstat(p, &st) || !S_ISREG(st.st_mode))
            continue;
        if (tmp && now - st.st_mtime > PL_ROOM_STALE_S) unlink(p);
        if (part && strcmp(p, keep) && n < MAX_SEEN) {
            snprintf(e[n].path, sizeof e[n].path, "%s", p);
            e[n++].t = st.st_mtime;
        }
    }
    closedir(d);
    qsort(e, (size_t)n, sizeof *e, newest_first);
    for (int i = PL_ROOM_PARTS_KEEP - 1; i < n; i++) unlink(e[i].path);
    free(e);
}

pl_status pl_room_fetch_part(const pl_room_fetch_opts *o, char *path, size_t cap, uint8_t id[32]) {
    if (!o->cache_dir)
        return pl_fail(PL_ERR_ARG, "no cache folder for the layers fetched from the host (set "
                                   "XDG_CACHE_HOME or HOME)");
    char hex[65];
    pl_sha256_to_hex(o->part->part_id, hex);
    int k = snprintf(path, cap, "%s/part-%.32s.gguf", o->cache_dir, hex);
    if (k < 0 || (size_t)k >= cap)
        return pl_fail(PL_ERR_ARG, "the cache folder's path is too long");
    struct stat st;
    if (!stat(path, &st)) {
        if (file_part_id(path, o->first, o->last, id) && !memcmp(id, o->part->part_id, 32)) {
            utimensat(AT_FDCWD, path, NULL, 0); /* recently used */
            if (o->verbose)
                fprintf(stderr, "room: layers %d..%d from the cache (%s): nothing to fetch\n",
                        o->first, o->last, path);
            prune(o->cache_dir, path);
            return PL_OK;
        }
        fprintf(stderr,
                "room: the cached %s does not match the host's layers %d..%d: fetching them "
                "again\n",
                path, o->first, o->last);
    }
    fetcher f = {.o = o, .shown = conn_now_ms()};
    pl_status s = fetch(&f, path);
    if (!s && !file_part_id(path, o->first, o->last, id))
        s = pl_fail(PL_ERR_FORMAT, "the part fetched into %s does not open", path);
    if (s) return s;
    if (o->verbose)
        fprintf(stderr,
                "room: fetched layers %d..%d from the host: %.1f MiB in %d pieces, kept "
                "as %s\n",
                o->first, o->last, (double)(f.total + o->part->header_bytes) / (1 << 20), f.pieces,
                path);
    prune(o->cache_dir, path);
    return PL_OK;
}

/* ---------------------------------------------------------------- the host */

/* Refuse a worker's request: it hears why, the deal fails with the same line. */
static pl_status refuse(pl_room_worker *w, const char *line) {
    pl_room_send_error(w->link, PL_WERR_PROTOCOL, line);
    return pl_fail(PL_ERR_FORMAT, "the worker at %s: %s", pl_link_peer(w->link), line);
}

pl_status pl_room_serve_piece(pl_room_worker *w, const pl_gguf *g, const char *path,
                              const pl_wire_part *part, const pl_wire_weight_req *q, int bad) {
    char line[PL_WIRE_MAX_TEXT + 1];
    uint64_t all = part->header_bytes + part->part_bytes;
    if (w->sent + q->n > all) {
        snprintf(line, sizeof line, "asked for more than its layers' %llu bytes: refused",
                 (unsigned long long)all);
        return refuse(w, line);
    }
    bool header = q->tensor == PL_WIRE_TENSOR_HEADER;
    if (header && q->offset + q->n > part->header_bytes) {
        snprintf(line, sizeof line, "asked for the header past its %llu bytes: refused",
                 (unsigned long long)part->header_bytes);
        return refuse(w, line);
    }
    uint8_t *buf = malloc((size_t)q->n + 1);
    if (!buf) return pl_fail(PL_ERR_NOMEM, "out of memory for a piece of %u bytes", q->n);
    pl_status s = PL_OK;
    if (header) {
        FILE *f = fopen(path, "rb");
        if (!f || fseeko(f, (off_t)q->offset, SEEK_SET) || fread(buf, 1, q->n, f) != q->n)
            s = pl_fail(PL_ERR_IO, "cannot read the header of %s", path);
        if (f) fclose(f);
    } else {
        pl_gguf_sel sel;
        s = pl_gguf_select(g, w->first, w->last, PL_GGUF_ENDS_NONE, &sel);
        if (!s) s = pl_gguf_read_piece(g, &sel, q->tensor, q->offset, buf, q->n);
        if (s) {
            pl_room_error_text(pl_last_error(), line);
            free(buf);
            return refuse(w, line);
        }
    }
    pl_wire_msg m = {.type = PL_MSG_WEIGHT};
    m.weight = (pl_wire_weight){.tensor = q->tensor, .offset = q->offset, .n = q->n, .data = buf};
    if (bad == 1 && !header) m.weight.tensor = (q->tensor + 1) % PL_WIRE_MAX_TENSORS;
    if (bad == 2 && !header && q->n < PL_WIRE_MAX_PIECE) buf[q->n] = 0, m.weight.n = q->n + 1;
    if (!s) s = pl_room_send(w->link, &m, PL_ROOM_SEND_MS);
    free(buf);
    if (s) return pl_fail(s, "the worker at %s: %s", pl_link_peer(w->link), pl_last_error());
    w->sent += q->n;
    w->pieces++;
    return PL_OK;
}
