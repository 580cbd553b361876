/* Partition server over real RPC, in one process and one loop: a fake
 * master (th_fake_master) that answers PS_REGISTER / PS_HEARTBEAT with a
 * scripted assignment, a front-end client (rt_rpc_client), and the server
 * itself (ps_server.h) with its writer thread and LMDB in a temp dir.
 * With RT_PS_BINARY it also runs rt-partition-server processes for the
 * --heartbeat-ms flag checks. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "ps_server.h"
#include "rt.pb-c.h"
#include "rt_entity.h"
#include "rt_err.h"
#include "rt_filter.h"
#include "rt_key.h"
#include "rt_log.h"
#include "th_dir.h"
#include "th_fake_master.h"
#include "th_lmdb.h"
#include "th_props.h"
#include "th_rpc.h"

/* Fixture: fake master (one server, id 7) */

static struct th_fake_master M;

static void master_set_range(size_t i,
                             uint64_t id,
                             uint64_t table,
                             const char *low,
                             const char *high,
                             uint64_t epoch)
{
    th_fake_master_set_range(&M, 0, i, id, table, low, high, epoch);
}

/* Fixture: loop, server, client */

struct fx
{
    uv_loop_t loop;
    char dir[64];
    char data[96];
    char master_addr[160];
    struct ps_server ps;
    struct rt_rpc_client *cli;
    int cli_up;
};

static void run_until(struct fx *f, const int *flag)
{
    assert_int_equal(th_run_until(&f->loop, flag, 5000), 0);
}

static size_t max_pending = 20000;
static uint32_t heartbeat_ms;  /* cfg.heartbeat_ms; 0 = the default */
static uint32_t group_wait_us; /* cfg.group_wait_us; 0 = off */

/* Runs the loop for @ms of wall time. */
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

static void ps_start(struct fx *f)
{
    struct ps_config cfg;
    memset(&cfg, 0, sizeof(cfg));
    cfg.listen = "127.0.0.1:0";
    cfg.advertise = "";
    cfg.master = f->master_addr;
    cfg.data = f->data;
    cfg.port_file = "";
    cfg.max_pending = max_pending;
    cfg.map_size = 64u * 1024u * 1024u;
    cfg.heartbeat_ms = heartbeat_ms;
    cfg.group_wait_us = group_wait_us;
    assert_int_equal(ps_server_start(&f->ps, &f->loop, &cfg), 0);
}

static void ps_stop(struct fx *f)
{
    ps_server_stop(&f->ps);
    /* Let the handles close (the master keeps running). */
    for (int i = 0; i < 20; i++) {
        uv_run(&f->loop, UV_RUN_NOWAIT);
    }
    ps_server_close(&f->ps);
}

static int setup(void **state)
{
    struct fx *f = calloc(1, sizeof(*f));
    rt_log_init("test", RT_LOG_WARN);
    assert_int_equal(uv_loop_init(&f->loop), 0);
    assert_int_equal(th_dir_create("test_ps_server", f->dir, sizeof(f->dir)),
                     0);
    snprintf(f->data, sizeof(f->data), "%s/data", f->dir);

    max_pending = 20000;
    heartbeat_ms = 0;
    group_wait_us = 0;
    memset(&M, 0, sizeof(M));
    M.slot[0].id = 7;
    master_set_range(0, 1, 5, "", NULL, 1);
    M.slot[0].n = 1;
    M.map_version = 3;
    assert_int_equal(th_fake_master_start(&M, &f->loop), 0);
    snprintf(f->master_addr, sizeof(f->master_addr), "%s", M.addr);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fx *f = *state;
    if (f->cli) {
        rt_rpc_client_close(f->cli);
    }
    if (!f->ps.stopping) {
        ps_server_stop(&f->ps);
    }
    assert_int_equal(M.bad_requests, 0);
    th_fake_master_close(&M);
    uv_run(&f->loop, UV_RUN_DEFAULT);
    ps_server_close(&f->ps);
    assert_int_equal(uv_loop_close(&f->loop), 0);
    th_dir_remove(f->dir);
    free(f);
    return 0;
}

/* Helpers: synchronous calls */

static void call(struct fx *f,
                 struct rt_rpc_conn *conn,
                 uint32_t method,
                 const ProtobufCMessage *msg,
                 struct th_reply *r)
{
    assert_int_equal(th_rpc_call_async(conn, method, msg, 3000, r), 0);
    run_until(f, &r->done);
}

static void connect_client(struct fx *f)
{
    char addr[64];
    snprintf(addr, sizeof(addr), "127.0.0.1:%d", f->ps.port);
    assert_int_equal(th_rpc_connect(&f->loop, addr, &f->cli_up, 5000, &f->cli),
                     0);
}

/* One-op write; returns the reply status, *code the op's code. With
 * @return_value the op asks for the stored value, appended to @value
 * (which may be NULL) together with whatever the reply carries. */
static int write1_opt(struct fx *f,
                      uint64_t range,
                      uint64_t epoch,
                      Rt__OpKind kind,
                      const char *pk,
                      const char *rk,
                      int return_value,
                      int *code,
                      struct rt_buf *value)
{
    struct rt_buf props = RT_BUF_INIT;
    Rt__RangeRef ref = RT__RANGE_REF__INIT;
    Rt__EntityOp op = RT__ENTITY_OP__INIT;
    Rt__EntityOp *ops[1] = {&op};
    Rt__WriteReq req = RT__WRITE_REQ__INIT;
    struct th_reply r;

    th_props1(&props, "v", rk);
    ref.table_id = 5;
    ref.range_id = range;
    ref.epoch = epoch;
    op.kind = kind;
    op.pk = (char *)pk;
    op.rk = (char *)rk;
    op.props.data = props.data;
    op.props.len = props.len;
    op.return_value = return_value;
    req.route = &ref;
    req.n_ops = 1;
    req.ops = ops;
    call(f, rt_rpc_client_conn(f->cli), RT__METHOD__ENTITY_WRITE, &req.base,
         &r);
    if (r.status == 0) {
        Rt__WriteResp *resp =
            rt__write_resp__unpack(NULL, r.body.len, r.body.data);
        assert_non_null(resp);
        assert_int_equal(resp->n_results, 1);
        *code = resp->results[0]->code;
        if (value) {
            rt_buf_append(value, resp->results[0]->value.data,
                          resp->results[0]->value.len);
            assert_true(resp->results[0]->ticks > 0 || *code != 0);
        }
        rt__write_resp__free_unpacked(resp, NULL);
    }
    rt_buf_free(&r.body);
    rt_buf_free(&props);
    return r.status;
}

