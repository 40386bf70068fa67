/* dawn.c - device.h over the standard webgpu.h C API, implemented by Dawn and loaded with
 * dlopen at run time (npm bun-webgpu-linux-x64, see ../shared/docs/webgpu-native.md).
 *
 * Facts this file is built on, measured on lavapipe and on the H200:
 * - RequestAdapter with default options silently returns Dawn's Null backend when Vulkan is
 *   unusable, so we ask for Vulkan and check what we got.
 * - WaitAny(0) polling is the fastest way to wait (no timed-wait capability needed); the
 *   callbacks of WaitAnyOnly futures fire inside WaitAny.
 * - The uncaptured-error callback fires synchronously inside the offending call, so a flag
 *   set there is checked after creations and at submit; pipelines get real error scopes.
 * - Queue writes stay staged until a submit, so big uploads submit and wait every 8 MB. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "device.h"
#include "webgpu.h"

/* The native loader: Dawn is dlopen'ed. wasm32-wasi has no dlopen, so there the loader is
 * compiled out and opening fails with the library's usual "no Dawn" kind of error (the
 * browser's own WebGPU, navigator.gpu, needs a JavaScript binding: later work). */
#ifdef __wasi__
#define PL_NO_DLOPEN 1
static void *lib_sym(void *h, const char *name) {
    (void)h, (void)name;
    return NULL;
}
#else
#include <dlfcn.h>
static void *lib_sym(void *h, const char *name) {
    return dlsym(h, name);
}
#endif

/* Under LeakSanitizer, allocations made while the Vulkan loader probes drivers are not ours:
 * the loader loads every installed driver (intel, radeon, virtio, ...), some leak when they
 * find no hardware, and they are unloaded before exit, so their leaks cannot even be named.
 * Only the adapter request, where the probe happens, is excluded; every other allocation, ours
 * and Dawn's, is still checked. */
#if defined(__SANITIZE_ADDRESS__)
#define PL_LSAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define PL_LSAN 1
#endif
#endif
#ifdef PL_LSAN
#include <sanitizer/lsan_interface.h>
#define PL_LSAN_OFF() __lsan_disable()
#define PL_LSAN_ON()  __lsan_enable()
#else
#define PL_LSAN_OFF() ((void)0)
#define PL_LSAN_ON()  ((void)0)
#endif

#define STAGE_LIMIT  (8u << 20) /* bytes written between submits while uploading */
#define WAIT_LIMIT_S 600.0      /* a wait longer than this means the device is stuck */

typedef struct {
#define PL_DECLARE_PROC(name, ret, args) ret(*name) args;
    PL_WGPU_PROCS(PL_DECLARE_PROC)
#undef PL_DECLARE_PROC
} procs;

struct pl_gpu_kernel {
    pl_gpu *g;
    WGPUComputePipeline pipe;
    WGPUBindGroupLayout layout;
    uint64_t hash;
    char *wgsl; /* kept to find identical kernels (the pipeline cache) */
    int refs;
    pl_gpu_kernel *next;
};

struct pl_gpu_buf {
    pl_gpu *g;
    WGPUBuffer buf;
    uint64_t size;
    pl_gpu_usage usage;
};

struct pl_gpu_bind {
    pl_gpu *g;
    WGPUBindGroup group;
};

struct pl_gpu {
    void *lib;
    procs p;
    WGPUInstance inst;
    WGPUAdapter adapter;
    WGPUDevice dev;
    WGPUQueue queue;
    pl_gpu_info info;
    pl_gpu_stats stats;
    /* recording state */
    WGPUCommandEncoder enc;
    WGPUComputePassEncoder pass;
    WGPUComputePipeline last_pipe;
    WGPUBindGroup last_group;
    size_t staged; /* bytes written since the last submit */
    /* errors reported by callbacks: the first message since the last check */
    int err, lost, closing;
    char err_msg[512];
    pl_gpu_kernel *kernels; /* every live kernel, for reuse of identical WGSL */
    pl_gpu_buf *scratch;    /* READBACK buffer for pl_gpu_download */
};

double pl_gpu_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static WGPUStringView sv(const char *s) {
    WGPUStringView v = {s, s ? WGPU_STRLEN : 0};
    return v;
}

/* Copy a string view into dst as one line (first line only, NUL-terminated). */
static void sv_line(char *dst, size_t cap, WGPUStringView v) {
    size_t n = 0;
    if (v.data) n = v.length == WGPU_STRLEN ? strlen(v.data) : v.length;
    size_t o = 0;
    for (size_t i = 0; i < n && o + 1 < cap; i++) {
        char c = v.data[i];
        if (c == '\n') {
            /* skip the empty lines and source excerpts WGSL messages carry */
            if (o && i + 1 < n && v.data[i + 1] != ' ' && v.data[i + 1] != '\n')
                c = ' ';
            else
                break;
        }
        dst[o++] = c;
    }
    dst[o] = 0;
}

/* ------------------------------------------------------------------ callbacks */

static void on_uncaptured(const WGPUDevice *d, WGPUEnum type, WGPUStringView m, void *ud1,
                          void *ud2) {
    (void)d, (void)type, (void)ud2;
    pl_gpu *g = ud1;
    if (!g->err) sv_line(g->err_msg, sizeof g->err_msg, m);
    g->err = 1;
}

