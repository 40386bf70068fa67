/* gpu_backend.c - the WebGPU backend's buffers, host reads and writes, and the recording
 * of ops into the queue that a read or write flushes as one command buffer (see
 * gpu_internal.h for the flow, gpu_fuse.c and gpu_encode.c for what a flush does). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_internal.h"
#include "repack.h"
#include "selftest.h"

#define UPLOAD_CHUNK (8u << 20) /* bytes of repacked weights per write */
#define ARGS_SLOTS   4096

static gpu_backend *gbe(pl_backend *be) {
    return (gpu_backend *)be;
}

/* Free the retired buffers: the caller knows nothing submitted uses them any more. */
static void free_retired(gpu_backend *gb) {
    for (int i = 0; i < gb->n_retired; i++) pl_gpu_buf_free(gb->retired[i]);
    gb->n_retired = 0;
}

void pl_gpu_retire(gpu_backend *gb, pl_gpu_buf *b) {
    if (!b) return;
    pl_gpu_forget_buf(gb, b);
    if (gb->n_retired == (int)(sizeof gb->retired / sizeof gb->retired[0])) {
        /* full: wait for the GPU, then nothing can still use them */
        pl_gpu_finish(gb->g);
        free_retired(gb);
    }
    gb->retired[gb->n_retired++] = b;
}

/* ------------------------------------------------------------------ flush */

#define SNAP_MAX 4096 /* I32 buffers up to this size are snapshotted at each submit */

static bool snap_worthy(const gbuf *b) {
    return b && !b->h.weight && b->h.type == PL_TYPE_I32 && b->bytes <= SNAP_MAX;
}

/* Record a copy of b into its older snapshot slot, as part of submit number flush_no. */
static pl_status snapshot(gpu_backend *gb, gbuf *b) {
    if (b->wflush == gb->flush_no) return PL_OK;
    int s = b->snap_flush[0] <= b->snap_flush[1] ? 0 : 1;
    if (!b->snap[s] &&
        pl_gpu_buf_new(gb->g, b->bytes, PL_GPU_READBACK, "snapshot", &b->snap[s]) != PL_OK)
        return PL_ERR;
    pl_gpu_copy(gb->g, b->buf, 0, b->snap[s], 0, b->bytes);
    b->snap_flush[s] = gb->flush_no;
    b->wflush = gb->flush_no;
    return PL_OK;
}

/* Does a recorded, not yet submitted op write b? */
static bool pending_write(const gpu_backend *gb, const gbuf *b) {
    for (int i = 0; i < gb->n_ops; i++)
        if (gb->ops[i].out == b || gb->ops[i].vals == b || gb->ops[i].out2 == b ||
            gb->ops[i].out3 == b)
            return true;
    return false;
}

/* A range of a buffer a flush copies into the read-back buffer: bytes [off, off + n) of src
 * (4-byte aligned) to offset `at` there. */
typedef struct {
    const gbuf *src;
    uint64_t off, n, at;
} rb_part;

pl_status pl_gpu_end_chunk(gpu_backend *gb) {
    size_t n = (size_t)gb->args_used * gb->args_stride;
    gb->args_used = 0;
    if (!gb->holding) {
        pl_status st = n ? pl_gpu_write(gb->g, gb->args, 0, gb->args_host, n) : PL_OK;
        pl_status s2 = pl_gpu_submit(gb->g);
        return st != PL_OK ? st : s2;
    }
    if (gb->n_held == gb->cap_held) {
        int cap = gb->cap_held ? gb->cap_held * 2 : 8;
        struct held_cmd *h = realloc(gb->held, (size_t)cap * sizeof *h);
        if (!h) return pl_fail(PL_ERR_NOMEM, "out of memory preparing a pass");
        gb->held = h, gb->cap_held = cap;
    }
    struct held_cmd *h = &gb->held[gb->n_held];
    *h = (struct held_cmd){NULL, n ? malloc(n) : NULL, n};
    if (n && !h->args) return pl_fail(PL_ERR_NOMEM, "out of memory preparing a pass");
    if (n) memcpy(h->args, gb->args_host, n);
    pl_status st = pl_gpu_end(gb->g, &h->cmd);
    if (st != PL_OK) {
        free(h->args);
        return st;
    }
    gb->n_held++;
    return PL_OK;
}

/* Forget the prepared pass (or the one being prepared): its command buffers never run. */
static void drop_held(gpu_backend *gb) {
    for (int i = 0; i < gb->n_held; i++) {
        pl_gpu_cmd_free(gb->g, gb->held[i].cmd);
        free(gb->held[i].args);
    }
    gb->n_held = 0;
    gb->prepared = 0;
}

/* Encode and submit what is recorded, then copy parts[0..k) into the read-back buffer (k 0:
 * nothing to read). While holding (a pass being prepared), keep the command buffers. */
