#include "rl_req.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rl_http.h"
#include "rl_spec.h"

#define RL_BATCH_BOUNDARY "batch_rtload"
#define RL_CS_BOUNDARY "changeset_rtload"
#define RL_JSON_CT "application/json"
#define RL_BATCH_CT "multipart/mixed; boundary=" RL_BATCH_BOUNDARY

static void rl__err(char *err, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void rl__err(char *err, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, RL_ERR_SIZE, fmt, ap);
    va_end(ap);
}

static int rl__is_ip_or_local(const char *h)
{
    int dots = 0, alldig = 1;
    if (!strcmp(h, "localhost") || !strcmp(h, "host.docker.internal")) {
        return 1;
    }
    for (const char *p = h; *p; p++) {
        if (*p == '.') {
            dots++;
        } else if (!isdigit((unsigned char)*p)) {
            alldig = 0;
        }
    }
    return dots == 0 || alldig || h[0] == '[';
}

int rl_target_parse(struct rl_target *t,
                    const char *url,
                    const char *account,
                    char *err)
{
    const char *p = url, *hs, *he, *ps;
    char seg[RL_ACCOUNT_MAX];
    size_t hl;
    if (strncmp(p, "http://", 7) == 0) {
        p += 7;
    } else if (strncmp(p, "https://", 8) == 0) {
        rl__err(err,
                "https endpoints are not supported (no TLS in rt-load);"
                " use http:// or a local TLS-terminating proxy");
        return -1;
    } else {
        rl__err(err, "endpoint must start with http://");
        return -1;
    }
    hs = p;
    while (*p && *p != '/' && *p != '?') {
        p++;
    }
    he = p;
    ps = p;
    hl = (size_t)(he - hs);
    if (hl == 0 || hl >= sizeof(t->host)) {
        rl__err(err, "bad host in endpoint '%s'", url);
        return -1;
    }
    memcpy(t->host_header, hs, hl);
    t->host_header[hl] = '\0';
    snprintf(t->origin, sizeof(t->origin), "http://%s", t->host_header);
    {
        const char *colon = memchr(hs, ':', hl);
        size_t n = colon ? (size_t)(colon - hs) : hl;
        memcpy(t->host, hs, n);
        t->host[n] = '\0';
        t->port = colon ? atoi(colon + 1) : 80;
        if (t->port <= 0 || t->port > 65535) {
            rl__err(err, "bad port in endpoint '%s'", url);
            return -1;
        }
    }
    /* First path segment. */
    seg[0] = '\0';
    if (*ps == '/') {
        const char *s = ps + 1, *e = s;
        while (*e && *e != '/' && *e != '?') {
            e++;
        }
        if ((size_t)(e - s) >= sizeof(seg)) {
            rl__err(err, "account segment too long");
            return -1;
        }
        memcpy(seg, s, (size_t)(e - s));
        seg[e - s] = '\0';
    }
    t->path_style = rl__is_ip_or_local(t->host);
    if (t->path_style) {
        const char *acct = seg[0]                ? seg
                           : account && *account ? account
                                                 : "devstoreaccount1";
        snprintf(t->base_path, sizeof(t->base_path), "/%s", acct);
        snprintf(t->account, sizeof(t->account), "%s",
                 account && *account ? account : acct);
    } else {
        const char *dot = strchr(t->host, '.');
        size_t n = (size_t)(dot - t->host);
        t->base_path[0] = '\0';
        if (account && *account) {
            snprintf(t->account, sizeof(t->account), "%s", account);
        } else {
            if (n >= sizeof(t->account)) {
                rl__err(err, "account label too long");
                return -1;
            }
            memcpy(t->account, t->host, n);
            t->account[n] = '\0';
        }
    }
    return 0;
}

/* Template building */

struct rl__tb
{
    char *p;
    size_t n, cap;
    struct rl_tmpl *t;
};