static void on_lost(const WGPUDevice *d, WGPUEnum reason, WGPUStringView m, void *ud1, void *ud2) {
    (void)d, (void)reason, (void)ud2;
    pl_gpu *g = ud1;
    if (g->closing) return; /* destroying the device reports itself as a loss */
    g->lost = 1;
    if (!g->err) sv_line(g->err_msg, sizeof g->err_msg, m);
    g->err = 1;
}

typedef struct {
    int done;
    WGPUEnum status, type;
    void *handle;
    char msg[512];
} reply;

static void on_adapter(WGPUEnum st, WGPUAdapter a, WGPUStringView m, void *ud1, void *ud2) {
    (void)ud2;
    reply *r = ud1;
    r->status = st, r->handle = a, r->done = 1;
    sv_line(r->msg, sizeof r->msg, m);
}

static void on_device(WGPUEnum st, WGPUDevice d, WGPUStringView m, void *ud1, void *ud2) {
    (void)ud2;
    reply *r = ud1;
    r->status = st, r->handle = d, r->done = 1;
    sv_line(r->msg, sizeof r->msg, m);
}

static void on_status(WGPUEnum st, WGPUStringView m, void *ud1, void *ud2) {
    (void)ud2;
    reply *r = ud1;
    r->status = st, r->done = 1;
    sv_line(r->msg, sizeof r->msg, m);
}

static void on_scope(WGPUEnum st, WGPUEnum type, WGPUStringView m, void *ud1, void *ud2) {
    (void)ud2;
    reply *r = ud1;
    r->status = st, r->type = type, r->done = 1;
    sv_line(r->msg, sizeof r->msg, m);
}

/* Poll a WaitAnyOnly future to completion: spin briefly on a real GPU (a token's read back
 * is ~20 us away), then sleep in growing steps so a software adapter's threads (lavapipe)
 * get the CPU instead of this loop. */
static pl_status wait_future(pl_gpu *g, WGPUFuture f, const char *what) {
    double t0 = pl_gpu_now();
    long spins = g->info.software ? 4 : 20000, sleep_ns = 5000;
    for (long i = 0;; i++) {
        WGPUFutureWaitInfo wi = {f, 0};
        WGPUEnum st = g->p.wgpuInstanceWaitAny(g->inst, 1, &wi, 0);
        if (st == WGPU_WAIT_SUCCESS) return PL_OK;
        if (st != WGPU_WAIT_TIMED_OUT) return pl_fail(PL_ERR, "GPU: waiting for %s failed", what);
        if (i < spins) continue;
        struct timespec ts = {0, sleep_ns};
        nanosleep(&ts, NULL);
        if (sleep_ns < 200000) sleep_ns += sleep_ns / 2;
        if (pl_gpu_now() - t0 > WAIT_LIMIT_S)
            return pl_fail(PL_ERR, "GPU: %s did not finish in %.0f s", what, WAIT_LIMIT_S);
    }
}

/* The first error the device reported since the last call, as a failure. */
static pl_status take_error(pl_gpu *g, const char *what) {
    if (!g->err) return PL_OK;
    if (!g->lost) g->err = 0;
    return pl_fail(PL_ERR, "GPU %s: %s%s", what, g->lost ? "device lost: " : "", g->err_msg);
}

/* ------------------------------------------------------------------ open / close */

static void *open_lib(const char *lib, char *tried, size_t cap) {
#ifdef PL_NO_DLOPEN
    (void)lib;
    snprintf(tried, cap,
             "WebGPU is not available in the wasm32 build (no native Dawn loader; "
             "the browser's WebGPU binding is not written yet)");
    return NULL;
#else
    const char *rel = "node_modules/bun-webgpu-linux-x64/libwebgpu_wrapper.so";
    char cand[4][1100];
    int n = 0;
    if (lib && *lib) {
        snprintf(cand[n++], sizeof cand[0], "%s", lib);
    } else {
        snprintf(cand[n++], sizeof cand[0], "%s", rel);
        /* next to the executable and one folder up (build/pooled -> repo root) */
        char exe[1024];
        ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
        if (len > 0) {
            exe[len] = 0;
            char *slash = strrchr(exe, '/');
            if (slash) {
                *slash = 0;
                snprintf(cand[n++], sizeof cand[0], "%s/%s", exe, rel);
                slash = strrchr(exe, '/');
                if (slash) {
                    *slash = 0;
                    snprintf(cand[n++], sizeof cand[0], "%s/%s", exe, rel);
                }
            }
        }
    }
    for (int i = 0; i < n; i++) {
        if (access(cand[i], R_OK) != 0) continue;
        void *h = dlopen(cand[i], RTLD_NOW | RTLD_LOCAL);
        if (h) return h;
        snprintf(tried, cap, "dlopen %.600s: %.600s", cand[i], dlerror());
        return NULL;
    }
    snprintf(tried, cap, "Dawn library not found (%.600s; run tools/setup.sh or set POOLED_DAWN)",
             cand[0]);
    return NULL;
#endif
}

/* Dawn lists chromium-experimental-* features only with its allow_unsafe_apis toggle on the
 * adapter (and the device), and on Vulkan the subgroup matrices only with its Vulkan memory
 * model toggle too (its feature check refuses them without it, so the adapter hides them). */
