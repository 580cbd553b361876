/* Range moves, the source side (docs/DESIGN-moves.md; DESIGN §5).
 *
 * Happy path of MOVE_OUT (one struct ps_move_out, states in order; the
 * allowed changes are the table ps__mvout_allowed):
 *  SYNC      a migration log for R's key span is registered with the
 *            writer and a BARRIER job submitted: once it calls back, every
 *            write that commits from now on is in the log (ps_writer.h);
 *  BEGIN     an rt_rpc_client to the target; MIGRATE_BEGIN (the target
 *            clears the span); on its reply a read transaction is opened:
 *            the snapshot, id S;
 *  SNAPSHOT  threadpool work items read the snapshot in ~256 KiB chunks
 *            (one at a time, same transaction) and pack MIGRATE_DATA
 *            bodies; at most PS_MOVE_WINDOW calls are out;
 *  TAIL      log rounds: the records with txn id > S are taken from the
 *            log and streamed the same way, until a round holds at most
 *            PS_MOVE_TAIL_SMALL records or PS_MOVE_TAIL_ROUNDS were sent;
 *  FREEZE    R is frozen (every request on it gets RT_EBUSY) and a META
 *            job persists the freeze marker "mvout" ‖ range id; since jobs
 *            run in order it is also the barrier after which every write
 *            on R admitted before the freeze is committed and logged;
 *  FINAL     the last records and MIGRATE_END{records sent} are sent
 *            without waiting in between; the target confirms END after a
 *            synced commit of everything;
 *  DONE      MOVE_OUT is answered with MoveResp; R stays frozen until
 *            MOVE_DONE (R dropped, its keys deleted in the background),
 *            MOVE_ABORT (unfrozen) or an assignment that settles it.
 * Failure modes before DONE (target down or refusing, timeouts, the log
 * overflowing, the master's MOVE_ABORT, R reassigned): the move ends
 * locally, R is unfrozen (its marker deleted), and MOVE_OUT is answered
 * with the error. A source never unfreezes a DONE range on its own.
 *
 * Thread: loop thread only, except the snapshot work functions. */
#include "ps_move_out.h"

#include <stdlib.h>
#include <string.h>

#include "ps_fence.h"
#include "ps_move_jobs.h"
#include "rt.pb-c.h"
#include "rt_alloc.h"
#include "rt_err.h"
#include "rt_log.h"

static uint64_t ps__ms_since(uint64_t t0_ns, uint64_t t1_ns)
{
    return t1_ns > t0_ns ? (t1_ns - t0_ns) / 1000000u : 0;
}

/* State */

static const char *const ps__mvout_names[PS_MVOUT__NR] = {
    "sync", "begin", "snapshot", "tail", "freeze", "final", "done", "ended"};

/* The allowed changes, one bit per target state. A move runs SYNC ..
 * DONE in order; it ENDs from any state (failure, abort, drop, close)
 * and nothing follows ENDED. */
static const unsigned ps__mvout_allowed[PS_MVOUT__NR] = {
    [PS_MVOUT_SYNC] = PS__BIT(PS_MVOUT_BEGIN) | PS__BIT(PS_MVOUT_ENDED),
    [PS_MVOUT_BEGIN] = PS__BIT(PS_MVOUT_SNAPSHOT) | PS__BIT(PS_MVOUT_ENDED),
    [PS_MVOUT_SNAPSHOT] = PS__BIT(PS_MVOUT_TAIL) | PS__BIT(PS_MVOUT_ENDED),
    [PS_MVOUT_TAIL] = PS__BIT(PS_MVOUT_FREEZE) | PS__BIT(PS_MVOUT_ENDED),
    [PS_MVOUT_FREEZE] = PS__BIT(PS_MVOUT_FINAL) | PS__BIT(PS_MVOUT_ENDED),
    [PS_MVOUT_FINAL] = PS__BIT(PS_MVOUT_DONE) | PS__BIT(PS_MVOUT_ENDED),
    [PS_MVOUT_DONE] = PS__BIT(PS_MVOUT_ENDED),
    [PS_MVOUT_ENDED] = 0,
};

const char *ps__mvout_state_name(enum ps_mvout_state s)
{
    return ps__mvout_names[s];
}

/* The one place a move's state changes. */
static void ps__mvout_set_state(struct ps_move_out *mv, enum ps_mvout_state to)
{
    ps__move_check_state(mv->move_id, ps__mvout_allowed, ps__mvout_names,
                         mv->state, to);
    mv->state = to;
}

/* A new move in its first state: SYNC (MOVE_OUT) or DONE (restored from
 * its freeze marker after a restart). One reference: the list's. */
static struct ps_move_out *ps__mvout_alloc(struct ps_server *ps,
                                           enum ps_mvout_state first)
{
    struct ps_move_out *mv = rt_xcalloc(1, sizeof(*mv));

