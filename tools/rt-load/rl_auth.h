/* Authentication for rt-load (docs/table-api-spec.md §7): SharedKey and
 * SharedKeyLite request signing, account and table-service SAS tokens, and
 * the RFC 1123 date they sign.
 *
 * Signing is the hot path: the HMAC-SHA256 key schedule (inner and outer
 * padded states) is computed once, each signature copies two SHA-256 states
 * and hashes the string-to-sign piece by piece without building it.
 * No allocation after rl_signer_init.
 * Thread: a signer is read-only after init (any thread). Secrets: the key
 * is not kept, only the padded hash states; rl_signer_wipe clears them. */
#ifndef RL_AUTH_H
#define RL_AUTH_H

#define OPENSSL_SUPPRESS_DEPRECATED 1 /* SHA256_* states copied by value */
#include <openssl/sha.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#define RL_SIG_LEN 44  /* base64 of 32 bytes */
#define RL_DATE_LEN 29 /* "Mon, 14 Oct 2013 18:25:49 GMT" */
#define RL_ACCOUNT_MAX 64

struct rl_signer
{
    SHA256_CTX inner, outer;
    char account[RL_ACCOUNT_MAX];
    size_t account_len;
};

/* @key_b64 is the base64 account key. Returns 0 or -1 (bad base64 or
 * account name too long). */
int rl_signer_init(struct rl_signer *s,
                   const char *account,
                   const char *key_b64);
void rl_signer_wipe(struct rl_signer *s);

/* HMAC-SHA256 of the concatenation of @n pieces, base64 into @out
 * (RL_SIG_LEN chars + NUL). */
struct rl_piece
{
    const char *p;
    size_t n;
};
void rl_signer_mac(const struct rl_signer *s,
                   const struct rl_piece *pc,
                   int n,
                   char *out);

/* SharedKey (Table): VERB\n\nContent-Type\nDate\n/account<raw path>.
 * @path is the request path exactly as sent (no query; "?comp=" is not
 * used by rt-load). */
void rl_sign_sharedkey(const struct rl_signer *s,
                       const char *verb,
                       const char *content_type,
                       const char *date,
                       const char *path,
                       size_t path_len,
                       char *out);
/* SharedKeyLite (Table): Date\n/account<raw path>. */
void rl_sign_sharedkeylite(const struct rl_signer *s,
                           const char *date,
                           const char *path,
                           size_t path_len,
                           char *out);

/* RFC 1123 date of @t (UTC) into @out (RL_DATE_LEN + 1). */
void rl_http_date(time_t t, char *out);

/* Account SAS (§7.4), sv 2019-02-02, ss=t, srt=sco, sp=rwdlacu,
 * spr=https,http, valid from @start to @expiry. Writes the query string
 * (without '?', values URL-encoded) into @out. Returns 0 or -1 (too
 * small). */
int rl_sas_account(const struct rl_signer *s,
                   time_t start,
                   time_t expiry,
                   char *out,
                   size_t n);
/* Table service SAS (§7.3) for @table with permissions @sp ("raud"),
 * sv 2019-02-02. */
int rl_sas_table(const struct rl_signer *s,
                 const char *table,
                 const char *sp,
                 time_t start,
                 time_t expiry,
                 char *out,
                 size_t n);

/* Base64 (standard alphabet, padded). Returns the output length. */
size_t rl_b64_encode(const uint8_t *in, size_t n, char *out);
/* Returns the decoded length or -1. */
int rl_b64_decode(const char *in, uint8_t *out, size_t cap);

#endif
