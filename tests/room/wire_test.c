/* wire_test.c - the room's wire protocol: every message round-trips byte for byte, every
 * truncation and a list of corruptions per message are refused with one line, another
 * version names the side that must upgrade, and 10,000 random frames never crash decode
 * (what it accepts re-encodes to the same bytes). */
#include "test.h"

#include <stdint.h>

#include "base/sha256.h"
#include "room/wire.h"

#define N_SAMPLES 20

static uint8_t payload[2 * 16 * 64 * 4];
static uint8_t hashes[3 * 32];

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint64_t rng(void) { /* xorshift64: deterministic */
    rng_state ^= rng_state << 13, rng_state ^= rng_state >> 7, rng_state ^= rng_state << 17;
    return rng_state;
}

/* One message of every type (hidden in each mode and dtype, plan with each identity kind). */
static int samples(pl_wire_msg *m) {
    for (size_t i = 0; i < sizeof payload; i++) payload[i] = (uint8_t)(i * 7 + 3);
    for (size_t i = 0; i < sizeof hashes; i++) hashes[i] = (uint8_t)(i * 13 + 1);
    memset(m, 0, sizeof *m * N_SAMPLES);
    int n = 0;
    m[n].type = PL_MSG_HELLO;
    m[n].hello = (pl_wire_hello){.caps = PL_CAP_F16_WIRE | PL_CAP_VERIFY | (1u << 30),
                                 .mem_lent = 6ull << 30,
                                 .speed = 123.5f,
                                 .has_model = true,
                                 .want_first = 3,
                                 .want_last = 9,
                                 .backend = "webgpu",
                                 .device = "NVIDIA H200 (Dawn)",
                                 .addr = "tcp://10.0.0.7:41234"};
    memset(m[n].hello.model_id, 0xab, 32);
    n++;
    m[n].type = PL_MSG_HELLO;
    m[n].hello = (pl_wire_hello){.backend = "cpu"};
    n++;
    pl_wire_plan *p = &m[n].plan;
    m[n++].type = PL_MSG_PLAN;
    p->n_layers = 30, p->n_ctx = 4096, p->dtype = PL_WIRE_F16, p->id_kind = PL_MODEL_ID_TENSORS;
    p->n_tensors = 3, p->hashes = hashes, p->n_members = 3;
    pl_sha256 s;
    pl_sha256_init(&s);
    pl_sha256_update(&s, hashes, sizeof hashes);
    pl_sha256_final(&s, p->model_id);
    p->members[0] = (pl_wire_member){.id = 0, .first = 0, .last = 10, .addr = ""};
    p->members[1] =
        (pl_wire_member){.id = 7, .first = 10, .last = 25, .addr = "tcp://10.0.0.2:7000"};
    p->members[2] = (pl_wire_member){.id = 3, .first = 25, .last = 30, .addr = "inproc://w3"};
    p = &m[n].plan;
    m[n++].type = PL_MSG_PLAN;
    p->n_layers = 1, p->n_ctx = 1, p->dtype = PL_WIRE_F32, p->id_kind = PL_MODEL_ID_DIGEST;
    memset(p->model_id, 5, 32);
    p->n_members = 1, p->members[0] = (pl_wire_member){.id = 1, .first = 0, .last = 1};
    m[n].type = PL_MSG_WEIGHT_REQ;
    m[n++].weight_req = (pl_wire_weight_req){.tensor = 12, .offset = 1ull << 40, .n = 1 << 20};
    m[n].type = PL_MSG_WEIGHT;
    m[n++].weight = (pl_wire_weight){.tensor = 2, .offset = 4096, .n = 100, .data = payload};
    m[n].type = PL_MSG_HIDDEN;
    m[n++].hidden = (pl_wire_hidden){.seq = 9,
                                     .pos0 = 16,
                                     .n_cols = 16,
                                     .flags = PL_HID_PREFILL | PL_HID_LAST,
                                     .n_embd = 64,
                                     .dtype = PL_WIRE_F16,
                                     .data = payload};
    m[n].type = PL_MSG_HIDDEN;
    m[n++].hidden = (pl_wire_hidden){.seq = 10,
                                     .pos0 = 40,
                                     .n_cols = 1,
                                     .flags = PL_HID_DECODE,
                                     .n_embd = 64,
                                     .dtype = PL_WIRE_F32,
                                     .data = payload};
    m[n].type = PL_MSG_RESULT;
    m[n++].hidden = (pl_wire_hidden){.seq = 11,
                                     .pos0 = 41,
                                     .n_cols = 5,
                                     .flags = PL_HID_VERIFY,
                                     .n_embd = 64,
                                     .dtype = PL_WIRE_F32,
                                     .data = payload};
    m[n].type = PL_MSG_REWIND;
    m[n++].rewind = (pl_wire_rewind){.seq = 12, .n_past = 33};
    m[n].type = PL_MSG_PING;
    m[n++].ping = (pl_wire_ping){.t_ping = 0x0102030405060708ull};
    m[n].type = PL_MSG_PONG;
    m[n++].ping = (pl_wire_ping){.t_ping = 77, .t_pong = 99};
    m[n].type = PL_MSG_BYE;
    m[n++].bye = PL_BYE_SHUTDOWN;
    m[n].type = PL_MSG_ERROR;
    m[n].error.code = PL_WERR_MODEL;
    snprintf(m[n++].error.text, sizeof m[0].error.text, "model identity differs: tensor 3");
    m[n].type = PL_MSG_READY;
    m[n].ready = (pl_wire_ready){.first = 4, .last = 12};
    memset(m[n++].ready.part_id, 0x5c, 32);
    m[n].type = PL_MSG_PART;
    m[n].part = (pl_wire_part){.header_bytes = 123456, .part_bytes = 1ull << 33};
    memset(m[n++].part.part_id, 0xa7, 32);
    m[n].type = PL_MSG_WEIGHT_REQ; /* the host file's header */
    m[n++].weight_req =
        (pl_wire_weight_req){.tensor = PL_WIRE_TENSOR_HEADER, .offset = 60u << 20, .n = 4u << 20};
    m[n].type = PL_MSG_ASK; /* 17: a guest's conversation */
    pl_wire_ask *a = &m[n++].ask;
    *a = (pl_wire_ask){
        .n_predict = 8, .temp = 0.5f, .seed = 42, .flags = PL_ASK_SEEDED, .n_turns = 3};
    a->turns[0] = (pl_wire_turn){PL_ROLE_SYSTEM, 0, ""};
    a->turns[1] = (pl_wire_turn){PL_ROLE_ASSISTANT, 6, "Hello\n"};
    a->turns[2] = (pl_wire_turn){PL_ROLE_USER, 11, "Once upon a"};
    m[n].type = PL_MSG_TEXT; /* 18: a piece of the reply */
    m[n++].text = (pl_wire_text){.n = 5, .data = " time"};
    m[n].type = PL_MSG_DONE; /* 19 */
    m[n++].done = (pl_wire_done){.reason = PL_DONE_LENGTH, .n_gen = 8};
    return n;
}

