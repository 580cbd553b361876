/* RPC layer: framing, the frame reader, and request/reply over real libuv TCP
 * connections on loopback. With --tls every connection runs under mutual
 * TLS (a cluster CA made for the run), and the same cases must hold. */
#include <netdb.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "rt.pb-c.h"
#include "rt_addr.h"
#include "rt_buf.h"
#include "rt_err.h"
#include "rt_log.h"
#include "rt_pki.h"
#include "rt_rpc.h"
#include "rt_tls.h"

/* ------------------------------------------------------------------ */
/* Fixture                                                             */
/* ------------------------------------------------------------------ */

#define N_PIPELINE 10000
#define MAX_DEFERRED N_PIPELINE

struct deferred_reply
{
    struct rt_rpc_conn *conn;
    uint64_t id;
    uint32_t method;
    uint8_t *body;
    size_t len;
};

struct fx
{
    uv_loop_t loop;
    uv_timer_t watchdog;
    uv_timer_t aux; /* per-test helper timer */
    struct rt_rpc_server *srv;
    struct rt_rpc_client *cli;
    int port;
    int finished;

    /* counters */
    int cli_up;
    int cli_down;
    int srv_up;
    int srv_down;
    int requests;
    int replies;
    int bad;
    int oneway;
    int status[16];
    int calls_done[16];
    int report_unsent; /* the client reports calls never sent */
    uint64_t t_start;
    uint64_t t_end;
    struct rt_rpc_conn *srv_conn;

    struct deferred_reply *deferred;
    size_t ndeferred;
};

static struct fx F;

static void watchdog_cb(uv_timer_t *t)
{
    (void)t;
    fail_msg("test timed out");
}

static void fx_init(void)
{
    memset(&F, 0, sizeof(F));
    assert_int_equal(uv_loop_init(&F.loop), 0);
    uv_timer_init(&F.loop, &F.watchdog);
    uv_timer_start(&F.watchdog, watchdog_cb, 8000, 0);
    uv_timer_init(&F.loop, &F.aux);
}

/* Closes everything the fixture owns; the loop then runs dry. */
static void fx_finish(void)
{
    if (F.finished) {
        return;
    }
    F.finished = 1;
    uv_close((uv_handle_t *)&F.watchdog, NULL);
    uv_close((uv_handle_t *)&F.aux, NULL);
    if (F.cli) {
        rt_rpc_client_close(F.cli);
    }
    if (F.srv) {
        rt_rpc_server_close(F.srv);
    }
}

static void finish_timer_cb(uv_timer_t *t)
{
    (void)t;
    fx_finish();
}

static void fx_run_and_close(void)
{
    uv_run(&F.loop, UV_RUN_DEFAULT);
    assert_true(F.finished);
    assert_int_equal(uv_loop_close(&F.loop), 0);
    free(F.deferred);
}

static void start_server(rt_rpc_request_cb on_request, rt_rpc_conn_cb on_conn)
{
    assert_int_equal(rt_rpc_server_start(&F.loop, "127.0.0.1", 0, on_request,
                                         on_conn, &F, &F.srv),
                     0);
    F.port = rt_rpc_server_port(F.srv);
    assert_true(F.port > 0);
}

static void start_client(rt_rpc_request_cb on_request, rt_rpc_conn_cb on_conn)
{
    char addr[64];
    snprintf(addr, sizeof(addr), "127.0.0.1:%d", F.port);
    assert_int_equal(
        rt_rpc_client_start(&F.loop, addr, on_request, on_conn, &F, &F.cli), 0);
}

/* ------------------------------------------------------------------ */
/* Helpers                                                             */
/* ------------------------------------------------------------------ */

/* Body for call @i: 4-byte index then (i % 97) bytes derived from i. */
static size_t make_body(uint32_t i, uint8_t *out)
{
    size_t n = 4 + i % 97;
    rt_put_u32be(out, i);
    for (size_t k = 4; k < n; k++) {
        out[k] = (uint8_t)(i * 31 + k);
    }
    return n;
}

static int body_matches(uint32_t i, const uint8_t *body, size_t len)
{
    uint8_t want[128];
    size_t n = make_body(i, want);
    return n == len && memcmp(want, body, n) == 0;
}

static void srv_count_conn(struct rt_rpc_conn *conn, int up, void *ud)
{
    struct fx *f = ud;
    (void)conn;
    if (up) {
        f->srv_up++;
    } else {
        f->srv_down++;
    }
}

static void srv_echo(struct rt_rpc_conn *conn,
                     uint32_t method,
                     uint64_t id,
                     const uint8_t *body,
                     size_t len,
                     void *ud)
{
    struct fx *f = ud;
    f->requests++;
    rt_rpc_reply(conn, id, method, 0, body, len);
}

/* ------------------------------------------------------------------ */
/* Framing                                                             */
/* ------------------------------------------------------------------ */

/* A header survives encode/decode unchanged, field for field. */
static void test_hdr_roundtrip(void **state)
{
    (void)state;
    struct rt_rpc_hdr h = {.len = 123456,
                           .flags = RT_RPC_F_REPLY,
                           .method = RT__METHOD__ENTITY_SCAN,
                           .status = RT_ETABLEEXISTS,
                           .id = 0x0102030405060708ull};
    uint8_t buf[RT_RPC_HDR_SIZE];
    struct rt_rpc_hdr d;

    rt_rpc_hdr_encode(&h, buf);
    assert_int_equal(buf[4], 0x52);
    assert_int_equal(buf[5], 0x54);
    assert_int_equal(buf[6], RT_RPC_VERSION);
    assert_int_equal(rt_rpc_hdr_decode(buf, &d), 0);
    assert_int_equal(d.len, h.len);
    assert_int_equal(d.flags, h.flags);
    assert_int_equal(d.method, h.method);
    assert_int_equal(d.status, h.status);
    assert_true(d.id == h.id);
}

/* Decode rejects a bad magic, a bad version and an oversize body length. */
static void test_hdr_reject(void **state)
{
    (void)state;
    struct rt_rpc_hdr h = {.len = 10, .method = 1, .id = 7};
    uint8_t buf[RT_RPC_HDR_SIZE];
    struct rt_rpc_hdr d;

    rt_rpc_hdr_encode(&h, buf);
    buf[4] ^= 0xff;
    assert_int_equal(rt_rpc_hdr_decode(buf, &d), RT_EPROTO);

    rt_rpc_hdr_encode(&h, buf);
    buf[6] = 2;
    assert_int_equal(rt_rpc_hdr_decode(buf, &d), RT_EPROTO);

    h.len = RT_RPC_MAX_BODY;
    rt_rpc_hdr_encode(&h, buf);
    assert_int_equal(rt_rpc_hdr_decode(buf, &d), 0);
    h.len = RT_RPC_MAX_BODY + 1;
    rt_rpc_hdr_encode(&h, buf);
    assert_int_equal(rt_rpc_hdr_decode(buf, &d), RT_EPROTO);
}

struct collected
{
    int n;
    struct rt_rpc_hdr h[64];
    uint8_t body[64][128];
};

static int collect_cb(const struct rt_rpc_hdr *h,
                      const uint8_t *body,
                      void *arg)
{
    struct collected *c = arg;
    assert_true(c->n < 64);
    assert_true(h->len <= 128);
    c->h[c->n] = *h;
    memcpy(c->body[c->n], body, h->len);
    c->n++;
    return 0;
}

