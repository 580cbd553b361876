/* Table ACLs, service properties and stats, CORS: see fe_svc.h.
 *
 * Happy path of Set Table ACL: fe_svc_set_acl_prepare parses the XML
 * (limits checked here, then again by the master), packs an rt.AclReq into
 * req->s1 and submits an FE_JOB_MASTER_CALL (SET_ACL); the master commits,
 * pushes the new map (fe_route installs it and calls fe_svc_map_update, so
 * this front end sees the policy before the reply) and replies; the finish
 * step answers 204. Get/Set Service Properties work the same way with
 * GET/SET_SERVICE_PROPS; Get Table ACL with GET_ACL.
 *
 * Failure modes: malformed XML or a broken limit -> 400 InvalidXmlDocument
 * before any RPC; a missing table -> 404 TableNotFound; master unreachable
 * -> 503 ServerBusy; all in the storage XML error shape (spec §8.1). */
#include "fe_svc.h"

#include <ctype.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "fe_internal.h"
#include "rt_alloc.h"
#include "rt_err.h"
#include "rt_log.h"
#include "rt_text.h"
#include "rt_time.h"
#include "rt_utf8.h"

#define FE_XML_CT "application/xml"
#define FE_XML_DECL "<?xml version=\"1.0\" encoding=\"utf-8\"?>"
#define FE_MSG_CORS_HEADER "A required CORS header is not present."

/* ==== The policy snapshot ============================================= */

struct fe__tacl
{
    char *account;
    char lname[64];
    size_t n;
    char ids[FE_ACL_MAX][FE_ACL_ID_MAX + 1];
    struct fe_sas_policy pol[FE_ACL_MAX];
};

struct fe__acors
{
    char *account;
    size_t n;
    Rt__CorsRule rules[FE_CORS_MAX];
    Rt__CorsRule *rulep[FE_CORS_MAX];
};

struct fe__snap
{
    struct fe__tacl *acls; /* by (account, lname) */
    size_t nacls;
    struct fe__acors *cors; /* by account */
    size_t ncors;
    uint64_t version; /* the map's */
};

static pthread_rwlock_t fe__snap_lock = PTHREAD_RWLOCK_INITIALIZER;
static struct fe__snap *fe__snap;

static void fe__snap_free(struct fe__snap *s)
{
    if (!s) {
        return;
    }
    for (size_t i = 0; i < s->nacls; i++) {
        free(s->acls[i].account);
    }
    for (size_t i = 0; i < s->ncors; i++) {
        free(s->cors[i].account);
        for (size_t j = 0; j < s->cors[i].n; j++) {
            free(s->cors[i].rules[j].allowed_origins);
            free(s->cors[i].rules[j].allowed_methods);
            free(s->cors[i].rules[j].allowed_headers);
            free(s->cors[i].rules[j].exposed_headers);
        }
    }
    free(s->acls);
    free(s->cors);
    free(s);
}

static int fe__tacl_cmp(const void *a, const void *b)
{
    const struct fe__tacl *x = a, *y = b;
    int c = strcmp(x->account, y->account);
    return c ? c : strcmp(x->lname, y->lname);
}

static int fe__acors_cmp(const void *a, const void *b)
{
    return strcmp(((const struct fe__acors *)a)->account,
                  ((const struct fe__acors *)b)->account);
}

static void fe__lower(char *dst, size_t cap, const char *src)
{
    size_t i = 0;
    for (; src[i] && i + 1 < cap; i++) {
        dst[i] = (char)tolower((unsigned char)src[i]);
    }
    dst[i] = '\0';
}

void fe_svc_map_update(const Rt__Map *map)
{
    struct fe__snap *s = rt_xcalloc(1, sizeof(*s));
    struct fe__snap *old;
    size_t nacl = 0;
    for (size_t i = 0; i < map->n_tables; i++) {
        nacl += map->tables[i]->n_acl ? 1 : 0;
    }
    s->acls = rt_xcalloc(nacl, sizeof(*s->acls));
    s->cors = rt_xcalloc(map->n_accounts, sizeof(*s->cors));
    for (size_t i = 0; i < map->n_tables; i++) {
        const Rt__Table *t = map->tables[i];
        struct fe__tacl *a;
        if (!t->n_acl || strlen(t->name) >= sizeof(a->lname)) {
            continue;
        }
        a = &s->acls[s->nacls++];
        a->account = rt_xstrdup(t->account);
        fe__lower(a->lname, sizeof(a->lname), t->name);
        for (size_t j = 0; j < t->n_acl && a->n < FE_ACL_MAX; j++) {
            const Rt__SignedIdentifier *si = t->acl[j];
            snprintf(a->ids[a->n], sizeof(a->ids[a->n]), "%s",
                     si->id ? si->id : "");
            snprintf(a->pol[a->n].start, sizeof(a->pol[a->n].start), "%s",
                     si->start ? si->start : "");
            snprintf(a->pol[a->n].expiry, sizeof(a->pol[a->n].expiry), "%s",
                     si->expiry ? si->expiry : "");
            snprintf(a->pol[a->n].permission, sizeof(a->pol[a->n].permission),
                     "%s", si->permission ? si->permission : "");
            a->n++;
        }
    }
    qsort(s->acls, s->nacls, sizeof(*s->acls), fe__tacl_cmp);
    for (size_t i = 0; i < map->n_accounts; i++) {
        const Rt__AccountProps *ap = map->accounts[i];
        struct fe__acors *c;
        if (!ap->n_cors) {
            continue;
        }
        c = &s->cors[s->ncors++];
        c->account = rt_xstrdup(ap->account);
        for (size_t j = 0; j < ap->n_cors && c->n < FE_CORS_MAX; j++) {
            Rt__CorsRule *r = &c->rules[c->n];
            rt__cors_rule__init(r);
            r->allowed_origins = rt_xstrdup(ap->cors[j]->allowed_origins);
            r->allowed_methods = rt_xstrdup(ap->cors[j]->allowed_methods);
            r->allowed_headers = rt_xstrdup(ap->cors[j]->allowed_headers);
            r->exposed_headers = rt_xstrdup(ap->cors[j]->exposed_headers);
            r->max_age = ap->cors[j]->max_age;
            c->rulep[c->n] = r;
            c->n++;
        }
    }
    qsort(s->cors, s->ncors, sizeof(*s->cors), fe__acors_cmp);
    s->version = map->version;
    /* Every worker's fe_route installs the maps it receives; they arrive
     * at slightly different times, so an older one must not replace a
     * newer one (equal versions replace: the same map). */
    pthread_rwlock_wrlock(&fe__snap_lock);
    old = fe__snap;
    if (old && map->version < old->version) {
        old = s; /* keep the newer snapshot, drop this one */
    } else {
        fe__snap = s;
    }
    pthread_rwlock_unlock(&fe__snap_lock);
    fe__snap_free(old);
}

