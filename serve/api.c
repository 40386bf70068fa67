/* api.c - requests answered in the shapes of OpenAI's and Anthropic's APIs (and llama.cpp
 * server's tokenize / detokenize), streamed as server-sent events or in one object. */
#include "api.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/json.h"
#include "responses.h"

static void quote(pl_strbuf *b, const char *s, size_t n) {
    pl_json_quote(b, s, n, false);
}
static void quotes(pl_strbuf *b, const char *s) {
    quote(b, s, strlen(s));
}

static const char *error_type(bool anthropic, int status) {
    switch (status) {
    case 401: return "authentication_error";
    case 403: return "permission_error";
    case 404: return anthropic ? "not_found_error" : "invalid_request_error";
    case 413: return anthropic ? "request_too_large" : "invalid_request_error";
    case 503: return anthropic ? "overloaded_error" : "server_error";
    case 500: return anthropic ? "api_error" : "server_error";
    default: return "invalid_request_error";
    }
}

void srv_api_error(pl_strbuf *b, bool anthropic, int status, const char *msg) {
    if (anthropic) {
        pl_sb_printf(b, "{\"type\":\"error\",\"error\":{\"type\":\"%s\",\"message\":",
                     error_type(true, status));
        quotes(b, msg);
        pl_sb_puts(b, "}}");
        return;
    }
    pl_sb_puts(b, "{\"error\":{\"message\":");
    quotes(b, msg);
    const char *code = status == 401                      ? "\"invalid_api_key\""
                       : status == 404                    ? "\"not_found\""
                       : strstr(msg, "the context holds") ? "\"context_length_exceeded\""
                                                          : "null";
    pl_sb_printf(b, ",\"type\":\"%s\",\"param\":null,\"code\":%s}}", error_type(false, status),
                 code);
}

/* The whole body at once (not a stream). */
static void answer(const srv_out *o, int status, pl_strbuf *b) {
    o->head(o->ud, status, false);
    if (b->failed) {
        pl_sb_free(b);
        srv_api_error(b, false, 500, "out of memory");
    }
    o->write(o->ud, b->s ? b->s : "", b->len);
    pl_sb_free(b);
}

static void answer_error(const srv_out *o, const srv_request *r, int status, const char *msg) {
    pl_strbuf b = {0};
    srv_api_error(&b, r->kind == SRV_MESSAGES || r->kind == SRV_COUNT_TOKENS, status, msg);
    answer(o, status, &b);
}

bool srv_send_event(srv_gen_ctx *j, pl_strbuf *b) {
    if (!j->out_failed && (b->failed || !j->o->write(j->o->ud, b->s, b->len))) j->out_failed = true;
    b->len = 0;
    if (b->s) b->s[0] = 0;
    return !j->out_failed;
}

/* OpenAI: one chunk's head up to the choices' array contents. */
static void oa_chunk_head(srv_gen_ctx *j, pl_strbuf *b) {
    bool chat = j->r->kind == SRV_CHAT;
    pl_sb_printf(b, "data: {\"id\":\"%s\",\"object\":\"%s\",\"created\":%lld,\"model\":", j->id,
                 chat ? "chat.completion.chunk" : "text_completion", j->created);
    quotes(b, j->model_id);
    pl_sb_puts(b, ",\"choices\":[");
}

static void oa_chunk_tail(srv_gen_ctx *j, pl_strbuf *b) {
    pl_sb_printf(b, "]%s}\n\n", j->r->include_usage ? ",\"usage\":null" : "");
}

/* ---- logprobs ---- */

static double lp_value(float v) {
    return isfinite(v) ? v : -9999.0; /* a masked id: JSON has no -Infinity */
}

/* chat: "token", "logprob", "bytes" of one id */
static void lp_chat_one(srv_gen_ctx *j, pl_strbuf *b, int32_t id, float logprob) {
    char *t = NULL;
    size_t n = 0;
    srv_engine_piece(j->e, id, &t, &n);
    pl_sb_puts(b, "\"token\":");
    quote(b, t ? t : "", t ? n : 0);
    pl_sb_printf(b, ",\"logprob\":%.7g,\"bytes\":[", lp_value(logprob));
    for (size_t i = 0; t && i < n; i++) pl_sb_printf(b, "%s%u", i ? "," : "", (unsigned char)t[i]);
    pl_sb_putc(b, ']');
    free(t);
}