/* One-op write asking for the stored value when @value is set. */
static int write1(struct fx *f,
                  uint64_t range,
                  uint64_t epoch,
                  Rt__OpKind kind,
                  const char *pk,
                  const char *rk,
                  int *code,
                  struct rt_buf *value)
{
    return write1_opt(f, range, epoch, kind, pk, rk, value != NULL, code,
                      value);
}

static int get1(struct fx *f,
                uint64_t range,
                uint64_t epoch,
                const char *pk,
                const char *rk,
                struct rt_buf *value)
{
    Rt__RangeRef ref = RT__RANGE_REF__INIT;
    Rt__GetReq req = RT__GET_REQ__INIT;
    struct th_reply r;
    ref.table_id = 5;
    ref.range_id = range;
    ref.epoch = epoch;
    req.route = &ref;
    req.pk = (char *)pk;
    req.rk = (char *)rk;
    call(f, rt_rpc_client_conn(f->cli), RT__METHOD__ENTITY_GET, &req.base, &r);
    if (r.status == 0 && value) {
        Rt__GetResp *resp = rt__get_resp__unpack(NULL, r.body.len, r.body.data);
        assert_non_null(resp);
        rt_buf_append(value, resp->value.data, resp->value.len);
        rt__get_resp__free_unpacked(resp, NULL);
    }
    rt_buf_free(&r.body);
    return r.status;
}

/* Scans range @range; returns the status, *n entities, *more. */
static int scan1(struct fx *f,
                 uint64_t range,
                 uint64_t epoch,
                 unsigned limit,
                 size_t *n,
                 int *more,
                 char *first_pk)
{
    Rt__RangeRef ref = RT__RANGE_REF__INIT;
    Rt__ScanReq req = RT__SCAN_REQ__INIT;
    struct th_reply r;
    ref.table_id = 5;
    ref.range_id = range;
    ref.epoch = epoch;
    req.route = &ref;
    req.limit = limit;
    call(f, rt_rpc_client_conn(f->cli), RT__METHOD__ENTITY_SCAN, &req.base, &r);
    if (r.status == 0) {
        Rt__ScanResp *resp =
            rt__scan_resp__unpack(NULL, r.body.len, r.body.data);
        assert_non_null(resp);
        *n = resp->n_entities;
        *more = resp->more;
        if (first_pk && resp->n_entities > 0) {
            strcpy(first_pk, resp->entities[0]->pk);
        }
        rt__scan_resp__free_unpacked(resp, NULL);
    }
    rt_buf_free(&r.body);
    return r.status;
}

/* Tests */

/* The server registers, serves writes/gets/scans of its range, and
 * answers StaleEpoch for anything it does not own. */
static void test_register_and_serve(void **state)
{
    struct fx *f = *state;
    struct rt_buf v1 = RT_BUF_INIT, v2 = RT_BUF_INIT;
    char addr[64];
    int code;

    ps_start(f);
    run_until(f, &f->ps.registered);
    assert_int_equal(M.slot[0].registers, 1);
    assert_int_equal(M.slot[0].reg_server_id, 0);
    snprintf(addr, sizeof(addr), "127.0.0.1:%d", f->ps.port);
    assert_string_equal(M.slot[0].reg_addr, addr);
    assert_int_equal(f->ps.server_id, 7);
    connect_client(f);

    /* An insert returns the stored value only when asked for. */
    assert_int_equal(
        write1_opt(f, 1, 1, RT__OP_KIND__OP_INSERT, "pk0", "rk", 0, &code, &v1),
        0);
    assert_int_equal(code, 0);
    assert_int_equal(v1.len, 0);
    assert_int_equal(
        write1(f, 1, 1, RT__OP_KIND__OP_INSERT, "pk", "rk", &code, &v1), 0);
    assert_int_equal(code, 0);
    assert_true(v1.len > RT_VALUE_HDR_SIZE);
    assert_int_equal(
        write1(f, 1, 1, RT__OP_KIND__OP_INSERT, "pk", "rk", &code, NULL), 0);
    assert_int_equal(code, RT_EEXIST);
    assert_int_equal(get1(f, 1, 1, "pk", "rk", &v2), 0);
    assert_int_equal(v1.len, v2.len);
    assert_memory_equal(v1.data, v2.data, v1.len);
    assert_int_equal(get1(f, 1, 1, "pk", "nope", NULL), RT_ENOTFOUND);

    /* Wrong epoch, unknown range: stale. */
    assert_int_equal(get1(f, 1, 2, "pk", "rk", NULL), RT_ESTALE);
    assert_int_equal(get1(f, 9, 1, "pk", "rk", NULL), RT_ESTALE);
    assert_int_equal(
        write1(f, 1, 0, RT__OP_KIND__OP_INSERT, "x", "y", &code, NULL),
        RT_ESTALE);

    size_t n;
    int more;
    char first[64] = "";
    assert_int_equal(
        write1(f, 1, 1, RT__OP_KIND__OP_UPSERT_REPLACE, "a", "1", &code, NULL),
        0);
    assert_int_equal(scan1(f, 1, 1, 1, &n, &more, first), 0);
    assert_int_equal(n, 1);
    assert_true(more);
    assert_string_equal(first, "a");
    assert_int_equal(scan1(f, 1, 1, 0, &n, &more, NULL), 0);
    assert_int_equal(n, 3);
    assert_false(more);

    /* Each write that changed the range took its next LSN (the refused
     * insert and the stale write took none). */
    struct ps_rstate rs;
    assert_int_equal(ps_store_repl_get(f->ps.store, 1, &rs), 0);
    assert_int_equal(rs.applied_lsn, 3);

    /* Heartbeats carry the load of the requests above. */
    while (M.slot[0].hb_requests == 0) {
        int hb = M.slot[0].heartbeats + 1;
        while (M.slot[0].heartbeats < hb) {
            uv_run(&f->loop, UV_RUN_ONCE);
        }
    }
    assert_true(M.slot[0].hb_samples > 0);
    rt_buf_free(&v1);
    rt_buf_free(&v2);
}

/* ASSIGN_RANGES changes ownership at once (split at "m", epochs bumped);
 * DROP_TABLE empties the table; both answered on the master's conn. */
