/* libmicrohttpd glue and the HTTP-thread <-> loop-thread bridge. The life
 * of a request is described in fe_internal.h.
 *
 * Threads: the access handler, NOTIFY_COMPLETED and the response helpers
 * run on libmicrohttpd's pool threads; fe__on_async, fe__job_done and
 * fe_http_begin_stop run on the libuv loop thread. They share only the
 * queue (h->mu) and each request's atomic refs/phase/gone.
 *
 * Failure modes: a body above --max-body -> 413 RequestBodyTooLarge (at
 * once when Content-Length says so, else after the body); shutdown ->
 * queued and new requests get 503 ServerBusy; a client that disconnects
 * while suspended is only noticed by libmicrohttpd after the resume (it
 * does not watch suspended sockets), so the loop never touches a freed
 * request: it holds a reference until it has resumed the connection. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>

#include <microhttpd.h>
#include <uv.h>

#include "fe_internal.h"
#include "rt_config.h"
#include "rt_err.h"
#include "rt_log.h"
#include "rt_time.h"

struct fe_http {
    struct MHD_Daemon *d;
    const struct fe_http_cfg *cfg;
    uv_loop_t *loop;
    uv_async_t async;
    pthread_mutex_t mu;
    struct fe_req *qhead; /* under mu */
    struct fe_req *qtail;
    int stopping; /* under mu */
    struct fe_route *route;
    int port;
};

/* ---- Requests ------------------------------------------------------- */

static char *fe__xstrdup(const char *s)
{
    char *d = strdup(s ? s : "");
    if (!d) {
        abort();
    }
    return d;
}

static uint64_t fe__mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static enum MHD_Result fe__query_iter(void *cls, enum MHD_ValueKind kind,
                                      const char *key, const char *value)
{
    struct fe_req *req = cls;
    (void)kind;
    fe_query_add(&req->query, key, value);
    return MHD_YES;
}

static struct fe_req *fe__req_create(struct fe_http *h,
                                     struct MHD_Connection *c,
                                     const char *url, const char *method)
{
    struct fe_req *req = calloc(1, sizeof(*req));
    const char *v;
    if (!req) {
        abort();
    }
    atomic_init(&req->refs, 1);
    atomic_init(&req->phase, FE_REQ_BODY);
    req->http = h;
    req->cfg = h->cfg;
    req->conn = c;
    req->start_ms = fe__mono_ms();
    fe_hdr_guid(req->reqid);
    req->method = fe__xstrdup(method);
    /* Absolute-form request target: keep only the path. */
    if (strncmp(url, "http://", 7) == 0 || strncmp(url, "https://", 8) == 0) {
        const char *p = strstr(url, "//") + 2;
        p = strchr(p, '/');
        url = p ? p : "/";
    }
    req->raw_path = fe__xstrdup(url);
    req->raw_path_len = strlen(req->raw_path);
    fe_query_init(&req->query);
    MHD_get_connection_values(c, MHD_GET_ARGUMENT_KIND, fe__query_iter, req);
    rt_buf_init(&req->body);
    rt_buf_init(&req->hdrs);
    rt_buf_init(&req->rbody);
    rt_buf_init(&req->s1);
    rt_buf_init(&req->s2);
    fe_path_init(&req->path);
    fe_entity_in_init(&req->ent);
    fe_job_init(&req->job, FE_JOB_GET);
    /* The version echoed on every response, errors included: the
     * request's when well-formed (checked again by fe_api_prepare). */
    v = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "x-ms-version");
    snprintf(req->version, sizeof(req->version), "%s",
             v && fe_hdr_version_check(v) == 0 ? v : FE_VERSION_DEFAULT);
    req->odata = 1;
    return req;
}

static void fe__req_unref(struct fe_req *req)
{
    if (atomic_fetch_sub(&req->refs, 1) != 1) {
        return;
    }
    fe_api_req_free(req);
    fe_job_free(&req->job);
    fe_path_free(&req->path);
    fe_entity_in_free(&req->ent);
    fe_query_free(&req->query);
    rt_buf_free(&req->body);
    rt_buf_free(&req->hdrs);
    rt_buf_free(&req->rbody);
    rt_buf_free(&req->s1);
    rt_buf_free(&req->s2);
    free(req->method);
    free(req->raw_path);
    free(req);
}

