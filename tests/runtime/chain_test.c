/* chain_test.c - sessions over chains of local stages (pl_session_new_chain) on the CPU:
 * for stories260K and every model fixture of shared/fixtures/hf (q8_0: llama, qwen2,
 * qwen3, the mixture of experts qwen3moe, the recurrent hybrids qwen35 and qwen35moe,
 * whose states and experts live in the stage holding those layers, and qwen3 with its
 * real vocabulary), split with 2 and 3 stages (and for stories260K and qwen35 also with
 * layers on the host; chain_check.h), every turn's logits are bit-identical
 * to one session over the whole model and the greedy and sampled ids the same. Also: the
 * host's explicit ends (pl_model_opts.ends) load what they say, and bad chains, ranges and
 * stage calls are refused with one line. */
#include "cpu/cpu.h"
#include "test.h"

#include "runtime/chain_check.h" /* (after test.h) */

static const char *const models[] = {
    "models/stories260K.gguf",
    "fixtures/hf/llama/llama-q8_0.gguf",
    "fixtures/hf/qwen2/qwen2-q8_0.gguf",
    "fixtures/hf/qwen3/qwen3-q8_0.gguf",
    "fixtures/hf/qwen3_moe/qwen3_moe-q8_0.gguf",
    "fixtures/hf/qwen3_5/qwen3_5-q8_0.gguf",
    "fixtures/hf/qwen3_5_moe/qwen3_5_moe-q8_0.gguf",
    "fixtures/hf/qwen3_realtok/qwen3_realtok-q8_0.gguf",
};

/* rel split every way (all), or with 2 and with 3 stages and no layer on the host (the
 * splits with host layers are the same code paths: tested on two models, saving time). */
static void check_model(pl_backend *be, const char *rel, bool all) {
    pl_gguf *g = NULL;
    CHECK(pl_gguf_open(test_shared(rel), &g) == PL_OK, "%s: %s", rel, pl_last_error());
    pl_model *w = g ? cc_load(g, be, 0, 0, PL_ENDS_AUTO) : NULL;
    if (w) {
        cc_split sp[4];
        int n = cc_splits(pl_model_get_info(w)->n_layer, sp);
        for (int i = 0; i < n; i++)
            if (all || sp[i].host_first == sp[i].host_last) cc_check_split(g, be, w, &sp[i], rel);
    }
    pl_model_free(w);
    pl_gguf_free(g);
}

