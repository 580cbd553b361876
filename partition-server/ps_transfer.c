/* Primaryship transfer of ps_transfer.h. The happy path: TRANSFER_PRIMARY
 * -> ps_repl_freeze (RT_EBUSY to clients, lease released, support round)
 * -> META job writing the marker (durable; FIFO, so also the writer
 * barrier) -> the poll timer (1 ms) sees ps_repl_transfer_ready
 * -> TransferResp{lsn, frozen_ms} -> the master seals and commits T as
 * primary -> the assignment steps the core down to a secondary following
 * T (ps_transfer_assigned drops the record). Failure modes: a refused
 * check answers at once and changes nothing; not ready in time unfreezes
 * and answers RT_ETIMEDOUT; TRANSFER_ABORT, a newer assignment keeping
 * this server primary, or an orphaned freeze unfreezes (and deletes the
 * marker); a marker that cannot be written unfreezes and answers its
 * error; the server stopping answers RT_EBUSY and keeps the marker, so
 * the restart holds the range until a decision. */
#include "ps_transfer.h"

#include <inttypes.h>
#include <stdlib.h>
#include <uv.h>

#include "ps_fence.h"
#include "ps_jobs.h"
#include "ps_rcore.h"
#include "ps_repl.h"
#include "ps_store.h"
#include "ps_writer.h"
#include "rt.pb-c.h"
#include "rt_alloc.h"
#include "rt_buf.h"
#include "rt_err.h"
#include "rt_log.h"

#define PS__XFER_WAITERS 4
#define PS__XFER_POLL_MS 1
#define PS__XFER_IDLE_MS 500

/* A request waiting for the answer of a transfer. */
struct ps__xwait
{
    struct rt_rpc_conn *conn; /* a reference is held */
    uint64_t id;
};

/* One range frozen here for a transfer. */
struct ps__xfer
{
    struct ps_transfer *xt;
    uint64_t range_id;
    uint64_t epoch;
    uint64_t to;
    uint64_t frozen_at_ms; /* monotonic */
    /* The META job persisting the marker; FIFO, it is the writer barrier
     * too. Its buffers live here until it called back. */
    struct ps_job barrier;
    struct rt_buf blob, key;
    uint8_t val[16];
    struct ps_meta_op op;
    int barrier_pending;
    int barrier_done;
    int restored; /* found persisted at start: held, never answered */
    int answered; /* the answer below went out (same request: same) */
    uint64_t lsn;
    uint64_t frozen_ms;
    int gone; /* settled: freed once the barrier called back */
    struct ps__xwait waits[PS__XFER_WAITERS];
    size_t n_waits;
    struct ps__xfer *next;
};

struct ps_transfer
{
    struct ps_server *ps;
    uv_timer_t timer;
    uint64_t timer_period;
    struct ps__xfer *list;
    int closing;
};

static uint64_t ps__xnow(void)
{
    return uv_hrtime() / 1000000u;
}

/* Answers */

static void ps__xanswer_err(struct ps__xfer *x, int code, const char *why)
{
    for (size_t i = 0; i < x->n_waits; i++) {
        rt_rpc_reply_err(x->waits[i].conn, x->waits[i].id,
                         RT__METHOD__TRANSFER_PRIMARY, code, why);
        rt_rpc_conn_unref(x->waits[i].conn);
    }
    x->n_waits = 0;
}

static void ps__xreply_ok(struct rt_rpc_conn *conn,
                          uint64_t id,
                          const struct ps__xfer *x)
{
    Rt__TransferResp resp = RT__TRANSFER_RESP__INIT;
    resp.lsn = x->lsn;
    resp.frozen_ms = x->frozen_ms;
    rt_rpc_reply_pb(conn, id, RT__METHOD__TRANSFER_PRIMARY, 0, &resp.base);
}

static void ps__xanswer_ok(struct ps__xfer *x)
{
    for (size_t i = 0; i < x->n_waits; i++) {
        ps__xreply_ok(x->waits[i].conn, x->waits[i].id, x);
        rt_rpc_conn_unref(x->waits[i].conn);
    }
    x->n_waits = 0;
}

