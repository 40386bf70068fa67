/* gguf_part_test.c - a model's identity and its parts (format/gguf_hash.h,
 * format/gguf_extract.h) on stories260K: per-tensor SHA-256 equal to sha256sum of the
 * tensor's bytes in the file, a layer range hashing only its tensors, the hash cache
 * (reused, and ignored when it belongs to another file), the identity (same for the same
 * model, different for another); a part extracted to its own GGUF that, loaded with the
 * same range, gives bit-identical logits through a chain (chain_check.h); an interrupted
 * or corrupted extraction leaves no file; pieces served only within a part and a tensor. */
#include <dirent.h>
#include <sys/stat.h>

#include "cpu/cpu.h"
#include "base/file_map.h"
#include "base/sha256.h"
#include "format/gguf_extract.h"
#include "test.h"

#include "runtime/chain_check.h" /* (after test.h) */

#define MODEL "models/stories260K.gguf"

typedef struct {
    int calls;
    uint64_t done, total;
} prog;

static void on_progress(void *ud, uint64_t done, uint64_t total) {
    prog *p = ud;
    p->calls++;
    p->done = done, p->total = total;
}

static int files_in(const char *dir) {
    DIR *d = opendir(dir);
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d));)
        n += e->d_name[0] != '.' || strlen(e->d_name) > 2;
    if (d) closedir(d);
    return n;
}

static int64_t find(const pl_gguf *g, const char *name) {
    for (int64_t i = 0; i < pl_gguf_tensor_count(g); i++)
        if (pl_gguf_str_eq(pl_gguf_tensor_at(g, i)->name, name)) return i;
    return -1;
}

/* sha256sum of a tensor's bytes cut from the file by dd: an independent SHA-256. */
static void check_against_sha256sum(const pl_gguf *g, const pl_tensor_hash *h, const char *name) {
    int64_t i = find(g, name);
    const pl_gguf_tensor *t = pl_gguf_tensor_at(g, i);
    char cmd[1024], out[128] = {0}, hex[65];
    snprintf(cmd, sizeof cmd,
             "dd if='%s' bs=1 skip=%llu count=%llu status=none iflag=skip_bytes,count_bytes "
             "bs=65536 | sha256sum",
             test_shared(MODEL), (unsigned long long)(pl_gguf_data_offset(g) + t->offset),
             (unsigned long long)t->nbytes);
    FILE *p = popen(cmd, "r");
    CHECK(p && fgets(out, sizeof out, p), "sha256sum of %s", name);
    if (p) pclose(p);
    pl_sha256_to_hex(h[i].sha, hex);
    CHECK(h[i].done && !strncmp(out, hex, 64), "%s: %s, sha256sum says %.64s", name, hex, out);
}

