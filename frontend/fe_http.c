/* libmicrohttpd glue and the share-nothing workers. The life of a request
 * is described in fe_http.h.
 *
 * Threads: cfg->threads workers. Each owns a libuv loop, an fe_route and
 * its libmicrohttpd daemons in external epoll mode (one for HTTP, one for
 * HTTPS, each on its own listen socket): per daemon a uv_poll watches its
 * epoll fd and a uv_timer follows MHD_get_timeout() (a uv_idle when that
 * is 0: see fe__mhd_run); a uv_check runs the daemons once more at the
 * end of a loop iteration in which RPC replies resumed connections, so a
 * reply is written in the same iteration it arrived. The access handler,
 * NOTIFY_COMPLETED, fe_route's callbacks and the response helpers all run
 * on that one thread; nothing of a request is shared. Each worker has
 * its own listening socket per address (SO_REUSEPORT, fe__listen; a dup
 * per daemon). The workers share only immutable settings, the published
 * account table (fe_auth.h), the current certificate (under tls_lock)
 * and fe_svc's locked policy snapshot. The main thread only starts,
 * reloads and stops them.
 *
 * Certificate reload (fe_http_reload_tls, SIGHUP): each worker starts a
 * new HTTPS daemon with the new certificate on a new dup of its own
 * listen socket, then quiesces the old one (MHD_quiesce_daemon: it stops
 * accepting, its connections go on) and stops it once its last connection
 * has ended. Nothing is dropped and no connection changes certificate
 * mid-session. Chosen over MHD_OPTION_HTTPS_CERT_CALLBACK, which would
 * have us build and free GnuTLS certificate structures ourselves and keep
 * each alive for the handshakes that may still use it; here libmicrohttpd
 * loads the PEM (after fe_tls checked it with OpenSSL) and owns its
 * GnuTLS state, and the daemon's life bounds the certificate's.
 *
 * Why external epoll and not MHD's own threads: with MHD's threads every
 * request crossed from an MHD thread to the loop (uv_async) and back
 * (MHD_resume_connection waking the MHD thread through its ITC): two
 * cross-thread wake-ups per request, which cost more than the request.
 * Why it is safe from the 128-ready-connections stall (DESIGN §8): MHD
 * 0.9.75 drains its epoll set with `while (epoll_wait(..., 128, timeout)
 * == 128)`, and with an internal thread the second epoll_wait blocks for
 * the connection timeout when exactly 128 events were ready. MHD_run()
 * in external mode passes a zero timeout, so that loop never blocks; the
 * waiting happens in libuv's epoll, which has no such cap. Checked with
 * 128, 129, 256 and 300 concurrent connections (frontend/README.md).
 *
 * Failure modes: URL over FE_URL_MAX -> 414 InvalidUri; header lines over
 * FE_HEADERS_MAX -> 400 InvalidHeaderValue (both before the body, like
 * 413); anything that does not even fit MHD's pool (FE_HTTP_POOL) gets
 * MHD's own 414/431 page; a body above --max-body -> 413
 * RequestBodyTooLarge (at once when Content-Length says so, else after the
 * body); shutdown -> jobs in flight and new requests get 503 ServerBusy; a
 * client that disconnects while suspended is only noticed after the resume
 * (MHD does not watch suspended sockets). Hostile clients (fe_guard.h):
 * a connection over the caps is closed at accept; one over its header,
 * body or idle bound is shut down by the worker's sweep timer (408 first
 * when a request had started); near the cap a new connection sheds the
 * oldest one that never sent a whole request; ambiguous framing (RFC 9112
 * §6.3) -> 400 InvalidHeaderValue and the connection closed; an account
 * over its requests in flight -> 503 ServerBusy. HTTPS: a failed
 * handshake (plain HTTP, TLS < 1.2) closes the connection, logged by
 * libmicrohttpd; a new certificate libmicrohttpd refuses on reload leaves
 * the old daemon in service (logged). The caps and bounds count HTTP and
 * HTTPS connections alike (one guard, one list per worker). The same
 * sweep gives back the all-zero pages of the libmicrohttpd pool of each
 * connection idle for 5 s, 1 s while many are waiting (fe_pool.h). */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <microhttpd.h>
#include <openssl/crypto.h>
#include <uv.h>

#include "fe_acl.h"
#include "fe_api.h"
#include "fe_auth.h"
#include "fe_cors.h"
#include "fe_guard.h"
#include "fe_http.h"
#include "fe_metrics.h"
#include "fe_pool.h"
#include "fe_req.h"
#include "fe_route.h"
#include "fe_tls.h"
#include "rt_addr.h"
#include "rt_alloc.h"
#include "rt_err.h"
#include "rt_log.h"
#include "rt_time.h"

/* Free requests kept per worker, and the largest buffer a recycled
 * request keeps (bigger ones are freed, so one huge body does not stay
 * pinned). */
#define FE_FREE_REQS_MAX 256
#define FE_KEEP_BUF_MAX (64 * 1024)
/* How often a worker checks its connections against their deadlines:
 * the bounds are met to within this. */
#define FE_GUARD_SWEEP_MS 250

enum fe__phase {
    FE__BODY,  /* reading headers/body */
    FE__WAIT,  /* suspended, job running in fe_route */
    FE__REPLY, /* job done, connection resumed */
    FE__DONE,  /* response queued */
};

/* A request and what the worker needs to carry it through libmicrohttpd.
 * The fe_req comes first: fe_route's done_cb gets it back from job->data. */
struct fe__hreq
{
    struct fe_req req;
    struct fe_worker *w;
    struct MHD_Connection *conn;
    struct fe__hreq *next_free;
    enum fe__phase phase;
    int job_active; /* submitted, done_cb not yet fired */
    int suspended;  /* counted in the worker's suspended requests */
    int completed;  /* MHD reported the request complete */
    uint64_t start_us;
    int body_too_large;
    int acct_counted; /* counted in fe_guard_acct_enter() */
    struct fe__hconn *hc;
};

/* A connection, from libmicrohttpd's STARTED notification to its CLOSED
 * one (the socket context): its place in the worker's guard list. */
struct fe__hconn
{
    struct fe_guard_conn g; /* first: the sweep hands it back */
    struct fe_worker *w;
    struct MHD_Connection *conn;
    MHD_socket fd;
    int listed;
    struct fe_pool pool; /* its libmicrohttpd pool, trimmed when idle */
};

/* One libmicrohttpd daemon of a worker: the plain-HTTP one, the HTTPS one
 * in service, or an HTTPS one a certificate reload retired, which accepts
 * nothing new and is stopped once its last connection has ended. */
struct fe__daemon
{
    struct fe_worker *w;
    struct MHD_Daemon *d;
    uv_poll_t poll;     /* the daemon's epoll fd */
    uv_timer_t timer;   /* MHD_get_timeout() */
    uv_idle_t idle;     /* MHD_get_timeout() == 0: the next iteration */
    struct fe_tls *tls; /* held for the daemon's life; NULL: plain HTTP */
    int retired;
    int quiesced;      /* fe__daemon_quiesce ran */
    int closing;       /* handles whose close callback is pending */
    int free_on_close; /* retired and idle: stop and free once closed */
    struct fe__daemon *next;
};

