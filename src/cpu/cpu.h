/* cpu.h - the CPU backend: plain C implementations of every op of backend.h.
 *
 * It is the reference every faster path is checked against and the fallback on machines
 * without a usable GPU. Weights are read from the mapped GGUF, or from a copy of its bytes
 * in anonymous memory (pl_cpu_opts.anon_weights), dequantised a row at a time as the matmul
 * needs them; activations stay float32. */
#ifndef PL_CPU_CPU_H
#define PL_CPU_CPU_H

#include "../backend/backend.h"

typedef struct {
    int n_threads; /* threads for the heavy ops (0: one per online core) */
    /* Where weight buffers keep their bytes. 1: copied into anonymous memory (mmap'd in
     * pieces aligned to 2 MiB, MADV_HUGEPAGE where the system has it; freed with the
     * buffers): reading the file mapping's pages cost a 1-thread decode about 40% on the
     * test machine (docs/cpu-notes.md). -1: used where they lie (the mapped file, read
     * straight from the page cache; a model larger than the memory pages in and out).
     * 0 (auto): copied when a model's weights are under half of MemAvailable
     * (/proc/meminfo) as the model loader announces them (pl_be_weights_expect), else,
     * and where the memory cannot be read, where they lie. Other values are refused.
     * Where there is no mmap (wasm32, whose file is already read into memory) weights are
     * always used where they lie. The device line says which ("weights copied/mapped"). */
    int anon_weights;
    /* Q4_0 and Q8_0 weights copied into anonymous memory are laid out 8 rows interleaved
     * (cpu_x8.c: decode's tile then needs no reduction across lanes; a 1-thread decode
     * about 1.4x (Q4_0) and 1.15x (Q8_0) as fast on the test machine) where the CPU has
     * AVX2. 0 (auto): so; -1: never (the GGUF layout, as mapped weights always have). The
     * same results either way. */
    int interleave;
} pl_cpu_opts;

/* A CPU backend with the options o (NULL: all defaults). */
pl_status pl_cpu_new_with(const pl_cpu_opts *o, pl_backend **out);
/* The same with n_threads and the other defaults. */
pl_status pl_cpu_new(int n_threads, pl_backend **out);

#endif
