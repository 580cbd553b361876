/* RPC handlers: ENTITY_WRITE / ENTITY_GET / ENTITY_SCAN / PING for front
 * ends, ASSIGN_RANGES / DROP_TABLE / MOVE_* for the master, MIGRATE_* and
 * REPL_APPEND from other partition servers (all may arrive on any
 * connection; moves are in ps_move.c, replication in ps_repl.c).
 *
 * Happy path of a write: unpack -> ownership check (range id, epoch, table,
 * every PK inside [low, high)) -> back-pressure check -> a job holding the
 * unpacked message (ops borrow its strings and blobs) goes to the writer ->
 * group commit -> on the loop thread: WriteResp with one OpResult per op.
 * Failure modes and what the caller sees (header status, Error body):
 *  - malformed body, bad op kind, bad properties blob: RT_EINVAL;
 *  - not our range at that epoch, or PK outside it: RT_ESTALE;
 *  - the range is frozen for a move: RT_EBUSY (reads too);
 *  - more than --max-pending queued ops, or the server's or the range's
 *    entities/s cap spent (token buckets): RT_EBUSY, answered at once;
 *  - atomic write whose op i fails: that op's code, Error{index = i};
 *  - store failure (map full, I/O): RT_ENOSPACE / RT_EIO;
 *  - per-op outcomes of a non-atomic write: status 0, OpResult.code.
 * Point gets run right here on the loop thread in an LMDB read transaction
 * (a snapshot; they never wait for the writer). Scans run on the libuv
 * threadpool (uv_queue_work), each in its own read transaction, so a long
 * scan never stalls the loop: the worker scans and packs the ScanResp, the
 * after-work callback (loop thread) accounts the load and replies.
 * Scan failure modes: malformed body or filter: RT_EINVAL; not our range,
 * or a resume key at or past its high end: RT_ESTALE; store failure:
 * RT_EIO / RT_ECORRUPT; shutting down before the work ran: RT_EBUSY.
 *
 * Replicated ranges (ps_repl.h): admission first asks ps_repl_route (a
 * secondary: RT_ENOTPRIMARY; the primary accepts any epoch in
 * [primary_epoch, epoch]), writes then need an ISR of at least min_insync
 * (RT_EBUSY) and count the writes waiting for acks in --max-pending; a write's
 * answer, failed or not, waits until cw covers what it wrote or saw, and a
 * get's or scan's (found or not) until cw reaches the LSN of its read
 * transaction, at most --read-wait-ms (then RT_EBUSY). REPL_APPEND from a
 * primary goes to ps_repl_on_append. RF-1 ranges take none of these steps. */
#include "ps_rpc.h"

#include <stdlib.h>
#include <string.h>

#include "ps_jobs.h"
#include "ps_learn.h"
#include "ps_master.h"
#include "ps_move.h"
#include "ps_repair.h"
#include "ps_repl.h"
#include "ps_split.h"
#include "ps_transfer.h"
#include "rt.pb-c.h"
#include "rt_alloc.h"
#include "rt_entity.h"
#include "rt_err.h"
#include "rt_filter.h"
#include "rt_key.h"
#include "rt_log.h"
#include "rt_time.h"
#include "rt_utf8.h"

/* An empty properties blob: count 0. */
static const uint8_t ps__empty_props[2] = {0, 0};

struct ps_write_req
{
    struct ps_job job;
    struct ps_server *ps;
    struct rt_rpc_conn *conn;
    uint64_t id;
    uint64_t range_id;
    int repl; /* a replicated range: the answer waits for cw */
    struct ps_repl_wait wait;
    uint64_t t0_us; /* arrival (rt_ps_rpc_duration_seconds) */
    Rt__WriteReq *msg;
    struct ps_op ops[];
};

/* A replicated range's primary only, at an epoch in [primary_epoch,
 * epoch] (RT_ENOTPRIMARY, RT_ESTALE; *@repl set when replicated), then
 * ownership (RT_ESTALE), then a freeze for a move (RT_EBUSY, not counted
 * as throttling: the range is about to change hands). */
