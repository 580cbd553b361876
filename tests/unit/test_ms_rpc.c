/* Loop test: the master's RPC service in-process on port 0, driven by
 * rt_rpc clients playing a partition server and a front end (register,
 * heartbeat, FE_HELLO, create/delete/list/get tables, ACLs, service
 * properties; master/README.md "RPC"). Everything runs on one loop; calls are
 * made "synchronous" by turning the loop until their reply has come. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ms_catalog.h"
#include "ms_master.h"
#include "ms_status.h"
#include "rt.pb-c.h"
#include "rt_err.h"
#include "rt_log.h"
#include "rt_rpc.h"
#include "th_ms.h"

/* ---- Fixture ---- */

struct fake_ps
{
    struct rt_rpc_client *cli;
    int assigns;         /* ASSIGN_RANGES received */
    size_t last_nranges; /* ranges in the last one */
    int drops;           /* DROP_TABLE received */
    uint64_t dropped_table;
    int mute; /* do not answer ASSIGN_RANGES */
};

struct fake_fe
{
    struct rt_rpc_client *cli;
    int updates; /* MAP_UPDATE received */
    Rt__Map *last;
};

struct fx
{
    struct th_ms_master x;
    struct fake_ps ps;
    struct fake_fe fe;
    uint64_t grace_ms; /* --delete-grace-ms of the next start_master */
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
        ps->last_nranges = a->n_ranges;
        rt__assignment__free_unpacked(a, NULL);
        if (!ps->mute) {
            rt_rpc_reply(conn, id, method, 0, NULL, 0);
        }
    } else if (method == RT__METHOD__DROP_TABLE) {
        Rt__DropTableReq *d = rt__drop_table_req__unpack(NULL, len, body);
        assert_non_null(d);
        ps->drops++;
        ps->dropped_table = d->table_id;
        rt__drop_table_req__free_unpacked(d, NULL);
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
    struct fake_fe *fe = ud;
    (void)conn;
    assert_int_equal(method, RT__METHOD__MAP_UPDATE);
    assert_int_equal(id, 0); /* one-way */
    if (fe->last) {
        rt__map__free_unpacked(fe->last, NULL);
    }
    fe->last = rt__map__unpack(NULL, len, body);
    assert_non_null(fe->last);
    fe->updates++;
}

static void start_master(struct fx *f)
{
    struct ms_master_config cfg = {
        .heartbeat_timeout_ms = 300,
        .tick_ms = 50,
        .assign_timeout_ms = 300,
        .delete_grace_ms = f->grace_ms,
    };
    th_ms_master_start(&f->x, &cfg, false);
}

static void stop_master(struct fx *f)
{
    /* Callers close the clients first, so the loop runs dry. */
    th_ms_master_stop(&f->x);
}

static int setup(void **state)
{
    struct fx *f = calloc(1, sizeof(*f));
    if (th_ms_master_setup(&f->x, "test_ms_rpc", RT_LOG_WARN) != 0) {
        free(f);
        return -1;
    }
    start_master(f);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fx *f = *state;
    if (f->ps.cli) {
        rt_rpc_client_close(f->ps.cli);
    }
    if (f->fe.cli) {
        rt_rpc_client_close(f->fe.cli);
    }
    th_ms_master_teardown(&f->x);
    if (f->fe.last) {
        rt__map__free_unpacked(f->fe.last, NULL);
    }
    free(f);
    return 0;
}

/* ---- Helpers ---- */

/* The loop turns until @cond holds, for at most 3000 ms. */
#define WAIT_UNTIL(f, cond) TH_MS_WAIT_UNTIL(&(f)->x.loop, 3000, cond)

static bool status_has(struct fx *f, const char *needle);

