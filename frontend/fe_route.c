/* Routing and RPC on the loop thread: see fe_route.h.
 *
 * Happy path of an entity job: fe_route_submit -> fe__job_run ->
 * fe__job_entity (table and range from the cached map) -> rt_rpc_call_pb to
 * the range's server -> fe__on_*_reply copies the reply into the job ->
 * fe__job_finish fires done_cb.
 *
 * Failure modes and what the caller sees:
 * - table not in the map: one GET_MAP (shared by every job waiting for it),
 *   then RT_ETABLENOTFOUND (GET_TABLE: RT_ENOTFOUND);
 * - no range for the key, server unknown or not connected in time,
 *   RT_ESTALE or RT_ENOTPRIMARY (the server refused before executing),
 *   RT_ENOTSENT (the request never reached the socket: the partition-server
 *   clients report it, rt_rpc_conn_report_unsent), or RT_ENOCONN for a
 *   read or scan (nothing to undo): wait FE_ROUTE_WAIT1_MS before the
 *   second try and FE_ROUTE_WAIT2_MS before the third (a timer on the loop;
 *   a failover's map takes a moment to arrive), refresh the map and send
 *   again on whatever connection is up by then, FE_ROUTE_TRIES sends in
 *   all, then RT_EBUSY (503 ServerBusy: nothing was executed);
 * - RT_ENOCONN for a write: the request was written, so the write may have
 *   reached the server and committed before it died; it is returned as
 *   RT_ETIMEDOUT (500 OperationTimedOut, outcome unknown) and never sent
 *   again, since a retry would turn an applied insert into 409 and a 503
 *   would claim nothing happened (DESIGN-replication.md §4, §5.5);
 * - RT_EBUSY from a server (admission refused, too few in-sync replicas):
 *   returned as is, 503 ServerBusy at once. Nothing was executed, but the
 *   server is the bottleneck: the SDK retries a 503 after its own growing
 *   back-off, and front-end retries on top would multiply the load it
 *   refused;
 * - GET_MAP fails (master down): RT_EBUSY;
 * - a master that is not the leader answers RT_ENOTLEADER: it executed
 *   nothing; the link moves to the leader it names or the next master
 *   (where FE_HELLO brings the map again) and the operation is sent again
 *   like a retryable hop (FE_ROUTE_TRIES), then 503 ServerBusy, which the
 *   SDK retries;
 * - RT_ETIMEDOUT (no reply in FE_ROUTE_TIMEOUT_MS): a write's is returned
 *   as is (500 OperationTimedOut), never retried: it may have happened; a
 *   read or scan hop is tried again like RT_ENOCONN;
 * - a map naming another server, or none, for the key of a call in flight
 *   (the master failed the range over or moved it; fe__calls_moved):
 *   the call is abandoned and its late reply dropped; a read or scan hop
 *   is sent again at once to the new owner (one of its tries), a write
 *   ends RT_ETIMEDOUT (outcome unknown, never resent);
 * - other server/master errors: returned as is (rt_err.h maps them);
 * - fe_route_close: RT_ECANCELED for everything in flight and later.
 *
 * Scans (FE_JOB_SCAN) start at max(continuation key, filter's lowest
 * PartitionKey), so the first range visited is the one holding that key.
 * A page then walks range by range until: the page is full; a server says
 * its range has more (resume at its next key); a server says ScanResp.done
 * or the next range starts after the filter's highest PartitionKey (no
 * continuation: nothing later can match); FE_ROUTE_MAX_HOPS ranges were
 * visited or the page budget (job->budget_ms, shared by all hops; each
 * ScanReq gets what is left) is spent (continuation at the next range's
 * low key; the page may be empty). */
#include "fe_route.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "fe_metrics.h"
#include "fe_url.h"
#include "rt.pb-c.h"
#include "rt_alloc.h"
#include "rt_log.h"
#include "rt_masters.h"
#include "rt_rpc.h"
#include "rt_time.h"
#include "rt_utf8.h"

struct fe__table_ix
{
    const char *account;        /* borrowed from the map message */
    char lname[FE_TABLE_LNAME]; /* fe_table_lname */
    const char *name;
    uint64_t id;
};

struct fe__map
{
    Rt__Map *pb;                 /* owned (rt__map__free_unpacked) */
    struct fe__table_ix *tables; /* sorted by (account, lname) */
    size_t ntables;
    Rt__Range **ranges; /* sorted by (table_id, low) */
    size_t nranges;
    Rt__Server **servers; /* sorted by id */
    size_t nservers;
};

/* Jobs waiting in order, linked through fe_job.wait_next_. */
struct fe__jobq
{
    struct fe_job *head;
    struct fe_job *tail;
};

struct fe__ps
{
    struct fe_route *route;
    uint64_t id;
    char *addr;
    struct rt_rpc_client *client;
    struct fe__jobq wait; /* parked until the connection is up */
};

struct fe_route
{
    uv_loop_t *loop;
    struct rt_masters_link *master_link; /* follows the acting master */
    struct rt_rpc_client *master;        /* master_link's client */
    struct fe__map map;
    int have_map;
    struct fe__ps **ps; /* stable pointers: client callbacks keep them */
    size_t nps;
    size_t ps_cap;
    uv_timer_t tick;       /* expires parked jobs */
    int parked;            /* jobs parked on any server */
    uv_timer_t wait_timer; /* fires when the first waiting retry is due */
    /* Jobs waiting for their second ([0]) and third ([1]) try. Each wait
     * has one length, so each queue is in retry_at_ order. */
    struct fe__jobq retries[FE_ROUTE_TRIES - 1];
    int map_inflight;
    struct fe__jobq wait;   /* waiting for GET_MAP */
    unsigned inflight;      /* RPCs whose reply callback has not fired */
    struct fe__call *calls; /* entity RPCs in flight (doubly linked) */
    int closing;
    fe_route_map_cb map_cb; /* observer of installed maps, or NULL */
    void *map_cb_data;
    struct fe_metrics_shard *metrics; /* NULL: none */
    uint64_t map_sent_us;             /* GET_MAP in flight: sent at */
    struct fe__pb_arena *arena;       /* decodes entity replies */
};

/* One entity RPC in flight: what it was sent to, so that a map naming
 * another server for its key can take the job off it (fe__calls_moved).
 * An abandoned call has no job; its reply, if one ever comes, is dropped. */
struct fe__call
{
    struct fe__call *prev;
    struct fe__call *next;
    struct fe__call *moved_next; /* fe__calls_moved's list */
    struct fe_route *route;
    struct fe_job *job; /* NULL once abandoned */
    uint64_t server_id;
    uint64_t table_id;
    char *key; /* the PartitionKey that chose the range */
    /* SCAN: the range's high key, for the reply (the map may change while
     * the RPC is out). */
    char *high;
    int high_inf;
    uint64_t sent_us; /* metrics: RPC latency */
};

static void fe__job_run(struct fe_job *job);
static void fe__job_entity(struct fe_job *job);
static void fe__calls_moved(struct fe_route *r);
static void fe__job_retry(struct fe_job *job, int why);
static void fe__on_tick(uv_timer_t *t);

/* ---- Jobs ----------------------------------------------------------- */

static void fe__jobq_push(struct fe__jobq *q, struct fe_job *job)
{
    job->wait_next_ = NULL;
    if (q->tail) {
        q->tail->wait_next_ = job;
    } else {
        q->head = job;
    }
    q->tail = job;
}

/* The first job, unlinked, or NULL when @q is empty. */
static struct fe_job *fe__jobq_pop(struct fe__jobq *q)
{
    struct fe_job *job = q->head;
    if (job) {
        q->head = job->wait_next_;
        if (!q->head) {
            q->tail = NULL;
        }
        job->wait_next_ = NULL;
    }
    return job;
}

