/* pooled.h - the public C API of libpooled: open a GGUF model, tokenize, render chat
 * templates, and generate text in sessions that keep their cache from one call to the next.
 *
 * This is the library's one public header; it includes only standard headers and compiles
 * as C11 and as C++.
 *
 * Conventions
 * - Functions that can fail return int: 0 (POOLED_OK) on success, else one of the
 *   POOLED_ERR_* codes, and pooled_last_error() then holds a one-line reason. The message
 *   is per thread (each thread sees only its own errors) and stays valid until that
 *   thread's next failing call. The library never exits, aborts or prints.
 * - Memory the library returns (ids, text) is malloc'd; free it with pooled_free().
 * - Options: every option struct starts with `size`, which the caller sets to
 *   sizeof(the struct) (the pooled_*_default() functions do). A library built with a
 *   larger struct (new fields at the end) reads only the first `size` bytes and takes the
 *   defaults for the rest, so programs built against an older header keep working within
 *   one major version. A NULL options pointer means the defaults.
 * - Threads: the library reads no environment variable and has no global state besides
 *   the per-thread error. A model may be shared by several threads: tokenizing, rendering
 *   and info are safe at any time; generations in different sessions of one model run at
 *   once from their own threads, the model's passes one at a time in turns (the model's
 *   turn goes to the next generation in line after every id, so they advance id by id),
 *   and with n_parallel > 1 the decode steps of the generations that are decoding run as
 *   one batched pass. What the sessions share is the model's weights (read-only after
 *   loading) and its backend (the CPU's thread pool or the GPU's queue, which is not
 *   thread-safe: the turn keeps every pass and buffer call on it to one thread at a time);
 *   each session owns its KV cache. A session is used by one thread at a time, except
 *   pooled_session_cancel, callable from any thread.
 *
 * Versions: POOLED_VERSION_* are those of this header, pooled_version() that of the library
 * linked at run time. Within one major version the ABI only grows. */
#ifndef POOLED_H
#define POOLED_H

#include <stddef.h>
#include <stdint.h>

#define POOLED_VERSION_MAJOR 0
#define POOLED_VERSION_MINOR 4
#define POOLED_VERSION_PATCH 0

#if defined(_WIN32)
#define POOLED_API
#elif defined(__GNUC__) || defined(__clang__)
#define POOLED_API __attribute__((visibility("default")))
#else
#define POOLED_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------ errors, versions */

enum {
    POOLED_OK = 0,
    POOLED_ERR = 1,        /* a failure: see pooled_last_error() */
    POOLED_ERR_IO = 2,     /* a file could not be opened, read or mapped */
    POOLED_ERR_FORMAT = 3, /* a malformed, truncated or unsupported model file */
    POOLED_ERR_NOMEM = 4,  /* out of memory */
    POOLED_ERR_ARG = 5     /* an invalid argument (NULL handle, bad option, id out of range) */
};

/* The last failure's reason on the calling thread, "" if none. Never NULL. */
POOLED_API const char *pooled_last_error(void);

/* The library's version, "MAJOR.MINOR.PATCH" (static storage); *major, *minor, *patch
 * (each may be NULL) get its parts. */
POOLED_API const char *pooled_version(int *major, int *minor, int *patch);

/* Free memory the library returned (NULL is fine). */
POOLED_API void pooled_free(void *p);

/* ------------------------------------------------------------------ models */

typedef struct pooled_model pooled_model;

enum { POOLED_KV_F16 = 0, POOLED_KV_F32 = 1, POOLED_KV_Q8 = 2 };

#define POOLED_MAX_PARALLEL 64
enum { POOLED_ACT_Q8 = 0, POOLED_ACT_F32 = 1 };

