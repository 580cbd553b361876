/* URL parsing: see fe_url.h. Everything here is pure and allocation-light;
 * the only error paths are bad client input, reported with RT_E* codes. */
#include "fe_url.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "rt_alloc.h"
#include "rt_err.h"
#include "rt_text.h"
#include "rt_utf8.h"

void fe_url_decode(struct rt_buf *out, const char *s, size_t n, int plus)
{
    uint8_t *dst = rt_buf_reserve(out, n + 1);
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (c == '%' && i + 2 < n && rt_hexval((unsigned char)s[i + 1]) >= 0 &&
            rt_hexval((unsigned char)s[i + 2]) >= 0) {
            dst[k++] = (uint8_t)(rt_hexval((unsigned char)s[i + 1]) * 16 +
                                 rt_hexval((unsigned char)s[i + 2]));
            i += 2;
        } else if (c == '+' && plus) {
            dst[k++] = ' ';
        } else {
            dst[k++] = (uint8_t)c;
        }
    }
    out->len += k;
}

/* ---- Table names ---------------------------------------------------- */

int fe_table_name_check(const char *s, size_t n, const char **msg)
{
    size_t chars = 0;
    /* Length in characters (UTF-8 code points), so a non-ASCII name is
     * reported for its characters, not its byte count. */
    for (size_t i = 0; i < n; i++) {
        if (((unsigned char)s[i] & 0xC0) != 0x80) {
            chars++;
        }
    }
    /* Azure (and Azurite) check the length first: 3..63 characters. */
    if (chars < 3 || chars > 63) {
        *msg = FE_MSG_NAME_LENGTH;
        return RT_EOUTOFRANGE;
    }
    if (!((s[0] >= 'A' && s[0] <= 'Z') || (s[0] >= 'a' && s[0] <= 'z'))) {
        *msg = FE_MSG_NAME_CHARS;
        return RT_EBADNAME;
    }
    for (size_t i = 1; i < n; i++) {
        char c = s[i];
        if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
              (c >= '0' && c <= '9'))) {
            *msg = FE_MSG_NAME_CHARS;
            return RT_EBADNAME;
        }
    }
    /* "Tables" is the collection itself: reserved in any case (spec §9). */
    if (n == 6 && strncasecmp(s, "tables", 6) == 0) {
        *msg = FE_MSG_NAME_CHARS;
        return RT_EBADNAME;
    }
    *msg = NULL;
    return 0;
}

void fe_table_lname(char dst[FE_TABLE_LNAME], const char *name)
{
    size_t i = 0;
    for (; name[i] && i + 1 < FE_TABLE_LNAME; i++) {
        dst[i] = (char)tolower((unsigned char)name[i]);
    }
    dst[i] = '\0';
}

/* ---- Paths ---------------------------------------------------------- */

void fe_path_init(struct fe_path *p)
{
    memset(p, 0, sizeof(*p));
}

void fe_path_free(struct fe_path *p)
{
    free(p->account);
    free(p->acct_seg);
    free(p->table);
    free(p->pk);
    free(p->rk);
    fe_path_init(p);
}

static int fe__is_ws(char c)
{
    return c == ' ' || c == '\t';
}

static void fe__skip_ws(const char *s, size_t n, size_t *i)
{
    while (*i < n && fe__is_ws(s[*i])) {
        (*i)++;
    }
}

/* Parses a quoted literal at s[*i] ('...' with '' as an escaped quote),
 * appending the value to @out. Returns 0 or RT_EINVAL. */
static int fe__literal(const char *s, size_t n, size_t *i, struct rt_buf *out)
{
    if (*i >= n || s[*i] != '\'') {
        return RT_EINVAL;
    }
    (*i)++;
    while (*i < n) {
        if (s[*i] == '\'') {
            if (*i + 1 < n && s[*i + 1] == '\'') {
                rt_buf_append_u8(out, '\'');
                *i += 2;
                continue;
            }
            (*i)++;
            return 0;
        }
        rt_buf_append_u8(out, (uint8_t)s[*i]);
        (*i)++;
    }
    return RT_EINVAL; /* unterminated */
}

/* One predicate item: [ident ws* '=' ws*] literal. */
struct fe__key_item
{
    const char *name;
    size_t name_len;
    struct rt_buf val;
};

#define FE__MAX_KEYS 8

/* Parses "PartitionKey='p', RowKey='r'" (either order, whitespace around
 * tokens). Returns 0 or RT_EINVAL (p->errmsg set for a wrong key count). */