static int ps__route(struct ps_server *ps,
                     const Rt__RangeRef *ref,
                     const char *pk,
                     struct ps_range **out,
                     int *repl)
{
    uint64_t epoch;
    int rc;

    if (!ref) {
        return RT_EINVAL;
    }
    epoch = ref->epoch;
    rc = ps_repl_route(ps, ref->range_id, ref->epoch, &epoch);
    if (rc < 0) {
        return rc;
    }
    *repl = rc == 0;
    rc = ps_ranges_route(&ps->ranges, ref->table_id, ref->range_id, epoch, pk,
                         out);
    if (rc == 0 && (*out)->frozen) {
        return RT_EBUSY;
    }
    return rc;
}

/* A request on @r refused to shed load: counted for the range and the
 * server. Returns RT_EBUSY. */
static int ps__throttled(struct ps_server *ps, struct ps_range *r)
{
    ps_range_throttled(r);
    ps->throttled_total++;
    return RT_EBUSY;
}

/* Throttling (DESIGN §4): the server's and the range's token buckets must
 * both have a positive balance, else RT_EBUSY at once (never a stall). */
static int ps__admit(struct ps_server *ps, struct ps_range *r)
{
    uint64_t now = uv_now(ps->loop);

    if (!ps_tbucket_admit(&ps->tb, now) || !ps_tbucket_admit(&r->tb, now)) {
        return ps__throttled(ps, r);
    }
    return 0;
}

static void ps__charge(struct ps_server *ps,
                       struct ps_range *r,
                       uint64_t entities)
{
    ps_tbucket_charge(&ps->tb, entities);
    if (r) {
        ps_tbucket_charge(&r->tb, entities);
    }
}

/* ENTITY_WRITE */

/* Answers the write (@code 0: with its outcome; else that error: the
 * outcome is unknown or the answer could not wait) and frees it. */
static void ps__write_reply(struct ps_write_req *req, int code)
{
    struct ps_write *w = &req->job.u.write;
    const uint32_t method = RT__METHOD__ENTITY_WRITE;

    if (code != 0) {
        rt_rpc_reply_err(req->conn, req->id, method, code, NULL);
    } else if (w->status != 0) {
        rt_rpc_reply_err_at(req->conn, req->id, method, w->status,
                            w->atomic ? w->failed_index : -1, w->errmsg);
    } else {
        Rt__WriteResp resp = RT__WRITE_RESP__INIT;
        Rt__OpResult *res = rt_xcalloc(w->n_ops, sizeof(*res));
        Rt__OpResult **resp_ptrs = rt_xcalloc(w->n_ops, sizeof(*resp_ptrs));
        for (size_t i = 0; i < w->n_ops; i++) {
            const struct ps_op *op = &w->ops[i];
            rt__op_result__init(&res[i]);
            res[i].code = op->code;
            res[i].ticks = op->ticks;
            res[i].value.data = op->value.data;
            res[i].value.len = op->value.len;
            resp_ptrs[i] = &res[i];
        }
        resp.n_results = w->n_ops;
        resp.results = resp_ptrs;
        rt_rpc_reply_pb(req->conn, req->id, method, 0, &resp.base);
        free(res);
        free(resp_ptrs);
    }
    rt_hist_observe(&req->ps->rpc_lat[PS_RPC_LAT_WRITE],
                    rt_time_mono_us() - req->t0_us);
    ps_write_reset(w);
    rt_rpc_conn_unref(req->conn);
    rt__write_req__free_unpacked(req->msg, NULL);
    free(req);
}

/* Replication released the write: cw covers it (§5.3). */
static void ps__write_released(struct ps_repl_wait *wait, int code)
{
    ps__write_reply(container_of(wait, struct ps_write_req, wait), code);
}

