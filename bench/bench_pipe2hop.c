/* bench_pipe2hop: the ceiling of rangetable's architecture without its
 * code. An HTTP hop (libmicrohttpd) and an RPC hop (one pipelined TCP
 * connection to a back-end process), nothing else: no auth, no routing,
 * no protobuf, no LMDB. bench/bench-point drives it with wrk and prints
 * rangetable's point GET against it.
 *
 * Two roles of one binary, two processes:
 *
 *   bench_pipe2hop --backend [--listen H:P] [--port-file F]
 *       one libuv loop; every request frame read is answered, in order,
 *       with a reply frame of --body-bytes (a ~1 KiB JSON entity). The
 *       replies of one read go out in one write, as a pipelined RPC server
 *       does. Writes "rpc=PORT" to F.
 *   bench_pipe2hop --backend-addr H:P [--listen H:P] [--threads N]
 *                  [--port-file F]
 *       the front end, driven as rt-frontend drives libmicrohttpd
 *       (frontend/fe_http.c): N share-nothing workers (default 2), each a
 *       libuv loop running an external-epoll MHD daemon (MHD_USE_EPOLL,
 *       MHD_run with a zero timeout from the loop) on one shared listening
 *       socket, and ONE TCP connection of its own to the back end. Each
 *       request is suspended (MHD_suspend_connection), a small fixed
 *       request frame is queued on the worker's connection, and the
 *       frames queued during one MHD_run go out in one write. Replies come
 *       back in order; each one becomes a response (body copied, as a real
 *       answer is built) and resumes its connection, then MHD runs once
 *       for the whole read. MHD_USE_TURBO is on: this is a limit, not our
 *       configuration. As in rt-frontend, the handler's first call only
 *       takes the request (a response queued there makes libmicrohttpd
 *       close the connection); the call that ends the request suspends
 *       it. Writes "http=PORT" to F.
 *
 * Frames on the back-end connection: a 4-byte big-endian length, then
 * that many bytes. Both roles serve until SIGTERM or SIGINT, print
 * "served N" to stderr and exit 0; they exit 1 when they cannot listen,
 * connect or start libmicrohttpd, and the front end exits 1 when the back
 * end closes its connection (the bench then reports a failure). They
 * measure nothing themselves. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <uv.h>

#include "rt_addr.h"
#include "rt_config.h"

static struct
{
    char *listen, *port_file, *backend_addr;
    long threads, body_bytes, backend;
} O;

static struct rt_opt opts[] = {
    {"backend", RT_OPT_BOOL, &O.backend, NULL,
     "run the back end (answers each request frame with --body-bytes)"},
    {"backend-addr", RT_OPT_STR, &O.backend_addr, "",
     "front end: the back end's HOST:PORT"},
    {"listen", RT_OPT_STR, &O.listen, "127.0.0.1:0", "HOST:PORT to listen on"},
    {"port-file", RT_OPT_STR, &O.port_file, "",
     "write \"http=PORT\" (front end) or \"rpc=PORT\" (back end) here"},
    {"threads", RT_OPT_INT, &O.threads, "2",
     "front end: workers (loop + MHD daemon + one back-end connection each)"},
    {"body-bytes", RT_OPT_INT, &O.body_bytes, "1024",
     "size of the JSON body of every answer"},
    {NULL, 0, NULL, NULL, NULL},
};

/* The request every HTTP request turns into: about what an RPC point get
 * carries (table, keys, range id and epoch). */
static const char req_frame_body[] =
    "GET benchpoint pk0000000042 rk0000000042 range=1 epoch=1";

static void die(const char *what)
{
    fprintf(stderr, "bench_pipe2hop: %s\n", what);
    exit(1);
}

/* A growable byte buffer. */
struct buf
{
    char *p;
    size_t len, cap;
};

static void buf_reserve(struct buf *b, size_t more)
{
    if (b->len + more <= b->cap) {
        return;
    }
    size_t cap = b->cap ? b->cap : 65536;
    while (cap < b->len + more) {
        cap *= 2;
    }
    b->p = realloc(b->p, cap);
    if (!b->p) {
        die("out of memory");
    }
    b->cap = cap;
}

