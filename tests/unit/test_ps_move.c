/* Range moves, splits, merges, throttling and metrics of the partition
 * server (docs/DESIGN-moves.md), over real RPC in one process and one
 * loop: two servers (S = slot 0, T = slot 1), each with its writer thread
 * and LMDB in a temp dir, a fake master (th_fake_master) that answers
 * PS_REGISTER / PS_HEARTBEAT with a scripted assignment per server and
 * drives MOVE_OUT / ASSIGN_RANGES / MOVE_DONE / MOVE_ABORT like rt-master
 * will, and one front-end client per server. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>
#include <lmdb.h>

#include "ps_move.h"
#include "ps_server.h"
#include "rt.pb-c.h"
#include "rt_entity.h"
#include "rt_err.h"
#include "rt_key.h"
#include "rt_log.h"
#include "th_dir.h"
#include "th_fake_master.h"
#include "th_lmdb.h"
#include "th_props.h"
#include "th_rpc.h"

#define TABLE 5
#define RUN_LIMIT_MS 60000

/* Fixture: servers */

struct srv
{
    struct ps_server ps;
    char data[128];
    struct rt_rpc_client *cli;
    int cli_up;
    int running;
    uint64_t max_server_eps;
    uint64_t max_range_eps;
    const char *http;
    char port_file[128];
    /* Real rt-partition-server processes (RT_PS_BINARY): */
    pid_t pid;
    int port; /* RPC port, kept across restarts */
    int http_port;
    char log[160]; /* its stdout + stderr */
};

struct fx
{
    uv_loop_t loop;
    char dir[64];
    char master_addr[64];
    struct srv s[2];
};

/* Fixture: fake master (slot 0: the source S, id 7; slot 1: the target
 * T, id 8) */

static struct th_fake_master M;

static void slot_set(int s,
                     size_t i,
                     uint64_t id,
                     const char *low,
                     const char *high,
                     uint64_t epoch)
{
    th_fake_master_set_range(&M, s, i, id, TABLE, low, high, epoch);
}

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

static void srv_start(struct fx *f, int i)
{
    struct srv *s = &f->s[i];
    struct ps_config cfg;
    char addr[64];

    memset(&cfg, 0, sizeof(cfg));
    cfg.listen = "127.0.0.1:0";
    cfg.advertise = "";
    cfg.master = f->master_addr;
    cfg.data = s->data;
    cfg.port_file = s->port_file;
    cfg.max_pending = 20000;
    cfg.map_size = 256u * 1024u * 1024u;
    cfg.max_server_eps = s->max_server_eps;
    cfg.max_range_eps = s->max_range_eps;
    cfg.http = s->http;
    /* Many chunks: a longer snapshot phase (RT_TEST_MOVE_CHUNK=0: the
     * server's default). */
    cfg.move_chunk = 4 * 1024;
    if (getenv("RT_TEST_MOVE_CHUNK")) {
        cfg.move_chunk = (size_t)atol(getenv("RT_TEST_MOVE_CHUNK"));
    }
    assert_int_equal(ps_server_start(&s->ps, &f->loop, &cfg), 0);
    s->running = 1;
    snprintf(M.slot[i].addr, sizeof(M.slot[i].addr), "%s", s->ps.addr);
    run_until(f, &s->ps.registered);
    snprintf(addr, sizeof(addr), "127.0.0.1:%d", s->ps.port);
    assert_int_equal(rt_rpc_client_start(&f->loop, addr, NULL, th_rpc_conn_cb,
                                         &s->cli_up, &s->cli),
                     0);
    run_until(f, &s->cli_up);
}

/* Starts server @i again on its data and configuration (a new port), as
 * after a crash, without waiting for anything. */