static pl_status flush_parts(gpu_backend *gb, const rb_part *parts, int k) {
    pl_status st = PL_OK;
    if (!gb->n_ops && !k) return PL_OK;
    pl_gpu_fuse(gb);
    st = pl_gpu_tune_pending(gb); /* GEMV shapes seen for the first time */
    pl_gpu_begin(gb->g);
    /* the profiled flush: the profile_at-th that carries a real step's work */
    int profile =
        !gb->holding && gb->profile_path && gb->n_ops >= 16 && ++gb->n_reads == gb->profile_at;
    /* A flush the caller then waits on goes out in command buffers of submit_every
     * dispatches: the GPU runs the first while the rest are recorded, instead of idling
     * through the whole recording (a room's stage, which cannot record its step before its
     * input arrives). The split changes no dispatch, so no result. */
    const pl_gpu_stats *gs = pl_gpu_get_stats(gb->g);
    /* (a prepared pass goes out whole when its input comes: nothing to start early) */
    uint64_t chunk =
        k && !profile && !gb->holding && gb->submit_every > 0 ? (uint64_t)gb->submit_every : 0;
    uint64_t sent = gs->dispatches;
    for (int i = 0; i < gb->n_ops && st == PL_OK; i++) {
        if (gb->ops[i].dead) continue;
        st = pl_gpu_encode_op(gb, &gb->ops[i]);
        if (st == PL_OK && chunk && gs->dispatches - sent >= chunk) {
            st = pl_gpu_end_chunk(gb);
            pl_gpu_begin(gb->g);
            sent = gs->dispatches;
        }
    }
    gb->flush_no++;
    for (int i = 0; i < gb->n_ops && st == PL_OK; i++) {
        if (gb->holding) { /* not run yet: no snapshot holds their bytes */
            if (gb->ops[i].out) gb->ops[i].out->wflush = -1;
            if (gb->ops[i].vals) gb->ops[i].vals->wflush = -1;
            continue;
        }
        if (snap_worthy(gb->ops[i].out)) st = snapshot(gb, gb->ops[i].out);
        if (st == PL_OK && snap_worthy(gb->ops[i].vals)) st = snapshot(gb, gb->ops[i].vals);
    }
    if (st == PL_OK && k) {
        uint64_t n = parts[k - 1].at + parts[k - 1].n;
        if (!gb->readback || pl_gpu_buf_size(gb->readback) < n) {
            pl_gpu_retire(gb, gb->readback);
            gb->readback = NULL;
            st = pl_gpu_buf_new(gb->g, n < 4096 ? 4096 : n, PL_GPU_READBACK, "read back",
                                &gb->readback);
        }
        for (int i = 0; i < k && st == PL_OK; i++)
            if (parts[i].n)
                pl_gpu_copy(gb->g, parts[i].src->buf, parts[i].src->off + parts[i].off,
                            gb->readback, parts[i].at, parts[i].n);
    }
    pl_status s2 = pl_gpu_end_chunk(gb); /* always: ends the recording */
    if (st == PL_OK) st = s2;
    if (profile && st == PL_OK && pl_gpu_finish(gb->g) == PL_OK)
        pl_gpu_profile(gb, gb->profile_path, pl_gpu_now() - gb->last_read_t);
    gb->n_ops = 0;
    if (k) gb->last_read_t = pl_gpu_now();
    if (gb->n_retired && !gb->holding) { /* a held pass may still use them */
        if (pl_gpu_finish(gb->g) == PL_OK || st != PL_OK) free_retired(gb);
        gb->n_retired = 0;
    }
    return st;
}

/* flush_parts with src's bytes [off, off + n) (4-byte aligned) read back at 0, if src. */
static pl_status flush(gpu_backend *gb, const gbuf *src, uint64_t off, uint64_t n) {
    rb_part p = {src, off, n, 0};
    return flush_parts(gb, src ? &p : NULL, src ? 1 : 0);
}

/* ------------------------------------------------------------------ buffers */

static size_t esize(uint32_t type) {
    return type == PL_TYPE_F16 ? 2 : 4;
}

static pl_status buf_new(pl_backend *be, uint32_t type, int64_t ne0, int64_t ne1, pl_buf **out) {
    gpu_backend *gb = gbe(be);
    gbuf *b = calloc(1, sizeof *b);
    if (!b) return pl_fail(PL_ERR_NOMEM, "out of memory");
    b->h = (pl_buf){.be = be, .type = type, .ne0 = ne0, .ne1 = ne1};
    uint64_t vals = (uint64_t)ne0 * (uint64_t)ne1; /* Q8_0 (a KV cache): quants, f16 scales */
    b->bytes =
        ((type == PL_TYPE_Q8_0 ? vals + vals / 16 : vals * esize(type)) + 15) & ~(uint64_t)15;
    if (pl_gpu_buf_new(gb->g, b->bytes, PL_GPU_STORAGE, "activations", &b->buf) != PL_OK) {
        free(b);
        return PL_ERR_NOMEM;
    }
    *out = &b->h;
    return PL_OK;
}

/* Upload rows [r0, r1) of a weight into part buffers q/s at row offset `local`. */
static pl_status upload_rows(gpu_backend *gb, gbuf *b, const unsigned char *src, int64_t row_bytes,
                             uint32_t r0, uint32_t r1, int part, uint32_t local, void *qtmp,
                             uint16_t *stmp, float *ftmp) {
    uint32_t cols = (uint32_t)b->h.ne0, n = r1 - r0;
    if (pl_gpu_repack_rows(b->h.type, src + (uint64_t)r0 * row_bytes, cols, n, b->wt, qtmp, stmp,
                           ftmp) != PL_OK)
        return PL_ERR_FORMAT;
    uint64_t qb = pl_gpu_quant_bytes(b->wt, cols, n), sb = pl_gpu_scale_bytes(b->wt, cols, n);
    uint64_t qo = pl_gpu_quant_bytes(b->wt, cols, local),
             so = pl_gpu_scale_bytes(b->wt, cols, local);
    /* writes are whole words: pad the tail (the buffers are sized in words) */
    size_t qw = (size_t)((qb + 3) & ~3ull), sw = (size_t)((sb + 3) & ~3ull);
    memset((char *)qtmp + qb, 0, qw - qb);
    if (sb) memset((char *)stmp + sb, 0, sw - sb);
    if (pl_gpu_write(gb->g, b->q[part], qo, qtmp, qw) != PL_OK) return PL_ERR;
    if (sb && pl_gpu_write(gb->g, b->s[part], so, stmp, sw) != PL_OK) return PL_ERR;
    return PL_OK;
}

/* Weights are copied to the GPU's memory per buffer: nothing to decide up front. */
static pl_status weights_expect(pl_backend *be, uint64_t bytes) {
    (void)be, (void)bytes;
    return PL_OK;
}