/* What explicit ends load, and the one-line refusals. */
static void check_refusals(pl_backend *be) {
    pl_gguf *g = NULL;
    CHECK(pl_gguf_open(test_shared("models/stories260K.gguf"), &g) == PL_OK, "%s", pl_last_error());
    if (!g) return;
    pl_model *w = cc_load(g, be, 0, 0, PL_ENDS_AUTO);
    pl_model *ends = cc_load(g, be, 0, 0, PL_ENDS_EMBED | PL_ENDS_HEAD);
    pl_model *mid = cc_load(g, be, 1, 3, PL_ENDS_NONE);
    pl_model *tail = cc_load(g, be, 3, 5, PL_ENDS_NONE);
    if (!w || !ends || !mid || !tail) return;
    const pl_model_info *iw = pl_model_get_info(w), *ie = pl_model_get_info(ends),
                        *im = pl_model_get_info(mid);
    CHECK(ie->has_embed && ie->has_head && ie->layer_first == 0 && ie->layer_last == 0,
          "ends only: embed %d head %d [%d, %d)", ie->has_embed, ie->has_head, ie->layer_first,
          ie->layer_last);
    CHECK(!im->has_embed && !im->has_head, "layers only: embed %d head %d", im->has_embed,
          im->has_head);
    /* stories260K does not tie its output: the parts hold every weight once */
    CHECK(ie->n_params + im->n_params + pl_model_get_info(tail)->n_params + 0 < iw->n_params &&
              ie->decode_bytes + im->decode_bytes + pl_model_get_info(tail)->decode_bytes <
                  iw->decode_bytes,
          "the parts hold less than the whole (layer 0 is in none)");
    pl_model *first = cc_load(g, be, 0, 1, PL_ENDS_NONE);
    uint64_t parts = ie->loaded_bytes + im->loaded_bytes + pl_model_get_info(tail)->loaded_bytes +
                     (first ? pl_model_get_info(first)->loaded_bytes : 0);
    CHECK(iw->loaded_bytes == iw->weight_bytes && parts == iw->loaded_bytes,
          "loaded bytes: whole %llu of %llu, the parts %llu", (unsigned long long)iw->loaded_bytes,
          (unsigned long long)iw->weight_bytes, (unsigned long long)parts);
    pl_model_free(first);
    pl_model_opts bad[] = {{.layer_first = 2, .layer_last = 2, .ends = PL_ENDS_NONE},
                           {.layer_first = 3, .layer_last = 2, .ends = PL_ENDS_HEAD},
                           {.layer_first = 0, .layer_last = 6, .ends = PL_ENDS_NONE},
                           {.layer_first = 0, .layer_last = 2, .ends = 9}};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        pl_model *m = NULL;
        pl_status s = pl_model_load(g, be, &bad[i], &m);
        CHECK(s != PL_OK && !strchr(pl_last_error(), '\n'), "bad range %zu loaded", i);
        pl_model_free(m);
    }
    pl_state_opts o = cc_opts(w);
    pl_stage *sm = NULL, *st = NULL, *s0 = NULL;
    CHECK(pl_stage_local_new(mid, &o, 1, 3, &sm) == PL_OK, "%s", pl_last_error());
    CHECK(pl_stage_local_new(tail, &o, 3, 5, &st) == PL_OK, "%s", pl_last_error());
    CHECK(pl_stage_local_new(mid, &o, 0, 3, &s0) != PL_OK, "a stage of layers mid does not hold");
    pl_session *ses = NULL;
    pl_stage *gap[] = {sm, st}, *swapped[] = {st, sm}, *one[] = {sm};
    /* layer 0 is nobody's; the wrong order; layers 3..5 missing; a host without ends */
    CHECK(pl_session_new_chain(ends, &o, gap, 2, NULL, &ses) != PL_OK &&
              strstr(pl_last_error(), "layer 0"),
          "a gap at layer 0: %s", pl_last_error());
    CHECK(pl_session_new_chain(ends, &o, swapped, 2, NULL, &ses) != PL_OK, "swapped stages");
    CHECK(pl_session_new_chain(w, &o, one, 1, NULL, &ses) != PL_OK, "overlapping stages");
    CHECK(pl_session_new_chain(mid, &o, NULL, 0, NULL, &ses) != PL_OK &&
              strstr(pl_last_error(), "embedding and the head"),
          "a host without ends: %s", pl_last_error());
    pl_chain_opts big = {.frame_cols = PL_CHAIN_MAX_FRAME + 1, .in_flight = 1};
    CHECK(pl_session_new_chain(w, &o, NULL, 0, &big, &ses) == PL_OK, "a whole model ignores co");
    pl_session_free(ses);
    ses = NULL;
    CHECK(pl_session_new(mid, &o, &ses) != PL_OK, "a session over a part");
    /* the stage calls check their arguments */
    float h[4 * 64] = {0}, out[4 * 64];
    int64_t n;
    uint64_t tag;
    CHECK(pl_stage_collect(sm, out, &n, &tag) != PL_OK, "collect with nothing in flight");
    CHECK(pl_stage_submit(sm, h, 0, 0, 1) != PL_OK, "0 columns");
    CHECK(pl_stage_submit(sm, h, 1, CC_CTX, 1) != PL_OK, "past the context");
    for (int i = 0; i < PL_STAGE_MAX_IN_FLIGHT; i++)
        CHECK(pl_stage_submit(sm, h, 1, i, (uint64_t)i + 100) == PL_OK, "%s", pl_last_error());
    CHECK(pl_stage_submit(sm, h, 1, 8, 1) != PL_OK, "more than max_in_flight");
    CHECK(pl_stage_collect(sm, out, &n, &tag) == PL_OK && n == 1 && tag == 100, "in order");
    CHECK(pl_stage_rewind(sm, 0) == PL_OK && pl_stage_collect(sm, out, &n, &tag) != PL_OK,
          "a rewind drops what is in flight");
    pl_stage_free(sm);
    pl_stage_free(st);
    pl_model_free(w);
    pl_model_free(ends);
    pl_model_free(mid);
    pl_model_free(tail);
    pl_gguf_free(g);
}