static void srv_restart(struct fx *f, int i)
{
    struct srv *s = &f->s[i];
    struct ps_config cfg = s->ps.cfg;

    assert_int_equal(ps_server_start(&s->ps, &f->loop, &cfg), 0);
    s->running = 1;
    snprintf(M.slot[i].addr, sizeof(M.slot[i].addr), "%s", s->ps.addr);
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

static int setup(void **state)
{
    struct fx *f = calloc(1, sizeof(*f));
    rt_log_init("test", RT_LOG_WARN);
    assert_int_equal(uv_loop_init(&f->loop), 0);
    assert_int_equal(th_dir_create("test_ps_move", f->dir, sizeof(f->dir)), 0);
    for (int i = 0; i < 2; i++) {
        snprintf(f->s[i].data, sizeof(f->s[i].data), "%s/data%d", f->dir, i);
        snprintf(f->s[i].port_file, sizeof(f->s[i].port_file), "%s/port%d",
                 f->dir, i);
        f->s[i].http = "";
    }
    memset(&M, 0, sizeof(M));
    M.map_version = 3;
    M.slot[0].id = 7;
    M.slot[1].id = 8;
    slot_set(0, 0, 1, "", NULL, 1); /* S serves the whole table */
    M.slot[0].n = 1;
    M.slot[1].n = 0;
    assert_int_equal(th_fake_master_start(&M, &f->loop), 0);
    snprintf(f->master_addr, sizeof(f->master_addr), "%s", M.addr);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fx *f = *state;
    for (int i = 0; i < 2; i++) {
        if (f->s[i].pid > 0) {
            kill(f->s[i].pid, SIGKILL);
            waitpid(f->s[i].pid, NULL, 0);
            f->s[i].pid = 0;
        }
    }
    for (int i = 0; i < 2; i++) {
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
    for (int i = 0; i < 2; i++) {
        if (f->s[i].running) {
            ps_server_close(&f->s[i].ps);
        }
    }
    assert_int_equal(uv_loop_close(&f->loop), 0);
    th_dir_remove(f->dir);
    free(f);
    return 0;
}

/* Helpers: calls */

static void call_async(struct rt_rpc_conn *conn,
                       uint32_t method,
                       const ProtobufCMessage *msg,
                       struct th_reply *r)
{
    assert_int_equal(th_rpc_call_async(conn, method, msg, 60000, r), 0);
}

static int call(struct fx *f,
                struct rt_rpc_conn *conn,
                uint32_t method,
                const ProtobufCMessage *msg)
{
    struct th_reply r;
    call_async(conn, method, msg, &r);
    run_until(f, &r.done);
    rt_buf_free(&r.body);
    return r.status;
}

static int write1(struct fx *f,
                  int s,
                  uint64_t range,
                  uint64_t epoch,
                  const char *pk,
                  const char *rk,
                  const char *v)
{
    struct rt_buf props = RT_BUF_INIT;
    Rt__RangeRef ref = RT__RANGE_REF__INIT;
    Rt__EntityOp op = RT__ENTITY_OP__INIT;
    Rt__EntityOp *ops[1] = {&op};
    Rt__WriteReq req = RT__WRITE_REQ__INIT;
    int rc;

    th_props1(&props, "v", v);
    ref.table_id = TABLE;
    ref.range_id = range;
    ref.epoch = epoch;
    op.kind = RT__OP_KIND__OP_UPSERT_REPLACE;
    op.pk = (char *)pk;
    op.rk = (char *)rk;
    op.props.data = props.data;
    op.props.len = props.len;
    req.route = &ref;
    req.n_ops = 1;
    req.ops = ops;
    rc = call(f, rt_rpc_client_conn(f->s[s].cli), RT__METHOD__ENTITY_WRITE,
              &req.base);
    rt_buf_free(&props);
    return rc;
}

static int get1(struct fx *f,
                int s,
                uint64_t range,
                uint64_t epoch,
                const char *pk,
                const char *rk)
{
    Rt__RangeRef ref = RT__RANGE_REF__INIT;
    Rt__GetReq req = RT__GET_REQ__INIT;
    ref.table_id = TABLE;
    ref.range_id = range;
    ref.epoch = epoch;
    req.route = &ref;
    req.pk = (char *)pk;
    req.rk = (char *)rk;
    return call(f, rt_rpc_client_conn(f->s[s].cli), RT__METHOD__ENTITY_GET,
                &req.base);
}

/* Writes entities (pk_fmt % i, rk_fmt % i) for i in [0, n) with v = "0",
 * @per ops per request, up to 8 requests out. */
static void load(struct fx *f,
                 int s,
                 uint64_t range,
                 uint64_t epoch,
                 const char *pk_fmt,
                 const char *rk_fmt,
                 int n,
                 int per)
{
    struct rt_buf props = RT_BUF_INIT;
    Rt__RangeRef ref = RT__RANGE_REF__INIT;
    Rt__EntityOp *ops = calloc((size_t)per, sizeof(*ops));
    Rt__EntityOp **ptrs = calloc((size_t)per, sizeof(*ptrs));
    char(*pks)[1200] = calloc((size_t)per, 1200);
    char(*rks)[1200] = calloc((size_t)per, 1200);
    Rt__WriteReq req = RT__WRITE_REQ__INIT;
    struct th_multi m;

    th_props1(&props, "v", "0");
    ref.table_id = TABLE;
    ref.range_id = range;
    ref.epoch = epoch;
    req.route = &ref;
    req.ops = ptrs;
    memset(&m, 0, sizeof(m));
    for (int base = 0; base < n; base += per) {
        size_t k = 0;
        for (int i = base; i < n && i < base + per; i++, k++) {
            rt__entity_op__init(&ops[k]);
            snprintf(pks[k], 1200, pk_fmt, i);
            snprintf(rks[k], 1200, rk_fmt, i);
            ops[k].kind = RT__OP_KIND__OP_UPSERT_REPLACE;
            ops[k].pk = pks[k];
            ops[k].rk = rks[k];
            ops[k].props.data = props.data;
            ops[k].props.len = props.len;
            ptrs[k] = &ops[k];
        }
        req.n_ops = k;
        while (m.outstanding >= 8) {
            uv_run(&f->loop, UV_RUN_ONCE);
        }
        m.outstanding++;
        assert_int_equal(rt_rpc_call_pb(rt_rpc_client_conn(f->s[s].cli),
                                        RT__METHOD__ENTITY_WRITE, &req.base,
                                        30000, th_rpc_multi_cb, &m),
                         0);
    }
    while (m.outstanding > 0) {
        uv_run(&f->loop, UV_RUN_ONCE);
    }
    assert_int_equal(m.other + m.busy, 0);
    free(ops);
    free(ptrs);
    free(pks);
    free(rks);
    rt_buf_free(&props);
}

/* Helpers: whole-table contents straight from a store */

struct ent
{
    char *pk, *rk;
    uint8_t *v;
    size_t vn;
};

struct dump
{
    struct ent *e;
    size_t n, cap;
};

static void dump_table(struct ps_store *st, struct dump *d)
{
    char *spk = NULL, *srk = NULL;
    memset(d, 0, sizeof(*d));
    for (;;) {
        struct ps_scan sc;
        memset(&sc, 0, sizeof(sc));
        sc.table_id = TABLE;
        sc.low = "";
        sc.high = NULL;
        sc.has_start = spk != NULL;
        sc.start_pk = spk;
        sc.start_rk = srk;
        assert_int_equal(ps_store_scan(st, &sc), 0);
        for (size_t i = 0; i < sc.n; i++) {
            if (d->n == d->cap) {
                d->cap = d->cap ? 2 * d->cap : 1024;
                d->e = realloc(d->e, d->cap * sizeof(*d->e));
            }
            d->e[d->n].pk = strdup(sc.recs[i].pk);
            d->e[d->n].rk = strdup(sc.recs[i].rk);
            d->e[d->n].v = malloc(sc.recs[i].value_len);
            memcpy(d->e[d->n].v, sc.recs[i].value, sc.recs[i].value_len);
            d->e[d->n].vn = sc.recs[i].value_len;
            d->n++;
        }
        free(spk);
        free(srk);
        spk = srk = NULL;
        if (!sc.more) {
            ps_scan_free(&sc);
            break;
        }
        spk = strdup(sc.next_pk);
        srk = strdup(sc.next_rk);
        ps_scan_free(&sc);
    }
}

static void dump_free(struct dump *d)
{
    for (size_t i = 0; i < d->n; i++) {
        free(d->e[i].pk);
        free(d->e[i].rk);
        free(d->e[i].v);
    }
    free(d->e);
    memset(d, 0, sizeof(*d));
}

static void dump_equal(const struct dump *a, const struct dump *b)
{
    assert_int_equal(a->n, b->n);
    for (size_t i = 0; i < a->n; i++) {
        assert_string_equal(a->e[i].pk, b->e[i].pk);
        assert_string_equal(a->e[i].rk, b->e[i].rk);
        assert_int_equal(a->e[i].vn, b->e[i].vn);
        assert_memory_equal(a->e[i].v, b->e[i].v, a->e[i].vn);
    }
}

static uint64_t span_count(struct fx *f, int s)
{
    struct ps_span sp = {TABLE, "", NULL};
    uint64_t n = 0;
    assert_int_equal(ps_store_span_count(f->s[s].ps.store, &sp, &n), 0);
    return n;
}

/* Waits until server @s has no span drop left. */
static void wait_span_drops(struct fx *f, int s)
{
    uint64_t end = uv_now(&f->loop) + RUN_LIMIT_MS;
    while (f->s[s].ps.span_drops > 0) {
        uv_run(&f->loop, UV_RUN_ONCE);
        uv_update_time(&f->loop);
        assert_true(uv_now(&f->loop) < end);
    }
}

/* Helpers: the fake master's orchestration */

static void move_req(Rt__MoveReq *mr,
                     Rt__Range *r,
                     struct fx *f,
                     uint64_t move_id,
                     uint64_t range,
                     uint64_t epoch)
{
    static char addr[64];
    rt__move_req__init(mr);
    rt__range__init(r);
    r->id = range;
    r->table_id = TABLE;
    r->low = "";
    r->high = "";
    r->high_inf = 1;
    r->epoch = epoch;
    r->server_id = 7;
    snprintf(addr, sizeof(addr), "127.0.0.1:%d",
             f->s[1].port ? f->s[1].port : f->s[1].ps.port);
    mr->move_id = move_id;
    mr->range = r;
    mr->target_server_id = 8;
    mr->target_addr = addr;
    mr->new_epoch = epoch + 1;
}

static int move_abort(struct fx *f,
                      int s,
                      uint32_t method,
                      uint64_t move_id,
                      uint64_t range)
{
    Rt__MoveAbort ma = RT__MOVE_ABORT__INIT;
    ma.move_id = move_id;
    ma.range_id = range;
    return call(f, M.slot[s].conn, method, &ma.base);
}

/* The master's commit: S loses range 1, T gets it at @epoch. */
static void commit_to_target(struct fx *f, uint64_t epoch)
{
    Rt__Assignment a = RT__ASSIGNMENT__INIT;
    M.map_version++;
    M.slot[0].n = 0;
    slot_set(1, 0, 1, "", NULL, epoch);
    M.slot[1].n = 1;
    a.n_ranges = 1;
    a.ranges = M.slot[1].ptrs;
    a.map_version = M.map_version;
    assert_int_equal(
        call(f, M.slot[1].conn, RT__METHOD__ASSIGN_RANGES, &a.base), 0);
}

static const char *state_of(struct fx *f, int s, uint64_t range)
{
    const char *st =
        f->s[s].running ? ps_move_out_state(&f->s[s].ps, range) : NULL;
    return st ? st : "none";
}

/* Helpers: a front end writing continuously during a move */

#define DRV_OUT 16
/* Keys the driver writes: the loaded ones plus 5000 new. */
static int DRV_KEYS = 25000;

struct drv_op
{
    struct driver *d;
    int key;
    uint32_t version;
    uv_timer_t retry;
    int in_use;
};

struct driver
{
    struct fx *f;
    int loaded; /* entities k000000.. loaded before (v = "0") */
    int running;
    int outstanding;
    int target; /* 0: S at epoch 1; 1: T at epoch 2 */
    uint32_t version;
    int next_key;
    uint32_t *acked;
    struct drv_op ops[DRV_OUT];
    int ok, busy, stale, other;
    int ok_by_state[8];
    int busy_before_freeze;
    uint64_t first_busy_ns, first_ok_t_ns;
    int after_done_ok_s; /* successes from S after MOVE_DONE (must be 0) */
    int done_sent;
};

static const char *const drv_states[8] = {"none", "sync",   "begin", "snapshot",
                                          "tail", "freeze", "final", "done"};

static int drv_state_index(const char *st)
{
    for (int i = 0; i < 8; i++) {
        if (strcmp(st, drv_states[i]) == 0) {
            return i;
        }
    }
    return 0;
}

static void drv_send(struct drv_op *op);

static void drv_retry_cb(uv_timer_t *t)
{
    drv_send((struct drv_op *)t->data);
}

static void drv_next(struct driver *d, struct drv_op *op)
{
    if (!d->running) {
        op->in_use = 0;
        return;
    }
    op->key = d->next_key;
    /* A stride prime to DRV_KEYS: no key twice in flight. */
    d->next_key = (d->next_key + 7919) % DRV_KEYS;
    op->version = ++d->version;
    drv_send(op);
}

static void drv_cb(int status, const uint8_t *body, size_t len, void *arg)
{
    struct drv_op *op = arg;
    struct driver *d = op->d;
    struct fx *f = d->f;
    const char *st = state_of(f, 0, 1);
    (void)body;
    (void)len;

    d->outstanding--;
    if (status == 0) {
        Rt__WriteResp *resp = rt__write_resp__unpack(NULL, len, body);
        assert_non_null(resp);
        assert_int_equal(resp->results[0]->code, 0);
        rt__write_resp__free_unpacked(resp, NULL);
        d->ok++;
        d->ok_by_state[drv_state_index(st)]++;
        if (d->acked[op->key] < op->version) {
            d->acked[op->key] = op->version;
        }
        if (d->target == 1 && d->first_ok_t_ns == 0) {
            d->first_ok_t_ns = uv_hrtime();
        }
        if (d->target == 0 && d->done_sent) {
            d->after_done_ok_s++;
        }
        drv_next(d, op);
        return;
    }
    if (status == RT_EBUSY) {
        /* ServerBusy only while frozen, never before (no caps here). */
        int i = drv_state_index(st);
        if (i >= 1 && i <= 4) {
            d->busy_before_freeze++;
        }
        d->busy++;
        if (d->first_busy_ns == 0) {
            d->first_busy_ns = uv_hrtime();
        }
    } else if (status == RT_ESTALE) {
        d->stale++;
        d->target = 1; /* refresh the "map": the range is at T now */
    } else {
        d->other++; /* e.g. the server was killed: outcome unknown, and
                       the same (key, version) is sent until acknowledged */
    }
    uv_timer_start(&op->retry, drv_retry_cb, status == RT_EBUSY ? 1 : 5, 0);
}

static void drv_send(struct drv_op *op)
{
    struct driver *d = op->d;
    struct srv *s = &d->f->s[d->target];
    struct rt_buf props = RT_BUF_INIT;
    Rt__RangeRef ref = RT__RANGE_REF__INIT;
    Rt__EntityOp eo = RT__ENTITY_OP__INIT;
    Rt__EntityOp *ops[1] = {&eo};
    Rt__WriteReq req = RT__WRITE_REQ__INIT;
    char rk[16], v[16];

    snprintf(rk, sizeof(rk), "k%07d", op->key);
    snprintf(v, sizeof(v), "%u", op->version);
    th_props1(&props, "v", v);
    ref.table_id = TABLE;
    ref.range_id = 1;
    ref.epoch = d->target == 0 ? 1 : 2;
    eo.kind = RT__OP_KIND__OP_UPSERT_REPLACE;
    eo.pk = "p";
    eo.rk = rk;
    eo.props.data = props.data;
    eo.props.len = props.len;
    req.route = &ref;
    req.n_ops = 1;
    req.ops = ops;
    d->outstanding++;
    assert_int_equal(
        rt_rpc_call_pb(rt_rpc_client_conn(s->cli), RT__METHOD__ENTITY_WRITE,
                       &req.base, 30000, drv_cb, op),
        0);
    rt_buf_free(&props);
}

static void drv_start(struct driver *d, struct fx *f, int loaded)
{
    memset(d, 0, sizeof(*d));
    d->f = f;
    d->loaded = loaded;
    DRV_KEYS = loaded + 5000;
    d->running = 1;
    d->acked = calloc(DRV_KEYS, sizeof(*d->acked));
    for (int i = 0; i < DRV_OUT; i++) {
        d->ops[i].d = d;
        d->ops[i].in_use = 1;
        uv_timer_init(&f->loop, &d->ops[i].retry);
        d->ops[i].retry.data = &d->ops[i];
        drv_next(d, &d->ops[i]);
    }
}

static void drv_stop(struct driver *d)
{
    int busy_timers;
    d->running = 0;
    do {
        uv_run(&d->f->loop, UV_RUN_ONCE);
        busy_timers = 0;
        for (int i = 0; i < DRV_OUT; i++) {
            busy_timers += uv_is_active((uv_handle_t *)&d->ops[i].retry);
        }
    } while (d->outstanding > 0 || busy_timers > 0);
    for (int i = 0; i < DRV_OUT; i++) {
        uv_close((uv_handle_t *)&d->ops[i].retry, NULL);
    }
    uv_run(&d->f->loop, UV_RUN_NOWAIT);
}

/* Checks that @st holds exactly the driver's model: every loaded entity
 * (v = "0") or its last acknowledged version, nothing else. */
static void drv_check(struct driver *d, struct ps_store *st)
{
    struct dump dp;
    size_t want = 0, at = 0;

    dump_table(st, &dp);
    for (int k = 0; k < DRV_KEYS; k++) {
        want += k < d->loaded || d->acked[k] > 0;
    }
    assert_int_equal(dp.n, want);
    for (int k = 0; k < DRV_KEYS; k++) {
        char rk[16], v[16];
        uint64_t ticks;
        uint8_t flags;
        const uint8_t *blob;
        size_t blob_n;
        struct rt_props_iter it;
        struct rt_prop p;
        if (k >= d->loaded && d->acked[k] == 0) {
            continue;
        }
        snprintf(rk, sizeof(rk), "k%07d", k);
        snprintf(v, sizeof(v), "%u", d->acked[k]);
        assert_string_equal(dp.e[at].rk, rk);
        assert_int_equal(rt_value_decode(dp.e[at].v, dp.e[at].vn, &ticks,
                                         &flags, &blob, &blob_n),
                         0);
        assert_int_equal(rt_props_iter_init(&it, blob, blob_n), 0);
        assert_int_equal(rt_props_next(&it, &p), 1);
        assert_int_equal(p.v.bytes.n, strlen(v));
        assert_memory_equal(p.v.bytes.p, v, p.v.bytes.n);
        at++;
    }
    dump_free(&dp);
}

/* Tests: split and merge */

/* A split replaces range 1 by two new ranges on the same server: no data
 * moves, each new range counts its own keys, and the old id/epoch is
 * stale; a merge puts them back together the same way. */
static void test_split_merge_assign(void **state)
{
    struct fx *f = *state;
    Rt__Assignment a = RT__ASSIGNMENT__INIT;
    struct ps_writer_stats ws;
    struct dump before, after;

    srv_start(f, 0);
    for (char c = 'a'; c <= 'z'; c++) {
        char fmt[8];
        snprintf(fmt, sizeof(fmt), "%c", c);
        load(f, 0, 1, 1, fmt, "r%05d", 100, 100);
    }
    dump_table(f->s[0].ps.store, &before);
    assert_int_equal(before.n, 2600);

    /* Split at "m": ranges 2 = ["", "m") and 3 = ["m", +inf), epoch 2. */
    M.map_version++;
    slot_set(0, 0, 2, "", "m", 2);
    slot_set(0, 1, 3, "m", NULL, 2);
    M.slot[0].n = 2;
    a.n_ranges = 2;
    a.ranges = M.slot[0].ptrs;
    a.map_version = M.map_version;
    assert_int_equal(
        call(f, M.slot[0].conn, RT__METHOD__ASSIGN_RANGES, &a.base), 0);
    assert_int_equal(get1(f, 0, 1, 1, "b", "r00001"), RT_ESTALE);
    assert_int_equal(write1(f, 0, 1, 1, "b", "x", "1"), RT_ESTALE);
    assert_int_equal(get1(f, 0, 2, 2, "b", "r00001"), 0);
    assert_int_equal(get1(f, 0, 2, 2, "x", "r00001"), RT_ESTALE);
    assert_int_equal(get1(f, 0, 3, 2, "x", "r00001"), 0);
    assert_int_equal(write1(f, 0, 3, 2, "y", "new", "1"), 0);
    /* The heartbeats report each half's own count (recounted). */
    int hb = M.slot[0].heartbeats + 2;
    while (M.slot[0].heartbeats < hb) {
        uv_run(&f->loop, UV_RUN_ONCE);
    }
    assert_int_equal(M.slot[0].hb_keys[2], 1200);
    assert_int_equal(M.slot[0].hb_keys[3], 1401);

    /* Merge back: range 4 = ["", +inf) at epoch 3. */
    M.map_version++;
    slot_set(0, 0, 4, "", NULL, 3);
    M.slot[0].n = 1;
    a.n_ranges = 1;
    assert_int_equal(
        call(f, M.slot[0].conn, RT__METHOD__ASSIGN_RANGES, &a.base), 0);
    assert_int_equal(get1(f, 0, 2, 2, "b", "r00001"), RT_ESTALE);
    assert_int_equal(get1(f, 0, 3, 2, "y", "new"), RT_ESTALE);
    assert_int_equal(get1(f, 0, 4, 3, "y", "new"), 0);
    hb = M.slot[0].heartbeats + 2;
    while (M.slot[0].heartbeats < hb) {
        uv_run(&f->loop, UV_RUN_ONCE);
    }
    assert_int_equal(M.slot[0].hb_keys[4], 2601);

    /* Nothing was copied: the data is what it was, plus the one write. */
    ps_writer_stats(f->s[0].ps.writer, &ws);
    assert_int_equal(ws.raw_kvs, 0);
    dump_table(f->s[0].ps.store, &after);
    assert_int_equal(after.n, 2601);
    for (size_t i = 0, j = 0; i < before.n; i++, j++) {
        if (strcmp(after.e[j].pk, "y") == 0 &&
            strcmp(after.e[j].rk, "new") == 0) {
            j++;
        }
        assert_string_equal(before.e[i].pk, after.e[j].pk);
        assert_string_equal(before.e[i].rk, after.e[j].rk);
        assert_memory_equal(before.e[i].v, after.e[j].v, before.e[i].vn);
    }
    dump_free(&before);
    dump_free(&after);
}

/* Tests: moves */

/* 20 000 entities move from S to T while a front end writes without a
 * pause (during the snapshot and the log rounds): afterwards T holds
 * exactly what S held when it answered MOVE_OUT, every acknowledged write
 * is on T with its last value, S answered Busy only while frozen and
 * StaleEpoch after MOVE_DONE, and its copy is deleted. */
static void test_move_under_writes(void **state)
{
    struct fx *f = *state;
    Rt__MoveReq mr;
    Rt__Range rr;
    struct th_reply r;
    struct driver d;
    struct dump ds, dt;
    Rt__MoveResp *resp;
    uint64_t t0;

    /* RT_TEST_MOVE_N=N moves N entities instead (measuring the window
     * against the range size). */
    const char *env = getenv("RT_TEST_MOVE_N");
    int n_ent = env && atoi(env) > 0 ? atoi(env) : 20000;

    srv_start(f, 0);
    srv_start(f, 1);
    load(f, 0, 1, 1, "p", "k%07d", n_ent, 1000);

    drv_start(&d, f, n_ent);
    run_for(f, 50);
    move_req(&mr, &rr, f, 101, 1, 1);
    t0 = uv_hrtime();
    call_async(M.slot[0].conn, RT__METHOD__MOVE_OUT, &mr.base, &r);
    run_until(f, &r.done);
    assert_int_equal(r.status, 0);
    resp = rt__move_resp__unpack(NULL, r.body.len, r.body.data);
    assert_non_null(resp);
    assert_string_equal(state_of(f, 0, 1), "done");
    assert_true(ps_ranges_find(&f->s[0].ps.ranges, 1)->frozen);

    /* Frozen and confirmed: T holds exactly S's data. (The loop stops
     * while the test reads: that time is not part of the window.) */
    uint64_t t_pause = uv_hrtime();
    dump_table(f->s[0].ps.store, &ds);
    dump_table(f->s[1].ps.store, &dt);
    dump_equal(&ds, &dt);
    assert_true(ds.n >= (size_t)n_ent);
    assert_int_equal(get1(f, 0, 1, 1, "p", "k0000001"), RT_EBUSY);
    assert_int_equal(get1(f, 1, 1, 2, "p", "k0000001"), RT_ESTALE);
    t_pause = uv_hrtime() - t_pause;

    /* The master commits, assigns T, tells S. */
    commit_to_target(f, 2);
    d.done_sent = 1;
    assert_int_equal(move_abort(f, 0, RT__METHOD__MOVE_DONE, 101, 1), 0);
    uint64_t t_done = uv_hrtime();
    assert_int_equal(get1(f, 0, 1, 1, "p", "k0000001"), RT_ESTALE);
    assert_int_equal(get1(f, 1, 1, 2, "p", "k0000001"), 0);
    run_for(f, 200);
    drv_stop(&d);

    printf(
        "    move of %zu entities: %llu records, %llu bytes, snapshot "
        "%llu ms, %u log rounds, frozen %llu ms (MOVE_OUT %llu ms); "
        "client saw ServerBusy for %.1f ms (first Busy to first write "
        "at T, incl. the fake master's commit, minus %.1f ms the test "
        "spent comparing)\n",
        ds.n, (unsigned long long)resp->entities,
        (unsigned long long)resp->bytes, (unsigned long long)resp->snapshot_ms,
        resp->tail_rounds, (unsigned long long)resp->frozen_ms,
        (unsigned long long)((t_done - t0) / 1000000),
        d.first_busy_ns && d.first_ok_t_ns > d.first_busy_ns + t_pause
            ? (double)(d.first_ok_t_ns - d.first_busy_ns - t_pause) / 1e6
            : 0.0,
        (double)t_pause / 1e6);
    printf(
        "    writes acked by state: snapshot %d, tail %d, freeze %d, "
        "final %d, done/none %d; busy %d, stale %d\n",
        d.ok_by_state[3], d.ok_by_state[4], d.ok_by_state[5], d.ok_by_state[6],
        d.ok_by_state[7] + d.ok_by_state[0], d.busy, d.stale);
    assert_true(d.ok_by_state[3] > 0);   /* writes during the snapshot */
    assert_true(resp->tail_rounds >= 1); /* ... and log rounds of them */
    assert_true(d.ok_by_state[4] > 0);   /* writes during the rounds */
    assert_true(resp->entities >= (uint64_t)n_ent);
    assert_int_equal(d.other, 0);
    assert_int_equal(d.busy_before_freeze, 0);
    assert_int_equal(d.after_done_ok_s, 0);
    assert_true(d.stale > 0);

    /* Every acknowledged write is on T, exactly once, with its value. */
    drv_check(&d, f->s[1].ps.store);
    /* S deletes its copy in the background. */
    wait_span_drops(f, 0);
    assert_int_equal(span_count(f, 0), 0);
    assert_null(ps_move_out_state(&f->s[0].ps, 1));
    assert_null(ps_ranges_find(&f->s[0].ps.ranges, 1));

    rt__move_resp__free_unpacked(resp, NULL);
    rt_buf_free(&r.body);
    dump_free(&ds);
    dump_free(&dt);
    free(d.acked);
}

/* MOVE_ABORT in the middle of the snapshot: MOVE_OUT answers Canceled, S
 * keeps serving everything (reads and writes), T ends up with nothing. */
static void test_move_abort_mid_stream(void **state)
{
    struct fx *f = *state;
    Rt__MoveReq mr;
    Rt__Range rr;
    struct th_reply r;

    srv_start(f, 0);
    srv_start(f, 1);
    load(f, 0, 1, 1, "p", "k%06d", 20000, 1000);
    move_req(&mr, &rr, f, 102, 1, 1);
    call_async(M.slot[0].conn, RT__METHOD__MOVE_OUT, &mr.base, &r);
    while (!r.done && span_count(f, 1) < 2000) {
        uv_run(&f->loop, UV_RUN_ONCE);
    }
    assert_false(r.done);
    assert_string_equal(state_of(f, 0, 1), "snapshot");
    assert_int_equal(move_abort(f, 0, RT__METHOD__MOVE_ABORT, 102, 1), 0);
    assert_int_equal(move_abort(f, 1, RT__METHOD__MOVE_ABORT, 102, 1), 0);
    run_until(f, &r.done);
    assert_int_equal(r.status, RT_ECANCELED);
    rt_buf_free(&r.body);

    assert_null(ps_move_out_state(&f->s[0].ps, 1));
    assert_int_equal(get1(f, 0, 1, 1, "p", "k019999"), 0);
    assert_int_equal(write1(f, 0, 1, 1, "p", "k020000", "x"), 0);
    assert_int_equal(span_count(f, 0), 20001);
    wait_span_drops(f, 1);
    assert_int_equal(span_count(f, 1), 0);
    /* A second attempt works after the abort. */
    move_req(&mr, &rr, f, 103, 1, 1);
    assert_int_equal(call(f, M.slot[0].conn, RT__METHOD__MOVE_OUT, &mr.base),
                     0);
    assert_int_equal(span_count(f, 1), 20001);
}

/* The target goes away mid-stream: S unfreezes on its own (the move never
 * finished) and answers MOVE_OUT with an error; a target that is not
 * there at all fails the same way. */
static void test_move_target_down(void **state)
{
    struct fx *f = *state;
    Rt__MoveReq mr;
    Rt__Range rr;
    struct th_reply r;

    srv_start(f, 0);
    srv_start(f, 1);
    load(f, 0, 1, 1, "p", "k%06d", 20000, 1000);
    move_req(&mr, &rr, f, 104, 1, 1);
    call_async(M.slot[0].conn, RT__METHOD__MOVE_OUT, &mr.base, &r);
    while (!r.done && span_count(f, 1) < 1000) {
        uv_run(&f->loop, UV_RUN_ONCE);
    }
    assert_false(r.done);
    srv_stop(f, 1);
    run_until(f, &r.done);
    printf("    target stopped mid-stream: MOVE_OUT -> %s\n",
           rt_err_name(r.status));
    assert_true(r.status == RT_ENOCONN || r.status == RT_EBUSY ||
                r.status == RT_ECANCELED);
    rt_buf_free(&r.body);
    assert_null(ps_move_out_state(&f->s[0].ps, 1));
    assert_false(ps_ranges_find(&f->s[0].ps.ranges, 1)->frozen);
    assert_int_equal(write1(f, 0, 1, 1, "p", "k000000", "y"), 0);

    /* Nobody listening at the target address. */
    move_req(&mr, &rr, f, 105, 1, 1);
    call_async(M.slot[0].conn, RT__METHOD__MOVE_OUT, &mr.base, &r);
    run_until(f, &r.done);
    assert_int_equal(r.status, RT_ENOCONN);
    rt_buf_free(&r.body);
    assert_int_equal(get1(f, 0, 1, 1, "p", "k000000"), 0);
}

/* The target fails while S is frozen (final entries / MIGRATE_END): S
 * unfreezes and answers the error, since the master cannot have
 * committed. */
static void test_move_target_down_frozen(void **state)
{
    struct fx *f = *state;
    Rt__MoveReq mr;
    Rt__Range rr;
    struct th_reply r;
    struct driver d;

    srv_start(f, 0);
    srv_start(f, 1);
    load(f, 0, 1, 1, "p", "k%07d", 2000, 1000);
    drv_start(&d, f, 2000);
    move_req(&mr, &rr, f, 106, 1, 1);
    call_async(M.slot[0].conn, RT__METHOD__MOVE_OUT, &mr.base, &r);
    while (!r.done && strcmp(state_of(f, 0, 1), "freeze") != 0 &&
           strcmp(state_of(f, 0, 1), "final") != 0) {
        uv_run(&f->loop, UV_RUN_ONCE);
    }
    assert_false(r.done);
    printf("    stopping the target in state %s\n", state_of(f, 0, 1));
    srv_stop(f, 1);
    run_until(f, &r.done);
    assert_int_not_equal(r.status, 0);
    rt_buf_free(&r.body);
    assert_false(ps_ranges_find(&f->s[0].ps.ranges, 1)->frozen);
    run_for(f, 50);
    drv_stop(&d);
    assert_int_equal(d.other, 0);
    assert_int_equal(d.stale, 0);
    /* Everything acknowledged is still (only) on S. */
    drv_check(&d, f->s[0].ps.store);
    free(d.acked);
}

/* Long keys (PartitionKeys and RowKeys of 1000 characters, rows sharing
 * long prefixes, i.e. LMDB buckets) move like any other. */
static void test_move_long_keys(void **state)
{
    struct fx *f = *state;
    char pkfmt[1100], rkfmt[1100];
    Rt__MoveReq mr;
    Rt__Range rr;
    struct dump ds, dt;

    memset(pkfmt, 'P', 1000);
    strcpy(pkfmt + 1000, "%03d");
    memset(rkfmt, 'R', 600);
    strcpy(rkfmt + 600, "%04d");
    srv_start(f, 0);
    srv_start(f, 1);
    load(f, 0, 1, 1, "q%03d", rkfmt, 300, 100); /* short PK, long RK */
    load(f, 0, 1, 1, pkfmt, "r%04d", 300, 100); /* long PKs */
    load(f, 0, 1, 1, "P", "r%05d", 300, 100);   /* short, around them */
    /* Many rows of one long PK: one bucket. */
    pkfmt[1000] = '\0';
    load(f, 0, 1, 1, pkfmt, "row%05d", 200, 100);
    dump_table(f->s[0].ps.store, &ds);
    assert_int_equal(ds.n, 1100);

    move_req(&mr, &rr, f, 107, 1, 1);
    assert_int_equal(call(f, M.slot[0].conn, RT__METHOD__MOVE_OUT, &mr.base),
                     0);
    dump_table(f->s[1].ps.store, &dt);
    dump_equal(&ds, &dt);
    commit_to_target(f, 2);
    assert_int_equal(move_abort(f, 0, RT__METHOD__MOVE_DONE, 107, 1), 0);
    wait_span_drops(f, 0);
    assert_int_equal(span_count(f, 0), 0);
    assert_int_equal(span_count(f, 1), 1100);
    dump_free(&ds);
    dump_free(&dt);
}

/* A source restarted while frozen comes back frozen (the freeze is
 * persisted) until its registration settles the range: still listed ->
 * unfrozen; absent -> dropped and deleted. */
static void test_move_restart_frozen(void **state)
{
    struct fx *f = *state;
    Rt__MoveReq mr;
    Rt__Range rr;

    srv_start(f, 0);
    srv_start(f, 1);
    load(f, 0, 1, 1, "p", "k%06d", 3000, 1000);
    move_req(&mr, &rr, f, 108, 1, 1);
    assert_int_equal(call(f, M.slot[0].conn, RT__METHOD__MOVE_OUT, &mr.base),
                     0);

    /* Listed again at registration (the master aborted): unfrozen. */
    srv_stop(f, 0);
    M.slot[0].registers = 0;
    srv_restart(f, 0);
    assert_true(ps_ranges_find(&f->s[0].ps.ranges, 1)->frozen);
    assert_string_equal(state_of(f, 0, 1), "done");
    run_until(f, &f->s[0].ps.registered);
    assert_false(ps_ranges_find(&f->s[0].ps.ranges, 1)->frozen);
    assert_null(ps_move_out_state(&f->s[0].ps, 1));

    /* Frozen again by a new move, then absent at registration (the
     * master committed it): dropped and deleted. */
    {
        char addr[64];
        snprintf(addr, sizeof(addr), "127.0.0.1:%d", f->s[0].ps.port);
        assert_int_equal(
            rt_rpc_client_start(&f->loop, addr, NULL, th_rpc_conn_cb,
                                &f->s[0].cli_up, &f->s[0].cli),
            0);
        run_until(f, &f->s[0].cli_up);
    }
    assert_int_equal(write1(f, 0, 1, 1, "p", "k000000", "z"), 0);
    move_req(&mr, &rr, f, 109, 1, 1);
    assert_int_equal(call(f, M.slot[0].conn, RT__METHOD__MOVE_OUT, &mr.base),
                     0);
    srv_stop(f, 0);
    commit_to_target(f, 2);
    srv_restart(f, 0);
    assert_true(ps_ranges_find(&f->s[0].ps.ranges, 1)->frozen);
    run_until(f, &f->s[0].ps.registered);
    assert_null(ps_ranges_find(&f->s[0].ps.ranges, 1));
    wait_span_drops(f, 0);
    assert_int_equal(span_count(f, 0), 0);
    assert_int_equal(span_count(f, 1), 3000);
}

/* With server @i stopped: flips one bit of the last byte of the stored
 * value of (pk, rk). */
static void flip_value(struct fx *f, int i, const char *pk, const char *rk)
{
    struct rt_buf k = RT_BUF_INIT;
    rt_key_entity(&k, TABLE, pk, strlen(pk), rk, strlen(rk));
    assert_int_equal(
        th_lmdb_flip(f->s[i].data, "data", k.data, k.len, -1, 0x01), 0);
    rt_buf_free(&k);
}

/* A value that fails its checksum at the source fails the move (the
 * snapshot read answers RT_ECORRUPT) instead of reaching the target: S
 * unfreezes and keeps serving, T never holds the bad value, and
 * MOVE_ABORT empties T. */
static void test_move_corrupt_source(void **state)
{
    struct fx *f = *state;
    struct rt_buf v = RT_BUF_INIT;
    Rt__MoveReq mr;
    Rt__Range rr;
    int rc;

    srv_start(f, 0);
    srv_start(f, 1);
    load(f, 0, 1, 1, "p", "k%06d", 3000, 1000);
    srv_stop(f, 0);
    flip_value(f, 0, "p", "k001500");
    srv_start(f, 0);
    move_req(&mr, &rr, f, 112, 1, 1);
    rc = call(f, M.slot[0].conn, RT__METHOD__MOVE_OUT, &mr.base);
    printf("    corrupt value at the source: MOVE_OUT -> %s\n",
           rt_err_name(rc));
    assert_int_equal(rc, RT_ECORRUPT);
    assert_null(ps_move_out_state(&f->s[0].ps, 1));
    assert_false(ps_ranges_find(&f->s[0].ps.ranges, 1)->frozen);
    assert_int_equal(get1(f, 0, 1, 1, "p", "k000000"), 0);
    assert_int_equal(get1(f, 0, 1, 1, "p", "k001500"), RT_ECORRUPT);
    assert_int_equal(ps_store_get(f->s[1].ps.store, TABLE, "p", "k001500", &v),
                     RT_ENOTFOUND);
    assert_true(span_count(f, 1) < 3000);
    assert_int_equal(move_abort(f, 1, RT__METHOD__MOVE_ABORT, 112, 1), 0);
    wait_span_drops(f, 1);
    assert_int_equal(span_count(f, 1), 0);
    rt_buf_free(&v);
}

/* A target restarted before the master decided keeps what it received;
 * MOVE_ABORT after the restart deletes it, and an assignment would have
 * served it. Moves sent to a stopping server get Busy. */
static void test_move_target_restart(void **state)
{
    struct fx *f = *state;
    Rt__MoveReq mr;
    Rt__Range rr;

    srv_start(f, 0);
    srv_start(f, 1);
    load(f, 0, 1, 1, "p", "k%06d", 3000, 1000);
    move_req(&mr, &rr, f, 110, 1, 1);
    assert_int_equal(call(f, M.slot[0].conn, RT__METHOD__MOVE_OUT, &mr.base),
                     0);
    srv_stop(f, 1);
    srv_restart(f, 1);
    run_until(f, &f->s[1].ps.registered);
    assert_int_equal(span_count(f, 1), 3000);
    assert_int_equal(move_abort(f, 1, RT__METHOD__MOVE_ABORT, 110, 1), 0);
    assert_int_equal(move_abort(f, 0, RT__METHOD__MOVE_ABORT, 110, 1), 0);
    wait_span_drops(f, 1);
    assert_int_equal(span_count(f, 1), 0);
    assert_false(ps_ranges_find(&f->s[0].ps.ranges, 1)->frozen);

    /* A stopping server refuses to take part. */
    {
        struct th_reply r;
        Rt__MigrateBegin mb = RT__MIGRATE_BEGIN__INIT;
        mb.move_id = 111;
        mb.range = &rr;
        call_async(M.slot[1].conn, RT__METHOD__MIGRATE_BEGIN, &mb.base, &r);
        f->s[1].ps.stopping = 1; /* as ps_server_stop sets it first */
        run_until(f, &r.done);
        f->s[1].ps.stopping = 0;
        assert_int_equal(r.status, RT_EBUSY);
        rt_buf_free(&r.body);
    }
}

/* Tests: throttling */

static void send_writes(struct fx *f, int n, struct th_multi *m, int *key)
{
    struct rt_buf props = RT_BUF_INIT;
    Rt__RangeRef ref = RT__RANGE_REF__INIT;
    Rt__EntityOp op = RT__ENTITY_OP__INIT;
    Rt__EntityOp *ops[1] = {&op};
    Rt__WriteReq req = RT__WRITE_REQ__INIT;
    char rk[16];

    th_props1(&props, "v", "t");
    ref.table_id = TABLE;
    ref.range_id = 1;
    ref.epoch = 1;
    op.kind = RT__OP_KIND__OP_UPSERT_REPLACE;
    op.pk = "p";
    op.rk = rk;
    op.props.data = props.data;
    op.props.len = props.len;
    req.route = &ref;
    req.n_ops = 1;
    req.ops = ops;
    for (int i = 0; i < n; i++) {
        snprintf(rk, sizeof(rk), "%06d", (*key)++);
        m->outstanding++;
        assert_int_equal(rt_rpc_call_pb(rt_rpc_client_conn(f->s[0].cli),
                                        RT__METHOD__ENTITY_WRITE, &req.base,
                                        30000, th_rpc_multi_cb, m),
                         0);
    }
    rt_buf_free(&props);
}

static void wait_multi(struct fx *f, struct th_multi *m)
{
    while (m->outstanding > 0) {
        uv_run(&f->loop, UV_RUN_ONCE);
    }
}

/* With --max-range-eps 1000, a burst far above the rate is partly refused
 * with ServerBusy (counted as throttled in the heartbeat, caps reported);
 * writes paced below the rate are never refused. The server cap works the
 * same way, and reads count one per entity returned. */
static void test_throttle(void **state)
{
    struct fx *f = *state;
    struct th_multi m;
    int key = 0;
    uint64_t t0, ms;

    f->s[0].max_range_eps = 1000;
    srv_start(f, 0);

    /* Above: 3000 writes at once. */
    memset(&m, 0, sizeof(m));
    t0 = uv_hrtime();
    send_writes(f, 3000, &m, &key);
    wait_multi(f, &m);
    ms = (uv_hrtime() - t0) / 1000000;
    printf(
        "    burst of 3000 writes at a 1000/s range cap: %d ok, %d busy "
        "in %llu ms\n",
        m.ok, m.busy, (unsigned long long)ms);
    assert_int_equal(m.other, 0);
    assert_true(m.busy > 0);
    assert_true((uint64_t)m.ok <= 100 + 1 + ms * 1000 / 1000 + 50);

    /* Below: 20 writes every 50 ms for 1 s = 400/s. */
    run_for(f, 200);
    memset(&m, 0, sizeof(m));
    for (int i = 0; i < 20; i++) {
        send_writes(f, 20, &m, &key);
        run_for(f, 50);
    }
    wait_multi(f, &m);
    printf("    paced 400 writes/s at a 1000/s cap: %d ok, %d busy\n", m.ok,
           m.busy);
    assert_int_equal(m.busy, 0);
    assert_int_equal(m.ok, 400);

    /* Reads: 30 gets every 50 ms = 600/s, below. */
    for (int i = 0; i < 10; i++) {
        for (int j = 0; j < 30; j++) {
            char rk[16];
            snprintf(rk, sizeof(rk), "%06d", j);
            assert_int_not_equal(get1(f, 0, 1, 1, "p", rk), RT_EBUSY);
        }
        run_for(f, 50);
    }

    int hb = M.slot[0].heartbeats + 2;
    while (M.slot[0].heartbeats < hb) {
        uv_run(&f->loop, UV_RUN_ONCE);
    }
    assert_true(M.slot[0].hb_throttled >= (uint64_t)1);
    assert_int_equal(M.slot[0].hb_max_range_eps, 1000);
    assert_int_equal(M.slot[0].hb_max_server_eps, 0);
    srv_stop(f, 0);

    /* The server-wide cap. */
    f->s[0].max_range_eps = 0;
    f->s[0].max_server_eps = 500;
    srv_start(f, 0);
    memset(&m, 0, sizeof(m));
    send_writes(f, 2000, &m, &key);
    wait_multi(f, &m);
    printf("    burst of 2000 writes at a 500/s server cap: %d ok, %d busy\n",
           m.ok, m.busy);
    assert_true(m.busy > 0);
    assert_int_equal(m.other, 0);
    hb = M.slot[0].heartbeats + 2;
    while (M.slot[0].heartbeats < hb) {
        uv_run(&f->loop, UV_RUN_ONCE);
    }
    assert_int_equal(M.slot[0].hb_max_server_eps, 500);
}

/* Tests: metrics */

static void http_get(int port, const char *path, struct rt_buf *out)
{
    struct sockaddr_in a;
    char req[256], buf[4096];
    ssize_t n;
    int fd = socket(AF_INET, SOCK_STREAM, 0);

    assert_true(fd >= 0);
    memset(&a, 0, sizeof(a));
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
    snprintf(req, sizeof(req),
             "GET %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", path);
    assert_true(write(fd, req, strlen(req)) == (ssize_t)strlen(req));
    while ((n = read(fd, buf, sizeof(buf))) > 0) {
        rt_buf_append(out, buf, (size_t)n);
    }
    close(fd);
    rt_buf_cstr(out);
}

/* --http serves Prometheus metrics (per-range counters, group commit
 * sizes, pending ops, moves) and /health, from a snapshot the loop
 * refreshes every second; the port file names the port. */
static void test_metrics_http(void **state)
{
    struct fx *f = *state;
    struct rt_buf body = RT_BUF_INIT;
    char pf[256];
    FILE *fp;
    int http_port = -1;

    f->s[0].http = "127.0.0.1:0";
    srv_start(f, 0);
    assert_true(f->s[0].ps.http_port > 0);
    fp = fopen(f->s[0].port_file, "r");
    assert_non_null(fp);
    while (fgets(pf, sizeof(pf), fp)) {
        sscanf(pf, "http=%d", &http_port);
    }
    fclose(fp);
    assert_int_equal(http_port, f->s[0].ps.http_port);

    load(f, 0, 1, 1, "p", "k%06d", 500, 100);
    run_for(f, 1200);
    http_get(http_port, "/metrics", &body);
    assert_non_null(strstr((char *)body.data, "200 OK"));
    assert_non_null(strstr((char *)body.data,
                           "rt_ps_range_entities_total{range=\"1\","
                           "table=\"5\"} 500"));
    assert_non_null(
        strstr((char *)body.data, "rt_ps_range_requests_total{range=\"1\""));
    assert_non_null(strstr((char *)body.data,
                           "rt_ps_group_commit_size_bucket{le=\"+Inf\"}"));
    assert_non_null(strstr((char *)body.data, "rt_ps_pending_ops 0"));
    assert_non_null(strstr((char *)body.data, "rt_ps_moves_out 0"));
    assert_non_null(strstr((char *)body.data,
                           "rt_ps_range_keys{range=\"1\","
                           "table=\"5\"} 500"));
    rt_buf_reset(&body);
    http_get(http_port, "/health", &body);
    assert_non_null(strstr((char *)body.data, "200 OK"));
    rt_buf_reset(&body);
    http_get(http_port, "/nope", &body);
    assert_non_null(strstr((char *)body.data, "404"));
    rt_buf_free(&body);
}

/* Tests: real processes, SIGKILL */

#ifdef RT_PS_BINARY

static int free_port(void)
{
    struct sockaddr_in a;
    socklen_t len = sizeof(a);
    int fd = socket(AF_INET, SOCK_STREAM, 0), port;
    assert_true(fd >= 0);
    memset(&a, 0, sizeof(a));
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &len), 0);
    port = ntohs(a.sin_port);
    close(fd);
    return port;
}

