/* backend_open.h - the one place that creates a backend from its name (--backend). */
#ifndef PL_RUNTIME_BACKEND_OPEN_H
#define PL_RUNTIME_BACKEND_OPEN_H

#include "../backend/backend.h"
#include "../cpu/cpu.h"
#include "../gpu/gpu.h"

/* Everything a backend is made from; no environment variable is read (a program passes
 * its own settings in cpu and gpu). */
typedef struct {
    const char *name;        /* "auto", "cpu" or "webgpu"; NULL: cpu */
    int n_threads;           /* CPU threads (0: one per core) */
    pl_cpu_opts cpu;         /* the CPU's settings (its n_threads: the one above) */
    pl_gpu_backend_opts gpu; /* the GPU's settings (auto adds hardware_only) */
} pl_backend_open_opts;

/* On success *note is NULL or a one-line remark for the user ("auto: using cpu ...", valid
 * until the next call on this thread). */
pl_status pl_backend_open_with(const pl_backend_open_opts *o, pl_backend **out, const char **note);
/* The same with the GPU's default settings. */
pl_status pl_backend_open(const char *name, int n_threads, pl_backend **out, const char **note);

/* OK for a name pl_backend_open takes; else fails with "expected auto, cpu or webgpu, got
 * 'NAME'" (so an option parser can refuse it before anything is loaded). */
pl_status pl_backend_check_name(const char *name);

#endif
