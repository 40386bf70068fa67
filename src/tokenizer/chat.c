/* chat.c - render a conversation with the model's chat template.
 *
 * The template in tokenizer.chat_template is interpreted (jinja.h) with the variables
 * transformers' apply_chat_template gives it: messages, add_generation_prompt, bos_token,
 * eos_token, tools (none when absent), and enable_thinking only when it is switched off (so
 * the default render is transformers' default). When the model has no template, or ours
 * cannot parse it, a known format is chosen from the vocabulary's marker tokens: ChatML
 * or Llama 3 (tests/tokenizer/chat_ref_test.c checks both against the real templates). */
#include <stdlib.h>
#include <string.h>

#include "jinja.h"
#include "tok_internal.h"

/* Known formats, as templates, and the token that identifies each. */
static const struct {
    const char *marker;
    const char *tmpl;
} k_fallbacks[] = {
    {"<|im_start|>",
     "{% for m in messages %}{{ '<|im_start|>' + m.role + '\\n' + (m.content or '') + "
     "'<|im_end|>\\n' }}"
     "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"},
    {"<|start_header_id|>", "{{ bos_token }}{% for m in messages %}{{ '<|start_header_id|>' + "
                            "m.role + '<|end_header_id|>\\n\\n'"
                            " + (m.content or '') | trim + '<|eot_id|>' }}{% endfor %}"
                            "{% if add_generation_prompt %}{{ "
                            "'<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{% endif %}"},
};

const char *pl_tok_chat_template(const pl_tokenizer *t) {
    return t->chat_template;
}

/* ---- NUL characters ----
 * JSON strings may hold NUL (\u0000), but a prompt is C text from the render on (the
 * tokenizer's callers, the chat loop, the command's output): a NUL would cut it short
 * without a word. So input with a NUL is refused with one line, as is a template that
 * makes one (a '\x00' escape). */

static bool json_has_nul(const pl_json *v) {
    switch (v->type) {
    case PL_JSON_STRING: return memchr(v->str.s, 0, v->str.len) != NULL;
    case PL_JSON_ARRAY:
        for (size_t i = 0; i < v->arr.count; i++)
            if (json_has_nul(v->arr.items[i])) return true;
        return false;
    case PL_JSON_OBJECT:
        for (size_t i = 0; i < v->obj.count; i++)
            if (memchr(v->obj.keys[i], 0, v->obj.key_lens[i]) || json_has_nul(v->obj.vals[i]))
                return true;
        return false;
    default: return false;
    }
}

static pl_status check_input_nul(const pl_json *messages, const pl_json *tools) {
    for (size_t i = 0; i < messages->arr.count; i++)
        if (json_has_nul(messages->arr.items[i]))
            return pl_fail(PL_ERR_ARG, "message %zu contains a NUL character (\\u0000)", i + 1);
    if (tools && json_has_nul(tools))
        return pl_fail(PL_ERR_ARG, "the tools contain a NUL character (\\u0000)");
    return PL_OK;
}

static pl_status render(const char *tmpl, const char *bos, const char *eos, const pl_json *messages,
                        const pl_json *tools, const pl_chat_opts *opts, pl_jinja *parsed,
                        char **out) {
    pl_jinja *own = NULL;
    pl_status st = PL_OK;
    if (!parsed) {
        st = pl_jinja_parse(tmpl, strlen(tmpl), &own);
        if (st != PL_OK) return st;
        parsed = own;
    }
    pl_jinja_ctx *c = pl_jinja_ctx_new();
    if (!c) st = pl_fail(PL_ERR_NOMEM, "out of memory");
    if (st == PL_OK) st = pl_jinja_set_json(c, "messages", messages);
    if (st == PL_OK && tools) st = pl_jinja_set_json(c, "tools", tools);
    if (st == PL_OK)
        st = pl_jinja_set_bool(c, "add_generation_prompt", opts->add_generation_prompt);
    if (st == PL_OK && !opts->enable_thinking) st = pl_jinja_set_bool(c, "enable_thinking", false);
    if (st == PL_OK) st = pl_jinja_set_str(c, "bos_token", bos ? bos : "");
    if (st == PL_OK) st = pl_jinja_set_str(c, "eos_token", eos ? eos : "");
    if (st == PL_OK && !tools) {
        /* transformers passes tools=None when there are none */
        static const pl_json null_value = {.type = PL_JSON_NULL};
        st = pl_jinja_set_json(c, "tools", &null_value);
    }
    size_t len = 0;
    if (st == PL_OK) st = pl_jinja_render(parsed, c, out, &len);
    if (st == PL_OK && memchr(*out, 0, len)) {
        free(*out);
        *out = NULL;
        st = pl_fail(PL_ERR_FORMAT, "the template's output contains a NUL character");
    }
    pl_jinja_ctx_free(c);
    pl_jinja_free(own);
    return st;
}

