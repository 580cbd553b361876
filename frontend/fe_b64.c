/* Base64: see fe_b64.h.
 *
 * EVP_DecodeBlock alone is too lenient for an API that must reject what
 * Azure rejects: it skips leading and trailing whitespace, reads '=' in
 * the middle of the text as a zero digit and returns the padding as zero
 * bytes. So the text is checked here first and the padding subtracted
 * after. */
#include "fe_b64.h"

#include <limits.h>
#include <string.h>

#include <openssl/evp.h>

#include "rt_err.h"

static int fe__b64_digit(char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
           (c >= '0' && c <= '9') || c == '+' || c == '/';
}

size_t fe_b64_encode(const void *p, size_t n, char *out)
{
    return (size_t)EVP_EncodeBlock((unsigned char *)out, p, (int)n);
}

int fe_b64_decode(const char *s, size_t n, uint8_t *out)
{
    size_t pad = 0;
    int len;

    if (n % 4 != 0 || n > INT_MAX) {
        return RT_EINVAL;
    }
    if (n == 0) {
        return 0;
    }
    if (s[n - 1] == '=') {
        pad = s[n - 2] == '=' ? 2 : 1;
    }
    for (size_t i = 0; i < n - pad; i++) {
        if (!fe__b64_digit(s[i])) {
            return RT_EINVAL;
        }
    }
    len = EVP_DecodeBlock(out, (const unsigned char *)s, (int)n);
    if (len < 0 || (size_t)len < pad) {
        return RT_EINVAL;
    }
    return len - (int)pad;
}

size_t fe_b64url_encode(const void *p, size_t n, char *out)
{
    size_t len = fe_b64_encode(p, n, out);

    while (len > 0 && out[len - 1] == '=') {
        out[--len] = '\0';
    }
    for (size_t i = 0; i < len; i++) {
        if (out[i] == '+') {
            out[i] = '-';
        } else if (out[i] == '/') {
            out[i] = '_';
        }
    }
    return len;
}

int fe_b64url_decode(const char *s, size_t n, uint8_t *out)
{
    /* Rewritten into the standard alphabet with its padding, a group of
     * four characters at a time, so no buffer is needed. */
    size_t k = 0;

    if (n % 4 == 1 || n > INT_MAX) {
        return RT_EINVAL;
    }
    for (size_t i = 0; i < n; i += 4) {
        char q[4] = {'=', '=', '=', '='};
        size_t m = n - i < 4 ? n - i : 4;
        int len;
        for (size_t j = 0; j < m; j++) {
            char c = s[i + j];
            q[j] = c == '-' || c == ' ' ? '+' : c == '_' ? '/' : c;
            if (c == '=') {
                return RT_EINVAL;
            }
        }
        len = fe_b64_decode(q, 4, out + k);
        if (len < 0) {
            return RT_EINVAL;
        }
        k += (size_t)len;
    }
    return (int)k;
}