/* One generated id's logprobs, kept until the next chunk (or the whole answer). */
static void on_logprob(void *ud, const srv_logprob *lp) {
    srv_gen_ctx *j = ud;
    if (j->r->kind == SRV_CHAT || j->r->kind == SRV_RESPONSES) { /* the same entries */
        pl_strbuf *b = &j->lp[0];
        pl_sb_puts(b, b->len ? ",{" : "{");
        lp_chat_one(j, b, lp->id, lp->logprob);
        pl_sb_puts(b, ",\"top_logprobs\":[");
        for (int i = 0; i < lp->n_top; i++) {
            pl_sb_puts(b, i ? ",{" : "{");
            lp_chat_one(j, b, lp->top[i].id, lp->top[i].logprob);
            pl_sb_putc(b, '}');
        }
        pl_sb_puts(b, "]}");
        return;
    }
    /* completions: tokens, token_logprobs, top_logprobs ({token: logprob}), text_offset */
    bool first = j->lp[0].len == 0;
    char *t = NULL;
    size_t n = 0;
    srv_engine_piece(j->e, lp->id, &t, &n);
    if (!first) pl_sb_putc(&j->lp[0], ',');
    quote(&j->lp[0], t ? t : "", t ? n : 0);
    free(t);
    pl_sb_printf(&j->lp[1], "%s%.7g", first ? "" : ",", lp_value(lp->logprob));
    pl_sb_puts(&j->lp[2], first ? "{" : ",{");
    for (int i = 0; i < lp->n_top; i++) {
        size_t tn = 0;
        srv_engine_piece(j->e, lp->top[i].id, &t, &tn);
        if (i) pl_sb_putc(&j->lp[2], ',');
        quote(&j->lp[2], t ? t : "", t ? tn : 0);
        pl_sb_printf(&j->lp[2], ":%.7g", lp_value(lp->top[i].logprob));
        free(t);
    }
    pl_sb_putc(&j->lp[2], '}');
    pl_sb_printf(&j->lp[3], "%s%zu", first ? "" : ",", j->text_off);
    j->text_off += n;
}

/* The "logprobs" value with what is kept (null when none were asked), then emptied. */
static void lp_flush(srv_gen_ctx *j, pl_strbuf *b) {
    if (j->r->logprobs < 0) {
        pl_sb_puts(b, "null");
        return;
    }
    if (j->r->kind == SRV_CHAT)
        pl_sb_printf(b, "{\"content\":[%s]}", j->lp[0].s ? j->lp[0].s : "");
    else
        pl_sb_printf(b,
                     "{\"tokens\":[%s],\"token_logprobs\":[%s],\"top_logprobs\":[%s],"
                     "\"text_offset\":[%s]}",
                     j->lp[0].s ? j->lp[0].s : "", j->lp[1].s ? j->lp[1].s : "",
                     j->lp[2].s ? j->lp[2].s : "", j->lp[3].s ? j->lp[3].s : "");
    for (int i = 0; i < 4; i++) {
        if (j->lp[i].failed) b->failed = true;
        j->lp[i].len = 0;
        if (j->lp[i].s) j->lp[i].s[0] = 0;
    }
}

/* OpenAI chat: one chunk whose delta is {key: <json>} (json: already JSON text). */
static void oa_delta(srv_gen_ctx *j, pl_strbuf *b, const char *key, const char *s, size_t n,
                     bool quoted) {
    oa_chunk_head(j, b);
    pl_sb_printf(b, "{\"index\":0,\"delta\":{\"%s\":", key);
    if (quoted)
        quote(b, s, n);
    else
        pl_sb_append(b, s, n);
    pl_sb_puts(b, "},\"logprobs\":");
    lp_flush(j, b);
    pl_sb_puts(b, ",\"finish_reason\":null}");
    oa_chunk_tail(j, b);
}

/* Anthropic stream: close the open content block. */
static void an_close(srv_gen_ctx *j, pl_strbuf *b) {
    if (!j->block) return;
    pl_sb_printf(b,
                 "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":%d}"
                 "\n\n",
                 j->n_blocks - 1);
    j->block = 0;
}

/* Anthropic stream: start a block (closing the open one); the first is followed by a ping,
 * as Anthropic's own streams do. */
