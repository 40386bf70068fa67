/* wire.c - encode and decode the room's messages (layout in docs/room-protocol.md).
 *
 * Decoding reads through a bounds-checked cursor, then runs the same field checks as
 * encoding (check_msg), so a message is either fully valid or refused with one line. */
#include "wire.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/sha256.h"

/* ---------------------------------------------------------------- byte cursors */

typedef struct {
    uint8_t *p;
    size_t n;
} wbuf;

static void put_u8(wbuf *w, uint8_t v) {
    w->p[w->n++] = v;
}
static void put_u16(wbuf *w, uint16_t v) {
    for (int i = 0; i < 2; i++) w->p[w->n++] = (uint8_t)(v >> (8 * i));
}
static void put_u32(wbuf *w, uint32_t v) {
    for (int i = 0; i < 4; i++) w->p[w->n++] = (uint8_t)(v >> (8 * i));
}
static void put_u64(wbuf *w, uint64_t v) {
    for (int i = 0; i < 8; i++) w->p[w->n++] = (uint8_t)(v >> (8 * i));
}
static void put_bytes(wbuf *w, const void *s, size_t n) {
    if (n) memcpy(w->p + w->n, s, n);
    w->n += n;
}

typedef struct {
    const uint8_t *p;
    size_t n, at;
    bool short_read; /* a read went past the end: the message is truncated */
} rbuf;

static const uint8_t *take(rbuf *r, size_t n) {
    if (r->short_read || n > r->n - r->at) {
        r->short_read = true;
        return NULL;
    }
    const uint8_t *s = r->p + r->at;
    r->at += n;
    return s;
}
static uint64_t get_le(rbuf *r, int bytes) {
    const uint8_t *s = take(r, (size_t)bytes);
    uint64_t v = 0;
    for (int i = 0; s && i < bytes; i++) v |= (uint64_t)s[i] << (8 * i);
    return v;
}
static uint8_t get_u8(rbuf *r) {
    return (uint8_t)get_le(r, 1);
}
static uint16_t get_u16(rbuf *r) {
    return (uint16_t)get_le(r, 2);
}
static uint32_t get_u32(rbuf *r) {
    return (uint32_t)get_le(r, 4);
}
static uint64_t get_u64(rbuf *r) {
    return get_le(r, 8);
}
static void get_bytes(rbuf *r, void *dst, size_t n) {
    const uint8_t *s = take(r, n);
    if (s && n) memcpy(dst, s, n);
}
/* A length-prefixed-elsewhere string of n bytes into dst (NUL-terminated, n <= cap). */
static void get_str(rbuf *r, char *dst, size_t n, size_t cap) {
    if (n > cap) n = 0, r->short_read = true; /* check_msg reports the length */
    get_bytes(r, dst, n);
    dst[r->short_read ? 0 : n] = '\0';
}

/* ---------------------------------------------------------------- field checks */

static bool text_ok(const char *s) {
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 || *s == 0x7f) return false;
    return true;
}

static pl_status check_name(const char *what, const char *s, size_t cap, bool may_be_empty) {
    size_t n = strnlen(s, cap + 1);
    if (n > cap) return pl_fail(PL_ERR_FORMAT, "room message: %s longer than %zu bytes", what, cap);
    if (!n && !may_be_empty) return pl_fail(PL_ERR_FORMAT, "room message: empty %s", what);
    if (!text_ok(s)) return pl_fail(PL_ERR_FORMAT, "room message: control byte in %s", what);
    return PL_OK;
}

static bool all_zero(const uint8_t *p, size_t n) {
    uint8_t acc = 0;
    for (size_t i = 0; i < n; i++) acc |= p[i];
    return acc == 0;
}

static void digest(const void *p, size_t n, uint8_t out[32]) {
    pl_sha256 s;
    pl_sha256_init(&s);
    pl_sha256_update(&s, p, n);
    pl_sha256_final(&s, out);
}

size_t pl_wire_hidden_bytes(const pl_wire_hidden *h) {
    return (size_t)h->n_cols * h->n_embd * (h->dtype == PL_WIRE_F16 ? 2 : 4);
}

int pl_wire_frame_cols(int64_t n_embd, pl_wire_dtype dtype, bool wide) {
    int64_t fit = PL_WIRE_MAX_HIDDEN / ((n_embd > 0 ? n_embd : 1) * (dtype == PL_WIRE_F16 ? 2 : 4));
    int64_t most = wide ? PL_WIRE_MAX_COLS : PL_WIRE_NARROW_COLS;
    return (int)(fit < most ? fit : most);
}

