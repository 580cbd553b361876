/* Replication of writes between partition servers (ps_repl.h,
 * docs/DESIGN-replication.md §5, §6.3), over real RPC in one process and
 * one loop: three servers (ids 7, 8, 9 in slots 0-2), each with its writer
 * thread and LMDB in a temp dir, a fake master (th_fake_master) for
 * registration and heartbeats, and ASSIGN_RANGES sent by the test on each
 * server's master link with one RF-3 range (primary 7) and the peers'
 * addresses. One front-end client per server. The failover tests play
 * the master by hand: SEAL and ASSIGN_RANGES on the master links, and
 * ISR_CHANGE answered by a handler on the fake master; so do the split
 * test (RANGE_FREEZE / RANGE_THAW, then the halves' assignment) and the
 * transfer test (TRANSFER_PRIMARY, TRANSFER_ABORT). A replica left
 * outside the ISR is caught up by a full copy (ps_learn) and asks to
 * rejoin. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "ps_keylog.h"
#include "ps_learn.h"
#include "ps_rcore.h"
#include "ps_repl.h"
#include "ps_server.h"
#include "ps_split.h"
#include "ps_transfer.h"
#include "rt.pb-c.h"
#include "rt_crc32c.h"
#include "rt_err.h"
#include "rt_log.h"
#include "th_dir.h"
#include "th_fake_master.h"
#include "th_props.h"
#include "th_rpc.h"

#define TABLE 5
#define RANGE 1
#define NSRV 3
#define RUN_LIMIT_MS 30000
#define READ_WAIT_MS 300
#define LEASE_MS 300  /* L */
#define REPL_HB_MS 50 /* the SupportReq period: L / 6 as by default */

/* Fixture */

struct srv
{
    struct ps_server ps;
    char data[128];
    struct rt_rpc_client *cli;
    int cli_up;
    int running;
};

struct fx
{
    uv_loop_t loop;
    char dir[64];
    char master_addr[64];
    uint64_t map_version;
    size_t n_isr;        /* the first n_isr servers are in sync (assign) */
    uint32_t min_insync; /* assign */
    uint64_t read_epoch; /* RangeRef.epoch of reads (get_async) */
    uint64_t seal_term;  /* SealReq.master_term (seal1) */
    uint64_t seal_old;   /* SealReq.old_primary (seal1; 0: server 0) */
    struct srv s[NSRV];
};

static struct th_fake_master M;
static const uint64_t ids[NSRV] = {7, 8, 9};

static void run_until(struct fx *f, const int *flag)
{
    assert_int_equal(th_run_until(&f->loop, flag, RUN_LIMIT_MS), 0);
}

/* Runs the loop for about @ms. */
static void run_for(struct fx *f, uint64_t ms)
{
    uint64_t end;
    uv_update_time(&f->loop);
    end = uv_now(&f->loop) + ms;
    while (uv_now(&f->loop) < end) {
        uv_run(&f->loop, UV_RUN_NOWAIT);
        usleep(200);
        uv_update_time(&f->loop);
    }
}

/* Starts server @i; returns before it registered. */
static void srv_start_nowait(struct fx *f, int i)
{
    struct srv *s = &f->s[i];
    struct ps_config cfg;

    memset(&cfg, 0, sizeof(cfg));
    cfg.listen = "127.0.0.1:0";
    cfg.advertise = "";
    cfg.master = f->master_addr;
    cfg.data = s->data;
    cfg.port_file = "";
    cfg.max_pending = 20000;
    cfg.map_size = 64u * 1024u * 1024u;
    cfg.http = "";
    cfg.read_wait_ms = READ_WAIT_MS;
    cfg.lease_ms = LEASE_MS;
    cfg.repl_hb_ms = REPL_HB_MS;
    assert_int_equal(ps_server_start(&s->ps, &f->loop, &cfg), 0);
    s->running = 1;
    snprintf(M.slot[i].addr, sizeof(M.slot[i].addr), "%s", s->ps.addr);
}

/* Waits until server @i registered, then connects its client. */
static void srv_wait(struct fx *f, int i)
{
    struct srv *s = &f->s[i];
    char addr[64];

    run_until(f, &s->ps.registered);
    snprintf(addr, sizeof(addr), "127.0.0.1:%d", s->ps.port);
    assert_int_equal(rt_rpc_client_start(&f->loop, addr, NULL, th_rpc_conn_cb,
                                         &s->cli_up, &s->cli),
                     0);
    run_until(f, &s->cli_up);
}

static void srv_start(struct fx *f, int i)
{
    srv_start_nowait(f, i);
    srv_wait(f, i);
}

static void srv_stop(struct fx *f, int i)
{
    struct srv *s = &f->s[i];
    if (!s->running) {
        return;
    }
    if (s->cli) {
        rt_rpc_client_close(s->cli);
        s->cli = NULL;
        s->cli_up = 0;
    }
    ps_server_stop(&s->ps);
    for (int k = 0; k < 20; k++) {
        uv_run(&f->loop, UV_RUN_NOWAIT);
    }
    ps_server_close(&s->ps);
    s->running = 0;
    th_fake_master_forget(&M, i);
}

/* Replicas (the @p-th primary, the others secondaries) and servers
 * (their current addresses and incarnations) of an assignment of the
 * fixture's servers. */
struct members
{
    Rt__Replica rep[NSRV], *reps[NSRV];
    Rt__Server srv[NSRV], *srvs[NSRV];
};

static void members_fill(struct fx *f, struct members *m, int p)
{
    for (int i = 0; i < NSRV; i++) {
        rt__replica__init(&m->rep[i]);
        m->rep[i].server_id = ids[i];
        m->rep[i].role = i == p ? RT__REPL_ROLE__ROLE_PRIMARY
                                : RT__REPL_ROLE__ROLE_SECONDARY;
        m->reps[i] = &m->rep[i];
        rt__server__init(&m->srv[i]);
        m->srv[i].id = ids[i];
        m->srv[i].addr = f->s[i].ps.addr;
        m->srv[i].incarnation.data = f->s[i].ps.incarnation;
        m->srv[i].incarnation.len = sizeof(f->s[i].ps.incarnation);
        m->srvs[i] = &m->srv[i];
    }
}

/* Sends every running server the assignment: range RANGE of TABLE, whole
 * table, primary 7, replicas 7, 8, 9 all in sync, at @epoch (primary since
 * epoch 1), with the servers' current addresses; @sec_only: to the
 * secondaries only. */
static void assign_order(struct fx *f, uint64_t epoch, int sec_only)
{
    struct members mb;
    uint64_t isr[NSRV];
    Rt__Range r = RT__RANGE__INIT, *rs[1] = {&r};
    Rt__Assignment a = RT__ASSIGNMENT__INIT;

    members_fill(f, &mb, 0);
    for (int i = 0; i < NSRV; i++) {
        isr[i] = ids[i];
    }
    r.id = RANGE;
    r.table_id = TABLE;
    r.low = "";
    r.high = "";
    r.high_inf = 1;
    r.server_id = ids[0];
    r.epoch = epoch;
    r.n_replicas = NSRV;
    r.replicas = mb.reps;
    r.n_isr = f->n_isr;
    r.isr = isr;
    r.primary_epoch = 1;
    r.rf = 3;
    r.min_insync = f->min_insync;
    a.n_ranges = 1;
    a.ranges = rs;
    a.n_peers = NSRV;
    a.peers = mb.srvs;
    a.map_version = ++f->map_version;
    for (int k = 0; k < NSRV; k++) {
        int i = k;
        struct th_reply rep_;
        if (!f->s[i].running || (sec_only && i == 0)) {
            continue;
        }
        assert_int_equal(
            th_rpc_call(&f->loop, M.slot[i].conn, RT__METHOD__ASSIGN_RANGES,
                        &a.base, 10000, &rep_),
            0);
        th_reply_free(&rep_);
    }
}

static void assign(struct fx *f, uint64_t epoch)
{
    assign_order(f, epoch, 0);
}

/* Range RANGE at @epoch with slot @p primary since @primary_epoch, every
 * server a replica (the others SECONDARY), the slots of @isr_mask in sync,
 * sent as ASSIGN_RANGES to the running servers of @to_mask (in slot
 * order). Returns the first non-zero reply status. */
static int assign_conf(struct fx *f,
                       uint64_t epoch,
                       int p,
                       uint64_t primary_epoch,
                       unsigned isr_mask,
                       unsigned to_mask)
{
    struct members mb;
    uint64_t isr[NSRV];
    Rt__Range r = RT__RANGE__INIT, *rs[1] = {&r};
    Rt__Assignment a = RT__ASSIGNMENT__INIT;
    int first = 0;

    r.n_isr = 0;
    isr[r.n_isr++] = ids[p];
    members_fill(f, &mb, p);
    for (int i = 0; i < NSRV; i++) {
        if (i != p && (isr_mask & (1u << i))) {
            isr[r.n_isr++] = ids[i];
        }
    }
    r.id = RANGE;
    r.table_id = TABLE;
    r.low = "";
    r.high = "";
    r.high_inf = 1;
    r.server_id = ids[p];
    r.epoch = epoch;
    r.n_replicas = NSRV;
    r.replicas = mb.reps;
    r.isr = isr;
    r.primary_epoch = primary_epoch;
    r.rf = 3;
    r.min_insync = f->min_insync;
    a.n_ranges = 1;
    a.ranges = rs;
    a.n_peers = NSRV;
    a.peers = mb.srvs;
    a.map_version = ++f->map_version;
    for (int i = 0; i < NSRV; i++) {
        struct th_reply rep_;
        int rc;
        if (!f->s[i].running || !(to_mask & (1u << i))) {
            continue;
        }
        rc = th_rpc_call(&f->loop, M.slot[i].conn, RT__METHOD__ASSIGN_RANGES,
                         &a.base, 10000, &rep_);
        th_reply_free(&rep_);
        if (first == 0) {
            first = rc;
        }
    }
    return first;
}

