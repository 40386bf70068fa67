/* sha256_test.c - SHA-256 against the FIPS 180-2 / NIST example digests, in one call and
 * fed in odd-sized pieces. */
#include "base/sha256.h"
#include "test.h"

static void run_tests(void) {
    char hex[65];
    pl_sha256_hex("", 0, hex);
    CHECK(!strcmp(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"), "%s",
          hex);
    pl_sha256_hex("abc", 3, hex);
    CHECK(!strcmp(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"), "%s",
          hex);
    const char *m = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    pl_sha256_hex(m, strlen(m), hex);
    CHECK(!strcmp(hex, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"), "%s",
          hex);

    /* one million 'a', in pieces of 999 bytes so blocks straddle the calls */
    static char a[999];
    memset(a, 'a', sizeof a);
    pl_sha256 s;
    uint8_t d[32];
    pl_sha256_init(&s);
    size_t left = 1000000;
    while (left) {
        size_t k = left < sizeof a ? left : sizeof a;
        pl_sha256_update(&s, a, k);
        left -= k;
    }
    pl_sha256_final(&s, d);
    pl_sha256_to_hex(d, hex);
    CHECK(!strcmp(hex, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0"), "%s",
          hex);
}