static int call_table(struct fx *f,
                      uint32_t method,
                      const char *account,
                      const char *name,
                      Rt__Table **out)
{
    Rt__TableReq req = RT__TABLE_REQ__INIT;
    struct th_ms_reply r;
    int status;
    req.account = (char *)account;
    req.name = (char *)name;
    status = th_ms_call(&f->x.loop, f->fe.cli, method, &req.base, &r);
    if (out) {
        *out = status == 0 ? rt__table__unpack(NULL, r.len, r.body) : NULL;
    }
    if (status != 0 && r.len) {
        /* Failure bodies are rt.Error. */
        Rt__Error *e = rt__error__unpack(NULL, r.len, r.body);
        assert_non_null(e);
        rt__error__free_unpacked(e, NULL);
    }
    free(r.body);
    return status;
}

static void start_clients(struct fx *f)
{
    f->ps.cli = th_ms_client_start(&f->x, ps_on_request, &f->ps);
    f->fe.cli = th_ms_client_start(&f->x, fe_on_request, &f->fe);
}

static Rt__RegisterResp *ps_register(struct fx *f, uint64_t id)
{
    return th_ms_ps_register(&f->x, f->ps.cli, id, "127.0.0.1:5555", NULL);
}

/* PS_REGISTER for @id with @incarnation (NULL: none, as an older server)
 * and @zone; returns the status, *id_out the id given on success. A
 * refusal's body is an rt.Error whose message must name the id. */
static int ps_register_inc(struct fx *f,
                           uint64_t id,
                           const uint8_t *incarnation,
                           const char *zone,
                           uint64_t *id_out)
{
    Rt__RegisterReq req = RT__REGISTER_REQ__INIT;
    struct th_ms_reply r;
    int status;
    req.server_id = id;
    req.addr = "127.0.0.1:5555";
    req.zone = (char *)zone;
    if (incarnation) {
        req.incarnation.data = (uint8_t *)incarnation;
        req.incarnation.len = MS_INCARNATION_SIZE;
    }
    status = th_ms_call(&f->x.loop, f->ps.cli, RT__METHOD__PS_REGISTER,
                        &req.base, &r);
    if (status == 0) {
        Rt__RegisterResp *resp = rt__register_resp__unpack(NULL, r.len, r.body);
        assert_non_null(resp);
        *id_out = resp->server_id;
        rt__register_resp__free_unpacked(resp, NULL);
    } else {
        Rt__Error *e = rt__error__unpack(NULL, r.len, r.body);
        assert_non_null(e);
        assert_non_null(strstr(e->message, "incarnation"));
        rt__error__free_unpacked(e, NULL);
    }
    free(r.body);
    return status;
}

static Rt__RegisterResp *ps_heartbeat(struct fx *f, uint64_t id, int *status)
{
    Rt__HeartbeatReq req = RT__HEARTBEAT_REQ__INIT;
    Rt__RangeLoad load = RT__RANGE_LOAD__INIT, *loads[1] = {&load};
    Rt__RegisterResp *resp = NULL;
    struct th_ms_reply r;
    req.server_id = id;
    load.range_id = 1;
    load.requests = 10;
    req.n_loads = 1;
    req.loads = loads;
    *status = th_ms_call(&f->x.loop, f->ps.cli, RT__METHOD__PS_HEARTBEAT,
                         &req.base, &r);
    if (*status == 0) {
        resp = rt__register_resp__unpack(NULL, r.len, r.body);
        assert_non_null(resp);
    }
    free(r.body);
    return resp;
}

static Rt__Map *fe_hello(struct fx *f)
{
    struct th_ms_reply r;
    Rt__Map *map;
    assert_int_equal(
        th_ms_call(&f->x.loop, f->fe.cli, RT__METHOD__FE_HELLO, NULL, &r), 0);
    map = rt__map__unpack(NULL, r.len, r.body);
    free(r.body);
    assert_non_null(map);
    return map;
}

/* ---- Tests ---- */

