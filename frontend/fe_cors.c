/* CORS: see fe_cors.h.
 *
 * The rules live in a snapshot rebuilt whole from each map and installed
 * as an fe_snap; the preflight and the response headers hold its read lock
 * while they match and copy the rule's values into the response. */
#include "fe_cors.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "fe_req.h"
#include "fe_snap.h"
#include "fe_xml.h"
#include "rt_alloc.h"
#include "rt_err.h"

#define FE_MSG_CORS_HEADER "A required CORS header is not present."

/* ==== The accounts' rules ============================================== */

struct fe__acors
{
    char *account;
    size_t n;
    Rt__CorsRule rules[FE_CORS_MAX];
    Rt__CorsRule *rulep[FE_CORS_MAX];
};

struct fe__cors_snap
{
    struct fe__acors *cors; /* by account */
    size_t ncors;
};

static struct fe_snap fe__rules = FE_SNAP_INIT;

static void fe__cors_snap_free(struct fe__cors_snap *s)
{
    if (!s) {
        return;
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
    free(s->cors);
    free(s);
}

static int fe__acors_cmp(const void *a, const void *b)
{
    return strcmp(((const struct fe__acors *)a)->account,
                  ((const struct fe__acors *)b)->account);
}

void fe_cors_map_update(const Rt__Map *map)
{
    struct fe__cors_snap *s = rt_xcalloc(1, sizeof(*s));
    s->cors = rt_xcalloc(map->n_accounts, sizeof(*s->cors));
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
    fe__cors_snap_free(fe_snap_install(&fe__rules, s, map->version));
}

void fe_cors_reset(void)
{
    fe__cors_snap_free(fe_snap_take(&fe__rules));
}

/* @account's rules in the snapshot @s (NULL allowed), or NULL when none. */
static const struct fe__acors *fe__cors_find(const struct fe__cors_snap *s,
                                             const char *account)
{
    struct fe__acors key;
    if (!s || !account) {
        return NULL;
    }
    key.account = (char *)account;
    return bsearch(&key, s->cors, s->ncors, sizeof(key), fe__acors_cmp);
}

/* ==== Rule lists ======================================================= */

/* Splits the comma list at *p: the next item, trimmed of white space, in
 * *b and *len (which may be 0); *p moves past the item's comma, or becomes
 * NULL after the last item. Call only while *p is not NULL. */
static void fe__list_next(const char **p, const char **b, size_t *len)
{
    const char *comma = strchr(*p, ',');
    const char *e = comma ? comma : *p + strlen(*p);
    const char *s = *p;
    while (s < e && fe_xml_is_space(*s)) {
        s++;
    }
    while (e > s && fe_xml_is_space(e[-1])) {
        e--;
    }
    *b = s;
    *len = (size_t)(e - s);
    *p = comma ? comma + 1 : NULL;
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

int fe_cors_list_ok(const char *s, enum fe_cors_list kind, int required)
{
    size_t items = 0, prefixed = 0;
    int star = 0;
    if (!*s) {
        return !required;
    }
    for (const char *p = s; p;) {
        const char *b;
        size_t len;
        fe__list_next(&p, &b, &len);
        if (len == 0 || len > FE_CORS_ITEM_LEN_MAX) {
            return 0;
        }
        if (len == 1 && *b == '*') {
            star = 1;
        } else if (kind == FE_CORS_LIST_METHODS && !fe__method_ok(b, len)) {
            return 0;
        } else if (kind == FE_CORS_LIST_HEADERS && b[len - 1] == '*') {
            prefixed++;
        } else {
            items++;
        }
    }
    if (kind == FE_CORS_LIST_METHODS && star) {
        return 0;
    }
    return items <= FE_CORS_ITEMS_MAX && prefixed <= FE_CORS_PREFIXED_MAX;
}

/* ==== Matching and answering (spec §3.8) ============================== */

/* Does the comma list @list hold @item (case-insensitive; "*" matches
 * everything; with @prefix, "abc*" matches every item starting with abc)? */
static int fe__list_has(const char *list,
                        const char *item,
                        size_t ilen,
                        int prefix)
{
    for (const char *p = list ? list : ""; p && *p;) {
        const char *b;
        size_t len;
        fe__list_next(&p, &b, &len);
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
    }
    return 0;
}

int fe_cors_match(Rt__CorsRule *const *rules,
                  size_t n,
                  const char *origin,
                  const char *method,
                  const char *req_headers)
{
    for (size_t i = 0; i < n; i++) {
        const Rt__CorsRule *r = rules[i];
        int ok = 1;
        if (!fe__list_has(r->allowed_origins, origin, strlen(origin), 0) ||
            !fe__list_has(r->allowed_methods, method, strlen(method), 0)) {
            continue;
        }
        for (const char *p = req_headers ? req_headers : ""; p && *p && ok;) {
            const char *b;
            size_t len;
            fe__list_next(&p, &b, &len);
            if (len > 0 && !fe__list_has(r->allowed_headers, b, len, 1)) {
                ok = 0;
            }
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

int fe_cors_preflight(struct fe_req *req)
{
    const char *origin = fe_req_header(req, "Origin");
    const char *method = fe_req_header(req, "Access-Control-Request-Method");
    const char *headers = fe_req_header(req, "Access-Control-Request-Headers");
    const struct fe__acors *c;
    int idx = -1;

    req->xml_errors = 1;
    req->odata = 0;
    if (!origin || !*origin || !method || !*method) {
        fe_req_resp_error(req, RT_EHEADER, FE_MSG_CORS_HEADER);
        return FE_API_RESPOND;
    }
    c = fe__cors_find(fe_snap_read(&fe__rules), req->path.account);
    if (c) {
        idx = fe_cors_match(c->rulep, c->n, origin, method, headers);
    }
    if (idx >= 0) {
        char age[16];
        snprintf(age, sizeof(age), "%u", (unsigned)c->rules[idx].max_age);
        req->status = 200;
        fe_req_resp_header(req, "Access-Control-Allow-Origin", origin);
        fe_req_resp_header(req, "Access-Control-Allow-Methods", method);
        if (headers && *headers) {
            fe_req_resp_header(req, "Access-Control-Allow-Headers", headers);
        }
        fe_req_resp_header(req, "Access-Control-Max-Age", age);
        fe_req_resp_header(req, "Access-Control-Allow-Credentials", "true");
    }
    fe_snap_read_end(&fe__rules);
    if (idx < 0) {
        fe_req_resp_error(req, RT_ECORS, NULL);
    }
    return FE_API_RESPOND;
}

void fe_cors_headers(struct fe_req *req)
{
    const char *origin;
    const struct fe__acors *c;
    int idx, get_head;
    if (strcmp(req->method, "OPTIONS") == 0 || !req->path.account) {
        return;
    }
    origin = fe_req_header(req, "Origin");
    if (!origin || !*origin) {
        return;
    }
    /* Vary: Origin as Azure sets it ("Understanding the Vary header" in
     * the CORS page of the REST reference): on a GET/HEAD answer (the
     * only ones user agents cache) whose origin matched a rule naming it,
     * or matched none while the service has rules; never when a rule
     * allowing every origin ("*") matched, since that answer is the same
     * for any origin. */
    get_head =
        strcmp(req->method, "GET") == 0 || strcmp(req->method, "HEAD") == 0;
    c = fe__cors_find(fe_snap_read(&fe__rules), req->path.account);
    idx = c ? fe_cors_match(c->rulep, c->n, origin, req->method, NULL) : -1;
    if (idx < 0 && c && c->n > 0 && get_head) {
        fe_req_resp_header(req, "Vary", "Origin");
    }
    if (idx >= 0) {
        const Rt__CorsRule *r = &c->rules[idx];
        if (fe__rule_any_origin(r)) {
            fe_req_resp_header(req, "Access-Control-Allow-Origin", "*");
        } else {
            fe_req_resp_header(req, "Access-Control-Allow-Origin", origin);
            fe_req_resp_header(req, "Access-Control-Allow-Credentials", "true");
        }
        if (r->exposed_headers && *r->exposed_headers) {
            fe_req_resp_header(req, "Access-Control-Expose-Headers",
                               r->exposed_headers);
        }
        if (get_head && !fe__rule_any_origin(r)) {
            fe_req_resp_header(req, "Vary", "Origin");
        }
    }
    fe_snap_read_end(&fe__rules);
}
