/* Loop test: the master's execution of splits, merges, moves and drains
 * (docs/DESIGN-moves.md) against fake partition servers — rt_rpc clients
 * that register, heartbeat and answer ASSIGN_RANGES, MOVE_OUT, MOVE_ABORT
 * and MOVE_DONE as each test scripts them. Operator requests go through
 * the ms_admin bridge as the HTTP thread would send them. Everything runs
 * on one loop; "synchronous" calls turn the loop until their reply. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cmocka.h>
#include <jansson.h>

#include "ms_admin.h"
#include "ms_events.h"
#include "ms_load.h"
#include "ms_master.h"
#include "ms_status.h"
#include "rt.pb-c.h"
#include "rt_err.h"
#include "rt_log.h"
#include "rt_rpc.h"
#include "th_ms.h"

/* ---- Fixture ---- */

enum move_mode { MOVE_OK, MOVE_ERR, MOVE_MUTE };

#define MAXR 16

struct fake_ps
{
    struct rt_rpc_client *cli;
    uint64_t id;
    char addr[32];
    enum move_mode mode;
    /* what it was told */
    int assigns;
    size_t nranges;
    uint64_t range_ids[MAXR];
    uint64_t epochs[MAXR];
    int move_outs;
    uint64_t out_move_id, out_range_id, out_epoch, out_new_epoch, out_target;
    char out_target_addr[32];
    int aborts;
    uint64_t abort_move_id;
    int dones;
    /* a MOVE_OUT held back (MOVE_MUTE) */
    struct rt_rpc_conn *held_conn;
    uint64_t held_id;
};

struct fx
{
    struct th_ms_master x;
    struct fake_ps ps[2];
    struct rt_rpc_client *fe;
    const char *policy;
    struct ms_policy_config pcfg;
    uint32_t move_timeout_ms;
};

static void record_assignment(struct fake_ps *ps, Rt__Range **v, size_t n)
{
    ps->nranges = n < MAXR ? n : MAXR;
    for (size_t i = 0; i < ps->nranges; i++) {
        ps->range_ids[i] = v[i]->id;
        ps->epochs[i] = v[i]->epoch;
    }
}

static void reply_move_ok(struct rt_rpc_conn *conn, uint64_t id)
{
    Rt__MoveResp r = RT__MOVE_RESP__INIT;
    r.entities = 10;
    r.bytes = 1000;
    r.snapshot_ms = 5;
    r.frozen_ms = 3;
    r.tail_rounds = 1;
    rt_rpc_reply_pb(conn, id, RT__METHOD__MOVE_OUT, 0, &r.base);
}

static void ps_on_request(struct rt_rpc_conn *conn,
                          uint32_t method,
                          uint64_t id,
                          const uint8_t *body,
                          size_t len,
                          void *ud)
{
    struct fake_ps *ps = ud;
    switch (method) {
        case RT__METHOD__ASSIGN_RANGES: {
            Rt__Assignment *a = rt__assignment__unpack(NULL, len, body);
            assert_non_null(a);
            ps->assigns++;
            record_assignment(ps, a->ranges, a->n_ranges);
            rt__assignment__free_unpacked(a, NULL);
            rt_rpc_reply(conn, id, method, 0, NULL, 0);
            break;
        }
        case RT__METHOD__MOVE_OUT: {
            Rt__MoveReq *r = rt__move_req__unpack(NULL, len, body);
            assert_non_null(r);
            assert_non_null(r->range);
            ps->move_outs++;
            ps->out_move_id = r->move_id;
            ps->out_range_id = r->range->id;
            ps->out_epoch = r->range->epoch;
            ps->out_new_epoch = r->new_epoch;
            ps->out_target = r->target_server_id;
            snprintf(ps->out_target_addr, sizeof(ps->out_target_addr), "%s",
                     r->target_addr);
            rt__move_req__free_unpacked(r, NULL);
            if (ps->mode == MOVE_OK) {
                reply_move_ok(conn, id);
            } else if (ps->mode == MOVE_ERR) {
                rt_rpc_reply_err(conn, id, method, RT_EBUSY, "frozen");
            } else {
                rt_rpc_conn_ref(conn);
                ps->held_conn = conn;
                ps->held_id = id;
            }
            break;
        }
        case RT__METHOD__MOVE_ABORT: {
            Rt__MoveAbort *a = rt__move_abort__unpack(NULL, len, body);
            assert_non_null(a);
            ps->aborts++;
            ps->abort_move_id = a->move_id;
            rt__move_abort__free_unpacked(a, NULL);
            rt_rpc_reply(conn, id, method, 0, NULL, 0);
            break;
        }
        case RT__METHOD__MOVE_DONE:
            ps->dones++;
            rt_rpc_reply(conn, id, method, 0, NULL, 0);
            break;
        case RT__METHOD__DROP_TABLE:
            rt_rpc_reply(conn, id, method, 0, NULL, 0);
            break;
        default:
            rt_rpc_reply_err(conn, id, method, RT_ENOTIMPL, NULL);
            break;
    }
}