/* Register, hello, create, list, get and delete over real connections. */
static void test_flows(void **state)
{
    struct fx *f = *state;
    Rt__Table *t;
    Rt__Map *map;
    Rt__RegisterResp *rr;
    int status, updates;
    start_clients(f);

    map = fe_hello(f);
    assert_int_equal(map->n_tables, 0);
    assert_int_equal(map->n_servers, 0);
    rt__map__free_unpacked(map, NULL);

    /* No partition server yet: ServerBusy. */
    assert_int_equal(
        call_table(f, RT__METHOD__CREATE_TABLE, "acct", "people", NULL),
        RT_EBUSY);

    /* Flow 1: a new server gets an id and an empty assignment; the front
     * end hears that the map changed. */
    updates = f->fe.updates;
    rr = ps_register(f, 0);
    assert_int_equal(rr->server_id, 1);
    assert_int_equal(rr->n_ranges, 0);
    rt__register_resp__free_unpacked(rr, NULL);
    WAIT_UNTIL(f, f->fe.updates > updates);

    /* Flow 3: create; the server was told before the reply came. */
    updates = f->fe.updates;
    assert_int_equal(
        call_table(f, RT__METHOD__CREATE_TABLE, "acct", "People", &t), 0);
    assert_string_equal(t->name, "People");
    assert_string_equal(t->account, "acct");
    assert_int_equal(t->id, 1);
    rt__table__free_unpacked(t, NULL);
    assert_int_equal(f->ps.assigns, 1);
    assert_int_equal(f->ps.last_nranges, 1);
    assert_true(f->fe.updates > updates);
    assert_int_equal(f->fe.last->n_tables, 1);
    assert_int_equal(f->fe.last->n_ranges, 1);
    assert_true(f->fe.last->ranges[0]->high_inf);
    assert_int_equal(f->fe.last->ranges[0]->server_id, 1);
    assert_int_equal(f->fe.last->ranges[0]->epoch, 1);

    /* Names are checked again; clashes are case-insensitive. */
    assert_int_equal(
        call_table(f, RT__METHOD__CREATE_TABLE, "acct", "PEOPLE", NULL),
        RT_ETABLEEXISTS);
    assert_int_equal(
        call_table(f, RT__METHOD__CREATE_TABLE, "acct", "bad-name", NULL),
        RT_EBADNAME);
    assert_int_equal(
        call_table(f, RT__METHOD__CREATE_TABLE, "acct", "Tables", NULL),
        RT_EBADNAME);

    /* Get. */
    assert_int_equal(call_table(f, RT__METHOD__GET_TABLE, "acct", "pEOPLE", &t),
                     0);
    assert_string_equal(t->name, "People");
    rt__table__free_unpacked(t, NULL);
    assert_int_equal(
        call_table(f, RT__METHOD__GET_TABLE, "acct", "nobody", NULL),
        RT_ETABLENOTFOUND);

    /* Flow 5: list with paging. */
    assert_int_equal(
        call_table(f, RT__METHOD__CREATE_TABLE, "acct", "alpha", NULL), 0);
    {
        Rt__ListTablesReq req = RT__LIST_TABLES_REQ__INIT;
        Rt__ListTablesResp *resp;
        struct th_ms_reply r;
        req.account = "acct";
        req.limit = 1;
        assert_int_equal(th_ms_call(&f->x.loop, f->fe.cli,
                                    RT__METHOD__LIST_TABLES, &req.base, &r),
                         0);
        resp = rt__list_tables_resp__unpack(NULL, r.len, r.body);
        free(r.body);
        assert_int_equal(resp->n_tables, 1);
        assert_string_equal(resp->tables[0]->name, "alpha");
        assert_string_equal(resp->next, "people");
        rt__list_tables_resp__free_unpacked(resp, NULL);
        req.start = "people";
        req.limit = 0;
        assert_int_equal(th_ms_call(&f->x.loop, f->fe.cli,
                                    RT__METHOD__LIST_TABLES, &req.base, &r),
                         0);
        resp = rt__list_tables_resp__unpack(NULL, r.len, r.body);
        free(r.body);
        assert_int_equal(resp->n_tables, 1);
        assert_string_equal(resp->tables[0]->name, "People");
        assert_string_equal(resp->next, "");
        rt__list_tables_resp__free_unpacked(resp, NULL);
    }

    /* Heartbeats carry the full assignment. */
    rr = ps_heartbeat(f, 1, &status);
    assert_int_equal(status, 0);
    assert_int_equal(rr->n_ranges, 2);
    rt__register_resp__free_unpacked(rr, NULL);
    assert_null(ps_heartbeat(f, 99, &status));
    assert_int_equal(status, RT_ENOTFOUND);

    /* Flow 4: delete; the owner is told to drop the data. */
    assert_int_equal(
        call_table(f, RT__METHOD__DELETE_TABLE, "acct", "people", NULL), 0);
    WAIT_UNTIL(f, f->ps.drops == 1);
    assert_int_equal(f->ps.dropped_table, 1);
    assert_int_equal(
        call_table(f, RT__METHOD__DELETE_TABLE, "acct", "people", NULL),
        RT_ENOTFOUND);

    /* Liveness: silence makes the server down and the map says so. */
    updates = f->fe.updates;
    {
        int flag = 0;
        uint64_t end = uv_now(&f->x.loop) + 3000;
        while (uv_now(&f->x.loop) < end) {
            uv_run(&f->x.loop, UV_RUN_ONCE);
            if (f->fe.updates > updates && f->fe.last->n_servers == 1 &&
                f->fe.last->servers[0]->state == 2) {
                flag = 1;
                break;
            }
        }
        assert_true(flag);
    }
    /* ... and a heartbeat brings it back. */
    rr = ps_heartbeat(f, 1, &status);
    assert_int_equal(status, 0);
    rt__register_resp__free_unpacked(rr, NULL);
    WAIT_UNTIL(f, f->fe.last->servers[0]->state == 1);

    /* The status documents reflect it all (rebuilt a moment after the
     * change). */
    WAIT_UNTIL(f, status_has(f, "\"state\":\"up\""));
    char *json = ms_status_copy(f->x.st, MS_STATUS_JSON);
    assert_non_null(json);
    assert_non_null(strstr(json, "\"state\":\"up\""));
    assert_non_null(strstr(json, "\"name\":\"alpha\""));
    assert_non_null(strstr(json, "\"high\":null"));
    free(json);
    char *metrics = ms_status_copy(f->x.st, MS_STATUS_METRICS);
    assert_non_null(strstr(metrics, "rt_master_tables 1\n"));
    assert_non_null(strstr(metrics, "rt_master_servers{state=\"up\"} 1\n"));
    free(metrics);
}

