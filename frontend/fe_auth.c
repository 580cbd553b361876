/* Shared Key authentication: see fe_auth.h. */
/* SHA256_* (deprecated in OpenSSL 3, still the fastest way to copy a
 * precomputed HMAC key schedule by value, as tools/rt-load/rl_auth.c does). */
#define OPENSSL_SUPPRESS_DEPRECATED 1
#include "fe_auth.h"

#include <ctype.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/sha.h>

#include "fe_b64.h"
#include "rt_alloc.h"
#include "rt_err.h"
#include "rt_time.h"

_Static_assert(sizeof(SHA256_CTX) <= FE_SHA256_STATE_SIZE,
               "FE_SHA256_STATE_SIZE too small for SHA256_CTX");

/* ---- Accounts ------------------------------------------------------- */

/* HMAC-SHA256 key schedule of @key into @st[0] (inner) and @st[1]
 * (outer) (RFC 2104). */
static void fe__hmac_prepare(const uint8_t *key,
                             size_t keylen,
                             unsigned char st[2][FE_SHA256_STATE_SIZE])
{
    unsigned char k[64], pad[64];
    SHA256_CTX c;
    memset(k, 0, sizeof(k));
    if (keylen > sizeof(k)) {
        SHA256(key, keylen, k);
    } else {
        memcpy(k, key, keylen);
    }
    for (int side = 0; side < 2; side++) {
        for (size_t i = 0; i < sizeof(pad); i++) {
            pad[i] = (unsigned char)(k[i] ^ (side == 0 ? 0x36 : 0x5c));
        }
        SHA256_Init(&c);
        SHA256_Update(&c, pad, sizeof(pad));
        memcpy(st[side], &c, sizeof(c));
    }
    OPENSSL_cleanse(k, sizeof(k));
    OPENSSL_cleanse(pad, sizeof(pad));
    OPENSSL_cleanse(&c, sizeof(c));
}

/* Base64 HMAC-SHA256 of @msg with the key schedule @st. */
static void fe__hmac_sign(const unsigned char st[2][FE_SHA256_STATE_SIZE],
                          const char *msg,
                          size_t n,
                          char out[FE_AUTH_SIG_SIZE])
{
    unsigned char md[SHA256_DIGEST_LENGTH];
    SHA256_CTX c;
    memcpy(&c, st[0], sizeof(c));
    SHA256_Update(&c, msg, n);
    SHA256_Final(md, &c);
    memcpy(&c, st[1], sizeof(c));
    SHA256_Update(&c, md, sizeof(md));
    SHA256_Final(md, &c);
    fe_b64_encode(md, sizeof(md), out);
    OPENSSL_cleanse(md, sizeof(md));
    OPENSSL_cleanse(&c, sizeof(c));
}

void fe_accounts_init(struct fe_accounts *a)
{
    a->v = NULL;
    a->n = 0;
}

void fe_accounts_free(struct fe_accounts *a)
{
    if (a->v) {
        OPENSSL_cleanse(a->v, a->n * sizeof(*a->v));
    }
    free(a->v);
    fe_accounts_init(a);
}

/* An account key: strict, non-empty base64 (fe_b64_decode) of at most
 * @outcap bytes. Returns the key length or -1. */
static int fe__key_decode(const char *in, uint8_t *out, size_t outcap)
{
    size_t n = strlen(in);
    uint8_t tmp[FE_KEY_MAX * 2];
    int len;
    if (n == 0 || FE_B64_DECODED_SIZE(n) > sizeof(tmp)) {
        return -1;
    }
    len = fe_b64_decode(in, n, tmp);
    if (len < 0 || (size_t)len > outcap) {
        OPENSSL_cleanse(tmp, sizeof(tmp));
        return -1;
    }
    memcpy(out, tmp, (size_t)len);
    OPENSSL_cleanse(tmp, sizeof(tmp));
    return len;
}