void fe_svc_reset(void)
{
    struct fe__snap *old;
    pthread_rwlock_wrlock(&fe__snap_lock);
    old = fe__snap;
    fe__snap = NULL;
    pthread_rwlock_unlock(&fe__snap_lock);
    fe__snap_free(old);
}

int fe_svc_policy_lookup(const char *account,
                         const char *table,
                         const char *id,
                         struct fe_sas_policy *out)
{
    struct fe__tacl key;
    const struct fe__tacl *a = NULL;
    int rc = RT_ENOTFOUND;
    if (!account || !table || !id || strlen(table) >= sizeof(key.lname)) {
        return RT_ENOTFOUND;
    }
    key.account = (char *)account;
    fe__lower(key.lname, sizeof(key.lname), table);
    pthread_rwlock_rdlock(&fe__snap_lock);
    if (fe__snap) {
        a = bsearch(&key, fe__snap->acls, fe__snap->nacls, sizeof(key),
                    fe__tacl_cmp);
    }
    for (size_t i = 0; a && i < a->n; i++) {
        if (strcmp(a->ids[i], id) == 0) {
            *out = a->pol[i];
            rc = 0;
            break;
        }
    }
    pthread_rwlock_unlock(&fe__snap_lock);
    return rc;
}

/* The account's rules; call with the lock held. NULL when none. */
static const struct fe__acors *fe__cors_find(const char *account)
{
    struct fe__acors key;
    if (!fe__snap || !account) {
        return NULL;
    }
    key.account = (char *)account;
    return bsearch(&key, fe__snap->cors, fe__snap->ncors, sizeof(key),
                   fe__acors_cmp);
}

/* ==== XML ============================================================== */

struct fe__xp
{
    const char *p;
    const char *end;
    int nodes;
};