/* The persisted marker (PS_TRANSFER_META) */

static void ps__xfree(struct ps__xfer *x)
{
    rt_buf_free(&x->blob);
    rt_buf_free(&x->key);
    free(x);
}

/* A META job deleting the marker of @range_id, not waited for. */
struct ps__xdel
{
    struct ps_job job;
    struct rt_buf blob, key;
    struct ps_meta_op op;
};

static void ps__xdel_cb(struct ps_job *job)
{
    struct ps__xdel *d = container_of(job, struct ps__xdel, job);
    if (job->status != 0) {
        rt_log(RT_LOG_WARN, "transfer marker not deleted: %s",
               rt_strerror(job->status));
    }
    rt_buf_free(&d->blob);
    rt_buf_free(&d->key);
    free(d);
}

static void ps__xdel_marker(struct ps_server *ps, uint64_t range_id)
{
    struct ps__xdel *d;
    if (ps->writer == NULL) {
        return; /* stopping: a restart finds the marker and holds */
    }
    d = rt_xcalloc(1, sizeof(*d));
    ps_jobs_meta_init(ps, &d->job, &d->blob);
    ps_store_meta_key(&d->key, PS_TRANSFER_META, range_id);
    d->op = (struct ps_meta_op){.key = d->key.data, .kn = d->key.len, .del = 1};
    d->job.u.meta.ops = &d->op;
    d->job.u.meta.n_ops = 1;
    d->job.cb = ps__xdel_cb;
    ps_writer_submit(ps->writer, &d->job);
}

static void ps__xput_u64(uint8_t *p, uint64_t v)
{
    for (int i = 7; i >= 0; i--) {
        p[i] = (uint8_t)v;
        v >>= 8;
    }
}

static uint64_t ps__xget_u64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) {
        v = v << 8 | p[i];
    }
    return v;
}

/* Records */

static struct ps__xfer *ps__xfind(struct ps_transfer *xt, uint64_t range_id)
{
    for (struct ps__xfer *x = xt->list; x != NULL; x = x->next) {
        if (!x->gone && x->range_id == range_id) {
            return x;
        }
    }
    return NULL;
}

/* Takes @x off the list; freed now, or by its barrier's callback. */
static void ps__xdrop(struct ps__xfer *x)
{
    struct ps_transfer *xt = x->xt;
    for (struct ps__xfer **pp = &xt->list; *pp != NULL; pp = &(*pp)->next) {
        if (*pp == x) {
            *pp = x->next;
            break;
        }
    }
    x->gone = 1;
    if (!x->barrier_pending) {
        ps__xfree(x);
    }
}

/* Ends the freeze of @x (the lease must be won again) and drops it;
 * waiting requests get @code. */
static void ps__xunfreeze(struct ps__xfer *x, int code, const char *why)
{
    struct ps_server *ps = x->xt->ps;
    (void)ps_repl_unfreeze(ps, x->range_id);
    (void)ps_repl_hold(ps, x->range_id, 0);
    ps__xdel_marker(ps, x->range_id);
    ps__xanswer_err(x, code, why);
    rt_log(RT_LOG_INFO,
           "range %" PRIu64 ": freeze for a transfer to server %" PRIu64
           " over after %" PRIu64 " ms (%s)",
           x->range_id, x->to, ps__xnow() - x->frozen_at_ms, why);
    ps__xdrop(x);
}

/* The timer */

static void ps__xtimer_cb(uv_timer_t *t);

/* Polls every PS__XFER_POLL_MS while an answer is due, else slowly (the
 * orphan rule). */