static int fe__key_predicate(const char *s, size_t n, struct fe_path *p)
{
    struct fe__key_item items[FE__MAX_KEYS];
    size_t nitems = 0;
    size_t i = 0;
    int rc = 0;
    int pk_at = -1, rk_at = -1;

    memset(items, 0, sizeof(items));
    fe__skip_ws(s, n, &i);
    for (;;) {
        struct fe__key_item *it;
        if (nitems == FE__MAX_KEYS) {
            p->errmsg = FE_MSG_KEY_COUNT;
            rc = RT_EINVAL;
            goto out;
        }
        it = &items[nitems++];
        rt_buf_init(&it->val);
        if (i < n && s[i] != '\'') {
            size_t start = i;
            while (i < n && (s[i] == '_' || (s[i] >= 'A' && s[i] <= 'Z') ||
                             (s[i] >= 'a' && s[i] <= 'z') ||
                             (s[i] >= '0' && s[i] <= '9'))) {
                i++;
            }
            if (i == start) {
                rc = RT_EINVAL;
                goto out;
            }
            it->name = s + start;
            it->name_len = i - start;
            fe__skip_ws(s, n, &i);
            if (i >= n || s[i] != '=') {
                rc = RT_EINVAL;
                goto out;
            }
            i++;
            fe__skip_ws(s, n, &i);
        }
        rc = fe__literal(s, n, &i, &it->val);
        if (rc != 0) {
            goto out;
        }
        fe__skip_ws(s, n, &i);
        if (i == n) {
            break;
        }
        if (s[i] != ',') {
            rc = RT_EINVAL;
            goto out;
        }
        i++;
        fe__skip_ws(s, n, &i);
    }
    if (nitems != 2) {
        p->errmsg = FE_MSG_KEY_COUNT;
        rc = RT_EINVAL;
        goto out;
    }
    for (size_t k = 0; k < nitems; k++) {
        const struct fe__key_item *it = &items[k];
        if (it->name_len == 12 && memcmp(it->name, "PartitionKey", 12) == 0 &&
            pk_at < 0) {
            pk_at = (int)k;
        } else if (it->name_len == 6 && memcmp(it->name, "RowKey", 6) == 0 &&
                   rk_at < 0) {
            rk_at = (int)k;
        } else {
            /* Positional, unknown or repeated key names. */
            rc = RT_EINVAL;
            goto out;
        }
    }
    p->pklen = items[pk_at].val.len;
    p->pk = rt_xstrndup((const char *)items[pk_at].val.data, p->pklen);
    p->rklen = items[rk_at].val.len;
    p->rk = rt_xstrndup((const char *)items[rk_at].val.data, p->rklen);
out:
    for (size_t k = 0; k < nitems; k++) {
        rt_buf_free(&items[k].val);
    }
    return rc;
}

/* Parses the decoded resource segment @d[0..n). */
static int fe__resource(const char *d, size_t n, struct fe_path *p)
{
    const char *paren = memchr(d, '(', n);
    size_t name_len = paren ? (size_t)(paren - d) : n;
    const char *inner = NULL;
    size_t inner_len = 0;
    int rc;

    if (paren) {
        if (d[n - 1] != ')') {
            return RT_EURI;
        }
        inner = paren + 1;
        inner_len = n - name_len - 2;
        /* Trim the inside so "( )" means "()". */
        while (inner_len && fe__is_ws(inner[0])) {
            inner++;
            inner_len--;
        }
        while (inner_len && fe__is_ws(inner[inner_len - 1])) {
            inner_len--;
        }
    }
    if (name_len == 0) {
        return RT_EURI;
    }
    if (d[0] == '$') {
        if (name_len == 6 && memcmp(d, "$batch", 6) == 0 && !paren) {
            p->kind = FE_RES_BATCH;
            return 0;
        }
        return RT_EURI;
    }
    if (name_len == 6 && strncasecmp(d, "Tables", 6) == 0) {
        struct rt_buf name = RT_BUF_INIT;
        size_t i = 0;
        if (!paren || inner_len == 0) {
            p->kind = FE_RES_TABLES;
            return 0;
        }
        /* Tables('name'); also the explicit TableName='name' form. */
        if (inner_len > 9 && memcmp(inner, "TableName", 9) == 0) {
            i = 9;
            fe__skip_ws(inner, inner_len, &i);
            if (i >= inner_len || inner[i] != '=') {
                return RT_EURI;
            }
            i++;
            fe__skip_ws(inner, inner_len, &i);
        }
        rc = fe__literal(inner, inner_len, &i, &name);
        if (rc == 0 && i != inner_len) {
            rc = RT_EURI;
        }
        if (rc != 0) {
            rt_buf_free(&name);
            return RT_EURI;
        }
        p->kind = FE_RES_TABLE_ONE;
        p->table = rt_xstrndup((const char *)name.data, name.len);
        rc = fe_table_name_check((const char *)name.data, name.len, &p->errmsg);
        rt_buf_free(&name);
        return rc;
    }
    p->table = rt_xstrndup(d, name_len);
    rc = fe_table_name_check(d, name_len, &p->errmsg);
    if (rc != 0) {
        p->kind = FE_RES_TABLE;
        return rc;
    }
    if (!paren || inner_len == 0) {
        p->kind = FE_RES_TABLE;
        p->parens = paren != NULL;
        return 0;
    }
    p->kind = FE_RES_ENTITY;
    return fe__key_predicate(inner, inner_len, p);
}