/* Appends frame @i (method i, id i+1, body make_body(i)) to @out. */
static size_t put_frame(uint32_t i, uint8_t *out)
{
    uint8_t body[128];
    size_t n = make_body(i, body);
    struct rt_rpc_hdr h = {.len = (uint32_t)n, .method = i, .id = i + 1};
    if (i % 5 == 0) {
        h.len = 0; /* empty bodies too */
        n = 0;
    }
    rt_rpc_hdr_encode(&h, out);
    memcpy(out + RT_RPC_HDR_SIZE, body, n);
    return RT_RPC_HDR_SIZE + n;
}

static void check_frames(const struct collected *c, uint32_t first, int n)
{
    assert_int_equal(c->n, n);
    for (int k = 0; k < n; k++) {
        uint32_t i = first + (uint32_t)k;
        assert_int_equal(c->h[k].method, i);
        assert_true(c->h[k].id == i + 1);
        if (i % 5 == 0) {
            assert_int_equal(c->h[k].len, 0);
        } else {
            assert_true(body_matches(i, c->body[k], c->h[k].len));
        }
    }
}

/* Three frames fed one byte at a time come out as the same three frames. */
static void test_reader_bytewise(void **state)
{
    (void)state;
    uint8_t stream[3 * 160];
    size_t n = 0;
    struct rt_rpc_reader r;
    struct collected c = {0};

    for (uint32_t i = 1; i <= 3; i++) {
        n += put_frame(i, stream + n);
    }
    rt_rpc_reader_init(&r);
    for (size_t k = 0; k < n; k++) {
        assert_int_equal(rt_rpc_reader_feed(&r, stream + k, 1, collect_cb, &c),
                         0);
    }
    rt_rpc_reader_close(&r);
    check_frames(&c, 1, 3);
}

/* One chunk holding many frames yields them all, and so does any split. */
static void test_reader_many(void **state)
{
    (void)state;
    uint8_t stream[40 * 160];
    size_t n = 0;
    struct rt_rpc_reader r;
    static struct collected c;

    for (uint32_t i = 0; i < 40; i++) {
        n += put_frame(i, stream + n);
    }
    memset(&c, 0, sizeof(c));
    rt_rpc_reader_init(&r);
    assert_int_equal(rt_rpc_reader_feed(&r, stream, n, collect_cb, &c), 0);
    rt_rpc_reader_close(&r);
    check_frames(&c, 0, 40);

    for (size_t split = 1; split < 200; split += 7) {
        memset(&c, 0, sizeof(c));
        rt_rpc_reader_init(&r);
        for (size_t off = 0; off < n; off += split) {
            size_t take = n - off < split ? n - off : split;
            assert_int_equal(
                rt_rpc_reader_feed(&r, stream + off, take, collect_cb, &c), 0);
        }
        rt_rpc_reader_close(&r);
        check_frames(&c, 0, 40);
    }
}

/* A bad header fails the stream with RT_EPROTO, and it stays failed. */
static void test_reader_bad(void **state)
{
    (void)state;
    uint8_t stream[2 * 160];
    size_t n = 0;
    struct rt_rpc_reader r;
    struct collected c = {0};

    n += put_frame(1, stream);
    size_t second = n;
    n += put_frame(2, stream + n);
    stream[second + 5] = 0; /* magic of the second frame */
    rt_rpc_reader_init(&r);
    assert_int_equal(rt_rpc_reader_feed(&r, stream, n, collect_cb, &c),
                     RT_EPROTO);
    assert_int_equal(c.n, 1);
    assert_int_equal(rt_rpc_reader_feed(&r, stream, second, collect_cb, &c),
                     RT_EPROTO);
    rt_rpc_reader_close(&r);

    /* Oversize length, fed split inside the header. */
    struct rt_rpc_hdr h = {.len = RT_RPC_MAX_BODY + 1, .method = 1, .id = 1};
    uint8_t hb[RT_RPC_HDR_SIZE];
    rt_rpc_hdr_encode(&h, hb);
    memset(&c, 0, sizeof(c));
    rt_rpc_reader_init(&r);
    assert_int_equal(rt_rpc_reader_feed(&r, hb, 10, collect_cb, &c), 0);
    assert_int_equal(rt_rpc_reader_feed(&r, hb + 10, 14, collect_cb, &c),
                     RT_EPROTO);
    rt_rpc_reader_close(&r);
    assert_int_equal(c.n, 0);
}

/* ------------------------------------------------------------------ */
/* Loop: pipelining and out-of-order replies                           */
/* ------------------------------------------------------------------ */

static void pipeline_flush_cb(uv_timer_t *t)
{
    struct fx *f = t->data;
    /* Answer deferred requests in reverse order. */
    for (size_t k = f->ndeferred; k-- > 0;) {
        struct deferred_reply *d = &f->deferred[k];
        rt_rpc_reply(d->conn, d->id, d->method, 0, d->body, d->len);
        rt_rpc_conn_unref(d->conn);
        free(d->body);
    }
    f->ndeferred = 0;
}

/* Echoes even-indexed requests now and defers odd ones to a timer. */
static void srv_pipeline(struct rt_rpc_conn *conn,
                         uint32_t method,
                         uint64_t id,
                         const uint8_t *body,
                         size_t len,
                         void *ud)
{
    struct fx *f = ud;
    f->requests++;
    assert_true(len >= 4);
    uint32_t i = rt_get_u32be(body);
    if (i % 2 == 0) {
        rt_rpc_reply(conn, id, method, 0, body, len);
        return;
    }
    assert_true(f->ndeferred < MAX_DEFERRED);
    struct deferred_reply *d = &f->deferred[f->ndeferred++];
    rt_rpc_conn_ref(conn);
    d->conn = conn;
    d->id = id;
    d->method = method;
    d->body = malloc(len);
    memcpy(d->body, body, len);
    d->len = len;
    if (!uv_is_active((uv_handle_t *)&f->aux)) {
        f->aux.data = f;
        uv_timer_start(&f->aux, pipeline_flush_cb, 5, 0);
    }
}

static void pipeline_reply_cb(int status,
                              const uint8_t *body,
                              size_t len,
                              void *arg)
{
    uint32_t i = (uint32_t)(uintptr_t)arg;
    if (status != 0 || !body_matches(i, body, len)) {
        F.bad++;
    }
    if (++F.replies == N_PIPELINE) {
        F.t_end = uv_hrtime();
        fx_finish();
    }
}

static void cli_pipeline_conn(struct rt_rpc_conn *conn, int up, void *ud)
{
    struct fx *f = ud;
    uint8_t body[128];
    if (!up) {
        f->cli_down++;
        return;
    }
    f->cli_up++;
    f->t_start = uv_hrtime();
    for (uint32_t i = 0; i < N_PIPELINE; i++) {
        size_t n = make_body(i, body);
        assert_int_equal(rt_rpc_call(conn, RT__METHOD__PING, body, n, 20000,
                                     pipeline_reply_cb, (void *)(uintptr_t)i),
                         0);
    }
}

/* 10,000 pipelined calls all complete with their own bodies, though the
 * server answers half of them later and in reverse order. */