static bool one_line(void) {
    const char *e = pl_last_error();
    return e[0] && !strchr(e, '\n');
}

/* decode must refuse buf with a one-line reason containing want (NULL: any reason) */
static void refused(const uint8_t *buf, size_t n, const char *want, const char *what) {
    pl_wire_msg m;
    pl_clear_error();
    pl_status st = pl_wire_decode(buf, n, &m);
    CHECK(st == PL_ERR_FORMAT, "%s: decoded (%zu bytes)", what, n);
    CHECK(one_line() && (!want || strstr(pl_last_error(), want)), "%s: reason '%s'", what,
          pl_last_error());
}

static void test_round_trips(void) {
    pl_wire_msg m[N_SAMPLES], d;
    int n = samples(m);
    CHECK(n == N_SAMPLES, "in test_round_trips");
    bool seen[PL_MSG_MAX_TYPE + 1] = {false};
    for (int i = 0; i < n; i++) {
        uint8_t *b = NULL, *b2 = NULL;
        size_t nb = 0, nb2 = 0;
        CHECK(pl_wire_encode(&m[i], &b, &nb) == PL_OK, "%s: %s", pl_wire_type_name(m[i].type),
              pl_last_error());
        CHECK(pl_wire_decode(b, nb, &d) == PL_OK, "%s: %s", pl_wire_type_name(m[i].type),
              pl_last_error());
        CHECK(d.type == m[i].type, "in test_round_trips");
        seen[d.type] = true;
        CHECK(pl_wire_encode(&d, &b2, &nb2) == PL_OK && nb2 == nb && !memcmp(b, b2, nb),
              "%s re-encodes differently", pl_wire_type_name(m[i].type));
        switch (d.type) {
        case PL_MSG_HELLO:
            CHECK(d.hello.caps == m[i].hello.caps && d.hello.mem_lent == m[i].hello.mem_lent,
                  "in test_round_trips");
            CHECK(d.hello.speed == m[i].hello.speed && d.hello.has_model == m[i].hello.has_model,
                  "in test_round_trips");
            CHECK(!memcmp(d.hello.model_id, m[i].hello.model_id, 32), "in test_round_trips");
            CHECK(!strcmp(d.hello.backend, m[i].hello.backend) &&
                      !strcmp(d.hello.device, m[i].hello.device) &&
                      !strcmp(d.hello.addr, m[i].hello.addr),
                  "in test_round_trips");
            CHECK(d.hello.want_first == m[i].hello.want_first &&
                      d.hello.want_last == m[i].hello.want_last,
                  "in test_round_trips");
            break;
        case PL_MSG_READY:
            CHECK(d.ready.first == 4 && d.ready.last == 12 &&
                      !memcmp(d.ready.part_id, m[i].ready.part_id, 32),
                  "in test_round_trips");
            break;
        case PL_MSG_PLAN:
            CHECK(d.plan.n_members == m[i].plan.n_members && d.plan.n_ctx == m[i].plan.n_ctx,
                  "in test_round_trips");
            CHECK(d.plan.n_tensors == m[i].plan.n_tensors && d.plan.dtype == m[i].plan.dtype,
                  "in test_round_trips");
            CHECK(!d.plan.n_tensors || !memcmp(d.plan.hashes, hashes, sizeof hashes),
                  "in test_round_trips");
            CHECK(!d.plan.n_tensors || (d.plan.hashes >= b && d.plan.hashes < b + nb),
                  "the hash list points into the decoded buffer");
            for (uint32_t k = 0; k < d.plan.n_members; k++)
                CHECK(d.plan.members[k].first == m[i].plan.members[k].first &&
                          d.plan.members[k].last == m[i].plan.members[k].last &&
                          d.plan.members[k].id == m[i].plan.members[k].id &&
                          !strcmp(d.plan.members[k].addr, m[i].plan.members[k].addr),
                      "in test_round_trips");
            break;
        case PL_MSG_WEIGHT:
            CHECK(d.weight.n == 100 && d.weight.offset == 4096 && d.weight.tensor == 2,
                  "in test_round_trips");
            CHECK(!memcmp(d.weight.data, payload, 100), "in test_round_trips");
            break;
        case PL_MSG_HIDDEN:
        case PL_MSG_RESULT:
            CHECK(d.hidden.seq == m[i].hidden.seq && d.hidden.pos0 == m[i].hidden.pos0,
                  "in test_round_trips");
            CHECK(d.hidden.n_cols == m[i].hidden.n_cols && d.hidden.flags == m[i].hidden.flags,
                  "in test_round_trips");
            CHECK(d.hidden.n_embd == m[i].hidden.n_embd && d.hidden.dtype == m[i].hidden.dtype,
                  "in test_round_trips");
            CHECK(nb == 4 + 18 + pl_wire_hidden_bytes(&m[i].hidden), "hidden frame of %zu", nb);
            CHECK(!memcmp(d.hidden.data, payload, pl_wire_hidden_bytes(&d.hidden)),
                  "in test_round_trips");
            break;
        case PL_MSG_WEIGHT_REQ:
            CHECK(d.weight_req.offset == m[i].weight_req.offset &&
                      d.weight_req.n == m[i].weight_req.n &&
                      d.weight_req.tensor == m[i].weight_req.tensor,
                  "in test_round_trips");
            break;
        case PL_MSG_PART:
            CHECK(d.part.header_bytes == 123456 && d.part.part_bytes == 1ull << 33 &&
                      !memcmp(d.part.part_id, m[i].part.part_id, 32),
                  "in test_round_trips");
            break;
        case PL_MSG_REWIND:
            CHECK(d.rewind.n_past == 33 && d.rewind.seq == 12, "in test_round_trips");
            break;
        case PL_MSG_PING:
        case PL_MSG_PONG:
            CHECK(d.ping.t_ping == m[i].ping.t_ping && d.ping.t_pong == m[i].ping.t_pong,
                  "in test_round_trips");
            break;
        case PL_MSG_BYE: CHECK(d.bye == PL_BYE_SHUTDOWN, "in test_round_trips"); break;
        case PL_MSG_ASK:
            CHECK(d.ask.n_predict == 8 && d.ask.temp == 0.5f && d.ask.seed == 42 &&
                      d.ask.flags == PL_ASK_SEEDED && d.ask.n_turns == 3,
                  "in test_round_trips");
            for (int k = 0; k < 3; k++)
                CHECK(d.ask.turns[k].role == m[i].ask.turns[k].role &&
                          d.ask.turns[k].n == m[i].ask.turns[k].n &&
                          !memcmp(d.ask.turns[k].text, m[i].ask.turns[k].text, d.ask.turns[k].n),
                      "ask message %d", k);
            break;
        case PL_MSG_TEXT:
            CHECK(d.text.n == 5 && !memcmp(d.text.data, " time", 5), "in test_round_trips");
            break;
        case PL_MSG_DONE:
            CHECK(d.done.reason == PL_DONE_LENGTH && d.done.n_gen == 8, "in test_round_trips");
            break;
        case PL_MSG_ERROR:
            CHECK(d.error.code == PL_WERR_MODEL && !strcmp(d.error.text, m[i].error.text),
                  "in test_round_trips");
            break;
        }
        /* every truncation, and one trailing byte, is refused */
        for (size_t k = 0; k < nb; k++) refused(b, k, NULL, pl_wire_type_name(m[i].type));
        uint8_t *longer = malloc(nb + 1);
        memcpy(longer, b, nb), longer[nb] = 0;
        refused(longer, nb + 1, "trailing", pl_wire_type_name(m[i].type));
        free(longer), free(b), free(b2);
    }
    for (int t = 1; t <= PL_MSG_MAX_TYPE; t++)
        CHECK(seen[t], "no sample of %s", pl_wire_type_name(t));
}