/* Starts (or restarts, same port) server @i as a process and waits until
 * it registered and its /metrics port is known. */
static void proc_start(struct fx *f, int i)
{
    struct srv *s = &f->s[i];
    char listen[64], chunk[16];
    int before = M.slot[i].registers;
    uint64_t end;
    pid_t pid;

    if (!s->port) {
        s->port = free_port();
        snprintf(s->log, sizeof(s->log), "%s/ps%d.log", f->dir, i);
    }
    snprintf(listen, sizeof(listen), "127.0.0.1:%d", s->port);
    snprintf(M.slot[i].addr, sizeof(M.slot[i].addr), "%s", listen);
    snprintf(chunk, sizeof(chunk), "%d", 1);
    unlink(s->port_file);
    fflush(NULL);
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (!freopen(s->log, "a", stdout) || !freopen(s->log, "a", stderr)) {
            _exit(126);
        }
        execl(RT_PS_BINARY, "rt-partition-server", "--listen", listen,
              "--master", f->master_addr, "--data", s->data, "--port-file",
              s->port_file, "--http", "127.0.0.1:0", "--map-size-mb", "256",
              "--move-chunk-kb", chunk, "--log-level", "warn", "--insecure-rpc",
              (char *)NULL);
        _exit(127);
    }
    s->pid = pid;
    end = uv_now(&f->loop) + RUN_LIMIT_MS;
    while (M.slot[i].registers == before || access(s->port_file, F_OK)) {
        run_for(f, 5);
        assert_true(uv_now(&f->loop) < end);
        assert_int_equal(waitpid(pid, NULL, WNOHANG), 0); /* alive */
    }
    {
        FILE *fp = fopen(s->port_file, "r");
        char line[64];
        assert_non_null(fp);
        while (fgets(line, sizeof(line), fp)) {
            sscanf(line, "http=%d", &s->http_port);
        }
        fclose(fp);
    }
    if (!s->cli) {
        assert_int_equal(
            rt_rpc_client_start(&f->loop, listen, NULL, th_rpc_conn_cb,
                                &s->cli_up, &s->cli),
            0);
    }
    run_until(f, &s->cli_up);
}