    RT_PRE(first == PS_MVOUT_SYNC || first == PS_MVOUT_DONE);
    mv->ps = ps;
    mv->refs = 1;
    mv->state = first;
    rt_buf_init(&mv->marker);
    rt_buf_init(&mv->pend);
    rt_buf_init(&mv->log.lo);
    rt_buf_init(&mv->log.hi);
    return mv;
}

/* Lifetime */

static void ps__mvout_pump(struct ps_move_out *mv);
static void ps__mvout_tail(struct ps_move_out *mv);

struct ps_move_out *ps__mvout_by_move(struct ps_server *ps, uint64_t move_id)
{
    for (struct ps_move_out *mv = ps->moves_out; mv; mv = mv->next) {
        if (mv->move_id == move_id) {
            return mv;
        }
    }
    return NULL;
}

struct ps_move_out *ps__mvout_by_range(const struct ps_server *ps,
                                       uint64_t range_id)
{
    for (struct ps_move_out *mv = ps->moves_out; mv; mv = mv->next) {
        if (mv->range_id == range_id) {
            return mv;
        }
    }
    return NULL;
}

static void ps__mvout_unref(struct ps_move_out *mv)
{
    RT_PRE(mv->refs > 0);
    if (--mv->refs > 0) {
        return;
    }
    RT_PRE(mv->state == PS_MVOUT_ENDED && !mv->producing);
    ps_store_snap_close(mv->snap);
    rt_buf_free(&mv->log.lo);
    rt_buf_free(&mv->log.hi);
    rt_buf_free(&mv->log.recs);
    rt_buf_free(&mv->pend);
    rt_buf_free(&mv->marker);
    free(mv->low);
    free(mv->high);
    free(mv->target);
    free(mv);
}

static void ps__mvout_unlink(struct ps_move_out *mv)
{
    struct ps_server *ps = mv->ps;
    for (struct ps_move_out **pp = &ps->moves_out; *pp; pp = &(*pp)->next) {
        if (*pp == mv) {
            *pp = mv->next;
            break;
        }
    }
    mv->next = NULL;
}

static void ps__mvout_release(struct ps_move_out *mv)
{
    struct ps_server *ps = mv->ps;

    if (mv->log_on) {
        if (ps->writer) {
            ps_writer_log_remove(ps->writer, &mv->log);
        }
        mv->log_on = 0;
    }
    if (mv->snap && !mv->producing) {
        ps_store_snap_close(mv->snap);
        mv->snap = NULL;
    }
    if (mv->cli) {
        rt_rpc_client_close(mv->cli); /* pending calls: RT_ECANCELED */
        mv->cli = NULL;
    }
    rt_buf_free(&mv->pend);
    rt_buf_free(&mv->log.recs);
}

/* Unfreezes the range and deletes the freeze marker (when one may have
 * been committed). */
static void ps__mvout_unfreeze(struct ps_move_out *mv)
{
    struct ps_server *ps = mv->ps;
    struct ps_range *r = ps_ranges_find(&ps->ranges, mv->range_id);

    if (r) {
        r->frozen = 0;
    }
    if (mv->marker_put && !ps->stopping) {
        struct ps_mjob *m = ps__mjob_new(ps);
        ps__mjob_op(m, PS_META_MVOUT, mv->range_id, NULL, 0);
        ps__mjob_submit(m);
    }
    mv->marker_put = 0;
}

/* Ends a move that did not commit: the range is unfrozen, MOVE_OUT (if
 * not answered yet) gets @code and @why, the move is counted as failed
 * and forgotten. */
static void ps__mvout_end_failed(struct ps_move_out *mv,
                                 int code,
                                 const char *why)
{
    struct ps_server *ps = mv->ps;

    ps__mvout_set_state(mv, PS_MVOUT_ENDED);
    ps__mvout_unfreeze(mv);
    ps__mvout_release(mv);
    if (mv->conn) {
        rt_rpc_reply_err(mv->conn, mv->req_id, RT__METHOD__MOVE_OUT, code, why);
        rt_rpc_conn_unref(mv->conn);
        mv->conn = NULL;
    }
    ps->mvc.out_failed++;
    ps__mvout_unlink(mv);
    ps__mvout_unref(mv);
}

/* Ends a move that has not been answered yet (or a restored one): @code
 * goes to MOVE_OUT; the range is unfrozen. */
static void ps__mvout_fail(struct ps_move_out *mv, int code, const char *why)
{
    if (mv->state == PS_MVOUT_ENDED) {
        return;
    }
    rt_log(RT_LOG_WARN,
           "move %llu of range %llu to %s failed in state %s: "
           "%s (%s)",
           (unsigned long long)mv->move_id, (unsigned long long)mv->range_id,
           mv->target ? mv->target : "-", ps__mvout_names[mv->state], why,
           rt_strerror(code));
    ps__mvout_end_failed(mv, code, why);
}

/* Ends a DONE move that did not commit (MOVE_ABORT, or a registration
 * that still lists the range): the range is unfrozen. MOVE_OUT was
 * answered already. */