static void test_pipeline(void **state)
{
    (void)state;
    fx_init();
    F.deferred = calloc(MAX_DEFERRED, sizeof(*F.deferred));
    start_server(srv_pipeline, srv_count_conn);
    start_client(NULL, cli_pipeline_conn);
    fx_run_and_close();
    assert_int_equal(F.replies, N_PIPELINE);
    assert_int_equal(F.requests, N_PIPELINE);
    assert_int_equal(F.bad, 0);
    assert_int_equal(F.cli_up, 1);
    assert_int_equal(F.srv_up, 1);
    assert_int_equal(F.srv_down, 1);
    print_message("    %d calls in %.1f ms\n", N_PIPELINE,
                  (double)(F.t_end - F.t_start) / 1e6);
}

/* ------------------------------------------------------------------ */
/* Request ids                                                         */
/* ------------------------------------------------------------------ */

static char reqid_seen[2][RT_RPC_REQID_MAX + 1];

/* Records the request id the callback runs under and echoes the body. */
static void srv_reqid(struct rt_rpc_conn *conn,
                      uint32_t method,
                      uint64_t id,
                      const uint8_t *body,
                      size_t len,
                      void *ud)
{
    struct fx *f = ud;
    uint32_t i = len >= 4 ? rt_get_u32be(body) : 99;
    assert_true(i < 2);
    snprintf(reqid_seen[i], sizeof(reqid_seen[i]), "%s", rt_log_reqid());
    f->requests++;
    rt_rpc_reply(conn, id, method, 0, body, len);
}

static void reqid_reply_cb(int status,
                           const uint8_t *body,
                           size_t len,
                           void *arg)
{
    uint32_t i = (uint32_t)(uintptr_t)arg;
    if (status != 0 || !body_matches(i, body, len) || rt_log_reqid()[0]) {
        F.bad++;
    }
    if (++F.replies == 2) {
        fx_finish();
    }
}

static void cli_reqid_conn(struct rt_rpc_conn *conn, int up, void *ud)
{
    uint8_t body[128];
    size_t n;
    (void)ud;
    if (!up) {
        return;
    }
    /* The id travels with the frame: the thread's id is cleared before
     * the server (on this same loop) sees the request. */
    rt_log_set_reqid("3f2a9c1e-0001-4d7b-9a3e-7c9d1f0e2b11");
    n = make_body(0, body);
    assert_int_equal(rt_rpc_call(conn, RT__METHOD__PING, body, n, 5000,
                                 reqid_reply_cb, (void *)(uintptr_t)0),
                     0);
    rt_log_set_reqid(NULL);
    n = make_body(1, body);
    assert_int_equal(rt_rpc_call(conn, RT__METHOD__PING, body, n, 5000,
                                 reqid_reply_cb, (void *)(uintptr_t)1),
                     0);
}

/* A request carries the caller's request id to the callee's handler, which
 * runs under it; a request sent without one arrives without one, and the
 * body is the caller's either way. */
static void test_reqid_travels(void **state)
{
    (void)state;
    fx_init();
    start_server(srv_reqid, srv_count_conn);
    start_client(NULL, cli_reqid_conn);
    fx_run_and_close();
    assert_int_equal(F.requests, 2);
    assert_int_equal(F.replies, 2);
    assert_int_equal(F.bad, 0);
    assert_string_equal(reqid_seen[0], "3f2a9c1e-0001-4d7b-9a3e-7c9d1f0e2b11");
    assert_string_equal(reqid_seen[1], "");
}

/* ------------------------------------------------------------------ */
/* Timeouts and drops                                                  */
/* ------------------------------------------------------------------ */

static void srv_ignore(struct rt_rpc_conn *conn,
                       uint32_t method,
                       uint64_t id,
                       const uint8_t *body,
                       size_t len,
                       void *ud)
{
    struct fx *f = ud;
    (void)conn;
    (void)method;
    (void)id;
    (void)body;
    (void)len;
    f->requests++;
}

static void timeout_reply_cb(int status,
                             const uint8_t *body,
                             size_t len,
                             void *arg)
{
    (void)arg;
    assert_null(body);
    assert_int_equal(len, 0);
    F.status[0] = status;
    F.calls_done[0]++;
    F.t_end = uv_now(&F.loop);
    fx_finish();
}

static void cli_timeout_conn(struct rt_rpc_conn *conn, int up, void *ud)
{
    struct fx *f = ud;
    if (!up) {
        return;
    }
    f->t_start = uv_now(&f->loop);
    assert_int_equal(rt_rpc_call(conn, RT__METHOD__PING, NULL, 0, 200,
                                 timeout_reply_cb, NULL),
                     0);
}

/* A server that never answers makes the call fail with RT_ETIMEDOUT close
 * to its timeout. */
static void test_timeout(void **state)
{
    (void)state;
    fx_init();
    start_server(srv_ignore, NULL);
    start_client(NULL, cli_timeout_conn);
    fx_run_and_close();
    assert_int_equal(F.calls_done[0], 1);
    assert_int_equal(F.status[0], RT_ETIMEDOUT);
    assert_int_equal(F.requests, 1);
    uint64_t el = F.t_end - F.t_start;
    assert_true(el >= 200);
    assert_true(el < 700); /* generous: shared CI cores */
}

#define N_DROP 5

static void srv_drop_after(struct rt_rpc_conn *conn,
                           uint32_t method,
                           uint64_t id,
                           const uint8_t *body,
                           size_t len,
                           void *ud)
{
    struct fx *f = ud;
    (void)method;
    (void)id;
    (void)body;
    (void)len;
    if (f->requests++ == 0) {
        rt_rpc_conn_ref(conn); /* held past the close */
        f->srv_conn = conn;
    }
    if (f->requests == N_DROP) {
        rt_rpc_conn_close(conn);
        assert_false(rt_rpc_conn_is_up(conn));
    }
}

static void drop_reply_cb(int status,
                          const uint8_t *body,
                          size_t len,
                          void *arg)
{
    int i = (int)(uintptr_t)arg;
    (void)body;
    (void)len;
    F.status[i] = status;
    F.calls_done[i]++;
    if (++F.replies == N_DROP) {
        /* A reply on the closed but referenced conn is dropped silently. */
        assert_false(rt_rpc_conn_is_up(F.srv_conn));
        assert_int_equal(rt_rpc_reply(F.srv_conn, 1, RT__METHOD__PING, 0,
                                      (const uint8_t *)"late", 4),
                         0);
        rt_rpc_conn_unref(F.srv_conn);
        F.srv_conn = NULL;
        /* Let any duplicate completion show up before finishing. */
        uv_timer_start(&F.aux, finish_timer_cb, 100, 0);
    }
}

static void cli_drop_conn(struct rt_rpc_conn *conn, int up, void *ud)
{
    struct fx *f = ud;
    if (!up) {
        f->cli_down++;
        return;
    }
    if (f->cli_up++ > 0) {
        return;
    }
    rt_rpc_conn_report_unsent(conn, f->report_unsent);
    for (int i = 0; i < N_DROP; i++) {
        assert_int_equal(rt_rpc_call(conn, RT__METHOD__PING, NULL, 0, 5000,
                                     drop_reply_cb, (void *)(uintptr_t)i),
                         0);
    }
}

/* The server closing the connection fails every pending call with
 * RT_ENOCONN exactly once. */