/* Empties @q: the jobs it held, for the caller to pop. */
static struct fe__jobq fe__jobq_take(struct fe__jobq *q)
{
    struct fe__jobq all = *q;
    q->head = q->tail = NULL;
    return all;
}

void fe_job_init(struct fe_job *job, enum fe_job_kind kind)
{
    memset(job, 0, sizeof(*job));
    job->kind = kind;
    job->fail_index = -1;
    rt_buf_init(&job->value);
    rt_buf_init(&job->next_pk);
    rt_buf_init(&job->next_rk);
    rt_buf_init(&job->cur_pk_);
    rt_buf_init(&job->cur_rk_);
}

void fe_job_free(struct fe_job *job)
{
    for (size_t i = 0; i < job->nops; i++) {
        free(job->ops[i].pk);
        free(job->ops[i].rk);
        rt_buf_free(&job->ops[i].props);
        rt_buf_free(&job->ops[i].value);
    }
    free(job->ops);
    for (size_t i = 0; i < job->nents; i++) {
        free(job->ents[i].pk); /* and rk and value, in the same block */
    }
    free(job->ents);
    for (size_t i = 0; i < job->ntables; i++) {
        free(job->tables[i].name);
    }
    free(job->tables);
    free(job->next_table);
    free(job->table_name);
    rt_buf_free(&job->value);
    rt_buf_free(&job->next_pk);
    rt_buf_free(&job->next_rk);
    rt_buf_free(&job->cur_pk_);
    rt_buf_free(&job->cur_rk_);
    job->ops = NULL;
    job->nops = 0;
    job->ents = NULL;
    job->nents = 0;
    job->tables = NULL;
    job->ntables = 0;
    job->next_table = NULL;
    job->table_name = NULL;
}

struct fe_job_op *fe_job_add_op(struct fe_job *job,
                                int kind,
                                const char *pk,
                                const char *rk)
{
    struct fe_job_op *op;
    job->ops = rt_xrealloc(job->ops, (job->nops + 1) * sizeof(*job->ops));
    op = &job->ops[job->nops++];
    memset(op, 0, sizeof(*op));
    op->kind = kind;
    op->pk = rt_xstrdup(pk);
    op->rk = rt_xstrdup(rk);
    rt_buf_init(&op->props);
    rt_buf_init(&op->value);
    return op;
}

static void fe__job_finish(struct fe_job *job, int status)
{
    if (job->finished_) {
        return;
    }
    job->finished_ = 1;
    job->status = status;
    job->done_cb(job);
}

static void fe__job_set_table(struct fe_job *job, const char *name, uint64_t id)
{
    if (!job->table_name || strcmp(job->table_name, name) != 0) {
        free(job->table_name);
        job->table_name = rt_xstrdup(name);
    }
    job->table_id = id;
}

/* ---- The map -------------------------------------------------------- */

static int fe__table_cmp(const void *a, const void *b)
{
    const struct fe__table_ix *x = a, *y = b;
    int c = strcmp(x->account, y->account);
    return c ? c : strcmp(x->lname, y->lname);
}

static int fe__range_cmp(const void *a, const void *b)
{
    const Rt__Range *x = *(Rt__Range *const *)a;
    const Rt__Range *y = *(Rt__Range *const *)b;
    if (x->table_id != y->table_id) {
        return x->table_id < y->table_id ? -1 : 1;
    }
    return rt_utf16_cmpz(x->low, y->low);
}

static int fe__server_cmp(const void *a, const void *b)
{
    const Rt__Server *x = *(Rt__Server *const *)a;
    const Rt__Server *y = *(Rt__Server *const *)b;
    return x->id < y->id ? -1 : x->id > y->id;
}

/* A sorted copy of the @n elements of @size bytes at @src (malloc'd, never
 * NULL); the map's index arrays, whose messages stay the map's. */
static void *fe__sorted_copy(const void *src,
                             size_t n,
                             size_t size,
                             int (*cmp)(const void *, const void *))
{
    void *ix = rt_xrealloc(NULL, (n + 1) * size);
    if (n) {
        memcpy(ix, src, n * size);
    }
    qsort(ix, n, size, cmp);
    return ix;
}

static void fe__map_free(struct fe__map *m)
{
    if (m->pb) {
        rt__map__free_unpacked(m->pb, NULL);
    }
    free(m->tables);
    free(m->ranges);
    free(m->servers);
    memset(m, 0, sizeof(*m));
}

/* Takes @pb. */
static void fe__map_install(struct fe_route *r,
                            Rt__Map *pb,
                            int force,
                            const char *why)
{
    struct fe__map m;
    if (!force && r->have_map && pb->version < r->map.pb->version) {
        rt_log(RT_LOG_DEBUG, "ignoring map version %llu (have %llu)",
               (unsigned long long)pb->version,
               (unsigned long long)r->map.pb->version);
        rt__map__free_unpacked(pb, NULL);
        return;
    }
    memset(&m, 0, sizeof(m));
    m.pb = pb;
    m.tables = rt_xrealloc(NULL, (pb->n_tables + 1) * sizeof(*m.tables));
    for (size_t i = 0; i < pb->n_tables; i++) {
        struct fe__table_ix *t = &m.tables[m.ntables++];
        t->account = pb->tables[i]->account;
        fe_table_lname(t->lname, pb->tables[i]->name);
        t->name = pb->tables[i]->name;
        t->id = pb->tables[i]->id;
    }
    qsort(m.tables, m.ntables, sizeof(*m.tables), fe__table_cmp);
    m.ranges = fe__sorted_copy(pb->ranges, pb->n_ranges, sizeof(*m.ranges),
                               fe__range_cmp);
    m.nranges = pb->n_ranges;
    m.servers = fe__sorted_copy(pb->servers, pb->n_servers, sizeof(*m.servers),
                                fe__server_cmp);
    m.nservers = pb->n_servers;

    fe__map_free(&r->map);
    r->map = m;
    r->have_map = 1;
    if (r->map_cb) {
        r->map_cb(pb, r->map_cb_data);
    }
    rt_log(RT_LOG_DEBUG,
           "map version %llu installed (%s): %zu tables, "
           "%zu ranges, %zu servers",
           (unsigned long long)pb->version, why, m.ntables, m.nranges,
           m.nservers);
    fe__calls_moved(r);
}

static const struct fe__table_ix *fe__map_table(const struct fe_route *r,
                                                const char *account,
                                                const char *name)
{
    struct fe__table_ix key;
    if (!r->have_map || strlen(name) >= sizeof(key.lname)) {
        return NULL;
    }
    key.account = account;
    fe_table_lname(key.lname, name);
    return bsearch(&key, r->map.tables, r->map.ntables, sizeof(key),
                   fe__table_cmp);
}

/* The range of table @tid holding @pk, or NULL (hole: stale map). */
static const Rt__Range *fe__map_range(const struct fe_route *r,
                                      uint64_t tid,
                                      const char *pk)
{
    size_t lo = 0, hi = r->map.nranges;
    const Rt__Range *rg;
    /* Last range with (table_id, low) <= (tid, pk). */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const Rt__Range *x = r->map.ranges[mid];
        if (x->table_id < tid ||
            (x->table_id == tid && rt_utf16_cmpz(x->low, pk) <= 0)) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    if (lo == 0) {
        return NULL;
    }
    rg = r->map.ranges[lo - 1];
    if (rg->table_id != tid) {
        return NULL;
    }
    if (!rg->high_inf && rt_utf16_cmpz(pk, rg->high) >= 0) {
        return NULL;
    }
    return rg;
}

static const Rt__Server *fe__map_server(const struct fe_route *r, uint64_t id)
{
    Rt__Server key = RT__SERVER__INIT;
    Rt__Server *kp = &key;
    Rt__Server **s;
    if (!r->have_map) {
        return NULL;
    }
    key.id = id;
    s = bsearch(&kp, r->map.servers, r->map.nservers, sizeof(kp),
                fe__server_cmp);
    return s ? *s : NULL;
}

