/* RPC over libuv TCP: see rt_rpc.h for the frame layout and the contract.
 *
 * Layout of the implementation:
 *   - framing: header codec and the resumable frame reader;
 *   - conn: one struct rt_rpc_conn per logical connection. Its socket (struct
 *     rt_rpc_sock: the uv_tcp_t, the reader and the read buffer) is replaced
 *     on every reconnect; the conn object itself is stable;
 *   - pending calls: an open-addressing hash table (id -> call, O(1)) plus a
 *     min-heap on deadline, scanned by one periodic timer per connection;
 *   - writes: frames are appended to a per-connection buffer and flushed by a
 *     uv_prepare handle (runs once per loop iteration, before polling), so
 *     every frame queued in one iteration leaves in one uv_write. At most one
 *     uv_write is in flight per socket: frames queued meanwhile wait in the
 *     buffer for its callback. So a frame still in the buffer has certainly
 *     not reached the socket, which is what tells a call that was never sent
 *     (RT_ENOTSENT, when the conn reports it) from one whose bytes may have
 *     reached the peer (RT_ENOCONN): each call remembers the number of the
 *     batch (wseq) its frame went into;
 *   - deferred completions: failures noticed at call time (connection down)
 *     and calls failed by a drop or a close complete from a zero-delay timer,
 *     never synchronously inside the caller.
 *
 *   - TLS (rt_rpc_set_tls): each socket gets an SSL over two memory BIOs.
 *     Bytes read from libuv go into the read BIO; the handshake runs
 *     first, on a socket that is not yet the conn's (a client keeps it as
 *     its connecting socket, a server conn as hsock, with a 5 s bound on
 *     conn->tmo), so no frame is read or written before both certificates
 *     are verified. Then SSL_read feeds the frame reader, and a flush
 *     passes the batch through SSL_write and hands what the write BIO
 *     holds to one uv_write, so the one-write-in-flight rule and wseq keep
 *     their meaning. Bytes TLS itself must send (handshake, alerts) leave
 *     in writes of their own, ordered by libuv's write queue;
 *
 * Lifetime: a conn holds `refs` (one for its owner plus user refs) and
 * `nhandles` (libuv handles not yet through their close callback). It is
 * freed only from a close callback or an unref, when both reach zero and it
 * has been retired (owner done with it). A client is freed with its conn. */
#include "rt_rpc.h"

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt.pb-c.h"
#include "rt_addr.h"
#include "rt_alloc.h"
#include "rt_buf.h"
#include "rt_err.h"
#include "rt_log.h"
#include "rt_time.h"
#include "rt_tls.h"

#define RT_RPC_DEFAULT_TIMEOUT_MS 5000
#define RT_RPC_TICK_MS 20
#define RT_RPC_BACKOFF_MIN_MS 50
#define RT_RPC_BACKOFF_MAX_MS 2000
#define RT_RPC_CONNECT_TIMEOUT_MS 3000
#define RT_RPC_READ_BUF (64 * 1024)
#define RT_RPC_WBUF_HINT_MAX (256 * 1024)
#define RT_RPC_HANDSHAKE_MS 5000

/* ------------------------------------------------------------------ */
/* Framing                                                             */
/* ------------------------------------------------------------------ */

static inline void put_u16be(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)(v >> 8);
    p[1] = (uint8_t)v;
}

static inline uint16_t get_u16be(const uint8_t *p)
{
    return (uint16_t)((p[0] << 8) | p[1]);
}

void rt_rpc_hdr_encode(const struct rt_rpc_hdr *h, uint8_t out[RT_RPC_HDR_SIZE])
{
    rt_put_u32be(out, h->len);
    put_u16be(out + 4, RT_RPC_MAGIC);
    out[6] = RT_RPC_VERSION;
    out[7] = h->flags;
    rt_put_u32be(out + 8, h->method);
    rt_put_u32be(out + 12, (uint32_t)h->status);
    rt_put_u64be(out + 16, h->id);
}

int rt_rpc_hdr_decode(const uint8_t in[RT_RPC_HDR_SIZE], struct rt_rpc_hdr *h)
{
    uint32_t len = rt_get_u32be(in);
    if (get_u16be(in + 4) != RT_RPC_MAGIC || in[6] != RT_RPC_VERSION ||
        len > RT_RPC_MAX_BODY) {
        return RT_EPROTO;
    }
    h->len = len;
    h->flags = in[7];
    h->method = rt_get_u32be(in + 8);
    h->status = (int32_t)rt_get_u32be(in + 12);
    h->id = rt_get_u64be(in + 16);
    return 0;
}

void rt_rpc_reader_init(struct rt_rpc_reader *r)
{
    memset(r, 0, sizeof(*r));
}

void rt_rpc_reader_close(struct rt_rpc_reader *r)
{
    free(r->body);
    r->body = NULL;
    r->body_have = 0;
    r->hdr_have = 0;
}

/* Delivers the buffered frame; the reader is reset before the callback so a
 * callback that stops the stream leaves a consistent state. */
static int reader_deliver(struct rt_rpc_reader *r,
                          rt_rpc_frame_cb cb,
                          void *arg)
{
    struct rt_rpc_hdr h = r->cur;
    uint8_t *body = r->body;
    int rc;

    r->body = NULL;
    r->body_have = 0;
    r->hdr_have = 0;
    rc = cb(&h, body ? body : r->hdr, arg);
    free(body);
    return rc;
}

int rt_rpc_reader_feed(struct rt_rpc_reader *r,
                       const uint8_t *data,
                       size_t n,
                       rt_rpc_frame_cb cb,
                       void *arg)
{
    int rc;

    if (r->failed) {
        return RT_EPROTO;
    }
    while (n > 0) {
        if (r->hdr_have < RT_RPC_HDR_SIZE) {
            if (r->hdr_have == 0 && n >= RT_RPC_HDR_SIZE) {
                /* Fast path: a whole frame inside the chunk is delivered
                 * without copying. */
                struct rt_rpc_hdr h;
                if (rt_rpc_hdr_decode(data, &h) != 0) {
                    r->failed = 1;
                    return RT_EPROTO;
                }
                if (n - RT_RPC_HDR_SIZE >= h.len) {
                    const uint8_t *body = data + RT_RPC_HDR_SIZE;
                    data += RT_RPC_HDR_SIZE + h.len;
                    n -= RT_RPC_HDR_SIZE + h.len;
                    rc = cb(&h, body, arg);
                    if (rc != 0) {
                        return rc;
                    }
                    continue;
                }
            }
            size_t take = RT_RPC_HDR_SIZE - r->hdr_have;
            if (take > n) {
                take = n;
            }
            memcpy(r->hdr + r->hdr_have, data, take);
            r->hdr_have += take;
            data += take;
            n -= take;
            if (r->hdr_have < RT_RPC_HDR_SIZE) {
                break;
            }
            if (rt_rpc_hdr_decode(r->hdr, &r->cur) != 0) {
                r->failed = 1;
                return RT_EPROTO;
            }
            if (r->cur.len == 0) {
                rc = reader_deliver(r, cb, arg);
                if (rc != 0) {
                    return rc;
                }
                continue;
            }
            r->body = rt_xmalloc(r->cur.len);
            r->body_have = 0;
            if (n == 0) {
                break;
            }
        }
        size_t take = r->cur.len - r->body_have;
        if (take > n) {
            take = n;
        }
        memcpy(r->body + r->body_have, data, take);
        r->body_have += take;
        data += take;
        n -= take;
        if (r->body_have == r->cur.len) {
            rc = reader_deliver(r, cb, arg);
            if (rc != 0) {
                return rc;
            }
        }
    }
    return 0;
}

/* ------------------------------------------------------------------ */
/* Types                                                               */
/* ------------------------------------------------------------------ */

struct rt_rpc_pending
{
    uint64_t id;
    uint64_t deadline; /* uv_now() ms */
    rt_rpc_reply_cb cb;
    void *arg;
    size_t heap_idx;
    uint64_t wseq;               /* conn->wseq when its frame was queued */
    int status;                  /* deferred completion status */
    struct rt_rpc_pending *next; /* deferred list link */
};

/* One TCP socket of a connection; replaced on reconnect. Freed in its close
 * callback. */
struct rt_rpc_sock
{
    uv_tcp_t tcp;
    uv_connect_t creq;
    struct rt_rpc_conn *conn;
    struct rt_rpc_reader reader;
    uint8_t *rbuf;
    int writing; /* a uv_write on this socket has not called back yet */
    int reading; /* uv_read_start done */
    /* TLS (NULL when plain): the SSL over two memory BIOs, and the
     * plaintext buffer SSL_read fills. */
    SSL *ssl;
    BIO *rbio; /* network -> SSL (owned by ssl) */
    BIO *wbio; /* SSL -> network (owned by ssl) */
    uint8_t *pbuf;
    int hs_done;  /* handshake complete and the peer's name accepted */
    int got_data; /* a client: application data arrived (backoff reset) */
};

struct rt_rpc_defer
{
    uv_timer_t timer;
    struct rt_rpc_conn *conn;
};

struct rt_rpc_wreq
{
    uv_write_t req;
    struct rt_rpc_sock *sock;
    uint8_t *data;
    size_t cap; /* data's allocated size; 0: not to be reused */
    int frames; /* 0: bytes TLS itself sends, outside the frame batches */
};

struct rt_rpc_conn
{
    uv_loop_t *loop;
    struct rt_rpc_server *srv; /* server-side conn (until detached) */
    struct rt_rpc_client *cli; /* client-side conn */
    struct rt_rpc_sock *sock;  /* established socket or NULL */
    struct rt_rpc_sock *hsock; /* server conn: socket still in handshake */
    int up;
    int retired;       /* owner is done; embedded handles closing/closed */
    int closing;       /* owner closing: calls fail with RT_ECANCELED */
    int refs;          /* owner + user refs */
    int nhandles;      /* handles not yet through their close callback */
    int report_unsent; /* calls never written fail RT_ENOTSENT */
    rt_rpc_request_cb on_request;
    rt_rpc_conn_cb on_conn;
    void *ud;
    void *data;
    char peer[64];
    char peer_name[RT_TLS_NAME_MAX]; /* verified certificate CN, or "" */
    unsigned peer_role;              /* its RT_RPC_ROLE_* bit, or 0 */
    uint64_t next_id;