/* Encode sample i, let edit corrupt a field of the struct, and check encode and decode both
 * refuse it (decode sees the bytes the valid encoder would have written with that field). */
typedef void (*edit_fn)(pl_wire_msg *);
static void bad_field(int i, edit_fn edit, const char *want, const char *what) {
    pl_wire_msg m[N_SAMPLES];
    samples(m);
    edit(&m[i]);
    uint8_t *b = NULL;
    size_t nb = 0;
    pl_clear_error();
    CHECK(pl_wire_encode(&m[i], &b, &nb) == PL_ERR_FORMAT && !b, "%s: encoded", what);
    CHECK(one_line() && strstr(pl_last_error(), want), "%s: '%s'", what, pl_last_error());
}

static void ask_no_turns(pl_wire_msg *m) {
    m->ask.n_turns = 0;
}
static void ask_many_turns(pl_wire_msg *m) {
    m->ask.n_turns = PL_WIRE_MAX_TURNS + 1;
}
static void ask_role(pl_wire_msg *m) {
    m->ask.turns[0].role = 3;
}
static void ask_last_not_user(pl_wire_msg *m) {
    m->ask.n_turns = 2;
}
static void ask_temp(pl_wire_msg *m) {
    m->ask.temp = NAN;
}
static void ask_flags(pl_wire_msg *m) {
    m->ask.flags = 4;
}
static void ask_raw_turns(pl_wire_msg *m) {
    m->ask.flags = PL_ASK_RAW;
}
static void ask_n_predict(pl_wire_msg *m) {
    m->ask.n_predict = PL_WIRE_MAX_CTX + 1;
}
static void ask_nul(pl_wire_msg *m) {
    m->ask.turns[2].text = "Once\0upon a";
}
static void ask_too_long(pl_wire_msg *m) {
    static char big[PL_WIRE_MAX_ASK_TEXT / 2 + 1];
    memset(big, 'x', sizeof big);
    m->ask.turns[0] = (pl_wire_turn){PL_ROLE_SYSTEM, sizeof big, big};
    m->ask.turns[1] = (pl_wire_turn){PL_ROLE_USER, sizeof big, big};
}
static void text_empty(pl_wire_msg *m) {
    m->text.n = 0;
}
static void text_big(pl_wire_msg *m) {
    m->text.n = PL_WIRE_MAX_TEXT_PIECE + 1;
}
static void done_reason(pl_wire_msg *m) {
    m->done.reason = 4;
}
static void err_busy_ok(pl_wire_msg *m) {
    m->error.code = PL_WERR_MAX + 1;
}
static void speed_nan(pl_wire_msg *m) {
    m->hello.speed = NAN;
}
static void speed_neg(pl_wire_msg *m) {
    m->hello.speed = -1;
}
static void no_backend(pl_wire_msg *m) {
    m->hello.backend[0] = 0;
}
static void ctl_device(pl_wire_msg *m) {
    m->hello.device[2] = '\n';
}
static void id_no_model(pl_wire_msg *m) {
    m->hello.model_id[5] = 1;
}
static void plan_gap(pl_wire_msg *m) {
    m->plan.members[1].first = 11;
}
static void plan_short(pl_wire_msg *m) {
    m->plan.members[2].last = 29;
}
static void plan_empty(pl_wire_msg *m) {
    m->plan.members[1].last = 10;
}
static void plan_dup(pl_wire_msg *m) {
    m->plan.members[2].id = 7;
}
static void plan_digest(pl_wire_msg *m) {
    m->plan.model_id[0] ^= 1;
}
static void plan_dtype(pl_wire_msg *m) {
    m->plan.dtype = 3;
}
static void plan_ctx(pl_wire_msg *m) {
    m->plan.n_ctx = 0;
}
static void plan_kind(pl_wire_msg *m) {
    m->plan.id_kind = 2;
}
static void plan_members(pl_wire_msg *m) {
    m->plan.n_members = 0;
}
static void plan_snap(pl_wire_msg *m) {
    m->plan.n_snap = PL_WIRE_MAX_SNAP + 1;
}
static void req_zero(pl_wire_msg *m) {
    m->weight_req.n = 0;
}
static void req_big(pl_wire_msg *m) {
    m->weight_req.n = PL_WIRE_MAX_PIECE + 1;
}
static void req_off(pl_wire_msg *m) {
    m->weight_req.offset = PL_WIRE_MAX_OFFSET;
}
static void req_tensor(pl_wire_msg *m) {
    m->weight_req.tensor = PL_WIRE_MAX_TENSORS;
}
static void hid_cols0(pl_wire_msg *m) {
    m->hidden.n_cols = 0;
}
static void hid_cols_max(pl_wire_msg *m) {
    m->hidden.n_cols = PL_WIRE_MAX_COLS + 1;
}
/* within the column cap, past the byte cap: 512 columns of 4096 f32 are 8 MiB */
static void hid_bytes(pl_wire_msg *m) {
    m->hidden.n_cols = PL_WIRE_MAX_COLS, m->hidden.n_embd = 4096, m->hidden.dtype = PL_WIRE_F32;
}
static void hid_embd(pl_wire_msg *m) {
    m->hidden.n_embd = PL_WIRE_MAX_EMBD + 1;
}
static void hid_flags(pl_wire_msg *m) {
    m->hidden.flags |= 0x20;
}
static void hid_tail_decode(pl_wire_msg *m) {
    m->hidden.flags |= PL_HID_TAIL;
}
static void hid_two_modes(pl_wire_msg *m) {
    m->hidden.flags = PL_HID_PREFILL | PL_HID_DECODE;
}
static void hid_no_mode(pl_wire_msg *m) {
    m->hidden.flags = 0;
}
static void hid_last_decode(pl_wire_msg *m) {
    m->hidden.flags |= PL_HID_LAST;
}
static void hid_decode2(pl_wire_msg *m) {
    m->hidden.n_cols = 2;
}
static void hid_verify1(pl_wire_msg *m) {
    m->hidden.n_cols = 1;
}
static void hid_dtype(pl_wire_msg *m) {
    m->hidden.dtype = 0;
}
static void hid_pos(pl_wire_msg *m) {
    m->hidden.pos0 = PL_WIRE_MAX_CTX - 1;
}
static void rew_big(pl_wire_msg *m) {
    m->rewind.n_past = PL_WIRE_MAX_CTX + 1;
}
static void bye_reason(pl_wire_msg *m) {
    m->bye = 2;
}
static void err_code(pl_wire_msg *m) {
    m->error.code = 0;
}
static void err_empty(pl_wire_msg *m) {
    m->error.text[0] = 0;
}
static void bad_type(pl_wire_msg *m) {
    m->type = PL_MSG_MAX_TYPE + 1;
}
static void want_empty(pl_wire_msg *m) {
    m->hello.want_first = m->hello.want_last = 5;
}
static void want_big(pl_wire_msg *m) {
    m->hello.want_last = PL_WIRE_MAX_LAYERS + 1;
}
static void ctl_addr(pl_wire_msg *m) {
    m->hello.addr[3] = '\r';
}
static void ready_empty(pl_wire_msg *m) {
    m->ready.last = m->ready.first;
}
static void ready_big(pl_wire_msg *m) {
    m->ready.last = PL_WIRE_MAX_LAYERS + 1;
}