static void fe__on_ps_conn(struct rt_rpc_conn *conn, int up, void *ud);

/* The client for server @id (created on first use, its address kept in
 * step with the map). NULL if the map lacks the server. */
static struct fe__ps *fe__ps_get(struct fe_route *r, uint64_t id)
{
    const Rt__Server *srv = fe__map_server(r, id);
    struct fe__ps *p = NULL;
    if (!srv || !srv->addr[0]) {
        return NULL;
    }
    for (size_t i = 0; i < r->nps; i++) {
        if (r->ps[i]->id == id) {
            p = r->ps[i];
            break;
        }
    }
    if (p && strcmp(p->addr, srv->addr) != 0) {
        rt_log(RT_LOG_INFO, "server %llu moved %s -> %s",
               (unsigned long long)id, p->addr, srv->addr);
        if (rt_rpc_client_set_addr(p->client, srv->addr) != 0) {
            return NULL;
        }
        free(p->addr);
        p->addr = rt_xstrdup(srv->addr);
    }
    if (!p) {
        p = rt_xcalloc(1, sizeof(*p));
        p->route = r;
        p->id = id;
        if (rt_rpc_client_start(r->loop, srv->addr, NULL, fe__on_ps_conn, p,
                                &p->client) != 0) {
            rt_log(RT_LOG_WARN, "bad address '%s' for server %llu", srv->addr,
                   (unsigned long long)id);
            free(p);
            return NULL;
        }
        /* Entities are read from and written to partition servers only. */
        rt_rpc_client_expect_roles(p->client, RT_RPC_ROLE_PS);
        /* A write that never left is sent again, one that did is not. */
        rt_rpc_conn_report_unsent(rt_rpc_client_conn(p->client), 1);
        p->addr = rt_xstrdup(srv->addr);
        if (r->nps == r->ps_cap) {
            r->ps_cap = r->ps_cap ? r->ps_cap * 2 : 8;
            r->ps = rt_xrealloc(r->ps, r->ps_cap * sizeof(*r->ps));
        }
        r->ps[r->nps++] = p;
    }
    return p;
}

/* Parks @job until @p's connection is up (or FE_ROUTE_CONNECT_WAIT_MS). */
static void fe__ps_park(struct fe__ps *p, struct fe_job *job)
{
    struct fe_route *r = p->route;
    job->park_until_ = uv_now(r->loop) + FE_ROUTE_CONNECT_WAIT_MS;
    fe__jobq_push(&p->wait, job);
    if (r->parked++ == 0) {
        uv_timer_start(&r->tick, fe__on_tick, 50, 50);
    }
}

/* Takes @p's parked jobs whose wait is over at @now (all of them when
 * @all), in order; the rest stay parked. */
static struct fe__jobq fe__ps_unpark(struct fe__ps *p, uint64_t now, int all)
{
    struct fe__jobq out = {NULL, NULL};
    struct fe__jobq parked = fe__jobq_take(&p->wait);
    struct fe_job *j;
    while ((j = fe__jobq_pop(&parked)) != NULL) {
        if (all || j->park_until_ <= now) {
            fe__jobq_push(&out, j);
            p->route->parked--;
        } else {
            fe__jobq_push(&p->wait, j);
        }
    }
    return out;
}

static void fe__on_ps_conn(struct rt_rpc_conn *conn, int up, void *ud)
{
    struct fe__ps *p = ud;
    struct fe_route *r = p->route;
    struct fe__jobq due;
    struct fe_job *j;
    (void)conn;
    if (!up || r->closing) {
        return;
    }
    due = fe__ps_unpark(p, 0, 1);
    while ((j = fe__jobq_pop(&due)) != NULL) {
        fe__job_entity(j);
    }
}

static void fe__on_tick(uv_timer_t *t)
{
    struct fe_route *r = t->data;
    uint64_t now = uv_now(r->loop);
    for (size_t i = 0; i < r->nps; i++) {
        struct fe__jobq due = fe__ps_unpark(r->ps[i], now, 0);
        struct fe_job *j;
        while ((j = fe__jobq_pop(&due)) != NULL) {
            fe__job_retry(j, RT_ENOTSENT);
        }
    }
    if (r->parked == 0) {
        uv_timer_stop(&r->tick);
    }
}

/* ---- Map refresh (GET_MAP shared by waiting jobs) --------------------- */

static void fe__release_waiters(struct fe_route *r, int status)
{
    /* Taken first: a job run here may wait for the next map again. */
    struct fe__jobq waiting = fe__jobq_take(&r->wait);
    struct fe_job *j;
    while ((j = fe__jobq_pop(&waiting)) != NULL) {
        if (r->closing) {
            fe__job_finish(j, RT_ECANCELED);
        } else if (status != 0) {
            fe__job_finish(j, RT_EBUSY);
        } else {
            fe__job_run(j);
        }
    }
}

/* Every master reply passes the link first (rt_masters_link_reply): a
 * master that is not the leader (RT_ENOTLEADER) moves it to the leader it
 * names; the new master's FE_HELLO then brings the map. Returns 1 when the
 * link moved. */
static int fe__master_moved(struct fe_route *r,
                            int status,
                            const uint8_t *body,
                            size_t len)
{
    if (r->closing || (status != 0 && status != RT_ENOTLEADER)) {
        return 0;
    }
    return rt_masters_link_reply(r->master_link, status, body, len);
}

static void fe__on_get_map(int status,
                           const uint8_t *body,
                           size_t len,
                           void *arg)
{
    struct fe_route *r = arg;
    r->inflight--;
    r->map_inflight = 0;
    fe_metrics_master(r->metrics, FE_MMASTER_GET_MAP, status,
                      rt_time_mono_us() - r->map_sent_us);
    fe__master_moved(r, status, body, len);
    if (status == 0) {
        Rt__Map *pb = rt__map__unpack(NULL, len, body);
        if (pb) {
            fe__map_install(r, pb, 0, "GET_MAP");
        } else {
            status = RT_EPROTO;
        }
    }
    if (status != 0) {
        rt_log(RT_LOG_WARN, "GET_MAP failed: %s", rt_strerror(status));
    }
    fe__release_waiters(r, status);
}

static void fe__wait_map(struct fe_job *job)
{
    struct fe_route *r = job->route_;
    fe__jobq_push(&r->wait, job);
    if (r->map_inflight) {
        return;
    }
    r->map_inflight = 1;
    r->inflight++;
    r->map_sent_us = rt_time_mono_us();
    if (rt_rpc_call_pb(rt_rpc_client_conn(r->master), RT__METHOD__GET_MAP, NULL,
                       FE_ROUTE_TIMEOUT_MS, fe__on_get_map, r) != 0) {
        r->inflight--;
        r->map_inflight = 0;
        fe__release_waiters(r, RT_EINTERNAL);
    }
}

/* ---- Retries ---------------------------------------------------------- */

_Static_assert(FE_ROUTE_TRIES == 3,
               "one wait per retry: FE_ROUTE_WAIT1_MS, FE_ROUTE_WAIT2_MS");

static void fe__on_wait_timer(uv_timer_t *t);

/* Arms the wait timer for the first waiting retry, or stops it. */
/* A job that is one call to the master (no map, no partition server). */
static int fe__job_is_master(const struct fe_job *job)
{
    return job->kind == FE_JOB_CREATE_TABLE ||
           job->kind == FE_JOB_DELETE_TABLE ||
           job->kind == FE_JOB_LIST_TABLES || job->kind == FE_JOB_MASTER_CALL;
}

/* A master job that changes the catalog (a create, a delete, an ACL or
 * service properties set). */
static int fe__job_master_writes(const struct fe_job *job)
{
    return job->kind == FE_JOB_CREATE_TABLE ||
           job->kind == FE_JOB_DELETE_TABLE ||
           (job->kind == FE_JOB_MASTER_CALL &&
            (job->call_method == RT__METHOD__SET_ACL ||
             job->call_method == RT__METHOD__SET_SERVICE_PROPS));
}

