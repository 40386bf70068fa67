/* stop_test.c - the stop-string filter against a plain search: random texts over a small
 * alphabet (many near-misses), random stop strings, random cuts into pieces (a token's
 * text arrives whole). Generation stops at the first piece after which the text so far
 * holds a stop string; what comes out must be exactly the text before the earliest one in
 * it, hit set when there is one, and nothing held back longer than a stop string needs. */
#include "runtime/stop.h"

#include <stdint.h>

#include "test.h"

static uint64_t rng = 88172645463325252ull;
static unsigned rnd(unsigned n) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (unsigned)(rng % n);
}

static void one_case(void) {
    char text[200], stops[3][8], got[256];
    const char *sp[3];
    size_t n = 1 + rnd(sizeof text - 1), maxl = 0;
    for (size_t i = 0; i < n; i++) text[i] = "abc"[rnd(3)];
    text[n] = 0;
    int ns = 1 + (int)rnd(3);
    for (int k = 0; k < ns; k++) {
        size_t l = 1 + rnd(5);
        for (size_t i = 0; i < l; i++) stops[k][i] = "abc"[rnd(3)];
        stops[k][l] = 0;
        sp[k] = stops[k];
        if (l > maxl) maxl = l;
    }
    size_t want = n; /* set at the first piece that completes a stop string */
    pl_stop s;
    CHECK(pl_stop_init(&s, sp, ns, "t") == PL_OK, "%s", pl_last_error());
    size_t fed = 0, out_n = 0;
    bool hit = false;
    int bad = 0;
    while (!hit && fed <= n) {
        size_t take = fed == n ? 0 : 1 + rnd(6);
        if (fed + take > n) take = n - fed;
        char piece[8];
        memcpy(piece, text + fed, take);
        piece[take] = 0;
        fed += take;
        char seen[sizeof text];
        memcpy(seen, text, fed);
        seen[fed] = 0;
        size_t first = n; /* the earliest start of a stop string in the text so far */
        for (int k = 0; k < ns; k++) {
            const char *p = strstr(seen, sp[k]);
            if (p && (size_t)(p - seen) < first) first = (size_t)(p - seen);
        }
        if (want == n) want = first;
        const char *o;
        size_t on;
        bool last = fed == n;
        if (pl_stop_feed(&s, piece, take, last, &o, &on, &hit)) break;
        if (o[on] != 0 || out_n + on > sizeof got) bad++;
        memcpy(got + out_n, o, on);
        out_n += on;
        /* held back no more than a stop string's length minus one */
        if (!hit && fed - out_n > maxl - 1) bad++;
        if (last) break;
    }
    CHECK(!bad && hit == (want < n) && out_n == want && !memcmp(got, text, want),
          "text '%s', stops '%s' '%s' '%s': got '%.*s' (hit %d), want %zu bytes", text, sp[0],
          ns > 1 ? sp[1] : "", ns > 2 ? sp[2] : "", (int)out_n, got, hit, want);
    pl_stop_free(&s);
}

static void run_tests(void) {
    for (int i = 0; i < 3000; i++) one_case();
    pl_stop s;
    const char *empty[] = {""}, *many[17];
    for (int i = 0; i < 17; i++) many[i] = "x";
    CHECK(pl_stop_init(&s, empty, 1, "--stop") == PL_ERR_ARG, "empty stop string");
    CHECK(pl_stop_init(&s, many, 17, "--stop") == PL_ERR_ARG, "17 stop strings");
    /* no stop strings: everything passes at once */
    CHECK(pl_stop_init(&s, NULL, 0, "t") == PL_OK, "none");
    const char *o;
    size_t on;
    bool hit;
    CHECK(pl_stop_feed(&s, "hello", 5, false, &o, &on, &hit) == PL_OK && on == 5 &&
              !strcmp(o, "hello") && !hit,
          "pass-through");
    pl_stop_free(&s);
}