static pl_status check_hello(const pl_wire_hello *h) {
    if (!isfinite(h->speed) || h->speed < 0 || h->speed > PL_WIRE_MAX_SPEED)
        return pl_fail(PL_ERR_FORMAT, "room hello: speed %g out of range [0, %g]", h->speed,
                       PL_WIRE_MAX_SPEED);
    if (!h->has_model && !all_zero(h->model_id, 32))
        return pl_fail(PL_ERR_FORMAT, "room hello: a model identity without a model");
    if ((h->want_first || h->want_last) &&
        (h->want_first >= h->want_last || h->want_last > PL_WIRE_MAX_LAYERS))
        return pl_fail(PL_ERR_FORMAT, "room hello: wanted layers [%u, %u) (empty or past %d)",
                       h->want_first, h->want_last, PL_WIRE_MAX_LAYERS);
    if (check_name("backend name", h->backend, PL_WIRE_MAX_NAME, false) ||
        check_name("device name", h->device, PL_WIRE_MAX_NAME, true) ||
        check_name("address", h->addr, PL_WIRE_MAX_ADDR, true))
        return PL_ERR_FORMAT;
    return PL_OK;
}

static pl_status check_plan(const pl_wire_plan *p) {
    if (p->n_layers < 1 || p->n_layers > PL_WIRE_MAX_LAYERS)
        return pl_fail(PL_ERR_FORMAT, "room plan: %u layers (1..%d)", p->n_layers,
                       PL_WIRE_MAX_LAYERS);
    if (p->n_ctx < 1 || p->n_ctx > PL_WIRE_MAX_CTX)
        return pl_fail(PL_ERR_FORMAT, "room plan: n_ctx %u (1..%u)", p->n_ctx, PL_WIRE_MAX_CTX);
    if (p->dtype != PL_WIRE_F16 && p->dtype != PL_WIRE_F32)
        return pl_fail(PL_ERR_FORMAT, "room plan: unknown wire type %u", p->dtype);
    if (p->id_kind == PL_MODEL_ID_DIGEST) {
        if (p->n_tensors)
            return pl_fail(PL_ERR_FORMAT, "room plan: a hash list with a digest-only identity");
    } else if (p->id_kind == PL_MODEL_ID_TENSORS) {
        if (p->n_tensors < 1 || p->n_tensors > PL_WIRE_MAX_TENSORS || !p->hashes)
            return pl_fail(PL_ERR_FORMAT, "room plan: %u tensor hashes (1..%d)", p->n_tensors,
                           PL_WIRE_MAX_TENSORS);
        uint8_t d[32];
        digest(p->hashes, (size_t)p->n_tensors * 32, d);
        if (memcmp(d, p->model_id, 32))
            return pl_fail(PL_ERR_FORMAT, "room plan: model identity is not the digest of its "
                                          "tensor hashes");
    } else {
        return pl_fail(PL_ERR_FORMAT, "room plan: unknown identity kind %u", p->id_kind);
    }
    if (p->n_members < 1 || p->n_members > PL_WIRE_MAX_MEMBERS)
        return pl_fail(PL_ERR_FORMAT, "room plan: %u members (1..%d)", p->n_members,
                       PL_WIRE_MAX_MEMBERS);
    uint32_t next = 0;
    for (uint32_t i = 0; i < p->n_members; i++) {
        const pl_wire_member *m = &p->members[i];
        if (m->first != next || m->last <= m->first || m->last > p->n_layers)
            return pl_fail(PL_ERR_FORMAT,
                           "room plan: member %u holds layers [%u, %u), expected [%u, ..) "
                           "inside %u layers",
                           i, m->first, m->last, next, p->n_layers);
        next = m->last;
        for (uint32_t j = 0; j < i; j++)
            if (p->members[j].id == m->id)
                return pl_fail(PL_ERR_FORMAT, "room plan: member id %u twice", m->id);
        if (check_name("member address", m->addr, PL_WIRE_MAX_ADDR, true)) return PL_ERR_FORMAT;
    }
    if (next != p->n_layers)
        return pl_fail(PL_ERR_FORMAT, "room plan: members hold layers [0, %u) of %u", next,
                       p->n_layers);
    if (p->n_snap > PL_WIRE_MAX_SNAP)
        return pl_fail(PL_ERR_FORMAT, "room plan: %u snapshots (0..%d)", p->n_snap,
                       PL_WIRE_MAX_SNAP);
    return PL_OK;
}

