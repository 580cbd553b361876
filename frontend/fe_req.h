/* Request: one Table REST request as the operations see it, independent of
 * the HTTP library. A transport (fe_http.c, or a unit test) fills the
 * request once (method, raw path, decoded query, the header list, body,
 * peer address); fe_api.c and the operations read it through the helpers
 * below, fill req->job for the cluster and build the response here
 * (status, header pairs, body), which the transport then sends.
 *
 * Thread: the request's worker only; nothing here locks.
 *
 * Ownership: the request owns its buffers (path, query, body, response
 * headers and body, scratch), its job, its parsed path and entity. Header
 * names and values and the peer address are borrowed from the transport
 * (libmicrohttpd's connection pool) and must stay valid until the request
 * is released (fe_req_clear). Buffers are kept across requests: a
 * transport recycles fe_req objects with fe_req_clear() + fe_req_reset().
 *
 * Life of a request: fe_req_reset -> fe_req_set_path, fe_query_add_n,
 * fe_req_add_header... -> fe_req_headers_done -> body appended to
 * req->body -> fe_api_prepare (fe_api.h) -> [job runs in fe_route] ->
 * fe_api_finish -> the transport sends status/hdrs/rbody -> fe_api_req_free
 * + fe_req_clear. */
#ifndef FE_REQ_H
#define FE_REQ_H

#include <stddef.h>
#include <stdint.h>

#include "fe_hdr.h"
#include "fe_odata.h"
#include "fe_route.h"
#include "fe_url.h"
#include "rt_buf.h"

struct fe_accounts;
struct fe_api_op;
struct fe_sas;
struct rt_filter;
struct sockaddr;

/* What an operation's prepare step returns (fe_api.h, fe_batch.h,
 * fe_svc.h): the response is set, or req->job is to be run. */
enum { FE_API_RESPOND = 1, FE_API_SUBMIT = 2 };

/* One request header, both strings borrowed from the transport. */
struct fe_req_hdr
{
    const char *name;
    size_t name_len; /* compared first: most lookups miss on length */
    const char *value;
};

struct fe_req
{
    /* Set by the transport. */
    /* One reference to the account table current when the request
     * started (fe_accounts_acquire), released when the request ends. */
    int tls; /* came over the HTTPS listener */
    const struct fe_accounts *accounts;
    const struct sockaddr *peer; /* client address, NULL = unknown */

    /* The request as received. */
    char reqid[FE_GUID_SIZE];
    const char *method; /* borrowed from the transport */
    char *raw_path;     /* raw, not decoded (signature input); in pathbuf */
    size_t raw_path_len;
    struct rt_buf pathbuf;
    struct fe_query query;
    struct fe_req_hdr *in; /* the headers, in arrival order */
    size_t nin;
    size_t in_cap;
    struct rt_buf body;

    /* Parsed by fe_api.c. */
    struct fe_path path;
    char version[16]; /* effective x-ms-version, echoed */
    enum fe_meta meta;
    enum fe_prefer prefer;
    char *root; /* "http://{Host}/{account segment}" */
    const struct fe_api_op *op;
    /* Refused before dispatch (authentication): the operation the path
     * and verb name, for metrics only (fe_api_op_name). */
    const struct fe_api_op *op_hint;
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
    int atom;            /* AtomPub response (fe_hdr_atom): entries,
                          * feeds, the dataservices-metadata error */
    struct rt_buf hdrs;  /* "Name\0Value\0" pairs */
    struct rt_buf rbody; /* kept until the request completes (a transport
                          * may point its response into it) */
};

/* ---- Building a request (the transport) ---- */

/* Starts a new request in @req: zeroed memory, or a request fe_req_clear()
 * released (its buffers' memory is kept). Everything else returns to the
 * start state: a new request id, job FE_JOB_GET, empty path and entity,
 * DataServiceVersion on, the default version echoed. */
void fe_req_reset(struct fe_req *req);
/* Copies the request target @url (borrowed) as the raw path; an
 * absolute-form target ("http://host/p") keeps only its path. */
void fe_req_set_path(struct fe_req *req, const char *url);
/* Appends one header; @name and @value are borrowed (see above). */
void fe_req_add_header(struct fe_req *req, const char *name, const char *value);
/* Call after the last fe_req_add_header (and the query): the version
 * echoed on every response, errors included, is the request's
 * x-ms-version when it is well-formed (fe_api_prepare checks it again),
 * and req->atom is set from the headers for errors raised before
 * fe_api_prepare. */
void fe_req_headers_done(struct fe_req *req);
/* Releases what the request owns for this request (query values, path,
 * entity, job); buffers up to @keep_max bytes keep their memory for the
 * next fe_req_reset, larger ones are freed. fe_api_req_free() must have
 * run first. */
void fe_req_clear(struct fe_req *req, size_t keep_max);
/* Frees all memory of a cleared request (the struct itself is the
 * caller's). */
void fe_req_fini(struct fe_req *req);

/* ---- Reading the request ---- */

/* The first value of header @name (any case), or NULL. Valid until the
 * request is released. */
const char *fe_req_header(const struct fe_req *req, const char *name);
/* How many times header @name (any case) occurs in the request. */
int fe_req_header_count(const struct fe_req *req, const char *name);
/* Unix seconds now. */
int64_t fe_req_now(const struct fe_req *req);

/* ---- The job ---- */

/* Starts req->job afresh (fe_job_init) as a job of @kind, keeping the
 * memory of its value buffer. Every (re)start of req->job goes through
 * here, or the kept buffer would leak. */
void fe_req_job_kind(struct fe_req *req, enum fe_job_kind kind);

/* The same, on the account and table the path names; both stay borrowed
 * from req->path. */
void fe_req_job_init(struct fe_req *req, enum fe_job_kind kind);

/* ---- Building the response ---- */

/* The DataServiceVersion of the response (when req->odata): "3.0;" for
 * JSON; for AtomPub what the service answered, "1.0;", or "2.0;" once
 * $select (a 2.0 feature) shaped the response. A static string. */
const char *fe_req_dsv(const struct fe_req *req);

/* Adds response header @name: @value (both copied). */
void fe_req_resp_header(struct fe_req *req,
                        const char *name,
                        const char *value);
/* Error response for @code (rt_err.h table) with @msg (NULL = the table's
 * message): x-ms-error-code and the OData JSON body, or the storage XML
 * body (req->xml_errors), or the AtomPub one (req->atom).
 * Replaces headers and body built so far; logs the outcome once. */
void fe_req_resp_error(struct fe_req *req, int code, const char *msg);
/* The same for an Azure code outside the rt_err.h table (e.g. the XMethod*
 * codes of spec §8.2): @status, @azure and @msg (all required). */
void fe_req_resp_error_as(struct fe_req *req,
                          int status,
                          const char *azure,
                          const char *msg);

#endif
