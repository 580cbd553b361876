/* Request header and query-parameter rules: see fe_hdr.h. */
#include "fe_hdr.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <openssl/rand.h>

#include "fe_b64.h"
#include "rt_alloc.h"
#include "rt_err.h"
#include "rt_rand.h"

/* Trims spaces/tabs in place around s[*b..*e). */
static void fe__trim(const char *s, size_t *b, size_t *e)
{
    while (*b < *e && (s[*b] == ' ' || s[*b] == '\t')) {
        (*b)++;
    }
    while (*e > *b && (s[*e - 1] == ' ' || s[*e - 1] == '\t')) {
        (*e)--;
    }
}

static int fe__eq(const char *s, size_t n, const char *lit)
{
    return strlen(lit) == n && strncasecmp(s, lit, n) == 0;
}

enum fe__media {
    FE__MEDIA_OTHER,
    FE__MEDIA_ANY,
    FE__MEDIA_JSON,
    FE__MEDIA_ATOM,
};

/* Classifies one media type "type/sub;p=v;..." and reads odata=. */
static enum fe__media fe__media(const char *s, size_t n, enum fe_meta *meta)
{
    size_t semi = 0;
    size_t b = 0, e;
    while (semi < n && s[semi] != ';') {
        semi++;
    }
    e = semi;
    fe__trim(s, &b, &e);
    *meta = FE_META_MINIMAL;
    if (fe__eq(s + b, e - b, "application/json")) {
        size_t i = semi;
        while (i < n) {
            size_t pb = i + 1, pe = pb;
            while (pe < n && s[pe] != ';') {
                pe++;
            }
            i = pe;
            fe__trim(s, &pb, &pe);
            if (pe - pb > 6 && strncasecmp(s + pb, "odata=", 6) == 0) {
                const char *v = s + pb + 6;
                size_t vn = pe - pb - 6;
                if (fe__eq(v, vn, "nometadata")) {
                    *meta = FE_META_NONE;
                } else if (fe__eq(v, vn, "fullmetadata")) {
                    *meta = FE_META_FULL;
                } else {
                    *meta = FE_META_MINIMAL;
                }
            }
        }
        return FE__MEDIA_JSON;
    }
    if (fe__eq(s + b, e - b, "application/atom+xml") ||
        fe__eq(s + b, e - b, "application/xml")) {
        return FE__MEDIA_ATOM;
    }
    if (fe__eq(s + b, e - b, "*/*") || fe__eq(s + b, e - b, "application/*")) {
        return FE__MEDIA_ANY;
    }
    return FE__MEDIA_OTHER;
}

int fe_hdr_meta(const char *accept, const char *format, enum fe_meta *out)
{
    int atom = 0;
    *out = FE_META_MINIMAL;
    if (format && *format) {
        enum fe_meta m;
        enum fe__media k;
        if (strcasecmp(format, "json") == 0) {
            return 0;
        }
        if (strcasecmp(format, "atom") == 0 || strcasecmp(format, "xml") == 0) {
            return RT_EATOMNOTSUPPORTED;
        }
        k = fe__media(format, strlen(format), &m);
        if (k == FE__MEDIA_JSON) {
            *out = m;
            return 0;
        }
        if (k == FE__MEDIA_ATOM) {
            return RT_EATOMNOTSUPPORTED;
        }
        return RT_EQUERYPARAM;
    }
    if (!accept || !*accept) {
        return 0;
    }
    for (const char *p = accept; *p;) {
        const char *c = strchr(p, ',');
        size_t n = c ? (size_t)(c - p) : strlen(p);
        enum fe_meta m;
        switch (fe__media(p, n, &m)) {
            case FE__MEDIA_JSON:
                *out = m;
                return 0;
            case FE__MEDIA_ATOM:
                atom = 1;
                break;
            case FE__MEDIA_ANY:
                return 0;
            case FE__MEDIA_OTHER:
                break;
        }
        p += n;
        if (*p == ',') {
            p++;
        }
    }
    return atom ? RT_EATOMNOTSUPPORTED : 0;
}

