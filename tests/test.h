/* test.h - the whole test harness: CHECK macros, a main(), and fixture paths.
 *
 * A test program defines `static void run_tests(void)` and includes this header once.
 * It prints one line per failure and ends with "RESULT <passed> <failed>", which
 * tests/run.sh adds up. Tests write only to temporary folders (test_tmpdir()). */
#ifndef PL_TEST_H
#define PL_TEST_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#ifndef __wasi__ /* wasm32-wasi (make wasm-test): no processes, so no check_command_fails */
#include <sys/wait.h>
#endif
#ifdef __wasi__
#include <errno.h>
#include <sys/stat.h>
#include <time.h>
#endif

static int test_passed, test_failed;

#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (cond) {                                                                                \
            test_passed++;                                                                         \
        } else {                                                                                   \
            test_failed++;                                                                         \
            fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);                        \
            fprintf(stderr, "" __VA_ARGS__);                                                       \
            fprintf(stderr, "\n");                                                                 \
        }                                                                                          \
    } while (0)

/* No GPU (what did not open, why): a FAILURE, since CI installs lavapipe; only an explicit
 * POOLED_SKIP_GPU=1 outside CI skips, and then nothing is counted as passed. */
static inline void test_no_gpu(const char *what, const char *why) {
    const char *skip = getenv("POOLED_SKIP_GPU"), *ci = getenv("CI");
    if (skip && !strcmp(skip, "1") && !(ci && *ci)) {
        fprintf(stderr, "SKIP %s (POOLED_SKIP_GPU=1): %s\n", what, why);
        return;
    }
    CHECK(0, "%s did not open: %s (run tools/setup.sh)", what, why);
}

/* Path of a file under shared/ (POOLED_SHARED, default ../shared from the repo root). */
static inline const char *test_shared(const char *rel) {
    static char buf[8][1024];
    static int slot;
    const char *root = getenv("POOLED_SHARED");
    if (!root || !*root) root = "../shared";
    char *b = buf[slot++ & 7];
    snprintf(b, sizeof buf[0], "%s/%s", root, rel);
    return b;
}

/* A fresh temporary directory for this test program (removed by tests/run.sh). */
static inline const char *test_tmpdir(void) {
    static char dir[256];
    if (!dir[0]) {
        const char *base = getenv("POOLED_TEST_TMP");
        snprintf(dir, sizeof dir, "%s/pooled-test-XXXXXX", base && *base ? base : "/tmp");
#ifdef __wasi__ /* no mkdtemp there: the first free name (the runner preopens the base) */
        char *x = dir + strlen(dir) - 6;
        int made = 0;
        for (unsigned long i = (unsigned long)time(NULL); !made && x[0]; i++) {
            snprintf(x, 7, "%06lu", i % 1000000);
            if (mkdir(dir, 0700) == 0)
                made = 1;
            else if (errno != EEXIST)
                x[0] = 0;
        }
        if (!made) {
#else
        if (!mkdtemp(dir)) {
#endif
            perror("mkdtemp");
            exit(2);
        }
    }
    return dir;
}

/* Path of the pooled binary under test (POOLED_BIN, default build/pooled). */
static inline const char *test_pooled_bin(void) {
    const char *b = getenv("POOLED_BIN");
    return b && *b ? b : "build/pooled";
}

#ifndef __wasi__
/* Run `pooled ARGS` (stdout dropped): it must exit non-zero without a signal, with exactly
 * one line on stderr that contains want. */
static inline void check_command_fails(const char *args, const char *want) {
    char cmd[4096], err_path[600];
    snprintf(err_path, sizeof err_path, "%s/stderr.txt", test_tmpdir());
    snprintf(cmd, sizeof cmd, "%s %s >/dev/null 2>'%s'", test_pooled_bin(), args, err_path);
    int st = system(cmd);
    char buf[2048] = {0};
    FILE *f = fopen(err_path, "r");
    size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
    if (f) fclose(f);
    int lines = 0;
    for (size_t i = 0; i < n; i++) lines += buf[i] == '\n';
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) != 0 && WEXITSTATUS(st) < 128, "%s: exit status %d",
          args, st);
    CHECK(lines == 1 && strstr(buf, want) && !strstr(buf, "Sanitizer"),
          "%s: stderr should be one line with '%s', got: %s", args, want, buf);
}

#endif

static void run_tests(void);

int main(void) {
    run_tests();
    printf("RESULT %d %d\n", test_passed, test_failed);
    return test_failed ? 1 : 0;
}

#endif