static void rl__tb_put(struct rl__tb *b, const char *s, size_t n)
{
    if (b->n + n + 1 > b->cap) {
        b->cap = (b->n + n + 1) * 2;
        b->p = realloc(b->p, b->cap);
        if (!b->p) {
            abort();
        }
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = '\0';
}

static void rl__tb_str(struct rl__tb *b, const char *s)
{
    rl__tb_put(b, s, strlen(s));
}

static void rl__tb_slot(struct rl__tb *b, enum rl_slot_kind k, size_t width)
{
    char fill[32];
    struct rl_tmpl *t = b->t;
    t->slot[t->nslots].off = (uint32_t)b->n;
    t->slot[t->nslots].kind = (uint8_t)k;
    t->nslots++;
    memset(fill, "PRBT"[k], width);
    rl__tb_put(b, fill, width);
}

static void rl__tb_finish(struct rl__tb *b)
{
    b->t->p = b->p;
    b->t->n = b->n;
}

/* Appends the entity JSON (slots shifted into @b). */
static void rl__body_into(const struct rl_reqcfg *c, struct rl__tb *b)
{
    size_t pkw = rl_pk_width(&c->km), rkw = rl_rk_width(&c->km);
    unsigned nfill = c->props >= 2 ? c->props - 2 : 0;
    size_t base, fill_len = 0;
    char name[32];

    rl__tb_str(b, "{\"PartitionKey\":\"");
    rl__tb_slot(b, RL_SLOT_PK, pkw);
    rl__tb_str(b, "\",\"RowKey\":\"");
    rl__tb_slot(b, RL_SLOT_RK, rkw);
    rl__tb_str(b, "\",\"Bucket\":");
    rl__tb_slot(b, RL_SLOT_BUCKET, 2);
    if (c->props >= 2) {
        rl__tb_str(b, ",\"Tag\":\"");
        rl__tb_slot(b, RL_SLOT_TAG, 16);
        rl__tb_str(b, "\"");
    }
    /* What is there so far plus "}" and the fill properties' overhead. */
    base = 17 + pkw + 12 + rkw + 11 + 2 + (c->props >= 2 ? 26 : 0) + 1 +
           (size_t)nfill * 9;
    if (nfill && c->entity_size > base) {
        fill_len = (c->entity_size - base) / nfill;
    }
    for (unsigned i = 0; i < nfill; i++) {
        uint64_t h = rt_mix64(0xf111 + i);
        snprintf(name, sizeof(name), ",\"P%02u\":\"", i + 2);
        rl__tb_str(b, name);
        for (size_t k = 0; k < fill_len; k++) {
            char ch = (char)('a' + (h >> (k % 59)) % 26);
            rl__tb_put(b, &ch, 1);
        }
        rl__tb_str(b, "\"");
    }
    rl__tb_str(b, "}");
}

static void rl__part(const struct rl_reqcfg *c, struct rl_tmpl *t, int upsert)
{
    struct rl__tb b = {NULL, 0, 0, t};
    memset(t, 0, sizeof(*t));
    rl__tb_str(&b, "--" RL_CS_BOUNDARY
                   "\r\nContent-Type: application/http"
                   "\r\nContent-Transfer-Encoding: binary\r\n\r\n");
    rl__tb_str(&b, upsert ? "PUT " : "POST ");
    rl__tb_str(&b, c->t.origin);
    rl__tb_str(&b, c->t.base_path);
    rl__tb_str(&b, "/");
    rl__tb_str(&b, c->t.table);
    if (upsert) {
        rl__tb_str(&b, "(PartitionKey='");
        rl__tb_slot(&b, RL_SLOT_PK, rl_pk_width(&c->km));
        rl__tb_str(&b, "',RowKey='");
        rl__tb_slot(&b, RL_SLOT_RK, rl_rk_width(&c->km));
        rl__tb_str(&b, "')");
    }
    rl__tb_str(&b,
               " HTTP/1.1\r\nContent-Type: application/json\r\n"
               "Accept: application/json;odata=nometadata\r\n");
    if (!upsert) {
        rl__tb_str(&b, "Prefer: return-no-content\r\n");
    }
    rl__tb_str(&b, "DataServiceVersion: 3.0\r\n\r\n");
    rl__body_into(c, &b);
    rl__tb_str(&b, "\r\n");
    rl__tb_finish(&b);
}

/* The etcd value: --entity-size letters, stored base64 once. */
static int rl__etcd_prepare(struct rl_reqcfg *c, char *err)
{
    size_t n = c->entity_size ? (size_t)c->entity_size : 1;
    unsigned char *raw = malloc(n);
    c->etcd_value = malloc(4 * ((n + 2) / 3) + 1);
    if (!raw || !c->etcd_value) {
        free(raw);
        rl__err(err, "out of memory");
        return -1;
    }
    for (size_t k = 0; k < n; k++) {
        raw[k] = (unsigned char)('a' + rt_mix64(k) % 26);
    }
    rl_b64_encode(raw, n, c->etcd_value);
    free(raw);
    c->max_request = strlen(c->etcd_value) + 1024;
    return 0;
}

int rl_reqcfg_prepare(struct rl_reqcfg *c, unsigned max_batch, char *err)
{
    struct rl__tb b;
    int k;
    if (c->etcd) {
        memset(&c->body, 0, sizeof(c->body));
        memset(&c->part_insert, 0, sizeof(c->part_insert));
        memset(&c->part_upsert, 0, sizeof(c->part_upsert));
        c->max_batch = 1;
        return rl__etcd_prepare(c, err);
    }
    if (strlen(c->t.table) < 3) {
        rl__err(err, "table name '%s' too short", c->t.table);
        return -1;
    }
    k = snprintf(c->common, sizeof(c->common),
                 "Host: %s\r\nx-ms-version: 2019-02-02\r\n"
                 "DataServiceVersion: 3.0\r\n"
                 "MaxDataServiceVersion: 3.0;NetFx\r\n"
                 "Accept: application/json;odata=nometadata\r\n"
                 "User-Agent: rt-load/1.0\r\n",
                 c->t.host_header);
    if (k < 0 || (size_t)k >= sizeof(c->common)) {
        rl__err(err, "host name too long");
        return -1;
    }
    c->common_len = (size_t)k;
    memset(&c->body, 0, sizeof(c->body));
    b = (struct rl__tb){NULL, 0, 0, &c->body};
    rl__body_into(c, &b);
    rl__tb_finish(&b);
    rl__part(c, &c->part_insert, 0);
    rl__part(c, &c->part_upsert, 1);
    c->max_batch = max_batch ? max_batch : 1;
    {
        size_t part = c->part_insert.n > c->part_upsert.n ? c->part_insert.n
                                                          : c->part_upsert.n;
        size_t body = c->body.n > part * c->max_batch + 256
                          ? c->body.n
                          : part * c->max_batch + 256;
        c->max_request = body + 8192 + strlen(c->t.sas) + 2 * 3 * RL_CONT_MAX;
    }
    return 0;
}

void rl_reqcfg_free(struct rl_reqcfg *c)
{
    free(c->body.p);
    free(c->part_insert.p);
    free(c->part_upsert.p);
    free(c->etcd_value);
    c->body.p = c->part_insert.p = c->part_upsert.p = NULL;
    c->etcd_value = NULL;
}

/* Request writing */

struct rl__vals
{
    char pk[RL_KEY_MAX], rk[RL_KEY_MAX];
    char bucket[3];
    char tag[17];
};

static void rl__vals_entity(const struct rl_reqcfg *c,
                            int64_t id,
                            struct rl__vals *v)
{
    static const char hx[] = "0123456789abcdef";
    uint64_t h = rt_mix64((uint64_t)id);
    unsigned bk = (unsigned)(h % 100);
    rl_key_of(&c->km, id, v->pk, v->rk);
    v->bucket[0] = bk >= 10 ? (char)('0' + bk / 10) : ' ';
    v->bucket[1] = (char)('0' + bk % 10);
    v->bucket[2] = '\0';
    for (int i = 15; i >= 0; i--) {
        v->tag[i] = hx[h & 15];
        h >>= 4;
    }
    v->tag[16] = '\0';
}

static size_t rl__emit(const struct rl_tmpl *t,
                       const struct rl__vals *v,
                       char *dst)
{
    memcpy(dst, t->p, t->n);
    for (int i = 0; i < t->nslots; i++) {
        const char *s = t->slot[i].kind == RL_SLOT_PK       ? v->pk
                        : t->slot[i].kind == RL_SLOT_RK     ? v->rk
                        : t->slot[i].kind == RL_SLOT_BUCKET ? v->bucket
                                                            : v->tag;
        memcpy(dst + t->slot[i].off, s, strlen(s));
    }
    return t->n;
}

#define PUT(s, n)                    \
    do {                             \
        memcpy(buf + len, (s), (n)); \
        len += (n);                  \
    } while (0)
#define PUTS(s) PUT((s), strlen(s))

static size_t rl__urlenc_tok(const char *in, char *out)
{
    static const char hx[] = "0123456789ABCDEF";
    size_t o = 0;
    for (const unsigned char *p = (const unsigned char *)in; *p; p++) {
        if (isalnum(*p) || strchr("-_.~!*'()", *p)) {
            out[o++] = (char)*p;
        } else {
            out[o++] = '%';
            out[o++] = hx[*p >> 4];
            out[o++] = hx[*p & 15];
        }
    }
    return o;
}

static size_t rl__utoa(uint64_t v, char *out)
{
    char tmp[24];
    size_t n = 0, i;
    do {
        tmp[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    for (i = 0; i < n; i++) {
        out[i] = tmp[n - 1 - i];
    }
    return n;
}

/* etcd: the key is the entity's PartitionKey and RowKey, as Azure
 * addresses it; the body is {"key":B64[,"value":B64]}. */
static size_t rl__build_etcd(const struct rl_reqcfg *c,
                             const struct rl_reqargs *a,
                             char *buf)
{
    char key[2 * RL_KEY_MAX], k64[4 * RL_KEY_MAX], num[24];
    struct rl__vals v;
    size_t len = 0, kl, k64l, body_len;
    int put;
    switch (a->rq) {
        case RL_RQ_INSERT:
        case RL_RQ_UPSERT:
        case RL_RQ_UPDATE:
        case RL_RQ_MERGE:
            put = 1;
            break;
        case RL_RQ_GET:
            put = 0;
            break;
        default:
            return 0;
    }
    rl__vals_entity(c, a->id, &v);
    kl = (size_t)snprintf(key, sizeof(key), "%s/%s", v.pk, v.rk);
    k64l = rl_b64_encode((const uint8_t *)key, kl, k64);
    body_len = 8 + k64l + 1 + (put ? 10 + strlen(c->etcd_value) + 1 : 0) + 1;
    PUTS(put ? "POST /v3/kv/put HTTP/1.1\r\nHost: "
             : "POST /v3/kv/range HTTP/1.1\r\nHost: ");
    PUTS(c->t.host_header);
    PUTS("\r\nContent-Type: application/json\r\nContent-Length: ");
    PUT(num, rl__utoa(body_len, num));
    PUTS("\r\n\r\n{\"key\":\"");
    PUT(k64, k64l);
    PUT("\"", 1);
    if (put) {
        PUTS(",\"value\":\"");
        PUTS(c->etcd_value);
        PUT("\"", 1);
    }
    PUT("}", 1);
    return len;
}

size_t rl_req_build(const struct rl_reqcfg *c,
                    const struct rl_reqargs *a,
                    const char *date,
                    char *buf)
{
    const struct rl_target *t = &c->t;
    const char *verb = "GET", *ct = NULL;
    const char *prefer = NULL, *ifmatch = NULL;
    struct rl__vals v;
    size_t len = 0, path0, path1, q0;
    int has_query = 0, entity_path = 0, query_path = 0;
    /* Body is written after the headers: compute it into the tail. */
    char *body = NULL;
    size_t body_len = 0;
    char num[24];

    if (c->etcd) {
        return rl__build_etcd(c, a, buf);
    }
    switch (a->rq) {
        case RL_RQ_CREATE_TABLE:
            verb = "POST";
            ct = RL_JSON_CT;
            prefer = "return-no-content";
            break;
        case RL_RQ_INSERT:
            verb = "POST";
            ct = RL_JSON_CT;
            prefer = "return-no-content";
            break;
        case RL_RQ_GET:
            entity_path = 1;
            break;
        case RL_RQ_UPSERT:
            verb = "PUT";
            ct = RL_JSON_CT;
            entity_path = 1;
            break;
        case RL_RQ_UPSERT_MERGE:
            verb = "PATCH";
            ct = RL_JSON_CT;
            entity_path = 1;
            break;
        case RL_RQ_UPDATE:
            verb = "PUT";
            ct = RL_JSON_CT;
            ifmatch = "*";
            entity_path = 1;
            break;
        case RL_RQ_MERGE:
            verb = "PATCH";
            ct = RL_JSON_CT;
            ifmatch = a->etag && *a->etag ? a->etag : "*";
            entity_path = 1;
            break;
        case RL_RQ_DELETE:
            verb = "DELETE";
            ifmatch = "*";
            entity_path = 1;
            break;
        case RL_RQ_QPOINT:
        case RL_RQ_QROWS:
        case RL_RQ_QPARTS:
        case RL_RQ_SCAN:
        case RL_RQ_PAGE:
            query_path = 1;
            break;
        case RL_RQ_BATCH_INSERT:
        case RL_RQ_BATCH_UPSERT:
            verb = "POST";
            ct = RL_BATCH_CT;
            break;
    }
    if (a->rq != RL_RQ_BATCH_INSERT && a->rq != RL_RQ_BATCH_UPSERT &&
        a->rq != RL_RQ_CREATE_TABLE) {
        rl__vals_entity(c, a->id, &v);
    }

    /* Request line */
    PUTS(verb);
    PUT(" ", 1);
    path0 = len;
    PUTS(t->base_path);
    if (a->rq == RL_RQ_CREATE_TABLE) {
        PUT("/Tables", 7);
    } else if (a->rq == RL_RQ_BATCH_INSERT || a->rq == RL_RQ_BATCH_UPSERT) {
        PUT("/$batch", 7);
    } else {
        PUT("/", 1);
        PUTS(t->table);
        if (entity_path) {
            PUT("(PartitionKey='", 15);
            PUTS(v.pk);
            PUT("',RowKey='", 10);
            PUTS(v.rk);
            PUT("')", 2);
        } else if (query_path) {
            PUT("()", 2);
        }
    }
    path1 = len;
    q0 = len;
    switch (a->rq) {
        case RL_RQ_QPOINT:
            PUTS("?$filter=PartitionKey%20eq%20'");
            PUTS(v.pk);
            PUTS("'%20and%20RowKey%20eq%20'");
            PUTS(v.rk);
            PUT("'", 1);
            break;
        case RL_RQ_QROWS:
            PUTS("?$filter=PartitionKey%20eq%20'");
            PUTS(v.pk);
            PUTS("'%20and%20RowKey%20ge%20'");
            PUTS(v.rk);
            PUTS("'&$top=");
            PUT(num, rl__utoa(c->range_len, num));
            break;
        case RL_RQ_QPARTS:
            PUTS("?$filter=PartitionKey%20ge%20'");
            PUTS(v.pk);
            PUTS("'&$top=");
            PUT(num, rl__utoa(c->page_size, num));
            break;
        case RL_RQ_SCAN:
            PUTS("?$filter=");
            PUTS(c->scan_filter);
            PUTS("&$top=");
            PUT(num, rl__utoa(c->page_size, num));
            if (a->next_pk && *a->next_pk) {
                PUTS("&NextPartitionKey=");
                len += rl__urlenc_tok(a->next_pk, buf + len);
                if (a->next_rk && *a->next_rk) {
                    PUTS("&NextRowKey=");
                    len += rl__urlenc_tok(a->next_rk, buf + len);
                }
            }
            break;
        case RL_RQ_PAGE:
            PUTS("?$top=");
            PUT(num, rl__utoa(c->page_size, num));
            break;
        default:
            break;
    }
    has_query = len > q0;
    if (t->auth == RL_AUTH_SAS && t->sas[0]) {
        PUT(has_query ? "&" : "?", 1);
        PUTS(t->sas);
    }
    PUT(" HTTP/1.1\r\n", 11);
    PUT(c->common, c->common_len);
    PUT("x-ms-date: ", 11);
    PUT(date, RL_DATE_LEN);
    PUT("\r\n", 2);
    if ((t->auth == RL_AUTH_SHAREDKEY || t->auth == RL_AUTH_SHAREDKEYLITE) &&
        t->have_key) {
        char sig[RL_SIG_LEN + 1];
        if (t->auth == RL_AUTH_SHAREDKEY) {
            rl_sign_sharedkey(&t->signer, verb, ct, date, buf + path0,
                              path1 - path0, sig);
            PUTS("Authorization: SharedKey ");
        } else {
            rl_sign_sharedkeylite(&t->signer, date, buf + path0, path1 - path0,
                                  sig);
            PUTS("Authorization: SharedKeyLite ");
        }
        PUTS(t->account);
        PUT(":", 1);
        PUT(sig, RL_SIG_LEN);
        PUT("\r\n", 2);
    }
    if (prefer) {
        PUTS("Prefer: ");
        PUTS(prefer);
        PUT("\r\n", 2);
    }
    if (ifmatch) {
        PUTS("If-Match: ");
        PUTS(ifmatch);
        PUT("\r\n", 2);
    }
    if (ct) {
        PUTS("Content-Type: ");
        PUTS(ct);
        PUT("\r\n", 2);
    }

    /* The body goes after the headers; its length is known up front for
     * every kind, so write Content-Length first. */
    switch (a->rq) {
        case RL_RQ_CREATE_TABLE:
            body_len = 14 + strlen(t->table) + 2;
            break;
        case RL_RQ_INSERT:
        case RL_RQ_UPSERT:
        case RL_RQ_UPSERT_MERGE:
        case RL_RQ_UPDATE:
        case RL_RQ_MERGE:
            body_len = c->body.n;
            break;
        case RL_RQ_BATCH_INSERT:
        case RL_RQ_BATCH_UPSERT: {
            const struct rl_tmpl *pt =
                a->rq == RL_RQ_BATCH_INSERT ? &c->part_insert : &c->part_upsert;
            body_len =
                strlen("--" RL_BATCH_BOUNDARY
                       "\r\nContent-Type: "
                       "multipart/mixed; boundary=" RL_CS_BOUNDARY "\r\n\r\n") +
                (size_t)a->n * pt->n +
                strlen("--" RL_CS_BOUNDARY "--\r\n--" RL_BATCH_BOUNDARY
                       "--\r\n");
            break;
        }
        default:
            body_len = 0;
    }
    if (ct || body_len) {
        PUTS("Content-Length: ");
        PUT(num, rl__utoa(body_len, num));
        PUT("\r\n", 2);
    }
    PUT("\r\n", 2);
    body = buf + len;
    switch (a->rq) {
        case RL_RQ_CREATE_TABLE:
            PUTS("{\"TableName\":\"");
            PUTS(t->table);
            PUTS("\"}");
            break;
        case RL_RQ_INSERT:
        case RL_RQ_UPSERT:
        case RL_RQ_UPSERT_MERGE:
        case RL_RQ_UPDATE:
        case RL_RQ_MERGE:
            len += rl__emit(&c->body, &v, buf + len);
            break;
        case RL_RQ_BATCH_INSERT:
        case RL_RQ_BATCH_UPSERT:
            PUTS("--" RL_BATCH_BOUNDARY
                 "\r\nContent-Type: multipart/mixed; "
                 "boundary=" RL_CS_BOUNDARY "\r\n\r\n");
            for (unsigned i = 0; i < a->n; i++) {
                if (a->rq == RL_RQ_BATCH_INSERT) {
                    int64_t vid = (int64_t)(a->brow0 + i);
                    rl__vals_entity(c, vid, &v);
                    rl_pk_of_index(&c->km, a->pk_index, v.pk);
                    rl_batch_rk(a->brow0 + i, v.rk);
                    if (rl_rk_width(&c->km) > 14) {
                        /* Pad the batch row key to the template's width. */
                        memset(v.rk + 14, '0', rl_rk_width(&c->km) - 14);
                        v.rk[rl_rk_width(&c->km)] = '\0';
                    }
                    len += rl__emit(&c->part_insert, &v, buf + len);
                } else {
                    rl__vals_entity(c, a->id0 + (int64_t)i * a->id_step, &v);
                    len += rl__emit(&c->part_upsert, &v, buf + len);
                }
            }
            PUTS("--" RL_CS_BOUNDARY "--\r\n--" RL_BATCH_BOUNDARY "--\r\n");
            break;
        default:
            break;
    }
    (void)body;
    return len;
}
