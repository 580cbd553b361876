/* Entity group transactions (docs/table-api-spec.md §5): the multipart
 * parser and validator, the multipart response writer, and the $batch
 * operation glue for fe_api.c.
 *
 * Happy path: fe_batch_prepare() parses the body (fe_batch_parse: outer
 * multipart -> one changeset -> 1..100 application/http parts -> each part's
 * request line, headers and entity), then builds one FE_JOB_WRITE with
 * atomic=1 holding every op in request order; fe_route sends it as one RPC
 * to the range that owns the PartitionKey, where the partition server runs
 * it all-or-nothing. fe_batch_finish() answers 202 with one response part
 * per op, in order.
 *
 * Failure modes and what the client sees:
 *  - the request cannot be read as a batch (wrong Content-Type, malformed
 *    or truncated multipart, several changesets, a GET mixed with writes,
 *    a bad request line): a plain 400 InvalidInput error response (§5.4
 *    last bullet); a body over 4 MiB: 413 RequestBodyTooLarge;
 *  - an operation breaks a rule (limits, partition, duplicate row, URL,
 *    headers, entity body): 202 with a single failure part carrying the
 *    real status and "<index>:<message>" (§5.4), nothing is sent to the
 *    cluster;
 *  - the partition server refuses op i (409 exists, 404 missing, 412
 *    ETag...): 202 with that failure part at index i; nothing was applied;
 *  - the table does not exist: 202, 404 TableNotFound at index 0;
 *  - no operation to blame (timeouts, ServerBusy, internal errors): the
 *    plain 5xx error response, as for a single operation.
 *
 * Everything above fe_batch_prepare is pure and never reads outside the
 * spans it is given: all parsing works on (pointer, length) pairs inside
 * the request body, which need not be NUL-terminated. */
#include "fe_batch.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "fe_atom.h"
#include "fe_req.h"
#include "fe_url.h"
#include "rt.pb-c.h"
#include "rt_alloc.h"
#include "rt_entity.h"
#include "rt_log.h"
#include "rt_time.h"

#define FE__JSON_CT_NONE \
    "application/json;odata=nometadata;streaming=true;charset=utf-8"
#define FE__JSON_CT_MINIMAL \
    "application/json;odata=minimalmetadata;streaming=true;charset=utf-8"
#define FE__JSON_CT_FULL \
    "application/json;odata=fullmetadata;streaming=true;charset=utf-8"

/* Headers per MIME part or inner request: real clients send about ten. */
#define FE__MAX_HDRS 64
/* RFC 2046 allows 70; be a little lenient. */
#define FE__MAX_BOUNDARY 200

/* ---- Spans ---------------------------------------------------------- */

struct fe__span
{
    const char *p;
    size_t n;
};

static struct fe__span fe__span_of(const char *p, size_t n)
{
    struct fe__span s;
    s.p = p;
    s.n = n;
    return s;
}

static int fe__is_ws(char c)
{
    return c == ' ' || c == '\t';
}

static struct fe__span fe__trim(struct fe__span s)
{
    while (s.n && fe__is_ws(s.p[0])) {
        s.p++;
        s.n--;
    }
    while (s.n && fe__is_ws(s.p[s.n - 1])) {
        s.n--;
    }
    return s;
}

/* Case-insensitive equality with a literal. */
static int fe__ieq(struct fe__span s, const char *lit)
{
    size_t n = strlen(lit);
    return s.n == n && strncasecmp(s.p, lit, n) == 0;
}

static int fe__eq(struct fe__span s, const char *lit)
{
    size_t n = strlen(lit);
    return s.n == n && memcmp(s.p, lit, n) == 0;
}

/* malloc'd NUL-terminated copy (allocation failure aborts, rt_alloc.h). */
static char *fe__dup(struct fe__span s)
{
    return rt_xstrndup(s.p, s.n);
}

static char *fe__strdup(const char *s)
{
    return s ? fe__dup(fe__span_of(s, strlen(s))) : NULL;
}

/* Next line of @s from *pos: the line without its CR LF (or bare LF);
 * *pos moves past the LF. Returns 0 when *pos is at the end. */
static int fe__line(struct fe__span s, size_t *pos, struct fe__span *line)
{
    const char *nl;
    size_t end;
    if (*pos >= s.n) {
        return 0;
    }
    nl = memchr(s.p + *pos, '\n', s.n - *pos);
    end = nl ? (size_t)(nl - s.p) : s.n;
    line->p = s.p + *pos;
    line->n = end - *pos;
    if (line->n && line->p[line->n - 1] == '\r') {
        line->n--;
    }
    *pos = nl ? end + 1 : s.n;
    return 1;
}

/* ---- Multipart (RFC 2046) ------------------------------------------- */

/* 0: @line is not a delimiter of @bnd; 1: "--bnd"; 2: "--bnd--" (either
 * may be followed by transport padding). */
static int fe__delim(struct fe__span line, struct fe__span bnd)
{
    struct fe__span rest;
    int kind = 1;
    if (line.n < 2 + bnd.n || line.p[0] != '-' || line.p[1] != '-' ||
        memcmp(line.p + 2, bnd.p, bnd.n) != 0) {
        return 0;
    }
    rest = fe__span_of(line.p + 2 + bnd.n, line.n - 2 - bnd.n);
    if (rest.n >= 2 && rest.p[0] == '-' && rest.p[1] == '-') {
        kind = 2;
        rest.p += 2;
        rest.n -= 2;
    }
    for (size_t i = 0; i < rest.n; i++) {
        if (!fe__is_ws(rest.p[i])) {
            return 0;
        }
    }
    return kind;
}

/* Splits @body on @bnd. The content of each part (from the line after its
 * delimiter to the line break before the next one, which belongs to the
 * delimiter) goes to parts[0..cap); *count gets the number of parts.
 * Preamble and epilogue are skipped. Returns 0, or -1 when there is no
 * close delimiter (truncated or not this boundary at all). */
