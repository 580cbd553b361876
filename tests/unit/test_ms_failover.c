/* Loop test: failover of a replicated range in the running master
 * (master/ms_repl.c driving ms_rcore; docs/DESIGN-replication.md §4, §7)
 * against fake partition servers over real RPC. Each fake registers,
 * heartbeats every 50 ms on a timer while "beating", answers SEAL as its
 * mode says (sealed at its LSN, busy with retry_ms, never, refused) and
 * ASSIGN_RANGES (or holds it), and records what it was told; a fake front
 * end records the MAP_UPDATE pushes. Transfers of the primary role
 * (§9.3) go through the admin bridge as rtctl's do; the fakes answer
 * TRANSFER_PRIMARY as their mode says and count TRANSFER_ABORT. A move
 * of a replicated range (§9.3) runs the same way: learner, its join
 * (the fake primary's ISR_CHANGE{add}), transfer, removal. The
 * master runs with short timings (failover after 300 ms of silence, 200
 * ms lease). Rejoin and re-replication (plan step 10) run here too: a
 * secondary outside the ISR joining it, a dead replica replaced by a
 * learner, wiped servers.
 * Everything runs on one loop. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "ms_admin.h"
#include "ms_events.h"
#include "ms_master.h"
#include "ms_status.h"
#include "rt.pb-c.h"
#include "rt_err.h"
#include "rt_log.h"
#include "rt_rpc.h"
#include "th_ms.h"

/* ---- Fixture ---- */

#define NPS 4
#define BEAT_MS 50

enum seal_mode {
    SEAL_OK,    /* sealed, at @lsn */
    SEAL_BUSY,  /* retry_ms 50, @busy_left times, then sealed */
    SEAL_HOLD,  /* never answered */
    SEAL_STALE, /* refused with RT_ESTALE */
};

enum xfer_mode {
    XFER_OK,   /* TRANSFER_PRIMARY answered {lsn, frozen_ms 3} */
    XFER_BUSY, /* refused with RT_EBUSY */
    XFER_HOLD, /* never answered */
};

struct fx;

struct fake_ps
{
    struct fx *f;
    struct rt_rpc_client *cli;
    uv_timer_t beat;
    bool beat_open;
    bool beating;
    bool hb_inflight;
    uint64_t id;
    char addr[32];
    const char *zone;
    /* SEAL */
    enum seal_mode seal_mode;
    int busy_left;
    uint64_t lsn;
    int seals;
    uint64_t seal_old_epoch, seal_new_epoch, seal_old_primary;
    /* ASSIGN_RANGES */
    bool hold_assign;
    int assigns;
    size_t a_nranges;
    uint64_t a_range, a_primary, a_epoch;
    size_t a_nisr;
    /* TRANSFER_PRIMARY / TRANSFER_ABORT */
    enum xfer_mode xfer_mode;
    int xfers, xfer_aborts;
    uint64_t xfer_epoch, xfer_to;
    /* heartbeats report the range as PRIMARY at a_epoch when it is (else
     * SECONDARY), applied at @lsn, with @lease_ms */
    bool report_role;
    uint32_t lease_ms;
    /* heartbeats also carry a RangeLoad of the assigned range with this
     * key_bytes (0: none) */
    uint64_t key_bytes;
};

struct fx
{
    uv_loop_t loop;
    char dir[TH_MS_DIR_SIZE];
    struct ms_master *m;
    struct ms_status *st;
    struct ms_admin *adm;
    char addr[64];
    struct fake_ps ps[NPS];
    struct rt_rpc_client *fe;
    int pushes;
    uint64_t fe_primary, fe_epoch; /* range 0 of the last pushed map */
    uint32_t rf;
    uint32_t hb_timeout_ms;        /* 0: 60000 */
    uint64_t rereplicate_after_ms; /* 0: the default */
    uint64_t learner_timeout_ms;   /* 0: the default */
    uint64_t learner_mbps;         /* 0: the default */
};

static void ps_on_request(struct rt_rpc_conn *conn,
                          uint32_t method,
                          uint64_t id,
                          const uint8_t *body,
                          size_t len,
                          void *ud)
{
    struct fake_ps *ps = ud;
    if (method == RT__METHOD__ASSIGN_RANGES) {
        Rt__Assignment *a = rt__assignment__unpack(NULL, len, body);
        assert_non_null(a);
        ps->assigns++;
        ps->a_nranges = a->n_ranges;
        if (a->n_ranges > 0) {
            ps->a_range = a->ranges[0]->id;
            ps->a_primary = a->ranges[0]->server_id;
            ps->a_epoch = a->ranges[0]->epoch;
            ps->a_nisr = a->ranges[0]->n_isr;
        }
        rt__assignment__free_unpacked(a, NULL);
        if (!ps->hold_assign) {
            rt_rpc_reply(conn, id, method, 0, NULL, 0);
        }
    } else if (method == RT__METHOD__SEAL) {
        Rt__SealReq *s = rt__seal_req__unpack(NULL, len, body);
        Rt__SealResp resp = RT__SEAL_RESP__INIT;
        assert_non_null(s);
        ps->seals++;
        ps->seal_old_epoch = s->old_epoch;
        ps->seal_new_epoch = s->new_epoch;
        ps->seal_old_primary = s->old_primary;
        assert_true(s->master_term >= 1);
        rt__seal_req__free_unpacked(s, NULL);
        switch (ps->seal_mode) {
            case SEAL_BUSY:
            case SEAL_OK:
                if (ps->seal_mode == SEAL_BUSY && ps->busy_left > 0) {
                    ps->busy_left--;
                    resp.retry_ms = 50;
                } else {
                    resp.applied_epoch = 1;
                    resp.applied_lsn = ps->lsn;
                }
                rt_rpc_reply_pb(conn, id, method, 0, &resp.base);
                break;
            case SEAL_STALE:
                rt_rpc_reply_err(conn, id, method, RT_ESTALE, NULL);
                break;
            case SEAL_HOLD:
                break;
        }
    } else if (method == RT__METHOD__TRANSFER_PRIMARY ||
               method == RT__METHOD__TRANSFER_ABORT) {
        Rt__TransferReq *t = rt__transfer_req__unpack(NULL, len, body);
        Rt__TransferResp resp = RT__TRANSFER_RESP__INIT;
        assert_non_null(t);
        ps->xfer_epoch = t->epoch;
        ps->xfer_to = t->to_server;
        rt__transfer_req__free_unpacked(t, NULL);
        if (method == RT__METHOD__TRANSFER_ABORT) {
            ps->xfer_aborts++;
            rt_rpc_reply(conn, id, method, 0, NULL, 0);
        } else {
            ps->xfers++;
            resp.lsn = ps->lsn;
            resp.frozen_ms = 3;
            if (ps->xfer_mode == XFER_OK) {
                rt_rpc_reply_pb(conn, id, method, 0, &resp.base);
            } else if (ps->xfer_mode == XFER_BUSY) {
                rt_rpc_reply_err(conn, id, method, RT_EBUSY, NULL);
            }
        }
    } else if (method == RT__METHOD__DROP_TABLE) {
        rt_rpc_reply(conn, id, method, 0, NULL, 0);
    } else {
        rt_rpc_reply_err(conn, id, method, RT_ENOTIMPL, NULL);
    }
}

static void fe_on_request(struct rt_rpc_conn *conn,
                          uint32_t method,
                          uint64_t id,
                          const uint8_t *body,
                          size_t len,
                          void *ud)
{
    struct fx *f = ud;
    (void)conn;
    (void)id;
    if (method == RT__METHOD__MAP_UPDATE) {
        Rt__Map *map = rt__map__unpack(NULL, len, body);
        assert_non_null(map);
        f->pushes++;
        if (map->n_ranges > 0) {
            f->fe_primary = map->ranges[0]->server_id;
            f->fe_epoch = map->ranges[0]->epoch;
        }
        rt__map__free_unpacked(map, NULL);
    }
}

static void start_master(struct fx *f)
{
    struct ms_master_config cfg = {
        .data_dir = f->dir,
        .listen_host = "127.0.0.1",
        .listen_port = 0,
        .heartbeat_timeout_ms = f->hb_timeout_ms ? f->hb_timeout_ms : 60000,
        .tick_ms = 50,
        .assign_timeout_ms = 500,
        .policy = "none",
        .replication_factor = f->rf,
        .failover_after_ms = 300,
        .reconnect_grace_ms = 100,
        .seal_wait_ms = 100,
        .lease_ms = 200,
        .repl_resend_ms = 100,
        .rereplicate_after_ms = f->rereplicate_after_ms,
        .learner_timeout_ms = f->learner_timeout_ms,
        .learner_min_mb_per_s = f->learner_mbps,
    };
    char errmsg[RT_ERRMSG_SIZE];
    assert_int_equal(ms_master_start(&f->loop, &cfg, &f->m, errmsg), 0);
    ms_master_set_status(f->m, f->st);
    f->adm = ms_admin_create();
    assert_int_equal(ms_master_set_admin(f->m, f->adm), 0);
    snprintf(f->addr, sizeof(f->addr), "127.0.0.1:%d",
             ms_master_rpc_port(f->m));
}

