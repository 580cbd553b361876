/* fe_route against an in-process fake master and two fake partition
 * servers on one libuv loop: map subscription, table miss -> GET_MAP,
 * RT_ESTALE and RT_ENOTPRIMARY retries after their waits, retry exhaustion
 * -> RT_EBUSY, a server's RT_EBUSY answered at once, a connection lost
 * under a write (RT_ETIMEDOUT, never resent) or a read (resent), a write
 * that never left resent on a fresh connection, scans that continue
 * across ranges (docs/DESIGN.md §2, step 4), and $filter scans:
 * the filter travels to the servers, its PartitionKey bounds pick the first
 * range and stop the walk, ScanResp.done ends it, and the page time budget
 * ends a page early with a continuation. A hung server (requests held
 * unanswered) and a MAP_UPDATE pushed by the fake master that fails a range
 * over: a read in flight is resent to the new primary at once, a write in
 * flight ends RT_ETIMEDOUT and the late answer is dropped, another range's
 * requests and those to a range split in place are untouched; without a
 * map, the RPC timeout resends a read and ends a write. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <uv.h>

#include "fe_route.h"
#include "rt.pb-c.h"
#include "rt_err.h"
#include "rt_filter.h"
#include "rt_rpc.h"

/* ---- Fixture: fake master + two fake partition servers -------------- */

#define TABLE_ID 7
#define NKEYS 12

/* Ranges: ["", "g") on server 1, ["g", "p") on server 2 (empty middle
 * part "j".."p"), ["p", inf) on server 1. */
static const char *const keys[NKEYS][2] = {
    {"a", "1"}, {"a", "2"}, {"b", "1"}, {"b", "2"}, {"h", "1"}, {"h", "2"},
    {"i", "1"}, {"i", "2"}, {"q", "1"}, {"q", "2"}, {"r", "1"}, {"r", "2"},
};

struct fx
{
    uv_loop_t loop;
    struct rt_rpc_server *master;
    struct rt_rpc_server *ps[2];
    int ps_port[2];
    struct fe_route *route;
    int get_maps;
    int stale_left;   /* ENTITY_GET answers RT_ESTALE this many times */
    int always_stale; /* every entity op answers RT_ESTALE */
    int done;
    int scans[3];         /* ENTITY_SCAN requests per range (11, 12, 13) */
    int done_always;      /* every ScanResp says done */
    int never_done;       /* no ScanResp says done (an older server) */
    unsigned slow_ms;     /* ENTITY_SCAN blocks this long before replying */
    size_t value_len;     /* ScanResp values: this long (0: 16 bytes) */
    unsigned last_budget; /* budget_ms of the last ScanReq */
    int writes;           /* ENTITY_WRITE requests received */
    int drop_gets;        /* ENTITY_GET closes the connection this often */
    int gets;             /* ENTITY_GET requests received */
    uint64_t get_at[8];   /* loop time of each ENTITY_GET received */
    int notprimary_left;  /* ENTITY_GET answers RT_ENOTPRIMARY this often */
    int busy_left;        /* ENTITY_GET answers RT_EBUSY this often */
    int write_ok;         /* ENTITY_WRITE succeeds instead of dying */
    int write_np_left;    /* ... after answering RT_ENOTPRIMARY this often */
    /* The next ENTITY_GET submits this job to the route, then closes its
     * connection unanswered. */
    struct fe_job *hook;
    /* A hung server: ENTITY_GET and ENTITY_WRITE at epoch 1 on the ranges
     * in hang_mask (bit range_id - 11) are held unanswered, at most
     * hold_left of them. */
    unsigned hang_mask;
    int hold_left;
    int nheld;
    struct held
    {
        struct rt_rpc_conn *conn;
        uint64_t id;
        uint32_t method;
        uint64_t range_id;
    } held[4];
    /* Range 12 on server 1 at epoch 2 (the master failed it over). */
    int moved;
    int rf1; /* range 12 has no replica set (RF 1: a move, not a failover) */
    /* Range 11 split in place at "b": ["", "b") stays 11, ["b", "g") is
     * 14, both on server 1 at epoch 2. */
    int split;
    int pushes; /* MAP_UPDATEs pushed */
    int push_acks;
    struct rt_rpc_conn *fe_conn; /* the route's master connection */
    /* A second master (test_follows_leader): a follower naming the
     * fixture's master as leader, until follower_leads. */
    struct rt_rpc_server *follower;
    char master_addr[32], follower_addr[32];
    int follower_leads;  /* the second master acts, the first follows */
    int follower_hellos; /* FE_HELLO answered by the second master */
    int follower_lists;  /* LIST_TABLES answered by it once it leads */
    int not_leader;      /* RT_ENOTLEADER answers, both masters */
};

static struct fx *g_fx;

static void put_map(struct fx *f,
                    struct rt_rpc_conn *conn,
                    uint64_t id,
                    uint32_t method);

static void master_req(struct rt_rpc_conn *conn,
                       uint32_t method,
                       uint64_t id,
                       const uint8_t *body,
                       size_t len,
                       void *ud)
{
    struct fx *f = ud;
    (void)body;
    (void)len;
    if (f->follower_leads) {
        Rt__NotLeader hint = RT__NOT_LEADER__INIT;
        hint.leader_rpc_addr = f->follower_addr;
        f->not_leader++;
        rt_rpc_reply_notleader(conn, id, method, &hint);
        return;
    }
    if (method != RT__METHOD__FE_HELLO && method != RT__METHOD__GET_MAP) {
        rt_rpc_reply_err(conn, id, method, RT_ENOTIMPL, "fake");
        return;
    }
    if (method == RT__METHOD__GET_MAP) {
        f->get_maps++;
    } else {
        f->fe_conn = conn;
    }
    put_map(f, conn, id, method);
}

static void push_acked(int status, const uint8_t *body, size_t len, void *arg)
{
    struct fx *f = arg;
    (void)body;
    (void)len;
    assert_int_equal(status, 0);
    f->push_acks++;
}

/* Replies to request @id with the current map, or pushes it as a
 * MAP_UPDATE when @id is 0. */