typedef struct {
    size_t size;                /* sizeof(pooled_model_opts) */
    const char *backend;        /* "auto" (a hardware GPU when usable, else the CPU), "cpu",
                                   "webgpu" (never falls back); NULL: "auto" */
    int n_threads;              /* CPU threads, 0: one per core */
    int n_ctx;                  /* context of the model's sessions in tokens; 0: the model's
                                   training context, at most 4096 */
    int kv_type;                /* POOLED_KV_F16 (default), POOLED_KV_F32 or POOLED_KV_Q8 (int8,
                                   an f16 scale per 32 values) */
    int act_type;               /* POOLED_ACT_Q8 (default: Q4_0/Q8_0 matmuls quantise their
                                   activations to Q8_0 blocks, and on the CPU Q4_1/Q5_0/Q5_1/
                                   IQ4_NL/IQ4_XS ones too, Q4_K/Q5_K/Q6_K ones per 256
                                   values, as llama.cpp) or POOLED_ACT_F32
                                   (exact) */
    const char *dawn_lib;       /* the WebGPU library (libwebgpu_wrapper.so); NULL: looked for in
                                   node_modules/ of the current folder or next to the program */
    const char *gpu_tune_cache; /* folder keeping the GPU's tuned kernel shapes, created
                                   when missing; NULL: none (each open tunes afresh) */
    const char *gpu_profile;    /* a per-kernel profile of one decode step is appended to
                                   this file; NULL: off */
    int cpu_weights;            /* where the CPU backend reads weights from: 0 (auto): a copy
                                   in the process's own memory (huge pages where the system
                                   allows) when they take under half of the available
                                   memory, else the mapped file; 1: always the copy; -1:
                                   always the mapped file (no second copy: a model larger
                                   than memory pages in and out). The copy decodes up to
                                   ~1.4x faster on one thread and costs the load time of
                                   copying. Other backends ignore it. */
    /* since 0.2 */
    /* 1: load only the vocabulary and the chat template (no weights, no backend; backend and
     * the other options are ignored): tokens, chat rendering and info work at once on any
     * file size; pooled_session_new fails */
    int vocab_only;
    /* sessions whose generations, running at once from their own threads, share each decode
     * step in one batched pass (continuous batching: the weights read once for all of them,
     * each session's ids those it gets alone); at most this many sessions exist at a time
     * (pooled_session_new fails past it), each cache a slot of one batch. 0 or 1: sessions
     * without a limit, each generation's steps its own. At most POOLED_MAX_PARALLEL. */
    int n_parallel;
    /* called while the weights load, with the bytes prepared so far and in all (NULL: none);
     * from the opening thread, before pooled_model_open returns */
    void (*progress)(void *user, uint64_t done, uint64_t total);
    void *progress_user;
    /* since 0.3 */
    /* the GPU backend's tuning switches, for experiments: "NAME=VALUE" items separated by
     * ';' (NULL or "": the tuned defaults), the names and values of the pooled command's
     * POOLED_GPU_* variables (README) in lower case without the prefix, e.g.
     * "fuse=0;mc=4,16". An unknown name fails the open, a bad value the GPU backend's. */
    const char *gpu_options;
    /* the speculative decoding the sessions are sized for (pooled_sample_opts.spec):
     * POOLED_SPEC_LOOKUP (default: a verify pass of up to 16 columns kept), POOLED_SPEC_OFF
     * (none: the least memory, every generation decodes plainly), POOLED_SPEC_MTP (also the
     * state of the model's own draft layer, its MTP block; fails for a model without one)
     * or POOLED_SPEC_AUTO (MTP's where the model has the block, else lookup's) */
    int spec;
    /* >= 1: the layers run as a chain of this many stages, each over its own part of the
     * model (an equal share of the layers), the hidden state handed from one to the next
     * as a room hands it between machines: the same ids as one stage (for tests of the
     * chain). 0: one. n_parallel then gives no batched steps. At most 63. */
    int n_stages;
    int chain_frame; /* with stages: most columns of a prompt's frame, 1 to 4096 (0: 512) */
    int n_batch;     /* most prompt ids one pass of the model runs (a longer prompt goes in
                        several); 0: the model's default (512), at most n_ctx */
    /* with stages, on a backend that records its work (webgpu): while the last stage works
     * on a greedy token, the next pick is recorded and made ready to run when the column
     * returns (the same ids). 0: auto (on), -1: off (to measure what it saves) */
    int chain_prepare;
} pooled_model_opts;

/* The defaults, size set. */
POOLED_API pooled_model_opts pooled_model_opts_default(void);

/* Open the GGUF at path and load it (weights mapped, the tokenizer built, the backend
 * chosen). The strings in o are copied. *out gets the model (NULL on failure); release it
 * with pooled_model_close. Fails for a missing, damaged or unsupported file (the reason
 * names the path), a bad option, a backend that cannot open (the reason starts "backend
 * NAME: ", the file is not named). */
POOLED_API int pooled_model_open(const char *path, const pooled_model_opts *o, pooled_model **out);