static pl_status buf_weight(pl_backend *be, uint32_t type, int64_t ne0, int64_t ne1,
                            const void *data, pl_buf **out) {
    gpu_backend *gb = gbe(be);
    if (ne0 > UINT32_MAX || ne1 > UINT32_MAX)
        return pl_fail(PL_ERR_FORMAT, "GPU: weight of %lld x %lld is too big", (long long)ne1,
                       (long long)ne0);
    gbuf *b = calloc(1, sizeof *b);
    if (!b) return pl_fail(PL_ERR_NOMEM, "out of memory");
    b->h = (pl_buf){.be = be, .type = type, .ne0 = ne0, .ne1 = ne1, .weight = true};
    b->host = data;
    uint32_t cols = (uint32_t)ne0, rows = (uint32_t)ne1;
    pl_status st = pl_gpu_repack_type(type, cols, &b->wt);
    /* rows per part: as many as one binding holds, a multiple of 8 (the most rows a GEMV
     * workgroup takes) and even (scales are packed two per word) */
    uint64_t row_q = pl_gpu_quant_bytes(b->wt, cols, 1);
    uint64_t per = row_q ? gb->info->max_binding / row_q : rows;
    per &= ~(uint64_t)7;
    if (st == PL_OK && per == 0)
        st = pl_fail(PL_ERR_FORMAT, "GPU: a row of %u values is wider than a binding", cols);
    b->parts = st == PL_OK ? (uint32_t)((rows + per - 1) / per) : 0;
    b->rows_per_part = b->parts > 1 ? (uint32_t)per : rows;
    if (st == PL_OK && b->parts > PL_GEMV_MAX_PARTS)
        st = pl_fail(PL_ERR_FORMAT, "GPU: a %u x %u weight needs %u bindings (at most %d)", rows,
                     cols, b->parts, PL_GEMV_MAX_PARTS);
    for (uint32_t p = 0; st == PL_OK && p < b->parts; p++) {
        uint32_t n = p + 1 < b->parts ? b->rows_per_part : rows - p * b->rows_per_part;
        st = pl_gpu_buf_new(gb->g, (pl_gpu_quant_bytes(b->wt, cols, n) + 15) & ~15ull,
                            PL_GPU_STORAGE, "weights", &b->q[p]);
        uint64_t sb = pl_gpu_scale_bytes(b->wt, cols, n);
        if (st == PL_OK && sb)
            st = pl_gpu_buf_new(gb->g, (sb + 15) & ~15ull, PL_GPU_STORAGE, "scales", &b->s[p]);
    }
    /* stream: repack a chunk of rows (at most UPLOAD_CHUNK bytes, an even number of rows),
     * write it, and let pl_gpu_write submit every 8 MB */
    int64_t row_bytes = pl_row_size(type, ne0);
    uint64_t chunk = row_q ? UPLOAD_CHUNK / (row_q + 2 * (cols / 32) + 1) : rows;
    chunk = chunk < 2 ? 2 : chunk & ~1ull;
    void *qtmp = NULL;
    uint16_t *stmp = NULL;
    float *ftmp = NULL;
    if (st == PL_OK) {
        qtmp = malloc(pl_gpu_quant_bytes(b->wt, cols, chunk) + 16);
        stmp = malloc(pl_gpu_scale_bytes(b->wt, cols, chunk) + 16);
        ftmp = malloc((size_t)cols * sizeof *ftmp);
        if (!qtmp || !stmp || !ftmp) st = pl_fail(PL_ERR_NOMEM, "out of memory for the upload");
    }
    for (uint32_t p = 0; st == PL_OK && p < b->parts; p++) {
        uint32_t p0 = p * b->rows_per_part, p1 = p + 1 < b->parts ? p0 + b->rows_per_part : rows;
        for (uint32_t r = p0; st == PL_OK && r < p1; r += (uint32_t)chunk) {
            uint32_t r1 = r + chunk < p1 ? r + (uint32_t)chunk : p1;
            st = upload_rows(gb, b, data, row_bytes, r, r1, (int)p, r - p0, qtmp, stmp, ftmp);
        }
    }
    free(qtmp), free(stmp), free(ftmp);
    if (st != PL_OK) {
        for (int p = 0; p < PL_GEMV_MAX_PARTS; p++)
            pl_gpu_buf_free(b->q[p]), pl_gpu_buf_free(b->s[p]);
        free(b);
        return st;
    }
    b->buf = b->q[0];
    b->bytes = pl_gpu_buf_size(b->q[0]);
    *out = &b->h;
    return PL_OK;
}

/* A view: the parent's storage from the row's byte on, bound at that offset (so it must be
 * a multiple of the adapter's storage alignment). */
static pl_status buf_view(pl_backend *be, pl_buf *parent, int64_t row0, int64_t rows,
                          pl_buf **out) {
    gpu_backend *gb = gbe(be);
    const gbuf *p = (const gbuf *)parent;
    uint64_t row = (uint64_t)parent->ne0 * esize(parent->type), off = (uint64_t)row0 * row;
    uint64_t align = gb->info->storage_align ? gb->info->storage_align : 256;
    if (off % align)
        return pl_fail(PL_ERR,
                       "view: row %lld starts at byte %llu, not on the GPU's %llu-byte "
                       "binding alignment",
                       (long long)row0, (unsigned long long)off, (unsigned long long)align);
    gbuf *b = calloc(1, sizeof *b);
    if (!b) return pl_fail(PL_ERR_NOMEM, "out of memory");
    b->h = (pl_buf){.be = be, .type = parent->type, .ne0 = parent->ne0, .ne1 = rows};
    b->buf = p->buf;
    b->off = p->off + off;
    b->bytes = ((uint64_t)rows * row + 3) & ~(uint64_t)3; /* bindings are whole words */
    *out = &b->h;
    return PL_OK;
}

static void buf_free(pl_backend *be, pl_buf *h) {
    gpu_backend *gb = gbe(be);
    drop_held(gb); /* any other call drops a prepared pass */
    gbuf *b = (gbuf *)h;
    /* recorded ops may still use it: run them first */
    if (gb->n_ops) flush(gb, NULL, 0, 0);
    if (h->view) {
        /* the parent owns the storage; bindings of the view go when the parent's do */
    } else if (h->weight) {
        pl_gpu_drop_merged(gb, b);
        for (int p = 0; p < PL_GEMV_MAX_PARTS; p++) {
            if (b->q[p]) pl_gpu_forget_buf(gb, b->q[p]), pl_gpu_buf_free(b->q[p]);
            if (b->s[p]) pl_gpu_forget_buf(gb, b->s[p]), pl_gpu_buf_free(b->s[p]);
        }
    } else {
        pl_gpu_forget_buf(gb, b->buf);
        pl_gpu_buf_free(b->buf);
        pl_gpu_buf_free(b->snap[0]);
        pl_gpu_buf_free(b->snap[1]);
    }
    free(b);
}