static void test_drop(void **state)
{
    (void)state;
    fx_init();
    start_server(srv_drop_after, srv_count_conn);
    start_client(NULL, cli_drop_conn);
    fx_run_and_close();
    for (int i = 0; i < N_DROP; i++) {
        assert_int_equal(F.calls_done[i], 1);
        assert_int_equal(F.status[i], RT_ENOCONN);
    }
    assert_true(F.cli_down >= 1);
    assert_true(F.srv_down >= 1);
    assert_int_equal(F.srv_down, F.srv_up);
}

/* A request the server received was written: with unsent calls reported,
 * its connection dropping still fails it with RT_ENOCONN (outcome
 * unknown), never RT_ENOTSENT. */
static void test_drop_sent_reported(void **state)
{
    (void)state;
    fx_init();
    F.report_unsent = 1;
    start_server(srv_drop_after, srv_count_conn);
    start_client(NULL, cli_drop_conn);
    fx_run_and_close();
    for (int i = 0; i < N_DROP; i++) {
        assert_int_equal(F.calls_done[i], 1);
        assert_int_equal(F.status[i], RT_ENOCONN);
    }
}

/* ------------------------------------------------------------------ */
/* Calls never sent                                                    */
/* ------------------------------------------------------------------ */

static void unsent_reply_cb(int status,
                            const uint8_t *body,
                            size_t len,
                            void *arg)
{
    int i = (int)(uintptr_t)arg;
    (void)body;
    (void)len;
    F.status[i] = status;
    F.calls_done[i]++;
}

/* A port nothing listens on (bound, then closed). */
static int free_port(void)
{
    static uv_tcp_t probe; /* closed by the test's loop run */
    struct sockaddr_in sa;
    struct sockaddr_storage ss;
    int sl = sizeof(ss);
    uv_tcp_init(&F.loop, &probe);
    uv_ip4_addr("127.0.0.1", 0, &sa);
    assert_int_equal(uv_tcp_bind(&probe, (const struct sockaddr *)&sa, 0), 0);
    assert_int_equal(uv_tcp_getsockname(&probe, (struct sockaddr *)&ss, &sl),
                     0);
    uv_close((uv_handle_t *)&probe, NULL);
    return ntohs(((struct sockaddr_in *)&ss)->sin_port);
}

static void unsent_down_cb(uv_timer_t *t)
{
    struct rt_rpc_conn *conn = rt_rpc_client_conn(F.cli);
    (void)t;
    /* Backing off after the refused connect: down at call time. */
    assert_false(rt_rpc_conn_is_up(conn));
    rt_rpc_call(conn, RT__METHOD__PING, NULL, 0, 0, unsent_reply_cb,
                (void *)(uintptr_t)1);
    uv_timer_start(&F.aux, finish_timer_cb, 20, 0);
}

/* A call queued behind a connect that is refused was never sent: with
 * unsent calls reported it fails RT_ENOTSENT, so does a call made while
 * the client is down; without, both are RT_ENOCONN as before. */
static void test_unsent_connect_refused(void **state)
{
    (void)state;
    for (int report = 0; report <= 1; report++) {
        fx_init();
        F.port = free_port();
        start_client(NULL, NULL);
        rt_rpc_conn_report_unsent(rt_rpc_client_conn(F.cli), report);
        rt_rpc_call(rt_rpc_client_conn(F.cli), RT__METHOD__PING, NULL, 0, 0,
                    unsent_reply_cb, (void *)(uintptr_t)0);
        uv_timer_start(&F.aux, unsent_down_cb, 30, 0);
        fx_run_and_close();
        for (int i = 0; i < 2; i++) {
            assert_int_equal(F.calls_done[i], 1);
            assert_int_equal(F.status[i], report ? RT_ENOTSENT : RT_ENOCONN);
        }
    }
}

/* A connect abandoned while in flight (the connection closed by its
 * owner) fails the calls queued behind it RT_ENOTSENT; the server never
 * sees them. */
static void test_unsent_connect_abandoned(void **state)
{
    (void)state;
    fx_init();
    start_server(srv_echo, srv_count_conn);
    start_client(NULL, NULL);
    rt_rpc_conn_report_unsent(rt_rpc_client_conn(F.cli), 1);
    rt_rpc_call(rt_rpc_client_conn(F.cli), RT__METHOD__PING, NULL, 0, 0,
                unsent_reply_cb, (void *)(uintptr_t)0);
    rt_rpc_conn_close(rt_rpc_client_conn(F.cli));
    uv_timer_start(&F.aux, finish_timer_cb, 30, 0);
    fx_run_and_close();
    assert_int_equal(F.calls_done[0], 1);
    assert_int_equal(F.status[0], RT_ENOTSENT);
    assert_int_equal(F.requests, 0);
}

/* A peer that accepts and never reads: a large request fills the socket
 * buffers and its write stays in flight. Its receive buffer is fixed
 * small (the accepted socket inherits the listener's), since autotuning
 * may grow it to tcp_rmem's maximum, which can hold the whole request. */
#define STALL_LEN (24u * 1024u * 1024u)

static uv_tcp_t stall_listen;
static uv_tcp_t stall_peer;
static uv_check_t stall_check;
static int stall_checks;

static void stall_connection_cb(uv_stream_t *s, int status)
{
    assert_int_equal(status, 0);
    uv_tcp_init(&F.loop, &stall_peer);
    assert_int_equal(uv_accept(s, (uv_stream_t *)&stall_peer), 0);
}

static void stall_close_cb(uv_timer_t *t)
{
    (void)t;
    rt_rpc_conn_close(rt_rpc_client_conn(F.cli));
    uv_close((uv_handle_t *)&stall_peer, NULL);
    uv_close((uv_handle_t *)&stall_listen, NULL);
    uv_timer_start(&F.aux, finish_timer_cb, 30, 0);
}

/* Runs after each loop iteration's poll. The first call was queued in the
 * poll of the iteration the connection came up in and written in the next
 * one's prepare phase, so the second check comes after that write. */
static void stall_check_cb(uv_check_t *h)
{
    if (++stall_checks < 2) {
        return;
    }
    uv_close((uv_handle_t *)h, NULL);
    /* The large write has not finished: this frame waits behind it. */
    rt_rpc_call(rt_rpc_client_conn(F.cli), RT__METHOD__PING, NULL, 0, 0,
                unsent_reply_cb, (void *)(uintptr_t)1);
    uv_timer_start(&F.aux, stall_close_cb, 30, 0);
}

static void stall_cli_conn(struct rt_rpc_conn *conn, int up, void *ud)
{
    struct fx *f = ud;
    if (!up || f->cli_up++ > 0) {
        return;
    }
    uint8_t *body = calloc(1, STALL_LEN);
    assert_int_equal(rt_rpc_call(conn, RT__METHOD__PING, body, STALL_LEN, 0,
                                 unsent_reply_cb, (void *)(uintptr_t)0),
                     0);
    free(body);
    stall_checks = 0;
    uv_check_init(&F.loop, &stall_check);
    uv_check_start(&stall_check, stall_check_cb);
}

/* The connection drops while a large request is still being written and a
 * second one waits behind it: the first may have reached the peer in part
 * (RT_ENOCONN), the second never left (RT_ENOTSENT). */