static const char *const unsafe_toggle[2] = {"allow_unsafe_apis", "use_vulkan_memory_model"};

/* The adapter's subgroup-matrix configurations into g->info (n_smx 0 where it has none). */
static void probe_smx(pl_gpu *g) {
    if (!g->p.wgpuAdapterHasFeature(g->adapter, WGPU_FEATURE_SUBGROUP_MATRIX)) return;
    WGPUAdapterPropertiesSubgroupMatrixConfigs sc;
    memset(&sc, 0, sizeof sc);
    sc.chain.sType = WGPU_STYPE_SUBGROUP_MATRIX_CONFIGS;
    WGPUAdapterInfo ai;
    memset(&ai, 0, sizeof ai);
    ai.nextInChain = &sc.chain;
    if (g->p.wgpuAdapterGetInfo(g->adapter, &ai) != WGPU_STATUS_SUCCESS) return;
    for (size_t i = 0; i < sc.configCount && g->info.n_smx < 16; i++) {
        const WGPUSubgroupMatrixConfig *c = &sc.configs[i];
        int k = g->info.n_smx++;
        g->info.smx[k].type = c->componentType, g->info.smx[k].result = c->resultComponentType;
        g->info.smx[k].m = c->M, g->info.smx[k].n = c->N, g->info.smx[k].k = c->K;
    }
    g->p.wgpuAdapterPropertiesSubgroupMatrixConfigsFreeMembers(sc);
    g->p.wgpuAdapterInfoFreeMembers(ai);
}

static const char *smx_type(uint32_t t) {
    static const char *const names[5] = {"?", "f32", "f16", "u32", "i32"};
    return names[t < 5 ? t : 0];
}

const char *pl_gpu_smx_name(const pl_gpu_info *info, int i, char *buf, size_t cap) {
    snprintf(buf, cap, "%s x %s -> %s %ux%ux%u", smx_type(info->smx[i].type),
             smx_type(info->smx[i].type), smx_type(info->smx[i].result), info->smx[i].m,
             info->smx[i].n, info->smx[i].k);
    return buf;
}

int pl_gpu_smx_pick(const pl_gpu_info *info) {
    if (!info->has_smx) return -1;
    int best = -1;
    for (int i = 0; i < info->n_smx && i < 16; i++) {
        uint32_t m = info->smx[i].m, n = info->smx[i].n, k = info->smx[i].k;
        if (info->smx[i].type != WGPU_SMX_F16 || info->smx[i].result != WGPU_SMX_F32) continue;
        if (m < 8 || n < 8 || !k || 32 % m || 32 % n || 32 % k) continue;
        /* the largest product tile, then the longest K: fewest loads per multiply */
        if (best < 0 || m * n > info->smx[best].m * info->smx[best].n ||
            (m * n == info->smx[best].m * info->smx[best].n && k > info->smx[best].k))
            best = i;
    }
    return best;
}

static pl_status request_adapter(pl_gpu *g, const pl_gpu_open_opts *oo) {
    WGPURequestAdapterOptions o;
    memset(&o, 0, sizeof o);
    WGPUDawnTogglesDescriptor td;
    memset(&td, 0, sizeof td);
    td.chain.sType = WGPU_STYPE_DAWN_TOGGLES;
    td.enabledToggleCount = 2;
    td.enabledToggles = unsafe_toggle;
    if (oo->smx > 0) o.nextInChain = &td.chain; /* (only where they may be taken) */
    o.backendType = WGPU_BACKEND_VULKAN;
    o.powerPreference = 2; /* high performance */
    reply r;
    memset(&r, 0, sizeof r);
    WGPURequestAdapterCallbackInfo ci = {NULL, WGPU_CALLBACK_MODE_WAIT_ANY_ONLY, on_adapter, &r,
                                         NULL};
    PL_LSAN_OFF();
    WGPUFuture f = g->p.wgpuInstanceRequestAdapter(g->inst, &o, ci);
    pl_status st = wait_future(g, f, "the adapter");
    PL_LSAN_ON();
    if (st != PL_OK) return PL_ERR;
    if (r.status != WGPU_REQUEST_SUCCESS || !r.handle)
        return pl_fail(PL_ERR, "no Vulkan GPU adapter%s%s (is a Vulkan driver installed?)",
                       r.msg[0] ? ": " : "", r.msg);
    g->adapter = r.handle;

    WGPUAdapterInfo ai;
    memset(&ai, 0, sizeof ai);
    if (g->p.wgpuAdapterGetInfo(g->adapter, &ai) != WGPU_STATUS_SUCCESS)
        return pl_fail(PL_ERR, "GPU adapter gave no information");
    char dev[96], desc[96];
    sv_line(dev, sizeof dev, ai.device);
    sv_line(desc, sizeof desc, ai.description);
    WGPUEnum backend = ai.backendType;
    g->info.software = ai.adapterType == WGPU_ADAPTER_TYPE_CPU;
    g->info.subgroup_min = ai.subgroupMinSize;
    g->info.subgroup_max = ai.subgroupMaxSize;
    snprintf(g->info.name, sizeof g->info.name, "%.90s (Vulkan; %.90s)", dev, desc);
    g->p.wgpuAdapterInfoFreeMembers(ai);
    if (backend == WGPU_BACKEND_NULL)
        return pl_fail(PL_ERR, "only Dawn's Null backend is available (no usable Vulkan driver)");
    if (backend != WGPU_BACKEND_VULKAN)
        return pl_fail(PL_ERR, "GPU adapter is not Vulkan (backend %u)", backend);
    if (oo->smx > 0) probe_smx(g);
    return PL_OK;
}