struct fe_worker
{
    struct fe_http *h;
    unsigned idx;
    pthread_t thread;
    int thread_started;
    uv_loop_t loop;
    int loop_ok;
    struct fe_route *route;
    struct fe_metrics_shard *metrics; /* NULL: none */
    struct fe__daemon *daemons;       /* in service first, then retired ones */
    uv_check_t check;                 /* MHD_run after resumes (need_run) */
    uv_async_t stop;                  /* fe_http_stop() */
    uv_async_t reload;                /* fe_http_reload_tls() */
    uv_timer_t drain;                 /* shutdown: flush, then close */
    uv_timer_t sweep;                 /* connections over their deadlines */
    struct fe_guard_list conns;       /* of every daemon of the worker */
    int have_map;                     /* counted in h->maps_ready */
    unsigned refused; /* at the caps, since the last sweep's log */
    unsigned shed;    /* for the reserve, likewise */
    int handles;      /* the worker's own handles still to close */
    int closed;       /* fe__close_handles() ran */
    /* Set by a resume (or a guard kill) for fe__on_check to run every
     * daemon: the connection may belong to any of them, so only the check
     * clears it, never one daemon's run. */
    int need_run;
    unsigned resumes; /* resumes so far (a run tells whether it did one) */
    int stopping;
    uint64_t drain_until;
    unsigned suspended;    /* connections suspended and not yet re-entered */
    unsigned pool_waiting; /* idle, pool untrimmed, at the last sweep */
    struct fe__hreq *free_reqs;
    unsigned nfree;
    time_t date_sec; /* cached Date header */
    char date[40];
};

/* The listening sockets of one address: one per worker, bound with
 * SO_REUSEPORT so that the kernel spreads new connections over the
 * workers (fe__listen). */
struct fe__listener
{
    int *fd; /* fd[i]: worker i's */
    unsigned n;
    int port;
    int ipv6;
};

struct fe_http
{
    const struct fe_http_cfg *cfg;
    struct fe_guard *guard;
    atomic_int stop_sent;
    atomic_uint maps_ready; /* workers with a partition map installed */
    struct fe_worker *w;
    unsigned n;
    struct fe__listener http;  /* n == 0: no plain HTTP */
    struct fe__listener https; /* n == 0: no HTTPS */
    pthread_mutex_t tls_lock;
    struct fe_tls *tls; /* the certificate new HTTPS daemons get */
};

/* ---- Requests ------------------------------------------------------- */

/* The guard's record of connection @c (fe__conn_notify), or NULL. */
static struct fe__hconn *fe__hconn_of(struct MHD_Connection *c)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return ci ? ci->socket_context : NULL;
}

static void fe__guard_phase(struct fe__hconn *hc, enum fe_guard_phase p)
{
    if (hc) {
        fe_guard_conn_phase(&hc->g, p, rt_time_mono_ms());
    }
}

/* A request in its start state, reusing a recycled one's buffers. */
static struct fe__hreq *fe__req_get(struct fe_worker *w)
{
    struct fe__hreq *hr = w->free_reqs;
    if (!hr) {
        hr = rt_xcalloc(1, sizeof(*hr));
    } else {
        w->free_reqs = hr->next_free;
        w->nfree--;
    }
    fe_req_reset(&hr->req);
    hr->next_free = NULL;
    hr->phase = FE__BODY;
    hr->job_active = 0;
    hr->suspended = 0;
    hr->completed = 0;
    hr->body_too_large = 0;
    hr->acct_counted = 0;
    hr->hc = NULL;
    return hr;
}

/* Releases everything a request owns except the kept buffers, and puts
 * it on the free list. */
static void fe__req_put(struct fe_worker *w, struct fe__hreq *hr)
{
    fe_api_req_free(&hr->req);
    fe_accounts_release(hr->req.accounts);
    hr->req.accounts = NULL;
    fe_req_clear(&hr->req, FE_KEEP_BUF_MAX);
    if (w->nfree >= FE_FREE_REQS_MAX) {
        fe_req_fini(&hr->req);
        free(hr);
        return;
    }
    hr->next_free = w->free_reqs;
    w->free_reqs = hr;
    w->nfree++;
}

static void fe__req_free_list(struct fe_worker *w)
{
    while (w->free_reqs) {
        struct fe__hreq *hr = w->free_reqs;
        w->free_reqs = hr->next_free;
        fe_req_fini(&hr->req);
        free(hr);
    }
    w->nfree = 0;
}

struct fe__args
{
    struct fe_req *req;
    size_t bytes; /* the query string's length, '&' and '=' counted */
};

static enum MHD_Result fe__query_iter(void *cls,
                                      enum MHD_ValueKind kind,
                                      const char *key,
                                      size_t key_size,
                                      const char *value,
                                      size_t value_size)
{
    struct fe__args *a = cls;
    (void)kind;
    a->bytes += key_size + value_size + 2;
    fe_query_add_n(&a->req->query, key, key_size, value, value_size);
    return MHD_YES;
}

/* Captures every header once (the strings stay in MHD's pool for the
 * request's life) and measures the header block. */
static enum MHD_Result fe__hdr_iter(void *cls,
                                    enum MHD_ValueKind kind,
                                    const char *key,
                                    size_t key_size,
                                    const char *value,
                                    size_t value_size)
{
    struct fe__args *a = cls;
    (void)kind;
    a->bytes += key_size + value_size + 4; /* ": " and CRLF */
    fe_req_add_header(a->req, key, value ? value : "");
    return MHD_YES;
}

/* Starts a request: the raw path, the decoded query (also measuring the
 * URL), the headers (measured too), the peer and the version echoed on
 * every response. Returns the request; *url_len gets the request target's
 * length, *hdr_bytes the header block's. */
static struct fe__hreq *fe__req_create(struct fe_worker *w,
                                       struct MHD_Connection *c,
                                       const char *url,
                                       const char *method,
                                       size_t *url_len,
                                       size_t *hdr_bytes)
{
    struct fe__hreq *hr = fe__req_get(w);
    struct fe_req *req = &hr->req;
    const union MHD_ConnectionInfo *ci;
    struct fe__args args;

    hr->w = w;
    hr->conn = c;
    hr->start_us = rt_time_mono_us();
    fe_metrics_req_begin(w->metrics);
    req->accounts = fe_accounts_acquire(w->h->cfg->accounts);
    /* Only a TLS connection has a protocol version. */
    req->tls = MHD_get_connection_info(c, MHD_CONNECTION_INFO_PROTOCOL) != NULL;
    req->method = method;
    ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    req->peer = ci ? ci->client_addr : NULL;
    fe_req_set_path(req, url);
    args.req = req;
    args.bytes = 0;
    MHD_get_connection_values_n(c, MHD_GET_ARGUMENT_KIND, fe__query_iter,
                                &args);
    *url_len = req->raw_path_len + args.bytes;
    args.bytes = 0;
    MHD_get_connection_values_n(c, MHD_HEADER_KIND, fe__hdr_iter, &args);
    *hdr_bytes = args.bytes;
    fe_req_headers_done(req);
    return hr;
}

/* ---- Responses ------------------------------------------------------ */

/* The Date header, formatted once per second per worker. */
static const char *fe__date(struct fe_worker *w)
{
    time_t now = time(NULL);
    if (now != w->date_sec) {
        rt_time_http_date(w->date, sizeof(w->date));
        w->date_sec = now;
    }
    return w->date;
}

/* Queues the response built in @hr. The body stays in req->rbody (the
 * response points into it) until the request completes. */
static enum MHD_Result fe__queue(struct fe__hreq *hr)
{
    struct fe_req *req = &hr->req;
    struct MHD_Response *resp;
    const char *cid;
    enum MHD_Result ret;
    uint64_t us;

