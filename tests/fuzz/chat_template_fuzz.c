/* chat_template_fuzz.c - libFuzzer target for what a chat user controls: the conversation
 * and the tools, as JSON, through the chat renderer (chat.c) with real templates, then the
 * tokenizer. jinja_fuzz.c mutates templates over a fixed conversation; this one keeps the
 * templates fixed (Qwen3, Llama 3, Qwen3.5 from tests/fuzz/corpus/jinja_fuzz/, the ChatML
 * fallback of the qwen3 fixture, the llama3 fixture's own template) and mutates the input.
 *
 * Input: one selector byte, the messages JSON (an array, or {"messages": [...], "tools":
 * [...]} as `pooled template` reads it), optionally a NUL byte and the tools JSON. The
 * selector picks the template (low 3 bits), add_generation_prompt (bit 3),
 * enable_thinking (bit 4) and whether the prompt is tokenized (bit 5). Rendering must
 * succeed with text free of NULs or fail with one line; tokenized ids must be in the
 * vocabulary. Run from the repository root with POOLED_SHARED set (default ../shared). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/file_map.h"
#include "base/json.h"
#include "format/gguf.h"
#include "tokenizer/tokenizer.h"

#define REQUIRE(cond)                                                                              \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "chat_template_fuzz: %s failed (line %d): %s\n", #cond, __LINE__,      \
                    pl_last_error());                                                              \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

static const struct {
    const char *file, *bos, *eos;
} k_templates[] = {
    {"tests/fuzz/corpus/jinja_fuzz/qwen3.jinja", NULL, "<|im_end|>"},
    {"tests/fuzz/corpus/jinja_fuzz/llama3.jinja", "<|begin_of_text|>", "<|eot_id|>"},
    {"tests/fuzz/corpus/jinja_fuzz/qwen35.jinja", NULL, "<|im_end|>"},
};
#define N_TEMPLATES 3
static char *g_tmpl[N_TEMPLATES];
static pl_tokenizer *g_qwen, *g_llama; /* ChatML fallback; Llama 3's own template */

static pl_tokenizer *load_tok(const char *root, const char *rel) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", root, rel);
    pl_gguf *g = NULL;
    pl_tokenizer *t = NULL;
    if (pl_gguf_open(path, &g) != PL_OK || pl_tok_load(g, &t) != PL_OK) {
        fprintf(stderr, "chat_template_fuzz: cannot load %s: %s (set POOLED_SHARED)\n", path,
                pl_last_error());
        abort();
    }
    pl_gguf_free(g);
    return t;
}

static void load_all(void) {
    for (int i = 0; i < N_TEMPLATES; i++) {
        size_t len;
        if (pl_file_read_all(k_templates[i].file, &g_tmpl[i], &len) != PL_OK) {
            fprintf(stderr, "chat_template_fuzz: %s (run from the repository root)\n",
                    pl_last_error());
            abort();
        }
    }
    const char *root = getenv("POOLED_SHARED");
    if (!root || !*root) root = "../shared";
    g_qwen = load_tok(root, "fixtures/hf/qwen3/qwen3-q8_0.gguf");
    g_llama = load_tok(root, "fixtures/hf/llama3_vocab/llama3-vocab.gguf");
}

static void check_error(void) {
    const char *e = pl_last_error();
    REQUIRE(e[0] && !strchr(e, '\n'));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!g_qwen) load_all();
    if (size < 1) return 0;
    uint8_t sel = data[0];
    const char *text = (const char *)data + 1;
    size_t n = size - 1;
    const char *nul = memchr(text, 0, n);
    size_t mlen = nul ? (size_t)(nul - text) : n;
    pl_json_doc *conv = NULL, *tools_doc = NULL;
    pl_clear_error();
    if (pl_json_parse(text, mlen, &conv) != PL_OK) {
        check_error();
        return 0;
    }
    const pl_json *root = pl_json_root(conv), *msgs = root, *tools = NULL;
    if (root->type == PL_JSON_OBJECT) {
        msgs = pl_json_get(root, "messages");
        tools = pl_json_get(root, "tools");
    }
    if (nul && pl_json_parse(nul + 1, n - mlen - 1, &tools_doc) == PL_OK)
        tools = pl_json_root(tools_doc);
    if (tools && tools->type == PL_JSON_NULL) tools = NULL;
    pl_chat_opts opts = {.add_generation_prompt = sel & 8, .enable_thinking = sel & 16};
    int mode = (sel & 7) % (N_TEMPLATES + 2);
    const pl_tokenizer *tok = mode == 1 || mode == 4 ? g_llama : g_qwen;
    char *out = NULL;
    pl_status st;
    if (mode < N_TEMPLATES)
        st = pl_chat_render_template(g_tmpl[mode], k_templates[mode].bos, k_templates[mode].eos,
                                     msgs, tools, &opts, &out);
    else
        st = pl_chat_render_json(tok, msgs, tools, &opts, &out);
    if (st != PL_OK) {
        check_error();
        REQUIRE(out == NULL);
    } else {
        REQUIRE(out != NULL);
        if (sel & 32) {
            int32_t *ids = NULL;
            int64_t n_ids = 0;
            if (pl_tok_encode(tok, out, strlen(out), false, true, &ids, &n_ids) == PL_OK) {
                for (int64_t i = 0; i < n_ids; i++)
                    REQUIRE(ids[i] >= 0 && ids[i] < pl_tok_n_vocab(tok));
            } else {
                check_error();
            }
            free(ids);
        }
    }
    free(out);
    pl_json_doc_free(conv);
    pl_json_doc_free(tools_doc);
    return 0;
}