static void start_master(struct fx *f)
{
    struct ms_master_config cfg = {
        .heartbeat_timeout_ms = 60000,
        .tick_ms = 50,
        .assign_timeout_ms = 500,
        .policy = f->policy,
        .policy_cfg = f->pcfg,
        .move_timeout_ms = f->move_timeout_ms,
    };
    th_ms_master_start(&f->x, &cfg, true);
}

static void close_clients(struct fx *f)
{
    for (int i = 0; i < 2; i++) {
        if (f->ps[i].held_conn) {
            rt_rpc_conn_unref(f->ps[i].held_conn);
            f->ps[i].held_conn = NULL;
        }
        if (f->ps[i].cli) {
            rt_rpc_client_close(f->ps[i].cli);
            f->ps[i].cli = NULL;
        }
    }
    if (f->fe) {
        rt_rpc_client_close(f->fe);
        f->fe = NULL;
    }
}

static void stop_master(struct fx *f)
{
    close_clients(f);
    th_ms_master_stop(&f->x);
}

static int setup(void **state)
{
    struct fx *f = calloc(1, sizeof(*f));
    if (th_ms_master_setup(&f->x, "test_ms_move", RT_LOG_WARN) != 0) {
        free(f);
        return -1;
    }
    f->policy = "none";
    f->move_timeout_ms = 400;
    for (int i = 0; i < 2; i++) {
        snprintf(f->ps[i].addr, sizeof(f->ps[i].addr), "127.0.0.1:%d",
                 6001 + i);
    }
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fx *f = *state;
    close_clients(f);
    th_ms_master_teardown(&f->x);
    free(f);
    return 0;
}

/* ---- Helpers ---- */

/* The loop turns until @cond holds, for at most 5000 ms. */
#define WAIT_UNTIL(f, cond) TH_MS_WAIT_UNTIL(&(f)->x.loop, 5000, cond)

/* Starts fake server @i (keeping its id from an earlier life) and
 * registers it. */
static void ps_start(struct fx *f, int i)
{
    struct fake_ps *ps = &f->ps[i];
    Rt__RegisterResp *resp;
    ps->cli = th_ms_client_start(&f->x, ps_on_request, ps);
    resp = th_ms_ps_register(&f->x, ps->cli, ps->id, ps->addr, NULL);
    ps->id = resp->server_id;
    record_assignment(ps, resp->ranges, resp->n_ranges);
    rt__register_resp__free_unpacked(resp, NULL);
}

static void fe_start(struct fx *f)
{
    f->fe = th_ms_client_start(&f->x, NULL, NULL);
}

/* Heartbeat of fake server @i with one load entry (@range_id 0: none). */
static void ps_heartbeat(struct fx *f,
                         int i,
                         uint64_t range_id,
                         uint64_t entities,
                         const char *const *pks)
{
    Rt__HeartbeatReq req = RT__HEARTBEAT_REQ__INIT;
    Rt__RangeLoad load = RT__RANGE_LOAD__INIT, *loads[1] = {&load};
    Rt__RegisterResp *resp;
    size_t n = 0;
    while (pks && pks[n]) {
        n++;
    }
    req.server_id = f->ps[i].id;
    if (range_id) {
        load.range_id = range_id;
        load.entities = entities;
        load.requests = entities;
        load.interval_ms = 100;
        load.key_count = 1000;
        load.key_bytes = 100000;
        load.n_sample_pks = n;
        load.sample_pks = (char **)pks;
        req.n_loads = 1;
        req.loads = loads;
    }
    resp = th_ms_ps_heartbeat(&f->x, f->ps[i].cli, &req);
    record_assignment(&f->ps[i], resp->ranges, resp->n_ranges);
    rt__register_resp__free_unpacked(resp, NULL);
}