static pl_status buf_write(pl_backend *be, pl_buf *dst, int64_t off, const void *src, int64_t n) {
    gpu_backend *gb = gbe(be);
    gbuf *b = (gbuf *)dst;
    drop_held(gb);
    if (n <= 0) return PL_OK;
    if (flush(gb, NULL, 0, 0) != PL_OK) return PL_ERR; /* in call order with the ops */
    b->wflush = -1;                                    /* its snapshots are stale now */
    off += (int64_t)b->off;                            /* a view's rows start there */
    if (!((off | n) & 3)) return pl_gpu_write(gb->g, b->buf, (uint64_t)off, src, (size_t)n);
    /* not whole words (F16 data): merge with the words' current bytes */
    uint64_t lo = (uint64_t)off & ~3ull, hi = ((uint64_t)(off + n) + 3) & ~3ull;
    unsigned char *tmp = malloc(hi - lo);
    if (!tmp) return pl_fail(PL_ERR_NOMEM, "out of memory");
    pl_status st = pl_gpu_download(gb->g, b->buf, lo, tmp, hi - lo);
    if (st == PL_OK) {
        memcpy(tmp + (off - lo), src, (size_t)n);
        st = pl_gpu_write(gb->g, b->buf, lo, tmp, hi - lo);
    }
    free(tmp);
    return st;
}

static pl_status buf_read(pl_backend *be, const pl_buf *src, int64_t off, void *dst, int64_t n) {
    gpu_backend *gb = gbe(be);
    const gbuf *b = (const gbuf *)src;
    drop_held(gb);
    /* reading nothing submits what is recorded without waiting: a caller can let the GPU
     * start a step while it records the next */
    if (n <= 0) return flush(gb, NULL, 0, 0);
    /* a small id buffer not written since a submit: its snapshot from that submit holds
     * the bytes, and waiting for that submit alone lets later recorded work run on */
    if (snap_worthy(b) && b->wflush > 0 && !pending_write(gb, b))
        for (int s = 0; s < 2; s++)
            if (b->snap_flush[s] == b->wflush && b->snap[s])
                return pl_gpu_read(gb->g, b->snap[s], (uint64_t)off, dst, (size_t)n);
    uint64_t lo = (uint64_t)off & ~3ull, hi = ((uint64_t)(off + n) + 3) & ~3ull;
    if (flush(gb, b, lo, hi - lo) != PL_OK) return PL_ERR;
    return pl_gpu_read(gb->g, gb->readback, (uint64_t)off - lo, dst, (size_t)n);
}

/* The ranges of r[0..n) side by side in the read-back buffer (16 bytes apart): parts[i]
 * copies read i to parts[i].at; returns the bytes they span. */
static uint64_t place_reads(const pl_read_range *r, int n, rb_part *parts) {
    uint64_t at = 0;
    for (int i = 0; i < n; i++) {
        uint64_t off = (uint64_t)r[i].offset, lo = off & ~3ull;
        uint64_t hi = r[i].nbytes > 0 ? (off + (uint64_t)r[i].nbytes + 3) & ~3ull : lo;
        parts[i] = (rb_part){(const gbuf *)r[i].src, lo, hi - lo, at};
        at += (hi - lo + 15) & ~15ull;
    }
    return at;
}

/* Map the read-back buffer's first `at` bytes once and hand each read its bytes (read i's
 * copy starts at at_i[i], from the 4-byte boundary below its offset). */
static pl_status scatter_reads(gpu_backend *gb, const pl_read_range *r, int n, const uint64_t *at_i,
                               uint64_t at) {
    if (!at) return PL_OK;
    unsigned char *all = malloc((size_t)at);
    if (!all) return pl_fail(PL_ERR_NOMEM, "out of memory for a read back");
    pl_status st = pl_gpu_read(gb->g, gb->readback, 0, all, (size_t)at);
    for (int i = 0; i < n && st == PL_OK; i++)
        if (r[i].nbytes > 0)
            memcpy(r[i].dst, all + at_i[i] + ((uint64_t)r[i].offset & 3), (size_t)r[i].nbytes);
    free(all);
    return st;
}

/* One flush, one map. */
static pl_status buf_read_many(pl_backend *be, const pl_read_range *r, int n) {
    gpu_backend *gb = gbe(be);
    drop_held(gb);
    rb_part parts[PL_READ_MANY_MAX] = {{0}};
    uint64_t at_i[PL_READ_MANY_MAX], at = place_reads(r, n, parts);
    if (flush_parts(gb, parts, n) != PL_OK) return PL_ERR;
    for (int i = 0; i < n; i++) at_i[i] = parts[i].at;
    return scatter_reads(gb, r, n, at_i, at);
}

/* ------------------------------------------------------------------ a prepared pass */

/* The ops recorded so far and the copies of the reads, encoded into command buffers that
 * wait, unsubmitted, for run_prepared's input. */
static pl_status op_prepare(pl_backend *be, pl_buf *input, const pl_read_range *r, int n) {
    gpu_backend *gb = gbe(be);
    drop_held(gb);
    rb_part parts[PL_READ_MANY_MAX] = {{0}};
    uint64_t at = place_reads(r, n, parts);
    gb->holding = 1;
    pl_status st = flush_parts(gb, parts, n);
    gb->holding = 0;
    if (st != PL_OK) {
        drop_held(gb);
        return st;
    }
    gb->held_input = (gbuf *)input;
    memcpy(gb->held_reads, r, (size_t)n * sizeof *r);
    for (int i = 0; i < n; i++) gb->held_at[i] = parts[i].at;
    gb->n_held_reads = n, gb->held_bytes = at;
    gb->prepared = 1;
    return PL_OK;
}

/* The input first (a queued write lands before the command buffers submitted after it),
 * then each command buffer after its arguments, then the reads after one wait. */