    /* Pending calls: hash by id and min-heap by deadline. */
    struct rt_rpc_pending **ht;
    size_t ht_cap; /* power of two or 0 */
    size_t ht_len;
    struct rt_rpc_pending **heap;
    size_t heap_len;
    size_t heap_cap;
    uv_timer_t tmo;
    uv_prepare_t flush;

    /* Write buffer flushed once per loop iteration. */
    uint8_t *wbuf;
    size_t wlen;
    size_t wcap;
    size_t whint;
    /* A written batch's buffer kept for the next one: a busy connection
     * flushes every loop iteration, and a fresh buffer of that size each
     * time is a large malloc, which makes glibc consolidate its fast bins
     * (~2.5% of a front end's CPU on point GETs). At most one is kept. */
    uint8_t *wspare;
    size_t wspare_cap;
    uint64_t wseq;  /* batches handed to uv_write; the buffer holds the next */
    uint64_t wneed; /* output gate: the buffer leaves once have() >= this */
    int gparked;    /* on the gate's list of held connections */
    struct rt_rpc_conn *gprev, *gnext;

    /* Deferred completions. */
    struct rt_rpc_pending *defer_head;
    struct rt_rpc_pending *defer_tail;
    struct rt_rpc_defer *defer;

    struct rt_rpc_conn *prev; /* server list */
    struct rt_rpc_conn *next;
};

struct rt_rpc_server
{
    uv_loop_t *loop;
    uv_tcp_t tcp;
    rt_rpc_request_cb on_request;
    rt_rpc_conn_cb on_conn;
    void *ud;
    struct rt_tls *tls; /* rt_rpc_set_tls at start; NULL = plain */
    struct rt_rpc_conn *conns;
    int nconns; /* conns not yet detached */
    int listen_open;
    int closing;
};

struct rt_rpc_client
{
    struct rt_rpc_conn *conn;
    uv_timer_t timer;             /* reconnect backoff and connect timeout */
    struct rt_rpc_sock *csock;    /* connecting socket or NULL */
    struct sockaddr_storage addr; /* when numeric; else each resolution's */
    char addr_str[128];
    uint32_t backoff_ms;
    struct rt_tls *tls;    /* rt_rpc_set_tls at start; NULL = plain */
    unsigned expect_roles; /* server roles accepted (0 = any member) */
    int closing;
    int numeric;      /* addr_str names a numeric address */
    uint64_t attempt; /* connect attempts started, to match resolutions */
    size_t turn;      /* which of a name's addresses the next attempt uses */
};

/* A name being resolved for one connect attempt. It owns itself: the
 * callback frees it, and until then it holds a handle count on the client's
 * conn, so the client outlives it even if closed meanwhile. */
struct rt_rpc_resolve
{
    uv_getaddrinfo_t req;
    struct rt_rpc_client *c;
    uint64_t attempt;
};

static void conn_maybe_free(struct rt_rpc_conn *conn);
static void flush_cb(uv_prepare_t *h);
static void conn_drop(struct rt_rpc_conn *conn, int status);
static void fail_all_pending(struct rt_rpc_conn *conn, int status);
static void sock_close(struct rt_rpc_sock *sock);

/* A client conn whose connect attempt is in flight: calls made now are
 * queued and go out once it succeeds (a fresh client would otherwise fail
 * its first calls while the TCP handshake is still running). Calls made
 * while backing off after a failure still fail at once. */
static int conn_connecting(const struct rt_rpc_conn *conn)
{
    return conn->cli != NULL && conn->cli->csock != NULL && !conn->closing;
}

/* The connect attempt failed or was abandoned: what waited for it fails. */
static void conn_connect_failed(struct rt_rpc_conn *conn, int status)
{
    if (conn->sock == NULL) {
        conn->peer[0] = '\0'; /* a TLS handshake had named it: down now */
    }
    conn->wlen = 0;
    fail_all_pending(conn, status);
}
static void client_schedule_retry(struct rt_rpc_client *c);

/* ------------------------------------------------------------------ */
/* Pending calls: hash table                                           */
/* ------------------------------------------------------------------ */

static inline size_t ht_home(const struct rt_rpc_conn *conn, uint64_t id)
{
    uint64_t h = id * 0x9E3779B97F4A7C15ull;
    return (size_t)(h ^ (h >> 32)) & (conn->ht_cap - 1);
}

static void ht_insert_nogrow(struct rt_rpc_conn *conn, struct rt_rpc_pending *p)
{
    size_t mask = conn->ht_cap - 1;
    size_t i = ht_home(conn, p->id);
    while (conn->ht[i] != NULL) {
        i = (i + 1) & mask;
    }
    conn->ht[i] = p;
    conn->ht_len++;
}

static void ht_insert(struct rt_rpc_conn *conn, struct rt_rpc_pending *p)
{
    if ((conn->ht_len + 1) * 2 > conn->ht_cap) {
        struct rt_rpc_pending **old = conn->ht;
        size_t old_cap = conn->ht_cap;
        conn->ht_cap = old_cap ? old_cap * 2 : 64;
        conn->ht = rt_xcalloc(conn->ht_cap, sizeof(*conn->ht));
        conn->ht_len = 0;
        for (size_t i = 0; i < old_cap; i++) {
            if (old[i]) {
                ht_insert_nogrow(conn, old[i]);
            }
        }
        free(old);
    }
    ht_insert_nogrow(conn, p);
}

/* Removes and returns the call with @id, or NULL. Backward-shift deletion
 * keeps probe chains intact without tombstones. */
static struct rt_rpc_pending *ht_remove(struct rt_rpc_conn *conn, uint64_t id)
{
    if (conn->ht_len == 0) {
        return NULL;
    }
    size_t mask = conn->ht_cap - 1;
    size_t i = ht_home(conn, id);
    while (conn->ht[i] != NULL && conn->ht[i]->id != id) {
        i = (i + 1) & mask;
    }
    struct rt_rpc_pending *found = conn->ht[i];
    if (found == NULL) {
        return NULL;
    }
    size_t j = i;
    for (;;) {
        j = (j + 1) & mask;
        if (conn->ht[j] == NULL) {
            break;
        }
        size_t k = ht_home(conn, conn->ht[j]->id);
        /* Move ht[j] into the hole at i unless its home lies cyclically
         * in (i, j]. */
        int in_range = (i <= j) ? (i < k && k <= j) : (i < k || k <= j);
        if (!in_range) {
            conn->ht[i] = conn->ht[j];
            i = j;
        }
    }
    conn->ht[i] = NULL;
    conn->ht_len--;
    return found;
}

/* ------------------------------------------------------------------ */
/* Pending calls: deadline heap                                        */
/* ------------------------------------------------------------------ */

static void heap_set(struct rt_rpc_conn *conn,
                     size_t i,
                     struct rt_rpc_pending *p)
{
    conn->heap[i] = p;
    p->heap_idx = i;
}

static void heap_up(struct rt_rpc_conn *conn, size_t i)
{
    struct rt_rpc_pending *p = conn->heap[i];
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (conn->heap[parent]->deadline <= p->deadline) {
            break;
        }
        heap_set(conn, i, conn->heap[parent]);
        i = parent;
    }
    heap_set(conn, i, p);
}

static void heap_down(struct rt_rpc_conn *conn, size_t i)
{
    struct rt_rpc_pending *p = conn->heap[i];
    size_t n = conn->heap_len;
    for (;;) {
        size_t l = 2 * i + 1;
        size_t m = i;
        uint64_t best = p->deadline;
        if (l < n && conn->heap[l]->deadline < best) {
            m = l;
            best = conn->heap[l]->deadline;
        }
        if (l + 1 < n && conn->heap[l + 1]->deadline < best) {
            m = l + 1;
        }
        if (m == i) {
            break;
        }
        heap_set(conn, i, conn->heap[m]);
        i = m;
    }
    heap_set(conn, i, p);
}

static void heap_push(struct rt_rpc_conn *conn, struct rt_rpc_pending *p)
{
    if (conn->heap_len == conn->heap_cap) {
        conn->heap_cap = conn->heap_cap ? conn->heap_cap * 2 : 64;
        conn->heap =
            rt_xrealloc(conn->heap, conn->heap_cap * sizeof(*conn->heap));
    }
    conn->heap[conn->heap_len++] = p;
    heap_up(conn, conn->heap_len - 1);
}

static void heap_remove(struct rt_rpc_conn *conn, struct rt_rpc_pending *p)
{
    size_t i = p->heap_idx;
    RT_PRE(i < conn->heap_len && conn->heap[i] == p);
    conn->heap_len--;
    if (i == conn->heap_len) {
        return;
    }
    struct rt_rpc_pending *q = conn->heap[conn->heap_len];
    heap_set(conn, i, q);
    heap_down(conn, i);
    if (q->heap_idx == i) {
        heap_up(conn, i);
    }
}

/* ------------------------------------------------------------------ */
/* Deferred completions                                                */
/* ------------------------------------------------------------------ */

static void defer_close_cb(uv_handle_t *h)
{
    struct rt_rpc_defer *d = container_of(h, struct rt_rpc_defer, timer);
    struct rt_rpc_conn *conn = d->conn;
    free(d);
    conn->nhandles--;
    conn_maybe_free(conn);
}

static void defer_timer_cb(uv_timer_t *t)
{
    struct rt_rpc_defer *d = container_of(t, struct rt_rpc_defer, timer);
    struct rt_rpc_conn *conn = d->conn;
    struct rt_rpc_pending *p = conn->defer_head;

    /* Detach the batch first: callbacks may queue more (into a new timer). */
    conn->defer_head = NULL;
    conn->defer_tail = NULL;
    conn->defer = NULL;
    uv_close((uv_handle_t *)&d->timer, defer_close_cb);
    while (p) {
        struct rt_rpc_pending *next = p->next;
        p->cb(p->status, NULL, 0, p->arg);
        free(p);
        p = next;
    }
}

