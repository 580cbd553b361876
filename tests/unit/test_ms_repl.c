/* Loop test: the master with --replication-factor > 1 against fake
 * partition servers (rt_rpc clients that register with a zone, heartbeat
 * and answer ASSIGN_RANGES and DROP_TABLE): where a new table's replicas
 * go (docs/DESIGN-replication.md §8.3), what each server is assigned
 * (every range naming it, and its peers' addresses), the refusal when
 * fewer than min-insync servers are live, the status document, the split
 * of a replicated range (freeze, commit shape, assignments) and the
 * operations still refused on them, and a master restart.
 * Everything runs on one loop; "synchronous" calls turn the loop until
 * their reply. */
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
#include "ms_master.h"
#include "ms_status.h"
#include "rt.pb-c.h"
#include "rt_err.h"
#include "rt_log.h"
#include "rt_rpc.h"
#include "th_ms.h"

/* ---- Fixture ---- */

#define NPS 4
#define MAXR 8
#define MAXP 8

struct fake_ps
{
    struct rt_rpc_client *cli;
    uint64_t id;
    char addr[32];
    const char *zone;
    /* the last assignment it was given (ASSIGN_RANGES or a reply) */
    int assigns; /* ASSIGN_RANGES received */
    size_t nranges;
    uint64_t range_ids[MAXR];
    size_t nreplicas[MAXR];
    size_t npeers;
    uint64_t peer_ids[MAXP];
    char peer_addrs[MAXP][32];
    int drops;
    /* RANGE_FREEZE: received, and the answer (0: FreezeResp{freeze_lsn,
     * the request's epoch}); RANGE_THAW received */
    int freezes;
    int freeze_code;
    uint64_t freeze_lsn;
    int thaws;
};

struct fx
{
    struct th_ms_master x;
    struct fake_ps ps[NPS];
    struct rt_rpc_client *fe;
    uint32_t rf, min_insync;
};

static void record(struct fake_ps *ps,
                   Rt__Range **v,
                   size_t n,
                   Rt__Server **peers,
                   size_t np)
{
    ps->nranges = n < MAXR ? n : MAXR;
    for (size_t i = 0; i < ps->nranges; i++) {
        ps->range_ids[i] = v[i]->id;
        ps->nreplicas[i] = v[i]->n_replicas;
    }
    ps->npeers = np < MAXP ? np : MAXP;
    for (size_t i = 0; i < ps->npeers; i++) {
        ps->peer_ids[i] = peers[i]->id;
        snprintf(ps->peer_addrs[i], sizeof(ps->peer_addrs[i]), "%s",
                 peers[i]->addr);
    }
}

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
        record(ps, a->ranges, a->n_ranges, a->peers, a->n_peers);
        rt__assignment__free_unpacked(a, NULL);
        rt_rpc_reply(conn, id, method, 0, NULL, 0);
    } else if (method == RT__METHOD__DROP_TABLE) {
        ps->drops++;
        rt_rpc_reply(conn, id, method, 0, NULL, 0);
    } else if (method == RT__METHOD__RANGE_FREEZE) {
        Rt__FreezeReq *q = rt__freeze_req__unpack(NULL, len, body);
        Rt__FreezeResp resp = RT__FREEZE_RESP__INIT;
        assert_non_null(q);
        ps->freezes++;
        resp.lsn = ps->freeze_lsn;
        resp.epoch = q->epoch;
        rt__freeze_req__free_unpacked(q, NULL);
        if (ps->freeze_code) {
            rt_rpc_reply_err(conn, id, method, ps->freeze_code, NULL);
        } else {
            rt_rpc_reply_pb(conn, id, method, 0, &resp.base);
        }
    } else if (method == RT__METHOD__RANGE_THAW) {
        ps->thaws++;
        rt_rpc_reply(conn, id, method, 0, NULL, 0);
    } else {
        rt_rpc_reply_err(conn, id, method, RT_ENOTIMPL, NULL);
    }
}

static void start_master(struct fx *f)
{
    struct ms_master_config cfg = {
        .heartbeat_timeout_ms = 60000,
        .tick_ms = 50,
        .assign_timeout_ms = 500,
        .policy = "none",
        .replication_factor = f->rf,
        .min_insync = f->min_insync,
    };
    th_ms_master_start(&f->x, &cfg, true);
}

