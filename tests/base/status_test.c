/* status_test.c - pl_fail may quote the last message in the next one ("%s: %s", name,
 * pl_last_error()), as callers that add context do: the message must come out whole. */
#include "base/status.h"
#include "test.h"

static void run_tests(void) {
    pl_fail(PL_ERR, "values too large for f16");
    CHECK(pl_fail(PL_ERR_FORMAT, "%s: %s", "blk.1.ffn_up.weight", pl_last_error()) == PL_ERR_FORMAT,
          "the code comes back");
    CHECK(!strcmp(pl_last_error(), "blk.1.ffn_up.weight: values too large for f16"), "got '%s'",
          pl_last_error());
    pl_fail(PL_ERR, "%s and %s", pl_last_error(), pl_last_error());
    CHECK(!strcmp(pl_last_error(), "blk.1.ffn_up.weight: values too large for f16 and "
                                   "blk.1.ffn_up.weight: values too large for f16"),
          "twice: '%s'", pl_last_error());
    pl_clear_error();
    CHECK(!pl_last_error()[0], "cleared");
}
