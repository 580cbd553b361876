/* The Table REST operations (docs/table-api-spec.md §3): request
 * validation, authentication, dispatch to an operation, and turning a
 * finished job into the response. Runs on the request's worker thread
 * with a request a transport filled (fe_req.h; fe_http.c in the server, a
 * unit test by hand); everything that needs the cluster goes through
 * req->job, which the caller runs (the worker's fe_route).
 *
 * Order of checks in fe_api_prepare (first failure answers):
 *   x-ms-version syntax (400 InvalidHeaderValue) -> account, host-style
 *   or path-style (400 InvalidUri) -> OPTIONS preflight (no auth) ->
 *   authentication (401/400/403) -> resource path (400) -> Host (400
 *   HostInformationNotPresent) -> query hygiene: a decoded NUL, or a value
 *   that is not UTF-8 (400) -> `timeout` (400) -> verb (405) ->
 *   X-HTTP-Method tunnelling (400 XMethod*) -> operation for (resource,
 *   verb) (405/501/400) -> Accept/$format on OData operations (415/400)
 *   -> writes on the read-only secondary (403) -> per-operation checks
 *   (bodies, keys, If-Match, $filter, $top, $select, version gates). */
#include "fe_api.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "fe_acl.h"
#include "fe_atom.h"
#include "fe_auth.h"
#include "fe_batch.h"
#include "fe_cors.h"
#include "fe_op.h"
#include "fe_req.h"
#include "fe_sas.h"
#include "fe_svc.h"
#include "rt.pb-c.h"
#include "rt_alloc.h"
#include "rt_entity.h"
#include "rt_err.h"
#include "rt_filter.h"
#include "rt_log.h"

/* One REST operation: prepare on the first pass (returns FE_API_RESPOND or
 * FE_API_SUBMIT), finish after the job (only for FE_API_SUBMIT). */
struct fe_api_op
{
    const char *name;
    int (*prepare)(struct fe_req *req);
    void (*finish)(struct fe_req *req);
    int write; /* changes data: refused on the read-only secondary */
};

#define FE_JSON_CT_NONE \
    "application/json;odata=nometadata;streaming=true;charset=utf-8"
#define FE_JSON_CT_MINIMAL \
    "application/json;odata=minimalmetadata;streaming=true;charset=utf-8"
#define FE_JSON_CT_FULL \
    "application/json;odata=fullmetadata;streaming=true;charset=utf-8"

/* ---- Small helpers -------------------------------------------------- */

static int fe__error(struct fe_req *req, int code, const char *msg)
{
    fe_req_resp_error(req, code, msg);
    return FE_API_RESPOND;
}

static const char *fe__content_type(enum fe_meta m)
{
    return m == FE_META_NONE   ? FE_JSON_CT_NONE
           : m == FE_META_FULL ? FE_JSON_CT_FULL
                               : FE_JSON_CT_MINIMAL;
}

static void fe__json_str(struct rt_buf *out, const char *s)
{
    rt_buf_append_u8(out, '"');
    fe_json_escape(out, s, strlen(s));
    rt_buf_append_u8(out, '"');
}

/* Preference-Applied echoes the honoured Prefer value (spec §3.2). */
static void fe__prefer_applied(struct fe_req *req)
{
    const char *v = fe_hdr_prefer_applied(req->prefer);
    if (v) {
        fe_req_resp_header(req, "Preference-Applied", v);
    }
}

/* An Atom request body this version still takes (fe_hdr_body_atom). */
static int fe__body_atom(struct fe_req *req)
{
    return fe_hdr_body_atom(fe_req_header(req, "Content-Type"),
                            req->xms_version);
}

static int fe__check_body_type(struct fe_req *req)
{
    return fe_hdr_body_type_v(fe_req_header(req, "Content-Type"),
                              req->xms_version);
}

/* Prefer (Create Table, Insert Entity only; spec §2, §3.2, §3.11): from
 * 2013-08-15 on; ignored (no Preference-Applied) for older versions. */
static enum fe_prefer fe__prefer(struct fe_req *req)
{
    if (req->xms_version && strcmp(req->xms_version, FE_VERSION_JSON) < 0) {
        return FE_PREFER_NONE;
    }
    return fe_hdr_prefer(fe_req_header(req, "Prefer"));
}

/* $select into req->select. */
static int fe__select(struct fe_req *req)
{
    const char *sel = fe_query_get(&req->query, "$select");
    if (!sel) {
        return 0;
    }
    /* $select arrived with 2011-08-18 (spec §6.3, §10). */
    if (req->xms_version && strcmp(req->xms_version, FE_VERSION_UPSERT) < 0) {
        return RT_EQUERYPARAM;
    }
    return fe_hdr_select(sel, &req->select, &req->nselect);
}

static void fe__odata_ctx(struct fe_req *req, struct fe_odata_ctx *ctx)
{
    memset(ctx, 0, sizeof(*ctx));
    ctx->root = req->root;
    ctx->account = req->path.account;
    ctx->table = req->job.table_name ? req->job.table_name : req->path.table;
    ctx->meta = req->meta;
    ctx->select = (const char *const *)req->select;
    ctx->nselect = req->nselect;
}

/* A job's error as the response (fe_req_resp_error logs it once). */
static void fe__job_error(struct fe_req *req, int code)
{
    if (!rt_err_is_rt(code)) {
        /* A libuv code leaking out of the RPC layer: 500, with context. */
        rt_log(RT_LOG_WARN, "%s on %s: %s", req->op->name,
               req->path.table ? req->path.table : "-", rt_strerror(code));
    }
    fe_req_resp_error(req, code, NULL);
}

/* Answers a failed job with its error and returns 1, or returns 0: the
 * first step of every finish. */
static int fe__job_failed(struct fe_req *req)
{
    if (req->job.status == 0) {
        return 0;
    }
    fe__job_error(req, req->job.status);
    return 1;
}

/* ---- Tables --------------------------------------------------------- */

