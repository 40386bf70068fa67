/* split_test.c - a model split by layers, as the room runs it: part A (embedding, layers
 * 0..2) and part B (layers 2..5, head) of stories260K, each with its own state, the hidden
 * state carried from A to B through the host, gives bit-for-bit the logits of the whole
 * model - for the prompt and for the decode steps after it, which use each part's own KV
 * cache. Each part refuses the steps it does not hold. */
#include "cpu/cpu.h"
#include "model/model.h"
#include "test.h"

static pl_model *load(pl_backend *be, const pl_gguf *g, int first, int last) {
    pl_model_opts o = {.layer_first = first, .layer_last = last};
    pl_model *m = NULL;
    CHECK(pl_model_load(g, be, &o, &m) == PL_OK, "[%d, %d): %s", first, last, pl_last_error());
    return m;
}

static pl_state *state(const pl_model *m) {
    pl_state_opts o = {.n_ctx = 32, .n_batch = 8, .n_logits = 1, .kv_type = PL_TYPE_F16};
    pl_state *s = NULL;
    CHECK(pl_state_new(m, &o, &s) == PL_OK, "%s", pl_last_error());
    return s;
}

static void run_tests(void) {
    pl_backend *be = NULL;
    pl_gguf *g = NULL;
    CHECK(pl_cpu_new(1, &be) == PL_OK, "cpu");
    CHECK(pl_gguf_open(test_shared("models/stories260K.gguf"), &g) == PL_OK, "%s", pl_last_error());
    if (!be || !g) return;
    pl_model *whole = load(be, g, 0, 0), *a = load(be, g, 0, 2), *b = load(be, g, 2, 5);
    if (!whole || !a || !b) return;
    const pl_model_info *ia = pl_model_get_info(a), *ib = pl_model_get_info(b);
    CHECK(ia->has_embed && !ia->has_head && !ib->has_embed && ib->has_head, "parts");
    /* stories260K's output matrix is its own tensor, so the parts share no weight */
    CHECK(ia->n_params + ib->n_params == pl_model_get_info(whole)->n_params,
          "each part loads only its own weights (%lld + %lld)", (long long)ia->n_params,
          (long long)ib->n_params);
    pl_state *sw = state(whole), *sa = state(a), *sb = state(b);
    int32_t ids[6] = {1, 403, 407, 261, 378, 432};
    const int64_t d = pl_model_get_info(whole)->n_embd;
    float hidden[8 * 64], lw[512], lb[512];
    int64_t pos = 0;
    for (int step = 0; step < 2; step++) { /* the 5-id prompt, then one decode step */
        int64_t n = step ? 1 : 5;
        const int32_t *tok = ids + pos;
        CHECK(pl_model_forward(whole, sw, tok, n, pos, false) == PL_OK, "%s", pl_last_error());
        pl_be_write(pl_state_ids(sa), 0, tok, n * 4);
        CHECK(pl_model_embed(a, sa, n) == PL_OK && pl_model_layers(a, sa, n, pos, 0, 2) == PL_OK,
              "part A: %s", pl_last_error());
        pl_be_read(pl_state_hidden(sa), 0, hidden, n * d * 4);
        pl_be_write(pl_state_hidden(sb), 0, hidden, n * d * 4);
        CHECK(pl_model_layers(b, sb, n, pos, 2, 5) == PL_OK &&
                  pl_model_head(b, sb, n, false) == PL_OK,
              "part B: %s", pl_last_error());
        pl_be_read(pl_state_logits(sw), 0, lw, sizeof lw);
        pl_be_read(pl_state_logits(sb), 0, lb, sizeof lb);
        CHECK(!memcmp(lw, lb, sizeof lw), "step %d: split logits differ from the whole model's",
              step);
        pos += n;
    }
    CHECK(pl_model_head(a, sa, 1, false) != PL_OK, "part A ran a head it does not have");
    CHECK(pl_model_embed(b, sb, 1) != PL_OK, "part B embedded without an embedding");
    CHECK(pl_model_layers(b, sb, 1, pos, 1, 3) != PL_OK, "part B ran layer 1");
    CHECK(pl_model_forward(a, sa, ids, 1, 0, false) != PL_OK, "a part ran a whole pass");
    pl_model_opts bad = {.layer_first = 3, .layer_last = 9};
    pl_model *m = NULL;
    CHECK(pl_model_load(g, be, &bad, &m) != PL_OK && strstr(pl_last_error(), "layer range"),
          "range past the model: %s", pl_last_error());
    pl_state_free(sw);
    pl_state_free(sa);
    pl_state_free(sb);
    pl_model_free(whole);
    pl_model_free(a);
    pl_model_free(b);
    CHECK(be->live_bufs == 0, "%lld buffers leaked", (long long)be->live_bufs);
    pl_be_destroy(be);
    pl_gguf_free(g);
}