/* ---- a stage of our own kind (as room/ makes remote ones): a local stage behind it,
 * failing on request ---- */

typedef struct {
    pl_stage *inner;
    int fail_submit, fail_collect, bad_tag; /* the call (1, 2, ...) that goes wrong, 0: none */
    bool no_rewind;                         /* can go back to 0 only */
    int n_submit, n_collect;
    int most_ahead; /* the most frames already in flight at a submit */
} flaky;

static pl_status fl_submit(pl_stage *st, const float *h, int64_t n, int64_t pos0, uint64_t tag) {
    flaky *f = st->impl;
    if (++f->n_submit == f->fail_submit) return pl_fail(PL_ERR_IO, "the link went down");
    if (st->in_flight > f->most_ahead) f->most_ahead = st->in_flight;
    return pl_stage_submit(f->inner, h, n, pos0, tag);
}

static pl_status fl_collect(pl_stage *st, float *out, int64_t *n, uint64_t *tag) {
    flaky *f = st->impl;
    pl_status s = pl_stage_collect(f->inner, out, n, tag);
    if (++f->n_collect == f->fail_collect) return pl_fail(PL_ERR_IO, "the link went down");
    if (f->n_collect == f->bad_tag) ++*tag;
    return s;
}

static bool fl_can_rewind(const pl_stage *st, int64_t n_past) {
    const flaky *f = st->impl;
    return f->no_rewind ? n_past == 0 : pl_stage_can_rewind(f->inner, n_past);
}

static pl_status fl_rewind(pl_stage *st, int64_t n_past) {
    flaky *f = st->impl;
    if (f->no_rewind && n_past) return pl_fail(PL_ERR_ARG, "this stage only starts over");
    return pl_stage_rewind(f->inner, n_past);
}

static void fl_free(pl_stage *st) {
    flaky *f = st->impl;
    pl_stage_free(f->inner);
    free(f);
    free(st);
}

static const pl_stage_methods flaky_methods = {.kind = "flaky",
                                               .submit = fl_submit,
                                               .collect = fl_collect,
                                               .can_rewind = fl_can_rewind,
                                               .rewind = fl_rewind,
                                               .free = fl_free};

static pl_stage *flaky_new(pl_stage *inner, flaky **out) {
    pl_stage *st = malloc(sizeof *st);
    flaky *f = calloc(1, sizeof *f);
    *st = *inner;
    st->m = &flaky_methods;
    st->in_flight = 0;
    st->impl = f;
    f->inner = inner;
    *out = f;
    return st;
}

/* A stage whose link fails (in submit, in collect, or answering the wrong frame) fails
 * the turn with one line, and the next turn still gives the whole model's logits; a stage
 * that cannot rewind makes the session start over from 0, with the same logits. */
