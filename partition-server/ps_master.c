/* Master link: registration, heartbeats, assignments, table drops
 * (docs/DESIGN.md §2: the heartbeat and load report; §4).
 *
 * Happy path: the link (rt_masters_link over cfg.master, a list of one or
 * more masters) connects -> PS_REGISTER{server_id from
 * meta (0 the first time), addr, range ids, incarnation, zone} -> the reply
 * gives our id and the full set of ranges to serve -> applied and persisted.
 * Every cfg.heartbeat_ms (PS_HEARTBEAT_MS if 0): PS_HEARTBEAT{id, per-range
 * loads, pending ops, a ReplStatus per replicated range (ps_repl_status)} ->
 * the reply carries the assignment again and is reconciled. The master may also
 * call ASSIGN_RANGES (answered once persisted) and DROP_TABLE (answered when
 * the table's keys are gone) on this connection. Failure modes:
 *  - master down or unreachable: the client reconnects with backoff (one
 *    master) or the link tries the next master of the list; we keep
 *    serving the ranges we have (the master marks us down and the front
 *    ends stop routing to us) and register again on reconnect;
 *  - a master that is not the leader answers register or heartbeat
 *    RT_ENOTLEADER (DESIGN-master-ha.md §5.2): the link moves to the
 *    leader it names, or to the next master, and we register there
 *    (full assignment), exactly as after a master restart;
 *  - register fails or times out: retried on the next heartbeat tick;
 *  - register refused because our id is live with another incarnation
 *    (RT_EEXIST): logged at error with the master's reason, retried the
 *    same way (it passes once the master sees the other one down);
 *  - heartbeat rejected (the master forgot us): register again;
 *  - an assignment older than the one applied (map_version) is ignored,
 *    so a slow heartbeat reply cannot undo a newer ASSIGN_RANGES;
 *  - a deposed master (ps_fence.h: a master_term below the highest seen):
 *    its ASSIGN_RANGES and DROP_TABLE are refused (RT_ESTALE), its
 *    heartbeat replies ignored, its registration reply ignored (we
 *    register again); a higher term is recorded and persisted with the
 *    assignment, before ASSIGN_RANGES is answered;
 *  - every applied assignment also settles range moves (ps_move_assigned):
 *    a frozen range missing from it was committed to its target (dropped
 *    here), and one still listed in a registration reply was not (it is
 *    unfrozen). */
#include "ps_master.h"

#include <stdlib.h>
#include <string.h>

#include "ps_fence.h"
#include "ps_jobs.h"
#include "ps_move.h"
#include "ps_repl.h"
#include "ps_split.h"
#include "ps_transfer.h"
#include "rt.pb-c.h"
#include "rt_alloc.h"
#include "rt_err.h"
#include "rt_log.h"
#include "rt_masters.h"
#include "rt_notify.h"

/* Applies a full assignment from the master. @force (registration)
 * accepts any map_version. Persists when something changed. Returns 0 or
 * the code of a replicated range's configuration that was refused. */
static int ps__apply(struct ps_server *ps,
                     Rt__Range *const *v,
                     size_t n,
                     Rt__Server *const *peers,
                     size_t n_peers,
                     uint64_t map_version,
                     int force,
                     int persist)
{
    int changed, refused;

    if (!force && map_version < ps->ranges.map_version) {
        rt_log(RT_LOG_DEBUG, "ignoring assignment v%llu older than v%llu",
               (unsigned long long)map_version,
               (unsigned long long)ps->ranges.map_version);
        return 0;
    }
    changed = ps_ranges_set(&ps->ranges, v, n);
    ps->ranges.map_version = map_version;
    /* Replica roles, ISRs and peers (ps_repl.c); RF-1 ranges stay out. */
    refused = ps_repl_assigned(ps, v, n, peers, n_peers);
    ps_transfer_assigned(ps); /* freezes settled by it */
    /* Frozen ranges, moves in flight, ranges received (ps_move.c). */
    ps_move_assigned(ps, force);
    /* Ranges frozen for a split (ps_split.c). */
    ps_split_assigned(ps, force);
    for (size_t i = 0; i < ps->ranges.n; i++) {
        if (ps->ranges.v[i]->load_since_ms == 0) {
            ps->ranges.v[i]->load_since_ms = uv_now(ps->loop);
        }
    }
    ps_jobs_count_wanted(ps);
    if (changed) {
        rt_log(RT_LOG_INFO, "serving %zu ranges (map v%llu)", ps->ranges.n,
               (unsigned long long)map_version);
        for (size_t i = 0; i < ps->ranges.n; i++) {
            const struct ps_range *r = ps->ranges.v[i];
            rt_log(RT_LOG_DEBUG, "range %llu table %llu epoch %llu [%s, %s)",
                   (unsigned long long)r->id, (unsigned long long)r->table_id,
                   (unsigned long long)r->epoch, r->low,
                   r->high ? r->high : "+inf");
        }
    }
    if (changed && persist) {
        ps_jobs_persist(ps, NULL, 0, 0);
    }
    return refused;
}

