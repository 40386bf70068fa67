/* cmd_tokenize.c - `pooled tokenize`: text to token ids with a model's tokenizer.
 *
 *   pooled tokenize -m FILE [--no-bos] [--no-special] [--pieces] [--file PATH | TEXT...]
 *   pooled tokenize -m FILE --bench [MB] [--file PATH]
 *
 * TEXT words are joined with spaces; -- ends the options. Prints the ids on one line,
 * space-separated (BOS/EOS as the vocabulary asks unless
 * --no-bos; special tokens written in the text are parsed unless --no-special). --pieces
 * prints one token per line instead: the id and its text as a JSON string. --bench
 * tokenizes a large input (generated, MB megabytes, default 16; or the --file) and prints
 * the speed. */
#include <pooled.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "args.h"
#include "base/file_map.h"
#include "base/json.h"
#include "base/limits.h"
#include "commands.h"

static int usage(void) {
    printf("usage: pooled tokenize -m FILE [--no-bos] [--no-special] [--pieces] [--file PATH | "
           "TEXT...]\n"
           "       pooled tokenize -m FILE --bench [MB] [--file PATH]\n"
           "-m, --model FILE: the model; --file - reads the text from standard input.\n");
    return 0;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* A deterministic mix of prose, code, numbers and non-Latin scripts, mb megabytes long. */
static char *bench_text(size_t mb, size_t *len) {
    static const char *const words[] = {
        "the",
        "quick",
        "brown",
        "fox",
        "jumps",
        "over",
        "lazy",
        "dog",
        "while",
        "curious",
        "cat",
        "watches",
        "from",
        "old",
        "wooden",
        "fence",
        "counting",
        "birds",
        "It's",
        "don't",
        "we'll",
        "return",
        "for (int i = 0; i < n; ++i)",
        "{",
        "}",
        "printf(\"%d\\n\", x);",
        "3.14159",
        "2024-11-29",
        "1234567890",
        "naïve",
        "café",
        "Ångström",
        "日本語",
        "机器学习是人工智能的一个分支。",
        "Привет, мир!",
        "안녕하세요",
        "🚀",
        "👍🏽",
        "\n",
        "\n\n",
        "\t",
        "   ",
        "https://example.com/path?q=1",
        "user@example.org",
        "<html>",
        "</div>",
        "tokenization",
        "streaming",
        "inference",
        "GPU",
        "WebGPU",
        "kernels",
        "CPU",
        "path",
    };
    size_t n_words = sizeof words / sizeof words[0], want = mb << 20, used = 0;
    char *s = malloc(want + 256);
    if (!s) return NULL;
    uint64_t x = 0x9E3779B97F4A7C15ull;
    while (used < want) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        const char *w = words[x % n_words];
        size_t l = strlen(w);
        memcpy(s + used, w, l);
        used += l;
        /* mostly spaces; some sentence ends and line breaks */
        uint64_t r = (x >> 32) % 16;
        s[used++] = r == 0 ? '.' : r == 1 ? '\n' : ' ';
    }
    s[used] = 0;
    *len = used;
    return s;
}

static int bench(const pooled_model *m, const char *file, int64_t mb) {
    char *text = NULL;
    size_t len = 0;
    if (file) {
        if (pl_file_read(file, PL_LIMIT_TEXT_FILE, PL_READ_TEXT | PL_READ_STDIN, &text, &len) !=
            PL_OK)
            return die("%s", pl_last_error());
    } else if (!(text = bench_text((size_t)mb, &len))) {
        return die("out of memory");
    }
    int32_t *ids = NULL;
    size_t n = 0;
    double best = 1e30;
    for (int rep = 0; rep < 3; rep++) {
        double t0 = now_s();
        if (pooled_tokenize(m, text, len, 0, 1, &ids, &n)) {
            free(text);
            return die("%s", pooled_last_error());
        }
        double dt = now_s() - t0;
        if (dt < best) best = dt;
        pooled_free(ids);
    }
    printf("tokenized %.1f MB into %lld tokens: best of 3 %.3f s, %.1f MB/s, %.2f M tokens/s\n",
           len / 1048576.0, (long long)n, best, len / 1048576.0 / best, n / 1e6 / best);
    free(text);
    return 0;
}

