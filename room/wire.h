/* wire.h - the room's wire protocol: plain structs <-> bytes.
 *
 * Every message is a 4-byte header (version u16, type u8, zero u8) and a body of fixed
 * little-endian fields, then at most one variable part whose length the fixed fields give.
 * docs/room-protocol.md has the layout byte by byte. pl_wire_decode checks every field
 * (lengths, counts, ranges, flags, names, hashes) before anything reaches the caller; a
 * peer speaking another protocol version is refused with a line saying which side must
 * upgrade. pl_wire_encode runs the same checks, so what one side sends the other accepts.
 *
 * Decoded strings and small arrays are copied into the struct. The bulk payloads (hidden
 * columns, weight bytes, the plan's per-tensor hash list) are NOT copied: `data` / `hashes`
 * point into the buffer that was decoded and live exactly as long as it. */
#ifndef PL_ROOM_WIRE_H
#define PL_ROOM_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/status.h"

#define PL_WIRE_VERSION 4

/* Caps (see docs/room-protocol.md, "Limits"). */
#define PL_WIRE_HEADER_BYTES 4
#define PL_WIRE_MAX_COLS     512          /* columns of one hidden/result frame (1 + K verify) */
#define PL_WIRE_NARROW_COLS  16           /* ... to a peer without PL_CAP_WIDE (versions 1-4) */
#define PL_WIRE_MAX_HIDDEN   (4u << 20)   /* payload bytes of one frame: 512 x 4096 f16 */
#define PL_WIRE_MAX_EMBD     32768        /* hidden size */
#define PL_WIRE_MAX_CTX      (1u << 24)   /* positions, n_ctx, n_past */
#define PL_WIRE_MAX_LAYERS   4096         /* layers of a model */
#define PL_WIRE_MAX_MEMBERS  64           /* members of a plan */
#define PL_WIRE_MAX_TENSORS  16384        /* tensors of a model (plan's hash list, pieces) */
#define PL_WIRE_MAX_PIECE    (4u << 20)   /* payload bytes of one weight piece */
#define PL_WIRE_MAX_HEADER   (64u << 20)  /* a model file's bytes before its tensor data */
#define PL_WIRE_MAX_PART     (1ull << 48) /* bytes of one part's tensors */
/* The tensor index of a weight request / piece that names the file's header (bytes
 * [0, header bytes) of the host's file: metadata and tensor infos) instead of a tensor. */
#define PL_WIRE_TENSOR_HEADER  0xffffffffu
#define PL_WIRE_MAX_OFFSET     (1ull << 48) /* byte offset inside one tensor */
#define PL_WIRE_MAX_NAME       64           /* backend / device name bytes */
#define PL_WIRE_MAX_ADDR       128          /* member address bytes */
#define PL_WIRE_MAX_TEXT       200          /* error line bytes */
#define PL_WIRE_MAX_SPEED      1e9f         /* measured speed (tokens/s of the probe) */
#define PL_WIRE_MAX_TURNS      256          /* messages of one guest's conversation (ask) */
#define PL_WIRE_MAX_ASK_TEXT   (1u << 20)   /* bytes of all of an ask's messages together */
#define PL_WIRE_MAX_TEXT_PIECE 65536        /* bytes of one text piece of a reply */
#define PL_WIRE_MAX_TEMP       100.0f       /* an ask's temperature */
#define PL_WIRE_MAX_SNAP       64           /* recurrent snapshots a plan asks for (n_snap) */
/* The largest encoded message: a weight piece, or a plan with the full hash list. */
#define PL_WIRE_MAX_MESSAGE (PL_WIRE_MAX_PIECE + 4096)