/* Sets the account from the decoded segment @seg[0..n) (letters, digits,
 * '-'; a trailing "-secondary" is stripped and noted). 0 or RT_EURI. */
static int fe__account(const char *seg, size_t n, struct fe_path *p)
{
    if (n == 0) {
        return RT_EURI;
    }
    for (size_t i = 0; i < n; i++) {
        char c = seg[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
              (c >= '0' && c <= '9') || c == '-')) {
            return RT_EURI;
        }
    }
    p->acct_seg = rt_xstrndup(seg, n);
    if (n > 10 && memcmp(seg + n - 10, "-secondary", 10) == 0) {
        p->secondary = 1;
        n -= 10;
    }
    p->account = rt_xstrndup(seg, n);
    p->account_ok = 1;
    return 0;
}

/* Parses what follows the account: @s..@end is "" or "/" (service) or
 * "/resource" (raw, decoded here). */
static int fe__path_rest(const char *s, const char *end, struct fe_path *p)
{
    struct rt_buf seg = RT_BUF_INIT;
    int rc;

    if (s == end || s + 1 == end) {
        p->kind = FE_RES_SERVICE;
        return 0;
    }
    s++;
    /* One trailing slash after the resource ("/acct/Tables/", as Azurite's
     * REST tests and some hand-written clients send) addresses the same
     * resource: Azure's front end routes it like the bare form. */
    if (end[-1] == '/') {
        end--;
    }
    if (s == end || memchr(s, '/', (size_t)(end - s))) {
        return RT_EURI;
    }
    fe_url_decode(&seg, s, (size_t)(end - s), 0);
    rc = fe__resource((const char *)seg.data, seg.len, p);
    rt_buf_free(&seg);
    return rc;
}

int fe_path_parse(const char *raw, size_t n, struct fe_path *p)
{
    const char *end = raw + n;
    const char *s;
    const char *slash;
    struct rt_buf seg = RT_BUF_INIT;
    int rc;

    if (n == 0 || raw[0] != '/') {
        return RT_EURI;
    }
    s = raw + 1;
    slash = memchr(s, '/', (size_t)(end - s));
    if (!slash) {
        slash = end;
    }
    if (slash == s) {
        return RT_EURI;
    }
    fe_url_decode(&seg, s, (size_t)(slash - s), 0);
    rc = fe__account((const char *)seg.data, seg.len, p);
    rt_buf_free(&seg);
    if (rc != 0) {
        return rc;
    }
    return fe__path_rest(slash, end, p);
}

int fe_path_parse_host(const char *label,
                       size_t label_len,
                       const char *raw,
                       size_t n,
                       struct fe_path *p)
{
    int rc = fe__account(label, label_len, p);
    if (rc != 0) {
        return rc;
    }
    p->host_style = 1;
    if (n == 0) {
        p->kind = FE_RES_SERVICE;
        return 0;
    }
    if (raw[0] != '/') {
        return RT_EURI;
    }
    return fe__path_rest(raw, raw + n, p);
}

size_t fe_url_secondary_fix(char *raw, size_t n)
{
    const char *seg, *second, *nul;
    size_t seglen, alen, rest;
    if (n < 2 || raw[0] != '/') {
        return n;
    }
    seg = raw + 1;
    nul = memchr(seg, '/', n - 1);
    if (!nul) {
        return n;
    }
    seglen = (size_t)(nul - seg);
    if (seglen <= 10 || memcmp(seg + seglen - 10, "-secondary", 10) != 0) {
        return n;
    }
    alen = seglen - 10;
    second = seg + seglen + 1;
    rest = n - (size_t)(second - raw); /* bytes from the second segment */
    if (rest <= alen || memcmp(second, seg, alen) != 0 || second[alen] != '/') {
        return n;
    }
    /* "/X-secondary/X/rest" -> "/X-secondary/rest" (with the NUL). */
    memmove((char *)second - 1, second + alen, rest - alen + 1);
    return n - alen - 1;
}