/* A server that does not acknowledge ASSIGN_RANGES delays the create by
 * the bounded wait only; the table exists and the heartbeat carries it. */
static void test_create_with_mute_server(void **state)
{
    struct fx *f = *state;
    Rt__RegisterResp *rr;
    int status;
    start_clients(f);
    rr = ps_register(f, 0);
    rt__register_resp__free_unpacked(rr, NULL);
    f->ps.mute = 1;
    uint64_t t0 = uv_now(&f->x.loop);
    assert_int_equal(
        call_table(f, RT__METHOD__CREATE_TABLE, "acct", "slow", NULL), 0);
    assert_true(uv_now(&f->x.loop) - t0 >= 250);
    assert_int_equal(f->ps.assigns, 1);
    rr = ps_heartbeat(f, 1, &status);
    assert_int_equal(status, 0);
    assert_int_equal(rr->n_ranges, 1);
    rt__register_resp__free_unpacked(rr, NULL);
}

/* After a master restart the catalog is back, the known server is down
 * until it registers again with its id, and then gets its ranges. */
static void test_restart(void **state)
{
    struct fx *f = *state;
    Rt__RegisterResp *rr;
    Rt__Map *map;
    start_clients(f);
    rr = ps_register(f, 0);
    uint64_t sid = rr->server_id, term = rr->master_term;
    assert_true(term >= 1);
    rt__register_resp__free_unpacked(rr, NULL);
    assert_int_equal(
        call_table(f, RT__METHOD__CREATE_TABLE, "acct", "Kept", NULL), 0);
    rt_rpc_client_close(f->ps.cli);
    rt_rpc_client_close(f->fe.cli);
    f->ps.cli = f->fe.cli = NULL;
    stop_master(f);

    start_master(f);
    start_clients(f);
    map = fe_hello(f);
    assert_int_equal(map->n_tables, 1);
    assert_string_equal(map->tables[0]->name, "Kept");
    assert_int_equal(map->n_servers, 1);
    assert_int_equal(map->servers[0]->state, 2);
    uint64_t v = map->version;
    rt__map__free_unpacked(map, NULL);

    rr = ps_register(f, sid);
    assert_int_equal(rr->server_id, sid);
    assert_int_equal(rr->n_ranges, 1);
    assert_true(rr->map_version > v);
    assert_int_equal(rr->master_term, term + 1); /* a new master */
    rt__register_resp__free_unpacked(rr, NULL);
    /* Ids keep counting after the restart. */
    Rt__Table *t;
    assert_int_equal(
        call_table(f, RT__METHOD__CREATE_TABLE, "acct", "Fresh", &t), 0);
    assert_int_equal(t->id, 2);
    rt__table__free_unpacked(t, NULL);
}

