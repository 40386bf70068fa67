/* gpu_device_test.c - the WebGPU layer itself (device.h over Dawn) on the machine's adapter
 * (lavapipe in CI): open, upload/download, copies, chunked uploads, the 2-D grid, and that
 * bad input fails with a message instead of crashing. */
#include "test.h"

#include "gpu/device.h"
#include "gpu_test_util.h"

/* y[i] = x[i] * 2 + i, over a grid index that may span two dimensions. */
static const char *k_scale =
    "const N = %uu;\n"
    "@group(0) @binding(0) var<storage, read> x: array<f32>;\n"
    "@group(0) @binding(1) var<storage, read_write> y: array<f32>;\n"
    "@compute @workgroup_size(32)\n"
    "fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,\n"
    "        @builtin(local_invocation_index) lid: u32) {\n"
    "  let i = (wid.x + wid.y * nwg.x) * 32u + lid;\n"
    "  if (i < N) { y[i] = x[i] * 2.0 + f32(i); }\n"
    "}\n";

static void test_scale(pl_gpu *g, uint32_t n) {
    float *x = malloc(n * 4), *y = malloc(n * 4);
    gt_fill(x, n, -4, 4);
    pl_gpu_buf *bx = gt_buf(g, x, n * 4), *by = gt_buf(g, NULL, n * 4);
    char src[1024];
    snprintf(src, sizeof src, k_scale, n);
    pl_gpu_kernel *k = NULL;
    CHECK(pl_gpu_kernel_new(g, src, "scale", &k) == PL_OK, "%s", pl_last_error());
    pl_gpu_ref refs[2] = {{bx, 0, 0}, {by, 0, 0}};
    uint32_t groups = (n + 31) / 32;
    if (k && gt_run(g, k, refs, 2, groups)) {
        gt_read(g, by, y, n * 4);
        uint32_t bad = 0;
        for (uint32_t i = 0; i < n; i++) bad += y[i] != x[i] * 2.0f + (float)i;
        CHECK(bad == 0, "%u of %u wrong (n=%u, %u groups)", bad, n, n, groups);
    }
    pl_gpu_kernel_free(k);
    pl_gpu_buf_free(bx);
    pl_gpu_buf_free(by);
    free(x), free(y);
}

static void test_upload_chunks(pl_gpu *g) {
    /* 20 MB: crosses the 8 MB staging limit twice, at an offset */
    size_t n = 5u << 20;
    uint32_t *a = malloc(n * 4), *b = malloc(n * 4);
    for (size_t i = 0; i < n; i++) a[i] = gt_u32();
    pl_gpu_buf *buf = NULL;
    CHECK(pl_gpu_buf_new(g, n * 4 + 64, PL_GPU_STORAGE, "big", &buf) == PL_OK, "%s",
          pl_last_error());
    if (!buf) return;
    uint64_t before = pl_gpu_get_stats(g)->bytes_uploaded;
    CHECK(pl_gpu_write(g, buf, 64, a, n * 4) == PL_OK, "%s", pl_last_error());
    CHECK(pl_gpu_get_stats(g)->bytes_uploaded - before == n * 4, "upload counter");
    memset(b, 0, n * 4);
    CHECK(pl_gpu_download(g, buf, 64, b, n * 4) == PL_OK, "%s", pl_last_error());
    CHECK(!memcmp(a, b, n * 4), "20 MB round trip differs");
    /* a small read at an odd word offset (map offsets must be multiples of 8) */
    uint32_t w[3];
    CHECK(pl_gpu_download(g, buf, 64 + 4 * 7, w, 12) == PL_OK, "%s", pl_last_error());
    CHECK(!memcmp(w, a + 7, 12), "read at offset 28");
    pl_gpu_buf_free(buf);
    free(a), free(b);
}

