/* Range moves, both ends (docs/DESIGN-moves.md; DESIGN §5).
 *
 * Source, happy path of MOVE_OUT (one struct ps_move_out, states in order):
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
 * Target: MIGRATE_BEGIN records the move ("mvin" ‖ move id marker) and
 * clears the span (a span drop) before it answers; MIGRATE_DATA writes the
 * records as raw changes through the writer (group commits, synced);
 * MIGRATE_END checks the record count and answers after a BARRIER, i.e.
 * after everything received is durable. The range is not served until an
 * assignment lists it, which also forgets the record; MOVE_ABORT deletes
 * what was received (span drop) and forgets it.
 *
 * Thread: loop thread only, except the snapshot work functions. */
#include "ps_move.h"

#include <stdlib.h>
#include <string.h>

#include "rt.pb-c.h"
#include "rt_alloc.h"
#include "rt_entity.h"
#include "rt_err.h"
#include "rt_key.h"
#include "rt_log.h"

#define PS_MOVE_WINDOW 4 /* MIGRATE_DATA calls out at once */
#define PS_MOVE_CHUNK (256u * 1024u)
#define PS_MOVE_TAIL_SMALL 64   /* records: small enough to freeze */
#define PS_MOVE_TAIL_ROUNDS 3   /* log rounds before freezing anyway */
#define PS_MOVE_BEGIN_MS 120000 /* the target may clear stale keys */
#define PS_MOVE_CALL_MS 30000

#define PS_META_MVOUT "mvout" /* ‖ u64be range id -> packed MoveReq */
#define PS_META_MVIN "mvin"   /* ‖ u64be move id -> packed MigrateBegin */

enum ps_mvout_state {
    PS_MVOUT_SYNC,
    PS_MVOUT_BEGIN,
    PS_MVOUT_SNAPSHOT,
    PS_MVOUT_TAIL,
    PS_MVOUT_FREEZE,
    PS_MVOUT_FINAL,
    PS_MVOUT_DONE,
    PS_MVOUT_ENDED, /* unlinked; freed when the last callback is back */
    PS_MVOUT__NR
};

static const char *const ps__mvout_names[PS_MVOUT__NR] = {
    "sync", "begin", "snapshot", "tail", "freeze", "final", "done", "ended"};

struct ps_move_out
{
    struct ps_server *ps;
    struct ps_move_out *next;
    int refs; /* the list's + one per callback out */
    enum ps_mvout_state state;
    uint64_t move_id;
    uint64_t range_id;
    uint64_t table_id;
    uint64_t epoch;
    uint64_t new_epoch;
    char *low;
    char *high; /* NULL = unbounded */
    char *target;
    struct rt_buf marker; /* packed MoveReq: the freeze marker's value */
    int marker_put;       /* a META job putting the marker was submitted */
    /* MOVE_OUT to answer (ref'd), NULL once answered or restored. */
    struct rt_rpc_conn *conn;
    uint64_t req_id;
    struct rt_rpc_client *cli;
    struct ps_mlog log;
    int log_on;
    struct ps_snap *snap;
    uint64_t snap_txn;
    int producing; /* a snapshot work item is out */
    int snap_eof;
    struct rt_buf pend; /* log records to send */
    size_t pend_off;
    uint64_t pend_n;
    unsigned inflight; /* MIGRATE_DATA / MIGRATE_END calls out */
    int end_sent;
    int end_ok;
    unsigned rounds;
    uint64_t kvs, bytes; /* records sent (snapshot + log) */
    uint64_t t_start, t_snap, t_freeze, t_end; /* uv_hrtime, ns */
};

enum ps_mvin_state {
    PS_MVIN_CLEARING, /* MIGRATE_BEGIN: span being cleared */
    PS_MVIN_RECEIVING,
    PS_MVIN_COMPLETE, /* MIGRATE_END confirmed */
    PS_MVIN_RESTORED, /* from meta after a restart */
    PS_MVIN_FAILED,   /* a write failed or the count was wrong */
    PS_MVIN__NR
};

static const char *const ps__mvin_names[PS_MVIN__NR] = {
    "clearing", "receiving", "complete", "restored", "failed"};

struct ps_move_in
{
    struct ps_server *ps;
    struct ps_move_in *next;
    enum ps_mvin_state state;
    uint64_t move_id;
    uint64_t range_id;
    uint64_t table_id;
    char *low;
    char *high;
    struct rt_buf lo, hi; /* storage key bounds */
    uint64_t received;    /* records accepted */
    uint64_t bytes;
    int status;   /* first failure */
    uint64_t gen; /* bumped by each MIGRATE_BEGIN */
};

/* Helpers */

static uint64_t ps__ms_since(uint64_t t0_ns, uint64_t t1_ns)
{
    return t1_ns > t0_ns ? (t1_ns - t0_ns) / 1000000u : 0;
}

static void ps__reply_error(struct rt_rpc_conn *conn,
                            uint64_t id,
                            uint32_t method,
                            int code,
                            const char *message)
{
    Rt__Error e = RT__ERROR__INIT;
    e.message = (char *)(message ? message : rt_err_message(code));
    e.index = -1;
    rt_rpc_reply_pb(conn, id, method, code, &e.base);
}

static void ps__reply_empty(struct rt_rpc_conn *conn,
                            uint64_t id,
                            uint32_t method)
{
    Rt__Empty e = RT__EMPTY__INIT;
    rt_rpc_reply_pb(conn, id, method, 0, &e.base);
}

static void ps__meta_key(struct rt_buf *out, const char *prefix, uint64_t id)
{
    rt_buf_append(out, prefix, strlen(prefix));
    rt_put_u64be(rt_buf_reserve(out, 8), id);
    out->len += 8;
}

static int ps__key_in(const uint8_t *k,
                      size_t kn,
                      const struct rt_buf *lo,
                      const struct rt_buf *hi)
{
    int c1 = memcmp(k, lo->data, kn < lo->len ? kn : lo->len);
    int c2 = memcmp(k, hi->data, kn < hi->len ? kn : hi->len);
    if (c1 < 0 || (c1 == 0 && kn < lo->len)) {
        return 0;
    }
    return c2 < 0 || (c2 == 0 && kn < hi->len);
}

/* Meta jobs with extra changes, and span drops */