/* Queues @p to complete with @status on a later loop iteration. */
static void defer_push(struct rt_rpc_conn *conn,
                       struct rt_rpc_pending *p,
                       int status)
{
    p->status = status;
    p->next = NULL;
    if (conn->defer_tail) {
        conn->defer_tail->next = p;
    } else {
        conn->defer_head = p;
    }
    conn->defer_tail = p;
    if (conn->defer == NULL) {
        struct rt_rpc_defer *d = rt_xmalloc(sizeof(*d));
        d->conn = conn;
        uv_timer_init(conn->loop, &d->timer);
        conn->nhandles++;
        uv_timer_start(&d->timer, defer_timer_cb, 0, 0);
        conn->defer = d;
    }
}

/* The status a call failed by a lost connection completes with: a call
 * whose frame never reached the socket (its batch is still the buffer's)
 * is RT_ENOTSENT when the conn reports it, any other RT_ENOCONN; other
 * statuses are kept. */
static int call_status(const struct rt_rpc_conn *conn,
                       const struct rt_rpc_pending *p,
                       int status)
{
    if (status == RT_ENOCONN && conn->report_unsent && p->wseq == conn->wseq) {
        return RT_ENOTSENT;
    }
    return status;
}

/* Moves every pending call to the deferred queue with @status (see
 * call_status). */
static void fail_all_pending(struct rt_rpc_conn *conn, int status)
{
    size_t n = conn->heap_len;
    struct rt_rpc_pending **heap = conn->heap;
    if (n == 0) {
        return;
    }
    conn->heap_len = 0;
    memset(conn->ht, 0, conn->ht_cap * sizeof(*conn->ht));
    conn->ht_len = 0;
    for (size_t i = 0; i < n; i++) {
        defer_push(conn, heap[i], call_status(conn, heap[i], status));
    }
    uv_timer_stop(&conn->tmo);
}

/* ------------------------------------------------------------------ */
/* Timeouts                                                            */
/* ------------------------------------------------------------------ */

static void tmo_cb(uv_timer_t *t)
{
    struct rt_rpc_conn *conn = container_of(t, struct rt_rpc_conn, tmo);
    uint64_t now = uv_now(conn->loop);

    while (conn->heap_len > 0 && conn->heap[0]->deadline <= now) {
        struct rt_rpc_pending *p = conn->heap[0];
        heap_remove(conn, p);
        ht_remove(conn, p->id);
        rt_log(RT_LOG_DEBUG, "rpc: call %llu to %s timed out",
               (unsigned long long)p->id, conn->peer);
        p->cb(RT_ETIMEDOUT, NULL, 0, p->arg);
        free(p);
    }
    if (conn->heap_len == 0 && !conn->retired) {
        uv_timer_stop(&conn->tmo);
    }
}

/* ------------------------------------------------------------------ */
/* Output gate                                                         */
/* ------------------------------------------------------------------ */

/* One per process (rt_rpc_gate_set); the loop is single-threaded. */
static struct
{
    struct rt_rpc_gate g;
    int on;
    struct rt_rpc_conn *held; /* connections whose buffer waits */
} gate;

static void gate_unpark(struct rt_rpc_conn *conn)
{
    if (!conn->gparked) {
        return;
    }
    if (conn->gprev) {
        conn->gprev->gnext = conn->gnext;
    } else {
        gate.held = conn->gnext;
    }
    if (conn->gnext) {
        conn->gnext->gprev = conn->gprev;
    }
    conn->gprev = conn->gnext = NULL;
    conn->gparked = 0;
}

static void gate_park(struct rt_rpc_conn *conn)
{
    if (conn->gparked) {
        return;
    }
    conn->gparked = 1;
    conn->gprev = NULL;
    conn->gnext = gate.held;
    if (gate.held) {
        gate.held->gprev = conn;
    }
    gate.held = conn;
}

/* 1 when @conn's buffer must wait for the gate. */
static int gate_holds(const struct rt_rpc_conn *conn)
{
    return gate.on && conn->wneed > gate.g.have(gate.g.ud);
}

void rt_rpc_gate_set(const struct rt_rpc_gate *g)
{
    if (g) {
        gate.g = *g;
        gate.on = 1;
        return;
    }
    gate.on = 0;
    rt_rpc_gate_release();
}

void rt_rpc_gate_release(void)
{
    struct rt_rpc_conn *conn = gate.held, *next;

    for (; conn; conn = next) {
        next = conn->gnext;
        if (conn->retired) {
            gate_unpark(conn);
        } else if (!gate_holds(conn)) {
            gate_unpark(conn);
            uv_prepare_start(&conn->flush, flush_cb);
        }
    }
}

/* ------------------------------------------------------------------ */
/* Writes                                                              */
/* ------------------------------------------------------------------ */

static void write_cb(uv_write_t *req, int status)
{
    struct rt_rpc_wreq *w = container_of(req, struct rt_rpc_wreq, req);
    struct rt_rpc_sock *sock = w->sock;
    struct rt_rpc_conn *conn = sock->conn;

    int frames = w->frames;
    if (frames && w->cap && !conn->wspare && !conn->retired &&
        w->cap <= RT_RPC_WBUF_HINT_MAX) {
        conn->wspare = w->data;
        conn->wspare_cap = w->cap;
    } else {
        free(w->data);
    }
    free(w);
    if (!frames) {
        /* A TLS record of its own (handshake, alert): a failure shows up
         * on the read side or as the handshake's timeout too. */
        if (status < 0 && conn->sock == sock) {
            conn_drop(conn, RT_ENOCONN);
        }
        return;
    }
    sock->writing = 0;
    if (conn->sock != sock) {
        return;
    }
    if (status < 0) {
        rt_log(RT_LOG_INFO, "rpc: write to %s failed: %s", conn->peer,
               uv_strerror(status));
        conn_drop(conn, RT_ENOCONN);
    } else if (conn->wlen > 0) {
        uv_prepare_start(&conn->flush, flush_cb);
    }
}

static void flush_cb(uv_prepare_t *h)
{
    struct rt_rpc_conn *conn = container_of(h, struct rt_rpc_conn, flush);
    uv_prepare_stop(h);
    if (conn->sock == NULL && conn_connecting(conn)) {
        return; /* conn_set_up() flushes once connected */
    }
    if (conn->wlen == 0 || conn->sock == NULL) {
        conn->wlen = 0;
        return;
    }
    if (conn->sock->writing) {
        return; /* write_cb flushes what gathered meanwhile */
    }
    if (gate_holds(conn)) {
        gate_park(conn); /* rt_rpc_gate_release() flushes it */
        return;
    }
    struct rt_rpc_wreq *w = rt_xmalloc(sizeof(*w));
    w->sock = conn->sock;
    w->frames = 1;
    w->data = conn->wbuf;
    w->cap = conn->wcap;
    uv_buf_t buf = uv_buf_init((char *)conn->wbuf, (unsigned)conn->wlen);
    conn->whint =
        conn->wlen < RT_RPC_WBUF_HINT_MAX ? conn->wlen : RT_RPC_WBUF_HINT_MAX;
    if (conn->sock->ssl) {
        /* The memory BIO grows as needed, so SSL_write takes the whole
         * batch at once; what it produced is this batch's one write. The
         * plaintext buffer stays with the connection for the next batch. */
        int wn = SSL_write(conn->sock->ssl, conn->wbuf, (int)conn->wlen);
        if (wn != (int)conn->wlen) {
            free(w);
            free(conn->wbuf);
            conn->wbuf = NULL;
            conn->wlen = conn->wcap = 0;
            rt_log(RT_LOG_WARN, "rpc: TLS write to %s failed", conn->peer);
            ERR_clear_error();
            conn_drop(conn, RT_ENOCONN);
            return;
        }
        conn->wlen = 0;
        if (conn->wcap > RT_RPC_WBUF_HINT_MAX) {
            free(conn->wbuf); /* an outsized batch's buffer is not kept */
            conn->wbuf = NULL;
            conn->wcap = 0;
        }
        size_t n = BIO_ctrl_pending(conn->sock->wbio);
        if (conn->wspare && conn->wspare_cap >= n) {
            w->data = conn->wspare;
            w->cap = conn->wspare_cap;
            conn->wspare = NULL;
        } else {
            w->data = rt_xmalloc(n);
            w->cap = n;
        }
        (void)BIO_read(conn->sock->wbio, w->data, (int)n);
        buf = uv_buf_init((char *)w->data, (unsigned)n);
    } else {
        /* uv_write owns the buffer until write_cb, which keeps it as the
         * spare the next batch starts from. */
        conn->wbuf = NULL;
        conn->wlen = 0;
        conn->wcap = 0;
    }
    int rc = uv_write(&w->req, (uv_stream_t *)&w->sock->tcp, &buf, 1, write_cb);
    if (rc < 0) {
        /* Refused before any byte was written: the batch's calls stay
         * unsent (wseq unchanged). */
        free(w->data);
        free(w);
        rt_log(RT_LOG_INFO, "rpc: write to %s failed: %s", conn->peer,
               uv_strerror(rc));
        conn_drop(conn, RT_ENOCONN);
        return;
    }
    w->sock->writing = 1;
    conn->wseq++;
}

/* Appends one frame to the write buffer and arms the flush. @h->len must
 * be @plen + @len: the body is @pre (a request-id prefix, may be empty)
 * followed by @body. */