static int fe__mp_split(struct fe__span body,
                        struct fe__span bnd,
                        struct fe__span *parts,
                        size_t cap,
                        size_t *count)
{
    size_t pos = 0, start = 0;
    int in_part = 0;
    struct fe__span line;

    *count = 0;
    for (;;) {
        size_t ls = pos;
        int kind;
        if (!fe__line(body, &pos, &line)) {
            return -1;
        }
        kind = fe__delim(line, bnd);
        if (!kind) {
            continue;
        }
        if (in_part) {
            size_t end = ls;
            if (end > start && body.p[end - 1] == '\n') {
                end--;
                if (end > start && body.p[end - 1] == '\r') {
                    end--;
                }
            }
            if (*count < cap) {
                parts[*count] = fe__span_of(body.p + start, end - start);
            }
            (*count)++;
        }
        if (kind == 2) {
            return 0;
        }
        in_part = 1;
        start = pos;
    }
}

struct fe__hdr
{
    struct fe__span name;
    struct fe__span val;
};

struct fe__hdrs
{
    struct fe__hdr h[FE__MAX_HDRS];
    size_t n;
};

/* Header lines of @s from *pos up to an empty line (consumed) or the end
 * of @s. Returns 0, or -1 for a line without ':', an empty name, or more
 * than FE__MAX_HDRS headers. */
static int fe__headers(struct fe__span s, size_t *pos, struct fe__hdrs *h)
{
    struct fe__span line;
    h->n = 0;
    while (fe__line(s, pos, &line)) {
        const char *colon;
        struct fe__hdr *e;
        if (line.n == 0) {
            return 0;
        }
        colon = memchr(line.p, ':', line.n);
        if (!colon || h->n == FE__MAX_HDRS) {
            return -1;
        }
        e = &h->h[h->n];
        e->name = fe__trim(fe__span_of(line.p, (size_t)(colon - line.p)));
        e->val = fe__trim(
            fe__span_of(colon + 1, line.n - (size_t)(colon - line.p) - 1));
        if (e->name.n == 0 || fe__is_ws(line.p[0])) {
            return -1; /* empty name or an obsolete folded line */
        }
        h->n++;
    }
    return 0;
}

/* The first header named @name (case-insensitive), or NULL. */
static const struct fe__span *fe__hdr_get(const struct fe__hdrs *h,
                                          const char *name)
{
    for (size_t i = 0; i < h->n; i++) {
        if (fe__ieq(h->h[i].name, name)) {
            return &h->h[i].val;
        }
    }
    return NULL;
}

/* "type/sub; a=b; boundary="x"": *type (trimmed) and *bnd (n = 0 when
 * absent). Returns 0, or -1 for a malformed parameter list or boundary
 * (empty, unterminated quote, longer than FE__MAX_BOUNDARY, control
 * characters). */
static int fe__ctype(struct fe__span ct,
                     struct fe__span *type,
                     struct fe__span *bnd)
{
    size_t i = 0;
    const char *semi = memchr(ct.p, ';', ct.n);
    size_t tn = semi ? (size_t)(semi - ct.p) : ct.n;

    *type = fe__trim(fe__span_of(ct.p, tn));
    bnd->p = NULL;
    bnd->n = 0;
    i = tn;
    while (i < ct.n) {
        struct fe__span name, val;
        size_t ns;
        i++; /* ';' */
        while (i < ct.n && fe__is_ws(ct.p[i])) {
            i++;
        }
        ns = i;
        while (i < ct.n && ct.p[i] != '=' && ct.p[i] != ';') {
            i++;
        }
        name = fe__trim(fe__span_of(ct.p + ns, i - ns));
        val = fe__span_of(ct.p + i, 0);
        if (i < ct.n && ct.p[i] == '=') {
            i++;
            while (i < ct.n && fe__is_ws(ct.p[i])) {
                i++;
            }
            if (i < ct.n && ct.p[i] == '"') {
                const char *q;
                i++;
                q = memchr(ct.p + i, '"', ct.n - i);
                if (!q) {
                    return -1;
                }
                val = fe__span_of(ct.p + i, (size_t)(q - (ct.p + i)));
                i = (size_t)(q - ct.p) + 1;
                while (i < ct.n && ct.p[i] != ';') {
                    if (!fe__is_ws(ct.p[i])) {
                        return -1; /* junk after the quoted string */
                    }
                    i++;
                }
            } else {
                size_t vs = i;
                while (i < ct.n && ct.p[i] != ';') {
                    i++;
                }
                val = fe__trim(fe__span_of(ct.p + vs, i - vs));
            }
        }
        if (fe__ieq(name, "boundary")) {
            if (val.n == 0 || val.n > FE__MAX_BOUNDARY) {
                return -1;
            }
            for (size_t k = 0; k < val.n; k++) {
                if ((unsigned char)val.p[k] < 0x20 || val.p[k] == 0x7f) {
                    return -1;
                }
            }
            *bnd = val;
        }
    }
    return 0;
}

/* One application/http part: its MIME headers and the request inside. */
struct fe__inner
{
    struct fe__hdrs mime;
    struct fe__span verb;
    struct fe__span url;
    struct fe__hdrs hdrs;
    struct fe__span body;
};

/* Parses part content @part. Returns 0 or -1 (malformed; @why says
 * what). */