static uint64_t create_table(struct fx *f, const char *name)
{
    Rt__TableReq req = RT__TABLE_REQ__INIT;
    struct th_ms_reply r;
    Rt__Table *t;
    uint64_t id;
    req.account = "acct";
    req.name = (char *)name;
    assert_int_equal(
        th_ms_call(&f->x.loop, f->fe, RT__METHOD__CREATE_TABLE, &req.base, &r),
        0);
    t = rt__table__unpack(NULL, r.len, r.body);
    free(r.body);
    assert_non_null(t);
    id = t->id;
    rt__table__free_unpacked(t, NULL);
    return id;
}

static Rt__Map *get_map(struct fx *f)
{
    struct th_ms_reply r;
    Rt__Map *map;
    assert_int_equal(
        th_ms_call(&f->x.loop, f->fe, RT__METHOD__GET_MAP, NULL, &r), 0);
    map = rt__map__unpack(NULL, r.len, r.body);
    free(r.body);
    assert_non_null(map);
    return map;
}

/* Every range of the map has the RF 1 replica set on its owner: one
 * PRIMARY replica that is server_id, the ISR [server_id], primary_epoch =
 * epoch (what the catalog keeps through splits, merges and moves). */
static void assert_map_rf1(struct fx *f)
{
    Rt__Map *map = get_map(f);
    for (size_t i = 0; i < map->n_ranges; i++) {
        const Rt__Range *r = map->ranges[i];
        assert_int_equal(r->n_replicas, 1);
        assert_int_equal(r->replicas[0]->server_id, r->server_id);
        assert_int_equal(r->replicas[0]->role, RT__REPL_ROLE__ROLE_PRIMARY);
        assert_int_equal(r->n_isr, 1);
        assert_int_equal(r->isr[0], r->server_id);
        assert_int_equal(r->primary_epoch, r->epoch);
        assert_int_equal(r->rf, 1);
        assert_int_equal(r->min_insync, 1);
    }
    rt__map__free_unpacked(map, NULL);
}

/* The range with @id in the map (server and epoch), or 0/0. */
static void map_range(struct fx *f,
                      uint64_t id,
                      uint64_t *server,
                      uint64_t *epoch,
                      size_t *nranges)
{
    Rt__Map *map = get_map(f);
    *server = *epoch = 0;
    for (size_t i = 0; i < map->n_ranges; i++) {
        if (map->ranges[i]->id == id) {
            *server = map->ranges[i]->server_id;
            *epoch = map->ranges[i]->epoch;
        }
    }
    if (nranges) {
        *nranges = map->n_ranges;
    }
    rt__map__free_unpacked(map, NULL);
}

static uint64_t first_range(struct fx *f)
{
    Rt__Map *map = get_map(f);
    uint64_t id;
    assert_true(map->n_ranges >= 1);
    id = map->ranges[0]->id;
    rt__map__free_unpacked(map, NULL);
    return id;
}

/* No split, merge or move in flight (status "ops":[]). */
/* The status document holds @s (a snapshot: it may lag a change). */
static bool status_has(struct fx *f, const char *s)
{
    char *json = ms_status_copy(f->x.st, MS_STATUS_JSON);
    bool yes = json && strstr(json, s) != NULL;
    free(json);
    return yes;
}

static bool no_ops(struct fx *f)
{
    char *json = ms_status_copy(f->x.st, MS_STATUS_JSON);
    bool ok = json && strstr(json, "\"ops\":[]");
    free(json);
    return ok;
}

/* Every range of the map is on server @id. */
static bool map_all_on(struct fx *f, uint64_t id)
{
    Rt__Map *map = get_map(f);
    bool ok = map->n_ranges > 0;
    for (size_t i = 0; i < map->n_ranges; i++) {
        ok = ok && map->ranges[i]->server_id == id;
    }
    rt__map__free_unpacked(map, NULL);
    return ok;
}

static bool events_have(struct fx *f, const char *needle)
{
    char *ev = ms_events_json(ms_master_events(f->x.m), 0, 0, 0);
    bool ok = strstr(ev, needle) != NULL;
    free(ev);
    return ok;
}

/* ---- Tests ---- */

