/* RPC under mutual TLS: who gets in. Both sides learn the other's
 * certificate name; a client speaking plain TCP, one without a
 * certificate, one of another CA, and one that never finishes its
 * handshake are all closed before any request callback runs. (The
 * ordinary request/reply cases run under TLS as test_rpc --tls.) */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include <openssl/err.h>
#include <openssl/ssl.h>

#include "rt.pb-c.h"
#include "rt_err.h"
#include "rt_log.h"
#include "rt_pki.h"
#include "rt_rpc.h"
#include "rt_time.h"
#include "rt_tls.h"

/* ------------------------------------------------------------------ */
/* Fixture                                                             */
/* ------------------------------------------------------------------ */

static char g_dir[256];
static struct rt_tls *g_master, *g_ps, *g_other, *g_admin;

static struct
{
    uv_loop_t loop;
    uv_timer_t watchdog;
    uv_timer_t aux;
    struct rt_rpc_server *srv;
    struct rt_rpc_client *cli;
    int port;
    int finished;
    int requests;
    int srv_up;
    int cli_up;
    int calls_done;
    int status;
    int bad;
    char srv_saw[RT_TLS_NAME_MAX];
    char cli_saw[RT_TLS_NAME_MAX];
    /* raw peer */
    uv_tcp_t raw;
    uv_connect_t creq;
    uv_write_t wreq;
    uint8_t frame[RT_RPC_HDR_SIZE + 4];
    uint8_t rbuf[4096];
    int raw_closed;
    uint64_t t0, t_closed;
    /* the thread of a client without a certificate */
    volatile int thread_done;
    int thread_read_rc;
} F;

static struct rt_tls *load(const char *sub)
{
    char d[300], err[256];
    struct rt_tls *t = NULL;
    snprintf(d, sizeof(d), "%s/%s", g_dir, sub);
    if (rt_tls_load(d, &t, err, sizeof(err)) != 0) {
        fprintf(stderr, "%s: %s\n", d, err);
        return NULL;
    }
    return t;
}

static int setup_all(void **state)
{
    struct rt_pki_ca ca, other;
    char err[256], d[300];
    (void)state;
    snprintf(g_dir, sizeof(g_dir), "/tmp/test_rpc_tls.XXXXXX");
    if (mkdtemp(g_dir) == NULL ||
        rt_pki_ca_create("cluster", 1, &ca, err, sizeof(err)) != 0 ||
        rt_pki_ca_create("other", 1, &other, err, sizeof(err)) != 0)
        return -1;
    snprintf(d, sizeof(d), "%s/m1", g_dir);
    if (rt_pki_issue(&ca, "master:m1", 1, d, err, sizeof(err)) != 0)
        return -1;
    snprintf(d, sizeof(d), "%s/ps1", g_dir);
    if (rt_pki_issue(&ca, "ps:ps1", 1, d, err, sizeof(err)) != 0)
        return -1;
    snprintf(d, sizeof(d), "%s/op", g_dir);
    if (rt_pki_issue(&ca, "admin:op", 1, d, err, sizeof(err)) != 0)
        return -1;
    snprintf(d, sizeof(d), "%s/x", g_dir);
    if (rt_pki_issue(&other, "master:m1", 1, d, err, sizeof(err)) != 0)
        return -1;
    rt_pki_ca_free(&ca);
    rt_pki_ca_free(&other);
    g_master = load("m1");
    g_ps = load("ps1");
    g_other = load("x");
    g_admin = load("op");
    return g_master && g_ps && g_other && g_admin ? 0 : -1;
}

static int teardown_all(void **state)
{
    char cmd[300];
    (void)state;
    rt_rpc_set_tls(NULL);
    rt_tls_free(g_master);
    rt_tls_free(g_ps);
    rt_tls_free(g_other);
    rt_tls_free(g_admin);
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", g_dir);
    return system(cmd) == 0 ? 0 : -1;
}

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
    uv_timer_start(&F.watchdog, watchdog_cb, 9000, 0);
    uv_timer_init(&F.loop, &F.aux);
    F.t0 = rt_time_mono_ms();
}

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

static void fx_run_and_close(void)
{
    uv_run(&F.loop, UV_RUN_DEFAULT);
    assert_true(F.finished);
    assert_int_equal(uv_loop_close(&F.loop), 0);
}

/* ------------------------------------------------------------------ */
/* Helpers                                                             */
/* ------------------------------------------------------------------ */

static void srv_echo(struct rt_rpc_conn *conn,
                     uint32_t method,
                     uint64_t id,
                     const uint8_t *body,
                     size_t len,
                     void *ud)
{
    (void)ud;
    F.requests++;
    snprintf(F.srv_saw, sizeof(F.srv_saw), "%s", rt_rpc_conn_peer_name(conn));
    rt_rpc_reply(conn, id, method, 0, body, len);
}