static void fe__retries_arm(struct fe_route *r)
{
    uint64_t now = uv_now(r->loop);
    const struct fe_job *first = NULL;
    for (size_t i = 0; i < FE_ROUTE_TRIES - 1; i++) {
        const struct fe_job *j = r->retries[i].head;
        if (j && (!first || j->retry_at_ < first->retry_at_)) {
            first = j;
        }
    }
    if (!first) {
        uv_timer_stop(&r->wait_timer);
        return;
    }
    uv_timer_start(&r->wait_timer, fe__on_wait_timer,
                   first->retry_at_ > now ? first->retry_at_ - now : 0, 0);
}

static void fe__on_wait_timer(uv_timer_t *t)
{
    struct fe_route *r = t->data;
    uint64_t now = uv_now(r->loop);
    struct fe__jobq due = {NULL, NULL};
    struct fe_job *j;
    for (size_t i = 0; i < FE_ROUTE_TRIES - 1; i++) {
        while (r->retries[i].head && r->retries[i].head->retry_at_ <= now) {
            fe__jobq_push(&due, fe__jobq_pop(&r->retries[i]));
        }
    }
    fe__retries_arm(r);
    while ((j = fe__jobq_pop(&due)) != NULL) {
        /* The job's RPCs carry its own request id, not the last one the
         * thread served. */
        rt_log_set_reqid(j->reqid);
        if (fe__job_is_master(j)) {
            fe__job_run(j); /* a master operation needs no map */
        } else {
            fe__wait_map(j);
        }
    }
}

/* Another try after a refusal before execution, a request never sent, a
 * read whose connection dropped, or a hole in the map: after the wait for
 * this try, a fresh map and a new send; RT_EBUSY once FE_ROUTE_TRIES sends
 * were made. */
static void fe__job_retry(struct fe_job *job, int why)
{
    struct fe_route *r = job->route_;
    unsigned wait_ms;
    rt_log(RT_LOG_DEBUG, "retrying %s for table %s after %s (try %d)",
           job->kind == FE_JOB_SCAN                               ? "scan"
           : job->kind == FE_JOB_WRITE || job->kind == FE_JOB_GET ? "entity op"
                                                                  : "master op",
           job->table ? job->table : "-", rt_err_name(why), job->tries_ + 1);
    if (++job->tries_ >= FE_ROUTE_TRIES) {
        rt_log(RT_LOG_WARN, "giving up on table %s after %d tries (%s)",
               job->table, job->tries_, rt_err_name(why));
        fe__job_finish(job, RT_EBUSY);
        return;
    }
    wait_ms = job->tries_ == 1 ? FE_ROUTE_WAIT1_MS : FE_ROUTE_WAIT2_MS;
    job->retry_at_ = uv_now(r->loop) + wait_ms;
    fe__jobq_push(&r->retries[job->tries_ - 1], job);
    fe__retries_arm(r); /* a short wait may end before a long one queued */
}

/* A status after which the job may be sent again: the server refused the
 * request before executing it, the request never left, or (checked by the
 * caller for writes first) the connection of a read dropped. */
static int fe__retryable(int status)
{
    return status == RT_ESTALE || status == RT_ENOTPRIMARY ||
           status == RT_ENOTSENT || status == RT_ENOCONN;
}

/* Logs an error reply's message (never shown to clients). */
static int fe__error_index(const uint8_t *body,
                           size_t len,
                           const char *what,
                           int status)
{
    Rt__Error *e;
    int index = -1;
    if (!body || !len) {
        return -1;
    }
    e = rt__error__unpack(NULL, len, body);
    if (e) {
        index = e->index;
        if (e->message && e->message[0]) {
            rt_log(RT_LOG_DEBUG, "%s: %s: %s", what, rt_err_name(status),
                   e->message);
        }
        rt__error__free_unpacked(e, NULL);
    }
    return index;
}

/* ---- Entity replies: one arena per route -------------------------------
 *
 * A 1000-entity ScanResp decodes into ~4000 blocks (each EntityRec, its
 * keys and value) that live only until fe__on_scan_reply has copied them
 * into the job: with protobuf-c's default allocator that was ~8000 malloc
 * and free calls per page, a fifth of a page's front-end CPU. Entity
 * replies (GetResp, WriteResp, ScanResp) come from a bump arena instead,
 * emptied in one step once the reply has been copied. Loop thread only;
 * nothing decoded survives fe__pb_arena_reset, and a reply is always reset
 * before anything that could decode another one runs (fe__job_finish,
 * fe__job_retry, fe__job_entity). */
#define FE__ARENA_MIN (16 * 1024)
#define FE__ARENA_KEEP (4 * 1024 * 1024) /* a larger block is not kept */

struct fe__pb_blk
{
    struct fe__pb_blk *next;
    size_t cap;
    size_t used;
    max_align_t data[]; /* cap bytes */
};

struct fe__pb_arena
{
    ProtobufCAllocator pb;  /* alloc/free for protobuf_c_message_unpack */
    struct fe__pb_blk *cur; /* allocations go here; older blocks follow */
    size_t total;           /* bytes handed out since the last reset */
};

static struct fe__pb_blk *fe__pb_blk_new(size_t cap, struct fe__pb_blk *next)
{
    struct fe__pb_blk *b = rt_xmalloc(sizeof(*b) + cap);
    b->next = next;
    b->cap = cap;
    b->used = 0;
    return b;
}

static void *fe__pb_arena_alloc(void *ud, size_t n)
{
    struct fe__pb_arena *a = ud;
    struct fe__pb_blk *b = a->cur;
    const size_t align = sizeof(max_align_t);
    n = (n + align - 1) / align * align;
    if (!b || b->cap - b->used < n) {
        /* Each new block at least doubles what the arena holds. */
        size_t cap = b ? 2 * b->cap : FE__ARENA_MIN;
        while (cap < n) {
            cap *= 2;
        }
        b = a->cur = fe__pb_blk_new(cap, b);
    }
    void *p = (char *)b->data + b->used;
    b->used += n;
    a->total += n;
    return p;
}

static void fe__pb_arena_free(void *ud, void *p)
{
    (void)ud; /* everything goes at once, in fe__pb_arena_reset */
    (void)p;
}

static struct fe__pb_arena *fe__pb_arena_create(void)
{
    struct fe__pb_arena *a = rt_xcalloc(1, sizeof(*a));
    a->pb.alloc = fe__pb_arena_alloc;
    a->pb.free = fe__pb_arena_free;
    a->pb.allocator_data = a;
    return a;
}

/* Empties @a. A reply that needed several blocks leaves one block as large
 * as all of them, so the next reply of that size needs one; a block over
 * FE__ARENA_KEEP goes (one huge page does not pin its memory for ever). */
static void fe__pb_arena_reset(struct fe__pb_arena *a)
{
    struct fe__pb_blk *b = a->cur;
    if (b && b->next) {
        size_t want = a->total;
        while (b) {
            struct fe__pb_blk *next = b->next;
            free(b);
            b = next;
        }
        a->cur = want <= FE__ARENA_KEEP ? fe__pb_blk_new(want, NULL) : NULL;
    } else if (b && b->cap > FE__ARENA_KEEP) {
        free(b);
        a->cur = NULL;
    } else if (b) {
        b->used = 0;
    }
    a->total = 0;
}

static void fe__pb_arena_destroy(struct fe__pb_arena *a)
{
    if (!a) {
        return;
    }
    while (a->cur) {
        struct fe__pb_blk *next = a->cur->next;
        free(a->cur);
        a->cur = next;
    }
    free(a);
}

/* The reply @body decoded as @desc's message (free it with its
 * _free_unpacked), or NULL with @job finished with RT_EPROTO: a body that
 * does not decode is the server's fault, never the client's. */
