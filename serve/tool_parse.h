/* tool_parse.h - a model's reply, streamed in pieces of text, split into plain text,
 * reasoning (<think>...</think>) and tool calls in the model's own format: Qwen's
 * <tool_call>{"name": ..., "arguments": {...}}</tool_call> (or Qwen3.5's
 * <tool_call><function=NAME><parameter=KEY>VALUE</parameter></function></tool_call>), and
 * Llama 3's reply that is one JSON object {"name": ..., "parameters": {...}}.
 * Pure (no model, no network): fuzzed by tests/fuzz/tool_parse_fuzz.c. Nothing is lost: a
 * tag that is not followed by a complete, well-formed call is given back as text, and the
 * pieces' split never changes the result. */
#ifndef PL_SERVE_TOOL_PARSE_H
#define PL_SERVE_TOOL_PARSE_H

#include <stdbool.h>
#include <stddef.h>

#define TP_MAX_CALL_BYTES (256 * 1024) /* one call's text; a longer one is text */
#define TP_MAX_CALLS      128          /* calls in one reply; later ones are text */
#define TP_MAX_NAME       256          /* bytes of a called function's name */

typedef enum {
    TP_CALLS_NONE,   /* no tool calls parsed (no tools in the request, or tool_choice none) */
    TP_CALLS_QWEN,   /* <tool_call> blocks (Qwen 2.5 / 3 JSON, Qwen3.5 XML) */
    TP_CALLS_LLAMA3, /* a reply that is one JSON object with name and parameters */
} tp_calls;

typedef struct {
    /* each returns false to stop (the client is gone); text and reasoning may come in any
     * number of pieces, a call comes whole: its name and its arguments as a compact JSON
     * object */
    bool (*text)(void *ud, const char *s, size_t n);
    bool (*reasoning)(void *ud, const char *s, size_t n);
    bool (*call)(void *ud, const char *name, const char *args, size_t args_len);
    void *ud;
} tp_sink;

typedef struct {
    tp_calls calls;
    bool think;    /* split <think>...</think> off as reasoning */
    bool in_think; /* the prompt ended inside <think> (Qwen3.5's generation prompt) */
} tp_opts;

typedef struct tp_parser tp_parser;

/* NULL when out of memory. */
tp_parser *tp_new(const tp_opts *o, const tp_sink *sink);
/* Feed the next piece of the reply. False once a sink returned false or memory ran out. */
bool tp_push(tp_parser *p, const char *s, size_t n);
/* The reply is over: everything still held goes out (an unfinished call as text). */
bool tp_finish(tp_parser *p);
int tp_n_calls(const tp_parser *p);
void tp_free(tp_parser *p);

/* Which generated ids are reasoning (usage's reasoning_tokens): those that start inside
 * <think>...</think> or write one of the tags (a tag split over several ids counts from the
 * id that ends it). On the text, not on tag ids, so every vocabulary counts alike. in: set
 * when the prompt ended inside <think>. */
typedef struct {
    bool in; /* inside <think>...</think> */
    int at;  /* bytes of the next tag matched so far */
} tp_think;
/* Feed one id's text (NUL-terminated); true when the id is reasoning. */
bool tp_think_id(tp_think *t, const char *text);

/* A call's text (what is between <tool_call> and </tool_call>, or Llama 3's whole reply)
 * as its name and compact JSON arguments (malloc'd). False when it is not a well-formed
 * call. */
bool tp_parse_call(const char *s, size_t n, char **name, char **args, size_t *args_len);

#endif