static void an_start(srv_gen_ctx *j, pl_strbuf *b, const char *block_json) {
    an_close(j, b);
    pl_sb_printf(b,
                 "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":%d,"
                 "\"content_block\":%s}\n\n",
                 j->n_blocks, block_json);
    if (!j->n_blocks++) pl_sb_puts(b, "event: ping\ndata: {\"type\":\"ping\"}\n\n");
}

/* Anthropic stream: a text or thinking delta, in a block of its kind. */
static void an_delta(srv_gen_ctx *j, pl_strbuf *b, char kind, const char *s, size_t n) {
    if (j->block != kind) {
        an_start(j, b,
                 kind == 't' ? "{\"type\":\"text\",\"text\":\"\"}"
                             : "{\"type\":\"thinking\",\"thinking\":\"\",\"signature\":\"\"}");
        j->block = kind;
    }
    pl_sb_printf(b,
                 "event: content_block_delta\ndata: {\"type\":\"content_block_delta\","
                 "\"index\":%d,\"delta\":{\"type\":\"%s\",\"%s\":",
                 j->n_blocks - 1, kind == 't' ? "text_delta" : "thinking_delta",
                 kind == 't' ? "text" : "thinking");
    quote(b, s, n);
    pl_sb_puts(b, "}}\n\n");
}

/* Text (kind 't') or reasoning ('r') of the reply: kept, or sent as one delta. */
static bool on_piece(srv_gen_ctx *j, char kind, const char *s, size_t n) {
    if (j->r->kind == SRV_RESPONSES) return srv_responses_piece(j, kind, s, n);
    if (!j->r->stream) {
        pl_strbuf *to = kind == 't' ? &j->text : &j->reasoning;
        pl_sb_append(to, s, n);
        return !to->failed;
    }
    pl_strbuf b = {0};
    if (j->r->kind == SRV_MESSAGES) {
        an_delta(j, &b, kind, s, n);
    } else if (j->r->kind == SRV_CHAT) {
        oa_delta(j, &b, kind == 't' ? "content" : "reasoning_content", s, n, true);
    } else {
        oa_chunk_head(j, &b);
        pl_sb_puts(&b, "{\"index\":0,\"text\":");
        quote(&b, s, n);
        pl_sb_puts(&b, ",\"logprobs\":");
        lp_flush(j, &b);
        pl_sb_puts(&b, ",\"finish_reason\":null}");
        oa_chunk_tail(j, &b);
    }
    bool ok = srv_send_event(j, &b);
    pl_sb_free(&b);
    return ok;
}

static bool on_text(void *ud, const char *s, size_t n) {
    return on_piece(ud, 't', s, n);
}
static bool on_reasoning(void *ud, const char *s, size_t n) {
    return on_piece(ud, 'r', s, n);
}

/* A tool call: OpenAI's tool_calls item (arguments as a JSON string) or Anthropic's
 * tool_use block (input as the object); streamed as the APIs stream them: OpenAI a delta
 * with index, id and name then one with the arguments, Anthropic content_block_start,
 * input_json_delta, content_block_stop. */