static void *fe__reply_body(struct fe_job *job,
                            const ProtobufCMessageDescriptor *desc,
                            struct fe__pb_arena *arena,
                            const uint8_t *body,
                            size_t len)
{
    ProtobufCMessage *msg =
        protobuf_c_message_unpack(desc, arena ? &arena->pb : NULL, len, body);
    if (!msg) {
        if (arena) {
            fe__pb_arena_reset(arena);
        }
        fe__job_finish(job, RT_EPROTO);
    }
    return msg;
}

/* ---- Master operations ---------------------------------------------- */

/* What every master reply goes through first: an error reply is logged and
 * returned as is (a master operation is never retried). Returns 1 when the
 * job has been finished, 0 when the reply succeeded and its body is the
 * caller's to decode. */
static int fe__master_reply_failed(struct fe_job *job,
                                   int status,
                                   const uint8_t *body,
                                   size_t len,
                                   const char *what)
{
    job->route_->inflight--;
    fe_metrics_master(job->route_->metrics,
                      job->kind == FE_JOB_LIST_TABLES   ? FE_MMASTER_LIST
                      : job->kind == FE_JOB_MASTER_CALL ? FE_MMASTER_CALL
                                                        : FE_MMASTER_TABLE,
                      status, rt_time_mono_us() - job->sent_us_);
    fe__master_moved(job->route_, status, body, len);
    if (status == RT_ENOTLEADER || status == RT_ENOTSENT) {
        /* Nothing was executed (a follower refused it, or it never left),
         * and the link now heads for the leader: send it there (after
         * FE_ROUTE_WAIT1_MS, then WAIT2); 503 ServerBusy when no leader
         * answers by then. */
        fe__job_retry(job, status);
        return 1;
    }
    if ((status == RT_ENOCONN || status == RT_ETIMEDOUT) &&
        fe__job_master_writes(job)) {
        /* Written, then the master went away or did not answer: it may
         * have committed the change. 500 OperationTimedOut (outcome
         * unknown), never 503, which says nothing happened. */
        fe__job_finish(job, RT_ETIMEDOUT);
        return 1;
    }
    if (status != 0) {
        fe__error_index(body, len, what, status);
        fe__job_finish(job, status);
        return 1;
    }
    return 0;
}

static void fe__on_table_reply(int status,
                               const uint8_t *body,
                               size_t len,
                               void *arg)
{
    struct fe_job *job = arg;
    if (fe__master_reply_failed(job, status, body, len, "table op")) {
        return;
    }
    if (job->kind == FE_JOB_CREATE_TABLE) {
        Rt__Table *t =
            fe__reply_body(job, &rt__table__descriptor, NULL, body, len);
        if (!t) {
            return;
        }
        fe__job_set_table(job, t->name[0] ? t->name : job->table, t->id);
        rt__table__free_unpacked(t, NULL);
    } else if (job->kind == FE_JOB_MASTER_CALL) {
        rt_buf_reset(&job->value);
        if (len) {
            rt_buf_append(&job->value, body, len);
        }
    }
    fe__job_finish(job, status);
}

static void fe__on_list_reply(int status,
                              const uint8_t *body,
                              size_t len,
                              void *arg)
{
    struct fe_job *job = arg;
    Rt__ListTablesResp *resp;
    if (fe__master_reply_failed(job, status, body, len, "LIST_TABLES")) {
        return;
    }
    resp =
        fe__reply_body(job, &rt__list_tables_resp__descriptor, NULL, body, len);
    if (!resp) {
        return;
    }
    job->tables =
        rt_xrealloc(NULL, (resp->n_tables + 1) * sizeof(*job->tables));
    for (size_t i = 0; i < resp->n_tables; i++) {
        job->tables[i].name = rt_xstrdup(resp->tables[i]->name);
        job->tables[i].id = resp->tables[i]->id;
    }
    job->ntables = resp->n_tables;
    if (resp->next && resp->next[0]) {
        job->next_table = rt_xstrdup(resp->next);
    }
    rt__list_tables_resp__free_unpacked(resp, NULL);
    fe__job_finish(job, 0);
}

static void fe__job_master(struct fe_job *job)
{
    struct fe_route *r = job->route_;
    struct rt_rpc_conn *conn = rt_rpc_client_conn(r->master);
    int rc;
    r->inflight++;
    job->sent_us_ = rt_time_mono_us();
    if (job->kind == FE_JOB_LIST_TABLES) {
        Rt__ListTablesReq req = RT__LIST_TABLES_REQ__INIT;
        req.account = (char *)job->account;
        req.start = (char *)(job->list_start ? job->list_start : "");
        req.limit = job->limit;
        rc = rt_rpc_call_pb(conn, RT__METHOD__LIST_TABLES, &req.base,
                            FE_ROUTE_TIMEOUT_MS, fe__on_list_reply, job);
    } else if (job->kind == FE_JOB_MASTER_CALL) {
        rc = rt_rpc_call(conn, job->call_method, job->call_body, job->call_len,
                         FE_ROUTE_TIMEOUT_MS, fe__on_table_reply, job);
    } else {
        Rt__TableReq req = RT__TABLE_REQ__INIT;
        req.account = (char *)job->account;
        req.name = (char *)job->table;
        rc = rt_rpc_call_pb(
            conn,
            job->kind == FE_JOB_CREATE_TABLE ? RT__METHOD__CREATE_TABLE
                                             : RT__METHOD__DELETE_TABLE,
            &req.base, FE_ROUTE_TIMEOUT_MS, fe__on_table_reply, job);
    }
    if (rc != 0) {
        r->inflight--;
        fe__job_finish(job, rc);
    }
}

/* ---- Entity operations ---------------------------------------------- */

/* A call for @job to server @server_id, range @rg chosen by @key, linked
 * into the route's calls in flight (counted in inflight). */
static struct fe__call *fe__call_start(struct fe_job *job,
                                       uint64_t server_id,
                                       const Rt__Range *rg,
                                       const char *key)
{
    struct fe_route *r = job->route_;
    struct fe__call *c = rt_xcalloc(1, sizeof(*c));
    c->route = r;
    c->job = job;
    c->server_id = server_id;
    c->table_id = rg->table_id;
    c->key = rt_xstrdup(key);
    c->high = rt_xstrdup(rg->high_inf ? "" : rg->high);
    c->high_inf = rg->high_inf;
    c->sent_us = rt_time_mono_us();
    c->next = r->calls;
    if (r->calls) {
        r->calls->prev = c;
    }
    r->calls = c;
    r->inflight++;
    return c;
}

/* Takes @c off the route's calls in flight (its reply came, or it was never
 * sent). */
static void fe__call_unlink(struct fe__call *c)
{
    struct fe_route *r = c->route;
    if (c->prev) {
        c->prev->next = c->next;
    } else {
        r->calls = c->next;
    }
    if (c->next) {
        c->next->prev = c->prev;
    }
    c->prev = c->next = NULL;
    r->inflight--;
}

static void fe__call_free(struct fe__call *c)
{
    free(c->key);
    free(c->high);
    free(c);
}

/* The reply (or failure) of call @c arrived with @status: its latency
 * and error go to the route's metrics. */
static void fe__call_observe(const struct fe__call *c, int status)
{
    fe_metrics_rpc(c->route->metrics, c->server_id, status,
                   rt_time_mono_us() - c->sent_us);
}

/* A point call's reply arrived: the call is gone; returns its job, or NULL
 * when the call had been abandoned (the reply is dropped). */
static struct fe_job *fe__call_end(struct fe__call *c)
{
    struct fe_job *job = c->job;
    fe__call_unlink(c);
    fe__call_free(c);
    return job;
}