static int fe__inner_parse(struct fe__span part,
                           struct fe__inner *in,
                           const char **why)
{
    size_t pos = 0;
    struct fe__span line, ct, type, bnd;
    const struct fe__span *v;
    const char *sp1, *sp2;

    if (fe__headers(part, &pos, &in->mime) != 0) {
        *why = "malformed part header";
        return -1;
    }
    v = fe__hdr_get(&in->mime, "Content-Type");
    if (!v) {
        *why = "part without Content-Type";
        return -1;
    }
    ct = *v;
    if (fe__ctype(ct, &type, &bnd) != 0 || !fe__ieq(type, "application/http")) {
        *why = "part is not application/http";
        return -1;
    }
    /* Tolerate blank lines before the request line. */
    do {
        if (!fe__line(part, &pos, &line)) {
            *why = "part without a request line";
            return -1;
        }
    } while (line.n == 0);
    /* VERB SP URL SP HTTP/1.x */
    sp1 = memchr(line.p, ' ', line.n);
    if (!sp1) {
        *why = "malformed request line";
        return -1;
    }
    in->verb = fe__span_of(line.p, (size_t)(sp1 - line.p));
    sp2 = memchr(sp1 + 1, ' ', line.n - (size_t)(sp1 + 1 - line.p));
    if (!sp2) {
        *why = "request line without HTTP version";
        return -1;
    }
    in->url = fe__span_of(sp1 + 1, (size_t)(sp2 - sp1 - 1));
    {
        struct fe__span ver =
            fe__span_of(sp2 + 1, line.n - (size_t)(sp2 + 1 - line.p));
        if (in->verb.n == 0 || in->url.n == 0 || ver.n < 8 ||
            strncmp(ver.p, "HTTP/1.", 7) != 0 || memchr(ver.p, ' ', ver.n)) {
            *why = "malformed request line";
            return -1;
        }
    }
    if (fe__headers(part, &pos, &in->hdrs) != 0) {
        *why = "malformed request header";
        return -1;
    }
    in->body = fe__span_of(part.p + pos, part.n - pos);
    return 0;
}

/* The Content-ID of a part: the MIME header (Python, .NET), else one in
 * the inner request (some clients). NULL when none. */
static const struct fe__span *fe__content_id(const struct fe__inner *in)
{
    const struct fe__span *v = fe__hdr_get(&in->mime, "Content-ID");
    return v ? v : fe__hdr_get(&in->hdrs, "Content-ID");
}

/* ---- Operations ----------------------------------------------------- */

void fe_batch_init(struct fe_batch *b)
{
    memset(b, 0, sizeof(*b));
    b->index = -1;
}

void fe_batch_free(struct fe_batch *b)
{
    for (size_t i = 0; i < b->nops; i++) {
        struct fe_batch_op *op = &b->ops[i];
        free(op->content_id);
        free(op->table);
        free(op->pk);
        free(op->rk);
        rt_buf_free(&op->props);
    }
    free(b->ops);
    free(b->fail_cid);
    b->ops = NULL;
    b->nops = 0;
    b->fail_cid = NULL;
}

static int fe__fail(struct fe_batch *b,
                    int code,
                    int index,
                    const char *msg,
                    const char *why)
{
    b->code = code;
    b->index = index;
    b->msg = msg;
    if (index >= 0) {
        snprintf(b->errmsg, sizeof(b->errmsg), "operation %d: %s", index,
                 why ? why : "");
    } else {
        snprintf(b->errmsg, sizeof(b->errmsg), "%s", why ? why : "");
    }
    return code;
}

/* Inner header value as a C string in @tmp (reset first); NULL when
 * absent. */
static const char *fe__hval(const struct fe__hdrs *h,
                            const char *name,
                            struct rt_buf *tmp)
{
    const struct fe__span *v = fe__hdr_get(h, name);
    rt_buf_reset(tmp);
    if (!v) {
        return NULL;
    }
    rt_buf_append(tmp, v->p, v->n);
    return rt_buf_cstr(tmp);
}

/* Inner URL -> "/{acct_seg}/{resource}" for fe_path_parse: drop scheme and
 * host of an absolute URL and everything from '?' or '#'; a path whose
 * first segment is the account keeps it, any other path (host-style, or
 * relative to the service root) gets the account put in front. */
static void fe__inner_path(struct fe__span url,
                           const char *acct_seg,
                           struct rt_buf *out)
{
    struct fe__span p = url;
    size_t alen = strlen(acct_seg);
    const char *cut;

    if ((p.n >= 7 && strncasecmp(p.p, "http://", 7) == 0) ||
        (p.n >= 8 && strncasecmp(p.p, "https://", 8) == 0)) {
        size_t skip = p.p[4] == ':' ? 7 : 8;
        const char *host = p.p + skip;
        size_t left = p.n - skip;
        const char *slash = memchr(host, '/', left);
        p = slash ? fe__span_of(slash, left - (size_t)(slash - host))
                  : fe__span_of("/", 1);
    }
    cut = memchr(p.p, '?', p.n);
    if (cut) {
        p.n = (size_t)(cut - p.p);
    }
    cut = memchr(p.p, '#', p.n);
    if (cut) {
        p.n = (size_t)(cut - p.p);
    }
    rt_buf_reset(out);
    if (p.n && p.p[0] == '/' && p.n >= 1 + alen &&
        strncasecmp(p.p + 1, acct_seg, alen) == 0 &&
        (p.n == 1 + alen || p.p[1 + alen] == '/')) {
        rt_buf_append_u8(out, '/');
        rt_buf_append_str(out, acct_seg);
        rt_buf_append(out, p.p + 1 + alen, p.n - 1 - alen);
        return;
    }
    rt_buf_append_u8(out, '/');
    rt_buf_append_str(out, acct_seg);
    if (!p.n || p.p[0] != '/') {
        rt_buf_append_u8(out, '/');
    }
    rt_buf_append(out, p.p, p.n);
}

/* Builds and validates operation @i (already appended to b->ops) from
 * @in. Returns 0 or the failing code (b->code etc. set). */
static int fe__op_build(struct fe_batch *b,
                        size_t i,
                        const struct fe__inner *in,
                        const char *acct_seg,
                        const char *version,
                        struct rt_buf *tmp)
{
    struct fe_batch_op *op = &b->ops[i];
    const struct fe__span *cid = fe__content_id(in);
    struct fe__span verb = in->verb;
    struct fe_path path;
    struct fe_entity_in ent;
    char errmsg[RT_ERRMSG_SIZE] = "";
    const char *v;
    int rc = 0, idx = (int)i, vi;

