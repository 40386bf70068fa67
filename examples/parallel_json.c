/* parallel_json.c - several conversations at once on one model, each answered as JSON that
 * a schema allows (pooled.h only): n_parallel sessions, one thread each, whose decode steps
 * the library batches into shared passes; each answer masked to the schema
 * (pooled_sample_opts.json_schema), so it always parses.
 *
 *     cc parallel_json.c $(pkg-config --cflags --libs pooled) -pthread -o parallel_json
 *     ./parallel_json MODEL.gguf "Describe a cat." "Describe a dog." ...
 *
 * Prints each answer, in order: a JSON object {"name": string, "legs": integer, "pet":
 * boolean} (an answer cut at max_tokens is said on stderr instead); on stderr how many
 * decode steps were shared. */
#include <pooled.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_Q 8

static const char *const SCHEMA =
    "{\"type\": \"object\", \"properties\": {\"name\": {\"type\": \"string\"}, \"legs\": "
    "{\"type\": \"integer\"}, \"pet\": {\"type\": \"boolean\"}}, \"required\": [\"name\", "
    "\"legs\", \"pet\"], \"additionalProperties\": false}";

typedef struct {
    pooled_model *m;
    const char *question;
    uint64_t seed;
    char answer[4096];
    size_t len;
    pooled_result res;
    int rc;
    char err[256];
} job;

static int collect(void *user, int32_t id, const char *text, size_t len) {
    (void)id;
    job *j = user;
    if (j->len + len >= sizeof j->answer) return 1; /* long enough: stop */
    memcpy(j->answer + j->len, text, len);
    j->len += len;
    j->answer[j->len] = 0;
    return 0;
}

static void *ask(void *arg) {
    job *j = arg;
    pooled_session *s = NULL;
    pooled_message msg = {"user", j->question};
    int32_t *ids = NULL;
    size_t n = 0;
    pooled_chat_opts co = pooled_chat_opts_default();
    co.no_think = 1;
    pooled_sample_opts so = pooled_sample_opts_default();
    so.json_schema = SCHEMA;
    so.max_tokens = 256;
    so.seed = j->seed;
    j->res = (pooled_result){.size = sizeof j->res};
    j->rc = pooled_session_new(j->m, &s);
    if (!j->rc) j->rc = pooled_chat_tokenize(j->m, &msg, 1, &co, &ids, &n);
    if (!j->rc) j->rc = pooled_generate(s, ids, n, &so, collect, j, &j->res);
    if (j->rc) snprintf(j->err, sizeof j->err, "%s", pooled_last_error());
    pooled_free(ids);
    pooled_session_free(s);
    return NULL;
}

int main(int argc, char **argv) {
    int nq = argc - 2;
    if (nq < 1 || nq > MAX_Q) {
        fprintf(stderr, "usage: %s MODEL.gguf QUESTION... (1 to %d questions)\n", argv[0], MAX_Q);
        return 2;
    }
    pooled_model_opts mo = pooled_model_opts_default();
    mo.n_parallel = nq; /* one session a question, their steps batched */
    mo.n_ctx = 1024;
    pooled_model *m = NULL;
    if (pooled_model_open(argv[1], &mo, &m)) {
        fprintf(stderr, "parallel_json: %s\n", pooled_last_error());
        return 1;
    }
    job jobs[MAX_Q];
    pthread_t th[MAX_Q];
    for (int i = 0; i < nq; i++) {
        jobs[i] = (job){.m = m, .question = argv[2 + i], .seed = 1 + (uint64_t)i};
        pthread_create(&th[i], NULL, ask, &jobs[i]);
    }
    int rc = 0;
    int64_t shared = 0, steps = 0;
    for (int i = 0; i < nq; i++) {
        pthread_join(th[i], NULL);
        if (jobs[i].rc) {
            fprintf(stderr, "parallel_json: question %d: %s\n", i + 1, jobs[i].err);
            rc = 1;
            continue;
        }
        if (jobs[i].res.stop_reason == POOLED_STOP_EOG) /* the value is complete */
            printf("%s\n", jobs[i].answer);
        else /* cut at max_tokens: not a whole value */
            fprintf(stderr, "parallel_json: question %d: cut at %lld ids\n", i + 1,
                    (long long)jobs[i].res.n_gen);
        shared += jobs[i].res.n_shared;
        steps += jobs[i].res.n_gen > 0 ? jobs[i].res.n_gen - 1 : 0;
    }
    fprintf(stderr, "parallel_json: %lld of %lld decode steps shared with other questions\n",
            (long long)shared, (long long)steps);
    pooled_model_close(m);
    return rc;
}