static void ps__write_done(struct ps_job *job)
{
    struct ps_write_req *req = container_of(job, struct ps_write_req, job);
    struct ps_server *ps = req->ps;
    struct ps_write *w = &job->u.write;
    struct ps_range *r = ps_ranges_find(&ps->ranges, req->range_id);

    if (r) {
        uint64_t ok = 0;
        for (size_t i = 0; i < w->n_ops; i++) {
            ok += w->status == 0 && w->ops[i].code == 0;
        }
        ps_range_account(&ps->ranges, r, ok, w->bytes_written, job->exec_us,
                         w->ops[0].pk);
    }
    if (!r || !ps_range_contains(r, w->ops[0].pk)) {
        /* A split or merge replaced the range while the write was queued:
         * its effect belongs to the range holding the PK now. */
        r = ps_ranges_find_key(&ps->ranges, w->table_id, w->ops[0].pk);
    }
    if (r) {
        ps_range_count_write(r, w->txn_id, w->count_delta, w->bytes_delta);
    }
    if (w->status == RT_ENOSPACE || w->status == RT_EIO ||
        w->status == RT_ECORRUPT || w->status == RT_ENOMEM ||
        w->status == RT_ETOOLARGE) {
        rt_log(RT_LOG_WARN, "write to range %llu failed: %s",
               (unsigned long long)req->range_id, rt_strerror(w->status));
    }
    ps_repl_note_txn(ps, w->txn_id);
    if (req->repl) {
        /* Even a failed write waits: it saw state that may not be on the
         * other replicas yet (§5.2). */
        req->wait.cb = ps__write_released;
        ps_repl_write_done(ps, &req->wait, w);
        return;
    }
    ps__write_reply(req, 0);
}

static void ps__on_write(struct ps_server *ps,
                         struct rt_rpc_conn *conn,
                         uint64_t id,
                         const uint8_t *body,
                         size_t len)
{
    const uint32_t method = RT__METHOD__ENTITY_WRITE;
    Rt__WriteReq *msg = rt__write_req__unpack(NULL, len, body);
    struct ps_write_req *req;
    struct ps_range *r = NULL;
    uint64_t t0_us = rt_time_mono_us();
    int rc, repl = 0;

    if (!msg) {
        rt_rpc_reply_err(conn, id, method, RT_EINVAL, "bad WriteReq");
        return;
    }
    if (msg->atomic && msg->n_ops > PS_BATCH_MAX_OPS) {
        /* Spec §5.2: the index names the first op beyond the limit. */
        rt_rpc_reply_err_at(conn, id, method, RT_EINVAL, PS_BATCH_MAX_OPS,
                            "The batch request operation exceeds the maximum "
                            "100 changes per change set.");
        goto out_free;
    }
    if (msg->n_ops == 0 || msg->n_ops > PS_MAX_OPS_PER_WRITE) {
        rt_rpc_reply_err(conn, id, method, RT_EINVAL, "bad op count");
        goto out_free;
    }
    for (size_t i = 0; i < msg->n_ops; i++) {
        const Rt__EntityOp *op = msg->ops[i];
        if ((int)op->kind <= (int)RT__OP_KIND__OP_NONE ||
            (int)op->kind >= (int)PS_OP__NR) {
            rt_rpc_reply_err_at(conn, id, method, RT_EINVAL, (int)i,
                                "bad op kind");
            goto out_free;
        }
        if (op->kind != RT__OP_KIND__OP_DELETE && op->props.len > 0 &&
            rt_props_check(op->props.data, op->props.len) != 0) {
            rt_rpc_reply_err_at(conn, id, method, RT_EINVAL, (int)i,
                                "bad properties blob");
            goto out_free;
        }
        /* An entity group transaction is routed by its first op; the
         * store answers RT_EDIFFPARTITIONS for any op naming another PK
         * (which may well be outside this range). */
        if (msg->atomic && i > 0) {
            continue;
        }
        rc = ps__route(ps, msg->route, op->pk, &r, &repl);
        if (rc != 0) {
            rt_rpc_reply_err(conn, id, method, rc, NULL);
            goto out_free;
        }
    }
    /* Throttling (DESIGN §4): shed load, never stall. Writes waiting for
     * their replicas count as pending too. */
    if (ps_writer_pending(ps->writer) + ps_repl_held_ops(ps) + msg->n_ops >
        ps->cfg.max_pending) {
        rc = ps__throttled(ps, r);
    } else {
        rc = ps__admit(ps, r);
    }
    if (rc == 0 && repl) {
        rc = ps_repl_write_admit(ps, r->id);
    }
    if (rc == 0 && repl) {
        rc = ps_split_write_admit(ps, r->id);
    }
    if (rc != 0) {
        rt_rpc_reply_err(conn, id, method, rc, NULL);
        goto out_free;
    }
    ps__charge(ps, r, msg->n_ops);

    req = calloc(1, sizeof(*req) + msg->n_ops * sizeof(struct ps_op));
    if (!req) {
        rt_rpc_reply_err(conn, id, method, RT_ENOMEM, NULL);
        goto out_free;
    }
    req->ps = ps;
    req->t0_us = t0_us;
    req->conn = conn;
    req->id = id;
    req->range_id = r->id;
    req->repl = repl;
    req->msg = msg;
    for (size_t i = 0; i < msg->n_ops; i++) {
        const Rt__EntityOp *op = msg->ops[i];
        struct ps_op *o = &req->ops[i];
        o->kind = (enum ps_op_kind)op->kind;
        o->pk = op->pk;
        o->rk = op->rk;
        if (op->props.len > 0) {
            o->props = op->props.data;
            o->props_len = op->props.len;
        } else {
            o->props = ps__empty_props;
            o->props_len = sizeof(ps__empty_props);
        }
        o->if_match_any = op->if_match_any;
        o->if_match = op->if_match;
        /* The stored value of an insert, only when asked for (the front
         * end rebuilds its echo from what it sent). */
        o->want_value = op->kind == RT__OP_KIND__OP_INSERT && op->return_value;
        rt_buf_init(&o->value);
    }
    req->job.kind = PS_JOB_WRITE;
    req->job.cb = ps__write_done;
    req->job.u.write.table_id = msg->route->table_id;
    req->job.u.write.ops = req->ops;
    req->job.u.write.n_ops = msg->n_ops;
    req->job.u.write.atomic = msg->atomic;
    req->job.u.write.failed_index = -1;
    req->job.u.write.range_id = r->id;
    rt_rpc_conn_ref(conn);
    ps_writer_submit(ps->writer, &req->job);
    return;

out_free:
    rt__write_req__free_unpacked(msg, NULL);
}