const char *fe__req_header(struct fe_req *req, const char *name)
{
    return MHD_lookup_connection_value(req->conn, MHD_HEADER_KIND, name);
}

struct fe__hdr_count {
    const char *name;
    int n;
};

static enum MHD_Result fe__count_iter(void *cls, enum MHD_ValueKind kind,
                                      const char *key, const char *value)
{
    struct fe__hdr_count *c = cls;
    (void)kind;
    (void)value;
    if (strcasecmp(key, c->name) == 0) {
        c->n++;
    }
    return MHD_YES;
}

int fe__req_header_count(struct fe_req *req, const char *name)
{
    struct fe__hdr_count c = {name, 0};
    MHD_get_connection_values(req->conn, MHD_HEADER_KIND, fe__count_iter, &c);
    return c.n;
}

int64_t fe__now(const struct fe_req *req)
{
    (void)req;
    return (int64_t)time(NULL);
}

/* ---- Responses ------------------------------------------------------ */

void fe__resp_header(struct fe_req *req, const char *name, const char *value)
{
    rt_buf_append(&req->hdrs, name, strlen(name) + 1);
    rt_buf_append(&req->hdrs, value, strlen(value) + 1);
}

static void fe__xml_escape(struct rt_buf *out, const char *s)
{
    for (; *s; s++) {
        switch (*s) {
        case '<':
            rt_buf_append_str(out, "&lt;");
            break;
        case '>':
            rt_buf_append_str(out, "&gt;");
            break;
        case '&':
            rt_buf_append_str(out, "&amp;");
            break;
        case '"':
            rt_buf_append_str(out, "&quot;");
            break;
        default:
            rt_buf_append_u8(out, (uint8_t)*s);
        }
    }
}

void fe__resp_error(struct fe_req *req, int code, const char *msg)
{
    fe__resp_error_as(req, rt_err_http_status(code), rt_err_azure_code(code),
                      msg ? msg : rt_err_message(code));
}