/* Release the model. Its sessions must be freed first. NULL is fine. */
POOLED_API void pooled_model_close(pooled_model *m);

typedef struct {
    size_t size;       /* sizeof(pooled_model_info), set by the caller */
    char arch[32];     /* general.architecture: "llama", "qwen3", ... */
    char name[64];     /* general.name, or "" */
    char backend[160]; /* what runs it: "cpu, 8 threads", "webgpu, <adapter>" */
    int n_ctx_train;   /* the context the model was trained with */
    int n_ctx;         /* the context its sessions get */
    int n_vocab;
    int n_embd;
    int n_layer;
    int64_t n_params;
    int32_t bos; /* -1: none */
    int32_t eos; /* -1: none */
    /* since 0.3 */
    uint64_t weight_bytes; /* bytes of all weight tensors in the file */
    char weight_type[16];  /* the format holding most weight values ("q4_0", "f16") */
    int n_expert;          /* experts of a mixture-of-experts layer (0: dense) */
    int n_expert_used;     /* of them, active per token */
    int kv_type;           /* the sessions' cache: POOLED_KV_* */
    char note[192];        /* the backend's remark on how it was chosen ("auto: no usable
                              GPU (...), using the CPU"), or "" */
    char nonfinite[64];    /* the first weight tensor holding NaN or Inf values, or "": the
                              output of a model with one is meaningless */
    /* since 0.4 */
    char backend_name[16]; /* "cpu" or "webgpu" ("" for vocab_only) */
    uint64_t decode_bytes; /* weight bytes one decoded token reads (a mixture of experts:
                              the experts it runs; one embedding row) */
    uint64_t loaded_bytes; /* weight bytes the backend holds in memory */
    int spec;              /* what the sessions are sized for: POOLED_SPEC_OFF, _LOOKUP or
                              _MTP (AUTO as it was resolved) */
} pooled_model_info;

/* Fill *info: its size field, set by the caller, says how many bytes may be written; on
 * return it says how many were (less when the library is older than the caller's header:
 * the rest is left as it was). pooled_result works the same way. */
POOLED_API int pooled_model_get_info(const pooled_model *m, pooled_model_info *info);

/* The model's counters so far (pooled_model_info's size rule). Since 0.3. */
typedef struct {
    size_t size;                /* sizeof(pooled_model_stats), set by the caller */
    int batched;                /* 1: the decode steps of sessions generating at once run
                                   as batched passes (n_parallel > 1, a model whose family
                                   batches: the llama family), else 0 */
    uint64_t n_batched_steps;   /* batched passes run */
    uint64_t n_batched_columns; /* the ids they produced, one a session and pass */
} pooled_model_stats;

POOLED_API int pooled_model_get_stats(const pooled_model *m, pooled_model_stats *stats);

/* 1 when id ends a generation (EOS, <|im_end|>, <|eot_id|>, ...), else 0. */
POOLED_API int pooled_token_is_eog(const pooled_model *m, int32_t id);

/* ------------------------------------------------------------------ tokens and text */

/* Tokenize len bytes of text. add_special: add BOS/EOS as the vocabulary asks;
 * parse_special: special tokens written in the text ("<|im_start|>") become their ids.
 * *ids (pooled_free) and *n_ids get the result. */
POOLED_API int pooled_tokenize(const pooled_model *m, const char *text, size_t len, int add_special,
                               int parse_special, int32_t **ids, size_t *n_ids);

/* Ids back to text (pieces joined; special tokens only with show_special). *text is
 * NUL-terminated (pooled_free); *len (may be NULL) gets its byte count. Fails for an id
 * outside the vocabulary. */
POOLED_API int pooled_detokenize(const pooled_model *m, const int32_t *ids, size_t n_ids,
                                 int show_special, char **text, size_t *len);

/* The text of one token, as pooled_detokenize of that id alone but without removing a
 * leading space. */
POOLED_API int pooled_token_piece(const pooled_model *m, int32_t id, int show_special, char **text,
                                  size_t *len);

/* ------------------------------------------------------------------ chat templates */

typedef struct {
    const char *role; /* "system", "user", "assistant", "tool" */
    const char *content;
} pooled_message;

typedef struct {
    size_t size;               /* sizeof(pooled_chat_opts) */
    int add_generation_prompt; /* end with the assistant's turn opening (default 1) */
    int no_think;              /* Qwen3's enable_thinking=False (default 0) */
    /* since 0.2 */
    const char *template_source; /* a Jinja chat template used instead of the model's (its
                                    bos_token / eos_token are the model's); NULL: the
                                    model's */
} pooled_chat_opts;