    resp = MHD_create_response_from_buffer(
        req->rbody.len, req->rbody.len ? (void *)req->rbody.data : (void *)"",
        MHD_RESPMEM_PERSISTENT);
    if (!resp) {
        return MHD_NO;
    }
    MHD_add_response_header(resp, "x-ms-request-id", req->reqid);
    MHD_add_response_header(resp, "x-ms-version", req->version);
    MHD_add_response_header(resp, MHD_HTTP_HEADER_DATE, fe__date(hr->w));
    cid = fe_req_header(req, "x-ms-client-request-id");
    if (cid && fe_hdr_client_id_ok(cid)) {
        MHD_add_response_header(resp, "x-ms-client-request-id", cid);
    }
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
    MHD_add_response_header(resp, "X-Content-Type-Options", "nosniff");
    if (req->odata) {
        MHD_add_response_header(resp, "DataServiceVersion", fe_req_dsv(req));
    }
    MHD_add_response_header(resp, MHD_HTTP_HEADER_SERVER, "rangetable");
    for (size_t off = 0; off < req->hdrs.len;) {
        const char *name = (const char *)req->hdrs.data + off;
        size_t nl = strlen(name);
        const char *value = name + nl + 1;
        size_t vl = strlen(value);
        MHD_add_response_header(resp, name, value);
        off += nl + 1 + vl + 1;
    }
    if (req->status == 0) {
        req->status = 500;
    }
    fe__guard_phase(hr->hc, FE_GUARD_BUSY);
    /* Counted before it is queued, so a client that reads the response
     * and then scrapes /metrics always finds its request there. */
    us = rt_time_mono_us() - hr->start_us;
    fe_metrics_req_done(
        hr->w->metrics, req->path.account,
        fe_metrics_op_of(fe_api_op_name(req), req->method,
                         fe_req_header(req, "If-Match") != NULL),
        req->status, req->body.len, req->rbody.len, us);
    ret = MHD_queue_response(hr->conn, (unsigned)req->status, resp);
    MHD_destroy_response(resp);
    hr->phase = FE__DONE;
    rt_log(RT_LOG_DEBUG, "%s %s %d %lluus", req->method, req->raw_path,
           req->status, (unsigned long long)us);
    return ret;
}

/* ---- Jobs ----------------------------------------------------------- */

/* [loop] The job finished (an RPC callback, or inside fe_route_submit):
 * the reply is in req->job. Resumes the connection; the daemon runs at the
 * end of this loop iteration (fe__on_check). */
static void fe__job_done(struct fe_job *job)
{
    struct fe__hreq *hr = job->data;
    struct fe_worker *w = hr->w;
    hr->job_active = 0;
    if (hr->acct_counted) {
        hr->acct_counted = 0;
        fe_guard_acct_exit(w->h->guard, hr->req.path.account);
    }
    if (hr->completed) {
        /* Cannot happen while the daemon runs (MHD never completes a
         * suspended connection); kept safe for MHD_stop_daemon. */
        fe__req_put(w, hr);
        return;
    }
    hr->phase = FE__REPLY;
    MHD_resume_connection(hr->conn);
    w->need_run = 1;
    w->resumes++;
}

/* Suspends the connection and runs the job on this worker's fe_route. */
static void fe__submit(struct fe__hreq *hr)
{
    struct fe_worker *w = hr->w;
    hr->phase = FE__WAIT;
    fe__guard_phase(hr->hc, FE_GUARD_BUSY);
    hr->req.job.done_cb = fe__job_done;
    hr->req.job.data = hr;
    hr->req.job.reqid = hr->req.reqid;
    hr->job_active = 1;
    MHD_suspend_connection(hr->conn);
    hr->suspended = 1;
    w->suspended++;
    fe_route_submit(w->route, &hr->req.job);
}

/* ---- Hostile clients (fe_guard.h) ---------------------------------- */

/* What a client whose request ran over its bound reads before the close.
 * Written straight to the socket: libmicrohttpd is still reading that
 * request and has written nothing for it, so nothing interleaves. Never
 * on TLS, where only the TLS session may write. */
static const char fe__408[] =
    "HTTP/1.1 408 Request Timeout\r\n"
    "Connection: close\r\n"
    "Content-Length: 0\r\n"
    "Server: rangetable\r\n\r\n";

/* Ends a connection from outside libmicrohttpd's callbacks' normal flow:
 * shutdown() leaves the socket readable at end of file, so the next
 * MHD_run reads 0 and closes it the usual way (NOTIFY_COMPLETED, then
 * NOTIFY_CLOSED, which counts it out); closing the fd ourselves would
 * bypass both. @answer: a 408 first when a request had started. */
static void fe__hconn_kill(struct fe__hconn *hc, int answer)
{
    if (answer &&
        (hc->g.phase == FE_GUARD_HEADERS || hc->g.phase == FE_GUARD_BODY) &&
        !MHD_get_connection_info(hc->conn, MHD_CONNECTION_INFO_PROTOCOL)) {
        ssize_t n = send(hc->fd, fe__408, sizeof(fe__408) - 1,
                         MSG_NOSIGNAL | MSG_DONTWAIT);
        (void)n; /* best effort: the close is what matters */
    }
    shutdown(hc->fd, SHUT_RDWR);
    hc->g.closing = 1;
    hc->w->need_run = 1;
}

/* A sweep found @g over its deadline. */
static void fe__on_overdue(struct fe_guard_conn *g, void *arg)
{
    static const char *const phase[FE_GUARD__NR] = {"header", "idle", "header",
                                                    "body", "busy"};
    (void)arg;
    rt_log(RT_LOG_DEBUG, "closing a connection over its %s bound",
           phase[g->phase]);
    fe__hconn_kill((struct fe__hconn *)g, 1);
}

/* ---- Idle connections' pools (fe_pool.h) ------------------------------ */

static enum MHD_Result fe__pool_first_iter(void *cls,
                                           enum MHD_ValueKind kind,
                                           const char *key,
                                           size_t key_size,
                                           const char *value,
                                           size_t value_size)
{
    struct fe_pool_first *f = cls;
    f->key = key;
    f->key_size = key_size;
    f->value = value;
    f->value_size = value_size;
    f->kind = (int)kind;
    return MHD_NO; /* the list's first entry is all it takes */
}

/* The pool size given to libmicrohttpd. */
static size_t fe__pool_size(const struct fe_http_cfg *cfg)
{
    return cfg->http_pool ? cfg->http_pool : (size_t)FE_HTTP_POOL;
}

/* A request of @hc started with @method: locates its pool (of @pool_size
 * bytes) if not yet. */
static void fe__pool_learn(struct fe__hconn *hc,
                           struct MHD_Connection *c,
                           const char *method,
                           size_t pool_size)
{
    struct fe_pool_first f = {0};
    if (!hc || hc->pool.base || hc->pool.tries >= FE_POOL_LOCATE_TRIES) {
        return;
    }
    if (MHD_get_connection_values_n(c,
                                    MHD_HEADER_KIND | MHD_COOKIE_KIND |
                                        MHD_POSTDATA_KIND |
                                        MHD_GET_ARGUMENT_KIND | MHD_FOOTER_KIND,
                                    fe__pool_first_iter, &f) > 0) {
        fe_pool_locate(&hc->pool, pool_size, method, &f);
    }
}

/* Trims the pools of @w's connections that served a request since their
 * last trim and have been idle long enough (fe_pool_trim_after_ms: how
 * many were waiting at the last sweep). Between MHD_run()s, on the
 * worker's thread: MHD reset those pools after their last request. */
static void fe__pool_sweep(struct fe_worker *w)
{
    uint64_t now = rt_time_mono_ms();
    uint64_t after = fe_pool_trim_after_ms(w->pool_waiting);
    unsigned waiting = 0;
    for (struct fe_guard_conn *g = w->conns.head; g; g = g->next) {
        struct fe__hconn *hc = (struct fe__hconn *)g;
        if (!hc->pool.dirty || !hc->pool.base || g->closing ||
            g->phase != FE_GUARD_IDLE) {
            continue;
        }
        if (now - g->since_ms >= after) {
            fe_pool_trim(&hc->pool, fe__pool_size(w->h->cfg));
        } else {
            waiting++;
        }
    }
    w->pool_waiting = waiting;
}

/* Accept policy: refuses at once what the caps would refuse (checked again,
 * and counted, when the connection starts). */
