/* ms_rtls: three ms_raft members in one uv loop whose raft traffic goes
 * over mutual TLS (certificates from a test CA made with rt_pki), on real
 * loopback sockets. Hostile clients run in a helper thread while the loop
 * keeps the group alive. The state machine counts 4-byte entries. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <openssl/ssl.h>
#include <uv.h>

#include "ms_raft.h"
#include "ms_rtls.h"
#include "rt_pki.h"
#include "rt_tls.h"
#include "th_dir.h"

#define N3 3

/* ---- Fixture ---- */

struct member
{
    struct ms_raft *r;
    struct rt_tls *tls;
    uint32_t n;      /* entries applied */
    uint32_t last;   /* last value applied */
    char tmp[64];    /* its data dir */
    char creds[160]; /* its credentials */
};

struct trio
{
    uv_loop_t loop;
    char pki[64]; /* CA and every test certificate */
    struct member m[N3];
    struct ms_raft_peer peers[N3];
};

static int count_apply(void *ud, uint64_t index, const uint8_t *buf, size_t len)
{
    struct member *m = ud;

    (void)index;
    assert_int_equal(len, 4);
    m->n++;
    m->last = rt_get_u32le(buf);
    return 0;
}

static int count_snapshot(void *ud, struct rt_buf *out)
{
    struct member *m = ud;
    uint8_t b[8];

    rt_put_u32le(b, m->n);
    rt_put_u32le(b + 4, m->last);
    rt_buf_append(out, b, 8);
    return 0;
}

static int count_restore(void *ud, const uint8_t *buf, size_t len)
{
    struct member *m = ud;

    if (len != 8)
        return RT_ECORRUPT;
    m->n = rt_get_u32le(buf);
    m->last = rt_get_u32le(buf + 4);
    return 0;
}

static void changed(void *ud)
{
    (void)ud;
}

/* Issues @cn from @ca into @pki/@sub. */
static void issue(const struct rt_pki_ca *ca,
                  const char *pki,
                  const char *sub,
                  const char *cn,
                  char *dir,
                  size_t n)
{
    char err[256];

    snprintf(dir, n, "%s/%s", pki, sub);
    if (rt_pki_issue(ca, cn, 2, dir, err, sizeof err) != 0)
        fail_msg("issue %s: %s", cn, err);
}

static int free_port(void)
{
    struct sockaddr_in sa;
    socklen_t len = sizeof sa;
    int fd = socket(AF_INET, SOCK_STREAM, 0);

    assert_true(fd >= 0);
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof sa), 0);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&sa, &len), 0);
    close(fd);
    return ntohs(sa.sin_port);
}

static void trio_start(struct trio *c, int i)
{
    struct ms_raft_opts o = {0};
    struct ms_raft_fsm f = {&c->m[i], count_apply, count_snapshot,
                            count_restore};
    char errmsg[RT_ERRMSG_SIZE], dir[160];

    snprintf(dir, sizeof dir, "%s/raft", c->m[i].tmp);
    o.id = c->peers[i].id;
    o.dir = dir;
    o.listen = c->peers[i].addr;
    o.peers = c->peers;
    o.npeers = N3;
    o.bootstrap = true;
    o.election_ms = 300;
    o.heartbeat_ms = 50;
    o.segment_size = 256 * 1024;
    o.tls = c->m[i].tls;
    o.tls_handshake_ms = 1000; /* the silent client below waits this */
    if (ms_raft_start(&c->loop, &o, &f, changed, &c->m[i], &c->m[i].r,
                      errmsg) != 0)
        fail_msg("start %d: %s", i, errmsg);
}

/* A CA, three masters' credentials, and the three members started. */
static struct trio *trio_new(void)
{
    struct trio *c = calloc(1, sizeof *c);
    struct rt_pki_ca ca;
    char err[256], cn[32];

