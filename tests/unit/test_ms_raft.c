/* ms_raft: libraft 0.22.1 behind our wrapper, on real directories and real
 * loopback sockets in one uv loop. The state machine is a toy: each entry
 * is a 4-byte value appended to an array, the snapshot is the array. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <raft.h>
#include <raft/fixture.h>
#include <uv.h>

#include "ms_raft.h"
#include "th_dir.h"

/* ---- Fixture: the toy FSM ---- */

struct toy
{
    uint64_t *index;
    uint32_t *val;
    size_t n, cap;
    bool busy;      /* snapshot answers RT_EBUSY */
    bool corrupt;   /* restore answers RT_ECORRUPT */
    int snap_busy;  /* snapshots refused */
    int snap_taken; /* snapshots given */
    int restores;
    int changes; /* on_change calls */
};

static int toy_apply(void *ud, uint64_t index, const uint8_t *buf, size_t len)
{
    struct toy *t = ud;

    assert_int_equal(len, 4);
    if (t->n > 0)
        assert_true(index > t->index[t->n - 1]);
    if (t->n == t->cap) {
        t->cap = t->cap ? 2 * t->cap : 64;
        t->index = realloc(t->index, t->cap * sizeof *t->index);
        t->val = realloc(t->val, t->cap * sizeof *t->val);
    }
    t->index[t->n] = index;
    t->val[t->n] = rt_get_u32le(buf);
    t->n++;
    return 0;
}

static int toy_snapshot(void *ud, struct rt_buf *out)
{
    struct toy *t = ud;
    uint8_t b[12];

    if (t->busy) {
        t->snap_busy++;
        return RT_EBUSY;
    }
    rt_put_u64le(b, t->n);
    rt_buf_append(out, b, 8);
    for (size_t i = 0; i < t->n; i++) {
        rt_put_u64le(b, t->index[i]);
        rt_put_u32le(b + 8, t->val[i]);
        rt_buf_append(out, b, 12);
    }
    t->snap_taken++;
    return 0;
}

static int toy_restore(void *ud, const uint8_t *buf, size_t len)
{
    struct toy *t = ud;
    uint64_t n;

    if (len < 8 || t->corrupt)
        return RT_ECORRUPT;
    n = rt_get_u64le(buf);
    if (len != 8 + 12 * n)
        return RT_ECORRUPT;
    t->n = 0;
    for (uint64_t i = 0; i < n; i++) {
        uint8_t v[4];
        const uint8_t *p = buf + 8 + 12 * i;

        rt_put_u32le(v, rt_get_u32le(p + 8));
        toy_apply(t, rt_get_u64le(p), v, 4);
    }
    t->restores++;
    return 0;
}

static void toy_changed(void *ud)
{
    ((struct toy *)ud)->changes++;
}

static void toy_free(struct toy *t)
{
    free(t->index);
    free(t->val);
    memset(t, 0, sizeof *t);
}

static struct ms_raft_fsm toy_fsm(struct toy *t)
{
    struct ms_raft_fsm f = {t, toy_apply, toy_snapshot, toy_restore};
    return f;
}

/* ---- Helpers ---- */

/* Runs @loop until @pred(@arg) or @ms pass; returns the predicate. */
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
        uv_run(loop, UV_RUN_ONCE);
    }
    return true;
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

static void propose_u32(struct ms_raft *r, uint32_t v)
{
    uint8_t b[4];
    uint64_t index = 0;

    rt_put_u32le(b, v);
    assert_int_equal(ms_raft_propose(r, b, 4, &index), 0);
    assert_int_equal(index, ms_raft_last_proposed(r));
}

static void on_closed(void *ud)
{
    (*(int *)ud)++;
}

static bool flag_set(void *arg)
{
    return *(int *)arg != 0;
}

static void close_member(uv_loop_t *loop, struct ms_raft *r)
{
    int closed = 0;

    ms_raft_close(r, on_closed, &closed);
    assert_true(run_until(loop, flag_set, &closed, 5000));
    assert_int_equal(closed, 1);
}

static bool is_leader(void *arg)
{
    return ms_raft_is_leader(arg);
}

/* libraft looks for a snapshot to take at its next step (a tick), then
 * writes it asynchronously. */