static void start_server(struct rt_tls *tls)
{
    rt_rpc_set_tls(tls);
    assert_int_equal(rt_rpc_server_start(&F.loop, "127.0.0.1", 0, srv_echo,
                                         NULL, NULL, &F.srv),
                     0);
    F.port = rt_rpc_server_port(F.srv);
}

static void start_client(struct rt_tls *tls, rt_rpc_conn_cb on_conn)
{
    char addr[64];
    snprintf(addr, sizeof(addr), "127.0.0.1:%d", F.port);
    rt_rpc_set_tls(tls);
    assert_int_equal(
        rt_rpc_client_start(&F.loop, addr, NULL, on_conn, NULL, &F.cli), 0);
    rt_rpc_set_tls(NULL);
}

static void finish_cb(uv_timer_t *t)
{
    (void)t;
    fx_finish();
}

/* A well-formed PING request, id 1, 4-byte body. */
static void make_frame(uint8_t *out)
{
    struct rt_rpc_hdr h = {.len = 4, .method = RT__METHOD__PING, .id = 1};
    rt_rpc_hdr_encode(&h, out);
    memcpy(out + RT_RPC_HDR_SIZE, "ping", 4);
}

/* ------------------------------------------------------------------ */
/* Tests: cluster members                                              */
/* ------------------------------------------------------------------ */

static void named_reply_cb(int status,
                           const uint8_t *body,
                           size_t len,
                           void *arg)
{
    (void)arg;
    F.calls_done++;
    F.status = status;
    if (status != 0 || len != 3 || memcmp(body, "abc", 3) != 0) {
        F.bad++;
    }
    fx_finish();
}

static void named_cli_conn(struct rt_rpc_conn *conn, int up, void *ud)
{
    (void)ud;
    if (!up) {
        return;
    }
    F.cli_up++;
    snprintf(F.cli_saw, sizeof(F.cli_saw), "%s", rt_rpc_conn_peer_name(conn));
    rt_rpc_call(conn, RT__METHOD__PING, (const uint8_t *)"abc", 3, 2000,
                named_reply_cb, NULL);
}

/* Two members of the cluster connect; each side sees the other's
 * certificate name, and a call goes through. */
static void test_members_see_names(void **state)
{
    (void)state;
    fx_init();
    start_server(g_master);
    start_client(g_ps, named_cli_conn);
    fx_run_and_close();
    assert_int_equal(F.calls_done, 1);
    assert_int_equal(F.status, 0);
    assert_int_equal(F.bad, 0);
    assert_string_equal(F.srv_saw, "ps:ps1");
    assert_string_equal(F.cli_saw, "master:m1");
}

static void other_reply_cb(int status,
                           const uint8_t *body,
                           size_t len,
                           void *arg)
{
    (void)body;
    (void)len;
    (void)arg;
    F.calls_done++;
    F.status = status;
}

/* A client of another CA never gets a request through (each side refuses
 * the other's certificate); the client's call fails as on a dead
 * connection, and it does not retry in a tight loop. */
static void test_other_ca_refused(void **state)
{
    (void)state;
    uint64_t before = rt_rpc_tls_refused();
    fx_init();
    start_server(g_master);
    start_client(g_other, NULL);
    rt_rpc_call(rt_rpc_client_conn(F.cli), RT__METHOD__PING,
                (const uint8_t *)"abc", 3, 2000, other_reply_cb, NULL);
    uv_timer_start(&F.aux, finish_cb, 1000, 0);
    fx_run_and_close();
    assert_int_equal(F.requests, 0);
    assert_int_equal(F.calls_done, 1);
    assert_true(F.status == RT_ENOCONN || F.status == RT_ENOTSENT);
    uint64_t refused = rt_rpc_tls_refused() - before;
    /* Both ends count (one process); backoff keeps attempts few. */
    assert_true(refused >= 1);
    assert_true(refused <= 20);
}

/* A server of another CA is refused by a member client the same way. */
static void test_member_refuses_foreign_server(void **state)
{
    (void)state;
    fx_init();
    start_server(g_other);
    start_client(g_ps, NULL);
    rt_rpc_call(rt_rpc_client_conn(F.cli), RT__METHOD__PING,
                (const uint8_t *)"abc", 3, 2000, other_reply_cb, NULL);
    uv_timer_start(&F.aux, finish_cb, 500, 0);
    fx_run_and_close();
    assert_int_equal(F.requests, 0);
    assert_int_equal(F.calls_done, 1);
    assert_true(F.status == RT_ENOCONN || F.status == RT_ENOTSENT);
}

/* A client that talks to partition servers only does not come up to a
 * master's certificate (an address taken over by another member): its
 * call fails as on a dead connection and the server runs nothing. */
