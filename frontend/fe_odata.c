/* OData JSON <-> binary entity (see fe_odata.h).
 *
 * Parsing: jansson builds the tree (JSON_REJECT_DUPLICATES), then one pass
 * over the members converts each value straight into the properties blob,
 * applying the type rules of docs/table-api-spec.md §4.2 and the limits of
 * §9. Writing: one pass over the stored value appends JSON text to the
 * caller's buffer; no tree, no per-property allocation. */
#include "fe_odata.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fe_b64.h"
#include "rt_alloc.h"
#include "rt_entity.h"
#include "rt_err.h"
#include "rt_text.h"
#include "rt_time.h"
#include "rt_utf8.h"

#define FE__TYPE_SUFFIX "@odata.type"
#define FE__TYPE_SUFFIX_LEN (sizeof(FE__TYPE_SUFFIX) - 1)

/* ---- escaping --------------------------------------------------------- */

static const char fe__hex_upper[] = "0123456789ABCDEF";
static const char fe__hex_lower[] = "0123456789abcdef";

/* 1 when none of the 8 bytes at @p needs escaping in a JSON string: all
 * are ASCII, none below 0x20, none '"' or '\\'. The classic exact tests
 * for "some byte is zero" / "some byte is below n" on a 64-bit word. */
static int fe__json_plain8(const uint8_t *p)
{
    const uint64_t ones = 0x0101010101010101ull, high = 0x8080808080808080ull;
    uint64_t w, q, b;
    memcpy(&w, p, 8);
    q = w ^ (ones * '"');
    b = w ^ (ones * '\\');
    return ((w & high) | ((w - ones * 0x20) & ~w & high) |
            ((q - ones) & ~q & high) | ((b - ones) & ~b & high)) == 0;
}

void fe_json_escape(struct rt_buf *out, const char *s, size_t n)
{
    const uint8_t *p = (const uint8_t *)s;
    const uint8_t *end = p + n;

    rt_buf_reserve(out, n);
    while (p < end) {
        const uint8_t *run = p;
        /* Eight bytes at a time while none needs escaping: a page of 1000
         * entities escapes ~10,000 strings, a sixth of its CPU bytewise. */
        while (end - p >= 8 && fe__json_plain8(p)) {
            p += 8;
        }
        while (p < end && *p >= 0x20 && *p < 0x80 && *p != '"' && *p != '\\') {
            p++;
        }
        if (p > run) {
            memcpy(out->data + out->len, run, (size_t)(p - run));
            out->len += (size_t)(p - run);
            run = p;
        }
        if (p == end) {
            break;
        }
        uint8_t c = *p;
        if (c == '"' || c == '\\') {
            uint8_t *q = rt_buf_reserve(out, 2 + (size_t)(end - p));
            q[0] = '\\';
            q[1] = c;
            out->len += 2;
            p++;
        } else if (c < 0x20) {
            uint8_t *q = rt_buf_reserve(out, 6 + (size_t)(end - p));
            memcpy(q, "\\u00", 4);
            q[4] = (uint8_t)fe__hex_upper[c >> 4];
            q[5] = (uint8_t)fe__hex_upper[c & 15];
            out->len += 6;
            p++;
        } else {
            uint32_t cp;
            size_t len = rt_utf8_decode(p, end, &cp);
            if (len) {
                rt_buf_reserve(out, (size_t)(end - p));
                memcpy(out->data + out->len, p, len);
                out->len += len;
                p += len;
            } else {
                /* Not UTF-8: keep the JSON valid with U+FFFD. */
                rt_buf_reserve(out, 6 + (size_t)(end - p));
                memcpy(out->data + out->len, "\\ufffd", 6);
                out->len += 6;
                p++;
            }
        }
    }
}

static int fe__unreserved(uint8_t c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
           (c >= '0' && c <= '9') || c == '-' || c == '.' || c == '_' ||
           c == '~';
}

void fe_url_escape(struct rt_buf *out, const char *s, size_t n)
{
    uint8_t *q = rt_buf_reserve(out, 3 * n);
    for (size_t i = 0; i < n; i++) {
        uint8_t c = (uint8_t)s[i];
        if (fe__unreserved(c)) {
            *q++ = c;
        } else {
            *q++ = '%';
            *q++ = (uint8_t)fe__hex_upper[c >> 4];
            *q++ = (uint8_t)fe__hex_upper[c & 15];
        }
    }
    out->len = (size_t)(q - out->data);
}

/* A key inside an entity's address (odata.id, editLink, Location): quotes
 * doubled (OData literal), then percent-encoded like a URL path segment. */
static void fe__key_literal(struct rt_buf *out, const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '\'') {
            rt_buf_append(out, "%27%27", 6);
        } else {
            fe_url_escape(out, s + i, 1);
        }
    }
}

/* ---- base64 ----------------------------------------------------------- */

static void fe__b64_append(struct rt_buf *out, const uint8_t *p, size_t n)
{
    char *q = (char *)rt_buf_reserve(out, FE_B64_ENCODED_SIZE(n));
    out->len += fe_b64_encode(p, n, q);
}