static void ps_stop(struct fake_ps *ps)
{
    if (ps->beat_open) {
        uv_close((uv_handle_t *)&ps->beat, NULL);
        ps->beat_open = false;
    }
    if (ps->cli) {
        rt_rpc_client_close(ps->cli);
        ps->cli = NULL;
    }
    ps->beating = false;
}

static void close_clients(struct fx *f)
{
    for (int i = 0; i < NPS; i++) {
        ps_stop(&f->ps[i]);
    }
    if (f->fe) {
        rt_rpc_client_close(f->fe);
        f->fe = NULL;
    }
}

static void stop_master(struct fx *f)
{
    close_clients(f);
    ms_master_stop(f->m);
    uv_run(&f->loop, UV_RUN_DEFAULT);
    ms_master_destroy(f->m);
    ms_admin_destroy(f->adm);
    f->m = NULL;
    f->adm = NULL;
}

static int setup(void **state)
{
    static const char *const zones[NPS] = {"z1", "z1", "z2", "z3"};
    struct fx *f = calloc(1, sizeof(*f));
    rt_log_init("test", getenv("TLOG") ? RT_LOG_DEBUG : RT_LOG_ERROR);
    uv_loop_init(&f->loop);
    if (th_ms_dir_create(f->dir, "test_ms_failover") != 0) {
        free(f);
        return -1;
    }
    f->st = ms_status_create();
    f->rf = 3;
    for (int i = 0; i < NPS; i++) {
        f->ps[i].f = f;
        snprintf(f->ps[i].addr, sizeof(f->ps[i].addr), "127.0.0.1:%d",
                 7101 + i);
        f->ps[i].zone = zones[i];
    }
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fx *f = *state;
    if (f->m) {
        stop_master(f);
    }
    close_clients(f);
    uv_run(&f->loop, UV_RUN_DEFAULT);
    assert_int_equal(uv_loop_close(&f->loop), 0);
    ms_status_destroy(f->st);
    th_ms_dir_remove(f->dir);
    free(f);
    return 0;
}

/* ---- Helpers ---- */

#define WAIT_UNTIL(f, cond) TH_MS_WAIT_UNTIL(&(f)->loop, 5000, cond)

static void hb_reply_cb(int status, const uint8_t *body, size_t len, void *arg)
{
    struct fake_ps *ps = arg;
    (void)status;
    (void)body;
    (void)len;
    ps->hb_inflight = false;
}

static void beat_cb(uv_timer_t *t)
{
    struct fake_ps *ps = t->data;
    Rt__HeartbeatReq req = RT__HEARTBEAT_REQ__INIT;
    Rt__ReplStatus st = RT__REPL_STATUS__INIT, *stp = &st;
    Rt__RangeLoad ld = RT__RANGE_LOAD__INIT, *ldp = &ld;
    if (!ps->beating || ps->hb_inflight || !ps->cli) {
        return;
    }
    req.server_id = ps->id;
    if (ps->key_bytes && ps->a_nranges > 0) {
        ld.range_id = ps->a_range;
        ld.key_bytes = ps->key_bytes;
        ld.interval_ms = BEAT_MS;
        req.n_loads = 1;
        req.loads = &ldp;
    }
    if (ps->report_role && ps->a_nranges > 0) {
        st.range_id = ps->a_range;
        st.role = ps->a_primary == ps->id ? RT__REPL_ROLE__ROLE_PRIMARY
                                          : RT__REPL_ROLE__ROLE_SECONDARY;
        st.epoch = ps->a_epoch;
        st.applied_lsn = ps->lsn;
        st.commit_lsn = ps->lsn;
        st.lease_ms = ps->lease_ms;
        st.state = 1;
        req.n_repl = 1;
        req.repl = &stp;
    }
    if (rt_rpc_call_pb(rt_rpc_client_conn(ps->cli), RT__METHOD__PS_HEARTBEAT,
                       &req.base, 1000, hb_reply_cb, ps) == 0) {
        ps->hb_inflight = true;
    }
}

/* Starts fake server @i (keeping its id from an earlier life), registers
 * it and starts its heartbeats. */
static void ps_start(struct fx *f, int i)
{
    struct fake_ps *ps = &f->ps[i];
    Rt__RegisterReq req = RT__REGISTER_REQ__INIT;
    Rt__RegisterResp *resp;
    struct th_ms_reply r;
    assert_int_equal(rt_rpc_client_start(&f->loop, f->addr, ps_on_request, NULL,
                                         ps, &ps->cli),
                     0);
    th_ms_wait_up(&f->loop, ps->cli);
    req.server_id = ps->id;
    req.addr = ps->addr;
    req.zone = (char *)ps->zone;
    assert_int_equal(
        th_ms_call(&f->loop, ps->cli, RT__METHOD__PS_REGISTER, &req.base, &r),
        0);
    resp = rt__register_resp__unpack(NULL, r.len, r.body);
    free(r.body);
    assert_non_null(resp);
    ps->id = resp->server_id;
    rt__register_resp__free_unpacked(resp, NULL);
    uv_timer_init(&f->loop, &ps->beat);
    ps->beat.data = ps;
    ps->beat_open = true;
    ps->beating = true;
    uv_timer_start(&ps->beat, beat_cb, BEAT_MS, BEAT_MS);
}

static void fe_start(struct fx *f)
{
    struct th_ms_reply r;
    assert_int_equal(
        rt_rpc_client_start(&f->loop, f->addr, fe_on_request, NULL, f, &f->fe),
        0);
    th_ms_wait_up(&f->loop, f->fe);
    assert_int_equal(
        th_ms_call(&f->loop, f->fe, RT__METHOD__FE_HELLO, NULL, &r), 0);
    free(r.body);
}

static int create_table(struct fx *f, const char *name)
{
    Rt__TableReq req = RT__TABLE_REQ__INIT;
    struct th_ms_reply r;
    int status;
    req.account = "acct";
    req.name = (char *)name;
    status =
        th_ms_call(&f->loop, f->fe, RT__METHOD__CREATE_TABLE, &req.base, &r);
    free(r.body);
    return status;
}

static int delete_table(struct fx *f, const char *name)
{
    Rt__TableReq req = RT__TABLE_REQ__INIT;
    struct th_ms_reply r;
    int status;
    req.account = "acct";
    req.name = (char *)name;
    status =
        th_ms_call(&f->loop, f->fe, RT__METHOD__DELETE_TABLE, &req.base, &r);
    free(r.body);
    return status;
}

/* The map's first range (the caller frees the map), or NULL with no
 * range. */
static Rt__Map *get_map(struct fx *f)
{
    struct th_ms_reply r;
    Rt__Map *map;
    assert_int_equal(th_ms_call(&f->loop, f->fe, RT__METHOD__GET_MAP, NULL, &r),
                     0);
    map = rt__map__unpack(NULL, r.len, r.body);
    free(r.body);
    assert_non_null(map);
    return map;
}

/* Range 0 of the map: its primary, epoch and seal_epoch. */
static void map_range(struct fx *f,
                      uint64_t *primary,
                      uint64_t *epoch,
                      uint64_t *seal_epoch)
{
    Rt__Map *map = get_map(f);
    assert_int_equal(map->n_ranges, 1);
    *primary = map->ranges[0]->server_id;
    *epoch = map->ranges[0]->epoch;
    if (seal_epoch) {
        *seal_epoch = map->ranges[0]->seal_epoch;
    }
    rt__map__free_unpacked(map, NULL);
}

static uint64_t map_primary(struct fx *f)
{
    uint64_t p, e;
    map_range(f, &p, &e, NULL);
    return p;
}

static uint64_t map_seal_epoch(struct fx *f)
{
    uint64_t p, e, s;
    map_range(f, &p, &e, &s);
    return s;
}

/* The first event of @kind (with @outcome when not NULL), a new
 * reference, or NULL. */
static json_t *find_event(struct fx *f, const char *kind, const char *outcome)
{
    char *text = ms_events_json(ms_master_events(f->m), 0, 0, 0);
    json_t *all = json_loads(text, 0, NULL), *found = NULL, *e;
    size_t i;
    free(text);
    assert_non_null(all);
    json_array_foreach(all, i, e)
    {
        const char *k = json_string_value(json_object_get(e, "kind"));
        const char *o = json_string_value(json_object_get(e, "outcome"));
        if (!found && k && strcmp(k, kind) == 0 &&
            (!outcome || (o && strcmp(o, outcome) == 0))) {
            found = json_incref(e);
        }
    }
    json_decref(all);
    return found;
}