/* ENTITY_GET */

/* A get of a replicated range waiting for cw >= lsn_T (§6.3). */
struct ps_get_wait
{
    struct ps_repl_wait wait;
    struct ps_server *ps;
    uint64_t t0_us; /* arrival */
    struct rt_rpc_conn *conn;
    uint64_t id;
    int rc;
    struct rt_buf value;
};

/* Answers a get: @rc 0 with @value, else the error. */
static void ps__get_reply(struct rt_rpc_conn *conn,
                          uint64_t id,
                          int rc,
                          const struct rt_buf *value)
{
    const uint32_t method = RT__METHOD__ENTITY_GET;
    if (rc != 0) {
        rt_rpc_reply_err(conn, id, method, rc, NULL);
        return;
    }
    Rt__GetResp resp = RT__GET_RESP__INIT;
    resp.value.data = value->data;
    resp.value.len = value->len;
    rt_rpc_reply_pb(conn, id, method, 0, &resp.base);
}

static void ps__get_released(struct ps_repl_wait *wait, int code)
{
    struct ps_get_wait *g = container_of(wait, struct ps_get_wait, wait);
    ps__get_reply(g->conn, g->id, code ? code : g->rc, &g->value);
    rt_hist_observe(&g->ps->rpc_lat[PS_RPC_LAT_GET],
                    rt_time_mono_us() - g->t0_us);
    rt_buf_free(&g->value);
    rt_rpc_conn_unref(g->conn);
    free(g);
}