static void queue_frame2(struct rt_rpc_conn *conn,
                         const struct rt_rpc_hdr *h,
                         const uint8_t *pre,
                         size_t plen,
                         const uint8_t *body,
                         size_t len)
{
    size_t need = conn->wlen + RT_RPC_HDR_SIZE + plen + len;
    if (!conn->wbuf && conn->wspare) {
        conn->wbuf = conn->wspare;
        conn->wcap = conn->wspare_cap;
        conn->wspare = NULL;
    }
    if (need > conn->wcap) {
        size_t cap =
            conn->wcap ? conn->wcap : (conn->whint > 4096 ? conn->whint : 4096);
        while (cap < need) {
            cap *= 2;
        }
        conn->wbuf = rt_xrealloc(conn->wbuf, cap);
        conn->wcap = cap;
    }
    rt_rpc_hdr_encode(h, conn->wbuf + conn->wlen);
    if (plen) {
        memcpy(conn->wbuf + conn->wlen + RT_RPC_HDR_SIZE, pre, plen);
    }
    if (len) {
        memcpy(conn->wbuf + conn->wlen + RT_RPC_HDR_SIZE + plen, body, len);
    }
    conn->wlen = need;
    if (gate.on) {
        uint64_t t = gate.g.need(gate.g.ud);
        if (t > conn->wneed) {
            conn->wneed = t;
        }
    }
    if (!uv_is_active((uv_handle_t *)&conn->flush)) {
        uv_prepare_start(&conn->flush, flush_cb);
    }
}

static void queue_frame(struct rt_rpc_conn *conn,
                        const struct rt_rpc_hdr *h,
                        const uint8_t *body,
                        size_t len)
{
    queue_frame2(conn, h, NULL, 0, body, len);
}

/* ------------------------------------------------------------------ */
/* Conn lifecycle                                                      */
/* ------------------------------------------------------------------ */

static void conn_handle_close_cb(uv_handle_t *h)
{
    struct rt_rpc_conn *conn = h->data;
    conn->nhandles--;
    conn_maybe_free(conn);
}

static struct rt_rpc_conn *conn_new(uv_loop_t *loop,
                                    rt_rpc_request_cb on_request,
                                    rt_rpc_conn_cb on_conn,
                                    void *ud)
{
    struct rt_rpc_conn *conn = rt_xcalloc(1, sizeof(*conn));
    conn->loop = loop;
    conn->on_request = on_request;
    conn->on_conn = on_conn;
    conn->ud = ud;
    conn->refs = 1;
    conn->next_id = 1;
    uv_timer_init(loop, &conn->tmo);
    conn->tmo.data = conn;
    uv_prepare_init(loop, &conn->flush);
    conn->flush.data = conn;
    conn->nhandles = 2;
    return conn;
}

static void srv_maybe_free(struct rt_rpc_server *srv)
{
    if (srv->closing && !srv->listen_open && srv->nconns == 0) {
        free(srv);
    }
}

static void conn_maybe_free(struct rt_rpc_conn *conn)
{
    if (!conn->retired || conn->nhandles > 0) {
        return;
    }
    if (conn->srv) {
        struct rt_rpc_server *srv = conn->srv;
        if (conn->prev) {
            conn->prev->next = conn->next;
        } else {
            srv->conns = conn->next;
        }
        if (conn->next) {
            conn->next->prev = conn->prev;
        }
        conn->prev = conn->next = NULL;
        conn->srv = NULL;
        srv->nconns--;
        srv_maybe_free(srv);
    }
    if (conn->refs > 0) {
        return;
    }
    RT_PRE(conn->heap_len == 0 && conn->defer_head == NULL);
    gate_unpark(conn);
    free(conn->cli);
    free(conn->ht);
    free(conn->heap);
    free(conn->wbuf);
    free(conn->wspare);
    free(conn);
}

/* The owner is done with @conn: close its embedded handles and drop the
 * owner's reference. */
static void conn_retire(struct rt_rpc_conn *conn)
{
    if (conn->retired) {
        return;
    }
    conn->retired = 1;
    conn->closing = 1;
    if (conn->hsock) {
        sock_close(conn->hsock);
        conn->hsock = NULL;
    }
    fail_all_pending(conn, RT_ECANCELED);
    uv_close((uv_handle_t *)&conn->tmo, conn_handle_close_cb);
    uv_close((uv_handle_t *)&conn->flush, conn_handle_close_cb);
    free(conn->wbuf);
    conn->wbuf = NULL;
    conn->wlen = conn->wcap = 0;
    free(conn->wspare);
    conn->wspare = NULL;
    conn->refs--;
    conn_maybe_free(conn);
}

static void sock_close_cb(uv_handle_t *h)
{
    struct rt_rpc_sock *sock = container_of(h, struct rt_rpc_sock, tcp);
    struct rt_rpc_conn *conn = sock->conn;
    rt_rpc_reader_close(&sock->reader);
    free(sock->rbuf);
    SSL_free(sock->ssl); /* frees both BIOs */
    free(sock->pbuf);
    free(sock);
    conn->nhandles--;
    conn_maybe_free(conn);
}

static struct rt_rpc_sock *sock_new(struct rt_rpc_conn *conn)
{
    struct rt_rpc_sock *sock = rt_xcalloc(1, sizeof(*sock));
    sock->conn = conn;
    rt_rpc_reader_init(&sock->reader);
    uv_tcp_init(conn->loop, &sock->tcp);
    conn->nhandles++;
    return sock;
}

static void sock_close(struct rt_rpc_sock *sock)
{
    if (!uv_is_closing((uv_handle_t *)&sock->tcp)) {
        uv_close((uv_handle_t *)&sock->tcp, sock_close_cb);
    }
}

/* Tears the socket down: pending calls complete with @status (later tick),
 * queued frames are discarded, on_conn(down) fires if it was up. Server
 * conns are retired; client conns schedule a reconnect. */
static void conn_drop(struct rt_rpc_conn *conn, int status)
{
    struct rt_rpc_sock *sock = conn->sock;
    int was_up = conn->up;

    if (sock == NULL) {
        return;
    }
    conn->sock = NULL;
    conn->up = 0;
    uv_read_stop((uv_stream_t *)&sock->tcp);
    sock_close(sock);
    conn->wlen = 0;
    fail_all_pending(conn, status);
    if (was_up) {
        rt_log(conn->srv ? RT_LOG_DEBUG : RT_LOG_INFO,
               "rpc: connection %s %s down", conn->srv ? "from" : "to",
               conn->peer);
    }
    conn->peer[0] = '\0';
    conn->peer_name[0] = '\0';
    conn->peer_role = 0;
    /* Keep @conn alive across the user callback. */
    conn->refs++;
    if (was_up && conn->on_conn) {
        conn->on_conn(conn, 0, conn->ud);
    }
    if (conn->srv) {
        conn_retire(conn);
    } else if (conn->cli && !conn->cli->closing) {
        client_schedule_retry(conn->cli);
    }
    conn->refs--;
    conn_maybe_free(conn);
}

/* ------------------------------------------------------------------ */
/* Reading                                                             */
/* ------------------------------------------------------------------ */

static void tls_handshake_read(struct rt_rpc_sock *sock, ssize_t nread);
static int tls_read_frames(struct rt_rpc_sock *sock, size_t n);

/* Runs the request callback with the sender's request id, if any, as this
 * thread's log request id (restoring the previous one after). */
static void deliver_request(struct rt_rpc_conn *conn,
                            const struct rt_rpc_hdr *h,
                            const uint8_t *body)
{
    char prev[RT_RPC_REQID_MAX + 1];
    char id[RT_RPC_REQID_MAX + 1];
    size_t n;

    if (!(h->flags & RT_RPC_F_REQID)) {
        conn->on_request(conn, h->method, h->id, body, h->len, conn->ud);
        return;
    }
    n = h->len ? body[0] : 0;
    if (h->len == 0 || n == 0 || n > RT_RPC_REQID_MAX || n + 1 > h->len ||
        memchr(body + 1, '\0', n)) {
        rt_rpc_reply_err(conn, h->id, h->method, RT_EPROTO,
                         "malformed request id prefix");
        return;
    }
    memcpy(id, body + 1, n);
    id[n] = '\0';
    snprintf(prev, sizeof(prev), "%s", rt_log_reqid());
    rt_log_set_reqid(id);
    conn->on_request(conn, h->method, h->id, body + 1 + n, h->len - 1 - n,
                     conn->ud);
    rt_log_set_reqid(prev[0] ? prev : NULL);
}

static int frame_cb(const struct rt_rpc_hdr *h, const uint8_t *body, void *arg)
{
    struct rt_rpc_sock *sock = arg;
    struct rt_rpc_conn *conn = sock->conn;

    if (h->flags & RT_RPC_F_REPLY) {
        struct rt_rpc_pending *p = h->id ? ht_remove(conn, h->id) : NULL;
        if (p == NULL) {
            rt_log(RT_LOG_DEBUG, "rpc: reply %llu from %s matches no call",
                   (unsigned long long)h->id, conn->peer);
        } else {
            heap_remove(conn, p);
            if (conn->heap_len == 0) {
                uv_timer_stop(&conn->tmo);
            }
            p->cb(h->status, body, h->len, p->arg);
            free(p);
        }
    } else if (conn->on_request) {
        deliver_request(conn, h, body);
    } else {
        rt_rpc_reply_err(conn, h->id, h->method, RT_ENOTIMPL,
                         "no request handler on this connection");
    }
    /* Stop when a callback dropped or closed the connection. */
    return conn->sock == sock ? 0 : 1;
}

static void alloc_cb(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    struct rt_rpc_sock *sock = container_of(h, struct rt_rpc_sock, tcp);
    (void)suggested;
    if (sock->rbuf == NULL) {
        sock->rbuf = rt_xmalloc(RT_RPC_READ_BUF);
    }
    *buf = uv_buf_init((char *)sock->rbuf, RT_RPC_READ_BUF);
}

static void read_cb(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
    struct rt_rpc_sock *sock = container_of(s, struct rt_rpc_sock, tcp);
    struct rt_rpc_conn *conn = sock->conn;
    (void)buf;

    if (sock->ssl && !sock->hs_done) {
        tls_handshake_read(sock, nread);
        return;
    }
    if (conn->sock != sock) {
        return;
    }
    if (nread < 0) {
        if (nread != UV_EOF) {
            rt_log(RT_LOG_DEBUG, "rpc: read from %s: %s", conn->peer,
                   uv_strerror((int)nread));
        }
        conn_drop(conn, RT_ENOCONN);
        return;
    }
    if (nread == 0) {
        return;
    }
    /* Keep @conn alive even if a callback unrefs it. */
    conn->refs++;
    int rc;
    if (sock->ssl) {
        rc = tls_read_frames(sock, (size_t)nread);
    } else {
        rc = rt_rpc_reader_feed(&sock->reader, sock->rbuf, (size_t)nread,
                                frame_cb, sock);
    }
    if (rc == RT_EPROTO && conn->sock == sock) {
        rt_log(RT_LOG_WARN, "rpc: framing error from %s, closing", conn->peer);
        conn_drop(conn, RT_ENOCONN);
    }
    conn->refs--;
    conn_maybe_free(conn);
}

