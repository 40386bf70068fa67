/* json_write.h - writing JSON strings safely, and clipping text at a UTF-8 boundary.
 *
 * Strings from model files are untrusted bytes: they may hold control characters, NULs or
 * invalid UTF-8. pl_json_str always emits a valid JSON string literal: control characters
 * are escaped, and bytes that are not part of well-formed UTF-8 become U+FFFD. */
#ifndef PL_BASE_JSON_WRITE_H
#define PL_BASE_JSON_WRITE_H

#include <stddef.h>
#include <stdio.h>

/* Write s[0..len) as a quoted JSON string. */
void pl_json_str(FILE *f, const char *s, size_t len);

/* Write a double as a JSON number (null for NaN and infinities, which JSON lacks).
 * f32 values print with 9 significant digits, f64 with 17, so they read back exactly. */
void pl_json_num(FILE *f, double v, int is_f32);

/* The largest length <= max that does not cut a UTF-8 sequence of s[0..len) in half. */
size_t pl_utf8_clip(const char *s, size_t len, size_t max);

#endif