static enum MHD_Result fe__accept_policy(void *cls,
                                         const struct sockaddr *addr,
                                         socklen_t addrlen)
{
    struct fe_worker *w = cls;
    (void)addrlen;
    if (fe_guard_conn_check(w->h->guard, addr) != FE_GUARD_ADMIT) {
        w->refused++;
        return MHD_NO;
    }
    return MHD_YES;
}

/* STARTED: the connection is counted (total, its address) and listed;
 * over a cap it is closed at once, and in the reserve it sheds the
 * worker's oldest connection that never sent a whole request. CLOSED:
 * counted out. Both are counted in the metrics (rt_fe_connections_*). */
static void fe__conn_notify(void *cls,
                            struct MHD_Connection *c,
                            void **socket_context,
                            enum MHD_ConnectionNotificationCode toe)
{
    struct fe_worker *w = cls;
    struct fe__hconn *hc = *socket_context;
    const union MHD_ConnectionInfo *ci;
    struct fe_guard_conn *victim;
    int rc;

    fe_metrics_conn(w->metrics, toe == MHD_CONNECTION_NOTIFY_STARTED);
    if (toe == MHD_CONNECTION_NOTIFY_CLOSED) {
        if (!hc) {
            return;
        }
        *socket_context = NULL;
        if (hc->listed) {
            fe_guard_list_remove(&w->conns, &hc->g);
        }
        if (hc->g.counted) {
            fe_guard_conn_close(w->h->guard, (struct sockaddr *)&hc->g.addr);
        }
        free(hc);
        return;
    }
    hc = rt_xcalloc(1, sizeof(*hc));
    hc->w = w;
    hc->conn = c;
    ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    hc->fd = ci ? ci->connect_fd : MHD_INVALID_SOCKET;
    ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    if (ci && ci->client_addr) {
        memcpy(&hc->g.addr, ci->client_addr,
               ci->client_addr->sa_family == AF_INET6
                   ? sizeof(struct sockaddr_in6)
                   : sizeof(struct sockaddr_in));
    }
    *socket_context = hc;
    fe_guard_list_add(&w->conns, &hc->g, rt_time_mono_ms());
    hc->listed = 1;
    rc = fe_guard_conn_open(w->h->guard, (struct sockaddr *)&hc->g.addr);
    if (rc != FE_GUARD_ADMIT && rc != FE_GUARD_ADMIT_SHED) {
        /* Another worker took the last place since the accept policy. */
        w->refused++;
        fe__hconn_kill(hc, 0);
        return;
    }
    hc->g.counted = 1;
    if (rc == FE_GUARD_ADMIT_SHED) {
        victim = fe_guard_list_victim(&w->conns, &hc->g);
        if (victim) {
            w->shed++;
            fe__hconn_kill((struct fe__hconn *)victim, 0);
        }
    }
}

/* A request line arrived: from here its headers are on the clock. */
static void *fe__uri_log(void *cls, const char *uri, struct MHD_Connection *c)
{
    (void)cls;
    (void)uri;
    fe__guard_phase(fe__hconn_of(c), FE_GUARD_HEADERS);
    return NULL;
}

static enum MHD_Result fe__framing_iter(void *cls,
                                        enum MHD_ValueKind kind,
                                        const char *key,
                                        size_t key_size,
                                        const char *value,
                                        size_t value_size)
{
    (void)kind;
    fe_guard_framing_add(cls, key, key_size, value ? value : "",
                         value ? value_size : 0);
    return MHD_YES;
}

/* RFC 9112 §6.3: a request whose body length two parsers could read
 * differently gets 400 InvalidHeaderValue, and the connection closes
 * after it, so nothing after its headers is ever read as a request.
 * Returns 1 when that response was queued (in *ret). */
static int fe__framing(struct fe__hreq *hr,
                       const char *version,
                       enum MHD_Result *ret)
{
    struct fe_guard_framing f;
    const char *why;
    int http10 = version && strcmp(version, MHD_HTTP_VERSION_1_0) == 0;

    fe_guard_framing_init(&f);
    MHD_get_connection_values_n(hr->conn, MHD_HEADER_KIND, fe__framing_iter,
                                &f);
    if (fe_guard_framing_check(&f, http10, &why) == 0) {
        return 0;
    }
    rt_log(RT_LOG_INFO, "refused a request: %s", why);
    fe_req_resp_error(&hr->req, RT_EHEADER, NULL);
    fe_req_resp_header(&hr->req, MHD_HTTP_HEADER_CONNECTION, "close");
    *ret = fe__queue(hr);
    return 1;
}

/* ---- libmicrohttpd callbacks ---------------------------------------- */

/* First call of a request: limits that can be judged from the request
 * line and headers. Returns 1 when a response was queued (in *ret). */
static int fe__early_checks(struct fe__hreq *hr,
                            size_t url_len,
                            size_t hbytes,
                            enum MHD_Result *ret)
{
    struct fe_req *req = &hr->req;
    size_t max_body = hr->w->h->cfg->max_body;
    const char *cl;

    if (url_len > FE_URL_MAX) {
        fe_req_resp_error(req, RT_EURILONG, NULL);
        *ret = fe__queue(hr);
        return 1;
    }
    if (hbytes > FE_HEADERS_MAX) {
        fe_req_resp_error(req, RT_EHEADER,
                          "The size of the request headers is too long.");
        *ret = fe__queue(hr);
        return 1;
    }
    cl = fe_req_header(req, MHD_HTTP_HEADER_CONTENT_LENGTH);
    if (cl && strtoull(cl, NULL, 10) > max_body) {
        const char *expect = fe_req_header(req, MHD_HTTP_HEADER_EXPECT);
        hr->body_too_large = 1;
        /* A client waiting for 100 Continue (or sending something absurd)
         * gets the 413 before the body, without a 100. Others are already
         * sending: the body is read and dropped so they can read the 413
         * instead of a reset (SDKs map 413 to RequestTooLargeError). */
        if ((expect && strcasecmp(expect, "100-continue") == 0) ||
            strtoull(cl, NULL, 10) / 16 > max_body) {
            fe_req_resp_error(req, RT_ETOOLARGE, NULL);
            *ret = fe__queue(hr);
            return 1;
        }
    }
    return 0;
}

static enum MHD_Result fe__access(void *cls,
                                  struct MHD_Connection *c,
                                  const char *url,
                                  const char *method,
                                  const char *version,
                                  const char *upload_data,
                                  size_t *upload_data_size,
                                  void **con_cls)
{
    struct fe_worker *w = cls;
    struct fe__hreq *hr = *con_cls;
    struct fe_req *req;
    enum MHD_Result ret;

    if (!hr) {
        size_t url_len, hbytes;
        hr = fe__req_create(w, c, url, method, &url_len, &hbytes);
        *con_cls = hr;
        rt_log_set_reqid(hr->req.reqid);
        hr->hc = fe__hconn_of(c);
        fe__guard_phase(hr->hc, FE_GUARD_BODY);
        fe__pool_learn(hr->hc, c, method, fe__pool_size(w->h->cfg));
        if (fe__framing(hr, version, &ret)) {
            return ret;
        }
        if (fe__early_checks(hr, url_len, hbytes, &ret)) {
            return ret;
        }
        return MHD_YES;
    }
    req = &hr->req;
    rt_log_set_reqid(req->reqid);
    if (*upload_data_size) {
        size_t n = *upload_data_size;
        *upload_data_size = 0;
        if (hr->hc) {
            hr->hc->g.body_bytes += n;
        }
        if (hr->phase != FE__BODY || hr->body_too_large) {
            return MHD_YES;
        }
        if (req->body.len + n > w->h->cfg->max_body) {
            hr->body_too_large = 1;
            rt_buf_free(&req->body);
            return MHD_YES;
        }
        rt_buf_append(&req->body, upload_data, n);
        return MHD_YES;
    }
    switch (hr->phase) {
        case FE__BODY:
            if (hr->body_too_large) {
                fe_req_resp_error(req, RT_ETOOLARGE, NULL);
                return fe__queue(hr);
            }
            if (fe_api_prepare(req) != FE_API_SUBMIT) {
                return fe__queue(hr);
            }
            if (w->stopping) {
                req->job.status = RT_ECANCELED; /* shutting down: 503 */
                fe_api_finish(req);
                return fe__queue(hr);
            }
            if (req->path.account_ok && req->path.account) {
                if (fe_guard_acct_enter(w->h->guard, req->path.account)) {
                    /* Azure's own words when an account is throttled. */
                    fe_req_resp_error(
                        req, RT_EBUSY,
                        "Operations per second is over the account limit.");
                    fe_cors_headers(req);
                    return fe__queue(hr);
                }
                hr->acct_counted = 1;
            }
            fe__submit(hr);
            return MHD_YES;
        case FE__REPLY:
            hr->suspended = 0;
            w->suspended--;
            fe_api_finish(req);
            return fe__queue(hr);
        default:
            return MHD_YES;
    }
}