static void put_map(struct fx *f,
                    struct rt_rpc_conn *conn,
                    uint64_t id,
                    uint32_t method)
{
    Rt__Map map = RT__MAP__INIT;
    Rt__Server s[2] = {RT__SERVER__INIT, RT__SERVER__INIT};
    Rt__Server *sp[2] = {&s[0], &s[1]};
    Rt__Range rg[4] = {RT__RANGE__INIT, RT__RANGE__INIT, RT__RANGE__INIT,
                       RT__RANGE__INIT};
    Rt__Range *rp[4] = {&rg[0], &rg[1], &rg[2], &rg[3]};
    Rt__Table t = RT__TABLE__INIT;
    Rt__Table *tp = &t;
    char addr[2][32];
    for (int i = 0; i < 2; i++) {
        snprintf(addr[i], sizeof(addr[i]), "127.0.0.1:%d", f->ps_port[i]);
        s[i].id = (uint64_t)i + 1;
        s[i].addr = addr[i];
        s[i].state = 1;
    }
    /* Ranges deliberately listed out of order: the FE sorts them. */
    rg[0].id = 12, rg[0].table_id = TABLE_ID, rg[0].low = "g", rg[0].high = "p",
    rg[0].server_id = f->moved ? 1 : 2, rg[0].epoch = f->moved ? 2 : 1;
    /* Range 12 has two replicas (servers 1 and 2) unless the test says
     * it is RF 1 (@rf1): a failover, or a move of an RF-1 range. */
    Rt__Replica rep[2] = {RT__REPLICA__INIT, RT__REPLICA__INIT};
    Rt__Replica *repp[2] = {&rep[0], &rep[1]};
    rep[0].server_id = rg[0].server_id;
    rep[0].role = RT__REPL_ROLE__ROLE_PRIMARY;
    rep[1].server_id = rg[0].server_id == 1 ? 2 : 1;
    rep[1].role = RT__REPL_ROLE__ROLE_SECONDARY;
    if (!f->rf1) {
        rg[0].n_replicas = 2;
        rg[0].replicas = repp;
    }
    rg[1].id = 11, rg[1].table_id = TABLE_ID, rg[1].low = "", rg[1].high = "g",
    rg[1].server_id = 1, rg[1].epoch = 1;
    rg[2].id = 13, rg[2].table_id = TABLE_ID, rg[2].low = "p",
    rg[2].high_inf = 1, rg[2].server_id = 1, rg[2].epoch = 1;
    if (f->split) {
        rg[1].high = "b", rg[1].epoch = 2;
        rg[3].id = 14, rg[3].table_id = TABLE_ID, rg[3].low = "b",
        rg[3].high = "g", rg[3].server_id = 1, rg[3].epoch = 2;
    }
    t.account = "acct";
    t.name = "People";
    t.id = TABLE_ID;
    map.version = 1 + (uint64_t)f->get_maps + (uint64_t)f->pushes;
    map.n_servers = 2;
    map.servers = sp;
    map.n_ranges = f->split ? 4 : 3;
    map.ranges = rp;
    map.n_tables = 1;
    map.tables = &tp;
    if (id == 0) {
        assert_int_equal(rt_rpc_call_pb(conn, RT__METHOD__MAP_UPDATE, &map.base,
                                        0, push_acked, f),
                         0);
        return;
    }
    rt_rpc_reply_pb(conn, id, method, 0, &map.base);
}

/* The master fails range 12 over from server 2 to server 1 (@moved) or
 * splits range 11 and pushes the map to the front end. */
static void push_map(struct fx *f, int moved, int split)
{
    f->moved = moved;
    f->split = split;
    f->pushes++;
    assert_non_null(f->fe_conn);
    put_map(f, f->fe_conn, 0, RT__METHOD__MAP_UPDATE);
}

/* Holds request @id when the fixture plays a hung server for its range
 * (see struct fx); returns 1 if held. */
static int hold(struct fx *f,
                struct rt_rpc_conn *conn,
                uint64_t id,
                uint32_t method,
                const Rt__RangeRef *ref)
{
    struct held *h;
    if (!ref || ref->epoch != 1 || ref->range_id < 11 ||
        !(f->hang_mask & (1u << (ref->range_id - 11))) || f->hold_left <= 0 ||
        f->nheld == 4) {
        return 0;
    }
    f->hold_left--;
    h = &f->held[f->nheld++];
    h->conn = conn;
    h->id = id;
    h->method = method;
    h->range_id = ref->range_id;
    rt_rpc_conn_ref(conn);
    return 1;
}

/* The hung server wakes up and answers held request @i with a success. */
static void answer_held(struct fx *f, int i)
{
    struct held *h = &f->held[i];
    if (h->method == RT__METHOD__ENTITY_GET) {
        Rt__GetResp resp = RT__GET_RESP__INIT;
        uint8_t value[16] = {2};
        resp.value.data = value;
        resp.value.len = sizeof(value);
        rt_rpc_reply_pb(h->conn, h->id, h->method, 0, &resp.base);
    } else {
        Rt__WriteResp resp = RT__WRITE_RESP__INIT;
        Rt__OpResult res = RT__OP_RESULT__INIT;
        Rt__OpResult *rp = &res;
        res.ticks = 2;
        resp.n_results = 1;
        resp.results = &rp;
        rt_rpc_reply_pb(h->conn, h->id, h->method, 0, &resp.base);
    }
    rt_rpc_conn_unref(h->conn);
    h->conn = NULL;
}

static int key_cmp(const char *pk1,
                   const char *rk1,
                   const char *pk2,
                   const char *rk2)
{
    int c = strcmp(pk1, pk2);
    return c ? c : strcmp(rk1, rk2);
}

/* Byte @k of the value of keys[@i] when fx.value_len is set. */
static uint8_t scan_value_byte(int i, size_t k)
{
    return (uint8_t)(k * 7 + (size_t)i * 31 + k / 251);
}

static void ps_scan(struct rt_rpc_conn *conn, uint64_t id, Rt__ScanReq *req)
{
    Rt__ScanResp resp = RT__SCAN_RESP__INIT;
    Rt__EntityRec recs[NKEYS];
    Rt__EntityRec *rp[NKEYS];
    uint8_t small[16] = {1};
    uint8_t *values[NKEYS] = {0};
    const char *low = req->route->range_id == 11   ? ""
                      : req->route->range_id == 12 ? "g"
                                                   : "p";
    const char *high = req->route->range_id == 11   ? "g"
                       : req->route->range_id == 12 ? "p"
                                                    : NULL;
    size_t n = 0;
    struct rt_filter *flt = NULL;
    struct rt_filter_bounds fb;
    struct fx *f = g_fx;
    f->scans[req->route->range_id - 11]++;
    f->last_budget = req->budget_ms;
    if (f->slow_ms) {
        uv_sleep(f->slow_ms);
    }
    if (req->filter.len) {
        assert_int_equal(
            rt_filter_decode(req->filter.data, req->filter.len, &flt), 0);
    }
    rt_filter_bounds(flt, &fb);
    for (int i = 0; i < NKEYS; i++) {
        const char *pk = keys[i][0], *rk = keys[i][1];
        if (strcmp(pk, low) < 0 || (high && strcmp(pk, high) >= 0)) {
            continue;
        }
        if (req->has_start &&
            key_cmp(pk, rk, req->start_pk, req->start_rk) < 0) {
            continue;
        }
        if (flt && rt_filter_eval(flt, pk, strlen(pk), rk, strlen(rk), 0, NULL,
                                  0) != 1) {
            continue;
        }
        if (n == req->limit) {
            resp.more = 1;
            resp.next_pk = (char *)pk;
            resp.next_rk = (char *)rk;
            break;
        }
        Rt__EntityRec init = RT__ENTITY_REC__INIT;
        recs[n] = init;
        recs[n].pk = (char *)pk;
        recs[n].rk = (char *)rk;
        if (f->value_len) {
            values[n] = malloc(f->value_len);
            for (size_t k = 0; k < f->value_len; k++) {
                values[n][k] = scan_value_byte(i, k);
            }
            recs[n].value.data = values[n];
            recs[n].value.len = f->value_len;
        } else {
            recs[n].value.data = small;
            recs[n].value.len = sizeof(small);
        }
        rp[n] = &recs[n];
        n++;
    }
    resp.n_entities = n;
    resp.entities = rp;
    /* Like the real server: done when the filter's upper PartitionKey
     * bound ends the scan inside this range. */
    if (!resp.more && !f->never_done &&
        (f->done_always ||
         (fb.pk_hi.set &&
          (!high || strncmp(fb.pk_hi.s, high, fb.pk_hi.n) < 0)))) {
        resp.done = 1;
    }
    rt_rpc_reply_pb(conn, id, RT__METHOD__ENTITY_SCAN, 0, &resp.base);
    rt_filter_free(flt);
    for (size_t k = 0; k < n; k++) {
        free(values[k]);
    }
}