/* A move that succeeds: MOVE_OUT to the source names the target and the
 * next epoch; after it answers, the range is the target's at epoch + 1,
 * the target was told before the map changed for front ends, the source
 * got MOVE_DONE, and the event carries the frozen window. */
static void test_move_ok(void **state)
{
    struct fx *f = *state;
    uint64_t rid, server, epoch;
    char *body;
    start_master(f);
    fe_start(f);
    ps_start(f, 0);
    ps_start(f, 1);
    create_table(f, "people");
    rid = first_range(f);
    map_range(f, rid, &server, &epoch, NULL);
    assert_int_equal(server, f->ps[0].id); /* fewest ranges, lowest id */

    /* Refusals. */
    assert_int_equal(
        th_ms_admin(&f->x, MS_ADMIN_MOVE, rid, f->ps[0].id, NULL, NULL), 400);
    assert_int_equal(
        th_ms_admin(&f->x, MS_ADMIN_MOVE, 999, f->ps[1].id, NULL, NULL), 404);
    assert_int_equal(th_ms_admin(&f->x, MS_ADMIN_MOVE, rid, 77, NULL, NULL),
                     404);
    assert_int_equal(f->ps[0].move_outs, 0);

    assert_int_equal(
        th_ms_admin(&f->x, MS_ADMIN_MOVE, rid, f->ps[1].id, NULL, &body), 200);
    assert_non_null(strstr(body, "\"kind\":\"move\""));
    assert_non_null(strstr(body, "\"outcome\":\"ok\""));
    assert_non_null(strstr(body, "\"frozen_ms\":3"));
    assert_non_null(strstr(body, "\"busy_ms\":"));
    free(body);
    assert_int_equal(f->ps[0].move_outs, 1);
    assert_int_equal(f->ps[0].out_range_id, rid);
    assert_int_equal(f->ps[0].out_epoch, 1);
    assert_int_equal(f->ps[0].out_new_epoch, 2);
    assert_int_equal(f->ps[0].out_target, f->ps[1].id);
    assert_string_equal(f->ps[0].out_target_addr, f->ps[1].addr);
    /* The target was assigned the range at the new epoch. */
    assert_true(f->ps[1].assigns >= 1);
    assert_int_equal(f->ps[1].nranges, 1);
    assert_int_equal(f->ps[1].range_ids[0], rid);
    assert_int_equal(f->ps[1].epochs[0], 2);
    map_range(f, rid, &server, &epoch, NULL);
    assert_int_equal(server, f->ps[1].id);
    assert_int_equal(epoch, 2);
    assert_map_rf1(f);
    WAIT_UNTIL(f, f->ps[0].dones == 1);
    assert_int_equal(f->ps[0].aborts + f->ps[1].aborts, 0);
    /* The source's next heartbeat reply no longer lists it. */
    ps_heartbeat(f, 0, 0, 0, NULL);
    assert_int_equal(f->ps[0].nranges, 0);
    WAIT_UNTIL(f, no_ops(f));
    assert_true(events_have(f, "\"outcome\":\"ok\""));
    {
        /* The event is in the JSON-lines file too. */
        char path[128];
        struct stat sb;
        snprintf(path, sizeof(path), "%s/events.jsonl", f->x.dir);
        assert_int_equal(stat(path, &sb), 0);
        assert_true(sb.st_size > 0);
    }
}

/* The source refuses MOVE_OUT: the move is aborted on both ends, the
 * range stays where it was, and the record is gone once both answered. */
static void test_move_source_error(void **state)
{
    struct fx *f = *state;
    uint64_t rid, server, epoch;
    char *body;
    start_master(f);
    fe_start(f);
    ps_start(f, 0);
    ps_start(f, 1);
    create_table(f, "people");
    rid = first_range(f);
    f->ps[0].mode = MOVE_ERR;
    assert_int_equal(
        th_ms_admin(&f->x, MS_ADMIN_MOVE, rid, f->ps[1].id, NULL, &body), 409);
    assert_non_null(strstr(body, "\"outcome\":\"aborted\""));
    assert_non_null(strstr(body, "MOVE_OUT"));
    free(body);
    WAIT_UNTIL(f, f->ps[0].aborts == 1 && f->ps[1].aborts == 1);
    assert_int_equal(f->ps[0].abort_move_id, f->ps[0].out_move_id);
    assert_int_equal(f->ps[1].abort_move_id, f->ps[0].out_move_id);
    WAIT_UNTIL(f, no_ops(f));
    map_range(f, rid, &server, &epoch, NULL);
    assert_int_equal(server, f->ps[0].id);
    assert_int_equal(epoch, 1);
    assert_int_equal(f->ps[0].dones, 0);
    /* A later move works. */
    f->ps[0].mode = MOVE_OK;
    assert_int_equal(
        th_ms_admin(&f->x, MS_ADMIN_MOVE, rid, f->ps[1].id, NULL, NULL), 200);
    map_range(f, rid, &server, &epoch, NULL);
    assert_int_equal(server, f->ps[1].id);
    assert_int_equal(epoch, 2);
}