static void test_assign_and_drop(void **state)
{
    struct fx *f = *state;
    Rt__Assignment a = RT__ASSIGNMENT__INIT;
    Rt__DropTableReq d = RT__DROP_TABLE_REQ__INIT;
    struct th_reply r;
    size_t n;
    int more, code;

    ps_start(f);
    run_until(f, &f->ps.registered);
    connect_client(f);
    assert_int_equal(
        write1(f, 1, 1, RT__OP_KIND__OP_INSERT, "b", "1", &code, NULL), 0);
    assert_int_equal(
        write1(f, 1, 1, RT__OP_KIND__OP_INSERT, "x", "1", &code, NULL), 0);

    master_set_range(0, 1, 5, "", "m", 2);
    master_set_range(1, 2, 5, "m", NULL, 1);
    M.slot[0].n = 2;
    M.map_version = 4;
    a.n_ranges = 2;
    a.ranges = M.slot[0].ptrs;
    a.map_version = 4;
    call(f, M.slot[0].conn, RT__METHOD__ASSIGN_RANGES, &a.base, &r);
    assert_int_equal(r.status, 0);
    rt_buf_free(&r.body);

    assert_int_equal(get1(f, 1, 1, "b", "1", NULL), RT_ESTALE);
    assert_int_equal(get1(f, 1, 2, "b", "1", NULL), 0);
    assert_int_equal(get1(f, 1, 2, "x", "1", NULL), RT_ESTALE);
    assert_int_equal(get1(f, 2, 1, "x", "1", NULL), 0);
    /* The split range scans only its half. */
    assert_int_equal(scan1(f, 1, 2, 0, &n, &more, NULL), 0);
    assert_int_equal(n, 1);
    assert_false(more);

    d.table_id = 5;
    call(f, M.slot[0].conn, RT__METHOD__DROP_TABLE, &d.base, &r);
    assert_int_equal(r.status, 0);
    rt_buf_free(&r.body);
    assert_int_equal(scan1(f, 2, 1, 0, &n, &more, NULL), 0);
    assert_int_equal(n, 0);

    /* Restart: the server comes back with its id and range ids. */
    rt_rpc_client_close(f->cli);
    f->cli = NULL;
    ps_stop(f);
    int before = M.slot[0].registers;
    ps_start(f);
    assert_int_equal(f->ps.server_id, 7);
    assert_int_equal(f->ps.ranges.n, 2);
    while (M.slot[0].registers == before || !f->ps.registered) {
        uv_run(&f->loop, UV_RUN_ONCE);
    }
    assert_int_equal(M.slot[0].reg_server_id, 7);
    assert_int_equal(M.slot[0].reg_n_range_ids, 2);
    assert_int_equal(M.slot[0].reg_range_ids[0], 1);
    assert_int_equal(M.slot[0].reg_range_ids[1], 2);
}

/* Sends @a on the master link; returns the status, and when it failed
 * checks the Error's message contains @why. */
static int assign_term(struct fx *f, Rt__Assignment *a, const char *why)
{
    struct th_reply r;
    int status;

    call(f, M.slot[0].conn, RT__METHOD__ASSIGN_RANGES, &a->base, &r);
    status = r.status;
    if (status != 0 && why) {
        Rt__Error *e = rt__error__unpack(NULL, r.body.len, r.body.data);
        assert_non_null(e);
        assert_non_null(strstr(e->message, why));
        rt__error__free_unpacked(e, NULL);
    }
    rt_buf_free(&r.body);
    return status;
}

/* A master term below the highest seen is refused and changes nothing
 * (assignment, table drop); a higher one is taken and persisted with the
 * assignment, so a restarted server still refuses the deposed master (its
 * registration replies too) and takes the next one; term 0, from a master
 * older than terms, is taken. */
static void test_master_term_fence(void **state)
{
    struct fx *f = *state;
    Rt__Assignment a = RT__ASSIGNMENT__INIT;
    Rt__DropTableReq d = RT__DROP_TABLE_REQ__INIT;
    struct th_reply r;
    int code;

    heartbeat_ms = 50;
    ps_start(f);
    run_until(f, &f->ps.registered);
    connect_client(f);
    assert_int_equal(
        write1(f, 1, 1, RT__OP_KIND__OP_INSERT, "b", "1", &code, NULL), 0);

    /* Term 5 splits range 1 at "m". */
    master_set_range(0, 1, 5, "", "m", 2);
    master_set_range(1, 2, 5, "m", NULL, 1);
    M.slot[0].n = 2;
    M.map_version = 4;
    M.master_term = 5;
    a.n_ranges = 2;
    a.ranges = M.slot[0].ptrs;
    a.map_version = 4;
    a.master_term = 5;
    assert_int_equal(assign_term(f, &a, NULL), 0);
    assert_int_equal(f->ps.master_term, 5);

    /* Term 4, a newer map that takes range 2 away: refused, nothing
     * changes. */
    a.n_ranges = 1;
    a.map_version = 9;
    a.master_term = 4;
    assert_int_equal(assign_term(f, &a, "older master term 4 < 5"), RT_ESTALE);
    assert_int_equal(f->ps.ranges.n, 2);
    assert_int_equal(f->ps.ranges.map_version, 4);
    assert_int_equal(f->ps.master_term, 5);
    assert_int_equal(f->ps.master_term_refused, 1);
    assert_int_equal(get1(f, 1, 2, "b", "1", NULL), 0);

    /* A table drop of term 4: refused, the table keeps its entities. */
    d.table_id = 5;
    d.master_term = 4;
    call(f, M.slot[0].conn, RT__METHOD__DROP_TABLE, &d.base, &r);
    assert_int_equal(r.status, RT_ESTALE);
    rt_buf_free(&r.body);
    assert_int_equal(get1(f, 1, 2, "b", "1", NULL), 0);
    assert_int_equal(f->ps.master_term_refused, 2);

    /* Term 0 (an older master): taken, the term stays. */
    a.n_ranges = 2;
    a.map_version = 5;
    a.master_term = 0;
    assert_int_equal(assign_term(f, &a, NULL), 0);
    assert_int_equal(f->ps.ranges.map_version, 5);
    assert_int_equal(f->ps.master_term, 5);

    /* Restart with the deposed master (term 3) answering registrations:
     * term 5 was persisted, so none of its replies is taken. */
    rt_rpc_client_close(f->cli);
    f->cli = NULL;
    ps_stop(f);
    M.master_term = 3;
    ps_start(f);
    assert_int_equal(f->ps.master_term, 5);
    while (f->ps.master_term_refused < 3) { /* it keeps trying */
        uv_run(&f->loop, UV_RUN_ONCE);
        assert_false(f->ps.registered);
    }

    /* The next master (term 6) is taken. */
    M.master_term = 6;
    run_until(f, &f->ps.registered);
    assert_int_equal(f->ps.master_term, 6);
    assert_int_equal(f->ps.ranges.n, 2);
}

/* Every other master request that changes what the server serves is
 * refused RT_ESTALE under a term below the highest seen, and changes
 * nothing; the same requests at that term go through to their handlers. */