static void ps_req(struct rt_rpc_conn *conn,
                   uint32_t method,
                   uint64_t id,
                   const uint8_t *body,
                   size_t len,
                   void *ud)
{
    struct fx *f = ud;
    if (f->always_stale) {
        rt_rpc_reply_err(conn, id, method, RT_ESTALE, "stale");
        return;
    }
    if (method == RT__METHOD__ENTITY_SCAN) {
        Rt__ScanReq *req = rt__scan_req__unpack(NULL, len, body);
        assert_non_null(req);
        assert_int_equal(req->route->table_id, TABLE_ID);
        ps_scan(conn, id, req);
        rt__scan_req__free_unpacked(req, NULL);
    } else if (method == RT__METHOD__ENTITY_WRITE && f->write_ok) {
        Rt__WriteReq *req = rt__write_req__unpack(NULL, len, body);
        Rt__WriteResp resp = RT__WRITE_RESP__INIT;
        Rt__OpResult res[4];
        Rt__OpResult *rp[4];
        assert_non_null(req);
        assert_true(req->n_ops <= 4);
        f->writes++;
        if (hold(f, conn, id, method, req->route)) {
            rt__write_req__free_unpacked(req, NULL);
            return;
        }
        if (f->write_np_left > 0) {
            f->write_np_left--;
            rt_rpc_reply_err(conn, id, method, RT_ENOTPRIMARY, "secondary");
            rt__write_req__free_unpacked(req, NULL);
            return;
        }
        for (size_t i = 0; i < req->n_ops; i++) {
            Rt__OpResult init = RT__OP_RESULT__INIT;
            res[i] = init;
            res[i].ticks = 1;
            rp[i] = &res[i];
        }
        resp.n_results = req->n_ops;
        resp.results = rp;
        rt_rpc_reply_pb(conn, id, method, 0, &resp.base);
        rt__write_req__free_unpacked(req, NULL);
    } else if (method == RT__METHOD__ENTITY_WRITE) {
        /* Received (as if committed), then the server dies unanswered. */
        f->writes++;
        rt_rpc_conn_close(conn);
    } else if (method == RT__METHOD__ENTITY_GET) {
        Rt__GetResp resp = RT__GET_RESP__INIT;
        uint8_t value[16] = {1};
        if (f->gets < 8) {
            f->get_at[f->gets] = uv_now(&f->loop);
        }
        f->gets++;
        if (f->hang_mask) {
            Rt__GetReq *req = rt__get_req__unpack(NULL, len, body);
            int held;
            assert_non_null(req);
            held = hold(f, conn, id, method, req->route);
            rt__get_req__free_unpacked(req, NULL);
            if (held) {
                return;
            }
        }
        if (f->hook) {
            struct fe_job *job = f->hook;
            f->hook = NULL;
            fe_route_submit(f->route, job);
            rt_rpc_conn_close(conn);
            return;
        }
        if (f->notprimary_left > 0) {
            f->notprimary_left--;
            rt_rpc_reply_err(conn, id, method, RT_ENOTPRIMARY, "secondary");
            return;
        }
        if (f->busy_left > 0) {
            f->busy_left--;
            rt_rpc_reply_err(conn, id, method, RT_EBUSY, "overloaded");
            return;
        }
        if (f->drop_gets > 0) {
            f->drop_gets--;
            rt_rpc_conn_close(conn);
            return;
        }
        if (f->stale_left > 0) {
            f->stale_left--;
            rt_rpc_reply_err(conn, id, method, RT_ESTALE, "stale");
            return;
        }
        resp.value.data = value;
        resp.value.len = sizeof(value);
        rt_rpc_reply_pb(conn, id, method, 0, &resp.base);
    } else {
        rt_rpc_reply_err(conn, id, method, RT_ENOTIMPL, "fake");
    }
}

static int setup(void **state)
{
    struct fx *f = calloc(1, sizeof(*f));
    char addr[32];
    assert_int_equal(uv_loop_init(&f->loop), 0);
    for (int i = 0; i < 2; i++) {
        assert_int_equal(rt_rpc_server_start(&f->loop, "127.0.0.1", 0, ps_req,
                                             NULL, f, &f->ps[i]),
                         0);
        f->ps_port[i] = rt_rpc_server_port(f->ps[i]);
    }
    assert_int_equal(rt_rpc_server_start(&f->loop, "127.0.0.1", 0, master_req,
                                         NULL, f, &f->master),
                     0);
    snprintf(addr, sizeof(addr), "127.0.0.1:%d", rt_rpc_server_port(f->master));
    snprintf(f->master_addr, sizeof(f->master_addr), "%s", addr);
    assert_int_equal(fe_route_create(&f->loop, addr, &f->route), 0);
    /* Wait for the FE_HELLO map. */
    for (int i = 0; i < 2000 && fe_route_map_version(f->route) == 0; i++) {
        uv_run(&f->loop, UV_RUN_NOWAIT);
        uv_sleep(1);
    }
    assert_true(fe_route_map_version(f->route) > 0);
    g_fx = f;
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fx *f = *state;
    for (int i = 0; i < f->nheld; i++) {
        if (f->held[i].conn) {
            rt_rpc_conn_unref(f->held[i].conn);
        }
    }
    fe_route_close(f->route);
    rt_rpc_server_close(f->master);
    for (int i = 0; i < 2; i++) {
        if (f->ps[i]) {
            rt_rpc_server_close(f->ps[i]);
        }
    }
    uv_run(&f->loop, UV_RUN_DEFAULT);
    fe_route_destroy(f->route);
    assert_int_equal(uv_loop_close(&f->loop), 0);
    free(f);
    return 0;
}

/* ---- Helpers -------------------------------------------------------- */

static void job_done(struct fe_job *job)
{
    struct fx *f = job->data;
    f->done++;
}

/* Submits @job and runs the loop until it finished. */
static void run_job(struct fx *f, struct fe_job *job)
{
    int before = f->done;
    job->done_cb = job_done;
    job->data = f;
    fe_route_submit(f->route, job);
    for (int i = 0; i < 5000 && f->done == before; i++) {
        uv_run(&f->loop, UV_RUN_ONCE);
    }
    assert_int_equal(f->done, before + 1);
}