struct ps_mjob
{
    struct ps_job job;
    struct ps_server *ps;
    struct rt_buf blob; /* ranges */
    struct rt_buf keys, vals;
    struct ps_meta_op ops[8];
    size_t koff[8], voff[8]; /* into keys / vals, resolved at submit */
    size_t n_ops;
    void (*done)(struct ps_mjob *m, int status);
    void *arg;
    struct rt_rpc_conn *conn; /* answered Empty/error with method when set */
    uint64_t id;
    uint32_t method;
};

static struct ps_mjob *ps__mjob_new(struct ps_server *ps)
{
    struct ps_mjob *m = rt_xcalloc(1, sizeof(*m));
    m->ps = ps;
    rt_buf_init(&m->blob);
    rt_buf_init(&m->keys);
    rt_buf_init(&m->vals);
    return m;
}

/* Adds a put (@val non-NULL) or delete of meta key @key. Offsets are kept
 * and resolved at submit (the buffers may move while growing). */
static void ps__mjob_op(struct ps_mjob *m,
                        const struct rt_buf *key,
                        const void *val,
                        size_t vn)
{
    size_t i = m->n_ops++;
    struct ps_meta_op *op = &m->ops[i];

    RT_PRE(m->n_ops <= sizeof(m->ops) / sizeof(m->ops[0]));
    m->koff[i] = m->keys.len;
    op->kn = key->len;
    rt_buf_append(&m->keys, key->data, key->len);
    op->del = val == NULL;
    m->voff[i] = m->vals.len;
    op->vn = val ? vn : 0;
    if (val && vn) {
        rt_buf_append(&m->vals, val, vn);
    }
}

static void ps__mjob_cb(struct ps_job *job)
{
    struct ps_mjob *m = container_of(job, struct ps_mjob, job);

    if (job->status != 0) {
        rt_log(RT_LOG_ERROR, "move: persisting meta failed: %s",
               rt_strerror(job->status));
    }
    if (m->done) {
        m->done(m, job->status);
    }
    if (m->conn) {
        if (job->status == 0) {
            ps__reply_empty(m->conn, m->id, m->method);
        } else {
            ps__reply_error(m->conn, m->id, m->method, job->status,
                            "persisting failed");
        }
        rt_rpc_conn_unref(m->conn);
    }
    rt_buf_free(&m->blob);
    rt_buf_free(&m->keys);
    rt_buf_free(&m->vals);
    free(m);
}

/* Persists the current range set plus @m's ops in one transaction. */
static void ps__mjob_submit(struct ps_mjob *m)
{
    struct ps_server *ps = m->ps;

    for (size_t i = 0; i < m->n_ops; i++) {
        m->ops[i].key = m->keys.data + m->koff[i];
        m->ops[i].val = m->ops[i].vn ? m->vals.data + m->voff[i] : NULL;
    }
    ps_ranges_pack(&ps->ranges, &m->blob);
    m->job.kind = PS_JOB_META;
    m->job.cb = ps__mjob_cb;
    m->job.u.meta.server_id = ps->server_id;
    m->job.u.meta.ranges = m->blob.data;
    m->job.u.meta.ranges_len = m->blob.len;
    m->job.u.meta.ops = m->ops;
    m->job.u.meta.n_ops = m->n_ops;
    if (m->conn) {
        rt_rpc_conn_ref(m->conn);
    }
    ps_writer_submit(ps->writer, &m->job);
}

struct ps_sjob
{
    struct ps_job job;
    struct ps_server *ps;
    char *low;
    char *high;
    void (*done)(struct ps_sjob *sj, int status);
    void *arg;
    uint64_t gen;
};

static void ps__sjob_cb(struct ps_job *job)
{
    struct ps_sjob *sj = container_of(job, struct ps_sjob, job);

    sj->ps->span_drops--;
    if (sj->done) {
        sj->done(sj, job->status);
    }
    free(sj->low);
    free(sj->high);
    free(sj);
}

/* Queues the drop of span @sp with marker id @seq (the marker should have
 * been committed already, e.g. by a META job, for the drop to survive a
 * crash before its first chunk). */
static struct ps_sjob *ps__span_drop(struct ps_server *ps,
                                     uint64_t seq,
                                     const struct ps_span *sp)
{
    struct ps_sjob *sj = rt_xcalloc(1, sizeof(*sj));

    sj->ps = ps;
    sj->low = rt_xstrdup(sp->low);
    sj->high = sp->high ? rt_xstrdup(sp->high) : NULL;
    sj->job.kind = PS_JOB_DROP_SPAN;
    sj->job.cb = ps__sjob_cb;
    sj->job.u.span.seq = seq;
    sj->job.u.span.span.table_id = sp->table_id;
    sj->job.u.span.span.low = sj->low;
    sj->job.u.span.span.high = sj->high;
    ps->span_drops++;
    return sj;
}

/* Adds the span marker of a new span drop to @m; returns its seq. */
static uint64_t ps__mjob_span(struct ps_mjob *m, const struct ps_span *sp)
{
    struct rt_buf k = RT_BUF_INIT, v = RT_BUF_INIT;
    uint64_t seq = m->ps->span_seq++;

    ps_store_span_marker(seq, sp, &k, &v);
    ps__mjob_op(m, &k, v.data, v.len);
    rt_buf_free(&k);
    rt_buf_free(&v);
    return seq;
}

/* ------------------------------------------------------------------ */
/* Source                                                              */
/* ------------------------------------------------------------------ */

static void ps__mvout_pump(struct ps_move_out *mv);
static void ps__mvout_tail(struct ps_move_out *mv);

static struct ps_move_out *ps__mvout_by_move(struct ps_server *ps,
                                             uint64_t move_id)
{
    for (struct ps_move_out *mv = ps->moves_out; mv; mv = mv->next) {
        if (mv->move_id == move_id) {
            return mv;
        }
    }
    return NULL;
}

static struct ps_move_out *ps__mvout_by_range(const struct ps_server *ps,
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
        struct rt_buf k = RT_BUF_INIT;
        ps__meta_key(&k, PS_META_MVOUT, mv->range_id);
        ps__mjob_op(m, &k, NULL, 0);
        rt_buf_free(&k);
        ps__mjob_submit(m);
    }
    mv->marker_put = 0;
}

/* Ends a move that has not been answered yet (or a restored one): @code
 * goes to MOVE_OUT; the range is unfrozen. */