/* Signals server process @i and reaps it; fails on sanitizer reports. */
static void proc_stop(struct fx *f, int i, int sig)
{
    struct srv *s = &f->s[i];
    struct rt_buf log = RT_BUF_INIT;
    char buf[4096];
    size_t n;
    int st = 0;
    FILE *fp;

    assert_int_equal(kill(s->pid, sig), 0);
    assert_int_equal(waitpid(s->pid, &st, 0), s->pid);
    s->pid = 0;
    if (sig == SIGTERM) {
        assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    }
    fp = fopen(s->log, "r");
    assert_non_null(fp);
    while ((n = fread(buf, 1, sizeof(buf), fp)) > 0) {
        rt_buf_append(&log, buf, n);
    }
    fclose(fp);
    rt_buf_cstr(&log);
    if (strstr((char *)log.data, "AddressSanitizer") ||
        strstr((char *)log.data, "runtime error:")) {
        fprintf(stderr, "%s\n", (char *)log.data);
        fail_msg("sanitizer report in %s", s->log);
    }
    rt_buf_free(&log);
    (void)f;
}

/* Opens the store of a stopped server process for checks. */
static struct ps_store *proc_store(struct fx *f, int i)
{
    struct ps_store *st = NULL;
    char errmsg[RT_ERRMSG_SIZE] = "";
    assert_int_equal(
        ps_store_open(f->s[i].data, 256u * 1024u * 1024u, &st, errmsg), 0);
    return st;
}

