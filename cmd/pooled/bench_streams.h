/* bench_streams.h - `pooled bench --streams N[,N...]`: aggregate decode speed of N
 * concurrent streams of one model, each its own session (its own KV cache), stepped
 * together by pooled_sessions_step as serve's continuous batching does (bench_streams.c).
 * Through pooled.h only, as all of bench. */
#ifndef PL_CMD_BENCH_STREAMS_H
#define PL_CMD_BENCH_STREAMS_H

#include <pooled.h>
#include <stdint.h>
#include <stdio.h>

#include "cmd_opts.h"

/* Shared with cmd_bench.c: the median of v[0..n) (sorts v), n pseudo-random ids below
 * n_vocab from seed (the same seed, the same ids: every run measures the same work), a
 * monotonic clock in seconds, and greedy sampling options for n ids (past end-of-generation
 * ids: every run does the same work) with the drafter spec. */
double bench_median(double *v, int n);
void bench_prompt(uint32_t seed, int32_t n_vocab, int32_t *ids, int64_t n);
double bench_now(void);
pooled_sample_opts bench_greedy(int64_t n, int spec);

typedef struct bench_streams bench_streams;

/* 0 when bo's largest count of states of state_bytes (one session's, of info's model: a
 * KV cache and activations) fits in the machine's memory less the weights and one more
 * state; else one error line and 1. */
int bench_streams_check(const bench_opts *bo, const pooled_model_info *info, int64_t state_bytes);

/* Open ma's model with n_parallel the largest count of bo->streams (no speculation) and run
 * every count bo->reps times after a short warm-up: prompts of bo->n_prompt ids read one
 * after another, then bo->n_gen batched steps. With bo->print_ids each stream's prompt and
 * generated ids go to ids_out (one line each, of the last repetition). *out gets the results
 * (0), or one error line is printed (1). */
int bench_streams_run(const model_args *ma, const bench_opts *bo, FILE *ids_out,
                      bench_streams **out);
void bench_streams_free(bench_streams *b);

/* The results: table lines to f; the JSON fields (",\"streams\":[...]" and the like,
 * to go inside the caller's object) to stdout. */
void bench_streams_print(const bench_streams *b, FILE *f);
void bench_streams_json(const bench_streams *b);

#endif