/* SEAL{@range, 1 -> @new_epoch, old primary 7, f->seal_term} to server
 * @i on its master link. Returns the reply status; on 0, *@lsn and *@retry_ms
 * are the SealResp's applied_lsn and retry_ms. */
static int seal1(struct fx *f,
                 int i,
                 uint64_t range,
                 uint64_t new_epoch,
                 uint64_t *lsn,
                 uint32_t *retry_ms)
{
    Rt__SealReq req = RT__SEAL_REQ__INIT;
    struct th_reply r;
    int rc;
    req.range_id = range;
    req.old_epoch = 1;
    req.new_epoch = new_epoch;
    req.old_primary = f->seal_old ? f->seal_old : ids[0];
    req.master_term = f->seal_term;
    rc = th_rpc_call(&f->loop, M.slot[i].conn, RT__METHOD__SEAL, &req.base,
                     10000, &r);
    if (rc == 0) {
        Rt__SealResp *resp =
            rt__seal_resp__unpack(NULL, r.body.len, r.body.data);
        assert_non_null(resp);
        *lsn = resp->applied_lsn;
        *retry_ms = resp->retry_ms;
        rt__seal_resp__free_unpacked(resp, NULL);
    }
    th_reply_free(&r);
    return rc;
}

/* Seals server @i for @new_epoch, asking again while it answers busy;
 * returns the applied LSN it sealed at. */
static uint64_t seal_wait(struct fx *f, int i, uint64_t new_epoch)
{
    uint64_t lsn = 0;
    uint32_t retry = 0;
    for (int k = 0; k < 100; k++) {
        assert_int_equal(seal1(f, i, RANGE, new_epoch, &lsn, &retry), 0);
        if (retry == 0) {
            return lsn;
        }
        assert_true(retry <= LEASE_MS);
        run_for(f, retry);
    }
    fail();
    return 0;
}

/* The core's state of RANGE on server @i. */
static struct ps_rcore_range_info rinfo(struct fx *f, int i)
{
    struct ps_rcore_range_info info;
    assert_int_equal(ps_repl_range_info(&f->s[i].ps, RANGE, &info), 0);
    return info;
}

/* Waits until server @i serves RANGE as primary and holds its read
 * lease (the first support round after an assignment may reach a
 * secondary that has not heard of it yet: refused, asked again a period
 * later). */
static void wait_lease(struct fx *f, int i)
{
    for (int k = 0; k < 2000; k++) {
        struct ps_rcore_range_info info = rinfo(f, i);
        if (info.role == PS_RCORE_PRIMARY && info.state == PS_RPRI_SERVING &&
            ps_repl_lease_left(&f->s[i].ps, RANGE) > 0) {
            return;
        }
        run_for(f, 5);
    }
    fail();
}

static int setup(void **state)
{
    struct fx *f = calloc(1, sizeof(*f));
    rt_log_init("test", RT_LOG_WARN);
    assert_int_equal(uv_loop_init(&f->loop), 0);
    assert_int_equal(th_dir_create("test_ps_rstream", f->dir, sizeof(f->dir)),
                     0);
    memset(&M, 0, sizeof(M));
    M.map_version = 3;
    f->map_version = 100; /* above the fake master's: heartbeats keep ours */
    f->n_isr = NSRV;
    f->min_insync = 2;
    f->read_epoch = 1;
    f->seal_term = 1;
    for (int i = 0; i < NSRV; i++) {
        snprintf(f->s[i].data, sizeof(f->s[i].data), "%s/data%d", f->dir, i);
        M.slot[i].id = ids[i];
        M.slot[i].n = 0;
    }
    assert_int_equal(th_fake_master_start(&M, &f->loop), 0);
    snprintf(f->master_addr, sizeof(f->master_addr), "%s", M.addr);
    for (int i = 0; i < NSRV; i++) {
        srv_start(f, i);
    }
    assign(f, 1);
    wait_lease(f, 0);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fx *f = *state;
    for (int i = 0; i < NSRV; i++) {
        if (f->s[i].cli) {
            rt_rpc_client_close(f->s[i].cli);
        }
        if (f->s[i].running && !f->s[i].ps.stopping) {
            ps_server_stop(&f->s[i].ps);
        }
    }
    assert_int_equal(M.bad_requests, 0);
    th_fake_master_close(&M);
    uv_run(&f->loop, UV_RUN_DEFAULT);
    for (int i = 0; i < NSRV; i++) {
        if (f->s[i].running) {
            ps_server_close(&f->s[i].ps);
        }
    }
    assert_int_equal(uv_loop_close(&f->loop), 0);
    th_dir_remove(f->dir);
    free(f);
    return 0;
}

/* Helpers: requests */

/* An upsert of (@pk, "r") with v = @v to server @s at @epoch, sent; the
 * reply lands in @r. @props must live until the reply. */
static void write_async(struct fx *f,
                        int s,
                        uint64_t epoch,
                        const char *pk,
                        struct rt_buf *props,
                        struct th_reply *r)
{
    Rt__RangeRef ref = RT__RANGE_REF__INIT;
    Rt__EntityOp op = RT__ENTITY_OP__INIT;
    Rt__EntityOp *ops[1] = {&op};
    Rt__WriteReq req = RT__WRITE_REQ__INIT;

    ref.table_id = TABLE;
    ref.range_id = RANGE;
    ref.epoch = epoch;
    op.kind = RT__OP_KIND__OP_UPSERT_REPLACE;
    op.pk = (char *)pk;
    op.rk = "r";
    op.props.data = props->data;
    op.props.len = props->len;
    req.route = &ref;
    req.n_ops = 1;
    req.ops = ops;
    assert_int_equal(
        th_rpc_call_async(rt_rpc_client_conn(f->s[s].cli),
                          RT__METHOD__ENTITY_WRITE, &req.base, 30000, r),
        0);
}

static int write1(struct fx *f,
                  int s,
                  uint64_t epoch,
                  const char *pk,
                  const char *v)
{
    struct rt_buf props = RT_BUF_INIT;
    struct th_reply r;
    th_props1(&props, "v", v);
    write_async(f, s, epoch, pk, &props, &r);
    run_until(f, &r.done);
    th_reply_free(&r);
    rt_buf_free(&props);
    return r.status;
}

static void get_async(struct fx *f, int s, const char *pk, struct th_reply *r)
{
    Rt__RangeRef ref = RT__RANGE_REF__INIT;
    Rt__GetReq req = RT__GET_REQ__INIT;
    ref.table_id = TABLE;
    ref.range_id = RANGE;
    ref.epoch = f->read_epoch;
    req.route = &ref;
    req.pk = (char *)pk;
    req.rk = "r";
    assert_int_equal(
        th_rpc_call_async(rt_rpc_client_conn(f->s[s].cli),
                          RT__METHOD__ENTITY_GET, &req.base, 30000, r),
        0);
}

static int get1(struct fx *f, int s, const char *pk)
{
    struct th_reply r;
    get_async(f, s, pk, &r);
    run_until(f, &r.done);
    th_reply_free(&r);
    return r.status;
}

static int scan1(struct fx *f, int s, size_t *n)
{
    Rt__RangeRef ref = RT__RANGE_REF__INIT;
    Rt__ScanReq req = RT__SCAN_REQ__INIT;
    struct th_reply r;
    Rt__ScanResp *resp;
    int rc;
    ref.table_id = TABLE;
    ref.range_id = RANGE;
    ref.epoch = 1;
    req.route = &ref;
    rc = th_rpc_call(&f->loop, rt_rpc_client_conn(f->s[s].cli),
                     RT__METHOD__ENTITY_SCAN, &req.base, 30000, &r);
    if (rc == 0) {
        resp = rt__scan_resp__unpack(NULL, r.body.len, r.body.data);
        assert_non_null(resp);
        *n = resp->n_entities;
        rt__scan_resp__free_unpacked(resp, NULL);
    }
    th_reply_free(&r);
    return rc;
}

/* Helpers: stores */

/* Every (pk, rk, stored value) of TABLE in server @i's store, packed in
 * key order into @out. */
static void dump(struct fx *f, int i, struct rt_buf *out)
{
    struct ps_scan sc;
    memset(&sc, 0, sizeof(sc));
    sc.table_id = TABLE;
    sc.low = "";
    sc.high = NULL;
    assert_int_equal(ps_store_scan(f->s[i].ps.store, &sc), 0);
    assert_false(sc.more);
    for (size_t k = 0; k < sc.n; k++) {
        rt_buf_append(out, sc.recs[k].pk, strlen(sc.recs[k].pk) + 1);
        rt_buf_append(out, sc.recs[k].rk, strlen(sc.recs[k].rk) + 1);
        rt_buf_append(out, sc.recs[k].value, sc.recs[k].value_len);
    }
    ps_scan_free(&sc);
}

static uint64_t applied(struct fx *f, int i)
{
    struct ps_rstate rs;
    int rc = ps_store_repl_get(f->s[i].ps.store, RANGE, &rs);
    if (rc == RT_ENOTFOUND) {
        return 0;
    }
    assert_int_equal(rc, 0);
    return rs.applied_lsn;
}

/* Runs the loop until server @from caught server @to up by streaming
 * from its LSN (no copy: @to's history agrees with @from's and the
 * groups it lacks are still buffered, docs/DESIGN-replication.md §7.3)
 * and @to follows as a secondary at @from's last LSN. */
static void wait_tailed(struct fx *f, int from, int to)
{
    for (int k = 0; k < 4000; k++) {
        if (ps_repl_catchups(&f->s[from].ps, PS_RCORE_CATCHUP_TAIL) > 0 &&
            rinfo(f, to).role == PS_RCORE_SECONDARY &&
            rinfo(f, to).applied_lsn == rinfo(f, from).last_lsn) {
            assert_int_equal(
                ps_repl_catchups(&f->s[from].ps, PS_RCORE_CATCHUP_FULL), 0);
            assert_int_equal(ps_learn_received(&f->s[to].ps), 0);
            return;
        }
        run_for(f, 5);
    }
    fail();
}