static void fe__completed(void *cls,
                          struct MHD_Connection *c,
                          void **con_cls,
                          enum MHD_RequestTerminationCode toe)
{
    struct fe_worker *w = cls;
    struct fe__hreq *hr = *con_cls;
    struct fe__hconn *hc;
    if (!hr) {
        return;
    }
    *con_cls = NULL;
    hc = fe__hconn_of(c);
    fe__guard_phase(hc, FE_GUARD_IDLE);
    if (hc) {
        hc->pool.dirty = 1; /* MHD zeroes its whole pool right after this */
    }
    fe_metrics_req_end(w->metrics);
    if (toe != MHD_REQUEST_TERMINATED_COMPLETED_OK) {
        rt_log(RT_LOG_DEBUG, "request %s ended early (%d)", hr->req.reqid,
               (int)toe);
    }
    if (hr->suspended) {
        /* Closed before the handler ran again (MHD_stop_daemon, or the
         * client left while its reply was being resumed). */
        hr->suspended = 0;
        w->suspended--;
    }
    rt_log_set_reqid(NULL);
    if (hr->job_active) {
        hr->completed = 1; /* fe__job_done frees it */
        return;
    }
    fe__req_put(w, hr);
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

/* Blanks every "sig=" value (a SAS signature) in @msg: libmicrohttpd's
 * messages may quote a request target, and a signature in a log is a
 * credential for anyone who reads the log. */
static void fe__redact_sig(char *msg)
{
    for (char *p = msg; (p = strcasestr(p, "sig=")) != NULL;) {
        p += 4;
        while (*p && *p != '&' && *p != ' ' && *p != '"' && *p != '\'') {
            *p++ = '*';
        }
    }
}
/* libmicrohttpd's messages at info, except the one it writes for every
 * client that leaves (or is closed by the guard) mid-request and for every
 * failed TLS handshake (plain HTTP on the HTTPS port, an old TLS version):
 * thousands of such connections would otherwise be thousands of lines;
 * the sweep's summary line counts the closed ones instead. */
static void fe__mhd_log(void *cls, const char *fmt, va_list ap)
{
    static const char *const per_conn[] = {
        "closed by remote side", "has been disconnected",
        "detected connection closure", "reset by peer", "handshake"};
    enum rt_log_level level = RT_LOG_INFO;
    char msg[512];
    size_t n;
    (void)cls;
    vsnprintf(msg, sizeof(msg), fmt, ap);
    n = strlen(msg);
    while (n && (msg[n - 1] == '\n' || msg[n - 1] == '\r')) {
        msg[--n] = '\0';
    }
    fe__redact_sig(msg);
    for (size_t i = 0; i < sizeof(per_conn) / sizeof(per_conn[0]); i++) {
        if (strstr(msg, per_conn[i])) {
            level = RT_LOG_DEBUG;
        }
    }
    rt_log(level, "libmicrohttpd: %s", msg);
}

/* ---- The worker's loop ---------------------------------------------- */

static void fe__on_timer(uv_timer_t *t);
static void fe__on_idle(uv_idle_t *i);
static void fe__daemon_reap(struct fe__daemon *dm);

/* Every daemon of @w runs in the next loop iteration: a resume must not
 * wait for socket activity, whichever daemon its connection belongs to. */
static void fe__kick(struct fe_worker *w)
{
    for (struct fe__daemon *dm = w->daemons; dm; dm = dm->next) {
        uv_idle_start(&dm->idle, fe__on_idle);
    }
}

/* Runs the daemon (never blocks: zero epoll timeout) and re-arms the
 * timer with what it asks for. Never called from inside a daemon
 * callback. May stop and free @dm (a retired daemon left idle). */
static void fe__mhd_run(struct fe__daemon *dm)
{
    struct fe_worker *w = dm->w;
    MHD_UNSIGNED_LONG_LONG t;
    unsigned resumes = w->resumes;
    MHD_run(dm->d);
    if (w->closed) {
        return;
    }
    if (w->resumes != resumes) {
        /* A job finished inside this run (fe_route_submit may call done_cb
         * at once): its resume must not wait for socket activity. */
        fe__kick(w);
        return;
    }
    if (MHD_get_timeout(dm->d, &t) != MHD_YES) {
        uv_idle_stop(&dm->idle);
        uv_timer_stop(&dm->timer);
    } else if (t == 0) {
        /* Work is pending now: run again in the next iteration, after the
         * loop has polled and run its other callbacks. Never a 0 ms timer:
         * restarted from its own callback it is due again at once, and
         * libuv 1.44 runs it again inside the same timer pass, forever. A
         * TLS connection half-way through its handshake keeps MHD 0.9.75
         * at timeout 0 until the handshake ends (the handshake's reads do
         * not clear MHD's read-ready mark): with a timer that froze the
         * worker; with the idle handle the worker keeps serving and the
         * guard's header bound closes the stalled client. */
        uv_timer_stop(&dm->timer);
        uv_idle_start(&dm->idle, fe__on_idle);
    } else {
        uv_idle_stop(&dm->idle);
        uv_timer_start(&dm->timer, fe__on_timer, t, 0);
    }
    if (dm->retired) {
        fe__daemon_reap(dm);
    }
}

/* Runs every daemon of @w (one may be freed on the way). */
static void fe__mhd_run_all(struct fe_worker *w)
{
    struct fe__daemon *dm = w->daemons, *next;
    for (; dm && !w->closed; dm = next) {
        next = dm->next;
        fe__mhd_run(dm);
    }
}

static void fe__on_poll(uv_poll_t *p, int status, int events)
{
    (void)status;
    (void)events;
    fe__mhd_run(p->data);
}

static void fe__on_timer(uv_timer_t *t)
{
    fe__mhd_run(t->data);
}

static void fe__on_idle(uv_idle_t *i)
{
    uv_idle_stop(i);
    fe__mhd_run(i->data);
}

static void fe__on_check(uv_check_t *c)
{
    struct fe_worker *w = c->data;
    if (w->need_run) {
        w->need_run = 0;
        fe__mhd_run_all(w);
    }
}

/* Closes the connections over their deadlines, and says once a sweep
 * what the guard did (thousands of lines would hide the cause). */
static void fe__on_sweep(uv_timer_t *t)
{
    struct fe_worker *w = t->data;
    unsigned n = fe_guard_list_sweep(&w->conns, fe_guard_get_cfg(w->h->guard),
                                     rt_time_mono_ms(), fe__on_overdue, w);
    if (n || w->refused || w->shed) {
        rt_log(RT_LOG_INFO,
               "worker %u: closed %u connection(s) over their "
               "header/body/idle bounds, refused %u at the caps, shed %u "
               "for new clients",
               w->idx, n, w->refused, w->shed);
        w->refused = w->shed = 0;
    }
    fe__pool_sweep(w);
    if (n) {
        fe__mhd_run_all(w);
    }
}

static void fe__on_handle_closed(uv_handle_t *hd)
{
    struct fe_worker *w = hd->data;
    w->handles--;
}

static void fe__daemon_free(struct fe__daemon *dm)
{
    if (dm->d) {
        MHD_stop_daemon(dm->d);
    }
    fe_tls_release(dm->tls);
    free(dm);
}

static void fe__on_daemon_closed(uv_handle_t *hd)
{
    struct fe__daemon *dm = hd->data;
    if (--dm->closing == 0 && dm->free_on_close) {
        fe__daemon_free(dm); /* the poll no longer watches its epoll fd */
    }
}

static void fe__daemon_close_handles(struct fe__daemon *dm)
{
    dm->closing = 3;
    uv_close((uv_handle_t *)&dm->poll, fe__on_daemon_closed);
    uv_close((uv_handle_t *)&dm->timer, fe__on_daemon_closed);
    uv_close((uv_handle_t *)&dm->idle, fe__on_daemon_closed);
}

/* A retired daemon whose last connection has ended (suspended ones
 * count): unlinked, its handles closed, stopped and freed in the close
 * callback. Shutdown leaves the retired daemons to fe__worker_fini. */
static void fe__daemon_reap(struct fe__daemon *dm)
{
    struct fe_worker *w = dm->w;
    const union MHD_DaemonInfo *info;
    struct fe__daemon **pp;
    if (w->stopping || w->closed) {
        return;
    }
    info = MHD_get_daemon_info(dm->d, MHD_DAEMON_INFO_CURRENT_CONNECTIONS);
    if (!info || info->num_connections > 0) {
        return;
    }
    for (pp = &w->daemons; *pp && *pp != dm; pp = &(*pp)->next) {
    }
    if (*pp) {
        *pp = dm->next;
    }
    rt_log(RT_LOG_DEBUG, "worker %u: retired HTTPS daemon stopped", w->idx);
    dm->free_on_close = 1;
    fe__daemon_close_handles(dm);
}

static void fe__close_handles(struct fe_worker *w)
{
    w->closed = 1;
    for (struct fe__daemon *dm = w->daemons; dm; dm = dm->next) {
        fe__daemon_close_handles(dm);
    }
    uv_close((uv_handle_t *)&w->check, fe__on_handle_closed);
    uv_close((uv_handle_t *)&w->drain, fe__on_handle_closed);
    uv_close((uv_handle_t *)&w->sweep, fe__on_handle_closed);
}

/* Shutdown: keeps the daemons running until every job came back and every
 * resumed connection was answered and flushed, then closes the handles
 * (the loop ends). Bounded by FE_HTTP_DRAIN_MS. */
static void fe__on_drain(uv_timer_t *t)
{
    struct fe_worker *w = t->data;
    int idle = 1;
    fe__mhd_run_all(w);
    for (struct fe__daemon *dm = w->daemons; dm; dm = dm->next) {
        MHD_UNSIGNED_LONG_LONG to = 1;
        if (MHD_get_timeout(dm->d, &to) == MHD_YES && to == 0) {
            idle = 0; /* something pending */
        }
    }
    if ((w->suspended == 0 && idle) || uv_now(&w->loop) >= w->drain_until) {
        if (w->suspended) {
            rt_log(RT_LOG_WARN,
                   "worker %u: %u requests still suspended "
                   "after %d ms",
                   w->idx, w->suspended, FE_HTTP_DRAIN_MS);
        }
        uv_timer_stop(&w->drain);
        fe__close_handles(w);
    }
}

/* Stops @dm accepting (its dup of the listen socket is closed); the
 * connections it has go on. Once only: libmicrohttpd 0.9.75 hands the
 * same descriptor number back on a second call, and closing it again
 * would close whatever reused that number (another daemon's epoll fd). */
static void fe__daemon_quiesce(struct fe__daemon *dm)
{
    MHD_socket fd;
    if (dm->quiesced) {
        return;
    }
    dm->quiesced = 1;
    fd = MHD_quiesce_daemon(dm->d);
    if (fd != MHD_INVALID_SOCKET) {
        close(fd);
    }
}

/* [loop] fe_http_stop(): stop accepting, cancel the jobs in flight, drain. */
static void fe__on_stop(uv_async_t *a)
{
    struct fe_worker *w = a->data;
    if (w->stopping) {
        return;
    }
    w->stopping = 1;
    uv_close((uv_handle_t *)&w->stop, fe__on_handle_closed);
    uv_close((uv_handle_t *)&w->reload, fe__on_handle_closed);
    for (struct fe__daemon *dm = w->daemons; dm; dm = dm->next) {
        fe__daemon_quiesce(dm);
    }
    fe_route_close(w->route); /* jobs in flight: RT_ECANCELED -> 503 */
    w->drain_until = uv_now(&w->loop) + FE_HTTP_DRAIN_MS;
    uv_timer_start(&w->drain, fe__on_drain, 0, 10);
}

static void *fe__worker_main(void *arg)
{
    struct fe_worker *w = arg;
    char name[16];
    snprintf(name, sizeof(name), "fe-worker-%u", w->idx);
    pthread_setname_np(pthread_self(), name);
    uv_run(&w->loop, UV_RUN_DEFAULT);
    return NULL;
}

/* ---- Start / stop --------------------------------------------------- */

/* A non-blocking socket for @ss bound to it (SO_REUSEPORT when @reuseport)
 * and listening; -1 with errno set on failure. */
static int fe__bind(const struct sockaddr_storage *ss,
                    socklen_t sslen,
                    int reuseport)
{
    int one = 1, e;
    int fd =
        socket(ss->ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        return -1;
    }
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (ss->ss_family == AF_INET6) {
        setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
    }
    if ((reuseport &&
         setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one)) != 0) ||
        bind(fd, (const struct sockaddr *)ss, sslen) != 0 ||
        listen(fd, 1024) != 0) {
        e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    return fd;
}