static void put_frame(struct buf *b, const void *p, uint32_t n)
{
    uint32_t be = htonl(n);
    buf_reserve(b, 4 + (size_t)n);
    memcpy(b->p + b->len, &be, 4);
    memcpy(b->p + b->len + 4, p, n);
    b->len += 4 + (size_t)n;
}

/* The free space at the end of @rb (at least 64 KiB) for a read. */
static void buf_space(struct buf *rb, uv_buf_t *out)
{
    buf_reserve(rb, 65536);
    *out = uv_buf_init(rb->p + rb->len, (unsigned)(rb->cap - rb->len));
}

/* Calls @fn for each whole frame at the start of @rb, then keeps only the
 * partial frame that follows. */
static void for_each_frame(struct buf *rb,
                           void (*fn)(void *, const char *, uint32_t),
                           void *arg)
{
    size_t off = 0;
    while (rb->len - off >= 4) {
        uint32_t n;
        memcpy(&n, rb->p + off, 4);
        n = ntohl(n);
        if (rb->len - off - 4 < n) {
            break;
        }
        fn(arg, rb->p + off + 4, n);
        off += 4 + (size_t)n;
    }
    memmove(rb->p, rb->p + off, rb->len - off);
    rb->len -= off;
}

struct wreq
{
    uv_write_t w;
    char *p;
};

static void write_cb(uv_write_t *w, int status)
{
    struct wreq *wr = (struct wreq *)w;
    if (status < 0 && status != UV_ECANCELED) {
        fprintf(stderr, "bench_pipe2hop: write: %s\n", uv_strerror(status));
    }
    free(wr->p);
    free(wr);
}

/* Sends the bytes of @b (taken: @b is left empty) on @s. */
static void send_buf(uv_stream_t *s, struct buf *b)
{
    struct wreq *wr;
    uv_buf_t ub;
    if (!b->len) {
        return;
    }
    wr = malloc(sizeof(*wr));
    if (!wr) {
        die("out of memory");
    }
    wr->p = b->p;
    ub = uv_buf_init(b->p, (unsigned)b->len);
    *b = (struct buf){0};
    if (uv_write(&wr->w, s, &ub, 1, write_cb) != 0) {
        die("uv_write failed");
    }
}

static char *make_body(size_t n)
{
    static const char head[] =
        "{\"odata.metadata\":\"http://127.0.0.1/devstoreaccount1/"
        "$metadata#t/@Element\",\"PartitionKey\":\"p\",\"RowKey\":\"r\","
        "\"Data\":\"";
    static const char tail[] = "\"}";
    size_t fixed = sizeof(head) - 1 + sizeof(tail) - 1;
    size_t pad = n > fixed ? n - fixed : 0;
    char *b = malloc(fixed + pad + 1);
    if (!b) {
        die("out of memory");
    }
    memcpy(b, head, sizeof(head) - 1);
    memset(b + sizeof(head) - 1, 'x', pad);
    memcpy(b + sizeof(head) - 1 + pad, tail, sizeof(tail));
    return b;
}

static void write_port(const char *key, int port)
{
    if (O.port_file[0] &&
        rt_write_port_file(O.port_file, &key, &port, 1) != 0) {
        die("cannot write the port file");
    }
}

/* ---- Back end -------------------------------------------------------- */

static char *be_body;
static uint32_t be_body_len;
static unsigned long be_served;

struct be_conn
{
    uv_tcp_t tcp;
    struct buf in, out;
};

static void be_frame(void *arg, const char *p, uint32_t n)
{
    struct be_conn *c = arg;
    (void)p;
    (void)n;
    put_frame(&c->out, be_body, be_body_len);
    be_served++;
}

static void be_close_cb(uv_handle_t *h)
{
    struct be_conn *c = (struct be_conn *)h;
    free(c->in.p);
    free(c->out.p);
    free(c);
}