void fe__resp_error_as(struct fe_req *req, int status, const char *azure,
                       const char *msg)
{
    char when[RT_TIME_ISO_SIZE];
    struct rt_buf text = RT_BUF_INIT;

    rt_time_format_iso7(rt_time_now_ticks(), when);
    rt_buf_printf(&text, "%s\nRequestId:%s\nTime:%s", msg, req->reqid, when);
    req->status = status;
    rt_buf_reset(&req->hdrs);
    rt_buf_reset(&req->rbody);
    fe__resp_header(req, "x-ms-error-code", azure);
    if (req->xml_errors) {
        fe__resp_header(req, "Content-Type", "application/xml");
        rt_buf_append_str(&req->rbody,
                          "<?xml version=\"1.0\" encoding=\"utf-8\"?><Error>"
                          "<Code>");
        fe__xml_escape(&req->rbody, azure);
        rt_buf_append_str(&req->rbody, "</Code><Message>");
        fe__xml_escape(&req->rbody, rt_buf_cstr(&text));
        rt_buf_append_str(&req->rbody, "</Message></Error>");
    } else {
        fe__resp_header(req, "Content-Type",
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
    } else if (req->status == 404 || req->status == 409 ||
               req->status == 412) {
        rt_log(RT_LOG_DEBUG, "%s %s -> %d %s", req->method, req->raw_path,
               req->status, azure);
    } else {
        rt_log(RT_LOG_INFO, "%s %s -> %d %s", req->method, req->raw_path,
               req->status, azure);
    }
}

static enum MHD_Result fe__queue(struct fe_req *req)
{
    struct MHD_Response *resp;
    size_t len = 0;
    uint8_t *data = rt_buf_steal(&req->rbody, &len);
    char date[64];
    const char *cid;
    enum MHD_Result ret;

    if (len) {
        resp = MHD_create_response_from_buffer_with_free_callback(len, data,
                                                                  free);
    } else {
        free(data);
        resp = MHD_create_response_from_buffer(0, (void *)"",
                                               MHD_RESPMEM_PERSISTENT);
    }
    if (!resp) {
        return MHD_NO;
    }
    MHD_add_response_header(resp, "x-ms-request-id", req->reqid);
    MHD_add_response_header(resp, "x-ms-version", req->version);
    rt_time_http_date(date, sizeof(date));
    MHD_add_response_header(resp, MHD_HTTP_HEADER_DATE, date);
    cid = fe__req_header(req, "x-ms-client-request-id");
    if (cid && fe_hdr_client_id_ok(cid)) {
        MHD_add_response_header(resp, "x-ms-client-request-id", cid);
    }
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
    MHD_add_response_header(resp, "X-Content-Type-Options", "nosniff");
    if (req->odata) {
        MHD_add_response_header(resp, "DataServiceVersion", "3.0;");
    }
    MHD_add_response_header(resp, MHD_HTTP_HEADER_SERVER, "rangetable");
    for (size_t off = 0; off < req->hdrs.len;) {
        const char *name = (const char *)req->hdrs.data + off;
        const char *value = name + strlen(name) + 1;
        MHD_add_response_header(resp, name, value);
        off += strlen(name) + 1 + strlen(value) + 1;
    }
    if (req->status == 0) {
        req->status = 500;
    }
    ret = MHD_queue_response(req->conn, (unsigned)req->status, resp);
    MHD_destroy_response(resp);
    atomic_store(&req->phase, FE_REQ_DONE);
    rt_log(RT_LOG_DEBUG, "%s %s %d %llums", req->method, req->raw_path,
           req->status,
           (unsigned long long)(fe__mono_ms() - req->start_ms));
    return ret;
}

/* ---- Bridge --------------------------------------------------------- */

/* [loop] The job finished: the reply is in req->job; wake the HTTP side. */
static void fe__job_done(struct fe_job *job)
{
    struct fe_req *req = job->data;
    atomic_store(&req->phase, FE_REQ_REPLY);
    MHD_resume_connection(req->conn);
    fe__req_unref(req);
}

/* [loop] Drains the queue (sends coalesce: take everything). */
static void fe__on_async(uv_async_t *a)
{
    struct fe_http *h = a->data;
    struct fe_req *req;
    int stopping;
    pthread_mutex_lock(&h->mu);
    req = h->qhead;
    h->qhead = h->qtail = NULL;
    stopping = h->stopping;
    pthread_mutex_unlock(&h->mu);
    while (req) {
        struct fe_req *next = req->qnext;
        req->qnext = NULL;
        req->job.done_cb = fe__job_done;
        req->job.data = req;
        if (stopping) {
            req->job.status = RT_ECANCELED;
            fe__job_done(&req->job);
        } else {
            rt_log_set_reqid(req->reqid);
            fe_route_submit(h->route, &req->job);
        }
        req = next;
    }
    rt_log_set_reqid(NULL);
}

/* [MHD] Hands the job to the loop. The connection is suspended first so
 * the loop can never resume it before it is suspended. */
static void fe__submit(struct fe_req *req)
{
    struct fe_http *h = req->http;
    atomic_store(&req->phase, FE_REQ_WAIT);
    MHD_suspend_connection(req->conn);
    pthread_mutex_lock(&h->mu);
    if (h->stopping) {
        pthread_mutex_unlock(&h->mu);
        req->job.status = RT_ECANCELED;
        atomic_store(&req->phase, FE_REQ_REPLY);
        MHD_resume_connection(req->conn);
        return;
    }
    atomic_fetch_add(&req->refs, 1);
    req->qnext = NULL;
    if (h->qtail) {
        h->qtail->qnext = req;
    } else {
        h->qhead = req;
    }
    h->qtail = req;
    /* Under the lock: fe_http_begin_stop closes the handle only after
     * setting stopping under the same lock. */
    uv_async_send(&h->async);
    pthread_mutex_unlock(&h->mu);
}

void fe_http_begin_stop(struct fe_http *h)
{
    struct fe_req *req;
    pthread_mutex_lock(&h->mu);
    h->stopping = 1;
    req = h->qhead;
    h->qhead = h->qtail = NULL;
    pthread_mutex_unlock(&h->mu);
    while (req) {
        struct fe_req *next = req->qnext;
        req->qnext = NULL;
        req->job.data = req;
        req->job.status = RT_ECANCELED;
        fe__job_done(&req->job);
        req = next;
    }
    uv_close((uv_handle_t *)&h->async, NULL);
}

/* ---- libmicrohttpd callbacks ---------------------------------------- */

static enum MHD_Result fe__access(void *cls, struct MHD_Connection *c,
                                  const char *url, const char *method,
                                  const char *version, const char *upload_data,
                                  size_t *upload_data_size, void **con_cls)
{
    struct fe_http *h = cls;
    struct fe_req *req = *con_cls;
    (void)version;

    if (!req) {
        const char *cl;
        req = fe__req_create(h, c, url, method);
        *con_cls = req;
        rt_log_set_reqid(req->reqid);
        cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND,
                                         MHD_HTTP_HEADER_CONTENT_LENGTH);
        if (cl && strtoull(cl, NULL, 10) > h->cfg->max_body) {
            const char *expect = MHD_lookup_connection_value(
                c, MHD_HEADER_KIND, MHD_HTTP_HEADER_EXPECT);
            req->body_too_large = 1;
            /* A client waiting for 100 Continue (or sending something
             * absurd) gets the 413 before the body, without a 100. Others
             * are already sending: the body is read and dropped so they
             * can read the 413 instead of a reset (SDKs map 413 to
             * RequestTooLargeError). */
            if ((expect && strcasecmp(expect, "100-continue") == 0) ||
                strtoull(cl, NULL, 10) / 16 > h->cfg->max_body) {
                fe__resp_error(req, RT_ETOOLARGE, NULL);
                return fe__queue(req);
            }
        }
        return MHD_YES;
    }
    rt_log_set_reqid(req->reqid);
    if (*upload_data_size) {
        size_t n = *upload_data_size;
        *upload_data_size = 0;
        if (atomic_load(&req->phase) != FE_REQ_BODY || req->body_too_large) {
            return MHD_YES;
        }
        if (req->body.len + n > h->cfg->max_body) {
            req->body_too_large = 1;
            rt_buf_free(&req->body);
            return MHD_YES;
        }
        rt_buf_append(&req->body, upload_data, n);
        return MHD_YES;
    }
    switch (atomic_load(&req->phase)) {
    case FE_REQ_BODY:
        if (req->body_too_large) {
            fe__resp_error(req, RT_ETOOLARGE, NULL);
            return fe__queue(req);
        }
        if (fe_api_prepare(req) != FE_API_SUBMIT) {
            return fe__queue(req);
        }
        fe__submit(req);
        return MHD_YES;
    case FE_REQ_REPLY:
        fe_api_finish(req);
        return fe__queue(req);
    default:
        return MHD_YES;
    }
}