/* The source never answers: the move times out and is aborted. */
static void test_move_timeout(void **state)
{
    struct fx *f = *state;
    uint64_t rid, server, epoch, t0;
    char *body;
    start_master(f);
    fe_start(f);
    ps_start(f, 0);
    ps_start(f, 1);
    create_table(f, "people");
    rid = first_range(f);
    f->ps[0].mode = MOVE_MUTE;
    t0 = uv_now(&f->x.loop);
    assert_int_equal(
        th_ms_admin(&f->x, MS_ADMIN_MOVE, rid, f->ps[1].id, NULL, &body), 504);
    assert_true(uv_now(&f->x.loop) - t0 >= 350);
    assert_non_null(strstr(body, "\"outcome\":\"aborted\""));
    free(body);
    WAIT_UNTIL(f, f->ps[0].aborts == 1 && f->ps[1].aborts == 1);
    WAIT_UNTIL(f, no_ops(f));
    map_range(f, rid, &server, &epoch, NULL);
    assert_int_equal(server, f->ps[0].id);
    assert_int_equal(epoch, 1);
    /* The late answer changes nothing. */
    reply_move_ok(f->ps[0].held_conn, f->ps[0].held_id);
    th_ms_spin(&f->x.loop, 200);
    map_range(f, rid, &server, &epoch, NULL);
    assert_int_equal(server, f->ps[0].id);
}

/* The source registers again while copying (its registration reply lists
 * the range, which unfreezes it): the move must not commit even when a
 * successful MOVE_OUT answer arrives afterwards. */
static void test_source_reregisters(void **state)
{
    struct fx *f = *state;
    uint64_t rid, server, epoch;
    struct ms_admin_req *req = ms_admin_req_new(MS_ADMIN_MOVE);
    struct th_ms_admin_wait w = {0};
    const char *b;
    int status;
    f->move_timeout_ms = 60000;
    start_master(f);
    fe_start(f);
    ps_start(f, 0);
    ps_start(f, 1);
    create_table(f, "people");
    rid = first_range(f);
    f->ps[0].mode = MOVE_MUTE;
    req->range_id = rid;
    req->server_id = f->ps[1].id;
    req->wake = th_ms_admin_wake;
    req->wake_arg = &w;
    ms_admin_submit(f->x.adm, req);
    WAIT_UNTIL(f, f->ps[0].move_outs == 1);
    {
        Rt__RegisterReq rr = RT__REGISTER_REQ__INIT;
        struct th_ms_reply r;
        rr.server_id = f->ps[0].id;
        rr.addr = f->ps[0].addr;
        assert_int_equal(th_ms_call(&f->x.loop, f->ps[0].cli,
                                    RT__METHOD__PS_REGISTER, &rr.base, &r),
                         0);
        free(r.body);
    }
    reply_move_ok(f->ps[0].held_conn, f->ps[0].held_id);
    WAIT_UNTIL(f, w.woken);
    assert_true(ms_admin_result(f->x.adm, req, &status, &b));
    assert_int_equal(status, 409);
    assert_non_null(strstr(b, "registered again"));
    ms_admin_release(f->x.adm, req);
    map_range(f, rid, &server, &epoch, NULL);
    assert_int_equal(server, f->ps[0].id);
    assert_int_equal(epoch, 1);
    WAIT_UNTIL(f, f->ps[1].aborts == 1);
    WAIT_UNTIL(f, no_ops(f));
}

/* The master restarts while a move is copying: the unsettled record is
 * found, both ends get MOVE_ABORT once they have registered again, the
 * range stays on the source at its epoch, and an event says why. */