/* Every running server holds the same bytes and the same applied LSN,
 * @lsn when non-zero. */
static void assert_same(struct fx *f, uint64_t lsn)
{
    struct rt_buf a = RT_BUF_INIT;
    dump(f, 0, &a);
    if (lsn != 0) {
        assert_int_equal(applied(f, 0), lsn);
    }
    for (int i = 1; i < NSRV; i++) {
        struct rt_buf b = RT_BUF_INIT;
        if (!f->s[i].running) {
            continue;
        }
        dump(f, i, &b);
        assert_int_equal(a.len, b.len);
        assert_memory_equal(a.data, b.data, a.len);
        assert_int_equal(applied(f, i), applied(f, 0));
        rt_buf_free(&b);
    }
    rt_buf_free(&a);
}

/* Tests */

/* Every acknowledged write is already on all three replicas, byte for
 * byte, with the same applied LSN (long keys too); a failed write changes
 * nothing and takes no LSN. */
static void test_acked_everywhere(void **state)
{
    struct fx *f = *state;
    char pk[32];
    struct ps_rcore_range_info info;

    assert_int_equal(ps_repl_range_info(&f->s[0].ps, RANGE, &info), 0);
    assert_int_equal(info.role, PS_RCORE_PRIMARY);
    assert_int_equal(ps_repl_range_info(&f->s[1].ps, RANGE, &info), 0);
    assert_int_equal(info.role, PS_RCORE_SECONDARY);
    for (int i = 0; i < 20; i++) {
        snprintf(pk, sizeof(pk), "pk%03d", i);
        assert_int_equal(write1(f, 0, 1, pk, i % 2 ? "odd" : "even"), 0);
        assert_same(f, (uint64_t)i + 1);
    }
    /* An insert of an existing entity fails: no LSN, still answered. */
    {
        struct rt_buf props = RT_BUF_INIT;
        Rt__RangeRef ref = RT__RANGE_REF__INIT;
        Rt__EntityOp op = RT__ENTITY_OP__INIT;
        Rt__EntityOp *ops[1] = {&op};
        Rt__WriteReq req = RT__WRITE_REQ__INIT;
        struct th_reply r;
        th_props1(&props, "v", "x");
        ref.table_id = TABLE;
        ref.range_id = RANGE;
        ref.epoch = 1;
        op.kind = RT__OP_KIND__OP_INSERT;
        op.pk = "pk000";
        op.rk = "r";
        op.props.data = props.data;
        op.props.len = props.len;
        req.route = &ref;
        req.n_ops = 1;
        req.ops = ops;
        assert_int_equal(
            th_rpc_call(&f->loop, rt_rpc_client_conn(f->s[0].cli),
                        RT__METHOD__ENTITY_WRITE, &req.base, 30000, &r),
            0);
        Rt__WriteResp *resp =
            rt__write_resp__unpack(NULL, r.body.len, r.body.data);
        assert_non_null(resp);
        assert_int_equal(resp->n_results, 1);
        assert_int_equal(resp->results[0]->code, RT_EEXIST);
        rt__write_resp__free_unpacked(resp, NULL);
        th_reply_free(&r);
        rt_buf_free(&props);
    }
    assert_same(f, 20);
    /* A long PartitionKey lives in a bucket record: shipped and applied
     * as the full storage key. */
    char longpk[900];
    memset(longpk, 'L', sizeof(longpk) - 1);
    longpk[sizeof(longpk) - 1] = 0;
    assert_int_equal(write1(f, 0, 1, longpk, "long"), 0);
    assert_same(f, 21);
    assert_int_equal(get1(f, 0, "pk007"), 0);
    size_t n = 0;
    assert_int_equal(scan1(f, 0, &n), 0);
    assert_int_equal(n, 21);
    /* Every replica's key log (§2.3) names the 21 keys of LSNs 1..21 and
     * one of LSN 21 alone: the primary from its groups, the secondaries
     * from the groups they applied. */
    for (int i = 0; i < 3; i++) {
        const struct ps_keylog *kl = ps_repl_keylog(&f->s[i].ps);
        struct ps_keylog_keys keys = {0};
        assert_non_null(kl);
        for (int k = 0; k < 500; k++) {
            struct ps_keylog_range_info ki;
            if (ps_keylog_range_get(kl, RANGE, &ki) == 0 && ki.last == 21) {
                break;
            }
            run_for(f, 5);
        }
        assert_int_equal(ps_keylog_changed(kl, RANGE, 0, 21, &keys), 21);
        assert_int_equal(ps_keylog_changed(kl, RANGE, 20, 21, &keys), 1);
        assert_true(keys.v[0].len > sizeof(longpk) - 1);
        ps_keylog_keys_close(&keys);
    }
    /* The metrics page shows cw, roles and the lease. */
    struct rt_buf m = RT_BUF_INIT;
    ps_repl_metrics(&f->s[0].ps, &m);
    rt_buf_append(&m, "", 1);
    assert_non_null(
        strstr((char *)m.data, "rt_ps_repl_commit_lsn{range=\"1\"} 21\n"));
    assert_non_null(strstr((char *)m.data, "rt_ps_repl_role{range=\"1\"} 1\n"));
    assert_non_null(strstr((char *)m.data, "rt_ps_repl_held_write_ops 0\n"));
    assert_non_null(strstr((char *)m.data, "rt_ps_repl_lease{range=\"1\"} "));
    assert_true(ps_repl_lease_left(&f->s[0].ps, RANGE) > 0);
    assert_true(ps_repl_lease_left(&f->s[0].ps, RANGE) <= LEASE_MS);
    assert_int_equal(ps_repl_lease_left(&f->s[1].ps, RANGE), 0);
    rt_buf_free(&m);
}

/* Only the primary serves clients: a secondary answers RT_ENOTPRIMARY to
 * writes, gets and scans. The primary accepts any epoch in
 * [primary_epoch, epoch]: an ISR-only change keeps front-end maps valid.
 * A secondary that hears of a new epoch before its primary still takes
 * the primary's appends (same generation). MOVE_OUT is refused. */
static void test_secondary_not_primary(void **state)
{
    struct fx *f = *state;
    size_t n;
    assert_int_equal(write1(f, 1, 1, "a", "1"), RT_ENOTPRIMARY);
    assert_int_equal(get1(f, 2, "a"), RT_ENOTPRIMARY);
    assert_int_equal(scan1(f, 1, &n), RT_ENOTPRIMARY);
    /* Nor does it move the old way: a copy behind the replicas' backs. */
    {
        Rt__Range r = RT__RANGE__INIT;
        Rt__MoveReq mv = RT__MOVE_REQ__INIT;
        struct th_reply rep;
        r.id = RANGE;
        r.table_id = TABLE;
        r.low = "";
        r.high = "";
        r.high_inf = 1;
        r.epoch = 1;
        mv.range = &r;
        mv.target_addr = f->s[1].ps.addr;
        mv.move_id = 1;
        mv.new_epoch = 2;
        assert_int_equal(
            th_rpc_call(&f->loop, M.slot[0].conn, RT__METHOD__MOVE_OUT,
                        &mv.base, 10000, &rep),
            RT_EINVAL);
        th_reply_free(&rep);
    }
    assign(f, 2);
    assert_int_equal(write1(f, 0, 1, "a", "1"), 0);
    assert_int_equal(write1(f, 0, 2, "b", "1"), 0);
    assert_int_equal(write1(f, 0, 3, "c", "1"), RT_ESTALE);
    assert_int_equal(write1(f, 2, 2, "c", "1"), RT_ENOTPRIMARY);
    assert_same(f, 2);
    /* Secondaries at epoch 3 while the primary is still at 2. */
    assign_order(f, 3, 1);
    assert_int_equal(write1(f, 0, 2, "c", "1"), 0);
    assign(f, 3);
    assert_int_equal(write1(f, 0, 3, "d", "1"), 0);
    assert_same(f, 4);
    /* An ISR below min_insync refuses writes before executing them. */
    f->n_isr = 2;
    f->min_insync = 3;
    assign(f, 4);
    assert_int_equal(write1(f, 0, 4, "e", "1"), RT_EBUSY);
    assert_int_equal(applied(f, 0), 4);
    /* Server 9, out of the ISR but still named secondary, is caught up
     * from its LSN (its history agrees with the primary's), stays a
     * secondary of the new configuration and serves nothing. */
    wait_tailed(f, 0, 2);
    struct ps_rcore_range_info info;
    assert_int_equal(ps_repl_range_info(&f->s[2].ps, RANGE, &info), 0);
    assert_int_equal(info.role, PS_RCORE_SECONDARY);
    assert_int_equal(info.epoch, 4);
    assert_int_equal(write1(f, 2, 4, "e", "1"), RT_ENOTPRIMARY);
    assert_int_equal(get1(f, 2, "a"), RT_ENOTPRIMARY);
}

/* With a secondary down, a write is durable at the primary but neither
 * acknowledged nor visible to reads (they wait for cw, then RT_EBUSY).
 * Once the secondary is back (restarted on its data, from its durable
 * LSN, at a new address) the primary reconnects and resends: the write
 * is acknowledged, readable, and identical everywhere. */