static void fe__table_json(struct fe_req *req,
                           struct rt_buf *out,
                           const char *name,
                           int element)
{
    rt_buf_append_u8(out, '{');
    if (element && req->meta != FE_META_NONE) {
        rt_buf_append_str(out, "\"odata.metadata\":");
        rt_buf_append_u8(out, '"');
        fe_json_escape(out, req->root, strlen(req->root));
        rt_buf_append_str(out, "/$metadata#Tables/@Element\",");
    }
    if (req->meta == FE_META_FULL) {
        struct rt_buf id = RT_BUF_INIT;
        rt_buf_printf(&id, "%s.Tables", req->path.account);
        rt_buf_append_str(out, "\"odata.type\":");
        fe__json_str(out, rt_buf_cstr(&id));
        rt_buf_reset(&id);
        rt_buf_printf(&id, "%s/Tables('%s')", req->root, name);
        rt_buf_append_str(out, ",\"odata.id\":");
        fe__json_str(out, rt_buf_cstr(&id));
        rt_buf_reset(&id);
        rt_buf_printf(&id, "Tables('%s')", name);
        rt_buf_append_str(out, ",\"odata.editLink\":");
        fe__json_str(out, rt_buf_cstr(&id));
        rt_buf_append_u8(out, ',');
        rt_buf_free(&id);
    }
    rt_buf_append_str(out, "\"TableName\":");
    fe__json_str(out, name);
    rt_buf_append_u8(out, '}');
}

/* The one-table response of Create Table / Get Table. */
static void fe__table_response(struct fe_req *req, int created)
{
    struct rt_buf loc = RT_BUF_INIT;
    const char *name =
        req->job.table_name ? req->job.table_name : rt_buf_cstr(&req->s1);
    rt_buf_printf(&loc, "%s/Tables('%s')", req->root, name);
    if (created) {
        fe_req_resp_header(req, "Location", rt_buf_cstr(&loc));
        fe_req_resp_header(req, "DataServiceId", rt_buf_cstr(&loc));
        fe__prefer_applied(req);
    }
    rt_buf_free(&loc);
    if (created && req->prefer == FE_PREFER_NO_CONTENT) {
        req->status = 204;
        return;
    }
    req->status = created ? 201 : 200;
    if (req->atom) {
        fe_req_resp_header(req, "Content-Type", FE_ATOM_CT_ENTRY);
        fe_atom_write_table(&req->rbody, req->root, req->path.account, name, 1);
        return;
    }
    fe_req_resp_header(req, "Content-Type", fe__content_type(req->meta));
    fe__table_json(req, &req->rbody, name, 1);
}

/* The table @name (checked) as the job of Create Table. */
static int fe__create_table_job(struct fe_req *req, const char *name)
{
    rt_buf_append_str(&req->s1, name);
    req->prefer = fe__prefer(req);
    fe_req_job_kind(req, FE_JOB_CREATE_TABLE);
    req->job.account = req->path.account;
    req->job.table = rt_buf_cstr(&req->s1);
    return FE_API_SUBMIT;
}

/* Create Table with an Atom entry (spec §10): d:TableName, then the same
 * name rules as JSON. */
static int fe__create_table_atom(struct fe_req *req)
{
    char *name = NULL;
    const char *msg = NULL;
    int rc =
        fe_atom_parse_table(req->body.len ? (const char *)req->body.data : "",
                            req->body.len, &name);
    if (rc == 0) {
        rc = fe_table_name_check(name, strlen(name), &msg);
    }
    if (rc != 0) {
        free(name);
        return fe__error(req, rc, msg);
    }
    rc = fe__create_table_job(req, name);
    free(name);
    return rc;
}

/* Create Table — POST /Tables, body {"TableName":"t"} (spec §3.2). */
static int fe__create_table_prepare(struct fe_req *req)
{
    json_t *root, *name;
    json_error_t jerr;
    const char *s;
    const char *msg = NULL;
    int rc;

    if (fe__body_atom(req)) {
        return fe__create_table_atom(req);
    }
    rc = fe__check_body_type(req);
    if (rc != 0) {
        return fe__error(req, rc, NULL);
    }
    root = json_loadb(req->body.len ? (const char *)req->body.data : "",
                      req->body.len, JSON_REJECT_DUPLICATES, &jerr);
    if (!root || !json_is_object(root)) {
        json_decref(root);
        return fe__error(req, RT_EINVAL, NULL);
    }
    name = json_object_get(root, "TableName");
    if (!name || json_is_null(name)) {
        json_decref(root);
        return fe__error(req, RT_ENEEDVALUE, NULL);
    }
    if (!json_is_string(name)) {
        json_decref(root);
        return fe__error(req, RT_EINVAL, NULL);
    }
    s = json_string_value(name);
    rc = fe_table_name_check(s, json_string_length(name), &msg);
    if (rc == 0 && strlen(s) != json_string_length(name)) {
        rc = RT_EBADNAME; /* embedded NUL */
        msg = FE_MSG_NAME_CHARS;
    }
    if (rc != 0) {
        json_decref(root);
        return fe__error(req, rc, msg);
    }
    rc = fe__create_table_job(req, s);
    json_decref(root);
    return rc;
}

static void fe__create_table_finish(struct fe_req *req)
{
    if (fe__job_failed(req)) {
        return;
    }
    rt_log(RT_LOG_INFO, "created table %s/%s (id %llu)", req->path.account,
           req->job.table_name, (unsigned long long)req->job.table_id);
    fe__table_response(req, 1);
}

/* Answers a failed job on /Tables('t') and returns 1, or returns 0. There
 * the table is the resource: a missing one is ResourceNotFound, not
 * TableNotFound (spec §3.3). */
static int fe__table_job_failed(struct fe_req *req)
{
    int code = req->job.status;
    if (code == RT_ETABLENOTFOUND) {
        code = RT_ENOTFOUND;
    }
    if (code != 0) {
        fe__job_error(req, code);
        return 1;
    }
    return 0;
}

/* Delete Table — DELETE /Tables('t') (spec §3.3). */
static int fe__delete_table_prepare(struct fe_req *req)
{
    fe_req_job_init(req, FE_JOB_DELETE_TABLE);
    return FE_API_SUBMIT;
}

static void fe__delete_table_finish(struct fe_req *req)
{
    if (fe__table_job_failed(req)) {
        return;
    }
    rt_log(RT_LOG_INFO, "deleted table %s/%s", req->path.account,
           req->path.table);
    req->status = 204;
}

/* Get Table — GET /Tables('t'): the table as one element. */
static int fe__get_table_prepare(struct fe_req *req)
{
    fe_req_job_init(req, FE_JOB_GET_TABLE);
    return FE_API_SUBMIT;
}

