/* family_test.c - the model family table (model_internal.h): every family names its
 * architectures, each architecture belongs to exactly one family, every required method
 * slot is filled, and pl_family_check (what pl_model_load runs) refuses a family with any
 * one slot emptied, naming it; the draft slots are all filled (qwen35) or none (llama), and
 * one of them emptied is refused. The llama family serves llama, qwen2, qwen3 and qwen3moe,
 * the qwen35 family qwen35 and qwen35moe. */
#include "model/model_internal.h"
#include "test.h"

/* For a list of slots (an X-macro): their names, and clearing the i-th of a family. */
#define SLOT_NAME(name) #name,
#define CLEAR(name)                                                                                \
    if (k++ == i) f->name = NULL;
#define SLOT_TABLE(LIST, names, clear)                                                             \
    static const char *const names[] = {LIST(SLOT_NAME)};                                          \
    static void clear(pl_family *f, size_t i) {                                                    \
        size_t k = 0;                                                                              \
        LIST(CLEAR)                                                                                \
    }
SLOT_TABLE(PL_FAMILY_SLOTS, slot_names, clear_slot)
SLOT_TABLE(PL_FAMILY_DRAFT_SLOTS, draft_slot_names, clear_draft_slot)
#define N_SLOTS       (sizeof slot_names / sizeof slot_names[0])
#define N_DRAFT_SLOTS (sizeof draft_slot_names / sizeof draft_slot_names[0])

static void run_tests(void) {
    CHECK(pl_family_count() >= 1, "no model family");
    CHECK(pl_family_at(pl_family_count()) == NULL, "a family past the end of the table");
    for (size_t i = 0; i < pl_family_count(); i++) {
        const pl_family *f = pl_family_at(i);
        CHECK(pl_family_check(f) == PL_OK, "%s", pl_last_error());
        /* the draft slots: none, or all (then emptying any one is refused, naming it) */
        bool drafts = f->draft_absorb || f->draft || f->draft_logits;
        CHECK(drafts == (f == &pl_family_qwen35), "family %s: draft slots %d", f->archs[0], drafts);
        for (size_t s = 0; drafts && s < N_DRAFT_SLOTS; s++) {
            pl_family holed = *f;
            clear_draft_slot(&holed, s);
            pl_status st = pl_family_check(&holed);
            CHECK(st != PL_OK && strstr(pl_last_error(), draft_slot_names[s]),
                  "family %s: empty draft slot %s: %s", f->archs[0], draft_slot_names[s],
                  st ? pl_last_error() : "accepted");
        }
        for (const char *const *a = f->archs; *a; a++)
            CHECK(pl_family_find(*a) == f, "architecture %s served by another family", *a);
        for (size_t s = 0; s < N_SLOTS; s++) {
            pl_family holed = *f;
            clear_slot(&holed, s);
            pl_status st = pl_family_check(&holed);
            CHECK(st != PL_OK, "family %s: empty slot %s accepted", f->archs[0], slot_names[s]);
            CHECK(st == PL_OK || strstr(pl_last_error(), slot_names[s]),
                  "family %s: empty slot %s reported as '%s'", f->archs[0], slot_names[s],
                  pl_last_error());
        }
        pl_family none = *f;
        none.archs = NULL;
        CHECK(pl_family_check(&none) != PL_OK, "a family without architectures accepted");
    }
    const char *llama[] = {"llama", "qwen2", "qwen3", "qwen3moe"};
    for (int i = 0; i < 4; i++)
        CHECK(pl_family_find(llama[i]) == &pl_family_llama, "%s is not the llama family's",
              llama[i]);
    CHECK(pl_family_find("qwen35") == &pl_family_qwen35 &&
              pl_family_find("qwen35moe") == &pl_family_qwen35,
          "qwen35 / qwen35moe are not the qwen35 family's");
    CHECK(pl_family_qwen35.can_rewind && pl_family_qwen35.rewind,
          "the qwen35 family cannot rewind its recurrent state");
    CHECK(!pl_family_llama.can_rewind && !pl_family_llama.rewind,
          "the llama family has nothing recurrent to rewind");
    CHECK(pl_family_find("mamba9") == NULL && pl_family_find("") == NULL,
          "an unknown architecture found a family");
}
