/* Raft over mutual TLS: the contract is in ms_rtls.h.
 *
 * Why one thread per connection and not memory BIOs on the loop: a group
 * has at most four peers, each holding one outgoing and one incoming
 * connection, with a few hundred small messages a second at most. A thread
 * running blocking-style OpenSSL over a non-blocking socket and poll() is
 * about a third of the code of a memory-BIO state machine on libuv, keeps
 * OpenSSL's CPU (handshakes, record crypto) off the master's loop, and the
 * thread count is bounded (MS_RTLS_MAX_HANDSHAKING half-open connections,
 * plus the peers'). libraft itself only ever sees a uv_pipe_t over one end
 * of a socketpair(AF_UNIX); the thread owns the TCP socket, the SSL and the
 * other end.
 *
 * Happy path of an outgoing connection (transport->connect):
 * - the loop creates a conn and its thread; the thread resolves the
 *   address, connects, runs the TLS handshake as client, checks that the
 *   server's verified certificate has the role `master`, writes raft's
 *   handshake (protocol 1, our id, our address, exactly as raft_uv_tcp
 *   encodes it) inside TLS, creates the socketpair, marks itself ready and
 *   wakes the loop (uv_async), then pumps;
 * - the loop wraps the pair's libraft end in a uv_pipe_t (raft_malloc'ed:
 *   libraft frees it with raft_free after uv_close) and fires the connect
 *   callback with it.
 * Incoming (transport->listen): a non-blocking listening socket polled on
 * the loop; each accepted socket gets a conn and thread, which runs the
 * TLS handshake as server, checks the client's certificate role, reads
 * raft's handshake inside TLS (protocol 1, an address of at most
 * MS_RTLS_ADDR_MAX bytes), and the loop fires accept_cb(id, address, pipe).
 * Every step before "ready" is bounded by one deadline (handshake_ms).
 *
 * Pump: both directions in one poll() loop over the TCP socket, the pair
 * and the conn's stop eventfd; a direction stops reading while its buffer
 * is not yet written out (back-pressure), so memory per connection is
 * fixed (two 16 KiB buffers, one TLS record each).
 *
 * Failure modes and what libraft sees:
 * - connect refused, unreachable, resolution failed, handshake failed or
 *   timed out, the server is not a `master`: the connect callback with
 *   RAFT_NOCONNECTION (libraft retries after its connect-retry delay);
 * - an incoming connection failing any check: closed, never reported;
 * - accept failing (EMFILE, ENOMEM) while connections wait: the listening
 *   socket stays readable, so accepting pauses for 100 ms (a warning, the
 *   accept_pauses counter) instead of spinning the loop;
 * - the peer or the network drops an established connection: the thread
 *   closes its pair end, libraft reads EOF (server side) or a write fails
 *   with EPIPE (client side) and reconnects, as over TCP;
 * - libraft closes its stream: the thread reads EOF on the pair, flushes
 *   what it had, sends close_notify and ends;
 * - transport->close: the listener is closed, every thread is woken by its
 *   stop eventfd and ends; a connect still in progress fires its callback
 *   with RAFT_CANCELED; the close callback fires once every thread has
 *   been joined and the loop's handles are closed.
 */
#include "ms_rtls.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "rt_addr.h"
#include "rt_alloc.h"
#include "rt_err.h"
#include "rt_log.h"
#include "rt_time.h"
#include "rt_tls.h"

#define MS_RTLS_PROTOCOL 1   /* raft_uv_tcp's UV__TCP_HANDSHAKE_PROTOCOL */
#define MS_RTLS_ADDR_MAX 256 /* a raft address in the handshake, padded */
#define MS_RTLS_BUF (16 * 1024)
#define MS_RTLS_STACK (512 * 1024)
#define MS_RTLS_WARN_WINDOW_MS 10000
#define MS_RTLS_WARN_BURST 5
#define MS_RTLS_ACCEPT_PAUSE_MS 100

struct ms_rtls;

struct ms_rtls_conn
{
    struct ms_rtls *t;
    struct ms_rtls_conn *prev, *next; /* t->conns, under t->mu */
    struct ms_rtls_conn *act;         /* the loop's work list */
    bool outgoing;
    /* Outgoing: the request and its target. */
    struct raft_uv_connect *req;
    raft_uv_connect_cb cb;
    raft_id peer_id; /* outgoing: dialled; incoming: from raft's handshake */
    char peer_addr[MS_RTLS_ADDR_MAX]; /* idem, raft's address */
    char remote[MS_RTLS_ADDR_MAX];    /* the socket's peer, for logs */
    char cn[RT_TLS_NAME_MAX];         /* the verified peer's CN */
    int tcp;
    int pair_ours;   /* the thread's end */
    int pair_theirs; /* libraft's end, until handed over */
    int stopfd;
    SSL *ssl;
    pthread_t thread;
    bool thread_started;
    /* Under t->mu: set by the thread. */
    bool ready;
    bool exited;
    /* Loop only. */
    bool delivered;
    bool counted_handshaking;
    char ip[INET6_ADDRSTRLEN]; /* incoming: the client's address */
    uint8_t in[MS_RTLS_BUF];   /* TLS -> pair */
    uint8_t out[MS_RTLS_BUF];  /* pair -> TLS */
};