static void test_restart_with_pending_move(void **state)
{
    struct fx *f = *state;
    uint64_t rid, server, epoch, move_id;
    struct ms_admin_req *req = ms_admin_req_new(MS_ADMIN_MOVE);
    struct th_ms_admin_wait w = {0};
    const char *b;
    int status;
    f->move_timeout_ms = 60000;
    start_master(f);
    fe_start(f);
    ps_start(f, 0);
    ps_start(f, 1);
    create_table(f, "people");
    rid = first_range(f);
    f->ps[0].mode = MOVE_MUTE;
    req->range_id = rid;
    req->server_id = f->ps[1].id;
    req->wake = th_ms_admin_wake;
    req->wake_arg = &w;
    ms_admin_submit(f->x.adm, req);
    WAIT_UNTIL(f, f->ps[0].move_outs == 1);
    move_id = f->ps[0].out_move_id;

    /* Stop: the operator's request is answered 503. */
    close_clients(f);
    ms_master_stop(f->x.m);
    uv_run(&f->x.loop, UV_RUN_DEFAULT);
    assert_true(w.woken);
    assert_true(ms_admin_result(f->x.adm, req, &status, &b));
    assert_int_equal(status, 503);
    ms_admin_release(f->x.adm, req);
    ms_master_destroy(f->x.m);
    ms_admin_destroy(f->x.adm);
    f->x.m = NULL;

    /* Restart (the servers keep their ids). */
    for (int i = 0; i < 2; i++) {
        f->ps[i].aborts = 0;
        f->ps[i].mode = MOVE_OK;
    }
    start_master(f);
    fe_start(f);
    assert_true(events_have(f, "master restarted before the commit"));
    assert_false(no_ops(f));
    ps_start(f, 0);
    /* The source's registration lists the range at the old epoch. */
    assert_int_equal(f->ps[0].nranges, 1);
    assert_int_equal(f->ps[0].range_ids[0], rid);
    assert_int_equal(f->ps[0].epochs[0], 1);
    ps_start(f, 1);
    WAIT_UNTIL(f, f->ps[1].aborts == 1);
    assert_int_equal(f->ps[1].abort_move_id, move_id);
    WAIT_UNTIL(f, no_ops(f));
    map_range(f, rid, &server, &epoch, NULL);
    assert_int_equal(server, f->ps[0].id);
    assert_int_equal(epoch, 1);
    /* And nothing is pending after yet another restart. */
    stop_master(f);
    start_master(f);
    fe_start(f);
    assert_true(no_ops(f));
}

/* Operator split and merge: new ids at epoch + 1 on the same server, told
 * to it before the answer; bad keys and ranges are refused. */
static void test_split_merge(void **state)
{
    struct fx *f = *state;
    uint64_t rid, server, epoch;
    size_t n;
    char *body;
    Rt__Map *map;
    start_master(f);
    fe_start(f);
    ps_start(f, 0);
    create_table(f, "people");
    rid = first_range(f);

    assert_int_equal(th_ms_admin(&f->x, MS_ADMIN_SPLIT, rid, 0, "", NULL), 400);
    assert_int_equal(th_ms_admin(&f->x, MS_ADMIN_SPLIT, 999, 0, "m", NULL),
                     404);
    /* No samples and no key: refused. */
    assert_int_equal(th_ms_admin(&f->x, MS_ADMIN_SPLIT, rid, 0, NULL, NULL),
                     409);

    assert_int_equal(th_ms_admin(&f->x, MS_ADMIN_SPLIT, rid, 0, "m", &body),
                     200);
    assert_non_null(strstr(body, "\"kind\":\"split\""));
    assert_non_null(strstr(body, "\"key\":\"m\""));
    assert_non_null(strstr(body, "\"new_ranges\":["));
    free(body);
    assert_int_equal(f->ps[0].nranges, 2);
    assert_int_equal(f->ps[0].epochs[0], 2);
    assert_int_equal(f->ps[0].epochs[1], 2);
    map_range(f, rid, &server, &epoch, &n);
    assert_int_equal(server, 0); /* the old id is gone */
    assert_int_equal(n, 2);
    assert_map_rf1(f);
    map = get_map(f);
    {
        const Rt__Range *a = map->ranges[0], *b2 = map->ranges[1];
        if (strcmp(a->low, b2->low) > 0) {
            const Rt__Range *t = a;
            a = b2;
            b2 = t;
        }
        assert_string_equal(a->low, "");
        assert_string_equal(a->high, "m");
        assert_string_equal(b2->low, "m");
        assert_true(b2->high_inf);
        rid = a->id;
        /* Keys outside the range. */
        assert_int_equal(
            th_ms_admin(&f->x, MS_ADMIN_SPLIT, a->id, 0, "z", NULL), 400);
        assert_int_equal(
            th_ms_admin(&f->x, MS_ADMIN_SPLIT, b2->id, 0, "m", NULL), 400);
        /* The last range of the table has no right-hand neighbour. */
        assert_int_equal(
            th_ms_admin(&f->x, MS_ADMIN_MERGE, b2->id, 0, NULL, NULL), 400);
    }
    rt__map__free_unpacked(map, NULL);

    assert_int_equal(th_ms_admin(&f->x, MS_ADMIN_MERGE, rid, 0, NULL, &body),
                     200);
    assert_non_null(strstr(body, "\"kind\":\"merge\""));
    free(body);
    assert_int_equal(f->ps[0].nranges, 1);
    assert_int_equal(f->ps[0].epochs[0], 3);
    map = get_map(f);
    assert_int_equal(map->n_ranges, 1);
    assert_string_equal(map->ranges[0]->low, "");
    assert_true(map->ranges[0]->high_inf);
    rt__map__free_unpacked(map, NULL);
    assert_map_rf1(f);
    assert_true(events_have(f, "\"kind\":\"merge\""));
}