static void ps__mvout_uncommit(struct ps_move_out *mv)
{
    RT_PRE(mv->conn == NULL);
    ps__mvout_end_failed(mv, 0, NULL);
}

/* Sending: MIGRATE_DATA and MIGRATE_END calls share one window */

/* Packs the change records @p[0..n) into one MigrateData body. */
static void ps__pack_data(uint64_t move_id,
                          const uint8_t *p,
                          size_t n,
                          struct rt_buf *body)
{
    Rt__MigrateData md = RT__MIGRATE_DATA__INIT;
    struct ps_change c;
    size_t off = 0, cnt = 0, len;
    Rt__KeyValue *kv;
    Rt__KeyValue **ptrs;

    while (ps_change_next(p, n, &off, &c) == 1) {
        cnt++;
    }
    kv = rt_xcalloc(cnt, sizeof(*kv));
    ptrs = rt_xcalloc(cnt, sizeof(*ptrs));
    off = 0;
    for (size_t i = 0; i < cnt && ps_change_next(p, n, &off, &c) == 1; i++) {
        rt__key_value__init(&kv[i]);
        kv[i].key.data = (uint8_t *)c.key;
        kv[i].key.len = c.kn;
        kv[i].value.data = (uint8_t *)c.val;
        kv[i].value.len = c.vn;
        kv[i].deleted = c.deleted;
        ptrs[i] = &kv[i];
    }
    md.move_id = move_id;
    md.n_kvs = cnt;
    md.kvs = ptrs;
    len = rt__migrate_data__get_packed_size(&md);
    rt__migrate_data__pack(&md, rt_buf_reserve(body, len));
    body->len += len;
    free(kv);
    free(ptrs);
}

/* A window call came back: frees its slot. Returns 1 when the move is
 * still @live and the call succeeded; a failure of a live move fails it
 * with @why. The caller drops the call's reference afterwards. */
static int ps__mvout_call_back(struct ps_move_out *mv,
                               int live,
                               int status,
                               const char *why)
{
    mv->inflight--;
    if (!live) {
        return 0;
    }
    if (status != 0) {
        ps__mvout_fail(mv, status, why);
        return 0;
    }
    return 1;
}

static void ps__mvout_data_cb(int status,
                              const uint8_t *body,
                              size_t len,
                              void *arg)
{
    struct ps_move_out *mv = arg;
    (void)body;
    (void)len;

    if (ps__mvout_call_back(mv, mv->state != PS_MVOUT_ENDED, status,
                            "MIGRATE_DATA to the target failed")) {
        ps__mvout_pump(mv);
    }
    ps__mvout_unref(mv);
}

/* Chunk size of MIGRATE_DATA bodies (--move-chunk-kb). */
static size_t ps__mvout_chunk(const struct ps_move_out *mv)
{
    return mv->ps->cfg.move_chunk ? mv->ps->cfg.move_chunk : PS_MOVE_CHUNK;
}

/* 1 while fewer than PS_MOVE_WINDOW calls are out. */
static int ps__mvout_window_open(const struct ps_move_out *mv)
{
    return mv->inflight < PS_MOVE_WINDOW;
}

/* Calls @method on the target with @body (copied), counted in the window
 * and holding a reference until @cb. If the call cannot be sent the move
 * fails with @why. */
static void ps__mvout_call(struct ps_move_out *mv,
                           uint32_t method,
                           const uint8_t *body,
                           size_t len,
                           rt_rpc_reply_cb cb,
                           const char *why)
{
    int rc;

    mv->inflight++;
    mv->refs++;
    rc = rt_rpc_call(rt_rpc_client_conn(mv->cli), method, body, len,
                     PS_MOVE_CALL_MS, cb, mv);
    if (rc != 0) {
        mv->inflight--;
        mv->refs--;
        ps__mvout_fail(mv, rc, why);
    }
}

/* One MIGRATE_DATA body, from the snapshot or the log. */
static void ps__mvout_send(struct ps_move_out *mv, const struct rt_buf *body)
{
    ps__mvout_call(mv, RT__METHOD__MIGRATE_DATA, body->data, body->len,
                   ps__mvout_data_cb, "MIGRATE_DATA too large");
}

/* Snapshot chunks (threadpool) */

struct ps_snapwork
{
    uv_work_t work;
    struct ps_move_out *mv;
    size_t chunk;
    struct rt_buf recs;
    struct rt_buf body;
    uint64_t n, bytes;
    int rc; /* 1 more, 0 end, < 0 error */
};

static void ps__snap_work(uv_work_t *work)
{
    struct ps_snapwork *sw = container_of(work, struct ps_snapwork, work);
    struct ps_move_out *mv = sw->mv;

    sw->rc =
        ps_store_snap_next(mv->snap, &sw->recs, sw->chunk, &sw->n, &sw->bytes);
    if (sw->rc >= 0 && sw->n > 0) {
        ps__pack_data(mv->move_id, sw->recs.data, sw->recs.len, &sw->body);
    }
    rt_buf_free(&sw->recs);
}