static void test_copy_readback(pl_gpu *g) {
    uint32_t v[64];
    for (int i = 0; i < 64; i++) v[i] = gt_u32();
    pl_gpu_buf *src = gt_buf(g, v, sizeof v), *rb = NULL;
    CHECK(pl_gpu_buf_new(g, 256, PL_GPU_READBACK, "rb", &rb) == PL_OK, "%s", pl_last_error());
    if (!src || !rb) return;
    pl_gpu_begin(g);
    pl_gpu_copy(g, src, 16, rb, 0, 64);
    CHECK(pl_gpu_submit(g) == PL_OK, "%s", pl_last_error());
    uint32_t out[16];
    CHECK(pl_gpu_read(g, rb, 0, out, 64) == PL_OK, "%s", pl_last_error());
    CHECK(!memcmp(out, v + 4, 64), "copied words differ");
    /* reading a storage buffer through pl_gpu_read is refused */
    CHECK(pl_gpu_read(g, src, 0, out, 4) != PL_OK, "read of a non-readback buffer");
    pl_gpu_buf_free(src);
    pl_gpu_buf_free(rb);
}

static void test_errors(pl_gpu *g) {
    pl_gpu_kernel *k = NULL;
    const char *bad = "@compute @workgroup_size(1)\nfn main() {\n  let x: f32 = 1u;\n}\n";
    CHECK(pl_gpu_kernel_new(g, bad, "bad", &k) != PL_OK && !k, "bad WGSL accepted");
    CHECK(strstr(pl_last_error(), "bad") && strstr(pl_last_error(), "rejected"), "message: %s",
          pl_last_error());
    /* the device still works after a rejected shader */
    test_scale(g, 100);
    pl_gpu_buf *b = NULL;
    CHECK(pl_gpu_buf_new(g, pl_gpu_get_info(g)->max_buffer + 1024, PL_GPU_STORAGE, "huge", &b) !=
                  PL_OK &&
              !b,
          "over-size buffer accepted");
    CHECK(pl_gpu_buf_new(g, 16, (pl_gpu_usage)3, "mixed", &b) != PL_OK, "bad usage accepted");
    /* a binding that does not fit its buffer */
    char src[1024];
    snprintf(src, sizeof src, k_scale, 4u);
    CHECK(pl_gpu_kernel_new(g, src, "scale", &k) == PL_OK, "%s", pl_last_error());
    pl_gpu_buf *x = gt_buf(g, NULL, 16);
    pl_gpu_ref refs[2] = {{x, 0, 0}, {x, 32, 16}};
    pl_gpu_bind *bind = NULL;
    CHECK(pl_gpu_bind_new(g, k, refs, 2, &bind) != PL_OK && !bind, "binding past the end");
    /* writes outside a buffer */
    CHECK(pl_gpu_write(g, x, 8, src, 16) != PL_OK, "write past the end");
    CHECK(pl_gpu_write(g, x, 2, src, 4) != PL_OK, "unaligned write");
    pl_gpu_kernel_free(k);
    pl_gpu_buf_free(x);
}

static void test_bad_library(void) {
    pl_gpu *g = NULL;
    CHECK(pl_gpu_open("/nonexistent/libwebgpu.so", &g) != PL_OK && !g, "missing library opened");
    CHECK(strstr(pl_last_error(), "not found") != NULL, "message: %s", pl_last_error());
    CHECK(pl_gpu_open("/etc/hostname", &g) != PL_OK && !g, "non-library opened");
}

static void run_tests(void) {
    gt_seed();
    test_bad_library();
    pl_gpu *g = gt_open();
    if (!g) return;
    const pl_gpu_info *info = pl_gpu_get_info(g);
    CHECK(info->max_groups_per_dim >= 65535 && info->storage_align && info->max_binding,
          "limits not read");
    test_scale(g, 1000);
    /* more groups than one dimension holds: the 2-D grid */
    test_scale(g, (info->max_groups_per_dim + 1000) * 32u);
    test_upload_chunks(g);
    test_copy_readback(g);
    test_errors(g);
    CHECK(pl_gpu_get_stats(g)->dispatches >= 3, "dispatch counter");
    pl_gpu_close(g);
}
