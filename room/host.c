/* host.c - the host's side of a room: gather workers, deal them layers (room.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fetch.h"
#include "format/gguf_hash.h"
#include "room.h"
#include "room_io.h"
#include "runtime/plan.h"
#include "base/sha256.h"

static int64_t now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* A joined peer's hello, within PL_ROOM_HELLO_MS. PL_OK with *h filled, else the reason
 * (the peer has been told it). */
static pl_status take_hello(pl_link *l, const uint8_t *meta, pl_wire_hello *h) {
    pl_wire_msg m;
    pl_status s = pl_room_recv(l, &m, PL_ROOM_HELLO_MS);
    if (s == PL_ERR) return pl_fail(PL_ERR, "said no hello within %d ms", PL_ROOM_HELLO_MS);
    if (s == PL_ERR_IO) return pl_fail(PL_ERR, "left before its hello");
    if (!s && m.type != PL_MSG_HELLO)
        s = pl_fail(PL_ERR_FORMAT, "sent a %s where a hello was due", pl_wire_type_name(m.type));
    if (!s && (m.hello.caps & PL_CAP_GUEST))
        s = pl_fail(PL_ERR_FORMAT, "a guest: the room still gathers its workers (ask again once "
                                   "it runs, with `room host --serve`)");
    bool other = !s && meta && m.hello.has_model && memcmp(m.hello.model_id, meta, 32);
    if (other)
        s = pl_fail(PL_ERR_FORMAT, "its model file has other metadata (architecture, sizes) than "
                                   "the host's: another model");
    if (!s && !m.hello.has_model && !(m.hello.caps & PL_CAP_WEIGHT_FETCH))
        s = pl_fail(PL_ERR_FORMAT, "it has no model file and cannot fetch its layers");
    if (s) {
        char line[PL_WIRE_MAX_TEXT + 1];
        snprintf(line, sizeof line, "%s", pl_last_error());
        pl_room_refuse(l, other ? PL_WERR_MODEL : PL_WERR_PROTOCOL, line);
        return pl_fail(s, "%s", line);
    }
    *h = m.hello;
    return PL_OK;
}

/* Drop the gathered workers that left (or spoke out of turn) while the room fills. */
static int drop_leavers(pl_room_worker *w, int got, bool verbose) {
    int kept = 0;
    for (int i = 0; i < got; i++) {
        pl_wire_msg m;
        pl_status s = pl_room_recv(w[i].link, &m, 0);
        if (s == PL_ERR) { /* nothing: still waiting, as it should */
            w[kept++] = w[i];
            continue;
        }
        if (verbose)
            fprintf(stderr, "room: the worker at %s left before the deal\n",
                    pl_link_peer(w[i].link));
        pl_link_close(w[i].link);
    }
    return kept;
}

pl_status pl_room_gather(pl_listener *L, int n, int wait_ms, volatile sig_atomic_t *stop,
                         bool verbose, const uint8_t *meta, pl_room_worker *w) {
    int64_t end = wait_ms ? now_ms() + wait_ms : 0;
    uint64_t refused = 0;
    int got = 0;
    while (got < n) {
        if (stop && *stop) return pl_fail(PL_ERR, "stopped while waiting for workers");
        if (end && now_ms() >= end)
            return pl_fail(PL_ERR, "%d of %d workers joined within %d ms", got, n, wait_ms);
        pl_link *l = NULL;
        pl_status s = pl_link_accept(L, 200, &l);
        pl_listener_stats ls;
        pl_listener_get_stats(L, &ls);
        uint64_t r = ls.refused_key + ls.refused_version + ls.refused_junk + ls.refused_busy;
        if (r != refused && verbose)
            fprintf(stderr, "room: refused a joiner: %s\n", ls.last_refusal);
        refused = r;
        got = drop_leavers(w, got, verbose);
        if (s) continue;
        memset(&w[got], 0, sizeof w[got]);
        if (take_hello(l, meta, &w[got].hello)) {
            if (verbose)
                fprintf(stderr, "room: dropped the joiner at %s: %s\n", pl_link_peer(l),
                        pl_last_error());
            pl_link_close(l);
            continue;
        }
        w[got].link = l;
        if (verbose)
            fprintf(stderr,
                    "room: worker %d of %d joined from %s (%s, lends %.0f MiB, speed %.1f "
                    "layers/s%s)\n",
                    got + 1, n, pl_link_peer(l), w[got].hello.backend,
                    (double)w[got].hello.mem_lent / (1 << 20), w[got].hello.speed,
                    w[got].hello.want_first < w[got].hello.want_last ? ", --layers" : "");
        got++;
    }
    return PL_OK;
}