    if (cid) {
        op->content_id = fe__dup(*cid);
    }
    /* Known before any rule can fail, so a failure part has the form the
     * client reads (AtomPub, spec §10). */
    {
        char *accept = NULL;
        v = fe__hval(&in->hdrs, "Accept", tmp);
        accept = v ? fe__strdup(v) : NULL;
        v = fe__hval(&in->hdrs, "Content-Type", tmp);
        op->atom = fe_hdr_atom(accept, NULL, v, version);
        free(accept);
    }
    /* The verb, with POST + X-HTTP-Method tunnelling (§2). */
    v = fe__hval(&in->hdrs, "X-HTTP-Method", tmp);
    if (v) {
        /* The standalone codes (spec §8.2). */
        if (!fe__eq(verb, "POST")) {
            return fe__fail(b, RT_EXMETHODPOST, idx, NULL,
                            "X-HTTP-Method on a non-POST");
        }
        if (strcmp(v, "MERGE") != 0 && strcmp(v, "PUT") != 0 &&
            strcmp(v, "DELETE") != 0) {
            return fe__fail(b, RT_EXMETHODVALUE, idx, NULL,
                            "bad X-HTTP-Method");
        }
        verb = fe__span_of(strcmp(v, "MERGE") == 0 ? "MERGE"
                           : strcmp(v, "PUT") == 0 ? "PUT"
                                                   : "DELETE",
                           strlen(v));
    }
    vi = fe_op_verb_of(verb.p, verb.n);
    if (vi < 0) {
        return fe__fail(b, RT_EVERB, idx, NULL, "unsupported verb");
    }
    op->verb = (enum fe_op_verb)vi;
    if (b->changeset && op->verb == FE_OP_GET) {
        return fe__fail(b, RT_EINVAL, idx, NULL, "GET inside a changeset");
    }
    if (!b->changeset && op->verb != FE_OP_GET) {
        return fe__fail(b, RT_EINVAL, -1, NULL, "a write outside a changeset");
    }

    /* The URL. */
    fe__inner_path(in->url, acct_seg, tmp);
    fe_path_init(&path);
    rc = fe_path_parse((const char *)tmp->data, tmp->len, &path);
    if (rc != 0) {
        const char *m = path.errmsg;
        fe_path_free(&path);
        return fe__fail(b, rc, idx, m, "bad URL");
    }
    if (path.kind != FE_RES_TABLE && path.kind != FE_RES_ENTITY) {
        fe_path_free(&path);
        return fe__fail(b, RT_EURI, idx, NULL, "URL is not an entity");
    }
    if ((op->verb == FE_OP_INSERT) != (path.kind == FE_RES_TABLE)) {
        fe_path_free(&path);
        return fe__fail(b, RT_EMETHOD, idx, NULL, "verb does not fit URL");
    }
    op->table = fe__strdup(path.table);
    if (i > 0 && strcasecmp(op->table, b->ops[0].table) != 0) {
        fe_path_free(&path);
        return fe__fail(b, RT_EDIFFPARTITIONS, idx, NULL, "another table");
    }
    if (op->verb != FE_OP_INSERT) {
        rc = fe_odata_check_keys(path.pk, path.pklen, path.rk, path.rklen, 0);
        if (rc != 0) {
            fe_path_free(&path);
            return fe__fail(b, rc, idx, NULL, "bad key in URL");
        }
        op->pk = fe__strdup(path.pk);
        op->rk = fe__strdup(path.rk);
    }
    fe_path_free(&path);

    /* If-Match, with the standalone rules (§3.12-3.14); an insert's is
     * ignored. */
    v = NULL;
    if (op->verb == FE_OP_PUT || op->verb == FE_OP_MERGE ||
        op->verb == FE_OP_DELETE) {
        v = fe__hval(&in->hdrs, "If-Match", tmp);
        if (v) {
            /* fe_hdr_if_match, as for a standalone request: empty -> 412,
             * not a weak ETag -> 400, a weak ETag we could not have issued
             * (W/"0x8D...") -> matches nothing (412 from the server). */
            rc = fe_hdr_if_match(v, &op->if_match, &op->if_match_any);
            if (rc != 0) {
                return fe__fail(
                    b, rc, idx, NULL,
                    rc == RT_EPRECOND ? "empty If-Match" : "bad If-Match");
            }
            if (op->if_match_any) {
                op->if_match = 0;
            }
        }
    }
    /* The kind from the one table single requests use (fe_op.h), under
     * the batch request's x-ms-version: DELETE without If-Match, and an
     * upsert before 2011-08-18, fail this operation with the code the
     * standalone request gets. */
    if (op->verb != FE_OP_GET) {
        rc = fe_op_kind(op->verb, v != NULL, version, &op->kind);
        if (rc != 0) {
            return fe__fail(b, rc, idx, NULL,
                            op->verb == FE_OP_DELETE
                                ? "DELETE without If-Match"
                                : "upsert before " FE_VERSION_UPSERT);
        }
    }