static void be_read_cb(uv_stream_t *s, ssize_t nread, const uv_buf_t *b)
{
    struct be_conn *c = (struct be_conn *)s;
    (void)b;
    if (nread < 0) {
        uv_close((uv_handle_t *)s, be_close_cb);
        return;
    }
    c->in.len += (size_t)nread;
    for_each_frame(&c->in, be_frame, c);
    send_buf(s, &c->out);
}

static void be_alloc_cb(uv_handle_t *h, size_t hint, uv_buf_t *out)
{
    struct be_conn *c = (struct be_conn *)h;
    (void)hint;
    buf_space(&c->in, out);
}

static void be_accept_cb(uv_stream_t *srv, int status)
{
    struct be_conn *c;
    if (status < 0) {
        return;
    }
    c = calloc(1, sizeof(*c));
    if (!c) {
        die("out of memory");
    }
    uv_tcp_init(srv->loop, &c->tcp);
    if (uv_accept(srv, (uv_stream_t *)&c->tcp) != 0) {
        uv_close((uv_handle_t *)&c->tcp, be_close_cb);
        return;
    }
    c->tcp.data = c; /* marks a connection for be_close_all */
    uv_tcp_nodelay(&c->tcp, 1);
    uv_read_start((uv_stream_t *)&c->tcp, be_alloc_cb, be_read_cb);
}

static void be_signal_cb(uv_signal_t *s, int signum)
{
    (void)signum;
    uv_stop(s->loop);
}

static void be_close_one(uv_handle_t *h, void *arg)
{
    (void)arg;
    if (!uv_is_closing(h)) {
        uv_close(h, h->data ? be_close_cb : NULL);
    }
}

static int run_backend(void)
{
    struct sockaddr_storage ss;
    struct sockaddr_storage bound;
    int blen = sizeof(bound);
    uv_loop_t *loop = uv_default_loop();
    uv_tcp_t srv;
    uv_signal_t sterm, sint;

    be_body = make_body((size_t)O.body_bytes);
    be_body_len = (uint32_t)strlen(be_body);
    if (rt_addr_parse(O.listen, &ss, NULL) != 0) {
        die("bad --listen");
    }
    uv_tcp_init(loop, &srv);
    if (uv_tcp_bind(&srv, (struct sockaddr *)&ss, 0) != 0 ||
        uv_listen((uv_stream_t *)&srv, 128, be_accept_cb) != 0) {
        die("cannot listen");
    }
    uv_tcp_getsockname(&srv, (struct sockaddr *)&bound, &blen);
    write_port("rpc", ntohs(((struct sockaddr_in *)&bound)->sin_port));
    uv_signal_init(loop, &sterm);
    uv_signal_init(loop, &sint);
    srv.data = sterm.data = sint.data = NULL; /* not connections */
    uv_signal_start(&sterm, be_signal_cb, SIGTERM);
    uv_signal_start(&sint, be_signal_cb, SIGINT);
    uv_run(loop, UV_RUN_DEFAULT);
    /* Stopped: close the listener, the signals and every connection
     * still open, and let their close callbacks run. */
    uv_walk(loop, be_close_one, NULL);
    uv_run(loop, UV_RUN_DEFAULT);
    uv_loop_close(loop);
    free(be_body);
    fprintf(stderr, "bench_pipe2hop: backend served %lu\n", be_served);
    return 0;
}

/* ---- Front end ------------------------------------------------------- */

struct fe_req;

struct fe_worker
{
    uv_loop_t loop;
    uv_thread_t th;
    struct MHD_Daemon *d;
    uv_poll_t poll;
    uv_timer_t timer;
    uv_idle_t idle;
    uv_async_t stop;
    uv_tcp_t be;
    struct buf in, out;
    /* Requests sent and not answered, oldest first: a ring that grows. */
    struct fe_req **fifo;
    size_t head, count, cap;
    unsigned long served;
    int closing; /* fe_worker_close began: nothing is parked any more */
};

struct fe_req
{
    struct MHD_Connection *conn;
    struct MHD_Response *resp;
    int sent; /* the request frame is queued; the connection suspended */
};