/* 1 when JSON is named explicitly by $format or Accept. */
static int fe__json_named(const char *accept, const char *format)
{
    enum fe_meta m;
    if (format && *format) {
        return strcasecmp(format, "json") == 0 ||
               fe__media(format, strlen(format), &m) == FE__MEDIA_JSON;
    }
    for (const char *p = accept ? accept : ""; *p;) {
        size_t n = strcspn(p, ",");
        if (fe__media(p, n, &m) == FE__MEDIA_JSON) {
            return 1;
        }
        p += n;
        if (*p == ',') {
            p++;
        }
    }
    return 0;
}

int fe_hdr_meta_v(const char *accept,
                  const char *format,
                  const char *version,
                  enum fe_meta *out)
{
    int rc = fe_hdr_meta(accept, format, out);
    if (rc == 0 && version && strcmp(version, FE_VERSION_JSON) < 0 &&
        fe__json_named(accept, format)) {
        return RT_EJSONNOTSUPPORTED;
    }
    return rc;
}

int fe_hdr_atom(const char *accept,
                const char *format,
                const char *content_type,
                const char *version)
{
    enum fe_meta m;
    if (version && strcmp(version, FE_VERSION_NO_ATOM) >= 0) {
        return 0;
    }
    if (version && strcmp(version, FE_VERSION_JSON) < 0) {
        return 1;
    }
    if (format && *format) {
        return strcasecmp(format, "atom") == 0 ||
               strcasecmp(format, "xml") == 0 ||
               fe__media(format, strlen(format), &m) == FE__MEDIA_ATOM;
    }
    for (const char *p = accept ? accept : ""; *p;) {
        size_t n = strcspn(p, ",");
        switch (fe__media(p, n, &m)) {
            case FE__MEDIA_JSON:
                return 0;
            case FE__MEDIA_ATOM:
                return 1;
            case FE__MEDIA_ANY:
            case FE__MEDIA_OTHER:
                break;
        }
        p += n;
        if (*p == ',') {
            p++;
        }
    }
    return version ? 1 : fe_hdr_body_atom(content_type, NULL);
}

int fe_hdr_body_atom(const char *content_type, const char *version)
{
    enum fe_meta m;
    return content_type && *content_type &&
           (!version || strcmp(version, FE_VERSION_NO_ATOM) < 0) &&
           fe__media(content_type, strlen(content_type), &m) == FE__MEDIA_ATOM;
}

int fe_hdr_version_check(const char *v)
{
    static const char fmt[] = "dddd-dd-dd";
    int month, day;
    if (strlen(v) != 10) {
        return RT_EHEADER;
    }
    for (int i = 0; i < 10; i++) {
        if (fmt[i] == 'd' ? !isdigit((unsigned char)v[i]) : v[i] != '-') {
            return RT_EHEADER;
        }
    }
    month = (v[5] - '0') * 10 + (v[6] - '0');
    day = (v[8] - '0') * 10 + (v[9] - '0');
    if (month < 1 || month > 12 || day < 1 || day > 31) {
        return RT_EHEADER;
    }
    if (strcmp(v, FE_VERSION_MIN) < 0) {
        return RT_EHEADER;
    }
    return 0;
}

int fe_hdr_client_id_ok(const char *v)
{
    size_t n = 0;
    for (; v[n]; n++) {
        if (n >= 1024 || (unsigned char)v[n] < 0x20 ||
            (unsigned char)v[n] > 0x7e) {
            return 0;
        }
    }
    return n > 0;
}