static void fe__get_table_finish(struct fe_req *req)
{
    if (fe__table_job_failed(req)) {
        return;
    }
    fe__table_response(req, 0);
}

/* Parses $filter @text into req->filter (spec §6.1). Returns 0, or -1
 * with the error response set: 400 InvalidInput with the parser's message
 * (no RPC is ever sent for a bad filter). */
static int fe__filter(struct fe_req *req, const char *text)
{
    char msg[RT_ERRMSG_SIZE] = "";
    int rc = rt_filter_parse(text, strlen(text), &req->filter, msg);
    if (rc != 0) {
        rt_log(RT_LOG_DEBUG, "bad $filter: %s", msg);
        fe_req_resp_error(req, rc == RT_EINVAL ? RT_EINVAL : RT_EINTERNAL,
                          rc == RT_EINVAL && msg[0] ? msg : NULL);
        return -1;
    }
    return 0;
}

/* Query Tables' $filter (spec §3.1, §6.1): the full grammar, evaluated
 * here against a one-property entity {TableName: Edm.String} per table
 * (names compare ordinally, as created). */
static int fe__tables_filter_match(const struct fe_req *req, const char *name)
{
    struct rt_buf blob = RT_BUF_INIT;
    struct rt_props_writer w;
    struct rt_prop p;
    int m;

    if (!req->filter) {
        return 1;
    }
    memset(&p, 0, sizeof(p));
    p.name = "TableName";
    p.name_len = 9;
    p.type = RT_EDM_STRING;
    p.v.bytes.p = (const uint8_t *)name;
    p.v.bytes.n = strlen(name);
    rt_props_begin(&w, &blob);
    rt_props_add(&w, &p);
    rt_props_end(&w);
    m = rt_filter_eval(req->filter, "", 0, "", 0, 0, blob.data, blob.len);
    rt_buf_free(&blob);
    return m == 1;
}

/* The page size from $top (spec §6.3): FE_PAGE_MAX when absent, at most
 * FE_PAGE_MAX; 0 is an empty, final page (what Azure answers to $top=0).
 * Returns 0, or -1 with 400 InvalidQueryParameter set. */
static int fe__top(struct fe_req *req, unsigned *limit)
{
    const char *top = fe_query_get(&req->query, "$top");
    *limit = FE_PAGE_MAX;
    if (top && fe_hdr_top(top, FE_PAGE_MAX, limit) != 0) {
        fe_req_resp_error(req, RT_EQUERYPARAM, NULL);
        return -1;
    }
    return 0;
}

static void fe__query_tables_finish(struct fe_req *req);

/* Query Tables — GET /Tables (spec §3.1). */
static int fe__query_tables_prepare(struct fe_req *req)
{
    const char *next = fe_query_get(&req->query, "NextTableName");
    const char *filter = fe_query_get(&req->query, "$filter");
    unsigned limit;

    if (fe__top(req, &limit) != 0) {
        return FE_API_RESPOND;
    }
    if (filter && fe__filter(req, filter) != 0) {
        return FE_API_RESPOND;
    }
    if (limit == 0) {
        fe_req_job_kind(req, FE_JOB_LIST_TABLES); /* no tables, no next */
        fe__query_tables_finish(req);
        return FE_API_RESPOND;
    }
    for (const char *p = next ? next : ""; *p; p++) {
        rt_buf_append_u8(
            &req->s1, (uint8_t)(*p >= 'A' && *p <= 'Z' ? *p - 'A' + 'a' : *p));
    }
    fe_req_job_kind(req, FE_JOB_LIST_TABLES);
    req->job.account = req->path.account;
    req->job.list_start = rt_buf_cstr(&req->s1);
    req->job.limit = limit;
    return FE_API_SUBMIT;
}

/* Query Tables' feed (spec §10); continuation as for JSON. */
static void fe__query_tables_atom(struct fe_req *req)
{
    fe_atom_feed_begin(&req->rbody, req->root, "Tables");
    for (size_t i = 0; i < req->job.ntables; i++) {
        if (fe__tables_filter_match(req, req->job.tables[i].name)) {
            fe_atom_write_table(&req->rbody, req->root, req->path.account,
                                req->job.tables[i].name, 0);
        }
    }
    fe_atom_feed_end(&req->rbody);
    if (req->job.next_table) {
        fe_req_resp_header(req, "x-ms-continuation-NextTableName",
                           req->job.next_table);
    }
    req->status = 200;
    fe_req_resp_header(req, "Content-Type", FE_ATOM_CT_FEED);
}

static void fe__query_tables_finish(struct fe_req *req)
{
    struct rt_buf *b = &req->rbody;
    int first = 1;
    if (fe__job_failed(req)) {
        return;
    }
    if (req->atom) {
        fe__query_tables_atom(req);
        return;
    }
    rt_buf_append_u8(b, '{');
    if (req->meta != FE_META_NONE) {
        rt_buf_append_str(b, "\"odata.metadata\":\"");
        fe_json_escape(b, req->root, strlen(req->root));
        rt_buf_append_str(b, "/$metadata#Tables\",");
    }
    rt_buf_append_str(b, "\"value\":[");
    for (size_t i = 0; i < req->job.ntables; i++) {
        if (!fe__tables_filter_match(req, req->job.tables[i].name)) {
            continue;
        }
        if (!first) {
            rt_buf_append_u8(b, ',');
        }
        first = 0;
        fe__table_json(req, b, req->job.tables[i].name, 0);
    }
    rt_buf_append_str(b, "]}");
    if (req->job.next_table) {
        fe_req_resp_header(req, "x-ms-continuation-NextTableName",
                           req->job.next_table);
    }
    req->status = 200;
    fe_req_resp_header(req, "Content-Type", fe__content_type(req->meta));
}

/* ---- Entities ------------------------------------------------------- */

/* The key rules (fe_odata_check_keys); @body: the keys came from a body.
 * Returns 0, or -1 with the error response set. */
static int fe__check_keys(struct fe_req *req,
                          const char *pk,
                          size_t pklen,
                          const char *rk,
                          size_t rklen,
                          int body)
{
    int rc = fe_odata_check_keys(pk, pklen, rk, rklen, body);
    if (rc != 0) {
        fe_req_resp_error(req, rc, NULL);
        return -1;
    }
    return 0;
}