static void fifo_push(struct fe_worker *w, struct fe_req *r)
{
    if (w->count == w->cap) {
        size_t cap = w->cap ? w->cap * 2 : 1024;
        struct fe_req **f = malloc(cap * sizeof(*f));
        if (!f) {
            die("out of memory");
        }
        for (size_t i = 0; i < w->count; i++) {
            f[i] = w->fifo[(w->head + i) % w->cap];
        }
        free(w->fifo);
        w->fifo = f;
        w->cap = cap;
        w->head = 0;
    }
    w->fifo[(w->head + w->count) % w->cap] = r;
    w->count++;
}

static struct fe_req *fifo_pop(struct fe_worker *w)
{
    struct fe_req *r;
    if (!w->count) {
        return NULL;
    }
    r = w->fifo[w->head];
    w->head = (w->head + 1) % w->cap;
    w->count--;
    return r;
}

static enum MHD_Result fe_on_request(void *cls,
                                     struct MHD_Connection *conn,
                                     const char *url,
                                     const char *method,
                                     const char *version,
                                     const char *upload_data,
                                     size_t *upload_size,
                                     void **con_cls)
{
    struct fe_worker *w = cls;
    struct fe_req *r = *con_cls;
    enum MHD_Result ret;
    (void)url;
    (void)method;
    (void)version;
    (void)upload_data;
    if (!r) {
        /* Headers read. Nothing is answered on this first call:
         * libmicrohttpd 0.9.75 closes the connection after a response
         * queued in it (the body could still be unread). */
        r = calloc(1, sizeof(*r));
        if (!r) {
            return MHD_NO;
        }
        r->conn = conn;
        *con_cls = r;
        return MHD_YES;
    }
    if (*upload_size) {
        *upload_size = 0;
        return MHD_YES;
    }
    if (!r->resp && (r->sent || w->closing)) {
        /* Shutting down: the parked requests are resumed without an
         * answer, and new ones are not parked (libmicrohttpd aborts when
         * stopped with a connection suspended). */
        struct MHD_Response *busy = MHD_create_response_from_buffer(
            0, (void *)"", MHD_RESPMEM_PERSISTENT);
        ret = busy
                  ? MHD_queue_response(conn, MHD_HTTP_SERVICE_UNAVAILABLE, busy)
                  : MHD_NO;
        if (busy) {
            MHD_destroy_response(busy);
        }
        return ret;
    }
    if (!r->sent) {
        /* The request is whole: park the connection until the back end
         * answers (fe_reply resumes it, and this handler runs again). */
        r->sent = 1;
        put_frame(&w->out, req_frame_body, sizeof(req_frame_body) - 1);
        fifo_push(w, r);
        MHD_suspend_connection(conn);
        return MHD_YES;
    }
    ret = MHD_queue_response(conn, MHD_HTTP_OK, r->resp);
    MHD_destroy_response(r->resp);
    r->resp = NULL;
    w->served++;
    return ret;
}

static void fe_completed(void *cls,
                         struct MHD_Connection *conn,
                         void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    struct fe_req *r = *con_cls;
    (void)cls;
    (void)conn;
    (void)toe;
    if (r) {
        if (r->resp) {
            MHD_destroy_response(r->resp);
        }
        free(r);
        *con_cls = NULL;
    }
}

static void fe_idle_cb(uv_idle_t *i);
static void fe_timer_cb(uv_timer_t *t);

/* Runs the daemon (zero timeout: never blocks), sends the frames its
 * handlers queued in one write, and arms what MHD asks for next: the idle
 * handle when work is pending now (never a 0 ms timer, which libuv would
 * run again inside the same timer pass), else a timer. */
static void fe_run(struct fe_worker *w)
{
    MHD_UNSIGNED_LONG_LONG t;
    MHD_run(w->d);
    send_buf((uv_stream_t *)&w->be, &w->out);
    if (MHD_get_timeout(w->d, &t) != MHD_YES) {
        uv_idle_stop(&w->idle);
        uv_timer_stop(&w->timer);
    } else if (t == 0) {
        uv_idle_start(&w->idle, fe_idle_cb);
    } else {
        uv_idle_stop(&w->idle);
        uv_timer_start(&w->timer, fe_timer_cb, t, 0);
    }
}

