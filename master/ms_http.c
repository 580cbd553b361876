/* Status HTTP API on libmicrohttpd. Poll mode, not epoll: docs/DESIGN.md §8
 * notes an epoll stall in 0.9.75. Every handler answers on its first call from
 * a copy of a published document, so nothing here blocks or touches the
 * master's loop state. */
#include "ms_http.h"

#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <microhttpd.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "ms_admin.h"
#include "ms_auth.h"
#include "ms_events.h"
#include "ms_status.h"
#include "ms_trace_rec.h"
#include "rt_alloc.h"
#include "rt_buf.h"
#include "rt_err.h"
#include "rt_http.h"
#include "rt_log.h"

#define MS__POST_MAX (64u * 1024u)

struct ms_http
{
    struct MHD_Daemon *d;
    struct ms_status *st;
    struct ms_events *events; /* may be NULL */
    struct ms_admin *admin;   /* may be NULL: POST answers 503 */
    struct ms_auth *auth;
    struct ms_trace_rec *trace; /* may be NULL */
    int port;
    /* Requests refused by verdict (MS_AUTH_MISSING ...), for /metrics. */
    atomic_uint_fast64_t refused[MS_AUTH__NR];
};

/* One POST in progress (con_cls). */
struct ms__post
{
    enum ms_admin_kind kind;
    struct rt_buf body;
    bool too_large;
    struct ms_admin_req *req; /* submitted; our reference */
};

/* The dashboard page (ms_dash.c). */
extern const char ms_dashboard_html[];

static enum MHD_Result ms__http_json(struct MHD_Connection *c,
                                     unsigned int status,
                                     const char *msg)
{
    json_t *o = json_object();
    char *text;
    json_object_set_new(o, "error", json_string(msg));
    text = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    if (!text) {
        return rt_http_send(c, status, "application/json", "{}", false);
    }
    return rt_http_send(c, status, "application/json", text, true);
}

static bool ms__parse_u64(const char *s, uint64_t *out)
{
    char *end;
    unsigned long long v;
    if (!s || !*s || *s == '-') {
        return false;
    }
    errno = 0;
    v = strtoull(s, &end, 10);
    if (errno || *end) {
        return false;
    }
    *out = v;
    return true;
}

/* An argument from the query string, else from the JSON body (@body may
 * be NULL). Returns a borrowed string or NULL; numbers in the body are
 * formatted into @buf. */
static const char *ms__arg(struct MHD_Connection *c,
                           json_t *body,
                           const char *name,
                           char *buf,
                           size_t buflen)
{
    const char *v = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, name);
    json_t *j;
    if (v) {
        return v;
    }
    j = body ? json_object_get(body, name) : NULL;
    if (json_is_string(j)) {
        return json_string_value(j);
    }
    if (json_is_integer(j)) {
        snprintf(buf, buflen, "%" PRIu64, (uint64_t)json_integer_value(j));
        return buf;
    }
    if (json_is_boolean(j)) {
        snprintf(buf, buflen, "%s", json_is_true(j) ? "1" : "0");
        return buf;
    }
    return NULL;
}

static void ms__wake(struct ms_admin_req *req)
{
    MHD_resume_connection(req->wake_arg);
}

