/* unicode_test.c - the generated Unicode tables and what is built on them, against values
 * stated by the Unicode Standard (UnicodeData.txt categories, PropList White_Space, the
 * normalisation examples of UAX #15 and chapter 3: composition, canonical reordering,
 * singletons, exclusions, Hangul) and RFC 3629 for UTF-8. */
#include "test.h"

#include "tokenizer/unicode.h"

static void nfc_is(const char *in, const char *want) {
    char *out = NULL;
    size_t len = 0;
    CHECK(pl_uni_nfc(in, strlen(in), &out, &len) == PL_OK, "nfc");
    CHECK(out && len == strlen(want) && !memcmp(out, want, len), "NFC('%s') = '%s', want '%s'", in,
          out ? out : "", want);
    /* the quick check may say "unchanged" only when NFC does not change the (valid) text */
    if (strcmp(in, want) && strcmp(want, "\xef\xbf\xbd"))
        CHECK(!pl_uni_nfc_trivial(in, strlen(in)), "quick check of '%s'", in);
    free(out);
}

static void decodes(const char *s, size_t n, uint32_t want, int want_len) {
    uint32_t cp;
    int k = pl_utf8_decode(s, n, &cp);
    CHECK(cp == want && k == want_len, "decode %02X..: got U+%04X/%d, want U+%04X/%d",
          (uint8_t)s[0], cp, k, want, want_len);
}

static void run_tests(void) {
    CHECK(!strcmp(pl_uni_version_string(), "14.0.0"), "tables from Unicode %s",
          pl_uni_version_string());
    CHECK(pl_uni_cat('A') == PL_UC_LETTER && pl_uni_cat(0x4E2D) == PL_UC_LETTER, "letters");
    CHECK(pl_uni_cat('5') == PL_UC_NUMBER && pl_uni_cat(0x2160) == PL_UC_NUMBER &&
              pl_uni_cat(0xB2) == PL_UC_NUMBER,
          "numbers");
    CHECK(pl_uni_cat('!') == PL_UC_PUNCT && pl_uni_cat(0x3001) == PL_UC_PUNCT, "punctuation");
    CHECK(pl_uni_cat('$') == PL_UC_SYMBOL && pl_uni_cat(0x1F680) == PL_UC_SYMBOL, "symbols");
    CHECK(pl_uni_cat(0x0301) == PL_UC_MARK && pl_uni_cat(0x17B6) == PL_UC_MARK, "marks");
    CHECK(pl_uni_cat(0xA0) == PL_UC_SEPARATOR && pl_uni_cat(0x200D) == PL_UC_OTHER, "Zs, Cf");
    CHECK(pl_uni_cat(0x0378) == PL_UC_UNASSIGNED && pl_uni_flags(0x110000) == 0, "unassigned");
    CHECK(pl_uni_is_space(' ') && pl_uni_is_space(0x85) && pl_uni_is_space(0x3000) &&
              pl_uni_is_space(0x2029),
          "White_Space");
    CHECK(!pl_uni_is_space(0x1C) && !pl_uni_is_space(0x200B) && !pl_uni_is_space('x'),
          "not White_Space");
    CHECK(pl_uni_tolower(0xC4) == 0xE4 && pl_uni_tolower('Q') == 'q' &&
              pl_uni_toupper(0x3B1) == 0x391,
          "case");
    uint32_t up[3];
    CHECK(pl_uni_toupper_full(0xDF, up) == 2 && up[0] == 'S' && up[1] == 'S', "ß upper is SS");
    CHECK(pl_uni_nfd_first(0xE9) == 'e' && pl_uni_nfd_first(0x1E69) == 's' &&
              pl_uni_nfd_first(0xAC00) == 0x1100 && pl_uni_nfd_first('x') == 'x',
          "first of NFD");
    CHECK(pl_uni_ccc(0x301) == 230 && pl_uni_ccc(0x323) == 220 && pl_uni_ccc('a') == 0,
          "combining classes");

    nfc_is("e\xcc\x81", "\xc3\xa9");    /* e + acute -> é */
    nfc_is("A\xcc\x8a", "\xc3\x85");    /* A + ring -> Å */
    nfc_is("\xe2\x84\xab", "\xc3\x85"); /* ANGSTROM SIGN (singleton) -> Å */
    nfc_is("\xe1\x84\x80\xe1\x85\xa1\xe1\x86\xa8", "\xea\xb0\x81"); /* Hangul L V T -> 각 */
    nfc_is("a\xcc\x82\xcc\xa3", "\xe1\xba\xad");        /* reordered, then composed: ậ */
    nfc_is("q\xcc\x87\xcc\xa3", "q\xcc\xa3\xcc\x87");   /* only reordered */
    nfc_is("\xe0\xa5\x98", "\xe0\xa4\x95\xe0\xa4\xbc"); /* QA is excluded from composition */
    nfc_is("Caf\xc3\xa9 \xe6\x97\xa5", "Caf\xc3\xa9 \xe6\x97\xa5"); /* already NFC */
    nfc_is("\xff", "\xef\xbf\xbd");                                 /* a bad byte becomes U+FFFD */

    decodes("A", 1, 'A', 1);
    decodes("\xc3\xa9", 2, 0xE9, 2);
    decodes("\xf0\x9f\x9a\x80", 4, 0x1F680, 4);
    decodes("\xc0\x80", 2, 0xFFFD, 1);         /* overlong */
    decodes("\xed\xa0\x80", 3, 0xFFFD, 1);     /* surrogate */
    decodes("\xf4\x90\x80\x80", 4, 0xFFFD, 1); /* above U+10FFFF */
    decodes("\xe6\x97", 2, 0xFFFD, 1);         /* truncated */
    decodes("\x80", 1, 0xFFFD, 1);             /* stray continuation */
    char buf[4];
    CHECK(pl_utf8_encode(0x1F680, buf) == 4 && !memcmp(buf, "\xf0\x9f\x9a\x80", 4), "encode");
}