static void fe_idle_cb(uv_idle_t *i)
{
    uv_idle_stop(i);
    fe_run(i->data);
}

static void fe_timer_cb(uv_timer_t *t)
{
    fe_run(t->data);
}

static void fe_poll_cb(uv_poll_t *p, int status, int events)
{
    (void)status;
    (void)events;
    fe_run(p->data);
}

static void fe_reply(void *arg, const char *p, uint32_t n)
{
    struct fe_worker *w = arg;
    struct fe_req *r = fifo_pop(w);
    if (!r) {
        die("a reply nobody asked for");
    }
    r->resp =
        MHD_create_response_from_buffer(n, (void *)p, MHD_RESPMEM_MUST_COPY);
    if (r->resp) {
        MHD_add_response_header(r->resp, "Content-Type",
                                "application/json;odata=minimalmetadata");
    }
    MHD_resume_connection(r->conn);
}

static void fe_be_alloc_cb(uv_handle_t *h, size_t hint, uv_buf_t *out)
{
    struct fe_worker *w = h->data;
    (void)hint;
    buf_space(&w->in, out);
}

static void fe_be_read_cb(uv_stream_t *s, ssize_t nread, const uv_buf_t *b)
{
    struct fe_worker *w = s->data;
    (void)b;
    if (nread < 0) {
        die("the back end closed its connection");
    }
    w->in.len += (size_t)nread;
    for_each_frame(&w->in, fe_reply, w);
    fe_run(w);
}

static void fe_stop_cb(uv_async_t *a)
{
    uv_stop(a->loop);
}

static void fe_thread(void *arg)
{
    struct fe_worker *w = arg;
    uv_run(&w->loop, UV_RUN_DEFAULT);
}

/* A blocking connect (before the loop runs), then handed to libuv. */
static void fe_connect_backend(struct fe_worker *w,
                               const struct sockaddr_storage *ss,
                               socklen_t len)
{
    int fd = socket(ss->ss_family, SOCK_STREAM, 0);
    int one = 1;
    if (fd < 0 || connect(fd, (const struct sockaddr *)ss, len) != 0) {
        die("cannot connect to the back end");
    }
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    uv_tcp_init(&w->loop, &w->be);
    if (uv_tcp_open(&w->be, fd) != 0) {
        die("uv_tcp_open failed");
    }
    w->be.data = w;
    uv_read_start((uv_stream_t *)&w->be, fe_be_alloc_cb, fe_be_read_cb);
}

static void fe_start_daemon(struct fe_worker *w, int lfd, int v6)
{
    const union MHD_DaemonInfo *info;
    int fd = dup(lfd);
    if (fd < 0) {
        die("dup failed");
    }
    w->d = MHD_start_daemon(
        MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_TURBO |
            MHD_USE_ERROR_LOG | (v6 ? MHD_USE_IPv6 : 0),
        0, NULL, NULL, fe_on_request, w, MHD_OPTION_LISTEN_SOCKET,
        (MHD_socket)fd, MHD_OPTION_NOTIFY_COMPLETED, fe_completed, w,
        MHD_OPTION_CONNECTION_TIMEOUT, 60u, MHD_OPTION_END);
    if (!w->d) {
        die("libmicrohttpd did not start");
    }
    info = MHD_get_daemon_info(w->d, MHD_DAEMON_INFO_EPOLL_FD);
    if (!info || uv_poll_init(&w->loop, &w->poll, info->epoll_fd) != 0) {
        die("no epoll fd");
    }
    w->poll.data = w;
    uv_timer_init(&w->loop, &w->timer);
    w->timer.data = w;
    uv_idle_init(&w->loop, &w->idle);
    w->idle.data = w;
    uv_async_init(&w->loop, &w->stop, fe_stop_cb);
    uv_poll_start(&w->poll, UV_READABLE, fe_poll_cb);
    uv_timer_start(&w->timer, fe_timer_cb, 0, 0);
}