/* Builds the request of a complete POST; NULL after answering 400. */
static struct ms_admin_req *ms__post_req(struct MHD_Connection *c,
                                         struct ms__post *p,
                                         const char **err)
{
    json_t *body = NULL;
    char b1[32], b2[32], b3[32];
    const char *range, *server, *key, *cancel;
    struct ms_admin_req *req;
    uint64_t rid = 0, sid = 0;

    if (p->body.len) {
        json_error_t jerr;
        body = json_loadb((const char *)p->body.data, p->body.len, 0, &jerr);
        if (!json_is_object(body)) {
            json_decref(body);
            *err = "the body must be a JSON object";
            return NULL;
        }
    }
    range = ms__arg(c, body, "range", b1, sizeof(b1));
    server = ms__arg(c, body, "server", b2, sizeof(b2));
    cancel = ms__arg(c, body, "cancel", b3, sizeof(b3));
    key = ms__arg(c, body, "key", NULL, 0);
    if (p->kind == MS_ADMIN_MASTER_ADD || p->kind == MS_ADMIN_MASTER_REMOVE ||
        p->kind == MS_ADMIN_MASTER_TRANSFER) {
        const char *id = ms__arg(c, body, "id", b1, sizeof(b1));
        const char *addr = ms__arg(c, body, "addr", NULL, 0);
        if (id ? !ms__parse_u64(id, &sid)
               : p->kind != MS_ADMIN_MASTER_TRANSFER) {
            *err = "id=N is required";
            goto err;
        }
        if (p->kind == MS_ADMIN_MASTER_ADD && (!addr || !*addr)) {
            *err =
                "addr=HOST:PORT (the new master's raft address) is "
                "required";
            goto err;
        }
        req = ms_admin_req_new(p->kind);
        req->server_id = sid;
        if (addr && *addr) {
            req->key = rt_xstrdup(addr);
        }
        json_decref(body);
        return req;
    }
    if (p->kind == MS_ADMIN_TRACE_START || p->kind == MS_ADMIN_TRACE_STOP) {
        /* Only a name: the file is DATA/traces/NAME.rttrace, never a
         * path the client chooses (the master checks the name). */
        const char *name = ms__arg(c, body, "name", NULL, 0);
        req = ms_admin_req_new(p->kind);
        if (p->kind == MS_ADMIN_TRACE_START && name && *name) {
            req->key = rt_xstrdup(name);
        }
        json_decref(body);
        return req;
    }
    if (p->kind != MS_ADMIN_DRAIN && !ms__parse_u64(range, &rid)) {
        *err = "range=ID is required";
        goto err;
    }
    if ((p->kind == MS_ADMIN_MOVE || p->kind == MS_ADMIN_DRAIN ||
         p->kind == MS_ADMIN_TRANSFER) &&
        !ms__parse_u64(server, &sid)) {
        *err = "server=ID is required";
        goto err;
    }
    req = ms_admin_req_new(p->kind);
    req->range_id = rid;
    req->server_id = sid;
    if (p->kind == MS_ADMIN_SPLIT && key && *key) {
        req->key = rt_xstrdup(key);
    }
    req->cancel =
        cancel && (strcmp(cancel, "1") == 0 || strcmp(cancel, "true") == 0);
    json_decref(body);
    return req;

err:
    json_decref(body);
    return NULL;
}

static enum MHD_Result ms__http_post(struct ms_http *h,
                                     struct MHD_Connection *c,
                                     const char *url,
                                     const char *upload_data,
                                     size_t *upload_data_size,
                                     void **con_cls)
{
    struct ms__post *p = *con_cls;
    const char *err = NULL;
    int status;
    const char *body;

    if (!p) {
        static const struct
        {
            const char *url;
            enum ms_admin_kind kind;
        } routes[] = {{"/api/split", MS_ADMIN_SPLIT},
                      {"/api/merge", MS_ADMIN_MERGE},
                      {"/api/move", MS_ADMIN_MOVE},
                      {"/api/drain", MS_ADMIN_DRAIN},
                      {"/api/transfer", MS_ADMIN_TRANSFER},
                      {"/api/masters/add", MS_ADMIN_MASTER_ADD},
                      {"/api/masters/remove", MS_ADMIN_MASTER_REMOVE},
                      {"/api/masters/transfer", MS_ADMIN_MASTER_TRANSFER},
                      {"/api/trace/start", MS_ADMIN_TRACE_START},
                      {"/api/trace/stop", MS_ADMIN_TRACE_STOP}};
        for (size_t i = 0; i < sizeof(routes) / sizeof(routes[0]); i++) {
            if (strcmp(url, routes[i].url) == 0) {
                p = rt_xcalloc(1, sizeof(*p));
                p->kind = routes[i].kind;
                rt_buf_init(&p->body);
                *con_cls = p;
                return MHD_YES; /* the body (if any) comes next */
            }
        }
        return rt_http_send(c, MHD_HTTP_METHOD_NOT_ALLOWED, "text/plain",
                            "method not allowed\n", false);
    }
    if (*upload_data_size) {
        if (p->body.len + *upload_data_size > MS__POST_MAX) {
            p->too_large = true;
        } else {
            rt_buf_append(&p->body, upload_data, *upload_data_size);
        }
        *upload_data_size = 0;
        return MHD_YES;
    }
    if (p->req) {
        if (!ms_admin_result(h->admin, p->req, &status, &body)) {
            return MHD_YES; /* spurious call: still running */
        }
        return rt_http_send(c, (unsigned)status, "application/json",
                            rt_xstrdup(body), true);
    }
    if (p->too_large) {
        return ms__http_json(c, MHD_HTTP_CONTENT_TOO_LARGE, "body too large");
    }
    if (!h->admin) {
        return ms__http_json(c, MHD_HTTP_SERVICE_UNAVAILABLE,
                             "admin requests are not served");
    }
    p->req = ms__post_req(c, p, &err);
    if (!p->req) {
        return ms__http_json(c, MHD_HTTP_BAD_REQUEST, err);
    }
    p->req->wake = ms__wake;
    p->req->wake_arg = c;
    /* A move can take minutes: no idle timeout while we wait. */
    MHD_set_connection_option(c, MHD_CONNECTION_OPTION_TIMEOUT,
                              (unsigned int)0);
    /* Suspend first: the loop may answer (and resume) at once. */
    MHD_suspend_connection(c);
    ms_admin_submit(h->admin, p->req);
    return MHD_YES;
}