    assert_int_equal(uv_loop_init(&c->loop), 0);
    assert_int_equal(th_dir_create("ms_rtls", c->pki, sizeof c->pki), 0);
    if (rt_pki_ca_create("rtls test CA", 2, &ca, err, sizeof err) != 0 ||
        rt_pki_ca_write(c->pki, &ca, err, sizeof err) != 0)
        fail_msg("CA: %s", err);
    for (int i = 0; i < N3; i++) {
        char sub[16];

        snprintf(sub, sizeof sub, "m%d", i + 1);
        snprintf(cn, sizeof cn, "master:m%d", i + 1);
        issue(&ca, c->pki, sub, cn, c->m[i].creds, sizeof c->m[i].creds);
        if (rt_tls_load(c->m[i].creds, &c->m[i].tls, err, sizeof err) != 0)
            fail_msg("load %s: %s", cn, err);
        assert_int_equal(th_dir_create("ms_rtls", c->m[i].tmp, 64), 0);
        c->peers[i].id = (uint64_t)i + 1;
        snprintf(c->peers[i].addr, sizeof c->peers[i].addr, "127.0.0.1:%d",
                 free_port());
    }
    /* What the hostile clients use: a partition server's certificate of
     * the same CA, a master's of the same CA (the control), and a master's
     * certificate from another CA. */
    {
        char d[160];
        struct rt_pki_ca other;

        issue(&ca, c->pki, "ps1", "ps:ps1", d, sizeof d);
        issue(&ca, c->pki, "m9", "master:m9", d, sizeof d);
        if (rt_pki_ca_create("another CA", 2, &other, err, sizeof err) != 0)
            fail_msg("other CA: %s", err);
        issue(&other, c->pki, "foreign", "master:m1", d, sizeof d);
        rt_pki_ca_free(&other);
    }
    rt_pki_ca_free(&ca);
    for (int i = 0; i < N3; i++)
        trio_start(c, i);
    return c;
}

static bool run_until(uv_loop_t *loop,
                      bool (*pred)(void *),
                      void *arg,
                      unsigned ms)
{
    uint64_t deadline;

    uv_update_time(loop);
    deadline = uv_now(loop) + ms;
    while (!pred(arg)) {
        uv_update_time(loop);
        if (uv_now(loop) > deadline)
            return false;
        uv_run(loop, UV_RUN_NOWAIT);
        usleep(1000);
    }
    return true;
}

static int trio_leader(struct trio *c)
{
    int leader = -1;

    for (int i = 0; i < N3; i++) {
        if (c->m[i].r != NULL && ms_raft_is_leader(c->m[i].r)) {
            if (leader >= 0)
                return -1;
            leader = i;
        }
    }
    if (leader < 0)
        return -1;
    for (int i = 0; i < N3; i++) {
        if (c->m[i].r != NULL &&
            ms_raft_leader(c->m[i].r, NULL) != c->peers[leader].id)
            return -1;
    }
    return leader;
}

static bool trio_has_leader(void *arg)
{
    return trio_leader(arg) >= 0;
}

struct want
{
    struct trio *c;
    uint32_t n;
};

static bool trio_applied(void *arg)
{
    struct want *w = arg;

    for (int i = 0; i < N3; i++) {
        if (w->c->m[i].r != NULL && w->c->m[i].n < w->n)
            return false;
    }
    return true;
}

static void propose(struct ms_raft *r, uint32_t v)
{
    uint8_t b[4];

    rt_put_u32le(b, v);
    assert_int_equal(ms_raft_propose(r, b, 4, NULL), 0);
}

static void on_closed(void *ud)
{
    (*(int *)ud)++;
}

static bool flag_set(void *arg)
{
    return *(int *)arg != 0;
}

static void member_close(struct trio *c, int i)
{
    int closed = 0;

    ms_raft_close(c->m[i].r, on_closed, &closed);
    assert_true(run_until(&c->loop, flag_set, &closed, 5000));
    c->m[i].r = NULL;
}

static void trio_free(struct trio *c)
{
    for (int i = 0; i < N3; i++) {
        if (c->m[i].r != NULL)
            member_close(c, i);
    }
    /* The connection threads and handles are gone with the members. */
    assert_int_equal(uv_loop_close(&c->loop), 0);
    for (int i = 0; i < N3; i++) {
        rt_tls_free(c->m[i].tls);
        th_dir_remove(c->m[i].tmp);
    }
    th_dir_remove(c->pki);
    free(c);
}

/* ---- Helpers: hostile clients, in a thread of their own ---- */