static int fe__xws(char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

static void fe__xskip_ws(struct fe__xp *x)
{
    while (x->p < x->end && fe__xws(*x->p)) {
        x->p++;
    }
}

static int fe__xstarts(const struct fe__xp *x, const char *s)
{
    size_t n = strlen(s);
    return (size_t)(x->end - x->p) >= n && memcmp(x->p, s, n) == 0;
}

/* Skips to just after @term; -1 when it never comes. */
static int fe__xskip_past(struct fe__xp *x, const char *term)
{
    size_t n = strlen(term);
    while ((size_t)(x->end - x->p) >= n) {
        if (memcmp(x->p, term, n) == 0) {
            x->p += n;
            return 0;
        }
        x->p++;
    }
    return -1;
}

static int fe__xname_char(unsigned char c, int first)
{
    if (isalpha(c) || c == '_' || c == ':' || c >= 0x80) {
        return 1;
    }
    return !first && (isdigit(c) || c == '-' || c == '.');
}

/* Reads a name; returns its length (0 = none). */
static size_t fe__xname(struct fe__xp *x, const char **start)
{
    const char *s = x->p;
    if (s >= x->end || !fe__xname_char((unsigned char)*s, 1)) {
        return 0;
    }
    while (x->p < x->end && fe__xname_char((unsigned char)*x->p, 0)) {
        x->p++;
    }
    *start = s;
    return (size_t)(x->p - s);
}

/* At '&': decodes one reference into @b. */
static int fe__xentity(struct fe__xp *x, struct rt_buf *b)
{
    static const struct
    {
        const char *name;
        char c;
    } named[] = {{"lt;", '<'},
                 {"gt;", '>'},
                 {"amp;", '&'},
                 {"quot;", '"'},
                 {"apos;", '\''}};
    x->p++;
    if (x->p < x->end && *x->p == '#') {
        unsigned long cp = 0;
        int hex = 0, digits = 0;
        x->p++;
        if (x->p < x->end && *x->p == 'x') {
            hex = 1;
            x->p++;
        }
        while (x->p < x->end && *x->p != ';') {
            int d;
            char c = *x->p;
            d = hex ? rt_hexval(c) : isdigit((unsigned char)c) ? c - '0' : -1;
            if (d < 0) {
                return -1;
            }
            cp = cp * (hex ? 16 : 10) + (unsigned long)d;
            if (cp > 0x10ffff || ++digits > 8) {
                return -1;
            }
            x->p++;
        }
        if (x->p >= x->end || digits == 0 || cp == 0 ||
            (cp >= 0xd800 && cp <= 0xdfff)) {
            return -1;
        }
        x->p++;
        {
            uint8_t *q = rt_buf_reserve(b, 4);
            b->len += rt_utf8_encode((uint32_t)cp, q);
        }
        return 0;
    }
    for (size_t i = 0; i < sizeof(named) / sizeof(named[0]); i++) {
        if (fe__xstarts(x, named[i].name)) {
            x->p += strlen(named[i].name);
            rt_buf_append_u8(b, (uint8_t)named[i].c);
            return 0;
        }
    }
    return -1;
}

void fe_svc_xml_free(struct fe_xml_node *node)
{
    while (node) {
        struct fe_xml_node *next = node->next;
        fe_svc_xml_free(node->child);
        free(node->name);
        free(node->text);
        free(node);
        node = next;
    }
}

/* At '<' of a start tag. */
static int fe__xelement(struct fe__xp *x, int depth, struct fe_xml_node **out)
{
    struct fe_xml_node *n;
    struct fe_xml_node **tail;
    struct rt_buf text = RT_BUF_INIT;
    const char *name, *local;
    size_t nlen;

    if (depth > FE_XML_DEPTH_MAX || ++x->nodes > FE_XML_NODES_MAX) {
        return -1;
    }
    x->p++;
    nlen = fe__xname(x, &name);
    if (!nlen) {
        return -1;
    }
    n = rt_xcalloc(1, sizeof(*n));
    local = memchr(name, ':', nlen);
    local = local ? local + 1 : name;
    n->name = rt_xmalloc(nlen - (size_t)(local - name) + 1);
    memcpy(n->name, local, nlen - (size_t)(local - name));
    n->name[nlen - (size_t)(local - name)] = '\0';
    tail = &n->child;
    /* Attributes: checked, ignored. */
    for (;;) {
        const char *an;
        int had_ws = x->p < x->end && fe__xws(*x->p);
        char q;
        fe__xskip_ws(x);
        if (x->p >= x->end) {
            goto err;
        }
        if (*x->p == '/' || *x->p == '>') {
            break;
        }
        if (!had_ws || !fe__xname(x, &an)) {
            goto err;
        }
        fe__xskip_ws(x);
        if (x->p >= x->end || *x->p != '=') {
            goto err;
        }
        x->p++;
        fe__xskip_ws(x);
        if (x->p >= x->end || (*x->p != '"' && *x->p != '\'')) {
            goto err;
        }
        q = *x->p++;
        while (x->p < x->end && *x->p != q) {
            if (*x->p == '<') {
                goto err;
            }
            x->p++;
        }
        if (x->p >= x->end) {
            goto err;
        }
        x->p++;
    }
    if (*x->p == '/') {
        x->p++;
        if (x->p >= x->end || *x->p != '>') {
            goto err;
        }
        x->p++;
        n->text = rt_xstrdup("");
        *out = n;
        return 0;
    }
    x->p++; /* '>' */
    for (;;) {
        if (x->p >= x->end) {
            goto err;
        }
        if (fe__xstarts(x, "</")) {
            const char *en;
            size_t elen;
            x->p += 2;
            elen = fe__xname(x, &en);
            if (elen != nlen || memcmp(en, name, nlen) != 0) {
                goto err;
            }
            fe__xskip_ws(x);
            if (x->p >= x->end || *x->p != '>') {
                goto err;
            }
            x->p++;
            break;
        }
        if (fe__xstarts(x, "<!--")) {
            if (fe__xskip_past(x, "-->") != 0) {
                goto err;
            }
            continue;
        }
        if (fe__xstarts(x, "<![CDATA[")) {
            const char *s;
            x->p += 9;
            s = x->p;
            if (fe__xskip_past(x, "]]>") != 0) {
                goto err;
            }
            rt_buf_append(&text, s, (size_t)(x->p - 3 - s));
            continue;
        }
        if (fe__xstarts(x, "<?")) {
            if (fe__xskip_past(x, "?>") != 0) {
                goto err;
            }
            continue;
        }
        if (*x->p == '<') {
            struct fe_xml_node *c = NULL;
            if (fe__xelement(x, depth + 1, &c) != 0) {
                fe_svc_xml_free(c);
                goto err;
            }
            *tail = c;
            tail = &c->next;
            continue;
        }
        if (*x->p == '&') {
            if (fe__xentity(x, &text) != 0) {
                goto err;
            }
            continue;
        }
        if ((unsigned char)*x->p < 0x20 && !fe__xws(*x->p)) {
            goto err;
        }
        rt_buf_append_u8(&text, (uint8_t)*x->p++);
    }
    n->text = rt_xstrdup(rt_buf_cstr(&text));
    if (strlen(n->text) != text.len) {
        goto err; /* NUL via CDATA */
    }
    rt_buf_free(&text);
    *out = n;
    return 0;

err:
    rt_buf_free(&text);
    fe_svc_xml_free(n);
    return -1;
}

/* Whitespace, comments and processing instructions between top-level
 * items. DOCTYPE is refused (no entity definitions, no expansion). */
static int fe__xmisc(struct fe__xp *x)
{
    for (;;) {
        fe__xskip_ws(x);
        if (fe__xstarts(x, "<?")) {
            if (fe__xskip_past(x, "?>") != 0) {
                return -1;
            }
        } else if (fe__xstarts(x, "<!--")) {
            if (fe__xskip_past(x, "-->") != 0) {
                return -1;
            }
        } else if (fe__xstarts(x, "<!")) {
            return -1;
        } else {
            return 0;
        }
    }
}

int fe_svc_xml_parse(const char *buf, size_t n, struct fe_xml_node **root)
{
    struct fe__xp x = {buf, buf + n, 0};
    *root = NULL;
    if (n >= 3 && memcmp(buf, "\xef\xbb\xbf", 3) == 0) {
        x.p += 3;
    }
    if (memchr(buf, '\0', n)) {
        return RT_EXML;
    }
    if (fe__xmisc(&x) != 0 || x.p >= x.end || *x.p != '<' ||
        fe__xelement(&x, 1, root) != 0) {
        fe_svc_xml_free(*root);
        *root = NULL;
        return RT_EXML;
    }
    if (fe__xmisc(&x) != 0 || x.p != x.end) {
        fe_svc_xml_free(*root);
        *root = NULL;
        return RT_EXML;
    }
    return 0;
}

/* ---- helpers over the tree ---- */

/* The only child called @name: 0 (none, *out NULL), 1 (found), -1 (more
 * than one: malformed). */
static int fe__xchild(const struct fe_xml_node *n,
                      const char *name,
                      const struct fe_xml_node **out)
{
    int count = 0;
    *out = NULL;
    for (const struct fe_xml_node *c = n->child; c; c = c->next) {
        if (strcmp(c->name, name) == 0) {
            *out = c;
            count++;
        }
    }
    return count > 1 ? -1 : count;
}

/* Trimmed text of @n into @buf (cap bytes). -1 when it does not fit. */
static int fe__xtext(const struct fe_xml_node *n, char *buf, size_t cap)
{
    const char *s = n->text;
    size_t len;
    while (fe__xws(*s)) {
        s++;
    }
    len = strlen(s);
    while (len && fe__xws(s[len - 1])) {
        len--;
    }
    if (len >= cap) {
        return -1;
    }
    memcpy(buf, s, len);
    buf[len] = '\0';
    return 0;
}

/* Trimmed text, malloc'd. */
static char *fe__xtext_dup(const struct fe_xml_node *n)
{
    size_t cap = strlen(n->text) + 1;
    char *buf = rt_xmalloc(cap);
    fe__xtext(n, buf, cap);
    return buf;
}

/* Required (@req) boolean child: -1 malformed/missing, else 0 with *v. */
static int fe__xbool(const struct fe_xml_node *n,
                     const char *name,
                     int req,
                     protobuf_c_boolean *v)
{
    const struct fe_xml_node *c;
    char buf[8];
    int k = fe__xchild(n, name, &c);
    if (k < 0 || (k == 0 && req)) {
        return -1;
    }
    if (k == 0) {
        *v = 0;
        return 0;
    }
    if (fe__xtext(c, buf, sizeof(buf)) != 0) {
        return -1;
    }
    if (strcasecmp(buf, "true") == 0) {
        *v = 1;
    } else if (strcasecmp(buf, "false") == 0) {
        *v = 0;
    } else {
        return -1;
    }
    return 0;
}

/* Unsigned integer child: 0 (absent, *present 0), 1 (*v set), -1. */
static int fe__xuint(const struct fe_xml_node *n,
                     const char *name,
                     uint32_t max,
                     uint32_t *v)
{
    const struct fe_xml_node *c;
    char buf[16];
    unsigned long x = 0;
    int k = fe__xchild(n, name, &c);
    if (k <= 0) {
        return k;
    }
    if (fe__xtext(c, buf, sizeof(buf)) != 0 || !buf[0]) {
        return -1;
    }
    for (const char *p = buf; *p; p++) {
        if (!isdigit((unsigned char)*p)) {
            return -1;
        }
        x = x * 10 + (unsigned long)(*p - '0');
        if (x > max) {
            return -1;
        }
    }
    *v = (uint32_t)x;
    return 1;
}

/* ==== ACL (spec §3.4, §3.5) =========================================== */

/* "raud" in order, each at most once. */
static int fe__perm_ok(const char *s)
{
    static const char order[] = "raud";
    size_t pos = 0;
    for (; *s; s++) {
        const char *at = memchr(order + pos, *s, sizeof(order) - 1 - pos);
        if (!at) {
            return 0;
        }
        pos = (size_t)(at - order) + 1;
    }
    return 1;
}

/* Normalizes an ACL time ("" stays ""). */
static int fe__acl_time(const struct fe_xml_node *n, char *out)
{
    char buf[64];
    uint64_t ticks;
    size_t len;
    if (fe__xtext(n, buf, sizeof(buf)) != 0) {
        return -1;
    }
    len = strlen(buf);
    if (!len) {
        out[0] = '\0';
        return 0;
    }
    if (len == 10) {
        strcat(buf, "T00:00:00Z");
        len = strlen(buf);
    }
    if (rt_time_parse_iso(buf, len, &ticks) != 0) {
        return -1;
    }
    rt_time_format_iso7(ticks, out);
    return 0;
}

int fe_svc_acl_parse(const char *xml, size_t n, struct fe_acl *out)
{
    struct fe_xml_node *root;
    size_t i;
    memset(out, 0, sizeof(*out));
    for (i = 0; i < n && fe__xws(xml[i]); i++) {
    }
    if (i == n) {
        return 0; /* spec §3.5: an empty body clears the ACL */
    }
    if (fe_svc_xml_parse(xml, n, &root) != 0) {
        return RT_EXML;
    }
    if (strcmp(root->name, "SignedIdentifiers") != 0) {
        goto err;
    }
    for (const struct fe_xml_node *c = root->child; c; c = c->next) {
        const struct fe_xml_node *id, *ap, *f;
        struct fe_acl_id *e;
        if (strcmp(c->name, "SignedIdentifier") != 0) {
            continue;
        }
        if (out->n == FE_ACL_MAX) {
            goto err;
        }
        e = &out->v[out->n];
        if (fe__xchild(c, "Id", &id) != 1 ||
            fe__xtext(id, e->id, sizeof(e->id)) != 0 || !e->id[0]) {
            goto err;
        }
        for (size_t j = 0; j < out->n; j++) {
            if (strcmp(out->v[j].id, e->id) == 0) {
                goto err;
            }
        }
        switch (fe__xchild(c, "AccessPolicy", &ap)) {
            case 0:
                break;
            case 1:
                e->has_policy = 1;
                if (fe__xchild(ap, "Start", &f) < 0 ||
                    (f && fe__acl_time(f, e->start) != 0)) {
                    goto err;
                }
                if (fe__xchild(ap, "Expiry", &f) < 0 ||
                    (f && fe__acl_time(f, e->expiry) != 0)) {
                    goto err;
                }
                if (fe__xchild(ap, "Permission", &f) < 0 ||
                    (f &&
                     (fe__xtext(f, e->permission, sizeof(e->permission)) != 0 ||
                      !fe__perm_ok(e->permission)))) {
                    goto err;
                }
                break;
            default:
                goto err;
        }
        out->n++;
    }
    fe_svc_xml_free(root);
    return 0;

err:
    fe_svc_xml_free(root);
    memset(out, 0, sizeof(*out));
    return RT_EXML;
}

void fe_svc_acl_write(struct rt_buf *out, const struct fe_acl *acl)
{
    rt_buf_append_str(out, FE_XML_DECL);
    if (acl->n == 0) {
        rt_buf_append_str(out, "<SignedIdentifiers />");
        return;
    }
    rt_buf_append_str(out, "<SignedIdentifiers>");
    for (size_t i = 0; i < acl->n; i++) {
        const struct fe_acl_id *e = &acl->v[i];
        rt_buf_append_str(out, "<SignedIdentifier><Id>");
        fe_xml_escape(out, e->id);
        rt_buf_append_str(out, "</Id>");
        if (e->has_policy) {
            rt_buf_append_str(out, "<AccessPolicy>");
            if (e->start[0]) {
                rt_buf_printf(out, "<Start>%s</Start>", e->start);
            }
            if (e->expiry[0]) {
                rt_buf_printf(out, "<Expiry>%s</Expiry>", e->expiry);
            }
            if (e->permission[0]) {
                rt_buf_printf(out, "<Permission>%s</Permission>",
                              e->permission);
            }
            rt_buf_append_str(out, "</AccessPolicy>");
        }
        rt_buf_append_str(out, "</SignedIdentifier>");
    }
    rt_buf_append_str(out, "</SignedIdentifiers>");
}

/* ==== Service properties (spec §3.6) =================================== */

static char *fe__props_str(struct fe_svc_props *p, char *s)
{
    RT_PRE(p->nstrings < sizeof(p->strings) / sizeof(p->strings[0]));
    p->strings[p->nstrings++] = s;
    return s;
}

static int fe__retention(const struct fe_xml_node *n,
                         int req,
                         Rt__RetentionPolicy *r,
                         Rt__RetentionPolicy **out)
{
    const struct fe_xml_node *c;
    uint32_t days = 0;
    int k = fe__xchild(n, "RetentionPolicy", &c);
    rt__retention_policy__init(r);
    *out = NULL;
    if (k < 0 || (k == 0 && req)) {
        return -1;
    }
    if (k == 0) {
        return 0;
    }
    if (fe__xbool(c, "Enabled", 1, &r->enabled) != 0) {
        return -1;
    }
    k = fe__xuint(c, "Days", FE_RETENTION_DAYS_MAX, &days);
    if (k < 0 || (k == 1 && days == 0) || (r->enabled && k == 0)) {
        return -1; /* Days 1..365, required when enabled */
    }
    r->days = r->enabled ? days : 0;
    *out = r;
    return 0;
}

static int fe__version(struct fe_svc_props *p,
                       const struct fe_xml_node *n,
                       int req,
                       char **out)
{
    const struct fe_xml_node *c;
    char buf[16];
    int k = fe__xchild(n, "Version", &c);
    if (k < 0 || (k == 0 && req)) {
        return -1;
    }
    if (k == 0) {
        *out = fe__props_str(p, rt_xstrdup("1.0"));
        return 0;
    }
    if (fe__xtext(c, buf, sizeof(buf)) != 0 || !buf[0]) {
        return -1;
    }
    *out = fe__props_str(p, rt_xstrdup(buf));
    return 0;
}

static int fe__metrics(struct fe_svc_props *p,
                       const struct fe_xml_node *n,
                       Rt__MetricsProps *m,
                       Rt__RetentionPolicy *r)
{
    rt__metrics_props__init(m);
    if (fe__version(p, n, 0, &m->version) != 0 ||
        fe__xbool(n, "Enabled", 1, &m->enabled) != 0 ||
        fe__xbool(n, "IncludeAPIs", 0, &m->include_apis) != 0 ||
        fe__retention(n, 0, r, &m->retention) != 0) {
        return -1;
    }
    if (!m->enabled) {
        m->include_apis = 0;
    }
    return 0;
}

static int fe__method_ok(const char *m, size_t n)
{
    static const char *const ok[] = {"DELETE", "GET",     "HEAD", "MERGE",
                                     "POST",   "OPTIONS", "PUT",  "PATCH"};
    for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
        if (strlen(ok[i]) == n && strncasecmp(ok[i], m, n) == 0) {
            return 1;
        }
    }
    return 0;
}