static void test_unsent_behind_write(void **state)
{
    struct sockaddr_in sa;
    struct sockaddr_storage ss;
    int sl = sizeof(ss);
    (void)state;
    fx_init();
    uv_tcp_init(&F.loop, &stall_listen);
    uv_ip4_addr("127.0.0.1", 0, &sa);
    assert_int_equal(
        uv_tcp_bind(&stall_listen, (const struct sockaddr *)&sa, 0), 0);
    int rcvbuf = 64 * 1024;
    assert_int_equal(uv_recv_buffer_size((uv_handle_t *)&stall_listen, &rcvbuf),
                     0);
    assert_int_equal(
        uv_listen((uv_stream_t *)&stall_listen, 4, stall_connection_cb), 0);
    assert_int_equal(
        uv_tcp_getsockname(&stall_listen, (struct sockaddr *)&ss, &sl), 0);
    F.port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
    start_client(NULL, stall_cli_conn);
    rt_rpc_conn_report_unsent(rt_rpc_client_conn(F.cli), 1);
    fx_run_and_close();
    assert_int_equal(F.calls_done[0], 1);
    assert_int_equal(F.status[0], RT_ENOCONN);
    assert_int_equal(F.calls_done[1], 1);
    assert_int_equal(F.status[1], RT_ENOTSENT);
}

/* ------------------------------------------------------------------ */
/* Reconnect                                                           */
/* ------------------------------------------------------------------ */

static void reconnect_reply_cb(int status,
                               const uint8_t *body,
                               size_t len,
                               void *arg)
{
    (void)arg;
    F.status[0] = status;
    F.calls_done[0]++;
    assert_int_equal(len, 3);
    assert_memory_equal(body, "abc", 3);
    fx_finish();
}

static void cli_reconnect_conn(struct rt_rpc_conn *conn, int up, void *ud)
{
    struct fx *f = ud;
    if (!up) {
        f->cli_down++;
        return;
    }
    f->cli_up++;
    assert_true(rt_rpc_conn_is_up(conn));
    assert_true(rt_rpc_conn_peer(conn)[0] != '\0');
    rt_rpc_call(conn, RT__METHOD__PING, (const uint8_t *)"abc", 3, 1000,
                reconnect_reply_cb, NULL);
}

static void down_reply_cb(int status,
                          const uint8_t *body,
                          size_t len,
                          void *arg)
{
    (void)body;
    (void)len;
    (void)arg;
    F.status[1] = status;
    F.calls_done[1]++;
}

static void start_server_late_cb(uv_timer_t *t)
{
    (void)t;
    assert_int_equal(rt_rpc_server_start(&F.loop, "127.0.0.1", F.port, srv_echo,
                                         NULL, &F, &F.srv),
                     0);
}

/* A client started before its server connects once the server listens,
 * reports up, and its calls then succeed; calls while down fail with
 * RT_ENOCONN on a later tick. */
static void test_reconnect(void **state)
{
    (void)state;
    uv_tcp_t probe;
    struct sockaddr_in sa;
    struct sockaddr_storage ss;
    int sl = sizeof(ss);

    fx_init();
    uv_tcp_init(&F.loop, &probe);
    uv_ip4_addr("127.0.0.1", 0, &sa);
    assert_int_equal(uv_tcp_bind(&probe, (const struct sockaddr *)&sa, 0), 0);
    assert_int_equal(uv_tcp_getsockname(&probe, (struct sockaddr *)&ss, &sl),
                     0);
    F.port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
    uv_close((uv_handle_t *)&probe, NULL);

    start_client(NULL, cli_reconnect_conn);
    assert_false(rt_rpc_conn_is_up(rt_rpc_client_conn(F.cli)));
    assert_int_equal(rt_rpc_call(rt_rpc_client_conn(F.cli), RT__METHOD__PING,
                                 NULL, 0, 0, down_reply_cb, NULL),
                     0);
    assert_int_equal(F.calls_done[1], 0); /* never synchronous */
    uv_timer_start(&F.aux, start_server_late_cb, 300, 0);
    fx_run_and_close();
    assert_int_equal(F.calls_done[1], 1);
    assert_int_equal(F.status[1], RT_ENOCONN);
    assert_int_equal(F.cli_up, 1);
    assert_int_equal(F.calls_done[0], 1);
    assert_int_equal(F.status[0], 0);
}

static void connecting_reply_cb(int status,
                                const uint8_t *body,
                                size_t len,
                                void *arg)
{
    (void)arg;
    F.status[0] = status;
    F.calls_done[0]++;
    if (status != 0 || len != 5 || memcmp(body, "early", 5) != 0) {
        F.bad++;
    }
    fx_finish();
}

/* A call made right after the client starts, while its TCP connect is still
 * in flight, waits for the connection and succeeds instead of failing. */
static void test_call_while_connecting(void **state)
{
    (void)state;
    fx_init();
    start_server(srv_echo, NULL);
    start_client(NULL, NULL);
    assert_false(rt_rpc_conn_is_up(rt_rpc_client_conn(F.cli)));
    assert_int_equal(rt_rpc_call(rt_rpc_client_conn(F.cli), RT__METHOD__PING,
                                 (const uint8_t *)"early", 5, 2000,
                                 connecting_reply_cb, NULL),
                     0);
    assert_int_equal(F.calls_done[0], 0);
    fx_run_and_close();
    assert_int_equal(F.calls_done[0], 1);
    assert_int_equal(F.status[0], 0);
    assert_int_equal(F.bad, 0);
}

/* ------------------------------------------------------------------ */
/* Symmetric calls and error replies                                   */
/* ------------------------------------------------------------------ */

static void sym_maybe_finish(void)
{
    if (F.replies == 1 && F.oneway == 1) {
        fx_finish();
    }
}

static void sym_reply_cb(int status, const uint8_t *body, size_t len, void *arg)
{
    assert_ptr_equal(arg, &F);
    F.status[0] = status;
    if (len == 5 && memcmp(body, "hello", 5) == 0) {
        F.replies++;
    } else {
        F.bad++;
    }
    sym_maybe_finish();
}

/* The server calls the client as soon as it connects, then pushes a
 * one-way message. */
static void srv_sym_conn(struct rt_rpc_conn *conn, int up, void *ud)
{
    struct fx *f = ud;
    if (!up) {
        f->srv_down++;
        return;
    }
    f->srv_up++;
    assert_int_equal(
        rt_rpc_call(conn, RT__METHOD__PING, (const uint8_t *)"hello", 5, 0,
                    sym_reply_cb, f),
        0);
    assert_int_equal(rt_rpc_call(conn, RT__METHOD__MAP_UPDATE,
                                 (const uint8_t *)"push", 4, 0, NULL, NULL),
                     0);
}

static void cli_sym_request(struct rt_rpc_conn *conn,
                            uint32_t method,
                            uint64_t id,
                            const uint8_t *body,
                            size_t len,
                            void *ud)
{
    struct fx *f = ud;
    if (method == RT__METHOD__MAP_UPDATE) {
        if (id == 0 && len == 4 && memcmp(body, "push", 4) == 0) {
            f->oneway++;
        } else {
            f->bad++;
        }
        rt_rpc_reply(conn, id, method, 0, NULL, 0); /* ignored: id 0 */
        sym_maybe_finish();
        return;
    }
    assert_true(id != 0);
    rt_rpc_reply(conn, id, method, 0, body, len);
}

/* Either side may call: the server's call to the client is answered, and a
 * one-way call arrives with id 0. */
