/* responses.c - OpenAI's Responses API: one assistant message with one output_text part,
 * then a function_call item per tool call (output_index 1, 2, ...), whole or as the API's
 * event stream (each event with its type and sequence_number, in the API's order). */
#include "responses.h"

#include <string.h>

#include "base/json.h"

/* The message item's id: the response's with msg_ in front of its number. */
static void item_id(const srv_gen_ctx *j, pl_strbuf *b) {
    pl_sb_printf(b, "\"msg_%s\"", j->id + 5 /* after "resp_" */);
}

static void quote_text(pl_strbuf *b, const srv_gen_ctx *j) {
    pl_json_quote(b, j->text.s ? j->text.s : "", j->text.len, false);
}

static void part(pl_strbuf *b, const srv_gen_ctx *j, bool empty) {
    pl_sb_puts(b, "{\"type\":\"output_text\",\"text\":");
    if (empty)
        pl_sb_puts(b, "\"\"");
    else
        quote_text(b, j);
    pl_sb_puts(b, ",\"annotations\":[],\"logprobs\":[]}");
}

/* The message item: in progress and empty (g NULL), or done with the text (incomplete when
 * cut at max_output_tokens). */
static void item(pl_strbuf *b, const srv_gen_ctx *j, const srv_gen_result *g) {
    bool done = g != NULL;
    pl_sb_puts(b, "{\"id\":");
    item_id(j, b);
    pl_sb_printf(b, ",\"type\":\"message\",\"status\":\"%s\",\"role\":\"assistant\",\"content\":[",
                 !done                            ? "in_progress"
                 : g->finish == SRV_FINISH_LENGTH ? "incomplete"
                                                  : "completed");
    if (done) part(b, j, false);
    pl_sb_puts(b, "]}");
}

/* The response object; g NULL: in progress, nothing out yet. */
static void response(pl_strbuf *b, const srv_gen_ctx *j, const srv_gen_result *g,
                     const char *failure) {
    const srv_request *r = j->r;
    bool cut = g && !failure && g->finish == SRV_FINISH_LENGTH;
    const char *status = !g ? "in_progress" : failure ? "failed" : cut ? "incomplete" : "completed";
    pl_sb_printf(b, "{\"id\":\"%s\",\"object\":\"response\",\"created_at\":%lld,\"status\":\"%s\",",
                 j->id, j->created, status);
    if (failure) {
        pl_sb_puts(b, "\"error\":{\"code\":\"server_error\",\"message\":");
        pl_json_quote(b, failure, strlen(failure), false);
        pl_sb_puts(b, "},");
    } else {
        pl_sb_puts(b, "\"error\":null,");
    }
    pl_sb_printf(b, "\"incomplete_details\":%s,\"instructions\":",
                 cut ? "{\"reason\":\"max_output_tokens\"}" : "null");
    if (r->n_msgs && !strcmp(r->msgs[0].role, "system"))
        pl_json_quote(b, r->msgs[0].content, strlen(r->msgs[0].content), false);
    else
        pl_sb_puts(b, "null");
    if (r->max_tokens >= 0)
        pl_sb_printf(b, ",\"max_output_tokens\":%lld", (long long)r->max_tokens);
    else
        pl_sb_puts(b, ",\"max_output_tokens\":null");
    pl_sb_puts(b, ",\"model\":");
    pl_json_quote(b, j->model_id, strlen(j->model_id), false);
    pl_sb_puts(b, ",\"output\":[");
    if (g && !failure) item(b, j, g);
    if (g && !failure && j->calls.len)
        pl_sb_putc(b, ','), pl_sb_append(b, j->calls.s, j->calls.len);
    pl_sb_printf(b,
                 "],\"parallel_tool_calls\":false,\"temperature\":%.17g,\"text\":{\"format\":"
                 "{\"type\":\"text\"}},\"tool_choice\":\"auto\",\"tools\":[],\"top_p\":%.17g,"
                 "\"usage\":",
                 r->temperature, r->top_p);
    if (g)
        pl_sb_printf(b,
                     "{\"input_tokens\":%lld,\"input_tokens_details\":{\"cached_tokens\":%lld},"
                     "\"output_tokens\":%lld,\"output_tokens_details\":{\"reasoning_tokens\":0},"
                     "\"total_tokens\":%lld}}",
                     (long long)g->n_prompt, (long long)g->n_cached, (long long)g->n_completion,
                     (long long)(g->n_prompt + g->n_completion));
    else
        pl_sb_puts(b, "null}");
}

/* An event's head: "event: TYPE", then data with its type and sequence number. */
static void event(pl_strbuf *b, srv_gen_ctx *j, const char *type) {
    pl_sb_printf(b, "event: %s\ndata: {\"type\":\"%s\",\"sequence_number\":%lld,", type, type,
                 (long long)j->seq++);
}

/* item_id, output_index, content_index */
static void where(pl_strbuf *b, const srv_gen_ctx *j) {
    pl_sb_puts(b, "\"item_id\":");
    item_id(j, b);
    pl_sb_puts(b, ",\"output_index\":0,\"content_index\":0,");
}