static void conn_fill_peer(struct rt_rpc_conn *conn, struct rt_rpc_sock *sock)
{
    struct sockaddr_storage ss;
    int len = sizeof(ss);
    char ip[INET6_ADDRSTRLEN] = "";
    int port = 0;

    conn->peer[0] = '\0';
    if (uv_tcp_getpeername(&sock->tcp, (struct sockaddr *)&ss, &len) == 0) {
        if (ss.ss_family == AF_INET6) {
            const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)&ss;
            uv_ip6_name(a, ip, sizeof(ip));
            port = ntohs(a->sin6_port);
            snprintf(conn->peer, sizeof(conn->peer), "[%s]:%d", ip, port);
        } else {
            const struct sockaddr_in *a = (const struct sockaddr_in *)&ss;
            uv_ip4_name(a, ip, sizeof(ip));
            port = ntohs(a->sin_port);
            snprintf(conn->peer, sizeof(conn->peer), "%s:%d", ip, port);
        }
    }
}

static void sock_read_start(struct rt_rpc_sock *sock)
{
    if (!sock->reading) {
        sock->reading = 1;
        uv_read_start((uv_stream_t *)&sock->tcp, alloc_cb, read_cb);
    }
}

static void conn_set_up(struct rt_rpc_conn *conn, struct rt_rpc_sock *sock)
{
    conn->sock = sock;
    conn->up = 1;
    uv_tcp_nodelay(&sock->tcp, 1);
    if (sock->ssl == NULL) {
        conn_fill_peer(conn, sock);
    }
    sock_read_start(sock);
    if (conn->wlen > 0) {
        uv_prepare_start(&conn->flush, flush_cb);
    }
}

/* ------------------------------------------------------------------ */
/* TLS                                                                 */
/* ------------------------------------------------------------------ */

/* Set in main() before any loop thread starts; each server and client
 * keeps the value in force when it was created. */
static struct rt_tls *g_tls;
static uint64_t g_tls_refused;    /* atomic: connections refused */
static uint64_t g_tls_warn_ms;    /* atomic: time of the last warning */
static uint64_t g_tls_warn_quiet; /* atomic: refusals not logged since */

void rt_rpc_set_tls(struct rt_tls *tls)
{
    g_tls = tls;
}

int rt_rpc_tls_flags(const char *prog,
                     const char *dir,
                     int insecure,
                     struct rt_tls **out)
{
    char err[512];
    int has_dir = dir != NULL && dir[0] != '\0';
    *out = NULL;
    if (has_dir && insecure) {
        fprintf(stderr,
                "%s: --cluster-tls and --insecure-rpc exclude each other\n",
                prog);
        return -1;
    }
    if (!has_dir && !insecure) {
        fprintf(stderr,
                "%s: --cluster-tls DIR is required (this node's ca.crt, "
                "node.crt, node.key: rtctl cluster init); --insecure-rpc "
                "runs the cluster RPC unauthenticated instead\n",
                prog);
        return -1;
    }
    if (!has_dir) {
        rt_log(RT_LOG_WARN,
               "cluster RPC is unauthenticated and unencrypted "
               "(--insecure-rpc): anyone who reaches an RPC port can read "
               "and change all data; use --cluster-tls off a trusted "
               "loopback");
        return 0;
    }
    struct rt_tls *t = NULL;
    if (rt_tls_load(dir, &t, err, sizeof(err)) != 0) {
        fprintf(stderr, "%s: --cluster-tls %s: %s\n", prog, dir, err);
        return -1;
    }
    rt_rpc_set_tls(t);
    rt_log(RT_LOG_INFO, "cluster RPC: mutual TLS as %s (credentials %s)",
           rt_tls_self_name(t), dir);
    *out = t;
    return 0;
}

uint64_t rt_rpc_tls_refused(void)
{
    return __atomic_load_n(&g_tls_refused, __ATOMIC_RELAXED);
}

/* 1 when a warning may be logged now (at most once a second per @last_ms;
 * a scanner or a misconfigured node must not flood the log), with
 * *@quiet_out the number suppressed since the last one; 0 after counting
 * this one as suppressed. Thread-safe. */
static int warn_ratelimit(uint64_t *last_ms,
                          uint64_t *quiet,
                          uint64_t *quiet_out)
{
    uint64_t now = rt_time_mono_ms() + 1; /* never 0, the "never" mark */
    uint64_t last = __atomic_load_n(last_ms, __ATOMIC_RELAXED);
    if ((last != 0 && now - last < 1000) ||
        !__atomic_compare_exchange_n(last_ms, &last, now, 0, __ATOMIC_RELAXED,
                                     __ATOMIC_RELAXED)) {
        __atomic_add_fetch(quiet, 1, __ATOMIC_RELAXED);
        return 0;
    }
    *quiet_out = __atomic_exchange_n(quiet, 0, __ATOMIC_RELAXED);
    return 1;
}

/* Counts a connection refused by TLS and warns about it (rate-limited),
 * saying how many went unlogged meanwhile. @why is OpenSSL's reason text,
 * never key material. */
static void tls_refused(const char *dir, const char *peer, const char *why)
{
    uint64_t total = __atomic_add_fetch(&g_tls_refused, 1, __ATOMIC_RELAXED);
    uint64_t quiet;
    if (!warn_ratelimit(&g_tls_warn_ms, &g_tls_warn_quiet, &quiet)) {
        return;
    }
    rt_log(RT_LOG_WARN,
           "rpc: TLS: refused connection %s %s: %s (%llu refused since "
           "start, %llu not logged since the last such line)",
           dir, peer, why, (unsigned long long)total,
           (unsigned long long)quiet);
}

/* Hands whatever TLS wants to send (handshake flights, alerts) to its own
 * uv_write; libuv keeps writes in order, so these never overtake or split
 * a batch of frames. */
static void tls_send_pending(struct rt_rpc_sock *sock)
{
    size_t n = BIO_ctrl_pending(sock->wbio);
    if (n == 0 || uv_is_closing((uv_handle_t *)&sock->tcp)) {
        return;
    }
    struct rt_rpc_wreq *w = rt_xmalloc(sizeof(*w));
    w->sock = sock;
    w->frames = 0;
    w->data = rt_xmalloc(n);
    (void)BIO_read(sock->wbio, w->data, (int)n);
    uv_buf_t b = uv_buf_init((char *)w->data, (unsigned)n);
    if (uv_write(&w->req, (uv_stream_t *)&sock->tcp, &b, 1, write_cb) < 0) {
        free(w->data);
        free(w);
    }
}

/* The handshake on @sock failed: a server conn is closed before any
 * request was read; a client counts it as a failed connect (what waited
 * for it fails RT_ENOTSENT/RT_ENOCONN) and retries with backoff. */
static void tls_handshake_failed(struct rt_rpc_sock *sock,
                                 const char *why,
                                 int verify_error)
{
    struct rt_rpc_conn *conn = sock->conn;
    if (conn->hsock == sock) {
        tls_refused("from", conn->peer, why);
        conn->hsock = NULL;
        uv_timer_stop(&conn->tmo);
        sock_close(sock);
        conn_retire(conn);
    } else if (conn->cli && conn->cli->csock == sock) {
        struct rt_rpc_client *c = conn->cli;
        if (verify_error) {
            tls_refused("to", c->addr_str, why);
        } else {
            rt_log(RT_LOG_DEBUG, "rpc: TLS handshake with %s: %s", c->addr_str,
                   why);
        }
        c->csock = NULL;
        sock_close(sock);
        conn_connect_failed(conn, RT_ENOCONN);
        client_schedule_retry(c);
    }
}

static void client_up(struct rt_rpc_client *c, struct rt_rpc_sock *sock);
static void srv_conn_up(struct rt_rpc_conn *conn, struct rt_rpc_sock *sock);

/* One step of the handshake: 1 when it completed and the peer's
 * certificate names a role (the socket is now the conn's), 0 when it
 * waits for more bytes, -1 when it failed (handled). */
static int tls_handshake_step(struct rt_rpc_sock *sock)
{
    struct rt_rpc_conn *conn = sock->conn;
    char why[256];
    ERR_clear_error();
    int r = SSL_do_handshake(sock->ssl);
    tls_send_pending(sock); /* our next flight, or the alert we fail with */
    if (r == 1) {
        char name[RT_TLS_NAME_MAX], role[RT_TLS_ROLE_MAX], nm[RT_TLS_NAME_MAX];
        if (rt_tls_peer_name(sock->ssl, name, sizeof(name)) != 0 ||
            rt_tls_name_split(name, role, sizeof(role), nm, sizeof(nm)) != 0) {
            tls_handshake_failed(sock, "peer certificate's CN is not ROLE:NAME",
                                 1);
            return -1;
        }
        unsigned role_bit = !strcmp(role, "master") ? RT_RPC_ROLE_MASTER
                            : !strcmp(role, "ps")   ? RT_RPC_ROLE_PS
                            : !strcmp(role, "fe")   ? RT_RPC_ROLE_FE
                                                    : RT_RPC_ROLE_ADMIN;
        if (conn->hsock != sock && conn->cli->expect_roles != 0 &&
            !(role_bit & conn->cli->expect_roles)) {
            snprintf(why, sizeof(why),
                     "server certificate %s has a role this client does "
                     "not talk to",
                     name);
            tls_handshake_failed(sock, why, 1);
            return -1;
        }
        sock->hs_done = 1;
        snprintf(conn->peer_name, sizeof(conn->peer_name), "%s", name);
        conn->peer_role = role_bit;
        if (conn->hsock == sock) {
            conn->hsock = NULL;
            uv_timer_stop(&conn->tmo);
            srv_conn_up(conn, sock);
        } else {
            client_up(conn->cli, sock);
        }
        return 1;
    }
    int e = SSL_get_error(sock->ssl, r);
    if (e == SSL_ERROR_WANT_READ) {
        return 0;
    }
    long v = SSL_get_verify_result(sock->ssl);
    unsigned long ee = ERR_peek_error();
    const char *reason = ee ? ERR_reason_error_string(ee) : NULL;
    if (v != X509_V_OK) {
        snprintf(why, sizeof(why), "certificate verify failed: %s",
                 X509_verify_cert_error_string(v));
    } else {
        snprintf(why, sizeof(why), "%s",
                 reason ? reason
                        : (e == SSL_ERROR_SYSCALL ? "connection lost"
                                                  : "handshake failed"));
    }
    ERR_clear_error();
    tls_handshake_failed(sock, why, e == SSL_ERROR_SSL);
    return -1;
}