/* After a map install: every call in flight to a server the new map no
 * longer names for its key (failover, move, table or range gone) is
 * abandoned, since the old server may be stopped or cut off and never
 * answer before the RPC timeout. A read or scan hop is sent again at once
 * to the new owner, counting as one of the job's tries (nothing to undo);
 * a write ends RT_ETIMEDOUT (500 OperationTimedOut): the old primary may
 * have applied it and a sealed secondary may hold it, so it is never
 * resent (DESIGN-replication.md §4, §5.5). A late reply from the old
 * server is dropped (fe__call_end). */
static void fe__calls_moved(struct fe_route *r)
{
    struct fe__call *moved = NULL;
    struct fe__call *c;
    if (r->closing) {
        return;
    }
    /* Collected first: a resend or a done_cb adds calls to the list. */
    for (c = r->calls; c; c = c->next) {
        const Rt__Range *rg;
        if (!c->job) {
            continue;
        }
        /* A split or an ISR change leaves the key with the same server,
         * which answers (ranges split in place, DESIGN-replication.md
         * §9.1): only another server, or none, means it may never. */
        rg = fe__map_range(r, c->table_id, c->key);
        if (rg && rg->server_id == c->server_id) {
            continue;
        }
        /* A write is given up only for a replicated range, whose old
         * primary may have been replaced because it stopped answering. An
         * RF-1 range that moved still has its old server answering (the
         * move froze it: it finishes or refuses what it holds), so the
         * client gets the real outcome instead of an unknown one. */
        if (c->job->kind == FE_JOB_WRITE && !(rg && rg->n_replicas > 1)) {
            continue;
        }
        c->moved_next = moved;
        moved = c;
    }
    while (moved) {
        struct fe_job *job;
        c = moved;
        moved = c->moved_next;
        job = c->job;
        c->job = NULL;
        rt_log_set_reqid(job->reqid);
        if (job->kind == FE_JOB_WRITE) {
            rt_log(RT_LOG_WARN,
                   "range of table %s moved off server %llu with a write "
                   "in flight: outcome unknown",
                   job->table, (unsigned long long)c->server_id);
            fe__job_finish(job, RT_ETIMEDOUT);
        } else if (++job->tries_ >= FE_ROUTE_TRIES) {
            rt_log(RT_LOG_WARN, "giving up on table %s after %d tries (%s)",
                   job->table, job->tries_, "range moved");
            fe__job_finish(job, RT_EBUSY);
        } else {
            rt_log(RT_LOG_DEBUG,
                   "range of table %s moved off server %llu: read sent "
                   "again (try %d)",
                   job->table, (unsigned long long)c->server_id,
                   job->tries_ + 1);
            fe__job_entity(job);
        }
    }
}

/* What every entity reply goes through: the route is closing
 * (RT_ECANCELED), the request was not executed (another try: fe__retryable)
 * unless it is a write whose connection dropped after it was written (ends
 * RT_ETIMEDOUT), the server answered with an error (logged and returned as
 * is; a write also keeps the index of the operation that failed), or the
 * body does not decode as @desc (RT_EPROTO). Returns the decoded reply (the
 * caller frees it with its _free_unpacked), or NULL when the job has been
 * dealt with. */
static void *fe__entity_reply(struct fe_job *job,
                              int status,
                              const uint8_t *body,
                              size_t len,
                              const char *what,
                              const ProtobufCMessageDescriptor *desc)
{
    struct fe_route *r = job->route_;
    int index;
    if (r->closing) {
        fe__job_finish(job, RT_ECANCELED);
        return NULL;
    }
    if (status == RT_ENOCONN && job->kind == FE_JOB_WRITE) {
        rt_log(RT_LOG_WARN,
               "connection lost with a write in flight for "
               "table %s: outcome unknown",
               job->table);
        fe__job_finish(job, RT_ETIMEDOUT);
        return NULL;
    }
    if (fe__retryable(status) ||
        (status == RT_ETIMEDOUT && job->kind != FE_JOB_WRITE)) {
        /* A read that timed out is sent again like one whose connection
         * dropped; a write's timeout is an unknown outcome, returned. */
        fe__job_retry(job, status);
        return NULL;
    }
    if (status != 0) {
        index = fe__error_index(body, len, what, status);
        if (job->kind == FE_JOB_WRITE) {
            job->fail_index = index;
        }
        fe__job_finish(job, status);
        return NULL;
    }
    return fe__reply_body(job, desc, r->arena, body, len);
}

static void fe__on_write_reply(int status,
                               const uint8_t *body,
                               size_t len,
                               void *arg)
{
    struct fe_job *job;
    Rt__WriteResp *resp;
    int first = 0;
    fe__call_observe(arg, status);
    job = fe__call_end(arg);
    if (!job) {
        return;
    }
    resp = fe__entity_reply(job, status, body, len, "ENTITY_WRITE",
                            &rt__write_resp__descriptor);
    if (!resp) {
        return;
    }
    for (size_t i = 0; i < resp->n_results && i < job->nops; i++) {
        const Rt__OpResult *res = resp->results[i];
        struct fe_job_op *op = &job->ops[i];
        op->code = res->code;
        op->ticks = res->ticks;
        rt_buf_reset(&op->value);
        if (res->value.len) {
            rt_buf_append(&op->value, res->value.data, res->value.len);
        }
        if (res->code != 0 && first == 0) {
            first = res->code;
            job->fail_index = (int)i;
        }
    }
    if (resp->n_results < job->nops && first == 0) {
        first = RT_EPROTO;
    }
    fe__pb_arena_reset(job->route_->arena);
    if (fe__retryable(first)) {
        job->fail_index = -1;
        fe__job_retry(job, first);
    } else {
        fe__job_finish(job, first);
    }
}

static void fe__on_get_reply(int status,
                             const uint8_t *body,
                             size_t len,
                             void *arg)
{
    struct fe_job *job;
    Rt__GetResp *resp;
    fe__call_observe(arg, status);
    job = fe__call_end(arg);
    if (!job) {
        return;
    }
    resp = fe__entity_reply(job, status, body, len, "ENTITY_GET",
                            &rt__get_resp__descriptor);
    if (!resp) {
        return;
    }
    rt_buf_reset(&job->value);
    rt_buf_append(&job->value, resp->value.data, resp->value.len);
    fe__pb_arena_reset(job->route_->arena);
    fe__job_finish(job, job->value.len ? 0 : RT_ENOTFOUND);
}

static void fe__job_next_token(struct fe_job *job,
                               const char *pk,
                               const char *rk)
{
    job->has_next = 1;
    rt_buf_reset(&job->next_pk);
    rt_buf_reset(&job->next_rk);
    rt_buf_append_str(&job->next_pk, pk);
    rt_buf_append_str(&job->next_rk, rk);
}

static void fe__scan_add(struct fe_job *job, const Rt__EntityRec *e)
{
    struct fe_job_ent *d;
    if (job->nents == job->ents_cap) {
        job->ents_cap = job->ents_cap ? job->ents_cap * 2 : 16;
        job->ents = rt_xrealloc(job->ents, job->ents_cap * sizeof(*job->ents));
    }
    d = &job->ents[job->nents++];
    /* One block for the three (fe_route.h): a page copies 1000 of them. */
    size_t pl = strlen(e->pk) + 1, rl = strlen(e->rk) + 1;
    char *blk = rt_xmalloc(pl + rl + e->value.len);
    memcpy(blk, e->pk, pl);
    memcpy(blk + pl, e->rk, rl);
    if (e->value.len) {
        memcpy(blk + pl + rl, e->value.data, e->value.len);
    }
    d->pk = blk;
    d->rk = blk + pl;
    d->value = (uint8_t *)blk + pl + rl;
    d->vlen = e->value.len;
}