/* Device toggles. disable_robustness drops the bounds clamps Dawn adds to every storage
 * access (our kernels index within their bindings by construction, and the unit tests run
 * with the clamps on through pl_gpu_open_opts.robust too); disable_workgroup_init skips zeroing
 * var<workgroup> memory that every kernel writes before reading. */
static pl_status request_device(pl_gpu *g, const pl_gpu_open_opts *o, int retry) {
    WGPULimits al;
    memset(&al, 0, sizeof al);
    if (g->p.wgpuAdapterGetLimits(g->adapter, &al) != WGPU_STATUS_SUCCESS)
        return pl_fail(PL_ERR, "GPU adapter gave no limits");
    al.nextInChain = NULL;
    WGPUEnum feats[4];
    size_t nf = 0;
    g->info.has_subgroups = g->p.wgpuAdapterHasFeature(g->adapter, WGPU_FEATURE_SUBGROUPS) != 0;
    if (g->info.has_subgroups) feats[nf++] = WGPU_FEATURE_SUBGROUPS;
    /* shader-f16 and subgroup matrices only together, for the prefill GEMM's f16 operands */
    int f16 = g->p.wgpuAdapterHasFeature(g->adapter, WGPU_FEATURE_SHADER_F16) != 0;
    g->info.f16_offered = f16;
    int smx = o->smx > 0 && f16 && g->info.has_subgroups && g->info.n_smx > 0 && !retry;
    if (smx) feats[nf++] = WGPU_FEATURE_SHADER_F16, feats[nf++] = WGPU_FEATURE_SUBGROUP_MATRIX;

    const char *toggles[14];
    size_t nt = 0;
    if (smx) toggles[nt++] = unsafe_toggle[0], toggles[nt++] = unsafe_toggle[1];
    if (!o->robust) toggles[nt++] = "disable_robustness";
    toggles[nt++] = "disable_workgroup_init";
    /* more device toggles for experiments: "a,b" (e.g. skip_validation) */
    char extra[256] = "";
    if (o->toggles) snprintf(extra, sizeof extra, "%s", o->toggles);
    for (char *save = NULL, *tok = strtok_r(extra, ",", &save); tok && nt < 14;
         tok = strtok_r(NULL, ",", &save))
        toggles[nt++] = tok;
    WGPUDawnTogglesDescriptor td;
    memset(&td, 0, sizeof td);
    td.chain.sType = WGPU_STYPE_DAWN_TOGGLES;
    td.enabledToggleCount = nt;
    td.enabledToggles = toggles;

    WGPUDeviceDescriptor dd;
    memset(&dd, 0, sizeof dd);
    dd.nextInChain = &td.chain;
    dd.label = sv("pooled");
    dd.requiredFeatureCount = nf;
    dd.requiredFeatures = feats;
    dd.requiredLimits = &al; /* everything the adapter offers: big bindings, 1024 threads */
    dd.deviceLostCallbackInfo.mode = WGPU_CALLBACK_MODE_ALLOW_SPONTANEOUS;
    dd.deviceLostCallbackInfo.callback = on_lost;
    dd.deviceLostCallbackInfo.userdata1 = g;
    dd.uncapturedErrorCallbackInfo.callback = on_uncaptured;
    dd.uncapturedErrorCallbackInfo.userdata1 = g;
    reply r;
    memset(&r, 0, sizeof r);
    WGPURequestDeviceCallbackInfo ci = {NULL, WGPU_CALLBACK_MODE_WAIT_ANY_ONLY, on_device, &r,
                                        NULL};
    WGPUFuture f = g->p.wgpuAdapterRequestDevice(g->adapter, &dd, ci);
    if (wait_future(g, f, "the device") != PL_OK) return PL_ERR;
    if ((r.status != WGPU_REQUEST_SUCCESS || !r.handle) && smx) /* once more without them */
        return request_device(g, o, 1);
    if (r.status != WGPU_REQUEST_SUCCESS || !r.handle)
        return pl_fail(PL_ERR, "GPU device refused: %s", r.msg);
    g->dev = r.handle;
    g->queue = g->p.wgpuDeviceGetQueue(g->dev);
    g->info.has_f16 = smx && g->p.wgpuDeviceHasFeature(g->dev, WGPU_FEATURE_SHADER_F16) != 0;
    g->info.has_smx =
        g->info.has_f16 && g->p.wgpuDeviceHasFeature(g->dev, WGPU_FEATURE_SUBGROUP_MATRIX) != 0;

    WGPULimits dl;
    memset(&dl, 0, sizeof dl);
    g->p.wgpuDeviceGetLimits(g->dev, &dl);
    g->info.max_binding = dl.maxStorageBufferBindingSize;
    g->info.max_buffer = dl.maxBufferSize;
    g->info.max_groups_per_dim = dl.maxComputeWorkgroupsPerDimension;
    g->info.max_invocations = dl.maxComputeInvocationsPerWorkgroup;
    g->info.max_wg_storage = dl.maxComputeWorkgroupStorageSize;
    g->info.max_storage_buffers = dl.maxStorageBuffersPerShaderStage;
    g->info.storage_align = dl.minStorageBufferOffsetAlignment;
    g->info.uniform_align = dl.minUniformBufferOffsetAlignment;
    return PL_OK;
}