/* The master the link talks to now, for log lines. */
static const char *ps__master_addr(const struct ps_server *ps)
{
    return rt_masters_link_addr(ps->master_link);
}

/* 1 when a reply from the master no longer matters: the server is
 * stopping or the call was cancelled (the link closed). */
static int ps__master_reply_moot(const struct ps_server *ps, int status)
{
    return ps->stopping || status == RT_ECANCELED;
}

/* Registration */

static void ps__register_cb(int status,
                            const uint8_t *body,
                            size_t len,
                            void *arg)
{
    struct ps_server *ps = arg;
    Rt__RegisterResp *resp;

    ps->register_inflight = 0;
    if (ps__master_reply_moot(ps, status)) {
        return;
    }
    if (rt_masters_link_reply(ps->master_link, status, body, len)) {
        return; /* registers with the new master once connected */
    }
    if (status == RT_EEXIST) {
        /* Our id is registered and live with another incarnation: another
         * server runs on a copy of this data directory, or this one was
         * wiped and restarted before the master saw it go. Retrying lets
         * the second case through once the master marks the old one down. */
        Rt__Error *e = rt__error__unpack(NULL, len, body);
        rt_log(
            RT_LOG_ERROR,
            "master %s refused server id %llu: %s; retrying "
            "(is another server running on a copy of %s?)",
            ps__master_addr(ps), (unsigned long long)ps->server_id,
            e && e->message && *e->message ? e->message : rt_strerror(status),
            ps->cfg.data);
        if (e) {
            rt__error__free_unpacked(e, NULL);
        }
        return;
    }
    if (status != 0) {
        rt_log(RT_LOG_WARN, "register with master %s failed: %s",
               ps__master_addr(ps), rt_strerror(status));
        return; /* the heartbeat timer tries again */
    }
    resp = rt__register_resp__unpack(NULL, len, body);
    if (!resp || resp->server_id == 0) {
        rt_log(RT_LOG_ERROR, "bad RegisterResp from master %s",
               ps__master_addr(ps));
        if (resp) {
            rt__register_resp__free_unpacked(resp, NULL);
        }
        return;
    }
    if (ps->server_id != resp->server_id) {
        if (ps->server_id != 0) {
            rt_log(RT_LOG_WARN, "master gave server id %llu (was %llu)",
                   (unsigned long long)resp->server_id,
                   (unsigned long long)ps->server_id);
        }
        ps->server_id = resp->server_id;
    }
    if (ps_fence_check(ps, resp->master_term, "a registration reply") != 0) {
        /* A deposed master answered: none of it is taken, and we register
         * again on the next tick. */
        rt__register_resp__free_unpacked(resp, NULL);
        return;
    }
    ps__apply(ps, resp->ranges, resp->n_ranges, resp->peers, resp->n_peers,
              resp->map_version, 1, 0);
    ps_jobs_persist(ps, NULL, 0, 0);
    ps->registered = 1;
    rt_log(RT_LOG_INFO,
           "registered with master %s as server %llu (%s), "
           "%zu ranges",
           ps__master_addr(ps), (unsigned long long)ps->server_id, ps->addr,
           ps->ranges.n);
    /* Serving now: the master knows us and we know our ranges. systemd
     * ignores READY=1 after the first, so every registration may say it. */
    rt_notifyf("READY=1\nSTATUS=server %llu (%s), master %s, %zu ranges",
               (unsigned long long)ps->server_id, ps->addr, ps__master_addr(ps),
               ps->ranges.n);
    rt__register_resp__free_unpacked(resp, NULL);
}

static void ps__register(struct ps_server *ps)
{
    Rt__RegisterReq req = RT__REGISTER_REQ__INIT;
    uint64_t *ids = rt_xcalloc(ps->ranges.n, sizeof(*ids));
    int rc;

    for (size_t i = 0; i < ps->ranges.n; i++) {
        ids[i] = ps->ranges.v[i]->id;
    }
    req.server_id = ps->server_id;
    req.addr = ps->addr;
    req.incarnation.data = ps->incarnation;
    req.incarnation.len = sizeof(ps->incarnation);
    req.zone = (char *)(ps->cfg.zone ? ps->cfg.zone : "");
    req.n_range_ids = ps->ranges.n;
    req.range_ids = ids;
    req.master_term_seen = ps->master_term;
    rc = rt_rpc_call_pb(rt_rpc_client_conn(ps->master), RT__METHOD__PS_REGISTER,
                        &req.base, PS_MASTER_CALL_MS, ps__register_cb, ps);
    free(ids);
    if (rc == 0) {
        ps->register_inflight = 1;
    } else {
        rt_log(RT_LOG_ERROR, "register call failed: %s", rt_strerror(rc));
    }
}