/* The request body as an entity into req->ent: an Atom entry (spec §10)
 * or JSON; the media type is checked first. Returns 0 or the code. */
static int fe__parse_body_entity(struct fe_req *req, char *errmsg)
{
    const char *body = req->body.len ? (const char *)req->body.data : "";
    int rc;
    if (fe__body_atom(req)) {
        return fe_atom_parse_entity(body, req->body.len, &req->ent, errmsg);
    }
    rc = fe__check_body_type(req);
    if (rc != 0) {
        return rc;
    }
    return fe_odata_parse_entity(body, req->body.len, &req->ent, errmsg);
}

/* Insert Entity — POST /{table} (spec §3.11). */
static int fe__insert_prepare(struct fe_req *req)
{
    char errmsg[RT_ERRMSG_SIZE] = "";
    struct fe_job_op *op;
    int rc = fe__parse_body_entity(req, errmsg);
    if (rc != 0) {
        rt_log(RT_LOG_DEBUG, "insert body rejected: %s", errmsg);
        return fe__error(req, rc, NULL);
    }
    if (!req->ent.pk || !req->ent.rk) {
        return fe__error(req, RT_ENEEDVALUE, NULL);
    }
    if (fe__check_keys(req, req->ent.pk, strlen(req->ent.pk), req->ent.rk,
                       strlen(req->ent.rk), 1) != 0) {
        return FE_API_RESPOND;
    }
    req->prefer = fe__prefer(req);
    fe_req_job_init(req, FE_JOB_WRITE);
    op = fe_job_add_op(&req->job, RT__OP_KIND__OP_INSERT, req->ent.pk,
                       req->ent.rk);
    /* Move the blob: the echo is rebuilt from it after the write. */
    op->props = req->ent.props;
    rt_buf_init(&req->ent.props);
    return FE_API_SUBMIT;
}

static void fe__insert_finish(struct fe_req *req)
{
    const struct fe_job_op *op = &req->job.ops[0];
    struct fe_odata_ctx ctx;
    struct rt_buf loc = RT_BUF_INIT;
    char etag[64];

    if (fe__job_failed(req)) {
        return;
    }
    fe_odata_etag(op->ticks, etag);
    fe_odata_entity_path(&loc, req->root, req->job.table_name, op->pk, op->rk);
    fe_req_resp_header(req, "ETag", etag);
    fe_req_resp_header(req, "Location", rt_buf_cstr(&loc));
    fe_req_resp_header(req, "DataServiceId", rt_buf_cstr(&loc));
    fe__prefer_applied(req);
    rt_buf_free(&loc);
    if (req->prefer == FE_PREFER_NO_CONTENT) {
        req->status = 204;
        return;
    }
    fe__odata_ctx(req, &ctx);
    if ((req->atom
             ? fe_atom_write_inserted(&req->rbody, &ctx, op->pk, op->rk,
                                      op->ticks, op->props.data, op->props.len)
             : fe_odata_write_inserted(&req->rbody, &ctx, op->pk, op->rk,
                                       op->ticks, op->props.data,
                                       op->props.len)) != 0) {
        fe_req_resp_error(req, RT_EINTERNAL, NULL);
        return;
    }
    req->status = 201;
    fe_req_resp_header(
        req, "Content-Type",
        req->atom ? FE_ATOM_CT_ENTRY : fe__content_type(req->meta));
}

/* Get Entity — GET /{table}(PartitionKey='p',RowKey='r') (spec §3.10). */
static int fe__get_entity_prepare(struct fe_req *req)
{
    if (fe__check_keys(req, req->path.pk, req->path.pklen, req->path.rk,
                       req->path.rklen, 0) != 0) {
        return FE_API_RESPOND;
    }
    if (fe__select(req) != 0) {
        return fe__error(req, RT_EQUERYPARAM, NULL);
    }
    fe_req_job_init(req, FE_JOB_GET);
    req->job.pk = req->path.pk;
    req->job.rk = req->path.rk;
    return FE_API_SUBMIT;
}

static void fe__get_entity_finish(struct fe_req *req)
{
    struct fe_odata_ctx ctx;
    char etag[64];

    /* A missing entity is RT_ENOTFOUND, "ResourceNotFound" as the service
     * answers, not the documented "EntityNotFound" (spec §12 item 1). */
    if (fe__job_failed(req)) {
        return;
    }
    fe__odata_ctx(req, &ctx);
    /* fe_odata_write_one also gives the ETag; the Atom entry is written
     * over its JSON (same checks on the stored value). */
    if (fe_odata_write_one(&req->rbody, &ctx, req->path.pk, req->path.rk,
                           req->job.value.data, req->job.value.len,
                           etag) != 0) {
        fe_req_resp_error(req, RT_EINTERNAL, NULL);
        return;
    }
    if (req->atom) {
        rt_buf_reset(&req->rbody);
        if (fe_atom_write_entry(&req->rbody, &ctx, req->path.pk,
                                strlen(req->path.pk), req->path.rk,
                                strlen(req->path.rk), req->job.value.data,
                                req->job.value.len, 1) != 0) {
            fe_req_resp_error(req, RT_EINTERNAL, NULL);
            return;
        }
    }
    fe_req_resp_header(req, "ETag", etag);
    fe_req_resp_header(
        req, "Content-Type",
        req->atom ? FE_ATOM_CT_ENTRY : fe__content_type(req->meta));
    req->status = 200;
}

/* A PartitionKey bound of the filter as a C string for fe_route, or NULL
 * (unbounded). Stored keys never contain U+0000 (spec §9), so a literal
 * holding one is cut there when it is a lower bound (a smaller start is
 * safe) and dropped when it is an upper bound (no early stop). An
 * exclusive bound is used as inclusive (rt_filter_bounds allows it). */
static char *fe__bound_dup(const struct rt_filter_bound *b, int upper)
{
    size_t n;
    if (!b->set) {
        return NULL;
    }
    n = b->n;
    if (memchr(b->s, 0, n)) {
        if (upper) {
            return NULL;
        }
        n = strlen(b->s);
    }
    return rt_xstrndup(b->s, n);
}

/* Response header @name: @key as a continuation token. */
static void fe__token_header(struct fe_req *req,
                             const char *name,
                             const struct rt_buf *key)
{
    struct rt_buf tok = RT_BUF_INIT;
    fe_token_encode(&tok, (const char *)key->data, key->len);
    fe_req_resp_header(req, name, rt_buf_cstr(&tok));
    rt_buf_free(&tok);
}