    /* The entity. */
    if (op->verb == FE_OP_INSERT || op->verb == FE_OP_PUT ||
        op->verb == FE_OP_MERGE) {
        int atom_body;
        v = fe__hval(&in->hdrs, "Content-Type", tmp);
        atom_body = fe_hdr_body_atom(v, version);
        rc = atom_body ? 0 : fe_hdr_body_type(v);
        if (rc != 0) {
            return fe__fail(b, rc, idx, NULL, "body media type");
        }
        fe_entity_in_init(&ent);
        rc = atom_body ? fe_atom_parse_entity(in->body.n ? in->body.p : "",
                                              in->body.n, &ent, errmsg)
                       : fe_odata_parse_entity(in->body.n ? in->body.p : "",
                                               in->body.n, &ent, errmsg);
        if (rc != 0) {
            fe_entity_in_free(&ent);
            fe__fail(b, rc, idx, NULL, "entity rejected");
            rt_log(RT_LOG_DEBUG, "batch operation %d: %s", idx, errmsg);
            return rc;
        }
        if (op->verb == FE_OP_INSERT) {
            if (!ent.pk || !ent.rk) {
                fe_entity_in_free(&ent);
                return fe__fail(b, RT_ENEEDVALUE, idx, NULL,
                                "insert without keys");
            }
            rc = fe_odata_check_keys(ent.pk, strlen(ent.pk), ent.rk,
                                     strlen(ent.rk), 1);
            if (rc != 0) {
                fe_entity_in_free(&ent);
                return fe__fail(b, rc, idx, NULL, "bad key in body");
            }
            op->pk = ent.pk;
            op->rk = ent.rk;
            ent.pk = NULL;
            ent.rk = NULL;
        }
        /* Keys of updates come from the URL (URL wins, as standalone). */
        op->props = ent.props;
        rt_buf_init(&ent.props);
        fe_entity_in_free(&ent);
    }

    /* One entity group, each entity once (§5.2). */
    if (i > 0 && strcmp(op->pk, b->ops[0].pk) != 0) {
        return fe__fail(b, RT_EDIFFPARTITIONS, idx, NULL,
                        "another PartitionKey");
    }
    for (size_t j = 0; j < i; j++) {
        if (strcmp(op->rk, b->ops[j].rk) == 0 &&
            strcmp(op->pk, b->ops[j].pk) == 0) {
            return fe__fail(b, RT_EDUPROW, idx, NULL, "row repeated");
        }
    }

    op->prefer = fe_hdr_prefer(fe__hval(&in->hdrs, "Prefer", tmp));
    v = fe__hval(&in->hdrs, "Accept", tmp);
    if (v && fe_hdr_meta(v, NULL, &op->meta) == 0) {
        op->has_meta = 1;
    }
    return 0;
}

static struct fe_batch_op *fe__op_add(struct fe_batch *b, size_t cap)
{
    struct fe_batch_op *op;
    if (!b->ops) {
        b->ops = rt_xcalloc(cap, sizeof(*b->ops));
    }
    op = &b->ops[b->nops++];
    memset(op, 0, sizeof(*op));
    rt_buf_init(&op->props);
    return op;
}

int fe_batch_parse(const char *content_type,
                   const char *acct_seg,
                   const char *version,
                   const uint8_t *body,
                   size_t len,
                   struct fe_batch *b)
{
    struct fe__span all = fe__span_of((const char *)body, body ? len : 0);
    struct fe__span type, bnd, outer[2], cs, cs_type, cs_bnd;
    struct fe__span parts[FE_BATCH_MAX_OPS + 1];
    struct fe__inner *in = NULL;
    struct fe__hdrs *mime = NULL;
    struct rt_buf tmp = RT_BUF_INIT;
    const struct fe__span *v;
    const char *why = NULL;
    size_t n, pos = 0;
    int rc = 0;

    if (len > FE_BATCH_MAX_BODY) {
        return fe__fail(b, RT_ETOOLARGE, -1, NULL, "body over 4 MiB");
    }
    if (!body) {
        all = fe__span_of("", 0);
    }
    if (!content_type ||
        fe__ctype(fe__span_of(content_type, strlen(content_type)), &type,
                  &bnd) != 0 ||
        !fe__ieq(type, "multipart/mixed") || bnd.n == 0) {
        return fe__fail(b, RT_EINVAL, -1, NULL,
                        "Content-Type is not multipart/mixed with a "
                        "boundary");
    }
    if (fe__mp_split(all, bnd, outer, 2, &n) != 0) {
        return fe__fail(b, RT_EINVAL, -1, NULL,
                        "malformed or truncated batch multipart");
    }
    if (n != 1) {
        return fe__fail(b, RT_EINVAL, -1, NULL,
                        n ? "more than one part in the batch (several "
                            "changesets, or a GET mixed with writes)"
                          : "empty batch");
    }
    in = rt_xmalloc(sizeof(*in));
    mime = rt_xmalloc(sizeof(*mime));
    if (fe__headers(outer[0], &pos, mime) != 0 ||
        !(v = fe__hdr_get(mime, "Content-Type"))) {
        rc = fe__fail(b, RT_EINVAL, -1, NULL, "malformed batch part");
        goto out;
    }
    if (fe__ctype(*v, &cs_type, &cs_bnd) != 0) {
        rc = fe__fail(b, RT_EINVAL, -1, NULL, "malformed part Content-Type");
        goto out;
    }

    if (fe__ieq(cs_type, "application/http")) {
        /* A single bare request: must be a GET of one entity. */
        b->changeset = 0;
        if (fe__inner_parse(outer[0], in, &why) != 0) {
            rc = fe__fail(b, RT_EINVAL, -1, NULL, why);
            goto out;
        }
        fe__op_add(b, 1);
        rc = fe__op_build(b, 0, in, acct_seg, version, &tmp);
        goto out;
    }
    if (!fe__ieq(cs_type, "multipart/mixed") || cs_bnd.n == 0) {
        rc = fe__fail(b, RT_EINVAL, -1, NULL,
                      "batch part is neither a changeset nor "
                      "application/http");
        goto out;
    }
    b->changeset = 1;
    cs = fe__span_of(outer[0].p + pos, outer[0].n - pos);
    if (fe__mp_split(cs, cs_bnd, parts, FE_BATCH_MAX_OPS + 1, &n) != 0) {
        rc = fe__fail(b, RT_EINVAL, -1, NULL,
                      "malformed or truncated changeset multipart");
        goto out;
    }
    if (n == 0) {
        rc = fe__fail(b, RT_EINVAL, -1, NULL, "empty changeset");
        goto out;
    }
    if (n > FE_BATCH_MAX_OPS) {
        if (fe__inner_parse(parts[FE_BATCH_TOO_MANY_INDEX], in, &why) == 0 &&
            (v = fe__content_id(in)) != NULL) {
            b->fail_cid = fe__dup(*v);
        }
        rc = fe__fail(b, RT_EINVAL, FE_BATCH_TOO_MANY_INDEX,
                      FE_BATCH_MSG_TOO_MANY, "more than 100 operations");
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        if (fe__inner_parse(parts[i], in, &why) != 0) {
            rc = fe__fail(b, RT_EINVAL, -1, NULL, why);
            goto out;
        }
        fe__op_add(b, n);
        rc = fe__op_build(b, i, in, acct_seg, version, &tmp);
        if (rc != 0) {
            goto out;
        }
    }

out:
    if (rc != 0 && b->index >= 0 && (size_t)b->index < b->nops &&
        !b->fail_cid && b->ops[b->index].content_id) {
        b->fail_cid = fe__strdup(b->ops[b->index].content_id);
    }
    rt_buf_free(&tmp);
    free(in);
    free(mime);
    return rc;
}