static void tls_hs_timeout_cb(uv_timer_t *t)
{
    struct rt_rpc_conn *conn = container_of(t, struct rt_rpc_conn, tmo);
    if (conn->hsock) {
        tls_handshake_failed(conn->hsock,
                             "no TLS handshake within 5 s (closed)", 1);
    }
}

/* Puts @sock under TLS and starts reading; a client sends its hello. */
static void tls_start(struct rt_rpc_sock *sock, struct rt_tls *tls, int server)
{
    sock->ssl =
        SSL_new(server ? rt_tls_server_ctx(tls) : rt_tls_client_ctx(tls));
    sock->rbio = BIO_new(BIO_s_mem());
    sock->wbio = BIO_new(BIO_s_mem());
    if (sock->ssl == NULL || sock->rbio == NULL || sock->wbio == NULL) {
        rt_log(RT_LOG_FATAL, "rpc: out of memory for a TLS session");
        abort();
    }
    /* An empty read BIO means "wait for more bytes", not end of stream. */
    BIO_set_mem_eof_return(sock->rbio, -1);
    BIO_set_mem_eof_return(sock->wbio, -1);
    SSL_set_bio(sock->ssl, sock->rbio, sock->wbio);
    if (server) {
        SSL_set_accept_state(sock->ssl);
    } else {
        SSL_set_connect_state(sock->ssl);
    }
    uv_tcp_nodelay(&sock->tcp, 1);
    sock_read_start(sock);
    if (!server) {
        (void)tls_handshake_step(sock);
    }
}

/* Decrypts what arrived (@n new bytes in rbuf, may be 0) and feeds the
 * frame reader. Returns 0, RT_EPROTO (framing error, the caller closes),
 * or 1 when the connection was dropped here or by a callback. */
static int tls_read_frames(struct rt_rpc_sock *sock, size_t n)
{
    struct rt_rpc_conn *conn = sock->conn;
    if (n > 0) {
        (void)BIO_write(sock->rbio, sock->rbuf, (int)n);
    }
    if (sock->pbuf == NULL) {
        sock->pbuf = rt_xmalloc(RT_RPC_READ_BUF);
    }
    for (;;) {
        ERR_clear_error();
        int r = SSL_read(sock->ssl, sock->pbuf, RT_RPC_READ_BUF);
        if (r > 0) {
            if (conn->cli && !sock->got_data) {
                /* Only a peer that talks to us proves the connection good:
                 * a server refusing our certificate closes right after our
                 * side of the handshake, and must not make us retry at the
                 * shortest interval forever. */
                sock->got_data = 1;
                conn->cli->backoff_ms = RT_RPC_BACKOFF_MIN_MS;
            }
            int rc = rt_rpc_reader_feed(&sock->reader, sock->pbuf, (size_t)r,
                                        frame_cb, sock);
            if (rc != 0) {
                return rc;
            }
            continue;
        }
        int e = SSL_get_error(sock->ssl, r);
        if (conn->sock == sock) {
            tls_send_pending(sock);
        }
        if (e == SSL_ERROR_WANT_READ) {
            return 0;
        }
        unsigned long ee = ERR_peek_error();
        const char *reason = ee ? ERR_reason_error_string(ee) : NULL;
        rt_log(e == SSL_ERROR_ZERO_RETURN ? RT_LOG_DEBUG : RT_LOG_WARN,
               "rpc: TLS connection %s %s ended: %s", conn->srv ? "from" : "to",
               conn->peer,
               reason ? reason
                      : (e == SSL_ERROR_ZERO_RETURN ? "closed by peer"
                                                    : "connection lost"));
        ERR_clear_error();
        conn_drop(conn, RT_ENOCONN);
        return 1;
    }
}

/* Bytes (or the end) arrived on a socket still in its handshake. */
static void tls_handshake_read(struct rt_rpc_sock *sock, ssize_t nread)
{
    struct rt_rpc_conn *conn = sock->conn;
    if (conn->hsock != sock && !(conn->cli && conn->cli->csock == sock)) {
        return; /* abandoned: already closing */
    }
    if (nread < 0) {
        tls_handshake_failed(sock,
                             nread == UV_EOF
                                 ? "connection closed during the handshake"
                                 : uv_strerror((int)nread),
                             0);
        return;
    }
    if (nread == 0) {
        return;
    }
    (void)BIO_write(sock->rbio, sock->rbuf, (int)nread);
    conn->refs++;
    if (tls_handshake_step(sock) == 1 && conn->sock == sock) {
        /* Frames may have come with the handshake's last flight. */
        int rc = tls_read_frames(sock, 0);
        if (rc == RT_EPROTO && conn->sock == sock) {
            rt_log(RT_LOG_WARN, "rpc: framing error from %s, closing",
                   conn->peer);
            conn_drop(conn, RT_ENOCONN);
        }
    }
    conn->refs--;
    conn_maybe_free(conn);
}

const char *rt_rpc_conn_peer_name(const struct rt_rpc_conn *conn)
{
    return conn->peer_name;
}

unsigned rt_rpc_conn_role(const struct rt_rpc_conn *conn)
{
    return conn->peer_role;
}

static uint64_t g_authz_refused;    /* atomic */
static uint64_t g_authz_warn_ms;    /* atomic */
static uint64_t g_authz_warn_quiet; /* atomic */

uint64_t rt_rpc_refused_calls(void)
{
    return __atomic_load_n(&g_authz_refused, __ATOMIC_RELAXED);
}

void rt_rpc_metrics(struct rt_buf *b)
{
    rt_buf_printf(b,
                  "# HELP rt_rpc_tls_refused_total RPC connections closed "
                  "before any request: TLS handshake failed or too slow.\n"
                  "# TYPE rt_rpc_tls_refused_total counter\n"
                  "rt_rpc_tls_refused_total %llu\n"
                  "# HELP rt_rpc_refused_calls_total RPC requests refused "
                  "for the caller's certificate role (RT_EPERM).\n"
                  "# TYPE rt_rpc_refused_calls_total counter\n"
                  "rt_rpc_refused_calls_total %llu\n",
                  (unsigned long long)rt_rpc_tls_refused(),
                  (unsigned long long)rt_rpc_refused_calls());
}

int rt_rpc_authorize(struct rt_rpc_conn *conn,
                     uint32_t method,
                     uint64_t id,
                     unsigned allowed)
{
    unsigned role = conn->peer_role;
    if (conn->peer_name[0] == '\0' || (role & (allowed | RT_RPC_ROLE_ADMIN))) {
        return 0;
    }
    const ProtobufCEnumValue *mv = protobuf_c_enum_descriptor_get_value(
        &rt__method__descriptor, (int)method);
    char why[160];
    uint64_t quiet;
    snprintf(why, sizeof(why), "%s may not call %s", conn->peer_name,
             mv ? mv->name : "this method");
    uint64_t total = __atomic_add_fetch(&g_authz_refused, 1, __ATOMIC_RELAXED);
    if (warn_ratelimit(&g_authz_warn_ms, &g_authz_warn_quiet, &quiet)) {
        rt_log(RT_LOG_WARN,
               "rpc: refused a request from %s: %s (%llu refused since "
               "start, %llu not logged since the last such line)",
               conn->peer, why, (unsigned long long)total,
               (unsigned long long)quiet);
    }
    rt_rpc_reply_err(conn, id, method, RT_EPERM, why);
    return RT_EPERM;
}

/* ------------------------------------------------------------------ */
/* Addresses                                                           */
/* ------------------------------------------------------------------ */

/* A peer to connect to: a numeric address or a DNS name (resolved before
 * each attempt), and a port other than 0. */
static int parse_addr(const char *addr,
                      struct sockaddr_storage *out,
                      int *numeric)
{
    return rt_addr_dial_check(addr, out, numeric);
}

/* ------------------------------------------------------------------ */
/* Server                                                              */
/* ------------------------------------------------------------------ */

static void srv_listen_close_cb(uv_handle_t *h)
{
    struct rt_rpc_server *srv = container_of(h, struct rt_rpc_server, tcp);
    srv->listen_open = 0;
    srv_maybe_free(srv);
}

static void srv_connection_cb(uv_stream_t *s, int status)
{
    struct rt_rpc_server *srv = container_of(s, struct rt_rpc_server, tcp);

    if (status < 0) {
        rt_log(RT_LOG_WARN, "rpc: accept: %s", uv_strerror(status));
        return;
    }
    if (srv->closing) {
        return;
    }
    struct rt_rpc_conn *conn =
        conn_new(srv->loop, srv->on_request, srv->on_conn, srv->ud);
    conn->srv = srv;
    conn->next = srv->conns;
    if (srv->conns) {
        srv->conns->prev = conn;
    }
    srv->conns = conn;
    srv->nconns++;
    struct rt_rpc_sock *sock = sock_new(conn);
    int rc = uv_accept(s, (uv_stream_t *)&sock->tcp);
    if (rc < 0) {
        rt_log(RT_LOG_WARN, "rpc: accept: %s", uv_strerror(rc));
        sock_close(sock);
        conn_retire(conn);
        return;
    }
    if (srv->tls) {
        /* Not the conn's socket until both certificates are verified;
         * the handshake must finish in time (a slow-loris bound). */
        conn_fill_peer(conn, sock);
        conn->hsock = sock;
        uv_timer_start(&conn->tmo, tls_hs_timeout_cb, RT_RPC_HANDSHAKE_MS, 0);
        tls_start(sock, srv->tls, 1);
        return;
    }
    srv_conn_up(conn, sock);
}