/* Query Entities — GET /{table}() (spec §3.9, §6.3, §6.4). */
static int fe__query_entities_prepare(struct fe_req *req)
{
    const char *filter = fe_query_get(&req->query, "$filter");
    const char *npk = fe_query_get(&req->query, "NextPartitionKey");
    const char *nrk = fe_query_get(&req->query, "NextRowKey");
    unsigned limit;

    if (fe__top(req, &limit) != 0) {
        return FE_API_RESPOND;
    }
    if (fe__select(req) != 0) {
        return fe__error(req, RT_EQUERYPARAM, NULL);
    }
    /* Validated here, before any RPC (spec §6.1). */
    if (filter && fe__filter(req, filter) != 0) {
        return FE_API_RESPOND;
    }
    fe_req_job_init(req, FE_JOB_SCAN);
    req->job.limit = limit;
    /* The servers project (ScanReq.select); fe_odata_ctx.select still
     * decides PartitionKey/RowKey/Timestamp. */
    req->job.select = (const char *const *)req->select;
    req->job.nselect = req->nselect;
    if (req->filter) {
        struct rt_filter_bounds fb;
        rt_filter_encode(req->filter, &req->fenc);
        req->job.filter = req->fenc.data;
        req->job.filter_len = req->fenc.len;
        rt_filter_bounds(req->filter, &fb);
        req->job.scan_empty = fb.empty;
        req->scan_lo = fe__bound_dup(&fb.pk_lo, 0);
        req->scan_hi = fe__bound_dup(&fb.pk_hi, 1);
        req->job.scan_lo = req->scan_lo;
        req->job.scan_hi = req->scan_hi;
    }
    if (limit == 0) {
        req->job.scan_empty = 1; /* the table is resolved, nothing read */
    }
    /* A `timeout` below the page budget shortens the page. */
    if (req->timeout_s && req->timeout_s * 1000u < FE_PAGE_BUDGET_MS) {
        req->job.budget_ms = req->timeout_s * 1000u;
    }
    if (npk && *npk) {
        /* Lenient (spec §6.4): NextRowKey may be missing or empty. */
        if (fe_token_decode(npk, &req->s1) != 0 ||
            (nrk && *nrk && fe_token_decode(nrk, &req->s2) != 0)) {
            return fe__error(req, RT_EINVAL, NULL);
        }
        req->job.has_start = 1;
        req->job.pk = rt_buf_cstr(&req->s1);
        req->job.rk = rt_buf_cstr(&req->s2);
    }
    return FE_API_SUBMIT;
}

/* Continuation headers of a scan page (JSON and Atom alike). */
static void fe__scan_tokens(struct fe_req *req)
{
    if (req->job.has_next) {
        fe__token_header(req, "x-ms-continuation-NextPartitionKey",
                         &req->job.next_pk);
        fe__token_header(req, "x-ms-continuation-NextRowKey",
                         &req->job.next_rk);
    }
}

/* Query Entities' feed (spec §10). */
static void fe__query_entities_atom(struct fe_req *req,
                                    const struct fe_odata_ctx *ctx)
{
    fe_atom_feed_begin(&req->rbody, req->root, ctx->table);
    for (size_t i = 0; i < req->job.nents; i++) {
        const struct fe_job_ent *e = &req->job.ents[i];
        if (fe_atom_write_entry(&req->rbody, ctx, e->pk, strlen(e->pk), e->rk,
                                strlen(e->rk), e->value, e->vlen, 0) != 0) {
            fe_req_resp_error(req, RT_EINTERNAL, NULL);
            return;
        }
    }
    fe_atom_feed_end(&req->rbody);
    fe__scan_tokens(req);
    req->status = 200;
    fe_req_resp_header(req, "Content-Type", FE_ATOM_CT_FEED);
}

static void fe__query_entities_finish(struct fe_req *req)
{
    struct rt_buf *b = &req->rbody;
    struct fe_odata_ctx ctx;
    if (fe__job_failed(req)) {
        return;
    }
    fe__odata_ctx(req, &ctx);
    if (req->atom) {
        fe__query_entities_atom(req, &ctx);
        return;
    }
    rt_buf_append_u8(b, '{');
    if (req->meta != FE_META_NONE) {
        rt_buf_append_str(b, "\"odata.metadata\":\"");
        fe_json_escape(b, req->root, strlen(req->root));
        rt_buf_append_str(b, "/$metadata#");
        fe_json_escape(b, ctx.table, strlen(ctx.table));
        rt_buf_append_str(b, "\",");
    }
    rt_buf_append_str(b, "\"value\":[");
    for (size_t i = 0; i < req->job.nents; i++) {
        const struct fe_job_ent *e = &req->job.ents[i];
        if (i) {
            rt_buf_append_u8(b, ',');
        }
        if (fe_odata_write_entity(b, &ctx, e->pk, strlen(e->pk), e->rk,
                                  strlen(e->rk), e->value, e->vlen, 0) != 0) {
            fe_req_resp_error(req, RT_EINTERNAL, NULL);
            return;
        }
    }
    rt_buf_append_str(b, "]}");
    fe__scan_tokens(req);
    req->status = 200;
    fe_req_resp_header(req, "Content-Type", fe__content_type(req->meta));
}

/* Update / Merge / Delete / Insert-Or-Replace / Insert-Or-Merge
 * (spec §3.12-3.15): the verb, If-Match and the version pick the op kind
 * (fe_op.h). */
