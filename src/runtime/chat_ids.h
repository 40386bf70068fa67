/* chat_ids.h - a conversation as the ids a model reads: rendered with the model's chat
 * template, tokenized with special tokens parsed, BOS added when the vocabulary wants one
 * and the template did not write it. */
#ifndef PL_RUNTIME_CHAT_IDS_H
#define PL_RUNTIME_CHAT_IDS_H

#include "../tokenizer/tokenizer.h"

/* *ids is malloc'd (caller frees). */
pl_status pl_chat_ids(const pl_tokenizer *tok, const pl_chat_msg *msgs, int n_msgs,
                      const pl_chat_opts *opts, int32_t **ids, int64_t *n_ids);
/* The same for a conversation already rendered as text. */
pl_status pl_chat_text_ids(const pl_tokenizer *tok, const char *text, int32_t **ids,
                           int64_t *n_ids);

#endif