static void ps__mvout_fail(struct ps_move_out *mv, int code, const char *why)
{
    struct ps_server *ps = mv->ps;

    if (mv->state == PS_MVOUT_ENDED) {
        return;
    }
    rt_log(RT_LOG_WARN,
           "move %llu of range %llu to %s failed in state %s: "
           "%s (%s)",
           (unsigned long long)mv->move_id, (unsigned long long)mv->range_id,
           mv->target ? mv->target : "-", ps__mvout_names[mv->state], why,
           rt_strerror(code));
    mv->state = PS_MVOUT_ENDED;
    ps__mvout_unfreeze(mv);
    ps__mvout_release(mv);
    if (mv->conn) {
        ps__reply_error(mv->conn, mv->req_id, RT__METHOD__MOVE_OUT, code, why);
        rt_rpc_conn_unref(mv->conn);
        mv->conn = NULL;
    }
    ps->mvc.out_failed++;
    ps__mvout_unlink(mv);
    ps__mvout_unref(mv);
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

static void ps__mvout_data_cb(int status,
                              const uint8_t *body,
                              size_t len,
                              void *arg)
{
    struct ps_move_out *mv = arg;
    (void)body;
    (void)len;

    mv->inflight--;
    if (mv->state != PS_MVOUT_ENDED) {
        if (status != 0) {
            ps__mvout_fail(mv, status, "MIGRATE_DATA to the target failed");
        } else {
            ps__mvout_pump(mv);
        }
    }
    ps__mvout_unref(mv);
}

static void ps__mvout_send(struct ps_move_out *mv, const struct rt_buf *body)
{
    int rc;

    mv->inflight++;
    mv->refs++;
    rc = rt_rpc_call(rt_rpc_client_conn(mv->cli), RT__METHOD__MIGRATE_DATA,
                     body->data, body->len, PS_MOVE_CALL_MS, ps__mvout_data_cb,
                     mv);
    if (rc != 0) {
        mv->inflight--;
        mv->refs--;
        ps__mvout_fail(mv, rc, "MIGRATE_DATA too large");
    }
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
    sw->chunk = mv->ps->cfg.move_chunk ? mv->ps->cfg.move_chunk : PS_MOVE_CHUNK;
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
    size_t chunk =
        mv->ps->cfg.move_chunk ? mv->ps->cfg.move_chunk : PS_MOVE_CHUNK;

    while (mv->state != PS_MVOUT_ENDED && mv->inflight < PS_MOVE_WINDOW &&
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
    mv->state = PS_MVOUT_DONE;
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

    mv->inflight--;
    if (mv->state == PS_MVOUT_FINAL) {
        if (status != 0) {
            ps__mvout_fail(mv, status, "MIGRATE_END refused by the target");
        } else {
            mv->end_ok = 1;
            ps__mvout_pump(mv);
        }
    }
    ps__mvout_unref(mv);
}

static void ps__mvout_pump(struct ps_move_out *mv)
{
    switch (mv->state) {
        case PS_MVOUT_SNAPSHOT:
            if (!mv->producing && !mv->snap_eof &&
                mv->inflight < PS_MOVE_WINDOW) {
                ps__mvout_produce(mv);
            } else if (mv->snap_eof && !mv->producing && mv->inflight == 0) {
                mv->t_snap = uv_hrtime();
                ps_store_snap_close(mv->snap);
                mv->snap = NULL;
                mv->state = PS_MVOUT_TAIL;
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
                int rc;
                me.move_id = mv->move_id;
                me.entities = mv->kvs;
                mv->end_sent = 1;
                mv->inflight++;
                mv->refs++;
                rc = rt_rpc_call_pb(rt_rpc_client_conn(mv->cli),
                                    RT__METHOD__MIGRATE_END, &me.base,
                                    PS_MOVE_CALL_MS, ps__mvout_end_cb, mv);
                if (rc != 0) {
                    mv->inflight--;
                    mv->refs--;
                    ps__mvout_fail(mv, rc, "MIGRATE_END failed");
                }
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
                mv->state = PS_MVOUT_FINAL;
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
    struct rt_buf k = RT_BUF_INIT;

    if (!r || r->epoch != mv->epoch) {
        ps__mvout_fail(mv, RT_ESTALE, "range reassigned during the move");
        return;
    }
    r->frozen = 1;
    mv->t_freeze = uv_hrtime();
    mv->state = PS_MVOUT_FREEZE;
    m = ps__mjob_new(ps);
    ps__meta_key(&k, PS_META_MVOUT, mv->range_id);
    ps__mjob_op(m, &k, mv->marker.data, mv->marker.len);
    rt_buf_free(&k);
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
            mv->state = PS_MVOUT_SNAPSHOT;
            ps__mvout_pump(mv);
        }
    }
    ps__mvout_unref(mv);
}

struct ps_barrier
{
    struct ps_job job;
    void (*done)(void *arg, int status);
    void *arg;
};

static void ps__barrier_cb(struct ps_job *job)
{
    struct ps_barrier *b = container_of(job, struct ps_barrier, job);
    b->done(b->arg, job->status);
    free(b);
}

static void ps__barrier(struct ps_server *ps,
                        void (*done)(void *, int),
                        void *arg)
{
    struct ps_barrier *b = rt_xcalloc(1, sizeof(*b));
    b->done = done;
    b->arg = arg;
    b->job.kind = PS_JOB_BARRIER;
    b->job.cb = ps__barrier_cb;
    ps_writer_submit(ps->writer, &b->job);
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
            r.high = mv->high ? mv->high : (char *)"";
            r.high_inf = mv->high == NULL;
            r.epoch = mv->new_epoch;
            mb.move_id = mv->move_id;
            mb.range = &r;
            mb.new_epoch = mv->new_epoch;
            mv->state = PS_MVOUT_BEGIN;
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

static void ps__move_out_req(struct ps_server *ps,
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
        ps__reply_error(conn, id, method, RT_EINVAL, "bad MoveReq");
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
            ps__reply_error(conn, id, method, RT_EBUSY,
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
        ps__reply_error(conn, id, method, RT_ESTALE,
                        "range not served here at that epoch");
        goto out;
    }
    if (r->frozen) {
        ps__reply_error(conn, id, method, RT_EBUSY, "the range is frozen");
        goto out;
    }
    if (req->new_epoch <= r->epoch || strcmp(req->target_addr, ps->addr) == 0) {
        ps__reply_error(conn, id, method, RT_EINVAL, "bad new epoch or target");
        goto out;
    }

    mv = rt_xcalloc(1, sizeof(*mv));
    mv->ps = ps;
    mv->refs = 1;
    mv->state = PS_MVOUT_SYNC;
    mv->move_id = req->move_id;
    mv->range_id = r->id;
    mv->table_id = r->table_id;
    mv->epoch = r->epoch;
    mv->new_epoch = req->new_epoch;
    mv->low = rt_xstrdup(r->low);
    mv->high = r->high ? rt_xstrdup(r->high) : NULL;
    mv->target = rt_xstrdup(req->target_addr);
    rt_buf_init(&mv->marker);
    rt_buf_init(&mv->pend);
    {
        size_t n = rt__move_req__get_packed_size(req);
        rt__move_req__pack(req, rt_buf_reserve(&mv->marker, n));
        mv->marker.len = n;
    }
    rc = rt_rpc_client_start(ps->loop, mv->target, NULL, NULL, NULL, &mv->cli);
    if (rc != 0) {
        mv->cli = NULL;
        mv->state = PS_MVOUT_ENDED;
        ps__reply_error(conn, id, method, RT_EINVAL, "bad target address");
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
    rt_buf_init(&mv->log.lo);
    rt_buf_init(&mv->log.hi);
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
static void ps__mvout_drop(struct ps_move_out *mv,
                           struct rt_rpc_conn *conn,
                           uint64_t id,
                           uint32_t method)
{
    struct ps_server *ps = mv->ps;
    struct ps_span sp = {mv->table_id, mv->low, mv->high};
    struct ps_mjob *m;
    struct rt_buf k = RT_BUF_INIT;
    int del;

    ps_ranges_remove(&ps->ranges, mv->range_id);
    del = !ps_ranges_overlap(&ps->ranges, sp.table_id, sp.low, sp.high, 0);
    if (ps->stopping) {
        goto out; /* the marker keeps it frozen; settled on restart */
    }
    m = ps__mjob_new(ps);
    ps__meta_key(&k, PS_META_MVOUT, mv->range_id);
    ps__mjob_op(m, &k, NULL, 0);
    rt_buf_free(&k);
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
        ps__reply_error(conn, id, method, RT_EBUSY, "shutting down");
    }
    rt_log(RT_LOG_INFO,
           "move %llu: range %llu dropped here (owned by the "
           "target now)",
           (unsigned long long)mv->move_id, (unsigned long long)mv->range_id);
    ps->mvc.out_dropped++;
    mv->marker_put = 0;
    mv->state = PS_MVOUT_ENDED;
    ps__mvout_release(mv);
    ps__mvout_unlink(mv);
    ps__mvout_unref(mv);
}

/* ------------------------------------------------------------------ */
/* Target                                                              */
/* ------------------------------------------------------------------ */

static struct ps_move_in *ps__mvin_by_move(struct ps_server *ps,
                                           uint64_t move_id)
{
    for (struct ps_move_in *mi = ps->moves_in; mi; mi = mi->next) {
        if (mi->move_id == move_id) {
            return mi;
        }
    }
    return NULL;
}

static void ps__mvin_free(struct ps_move_in *mi)
{
    free(mi->low);
    free(mi->high);
    rt_buf_free(&mi->lo);
    rt_buf_free(&mi->hi);
    free(mi);
}

static void ps__mvin_unlink(struct ps_move_in *mi)
{
    struct ps_server *ps = mi->ps;
    for (struct ps_move_in **pp = &ps->moves_in; *pp; pp = &(*pp)->next) {
        if (*pp == mi) {
            *pp = mi->next;
            break;
        }
    }
    mi->next = NULL;
}

static struct ps_move_in *ps__mvin_new(struct ps_server *ps,
                                       uint64_t move_id,
                                       const Rt__Range *r)
{
    struct ps_move_in *mi = rt_xcalloc(1, sizeof(*mi));
    struct ps_span sp;

    mi->ps = ps;
    mi->move_id = move_id;
    mi->range_id = r->id;
    mi->table_id = r->table_id;
    mi->low = rt_xstrdup(r->low);
    mi->high = r->high_inf ? NULL : rt_xstrdup(r->high);
    rt_buf_init(&mi->lo);
    rt_buf_init(&mi->hi);
    sp.table_id = mi->table_id;
    sp.low = mi->low;
    sp.high = mi->high;
    ps_span_keys(&sp, &mi->lo, &mi->hi);
    mi->next = ps->moves_in;
    ps->moves_in = mi;
    return mi;
}

/* Deferred reply bound to a move-in generation (the record may be gone
 * or begun again when the job calls back). */
struct ps_mvin_wait
{
    struct ps_server *ps;
    uint64_t move_id;
    uint64_t gen;
    struct rt_rpc_conn *conn;
    uint64_t id;
    int status;
};

static struct ps_move_in *ps__mvin_wait_find(struct ps_mvin_wait *w)
{
    struct ps_move_in *mi = ps__mvin_by_move(w->ps, w->move_id);
    return mi && mi->gen == w->gen ? mi : NULL;
}

static void ps__mvin_begin_meta_cb(struct ps_mjob *m, int status)
{
    struct ps_mvin_wait *w = m->arg;
    if (status != 0 && w->status == 0) {
        w->status = status;
    }
}

static void ps__mvin_cleared_cb(struct ps_sjob *sj, int status)
{
    struct ps_mvin_wait *w = sj->arg;
    struct ps_move_in *mi = ps__mvin_wait_find(w);
    const uint32_t method = RT__METHOD__MIGRATE_BEGIN;

    if (status != 0 && w->status == 0) {
        w->status = status;
    }
    if (!mi || mi->state != PS_MVIN_CLEARING) {
        ps__reply_error(w->conn, w->id, method, RT_ECANCELED, "move aborted");
    } else if (w->status != 0) {
        mi->state = PS_MVIN_FAILED;
        mi->status = w->status;
        ps__reply_error(w->conn, w->id, method, w->status,
                        "clearing the range failed");
    } else {
        mi->state = PS_MVIN_RECEIVING;
        ps__reply_empty(w->conn, w->id, method);
    }
    rt_rpc_conn_unref(w->conn);
    free(w);
}

static void ps__migrate_begin(struct ps_server *ps,
                              struct rt_rpc_conn *conn,
                              uint64_t id,
                              const uint8_t *body,
                              size_t len)
{
    const uint32_t method = RT__METHOD__MIGRATE_BEGIN;
    Rt__MigrateBegin *mb = rt__migrate_begin__unpack(NULL, len, body);
    struct ps_move_in *mi;
    struct ps_mvin_wait *w;
    struct ps_mjob *m;
    struct ps_sjob *sj;
    struct ps_span sp;
    struct rt_buf k = RT_BUF_INIT;
    uint64_t seq;
    const char *high;

    if (!mb || !mb->range || mb->range->table_id == 0 || mb->move_id == 0) {
        ps__reply_error(conn, id, method, RT_EINVAL, "bad MigrateBegin");
        goto out;
    }
    high = mb->range->high_inf ? NULL : mb->range->high;
    if (ps_ranges_overlap(&ps->ranges, mb->range->table_id,
                          mb->range->low ? mb->range->low : "", high, 0)) {
        ps__reply_error(conn, id, method, RT_EINVAL,
                        "the range overlaps a range served here");
        goto out;
    }
    /* Older records this one replaces: the same move begun again, or an
     * earlier move of the same range (the master runs one move per range
     * at a time, so that one is dead; its keys are cleared below). Any
     * other overlap is refused. */
    for (mi = ps->moves_in; mi; mi = mi->next) {
        int same =
            mi->move_id == mb->move_id || (mi->range_id == mb->range->id &&
                                           mi->table_id == mb->range->table_id);
        if (same && mi->state == PS_MVIN_CLEARING) {
            ps__reply_error(conn, id, method, RT_EBUSY,
                            "MIGRATE_BEGIN already in progress");
            goto out;
        }
        if (same || mi->table_id != mb->range->table_id) {
            continue;
        }
        if ((!mi->high || strcmp(mb->range->low, mi->high) < 0) &&
            (!high || strcmp(mi->low, high) < 0)) {
            ps__reply_error(conn, id, method, RT_EBUSY,
                            "another move into this key range is pending");
            goto out;
        }
    }
    m = ps__mjob_new(ps);
    for (struct ps_move_in *next = NULL, *o = ps->moves_in; o; o = next) {
        next = o->next;
        if (o->move_id != mb->move_id && (o->range_id != mb->range->id ||
                                          o->table_id != mb->range->table_id)) {
            continue;
        }
        if (o->move_id != mb->move_id && m->n_ops < 6) {
            ps__meta_key(&k, PS_META_MVIN, o->move_id);
            ps__mjob_op(m, &k, NULL, 0);
            rt_buf_reset(&k);
            rt_log(RT_LOG_INFO,
                   "move %llu: replaced by move %llu of the "
                   "same range",
                   (unsigned long long)o->move_id,
                   (unsigned long long)mb->move_id);
        }
        ps__mvin_unlink(o);
        ps__mvin_free(o);
    }
    mi = ps__mvin_new(ps, mb->move_id, mb->range);
    mi->state = PS_MVIN_CLEARING;
    mi->gen = ++ps->span_seq; /* any unique number */

    w = rt_xcalloc(1, sizeof(*w));
    w->ps = ps;
    w->move_id = mi->move_id;
    w->gen = mi->gen;
    w->conn = conn;
    w->id = id;
    rt_rpc_conn_ref(conn);

    /* Record the move and the span drop marker, then clear the span. */
    sp.table_id = mi->table_id;
    sp.low = mi->low;
    sp.high = mi->high;
    ps__meta_key(&k, PS_META_MVIN, mi->move_id);
    ps__mjob_op(m, &k, body, len);
    rt_buf_free(&k);
    seq = ps__mjob_span(m, &sp);
    m->done = ps__mvin_begin_meta_cb;
    m->arg = w;
    ps__mjob_submit(m);
    sj = ps__span_drop(ps, seq, &sp);
    sj->done = ps__mvin_cleared_cb;
    sj->arg = w;
    ps_writer_submit(ps->writer, &sj->job);
    rt_log(RT_LOG_INFO,
           "move %llu: receiving range %llu (table %llu [%s, "
           "%s)) from %s",
           (unsigned long long)mi->move_id, (unsigned long long)mi->range_id,
           (unsigned long long)mi->table_id, mi->low,
           mi->high ? mi->high : "+inf", rt_rpc_conn_peer(conn));
out:
    if (mb) {
        rt__migrate_begin__free_unpacked(mb, NULL);
    }
}

struct ps_mvin_data
{
    struct ps_job job;
    struct ps_mvin_wait w;
    Rt__MigrateData *msg;
    struct ps_kv kvs[];
};

static void ps__mvin_data_cb(struct ps_job *job)
{
    struct ps_mvin_data *d = container_of(job, struct ps_mvin_data, job);
    struct ps_move_in *mi = ps__mvin_wait_find(&d->w);
    int status = job->u.write.status;
    const uint32_t method = RT__METHOD__MIGRATE_DATA;

    if (status != 0 && mi && mi->status == 0) {
        mi->status = status;
        mi->state = PS_MVIN_FAILED;
    }
    if (status != 0) {
        ps__reply_error(d->w.conn, d->w.id, method, status,
                        "storing the records failed");
    } else if (!mi) {
        ps__reply_error(d->w.conn, d->w.id, method, RT_ECANCELED,
                        "move aborted");
    } else {
        ps__reply_empty(d->w.conn, d->w.id, method);
    }
    rt_rpc_conn_unref(d->w.conn);
    rt__migrate_data__free_unpacked(d->msg, NULL);
    free(d);
}

static void ps__migrate_data(struct ps_server *ps,
                             struct rt_rpc_conn *conn,
                             uint64_t id,
                             const uint8_t *body,
                             size_t len)
{
    const uint32_t method = RT__METHOD__MIGRATE_DATA;
    Rt__MigrateData *md = rt__migrate_data__unpack(NULL, len, body);
    struct ps_move_in *mi;
    struct ps_mvin_data *d;
    uint64_t bytes = 0;

    if (!md) {
        ps__reply_error(conn, id, method, RT_EINVAL, "bad MigrateData");
        return;
    }
    mi = ps__mvin_by_move(ps, md->move_id);
    if (!mi || mi->state != PS_MVIN_RECEIVING) {
        ps__reply_error(conn, id, method,
                        mi && mi->status ? mi->status : RT_ENOTFOUND,
                        "no such move receiving");
        goto out_free;
    }
    for (size_t i = 0; i < md->n_kvs; i++) {
        const Rt__KeyValue *kv = md->kvs[i];
        uint64_t ticks;
        uint8_t flags;
        const uint8_t *blob;
        size_t blob_n;
        if (kv->key.len > RT_KEY_MAX ||
            !ps__key_in(kv->key.data, kv->key.len, &mi->lo, &mi->hi) ||
            (!kv->deleted &&
             rt_value_decode(kv->value.data, kv->value.len, &ticks, &flags,
                             &blob, &blob_n) != 0)) {
            ps__reply_error(conn, id, method, RT_EINVAL,
                            "record outside the range or malformed");
            mi->state = PS_MVIN_FAILED;
            mi->status = RT_EINVAL;
            goto out_free;
        }
        bytes += kv->key.len + kv->value.len;
    }
    d = rt_xcalloc(1, sizeof(*d) + md->n_kvs * sizeof(struct ps_kv));
    d->msg = md;
    d->w.ps = ps;
    d->w.move_id = mi->move_id;
    d->w.gen = mi->gen;
    d->w.conn = conn;
    d->w.id = id;
    for (size_t i = 0; i < md->n_kvs; i++) {
        const Rt__KeyValue *kv = md->kvs[i];
        d->kvs[i].key = kv->key.data;
        d->kvs[i].kn = kv->key.len;
        d->kvs[i].val = kv->value.data;
        d->kvs[i].vn = kv->value.len;
        d->kvs[i].deleted = kv->deleted;
    }
    mi->received += md->n_kvs;
    mi->bytes += bytes;
    if (md->n_kvs == 0) {
        ps__reply_empty(conn, id, method);
        free(d);
        goto out_free;
    }
    rt_rpc_conn_ref(conn);
    d->job.kind = PS_JOB_WRITE;
    d->job.cb = ps__mvin_data_cb;
    d->job.u.write.table_id = mi->table_id;
    d->job.u.write.kvs = d->kvs;
    d->job.u.write.n_kvs = md->n_kvs;
    d->job.u.write.failed_index = -1;
    ps_writer_submit(ps->writer, &d->job);
    return;
out_free:
    rt__migrate_data__free_unpacked(md, NULL);
}

static void ps__mvin_end_done(void *arg, int status)
{
    struct ps_mvin_wait *w = arg;
    struct ps_move_in *mi = ps__mvin_wait_find(w);
    const uint32_t method = RT__METHOD__MIGRATE_END;

    if (!mi) {
        ps__reply_error(w->conn, w->id, method, RT_ECANCELED, "move aborted");
    } else if (status != 0 || mi->status != 0) {
        ps__reply_error(w->conn, w->id, method,
                        mi->status ? mi->status : status,
                        "storing the records failed");
    } else {
        /* Every record is committed (group commits are synced). */
        mi->state = PS_MVIN_COMPLETE;
        w->ps->mvc.in_done++;
        rt_log(RT_LOG_INFO,
               "move %llu: range %llu received (%llu records, "
               "%llu bytes, durable); served once assigned",
               (unsigned long long)mi->move_id,
               (unsigned long long)mi->range_id,
               (unsigned long long)mi->received, (unsigned long long)mi->bytes);
        ps__reply_empty(w->conn, w->id, method);
    }
    rt_rpc_conn_unref(w->conn);
    free(w);
}

static void ps__migrate_end(struct ps_server *ps,
                            struct rt_rpc_conn *conn,
                            uint64_t id,
                            const uint8_t *body,
                            size_t len)
{
    const uint32_t method = RT__METHOD__MIGRATE_END;
    Rt__MigrateEnd *me = rt__migrate_end__unpack(NULL, len, body);
    struct ps_move_in *mi;
    struct ps_mvin_wait *w;

    if (!me) {
        ps__reply_error(conn, id, method, RT_EINVAL, "bad MigrateEnd");
        return;
    }
    mi = ps__mvin_by_move(ps, me->move_id);
    if (!mi || mi->state != PS_MVIN_RECEIVING) {
        ps__reply_error(conn, id, method,
                        mi && mi->status ? mi->status : RT_ENOTFOUND,
                        "no such move receiving");
        goto out;
    }
    if (mi->received != me->entities) {
        rt_log(RT_LOG_ERROR,
               "move %llu: source sent %llu records, %llu "
               "arrived",
               (unsigned long long)mi->move_id,
               (unsigned long long)me->entities,
               (unsigned long long)mi->received);
        mi->state = PS_MVIN_FAILED;
        mi->status = RT_ECORRUPT;
        ps__reply_error(conn, id, method, RT_ECORRUPT, "record count mismatch");
        goto out;
    }
    w = rt_xcalloc(1, sizeof(*w));
    w->ps = ps;
    w->move_id = mi->move_id;
    w->gen = mi->gen;
    w->conn = conn;
    w->id = id;
    rt_rpc_conn_ref(conn);
    ps__barrier(ps, ps__mvin_end_done, w);
out:
    rt__migrate_end__free_unpacked(me, NULL);
}

/* Deletes what @mi received (unless a served range covers the span now)
 * and forgets it; answers @conn once that is durably scheduled. */
static void ps__mvin_abort(struct ps_move_in *mi,
                           struct rt_rpc_conn *conn,
                           uint64_t id,
                           uint32_t method)
{
    struct ps_server *ps = mi->ps;
    struct ps_span sp = {mi->table_id, mi->low, mi->high};
    struct ps_mjob *m = ps__mjob_new(ps);
    struct rt_buf k = RT_BUF_INIT;
    uint64_t seq = 0;
    int del = !ps_ranges_overlap(&ps->ranges, sp.table_id, sp.low, sp.high, 0);

    ps__meta_key(&k, PS_META_MVIN, mi->move_id);
    ps__mjob_op(m, &k, NULL, 0);
    rt_buf_free(&k);
    if (del) {
        seq = ps__mjob_span(m, &sp);
    }
    m->conn = conn;
    m->id = id;
    m->method = method;
    ps__mjob_submit(m);
    if (del) {
        ps_writer_submit(ps->writer, &ps__span_drop(ps, seq, &sp)->job);
    }
    rt_log(RT_LOG_INFO,
           "move %llu: aborted; deleting the %llu records "
           "received for range %llu",
           (unsigned long long)mi->move_id, (unsigned long long)mi->received,
           (unsigned long long)mi->range_id);
    ps->mvc.in_aborted++;
    ps__mvin_unlink(mi);
    ps__mvin_free(mi);
}

/* ------------------------------------------------------------------ */
/* Master requests                                                     */
/* ------------------------------------------------------------------ */

static void ps__move_abort_req(struct ps_server *ps,
                               struct rt_rpc_conn *conn,
                               uint64_t id,
                               const uint8_t *body,
                               size_t len)
{
    const uint32_t method = RT__METHOD__MOVE_ABORT;
    Rt__MoveAbort *ma = rt__move_abort__unpack(NULL, len, body);
    struct ps_move_out *mv;
    struct ps_move_in *mi;

    if (!ma) {
        ps__reply_error(conn, id, method, RT_EINVAL, "bad MoveAbort");
        return;
    }
    mv = ps__mvout_by_move(ps, ma->move_id);
    mi = ps__mvin_by_move(ps, ma->move_id);
    if (mv) {
        rt_log(RT_LOG_INFO, "move %llu: aborted by the master (state %s)",
               (unsigned long long)mv->move_id, ps__mvout_names[mv->state]);
        if (mv->state == PS_MVOUT_DONE) {
            mv->state = PS_MVOUT_ENDED;
            ps__mvout_unfreeze(mv);
            ps__mvout_release(mv);
            ps->mvc.out_failed++;
            ps__mvout_unlink(mv);
            ps__mvout_unref(mv);
        } else {
            ps__mvout_fail(mv, RT_ECANCELED, "aborted by the master");
        }
    }
    if (mi) {
        ps__mvin_abort(mi, conn, id, method);
    } else {
        ps__reply_empty(conn, id, method); /* unknown: nothing to undo */
    }
    rt__move_abort__free_unpacked(ma, NULL);
}

static void ps__move_done_req(struct ps_server *ps,
                              struct rt_rpc_conn *conn,
                              uint64_t id,
                              const uint8_t *body,
                              size_t len)
{
    const uint32_t method = RT__METHOD__MOVE_DONE;
    Rt__MoveAbort *ma = rt__move_abort__unpack(NULL, len, body);
    struct ps_move_out *mv;

    if (!ma) {
        ps__reply_error(conn, id, method, RT_EINVAL, "bad MoveAbort");
        return;
    }
    mv = ps__mvout_by_move(ps, ma->move_id);
    if (!mv) {
        if (ps_ranges_find(&ps->ranges, ma->range_id)) {
            ps__reply_error(conn, id, method, RT_EINVAL,
                            "no such move of a range served here");
        } else {
            ps__reply_empty(conn, id, method); /* done already */
        }
    } else if (mv->state != PS_MVOUT_DONE) {
        ps__reply_error(conn, id, method, RT_EINVAL,
                        "the move has not finished copying");
    } else {
        ps__mvout_drop(mv, conn, id, method);
    }
    rt__move_abort__free_unpacked(ma, NULL);
}

void ps_move_on_request(struct ps_server *ps,
                        struct rt_rpc_conn *conn,
                        uint32_t method,
                        uint64_t id,
                        const uint8_t *body,
                        size_t len)
{
    switch (method) {
        case RT__METHOD__MOVE_OUT:
            ps__move_out_req(ps, conn, id, body, len);
            break;
        case RT__METHOD__MOVE_ABORT:
            ps__move_abort_req(ps, conn, id, body, len);
            break;
        case RT__METHOD__MOVE_DONE:
            ps__move_done_req(ps, conn, id, body, len);
            break;
        case RT__METHOD__MIGRATE_BEGIN:
            ps__migrate_begin(ps, conn, id, body, len);
            break;
        case RT__METHOD__MIGRATE_DATA:
            ps__migrate_data(ps, conn, id, body, len);
            break;
        case RT__METHOD__MIGRATE_END:
            ps__migrate_end(ps, conn, id, body, len);
            break;
        default:
            ps__reply_error(conn, id, method, RT_ENOTIMPL, "not a move method");
            break;
    }
}

/* ------------------------------------------------------------------ */
/* Assignments, start, stop                                            */
/* ------------------------------------------------------------------ */

void ps_move_assigned(struct ps_server *ps, int registration)
{
    struct ps_move_out *mv, *next;
    struct ps_move_in *mi, *inext;

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
                mv->state = PS_MVOUT_ENDED;
                ps__mvout_unfreeze(mv);
                ps__mvout_release(mv);
                ps->mvc.out_failed++;
                ps__mvout_unlink(mv);
                ps__mvout_unref(mv);
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
    for (mi = ps->moves_in; mi; mi = inext) {
        inext = mi->next;
        if (ps_ranges_find(&ps->ranges, mi->range_id)) {
            struct ps_mjob *m = ps__mjob_new(ps);
            struct rt_buf k = RT_BUF_INIT;
            rt_log(RT_LOG_INFO,
                   "move %llu: range %llu assigned here; "
                   "serving what was received",
                   (unsigned long long)mi->move_id,
                   (unsigned long long)mi->range_id);
            ps__meta_key(&k, PS_META_MVIN, mi->move_id);
            ps__mjob_op(m, &k, NULL, 0);
            rt_buf_free(&k);
            ps__mjob_submit(m);
            ps__mvin_unlink(mi);
            ps__mvin_free(mi);
        }
    }
}

struct ps__restore
{
    struct ps_server *ps;
    uint64_t max_seq;
    int rc;
};

static int ps__restore_out(const uint8_t *key,
                           size_t kn,
                           const uint8_t *val,
                           size_t vn,
                           void *arg)
{
    struct ps__restore *rs = arg;
    struct ps_server *ps = rs->ps;
    const size_t plen = strlen(PS_META_MVOUT);
    Rt__MoveReq *req;
    struct ps_range *r;
    struct ps_move_out *mv;
    uint64_t range_id;

    if (kn != plen + 8) {
        return 0;
    }
    range_id = rt_get_u64be(key + plen);
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
    mv = rt_xcalloc(1, sizeof(*mv));
    mv->ps = ps;
    mv->refs = 1;
    mv->state = PS_MVOUT_DONE;
    mv->move_id = req->move_id;
    mv->range_id = range_id;
    mv->table_id = r->table_id;
    mv->epoch = r->epoch;
    mv->new_epoch = req->new_epoch;
    mv->low = rt_xstrdup(r->low);
    mv->high = r->high ? rt_xstrdup(r->high) : NULL;
    mv->target = rt_xstrdup(req->target_addr);
    rt_buf_init(&mv->marker);
    rt_buf_append(&mv->marker, val, vn);
    mv->marker_put = 1;
    rt_buf_init(&mv->log.lo);
    rt_buf_init(&mv->log.hi);
    rt_buf_init(&mv->pend);
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

static int ps__restore_in(const uint8_t *key,
                          size_t kn,
                          const uint8_t *val,
                          size_t vn,
                          void *arg)
{
    struct ps__restore *rs = arg;
    const size_t plen = strlen(PS_META_MVIN);
    Rt__MigrateBegin *mb;
    struct ps_move_in *mi;

    (void)key;
    if (kn != plen + 8) {
        return 0;
    }
    mb = rt__migrate_begin__unpack(NULL, vn, val);
    if (!mb || !mb->range) {
        if (mb) {
            rt__migrate_begin__free_unpacked(mb, NULL);
        }
        return 0;
    }
    mi = ps__mvin_new(rs->ps, mb->move_id, mb->range);
    mi->state = PS_MVIN_RESTORED;
    rt_log(RT_LOG_INFO,
           "move %llu: holding keys received for range %llu; "
           "waiting for the master (assignment or MOVE_ABORT)",
           (unsigned long long)mi->move_id, (unsigned long long)mi->range_id);
    rt__migrate_begin__free_unpacked(mb, NULL);
    return 0;
}

static void ps__restore_span(uint64_t seq, const struct ps_span *sp, void *arg)
{
    struct ps__restore *rs = arg;
    rt_log(RT_LOG_INFO, "resuming the drop of table %llu [%s, %s)",
           (unsigned long long)sp->table_id, sp->low,
           sp->high ? sp->high : "+inf");
    ps_writer_submit(rs->ps->writer, &ps__span_drop(rs->ps, seq, sp)->job);
    if (seq >= rs->max_seq) {
        rs->max_seq = seq + 1;
    }
}

int ps_move_start(struct ps_server *ps)
{
    struct ps__restore rs = {ps, 1, 0};
    int rc;

    rc = ps_store_pending_spans(ps->store, ps__restore_span, &rs);
    if (rc == 0) {
        rc = ps_store_meta_scan(ps->store, PS_META_MVOUT, ps__restore_out, &rs);
    }
    if (rc == 0) {
        rc = ps_store_meta_scan(ps->store, PS_META_MVIN, ps__restore_in, &rs);
    }
    /* Marker ids must not repeat: start after the highest pending one,
     * and after anything a clock-free counter could have used before. */
    ps->span_seq = rs.max_seq > ps->span_seq ? rs.max_seq : ps->span_seq;
    if (ps->span_seq < 1) {
        ps->span_seq = 1;
    }
    return rc;
}

void ps_move_stop(struct ps_server *ps)
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

void ps_move_close(struct ps_server *ps)
{
    while (ps->moves_out) {
        struct ps_move_out *mv = ps->moves_out;
        ps->moves_out = mv->next;
        mv->state = PS_MVOUT_ENDED;
        ps__mvout_release(mv);
        if (mv->conn) {
            rt_rpc_conn_unref(mv->conn);
            mv->conn = NULL;
        }
        ps__mvout_unref(mv);
    }
    while (ps->moves_in) {
        struct ps_move_in *mi = ps->moves_in;
        ps->moves_in = mi->next;
        ps__mvin_free(mi);
    }
}

const char *ps_move_out_state(const struct ps_server *ps, uint64_t range_id)
{
    const struct ps_move_out *mv = ps__mvout_by_range(ps, range_id);
    return mv ? ps__mvout_names[mv->state] : NULL;
}

void ps_move_metrics(const struct ps_server *ps, struct rt_buf *out)
{
    size_t nout = 0, nin = 0;

    for (const struct ps_move_out *mv = ps->moves_out; mv; mv = mv->next) {
        nout++;
    }
    for (const struct ps_move_in *mi = ps->moves_in; mi; mi = mi->next) {
        nin++;
    }
    rt_buf_printf(out,
                  "# HELP rt_ps_moves_out Moves out of this server now.\n"
                  "# TYPE rt_ps_moves_out gauge\nrt_ps_moves_out %zu\n"
                  "# HELP rt_ps_moves_in Ranges being received or held.\n"
                  "# TYPE rt_ps_moves_in gauge\nrt_ps_moves_in %zu\n",
                  nout, nin);
    rt_buf_printf(out,
                  "# HELP rt_ps_move_out_state One series per move "
                  "out, labelled with its state.\n"
                  "# TYPE rt_ps_move_out_state gauge\n");
    for (const struct ps_move_out *mv = ps->moves_out; mv; mv = mv->next) {
        rt_buf_printf(out,
                      "rt_ps_move_out_state{move=\"%llu\",range=\"%llu"
                      "\",state=\"%s\"} 1\n",
                      (unsigned long long)mv->move_id,
                      (unsigned long long)mv->range_id,
                      ps__mvout_names[mv->state]);
    }
    rt_buf_printf(out,
                  "# HELP rt_ps_move_in_state One series per move "
                  "in, labelled with its state.\n"
                  "# TYPE rt_ps_move_in_state gauge\n");
    for (const struct ps_move_in *mi = ps->moves_in; mi; mi = mi->next) {
        rt_buf_printf(out,
                      "rt_ps_move_in_state{move=\"%llu\",range=\"%llu\","
                      "state=\"%s\"} 1\n",
                      (unsigned long long)mi->move_id,
                      (unsigned long long)mi->range_id,
                      ps__mvin_names[mi->state]);
    }
    rt_buf_printf(out,
                  "# HELP rt_ps_moves_total Moves by side and outcome.\n"
                  "# TYPE rt_ps_moves_total counter\n"
                  "rt_ps_moves_total{side=\"out\",result=\"copied\"} %llu\n"
                  "rt_ps_moves_total{side=\"out\",result=\"failed\"} %llu\n"
                  "rt_ps_moves_total{side=\"out\",result=\"dropped\"} %llu\n"
                  "rt_ps_moves_total{side=\"in\",result=\"received\"} %llu\n"
                  "rt_ps_moves_total{side=\"in\",result=\"aborted\"} %llu\n"
                  "# HELP rt_ps_move_last_frozen_ms Frozen window of the "
                  "last move out (freeze to target confirmation).\n"
                  "# TYPE rt_ps_move_last_frozen_ms gauge\n"
                  "rt_ps_move_last_frozen_ms %llu\n"
                  "# HELP rt_ps_move_last_snapshot_ms Snapshot copy time "
                  "of the last move out.\n"
                  "# TYPE rt_ps_move_last_snapshot_ms gauge\n"
                  "rt_ps_move_last_snapshot_ms %llu\n"
                  "# HELP rt_ps_span_drops Key span deletions queued or "
                  "running.\n# TYPE rt_ps_span_drops gauge\n"
                  "rt_ps_span_drops %zu\n",
                  (unsigned long long)ps->mvc.out_done,
                  (unsigned long long)ps->mvc.out_failed,
                  (unsigned long long)ps->mvc.out_dropped,
                  (unsigned long long)ps->mvc.in_done,
                  (unsigned long long)ps->mvc.in_aborted,
                  (unsigned long long)ps->mvc.last_frozen_ms,
                  (unsigned long long)ps->mvc.last_snapshot_ms, ps->span_drops);
}
