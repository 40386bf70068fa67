/* responses.c - OpenAI's Responses API: the reply as output items in the order the model
 * wrote them - a reasoning item (its <think> block, one reasoning_text part), a message item
 * (one output_text part), one function_call item per tool call - whole or as the API's
 * event stream (each event with its type and sequence_number, in the API's order). Both
 * build the items the same way: a piece of another kind than the open item's closes it and
 * opens the next; each closed item is kept (j->calls) for the response object. */
#include "responses.h"

#include <string.h>

#include "base/json.h"

/* An item's id: its kind's prefix, the response's number, the item's output_index. */
static void item_id(const srv_gen_ctx *j, pl_strbuf *b, const char *prefix, int at) {
    pl_sb_printf(b, "\"%s%s%02x\"", prefix, j->id + 5 /* after "resp_" */, at);
}

static int open_at(const srv_gen_ctx *j) {
    return j->n_items - 1;
}

/* The open message's logprobs (with logprobs asked: top_logprobs, include), comma-separated
 * entries of chat's shape. */
static void logprobs(pl_strbuf *b, const srv_gen_ctx *j) {
    if (j->lp[1].len) pl_sb_append(b, j->lp[1].s, j->lp[1].len);
}

/* The open item's text part: output_text of the message, reasoning_text of the reasoning;
 * empty while in progress. */
static void part(pl_strbuf *b, const srv_gen_ctx *j, char kind, bool empty) {
    const pl_strbuf *t = kind == 't' ? &j->text : &j->reasoning;
    pl_sb_printf(b, "{\"type\":\"%s\",\"text\":", kind == 't' ? "output_text" : "reasoning_text");
    pl_json_quote(b, empty || !t->s ? "" : t->s, empty ? 0 : t->len, false);
    if (kind == 't') {
        pl_sb_puts(b, ",\"annotations\":[],\"logprobs\":[");
        if (!empty) logprobs(b, j);
        pl_sb_puts(b, "]");
    }
    pl_sb_putc(b, '}');
}

/* The open item (kind 't' message, 'r' reasoning): in progress and empty, or done with its
 * text (status incomplete when the reply was cut at max_output_tokens). */
static void item(pl_strbuf *b, const srv_gen_ctx *j, char kind, const char *status) {
    pl_sb_puts(b, "{\"id\":");
    item_id(j, b, kind == 't' ? "msg_" : "rs_", open_at(j));
    if (kind == 't')
        pl_sb_printf(b,
                     ",\"type\":\"message\",\"status\":\"%s\",\"role\":\"assistant\",\"content\":[",
                     status);
    else
        pl_sb_printf(b, ",\"type\":\"reasoning\",\"status\":\"%s\",\"summary\":[],\"content\":[",
                     status);
    if (strcmp(status, "in_progress")) part(b, j, kind, false);
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
    if (g && !failure) pl_sb_append(b, j->calls.s, j->calls.len);
    pl_sb_printf(b,
                 "],\"parallel_tool_calls\":false,\"temperature\":%.17g,\"text\":{\"format\":%s},",
                 r->temperature, r->text_format ? r->text_format : "{\"type\":\"text\"}");
    pl_sb_printf(b, "\"tool_choice\":\"auto\",\"tools\":[],\"top_p\":%.17g,\"usage\":", r->top_p);
    if (g)
        pl_sb_printf(b,
                     "{\"input_tokens\":%lld,\"input_tokens_details\":{\"cached_tokens\":%lld},"
                     "\"output_tokens\":%lld,\"output_tokens_details\":{\"reasoning_tokens\":%lld},"
                     "\"total_tokens\":%lld}}",
                     (long long)g->n_prompt, (long long)g->n_cached, (long long)g->n_completion,
                     (long long)g->n_reasoning, (long long)(g->n_prompt + g->n_completion));
    else
        pl_sb_puts(b, "null}");
}

/* An event's head: "event: TYPE", then data with its type and sequence number. */
static void event(pl_strbuf *b, srv_gen_ctx *j, const char *type) {
    pl_sb_printf(b, "event: %s\ndata: {\"type\":\"%s\",\"sequence_number\":%lld,", type, type,
                 (long long)j->seq++);
}

/* item_id, output_index, content_index of the open item's part */
static void where(pl_strbuf *b, const srv_gen_ctx *j) {
    pl_sb_puts(b, "\"item_id\":");
    item_id(j, b, j->item == 't' ? "msg_" : "rs_", open_at(j));
    pl_sb_printf(b, ",\"output_index\":%d,\"content_index\":0,", open_at(j));
}

/* The open item's text event: delta (done false) or done. */
static const char *text_event(const srv_gen_ctx *j, bool done) {
    if (j->item == 't') return done ? "response.output_text.done" : "response.output_text.delta";
    return done ? "response.reasoning_text.done" : "response.reasoning_text.delta";
}

/* response.output_item.added / .done: the open item with this status. */
static void item_event(srv_gen_ctx *j, pl_strbuf *b, const char *type, const char *status) {
    event(b, j, type);
    pl_sb_printf(b, "\"output_index\":%d,\"item\":", open_at(j));
    item(b, j, j->item, status);
    pl_sb_puts(b, "}\n\n");
}