/* Message types: pinned, never renumbered (a new message takes a new number). */
typedef enum {
    PL_MSG_HELLO = 1,      /* a device introduces itself */
    PL_MSG_PLAN = 2,       /* the host's deal: who holds which layers */
    PL_MSG_WEIGHT_REQ = 3, /* ask for a piece of a tensor */
    PL_MSG_WEIGHT = 4,     /* a piece of a tensor */
    PL_MSG_HIDDEN = 5,     /* hidden state going down the chain */
    PL_MSG_RESULT = 6,     /* the chain's output back to the host */
    PL_MSG_REWIND = 7,     /* cut every cache back to n_past (0: reset) */
    PL_MSG_PING = 8,
    PL_MSG_PONG = 9,
    PL_MSG_BYE = 10,   /* clean leave */
    PL_MSG_ERROR = 11, /* code + one line */
    PL_MSG_READY = 12, /* a worker loaded its layers: their identity (version 2) */
    PL_MSG_PART = 13,  /* to a worker that fetches its layers: what it will ask for (v3) */
    PL_MSG_ASK = 14,   /* a guest's conversation, to be answered (v4) */
    PL_MSG_TEXT = 15,  /* a piece of the answer's text, as it is generated (v4) */
    PL_MSG_DONE = 16,  /* the answer is complete (v4) */
} pl_msg_type;
#define PL_MSG_MAX_TYPE 16

/* hello capability bits; unknown bits are kept and ignored (newer peers may add some). */
#define PL_CAP_F16_WIRE     (1u << 0) /* understands f16 hidden frames */
#define PL_CAP_VERIFY       (1u << 1) /* answers 1 + K verify frames in one lap */
#define PL_CAP_WEIGHT_FETCH (1u << 2) /* can receive its layers over the link */
#define PL_CAP_GUEST        (1u << 3) /* a guest: lends nothing, only asks (v4) */
#define PL_CAP_WIDE                                                                                \
    (1u << 4) /* takes frames of more than 16 columns (pl_wire_frame_cols)                         \
                 and PL_HID_TAIL */
/* reads a plan's n_snap (a plan without it is protocol 4's byte for byte) and keeps that
 * many recurrent snapshots, so a rewind into a verify frame needs no fresh start */
#define PL_CAP_SNAP (1u << 5)

/* Element type of hidden/result columns. */
typedef enum { PL_WIRE_F16 = 1, PL_WIRE_F32 = 2 } pl_wire_dtype;

/* hidden/result flags: exactly one of PREFILL, DECODE, VERIFY; LAST only with PREFILL. */
#define PL_HID_PREFILL 0x1u /* a slice of the prompt */
#define PL_HID_DECODE  0x2u /* one new token: exactly 1 column */
#define PL_HID_VERIFY  0x4u /* 1 + K columns, answered in one lap: at least 2 columns */
#define PL_HID_LAST    0x8u /* the last frame of the prompt: the head runs on its last column */
/* prefill only, to a chain whose workers all have PL_CAP_WIDE: the last worker answers
 * with the frame's last column alone (the host runs the head on it and nothing else) */
#define PL_HID_TAIL 0x10u

typedef enum { PL_MODEL_ID_DIGEST = 0, PL_MODEL_ID_TENSORS = 1 } pl_model_id_kind;

typedef struct {
    uint32_t caps;                      /* PL_CAP_* */
    uint64_t mem_lent;                  /* bytes this device lends */
    float speed;                        /* measured probe speed, tokens/s, finite, >= 0 */
    bool has_model;                     /* it has the model file ... */
    uint8_t model_id[32];               /* ... whose metadata digest (pl_gguf_meta_digest)
                                           is this (all zero without one) */
    uint32_t want_first, want_last;     /* join --layers: exactly [first, last) (0, 0: any) */
    char backend[PL_WIRE_MAX_NAME + 1]; /* "cpu", "webgpu" */
    char device[PL_WIRE_MAX_NAME + 1];  /* adapter or CPU name */
    char addr[PL_WIRE_MAX_ADDR + 1];    /* where it listens for its predecessor ("": none) */
} pl_wire_hello;

typedef struct {
    uint32_t id;                     /* unique inside the plan */
    uint32_t first, last;            /* layers [first, last), non-empty */
    char addr[PL_WIRE_MAX_ADDR + 1]; /* where it listens for its predecessor ("" for none) */
} pl_wire_member;

