/* cpu.h - the CPU backend: plain C implementations of every op of backend.h.
 *
 * It is the reference every faster path is checked against and the fallback on machines
 * without a usable GPU. Weights are zero-copy views of the mapped GGUF, dequantised a row
 * at a time as the matmul needs them; activations stay float32. */
#ifndef PL_CPU_CPU_H
#define PL_CPU_CPU_H

#include "../backend/backend.h"

/* A CPU backend using n_threads threads for the heavy ops (0: one per online core). */
pl_status pl_cpu_new(int n_threads, pl_backend **out);

#endif