static pl_status op_run_prepared(pl_backend *be, const void *src, int64_t nbytes) {
    gpu_backend *gb = gbe(be);
    if (!gb->prepared) return pl_fail(PL_ERR_ARG, "no prepared pass: another call dropped it");
    gbuf *in = gb->held_input;
    if (nbytes > pl_be_buf_bytes(&in->h)) {
        drop_held(gb);
        return pl_fail(PL_ERR_ARG, "run_prepared: %lld bytes for an input of %lld",
                       (long long)nbytes, (long long)pl_be_buf_bytes(&in->h));
    }
    pl_status st = pl_gpu_write(gb->g, in->buf, in->off, src, (size_t)nbytes);
    in->wflush = -1;
    for (int i = 0; i < gb->n_held; i++) {
        struct held_cmd *h = &gb->held[i];
        if (st == PL_OK && h->n_args) st = pl_gpu_write(gb->g, gb->args, 0, h->args, h->n_args);
        if (st == PL_OK)
            st = pl_gpu_submit_cmd(gb->g, h->cmd);
        else
            pl_gpu_cmd_free(gb->g, h->cmd);
        h->cmd = NULL;
    }
    drop_held(gb);
    if (st == PL_OK)
        st = scatter_reads(gb, gb->held_reads, gb->n_held_reads, gb->held_at, gb->held_bytes);
    if (st == PL_OK) free_retired(gb); /* the pass has run: nothing uses them now */
    return st;
}

static bool op_has_prepared(const pl_backend *be) {
    return gbe((pl_backend *)be)->prepared != 0;
}

/* ------------------------------------------------------------------ recording */

static op *push(gpu_backend *gb, op_kind kind) {
    drop_held(gb);
    if (gb->n_ops == gb->cap_ops) {
        int cap = gb->cap_ops ? gb->cap_ops * 2 : 256;
        op *o = realloc(gb->ops, (size_t)cap * sizeof *o);
        if (!o) return NULL;
        gb->ops = o, gb->cap_ops = cap;
    }
    op *o = &gb->ops[gb->n_ops++];
    memset(o, 0, sizeof *o);
    o->kind = kind;
    o->fmask = gb->fuse_mask;
    o->group = gb->fuse_group;
    return o;
}

#define PUSH(kind)                                                                                 \
    op *o = push(gbe(be), kind);                                                                   \
    if (!o) return pl_fail(PL_ERR_NOMEM, "out of memory recording GPU work")

static pl_status op_embed(pl_backend *be, const pl_buf *table, const pl_buf *ids, int64_t n,
                          pl_buf *out) {
    PUSH(OP_EMBED);
    o->a = (const gbuf *)table, o->b = (const gbuf *)ids, o->out = (gbuf *)out, o->n = n;
    return PL_OK;
}

static pl_status op_rms_norm(pl_backend *be, const pl_buf *x, const pl_buf *w, int64_t rows,
                             int64_t cols, float eps, pl_buf *out) {
    PUSH(OP_NORM);
    o->a = (const gbuf *)x, o->b = (const gbuf *)w, o->out = (gbuf *)out;
    o->rows = rows, o->cols = cols, o->eps = eps;
    return PL_OK;
}

static pl_status op_matmul(pl_backend *be, const pl_buf *w, const pl_buf *x, const pl_buf *bias,
                           int64_t n, bool accumulate, pl_buf *out) {
    PUSH(OP_MATMUL);
    o->a = (const gbuf *)w, o->b = (const gbuf *)x, o->c = (const gbuf *)bias;
    o->out = (gbuf *)out, o->n = n, o->acc = accumulate;
    return PL_OK;
}

static pl_status op_add(pl_backend *be, const pl_buf *a, const pl_buf *b, int64_t count,
                        pl_buf *out) {
    PUSH(OP_ADD);
    o->a = (const gbuf *)a, o->b = (const gbuf *)b, o->out = (gbuf *)out, o->count = count;
    return PL_OK;
}

static pl_status op_swiglu(pl_backend *be, const pl_buf *gate, const pl_buf *up, int64_t count,
                           pl_buf *out) {
    PUSH(OP_SWIGLU);
    o->a = (const gbuf *)gate, o->b = (const gbuf *)up, o->out = (gbuf *)out, o->count = count;
    return PL_OK;
}

static pl_status op_rope(pl_backend *be, pl_buf *x, int64_t n, int64_t pos0,
                         const pl_rope_params *p) {
    PUSH(OP_ROPE);
    o->out = (gbuf *)x, o->n = n, o->pos0 = pos0, o->rope = *p;
    return PL_OK;
}

static pl_status op_kv_store(pl_backend *be, const pl_buf *src, int64_t n, int64_t pos0,
                             pl_buf *cache) {
    PUSH(OP_STORE);
    o->a = (const gbuf *)src, o->out = (gbuf *)cache, o->n = n, o->pos0 = pos0;
    return PL_OK;
}

static pl_status op_attention(pl_backend *be, const pl_buf *q, const pl_buf *k_cache,
                              const pl_buf *v_cache, int64_t n, int64_t pos0,
                              const pl_attn_params *p, pl_buf *out) {
    PUSH(OP_ATTN);
    o->a = (const gbuf *)q, o->b = (const gbuf *)k_cache, o->c = (const gbuf *)v_cache;
    o->out = (gbuf *)out, o->n = n, o->pos0 = pos0, o->attn = *p;
    return PL_OK;
}

static pl_status op_rope_cols(pl_backend *be, pl_buf *x, int64_t n, const pl_buf *cols,
                              int64_t n_pos, const pl_rope_params *p) {
    PUSH(OP_ROPE);
    o->out = (gbuf *)x, o->n = n, o->seq = (const gbuf *)cols, o->k = n_pos, o->rope = *p;
    return PL_OK;
}

static pl_status op_kv_store_cols(pl_backend *be, const pl_buf *src, int64_t n, const pl_buf *cols,
                                  int64_t n_ctx, pl_buf *cache) {
    PUSH(OP_STORE);
    o->a = (const gbuf *)src, o->out = (gbuf *)cache, o->n = n, o->seq = (const gbuf *)cols;
    o->ctx = n_ctx;
    return PL_OK;
}

static pl_status op_attention_cols(pl_backend *be, const pl_buf *q, const pl_buf *k_cache,
                                   const pl_buf *v_cache, int64_t n, const pl_buf *cols,
                                   int64_t n_ctx, int64_t max_keys, const pl_attn_params *p,
                                   pl_buf *out) {
    PUSH(OP_ATTN);
    o->a = (const gbuf *)q, o->b = (const gbuf *)k_cache, o->c = (const gbuf *)v_cache;
    o->out = (gbuf *)out, o->n = n, o->seq = (const gbuf *)cols, o->ctx = n_ctx;
    o->k = max_keys, o->attn = *p;
    return PL_OK;
}

