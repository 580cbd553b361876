/* Front-end internals shared by fe_http.c (libmicrohttpd glue, the worker
 * threads, response assembly) and fe_api.c (the Table REST operations).
 *
 * Threads: share-nothing workers. Each worker thread runs one libuv loop
 * that owns one libmicrohttpd daemon (external epoll mode, no MHD thread),
 * one fe_route (its own master subscription and partition-server
 * connections) and every request accepted by that daemon, from the first
 * byte to the last. A request never changes threads.
 *
 * Life of a request (struct fe_req), all on the worker's loop thread:
 *  1. first access-handler call (inside MHD_run): fe_req taken from the
 *     worker's free list, raw path and decoded query copied; URL or
 *     headers over the limits -> 414 / 400, Content-Length above
 *     --max-body -> 413, at once.
 *  2. body chunks accumulate in req->body (over the limit: discarded,
 *     413 at the end).
 *  3. final call: fe_api_prepare() validates, authenticates and either
 *     fills the response (FE_API_RESPOND) or fills req->job
 *     (FE_API_SUBMIT). To submit, the connection is suspended and the job
 *     handed to fe_route_submit() right there: no queue, no wake-up.
 *  4. fe_route runs the job; its done_cb (an RPC reply callback on the
 *     same loop, or synchronously inside the submit) resumes the
 *     connection and asks for an MHD_run at the end of the loop iteration.
 *  5. the handler runs again: fe_api_finish() turns the job into the
 *     response, which is queued.
 *  6. MHD_OPTION_NOTIFY_COMPLETED returns the fe_req to the free list.
 * MHD never completes a suspended connection while the daemon runs, and a
 * worker stops its daemon only after every job has finished (fe_route_close
 * cancels them, 503) and every resumed connection was processed, so no job
 * outlives its request. */
#ifndef FE_INTERNAL_H
#define FE_INTERNAL_H

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

/* Settings the workers read (immutable after start). */
struct fe_http_cfg
{
    const char *listen; /* "host:port" */
    const char *master; /* rt-master RPC "host:port" (one fe_route each) */
    unsigned threads;   /* workers */
    size_t max_body;
    const struct fe_accounts *accounts;
    int (*now_fn)(int64_t *unix_secs); /* NULL = time() (tests override) */
};

/* Request limits (spec §9 gives none; HTTP.sys, in front of Azure, answers
 * 414 for a long URL and 400 for large headers). The request line and the
 * header block must fit libmicrohttpd's per-connection memory pool to reach
 * our handler at all: what does not fit gets libmicrohttpd's bare 414/431
 * page. The pool holds both limits plus 16 KiB for libmicrohttpd's own
 * needs (header bookkeeping, the response header); it is no larger because
 * libmicrohttpd zeroes the whole pool after every keep-alive request
 * (measured: ~20% of a worker's CPU on point GETs at 112-128 KiB, and the
 * cost grows once the pools of all connections outgrow the L3 cache; see
 * frontend/README.md, "Design notes"). */
#define FE_URL_MAX (32 * 1024)     /* path + query -> 414 InvalidUri */
#define FE_HEADERS_MAX (64 * 1024) /* all header lines -> 400 */
#ifndef FE_HTTP_POOL
#define FE_HTTP_POOL (FE_URL_MAX + FE_HEADERS_MAX + 16 * 1024)
#endif

enum fe_req_phase {
    FE_REQ_BODY,  /* reading headers/body */
    FE_REQ_WAIT,  /* suspended, job running in fe_route */
    FE_REQ_REPLY, /* job done, connection resumed */
    FE_REQ_DONE,  /* response queued */
};

struct fe_worker;

struct fe_req
{
    /* Plumbing (fe_http.c). */
    struct fe_worker *w;
    const struct fe_http_cfg *cfg;
    struct MHD_Connection *conn;
    struct fe_req *next_free;
    enum fe_req_phase phase;
    int job_active; /* submitted, done_cb not yet fired */
    int suspended;  /* counted in the worker's suspended requests */
    int completed;  /* MHD reported the request complete */
    uint64_t start_ms;
    int body_too_large;

