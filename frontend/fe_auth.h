/* Shared Key authentication (docs/table-api-spec.md §7, §7.1, §7.2):
 * the account/key table, Authorization header parsing, the Table-service
 * string-to-sign for SharedKey and SharedKeyLite, HMAC-SHA256 signing and
 * constant-time verification against key1 or key2.
 *
 * Thread: an account table is built on one thread and then only read
 * (any thread). The workers reach it through struct fe_accounts_pub, which
 * the main thread may point at a new table at any time (SIGHUP): each
 * request holds a reference to the table it started with, so a reload is
 * atomic for every worker and never pulls keys from under a request. The
 * other functions are pure.
 * Secrets: keys are kept decoded in struct fe_account and wiped with
 * OPENSSL_cleanse by fe_accounts_free(); nothing here logs a key or a
 * signature. */
#ifndef FE_AUTH_H
#define FE_AUTH_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "rt_buf.h"

/* The storage emulator's well-known development account (spec §1.1). */
#define FE_DEV_ACCOUNT "devstoreaccount1"
#define FE_DEV_KEY                                                        \
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZ" \
    "FPTOtr/KBHBeksoGMGw=="

#define FE_ACCOUNT_NAME_MAX 63
#define FE_KEY_MAX 128
/* base64 of a 32-byte HMAC-SHA256: 44 chars + NUL. */
#define FE_AUTH_SIG_SIZE 48
/* Accepted clock skew for x-ms-date / Date (spec §7). */
#define FE_AUTH_MAX_SKEW_SECS (15 * 60)

/* Room for one SHA-256 state (OpenSSL's SHA256_CTX, checked in fe_auth.c). */
#define FE_SHA256_STATE_SIZE 128

struct fe_account
{
    char name[FE_ACCOUNT_NAME_MAX + 1];
    uint8_t key[2][FE_KEY_MAX];
    size_t keylen[2];
    int nkeys; /* 1 or 2 */
    /* Each key's HMAC-SHA256 key schedule (the SHA-256 states after the
     * inner and the outer padded key), computed by fe_accounts_add: a
     * signature check then costs two state copies, not a key setup.
     * Secret like the keys (wiped with them). */
    _Alignas(16) unsigned char hmac[2][2][FE_SHA256_STATE_SIZE];
};

struct fe_accounts
{
    struct fe_account *v;
    size_t n;
};

void fe_accounts_init(struct fe_accounts *a);
/* Wipes the keys and frees the table. */
void fe_accounts_free(struct fe_accounts *a);
/* Adds (or replaces) account @name with base64 keys (@key2_b64 may be
 * NULL). Returns 0 or RT_EINVAL (bad name, bad base64, key too long). */
int fe_accounts_add(struct fe_accounts *a,
                    const char *name,
                    const char *key1_b64,
                    const char *key2_b64);
/* Reads lines "name base64key1 [base64key2]" ('#' comments, blank lines)
 * from @path into @a. The file must be owned by the effective user and
 * give group and other no access (it holds keys); else nothing is read.
 * Returns 0, or RT_ECONFIG with a message in @errmsg (RT_ERRMSG_SIZE
 * bytes: the path, the line number or the offending owner/mode, never a
 * key); on error @a may hold the lines before the bad one, so load into a
 * fresh table and drop it on error. */
int fe_accounts_load(struct fe_accounts *a, const char *path, char *errmsg);

/* The published account table (see the thread note above). */
struct fe_accounts_pub
{
    pthread_mutex_t lock;
    struct fe__accounts_snap *cur; /* NULL until the first publish */
};
void fe_accounts_pub_init(struct fe_accounts_pub *p);
/* Drops the published table (it is freed once no request holds it). */
void fe_accounts_pub_fini(struct fe_accounts_pub *p);
/* [any thread] Makes the accounts in @a the current table: the table is
 * moved out of @a (left empty); requests already holding the previous
 * table keep it until they release it. */
void fe_accounts_publish(struct fe_accounts_pub *p, struct fe_accounts *a);
/* [any thread] The current table with one reference taken (NULL if none
 * was published); valid until fe_accounts_release(). */