static void part_header0(pl_wire_msg *m) {
    m->part.header_bytes = 0;
}
static void part_header_big(pl_wire_msg *m) {
    m->part.header_bytes = PL_WIRE_MAX_HEADER + 1;
}
static void part_big(pl_wire_msg *m) {
    m->part.part_bytes = PL_WIRE_MAX_PART + 1;
}
static void req_header_past(pl_wire_msg *m) {
    m->weight_req.offset = PL_WIRE_MAX_HEADER - m->weight_req.n + 1;
}

static void test_bad_fields(void) {
    bad_field(15, part_header0, "header", "a part without a header");
    bad_field(15, part_header_big, "header", "a part with a header past 64 MiB");
    bad_field(15, part_big, "tensors", "a part past 2^48 bytes");
    bad_field(16, req_header_past, "offset", "a header request past 64 MiB");
    bad_field(0, speed_nan, "speed", "NaN speed");
    bad_field(0, speed_neg, "speed", "negative speed");
    bad_field(0, no_backend, "backend", "empty backend");
    bad_field(0, ctl_device, "control", "newline in device");
    bad_field(1, id_no_model, "without a model", "identity without a model");
    bad_field(2, plan_gap, "member 1", "gap between members");
    bad_field(2, plan_short, "[0, 29) of 30", "layers not covered");
    bad_field(2, plan_empty, "member 1", "empty range");
    bad_field(2, plan_dup, "id 7 twice", "duplicate member id");
    bad_field(2, plan_digest, "digest", "identity not the hash list's digest");
    bad_field(2, plan_dtype, "wire type", "plan dtype");
    bad_field(2, plan_ctx, "n_ctx", "n_ctx 0");
    bad_field(2, plan_kind, "identity kind", "identity kind");
    bad_field(3, plan_members, "members", "no members");
    bad_field(2, plan_snap, "snapshots", "65 snapshots");
    bad_field(4, req_zero, "bytes", "empty request");
    bad_field(4, req_big, "bytes", "request too large");
    bad_field(4, req_off, "offset", "offset past the cap");
    bad_field(4, req_tensor, "tensor", "tensor index past the cap");
    bad_field(6, hid_cols0, "columns", "0 columns");
    bad_field(6, hid_cols_max, "columns", "513 columns");
    bad_field(6, hid_bytes, "at most 4194304", "8 MiB of columns");
    bad_field(6, hid_embd, "n_embd", "n_embd too large");
    bad_field(6, hid_flags, "unknown flags", "unknown flag");
    bad_field(6, hid_two_modes, "exactly one", "two modes");
    bad_field(6, hid_no_mode, "exactly one", "no mode");
    bad_field(7, hid_last_decode, "outside a prefill", "last with decode");
    bad_field(7, hid_tail_decode, "outside a prefill", "last column only with decode");
    bad_field(7, hid_decode2, "decode with 2", "decode with 2 columns");
    bad_field(8, hid_verify1, "verify", "verify with 1 column");
    bad_field(8, hid_dtype, "wire type", "hidden dtype 0");
    bad_field(8, hid_pos, "positions", "positions past the cap");
    bad_field(9, rew_big, "n_past", "rewind past the cap");
    bad_field(12, bye_reason, "reason", "bye reason");
    bad_field(13, err_code, "code", "error code 0");
    bad_field(13, err_empty, "empty", "empty error text");
    bad_field(10, bad_type, "unknown type", "unknown type");
    bad_field(0, want_empty, "wanted layers", "empty wanted range");
    bad_field(0, want_big, "wanted layers", "wanted range past the cap");
    bad_field(0, ctl_addr, "control", "control byte in the address");
    bad_field(14, ready_empty, "ready", "ready with no layers");
    bad_field(14, ready_big, "ready", "ready past the layer cap");
    bad_field(17, ask_no_turns, "messages", "an ask without messages");
    bad_field(17, ask_many_turns, "messages", "an ask with 257 messages");
    bad_field(17, ask_role, "role", "an unknown role");
    bad_field(17, ask_last_not_user, "not the user's", "an ask ending with the assistant");
    bad_field(17, ask_temp, "temperature", "a NaN temperature");
    bad_field(17, ask_flags, "flags", "unknown ask flags");
    bad_field(17, ask_raw_turns, "raw prompt", "a raw prompt of 3 messages");
    bad_field(17, ask_n_predict, "ids to generate", "n_predict past the cap");
    bad_field(17, ask_nul, "NUL", "a NUL in a message");
    bad_field(17, ask_too_long, "exceed", "messages past 1 MiB");
    bad_field(18, text_empty, "bytes", "an empty text piece");
    bad_field(18, text_big, "bytes", "a text piece past 64 KiB");
    bad_field(19, done_reason, "reason", "done reason");
    bad_field(13, err_busy_ok, "code", "error code 7");
}

