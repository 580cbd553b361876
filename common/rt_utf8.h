/* UTF-8, as the Table API needs it: strict decoding (no overlong forms,
 * no surrogates, nothing above U+10FFFF, RFC 3629 §4) and lengths counted
 * in UTF-16 code units, the unit in which Azure states every string limit
 * (table-api-spec.md §9).
 *
 * Thread: pure functions. */
#ifndef RT_UTF8_H
#define RT_UTF8_H

#include <stddef.h>
#include <stdint.h>

/* Decodes the sequence at @p, reading no byte at or past @end (@p <
 * @end). Returns its length (1..4) and stores the code point in *cp, or
 * returns 0 when the bytes are not valid UTF-8 (then *cp is unspecified). */
size_t rt_utf8_decode(const uint8_t *p, const uint8_t *end, uint32_t *cp);

/* 1 if the @n bytes at @p are valid UTF-8 (empty text is), else 0. */
int rt_utf8_valid(const void *p, size_t n);

/* UTF-16 code units of the @n bytes at @p, which must be valid UTF-8: one
 * per sequence, two for a 4-byte one (a surrogate pair). */
size_t rt_utf8_utf16_units(const void *p, size_t n);

/* Appends the UTF-8 encoding of @cp (<= U+10FFFF, not a surrogate) to @out,
 * which must have room for 4 bytes. Returns the number of bytes written. */
size_t rt_utf8_encode(uint32_t cp, uint8_t *out);

#endif