/* Submits @job without waiting (see wait_jobs). */
static void submit_job(struct fx *f, struct fe_job *job)
{
    job->done_cb = job_done;
    job->data = f;
    fe_route_submit(f->route, job);
}

/* Runs the loop until @n more jobs than @before finished. */
static void wait_jobs(struct fx *f, int before, int n)
{
    for (int i = 0; i < 5000 && f->done < before + n; i++) {
        uv_run(&f->loop, UV_RUN_ONCE);
    }
    assert_int_equal(f->done, before + n);
}

/* A point read of @pk in the test table (caller frees). */
static void get_job(struct fe_job *job, const char *pk)
{
    fe_job_init(job, FE_JOB_GET);
    job->account = "acct";
    job->table = "people";
    job->pk = pk;
    job->rk = "1";
}

/* Pages through the table with page size @limit; returns the count and
 * checks the order. */
static size_t scan_all(struct fx *f, unsigned limit, int *pages)
{
    struct rt_buf npk = RT_BUF_INIT, nrk = RT_BUF_INIT;
    int has = 0;
    size_t total = 0;
    *pages = 0;
    for (;;) {
        struct fe_job job;
        fe_job_init(&job, FE_JOB_SCAN);
        job.account = "acct";
        job.table = "people"; /* any case */
        job.limit = limit;
        if (has) {
            job.has_start = 1;
            job.pk = rt_buf_cstr(&npk);
            job.rk = rt_buf_cstr(&nrk);
        }
        run_job(f, &job);
        assert_int_equal(job.status, 0);
        assert_string_equal(job.table_name, "People");
        assert_true(job.nents <= limit);
        for (size_t i = 0; i < job.nents; i++) {
            assert_true(total + i < NKEYS);
            assert_string_equal(job.ents[i].pk, keys[total + i][0]);
            assert_string_equal(job.ents[i].rk, keys[total + i][1]);
            if (f->value_len) {
                assert_int_equal(job.ents[i].vlen, f->value_len);
                for (size_t k = 0; k < f->value_len; k++) {
                    assert_int_equal(job.ents[i].value[k],
                                     scan_value_byte((int)(total + i), k));
                }
            }
        }
        total += job.nents;
        (*pages)++;
        has = job.has_next;
        rt_buf_reset(&npk);
        rt_buf_reset(&nrk);
        if (has) {
            rt_buf_append(&npk, job.next_pk.data, job.next_pk.len);
            rt_buf_append(&nrk, job.next_rk.data, job.next_rk.len);
        }
        fe_job_free(&job);
        if (!has) {
            break;
        }
        assert_true(*pages < 50);
    }
    rt_buf_free(&npk);
    rt_buf_free(&nrk);
    return total;
}

/* ---- Tests ---------------------------------------------------------- */

/* One page crosses all three ranges (and their two servers) in key order
 * with no continuation. */
static void test_scan_one_page(void **state)
{
    int pages;
    assert_int_equal(scan_all(*state, 1000, &pages), NKEYS);
    assert_int_equal(pages, 1);
}

/* Small pages: continuation tokens inside a range (server's next key) and
 * at range boundaries (next range's low key) together return every entity
 * exactly once. */
static void test_scan_paged(void **state)
{
    int pages;
    for (unsigned limit = 1; limit <= 6; limit++) {
        assert_int_equal(scan_all(*state, limit, &pages), NKEYS);
        assert_true(pages >= (int)((NKEYS + limit - 1) / limit));
    }
}

/* Replies far larger than the decoding arena's first block (several
 * blocks, then one block as large as all of them), then small ones again:
 * every value arrives whole, never a byte of an earlier reply. */
static void test_scan_large_values(void **state)
{
    struct fx *f = *state;
    int pages;
    f->value_len = 40000;
    assert_int_equal(scan_all(f, 1000, &pages), NKEYS);
    assert_int_equal(scan_all(f, 3, &pages), NKEYS);
    f->value_len = 300;
    assert_int_equal(scan_all(f, 1000, &pages), NKEYS);
    f->value_len = 0;
    assert_int_equal(scan_all(f, 1000, &pages), NKEYS);
}

/* A table missing from the map costs one GET_MAP, then TableNotFound. */
static void test_table_missing(void **state)
{
    struct fx *f = *state;
    struct fe_job job;
    int before = f->get_maps;
    fe_job_init(&job, FE_JOB_GET);
    job.account = "acct";
    job.table = "nosuch";
    job.pk = "a";
    job.rk = "1";
    run_job(f, &job);
    assert_int_equal(job.status, RT_ETABLENOTFOUND);
    assert_int_equal(f->get_maps, before + 1);
    fe_job_free(&job);

    fe_job_init(&job, FE_JOB_GET_TABLE);
    job.account = "otheracct";
    job.table = "People";
    run_job(f, &job);
    assert_int_equal(job.status, RT_ENOTFOUND);
    fe_job_free(&job);

    fe_job_init(&job, FE_JOB_GET_TABLE);
    job.account = "acct";
    job.table = "PEOPLE";
    run_job(f, &job);
    assert_int_equal(job.status, 0);
    assert_string_equal(job.table_name, "People");
    assert_int_equal(job.table_id, TABLE_ID);
    fe_job_free(&job);
}

/* RT_ESTALE refreshes the map and retries; the op then succeeds. */
static void test_stale_retry(void **state)
{
    struct fx *f = *state;
    struct fe_job job;
    int before = f->get_maps;
    f->stale_left = 2;
    fe_job_init(&job, FE_JOB_GET);
    job.account = "acct";
    job.table = "people";
    job.pk = "h";
    job.rk = "1";
    run_job(f, &job);
    assert_int_equal(job.status, 0);
    assert_int_equal(job.value.len, 16);
    assert_int_equal(f->get_maps, before + 2);
    fe_job_free(&job);
}

/* Three stale answers in a row give up with RT_EBUSY (503 ServerBusy). */
static void test_stale_gives_up(void **state)
{
    struct fx *f = *state;
    struct fe_job job;
    f->always_stale = 1;
    fe_job_init(&job, FE_JOB_SCAN);
    job.account = "acct";
    job.table = "people";
    run_job(f, &job);
    assert_int_equal(job.status, RT_EBUSY);
    fe_job_free(&job);
    f->always_stale = 0;
}

/* RT_ENOTPRIMARY (the server holds the range but is not its serving
 * primary) refreshes the map and retries like RT_ESTALE: the second try
 * comes at least FE_ROUTE_WAIT1_MS after the first, the third at least
 * FE_ROUTE_WAIT2_MS after the second, and the read then succeeds. */
static void test_notprimary_retry_waits(void **state)
{
    struct fx *f = *state;
    struct fe_job job;
    int before = f->get_maps;
    f->notprimary_left = 2;
    get_job(&job, "h");
    run_job(f, &job);
    assert_int_equal(job.status, 0);
    assert_int_equal(job.value.len, 16);
    assert_int_equal(f->gets, 3);
    assert_int_equal(f->get_maps, before + 2);
    assert_true(f->get_at[1] - f->get_at[0] >= FE_ROUTE_WAIT1_MS);
    assert_true(f->get_at[2] - f->get_at[1] >= FE_ROUTE_WAIT2_MS);
    fe_job_free(&job);
}