POOLED_API pooled_chat_opts pooled_chat_opts_default(void);

/* Render msgs[0..n) with the model's chat template (its tokenizer.chat_template as Jinja,
 * or a known format). *text: NUL-terminated, pooled_free. */
POOLED_API int pooled_chat_render(const pooled_model *m, const pooled_message *msgs, size_t n,
                                  const pooled_chat_opts *o, char **text);

/* The same conversation as the ids the model reads (special tokens parsed, BOS added when
 * the vocabulary wants one and the template did not write it): what to pass to
 * pooled_generate. *ids: pooled_free. */
POOLED_API int pooled_chat_tokenize(const pooled_model *m, const pooled_message *msgs, size_t n,
                                    const pooled_chat_opts *o, int32_t **ids, size_t *n_ids);

/* The model's chat template (tokenizer.chat_template, Jinja source), or NULL when the file
 * has none. Valid while the model is open. Since 0.2. */
POOLED_API const char *pooled_chat_template(const pooled_model *m);

/* The same for a conversation given as JSON text, in Hugging Face's shapes, for what
 * pooled_message cannot say: messages_json is an array of {"role", "content"} objects (or
 * an object {"messages": [...], "tools": [...]}, its tools used when tools_json is NULL)
 * (content a string, null, or a list of {"type": "text", "text"} parts) with any other
 * fields the template reads: an assistant's "tool_calls" ([{"id", "type": "function",
 * "function": {"name", "arguments": {...}}}]) and "reasoning_content", a tool message's
 * "tool_call_id". tools_json (NULL: none) is an array of tool schemas ({"type":
 * "function", "function": {"name", "description", "parameters"}}), shown by templates that
 * take tools. Fails for JSON that does not parse or has another shape. */
POOLED_API int pooled_chat_render_json(const pooled_model *m, const char *messages_json,
                                       const char *tools_json, const pooled_chat_opts *o,
                                       char **text);
POOLED_API int pooled_chat_tokenize_json(const pooled_model *m, const char *messages_json,
                                         const char *tools_json, const pooled_chat_opts *o,
                                         int32_t **ids, size_t *n_ids);

/* ------------------------------------------------------------------ sessions, generation */

typedef struct pooled_session pooled_session;

/* A conversation's state: the cache of the ids it has seen. Each pooled_generate reuses
 * the longest prefix its prompt shares with that cache and runs only the rest, so a chat
 * passes the whole conversation every turn at the cost of the new part only. */
POOLED_API int pooled_session_new(pooled_model *m, pooled_session **out);
POOLED_API void pooled_session_free(pooled_session *s); /* NULL is fine */
/* Forget the cache (the next call runs its whole prompt). */
POOLED_API void pooled_session_reset(pooled_session *s);
/* The ids the session's cache holds (the last conversation, as far as it was run): *ids
 * (pooled_free; NULL when empty) and *n_ids. A caller with several sessions gives a new
 * conversation to the one sharing the longest prefix. Since 0.2. */
POOLED_API int pooled_session_ids(const pooled_session *s, int32_t **ids, size_t *n_ids);

/* Ask the generation running in s (or, if none runs, the next one) to stop after its
 * current token: pooled_generate then returns 0 with stop reason POOLED_STOP_CANCELLED.
 * Callable from any thread (also from a signal handler: it only stores to an atomic flag).
 * The flag is cleared when pooled_generate returns. The prompt's own pass is not
 * interrupted. */
POOLED_API void pooled_session_cancel(pooled_session *s);

/* The model's passes one at a time, for a program that drives decoding itself (its own
 * sampler or drafter, scoring a text, a benchmark). Since 0.4. Each takes the model's turn
 * as pooled_generate does, and returns when the device has done the work. */

/* Run ids[0..n) after the ids the session holds (in passes of n_batch), leaving the
 * logits after the last one ready. Fails when they do not fit in the context. */
POOLED_API int pooled_session_eval(pooled_session *s, const int32_t *ids, size_t n);
/* The logits after the session's last id (out: room for n_vocab floats, n of them) as the
 * last pooled_session_eval or pooled_sessions_step left them. */