static void ms__http_completed(void *cls,
                               struct MHD_Connection *c,
                               void **con_cls,
                               enum MHD_RequestTerminationCode toe)
{
    struct ms_http *h = cls;
    struct ms__post *p = *con_cls;
    (void)c;
    (void)toe;
    if (!p) {
        return;
    }
    if (p->req) {
        ms_admin_release(h->admin, p->req);
    }
    rt_buf_free(&p->body);
    free(p);
    *con_cls = NULL;
}

static enum MHD_Result ms__http_events(struct ms_http *h,
                                       struct MHD_Connection *c)
{
    uint64_t since = 0, since_ms = 0, limit = 0;
    const char *v;
    if (!h->events) {
        return ms__http_json(c, MHD_HTTP_SERVICE_UNAVAILABLE, "no events");
    }
    v = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "since");
    if (v && !ms__parse_u64(v, &since)) {
        return ms__http_json(c, MHD_HTTP_BAD_REQUEST, "since: a number");
    }
    v = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "since_ms");
    if (v && !ms__parse_u64(v, &since_ms)) {
        return ms__http_json(c, MHD_HTTP_BAD_REQUEST, "since_ms: a number");
    }
    v = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "limit");
    if (v && !ms__parse_u64(v, &limit)) {
        return ms__http_json(c, MHD_HTTP_BAD_REQUEST, "limit: a number");
    }
    return rt_http_send(
        c, MHD_HTTP_OK, "application/json",
        ms_events_json(h->events, since, since_ms, (size_t)limit), true);
}

/* ---- a member that is not the acting leader (DESIGN-master-ha §5.2) ---- */

/* Answered by every member itself: its own metrics. */
static bool ms__http_local(const char *url)
{
    return strcmp(url, "/metrics") == 0 || strcmp(url, "/health") == 0;
}