static void test_master_term_fence_requests(void **state)
{
    struct fx *f = *state;
    Rt__Assignment a = RT__ASSIGNMENT__INIT;
    Rt__Range rng = RT__RANGE__INIT;
    Rt__MoveReq mv = RT__MOVE_REQ__INIT;
    Rt__MoveAbort ma = RT__MOVE_ABORT__INIT;
    Rt__TransferReq tr = RT__TRANSFER_REQ__INIT;
    Rt__FreezeReq fr = RT__FREEZE_REQ__INIT;
    Rt__ReplAbort ra = RT__REPL_ABORT__INIT;
    struct
    {
        uint32_t method;
        ProtobufCMessage *msg;
        uint64_t *term;
    } reqs[] = {
        {RT__METHOD__MOVE_OUT, &mv.base, &mv.master_term},
        {RT__METHOD__MOVE_ABORT, &ma.base, &ma.master_term},
        {RT__METHOD__MOVE_DONE, &ma.base, &ma.master_term},
        {RT__METHOD__TRANSFER_PRIMARY, &tr.base, &tr.master_term},
        {RT__METHOD__TRANSFER_ABORT, &tr.base, &tr.master_term},
        {RT__METHOD__RANGE_FREEZE, &fr.base, &fr.master_term},
        {RT__METHOD__RANGE_THAW, &fr.base, &fr.master_term},
        {RT__METHOD__REPL_ABORT, &ra.base, &ra.master_term},
    };
    const size_t n = sizeof(reqs) / sizeof(reqs[0]);
    struct th_reply r;
    int code;

    ps_start(f);
    run_until(f, &f->ps.registered);
    connect_client(f);
    assert_int_equal(
        write1(f, 1, 1, RT__OP_KIND__OP_INSERT, "b", "1", &code, NULL), 0);
    a.n_ranges = 1;
    a.ranges = M.slot[0].ptrs;
    a.map_version = 4;
    a.master_term = 5;
    assert_int_equal(assign_term(f, &a, NULL), 0);

    rng.id = 1;
    rng.table_id = 5;
    rng.low = "";
    rng.high_inf = 1;
    rng.server_id = 7;
    rng.epoch = 1;
    mv.move_id = 1;
    mv.range = &rng;
    mv.target_server_id = 8;
    mv.target_addr = "127.0.0.1:1";
    mv.new_epoch = 2;
    ma.move_id = 1;
    ma.range_id = 1;
    tr.range_id = 1;
    tr.epoch = 1;
    tr.to_server = 8;
    tr.new_epoch = 2;
    fr.range_id = 1;
    fr.epoch = 1;
    ra.range_id = 1;
    ra.epoch = 1;
    for (size_t i = 0; i < n; i++) {
        *reqs[i].term = 4;
        call(f, M.slot[0].conn, reqs[i].method, reqs[i].msg, &r);
        assert_int_equal(r.status, RT_ESTALE);
        rt_buf_free(&r.body);
        assert_int_equal(f->ps.master_term_refused, i + 1);
    }
    /* Nothing moved, froze or went away. */
    assert_int_equal(f->ps.ranges.n, 1);
    assert_int_equal(get1(f, 1, 1, "b", "1", NULL), 0);
    assert_int_equal(
        write1(f, 1, 1, RT__OP_KIND__OP_INSERT, "b", "2", &code, NULL), 0);
    assert_int_equal(f->ps.master_term, 5);

    /* At the current term they reach their handlers (which answer what
     * they answer, never "older master term"). */
    for (size_t i = 0; i < n; i++) {
        *reqs[i].term = 5;
        if (reqs[i].method == RT__METHOD__MOVE_OUT) {
            continue; /* it would start a move to a dead address */
        }
        call(f, M.slot[0].conn, reqs[i].method, reqs[i].msg, &r);
        if (r.status != 0) {
            Rt__Error *e = rt__error__unpack(NULL, r.body.len, r.body.data);
            assert_true(e == NULL || e->message == NULL ||
                        strstr(e->message, "older master term") == NULL);
            if (e) {
                rt__error__free_unpacked(e, NULL);
            }
        }
        rt_buf_free(&r.body);
    }
    assert_int_equal(f->ps.master_term_refused, n);
}

/* An atomic write failing at op 1 writes nothing and reports the index. */
static void test_atomic_error_index(void **state)
{
    struct fx *f = *state;
    struct rt_buf props = RT_BUF_INIT;
    Rt__RangeRef ref = RT__RANGE_REF__INIT;
    Rt__EntityOp o0 = RT__ENTITY_OP__INIT, o1 = RT__ENTITY_OP__INIT;
    Rt__EntityOp *ops[2] = {&o0, &o1};
    Rt__WriteReq req = RT__WRITE_REQ__INIT;
    struct th_reply r;
    int code;

    ps_start(f);
    run_until(f, &f->ps.registered);
    connect_client(f);
    assert_int_equal(
        write1(f, 1, 1, RT__OP_KIND__OP_INSERT, "p", "old", &code, NULL), 0);
    th_props1(&props, "k", "v");
    ref.table_id = 5;
    ref.range_id = 1;
    ref.epoch = 1;
    o0.kind = RT__OP_KIND__OP_INSERT;
    o0.pk = "p";
    o0.rk = "new";
    o0.props.data = props.data;
    o0.props.len = props.len;
    o1 = o0;
    o1.rk = "old";
    req.route = &ref;
    req.n_ops = 2;
    req.ops = ops;
    req.atomic = 1;
    call(f, rt_rpc_client_conn(f->cli), RT__METHOD__ENTITY_WRITE, &req.base,
         &r);
    assert_int_equal(r.status, RT_EEXIST);
    Rt__Error *e = rt__error__unpack(NULL, r.body.len, r.body.data);
    assert_non_null(e);
    assert_int_equal(e->index, 1);
    rt__error__free_unpacked(e, NULL);
    rt_buf_free(&r.body);
    assert_int_equal(get1(f, 1, 1, "p", "new", NULL), RT_ENOTFOUND);

    /* A bad properties blob is refused before it reaches the store. */
    o0.props.data = (uint8_t *)"\x05\x00";
    o0.props.len = 2;
    req.n_ops = 1;
    req.atomic = 0;
    call(f, rt_rpc_client_conn(f->cli), RT__METHOD__ENTITY_WRITE, &req.base,
         &r);
    assert_int_equal(r.status, RT_EINVAL);
    rt_buf_free(&r.body);
    rt_buf_free(&props);
}

/* Many pipelined writes all complete (they share group commits); with a
 * small --max-pending the excess is shed with ServerBusy, never queued. */