enum { FE__LIST_ORIGINS, FE__LIST_METHODS, FE__LIST_HEADERS };

/* Checks a comma list of CORS values (spec §9: limits). */
static int fe__cors_list_ok(const char *s, int kind, int required)
{
    size_t items = 0, prefixed = 0;
    int star = 0;
    const char *p = s;
    if (!*s) {
        return !required;
    }
    for (;;) {
        const char *comma = strchr(p, ',');
        const char *e = comma ? comma : p + strlen(p);
        const char *b = p;
        size_t len;
        while (b < e && fe__xws(*b)) {
            b++;
        }
        while (e > b && fe__xws(e[-1])) {
            e--;
        }
        len = (size_t)(e - b);
        if (len == 0 || len > FE_CORS_ITEM_LEN_MAX) {
            return 0;
        }
        if (len == 1 && *b == '*') {
            star = 1;
        } else if (kind == FE__LIST_METHODS && !fe__method_ok(b, len)) {
            return 0;
        } else if (kind == FE__LIST_HEADERS && b[len - 1] == '*') {
            prefixed++;
        } else {
            items++;
        }
        if (!comma) {
            break;
        }
        p = comma + 1;
    }
    if (kind == FE__LIST_METHODS && star) {
        return 0;
    }
    return items <= FE_CORS_ITEMS_MAX && prefixed <= FE_CORS_PREFIXED_MAX;
}

