/* pretok_ref_test.c - every pre-tokenizer of the table splits text as the expressions say:
 * tests/tokenizer/data/pretok_refs.json (tools/gen_pretok_refs.py) holds random texts over
 * letters of each kind, marks, digits, whitespace, punctuation, CJK and emoji, split by
 * Python's `regex` module in llama.cpp's order. Both our regex engine and the hand-written
 * matchers must give the same pieces. */
#include "test.h"

#include "base/file_map.h"
#include "base/json.h"
#include "tokenizer/pretok.h"
#include "tokenizer/unicode.h"

static void run_tests(void) {
    char *text = NULL;
    size_t len = 0;
    pl_json_doc *d = NULL;
    CHECK(pl_file_read_all("tests/tokenizer/data/pretok_refs.json", &text, &len) == PL_OK, "refs");
    if (!text) return;
    CHECK(pl_json_parse(text, len, &d) == PL_OK, "%s", pl_last_error());
    free(text);
    if (!d) return;
    const pl_json *cases = pl_json_get(pl_json_root(d), "cases");
    CHECK(pl_json_count(cases) >= 800, "%zu cases", pl_json_count(cases));
    pl_regex_scratch sc = {0};
    pl_pieces got = {0};
    pl_pretok *p = NULL;
    const char *p_name = NULL;
    uint32_t cps[256];
    int bad = 0;
    for (size_t i = 0; i < pl_json_count(cases); i++) {
        const pl_json *c = pl_json_at(cases, i);
        const char *pre = pl_json_string(pl_json_get(c, "pre"));
        const pl_json *t = pl_json_get(c, "text"), *want = pl_json_get(c, "pieces");
        if (!pre || !t || !want) continue;
        if (!p_name || strcmp(p_name, pre)) {
            pl_pretok_free(p);
            p = NULL;
            CHECK(pl_pretok_new(pre, &p, NULL) == PL_OK, "%s: %s", pre, pl_last_error());
            p_name = pre;
        }
        if (!p) continue;
        size_t n = 0;
        for (size_t k = 0; k < t->str.len && n < 256; n++)
            k += (size_t)pl_utf8_decode(t->str.s + k, t->str.len - k, &cps[n]);
        for (int fast = 0; fast < 2; fast++) {
            pl_pretok_split(p, &sc, cps, n, &got, fast);
            bool same = got.n == pl_json_count(want);
            for (size_t k = 0; same && k < got.n; k++) {
                int64_t w;
                same = pl_json_int(pl_json_at(want, k), &w) && w == got.len[k];
            }
            if (!same && bad++ < 5) {
                fprintf(stderr, "%s (%s) '%s':\n  got ", pre, fast ? "fast" : "regex", t->str.s);
                for (size_t k = 0; k < got.n; k++) fprintf(stderr, " %u", got.len[k]);
                fprintf(stderr, "\n  want");
                for (size_t k = 0; k < pl_json_count(want); k++) {
                    int64_t w = -1;
                    pl_json_int(pl_json_at(want, k), &w);
                    fprintf(stderr, " %d", (int)w);
                }
                fprintf(stderr, "\n");
            }
            CHECK(same, "%s case %zu (%s)", pre, i, fast ? "fast" : "regex");
        }
    }
    pl_pretok_free(p);
    pl_pieces_free(&got);
    pl_regex_scratch_free(&sc);
    pl_json_doc_free(d);
}