static void test_hashes(const pl_gguf *g, pl_tensor_hash *all) {
    int64_t n = pl_gguf_tensor_count(g);
    prog p = {0};
    pl_hash_opts o = {.progress = on_progress, .progress_ud = &p};
    CHECK(pl_gguf_hash_tensors(g, NULL, &o, all) == PL_OK, "%s", pl_last_error());
    uint64_t bytes = 0;
    for (int64_t i = 0; i < n; i++) bytes += pl_gguf_tensor_at(g, i)->nbytes;
    CHECK(p.calls > 0 && p.done == bytes && p.total == bytes, "progress %llu of %llu, want %llu",
          (unsigned long long)p.done, (unsigned long long)p.total, (unsigned long long)bytes);
    check_against_sha256sum(g, all, "blk.2.attn_q.weight");
    check_against_sha256sum(g, all, "token_embd.weight");
    /* layers [1, 3): their tensors only, the same hashes, nothing else read */
    pl_gguf_sel sel;
    CHECK(pl_gguf_select(g, 1, 3, PL_GGUF_ENDS_NONE, &sel) == PL_OK, "%s", pl_last_error());
    pl_tensor_hash *part = calloc((size_t)n, sizeof *part);
    p = (prog){0};
    CHECK(pl_gguf_hash_tensors(g, &sel, &o, part) == PL_OK, "%s", pl_last_error());
    uint64_t want = 0;
    int held = 0;
    for (int64_t i = 0; i < n; i++) {
        const pl_gguf_tensor *t = pl_gguf_tensor_at(g, i);
        char nm[64];
        snprintf(nm, sizeof nm, "%.*s", (int)t->name.len, t->name.ptr);
        int l = -1;
        bool in = (sscanf(nm, "blk.%d.", &l) == 1 && l >= 1 && l < 3);
        CHECK(part[i].done == in, "%s: hashed %d for layers [1, 3)", nm, part[i].done);
        if (in) want += t->nbytes, held++;
        if (in) CHECK(!memcmp(part[i].sha, all[i].sha, 32), "%s: part's hash differs", nm);
    }
    CHECK(held > 4 && p.total == want && p.done == want, "layer range read %llu of %llu bytes",
          (unsigned long long)p.done, (unsigned long long)want);
    /* what the plan deals: each layer's bytes (its tensors in the part just hashed) and
     * the rest */
    uint64_t lb[8] = {0}, ends = 0, sum = 0;
    pl_gguf_layer_bytes(g, &sel, lb, &ends);
    for (int l = 0; l < sel.n_layer; l++) sum += lb[l];
    CHECK(sel.n_layer == 5 && lb[1] + lb[2] == want && sum + ends == bytes && ends > 0 &&
              lb[0] == lb[4],
          "layer bytes %llu + %llu, ends %llu", (unsigned long long)lb[1],
          (unsigned long long)lb[2], (unsigned long long)ends);
    /* the cache: written, then reused (nothing hashed again) */
    char cache[512];
    snprintf(cache, sizeof cache, "%s/hashes.txt", test_tmpdir());
    pl_hash_opts oc = {.progress = on_progress, .progress_ud = &p, .cache_path = cache};
    CHECK(pl_gguf_hash_tensors(g, &sel, &oc, part) == PL_OK, "%s", pl_last_error());
    p = (prog){0};
    memset(part, 0, sizeof *part * (size_t)n);
    CHECK(pl_gguf_hash_tensors(g, &sel, &oc, part) == PL_OK, "%s", pl_last_error());
    CHECK(p.calls == 0, "the cache was not used: %d progress calls", p.calls);
    for (int64_t i = 0; i < n; i++)
        CHECK(!part[i].done || !memcmp(part[i].sha, all[i].sha, 32), "cached hash %lld differs",
              (long long)i);
    /* a cache of another file (other offsets) is ignored: hashed again, correctly */
    pl_gguf *q8 = NULL;
    CHECK(pl_gguf_open(test_shared("models/stories260K-Q8_0.gguf"), &q8) == PL_OK, "%s",
          pl_last_error());
    pl_tensor_hash *qh = calloc((size_t)pl_gguf_tensor_count(q8), sizeof *qh);
    CHECK(q8 && pl_gguf_hash_tensors(q8, NULL, &oc, qh) == PL_OK, "%s", pl_last_error());
    int64_t qi = find(q8, "blk.2.attn_q.weight");
    char hex[65];
    pl_sha256_hex(pl_gguf_tensor_at(q8, qi)->data, pl_gguf_tensor_at(q8, qi)->nbytes, hex);
    char got[65];
    pl_sha256_to_hex(qh[qi].sha, got);
    CHECK(!strcmp(hex, got), "hash through another file's cache: %s, want %s", got, hex);
    /* identity: the same file twice alike, another model different; a missing hash refused */
    uint8_t id1[32], id2[32], id3[32];
    CHECK(!pl_gguf_identity(g, all, id1) && !pl_gguf_identity(q8, qh, id3), "%s", pl_last_error());
    pl_gguf *again = NULL;
    pl_tensor_hash *ah = calloc((size_t)n, sizeof *ah);
    CHECK(!pl_gguf_open(test_shared(MODEL), &again) &&
              !pl_gguf_hash_tensors(again, NULL, NULL, ah) && !pl_gguf_identity(again, ah, id2),
          "%s", pl_last_error());
    CHECK(!memcmp(id1, id2, 32) && memcmp(id1, id3, 32), "identities: same file %d, q8 %d",
          !memcmp(id1, id2, 32), !memcmp(id1, id3, 32));
    ah[3].done = false;
    CHECK(pl_gguf_identity(again, ah, id2) != PL_OK && strstr(pl_last_error(), "has no hash"),
          "identity without every hash: %s", pl_last_error());
    /* a part's identity: the same range of the same file alike, another range or the same
     * range of the Q8_0 file different, a missing hash refused */
    uint8_t p1[32], p2[32], p3[32], p4[32];
    pl_gguf_sel s12, s13, q12;
    CHECK(!pl_gguf_select(g, 1, 2, PL_GGUF_ENDS_NONE, &s12) &&
              !pl_gguf_select(g, 1, 3, PL_GGUF_ENDS_NONE, &s13) &&
              !pl_gguf_select(q8, 1, 2, PL_GGUF_ENDS_NONE, &q12),
          "%s", pl_last_error());
    ah[3].done = true;
    CHECK(!pl_gguf_part_identity(g, &s12, all, p1) && !pl_gguf_part_identity(again, &s12, ah, p2) &&
              !pl_gguf_part_identity(g, &s13, all, p3) && !pl_gguf_part_identity(q8, &q12, qh, p4),
          "%s", pl_last_error());
    CHECK(!memcmp(p1, p2, 32) && memcmp(p1, p3, 32) && memcmp(p1, p4, 32),
          "part identities: same %d, other range %d, q8 %d", !memcmp(p1, p2, 32),
          !memcmp(p1, p3, 32), !memcmp(p1, p4, 32));
    int64_t k2 = find(again, "blk.1.attn_q.weight");
    ah[k2].done = false;
    CHECK(pl_gguf_part_identity(again, &s12, ah, p2) != PL_OK &&
              strstr(pl_last_error(), "has no hash"),
          "part identity without its hashes: %s", pl_last_error());
    ah[k2].done = true;
    pl_gguf_free(again);
    pl_gguf_free(q8);
    free(ah);
    free(qh);
    free(part);
}