static int fe__modify_prepare(struct fe_req *req, enum fe_op_verb verb)
{
    const char *im = fe_req_header(req, "If-Match");
    int is_delete = verb == FE_OP_DELETE;
    uint64_t ticks = 0;
    int any = 0;
    int kind;
    struct fe_job_op *op;
    char errmsg[RT_ERRMSG_SIZE] = "";
    int rc;

    if (fe__check_keys(req, req->path.pk, req->path.pklen, req->path.rk,
                       req->path.rklen, 0) != 0) {
        return FE_API_RESPOND;
    }
    if (im) {
        /* Empty: 412 (Azurite); not a weak ETag: 400 InvalidInput. */
        rc = fe_hdr_if_match(im, &ticks, &any);
        if (rc != 0) {
            return fe__error(req, rc, NULL);
        }
    }
    /* DELETE, and before 2011-08-18 PUT and MERGE, need If-Match. */
    rc = fe_op_kind(verb, im != NULL, req->xms_version, &kind);
    if (rc != 0) {
        return fe__error(req, rc, NULL);
    }
    if (!is_delete) {
        rc = fe__parse_body_entity(req, errmsg);
        if (rc != 0) {
            rt_log(RT_LOG_DEBUG, "%s body rejected: %s", req->op->name, errmsg);
            return fe__error(req, rc, NULL);
        }
        /* Keys come from the URL (Azurite: URL wins over the body). */
    }
    fe_req_job_init(req, FE_JOB_WRITE);
    op = fe_job_add_op(&req->job, kind, req->path.pk, req->path.rk);
    op->if_match_any = any;
    op->if_match = any ? 0 : ticks;
    if (!is_delete) {
        op->props = req->ent.props;
        rt_buf_init(&req->ent.props);
    }
    return FE_API_SUBMIT;
}

static int fe__put_prepare(struct fe_req *req)
{
    return fe__modify_prepare(req, FE_OP_PUT);
}

static int fe__merge_prepare(struct fe_req *req)
{
    return fe__modify_prepare(req, FE_OP_MERGE);
}

static int fe__delete_entity_prepare(struct fe_req *req)
{
    return fe__modify_prepare(req, FE_OP_DELETE);
}

static void fe__modify_finish(struct fe_req *req)
{
    const struct fe_job_op *op = &req->job.ops[0];
    char etag[64];
    if (fe__job_failed(req)) {
        return;
    }
    if (op->kind != RT__OP_KIND__OP_DELETE) {
        fe_odata_etag(op->ticks, etag);
        fe_req_resp_header(req, "ETag", etag);
    }
    req->status = 204;
}

static const struct fe_api_op fe__op_query_tables = {
    "QueryTables", fe__query_tables_prepare, fe__query_tables_finish, 0};
static const struct fe_api_op fe__op_create_table = {
    "CreateTable", fe__create_table_prepare, fe__create_table_finish, 1};
static const struct fe_api_op fe__op_delete_table = {
    "DeleteTable", fe__delete_table_prepare, fe__delete_table_finish, 1};
static const struct fe_api_op fe__op_get_table = {
    "GetTable", fe__get_table_prepare, fe__get_table_finish, 0};
static const struct fe_api_op fe__op_query_entities = {
    "QueryEntities", fe__query_entities_prepare, fe__query_entities_finish, 0};
static const struct fe_api_op fe__op_insert = {
    "InsertEntity", fe__insert_prepare, fe__insert_finish, 1};
static const struct fe_api_op fe__op_get_entity = {
    "GetEntity", fe__get_entity_prepare, fe__get_entity_finish, 0};
static const struct fe_api_op fe__op_put = {"UpdateEntity", fe__put_prepare,
                                            fe__modify_finish, 1};
static const struct fe_api_op fe__op_merge = {"MergeEntity", fe__merge_prepare,
                                              fe__modify_finish, 1};
static const struct fe_api_op fe__op_delete_entity = {
    "DeleteEntity", fe__delete_entity_prepare, fe__modify_finish, 1};
/* fe_svc.c: the storage-XML operations (no DataServiceVersion). */
static const struct fe_api_op fe__op_get_acl = {
    "GetTableAcl", fe_svc_get_acl_prepare, fe_svc_get_acl_finish, 0};
static const struct fe_api_op fe__op_set_acl = {
    "SetTableAcl", fe_svc_set_acl_prepare, fe_svc_set_acl_finish, 1};
static const struct fe_api_op fe__op_get_props = {"GetServiceProperties",
                                                  fe_svc_get_props_prepare,
                                                  fe_svc_get_props_finish, 0};
static const struct fe_api_op fe__op_set_props = {"SetServiceProperties",
                                                  fe_svc_set_props_prepare,
                                                  fe_svc_set_props_finish, 1};
static const struct fe_api_op fe__op_stats = {
    "GetServiceStats", fe_svc_stats_prepare, fe_svc_stats_finish, 0};
static const struct fe_api_op fe__op_batch = {
    "EntityGroupTransaction", fe_batch_prepare, fe_batch_finish, 1};

/* ---- Dispatch ------------------------------------------------------- */

static int fe__known_verb(const char *m)
{
    static const char *const verbs[] = {"GET",   "HEAD",  "POST",   "PUT",
                                        "MERGE", "PATCH", "DELETE", "OPTIONS"};
    for (size_t i = 0; i < sizeof(verbs) / sizeof(verbs[0]); i++) {
        if (strcmp(m, verbs[i]) == 0) {
            return 1;
        }
    }
    return 0;
}

/* Picks the operation for (resource, verb); NULL with *code set when
 * there is none. */
static const struct fe_api_op *fe__route_op(struct fe_req *req,
                                            const char *verb,
                                            int *code)
{
    const struct fe_path *p = &req->path;
    int get = strcmp(verb, "GET") == 0;
    int post = strcmp(verb, "POST") == 0;
    int del = strcmp(verb, "DELETE") == 0;
    int put = strcmp(verb, "PUT") == 0;
    int merge = strcmp(verb, "MERGE") == 0 || strcmp(verb, "PATCH") == 0;

    *code = RT_EMETHOD;
    switch (p->kind) {
        case FE_RES_SERVICE: {
            const char *restype = fe_query_get(&req->query, "restype");
            const char *comp = fe_query_get(&req->query, "comp");
            if (restype && strcmp(restype, "service") == 0 && comp &&
                strcmp(comp, "properties") == 0) {
                return get ? &fe__op_get_props : put ? &fe__op_set_props : NULL;
            }
            if (restype && strcmp(restype, "service") == 0 && comp &&
                strcmp(comp, "stats") == 0) {
                return get ? &fe__op_stats : NULL;
            }
            *code = RT_EURI;
            return NULL;
        }
        case FE_RES_TABLES:
            return get    ? &fe__op_query_tables
                   : post ? &fe__op_create_table
                          : NULL;
        case FE_RES_TABLE_ONE:
            return del ? &fe__op_delete_table : get ? &fe__op_get_table : NULL;
        case FE_RES_TABLE:
            if (fe_query_get(&req->query, "comp")) {
                if (strcmp(fe_query_get(&req->query, "comp"), "acl") == 0) {
                    return get ? &fe__op_get_acl : put ? &fe__op_set_acl : NULL;
                }
                *code = RT_ENOTIMPL; /* other comp= values */
                return NULL;
            }
            return get ? &fe__op_query_entities : post ? &fe__op_insert : NULL;
        case FE_RES_ENTITY:
            return get     ? &fe__op_get_entity
                   : put   ? &fe__op_put
                   : merge ? &fe__op_merge
                   : del   ? &fe__op_delete_entity
                           : NULL;
        case FE_RES_BATCH:
            return post ? &fe__op_batch : NULL; /* fe_batch.c */
        default:
            *code = RT_EURI;
            return NULL;
    }
}

