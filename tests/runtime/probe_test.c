/* probe_test.c - the speed probe (runtime/probe.h) on the CPU: a positive finite speed
 * within its time budget for stories260K and a larger fixture (whose layers, more bytes,
 * run at fewer layers per second); one-line errors for no backend, a backend whose product
 * fails, and a header without layer weights. */
#include <math.h>

#include "cpu/cpu.h"
#include "runtime/generate.h"
#include "runtime/probe.h"
#include "test.h"

static pl_status failing_matmul(pl_backend *be, const pl_buf *w, const pl_buf *x,
                                const pl_buf *bias, int64_t n, bool acc, pl_buf *out) {
    (void)be, (void)w, (void)x, (void)bias, (void)n, (void)acc, (void)out;
    return pl_fail(PL_ERR, "device lost");
}

static double probe(pl_backend *be, const char *rel) {
    pl_gguf *g = NULL;
    CHECK(pl_gguf_open(test_shared(rel), &g) == PL_OK, "%s: %s", rel, pl_last_error());
    if (!g) return 0;
    pl_probe_result r;
    pl_probe_opts o = {.budget_s = 0.1};
    double t0 = pl_now();
    pl_status s = pl_probe_speed(g, be, &o, &r);
    double el = pl_now() - t0;
    CHECK(s == PL_OK && r.layers_per_s > 0 && isfinite(r.layers_per_s) && r.calls > 0,
          "%s: speed %g after %d calls: %s", rel, r.layers_per_s, r.calls, pl_last_error());
    CHECK(el < 1.0 && r.seconds >= 0.1, "%s: the probe took %.3f s (timed %.3f s)", rel, el,
          r.seconds);
    CHECK(!strncmp(r.matrix, "blk.0.", 6), "%s: timed %s", rel, r.matrix);
    pl_gguf_free(g);
    return r.layers_per_s;
}

static void run_tests(void) {
    pl_backend *be = NULL;
    CHECK(pl_cpu_new(1, &be) == PL_OK, "%s", pl_last_error());
    if (!be) return;
    double small = probe(be, "models/stories260K.gguf");
    double big = probe(be, "fixtures/hf/qwen3/qwen3-q8_0.gguf");
    CHECK(small > big, "stories260K's layers (%g/s) should run faster than qwen3's (%g/s)", small,
          big);
    pl_gguf *g = NULL;
    CHECK(pl_gguf_open(test_shared("models/stories260K.gguf"), &g) == PL_OK, "%s", pl_last_error());
    pl_probe_result r;
    CHECK(pl_probe_speed(g, NULL, NULL, &r) != PL_OK && strstr(pl_last_error(), "no backend"),
          "no backend: %s", pl_last_error());
    /* a backend whose product fails */
    pl_backend_methods broken = *be->m;
    const pl_backend_methods *saved = be->m;
    broken.matmul = failing_matmul;
    be->m = &broken;
    pl_status s = pl_probe_speed(g, be, NULL, &r);
    be->m = saved;
    CHECK(s != PL_OK && strstr(pl_last_error(), "probe on cpu: device lost") &&
              !strchr(pl_last_error(), '\n') && r.layers_per_s == 0,
          "a failing backend: %s", pl_last_error());
    CHECK(be->live_bufs == 0, "%lld buffers left", (long long)be->live_bufs);
    /* a header without layer weights */
    pl_gguf *empty = pl_gguf_new();
    pl_gguf_set_str(empty, "general.architecture", "llama");
    CHECK(pl_probe_speed(empty, be, NULL, &r) != PL_OK && strstr(pl_last_error(), "no layer-0"),
          "no layers: %s", pl_last_error());
    pl_gguf_free(empty);
    pl_gguf_free(g);
    pl_be_destroy(be);
}