void srv_responses_start(srv_gen_ctx *j) {
    pl_strbuf b = {0};
    event(&b, j, "response.created");
    pl_sb_puts(&b, "\"response\":");
    response(&b, j, NULL, NULL);
    pl_sb_puts(&b, "}\n\n");
    event(&b, j, "response.in_progress");
    pl_sb_puts(&b, "\"response\":");
    response(&b, j, NULL, NULL);
    pl_sb_puts(&b, "}\n\n");
    event(&b, j, "response.output_item.added");
    pl_sb_puts(&b, "\"output_index\":0,\"item\":");
    item(&b, j, NULL);
    pl_sb_puts(&b, "}\n\n");
    event(&b, j, "response.content_part.added");
    where(&b, j);
    pl_sb_puts(&b, "\"part\":");
    part(&b, j, true);
    pl_sb_puts(&b, "}\n\n");
    srv_send_event(j, &b);
    pl_sb_free(&b);
}

bool srv_responses_delta(srv_gen_ctx *j, const char *s, size_t n) {
    pl_sb_append(&j->text, s, n);
    pl_strbuf b = {0};
    event(&b, j, "response.output_text.delta");
    where(&b, j);
    pl_sb_puts(&b, "\"delta\":");
    pl_json_quote(&b, s, n, false);
    pl_sb_puts(&b, ",\"logprobs\":[]}\n\n");
    if (j->text.failed) b.failed = true;
    bool ok = srv_send_event(j, &b);
    pl_sb_free(&b);
    return ok;
}

void srv_responses_end(srv_gen_ctx *j, const srv_gen_result *g, const char *failure) {
    pl_strbuf b = {0};
    if (!failure) {
        event(&b, j, "response.output_text.done");
        where(&b, j);
        pl_sb_puts(&b, "\"text\":");
        quote_text(&b, j);
        pl_sb_puts(&b, ",\"logprobs\":[]}\n\n");
        event(&b, j, "response.content_part.done");
        where(&b, j);
        pl_sb_puts(&b, "\"part\":");
        part(&b, j, false);
        pl_sb_puts(&b, "}\n\n");
        event(&b, j, "response.output_item.done");
        pl_sb_puts(&b, "\"output_index\":0,\"item\":");
        item(&b, j, g);
        pl_sb_puts(&b, "}\n\n");
    }
    event(&b, j,
          failure                          ? "response.failed"
          : g->finish == SRV_FINISH_LENGTH ? "response.incomplete"
                                           : "response.completed");
    pl_sb_puts(&b, "\"response\":");
    response(&b, j, g, failure);
    pl_sb_puts(&b, "}\n\n");
    srv_send_event(j, &b);
    pl_sb_free(&b);
}

/* The current call's item id: the response's number with fc_ in front, then the call's. */
static void call_id_of(pl_strbuf *b, const srv_gen_ctx *j) {
    pl_sb_printf(b, "\"fc_%s%02x\"", j->id + 5 /* after "resp_" */, j->n_calls);
}

/* A function_call item: in progress with no arguments yet, or completed. */
static void call_item(pl_strbuf *b, const srv_gen_ctx *j, const char *call_id, const char *name,
                      const char *args, size_t n, bool done) {
    pl_sb_puts(b, "{\"id\":");
    call_id_of(b, j);
    pl_sb_printf(b, ",\"type\":\"function_call\",\"status\":\"%s\",",
                 done ? "completed" : "in_progress");
    pl_sb_puts(b, "\"arguments\":");
    pl_json_quote(b, done ? args : "", done ? n : 0, false);
    pl_sb_printf(b, ",\"call_id\":\"%s\",\"name\":", call_id);
    pl_json_quote(b, name, strlen(name), false);
    pl_sb_putc(b, '}');
}

bool srv_responses_call(srv_gen_ctx *j, const char *call_id, const char *name, const char *args,
                        size_t n) {
    /* the completed item, kept for the response object (whole, or the stream's last event) */
    if (j->calls.len) pl_sb_putc(&j->calls, ',');
    call_item(&j->calls, j, call_id, name, args, n, true);
    bool ok = !j->calls.failed;
    if (j->r->stream && ok) {
        pl_strbuf b = {0};
        int at = 1 + j->n_calls; /* after the message item */
        event(&b, j, "response.output_item.added");
        pl_sb_printf(&b, "\"output_index\":%d,\"item\":", at);
        call_item(&b, j, call_id, name, args, n, false);
        pl_sb_puts(&b, "}\n\n");
        event(&b, j, "response.function_call_arguments.delta");
        pl_sb_puts(&b, "\"item_id\":");
        call_id_of(&b, j);
        pl_sb_printf(&b, ",\"output_index\":%d,\"delta\":", at);
        pl_json_quote(&b, args, n, false);
        pl_sb_puts(&b, "}\n\n");
        event(&b, j, "response.function_call_arguments.done");
        pl_sb_puts(&b, "\"item_id\":");
        call_id_of(&b, j);
        pl_sb_printf(&b, ",\"output_index\":%d,\"name\":", at);
        pl_json_quote(&b, name, strlen(name), false);
        pl_sb_puts(&b, ",\"arguments\":");
        pl_json_quote(&b, args, n, false);
        pl_sb_puts(&b, "}\n\n");
        event(&b, j, "response.output_item.done");
        pl_sb_printf(&b, "\"output_index\":%d,\"item\":", at);
        call_item(&b, j, call_id, name, args, n, true);
        pl_sb_puts(&b, "}\n\n");
        ok = srv_send_event(j, &b);
        pl_sb_free(&b);
    }
    j->n_calls++;
    return ok;
}

void srv_responses_object(srv_gen_ctx *j, pl_strbuf *b, const srv_gen_result *g) {
    response(b, j, g, NULL);
}