static int fe__cors_str(struct fe_svc_props *p,
                        const struct fe_xml_node *r,
                        const char *name,
                        int kind,
                        int required,
                        char **out)
{
    const struct fe_xml_node *c;
    int k = fe__xchild(r, name, &c);
    if (k < 0 || (k == 0 && required)) {
        return -1;
    }
    *out = fe__props_str(p, k ? fe__xtext_dup(c) : rt_xstrdup(""));
    return fe__cors_list_ok(*out, kind, required) ? 0 : -1;
}

int fe_svc_props_parse(const char *xml, size_t n, struct fe_svc_props *out)
{
    struct fe_xml_node *root;
    const struct fe_xml_node *c;
    memset(out, 0, sizeof(*out));
    rt__service_props__init(&out->msg);
    if (fe_svc_xml_parse(xml, n, &root) != 0) {
        return RT_EXML;
    }
    if (strcmp(root->name, "StorageServiceProperties") != 0) {
        goto err;
    }
    switch (fe__xchild(root, "Logging", &c)) {
        case 1: {
            Rt__LoggingProps *l = &out->logging;
            rt__logging_props__init(l);
            if (fe__version(out, c, 1, &l->version) != 0 ||
                fe__xbool(c, "Delete", 1, &l->log_delete) != 0 ||
                fe__xbool(c, "Read", 1, &l->log_read) != 0 ||
                fe__xbool(c, "Write", 1, &l->log_write) != 0 ||
                fe__retention(c, 1, &out->retention[0], &l->retention) != 0) {
                goto err;
            }
            out->msg.logging = l;
            break;
        }
        case 0:
            break;
        default:
            goto err;
    }
    for (int i = 0; i < 2; i++) {
        switch (fe__xchild(root, i ? "MinuteMetrics" : "HourMetrics", &c)) {
            case 1:
                if (fe__metrics(out, c, &out->metrics[i],
                                &out->retention[1 + i]) != 0) {
                    goto err;
                }
                if (i) {
                    out->msg.minute_metrics = &out->metrics[i];
                } else {
                    out->msg.hour_metrics = &out->metrics[i];
                }
                break;
            case 0:
                break;
            default:
                goto err;
        }
    }
    switch (fe__xchild(root, "Cors", &c)) {
        case 1:
            rt__cors_rules__init(&out->cors);
            for (const struct fe_xml_node *r = c->child; r; r = r->next) {
                Rt__CorsRule *rule;
                uint32_t age = 0;
                if (strcmp(r->name, "CorsRule") != 0) {
                    continue;
                }
                if (out->cors.n_rules == FE_CORS_MAX) {
                    goto err;
                }
                rule = &out->rules[out->cors.n_rules];
                rt__cors_rule__init(rule);
                if (fe__cors_str(out, r, "AllowedOrigins", FE__LIST_ORIGINS, 1,
                                 &rule->allowed_origins) != 0 ||
                    fe__cors_str(out, r, "AllowedMethods", FE__LIST_METHODS, 1,
                                 &rule->allowed_methods) != 0 ||
                    fe__cors_str(out, r, "AllowedHeaders", FE__LIST_HEADERS, 0,
                                 &rule->allowed_headers) != 0 ||
                    fe__cors_str(out, r, "ExposedHeaders", FE__LIST_HEADERS, 0,
                                 &rule->exposed_headers) != 0 ||
                    fe__xuint(r, "MaxAgeInSeconds", 0x7fffffff, &age) != 1) {
                    goto err;
                }
                rule->max_age = age;
                out->rulep[out->cors.n_rules++] = rule;
            }
            out->cors.rules = out->cors.n_rules ? out->rulep : NULL;
            out->msg.cors = &out->cors;
            break;
        case 0:
            break;
        default:
            goto err;
    }
    fe_svc_xml_free(root);
    return 0;

err:
    fe_svc_xml_free(root);
    fe_svc_props_free(out);
    return RT_EXML;
}