static bool on_call(void *ud, const char *name, const char *args, size_t n) {
    srv_gen_ctx *j = ud;
    bool an = j->r->kind == SRV_MESSAGES;
    char id[64];
    snprintf(id, sizeof id, "%s%s%02x", an ? "toolu_" : "call_", j->call_sfx, j->n_calls);
    if (j->r->kind == SRV_RESPONSES) return srv_responses_call(j, id, name, args, n);
    pl_strbuf b = {0};
    if (!j->r->stream) {
        if (j->calls.len) pl_sb_putc(&j->calls, ',');
        if (an) {
            pl_sb_printf(&j->calls, "{\"type\":\"tool_use\",\"id\":\"%s\",\"name\":", id);
            quotes(&j->calls, name);
            pl_sb_puts(&j->calls, ",\"input\":");
            pl_sb_append(&j->calls, args, n);
            pl_sb_putc(&j->calls, '}');
        } else {
            pl_sb_printf(&j->calls,
                         "{\"id\":\"%s\",\"type\":\"function\",\"function\":{\"name\":", id);
            quotes(&j->calls, name);
            pl_sb_puts(&j->calls, ",\"arguments\":");
            quote(&j->calls, args, n);
            pl_sb_puts(&j->calls, "}}");
        }
        j->n_calls++;
        return !j->calls.failed;
    }
    if (an) {
        pl_strbuf blk = {0};
        pl_sb_printf(&blk, "{\"type\":\"tool_use\",\"id\":\"%s\",\"name\":", id);
        quotes(&blk, name);
        pl_sb_puts(&blk, ",\"input\":{}}");
        an_start(j, &b, blk.failed ? "{}" : blk.s);
        pl_sb_free(&blk);
        pl_sb_printf(&b,
                     "event: content_block_delta\ndata: {\"type\":\"content_block_delta\","
                     "\"index\":%d,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":",
                     j->n_blocks - 1);
        quote(&b, args, n);
        pl_sb_puts(&b, "}}\n\n");
        j->block = 'c';
        an_close(j, &b);
    } else {
        pl_strbuf d = {0};
        pl_sb_printf(&d,
                     "[{\"index\":%d,\"id\":\"%s\",\"type\":\"function\",\"function\":{\"name\":",
                     j->n_calls, id);
        quotes(&d, name);
        pl_sb_puts(&d, ",\"arguments\":\"\"}}]");
        oa_delta(j, &b, "tool_calls", d.s ? d.s : "[]", d.len, false);
        d.len = 0;
        pl_sb_printf(&d, "[{\"index\":%d,\"function\":{\"arguments\":", j->n_calls);
        quote(&d, args, n);
        pl_sb_puts(&d, "}}]");
        oa_delta(j, &b, "tool_calls", d.s ? d.s : "[]", d.len, false);
        if (d.failed) b.failed = true;
        pl_sb_free(&d);
    }
    j->n_calls++;
    bool ok = srv_send_event(j, &b);
    pl_sb_free(&b);
    return ok;
}

/* The engine's settled text into the reply parser. */
static bool on_model_text(void *ud, const char *s, size_t n) {
    srv_gen_ctx *j = ud;
    return tp_push(j->tp, s, n) && !j->out_failed;
}

static const char *oa_finish(const srv_gen_ctx *j, srv_finish f) {
    return f == SRV_FINISH_LENGTH ? "length" : j->n_calls ? "tool_calls" : "stop";
}
static const char *an_finish(const srv_gen_ctx *j, srv_finish f) {
    return f == SRV_FINISH_LENGTH ? "max_tokens"
           : j->n_calls           ? "tool_use"
           : f == SRV_FINISH_STOP ? "stop_sequence"
                                  : "end_turn";
}

static void oa_usage(pl_strbuf *b, const srv_gen_result *g) {
    pl_sb_printf(b,
                 "{\"prompt_tokens\":%lld,\"completion_tokens\":%lld,\"total_tokens\":%lld,"
                 "\"prompt_tokens_details\":{\"cached_tokens\":%lld},"
                 "\"completion_tokens_details\":{\"reasoning_tokens\":%lld}}",
                 (long long)g->n_prompt, (long long)g->n_completion,
                 (long long)(g->n_prompt + g->n_completion), (long long)g->n_cached,
                 (long long)g->n_reasoning);
}

static void an_stop_sequence(pl_strbuf *b, const srv_gen_ctx *j, const srv_gen_result *g) {
    pl_sb_puts(b, ",\"stop_sequence\":");
    if (g->finish == SRV_FINISH_STOP && !j->n_calls)
        quotes(b, j->r->stop[g->stop_index]);
    else
        pl_sb_puts(b, "null");
}

/* Anthropic's message object (no content while streaming starts). */
static void an_message(srv_gen_ctx *j, pl_strbuf *b, const srv_gen_result *g, bool start) {
    pl_sb_printf(b, "{\"id\":\"%s\",\"type\":\"message\",\"role\":\"assistant\",\"model\":", j->id);
    quotes(b, j->model_id);
    if (start) {
        pl_sb_printf(b,
                     ",\"content\":[],\"stop_reason\":null,\"stop_sequence\":null,"
                     "\"usage\":{\"input_tokens\":%lld,\"output_tokens\":0}}",
                     (long long)g->n_prompt);
        return;
    }
    pl_sb_puts(b, ",\"content\":[");
    if (j->reasoning.len) {
        pl_sb_puts(b, "{\"type\":\"thinking\",\"thinking\":");
        quote(b, j->reasoning.s, j->reasoning.len);
        pl_sb_puts(b, ",\"signature\":\"\"}");
    }
    if (j->text.len || (!j->reasoning.len && !j->n_calls)) {
        pl_sb_puts(b, j->reasoning.len ? ",{\"type\":\"text\",\"text\":"
                                       : "{\"type\":\"text\",\"text\":");
        quote(b, j->text.s ? j->text.s : "", j->text.len);
        pl_sb_putc(b, '}');
    }
    if (j->n_calls) {
        if (j->reasoning.len || j->text.len) pl_sb_putc(b, ',');
        pl_sb_append(b, j->calls.s, j->calls.len);
    }
    pl_sb_printf(b, "],\"stop_reason\":\"%s\"", an_finish(j, g->finish));
    an_stop_sequence(b, j, g);
    pl_sb_printf(b, ",\"usage\":{\"input_tokens\":%lld,\"output_tokens\":%lld}}",
                 (long long)g->n_prompt, (long long)g->n_completion);
}

