/* The storage-XML operations: see fe_svc.h.
 *
 * Happy path of Set Table ACL: fe_svc_set_acl_prepare parses the XML
 * (limits checked here, then again by the master), packs an rt.AclReq into
 * req->s1 and submits an FE_JOB_MASTER_CALL (SET_ACL); the master commits,
 * pushes the new map (fe_route installs it and its map observer calls
 * fe_acl_map_update, so this front end sees the policy before the reply)
 * and replies; the finish step answers 204. Get/Set Service Properties
 * work the same way with GET/SET_SERVICE_PROPS; Get Table ACL with
 * GET_ACL.
 *
 * Failure modes: malformed XML or a broken limit -> 400 InvalidXmlDocument
 * before any RPC; a missing table -> 404 TableNotFound; master unreachable
 * -> 503 ServerBusy; all in the storage XML error shape (spec §8.1). */
#include "fe_svc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fe_acl.h"
#include "fe_cors.h"
#include "fe_req.h"
#include "fe_xml.h"
#include "rt_alloc.h"
#include "rt_err.h"
#include "rt_log.h"

#define FE_XML_CT "application/xml"

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
    int k = fe_xml_child_req(n, "RetentionPolicy", req, &c);
    rt__retention_policy__init(r);
    *out = NULL;
    if (k < 0) {
        return -1;
    }
    if (k == 0) {
        return 0;
    }
    if (fe_xml_bool(c, "Enabled", 1, &r->enabled) != 0) {
        return -1;
    }
    k = fe_xml_uint(c, "Days", FE_RETENTION_DAYS_MAX, &days);
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
    int k = fe_xml_child_req(n, "Version", req, &c);
    if (k < 0) {
        return -1;
    }
    if (k == 0) {
        *out = fe__props_str(p, rt_xstrdup("1.0"));
        return 0;
    }
    if (fe_xml_text(c, buf, sizeof(buf)) != 0 || !buf[0]) {
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
        fe_xml_bool(n, "Enabled", 1, &m->enabled) != 0 ||
        fe_xml_bool(n, "IncludeAPIs", 0, &m->include_apis) != 0 ||
        fe__retention(n, 0, r, &m->retention) != 0) {
        return -1;
    }
    if (!m->enabled) {
        m->include_apis = 0;
    }
    return 0;
}

static int fe__cors_str(struct fe_svc_props *p,
                        const struct fe_xml_node *r,
                        const char *name,
                        enum fe_cors_list kind,
                        int required,
                        char **out)
{
    const struct fe_xml_node *c;
    int k = fe_xml_child_req(r, name, required, &c);
    if (k < 0) {
        return -1;
    }
    *out = fe__props_str(p, k ? fe_xml_text_dup(c) : rt_xstrdup(""));
    return fe_cors_list_ok(*out, kind, required) ? 0 : -1;
}