void fe_svc_props_free(struct fe_svc_props *p)
{
    for (size_t i = 0; i < p->nstrings; i++) {
        free(p->strings[i]);
    }
    memset(p, 0, sizeof(*p));
    rt__service_props__init(&p->msg);
}

static void fe__w_bool(struct rt_buf *out, const char *name, int v)
{
    rt_buf_printf(out, "<%s>%s</%s>", name, v ? "true" : "false", name);
}

static void fe__w_str(struct rt_buf *out, const char *name, const char *v)
{
    rt_buf_printf(out, "<%s>", name);
    fe_xml_escape(out, v ? v : "");
    rt_buf_printf(out, "</%s>", name);
}

static void fe__w_retention(struct rt_buf *out, const Rt__RetentionPolicy *r)
{
    rt_buf_append_str(out, "<RetentionPolicy>");
    fe__w_bool(out, "Enabled", r && r->enabled);
    if (r && r->enabled && r->days) {
        rt_buf_printf(out, "<Days>%u</Days>", (unsigned)r->days);
    }
    rt_buf_append_str(out, "</RetentionPolicy>");
}

static void fe__w_metrics(struct rt_buf *out,
                          const char *name,
                          const Rt__MetricsProps *m)
{
    rt_buf_printf(out, "<%s>", name);
    fe__w_str(out, "Version",
              m && m->version && *m->version ? m->version : "1.0");
    fe__w_bool(out, "Enabled", m && m->enabled);
    if (m && m->enabled) {
        fe__w_bool(out, "IncludeAPIs", m->include_apis);
    }
    fe__w_retention(out, m ? m->retention : NULL);
    rt_buf_printf(out, "</%s>", name);
}

void fe_svc_props_write(struct rt_buf *out, const Rt__ServiceProps *p)
{
    const Rt__LoggingProps *l = p ? p->logging : NULL;
    const Rt__CorsRules *c = p ? p->cors : NULL;
    rt_buf_append_str(out, FE_XML_DECL "<StorageServiceProperties>");
    rt_buf_append_str(out, "<Logging>");
    fe__w_str(out, "Version",
              l && l->version && *l->version ? l->version : "1.0");
    fe__w_bool(out, "Delete", l && l->log_delete);
    fe__w_bool(out, "Read", l && l->log_read);
    fe__w_bool(out, "Write", l && l->log_write);
    fe__w_retention(out, l ? l->retention : NULL);
    rt_buf_append_str(out, "</Logging>");
    fe__w_metrics(out, "HourMetrics", p ? p->hour_metrics : NULL);
    fe__w_metrics(out, "MinuteMetrics", p ? p->minute_metrics : NULL);
    if (!c || c->n_rules == 0) {
        rt_buf_append_str(out, "<Cors />");
    } else {
        rt_buf_append_str(out, "<Cors>");
        for (size_t i = 0; i < c->n_rules; i++) {
            const Rt__CorsRule *r = c->rules[i];
            rt_buf_append_str(out, "<CorsRule>");
            fe__w_str(out, "AllowedOrigins", r->allowed_origins);
            fe__w_str(out, "AllowedMethods", r->allowed_methods);
            rt_buf_printf(out, "<MaxAgeInSeconds>%u</MaxAgeInSeconds>",
                          (unsigned)r->max_age);
            fe__w_str(out, "ExposedHeaders", r->exposed_headers);
            fe__w_str(out, "AllowedHeaders", r->allowed_headers);
            rt_buf_append_str(out, "</CorsRule>");
        }
        rt_buf_append_str(out, "</Cors>");
    }
    rt_buf_append_str(out, "</StorageServiceProperties>");
}

void fe_svc_stats_write(struct rt_buf *out, int64_t now)
{
    static const char *const days[] = {"Sun", "Mon", "Tue", "Wed",
                                       "Thu", "Fri", "Sat"};
    static const char *const months[] = {"Jan", "Feb", "Mar", "Apr",
                                         "May", "Jun", "Jul", "Aug",
                                         "Sep", "Oct", "Nov", "Dec"};
    time_t t = (time_t)now;
    struct tm tm;
    gmtime_r(&t, &tm);
    rt_buf_printf(out,
                  FE_XML_DECL
                  "<StorageServiceStats><GeoReplication><Status>live"
                  "</Status><LastSyncTime>%s, %02d %s %04d %02d:%02d:%02d "
                  "GMT</LastSyncTime></GeoReplication></StorageServiceStats>",
                  days[tm.tm_wday], tm.tm_mday, months[tm.tm_mon],
                  tm.tm_year + 1900, tm.tm_hour, tm.tm_min, tm.tm_sec);
}

