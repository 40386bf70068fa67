/* jinja_fuzz.c - libFuzzer target for the chat-template interpreter: the input is a template,
 * optionally followed by a NUL byte and a JSON object of variables. Parsing and rendering
 * must either succeed or fail with one line, within the interpreter's bounds (steps,
 * output, memory, nesting). Rendering uses a fixed conversation when the input brings no
 * variables, so real templates from the seed corpus run their full paths. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "tokenizer/jinja.h"

#define REQUIRE(cond)                                                                              \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "jinja_fuzz: %s failed (line %d): %s\n", #cond, __LINE__,              \
                    pl_last_error());                                                              \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

static const char k_default_vars[] =
    "{\"messages\": [{\"role\": \"system\", \"content\": \"Be brief.\"},"
    " {\"role\": \"user\", \"content\": \"Hi <b>there</b>\"},"
    " {\"role\": \"assistant\", \"content\": \"<think>\\nhm\\n</think>\\n\\nHello\","
    "  \"tool_calls\": [{\"function\": {\"name\": \"f\", \"arguments\": {\"x\": [1, 2.5, "
    "null]}}}]},"
    " {\"role\": \"tool\", \"content\": \"ok\"}, {\"role\": \"user\", \"content\": [{\"type\": "
    "\"text\", \"text\": \"t\"}]}],"
    " \"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"f\", \"parameters\": {}}}],"
    " \"add_generation_prompt\": true, \"bos_token\": \"<s>\", \"eos_token\": \"</s>\"}";

static void check_error(void) {
    const char *e = pl_last_error();
    REQUIRE(e[0] && !strchr(e, '\n'));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *src = (const char *)data;
    const char *nul = memchr(src, 0, size);
    size_t tlen = nul ? (size_t)(nul - src) : size;
    pl_jinja *t = NULL;
    pl_clear_error();
    if (pl_jinja_parse(src, tlen, &t) != PL_OK) {
        check_error();
        return 0;
    }
    pl_json_doc *vars = NULL;
    if (nul && pl_json_parse(nul + 1, size - tlen - 1, &vars) != PL_OK) vars = NULL;
    if (!vars) REQUIRE(pl_json_parse(k_default_vars, strlen(k_default_vars), &vars) == PL_OK);
    const pl_json *root = pl_json_root(vars);
    pl_jinja_ctx *c = pl_jinja_ctx_new();
    REQUIRE(c != NULL);
    if (root->type == PL_JSON_OBJECT)
        for (size_t i = 0; i < root->obj.count; i++)
            pl_jinja_set_json(c, root->obj.keys[i], root->obj.vals[i]);
    char *out = NULL;
    size_t len = 0;
    if (pl_jinja_render(t, c, &out, &len) == PL_OK)
        REQUIRE(out && strlen(out) <= len);
    else
        check_error();
    free(out);
    pl_jinja_ctx_free(c);
    pl_json_doc_free(vars);
    pl_jinja_free(t);
    return 0;
}