static enum MHD_Result ms__http_arg(void *cls,
                                    enum MHD_ValueKind kind,
                                    const char *key,
                                    const char *value)
{
    static const char hex[] = "0123456789ABCDEF";
    struct rt_buf *b = cls;
    (void)kind;
    /* The first argument opens the query; the path has no '?' of its own
     * (libmicrohttpd gives it without the query). */
    rt_buf_append_u8(b, memchr(b->data, '?', b->len) ? '&' : '?');
    for (int pass = 0; pass < 2; pass++) {
        const char *p = pass ? value : key;
        if (pass) {
            if (!value) {
                break;
            }
            rt_buf_append_u8(b, '=');
        }
        for (; *p; p++) {
            unsigned char ch = (unsigned char)*p;
            if ((ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') ||
                (ch >= '0' && ch <= '9') || strchr("-._~", ch)) {
                rt_buf_append_u8(b, ch);
            } else {
                rt_buf_append_u8(b, '%');
                rt_buf_append_u8(b, (uint8_t)hex[ch >> 4]);
                rt_buf_append_u8(b, (uint8_t)hex[ch & 15]);
            }
        }
    }
    return MHD_YES;
}

/* 307 to the leader (the method and body are kept by the client), or 503
 * while no leader is known. */
static enum MHD_Result ms__http_not_leader(struct MHD_Connection *c,
                                           const char *url,
                                           const char *leader)
{
    struct MHD_Response *r;
    struct rt_buf loc = RT_BUF_INIT;
    enum MHD_Result ret;

    if (!leader) {
        return ms__http_json(c, MHD_HTTP_SERVICE_UNAVAILABLE,
                             "no master leader: this master is not the "
                             "leader and knows none yet; retry");
    }
    rt_buf_printf(&loc, "http://%s%s", leader, url);
    MHD_get_connection_values(c, MHD_GET_ARGUMENT_KIND, ms__http_arg, &loc);
    rt_buf_append_u8(&loc, 0);
    r = MHD_create_response_from_buffer(0, NULL, MHD_RESPMEM_PERSISTENT);
    MHD_add_response_header(r, MHD_HTTP_HEADER_LOCATION, (char *)loc.data);
    MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
    ret = MHD_queue_response(c, MHD_HTTP_TEMPORARY_REDIRECT, r);
    MHD_destroy_response(r);
    rt_buf_free(&loc);
    return ret;
}

/* ---- access (ms_auth) ---- */

static bool ms__http_mutating(const char *url)
{
    return strcmp(url, "/api/split") == 0 || strcmp(url, "/api/merge") == 0 ||
           strcmp(url, "/api/move") == 0 || strcmp(url, "/api/drain") == 0 ||
           strcmp(url, "/api/transfer") == 0 ||
           strcmp(url, "/api/masters/add") == 0 ||
           strcmp(url, "/api/masters/remove") == 0 ||
           strcmp(url, "/api/masters/transfer") == 0 ||
           strcmp(url, "/api/trace/start") == 0 ||
           strcmp(url, "/api/trace/stop") == 0;
}

static bool ms__http_reading(const char *url)
{
    return strcmp(url, "/api/status") == 0 ||
           strcmp(url, "/api/history") == 0 ||
           strcmp(url, "/api/events") == 0 || strcmp(url, "/metrics") == 0 ||
           strcmp(url, "/api/trace") == 0;
}

/* "ADDR:PORT" of the client, for the log. */
static void ms__http_peer(struct MHD_Connection *c, char *out, size_t n)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    char host[NI_MAXHOST], serv[NI_MAXSERV];
    const struct sockaddr *sa = ci ? ci->client_addr : NULL;
    socklen_t len = sa && sa->sa_family == AF_INET6
                        ? sizeof(struct sockaddr_in6)
                        : sizeof(struct sockaddr_in);
    snprintf(out, n, "?");
    if (sa && getnameinfo(sa, len, host, sizeof(host), serv, sizeof(serv),
                          NI_NUMERICHOST | NI_NUMERICSERV) == 0) {
        snprintf(out, n, "%s:%s", host, serv);
    }
}

/* 401 (with the challenge of RFC 6750 §3) or 403 for @v. */
static enum MHD_Result ms__http_refuse(struct ms_http *h,
                                       struct MHD_Connection *c,
                                       const char *url,
                                       enum ms_auth_verdict v)
{
    struct MHD_Response *r;
    json_t *o = json_object();
    char *text;
    enum MHD_Result ret;
    char peer[NI_MAXHOST + NI_MAXSERV + 2];

    ms__http_peer(c, peer, sizeof(peer));
    atomic_fetch_add(&h->refused[v], 1);
    /* Never the Authorization header itself. */
    rt_log(RT_LOG_INFO, "http: %s from %s refused (%u): %s", url, peer,
           ms_auth_status(v), ms_auth_message(v));
    json_object_set_new(o, "error", json_string(ms_auth_message(v)));
    text = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    if (!text) {
        return MHD_NO;
    }
    r = MHD_create_response_from_buffer(strlen(text), text,
                                        MHD_RESPMEM_MUST_FREE);
    if (!r) {
        free(text);
        return MHD_NO;
    }
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE,
                            "application/json");
    MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
    if (v == MS_AUTH_MISSING) {
        MHD_add_response_header(r, MHD_HTTP_HEADER_WWW_AUTHENTICATE,
                                "Bearer realm=\"rt-master\"");
    }
    ret = MHD_queue_response(c, ms_auth_status(v), r);
    MHD_destroy_response(r);
    return ret;
}

/* The dashboard page: a static document with no cluster data (its data
 * comes from the API with the token), never to be framed by another page
 * since it has action buttons. */
static enum MHD_Result ms__http_dashboard(struct MHD_Connection *c)
{
    struct MHD_Response *r = MHD_create_response_from_buffer(
        strlen(ms_dashboard_html), (void *)ms_dashboard_html,
        MHD_RESPMEM_PERSISTENT);
    enum MHD_Result ret;
    if (!r) {
        return MHD_NO;
    }
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE,
                            "text/html; charset=utf-8");
    MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
    MHD_add_response_header(r, "Content-Security-Policy",
                            "frame-ancestors 'none'");
    MHD_add_response_header(r, "X-Frame-Options", "DENY");
    MHD_add_response_header(r, "Referrer-Policy", "no-referrer");
    ret = MHD_queue_response(c, MHD_HTTP_OK, r);
    MHD_destroy_response(r);
    return ret;
}