static void ps__xarm(struct ps_transfer *xt)
{
    uint64_t period = PS__XFER_IDLE_MS;
    if (xt->closing) {
        return;
    }
    for (struct ps__xfer *x = xt->list; x != NULL; x = x->next) {
        if (!x->answered) {
            period = PS__XFER_POLL_MS;
        }
    }
    if (xt->list == NULL) {
        uv_timer_stop(&xt->timer);
        xt->timer_period = 0;
        return;
    }
    if (period != xt->timer_period) {
        uv_timer_start(&xt->timer, ps__xtimer_cb, period, period);
        xt->timer_period = period;
    }
}

/* One freeze looked at now. */
static void ps__xcheck(struct ps__xfer *x, uint64_t now)
{
    struct ps_server *ps = x->xt->ps;
    uint64_t age = now - x->frozen_at_ms;
    if (!x->answered) {
        uint64_t lsn = 0;
        int all = age < PS_TRANSFER_ALL_MS;
        int rc = x->barrier_done
                     ? ps_repl_transfer_ready(ps, x->range_id, x->to, all, &lsn)
                     : 0;
        if (rc < 0) {
            ps__xunfreeze(x, RT_ESTALE, "range no longer a frozen primary");
            return;
        }
        if (rc == 1) {
            x->answered = 1;
            x->lsn = lsn;
            x->frozen_ms = age;
            rt_log(RT_LOG_INFO,
                   "range %" PRIu64 ": ready to hand over to server %" PRIu64
                   " at LSN %" PRIu64 " after %" PRIu64 " ms frozen",
                   x->range_id, x->to, lsn, age);
            ps__xanswer_ok(x);
            return;
        }
        if (age >= PS_TRANSFER_READY_MS) {
            ps__xunfreeze(x, RT_ETIMEDOUT, "target did not catch up");
        }
        return;
    }
    if (age >= PS_TRANSFER_ORPHAN_MS) {
        const struct ps_range *r = ps_ranges_find(&ps->ranges, x->range_id);
        if (r != NULL && r->epoch == x->epoch) {
            rt_log(RT_LOG_WARN,
                   "range %" PRIu64 ": frozen %" PRIu64
                   " ms for a transfer without a decision",
                   x->range_id, age);
            ps__xunfreeze(x, RT_ETIMEDOUT, "no decision");
        }
    }
}

static void ps__xtimer_cb(uv_timer_t *t)
{
    struct ps_transfer *xt = t->data;
    uint64_t now = ps__xnow();
    struct ps__xfer *x = xt->list, *next;
    for (; x != NULL; x = next) {
        next = x->next;
        ps__xcheck(x, now);
    }
    ps__xarm(xt);
}

static void ps__xbarrier_cb(struct ps_job *job)
{
    struct ps__xfer *x = container_of(job, struct ps__xfer, barrier);
    struct ps_transfer *xt = x->xt;
    x->barrier_pending = 0;
    if (x->gone) {
        ps__xfree(x);
        return;
    }
    if (job->status != 0) {
        ps__xunfreeze(x, job->status, "persisting the freeze failed");
        ps__xarm(xt);
        return;
    }
    x->barrier_done = 1;
    ps__xcheck(x, ps__xnow()); /* may free @x */
    ps__xarm(xt);
}

/* Requests */

