/* Request: building a request, reading its headers and building its
 * response, without any HTTP library (the contract is in fe_req.h).
 *
 * Header lookups walk the list the transport filled once, in arrival
 * order, comparing lengths first and then names case-insensitively, as
 * libmicrohttpd's own lookup does; a request carries a dozen headers. */
#include "fe_req.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "fe_atom.h"
#include "fe_xml.h"
#include "rt_alloc.h"
#include "rt_err.h"
#include "rt_log.h"
#include "rt_time.h"

/* ---- Building a request --------------------------------------------- */

void fe_req_reset(struct fe_req *req)
{
    struct rt_buf keep[8];
    struct fe_query q = req->query; /* emptied by fe_req_clear */
    struct fe_req_hdr *in = req->in;
    size_t in_cap = req->in_cap;

    keep[0] = req->pathbuf;
    keep[1] = req->body;
    keep[2] = req->hdrs;
    keep[3] = req->rbody;
    keep[4] = req->s1;
    keep[5] = req->s2;
    keep[6] = req->fenc;
    keep[7] = req->job.value;
    memset(req, 0, sizeof(*req));
    req->pathbuf = keep[0];
    req->body = keep[1];
    req->hdrs = keep[2];
    req->rbody = keep[3];
    req->s1 = keep[4];
    req->s2 = keep[5];
    req->fenc = keep[6];
    req->query = q;
    req->in = in;
    req->in_cap = in_cap;

    fe_hdr_guid(req->reqid);
    fe_path_init(&req->path);
    fe_entity_in_init(&req->ent);
    fe_job_init(&req->job, FE_JOB_GET);
    req->job.value = keep[7];
    memcpy(req->version, FE_VERSION_DEFAULT, sizeof(FE_VERSION_DEFAULT));
    req->odata = 1;
}

void fe_req_set_path(struct fe_req *req, const char *url)
{
    size_t n;
    /* Absolute-form request target: keep only the path. */
    if (strncmp(url, "http://", 7) == 0 || strncmp(url, "https://", 8) == 0) {
        const char *p = strstr(url, "//") + 2;
        p = strchr(p, '/');
        url = p ? p : "/";
    }
    n = strlen(url);
    rt_buf_reset(&req->pathbuf);
    rt_buf_append(&req->pathbuf, url, n);
    req->raw_path = (char *)rt_buf_cstr(&req->pathbuf);
    req->raw_path_len = n;
}

void fe_req_add_header(struct fe_req *req, const char *name, const char *value)
{
    if (req->nin == req->in_cap) {
        size_t cap = req->in_cap ? 2 * req->in_cap : 16;
        req->in = rt_xrealloc(req->in, cap * sizeof(*req->in));
        req->in_cap = cap;
    }
    req->in[req->nin].name = name;
    req->in[req->nin].name_len = strlen(name);
    req->in[req->nin].value = value;
    req->nin++;
}

void fe_req_headers_done(struct fe_req *req)
{
    const char *v = fe_req_header(req, "x-ms-version");
    if (!v || fe_hdr_version_check(v) != 0 ||
        strlen(v) >= sizeof(req->version)) {
        v = NULL;
    }
    memcpy(req->version, v ? v : FE_VERSION_DEFAULT,
           strlen(v ? v : FE_VERSION_DEFAULT) + 1);
    /* The form of errors raised before fe_api_prepare (413, an over-long
     * URL or header block): AtomPub when the headers ask for it, except on
     * the storage-XML operations (?comp=). fe_api_prepare decides again
     * once the path is known. */
    req->atom = !fe_query_get(&req->query, "comp") &&
                fe_hdr_atom(fe_req_header(req, "Accept"),
                            fe_query_get(&req->query, "$format"),
                            fe_req_header(req, "Content-Type"), v);
}

void fe_req_clear(struct fe_req *req, size_t keep_max)
{
    struct rt_buf value = req->job.value; /* an entity per GET: kept */
    rt_buf_init(&req->job.value);
    fe_job_free(&req->job);
    rt_buf_recycle(&value, keep_max);
    req->job.value = value;
    fe_path_free(&req->path);
    fe_entity_in_free(&req->ent);
    fe_query_recycle(&req->query, keep_max);
    req->nin = 0;
    rt_buf_recycle(&req->pathbuf, keep_max);
    rt_buf_recycle(&req->body, keep_max);
    rt_buf_recycle(&req->hdrs, keep_max);
    rt_buf_recycle(&req->rbody, keep_max);
    rt_buf_recycle(&req->s1, keep_max);
    rt_buf_recycle(&req->s2, keep_max);
    rt_buf_recycle(&req->fenc, keep_max);
}

void fe_req_fini(struct fe_req *req)
{
    fe_query_free(&req->query);
    free(req->in);
    req->in = NULL;
    req->nin = req->in_cap = 0;
    rt_buf_free(&req->pathbuf);
    rt_buf_free(&req->body);
    rt_buf_free(&req->hdrs);
    rt_buf_free(&req->rbody);
    rt_buf_free(&req->s1);
    rt_buf_free(&req->s2);
    rt_buf_free(&req->fenc);
    fe_job_free(&req->job);
}