static void ps__snap_after(uv_work_t *work, int status)
{
    struct ps_snapwork *sw = container_of(work, struct ps_snapwork, work);
    struct ps_move_out *mv = sw->mv;

    mv->ps->work_inflight--;
    mv->producing = 0;
    if (mv->state == PS_MVOUT_SNAPSHOT) {
        if (status != 0 || sw->rc < 0) {
            ps__mvout_fail(mv, status ? RT_ECANCELED : sw->rc,
                           "reading the snapshot failed");
        } else {
            mv->kvs += sw->n;
            mv->bytes += sw->bytes;
            if (sw->rc == 0) {
                mv->snap_eof = 1;
            }
            if (sw->n > 0) {
                ps__mvout_send(mv, &sw->body);
            }
            if (mv->state == PS_MVOUT_SNAPSHOT) {
                ps__mvout_pump(mv);
            }
        }
    } else if (mv->state == PS_MVOUT_ENDED && mv->snap) {
        ps_store_snap_close(mv->snap);
        mv->snap = NULL;
    }
    rt_buf_free(&sw->body);
    free(sw);
    ps__mvout_unref(mv);
}

static void ps__mvout_produce(struct ps_move_out *mv)
{
    struct ps_snapwork *sw = rt_xcalloc(1, sizeof(*sw));
    int rc;

    sw->mv = mv;
    sw->chunk = ps__mvout_chunk(mv);
    rt_buf_init(&sw->recs);
    rt_buf_init(&sw->body);
    rc = uv_queue_work(mv->ps->loop, &sw->work, ps__snap_work, ps__snap_after);
    if (rc != 0) {
        free(sw);
        ps__mvout_fail(mv, RT_EIO, "uv_queue_work failed");
        return;
    }
    mv->ps->work_inflight++;
    mv->producing = 1;
    mv->refs++;
}

/* Sends log records from pend while the window has room. */
static void ps__mvout_send_pend(struct ps_move_out *mv)
{
    size_t chunk = ps__mvout_chunk(mv);

    while (mv->state != PS_MVOUT_ENDED && ps__mvout_window_open(mv) &&
           mv->pend_off < mv->pend.len) {
        struct rt_buf body = RT_BUF_INIT;
        size_t start = mv->pend_off, off = start;
        struct ps_change c;
        uint64_t n = 0, bytes = 0;

        while (off - start < chunk &&
               ps_change_next(mv->pend.data, mv->pend.len, &off, &c) == 1) {
            n++;
            bytes += c.kn + c.vn;
        }
        if (n == 0) {
            ps__mvout_fail(mv, RT_ECORRUPT, "corrupt migration log");
            return;
        }
        mv->pend_off = off;
        mv->kvs += n;
        mv->bytes += bytes;
        ps__pack_data(mv->move_id, mv->pend.data + start, off - start, &body);
        ps__mvout_send(mv, &body);
        rt_buf_free(&body);
    }
}

static void ps__mvout_done(struct ps_move_out *mv)
{
    struct ps_server *ps = mv->ps;
    Rt__MoveResp resp = RT__MOVE_RESP__INIT;

    mv->t_end = uv_hrtime();
    ps__mvout_set_state(mv, PS_MVOUT_DONE);
    resp.entities = mv->kvs;
    resp.bytes = mv->bytes;
    resp.snapshot_ms = ps__ms_since(mv->t_start, mv->t_snap);
    resp.frozen_ms = ps__ms_since(mv->t_freeze, mv->t_end);
    resp.tail_rounds = mv->rounds;
    ps->mvc.out_done++;
    ps->mvc.last_frozen_ms = resp.frozen_ms;
    ps->mvc.last_snapshot_ms = resp.snapshot_ms;
    ps->mvc.last_entities = resp.entities;
    rt_log(RT_LOG_INFO,
           "move %llu: range %llu copied to %s: %llu records, "
           "%llu bytes, snapshot %llu ms, %u log rounds, frozen %llu ms; "
           "frozen until MOVE_DONE",
           (unsigned long long)mv->move_id, (unsigned long long)mv->range_id,
           mv->target, (unsigned long long)resp.entities,
           (unsigned long long)resp.bytes, (unsigned long long)resp.snapshot_ms,
           mv->rounds, (unsigned long long)resp.frozen_ms);
    if (mv->conn) {
        rt_rpc_reply_pb(mv->conn, mv->req_id, RT__METHOD__MOVE_OUT, 0,
                        &resp.base);
        rt_rpc_conn_unref(mv->conn);
        mv->conn = NULL;
    }
    ps__mvout_release(mv);
}

static void ps__mvout_end_cb(int status,
                             const uint8_t *body,
                             size_t len,
                             void *arg)
{
    struct ps_move_out *mv = arg;
    (void)body;
    (void)len;

    if (ps__mvout_call_back(mv, mv->state == PS_MVOUT_FINAL, status,
                            "MIGRATE_END refused by the target")) {
        mv->end_ok = 1;
        ps__mvout_pump(mv);
    }
    ps__mvout_unref(mv);
}