static void fe__on_scan_reply(int status,
                              const uint8_t *body,
                              size_t len,
                              void *arg)
{
    struct fe__call *hop = arg;
    struct fe_job *job = hop->job;
    struct fe_route *r;
    Rt__ScanResp *resp;
    unsigned limit;

    /* The call is freed at the end: the hop's high key is needed until
     * then. */
    fe__call_observe(hop, status);
    fe__call_unlink(hop);
    if (!job) {
        goto out;
    }
    r = job->route_;
    limit = job->limit ? job->limit : FE_PAGE_MAX;
    resp = fe__entity_reply(job, status, body, len, "ENTITY_SCAN",
                            &rt__scan_resp__descriptor);
    if (!resp) {
        goto out;
    }
    for (size_t i = 0; i < resp->n_entities && job->nents < limit; i++) {
        fe__scan_add(job, resp->entities[i]);
    }
    job->tries_ = 0;
    if (resp->more) {
        /* The range still has more (page full, byte or time budget): the
         * server says where to resume. */
        fe__job_next_token(job, resp->next_pk, resp->next_rk);
        fe__pb_arena_reset(r->arena);
        fe__job_finish(job, 0);
        goto out;
    }
    if (resp->done) {
        /* The filter's upper key bound was reached: no later key in any
         * range can match. */
        fe__pb_arena_reset(r->arena);
        fe__job_finish(job, 0);
        goto out;
    }
    fe__pb_arena_reset(r->arena);
    if (hop->high_inf ||
        (job->scan_hi && rt_utf16_cmpz(hop->high, job->scan_hi) > 0)) {
        /* Last range of the table, or the next range starts after the
         * last PartitionKey the filter allows: done. */
        fe__job_finish(job, 0);
        goto out;
    }
    /* Range exhausted: continue at the next range's low key (flow 7),
     * unless the page is full, hopped enough or out of time; then the
     * token points at the next range (the page may be empty). */
    if (job->nents >= limit || ++job->hops_ >= FE_ROUTE_MAX_HOPS ||
        uv_now(r->loop) >= job->deadline_) {
        fe__job_next_token(job, hop->high, "");
        fe__job_finish(job, 0);
        goto out;
    }
    rt_buf_reset(&job->cur_pk_);
    rt_buf_reset(&job->cur_rk_);
    rt_buf_append_str(&job->cur_pk_, hop->high);
    job->cur_has_ = 1;
    fe__job_entity(job);
out:
    fe__call_free(hop);
}

static void fe__job_entity(struct fe_job *job)
{
    struct fe_route *r = job->route_;
    const struct fe__table_ix *t;
    const Rt__Range *rg;
    struct fe__ps *ps;
    struct rt_rpc_conn *conn;
    Rt__RangeRef ref = RT__RANGE_REF__INIT;
    struct fe__call *call;
    const char *key;
    int rc;

    t = fe__map_table(r, job->account, job->table);
    if (!t) {
        if (!job->refreshed_) {
            job->refreshed_ = 1;
            fe__wait_map(job);
            return;
        }
        fe__job_finish(job, job->kind == FE_JOB_GET_TABLE ? RT_ENOTFOUND
                                                          : RT_ETABLENOTFOUND);
        return;
    }
    fe__job_set_table(job, t->name, t->id);
    if (job->kind == FE_JOB_GET_TABLE) {
        fe__job_finish(job, 0);
        return;
    }
    if (job->kind == FE_JOB_SCAN &&
        (job->scan_empty ||
         (job->scan_hi && job->cur_has_ &&
          rt_utf16_cmpz(rt_buf_cstr(&job->cur_pk_), job->scan_hi) > 0))) {
        /* The filter excludes everything from here on: an empty, final
         * page without asking any server. */
        fe__job_finish(job, 0);
        return;
    }
    if (job->kind == FE_JOB_WRITE) {
        key = job->nops ? job->ops[0].pk : "";
    } else if (job->kind == FE_JOB_GET) {
        key = job->pk;
    } else {
        key = job->cur_has_ ? rt_buf_cstr(&job->cur_pk_) : "";
    }
    rg = fe__map_range(r, t->id, key);
    ps = rg ? fe__ps_get(r, rg->server_id) : NULL;
    if (!ps) {
        fe__job_retry(job, RT_ESTALE);
        return;
    }
    conn = rt_rpc_client_conn(ps->client);
    if (!rt_rpc_conn_is_up(conn)) {
        fe__ps_park(ps, job);
        return;
    }
    ref.table_id = t->id;
    ref.range_id = rg->id;
    ref.epoch = rg->epoch;
    call = fe__call_start(job, rg->server_id, rg, key);
    if (job->kind == FE_JOB_WRITE) {
        Rt__WriteReq req = RT__WRITE_REQ__INIT;
        Rt__EntityOp *ops = rt_xrealloc(NULL, (job->nops + 1) * sizeof(*ops));
        Rt__EntityOp **opp = rt_xrealloc(NULL, (job->nops + 1) * sizeof(*opp));
        for (size_t i = 0; i < job->nops; i++) {
            Rt__EntityOp init = RT__ENTITY_OP__INIT;
            const struct fe_job_op *o = &job->ops[i];
            ops[i] = init;
            ops[i].kind = (Rt__OpKind)o->kind;
            ops[i].pk = o->pk;
            ops[i].rk = o->rk;
            ops[i].props.data = o->props.data;
            ops[i].props.len = o->props.len;
            ops[i].if_match_any = o->if_match_any;
            ops[i].if_match = o->if_match;
            opp[i] = &ops[i];
        }
        req.route = &ref;
        req.n_ops = job->nops;
        req.ops = opp;
        req.atomic = job->atomic;
        rc = rt_rpc_call_pb(conn, RT__METHOD__ENTITY_WRITE, &req.base,
                            FE_ROUTE_TIMEOUT_MS, fe__on_write_reply, call);
        free(ops);
        free(opp);
    } else if (job->kind == FE_JOB_GET) {
        Rt__GetReq req = RT__GET_REQ__INIT;
        req.route = &ref;
        req.pk = (char *)job->pk;
        req.rk = (char *)job->rk;
        rc = rt_rpc_call_pb(conn, RT__METHOD__ENTITY_GET, &req.base,
                            FE_ROUTE_TIMEOUT_MS, fe__on_get_reply, call);
    } else {
        Rt__ScanReq req = RT__SCAN_REQ__INIT;
        unsigned limit = job->limit ? job->limit : FE_PAGE_MAX;
        req.route = &ref;
        req.has_start = job->cur_has_;
        req.start_pk =
            (char *)(job->cur_has_ ? rt_buf_cstr(&job->cur_pk_) : "");
        req.start_rk =
            (char *)(job->cur_has_ ? rt_buf_cstr(&job->cur_rk_) : "");
        uint64_t now = uv_now(r->loop);
        uint64_t left = job->deadline_ > now ? job->deadline_ - now : 1;
        req.limit = (uint32_t)(limit - job->nents);
        req.n_select = job->nselect;
        req.select = (char **)job->select;
        req.filter.data = (uint8_t *)job->filter;
        req.filter.len = job->filter ? job->filter_len : 0;
        req.budget_ms = (uint32_t)left;
        /* The server spends up to the rest of the page budget; the RPC
         * timeout leaves the usual margin on top. */
        rc = rt_rpc_call_pb(conn, RT__METHOD__ENTITY_SCAN, &req.base,
                            FE_ROUTE_TIMEOUT_MS + (unsigned)left,
                            fe__on_scan_reply, call);
    }
    if (rc != 0) {
        fe__call_end(call);
        fe__job_finish(job, rc);
    }
}

static void fe__job_run(struct fe_job *job)
{
    struct fe_route *r = job->route_;
    /* A retry runs from a timer, where the thread's request id is that of
     * whichever request ran last: the job's RPCs must carry its own. */
    rt_log_set_reqid(job->reqid);
    if (r->closing) {
        fe__job_finish(job, RT_ECANCELED);
        return;
    }
    switch (job->kind) {
        case FE_JOB_CREATE_TABLE:
        case FE_JOB_DELETE_TABLE:
        case FE_JOB_LIST_TABLES:
        case FE_JOB_MASTER_CALL:
            fe__job_master(job);
            break;
        case FE_JOB_GET_TABLE:
        case FE_JOB_WRITE:
        case FE_JOB_GET:
        case FE_JOB_SCAN:
            fe__job_entity(job);
            break;
        default:
            fe__job_finish(job, RT_EINTERNAL);
            break;
    }
}