/* ---- Response writer ------------------------------------------------ */

static void fe__hline(struct rt_buf *o, const char *name, const char *val)
{
    rt_buf_append_str(o, name);
    rt_buf_append_str(o, ": ");
    rt_buf_append_str(o, val);
    rt_buf_append_str(o, "\r\n");
}

/* A multipart delimiter line: --{prefix}{id}, and "--" after it on the
 * @last one (RFC 2046 §5.1.1). */
static void fe__boundary(struct rt_buf *o,
                         const char *prefix,
                         const char *id,
                         int last)
{
    rt_buf_append_str(o, "--");
    rt_buf_append_str(o, prefix);
    rt_buf_append_str(o, id);
    rt_buf_append_str(o, last ? "--\r\n" : "\r\n");
}

static void fe__part_write(struct rt_buf *o,
                           const char *prefix,
                           const char *id,
                           const struct fe_batch_part *p)
{
    fe__boundary(o, prefix, id, 0);
    rt_buf_append_str(o,
                      "Content-Type: application/http\r\n"
                      "Content-Transfer-Encoding: binary\r\n\r\n");
    rt_buf_printf(o, "HTTP/1.1 %d %s\r\n", p->status,
                  rt_http_reason(p->status));
    if (p->content_id) {
        fe__hline(o, "Content-ID", p->content_id);
    }
    rt_buf_append_str(o,
                      "X-Content-Type-Options: nosniff\r\n"
                      "Cache-Control: no-cache\r\n");
    if (p->preference_applied) {
        fe__hline(o, "Preference-Applied", p->preference_applied);
    }
    fe__hline(o, "DataServiceVersion", p->dsv ? p->dsv : "3.0;");
    if (p->content_type) {
        fe__hline(o, "Content-Type", p->content_type);
    }
    if (p->location) {
        fe__hline(o, "Location", p->location);
        fe__hline(o, "DataServiceId", p->location);
    }
    if (p->etag) {
        fe__hline(o, "ETag", p->etag);
    }
    rt_buf_append_str(o, "\r\n");
    if (p->content_type && p->body_len) {
        rt_buf_append(o, p->body, p->body_len);
    }
    rt_buf_append_str(o, "\r\n");
}

void fe_batch_write(struct rt_buf *out,
                    const char *batch_id,
                    const char *changeset_id,
                    const struct fe_batch_part *parts,
                    size_t n)
{
    if (changeset_id) {
        fe__boundary(out, "batchresponse_", batch_id, 0);
        rt_buf_append_str(out,
                          "Content-Type: multipart/mixed; "
                          "boundary=changesetresponse_");
        rt_buf_append_str(out, changeset_id);
        rt_buf_append_str(out, "\r\n\r\n");
        for (size_t i = 0; i < n; i++) {
            fe__part_write(out, "changesetresponse_", changeset_id, &parts[i]);
        }
        fe__boundary(out, "changesetresponse_", changeset_id, 1);
    } else {
        for (size_t i = 0; i < n; i++) {
            fe__part_write(out, "batchresponse_", batch_id, &parts[i]);
        }
    }
    fe__boundary(out, "batchresponse_", batch_id, 1);
}

void fe_batch_error_json(struct rt_buf *out,
                         int atom,
                         int code,
                         int index,
                         const char *msg,
                         const char *reqid,
                         const char *when)
{
    struct rt_buf text = RT_BUF_INIT;
    const char *azure = rt_err_azure_code(code);
    rt_buf_printf(&text, "%d:%s\nRequestId:%s\nTime:%s", index,
                  msg ? msg : rt_err_client_message(code), reqid, when);
    if (atom) {
        fe_atom_write_error(out, azure, rt_buf_cstr(&text));
        rt_buf_free(&text);
        return;
    }
    rt_buf_append_str(out, "{\"odata.error\":{\"code\":\"");
    fe_json_escape(out, azure, strlen(azure));
    rt_buf_append_str(out, "\",\"message\":{\"lang\":\"en-US\",\"value\":\"");
    fe_json_escape(out, (const char *)text.data, text.len);
    rt_buf_append_str(out, "\"}}}");
    rt_buf_free(&text);
}

/* ---- The $batch operation (fe_api.c) -------------------------------- */

/* What finish needs per op besides the job, one record per op in req->s2;
 * strings in req->s1. */
struct fe__side
{
    uint32_t cid_off; /* into req->s1; FE__NO_CID when none */
    uint8_t verb;
    uint8_t prefer;
    uint8_t has_meta;
    uint8_t meta;
    uint8_t atom;
};
#define FE__NO_CID UINT32_MAX

static const char *fe__ct_for(enum fe_meta m)
{
    return m == FE_META_NONE   ? FE__JSON_CT_NONE
           : m == FE_META_FULL ? FE__JSON_CT_FULL
                               : FE__JSON_CT_MINIMAL;
}