static void ps__mvout_pump(struct ps_move_out *mv)
{
    switch (mv->state) {
        case PS_MVOUT_SNAPSHOT:
            if (!mv->producing && !mv->snap_eof && ps__mvout_window_open(mv)) {
                ps__mvout_produce(mv);
            } else if (mv->snap_eof && !mv->producing && mv->inflight == 0) {
                mv->t_snap = uv_hrtime();
                ps_store_snap_close(mv->snap);
                mv->snap = NULL;
                ps__mvout_set_state(mv, PS_MVOUT_TAIL);
                rt_log(RT_LOG_DEBUG, "move %llu: snapshot sent (%llu records)",
                       (unsigned long long)mv->move_id,
                       (unsigned long long)mv->kvs);
                ps__mvout_tail(mv);
            }
            break;
        case PS_MVOUT_TAIL:
            ps__mvout_send_pend(mv);
            if (mv->state == PS_MVOUT_TAIL && mv->pend_off == mv->pend.len &&
                mv->inflight == 0) {
                ps__mvout_tail(mv);
            }
            break;
        case PS_MVOUT_FINAL:
            ps__mvout_send_pend(mv);
            if (mv->state != PS_MVOUT_FINAL) {
                break;
            }
            if (mv->pend_off == mv->pend.len && !mv->end_sent) {
                Rt__MigrateEnd me = RT__MIGRATE_END__INIT;
                uint8_t buf[32]; /* two varints */
                size_t n;
                me.move_id = mv->move_id;
                me.entities = mv->kvs;
                RT_PRE(rt__migrate_end__get_packed_size(&me) <= sizeof(buf));
                n = rt__migrate_end__pack(&me, buf);
                mv->end_sent = 1;
                ps__mvout_call(mv, RT__METHOD__MIGRATE_END, buf, n,
                               ps__mvout_end_cb, "MIGRATE_END failed");
                break;
            }
            if (mv->end_ok && mv->inflight == 0) {
                ps__mvout_done(mv);
            }
            break;
        default:
            break;
    }
}

/* Moves the log's new records (txn id after the snapshot) to pend. */
static int ps__mvout_take(struct ps_move_out *mv)
{
    struct rt_buf tmp = RT_BUF_INIT;
    struct ps_change c;
    size_t off = 0;
    int overflow = 0, rc;

    ps_writer_log_take(mv->ps->writer, &mv->log, &tmp, &overflow);
    while ((rc = ps_change_next(tmp.data, tmp.len, &off, &c)) == 1) {
        if (c.txn_id > mv->snap_txn) {
            ps_change_append(&mv->pend, c.txn_id, c.key, c.kn, c.val, c.vn,
                             c.deleted);
            mv->pend_n++;
        }
    }
    rt_buf_free(&tmp);
    if (overflow) {
        return RT_EBUSY;
    }
    return rc < 0 ? rc : 0;
}

static void ps__mvout_frozen_cb(struct ps_mjob *m, int status)
{
    struct ps_move_out *mv = m->arg;

    if (mv->state == PS_MVOUT_FREEZE) {
        if (status != 0) {
            ps__mvout_fail(mv, status, "persisting the freeze failed");
        } else {
            /* Every write on the range admitted before the freeze has
             * committed and is in the log: take the rest, stop logging. */
            int rc = ps__mvout_take(mv);
            ps_writer_log_remove(mv->ps->writer, &mv->log);
            mv->log_on = 0;
            if (rc != 0) {
                ps__mvout_fail(mv, rc, "migration log overflow");
            } else {
                ps__mvout_set_state(mv, PS_MVOUT_FINAL);
                ps__mvout_pump(mv);
            }
        }
    }
    ps__mvout_unref(mv);
}

static void ps__mvout_freeze(struct ps_move_out *mv)
{
    struct ps_server *ps = mv->ps;
    struct ps_range *r = ps_ranges_find(&ps->ranges, mv->range_id);
    struct ps_mjob *m;

    if (!r || r->epoch != mv->epoch) {
        ps__mvout_fail(mv, RT_ESTALE, "range reassigned during the move");
        return;
    }
    r->frozen = 1;
    mv->t_freeze = uv_hrtime();
    ps__mvout_set_state(mv, PS_MVOUT_FREEZE);
    m = ps__mjob_new(ps);
    ps__mjob_op(m, PS_META_MVOUT, mv->range_id, mv->marker.data,
                mv->marker.len);
    m->done = ps__mvout_frozen_cb;
    m->arg = mv;
    mv->refs++;
    mv->marker_put = 1;
    ps__mjob_submit(m);
}