int fe_accounts_add(struct fe_accounts *a,
                    const char *name,
                    const char *key1_b64,
                    const char *key2_b64)
{
    struct fe_account acct;
    struct fe_account *v;
    size_t nlen = strlen(name);
    int len;

    if (nlen == 0 || nlen > FE_ACCOUNT_NAME_MAX) {
        return RT_EINVAL;
    }
    for (size_t i = 0; i < nlen; i++) {
        if (!isalnum((unsigned char)name[i]) && name[i] != '-') {
            return RT_EINVAL;
        }
    }
    memset(&acct, 0, sizeof(acct));
    memcpy(acct.name, name, nlen);
    len = fe__key_decode(key1_b64, acct.key[0], FE_KEY_MAX);
    if (len <= 0) {
        return RT_EINVAL;
    }
    acct.keylen[0] = (size_t)len;
    acct.nkeys = 1;
    if (key2_b64) {
        len = fe__key_decode(key2_b64, acct.key[1], FE_KEY_MAX);
        if (len <= 0) {
            OPENSSL_cleanse(&acct, sizeof(acct));
            return RT_EINVAL;
        }
        acct.keylen[1] = (size_t)len;
        acct.nkeys = 2;
    }
    for (int k = 0; k < acct.nkeys; k++) {
        fe__hmac_prepare(acct.key[k], acct.keylen[k], acct.hmac[k]);
    }
    for (size_t i = 0; i < a->n; i++) {
        if (strcmp(a->v[i].name, name) == 0) {
            a->v[i] = acct;
            OPENSSL_cleanse(&acct, sizeof(acct));
            return 0;
        }
    }
    v = rt_xrealloc(a->v, (a->n + 1) * sizeof(*v));
    a->v = v;
    a->v[a->n++] = acct;
    OPENSSL_cleanse(&acct, sizeof(acct));
    return 0;
}

/* The accounts file holds keys: it must be ours and closed to group and
 * other (anyone who can write it can add an account; anyone who can read
 * it has every key). Checked on the open descriptor, so the file read is
 * the file checked. */
static int fe__accounts_file_ok(FILE *f, const char *path, char *errmsg)
{
    struct stat st;
    if (fstat(fileno(f), &st) != 0) {
        rt_errmsg_printf(errmsg, "accounts file %s: %s", path, strerror(errno));
        return RT_ECONFIG;
    }
    if (st.st_uid != geteuid()) {
        rt_errmsg_printf(errmsg,
                         "accounts file %s is owned by uid %u, not by the "
                         "running user (uid %u)",
                         path, (unsigned)st.st_uid, (unsigned)geteuid());
        return RT_ECONFIG;
    }
    if (st.st_mode & (S_IRWXG | S_IRWXO)) {
        rt_errmsg_printf(
            errmsg,
            "accounts file %s has mode %04o: group/other may "
            "%s it (chmod 600)",
            path, (unsigned)(st.st_mode & 07777),
            (st.st_mode & (S_IRGRP | S_IROTH)) ? "read" : "access");
        return RT_ECONFIG;
    }
    return 0;
}

int fe_accounts_load(struct fe_accounts *a, const char *path, char *errmsg)
{
    FILE *f = fopen(path, "r");
    char line[1024];
    int lineno = 0;
    if (!f) {
        rt_errmsg_printf(errmsg, "accounts file %s: %s", path, strerror(errno));
        return RT_ECONFIG;
    }
    if (fe__accounts_file_ok(f, path, errmsg) != 0) {
        fclose(f);
        return RT_ECONFIG;
    }
    while (fgets(line, sizeof(line), f)) {
        char *save = NULL;
        char *hash = strchr(line, '#');
        char *name, *k1, *k2, *extra;
        lineno++;
        if (hash) {
            *hash = '\0';
        }
        name = strtok_r(line, " \t\r\n", &save);
        if (!name) {
            continue;
        }
        k1 = strtok_r(NULL, " \t\r\n", &save);
        k2 = strtok_r(NULL, " \t\r\n", &save);
        extra = strtok_r(NULL, " \t\r\n", &save);
        if (!k1 || extra || fe_accounts_add(a, name, k1, k2) != 0) {
            rt_errmsg_printf(errmsg,
                             "accounts file %s:%d: expected 'name "
                             "base64key1 [base64key2]'",
                             path, lineno);
            OPENSSL_cleanse(line, sizeof(line));
            fclose(f);
            return RT_ECONFIG;
        }
        OPENSSL_cleanse(line, sizeof(line));
    }
    fclose(f);
    return 0;
}

const struct fe_account *fe_accounts_find(const struct fe_accounts *a,
                                          const char *name)
{
    for (size_t i = 0; i < a->n; i++) {
        if (strcmp(a->v[i].name, name) == 0) {
            return &a->v[i];
        }
    }
    return NULL;
}

/* ---- The published table ------------------------------------------ */

/* A published table and its references (the publisher's one plus one per
 * request holding it). */
struct fe__accounts_snap
{
    struct fe_accounts a; /* first: fe_accounts_release casts back */
    atomic_uint refs;
};

void fe_accounts_pub_init(struct fe_accounts_pub *p)
{
    pthread_mutex_init(&p->lock, NULL);
    p->cur = NULL;
}

void fe_accounts_release(const struct fe_accounts *a)
{
    struct fe__accounts_snap *s = (struct fe__accounts_snap *)a;
    if (s && atomic_fetch_sub(&s->refs, 1) == 1) {
        fe_accounts_free(&s->a);
        free(s);
    }
}

