/* cpu_matmul_run.h - what the CPU matmul tests share: one pl_be_matmul on a backend with
 * act_q8 on, from host arrays to host arrays. */
#ifndef PL_TEST_CPU_MATMUL_RUN_H
#define PL_TEST_CPU_MATMUL_RUN_H

#include <stdlib.h>
#include <string.h>

#include "cpu/cpu_internal.h"
#include "test.h"

/* got [n, n_out] = W x (+ bias when given) for the first n rows of x [n, k], added to o0
 * [n, n_out] when acc; W: n_out rows of k values of type, as in the file. act_q8 is on for
 * the call only. Whether it ran (the CHECKs say why not). */
static inline bool act_q8_matmul(pl_backend *be, uint32_t type, int64_t k, int n_out, int n,
                                 const void *w, const float *x, const float *bias, bool acc,
                                 const float *o0, float *got) {
    pl_buf *bw = NULL, *bx = NULL, *bb = NULL, *bo = NULL;
    be->act_q8 = 1;
    CHECK(pl_be_buf_weight(be, type, k, n_out, w, &bw) == PL_OK, "%s", pl_last_error());
    CHECK(pl_be_buf_new(be, PL_TYPE_F32, k, n, &bx) == PL_OK, "%s", pl_last_error());
    CHECK(pl_be_buf_new(be, PL_TYPE_F32, n_out, 1, &bb) == PL_OK, "%s", pl_last_error());
    CHECK(pl_be_buf_new(be, PL_TYPE_F32, n_out, n, &bo) == PL_OK, "%s", pl_last_error());
    bool ok = bw && bx && bb && bo;
    if (ok) {
        pl_be_write(bx, 0, x, n * k * 4);
        if (bias) pl_be_write(bb, 0, bias, (int64_t)n_out * 4);
        pl_be_write(bo, 0, o0, (int64_t)n * n_out * 4);
        ok = pl_be_matmul(bw, bx, bias ? bb : NULL, n, acc, bo) == PL_OK &&
             pl_be_read(bo, 0, got, (int64_t)n * n_out * 4) == PL_OK;
        CHECK(ok, "%s", pl_last_error());
    }
    pl_be_buf_free(bw), pl_be_buf_free(bx), pl_be_buf_free(bb), pl_be_buf_free(bo);
    be->act_q8 = 0;
    return ok;
}

/* How many of got [n, n_out] are not, bit for bit, what the matmul above must give from the
 * reference dots dot [n, n_out] (dot + bias[r], added to o0 when acc). */
static inline int act_q8_mismatches(int n, int n_out, const float *dot, const float *bias, bool acc,
                                    const float *o0, const float *got) {
    int bad = 0;
    for (int i = 0; i < n * n_out; i++) {
        float v = dot[i] + (bias ? bias[i % n_out] : 0.0f);
        float want = acc ? o0[i] + v : v;
        bad += memcmp(&want, &got[i], sizeof want) != 0;
    }
    return bad;
}

/* The inputs of a matmul test case from rnd: x [n, k] in +-2, bias [n_out] in +-0.5 and the
 * accumulator's start o0 [n, n_out] in 0..10, each malloc'd (the caller frees them). */
static inline void act_q8_inputs(uint32_t (*rnd)(void), int n, int k, int n_out, float **x,
                                 float **bv, float **o0) {
    *x = malloc(sizeof(float) * (size_t)n * k), *bv = malloc(sizeof(float) * (size_t)n_out);
    *o0 = malloc(sizeof(float) * (size_t)n * n_out);
    for (int i = 0; i < n * k; i++) (*x)[i] = (float)(rnd() % 20001) / 5000.0f - 2.0f;
    for (int i = 0; i < n_out; i++) (*bv)[i] = (float)(rnd() % 1001) / 1000.0f - 0.5f;
    for (int i = 0; i < n * n_out; i++) (*o0)[i] = (float)(rnd() % 1001) / 100.0f;
}

/* The two CPU backends the matmul tests compare, 1 and 3 threads (weights mapped / copied);
 * false (checked) if not. */
static inline bool act_q8_backends(pl_backend *bes[2]) {
    bes[0] = bes[1] = NULL;
    /* the 3-thread one copies its weights (so Q4_0 lies interleaved where the CPU has AVX2,
     * cpu_x8.c); the other reads them where they lie, in the GGUF layout */
    pl_cpu_opts copied = {.n_threads = 3, .anon_weights = 1};
    CHECK(pl_cpu_new(1, &bes[0]) == PL_OK && pl_cpu_new_with(&copied, &bes[1]) == PL_OK, "%s",
          pl_last_error());
    /* The GEMM's column ranges are as wide as half the L2 holds, at least GEMM_GROUPS
     * groups: the 3-thread backend is told of no L2 at all, so its ranges are the narrowest
     * and batches past 128 rows split in columns too, while the other's stay whole. */
    if (bes[1]) cpu_of(bes[1])->l2_bytes = 0;
    if (bes[0] && bes[1]) return true;
    if (bes[0]) pl_be_destroy(bes[0]);
    if (bes[1]) pl_be_destroy(bes[1]);
    return false;
}

/* The x86 SIMD levels the kernel tests run their checks at: 0 AVX-512 VNNI, 1 AVX-VNNI
 * (vpdpbusd on 256 bits), 2 plain AVX2 (elsewhere: pass 2 only, the one dispatch there is).
 * simd_first_pass says on stderr which the CPU has (what goes untested) and returns the
 * first one to run; simd_pass switches the kernels to pass p's level. */
static inline int simd_first_pass(void) {
    pl_cpu_no_vnni = pl_cpu_no_avx512 = 0;
    int vnni = pl_cpu_have_vnni(), v512 = pl_cpu_have_avx512vnni();
    fprintf(stderr, "AVX2: %s, AVX-VNNI: %s, AVX-512 VNNI: %s\n", pl_cpu_have_avx2() ? "yes" : "no",
            vnni ? "yes (tested)" : "no (not tested)", v512 ? "yes (tested)" : "no (not tested)");
    return v512 ? 0 : vnni ? 1 : 2;
}
static inline void simd_pass(int p) {
    pl_cpu_no_avx512 = p >= 1;
    pl_cpu_no_vnni = p >= 2;
}

#endif
