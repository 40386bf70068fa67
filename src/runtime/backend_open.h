/* backend_open.h - the one place that creates a backend from its name (--backend). */
#ifndef PL_RUNTIME_BACKEND_OPEN_H
#define PL_RUNTIME_BACKEND_OPEN_H

#include "../backend/backend.h"

/* name: "auto", "cpu" or "webgpu". n_threads: CPU threads (0: one per core). On success
 * *note is NULL or a one-line remark for the user ("auto: using cpu ..."). */
pl_status pl_backend_open(const char *name, int n_threads, pl_backend **out, const char **note);

/* OK for a name pl_backend_open takes; else fails with "expected auto, cpu or webgpu, got
 * 'NAME'" (so an option parser can refuse it before anything is loaded). */
pl_status pl_backend_check_name(const char *name);

#endif