/* The 202 response: sets the status and the multipart Content-Type. */
static void fe__respond_parts(struct fe_req *req,
                              int changeset,
                              const struct fe_batch_part *parts,
                              size_t n)
{
    char bid[FE_GUID_SIZE];
    char csid[FE_GUID_SIZE];
    struct rt_buf ct = RT_BUF_INIT;

    fe_hdr_guid(bid);
    fe_hdr_guid(csid);
    rt_buf_reset(&req->rbody);
    rt_buf_reset(&req->hdrs);
    fe_batch_write(&req->rbody, bid, changeset ? csid : NULL, parts, n);
    rt_buf_printf(&ct, "multipart/mixed; boundary=batchresponse_%s", bid);
    fe_req_resp_header(req, "Content-Type", rt_buf_cstr(&ct));
    rt_buf_free(&ct);
    req->status = 202;
}

/* 202 with the single failure part of §5.4. */
static void fe__respond_failure(struct fe_req *req,
                                int changeset,
                                int atom,
                                int code,
                                int index,
                                const char *msg,
                                const char *cid)
{
    struct fe_batch_part part;
    struct rt_buf json = RT_BUF_INIT;
    char when[RT_TIME_ISO_SIZE];

    rt_time_format_iso7(rt_time_now_ticks(), when);
    fe_batch_error_json(&json, atom, code, index, msg, req->reqid, when);
    memset(&part, 0, sizeof(part));
    part.status = rt_err_http_status(code);
    part.content_id = cid;
    part.content_type = atom ? FE_ATOM_CT_ERROR : FE__JSON_CT_MINIMAL;
    part.dsv = atom ? "1.0;" : NULL;
    part.body = json.data;
    part.body_len = json.len;
    fe__respond_parts(req, changeset, &part, 1);
    rt_buf_free(&json);
    rt_log(part.status == 404 || part.status == 409 || part.status == 412
               ? RT_LOG_DEBUG
               : RT_LOG_INFO,
           "%s %s -> 202, operation %d failed: %d %s", req->method,
           req->raw_path, index, part.status, rt_err_azure_code(code));
}

static void fe__side_append(struct fe_req *req,
                            size_t off,
                            const struct fe_batch_op *op)
{
    struct fe__side s;
    memset(&s, 0, sizeof(s));
    s.cid_off = op->content_id ? (uint32_t)off : FE__NO_CID;
    s.verb = (uint8_t)op->verb;
    s.prefer = (uint8_t)op->prefer;
    s.has_meta = (uint8_t)op->has_meta;
    s.meta = (uint8_t)op->meta;
    s.atom = (uint8_t)op->atom;
    rt_buf_append(&req->s2, &s, sizeof(s));
}

int fe_batch_prepare(struct fe_req *req)
{
    struct fe_batch b;
    size_t table_off, pk_off = 0, rk_off = 0;
    size_t *cid_offs;
    int rc;

    fe_batch_init(&b);
    rc = fe_batch_parse(fe_req_header(req, "Content-Type"), req->path.acct_seg,
                        req->xms_version, req->body.data, req->body.len, &b);
    if (rc != 0) {
        rt_log(RT_LOG_DEBUG, "batch rejected: %s", b.errmsg);
        if (b.index < 0) {
            fe_req_resp_error(req, b.code, b.msg);
        } else {
            int atom =
                (size_t)b.index < b.nops ? b.ops[b.index].atom : req->atom;
            fe__respond_failure(req, b.changeset, atom, b.code, b.index, b.msg,
                                b.fail_cid);
        }
        fe_batch_free(&b);
        return FE_API_RESPOND;
    }

    /* Strings first (offsets stay valid), then pointers into req->s1. */
    rt_buf_reset(&req->s1);
    rt_buf_reset(&req->s2);
    cid_offs = rt_xcalloc(b.nops, sizeof(*cid_offs));
    table_off = req->s1.len;
    rt_buf_append(&req->s1, b.ops[0].table, strlen(b.ops[0].table) + 1);
    if (!b.changeset) {
        pk_off = req->s1.len;
        rt_buf_append(&req->s1, b.ops[0].pk, strlen(b.ops[0].pk) + 1);
        rk_off = req->s1.len;
        rt_buf_append(&req->s1, b.ops[0].rk, strlen(b.ops[0].rk) + 1);
    }
    for (size_t i = 0; i < b.nops; i++) {
        cid_offs[i] = req->s1.len;
        if (b.ops[i].content_id) {
            rt_buf_append(&req->s1, b.ops[i].content_id,
                          strlen(b.ops[i].content_id) + 1);
        }
        fe__side_append(req, cid_offs[i], &b.ops[i]);
    }
    free(cid_offs);

    if (!b.changeset) {
        fe_req_job_kind(req, FE_JOB_GET);
        req->job.pk = (const char *)req->s1.data + pk_off;
        req->job.rk = (const char *)req->s1.data + rk_off;
    } else {
        fe_req_job_kind(req, FE_JOB_WRITE);
        req->job.atomic = 1;
        for (size_t i = 0; i < b.nops; i++) {
            struct fe_batch_op *o = &b.ops[i];
            struct fe_job_op *jo =
                fe_job_add_op(&req->job, o->kind, o->pk, o->rk);
            jo->if_match_any = o->if_match_any;
            jo->if_match = o->if_match;
            jo->props = o->props; /* moved */
            rt_buf_init(&o->props);
        }
    }
    req->job.account = req->path.account;
    req->job.table = (const char *)req->s1.data + table_off;
    fe_batch_free(&b);
    return FE_API_SUBMIT;
}

static const struct fe__side *fe__sides(struct fe_req *req, size_t *n)
{
    *n = req->s2.len / sizeof(struct fe__side);
    return (const struct fe__side *)req->s2.data;
}

static const char *fe__side_cid(struct fe_req *req, const struct fe__side *s)
{
    return s->cid_off == FE__NO_CID ? NULL
                                    : (const char *)req->s1.data + s->cid_off;
}