int fe_url_host_style(const char *host, const char **label, size_t *label_len)
{
    size_t n, dot;
    int digits_dots = 1;

    if (!host || !*host || host[0] == '[') {
        return 0; /* absent, or an IPv6 literal */
    }
    n = strcspn(host, ":"); /* drop the port */
    if (n == 0) {
        return 0;
    }
    for (size_t i = 0; i < n; i++) {
        if (!((host[i] >= '0' && host[i] <= '9') || host[i] == '.')) {
            digits_dots = 0;
        }
    }
    if (digits_dots) {
        return 0; /* IPv4 literal */
    }
    if ((n == 9 && strncasecmp(host, "localhost", 9) == 0) ||
        (n == 20 && strncasecmp(host, "host.docker.internal", 20) == 0)) {
        return 0;
    }
    dot = strcspn(host, ".");
    if (dot >= n || dot == 0) {
        return 0; /* a name without a dot */
    }
    *label = host;
    *label_len = dot;
    return 1;
}

/* ---- Query strings -------------------------------------------------- */

void fe_query_init(struct fe_query *q)
{
    memset(q, 0, sizeof(*q));
}

/* Every slot below q->cap owns its two buffers (zeroed = empty), in use
 * or not (below q->n). */
void fe_query_free(struct fe_query *q)
{
    for (size_t i = 0; i < q->cap; i++) {
        rt_buf_free(&q->kv[i].kb);
        rt_buf_free(&q->kv[i].vb);
    }
    free(q->kv);
    fe_query_init(q);
}

void fe_query_recycle(struct fe_query *q, size_t keep_max)
{
    for (size_t i = 0; i < q->n; i++) {
        rt_buf_recycle(&q->kv[i].kb, keep_max);
        rt_buf_recycle(&q->kv[i].vb, keep_max);
    }
    q->n = 0;
}

/* Decodes @s[0..n) into @b (emptied first), NUL-terminated; returns it
 * as a string, *len getting the decoded length (which counts NULs that
 * "%00" produced). */
static char *fe__decode_into(struct rt_buf *b,
                             const char *s,
                             size_t n,
                             size_t *len)
{
    rt_buf_reset(b);
    fe_url_decode(b, s, n, 1);
    *len = b->len;
    return (char *)rt_buf_cstr(b);
}

void fe_query_add_n(struct fe_query *q,
                    const char *key,
                    size_t key_len,
                    const char *val,
                    size_t val_len)
{
    struct fe_query_kv *kv;
    if (q->n == q->cap) {
        size_t cap = q->cap ? q->cap * 2 : 8;
        kv = rt_xrealloc(q->kv, cap * sizeof(*kv));
        memset(kv + q->cap, 0, (cap - q->cap) * sizeof(*kv));
        q->kv = kv;
        q->cap = cap;
    }
    kv = &q->kv[q->n++];
    kv->key = fe__decode_into(&kv->kb, key, key_len, &kv->key_len);
    kv->val = fe__decode_into(&kv->vb, val ? val : "", val ? val_len : 0,
                              &kv->val_len);
}

void fe_query_add(struct fe_query *q, const char *key, const char *val)
{
    fe_query_add_n(q, key, strlen(key), val, val ? strlen(val) : 0);
}

void fe_query_parse(struct fe_query *q, const char *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        size_t start = i;
        size_t eq = (size_t)-1;
        while (i < n && s[i] != '&') {
            if (s[i] == '=' && eq == (size_t)-1) {
                eq = i;
            }
            i++;
        }
        if (i > start) {
            if (eq == (size_t)-1) {
                fe_query_add_n(q, s + start, i - start, NULL, 0);
            } else {
                fe_query_add_n(q, s + start, eq - start, s + eq + 1,
                               i - eq - 1);
            }
        }
        i++;
    }
}

const char *fe_query_get_n(const struct fe_query *q,
                           const char *key,
                           size_t *len)
{
    size_t kl = strlen(key);
    for (size_t i = 0; i < q->n; i++) {
        if (q->kv[i].key_len == kl && memcmp(q->kv[i].key, key, kl) == 0) {
            if (len) {
                *len = q->kv[i].val_len;
            }
            return q->kv[i].val;
        }
    }
    return NULL;
}

const char *fe_query_get(const struct fe_query *q, const char *key)
{
    return fe_query_get_n(q, key, NULL);
}

size_t fe_query_check(const struct fe_query *q, int *why)
{
    for (size_t i = 0; i < q->n; i++) {
        const struct fe_query_kv *kv = &q->kv[i];
        if (memchr(kv->key, 0, kv->key_len) ||
            memchr(kv->val, 0, kv->val_len)) {
            *why = FE_QUERY_NUL;
            return i + 1;
        }
        if (!rt_utf8_valid(kv->val, kv->val_len)) {
            *why = FE_QUERY_UTF8;
            return i + 1;
        }
    }
    *why = 0;
    return 0;
}