/* OPTIONS: a CORS preflight needs no auth; the account's CORS rules from
 * the map allow or refuse it (spec §3.8). */
static int fe__preflight(struct fe_req *req)
{
    return fe_cors_preflight(req);
}

/* Returns 0 when authenticated, -1 with the error response set. */
static int fe__authenticate(struct fe_req *req)
{
    struct fe_auth_req ar;
    char why[RT_ERRMSG_SIZE] = "";
    int rc;

    if (fe_query_get(&req->query, "sig")) {
        /* spec §7.3/§7.4; "si" reads the map's stored policies. */
        return fe_sas_authenticate(req, fe_acl_policy_lookup);
    }
    memset(&ar, 0, sizeof(ar));
    ar.verb = req->method;
    ar.authorization = fe_req_header(req, "Authorization");
    ar.content_md5 = fe_req_header(req, "Content-MD5");
    ar.content_type = fe_req_header(req, "Content-Type");
    ar.x_ms_date = fe_req_header(req, "x-ms-date");
    ar.date = fe_req_header(req, "Date");
    ar.raw_path = req->raw_path;
    ar.raw_path_len = req->raw_path_len;
    ar.comp = fe_query_get(&req->query, "comp");
    ar.account = req->path.account;
    /* Host-style: the raw path holds no account segment. */
    ar.acct_seg = req->path.host_style ? NULL : req->path.acct_seg;
    ar.now = fe_req_now(req);
    rc = fe_auth_verify(req->accounts, &ar, why);
    if (rc == 0) {
        return 0;
    }
    rt_log(RT_LOG_INFO, "auth failed for %s %s: %s", req->method, req->raw_path,
           why);
    fe_req_resp_error(req, rc, NULL);
    if (rc == RT_ENOAUTH) {
        fe_req_resp_header(req, "WWW-Authenticate", "SharedKey");
    }
    return -1;
}

/* Addressing (spec §1.1): host-style when the Host header is a DNS name
 * (account = first label), else path-style (account = first segment). When
 * the host-style reading fails (account not configured, or a path that is
 * no host-style resource, e.g. two segments) and the first path segment
 * is a configured account, the request is path-style: path-style URLs keep
 * working through a DNS name (rt.example.com:10002/devstoreaccount1/...).
 * Returns fe_path_parse()'s code. */
static int fe__parse_path(struct fe_req *req, const char *host)
{
    const struct fe_accounts *accts = req->accounts;
    const char *label;
    size_t llen;
    struct fe_path alt;
    int rc, alt_rc;

    if (!fe_url_host_style(host, &label, &llen)) {
        return fe_path_parse(req->raw_path, req->raw_path_len, &req->path);
    }
    rc = fe_path_parse_host(label, llen, req->raw_path, req->raw_path_len,
                            &req->path);
    if (rc == 0 && req->path.account_ok &&
        fe_accounts_find(accts, req->path.account)) {
        return rc;
    }
    fe_path_init(&alt);
    alt_rc = fe_path_parse(req->raw_path, req->raw_path_len, &alt);
    if (alt.account_ok && fe_accounts_find(accts, alt.account)) {
        fe_path_free(&req->path);
        req->path = alt;
        return alt_rc;
    }
    fe_path_free(&alt);
    return rc;
}

/* "{scheme}://{Host}" (host-style) or "{scheme}://{Host}/{account
 * segment}" (path-style): odata.metadata, odata.id, Location. The scheme
 * is https on our HTTPS listener or behind a proxy that says so
 * (X-Forwarded-Proto), else http. */
static void fe__set_root(struct fe_req *req, const char *host)
{
    const char *proto = fe_req_header(req, "X-Forwarded-Proto");
    const char *scheme = req->tls || (proto && strcasecmp(proto, "https") == 0)
                             ? "https://"
                             : "http://";
    size_t sl = strlen(scheme), hl = strlen(host);
    size_t al = req->path.host_style ? 0 : strlen(req->path.acct_seg);
    char *p = rt_xmalloc(sl + hl + 1 + al + 1);
    req->root = p;
    memcpy(p, scheme, sl);
    p += sl;
    memcpy(p, host, hl);
    p += hl;
    if (!req->path.host_style) {
        *p++ = '/';
        memcpy(p, req->path.acct_seg, al);
        p += al;
    }
    *p = '\0';
}

/* OData operations negotiate JSON (Accept/$format); the storage-XML ones
 * (service properties/stats, ?comp=acl) do not. */
static int fe__odata_request(struct fe_req *req)
{
    return req->path.kind != FE_RES_SERVICE &&
           !fe_query_get(&req->query, "comp");
}

/* Verb tunnelling (spec §2, §8.2): POST + one X-HTTP-Method of MERGE, PUT
 * or DELETE. Returns 0 (*verb set), or -1 with the error response set. */
static int fe__xmethod(struct fe_req *req, const char **verb)
{
    const char *xm = fe_req_header(req, "X-HTTP-Method");
    if (!xm) {
        return 0;
    }
    if (strcmp(req->method, "POST") != 0) {
        fe_req_resp_error(req, RT_EXMETHODPOST, NULL);
        return -1;
    }
    if (fe_req_header_count(req, "X-HTTP-Method") != 1) {
        fe_req_resp_error(req, RT_EXMETHODCOUNT, NULL);
        return -1;
    }
    if (strcmp(xm, "MERGE") != 0 && strcmp(xm, "PUT") != 0 &&
        strcmp(xm, "DELETE") != 0) {
        fe_req_resp_error(req, RT_EXMETHODVALUE, NULL);
        return -1;
    }
    *verb = xm;
    return 0;
}