/* ---- number and GUID text --------------------------------------------- */

/* Appends the decimal text of @v. */
static void fe__append_i64(struct rt_buf *out, int64_t v)
{
    char tmp[24];
    char *e = tmp + sizeof(tmp), *p = e;
    uint64_t u = v < 0 ? 0 - (uint64_t)v : (uint64_t)v;
    do {
        *--p = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    if (v < 0) {
        *--p = '-';
    }
    rt_buf_append(out, p, (size_t)(e - p));
}

/* Shortest of %.15g/%.16g/%.17g that reads back equal, always with a '.'
 * or exponent so clients never mistake it for an integer. */
static size_t fe__fmt_double(double d, char *buf, size_t cap)
{
    int n = 0;
    for (int prec = 15; prec <= 17; prec++) {
        n = snprintf(buf, cap, "%.*g", prec, d);
        if (strtod(buf, NULL) == d) {
            break;
        }
    }
    if (!strpbrk(buf, ".eni")) {
        buf[n++] = '.';
        buf[n++] = '0';
        buf[n] = '\0';
    }
    return (size_t)n;
}

void fe_odata_guid_text(const uint8_t g[16], char out[37])
{
    char *q = out;
    for (int i = 0; i < 16; i++) {
        if (i == 4 || i == 6 || i == 8 || i == 10) {
            *q++ = '-';
        }
        *q++ = fe__hex_lower[g[i] >> 4];
        *q++ = fe__hex_lower[g[i] & 15];
    }
    *q = '\0';
}

static int fe__guid_parse(const char *s, size_t n, uint8_t g[16])
{
    int k = 0;
    if (n != 36) {
        return RT_EINVAL;
    }
    for (size_t i = 0; i < 36;) {
        if (i == 8 || i == 13 || i == 18 || i == 23) {
            if (s[i] != '-') {
                return RT_EINVAL;
            }
            i++;
            continue;
        }
        int h = rt_hexval((uint8_t)s[i]), l = rt_hexval((uint8_t)s[i + 1]);
        if (h < 0 || l < 0) {
            return RT_EINVAL;
        }
        g[k++] = (uint8_t)(h << 4 | l);
        i += 2;
    }
    return 0;
}

/* [+-]digits into int64. Returns 0 or RT_EINVAL (syntax or overflow). */
static int fe__parse_i64(const char *s, size_t n, int64_t *out)
{
    size_t i = 0;
    int neg = 0;
    uint64_t v = 0;
    if (n && (s[0] == '-' || s[0] == '+')) {
        neg = s[0] == '-';
        i++;
    }
    if (i == n) {
        return RT_EINVAL;
    }
    for (; i < n; i++) {
        if (s[i] < '0' || s[i] > '9') {
            return RT_EINVAL;
        }
        unsigned d = (unsigned)(s[i] - '0');
        if (v > (UINT64_MAX - d) / 10) {
            return RT_EINVAL;
        }
        v = v * 10 + d;
    }
    if (neg ? v > (uint64_t)INT64_MAX + 1 : v > (uint64_t)INT64_MAX) {
        return RT_EINVAL;
    }
    *out = neg ? (int64_t)(0 - v) : (int64_t)v;
    return 0;
}

/* A double from text: "NaN", "Infinity", "-Infinity" or a decimal number
 * (no hex, no whitespace, finite). */
static int fe__parse_double(const char *s, size_t n, double *out)
{
    char buf[64];
    char *end;
    if (n == 3 && memcmp(s, "NaN", 3) == 0) {
        *out = NAN;
        return 0;
    }
    if (n == 8 && memcmp(s, "Infinity", 8) == 0) {
        *out = INFINITY;
        return 0;
    }
    if (n == 9 && memcmp(s, "-Infinity", 9) == 0) {
        *out = -INFINITY;
        return 0;
    }
    if (n == 0 || n >= sizeof(buf)) {
        return RT_EINVAL;
    }
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= '0' && c <= '9') || c == '.' || c == 'e' || c == 'E' ||
              c == '+' || c == '-')) {
            return RT_EINVAL;
        }
    }
    memcpy(buf, s, n);
    buf[n] = '\0';
    *out = strtod(buf, &end);
    if (end != buf + n || !isfinite(*out)) {
        return RT_EINVAL;
    }
    return 0;
}

/* ---- parsing ---------------------------------------------------------- */

void fe_entity_in_init(struct fe_entity_in *in)
{
    in->pk = NULL;
    in->rk = NULL;
    rt_buf_init(&in->props);
}

void fe_entity_in_free(struct fe_entity_in *in)
{
    free(in->pk);
    free(in->rk);
    rt_buf_free(&in->props);
    in->pk = NULL;
    in->rk = NULL;
}