static bool has_event(struct fx *f, const char *kind, const char *outcome)
{
    json_t *e = find_event(f, kind, outcome);
    json_decref(e);
    return e != NULL;
}

static bool metrics_has(struct fx *f, const char *line)
{
    char *text = ms_status_copy(f->st, MS_STATUS_METRICS);
    bool found = text && strstr(text, line) != NULL;
    free(text);
    return found;
}

/* The status document's range 0 as "server" and "repl_state" report it
 * (what `rtctl status` prints); 0 and "none" while the document (rebuilt
 * a moment after each change) lists no range yet. */
static uint64_t status_primary(struct fx *f, const char **state_out)
{
    char *text = ms_status_copy(f->st, MS_STATUS_JSON);
    json_t *root = json_loads(text, 0, NULL), *r;
    static char state[32];
    uint64_t server;
    free(text);
    assert_non_null(root);
    r = json_array_get(json_object_get(root, "ranges"), 0);
    if (!r) {
        json_decref(root);
        if (state_out) {
            *state_out = "none";
        }
        return 0;
    }
    server = (uint64_t)json_integer_value(json_object_get(r, "server"));
    snprintf(state, sizeof(state), "%s",
             json_is_string(json_object_get(r, "repl_state"))
                 ? json_string_value(json_object_get(r, "repl_state"))
                 : "null");
    if (state_out) {
        *state_out = state;
    }
    json_decref(root);
    return server;
}

/* The status document's member @key (a new reference), or NULL. */
static json_t *status_get(struct fx *f, const char *key)
{
    char *text = ms_status_copy(f->st, MS_STATUS_JSON);
    json_t *root = json_loads(text, 0, NULL), *v;
    free(text);
    assert_non_null(root);
    v = json_incref(json_object_get(root, key));
    json_decref(root);
    return v;
}

/* The first entry of the status's "ops" of @kind, a new reference, or
 * NULL. */
static json_t *status_op(struct fx *f, const char *kind)
{
    json_t *ops = status_get(f, "ops"), *o, *found = NULL;
    size_t i;
    json_array_foreach(ops, i, o)
    {
        if (!found &&
            strcmp(json_string_value(json_object_get(o, "kind")), kind) == 0) {
            found = json_incref(o);
        }
    }
    json_decref(ops);
    return found;
}

static bool status_has_op(struct fx *f, const char *kind)
{
    json_t *o = status_op(f, kind);
    json_decref(o);
    return o != NULL;
}

/* The lag the status shows for server @sid in range 0 (-1: null or not
 * listed). */
static long long status_lag(struct fx *f, uint64_t sid)
{
    json_t *ranges = status_get(f, "ranges");
    json_t *lag = json_object_get(json_array_get(ranges, 0), "lag"), *l;
    long long v = -1;
    size_t i;
    json_array_foreach(lag, i, l)
    {
        json_t *n = json_object_get(l, "lag");
        if ((uint64_t)json_integer_value(json_object_get(l, "server")) == sid &&
            json_is_integer(n)) {
            v = json_integer_value(n);
        }
    }
    json_decref(ranges);
    return v;
}

/* ISR_CHANGE from fake server @i removing @remove or adding @add (0:
 * none); returns the status, *range (may be NULL) the committed Range on
 * 0 (the caller frees it). */
static int isr_req(struct fx *f,
                   int i,
                   uint64_t range_id,
                   uint64_t epoch,
                   uint64_t remove,
                   uint64_t add,
                   Rt__Range **range)
{
    Rt__IsrChangeReq req = RT__ISR_CHANGE_REQ__INIT;
    struct th_ms_reply r;
    int status;
    req.range_id = range_id;
    req.epoch = epoch;
    if (remove) {
        req.n_remove = 1;
        req.remove = &remove;
        req.reason = "lagging";
    }
    if (add) {
        req.n_add = 1;
        req.add = &add;
        req.reason = "caught up";
    }
    status = th_ms_call(&f->loop, f->ps[i].cli, RT__METHOD__ISR_CHANGE,
                        &req.base, &r);
    if (range) {
        *range = status == 0 ? rt__range__unpack(NULL, r.len, r.body) : NULL;
    }
    free(r.body);
    return status;
}

static int isr_change(struct fx *f,
                      int i,
                      uint64_t range_id,
                      uint64_t epoch,
                      uint64_t remove,
                      Rt__Range **range)
{
    return isr_req(f, i, range_id, epoch, remove, 0, range);
}

/* PS_REGISTER of fake server @i (its current id and incarnation-less)
 * on @cli; returns the status and, on 0, *resp (the caller frees it). */
static int register_on(struct fx *f,
                       int i,
                       struct rt_rpc_client *cli,
                       Rt__RegisterResp **resp)
{
    Rt__RegisterReq req = RT__REGISTER_REQ__INIT;
    struct th_ms_reply r;
    int status;
    req.server_id = f->ps[i].id;
    req.addr = f->ps[i].addr;
    req.zone = (char *)f->ps[i].zone;
    status = th_ms_call(&f->loop, cli, RT__METHOD__PS_REGISTER, &req.base, &r);
    *resp = status == 0 ? rt__register_resp__unpack(NULL, r.len, r.body) : NULL;
    free(r.body);
    if (status == 0) {
        assert_non_null(*resp);
    }
    return status;
}

/* Master, front end and the four servers up; table "people" created with
 * its range on servers 0 (primary), 2 and 3 (zones z1, z2, z3). */
static void start_cluster(struct fx *f)
{
    start_master(f);
    fe_start(f);
    for (int i = 0; i < NPS; i++) {
        ps_start(f, i);
    }
    assert_int_equal(create_table(f, "people"), 0);
    assert_int_equal(map_primary(f), f->ps[0].id);
}

/* ---- transfers (docs/DESIGN-replication.md §9.3 step 2) ---- */

/* rtctl transfer through the admin bridge: the HTTP status and body. */
static int admin_transfer(struct fx *f, uint64_t range, uint64_t to, char **out)
{
    struct ms_admin_req *req = ms_admin_req_new(MS_ADMIN_TRANSFER);
    int status = 0;
    const char *b = NULL;
    req->range_id = range;
    req->server_id = to;
    ms_admin_submit(f->adm, req);
    WAIT_UNTIL(f, ms_admin_result(f->adm, req, &status, &b));
    *out = strdup(b ? b : "");
    ms_admin_release(f->adm, req);
    return status;
}

/* Every fake partition server reports its role, at LSN @lsn. */
static void report_roles(struct fx *f, uint64_t lsn)
{
    for (int i = 0; i < NPS; i++) {
        f->ps[i].report_role = true;
        f->ps[i].lsn = lsn;
    }
}

/* Submits an operator's move of range @rid to server @to. */
static struct ms_admin_req *submit_move(struct fx *f, uint64_t rid, uint64_t to)
{
    struct ms_admin_req *req = ms_admin_req_new(MS_ADMIN_MOVE);
    req->range_id = rid;
    req->server_id = to;
    ms_admin_submit(f->adm, req);
    return req;
}

/* A transfer of the primary role to secondary 2: TRANSFER_PRIMARY{epoch
 * 1, to 2} to the primary; on its answer the intent, SEALs to the two ISR
 * secondaries only (the answer stands for the primary's seal), then epoch
 * 2 with 2 primary and the old primary a SECONDARY in an ISR of three;
 * the operator gets 200 and the "transfer" event with its window. */