POOLED_API int pooled_session_logits(pooled_session *s, float *out, size_t n);
/* Run ids[0..n) after the ids the session holds in ONE pass (n from 1 to 16: what a
 * speculative verify pass checks; the model must be opened with pooled_model_opts.spec
 * other than OFF for more than 1) and give in next[j] the greedy id after ids[j] (the
 * largest logit's, the lowest id on ties: what a plain step picks there). The session then
 * holds all n (pooled_session_truncate drops rejected drafts); its logits are not left
 * ready. */
POOLED_API int pooled_session_verify(pooled_session *s, const int32_t *ids, size_t n,
                                     int32_t *next);
/* Keep only the first n ids the session holds (a model whose recurrent state cannot go
 * back there runs them again). */
POOLED_API int pooled_session_truncate(pooled_session *s, size_t n);
/* Append ids[j] to sessions[j] for j in [0, n) (1 to 256) and give in next[j] each one's
 * greedy id after it: one decode step of several conversations. Sessions of a model opened with
 * n_parallel >= n (a family that batches: pooled_model_stats.batched) run it as one
 * batched pass, the weights read once for all; otherwise one pass each. All of one
 * model, none twice; each one's logits are left ready. */
POOLED_API int pooled_sessions_step(pooled_session *const *sessions, const int32_t *ids, size_t n,
                                    int32_t *next);
/* Bytes of memory the session's state takes (its cache and activations; a session of an
 * n_parallel model: its slot's share). */
POOLED_API int64_t pooled_session_bytes(const pooled_session *s);

/* speculative decoding: drafts checked by one pass of the model, the very same ids in fewer
 * passes. LOOKUP: drafts from earlier text (the tokens that followed the last few where
 * they occurred before); MTP (since 0.3): the model's own MTP block, chained; AUTO: MTP
 * where the model was opened with its state, else lookup that pauses while drafts are
 * rarely accepted. */
enum { POOLED_SPEC_OFF = 0, POOLED_SPEC_LOOKUP = 1, POOLED_SPEC_AUTO = 2, POOLED_SPEC_MTP = 3 };

#define POOLED_MAX_TOP_LOGPROBS 20

/* A generated id's log-probability: the log-softmax of the logits the sampler chose from
 * (after the penalties, before the temperature: at temperature 0 the chosen id's is the
 * largest), and the top_logprobs most likely ids' (most likely first, ties lower id
 * first). Since 0.2. */
typedef struct {
    int32_t id;
    float logprob;
    int n_top;
    struct {
        int32_t id;
        float logprob;
    } top[POOLED_MAX_TOP_LOGPROBS];
} pooled_logprob;

/* Called once per generated id, before its pooled_token_fn call (an end-of-generation id
 * included, which the token callback does not see). It must not call into the same model
 * (it runs while the model's turn is held). With n_parallel it may run on another
 * session's generating thread (the one that ran the batched step), while this generation's
 * own thread waits for it: touch only what belongs to this generation. */
typedef void (*pooled_logprob_fn)(void *user, const pooled_logprob *lp);

typedef struct {
    size_t size;             /* sizeof(pooled_sample_opts) */
    float temperature;       /* <= 0: greedy (default 0.8) */
    int top_k;               /* <= 0: off (default 40) */
    float top_p;             /* >= 1: off (default 0.95) */
    float min_p;             /* <= 0: off (default 0.05) */
    float repeat_penalty;    /* transformers' (default 1: off) */
    float presence_penalty;  /* OpenAI's (default 0) */
    float frequency_penalty; /* OpenAI's (default 0) */
    int repeat_last_n;       /* ids the penalties look back over; < 0: all (default) */
    uint64_t seed;           /* the draw is a function of (seed, position): same seed, same text */
    int64_t max_tokens;      /* most ids to generate; < 0: until the context is full (default) */
    const char *const *stop; /* n_stop strings: generation stops where the text contains one;
                                the text is delivered up to (not including) it */
    size_t n_stop;           /* at most 16, each 1 to 256 bytes */
    int spec;                /* POOLED_SPEC_OFF (default), _LOOKUP, _AUTO or _MTP: speculative
                                decoding, the very same ids in fewer passes (as far as the
                                model was opened for it: pooled_model_opts.spec) */
    int ignore_eos;          /* 1: keep going past an end-of-generation id */
    /* since 0.2 */
    const char *json_schema; /* the output is one JSON value valid under this JSON Schema
                                (its common subset: type object / array / string / number /
                                integer / boolean / null, enum, const, required,
                                properties, additionalProperties false, items, anyOf,
                                minItems / maxItems); "{}": any JSON value,
                                {"type": "object"}: any object. Each pick is masked to the
                                ids that keep the text a prefix of such a value, and the
                                generation ends (POOLED_STOP_EOG) when it is complete. A
                                schema outside the subset fails the call. Turns spec off.
                                NULL: free text */
    /* with json_schema: literal text around the value (each NULL or at most 4096 bytes
     * together), e.g. a tool call's "<tool_call>\n" and "\n</tool_call>": the output is
     * prefix, the value, suffix, and ends there */
    const char *json_prefix, *json_suffix;
    int top_logprobs;             /* 0 to 20: the alternatives on_logprob gets (default 0) */
    pooled_logprob_fn on_logprob; /* NULL: none. Turns spec off */
    void *logprob_user;           /* on_logprob's first argument */
} pooled_sample_opts;