static bool snap_written(void *arg)
{
    return ms_raft_snapshots(arg) > 0;
}

static bool not_leader(void *arg)
{
    return !ms_raft_is_leader(arg);
}

static bool has_failed(void *arg)
{
    return ms_raft_failed(arg) != 0;
}

struct applied_arg
{
    struct ms_raft *r;
    struct toy *t;
    size_t n;
};

static bool applied_n(void *arg)
{
    struct applied_arg *a = arg;
    return a->t->n >= a->n;
}

static void assert_sequence(const struct toy *t, uint32_t from, size_t n)
{
    assert_int_equal(t->n, n);
    for (size_t i = 0; i < n; i++)
        assert_int_equal(t->val[i], from + i);
}

struct done
{
    int calls;
    int status;
};

static void on_done(void *ud, int status)
{
    struct done *d = ud;
    d->calls++;
    d->status = status;
}

static bool done_called(void *arg)
{
    return ((struct done *)arg)->calls > 0;
}

/* ---- Tests: one member ---- */

static void start_one(uv_loop_t *loop,
                      const char *dir,
                      struct toy *t,
                      unsigned threshold,
                      struct ms_raft **out)
{
    struct ms_raft_opts o = {0};
    struct ms_raft_fsm f = toy_fsm(t);
    char errmsg[RT_ERRMSG_SIZE];

    o.id = 1;
    o.dir = dir;
    o.listen = "127.0.0.1:0";
    o.snapshot_threshold = threshold;
    o.snapshot_trailing = threshold / 4;
    o.segment_size = 256 * 1024;
    if (ms_raft_start(loop, &o, &f, toy_changed, t, out, errmsg) != 0)
        fail_msg("start: %s", errmsg);
}

/* A lone member on a port nobody uses elects itself, applies 1 000
 * proposals in order, and after a restart rebuilds them from its snapshot
 * and log before it proposes again. */
static void test_one_member_restart(void **state)
{
    uv_loop_t loop;
    char tmp[64], dir[160];
    struct toy t = {0};
    struct ms_raft *r;
    struct applied_arg a;

    (void)state;
    assert_int_equal(uv_loop_init(&loop), 0);
    assert_int_equal(th_dir_create("ms_raft", tmp, sizeof tmp), 0);
    snprintf(dir, sizeof dir, "%s/raft", tmp);

    start_one(&loop, dir, &t, 256, &r);
    assert_string_not_equal(strrchr(ms_raft_addr(r), ':'), ":0");
    assert_true(run_until(&loop, is_leader, r, 5000));
    assert_int_equal(ms_raft_leader(r, NULL), 1);
    for (uint32_t i = 0; i < 1000; i++)
        propose_u32(r, i);
    a = (struct applied_arg){r, &t, 1000};
    assert_true(run_until(&loop, applied_n, &a, 10000));
    assert_sequence(&t, 0, 1000);
    assert_int_equal(t.index[999], ms_raft_last_proposed(r));
    assert_true(ms_raft_commit_index(r) >= ms_raft_last_proposed(r));
    assert_true(run_until(&loop, snap_written, r, 2000));
    assert_int_equal(ms_raft_failed(r), 0);
    assert_true(t.changes > 0);
    close_member(&loop, r);
    toy_free(&t);

    /* Restart: the state is back (restore + replay) before any proposal. */
    start_one(&loop, dir, &t, 64, &r);
    assert_int_equal(t.restores, 1);
    a = (struct applied_arg){r, &t, 1000};
    assert_true(run_until(&loop, applied_n, &a, 5000));
    assert_sequence(&t, 0, 1000);
    assert_true(run_until(&loop, is_leader, r, 5000));
    for (uint32_t i = 1000; i < 1010; i++)
        propose_u32(r, i);
    a.n = 1010;
    assert_true(run_until(&loop, applied_n, &a, 5000));
    assert_sequence(&t, 0, 1010);
    close_member(&loop, r);
    toy_free(&t);

    assert_int_equal(uv_loop_close(&loop), 0);
    th_dir_remove(tmp);
}

/* A snapshot refused with RT_EBUSY is skipped and asked for again at a
 * later commit; what is finally taken restores on restart. */