static void send_many(struct fx *f, int n, struct th_multi *m)
{
    struct rt_buf props = RT_BUF_INIT;
    Rt__RangeRef ref = RT__RANGE_REF__INIT;
    Rt__EntityOp op = RT__ENTITY_OP__INIT;
    Rt__EntityOp *ops[1] = {&op};
    Rt__WriteReq req = RT__WRITE_REQ__INIT;
    char rk[32];

    memset(m, 0, sizeof(*m));
    th_props1(&props, "k", "v");
    ref.table_id = 5;
    ref.range_id = 1;
    ref.epoch = 1;
    op.kind = RT__OP_KIND__OP_UPSERT_MERGE;
    op.pk = "p";
    op.rk = rk;
    op.props.data = props.data;
    op.props.len = props.len;
    req.route = &ref;
    req.n_ops = 1;
    req.ops = ops;
    for (int i = 0; i < n; i++) {
        snprintf(rk, sizeof(rk), "%06d", i);
        m->outstanding++;
        assert_int_equal(
            rt_rpc_call_pb(rt_rpc_client_conn(f->cli), RT__METHOD__ENTITY_WRITE,
                           &req.base, 5000, th_rpc_multi_cb, m),
            0);
    }
    run_until(f, &m->all_done);
    rt_buf_free(&props);
}

static void test_pipelined_and_busy(void **state)
{
    struct fx *f = *state;
    struct th_multi m;
    size_t n;
    int more;

    ps_start(f);
    run_until(f, &f->ps.registered);
    connect_client(f);
    send_many(f, 2000, &m);
    assert_int_equal(m.ok, 2000);
    assert_int_equal(scan1(f, 1, 1, 0, &n, &more, NULL), 0);
    assert_int_equal(n, 1000);
    assert_true(more);

    rt_rpc_client_close(f->cli);
    f->cli = NULL;
    ps_stop(f);
    max_pending = 10;
    ps_start(f);
    connect_client(f);
    run_until(f, &f->ps.registered);
    send_many(f, 500, &m);
    assert_int_equal(m.other, 0);
    assert_true(m.ok >= 10);
    assert_true(m.busy > 0);
    assert_int_equal(m.ok + m.busy, 500);
}

/* With the adaptive group-commit wait at its largest bound, pipelined
 * writes still all complete, each once, and read back; a server stopped
 * right after a burst (the writer possibly waiting) answers every write
 * it accepted and keeps it across a restart. */
static void test_pipelined_group_wait(void **state)
{
    struct fx *f = *state;
    struct th_multi m;
    size_t n;
    int more;

    group_wait_us = 10000;
    ps_start(f);
    run_until(f, &f->ps.registered);
    connect_client(f);
    send_many(f, 2000, &m);
    assert_int_equal(m.ok, 2000);
    assert_int_equal(m.busy + m.other, 0);
    assert_int_equal(scan1(f, 1, 1, 0, &n, &more, NULL), 0);
    assert_int_equal(n, 1000);
    assert_true(more);
    send_many(f, 3, &m);
    assert_int_equal(m.ok, 3);

    rt_rpc_client_close(f->cli);
    f->cli = NULL;
    ps_stop(f);
    group_wait_us = 0;
    ps_start(f);
    run_until(f, &f->ps.registered);
    connect_client(f);
    assert_int_equal(scan1(f, 1, 1, 0, &n, &more, NULL), 0);
    assert_int_equal(n, 1000);
    assert_true(more);
}

/* Helpers: scans with filters, select, and raw replies */

static void encode_filter(const char *text, struct rt_buf *out)
{
    struct rt_filter *f = NULL;
    char errmsg[RT_ERRMSG_SIZE];
    assert_int_equal(rt_filter_parse(text, strlen(text), &f, errmsg), 0);
    rt_filter_encode(f, out);
    rt_filter_free(f);
}

/* Scans range 1 (epoch 1) with @filter (encoded; NULL = none) and
 * @select; returns the status and the unpacked reply in *out (caller
 * frees with rt__scan_resp__free_unpacked). */
static int scanf1(struct fx *f,
                  const struct rt_buf *filter,
                  char **select,
                  size_t n_select,
                  unsigned limit,
                  Rt__ScanResp **out)
{
    Rt__RangeRef ref = RT__RANGE_REF__INIT;
    Rt__ScanReq req = RT__SCAN_REQ__INIT;
    struct th_reply r;
    ref.table_id = 5;
    ref.range_id = 1;
    ref.epoch = 1;
    req.route = &ref;
    req.limit = limit;
    if (filter) {
        req.filter.data = filter->data;
        req.filter.len = filter->len;
    }
    req.select = select;
    req.n_select = n_select;
    call(f, rt_rpc_client_conn(f->cli), RT__METHOD__ENTITY_SCAN, &req.base, &r);
    *out = NULL;
    if (r.status == 0) {
        *out = rt__scan_resp__unpack(NULL, r.body.len, r.body.data);
        assert_non_null(*out);
    }
    rt_buf_free(&r.body);
    return r.status;
}

/* Writes @n entities p=@pk, rk=000000.. with property v, 1000 per
 * request, up to 8 requests pipelined. */
static void load_many(struct fx *f, const char *pk, int n)
{
    struct rt_buf props = RT_BUF_INIT;
    Rt__RangeRef ref = RT__RANGE_REF__INIT;
    Rt__EntityOp *ops = calloc(1000, sizeof(*ops));
    Rt__EntityOp **ptrs = calloc(1000, sizeof(*ptrs));
    char(*rks)[8] = calloc(1000, 8);
    Rt__WriteReq req = RT__WRITE_REQ__INIT;
    struct th_multi m;

    th_props1(&props, "v", "hay");
    ref.table_id = 5;
    ref.range_id = 1;
    ref.epoch = 1;
    req.route = &ref;
    req.ops = ptrs;
    memset(&m, 0, sizeof(m));
    for (int base = 0; base < n; base += 1000) {
        size_t k = 0;
        for (int i = base; i < n && i < base + 1000; i++, k++) {
            rt__entity_op__init(&ops[k]);
            snprintf(rks[k], sizeof(rks[k]), "%06u", (unsigned)i % 1000000u);
            ops[k].kind = RT__OP_KIND__OP_UPSERT_REPLACE;
            ops[k].pk = (char *)pk;
            ops[k].rk = rks[k];
            ops[k].props.data = props.data;
            ops[k].props.len = props.len;
            ptrs[k] = &ops[k];
        }
        req.n_ops = k;
        /* At most 8000 ops queued: below --max-pending, so no Busy. */
        while (m.outstanding >= 8) {
            uv_run(&f->loop, UV_RUN_ONCE);
        }
        m.outstanding++;
        assert_int_equal(
            rt_rpc_call_pb(rt_rpc_client_conn(f->cli), RT__METHOD__ENTITY_WRITE,
                           &req.base, 10000, th_rpc_multi_cb, &m),
            0);
    }
    while (m.outstanding > 0) {
        uv_run(&f->loop, UV_RUN_ONCE);
    }
    assert_int_equal(m.other + m.busy, 0);
    free(ops);
    free(ptrs);
    free(rks);
    rt_buf_free(&props);
}

/* Tests: scans */

/* A filter shipped in the RPC narrows and filters the scan; `done` says
 * the filter's key bound was reached; select projects server-side; a
 * corrupt filter is InvalidInput. */