/* True when the status JSON holds @needle. */
static bool status_has(struct fx *f, const char *needle)
{
    char *json = ms_status_copy(f->x.st, MS_STATUS_JSON);
    bool ok = json && strstr(json, needle);
    free(json);
    return ok;
}

/* A registration claiming a live server id with another incarnation (a
 * copy of its disk, or a wiped server back before it was seen down) is
 * refused with RT_EEXIST and changes nothing; the same incarnation, or
 * none (an older server), registers as before. Once the id is down, the new
 * incarnation is accepted (logged) and recorded. */
static void test_register_incarnation(void **state)
{
    struct fx *f = *state;
    uint8_t inc_a[MS_INCARNATION_SIZE], inc_b[MS_INCARNATION_SIZE];
    uint64_t sid, got;
    memset(inc_a, 0xaa, sizeof(inc_a));
    memset(inc_b, 0xbb, sizeof(inc_b));
    start_clients(f);

    assert_int_equal(ps_register_inc(f, 0, inc_a, "z1", &sid), 0);
    assert_int_equal(ps_register_inc(f, sid, inc_a, "z1", &got), 0);
    assert_int_equal(got, sid);
    assert_int_equal(ps_register_inc(f, sid, NULL, "z1", &got), 0);
    assert_int_equal(ps_register_inc(f, sid, inc_b, "z1", &got), RT_EEXIST);
    /* Still the first incarnation: a register with it passes, live. */
    assert_int_equal(ps_register_inc(f, sid, inc_a, "z1", &got), 0);

    /* Bad length: refused before anything else. */
    {
        Rt__RegisterReq req = RT__REGISTER_REQ__INIT;
        struct th_ms_reply r;
        uint8_t three[3] = {1, 2, 3};
        req.server_id = sid;
        req.addr = "127.0.0.1:5555";
        req.incarnation.data = three;
        req.incarnation.len = sizeof(three);
        assert_int_equal(th_ms_call(&f->x.loop, f->ps.cli,
                                    RT__METHOD__PS_REGISTER, &req.base, &r),
                         RT_EINVAL);
        free(r.body);
    }

    /* A zone the master could not store or show: refused. */
    {
        static const char *const bad[] = {
            "a zone", "z\n2", "\xc3\xa9",
            "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
            NULL};
        for (int i = 0; bad[i]; i++) {
            Rt__RegisterReq req = RT__REGISTER_REQ__INIT;
            struct th_ms_reply r;
            req.server_id = sid;
            req.addr = "127.0.0.1:5555";
            req.zone = (char *)bad[i];
            assert_int_equal(th_ms_call(&f->x.loop, f->ps.cli,
                                        RT__METHOD__PS_REGISTER, &req.base, &r),
                             RT_EINVAL);
            free(r.body);
        }
    }

    /* No heartbeat for longer than the timeout: down; the wiped server
     * comes back with a new incarnation and is taken. */
    th_ms_spin(&f->x.loop, 700);
    assert_int_equal(ps_register_inc(f, sid, inc_b, "z2", &got), 0);
    assert_int_equal(got, sid);
    /* Now the old one is the stranger. */
    assert_int_equal(ps_register_inc(f, sid, inc_a, "z2", &got), RT_EEXIST);
    /* The status names the zone and the incarnation now stored. */
    WAIT_UNTIL(f, status_has(f, "\"zone\":\"z2\"") &&
                      status_has(f,
                                 "\"incarnation\":"
                                 "\"bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb\""));
}