static void test_snapshot_busy_skips(void **state)
{
    uv_loop_t loop;
    char tmp[64], dir[160];
    struct toy t = {0};
    struct ms_raft *r;
    struct applied_arg a;

    (void)state;
    assert_int_equal(uv_loop_init(&loop), 0);
    assert_int_equal(th_dir_create("ms_raft", tmp, sizeof tmp), 0);
    snprintf(dir, sizeof dir, "%s/raft", tmp);

    start_one(&loop, dir, &t, 32, &r);
    assert_true(run_until(&loop, is_leader, r, 5000));
    t.busy = true;
    for (uint32_t i = 0; i < 100; i++) {
        propose_u32(r, i);
        a = (struct applied_arg){r, &t, i + 1};
        assert_true(run_until(&loop, applied_n, &a, 5000));
    }
    assert_true(t.snap_busy >= 2); /* asked again after each later commit */
    assert_int_equal(t.snap_taken, 0);
    t.busy = false;
    propose_u32(r, 100);
    a = (struct applied_arg){r, &t, 101};
    assert_true(run_until(&loop, applied_n, &a, 5000));
    assert_true(run_until(&loop, snap_written, r, 2000));
    assert_int_equal(t.snap_taken, 1);
    close_member(&loop, r);
    toy_free(&t);

    start_one(&loop, dir, &t, 32, &r);
    assert_int_equal(t.restores, 1);
    a = (struct applied_arg){r, &t, 101};
    assert_true(run_until(&loop, applied_n, &a, 5000));
    assert_sequence(&t, 0, 101);
    close_member(&loop, r);
    toy_free(&t);

    assert_int_equal(uv_loop_close(&loop), 0);
    th_dir_remove(tmp);
}

/* A snapshot the FSM cannot restore fails the start (RT_ECORRUPT, with a
 * message) and leaves nothing behind once the loop ran; the directory is
 * untouched and starts fine afterwards. */
static void test_restore_failure_fails_start(void **state)
{
    uv_loop_t loop;
    char tmp[64], dir[160], errmsg[RT_ERRMSG_SIZE];
    struct toy t = {0};
    struct ms_raft *r = NULL;
    struct ms_raft_opts o = {0};
    struct ms_raft_fsm f = toy_fsm(&t);
    struct applied_arg a;

    (void)state;
    assert_int_equal(uv_loop_init(&loop), 0);
    assert_int_equal(th_dir_create("ms_raft", tmp, sizeof tmp), 0);
    snprintf(dir, sizeof dir, "%s/raft", tmp);
    start_one(&loop, dir, &t, 16, &r);
    assert_true(run_until(&loop, is_leader, r, 5000));
    for (uint32_t i = 0; i < 40; i++)
        propose_u32(r, i);
    a = (struct applied_arg){r, &t, 40};
    assert_true(run_until(&loop, applied_n, &a, 5000));
    assert_true(run_until(&loop, snap_written, r, 2000));
    close_member(&loop, r);
    toy_free(&t);

    t.corrupt = true;
    o.id = 1;
    o.dir = dir;
    o.listen = "127.0.0.1:0";
    o.segment_size = 256 * 1024;
    r = NULL;
    assert_int_equal(ms_raft_start(&loop, &o, &f, toy_changed, &t, &r, errmsg),
                     RT_ECORRUPT);
    assert_null(r);
    assert_true(strlen(errmsg) > 0);
    uv_run(&loop, UV_RUN_DEFAULT); /* the instance closes itself */
    toy_free(&t);

    start_one(&loop, dir, &t, 16, &r);
    assert_int_equal(t.restores, 1);
    a = (struct applied_arg){r, &t, 40};
    assert_true(run_until(&loop, applied_n, &a, 5000));
    assert_sequence(&t, 0, 40);
    close_member(&loop, r);
    toy_free(&t);

    assert_int_equal(uv_loop_close(&loop), 0);
    th_dir_remove(tmp);
}

/* ---- Tests: three members ---- */

#define N3 3

struct trio
{
    uv_loop_t loop;
    char tmp[N3][64];
    char dir[N3][160];
    struct ms_raft_peer peers[N3];
    char bind[N3][MS_RAFT_ADDR_SIZE]; /* "" = bind peers[i].addr */
    struct toy t[N3];
    struct ms_raft *r[N3]; /* NULL once closed */
};