static int fe__err(char *errmsg,
                   int code,
                   const char *fmt,
                   const char *name,
                   size_t name_len)
{
    if (errmsg) {
        int nl = name_len > 64 ? 64 : (int)name_len;
        snprintf(errmsg, RT_ERRMSG_SIZE, fmt, nl, name ? name : "");
    }
    return code;
}

static int fe__is_name(const char *k, size_t n, const char *lit)
{
    return n == strlen(lit) && memcmp(k, lit, n) == 0;
}

/* §9 property name rules. */
static int fe__check_name(const char *k, size_t n)
{
    if (n > RT_MAX_PROP_NAME) {
        return RT_EPROPNAMELONG;
    }
    if (n == 0) {
        return RT_EPROPNAME;
    }
    for (size_t i = 0; i < n; i++) {
        uint8_t c = (uint8_t)k[i];
        int ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_' ||
                 c >= 0x80 || (i > 0 && c >= '0' && c <= '9');
        if (!ok) {
            return RT_EPROPNAME;
        }
    }
    return 0;
}

static int fe__edm_type(const char *s, size_t n, enum rt_edm *t)
{
    static const struct
    {
        const char *name;
        enum rt_edm t;
    } map[] = {
        {"Edm.String", RT_EDM_STRING}, {"Edm.Binary", RT_EDM_BINARY},
        {"Edm.Boolean", RT_EDM_BOOL},  {"Edm.DateTime", RT_EDM_DATETIME},
        {"Edm.Double", RT_EDM_DOUBLE}, {"Edm.Guid", RT_EDM_GUID},
        {"Edm.Int32", RT_EDM_INT32},   {"Edm.Int64", RT_EDM_INT64},
    };
    for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++) {
        if (fe__is_name(s, n, map[i].name)) {
            *t = map[i].t;
            return 0;
        }
    }
    return RT_EINVAL;
}

/* A JSON real that is an exact integer in [lo, hi]. */
static int fe__real_int(double d, double lo, double hi, int64_t *out)
{
    /* Range first, so the cast is defined; no libm needed. */
    if (!(d >= lo && d <= hi) || (double)(int64_t)d != d) {
        return RT_EINVAL;
    }
    *out = (int64_t)d;
    return 0;
}

/* Converts @v (annotated with @t, or inferred when @annotated is 0) into
 * @p. Binary bytes go to @scratch. Returns 0 or an RT_E* code. */
static int fe__convert(json_t *v,
                       int annotated,
                       enum rt_edm t,
                       struct rt_prop *p,
                       struct rt_buf *scratch)
{
    const char *s = json_is_string(v) ? json_string_value(v) : NULL;
    size_t sn = s ? json_string_length(v) : 0;
    int64_t i64;
    int len;

    if (!annotated) {
        if (s) {
            p->type = RT_EDM_STRING;
            p->v.bytes.p = (const uint8_t *)s;
            p->v.bytes.n = sn;
        } else if (json_is_boolean(v)) {
            p->type = RT_EDM_BOOL;
            p->v.b = json_is_true(v);
        } else if (json_is_integer(v)) {
            json_int_t iv = json_integer_value(v);
            if (iv >= INT32_MIN && iv <= INT32_MAX) {
                p->type = RT_EDM_INT32;
                p->v.i32 = (int32_t)iv;
            } else {
                /* OData reader: an unannotated integer outside Int32 is a
                 * Double, never silently an Int64 (spec §4.2). */
                p->type = RT_EDM_DOUBLE;
                p->v.d = (double)iv;
            }
        } else if (json_is_real(v)) {
            p->type = RT_EDM_DOUBLE;
            p->v.d = json_real_value(v);
        } else {
            return RT_EINVAL; /* object or array */
        }
        return 0;
    }

    p->type = t;
    switch (t) {
        case RT_EDM_STRING:
            if (!s) {
                return RT_EINVAL;
            }
            p->v.bytes.p = (const uint8_t *)s;
            p->v.bytes.n = sn;
            return 0;
        case RT_EDM_BOOL:
            if (json_is_boolean(v)) {
                p->v.b = json_is_true(v);
            } else if (s && fe__is_name(s, sn, "true")) {
                p->v.b = 1;
            } else if (s && fe__is_name(s, sn, "false")) {
                p->v.b = 0;
            } else {
                return RT_EINVAL;
            }
            return 0;
        case RT_EDM_INT32:
        case RT_EDM_INT64:
            if (json_is_integer(v)) {
                i64 = json_integer_value(v);
            } else if (json_is_real(v)) {
                if (fe__real_int(json_real_value(v), -9223372036854775808.0,
                                 9223372036854774784.0, &i64) != 0) {
                    return RT_EINVAL;
                }
            } else if (!s || fe__parse_i64(s, sn, &i64) != 0) {
                return RT_EINVAL;
            }
            if (t == RT_EDM_INT32) {
                if (i64 < INT32_MIN || i64 > INT32_MAX) {
                    return RT_EINVAL;
                }
                p->v.i32 = (int32_t)i64;
            } else {
                p->v.i64 = i64;
            }
            return 0;
        case RT_EDM_DOUBLE:
            if (json_is_number(v)) {
                p->v.d = json_number_value(v);
                return 0;
            }
            if (!s) {
                return RT_EINVAL;
            }
            return fe__parse_double(s, sn, &p->v.d);
        case RT_EDM_DATETIME:
            if (!s) {
                return RT_EINVAL;
            }
            return rt_time_parse_iso(s, sn, &p->v.ticks);
        case RT_EDM_GUID:
            if (!s) {
                return RT_EINVAL;
            }
            return fe__guid_parse(s, sn, p->v.guid);
        case RT_EDM_BINARY:
            if (!s) {
                return RT_EINVAL;
            }
            if (sn / 4 * 3 > RT_MAX_BINARY + 2) {
                return RT_EPROPTOOLARGE;
            }
            rt_buf_reset(scratch);
            len = fe_b64_decode(
                s, sn, rt_buf_reserve(scratch, FE_B64_DECODED_SIZE(sn)));
            if (len < 0) {
                return RT_EINVAL;
            }
            scratch->len = (size_t)len;
            p->v.bytes.p = scratch->data;
            p->v.bytes.n = scratch->len;
            return 0;
    }
    return RT_EINVAL;
}

