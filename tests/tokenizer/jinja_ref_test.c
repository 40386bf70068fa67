/* jinja_ref_test.c - the interpreter renders what Python's jinja2 renders, configured as
 * transformers configures it: tests/tokenizer/data/jinja_refs.json (made by
 * tools/gen_jinja_refs.py) holds real chat templates (Qwen3 and Llama 3 from the fixture
 * GGUFs, Qwen3.5, SmolLM2) over conversations with tools, reasoning and content parts, and
 * snippets for each feature; each expected text (or expected failure) must match. */
#include "test.h"

#include "base/file_map.h"
#include "base/json.h"
#include "format/gguf.h"
#include "tokenizer/jinja.h"

static char *template_of(const pl_json *r) {
    const char *inline_src = pl_json_string(pl_json_get(r, "template"));
    if (inline_src) return strdup(inline_src);
    const char *file = pl_json_string(pl_json_get(r, "template_file"));
    if (file) {
        char *s = NULL;
        size_t len;
        CHECK(pl_file_read_all(file, &s, &len) == PL_OK, "%s", file);
        return s;
    }
    const char *gguf = pl_json_string(pl_json_get(r, "template_gguf"));
    pl_gguf *g = NULL;
    if (!gguf || pl_gguf_open(test_shared(gguf), &g) != PL_OK) return NULL;
    char *s = pl_gguf_get_string(g, "tokenizer.chat_template");
    pl_gguf_free(g);
    return s;
}

static void run_tests(void) {
    char *text = NULL;
    size_t len = 0;
    pl_json_doc *d = NULL;
    CHECK(pl_file_read_all("tests/tokenizer/data/jinja_refs.json", &text, &len) == PL_OK, "refs");
    if (!text) return;
    CHECK(pl_json_parse(text, len, &d) == PL_OK, "%s", pl_last_error());
    free(text);
    if (!d) return;
    const pl_json *refs = pl_json_get(pl_json_root(d), "refs");
    CHECK(pl_json_count(refs) >= 90, "%zu references", pl_json_count(refs));
    for (size_t i = 0; i < pl_json_count(refs); i++) {
        const pl_json *r = pl_json_at(refs, i);
        const char *name = pl_json_string(pl_json_get(r, "name"));
        char *src = template_of(r);
        CHECK(src != NULL, "%s: template", name);
        if (!src) continue;
        pl_jinja *t = NULL;
        char *out = NULL;
        pl_status st = pl_jinja_parse(src, strlen(src), &t);
        if (st == PL_OK) {
            pl_jinja_ctx *c = pl_jinja_ctx_new();
            const pl_json *ctx = pl_json_get(r, "context");
            for (size_t k = 0; k < pl_json_count(ctx); k++)
                pl_jinja_set_json(c, ctx->obj.keys[k], ctx->obj.vals[k]);
            st = pl_jinja_render(t, c, &out, NULL);
            pl_jinja_ctx_free(c);
        }
        const char *want = pl_json_string(pl_json_get(r, "expected"));
        if (want) {
            bool same = st == PL_OK && out && strcmp(out, want) == 0;
            if (!same) {
                if (st != PL_OK)
                    fprintf(stderr, "%s: %s\n", name, pl_last_error());
                else {
                    size_t k = 0;
                    while (out[k] && out[k] == want[k]) k++;
                    fprintf(stderr, "%s: differs at byte %zu\n  got:  '%.200s'\n  want: '%.200s'\n",
                            name, k, out + k, want + k);
                }
            }
            CHECK(same, "%s", name);
        } else {
            CHECK(st != PL_OK, "%s: should fail (%s) but rendered '%.80s'", name,
                  pl_json_string(pl_json_get(r, "error")), out ? out : "");
        }
        free(out);
        pl_jinja_free(t);
        free(src);
    }
    pl_json_doc_free(d);
}
