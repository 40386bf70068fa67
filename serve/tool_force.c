/* tool_force.c - the schema of one forced tool call: an anyOf over the offered tools (or the
 * named one) of {"name": const, "arguments": that tool's parameters schema}, between the
 * template's call tags. */
#include "tool_force.h"

#include <pooled.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "base/strbuf.h"

tp_calls tf_calls_format(const char *t, bool *xml) {
    *xml = t && strstr(t, "<function=");
    return !t                                 ? TP_CALLS_NONE
           : strstr(t, "<tool_call>")         ? TP_CALLS_QWEN
           : strstr(t, "<|start_header_id|>") ? TP_CALLS_LLAMA3
                                              : TP_CALLS_NONE;
}

bool tf_forced(const srv_request *r) {
    return r->tools && (r->tool_choice == SRV_TOOLS_REQUIRED || r->tool_choice == SRV_TOOLS_NAMED);
}

/* One alternative: {"type":"object","properties":{"name":{"const":N},KEY:P},"required":[..]} */
static void add_alt(pl_strbuf *b, const pl_json *fn, const char *key) {
    const pl_json *p = pl_json_get(fn, "parameters");
    pl_sb_puts(b, "{\"type\":\"object\",\"properties\":{\"name\":{\"const\":");
    pl_json_write(b, pl_json_get(fn, "name"));
    pl_sb_printf(b, "},\"%s\":", key);
    if (p) {
        pl_json_write(b, p);
    } else {
        pl_sb_puts(b, "{\"type\":\"object\"}");
    }
    pl_sb_printf(b, "},\"required\":[\"name\",\"%s\"]}", key);
}

static bool schema_text(const srv_request *r, const char *key, pl_strbuf *b, char *err,
                        size_t cap) {
    pl_json_doc *doc = NULL;
    if (pl_json_parse(r->tools, strlen(r->tools), &doc))
        return snprintf(err, cap, "%s", pl_last_error()), false;
    const pl_json *t = pl_json_root(doc);
    size_t n = pl_json_count(t);
    if (r->tool_choice == SRV_TOOLS_REQUIRED && n > TF_MAX_TOOLS) {
        pl_json_doc_free(doc);
        snprintf(err, cap,
                 "'tool_choice' forcing a call takes at most %d tools (%zu given); name one "
                 "tool instead",
                 TF_MAX_TOOLS, n);
        return false;
    }
    pl_sb_puts(b, "{\"anyOf\":[");
    int k = 0;
    for (size_t i = 0; i < n; i++) {
        const pl_json *fn = pl_json_get(pl_json_at(t, i), "function");
        const char *name = pl_json_string(pl_json_get(fn, "name"));
        if (!name || (r->tool_choice == SRV_TOOLS_NAMED && strcmp(name, r->tool_name))) continue;
        if (k++) pl_sb_putc(b, ',');
        add_alt(b, fn, key);
    }
    pl_sb_puts(b, "]}");
    pl_json_doc_free(doc);
    if (!k) return snprintf(err, cap, "'tool_choice' names no tool in 'tools'"), false;
    if (b->failed) return snprintf(err, cap, "out of memory"), false;
    return true;
}

bool tf_schema(const srv_request *r, const char *chat_template, tf_call *call, char *err,
               size_t cap) {
    *call = (tf_call){0};
    if (!tf_forced(r)) return true;
    if (r->schema) {
        snprintf(err, cap, "'response_format' and a forced 'tool_choice' cannot be combined");
        return false;
    }
    bool xml;
    tp_calls f = tf_calls_format(chat_template, &xml);
    if (f == TP_CALLS_NONE || xml) {
        snprintf(err, cap, "'tool_choice' cannot force a call with this model: %s (use auto)",
                 f == TP_CALLS_NONE ? "its chat template has no tool-call format we know"
                                    : "its calls are XML (<function=...>), not JSON");
        return false;
    }
    pl_strbuf b = {0};
    if (!schema_text(r, f == TP_CALLS_QWEN ? "arguments" : "parameters", &b, err, cap)) {
        pl_sb_free(&b);
        return false;
    }
    if (pooled_json_schema_check(b.s)) { /* refused now, as a 400, not at generation */
        const char *why = pooled_last_error();
        if (!strncmp(why, "json_schema: ", 13)) why += 13;
        if (!strncmp(why, "schema: ", 8)) why += 8;
        snprintf(err, cap, "'tools': a parameters schema: %s", why);
        pl_sb_free(&b);
        return false;
    }
    call->schema = b.s; /* (the buffer's, now the call's) */
    if (f == TP_CALLS_QWEN) call->prefix = "<tool_call>\n", call->suffix = "\n</tool_call>";
    return true;
}

void tf_call_free(tf_call *call) {
    free(call->schema);
    *call = (tf_call){0};
}
