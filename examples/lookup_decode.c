/* lookup_decode.c - a drafter of one's own on libpooled's public API (pooled.h only): greedy
 * decoding sped up by prompt lookup, written with the model's single passes.
 *
 *     cc lookup_decode.c $(pkg-config --cflags --libs pooled) -o lookup_decode
 *     ./lookup_decode MODEL.gguf "PROMPT" [N] [cpu|webgpu|auto] [--ids]
 *
 * Each step guesses what follows from the text so far (where its last two ids occurred
 * before, the ids after them), and checks the guesses in ONE pass of the model
 * (pooled_session_verify: the greedy id after each id of the pass). Guesses are kept while
 * they equal the model's own choice; the session then forgets the rest
 * (pooled_session_truncate). The ids are exactly plain greedy decoding's - `pooled run -m
 * MODEL -p PROMPT -n N --temp 0 --ids` prints the same - in fewer passes when the text
 * repeats itself. stdout: the generated text (with --ids: the ids, as pooled run --ids);
 * stderr: passes and guesses accepted. */
#include <pooled.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_DRAFT 7 /* guesses a pass checks (pooled_session_verify takes 1 + up to 15) */

/* Up to max ids that followed the latest earlier occurrence of hist's last two ids. */
static int lookup(const int32_t *hist, int n, int32_t *out, int max) {
    if (n < 3) return 0;
    for (int i = n - 3; i >= 0; i--) {
        if (hist[i] != hist[n - 2] || hist[i + 1] != hist[n - 1]) continue;
        int k = 0;
        while (k < max && i + 2 + k < n) out[k] = hist[i + 2 + k], k++;
        return k;
    }
    return 0;
}

static void fail(const char *what) {
    fprintf(stderr, "lookup_decode: %s: %s\n", what, pooled_last_error());
    exit(1);
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s MODEL.gguf PROMPT [N] [auto|cpu|webgpu] [--ids]\n", argv[0]);
        return 2;
    }
    int n_gen = argc > 3 ? atoi(argv[3]) : 128;
    int print_ids = argc > 5 && !strcmp(argv[5], "--ids");
    pooled_model_opts mo = pooled_model_opts_default(); /* sized for verify passes */
    if (argc > 4) mo.backend = argv[4];
    pooled_model *m = NULL;
    pooled_session *s = NULL;
    if (pooled_model_open(argv[1], &mo, &m)) fail(argv[1]);
    if (pooled_session_new(m, &s)) fail("session");
    pooled_model_info info = {.size = sizeof info};
    pooled_model_get_info(m, &info);

    int32_t *prompt = NULL;
    size_t n_prompt = 0;
    if (pooled_tokenize(m, argv[2], strlen(argv[2]), 1, 0, &prompt, &n_prompt) || !n_prompt)
        fail("tokenize");
    if (n_gen < 1 || n_prompt + (size_t)n_gen + MAX_DRAFT > (size_t)info.n_ctx) {
        fprintf(stderr, "lookup_decode: prompt + N must fit the context of %d\n", info.n_ctx);
        return 1;
    }
    /* the text so far: the prompt, then every generated id */
    int32_t *hist = malloc(sizeof *hist * (n_prompt + (size_t)n_gen + MAX_DRAFT + 1));
    if (!hist) return 1;
    memcpy(hist, prompt, sizeof *hist * n_prompt);
    int n_hist = (int)n_prompt, generated = 0, passes = 0, guessed = 0, accepted = 0;

    /* all of the prompt but its last id; that one goes first into every pass */
    if (n_prompt > 1 && pooled_session_eval(s, prompt, n_prompt - 1)) fail("prompt");
    int32_t pending = prompt[n_prompt - 1];
    while (generated < n_gen) {
        int32_t batch[1 + MAX_DRAFT], next[1 + MAX_DRAFT];
        batch[0] = pending;
        int k = lookup(hist, n_hist, batch + 1, MAX_DRAFT);
        size_t held = (size_t)n_hist - 1; /* the ids the session holds before the pass */
        if (pooled_session_verify(s, batch, (size_t)(1 + k), next)) fail("verify");
        passes++, guessed += k;
        /* next[0] follows pending; next[j] follows guess j while the guesses are right */
        int a = 0;
        while (a < k && batch[1 + a] == next[a]) a++;
        accepted += a;
        int stop = 0;
        for (int j = 0; j <= a && generated < n_gen && !stop; j++) {
            if ((stop = pooled_token_is_eog(m, next[j]))) break; /* not printed, as pooled run */
            hist[n_hist++] = next[j];
            generated++;
            if (print_ids) {
                printf("%s%d", generated > 1 ? " " : "", next[j]);
            } else {
                char *piece = NULL;
                size_t len = 0;
                if (!pooled_token_piece(m, next[j], 0, &piece, &len)) fwrite(piece, 1, len, stdout);
                pooled_free(piece);
            }
        }
        if (stop) break;
        /* keep pending and the right guesses; the last new id goes first next time */
        if (pooled_session_truncate(s, held + 1 + (size_t)a)) fail("truncate");
        pending = hist[n_hist - 1];
    }
    printf("\n");
    fprintf(stderr, "lookup_decode: %d ids in %d passes, %d of %d guesses accepted\n", generated,
            passes, accepted, guessed);
    free(hist);
    pooled_free(prompt);
    pooled_session_free(s);
    pooled_model_close(m);
    return 0;
}