static void srv_conn_up(struct rt_rpc_conn *conn, struct rt_rpc_sock *sock)
{
    conn_set_up(conn, sock);
    rt_log(RT_LOG_DEBUG, "rpc: accepted connection from %s%s%s", conn->peer,
           conn->peer_name[0] ? " as " : "", conn->peer_name);
    if (conn->on_conn) {
        conn->refs++;
        conn->on_conn(conn, 1, conn->ud);
        conn->refs--;
        conn_maybe_free(conn);
    }
}

int rt_rpc_server_start(uv_loop_t *loop,
                        const char *host,
                        int port,
                        rt_rpc_request_cb on_request,
                        rt_rpc_conn_cb on_conn,
                        void *ud,
                        struct rt_rpc_server **out)
{
    struct sockaddr_storage ss;
    int rc = rt_addr_ip(host ? host : "0.0.0.0", port, &ss, NULL);
    if (rc != 0) {
        return UV_EINVAL;
    }
    struct rt_rpc_server *srv = rt_xcalloc(1, sizeof(*srv));
    srv->loop = loop;
    srv->on_request = on_request;
    srv->on_conn = on_conn;
    srv->ud = ud;
    srv->tls = g_tls;
    rc = uv_tcp_init(loop, &srv->tcp);
    if (rc < 0) {
        free(srv);
        return rc;
    }
    srv->listen_open = 1;
    rc = uv_tcp_bind(&srv->tcp, (const struct sockaddr *)&ss, 0);
    if (rc == 0) {
        rc = uv_listen((uv_stream_t *)&srv->tcp, 511, srv_connection_cb);
    }
    if (rc < 0) {
        srv->closing = 1;
        uv_close((uv_handle_t *)&srv->tcp, srv_listen_close_cb);
        return rc;
    }
    rt_log(RT_LOG_INFO, "rpc: listening on %s:%d (%s)", host ? host : "0.0.0.0",
           rt_rpc_server_port(srv),
           srv->tls ? "mutual TLS" : "plain TCP, unauthenticated");
    *out = srv;
    return 0;
}

int rt_rpc_server_port(const struct rt_rpc_server *srv)
{
    struct sockaddr_storage ss;
    int len = sizeof(ss);
    if (uv_tcp_getsockname(&srv->tcp, (struct sockaddr *)&ss, &len) != 0) {
        return -1;
    }
    if (ss.ss_family == AF_INET6) {
        return ntohs(((const struct sockaddr_in6 *)&ss)->sin6_port);
    }
    return ntohs(((const struct sockaddr_in *)&ss)->sin_port);
}

void rt_rpc_server_close(struct rt_rpc_server *srv)
{
    if (srv == NULL || srv->closing) {
        return;
    }
    srv->closing = 1;
    uv_close((uv_handle_t *)&srv->tcp, srv_listen_close_cb);
    /* Conns are unlinked only in close callbacks, so the list is stable
     * while user callbacks run here. */
    for (struct rt_rpc_conn *conn = srv->conns; conn; conn = conn->next) {
        conn->closing = 1;
        conn_drop(conn, RT_ECANCELED);
        conn_retire(conn);
    }
}

/* ------------------------------------------------------------------ */
/* Client                                                              */
/* ------------------------------------------------------------------ */

static void client_start_connect(struct rt_rpc_client *c);

static void client_timer_cb(uv_timer_t *t)
{
    struct rt_rpc_client *c = container_of(t, struct rt_rpc_client, timer);
    if (c->closing) {
        return;
    }
    if (c->csock) {
        rt_log(RT_LOG_DEBUG, "rpc: connect to %s timed out", c->addr_str);
        sock_close(c->csock);
        c->csock = NULL;
        conn_connect_failed(c->conn, RT_ENOCONN);
        client_schedule_retry(c);
        return;
    }
    if (c->conn->sock == NULL) {
        client_start_connect(c);
    }
}

static void client_schedule_retry(struct rt_rpc_client *c)
{
    uint32_t delay = c->backoff_ms;
    c->backoff_ms =
        delay * 2 > RT_RPC_BACKOFF_MAX_MS ? RT_RPC_BACKOFF_MAX_MS : delay * 2;
    uv_timer_start(&c->timer, client_timer_cb, delay, 0);
}

static void client_connect_cb(uv_connect_t *req, int status)
{
    struct rt_rpc_sock *sock = container_of(req, struct rt_rpc_sock, creq);
    struct rt_rpc_conn *conn = sock->conn;
    struct rt_rpc_client *c = conn->cli;

    if (c->csock != sock) {
        return; /* abandoned (timeout, set_addr, close): already closing */
    }
    if (status < 0) {
        c->csock = NULL;
        rt_log(RT_LOG_DEBUG, "rpc: connect to %s: %s", c->addr_str,
               uv_strerror(status));
        sock_close(sock);
        conn_connect_failed(conn, RT_ENOCONN);
        client_schedule_retry(c);
        return;
    }
    if (c->tls) {
        /* Still the connecting socket (calls queue, the connect timer
         * bounds the handshake too) until the handshake completes. */
        conn_fill_peer(conn, sock);
        tls_start(sock, c->tls, 0);
        return;
    }
    client_up(c, sock);
}

static void client_up(struct rt_rpc_client *c, struct rt_rpc_sock *sock)
{
    struct rt_rpc_conn *conn = c->conn;
    c->csock = NULL;
    uv_timer_stop(&c->timer);
    if (sock->ssl == NULL) {
        c->backoff_ms = RT_RPC_BACKOFF_MIN_MS;
    }
    conn_set_up(conn, sock);
    rt_log(RT_LOG_INFO, "rpc: connected to %s%s%s", c->addr_str,
           conn->peer_name[0] ? " as " : "", conn->peer_name);
    if (conn->on_conn) {
        conn->refs++;
        conn->on_conn(conn, 1, conn->ud);
        conn->refs--;
        conn_maybe_free(conn);
    }
}

/* The name of attempt r->attempt resolved (or not). The attempt may have
 * been abandoned meanwhile (timeout, set_addr, close): then only free. */
static void client_resolved_cb(uv_getaddrinfo_t *req,
                               int status,
                               struct addrinfo *res)
{
    struct rt_rpc_resolve *r = container_of(req, struct rt_rpc_resolve, req);
    struct rt_rpc_client *c = r->c;
    struct rt_rpc_conn *conn = c->conn;
    struct rt_rpc_sock *sock = c->csock;
    int rc = status;

    conn->nhandles--;
    if (c->closing || sock == NULL || c->attempt != r->attempt) {
        goto out;
    }
    if (rc == 0) {
        /* A name with several addresses (A and AAAA, say, while the peer
         * binds IPv4 only): each attempt takes the next, so a refused one
         * is not dialled for ever. */
        const struct addrinfo *ai = res;
        size_t n = 0;
        for (const struct addrinfo *p = res; p; p = p->ai_next) {
            n++;
        }
        for (size_t k = c->turn++ % n; k > 0; k--) {
            ai = ai->ai_next;
        }
        memset(&c->addr, 0, sizeof(c->addr));
        memcpy(&c->addr, ai->ai_addr, ai->ai_addrlen);
        rc = uv_tcp_connect(&sock->creq, &sock->tcp,
                            (const struct sockaddr *)&c->addr,
                            client_connect_cb);
    }
    if (rc < 0) {
        rt_log(RT_LOG_WARN, "rpc: connect to %s: %s", c->addr_str,
               uv_strerror(rc));
        c->csock = NULL;
        sock_close(sock);
        conn_connect_failed(conn, RT_ENOCONN);
        client_schedule_retry(c);
    }
out:
    uv_freeaddrinfo(res);
    free(r);
    conn_maybe_free(conn);
}

/* Starts attempt number ++c->attempt: a socket that counts as connecting
 * at once (calls queue behind it), then the name's resolution if the
 * address is a name, then the TCP connect; the connect timeout covers
 * both. */
static void client_start_connect(struct rt_rpc_client *c)
{
    struct rt_rpc_sock *sock = sock_new(c->conn);
    int rc;

    c->attempt++;
    if (c->numeric) {
        rc = uv_tcp_connect(&sock->creq, &sock->tcp,
                            (const struct sockaddr *)&c->addr,
                            client_connect_cb);
    } else {
        struct addrinfo hints;
        char host[256], port[8];
        int p = 0;
        struct rt_rpc_resolve *r = rt_xcalloc(1, sizeof(*r));

        memset(&hints, 0, sizeof(hints));
        hints.ai_family = AF_UNSPEC;
        hints.ai_socktype = SOCK_STREAM;
        rt_addr_split(c->addr_str, host, sizeof(host), &p);
        snprintf(port, sizeof(port), "%d", p);
        r->c = c;
        r->attempt = c->attempt;
        rc = uv_getaddrinfo(c->conn->loop, &r->req, client_resolved_cb, host,
                            port, &hints);
        if (rc == 0) {
            c->conn->nhandles++;
        } else {
            free(r);
        }
    }
    if (rc < 0) {
        rt_log(RT_LOG_DEBUG, "rpc: connect to %s: %s", c->addr_str,
               uv_strerror(rc));
        sock_close(sock);
        client_schedule_retry(c);
        return;
    }
    c->csock = sock;
    uv_timer_start(&c->timer, client_timer_cb, RT_RPC_CONNECT_TIMEOUT_MS, 0);
}