static void test_symmetric(void **state)
{
    (void)state;
    fx_init();
    start_server(NULL, srv_sym_conn);
    start_client(cli_sym_request, NULL);
    fx_run_and_close();
    assert_int_equal(F.replies, 1);
    assert_int_equal(F.oneway, 1);
    assert_int_equal(F.status[0], 0);
    assert_int_equal(F.bad, 0);
}

static void srv_err(struct rt_rpc_conn *conn,
                    uint32_t method,
                    uint64_t id,
                    const uint8_t *body,
                    size_t len,
                    void *ud)
{
    (void)body;
    (void)len;
    (void)ud;
    rt_rpc_reply_err(conn, id, method, RT_ETABLEEXISTS, "table people exists");
}

static void err_reply_cb(int status, const uint8_t *body, size_t len, void *arg)
{
    (void)arg;
    F.status[0] = status;
    F.calls_done[0]++;
    Rt__Error *e = rt__error__unpack(NULL, len, body);
    assert_non_null(e);
    assert_string_equal(e->message, "table people exists");
    rt__error__free_unpacked(e, NULL);
    fx_finish();
}

static void cli_err_conn(struct rt_rpc_conn *conn, int up, void *ud)
{
    Rt__TableReq req = RT__TABLE_REQ__INIT;
    (void)ud;
    if (!up) {
        return;
    }
    req.account = "devstoreaccount1";
    req.name = "people";
    assert_int_equal(rt_rpc_call_pb(conn, RT__METHOD__CREATE_TABLE, &req.base,
                                    0, err_reply_cb, NULL),
                     0);
}

/* An error reply reaches the caller with its status and an Error body. */
static void test_error_reply(void **state)
{
    (void)state;
    fx_init();
    start_server(srv_err, NULL);
    start_client(NULL, cli_err_conn);
    fx_run_and_close();
    assert_int_equal(F.calls_done[0], 1);
    assert_int_equal(F.status[0], RT_ETABLEEXISTS);
}

static void srv_notleader(struct rt_rpc_conn *conn,
                          uint32_t method,
                          uint64_t id,
                          const uint8_t *body,
                          size_t len,
                          void *ud)
{
    Rt__NotLeader hint = RT__NOT_LEADER__INIT;
    (void)body;
    (void)len;
    (void)ud;
    hint.leader_id = 3;
    hint.leader_rpc_addr = "127.0.0.1:10300";
    hint.leader_http_addr = "127.0.0.1:10380";
    hint.master_term = 7;
    rt_rpc_reply_notleader(conn, id, method, &hint);
}

static void notleader_reply_cb(int status,
                               const uint8_t *body,
                               size_t len,
                               void *arg)
{
    Rt__NotLeader *n = rt_notleader_parse(status, body, len);
    (void)arg;
    F.status[0] = status;
    F.calls_done[0]++;
    assert_non_null(n);
    assert_int_equal(n->leader_id, 3);
    assert_string_equal(n->leader_rpc_addr, "127.0.0.1:10300");
    assert_string_equal(n->leader_http_addr, "127.0.0.1:10380");
    assert_int_equal(n->master_term, 7);
    rt__not_leader__free_unpacked(n, NULL);
    /* Any other status has no hint, whatever its body. */
    assert_null(rt_notleader_parse(RT_EBUSY, body, len));
    fx_finish();
}

static void cli_notleader_conn(struct rt_rpc_conn *conn, int up, void *ud)
{
    (void)ud;
    if (up) {
        assert_int_equal(rt_rpc_call_pb(conn, RT__METHOD__PS_REGISTER, NULL, 0,
                                        notleader_reply_cb, NULL),
                         0);
    }
}

/* A follower's RT_ENOTLEADER reply carries the leader it names, and the
 * client reads it back with rt_notleader_parse. */
static void test_notleader_reply(void **state)
{
    (void)state;
    fx_init();
    start_server(srv_notleader, NULL);
    start_client(NULL, cli_notleader_conn);
    fx_run_and_close();
    assert_int_equal(F.calls_done[0], 1);
    assert_int_equal(F.status[0], RT_ENOTLEADER);
}

/* ------------------------------------------------------------------ */
/* Close                                                               */
/* ------------------------------------------------------------------ */

static void cancel_reply_cb(int status,
                            const uint8_t *body,
                            size_t len,
                            void *arg)
{
    int i = (int)(uintptr_t)arg;
    (void)body;
    (void)len;
    F.status[i] = status;
    F.calls_done[i]++;
}

static void srv_close_on_request(struct rt_rpc_conn *conn,
                                 uint32_t method,
                                 uint64_t id,
                                 const uint8_t *body,
                                 size_t len,
                                 void *ud)
{
    (void)conn;
    (void)method;
    (void)id;
    (void)body;
    (void)len;
    (void)ud;
    /* Close everything while the client's calls are still pending. */
    if (++F.requests == 3) {
        fx_finish();
    }
}

static void cli_cancel_conn(struct rt_rpc_conn *conn, int up, void *ud)
{
    (void)ud;
    if (!up) {
        return;
    }
    for (int i = 0; i < 3; i++) {
        rt_rpc_call(conn, RT__METHOD__PING, NULL, 0, 0, cancel_reply_cb,
                    (void *)(uintptr_t)i);
    }
}

/* Closing the client fails its pending calls with RT_ECANCELED, once each,
 * and frees everything in close callbacks. */
static void test_close_cancels(void **state)
{
    (void)state;
    fx_init();
    start_server(srv_close_on_request, NULL);
    start_client(NULL, cli_cancel_conn);
    fx_run_and_close();
    for (int i = 0; i < 3; i++) {
        assert_int_equal(F.calls_done[i], 1);
        assert_int_equal(F.status[i], RT_ECANCELED);
    }
}

#define BIG_LEN (3u * 1024u * 1024u + 17u)
#define N_BIG 3

static void big_reply_cb(int status, const uint8_t *body, size_t len, void *arg)
{
    uint32_t seed = (uint32_t)(uintptr_t)arg;
    int ok = status == 0 && len == BIG_LEN;
    for (size_t k = 0; ok && k < len; k += 4093) {
        ok = body[k] == (uint8_t)(k * seed + seed);
    }
    if (!ok) {
        F.bad++;
    }
    if (++F.replies == N_BIG) {
        fx_finish();
    }
}

static void cli_big_conn(struct rt_rpc_conn *conn, int up, void *ud)
{
    (void)ud;
    if (!up) {
        return;
    }
    uint8_t *body = malloc(BIG_LEN);
    for (uint32_t seed = 1; seed <= N_BIG; seed++) {
        for (size_t k = 0; k < BIG_LEN; k++) {
            body[k] = (uint8_t)(k * seed + seed);
        }
        assert_int_equal(rt_rpc_call(conn, RT__METHOD__PING, body, BIG_LEN, 0,
                                     big_reply_cb, (void *)(uintptr_t)seed),
                         0);
    }
    free(body);
    /* Over the limit: refused up front, cb never fires. */
    assert_int_equal(
        rt_rpc_call(conn, RT__METHOD__PING, NULL, (size_t)RT_RPC_MAX_BODY + 1,
                    0, big_reply_cb, NULL),
        RT_EINVAL);
}

/* Multi-megabyte bodies spanning many reads arrive intact, both ways. */
static void test_big_bodies(void **state)
{
    (void)state;
    fx_init();
    start_server(srv_echo, NULL);
    start_client(NULL, cli_big_conn);
    fx_run_and_close();
    assert_int_equal(F.replies, N_BIG);
    assert_int_equal(F.bad, 0);
}