static void check_failures(pl_backend *be, const char *rel) {
    pl_gguf *g = NULL;
    CHECK(pl_gguf_open(test_shared(rel), &g) == PL_OK, "%s: %s", rel, pl_last_error());
    pl_model *w = g ? cc_load(g, be, 0, 0, PL_ENDS_AUTO) : NULL;
    if (!w) return;
    int L = pl_model_get_info(w)->n_layer, h = L / 2;
    pl_model *host = cc_load(g, be, 0, 0, PL_ENDS_EMBED | PL_ENDS_HEAD);
    pl_model *a = cc_load(g, be, 0, h, PL_ENDS_NONE), *b = cc_load(g, be, h, L, PL_ENDS_NONE);
    pl_state_opts o = cc_opts(w);
    pl_stage *sa = NULL, *sb = NULL, *fs = NULL;
    flaky *f = NULL;
    pl_session *ws = NULL, *cs = NULL;
    CHECK(pl_stage_local_new(a, &o, 0, h, &sa) == PL_OK &&
              pl_stage_local_new(b, &o, h, L, &sb) == PL_OK,
          "%s", pl_last_error());
    if (sb) fs = flaky_new(sb, &f);
    pl_stage *stages[] = {sa, fs};
    pl_chain_opts co = {.frame_cols = 4, .in_flight = 2};
    CHECK(pl_session_new(w, &o, &ws) == PL_OK &&
              pl_session_new_chain(host, &o, stages, 2, &co, &cs) == PL_OK,
          "%s", pl_last_error());
    if (!ws || !cs) goto done;
    cc_pair p = {ws, cs, pl_model_get_info(w)->n_vocab, rel};
    int32_t ids[24];
    for (int i = 0; i < 24; i++) ids[i] = (int32_t)((i * 7919 + 13) % p.V);
    cc_set(&p, ids, 10, "before the failures");
    CHECK(f->most_ahead == co.in_flight - 1, "%s: %d frames in flight, not %d", rel,
          f->most_ahead + 1, co.in_flight);
    int *knob[] = {&f->fail_submit, &f->fail_collect, &f->bad_tag};
    for (int k = 0; k < 3; k++) {
        *knob[k] = (k ? f->n_collect : f->n_submit) + 2; /* the second frame */
        ids[12] = (ids[12] + 1) % p.V;                   /* 10 ids to run: three frames */
        int64_t ran;
        pl_status s = pl_session_set(cs, ids, 22, &ran);
        CHECK(s != PL_OK && !strchr(pl_last_error(), '\n'), "%s: failure %d passed", rel, k);
        CHECK(k < 2 || strstr(pl_last_error(), "answered frame"), "%s: %s", rel, pl_last_error());
        *knob[k] = 0;
        ids[21] = (ids[21] + 1) % p.V;
        int64_t rw, rc;
        pl_status s1 = pl_session_set(ws, ids, 22, &rw), s2 = pl_session_set(cs, ids, 22, &rc);
        CHECK(!s1 && !s2, "%s: after failure %d: %s", rel, k, pl_last_error());
        if (!s1 && !s2) cc_same_logits(&p, "after a failed turn");
    }
    f->no_rewind = true;
    ids[20] = (ids[20] + 1) % p.V; /* keeps 20 of 22: the stage cannot go back */
    int64_t rw = -1, rc = -1;
    pl_status s1 = pl_session_set(ws, ids, 22, &rw), s2 = pl_session_set(cs, ids, 22, &rc);
    CHECK(!s1 && !s2 && rc == 22, "%s: a stage that cannot rewind: %lld run (%s)", rel,
          (long long)rc, pl_last_error());
    if (!s1 && !s2) cc_same_logits(&p, "restarted by a stage that cannot rewind");
done:
    pl_session_free(ws);
    pl_session_free(cs);
    pl_stage_free(sa);
    pl_stage_free(fs);
    pl_model_free(a);
    pl_model_free(b);
    pl_model_free(host);
    pl_model_free(w);
    pl_gguf_free(g);
}

/* The wire helpers round as the CPU's f16 KV cache does. */
static void check_f16(void) {
    float x[5] = {1.0f, -2.5f, 65504.0f, 1.0f + 1.0f / 4096, 1e-8f}, y[5];
    uint16_t h[5];
    pl_hidden_to_f16(x, h, 5);
    pl_hidden_from_f16(h, y, 5);
    CHECK(y[0] == 1.0f && y[1] == -2.5f && y[2] == 65504.0f && y[3] == 1.0f && y[4] >= 0 &&
              y[4] < 1e-7f,
          "f16 round trip: %g %g %g %g %g", y[0], y[1], y[2], y[3], y[4]);
}

static void run_tests(void) {
    pl_backend *be = NULL;
    CHECK(pl_cpu_new(2, &be) == PL_OK, "%s", pl_last_error());
    if (!be) return;
    check_f16();
    check_refusals(be);
    check_failures(be, "models/stories260K.gguf");
    check_failures(be, "fixtures/hf/qwen3_5/qwen3_5-q8_0.gguf");
    for (size_t i = 0; i < sizeof models / sizeof *models; i++)
        check_model(be, models[i], i == 0 || strstr(models[i], "qwen3_5/"));
    CHECK(be->live_bufs == 0, "%lld buffers leaked", (long long)be->live_bufs);
    pl_be_destroy(be);
}