int cmd_tokenize(int argc, char **argv) {
    const char *model = NULL, *file = NULL, *v;
    bool no_bos = false, pieces = false, no_special = false, do_bench = false, err = false;
    bool opts_done = false;
    int64_t mb = 16;
    int n_text = 0;
    pl_strbuf text = {0};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (opts_done || a[0] != '-' || !a[1]) {
            if (n_text++) pl_sb_putc(&text, ' ');
            pl_sb_puts(&text, a);
        } else if (!strcmp(a, "--"))
            opts_done = true;
        else if (arg_take(argc, argv, &i, "--model", "-m", &v, &err))
            model = v;
        else if (arg_take(argc, argv, &i, "--file", "-f", &v, &err))
            file = v;
        else if (!strcmp(a, "--no-bos"))
            no_bos = true;
        else if (!strcmp(a, "--no-special"))
            no_special = true;
        else if (!strcmp(a, "--pieces"))
            pieces = true;
        else if (!strcmp(a, "--bench")) {
            do_bench = true;
            if (i + 1 < argc && argv[i + 1][0] >= '0' && argv[i + 1][0] <= '9' &&
                !arg_int("--bench", argv[++i], 1, PL_LIMIT_BENCH_MB, &mb))
                err = true;
        } else if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            pl_sb_free(&text);
            return usage();
        } else {
            pl_sb_free(&text);
            return die("tokenize: unknown option '%s' (use -- before text that starts with -)", a);
        }
        if (err) {
            pl_sb_free(&text);
            return 1;
        }
    }
    if (!model) {
        pl_sb_free(&text);
        return die("tokenize: give a model with -m FILE");
    }
    if (file && n_text && !do_bench) {
        pl_sb_free(&text);
        return die("tokenize: give either --file or TEXT, not both");
    }
    /* the library through its public API only (include/pooled.h): the vocabulary alone */
    pooled_model *m = NULL;
    pooled_model_opts mo = pooled_model_opts_default();
    mo.vocab_only = 1;
    if (pooled_model_open(model, &mo, &m)) {
        pl_sb_free(&text);
        return die("%s", pooled_last_error());
    }
    int rc = 0;
    if (do_bench) {
        rc = bench(m, file, mb);
        goto out;
    }
    char *input = NULL;
    size_t len = 0;
    if (file) {
        if (pl_file_read(file, PL_LIMIT_TEXT_FILE, PL_READ_TEXT | PL_READ_STDIN, &input, &len) !=
            PL_OK) {
            rc = die("%s", pl_last_error());
            goto out;
        }
    } else {
        input = pl_sb_take(&text, &len);
        if (!input) {
            rc = die("out of memory");
            goto out;
        }
    }
    int32_t *ids = NULL;
    size_t n = 0;
    if (pooled_tokenize(m, input, len, !no_bos, !no_special, &ids, &n)) {
        free(input);
        rc = die("%s", pooled_last_error());
        goto out;
    }
    free(input);
    pl_strbuf o = {0};
    for (size_t i = 0; i < n; i++) {
        if (!pieces) {
            pl_sb_printf(&o, i ? " %d" : "%d", ids[i]);
            continue;
        }
        char *piece;
        size_t k;
        if (pooled_token_piece(m, ids[i], 1, &piece, &k)) {
            rc = die("tokenize: %s", pooled_last_error());
            break;
        }
        pl_sb_printf(&o, "%d\t", ids[i]);
        pl_json_quote(&o, piece, k, false);
        pl_sb_putc(&o, '\n');
        pooled_free(piece);
    }
    if (!pieces) pl_sb_putc(&o, '\n');
    if (!rc && o.failed)
        rc = die("out of memory");
    else if (!rc)
        fwrite(o.s, 1, o.len, stdout);
    pl_sb_free(&o);
    pooled_free(ids);
out:
    pl_sb_free(&text);
    pooled_model_close(m);
    return rc;
}
