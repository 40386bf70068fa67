/* chat_ids.c - render, tokenize, and settle BOS for a conversation. */
#include "chat_ids.h"

#include <stdlib.h>
#include <string.h>

pl_status pl_chat_ids(const pl_tokenizer *tok, const pl_chat_msg *msgs, int n_msgs,
                      const pl_chat_opts *opts, int32_t **ids, int64_t *n_ids) {
    *ids = NULL;
    *n_ids = 0;
    char *text = NULL;
    pl_status s = pl_chat_render(tok, msgs, n_msgs, opts, &text);
    if (!s) s = pl_chat_text_ids(tok, text, ids, n_ids);
    free(text);
    return s;
}

pl_status pl_chat_text_ids(const pl_tokenizer *tok, const char *text, int32_t **ids,
                           int64_t *n_ids) {
    /* the template writes the special tokens as text: they must become their ids */
    pl_status s = pl_tok_encode(tok, text, strlen(text), false, true, ids, n_ids);
    int32_t bos = pl_tok_bos(tok);
    if (!s && pl_tok_adds_bos(tok) && bos >= 0 && (*n_ids == 0 || (*ids)[0] != bos)) {
        int32_t *w = realloc(*ids, sizeof *w * (size_t)(*n_ids + 1));
        if (!w) {
            free(*ids);
            *ids = NULL;
            *n_ids = 0;
            return pl_fail(PL_ERR_NOMEM, "out of memory");
        }
        memmove(w + 1, w, sizeof *w * (size_t)*n_ids);
        w[0] = bos;
        *ids = w;
        (*n_ids)++;
    }
    if (s) {
        free(*ids);
        *ids = NULL;
        *n_ids = 0;
    }
    return s;
}
