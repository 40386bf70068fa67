/* prompt_ids.c - "1 2, 3" -> ids: whole items only, so "2.5" or "7x" is refused by name
 * rather than split into a number and junk. */
#include "prompt_ids.h"

#include <stdlib.h>
#include <string.h>

static int is_sep(char c) {
    return c == ' ' || c == ',' || c == '\t' || c == '\n' || c == '\r';
}

pl_status pl_prompt_ids_parse(const char *s, int32_t **ids, int64_t *n) {
    *ids = NULL;
    *n = 0;
    size_t cap = strlen(s) / 2 + 1; /* an id and a separator take at least 2 bytes, bar the last */
    int32_t *v = malloc(sizeof *v * cap);
    if (!v) return pl_fail(PL_ERR_NOMEM, "out of memory for the prompt ids");
    int64_t k = 0;
    while (*s) {
        if (is_sep(*s)) {
            s++;
            continue;
        }
        size_t len = 0;
        while (s[len] && !is_sep(s[len])) len++;
        int64_t val = 0;
        size_t i = 0;
        while (i < len && s[i] >= '0' && s[i] <= '9' && val <= INT32_MAX)
            val = val * 10 + (s[i++] - '0');
        if (i < len || val > INT32_MAX) {
            free(v);
            const char *more = len > 32 ? "..." : "";
            return pl_fail(PL_ERR_ARG,
                           "'%.*s%s' is not a token id (ids are whole numbers from 0 to %d)",
                           (int)(len > 32 ? 32 : len), s, more, INT32_MAX);
        }
        v[k++] = (int32_t)val;
        s += len;
    }
    if (!k) {
        free(v);
        return pl_fail(PL_ERR_ARG, "no ids given");
    }
    *ids = v;
    *n = k;
    return PL_OK;
}