typedef struct {
    const pl_gguf *g;
    const pl_gguf_sel *sel;
    uint64_t fail_after; /* fail when this many bytes were served (0: never) */
    bool flip;           /* change one byte of the first piece */
    uint64_t served;
    size_t largest;
} feeder;

static pl_status feed(void *ud, int64_t i, uint64_t off, void *buf, size_t len) {
    feeder *f = ud;
    if (f->fail_after && f->served + len > f->fail_after)
        return pl_fail(PL_ERR_IO, "the link went down");
    pl_status s = pl_gguf_read_piece(f->g, f->sel, i, off, buf, len);
    if (!s && f->flip && !f->served) ((uint8_t *)buf)[len / 2] ^= 1;
    f->served += len;
    if (len > f->largest) f->largest = len;
    return s;
}

static void test_extract(const pl_gguf *g, const pl_tensor_hash *all, pl_backend *be) {
    const char *dir = test_tmpdir();
    char p1[512], p2[512], bad[512];
    snprintf(p1, sizeof p1, "%s/part-0-2.gguf", dir);
    snprintf(p2, sizeof p2, "%s/part-2-5.gguf", dir);
    snprintf(bad, sizeof bad, "%s/bad.gguf", dir);
    pl_gguf_sel s1, s2;
    CHECK(!pl_gguf_select(g, 0, 2, PL_GGUF_ENDS_NONE, &s1) &&
              !pl_gguf_select(g, 2, 5, PL_GGUF_ENDS_NONE, &s2),
          "%s", pl_last_error());
    /* part one from the file itself; part two through a feeder in small pieces */
    CHECK(pl_gguf_extract(g, &s1, all, p1, NULL) == PL_OK, "%s", pl_last_error());
    feeder f = {.g = g, .sel = &s2};
    prog pr = {0};
    pl_extract_opts o = {.read = feed,
                         .read_ud = &f,
                         .piece_bytes = 1000,
                         .progress = on_progress,
                         .progress_ud = &pr};
    CHECK(pl_gguf_extract(g, &s2, all, p2, &o) == PL_OK, "%s", pl_last_error());
    CHECK(f.largest == 1000 && pr.done == f.served && pr.total == f.served,
          "pieces of at most %zu, progress %llu of %llu", f.largest, (unsigned long long)pr.done,
          (unsigned long long)pr.total);
    /* a worker without the file: the header alone (pl_gguf_parse_header) and the host's
     * pieces make the same file */
    char *file = NULL, *made = NULL, *want = NULL, p3[512];
    size_t flen = 0, mlen = 0, wlen = 0;
    snprintf(p3, sizeof p3, "%s/from-header.gguf", dir);
    pl_gguf *hdr = NULL;
    CHECK(!pl_file_read_all(test_shared(MODEL), &file, &flen) &&
              !pl_gguf_parse_header(file, pl_gguf_data_offset(g), &hdr),
          "header alone: %s", pl_last_error());
    if (hdr) {
        pl_gguf_sel hs;
        pl_tensor_hash *none = calloc((size_t)pl_gguf_tensor_count(hdr), sizeof *none);
        f = (feeder){.g = g, .sel = &s2};
        o.progress = NULL;
        CHECK(!pl_gguf_select(hdr, 2, 5, PL_GGUF_ENDS_NONE, &hs) &&
                  !pl_gguf_extract(hdr, &hs, all, p3, &o) && !pl_file_read_all(p3, &made, &mlen) &&
                  !pl_file_read_all(p2, &want, &wlen) && mlen == wlen && !memcmp(made, want, mlen),
              "extracted from the header alone: %s", pl_last_error());
        CHECK(pl_gguf_hash_tensors(hdr, &hs, NULL, none) && strstr(pl_last_error(), "no data"),
              "hashing a header: %s", pl_last_error());
        free(none);
        pl_gguf_free(hdr);
    }
    pl_gguf *cut = NULL;
    CHECK(pl_gguf_parse_header(file, 200, &cut) && !cut && !strchr(pl_last_error(), '\n'),
          "a cut header: %s", pl_last_error());
    free(file), free(made), free(want);
    remove(p3);
    /* the parts load with their ranges and run bit-identically through a chain */
    pl_gguf *g1 = NULL, *g2 = NULL;
    CHECK(!pl_gguf_open(p1, &g1) && !pl_gguf_open(p2, &g2), "%s", pl_last_error());
    if (g1 && g2) {
        CHECK(pl_gguf_kv_count(g1) == pl_gguf_kv_count(g), "the part has %lld keys of %lld",
              (long long)pl_gguf_kv_count(g1), (long long)pl_gguf_kv_count(g));
        CHECK(!pl_gguf_find_tensor(g1, "token_embd.weight") &&
                  !pl_gguf_find_tensor(g1, "blk.2.attn_q.weight") &&
                  pl_gguf_find_tensor(g1, "blk.1.attn_q.weight") &&
                  !pl_gguf_find_tensor(g2, "output.weight"),
              "the parts hold other tensors than their layers'");
        pl_model *w = cc_load(g, be, 0, 0, PL_ENDS_AUTO);
        const pl_gguf *parts[2] = {g1, g2};
        cc_split sp = {0, 0, 2, {{0, 2}, {2, 5}}};
        if (w) cc_check_split_from(g, parts, be, w, &sp, "extracted parts");
        pl_model_free(w);
    }
    /* a layers-only part without the tokenizer's token list has no vocabulary size: refused */
    if (g1) {
        pl_gguf *nt = pl_gguf_new();
        char key[256], path[512];
        for (int64_t i = 0; i < pl_gguf_kv_count(g1); i++) {
            const pl_gguf_kv *kv = pl_gguf_kv_at(g1, i);
            snprintf(key, sizeof key, "%.*s", (int)kv->key.len, kv->key.ptr);
            if (strcmp(key, "tokenizer.ggml.tokens")) pl_gguf_set_value(nt, key, &kv->value);
        }
        for (int64_t i = 0; i < pl_gguf_tensor_count(g1); i++) {
            const pl_gguf_tensor *t = pl_gguf_tensor_at(g1, i);
            snprintf(key, sizeof key, "%.*s", (int)t->name.len, t->name.ptr);
            pl_gguf_add_tensor(nt, key, t->type, t->n_dims, t->ne, t->data);
        }
        snprintf(path, sizeof path, "%s/notok.gguf", dir);
        pl_gguf *back = NULL;
        pl_model *m = NULL;
        pl_model_opts mo = {.layer_first = 0, .layer_last = 2, .ends = PL_ENDS_NONE};
        CHECK(!pl_gguf_write_file(nt, path) && !pl_gguf_open(path, &back), "%s", pl_last_error());
        CHECK(back && pl_model_load(back, be, &mo, &m) != PL_OK &&
                  strstr(pl_last_error(), "missing tensor token_embd.weight"),
              "a part without embedding or token list: %s", pl_last_error());
        pl_model_free(m);
        pl_gguf_free(back);
        pl_gguf_free(nt);
        remove(path);
    }
    pl_gguf_free(g1);
    pl_gguf_free(g2);
    /* the whole model extracted is the same model */
    pl_gguf_sel whole;
    CHECK(!pl_gguf_select(g, 0, 0, 0, &whole) && !pl_gguf_extract(g, &whole, all, bad, NULL), "%s",
          pl_last_error());
    pl_gguf *gw = NULL;
    int64_t n = pl_gguf_tensor_count(g);
    pl_tensor_hash *wh = calloc((size_t)n, sizeof *wh);
    uint8_t a[32], b[32];
    CHECK(!pl_gguf_open(bad, &gw) && !pl_gguf_hash_tensors(gw, NULL, NULL, wh) &&
              !pl_gguf_identity(gw, wh, b) && !pl_gguf_identity(g, all, a) && !memcmp(a, b, 32),
          "the whole model extracted has another identity %s", pl_last_error());
    pl_gguf_free(gw);
    free(wh);
    remove(bad);
    /* interrupted, or a corrupted piece: no file at the final name, no temporary left */
    int before = files_in(dir);
    f = (feeder){.g = g, .sel = &s2, .fail_after = 3000};
    o.progress = NULL;
    CHECK(pl_gguf_extract(g, &s2, all, bad, &o) != PL_OK &&
              strstr(pl_last_error(), "link went down"),
          "interrupted: %s", pl_last_error());
    struct stat st;
    CHECK(stat(bad, &st) != 0 && files_in(dir) == before, "an interrupted extraction left a file");
    f = (feeder){.g = g, .sel = &s2, .flip = true};
    CHECK(pl_gguf_extract(g, &s2, all, bad, &o) != PL_OK &&
              strstr(pl_last_error(), "do not match its hash"),
          "corrupted piece: %s", pl_last_error());
    CHECK(stat(bad, &st) != 0 && files_in(dir) == before, "a corrupted extraction left a file");
    /* an existing file at the target stays as it was when the extraction fails */
    FILE *fp = fopen(bad, "w");
    fputs("old", fp);
    fclose(fp);
    f = (feeder){.g = g, .sel = &s2, .flip = true};
    CHECK(pl_gguf_extract(g, &s2, all, bad, &o) != PL_OK && stat(bad, &st) == 0 && st.st_size == 3,
          "the old file was replaced by a failed extraction");
    remove(bad);
    /* no expected hash: refused before writing */
    pl_tensor_hash *none = calloc((size_t)n, sizeof *none);
    CHECK(pl_gguf_extract(g, &s2, none, bad, NULL) != PL_OK &&
              strstr(pl_last_error(), "no expected hash") && stat(bad, &st) != 0,
          "extract without hashes: %s", pl_last_error());
    free(none);
    o.piece_bytes = PL_PIECE_MAX + 1;
    CHECK(pl_gguf_extract(g, &s2, all, bad, &o) != PL_OK && strstr(pl_last_error(), "at most"),
          "a huge piece size: %s", pl_last_error());
}