/* Heartbeats */

static void ps__heartbeat_cb(int status,
                             const uint8_t *body,
                             size_t len,
                             void *arg)
{
    struct ps_server *ps = arg;
    Rt__RegisterResp *resp;

    ps->hb_inflight = 0;
    if (ps__master_reply_moot(ps, status)) {
        return;
    }
    if (rt_masters_link_reply(ps->master_link, status, body, len)) {
        ps->registered = 0; /* with the new master, once connected */
        return;
    }
    if (status == RT_ENOCONN || status == RT_ETIMEDOUT) {
        rt_log(RT_LOG_DEBUG, "heartbeat: %s", rt_strerror(status));
        return;
    }
    if (status != 0) {
        /* E.g. the master lost its state or does not know our id. */
        rt_log(RT_LOG_WARN, "heartbeat rejected (%s); registering again",
               rt_strerror(status));
        ps->registered = 0;
        return;
    }
    resp = rt__register_resp__unpack(NULL, len, body);
    if (!resp) {
        rt_log(RT_LOG_ERROR, "bad heartbeat reply from master");
        return;
    }
    if (resp->server_id != 0 && resp->server_id != ps->server_id) {
        rt_log(RT_LOG_WARN,
               "heartbeat reply for server %llu, we are %llu; "
               "registering again",
               (unsigned long long)resp->server_id,
               (unsigned long long)ps->server_id);
        ps->registered = 0;
    } else if (ps_fence_check(ps, resp->master_term, "a heartbeat reply") ==
               0) {
        ps__apply(ps, resp->ranges, resp->n_ranges, resp->peers, resp->n_peers,
                  resp->map_version, 0, 1);
    }
    rt__register_resp__free_unpacked(resp, NULL);
}

static void ps__heartbeat(struct ps_server *ps)
{
    Rt__HeartbeatReq req = RT__HEARTBEAT_REQ__INIT;
    size_t n = ps->ranges.n;
    Rt__RangeLoad *loads = rt_xcalloc(n, sizeof(*loads));
    Rt__RangeLoad **ptrs = rt_xcalloc(n, sizeof(*ptrs));
    Rt__ReplStatus *repl, **repl_ptrs;
    size_t n_repl;
    uint64_t now = uv_now(ps->loop);
    int rc;

    for (size_t i = 0; i < n; i++) {
        struct ps_range *r = ps->ranges.v[i];
        rt__range_load__init(&loads[i]);
        loads[i].range_id = r->id;
        loads[i].requests = r->requests;
        loads[i].entities = r->entities;
        loads[i].bytes_written = r->bytes_written;
        loads[i].exec_us = r->exec_us;
        loads[i].key_count = r->key_count;
        loads[i].key_bytes = r->key_bytes;
        loads[i].n_sample_pks = r->n_sample;
        loads[i].sample_pks = r->sample;
        loads[i].interval_ms = now - r->load_since_ms;
        loads[i].scanned = r->scanned;
        loads[i].throttled = r->throttled;
        ptrs[i] = &loads[i];
    }
    req.server_id = ps->server_id;
    req.n_loads = n;
    req.loads = ptrs;
    req.pending = (uint32_t)ps_writer_pending(ps->writer);
    req.max_server_eps = ps->cfg.max_server_eps;
    req.max_range_eps = ps->cfg.max_range_eps;
    req.stalled = ps_repl_stalled(ps) != 0;
    repl = ps_repl_status(ps, &n_repl);
    repl_ptrs = n_repl ? rt_xcalloc(n_repl, sizeof(*repl_ptrs)) : NULL;
    for (size_t i = 0; i < n_repl; i++) {
        repl_ptrs[i] = &repl[i];
    }
    req.n_repl = n_repl;
    req.repl = repl_ptrs;
    rc =
        rt_rpc_call_pb(rt_rpc_client_conn(ps->master), RT__METHOD__PS_HEARTBEAT,
                       &req.base, PS_MASTER_CALL_MS, ps__heartbeat_cb, ps);
    free(loads);
    free(ptrs);
    free(repl);
    free(repl_ptrs);
    if (rc != 0) {
        rt_log(RT_LOG_ERROR, "heartbeat call failed: %s", rt_strerror(rc));
        return;
    }
    ps->hb_inflight = 1;
    /* The body was copied: counters start over for the next interval. */
    for (size_t i = 0; i < n; i++) {
        ps_range_load_reset(ps->ranges.v[i], now);
    }
}