static void trio_start(struct trio *c, int i)
{
    struct ms_raft_opts o = {0};
    struct ms_raft_fsm f = toy_fsm(&c->t[i]);
    char errmsg[RT_ERRMSG_SIZE];

    o.id = c->peers[i].id;
    o.dir = c->dir[i];
    o.listen = c->bind[i][0] ? c->bind[i] : c->peers[i].addr;
    o.advertise = c->bind[i][0] ? c->peers[i].addr : NULL;
    o.peers = c->peers;
    o.npeers = N3;
    o.bootstrap = true;
    o.election_ms = 300;
    o.heartbeat_ms = 50;
    o.segment_size = 256 * 1024;
    if (ms_raft_start(&c->loop, &o, &f, toy_changed, &c->t[i], &c->r[i],
                      errmsg) != 0)
        fail_msg("start %d: %s", i, errmsg);
}

/* The index of the one member that leads and that every other live member
 * follows, or -1. */
static int trio_leader(struct trio *c)
{
    int leader = -1;

    for (int i = 0; i < N3; i++) {
        if (c->r[i] != NULL && ms_raft_is_leader(c->r[i])) {
            if (leader >= 0)
                return -1;
            leader = i;
        }
    }
    if (leader < 0)
        return -1;
    for (int i = 0; i < N3; i++) {
        if (c->r[i] != NULL &&
            ms_raft_leader(c->r[i], NULL) != c->peers[leader].id)
            return -1;
    }
    return leader;
}

static bool trio_has_leader(void *arg)
{
    return trio_leader(arg) >= 0;
}

struct trio_n
{
    struct trio *c;
    size_t n;
};

static bool trio_applied(void *arg)
{
    struct trio_n *a = arg;

    for (int i = 0; i < N3; i++) {
        if (a->c->r[i] != NULL && a->c->t[i].n < a->n)
            return false;
    }
    return true;
}

static void trio_assert_same(struct trio *c, size_t n)
{
    int first = -1;

    for (int i = 0; i < N3; i++) {
        if (c->r[i] == NULL)
            continue;
        assert_sequence(&c->t[i], 0, n);
        if (first < 0) {
            first = i;
            continue;
        }
        assert_memory_equal(c->t[i].index, c->t[first].index,
                            n * sizeof *c->t[i].index);
    }
}

/* Three members on loopback elect one leader and apply the same entries;
 * when the leader goes another takes over within seconds with every
 * committed entry and accepts proposals; a transfer moves leadership; a
 * leader left alone steps down and reports its pending proposal failed. */