enum probe_kind {
    PROBE_PLAIN,   /* raw TCP: a forged raft handshake + an entry */
    PROBE_SILENT,  /* raw TCP that sends nothing */
    PROBE_NOCERT,  /* TLS without a client certificate */
    PROBE_PS,      /* TLS with a ps: certificate of the cluster CA */
    PROBE_FOREIGN, /* TLS with a master: certificate of another CA */
    PROBE_MASTER,  /* TLS with a master: certificate of the CA (control) */
};

struct probe
{
    enum probe_kind kind;
    int port;
    SSL_CTX *ctx;
    /* Results */
    bool closed;       /* the server closed the connection */
    bool held;         /* still open after the wait */
    uint64_t close_ms; /* how long until it was closed */
    char why[128];
};

static void hello(uint8_t *b, size_t *n)
{
    /* raft_uv_tcp's handshake: protocol 1, id 7, a 16-byte address, then
     * bytes libraft would parse as a message if they ever reached it. */
    memset(b, 0, 64);
    b[0] = 1;
    b[8] = 7;
    b[16] = 16;
    memcpy(b + 24, "127.0.0.1:9", 11);
    memset(b + 40, 0xAB, 24);
    *n = 64;
}

static uint64_t now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void *probe_run(void *arg)
{
    struct probe *p = arg;
    struct sockaddr_in sa;
    struct timeval tv = {3, 0};
    uint8_t b[64], rb[64];
    size_t n;
    uint64_t t0;
    int fd = socket(AF_INET, SOCK_STREAM, 0), rv;
    SSL *ssl = NULL;

    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_port = htons((uint16_t)p->port);
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
        snprintf(p->why, sizeof p->why, "connect: %s", strerror(errno));
        close(fd);
        return NULL;
    }
    if (p->kind == PROBE_MASTER)
        tv.tv_sec = 1;
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    t0 = now_ms();
    hello(b, &n);
    if (p->kind == PROBE_MASTER)
        n = 40; /* the handshake alone: libraft then waits for a message */
    if (p->kind == PROBE_PLAIN || p->kind == PROBE_SILENT) {
        if (p->kind == PROBE_PLAIN)
            (void)!write(fd, b, n);
        rv = (int)read(fd, rb, sizeof rb);
        p->closed = rv == 0 || (rv < 0 && errno == ECONNRESET);
        p->held = rv < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
    } else {
        ssl = SSL_new(p->ctx);
        SSL_set_fd(ssl, fd);
        if (SSL_connect(ssl) == 1 && SSL_write(ssl, b, (int)n) == (int)n) {
            rv = SSL_read(ssl, rb, sizeof rb);
            int err = SSL_get_error(ssl, rv);
            /* SO_RCVTIMEO expiring is a retryable read to OpenSSL. */
            p->held = rv <= 0 && (err == SSL_ERROR_WANT_READ ||
                                  (err == SSL_ERROR_SYSCALL &&
                                   (errno == EAGAIN || errno == EWOULDBLOCK)));
            p->closed = rv <= 0 && !p->held;
        } else {
            p->closed = true; /* refused during the handshake */
        }
        SSL_free(ssl);
    }
    p->close_ms = now_ms() - t0;
    close(fd);
    return NULL;
}

struct probe_run
{
    struct probe *p;
    bool done;
    pthread_t th;
};

static void *probe_thread(void *arg)
{
    struct probe_run *pr = arg;

    probe_run(pr->p);
    __atomic_store_n(&pr->done, true, __ATOMIC_RELEASE);
    return NULL;
}

static bool probe_done(void *arg)
{
    return __atomic_load_n(&((struct probe_run *)arg)->done, __ATOMIC_ACQUIRE);
}

/* Runs @p against the group while the loop keeps it alive. */
static void probe(struct trio *c, struct probe *p)
{
    struct probe_run pr = {p, false, 0};

    assert_int_equal(pthread_create(&pr.th, NULL, probe_thread, &pr), 0);
    assert_true(run_until(&c->loop, probe_done, &pr, 8000));
    pthread_join(pr.th, NULL);
    if (p->why[0] != '\0')
        fail_msg("probe %d: %s", p->kind, p->why);
}

/* A client context that trusts any server, so that a refusal is the
 * server's: with the certificate in @pki/@sub, or none. */