static void ps__on_get(struct ps_server *ps,
                       struct rt_rpc_conn *conn,
                       uint64_t id,
                       const uint8_t *body,
                       size_t len)
{
    const uint32_t method = RT__METHOD__ENTITY_GET;
    Rt__GetReq *msg = rt__get_req__unpack(NULL, len, body);
    struct rt_buf value = RT_BUF_INIT;
    struct ps_range *r;
    uint64_t t0 = rt_time_mono_us(), txn_id = 0;
    int rc, repl = 0;

    if (!msg) {
        rt_rpc_reply_err(conn, id, method, RT_EINVAL, "bad GetReq");
        return;
    }
    rc = ps__route(ps, msg->route, msg->pk, &r, &repl);
    if (rc == 0) {
        rc = ps__admit(ps, r);
    }
    if (rc != 0) {
        rt_rpc_reply_err(conn, id, method, rc, NULL);
        goto out;
    }
    rc = ps_store_get_txn(ps->store, msg->route->table_id, msg->pk, msg->rk,
                          &value, &txn_id);
    ps_range_account(&ps->ranges, r, rc == 0, 0, rt_time_mono_us() - t0,
                     msg->pk);
    ps__charge(ps, r, rc == 0);
    if (rc != 0 && rc != RT_ENOTFOUND) {
        rt_log(RT_LOG_WARN, "get in range %llu failed: %s",
               (unsigned long long)r->id, rt_strerror(rc));
    }
    if (repl && rc == RT_ECORRUPT) {
        /* Answered from another replica's copy, and repaired. */
        struct rt_buf key = RT_BUF_INIT;
        rt_key_entity(&key, msg->route->table_id, msg->pk, strlen(msg->pk),
                      msg->rk, strlen(msg->rk));
        ps_repair_get(ps, conn, id, r->id, key.data, key.len);
        rt_buf_free(&key);
        goto out;
    }
    if (repl && (rc == 0 || rc == RT_ENOTFOUND)) {
        /* Found or not, the answer tells what T held: never ahead of cw. */
        struct ps_get_wait *g = rt_xcalloc(1, sizeof(*g));
        int w;
        g->wait.cb = ps__get_released;
        w = ps_repl_read_wait(ps, &g->wait, r->id, txn_id);
        if (w == 1) {
            g->ps = ps;
            g->t0_us = t0;
            g->conn = conn;
            g->id = id;
            g->rc = rc;
            g->value = value;
            rt_buf_init(&value);
            rt_rpc_conn_ref(conn);
            goto out;
        }
        free(g);
        rc = w < 0 ? w : rc;
    }
    ps__get_reply(conn, id, rc, &value);
    rt_hist_observe(&ps->rpc_lat[PS_RPC_LAT_GET], rt_time_mono_us() - t0);
out:
    rt_buf_free(&value);
    rt__get_req__free_unpacked(msg, NULL);
}

/* ENTITY_SCAN */

struct ps_scan_req
{
    uv_work_t work;
    struct ps_server *ps;
    struct rt_rpc_conn *conn;
    uint64_t id;
    uint64_t range_id;
    int repl; /* a replicated range: the answer waits for cw */
    struct ps_repl_wait wait;
    uint64_t t0_us; /* arrival (rt_ps_rpc_duration_seconds) */
    Rt__ScanReq *msg;
    struct rt_filter *filter;
    char *low;  /* the range's bounds when the request came */
    char *high; /* NULL = unbounded */
    struct ps_scan sc;
    int rc;
    uint64_t exec_us;
    struct rt_buf reply;   /* packed ScanResp when rc == 0 */
    struct rt_buf bad_key; /* the key of a value failing its checksum */
};

static void ps__scan_pack(struct ps_scan_req *req)
{
    struct ps_scan *sc = &req->sc;
    Rt__ScanResp resp = RT__SCAN_RESP__INIT;
    Rt__EntityRec *recs = rt_xcalloc(sc->n, sizeof(*recs));
    Rt__EntityRec **ptrs = rt_xcalloc(sc->n, sizeof(*ptrs));
    size_t len;

    for (size_t i = 0; i < sc->n; i++) {
        rt__entity_rec__init(&recs[i]);
        recs[i].pk = sc->recs[i].pk;
        recs[i].rk = sc->recs[i].rk;
        recs[i].value.data = sc->recs[i].value;
        recs[i].value.len = sc->recs[i].value_len;
        ptrs[i] = &recs[i];
    }
    resp.n_entities = sc->n;
    resp.entities = ptrs;
    resp.more = sc->more;
    resp.next_pk = sc->more ? sc->next_pk : (char *)"";
    resp.next_rk = sc->more ? sc->next_rk : (char *)"";
    resp.done = sc->done;
    len = rt__scan_resp__get_packed_size(&resp);
    rt__scan_resp__pack(&resp, rt_buf_reserve(&req->reply, len));
    req->reply.len += len;
    free(recs);
    free(ptrs);
}