static void ps__on_transfer(struct ps_transfer *xt,
                            struct rt_rpc_conn *conn,
                            uint64_t id,
                            const Rt__TransferReq *req)
{
    const uint32_t method = RT__METHOD__TRANSFER_PRIMARY;
    struct ps_server *ps = xt->ps;
    struct ps__xfer *x = ps__xfind(xt, req->range_id);
    int rc;

    if (x != NULL) {
        /* §4: frozen already; the same request again gets the same
         * answer. */
        if (x->restored || x->epoch != req->epoch || x->to != req->to_server) {
            rt_rpc_reply_err(conn, id, method, RT_EBUSY,
                             "range frozen for another transfer");
        } else if (x->answered) {
            ps__xreply_ok(conn, id, x);
        } else if (x->n_waits == PS__XFER_WAITERS) {
            rt_rpc_reply_err(conn, id, method, RT_EBUSY, "too many waiting");
        } else {
            rt_rpc_conn_ref(conn);
            x->waits[x->n_waits++] = (struct ps__xwait){conn, id};
        }
        return;
    }
    rc = ps_repl_freeze(ps, req->range_id, req->epoch, req->to_server);
    if (rc != 0) {
        rt_rpc_reply_err(conn, id, method, rc,
                         rc == RT_ESTALE   ? "not the primary at that epoch"
                         : rc == RT_EINVAL ? "target not in the ISR"
                                           : "range not serving");
        return;
    }
    x = rt_xcalloc(1, sizeof(*x));
    x->xt = xt;
    x->range_id = req->range_id;
    x->epoch = req->epoch;
    x->to = req->to_server;
    x->frozen_at_ms = ps__xnow();
    rt_rpc_conn_ref(conn);
    x->waits[x->n_waits++] = (struct ps__xwait){conn, id};
    x->next = xt->list;
    xt->list = x;
    rt_log(RT_LOG_INFO,
           "range %" PRIu64 ": frozen at epoch %" PRIu64
           " for a transfer to server %" PRIu64,
           x->range_id, x->epoch, x->to);
    /* The marker is durable before the answer, so a restart does not
     * serve; the writer being FIFO, every write admitted before the freeze
     * reaches the core before this job calls back. */
    ps_jobs_meta_init(ps, &x->barrier, &x->blob);
    ps_store_meta_key(&x->key, PS_TRANSFER_META, x->range_id);
    ps__xput_u64(x->val, x->epoch);
    ps__xput_u64(x->val + 8, x->to);
    x->op = (struct ps_meta_op){.key = x->key.data,
                                .kn = x->key.len,
                                .val = x->val,
                                .vn = sizeof(x->val)};
    x->barrier.u.meta.ops = &x->op;
    x->barrier.u.meta.n_ops = 1;
    x->barrier.cb = ps__xbarrier_cb;
    x->barrier_pending = 1;
    ps_writer_submit(ps->writer, &x->barrier);
    ps__xarm(xt);
}

static void ps__on_abort(struct ps_transfer *xt, const Rt__TransferReq *req)
{
    struct ps__xfer *x = ps__xfind(xt, req->range_id);
    if (x != NULL && x->epoch == req->epoch) {
        ps__xunfreeze(x, RT_ECANCELED, "transfer aborted");
        ps__xarm(xt);
    }
}

void ps_transfer_on_request(struct ps_server *ps,
                            struct rt_rpc_conn *conn,
                            uint32_t method,
                            uint64_t id,
                            const uint8_t *body,
                            size_t len)
{
    struct ps_transfer *xt = ps->xfer;
    Rt__TransferReq *req = rt__transfer_req__unpack(NULL, len, body);
    if (req == NULL) {
        rt_rpc_reply_err(conn, id, method, RT_EINVAL, "bad TransferReq");
        return;
    }
    if (ps_fence_admit(ps, conn, id, method, req->master_term) != 0) {
        /* answered */
    } else if (xt == NULL || xt->closing || ps->writer == NULL) {
        rt_rpc_reply_err(conn, id, method, RT_EBUSY, "shutting down");
    } else if (method == RT__METHOD__TRANSFER_PRIMARY) {
        ps__on_transfer(xt, conn, id, req);
    } else {
        ps__on_abort(xt, req);
        Rt__Empty empty = RT__EMPTY__INIT;
        rt_rpc_reply_pb(conn, id, method, 0, &empty.base);
    }
    rt__transfer_req__free_unpacked(req, NULL);
}