/* Three RT_ENOTPRIMARY answers: after both waits, RT_EBUSY (503
 * ServerBusy, nothing executed), three sends in all. */
static void test_notprimary_gives_up(void **state)
{
    struct fx *f = *state;
    struct fe_job job;
    f->notprimary_left = 3;
    get_job(&job, "h");
    run_job(f, &job);
    assert_int_equal(job.status, RT_EBUSY);
    assert_int_equal(f->gets, 3);
    assert_true(f->get_at[2] - f->get_at[0] >=
                FE_ROUTE_WAIT1_MS + FE_ROUTE_WAIT2_MS);
    assert_int_equal(f->notprimary_left, 0);
    fe_job_free(&job);
}

/* A write refused with RT_ENOTPRIMARY was not executed, so unlike one
 * whose connection dropped it is sent again, and succeeds. */
static void test_notprimary_write_retried(void **state)
{
    struct fx *f = *state;
    struct fe_job job;
    f->write_ok = 1;
    f->write_np_left = 2;
    fe_job_init(&job, FE_JOB_WRITE);
    job.account = "acct";
    job.table = "people";
    fe_job_add_op(&job, RT__OP_KIND__OP_INSERT, "h", "9");
    run_job(f, &job);
    assert_int_equal(job.status, 0);
    assert_int_equal(job.ops[0].ticks, 1);
    assert_int_equal(f->writes, 3);
    fe_job_free(&job);
}

/* A server's RT_EBUSY is answered at once (503 ServerBusy, which the SDK
 * retries after its own back-off): the front end does not send it again. */
static void test_busy_not_retried(void **state)
{
    struct fx *f = *state;
    struct fe_job job;
    f->busy_left = 1;
    get_job(&job, "h");
    run_job(f, &job);
    assert_int_equal(job.status, RT_EBUSY);
    assert_int_equal(f->gets, 1);
    fe_job_free(&job);
}

/* The connection to a server drops while a large write (W) is still being
 * written and another write (B) waits behind it: W may have reached the
 * server, so it is RT_ETIMEDOUT and never resent; B never left, so it is
 * sent again on the next connection and succeeds; the read that was sent
 * with W is resent too. The server sees B exactly once. */
static void test_unsent_write_resent(void **state)
{
    struct fx *f = *state;
    struct fe_job a, w, b;
    struct fe_job_op *op;
    int before = f->done;
    f->write_ok = 1;
    get_job(&a, "a");
    fe_job_init(&w, FE_JOB_WRITE);
    w.account = "acct";
    w.table = "people";
    op = fe_job_add_op(&w, RT__OP_KIND__OP_INSERT, "a", "big");
    /* Far more than loopback socket buffers hold: the write stays in
     * flight while the server reads the GET ahead of it. */
    for (int i = 0; i < 24 * 1024; i++) {
        static const uint8_t kib[1024];
        rt_buf_append(&op->props, kib, sizeof(kib));
    }
    fe_job_init(&b, FE_JOB_WRITE);
    b.account = "acct";
    b.table = "people";
    fe_job_add_op(&b, RT__OP_KIND__OP_INSERT, "b", "small");
    b.done_cb = job_done;
    b.data = f;
    f->hook = &b; /* submitted by the server when the GET arrives */
    submit_job(f, &a);
    submit_job(f, &w);
    wait_jobs(f, before, 3);
    assert_null(f->hook);
    assert_int_equal(w.status, RT_ETIMEDOUT);
    assert_int_equal(b.status, 0);
    assert_int_equal(b.ops[0].ticks, 1);
    assert_int_equal(a.status, 0);
    assert_int_equal(f->gets, 2);
    assert_int_equal(f->writes, 1);
    fe_job_free(&a);
    fe_job_free(&w);
    fe_job_free(&b);
}

/* A server that does not accept connections: each try waits for the
 * connection, then the job gives up with RT_EBUSY; the other server's
 * ranges keep working. */
static void test_server_down(void **state)
{
    struct fx *f = *state;
    struct fe_job job;
    uint64_t t0;
    rt_rpc_server_close(f->ps[1]);
    f->ps[1] = NULL;
    fe_job_init(&job, FE_JOB_GET);
    job.account = "acct";
    job.table = "people";
    job.pk = "a";
    job.rk = "1";
    run_job(f, &job);
    assert_int_equal(job.status, 0);
    fe_job_free(&job);
    t0 = uv_now(&f->loop);
    fe_job_init(&job, FE_JOB_GET);
    job.account = "acct";
    job.table = "people";
    job.pk = "h";
    job.rk = "1";
    run_job(f, &job);
    assert_int_equal(job.status, RT_EBUSY);
    assert_true(uv_now(&f->loop) - t0 >= FE_ROUTE_CONNECT_WAIT_MS);
    fe_job_free(&job);
}

/* A write whose connection drops after the server received it has an
 * unknown outcome: RT_ETIMEDOUT (500 OperationTimedOut), sent only once. */
static void test_write_conn_lost_is_unknown(void **state)
{
    struct fx *f = *state;
    struct fe_job job;
    fe_job_init(&job, FE_JOB_WRITE);
    job.account = "acct";
    job.table = "people";
    fe_job_add_op(&job, RT__OP_KIND__OP_INSERT, "a", "9");
    run_job(f, &job);
    assert_int_equal(job.status, RT_ETIMEDOUT);
    assert_int_equal(f->writes, 1);
    fe_job_free(&job);
}

/* A read whose connection drops is sent again and succeeds. */
static void test_get_conn_lost_retried(void **state)
{
    struct fx *f = *state;
    struct fe_job job;
    f->drop_gets = 1;
    fe_job_init(&job, FE_JOB_GET);
    job.account = "acct";
    job.table = "people";
    job.pk = "a";
    job.rk = "1";
    run_job(f, &job);
    assert_int_equal(job.status, 0);
    assert_int_equal(f->gets, 2);
    fe_job_free(&job);
}

/* Runs the loop until the hung server holds @n requests. */
static void run_until_held(struct fx *f, int n)
{
    for (int i = 0; i < 5000 && f->nheld < n; i++) {
        uv_run(&f->loop, UV_RUN_NOWAIT);
        uv_sleep(1);
    }
    assert_int_equal(f->nheld, n);
}

/* Runs the loop for about @ms milliseconds. */
static void run_for(struct fx *f, unsigned ms)
{
    for (unsigned i = 0; i < ms; i++) {
        uv_run(&f->loop, UV_RUN_NOWAIT);
        uv_sleep(1);
    }
}

/* A read in flight to a primary that never answers (stopped, cut off) is
 * sent to the new primary as soon as the master's map names it, long
 * before the RPC timeout, and succeeds there. */