/* KV cache bytes one layer holds for n_ctx positions (keys and values of every KV head):
 * what the plan counts on top of the layer's weights. A recurrent layer's state is smaller;
 * counting it the same only errs on the safe side. */
static uint64_t layer_state_bytes(const pl_gguf *g, int n_ctx, uint32_t kv_type) {
    char *arch = pl_gguf_get_string(g, "general.architecture"), key[96];
    int64_t heads = 0, kv = 0, embd = 0, kl = 0, vl = 0;
#define GET(suffix, v)                                                                             \
    (snprintf(key, sizeof key, "%s.%s", arch, suffix), pl_gguf_get_int(g, key, &v))
    if (arch) {
        GET("attention.head_count", heads), GET("attention.head_count_kv", kv);
        GET("embedding_length", embd), GET("attention.key_length", kl);
        GET("attention.value_length", vl);
    }
#undef GET
    free(arch);
    if (heads > 0 && !kl) kl = embd / heads;
    if (!vl) vl = kl;
    if (kv <= 0) kv = heads;
    if (kv < 0 || kv > 1 << 16 || kl < 0 || kl > 1 << 16 || vl < 0 || vl > 1 << 16) return 0;
    /* bytes per cached value: 4, 2, or a q8_0 block's 34 per 32 */
    return (uint64_t)n_ctx * (uint64_t)kv * (uint64_t)(kl + vl) *
           (uint64_t)pl_row_size(kv_type, 32) / 32;
}

/* The speed the plan counts for a worker whose hello has none: a worker without the model
 * file cannot probe before its plan (it has not fetched the header): as fast as the host;
 * any other as the slowest. */
static double unmeasured(const pl_wire_hello *h, const pl_room_deal_opts *o) {
    return !h->has_model && o->host_speed > 0 ? o->host_speed : 1e-9;
}