static void test_client_expects_role(void **state)
{
    (void)state;
    uint64_t before = rt_rpc_tls_refused();
    fx_init();
    start_server(g_master);
    start_client(g_ps, named_cli_conn);
    rt_rpc_client_expect_roles(F.cli, RT_RPC_ROLE_PS);
    rt_rpc_call(rt_rpc_client_conn(F.cli), RT__METHOD__PING,
                (const uint8_t *)"abc", 3, 2000, other_reply_cb, NULL);
    uv_timer_start(&F.aux, finish_cb, 500, 0);
    fx_run_and_close();
    assert_int_equal(F.cli_up, 0);
    assert_int_equal(F.requests, 0);
    assert_int_equal(F.calls_done, 1);
    assert_true(F.status == RT_ENOCONN || F.status == RT_ENOTSENT);
    assert_true(rt_rpc_tls_refused() - before >= 1);
}

/* ------------------------------------------------------------------ */
/* Tests: raw peers                                                    */
/* ------------------------------------------------------------------ */

static void raw_alloc(uv_handle_t *h, size_t n, uv_buf_t *b)
{
    (void)h;
    (void)n;
    *b = uv_buf_init((char *)F.rbuf, sizeof(F.rbuf));
}

static void raw_read(uv_stream_t *s, ssize_t n, const uv_buf_t *b)
{
    (void)b;
    if (n >= 0) {
        return;
    }
    F.raw_closed = 1;
    F.t_closed = rt_time_mono_ms();
    uv_close((uv_handle_t *)s, NULL);
    fx_finish();
}

static void raw_write_cb(uv_write_t *w, int status)
{
    (void)w;
    (void)status;
}

static void raw_connect_cb(uv_connect_t *req, int status)
{
    (void)req;
    assert_int_equal(status, 0);
    uv_read_start((uv_stream_t *)&F.raw, raw_alloc, raw_read);
    if (F.frame[4] != 0) { /* a frame was prepared: send it */
        uv_buf_t b = uv_buf_init((char *)F.frame, sizeof(F.frame));
        uv_write(&F.wreq, (uv_stream_t *)&F.raw, &b, 1, raw_write_cb);
    }
}

static void raw_connect(void)
{
    struct sockaddr_in sa;
    uv_tcp_init(&F.loop, &F.raw);
    uv_ip4_addr("127.0.0.1", F.port, &sa);
    uv_tcp_connect(&F.creq, &F.raw, (const struct sockaddr *)&sa,
                   raw_connect_cb);
}

/* A well-formed request frame over plain TCP is never read as a request:
 * the connection is closed and counted. */
static void test_plain_frame_closed(void **state)
{
    (void)state;
    uint64_t before = rt_rpc_tls_refused();
    fx_init();
    start_server(g_master);
    rt_rpc_set_tls(NULL);
    make_frame(F.frame);
    raw_connect();
    fx_run_and_close();
    assert_true(F.raw_closed);
    assert_int_equal(F.requests, 0);
    assert_int_equal(rt_rpc_tls_refused() - before, 1);
}

/* A peer that connects and sends nothing is closed once the handshake's
 * time (5 s) is up, not kept forever. */
static void test_slow_handshake_closed(void **state)
{
    (void)state;
    fx_init();
    start_server(g_master);
    rt_rpc_set_tls(NULL);
    raw_connect();
    fx_run_and_close();
    assert_true(F.raw_closed);
    uint64_t took = F.t_closed - F.t0;
    assert_true(took >= 4900);
    assert_true(took < 7000);
    assert_int_equal(F.requests, 0);
}

/* A TLS client that does not check the server and presents the
 * certificate in directory @arg (NULL: none): blocking OpenSSL in a
 * thread. */
static void *rogue_thread(void *arg)
{
    const char *sub = arg;
    SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
    SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, NULL);
    if (sub) {
        char crt[300], key[300];
        snprintf(crt, sizeof(crt), "%s/%s/node.crt", g_dir, sub);
        snprintf(key, sizeof(key), "%s/%s/node.key", g_dir, sub);
        assert_int_equal(
            SSL_CTX_use_certificate_file(ctx, crt, SSL_FILETYPE_PEM), 1);
        assert_int_equal(
            SSL_CTX_use_PrivateKey_file(ctx, key, SSL_FILETYPE_PEM), 1);
    }
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET,
                             .sin_port = htons((uint16_t)F.port)};
    inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
    F.thread_read_rc = 99;
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0) {
        SSL *ssl = SSL_new(ctx);
        uint8_t frame[RT_RPC_HDR_SIZE + 4], buf[64];
        make_frame(frame);
        SSL_set_fd(ssl, fd);
        /* TLS 1.3: the client finishes before the server judges it. */
        if (SSL_connect(ssl) == 1) {
            (void)SSL_write(ssl, frame, sizeof(frame));
        }
        F.thread_read_rc = SSL_read(ssl, buf, sizeof(buf));
        SSL_free(ssl);
    }
    close(fd);
    SSL_CTX_free(ctx);
    ERR_clear_error();
    F.thread_done = 1;
    return NULL;
}