static SSL_CTX *trusting_ctx(const char *pki, const char *sub)
{
    SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
    char f[200];

    SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, NULL);
    if (sub != NULL) {
        snprintf(f, sizeof f, "%s/%s/node.crt", pki, sub);
        assert_int_equal(SSL_CTX_use_certificate_file(ctx, f, SSL_FILETYPE_PEM),
                         1);
        snprintf(f, sizeof f, "%s/%s/node.key", pki, sub);
        assert_int_equal(SSL_CTX_use_PrivateKey_file(ctx, f, SSL_FILETYPE_PEM),
                         1);
    }
    return ctx;
}

/* A client context with the cluster credentials in @pki/@sub. */
static SSL_CTX *client_ctx(const char *pki, const char *sub, struct rt_tls **t)
{
    char d[160], err[256];
    SSL_CTX *ctx;

    snprintf(d, sizeof d, "%s/%s", pki, sub);
    if (rt_tls_load(d, t, err, sizeof err) != 0)
        fail_msg("load %s: %s", d, err);
    ctx = rt_tls_client_ctx(*t);
    SSL_CTX_up_ref(ctx);
    return ctx;
}

/* ---- Tests ---- */

/* Three members whose raft traffic is mutual TLS elect a leader, commit
 * what it proposes on every member, and when the leader goes the other two
 * elect a new one that keeps every committed entry and commits more. */
static void test_tls_group_elects_commits_survives(void **state)
{
    struct trio *c = trio_new();
    struct want w = {c, 0};
    struct ms_rtls_stats st;
    int l, l2;

    (void)state;
    assert_true(run_until(&c->loop, trio_has_leader, c, 10000));
    l = trio_leader(c);
    for (uint32_t i = 0; i < 50; i++)
        propose(c->m[l].r, i);
    w.n = 50;
    assert_true(run_until(&c->loop, trio_applied, &w, 5000));
    for (int i = 0; i < N3; i++)
        assert_int_equal(c->m[i].last, 49);
    ms_raft_transport_stats(c->m[l].r, &st);
    assert_true(st.connected >= 2); /* it dialled both followers */
    assert_int_equal(st.refused, 0);

    member_close(c, l);
    assert_true(run_until(&c->loop, trio_has_leader, c, 10000));
    l2 = trio_leader(c);
    assert_int_not_equal(l2, l);
    for (uint32_t i = 50; i < 70; i++)
        propose(c->m[l2].r, i);
    w.n = 70;
    assert_true(run_until(&c->loop, trio_applied, &w, 5000));
    for (int i = 0; i < N3; i++) {
        if (c->m[i].r != NULL)
            assert_int_equal(c->m[i].last, 69);
    }
    trio_free(c);
}

/* Plain TCP (a forged raft handshake, or silence), TLS without a
 * certificate, with a ps: certificate of the cluster CA, or with a master:
 * certificate of another CA: each is closed, none reaches libraft (the
 * leader stays, the term does not move, entries still commit), and each
 * counts as refused; a master: certificate of the CA is kept open. */
