/* origin_fuzz.c - libFuzzer target for the server's Host and Origin checks (serve/origin.c).
 *
 * The input, split at NUL bytes, is the listening host, the allowed origins, the Host header
 * and the Origin header (each left out: NULL). The verdict is one of the three; a refusal
 * has a one-line reason, the others none; a loopback listener never takes a Host that
 * srv_is_loopback refuses. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "serve/origin.h"

#define REQUIRE(cond)                                                                              \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "origin_fuzz: %s failed (line %d)\n", #cond, __LINE__);                \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *text = malloc(size + 1);
    if (!text) return 0;
    memcpy(text, data, size);
    text[size] = 0;
    const char *part[4] = {NULL, NULL, NULL, NULL};
    char *p = text;
    for (int i = 0; i < 4 && p <= text + size; i++) {
        part[i] = p;
        p += strlen(p) + 1;
    }
    const char *listen = part[0] ? part[0] : "127.0.0.1";
    char err[400] = "";
    srv_origin v = srv_origin_check(listen, part[1], part[2], part[3], err, sizeof err);
    REQUIRE(v == SRV_ORIGIN_SAME || v == SRV_ORIGIN_ALLOWED || v == SRV_ORIGIN_REFUSED);
    REQUIRE((v == SRV_ORIGIN_REFUSED) == (err[0] != 0) && !strchr(err, '\n'));
    if (part[2] && srv_is_loopback(listen) && !srv_is_loopback(part[2]))
        REQUIRE(v == SRV_ORIGIN_REFUSED);
    if (v == SRV_ORIGIN_ALLOWED) REQUIRE(part[1] && part[3]);
    free(text);
    return 0;
}