/* Drain: every range of the server moves away (one move at a time per
 * the cap), new tables avoid it, an event says when it is empty; cancel
 * makes it eligible again. */
static void test_drain(void **state)
{
    struct fx *f = *state;
    uint64_t rid;
    char *body, *json;
    Rt__Map *map;
    start_master(f);
    fe_start(f);
    ps_start(f, 0);
    ps_start(f, 1);
    create_table(f, "people");
    rid = first_range(f);
    assert_int_equal(th_ms_admin(&f->x, MS_ADMIN_SPLIT, rid, 0, "m", NULL),
                     200);
    map = get_map(f);
    assert_int_equal(map->n_ranges, 2);
    assert_int_equal(map->ranges[0]->server_id, f->ps[0].id);
    assert_int_equal(map->ranges[1]->server_id, f->ps[0].id);
    rt__map__free_unpacked(map, NULL);

    assert_int_equal(th_ms_admin(&f->x, MS_ADMIN_DRAIN, 0, 99, NULL, NULL),
                     404);
    assert_int_equal(
        th_ms_admin(&f->x, MS_ADMIN_DRAIN, 0, f->ps[0].id, NULL, &body), 200);
    assert_non_null(strstr(body, "\"outcome\":\"started\""));
    free(body);
    /* The status (no_ops) is a snapshot that may be rebuilt a little
     * later than the catalog changes: between the two moves it can still
     * show no operation; the map says when both are done. */
    WAIT_UNTIL(
        f, f->ps[0].move_outs == 2 && no_ops(f) && map_all_on(f, f->ps[1].id));
    map = get_map(f);
    for (size_t i = 0; i < map->n_ranges; i++) {
        assert_int_equal(map->ranges[i]->server_id, f->ps[1].id);
    }
    rt__map__free_unpacked(map, NULL);
    WAIT_UNTIL(f, events_have(f, "\"outcome\":\"done\""));
    /* The status is rebuilt a moment after the change (coalesced when a
     * rebuild is slow, as under the sanitizers). */
    WAIT_UNTIL(f, status_has(f, "\"draining\":true"));
    /* A new table goes to the other server although it has more ranges. */
    create_table(f, "other");
    map = get_map(f);
    for (size_t i = 0; i < map->n_ranges; i++) {
        assert_int_equal(map->ranges[i]->server_id, f->ps[1].id);
    }
    rt__map__free_unpacked(map, NULL);
    /* Moving onto a draining server is refused. */
    assert_int_equal(th_ms_admin(&f->x, MS_ADMIN_MOVE, first_range(f),
                                 f->ps[0].id, NULL, NULL),
                     409);
    {
        struct ms_admin_req *req = ms_admin_req_new(MS_ADMIN_DRAIN);
        struct th_ms_admin_wait w = {0};
        const char *b;
        int status;
        req->server_id = f->ps[0].id;
        req->cancel = true;
        req->wake = th_ms_admin_wake;
        req->wake_arg = &w;
        ms_admin_submit(f->x.adm, req);
        WAIT_UNTIL(f, w.woken);
        assert_true(ms_admin_result(f->x.adm, req, &status, &b));
        assert_int_equal(status, 200);
        assert_non_null(strstr(b, "cancelled"));
        ms_admin_release(f->x.adm, req);
    }
    th_ms_spin(&f->x.loop, 100);
    json = ms_status_copy(f->x.st, MS_STATUS_JSON);
    assert_null(strstr(json, "\"draining\":true"));
    free(json);
}