static void test_tls_refuses_non_masters(void **state)
{
    struct trio *c = trio_new();
    struct want w = {c, 0};
    struct ms_rtls_stats st;
    struct rt_tls *ps_t, *m9_t;
    struct probe p;
    uint64_t term;
    uint64_t refused0;
    int l, target;

    (void)state;
    assert_true(run_until(&c->loop, trio_has_leader, c, 10000));
    l = trio_leader(c);
    term = ms_raft_term(c->m[l].r);
    target = (l + 1) % N3; /* a follower: pre-vote would not protect it */
    {
        const char *a = strrchr(c->peers[target].addr, ':');
        memset(&p, 0, sizeof p);
        p.port = atoi(a + 1);
    }
    ms_raft_transport_stats(c->m[target].r, &st);
    refused0 = st.refused;

    p.kind = PROBE_PLAIN;
    probe(c, &p);
    assert_true(p.closed);

    p.kind = PROBE_SILENT;
    probe(c, &p);
    assert_true(p.closed);
    assert_true(p.close_ms >= 900 && p.close_ms < 2500); /* the 1 s bound */

    p.kind = PROBE_NOCERT;
    p.ctx = trusting_ctx(c->pki, NULL);
    probe(c, &p);
    assert_true(p.closed);
    SSL_CTX_free(p.ctx);

    p.kind = PROBE_PS;
    p.ctx = client_ctx(c->pki, "ps1", &ps_t);
    probe(c, &p);
    assert_true(p.closed);
    SSL_CTX_free(p.ctx);

    p.kind = PROBE_FOREIGN;
    p.ctx = trusting_ctx(c->pki, "foreign");
    probe(c, &p);
    assert_true(p.closed);
    SSL_CTX_free(p.ctx);

    /* Let the loop reap the refused connections' threads. */
    for (int i = 0; i < 50; i++) {
        uv_run(&c->loop, UV_RUN_NOWAIT);
        usleep(2000);
    }
    ms_raft_transport_stats(c->m[target].r, &st);
    assert_int_equal(st.refused - refused0, 5);

    /* The control: a master of the cluster CA gets through and is held. */
    p.kind = PROBE_MASTER;
    p.ctx = client_ctx(c->pki, "m9", &m9_t);
    p.closed = p.held = false;
    probe(c, &p);
    assert_true(p.held);
    SSL_CTX_free(p.ctx);

    /* Nothing disturbed the group. */
    assert_int_equal(trio_leader(c), l);
    assert_int_equal(ms_raft_term(c->m[l].r), term);
    assert_int_equal(ms_raft_term(c->m[target].r), term);
    for (uint32_t i = 0; i < 10; i++)
        propose(c->m[l].r, i);
    w.n = 10;
    assert_true(run_until(&c->loop, trio_applied, &w, 5000));

    rt_tls_free(ps_t);
    rt_tls_free(m9_t);
    trio_free(c);
}

static int connect_silent(int port)
{
    struct sockaddr_in sa;
    int fd = socket(AF_INET, SOCK_STREAM, 0);

    assert_true(fd >= 0);
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_port = htons((uint16_t)port);
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof sa), 0);
    return fd;
}

/* 0 = open, 1 = closed by the server (EOF or reset). */
static int peer_closed(int fd)
{
    struct pollfd p = {fd, POLLIN, 0};
    char b;

    if (poll(&p, 1, 0) <= 0)
        return 0;
    return recv(fd, &b, 1, MSG_DONTWAIT) <= 0;
}

struct flood
{
    int *fds;
    int n;
    int want_closed;
};

static bool flood_closed(void *arg)
{
    struct flood *f = arg;
    int closed = 0;

    for (int i = 0; i < f->n; i++)
        closed += peer_closed(f->fds[i]);
    return closed >= f->want_closed;
}

/* A flood of connections from one address that never start their
 * handshake: beyond MS_RTLS_MAX_HANDSHAKING_PER_IP at once the surplus is
 * closed on accept, the rest at the handshake bound, and the group keeps
 * its leader and term and commits meanwhile. */
static void test_tls_handshake_flood_is_bounded(void **state)
{
    struct trio *c = trio_new();
    struct want w = {c, 0};
    struct ms_rtls_stats st;
    enum {
        N = MS_RTLS_MAX_HANDSHAKING + 6,
        EXTRA = N - MS_RTLS_MAX_HANDSHAKING_PER_IP
    };
    int fds[N], l, target, port;
    struct flood f = {fds, N, EXTRA};
    uint64_t term, refused0;

    (void)state;
    assert_true(run_until(&c->loop, trio_has_leader, c, 10000));
    l = trio_leader(c);
    term = ms_raft_term(c->m[l].r);
    target = (l + 1) % N3;
    port = atoi(strrchr(c->peers[target].addr, ':') + 1);
    ms_raft_transport_stats(c->m[target].r, &st);
    refused0 = st.refused;
    for (int i = 0; i < N; i++)
        fds[i] = connect_silent(port);
    /* The surplus goes at once, long before the 1 s bound. */
    assert_true(run_until(&c->loop, flood_closed, &f, 500));
    /* At least the surplus (a peer's own reconnection from the same
     * loopback address may be turned away meanwhile too). */
    ms_raft_transport_stats(c->m[target].r, &st);
    assert_true(st.refused - refused0 >= EXTRA);
    for (uint32_t i = 0; i < 10; i++)
        propose(c->m[l].r, i);
    w.n = 10;
    assert_true(run_until(&c->loop, trio_applied, &w, 5000));
    /* The others at the bound. */
    f.want_closed = N;
    assert_true(run_until(&c->loop, flood_closed, &f, 3000));
    for (int i = 0; i < 100; i++) {
        uv_run(&c->loop, UV_RUN_NOWAIT);
        usleep(2000);
    }
    ms_raft_transport_stats(c->m[target].r, &st);
    assert_true(st.refused - refused0 >= N);
    assert_int_equal(trio_leader(c), l);
    assert_int_equal(ms_raft_term(c->m[target].r), term);
    for (int i = 0; i < N; i++)
        close(fds[i]);
    trio_free(c);
}