/* jansson refuses integers beyond long long. The OData reader treats them
 * as Double (spec §4.2), so rewrite each such integer token as "<digits>.0"
 * and let jansson read a real. Returns a malloc'd copy or NULL if nothing
 * needed rewriting. */
static char *fe__widen_big_ints(const char *body, size_t len, size_t *out_len)
{
    struct rt_buf b = RT_BUF_INIT;
    int changed = 0, in_str = 0;
    size_t i = 0;

    while (i < len) {
        char c = body[i];
        if (in_str) {
            if (c == '\\' && i + 1 < len) {
                rt_buf_append(&b, body + i, 2);
                i += 2;
                continue;
            }
            in_str = c != '"';
            rt_buf_append_u8(&b, (uint8_t)c);
            i++;
            continue;
        }
        if (c == '"') {
            in_str = 1;
            rt_buf_append_u8(&b, (uint8_t)c);
            i++;
            continue;
        }
        if (c == '-' || (c >= '0' && c <= '9')) {
            size_t j = i, ds;
            int is_int = 1;
            if (body[j] == '-') {
                j++;
            }
            ds = j;
            while (j < len &&
                   ((body[j] >= '0' && body[j] <= '9') || body[j] == '.' ||
                    body[j] == 'e' || body[j] == 'E' || body[j] == '+' ||
                    body[j] == '-')) {
                if (body[j] < '0' || body[j] > '9') {
                    is_int = 0;
                }
                j++;
            }
            rt_buf_append(&b, body + i, j - i);
            size_t nd = j - ds;
            if (is_int && nd > 0) {
                const char *lim =
                    c == '-' ? "9223372036854775808" : "9223372036854775807";
                if (nd > 19 || (nd == 19 && memcmp(body + ds, lim, 19) > 0)) {
                    rt_buf_append(&b, ".0", 2);
                    changed = 1;
                }
            }
            i = j;
            continue;
        }
        rt_buf_append_u8(&b, (uint8_t)c);
        i++;
    }
    if (!changed) {
        rt_buf_free(&b);
        return NULL;
    }
    return (char *)rt_buf_steal(&b, out_len);
}

static json_t *fe__load(const char *body, size_t len, int *rv, char *errmsg)
{
    json_error_t jerr;
    json_t *root =
        json_loadb(body, len, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &jerr);
    if (!root && json_error_code(&jerr) == json_error_numeric_overflow) {
        size_t wlen;
        char *wide = fe__widen_big_ints(body, len, &wlen);
        if (wide) {
            root = json_loadb(wide, wlen,
                              JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &jerr);
            free(wide);
        }
    }
    if (!root) {
        int dup = json_error_code(&jerr) == json_error_duplicate_key ||
                  strstr(jerr.text, "duplicate object key") != NULL;
        *rv = dup ? RT_EDUPPROPS : RT_EINVAL;
        if (errmsg) {
            snprintf(errmsg, RT_ERRMSG_SIZE, "%s: %s",
                     dup ? "duplicate property" : "invalid JSON", jerr.text);
        }
        return NULL;
    }
    if (!json_is_object(root)) {
        json_decref(root);
        *rv = RT_EINVAL;
        if (errmsg) {
            snprintf(errmsg, RT_ERRMSG_SIZE,
                     "entity body is not a JSON object");
        }
        return NULL;
    }
    return root;
}

/* PartitionKey/RowKey: a JSON string without NUL (keys travel as C
 * strings), optionally annotated Edm.String. */