static pl_status op_argmax(pl_backend *be, const pl_buf *x, int64_t rows, pl_buf *ids,
                           int64_t dst0) {
    PUSH(OP_ARGMAX);
    o->a = (const gbuf *)x, o->out = (gbuf *)ids, o->rows = rows, o->dst0 = dst0;
    return PL_OK;
}

static pl_status op_topk(pl_backend *be, const pl_buf *x, int64_t row, int64_t k, pl_buf *ids,
                         pl_buf *vals) {
    PUSH(OP_TOPK);
    o->a = (const gbuf *)x, o->out = (gbuf *)ids, o->vals = (gbuf *)vals, o->rows = row, o->k = k;
    return PL_OK;
}

static pl_status op_copy(pl_backend *be, const pl_buf *src, int64_t src0, int64_t count,
                         pl_buf *dst, int64_t dst0) {
    PUSH(OP_COPY);
    o->a = (const gbuf *)src, o->src0 = src0, o->count = count, o->out = (gbuf *)dst;
    o->dst0 = dst0;
    return PL_OK;
}

static pl_status op_softmax_rows(pl_backend *be, const pl_buf *x, int64_t rows, int64_t cols,
                                 pl_buf *out) {
    PUSH(OP_SOFTMAX);
    o->a = (const gbuf *)x, o->out = (gbuf *)out, o->rows = rows, o->cols = cols;
    return PL_OK;
}

static pl_status op_topk_rows(pl_backend *be, const pl_buf *x, int64_t rows, int64_t cols,
                              int64_t k, pl_buf *ids, pl_buf *vals) {
    PUSH(OP_TOPK_ROWS);
    o->a = (const gbuf *)x, o->out = (gbuf *)ids, o->vals = (gbuf *)vals;
    o->rows = rows, o->cols = cols, o->k = k;
    return PL_OK;
}

static pl_status op_matmul_id(pl_backend *be, const pl_buf *w, int64_t n_exp, const pl_buf *x,
                              const pl_buf *ids, int64_t n, int64_t n_used, bool x_shared,
                              pl_buf *out) {
    PUSH(OP_MATMUL_ID);
    o->a = (const gbuf *)w, o->b = (const gbuf *)x, o->c = (const gbuf *)ids;
    o->out = (gbuf *)out, o->n = n, o->k = n_exp, o->count = n_used, o->acc = x_shared;
    return PL_OK;
}

static pl_status op_moe_combine(pl_backend *be, const pl_buf *y, const pl_buf *wts, int64_t n,
                                int64_t n_used, bool accumulate, pl_buf *out) {
    PUSH(OP_MOE_COMBINE);
    o->a = (const gbuf *)y, o->b = (const gbuf *)wts, o->out = (gbuf *)out;
    o->n = n, o->count = n_used, o->acc = accumulate;
    return PL_OK;
}

static pl_status op_sigmoid_mul(pl_backend *be, const pl_buf *x, const pl_buf *g, int64_t rows,
                                int64_t cols, int64_t g_cols, bool accumulate, pl_buf *out) {
    PUSH(OP_SIGMOID_MUL);
    o->a = (const gbuf *)x, o->b = (const gbuf *)g, o->out = (gbuf *)out;
    o->rows = rows, o->cols = cols, o->k = g_cols, o->acc = accumulate;
    return PL_OK;
}

static pl_status op_ssm_conv(pl_backend *be, const pl_buf *x, const pl_buf *w, pl_buf *state,
                             int64_t n, pl_buf *snaps, pl_buf *out) {
    PUSH(OP_SSM_CONV);
    o->a = (const gbuf *)x, o->b = (const gbuf *)w, o->out = (gbuf *)out;
    o->out2 = (gbuf *)state, o->out3 = (gbuf *)snaps, o->n = n;
    return PL_OK;
}

static pl_status op_delta_rule(pl_backend *be, const pl_buf *qkv, const pl_buf *a, const pl_buf *b,
                               const pl_buf *ssm_a, const pl_buf *dt_bias, pl_buf *state, int64_t n,
                               const pl_delta_params *p, pl_buf *snaps, pl_buf *out) {
    PUSH(OP_DELTA_RULE);
    o->a = (const gbuf *)qkv, o->b = (const gbuf *)a, o->c = (const gbuf *)b;
    o->d = (const gbuf *)ssm_a, o->e = (const gbuf *)dt_bias, o->out = (gbuf *)out;
    o->out2 = (gbuf *)state, o->out3 = (gbuf *)snaps, o->n = n, o->delta = *p;
    return PL_OK;
}

/* ------------------------------------------------------------------ lifetime */

static void destroy(pl_backend *be) {
    gpu_backend *gb = gbe(be);
    if (!gb) return;
    if (gb->g) {
        drop_held(gb);
        pl_gpu_finish(gb->g);
        pl_gpu_caches_free(gb);
        free_retired(gb);
        pl_gpu_buf_free(gb->args), pl_gpu_buf_free(gb->rope_tab);
        pl_gpu_buf_free(gb->partials), pl_gpu_buf_free(gb->pairs), pl_gpu_buf_free(gb->readback);
        pl_gpu_buf_free(gb->gemm_xq), pl_gpu_buf_free(gb->gemm_xd), pl_gpu_buf_free(gb->gemm_grp);
        pl_gpu_close(gb->g);
    }
    free(gb->ops);
    free(gb->held);
    free(gb->args_host);
    free(gb->shapes);
    free(gb);
}

static pl_status op_fuse(pl_backend *be, unsigned kinds) {
    gpu_backend *gb = gbe(be);
    gb->fuse_mask = kinds;
    if (kinds) gb->fuse_group++;
    return PL_OK;
}