/* The highest fd open in this process. */
static int max_fd(void)
{
    DIR *d = opendir("/proc/self/fd");
    struct dirent *e;
    int n = -1;

    assert_non_null(d);
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] != '.' && atoi(e->d_name) > n)
            n = atoi(e->d_name);
    }
    closedir(d);
    return n;
}

/* Out of fds, accept fails (EMFILE) while the listening socket stays
 * readable: accepting pauses instead of spinning, and resumes, so the
 * waiting connections are taken (and refused at the handshake bound) once
 * fds are back. */
static void test_tls_accept_pauses_when_out_of_fds(void **state)
{
    struct trio *c = trio_new();
    struct ms_rtls_stats st;
    struct rlimit old, low;
    enum { N = 4 };
    int fds[N], fill[1024], nfill = 0, l, target, port;
    struct flood f = {fds, N, N};
    uint64_t refused0;
    struct sockaddr_in sa;

    (void)state;
    assert_true(run_until(&c->loop, trio_has_leader, c, 10000));
    l = trio_leader(c);
    target = (l + 1) % N3;
    port = atoi(strrchr(c->peers[target].addr, ':') + 1);
    ms_raft_transport_stats(c->m[target].r, &st);
    refused0 = st.refused;
    for (int i = 0; i < N; i++)
        fds[i] = socket(AF_INET, SOCK_STREAM, 0);
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_port = htons((uint16_t)port);
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    /* No fd left: every number below the limit taken (the holes filled
     * with /dev/null), so the connections wait in the listen backlog. */
    assert_int_equal(getrlimit(RLIMIT_NOFILE, &old), 0);
    low = old;
    low.rlim_cur = (rlim_t)max_fd() + 1;
    for (;;) {
        int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);

        assert_true(fd >= 0);
        if ((rlim_t)fd >= low.rlim_cur) {
            close(fd);
            break;
        }
        fill[nfill++] = fd;
        assert_true(nfill < 1024);
    }
    assert_int_equal(setrlimit(RLIMIT_NOFILE, &low), 0);
    for (int i = 0; i < N; i++)
        assert_int_equal(connect(fds[i], (struct sockaddr *)&sa, sizeof sa), 0);
    for (int i = 0; i < 30; i++) {
        uv_run(&c->loop, UV_RUN_NOWAIT);
        usleep(10000);
    }
    assert_int_equal(setrlimit(RLIMIT_NOFILE, &old), 0);
    /* About one attempt per 100 ms pause over those 300 ms, not a spin. */
    ms_raft_transport_stats(c->m[target].r, &st);
    assert_true(st.accept_pauses >= 1 && st.accept_pauses <= 6);
    while (nfill > 0)
        close(fill[--nfill]);
    /* Taken once fds are back, refused at the 1 s handshake bound. */
    assert_true(run_until(&c->loop, flood_closed, &f, 4000));
    for (int i = 0; i < 100; i++) {
        uv_run(&c->loop, UV_RUN_NOWAIT);
        usleep(2000);
    }
    ms_raft_transport_stats(c->m[target].r, &st);
    assert_true(st.refused - refused0 >= N);
    assert_true(run_until(&c->loop, trio_has_leader, c, 5000));
    for (int i = 0; i < N; i++)
        close(fds[i]);
    trio_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tls_group_elects_commits_survives),
        cmocka_unit_test(test_tls_refuses_non_masters),
        cmocka_unit_test(test_tls_handshake_flood_is_bounded),
        cmocka_unit_test(test_tls_accept_pauses_when_out_of_fds),
    };

    signal(SIGPIPE, SIG_IGN);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