/* 405 with the Allow header RFC 9110 §15.5.6 asks for. */
static enum MHD_Result ms__http_405(struct MHD_Connection *c,
                                    const char *allow,
                                    const char *text)
{
    struct MHD_Response *r = MHD_create_response_from_buffer(
        strlen(text), (void *)text, MHD_RESPMEM_PERSISTENT);
    enum MHD_Result ret;
    if (!r) {
        return MHD_NO;
    }
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "text/plain");
    MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
    MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, allow);
    ret = MHD_queue_response(c, MHD_HTTP_METHOD_NOT_ALLOWED, r);
    MHD_destroy_response(r);
    return ret;
}

/* The first call of a request: the method, then who asks. Returns true
 * when it queued an answer (*@ret is the handler's result). */
static bool ms__http_gate(struct ms_http *h,
                          struct MHD_Connection *c,
                          const char *url,
                          const char *method,
                          enum MHD_Result *ret)
{
    struct ms_auth_req ar = {0};
    enum ms_auth_verdict v;
    bool post = strcmp(method, MHD_HTTP_METHOD_POST) == 0;
    bool get = strcmp(method, MHD_HTTP_METHOD_GET) == 0 ||
               strcmp(method, MHD_HTTP_METHOD_HEAD) == 0;

    if (ms__http_mutating(url)) {
        /* OPTIONS included: a CORS preflight is never granted, so a page
         * of another origin cannot send the Authorization header. */
        if (!post) {
            *ret = ms__http_405(c, "POST", "use POST\n");
            return true;
        }
        ar.route = MS_AUTH_MUTATE;
    } else if (ms__http_reading(url)) {
        if (!get) {
            *ret = ms__http_405(c, "GET, HEAD", "method not allowed\n");
            return true;
        }
        ar.route = MS_AUTH_READ;
    } else {
        return false; /* /health, the page, 404 and 405: no data */
    }
    ar.authorization = MHD_lookup_connection_value(
        c, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
    ar.origin = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Origin");
    ar.host =
        MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_HOST);
    ar.sec_fetch_site =
        MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Sec-Fetch-Site");
    v = ms_auth_check(h->auth, &ar);
    if (v == MS_AUTH_OK) {
        return false;
    }
    *ret = ms__http_refuse(h, c, url, v);
    return true;
}

/* @text (taken) with this listener's counters appended; returned to the
 * caller (malloc'd). */
static char *ms__http_metrics(struct ms_http *h, char *text)
{
    static const char *const reason[MS_AUTH__NR] = {
        [MS_AUTH_MISSING] = "no_token",
        [MS_AUTH_WRONG] = "wrong_token",
        [MS_AUTH_CROSS_ORIGIN] = "cross_origin",
        [MS_AUTH_DISABLED] = "no_token_file",
    };
    struct rt_buf b = RT_BUF_INIT;
    rt_buf_printf(&b, "%s", text);
    free(text);
    rt_buf_printf(&b,
                  "# HELP rt_master_http_refused_total HTTP requests refused "
                  "by the admin token and origin checks, by reason\n"
                  "# TYPE rt_master_http_refused_total counter\n");
    for (int v = MS_AUTH_OK + 1; v < MS_AUTH__NR; v++) {
        rt_buf_printf(
            &b, "rt_master_http_refused_total{reason=\"%s\"} %" PRIu64 "\n",
            reason[v], (uint64_t)atomic_load(&h->refused[v]));
    }
    if (h->trace) {
        ms_trace_rec_metrics(h->trace, &b);
    }
    rt_buf_append_u8(&b, 0);
    return (char *)b.data;
}

