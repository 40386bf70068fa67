/* cpu_weights.c - where the CPU backend's weight buffers keep their bytes: the mapped file
 * as it is (zero-copy), or a copy in anonymous memory (pl_cpu_opts.anon_weights); and where
 * its large buffers of its own (a layer's KV cache, a prompt's activations) keep theirs.
 *
 * Why copy: on the test machine (a VM) the kernels' first reads of file-backed pages cost
 * far more than those of anonymous ones (a 1-thread Q4_K_M decode 25 -> 43 tok/s with the
 * weights copied; docs/cpu-notes.md). The copy goes into pieces mmap'd anonymous, aligned
 * to 2 MiB and marked MADV_HUGEPAGE, so the kernel can back them with huge pages (fewer TLB
 * misses than the file's 4 KiB pages); a model's buffers are laid one after another in one
 * piece sized by the loader's announcement (pl_be_weights_expect), a piece is unmapped when
 * its last buffer is freed. The bytes are the same either way, so are the results.
 *
 * Buffers of CPU_BIG_BUF bytes or more that buf_new makes go into pieces too (their own
 * chain, at least BUF_PIECE bytes a piece): a decode step's attention reads a few hundred
 * bytes of every cached position of a kv head, 2 KiB or more apart, so on 4 KiB pages
 * nearly every key row is a TLB miss; on huge pages, with the attention's prefetches, the
 * 0.6b's 1-thread tg512 went 40-47 -> 53-63 tok/s (docs/cpu-notes.md). A fresh piece is
 * zero, and its bytes are never handed out twice, so the buffers start zeroed as calloc's. */
#include "cpu_internal.h"

#include "../base/file_map.h"

#include <stdio.h>
#include <stdlib.h>

#ifndef __wasi__
#include <sys/mman.h>
#define CPU_ANON 1 /* wasm32-wasi has no mmap: its model file is already read into memory */
#endif

struct cpu_piece {
    unsigned char *base;
    size_t size, used;
    int64_t live; /* buffers in it; unmapped at 0 */
};

#define PIECE_ALIGN ((size_t)2 << 20)  /* a huge page */
#define BUF_ALIGN   ((size_t)64)       /* each buffer's start: a cache line */
#define COPY_ITEM   ((size_t)4 << 20)  /* the threads copy this much at a time */
#define BUF_PIECE   ((size_t)16 << 20) /* the least a piece of big buffers holds */

static void set_device(cpu_backend *c) {
    int nt = pl_pool_threads(c->pool);
    snprintf(c->base.device, sizeof c->base.device, "cpu, %d thread%s%s", nt, nt == 1 ? "" : "s",
             c->weights_said == 0  ? ""
             : c->weights_said > 0 ? ", weights copied"
                                   : ", weights mapped");
}

void pl_cpu_weights_init(cpu_backend *c, int mode) {
    c->anon_mode = mode;
#ifdef CPU_ANON
    c->copying = mode > 0; /* auto waits for a model's announcement */
#endif
    set_device(c);
}

pl_status pl_cpu_weights_expect(pl_backend *be, uint64_t bytes) {
    cpu_backend *c = cpu_of(be);
#ifdef CPU_ANON
    uint64_t avail = c->anon_mode ? 0 : pl_mem_available();
    c->copying = c->anon_mode > 0 || (c->anon_mode == 0 && avail && bytes < avail / 2);
    /* room for what the loader adds (norms of f16 or quantised values it turns to f32) and
     * the buffers' alignment: only address space until touched */
    c->expect_left = bytes + bytes / 64 + ((uint64_t)1 << 20);
    c->cur = NULL; /* the next model's buffers start a piece of their own, sized for them */
    c->weights_said = c->copying ? 1 : -1;
    set_device(c);
#else
    (void)c, (void)bytes;
#endif
    return PL_OK;
}

#ifdef CPU_ANON
/* A new piece of at least `want` bytes, its start on a 2 MiB boundary: mmap 2 MiB more and
 * unmap what lies outside. */
static cpu_piece *piece_new(uint64_t want) {
    if (want > SIZE_MAX - 2 * PIECE_ALIGN) return NULL; /* (a 32-bit address space) */
    size_t size = ((size_t)want + PIECE_ALIGN - 1) / PIECE_ALIGN * PIECE_ALIGN;
    cpu_piece *p = calloc(1, sizeof *p);
    unsigned char *raw = p ? mmap(NULL, size + PIECE_ALIGN, PROT_READ | PROT_WRITE,
                                  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)
                           : MAP_FAILED;
    if (raw == MAP_FAILED) {
        free(p);
        return NULL;
    }
    size_t head = (PIECE_ALIGN - (uintptr_t)raw % PIECE_ALIGN) % PIECE_ALIGN;
    if (head) munmap(raw, head);
    if (PIECE_ALIGN - head) munmap(raw + head + size, PIECE_ALIGN - head);
    p->base = raw + head;
    p->size = size;
#ifdef MADV_HUGEPAGE
    madvise(p->base, size, MADV_HUGEPAGE); /* a hint: without it, 4 KiB pages */
#endif
    return p;
}

/* `bytes` (rounded up to BUF_ALIGN) from the piece *cur, or from a new one of at least
 * `want` bytes made *cur when *cur lacks room; the bytes' piece in *piece. NULL: no memory
 * for a new piece (*cur unchanged). */