void ps_transfer_assigned(struct ps_server *ps)
{
    struct ps_transfer *xt = ps->xfer;
    struct ps__xfer *x, *next;
    if (xt == NULL || xt->closing) {
        return;
    }
    for (x = xt->list; x != NULL; x = next) {
        struct ps_rcore_range_info info;
        next = x->next;
        if (ps_repl_range_info(ps, x->range_id, &info) != 0 ||
            info.role != PS_RCORE_PRIMARY ||
            (!x->restored && info.state != PS_RPRI_FROZEN)) {
            /* Settled by the assignment: a secondary following T, or a
             * primary of a new generation (its lease won afresh). */
            ps__xunfreeze(x, RT_ESTALE, "transfer settled by an assignment");
            continue;
        }
        if (info.epoch > x->epoch) {
            ps__xunfreeze(x, RT_ECANCELED, "assigned primary again");
        }
    }
    ps__xarm(xt);
}

size_t ps_transfer_frozen(const struct ps_server *ps)
{
    size_t n = 0;
    if (ps->xfer != NULL) {
        for (const struct ps__xfer *x = ps->xfer->list; x; x = x->next) {
            n++;
        }
    }
    return n;
}

/* Life cycle */

/* Markers found at start: kept (and their range held) while this server
 * is still the range's primary at the frozen epoch, else deleted. */
struct ps__xscan
{
    struct ps_transfer *xt;
    uint64_t stale[16];
    size_t n_stale;
};

static int ps__xrestore_cb(uint64_t id,
                           const uint8_t *val,
                           size_t vn,
                           void *arg)
{
    struct ps__xscan *sc = arg;
    struct ps_transfer *xt = sc->xt;
    struct ps_rcore_range_info info;
    struct ps__xfer *x;
    uint64_t epoch = vn == 16 ? ps__xget_u64(val) : 0;
    if (vn != 16 || ps_repl_range_info(xt->ps, id, &info) != 0 ||
        info.role != PS_RCORE_PRIMARY || info.epoch != epoch ||
        ps_repl_hold(xt->ps, id, 1) != 0) {
        if (sc->n_stale < sizeof(sc->stale) / sizeof(sc->stale[0])) {
            sc->stale[sc->n_stale++] = id;
        }
        return 0;
    }
    x = rt_xcalloc(1, sizeof(*x));
    x->xt = xt;
    x->range_id = id;
    x->epoch = epoch;
    x->to = ps__xget_u64(val + 8);
    x->frozen_at_ms = ps__xnow();
    x->barrier_done = x->answered = x->restored = 1;
    x->next = xt->list;
    xt->list = x;
    rt_log(RT_LOG_WARN,
           "range %" PRIu64 ": was frozen at epoch %" PRIu64
           " for a transfer to server %" PRIu64
           ": serves nothing until its assignment decides",
           id, epoch, x->to);
    return 0;
}

int ps_transfer_start(struct ps_server *ps)
{
    struct ps_transfer *xt = rt_xcalloc(1, sizeof(*xt));
    struct ps__xscan sc = {.xt = xt};
    int rc = uv_timer_init(ps->loop, &xt->timer);
    if (rc != 0) {
        free(xt);
        return rc;
    }
    xt->ps = ps;
    xt->timer.data = xt;
    ps->xfer = xt;
    rc = ps_store_meta_scan(ps->store, PS_TRANSFER_META, ps__xrestore_cb, &sc);
    if (rc != 0) {
        rt_log(RT_LOG_WARN, "transfer markers not read: %s", rt_strerror(rc));
    }
    for (size_t i = 0; i < sc.n_stale; i++) {
        ps__xdel_marker(ps, sc.stale[i]);
    }
    ps__xarm(xt);
    return 0;
}

static void ps__xclose_cb(uv_handle_t *h)
{
    free(h->data);
}

void ps_transfer_stop(struct ps_server *ps)
{
    struct ps_transfer *xt = ps->xfer;
    if (xt == NULL || xt->closing) {
        return;
    }
    xt->closing = 1;
    while (xt->list != NULL) {
        struct ps__xfer *x = xt->list;
        ps__xanswer_err(x, RT_EBUSY, "shutting down");
        ps__xdrop(x);
    }
    uv_timer_stop(&xt->timer);
    uv_close((uv_handle_t *)&xt->timer, ps__xclose_cb);
    ps->xfer = NULL;
}