/* Query parameters are used as C strings from here on, so a decoded NUL
 * (which would silently cut a value) and, in values, bytes that are not
 * UTF-8 are refused (spec §8, §9): 400 InvalidInput for $filter (like
 * every other bad filter), 400 InvalidQueryParameterValue for the rest.
 * SAS fields were checked before (fe_sas_authenticate: 403). Returns 0,
 * or -1 with the error response set. */
static int fe__check_query(struct fe_req *req)
{
    int why;
    size_t bad = fe_query_check(&req->query, &why);
    const struct fe_query_kv *kv;
    if (bad == 0) {
        return 0;
    }
    kv = &req->query.kv[bad - 1];
    rt_log(RT_LOG_DEBUG, "query parameter #%zu: %s", bad,
           why == FE_QUERY_NUL ? "NUL byte" : "not UTF-8");
    if (kv->key_len == 7 && memcmp(kv->key, "$filter", 7) == 0) {
        fe_req_resp_error(req, RT_EINVAL,
                          why == FE_QUERY_NUL
                              ? "The $filter holds a NUL character."
                              : "The $filter is not valid UTF-8.");
    } else {
        fe_req_resp_error(req, RT_EQUERYPARAM, NULL);
    }
    return -1;
}

static int fe__api_prepare(struct fe_req *req)
{
    const char *v = fe_req_header(req, "x-ms-version");
    const char *host = fe_req_header(req, "Host");
    const char *timeout;
    const char *verb = req->method;
    const struct fe_api_op *op;
    int path_rc, rc, code;

    if (v && fe_hdr_version_check(v) != 0) {
        return fe__error(req, RT_EHEADER, NULL);
    }
    req->xms_version = v;
    /* Python's path-style secondary URLs (fe_url.h). */
    req->raw_path_len = fe_url_secondary_fix(req->raw_path, req->raw_path_len);
    path_rc = fe__parse_path(req, host);
    if (!req->path.account_ok) {
        return fe__error(req, RT_EURI, NULL);
    }
    fe_svc_classify(req); /* ACL / service: storage XML errors */
    /* AtomPub (spec §10) is decided from the headers alone, before
     * authentication, so that every error of the request has its form. */
    req->atom = fe__odata_request(req) &&
                fe_hdr_atom(fe_req_header(req, "Accept"),
                            fe_query_get(&req->query, "$format"),
                            fe_req_header(req, "Content-Type"), v);
    if (strcmp(req->method, "OPTIONS") == 0) {
        return fe__preflight(req);
    }
    if (fe__authenticate(req) != 0) {
        if (path_rc == 0) {
            /* Azure's metrics count an authentication failure under the
             * operation it was for. */
            req->op_hint = fe__route_op(req, req->method, &code);
        }
        return FE_API_RESPOND;
    }
    if (path_rc != 0) {
        return fe__error(req, path_rc, req->path.errmsg);
    }
    if (!host || !*host) {
        return fe__error(req, RT_EHOST, NULL);
    }
    fe__set_root(req, host);
    if (fe__check_query(req) != 0) {
        return FE_API_RESPOND;
    }
    /* timeout=N seconds (spec §2): positive, clamped to 30. */
    timeout = fe_query_get(&req->query, "timeout");
    if (timeout && fe_hdr_timeout(timeout, &req->timeout_s) != 0) {
        return fe__error(req, RT_EQUERYPARAM, NULL);
    }
    if (!fe__known_verb(req->method)) {
        return fe__error(req, RT_EVERB, NULL);
    }
    if (fe__xmethod(req, &verb) != 0) {
        return FE_API_RESPOND;
    }
    op = fe__route_op(req, verb, &code);
    if (!op) {
        return fe__error(req, code, NULL);
    }
    if (fe__odata_request(req) && req->atom) {
        /* Atom answers; JSON asked for before 2013-08-15 is still
         * refused (JsonFormatNotSupported, now as an Atom error). */
        rc = fe_hdr_meta_v(fe_req_header(req, "Accept"),
                           fe_query_get(&req->query, "$format"),
                           req->xms_version, &req->meta);
        req->meta = FE_META_MINIMAL; /* unused: the response is Atom */
        if (rc == RT_EJSONNOTSUPPORTED) {
            return fe__error(req, rc, NULL);
        }
    } else if (fe__odata_request(req)) {
        rc = fe_hdr_meta_v(fe_req_header(req, "Accept"),
                           fe_query_get(&req->query, "$format"),
                           req->xms_version, &req->meta);
        if (rc != 0) {
            return fe__error(req, rc, NULL);
        }
    }
    if (op->write && req->path.secondary) {
        return fe__error(req, RT_EAUTHZ, NULL); /* read-only secondary */
    }
    if (fe_sas_authorize(req, verb) != 0) {
        return FE_API_RESPOND; /* SAS permission / resource type */
    }
    req->op = op;
    rc = op->prepare(req);
    if (rc == FE_API_SUBMIT && fe_sas_check_job(req) != 0) {
        rc = FE_API_RESPOND; /* SAS key range / per-op permission */
    }
    req->job_used = rc == FE_API_SUBMIT;
    return rc;
}

int fe_api_prepare(struct fe_req *req)
{
    int rc = fe__api_prepare(req);
    if (rc == FE_API_RESPOND) {
        fe_cors_headers(req); /* CORS on responses (spec §3.8) */
    }
    return rc;
}

void fe_api_finish(struct fe_req *req)
{
    if (req->job.status == RT_ECANCELED) {
        fe_req_resp_error(req, RT_EBUSY, NULL); /* shutting down */
    } else {
        fe_sas_filter_scan(req); /* SAS key range end (fe_sas.c) */
        req->op->finish(req);
    }
    fe_cors_headers(req);
}

const char *fe_api_op_name(const struct fe_req *req)
{
    const struct fe_api_op *op = req->op ? req->op : req->op_hint;
    return op ? op->name : NULL;
}

void fe_api_req_free(struct fe_req *req)
{
    fe_sas_free(req);
    free(req->root);
    free(req->select);
    rt_filter_free(req->filter);
    rt_buf_free(&req->fenc);
    free(req->scan_lo);
    free(req->scan_hi);
    req->root = NULL;
    req->select = NULL;
    req->filter = NULL;
    req->scan_lo = NULL;
    req->scan_hi = NULL;
}
