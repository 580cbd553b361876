/* The non-OData operations of the Table service (docs/table-api-spec.md
 * §3.4-§3.8): Get/Set Table ACL, Get/Set Table Service Properties, Get
 * Table Service Stats, CORS preflight (OPTIONS) and the CORS headers of
 * ordinary responses. Also the front end's thread-safe copy of what the
 * master pushes for them in the map: every table's stored access policies
 * (read by SAS "si", fe_sas.h) and every account's CORS rules.
 *
 * Layers:
 *  - the policy snapshot: fe_svc_map_update() [any worker's loop, from its
 *    fe_route after each installed map] builds a new snapshot and swaps it
 *    in (unless another worker already installed a newer map) under
 *    a lock; fe_svc_policy_lookup() / the CORS functions [any thread] read
 *    it under the same (reader) lock and copy what they need out.
 *  - pure XML (any thread): a small strict parser for these documents
 *    (fe_svc_xml_*), the ACL and service-properties readers and writers.
 *    Malformed or out-of-limit documents are RT_EXML (400
 *    InvalidXmlDocument), never a crash.
 *  - the endpoints [the request's worker], wired into fe_api.c's dispatch
 *    as ordinary operations (prepare -> master RPC job -> finish). Their
 *    errors use the storage XML shape (§8.1).
 *
 * Ownership: parse results are owned by the caller (free functions below);
 * the snapshot is owned by this module (fe_svc_reset() frees it). */
#ifndef FE_SVC_H
#define FE_SVC_H

#include <stddef.h>
#include <stdint.h>

#include "fe_sas.h"
#include "rt.pb-c.h"
#include "rt_buf.h"

struct fe_req;

/* Limits (spec §3.5, §3.6, §9). */
#define FE_ACL_MAX 5
#define FE_ACL_ID_MAX 64
#define FE_CORS_MAX 5
#define FE_CORS_ITEMS_MAX 64   /* origins / literal headers per rule */
#define FE_CORS_PREFIXED_MAX 2 /* "x-ms-meta-*"-style headers per list */
#define FE_CORS_ITEM_LEN_MAX 256
#define FE_RETENTION_DAYS_MAX 365
#define FE_XML_DEPTH_MAX 16
#define FE_XML_NODES_MAX 1024

/* ---- the policy snapshot ---- */

/* [any worker's loop] Rebuilds the snapshot from @map (borrowed:
 * everything needed is copied). A map older than the snapshot's (another
 * worker already installed a newer one) is ignored. */
void fe_svc_map_update(const Rt__Map *map);
/* [any thread] fe_sas_policy_fn over the snapshot. */
int fe_svc_policy_lookup(const char *account,
                         const char *table,
                         const char *id,
                         struct fe_sas_policy *out);
/* Frees the snapshot (shutdown, tests). */
void fe_svc_reset(void);

/* ---- XML ---- */

struct fe_xml_node
{
    char *name; /* local name (any "prefix:" dropped) */
    char *text; /* concatenated character data, entities decoded */
    struct fe_xml_node *child; /* first child */
    struct fe_xml_node *next;  /* next sibling */
};

/* Parses one document: optional BOM, XML declaration, comments and
 * processing instructions; one root element; attributes are checked and
 * ignored; &lt; &gt; &amp; &quot; &apos; &#n; &#xn; and CDATA are decoded.
 * DOCTYPE, mismatched tags, bad characters, more than FE_XML_DEPTH_MAX
 * levels or FE_XML_NODES_MAX elements -> RT_EXML. On 0 *root is the
 * caller's (fe_svc_xml_free). */
int fe_svc_xml_parse(const char *buf, size_t n, struct fe_xml_node **root);
void fe_svc_xml_free(struct fe_xml_node *node);

/* A table ACL as parsed from / written to XML (§3.4, §3.5). Times are
 * normalized to "YYYY-MM-DDThh:mm:ss.fffffffZ"; "" = absent. */