/* ==== CORS (spec §3.8) ================================================= */

/* Does the comma list @list hold @item (case-insensitive; "*" matches
 * everything; with @prefix, "abc*" matches every item starting with abc)? */
static int fe__list_has(const char *list,
                        const char *item,
                        size_t ilen,
                        int prefix)
{
    const char *p = list ? list : "";
    while (*p) {
        const char *comma = strchr(p, ',');
        const char *e = comma ? comma : p + strlen(p);
        const char *b = p;
        size_t len;
        while (b < e && fe__xws(*b)) {
            b++;
        }
        while (e > b && fe__xws(e[-1])) {
            e--;
        }
        len = (size_t)(e - b);
        if (len == 1 && *b == '*') {
            return 1;
        }
        if (len == ilen && strncasecmp(b, item, len) == 0) {
            return 1;
        }
        if (prefix && len > 0 && b[len - 1] == '*' && ilen >= len - 1 &&
            strncasecmp(b, item, len - 1) == 0) {
            return 1;
        }
        if (!comma) {
            break;
        }
        p = comma + 1;
    }
    return 0;
}

int fe_svc_cors_match(Rt__CorsRule *const *rules,
                      size_t n,
                      const char *origin,
                      const char *method,
                      const char *req_headers)
{
    for (size_t i = 0; i < n; i++) {
        const Rt__CorsRule *r = rules[i];
        const char *p = req_headers ? req_headers : "";
        int ok = 1;
        if (!fe__list_has(r->allowed_origins, origin, strlen(origin), 0) ||
            !fe__list_has(r->allowed_methods, method, strlen(method), 0)) {
            continue;
        }
        while (*p && ok) {
            const char *comma = strchr(p, ',');
            const char *e = comma ? comma : p + strlen(p);
            const char *b = p;
            while (b < e && fe__xws(*b)) {
                b++;
            }
            while (e > b && fe__xws(e[-1])) {
                e--;
            }
            if (e > b &&
                !fe__list_has(r->allowed_headers, b, (size_t)(e - b), 1)) {
                ok = 0;
            }
            if (!comma) {
                break;
            }
            p = comma + 1;
        }
        if (ok) {
            return (int)i;
        }
    }
    return -1;
}

/* Is "*" one of the rule's allowed origins? */
static int fe__rule_any_origin(const Rt__CorsRule *r)
{
    const char *p = r->allowed_origins ? r->allowed_origins : "";
    while (*p) {
        p += strspn(p, " \t,");
        if (*p == '*') {
            const char *q = p + 1;
            q += strspn(q, " \t");
            if (*q == ',' || *q == '\0') {
                return 1;
            }
        }
        p += strcspn(p, ",");
    }
    return 0;
}

int fe_svc_preflight(struct fe_req *req)
{
    const char *origin = fe__req_header(req, "Origin");
    const char *method = fe__req_header(req, "Access-Control-Request-Method");
    const char *headers = fe__req_header(req, "Access-Control-Request-Headers");
    const struct fe__acors *c;
    int idx = -1;

    req->xml_errors = 1;
    req->odata = 0;
    if (!origin || !*origin || !method || !*method) {
        fe__resp_error(req, RT_EHEADER, FE_MSG_CORS_HEADER);
        return FE_API_RESPOND;
    }
    pthread_rwlock_rdlock(&fe__snap_lock);
    c = fe__cors_find(req->path.account);
    if (c) {
        idx = fe_svc_cors_match(c->rulep, c->n, origin, method, headers);
    }
    if (idx >= 0) {
        char age[16];
        snprintf(age, sizeof(age), "%u", (unsigned)c->rules[idx].max_age);
        req->status = 200;
        fe__resp_header(req, "Access-Control-Allow-Origin", origin);
        fe__resp_header(req, "Access-Control-Allow-Methods", method);
        if (headers && *headers) {
            fe__resp_header(req, "Access-Control-Allow-Headers", headers);
        }
        fe__resp_header(req, "Access-Control-Max-Age", age);
        fe__resp_header(req, "Access-Control-Allow-Credentials", "true");
    }
    pthread_rwlock_unlock(&fe__snap_lock);
    if (idx < 0) {
        fe__resp_error(req, RT_ECORS, NULL);
    }
    return FE_API_RESPOND;
}

void fe_svc_cors_headers(struct fe_req *req)
{
    const char *origin;
    const struct fe__acors *c;
    int idx;
    if (strcmp(req->method, "OPTIONS") == 0 || !req->path.account) {
        return;
    }
    origin = fe__req_header(req, "Origin");
    if (!origin || !*origin) {
        return;
    }
    pthread_rwlock_rdlock(&fe__snap_lock);
    c = fe__cors_find(req->path.account);
    idx = c ? fe_svc_cors_match(c->rulep, c->n, origin, req->method, NULL) : -1;
    if (idx >= 0) {
        const Rt__CorsRule *r = &c->rules[idx];
        if (fe__rule_any_origin(r)) {
            fe__resp_header(req, "Access-Control-Allow-Origin", "*");
        } else {
            fe__resp_header(req, "Access-Control-Allow-Origin", origin);
            fe__resp_header(req, "Access-Control-Allow-Credentials", "true");
        }
        if (r->exposed_headers && *r->exposed_headers) {
            fe__resp_header(req, "Access-Control-Expose-Headers",
                            r->exposed_headers);
        }
        fe__resp_header(req, "Vary", "Origin");
    }
    pthread_rwlock_unlock(&fe__snap_lock);
}

/* ==== Endpoints ======================================================== */

void fe_svc_classify(struct fe_req *req)
{
    if (req->path.kind == FE_RES_SERVICE ||
        (req->path.kind == FE_RES_TABLE && fe_query_get(&req->query, "comp"))) {
        req->xml_errors = 1;
        req->odata = 0;
    }
}

