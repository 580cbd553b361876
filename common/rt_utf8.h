/* UTF-8, as the Table API needs it: strict decoding (no overlong forms,
 * no surrogates, nothing above U+10FFFF, RFC 3629 §4) and lengths counted
 * in UTF-16 code units, the unit in which Azure states every string limit
 * (table-api-spec.md §9), and the order in which Azure sorts strings:
 * ordinal over UTF-16 code units (PartitionKey, RowKey, every $filter string
 * comparison).
 *
 * UTF-16 order versus UTF-8 byte order: the two agree except between the
 * supplementary characters (U+10000.., surrogates 0xD800..0xDFFF in UTF-16,
 * lead bytes 0xF0..0xF4 in UTF-8) and U+E000..U+FFFF (lead bytes 0xEE and
 * 0xEF): UTF-16 puts the supplementary ones first. Mapping the lead bytes
 * 0xEE/0xEF to 0xF5/0xF6, which valid UTF-8 never holds, and leaving every
 * other byte alone turns byte order into UTF-16 order (rt_utf16_byte): a
 * continuation byte (0x80..0xBF) is never remapped, so the first byte in
 * which two strings differ is either two lead bytes (ordered by group, then
 * code point) or two continuation bytes of the same lead (code point
 * order, which is UTF-16 order inside one group).
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

/* The byte map above: 0xEE -> 0xF5, 0xEF -> 0xF6, every other byte to
 * itself. rt_utf16_unbyte is its inverse on the bytes it produces
 * (0xF5 -> 0xEE, 0xF6 -> 0xEF) and leaves 0xEE/0xEF as they are, so text
 * written before the map (raw UTF-8) decodes unchanged (rt_key.h). */
static inline uint8_t rt_utf16_byte(uint8_t c)
{
    return c == 0xEE ? 0xF5 : c == 0xEF ? 0xF6 : c;
}
static inline uint8_t rt_utf16_unbyte(uint8_t c)
{
    return c == 0xF5 ? 0xEE : c == 0xF6 ? 0xEF : c;
}

/* Ordinal UTF-16 code-unit comparison of the UTF-8 strings @a (@an bytes)
 * and @b (@bn bytes), the order Azure sorts keys and compares strings in:
 * -1, 0 or 1; a proper prefix sorts first. Valid UTF-8 is assumed; other
 * bytes still give a total order (the byte order under rt_utf16_byte). */
int rt_utf16_cmp(const char *a, size_t an, const char *b, size_t bn);
/* rt_utf16_cmp of two NUL-terminated strings (a drop-in for strcmp where
 * keys are ordered). */
int rt_utf16_cmpz(const char *a, const char *b);

#endif