int fe_svc_props_parse(const char *xml, size_t n, struct fe_svc_props *out)
{
    struct fe_xml_node *root;
    const struct fe_xml_node *c;
    memset(out, 0, sizeof(*out));
    rt__service_props__init(&out->msg);
    if (fe_xml_parse(xml, n, &root) != 0) {
        return RT_EXML;
    }
    if (strcmp(root->name, "StorageServiceProperties") != 0) {
        goto err;
    }
    switch (fe_xml_child(root, "Logging", &c)) {
        case 1: {
            Rt__LoggingProps *l = &out->logging;
            rt__logging_props__init(l);
            if (fe__version(out, c, 1, &l->version) != 0 ||
                fe_xml_bool(c, "Delete", 1, &l->log_delete) != 0 ||
                fe_xml_bool(c, "Read", 1, &l->log_read) != 0 ||
                fe_xml_bool(c, "Write", 1, &l->log_write) != 0 ||
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
        switch (fe_xml_child(root, i ? "MinuteMetrics" : "HourMetrics", &c)) {
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
    switch (fe_xml_child(root, "Cors", &c)) {
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
                if (fe__cors_str(out, r, "AllowedOrigins", FE_CORS_LIST_ORIGINS,
                                 1, &rule->allowed_origins) != 0 ||
                    fe__cors_str(out, r, "AllowedMethods", FE_CORS_LIST_METHODS,
                                 1, &rule->allowed_methods) != 0 ||
                    fe__cors_str(out, r, "AllowedHeaders", FE_CORS_LIST_HEADERS,
                                 0, &rule->allowed_headers) != 0 ||
                    fe__cors_str(out, r, "ExposedHeaders", FE_CORS_LIST_HEADERS,
                                 0, &rule->exposed_headers) != 0 ||
                    fe_xml_uint(r, "MaxAgeInSeconds", 0x7fffffff, &age) != 1) {
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
    fe_xml_free(root);
    return 0;

err:
    fe_xml_free(root);
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

static void fe__w_retention(struct rt_buf *out, const Rt__RetentionPolicy *r)
{
    rt_buf_append_str(out, "<RetentionPolicy>");
    fe_xml_write_bool(out, "Enabled", r && r->enabled);
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
    fe_xml_write_str(out, "Version",
                     m && m->version && *m->version ? m->version : "1.0");
    fe_xml_write_bool(out, "Enabled", m && m->enabled);
    if (m && m->enabled) {
        fe_xml_write_bool(out, "IncludeAPIs", m->include_apis);
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
    fe_xml_write_str(out, "Version",
                     l && l->version && *l->version ? l->version : "1.0");
    fe_xml_write_bool(out, "Delete", l && l->log_delete);
    fe_xml_write_bool(out, "Read", l && l->log_read);
    fe_xml_write_bool(out, "Write", l && l->log_write);
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
            fe_xml_write_str(out, "AllowedOrigins", r->allowed_origins);
            fe_xml_write_str(out, "AllowedMethods", r->allowed_methods);
            rt_buf_printf(out, "<MaxAgeInSeconds>%u</MaxAgeInSeconds>",
                          (unsigned)r->max_age);
            fe_xml_write_str(out, "ExposedHeaders", r->exposed_headers);
            fe_xml_write_str(out, "AllowedHeaders", r->allowed_headers);
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
    fe_req_job_init(req, FE_JOB_MASTER_CALL);
    req->job.call_method = method;
    req->job.call_body = req->s1.data;
    req->job.call_len = len;
    return FE_API_SUBMIT;
}

/* Answers a failed master call and returns 1, or returns 0: the master's
 * "not found" is the table's, and an unreachable or closing master is
 * ServerBusy. */
static int fe__job_failed(struct fe_req *req)
{
    int code = req->job.status;
    if (code == 0) {
        return 0;
    }
    if (code == RT_ENOTFOUND) {
        code = RT_ETABLENOTFOUND;
    }
    if (!rt_err_is_rt(code) || code == RT_ENOCONN || code == RT_ECANCELED) {
        code = RT_EBUSY;
    }
    fe_req_resp_error(req, code, NULL);
    return 1;
}

static void fe__xml_ok(struct fe_req *req, int status)
{
    req->status = status;
    if (req->rbody.len) {
        fe_req_resp_header(req, "Content-Type", FE_XML_CT);
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
    if (fe__job_failed(req)) {
        return;
    }
    m = rt__acl_req__unpack(NULL, req->job.value.len, req->job.value.data);
    if (!m) {
        fe_req_resp_error(req, RT_EINTERNAL, NULL);
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
    fe_acl_write(&req->rbody, &acl);
    fe__xml_ok(req, 200);
}

int fe_svc_set_acl_prepare(struct fe_req *req)
{
    Rt__AclReq msg = RT__ACL_REQ__INIT;
    Rt__SignedIdentifier sv[FE_ACL_MAX], *svp[FE_ACL_MAX];
    struct fe_acl acl;
    if (fe_acl_parse(req->body.len ? (const char *)req->body.data : "",
                     req->body.len, &acl) != 0) {
        fe_req_resp_error(req, RT_EXML, NULL);
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
    if (fe__job_failed(req)) {
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
    if (fe__job_failed(req)) {
        return;
    }
    p = rt__service_props__unpack(NULL, req->job.value.len,
                                  req->job.value.data);
    if (!p) {
        fe_req_resp_error(req, RT_EINTERNAL, NULL);
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
        fe_req_resp_error(req, RT_EXML, NULL);
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
    if (fe__job_failed(req)) {
        return;
    }
    rt_log(RT_LOG_INFO, "account %s: service properties set",
           req->path.account);
    req->status = 202; /* spec §3.6 */
}

int fe_svc_stats_prepare(struct fe_req *req)
{
    /* Azure serves it on the secondary address only ("only available on
     * the secondary location endpoint"): the primary answers 400
     * InvalidQueryParameterValue, as Azurite does. The Python SDK calls
     * the secondary by itself; the JS SDK calls the client's endpoint. */
    if (!req->path.secondary) {
        fe_req_resp_error(req, RT_EQUERYPARAM, NULL);
        return FE_API_RESPOND;
    }
    fe_svc_stats_write(&req->rbody, fe_req_now(req));
    fe__xml_ok(req, 200);
    return FE_API_RESPOND;
}

void fe_svc_stats_finish(struct fe_req *req)
{
    (void)req; /* never submitted */
}
