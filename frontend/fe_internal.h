/* Front-end internals shared by fe_http.c (libmicrohttpd glue, the
 * HTTP-thread <-> loop-thread bridge, response assembly) and fe_api.c (the
 * Table REST operations).
 *
 * Life of a request (struct fe_req), threads in brackets:
 *  1. [MHD] first access-handler call: fe_req created, raw path and
 *     decoded query copied; Content-Length above --max-body -> 413 now.
 *  2. [MHD] body chunks accumulate in req->body (over the limit: discarded,
 *     413 at the end).
 *  3. [MHD] final call: fe_api_prepare() validates, authenticates and either
 *     fills the response (FE_API_RESPOND) or fills req->job (FE_API_SUBMIT).
 *     To submit, the connection is suspended, then the request is queued
 *     and the loop woken with uv_async_send.
 *  4. [loop] fe_route runs the job; its done_cb stores nothing but the
 *     phase (the job itself holds the copied reply) and resumes the
 *     connection.
 *  5. [MHD] the handler runs again: fe_api_finish() turns the job into the
 *     response (all JSON is written here, never on the loop thread), which
 *     is queued.
 *  6. [MHD] MHD_OPTION_NOTIFY_COMPLETED drops the HTTP thread's reference.
 * The loop holds its own reference from queueing until after it resumed the
 * connection, so whichever side finishes last frees the request. MHD never
 * completes a suspended connection while the daemon runs, and shutdown
 * resumes (cancels) every queued or in-flight request before the daemon is
 * stopped, so the loop never resumes a connection MHD has closed. */
#ifndef FE_INTERNAL_H
#define FE_INTERNAL_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "fe_auth.h"
#include "fe_hdr.h"
#include "fe_odata.h"
#include "fe_route.h"
#include "fe_url.h"
#include "rt_buf.h"

struct rt_filter;

struct MHD_Connection;
struct fe_http;

/* Settings the HTTP threads read (immutable after start). */
struct fe_http_cfg {
    const char *listen; /* "host:port" */
    unsigned threads;
    size_t max_body;
    const struct fe_accounts *accounts;
    int (*now_fn)(int64_t *unix_secs); /* NULL = time() (tests override) */
};

enum fe_req_phase {
    FE_REQ_BODY,  /* reading headers/body */
    FE_REQ_WAIT,  /* suspended, job queued or running on the loop */
    FE_REQ_REPLY, /* job done, connection resumed */
    FE_REQ_DONE,  /* response queued */
};

struct fe_req {
    /* Bridge (fe_http.c). */
    atomic_int refs;
    atomic_int phase;
    struct fe_http *http;
    const struct fe_http_cfg *cfg;
    struct MHD_Connection *conn;
    struct fe_req *qnext;
    uint64_t start_ms;
    int body_too_large;

    /* The request as received. */
    char reqid[FE_GUID_SIZE];
    char *method;
    char *raw_path; /* raw, not decoded (signature input) */
    size_t raw_path_len;
    struct fe_query query;
    struct rt_buf body;

    /* Parsed by fe_api.c. */
    struct fe_path path;
    char version[16];       /* effective x-ms-version, echoed */
    enum fe_meta meta;
    enum fe_prefer prefer;
    char *root;             /* "http://{Host}/{account segment}" */
    const struct fe_api_op *op;
    struct fe_job job;
    int job_used;
    struct fe_entity_in ent;
    char **select;
    size_t nselect;
    struct rt_buf s1; /* scratch (decoded continuation keys, ...) */
    struct rt_buf s2;
    struct rt_filter *filter; /* parsed $filter (Query Entities/Tables) */
    struct rt_buf fenc;       /* its binary form (ScanReq.filter) */
    char *scan_lo;            /* PartitionKey bounds from the filter */
    char *scan_hi;
    const char *xms_version;  /* x-ms-version as sent; NULL = none */
    unsigned timeout_s;       /* `timeout` query parameter, 0 = none */
    struct fe_sas *sas;       /* verified SAS token (fe_sas.h), or NULL */

    /* Response being built. */
    int status;
    int odata;      /* add DataServiceVersion */
    int xml_errors; /* errors in storage XML (preflight) */
    struct rt_buf hdrs; /* "Name\0Value\0" pairs */
    struct rt_buf rbody;
};

/* fe_api.c: operations. */
enum { FE_API_RESPOND = 1, FE_API_SUBMIT = 2 };
/* [MHD thread] Validates/authenticates and dispatches. Returns
 * FE_API_RESPOND (req->status etc. set) or FE_API_SUBMIT (req->job set). */
int fe_api_prepare(struct fe_req *req);
/* [MHD thread] Builds the response from the finished job. */
void fe_api_finish(struct fe_req *req);
/* Releases what fe_api_prepare allocated in @req. */
void fe_api_req_free(struct fe_req *req);

/* fe_http.c: helpers for building responses (MHD thread). */
const char *fe__req_header(struct fe_req *req, const char *name);
/* How many times header @name (any case) occurs in the request. */
int fe__req_header_count(struct fe_req *req, const char *name);
void fe__resp_header(struct fe_req *req, const char *name, const char *value);
/* Error response for @code (rt_err.h table) with @msg (NULL = the table's
 * message): x-ms-error-code and the OData JSON (or storage XML) body. */
void fe__resp_error(struct fe_req *req, int code, const char *msg);
/* The same for an Azure code outside the rt_err.h table (e.g. the XMethod*
 * codes of spec §8.2): @status, @azure and @msg (all required). */
void fe__resp_error_as(struct fe_req *req, int status, const char *azure,
                       const char *msg);
/* Unix seconds now (cfg->now_fn or time()). */
int64_t fe__now(const struct fe_req *req);

/* fe_http.c: the server. */
struct fe_http;
/* Starts libmicrohttpd (poll, internal thread pool, suspend/resume) on
 * cfg->listen and the bridge on @loop (call on the loop thread before
 * uv_run). @cfg and @route are borrowed for the server's life. Returns 0
 * or RT_ECONFIG (message logged). */
int fe_http_start(const struct fe_http_cfg *cfg, uv_loop_t *loop,
                  struct fe_route *route, struct fe_http **out);
int fe_http_port(const struct fe_http *h);
/* [loop] Stops taking work: queued requests are cancelled (503) and
 * resumed, new ones are answered 503 at once; closes the async handle. */
void fe_http_begin_stop(struct fe_http *h);
/* [main, after uv_run returned] Stops libmicrohttpd and frees. */
void fe_http_destroy(struct fe_http *h);

#endif
