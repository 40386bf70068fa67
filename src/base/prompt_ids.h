/* prompt_ids.h - token ids written as text ("1 2, 3"), as users give a prompt with
 * `pooled run --prompt-ids`. */
#ifndef PL_BASE_PROMPT_IDS_H
#define PL_BASE_PROMPT_IDS_H

#include <stdint.h>

#include "status.h"

/* Parse s: decimal ids in [0, INT32_MAX] separated by spaces, tabs, newlines or commas.
 * *ids is malloc'd (caller frees; NULL on failure). Fails with a one-line reason that
 * quotes the whole bad item (at most 32 bytes of it): "'2.5' is not a token id", or
 * "no ids given" for none. Reads nothing past the terminating NUL. */
pl_status pl_prompt_ids_parse(const char *s, int32_t **ids, int64_t *n);

#endif