static void test_read_never_ahead_of_cw(void **state)
{
    struct fx *f = *state;
    struct rt_buf props = RT_BUF_INIT;
    struct th_reply w, g;
    size_t n = 0;

    assert_int_equal(write1(f, 0, 1, "before", "1"), 0);
    srv_stop(f, 2);
    th_props1(&props, "v", "late");
    write_async(f, 0, 1, "late", &props, &w);
    run_for(f, 100);
    assert_false(w.done);
    assert_int_equal(ps_repl_held_ops(&f->s[0].ps), 1);
    /* A write that fails (insert of an existing entity) changes nothing,
     * but it saw "late": its answer waits as well (§5.2). */
    struct th_reply fw;
    {
        Rt__RangeRef ref = RT__RANGE_REF__INIT;
        Rt__EntityOp op = RT__ENTITY_OP__INIT;
        Rt__EntityOp *ops[1] = {&op};
        Rt__WriteReq req = RT__WRITE_REQ__INIT;
        ref.table_id = TABLE;
        ref.range_id = RANGE;
        ref.epoch = 1;
        op.kind = RT__OP_KIND__OP_INSERT;
        op.pk = "late";
        op.rk = "r";
        op.props.data = props.data;
        op.props.len = props.len;
        req.route = &ref;
        req.n_ops = 1;
        req.ops = ops;
        req.atomic = 1;
        assert_int_equal(
            th_rpc_call_async(rt_rpc_client_conn(f->s[0].cli),
                              RT__METHOD__ENTITY_WRITE, &req.base, 30000, &fw),
            0);
    }
    run_for(f, 50);
    assert_false(fw.done);
    assert_int_equal(applied(f, 0), 2);
    assert_int_equal(applied(f, 0), 2); /* durable here already */
    assert_int_equal(applied(f, 1), 2); /* and on the live secondary */
    get_async(f, 0, "late", &g);
    run_until(f, &g.done);
    assert_int_equal(g.status, RT_EBUSY); /* never the unacked value */
    th_reply_free(&g);
    /* Not found is an answer too: it waits just the same. */
    assert_int_equal(get1(f, 0, "nokey"), RT_EBUSY);
    assert_int_equal(scan1(f, 0, &n), RT_EBUSY);
    assert_false(w.done);

    srv_start_nowait(f, 2);
    /* Before any word from the master, its persisted ranges say it is
     * a secondary (never an RF-1 owner that would take writes). */
    struct ps_rcore_range_info info;
    assert_int_equal(ps_repl_range_info(&f->s[2].ps, RANGE, &info), 0);
    assert_int_equal(info.role, PS_RCORE_SECONDARY);
    assert_int_equal(info.applied_lsn, 1);
    srv_wait(f, 2);
    assign(f, 1);
    run_until(f, &w.done);
    assert_int_equal(w.status, 0);
    run_until(f, &fw.done);
    assert_int_equal(fw.status, RT_EEXIST);
    assert_int_equal(ps_repl_held_ops(&f->s[0].ps), 0);
    th_reply_free(&w);
    th_reply_free(&fw);
    assert_int_equal(get1(f, 0, "late"), 0);
    assert_int_equal(get1(f, 0, "nokey"), RT_ENOTFOUND);
    assert_int_equal(scan1(f, 0, &n), 0);
    assert_int_equal(n, 2);
    assert_same(f, 2);
    rt_buf_free(&props);
}

/* Dropping the primary's connections to a secondary while writes stream
 * loses nothing and applies nothing twice: every write is acknowledged
 * and all three stores end identical at the same LSN. */
static void test_dropped_link_resent(void **state)
{
    struct fx *f = *state;
    enum { N = 60 };
    struct rt_buf props[N];
    struct th_reply r[N];
    char pk[N][16];
    int done = 0;

    for (int i = 0; i < N; i++) {
        rt_buf_init(&props[i]);
        th_props1(&props[i], "v", i % 3 ? "x" : "yy");
        snprintf(pk[i], sizeof(pk[i]), "k%02d", i % 40);
        write_async(f, 0, 1, pk[i], &props[i], &r[i]);
        if (i % 10 == 5) {
            run_for(f, 2);
            ps_repl_drop_peer(&f->s[0].ps, ids[1 + (i / 10) % 2]);
        }
    }
    while (!done) {
        done = 1;
        for (int i = 0; i < N; i++) {
            done &= r[i].done;
        }
        if (!done) {
            uv_run(&f->loop, UV_RUN_ONCE);
        }
    }
    for (int i = 0; i < N; i++) {
        assert_int_equal(r[i].status, 0);
        th_reply_free(&r[i]);
        rt_buf_free(&props[i]);
    }
    assert_same(f, 0);
    assert_true(applied(f, 0) >= 1);
}

/* Failover by hand, the master's part played by the test (§3.2, §7.1):
 * a SEAL is refused while the grace after the primary's last append runs
 * (busy, nothing changed), for an unknown range, an old epoch and an old
 * master term;
 * once granted it is durable and repeats the same answer. The old
 * primary's next append is fenced: it deposes itself and its held write
 * is answered RT_ETIMEDOUT. Assigned primary at the sealed epoch, the
 * sealed secondary serves, with every acknowledged write and not the
 * unacknowledged one; the old primary, now a secondary, refuses clients;
 * the roles are in the rs records. Restarted, the new primary is rebuilt
 * as primary but serves nothing until its registration confirms it. */
static void test_seal_and_promote(void **state)
{
    struct fx *f = *state;
    struct ps_rstate rs;
    uint64_t lsn = 0;
    uint32_t retry = 0;
    struct rt_buf a = RT_BUF_INIT, b = RT_BUF_INIT;

    assert_int_equal(write1(f, 0, 1, "a", "1"), 0);
    assert_int_equal(write1(f, 0, 1, "b", "1"), 0);
    assert_int_equal(write1(f, 0, 1, "c", "1"), 0);
    /* Busy: the secondary supports the live primary's lease. Nothing
     * changed. */
    assert_int_equal(seal1(f, 1, RANGE, 2, &lsn, &retry), 0);
    assert_true(retry > 0 && retry <= LEASE_MS);
    run_for(f, LEASE_MS);
    assert_int_equal(seal1(f, 1, RANGE, 2, &lsn, &retry), 0);
    assert_true(retry > 0 && retry <= LEASE_MS);
    assert_int_equal(rinfo(f, 1).state, PS_RSEC_FOLLOWING);
    assert_int_equal(ps_store_repl_get(f->s[1].ps.store, RANGE, &rs), 0);
    assert_int_equal(rs.sealed_epoch, 0);
    assert_int_equal(seal1(f, 1, RANGE + 1, 2, &lsn, &retry), RT_ENOTFOUND);
    assert_int_equal(seal1(f, 1, RANGE, 1, &lsn, &retry), RT_ESTALE);
    /* The secondaries stop supporting the primary (as if cut off from
     * it): within L its reads answer RT_ENOTPRIMARY, never stale. */
    ps_repl_lease_fence(&f->s[1].ps, 1);
    ps_repl_lease_fence(&f->s[2].ps, 1);
    assert_int_equal(get1(f, 0, "a"), 0);
    run_for(f, LEASE_MS);
    assert_int_equal(get1(f, 0, "a"), RT_ENOTPRIMARY);
    /* Granted L after the last grant, durable, idempotent. */
    assert_int_equal(seal_wait(f, 1, 2), 3);
    assert_int_equal(rinfo(f, 1).state, PS_RSEC_SEALED);
    assert_int_equal(ps_store_repl_get(f->s[1].ps.store, RANGE, &rs), 0);
    assert_int_equal(rs.sealed_epoch, 2);
    assert_int_equal(seal1(f, 1, RANGE, 2, &lsn, &retry), 0);
    assert_int_equal(lsn, 3);
    assert_int_equal(retry, 0);
    f->seal_term = 3;
    assert_int_equal(seal_wait(f, 2, 2), 3);
    /* A master older than one heard from is refused. */
    f->seal_term = 2;
    assert_int_equal(seal1(f, 2, RANGE, 2, &lsn, &retry), RT_ESTALE);
    f->seal_term = 3;
    ps_repl_lease_fence(&f->s[1].ps, 0);
    ps_repl_lease_fence(&f->s[2].ps, 0);
    /* The old primary lost its lease: NOLEASE, new writes are refused
     * busy (were one taken, the seals fence it: never acknowledged). */
    assert_int_equal(write1(f, 0, 1, "d", "1"), RT_EBUSY);
    /* The master's choice: server 8, primary at the sealed epoch. */
    assert_int_equal(assign_conf(f, 2, 1, 2, 0x6, 0x7), 0);
    wait_lease(f, 1);
    /* The old primary, outside the ISR, is caught up from its LSN: it
     * applied nothing the new primary lacks (its refused write took no
     * LSN), so its history agrees (§7.3, D = applied). */
    wait_tailed(f, 1, 0);
    assert_int_equal(rinfo(f, 0).role, PS_RCORE_SECONDARY);
    assert_int_equal(rinfo(f, 2).role, PS_RCORE_SECONDARY);
    assert_int_equal(write1(f, 1, 2, "e", "1"), 0);
    assert_int_equal(write1(f, 0, 2, "f", "1"), RT_ENOTPRIMARY);
    assert_int_equal(write1(f, 1, 1, "f", "1"), RT_ESTALE);
    f->read_epoch = 2;
    assert_int_equal(get1(f, 1, "a"), 0);
    assert_int_equal(get1(f, 1, "c"), 0);
    assert_int_equal(get1(f, 1, "e"), 0);
    assert_int_equal(get1(f, 1, "d"), RT_ENOTFOUND);
    assert_int_equal(get1(f, 0, "a"), RT_ENOTPRIMARY);
    /* The new ISR holds the same bytes at the same LSN. */
    dump(f, 1, &a);
    dump(f, 2, &b);
    assert_int_equal(a.len, b.len);
    assert_memory_equal(a.data, b.data, a.len);
    assert_int_equal(applied(f, 1), 4);
    assert_int_equal(applied(f, 2), 4);
    /* ... and streamed since: the same bytes at the same LSN. */
    for (int k = 0; k < 2000 && applied(f, 0) < 4; k++) {
        run_for(f, 5);
    }
    assert_int_equal(applied(f, 0), 4);
    rt_buf_reset(&b);
    dump(f, 0, &b);
    assert_int_equal(a.len, b.len);
    assert_memory_equal(a.data, b.data, a.len);
    rt_buf_free(&a);
    rt_buf_free(&b);
    /* Roles survive a restart: in the rs records. */
    assert_int_equal(ps_store_repl_get(f->s[1].ps.store, RANGE, &rs), 0);
    assert_int_equal(rs.role, PS_RS_ROLE_PRIMARY);
    assert_int_equal(rs.epoch, 2);
    assert_int_equal(rs.primary_epoch, 2);
    assert_int_equal(ps_store_repl_get(f->s[0].ps.store, RANGE, &rs), 0);
    assert_int_equal(rs.role, PS_RS_ROLE_SECONDARY);
    /* Heartbeats report it. */
    {
        size_t n = 0;
        Rt__ReplStatus *st = ps_repl_status(&f->s[1].ps, &n);
        assert_int_equal(n, 1);
        assert_int_equal(st[0].range_id, RANGE);
        assert_int_equal(st[0].role, RT__REPL_ROLE__ROLE_PRIMARY);
        assert_int_equal(st[0].epoch, 2);
        assert_int_equal(st[0].state, PS_REPL_ST_OK);
        assert_int_equal(st[0].commit_lsn, 4);
        assert_true(st[0].lease_ms > 0 && st[0].lease_ms <= LEASE_MS);
        free(st);
    }
    /* The new primary restarts: rebuilt from its rs record as primary, it
     * serves nothing until the registration's assignment confirms it. */
    /* Static: the fake master answers heartbeats with them until the
     * test's end, teardown included if an assertion fails. */
    static Rt__Replica reg_rep[NSRV], *reg_reps[NSRV];
    static uint64_t reg_isr[2];
    reg_isr[0] = ids[1];
    reg_isr[1] = ids[2];
    Rt__Range *reg = &M.slot[1].ranges[0];
    th_fake_master_set_range(&M, 1, 0, RANGE, TABLE, "", NULL, 2);
    for (int i = 0; i < NSRV; i++) {
        rt__replica__init(&reg_rep[i]);
        reg_rep[i].server_id = ids[i];
        reg_rep[i].role = i == 1 ? RT__REPL_ROLE__ROLE_PRIMARY
                                 : RT__REPL_ROLE__ROLE_SECONDARY;
        reg_reps[i] = &reg_rep[i];
    }
    reg->n_replicas = NSRV;
    reg->replicas = reg_reps;
    reg->n_isr = 2;
    reg->isr = reg_isr;
    reg->primary_epoch = 2;
    reg->rf = 3;
    reg->min_insync = 2;
    M.slot[1].n = 1;
    srv_stop(f, 1);
    srv_start_nowait(f, 1);
    uint64_t served = 0;
    assert_int_equal(rinfo(f, 1).role, PS_RCORE_PRIMARY);
    assert_int_equal(rinfo(f, 1).state, PS_RPRI_ACTIVATING);
    assert_int_equal(rinfo(f, 1).epoch, 2);
    assert_int_equal(ps_repl_route(&f->s[1].ps, RANGE, 2, &served),
                     RT_ENOTPRIMARY);
    srv_wait(f, 1);
    /* It does not resume (a peer may hold a group it shipped before its
     * own commit and lost): its heartbeats ask for a failover in which it
     * is a candidate, sealed at once like a secondary (it granted nothing
     * for a range it led: no restart grace for that seal). */
    run_for(f, 50);
    assert_int_equal(rinfo(f, 1).state, PS_RPRI_ACTIVATING);
    {
        size_t n = 0;
        Rt__ReplStatus *st = ps_repl_status(&f->s[1].ps, &n);
        assert_int_equal(n, 1);
        assert_true(st[0].restarted);
        free(st);
    }
    f->seal_old = ids[1];
    assert_int_equal(seal1(f, 1, RANGE, 3, &lsn, &retry), 0);
    assert_int_equal(retry, 0);
    assert_int_equal(lsn, 4);
    assert_int_equal(seal_wait(f, 2, 3), 4);
    f->seal_old = 0;
    /* The master's choice: server 1 again, a new generation. */
    assert_int_equal(assign_conf(f, 3, 1, 3, 0x6, 0x6), 0);
    wait_lease(f, 1);
    assert_int_equal(write1(f, 1, 3, "g", "1"), 0);
    assert_int_equal(applied(f, 1), 5);
    assert_int_equal(applied(f, 2), 5);
    f->read_epoch = 3;
    assert_int_equal(get1(f, 1, "e"), 0);
    M.slot[1].n = 0;
}