/* Corruptions only the bytes can express. */
static void test_bad_bytes(void) {
    pl_wire_msg m[N_SAMPLES];
    samples(m);
    uint8_t *b;
    size_t nb;
    /* another version: which side upgrades */
    CHECK(pl_wire_encode(&m[10], &b, &nb) == PL_OK, "in test_bad_bytes");
    b[0] = PL_WIRE_VERSION + 1;
    refused(b, nb, "upgrade this side", "newer peer");
    b[0] = PL_WIRE_VERSION - 1;
    refused(b, nb, "the peer must upgrade", "older peer");
    b[0] = PL_WIRE_VERSION, b[3] = 1;
    refused(b, nb, "reserved", "reserved header byte");
    b[3] = 0, b[2] = 0;
    refused(b, nb, "unknown type", "type 0");
    b[2] = 200;
    refused(b, nb, "unknown type", "type 200");
    free(b);
    /* a weight piece whose payload changed in transit */
    CHECK(pl_wire_encode(&m[5], &b, &nb) == PL_OK, "in test_bad_bytes");
    b[nb - 1] ^= 0x40;
    refused(b, nb, "hash mismatch", "tampered weight piece");
    b[nb - 1] ^= 0x40;
    b[4 + 12] = 0xff, b[4 + 15] = 0xff; /* n = 0xff0000xx: past the cap */
    refused(b, nb, "bytes", "weight piece length");
    free(b);
    /* hello: has_model 2, a name length past the cap, NUL inside a name */
    CHECK(pl_wire_encode(&m[0], &b, &nb) == PL_OK, "in test_bad_bytes");
    b[4 + 16] = 2;
    refused(b, nb, "has_model", "has_model 2");
    b[4 + 16] = 1;
    b[4 + 57] = PL_WIRE_MAX_NAME + 1;
    refused(b, nb, "longer than", "backend name length");
    b[4 + 57] = 6;
    b[4 + 59] = PL_WIRE_MAX_ADDR + 1;
    refused(b, nb, "address longer", "address length");
    b[4 + 59] = 20;
    b[4 + 60] = 0;
    refused(b, nb, "NUL", "NUL in backend name");
    free(b);
    /* hidden: a column count past the cap in the bytes; a reserved byte */
    CHECK(pl_wire_encode(&m[7], &b, &nb) == PL_OK, "in test_bad_bytes");
    b[4 + 8] = 1, b[4 + 9] = 2;
    refused(b, nb, "columns", "513 columns");
    b[4 + 8] = 1, b[4 + 9] = 0, b[4 + 17] = 1;
    refused(b, nb, NULL, "hidden reserved byte");
    free(b);
    /* a prefill frame within the column cap, past the byte cap: 512 f16 columns of 4097 */
    CHECK(pl_wire_encode(&m[6], &b, &nb) == PL_OK, "in test_bad_bytes");
    b[4 + 8] = 0, b[4 + 9] = 2, b[4 + 12] = 0x01, b[4 + 13] = 0x10;
    refused(b, nb, "at most 4194304", "4 MiB + 1 KiB of columns");
    free(b);
    /* plan: a member count past the cap, a hash count past the cap */
    CHECK(pl_wire_encode(&m[2], &b, &nb) == PL_OK, "in test_bad_bytes");
    b[4 + 10] = 0xff;
    refused(b, nb, "members", "member count");
    b[4 + 10] = 3, b[4 + 46] = 0xff;
    refused(b, nb, "tensor hashes", "hash count");
    free(b);
}