static void test_filter_scan_rpc(void **state)
{
    struct fx *f = *state;
    struct rt_buf flt = RT_BUF_INIT;
    Rt__ScanResp *resp;
    int code;

    ps_start(f);
    run_until(f, &f->ps.registered);
    connect_client(f);
    const char *pks[] = {"a", "b", "c"};
    for (int i = 0; i < 3; i++) {
        for (int j = 0; j < 3; j++) {
            char rk[4];
            snprintf(rk, sizeof(rk), "%d", j);
            assert_int_equal(write1(f, 1, 1, RT__OP_KIND__OP_INSERT, pks[i], rk,
                                    &code, NULL),
                             0);
            assert_int_equal(code, 0);
        }
    }
    encode_filter("PartitionKey eq 'b' and RowKey ne '1'", &flt);
    assert_int_equal(scanf1(f, &flt, NULL, 0, 0, &resp), 0);
    assert_int_equal(resp->n_entities, 2);
    assert_string_equal(resp->entities[0]->rk, "0");
    assert_string_equal(resp->entities[1]->rk, "2");
    assert_false(resp->more);
    assert_true(resp->done);
    rt__scan_resp__free_unpacked(resp, NULL);

    /* Property filter with a page limit: more + next key, not done. */
    rt_buf_reset(&flt);
    encode_filter("v ne '1'", &flt);
    assert_int_equal(scanf1(f, &flt, NULL, 0, 3, &resp), 0);
    assert_int_equal(resp->n_entities, 3);
    assert_true(resp->more);
    assert_false(resp->done);
    assert_string_equal(resp->next_pk, "b"); /* first key not examined */
    assert_string_equal(resp->next_rk, "1");
    rt__scan_resp__free_unpacked(resp, NULL);

    /* Projection: the blob holds only "x" (absent), so it is empty. */
    char *sel[] = {"x"};
    assert_int_equal(scanf1(f, NULL, sel, 1, 1, &resp), 0);
    assert_int_equal(resp->n_entities, 1);
    assert_int_equal(resp->entities[0]->value.len, RT_VALUE_HDR_SIZE + 2);
    rt__scan_resp__free_unpacked(resp, NULL);

    /* Corrupt filter bytes. */
    rt_buf_reset(&flt);
    rt_buf_append(&flt, "\x01\x07garbage", 9);
    assert_int_equal(scanf1(f, &flt, NULL, 0, 0, &resp), RT_EINVAL);
    rt_buf_free(&flt);
}

struct order
{
    int seq;
    int scan_at;
    int get_at;
    int scan_status;
    int get_status;
    int both;
};

static void order_scan_cb(int status,
                          const uint8_t *body,
                          size_t len,
                          void *arg)
{
    struct order *o = arg;
    (void)body;
    (void)len;
    o->scan_status = status;
    o->scan_at = ++o->seq;
    o->both = o->get_at && o->scan_at;
}

static void order_get_cb(int status, const uint8_t *body, size_t len, void *arg)
{
    struct order *o = arg;
    (void)body;
    (void)len;
    o->get_status = status;
    o->get_at = ++o->seq;
    o->both = o->get_at && o->scan_at;
}

/* A long scan runs off the loop thread: a get sent right after it is
 * answered before the scan is. */
static void test_scan_off_loop(void **state)
{
    struct fx *f = *state;
    struct rt_buf flt = RT_BUF_INIT;
    Rt__RangeRef ref = RT__RANGE_REF__INIT;
    Rt__ScanReq sreq = RT__SCAN_REQ__INIT;
    Rt__GetReq greq = RT__GET_REQ__INIT;
    struct order o;

    ps_start(f);
    run_until(f, &f->ps.registered);
    connect_client(f);
    load_many(f, "p", 60000);
    encode_filter("v eq 'needle'", &flt);
    ref.table_id = 5;
    ref.range_id = 1;
    ref.epoch = 1;
    sreq.route = &ref;
    sreq.filter.data = flt.data;
    sreq.filter.len = flt.len;
    greq.route = &ref;
    greq.pk = "p";
    greq.rk = "000007";
    memset(&o, 0, sizeof(o));
    assert_int_equal(
        rt_rpc_call_pb(rt_rpc_client_conn(f->cli), RT__METHOD__ENTITY_SCAN,
                       &sreq.base, 10000, order_scan_cb, &o),
        0);
    assert_int_equal(
        rt_rpc_call_pb(rt_rpc_client_conn(f->cli), RT__METHOD__ENTITY_GET,
                       &greq.base, 10000, order_get_cb, &o),
        0);
    run_until(f, &o.both);
    assert_int_equal(o.get_status, 0);
    assert_int_equal(o.scan_status, 0);
    assert_true(o.get_at < o.scan_at);
    rt_buf_free(&flt);
}

/* Tests: load accounting, batches */

/* Heartbeats carry the range's real entity count and bytes, kept up to
 * date by the writes and recounted from the data after a restart. */
static void test_load_totals(void **state)
{
    struct fx *f = *state;
    int code;

    ps_start(f);
    run_until(f, &f->ps.registered);
    connect_client(f);
    load_many(f, "p", 2500);
    assert_int_equal(
        write1(f, 1, 1, RT__OP_KIND__OP_DELETE, "p", "000001", &code, NULL), 0);
    assert_int_equal(code, 0);
    int hb = M.slot[0].heartbeats + 2;
    while (M.slot[0].heartbeats < hb) {
        uv_run(&f->loop, UV_RUN_ONCE);
    }
    assert_int_equal(M.slot[0].hb_keys[1], 2499);
    assert_true(M.slot[0].hb_key_bytes[1] > 2499 * RT_VALUE_HDR_SIZE);
    assert_true(M.slot[0].hb_interval_ms[1] >= 500 &&
                M.slot[0].hb_interval_ms[1] < 5000);
    uint64_t bytes = M.slot[0].hb_key_bytes[1];

    rt_rpc_client_close(f->cli);
    f->cli = NULL;
    ps_stop(f);
    ps_start(f);
    run_until(f, &f->ps.registered);
    hb = M.slot[0].heartbeats + 2;
    while (M.slot[0].heartbeats < hb) {
        uv_run(&f->loop, UV_RUN_ONCE);
    }
    assert_int_equal(M.slot[0].hb_keys[1], 2499);
    assert_int_equal(M.slot[0].hb_key_bytes[1], bytes);
}

/* With the server stopped: flips one bit of the last byte of the stored
 * value of (pk, rk) of table 5. */
static void flip_value(struct fx *f, const char *pk, const char *rk)
{
    struct rt_buf k = RT_BUF_INIT;
    rt_key_entity(&k, 5, pk, strlen(pk), rk, strlen(rk));
    assert_int_equal(th_lmdb_flip(f->data, "data", k.data, k.len, -1, 0x01), 0);
    rt_buf_free(&k);
}