pl_status pl_room_plan(pl_room_worker *w, int *n, const pl_room_deal_opts *o, int *host_first,
                       int *host_last) {
    pl_gguf_sel sel;
    pl_status s = pl_gguf_select(o->g, 0, 0, 0, &sel);
    if (s) return s;
    int L = sel.n_layer, hf = o->host_first, hl = o->host_last;
    if (hf >= hl) hf = hl = 0;
    uint64_t *lb = calloc((size_t)L, sizeof *lb), *sb = calloc((size_t)L, sizeof *sb), ends = 0;
    if (!lb || !sb) {
        free(lb), free(sb);
        return pl_fail(PL_ERR_NOMEM, "out of memory for the plan");
    }
    pl_gguf_layer_bytes(o->g, &sel, lb, &ends);
    uint64_t state = layer_state_bytes(o->g, o->n_ctx, o->kv_type);
    for (int l = 0; l < L; l++) sb[l] = state;
    /* members: the host, then the workers in the order they joined */
    pl_plan_member mb[PL_PLAN_MAX_MEMBERS];
    pl_plan_range r[PL_PLAN_MAX_MEMBERS];
    int k = *n + 1;
    bool workers_forced = false;
    mb[0] = (pl_plan_member){.id = "host",
                             .backend = o->host_backend,
                             .mem_bytes = o->host_lend,
                             .speed = o->host_speed > 0 ? o->host_speed : 1e-9,
                             .host = true,
                             .forced = hf < hl,
                             .first = hf,
                             .last = hl};
    for (int i = 0; i < *n; i++) {
        const pl_wire_hello *h = &w[i].hello;
        mb[i + 1] = (pl_plan_member){.id = pl_link_peer(w[i].link),
                                     .backend = h->backend,
                                     .mem_bytes = h->mem_lent,
                                     .speed = h->speed > 0 ? h->speed : unmeasured(h, o),
                                     .forced = h->want_first < h->want_last,
                                     .first = (int)h->want_first,
                                     .last = (int)h->want_last};
        workers_forced |= mb[i + 1].forced;
    }
    pl_plan_model md = {.n_layer = L, .layer_bytes = lb, .state_bytes = sb, .ends_bytes = ends};
    if (hf < hl && !workers_forced) {
        /* --host-layers and no worker's --layers: the host keeps exactly its range and the
         * workers share the rest by the plan's rules, over the model without it */
        if (hf && hl < L) {
            free(lb), free(sb);
            return pl_fail(PL_ERR_ARG,
                           "--host-layers %d-%d in the middle of the model: give the "
                           "workers --layers too",
                           hf, hl);
        }
        md.n_layer = L - (hl - hf);
        md.layer_bytes = lb + (hf ? 0 : hl), md.state_bytes = sb + (hf ? 0 : hl);
        mb[0].forced = false;
        mb[0].mem_bytes = ends; /* room for the ends only: no further layers */
        mb[0].speed = 1e-9;
        s = md.n_layer ? pl_plan_make(&md, mb, k, r) : PL_OK;
        for (int i = 0; i < k; i++) {
            if (!md.n_layer) r[i] = (pl_plan_range){0, 0, i ? 0 : ends};
            if (!hf && r[i].first < r[i].last) r[i].first += hl, r[i].last += hl;
        }
        r[0] = (pl_plan_range){hf, hl, ends};
        for (int l = hf; l < hl; l++) r[0].bytes += lb[l] + sb[l];
        mb[0] = (pl_plan_member){
            .id = "host", .backend = o->host_backend, .mem_bytes = o->host_lend, .host = true};
    } else {
        s = pl_plan_make(&md, mb, k, r);
    }
    free(lb), free(sb);
    if (s) return pl_fail(s, "the room cannot run this model: %s", pl_last_error());
    if (o->verbose) {
        char *t = pl_plan_format(mb, r, k);
        if (t) fprintf(stderr, "room: the plan (layers by speed, within the memory lent):\n%s", t);
        free(t);
    }
    *host_first = r[0].first, *host_last = r[0].last;
    int kept = 0;
    for (int i = 0; i < *n; i++) {
        if (r[i + 1].first < r[i + 1].last) {
            w[kept] = w[i];
            w[kept].first = r[i + 1].first, w[kept].last = r[i + 1].last;
            kept++;
            continue;
        }
        if (o->verbose)
            fprintf(stderr, "room: the worker at %s is not needed: it stays idle (bye)\n",
                    pl_link_peer(w[i].link));
        pl_room_worker_bye(w[i].link);
    }
    *n = kept;
    for (int i = 1; i < kept; i++) /* layer order, as the chain runs them */
        for (int j = i; j > 0 && w[j - 1].first > w[j].first; j--) {
            pl_room_worker t = w[j];
            w[j] = w[j - 1], w[j - 1] = t;
        }
    return PL_OK;
}

/* Where the previous worker of the chain dials w: its hello's address, a wildcard host
 * (0.0.0.0, ::) replaced by the address the host sees it at. */
static void chain_addr(const pl_room_worker *w, char *out, size_t cap) {
    const char *a = w->hello.addr, *any[] = {"tcp://0.0.0.0:", "tcp://[::]:"};
    for (int i = 0; i < 2; i++) {
        size_t k = strlen(any[i]);
        if (strncmp(a, any[i], k)) continue;
        const char *peer = pl_link_peer(w->link), *colon = strrchr(peer, ':');
        int ip = colon ? (int)(colon - peer) : (int)strlen(peer);
        snprintf(out, cap, "tcp://%.*s:%s", ip, peer, a + k);
        return;
    }
    snprintf(out, cap, "%s", a);
}