static void test_transfer(void **state)
{
    struct fx *f = *state;
    Rt__Map *map;
    const Rt__Range *r;
    char *body = NULL;
    json_t *e;

    start_cluster(f);
    report_roles(f, 7);
    map = get_map(f);
    uint64_t rid = map->ranges[0]->id;
    rt__map__free_unpacked(map, NULL);
    assert_int_equal(admin_transfer(f, rid, f->ps[2].id, &body), 200);
    e = json_loads(body, 0, NULL);
    assert_non_null(e);
    assert_string_equal(json_string_value(json_object_get(e, "kind")),
                        "transfer");
    assert_string_equal(json_string_value(json_object_get(e, "outcome")), "ok");
    assert_int_equal(json_integer_value(json_object_get(e, "new_primary")),
                     f->ps[2].id);
    assert_int_equal(json_integer_value(json_object_get(e, "lsn")), 7);
    assert_int_equal(json_integer_value(json_object_get(e, "frozen_ms")), 3);
    assert_true(json_integer_value(json_object_get(e, "window_ms")) >= 3);
    json_decref(e);
    free(body);
    assert_int_equal(f->ps[0].xfers, 1);
    assert_int_equal(f->ps[0].xfer_epoch, 1);
    assert_int_equal(f->ps[0].xfer_to, f->ps[2].id);
    assert_int_equal(f->ps[0].xfer_aborts, 0);
    assert_int_equal(f->ps[0].seals, 0);
    assert_true(f->ps[2].seals >= 1 && f->ps[3].seals >= 1);
    map = get_map(f);
    r = map->ranges[0];
    assert_int_equal(r->server_id, f->ps[2].id);
    assert_int_equal(r->epoch, 2);
    assert_int_equal(r->primary_epoch, 2);
    assert_int_equal(r->n_isr, 3);
    for (size_t i = 0; i < r->n_replicas; i++) {
        if (r->replicas[i]->server_id == f->ps[0].id) {
            assert_int_equal(r->replicas[i]->role,
                             RT__REPL_ROLE__ROLE_SECONDARY);
        }
    }
    rt__map__free_unpacked(map, NULL);
    assert_true(has_event(f, "transfer", "ok"));

    /* Refused with a reason, nothing changed: the primary itself, a
     * server outside the replica set, an unknown range. */
    assert_int_equal(admin_transfer(f, rid, f->ps[2].id, &body), 400);
    assert_non_null(strstr(body, "already the primary"));
    free(body);
    assert_int_equal(admin_transfer(f, rid, f->ps[1].id, &body), 400);
    assert_non_null(strstr(body, "not an in-sync secondary"));
    free(body);
    assert_int_equal(admin_transfer(f, rid + 100, f->ps[1].id, &body), 404);
    free(body);
    assert_int_equal(map_primary(f), f->ps[2].id);
}

/* Failure before the intent: the primary refuses (or never answers):
 * TRANSFER_ABORT goes to it, the operator gets the error, the range keeps
 * its primary and epoch, no seal was asked. */
static void test_transfer_refused_by_primary(void **state)
{
    struct fx *f = *state;
    char *body = NULL;
    Rt__Map *map;

    start_cluster(f);
    map = get_map(f);
    uint64_t rid = map->ranges[0]->id;
    rt__map__free_unpacked(map, NULL);
    f->ps[0].xfer_mode = XFER_BUSY;
    assert_int_equal(admin_transfer(f, rid, f->ps[3].id, &body), 409);
    assert_non_null(strstr(body, "\"outcome\":\"failed\""));
    free(body);
    WAIT_UNTIL(f, f->ps[0].xfer_aborts == 1);
    assert_int_equal(f->ps[0].xfer_epoch, 1);
    assert_int_equal(map_primary(f), f->ps[0].id);
    assert_int_equal(map_seal_epoch(f), 0);
    assert_int_equal(f->ps[2].seals + f->ps[3].seals, 0);
    assert_true(has_event(f, "transfer", "failed"));
}

/* Failure after the intent: the target never answers its SEAL; after the
 * seal wait the transfer ends as a failover among the sealed (the old
 * primary, counted sealed by its answer, and the other secondary): the
 * old primary, with the highest LSN, is primary again at epoch 2, and the
 * operator is told the target did not take over. */
static void test_transfer_target_silent(void **state)
{
    struct fx *f = *state;
    char *body = NULL;
    Rt__Map *map;

    start_cluster(f);
    for (int i = 0; i < NPS; i++) {
        f->ps[i].report_role = true;
    }
    f->ps[0].lsn = 9;
    f->ps[3].lsn = 9;
    f->ps[2].seal_mode = SEAL_HOLD;
    map = get_map(f);
    uint64_t rid = map->ranges[0]->id;
    rt__map__free_unpacked(map, NULL);
    assert_int_equal(admin_transfer(f, rid, f->ps[2].id, &body), 504);
    assert_non_null(strstr(body, "did not seal"));
    free(body);
    map = get_map(f);
    assert_int_equal(map->ranges[0]->server_id, f->ps[0].id);
    assert_int_equal(map->ranges[0]->epoch, 2);
    assert_int_equal(map->ranges[0]->primary_epoch, 2);
    assert_int_equal(map->ranges[0]->n_isr, 2);
    rt__map__free_unpacked(map, NULL);
    assert_int_equal(f->ps[0].xfer_aborts, 0);
}

/* ---- Tests ---- */

/* The primary's server stops heartbeating: after failover-after the
 * master seals the two live ISR secondaries and commits the one with the
 * higher applied LSN as primary at epoch 2 (primary_epoch 2, ISR = the
 * two sealed, the old primary a secondary outside the ISR), tells it and
 * the front ends; the event, the metrics and the status say so. */
static void test_failover_on_silence(void **state)
{
    struct fx *f = *state;
    Rt__Map *map;
    const Rt__Range *r;
    json_t *e;
    const char *st;

    start_cluster(f);
    f->ps[2].lsn = 10;
    f->ps[3].lsn = 12;
    f->ps[0].beating = false;
    WAIT_UNTIL(f, f->fe_primary == f->ps[3].id);
    map = get_map(f);
    r = map->ranges[0];
    assert_int_equal(r->server_id, f->ps[3].id);
    assert_int_equal(r->epoch, 2);
    assert_int_equal(r->primary_epoch, 2);
    assert_int_equal(r->seal_epoch, 0);
    assert_int_equal(r->n_isr, 2);
    assert_int_equal(r->isr[0], f->ps[2].id);
    assert_int_equal(r->isr[1], f->ps[3].id);
    for (size_t i = 0; i < r->n_replicas; i++) {
        if (r->replicas[i]->server_id == f->ps[0].id) {
            assert_int_equal(r->replicas[i]->role,
                             RT__REPL_ROLE__ROLE_SECONDARY);
        } else if (r->replicas[i]->server_id == f->ps[3].id) {
            assert_int_equal(r->replicas[i]->role, RT__REPL_ROLE__ROLE_PRIMARY);
        }
    }
    rt__map__free_unpacked(map, NULL);
    assert_int_equal(f->fe_epoch, 2);
    /* Both secondaries were sealed; the old primary was not. */
    for (int i = 2; i <= 3; i++) {
        assert_true(f->ps[i].seals >= 1);
        assert_int_equal(f->ps[i].seal_old_epoch, 1);
        assert_int_equal(f->ps[i].seal_new_epoch, 2);
        assert_int_equal(f->ps[i].seal_old_primary, f->ps[0].id);
    }
    assert_int_equal(f->ps[0].seals, 0);
    assert_int_equal(f->ps[1].seals, 0);
    /* The new primary was told, and answered. */
    WAIT_UNTIL(f, f->ps[3].a_primary == f->ps[3].id && f->ps[3].a_epoch == 2);
    WAIT_UNTIL(f, has_event(f, "failover", "ok"));
    e = find_event(f, "failover", "ok");
    assert_int_equal(json_integer_value(json_object_get(e, "old_primary")),
                     f->ps[0].id);
    assert_int_equal(json_integer_value(json_object_get(e, "new_primary")),
                     f->ps[3].id);
    assert_int_equal(json_integer_value(json_object_get(e, "chosen_lsn")), 12);
    assert_true(json_integer_value(json_object_get(e, "suspected_ms")) >= 300);
    assert_true(json_integer_value(json_object_get(e, "duration_ms")) >=
                json_integer_value(json_object_get(e, "committed_ms")));
    json_decref(e);
    assert_true(has_event(f, "repl_seal", NULL));
    WAIT_UNTIL(f, metrics_has(f, "rt_master_failovers_total 1\n"));
    assert_true(metrics_has(f, "rt_master_failover_seconds_count 1\n"));
    WAIT_UNTIL(f, status_primary(f, &st) == f->ps[3].id);
    WAIT_UNTIL(f, (status_primary(f, &st), strcmp(st, "stable") == 0));

    /* The new primary silent in turn: the last in-sync copy takes over. */
    f->ps[3].beating = false;
    WAIT_UNTIL(f, map_primary(f) == f->ps[2].id);
}

/* The primary's connection closes: it is suspected after the reconnect
 * grace (100 ms), well before failover-after (300 ms) of silence. */
static void test_failover_on_conn_close(void **state)
{
    struct fx *f = *state;
    json_t *e;
    start_cluster(f);
    f->ps[2].lsn = 3;
    f->ps[3].lsn = 2;
    th_ms_spin(&f->loop, 600); /* past the master's start grace */
    ps_stop(&f->ps[0]);
    WAIT_UNTIL(f, f->fe_primary == f->ps[2].id);
    WAIT_UNTIL(f, has_event(f, "failover", "ok"));
    e = find_event(f, "failover", "ok");
    assert_true(json_integer_value(json_object_get(e, "suspected_ms")) < 290);
    assert_int_equal(json_integer_value(json_object_get(e, "chosen_lsn")), 3);
    json_decref(e);
}