/* A stored value that fails its checksum is RT_ECORRUPT over RPC, for
 * the get and for a scan over it, never the data; its neighbour reads. */
static void test_corrupt_value_rpc(void **state)
{
    struct fx *f = *state;
    struct rt_buf v = RT_BUF_INIT;
    size_t n;
    int more, code;

    ps_start(f);
    run_until(f, &f->ps.registered);
    connect_client(f);
    assert_int_equal(
        write1(f, 1, 1, RT__OP_KIND__OP_UPSERT_REPLACE, "p", "a", &code, NULL),
        0);
    assert_int_equal(code, 0);
    assert_int_equal(
        write1(f, 1, 1, RT__OP_KIND__OP_UPSERT_REPLACE, "p", "b", &code, NULL),
        0);
    assert_int_equal(code, 0);
    rt_rpc_client_close(f->cli);
    f->cli = NULL;
    ps_stop(f);
    flip_value(f, "p", "b");
    ps_start(f);
    run_until(f, &f->ps.registered);
    connect_client(f);
    assert_int_equal(get1(f, 1, 1, "p", "b", &v), RT_ECORRUPT);
    assert_int_equal(v.len, 0);
    assert_int_equal(get1(f, 1, 1, "p", "a", &v), 0);
    assert_true(v.len > RT_VALUE_HDR_SIZE);
    assert_int_equal(scan1(f, 1, 1, 0, &n, &more, NULL), RT_ECORRUPT);
    rt_buf_free(&v);
}

/* An entity group transaction naming another PartitionKey (even one
 * outside the range) fails with CommandsInBatchActOnDifferentPartitions
 * at that index, not StaleEpoch; more than 100 ops: InvalidInput with
 * index 100 and Azure's message. */
static void test_batch_rules_rpc(void **state)
{
    struct fx *f = *state;
    struct rt_buf props = RT_BUF_INIT;
    Rt__RangeRef ref = RT__RANGE_REF__INIT;
    Rt__EntityOp ops[101];
    Rt__EntityOp *ptrs[101];
    char rks[101][8];
    Rt__WriteReq req = RT__WRITE_REQ__INIT;
    struct th_reply r;
    Rt__Error *e;

    master_set_range(0, 1, 5, "", "m", 1);
    master_set_range(1, 2, 5, "m", NULL, 1);
    M.slot[0].n = 2;
    ps_start(f);
    run_until(f, &f->ps.registered);
    connect_client(f);
    th_props1(&props, "k", "v");
    for (int i = 0; i < 101; i++) {
        rt__entity_op__init(&ops[i]);
        snprintf(rks[i], sizeof(rks[i]), "%03d", i);
        ops[i].kind = RT__OP_KIND__OP_INSERT;
        ops[i].pk = "a";
        ops[i].rk = rks[i];
        ops[i].props.data = props.data;
        ops[i].props.len = props.len;
        ptrs[i] = &ops[i];
    }
    ops[1].pk = "z"; /* range 2's */
    ref.table_id = 5;
    ref.range_id = 1;
    ref.epoch = 1;
    req.route = &ref;
    req.ops = ptrs;
    req.n_ops = 3;
    req.atomic = 1;
    call(f, rt_rpc_client_conn(f->cli), RT__METHOD__ENTITY_WRITE, &req.base,
         &r);
    assert_int_equal(r.status, RT_EDIFFPARTITIONS);
    e = rt__error__unpack(NULL, r.body.len, r.body.data);
    assert_non_null(e);
    assert_int_equal(e->index, 1);
    rt__error__free_unpacked(e, NULL);
    rt_buf_free(&r.body);

    ops[1].pk = "a";
    req.n_ops = 101;
    call(f, rt_rpc_client_conn(f->cli), RT__METHOD__ENTITY_WRITE, &req.base,
         &r);
    assert_int_equal(r.status, RT_EINVAL);
    e = rt__error__unpack(NULL, r.body.len, r.body.data);
    assert_non_null(e);
    assert_int_equal(e->index, 100);
    assert_non_null(strstr(e->message, "100 changes"));
    rt__error__free_unpacked(e, NULL);
    rt_buf_free(&r.body);
    assert_int_equal(get1(f, 1, 1, "a", "000", NULL), RT_ENOTFOUND);

    /* The first op outside the range is still stale. */
    ops[0].pk = "z";
    req.n_ops = 1;
    call(f, rt_rpc_client_conn(f->cli), RT__METHOD__ENTITY_WRITE, &req.base,
         &r);
    assert_int_equal(r.status, RT_ESTALE);
    rt_buf_free(&r.body);
    rt_buf_free(&props);
}

/* cfg.heartbeat_ms sets the heartbeat period, and each heartbeat's load
 * interval is the time since the previous one (the master divides by it). */
static void test_heartbeat_period(void **state)
{
    struct fx *f = *state;
    int before;

    heartbeat_ms = 100;
    ps_start(f);
    run_until(f, &f->ps.registered);
    before = M.slot[0].heartbeats;
    run_for(f, 1000);
    /* 10 ticks in 1 s; a slow machine may lose a tick or two, never gain. */
    assert_true(M.slot[0].heartbeats - before >= 8);
    assert_true(M.slot[0].heartbeats - before <= 11);
    assert_true(M.slot[0].hb_interval_ms[1] >= 50);
    assert_true(M.slot[0].hb_interval_ms[1] <= 400);
}

/* 0 = PS_HEARTBEAT_MS, 500 ms (DESIGN-replication.md §12.2). */
static void test_heartbeat_default(void **state)
{
    struct fx *f = *state;
    int before;

    ps_start(f);
    run_until(f, &f->ps.registered);
    before = M.slot[0].heartbeats;
    run_for(f, 1600);
    assert_true(M.slot[0].heartbeats - before >= 2);
    assert_true(M.slot[0].heartbeats - before <= 4);
}

/* Given --master FOLLOWER,LEADER the server ends registered at the
 * leader; when that leader steps down and names the other master, the
 * next heartbeat's RT_ENOTLEADER takes the server there, where it
 * registers again with its full range set (as after a master restart). */