/* Threadpool: the scan itself and the packing of its reply. */
static void ps__scan_work(uv_work_t *work)
{
    struct ps_scan_req *req = container_of(work, struct ps_scan_req, work);
    uint64_t t0 = uv_hrtime();

    req->rc = ps_store_scan(req->ps->store, &req->sc);
    if (req->rc == 0) {
        ps__scan_pack(req);
    }
    req->exec_us = (uv_hrtime() - t0) / 1000;
}

static void ps__scan_free(struct ps_scan_req *req)
{
    ps_scan_free(&req->sc);
    rt_buf_free(&req->reply);
    rt_buf_free(&req->bad_key);
    rt_filter_free(req->filter);
    rt_rpc_conn_unref(req->conn);
    rt__scan_req__free_unpacked(req->msg, NULL);
    free(req->low);
    free(req->high);
    free(req);
}

static void ps__scan_reply(struct ps_scan_req *req, int code)
{
    const uint32_t method = RT__METHOD__ENTITY_SCAN;
    if (code != 0) {
        rt_rpc_reply_err(req->conn, req->id, method, code, NULL);
    } else {
        rt_rpc_reply(req->conn, req->id, method, 0, req->reply.data,
                     req->reply.len);
    }
    rt_hist_observe(&req->ps->rpc_lat[PS_RPC_LAT_SCAN],
                    rt_time_mono_us() - req->t0_us);
    ps__scan_free(req);
}

static void ps__scan_released(struct ps_repl_wait *wait, int code)
{
    ps__scan_reply(container_of(wait, struct ps_scan_req, wait), code);
}

/* Loop thread: account, reply, free. */
static void ps__scan_after(uv_work_t *work, int status)
{
    struct ps_scan_req *req = container_of(work, struct ps_scan_req, work);
    struct ps_server *ps = req->ps;
    const uint32_t method = RT__METHOD__ENTITY_SCAN;
    struct ps_range *r = ps_ranges_find(&ps->ranges, req->range_id);

    ps->work_inflight--;
    if (status != 0) {
        rt_rpc_reply_err(req->conn, req->id, method, RT_EBUSY, "scan canceled");
        ps__scan_free(req);
        return;
    }
    if (r) {
        const char *pk = req->sc.n > 0         ? req->sc.recs[0].pk
                         : req->msg->has_start ? req->msg->start_pk
                                               : NULL;
        ps_range_account(&ps->ranges, r, req->sc.n, 0, req->exec_us, pk);
        r->scanned += req->sc.scanned;
    }
    ps__charge(ps, r, req->sc.n);
    if (req->rc == RT_ECORRUPT && req->repl && req->bad_key.len) {
        /* Repaired from a peer in the background; the client's retry
         * (503 ServerBusy) finds it whole. */
        ps_repair_key(ps, req->range_id, req->bad_key.data, req->bad_key.len);
        ps__scan_reply(req, RT_EBUSY);
        return;
    }
    if (req->rc != 0) {
        rt_log(RT_LOG_WARN, "scan of range %llu failed: %s",
               (unsigned long long)req->range_id, rt_strerror(req->rc));
        ps__scan_reply(req, req->rc);
        return;
    }
    if (req->repl) {
        int w;
        req->wait.cb = ps__scan_released;
        w = ps_repl_read_wait(ps, &req->wait, req->range_id, req->sc.txn_id);
        if (w == 1) {
            return; /* answered when cw reaches the scan's snapshot */
        }
        ps__scan_reply(req, w);
        return;
    }
    ps__scan_reply(req, 0);
}

