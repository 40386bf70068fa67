/* bench_streams.h - `pooled bench --streams N[,N...]`: aggregate decode speed of N
 * concurrent streams of one model, each its own session (its own KV cache), stepped
 * together by pl_session_push_batch as serve's continuous batching does (bench_streams.c). */
#ifndef PL_CMD_BENCH_STREAMS_H
#define PL_CMD_BENCH_STREAMS_H

#include <stdint.h>
#include <stdio.h>

#include "api/api_internal.h"
#include "cmd_opts.h"

/* Shared with cmd_bench.c: the median of v[0..n) (sorts v), and n pseudo-random ids below
 * n_vocab from seed (the same seed, the same ids: every run measures the same work). */
double bench_median(double *v, int n);
void bench_prompt(uint32_t seed, int32_t n_vocab, int32_t *ids, int64_t n);

typedef struct bench_streams bench_streams;

/* Make the sessions for the largest count of bo->streams (prompts of bo->n_prompt ids,
 * bo->n_gen decode steps) over p's whole model, with p->so's context and cache type.
 * Refuses, before making more than one, when that many states would not fit in the
 * machine's memory less the weights and other_bytes (the caller's own state). */
pl_status bench_streams_new(const pl_model_parts *p, const bench_opts *bo, int64_t other_bytes,
                            bench_streams **out);
void bench_streams_free(bench_streams *b);

/* Run every count of bo->streams, bo->reps times each after a short warm-up. With
 * bo->print_ids each stream's prompt and generated ids go to ids_out (one line each, of
 * the last repetition). */
pl_status bench_streams_run(bench_streams *b, FILE *ids_out);

/* The results: table lines to f; the JSON fields (",\"streams\":[...]" and the like,
 * to go inside the caller's object) to stdout. */
void bench_streams_print(const bench_streams *b, FILE *f);
void bench_streams_json(const bench_streams *b);

#endif