static void test_pieces(const pl_gguf *g) {
    pl_gguf_sel s;
    CHECK(!pl_gguf_select(g, 1, 2, PL_GGUF_ENDS_NONE, &s), "%s", pl_last_error());
    int64_t in = find(g, "blk.1.ffn_up.weight"), out = find(g, "blk.2.ffn_up.weight"),
            emb = find(g, "token_embd.weight");
    const pl_gguf_tensor *t = pl_gguf_tensor_at(g, in);
    uint8_t buf[64];
    CHECK(!pl_gguf_read_piece(g, &s, in, 16, buf, 32) &&
              !memcmp(buf, (const uint8_t *)t->data + 16, 32),
          "piece of a tensor of the part: %s", pl_last_error());
    CHECK(!pl_gguf_read_piece(g, &s, in, t->nbytes - 8, buf, 8), "the last bytes: %s",
          pl_last_error());
    CHECK(pl_gguf_read_piece(g, &s, in, t->nbytes - 8, buf, 9) && strstr(pl_last_error(), "past"),
          "past the end: %s", pl_last_error());
    CHECK(pl_gguf_read_piece(g, &s, in, UINT64_MAX, buf, 1) && strstr(pl_last_error(), "past"),
          "huge offset: %s", pl_last_error());
    CHECK(pl_gguf_read_piece(g, &s, out, 0, buf, 8) && strstr(pl_last_error(), "not in the part"),
          "another layer's tensor: %s", pl_last_error());
    CHECK(pl_gguf_read_piece(g, &s, emb, 0, buf, 8) && strstr(pl_last_error(), "not in the part"),
          "the embedding for a layers-only part: %s", pl_last_error());
    CHECK(pl_gguf_read_piece(g, &s, 99999, 0, buf, 8) && pl_gguf_read_piece(g, &s, -1, 0, buf, 8),
          "a tensor past the list");
    CHECK(pl_gguf_read_piece(g, NULL, in, 0, NULL, PL_PIECE_MAX + 1) &&
              strstr(pl_last_error(), "at most"),
          "a piece past the limit: %s", pl_last_error());
    /* selections: bad ranges refused; the head of a tied model takes the embedding */
    CHECK(pl_gguf_select(g, 3, 9, 0, &s) && strstr(pl_last_error(), "outside"), "%s",
          pl_last_error());
    CHECK(pl_gguf_select(g, 2, 2, PL_GGUF_ENDS_NONE, &s) && strstr(pl_last_error(), "nothing"),
          "%s", pl_last_error());
    CHECK(!pl_gguf_select(g, 0, 0, PL_GGUF_ENDS_EMBED | PL_GGUF_ENDS_HEAD, &s) &&
              pl_gguf_selected(g, &s, emb) && pl_gguf_selected(g, &s, find(g, "output.weight")) &&
              !pl_gguf_selected(g, &s, in),
          "the ends");
}