static const pl_backend_methods gpu_methods = {
    .buf_new = buf_new,
    .buf_weight = buf_weight,
    .weights_expect = weights_expect,
    .buf_free = buf_free,
    .buf_view = buf_view,
    .write = buf_write,
    .read = buf_read,
    .read_many = buf_read_many,
    .prepare = op_prepare,
    .run_prepared = op_run_prepared,
    .has_prepared = op_has_prepared,
    .embed = op_embed,
    .rms_norm = op_rms_norm,
    .matmul = op_matmul,
    .add = op_add,
    .rope = op_rope,
    .kv_store = op_kv_store,
    .attention = op_attention,
    .rope_cols = op_rope_cols,
    .kv_store_cols = op_kv_store_cols,
    .attention_cols = op_attention_cols,
    .swiglu = op_swiglu,
    .argmax = op_argmax,
    .topk = op_topk,
    .copy = op_copy,
    .softmax_rows = op_softmax_rows,
    .topk_rows = op_topk_rows,
    .matmul_id = op_matmul_id,
    .moe_combine = op_moe_combine,
    .sigmoid_mul = op_sigmoid_mul,
    .ssm_conv = op_ssm_conv,
    .delta_rule = op_delta_rule,
    .fuse = op_fuse,
    .destroy = destroy,
};