/* A secondary busy sealing (retry_ms) is asked again after retry_ms and
 * its seal then counts; a secondary that refuses is not chosen. */
static void test_seal_busy_retried(void **state)
{
    struct fx *f = *state;
    uint64_t p, e;
    start_cluster(f);
    f->ps[2].seal_mode = SEAL_BUSY;
    f->ps[2].busy_left = 2;
    f->ps[2].lsn = 7;
    f->ps[3].seal_mode = SEAL_STALE;
    f->ps[3].lsn = 100;
    f->ps[0].beating = false;
    WAIT_UNTIL(f, map_primary(f) == f->ps[2].id);
    assert_int_equal(f->ps[2].seals, 3);
    assert_true(f->ps[3].seals >= 1);
    map_range(f, &p, &e, NULL);
    assert_int_equal(e, 2);
    {
        Rt__Map *map = get_map(f);
        assert_int_equal(map->ranges[0]->n_isr, 1);
        assert_int_equal(map->ranges[0]->isr[0], f->ps[2].id);
        rt__map__free_unpacked(map, NULL);
    }
}

/* The primary heartbeats again before any SEAL was answered: the
 * failover is cancelled (epoch 2, same primary, same ISR, no intent). */
static void test_cancel(void **state)
{
    struct fx *f = *state;
    uint64_t p, e, s;
    start_cluster(f);
    f->ps[2].seal_mode = SEAL_HOLD;
    f->ps[3].seal_mode = SEAL_HOLD;
    f->ps[0].beating = false;
    WAIT_UNTIL(f, map_seal_epoch(f) == 2);
    WAIT_UNTIL(f, f->ps[2].seals >= 1 && f->ps[3].seals >= 1);
    f->ps[0].beating = true;
    WAIT_UNTIL(f, map_seal_epoch(f) == 0);
    map_range(f, &p, &e, &s);
    assert_int_equal(p, f->ps[0].id);
    assert_int_equal(e, 2);
    {
        Rt__Map *map = get_map(f);
        assert_int_equal(map->ranges[0]->n_isr, 3);
        assert_int_equal(map->ranges[0]->primary_epoch, 1);
        rt__map__free_unpacked(map, NULL);
    }
    WAIT_UNTIL(f, has_event(f, "failover", "cancelled"));
    assert_false(has_event(f, "failover", "ok"));
    WAIT_UNTIL(f, metrics_has(f, "rt_master_failovers_cancelled_total 1\n"));
    /* Sealing again later is still possible: nothing is stuck. */
    f->ps[2].seal_mode = SEAL_OK;
    f->ps[3].seal_mode = SEAL_OK;
    f->ps[0].beating = false;
    WAIT_UNTIL(f, map_primary(f) != f->ps[0].id);
}

/* ISR_CHANGE{remove} from the primary is committed and answered with the
 * new Range; every §4 refusal comes back with its code, in order. */
static void test_isr_change(void **state)
{
    struct fx *f = *state;
    Rt__Range *r = NULL;
    uint64_t rid;
    start_cluster(f);
    {
        Rt__Map *map = get_map(f);
        rid = map->ranges[0]->id;
        rt__map__free_unpacked(map, NULL);
    }
    assert_int_equal(isr_change(f, 0, rid + 100, 1, f->ps[3].id, NULL),
                     RT_ENOTFOUND);
    assert_int_equal(isr_change(f, 0, rid, 7, f->ps[3].id, NULL), RT_ESTALE);
    assert_int_equal(isr_change(f, 2, rid, 1, f->ps[3].id, NULL),
                     RT_ENOTPRIMARY);
    assert_int_equal(isr_change(f, 0, rid, 1, f->ps[0].id, NULL), RT_EINVAL);
    assert_int_equal(isr_change(f, 0, rid, 1, f->ps[1].id, NULL), RT_EINVAL);

    /* Accepted; the primary holds its assignment, so the range stays
     * busy until it answers. */
    f->ps[0].hold_assign = true;
    assert_int_equal(isr_change(f, 0, rid, 1, f->ps[3].id, &r), 0);
    assert_non_null(r);
    assert_int_equal(r->epoch, 2);
    assert_int_equal(r->n_isr, 2);
    assert_int_equal(r->isr[0], f->ps[0].id);
    assert_int_equal(r->isr[1], f->ps[2].id);
    assert_int_equal(r->server_id, f->ps[0].id);
    rt__range__free_unpacked(r, NULL);
    assert_int_equal(isr_change(f, 0, rid, 2, f->ps[2].id, NULL), RT_EBUSY);
    WAIT_UNTIL(f, f->fe_epoch == 2);
    {
        json_t *e = find_event(f, "isr_shrink", NULL);
        assert_non_null(e);
        assert_string_equal(json_string_value(json_object_get(e, "reason")),
                            "lagging");
        json_decref(e);
    }
    WAIT_UNTIL(f, metrics_has(f,
                              "rt_master_isr_changes_total{kind=\"shrink\"} "
                              "1\n"));

    /* A heartbeat reporting PRIMARY at epoch 2 answers the assignment
     * as well as the held reply would. */
    WAIT_UNTIL(f, f->ps[0].a_epoch == 2);
    f->ps[0].report_role = true;
    {
        /* EBUSY until the heartbeat came; the check stops at success. */
        int rc = -1;
        WAIT_UNTIL(f, rc == 0 || (rc = isr_change(f, 0, rid, 2, f->ps[2].id,
                                                  NULL)) == 0);
    }
    {
        Rt__Map *map = get_map(f);
        assert_int_equal(map->ranges[0]->epoch, 3);
        assert_int_equal(map->ranges[0]->n_isr, 1);
        rt__map__free_unpacked(map, NULL);
    }
}

/* A master restart after the seal intent committed, before any seal was
 * answered: the new master finds seal_epoch in the catalog, seals the
 * secondaries once they are back and finishes the failover. */
static void test_restart_mid_failover(void **state)
{
    struct fx *f = *state;
    start_cluster(f);
    f->ps[2].seal_mode = SEAL_HOLD;
    f->ps[3].seal_mode = SEAL_HOLD;
    f->ps[0].beating = false;
    WAIT_UNTIL(f, map_seal_epoch(f) == 2);
    stop_master(f);
    f->ps[2].seal_mode = SEAL_OK;
    f->ps[2].lsn = 5;
    f->ps[3].seal_mode = SEAL_OK;
    f->ps[3].lsn = 4;
    f->ps[2].seals = f->ps[3].seals = 0;
    start_master(f);
    fe_start(f);
    ps_start(f, 2);
    ps_start(f, 3);
    WAIT_UNTIL(f, map_primary(f) == f->ps[2].id);
    assert_true(f->ps[2].seals >= 1);
    assert_int_equal(map_seal_epoch(f), 0);
    {
        Rt__Map *map = get_map(f);
        assert_int_equal(map->ranges[0]->epoch, 2);
        assert_int_equal(map->ranges[0]->primary_epoch, 2);
        rt__map__free_unpacked(map, NULL);
    }
    WAIT_UNTIL(f, has_event(f, "failover", "ok"));
}

/* A table deleted while its range is being sealed stays deleted: the
 * failover stops and nothing writes the range back. */
static void test_delete_during_failover(void **state)
{
    struct fx *f = *state;
    Rt__Map *map;
    start_cluster(f);
    f->ps[2].seal_mode = SEAL_HOLD;
    f->ps[3].seal_mode = SEAL_HOLD;
    f->ps[0].beating = false;
    WAIT_UNTIL(f, map_seal_epoch(f) == 2);
    assert_int_equal(delete_table(f, "people"), 0);
    f->ps[2].seal_mode = SEAL_OK;
    f->ps[3].seal_mode = SEAL_OK;
    f->ps[2].seals = f->ps[3].seals = 0;
    th_ms_spin(&f->loop, 600);
    map = get_map(f);
    assert_int_equal(map->n_ranges, 0);
    assert_int_equal(map->n_tables, 0);
    rt__map__free_unpacked(map, NULL);
    assert_int_equal(f->ps[2].seals + f->ps[3].seals, 0);
    assert_false(has_event(f, "failover", "ok"));
}

/* The isolated primary comes back (docs/DESIGN-replication.md §7, F7):
 * cut off, it fell silent while its old connection stayed open (a
 * blackholed link: the master never saw it close), a failover moved the
 * range away, and the healed server registers again on a new connection.
 * The registration is accepted and its reply names the range with the
 * server as a secondary outside the ISR at the new epoch, and its
 * heartbeats are answered again. (The fault harness showed "register with
 * master failed: ... unable to receive requests" here: that text is
 * RT_ENOCONN's, the PS's calls failing while the proxy reset its
 * connections during the cut, not a refusal by the master.) */