typedef struct {
    uint32_t n_layers;     /* of the model; members cover [0, n_layers) in order, no gaps */
    uint32_t n_ctx;        /* 1..PL_WIRE_MAX_CTX */
    uint8_t dtype;         /* pl_wire_dtype of hidden frames */
    uint8_t id_kind;       /* pl_model_id_kind */
    uint8_t model_id[32];  /* the digest of the per-tensor hash list */
    uint32_t n_tensors;    /* PL_MODEL_ID_TENSORS: 1..MAX_TENSORS hashes follow, else 0 */
    const uint8_t *hashes; /* n_tensors x 32 bytes, into the decoded buffer */
    uint32_t n_members;    /* 1..PL_WIRE_MAX_MEMBERS */
    pl_wire_member members[PL_WIRE_MAX_MEMBERS];
    /* recurrent snapshots the worker keeps (the host speculates: pl_state_opts.n_snap),
     * 0..PL_WIRE_MAX_SNAP; on the wire after the hashes only when non-zero, so a plan with
     * 0 is what a worker without PL_CAP_SNAP reads (the host sends it none other) */
    uint16_t n_snap;
} pl_wire_plan;

typedef struct {
    uint32_t tensor; /* index in the model's tensor list */
    uint64_t offset; /* byte offset in the tensor */
    uint32_t n;      /* bytes, 1..PL_WIRE_MAX_PIECE */
} pl_wire_weight_req;

typedef struct {
    uint32_t tensor, n;
    uint64_t offset;
    uint8_t sha256[32];  /* of the payload: checked by decode */
    const uint8_t *data; /* n bytes, into the decoded buffer */
} pl_wire_weight;

typedef struct {
    uint32_t seq;     /* the host's frame counter, echoed by the result */
    uint32_t pos0;    /* position of the first column */
    uint16_t n_cols;  /* 1..PL_WIRE_MAX_COLS */
    uint16_t flags;   /* PL_HID_* */
    uint32_t n_embd;  /* 1..PL_WIRE_MAX_EMBD */
    uint8_t dtype;    /* pl_wire_dtype */
    const void *data; /* n_cols x n_embd elements, into the decoded buffer (unaligned) */
} pl_wire_hidden;

typedef struct {
    uint32_t seq;
    uint32_t n_past; /* keep positions [0, n_past); 0 resets */
} pl_wire_rewind;

typedef struct {
    uint64_t t_ping; /* sender's clock, microseconds; a pong echoes it */
    uint64_t t_pong; /* pong only: the answerer's clock */
} pl_wire_ping;

typedef enum { PL_BYE_LEAVE = 0, PL_BYE_SHUTDOWN = 1 } pl_bye_reason;

typedef enum {
    PL_WERR_PROTOCOL = 1, /* a message we cannot accept */
    PL_WERR_VERSION = 2,  /* protocol versions differ */
    PL_WERR_MODEL = 3,    /* model identity does not match */
    PL_WERR_MEMORY = 4,   /* cannot hold the dealt layers */
    PL_WERR_INTERNAL = 5, /* anything else on the sender's side */
    PL_WERR_BUSY = 6,     /* too many guests waiting: ask again later (v4) */
} pl_wire_errcode;
#define PL_WERR_MAX 6

typedef struct {
    uint16_t code;                   /* pl_wire_errcode */
    char text[PL_WIRE_MAX_TEXT + 1]; /* one line */
} pl_wire_error;

typedef struct {
    uint32_t first, last; /* the layers loaded, non-empty */
    uint8_t part_id[32];  /* pl_gguf_part_identity of them in the worker's file */
} pl_wire_ready;

typedef struct {
    uint64_t header_bytes; /* the host file's bytes before its tensor data, 1..MAX_HEADER */
    uint64_t part_bytes;   /* bytes of the worker's part's tensors, 0..MAX_PART */
    uint8_t part_id[32];   /* pl_gguf_part_identity of the part in the host's file */
} pl_wire_part;

typedef enum { PL_ROLE_SYSTEM = 0, PL_ROLE_USER = 1, PL_ROLE_ASSISTANT = 2 } pl_wire_role;