static void stream_start(srv_gen_ctx *j, const srv_gen_result *g) {
    pl_strbuf b = {0};
    if (j->r->kind == SRV_MESSAGES) {
        pl_sb_puts(&b, "event: message_start\ndata: {\"type\":\"message_start\",\"message\":");
        an_message(j, &b, g, true);
        pl_sb_puts(&b, "}\n\n");
    } else if (j->r->kind == SRV_CHAT) {
        oa_chunk_head(j, &b);
        pl_sb_puts(&b, "{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"},"
                       "\"logprobs\":null,\"finish_reason\":null}");
        oa_chunk_tail(j, &b);
    }
    srv_send_event(j, &b);
    pl_sb_free(&b);
}

static void stream_end(srv_gen_ctx *j, const srv_gen_result *g, const char *failure) {
    pl_strbuf b = {0};
    const srv_request *r = j->r;
    if (r->kind == SRV_MESSAGES) {
        if (failure) {
            pl_sb_puts(&b, "event: error\ndata: ");
            srv_api_error(&b, true, 500, failure);
            pl_sb_puts(&b, "\n\n");
        } else {
            if (!j->n_blocks) an_delta(j, &b, 't', "", 0); /* an empty reply: one empty text */
            an_close(j, &b);
            pl_sb_printf(&b,
                         "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{"
                         "\"stop_reason\":\"%s\"",
                         an_finish(j, g->finish));
            an_stop_sequence(&b, j, g);
            pl_sb_printf(&b,
                         "},\"usage\":{\"output_tokens\":%lld}}\n\nevent: message_stop\n"
                         "data: {\"type\":\"message_stop\"}\n\n",
                         (long long)g->n_completion);
        }
        srv_send_event(j, &b);
        pl_sb_free(&b);
        return;
    }
    if (failure) {
        pl_sb_puts(&b, "data: ");
        srv_api_error(&b, false, 500, failure);
        pl_sb_puts(&b, "\n\n");
    } else {
        oa_chunk_head(j, &b);
        pl_sb_puts(&b, r->kind == SRV_CHAT ? "{\"index\":0,\"delta\":{},\"logprobs\":"
                                           : "{\"index\":0,\"text\":\"\",\"logprobs\":");
        lp_flush(j, &b);
        pl_sb_printf(&b, ",\"finish_reason\":\"%s\"}", oa_finish(j, g->finish));
        oa_chunk_tail(j, &b);
        if (r->include_usage) {
            oa_chunk_head(j, &b);
            pl_sb_puts(&b, "],\"usage\":");
            oa_usage(&b, g);
            pl_sb_puts(&b, "}\n\n");
        }
    }
    pl_sb_puts(&b, "data: [DONE]\n\n");
    srv_send_event(j, &b);
    pl_sb_free(&b);
}

