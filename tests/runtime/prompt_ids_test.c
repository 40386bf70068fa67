/* prompt_ids_test.c - pl_prompt_ids_parse: separators, the full id range, and bad items
 * quoted whole (issue 9: "1 2.5" was reported as '.5'). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/prompt_ids.h"
#include "test.h"

static void ok(const char *s, int64_t n, const int32_t *want) {
    int32_t *ids = NULL;
    int64_t got = 0;
    pl_status st = pl_prompt_ids_parse(s, &ids, &got);
    CHECK(st == PL_OK && got == n && !memcmp(ids, want, sizeof *want * (size_t)n), "'%s': %s", s,
          st ? pl_last_error() : "wrong ids");
    free(ids);
}

static void bad(const char *s, const char *quoted) {
    int32_t *ids = (int32_t *)1;
    int64_t n = 5;
    pl_status st = pl_prompt_ids_parse(s, &ids, &n);
    CHECK(st == PL_ERR_ARG && !ids && n == 0, "'%s' refused", s);
    CHECK(strstr(pl_last_error(), quoted) != NULL, "'%s': the error '%s' quotes %s", s,
          pl_last_error(), quoted);
}

static void run_tests(void) {
    ok("1 2 3", 3, (int32_t[]){1, 2, 3});
    ok(" 7,8 ,\t9\n10\r\n", 4, (int32_t[]){7, 8, 9, 10});
    ok("0 2147483647", 2, (int32_t[]){0, INT32_MAX});
    ok("007", 1, (int32_t[]){7});
    bad("1 2.5", "'2.5' is not a token id");
    bad("1,7x,3", "'7x' is not a token id");
    bad("-1", "'-1'");
    bad("+4", "'+4'");
    bad("2147483648", "'2147483648'");
    bad("99999999999999999999999", "'99999999999999999999999'");
    bad("0x10", "'0x10'");
    bad("", "no ids given");
    bad(" , ,", "no ids given");
    char longbad[100];
    memset(longbad, 'a', 99);
    longbad[99] = 0;
    bad(longbad, "'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa...'"); /* cut at 32 bytes */
}