static void test_three_members(void **state)
{
    struct trio *c = calloc(1, sizeof *c);
    struct trio_n a = {c, 0};
    struct done d = {0};
    struct ms_raft_member m[4];
    int l, l2, other;
    uint64_t failed_index;

    (void)state;
    assert_int_equal(uv_loop_init(&c->loop), 0);
    for (int i = 0; i < N3; i++) {
        assert_int_equal(th_dir_create("ms_raft", c->tmp[i], 64), 0);
        snprintf(c->dir[i], sizeof c->dir[i], "%s/raft", c->tmp[i]);
        c->peers[i].id = (uint64_t)i + 1;
        snprintf(c->peers[i].addr, sizeof c->peers[i].addr, "127.0.0.1:%d",
                 free_port());
    }
    for (int i = 0; i < N3; i++)
        trio_start(c, i);

    assert_true(run_until(&c->loop, trio_has_leader, c, 5000));
    l = trio_leader(c);
    assert_int_equal(ms_raft_config(c->r[l], m, 4), 3);
    for (int i = 0; i < N3; i++) {
        assert_int_equal(m[i].role, MS_RAFT_VOTER);
        assert_string_equal(m[i].addr, c->peers[m[i].id - 1].addr);
    }
    for (uint32_t i = 0; i < 50; i++)
        propose_u32(c->r[l], i);
    a.n = 50;
    assert_true(run_until(&c->loop, trio_applied, &a, 5000));
    trio_assert_same(c, 50);
    assert_int_equal(
        ms_raft_propose(c->r[(l + 1) % N3], (uint8_t *)"abcd", 4, NULL),
        MS_RAFT_ENOTLEADER);

    /* The leader goes: a new one within a few seconds, nothing lost. */
    close_member(&c->loop, c->r[l]);
    c->r[l] = NULL;
    assert_true(run_until(&c->loop, trio_has_leader, c, 5000));
    l2 = trio_leader(c);
    assert_int_not_equal(l2, l);
    trio_assert_same(c, 50);
    for (uint32_t i = 50; i < 70; i++)
        propose_u32(c->r[l2], i);
    a.n = 70;
    assert_true(run_until(&c->loop, trio_applied, &a, 5000));
    trio_assert_same(c, 70);

    /* Transfer to the other live member. */
    other = 3 - l - l2;
    assert_int_equal(
        ms_raft_transfer(c->r[l2], c->peers[other].id, on_done, &d), 0);
    assert_true(run_until(&c->loop, done_called, &d, 5000));
    assert_int_equal(d.status, 0);
    assert_true(run_until(&c->loop, trio_has_leader, c, 5000));
    assert_int_equal(trio_leader(c), other);

    /* A leader alone loses leadership; its pending entry is reported. */
    close_member(&c->loop, c->r[l2]);
    c->r[l2] = NULL;
    assert_true(ms_raft_is_leader(c->r[other]));
    propose_u32(c->r[other], 70);
    failed_index = ms_raft_last_proposed(c->r[other]);
    assert_int_equal(ms_raft_failed(c->r[other]), 0);
    assert_true(run_until(&c->loop, not_leader, c->r[other], 5000));
    assert_true(run_until(&c->loop, has_failed, c->r[other], 1000));
    assert_int_equal(ms_raft_failed(c->r[other]), failed_index);
    assert_int_equal(c->t[other].n, 70);
    close_member(&c->loop, c->r[other]);
    c->r[other] = NULL;

    assert_int_equal(uv_loop_close(&c->loop), 0);
    for (int i = 0; i < N3; i++) {
        toy_free(&c->t[i]);
        th_dir_remove(c->tmp[i]);
    }
    free(c);
}

/* Members that bind one address and advertise a name: the configuration
 * holds the names, libraft listens on the bound addresses and dials the
 * names (resolving them), and the group elects and replicates. */
static void test_three_members_advertised(void **state)
{
    struct trio *c = calloc(1, sizeof *c);
    struct trio_n a = {c, 20};
    struct ms_raft_member m[4];
    int l;

    (void)state;
    assert_int_equal(uv_loop_init(&c->loop), 0);
    for (int i = 0; i < N3; i++) {
        int port = free_port();
        assert_int_equal(th_dir_create("ms_raft", c->tmp[i], 64), 0);
        snprintf(c->dir[i], sizeof c->dir[i], "%s/raft", c->tmp[i]);
        c->peers[i].id = (uint64_t)i + 1;
        snprintf(c->peers[i].addr, sizeof c->peers[i].addr, "localhost:%d",
                 port);
        snprintf(c->bind[i], sizeof c->bind[i], "127.0.0.1:%d", port);
    }
    for (int i = 0; i < N3; i++)
        trio_start(c, i);
    for (int i = 0; i < N3; i++) {
        assert_string_equal(ms_raft_addr(c->r[i]), c->peers[i].addr);
        assert_string_equal(ms_raft_bind_addr(c->r[i]), c->bind[i]);
    }
    assert_true(run_until(&c->loop, trio_has_leader, c, 5000));
    l = trio_leader(c);
    assert_int_equal(ms_raft_config(c->r[l], m, 4), 3);
    for (int i = 0; i < N3; i++)
        assert_string_equal(m[i].addr, c->peers[m[i].id - 1].addr);
    for (uint32_t i = 0; i < 20; i++)
        propose_u32(c->r[l], i);
    assert_true(run_until(&c->loop, trio_applied, &a, 5000));
    trio_assert_same(c, 20);
    for (int i = 0; i < N3; i++)
        close_member(&c->loop, c->r[i]);
    assert_int_equal(uv_loop_close(&c->loop), 0);
    for (int i = 0; i < N3; i++) {
        toy_free(&c->t[i]);
        th_dir_remove(c->tmp[i]);
    }
    free(c);
}

/* ---- Tests: membership ---- */