/* Table ACLs and service properties over RPC: SET_ACL / GET_ACL (limits,
 * missing table), the ACL and the account's CORS rules pushed in the map before
 * the reply, SET_SERVICE_PROPS merging sections, and 409 TableBeingDeleted for
 * a name in its deletion grace period. */
static void test_acl_props_grace(void **state)
{
    struct fx *f = *state;
    Rt__RegisterResp *rr;
    Rt__Map *map;
    struct th_ms_reply r;
    int updates;

    f->grace_ms = 60000;
    stop_master(f);
    start_master(f);
    start_clients(f);
    rr = ps_register(f, 0);
    rt__register_resp__free_unpacked(rr, NULL);
    map = fe_hello(f);
    rt__map__free_unpacked(map, NULL);
    assert_int_equal(
        call_table(f, RT__METHOD__CREATE_TABLE, "acct", "People", NULL), 0);

    /* SET_ACL: the map update arrives no later than the reply. */
    {
        Rt__AclReq req = RT__ACL_REQ__INIT;
        Rt__SignedIdentifier a = RT__SIGNED_IDENTIFIER__INIT;
        Rt__SignedIdentifier b = RT__SIGNED_IDENTIFIER__INIT;
        Rt__SignedIdentifier *ids[6] = {&a, &b, &b, &b, &b, &b};
        a.id = "read";
        a.has_policy = true;
        a.permission = "r";
        a.expiry = "2030-01-01T00:00:00.0000000Z";
        b.id = "other";
        req.account = "acct";
        req.name = "PEOPLE";
        req.acl = ids;
        req.n_acl = 6;
        assert_int_equal(th_ms_call(&f->x.loop, f->fe.cli, RT__METHOD__SET_ACL,
                                    &req.base, &r),
                         RT_EXML);
        free(r.body);
        req.n_acl = 2;
        updates = f->fe.updates;
        assert_int_equal(th_ms_call(&f->x.loop, f->fe.cli, RT__METHOD__SET_ACL,
                                    &req.base, &r),
                         0);
        free(r.body);
        assert_true(f->fe.updates > updates);
        assert_int_equal(f->fe.last->n_tables, 1);
        assert_int_equal(f->fe.last->tables[0]->n_acl, 2);
        assert_string_equal(f->fe.last->tables[0]->acl[0]->id, "read");
        assert_string_equal(f->fe.last->tables[0]->acl[0]->permission, "r");
        req.name = "nosuch";
        assert_int_equal(th_ms_call(&f->x.loop, f->fe.cli, RT__METHOD__SET_ACL,
                                    &req.base, &r),
                         RT_ETABLENOTFOUND);
        free(r.body);
    }
    {
        Rt__AclReq req = RT__ACL_REQ__INIT, *resp;
        req.account = "acct";
        req.name = "people";
        assert_int_equal(th_ms_call(&f->x.loop, f->fe.cli, RT__METHOD__GET_ACL,
                                    &req.base, &r),
                         0);
        resp = rt__acl_req__unpack(NULL, r.len, r.body);
        free(r.body);
        assert_non_null(resp);
        assert_int_equal(resp->n_acl, 2);
        assert_string_equal(resp->acl[0]->expiry,
                            "2030-01-01T00:00:00.0000000Z");
        assert_true(resp->acl[0]->has_policy);
        assert_false(resp->acl[1]->has_policy);
        rt__acl_req__free_unpacked(resp, NULL);
        req.name = "nosuch";
        assert_int_equal(th_ms_call(&f->x.loop, f->fe.cli, RT__METHOD__GET_ACL,
                                    &req.base, &r),
                         RT_ETABLENOTFOUND);
        free(r.body);
    }

    /* Service properties: CORS goes into the map, sections merge. */
    {
        Rt__ServicePropsReq req = RT__SERVICE_PROPS_REQ__INIT;
        Rt__ServiceProps props = RT__SERVICE_PROPS__INIT, *got;
        Rt__CorsRules cors = RT__CORS_RULES__INIT;
        Rt__CorsRule rule = RT__CORS_RULE__INIT, *rules[1] = {&rule};
        Rt__LoggingProps log = RT__LOGGING_PROPS__INIT;
        req.account = "acct";
        assert_int_equal(
            th_ms_call(&f->x.loop, f->fe.cli, RT__METHOD__GET_SERVICE_PROPS,
                       &req.base, &r),
            0);
        got = rt__service_props__unpack(NULL, r.len, r.body);
        free(r.body);
        assert_non_null(got);
        assert_null(got->cors);
        assert_null(got->logging);
        rt__service_props__free_unpacked(got, NULL);

        rule.allowed_origins = "http://a.com";
        rule.allowed_methods = "GET";
        cors.rules = rules;
        cors.n_rules = 1;
        props.cors = &cors;
        req.props = &props;
        updates = f->fe.updates;
        assert_int_equal(
            th_ms_call(&f->x.loop, f->fe.cli, RT__METHOD__SET_SERVICE_PROPS,
                       &req.base, &r),
            0);
        free(r.body);
        assert_true(f->fe.updates > updates);
        assert_int_equal(f->fe.last->n_accounts, 1);
        assert_string_equal(f->fe.last->accounts[0]->account, "acct");
        assert_int_equal(f->fe.last->accounts[0]->n_cors, 1);
        assert_string_equal(f->fe.last->accounts[0]->cors[0]->allowed_origins,
                            "http://a.com");

        props.cors = NULL;
        log.version = "1.0";
        log.log_write = true;
        props.logging = &log;
        assert_int_equal(
            th_ms_call(&f->x.loop, f->fe.cli, RT__METHOD__SET_SERVICE_PROPS,
                       &req.base, &r),
            0);
        free(r.body);
        req.props = NULL;
        assert_int_equal(
            th_ms_call(&f->x.loop, f->fe.cli, RT__METHOD__GET_SERVICE_PROPS,
                       &req.base, &r),
            0);
        got = rt__service_props__unpack(NULL, r.len, r.body);
        free(r.body);
        assert_non_null(got->cors);
        assert_int_equal(got->cors->n_rules, 1);
        assert_non_null(got->logging);
        assert_true(got->logging->log_write);
        rt__service_props__free_unpacked(got, NULL);
    }

    /* Deleting starts the grace period: the name stays taken. */
    assert_int_equal(
        call_table(f, RT__METHOD__DELETE_TABLE, "acct", "people", NULL), 0);
    assert_int_equal(
        call_table(f, RT__METHOD__CREATE_TABLE, "acct", "People", NULL),
        RT_ETABLEBEINGDELETED);
    assert_int_equal(
        call_table(f, RT__METHOD__CREATE_TABLE, "acct2", "People", NULL), 0);
    assert_int_equal(
        call_table(f, RT__METHOD__DELETE_TABLE, "acct", "people", NULL),
        RT_ENOTFOUND);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_flows, setup, teardown),
        cmocka_unit_test_setup_teardown(test_create_with_mute_server, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_restart, setup, teardown),
        cmocka_unit_test_setup_teardown(test_register_incarnation, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_acl_props_grace, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