static void ps__mvout_tail(struct ps_move_out *mv)
{
    int rc;

    rt_buf_reset(&mv->pend);
    mv->pend_off = 0;
    mv->pend_n = 0;
    rc = ps__mvout_take(mv);
    if (rc != 0) {
        ps__mvout_fail(mv, rc, "migration log overflow");
        return;
    }
    if (mv->pend_n <= PS_MOVE_TAIL_SMALL || mv->rounds >= PS_MOVE_TAIL_ROUNDS) {
        ps__mvout_freeze(mv); /* pend goes out with the final entries */
        return;
    }
    mv->rounds++;
    rt_log(RT_LOG_DEBUG, "move %llu: log round %u, %llu records",
           (unsigned long long)mv->move_id, mv->rounds,
           (unsigned long long)mv->pend_n);
    ps__mvout_pump(mv);
}

static void ps__mvout_begin_cb(int status,
                               const uint8_t *body,
                               size_t len,
                               void *arg)
{
    struct ps_move_out *mv = arg;
    struct ps_span sp = {mv->table_id, mv->low, mv->high};
    (void)body;
    (void)len;

    if (mv->state == PS_MVOUT_BEGIN) {
        int rc = status;
        if (rc != 0) {
            ps__mvout_fail(mv, rc, "MIGRATE_BEGIN refused by the target");
        } else if ((rc = ps_store_snap_open(mv->ps->store, &sp, &mv->snap,
                                            &mv->snap_txn)) != 0) {
            ps__mvout_fail(mv, rc, "opening the snapshot failed");
        } else {
            ps__mvout_set_state(mv, PS_MVOUT_SNAPSHOT);
            ps__mvout_pump(mv);
        }
    }
    ps__mvout_unref(mv);
}

static void ps__mvout_sync_done(void *arg, int status)
{
    struct ps_move_out *mv = arg;
    Rt__MigrateBegin mb = RT__MIGRATE_BEGIN__INIT;
    Rt__Range r = RT__RANGE__INIT;
    int rc;

    if (mv->state == PS_MVOUT_SYNC) {
        if (status != 0) {
            ps__mvout_fail(mv, status, "writer barrier failed");
        } else {
            r.id = mv->range_id;
            r.table_id = mv->table_id;
            r.low = mv->low;
            ps_range_pb_set_high(&r, mv->high);
            r.epoch = mv->new_epoch;
            mb.move_id = mv->move_id;
            mb.range = &r;
            mb.new_epoch = mv->new_epoch;
            ps__mvout_set_state(mv, PS_MVOUT_BEGIN);
            mv->refs++;
            rc = rt_rpc_call_pb(rt_rpc_client_conn(mv->cli),
                                RT__METHOD__MIGRATE_BEGIN, &mb.base,
                                PS_MOVE_BEGIN_MS, ps__mvout_begin_cb, mv);
            if (rc != 0) {
                mv->refs--;
                ps__mvout_fail(mv, rc, "MIGRATE_BEGIN failed");
            }
        }
    }
    ps__mvout_unref(mv);
}

/* Requests, assignments, restart */