void fe_accounts_pub_fini(struct fe_accounts_pub *p)
{
    if (p->cur) {
        fe_accounts_release(&p->cur->a);
        p->cur = NULL;
    }
    pthread_mutex_destroy(&p->lock);
}

void fe_accounts_publish(struct fe_accounts_pub *p, struct fe_accounts *a)
{
    struct fe__accounts_snap *s = rt_xcalloc(1, sizeof(*s));
    struct fe__accounts_snap *old;
    s->a = *a;
    atomic_init(&s->refs, 1);
    fe_accounts_init(a);
    pthread_mutex_lock(&p->lock);
    old = p->cur;
    p->cur = s;
    pthread_mutex_unlock(&p->lock);
    if (old) {
        fe_accounts_release(&old->a);
    }
}

const struct fe_accounts *fe_accounts_acquire(struct fe_accounts_pub *p)
{
    struct fe__accounts_snap *s;
    pthread_mutex_lock(&p->lock);
    s = p->cur;
    if (s) {
        atomic_fetch_add(&s->refs, 1);
    }
    pthread_mutex_unlock(&p->lock);
    return s ? &s->a : NULL;
}

/* ---- Header, string-to-sign, signature ------------------------------ */

int fe_auth_parse_header(const char *value, struct fe_auth_hdr *out)
{
    const char *p = value;
    const char *colon;
    const char *end;
    size_t schlen;

    while (*p == ' ' || *p == '\t') {
        p++;
    }
    schlen = strcspn(p, " \t");
    if (schlen == 9 && strncmp(p, "SharedKey", 9) == 0) {
        out->scheme = FE_AUTH_SHAREDKEY;
    } else if (schlen == 13 && strncmp(p, "SharedKeyLite", 13) == 0) {
        out->scheme = FE_AUTH_SHAREDKEYLITE;
    } else if (schlen == 6 && strncasecmp(p, "Bearer", 6) == 0) {
        return RT_EAUTH;
    } else {
        return RT_EAUTHINFO;
    }
    p += schlen;
    if (*p != ' ' && *p != '\t') {
        return RT_EAUTHINFO;
    }
    while (*p == ' ' || *p == '\t') {
        p++;
    }
    end = p + strlen(p);
    while (end > p && (end[-1] == ' ' || end[-1] == '\t')) {
        end--;
    }
    colon = memchr(p, ':', (size_t)(end - p));
    if (!colon || colon == p || colon + 1 == end) {
        return RT_EAUTHINFO;
    }
    for (const char *q = colon + 1; q < end; q++) {
        if (*q == ' ' || *q == '\t' || *q == ':') {
            return RT_EAUTHINFO;
        }
    }
    out->account = p;
    out->account_len = (size_t)(colon - p);
    out->sig = colon + 1;
    out->sig_len = (size_t)(end - colon - 1);
    return 0;
}

void fe_auth_canon_resource(struct rt_buf *out,
                            const char *account,
                            const char *raw_path,
                            size_t raw_len,
                            const char *comp)
{
    rt_buf_append_u8(out, '/');
    rt_buf_append_str(out, account);
    rt_buf_append(out, raw_path, raw_len);
    if (comp) {
        rt_buf_append_str(out, "?comp=");
        rt_buf_append_str(out, comp);
    }
}

void fe_auth_sts_line(struct rt_buf *out, const char *v)
{
    rt_buf_append_str(out, v ? v : "");
    rt_buf_append_u8(out, '\n');
}

void fe_auth_string_to_sign(struct rt_buf *out,
                            enum fe_auth_scheme scheme,
                            const char *verb,
                            const char *content_md5,
                            const char *content_type,
                            const char *date,
                            const char *canon_resource)
{
    if (scheme == FE_AUTH_SHAREDKEY) {
        fe_auth_sts_line(out, verb);
        fe_auth_sts_line(out, content_md5);
        fe_auth_sts_line(out, content_type);
    }
    fe_auth_sts_line(out, date);
    rt_buf_append_str(out, canon_resource);
}

void fe_auth_sign(const uint8_t *key,
                  size_t keylen,
                  const char *msg,
                  size_t n,
                  char out[FE_AUTH_SIG_SIZE])
{
    unsigned char mac[EVP_MAX_MD_SIZE];
    unsigned int maclen = 0;
    if (!HMAC(EVP_sha256(), key, (int)keylen, (const unsigned char *)msg, n,
              mac, &maclen)) {
        out[0] = '\0';
        return;
    }
    fe_b64_encode(mac, maclen, out);
    OPENSSL_cleanse(mac, sizeof(mac));
}