/* ---- Reading the request -------------------------------------------- */

const char *fe_req_header(const struct fe_req *req, const char *name)
{
    size_t n = strlen(name);
    for (size_t i = 0; i < req->nin; i++) {
        if (req->in[i].name_len == n &&
            strncasecmp(req->in[i].name, name, n) == 0) {
            return req->in[i].value;
        }
    }
    return NULL;
}

int fe_req_header_count(const struct fe_req *req, const char *name)
{
    size_t n = strlen(name);
    int count = 0;
    for (size_t i = 0; i < req->nin; i++) {
        if (req->in[i].name_len == n &&
            strncasecmp(req->in[i].name, name, n) == 0) {
            count++;
        }
    }
    return count;
}

int64_t fe_req_now(const struct fe_req *req)
{
    (void)req;
    return (int64_t)time(NULL);
}

void fe_req_job_kind(struct fe_req *req, enum fe_job_kind kind)
{
    struct rt_buf value = req->job.value; /* its memory is kept */
    rt_buf_reset(&value);
    fe_job_init(&req->job, kind);
    req->job.value = value;
}

void fe_req_job_init(struct fe_req *req, enum fe_job_kind kind)
{
    fe_req_job_kind(req, kind);
    req->job.account = req->path.account;
    req->job.table = req->path.table;
}

/* ---- Building the response ------------------------------------------ */

const char *fe_req_dsv(const struct fe_req *req)
{
    if (!req->atom) {
        return "3.0;";
    }
    return req->nselect ? "2.0;" : "1.0;";
}

void fe_req_resp_header(struct fe_req *req, const char *name, const char *value)
{
    rt_buf_append(&req->hdrs, name, strlen(name) + 1);
    rt_buf_append(&req->hdrs, value, strlen(value) + 1);
}

void fe_req_resp_error(struct fe_req *req, int code, const char *msg)
{
    fe_req_resp_error_as(req, rt_err_http_status(code), rt_err_azure_code(code),
                         msg ? msg : rt_err_client_message(code));
}

void fe_req_resp_error_as(struct fe_req *req,
                          int status,
                          const char *azure,
                          const char *msg)
{
    char when[RT_TIME_ISO_SIZE];
    struct rt_buf text = RT_BUF_INIT;

    rt_time_format_iso7(rt_time_now_ticks(), when);
    rt_buf_append_str(&text, msg);
    rt_buf_append_str(&text, "\nRequestId:");
    rt_buf_append_str(&text, req->reqid);
    rt_buf_append_str(&text, "\nTime:");
    rt_buf_append_str(&text, when);
    req->status = status;
    rt_buf_reset(&req->hdrs);
    rt_buf_reset(&req->rbody);
    fe_req_resp_header(req, "x-ms-error-code", azure);
    if (req->xml_errors) {
        fe_req_resp_header(req, "Content-Type", "application/xml");
        rt_buf_append_str(&req->rbody,
                          "<?xml version=\"1.0\" encoding=\"utf-8\"?><Error>"
                          "<Code>");
        fe_xml_escape(&req->rbody, azure);
        rt_buf_append_str(&req->rbody, "</Code><Message>");
        fe_xml_escape(&req->rbody, rt_buf_cstr(&text));
        rt_buf_append_str(&req->rbody, "</Message></Error>");
    } else if (req->atom) {
        fe_req_resp_header(req, "Content-Type", FE_ATOM_CT_ERROR);
        fe_atom_write_error(&req->rbody, azure, rt_buf_cstr(&text));
    } else {
        fe_req_resp_header(req, "Content-Type",
                           "application/json;odata=minimalmetadata;"
                           "streaming=true;charset=utf-8");
        rt_buf_append_str(&req->rbody, "{\"odata.error\":{\"code\":\"");
        fe_json_escape(&req->rbody, azure, strlen(azure));
        rt_buf_append_str(&req->rbody,
                          "\",\"message\":{\"lang\":\"en-US\",\"value\":\"");
        fe_json_escape(&req->rbody, (const char *)text.data, text.len);
        rt_buf_append_str(&req->rbody, "\"}}}");
    }
    rt_buf_free(&text);
    /* Errors: 5xx at warn; 4xx at info, except the outcomes clients
     * provoke on purpose all day (404, 409, 412: *IfNotExists, ETags). */
    if (req->status >= 500 && req->status != 501) {
        rt_log(RT_LOG_WARN, "%s %s -> %d %s", req->method, req->raw_path,
               req->status, azure);
    } else if (req->status == 404 || req->status == 409 || req->status == 412) {
        rt_log(RT_LOG_DEBUG, "%s %s -> %d %s", req->method, req->raw_path,
               req->status, azure);
    } else {
        rt_log(RT_LOG_INFO, "%s %s -> %d %s", req->method, req->raw_path,
               req->status, azure);
    }
}