static void fe__listener_close(struct fe__listener *l)
{
    for (unsigned i = 0; i < l->n; i++) {
        if (l->fd[i] >= 0) {
            close(l->fd[i]);
        }
    }
    free(l->fd);
    memset(l, 0, sizeof(*l));
}

/* Parses @listen_addr (of flag @flag) and opens @n listening sockets on
 * it into @l, one per worker. Returns 0 or -1 (logged).
 *
 * Why one socket per worker: with one socket shared by every worker's
 * epoll, the worker that wakes first accepts a whole burst of new
 * connections (all 32 of a client opening them at once went to one
 * worker, which then served them on one core). With SO_REUSEPORT the
 * kernel hashes each connection to one of the sockets.
 *
 * The address is first bound alone, without SO_REUSEPORT: that fails when
 * anything holds it, so a second front end on the same port is refused as
 * before instead of silently sharing it (our own sockets, with
 * SO_REUSEPORT, make such a bind fail too). That socket also learns the
 * port of a ":0" address; it is closed, and the n sockets are bound to
 * that port. With one worker that first socket is the one used. */
static int fe__listen(const char *flag,
                      const char *listen_addr,
                      unsigned n,
                      struct fe__listener *l)
{
    struct sockaddr_storage ss;
    socklen_t sslen, len;
    int fd;