/* The whole reply as one object. */
static void reply_object(srv_gen_ctx *j, pl_strbuf *b, const srv_gen_result *g) {
    const srv_request *r = j->r;
    if (r->kind == SRV_MESSAGES) {
        an_message(j, b, g, false);
        return;
    }
    if (r->kind == SRV_RESPONSES) {
        srv_responses_object(j, b, g);
        return;
    }
    bool chat = r->kind == SRV_CHAT;
    pl_sb_printf(b, "{\"id\":\"%s\",\"object\":\"%s\",\"created\":%lld,\"model\":", j->id,
                 chat ? "chat.completion" : "text_completion", j->created);
    quotes(b, j->model_id);
    pl_sb_puts(b, chat ? ",\"choices\":[{\"index\":0,\"message\":{\"role\":\"assistant\","
                         "\"content\":"
                       : ",\"choices\":[{\"index\":0,\"text\":");
    if (chat && j->n_calls && !j->text.len)
        pl_sb_puts(b, "null"); /* as OpenAI's: a reply of calls only has no content */
    else
        quote(b, j->text.s ? j->text.s : "", j->text.len);
    if (chat && j->reasoning.len) {
        pl_sb_puts(b, ",\"reasoning_content\":");
        quote(b, j->reasoning.s, j->reasoning.len);
    }
    if (chat && j->n_calls) {
        pl_sb_puts(b, ",\"tool_calls\":[");
        pl_sb_append(b, j->calls.s, j->calls.len);
        pl_sb_putc(b, ']');
    }
    pl_sb_puts(b, chat ? "},\"logprobs\":" : ",\"logprobs\":");
    lp_flush(j, b);
    pl_sb_printf(b, ",\"finish_reason\":\"%s\"}],\"usage\":", oa_finish(j, g->finish));
    oa_usage(b, g);
    pl_sb_puts(b, "}");
}

/* Set up j for r: ids, the reply parser, and (streaming) the head and first events. False
 * when out of memory (answered with a 500). */
static bool job_begin(srv_gen_ctx *j, srv_engine *e, const srv_request *r, const tp_opts *fmt,
                      const char *model_id, uint64_t id_no, long long created, const srv_out *o,
                      const srv_gen_result *g) {
    *j = (srv_gen_ctx){.e = e, .r = r, .o = o, .model_id = model_id, .created = created};
    snprintf(j->call_sfx, sizeof j->call_sfx, "%llx%06llx", j->created, (unsigned long long)id_no);
    snprintf(j->id, sizeof j->id, "%s%s",
             r->kind == SRV_MESSAGES    ? "msg_"
             : r->kind == SRV_CHAT      ? "chatcmpl-"
             : r->kind == SRV_RESPONSES ? "resp_"
                                        : "cmpl-",
             j->call_sfx);
    tp_opts none = {0};
    tp_sink sink = {on_text, on_reasoning, on_call, j};
    /* completions take the text as it comes */
    bool raw = r->kind == SRV_COMPLETION || !fmt;
    if (!(j->tp = tp_new(raw ? &none : fmt, &sink))) {
        answer_error(o, r, 500, "out of memory");
        return false;
    }
    if (r->stream) {
        o->head(o->ud, 200, true);
        if (r->kind == SRV_RESPONSES)
            srv_responses_start(j);
        else
            stream_start(j, g);
    }
    return true;
}

/* The reply is over (ok) or failed (err): what the parser holds goes out, then the end of
 * the stream or the whole object. */
static void job_end(srv_gen_ctx *j, const srv_gen_result *g, bool ok, const char *err) {
    if (ok && !tp_finish(j->tp) && !j->out_failed) {
        ok = false;
        err = "out of memory";
    }
    if (j->r->stream && j->r->kind == SRV_RESPONSES) {
        if (!j->out_failed) srv_responses_end(j, g, ok ? NULL : err);
    } else if (j->r->stream) {
        if (!j->out_failed) stream_end(j, g, ok ? NULL : err);
    } else if (!ok) {
        answer_error(j->o, j->r, 500, err);
    } else {
        pl_strbuf b = {0};
        if (j->text.failed || j->reasoning.failed || j->calls.failed) b.failed = true;
        reply_object(j, &b, g);
        answer(j->o, 200, &b);
    }
    tp_free(j->tp);
    pl_sb_free(&j->text), pl_sb_free(&j->reasoning), pl_sb_free(&j->calls);
    for (int i = 0; i < 4; i++) pl_sb_free(&j->lp[i]);
}

void srv_api_reply(const srv_request *r, const tp_opts *fmt, const char *model_id, uint64_t id_no,
                   long long created, const char *const *pieces, int n_pieces,
                   const srv_gen_result *g, const srv_out *o) {
    srv_gen_ctx j;
    if (!job_begin(&j, NULL, r, fmt, model_id, id_no, created, o, g)) return;
    bool ok = true;
    for (int i = 0; i < n_pieces && ok; i++) ok = on_model_text(&j, pieces[i], strlen(pieces[i]));
    job_end(&j, g, ok, "the client went away");
}