static enum MHD_Result ms__http_handler(void *cls,
                                        struct MHD_Connection *c,
                                        const char *url,
                                        const char *method,
                                        const char *version,
                                        const char *upload_data,
                                        size_t *upload_data_size,
                                        void **con_cls)
{
    struct ms_http *h = cls;
    enum ms_status_doc doc;
    const char *ctype;
    char *body;
    enum MHD_Result ret;
    (void)version;

    /* Refused before a follower redirects: a 307 would tell an anonymous
     * client where the leader is, and it must be refused there anyway. */
    if (!*con_cls && ms__http_gate(h, c, url, method, &ret)) {
        return ret;
    }
    if (!*con_cls && !ms__http_local(url)) {
        char *leader = NULL;
        if (!ms_status_role(h->st, &leader)) {
            ret = ms__http_not_leader(c, url, leader);
            free(leader);
            return ret;
        }
    }
    if (strcmp(method, MHD_HTTP_METHOD_POST) == 0) {
        return ms__http_post(h, c, url, upload_data, upload_data_size, con_cls);
    }
    if (rt_http_basic(c, method, url, &ret)) {
        return ret;
    }
    if (strcmp(url, "/") == 0 || strcmp(url, "/dashboard") == 0) {
        return ms__http_dashboard(c);
    }
    if (strcmp(url, "/api/events") == 0) {
        return ms__http_events(h, c);
    }
    if (strcmp(url, "/api/trace") == 0) {
        if (!h->trace) {
            return rt_http_send(c, MHD_HTTP_NOT_FOUND, "text/plain",
                                "not found\n", false);
        }
        return rt_http_send(c, MHD_HTTP_OK, "application/json",
                            ms_trace_rec_status_json(h->trace), true);
    }
    if (strcmp(url, "/api/status") == 0) {
        doc = MS_STATUS_JSON;
        ctype = "application/json";
    } else if (strcmp(url, "/api/history") == 0) {
        const char *res =
            MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "res");
        if (!res || strcmp(res, "1") == 0) {
            doc = MS_STATUS_HISTORY;
        } else if (strcmp(res, "10") == 0) {
            doc = MS_STATUS_HISTORY_COARSE;
        } else {
            return ms__http_json(c, MHD_HTTP_BAD_REQUEST,
                                 "res: 1 or 10 (seconds per frame)");
        }
        ctype = "application/json";
    } else if (strcmp(url, "/metrics") == 0) {
        doc = MS_STATUS_METRICS;
        ctype = "text/plain; version=0.0.4";
    } else {
        return rt_http_send(c, MHD_HTTP_NOT_FOUND, "text/plain", "not found\n",
                            false);
    }
    body = ms_status_copy(h->st, doc);
    if (!body) {
        return rt_http_send(c, MHD_HTTP_SERVICE_UNAVAILABLE, "text/plain",
                            "starting\n", false);
    }
    if (doc == MS_STATUS_METRICS) {
        body = ms__http_metrics(h, body);
    }
    return rt_http_send(c, MHD_HTTP_OK, ctype, body, true);
}

int ms_http_start(const char *host,
                  int port,
                  struct ms_status *st,
                  struct ms_events *events,
                  struct ms_admin *admin,
                  struct ms_auth *auth,
                  struct ms_http **out,
                  char *errmsg)
{
    struct sockaddr_storage ss;
    unsigned int flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL |
                         MHD_USE_ERROR_LOG | MHD_ALLOW_SUSPEND_RESUME;
    const union MHD_DaemonInfo *info;
    struct ms_http *h;

    if (!host) {
        host = "";
    }
    if (rt_http_sockaddr(host, port, &ss, &flags) != 0) {
        goto err_addr;
    }

    h = rt_xcalloc(1, sizeof(*h));
    h->st = st;
    h->events = events;
    h->admin = admin;
    h->auth = auth;
    h->d = MHD_start_daemon(flags, (uint16_t)port, NULL, NULL, ms__http_handler,
                            h, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&ss,
                            MHD_OPTION_CONNECTION_TIMEOUT, (unsigned int)30,
                            MHD_OPTION_NOTIFY_COMPLETED, ms__http_completed, h,
                            MHD_OPTION_END);
    if (!h->d) {
        if (errmsg) {
            rt_errmsg_printf(errmsg, "http: cannot listen on %s:%d", host,
                             port);
        }
        free(h);
        return RT_EIO;
    }
    info = MHD_get_daemon_info(h->d, MHD_DAEMON_INFO_BIND_PORT);
    h->port = info ? info->port : port;
    rt_log(RT_LOG_INFO, "http: status API on %s:%d", host, h->port);
    *out = h;
    return 0;

err_addr:
    if (errmsg) {
        rt_errmsg_printf(errmsg, "http: bad listen address %s:%d", host, port);
    }
    return RT_EINVAL;
}

int ms_http_port(const struct ms_http *h)
{
    return h->port;
}

void ms_http_set_trace(struct ms_http *h, struct ms_trace_rec *rec)
{
    h->trace = rec;
}

void ms_http_stop(struct ms_http *h)
{
    if (!h) {
        return;
    }
    MHD_stop_daemon(h->d);
    free(h);
}