void fe_route_submit(struct fe_route *r, struct fe_job *job)
{
    job->route_ = r;
    job->finished_ = 0;
    job->tries_ = 0;
    job->refreshed_ = 0;
    job->hops_ = 0;
    if (job->kind == FE_JOB_SCAN) {
        rt_buf_reset(&job->cur_pk_);
        rt_buf_reset(&job->cur_rk_);
        job->cur_has_ = job->has_start;
        if (job->has_start) {
            rt_buf_append_str(&job->cur_pk_, job->pk ? job->pk : "");
            rt_buf_append_str(&job->cur_rk_, job->rk ? job->rk : "");
        }
        /* Start at the filter's lowest PartitionKey when that is later:
         * the first range visited is the one holding it. */
        if (job->scan_lo &&
            (!job->cur_has_ ||
             rt_utf16_cmpz(job->scan_lo, rt_buf_cstr(&job->cur_pk_)) > 0)) {
            rt_buf_reset(&job->cur_pk_);
            rt_buf_reset(&job->cur_rk_);
            rt_buf_append_str(&job->cur_pk_, job->scan_lo);
            job->cur_has_ = 1;
        }
        job->deadline_ = uv_now(r->loop) +
                         (job->budget_ms ? job->budget_ms : FE_PAGE_BUDGET_MS);
    }
    fe__job_run(job);
}

/* ---- Master connection ---------------------------------------------- */

static void fe__on_hello(int status, const uint8_t *body, size_t len, void *arg)
{
    struct fe_route *r = arg;
    r->inflight--;
    if (fe__master_moved(r, status, body, len)) {
        return; /* hello again once the link reaches the leader */
    }
    if (status == 0 && !r->closing) {
        Rt__Map *pb = rt__map__unpack(NULL, len, body);
        if (pb) {
            rt_log(RT_LOG_INFO, "subscribed to the master: map version %llu",
                   (unsigned long long)pb->version);
            fe__map_install(r, pb, 1, "FE_HELLO");
        } else {
            rt_log(RT_LOG_WARN, "FE_HELLO: bad Map body");
        }
    } else if (status != 0 && status != RT_ECANCELED) {
        rt_log(RT_LOG_WARN, "FE_HELLO failed: %s", rt_strerror(status));
    }
}

static void fe__on_master_conn(struct rt_rpc_conn *conn, int up, void *ud)
{
    struct fe_route *r = ud;
    if (r->closing) {
        return;
    }
    if (!up) {
        rt_log(RT_LOG_WARN, "lost the master connection; reconnecting");
        return;
    }
    r->inflight++;
    rt_log_set_reqid(NULL); /* the route's own call, not a request's */
    if (rt_rpc_call_pb(conn, RT__METHOD__FE_HELLO, NULL, FE_ROUTE_TIMEOUT_MS,
                       fe__on_hello, r) != 0) {
        r->inflight--;
    }
}

static void fe__on_master_request(struct rt_rpc_conn *conn,
                                  uint32_t method,
                                  uint64_t id,
                                  const uint8_t *body,
                                  size_t len,
                                  void *ud)
{
    struct fe_route *r = ud;
    /* The front end serves no one: only its master may push the map (or
     * ping); an admin certificate may too (rt_rpc_authorize). */
    unsigned roles = method == RT__METHOD__MAP_UPDATE ? RT_RPC_ROLE_MASTER
                     : method == RT__METHOD__PING     ? RT_RPC_ROLE_MASTER
                                                      : 0;
    if (rt_rpc_authorize(conn, method, id, roles) != 0) {
        return;
    }
    if (method == RT__METHOD__MAP_UPDATE) {
        Rt__Map *pb = rt__map__unpack(NULL, len, body);
        if (!pb) {
            rt_log(RT_LOG_WARN, "MAP_UPDATE: bad Map body");
        } else if (!r->closing) {
            fe__map_install(r, pb, 0, "MAP_UPDATE");
        } else {
            rt__map__free_unpacked(pb, NULL);
        }
        if (id) {
            rt_rpc_reply(conn, id, method, 0, NULL, 0);
        }
        return;
    }
    if (method == RT__METHOD__PING) {
        rt_rpc_reply(conn, id, method, 0, NULL, 0);
        return;
    }
    rt_rpc_reply_err(conn, id, method, RT_ENOTIMPL,
                     "not served by rt-frontend");
}

int fe_route_create(uv_loop_t *loop,
                    const char *master_addr,
                    struct fe_route **out)
{
    struct fe_route *r = rt_xcalloc(1, sizeof(*r));
    int rc;
    r->loop = loop;
    r->arena = fe__pb_arena_create();
    uv_timer_init(loop, &r->tick);
    r->tick.data = r;
    uv_timer_init(loop, &r->wait_timer);
    r->wait_timer.data = r;
    rc = rt_masters_link_start(loop, master_addr, fe__on_master_request,
                               fe__on_master_conn, r, &r->master_link);
    if (rc == 0) {
        r->master = rt_masters_link_client(r->master_link);
        /* A call never written is retried; one written may have been
         * applied (fe__master_reply_failed). */
        rt_rpc_conn_report_unsent(rt_rpc_client_conn(r->master), 1);
    } else {
        /* Nothing else was started: close the timer and let the caller's
         * loop run its close callback before the memory goes. */
        r->closing = 1;
        uv_close((uv_handle_t *)&r->tick, NULL);
        uv_close((uv_handle_t *)&r->wait_timer, NULL);
        uv_run(loop, UV_RUN_NOWAIT);
        fe__pb_arena_destroy(r->arena);
        free(r);
        return rc;
    }
    *out = r;
    return 0;
}

void fe_route_destroy(struct fe_route *r)
{
    RT_PRE(r->closing && r->inflight == 0);
    fe__map_free(&r->map);
    for (size_t i = 0; i < r->nps; i++) {
        free(r->ps[i]->addr);
        free(r->ps[i]);
    }
    free(r->ps);
    fe__pb_arena_destroy(r->arena);
    free(r);
}

void fe_route_close(struct fe_route *r)
{
    if (r->closing) {
        return;
    }
    r->closing = 1;
    for (size_t i = 0; i < r->nps; i++) {
        struct fe__jobq all = fe__ps_unpark(r->ps[i], 0, 1);
        struct fe_job *j;
        while ((j = fe__jobq_pop(&all)) != NULL) {
            fe__job_finish(j, RT_ECANCELED);
        }
    }
    for (size_t i = 0; i < FE_ROUTE_TRIES - 1; i++) {
        struct fe__jobq waiting = fe__jobq_take(&r->retries[i]);
        struct fe_job *j;
        while ((j = fe__jobq_pop(&waiting)) != NULL) {
            fe__job_finish(j, RT_ECANCELED);
        }
    }
    uv_close((uv_handle_t *)&r->tick, NULL);
    uv_close((uv_handle_t *)&r->wait_timer, NULL);
    rt_masters_link_close(r->master_link);
    for (size_t i = 0; i < r->nps; i++) {
        rt_rpc_client_close(r->ps[i]->client);
    }
}

void fe_route_on_map(struct fe_route *r, fe_route_map_cb cb, void *data)
{
    r->map_cb = cb;
    r->map_cb_data = data;
}

void fe_route_set_metrics(struct fe_route *r, struct fe_metrics_shard *s)
{
    r->metrics = s;
}

uint64_t fe_route_map_version(const struct fe_route *r)
{
    return r->have_map ? r->map.pb->version : 0;
}