/* LMDB records of the running server process @i (its "data" DB, read
 * from this process; LMDB allows readers in other processes). */
static size_t proc_records(struct fx *f, int i)
{
    MDB_env *env;
    MDB_txn *txn;
    MDB_dbi dbi;
    MDB_stat ms;
    size_t n = 0;

    assert_int_equal(mdb_env_create(&env), 0);
    mdb_env_set_maxdbs(env, 4);
    mdb_env_set_mapsize(env, 256u * 1024u * 1024u);
    assert_int_equal(
        mdb_env_open(env, f->s[i].data, MDB_RDONLY | MDB_NOTLS, 0644), 0);
    assert_int_equal(mdb_txn_begin(env, NULL, MDB_RDONLY, &txn), 0);
    if (mdb_dbi_open(txn, "data", 0, &dbi) == 0 &&
        mdb_stat(txn, dbi, &ms) == 0) {
        n = ms.ms_entries;
    }
    mdb_txn_abort(txn);
    mdb_env_close(env);
    return n;
}

/* Polls server @i's /metrics until it contains @needle. */
static void wait_metric(struct fx *f, int i, const char *needle)
{
    uint64_t end = uv_now(&f->loop) + RUN_LIMIT_MS;
    for (;;) {
        struct rt_buf body = RT_BUF_INIT;
        int found;
        http_get(f->s[i].http_port, "/metrics", &body);
        found = strstr((char *)body.data, needle) != NULL;
        rt_buf_free(&body);
        if (found) {
            return;
        }
        run_for(f, 20);
        assert_true(uv_now(&f->loop) < end);
    }
}