static void ps__on_scan(struct ps_server *ps,
                        struct rt_rpc_conn *conn,
                        uint64_t id,
                        const uint8_t *body,
                        size_t len)
{
    const uint32_t method = RT__METHOD__ENTITY_SCAN;
    Rt__ScanReq *msg = rt__scan_req__unpack(NULL, len, body);
    struct rt_filter *filter = NULL;
    struct ps_scan_req *req;
    struct ps_range *r;
    uint64_t t0_us = rt_time_mono_us();
    int rc, repl = 0;

    if (!msg) {
        rt_rpc_reply_err(conn, id, method, RT_EINVAL, "bad ScanReq");
        return;
    }
    rc = ps__route(ps, msg->route, NULL, &r, &repl);
    if (rc == 0 && msg->has_start && r->high &&
        rt_utf16_cmpz(msg->start_pk, r->high) >= 0) {
        rc = RT_ESTALE; /* the resume key belongs to a later range */
    }
    if (rc == 0) {
        rc = ps__admit(ps, r);
    }
    if (rc != 0) {
        rt_rpc_reply_err(conn, id, method, rc, NULL);
        goto out;
    }
    if (msg->filter.len > 0 &&
        rt_filter_decode(msg->filter.data, msg->filter.len, &filter) != 0) {
        rt_rpc_reply_err(conn, id, method, RT_EINVAL, "bad filter");
        goto out;
    }
    req = calloc(1, sizeof(*req));
    if (!req) {
        rt_filter_free(filter);
        rt_rpc_reply_err(conn, id, method, RT_ENOMEM, NULL);
        goto out;
    }
    req->ps = ps;
    req->t0_us = t0_us;
    req->conn = conn;
    req->id = id;
    req->range_id = r->id;
    req->repl = repl;
    req->msg = msg;
    req->filter = filter;
    req->low = rt_xstrdup(r->low);
    req->high = r->high ? rt_xstrdup(r->high) : NULL;
    rt_buf_init(&req->reply);
    req->sc.table_id = r->table_id;
    req->sc.low = req->low;
    req->sc.high = req->high;
    req->sc.has_start = msg->has_start;
    req->sc.start_pk = msg->start_pk;
    req->sc.start_rk = msg->start_rk;
    req->sc.limit = msg->limit;
    req->sc.filter = filter;
    req->sc.select = (const char *const *)msg->select;
    req->sc.n_select = msg->n_select;
    req->sc.budget_ms = msg->budget_ms;
    req->sc.bad_key = &req->bad_key;
    rt_rpc_conn_ref(conn);
    rc = uv_queue_work(ps->loop, &req->work, ps__scan_work, ps__scan_after);
    if (rc != 0) {
        rt_log(RT_LOG_ERROR, "uv_queue_work: %s", uv_strerror(rc));
        rt_rpc_reply_err(conn, id, method, RT_EIO, NULL);
        ps__scan_free(req);
        return;
    }
    ps->work_inflight++;
    return;
out:
    rt__scan_req__free_unpacked(msg, NULL);
}

/* Dispatcher */

#define PS__MASTER RT_RPC_ROLE_MASTER
#define PS__PS RT_RPC_ROLE_PS
#define PS__FE RT_RPC_ROLE_FE

/* Who may call what (docs/SECURITY.md): the roles whose certificates may
 * send each request; an admin certificate may send any, a method absent
 * here only an admin. Front ends read and write entities; peers
 * replicate, copy learners, repair (REPL_FETCH, ENTITY_GET) and migrate
 * moved ranges; the master assigns, seals, freezes, transfers and moves.
 * The master-term fencing (ps_fence) then orders the masters among
 * themselves. */
static const struct
{
    uint32_t method;
    unsigned roles;
} ps__rpc_roles[] = {
    {RT__METHOD__ENTITY_WRITE, PS__FE},
    {RT__METHOD__ENTITY_GET, PS__FE | PS__PS},
    {RT__METHOD__ENTITY_SCAN, PS__FE},
    {RT__METHOD__PING, PS__FE | PS__PS | PS__MASTER},
    {RT__METHOD__REPL_APPEND, PS__PS},
    {RT__METHOD__REPL_SUPPORT, PS__PS},
    {RT__METHOD__REPL_PROBE, PS__PS},
    {RT__METHOD__REPL_BEGIN, PS__PS},
    {RT__METHOD__REPL_SNAP, PS__PS},
    {RT__METHOD__REPL_ABORT, PS__PS | PS__MASTER},
    {RT__METHOD__REPL_FETCH, PS__PS},
    {RT__METHOD__MIGRATE_BEGIN, PS__PS},
    {RT__METHOD__MIGRATE_DATA, PS__PS},
    {RT__METHOD__MIGRATE_END, PS__PS},
    {RT__METHOD__SEAL, PS__MASTER},
    {RT__METHOD__RANGE_FREEZE, PS__MASTER},
    {RT__METHOD__RANGE_THAW, PS__MASTER},
    {RT__METHOD__TRANSFER_PRIMARY, PS__MASTER},
    {RT__METHOD__TRANSFER_ABORT, PS__MASTER},
    {RT__METHOD__ASSIGN_RANGES, PS__MASTER},
    {RT__METHOD__DROP_TABLE, PS__MASTER},
    {RT__METHOD__MOVE_OUT, PS__MASTER},
    {RT__METHOD__MOVE_ABORT, PS__MASTER},
    {RT__METHOD__MOVE_DONE, PS__MASTER},
};