enum fe_prefer fe_hdr_prefer(const char *v)
{
    enum fe_prefer r = FE_PREFER_NONE;
    if (!v) {
        return r;
    }
    for (const char *p = v; *p;) {
        size_t n = strcspn(p, ",");
        size_t b = 0, e = n;
        fe__trim(p, &b, &e);
        if (fe__eq(p + b, e - b, "return-no-content")) {
            r = FE_PREFER_NO_CONTENT;
        } else if (fe__eq(p + b, e - b, "return-content")) {
            r = FE_PREFER_CONTENT;
        }
        p += n;
        if (*p == ',') {
            p++;
        }
    }
    return r;
}

const char *fe_hdr_prefer_applied(enum fe_prefer p)
{
    switch (p) {
        case FE_PREFER_CONTENT:
            return "return-content";
        case FE_PREFER_NO_CONTENT:
            return "return-no-content";
        default:
            return NULL;
    }
}

int fe_hdr_body_type(const char *content_type)
{
    enum fe_meta m;
    if (!content_type || !*content_type) {
        return 0;
    }
    if (fe__media(content_type, strlen(content_type), &m) == FE__MEDIA_ATOM) {
        return RT_EATOMNOTSUPPORTED;
    }
    return 0;
}

int fe_hdr_body_type_v(const char *content_type, const char *version)
{
    enum fe_meta m;
    int rc = fe_hdr_body_type(content_type);
    if (rc == 0 && content_type && version &&
        strcmp(version, FE_VERSION_JSON) < 0 &&
        fe__media(content_type, strlen(content_type), &m) == FE__MEDIA_JSON) {
        return RT_EJSONNOTSUPPORTED;
    }
    return rc;
}

int fe_hdr_if_match(const char *v, uint64_t *ticks, int *any)
{
    size_t b = 0, e = strlen(v);
    fe__trim(v, &b, &e);
    *any = 0;
    *ticks = 0;
    if (b == e) {
        return RT_EPRECOND;
    }
    if (fe_odata_parse_etag(v, ticks, any) == 0) {
        return 0;
    }
    /* Azure takes "w/" as a weak ETag too (412, never 400); it matches
     * nothing: we only issue "W/". */
    if (e - b >= 4 && (v[b] == 'W' || v[b] == 'w') &&
        memcmp(v + b + 1, "/\"", 2) == 0 && v[e - 1] == '"') {
        *ticks = FE_ETAG_NEVER;
        return 0;
    }
    return RT_EINVAL;
}

int fe_hdr_timeout(const char *s, unsigned *secs)
{
    unsigned long v = 0;
    size_t i = 0;
    if (!isdigit((unsigned char)s[0])) {
        return RT_EQUERYPARAM;
    }
    for (; isdigit((unsigned char)s[i]); i++) {
        if (v < 100000UL) {
            v = v * 10 + (unsigned long)(s[i] - '0');
        }
    }
    if (s[i] || v == 0) {
        return RT_EQUERYPARAM;
    }
    *secs = v > FE_TIMEOUT_MAX ? FE_TIMEOUT_MAX : (unsigned)v;
    return 0;
}

/* Request ids need to be unique, not secret: a per-thread xoshiro256**
 * seeded once from OpenSSL's RNG (RAND_bytes per request cost a getpid()
 * system call and an AES-CTR block; snprintf cost as much again). */
static _Thread_local struct rt_rng fe__guid_rng;
static _Thread_local int fe__guid_seeded;

void fe_hdr_guid(char out[FE_GUID_SIZE])
{
    static const char hex[] = "0123456789abcdef";
    unsigned char b[16];
    uint64_t x, y;
    size_t o = 0;
    if (!fe__guid_seeded) {
        uint64_t seed[4];
        if (RAND_bytes((unsigned char *)seed, sizeof(seed)) == 1) {
            rt_rng_seed_bytes(&fe__guid_rng, seed);
        } else {
            rt_rng_seed(&fe__guid_rng,
                        (uint64_t)time(NULL) ^ (uint64_t)(uintptr_t)out);
        }
        fe__guid_seeded = 1;
    }
    x = rt_rng_next(&fe__guid_rng);
    y = rt_rng_next(&fe__guid_rng);
    for (int i = 0; i < 8; i++) {
        b[i] = (unsigned char)(x >> (8 * i));
        b[8 + i] = (unsigned char)(y >> (8 * i));
    }
    b[6] = (unsigned char)((b[6] & 0x0f) | 0x40); /* version 4 */
    b[8] = (unsigned char)((b[8] & 0x3f) | 0x80); /* RFC 4122 variant */
    for (int i = 0; i < 16; i++) {
        if (i == 4 || i == 6 || i == 8 || i == 10) {
            out[o++] = '-';
        }
        out[o++] = hex[b[i] >> 4];
        out[o++] = hex[b[i] & 15];
    }
    out[o] = '\0';
}