    /* The request as received. */
    char reqid[FE_GUID_SIZE];
    const char *method; /* libmicrohttpd's, valid for the request */
    char *raw_path;     /* raw, not decoded (signature input); in pathbuf */
    size_t raw_path_len;
    struct rt_buf pathbuf;
    struct fe_query query;
    struct rt_buf body;

    /* Parsed by fe_api.c. */
    struct fe_path path;
    char version[16]; /* effective x-ms-version, echoed */
    enum fe_meta meta;
    enum fe_prefer prefer;
    char *root; /* "http://{Host}/{account segment}" */
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
    const char *xms_version; /* x-ms-version as sent; NULL = none */
    unsigned timeout_s;      /* `timeout` query parameter, 0 = none */
    struct fe_sas *sas;      /* verified SAS token (fe_sas.h), or NULL */

    /* Response being built. */
    int status;
    int odata;           /* add DataServiceVersion */
    int xml_errors;      /* errors in storage XML (preflight) */
    struct rt_buf hdrs;  /* "Name\0Value\0" pairs */
    struct rt_buf rbody; /* kept until the request completes (the response
                          * points into it) */
};

/* fe_api.c: operations. */
enum { FE_API_RESPOND = 1, FE_API_SUBMIT = 2 };
/* [worker] Validates/authenticates and dispatches. Returns
 * FE_API_RESPOND (req->status etc. set) or FE_API_SUBMIT (req->job set). */
int fe_api_prepare(struct fe_req *req);
/* [worker] Builds the response from the finished job. */
void fe_api_finish(struct fe_req *req);
/* Releases what fe_api_prepare allocated in @req. */
void fe_api_req_free(struct fe_req *req);
/* Appends "{root}/{table}(PartitionKey='p',RowKey='r')" to @out (or
 * without "{root}/" when @root is NULL): quotes in the keys doubled, then
 * percent-encoded. All strings borrowed. Used for Location/DataServiceId
 * by fe_api.c and fe_batch.c. */
void fe__entity_path(struct rt_buf *out,
                     const char *root,
                     const char *table,
                     const char *pk,
                     const char *rk);

/* fe_http.c: helpers for building responses (the request's worker). */
const char *fe__req_header(struct fe_req *req, const char *name);
/* How many times header @name (any case) occurs in the request. */
int fe__req_header_count(struct fe_req *req, const char *name);
void fe__resp_header(struct fe_req *req, const char *name, const char *value);
/* Error response for @code (rt_err.h table) with @msg (NULL = the table's
 * message): x-ms-error-code and the OData JSON (or storage XML) body. */
void fe__resp_error(struct fe_req *req, int code, const char *msg);
/* The same for an Azure code outside the rt_err.h table (e.g. the XMethod*
 * codes of spec §8.2): @status, @azure and @msg (all required). */
void fe__resp_error_as(struct fe_req *req,
                       int status,
                       const char *azure,
                       const char *msg);
/* Unix seconds now (cfg->now_fn or time()). */
int64_t fe__now(const struct fe_req *req);

/* fe_http.c: the server. */
struct fe_http;
/* Binds cfg->listen (one socket, shared by every worker), then starts
 * cfg->threads workers, each with its own libuv loop, fe_route (connecting
 * to cfg->master) and libmicrohttpd daemon in external epoll mode. @cfg is
 * borrowed for the server's life. Returns 0, RT_ECONFIG (cannot listen,
 * message logged) or RT_EINVAL (bad --master address); on error nothing
 * is left running and *out is NULL. */
int fe_http_start(const struct fe_http_cfg *cfg, struct fe_http **out);
int fe_http_port(const struct fe_http *h);
/* [any thread] Asks every worker to stop: it stops accepting, cancels the
 * jobs in flight (503 ServerBusy), answers new requests 503, flushes
 * (bounded by FE_HTTP_DRAIN_MS) and ends its loop. Idempotent. */
#define FE_HTTP_DRAIN_MS 2000
void fe_http_stop(struct fe_http *h);
/* [the thread that started it] Waits for the workers (call fe_http_stop
 * first, or this waits until they stop), stops libmicrohttpd and frees. */
void fe_http_destroy(struct fe_http *h);

#endif