static void ps__hb_timer_cb(uv_timer_t *t)
{
    struct ps_server *ps = container_of(t, struct ps_server, hb_timer);

    if (ps->stopping || !rt_rpc_conn_is_up(rt_rpc_client_conn(ps->master))) {
        return;
    }
    if (!ps->registered) {
        if (!ps->register_inflight) {
            ps__register(ps);
        }
        return;
    }
    if (!ps->hb_inflight) {
        ps__heartbeat(ps);
    }
}

static void ps__master_conn_cb(struct rt_rpc_conn *conn, int up, void *ud)
{
    struct ps_server *ps = ud;

    (void)conn;
    ps->registered = 0;
    if (ps->stopping) {
        return;
    }
    if (up) {
        rt_log(RT_LOG_INFO, "connected to master %s", ps__master_addr(ps));
        if (!ps->register_inflight) {
            ps__register(ps);
        }
    } else {
        rt_log(RT_LOG_WARN, "lost master %s; reconnecting",
               ps__master_addr(ps));
    }
}

/* Requests from the master */

void ps_master_on_assign(struct ps_server *ps,
                         struct rt_rpc_conn *conn,
                         uint64_t id,
                         const uint8_t *body,
                         size_t len)
{
    const uint32_t method = RT__METHOD__ASSIGN_RANGES;
    Rt__Assignment *a = rt__assignment__unpack(NULL, len, body);
    int rc;

    if (!a) {
        rt_rpc_reply_err(conn, id, method, RT_EINVAL, "bad Assignment");
        return;
    }
    if (ps_fence_admit(ps, conn, id, method, a->master_term) != 0) {
        rt__assignment__free_unpacked(a, NULL); /* nothing of it taken */
        return;
    }
    rc = ps__apply(ps, a->ranges, a->n_ranges, a->peers, a->n_peers,
                   a->map_version, 0, 0);
    rt__assignment__free_unpacked(a, NULL);
    if (rc != 0) {
        /* A replicated range's configuration was not taken (a secondary
         * named primary before it was sealed): the master sends it
         * again. The rest is persisted all the same. */
        ps_jobs_persist(ps, NULL, 0, 0);
        rt_rpc_reply_err(conn, id, method, rc,
                         "a replicated range's configuration was refused");
        return;
    }
    /* Answer once the (possibly unchanged) set and the replica states
     * (queued before) are durable. */
    ps_jobs_persist(ps, conn, id, method);
}

void ps_master_on_drop(struct ps_server *ps,
                       struct rt_rpc_conn *conn,
                       uint64_t id,
                       const uint8_t *body,
                       size_t len)
{
    Rt__DropTableReq *d = rt__drop_table_req__unpack(NULL, len, body);

    if (!d || d->table_id == 0) {
        rt_rpc_reply_err(conn, id, RT__METHOD__DROP_TABLE, RT_EINVAL,
                         "bad DropTableReq");
        if (d) {
            rt__drop_table_req__free_unpacked(d, NULL);
        }
        return;
    }
    if (ps_fence_admit(ps, conn, id, RT__METHOD__DROP_TABLE, d->master_term) !=
        0) {
        rt__drop_table_req__free_unpacked(d, NULL);
        return;
    }
    rt_log(RT_LOG_INFO, "dropping table %llu", (unsigned long long)d->table_id);
    ps_jobs_drop(ps, d->table_id, conn, id);
    rt__drop_table_req__free_unpacked(d, NULL);
}

/* Start / stop */

int ps_master_start(struct ps_server *ps, rt_rpc_request_cb on_request)
{
    uint64_t period =
        ps->cfg.heartbeat_ms ? ps->cfg.heartbeat_ms : PS_HEARTBEAT_MS;
    int rc;

    rc = uv_timer_init(ps->loop, &ps->hb_timer);
    if (rc != 0) {
        return rc;
    }
    ps->hb_timer_init = 1;
    rc = rt_masters_link_start(ps->loop, ps->cfg.master, on_request,
                               ps__master_conn_cb, ps, &ps->master_link);
    if (rc != 0) {
        ps->master_link = NULL;
        return rc;
    }
    ps->master = rt_masters_link_client(ps->master_link);
    return uv_timer_start(&ps->hb_timer, ps__hb_timer_cb, period, period);
}

void ps_master_stop(struct ps_server *ps)
{
    if (ps->hb_timer_init) {
        uv_timer_stop(&ps->hb_timer);
        uv_close((uv_handle_t *)&ps->hb_timer, NULL);
        ps->hb_timer_init = 0;
    }
    if (ps->master_link) {
        rt_masters_link_close(ps->master_link);
        ps->master_link = NULL;
        ps->master = NULL;
    }
}
