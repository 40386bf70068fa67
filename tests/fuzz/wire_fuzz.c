/* wire_fuzz.c - libFuzzer target for the room's wire decoder (pl_wire_decode).
 *
 * A refusal must leave a one-line message. An accepted message must pass pl_wire_check,
 * keep its payload pointers inside the input, and encode back to exactly the input bytes
 * (decode accepts only the one canonical encoding of a message). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "room/wire.h"

#define REQUIRE(cond)                                                                              \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "wire_fuzz: %s failed (line %d): %s\n", #cond, __LINE__,               \
                    pl_last_error());                                                              \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

static int inside(const void *p, size_t n, const uint8_t *data, size_t size) {
    const uint8_t *b = p;
    return b >= data && n <= size && b - data <= (ptrdiff_t)(size - n);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    pl_wire_msg m;
    pl_clear_error();
    if (pl_wire_decode(data, size, &m) != PL_OK) {
        const char *e = pl_last_error();
        REQUIRE(e[0] && !strchr(e, '\n'));
        return 0;
    }
    REQUIRE(pl_wire_check(&m) == PL_OK);
    if (m.type == PL_MSG_HIDDEN || m.type == PL_MSG_RESULT)
        REQUIRE(inside(m.hidden.data, pl_wire_hidden_bytes(&m.hidden), data, size));
    if (m.type == PL_MSG_WEIGHT) REQUIRE(inside(m.weight.data, m.weight.n, data, size));
    if (m.type == PL_MSG_PLAN && m.plan.n_tensors)
        REQUIRE(inside(m.plan.hashes, (size_t)m.plan.n_tensors * 32, data, size));
    uint8_t *b = NULL;
    size_t n = 0;
    REQUIRE(pl_wire_encode(&m, &b, &n) == PL_OK);
    REQUIRE(n == size && memcmp(b, data, size) == 0);
    free(b);
    return 0;
}