static void test_moved_read_resent(void **state)
{
    struct fx *f = *state;
    struct fe_job job;
    uint64_t t0;
    int before = f->done;
    f->hang_mask = 1u << 1; /* range 12, on server 2 */
    f->hold_left = 4;
    get_job(&job, "h");
    submit_job(f, &job);
    run_until_held(f, 1);
    t0 = uv_now(&f->loop);
    push_map(f, 1, 0);
    wait_jobs(f, before, 1);
    assert_int_equal(job.status, 0);
    assert_int_equal(job.value.len, 16);
    assert_int_equal(job.value.data[0], 1); /* the new primary's answer */
    assert_int_equal(f->gets, 2);
    assert_true(uv_now(&f->loop) - t0 < FE_ROUTE_WAIT1_MS);
    fe_job_free(&job);
}

/* A write in flight to a replaced primary has an unknown outcome: it ends
 * RT_ETIMEDOUT (500 OperationTimedOut) at the map update, is never sent to
 * the new primary, and the old primary's late success changes nothing. */
static void test_moved_write_unknown(void **state)
{
    struct fx *f = *state;
    struct fe_job job;
    int before = f->done;
    f->write_ok = 1;
    f->hang_mask = 1u << 1;
    f->hold_left = 4;
    fe_job_init(&job, FE_JOB_WRITE);
    job.account = "acct";
    job.table = "people";
    fe_job_add_op(&job, RT__OP_KIND__OP_INSERT, "h", "9");
    submit_job(f, &job);
    run_until_held(f, 1);
    push_map(f, 1, 0);
    wait_jobs(f, before, 1);
    assert_int_equal(job.status, RT_ETIMEDOUT);
    assert_int_equal(f->writes, 1);
    answer_held(f, 0);
    run_for(f, 100);
    assert_int_equal(f->done, before + 1);
    assert_int_equal(job.status, RT_ETIMEDOUT);
    assert_int_equal(job.ops[0].ticks, 0);
    assert_int_equal(f->writes, 1);
    assert_int_equal(f->push_acks, 1);
    fe_job_free(&job);
}

/* An RF-1 range that moves keeps its old server answering (the move froze
 * it): a write in flight there is not given up at the map update, and the
 * client gets the server's real answer. */
static void test_moved_rf1_write_answered(void **state)
{
    struct fx *f = *state;
    struct fe_job job;
    int before = f->done;
    f->rf1 = 1;
    f->write_ok = 1;
    f->hang_mask = 1u << 1;
    f->hold_left = 4;
    fe_job_init(&job, FE_JOB_WRITE);
    job.account = "acct";
    job.table = "people";
    fe_job_add_op(&job, RT__OP_KIND__OP_INSERT, "h", "9");
    submit_job(f, &job);
    run_until_held(f, 1);
    push_map(f, 1, 0);
    run_for(f, 100);
    assert_int_equal(f->done, before);
    answer_held(f, 0);
    wait_jobs(f, before, 1);
    assert_int_equal(job.status, 0);
    assert_int_equal(f->writes, 1);
    fe_job_free(&job);
}

/* The map update moves range 12 only: a read in flight on range 11 (its
 * server unchanged) keeps waiting for its own server's answer. */
static void test_moved_other_range_untouched(void **state)
{
    struct fx *f = *state;
    struct fe_job a, h;
    int before = f->done;
    f->hang_mask = (1u << 0) | (1u << 1); /* ranges 11 and 12 */
    f->hold_left = 2;
    get_job(&a, "a");
    get_job(&h, "h");
    submit_job(f, &a);
    submit_job(f, &h);
    run_until_held(f, 2);
    push_map(f, 1, 0);
    wait_jobs(f, before, 1);
    assert_int_equal(h.status, 0);
    run_for(f, 50);
    assert_int_equal(f->done, before + 1); /* a still waits */
    assert_int_equal(f->gets, 3);
    answer_held(f, f->held[0].range_id == 11 ? 0 : 1);
    wait_jobs(f, before, 2);
    assert_int_equal(a.status, 0);
    assert_int_equal(a.value.data[0], 2); /* the late answer */
    assert_int_equal(f->gets, 3);
    fe_job_free(&a);
    fe_job_free(&h);
}

/* A range split in place keeps its keys on the same server, which will
 * answer: a read and a write in flight to it are left alone and get the
 * server's own answers. */
static void test_split_untouched(void **state)
{
    struct fx *f = *state;
    struct fe_job r, w;
    int before = f->done;
    f->write_ok = 1;
    f->hang_mask = 1u << 0; /* range 11 */
    f->hold_left = 2;
    get_job(&r, "b");
    fe_job_init(&w, FE_JOB_WRITE);
    w.account = "acct";
    w.table = "people";
    fe_job_add_op(&w, RT__OP_KIND__OP_INSERT, "b", "9");
    submit_job(f, &r);
    submit_job(f, &w);
    run_until_held(f, 2);
    push_map(f, 0, 1);
    run_for(f, 50);
    assert_int_equal(f->push_acks, 1);
    assert_int_equal(f->done, before);
    answer_held(f, 0);
    answer_held(f, 1);
    wait_jobs(f, before, 2);
    assert_int_equal(r.status, 0);
    assert_int_equal(r.value.data[0], 2);
    assert_int_equal(w.status, 0);
    assert_int_equal(w.ops[0].ticks, 2);
    assert_int_equal(f->gets, 1);
    assert_int_equal(f->writes, 1);
    fe_job_free(&r);
    fe_job_free(&w);
}

/* No map update: after FE_ROUTE_TIMEOUT_MS without a reply a read is sent
 * again (and succeeds), a write ends RT_ETIMEDOUT and is not resent. */
static void test_timeout(void **state)
{
    struct fx *f = *state;
    struct fe_job r, w;
    uint64_t t0 = uv_now(&f->loop);
    int before = f->done;
    f->write_ok = 1;
    f->hang_mask = 1u << 1;
    f->hold_left = 2;
    get_job(&r, "h");
    fe_job_init(&w, FE_JOB_WRITE);
    w.account = "acct";
    w.table = "people";
    fe_job_add_op(&w, RT__OP_KIND__OP_INSERT, "h", "9");
    submit_job(f, &r);
    submit_job(f, &w);
    wait_jobs(f, before, 2);
    assert_true(uv_now(&f->loop) - t0 >= FE_ROUTE_TIMEOUT_MS);
    assert_int_equal(w.status, RT_ETIMEDOUT);
    assert_int_equal(f->writes, 1);
    assert_int_equal(r.status, 0);
    assert_int_equal(f->gets, 2);
    fe_job_free(&r);
    fe_job_free(&w);
}

/* Runs one FE_JOB_SCAN page with filter text @ftext (NULL = none), with
 * the bounds wired the way fe_api wires them; fills @job (caller frees). */