void ps__mvout_request(struct ps_server *ps,
                       struct rt_rpc_conn *conn,
                       uint64_t id,
                       const uint8_t *body,
                       size_t len)
{
    const uint32_t method = RT__METHOD__MOVE_OUT;
    Rt__MoveReq *req = rt__move_req__unpack(NULL, len, body);
    struct ps_move_out *mv;
    struct ps_range *r;
    struct ps_span sp;
    int rc;

    if (!req || !req->range || !req->target_addr || !*req->target_addr ||
        req->move_id == 0) {
        rt_rpc_reply_err(conn, id, method, RT_EINVAL, "bad MoveReq");
        goto out;
    }
    if (ps_fence_admit(ps, conn, id, method, req->master_term) != 0) {
        goto out;
    }
    mv = ps__mvout_by_range(ps, req->range->id);
    if (mv) {
        if (mv->move_id == req->move_id && mv->state == PS_MVOUT_DONE) {
            /* The answer was lost: the same figures again. */
            Rt__MoveResp resp = RT__MOVE_RESP__INIT;
            resp.entities = mv->kvs;
            resp.bytes = mv->bytes;
            resp.snapshot_ms = ps__ms_since(mv->t_start, mv->t_snap);
            resp.frozen_ms = ps__ms_since(mv->t_freeze, mv->t_end);
            resp.tail_rounds = mv->rounds;
            rt_rpc_reply_pb(conn, id, method, 0, &resp.base);
        } else {
            rt_rpc_reply_err(conn, id, method, RT_EBUSY,
                             "the range is already moving");
        }
        goto out;
    }
    r = ps_ranges_find(&ps->ranges, req->range->id);
    if (!r || r->epoch != req->range->epoch ||
        r->table_id != req->range->table_id ||
        strcmp(r->low, req->range->low ? req->range->low : "") != 0 ||
        (r->high == NULL) != (req->range->high_inf != 0) ||
        (r->high &&
         strcmp(r->high, req->range->high ? req->range->high : "") != 0)) {
        rt_rpc_reply_err(conn, id, method, RT_ESTALE,
                         "range not served here at that epoch");
        goto out;
    }
    if (r->frozen) {
        rt_rpc_reply_err(conn, id, method, RT_EBUSY, "the range is frozen");
        goto out;
    }
    if (r->n_replicas > 1) {
        /* A copy made behind its replicas' backs would leave them and the
         * target apart (DESIGN-replication.md §9.3: a replicated range
         * moves by learner and transfer, a later step). */
        rt_rpc_reply_err(conn, id, method, RT_EINVAL,
                         "a replicated range cannot move by MOVE_OUT");
        goto out;
    }
    if (req->new_epoch <= r->epoch || strcmp(req->target_addr, ps->addr) == 0) {
        rt_rpc_reply_err(conn, id, method, RT_EINVAL,
                         "bad new epoch or target");
        goto out;
    }

    mv = ps__mvout_alloc(ps, PS_MVOUT_SYNC);
    mv->move_id = req->move_id;
    mv->range_id = r->id;
    mv->table_id = r->table_id;
    mv->epoch = r->epoch;
    mv->new_epoch = req->new_epoch;
    mv->low = rt_xstrdup(r->low);
    mv->high = r->high ? rt_xstrdup(r->high) : NULL;
    mv->target = rt_xstrdup(req->target_addr);
    {
        size_t n = rt__move_req__get_packed_size(req);
        rt__move_req__pack(req, rt_buf_reserve(&mv->marker, n));
        mv->marker.len = n;
    }
    rc = rt_rpc_client_start(ps->loop, mv->target, NULL, NULL, NULL, &mv->cli);
    if (rc == 0) {
        rt_rpc_client_expect_roles(mv->cli, RT_RPC_ROLE_PS); /* the target */
    }
    if (rc != 0) {
        mv->cli = NULL;
        ps__mvout_set_state(mv, PS_MVOUT_ENDED);
        rt_rpc_reply_err(conn, id, method, RT_EINVAL, "bad target address");
        ps__mvout_unref(mv);
        goto out;
    }
    mv->conn = conn;
    mv->req_id = id;
    rt_rpc_conn_ref(conn);
    mv->t_start = uv_hrtime();
    mv->next = ps->moves_out;
    ps->moves_out = mv;

    sp.table_id = mv->table_id;
    sp.low = mv->low;
    sp.high = mv->high;
    ps_span_keys(&sp, &mv->log.lo, &mv->log.hi);
    ps_writer_log_add(ps->writer, &mv->log);
    mv->log_on = 1;
    rt_log(RT_LOG_INFO,
           "move %llu: range %llu (table %llu [%s, %s) epoch "
           "%llu) to %s at epoch %llu",
           (unsigned long long)mv->move_id, (unsigned long long)mv->range_id,
           (unsigned long long)mv->table_id, mv->low,
           mv->high ? mv->high : "+inf", (unsigned long long)mv->epoch,
           mv->target, (unsigned long long)mv->new_epoch);
    mv->refs++;
    ps__barrier(ps, ps__mvout_sync_done, mv);
out:
    if (req) {
        rt__move_req__free_unpacked(req, NULL);
    }
}

/* Drops a DONE move's range: removed from the set, freeze marker deleted
 * and span drop marker put in one META job, then the span drop. Answers
 * @conn/@id/@method (if @conn) once the META job is durable. */
void ps__mvout_drop(struct ps_move_out *mv,
                    struct rt_rpc_conn *conn,
                    uint64_t id,
                    uint32_t method)
{
    struct ps_server *ps = mv->ps;
    struct ps_span sp = {mv->table_id, mv->low, mv->high};
    struct ps_mjob *m;
    int del;

    ps_ranges_remove(&ps->ranges, mv->range_id);
    del = !ps_ranges_overlap(&ps->ranges, sp.table_id, sp.low, sp.high, 0);
    if (ps->stopping) {
        goto out; /* the marker keeps it frozen; settled on restart */
    }
    m = ps__mjob_new(ps);
    ps__mjob_op(m, PS_META_MVOUT, mv->range_id, NULL, 0);
    if (del) {
        uint64_t seq = ps__mjob_span(m, &sp);
        m->conn = conn;
        m->id = id;
        m->method = method;
        ps__mjob_submit(m);
        ps_writer_submit(ps->writer, &ps__span_drop(ps, seq, &sp)->job);
    } else {
        rt_log(RT_LOG_WARN,
               "move %llu: range %llu's keys are still served "
               "by another range here; not deleting them",
               (unsigned long long)mv->move_id,
               (unsigned long long)mv->range_id);
        m->conn = conn;
        m->id = id;
        m->method = method;
        ps__mjob_submit(m);
    }
    conn = NULL;
out:
    if (conn) {
        rt_rpc_reply_err(conn, id, method, RT_EBUSY, "shutting down");
    }
    rt_log(RT_LOG_INFO,
           "move %llu: range %llu dropped here (owned by the "
           "target now)",
           (unsigned long long)mv->move_id, (unsigned long long)mv->range_id);
    ps->mvc.out_dropped++;
    mv->marker_put = 0;
    ps__mvout_set_state(mv, PS_MVOUT_ENDED);
    ps__mvout_release(mv);
    ps__mvout_unlink(mv);
    ps__mvout_unref(mv);
}