/* Another model split in two extracted parts: the chain over them is bit-identical to the
 * whole model (a recurrent hybrid, a mixture of experts). */
static void check_parts(pl_backend *be, const char *rel, const char *tag) {
    pl_gguf *g = NULL;
    CHECK(pl_gguf_open(test_shared(rel), &g) == PL_OK, "%s: %s", rel, pl_last_error());
    if (!g) return;
    int64_t n = pl_gguf_tensor_count(g);
    pl_tensor_hash *h = calloc((size_t)n, sizeof *h);
    pl_gguf_sel all, s[2];
    CHECK(!pl_gguf_select(g, 0, 0, 0, &all) && !pl_gguf_hash_tensors(g, NULL, NULL, h), "%s: %s",
          rel, pl_last_error());
    int L = all.n_layer, cut = L / 2;
    pl_gguf *parts[2] = {NULL, NULL};
    for (int i = 0; i < 2; i++) {
        char path[512];
        snprintf(path, sizeof path, "%s/%s-%d.gguf", test_tmpdir(), tag, i);
        CHECK(!pl_gguf_select(g, i ? cut : 0, i ? L : cut, PL_GGUF_ENDS_NONE, &s[i]) &&
                  !pl_gguf_extract(g, &s[i], h, path, NULL) && !pl_gguf_open(path, &parts[i]),
              "%s part %d: %s", rel, i, pl_last_error());
    }
    pl_model *w = cc_load(g, be, 0, 0, PL_ENDS_AUTO);
    cc_split sp = {0, 0, 2, {{0, cut}, {cut, L}}};
    if (w && parts[0] && parts[1])
        cc_check_split_from(g, (const pl_gguf *const *)parts, be, w, &sp, rel);
    pl_model_free(w);
    for (int i = 0; i < 2; i++) pl_gguf_free(parts[i]);
    free(h);
    pl_gguf_free(g);
}

static void run_tests(void) {
    pl_gguf *g = NULL;
    CHECK(pl_gguf_open(test_shared(MODEL), &g) == PL_OK, "%s", pl_last_error());
    if (!g) return;
    pl_tensor_hash *all = calloc((size_t)pl_gguf_tensor_count(g), sizeof *all);
    test_hashes(g, all);
    pl_backend *be = NULL;
    CHECK(pl_cpu_new(2, &be) == PL_OK, "%s", pl_last_error());
    if (be) test_extract(g, all, be);
    test_pieces(g);
    if (be) check_parts(be, "fixtures/hf/qwen3_5/qwen3_5-q8_0.gguf", "qwen35");
    if (be) check_parts(be, "fixtures/hf/qwen3_moe/qwen3_moe-q8_0.gguf", "qwen3moe");
    pl_be_destroy(be);
    free(all);
    pl_gguf_free(g);
}