static void filter_page(struct fx *f,
                        struct fe_job *job,
                        const char *ftext,
                        struct rt_filter **flt,
                        struct rt_buf *enc,
                        char lo[8],
                        char hi[8])
{
    struct rt_filter_bounds fb;
    char msg[RT_ERRMSG_SIZE];
    job->account = "acct";
    job->table = "people";
    *flt = NULL;
    if (ftext) {
        assert_int_equal(rt_filter_parse(ftext, strlen(ftext), flt, msg), 0);
        rt_filter_encode(*flt, enc);
        job->filter = enc->data;
        job->filter_len = enc->len;
        rt_filter_bounds(*flt, &fb);
        job->scan_empty = fb.empty;
        if (fb.pk_lo.set) {
            snprintf(lo, 8, "%.*s", (int)fb.pk_lo.n, fb.pk_lo.s);
            job->scan_lo = lo;
        }
        if (fb.pk_hi.set) {
            snprintf(hi, 8, "%.*s", (int)fb.pk_hi.n, fb.pk_hi.s);
            job->scan_hi = hi;
        }
    }
    run_job(f, job);
    assert_int_equal(job->status, 0);
}

/* The filter reaches every server and is applied there, across all three
 * ranges, in key order. */
static void test_filter_sent(void **state)
{
    struct fx *f = *state;
    struct fe_job job;
    struct rt_filter *flt;
    struct rt_buf enc = RT_BUF_INIT;
    char lo[8], hi[8];
    const char *want[] = {"a", "b", "h", "i", "q", "r"};
    fe_job_init(&job, FE_JOB_SCAN);
    filter_page(f, &job, "RowKey eq '2'", &flt, &enc, lo, hi);
    assert_int_equal(job.nents, 6);
    for (size_t i = 0; i < 6; i++) {
        assert_string_equal(job.ents[i].pk, want[i]);
        assert_string_equal(job.ents[i].rk, "2");
    }
    assert_false(job.has_next);
    assert_int_equal(f->scans[0] + f->scans[1] + f->scans[2], 3);
    fe_job_free(&job);
    rt_filter_free(flt);
    rt_buf_free(&enc);
}

/* PartitionKey bounds: the scan starts in the range holding the lower
 * bound (not at the table start) and does not visit ranges that begin
 * after the upper bound. */
static void test_filter_bounds_pick_ranges(void **state)
{
    struct fx *f = *state;
    struct fe_job job;
    struct rt_filter *flt;
    struct rt_buf enc = RT_BUF_INIT;
    char lo[8], hi[8];
    fe_job_init(&job, FE_JOB_SCAN);
    filter_page(f, &job, "PartitionKey ge 'h' and PartitionKey le 'i'", &flt,
                &enc, lo, hi);
    assert_int_equal(job.nents, 4);
    assert_string_equal(job.ents[0].pk, "h");
    assert_string_equal(job.ents[3].pk, "i");
    assert_false(job.has_next);
    assert_int_equal(f->scans[0], 0); /* ["", "g") skipped */
    assert_int_equal(f->scans[1], 1);
    assert_int_equal(f->scans[2], 0); /* ["p", inf) never asked */
    fe_job_free(&job);
    rt_filter_free(flt);

    /* The same without ScanResp.done: the front end's own bound check
     * still stops before ["p", inf). */
    f->never_done = 1;
    memset(f->scans, 0, sizeof(f->scans));
    rt_buf_reset(&enc);
    fe_job_init(&job, FE_JOB_SCAN);
    filter_page(f, &job, "PartitionKey ge 'h' and PartitionKey lt 'j'", &flt,
                &enc, lo, hi);
    assert_int_equal(job.nents, 4);
    assert_false(job.has_next);
    assert_int_equal(f->scans[1], 1);
    assert_int_equal(f->scans[0] + f->scans[2], 0);
    fe_job_free(&job);
    rt_filter_free(flt);
    f->never_done = 0;

    /* Equality on PartitionKey: exactly the one range. */
    memset(f->scans, 0, sizeof(f->scans));
    rt_buf_reset(&enc);
    fe_job_init(&job, FE_JOB_SCAN);
    filter_page(f, &job, "PartitionKey eq 'q'", &flt, &enc, lo, hi);
    assert_int_equal(job.nents, 2);
    assert_false(job.has_next);
    assert_int_equal(f->scans[2], 1);
    assert_int_equal(f->scans[0] + f->scans[1], 0);
    fe_job_free(&job);
    rt_filter_free(flt);

    /* A lower bound after a continuation key: the later one wins. */
    memset(f->scans, 0, sizeof(f->scans));
    rt_buf_reset(&enc);
    fe_job_init(&job, FE_JOB_SCAN);
    job.has_start = 1;
    job.pk = "a";
    job.rk = "2";
    filter_page(f, &job, "PartitionKey gt 'g'", &flt, &enc, lo, hi);
    assert_int_equal(job.nents, 8);
    assert_string_equal(job.ents[0].pk, "h");
    assert_int_equal(f->scans[0], 0);
    fe_job_free(&job);
    rt_filter_free(flt);

    /* A continuation key past the upper bound: an empty, final page
     * without any server call. */
    memset(f->scans, 0, sizeof(f->scans));
    rt_buf_reset(&enc);
    fe_job_init(&job, FE_JOB_SCAN);
    job.has_start = 1;
    job.pk = "j";
    job.rk = "";
    filter_page(f, &job, "PartitionKey lt 'i'", &flt, &enc, lo, hi);
    assert_int_equal(job.nents, 0);
    assert_false(job.has_next);
    assert_int_equal(f->scans[0] + f->scans[1] + f->scans[2], 0);
    fe_job_free(&job);
    rt_filter_free(flt);
    rt_buf_free(&enc);
}

/* A filter that can match nothing resolves the table (404 still works)
 * but asks no server. */
static void test_filter_empty(void **state)
{
    struct fx *f = *state;
    struct fe_job job;
    struct rt_filter *flt;
    struct rt_buf enc = RT_BUF_INIT;
    char lo[8], hi[8];
    fe_job_init(&job, FE_JOB_SCAN);
    filter_page(f, &job, "PartitionKey eq 'a' and PartitionKey eq 'b'", &flt,
                &enc, lo, hi);
    assert_true(job.scan_empty);
    assert_int_equal(job.nents, 0);
    assert_false(job.has_next);
    assert_int_equal(f->scans[0] + f->scans[1] + f->scans[2], 0);
    assert_string_equal(job.table_name, "People");
    fe_job_free(&job);
    rt_filter_free(flt);
    rt_buf_free(&enc);

    fe_job_init(&job, FE_JOB_SCAN);
    job.account = "acct";
    job.table = "nosuch";
    job.scan_empty = 1;
    run_job(f, &job);
    assert_int_equal(job.status, RT_ETABLENOTFOUND);
    fe_job_free(&job);
}

/* ScanResp.done stops the walk: no later range is visited and no
 * continuation is returned. */
static void test_scan_done(void **state)
{
    struct fx *f = *state;
    struct fe_job job;
    f->done_always = 1;
    fe_job_init(&job, FE_JOB_SCAN);
    job.account = "acct";
    job.table = "people";
    run_job(f, &job);
    assert_int_equal(job.status, 0);
    assert_int_equal(job.nents, 4); /* the first range only */
    assert_false(job.has_next);
    assert_int_equal(f->scans[0], 1);
    assert_int_equal(f->scans[1] + f->scans[2], 0);
    fe_job_free(&job);
    f->done_always = 0;
}

