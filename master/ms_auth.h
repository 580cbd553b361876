/* Who may use rt-master's HTTP listener (docs/DESIGN.md "Admin API
 * security"). An ms_auth holds the admin token (only its SHA-256: the
 * token itself is wiped once hashed) and the two switches, and decides
 * each request from its route class and four headers:
 *   - /health is open to anyone;
 *   - a mutating route (POST /api/split, ...) is refused (403) when the
 *     request carries an Origin that is not the listener's own
 *     ("http://" or "https://" + Host) or Sec-Fetch-Site: cross-site, even
 *     with the
 *     token; then it needs "Authorization: Bearer TOKEN" (none or another
 *     scheme: 401, a wrong token: 403); without a token file every
 *     mutation is refused (403) unless the master runs --admin-insecure;
 *   - a read-only route (status, history, events, metrics) needs the
 *     token too, unless --status-open (or --admin-insecure without a
 *     token file).
 * Tokens are compared as SHA-256 digests with CRYPTO_memcmp, so the
 * comparison takes the same time whatever the token and its length.
 *
 * Thread: ms_auth_check from any thread (the HTTP thread); ms_auth_reload
 * from another (the main loop on SIGHUP); a mutex orders them. */
#ifndef MS_AUTH_H
#define MS_AUTH_H

#include <stdbool.h>
#include <stddef.h>

/* The shortest token accepted: 32 random bytes as base64 (43 characters
 * without padding) or hex (64 characters). */
#define MS_AUTH_MIN_B64 43
#define MS_AUTH_MIN_HEX 64
#define MS_AUTH_MAX_FILE 4096

enum ms_auth_route {
    MS_AUTH_OPEN,   /* /health */
    MS_AUTH_READ,   /* GET status documents */
    MS_AUTH_MUTATE, /* POST actions */
};

enum ms_auth_verdict {
    MS_AUTH_OK,
    MS_AUTH_MISSING,      /* 401 + WWW-Authenticate: Bearer */
    MS_AUTH_WRONG,        /* 403 */
    MS_AUTH_CROSS_ORIGIN, /* 403 */
    MS_AUTH_DISABLED,     /* 403: no token file, not --admin-insecure */
    MS_AUTH__NR,
};

/* The request headers the decision reads; each borrowed, NULL if absent. */
struct ms_auth_req
{
    enum ms_auth_route route;
    const char *authorization;
    const char *origin;
    const char *host;
    const char *sec_fetch_site;
};

struct ms_auth;

/* Reads the token in @path: a regular file no one but its owner may read
 * or write (mode & 077 == 0, as ssh wants of a private key), one token of
 * RFC 6750 b64token characters, surrounding whitespace ignored, at least
 * MS_AUTH_MIN_B64 characters (MS_AUTH_MIN_HEX when it is all hex digits).
 * On 0, @digest (32 bytes) holds its SHA-256; the token's bytes are wiped.
 * Errors: RT_EIO (cannot open or read), RT_EINVAL (permissions, empty,
 * too short, bad characters); @errmsg (RT_ERRMSG_SIZE) says which,
 * without the token. */
int ms_auth_read_token(const char *path,
                       unsigned char digest[32],
                       char *errmsg);

/* @token_file (borrowed, copied; NULL or "" = none): as
 * ms_auth_read_token. On 0, *out is the caller's (ms_auth_destroy). */
int ms_auth_create(const char *token_file,
                   bool insecure,
                   bool status_open,
                   struct ms_auth **out,
                   char *errmsg);
/* Reads the token file again; on success the new token replaces the old
 * one at once (the old one stops working). On error the old token stays
 * and @errmsg says why. 0 without a token file. */
int ms_auth_reload(struct ms_auth *a, char *errmsg);
/* Wipes and frees. Safe with NULL. */
void ms_auth_destroy(struct ms_auth *a);

bool ms_auth_has_token(const struct ms_auth *a);

/* The decision for @r (borrowed). Pure but for the lock. */
enum ms_auth_verdict ms_auth_check(struct ms_auth *a,
                                   const struct ms_auth_req *r);
/* The HTTP status of @v (200, 401 or 403) and a message for the client
 * (a literal; it says how to fix the request, never the token). */
unsigned int ms_auth_status(enum ms_auth_verdict v);
const char *ms_auth_message(enum ms_auth_verdict v);

#endif