POOLED_API pooled_sample_opts pooled_sample_opts_default(void);

/* 0 when schema (JSON Schema text) is one json_schema takes, else POOLED_ERR_ARG with the
 * reason (the keyword it does not support, the JSON error). Since 0.2. */
POOLED_API int pooled_json_schema_check(const char *schema);

/* Called once per generated id with the text that became final with it (text[0..len),
 * NUL-terminated; possibly empty: an incomplete UTF-8 sequence, or text held back because
 * it may begin a stop string, comes with a later id). Return 0 to go on, non-zero to stop
 * after this id (stop reason POOLED_STOP_CALLBACK). An end-of-generation id is not passed
 * (unless ignore_eos). When generation ends for any other reason than a stop string or
 * the callback, text still held back comes in one last call with id -1 (its return value
 * is ignored). The callback runs between the model's passes (other sessions' passes may run
 * meanwhile); it must not call pooled_generate or the session functions of the same
 * model. */
typedef int (*pooled_token_fn)(void *user, int32_t id, const char *text, size_t len);

enum {
    POOLED_STOP_EOG = 1,       /* the model ended its turn */
    POOLED_STOP_LENGTH = 2,    /* max_tokens generated, or the context is full */
    POOLED_STOP_STRING = 3,    /* a stop string appeared */
    POOLED_STOP_CALLBACK = 4,  /* the callback returned non-zero */
    POOLED_STOP_CANCELLED = 5, /* pooled_session_cancel */
};

typedef struct {
    size_t size;          /* sizeof(pooled_result), set by the caller */
    int64_t n_prompt;     /* prompt ids */
    int64_t n_prompt_run; /* of those, run (the rest came from the cache) */
    int64_t n_gen;        /* ids generated (an end-of-generation id included) */
    int stop_reason;      /* POOLED_STOP_* */
    double t_prompt;      /* seconds running the prompt */
    double t_gen;         /* seconds generating */
    /* since 0.2 */
    int64_t n_shared; /* decode steps that ran in one pass with other sessions' (n_parallel) */
    /* since 0.3 */
    int64_t n_decoded;  /* generated ids fed back through the model (t_gen's work) */
    int64_t n_steps;    /* decode passes (verify passes with spec) */
    int64_t n_drafted;  /* spec: drafts verified */
    int64_t n_accepted; /* spec: of them, accepted */
} pooled_result;

/* Continue the session with prompt[0..n_prompt) - normally the conversation so far,
 * whose prefix already in the cache is reused - and generate with the options o (NULL:
 * defaults), handing each id to fn (may be NULL). res (may be NULL; its size set by the
 * caller) gets the counts and why it stopped. Fails for an empty prompt, an id outside the
 * vocabulary, a prompt longer than the context, bad options, or a backend failure;
 * generating up to the end of the context is not a failure (POOLED_STOP_LENGTH). */
POOLED_API int pooled_generate(pooled_session *s, const int32_t *prompt, size_t n_prompt,
                               const pooled_sample_opts *o, pooled_token_fn fn, void *user,
                               pooled_result *res);

/* The same for a text prompt, tokenized as pooled_tokenize(add_special 1, parse_special 0)
 * does. */
POOLED_API int pooled_generate_text(pooled_session *s, const char *prompt,
                                    const pooled_sample_opts *o, pooled_token_fn fn, void *user,
                                    pooled_result *res);

/* ------------------------------------------------------------------ GGUF files (since 0.4) */

