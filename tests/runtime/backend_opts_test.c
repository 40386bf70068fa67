/* backend_opts_test.c - the library takes its settings from option structs, never from the
 * environment: the Dawn path given in pl_gpu_backend_opts is the one tried, whatever
 * POOLED_DAWN says (the pooled command maps the variable onto the option). In the wasm32
 * build (make wasm-test), which has no native Dawn loader, webgpu fails with the reason and
 * auto falls back to the CPU saying it. */
#include "runtime/backend_open.h"
#include "test.h"

#ifdef __wasi__
#define WHY "WebGPU is not available in the wasm32 build"
#else
#define WHY "from-option-dawn.so"
#endif

static void run_tests(void) {
    setenv("POOLED_DAWN", "/nonexistent/from-env-dawn.so", 1);
    pl_backend *be = NULL;
    const char *note = NULL;
    pl_backend_open_opts o = {.name = "webgpu", .n_threads = 1};
    o.gpu.dawn_lib = "/nonexistent/from-option-dawn.so";
    CHECK(pl_backend_open_with(&o, &be, &note) != PL_OK && !be, "a missing Dawn library opened");
    CHECK(strstr(pl_last_error(), WHY) && !strstr(pl_last_error(), "from-env-dawn.so"),
          "want the option's path, not the environment's: %s", pl_last_error());
    /* auto falls back to the CPU with the option's reason in its note */
    o.name = "auto";
    CHECK(pl_backend_open_with(&o, &be, &note) == PL_OK && be, "%s", pl_last_error());
    CHECK(note && strstr(note, WHY), "note: %s", note ? note : "(none)");
    if (be) CHECK(!strcmp(be->name, "cpu"), "backend %s", be->name);
    pl_be_destroy(be);
    /* no option: the default search, never the variable */
    be = NULL;
    o.gpu.dawn_lib = NULL;
    o.gpu.no_selftest = 1;
    o.name = "webgpu";
    pl_status s = pl_backend_open_with(&o, &be, &note);
    CHECK(s == PL_OK || !strstr(pl_last_error(), "from-env-dawn.so"),
          "the library read POOLED_DAWN: %s", pl_last_error());
    pl_be_destroy(be);
    unsetenv("POOLED_DAWN");
}