static pl_status check_piece(const char *what, uint32_t tensor, uint64_t offset, uint32_t n) {
    if (tensor >= PL_WIRE_MAX_TENSORS && tensor != PL_WIRE_TENSOR_HEADER)
        return pl_fail(PL_ERR_FORMAT, "room %s: tensor %u (0..%d)", what, tensor,
                       PL_WIRE_MAX_TENSORS - 1);
    if (n < 1 || n > PL_WIRE_MAX_PIECE)
        return pl_fail(PL_ERR_FORMAT, "room %s: %u bytes (1..%u)", what, n, PL_WIRE_MAX_PIECE);
    if (offset > (tensor == PL_WIRE_TENSOR_HEADER ? PL_WIRE_MAX_HEADER : PL_WIRE_MAX_OFFSET) - n)
        return pl_fail(PL_ERR_FORMAT, "room %s: offset %llu out of range", what,
                       (unsigned long long)offset);
    return PL_OK;
}

static pl_status check_hidden(const char *what, const pl_wire_hidden *h) {
    unsigned mode = h->flags & (PL_HID_PREFILL | PL_HID_DECODE | PL_HID_VERIFY);
    if (h->flags & ~(PL_HID_PREFILL | PL_HID_DECODE | PL_HID_VERIFY | PL_HID_LAST | PL_HID_TAIL))
        return pl_fail(PL_ERR_FORMAT, "room %s frame: unknown flags 0x%x", what, h->flags);
    if (mode != PL_HID_PREFILL && mode != PL_HID_DECODE && mode != PL_HID_VERIFY)
        return pl_fail(PL_ERR_FORMAT,
                       "room %s frame: flags 0x%x name not exactly one of prefill/decode/verify",
                       what, h->flags);
    if ((h->flags & PL_HID_TAIL) && mode != PL_HID_PREFILL)
        return pl_fail(PL_ERR_FORMAT, "room %s frame: 'last column only' outside a prefill", what);
    if ((h->flags & PL_HID_LAST) && mode != PL_HID_PREFILL)
        return pl_fail(PL_ERR_FORMAT, "room %s frame: 'last of the prompt' outside a prefill",
                       what);
    if (h->n_cols < 1 || h->n_cols > PL_WIRE_MAX_COLS)
        return pl_fail(PL_ERR_FORMAT, "room %s frame: %u columns (1..%d)", what, h->n_cols,
                       PL_WIRE_MAX_COLS);
    if (mode == PL_HID_DECODE && h->n_cols != 1)
        return pl_fail(PL_ERR_FORMAT, "room %s frame: decode with %u columns (1)", what, h->n_cols);
    if (mode == PL_HID_VERIFY && h->n_cols < 2)
        return pl_fail(PL_ERR_FORMAT, "room %s frame: verify needs 1 + K >= 2 columns", what);
    if (h->n_embd < 1 || h->n_embd > PL_WIRE_MAX_EMBD)
        return pl_fail(PL_ERR_FORMAT, "room %s frame: n_embd %u (1..%d)", what, h->n_embd,
                       PL_WIRE_MAX_EMBD);
    if (h->dtype != PL_WIRE_F16 && h->dtype != PL_WIRE_F32)
        return pl_fail(PL_ERR_FORMAT, "room %s frame: unknown wire type %u", what, h->dtype);
    if (pl_wire_hidden_bytes(h) > PL_WIRE_MAX_HIDDEN)
        return pl_fail(PL_ERR_FORMAT, "room %s frame: %u columns of %u (%zu bytes, at most %u)",
                       what, h->n_cols, h->n_embd, pl_wire_hidden_bytes(h), PL_WIRE_MAX_HIDDEN);
    if (h->pos0 > PL_WIRE_MAX_CTX - h->n_cols)
        return pl_fail(PL_ERR_FORMAT, "room %s frame: positions from %u past %u", what, h->pos0,
                       PL_WIRE_MAX_CTX);
    if (!h->data) return pl_fail(PL_ERR_FORMAT, "room %s frame: no columns", what);
    return PL_OK;
}

static pl_status check_bytes(const char *what, const char *p, size_t n) {
    if (n && !p) return pl_fail(PL_ERR_FORMAT, "room %s: no text", what);
    if (n && memchr(p, 0, n)) return pl_fail(PL_ERR_FORMAT, "room %s: NUL byte in the text", what);
    return PL_OK;
}