static void start_joiner(uv_loop_t *loop,
                         const char *dir,
                         struct toy *t,
                         struct ms_raft **out)
{
    struct ms_raft_opts o = {0};
    struct ms_raft_fsm f = toy_fsm(t);
    char errmsg[RT_ERRMSG_SIZE];

    o.id = 2;
    o.dir = dir;
    o.listen = "127.0.0.1:0";
    o.join = true;
    o.segment_size = 256 * 1024;
    if (ms_raft_start(loop, &o, &f, toy_changed, t, out, errmsg) != 0)
        fail_msg("start joiner: %s", errmsg);
}

/* A member started with join waits with no configuration; added as a spare
 * and made a voter by the leader, it catches up from the leader's snapshot
 * and log and applies what follows; a barrier completes; removed, it leaves
 * the configuration. */
static void test_join_add_remove(void **state)
{
    uv_loop_t loop;
    char tmp[2][64], dir[2][160];
    struct toy t[2] = {{0}};
    struct ms_raft *r[2];
    struct applied_arg a;
    struct done d = {0};
    struct ms_raft_member m[3];

    (void)state;
    assert_int_equal(uv_loop_init(&loop), 0);
    for (int i = 0; i < 2; i++) {
        assert_int_equal(th_dir_create("ms_raft", tmp[i], sizeof tmp[i]), 0);
        snprintf(dir[i], sizeof dir[i], "%s/raft", tmp[i]);
    }
    start_one(&loop, dir[0], &t[0], 16, &r[0]);
    assert_true(run_until(&loop, is_leader, r[0], 5000));
    for (uint32_t i = 0; i < 40; i++)
        propose_u32(r[0], i);
    a = (struct applied_arg){r[0], &t[0], 40};
    assert_true(run_until(&loop, applied_n, &a, 5000));
    assert_true(run_until(&loop, snap_written, r[0], 2000));

    start_joiner(&loop, dir[1], &t[1], &r[1]);
    assert_int_equal(ms_raft_config(r[1], m, 3), 0);
    assert_false(ms_raft_is_leader(r[1]));
    assert_int_equal(ms_raft_add(r[0], 2, ms_raft_addr(r[1]), on_done, &d), 0);
    assert_true(run_until(&loop, done_called, &d, 5000));
    assert_int_equal(d.status, 0);
    d = (struct done){0};
    assert_int_equal(ms_raft_assign_voter(r[0], 2, on_done, &d), 0);
    assert_true(run_until(&loop, done_called, &d, 10000));
    assert_int_equal(d.status, 0);
    a = (struct applied_arg){r[1], &t[1], 40};
    assert_true(run_until(&loop, applied_n, &a, 5000));
    assert_sequence(&t[1], 0, 40);
    assert_int_equal(t[1].restores, 1); /* installed from the snapshot */
    assert_int_equal(ms_raft_config(r[0], m, 3), 2);
    assert_int_equal(m[1].id, 2);
    assert_int_equal(m[1].role, MS_RAFT_VOTER);
    assert_int_equal(ms_raft_leader(r[1], NULL), 1);

    for (uint32_t i = 40; i < 45; i++)
        propose_u32(r[0], i);
    d = (struct done){0};
    assert_int_equal(ms_raft_barrier(r[0], on_done, &d), 0);
    assert_true(run_until(&loop, done_called, &d, 5000));
    assert_int_equal(d.status, 0);
    assert_sequence(&t[0], 0, 45);
    a = (struct applied_arg){r[1], &t[1], 45};
    assert_true(run_until(&loop, applied_n, &a, 5000));
    assert_sequence(&t[1], 0, 45);

    d = (struct done){0};
    assert_int_equal(ms_raft_remove(r[0], 2, on_done, &d), 0);
    assert_true(run_until(&loop, done_called, &d, 5000));
    assert_int_equal(d.status, 0);
    assert_int_equal(ms_raft_config(r[0], m, 3), 1);

    for (int i = 0; i < 2; i++) {
        close_member(&loop, r[i]);
        toy_free(&t[i]);
    }
    assert_int_equal(uv_loop_close(&loop), 0);
    for (int i = 0; i < 2; i++)
        th_dir_remove(tmp[i]);
}

/* ---- Tests: libraft's own fixture (simulated time and network) ---- */