bool pl_room_chain(const pl_room_worker *w, int n, bool verbose) {
    for (int i = 0; i < n; i++)
        if (!w[i].hello.addr[0]) {
            if (verbose)
                fprintf(stderr,
                        "room: the worker at %s listens nowhere (join --listen none): no chain, "
                        "every frame goes through the host (a star)\n",
                        pl_link_peer(w[i].link));
            return false;
        }
    return true;
}

/* The plan as worker i sees it: every member in layer order, its own with id 0; in a chain,
 * each worker's address (the host's member has none: results come back to it). */
static void plan_for(const pl_room_worker *w, int n, const pl_room_deal_opts *o, int n_layer,
                     int host_first, int host_last, bool chain, int i, pl_wire_plan *p) {
    *p = (pl_wire_plan){.n_layers = (uint32_t)n_layer,
                        .n_ctx = (uint32_t)o->n_ctx,
                        .dtype = (uint8_t)o->dtype,
                        .id_kind = PL_MODEL_ID_DIGEST,
                        /* a worker of an earlier build reads no n_snap: it gets none */
                        .n_snap = w[i].hello.caps & PL_CAP_SNAP ? (uint16_t)o->n_snap : 0};
    uint32_t next_id = 1;
    for (uint32_t pos = 0; pos < p->n_layers;) {
        if (pos == (uint32_t)host_first && host_first < host_last) {
            p->members[p->n_members++] = (pl_wire_member){
                .id = next_id++, .first = (uint32_t)host_first, .last = (uint32_t)host_last};
            pos = (uint32_t)host_last;
            continue;
        }
        int j = 0;
        while (j < n && w[j].first != (int)pos) j++;
        if (j == n) break; /* cannot happen: the plan covers every layer */
        pl_wire_member *mb = &p->members[p->n_members++];
        *mb = (pl_wire_member){
            .id = j == i ? 0 : next_id++, .first = pos, .last = (uint32_t)w[j].last};
        if (chain) chain_addr(&w[j], mb->addr, sizeof mb->addr);
        pos = (uint32_t)w[j].last;
    }
}

/* Whether worker w fetches its layers from the host (its hello had no model). */
static bool fetches(const pl_room_worker *w) {
    return !w->hello.has_model;
}

/* Worker w's answer to its plan (a ready), the requests for its layers answered meanwhile.
 * *done: it is ready, with the same identity as the host's file; a failure says why. */
static pl_status take_ready(pl_room_worker *w, const pl_room_deal_opts *o, const pl_wire_part *part,
                            int ms, bool *done) {
    pl_wire_msg m;
    *done = false;
    pl_status s = pl_room_recv(w->link, &m, ms);
    const char *peer = pl_link_peer(w->link);
    if (s == PL_ERR) return PL_OK; /* nothing yet */
    if (s == PL_ERR_IO) return pl_fail(PL_ERR_IO, "the worker at %s left the room", peer);
    if (s) return pl_fail(s, "the worker at %s: %s", peer, pl_last_error());
    if (m.type == PL_MSG_WEIGHT_REQ && fetches(w)) {
        return pl_room_serve_piece(w, o->g, o->model_path, part, &m.weight_req, o->test_bad_piece);
    }
    if (m.type == PL_MSG_ERROR)
        return pl_fail(PL_ERR, "the worker at %s cannot serve layers %d..%d: %s", peer, w->first,
                       w->last, m.error.text);
    if (m.type != PL_MSG_READY || m.ready.first != (uint32_t)w->first ||
        m.ready.last != (uint32_t)w->last)
        return pl_fail(PL_ERR, "the worker at %s answered its plan with a %s", peer,
                       pl_wire_type_name(m.type));
    /* the same file? its identity of the range against the host's own */
    uint8_t mine[32];
    s = pl_room_part_id(o->g, w->first, w->last, o->hash_cache, mine);
    if (s) return pl_fail(s, "cannot hash layers %d..%d: %s", w->first, w->last, pl_last_error());
    if (memcmp(mine, m.ready.part_id, 32)) {
        char line[PL_WIRE_MAX_TEXT + 1];
        snprintf(line, sizeof line,
                 "layers %d..%d of this worker's model file differ from the host's (another "
                 "file or quantization): refused",
                 w->first, w->last);
        pl_room_send_error(w->link, PL_WERR_MODEL, line);
        return pl_fail(PL_ERR, "the worker at %s: %s", peer, line);
    }
    *done = true;
    if (o->verbose && fetches(w) && !w->pieces)
        fprintf(stderr, "room: the worker at %s had layers %d..%d in its cache: nothing sent\n",
                peer, w->first, w->last);
    else if (o->verbose && fetches(w))
        fprintf(stderr,
                "room: the worker at %s fetched layers %d..%d: %.1f MiB sent in %d pieces\n", peer,
                w->first, w->last, (double)w->sent / (1 << 20), w->pieces);
    return PL_OK;
}