/* The fake master's ISR_CHANGE: recorded, and answered with the
 * committed configuration's Range at the next epoch (the test sends the
 * assignment itself). */
static struct
{
    int n;
    uint64_t range_id, epoch;
    uint64_t remove[NSRV];
    size_t n_remove;
    uint64_t add[NSRV];
    size_t n_add;
} isr_seen;

static void on_master_other(struct rt_rpc_conn *conn,
                            uint32_t method,
                            uint64_t id,
                            const uint8_t *body,
                            size_t len,
                            void *ud)
{
    Rt__IsrChangeReq *q;
    Rt__Range r = RT__RANGE__INIT;
    (void)ud;
    if (method != RT__METHOD__ISR_CHANGE ||
        (q = rt__isr_change_req__unpack(NULL, len, body)) == NULL) {
        rt_rpc_reply_err(conn, id, method, RT_ENOTIMPL, "test");
        return;
    }
    isr_seen.n++;
    isr_seen.range_id = q->range_id;
    isr_seen.epoch = q->epoch;
    isr_seen.n_remove = q->n_remove < NSRV ? q->n_remove : NSRV;
    if (isr_seen.n_remove > 0) {
        memcpy(isr_seen.remove, q->remove,
               isr_seen.n_remove * sizeof(*isr_seen.remove));
    }
    isr_seen.n_add = q->n_add < NSRV ? q->n_add : NSRV;
    if (isr_seen.n_add > 0) {
        memcpy(isr_seen.add, q->add, isr_seen.n_add * sizeof(*isr_seen.add));
    }
    r.id = q->range_id;
    r.epoch = q->epoch + 1;
    rt_rpc_reply_pb(conn, id, method, 0, &r.base);
    rt__isr_change_req__free_unpacked(q, NULL);
}

/* §5.4 with a stopped secondary: the primary's write is held, the
 * primary asks the master to remove the secondary (ISR_CHANGE on its
 * master link) within about the link-down time, once; the assignment at
 * the committed epoch answers the held write, and writes go on with the
 * smaller ISR, identical on the two members. */
static void test_isr_shrink_stopped_secondary(void **state)
{
    struct fx *f = *state;
    struct rt_buf props = RT_BUF_INIT, a = RT_BUF_INIT, b = RT_BUF_INIT;
    struct th_reply r;
    uint64_t t0;

    memset(&isr_seen, 0, sizeof(isr_seen));
    M.other = on_master_other;
    assert_int_equal(write1(f, 0, 1, "a", "1"), 0);
    srv_stop(f, 2);
    uv_update_time(&f->loop);
    t0 = uv_now(&f->loop);
    th_props1(&props, "v", "2");
    write_async(f, 0, 1, "b", &props, &r);
    while (isr_seen.n == 0 && uv_now(&f->loop) - t0 < 5000) {
        run_for(f, 5);
    }
    assert_int_equal(isr_seen.n, 1);
    assert_true(uv_now(&f->loop) - t0 < 2000);
    assert_int_equal(isr_seen.range_id, RANGE);
    assert_int_equal(isr_seen.epoch, 1);
    assert_int_equal(isr_seen.n_remove, 1);
    assert_int_equal(isr_seen.remove[0], ids[2]);
    run_for(f, 300);
    assert_false(r.done);
    assert_int_equal(isr_seen.n, 1); /* one change in flight */
    assert_int_equal(assign_conf(f, 2, 0, 1, 0x3, 0x3), 0);
    run_until(f, &r.done);
    assert_int_equal(r.status, 0);
    th_reply_free(&r);
    assert_int_equal(write1(f, 0, 2, "c", "1"), 0);
    dump(f, 0, &a);
    dump(f, 1, &b);
    assert_int_equal(a.len, b.len);
    assert_memory_equal(a.data, b.data, a.len);
    assert_int_equal(applied(f, 0), 3);
    assert_int_equal(applied(f, 1), 3);
    rt_buf_free(&a);
    rt_buf_free(&b);
    rt_buf_free(&props);
    M.other = NULL;
}

static int begin1(struct fx *f,
                  int i,
                  uint64_t range,
                  uint64_t epoch,
                  uint32_t mode,
                  uint64_t from)
{
    Rt__ReplBegin b = RT__REPL_BEGIN__INIT;
    struct th_reply r;
    b.range_id = range;
    b.epoch = epoch;
    b.mode = mode;
    b.from_lsn = from;
    b.snap_lsn = 9;
    int rc = th_rpc_call(&f->loop, rt_rpc_client_conn(f->s[i].cli),
                         RT__METHOD__REPL_BEGIN, &b.base, 10000, &r);
    th_reply_free(&r);
    return rc;
}

/* §7.3: bad input to a keyed copy changes nothing at the replica. A
 * KEYED REPL_BEGIN for an unknown range, at an older epoch, from an LSN
 * above its applied one, or of an unknown mode is refused: it stays
 * the same secondary with the same bytes. A good one makes it a learner
 * that keeps its keys (nothing cleared); then a chunk with a bad CRC32C
 * and one out of order are refused and write nothing, and a second KEYED
 * BEGIN for the copy cut short is refused. */