int rt_rpc_client_start(uv_loop_t *loop,
                        const char *addr,
                        rt_rpc_request_cb on_request,
                        rt_rpc_conn_cb on_conn,
                        void *ud,
                        struct rt_rpc_client **out)
{
    struct sockaddr_storage ss;
    int numeric;
    if (parse_addr(addr, &ss, &numeric) != 0 ||
        strlen(addr) >= sizeof(((struct rt_rpc_client *)0)->addr_str)) {
        return RT_EINVAL;
    }
    struct rt_rpc_client *c = rt_xcalloc(1, sizeof(*c));
    c->addr = ss;
    c->numeric = numeric;
    snprintf(c->addr_str, sizeof(c->addr_str), "%s", addr);
    c->backoff_ms = RT_RPC_BACKOFF_MIN_MS;
    c->tls = g_tls;
    c->conn = conn_new(loop, on_request, on_conn, ud);
    c->conn->cli = c;
    uv_timer_init(loop, &c->timer);
    c->timer.data = c->conn;
    c->conn->nhandles++;
    client_start_connect(c);
    *out = c;
    return 0;
}

void rt_rpc_client_expect_roles(struct rt_rpc_client *c, unsigned roles)
{
    c->expect_roles = roles;
}

struct rt_rpc_conn *rt_rpc_client_conn(struct rt_rpc_client *c)
{
    return c->conn;
}

int rt_rpc_client_set_addr(struct rt_rpc_client *c, const char *addr)
{
    struct sockaddr_storage ss;
    int numeric;
    if (c->closing) {
        return RT_EINVAL;
    }
    if (parse_addr(addr, &ss, &numeric) != 0 ||
        strlen(addr) >= sizeof(c->addr_str)) {
        return RT_EINVAL;
    }
    c->addr = ss;
    c->numeric = numeric;
    snprintf(c->addr_str, sizeof(c->addr_str), "%s", addr);
    if (c->csock) {
        sock_close(c->csock);
        c->csock = NULL;
        conn_connect_failed(c->conn, RT_ENOCONN);
    }
    conn_drop(c->conn, RT_ENOCONN); /* no-op when down */
    c->backoff_ms = RT_RPC_BACKOFF_MIN_MS;
    /* Reconnect to the new address right away. */
    uv_timer_start(&c->timer, client_timer_cb, 0, 0);
    return 0;
}

void rt_rpc_client_close(struct rt_rpc_client *c)
{
    if (c == NULL || c->closing) {
        return;
    }
    struct rt_rpc_conn *conn = c->conn;
    c->closing = 1;
    conn->closing = 1;
    if (c->csock) {
        sock_close(c->csock);
        c->csock = NULL;
        conn_connect_failed(conn, RT_ECANCELED);
    }
    uv_close((uv_handle_t *)&c->timer, conn_handle_close_cb);
    conn_drop(conn, RT_ECANCELED);
    conn_retire(conn);
}

/* ------------------------------------------------------------------ */
/* Calls and replies                                                   */
/* ------------------------------------------------------------------ */

int rt_rpc_call(struct rt_rpc_conn *conn,
                uint32_t method,
                const uint8_t *body,
                size_t len,
                uint32_t timeout_ms,
                rt_rpc_reply_cb cb,
                void *arg)
{
    const char *reqid = rt_log_reqid();
    size_t rn = strnlen(reqid, RT_RPC_REQID_MAX);
    uint8_t pre[1 + RT_RPC_REQID_MAX];
    size_t plen = rn ? 1 + rn : 0;

    if (len > RT_RPC_MAX_BODY - plen) {
        return RT_EINVAL;
    }
    if (rn) {
        pre[0] = (uint8_t)rn;
        memcpy(pre + 1, reqid, rn);
    }
    struct rt_rpc_pending *p = NULL;
    if (cb) {
        p = rt_xmalloc(sizeof(*p));
        p->cb = cb;
        p->arg = arg;
        p->next = NULL;
    }
    if (!conn->up && !conn_connecting(conn)) {
        if (p) {
            p->wseq = conn->wseq;
            defer_push(conn, p,
                       conn->closing ? RT_ECANCELED
                                     : call_status(conn, p, RT_ENOCONN));
        }
        return 0;
    }
    struct rt_rpc_hdr h = {.len = (uint32_t)(plen + len),
                           .flags = rn ? RT_RPC_F_REQID : 0,
                           .method = method,
                           .status = 0,
                           .id = 0};
    if (p) {
        p->id = conn->next_id++;
        if (conn->next_id == 0) {
            conn->next_id = 1;
        }
        p->deadline = uv_now(conn->loop) +
                      (timeout_ms ? timeout_ms : RT_RPC_DEFAULT_TIMEOUT_MS);
        p->wseq = conn->wseq;
        ht_insert(conn, p);
        heap_push(conn, p);
        if (!uv_is_active((uv_handle_t *)&conn->tmo)) {
            uv_timer_start(&conn->tmo, tmo_cb, RT_RPC_TICK_MS, RT_RPC_TICK_MS);
        }
        h.id = p->id;
    }
    queue_frame2(conn, &h, pre, plen, body, len);
    return 0;
}

/* Packs @msg into a stack buffer when small, else the heap. */
#define RT_RPC_PACK_STACK 4096

int rt_rpc_call_pb(struct rt_rpc_conn *conn,
                   uint32_t method,
                   const ProtobufCMessage *msg,
                   uint32_t timeout_ms,
                   rt_rpc_reply_cb cb,
                   void *arg)
{
    uint8_t stackbuf[RT_RPC_PACK_STACK];
    size_t n = msg ? protobuf_c_message_get_packed_size(msg) : 0;
    if (n > RT_RPC_MAX_BODY) {
        return RT_EINVAL;
    }
    uint8_t *buf = n <= sizeof(stackbuf) ? stackbuf : rt_xmalloc(n);
    if (n) {
        protobuf_c_message_pack(msg, buf);
    }
    int rc = rt_rpc_call(conn, method, buf, n, timeout_ms, cb, arg);
    if (buf != stackbuf) {
        free(buf);
    }
    return rc;
}

int rt_rpc_reply(struct rt_rpc_conn *conn,
                 uint64_t id,
                 uint32_t method,
                 int32_t status,
                 const uint8_t *body,
                 size_t len)
{
    if (id == 0 || !conn->up || len > RT_RPC_MAX_BODY) {
        return 0;
    }
    struct rt_rpc_hdr h = {.len = (uint32_t)len,
                           .flags = RT_RPC_F_REPLY,
                           .method = method,
                           .status = status,
                           .id = id};
    queue_frame(conn, &h, body, len);
    return 0;
}

int rt_rpc_reply_pb(struct rt_rpc_conn *conn,
                    uint64_t id,
                    uint32_t method,
                    int32_t status,
                    const ProtobufCMessage *msg)
{
    uint8_t stackbuf[RT_RPC_PACK_STACK];
    if (id == 0 || !conn->up) {
        return 0;
    }
    size_t n = msg ? protobuf_c_message_get_packed_size(msg) : 0;
    if (n > RT_RPC_MAX_BODY) {
        rt_log(RT_LOG_ERROR, "rpc: reply %llu too large (%zu bytes)",
               (unsigned long long)id, n);
        return rt_rpc_reply_err(conn, id, method, RT_EINTERNAL,
                                "reply too large");
    }
    uint8_t *buf = n <= sizeof(stackbuf) ? stackbuf : rt_xmalloc(n);
    if (n) {
        protobuf_c_message_pack(msg, buf);
    }
    int rc = rt_rpc_reply(conn, id, method, status, buf, n);
    if (buf != stackbuf) {
        free(buf);
    }
    return rc;
}

int rt_rpc_reply_err_at(struct rt_rpc_conn *conn,
                        uint64_t id,
                        uint32_t method,
                        int32_t status,
                        int32_t index,
                        const char *message)
{
    Rt__Error e = RT__ERROR__INIT;
    e.message = (char *)(message ? message : rt_err_message(status));
    e.index = index;
    return rt_rpc_reply_pb(conn, id, method, status, &e.base);
}

int rt_rpc_reply_err(struct rt_rpc_conn *conn,
                     uint64_t id,
                     uint32_t method,
                     int32_t status,
                     const char *message)
{
    return rt_rpc_reply_err_at(conn, id, method, status, -1, message);
}

int rt_rpc_reply_notleader(struct rt_rpc_conn *conn,
                           uint64_t id,
                           uint32_t method,
                           const struct Rt__NotLeader *hint)
{
    Rt__NotLeader none = RT__NOT_LEADER__INIT;
    return rt_rpc_reply_pb(conn, id, method, RT_ENOTLEADER,
                           hint ? &hint->base : &none.base);
}

struct Rt__NotLeader *rt_notleader_parse(int status,
                                         const uint8_t *body,
                                         size_t len)
{
    if (status != RT_ENOTLEADER || body == NULL) {
        return NULL;
    }
    return rt__not_leader__unpack(NULL, len, body);
}

/* ------------------------------------------------------------------ */
/* Conn accessors                                                      */
/* ------------------------------------------------------------------ */

void rt_rpc_conn_ref(struct rt_rpc_conn *conn)
{
    conn->refs++;
}

void rt_rpc_conn_unref(struct rt_rpc_conn *conn)
{
    RT_PRE(conn->refs > 0);
    conn->refs--;
    conn_maybe_free(conn);
}

void rt_rpc_conn_report_unsent(struct rt_rpc_conn *conn, int on)
{
    conn->report_unsent = on != 0;
}

int rt_rpc_conn_is_up(const struct rt_rpc_conn *conn)
{
    return conn->up;
}

const char *rt_rpc_conn_peer(const struct rt_rpc_conn *conn)
{
    return conn->peer;
}

void rt_rpc_conn_set_data(struct rt_rpc_conn *conn, void *data)
{
    conn->data = data;
}

void *rt_rpc_conn_data(const struct rt_rpc_conn *conn)
{
    return conn->data;
}

void rt_rpc_conn_close(struct rt_rpc_conn *conn)
{
    if (conn->cli) {
        struct rt_rpc_client *c = conn->cli;
        if (c->closing) {
            return;
        }
        if (c->csock) {
            sock_close(c->csock);
            c->csock = NULL;
            conn_connect_failed(conn, RT_ENOCONN);
            client_schedule_retry(c);
            return;
        }
    }
    conn_drop(conn, RT_ENOCONN);
}
