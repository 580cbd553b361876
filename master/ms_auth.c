/* Admin token and request rules of rt-master's HTTP listener (see
 * ms_auth.h). The happy path: the token file is read once at start and on
 * each SIGHUP; each request is one ms_auth_check under the mutex. Failure
 * modes: a bad token file at start stops the master (ms_main); a bad one
 * on SIGHUP keeps the previous token, so a botched rotation does not lock
 * the operator out. */
#include "ms_auth.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "rt_alloc.h"
#include "rt_err.h"

struct ms_auth
{
    pthread_mutex_t mu;
    char *token_file; /* NULL: no token */
    bool insecure;
    bool status_open;
    bool have_token;
    unsigned char digest[32]; /* SHA-256 of the token */
};

static int ms__auth_sha256(const void *p, size_t n, unsigned char out[32])
{
    unsigned int len = 0;
    if (EVP_Digest(p, n, out, &len, EVP_sha256(), NULL) != 1 || len != 32) {
        return RT_EIO;
    }
    return 0;
}

/* RFC 6750 §2.1 b64token: 1*( ALPHA / DIGIT / "-" / "." / "_" / "~" /
 * "+" / "/" ) *"=". */
static bool ms__auth_b64token(const char *s, size_t n, bool *all_hex)
{
    size_t i = 0;
    *all_hex = n > 0;
    for (; i < n && s[i] != '='; i++) {
        unsigned char c = (unsigned char)s[i];
        bool hex = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') ||
                   (c >= 'A' && c <= 'F');
        bool alnum = hex || (c >= 'g' && c <= 'z') || (c >= 'G' && c <= 'Z');
        if (!alnum && !strchr("-._~+/", c)) {
            return false;
        }
        *all_hex = *all_hex && hex;
    }
    if (i == 0) {
        return false;
    }
    for (; i < n; i++) {
        if (s[i] != '=') {
            return false;
        }
        *all_hex = false;
    }
    return true;
}

static bool ms__auth_space(char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

int ms_auth_read_token(const char *path, unsigned char digest[32], char *errmsg)
{
    char buf[MS_AUTH_MAX_FILE + 1];
    struct stat st;
    size_t len = 0, b, e;
    bool all_hex;
    int fd, rc = RT_EINVAL;

    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        rt_errmsg_printf(errmsg, "admin token file %s: %s", path,
                         strerror(errno));
        return RT_EIO;
    }
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        rt_errmsg_printf(errmsg, "admin token file %s: not a regular file",
                         path);
        goto out;
    }
    if (st.st_mode & 077) {
        rt_errmsg_printf(errmsg,
                         "admin token file %s: permissions %04o are too "
                         "open (group or others may access it); chmod 600 "
                         "it",
                         path, (unsigned)(st.st_mode & 07777));
        goto out;
    }
    for (;;) {
        ssize_t r = read(fd, buf + len, sizeof(buf) - len);
        if (r < 0 && errno == EINTR) {
            continue;
        }
        if (r < 0) {
            rt_errmsg_printf(errmsg, "admin token file %s: %s", path,
                             strerror(errno));
            rc = RT_EIO;
            goto out;
        }
        if (r == 0) {
            break;
        }
        len += (size_t)r;
        if (len == sizeof(buf)) {
            rt_errmsg_printf(errmsg,
                             "admin token file %s: larger than %d bytes", path,
                             MS_AUTH_MAX_FILE);
            goto out;
        }
    }
    for (b = 0; b < len && ms__auth_space(buf[b]); b++) {
    }
    for (e = len; e > b && ms__auth_space(buf[e - 1]); e--) {
    }
    if (e == b) {
        rt_errmsg_printf(errmsg, "admin token file %s: empty", path);
        goto out;
    }
    if (!ms__auth_b64token(buf + b, e - b, &all_hex)) {
        rt_errmsg_printf(errmsg,
                         "admin token file %s: one token of base64 or hex "
                         "characters expected (no spaces inside)",
                         path);
        goto out;
    }
    if (e - b < (all_hex ? MS_AUTH_MIN_HEX : MS_AUTH_MIN_B64)) {
        rt_errmsg_printf(errmsg,
                         "admin token file %s: too short (%zu characters); "
                         "at least 32 random bytes: %d hex or %d base64 "
                         "characters (openssl rand -hex 32)",
                         path, e - b, MS_AUTH_MIN_HEX, MS_AUTH_MIN_B64);
        goto out;
    }
    rc = ms__auth_sha256(buf + b, e - b, digest);
    if (rc) {
        rt_errmsg_printf(errmsg, "admin token file %s: sha256 failed", path);
    }
out:
    OPENSSL_cleanse(buf, sizeof(buf));
    close(fd);
    return rc;
}

int ms_auth_create(const char *token_file,
                   bool insecure,
                   bool status_open,
                   struct ms_auth **out,
                   char *errmsg)
{
    struct ms_auth *a = rt_xcalloc(1, sizeof(*a));
    pthread_mutex_init(&a->mu, NULL);
    a->insecure = insecure;
    a->status_open = status_open;
    if (token_file && *token_file) {
        int rc = ms_auth_read_token(token_file, a->digest, errmsg);
        if (rc) {
            ms_auth_destroy(a);
            return rc;
        }
        a->token_file = rt_xstrdup(token_file);
        a->have_token = true;
    }
    *out = a;
    return 0;
}