pl_status pl_gpu_backend_new(const pl_gpu_backend_opts *o, pl_backend **out) {
    *out = NULL;
    gpu_backend *gb = calloc(1, sizeof *gb);
    if (!gb) return pl_fail(PL_ERR_NOMEM, "out of memory");
    if (o) gb->o = *o;
    gb->be.m = &gpu_methods;
    gb->be.name = "webgpu";
    pl_status chk = pl_be_check_methods(&gb->be);
    if (chk) {
        free(gb);
        return chk;
    }
    gb->profile_path = gb->o.profile_path && *gb->o.profile_path ? gb->o.profile_path : NULL;
    gb->profile_at = gb->o.profile_at > 0 ? gb->o.profile_at : 40;
    pl_gpu_open_opts go = {.dawn_lib = gb->o.dawn_lib,
                           .robust = gb->o.robust,
                           .toggles = gb->o.toggles,
                           .smx = pl_gpu_smx_wanted(gb->o.smx)};
    pl_status st = pl_gpu_open_with(&go, &gb->g);
    if (st != PL_OK) {
        free(gb);
        return st;
    }
    gb->info = pl_gpu_get_info(gb->g);
    if (gb->o.hardware_only && gb->info->software) {
        char name[200];
        snprintf(name, sizeof name, "%.190s", gb->info->name);
        destroy(&gb->be);
        return pl_fail(PL_ERR, "the GPU adapter is a software rasteriser (%s)", name);
    }
    st = pl_gpu_smx_choose(gb);
    snprintf(gb->be.device, sizeof gb->be.device, "webgpu, %.140s", gb->info->name);
    if (gb->smx) { /* the name shortened for the matrix units' line */
        char nm[48];
        snprintf(gb->be.device, sizeof gb->be.device, "webgpu, %.100s | matrix units v%d %s",
                 gb->info->name, gb->smx, pl_gpu_smx_name(gb->info, gb->smx_cfg, nm, sizeof nm));
    }
    gb->be.can_prepare = 1;
    gb->be.max_buf_bytes =
        gb->info->max_buffer < gb->info->max_binding ? gb->info->max_buffer : gb->info->max_binding;
    gb->args_stride = gb->info->uniform_align > sizeof(pl_gpu_args) ? gb->info->uniform_align
                                                                    : (uint32_t)sizeof(pl_gpu_args);
    gb->args_cap = ARGS_SLOTS;
    gb->args_host = calloc(gb->args_cap, gb->args_stride);
    if (!gb->args_host) st = pl_fail(PL_ERR_NOMEM, "out of memory");
    if (st == PL_OK)
        st = pl_gpu_buf_new(gb->g, (uint64_t)gb->args_cap * gb->args_stride, PL_GPU_UNIFORM, "args",
                            &gb->args);
    /* built-in GEMV shapes: small and quick to compile on a software adapter, wider rows
     * per workgroup on a GPU; the autotuner may replace them */
    for (int t = 0; t < PL_GPU_TUNE_CLASSES; t++)
        gb->tune[t] = gb->info->software ? (gemv_tune){32, 1, 0, 0, 1}
                      : t < 4            ? (gemv_tune){64, 4, 0, 0, 1}
                              : (gemv_tune){128, 16, 0, 0, 1}; /* q8x: see gpu-notes.md */
    /* off by default: no effect measured on the H200 (docs/gpu-notes.md) */
    gb->q8_preload = gb->o.q8_preload;
    gb->gemv_xpre = gb->o.gemv_xpre == 0  ? PL_GPU_XPRE_AUTO
                    : gb->o.gemv_xpre < 0 ? PL_GPU_XPRE_NONE
                                          : gb->o.gemv_xpre; /* 1 normed, 2 all */
    /* 0 (auto) is on for both (gpu-notes.md, seventh session) */
    gb->topk_rank = gb->o.topk_rank >= 0;
    gb->moe_shgate = gb->o.moe_shgate >= 0 && gb->topk_rank;
    gb->moe_comb = gb->o.moe_comb >= 0;
    /* prefill attention kernel: lavapipe compiles it in 5-40 s a shape (unrolled tiles), so
     * auto leaves software adapters on the decode kernel; 1 forces it there too (tests) */
    gb->fa = gb->o.fa > 0 || (gb->o.fa == 0 && !gb->info->software);
    gb->dr_chunk = gb->o.dr_chunk >= 0;
    gb->submit_every = gb->o.submit_every ? gb->o.submit_every : PL_GPU_SUBMIT_EVERY;
    /* auto leaves a software adapter at one column a workgroup: lavapipe's LLVM takes
     * long over the unrolled columns, and its prefill of short prompts gains nothing */
    /* 0: the weights' type's default (gpu_encode.c, cols_most / cols_acc) */
    gb->gemv_cols = gb->o.gemv_cols ? gb->o.gemv_cols : gb->info->software ? -1 : 0;
    gb->gemv_cols_acc = gb->o.gemv_cols_acc > 0 ? gb->o.gemv_cols_acc : 0;
    gb->gemm_min = gb->o.gemm_min_cols > 0 ? gb->o.gemm_min_cols : PL_GPU_GEMM_MIN_COLS;
    gb->exact_min = gb->o.gemm_exact_min > 0 ? (uint32_t)gb->o.gemm_exact_min : UINT32_MAX;
    gb->exact_max =
        gb->o.gemm_exact_max > 0 ? (uint32_t)gb->o.gemm_exact_max : PL_GPU_GEMM_EXACT_MAX;
    /* the prefill GEMM's tiles are pinned per shape (pl_gpu_gemm_base); opts.gemm = "off"
     * or "tm,tn,rm,rn,bk[,version]" (version 4 if left out) sets one for every shape */
    const char *gm = gb->o.gemm;
    if (gm && !*gm) gm = NULL; /* set but empty: the built-in tiles */
    uint32_t *gt = gb->gemm_tile;
    gt[5] = 4;
    int nv = 0;
    if (gm && !strcmp(gm, "off"))
        gb->gemm_off = 1;
    else if (gm &&
             (nv = sscanf(gm, "%u,%u,%u,%u,%u,%u", &gt[0], &gt[1], &gt[2], &gt[3], &gt[4],
                          &gt[5])) != 5 &&
             nv != 6)
        st = pl_fail(PL_ERR_ARG, "POOLED_GPU_GEMM: off or tm,tn,rm,rn,bk[,version], not '%.40s'",
                     gm);
    gb->gemm_fixed = gm && !gb->gemm_off;
    pl_gemm_params tp = {.type = PL_GW_Q4_0, .rows = 1, .cols = 32};
    tp.tm = gt[0], tp.tn = gt[1], tp.rm = gt[2], tp.rn = gt[3], tp.bk = gt[4], tp.version = gt[5];
    pl_gpu_gemm_smx_shape(gb, &tp);
    if (st == PL_OK && gb->gemm_fixed && pl_gemm_check_shape(&tp) != PL_OK)
        st = pl_fail(PL_ERR_ARG, "POOLED_GPU_GEMM %.40s: %s", gm ? gm : "", pl_last_error());
    if (st == PL_OK && (gb->o.gemv_xpre < -1 || gb->o.gemv_xpre > 2))
        st = pl_fail(PL_ERR_ARG, "POOLED_GPU_XPRE: 0, 1 or 2");
    if (st == PL_OK && (gb->o.topk_rank < -1 || gb->o.topk_rank > 1 || gb->o.moe_shgate < -1 ||
                        gb->o.moe_shgate > 1 || gb->o.moe_comb < -1 || gb->o.moe_comb > 1))
        st = pl_fail(PL_ERR_ARG, "POOLED_GPU_TOPK, POOLED_GPU_MOESH, POOLED_GPU_MOECOMB: 0 or 1");
    if (st == PL_OK &&
        (gb->o.gemv_cols < -1 || gb->o.gemv_cols == 1 || gb->o.gemv_cols > PL_GEMV_MAX_COLS ||
         gb->o.gemv_cols_acc < 0 || gb->o.gemv_cols_acc > 256))
        st = pl_fail(PL_ERR_ARG,
                     "POOLED_GPU_MC: 0 (one column a workgroup) or 2..%d columns, "
                     "then optionally ,accumulators (1..256)",
                     PL_GEMV_MAX_COLS);
    if (st == PL_OK && (gb->o.fa < -1 || gb->o.fa > 1))
        st = pl_fail(PL_ERR_ARG, "POOLED_GPU_FA: 0 or 1");
    if (st == PL_OK && (gb->o.gemm_min_cols < 0 || gb->o.gemm_min_cols > 65536))
        st = pl_fail(PL_ERR_ARG, "POOLED_GPU_GEMM_MIN: 1 to 65536 columns");
    if (st == PL_OK &&
        (gb->o.gemm_exact_min < -1 || gb->o.gemm_exact_min == 1 || gb->o.gemm_exact_min > 65536 ||
         gb->o.gemm_exact_max < 0 || gb->o.gemm_exact_max > 65536))
        st = pl_fail(PL_ERR_ARG, "POOLED_GPU_EXACT: 0 (never) or min[,max] columns, 2 to 65536");
    if (st == PL_OK && (gb->o.dr_chunk < -1 || gb->o.dr_chunk > 1))
        st = pl_fail(PL_ERR_ARG, "POOLED_GPU_DR: 0 or 1");
    /* opts.gemv = "threads,rows,subgroup-reduce,subgroup-rows,unroll" fixes the GEMV shape
     * of every weight type (experiments; no autotune then) */
    const char *fix = gb->o.gemv;
    unsigned v[5];
    if (fix && sscanf(fix, "%u,%u,%u,%u,%u", &v[0], &v[1], &v[2], &v[3], &v[4]) == 5) {
        for (int t = 0; t < PL_GPU_TUNE_CLASSES; t++)
            gb->tune[t] = (gemv_tune){v[0], v[1], v[2], v[3], v[4]};
        gb->tune_fixed = 1;
    } else if (st == PL_OK && !gb->info->software) { /* (a failed read would hide st's reason) */
        pl_gpu_tune_load(gb);
    }
    if (st == PL_OK && !gb->o.no_selftest) st = pl_gpu_selftest(gb);
    if (st != PL_OK) {
        char msg[400];
        snprintf(msg, sizeof msg, "%s", pl_last_error());
        destroy(&gb->be);
        return pl_fail(PL_ERR, "%s", msg);
    }
    gb->n_reads = 0; /* the profile counts the caller's steps, not the self-test's */
    *out = &gb->be;
    return PL_OK;
}

int pl_gpu_backend_is_software(const pl_backend *be) {
    return ((const gpu_backend *)be)->info->software;
}

uint64_t pl_gpu_backend_fusions_missed(const pl_backend *be, const char **last) {
    const gpu_backend *gb = (const gpu_backend *)be;
    if (last) *last = gb->last_missed;
    return gb->fusions_missed;
}

void pl_gpu_backend_counters(const pl_backend *be, uint64_t *dispatches, uint64_t *submits) {
    const pl_gpu_stats *s = pl_gpu_get_stats(((const gpu_backend *)be)->g);
    *dispatches = s->dispatches;
    *submits = s->submits;
}