/* Batches of very different sizes one after another on one connection:
 * each batch's write buffer is kept for the next (smaller, larger, over
 * the size kept), both ways, and no byte of any frame is lost or stale. */
static const struct
{
    unsigned calls;
    size_t len;
} batch_plan[] = {{8, 100},       {1, 600 * 1024}, {30, 2048}, {2, 300 * 1024},
                  {50, 64},       {1, 10},         {40, 4096}, {1, 0},
                  {3, 90 * 1024}, {20, 333}};
#define N_PLAN (sizeof(batch_plan) / sizeof(batch_plan[0]))

static struct rt_rpc_conn *batch_conn;
static unsigned batch_step, batch_left;

static uint8_t batch_byte(unsigned step, unsigned call, size_t k)
{
    return (uint8_t)(k * (step + 3) + call * 7 + step);
}

static void batch_send(void);

static void batch_reply_cb(int status,
                           const uint8_t *body,
                           size_t len,
                           void *arg)
{
    unsigned call = (unsigned)(uintptr_t)arg;
    int ok = status == 0 && len == batch_plan[batch_step].len;
    for (size_t k = 0; ok && k < len; k++) {
        ok = body[k] == batch_byte(batch_step, call, k);
    }
    if (!ok) {
        F.bad++;
    }
    F.replies++;
    if (--batch_left == 0) {
        if (++batch_step == N_PLAN) {
            fx_finish();
        } else {
            batch_send();
        }
    }
}

/* One batch: every call of the step queued in the same loop iteration. */
static void batch_send(void)
{
    size_t len = batch_plan[batch_step].len;
    uint8_t *body = malloc(len ? len : 1);
    batch_left = batch_plan[batch_step].calls;
    for (unsigned c = 0; c < batch_plan[batch_step].calls; c++) {
        for (size_t k = 0; k < len; k++) {
            body[k] = batch_byte(batch_step, c, k);
        }
        assert_int_equal(rt_rpc_call(batch_conn, RT__METHOD__PING, body, len, 0,
                                     batch_reply_cb, (void *)(uintptr_t)c),
                         0);
    }
    free(body);
}

static void cli_batch_conn(struct rt_rpc_conn *conn, int up, void *ud)
{
    (void)ud;
    if (!up) {
        return;
    }
    batch_conn = conn;
    batch_step = 0;
    batch_send();
}

static void test_batches_of_every_size(void **state)
{
    unsigned total = 0;
    (void)state;
    for (size_t i = 0; i < N_PLAN; i++) {
        total += batch_plan[i].calls;
    }
    fx_init();
    start_server(srv_echo, NULL);
    start_client(NULL, cli_batch_conn);
    fx_run_and_close();
    assert_int_equal(batch_step, N_PLAN);
    assert_int_equal(F.replies, total);
    assert_int_equal(F.bad, 0);
}

struct raw
{
    uv_tcp_t tcp;
    uv_connect_t creq;
    uv_write_t wreq;
    uint8_t junk[64];
};

static void raw_write_cb(uv_write_t *w, int status)
{
    (void)w;
    (void)status;
}

static void raw_connect_cb(uv_connect_t *req, int status)
{
    struct raw *r = container_of(req, struct raw, creq);
    assert_int_equal(status, 0);
    memset(r->junk, 'x', sizeof(r->junk));
    uv_buf_t b = uv_buf_init((char *)r->junk, sizeof(r->junk));
    uv_write(&r->wreq, (uv_stream_t *)&r->tcp, &b, 1, raw_write_cb);
}

static void srv_garbage_conn(struct rt_rpc_conn *conn, int up, void *ud)
{
    struct fx *f = ud;
    (void)conn;
    if (up) {
        f->srv_up++;
        return;
    }
    f->srv_down++;
    fx_finish();
}

/* Bytes that are not a frame make the server close the connection. */
static void test_garbage_closes(void **state)
{
    (void)state;
    static struct raw r;
    struct sockaddr_in sa;
    fx_init();
    start_server(srv_echo, srv_garbage_conn);
    uv_tcp_init(&F.loop, &r.tcp);
    uv_ip4_addr("127.0.0.1", F.port, &sa);
    uv_tcp_connect(&r.creq, &r.tcp, (const struct sockaddr *)&sa,
                   raw_connect_cb);
    uv_run(&F.loop, UV_RUN_DEFAULT);
    /* fx_finish ran; the raw socket still holds the loop open. */
    uv_close((uv_handle_t *)&r.tcp, NULL);
    fx_run_and_close();
    assert_int_equal(F.srv_up, 1);
    assert_int_equal(F.srv_down, 1);
    assert_int_equal(F.requests, 0);
}

/* A bad address is refused at start. */
static void test_bad_addr(void **state)
{
    struct rt_rpc_client *c = NULL;
    (void)state;
    fx_init();
    assert_int_equal(
        rt_rpc_client_start(&F.loop, "nocolon", NULL, NULL, NULL, &c),
        RT_EINVAL);
    assert_int_equal(
        rt_rpc_client_start(&F.loop, "127.0.0.1:x", NULL, NULL, NULL, &c),
        RT_EINVAL);
    fx_finish();
    fx_run_and_close();
}

/* Host names: what a DNS name may look like (RFC 1123), and what the
 * client accepts to dial. */
static void test_addr_names(void **state)
{
    int numeric = -1;
    (void)state;
    assert_true(rt_addr_name_valid("rt-m1.internal"));
    assert_true(rt_addr_name_valid("rt-m1.internal."));
    assert_true(rt_addr_name_valid("a"));
    assert_false(rt_addr_name_valid(""));
    assert_false(rt_addr_name_valid("-a.b"));
    assert_false(rt_addr_name_valid("a-.b"));
    assert_false(rt_addr_name_valid("a..b"));
    assert_false(rt_addr_name_valid("a_b"));
    assert_false(rt_addr_name_valid("1.2.3.999"));
    assert_int_equal(
        rt_addr_dial_check("rt-ps1.internal:10200", NULL, &numeric), 0);
    assert_int_equal(numeric, 0);
    assert_int_equal(rt_addr_dial_check("10.0.0.1:10200", NULL, &numeric), 0);
    assert_int_equal(numeric, 1);
    assert_int_equal(rt_addr_dial_check("rt-ps1.internal:0", NULL, NULL),
                     RT_EINVAL);
    assert_int_equal(rt_addr_dial_check("bad_name:1", NULL, NULL), RT_EINVAL);
}

/* A client given this machine's host name resolves it and connects (the
 * server listens on every address, wherever the name points locally). */
static void test_connect_by_name(void **state)
{
    char host[256], addr[300];
    struct addrinfo *ai = NULL;
    (void)state;
    if (gethostname(host, sizeof(host)) != 0 || !rt_addr_name_valid(host) ||
        getaddrinfo(host, NULL, NULL, &ai) != 0) {
        skip();
    }
    freeaddrinfo(ai);
    fx_init();
    assert_int_equal(
        rt_rpc_server_start(&F.loop, "0.0.0.0", 0, srv_echo, NULL, &F, &F.srv),
        0);
    F.port = rt_rpc_server_port(F.srv);
    snprintf(addr, sizeof(addr), "%s:%d", host, F.port);
    assert_int_equal(rt_rpc_client_start(&F.loop, addr, NULL, NULL, &F, &F.cli),
                     0);
    assert_int_equal(rt_rpc_call(rt_rpc_client_conn(F.cli), RT__METHOD__PING,
                                 (const uint8_t *)"early", 5, 5000,
                                 connecting_reply_cb, NULL),
                     0);
    fx_run_and_close();
    assert_int_equal(F.calls_done[0], 1);
    assert_int_equal(F.status[0], 0);
}