static void poll_thread_cb(uv_timer_t *t)
{
    (void)t;
    if (F.thread_done) {
        fx_finish();
    }
}

static void run_rogue(const char *sub)
{
    pthread_t th;
    uint64_t before = rt_rpc_tls_refused();
    fx_init();
    start_server(g_master);
    rt_rpc_set_tls(NULL);
    assert_int_equal(pthread_create(&th, NULL, rogue_thread, (void *)sub), 0);
    uv_timer_start(&F.aux, poll_thread_cb, 10, 10);
    fx_run_and_close();
    pthread_join(th, NULL);
    assert_true(F.thread_read_rc <= 0);
    assert_int_equal(F.requests, 0);
    assert_int_equal(rt_rpc_tls_refused() - before, 1);
}

/* A TLS client presenting no certificate is refused; its request frame is
 * never read. */
static void test_no_cert_refused(void **state)
{
    (void)state;
    run_rogue(NULL);
}

/* A client presenting a certificate of another CA (with a member's very
 * name) is refused by the server; its request frame is never read. */
static void test_foreign_client_cert_refused(void **state)
{
    (void)state;
    run_rogue("x");
}

/* ------------------------------------------------------------------ */
/* Tests: authorization by role                                        */
/* ------------------------------------------------------------------ */

/* A server whose method table lets only masters call PING. */
static void srv_masters_only(struct rt_rpc_conn *conn,
                             uint32_t method,
                             uint64_t id,
                             const uint8_t *body,
                             size_t len,
                             void *ud)
{
    (void)ud;
    if (rt_rpc_authorize(conn, method, id, RT_RPC_ROLE_MASTER) != 0) {
        return;
    }
    F.requests++;
    rt_rpc_reply(conn, id, method, 0, body, len);
}

static void authz_reply_cb(int status,
                           const uint8_t *body,
                           size_t len,
                           void *arg)
{
    (void)arg;
    F.calls_done++;
    F.status = status;
    if (status == RT_EPERM) {
        Rt__Error *e = rt__error__unpack(NULL, len, body);
        if (e == NULL ||
            strstr(e->message, "ps:ps1 may not call PING") == NULL) {
            F.bad++;
        }
        rt__error__free_unpacked(e, NULL);
    }
    fx_finish();
}

static void authz_cli_conn(struct rt_rpc_conn *conn, int up, void *ud)
{
    (void)ud;
    if (up && F.cli_up++ == 0) {
        rt_rpc_call(conn, RT__METHOD__PING, (const uint8_t *)"abc", 3, 2000,
                    authz_reply_cb, NULL);
    }
}

static void run_authz(struct rt_tls *client)
{
    fx_init();
    rt_rpc_set_tls(g_master);
    assert_int_equal(rt_rpc_server_start(&F.loop, "127.0.0.1", 0,
                                         srv_masters_only, NULL, NULL, &F.srv),
                     0);
    F.port = rt_rpc_server_port(F.srv);
    start_client(client, authz_cli_conn);
    fx_run_and_close();
    assert_int_equal(F.calls_done, 1);
    assert_int_equal(F.bad, 0);
}

/* A member whose role the method table does not name is answered
 * RT_EPERM naming itself and the method; the handler never runs. */
static void test_wrong_role_refused(void **state)
{
    (void)state;
    uint64_t before = rt_rpc_refused_calls();
    run_authz(g_ps);
    assert_int_equal(F.status, RT_EPERM);
    assert_int_equal(F.requests, 0);
    assert_int_equal(rt_rpc_refused_calls() - before, 1);
}

/* An admin certificate may call anything. */
static void test_admin_allowed(void **state)
{
    (void)state;
    run_authz(g_admin);
    assert_int_equal(F.status, 0);
    assert_int_equal(F.requests, 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_members_see_names),
        cmocka_unit_test(test_other_ca_refused),
        cmocka_unit_test(test_member_refuses_foreign_server),
        cmocka_unit_test(test_client_expects_role),
        cmocka_unit_test(test_plain_frame_closed),
        cmocka_unit_test(test_no_cert_refused),
        cmocka_unit_test(test_foreign_client_cert_refused),
        cmocka_unit_test(test_wrong_role_refused),
        cmocka_unit_test(test_admin_allowed),
        cmocka_unit_test(test_slow_handshake_closed),
    };
    rt_log_init("test", RT_LOG_WARN);
    return cmocka_run_group_tests(tests, setup_all, teardown_all);
}
