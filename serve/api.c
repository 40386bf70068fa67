/* api.c - requests answered in the shapes of OpenAI's and Anthropic's APIs (and llama.cpp
 * server's tokenize / detokenize), streamed as server-sent events or in one object. */
#include "api.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/json.h"

static void quote(pl_strbuf *b, const char *s, size_t n) {
    pl_json_quote(b, s, n, false);
}
static void quotes(pl_strbuf *b, const char *s) {
    quote(b, s, strlen(s));
}

static const char *error_type(bool anthropic, int status) {
    switch (status) {
    case 401: return "authentication_error";
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

/* One generation's context: the reply so far (non-streaming) or the stream's writer. */
typedef struct {
    const srv_request *r;
    const srv_out *o;
    const char *model_id;
    char id[48];
    long long created;
    pl_strbuf text;  /* non-streaming: the reply */
    bool out_failed; /* streaming: the client is gone */
} job_ctx;

/* Send one event and empty b. */
static bool send_event(job_ctx *j, pl_strbuf *b) {
    if (!j->out_failed && (b->failed || !j->o->write(j->o->ud, b->s, b->len))) j->out_failed = true;
    b->len = 0;
    if (b->s) b->s[0] = 0;
    return !j->out_failed;
}

/* OpenAI: one chunk's head up to the choices' array contents. */
static void oa_chunk_head(job_ctx *j, pl_strbuf *b) {
    bool chat = j->r->kind == SRV_CHAT;
    pl_sb_printf(b, "data: {\"id\":\"%s\",\"object\":\"%s\",\"created\":%lld,\"model\":", j->id,
                 chat ? "chat.completion.chunk" : "text_completion", j->created);
    quotes(b, j->model_id);
    pl_sb_puts(b, ",\"choices\":[");
}

static void oa_chunk_tail(job_ctx *j, pl_strbuf *b) {
    pl_sb_printf(b, "]%s}\n\n", j->r->include_usage ? ",\"usage\":null" : "");
}

/* The settled text of the reply: kept, or sent as one delta. */
static bool on_text(void *ud, const char *s, size_t n) {
    job_ctx *j = ud;
    if (!j->r->stream) {
        pl_sb_append(&j->text, s, n);
        return !j->text.failed;
    }
    pl_strbuf b = {0};
    if (j->r->kind == SRV_MESSAGES) {
        pl_sb_puts(&b, "event: content_block_delta\ndata: {\"type\":\"content_block_delta\","
                       "\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":");
        quote(&b, s, n);
        pl_sb_puts(&b, "}}\n\n");
    } else {
        oa_chunk_head(j, &b);
        if (j->r->kind == SRV_CHAT) {
            pl_sb_puts(&b, "{\"index\":0,\"delta\":{\"content\":");
            quote(&b, s, n);
            pl_sb_puts(&b, "},\"logprobs\":null,\"finish_reason\":null}");
        } else {
            pl_sb_puts(&b, "{\"index\":0,\"text\":");
            quote(&b, s, n);
            pl_sb_puts(&b, ",\"logprobs\":null,\"finish_reason\":null}");
        }
        oa_chunk_tail(j, &b);
    }
    bool ok = send_event(j, &b);
    pl_sb_free(&b);
    return ok;
}

static const char *oa_finish(srv_finish f) {
    return f == SRV_FINISH_LENGTH ? "length" : "stop";
}
static const char *an_finish(srv_finish f) {
    return f == SRV_FINISH_LENGTH ? "max_tokens"
           : f == SRV_FINISH_STOP ? "stop_sequence"
                                  : "end_turn";
}

static void oa_usage(pl_strbuf *b, const srv_gen_result *g) {
    pl_sb_printf(b, "{\"prompt_tokens\":%lld,\"completion_tokens\":%lld,\"total_tokens\":%lld}",
                 (long long)g->n_prompt, (long long)g->n_completion,
                 (long long)(g->n_prompt + g->n_completion));
}

static void an_stop_sequence(pl_strbuf *b, const srv_request *r, const srv_gen_result *g) {
    pl_sb_puts(b, ",\"stop_sequence\":");
    if (g->finish == SRV_FINISH_STOP)
        quotes(b, r->stop[g->stop_index]);
    else
        pl_sb_puts(b, "null");
}

/* Anthropic's message object (text "" while streaming starts). */
static void an_message(job_ctx *j, pl_strbuf *b, const srv_gen_result *g, bool start) {
    pl_sb_printf(b, "{\"id\":\"%s\",\"type\":\"message\",\"role\":\"assistant\",\"model\":", j->id);
    quotes(b, j->model_id);
    if (start) {
        pl_sb_printf(b,
                     ",\"content\":[],\"stop_reason\":null,\"stop_sequence\":null,"
                     "\"usage\":{\"input_tokens\":%lld,\"output_tokens\":0}}",
                     (long long)g->n_prompt);
        return;
    }
    pl_sb_puts(b, ",\"content\":[{\"type\":\"text\",\"text\":");
    quote(b, j->text.s ? j->text.s : "", j->text.len);
    pl_sb_printf(b, "}],\"stop_reason\":\"%s\"", an_finish(g->finish));
    an_stop_sequence(b, j->r, g);
    pl_sb_printf(b, ",\"usage\":{\"input_tokens\":%lld,\"output_tokens\":%lld}}",
                 (long long)g->n_prompt, (long long)g->n_completion);
}

static void stream_start(job_ctx *j, const srv_gen_result *g) {
    pl_strbuf b = {0};
    if (j->r->kind == SRV_MESSAGES) {
        pl_sb_puts(&b, "event: message_start\ndata: {\"type\":\"message_start\",\"message\":");
        an_message(j, &b, g, true);
        pl_sb_puts(&b, "}\n\nevent: content_block_start\ndata: {\"type\":\"content_block_start\","
                       "\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n"
                       "event: ping\ndata: {\"type\":\"ping\"}\n\n");
    } else if (j->r->kind == SRV_CHAT) {
        oa_chunk_head(j, &b);
        pl_sb_puts(&b, "{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"},"
                       "\"logprobs\":null,\"finish_reason\":null}");
        oa_chunk_tail(j, &b);
    }
    send_event(j, &b);
    pl_sb_free(&b);
}

static void stream_end(job_ctx *j, const srv_gen_result *g, const char *failure) {
    pl_strbuf b = {0};
    const srv_request *r = j->r;
    if (r->kind == SRV_MESSAGES) {
        if (failure) {
            pl_sb_puts(&b, "event: error\ndata: ");
            srv_api_error(&b, true, 500, failure);
            pl_sb_puts(&b, "\n\n");
        } else {
            pl_sb_printf(&b,
                         "event: content_block_stop\ndata: {\"type\":\"content_block_stop\","
                         "\"index\":0}\n\nevent: message_delta\ndata: {\"type\":"
                         "\"message_delta\",\"delta\":{\"stop_reason\":\"%s\"",
                         an_finish(g->finish));
            an_stop_sequence(&b, r, g);
            pl_sb_printf(&b,
                         "},\"usage\":{\"output_tokens\":%lld}}\n\nevent: message_stop\n"
                         "data: {\"type\":\"message_stop\"}\n\n",
                         (long long)g->n_completion);
        }
        send_event(j, &b);
        pl_sb_free(&b);
        return;
    }
    if (failure) {
        pl_sb_puts(&b, "data: ");
        srv_api_error(&b, false, 500, failure);
        pl_sb_puts(&b, "\n\n");
    } else {
        oa_chunk_head(j, &b);
        if (r->kind == SRV_CHAT)
            pl_sb_printf(&b,
                         "{\"index\":0,\"delta\":{},\"logprobs\":null,\"finish_reason\":\"%s\"}",
                         oa_finish(g->finish));
        else
            pl_sb_printf(&b,
                         "{\"index\":0,\"text\":\"\",\"logprobs\":null,\"finish_reason\":\"%s\"}",
                         oa_finish(g->finish));
        oa_chunk_tail(j, &b);
        if (r->include_usage) {
            oa_chunk_head(j, &b);
            pl_sb_puts(&b, "],\"usage\":");
            oa_usage(&b, g);
            pl_sb_puts(&b, "}\n\n");
        }
    }
    pl_sb_puts(&b, "data: [DONE]\n\n");
    send_event(j, &b);
    pl_sb_free(&b);
}

/* The whole reply as one object. */
static void reply_object(job_ctx *j, pl_strbuf *b, const srv_gen_result *g) {
    const srv_request *r = j->r;
    if (r->kind == SRV_MESSAGES) {
        an_message(j, b, g, false);
        return;
    }
    bool chat = r->kind == SRV_CHAT;
    pl_sb_printf(b, "{\"id\":\"%s\",\"object\":\"%s\",\"created\":%lld,\"model\":", j->id,
                 chat ? "chat.completion" : "text_completion", j->created);
    quotes(b, j->model_id);
    pl_sb_puts(b, chat ? ",\"choices\":[{\"index\":0,\"message\":{\"role\":\"assistant\","
                         "\"content\":"
                       : ",\"choices\":[{\"index\":0,\"text\":");
    quote(b, j->text.s ? j->text.s : "", j->text.len);
    pl_sb_printf(b, "%s,\"logprobs\":null,\"finish_reason\":\"%s\"}],\"usage\":", chat ? "}" : "",
                 oa_finish(g->finish));
    oa_usage(b, g);
    pl_sb_puts(b, "}");
}

static void run_generation(srv_engine *e, const srv_request *r, const char *model_id,
                           uint64_t id_no, const srv_out *o) {
    char err[512];
    int32_t *ids = NULL;
    int64_t n = 0;
    if (!srv_engine_prompt(e, r, &ids, &n, NULL, err, sizeof err)) {
        answer_error(o, r, 400, err);
        return;
    }
    if (n >= srv_engine_n_ctx(e)) {
        snprintf(err, sizeof err,
                 "the prompt is %lld tokens, the context holds %lld (the server's --ctx)",
                 (long long)n, (long long)srv_engine_n_ctx(e));
        free(ids);
        answer_error(o, r, 400, err);
        return;
    }
    job_ctx j = {.r = r, .o = o, .model_id = model_id, .created = (long long)time(NULL)};
    snprintf(j.id, sizeof j.id, "%s%llx%06llx",
             r->kind == SRV_MESSAGES ? "msg_"
             : r->kind == SRV_CHAT   ? "chatcmpl-"
                                     : "cmpl-",
             j.created, (unsigned long long)id_no);
    srv_gen_result g = {.n_prompt = n};
    if (r->stream) {
        o->head(o->ud, 200, true);
        stream_start(&j, &g);
    }
    srv_gen_io io = {.emit = on_text, .ud = &j, .cancel = o->cancel};
    bool ok = !j.out_failed && srv_engine_generate(e, r, ids, n, &io, &g, err, sizeof err);
    free(ids);
    static const char *const finish[] = {"end of turn", "length", "stop string", "cancelled"};
    static const char *const kind[] = {"chat", "completion", "messages"};
    fprintf(stderr, "pooled serve: %s %s: %lld prompt ids, %lld generated, %s\n", kind[r->kind],
            j.id, (long long)n, (long long)g.n_completion, ok ? finish[g.finish] : err);
    if (r->stream) {
        if (!j.out_failed) stream_end(&j, &g, ok ? NULL : err);
    } else if (!ok) {
        answer_error(o, r, 500, err);
    } else {
        pl_strbuf b = {0};
        reply_object(&j, &b, &g);
        answer(o, 200, &b);
    }
    pl_sb_free(&j.text);
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
    case SRV_MESSAGES: run_generation(e, r, model_id, id_no, o); return;
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