/* Submits a master call with @msg packed into req->s1. */
static int fe__master_job(struct fe_req *req,
                          uint32_t method,
                          const ProtobufCMessage *msg)
{
    size_t len = protobuf_c_message_get_packed_size(msg);
    rt_buf_reset(&req->s1);
    protobuf_c_message_pack(msg, rt_buf_reserve(&req->s1, len));
    req->s1.len = len;
    fe_job_init(&req->job, FE_JOB_MASTER_CALL);
    req->job.account = req->path.account;
    req->job.table = req->path.table;
    req->job.call_method = method;
    req->job.call_body = req->s1.data;
    req->job.call_len = len;
    return FE_API_SUBMIT;
}

static void fe__job_err(struct fe_req *req)
{
    int code = req->job.status;
    if (code == RT_ENOTFOUND) {
        code = RT_ETABLENOTFOUND;
    }
    if (!rt_err_is_rt(code) || code == RT_ENOCONN || code == RT_ECANCELED) {
        code = RT_EBUSY;
    }
    fe__resp_error(req, code, NULL);
}

static void fe__xml_ok(struct fe_req *req, int status)
{
    req->status = status;
    if (req->rbody.len) {
        fe__resp_header(req, "Content-Type", FE_XML_CT);
    }
}

int fe_svc_get_acl_prepare(struct fe_req *req)
{
    Rt__AclReq msg = RT__ACL_REQ__INIT;
    msg.account = req->path.account;
    msg.name = req->path.table;
    return fe__master_job(req, RT__METHOD__GET_ACL, &msg.base);
}

void fe_svc_get_acl_finish(struct fe_req *req)
{
    Rt__AclReq *m;
    struct fe_acl acl;
    if (req->job.status != 0) {
        fe__job_err(req);
        return;
    }
    m = rt__acl_req__unpack(NULL, req->job.value.len, req->job.value.data);
    if (!m) {
        fe__resp_error(req, RT_EINTERNAL, NULL);
        return;
    }
    memset(&acl, 0, sizeof(acl));
    for (size_t i = 0; i < m->n_acl && acl.n < FE_ACL_MAX; i++) {
        const Rt__SignedIdentifier *si = m->acl[i];
        struct fe_acl_id *e = &acl.v[acl.n++];
        snprintf(e->id, sizeof(e->id), "%s", si->id ? si->id : "");
        e->has_policy = si->has_policy;
        snprintf(e->start, sizeof(e->start), "%s", si->start ? si->start : "");
        snprintf(e->expiry, sizeof(e->expiry), "%s",
                 si->expiry ? si->expiry : "");
        snprintf(e->permission, sizeof(e->permission), "%s",
                 si->permission ? si->permission : "");
    }
    rt__acl_req__free_unpacked(m, NULL);
    fe_svc_acl_write(&req->rbody, &acl);
    fe__xml_ok(req, 200);
}

int fe_svc_set_acl_prepare(struct fe_req *req)
{
    Rt__AclReq msg = RT__ACL_REQ__INIT;
    Rt__SignedIdentifier sv[FE_ACL_MAX], *svp[FE_ACL_MAX];
    struct fe_acl acl;
    if (fe_svc_acl_parse(req->body.len ? (const char *)req->body.data : "",
                         req->body.len, &acl) != 0) {
        fe__resp_error(req, RT_EXML, NULL);
        return FE_API_RESPOND;
    }
    for (size_t i = 0; i < acl.n; i++) {
        rt__signed_identifier__init(&sv[i]);
        sv[i].id = acl.v[i].id;
        sv[i].has_policy = acl.v[i].has_policy;
        sv[i].start = acl.v[i].start;
        sv[i].expiry = acl.v[i].expiry;
        sv[i].permission = acl.v[i].permission;
        svp[i] = &sv[i];
    }
    msg.account = req->path.account;
    msg.name = req->path.table;
    msg.n_acl = acl.n;
    msg.acl = svp;
    return fe__master_job(req, RT__METHOD__SET_ACL, &msg.base);
}

void fe_svc_set_acl_finish(struct fe_req *req)
{
    if (req->job.status != 0) {
        fe__job_err(req);
        return;
    }
    rt_log(RT_LOG_INFO, "table %s/%s: ACL set", req->path.account,
           req->path.table);
    req->status = 204;
}

int fe_svc_get_props_prepare(struct fe_req *req)
{
    Rt__ServicePropsReq msg = RT__SERVICE_PROPS_REQ__INIT;
    msg.account = req->path.account;
    return fe__master_job(req, RT__METHOD__GET_SERVICE_PROPS, &msg.base);
}

void fe_svc_get_props_finish(struct fe_req *req)
{
    Rt__ServiceProps *p;
    if (req->job.status != 0) {
        fe__job_err(req);
        return;
    }
    p = rt__service_props__unpack(NULL, req->job.value.len,
                                  req->job.value.data);
    if (!p) {
        fe__resp_error(req, RT_EINTERNAL, NULL);
        return;
    }
    fe_svc_props_write(&req->rbody, p);
    rt__service_props__free_unpacked(p, NULL);
    fe__xml_ok(req, 200);
}

int fe_svc_set_props_prepare(struct fe_req *req)
{
    Rt__ServicePropsReq msg = RT__SERVICE_PROPS_REQ__INIT;
    struct fe_svc_props props;
    int rc;
    if (fe_svc_props_parse(req->body.len ? (const char *)req->body.data : "",
                           req->body.len, &props) != 0) {
        fe__resp_error(req, RT_EXML, NULL);
        return FE_API_RESPOND;
    }
    msg.account = req->path.account;
    msg.props = &props.msg;
    rc = fe__master_job(req, RT__METHOD__SET_SERVICE_PROPS, &msg.base);
    fe_svc_props_free(&props); /* packed into req->s1 already */
    return rc;
}

void fe_svc_set_props_finish(struct fe_req *req)
{
    if (req->job.status != 0) {
        fe__job_err(req);
        return;
    }
    rt_log(RT_LOG_INFO, "account %s: service properties set",
           req->path.account);
    req->status = 202; /* spec §3.6 */
}

int fe_svc_stats_prepare(struct fe_req *req)
{
    fe_svc_stats_write(&req->rbody, fe__now(req));
    fe__xml_ok(req, 200);
    return FE_API_RESPOND;
}

void fe_svc_stats_finish(struct fe_req *req)
{
    (void)req; /* never submitted */
}
