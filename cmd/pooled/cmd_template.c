/* cmd_template.c - `pooled template`: render a conversation with a model's chat template.
 *
 *   pooled template -m FILE --messages conversation.json [--no-generation-prompt]
 *                   [--no-think] [--tools tools.json] [--template FILE.jinja] [--ids]
 *
 * conversation.json is a JSON array of {role, content, ...} objects, or an object with
 * "messages" (and optionally "tools"). The rendered prompt is printed exactly, with no
 * newline added; --ids prints its token ids instead (special tokens parsed, nothing added).
 * --template renders with that Jinja file instead of the model's own template. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "base/file_map.h"
#include "base/json.h"
#include "base/limits.h"
#include "commands.h"
#include "tokenizer/tokenizer.h"

static int usage(void) {
    printf("usage: pooled template -m FILE --messages conversation.json [--no-generation-prompt]\n"
           "                       [--no-think] [--tools tools.json] [--template FILE.jinja] "
           "[--ids]\n"
           "-m, --model FILE: the model; --no-think: Qwen3's enable_thinking=False (old\n"
           "spelling --no-thinking). A file named - is read from standard input (one of them\n"
           "at most).\n");
    return 0;
}

static pl_json_doc *read_json(const char *path) {
    char *text = NULL;
    size_t len = 0;
    pl_json_doc *d = NULL;
    if (pl_file_read(path, PL_LIMIT_JSON_FILE, PL_READ_TEXT | PL_READ_STDIN, &text, &len) != PL_OK)
        return NULL;
    if (pl_json_parse(text, len, &d) != PL_OK) {
        char msg[256];
        snprintf(msg, sizeof msg, "%s", pl_last_error());
        pl_fail(PL_ERR_FORMAT, "%s: %s", path, msg);
    }
    free(text);
    return d;
}

int cmd_template(int argc, char **argv) {
    const char *model = NULL, *messages_path = NULL, *tools_path = NULL, *tmpl_path = NULL, *v;
    bool err = false, ids = false;
    pl_chat_opts opts = {.add_generation_prompt = true, .enable_thinking = true};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (arg_take(argc, argv, &i, "--model", "-m", &v, &err))
            model = v;
        else if (arg_take(argc, argv, &i, "--messages", NULL, &v, &err))
            messages_path = v;
        else if (arg_take(argc, argv, &i, "--tools", NULL, &v, &err))
            tools_path = v;
        else if (arg_take(argc, argv, &i, "--template", NULL, &v, &err))
            tmpl_path = v;
        else if (!strcmp(a, "--no-generation-prompt"))
            opts.add_generation_prompt = false;
        else if (!strcmp(a, "--no-think") || !strcmp(a, "--no-thinking")) /* the old spelling */
            opts.enable_thinking = false;
        else if (!strcmp(a, "--ids"))
            ids = true;
        else if (!strcmp(a, "--help") || !strcmp(a, "-h"))
            return usage();
        else if (a[0] != '-')
            return die("template: unexpected argument '%s' (see pooled template --help)", a);
        else
            return die("template: unknown option '%s' (see pooled template --help)", a);
        if (err) return 1;
    }
    if (!model) return die("template: give a model with -m FILE");
    if (!messages_path) return die("template: give the conversation with --messages FILE");

    int rc = 0;
    pl_gguf *g = NULL;
    pl_tokenizer *t = NULL;
    pl_json_doc *conv = NULL, *tools_doc = NULL;
    char *tmpl = NULL, *out = NULL;
    if (pl_gguf_open(model, &g) != PL_OK || pl_tok_load(g, &t) != PL_OK) {
        rc = die("%s", pl_last_error());
        goto done;
    }
    if (!(conv = read_json(messages_path))) {
        rc = die("%s", pl_last_error());
        goto done;
    }
    const pl_json *root = pl_json_root(conv), *msgs = root, *tools = NULL;
    if (root->type == PL_JSON_OBJECT) {
        msgs = pl_json_get(root, "messages");
        tools = pl_json_get(root, "tools");
    }
    if (!msgs || msgs->type != PL_JSON_ARRAY) {
        rc = die("template: %s: expected an array of messages or {\"messages\": [...]}",
                 messages_path);
        goto done;
    }
    if (tools_path) {
        if (!(tools_doc = read_json(tools_path))) {
            rc = die("%s", pl_last_error());
            goto done;
        }
        tools = pl_json_root(tools_doc);
    }
    if (tools && tools->type == PL_JSON_NULL) tools = NULL;
    pl_status st;
    if (tmpl_path) {
        size_t len;
        if (pl_file_read(tmpl_path, PL_LIMIT_TEMPLATE_FILE, PL_READ_TEXT | PL_READ_STDIN, &tmpl,
                         &len) != PL_OK) {
            rc = die("%s", pl_last_error());
            goto done;
        }
        char *bos = NULL, *eos = NULL;
        st = PL_OK;
        if (pl_tok_bos(t) >= 0) st = pl_tok_piece_str(t, pl_tok_bos(t), true, &bos, NULL);
        if (st == PL_OK && pl_tok_eos(t) >= 0)
            st = pl_tok_piece_str(t, pl_tok_eos(t), true, &eos, NULL);
        if (st == PL_OK) st = pl_chat_render_template(tmpl, bos, eos, msgs, tools, &opts, &out);
        free(bos), free(eos);
    } else {
        st = pl_chat_render_json(t, msgs, tools, &opts, &out);
    }
    if (st != PL_OK) {
        rc = die("%s", pl_last_error());
        goto done;
    }
    if (!ids) {
        fwrite(out, 1, strlen(out), stdout);
        goto done;
    }
    int32_t *tok = NULL;
    int64_t n = 0;
    if (pl_tok_encode(t, out, strlen(out), false, true, &tok, &n) != PL_OK) {
        rc = die("%s", pl_last_error());
        goto done;
    }
    for (int64_t i = 0; i < n; i++) printf(i ? " %d" : "%d", tok[i]);
    printf("\n");
    free(tok);
done:
    free(out), free(tmpl);
    pl_json_doc_free(conv), pl_json_doc_free(tools_doc);
    pl_tok_free(t);
    pl_gguf_free(g);
    return rc;
}