static void fe__completed(void *cls, struct MHD_Connection *c, void **con_cls,
                          enum MHD_RequestTerminationCode toe)
{
    struct fe_req *req = *con_cls;
    (void)cls;
    (void)c;
    if (!req) {
        return;
    }
    *con_cls = NULL;
    if (toe != MHD_REQUEST_TERMINATED_COMPLETED_OK) {
        rt_log(RT_LOG_DEBUG, "request %s ended early (%d)", req->reqid,
               (int)toe);
    }
    fe__req_unref(req);
    rt_log_set_reqid(NULL);
}

/* Keeps the URL and GET arguments raw: SharedKey signs the path as sent,
 * and fe_url decodes it itself (libmicrohttpd already turned '+' into a
 * space in argument keys/values, which is what form decoding does). */
static size_t fe__unescape(void *cls, struct MHD_Connection *c, char *s)
{
    (void)cls;
    (void)c;
    return strlen(s);
}

static void fe__mhd_log(void *cls, const char *fmt, va_list ap)
{
    char msg[512];
    size_t n;
    (void)cls;
    vsnprintf(msg, sizeof(msg), fmt, ap);
    n = strlen(msg);
    while (n && (msg[n - 1] == '\n' || msg[n - 1] == '\r')) {
        msg[--n] = '\0';
    }
    rt_log(RT_LOG_INFO, "libmicrohttpd: %s", msg);
}