/* A GGUF file's header, metadata and tensor table, read without loading a model (the file
 * is mapped; the tensors' data is not read). What the lookups give points into the file:
 * strings are NOT NUL-terminated (use their length) and stay valid while it is open. A
 * file from anyone is safe to open: every count, length and offset is checked. */
typedef struct pooled_gguf pooled_gguf;

/* GGUF's value types (the file's own codes) */
enum {
    POOLED_GGUF_UINT8 = 0,
    POOLED_GGUF_INT8 = 1,
    POOLED_GGUF_UINT16 = 2,
    POOLED_GGUF_INT16 = 3,
    POOLED_GGUF_UINT32 = 4,
    POOLED_GGUF_INT32 = 5,
    POOLED_GGUF_FLOAT32 = 6,
    POOLED_GGUF_BOOL = 7,
    POOLED_GGUF_STRING = 8,
    POOLED_GGUF_ARRAY = 9,
    POOLED_GGUF_UINT64 = 10,
    POOLED_GGUF_INT64 = 11,
    POOLED_GGUF_FLOAT64 = 12
};

typedef struct {
    int type;        /* POOLED_GGUF_* */
    uint64_t u;      /* UINT8 .. UINT64 and BOOL (0 or 1) */
    int64_t i;       /* INT8 .. INT64 */
    double f;        /* FLOAT32, FLOAT64 */
    const char *str; /* STRING: its bytes (len of them, not NUL-terminated) */
    uint64_t len;
    int elem_type; /* ARRAY: its elements' type and count (pooled_gguf_array_at) */
    uint64_t count;
    const void *ref; /* the library's: where the array's elements are */
} pooled_gguf_value;

typedef struct {
    const char *name; /* name_len bytes, not NUL-terminated */
    uint64_t name_len;
    int type;              /* GGML's type id (0 f32, 1 f16, 2 q4_0, 8 q8_0, 12 q4_k, ...) */
    const char *type_name; /* "f32", "q4_0", ... ("?" for an id this library does not know) */
    int n_dims;
    int64_t ne[4];   /* ne[0] the row length; dimensions past n_dims are 1 */
    uint64_t offset; /* from the start of the data section */
    uint64_t nbytes;
} pooled_gguf_tensor;

typedef struct {
    size_t size; /* sizeof(pooled_gguf_header), set by the caller (pooled_model_info's rule) */
    uint32_t version;
    uint32_t alignment;
    uint64_t data_offset; /* where the data section starts in the file */
    uint64_t file_size;
    int64_t n_kv;
    int64_t n_tensors;
} pooled_gguf_header;

/* Open and check the file's header and tables; *out NULL on failure (POOLED_ERR_IO,
 * POOLED_ERR_FORMAT with the reason). */
POOLED_API int pooled_gguf_open(const char *path, pooled_gguf **out);
POOLED_API void pooled_gguf_close(pooled_gguf *g); /* NULL is fine */
POOLED_API int pooled_gguf_get_header(const pooled_gguf *g, pooled_gguf_header *h);
/* Metadata item i (0 .. n_kv - 1): its key (*key, *key_len) and value. */
POOLED_API int pooled_gguf_kv_at(const pooled_gguf *g, int64_t i, const char **key,
                                 uint64_t *key_len, pooled_gguf_value *v);
/* The value of key; POOLED_ERR_ARG when the file has no such key. */
POOLED_API int pooled_gguf_find(const pooled_gguf *g, const char *key, pooled_gguf_value *v);
/* Element i (0 .. count - 1) of an ARRAY value (itself maybe a STRING or an ARRAY). */
POOLED_API int pooled_gguf_array_at(const pooled_gguf_value *arr, uint64_t i,
                                    pooled_gguf_value *out);
POOLED_API int pooled_gguf_tensor_at(const pooled_gguf *g, int64_t i, pooled_gguf_tensor *t);
/* A value type's short name ("u32", "f32", "str", "arr", ...), "?" if unknown. */
POOLED_API const char *pooled_gguf_type_name(int type);
/* A tensor type's name ("q4_0", "f16", ...), NULL if the id is not one this library knows;
 * known ids are below POOLED_TENSOR_TYPES. */
#define POOLED_TENSOR_TYPES 64
POOLED_API const char *pooled_tensor_type_name(int type);

/* ------------------------------------------------------------------ writing models (0.4) */

