/* backend_open.c - picks and creates the backend a command asked for.
 * "auto" prefers a usable hardware GPU and falls back to the CPU, saying why in one line;
 * "webgpu" never falls back: without a usable adapter it fails with the reason. */
#include "backend_open.h"

#include <stdio.h>
#include <string.h>

pl_status pl_backend_open(const char *name, int n_threads, pl_backend **out, const char **note) {
    pl_backend_open_opts o = {.name = name, .n_threads = n_threads};
    return pl_backend_open_with(&o, out, note);
}

pl_status pl_backend_open_with(const pl_backend_open_opts *o, pl_backend **out, const char **note) {
    const char *name = o->name;
    pl_cpu_opts co = o->cpu;
    co.n_threads = o->n_threads;
    *out = NULL;
    *note = NULL;
    if (!name || !strcmp(name, "cpu")) return pl_cpu_new_with(&co, out);
    if (!strcmp(name, "auto")) {
        /* the note outlives this call like pl_last_error's message: per thread */
        static _Thread_local char why[320];
        pl_gpu_backend_opts go = o->gpu;
        go.hardware_only = 1;
        if (pl_gpu_backend_new(&go, out) == PL_OK) return PL_OK;
        snprintf(why, sizeof why, "backend auto: %.260s; using cpu", pl_last_error());
        *note = why;
        return pl_cpu_new_with(&co, out);
    }
    if (!strcmp(name, "webgpu")) return pl_gpu_backend_new(&o->gpu, out);
    return pl_backend_check_name(name);
}

pl_status pl_backend_check_name(const char *name) {
    static const char *const names[] = {"auto", "cpu", "webgpu"};
    for (size_t i = 0; name && i < sizeof names / sizeof names[0]; i++)
        if (!strcmp(name, names[i])) return PL_OK;
    return pl_fail(PL_ERR_ARG, "expected auto, cpu or webgpu, got '%.32s'", name ? name : "");
}
