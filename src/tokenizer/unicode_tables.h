/* unicode_tables.h - the generated tables in unicode_data.c (tools/gen_unicode.py).
 * Only unicode.c reads them; everyone else uses unicode.h. */
#ifndef PL_TOKENIZER_UNICODE_TABLES_H
#define PL_TOKENIZER_UNICODE_TABLES_H

#include <stdint.h>

extern const char pl_unitab_version[];
/* flags of code point c: pl_unitab_stage2[pl_unitab_stage1[c >> 8] * 256 + (c & 255)] */
extern const uint16_t pl_unitab_stage1[0x110000 >> 8];
extern const uint8_t pl_unitab_stage2[];
extern const uint32_t pl_unitab_lower[][2]; /* sorted by code point: {cp, lower} */
extern const int pl_unitab_n_lower;
extern const uint32_t pl_unitab_upper[][2]; /* sorted by code point: {cp, upper} */
extern const int pl_unitab_n_upper;
extern const uint32_t pl_unitab_upper_full[][4]; /* {cp, up to 3 code points, 0-padded} */
extern const int pl_unitab_n_upper_full;
extern const uint32_t pl_unitab_decomp[][3]; /* sorted: {cp, first, second or 0} (canonical) */
extern const int pl_unitab_n_decomp;
extern const uint32_t pl_unitab_ccc[][3]; /* sorted ranges {lo, hi, combining class} */
extern const int pl_unitab_n_ccc;
extern const uint32_t pl_unitab_comp[]
                                    [3]; /* sorted by (first, second): {first, second, composite} */
extern const int pl_unitab_n_comp;

#endif