static int fe__take_key(json_t *obj,
                        const char *name,
                        json_t *v,
                        char **dst,
                        size_t *units,
                        char *errmsg)
{
    char ann[32];
    json_t *a;
    size_t n = strlen(name);

    memcpy(ann, name, n);
    memcpy(ann + n, FE__TYPE_SUFFIX, FE__TYPE_SUFFIX_LEN + 1);
    a = json_object_get(obj, ann);
    if (a && !(json_is_string(a) &&
               strcmp(json_string_value(a), "Edm.String") == 0)) {
        return fe__err(errmsg, RT_EINVAL, "%.*s must be of type Edm.String",
                       name, n);
    }
    if (!json_is_string(v)) {
        return fe__err(errmsg, RT_EINVAL, "%.*s must be a string", name, n);
    }
    const char *s = json_string_value(v);
    size_t sn = json_string_length(v);
    if (memchr(s, 0, sn)) {
        return fe__err(errmsg, RT_EINVAL, "%.*s contains U+0000", name, n);
    }
    *dst = rt_xstrndup(s, sn);
    *units = rt_utf8_utf16_units(s, sn);
    return 0;
}

int fe_odata_parse_entity(const char *body,
                          size_t len,
                          struct fe_entity_in *in,
                          char *errmsg)
{
    json_t *root;
    int rv = 0;

    if (errmsg) {
        errmsg[0] = '\0';
    }
    fe_entity_in_free(in);
    root = fe__load(body, len, &rv, errmsg);
    if (!root) {
        return rv;
    }
    rv = fe_odata_entity_from_json(root, in, errmsg);
    json_decref(root);
    return rv;
}

int fe_odata_entity_from_json(struct json_t *root,
                              struct fe_entity_in *in,
                              char *errmsg)
{
    struct rt_buf scratch = RT_BUF_INIT;
    struct rt_props_writer w;
    void *iter;
    size_t size = 4, nprops = 0, pk_units = 0, rk_units = 0;
    int rv = 0;

    if (errmsg) {
        errmsg[0] = '\0';
    }
    fe_entity_in_free(in);
    rt_props_begin(&w, &in->props);
    for (iter = json_object_iter(root); iter;
         iter = json_object_iter_next(root, iter)) {
        const char *k = json_object_iter_key(iter);
        size_t kn = json_object_iter_key_len(iter);
        json_t *v = json_object_iter_value(iter);
        json_t *ann = NULL;
        struct rt_prop p;
        enum rt_edm t = RT_EDM_STRING;

        if (fe__is_name(k, kn, "PartitionKey")) {
            if (in->pk) {
                goto dup_key;
            }
            rv = fe__take_key(root, "PartitionKey", v, &in->pk, &pk_units,
                              errmsg);
            if (rv) {
                goto fail;
            }
            continue;
        }
        if (fe__is_name(k, kn, "RowKey")) {
            if (in->rk) {
                goto dup_key;
            }
            rv = fe__take_key(root, "RowKey", v, &in->rk, &rk_units, errmsg);
            if (rv) {
                goto fail;
            }
            continue;
        }
        if (fe__is_name(k, kn, "Timestamp") ||
            (kn >= 6 && memcmp(k, "odata.", 6) == 0)) {
            continue; /* server-assigned / annotations: ignored */
        }
        if (kn > FE__TYPE_SUFFIX_LEN &&
            memcmp(k + kn - FE__TYPE_SUFFIX_LEN, FE__TYPE_SUFFIX,
                   FE__TYPE_SUFFIX_LEN) == 0) {
            /* "X@odata.type": consumed with X; X must exist. */
            size_t bn = kn - FE__TYPE_SUFFIX_LEN;
            if (fe__is_name(k, bn, "PartitionKey") ||
                fe__is_name(k, bn, "RowKey") ||
                fe__is_name(k, bn, "Timestamp")) {
                continue; /* checked with the key / ignored */
            }
            if (!json_is_string(v)) {
                rv = fe__err(errmsg, RT_EINVAL,
                             "type annotation of %.*s is not a string", k, bn);
                goto fail;
            }
            if (!json_object_getn(root, k, bn)) {
                rv = fe__err(errmsg, RT_EINVAL,
                             "type annotation without a value for %.*s", k, bn);
                goto fail;
            }
            continue;
        }
        if (memchr(k, '@', kn) && kn > 7 && memmem(k, kn, "@odata.", 7)) {
            continue; /* other instance annotations: ignored */
        }
        if (json_is_null(v)) {
            continue; /* "X": null is not stored (merge: not touched) */
        }
        rv = fe__check_name(k, kn);
        if (rv) {
            fe__err(errmsg, rv,
                    rv == RT_EPROPNAMELONG ? "property name too long: %.*s..."
                                           : "invalid property name '%.*s'",
                    k, kn);
            goto fail;
        }
        {
            char akey[RT_MAX_PROP_NAME + FE__TYPE_SUFFIX_LEN + 1];
            memcpy(akey, k, kn);
            memcpy(akey + kn, FE__TYPE_SUFFIX, FE__TYPE_SUFFIX_LEN);
            ann = json_object_getn(root, akey, kn + FE__TYPE_SUFFIX_LEN);
        }
        if (ann) {
            if (!json_is_string(ann) ||
                fe__edm_type(json_string_value(ann), json_string_length(ann),
                             &t) != 0) {
                rv = fe__err(errmsg, RT_EINVAL,
                             "unknown type annotation for %.*s", k, kn);
                goto fail;
            }
        }
        memset(&p, 0, sizeof(p));
        p.name = k;
        p.name_len = kn;
        rv = fe__convert(v, ann != NULL, t, &p, &scratch);
        if (rv) {
            fe__err(errmsg, rv,
                    rv == RT_EOUTOFRANGE ? "value of %.*s is out of range"
                    : rv == RT_EPROPTOOLARGE
                        ? "value of %.*s is too large"
                        : "value of %.*s is not valid for its type",
                    k, kn);
            goto fail;
        }
        if (rt_prop_check_limits(&p) != 0) {
            rv = fe__err(errmsg, RT_EPROPTOOLARGE, "value of %.*s is too large",
                         k, kn);
            goto fail;
        }
        if (++nprops > RT_MAX_USER_PROPS) {
            rv = fe__err(errmsg, RT_ETOOMANYPROPS,
                         "more than 252 properties%.*s", "", 0);
            goto fail;
        }
        size += rt_prop_azure_size(&p);
        rt_props_add(&w, &p);
    }
    rt_props_end(&w);
    size += 2 * (pk_units + rk_units);
    if (size > RT_MAX_ENTITY_BYTES) {
        rv = fe__err(errmsg, RT_EENTITYTOOLARGE, "entity larger than 1 MiB%.*s",
                     "", 0);
        goto fail;
    }
    rt_buf_free(&scratch);
    return 0;

dup_key:
    rv = fe__err(errmsg, RT_EDUPPROPS, "duplicate key property%.*s", "", 0);
fail:
    rt_buf_free(&scratch);
    fe_entity_in_free(in);
    return rv;
}