static pl_status check_ask(const pl_wire_ask *a) {
    if (a->n_predict > PL_WIRE_MAX_CTX)
        return pl_fail(PL_ERR_FORMAT, "room ask: %u ids to generate (at most %u)", a->n_predict,
                       PL_WIRE_MAX_CTX);
    if (!isfinite(a->temp) || a->temp < 0 || a->temp > PL_WIRE_MAX_TEMP)
        return pl_fail(PL_ERR_FORMAT, "room ask: temperature %g out of range [0, %g]", a->temp,
                       PL_WIRE_MAX_TEMP);
    if (a->flags & ~(PL_ASK_SEEDED | PL_ASK_RAW))
        return pl_fail(PL_ERR_FORMAT, "room ask: unknown flags 0x%x", a->flags);
    if (a->n_turns < 1 || a->n_turns > PL_WIRE_MAX_TURNS)
        return pl_fail(PL_ERR_FORMAT, "room ask: %u messages (1..%d)", a->n_turns,
                       PL_WIRE_MAX_TURNS);
    uint64_t total = 0;
    for (uint32_t i = 0; i < a->n_turns; i++) {
        const pl_wire_turn *t = &a->turns[i];
        if (t->role > PL_ROLE_ASSISTANT)
            return pl_fail(PL_ERR_FORMAT, "room ask: message %u has unknown role %u", i, t->role);
        total += t->n;
        if (total > PL_WIRE_MAX_ASK_TEXT)
            return pl_fail(PL_ERR_FORMAT, "room ask: the messages exceed %u bytes",
                           PL_WIRE_MAX_ASK_TEXT);
        if (check_bytes("ask", t->text, t->n)) return PL_ERR_FORMAT;
    }
    if (a->turns[a->n_turns - 1].role != PL_ROLE_USER)
        return pl_fail(PL_ERR_FORMAT, "room ask: the last message is not the user's");
    if ((a->flags & PL_ASK_RAW) && a->n_turns != 1)
        return pl_fail(PL_ERR_FORMAT, "room ask: a raw prompt with %u messages (1)", a->n_turns);
    return PL_OK;
}

static pl_status check_msg(const pl_wire_msg *m) {
    switch (m->type) {
    case PL_MSG_HELLO: return check_hello(&m->hello);
    case PL_MSG_PLAN: return check_plan(&m->plan);
    case PL_MSG_WEIGHT_REQ:
        return check_piece("weight request", m->weight_req.tensor, m->weight_req.offset,
                           m->weight_req.n);
    case PL_MSG_WEIGHT:
        if (!m->weight.data) return pl_fail(PL_ERR_FORMAT, "room weight piece: no payload");
        return check_piece("weight piece", m->weight.tensor, m->weight.offset, m->weight.n);
    case PL_MSG_HIDDEN: return check_hidden("hidden", &m->hidden);
    case PL_MSG_RESULT: return check_hidden("result", &m->hidden);
    case PL_MSG_REWIND:
        if (m->rewind.n_past > PL_WIRE_MAX_CTX)
            return pl_fail(PL_ERR_FORMAT, "room rewind: n_past %u past %u", m->rewind.n_past,
                           PL_WIRE_MAX_CTX);
        return PL_OK;
    case PL_MSG_PING:
    case PL_MSG_PONG: return PL_OK;
    case PL_MSG_BYE:
        if (m->bye > PL_BYE_SHUTDOWN)
            return pl_fail(PL_ERR_FORMAT, "room bye: unknown reason %u", m->bye);
        return PL_OK;
    case PL_MSG_ERROR:
        if (m->error.code < 1 || m->error.code > PL_WERR_MAX)
            return pl_fail(PL_ERR_FORMAT, "room error: unknown code %u", m->error.code);
        return check_name("error text", m->error.text, PL_WIRE_MAX_TEXT, false);
    case PL_MSG_READY:
        if (m->ready.first >= m->ready.last || m->ready.last > PL_WIRE_MAX_LAYERS)
            return pl_fail(PL_ERR_FORMAT, "room ready: layers [%u, %u) (non-empty, at most %d)",
                           m->ready.first, m->ready.last, PL_WIRE_MAX_LAYERS);
        return PL_OK;
    case PL_MSG_PART:
        if (m->part.header_bytes < 1 || m->part.header_bytes > PL_WIRE_MAX_HEADER ||
            m->part.part_bytes > PL_WIRE_MAX_PART)
            return pl_fail(PL_ERR_FORMAT,
                           "room part: a header of %llu bytes (1..%u), %llu bytes "
                           "of tensors (at most 2^48)",
                           (unsigned long long)m->part.header_bytes, PL_WIRE_MAX_HEADER,
                           (unsigned long long)m->part.part_bytes);
        return PL_OK;
    case PL_MSG_ASK: return check_ask(&m->ask);
    case PL_MSG_TEXT:
        if (m->text.n < 1 || m->text.n > PL_WIRE_MAX_TEXT_PIECE)
            return pl_fail(PL_ERR_FORMAT, "room text: %u bytes (1..%d)", m->text.n,
                           PL_WIRE_MAX_TEXT_PIECE);
        return check_bytes("text", m->text.data, m->text.n);
    case PL_MSG_DONE:
        if (m->done.reason < PL_DONE_EOG || m->done.reason > PL_DONE_STOPPED)
            return pl_fail(PL_ERR_FORMAT, "room done: unknown reason %u", m->done.reason);
        if (m->done.n_gen > PL_WIRE_MAX_CTX)
            return pl_fail(PL_ERR_FORMAT, "room done: %u ids (at most %u)", m->done.n_gen,
                           PL_WIRE_MAX_CTX);
        return PL_OK;
    default: return pl_fail(PL_ERR_FORMAT, "room message: unknown type %u", m->type);
    }
}