int ms_auth_reload(struct ms_auth *a, char *errmsg)
{
    unsigned char d[32];
    int rc;
    if (!a->token_file) {
        return 0;
    }
    rc = ms_auth_read_token(a->token_file, d, errmsg);
    if (rc == 0) {
        pthread_mutex_lock(&a->mu);
        memcpy(a->digest, d, sizeof(d));
        pthread_mutex_unlock(&a->mu);
    }
    OPENSSL_cleanse(d, sizeof(d));
    return rc;
}

void ms_auth_destroy(struct ms_auth *a)
{
    if (!a) {
        return;
    }
    pthread_mutex_destroy(&a->mu);
    free(a->token_file);
    OPENSSL_cleanse(a, sizeof(*a));
    free(a);
}

bool ms_auth_has_token(const struct ms_auth *a)
{
    return a->have_token;
}

/* Origin is the serialisation "scheme://host[:port]" (RFC 6454 §6.2); the
 * listener's own is "http://" + the Host the browser sent, or "https://"
 * + Host behind a TLS proxy that passes the Host on. */
static bool ms__auth_same_origin(const char *origin, const char *host)
{
    size_t n;
    if (!host || !*host) {
        return false;
    }
    if (strncasecmp(origin, "http://", 7) == 0) {
        n = 7;
    } else if (strncasecmp(origin, "https://", 8) == 0) {
        n = 8;
    } else {
        return false;
    }
    return strcasecmp(origin + n, host) == 0;
}

/* The token of "Bearer TOKEN" (scheme case-insensitive, RFC 7235 §2.1),
 * or NULL for no header or another scheme. *@n is its length. */
static const char *ms__auth_bearer(const char *h, size_t *n)
{
    const char *t;
    if (!h || strncasecmp(h, "Bearer", 6) != 0 ||
        (h[6] != ' ' && h[6] != '\t')) {
        return NULL;
    }
    for (t = h + 6; *t == ' ' || *t == '\t'; t++) {
    }
    *n = strlen(t);
    while (*n && (t[*n - 1] == ' ' || t[*n - 1] == '\t')) {
        (*n)--;
    }
    return *n ? t : NULL;
}

enum ms_auth_verdict ms_auth_check(struct ms_auth *a,
                                   const struct ms_auth_req *r)
{
    unsigned char d[32];
    const char *tok;
    size_t n = 0;
    bool ok;

    if (r->route == MS_AUTH_OPEN) {
        return MS_AUTH_OK;
    }
    if (r->route == MS_AUTH_MUTATE) {
        /* Before the token: a page must not be able to make a browser
         * replay credentials it holds (CSRF). */
        if ((r->origin && !ms__auth_same_origin(r->origin, r->host)) ||
            (r->sec_fetch_site &&
             strcasecmp(r->sec_fetch_site, "cross-site") == 0)) {
            return MS_AUTH_CROSS_ORIGIN;
        }
    }
    if (!a->have_token) {
        if (a->insecure || (r->route == MS_AUTH_READ && a->status_open)) {
            return MS_AUTH_OK;
        }
        return MS_AUTH_DISABLED;
    }
    if (r->route == MS_AUTH_READ && a->status_open) {
        return MS_AUTH_OK;
    }
    tok = ms__auth_bearer(r->authorization, &n);
    if (!tok) {
        return MS_AUTH_MISSING;
    }
    if (ms__auth_sha256(tok, n, d) != 0) {
        return MS_AUTH_WRONG;
    }
    pthread_mutex_lock(&a->mu);
    ok = CRYPTO_memcmp(d, a->digest, sizeof(d)) == 0;
    pthread_mutex_unlock(&a->mu);
    OPENSSL_cleanse(d, sizeof(d));
    return ok ? MS_AUTH_OK : MS_AUTH_WRONG;
}

unsigned int ms_auth_status(enum ms_auth_verdict v)
{
    switch (v) {
        case MS_AUTH_OK:
            return 200;
        case MS_AUTH_MISSING:
            return 401;
        default:
            return 403;
    }
}

const char *ms_auth_message(enum ms_auth_verdict v)
{
    switch (v) {
        case MS_AUTH_OK:
            return "ok";
        case MS_AUTH_MISSING:
            return "this endpoint needs the admin token: Authorization: Bearer "
                   "TOKEN (rtctl --token-file FILE)";
        case MS_AUTH_WRONG:
            return "wrong admin token";
        case MS_AUTH_CROSS_ORIGIN:
            return "cross-origin request refused: admin actions are accepted "
                   "only from the master's own origin";
        case MS_AUTH_DISABLED:
            return "admin API disabled: this master has no admin token; start "
                   "it with --admin-token-file FILE (or --status-open for the "
                   "read-only status, --admin-insecure for no protection)";
        default:
            return "forbidden";
    }
}