/* ---- writing ---------------------------------------------------------- */

#define FE__LIT(out, lit) rt_buf_append((out), (lit), sizeof(lit) - 1)

int fe_odata_select_index(const struct fe_odata_ctx *ctx,
                          const char *name,
                          size_t n)
{
    if (!ctx->select) {
        return -2;
    }
    for (size_t i = 0; i < ctx->nselect; i++) {
        const char *s = ctx->select[i];
        if (strcmp(s, "*") == 0) {
            return -2;
        }
        if (strlen(s) == n && memcmp(s, name, n) == 0) {
            return (int)i;
        }
    }
    return -1;
}

static int fe__selected(const struct fe_odata_ctx *ctx,
                        const char *name,
                        size_t n)
{
    return fe_odata_select_index(ctx, name, n) != -1;
}

/* ,"name": (comma unless first) */
static void fe__member(struct rt_buf *out,
                       int *first,
                       const char *name,
                       size_t n)
{
    uint8_t *q = rt_buf_reserve(out, n + 4);
    if (!*first) {
        *q++ = ',';
        out->len++;
    }
    *first = 0;
    *q = '"';
    out->len++;
    fe_json_escape(out, name, n);
    FE__LIT(out, "\":");
}

/* ,"name@odata.type":"Edm.X" */
static void fe__annot(struct rt_buf *out,
                      int *first,
                      const char *name,
                      size_t n,
                      const char *edm)
{
    if (!*first) {
        rt_buf_append_u8(out, ',');
    }
    *first = 0;
    rt_buf_append_u8(out, '"');
    fe_json_escape(out, name, n);
    FE__LIT(out, "@odata.type\":\"");
    rt_buf_append_str(out, edm);
    rt_buf_append_u8(out, '"');
}

/* Member @name, preceded by its "@odata.type" annotation (@edm) when
 * @annotate: the metadata levels that carry a type say it first. */
static void fe__typed_member(struct rt_buf *out,
                             int *first,
                             const char *name,
                             size_t n,
                             int annotate,
                             const char *edm)
{
    if (annotate) {
        fe__annot(out, first, name, n, edm);
    }
    fe__member(out, first, name, n);
}

static void fe__jstr(struct rt_buf *out, const char *s, size_t n)
{
    rt_buf_append_u8(out, '"');
    fe_json_escape(out, s, n);
    rt_buf_append_u8(out, '"');
}

/* (PartitionKey='pk',RowKey='rk') */
static void fe__key_pred(struct rt_buf *out,
                         const char *pk,
                         size_t pklen,
                         const char *rk,
                         size_t rklen)
{
    FE__LIT(out, "(PartitionKey='");
    fe__key_literal(out, pk, pklen);
    FE__LIT(out, "',RowKey='");
    fe__key_literal(out, rk, rklen);
    FE__LIT(out, "')");
}

int fe_odata_check_keys(const char *pk,
                        size_t pklen,
                        const char *rk,
                        size_t rklen,
                        int from_body)
{
    int rc = rt_entity_key_check(pk, pklen, NULL);
    if (rc == 0) {
        rc = rt_entity_key_check(rk, rklen, NULL);
    }
    return rc == RT_EINVAL && from_body ? RT_EOUTOFRANGE : rc;
}

