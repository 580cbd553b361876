/* Base64 (RFC 4648) for the front end: Edm.Binary values and account keys
 * in standard base64, continuation tokens in base64url. OpenSSL's
 * EVP_EncodeBlock/EVP_DecodeBlock do the conversion; this module adds the
 * rules they do not check, so every caller rejects the same malformed text.
 *
 * Thread: pure functions, callable from any thread. Nothing is allocated
 * and nothing is kept; the caller provides the output space. */
#ifndef FE_B64_H
#define FE_B64_H

#include <stddef.h>
#include <stdint.h>

/* Output space for encoding @n bytes: the text and its NUL. */
#define FE_B64_ENCODED_SIZE(n) (((n) + 2) / 3 * 4 + 1)
/* Output space for decoding @n characters. */
#define FE_B64_DECODED_SIZE(n) (((n) + 3) / 4 * 3)

/* Writes standard, padded base64 of @p[0..n) to @out
 * (FE_B64_ENCODED_SIZE(n) bytes), NUL-terminated. Returns the text length.
 * @n must be below 1 GiB. */
size_t fe_b64_encode(const void *p, size_t n, char *out);

/* Strict standard base64: a multiple of 4 characters from A-Z a-z 0-9 + /,
 * with one or two '=' only at the very end; no whitespace, no line breaks.
 * Empty text is valid and decodes to nothing. Writes the bytes to @out
 * (FE_B64_DECODED_SIZE(n) bytes, which may be more than the result) and
 * returns their count, or RT_EINVAL (the contents of @out are then
 * unspecified). */
int fe_b64_decode(const char *s, size_t n, uint8_t *out);

/* Writes base64url (RFC 4648 §5: '-' and '_' for '+' and '/') of
 * @p[0..n) without padding to @out (FE_B64_ENCODED_SIZE(n) bytes),
 * NUL-terminated. Returns the text length. @n must be below 1 GiB. */
size_t fe_b64url_encode(const void *p, size_t n, char *out);

/* Decodes base64url text without '=' padding, as clients echo our
 * continuation tokens: it also takes the standard alphabet's '+' and '/',
 * and ' ' for '+' (a '+' that went through form decoding). @n % 4 must not
 * be 1. Writes the bytes to @out (FE_B64_DECODED_SIZE(n) bytes) and
 * returns their count, or RT_EINVAL. */
int fe_b64url_decode(const char *s, size_t n, uint8_t *out);

#endif
