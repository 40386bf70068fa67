/* prompt_ids_fuzz.c - libFuzzer target for the --prompt-ids parser (pl_prompt_ids_parse).
 *
 * The input is the text (cut at its first NUL, as argv would be). A failure must leave a
 * one-line message and no ids. A success gives at least one id, each in [0, INT32_MAX],
 * and no more than the text could hold; the ids written back as "a b c" parse to the
 * same ids. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/prompt_ids.h"

#define REQUIRE(cond)                                                                              \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "prompt_ids_fuzz: %s failed (line %d): %s\n", #cond, __LINE__,         \
                    pl_last_error());                                                              \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *text = malloc(size + 1);
    if (!text) return 0;
    memcpy(text, data, size);
    text[size] = 0;
    int32_t *ids = NULL;
    int64_t n = -1;
    if (pl_prompt_ids_parse(text, &ids, &n) != PL_OK) {
        const char *e = pl_last_error();
        REQUIRE(!ids && n == 0 && e[0] && !strchr(e, '\n'));
        free(text);
        return 0;
    }
    REQUIRE(ids && n >= 1 && (size_t)n <= strlen(text) / 2 + 1);
    char *back = malloc((size_t)n * 12 + 1), *p = back;
    REQUIRE(back);
    for (int64_t i = 0; i < n; i++) {
        REQUIRE(ids[i] >= 0);
        p += sprintf(p, i ? " %d" : "%d", ids[i]);
    }
    int32_t *again = NULL;
    int64_t m = 0;
    REQUIRE(pl_prompt_ids_parse(back, &again, &m) == PL_OK && m == n);
    REQUIRE(!memcmp(again, ids, sizeof *ids * (size_t)n));
    free(again);
    free(back);
    free(ids);
    free(text);
    return 0;
}