int fe_auth_check(const struct fe_account *acct,
                  const char *msg,
                  size_t n,
                  const char *sig,
                  size_t sig_len)
{
    int ok = 0;
    for (int i = 0; i < acct->nkeys; i++) {
        char want[FE_AUTH_SIG_SIZE];
        size_t wlen;
        fe__hmac_sign(
            (const unsigned char(*)[FE_SHA256_STATE_SIZE])acct->hmac[i], msg, n,
            want);
        wlen = strlen(want);
        /* The length of a valid signature is public (44); compare the
         * bytes in constant time. */
        if (wlen == sig_len && wlen > 0 &&
            CRYPTO_memcmp(want, sig, wlen) == 0) {
            ok = 1;
        }
        OPENSSL_cleanse(want, sizeof(want));
    }
    return ok ? 0 : RT_EAUTH;
}

static int fe__verify_path(const struct fe_account *acct,
                           const struct fe_auth_req *r,
                           const struct fe_auth_hdr *h,
                           const char *date,
                           const char *path,
                           size_t path_len)
{
    struct rt_buf res = RT_BUF_INIT;
    struct rt_buf sts = RT_BUF_INIT;
    int rc;
    fe_auth_canon_resource(&res, acct->name, path, path_len, r->comp);
    fe_auth_string_to_sign(&sts, h->scheme, r->verb, r->content_md5,
                           r->content_type, date, rt_buf_cstr(&res));
    rc = fe_auth_check(acct, (const char *)sts.data, sts.len, h->sig,
                       h->sig_len);
    rt_buf_free(&res);
    rt_buf_free(&sts);
    return rc;
}

int fe_auth_verify(const struct fe_accounts *accts,
                   const struct fe_auth_req *r,
                   char *why)
{
    struct fe_auth_hdr h;
    const struct fe_account *acct;
    const char *date;
    int64_t t;
    int rc;

    if (!r->authorization || !*r->authorization) {
        rt_errmsg_printf(why, "no Authorization header");
        return RT_ENOAUTH;
    }
    rc = fe_auth_parse_header(r->authorization, &h);
    if (rc != 0) {
        rt_errmsg_printf(why, "%s",
                         rc == RT_EAUTH ? "unsupported authorization scheme"
                                        : "malformed Authorization header");
        return rc;
    }
    acct = fe_accounts_find(accts, r->account);
    if (!acct) {
        rt_errmsg_printf(why, "unknown account '%s'", r->account);
        return RT_EAUTH;
    }
    if (h.account_len != strlen(acct->name) ||
        memcmp(h.account, acct->name, h.account_len) != 0) {
        rt_errmsg_printf(why,
                         "Authorization account does not match the "
                         "URL's account");
        return RT_EAUTH;
    }
    /* x-ms-date wins over Date (spec §7.2; §12 item 8). */
    date = (r->x_ms_date && *r->x_ms_date) ? r->x_ms_date : r->date;
    if (!date || !*date) {
        rt_errmsg_printf(why, "no x-ms-date or Date header");
        return RT_EAUTH;
    }
    if (rt_time_parse_http_date(date, &t) != 0) {
        rt_errmsg_printf(why, "unparseable request date");
        return RT_EAUTH;
    }
    if (t > r->now + FE_AUTH_MAX_SKEW_SECS ||
        t < r->now - FE_AUTH_MAX_SKEW_SECS) {
        rt_errmsg_printf(why, "request date outside the 15 minute window");
        return RT_EAUTH;
    }
    rc = fe__verify_path(acct, r, &h, date, r->raw_path, r->raw_path_len);
    if (rc != 0 && r->acct_seg && strcmp(r->acct_seg, r->account) != 0) {
        /* Secondary: the docs sign the path without "-secondary"; the
         * JS/.NET SDKs sign it as sent. Accept both (spec §12 item 9). */
        size_t seglen = strlen(r->acct_seg);
        size_t alen = strlen(r->account);
        if (r->raw_path_len >= 1 + seglen &&
            memcmp(r->raw_path + 1, r->acct_seg, seglen) == 0) {
            struct rt_buf alt = RT_BUF_INIT;
            rt_buf_append_u8(&alt, '/');
            rt_buf_append(&alt, r->account, alen);
            rt_buf_append(&alt, r->raw_path + 1 + seglen,
                          r->raw_path_len - 1 - seglen);
            rc = fe__verify_path(acct, r, &h, date, (const char *)alt.data,
                                 alt.len);
            rt_buf_free(&alt);
        }
    }
    if (rc != 0) {
        rt_errmsg_printf(
            why, "signature mismatch (%s)",
            h.scheme == FE_AUTH_SHAREDKEY ? "SharedKey" : "SharedKeyLite");
    }
    return rc;
}