struct ms_rtls
{
    struct raft_uv_transport *iface;
    uv_loop_t *loop;
    struct rt_tls *tls;
    unsigned handshake_ms;
    raft_id id;
    char address[MS_RTLS_ADDR_MAX];
    char bind[MS_RTLS_ADDR_MAX]; /* listen here when set, else on address */
    raft_uv_accept_cb accept_cb;
    int lfd;
    uv_poll_t lpoll;
    uv_timer_t lpause; /* accept paused after an error such as EMFILE */
    bool listening;
    int lhandles; /* lpoll and lpause until both are closed */
    uv_async_t async;
    bool async_open;
    bool closing;
    raft_uv_transport_close_cb close_cb;
    unsigned handshaking; /* incoming conns not ready yet (loop) */
    struct ms_rtls_stats stats;
    pthread_mutex_t mu;
    struct ms_rtls_conn *conns; /* every conn whose thread is not joined */
    /* Refusal warnings, under mu. */
    uint64_t warn_window;
    unsigned warn_count;
    uint64_t warn_suppressed;
};

/* ---- logging ---- */

/* At most MS_RTLS_WARN_BURST refusals per window are logged, so a port scan
 * or a flood (or a misconfigured peer dialled every second) does not fill
 * the disk; the next logged one says how many were left out. @what names
 * the connection ("refused raft connection from ADDR"). Any thread. */
static void ms__rtls_refused(struct ms_rtls *t,
                             const char *what,
                             const char *reason)
{
    uint64_t now = rt_time_mono_ms(), suppressed = 0;
    bool log = false;

    pthread_mutex_lock(&t->mu);
    if (now - t->warn_window >= MS_RTLS_WARN_WINDOW_MS) {
        t->warn_window = now;
        t->warn_count = 0;
    }
    if (t->warn_count < MS_RTLS_WARN_BURST) {
        t->warn_count++;
        suppressed = t->warn_suppressed;
        t->warn_suppressed = 0;
        log = true;
    } else {
        t->warn_suppressed++;
    }
    pthread_mutex_unlock(&t->mu);
    if (log && suppressed > 0)
        rt_log(RT_LOG_WARN,
               "raft %llu: %s: %s (and %llu more since the last one "
               "logged)",
               (unsigned long long)t->id, what, reason,
               (unsigned long long)suppressed);
    else if (log)
        rt_log(RT_LOG_WARN, "raft %llu: %s: %s", (unsigned long long)t->id,
               what, reason);
}

/* The first OpenSSL error of this thread's queue, or @dflt; empties it. */
static const char *ms__rtls_sslerr(char *buf, size_t n, const char *dflt)
{
    unsigned long e = ERR_get_error();

    if (e == 0) {
        snprintf(buf, n, "%s", dflt);
    } else {
        ERR_error_string_n(e, buf, n);
    }
    ERR_clear_error();
    return buf;
}

/* ---- waiting, in the connection thread ---- */

/* Waits until @fd has @events or the deadline passes or the conn is told
 * to stop: 0, RT_ETIMEDOUT, RT_ECANCELED. */
static int ms__rtls_wait(struct ms_rtls_conn *c,
                         int fd,
                         short events,
                         uint64_t deadline)
{
    struct pollfd p[2];
    uint64_t now;
    int rv;

    for (;;) {
        now = rt_time_mono_ms();
        if (now >= deadline)
            return RT_ETIMEDOUT;
        p[0].fd = fd;
        p[0].events = events;
        p[0].revents = 0;
        p[1].fd = c->stopfd;
        p[1].events = POLLIN;
        p[1].revents = 0;
        rv = poll(p, 2, (int)(deadline - now));
        if (rv < 0 && errno == EINTR)
            continue;
        if (rv < 0)
            return RT_EIO;
        if (p[1].revents != 0)
            return RT_ECANCELED;
        if (p[0].revents != 0)
            return 0;
    }
}

/* Runs one SSL call until it succeeds, waiting for the socket as OpenSSL
 * asks: >0 (the call's result), RT_ETIMEDOUT, RT_ECANCELED, or RT_EIO with
 * @why filled. */
enum ms__rtls_op { MS_RTLS_HANDSHAKE, MS_RTLS_READ, MS_RTLS_WRITE };

static int ms__rtls_ssl(struct ms_rtls_conn *c,
                        enum ms__rtls_op op,
                        void *buf,
                        int n,
                        uint64_t deadline,
                        char *why,
                        size_t whylen)
{
    int rv, err;

    for (;;) {
        ERR_clear_error();
        switch (op) {
            case MS_RTLS_HANDSHAKE:
                rv = SSL_do_handshake(c->ssl);
                break;
            case MS_RTLS_READ:
                rv = SSL_read(c->ssl, buf, n);
                break;
            default:
                rv = SSL_write(c->ssl, buf, n);
                break;
        }
        if (rv > 0)
            return rv;
        err = SSL_get_error(c->ssl, rv);
        if (err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE) {
            rv = ms__rtls_wait(c, c->tcp,
                               err == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT,
                               deadline);
            if (rv != 0)
                return rv;
            continue;
        }
        if (err == SSL_ERROR_ZERO_RETURN ||
            (err == SSL_ERROR_SYSCALL && ERR_peek_error() == 0))
            snprintf(
                why, whylen, "connection closed by peer%s",
                op == MS_RTLS_HANDSHAKE ? " during the TLS handshake" : "");
        else
            ms__rtls_sslerr(why, whylen, "TLS error");
        ERR_clear_error();
        return RT_EIO;
    }
}

/* ---- the steps before "ready", in the connection thread ---- */

