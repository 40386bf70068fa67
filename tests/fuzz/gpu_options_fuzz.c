/* gpu_options_fuzz.c - libFuzzer target for the GPU tuning line (pl_gpu_opts_parse, what
 * pooled_model_opts.gpu_options carries from any program).
 *
 * The input is the text (cut at its first NUL). A failure leaves a one-line message. A
 * success borrows its strings from the text itself (each inside the buffer), and every
 * number is one the backend either takes or refuses by name at open: the switches -2..1,
 * the column counts 0, -1 or 2..64 (99: refused), the accumulators 0..1000 (999: refused). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/gpu.h"

#define REQUIRE(cond)                                                                              \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "gpu_options_fuzz: %s failed (line %d): %s\n", #cond, __LINE__,        \
                    pl_last_error());                                                              \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

static void inside(const char *s, const char *buf, size_t size) {
    REQUIRE(!s || (s >= buf && s + strlen(s) <= buf + size));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *text = malloc(size + 1);
    if (!text) return 0;
    memcpy(text, data, size);
    text[size] = 0;
    pl_gpu_backend_opts o = {0};
    if (pl_gpu_opts_parse(text, &o) != PL_OK) {
        const char *e = pl_last_error();
        REQUIRE(*e && !strchr(e, '\n'));
    } else {
        inside(o.gemv, text, size), inside(o.gemm, text, size), inside(o.toggles, text, size);
        REQUIRE(o.no_fuse == 0 || o.no_fuse == 1);
        REQUIRE(o.gemv_xpre >= -2 && o.gemv_xpre <= 2 && o.smx >= -2 && o.smx <= 7);
        int sw[] = {o.topk_rank, o.moe_shgate, o.moe_comb, o.fa, o.dr_chunk};
        for (size_t i = 0; i < sizeof sw / sizeof *sw; i++) REQUIRE(sw[i] >= -2 && sw[i] <= 1);
        REQUIRE(o.gemv_cols == 0 || o.gemv_cols == -1 || o.gemv_cols == 99 ||
                (o.gemv_cols >= 2 && o.gemv_cols <= 64));
        REQUIRE(o.gemv_cols_acc >= 0 && o.gemv_cols_acc <= 1000);
        REQUIRE(o.gemm_exact_min >= -2 && o.gemm_exact_min <= 65536);
        REQUIRE(o.gemm_min_cols >= -1 && o.gemm_min_cols <= 65536);
        REQUIRE(o.submit_every >= -1);
    }
    free(text);
    return 0;
}