    memset(l, 0, sizeof(*l));
    if (rt_addr_parse(listen_addr, &ss, &sslen) != 0) {
        rt_log(RT_LOG_ERROR,
               "bad --%s '%s': expected IP:PORT, [IPv6]:PORT or "
               "localhost:PORT",
               flag, listen_addr);
        return -1;
    }
    l->ipv6 = ss.ss_family == AF_INET6;
    fd = fe__bind(&ss, sslen, 0);
    len = sizeof(ss);
    if (fd < 0 || getsockname(fd, (struct sockaddr *)&ss, &len) != 0) {
        rt_log(RT_LOG_ERROR, "cannot listen on %s: %s", listen_addr,
               strerror(errno));
        if (fd >= 0) {
            close(fd);
        }
        return -1;
    }
    l->port = ntohs(l->ipv6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                            : ((struct sockaddr_in *)&ss)->sin_port);
    l->fd = rt_xcalloc(n, sizeof(*l->fd));
    l->n = n;
    if (n == 1) {
        l->fd[0] = fd;
        return 0;
    }
    close(fd);
    for (unsigned i = 0; i < n; i++) {
        l->fd[i] = fe__bind(&ss, sslen, 1);
        if (l->fd[i] < 0) {
            rt_log(RT_LOG_ERROR, "cannot listen on %s (socket %u of %u): %s",
                   listen_addr, i + 1, n, strerror(errno));
            fe__listener_close(l);
            return -1;
        }
    }
    return 0;
}

/* fe_route observer: stored policies and CORS rules follow every map any
 * worker installs (fe_acl and fe_cors each keep one snapshot for all
 * workers). */
static void fe__on_map(const Rt__Map *map, void *data)
{
    struct fe_worker *w = data;
    fe_metrics_map_version(w->metrics, map->version);
    fe_acl_map_update(map);
    fe_cors_map_update(map);
    if (!w->have_map) {
        w->have_map = 1;
        atomic_fetch_add(&w->h->maps_ready, 1);
    }
}

/* libmicrohttpd's inactivity timeout in whole seconds: the idle bound
 * rounded up (0 = none). */
static unsigned int fe__mhd_timeout_s(const struct fe_guard_cfg *gc)
{
    return (unsigned int)((gc->idle_timeout_ms + 999) / 1000);
}

/* TLS 1.2 and 1.3 only, GnuTLS's default ciphers for them. */
#define FE_TLS_PRIORITIES "NORMAL:-VERS-ALL:+VERS-TLS1.3:+VERS-TLS1.2"

/* Starts a daemon of @w on a dup of @listen_fd (TLS with @tls, taken,
 * when not NULL) and puts it first in the worker's list. NULL when
 * libmicrohttpd refuses (logged); @tls is then released. */
static struct fe__daemon *fe__daemon_start(struct fe_worker *w,
                                           int listen_fd,
                                           int ipv6,
                                           struct fe_tls *tls)
{
    const union MHD_DaemonInfo *info;
    struct fe__daemon *dm;
    unsigned flags =
        MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG;
    const struct fe_guard_cfg *gc = fe_guard_get_cfg(w->h->guard);
    int lfd = dup(listen_fd);
    /* The TLS options ride in one MHD_OPTION_ARRAY (empty for plain
     * HTTP), so both kinds of daemon share every other option. */
    struct MHD_OptionItem tls_opts[] = {
        {MHD_OPTION_HTTPS_MEM_CERT, 0, tls ? tls->cert_pem : NULL},
        {MHD_OPTION_HTTPS_MEM_KEY, 0, tls ? tls->key_pem : NULL},
        {MHD_OPTION_HTTPS_PRIORITIES, 0, (void *)FE_TLS_PRIORITIES},
        {MHD_OPTION_END, 0, NULL},
    };

    if (lfd < 0) {
        rt_log(RT_LOG_ERROR, "dup: %s", strerror(errno));
        fe_tls_release(tls);
        return NULL;
    }
    if (ipv6) {
        flags |= MHD_USE_IPv6;
    }
    dm = rt_xcalloc(1, sizeof(*dm));
    dm->w = w;
    dm->tls = tls;
    if (tls) {
        flags |= MHD_USE_TLS;
    }
    /* libmicrohttpd's own inactivity timeout stays as the bound on a
     * response nobody reads (the guard's deadlines cover the rest); its
     * own connection limit is the global cap, so the guard's shared count
     * decides (at its limit libmicrohttpd would stop accepting, and new
     * clients would wait in the backlog behind the slow ones). */
    dm->d = MHD_start_daemon(
        flags, 0, fe__accept_policy, w, fe__access, w,
        MHD_OPTION_EXTERNAL_LOGGER, fe__mhd_log, NULL, MHD_OPTION_LISTEN_SOCKET,
        (MHD_socket)lfd, MHD_OPTION_UNESCAPE_CALLBACK, fe__unescape, NULL,
        MHD_OPTION_NOTIFY_COMPLETED, fe__completed, w,
        MHD_OPTION_NOTIFY_CONNECTION, fe__conn_notify, w,
        MHD_OPTION_URI_LOG_CALLBACK, fe__uri_log, w,
        MHD_OPTION_CONNECTION_TIMEOUT, fe__mhd_timeout_s(gc),
        MHD_OPTION_CONNECTION_LIMIT,
        gc->max_conns ? gc->max_conns : (unsigned int)1 << 20,
        MHD_OPTION_CONNECTION_MEMORY_LIMIT, fe__pool_size(w->h->cfg),
        MHD_OPTION_ARRAY, tls ? tls_opts : &tls_opts[3], MHD_OPTION_END);
    if (!dm->d) {
        rt_log(RT_LOG_ERROR, "worker %u: cannot start libmicrohttpd%s", w->idx,
               tls ? " with this certificate and key" : "");
        close(lfd);
        fe__daemon_free(dm);
        return NULL;
    }
    info = MHD_get_daemon_info(dm->d, MHD_DAEMON_INFO_EPOLL_FD);
    if (!info || info->epoll_fd < 0 ||
        uv_poll_init(&w->loop, &dm->poll, info->epoll_fd) != 0) {
        rt_log(RT_LOG_ERROR, "worker %u: no epoll fd", w->idx);
        fe__daemon_free(dm);
        return NULL;
    }
    dm->poll.data = dm;
    uv_timer_init(&w->loop, &dm->timer);
    dm->timer.data = dm;
    uv_idle_init(&w->loop, &dm->idle);
    dm->idle.data = dm;
    dm->next = w->daemons;
    w->daemons = dm;
    uv_poll_start(&dm->poll, UV_READABLE, fe__on_poll);
    uv_timer_start(&dm->timer, fe__on_timer, 0, 0);
    return dm;
}

/* The same certificate chain and key (a SIGHUP that changed nothing). */
static int fe__tls_same(const struct fe_tls *a, const struct fe_tls *b)
{
    return a && b && strcmp(a->cert_pem, b->cert_pem) == 0 &&
           a->key_len == b->key_len &&
           CRYPTO_memcmp(a->key_pem, b->key_pem, a->key_len) == 0;
}

/* [loop] fe_http_reload_tls(): a new HTTPS daemon with the certificate
 * now published takes over the listen socket; the one it replaces is
 * quiesced (its keep-alive connections go on with the old certificate)
 * and stopped once they have all ended. If the new daemon cannot start,
 * the old one stays in service. */
static void fe__on_reload(uv_async_t *a)
{
    struct fe_worker *w = a->data;
    struct fe_http *h = w->h;
    struct fe__daemon *old = NULL, *dm;
    struct fe_tls *tls;

    if (w->stopping) {
        return;
    }
    for (dm = w->daemons; dm; dm = dm->next) {
        if (dm->tls && !dm->retired) {
            old = dm;
        }
    }
    pthread_mutex_lock(&h->tls_lock);
    tls = h->tls ? fe_tls_hold(h->tls) : NULL;
    pthread_mutex_unlock(&h->tls_lock);
    if (!old || !tls || fe__tls_same(old->tls, tls)) {
        fe_tls_release(tls); /* no daemon churn for the same pair */
        return;
    }
    if (!fe__daemon_start(w, h->https.fd[w->idx], h->https.ipv6, tls)) {
        rt_log(RT_LOG_ERROR,
               "worker %u: the new certificate is not in service; the old "
               "one stays",
               w->idx);
        return;
    }
    fe__daemon_quiesce(old);
    old->retired = 1;
    fe__daemon_reap(old); /* at once if it had no connection */
}