static int ms__rtls_dial(struct ms_rtls_conn *c,
                         uint64_t deadline,
                         char *why,
                         size_t whylen)
{
    char host[MS_RTLS_ADDR_MAX], port[16];
    struct addrinfo hints, *res = NULL, *ai;
    const char *colon = strrchr(c->peer_addr, ':');
    int rv, fd = -1, soerr;
    socklen_t len;

    if (colon == NULL || colon == c->peer_addr ||
        (size_t)(colon - c->peer_addr) >= sizeof host ||
        strlen(colon + 1) >= sizeof port) {
        snprintf(why, whylen, "bad address");
        return RT_EINVAL;
    }
    memcpy(host, c->peer_addr, (size_t)(colon - c->peer_addr));
    host[colon - c->peer_addr] = '\0';
    snprintf(port, sizeof port, "%s", colon + 1);
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICSERV;
    rv = getaddrinfo(host, port, &hints, &res);
    if (rv != 0) {
        snprintf(why, whylen, "resolve: %s", gai_strerror(rv));
        return RT_EIO;
    }
    rv = RT_EIO;
    snprintf(why, whylen, "no address");
    for (ai = res; ai != NULL; ai = ai->ai_next) {
        fd = socket(ai->ai_family,
                    ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0) {
            snprintf(why, whylen, "socket: %s", strerror(errno));
            continue;
        }
        if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0) {
            rv = 0;
            break;
        }
        if (errno != EINPROGRESS) {
            snprintf(why, whylen, "connect: %s", strerror(errno));
            close(fd);
            fd = -1;
            continue;
        }
        rv = ms__rtls_wait(c, fd, POLLOUT, deadline);
        if (rv != 0) {
            snprintf(why, whylen, "connect: %s", rt_strerror(rv));
            close(fd);
            fd = -1;
            break; /* the deadline is shared: no next address */
        }
        len = sizeof soerr;
        if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &len) != 0)
            soerr = errno;
        if (soerr == 0) {
            rv = 0;
            break;
        }
        snprintf(why, whylen, "connect: %s", strerror(soerr));
        rv = RT_EIO;
        close(fd);
        fd = -1;
    }
    freeaddrinfo(res);
    if (rv != 0)
        return rv;
    c->tcp = fd;
    return 0;
}

/* The peer must hold a cluster certificate of role master. */
static int ms__rtls_check_peer(struct ms_rtls_conn *c, char *why, size_t n)
{
    char role[RT_TLS_ROLE_MAX], name[RT_TLS_NAME_MAX];

    if (rt_tls_peer_name(c->ssl, c->cn, sizeof c->cn) != 0) {
        snprintf(why, n, "no verified cluster certificate");
        return RT_EPERM;
    }
    if (rt_tls_name_split(c->cn, role, sizeof role, name, sizeof name) != 0 ||
        strcmp(role, "master") != 0) {
        snprintf(why, n, "certificate %s is not a master's", c->cn);
        return RT_EPERM;
    }
    return 0;
}