int fe_odata_write_entity(struct rt_buf *out,
                          const struct fe_odata_ctx *ctx,
                          const char *pk,
                          size_t pklen,
                          const char *rk,
                          size_t rklen,
                          const uint8_t *value,
                          size_t vlen,
                          int element)
{
    size_t start = out->len;
    const uint8_t *blob;
    size_t blob_n;
    uint64_t ticks;
    uint8_t flags;
    struct rt_props_iter it;
    struct rt_prop p;
    char tmp[64];
    int first = 1, rv;
    int meta = ctx->meta != FE_META_NONE;
    int full = ctx->meta == FE_META_FULL;

    if (rt_value_decode(value, vlen, &ticks, &flags, &blob, &blob_n) != 0 ||
        rt_props_iter_init(&it, blob, blob_n) != 0) {
        return RT_ECORRUPT;
    }
    rt_buf_reserve(out, 256 + blob_n + blob_n / 2);
    rt_buf_append_u8(out, '{');
    if (meta) {
        if (element) {
            fe__member(out, &first, "odata.metadata", 14);
            rt_buf_append_u8(out, '"');
            fe_json_escape(out, ctx->root, strlen(ctx->root));
            FE__LIT(out, "/$metadata#");
            fe_json_escape(out, ctx->table, strlen(ctx->table));
            FE__LIT(out, "/@Element\"");
        }
        if (full) {
            fe__member(out, &first, "odata.type", 10);
            rt_buf_append_u8(out, '"');
            fe_json_escape(out, ctx->account, strlen(ctx->account));
            rt_buf_append_u8(out, '.');
            fe_json_escape(out, ctx->table, strlen(ctx->table));
            rt_buf_append_u8(out, '"');
            fe__member(out, &first, "odata.id", 8);
            rt_buf_append_u8(out, '"');
            fe_json_escape(out, ctx->root, strlen(ctx->root));
            rt_buf_append_u8(out, '/');
            fe_json_escape(out, ctx->table, strlen(ctx->table));
            fe__key_pred(out, pk, pklen, rk, rklen);
            rt_buf_append_u8(out, '"');
        }
        fe__member(out, &first, "odata.etag", 10);
        fe_odata_etag(ticks, tmp);
        fe__jstr(out, tmp, strlen(tmp));
        if (full) {
            fe__member(out, &first, "odata.editLink", 14);
            rt_buf_append_u8(out, '"');
            fe_json_escape(out, ctx->table, strlen(ctx->table));
            fe__key_pred(out, pk, pklen, rk, rklen);
            rt_buf_append_u8(out, '"');
        }
    }
    if (fe__selected(ctx, "PartitionKey", 12)) {
        fe__member(out, &first, "PartitionKey", 12);
        fe__jstr(out, pk, pklen);
    }
    if (fe__selected(ctx, "RowKey", 6)) {
        fe__member(out, &first, "RowKey", 6);
        fe__jstr(out, rk, rklen);
    }
    if (fe__selected(ctx, "Timestamp", 9)) {
        fe__typed_member(out, &first, "Timestamp", 9, full, "Edm.DateTime");
        size_t n = rt_time_format_iso7(ticks, tmp);
        fe__jstr(out, tmp, n);
    }
    while ((rv = rt_props_next(&it, &p)) == 1) {
        if (ctx->select && !fe__selected(ctx, p.name, p.name_len)) {
            continue;
        }
        switch (p.type) {
            case RT_EDM_STRING:
                fe__member(out, &first, p.name, p.name_len);
                fe__jstr(out, (const char *)p.v.bytes.p, p.v.bytes.n);
                break;
            case RT_EDM_BINARY:
                fe__typed_member(out, &first, p.name, p.name_len, meta,
                                 "Edm.Binary");
                rt_buf_append_u8(out, '"');
                fe__b64_append(out, p.v.bytes.p, p.v.bytes.n);
                rt_buf_append_u8(out, '"');
                break;
            case RT_EDM_BOOL:
                fe__member(out, &first, p.name, p.name_len);
                if (p.v.b) {
                    FE__LIT(out, "true");
                } else {
                    FE__LIT(out, "false");
                }
                break;
            case RT_EDM_DATETIME: {
                fe__typed_member(out, &first, p.name, p.name_len, meta,
                                 "Edm.DateTime");
                size_t n = rt_time_format_iso(p.v.ticks, tmp);
                fe__jstr(out, tmp, n);
                break;
            }
            case RT_EDM_DOUBLE:
                if (isfinite(p.v.d)) {
                    fe__member(out, &first, p.name, p.name_len);
                    size_t n = fe__fmt_double(p.v.d, tmp, sizeof(tmp));
                    rt_buf_append(out, tmp, n);
                } else {
                    fe__typed_member(out, &first, p.name, p.name_len, meta,
                                     "Edm.Double");
                    if (isnan(p.v.d)) {
                        FE__LIT(out, "\"NaN\"");
                    } else if (p.v.d > 0) {
                        FE__LIT(out, "\"Infinity\"");
                    } else {
                        FE__LIT(out, "\"-Infinity\"");
                    }
                }
                break;
            case RT_EDM_GUID:
                fe__typed_member(out, &first, p.name, p.name_len, meta,
                                 "Edm.Guid");
                fe_odata_guid_text(p.v.guid, tmp);
                fe__jstr(out, tmp, 36);
                break;
            case RT_EDM_INT32:
                fe__member(out, &first, p.name, p.name_len);
                fe__append_i64(out, p.v.i32);
                break;
            case RT_EDM_INT64:
                fe__typed_member(out, &first, p.name, p.name_len, meta,
                                 "Edm.Int64");
                rt_buf_append_u8(out, '"');
                fe__append_i64(out, p.v.i64);
                rt_buf_append_u8(out, '"');
                break;
        }
    }
    if (rv != 0) {
        out->len = start;
        return RT_ECORRUPT;
    }
    rt_buf_append_u8(out, '}');
    return 0;
}