enum kill_case {
    KILL_SOURCE_COPYING,   /* the move aborts; S keeps everything */
    KILL_TARGET_COPYING,   /* S unfreezes at once; T's copy is deleted */
    KILL_SOURCE_COMMITTED, /* S frozen when killed; master commits */
    KILL_SOURCE_ABORTED,   /* S frozen when killed; master aborts */
};

/* One SIGKILL scenario with real processes and a front end writing all
 * along: no acknowledged write is lost or duplicated, whichever way the
 * move ends. */
static void kill_scenario(struct fx *f, enum kill_case kc)
{
    Rt__MoveReq mr;
    Rt__Range rr;
    struct th_reply r;
    struct driver d;
    struct ps_store *st;
    int committed = kc == KILL_SOURCE_COMMITTED;
    const int n = 30000;

    proc_start(f, 0);
    proc_start(f, 1);
    load(f, 0, 1, 1, "p", "k%07d", n, 1000);
    drv_start(&d, f, n);
    run_for(f, 50);
    move_req(&mr, &rr, f, 201, 1, 1);
    call_async(M.slot[0].conn, RT__METHOD__MOVE_OUT, &mr.base, &r);

    switch (kc) {
        case KILL_SOURCE_COPYING:
        case KILL_TARGET_COPYING: {
            /* Mid-copy: the target holds part of the snapshot. */
            size_t got = 0;
            uint64_t end = uv_now(&f->loop) + RUN_LIMIT_MS;
            while ((got = proc_records(f, 1)) < 2000) {
                run_for(f, 1);
                assert_true(uv_now(&f->loop) < end);
            }
            assert_true(got < (size_t)n);
            assert_false(r.done);
            printf("    killing the %s with %zu of %d records copied\n",
                   kc == KILL_SOURCE_COPYING ? "source" : "target", got, n);
            if (kc == KILL_SOURCE_COPYING) {
                proc_stop(f, 0, SIGKILL);
                run_until(f, &r.done);
                assert_int_not_equal(r.status, 0);
                proc_start(f, 0); /* registration lists range 1: serving */
            } else {
                proc_stop(f, 1, SIGKILL);
                run_until(f, &r.done);
                assert_int_not_equal(r.status, 0); /* and S unfroze */
                proc_start(f, 1);
            }
            assert_int_equal(move_abort(f, 1, RT__METHOD__MOVE_ABORT, 201, 1),
                             0);
            assert_int_equal(move_abort(f, 0, RT__METHOD__MOVE_ABORT, 201, 1),
                             0);
            break;
        }
        case KILL_SOURCE_COMMITTED:
        case KILL_SOURCE_ABORTED:
            run_until(f, &r.done);
            assert_int_equal(r.status, 0);
            proc_stop(f, 0, SIGKILL); /* frozen, before MOVE_DONE */
            if (committed) {
                commit_to_target(f, 2); /* S's registration: range absent */
            }
            proc_start(f, 0);
            if (!committed) {
                /* Listed at registration: S unfroze; T drops its copy. */
                assert_int_equal(
                    move_abort(f, 1, RT__METHOD__MOVE_ABORT, 201, 1), 0);
            }
            break;
    }
    rt_buf_free(&r.body);
    run_for(f, 300);
    drv_stop(&d);
    printf(
        "    %s: %d writes acknowledged, %d busy, %d stale, %d failed "
        "(server down) and resent\n",
        kc == KILL_SOURCE_COPYING   ? "source killed mid-copy"
        : kc == KILL_TARGET_COPYING ? "target killed mid-copy"
        : committed                 ? "source killed frozen, move committed"
                                    : "source killed frozen, move aborted",
        d.ok, d.busy, d.stale, d.other);
    assert_true(d.ok > 0);
    if (!committed) {
        assert_int_equal(d.stale, 0); /* never left S */
    }
    /* Wait for the background deletions, then stop and look inside. */
    run_for(f, 1500);
    wait_metric(f, committed ? 0 : 1, "rt_ps_span_drops 0");
    proc_stop(f, 0, SIGTERM);
    proc_stop(f, 1, SIGTERM);
    st = proc_store(f, committed ? 1 : 0);
    drv_check(&d, st);
    ps_store_close(st);
    st = proc_store(f, committed ? 0 : 1);
    {
        struct ps_span sp = {TABLE, "", NULL};
        uint64_t cnt = 1;
        assert_int_equal(ps_store_span_count(st, &sp, &cnt), 0);
        assert_int_equal(cnt, 0); /* the other side's copy is gone */
    }
    ps_store_close(st);
    free(d.acked);
}

