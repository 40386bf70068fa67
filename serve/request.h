/* request.h - an HTTP API request body (JSON) checked and turned into one struct, the same
 * for every route that runs the model: OpenAI's chat completions and completions,
 * Anthropic's messages and count_tokens, llama.cpp server's tokenize and detokenize, and
 * OpenAI's responses (input and instructions taken as chat messages).
 * Pure (no model, no network): the request fuzzer (tests/fuzz/serve_request_fuzz.c) calls
 * it on arbitrary bytes. Every refusal is one line for the API's error object (status 400). */
#ifndef PL_SERVE_REQUEST_H
#define PL_SERVE_REQUEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SRV_MAX_STOPS        16      /* stop strings in one request */
#define SRV_MAX_STOP_LEN     256     /* bytes in one stop string */
#define SRV_MAX_TOKENS_IN    1000000 /* ids in one detokenize request */
#define SRV_MAX_TOP_LOGPROBS 20      /* top_logprobs (chat) / logprobs (completions) at most */
#define SRV_MAX_TOOLS        128     /* tools in one request */
#define SRV_MAX_TOOL_NAME    64      /* bytes of a tool's name: letters, digits, _ - . */
#define SRV_MAX_CALLS_IN     128     /* tool calls in one assistant message */

typedef enum {
    SRV_CHAT,         /* POST /v1/chat/completions */
    SRV_COMPLETION,   /* POST /v1/completions */
    SRV_MESSAGES,     /* POST /v1/messages */
    SRV_COUNT_TOKENS, /* POST /v1/messages/count_tokens */
    SRV_TOKENIZE,     /* POST /tokenize */
    SRV_DETOKENIZE,   /* POST /detokenize */
    SRV_RESPONSES,    /* POST /v1/responses (OpenAI's Responses API: text, function calls) */
} srv_kind;

typedef struct {
    char *role;    /* system, user, assistant, tool (developer is taken as system) */
    char *content; /* the text blocks joined */
    /* as the chat template reads them (Hugging Face's shapes), NULL when absent:
     * assistant: tool_calls, a JSON array of {"id", "type": "function", "function": {"name",
     * "arguments": {object}}}, and reasoning_content; tool: tool_call_id */
    char *tool_calls, *reasoning, *tool_call_id;
} srv_msg;

typedef enum {
    SRV_TOOLS_AUTO,     /* OpenAI auto, Anthropic auto (the default with tools) */
    SRV_TOOLS_NONE,     /* none: tools not shown to the model, no calls parsed */
    SRV_TOOLS_REQUIRED, /* OpenAI required, Anthropic any */
    SRV_TOOLS_NAMED,    /* one function by name (tool_name) */
} srv_tool_choice;

typedef struct {
    srv_kind kind;
    bool stream, include_usage;
    srv_msg *msgs; /* chat, messages, count_tokens (the system message first) */
    int n_msgs;
    char *prompt;       /* completion; tokenize's content */
    int32_t *tokens;    /* detokenize */
    int64_t n_tokens;   /*   (checked against the vocabulary later) */
    int64_t max_tokens; /* -1: not given */
    double temperature, top_p, presence_penalty, frequency_penalty;
    bool has_seed;
    uint64_t seed;
    char *stop[SRV_MAX_STOPS];
    int n_stop;
    bool add_special, parse_special, with_pieces; /* tokenize */
    int logprobs; /* -1: none; else the alternatives per id (top_logprobs, 0 to 20) */
    /* chat's response_format / responses' text.format json_object / json_schema: the JSON
     * Schema text (pooled_sample_opts.json_schema; json_object's {"type":"object"}),
     * malloc'd; NULL: text */
    char *schema;
    char *text_format; /* responses: text.format as sent (compact JSON), NULL: none */
    /* the client turned the model's thinking off (the template's enable_thinking false):
     * chat's chat_template_kwargs.enable_thinking false or reasoning_effort none / minimal,
     * responses' reasoning.effort none / minimal, Anthropic's thinking {type: disabled} */
    bool no_think;
    /* chat, messages, count_tokens, responses: a JSON array of {"type": "function",
     * "function": {"name", "description", "parameters"}} (Anthropic's input_schema as
     * parameters, the Responses API's flat tools moved under "function"), NULL: none */
    char *tools;
    int n_tools;
    srv_tool_choice tool_choice;
    char tool_name[SRV_MAX_TOOL_NAME + 1]; /* SRV_TOOLS_NAMED */
} srv_request;

/* Parse body[0..len) for a route of this kind into *r (freed with srv_request_free, also
 * after a failure). Returns true, or false with the reason in err[0..cap). */
bool srv_request_parse(srv_kind kind, const char *body, size_t len, srv_request *r, char *err,
                       size_t cap);
void srv_request_free(srv_request *r);

#endif
