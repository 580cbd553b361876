/* The storage-XML operations of the Table service (docs/table-api-spec.md
 * §3.4-§3.7): Get/Set Table ACL, Get/Set Table Service Properties and Get
 * Table Service Stats, plus the service-properties document they carry.
 * The ACL document and stored policies are fe_acl.h, CORS is fe_cors.h,
 * the XML reader and writer fe_xml.h.
 *
 * Layers:
 *  - pure documents (any thread): the service-properties reader and
 *    writer, the stats writer. Malformed or out-of-limit documents are
 *    RT_EXML (400 InvalidXmlDocument), never a crash.
 *  - the endpoints [the request's worker], wired into fe_api.c's dispatch
 *    as ordinary operations (prepare -> master RPC job -> finish). Their
 *    errors use the storage XML shape (§8.1).
 *
 * Ownership: parse results are owned by the caller (free functions
 * below). */
#ifndef FE_SVC_H
#define FE_SVC_H

#include <stddef.h>
#include <stdint.h>

#include "fe_cors.h"
#include "rt.pb-c.h"
#include "rt_buf.h"

struct fe_req;

/* Limits (spec §3.6). */
#define FE_RETENTION_DAYS_MAX 365

/* ---- the service-properties document ---- */

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
 * 5 CORS rules, a CORS list fe_cors_list_ok refuses). Unknown elements are
 * ignored. */
int fe_svc_props_parse(const char *xml, size_t n, struct fe_svc_props *out);
void fe_svc_props_free(struct fe_svc_props *p);
/* The Get response body; absent sections get the defaults (version 1.0,
 * everything off, no CORS rules). @p may be NULL. */
void fe_svc_props_write(struct rt_buf *out, const Rt__ServiceProps *p);
/* The Get Service Stats body: live, LastSyncTime = @now (Unix seconds). */
void fe_svc_stats_write(struct rt_buf *out, int64_t now);

/* ---- endpoints (fe_api.c) ---- */

/* Marks requests of the non-OData resources (comp=acl, restype=service) so
 * that every error they get, authentication included, is storage XML and
 * they carry no DataServiceVersion. Call right after the path is parsed. */
void fe_svc_classify(struct fe_req *req);

int fe_svc_get_acl_prepare(struct fe_req *req);
void fe_svc_get_acl_finish(struct fe_req *req);
int fe_svc_set_acl_prepare(struct fe_req *req);
void fe_svc_set_acl_finish(struct fe_req *req);
int fe_svc_get_props_prepare(struct fe_req *req);
void fe_svc_get_props_finish(struct fe_req *req);
int fe_svc_set_props_prepare(struct fe_req *req);
void fe_svc_set_props_finish(struct fe_req *req);
/* Answers at once (FE_API_RESPOND); there is no geo-replica. On the
 * primary address (no "-secondary") 400 InvalidQueryParameterValue. */
int fe_svc_stats_prepare(struct fe_req *req);
void fe_svc_stats_finish(struct fe_req *req);

#endif