/* Convert a model's weights to another type, as llama-quantize does (same metadata; 1-D
 * tensors such as norms stay as they are). */
typedef struct {
    size_t size; /* sizeof(pooled_quantize_opts) */
    /* llama-quantize's file type ("Q4_K_M", "Q8_0", ...: pooled_quantize_types()); its main
     * type is the weights' type. Required. */
    const char *type;
    /* 1: every weight in that type (llama-quantize --pure); 0: its mixture for the file type
     * (output.weight in Q6_K unless Q8_0; Q4_K_M's attn_v and ffn_down of some layers in Q6_K) */
    int pure;
    /* n_tensor_types items "PATTERN=TYPE": tensors whose name matches PATTERN (a POSIX
     * extended regex, found anywhere in the name) get TYPE (a plain type: "q8_0", "f16");
     * the first match wins */
    const char *const *tensor_types;
    size_t n_tensor_types;
    int n_threads; /* 0: one per core (at most 32); the output does not depend on it */
    /* told one line per decision worth hearing (a fallback type for a row length the type
     * cannot hold); NULL: none */
    void (*note)(void *user, const char *line);
    /* after each tensor: its index and name, the tensors in all, input bytes done and in
     * all; NULL: none */
    void (*progress)(void *user, int64_t i, int64_t n, uint64_t done, uint64_t total,
                     const char *name);
    void *user;
} pooled_quantize_opts;

POOLED_API pooled_quantize_opts pooled_quantize_opts_default(void);
/* Read in_path, write out_path (under a temporary name, renamed when complete: on failure
 * nothing is left at out_path). */
POOLED_API int pooled_quantize(const char *in_path, const char *out_path,
                               const pooled_quantize_opts *o);
/* The file types pooled_quantize_opts.type takes, space-separated (static storage). */
POOLED_API const char *pooled_quantize_types(void);

/* A model file with seeded random weights and a real model's exact shapes and metadata (as
 * llama.cpp's converter names them): for benchmarks and tests without a download. */
typedef struct {
    const char *name; /* "qwen3-8b" */
    const char *arch; /* "llama", "qwen2", "qwen3", "qwen3moe", "qwen35", "qwen35moe" */
    int n_layer, n_embd, n_head, n_head_kv, head_dim, n_ff, n_vocab;
    int tied;                                          /* 1: the output matrix is the embedding's */
    int n_expert, n_expert_used, n_ff_exp, n_ff_shexp; /* 0: dense */
    /* hybrids: full attention every full_attn_interval layers, Gated DeltaNet between (its
     * key and value heads, the value heads' width); 0: none */
    int full_attn_interval, ssm_k_heads, ssm_v_heads, ssm_v_dim;
} pooled_synth_preset;

/* Preset i (0, 1, ...); POOLED_ERR_ARG past the last. */
POOLED_API int pooled_synth_preset_at(int i, pooled_synth_preset *p);

typedef struct {
    size_t size;        /* sizeof(pooled_synth_opts) */
    const char *preset; /* a preset's name (pooled_synth_preset_at). Required */
    /* the 2-D weights' type: a plain type ("q4_0", "f16") or a file type ("Q4_K_M": its
     * main type); norms stay f32; a matrix whose rows do not fit the type's block is stored
     * as f16 (a note says so). NULL: "f16" */
    const char *type;
    uint64_t seed;          /* same seed, same bytes (default 1) */
    const char *vocab_from; /* copy the tokenizer (every tokenizer.* key) from this GGUF;
                               NULL: a byte-level BPE vocabulary of n_vocab tokens */
    int n_layer;            /* 0: the preset's (hybrids: a multiple of its interval) */
    int n_vocab;            /* 0: the preset's; else at least 259 (not with vocab_from) */
    int n_threads;          /* threads making the values, 1 to 64 (0: 2) */
    int zeros;              /* 1: every weight zero, written as a sparse file (the shapes
                               in no time; such a model computes nothing useful) */
    void (*note)(void *user, const char *line);                  /* NULL: none */
    void (*progress)(void *user, uint64_t done, uint64_t total); /* bytes; NULL: none */
    void *user;
} pooled_synth_opts;

POOLED_API pooled_synth_opts pooled_synth_opts_default(void);
/* Write the file at out_path (a temporary name renamed when complete). */
POOLED_API int pooled_synth(const char *out_path, const pooled_synth_opts *o);

#ifdef __cplusplus
}
#endif

#endif
