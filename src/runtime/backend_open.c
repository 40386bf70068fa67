/* backend_open.c - picks and creates the backend a command asked for.
 * "auto" prefers a usable GPU and falls back to the CPU; only the CPU exists so far. */
#include "backend_open.h"

#include <string.h>

#include "../cpu/cpu.h"

pl_status pl_backend_open(const char *name, int n_threads, pl_backend **out, const char **note) {
    *out = NULL;
    *note = NULL;
    if (!name || !strcmp(name, "cpu")) return pl_cpu_new(n_threads, out);
    if (!strcmp(name, "auto")) {
        *note = "backend auto: no GPU backend in this build, using cpu";
        return pl_cpu_new(n_threads, out);
    }
    if (!strcmp(name, "webgpu"))
        return pl_fail(PL_ERR_ARG, "the webgpu backend is not available in this build yet "
                                   "(use --backend cpu)");
    return pl_fail(PL_ERR_ARG, "unknown backend '%.32s' (auto, cpu or webgpu)", name);
}