int fe_odata_write_one(struct rt_buf *out,
                       const struct fe_odata_ctx *ctx,
                       const char *pk,
                       const char *rk,
                       const uint8_t *value,
                       size_t vlen,
                       char *etag)
{
    uint64_t ticks;
    uint8_t flags;
    const uint8_t *blob;
    size_t blob_n;
    if (rt_value_decode(value, vlen, &ticks, &flags, &blob, &blob_n) != 0 ||
        fe_odata_write_entity(out, ctx, pk, strlen(pk), rk, strlen(rk), value,
                              vlen, 1) != 0) {
        return RT_ECORRUPT;
    }
    fe_odata_etag(ticks, etag);
    return 0;
}

int fe_odata_write_inserted(struct rt_buf *out,
                            const struct fe_odata_ctx *ctx,
                            const char *pk,
                            const char *rk,
                            uint64_t ticks,
                            const uint8_t *props,
                            size_t len)
{
    struct rt_buf value = RT_BUF_INIT;
    int rc;
    rt_value_encode(&value, ticks, 0, props, len);
    rc = fe_odata_write_entity(out, ctx, pk, strlen(pk), rk, strlen(rk),
                               value.data, value.len, 1);
    rt_buf_free(&value);
    return rc;
}

/* ---- ETag ------------------------------------------------------------- */

void fe_odata_etag(uint64_t ticks, char *out)
{
    char iso[RT_TIME_ISO_SIZE];
    size_t n = rt_time_format_iso7(ticks, iso);
    char *q = out;

    memcpy(q, "W/\"datetime'", 12);
    q += 12;
    for (size_t i = 0; i < n; i++) {
        if (iso[i] == ':') {
            memcpy(q, "%3A", 3);
            q += 3;
        } else {
            *q++ = iso[i];
        }
    }
    memcpy(q, "'\"", 3);
}

int fe_odata_parse_etag(const char *s, uint64_t *ticks, int *any)
{
    char norm[RT_TIME_ISO_SIZE], again[RT_TIME_ISO_SIZE];
    size_t n, nn = 0;
    uint64_t t;

    *any = 0;
    while (*s == ' ' || *s == '\t') {
        s++;
    }
    n = strlen(s);
    while (n && (s[n - 1] == ' ' || s[n - 1] == '\t')) {
        n--;
    }
    if (n == 1 && s[0] == '*') {
        *any = 1;
        *ticks = 0;
        return 0;
    }
    if (n < 14 || memcmp(s, "W/\"datetime'", 12) != 0 ||
        memcmp(s + n - 2, "'\"", 2) != 0) {
        return RT_EINVAL;
    }
    for (size_t i = 12; i < n - 2; i++) {
        if (nn + 1 >= sizeof(norm)) {
            return RT_EINVAL;
        }
        if (s[i] == '%' && i + 2 < n - 2 && s[i + 1] == '3' &&
            (s[i + 2] == 'A' || s[i + 2] == 'a')) {
            norm[nn++] = ':';
            i += 2;
        } else {
            norm[nn++] = s[i];
        }
    }
    norm[nn] = '\0';
    if (rt_time_parse_iso(norm, nn, &t) != 0) {
        return RT_EINVAL;
    }
    /* Only the exact 7-digit form we issue. */
    if (rt_time_format_iso7(t, again) != nn || memcmp(again, norm, nn) != 0) {
        return RT_EINVAL;
    }
    *ticks = t;
    return 0;
}

void fe_odata_entity_path(struct rt_buf *out,
                          const char *root,
                          const char *table,
                          const char *pk,
                          const char *rk)
{
    if (root) {
        rt_buf_append_str(out, root);
        rt_buf_append_u8(out, '/');
    }
    rt_buf_append_str(out, table);
    fe__key_pred(out, pk, strlen(pk), rk, strlen(rk));
}