int fe_http_start(const struct fe_http_cfg *cfg, uv_loop_t *loop,
                  struct fe_route *route, struct fe_http **out)
{
    struct fe_http *h;
    char host[256];
    int port;
    struct sockaddr_storage ss;
    socklen_t sslen;
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL |
                     MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG;
    const union MHD_DaemonInfo *info;

    if (rt_split_hostport(cfg->listen, host, sizeof(host), &port) != 0) {
        rt_log(RT_LOG_ERROR, "bad --listen address '%s'", cfg->listen);
        return RT_ECONFIG;
    }
    memset(&ss, 0, sizeof(ss));
    if (host[0] == '[') {
        size_t n = strlen(host);
        if (n > 2 && host[n - 1] == ']') {
            memmove(host, host + 1, n - 2);
            host[n - 2] = '\0';
        }
    }
    if (inet_pton(AF_INET, host, &((struct sockaddr_in *)&ss)->sin_addr) ==
        1) {
        struct sockaddr_in *sin = (struct sockaddr_in *)&ss;
        sin->sin_family = AF_INET;
        sin->sin_port = htons((uint16_t)port);
        sslen = sizeof(*sin);
    } else if (inet_pton(AF_INET6, host,
                         &((struct sockaddr_in6 *)&ss)->sin6_addr) == 1) {
        struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)&ss;
        sin6->sin6_family = AF_INET6;
        sin6->sin6_port = htons((uint16_t)port);
        sslen = sizeof(*sin6);
        flags |= MHD_USE_IPv6;
    } else if (strcmp(host, "localhost") == 0) {
        struct sockaddr_in *sin = (struct sockaddr_in *)&ss;
        sin->sin_family = AF_INET;
        sin->sin_port = htons((uint16_t)port);
        sin->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        sslen = sizeof(*sin);
    } else {
        rt_log(RT_LOG_ERROR, "--listen needs an IP address, got '%s'", host);
        return RT_ECONFIG;
    }
    (void)sslen;

    h = calloc(1, sizeof(*h));
    if (!h) {
        abort();
    }
    h->cfg = cfg;
    h->loop = loop;
    h->route = route;
    pthread_mutex_init(&h->mu, NULL);
    if (uv_async_init(loop, &h->async, fe__on_async) != 0) {
        pthread_mutex_destroy(&h->mu);
        free(h);
        return RT_ECONFIG;
    }
    h->async.data = h;

    h->d = MHD_start_daemon(
        flags, (uint16_t)port, NULL, NULL, fe__access, h,
        MHD_OPTION_EXTERNAL_LOGGER, fe__mhd_log, NULL,
        MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&ss,
        MHD_OPTION_THREAD_POOL_SIZE, (unsigned int)(cfg->threads ? cfg->threads : 1),
        MHD_OPTION_UNESCAPE_CALLBACK, fe__unescape, NULL,
        MHD_OPTION_NOTIFY_COMPLETED, fe__completed, h,
        MHD_OPTION_CONNECTION_TIMEOUT, (unsigned int)120,
        MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)(64 * 1024),
        MHD_OPTION_LISTEN_BACKLOG_SIZE, (unsigned int)1024,
        MHD_OPTION_END);
    if (!h->d) {
        rt_log(RT_LOG_ERROR, "cannot listen on %s", cfg->listen);
        uv_close((uv_handle_t *)&h->async, NULL);
        /* The async handle is closed; free after the loop ran its close
         * callbacks (the caller exits right away). */
        h->stopping = 1;
        *out = h;
        return RT_ECONFIG;
    }
    info = MHD_get_daemon_info(h->d, MHD_DAEMON_INFO_BIND_PORT);
    h->port = info ? info->port : port;
    *out = h;
    return 0;
}

int fe_http_port(const struct fe_http *h)
{
    return h->port;
}

void fe_http_destroy(struct fe_http *h)
{
    if (!h) {
        return;
    }
    if (h->d) {
        MHD_stop_daemon(h->d);
    }
    pthread_mutex_destroy(&h->mu);
    free(h);
}