/* 10,000 random frames (half with a valid header, to reach the bodies): no crash, every
 * refusal is one line, and anything accepted re-encodes to exactly its bytes. */
static void test_random_frames(void) {
    uint8_t buf[600];
    int accepted = 0, reencoded = 0, lines = 0;
    for (int i = 0; i < 10000; i++) {
        size_t n = rng() % sizeof buf;
        for (size_t k = 0; k < n; k++) buf[k] = (uint8_t)rng();
        if (i & 1 && n >= 4)
            buf[0] = PL_WIRE_VERSION, buf[1] = 0, buf[2] = 1 + rng() % PL_MSG_MAX_TYPE, buf[3] = 0;
        pl_wire_msg m;
        pl_clear_error();
        if (pl_wire_decode(buf, n, &m) != PL_OK) {
            lines += one_line();
            continue;
        }
        accepted++;
        uint8_t *b = NULL;
        size_t nb = 0;
        reencoded += pl_wire_encode(&m, &b, &nb) == PL_OK && nb == n && !memcmp(b, buf, n);
        free(b);
    }
    CHECK(lines == 10000 - accepted, "%d refusals without a one-line reason",
          10000 - accepted - lines);
    CHECK(reencoded == accepted, "%d of %d accepted frames are not canonical", accepted - reencoded,
          accepted);
    CHECK(accepted < 200, "%d random frames accepted", accepted);
}

