/* gpu_options_test.c - pl_gpu_opts_parse (pooled_model_opts.gpu_options): each setting lands
 * in its field with the value the command's POOLED_GPU_* variable gave it, bad values as the
 * codes the backend refuses at open, unknown names and items without '=' refused at once.
 * No GPU needed. */
#include "test.h"

#include "gpu/gpu.h"

static pl_gpu_backend_opts parse(const char *text, pl_status *st) {
    static char buf[8][512];
    static int slot;
    char *b = buf[slot++ % 8];
    snprintf(b, sizeof buf[0], "%s", text);
    pl_gpu_backend_opts o = {0};
    *st = pl_gpu_opts_parse(b, &o);
    return o;
}

static void run_tests(void) {
    pl_status st;
    pl_gpu_backend_opts o = parse("", &st);
    CHECK(!st && !o.no_fuse && !o.no_tune && !o.gemv && !o.gemm && !o.toggles && !o.gemv_cols &&
              !o.fa && !o.smx && !o.gemv_xpre && !o.submit_every && !o.gemm_min_cols,
          "empty: all defaults");
    o = parse("fuse=0;tune=verbose;gemv=64,4,1,1,1;gemm=off;robust=1;toggles=a,b;preload=1", &st);
    CHECK(!st && o.no_fuse && !o.no_tune && o.tune_verbose && o.gemv &&
              !strcmp(o.gemv, "64,4,1,1,1") && o.gemm && !strcmp(o.gemm, "off") && o.robust &&
              o.toggles && !strcmp(o.toggles, "a,b") && o.q8_preload,
          "strings and switches");
    o = parse(" tune = 0 \n xpre=2;smx=6;topk=0;moesh=1;moecomb=0;fa=1;dr=0;chunk=32", &st);
    CHECK(!st && o.no_tune && o.gemv_xpre == 2 && o.smx == 6 && o.topk_rank == -1 &&
              o.moe_shgate == 1 && o.moe_comb == -1 && o.fa == 1 && o.dr_chunk == -1 &&
              o.submit_every == 32,
          "numbers (xpre %d smx %d chunk %d)", o.gemv_xpre, o.smx, o.submit_every);
    o = parse("mc=4,16;exact=2,64;gemm_min=24;profile_at=7", &st);
    CHECK(!st && o.gemv_cols == 4 && o.gemv_cols_acc == 16 && o.gemm_exact_min == 2 &&
              o.gemm_exact_max == 64 && o.gemm_min_cols == 24 && o.profile_at == 7,
          "pairs (mc %d,%d exact %d,%d)", o.gemv_cols, o.gemv_cols_acc, o.gemm_exact_min,
          o.gemm_exact_max);
    o = parse("mc=0;chunk=0", &st);
    CHECK(!st && o.gemv_cols == -1 && o.submit_every == -1, "mc 0: one column, chunk 0: never");
    /* bad values: the codes the backend refuses when it opens (naming the variable) */
    o = parse("xpre=7;smx=9;fa=2;mc=1;exact=1;gemm_min=0", &st);
    CHECK(!st && o.gemv_xpre == -2 && o.smx == -2 && o.fa == -2 && o.gemv_cols == 99 &&
              o.gemm_exact_min == -2 && o.gemm_min_cols == -1,
          "refused values (xpre %d smx %d fa %d mc %d)", o.gemv_xpre, o.smx, o.fa, o.gemv_cols);
    parse("fuse=0;nope=1", &st);
    CHECK(st == PL_ERR_ARG && strstr(pl_last_error(), "unknown setting 'nope'"), "%s",
          pl_last_error());
    parse("fuse", &st);
    CHECK(st == PL_ERR_ARG && strstr(pl_last_error(), "NAME=VALUE"), "%s", pl_last_error());
    parse("FUSE=0", &st); /* lower case only, as documented */
    CHECK(st == PL_ERR_ARG, "upper case taken");
}