/* SIGKILL of the source in the middle of the copy: the move aborts, the
 * source comes back serving, nothing acknowledged is lost. */
static void test_kill_source_copying(void **state)
{
    kill_scenario(*state, KILL_SOURCE_COPYING);
}

/* SIGKILL of the target in the middle of the copy: the source unfreezes
 * by itself and answers an error; the target's partial copy is deleted. */
static void test_kill_target_copying(void **state)
{
    kill_scenario(*state, KILL_TARGET_COPYING);
}

/* SIGKILL of a frozen source whose move the master then commits: it comes
 * back frozen, drops the range at registration, the target has it all. */
static void test_kill_source_committed(void **state)
{
    kill_scenario(*state, KILL_SOURCE_COMMITTED);
}

/* SIGKILL of a frozen source whose move the master then aborts: it comes
 * back frozen and unfreezes at registration, with everything. */
static void test_kill_source_aborted(void **state)
{
    kill_scenario(*state, KILL_SOURCE_ABORTED);
}

#endif

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_split_merge_assign, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_move_under_writes, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_move_abort_mid_stream, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_move_target_down, setup, teardown),
        cmocka_unit_test_setup_teardown(test_move_target_down_frozen, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_move_long_keys, setup, teardown),
        cmocka_unit_test_setup_teardown(test_move_restart_frozen, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_move_corrupt_source, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_move_target_restart, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_throttle, setup, teardown),
        cmocka_unit_test_setup_teardown(test_metrics_http, setup, teardown),
#ifdef RT_PS_BINARY
        cmocka_unit_test_setup_teardown(test_kill_source_copying, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_kill_target_copying, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_kill_source_committed, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_kill_source_aborted, setup,
                                        teardown),
#endif
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