static void test_follows_leader(void **state)
{
    struct fx *f = *state;
    static struct th_fake_master other;

    memset(&other, 0, sizeof(other));
    other.slot[0] = M.slot[0];
    other.slot[0].conn = NULL;
    for (size_t i = 0; i < TH_FM_RANGES; i++) {
        other.slot[0].ptrs[i] = &other.slot[0].ranges[i];
    }
    other.map_version = M.map_version;
    other.not_leader = M.addr;
    assert_int_equal(th_fake_master_start(&other, &f->loop), 0);
    snprintf(f->master_addr, sizeof(f->master_addr), "%s,%s", other.addr,
             M.addr);
    heartbeat_ms = 100;
    ps_start(f);
    run_until(f, &f->ps.registered);
    assert_true(other.not_leader_answers >= 1);
    assert_int_equal(other.slot[0].registers, 0);
    assert_int_equal(M.slot[0].registers, 1);
    assert_int_equal(f->ps.server_id, 7);

    /* The leader moves to the other master. */
    M.not_leader = other.addr;
    other.not_leader = NULL;
    run_until(f, &other.slot[0].registers);
    run_until(f, &f->ps.registered);
    assert_true(M.not_leader_answers >= 1);
    assert_int_equal(other.slot[0].reg_server_id, 7);
    assert_int_equal(other.slot[0].reg_n_range_ids, 1);
    assert_int_equal(other.bad_requests, 0);
    th_fake_master_close(&other);
}

#ifdef RT_PS_BINARY

/* Runs rt-partition-server with @argv (after the program name), its
 * stdout and stderr into @out; returns the exit status, or -1 if it is
 * still running after @wait_ms (then *@pid is its pid, left running). */
static int proc_run(struct fx *f,
                    const char *const *argv,
                    const char *out,
                    uint64_t wait_ms,
                    pid_t *pid)
{
    const char *args[16];
    size_t n = 0;
    uint64_t end;
    int st = 0;
    pid_t p, w;

    args[n++] = "rt-partition-server";
    /* The fake master speaks plain RPC. */
    args[n++] = "--insecure-rpc";
    while (*argv && n < 15) {
        args[n++] = *argv++;
    }
    args[n] = NULL;
    fflush(NULL);
    p = fork();
    assert_true(p >= 0);
    if (p == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (!freopen(out, "w", stdout) || !freopen(out, "a", stderr)) {
            _exit(126);
        }
        execv(RT_PS_BINARY, (char *const *)args);
        _exit(127);
    }
    *pid = p;
    uv_update_time(&f->loop);
    end = uv_now(&f->loop) + wait_ms;
    while ((w = waitpid(p, &st, WNOHANG)) == 0 && uv_now(&f->loop) < end) {
        run_for(f, 5);
    }
    if (w == 0) {
        return -1;
    }
    assert_int_equal(w, p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static int file_has(const char *path, const char *needle)
{
    char buf[16384];
    size_t n;
    FILE *fp = fopen(path, "r");

    assert_non_null(fp);
    n = fread(buf, 1, sizeof(buf) - 1, fp);
    buf[n] = 0;
    fclose(fp);
    return strstr(buf, needle) != NULL;
}

/* --heartbeat-ms: listed in --help, refused outside 50..60000 (exit 2),
 * and a real server heartbeats at the period given. */
static void test_heartbeat_flag(void **state)
{
    struct fx *f = *state;
    char out[128];
    const char *bad[] = {"0", "49", "60001", "-5"};
    int before;
    pid_t pid;

    snprintf(out, sizeof(out), "%s/out.txt", f->dir);
    {
        const char *argv[] = {"--help", NULL};
        assert_int_equal(proc_run(f, argv, out, 5000, &pid), 0);
        assert_true(file_has(out, "--heartbeat-ms"));
    }
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        const char *argv[] = {
            "--data",         f->data, "--master", f->master_addr,
            "--heartbeat-ms", bad[i],  NULL};
        assert_int_equal(proc_run(f, argv, out, 5000, &pid), 2);
        assert_true(file_has(out, "--heartbeat-ms must be 50..60000"));
    }
    {
        const char *argv[] = {"--data",       f->data,          "--master",
                              f->master_addr, "--heartbeat-ms", "100",
                              "--log-level",  "warn",           NULL};
        uint64_t end;
        int st = 0;

        assert_int_equal(proc_run(f, argv, out, 0, &pid), -1);
        uv_update_time(&f->loop);
        end = uv_now(&f->loop) + 5000;
        while (M.slot[0].registers == 0) {
            run_for(f, 5);
            assert_true(uv_now(&f->loop) < end);
            assert_int_equal(waitpid(pid, NULL, WNOHANG), 0); /* alive */
        }
        run_for(f, 200); /* past the first tick */
        before = M.slot[0].heartbeats;
        run_for(f, 1000);
        assert_int_equal(kill(pid, SIGTERM), 0);
        assert_int_equal(waitpid(pid, &st, 0), pid);
        assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
        assert_true(M.slot[0].heartbeats - before >= 8);
        assert_true(M.slot[0].heartbeats - before <= 11);
        th_fake_master_forget(&M, 0);
    }
}

/* --group-wait-us: listed in --help, refused outside 0..10000 (exit 2). */
static void test_group_wait_flag(void **state)
{
    struct fx *f = *state;
    char out[128];
    const char *bad[] = {"10001", "-1"};
    pid_t pid;

    snprintf(out, sizeof(out), "%s/out.txt", f->dir);
    {
        const char *argv[] = {"--help", NULL};
        assert_int_equal(proc_run(f, argv, out, 5000, &pid), 0);
        assert_true(file_has(out, "--group-wait-us"));
    }
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        const char *argv[] = {
            "--data",          f->data, "--master", f->master_addr,
            "--group-wait-us", bad[i],  NULL};
        assert_int_equal(proc_run(f, argv, out, 5000, &pid), 2);
        assert_true(file_has(out, "--group-wait-us: 0..10000"));
    }
    {
        const char *argv[] = {
            "--data",          f->data, "--master",       f->master_addr,
            "--group-wait-us", "0",     "--check-config", NULL};
        assert_int_equal(proc_run(f, argv, out, 5000, &pid), 0);
    }
}

#endif

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_register_and_serve, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_assign_and_drop, setup, teardown),
        cmocka_unit_test_setup_teardown(test_master_term_fence, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_master_term_fence_requests, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_atomic_error_index, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_pipelined_and_busy, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_pipelined_group_wait, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_filter_scan_rpc, setup, teardown),
        cmocka_unit_test_setup_teardown(test_scan_off_loop, setup, teardown),
        cmocka_unit_test_setup_teardown(test_load_totals, setup, teardown),
        cmocka_unit_test_setup_teardown(test_batch_rules_rpc, setup, teardown),
        cmocka_unit_test_setup_teardown(test_corrupt_value_rpc, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_heartbeat_period, setup, teardown),
        cmocka_unit_test_setup_teardown(test_follows_leader, setup, teardown),
        cmocka_unit_test_setup_teardown(test_heartbeat_default, setup,
                                        teardown),
#ifdef RT_PS_BINARY
        cmocka_unit_test_setup_teardown(test_heartbeat_flag, setup, teardown),
        cmocka_unit_test_setup_teardown(test_group_wait_flag, setup, teardown),
#endif
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
