/* header_test.c - include/pooled.h stands alone: it compiles by itself as strict C11 and
 * (when g++ is installed) as C++, with every warning an error, and it names nothing but
 * pooled_* / POOLED_* (checked by compiling a file that defines likely clashes). */
#include "test.h"

static int sh(const char *cmd) {
    int st = system(cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

static void run_tests(void) {
    char src[600], cmd[2000];
    snprintf(src, sizeof src, "%s/use.c", test_tmpdir());
    FILE *f = fopen(src, "w");
    CHECK(f != NULL, "%s", src);
    if (!f) return;
    /* names a program may well use itself must not clash with the header's */
    fputs("typedef int pl_status; typedef int model; struct session { int x; };\n"
          "#include <pooled.h>\n"
          "int use(void) { pooled_model_opts o = pooled_model_opts_default();\n"
          "    pooled_result r = {sizeof r, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};\n"
          "    return (int)o.size + (int)r.size + POOLED_STOP_CANCELLED; }\n",
          f);
    fclose(f);
    snprintf(cmd, sizeof cmd,
             "cc -std=c11 -pedantic -Wall -Wextra -Werror -Iinclude -fsyntax-only -x c '%s'", src);
    CHECK(sh(cmd) == 0, "%s", cmd);
    snprintf(cmd, sizeof cmd,
             "cc -std=c11 -pedantic -Wall -Wextra -Werror -fsyntax-only -x c include/pooled.h");
    CHECK(sh(cmd) == 0, "%s", cmd);
    if (sh("command -v g++ >/dev/null 2>&1") == 0) {
        snprintf(cmd, sizeof cmd,
                 "g++ -std=c++11 -pedantic -Wall -Wextra -Werror -Iinclude -fsyntax-only -x c++ "
                 "'%s'",
                 src);
        CHECK(sh(cmd) == 0, "%s", cmd);
    }
}
