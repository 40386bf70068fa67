/* cmd_template.c - `pooled template`: render a conversation with a model's chat template.
 *
 *   pooled template -m FILE --messages conversation.json [--no-generation-prompt]
 *                   [--no-think] [--tools tools.json] [--template FILE.jinja] [--ids]
 *
 * conversation.json is a JSON array of {role, content, ...} objects, or an object with
 * "messages" (and optionally "tools"). The rendered prompt is printed exactly, with no
 * newline added; --ids prints its token ids instead (special tokens parsed, nothing added).
 * --template renders with that Jinja file instead of the model's own template. */
#include <pooled.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "base/file_map.h"
#include "base/limits.h"
#include "commands.h"

static int usage(void) {
    printf("usage: pooled template -m FILE --messages conversation.json [--no-generation-prompt]\n"
           "                       [--no-think] [--tools tools.json] [--template FILE.jinja] "
           "[--ids]\n"
           "-m, --model FILE: the model; --no-think: Qwen3's enable_thinking=False (old\n"
           "spelling --no-thinking). A file named - is read from standard input (one of them\n"
           "at most).\n");
    return 0;
}

/* A file's text (- : standard input), or NULL with the error said. */
static char *read_text(const char *path, size_t limit) {
    char *text = NULL;
    if (pl_file_read(path, limit, PL_READ_TEXT | PL_READ_STDIN, &text, NULL) != PL_OK) {
        die("%s", pl_last_error());
        return NULL;
    }
    return text;
}

int cmd_template(int argc, char **argv) {
    const char *model = NULL, *messages_path = NULL, *tools_path = NULL, *tmpl_path = NULL, *v;
    bool err = false, ids = false;
    pooled_chat_opts co = pooled_chat_opts_default();
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
            co.add_generation_prompt = 0;
        else if (!strcmp(a, "--no-think") || !strcmp(a, "--no-thinking")) /* the old spelling */
            co.no_think = 1;
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

    /* the library through its public API only (include/pooled.h): the vocabulary and the
     * template are all this needs, not the weights */
    int rc = 1;
    pooled_model *m = NULL;
    char *conv = NULL, *tools = NULL, *tmpl = NULL, *out = NULL;
    int32_t *tok = NULL;
    size_t n = 0;
    pooled_model_opts mo = pooled_model_opts_default();
    mo.vocab_only = 1;
    if (pooled_model_open(model, &mo, &m)) {
        die("%s", pooled_last_error());
        goto done;
    }
    if (!(conv = read_text(messages_path, PL_LIMIT_JSON_FILE))) goto done;
    if (tools_path && !(tools = read_text(tools_path, PL_LIMIT_JSON_FILE))) goto done;
    if (tmpl_path && !(tmpl = read_text(tmpl_path, PL_LIMIT_TEMPLATE_FILE))) goto done;
    co.template_source = tmpl;
    if (pooled_chat_render_json(m, conv, tools, &co, &out)) {
        /* "messages: ..." / "tools: ...": the file the user gave for it instead */
        const char *why = pooled_last_error();
        if (!strncmp(why, "messages: ", 10))
            die("template: %s: %s", messages_path, why + 10);
        else if (!strncmp(why, "tools: ", 7))
            die("template: %s: %s", tools_path ? tools_path : messages_path, why + 7);
        else
            die("template: %s", why);
        goto done;
    }
    if (!ids) {
        fwrite(out, 1, strlen(out), stdout);
        rc = 0;
        goto done;
    }
    /* the ids the model reads for exactly this text: special tokens parsed, nothing added */
    if (pooled_tokenize(m, out, strlen(out), 0, 1, &tok, &n)) {
        die("%s", pooled_last_error());
        goto done;
    }
    for (size_t i = 0; i < n; i++) printf(i ? " %d" : "%d", tok[i]);
    printf("\n");
    rc = 0;
done:
    pooled_free(tok);
    pooled_free(out);
    free(conv), free(tools), free(tmpl);
    pooled_model_close(m);
    return rc;
}