int fe_hdr_top(const char *s, unsigned max, unsigned *top)
{
    unsigned long v = 0;
    size_t i = 0;
    while (s[i] == ' ') {
        i++;
    }
    if (!isdigit((unsigned char)s[i])) {
        return RT_EQUERYPARAM;
    }
    for (; isdigit((unsigned char)s[i]); i++) {
        if (v < 100000000UL) {
            v = v * 10 + (unsigned long)(s[i] - '0');
        }
    }
    while (s[i] == ' ') {
        i++;
    }
    /* 0 is valid: Azure answers it with no entities (Azurite#1428). */
    if (s[i]) {
        return RT_EQUERYPARAM;
    }
    *top = v > max ? max : (unsigned)v;
    return 0;
}

int fe_hdr_select(const char *s, char ***names, size_t *n)
{
    size_t count = 1, total = strlen(s);
    size_t b = 0, e = total;
    char **arr;
    char *strs;
    size_t k = 0;

    *names = NULL;
    *n = 0;
    fe__trim(s, &b, &e);
    if (b == e || (e - b == 1 && s[b] == '*')) {
        return 0;
    }
    for (size_t i = 0; i < total; i++) {
        count += s[i] == ',';
    }
    if (count > 255) {
        return RT_EQUERYPARAM;
    }
    arr = rt_xmalloc(count * sizeof(char *) + total + count);
    strs = (char *)(arr + count);
    for (const char *p = s;;) {
        size_t len = strcspn(p, ",");
        size_t ib = 0, ie = len;
        fe__trim(p, &ib, &ie);
        if (ib == ie) {
            free(arr);
            return RT_EQUERYPARAM;
        }
        arr[k++] = strs;
        memcpy(strs, p + ib, ie - ib);
        strs[ie - ib] = '\0';
        strs += ie - ib + 1;
        p += len;
        if (!*p) {
            break;
        }
        p++;
    }
    *names = arr;
    *n = k;
    return 0;
}

/* ---- Continuation tokens -------------------------------------------- */

void fe_token_encode(struct rt_buf *out, const char *key, size_t n)
{
    char *text = rt_xmalloc(FE_B64_ENCODED_SIZE(n));
    size_t len = fe_b64url_encode(key, n, text);
    rt_buf_printf(out, "1!%zu!", len);
    rt_buf_append(out, text, len);
    free(text);
}

int fe_token_decode(const char *tok, struct rt_buf *out)
{
    const char *p;
    char *end;
    unsigned long len;
    size_t n;
    int k;

    if (strncmp(tok, "1!", 2) != 0) {
        return RT_EINVAL;
    }
    p = tok + 2;
    if (!isdigit((unsigned char)*p)) {
        return RT_EINVAL;
    }
    len = strtoul(p, &end, 10);
    if (*end != '!') {
        return RT_EINVAL;
    }
    p = end + 1;
    n = strlen(p);
    while (n > 0 && p[n - 1] == '=') {
        n--;
    }
    if (n != len && strlen(p) != len) {
        return RT_EINVAL;
    }
    k = fe_b64url_decode(p, n, rt_buf_reserve(out, FE_B64_DECODED_SIZE(n)));
    if (k < 0) {
        return RT_EINVAL;
    }
    out->len += (size_t)k;
    return 0;
}