pl_status pl_wire_check(const pl_wire_msg *m) {
    return check_msg(m);
}

/* ---------------------------------------------------------------- encode */

static size_t body_size(const pl_wire_msg *m) {
    switch (m->type) {
    case PL_MSG_HELLO:
        return 4 + 8 + 4 + 1 + 32 + 8 + 3 + strlen(m->hello.backend) + strlen(m->hello.device) +
               strlen(m->hello.addr);
    case PL_MSG_PLAN: {
        size_t n = 4 + 4 + 1 + 1 + 2 + 32 + 4 + (size_t)m->plan.n_tensors * 32;
        for (uint32_t i = 0; i < m->plan.n_members; i++) n += 13 + strlen(m->plan.members[i].addr);
        return n + (m->plan.n_snap ? 2 : 0);
    }
    case PL_MSG_WEIGHT_REQ: return 16;
    case PL_MSG_WEIGHT: return 16 + 32 + m->weight.n;
    case PL_MSG_HIDDEN:
    case PL_MSG_RESULT: return 18 + pl_wire_hidden_bytes(&m->hidden);
    case PL_MSG_REWIND: return 8;
    case PL_MSG_PING: return 8;
    case PL_MSG_PONG: return 16;
    case PL_MSG_BYE: return 1;
    case PL_MSG_ERROR: return 3 + strlen(m->error.text);
    case PL_MSG_READY: return 8 + 32;
    case PL_MSG_PART: return 16 + 32;
    case PL_MSG_ASK: {
        size_t n = 4 + 4 + 8 + 1 + 1 + 2;
        for (uint32_t i = 0; i < m->ask.n_turns; i++) n += 5 + m->ask.turns[i].n;
        return n;
    }
    case PL_MSG_TEXT: return 4 + m->text.n;
    case PL_MSG_DONE: return 5;
    default: return 0;
    }
}

static void put_hidden(wbuf *w, const pl_wire_hidden *h) {
    put_u32(w, h->seq), put_u32(w, h->pos0), put_u16(w, h->n_cols), put_u16(w, h->flags);
    put_u32(w, h->n_embd), put_u8(w, h->dtype), put_u8(w, 0);
    put_bytes(w, h->data, pl_wire_hidden_bytes(h));
}