void ps__mvout_abort(struct ps_move_out *mv)
{
    rt_log(RT_LOG_INFO, "move %llu: aborted by the master (state %s)",
           (unsigned long long)mv->move_id, ps__mvout_names[mv->state]);
    if (mv->state == PS_MVOUT_DONE) {
        ps__mvout_uncommit(mv);
    } else {
        ps__mvout_fail(mv, RT_ECANCELED, "aborted by the master");
    }
}

void ps__mvout_assigned(struct ps_server *ps, int registration)
{
    struct ps_move_out *mv, *next;

    for (mv = ps->moves_out; mv; mv = next) {
        struct ps_range *r = ps_ranges_find(&ps->ranges, mv->range_id);
        next = mv->next;
        if (mv->state == PS_MVOUT_ENDED) {
            continue;
        }
        if (!r) {
            if (mv->state == PS_MVOUT_DONE) {
                /* The master committed the move: same as MOVE_DONE. */
                ps__mvout_drop(mv, NULL, 0, 0);
            } else {
                ps__mvout_fail(mv, RT_ESTALE, "range no longer assigned");
            }
            continue;
        }
        if (registration) {
            /* A new session: whatever the master knew of this move, it
             * lists the range here, so the move did not commit and never
             * will (DESIGN-moves step 6). */
            if (mv->state == PS_MVOUT_DONE) {
                rt_log(RT_LOG_INFO,
                       "move %llu: range %llu still assigned "
                       "here at registration: unfrozen",
                       (unsigned long long)mv->move_id,
                       (unsigned long long)mv->range_id);
                ps__mvout_uncommit(mv);
            } else {
                ps__mvout_fail(mv, RT_ECANCELED,
                               "re-registered with the master");
            }
            continue;
        }
        if (r->epoch != mv->epoch && mv->state != PS_MVOUT_DONE) {
            ps__mvout_fail(mv, RT_ESTALE, "range reassigned");
        }
    }
}

int ps__mvout_restore(uint64_t range_id,
                      const uint8_t *val,
                      size_t vn,
                      void *arg)
{
    struct ps__restore *rs = arg;
    struct ps_server *ps = rs->ps;
    Rt__MoveReq *req;
    struct ps_range *r;
    struct ps_move_out *mv;

    r = ps_ranges_find(&ps->ranges, range_id);
    req = rt__move_req__unpack(NULL, vn, val);
    if (!r || !req) {
        /* Stale marker (cannot happen: markers change with the ranges in
         * one transaction); deleted by the next persist of this range's
         * move, harmless meanwhile. */
        rt_log(RT_LOG_WARN, "ignoring freeze marker of range %llu",
               (unsigned long long)range_id);
        if (req) {
            rt__move_req__free_unpacked(req, NULL);
        }
        return 0;
    }
    mv = ps__mvout_alloc(ps, PS_MVOUT_DONE);
    mv->move_id = req->move_id;
    mv->range_id = range_id;
    mv->table_id = r->table_id;
    mv->epoch = r->epoch;
    mv->new_epoch = req->new_epoch;
    mv->low = rt_xstrdup(r->low);
    mv->high = r->high ? rt_xstrdup(r->high) : NULL;
    mv->target = rt_xstrdup(req->target_addr);
    rt_buf_append(&mv->marker, val, vn);
    mv->marker_put = 1;
    mv->next = ps->moves_out;
    ps->moves_out = mv;
    r->frozen = 1;
    rt_log(RT_LOG_INFO,
           "range %llu is frozen for move %llu to %s; waiting "
           "for the master to settle it",
           (unsigned long long)range_id, (unsigned long long)mv->move_id,
           mv->target);
    rt__move_req__free_unpacked(req, NULL);
    return 0;
}

void ps__mvout_stop(struct ps_server *ps)
{
    struct ps_move_out *mv, *next;

    for (mv = ps->moves_out; mv; mv = next) {
        next = mv->next;
        if (mv->state == PS_MVOUT_DONE || mv->state == PS_MVOUT_ENDED) {
            continue;
        }
        /* No unfreeze: a committed freeze marker keeps the range frozen
         * across the restart, and the master settles it. */
        mv->marker_put = 0;
        ps__mvout_fail(mv, RT_EBUSY, "shutting down");
    }
}

void ps__mvout_close(struct ps_server *ps)
{
    while (ps->moves_out) {
        struct ps_move_out *mv = ps->moves_out;
        ps->moves_out = mv->next;
        ps__mvout_set_state(mv, PS_MVOUT_ENDED);
        ps__mvout_release(mv);
        if (mv->conn) {
            rt_rpc_conn_unref(mv->conn);
            mv->conn = NULL;
        }
        ps__mvout_unref(mv);
    }
}