static void test_isolated_primary_registers(void **state)
{
    struct fx *f = *state;
    struct rt_rpc_client *cli;
    Rt__RegisterResp *resp = NULL;
    const Rt__Range *r;
    start_cluster(f);
    f->ps[2].lsn = 4;
    f->ps[3].lsn = 9;
    f->ps[0].beating = false;
    WAIT_UNTIL(f, map_primary(f) == f->ps[3].id);
    WAIT_UNTIL(f, has_event(f, "failover", "ok"));

    /* The same id from a new connection, the old one still up. */
    assert_int_equal(rt_rpc_client_start(&f->loop, f->addr, ps_on_request, NULL,
                                         &f->ps[0], &cli),
                     0);
    th_ms_wait_up(&f->loop, cli);
    assert_int_equal(register_on(f, 0, cli, &resp), 0);
    assert_int_equal(resp->server_id, f->ps[0].id);
    assert_int_equal(resp->n_ranges, 1);
    r = resp->ranges[0];
    assert_int_equal(r->server_id, f->ps[3].id);
    assert_int_equal(r->epoch, 2);
    for (size_t i = 0; i < r->n_isr; i++) {
        assert_int_not_equal(r->isr[i], f->ps[0].id);
    }
    for (size_t i = 0; i < r->n_replicas; i++) {
        if (r->replicas[i]->server_id == f->ps[0].id) {
            assert_int_equal(r->replicas[i]->role,
                             RT__REPL_ROLE__ROLE_SECONDARY);
        }
    }
    rt__register_resp__free_unpacked(resp, NULL);

    /* Registering again (a retry whose first answer was lost) and on the
     * old connection too: still accepted, nothing moves back. */
    assert_int_equal(register_on(f, 0, cli, &resp), 0);
    rt__register_resp__free_unpacked(resp, NULL);
    assert_int_equal(register_on(f, 0, f->ps[0].cli, &resp), 0);
    assert_int_equal(resp->n_ranges, 1);
    assert_int_equal(resp->ranges[0]->server_id, f->ps[3].id);
    rt__register_resp__free_unpacked(resp, NULL);
    assert_int_equal(map_primary(f), f->ps[3].id);
    rt_rpc_client_close(cli);
}

/* The isolated primary registers again while its range is still being
 * sealed (no SEAL answered yet): accepted, and the failover is cancelled
 * rather than left stuck; a registration mid-seal after a SEAL was
 * answered is accepted too and the failover completes. */
static void test_register_during_failover(void **state)
{
    struct fx *f = *state;
    Rt__RegisterResp *resp = NULL;
    start_cluster(f);
    f->ps[2].seal_mode = SEAL_HOLD;
    f->ps[3].seal_mode = SEAL_HOLD;
    f->ps[0].beating = false;
    WAIT_UNTIL(f, map_seal_epoch(f) == 2);
    WAIT_UNTIL(f, f->ps[2].seals >= 1 && f->ps[3].seals >= 1);
    assert_int_equal(register_on(f, 0, f->ps[0].cli, &resp), 0);
    assert_int_equal(resp->n_ranges, 1);
    rt__register_resp__free_unpacked(resp, NULL);
    f->ps[0].beating = true; /* as a registered server does */
    WAIT_UNTIL(f, has_event(f, "failover", "cancelled"));
    WAIT_UNTIL(f, map_seal_epoch(f) == 0);
    assert_int_equal(map_primary(f), f->ps[0].id);

    /* Silent again; this time one secondary seals before it returns. */
    f->ps[0].beating = false;
    f->ps[2].seal_mode = SEAL_OK;
    f->ps[2].lsn = 3;
    WAIT_UNTIL(f, map_primary(f) == f->ps[2].id);
    assert_int_equal(register_on(f, 0, f->ps[0].cli, &resp), 0);
    assert_int_equal(resp->n_ranges, 1);
    assert_int_equal(resp->ranges[0]->server_id, f->ps[2].id);
    rt__register_resp__free_unpacked(resp, NULL);
}

/* A failover in flight is in the status's "ops" (kind, range, primary,
 * state, running_ms) while it seals, and gone once it is done. */
static void test_status_ops(void **state)
{
    struct fx *f = *state;
    json_t *o;
    uint64_t rid;
    start_cluster(f);
    {
        Rt__Map *map = get_map(f);
        rid = map->ranges[0]->id;
        rt__map__free_unpacked(map, NULL);
    }
    assert_false(status_has_op(f, "failover"));
    f->ps[2].seal_mode = SEAL_HOLD;
    f->ps[3].seal_mode = SEAL_HOLD;
    f->ps[0].beating = false;
    WAIT_UNTIL(f, map_seal_epoch(f) == 2);
    WAIT_UNTIL(f, status_has_op(f, "failover"));
    o = status_op(f, "failover");
    assert_int_equal(json_integer_value(json_object_get(o, "range")), rid);
    assert_int_equal(json_integer_value(json_object_get(o, "server")),
                     f->ps[0].id);
    assert_string_equal(json_string_value(json_object_get(o, "state")),
                        "sealing");
    assert_true(json_is_integer(json_object_get(o, "running_ms")));
    json_decref(o);
    f->ps[2].seal_mode = SEAL_OK;
    f->ps[3].seal_mode = SEAL_OK;
    WAIT_UNTIL(f, has_event(f, "failover", "ok"));
    WAIT_UNTIL(f, !status_has_op(f, "failover"));
}

/* The servers' ReplStatus shows in the status: per secondary its lag
 * behind the primary's applied LSN, and the primary's lease. */
static void test_status_lag(void **state)
{
    struct fx *f = *state;
    json_t *ranges, *r;
    start_cluster(f);
    assert_int_equal(status_lag(f, f->ps[2].id), -1); /* nothing reported */
    f->ps[0].lsn = 50;
    f->ps[0].lease_ms = 1200;
    f->ps[2].lsn = 47;
    f->ps[3].lsn = 50;
    for (int i = 0; i < NPS; i++) {
        f->ps[i].report_role = true;
    }
    WAIT_UNTIL(
        f, status_lag(f, f->ps[2].id) == 3 && status_lag(f, f->ps[3].id) == 0);
    ranges = status_get(f, "ranges");
    r = json_array_get(ranges, 0);
    assert_int_equal(json_integer_value(json_object_get(r, "lease_ms")), 1200);
    assert_int_equal(json_integer_value(json_object_get(r, "applied_lsn")), 50);
    assert_int_equal(json_array_size(json_object_get(r, "lag")), 2);
    json_decref(ranges);
    f->ps[2].lsn = 50;
    WAIT_UNTIL(f, status_lag(f, f->ps[2].id) == 0);
}

/* RF 1: a silent owner never fails over (no SEAL, map unchanged). */
static void test_rf1_never_fails_over(void **state)
{
    struct fx *f = *state;
    uint64_t p, e, s;
    const char *st;
    f->rf = 1;
    start_master(f);
    fe_start(f);
    for (int i = 0; i < NPS; i++) {
        ps_start(f, i);
    }
    assert_int_equal(create_table(f, "single"), 0);
    map_range(f, &p, &e, NULL);
    for (int i = 0; i < NPS; i++) {
        if (f->ps[i].id == p) {
            f->ps[i].beating = false;
        }
    }
    th_ms_spin(&f->loop, 1200);
    map_range(f, &p, &e, &s);
    assert_int_equal(e, 1);
    assert_int_equal(s, 0);
    for (int i = 0; i < NPS; i++) {
        assert_int_equal(f->ps[i].seals, 0);
    }
    WAIT_UNTIL(f, (status_primary(f, &st), strcmp(st, "none") != 0));
    assert_string_equal(st, "null");
    assert_true(metrics_has(f, "rt_master_failovers_total 0\n"));
}

/* ---- Rejoin and re-replication (docs/DESIGN-replication.md §8) ---- */

/* ISR_CHANGE{add} from fake server @i; as isr_change(). */
static int isr_add(struct fx *f,
                   int i,
                   uint64_t range_id,
                   uint64_t epoch,
                   uint64_t add,
                   Rt__Range **range)
{
    return isr_req(f, i, range_id, epoch, 0, add, range);
}

/* PS_REGISTER of fake server @i with incarnation byte @inc (16 times) on
 * a new connection that becomes its own; the status, and on 0 how many
 * ranges it was assigned in *nranges. */