pl_status pl_wire_encode(const pl_wire_msg *m, uint8_t **out, size_t *n) {
    *out = NULL, *n = 0;
    if (check_msg(m)) return PL_ERR_FORMAT;
    size_t size = PL_WIRE_HEADER_BYTES + body_size(m);
    wbuf w = {malloc(size), 0};
    if (!w.p) return pl_fail(PL_ERR_NOMEM, "room message: out of memory (%zu bytes)", size);
    put_u16(&w, PL_WIRE_VERSION), put_u8(&w, m->type), put_u8(&w, 0);
    switch (m->type) {
    case PL_MSG_HELLO: {
        const pl_wire_hello *h = &m->hello;
        uint32_t speed;
        memcpy(&speed, &h->speed, 4);
        put_u32(&w, h->caps), put_u64(&w, h->mem_lent), put_u32(&w, speed);
        put_u8(&w, h->has_model), put_bytes(&w, h->model_id, 32);
        put_u32(&w, h->want_first), put_u32(&w, h->want_last);
        put_u8(&w, (uint8_t)strlen(h->backend)), put_u8(&w, (uint8_t)strlen(h->device));
        put_u8(&w, (uint8_t)strlen(h->addr));
        put_bytes(&w, h->backend, strlen(h->backend)), put_bytes(&w, h->device, strlen(h->device));
        put_bytes(&w, h->addr, strlen(h->addr));
        break;
    }
    case PL_MSG_PLAN: {
        const pl_wire_plan *p = &m->plan;
        put_u32(&w, p->n_layers), put_u32(&w, p->n_ctx), put_u8(&w, p->dtype);
        put_u8(&w, p->id_kind), put_u16(&w, (uint16_t)p->n_members);
        put_bytes(&w, p->model_id, 32), put_u32(&w, p->n_tensors);
        for (uint32_t i = 0; i < p->n_members; i++) {
            const pl_wire_member *mb = &p->members[i];
            put_u32(&w, mb->id), put_u32(&w, mb->first), put_u32(&w, mb->last);
            put_u8(&w, (uint8_t)strlen(mb->addr)), put_bytes(&w, mb->addr, strlen(mb->addr));
        }
        put_bytes(&w, p->hashes, (size_t)p->n_tensors * 32);
        if (p->n_snap) put_u16(&w, p->n_snap); /* absent when 0: protocol 4's plan */
        break;
    }
    case PL_MSG_WEIGHT_REQ:
        put_u32(&w, m->weight_req.tensor), put_u64(&w, m->weight_req.offset);
        put_u32(&w, m->weight_req.n);
        break;
    case PL_MSG_WEIGHT: {
        uint8_t d[32];
        digest(m->weight.data, m->weight.n, d);
        put_u32(&w, m->weight.tensor), put_u64(&w, m->weight.offset), put_u32(&w, m->weight.n);
        put_bytes(&w, d, 32), put_bytes(&w, m->weight.data, m->weight.n);
        break;
    }
    case PL_MSG_HIDDEN:
    case PL_MSG_RESULT: put_hidden(&w, &m->hidden); break;
    case PL_MSG_REWIND: put_u32(&w, m->rewind.seq), put_u32(&w, m->rewind.n_past); break;
    case PL_MSG_PONG: put_u64(&w, m->ping.t_ping), put_u64(&w, m->ping.t_pong); break;
    case PL_MSG_PING: put_u64(&w, m->ping.t_ping); break;
    case PL_MSG_BYE: put_u8(&w, m->bye); break;
    case PL_MSG_ERROR:
        put_u16(&w, m->error.code), put_u8(&w, (uint8_t)strlen(m->error.text));
        put_bytes(&w, m->error.text, strlen(m->error.text));
        break;
    case PL_MSG_READY:
        put_u32(&w, m->ready.first), put_u32(&w, m->ready.last);
        put_bytes(&w, m->ready.part_id, 32);
        break;
    case PL_MSG_PART:
        put_u64(&w, m->part.header_bytes), put_u64(&w, m->part.part_bytes);
        put_bytes(&w, m->part.part_id, 32);
        break;
    case PL_MSG_ASK: {
        const pl_wire_ask *a = &m->ask;
        uint32_t temp;
        memcpy(&temp, &a->temp, 4);
        put_u32(&w, a->n_predict), put_u32(&w, temp), put_u64(&w, a->seed);
        put_u8(&w, a->flags), put_u8(&w, 0), put_u16(&w, a->n_turns);
        for (uint32_t i = 0; i < a->n_turns; i++) {
            put_u8(&w, a->turns[i].role), put_u32(&w, a->turns[i].n);
            put_bytes(&w, a->turns[i].text, a->turns[i].n);
        }
        break;
    }
    case PL_MSG_TEXT: put_u32(&w, m->text.n), put_bytes(&w, m->text.data, m->text.n); break;
    case PL_MSG_DONE: put_u8(&w, m->done.reason), put_u32(&w, m->done.n_gen); break;
    }
    *out = w.p, *n = w.n;
    return PL_OK;
}

/* ---------------------------------------------------------------- decode */

uint16_t pl_wire_peek_version(const uint8_t *buf, size_t n) {
    return n < 2 ? 0 : (uint16_t)(buf[0] | buf[1] << 8);
}

void pl_wire_version_line(unsigned peer, unsigned self, char *buf, size_t cap) {
    snprintf(buf, cap, "the peer speaks room protocol %u, this side %u: %s", peer, self,
             peer > self ? "upgrade this side" : "the peer must upgrade");
}

const char *pl_wire_type_name(unsigned type) {
    static const char *names[] = {"?",      "hello",  "plan",   "weight request", "weight piece",
                                  "hidden", "result", "rewind", "ping",           "pong",
                                  "bye",    "error",  "ready",  "part",           "ask",
                                  "text",   "done"};
    return type <= PL_MSG_MAX_TYPE ? names[type] : "?";
}

static void get_hidden(rbuf *r, pl_wire_hidden *h) {
    h->seq = get_u32(r), h->pos0 = get_u32(r), h->n_cols = get_u16(r), h->flags = get_u16(r);
    h->n_embd = get_u32(r), h->dtype = get_u8(r);
    if (get_u8(r)) r->short_read = true; /* reserved byte: reported as malformed below */
    h->data = NULL;
    /* Sizes are checked before the payload is taken, so a huge n_embd cannot overflow. */
    if (r->short_read) return;
    if (h->n_cols > PL_WIRE_MAX_COLS || h->n_embd > PL_WIRE_MAX_EMBD ||
        pl_wire_hidden_bytes(h) > PL_WIRE_MAX_HIDDEN) {
        r->at = r->n; /* check_msg names the bad size */
        return;
    }
    h->data = take(r, pl_wire_hidden_bytes(h));
}