/* A plan's n_snap: 2 bytes after the hashes, none for 0, so a plan with 0 is protocol 4's
 * byte for byte (a worker without PL_CAP_SNAP reads it); 0 written out, a value past the
 * cap and any other tail are refused. */
static void test_plan_snap(void) {
    pl_wire_msg m[N_SAMPLES], d;
    samples(m);
    uint8_t *b0 = NULL, *b = NULL;
    size_t n0 = 0, nb = 0;
    for (int i = 2; i <= 3; i++) { /* with a hash list and without */
        m[i].plan.n_snap = 0;
        CHECK(pl_wire_encode(&m[i], &b0, &n0) == PL_OK, "%s", pl_last_error());
        m[i].plan.n_snap = 16;
        CHECK(pl_wire_encode(&m[i], &b, &nb) == PL_OK, "%s", pl_last_error());
        if (!b0 || !b) break;
        CHECK(nb == n0 + 2 && !memcmp(b, b0, n0) && b[n0] == 16 && b[n0 + 1] == 0,
              "plan %d: n_snap 16 is not 2 bytes after the plan without it", i);
        CHECK(pl_wire_decode(b0, n0, &d) == PL_OK && d.plan.n_snap == 0, "%s", pl_last_error());
        CHECK(pl_wire_decode(b, nb, &d) == PL_OK && d.plan.n_snap == 16, "%s", pl_last_error());
        CHECK(!d.plan.n_tensors || !memcmp(d.plan.hashes, hashes, sizeof hashes),
              "plan %d: the hashes with n_snap", i);
        b[n0] = PL_WIRE_MAX_SNAP + 1;
        refused(b, nb, "snapshots", "a plan with 65 snapshots");
        b[n0] = 0;
        refused(b, nb, "n_snap 0", "a plan with n_snap 0 written out");
        uint8_t *more = malloc(nb + 1);
        memcpy(more, b, nb), more[n0] = 16, more[nb] = 0;
        refused(more, nb + 1, "trailing", "a plan with 3 bytes after the hashes");
        free(more), free(b0), free(b);
        b0 = b = NULL;
    }
}

static void run_tests(void) {
    test_round_trips();
    test_plan_snap();
    test_bad_fields();
    test_bad_bytes();
    test_random_frames();
}