static int register_inc(struct fx *f, int i, uint8_t inc, size_t *nranges)
{
    struct fake_ps *ps = &f->ps[i];
    Rt__RegisterReq req = RT__REGISTER_REQ__INIT;
    uint8_t bytes[16];
    struct th_ms_reply r;
    int status;
    if (!ps->cli) {
        assert_int_equal(rt_rpc_client_start(&f->loop, f->addr, ps_on_request,
                                             NULL, ps, &ps->cli),
                         0);
        th_ms_wait_up(&f->loop, ps->cli);
    }
    memset(bytes, inc, sizeof(bytes));
    req.server_id = ps->id;
    req.addr = ps->addr;
    req.zone = (char *)ps->zone;
    req.incarnation.data = bytes;
    req.incarnation.len = sizeof(bytes);
    status =
        th_ms_call(&f->loop, ps->cli, RT__METHOD__PS_REGISTER, &req.base, &r);
    if (status == 0) {
        Rt__RegisterResp *resp = rt__register_resp__unpack(NULL, r.len, r.body);
        assert_non_null(resp);
        *nranges = resp->n_ranges;
        rt__register_resp__free_unpacked(resp, NULL);
    }
    free(r.body);
    return status;
}

/* Range 0's role of server @sid in the map (ROLE_NONE: not a member). */
static int map_role(struct fx *f, uint64_t sid)
{
    Rt__Map *map = get_map(f);
    int role = RT__REPL_ROLE__ROLE_NONE;
    for (size_t i = 0; i < map->ranges[0]->n_replicas; i++) {
        if (map->ranges[0]->replicas[i]->server_id == sid) {
            role = map->ranges[0]->replicas[i]->role;
        }
    }
    rt__map__free_unpacked(map, NULL);
    return role;
}

/* A move of the range from its primary (server 0) to server 1, which
 * holds no copy (docs/DESIGN-replication.md §9.3): server 1 becomes a
 * LEARNER; once the primary's ISR_CHANGE{add 1} committed, the primary
 * role is transferred to 1 (TRANSFER_PRIMARY to 0), then 0 leaves the
 * set: replicas 1 (primary), 2, 3 all in sync; event "move" ok with its
 * phases. A move to a member is refused 409 before anything changed. */
static void test_move_replicated(void **state)
{
    struct fx *f = *state;
    struct ms_admin_req *req;
    const char *b = NULL;
    char *body = NULL;
    int status = 0;
    uint64_t rid;
    Rt__Map *map;
    json_t *e;

    start_cluster(f);
    report_roles(f, 7);
    map = get_map(f);
    rid = map->ranges[0]->id;
    rt__map__free_unpacked(map, NULL);
    req = submit_move(f, rid, f->ps[2].id);
    WAIT_UNTIL(f, ms_admin_result(f->adm, req, &status, &b));
    assert_int_equal(status, 409);
    assert_non_null(strstr(b, "already holds a replica"));
    ms_admin_release(f->adm, req);

    req = submit_move(f, rid, f->ps[1].id);
    WAIT_UNTIL(f, map_role(f, f->ps[1].id) == RT__REPL_ROLE__ROLE_LEARNER);
    map = get_map(f);
    assert_int_equal(
        isr_add(f, 0, rid, map->ranges[0]->epoch, f->ps[1].id, NULL), 0);
    rt__map__free_unpacked(map, NULL);
    WAIT_UNTIL(f, ms_admin_result(f->adm, req, &status, &b));
    assert_int_equal(status, 200);
    body = strdup(b);
    ms_admin_release(f->adm, req);
    e = json_loads(body, 0, NULL);
    assert_non_null(e);
    assert_string_equal(json_string_value(json_object_get(e, "kind")), "move");
    assert_string_equal(json_string_value(json_object_get(e, "outcome")), "ok");
    assert_true(json_is_true(json_object_get(e, "replicated")));
    assert_int_equal(json_integer_value(json_object_get(e, "from")),
                     f->ps[0].id);
    assert_int_equal(json_integer_value(json_object_get(e, "new_primary")),
                     f->ps[1].id);
    assert_non_null(
        json_object_get(json_object_get(e, "phases"), "transfer_ms"));
    json_decref(e);
    free(body);
    assert_int_equal(f->ps[0].xfers, 1);
    assert_int_equal(f->ps[0].xfer_to, f->ps[1].id);
    assert_int_equal(map_role(f, f->ps[0].id), RT__REPL_ROLE__ROLE_NONE);
    assert_int_equal(map_role(f, f->ps[1].id), RT__REPL_ROLE__ROLE_PRIMARY);
    map = get_map(f);
    assert_int_equal(map->ranges[0]->n_replicas, 3);
    assert_int_equal(map->ranges[0]->n_isr, 3);
    rt__map__free_unpacked(map, NULL);
    assert_true(has_event(f, "move", "ok"));
}

/* The master restarts in the middle of a move of the range from server 0
 * to server 1, the learner on 1 committed but not joined (nothing of a
 * move is durable): the restarted master loads the learner as ADDING, the
 * primary's ISR_CHANGE{add 1} makes the set four in-sync copies, and the
 * re-replication plan trims it back to three ("over_rf"): server 1,
 * whose zone z1 the primary already covers; the primary stays. */
static void test_move_restart_settles(void **state)
{
    struct fx *f = *state;
    struct ms_admin_req *req;
    const char *b = NULL;
    int status = 0;
    uint64_t rid;
    Rt__Map *map;
    json_t *ev;

    start_cluster(f);
    report_roles(f, 7);
    map = get_map(f);
    rid = map->ranges[0]->id;
    rt__map__free_unpacked(map, NULL);
    req = submit_move(f, rid, f->ps[1].id);
    WAIT_UNTIL(f, map_role(f, f->ps[1].id) == RT__REPL_ROLE__ROLE_LEARNER);

    /* Stop: the operator's request is answered 503 (when the master is
     * destroyed). */
    close_clients(f);
    ms_master_stop(f->m);
    uv_run(&f->loop, UV_RUN_DEFAULT);
    ms_master_destroy(f->m);
    assert_true(ms_admin_result(f->adm, req, &status, &b));
    assert_int_equal(status, 503);
    ms_admin_release(f->adm, req);
    ms_admin_destroy(f->adm);
    f->m = NULL;
    f->adm = NULL;

    start_master(f);
    fe_start(f);
    for (int i = 0; i < NPS; i++) {
        ps_start(f, i);
    }
    assert_int_equal(map_role(f, f->ps[1].id), RT__REPL_ROLE__ROLE_LEARNER);
    WAIT_UNTIL(f, status_has_op(f, "learner"));
    map = get_map(f);
    assert_int_equal(
        isr_add(f, 0, rid, map->ranges[0]->epoch, f->ps[1].id, NULL), 0);
    rt__map__free_unpacked(map, NULL);
    WAIT_UNTIL(f, map_role(f, f->ps[1].id) == RT__REPL_ROLE__ROLE_NONE);
    assert_int_equal(map_role(f, f->ps[0].id), RT__REPL_ROLE__ROLE_PRIMARY);
    map = get_map(f);
    assert_int_equal(map->ranges[0]->n_replicas, 3);
    assert_int_equal(map->ranges[0]->n_isr, 3);
    rt__map__free_unpacked(map, NULL);
    ev = find_event(f, "replica_removed", NULL);
    assert_non_null(ev);
    assert_string_equal(json_string_value(json_object_get(ev, "reason")),
                        "over_rf");
    json_decref(ev);
}

static uint64_t range0_id(struct fx *f)
{
    Rt__Map *map = get_map(f);
    uint64_t id = map->ranges[0]->id;
    rt__map__free_unpacked(map, NULL);
    return id;
}

static bool range0_stable(struct fx *f)
{
    const char *st;
    status_primary(f, &st);
    return strcmp(st, "stable") == 0;
}

/* --learner-timeout-ms 300 with --learner-min-mb-per-s 1: the primary's
 * heartbeats report its range at 1 MiB, so a move's learner has 10 s +
 * 1 s, not 300 ms: it is still a learner after a second, joins, and the
 * move completes. */
static void test_learner_deadline_by_size(void **state)
{
    struct fx *f = *state;
    struct ms_admin_req *req;
    const char *b = NULL;
    int status = 0;
    uint64_t rid;
    Rt__Map *map;

    f->learner_timeout_ms = 300;
    f->learner_mbps = 1;
    start_cluster(f);
    report_roles(f, 7);
    f->ps[0].key_bytes = 1 << 20;
    rid = range0_id(f);
    th_ms_spin(&f->loop, 4 * BEAT_MS); /* the size reaches the master */
    req = submit_move(f, rid, f->ps[1].id);
    WAIT_UNTIL(f, map_role(f, f->ps[1].id) == RT__REPL_ROLE__ROLE_LEARNER);
    th_ms_spin(&f->loop, 1000);
    assert_int_equal(map_role(f, f->ps[1].id), RT__REPL_ROLE__ROLE_LEARNER);
    assert_false(has_event(f, "replica_removed", NULL));
    map = get_map(f);
    assert_int_equal(
        isr_add(f, 0, rid, map->ranges[0]->epoch, f->ps[1].id, NULL), 0);
    rt__map__free_unpacked(map, NULL);
    WAIT_UNTIL(f, ms_admin_result(f->adm, req, &status, &b));
    assert_int_equal(status, 200);
    ms_admin_release(f->adm, req);
    assert_int_equal(map_role(f, f->ps[1].id), RT__REPL_ROLE__ROLE_PRIMARY);
}

