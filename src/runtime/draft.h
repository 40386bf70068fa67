/* draft.h - drafters for speculative decoding: cheap guesses of the ids that follow, which
 * a verify pass (pl_session_spec_step) then accepts or rejects. A drafter never changes
 * the output, only how many ids one pass of the model yields.
 *
 * The interface is what every drafter implements: prompt lookup, and the model's own MTP
 * block. */
#ifndef PL_RUNTIME_DRAFT_H
#define PL_RUNTIME_DRAFT_H

#include <stdbool.h>
#include <stdint.h>

#include "../base/status.h"

typedef struct pl_drafter pl_drafter;
struct pl_drafter {
    /* Up to max drafts (max <= PL_SPEC_MAX) of the ids that follow ctx[0..n_ctx) (the
     * prompt and every id chosen so far, the last one not yet run) into out; returns how
     * many (0: no guess, the step runs the last id alone). */
    int (*draft)(pl_drafter *d, const int32_t *ctx, int64_t n_ctx, int32_t *out, int max);
    /* Told how many of the n_drafted drafts of the last call were accepted. May be NULL. */
    void (*feedback)(pl_drafter *d, int n_drafted, int n_accepted);
    void (*free)(pl_drafter *d);
};

void pl_drafter_free(pl_drafter *d);

/* Prompt lookup: when the last 3 ids (else the last 2, else the last 1) occurred earlier
 * in the context, the ids that followed their latest earlier occurrence are the drafts. Depth:
 * starts at 7, +2 after a step that accepted every draft, and after a rejection the accepted count
 * + 1 (at least 1, at most max_depth <= 15). The search looks back over at most the last
 * PL_LOOKUP_WINDOW ids. */
#define PL_LOOKUP_WINDOW 4096
/* gated (--spec auto): a moving average of the accepted share of drafts (each pass weighs
 * 1/4, starting at 1) below PL_LOOKUP_PAUSE_BELOW pauses drafting for PL_LOOKUP_PAUSE
 * passes, after which it probes again. */
#define PL_LOOKUP_PAUSE_BELOW 0.3
#define PL_LOOKUP_PAUSE       16
pl_status pl_drafter_lookup_new(int max_depth, bool gated, pl_drafter **out);

/* The model's own draft block (pl_session_draft_model; the session's state made with
 * opts.draft): depth fixed (1..PL_SPEC_MAX), or 0: measured, among 3, 5 and 7 (gated, for
 * --spec auto: also 0, a pass without drafts). Each pass is timed from one draft call to
 * the next and yields 1 + its accepted drafts. A window starts by probing every depth for
 * PL_MTP_PROBE passes, then drafts at the depth that yielded the most ids per second in
 * them; windows are PL_MTP_WINDOW passes, doubled (up to PL_MTP_BACKOFF times) each time
 * no drafts won, back to PL_MTP_WINDOW when drafts win. The session must outlive the
 * drafter. */
#define PL_MTP_PROBE   8
#define PL_MTP_WINDOW  96
#define PL_MTP_BACKOFF 4
typedef struct pl_session pl_session;
pl_status pl_drafter_mtp_new(pl_session *s, int depth, bool gated, pl_drafter **out);
/* The depth of the drafter's latest pass. */
int pl_drafter_mtp_depth(const pl_drafter *d);

#endif