/* The toy again, as a bare raft_fsm: the fixture drives raft instances
 * directly, without the uv backend ms_raft wraps. */
#define FX_N 3
#define FX_MAX 4096

struct fx_fsm
{
    uint64_t val[FX_MAX];
    size_t n;
};

static int fx_apply(struct raft_fsm *fsm,
                    const struct raft_buffer *buf,
                    void **result)
{
    struct fx_fsm *x = fsm->data;

    assert_int_equal(buf->len, 8);
    assert_true(x->n < FX_MAX);
    x->val[x->n++] = rt_get_u64le(buf->base);
    *result = NULL;
    return 0;
}

static int fx_snapshot(struct raft_fsm *fsm,
                       struct raft_buffer *bufs[],
                       unsigned *n_bufs)
{
    struct fx_fsm *x = fsm->data;

    *bufs = raft_malloc(sizeof **bufs);
    (*bufs)[0].len = 8 * (x->n + 1);
    (*bufs)[0].base = raft_malloc((*bufs)[0].len);
    rt_put_u64le((*bufs)[0].base, x->n);
    for (size_t i = 0; i < x->n; i++)
        rt_put_u64le((uint8_t *)(*bufs)[0].base + 8 * (i + 1), x->val[i]);
    *n_bufs = 1;
    return 0;
}

static int fx_finalize(struct raft_fsm *fsm,
                       struct raft_buffer *bufs[],
                       unsigned *n_bufs)
{
    (void)fsm;
    if (*bufs != NULL) {
        raft_free((*bufs)[0].base);
        raft_free(*bufs);
    }
    *bufs = NULL;
    *n_bufs = 0;
    return 0;
}

static int fx_restore(struct raft_fsm *fsm, struct raft_buffer *buf)
{
    struct fx_fsm *x = fsm->data;
    const uint8_t *p = buf->base;

    x->n = rt_get_u64le(p);
    for (size_t i = 0; i < x->n; i++)
        x->val[i] = rt_get_u64le(p + 8 * (i + 1));
    raft_free(buf->base);
    return 0;
}

static void fx_apply_cb(struct raft_apply *req, int status, void *result)
{
    (void)status;
    (void)result;
    free(req);
}

static void fx_propose(struct raft_fixture *f, uint64_t v)
{
    unsigned l = raft_fixture_leader_index(f);
    struct raft_apply *req;
    struct raft_buffer b;

    if (l >= FX_N)
        return;
    req = calloc(1, sizeof *req);
    b.len = 8;
    b.base = raft_malloc(8);
    rt_put_u64le(b.base, v);
    if (raft_apply(raft_fixture_get(f, l), req, &b, 1, fx_apply_cb) != 0) {
        raft_free(b.base);
        free(req);
    }
}

/* Under seeded kills, revivals, partitions and proposals in simulated time,
 * no two members ever lead in one term (Election Safety) and every two
 * members' applied sequences agree on their common prefix (State Machine
 * Safety). */