pl_status pl_wire_decode(const uint8_t *buf, size_t n, pl_wire_msg *m) {
    memset(m, 0, sizeof *m);
    if (n < PL_WIRE_HEADER_BYTES)
        return pl_fail(PL_ERR_FORMAT, "room message: %zu bytes, shorter than its header", n);
    uint16_t version = pl_wire_peek_version(buf, n);
    if (version != PL_WIRE_VERSION) {
        char line[160];
        pl_wire_version_line(version, PL_WIRE_VERSION, line, sizeof line);
        return pl_fail(PL_ERR_FORMAT, "room protocol version mismatch: %s", line);
    }
    if (buf[3] != 0) return pl_fail(PL_ERR_FORMAT, "room message: reserved header byte set");
    m->type = buf[2];
    rbuf r = {buf, n, PL_WIRE_HEADER_BYTES, false};
    switch (m->type) {
    case PL_MSG_HELLO: {
        pl_wire_hello *h = &m->hello;
        h->caps = get_u32(&r), h->mem_lent = get_u64(&r);
        uint32_t speed = get_u32(&r);
        memcpy(&h->speed, &speed, 4);
        uint8_t has = get_u8(&r);
        if (has > 1) return pl_fail(PL_ERR_FORMAT, "room hello: has_model is %u (0 or 1)", has);
        h->has_model = has;
        get_bytes(&r, h->model_id, 32);
        h->want_first = get_u32(&r), h->want_last = get_u32(&r);
        size_t nb = get_u8(&r), nd = get_u8(&r), na = get_u8(&r);
        if (nb > PL_WIRE_MAX_NAME || nd > PL_WIRE_MAX_NAME)
            return pl_fail(PL_ERR_FORMAT, "room hello: a name longer than %d bytes",
                           PL_WIRE_MAX_NAME);
        if (na > PL_WIRE_MAX_ADDR)
            return pl_fail(PL_ERR_FORMAT, "room hello: an address longer than %d bytes",
                           PL_WIRE_MAX_ADDR);
        get_str(&r, h->backend, nb, PL_WIRE_MAX_NAME);
        get_str(&r, h->device, nd, PL_WIRE_MAX_NAME);
        get_str(&r, h->addr, na, PL_WIRE_MAX_ADDR);
        if (!r.short_read &&
            (memchr(h->backend, 0, nb) || memchr(h->device, 0, nd) || memchr(h->addr, 0, na)))
            return pl_fail(PL_ERR_FORMAT, "room hello: NUL byte in a name or the address");
        break;
    }
    case PL_MSG_PLAN: {
        pl_wire_plan *p = &m->plan;
        p->n_layers = get_u32(&r), p->n_ctx = get_u32(&r), p->dtype = get_u8(&r);
        p->id_kind = get_u8(&r), p->n_members = get_u16(&r);
        get_bytes(&r, p->model_id, 32);
        p->n_tensors = get_u32(&r);
        if (p->n_members > PL_WIRE_MAX_MEMBERS)
            return pl_fail(PL_ERR_FORMAT, "room plan: %u members (1..%d)", p->n_members,
                           PL_WIRE_MAX_MEMBERS);
        if (p->n_tensors > PL_WIRE_MAX_TENSORS)
            return pl_fail(PL_ERR_FORMAT, "room plan: %u tensor hashes (1..%d)", p->n_tensors,
                           PL_WIRE_MAX_TENSORS);
        for (uint32_t i = 0; i < p->n_members && !r.short_read; i++) {
            pl_wire_member *mb = &p->members[i];
            mb->id = get_u32(&r), mb->first = get_u32(&r), mb->last = get_u32(&r);
            size_t na = get_u8(&r);
            if (na > PL_WIRE_MAX_ADDR)
                return pl_fail(PL_ERR_FORMAT, "room plan: an address longer than %d bytes",
                               PL_WIRE_MAX_ADDR);
            get_str(&r, mb->addr, na, PL_WIRE_MAX_ADDR);
            if (!r.short_read && memchr(mb->addr, 0, na))
                return pl_fail(PL_ERR_FORMAT, "room plan: NUL byte in an address");
        }
        p->hashes = p->n_tensors ? take(&r, (size_t)p->n_tensors * 32) : NULL;
        /* n_snap: 2 bytes after the hashes, or none (0); anything else is trailing bytes */
        if (!r.short_read && r.n - r.at == 2 && !(p->n_snap = get_u16(&r)))
            return pl_fail(PL_ERR_FORMAT, "room plan: n_snap 0 written out (0 is sent as none)");
        break;
    }
    case PL_MSG_WEIGHT_REQ:
        m->weight_req.tensor = get_u32(&r), m->weight_req.offset = get_u64(&r);
        m->weight_req.n = get_u32(&r);
        break;
    case PL_MSG_WEIGHT: {
        pl_wire_weight *w = &m->weight;
        w->tensor = get_u32(&r), w->offset = get_u64(&r), w->n = get_u32(&r);
        get_bytes(&r, w->sha256, 32);
        if (!r.short_read && check_piece("weight piece", w->tensor, w->offset, w->n))
            return PL_ERR_FORMAT;
        w->data = take(&r, w->n);
        if (w->data) {
            uint8_t d[32];
            digest(w->data, w->n, d);
            if (memcmp(d, w->sha256, 32))
                return pl_fail(PL_ERR_FORMAT, "room weight piece: payload hash mismatch");
        }
        break;
    }
    case PL_MSG_HIDDEN:
    case PL_MSG_RESULT: get_hidden(&r, &m->hidden); break;
    case PL_MSG_REWIND: m->rewind.seq = get_u32(&r), m->rewind.n_past = get_u32(&r); break;
    case PL_MSG_PONG: m->ping.t_ping = get_u64(&r), m->ping.t_pong = get_u64(&r); break;
    case PL_MSG_PING: m->ping.t_ping = get_u64(&r); break;
    case PL_MSG_BYE: m->bye = get_u8(&r); break;
    case PL_MSG_ERROR: {
        m->error.code = get_u16(&r);
        size_t nt = get_u8(&r);
        if (nt > PL_WIRE_MAX_TEXT)
            return pl_fail(PL_ERR_FORMAT, "room error: text longer than %d bytes",
                           PL_WIRE_MAX_TEXT);
        get_str(&r, m->error.text, nt, PL_WIRE_MAX_TEXT);
        if (!r.short_read && memchr(m->error.text, 0, nt))
            return pl_fail(PL_ERR_FORMAT, "room error: NUL byte in the text");
        break;
    }
    case PL_MSG_READY:
        m->ready.first = get_u32(&r), m->ready.last = get_u32(&r);
        get_bytes(&r, m->ready.part_id, 32);
        break;
    case PL_MSG_PART:
        m->part.header_bytes = get_u64(&r), m->part.part_bytes = get_u64(&r);
        get_bytes(&r, m->part.part_id, 32);
        break;
    case PL_MSG_ASK: {
        pl_wire_ask *a = &m->ask;
        a->n_predict = get_u32(&r);
        uint32_t temp = get_u32(&r);
        memcpy(&a->temp, &temp, 4);
        a->seed = get_u64(&r), a->flags = get_u8(&r);
        if (get_u8(&r)) r.short_read = true; /* reserved */
        a->n_turns = get_u16(&r);
        if (a->n_turns > PL_WIRE_MAX_TURNS)
            return pl_fail(PL_ERR_FORMAT, "room ask: %u messages (1..%d)", a->n_turns,
                           PL_WIRE_MAX_TURNS);
        for (uint32_t i = 0; i < a->n_turns && !r.short_read; i++) {
            a->turns[i].role = get_u8(&r), a->turns[i].n = get_u32(&r);
            if (a->turns[i].n > PL_WIRE_MAX_ASK_TEXT)
                return pl_fail(PL_ERR_FORMAT, "room ask: the messages exceed %u bytes",
                               PL_WIRE_MAX_ASK_TEXT);
            a->turns[i].text = (const char *)take(&r, a->turns[i].n);
        }
        break;
    }
    case PL_MSG_TEXT:
        m->text.n = get_u32(&r);
        if (m->text.n > PL_WIRE_MAX_TEXT_PIECE)
            return pl_fail(PL_ERR_FORMAT, "room text: %u bytes (1..%d)", m->text.n,
                           PL_WIRE_MAX_TEXT_PIECE);
        m->text.data = (const char *)take(&r, m->text.n);
        break;
    case PL_MSG_DONE: m->done.reason = get_u8(&r), m->done.n_gen = get_u32(&r); break;
    default: return pl_fail(PL_ERR_FORMAT, "room message: unknown type %u", m->type);
    }
    if (r.short_read)
        return pl_fail(PL_ERR_FORMAT, "room %s message: truncated or malformed (%zu bytes)",
                       pl_wire_type_name(m->type), n);
    if (r.at != n)
        return pl_fail(PL_ERR_FORMAT, "room %s message: %zu trailing bytes",
                       pl_wire_type_name(m->type), n - r.at);
    return check_msg(m);
}