/* Sets up worker @w (loop, route, daemons, handles) on the calling thread;
 * the worker thread only runs the loop. 0, RT_EINVAL or RT_ECONFIG. */
static int fe__worker_init(struct fe_http *h, struct fe_worker *w)
{
    int rc;

    if (uv_loop_init(&w->loop) != 0) {
        return RT_ECONFIG;
    }
    w->loop_ok = 1;
    rc = fe_route_create(&w->loop, h->cfg->master, &w->route);
    if (rc != 0) {
        return RT_EINVAL;
    }
    w->metrics = fe_metrics_shard(h->cfg->metrics, w->idx);
    fe_route_set_metrics(w->route, w->metrics);
    fe_route_on_map(w->route, fe__on_map, w);
    uv_check_init(&w->loop, &w->check);
    w->check.data = w;
    uv_timer_init(&w->loop, &w->drain);
    w->drain.data = w;
    uv_async_init(&w->loop, &w->stop, fe__on_stop);
    w->stop.data = w;
    uv_async_init(&w->loop, &w->reload, fe__on_reload);
    w->reload.data = w;
    uv_timer_init(&w->loop, &w->sweep);
    w->sweep.data = w;
    w->handles = 5;
    uv_timer_start(&w->sweep, fe__on_sweep, FE_GUARD_SWEEP_MS,
                   FE_GUARD_SWEEP_MS);
    uv_check_start(&w->check, fe__on_check);
    if (h->http.n &&
        !fe__daemon_start(w, h->http.fd[w->idx], h->http.ipv6, NULL)) {
        return RT_ECONFIG;
    }
    if (h->https.n && !fe__daemon_start(w, h->https.fd[w->idx], h->https.ipv6,
                                        fe_tls_hold(h->tls))) {
        return RT_ECONFIG;
    }
    return 0;
}

/* Tears down what fe__worker_init built, after the loop ended (or never
 * ran). */
static void fe__worker_fini(struct fe_worker *w)
{
    if (w->handles > 0 && !w->closed && w->loop_ok) {
        /* Never ran (start failed): close the handles, let them finish. */
        if (!uv_is_closing((uv_handle_t *)&w->stop)) {
            uv_close((uv_handle_t *)&w->stop, fe__on_handle_closed);
            uv_close((uv_handle_t *)&w->reload, fe__on_handle_closed);
        }
        fe__close_handles(w);
    }
    if (w->route) {
        fe_route_close(w->route);
    }
    if (w->loop_ok) {
        uv_run(&w->loop, UV_RUN_DEFAULT);
    }
    for (struct fe__daemon *dm = w->daemons; dm; dm = dm->next) {
        MHD_run(dm->d); /* process resumes still pending (drain cut short) */
    }
    while (w->daemons) {
        struct fe__daemon *dm = w->daemons;
        w->daemons = dm->next;
        fe__daemon_free(dm);
    }
    if (w->route) {
        fe_route_destroy(w->route);
        w->route = NULL;
    }
    fe__req_free_list(w);
    if (w->loop_ok && uv_loop_close(&w->loop) != 0) {
        rt_log(RT_LOG_WARN, "worker %u: loop closed with handles open", w->idx);
    }
    w->loop_ok = 0;
}

int fe_http_start(const struct fe_http_cfg *cfg, struct fe_http **out)
{
    struct fe_http *h;
    unsigned n = cfg->threads ? cfg->threads : 1;
    int http = cfg->listen && *cfg->listen;
    int https = cfg->https_listen && *cfg->https_listen;
    int rc = 0;

    *out = NULL;
    if (!http && !https) {
        rt_log(RT_LOG_ERROR, "neither --listen nor --https-listen is set");
        return RT_ECONFIG;
    }
    if (https &&
        (!cfg->tls || MHD_is_feature_supported(MHD_FEATURE_TLS) != MHD_YES)) {
        rt_log(RT_LOG_ERROR, "%s",
               cfg->tls ? "--https-listen: this libmicrohttpd was built "
                          "without TLS support"
                        : "--https-listen needs --tls-cert and --tls-key");
        return RT_ECONFIG;
    }
    h = rt_xcalloc(1, sizeof(*h));
    h->cfg = cfg;
    pthread_mutex_init(&h->tls_lock, NULL);
    if (https) {
        h->tls = fe_tls_hold(cfg->tls);
    }
    if ((http && fe__listen("listen", cfg->listen, n, &h->http) != 0) ||
        (https &&
         fe__listen("https-listen", cfg->https_listen, n, &h->https) != 0)) {
        fe__listener_close(&h->http);
        fe_tls_release(h->tls);
        pthread_mutex_destroy(&h->tls_lock);
        free(h);
        return RT_ECONFIG;
    }
    fe_guard_create(&cfg->guard, &h->guard);
    h->w = rt_xcalloc(n, sizeof(*h->w));
    h->n = n;
    for (unsigned i = 0; i < n && rc == 0; i++) {
        h->w[i].h = h;
        h->w[i].idx = i;
        rc = fe__worker_init(h, &h->w[i]);
    }
    for (unsigned i = 0; i < n && rc == 0; i++) {
        struct fe_worker *w = &h->w[i];
        if (pthread_create(&w->thread, NULL, fe__worker_main, w) != 0) {
            rt_log(RT_LOG_ERROR, "cannot start worker %u", i);
            rc = RT_ECONFIG;
            break;
        }
        w->thread_started = 1;
    }
    if (rc != 0) {
        fe_http_stop(h);
        fe_http_destroy(h);
        return rc;
    }
    *out = h;
    return 0;
}

int fe_http_maps_ready(const struct fe_http *h)
{
    return atomic_load(&((struct fe_http *)h)->maps_ready) >= h->n;
}

int fe_http_port(const struct fe_http *h)
{
    return h->http.port;
}

int fe_http_tls_port(const struct fe_http *h)
{
    return h->https.port;
}

int fe_http_reload_tls(struct fe_http *h, struct fe_tls *tls)
{
    struct fe_tls *old;
    int same;
    if (h->https.n == 0 || atomic_load(&h->stop_sent)) {
        fe_tls_release(tls);
        return RT_ECONFIG;
    }
    pthread_mutex_lock(&h->tls_lock);
    old = h->tls;
    h->tls = tls;
    pthread_mutex_unlock(&h->tls_lock);
    same = fe__tls_same(old, tls);
    fe_tls_release(old);
    /* Even when unchanged: a worker whose libmicrohttpd refused the
     * previous pair gets another chance. */
    for (unsigned i = 0; i < h->n; i++) {
        uv_async_send(&h->w[i].reload);
    }
    return same;
}

void fe_http_stop(struct fe_http *h)
{
    if (atomic_exchange(&h->stop_sent, 1)) {
        return; /* the async handles may be closed already */
    }
    for (unsigned i = 0; i < h->n; i++) {
        struct fe_worker *w = &h->w[i];
        if (w->thread_started) {
            uv_async_send(&w->stop);
        }
    }
}

void fe_http_destroy(struct fe_http *h)
{
    if (!h) {
        return;
    }
    for (unsigned i = 0; i < h->n; i++) {
        struct fe_worker *w = &h->w[i];
        if (w->thread_started) {
            pthread_join(w->thread, NULL);
            w->thread_started = 0;
        }
        fe__worker_fini(w);
    }
    fe__listener_close(&h->http);
    fe__listener_close(&h->https);
    fe_tls_release(h->tls);
    pthread_mutex_destroy(&h->tls_lock);
    fe_guard_destroy(h->guard);
    free(h->w);
    free(h);
}