static unsigned char *piece_take(cpu_piece **cur, size_t bytes, uint64_t want, cpu_piece **piece) {
    size_t need = (bytes + BUF_ALIGN - 1) / BUF_ALIGN * BUF_ALIGN;
    if (!*cur || (*cur)->size - (*cur)->used < need) {
        cpu_piece *p = piece_new(need > want ? need : want);
        if (!p) return NULL;
        *cur = p;
    }
    cpu_piece *p = *cur;
    unsigned char *at = p->base + p->used;
    p->used += need;
    p->live++;
    *piece = p;
    return at;
}

/* The copy, `item` bytes at a time; or (groups > 0) the first `groups` groups of 8 Q4_0
 * (q4) or Q8_0 rows interleaved (nb blocks a row), `item` groups at a time. */
typedef struct {
    unsigned char *dst;
    const unsigned char *src;
    size_t n, item, gbytes; /* gbytes: a group's */
    int64_t groups, nb;
    int q4;
} copy_job;

static void copy_item(void *ctx, int64_t item, int thread) {
    (void)thread;
    const copy_job *j = ctx;
    if (j->groups) {
        for (int64_t g = item * (int64_t)j->item;
             g < (item + 1) * (int64_t)j->item && g < j->groups; g++)
            pl_x8_pack_group(j->q4, j->src + g * j->gbytes, j->nb, j->dst + g * j->gbytes);
        return;
    }
    size_t off = (size_t)item * j->item, n = j->n - off < j->item ? j->n - off : j->item;
    memcpy(j->dst + off, j->src + off, n);
}

static void copy_run(cpu_backend *c, copy_job *j, size_t items) {
    if (items > 1 && pl_pool_threads(c->pool) > 1)
        pl_pool_run(c->pool, (int64_t)items, copy_item, j);
    else
        for (size_t i = 0; i < items; i++) copy_item(j, (int64_t)i, 0);
}
#endif

pl_status pl_cpu_weight_place(cpu_backend *c, cpu_buf *b, const void *data) {
    b->data = (void *)data; /* where it lies: the mapped file outlives the buffer */
    b->piece = NULL;
    size_t bytes = (size_t)(pl_row_size(b->h.type, b->h.ne0) * b->h.ne1);
#ifdef CPU_ANON
    if (!c->copying) return PL_OK;
    size_t need = (bytes + BUF_ALIGN - 1) / BUF_ALIGN * BUF_ALIGN; /* what piece_take takes */
    cpu_piece *p;
    unsigned char *dst = piece_take(&c->cur, bytes, c->expect_left, &p);
    if (!dst && c->anon_mode == 0) { /* auto: the rest where it lies */
        c->copying = false;
        c->weights_said = -1;
        set_device(c);
        return PL_OK;
    }
    if (!dst)
        return pl_fail(PL_ERR_NOMEM,
                       "out of memory for a copy of the weights (%.1f MiB): read them from "
                       "the file instead (anon_weights -1; pooled: POOLED_CPU_COPY=0)",
                       (double)(need > c->expect_left ? need : c->expect_left) / (1 << 20));
    c->expect_left = c->expect_left > need ? c->expect_left - need : 0;
    copy_job j = {.dst = dst, .src = data, .n = bytes, .item = COPY_ITEM};
    /* Q4_0 and Q8_0 interleaved 8 rows to a group (cpu_x8.c) where its kernels run */
    uint32_t t = b->h.type;
    if ((t == PL_TYPE_Q4_0 || t == PL_TYPE_Q8_0) && b->h.ne1 >= 8 && c->x8_mode == 0 &&
        pl_x8_available()) {
        j.gbytes = (size_t)pl_row_size(t, b->h.ne0) * 8;
        j.groups = b->h.ne1 / 8, j.nb = b->h.ne0 / 32, j.q4 = t == PL_TYPE_Q4_0;
        j.item = COPY_ITEM / j.gbytes ? COPY_ITEM / j.gbytes : 1;
        copy_run(c, &j, ((size_t)j.groups + j.item - 1) / j.item);
        size_t done = (size_t)j.groups * j.gbytes; /* the rows past the last group as they are */
        memcpy(dst + done, (const unsigned char *)data + done, bytes - done);
        b->x8_rows = j.groups * 8;
    } else {
        copy_run(c, &j, (bytes + COPY_ITEM - 1) / COPY_ITEM);
    }
    b->data = dst;
    b->piece = p;
#else
    (void)c, (void)bytes;
#endif
    return PL_OK;
}

pl_status pl_cpu_buf_alloc(cpu_backend *c, size_t bytes, cpu_buf *b) {
    b->piece = NULL;
#ifdef CPU_ANON
    if (bytes >= CPU_BIG_BUF) {
        b->data = piece_take(&c->buf_cur, bytes, BUF_PIECE, &b->piece);
        if (!b->data) return pl_fail(PL_ERR_NOMEM, "out of memory for a %zu-byte buffer", bytes);
        return PL_OK;
    }
#else
    (void)c;
#endif
    b->data = calloc(1, bytes ? bytes : 1);
    b->owned = true;
    if (!b->data) return pl_fail(PL_ERR_NOMEM, "out of memory for a %zu-byte buffer", bytes);
    return PL_OK;
}

void pl_cpu_piece_release(cpu_backend *c, cpu_piece *p) {
#ifdef CPU_ANON
    if (!p || --p->live > 0) return;
    if (c->cur == p) c->cur = NULL;
    if (c->buf_cur == p) c->buf_cur = NULL;
    munmap(p->base, p->size);
    free(p);
#else
    (void)c, (void)p;
#endif
}