const struct fe_accounts *fe_accounts_acquire(struct fe_accounts_pub *p);
/* Releases a reference from fe_accounts_acquire (NULL is ignored); the
 * last one wipes the keys and frees the table. */
void fe_accounts_release(const struct fe_accounts *a);
/* Borrowed pointer into @a, or NULL. */
const struct fe_account *fe_accounts_find(const struct fe_accounts *a,
                                          const char *name);

enum fe_auth_scheme {
    FE_AUTH_SHAREDKEY,
    FE_AUTH_SHAREDKEYLITE,
};

/* A parsed "SharedKey|SharedKeyLite account:signature" header. Pointers
 * borrow from the header value. */
struct fe_auth_hdr
{
    enum fe_auth_scheme scheme;
    const char *account;
    size_t account_len;
    const char *sig;
    size_t sig_len;
};

/* Returns 0, RT_EAUTH for a scheme we do not accept (Bearer: spec §7.2,
 * out of scope) or RT_EAUTHINFO when the value is malformed. */
int fe_auth_parse_header(const char *value, struct fe_auth_hdr *out);

/* CanonicalizedResource (spec §7.1): "/" + @account + @raw_path (exactly
 * as sent, not decoded) + ("?comp=" + @comp when @comp is non-NULL).
 * Appended to @out. */
void fe_auth_canon_resource(struct rt_buf *out,
                            const char *account,
                            const char *raw_path,
                            size_t raw_len,
                            const char *comp);

/* Appends one line of a string-to-sign (Shared Key or SAS): @v, NULL
 * counting as empty, and '\n'. */
void fe_auth_sts_line(struct rt_buf *out, const char *v);

/* String-to-sign (spec §7.2), appended to @out:
 *   SharedKey:     VERB \n Content-MD5 \n Content-Type \n Date \n Resource
 *   SharedKeyLite: Date \n Resource
 * NULL header values count as empty. @date is the x-ms-date value if the
 * request has one, else the Date header. */
void fe_auth_string_to_sign(struct rt_buf *out,
                            enum fe_auth_scheme scheme,
                            const char *verb,
                            const char *content_md5,
                            const char *content_type,
                            const char *date,
                            const char *canon_resource);

/* out = base64(HMAC-SHA256(key, msg)), NUL-terminated. */
void fe_auth_sign(const uint8_t *key,
                  size_t keylen,
                  const char *msg,
                  size_t n,
                  char out[FE_AUTH_SIG_SIZE]);

/* Checks @sig against the signature of @msg under each key of @acct, in
 * constant time. Returns 0 or RT_EAUTH. */
int fe_auth_check(const struct fe_account *acct,
                  const char *msg,
                  size_t n,
                  const char *sig,
                  size_t sig_len);

/* Everything the verifier needs from a request (all borrowed). */
struct fe_auth_req
{
    const char *verb;
    const char *authorization; /* NULL = absent */
    const char *content_md5;
    const char *content_type;
    const char *x_ms_date;
    const char *date;
    const char *raw_path; /* raw request path, no query string */
    size_t raw_path_len;
    const char *comp;     /* decoded "comp" query value, NULL = absent */
    const char *account;  /* from the URL, "-secondary" stripped */
    const char *acct_seg; /* the URL's first segment as sent */
    int64_t now;          /* Unix seconds */
};

/* Full Shared Key check of a request (spec §7): header present (else
 * RT_ENOAUTH), well-formed (else RT_EAUTHINFO), account known and equal to
 * the URL's account, date present and within FE_AUTH_MAX_SKEW_SECS, and
 * the signature matches key1 or key2 (else RT_EAUTH). For secondary
 * (path-style "-secondary") requests both the path as sent and the path
 * without "-secondary" are accepted (spec §7.1, §12 item 9).
 * @why (RT_ERRMSG_SIZE bytes) receives a reason for the log (never the
 * signature or key). */
int fe_auth_verify(const struct fe_accounts *accts,
                   const struct fe_auth_req *r,
                   char *why);

#endif