/* After the worker's loop stopped: ends the requests still parked, closes
 * the handles (the poll handle watches the daemon's epoll fd), lets the
 * loop run their close callbacks and cancel the writes still queued, then
 * stops the daemon (which completes, and frees, every request left). */
static void fe_worker_close(struct fe_worker *w)
{
    struct fe_req *r;
    /* libmicrohttpd aborts when stopped with connections suspended:
     * resume the parked ones without an answer (the handler answers 503,
     * as it does to any request from now on) and let the daemon process
     * them. */
    w->closing = 1;
    while ((r = fifo_pop(w)) != NULL) {
        MHD_resume_connection(r->conn);
    }
    for (int i = 0; i < 4; i++) {
        MHD_run(w->d);
    }
    uv_close((uv_handle_t *)&w->poll, NULL);
    uv_close((uv_handle_t *)&w->timer, NULL);
    uv_close((uv_handle_t *)&w->idle, NULL);
    uv_close((uv_handle_t *)&w->stop, NULL);
    uv_close((uv_handle_t *)&w->be, NULL);
    uv_run(&w->loop, UV_RUN_DEFAULT);
    if (uv_loop_close(&w->loop) != 0) {
        fprintf(stderr, "bench_pipe2hop: a worker's loop still has handles\n");
    }
    MHD_stop_daemon(w->d);
    free(w->in.p);
    free(w->out.p);
    free(w->fifo);
}

static int run_frontend(void)
{
    struct sockaddr_storage ls, bs, bound;
    socklen_t blen, llen, bl = sizeof(bound);
    struct fe_worker *ws;
    unsigned long served = 0;
    long n = O.threads > 0 ? O.threads : 1;
    sigset_t set;
    int lfd, one = 1, sig = 0;

    if (rt_addr_parse(O.listen, &ls, &llen) != 0) {
        die("bad --listen");
    }
    if (!O.backend_addr[0] || rt_addr_parse(O.backend_addr, &bs, &blen) != 0) {
        die("--backend-addr HOST:PORT is needed");
    }
    lfd = socket(ls.ss_family, SOCK_STREAM, 0);
    if (lfd < 0 ||
        setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0 ||
        bind(lfd, (struct sockaddr *)&ls, llen) != 0 ||
        listen(lfd, 1024) != 0 ||
        fcntl(lfd, F_SETFL, fcntl(lfd, F_GETFL) | O_NONBLOCK) != 0 ||
        getsockname(lfd, (struct sockaddr *)&bound, &bl) != 0) {
        die("cannot listen");
    }
    /* The workers inherit the mask: only the main thread takes SIGTERM. */
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    ws = calloc((size_t)n, sizeof(*ws));
    if (!ws) {
        die("out of memory");
    }
    for (long i = 0; i < n; i++) {
        uv_loop_init(&ws[i].loop);
        fe_connect_backend(&ws[i], &bs, blen);
        fe_start_daemon(&ws[i], lfd, ls.ss_family == AF_INET6);
        if (uv_thread_create(&ws[i].th, fe_thread, &ws[i]) != 0) {
            die("cannot start a worker");
        }
    }
    write_port("http", ntohs(((struct sockaddr_in *)&bound)->sin_port));
    sigwait(&set, &sig);
    for (long i = 0; i < n; i++) {
        uv_async_send(&ws[i].stop);
    }
    for (long i = 0; i < n; i++) {
        uv_thread_join(&ws[i].th);
        fe_worker_close(&ws[i]);
        served += ws[i].served;
    }
    free(ws);
    fprintf(stderr, "bench_pipe2hop: served %lu\n", served);
    close(lfd);
    return 0;
}

int main(int argc, char **argv)
{
    int rc;
    rt_config_parse("bench_pipe2hop",
                    "The pipelined 2-hop limit: an MHD front end that parks "
                    "each request and forwards it over one TCP connection "
                    "per worker to a back end answering ~1 KiB.",
                    opts, argc, argv, NULL, 0);
    signal(SIGPIPE, SIG_IGN);
    rc = O.backend ? run_backend() : run_frontend();
    rt_config_free(opts);
    return rc;
}