static void fe__odata_ctx(struct fe_req *req,
                          const struct fe__side *s,
                          struct fe_odata_ctx *ctx)
{
    memset(ctx, 0, sizeof(*ctx));
    ctx->root = req->root;
    ctx->account = req->path.account;
    ctx->table = req->job.table_name ? req->job.table_name : req->job.table;
    ctx->meta = s->has_meta ? (enum fe_meta)s->meta : req->meta;
}

/* Single-GET batch: 200 with the entity, directly in the batch. */
static void fe__finish_get(struct fe_req *req, const struct fe__side *s)
{
    struct fe_batch_part part;
    struct fe_odata_ctx ctx;
    struct rt_buf json = RT_BUF_INIT;
    char etag[64];

    fe__odata_ctx(req, s, &ctx);
    if (fe_odata_write_one(&json, &ctx, req->job.pk, req->job.rk,
                           req->job.value.data, req->job.value.len,
                           etag) != 0) {
        rt_buf_free(&json);
        fe_req_resp_error(req, RT_EINTERNAL, NULL);
        return;
    }
    if (s->atom) {
        /* The ETag came with the JSON; the Atom entry replaces it. */
        rt_buf_reset(&json);
        if (fe_atom_write_entry(&json, &ctx, req->job.pk, strlen(req->job.pk),
                                req->job.rk, strlen(req->job.rk),
                                req->job.value.data, req->job.value.len,
                                1) != 0) {
            rt_buf_free(&json);
            fe_req_resp_error(req, RT_EINTERNAL, NULL);
            return;
        }
    }
    memset(&part, 0, sizeof(part));
    part.status = 200;
    part.content_id = fe__side_cid(req, s);
    part.content_type = s->atom ? FE_ATOM_CT_ENTRY : fe__ct_for(ctx.meta);
    part.dsv = s->atom ? "1.0;" : NULL;
    part.etag = etag;
    part.body = json.data;
    part.body_len = json.len;
    fe__respond_parts(req, 0, &part, 1);
    rt_buf_free(&json);
}

/* Changeset: one part per op, in request order (§5.3). */
static void fe__finish_writes(struct fe_req *req,
                              const struct fe__side *s,
                              size_t n)
{
    struct fe_batch_part *parts = rt_xcalloc(n, sizeof(*parts));
    struct rt_buf *locs = rt_xcalloc(n, sizeof(*locs));
    struct rt_buf *bodies = rt_xcalloc(n, sizeof(*bodies));
    char(*etags)[64] = rt_xcalloc(n, sizeof(*etags));
    int failed = 0;

    for (size_t i = 0; i < n && i < req->job.nops; i++) {
        const struct fe_job_op *op = &req->job.ops[i];
        struct fe_batch_part *p = &parts[i];
        p->content_id = fe__side_cid(req, &s[i]);
        p->status = 204;
        p->dsv = s[i].atom ? "1.0;" : NULL;
        if (op->kind != RT__OP_KIND__OP_DELETE) {
            fe_odata_etag(op->ticks, etags[i]);
            p->etag = etags[i];
        }
        if (op->kind != RT__OP_KIND__OP_INSERT) {
            continue;
        }
        fe_odata_entity_path(
            &locs[i], req->root,
            req->job.table_name ? req->job.table_name : req->job.table, op->pk,
            op->rk);
        p->location = rt_buf_cstr(&locs[i]);
        p->preference_applied =
            fe_hdr_prefer_applied((enum fe_prefer)s[i].prefer);
        if (s[i].prefer == FE_PREFER_NO_CONTENT) {
            continue;
        }
        /* The echo of what was stored. */
        {
            struct fe_odata_ctx ctx;
            fe__odata_ctx(req, &s[i], &ctx);
            if ((s[i].atom ? fe_atom_write_inserted(
                                 &bodies[i], &ctx, op->pk, op->rk, op->ticks,
                                 op->props.data, op->props.len)
                           : fe_odata_write_inserted(
                                 &bodies[i], &ctx, op->pk, op->rk, op->ticks,
                                 op->props.data, op->props.len)) != 0) {
                failed = 1;
                break;
            }
            p->status = 201;
            p->content_type =
                s[i].atom ? FE_ATOM_CT_ENTRY : fe__ct_for(ctx.meta);
            p->body = bodies[i].data;
            p->body_len = bodies[i].len;
        }
    }
    if (failed || req->job.nops != n) {
        fe_req_resp_error(req, RT_EINTERNAL, NULL);
    } else {
        fe__respond_parts(req, 1, parts, n);
    }
    for (size_t i = 0; i < n; i++) {
        rt_buf_free(&locs[i]);
        rt_buf_free(&bodies[i]);
    }
    free(parts);
    free(locs);
    free(bodies);
    free(etags);
}

void fe_batch_finish(struct fe_req *req)
{
    size_t n;
    const struct fe__side *s = fe__sides(req, &n);
    int changeset = req->job.kind == FE_JOB_WRITE;
    int code = req->job.status;
    int idx;

    if (code != 0) {
        if (!rt_err_is_rt(code) || rt_err_http_status(code) >= 500 || n == 0) {
            /* Nothing to blame on an operation: the plain error. */
            if (!rt_err_is_rt(code)) {
                rt_log(RT_LOG_WARN, "batch on %s: %s",
                       req->job.table ? req->job.table : "-",
                       rt_strerror(code));
            }
            fe_req_resp_error(req, code, NULL);
            return;
        }
        idx = req->job.fail_index;
        if (idx < 0 || (size_t)idx >= n) {
            idx = 0; /* table missing: "0:The table specified ..." */
        }
        fe__respond_failure(req, changeset, s[idx].atom, code, idx, NULL,
                            fe__side_cid(req, &s[idx]));
        return;
    }
    if (n == 0) {
        fe_req_resp_error(req, RT_EINTERNAL, NULL);
        return;
    }
    if (!changeset) {
        fe__finish_get(req, &s[0]);
        return;
    }
    fe__finish_writes(req, s, n);
}