/* A name that does not resolve fails the calls waiting on it; closing the
 * client while a resolution may be in flight leaks nothing (the loop
 * closes with no handle left). */
static void unresolved_reply_cb(int status,
                                const uint8_t *body,
                                size_t len,
                                void *arg)
{
    (void)body;
    (void)len;
    (void)arg;
    F.status[0] = status;
    F.calls_done[0]++;
    fx_finish();
}

static void test_connect_unresolved(void **state)
{
    (void)state;
    fx_init();
    assert_int_equal(rt_rpc_client_start(&F.loop, "no-such-host.invalid:1",
                                         NULL, NULL, &F, &F.cli),
                     0);
    assert_int_equal(
        rt_rpc_call(rt_rpc_client_conn(F.cli), RT__METHOD__PING,
                    (const uint8_t *)"x", 1, 5000, unresolved_reply_cb, NULL),
        0);
    fx_run_and_close();
    assert_int_equal(F.calls_done[0], 1);
    assert_int_not_equal(F.status[0], 0);
}

/* ------------------------------------------------------------------ */
/* Output gate                                                         */
/* ------------------------------------------------------------------ */

static uint64_t gate_proposed, gate_committed;

static uint64_t gate_need(void *ud)
{
    (void)ud;
    return gate_proposed;
}

static uint64_t gate_have(void *ud)
{
    (void)ud;
    return gate_committed;
}

/* The server "proposes" index 5 before answering: its reply is tagged 5. */
static void srv_gated(struct rt_rpc_conn *conn,
                      uint32_t method,
                      uint64_t id,
                      const uint8_t *body,
                      size_t len,
                      void *ud)
{
    struct fx *f = ud;
    f->requests++;
    gate_proposed = 5;
    rt_rpc_reply(conn, id, method, 0, body, len);
}

static void gated_reply_cb(int status,
                           const uint8_t *body,
                           size_t len,
                           void *arg)
{
    (void)arg;
    if (status != 0 || !body_matches(0, body, len)) {
        F.bad++;
    }
    F.replies++;
    /* Only after the commit: the timer set gate_committed first. */
    if (gate_committed < 5) {
        F.bad++;
    }
    fx_finish();
}

static void gate_commit_cb(uv_timer_t *t)
{
    (void)t;
    /* Held so far: the reply depends on index 5, the commit is at 4. */
    assert_int_equal(F.requests, 1);
    assert_int_equal(F.replies, 0);
    gate_committed = 4;
    rt_rpc_gate_release();
    assert_int_equal(F.replies, 0);
    gate_committed = 5;
    rt_rpc_gate_release();
}

static void cli_gated_conn(struct rt_rpc_conn *conn, int up, void *ud)
{
    uint8_t body[128];
    size_t n = make_body(0, body);
    (void)ud;
    if (!up) {
        return;
    }
    assert_int_equal(rt_rpc_call(conn, RT__METHOD__PING, body, n, 5000,
                                 gated_reply_cb, NULL),
                     0);
    F.aux.data = &F;
    uv_timer_start(&F.aux, gate_commit_cb, 100, 0);
}

/* With the output gate set, a frame queued while the proposed index is
 * ahead of the committed one stays in its buffer until the commit reaches
 * it, then leaves unchanged; frames tagged at or below the commit (the
 * client's call) flow at once. */
static void test_output_gate(void **state)
{
    struct rt_rpc_gate g = {gate_need, gate_have, NULL};
    (void)state;
    gate_proposed = gate_committed = 0;
    rt_rpc_gate_set(&g);
    fx_init();
    start_server(srv_gated, srv_count_conn);
    start_client(NULL, cli_gated_conn);
    fx_run_and_close();
    rt_rpc_gate_set(NULL);
    assert_int_equal(F.requests, 1);
    assert_int_equal(F.replies, 1);
    assert_int_equal(F.bad, 0);
}

/* Credentials for --tls: one CA and one node, in a directory removed at
 * exit. */
static struct rt_tls *tls_setup(char *dir, size_t n)
{
    struct rt_pki_ca ca;
    struct rt_tls *t = NULL;
    char err[256], node[300];
    snprintf(dir, n, "/tmp/test_rpc_tls.XXXXXX");
    snprintf(node, sizeof(node), "%s/node", mkdtemp(dir));
    if (rt_pki_ca_create("test CA", 1, &ca, err, sizeof(err)) != 0 ||
        rt_pki_issue(&ca, "ps:test", 1, node, err, sizeof(err)) != 0 ||
        rt_tls_load(node, &t, err, sizeof(err)) != 0) {
        fprintf(stderr, "tls setup: %s\n", err);
        exit(1);
    }
    rt_pki_ca_free(&ca);
    return t;
}

int main(int argc, char **argv)
{
    int tls = argc > 1 && strcmp(argv[1], "--tls") == 0;
    char dir[256], cmd[300];
    struct rt_tls *t = NULL;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hdr_roundtrip),
        cmocka_unit_test(test_hdr_reject),
        cmocka_unit_test(test_reader_bytewise),
        cmocka_unit_test(test_reader_many),
        cmocka_unit_test(test_reader_bad),
        cmocka_unit_test(test_pipeline),
        cmocka_unit_test(test_reqid_travels),
        cmocka_unit_test(test_timeout),
        cmocka_unit_test(test_drop),
        cmocka_unit_test(test_drop_sent_reported),
        cmocka_unit_test(test_unsent_connect_refused),
        cmocka_unit_test(test_unsent_connect_abandoned),
        cmocka_unit_test(test_reconnect),
        cmocka_unit_test(test_call_while_connecting),
        cmocka_unit_test(test_symmetric),
        cmocka_unit_test(test_error_reply),
        cmocka_unit_test(test_notleader_reply),
        cmocka_unit_test(test_close_cancels),
        cmocka_unit_test(test_big_bodies),
        cmocka_unit_test(test_batches_of_every_size),
        cmocka_unit_test(test_bad_addr),
        cmocka_unit_test(test_addr_names),
        cmocka_unit_test(test_connect_by_name),
        cmocka_unit_test(test_connect_unresolved),
        cmocka_unit_test(test_output_gate),
        /* Last, plain only: their peer is a raw socket, which under TLS
         * never gets past the handshake (test_rpc_tls covers that). */
        cmocka_unit_test(test_unsent_behind_write),
        cmocka_unit_test(test_garbage_closes),
    };
    rt_log_init("test", RT_LOG_WARN);
    if (!tls) {
        return cmocka_run_group_tests(tests, NULL, NULL);
    }
    t = tls_setup(dir, sizeof(dir));
    rt_rpc_set_tls(t);
    int rc = _cmocka_run_group_tests("test_rpc --tls", tests,
                                     sizeof(tests) / sizeof(tests[0]) - 2, NULL,
                                     NULL);
    rt_rpc_set_tls(NULL);
    rt_tls_free(t);
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    return system(cmd) == 0 ? rc : 1;
}
