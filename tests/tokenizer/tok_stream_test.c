/* tok_stream_test.c - detokenising: pieces, special tokens shown or hidden, and the stream
 * that holds back an incomplete UTF-8 sequence until its last byte arrives. The texts come
 * from the references (their ids split characters across tokens: byte-fallback tokens in
 * SPM, partial byte-level tokens in Qwen3's emoji). */
#include "test.h"
#include "tok_test_util.h"

#include "format/gguf.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode.h"

/* Stream text's ids; every output is whole UTF-8, something is held back at least once,
 * and everything together is the text. */
static void stream_roundtrip(const pl_tokenizer *t, const char *text, bool expect_hold) {
    int32_t *ids = NULL;
    int64_t n = 0;
    CHECK(pl_tok_encode(t, text, strlen(text), false, true, &ids, &n) == PL_OK, "encode");
    pl_tok_stream *s = pl_tok_stream_new(t, true);
    char all[1024] = "";
    int held = 0;
    for (int64_t i = 0; i < n; i++) {
        char piece[64];
        int64_t k = pl_tok_piece(t, ids[i], true, piece, sizeof piece);
        const char *out = pl_tok_stream_push(s, ids[i]);
        CHECK(pl_utf8_is_valid(out, strlen(out)), "stream output is whole UTF-8");
        if (k > 0 && !out[0]) held++;
        strncat(all, out, sizeof all - strlen(all) - 1);
    }
    strncat(all, pl_tok_stream_flush(s), sizeof all - strlen(all) - 1);
    pl_tok_stream_free(s);
    /* SPM adds a space in front */
    const char *got = all[0] == ' ' && text[0] != ' ' ? all + 1 : all;
    CHECK(strcmp(got, text) == 0, "streamed '%s' != '%s'", got, text);
    if (expect_hold) CHECK(held > 0, "'%s': nothing was held back", text);
    free(ids);
}

static void run_tests(void) {
    pl_tokenizer *q = load_tok("fixtures/hf/qwen3_realtok/qwen3_realtok-q8_0.gguf");
    pl_tokenizer *s = load_tok("models/stories260K.gguf");
    if (!q || !s) return;
    /* the reference splits 👨 into "Ġð\x9f\x91" + "¨" (ids 61804 101) */
    stream_roundtrip(
        q, "🚀🔥 Emoji test 😀👍🏽 👨\u200d👩\u200d👧\u200d👦 ❤️", true);
    stream_roundtrip(q, "<|im_start|>user\nHello!<|im_end|>\n", false);
    /* stories260K spells 日本語 in <0xNN> byte tokens (fixtures/llamacpp-b10573/tokenize.json) */
    stream_roundtrip(s, "Unicode: café, naïve, 日本語, 🚀🦙\nnew line\ttab", true);

    /* special tokens are shown only on request; user-defined ones (<think>) always */
    char buf[64];
    CHECK(pl_tok_piece(q, 151644, false, buf, sizeof buf) == 0, "control hidden");
    CHECK(pl_tok_piece(q, 151644, true, buf, sizeof buf) == 12 && !memcmp(buf, "<|im_start|>", 12),
          "control shown");
    CHECK(pl_tok_piece(q, 151667, false, buf, sizeof buf) == 7 && !memcmp(buf, "<think>", 7),
          "user-defined");
    CHECK(pl_tok_piece(q, 1879, false, buf, sizeof buf) == 6 && !memcmp(buf, " world", 6),
          "byte-level undone");
    CHECK(pl_tok_piece(q, -1, true, buf, sizeof buf) == -1 &&
              pl_tok_piece(q, 151936, true, buf, sizeof buf) == -1,
          "bad ids");
    CHECK(pl_tok_piece(q, 1879, false, buf, 2) == 6, "a short buffer gets the needed length");
    CHECK(pl_tok_piece(s, 1, false, buf, sizeof buf) == 0 &&
              pl_tok_piece(s, 1, true, buf, sizeof buf) == 3,
          "<s>");
    /* <0xE6> alone: held, then flushed as U+FFFD */
    pl_tok_stream *st = pl_tok_stream_new(s, false);
    int32_t e6 = 3 + 0xE6; /* stories260K: <0x00> is id 3 */
    CHECK(pl_tok_piece(s, e6, false, buf, sizeof buf) == 1 && (uint8_t)buf[0] == 0xE6,
          "byte token");
    CHECK(strcmp(pl_tok_stream_push(st, e6), "") == 0, "held");
    CHECK(strcmp(pl_tok_stream_flush(st), "\xef\xbf\xbd") == 0, "flushed as U+FFFD");
    /* a continuation byte that cannot complete anything comes out at once as U+FFFD */
    CHECK(strcmp(pl_tok_stream_push(st, 3 + 0x80), "\xef\xbf\xbd") == 0, "stray byte");
    pl_tok_stream_free(st);
    /* show_special=false streams skip control tokens */
    st = pl_tok_stream_new(q, false);
    CHECK(strcmp(pl_tok_stream_push(st, 151644), "") == 0 &&
              strcmp(pl_tok_stream_push(st, 872), "user") == 0,
          "hidden in stream");
    pl_tok_stream_free(st);
    pl_tok_free(q);
    pl_tok_free(s);
}