static void test_keyed_bad_input(void **state)
{
    struct fx *f = *state;
    struct rt_buf before = RT_BUF_INIT, after = RT_BUF_INIT;
    assert_int_equal(write1(f, 0, 1, "a", "1"), 0);
    assert_int_equal(write1(f, 0, 1, "b", "1"), 0);
    assert_same(f, 2);
    dump(f, 2, &before);
    assert_int_equal(begin1(f, 2, RANGE + 7, 1, 2, 2), RT_ESTALE);
    assert_int_equal(begin1(f, 2, RANGE, 0, 2, 2), RT_ESTALE);
    assert_int_equal(begin1(f, 2, RANGE, 1, 2, 3), RT_EINVAL);
    assert_int_equal(begin1(f, 2, RANGE, 1, 3, 2), RT_EINVAL);
    assert_int_equal(rinfo(f, 2).role, PS_RCORE_SECONDARY);
    assert_int_equal(rinfo(f, 2).applied_lsn, 2);
    assert_int_equal(applied(f, 2), 2);

    assert_int_equal(begin1(f, 2, RANGE, 1, 2, 2), 0);
    assert_int_equal(rinfo(f, 2).role, PS_RCORE_LEARNER);
    dump(f, 2, &after);
    assert_int_equal(before.len, after.len);
    assert_memory_equal(before.data, after.data, before.len);

    uint8_t key[12] = {0, 0, 0, 0, 0, 0, 0, TABLE, 'z', 0, 'r', 0};
    Rt__KeyValue kv = RT__KEY_VALUE__INIT, *kvs[1] = {&kv};
    kv.key.data = key;
    kv.key.len = sizeof(key);
    kv.deleted = 1;
    Rt__ReplSnap sn = RT__REPL_SNAP__INIT;
    struct th_reply r;
    sn.range_id = RANGE;
    sn.epoch = 1;
    sn.seq = 0;
    sn.count = 1;
    sn.n_kvs = 1;
    sn.kvs = kvs;
    sn.crc32c = 12345; /* not its CRC32C */
    assert_int_equal(th_rpc_call(&f->loop, rt_rpc_client_conn(f->s[2].cli),
                                 RT__METHOD__REPL_SNAP, &sn.base, 10000, &r),
                     RT_ECORRUPT);
    th_reply_free(&r);
    sn.seq = 1;
    assert_int_equal(th_rpc_call(&f->loop, rt_rpc_client_conn(f->s[2].cli),
                                 RT__METHOD__REPL_SNAP, &sn.base, 10000, &r),
                     RT_EINVAL);
    th_reply_free(&r);
    assert_int_equal(begin1(f, 2, RANGE, 1, 2, 2), RT_EINVAL);
    rt_buf_reset(&after);
    dump(f, 2, &after);
    assert_int_equal(before.len, after.len);
    assert_memory_equal(before.data, after.data, before.len);
    rt_buf_free(&before);
    rt_buf_free(&after);
}

/* §7.3, a suffix the sender never had: a KEYED REPL_BEGIN from below the
 * replica's applied LSN is answered with the keys its own LSNs above it
 * changed (from its key log), so that the sender sends their values too;
 * the chunk's tombstone for such a key deletes it, nothing else is
 * cleared, and the end leaves the replica a secondary at the copy's LSN.
 * Restarted, it has no key log: such a BEGIN is refused (RT_ENOTFOUND:
 * the sender copies in full) and changes nothing. */
static void test_keyed_own_keys(void **state)
{
    struct fx *f = *state;
    struct th_reply r;
    assert_int_equal(write1(f, 0, 1, "a", "1"), 0);
    assert_int_equal(write1(f, 0, 1, "b", "1"), 0);
    assert_int_equal(write1(f, 0, 1, "c", "1"), 0);
    assert_same(f, 3);

    Rt__ReplBegin b = RT__REPL_BEGIN__INIT;
    b.range_id = RANGE;
    b.epoch = 1;
    b.mode = 2;
    b.from_lsn = 2;
    b.snap_lsn = 3;
    b.snap_epoch = 1;
    assert_int_equal(th_rpc_call(&f->loop, rt_rpc_client_conn(f->s[2].cli),
                                 RT__METHOD__REPL_BEGIN, &b.base, 10000, &r),
                     0);
    Rt__ReplicaState *st =
        rt__replica_state__unpack(NULL, r.body.len, r.body.data);
    assert_non_null(st);
    assert_int_equal(st->n_pending_keys, 1); /* "c", LSN 3's */
    uint8_t key[64];
    size_t kn = st->pending_keys[0].len;
    assert_true(kn <= sizeof(key));
    memcpy(key, st->pending_keys[0].data, kn);
    assert_non_null(memchr(key, 'c', kn));
    rt__replica_state__free_unpacked(st, NULL);
    th_reply_free(&r);
    assert_int_equal(rinfo(f, 2).role, PS_RCORE_LEARNER);

    Rt__KeyValue kv = RT__KEY_VALUE__INIT, *kvs[1] = {&kv};
    kv.key.data = key;
    kv.key.len = kn;
    kv.deleted = 1;
    Rt__ReplSnap sn = RT__REPL_SNAP__INIT;
    sn.range_id = RANGE;
    sn.epoch = 1;
    sn.seq = 0;
    sn.last = 1;
    sn.count = 1;
    sn.n_kvs = 1;
    sn.kvs = kvs;
    uint8_t buf[256];
    size_t n = rt__repl_snap__get_packed_size(&sn);
    assert_true(n <= sizeof(buf));
    rt__repl_snap__pack(&sn, buf);
    sn.crc32c = rt_crc32c(0, buf, n);
    assert_int_equal(th_rpc_call(&f->loop, rt_rpc_client_conn(f->s[2].cli),
                                 RT__METHOD__REPL_SNAP, &sn.base, 10000, &r),
                     0);
    th_reply_free(&r);
    assert_int_equal(rinfo(f, 2).role, PS_RCORE_SECONDARY);
    assert_int_equal(rinfo(f, 2).applied_lsn, 3);
    /* a, b kept; c (the last in key order) deleted: server 2's bytes are
     * server 0's without c's record. */
    struct rt_buf d0 = RT_BUF_INIT, d2 = RT_BUF_INIT;
    dump(f, 0, &d0);
    dump(f, 2, &d2);
    assert_true(d2.len > 0 && d2.len < d0.len);
    assert_memory_equal(d0.data, d2.data, d2.len);
    rt_buf_free(&d0);
    rt_buf_free(&d2);
    assert_int_equal(get1(f, 0, "c"), 0); /* the others keep it */
    srv_stop(f, 2);
    srv_start(f, 2);
    assert_int_equal(assign_conf(f, 1, 0, 1, 0x7, 0x4), 0);
    assert_int_equal(rinfo(f, 2).applied_lsn, 3);
    b.from_lsn = 1;
    assert_int_equal(th_rpc_call(&f->loop, rt_rpc_client_conn(f->s[2].cli),
                                 RT__METHOD__REPL_BEGIN, &b.base, 10000, &r),
                     RT_ENOTFOUND);
    th_reply_free(&r);
    assert_int_equal(rinfo(f, 2).role, PS_RCORE_SECONDARY);
    assert_int_equal(rinfo(f, 2).applied_lsn, 3);
}

/* §3.3, §8.1 (step 10): the secondary removed from the ISR restarts;
 * the primary probes it, finds the history of its `rs` record agreeing
 * with its own, streams from its LSN out of the send buffer it kept for
 * it (no copy) and asks the master to add it (ISR_CHANGE{add}, the
 * master's part played by the test); at the committed epoch it counts
 * again, and all three hold the same bytes at the same LSN. */
static void test_rejoin_after_restart(void **state)
{
    struct fx *f = *state;
    uint64_t t0;

    memset(&isr_seen, 0, sizeof(isr_seen));
    M.other = on_master_other;
    assert_int_equal(write1(f, 0, 1, "a", "1"), 0);
    srv_stop(f, 2);
    assert_int_equal(assign_conf(f, 2, 0, 1, 0x3, 0x3), 0);
    assert_int_equal(write1(f, 0, 2, "b", "1"), 0);
    assert_int_equal(write1(f, 0, 2, "c", "1"), 0);
    memset(&isr_seen, 0, sizeof(isr_seen));
    srv_start(f, 2);
    assert_int_equal(assign_conf(f, 2, 0, 1, 0x3, 0x7), 0);
    wait_tailed(f, 0, 2);
    uv_update_time(&f->loop);
    t0 = uv_now(&f->loop);
    while (isr_seen.n_add == 0 && uv_now(&f->loop) - t0 < 5000) {
        run_for(f, 5);
    }
    assert_int_equal(isr_seen.range_id, RANGE);
    assert_int_equal(isr_seen.epoch, 2);
    assert_int_equal(isr_seen.n_remove, 0);
    assert_int_equal(isr_seen.n_add, 1);
    assert_int_equal(isr_seen.add[0], ids[2]);
    assert_int_equal(applied(f, 2), 3);
    assert_int_equal(assign_conf(f, 3, 0, 1, 0x7, 0x7), 0);
    assert_int_equal(write1(f, 0, 3, "d", "1"), 0);
    assert_same(f, 4);
    /* REPL_ABORT of a copy no longer running: answered, nothing lost. */
    {
        Rt__ReplAbort ab = RT__REPL_ABORT__INIT;
        struct th_reply rep;
        ab.range_id = RANGE;
        ab.epoch = 3;
        assert_int_equal(
            th_rpc_call(&f->loop, M.slot[2].conn, RT__METHOD__REPL_ABORT,
                        &ab.base, 10000, &rep),
            0);
        th_reply_free(&rep);
    }
    assert_int_equal(write1(f, 0, 3, "e", "1"), 0);
    assert_same(f, 5);
    M.other = NULL;
}

/* §6.2 with no ISR secondary: the primary alone holds the lease while
 * its configuration is current, so it serves reads though no peer
 * supports it and though the ISR is below min_insync (design F4: reads
 * go on, writes answer RT_EBUSY). */
static void test_isr_of_one_reads(void **state)
{
    struct fx *f = *state;

    assert_int_equal(write1(f, 0, 1, "a", "1"), 0);
    ps_repl_lease_fence(&f->s[1].ps, 1);
    ps_repl_lease_fence(&f->s[2].ps, 1);
    run_for(f, LEASE_MS);
    assert_int_equal(get1(f, 0, "a"), RT_ENOTPRIMARY);
    /* The master shrank the ISR to the primary alone (min_insync 2). */
    assert_int_equal(assign_conf(f, 2, 0, 1, 0x1, 0x7), 0);
    wait_lease(f, 0);
    assert_int_equal(ps_repl_lease_left(&f->s[0].ps, RANGE), UINT32_MAX);
    f->read_epoch = 2;
    assert_int_equal(get1(f, 0, "a"), 0);
    size_t n = 0;
    assert_int_equal(scan1(f, 0, &n), 0);
    assert_int_equal(n, 1);
    assert_int_equal(write1(f, 0, 2, "b", "1"), RT_EBUSY);
}