static void test_fixture_election_safety(void **state)
{
    static struct fx_fsm x[FX_N];
    struct raft_fsm fsm[FX_N];
    struct raft_fixture f;
    struct raft_configuration conf;
    raft_id leader_of[512] = {0};
    unsigned seed = 12345, elections = 0;
    uint64_t next = 1;

    (void)state;
    memset(x, 0, sizeof x);
    assert_int_equal(raft_fixture_init(&f), 0);
    for (unsigned i = 0; i < FX_N; i++) {
        memset(&fsm[i], 0, sizeof fsm[i]);
        fsm[i].version = 2;
        fsm[i].data = &x[i];
        fsm[i].apply = fx_apply;
        fsm[i].snapshot = fx_snapshot;
        fsm[i].restore = fx_restore;
        fsm[i].snapshot_finalize = fx_finalize;
        assert_int_equal(raft_fixture_grow(&f, &fsm[i]), 0);
        /* No snapshots here: in 0.22.1 the fixture's in-memory io crashes
         * (double free) when a follower installs one (threshold 32,
         * trailing 8, seed 12345: at t = 185 515 ms). The uv backend's
         * install is covered by test_join_add_remove. */
        raft_set_snapshot_threshold(raft_fixture_get(&f, i), 1000000);
        raft_fixture_get(&f, i)->tracer = NULL; /* its stdout trace */
        raft_set_pre_vote(raft_fixture_get(&f, i), true);
    }
    assert_int_equal(raft_fixture_configuration(&f, FX_N, &conf), 0);
    assert_int_equal(raft_fixture_bootstrap(&f, &conf), 0);
    raft_configuration_close(&conf);
    assert_int_equal(raft_fixture_start(&f), 0);

    for (unsigned step = 0; step < 20000; step++) {
        unsigned r = rand_r(&seed) % 1000;
        unsigned i = rand_r(&seed) % FX_N, j = rand_r(&seed) % FX_N;

        if (r < 100) {
            fx_propose(&f, next++);
        } else if (r < 103 && raft_fixture_alive(&f, i)) {
            raft_fixture_kill(&f, i);
        } else if (r < 110 && !raft_fixture_alive(&f, i)) {
            raft_fixture_revive(&f, i);
        } else if (r < 113 && i != j) {
            raft_fixture_disconnect(&f, i, j);
        } else if (r < 125 && i != j) {
            raft_fixture_reconnect(&f, i, j);
        }
        raft_fixture_step(&f);

        for (unsigned k = 0; k < FX_N; k++) {
            struct raft *rk = raft_fixture_get(&f, k);
            raft_term t = raft_current_term(rk);

            if (raft_state(rk) != RAFT_LEADER)
                continue;
            assert_true(t < 512);
            if (leader_of[t] == 0) {
                leader_of[t] = rk->id;
                elections++;
            }
            assert_int_equal(leader_of[t], rk->id);
        }
        for (unsigned a = 0; a < FX_N; a++) {
            for (unsigned b = a + 1; b < FX_N; b++) {
                size_t n = x[a].n < x[b].n ? x[a].n : x[b].n;
                assert_memory_equal(x[a].val, x[b].val, n * sizeof x[a].val[0]);
            }
        }
    }
    assert_true(elections >= 2); /* the faults did depose leaders */
    assert_true(x[0].n > 0 || x[1].n > 0 || x[2].n > 0);
    raft_fixture_close(&f);
}

/* An empty directory with several peers and neither --bootstrap nor --join
 * is refused before anything is created: the member may be a wiped one. */
static void test_empty_dir_with_peers_refused(void **state)
{
    uv_loop_t loop;
    char tmp[64], dir[160], errmsg[RT_ERRMSG_SIZE];
    struct ms_raft_peer peers[3] = {
        {1, "127.0.0.1:1"}, {2, "127.0.0.1:2"}, {3, "127.0.0.1:3"}};
    struct ms_raft_opts o = {0};
    struct toy t = {0};
    struct ms_raft_fsm f = toy_fsm(&t);
    struct ms_raft *r = NULL;

    (void)state;
    assert_int_equal(uv_loop_init(&loop), 0);
    assert_int_equal(th_dir_create("ms_raft", tmp, sizeof tmp), 0);
    snprintf(dir, sizeof dir, "%s/raft", tmp);
    o.id = 3;
    o.dir = dir;
    o.listen = "127.0.0.1:3";
    o.peers = peers;
    o.npeers = 3;
    assert_int_equal(ms_raft_start(&loop, &o, &f, NULL, NULL, &r, errmsg),
                     RT_ECONFIG);
    assert_null(r);
    assert_non_null(strstr(errmsg, "--join"));
    assert_non_null(strstr(errmsg, "--bootstrap"));
    assert_int_equal(access(dir, F_OK), -1); /* nothing created */
    assert_int_equal(uv_loop_close(&loop), 0);
    th_dir_remove(tmp);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_one_member_restart),
        cmocka_unit_test(test_snapshot_busy_skips),
        cmocka_unit_test(test_restore_failure_fails_start),
        cmocka_unit_test(test_three_members),
        cmocka_unit_test(test_three_members_advertised),
        cmocka_unit_test(test_join_add_remove),
        cmocka_unit_test(test_fixture_election_safety),
        cmocka_unit_test(test_empty_dir_with_peers_refused),
    };

    signal(SIGPIPE, SIG_IGN); /* ms_raft.h: the process ignores SIGPIPE */
    return cmocka_run_group_tests(tests, NULL, NULL);
}
