#include "rt_utf8.h"

size_t rt_utf8_decode(const uint8_t *p, const uint8_t *end, uint32_t *cp)
{
    uint8_t c = p[0];
    size_t left = (size_t)(end - p);

    if (c < 0x80) {
        *cp = c;
        return 1;
    }
    if (c >= 0xC2 && c <= 0xDF) {
        if (left < 2 || (p[1] & 0xC0) != 0x80) {
            return 0;
        }
        *cp = ((uint32_t)(c & 0x1F) << 6) | (p[1] & 0x3F);
        return 2;
    }
    /* The second byte's range excludes overlong forms (E0 80..9F) and
     * surrogates (ED A0..BF) for 3 bytes, overlong forms (F0 80..8F) and
     * code points above U+10FFFF (F4 90..) for 4 (RFC 3629 §4). */
    if (c >= 0xE0 && c <= 0xEF) {
        uint8_t lo = c == 0xE0 ? 0xA0 : 0x80;
        uint8_t hi = c == 0xED ? 0x9F : 0xBF;
        if (left < 3 || p[1] < lo || p[1] > hi || (p[2] & 0xC0) != 0x80) {
            return 0;
        }
        *cp = ((uint32_t)(c & 0x0F) << 12) | ((uint32_t)(p[1] & 0x3F) << 6) |
              (p[2] & 0x3F);
        return 3;
    }
    if (c >= 0xF0 && c <= 0xF4) {
        uint8_t lo = c == 0xF0 ? 0x90 : 0x80;
        uint8_t hi = c == 0xF4 ? 0x8F : 0xBF;
        if (left < 4 || p[1] < lo || p[1] > hi || (p[2] & 0xC0) != 0x80 ||
            (p[3] & 0xC0) != 0x80) {
            return 0;
        }
        *cp = ((uint32_t)(c & 0x07) << 18) | ((uint32_t)(p[1] & 0x3F) << 12) |
              ((uint32_t)(p[2] & 0x3F) << 6) | (p[3] & 0x3F);
        return 4;
    }
    return 0;
}

int rt_utf8_valid(const void *p, size_t n)
{
    const uint8_t *s = p, *end = s + n;
    while (s < end) {
        uint32_t cp;
        size_t len = rt_utf8_decode(s, end, &cp);
        if (len == 0) {
            return 0;
        }
        s += len;
    }
    return 1;
}

size_t rt_utf8_utf16_units(const void *p, size_t n)
{
    const uint8_t *s = p;
    size_t u = 0;
    for (size_t i = 0; i < n; i++) {
        u += (s[i] & 0xC0) != 0x80;
        u += s[i] >= 0xF0;
    }
    return u;
}

size_t rt_utf8_encode(uint32_t cp, uint8_t *out)
{
    if (cp < 0x80) {
        out[0] = (uint8_t)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (uint8_t)(0xC0 | (cp >> 6));
        out[1] = (uint8_t)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (uint8_t)(0xE0 | (cp >> 12));
        out[1] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (uint8_t)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (uint8_t)(0xF0 | (cp >> 18));
    out[1] = (uint8_t)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
    out[3] = (uint8_t)(0x80 | (cp & 0x3F));
    return 4;
}

int rt_utf16_cmp(const char *a, size_t an, const char *b, size_t bn)
{
    const uint8_t *x = (const uint8_t *)a, *y = (const uint8_t *)b;
    size_t m = an < bn ? an : bn;
    size_t i = 0;

    /* The map is a bijection on bytes: the strings differ first where the
     * raw bytes do, and only that byte is mapped. */
    while (i < m && x[i] == y[i]) {
        i++;
    }
    if (i < m) {
        return rt_utf16_byte(x[i]) < rt_utf16_byte(y[i]) ? -1 : 1;
    }
    return an < bn ? -1 : an > bn ? 1 : 0;
}

int rt_utf16_cmpz(const char *a, const char *b)
{
    const uint8_t *x = (const uint8_t *)a, *y = (const uint8_t *)b;

    while (*x && *x == *y) {
        x++;
        y++;
    }
    if (*x == *y) {
        return 0;
    }
    /* NUL (end of the shorter string) maps to itself and sorts first. */
    return rt_utf16_byte(*x) < rt_utf16_byte(*y) ? -1 : 1;
}