/* A secondary an ISR shrink removed comes back into the ISR by its
 * primary's ISR_CHANGE{add}: epoch + 1, in the ISR again, event
 * isr_grow. A non-member or a request from a non-primary is refused. */
static void test_isr_add_rejoin(void **state)
{
    struct fx *f = *state;
    Rt__Range *r = NULL;
    uint64_t rid;
    start_cluster(f);
    rid = range0_id(f);
    assert_int_equal(isr_change(f, 0, rid, 1, f->ps[3].id, NULL), 0);
    WAIT_UNTIL(f, range0_stable(f));
    assert_int_equal(isr_add(f, 0, rid, 2, f->ps[1].id, NULL), RT_EINVAL);
    assert_int_equal(isr_add(f, 0, rid, 2, f->ps[2].id, NULL), RT_EINVAL);
    assert_int_equal(isr_add(f, 2, rid, 2, f->ps[3].id, NULL), RT_ENOTPRIMARY);
    assert_int_equal(isr_add(f, 0, rid, 1, f->ps[3].id, NULL), RT_ESTALE);
    assert_int_equal(isr_add(f, 0, rid, 2, f->ps[3].id, &r), 0);
    assert_non_null(r);
    assert_int_equal(r->epoch, 3);
    assert_int_equal(r->n_isr, 3);
    assert_int_equal(r->isr[2], f->ps[3].id);
    rt__range__free_unpacked(r, NULL);
    WAIT_UNTIL(f, f->ps[3].a_epoch == 3 && f->ps[3].a_nisr == 3);
    assert_true(has_event(f, "isr_grow", NULL));
}

/* A secondary silent past --rereplicate-after-ms is replaced: a learner
 * on the one server left (events, status op), which joins by the
 * primary's ISR_CHANGE{add}; then the dead replica leaves the set and the
 * metrics count one re-replication. */
static void test_rereplicate_dead_secondary(void **state)
{
    struct fx *f = *state;
    uint64_t rid, p, e;
    f->rereplicate_after_ms = 400;
    start_cluster(f);
    rid = range0_id(f);
    ps_stop(&f->ps[3]);
    WAIT_UNTIL(f, map_role(f, f->ps[1].id) == RT__REPL_ROLE__ROLE_LEARNER);
    assert_true(has_event(f, "rereplicate", NULL));
    WAIT_UNTIL(f, f->ps[1].a_nranges == 1);
    map_range(f, &p, &e, NULL);
    assert_int_equal(p, f->ps[0].id);
    assert_int_equal(e, 2);
    WAIT_UNTIL(f, status_has_op(f, "learner"));
    assert_int_equal(isr_add(f, 0, rid, 2, f->ps[1].id, NULL), 0);
    WAIT_UNTIL(f, map_role(f, f->ps[3].id) == RT__REPL_ROLE__ROLE_NONE);
    assert_int_equal(map_role(f, f->ps[1].id), RT__REPL_ROLE__ROLE_SECONDARY);
    map_range(f, &p, &e, NULL);
    assert_int_equal(e, 4);
    {
        json_t *ev = find_event(f, "replica_removed", NULL);
        assert_non_null(ev);
        assert_string_equal(json_string_value(json_object_get(ev, "reason")),
                            "surplus");
        json_decref(ev);
    }
    WAIT_UNTIL(f, metrics_has(f, "rt_master_rereplications_total 1\n"));
}

/* A range created with fewer live servers than its RF gets a learner as
 * soon as a server appears (reason under_replicated), and the learner
 * joins like any other. */
static void test_rereplicate_under_replicated(void **state)
{
    struct fx *f = *state;
    json_t *ev;
    start_master(f);
    fe_start(f);
    ps_start(f, 0);
    ps_start(f, 1);
    assert_int_equal(create_table(f, "people"), 0);
    assert_int_equal(map_role(f, f->ps[2].id), RT__REPL_ROLE__ROLE_NONE);
    ps_start(f, 2);
    WAIT_UNTIL(f, map_role(f, f->ps[2].id) == RT__REPL_ROLE__ROLE_LEARNER);
    ev = find_event(f, "rereplicate", NULL);
    assert_non_null(ev);
    assert_string_equal(json_string_value(json_object_get(ev, "reason")),
                        "under_replicated");
    json_decref(ev);
    {
        uint64_t p, e;
        int rc = -1;
        map_range(f, &p, &e, NULL);
        WAIT_UNTIL(f, rc == 0 || (rc = isr_add(f, 0, range0_id(f), e,
                                               f->ps[2].id, NULL)) == 0);
    }
    WAIT_UNTIL(f, map_role(f, f->ps[2].id) == RT__REPL_ROLE__ROLE_SECONDARY);
    WAIT_UNTIL(f, metrics_has(f, "rt_master_rereplications_total 1\n"));
    WAIT_UNTIL(f, metrics_has(f, "rt_master_under_replicated_ranges 0\n"));
}

/* A secondary whose disk was wiped comes back (new incarnation, after it
 * was seen down): it is removed from the set before it is assigned
 * anything, and registers as an empty server. */
static void test_wiped_secondary(void **state)
{
    struct fx *f = *state;
    size_t n = 99;
    f->hb_timeout_ms = 300;
    start_cluster(f);
    assert_int_equal(register_inc(f, 3, 0xaa, &n), 0);
    assert_int_equal(n, 1);
    ps_stop(&f->ps[3]);
    th_ms_spin(&f->loop, 600); /* seen down */
    assert_int_equal(register_inc(f, 3, 0xbb, &n), 0);
    assert_int_equal(n, 0);
    assert_int_equal(map_role(f, f->ps[3].id), RT__REPL_ROLE__ROLE_NONE);
    {
        json_t *ev = find_event(f, "replica_removed", NULL);
        assert_non_null(ev);
        assert_string_equal(json_string_value(json_object_get(ev, "reason")),
                            "wiped");
        json_decref(ev);
    }
    /* Two in-sync copies of three: under-replicated. */
    WAIT_UNTIL(f, metrics_has(f, "rt_master_under_replicated_ranges 1\n"));
}

/* A wiped primary is refused (RT_EBUSY) while it is still the primary and
 * no in-sync copy is live to fail over to; once a secondary is back the
 * range fails over and the wiped server registers, out of the set. */
static void test_wiped_primary_waits_for_failover(void **state)
{
    struct fx *f = *state;
    size_t n = 99;
    f->hb_timeout_ms = 300;
    start_cluster(f);
    assert_int_equal(register_inc(f, 0, 0xaa, &n), 0);
    f->ps[2].beating = false;
    f->ps[3].beating = false;
    ps_stop(&f->ps[0]);
    th_ms_spin(&f->loop, 600);
    assert_int_equal(register_inc(f, 0, 0xbb, &n), RT_EBUSY);
    assert_int_equal(map_primary(f), f->ps[0].id);
    f->ps[2].beating = true;
    WAIT_UNTIL(f, map_primary(f) == f->ps[2].id && range0_stable(f));
    assert_int_equal(register_inc(f, 0, 0xbb, &n), 0);
    assert_int_equal(n, 0);
    assert_int_equal(map_role(f, f->ps[0].id), RT__REPL_ROLE__ROLE_NONE);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_transfer, setup, teardown),
        cmocka_unit_test_setup_teardown(test_move_replicated, setup, teardown),
        cmocka_unit_test_setup_teardown(test_move_restart_settles, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_learner_deadline_by_size, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_transfer_refused_by_primary, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_transfer_target_silent, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_failover_on_silence, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_failover_on_conn_close, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_seal_busy_retried, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_cancel, setup, teardown),
        cmocka_unit_test_setup_teardown(test_isr_change, setup, teardown),
        cmocka_unit_test_setup_teardown(test_restart_mid_failover, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_delete_during_failover, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_rf1_never_fails_over, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_isolated_primary_registers, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_register_during_failover, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_status_ops, setup, teardown),
        cmocka_unit_test_setup_teardown(test_status_lag, setup, teardown),
        cmocka_unit_test_setup_teardown(test_isr_add_rejoin, setup, teardown),
        cmocka_unit_test_setup_teardown(test_rereplicate_dead_secondary, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_rereplicate_under_replicated,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_wiped_secondary, setup, teardown),
        cmocka_unit_test_setup_teardown(test_wiped_primary_waits_for_failover,
                                        setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