pl_status pl_gpu_open(const char *lib, pl_gpu **out) {
    pl_gpu_open_opts o = {.dawn_lib = lib};
    return pl_gpu_open_with(&o, out);
}

pl_status pl_gpu_open_with(const pl_gpu_open_opts *o, pl_gpu **out) {
    const char *lib = o->dawn_lib;
    *out = NULL;
    pl_gpu *g = calloc(1, sizeof *g);
    if (!g) return pl_fail(PL_ERR_NOMEM, "out of memory");
    char why[1400];
    g->lib = open_lib(lib, why, sizeof why);
    if (!g->lib) {
        free(g);
        return pl_fail(PL_ERR, "%s", why);
    }
#define PL_LOAD_PROC(name, ret, args)                                                              \
    *(void **)&g->p.name = lib_sym(g->lib, #name);                                                 \
    if (!g->p.name) {                                                                              \
        free(g);                                                                                   \
        return pl_fail(PL_ERR, "Dawn library lacks %s (wrong version?)", #name);                   \
    }
    PL_WGPU_PROCS(PL_LOAD_PROC)
#undef PL_LOAD_PROC
    g->inst = g->p.wgpuCreateInstance(NULL);
    if (!g->inst) {
        free(g);
        return pl_fail(PL_ERR, "could not create a WebGPU instance");
    }
    if (request_adapter(g, o) != PL_OK || request_device(g, o, 0) != PL_OK) {
        char msg[600];
        snprintf(msg, sizeof msg, "%s", pl_last_error());
        pl_gpu_close(g);
        return pl_fail(PL_ERR, "%s", msg);
    }
    *out = g;
    return PL_OK;
}

void pl_gpu_close(pl_gpu *g) {
    if (!g) return;
    if (g->scratch) pl_gpu_buf_free(g->scratch);
    if (g->pass) g->p.wgpuComputePassEncoderRelease(g->pass);
    if (g->enc) g->p.wgpuCommandEncoderRelease(g->enc);
    g->closing = 1;
    if (g->queue) g->p.wgpuQueueRelease(g->queue);
    if (g->dev) {
        g->p.wgpuDeviceDestroy(g->dev);
        g->p.wgpuDeviceRelease(g->dev);
    }
    if (g->adapter) g->p.wgpuAdapterRelease(g->adapter);
    if (g->inst) {
        g->p.wgpuInstanceProcessEvents(g->inst); /* deliver the device-lost callback now */
        g->p.wgpuInstanceRelease(g->inst);
    }
    /* The library stays loaded: Dawn keeps threads and static state that dlclose would
     * pull out from under them, and a second pl_gpu_open reuses the same handle. */
    free(g);
}

const pl_gpu_info *pl_gpu_get_info(const pl_gpu *g) {
    return &g->info;
}
const pl_gpu_stats *pl_gpu_get_stats(const pl_gpu *g) {
    return &g->stats;
}

/* ------------------------------------------------------------------ buffers */

pl_status pl_gpu_buf_new(pl_gpu *g, uint64_t size, pl_gpu_usage usage, const char *label,
                         pl_gpu_buf **out) {
    *out = NULL;
    WGPUFlags u = 0;
    if (usage == PL_GPU_STORAGE)
        u = WGPU_BUFFER_USAGE_STORAGE | WGPU_BUFFER_USAGE_COPY_SRC | WGPU_BUFFER_USAGE_COPY_DST;
    else if (usage == PL_GPU_UNIFORM)
        u = WGPU_BUFFER_USAGE_UNIFORM | WGPU_BUFFER_USAGE_COPY_DST;
    else if (usage == PL_GPU_READBACK)
        u = WGPU_BUFFER_USAGE_MAP_READ | WGPU_BUFFER_USAGE_COPY_DST;
    else
        return pl_fail(PL_ERR_ARG, "GPU buffer %s: bad usage %d", label, (int)usage);
    size = (size + 3) & ~(uint64_t)3;
    if (size == 0) size = 4;
    if (size > g->info.max_buffer)
        return pl_fail(PL_ERR_NOMEM, "GPU buffer %s: %llu bytes is over the device's %llu", label,
                       (unsigned long long)size, (unsigned long long)g->info.max_buffer);
    pl_gpu_buf *b = calloc(1, sizeof *b);
    if (!b) return pl_fail(PL_ERR_NOMEM, "out of memory");
    WGPUBufferDescriptor d = {NULL, sv(label), u, size, 0};
    g->p.wgpuDevicePushErrorScope(g->dev, WGPU_ERROR_FILTER_OUT_OF_MEMORY);
    b->buf = g->p.wgpuDeviceCreateBuffer(g->dev, &d);
    reply r;
    memset(&r, 0, sizeof r);
    WGPUPopErrorScopeCallbackInfo ci = {NULL, WGPU_CALLBACK_MODE_WAIT_ANY_ONLY, on_scope, &r, NULL};
    pl_status st = wait_future(g, g->p.wgpuDevicePopErrorScope(g->dev, ci), "a buffer");
    if (st == PL_OK && r.type != WGPU_ERROR_TYPE_NO_ERROR && r.type != 0)
        st = pl_fail(PL_ERR_NOMEM, "GPU buffer %s (%llu bytes): %s", label,
                     (unsigned long long)size, r.msg);
    if (st == PL_OK) st = take_error(g, "buffer");
    if (st != PL_OK || !b->buf) {
        if (b->buf) g->p.wgpuBufferRelease(b->buf);
        free(b);
        return st != PL_OK ? st : pl_fail(PL_ERR, "GPU buffer %s: not created", label);
    }
    b->g = g, b->size = size, b->usage = usage;
    *out = b;
    return PL_OK;
}

void pl_gpu_buf_free(pl_gpu_buf *b) {
    if (!b) return;
    b->g->p.wgpuBufferDestroy(b->buf);
    b->g->p.wgpuBufferRelease(b->buf);
    free(b);
}

uint64_t pl_gpu_buf_size(const pl_gpu_buf *b) {
    return b->size;
}

/* Submit what is queued and wait for it: releases staged upload memory. */
static pl_status flush_queue(pl_gpu *g) {
    g->p.wgpuQueueSubmit(g->queue, 0, NULL);
    g->staged = 0;
    return pl_gpu_finish(g);
}

pl_status pl_gpu_write(pl_gpu *g, pl_gpu_buf *b, uint64_t off, const void *src, size_t n) {
    if ((off | n) & 3 || off + n > b->size || b->usage == PL_GPU_READBACK)
        return pl_fail(PL_ERR_ARG, "GPU write of %zu bytes at %llu: bad range or buffer", n,
                       (unsigned long long)off);
    const unsigned char *p = src;
    while (n) {
        size_t c = n < STAGE_LIMIT - g->staged ? n : STAGE_LIMIT - g->staged;
        g->p.wgpuQueueWriteBuffer(g->queue, b->buf, off, p, c);
        g->stats.bytes_uploaded += c;
        g->staged += c, off += c, p += c, n -= c;
        if (g->staged >= STAGE_LIMIT && flush_queue(g) != PL_OK) return PL_ERR;
    }
    return take_error(g, "write");
}

/* ------------------------------------------------------------------ kernels */

static uint64_t hash_text(const char *s) {
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

pl_status pl_gpu_kernel_new(pl_gpu *g, const char *wgsl, const char *label, pl_gpu_kernel **out) {
    *out = NULL;
    uint64_t h = hash_text(wgsl);
    for (pl_gpu_kernel *k = g->kernels; k; k = k->next) {
        if (k->hash == h && !strcmp(k->wgsl, wgsl)) {
            k->refs++;
            *out = k;
            return PL_OK;
        }
    }
    pl_gpu_kernel *k = calloc(1, sizeof *k);
    char *copy = strdup(wgsl);
    if (!k || !copy) {
        free(k), free(copy);
        return pl_fail(PL_ERR_NOMEM, "out of memory");
    }
    static const WGPUEnum filters[3] = {WGPU_ERROR_FILTER_VALIDATION, WGPU_ERROR_FILTER_INTERNAL,
                                        WGPU_ERROR_FILTER_OUT_OF_MEMORY};
    for (int i = 0; i < 3; i++) g->p.wgpuDevicePushErrorScope(g->dev, filters[i]);
    WGPUShaderSourceWGSL src = {{NULL, WGPU_STYPE_SHADER_SOURCE_WGSL}, sv(wgsl)};
    WGPUShaderModuleDescriptor md = {&src.chain, sv(label)};
    WGPUShaderModule mod = g->p.wgpuDeviceCreateShaderModule(g->dev, &md);
    WGPUComputePipelineDescriptor pd;
    memset(&pd, 0, sizeof pd);
    pd.label = sv(label);
    pd.compute.module = mod;
    pd.compute.entryPoint = sv("main");
    k->pipe = g->p.wgpuDeviceCreateComputePipeline(g->dev, &pd);
    if (mod) g->p.wgpuShaderModuleRelease(mod);
    pl_status st = PL_OK;
    for (int i = 0; i < 3; i++) {
        reply r;
        memset(&r, 0, sizeof r);
        WGPUPopErrorScopeCallbackInfo ci = {NULL, WGPU_CALLBACK_MODE_WAIT_ANY_ONLY, on_scope, &r,
                                            NULL};
        pl_status w = wait_future(g, g->p.wgpuDevicePopErrorScope(g->dev, ci), "a pipeline");
        if (st == PL_OK && w != PL_OK)
            st = w;
        else if (st == PL_OK && r.type != WGPU_ERROR_TYPE_NO_ERROR && r.type != 0)
            st = pl_fail(PL_ERR, "GPU kernel %s rejected: %s", label, r.msg);
    }
    if (st == PL_OK) st = take_error(g, "kernel");
    if (st == PL_OK && !k->pipe) st = pl_fail(PL_ERR, "GPU kernel %s: no pipeline", label);
    if (st == PL_OK) k->layout = g->p.wgpuComputePipelineGetBindGroupLayout(k->pipe, 0);
    if (st != PL_OK) {
        if (k->pipe) g->p.wgpuComputePipelineRelease(k->pipe);
        free(k), free(copy);
        return st;
    }
    k->g = g, k->hash = h, k->wgsl = copy, k->refs = 1;
    k->next = g->kernels;
    g->kernels = k;
    *out = k;
    return PL_OK;
}

void pl_gpu_kernel_free(pl_gpu_kernel *k) {
    if (!k || --k->refs > 0) return;
    pl_gpu *g = k->g;
    for (pl_gpu_kernel **pp = &g->kernels; *pp; pp = &(*pp)->next) {
        if (*pp == k) {
            *pp = k->next;
            break;
        }
    }
    if (g->last_pipe == k->pipe) g->last_pipe = NULL;
    g->p.wgpuBindGroupLayoutRelease(k->layout);
    g->p.wgpuComputePipelineRelease(k->pipe);
    free(k->wgsl);
    free(k);
}

pl_status pl_gpu_bind_new(pl_gpu *g, const pl_gpu_kernel *k, const pl_gpu_ref *refs, int n,
                          pl_gpu_bind **out) {
    *out = NULL;
    WGPUBindGroupEntry e[16];
    if (n < 1 || n > 16) return pl_fail(PL_ERR_ARG, "GPU binding: %d buffers", n);
    memset(e, 0, sizeof e);
    for (int i = 0; i < n; i++) {
        const pl_gpu_ref *r = &refs[i];
        uint64_t size = r->size ? r->size : r->buf->size - r->offset;
        uint32_t align =
            r->buf->usage == PL_GPU_UNIFORM ? g->info.uniform_align : g->info.storage_align;
        if (r->offset % align || r->offset + size > r->buf->size ||
            (r->buf->usage == PL_GPU_STORAGE && size > g->info.max_binding))
            return pl_fail(PL_ERR_ARG, "GPU binding %d: range %llu+%llu does not fit", i,
                           (unsigned long long)r->offset, (unsigned long long)size);
        e[i].binding = (uint32_t)i;
        e[i].buffer = r->buf->buf;
        e[i].offset = r->offset;
        e[i].size = size;
    }
    pl_gpu_bind *b = calloc(1, sizeof *b);
    if (!b) return pl_fail(PL_ERR_NOMEM, "out of memory");
    b->g = g;
    WGPUBindGroupDescriptor d = {NULL, sv("bind"), k->layout, (size_t)n, e};
    b->group = g->p.wgpuDeviceCreateBindGroup(g->dev, &d);
    pl_status st = take_error(g, "binding");
    if (st != PL_OK || !b->group) {
        if (b->group) g->p.wgpuBindGroupRelease(b->group);
        free(b);
        return st != PL_OK ? st : pl_fail(PL_ERR, "GPU binding not created");
    }
    *out = b;
    return PL_OK;
}

void pl_gpu_bind_free(pl_gpu_bind *b) {
    if (!b) return;
    /* a new group may later get the same address: forget the one set on the pass */
    if (b->g->last_group == b->group) b->g->last_group = NULL;
    b->g->p.wgpuBindGroupRelease(b->group);
    free(b);
}

/* ------------------------------------------------------------------ recording */

void pl_gpu_begin(pl_gpu *g) {
    if (!g->enc) g->enc = g->p.wgpuDeviceCreateCommandEncoder(g->dev, NULL);
}

static void end_pass(pl_gpu *g) {
    if (!g->pass) return;
    g->p.wgpuComputePassEncoderEnd(g->pass);
    g->p.wgpuComputePassEncoderRelease(g->pass);
    g->pass = NULL;
    g->last_pipe = NULL;
    g->last_group = NULL;
}

void pl_gpu_dispatch(pl_gpu *g, const pl_gpu_kernel *k, const pl_gpu_bind *b, uint32_t n_groups) {
    if (!n_groups) return;
    pl_gpu_begin(g);
    if (!g->pass) g->pass = g->p.wgpuCommandEncoderBeginComputePass(g->enc, NULL);
    if (g->last_pipe != k->pipe) {
        g->p.wgpuComputePassEncoderSetPipeline(g->pass, k->pipe);
        g->last_pipe = k->pipe;
    }
    if (g->last_group != b->group) {
        g->p.wgpuComputePassEncoderSetBindGroup(g->pass, 0, b->group, 0, NULL);
        g->last_group = b->group;
    }
    /* Over the per-dimension limit: the fewest rows of equal width that cover n_groups. */
    uint32_t max = g->info.max_groups_per_dim, y = (n_groups + max - 1) / max;
    uint32_t x = (n_groups + y - 1) / y;
    g->p.wgpuComputePassEncoderDispatchWorkgroups(g->pass, x, y, 1);
    g->stats.dispatches++;
}

void pl_gpu_copy(pl_gpu *g, pl_gpu_buf *src, uint64_t src_off, pl_gpu_buf *dst, uint64_t dst_off,
                 uint64_t n) {
    pl_gpu_begin(g);
    end_pass(g);
    g->p.wgpuCommandEncoderCopyBufferToBuffer(g->enc, src->buf, src_off, dst->buf, dst_off, n);
}

pl_status pl_gpu_submit(pl_gpu *g) {
    pl_gpu_begin(g);
    end_pass(g);
    WGPUCommandBuffer cb = g->p.wgpuCommandEncoderFinish(g->enc, NULL);
    g->p.wgpuCommandEncoderRelease(g->enc);
    g->enc = NULL;
    if (cb) {
        g->p.wgpuQueueSubmit(g->queue, 1, &cb);
        g->p.wgpuCommandBufferRelease(cb);
    }
    g->staged = 0;
    g->stats.submits++;
    return take_error(g, "submit");
}

pl_status pl_gpu_end(pl_gpu *g, pl_gpu_cmd **out) {
    *out = NULL;
    if (!g->enc) return take_error(g, "recording");
    end_pass(g);
    WGPUCommandBuffer cb = g->p.wgpuCommandEncoderFinish(g->enc, NULL);
    g->p.wgpuCommandEncoderRelease(g->enc);
    g->enc = NULL;
    pl_status st = take_error(g, "recording");
    if (st != PL_OK || !cb) {
        if (cb) g->p.wgpuCommandBufferRelease(cb);
        return st != PL_OK ? st : pl_fail(PL_ERR, "GPU recording not finished");
    }
    *out = (pl_gpu_cmd *)cb;
    return PL_OK;
}

pl_status pl_gpu_submit_cmd(pl_gpu *g, pl_gpu_cmd *c) {
    if (!c) return PL_OK;
    WGPUCommandBuffer cb = (WGPUCommandBuffer)c;
    g->p.wgpuQueueSubmit(g->queue, 1, &cb);
    g->p.wgpuCommandBufferRelease(cb);
    g->staged = 0;
    g->stats.submits++;
    return take_error(g, "submit");
}

void pl_gpu_cmd_free(pl_gpu *g, pl_gpu_cmd *c) {
    if (c) g->p.wgpuCommandBufferRelease((WGPUCommandBuffer)c);
}

pl_status pl_gpu_finish(pl_gpu *g) {
    reply r;
    memset(&r, 0, sizeof r);
    WGPUQueueWorkDoneCallbackInfo ci = {NULL, WGPU_CALLBACK_MODE_WAIT_ANY_ONLY, on_status, &r,
                                        NULL};
    if (wait_future(g, g->p.wgpuQueueOnSubmittedWorkDone(g->queue, ci), "the queue") != PL_OK)
        return PL_ERR;
    if (r.status != WGPU_REQUEST_SUCCESS) return pl_fail(PL_ERR, "GPU queue failed: %s", r.msg);
    return take_error(g, "queue");
}

pl_status pl_gpu_read(pl_gpu *g, pl_gpu_buf *b, uint64_t off, void *dst, size_t n) {
    /* map offsets must be multiples of 8 and sizes of 4 */
    uint64_t lo = off & ~(uint64_t)7, hi = (off + n + 3) & ~(uint64_t)3;
    if (b->usage != PL_GPU_READBACK || off + n > b->size)
        return pl_fail(PL_ERR_ARG, "GPU read of %zu bytes at %llu: bad range or buffer", n,
                       (unsigned long long)off);
    reply r;
    memset(&r, 0, sizeof r);
    WGPUBufferMapCallbackInfo ci = {NULL, WGPU_CALLBACK_MODE_WAIT_ANY_ONLY, on_status, &r, NULL};
    WGPUFuture f =
        g->p.wgpuBufferMapAsync(b->buf, WGPU_MAP_MODE_READ, (size_t)lo, (size_t)(hi - lo), ci);
    if (wait_future(g, f, "a read back") != PL_OK) return PL_ERR;
    if (r.status != WGPU_REQUEST_SUCCESS) {
        take_error(g, "read");
        return pl_fail(PL_ERR, "GPU read back failed: %s", r.msg[0] ? r.msg : g->err_msg);
    }
    const unsigned char *p =
        g->p.wgpuBufferGetConstMappedRange(b->buf, (size_t)lo, (size_t)(hi - lo));
    if (p) memcpy(dst, p + (off - lo), n);
    g->p.wgpuBufferUnmap(b->buf);
    g->stats.bytes_read += n;
    return p ? PL_OK : pl_fail(PL_ERR, "GPU read back: buffer not mapped");
}

pl_status pl_gpu_download(pl_gpu *g, pl_gpu_buf *b, uint64_t off, void *dst, size_t n) {
    if (g->enc) return pl_fail(PL_ERR_ARG, "GPU download while recording");
    if ((off & 3) || off + n > b->size || b->usage != PL_GPU_STORAGE)
        return pl_fail(PL_ERR_ARG, "GPU download of %zu bytes at %llu: bad range or buffer", n,
                       (unsigned long long)off);
    uint64_t len = (n + 3) & ~(size_t)3;
    if (!g->scratch || g->scratch->size < len) {
        pl_gpu_buf_free(g->scratch);
        g->scratch = NULL;
        if (pl_gpu_buf_new(g, len, PL_GPU_READBACK, "download", &g->scratch) != PL_OK)
            return PL_ERR;
    }
    pl_gpu_copy(g, b, off, g->scratch, 0, len);
    if (pl_gpu_submit(g) != PL_OK) return PL_ERR;
    return pl_gpu_read(g, g->scratch, 0, dst, n);
}