/* The default policy end to end: heartbeats report a hot range; the
 * master marks it hot, splits it at the load median and moves a part to
 * the idle server, each an event. */
static void test_policy_end_to_end(void **state)
{
    struct fx *f = *state;
    static const char *const pks[] = {"a", "b", "c", "d", "e",
                                      "f", "g", "h", NULL};
    uint64_t rid, end;
    Rt__Map *map;
    bool split = false, moved = false;
    f->policy = "default";
    ms_policy_config_default(&f->pcfg);
    f->pcfg.split_sustain_ms = 300;
    f->pcfg.split_cooldown_ms = 300;
    f->pcfg.server_cooldown_ms = 100;
    start_master(f);
    fe_start(f);
    ps_start(f, 0);
    ps_start(f, 1);
    create_table(f, "hot");
    rid = first_range(f);
    end = uv_now(&f->x.loop) + 8000;
    while (uv_now(&f->x.loop) < end && !(split && moved)) {
        /* 500 entities per 100 ms = 5000/s on every range of server 0,
         * spread over a..h. */
        for (int i = 0; i < 2; i++) {
            for (size_t k = 0; k < f->ps[i].nranges || k == 0; k++) {
                ps_heartbeat(f, i, f->ps[i].nranges ? f->ps[i].range_ids[k] : 0,
                             500, pks);
                if (!f->ps[i].nranges) {
                    break;
                }
            }
        }
        th_ms_spin(&f->x.loop, 100);
        map = get_map(f);
        split = map->n_ranges >= 2;
        for (size_t i = 0; i < map->n_ranges; i++) {
            if (map->ranges[i]->server_id == f->ps[1].id) {
                moved = true;
            }
        }
        rt__map__free_unpacked(map, NULL);
    }
    assert_true(split);
    assert_true(moved);
    assert_true(events_have(f, "\"kind\":\"hot\""));
    assert_true(events_have(f, "\"kind\":\"split\""));
    assert_true(events_have(f, "\"origin\":\"policy\""));
    assert_true(events_have(f, "\"kind\":\"move\""));
    (void)rid;
    {
        char *hist = ms_status_copy(f->x.st, MS_STATUS_HISTORY);
        json_t *h, *fr;
        assert_non_null(hist);
        assert_non_null(strstr(hist, "\"frames\":[{"));
        /* Assembled from the frames' cached texts: one valid document,
         * frames in order. */
        h = json_loads(hist, 0, NULL);
        assert_non_null(h);
        assert_int_equal(json_integer_value(json_object_get(h, "max_frames")),
                         MS_LOAD_HISTORY);
        fr = json_object_get(h, "frames");
        assert_true(json_array_size(fr) >= 1);
        for (size_t i = 1; i < json_array_size(fr); i++) {
            assert_true(json_integer_value(
                            json_object_get(json_array_get(fr, i - 1), "t")) <
                        json_integer_value(
                            json_object_get(json_array_get(fr, i), "t")));
        }
        json_decref(h);
        free(hist);
        char *json = ms_status_copy(f->x.st, MS_STATUS_JSON);
        assert_non_null(strstr(json, "\"demand\":"));
        free(json);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_move_ok, setup, teardown),
        cmocka_unit_test_setup_teardown(test_move_source_error, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_move_timeout, setup, teardown),
        cmocka_unit_test_setup_teardown(test_source_reregisters, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_restart_with_pending_move, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_split_merge, setup, teardown),
        cmocka_unit_test_setup_teardown(test_drain, setup, teardown),
        cmocka_unit_test_setup_teardown(test_policy_end_to_end, setup,
                                        teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