static void close_clients(struct fx *f)
{
    for (int i = 0; i < NPS; i++) {
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
    static const char *const zones[NPS] = {"z1", "z1", "z2", "z3"};
    struct fx *f = calloc(1, sizeof(*f));
    if (th_ms_master_setup(&f->x, "test_ms_repl", RT_LOG_ERROR) != 0) {
        free(f);
        return -1;
    }
    f->rf = 3;
    for (int i = 0; i < NPS; i++) {
        snprintf(f->ps[i].addr, sizeof(f->ps[i].addr), "127.0.0.1:%d",
                 7001 + i);
        f->ps[i].zone = zones[i];
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
 * registers it with its zone. */
static void ps_start(struct fx *f, int i)
{
    struct fake_ps *ps = &f->ps[i];
    Rt__RegisterResp *resp;
    ps->cli = th_ms_client_start(&f->x, ps_on_request, ps);
    resp = th_ms_ps_register(&f->x, ps->cli, ps->id, ps->addr, ps->zone);
    ps->id = resp->server_id;
    record(ps, resp->ranges, resp->n_ranges, resp->peers, resp->n_peers);
    rt__register_resp__free_unpacked(resp, NULL);
}

/* Heartbeat of fake server @i; its reply is recorded. */
static void ps_heartbeat(struct fx *f, int i)
{
    Rt__HeartbeatReq req = RT__HEARTBEAT_REQ__INIT;
    Rt__RegisterResp *resp;
    req.server_id = f->ps[i].id;
    resp = th_ms_ps_heartbeat(&f->x, f->ps[i].cli, &req);
    record(&f->ps[i], resp->ranges, resp->n_ranges, resp->peers, resp->n_peers);
    rt__register_resp__free_unpacked(resp, NULL);
}

static void fe_start(struct fx *f)
{
    f->fe = th_ms_client_start(&f->x, NULL, NULL);
}

/* CREATE_TABLE @name in "acct": the reply status; a failure's message is
 * copied to @msg (may be NULL, @msglen bytes). */
static int create_table(struct fx *f, const char *name, char *msg, size_t mlen)
{
    Rt__TableReq req = RT__TABLE_REQ__INIT;
    struct th_ms_reply r;
    int status;
    req.account = "acct";
    req.name = (char *)name;
    status =
        th_ms_call(&f->x.loop, f->fe, RT__METHOD__CREATE_TABLE, &req.base, &r);
    if (status != 0 && msg) {
        Rt__Error *e = rt__error__unpack(NULL, r.len, r.body);
        assert_non_null(e);
        snprintf(msg, mlen, "%s", e->message ? e->message : "");
        rt__error__free_unpacked(e, NULL);
    }
    free(r.body);
    return status;
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

/* The map's range packed, to compare two points in time byte for byte. */
static char *packed_ranges(struct fx *f, size_t *len)
{
    Rt__Map *map = get_map(f);
    Rt__Map only = RT__MAP__INIT;
    char *buf;
    only.n_ranges = map->n_ranges;
    only.ranges = map->ranges;
    *len = rt__map__get_packed_size(&only);
    buf = malloc(*len ? *len : 1);
    rt__map__pack(&only, (uint8_t *)buf);
    rt__map__free_unpacked(map, NULL);
    return buf;
}

/* Index of the fake server with id @id, or -1. */
static int ps_index(struct fx *f, uint64_t id)
{
    for (int i = 0; i < NPS; i++) {
        if (f->ps[i].id == id) {
            return i;
        }
    }
    return -1;
}

/* The status document's range @id (a new reference), or NULL. */
static json_t *status_range(struct fx *f, uint64_t id)
{
    char *text = ms_status_copy(f->x.st, MS_STATUS_JSON);
    json_t *root = json_loads(text, 0, NULL), *found = NULL, *o;
    size_t i;
    free(text);
    assert_non_null(root);
    json_array_foreach(json_object_get(root, "ranges"), i, o)
    {
        if ((uint64_t)json_integer_value(json_object_get(o, "id")) == id) {
            found = json_incref(o);
        }
    }
    json_decref(root);
    return found;
}

/* The status entry of range @id, waiting (5 s at most) for it: the
 * status document is rebuilt a moment after each change. */
static json_t *wait_status_range(struct fx *f, uint64_t id)
{
    json_t *o = NULL;
    /* The wait evaluates its condition once more at the end: the copy
     * taken before is dropped each time. */
    WAIT_UNTIL(f, (json_decref(o), (o = status_range(f, id)) != NULL));
    return o;
}

/* ---- Tests ---- */

/* RF 3 over four servers in zones z1, z1, z2, z3: the table's range gets
 * three copies on distinct servers in distinct zones, the least-loaded
 * (lowest id at a tie) primary; every copy is in the ISR; each of the
 * three is assigned the range (a secondary too) with the peers' addresses,
 * the fourth nothing; the front ends' map routes by the primary. */
static void test_create_places_replicas(void **state)
{
    struct fx *f = *state;
    Rt__Map *map;
    const Rt__Range *r;
    bool zone_z1 = false;
    start_master(f);
    fe_start(f);
    for (int i = 0; i < NPS; i++) {
        ps_start(f, i);
    }
    assert_int_equal(create_table(f, "people", NULL, 0), 0);
    map = get_map(f);
    assert_int_equal(map->n_ranges, 1);
    r = map->ranges[0];
    assert_int_equal(r->n_replicas, 3);
    assert_int_equal(r->rf, 3);
    assert_int_equal(r->min_insync, 2);
    assert_int_equal(r->epoch, 1);
    assert_int_equal(r->primary_epoch, 1);
    assert_int_equal(r->server_id, f->ps[0].id);
    assert_int_equal(r->replicas[0]->server_id, r->server_id);
    assert_int_equal(r->replicas[0]->role, RT__REPL_ROLE__ROLE_PRIMARY);
    assert_int_equal(r->n_isr, 3);
    for (size_t i = 0; i < 3; i++) {
        int k = ps_index(f, r->replicas[i]->server_id);
        assert_true(k >= 0);
        if (i > 0) {
            assert_int_equal(r->replicas[i]->role,
                             RT__REPL_ROLE__ROLE_SECONDARY);
        }
        assert_int_equal(r->isr[i], r->replicas[i]->server_id);
        /* z1 holds one copy only: server 1 (index 1) is left out. */
        assert_int_not_equal(k, 1);
        zone_z1 = zone_z1 || k == 0;
    }
    assert_true(zone_z1);

    /* Every replica was told at create; the secondary on z3 lists the
     * range and the addresses of all three. */
    for (int k = 0; k < NPS; k++) {
        if (k == 1) {
            continue;
        }
        WAIT_UNTIL(f, f->ps[k].assigns >= 1);
        assert_int_equal(f->ps[k].nranges, 1);
        assert_int_equal(f->ps[k].range_ids[0], r->id);
        assert_int_equal(f->ps[k].nreplicas[0], 3);
    }
    assert_int_equal(f->ps[1].assigns, 0);
    assert_int_equal(f->ps[3].npeers, 3);
    for (size_t i = 0; i < f->ps[3].npeers; i++) {
        int k = ps_index(f, f->ps[3].peer_ids[i]);
        assert_true(k == 0 || k == 2 || k == 3);
        assert_string_equal(f->ps[3].peer_addrs[i], f->ps[k].addr);
    }
    {
        json_t *o = wait_status_range(f, r->id);
        assert_false(json_is_true(json_object_get(o, "zone_violation")));
        assert_false(json_is_true(json_object_get(o, "under_replicated")));
        json_decref(o);
    }
    /* A heartbeat reply carries the same; the fourth server's is empty. */
    ps_heartbeat(f, 2);
    assert_int_equal(f->ps[2].nranges, 1);
    assert_int_equal(f->ps[2].npeers, 3);
    ps_heartbeat(f, 1);
    assert_int_equal(f->ps[1].nranges, 0);
    assert_int_equal(f->ps[1].npeers, 0);

    /* The next table goes to the less loaded servers: server 1 first. */
    assert_int_equal(create_table(f, "orders", NULL, 0), 0);
    rt__map__free_unpacked(map, NULL);
    map = get_map(f);
    assert_int_equal(map->n_ranges, 2);
    assert_int_equal(map->ranges[1]->server_id, f->ps[1].id);
    assert_int_equal(map->ranges[1]->n_replicas, 3);
    rt__map__free_unpacked(map, NULL);

    /* DELETE_TABLE drops the table on every server holding a copy. */
    {
        Rt__TableReq req = RT__TABLE_REQ__INIT;
        struct th_ms_reply rep;
        req.account = "acct";
        req.name = "people";
        assert_int_equal(th_ms_call(&f->x.loop, f->fe, RT__METHOD__DELETE_TABLE,
                                    &req.base, &rep),
                         0);
        free(rep.body);
    }
    WAIT_UNTIL(
        f, f->ps[0].drops == 1 && f->ps[2].drops == 1 && f->ps[3].drops == 1);
    assert_int_equal(f->ps[1].drops, 0);
}

/* Fewer live servers than min-insync: the create is refused with 503
 * ServerBusy saying how many are needed, and nothing is written. With as
 * many as min-insync but fewer than rf, the range runs with what exists
 * and the status marks it under-replicated. */
static void test_min_insync_refusal(void **state)
{
    struct fx *f = *state;
    char msg[128];
    size_t len0, len1;
    char *before, *after;
    Rt__Map *map;
    uint64_t v0;
    json_t *o;
    start_master(f);
    fe_start(f);
    ps_start(f, 0);
    map = get_map(f);
    v0 = map->version;
    rt__map__free_unpacked(map, NULL);
    before = packed_ranges(f, &len0);
    assert_int_equal(create_table(f, "people", msg, sizeof(msg)), RT_EBUSY);
    assert_string_equal(msg,
                        "table creation needs 2 live partition servers, 1 "
                        "is up");
    map = get_map(f);
    assert_int_equal(map->version, v0);
    assert_int_equal(map->n_tables, 0);
    assert_int_equal(map->n_ranges, 0);
    rt__map__free_unpacked(map, NULL);
    after = packed_ranges(f, &len1);
    assert_memory_equal(before, after, len0 < len1 ? len1 : len0);
    free(before);
    free(after);
    assert_int_equal(f->ps[0].assigns, 0);

    /* Two of three: created, under-replicated. */
    ps_start(f, 2);
    assert_int_equal(create_table(f, "people", NULL, 0), 0);
    map = get_map(f);
    assert_int_equal(map->n_ranges, 1);
    assert_int_equal(map->ranges[0]->n_replicas, 2);
    assert_int_equal(map->ranges[0]->rf, 3);
    o = wait_status_range(f, map->ranges[0]->id);
    rt__map__free_unpacked(map, NULL);
    assert_non_null(o);
    assert_true(json_is_true(json_object_get(o, "under_replicated")));
    assert_int_equal(json_array_size(json_object_get(o, "replicas")), 2);
    assert_string_equal(
        json_string_value(json_array_get(json_object_get(o, "roles"), 0)),
        "primary");
    assert_string_equal(
        json_string_value(json_array_get(json_object_get(o, "roles"), 1)),
        "secondary");
    assert_int_equal(json_array_size(json_object_get(o, "insync")), 2);
    assert_int_equal(json_integer_value(json_object_get(o, "primary")),
                     f->ps[0].id);
    json_decref(o);
}

/* Bad moves of a replicated range are refused before anything changed:
 * to a server already holding a copy with 409 EEXIST and the reason, to
 * an unknown server with 404; a merge of a table's only range with 400.
 * A drain of a server holding no copy changes nothing: same map, no
 * operation. */
static void test_replicated_refusals(void **state)
{
    struct fx *f = *state;
    size_t len0, len1;
    char *before, *after, *body;
    uint64_t rid;
    uint64_t secondary = 0;
    Rt__Map *map;
    start_master(f);
    fe_start(f);
    for (int i = 0; i < NPS; i++) {
        ps_start(f, i);
    }
    assert_int_equal(create_table(f, "people", NULL, 0), 0);
    map = get_map(f);
    rid = map->ranges[0]->id;
    for (size_t i = 0; i < map->ranges[0]->n_replicas; i++) {
        if (map->ranges[0]->replicas[i]->server_id !=
            map->ranges[0]->server_id) {
            secondary = map->ranges[0]->replicas[i]->server_id;
        }
    }
    assert_true(secondary != 0);
    rt__map__free_unpacked(map, NULL);
    before = packed_ranges(f, &len0);

    /* A move to a server that already holds a copy. */
    assert_int_equal(
        th_ms_admin(&f->x, MS_ADMIN_MOVE, rid, secondary, NULL, &body), 409);
    assert_non_null(strstr(body, "\"code\":\"EEXIST\""));
    assert_non_null(strstr(body, "already holds a replica"));
    free(body);
    assert_int_equal(th_ms_admin(&f->x, MS_ADMIN_MOVE, rid, 999, NULL, NULL),
                     404);
    assert_int_equal(th_ms_admin(&f->x, MS_ADMIN_MERGE, rid, 0, NULL, NULL),
                     400);
    /* A server without copies can still be drained. */
    assert_int_equal(
        th_ms_admin(&f->x, MS_ADMIN_DRAIN, 0, f->ps[1].id, NULL, NULL), 200);

    th_ms_spin(&f->x.loop, 200);
    after = packed_ranges(f, &len1);
    assert_int_equal(len0, len1);
    assert_memory_equal(before, after, len0);
    free(before);
    free(after);
    {
        char *json = ms_status_copy(f->x.st, MS_STATUS_JSON);
        assert_non_null(strstr(json, "\"ops\":[]"));
        free(json);
    }
}

/* A split of a replicated range (docs/DESIGN-replication.md §9.1): the
 * primary is asked to freeze it, then both halves are committed with the
 * parent's replica set, ISR, primary and primary generation at epoch + 1
 * under new ids, every replica is assigned both, the fourth server
 * nothing, and the front ends' map has the halves. */
static void test_replicated_split(void **state)
{
    struct fx *f = *state;
    const Rt__Range *p, *c;
    uint64_t rid, epoch, ids[2];
    char *body;
    Rt__Map *map, *m2;
    int pi;
    start_master(f);
    fe_start(f);
    for (int i = 0; i < NPS; i++) {
        ps_start(f, i);
        f->ps[i].freeze_lsn = 7;
    }
    assert_int_equal(create_table(f, "people", NULL, 0), 0);
    map = get_map(f);
    p = map->ranges[0];
    rid = p->id;
    epoch = p->epoch;
    pi = ps_index(f, p->server_id);

    assert_int_equal(th_ms_admin(&f->x, MS_ADMIN_SPLIT, rid, 0, "m", &body),
                     200);
    assert_non_null(strstr(body, "\"outcome\":\"ok\""));
    assert_non_null(strstr(body, "\"freeze\":{\"lsn\":7"));
    free(body);
    assert_int_equal(f->ps[pi].freezes, 1);
    assert_int_equal(f->ps[pi].thaws, 0);
    m2 = get_map(f);
    assert_int_equal(m2->n_ranges, 2);
    for (size_t i = 0; i < 2; i++) {
        c = m2->ranges[i];
        ids[i] = c->id;
        assert_true(c->id > rid);
        assert_string_equal(c->low, i == 0 ? "" : "m");
        assert_int_equal(c->epoch, epoch + 1);
        assert_int_equal(c->server_id, p->server_id);
        assert_int_equal(c->primary_epoch, p->primary_epoch);
        assert_int_equal(c->rf, p->rf);
        assert_int_equal(c->min_insync, p->min_insync);
        assert_int_equal(c->n_replicas, p->n_replicas);
        assert_int_equal(c->n_isr, p->n_isr);
        for (size_t k = 0; k < c->n_replicas; k++) {
            assert_int_equal(c->replicas[k]->server_id,
                             p->replicas[k]->server_id);
            assert_int_equal(c->replicas[k]->role, p->replicas[k]->role);
        }
        for (size_t k = 0; k < c->n_isr; k++) {
            assert_int_equal(c->isr[k], p->isr[k]);
        }
    }
    assert_true(m2->ranges[0]->high && strcmp(m2->ranges[0]->high, "m") == 0);
    assert_true(m2->ranges[1]->high_inf);
    /* Each replica is assigned both halves; the fourth server nothing. */
    for (int k = 0; k < NPS; k++) {
        bool member = false;
        for (size_t x = 0; x < p->n_replicas; x++) {
            member = member || p->replicas[x]->server_id == f->ps[k].id;
        }
        WAIT_UNTIL(f, !member || f->ps[k].nranges == 2);
        assert_int_equal(f->ps[k].nranges, member ? 2 : 0);
        if (member) {
            assert_true(f->ps[k].range_ids[0] == ids[0] ||
                        f->ps[k].range_ids[1] == ids[0]);
        }
    }
    rt__map__free_unpacked(m2, NULL);
    rt__map__free_unpacked(map, NULL);
}

/* A merge of the two halves of a split (docs/DESIGN-replication.md §9.2):
 * both are frozen on the primary, then one range over both with their
 * replica set at max(epochs) + 1 under a new id, assigned to every
 * replica. With one replica out of a half's ISR the merge is refused 409
 * with the reason, nothing sent. */
static void test_replicated_merge(void **state)
{
    struct fx *f = *state;
    const Rt__Range *p, *m;
    uint64_t rid;
    char *body;
    Rt__Map *map, *m2;
    int pi;
    start_master(f);
    fe_start(f);
    for (int i = 0; i < NPS; i++) {
        ps_start(f, i);
        f->ps[i].freeze_lsn = 9;
    }
    assert_int_equal(create_table(f, "people", NULL, 0), 0);
    map = get_map(f);
    p = map->ranges[0];
    rid = p->id;
    pi = ps_index(f, p->server_id);
    assert_int_equal(th_ms_admin(&f->x, MS_ADMIN_SPLIT, rid, 0, "m", NULL),
                     200);
    m2 = get_map(f);
    assert_int_equal(m2->n_ranges, 2);
    assert_int_equal(
        th_ms_admin(&f->x, MS_ADMIN_MERGE, m2->ranges[0]->id, 0, NULL, &body),
        200);
    assert_non_null(strstr(body, "\"outcome\":\"ok\""));
    free(body);
    assert_int_equal(f->ps[pi].freezes, 3);
    assert_int_equal(f->ps[pi].thaws, 0);
    rt__map__free_unpacked(m2, NULL);
    m2 = get_map(f);
    assert_int_equal(m2->n_ranges, 1);
    m = m2->ranges[0];
    assert_true(m->id > rid + 2);
    assert_string_equal(m->low, "");
    assert_true(m->high_inf);
    assert_int_equal(m->epoch, p->epoch + 2);
    assert_int_equal(m->server_id, p->server_id);
    assert_int_equal(m->primary_epoch, p->primary_epoch);
    assert_int_equal(m->n_replicas, p->n_replicas);
    assert_int_equal(m->n_isr, p->n_isr);
    for (size_t k = 0; k < m->n_replicas; k++) {
        assert_int_equal(m->replicas[k]->server_id, p->replicas[k]->server_id);
        assert_int_equal(m->replicas[k]->role, p->replicas[k]->role);
    }
    for (int k = 0; k < NPS; k++) {
        bool member = false;
        for (size_t x = 0; x < p->n_replicas; x++) {
            member = member || p->replicas[x]->server_id == f->ps[k].id;
        }
        WAIT_UNTIL(f, !member || (f->ps[k].nranges == 1 &&
                                  f->ps[k].range_ids[0] == m->id));
    }

    /* Split again, one secondary out of the left half's ISR: refused. */
    assert_int_equal(th_ms_admin(&f->x, MS_ADMIN_SPLIT, m->id, 0, "m", NULL),
                     200);
    rt__map__free_unpacked(m2, NULL);
    m2 = get_map(f);
    {
        Rt__IsrChangeReq req = RT__ISR_CHANGE_REQ__INIT;
        uint64_t rm = m2->ranges[0]->replicas[1]->server_id;
        struct th_ms_reply r;
        req.range_id = m2->ranges[0]->id;
        req.epoch = m2->ranges[0]->epoch;
        req.n_remove = 1;
        req.remove = &rm;
        assert_int_equal(th_ms_call(&f->x.loop, f->ps[pi].cli,
                                    RT__METHOD__ISR_CHANGE, &req.base, &r),
                         0);
        free(r.body);
    }
    assert_int_equal(
        th_ms_admin(&f->x, MS_ADMIN_MERGE, m2->ranges[0]->id, 0, NULL, &body),
        409);
    assert_non_null(strstr(body, "a merge needs every replica in sync"));
    free(body);
    assert_int_equal(f->ps[pi].freezes, 4);
    rt__map__free_unpacked(m2, NULL);
    rt__map__free_unpacked(map, NULL);
}

/* A split whose freeze the primary refuses (here RT_EBUSY) fails with 409,
 * is thawed, and changes nothing. */
static void test_replicated_split_refused(void **state)
{
    struct fx *f = *state;
    size_t len0, len1;
    char *before, *after, *body;
    uint64_t rid;
    Rt__Map *map;
    int pi;
    start_master(f);
    fe_start(f);
    for (int i = 0; i < NPS; i++) {
        ps_start(f, i);
        f->ps[i].freeze_code = RT_EBUSY;
    }
    assert_int_equal(create_table(f, "people", NULL, 0), 0);
    map = get_map(f);
    rid = map->ranges[0]->id;
    pi = ps_index(f, map->ranges[0]->server_id);
    rt__map__free_unpacked(map, NULL);
    before = packed_ranges(f, &len0);
    assert_int_equal(th_ms_admin(&f->x, MS_ADMIN_SPLIT, rid, 0, "m", &body),
                     409);
    assert_non_null(strstr(body, "RANGE_FREEZE"));
    free(body);
    WAIT_UNTIL(f, f->ps[pi].thaws == 1);
    after = packed_ranges(f, &len1);
    assert_int_equal(len0, len1);
    assert_memory_equal(before, after, len0);
    free(before);
    free(after);
    /* A key outside the range is refused before anything is sent. */
    assert_int_equal(th_ms_admin(&f->x, MS_ADMIN_SPLIT, rid, 0, "", NULL), 400);
    assert_int_equal(f->ps[pi].freezes, 1);
}

/* A master restart reloads the replica sets unchanged, and the servers'
 * registrations are answered with the same assignments and peers. */
static void test_restart_reloads(void **state)
{
    struct fx *f = *state;
    size_t len0, len1;
    char *before, *after;
    start_master(f);
    fe_start(f);
    for (int i = 0; i < NPS; i++) {
        ps_start(f, i);
    }
    assert_int_equal(create_table(f, "people", NULL, 0), 0);
    assert_int_equal(create_table(f, "orders", NULL, 0), 0);
    before = packed_ranges(f, &len0);
    stop_master(f);
    for (int i = 0; i < NPS; i++) {
        f->ps[i].nranges = f->ps[i].npeers = 0;
    }
    start_master(f);
    fe_start(f);
    for (int i = 0; i < NPS; i++) {
        ps_start(f, i);
    }
    after = packed_ranges(f, &len1);
    assert_int_equal(len0, len1);
    assert_memory_equal(before, after, len0);
    free(before);
    free(after);
    /* Server 3 (z3) holds a copy of both tables' ranges. */
    assert_int_equal(f->ps[3].nranges, 2);
    assert_int_equal(f->ps[3].npeers, 4);
}

/* More copies than zones: spread evenly (two in z1, one each in z2 and
 * z3) and marked as a zone violation in the status. */
static void test_zone_violation(void **state)
{
    struct fx *f = *state;
    Rt__Map *map;
    json_t *o;
    f->rf = 4;
    start_master(f);
    fe_start(f);
    for (int i = 0; i < NPS; i++) {
        ps_start(f, i);
    }
    assert_int_equal(create_table(f, "people", NULL, 0), 0);
    map = get_map(f);
    assert_int_equal(map->ranges[0]->n_replicas, 4);
    assert_int_equal(map->ranges[0]->min_insync, 2);
    o = wait_status_range(f, map->ranges[0]->id);
    rt__map__free_unpacked(map, NULL);
    assert_non_null(o);
    assert_true(json_is_true(json_object_get(o, "zone_violation")));
    assert_false(json_is_true(json_object_get(o, "under_replicated")));
    json_decref(o);
}

/* A server that registers again from another address: the servers that
 * share a replica set with it are pushed an assignment whose peers carry
 * the new address; a server sharing none is not. */
static void test_peer_address_change(void **state)
{
    struct fx *f = *state;
    int before[NPS];
    bool seen = false;
    start_master(f);
    fe_start(f);
    for (int i = 0; i < NPS; i++) {
        ps_start(f, i);
    }
    assert_int_equal(create_table(f, "people", NULL, 0), 0); /* 0, 2, 3 */
    for (int i = 0; i < NPS; i++) {
        WAIT_UNTIL(f, i == 1 || f->ps[i].assigns >= 1);
        before[i] = f->ps[i].assigns;
    }
    rt_rpc_client_close(f->ps[3].cli);
    f->ps[3].cli = NULL;
    snprintf(f->ps[3].addr, sizeof(f->ps[3].addr), "127.0.0.1:7999");
    ps_start(f, 3);
    WAIT_UNTIL(f, f->ps[0].assigns > before[0] && f->ps[2].assigns > before[2]);
    for (size_t i = 0; i < f->ps[0].npeers; i++) {
        if (f->ps[0].peer_ids[i] == f->ps[3].id) {
            assert_string_equal(f->ps[0].peer_addrs[i], "127.0.0.1:7999");
            seen = true;
        }
    }
    assert_true(seen);
    th_ms_spin(&f->x.loop, 100);
    assert_int_equal(f->ps[1].assigns, before[1]);
}

/* RF 1 (the default) is unchanged: one replica, the owner, rf and
 * min_insync 1, placed on the server with the fewest ranges. */
static void test_rf1_default(void **state)
{
    struct fx *f = *state;
    Rt__Map *map;
    f->rf = 0;
    start_master(f);
    fe_start(f);
    ps_start(f, 0);
    ps_start(f, 1);
    assert_int_equal(create_table(f, "people", NULL, 0), 0);
    assert_int_equal(create_table(f, "orders", NULL, 0), 0);
    map = get_map(f);
    assert_int_equal(map->n_ranges, 2);
    for (size_t i = 0; i < 2; i++) {
        const Rt__Range *r = map->ranges[i];
        assert_int_equal(r->server_id, f->ps[i].id);
        assert_int_equal(r->n_replicas, 1);
        assert_int_equal(r->replicas[0]->server_id, r->server_id);
        assert_int_equal(r->n_isr, 1);
        assert_int_equal(r->rf, 1);
        assert_int_equal(r->min_insync, 1);
    }
    rt__map__free_unpacked(map, NULL);
    /* Its own address is its only peer. */
    ps_heartbeat(f, 1);
    assert_int_equal(f->ps[1].nranges, 1);
    assert_int_equal(f->ps[1].npeers, 1);
    assert_string_equal(f->ps[1].peer_addrs[0], f->ps[1].addr);
}

/* A min-insync above the replication factor, or a factor out of 1..8,
 * does not start. */
static void test_bad_config(void **state)
{
    struct fx *f = *state;
    struct ms_master_config cfg = {
        .data_dir = f->x.dir,
        .listen_host = "127.0.0.1",
        .replication_factor = 2,
        .min_insync = 3,
    };
    char errmsg[RT_ERRMSG_SIZE] = "";
    struct ms_master *m = NULL;
    assert_int_equal(ms_master_start(&f->x.loop, &cfg, &m, errmsg), RT_EINVAL);
    assert_null(m);
    assert_non_null(strstr(errmsg, "min-insync"));
    cfg.replication_factor = 9;
    cfg.min_insync = 0;
    assert_int_equal(ms_master_start(&f->x.loop, &cfg, &m, errmsg), RT_EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_create_places_replicas, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_min_insync_refusal, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_replicated_refusals, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_replicated_split, setup, teardown),
        cmocka_unit_test_setup_teardown(test_replicated_split_refused, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_replicated_merge, setup, teardown),
        cmocka_unit_test_setup_teardown(test_restart_reloads, setup, teardown),
        cmocka_unit_test_setup_teardown(test_zone_violation, setup, teardown),
        cmocka_unit_test_setup_teardown(test_peer_address_change, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_rf1_default, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_config, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
