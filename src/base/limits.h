/* limits.h - the size limits on what a user hands pooled, in one place.
 *
 * Each is far above what a real input needs and low enough that a hostile one (/dev/zero, a
 * huge file) is refused with one line instead of taking all memory. docs/robustness.md
 * lists them. */
#ifndef PL_BASE_LIMITS_H
#define PL_BASE_LIMITS_H

#define PL_LIMIT_JSON_FILE     ((size_t)64 << 20)  /* template --messages, --tools: 64 MiB */
#define PL_LIMIT_TEMPLATE_FILE ((size_t)1 << 20)   /* template --template (Jinja): 1 MiB */
#define PL_LIMIT_TEXT_FILE     ((size_t)256 << 20) /* tokenize --file: 256 MiB */
#define PL_LIMIT_CHAT_LINE     ((size_t)1 << 20)   /* one line of chat input: 1 MiB */
#define PL_LIMIT_BENCH_MB      256                 /* tokenize --bench MB: at most 256 */
#define PL_LIMIT_CACHE_FILE    ((size_t)1 << 20)   /* the GPU tuning cache: 1 MiB */
#define PL_LIMIT_PROFILE_FILE  ((size_t)64 << 20)  /* POOLED_GPU_PROFILE log: 64 MiB */

#endif