struct fe_acl_id
{
    char id[FE_ACL_ID_MAX + 1];
    int has_policy;
    char start[FE_SAS_TIME_MAX];
    char expiry[FE_SAS_TIME_MAX];
    char permission[8];
};
struct fe_acl
{
    struct fe_acl_id v[FE_ACL_MAX];
    size_t n;
};

/* An empty body (or only whitespace) is the empty ACL. Errors: RT_EXML
 * (malformed, > 5 identifiers, Id missing / empty / > 64 chars / repeated,
 * Permission not a subsequence of "raud", unparseable Start/Expiry). */
int fe_svc_acl_parse(const char *xml, size_t n, struct fe_acl *out);
void fe_svc_acl_write(struct rt_buf *out, const struct fe_acl *acl);

/* A parsed Set Service Properties body: msg's absent sections are NULL. */
struct fe_svc_props
{
    Rt__ServiceProps msg;
    Rt__LoggingProps logging;
    Rt__MetricsProps metrics[2]; /* hour, minute */
    Rt__RetentionPolicy retention[3];
    Rt__CorsRules cors;
    Rt__CorsRule rules[FE_CORS_MAX];
    Rt__CorsRule *rulep[FE_CORS_MAX];
    char *strings[3 + 4 * FE_CORS_MAX]; /* malloc'd strings msg points to */
    size_t nstrings;
};
/* Errors: RT_EXML (malformed, wrong root, a section without its required
 * elements, bad booleans/integers, retention days outside 1..365, more than
 * 5 CORS rules, a CORS method outside DELETE GET HEAD MERGE POST OPTIONS
 * PUT PATCH, list limits). Unknown elements are ignored. */
int fe_svc_props_parse(const char *xml, size_t n, struct fe_svc_props *out);
void fe_svc_props_free(struct fe_svc_props *p);
/* The Get response body; absent sections get the defaults (version 1.0,
 * everything off, no CORS rules). @p may be NULL. */
void fe_svc_props_write(struct rt_buf *out, const Rt__ServiceProps *p);
/* The Get Service Stats body: live, LastSyncTime = @now (Unix seconds). */
void fe_svc_stats_write(struct rt_buf *out, int64_t now);

/* ---- CORS (spec §3.8) ---- */

/* First rule of @rules matching @origin ("*" or exact, case-insensitive),
 * @method (in AllowedMethods) and every header of the comma list
 * @req_headers (NULL = none; "*", exact or "prefix*" match, any case).
 * Returns its index or -1. */
int fe_svc_cors_match(Rt__CorsRule *const *rules,
                      size_t n,
                      const char *origin,
                      const char *method,
                      const char *req_headers);

/* ---- endpoints (fe_api.c) ---- */

/* Marks requests of the non-OData resources (comp=acl, restype=service) so
 * that every error they get, authentication included, is storage XML and
 * they carry no DataServiceVersion. Call right after the path is parsed. */
void fe_svc_classify(struct fe_req *req);
/* OPTIONS: the preflight answer (no auth). Returns FE_API_RESPOND. */
int fe_svc_preflight(struct fe_req *req);
/* Adds Access-Control-Allow-Origin / -Expose-Headers / Vary: Origin (and
 * -Allow-Credentials) to the response being sent when the request has an
 * Origin matching one of the account's rules. Not for OPTIONS. */
void fe_svc_cors_headers(struct fe_req *req);

int fe_svc_get_acl_prepare(struct fe_req *req);
void fe_svc_get_acl_finish(struct fe_req *req);
int fe_svc_set_acl_prepare(struct fe_req *req);
void fe_svc_set_acl_finish(struct fe_req *req);
int fe_svc_get_props_prepare(struct fe_req *req);
void fe_svc_get_props_finish(struct fe_req *req);
int fe_svc_set_props_prepare(struct fe_req *req);
void fe_svc_set_props_finish(struct fe_req *req);
/* Answers at once (FE_API_RESPOND); there is no geo-replica. */
int fe_svc_stats_prepare(struct fe_req *req);
void fe_svc_stats_finish(struct fe_req *req);

#endif