pl_status pl_chat_render_template(const char *tmpl, const char *bos, const char *eos,
                                  const pl_json *messages, const pl_json *tools,
                                  const pl_chat_opts *opts, char **out) {
    *out = NULL;
    if (!messages || messages->type != PL_JSON_ARRAY)
        return pl_fail(PL_ERR_ARG, "the messages must be a JSON array");
    pl_status st = check_input_nul(messages, tools);
    if (st != PL_OK) return st;
    return render(tmpl, bos, eos, messages, tools, opts, NULL, out);
}

/* The text of token id as a C string for the template (NULL for id -1). */
static pl_status token_text(const pl_tokenizer *t, int32_t id, char **out) {
    *out = NULL;
    if (id < 0) return PL_OK;
    uint32_t len;
    const char *s = pl_tok_text(t, id, &len);
    if (memchr(s, 0, len))
        return pl_fail(PL_ERR_FORMAT, "the text of token %d contains a NUL character", (int)id);
    if (!(*out = malloc(len + 1))) return pl_fail(PL_ERR_NOMEM, "out of memory");
    memcpy(*out, s, len);
    (*out)[len] = 0;
    return PL_OK;
}

pl_status pl_chat_render_json(const pl_tokenizer *t, const pl_json *messages, const pl_json *tools,
                              const pl_chat_opts *opts, char **out) {
    *out = NULL;
    if (!messages || messages->type != PL_JSON_ARRAY)
        return pl_fail(PL_ERR_ARG, "the messages must be a JSON array");
    pl_chat_opts dflt = {.add_generation_prompt = true, .enable_thinking = true};
    if (!opts) opts = &dflt;
    pl_status st = check_input_nul(messages, tools);
    if (st != PL_OK) return st;
    if (t->chat_template_nul && !opts->tmpl)
        return pl_fail(PL_ERR_FORMAT, "the model's chat template contains a NUL character");
    char *bos = NULL, *eos = NULL;
    pl_jinja *parsed = NULL;
    const char *tmpl = opts->tmpl; /* the caller's, else the model's (parsed) or a fallback */
    st = token_text(t, t->sp.bos, &bos);
    if (st == PL_OK) st = token_text(t, t->sp.eos, &eos);
    if (st != PL_OK) goto done;
    if (!tmpl && t->chat_template) {
        st = pl_jinja_parse(t->chat_template, strlen(t->chat_template), &parsed);
        if (st != PL_OK) pl_clear_error();
    }
    if (!parsed && !opts->tmpl) { /* no template, or one we cannot read: by its markers */
        for (size_t i = 0; i < sizeof k_fallbacks / sizeof k_fallbacks[0] && !tmpl; i++) {
            const char *m = k_fallbacks[i].marker;
            if ((t->chat_template && strstr(t->chat_template, m)) ||
                pl_tok_find(t, m, strlen(m)) >= 0)
                tmpl = k_fallbacks[i].tmpl;
        }
        if (!tmpl) {
            st = t->chat_template
                     ? pl_fail(PL_ERR_FORMAT, "cannot read the model's chat template "
                                              "(nor fall back by marker tokens)")
                     : pl_fail(PL_ERR_FORMAT, "the model has no chat template (nor the "
                                              "ChatML or Llama 3 marker tokens)");
            goto done;
        }
    }
    st = render(tmpl, bos, eos, messages, tools, opts, parsed, out);
done:
    pl_jinja_free(parsed);
    free(bos), free(eos);
    return st;
}

pl_status pl_chat_render(const pl_tokenizer *t, const pl_chat_msg *msgs, int n_msgs,
                         const pl_chat_opts *opts, char **out) {
    *out = NULL;
    /* build the JSON form of the messages, then render that */
    pl_strbuf b = {0};
    pl_sb_putc(&b, '[');
    for (int i = 0; i < n_msgs; i++) {
        if (i) pl_sb_putc(&b, ',');
        pl_sb_puts(&b, "{\"role\":");
        const char *role = msgs[i].role ? msgs[i].role : "user";
        pl_json_quote(&b, role, strlen(role), false);
        pl_sb_puts(&b, ",\"content\":");
        if (msgs[i].content)
            pl_json_quote(&b, msgs[i].content, strlen(msgs[i].content), false);
        else
            pl_sb_puts(&b, "null");
        pl_sb_putc(&b, '}');
    }
    pl_sb_putc(&b, ']');
    if (b.failed) {
        pl_sb_free(&b);
        return pl_fail(PL_ERR_NOMEM, "out of memory");
    }
    pl_json_doc *doc = NULL;
    pl_status st = pl_json_parse(b.s, b.len, &doc);
    pl_sb_free(&b);
    if (st != PL_OK) return st;
    st = pl_chat_render_json(t, pl_json_root(doc), NULL, opts, out);
    pl_json_doc_free(doc);
    return st;
}