static unsigned ps__roles_of(uint32_t method)
{
    for (size_t i = 0; i < sizeof(ps__rpc_roles) / sizeof(ps__rpc_roles[0]);
         i++) {
        if (ps__rpc_roles[i].method == method) {
            return ps__rpc_roles[i].roles;
        }
    }
    return 0;
}

void ps_rpc_on_request(struct rt_rpc_conn *conn,
                       uint32_t method,
                       uint64_t id,
                       const uint8_t *body,
                       size_t len,
                       void *ud)
{
    struct ps_server *ps = ud;

    if (rt_rpc_authorize(conn, method, id, ps__roles_of(method)) != 0) {
        return;
    }
    if (ps->stopping) {
        rt_rpc_reply_err(conn, id, method, RT_EBUSY, "shutting down");
        return;
    }
    switch (method) {
        case RT__METHOD__ENTITY_WRITE:
            ps__on_write(ps, conn, id, body, len);
            break;
        case RT__METHOD__ENTITY_GET:
            ps__on_get(ps, conn, id, body, len);
            break;
        case RT__METHOD__ENTITY_SCAN:
            ps__on_scan(ps, conn, id, body, len);
            break;
        case RT__METHOD__PING:
            ps_jobs_reply_empty(conn, id, method);
            break;
        case RT__METHOD__REPL_APPEND:
            ps_repl_on_append(ps, conn, id, body, len);
            break;
        case RT__METHOD__REPL_SUPPORT:
            ps_repl_on_support(ps, conn, id, body, len);
            break;
        case RT__METHOD__SEAL:
            ps_repl_on_seal(ps, conn, id, body, len);
            break;
        case RT__METHOD__REPL_PROBE:
            ps_learn_on_probe(ps, conn, id, body, len);
            break;
        case RT__METHOD__REPL_BEGIN:
            ps_learn_on_begin(ps, conn, id, body, len);
            break;
        case RT__METHOD__REPL_SNAP:
            ps_learn_on_snap(ps, conn, id, body, len);
            break;
        case RT__METHOD__REPL_ABORT:
            ps_learn_on_abort(ps, conn, id, body, len);
            break;
        case RT__METHOD__REPL_FETCH:
            ps_repair_on_fetch(ps, conn, id, body, len);
            break;
        case RT__METHOD__RANGE_FREEZE:
            ps_split_on_freeze(ps, conn, id, body, len);
            break;
        case RT__METHOD__RANGE_THAW:
            ps_split_on_thaw(ps, conn, id, body, len);
            break;
        case RT__METHOD__TRANSFER_PRIMARY:
        case RT__METHOD__TRANSFER_ABORT:
            ps_transfer_on_request(ps, conn, method, id, body, len);
            break;
        case RT__METHOD__ASSIGN_RANGES:
            ps_master_on_assign(ps, conn, id, body, len);
            break;
        case RT__METHOD__DROP_TABLE:
            ps_master_on_drop(ps, conn, id, body, len);
            break;
        case RT__METHOD__MOVE_OUT:
        case RT__METHOD__MOVE_ABORT:
        case RT__METHOD__MOVE_DONE:
        case RT__METHOD__MIGRATE_BEGIN:
        case RT__METHOD__MIGRATE_DATA:
        case RT__METHOD__MIGRATE_END:
            ps_move_on_request(ps, conn, method, id, body, len);
            break;
        default:
            rt_rpc_reply_err(conn, id, method, RT_ENOTIMPL,
                             "method not served by a partition server");
            break;
    }
}