typedef struct {
    uint8_t role;     /* pl_wire_role */
    uint32_t n;       /* bytes of text (no NUL among them) */
    const char *text; /* into the decoded buffer, not NUL-terminated */
} pl_wire_turn;

#define PL_ASK_SEEDED 0x1u /* seed is the guest's --seed (else its clock's) */
#define PL_ASK_RAW    0x2u /* one user message, run as `pooled run` runs a prompt: no template */

typedef struct {
    uint32_t n_predict; /* most ids to generate, 1..PL_WIRE_MAX_CTX; 0: until the turn ends */
    float temp;         /* 0 (greedy)..PL_WIRE_MAX_TEMP, finite */
    uint64_t seed;
    uint8_t flags;    /* PL_ASK_* */
    uint16_t n_turns; /* 1..PL_WIRE_MAX_TURNS, the last one the user's */
    pl_wire_turn turns[PL_WIRE_MAX_TURNS];
} pl_wire_ask;

typedef struct {
    uint32_t n;       /* 1..PL_WIRE_MAX_TEXT_PIECE bytes (no NUL among them) */
    const char *data; /* into the decoded buffer */
} pl_wire_text;

typedef enum { PL_DONE_EOG = 1, PL_DONE_LENGTH = 2, PL_DONE_STOPPED = 3 } pl_done_reason;

typedef struct {
    uint8_t reason; /* pl_done_reason */
    uint32_t n_gen; /* ids generated */
} pl_wire_done;

typedef struct {
    uint8_t type; /* pl_msg_type */
    union {
        pl_wire_hello hello;
        pl_wire_plan plan;
        pl_wire_weight_req weight_req;
        pl_wire_weight weight;
        pl_wire_hidden hidden; /* PL_MSG_HIDDEN and PL_MSG_RESULT */
        pl_wire_rewind rewind;
        pl_wire_ping ping; /* PL_MSG_PING and PL_MSG_PONG */
        uint8_t bye;       /* pl_bye_reason */
        pl_wire_error error;
        pl_wire_ready ready;
        pl_wire_part part;
        pl_wire_ask ask;
        pl_wire_text text;
        pl_wire_done done;
    };
} pl_wire_msg;

/* Bytes of one hidden/result payload. */
size_t pl_wire_hidden_bytes(const pl_wire_hidden *h);

/* The most columns one frame of width n_embd in dtype carries: PL_WIRE_MAX_COLS within
 * PL_WIRE_MAX_HIDDEN bytes (at least 16: n_embd <= PL_WIRE_MAX_EMBD), or PL_WIRE_NARROW_COLS
 * where a member of the chain lacks PL_CAP_WIDE (wide false). */
int pl_wire_frame_cols(int64_t n_embd, pl_wire_dtype dtype, bool wide);

/* Check m as decode would; PL_ERR_FORMAT with a one-line reason if it is not sendable. */
pl_status pl_wire_check(const pl_wire_msg *m);

/* Encode m (checked first) into a new malloc'd buffer *out of *n bytes (caller frees). */
pl_status pl_wire_encode(const pl_wire_msg *m, uint8_t **out, size_t *n);

/* Decode buf[0..n) into *m, checking every field. PL_ERR_FORMAT with a one-line reason
 * (which side must upgrade, for another protocol version). Pointers in *m point into buf. */
pl_status pl_wire_decode(const uint8_t *buf, size_t n, pl_wire_msg *m);

/* The version a message claims (0 when n < 2), for callers that log mismatches. */
uint16_t pl_wire_peek_version(const uint8_t *buf, size_t n);

/* The line for a version mismatch into buf: "the peer speaks room protocol P, this side S:
 * upgrade this side" (peer newer) or "...: the peer must upgrade" (peer older). */
void pl_wire_version_line(unsigned peer, unsigned self, char *buf, size_t cap);

/* A short name for a message type ("hello", ... "?"). */
const char *pl_wire_type_name(unsigned type);

#endif
