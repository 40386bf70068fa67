/* moe_model_test.c - a mixture-of-experts model's state (tiny_model.h's qwen3moe: no dense
 * FFN, not even its feed_forward_length): the state-size check counts the MoE scratch
 * buffers (the largest, [n_batch*n_used, max(n_embd, n_ff_exp)], fits a device whose largest
 * buffer is exactly its size and is refused by one a byte smaller), and pl_state_bytes
 * counts them too (the growth of the state per token of batch). */
#include "cpu/cpu.h"
#include "model/fixture.h"
#include "model/model.h"
#include "model/tiny_model.h"
#include "test.h"

enum { B = 8 };

static pl_status open_tiny(pl_backend *be, const char *path, fixture_model *fm) {
    pl_state_opts o = {.n_ctx = 8, .n_batch = B, .n_logits = 1, .kv_type = PL_TYPE_F32};
    return fixture_model_open(fm, be, path, &o);
}

static void run_tests(void) {
    pl_backend *be = NULL;
    CHECK(pl_cpu_new(1, &be) == PL_OK, "%s", pl_last_error());
    if (!be) return;
    char path[600];
    snprintf(path, sizeof path, "%s/tiny-qwen3moe.gguf", test_tmpdir());
    CHECK(tiny_model_write(path, "qwen3moe", 1, PL_TYPE_F32) == 0, "%s", path);

    /* the largest buffer of the state: an expert output per (token, slot) */
    int64_t widest = (int)TINY_EMBD > (int)TINY_FF_EXP ? TINY_EMBD : TINY_FF_EXP;
    int64_t largest = (int64_t)B * TINY_USED * widest * 4;
    fixture_model fm;
    be->max_buf_bytes = (uint64_t)largest;
    pl_status s = open_tiny(be, path, &fm);
    CHECK(s == PL_OK, "a device whose largest buffer is %lld bytes: %s", (long long)largest,
          pl_last_error());
    if (!s) {
        /* a state for 2B tokens holds B more tokens' worth of every activation, the MoE
         * scratch included: router logits, ids, weights, gate, up and y of every slot */
        fixture_model f2;
        pl_state_opts o2 = *pl_state_get_opts(fm.st);
        o2.n_batch = 2 * B;
        be->max_buf_bytes = 0;
        CHECK(fixture_model_open(&f2, be, path, &o2) == PL_OK, "%s", pl_last_error());
        int64_t per_tok = f2.st ? (pl_state_bytes(f2.st) - pl_state_bytes(fm.st)) / B : 0;
        int64_t moe =
            (TINY_EXPERTS + 2 * TINY_USED + TINY_USED * (2 * TINY_FF_EXP + TINY_EMBD)) * 4;
        CHECK(per_tok >= moe + TINY_EMBD * 4,
              "a token adds %lld bytes of state, the MoE scratch alone is %lld", (long long)per_tok,
              (long long)moe);
        fixture_model_close(&f2);
        const int32_t ids[B] = {1, 2, 3, 4, 5, 6, 7, 8};
        CHECK(pl_model_forward(fm.m, fm.st, ids, B, 0, false) == PL_OK, "%s", pl_last_error());
    }
    fixture_model_close(&fm);
    be->max_buf_bytes = (uint64_t)largest - 1;
    s = open_tiny(be, path, &fm);
    CHECK(s != PL_OK && strstr(pl_last_error(), "per activation buffer"),
          "a device whose largest buffer is a byte too small: %s",
          s ? pl_last_error() : "accepted");
    fixture_model_close(&fm);
    be->max_buf_bytes = 0;
    CHECK(be->live_bufs == 0, "%lld buffers leaked", (long long)be->live_bufs);
    pl_be_destroy(be);
}