/* Split (docs/DESIGN-replication.md §9.1), the partition servers' part. */

/* RANGE_FREEZE or RANGE_THAW of @range at @epoch to server @i on its
 * master link: the reply status; a FreezeResp's lsn and epoch in *@lsn
 * and *@ep (may be NULL). */
static int freeze1(struct fx *f,
                   int i,
                   uint32_t method,
                   uint64_t range,
                   uint64_t epoch,
                   uint64_t *lsn,
                   uint64_t *ep)
{
    Rt__FreezeReq req = RT__FREEZE_REQ__INIT;
    struct th_reply r;
    int rc;
    req.range_id = range;
    req.epoch = epoch;
    rc = th_rpc_call(&f->loop, M.slot[i].conn, method, &req.base, 10000, &r);
    if (rc == 0 && method == RT__METHOD__RANGE_FREEZE) {
        Rt__FreezeResp *resp =
            rt__freeze_resp__unpack(NULL, r.body.len, r.body.data);
        assert_non_null(resp);
        if (lsn) {
            *lsn = resp->lsn;
        }
        if (ep) {
            *ep = resp->epoch;
        }
        rt__freeze_resp__free_unpacked(resp, NULL);
    }
    th_reply_free(&r);
    return rc;
}

/* An upsert of (@pk, "r") to range @range at @epoch on server @s: the
 * reply status. */
static int write_range(struct fx *f,
                       int s,
                       uint64_t range,
                       uint64_t epoch,
                       const char *pk)
{
    struct rt_buf props = RT_BUF_INIT;
    Rt__RangeRef ref = RT__RANGE_REF__INIT;
    Rt__EntityOp op = RT__ENTITY_OP__INIT;
    Rt__EntityOp *ops[1] = {&op};
    Rt__WriteReq req = RT__WRITE_REQ__INIT;
    struct th_reply r;
    int rc;
    th_props1(&props, "v", pk);
    ref.table_id = TABLE;
    ref.range_id = range;
    ref.epoch = epoch;
    op.kind = RT__OP_KIND__OP_UPSERT_REPLACE;
    op.pk = (char *)pk;
    op.rk = "r";
    op.props.data = props.data;
    op.props.len = props.len;
    req.route = &ref;
    req.n_ops = 1;
    req.ops = ops;
    rc = th_rpc_call(&f->loop, rt_rpc_client_conn(f->s[s].cli),
                     RT__METHOD__ENTITY_WRITE, &req.base, 30000, &r);
    th_reply_free(&r);
    rt_buf_free(&props);
    return rc;
}

/* An assignment of @n ranges @rid[k] over [@low[k], @high[k]) (NULL =
 * +inf) of TABLE at @epoch, each with the same replica set (primary 7,
 * all in sync): ASSIGN_RANGES to the secondaries first, then the
 * primary, as the master sends a split or merge. */
static void assign_ranges(struct fx *f,
                          uint64_t epoch,
                          size_t n,
                          const uint64_t *rid,
                          const char *const *low,
                          const char *const *high)
{
    struct members mb;
    uint64_t isr[NSRV];
    Rt__Range r[2], *rs[2] = {&r[0], &r[1]};
    Rt__Assignment a = RT__ASSIGNMENT__INIT;

    assert_true(n <= 2);

    members_fill(f, &mb, 0);
    for (int i = 0; i < NSRV; i++) {
        isr[i] = ids[i];
    }
    for (size_t k = 0; k < n; k++) {
        rt__range__init(&r[k]);
        r[k].id = rid[k];
        r[k].table_id = TABLE;
        r[k].low = (char *)low[k];
        r[k].high = high[k] ? (char *)high[k] : "";
        r[k].high_inf = high[k] == NULL;
        r[k].server_id = ids[0];
        r[k].epoch = epoch;
        r[k].n_replicas = NSRV;
        r[k].replicas = mb.reps;
        r[k].n_isr = NSRV;
        r[k].isr = isr;
        r[k].primary_epoch = 1;
        r[k].rf = 3;
        r[k].min_insync = f->min_insync;
    }
    a.n_ranges = n;
    a.ranges = rs;
    a.n_peers = NSRV;
    a.peers = mb.srvs;
    a.map_version = ++f->map_version;
    for (int k = 1; k <= NSRV; k++) {
        int i = k % NSRV;
        struct th_reply rep_;
        assert_int_equal(
            th_rpc_call(&f->loop, M.slot[i].conn, RT__METHOD__ASSIGN_RANGES,
                        &a.base, 10000, &rep_),
            0);
        th_reply_free(&rep_);
    }
}

/* Every server holds the same bytes of TABLE. */
static void assert_same_data(struct fx *f)
{
    struct rt_buf a = RT_BUF_INIT;
    dump(f, 0, &a);
    for (int i = 1; i < NSRV; i++) {
        struct rt_buf b = RT_BUF_INIT;
        dump(f, i, &b);
        assert_int_equal(a.len, b.len);
        assert_memory_equal(a.data, b.data, a.len);
        rt_buf_free(&b);
    }
    rt_buf_free(&a);
}

static uint64_t applied_of(struct fx *f, int i, uint64_t range)
{
    struct ps_rstate rs;
    assert_int_equal(ps_store_repl_get(f->s[i].ps.store, range, &rs), 0);
    return rs.applied_lsn;
}

/* RANGE_FREEZE answers once every ISR member has the last LSN, then new
 * writes get RT_EBUSY while reads go on; the same request is answered
 * again the same; RANGE_THAW lets writes in again. After the split's
 * assignment both halves start on every replica at the parent's LSN
 * (durable `rs` records), take writes at once from LSN + 1 on all three,
 * the parent's id is stale and nothing is frozen any more. A secondary
 * refuses a freeze (RT_ENOTPRIMARY), so does a stale epoch (RT_ESTALE).
 * Merged back (both halves frozen, then one range), the range starts at
 * the higher of the halves' LSNs on all three, and a restarted secondary
 * comes back with it alone. */
static void test_split_and_merge(void **state)
{
    struct fx *f = *state;
    char pk[32];
    uint64_t lsn = 0, ep = 0;

    for (int i = 0; i < 10; i++) {
        snprintf(pk, sizeof(pk), "pk%03d", i);
        assert_int_equal(write1(f, 0, 1, pk, "v"), 0);
    }
    assert_int_equal(
        freeze1(f, 1, RT__METHOD__RANGE_FREEZE, RANGE, 1, NULL, NULL),
        RT_ENOTPRIMARY);
    assert_int_equal(
        freeze1(f, 0, RT__METHOD__RANGE_FREEZE, RANGE, 2, NULL, NULL),
        RT_ESTALE);
    assert_int_equal(
        freeze1(f, 0, RT__METHOD__RANGE_FREEZE, RANGE, 1, &lsn, &ep), 0);
    assert_int_equal(lsn, 10);
    assert_int_equal(ep, 1);
    assert_same(f, 10);
    assert_int_equal(ps_split_frozen(&f->s[0].ps), 1);
    assert_int_equal(write1(f, 0, 1, "pk001", "w"), RT_EBUSY);
    assert_int_equal(get1(f, 0, "pk001"), 0);
    lsn = 0;
    assert_int_equal(
        freeze1(f, 0, RT__METHOD__RANGE_FREEZE, RANGE, 1, &lsn, NULL), 0);
    assert_int_equal(lsn, 10);
    assert_int_equal(
        freeze1(f, 0, RT__METHOD__RANGE_THAW, RANGE, 1, NULL, NULL), 0);
    assert_int_equal(ps_split_frozen(&f->s[0].ps), 0);
    assert_int_equal(write1(f, 0, 1, "pk001", "w"), 0);
    assert_int_equal(
        freeze1(f, 0, RT__METHOD__RANGE_FREEZE, RANGE, 1, &lsn, NULL), 0);
    assert_int_equal(lsn, 11);

    {
        const uint64_t rid[2] = {2, 3};
        const char *const low[2] = {"", "pk005"};
        const char *const high[2] = {"pk005", NULL};
        assign_ranges(f, 2, 2, rid, low, high);
    }
    assert_int_equal(ps_split_frozen(&f->s[0].ps), 0);
    for (int i = 0; i < NSRV; i++) {
        assert_int_equal(applied_of(f, i, 2), 11);
        assert_int_equal(applied_of(f, i, 3), 11);
    }
    assert_int_equal(write_range(f, 0, RANGE, 1, "pk001"), RT_ESTALE);
    assert_int_equal(write_range(f, 0, 2, 2, "pk001"), 0);
    assert_int_equal(write_range(f, 0, 3, 2, "pk007"), 0);
    assert_int_equal(write_range(f, 0, 3, 2, "pk008"), 0);
    for (int i = 0; i < NSRV; i++) {
        assert_int_equal(applied_of(f, i, 2), 12);
        assert_int_equal(applied_of(f, i, 3), 13);
    }
    assert_int_equal(write_range(f, 1, 2, 2, "pk002"), RT_ENOTPRIMARY);
    assert_same_data(f);

    /* Merge the halves back (§9.2): both frozen, then range 4 over the
     * table starts at the higher LSN (13) everywhere. */
    assert_int_equal(freeze1(f, 0, RT__METHOD__RANGE_FREEZE, 2, 2, &lsn, NULL),
                     0);
    assert_int_equal(lsn, 12);
    assert_int_equal(freeze1(f, 0, RT__METHOD__RANGE_FREEZE, 3, 2, &lsn, NULL),
                     0);
    assert_int_equal(lsn, 13);
    assert_int_equal(ps_split_frozen(&f->s[0].ps), 2);
    {
        const uint64_t rid[1] = {4};
        const char *const low[1] = {""};
        const char *const high[1] = {NULL};
        assign_ranges(f, 3, 1, rid, low, high);
    }
    assert_int_equal(ps_split_frozen(&f->s[0].ps), 0);
    for (int i = 0; i < NSRV; i++) {
        assert_int_equal(applied_of(f, i, 4), 13);
    }
    assert_int_equal(write_range(f, 0, 2, 2, "pk001"), RT_ESTALE);
    assert_int_equal(write_range(f, 0, 4, 3, "pk001"), 0);
    assert_int_equal(write_range(f, 0, 4, 3, "pk009"), 0);
    for (int i = 0; i < NSRV; i++) {
        assert_int_equal(applied_of(f, i, 4), 15);
    }
    assert_same_data(f);

    /* A secondary restarted from its disk comes back with the merged
     * range only, as a secondary at its LSN (before it registers). */
    srv_stop(f, 2);
    srv_start_nowait(f, 2);
    {
        struct ps_rcore_range_info info;
        assert_int_equal(ps_repl_range_info(&f->s[2].ps, 4, &info), 0);
        assert_int_equal(info.role, PS_RCORE_SECONDARY);
        assert_int_equal(info.applied_lsn, 15);
        for (uint64_t id = 1; id <= 3; id++) {
            assert_int_equal(ps_repl_range_info(&f->s[2].ps, id, &info),
                             RT_ENOTFOUND);
        }
    }
    srv_stop(f, 2);
}