/* The page budget is shared by the ranges of one page: each server gets
 * what is left, and once it is spent the page ends at the next range's
 * low key, even when it is empty. Following the tokens still returns
 * every match exactly once. */
static void test_page_budget(void **state)
{
    struct fx *f = *state;
    struct fe_job job;
    struct rt_filter *flt;
    struct rt_buf enc = RT_BUF_INIT;
    struct rt_buf npk = RT_BUF_INIT;
    char lo[8], hi[8];
    int pages = 0;
    size_t total = 0;

    f->slow_ms = 30;
    for (;;) {
        fe_job_init(&job, FE_JOB_SCAN);
        job.budget_ms = 20;
        if (pages) {
            job.has_start = 1;
            job.pk = rt_buf_cstr(&npk);
            job.rk = "";
        }
        rt_buf_reset(&enc);
        /* Matches only in the last range: earlier pages are empty. */
        filter_page(f, &job, "RowKey eq '1' and PartitionKey ge 'q'", &flt,
                    &enc, lo, hi);
        assert_true(f->last_budget >= 1 && f->last_budget <= 20);
        pages++;
        total += job.nents;
        rt_filter_free(flt);
        if (!job.has_next) {
            fe_job_free(&job);
            break;
        }
        assert_int_equal(job.next_rk.len, 0);
        rt_buf_reset(&npk);
        rt_buf_append(&npk, job.next_pk.data, job.next_pk.len);
        fe_job_free(&job);
        assert_true(pages < 10);
    }
    assert_int_equal(total, 2);
    assert_int_equal(pages, 1); /* ge 'q' starts in the last range */

    /* No lower bound: the first page spends its budget in ["", "g") and
     * ends empty-handed at "g". */
    fe_job_init(&job, FE_JOB_SCAN);
    job.budget_ms = 20;
    rt_buf_reset(&enc);
    filter_page(f, &job, "RowKey eq '9'", &flt, &enc, lo, hi);
    assert_int_equal(job.nents, 0);
    assert_true(job.has_next);
    assert_int_equal(job.next_pk.len, 1);
    assert_memory_equal(job.next_pk.data, "g", 1);
    fe_job_free(&job);
    rt_filter_free(flt);
    f->slow_ms = 0;
    rt_buf_free(&enc);
    rt_buf_free(&npk);
}

/* The second master: a follower naming the first as leader, or (once
 * follower_leads) the leader itself, answering as the first does. */
static void follower_req(struct rt_rpc_conn *conn,
                         uint32_t method,
                         uint64_t id,
                         const uint8_t *body,
                         size_t len,
                         void *ud)
{
    struct fx *f = ud;
    Rt__NotLeader hint = RT__NOT_LEADER__INIT;
    if (f->follower_leads) {
        if (method == RT__METHOD__FE_HELLO) {
            f->follower_hellos++;
            put_map(f, conn, id, method);
        } else if (method == RT__METHOD__LIST_TABLES) {
            Rt__ListTablesResp resp = RT__LIST_TABLES_RESP__INIT;
            f->follower_lists++;
            rt_rpc_reply_pb(conn, id, method, 0, &resp.base);
        } else {
            rt_rpc_reply_err(conn, id, method, RT_ENOTIMPL, "fake");
        }
        return;
    }
    (void)body;
    (void)len;
    hint.leader_rpc_addr = f->master_addr;
    f->not_leader++;
    rt_rpc_reply_notleader(conn, id, method, &hint);
}

/* Given FOLLOWER,LEADER a route subscribes at the leader; when the leader
 * steps down naming the other master, a table operation it answers
 * RT_ENOTLEADER (nothing executed) is sent again to the new leader, where
 * it succeeds, and the route says hello to the new leader. */
static void test_follows_leader(void **state)
{
    struct fx *f = *state;
    struct fe_route *r2;
    struct fe_job job;
    char list[80];
    int before = f->done;

    assert_int_equal(rt_rpc_server_start(&f->loop, "127.0.0.1", 0, follower_req,
                                         NULL, f, &f->follower),
                     0);
    snprintf(f->follower_addr, sizeof(f->follower_addr), "127.0.0.1:%d",
             rt_rpc_server_port(f->follower));
    snprintf(list, sizeof(list), "%s,%s", f->follower_addr, f->master_addr);
    assert_int_equal(fe_route_create(&f->loop, list, &r2), 0);
    for (int i = 0; i < 5000 && fe_route_map_version(r2) == 0; i++) {
        uv_run(&f->loop, UV_RUN_ONCE);
    }
    assert_true(fe_route_map_version(r2) > 0);
    assert_int_equal(f->not_leader, 1);

    f->follower_leads = 1;
    fe_job_init(&job, FE_JOB_LIST_TABLES);
    job.account = "acct";
    job.done_cb = job_done;
    job.data = f;
    fe_route_submit(r2, &job);
    wait_jobs(f, before, 1);
    assert_int_equal(job.status, 0);
    assert_int_equal(f->follower_lists, 1);
    fe_job_free(&job);
    for (int i = 0; i < 5000 && f->follower_hellos == 0; i++) {
        uv_run(&f->loop, UV_RUN_ONCE);
    }
    assert_int_equal(f->follower_hellos, 1);

    fe_route_close(r2);
    rt_rpc_server_close(f->follower);
    for (int i = 0; i < 50; i++) {
        uv_run(&f->loop, UV_RUN_NOWAIT);
    }
    fe_route_destroy(r2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_scan_one_page, setup, teardown),
        cmocka_unit_test_setup_teardown(test_scan_large_values, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_scan_paged, setup, teardown),
        cmocka_unit_test_setup_teardown(test_table_missing, setup, teardown),
        cmocka_unit_test_setup_teardown(test_stale_retry, setup, teardown),
        cmocka_unit_test_setup_teardown(test_stale_gives_up, setup, teardown),
        cmocka_unit_test_setup_teardown(test_notprimary_retry_waits, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_notprimary_gives_up, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_notprimary_write_retried, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_busy_not_retried, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unsent_write_resent, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_server_down, setup, teardown),
        cmocka_unit_test_setup_teardown(test_write_conn_lost_is_unknown, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_get_conn_lost_retried, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_moved_read_resent, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_moved_rf1_write_answered, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_moved_write_unknown, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_moved_other_range_untouched, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_split_untouched, setup, teardown),
        cmocka_unit_test_setup_teardown(test_timeout, setup, teardown),
        cmocka_unit_test_setup_teardown(test_filter_sent, setup, teardown),
        cmocka_unit_test_setup_teardown(test_filter_bounds_pick_ranges, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_filter_empty, setup, teardown),
        cmocka_unit_test_setup_teardown(test_scan_done, setup, teardown),
        cmocka_unit_test_setup_teardown(test_page_budget, setup, teardown),
        cmocka_unit_test_setup_teardown(test_follows_leader, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