static void ms__rtls_put64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t ms__rtls_get64(const uint8_t *p)
{
    uint64_t v = 0;

    for (int i = 0; i < 8; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

/* raft_uv_tcp's handshake (src/uv_tcp_connect.c uvTcpEncodeHandshake):
 * u64le protocol, u64le id, u64le padded address length, then the address,
 * NUL-terminated and zero-padded to a multiple of 8. */
static int ms__rtls_send_hello(struct ms_rtls_conn *c,
                               uint64_t deadline,
                               char *why,
                               size_t whylen)
{
    struct ms_rtls *t = c->t;
    uint8_t msg[24 + MS_RTLS_ADDR_MAX];
    size_t alen = (strlen(t->address) + 1 + 7) & ~(size_t)7;
    int rv;

    memset(msg, 0, sizeof msg);
    ms__rtls_put64(msg, MS_RTLS_PROTOCOL);
    ms__rtls_put64(msg + 8, t->id);
    ms__rtls_put64(msg + 16, alen);
    memcpy(msg + 24, t->address, strlen(t->address));
    rv = ms__rtls_ssl(c, MS_RTLS_WRITE, msg, (int)(24 + alen), deadline, why,
                      whylen);
    return rv < 0 ? rv : 0;
}

static int ms__rtls_read_full(struct ms_rtls_conn *c,
                              uint8_t *buf,
                              size_t n,
                              uint64_t deadline,
                              char *why,
                              size_t whylen)
{
    size_t got = 0;
    int rv;

    while (got < n) {
        rv = ms__rtls_ssl(c, MS_RTLS_READ, buf + got, (int)(n - got), deadline,
                          why, whylen);
        if (rv < 0)
            return rv;
        got += (size_t)rv;
    }
    return 0;
}

static int ms__rtls_recv_hello(struct ms_rtls_conn *c,
                               uint64_t deadline,
                               char *why,
                               size_t whylen)
{
    uint8_t pre[24];
    uint64_t proto, alen;
    int rv;

    rv = ms__rtls_read_full(c, pre, sizeof pre, deadline, why, whylen);
    if (rv != 0)
        return rv;
    proto = ms__rtls_get64(pre);
    alen = ms__rtls_get64(pre + 16);
    if (proto != MS_RTLS_PROTOCOL) {
        snprintf(why, whylen, "raft handshake: protocol %llu",
                 (unsigned long long)proto);
        return RT_EPROTO;
    }
    if (alen == 0 || alen > sizeof c->peer_addr) {
        snprintf(why, whylen, "raft handshake: address of %llu bytes",
                 (unsigned long long)alen);
        return RT_EPROTO;
    }
    rv = ms__rtls_read_full(c, (uint8_t *)c->peer_addr, (size_t)alen, deadline,
                            why, whylen);
    if (rv != 0)
        return rv;
    if (memchr(c->peer_addr, '\0', (size_t)alen) == NULL) {
        snprintf(why, whylen, "raft handshake: unterminated address");
        return RT_EPROTO;
    }
    c->peer_id = ms__rtls_get64(pre + 8);
    if (c->peer_id == 0) {
        snprintf(why, whylen, "raft handshake: server id 0");
        return RT_EPROTO;
    }
    return 0;
}

/* ---- the pump, in the connection thread ---- */

/* Moves bytes both ways until either side ends or the conn is stopped. */
static void ms__rtls_pump(struct ms_rtls_conn *c)
{
    size_t in_off = 0, in_len = 0, out_off = 0, out_len = 0;
    bool tls_eof = false, pair_eof = false, failed = false;
    short rd_want = 0, wr_want = 0;
    struct pollfd p[3];
    ssize_t n;
    int rv, err;

    for (;;) {
        bool progress = true;

        while (progress && !failed) {
            progress = false;
            /* TLS -> pair */
            if (in_len == 0 && !tls_eof) {
                ERR_clear_error();
                rd_want = 0;
                rv = SSL_read(c->ssl, c->in, sizeof c->in);
                if (rv > 0) {
                    in_off = 0;
                    in_len = (size_t)rv;
                    progress = true;
                } else {
                    err = SSL_get_error(c->ssl, rv);
                    if (err == SSL_ERROR_WANT_READ)
                        rd_want = POLLIN;
                    else if (err == SSL_ERROR_WANT_WRITE)
                        rd_want = POLLOUT;
                    else if (err == SSL_ERROR_ZERO_RETURN ||
                             (err == SSL_ERROR_SYSCALL &&
                              ERR_peek_error() == 0))
                        tls_eof = true;
                    else
                        failed = true;
                }
            }
            if (in_len > 0) {
                n = send(c->pair_ours, c->in + in_off, in_len, MSG_NOSIGNAL);
                if (n > 0) {
                    in_off += (size_t)n;
                    in_len -= (size_t)n;
                    progress = true;
                } else if (n < 0 && errno != EAGAIN && errno != EINTR) {
                    failed = true; /* libraft closed its end */
                }
            }
            /* pair -> TLS */
            if (out_len == 0 && !pair_eof) {
                n = recv(c->pair_ours, c->out, sizeof c->out, 0);
                if (n > 0) {
                    out_off = 0;
                    out_len = (size_t)n;
                    progress = true;
                } else if (n == 0) {
                    pair_eof = true;
                } else if (errno != EAGAIN && errno != EINTR) {
                    failed = true;
                }
            }
            if (out_len > 0) {
                ERR_clear_error();
                wr_want = 0;
                rv = SSL_write(c->ssl, c->out + out_off, (int)out_len);
                if (rv > 0) {
                    out_off += (size_t)rv;
                    out_len -= (size_t)rv;
                    progress = true;
                } else {
                    err = SSL_get_error(c->ssl, rv);
                    if (err == SSL_ERROR_WANT_READ)
                        wr_want = POLLIN;
                    else if (err == SSL_ERROR_WANT_WRITE)
                        wr_want = POLLOUT;
                    else
                        failed = true;
                }
            }
        }
        if (failed || (tls_eof && in_len == 0) || (pair_eof && out_len == 0))
            break;
        p[0].fd = c->tcp;
        p[0].events = (short)((in_len == 0 && !tls_eof ? rd_want : 0) |
                              (out_len > 0 ? wr_want : 0));
        p[1].fd = c->pair_ours;
        p[1].events = (short)((in_len > 0 ? POLLOUT : 0) |
                              (out_len == 0 && !pair_eof ? POLLIN : 0));
        p[2].fd = c->stopfd;
        p[2].events = POLLIN;
        p[0].revents = p[1].revents = p[2].revents = 0;
        rv = poll(p, 3, -1);
        if (rv < 0 && errno != EINTR)
            break;
        if (p[2].revents != 0)
            break;
    }
    if (!failed && !tls_eof) {
        /* close_notify, best effort: the socket is non-blocking. */
        ERR_clear_error();
        (void)SSL_shutdown(c->ssl);
    }
    ERR_clear_error();
}

/* ---- the connection thread ---- */

static void *ms__rtls_thread(void *arg)
{
    struct ms_rtls_conn *c = arg;
    struct ms_rtls *t = c->t;
    uint64_t deadline = rt_time_mono_ms() + t->handshake_ms;
    char why[256] = "";
    int pair[2], one = 1, rv;

    if (c->outgoing) {
        rv = ms__rtls_dial(c, deadline, why, sizeof why);
        if (rv != 0)
            goto done;
        snprintf(c->remote, sizeof c->remote, "%s", c->peer_addr);
    }
    (void)setsockopt(c->tcp, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    c->ssl = SSL_new(c->outgoing ? rt_tls_client_ctx(t->tls)
                                 : rt_tls_server_ctx(t->tls));
    if (c->ssl == NULL || SSL_set_fd(c->ssl, c->tcp) != 1) {
        ms__rtls_sslerr(why, sizeof why, "SSL_new failed");
        rv = RT_ENOMEM;
        goto done;
    }
    /* Raft connections are long-lived and never resumed. */
    if (!c->outgoing)
        (void)SSL_set_num_tickets(c->ssl, 0);
    SSL_set_mode(c->ssl, SSL_MODE_ENABLE_PARTIAL_WRITE |
                             SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    if (c->outgoing)
        SSL_set_connect_state(c->ssl);
    else
        SSL_set_accept_state(c->ssl);
    rv = ms__rtls_ssl(c, MS_RTLS_HANDSHAKE, NULL, 0, deadline, why, sizeof why);
    if (rv == RT_ETIMEDOUT)
        snprintf(why, sizeof why, "TLS handshake not done within %u ms",
                 t->handshake_ms);
    if (rv < 0)
        goto done;
    rv = ms__rtls_check_peer(c, why, sizeof why);
    if (rv != 0)
        goto done;
    rv = c->outgoing ? ms__rtls_send_hello(c, deadline, why, sizeof why)
                     : ms__rtls_recv_hello(c, deadline, why, sizeof why);
    if (rv == RT_ETIMEDOUT)
        snprintf(why, sizeof why, "raft handshake not done within %u ms",
                 t->handshake_ms);
    if (rv != 0)
        goto done;
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0,
                   pair) != 0) {
        snprintf(why, sizeof why, "socketpair: %s", strerror(errno));
        rv = RT_EIO;
        goto done;
    }
    c->pair_ours = pair[0];
    pthread_mutex_lock(&t->mu);
    c->pair_theirs = pair[1];
    c->ready = true;
    pthread_mutex_unlock(&t->mu);
    uv_async_send(&t->async);
    ms__rtls_pump(c);

done:
    if (rv != 0 && rv != RT_ECANCELED) {
        char what[MS_RTLS_ADDR_MAX + 64];

        if (!c->outgoing) {
            snprintf(what, sizeof what, "refused raft connection from %s",
                     c->remote);
            ms__rtls_refused(t, what, why);
        } else if (c->tcp >= 0) {
            /* Reachable, but the TLS handshake, its certificate or raft's
             * handshake failed: a misconfigured or impostor peer, worth a
             * warning (libraft dials again every second: rate-limited). */
            snprintf(what, sizeof what, "dropped raft connection to %llu at %s",
                     (unsigned long long)c->peer_id, c->peer_addr);
            ms__rtls_refused(t, what, why);
        } else {
            /* Down or unreachable: what libraft retries anyway. */
            rt_log(RT_LOG_DEBUG, "raft %llu: connect to %llu at %s: %s",
                   (unsigned long long)t->id, (unsigned long long)c->peer_id,
                   c->peer_addr, why);
        }
    }
    if (c->ssl != NULL) {
        SSL_free(c->ssl);
        c->ssl = NULL;
    }
    if (c->tcp >= 0) {
        close(c->tcp);
        c->tcp = -1;
    }
    if (c->pair_ours >= 0) {
        close(c->pair_ours);
        c->pair_ours = -1;
    }
    pthread_mutex_lock(&t->mu);
    c->exited = true;
    pthread_mutex_unlock(&t->mu);
    uv_async_send(&t->async);
    return NULL;
}

/* ---- conns, on the loop ---- */

static void ms__rtls_maybe_closed(struct ms_rtls *t);

static struct ms_rtls_conn *ms__rtls_conn_new(struct ms_rtls *t, bool out)
{
    struct ms_rtls_conn *c = rt_xcalloc(1, sizeof *c);

    c->t = t;
    c->outgoing = out;
    c->tcp = -1;
    c->pair_ours = -1;
    c->pair_theirs = -1;
    c->stopfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (c->stopfd < 0) {
        free(c);
        return NULL;
    }
    return c;
}

static void ms__rtls_conn_free(struct ms_rtls_conn *c)
{
    if (c->pair_theirs >= 0)
        close(c->pair_theirs);
    if (c->tcp >= 0)
        close(c->tcp);
    close(c->stopfd);
    OPENSSL_cleanse(c->in, sizeof c->in);
    OPENSSL_cleanse(c->out, sizeof c->out);
    free(c);
}

/* Takes @c off @t's list of connections. */
static void ms__rtls_conn_unlink(struct ms_rtls *t, struct ms_rtls_conn *c)
{
    pthread_mutex_lock(&t->mu);
    if (c->prev != NULL)
        c->prev->next = c->next;
    else
        t->conns = c->next;
    if (c->next != NULL)
        c->next->prev = c->prev;
    pthread_mutex_unlock(&t->mu);
}

/* Links @c and starts its thread, with every signal blocked there (signals
 * are the loop's business). 0 or RT_ENOMEM; on error @c is freed. */
static int ms__rtls_conn_start(struct ms_rtls_conn *c)
{
    struct ms_rtls *t = c->t;
    pthread_attr_t attr;
    sigset_t all, old;
    int rv;

    pthread_mutex_lock(&t->mu);
    c->next = t->conns;
    if (t->conns != NULL)
        t->conns->prev = c;
    t->conns = c;
    pthread_mutex_unlock(&t->mu);

    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, MS_RTLS_STACK);
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    rv = pthread_create(&c->thread, &attr, ms__rtls_thread, c);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    pthread_attr_destroy(&attr);
    if (rv == 0) {
        c->thread_started = true;
        return 0;
    }
    ms__rtls_conn_unlink(t, c);
    ms__rtls_conn_free(c);
    return RT_ENOMEM;
}

static void ms__rtls_conn_stop(struct ms_rtls_conn *c)
{
    uint64_t one = 1;

    (void)!write(c->stopfd, &one, sizeof one);
}

/* Gives libraft its end of the pair: 0, or the connection is closed and an
 * outgoing request fails. */
static void ms__rtls_deliver(struct ms_rtls_conn *c)
{
    struct ms_rtls *t = c->t;
    uv_pipe_t *pipe;
    int fd = c->pair_theirs, rv;

    c->delivered = true;
    if (!c->outgoing && c->counted_handshaking) {
        c->counted_handshaking = false;
        t->handshaking--;
    }
    if (t->closing)
        goto fail;                    /* libraft is told once the thread ends */
    pipe = raft_malloc(sizeof *pipe); /* libraft frees it with raft_free */
    if (pipe == NULL)
        goto fail;
    rv = uv_pipe_init(t->loop, pipe, 0);
    if (rv == 0)
        rv = uv_pipe_open(pipe, fd);
    if (rv != 0) {
        rt_log(RT_LOG_WARN, "raft %llu: pipe for %s: %s",
               (unsigned long long)t->id, c->remote, uv_strerror(rv));
        /* uv_pipe_open failed: the fd is still ours. */
        uv_close((uv_handle_t *)pipe, (uv_close_cb)raft_free);
        goto fail;
    }
    c->pair_theirs = -1;
    if (c->outgoing) {
        t->stats.connected++;
        rt_log(RT_LOG_DEBUG, "raft %llu: connected to %llu at %s (%s)",
               (unsigned long long)t->id, (unsigned long long)c->peer_id,
               c->peer_addr, c->cn);
        c->req->cb(c->req, (uv_stream_t *)pipe, 0);
        c->req = NULL;
    } else {
        t->stats.accepted++;
        rt_log(RT_LOG_DEBUG, "raft %llu: accepted %llu at %s from %s (%s)",
               (unsigned long long)t->id, (unsigned long long)c->peer_id,
               c->peer_addr, c->remote, c->cn);
        t->accept_cb(t->iface, c->peer_id, c->peer_addr, (uv_stream_t *)pipe);
    }
    return;

fail:
    /* Closing libraft's end makes the thread end; an outgoing request's
     * callback fires when it has (ms__rtls_reap). */
    if (c->pair_theirs >= 0) {
        close(c->pair_theirs);
        c->pair_theirs = -1;
    }
    ms__rtls_conn_stop(c);
}

/* The thread ended: join it, answer a pending request, free. */
static void ms__rtls_reap(struct ms_rtls_conn *c)
{
    struct ms_rtls *t = c->t;

    pthread_join(c->thread, NULL);
    ms__rtls_conn_unlink(t, c);
    if (!c->outgoing && c->counted_handshaking) {
        t->handshaking--;
        t->stats.refused++;
    }
    if (c->outgoing && c->req != NULL) {
        struct raft_uv_connect *req = c->req;

        t->stats.connect_failed++;
        c->req = NULL;
        req->cb(req, NULL, t->closing ? RAFT_CANCELED : RAFT_NOCONNECTION);
    }
    ms__rtls_conn_free(c);
}

static void ms__rtls_async_cb(uv_async_t *a)
{
    struct ms_rtls *t = a->data;
    struct ms_rtls_conn *c, *work = NULL;

    /* Collect under the lock, act outside it: callbacks may connect. */
    pthread_mutex_lock(&t->mu);
    for (c = t->conns; c != NULL; c = c->next) {
        if (c->exited || (c->ready && !c->delivered)) {
            c->act = work;
            work = c;
        }
    }
    pthread_mutex_unlock(&t->mu);
    while (work != NULL) {
        c = work;
        work = c->act;
        /* exited is final and only this loop frees, so reading it
         * unlocked after the scan is safe once set. */
        pthread_mutex_lock(&t->mu);
        bool exited = c->exited;
        pthread_mutex_unlock(&t->mu);
        if (!exited) {
            ms__rtls_deliver(c);
        } else {
            ms__rtls_reap(c);
        }
    }
    ms__rtls_maybe_closed(t);
}

/* ---- listening, on the loop ---- */

static void ms__rtls_listen_cb(uv_poll_t *h, int status, int events);

static void ms__rtls_resume_cb(uv_timer_t *timer)
{
    struct ms_rtls *t = timer->data;

    if (!t->closing)
        uv_poll_start(&t->lpoll, UV_READABLE, ms__rtls_listen_cb);
}

/* Incoming connections from @ip still in their handshake. Only the loop
 * links and unlinks conns, so it may walk the list without the lock. */
static unsigned ms__rtls_handshaking_from(struct ms_rtls *t, const char *ip)
{
    unsigned n = 0;

    for (struct ms_rtls_conn *c = t->conns; c != NULL; c = c->next) {
        if (c->counted_handshaking && strcmp(c->ip, ip) == 0)
            n++;
    }
    return n;
}

static void ms__rtls_listen_cb(uv_poll_t *h, int status, int events)
{
    struct ms_rtls *t = h->data;
    struct sockaddr_storage ss;
    socklen_t len;
    int fd;

    (void)events;
    if (status < 0 || t->closing)
        return;
    for (;;) {
        struct ms_rtls_conn *c;
        char host[INET6_ADDRSTRLEN] = "?";
        int port = 0;

        len = sizeof ss;
        fd = accept4(t->lfd, (struct sockaddr *)&ss, &len,
                     SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd < 0 && (errno == EINTR || errno == ECONNABORTED))
            continue;
        if (fd < 0 && errno != EAGAIN && errno != EWOULDBLOCK) {
            /* Out of fds or memory: the socket stays readable, so polling
             * on would spin; pause accepting for a while instead. */
            ms__rtls_refused(t, "accept on the raft port (paused 100 ms)",
                             strerror(errno));
            t->stats.accept_pauses++;
            uv_poll_stop(&t->lpoll);
            uv_timer_start(&t->lpause, ms__rtls_resume_cb,
                           MS_RTLS_ACCEPT_PAUSE_MS, 0);
            return;
        }
        if (fd < 0)
            return;
        if (ss.ss_family == AF_INET) {
            struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;
            inet_ntop(AF_INET, &s4->sin_addr, host, sizeof host);
            port = ntohs(s4->sin_port);
        } else if (ss.ss_family == AF_INET6) {
            struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;
            inet_ntop(AF_INET6, &s6->sin6_addr, host, sizeof host);
            port = ntohs(s6->sin6_port);
        }
        /* One address cannot take every handshake slot, so a flood from
         * one host leaves room for the other masters. */
        if (t->handshaking >= MS_RTLS_MAX_HANDSHAKING ||
            ms__rtls_handshaking_from(t, host) >=
                MS_RTLS_MAX_HANDSHAKING_PER_IP) {
            char remote[INET6_ADDRSTRLEN + 64];

            snprintf(remote, sizeof remote,
                     "refused raft connection from %s:%d", host, port);
            close(fd);
            t->stats.refused++;
            ms__rtls_refused(t, remote,
                             t->handshaking >= MS_RTLS_MAX_HANDSHAKING
                                 ? "too many connections in handshake"
                                 : "too many connections in handshake from "
                                   "this address");
            continue;
        }
        c = ms__rtls_conn_new(t, false);
        if (c == NULL) {
            char what[INET6_ADDRSTRLEN + 64];

            snprintf(what, sizeof what, "refused raft connection from %s:%d",
                     host, port);
            ms__rtls_refused(t, what, strerror(errno)); /* eventfd's */
            close(fd);
            t->stats.refused++;
            continue;
        }
        c->tcp = fd;
        snprintf(c->remote, sizeof c->remote, "%s:%d", host, port);
        snprintf(c->ip, sizeof c->ip, "%s", host);
        c->counted_handshaking = true;
        t->handshaking++;
        if (ms__rtls_conn_start(c) != 0) {
            t->handshaking--;
            t->stats.refused++;
        }
    }
}

static int ms__rtls_listen(struct raft_uv_transport *iface,
                           raft_uv_accept_cb cb)
{
    struct ms_rtls *t = iface->impl;
    const char *at = t->bind[0] ? t->bind : t->address;
    char host[MS_RTLS_ADDR_MAX];
    struct sockaddr_storage ss;
    socklen_t len;
    int port, one = 1, rv;

    if (rt_addr_split(at, host, sizeof host, &port) != 0 ||
        rt_addr_ip(host, port, &ss, &len) != 0) {
        snprintf(iface->errmsg, RAFT_ERRMSG_BUF_SIZE,
                 "raft tls: bad listen address %.128s", at);
        return RAFT_INVALID;
    }
    t->lfd =
        socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (t->lfd < 0)
        goto err_sys;
    (void)setsockopt(t->lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(t->lfd, (struct sockaddr *)&ss, len) != 0 ||
        listen(t->lfd, 128) != 0)
        goto err_sys;
    rv = uv_poll_init(t->loop, &t->lpoll, t->lfd);
    if (rv != 0) {
        errno = -rv;
        goto err_sys;
    }
    t->lpoll.data = t;
    uv_timer_init(t->loop, &t->lpause);
    t->lpause.data = t;
    t->lhandles = 2;
    t->listening = true;
    t->accept_cb = cb;
    uv_poll_start(&t->lpoll, UV_READABLE, ms__rtls_listen_cb);
    return 0;

err_sys:
    snprintf(iface->errmsg, RAFT_ERRMSG_BUF_SIZE,
             "raft tls: listen on %.128s: %s", at, strerror(errno));
    if (t->lfd >= 0)
        close(t->lfd);
    t->lfd = -1;
    return RAFT_IOERR;
}

/* ---- connect, init, close ---- */

static int ms__rtls_connect(struct raft_uv_transport *iface,
                            struct raft_uv_connect *req,
                            raft_id id,
                            const char *address,
                            raft_uv_connect_cb cb)
{
    struct ms_rtls *t = iface->impl;
    struct ms_rtls_conn *c;

    if (t->closing)
        return RAFT_CANCELED;
    if (strlen(address) >= MS_RTLS_ADDR_MAX)
        return RAFT_NAMETOOLONG;
    c = ms__rtls_conn_new(t, true);
    if (c == NULL)
        return RAFT_NOMEM;
    req->cb = cb;
    c->req = req;
    c->cb = cb;
    c->peer_id = id;
    snprintf(c->peer_addr, sizeof c->peer_addr, "%s", address);
    snprintf(c->remote, sizeof c->remote, "%s", address);
    if (ms__rtls_conn_start(c) != 0)
        return RAFT_NOMEM;
    return 0;
}

static int ms__rtls_init_cb(struct raft_uv_transport *iface,
                            raft_id id,
                            const char *address)
{
    struct ms_rtls *t = iface->impl;

    if (strlen(address) + 1 > MS_RTLS_ADDR_MAX - 8)
        return RAFT_NAMETOOLONG;
    t->id = id;
    snprintf(t->address, sizeof t->address, "%s", address);
    return 0;
}

static void ms__rtls_async_close_cb(uv_handle_t *h)
{
    struct ms_rtls *t = h->data;

    t->async_open = false;
    ms__rtls_maybe_closed(t);
}

static void ms__rtls_lpoll_close_cb(uv_handle_t *h)
{
    struct ms_rtls *t = h->data;

    if (--t->lhandles > 0)
        return;
    close(t->lfd);
    t->lfd = -1;
    t->listening = false;
    ms__rtls_maybe_closed(t);
}

/* Fires the close callback once no thread, no listener and (last) no async
 * handle is left. */
static void ms__rtls_maybe_closed(struct ms_rtls *t)
{
    bool empty;

    if (!t->closing || t->listening)
        return;
    pthread_mutex_lock(&t->mu);
    empty = t->conns == NULL;
    pthread_mutex_unlock(&t->mu);
    if (!empty)
        return;
    if (t->async_open) {
        if (!uv_is_closing((uv_handle_t *)&t->async))
            uv_close((uv_handle_t *)&t->async, ms__rtls_async_close_cb);
        return;
    }
    if (t->close_cb != NULL) {
        raft_uv_transport_close_cb cb = t->close_cb;

        t->close_cb = NULL;
        cb(t->iface);
    }
}

static void ms__rtls_close_cb(struct raft_uv_transport *iface,
                              raft_uv_transport_close_cb cb)
{
    struct ms_rtls *t = iface->impl;
    struct ms_rtls_conn *c;

    RT_PRE(!t->closing);
    t->closing = true;
    t->close_cb = cb;
    if (t->listening && !uv_is_closing((uv_handle_t *)&t->lpoll)) {
        uv_close((uv_handle_t *)&t->lpoll, ms__rtls_lpoll_close_cb);
        uv_close((uv_handle_t *)&t->lpause, ms__rtls_lpoll_close_cb);
    }
    pthread_mutex_lock(&t->mu);
    for (c = t->conns; c != NULL; c = c->next)
        ms__rtls_conn_stop(c);
    pthread_mutex_unlock(&t->mu);
    /* Wake the loop side once even when no thread is left. */
    uv_async_send(&t->async);
}

/* OpenSSL caches a certificate's decoded extensions (key identifiers,
 * purposes) in the X509 object the first time a verification needs them,
 * under that object's lock, while other verifications may read them
 * without it (ThreadSanitizer sees concurrent handshakes race there on the
 * shared CA and node certificates). Computing them once here, before any
 * connection thread exists, leaves only reads for later. */
static void ms__rtls_warm(SSL_CTX *ctx)
{
    STACK_OF(X509_OBJECT) *objs =
        X509_STORE_get0_objects(SSL_CTX_get_cert_store(ctx));
    X509 *own = SSL_CTX_get0_certificate(ctx);

    for (int i = 0; i < sk_X509_OBJECT_num(objs); i++) {
        X509 *x = X509_OBJECT_get0_X509(sk_X509_OBJECT_value(objs, i));

        if (x != NULL)
            (void)X509_check_purpose(x, -1, 0);
    }
    if (own != NULL)
        (void)X509_check_purpose(own, -1, 0);
}

int ms_rtls_init(struct raft_uv_transport *iface,
                 uv_loop_t *loop,
                 struct rt_tls *tls)
{
    struct ms_rtls *t;
    void *data = iface->data;
    int version = iface->version;

    if (version != 1) {
        snprintf(iface->errmsg, RAFT_ERRMSG_BUF_SIZE, "Invalid version: %d",
                 version);
        return RAFT_INVALID;
    }
    memset(iface, 0, sizeof *iface);
    iface->data = data;
    iface->version = version;
    t = calloc(1, sizeof *t);
    if (t == NULL) {
        snprintf(iface->errmsg, RAFT_ERRMSG_BUF_SIZE, "out of memory");
        return RAFT_NOMEM;
    }
    t->iface = iface;
    t->loop = loop;
    t->tls = tls;
    ms__rtls_warm(rt_tls_server_ctx(tls));
    ms__rtls_warm(rt_tls_client_ctx(tls));
    t->handshake_ms = MS_RTLS_HANDSHAKE_MS;
    t->lfd = -1;
    t->warn_window = rt_time_mono_ms() - MS_RTLS_WARN_WINDOW_MS;
    pthread_mutex_init(&t->mu, NULL);
    if (uv_async_init(loop, &t->async, ms__rtls_async_cb) != 0) {
        pthread_mutex_destroy(&t->mu);
        free(t);
        snprintf(iface->errmsg, RAFT_ERRMSG_BUF_SIZE, "uv_async_init failed");
        return RAFT_NOMEM;
    }
    t->async.data = t;
    t->async_open = true;
    iface->impl = t;
    iface->init = ms__rtls_init_cb;
    iface->listen = ms__rtls_listen;
    iface->connect = ms__rtls_connect;
    iface->close = ms__rtls_close_cb;
    return 0;
}

void ms_rtls_set_handshake_ms(struct raft_uv_transport *iface, unsigned ms)
{
    struct ms_rtls *t = iface->impl;

    t->handshake_ms = ms > 0 ? ms : MS_RTLS_HANDSHAKE_MS;
}

int ms_rtls_set_bind_address(struct raft_uv_transport *iface,
                             const char *address)
{
    struct ms_rtls *t = iface->impl;

    if (strlen(address) + 1 > sizeof t->bind)
        return RAFT_NAMETOOLONG;
    snprintf(t->bind, sizeof t->bind, "%s", address);
    return 0;
}

static void ms__rtls_free_cb(uv_handle_t *h)
{
    struct ms_rtls *t = h->data;

    pthread_mutex_destroy(&t->mu);
    free(t);
}

void ms_rtls_close(struct raft_uv_transport *iface)
{
    struct ms_rtls *t = iface->impl;

    if (t == NULL)
        return;
    iface->impl = NULL;
    if (t->async_open) {
        /* Never closed through libraft (raft_uv_init or raft_init failed):
         * nothing was started, but the async handle must close on the
         * loop, and frees the rest then. */
        RT_PRE(!t->closing && !t->listening && t->conns == NULL);
        uv_close((uv_handle_t *)&t->async, ms__rtls_free_cb);
        return;
    }
    RT_PRE(t->conns == NULL);
    pthread_mutex_destroy(&t->mu);
    free(t);
}

void ms_rtls_get_stats(struct raft_uv_transport *iface,
                       struct ms_rtls_stats *out)
{
    struct ms_rtls *t = iface->impl;

    *out = t->stats;
}