static void run_generation(srv_engine *e, const srv_request *r, const char *model_id,
                           uint64_t id_no, const srv_out *o) {
    char err[512];
    int32_t *ids = NULL;
    int64_t n = 0;
    tp_opts fmt;
    tf_call forced;
    if (!srv_engine_forced_call(e, r, &forced, err, sizeof err) ||
        !srv_engine_prompt(e, r, &ids, &n, &fmt, err, sizeof err)) {
        tf_call_free(&forced);
        answer_error(o, r, 400, err);
        return;
    }
    if (n >= srv_engine_n_ctx(e)) {
        snprintf(err, sizeof err,
                 "the prompt is %lld tokens, the context holds %lld (the server's --ctx)",
                 (long long)n, (long long)srv_engine_n_ctx(e));
        free(ids);
        tf_call_free(&forced);
        answer_error(o, r, 400, err);
        return;
    }
    srv_gen_result g = {.n_prompt = n};
    srv_gen_ctx j;
    if (!job_begin(&j, e, r, &fmt, model_id, id_no, (long long)time(NULL), o, &g)) {
        free(ids);
        tf_call_free(&forced);
        return;
    }
    srv_gen_io io = {.logprob = on_logprob, .emit = on_model_text, .ud = &j, .cancel = o->cancel};
    if (fmt.think && r->kind != SRV_COMPLETION) io.think = fmt.in_think ? 2 : 1;
    tf_call con = forced.schema ? forced : (tf_call){.schema = r->schema};
    bool ok = !j.out_failed && srv_engine_generate(e, r, &con, ids, n, &io, &g, err, sizeof err);
    free(ids);
    tf_call_free(&forced);
    static const char *const finish[] = {"end of turn", "length", "stop string", "cancelled"};
    static const char *const kind[] = {"chat", "completion", "messages", "", "", "", "responses"};
    if (ok) srv_metrics_generation(o->metrics, &g);
    char spec[64] = "";
    if (g.n_drafted)
        snprintf(spec, sizeof spec, ", %lld of %lld drafts accepted", (long long)g.n_accepted,
                 (long long)g.n_drafted);
    fprintf(stderr, "pooled serve: %s %s: %lld prompt ids, %lld generated%s, %d tool calls, %s\n",
            kind[r->kind], j.id, (long long)n, (long long)g.n_completion, spec, j.n_calls,
            ok ? finish[g.finish] : err);
    job_end(&j, &g, ok, err);
}

void srv_api_run(srv_engine *e, const srv_request *r, const char *model_id, uint64_t id_no,
                 const srv_out *o) {
    char err[512];
    pl_strbuf b = {0};
    int32_t *ids = NULL;
    int64_t n = 0;
    switch (r->kind) {
    case SRV_CHAT:
    case SRV_COMPLETION:
    case SRV_MESSAGES:
    case SRV_RESPONSES: run_generation(e, r, model_id, id_no, o); return;
    case SRV_COUNT_TOKENS:
        if (!srv_engine_prompt(e, r, &ids, &n, NULL, err, sizeof err)) break;
        pl_sb_printf(&b, "{\"input_tokens\":%lld}", (long long)n);
        free(ids);
        answer(o, 200, &b);
        return;
    case SRV_TOKENIZE: {
        char **pieces = NULL;
        bool ok = srv_engine_tokenize(e, r, &ids, &n, &pieces, err, sizeof err);
        if (ok) {
            pl_sb_puts(&b, "{\"tokens\":[");
            for (int64_t i = 0; i < n; i++) {
                if (i) pl_sb_putc(&b, ',');
                if (pieces) {
                    pl_sb_printf(&b, "{\"id\":%d,\"piece\":", ids[i]);
                    quotes(&b, pieces[i]);
                    pl_sb_putc(&b, '}');
                } else {
                    pl_sb_printf(&b, "%d", ids[i]);
                }
            }
            pl_sb_puts(&b, "]}");
        }
        for (int64_t i = 0; pieces && i < n; i++) free(pieces[i]);
        free(pieces);
        free(ids);
        if (!ok) break;
        answer(o, 200, &b);
        return;
    }
    case SRV_DETOKENIZE: {
        char *text = NULL;
        if (!srv_engine_detokenize(e, r->tokens, r->n_tokens, &text, err, sizeof err)) break;
        pl_sb_puts(&b, "{\"content\":");
        quotes(&b, text);
        pl_sb_puts(&b, "}");
        free(text);
        answer(o, 200, &b);
        return;
    }
    }
    answer_error(o, r, 400, err);
}