/* TRANSFER_PRIMARY{RANGE, @epoch, to slot @to} (or TRANSFER_ABORT) to
 * server @i on its master link. Returns the status; on 0 a transfer's
 * answer is in *@lsn and *@frozen_ms (may be NULL). */
static int transfer1(struct fx *f,
                     int i,
                     uint32_t method,
                     uint64_t epoch,
                     uint64_t to,
                     uint64_t *lsn,
                     uint64_t *frozen_ms)
{
    Rt__TransferReq req = RT__TRANSFER_REQ__INIT;
    struct th_reply r;
    int rc;
    req.range_id = RANGE;
    req.epoch = epoch;
    req.to_server = to;
    req.new_epoch = epoch + 1;
    rc = th_rpc_call(&f->loop, M.slot[i].conn, method, &req.base, 10000, &r);
    if (rc == 0 && method == RT__METHOD__TRANSFER_PRIMARY) {
        Rt__TransferResp *resp =
            rt__transfer_resp__unpack(NULL, r.body.len, r.body.data);
        assert_non_null(resp);
        *lsn = resp->lsn;
        if (frozen_ms) {
            *frozen_ms = resp->frozen_ms;
        }
        rt__transfer_resp__free_unpacked(resp, NULL);
    }
    th_reply_free(&r);
    return rc;
}

/* A transfer by hand, the master's part played by the test (§4
 * TRANSFER_PRIMARY, §9.3 step 2). Refused in the order of §4: not the
 * primary (a secondary), another epoch (RT_ESTALE), a target outside the
 * ISR (RT_EINVAL). Accepted: answered with the last LSN once the target
 * has it; the range then answers RT_EBUSY to writes and reads; the same
 * request gets the same answer, another RT_EBUSY. The lease is released:
 * the secondaries seal at once (no busy retry). Restarted, the frozen
 * primary still serves nothing (the freeze was persisted) although its
 * registration names it primary. The assignment naming
 * the target primary makes the old primary a secondary in its ISR with
 * every write; the new primary serves. A second transfer is aborted: the
 * primary serves again once its lease is back. */
static int count_marker(uint64_t id, const uint8_t *v, size_t vn, void *arg)
{
    (void)id;
    (void)v;
    (void)vn;
    (*(int *)arg)++;
    return 0;
}

static void test_transfer(void **state)
{
    struct fx *f = *state;
    uint64_t lsn = 0, frozen = 0, served = 0;
    uint32_t retry = 0;
    int markers = 0;

    run_for(f, LEASE_MS); /* past the start grace of the seal guard */
    assert_int_equal(write1(f, 0, 1, "a", "1"), 0);
    assert_int_equal(write1(f, 0, 1, "b", "1"), 0);
    assert_int_equal(
        transfer1(f, 1, RT__METHOD__TRANSFER_PRIMARY, 1, ids[2], &lsn, NULL),
        RT_ESTALE);
    assert_int_equal(
        transfer1(f, 0, RT__METHOD__TRANSFER_PRIMARY, 2, ids[1], &lsn, NULL),
        RT_ESTALE);
    assert_int_equal(
        transfer1(f, 0, RT__METHOD__TRANSFER_PRIMARY, 1, 99, &lsn, NULL),
        RT_EINVAL);
    assert_int_equal(write1(f, 0, 1, "c", "1"), 0);

    assert_int_equal(
        transfer1(f, 0, RT__METHOD__TRANSFER_PRIMARY, 1, ids[1], &lsn, &frozen),
        0);
    assert_int_equal(lsn, 3);
    assert_true(frozen < 1000);
    assert_int_equal(ps_transfer_frozen(&f->s[0].ps), 1);
    assert_int_equal(rinfo(f, 0).state, PS_RPRI_FROZEN);
    assert_int_equal(write1(f, 0, 1, "d", "1"), RT_EBUSY);
    assert_int_equal(get1(f, 0, "a"), RT_EBUSY);
    assert_int_equal(ps_repl_route(&f->s[0].ps, RANGE, 1, &served), RT_EBUSY);
    lsn = 0;
    assert_int_equal(
        transfer1(f, 0, RT__METHOD__TRANSFER_PRIMARY, 1, ids[1], &lsn, NULL),
        0);
    assert_int_equal(lsn, 3);
    assert_int_equal(
        transfer1(f, 0, RT__METHOD__TRANSFER_PRIMARY, 1, ids[2], &lsn, NULL),
        RT_EBUSY);
    /* Released: the ISR seals without waiting out L. */
    assert_int_equal(seal1(f, 1, RANGE, 2, &lsn, &retry), 0);
    assert_int_equal(retry, 0);
    assert_int_equal(lsn, 3);
    assert_int_equal(seal1(f, 2, RANGE, 2, &lsn, &retry), 0);
    assert_int_equal(retry, 0);

    /* The old primary restarts before the decision: its freeze was
     * persisted, so although its registration still names it primary
     * at epoch 1 it serves nothing. Static: the fake master answers
     * heartbeats with them until the test's end. */
    static Rt__Replica reg_rep[NSRV], *reg_reps[NSRV];
    static uint64_t reg_isr[NSRV];
    Rt__Range *reg = &M.slot[0].ranges[0];
    th_fake_master_set_range(&M, 0, 0, RANGE, TABLE, "", NULL, 1);
    for (int i = 0; i < NSRV; i++) {
        rt__replica__init(&reg_rep[i]);
        reg_rep[i].server_id = ids[i];
        reg_rep[i].role = i == 0 ? RT__REPL_ROLE__ROLE_PRIMARY
                                 : RT__REPL_ROLE__ROLE_SECONDARY;
        reg_reps[i] = &reg_rep[i];
        reg_isr[i] = ids[i];
    }
    reg->n_replicas = NSRV;
    reg->replicas = reg_reps;
    reg->n_isr = NSRV;
    reg->isr = reg_isr;
    reg->primary_epoch = 1;
    reg->rf = 3;
    reg->min_insync = 2;
    M.slot[0].n = 1;
    srv_stop(f, 0);
    srv_start(f, 0);
    assert_int_equal(ps_transfer_frozen(&f->s[0].ps), 1);
    run_for(f, 2 * LEASE_MS);
    assert_int_equal(ps_repl_route(&f->s[0].ps, RANGE, 1, &served), RT_EBUSY);
    assert_int_equal(write1(f, 0, 1, "d", "1"), RT_EBUSY);
    M.slot[0].n = 0;

    /* Committed: server 8 primary at epoch 2, all three in sync. */
    assert_int_equal(assign_conf(f, 2, 1, 2, 0x7, 0x7), 0);
    wait_lease(f, 1);
    assert_int_equal(ps_transfer_frozen(&f->s[0].ps), 0);
    assert_int_equal(ps_store_meta_scan(f->s[0].ps.store, PS_TRANSFER_META,
                                        count_marker, &markers),
                     0);
    assert_int_equal(markers, 0);
    assert_int_equal(rinfo(f, 0).role, PS_RCORE_SECONDARY);
    assert_int_equal(rinfo(f, 0).state, PS_RSEC_FOLLOWING);
    f->read_epoch = 2;
    assert_int_equal(write1(f, 1, 2, "e", "1"), 0);
    assert_int_equal(get1(f, 1, "c"), 0);
    assert_int_equal(write1(f, 0, 2, "f", "1"), RT_ENOTPRIMARY);
    assert_same(f, 4);

    /* Another transfer, aborted: server 8 serves again. */
    assert_int_equal(
        transfer1(f, 1, RT__METHOD__TRANSFER_PRIMARY, 2, ids[2], &lsn, NULL),
        0);
    assert_int_equal(lsn, 4);
    assert_int_equal(write1(f, 1, 2, "g", "1"), RT_EBUSY);
    assert_int_equal(
        transfer1(f, 1, RT__METHOD__TRANSFER_ABORT, 2, ids[2], NULL, NULL), 0);
    assert_int_equal(ps_transfer_frozen(&f->s[1].ps), 0);
    wait_lease(f, 1);
    assert_int_equal(write1(f, 1, 2, "g", "1"), 0);
    assert_same(f, 5);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_acked_everywhere, setup, teardown),
        cmocka_unit_test_setup_teardown(test_secondary_not_primary, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_read_never_ahead_of_cw, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_dropped_link_resent, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_seal_and_promote, setup, teardown),
        cmocka_unit_test_setup_teardown(test_isr_of_one_reads, setup, teardown),
        cmocka_unit_test_setup_teardown(test_rejoin_after_restart, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_transfer, setup, teardown),
        cmocka_unit_test_setup_teardown(test_keyed_bad_input, setup, teardown),
        cmocka_unit_test_setup_teardown(test_keyed_own_keys, setup, teardown),
        cmocka_unit_test_setup_teardown(test_isr_shrink_stopped_secondary,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_split_and_merge, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
