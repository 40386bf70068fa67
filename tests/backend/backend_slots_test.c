/* backend_slots_test.c - no backend leaves a slot of pl_backend_methods empty.
 *
 * For every backend this build can open (the CPU; WebGPU too, lavapipe in CI: a missing
 * adapter is a failure unless POOLED_SKIP_GPU=1 outside CI, as in tests/gpu/), walk the
 * methods struct as raw memory, one function pointer after another, so the walk covers
 * every slot whether or not PL_BACKEND_SLOTS names it, and require each to be set. Then
 * check that pl_be_check_methods (what each constructor calls) refuses a copy of each
 * backend's methods with any one slot emptied, naming that slot. */
#include <string.h>

#include "cpu/cpu.h"
#include "gpu/gpu.h"
#include "test.h"

typedef void (*any_fn)(void);
#define N_SLOTS (sizeof(pl_backend_methods) / sizeof(any_fn))

static const char *const slot_names[] = {
#define SLOT_NAME(name) #name,
    PL_BACKEND_SLOTS(SLOT_NAME)
#undef SLOT_NAME
};

static void check_backend(const pl_backend *be) {
    CHECK(sizeof slot_names / sizeof slot_names[0] == N_SLOTS,
          "PL_BACKEND_SLOTS names %zu slots, the struct holds %zu",
          sizeof slot_names / sizeof slot_names[0], N_SLOTS);
    const unsigned char *raw = (const unsigned char *)be->m;
    for (size_t i = 0; i < N_SLOTS; i++) {
        any_fn f;
        memcpy(&f, raw + i * sizeof f, sizeof f);
        CHECK(f != NULL, "%s backend: slot %zu (%s) is empty", be->name, i,
              i < N_SLOTS ? slot_names[i] : "?");
    }
    CHECK(pl_be_check_methods(be) == PL_OK, "%s", pl_last_error());

    /* the creation-time check catches each slot left empty, by name */
    for (size_t i = 0; i < N_SLOTS; i++) {
        pl_backend_methods holed = *be->m;
        memset((unsigned char *)&holed + i * sizeof(any_fn), 0, sizeof(any_fn));
        pl_backend fake = *be;
        fake.m = &holed;
        pl_status s = pl_be_check_methods(&fake);
        CHECK(s != PL_OK, "%s backend: empty slot %s accepted", be->name, slot_names[i]);
        CHECK(s == PL_OK || strstr(pl_last_error(), slot_names[i]),
              "%s backend: empty slot %s reported as '%s'", be->name, slot_names[i],
              pl_last_error());
    }
    pl_backend none = *be;
    none.m = NULL;
    CHECK(pl_be_check_methods(&none) != PL_OK, "a backend without methods accepted");
}

static void run_tests(void) {
    pl_backend *cpu = NULL;
    CHECK(pl_cpu_new(1, &cpu) == PL_OK, "cpu: %s", pl_last_error());
    if (cpu) check_backend(cpu);
    pl_be_destroy(cpu);

    if (!getenv("XDG_RUNTIME_DIR")) setenv("XDG_RUNTIME_DIR", "/tmp", 0); /* loader noise */
    pl_gpu_backend_opts o = {.no_tune = 1, .no_selftest = 1};
    pl_backend *gpu = NULL;
    if (pl_gpu_backend_new(&o, &gpu) == PL_OK) {
        fprintf(stderr, "GPU: %s\n", gpu->device);
        check_backend(gpu);
        pl_be_destroy(gpu);
        return;
    }
    test_no_gpu("the webgpu backend", pl_last_error());
}
