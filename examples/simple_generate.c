/* simple_generate.c - the smallest program on libpooled's public API (pooled.h only):
 * open a model, continue a prompt greedily, stream the text to stdout.
 *
 *     cc simple_generate.c $(pkg-config --cflags --libs pooled) -o simple_generate
 *     ./simple_generate MODEL.gguf "Once upon a time" [N] [BACKEND]
 *
 * stdout is exactly what `pooled run -m MODEL -p PROMPT -n N --temp 0` prints. */
#include <pooled.h>
#include <stdio.h>
#include <stdlib.h>

static int print_text(void *user, int32_t id, const char *text, size_t len) {
    (void)user;
    (void)id;
    return fwrite(text, 1, len, stdout) != len; /* stop if stdout fails */
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s MODEL.gguf PROMPT [N] [auto|cpu|webgpu]\n", argv[0]);
        return 2;
    }
    pooled_model_opts mo = pooled_model_opts_default();
    if (argc > 4) mo.backend = argv[4];
    pooled_model *m = NULL;
    pooled_session *s = NULL;
    pooled_sample_opts so = pooled_sample_opts_default();
    so.temperature = 0; /* greedy */
    so.max_tokens = argc > 3 ? atoi(argv[3]) : 128;
    pooled_result res = {.size = sizeof res};
    int rc = pooled_model_open(argv[1], &mo, &m);
    if (!rc) rc = pooled_session_new(m, &s);
    if (!rc) rc = pooled_generate_text(s, argv[2], &so, print_text, NULL, &res);
    if (rc) {
        fprintf(stderr, "simple_generate: %s\n", pooled_last_error());
    } else {
        fflush(stdout);
        fprintf(stderr, "pooled %s: %lld prompt ids, %lld generated, stop reason %d\n",
                pooled_version(NULL, NULL, NULL), (long long)res.n_prompt, (long long)res.n_gen,
                res.stop_reason);
    }
    pooled_session_free(s);
    pooled_model_close(m);
    return rc ? 1 : 0;
}