pl_status pl_room_deal(pl_room_worker *w, int n, const pl_room_deal_opts *o, int host_first,
                       int host_last) {
    if (host_first >= host_last) host_first = host_last = 0;
    pl_gguf_sel sel;
    if (pl_gguf_select(o->g, 0, 0, 0, &sel)) return PL_ERR_FORMAT;
    bool chain = !o->star && pl_room_chain(w, n, o->verbose);
    pl_wire_part part[PL_ROOM_MAX_WORKERS];
    for (int i = 0; i < n; i++) {
        pl_wire_msg m = {.type = PL_MSG_PLAN};
        plan_for(w, n, o, sel.n_layer, host_first, host_last, chain, i, &m.plan);
        if (o->n_snap && !m.plan.n_snap && o->verbose)
            fprintf(stderr,
                    "room: the worker at %s keeps no snapshots (an earlier build): a rejected "
                    "draft makes the chain start afresh\n",
                    pl_link_peer(w[i].link));
        uint8_t *hashes = NULL;
        pl_status s = PL_OK;
        if (fetches(&w[i]) && !o->model_path)
            s = pl_fail(PL_ERR_ARG,
                        "the worker at %s has no model file and this host cannot "
                        "send it one",
                        pl_link_peer(w[i].link));
        else if (fetches(&w[i]))
            s = pl_room_part_offer(o->g, w[i].first, w[i].last, o->hash_cache, &hashes,
                                   &m.plan.n_tensors, &part[i]);
        if (s) return s;
        if (hashes) { /* the worker checks each tensor it fetches against these */
            m.plan.id_kind = PL_MODEL_ID_TENSORS, m.plan.hashes = hashes;
            pl_sha256 h;
            pl_sha256_init(&h);
            pl_sha256_update(&h, hashes, (size_t)m.plan.n_tensors * 32);
            pl_sha256_final(&h, m.plan.model_id);
        }
        w[i].sent = 0, w[i].pieces = 0;
        s = pl_room_send(w[i].link, &m, PL_ROOM_SEND_MS);
        free(hashes);
        pl_wire_msg pm = {.type = PL_MSG_PART, .part = part[i]};
        if (!s && fetches(&w[i])) s = pl_room_send(w[i].link, &pm, PL_ROOM_SEND_MS);
        if (s)
            return pl_fail(PL_ERR_IO, "the worker at %s: cannot send its plan: %s",
                           pl_link_peer(w[i].link), pl_last_error());
    }
    /* every worker loads (or fetches) at once: the host answers whichever asks */
    int load_ms = o->load_ms ? o->load_ms : PL_ROOM_LOAD_MS, left = n;
    int64_t end = now_ms() + load_ms;
    bool ready[PL_ROOM_MAX_WORKERS] = {false};
    while (left) {
        for (int i = 0; i < n; i++) {
            if (ready[i]) continue;
            if (now_ms() >= end)
                return pl_fail(PL_ERR, "the worker at %s did not load layers %d..%d within %d ms",
                               pl_link_peer(w[i].link), w[i].first, w[i].last, load_ms);
            pl_status s = take_ready(&w[i], o, &part[i], left == 1 ? 200 : 5, &ready[i]);
            if (s) return s;
            if (ready[i]) left--;
        }
    }
    return PL_OK;
}