/* response.content_part.added (empty) / .done: the open item's part. */
static void part_event(srv_gen_ctx *j, pl_strbuf *b, const char *type, bool empty) {
    event(b, j, type);
    where(b, j);
    pl_sb_puts(b, "\"part\":");
    part(b, j, j->item, empty);
    pl_sb_puts(b, "}\n\n");
}

/* Open an item of this kind: streaming, response.output_item.added and
 * response.content_part.added. */
static void open_item(srv_gen_ctx *j, pl_strbuf *b, char kind) {
    j->item = kind;
    j->n_items++;
    (kind == 't' ? &j->text : &j->reasoning)->len = 0;
    if (kind == 't') j->lp[1].len = 0;
    if (!j->r->stream) return;
    item_event(j, b, "response.output_item.added", "in_progress");
    part_event(j, b, "response.content_part.added", true);
}

/* Close the open item (if any), keeping it for the response object; streaming, its
 * .done events. cut: the reply ended at max_output_tokens (the item is incomplete). */
static void close_item(srv_gen_ctx *j, pl_strbuf *b, bool cut) {
    char kind = j->item;
    if (!kind) return;
    const char *status = cut ? "incomplete" : "completed";
    if (j->r->stream) {
        event(b, j, text_event(j, true));
        where(b, j);
        pl_sb_puts(b, "\"text\":");
        const pl_strbuf *t = kind == 't' ? &j->text : &j->reasoning;
        pl_json_quote(b, t->s ? t->s : "", t->len, false);
        if (kind == 't') {
            pl_sb_puts(b, ",\"logprobs\":[");
            logprobs(b, j);
            pl_sb_putc(b, ']');
        }
        pl_sb_puts(b, "}\n\n");
        part_event(j, b, "response.content_part.done", false);
        item_event(j, b, "response.output_item.done", status);
    }
    if (j->calls.len) pl_sb_putc(&j->calls, ',');
    item(&j->calls, j, kind, status);
    j->item = 0;
}

/* The reply is over: the open item closed; a reply with no item at all gets one empty
 * message (the API always answers with something). */
static void close_all(srv_gen_ctx *j, pl_strbuf *b, const srv_gen_result *g) {
    bool cut = g->finish == SRV_FINISH_LENGTH;
    if (!j->n_items) open_item(j, b, 't');
    close_item(j, b, cut);
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
    srv_send_event(j, &b);
    pl_sb_free(&b);
}

/* Send b (streaming) and free it; false when memory ran out or the client is gone. */
static bool send(srv_gen_ctx *j, pl_strbuf *b) {
    bool ok = !j->calls.failed && !j->text.failed && !j->reasoning.failed;
    if (!ok) b->failed = true;
    if (j->r->stream) ok = srv_send_event(j, b) && ok;
    pl_sb_free(b);
    return ok;
}

bool srv_responses_piece(srv_gen_ctx *j, char kind, const char *s, size_t n) {
    pl_strbuf b = {0};
    if (j->item != kind) close_item(j, &b, false), open_item(j, &b, kind);
    pl_sb_append(kind == 't' ? &j->text : &j->reasoning, s, n);
    if (j->r->stream) {
        event(&b, j, text_event(j, false));
        where(&b, j);
        pl_sb_puts(&b, "\"delta\":");
        pl_json_quote(&b, s, n, false);
        if (kind == 't') { /* the entries of the ids that brought this text */
            pl_sb_puts(&b, ",\"logprobs\":[");
            if (j->lp[0].len) pl_sb_append(&b, j->lp[0].s, j->lp[0].len);
            pl_sb_putc(&b, ']');
        }
        pl_sb_puts(&b, "}\n\n");
    }
    /* the ids' entries go with the message's text; reasoning's ids have none in the API */
    if (kind == 't' && j->lp[0].len) {
        if (j->lp[1].len) pl_sb_putc(&j->lp[1], ',');
        pl_sb_append(&j->lp[1], j->lp[0].s, j->lp[0].len);
    }
    if (j->lp[0].failed || j->lp[1].failed) b.failed = true;
    j->lp[0].len = 0;
    return send(j, &b);
}

void srv_responses_end(srv_gen_ctx *j, const srv_gen_result *g, const char *failure) {
    pl_strbuf b = {0};
    if (!failure) close_all(j, &b, g);
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
    pl_strbuf b = {0};
    close_item(j, &b, false);
    j->lp[0].len = 0; /* the call's ids: no text to go with */
    int at = j->n_items++;
    if (j->r->stream) {
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
    }
    /* the completed item, kept for the response object (whole, or the stream's last event) */
    if (j->calls.len) pl_sb_putc(&j->calls, ',');
    call_item(&j->calls, j, call_id, name, args, n, true);
    j->n_calls++;
    return send(j, &b);
}

void srv_responses_object(srv_gen_ctx *j, pl_strbuf *b, const srv_gen_result *g) {
    pl_strbuf none = {0};
    close_all(j, &none, g); /* (not streaming: no events written) */
    pl_sb_free(&none);
    if (j->calls.failed || j->text.failed || j->reasoning.failed) b->failed = true;
    response(b, j, g, NULL);
}
