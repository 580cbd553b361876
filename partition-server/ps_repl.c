/* Replication glue (ps_repl.h): events in, actions out.
 *
 * Every entry point builds one struct rt_repl_event, steps the core
 * (ps__repl_step) and runs its actions (ps__repl_dispatch):
 *   SEND append     -> batched per peer, one REPL_APPEND call per peer
 *                      per step;
 *   SEND ack        -> settles groups of waiting REPL_APPEND requests;
 *   SEND seal_resp  -> the reply to the waiting SEAL request(s);
 *   SEND isr_change -> an ISR_CHANGE call on the master link (its reply
 *                      comes back as an ISR_RESP message);
 *   SEND assign_resp -> read back by the assignment that caused it;
 *   WRITE           -> a raw write job with the group's LSN, or (seal) a
 *                      PS_JOB_REPL_STATE persisting sealed_epoch;
 *   TIMER           -> the core's uv timer;
 *   REPLY           -> the waiting client write's callback.
 * Then the reads waiting for cw are checked.
 *
 * Happy path of a replicated write at the primary: ps_rpc admits it
 * (ps_repl_route) -> writer commits its group with the range's LSN ->
 * ps_repl_write_done takes the group's records from the range's capture
 * log -> DISK_DONE -> REPL_APPEND to each ISR peer -> the peer's
 * ps_repl_on_append -> raw write job -> its DISK_DONE -> ack in the reply
 * -> ps__append_reply -> ACK events -> cw -> REPLY -> the write's answer.
 * Failure modes:
 *  - a peer unreachable or slow: calls fail or time out; the core resends
 *    from its send buffer (resend timer, or at once when the connection
 *    comes back); held writes wait until the core's ISR shrink is
 *    committed (the assignment at the new epoch) or --write-hold-ms;
 *  - a group failing its CRC or bounds check at the secondary: refused
 *    with RT_ECORRUPT / RT_EINVAL, the core resends it;
 *  - the secondary's writer failing a group (and so every later one: the
 *    store refuses LSN gaps): logged; the range's core state restarts at
 *    its durable LSN and the primary's resend fills it in (a lasting
 *    failure, e.g. a full disk, leaves it late: the primary asks the
 *    master to remove it from the ISR);
 *  - a capture log overflow (PS_MLOG_MAX_BYTES behind): logged; the
 *    groups lost from it would go out empty, so the range is forgotten
 *    and its writes answered RT_ETIMEDOUT rather than ship a hole;
 *  - a SEAL whose persist fails: logged, never answered (the master's
 *    call times out and is retried; the core keeps the fence in memory);
 *  - an ISR_CHANGE refused or lost: the core asks again later; the held
 *    writes wait, at most --write-hold-ms. */
#include "ps_repl.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "ps_fence.h"
#include "ps_keylog.h"
#include "ps_lease.h"
#include "ps_lsn_ring.h"
#include "ps_rcore.h"
#include "rt_alloc.h"
#include "rt_crc32c.h"
#include "rt_err.h"
#include "rt_log.h"
#include "rt_masters.h"
#include "rt_metrics.h"
#include "rt_utf8.h"

/* A replicated range as the glue knows it. */
struct ps__rrange
{
    uint64_t id;
    uint64_t table_id;
    uint64_t epoch;
    uint64_t primary_epoch;
    uint64_t primary_id;
    uint32_t min_insync; /* writes need this many in the ISR */
    size_t n_isr;
    int primary;            /* this server is its primary */
    char *low, *high;       /* PK bounds; high NULL = unbounded */
    struct rt_buf klo, khi; /* storage key bounds [klo, khi) */
    struct ps_mlog log;     /* primary: capture of its key bounds */
    int log_on;
    struct rt_buf pend;      /* primary: captured records not yet sent */
    struct ps_lsn_ring ring; /* primary: (txn_id, lsn) for lsn_T */
    uint64_t last_fed;       /* primary: last group LSN given the core */
    /* primary: its read lease was held since it became primary here, so
     * a lapse is NOLEASE (§6.4), not a lease still being won */
    int lease_held;
    int nolease; /* primary: NOLEASE now (logged once per lapse) */
    int seen;    /* in the assignment being applied */
    /* primary frozen for a transfer: the first SupportReq seq that
     * carried its release (0: not released) */
    uint64_t release_seq;
    int restart_released; /* released as a restarted primary (below) */
    int held;             /* ps_repl_hold: clients get RT_EBUSY */
};

struct ps__rpeer
{
    uint64_t id;
    char addr[320];
    struct rt_rpc_client *cli;
    struct ps_repl *repl;
    uint64_t resp_seq;   /* the highest SupportReq seq it answered */
    int inc_from_master; /* the master gave its incarnation */
    /* The batch of appends being built by one dispatch. */
    Rt__ReplGroup **batch;
    size_t n_batch, cap_batch;
    size_t batch_bytes; /* records in it */
};

/* One group of a REPL_APPEND request at the receiver. */
struct ps__aitem
{
    uint64_t range_id;
    uint64_t lsn;
    int settled;
    struct rt_repl_ack ack;
};

/* A REPL_APPEND request waiting for its groups to settle. */
struct ps__areq
{
    struct rt_rpc_conn *conn; /* a reference is held */
    uint64_t id;
    size_t n, n_settled;
    struct ps__areq *next;
    struct ps__aitem items[];
};

/* A raw write of one replicated group (secondary). */
struct ps__rwrite
{
    struct ps_job job;
    struct ps_server *ps;
    uint64_t range_id;
    uint64_t lsn;
    uint64_t io_id;
    uint8_t *recs;
    size_t recs_len;
    struct ps_kv *kvs;
};

/* A SEAL from the master waiting for the core's answer (the persist of
 * sealed_epoch). The core sees it as a message from peer @token. */
struct ps__sreq
{
    struct rt_rpc_conn *conn; /* a reference is held */
    uint64_t id;
    uint64_t token;
    uint64_t range_id;
    uint64_t new_epoch;
    struct ps__sreq *next;
};

/* Core peers above this are SEAL requests (ps__sreq.token), not servers. */
#define PS__SEAL_TOKEN (UINT64_C(1) << 63)

/* A persist of fields of a range's `rs` record (PS_JOB_REPL_STATE). */
struct ps__rsjob
{
    struct ps_job job;
    struct ps_server *ps;
    uint64_t io_id; /* a core WRITE (seal): its DISK_DONE; else 0 */
};

/* The core's peer id for the master: ISR_CHANGE goes on the master link
 * (server ids start at 1). */
#define PS__MASTER_PEER 0

/* An ISR_CHANGE call in flight (primary -> master). */
struct ps__icall
{
    struct ps_server *ps;
    uint64_t range_id;
};

/* A REPL_APPEND or REPL_SUPPORT call in flight (primary). */
struct ps__acall
{
    struct ps_server *ps;
    uint64_t peer;
    uint64_t seq; /* REPL_SUPPORT: the request's number */
};

struct ps_repl
{
    struct ps_server *ps;
    struct ps_rcore *core;
    struct rt_repl_actions out;
    struct ps__rrange **ranges;
    size_t n_ranges, cap_ranges;
    struct ps__rpeer **peers;
    size_t n_peers, cap_peers;
    struct ps_repl_wait waits; /* list head: held writes and reads */
    size_t n_reads;
    size_t held_ops;        /* entity ops of the held writes */
    struct ps__areq *areqs; /* REPL_APPEND requests not yet answered */
    struct ps__sreq *sreqs; /* SEAL requests not yet answered */
    uint64_t next_token;
    struct ps__aitem *cur; /* the group being fed to the core */
    uint64_t max_txn;      /* every commit <= this has called back */
    uint64_t core_self;    /* the server id the core was made with */
    uv_timer_t core_timer;
    uv_timer_t read_timer;
    /* Leases (§6): this server as granter and as holder, made with the
     * core; the clock is ps__lease_now(). */
    struct ps_lease_granter *granter;
    struct ps_lease_holder *holder;
    uint64_t start_ms;
    uv_timer_t support_timer;
    uint64_t sent_seq;              /* the last SupportReq seq sent */
    int fenced;                     /* ps_repl_lease_fence */
    int stalled;                    /* the writer is stuck: self-fenced */
    ps_repl_action_hook learn_hook; /* ps_repl_set_learn_hook */
    /* §2.3: which keys each group committed here changed, per range
     * (primary: its own groups; secondary: the groups it applied), for
     * keyed catch-ups; --repl-log-mb. */
    struct ps_keylog *keylog;
    int closing;
    int open_handles;
};

static const struct ps_kv ps__no_kvs[1];

/* Lookups */

static struct ps__rrange *ps__rr_find(const struct ps_repl *rp, uint64_t id)
{
    for (size_t i = 0; i < rp->n_ranges; i++) {
        if (rp->ranges[i]->id == id) {
            return rp->ranges[i];
        }
    }
    return NULL;
}

static struct ps__rpeer *ps__peer_find(const struct ps_repl *rp, uint64_t id)
{
    for (size_t i = 0; i < rp->n_peers; i++) {
        if (rp->peers[i]->id == id) {
            return rp->peers[i];
        }
    }
    return NULL;
}

/* 1 when storage key @k[0..n) is inside [lo, hi). */
static int ps__key_in(const struct rt_buf *lo,
                      const struct rt_buf *hi,
                      const uint8_t *k,
                      size_t n)
{
    int c = memcmp(k, lo->data, n < lo->len ? n : lo->len);
    if (c < 0 || (c == 0 && n < lo->len)) {
        return 0;
    }
    c = memcmp(k, hi->data, n < hi->len ? n : hi->len);
    return c < 0 || (c == 0 && n < hi->len);
}

/* The lease clock: CLOCK_MONOTONIC read now, never the loop's cached
 * time, which may be behind (a grant recorded early, or a lease checked
 * late, would break the bound of ps_lease.h). */
static uint64_t ps__lease_now(void)
{
    return uv_hrtime() / 1000000u;
}

/* §6.3 (b): the lease over @range_id holds now. */
static int ps__lease_ok(const struct ps_repl *rp, uint64_t range_id)
{
    return rp->holder != NULL &&
           ps_lease_holder_ok(rp->holder, range_id, ps__lease_now());
}

/* Waits */

static void ps__wait_link(struct ps_repl *rp, struct ps_repl_wait *w)
{
    w->next = rp->waits.next;
    w->prev = &rp->waits;
    rp->waits.next->prev = w;
    rp->waits.next = w;
    rp->n_reads += w->is_read;
    rp->held_ops += w->ops;
}

static void ps__wait_fire(struct ps_repl *rp, struct ps_repl_wait *w, int code)
{
    w->prev->next = w->next;
    w->next->prev = w->prev;
    w->prev = w->next = NULL;
    rp->n_reads -= w->is_read;
    rp->held_ops -= w->ops;
    w->cb(w, code);
}

/* Answers the reads whose lsn_T cw has reached, and (@now_ms set) those
 * past their deadline. */
static void ps__reads_check(struct ps_repl *rp, uint64_t now_ms)
{
    struct ps_repl_wait *w = rp->waits.next, *next;
    for (; rp->n_reads > 0 && w != &rp->waits; w = next) {
        struct ps_rcore_range_info info;
        next = w->next;
        if (!w->is_read) {
            continue;
        }
        if (ps_rcore_range_get(rp->core, w->range_id, &info) != 0 ||
            !ps_rcore_info_serving(&info)) {
            ps__wait_fire(rp, w, RT_ENOTPRIMARY);
        } else if (info.commit_lsn >= w->lsn) {
            ps__wait_fire(rp, w,
                          ps__lease_ok(rp, w->range_id) ? 0 : RT_ENOTPRIMARY);
        } else if (now_ms != 0 && now_ms >= w->deadline_ms) {
            ps__wait_fire(rp, w, RT_EBUSY);
        }
    }
    if (rp->n_reads == 0 && !rp->closing) {
        uv_timer_stop(&rp->read_timer);
    }
}

static void ps__read_timer_cb(uv_timer_t *t)
{
    struct ps_repl *rp = container_of(t, struct ps_repl, read_timer);
    ps__reads_check(rp, uv_now(rp->ps->loop));
}

/* Actions */

static void ps__write_job_cb(struct ps_job *job);
static void ps__append_reply(int status,
                             const uint8_t *body,
                             size_t len,
                             void *arg);
static void ps__repl_step(struct ps_repl *rp, const struct rt_repl_event *ev);
static int ps__core_ensure(struct ps_repl *rp);

/* Packs @g with crc32c = 0 and returns the CRC32C of those bytes. */
static uint32_t ps__group_crc(Rt__ReplGroup *g)
{
    uint32_t saved = g->crc32c, crc;
    size_t n;
    uint8_t stack[512], *buf = stack;
    g->crc32c = 0;
    n = rt__repl_group__get_packed_size(g);
    if (n > sizeof(stack)) {
        buf = rt_xmalloc(n);
    }
    rt__repl_group__pack(g, buf);
    crc = rt_crc32c(0, buf, n);
    if (buf != stack) {
        free(buf);
    }
    g->crc32c = saved;
    return crc;
}

static void ps__batch_send(struct ps_repl *rp, struct ps__rpeer *p);
static void ps__rstate_submit(struct ps_repl *rp,
                              uint64_t range_id,
                              unsigned set,
                              const struct ps_rstate *rs,
                              uint64_t io_id);
static void ps__seal_answer(struct ps_repl *rp,
                            uint64_t token,
                            const struct rt_repl_seal_resp *r);
static void ps__isr_change_send(struct ps_repl *rp,
                                const struct rt_repl_isr_change *c);

/* Adds one group to @p's next REPL_APPEND; a batch that would pass
 * PS_REPL_BATCH_BYTES of records goes out first. */
static void ps__batch_add(struct ps_repl *rp,
                          struct ps__rpeer *p,
                          const struct rt_repl_append *ap)
{
    struct ps__rrange *rr = ps__rr_find(rp, ap->range_id);
    Rt__ReplGroup *g;
    if (p->n_batch > 0 &&
        p->batch_bytes + ap->records_len > PS_REPL_BATCH_BYTES) {
        ps__batch_send(rp, p);
    }
    g = rt_xcalloc(1, sizeof(*g));
    rt__repl_group__init(g);
    g->range_id = ap->range_id;
    g->epoch = ap->epoch;
    g->primary_epoch = rr != NULL ? rr->primary_epoch : 0;
    g->gen = ap->gen;
    g->lsn = ap->lsn;
    g->commit_lsn = ap->commit_lsn;
    g->records.data = (uint8_t *)ap->records;
    g->records.len = ap->records_len;
    g->crc32c = ps__group_crc(g);
    if (p->n_batch == p->cap_batch) {
        p->cap_batch = p->cap_batch ? 2 * p->cap_batch : 8;
        p->batch = rt_xrealloc(p->batch, p->cap_batch * sizeof(*p->batch));
    }
    p->batch[p->n_batch++] = g;
    p->batch_bytes += ap->records_len;
}

/* Sends the batch built for @p (records still point into rp->out). */
static void ps__batch_send(struct ps_repl *rp, struct ps__rpeer *p)
{
    Rt__ReplAppend msg = RT__REPL_APPEND__INIT;
    struct ps__acall *call;
    if (p->n_batch == 0) {
        return;
    }
    msg.from_server = rp->ps->server_id;
    msg.groups = p->batch;
    msg.n_groups = p->n_batch;
    if (p->cli != NULL) {
        call = rt_xcalloc(1, sizeof(*call));
        call->ps = rp->ps;
        call->peer = p->id;
        if (rt_rpc_call_pb(rt_rpc_client_conn(p->cli), RT__METHOD__REPL_APPEND,
                           &msg.base, PS_REPL_CALL_MS, ps__append_reply,
                           call) != 0) {
            rt_log(RT_LOG_WARN, "REPL_APPEND to server %" PRIu64 " too large",
                   p->id);
            free(call);
        }
    }
    for (size_t i = 0; i < p->n_batch; i++) {
        free(p->batch[i]);
    }
    p->n_batch = 0;
    p->batch_bytes = 0;
}

static void ps__areq_reply(struct ps_repl *rp, struct ps__areq *q)
{
    Rt__ReplAck resp = RT__REPL_ACK__INIT;
    Rt__RangeAck *acks = rt_xcalloc(q->n, sizeof(*acks));
    Rt__RangeAck **ptrs = rt_xcalloc(q->n, sizeof(*ptrs));
    (void)rp;
    for (size_t i = 0; i < q->n; i++) {
        rt__range_ack__init(&acks[i]);
        acks[i].range_id = q->items[i].ack.range_id;
        acks[i].code = q->items[i].ack.code;
        acks[i].applied_lsn = q->items[i].ack.applied_lsn;
        acks[i].epoch = q->items[i].ack.epoch;
        ptrs[i] = &acks[i];
    }
    resp.acks = ptrs;
    resp.n_acks = q->n;
    rt_rpc_reply_pb(q->conn, q->id, RT__METHOD__REPL_APPEND, 0, &resp.base);
    free(acks);
    free(ptrs);
}

/* Answers and frees the requests whose groups have all settled. */
static void ps__areqs_flush(struct ps_repl *rp)
{
    struct ps__areq **pp = &rp->areqs;
    while (*pp != NULL) {
        struct ps__areq *q = *pp;
        if (q->n_settled < q->n) {
            pp = &q->next;
            continue;
        }
        *pp = q->next;
        ps__areq_reply(rp, q);
        rt_rpc_conn_unref(q->conn);
        free(q);
    }
}

static void ps__item_settle(struct ps__areq *q,
                            struct ps__aitem *it,
                            const struct rt_repl_ack *ack)
{
    if (!it->settled) {
        it->settled = 1;
        it->ack = *ack;
        q->n_settled++;
    }
}

/* An ack the core sends (secondary): a NACK settles the group being fed;
 * a cumulative ack settles every waiting group of its range it covers. */
static void ps__ack_out(struct ps_repl *rp, const struct rt_repl_ack *ack)
{
    for (struct ps__areq *q = rp->areqs; q != NULL; q = q->next) {
        for (size_t i = 0; i < q->n; i++) {
            struct ps__aitem *it = &q->items[i];
            if (it->settled || it->range_id != ack->range_id) {
                continue;
            }
            if (ack->code != 0 ? it == rp->cur : it->lsn <= ack->applied_lsn) {
                ps__item_settle(q, it, ack);
            }
        }
    }
}

/* WRITE: the group's records as raw changes with its LSN. */
static void ps__write_submit(struct ps_repl *rp, const struct rt_repl_action *a)
{
    const struct rt_repl_append *ap = &a->msg.u.append;
    struct ps__rwrite *rw = rt_xcalloc(1, sizeof(*rw));
    struct ps_change c;
    size_t off = 0, n = 0;
    rw->ps = rp->ps;
    rw->range_id = a->range_id;
    rw->lsn = a->lsn;
    rw->io_id = a->io_id;
    rw->recs =
        ap->records_len ? rt_xmemdup(ap->records, ap->records_len) : NULL;
    rw->recs_len = ap->records_len;
    while (ps_change_next(rw->recs, ap->records_len, &off, &c) == 1) {
        n++;
    }
    rw->kvs = n ? rt_xcalloc(n, sizeof(*rw->kvs)) : NULL;
    off = 0;
    for (size_t i = 0; i < n; i++) {
        ps_change_next(rw->recs, ap->records_len, &off, &c);
        rw->kvs[i] = (struct ps_kv){c.key, c.kn, c.val, c.vn, c.deleted};
    }
    rw->job.kind = PS_JOB_WRITE;
    rw->job.cb = ps__write_job_cb;
    rw->job.u.write.kvs = n ? rw->kvs : ps__no_kvs;
    rw->job.u.write.n_kvs = n;
    rw->job.u.write.failed_index = -1;
    rw->job.u.write.range_id = a->range_id;
    rw->job.u.write.repl_lsn = a->lsn;
    rw->job.u.write.repl_gen = ap->gen;
    ps_writer_submit(rp->ps->writer, &rw->job);
}

static void ps__core_timer_cb(uv_timer_t *t)
{
    struct ps_repl *rp = container_of(t, struct ps_repl, core_timer);
    struct rt_repl_event ev = {.kind = RT_REPL_EV_TIMER,
                               .now_ms = uv_now(rp->ps->loop),
                               .timer_id = PS_RCORE_TIMER_RESEND};
    ps__repl_step(rp, &ev);
}

static void ps__rstate_job_cb(struct ps_job *job)
{
    struct ps__rsjob *j = container_of(job, struct ps__rsjob, job);
    struct ps_server *ps = j->ps;
    struct ps_repl *rp = ps->repl;
    uint64_t range_id = job->u.rstate.range_id;

    if (job->status != 0) {
        /* The fence is not durable: no answer (the master's SEAL times
         * out and is retried; the core keeps refusing the old epoch). */
        rt_log(RT_LOG_ERROR,
               "range %" PRIu64 ": replica state not persisted: %s", range_id,
               rt_strerror(job->status));
    } else if (j->io_id != 0 && rp != NULL && !rp->closing) {
        struct rt_repl_event ev = {.kind = RT_REPL_EV_DISK_DONE,
                                   .now_ms = uv_now(ps->loop),
                                   .io_id = j->io_id,
                                   .range_id = range_id};
        ps__repl_step(rp, &ev);
    }
    free(j);
}

/* Persists the fields @set of @rs in @range_id's `rs` record, synced,
 * after every write queued before (the writer is FIFO). @io_id: the core
 * WRITE it answers with a DISK_DONE (0: none). */
static void ps__rstate_submit(struct ps_repl *rp,
                              uint64_t range_id,
                              unsigned set,
                              const struct ps_rstate *rs,
                              uint64_t io_id)
{
    struct ps__rsjob *j = rt_xcalloc(1, sizeof(*j));
    j->ps = rp->ps;
    j->io_id = io_id;
    j->job.kind = PS_JOB_REPL_STATE;
    j->job.cb = ps__rstate_job_cb;
    j->job.u.rstate.range_id = range_id;
    j->job.u.rstate.set = set;
    j->job.u.rstate.rs = *rs;
    ps_writer_submit(rp->ps->writer, &j->job);
}

/* The core's answer to the SEAL it saw from @token (and to every other
 * SEAL of the same range and epoch waiting for the same persist). */
static void ps__seal_answer(struct ps_repl *rp,
                            uint64_t token,
                            const struct rt_repl_seal_resp *r)
{
    const uint32_t method = RT__METHOD__SEAL;
    struct ps__sreq **pp = &rp->sreqs;
    while (*pp != NULL) {
        struct ps__sreq *q = *pp;
        if (q->token != token && !(r->code == 0 && q->range_id == r->range_id &&
                                   q->new_epoch == r->new_epoch)) {
            pp = &q->next;
            continue;
        }
        *pp = q->next;
        if (r->code == 0 || r->code == RT_EBUSY) {
            Rt__SealResp resp = RT__SEAL_RESP__INIT;
            resp.applied_epoch = r->applied_epoch;
            resp.applied_lsn = r->applied_lsn;
            resp.retry_ms =
                r->code == RT_EBUSY ? (r->retry_ms > 0 ? r->retry_ms : 1) : 0;
            rt_rpc_reply_pb(q->conn, q->id, method, 0, &resp.base);
        } else {
            rt_rpc_reply_err(q->conn, q->id, method, r->code, NULL);
        }
        if (r->code == 0) {
            rt_log(RT_LOG_INFO,
                   "range %" PRIu64 ": sealed for epoch %" PRIu64
                   " at applied LSN %" PRIu64,
                   q->range_id, q->new_epoch, r->applied_lsn);
        } else {
            rt_log(RT_LOG_DEBUG,
                   "range %" PRIu64 ": SEAL for epoch %" PRIu64 ": %s",
                   q->range_id, q->new_epoch, rt_strerror(r->code));
        }
        rt_rpc_conn_unref(q->conn);
        free(q);
    }
}

/* The master's answer to an ISR_CHANGE: status 0 + the committed Range,
 * or the §4 error (or a transport error): fed back as ISR_RESP. */
static void ps__isr_change_reply(int status,
                                 const uint8_t *body,
                                 size_t len,
                                 void *arg)
{
    struct ps__icall *call = arg;
    struct ps_server *ps = call->ps;
    struct rt_repl_msg m = {.kind = RT_REPL_MSG_ISR_RESP};
    m.u.isr_resp.range_id = call->range_id;
    m.u.isr_resp.code = status;
    free(call);
    if (status == RT_ECANCELED || ps->stopping || ps->repl == NULL ||
        ps->repl->closing || ps->repl->core == NULL) {
        return;
    }
    if (status == RT_ENOTLEADER && ps->master_link) {
        /* A follower master: the link heads for the leader it names now,
         * not at the next heartbeat; the core asks again there. */
        rt_masters_link_reply(ps->master_link, status, body, len);
    }
    if (status == 0) {
        Rt__Range *r = rt__range__unpack(NULL, len, body);
        if (r != NULL) {
            m.u.isr_resp.epoch = r->epoch;
            rt__range__free_unpacked(r, NULL);
        }
        rt_log(RT_LOG_INFO,
               "range %" PRIu64 ": ISR change committed at epoch %" PRIu64,
               m.u.isr_resp.range_id, m.u.isr_resp.epoch);
    } else {
        rt_log(RT_LOG_DEBUG, "range %" PRIu64 ": ISR change refused: %s",
               m.u.isr_resp.range_id, rt_strerror(status));
    }
    struct rt_repl_event ev = {.kind = RT_REPL_EV_MSG,
                               .now_ms = uv_now(ps->loop),
                               .peer = PS__MASTER_PEER,
                               .msg = &m};
    ps__repl_step(ps->repl, &ev);
}

/* ISR_CHANGE (method 71) on the master link. */
static void ps__isr_change_send(struct ps_repl *rp,
                                const struct rt_repl_isr_change *c)
{
    struct ps_server *ps = rp->ps;
    Rt__IsrChangeReq req = RT__ISR_CHANGE_REQ__INIT;
    uint64_t remove[RT_REPL_MAX_REPLICAS], add[RT_REPL_MAX_REPLICAS];
    struct ps__icall *call;
    memcpy(remove, c->remove, c->n_remove * sizeof(*remove));
    memcpy(add, c->add, c->n_add * sizeof(*add));
    req.range_id = c->range_id;
    req.epoch = c->epoch;
    req.remove = remove;
    req.n_remove = c->n_remove;
    req.add = add;
    req.n_add = c->n_add;
    req.reason = c->n_add ? "caught up" : "late acks or link down";
    if (c->n_add > 0) {
        rt_log(RT_LOG_INFO,
               "range %" PRIu64 ": asking the master to add server %" PRIu64
               " (caught up) to the ISR at epoch %" PRIu64,
               c->range_id, c->add[0], c->epoch);
    } else {
        rt_log(RT_LOG_INFO,
               "range %" PRIu64
               ": asking the master to remove %zu in-sync "
               "replica(s) (first: server %" PRIu64 ") at epoch %" PRIu64,
               c->range_id, c->n_remove, c->n_remove ? c->remove[0] : 0,
               c->epoch);
    }
    if (ps->master == NULL) {
        return; /* no master link (tests): the change stays in flight */
    }
    call = rt_xcalloc(1, sizeof(*call));
    call->ps = ps;
    call->range_id = c->range_id;
    if (rt_rpc_call_pb(rt_rpc_client_conn(ps->master), RT__METHOD__ISR_CHANGE,
                       &req.base, PS_REPL_CALL_MS, ps__isr_change_reply,
                       call) != 0) {
        free(call);
    }
}

/* Runs the actions in rp->out, then resets it. */
static void ps__repl_dispatch(struct ps_repl *rp)
{
    uint64_t now = uv_now(rp->ps->loop);
    for (size_t i = 0; i < rp->out.n; i++) {
        const struct rt_repl_action *a = &rp->out.v[i];
        struct ps__rpeer *p;
        if (rp->learn_hook != NULL && rp->learn_hook(rp->ps, a)) {
            continue; /* catch-up: probes, copies, their answers */
        }
        switch (a->kind) {
            case RT_REPL_ACT_SEND:
                if (a->msg.kind == RT_REPL_MSG_ACK) {
                    ps__ack_out(rp, &a->msg.u.ack);
                } else if (a->msg.kind == RT_REPL_MSG_SEAL_RESP) {
                    ps__seal_answer(rp, a->peer, &a->msg.u.seal_resp);
                } else if (a->msg.kind == RT_REPL_MSG_ISR_CHANGE) {
                    ps__isr_change_send(rp, &a->msg.u.isr_change);
                } else if (a->msg.kind != RT_REPL_MSG_APPEND) {
                    /* ASSIGN_RESP: read back by ps__conf_apply. */
                } else if ((p = ps__peer_find(rp, a->peer)) != NULL) {
                    ps__batch_add(rp, p, &a->msg.u.append);
                }
                break;
            case RT_REPL_ACT_WRITE:
                if (rp->ps->writer == NULL) {
                    break;
                }
                if (a->msg.kind == RT_REPL_MSG_SEAL) {
                    struct ps_rstate rs = {.sealed_epoch =
                                               a->msg.u.seal.new_epoch};
                    ps__rstate_submit(rp, a->range_id, PS_RS_SET_SEALED_EPOCH,
                                      &rs, a->io_id);
                } else {
                    ps__write_submit(rp, a);
                }
                break;
            case RT_REPL_ACT_TIMER:
                if (rp->closing) {
                    break;
                }
                if (a->at_ms == 0) {
                    uv_timer_stop(&rp->core_timer);
                } else {
                    uv_timer_start(&rp->core_timer, ps__core_timer_cb,
                                   a->at_ms > now ? a->at_ms - now : 0, 0);
                }
                break;
            case RT_REPL_ACT_REPLY:
                ps__wait_fire(rp, (struct ps_repl_wait *)(uintptr_t)a->req_id,
                              a->code);
                break;
            default:
                break;
        }
    }
    for (size_t i = 0; i < rp->n_peers; i++) {
        ps__batch_send(rp, rp->peers[i]);
    }
    rt_repl_actions_reset(&rp->out);
    ps__areqs_flush(rp);
    ps__reads_check(rp, 0);
}

static void ps__repl_step(struct ps_repl *rp, const struct rt_repl_event *ev)
{
    int rc = ps_rcore_step(rp->core, ev, &rp->out);
    if (rc != 0) {
        rt_log(RT_LOG_DEBUG, "replication core refused %s event: %s",
               rt_repl_ev_kind_name(ev->kind), rt_strerror(rc));
    }
    ps__repl_dispatch(rp);
}

void ps_repl_set_learn_hook(struct ps_server *ps, ps_repl_action_hook hook)
{
    if (ps->repl != NULL) {
        ps->repl->learn_hook = hook;
    }
}

void ps_repl_core_step(struct ps_server *ps, const struct rt_repl_event *ev)
{
    struct ps_repl *rp = ps->repl;
    if (rp != NULL && !rp->closing && rp->core != NULL) {
        ps__repl_step(rp, ev);
    }
}

/* Peers */

static void ps__peer_conn_cb(struct rt_rpc_conn *conn, int up, void *ud)
{
    struct ps__rpeer *p = ud;
    struct ps_repl *rp = p->repl;
    (void)conn;
    if (rp->closing) {
        return;
    }
    rt_log(up ? RT_LOG_INFO : RT_LOG_WARN,
           "replication link to server %" PRIu64 " (%s) %s", p->id, p->addr,
           up ? "up" : "down");
    struct rt_repl_event ev = {.kind = RT_REPL_EV_CONN,
                               .now_ms = uv_now(rp->ps->loop),
                               .peer = p->id,
                               .up = up};
    ps__repl_step(rp, &ev);
}

/* Records @id's address and connects when a range of mine streams to it. */
static void ps__peer_set(struct ps_repl *rp, uint64_t id, const char *addr)
{
    struct ps__rpeer *p = ps__peer_find(rp, id);
    if (p == NULL) {
        p = rt_xcalloc(1, sizeof(*p));
        p->id = id;
        p->repl = rp;
        if (rp->n_peers == rp->cap_peers) {
            rp->cap_peers = rp->cap_peers ? 2 * rp->cap_peers : 4;
            rp->peers =
                rt_xrealloc(rp->peers, rp->cap_peers * sizeof(*rp->peers));
        }
        rp->peers[rp->n_peers++] = p;
    }
    if (strcmp(p->addr, addr) == 0) {
        return;
    }
    snprintf(p->addr, sizeof(p->addr), "%s", addr);
    if (p->cli != NULL) {
        rt_rpc_client_set_addr(p->cli, p->addr);
    } else if (rt_rpc_client_start(rp->ps->loop, p->addr, NULL,
                                   ps__peer_conn_cb, p, &p->cli) != 0) {
        rt_log(RT_LOG_ERROR, "bad address '%s' of server %" PRIu64, p->addr,
               id);
        p->cli = NULL;
    } else {
        /* Replicas, learners and repairs talk to peers only. */
        rt_rpc_client_expect_roles(p->cli, RT_RPC_ROLE_PS);
    }
}

/* Ranges */

/* Key log (§2.3) */

/* Notes in the key log that group @lsn of @rr (write transaction @txn_id)
 * changed the storage keys of its change records @recs[@len], and moves
 * the range's cw there to the commit LSN the core knows. A group the log
 * refuses (an LSN not above its last: a replay) changes nothing. */
static void ps__keylog_feed(struct ps_repl *rp,
                            const struct ps__rrange *rr,
                            uint64_t lsn,
                            uint64_t txn_id,
                            const uint8_t *recs,
                            size_t len)
{
    struct ps_keylog_key stack[16], *keys = stack;
    struct ps_change c;
    size_t off = 0, n = 0, cap = sizeof(stack) / sizeof(stack[0]);
    struct ps_rcore_range_info info;
    if (rp->keylog == NULL) {
        return;
    }
    while (ps_change_next(recs, len, &off, &c) == 1) {
        if (n == cap) {
            cap *= 2;
            if (keys == stack) {
                keys = rt_xmalloc(cap * sizeof(*keys));
                memcpy(keys, stack, sizeof(stack));
            } else {
                keys = rt_xrealloc(keys, cap * sizeof(*keys));
            }
        }
        keys[n++] = (struct ps_keylog_key){c.key, c.kn};
    }
    if (ps_keylog_append(rp->keylog, rr->id, lsn, rr->epoch, txn_id, keys, n) ==
        RT_EINVAL) {
        /* Not above the log's last LSN: a sequence the log does not
         * describe (a copy, a rebuild); it starts again here. */
        (void)ps_keylog_drop_range(rp->keylog, rr->id);
        (void)ps_keylog_append(rp->keylog, rr->id, lsn, rr->epoch, txn_id, keys,
                               n);
    }
    if (keys != stack) {
        free(keys);
    }
    if (ps_rcore_range_get(rp->core, rr->id, &info) == 0) {
        (void)ps_keylog_set_cw(rp->keylog, rr->id, info.commit_lsn);
    }
}

static void ps__rr_free(struct ps_repl *rp, struct ps__rrange *rr)
{
    if (rp->keylog != NULL) {
        (void)ps_keylog_drop_range(rp->keylog, rr->id);
    }
    if (rr->log_on && rp->ps->writer != NULL) {
        ps_writer_log_remove(rp->ps->writer, &rr->log);
    }
    rt_buf_free(&rr->log.recs);
    rt_buf_free(&rr->log.lo);
    rt_buf_free(&rr->log.hi);
    rt_buf_free(&rr->pend);
    rt_buf_free(&rr->klo);
    rt_buf_free(&rr->khi);
    free(rr->low);
    free(rr->high);
    free(rr);
}

static void ps__rr_forget(struct ps_repl *rp, struct ps__rrange *rr)
{
    rt_log(RT_LOG_INFO, "range %" PRIu64 ": no longer replicated here as %s",
           rr->id, rr->primary ? "primary" : "secondary");
    ps_rcore_forget(rp->core, rr->id, &rp->out);
    if (rp->granter != NULL) {
        (void)ps_lease_granter_drop_range(rp->granter, rr->id);
        (void)ps_lease_holder_drop_range(rp->holder, rr->id);
    }
    for (size_t i = 0; i < rp->n_ranges; i++) {
        if (rp->ranges[i] == rr) {
            rp->ranges[i] = rp->ranges[--rp->n_ranges];
            break;
        }
    }
    /* Its groups still waiting in REPL_APPEND requests will not be acked
     * by this state: refused, so the requests are answered (the primary
     * resends what it still needs). */
    struct rt_repl_ack stale = {.range_id = rr->id, .code = RT_ESTALE};
    for (struct ps__areq *q = rp->areqs; q != NULL; q = q->next) {
        for (size_t i = 0; i < q->n; i++) {
            if (q->items[i].range_id == rr->id) {
                ps__item_settle(q, &q->items[i], &stale);
            }
        }
    }
    ps__rr_free(rp, rr);
}

/* The core's assignment of @d; 0, or RT_EINVAL (too many replicas). */
static int ps__assignment(const Rt__Range *d, struct ps_rcore_assignment *a)
{
    memset(a, 0, sizeof(*a));
    a->range_id = d->id;
    a->epoch = d->epoch;
    a->primary_id = d->server_id;
    a->primary_epoch = d->primary_epoch;
    if (d->n_isr > 0) {
        if (d->n_isr > PS_RCORE_MAX_REPLICAS ||
            d->n_replicas > PS_RCORE_MAX_REPLICAS) {
            return RT_EINVAL;
        }
        memcpy(a->isr, d->isr, d->n_isr * sizeof(*d->isr));
        a->n_isr = d->n_isr;
        /* The others of the set are caught up by the primary. */
        for (size_t i = 0; i < d->n_replicas; i++) {
            int in = 0;
            for (size_t j = 0; j < d->n_isr; j++) {
                in |= d->isr[j] == d->replicas[i]->server_id;
            }
            if (!in) {
                a->learners[a->n_learners++] = d->replicas[i]->server_id;
            }
        }
        return 0;
    }
    for (size_t i = 0; i < d->n_replicas; i++) {
        if (d->replicas[i]->role == RT__REPL_ROLE__ROLE_PRIMARY ||
            d->replicas[i]->role == RT__REPL_ROLE__ROLE_SECONDARY) {
            if (a->n_isr == PS_RCORE_MAX_REPLICAS) {
                return RT_EINVAL;
            }
            a->isr[a->n_isr++] = d->replicas[i]->server_id;
        } else if (d->replicas[i]->role == RT__REPL_ROLE__ROLE_LEARNER &&
                   a->n_learners < PS_RCORE_MAX_REPLICAS) {
            a->learners[a->n_learners++] = d->replicas[i]->server_id;
        }
    }
    return 0;
}

/* Starts or stops the capture of @rr's key bounds with its role: a
 * primary takes its groups' records from it (ps__take_group) and keeps
 * the (txn_id, lsn) ring of its reads from LSN @lsn on. */
static void ps__rr_capture(struct ps_repl *rp,
                           struct ps__rrange *rr,
                           int primary,
                           uint64_t lsn)
{
    struct ps_server *ps = rp->ps;
    if (primary && !rr->log_on) {
        struct ps_span sp = {rr->table_id, rr->low, rr->high};
        rt_buf_reset(&rr->log.lo);
        rt_buf_reset(&rr->log.hi);
        rt_buf_reset(&rr->log.recs);
        rt_buf_reset(&rr->pend);
        rr->log.overflow = 0;
        ps_span_keys(&sp, &rr->log.lo, &rr->log.hi);
        ps_writer_log_add(ps->writer, &rr->log);
        rr->log_on = 1;
        ps_lsn_ring_init(&rr->ring, lsn);
        rr->last_fed = lsn;
    } else if (!primary && rr->log_on) {
        ps_writer_log_remove(ps->writer, &rr->log);
        rr->log_on = 0;
        rt_buf_free(&rr->log.recs);
        rt_buf_free(&rr->pend);
    }
    rr->primary = primary;
}

/* Persists the role, epoch and primary generation the core took for @rr
 * (the `rs` record), so that a restart comes back in them
 * (ps_repl_restore). */
static void ps__rr_persist(struct ps_repl *rp, const struct ps__rrange *rr)
{
    struct ps_rstate rs = {
        .epoch = rr->epoch,
        .primary_epoch = rr->primary_epoch,
        .role = rr->primary ? PS_RS_ROLE_PRIMARY : PS_RS_ROLE_SECONDARY,
    };
    if (rp->ps->writer != NULL) {
        ps__rstate_submit(
            rp, rr->id,
            PS_RS_SET_EPOCH | PS_RS_SET_ROLE | PS_RS_SET_PRIMARY_EPOCH, &rs, 0);
    }
}

/* The glue's record of range @d, which the core now holds (role @primary,
 * at LSN @lsn). */
static struct ps__rrange *ps__rr_new(struct ps_repl *rp,
                                     const Rt__Range *d,
                                     size_t n_isr,
                                     int primary,
                                     uint64_t lsn)
{
    const char *high = ps_range_pb_high(d);
    struct ps__rrange *rr = rt_xcalloc(1, sizeof(*rr));
    struct ps_span sp = {d->table_id, d->low ? d->low : "", high};
    rr->id = d->id;
    rr->table_id = d->table_id;
    rr->epoch = d->epoch;
    rr->primary_epoch = d->primary_epoch ? d->primary_epoch : d->epoch;
    rr->primary_id = d->server_id;
    rr->min_insync = d->min_insync;
    rr->n_isr = n_isr;
    rr->low = rt_xstrdup(sp.low);
    rr->high = high ? rt_xstrdup(high) : NULL;
    rt_buf_init(&rr->klo);
    rt_buf_init(&rr->khi);
    rt_buf_init(&rr->pend);
    rt_buf_init(&rr->log.lo);
    rt_buf_init(&rr->log.hi);
    rt_buf_init(&rr->log.recs);
    ps_span_keys(&sp, &rr->klo, &rr->khi);
    ps_lsn_ring_init(&rr->ring, lsn);
    rr->last_fed = lsn;
    ps__rr_capture(rp, rr, primary, lsn);
    if (rp->n_ranges == rp->cap_ranges) {
        rp->cap_ranges = rp->cap_ranges ? 2 * rp->cap_ranges : 8;
        rp->ranges =
            rt_xrealloc(rp->ranges, rp->cap_ranges * sizeof(*rp->ranges));
    }
    rp->ranges[rp->n_ranges++] = rr;
    rr->seen = 1;
    return rr;
}

/* 1 when @rr's bounds contain @d's (same table). */
static int ps__rr_contains(const struct ps__rrange *rr, const Rt__Range *d)
{
    const char *high = ps_range_pb_high(d);
    if (rr->table_id != d->table_id ||
        rt_utf16_cmpz(rr->low, d->low ? d->low : "") > 0) {
        return 0;
    }
    return rr->high == NULL ||
           (high != NULL && rt_utf16_cmpz(high, rr->high) <= 0);
}

/* A split of a replicated range (docs/DESIGN-replication.md §9.1): new
 * range @d, without an `rs` record here, lies inside a range this server
 * replicates under another id, its parent (an assignment never lists
 * both: ranges of a table do not overlap). Then @d starts where the
 * parent's durable record is: *@rs = its applied and commit positions,
 * and 1; else 0 (a new range, LSN 0). Every ISR member of the parent held
 * its last LSN when the master committed the split (the primary froze
 * it first), so the children continue from the same LSN everywhere. */
static int ps__rr_split_from(struct ps_repl *rp,
                             const Rt__Range *d,
                             struct ps_rstate *rs)
{
    for (size_t i = 0; i < rp->n_ranges; i++) {
        const struct ps__rrange *par = rp->ranges[i];
        struct ps_rstate prs;
        if (par->id == d->id || !ps__rr_contains(par, d) ||
            ps_store_repl_get(rp->ps->store, par->id, &prs) != 0) {
            continue;
        }
        memset(rs, 0, sizeof(*rs));
        rs->applied_epoch = prs.applied_epoch;
        rs->applied_lsn = prs.applied_lsn;
        rs->commit_lsn = prs.commit_lsn;
        memcpy(rs->hist, prs.hist, sizeof(rs->hist));
        rs->n_hist = prs.n_hist;
        rt_log(RT_LOG_INFO,
               "range %" PRIu64 ": split from range %" PRIu64
               " at LSN %" PRIu64,
               d->id, par->id, prs.applied_lsn);
        return 1;
    }
    return 0;
}

/* A merge of replicated ranges (docs/DESIGN-replication.md §9.2): new
 * range @d, without an `rs` record here, contains ranges this server
 * replicates under other ids, its parents. Then @d starts at the highest
 * of their durable applied positions (and commit LSNs): *@rs, and 1; else
 * 0. The master merges only ranges whose every replica is in sync, frozen
 * until each held its parent's last LSN, so every replica takes the same
 * LSN. */
static int ps__rr_merge_from(struct ps_repl *rp,
                             const Rt__Range *d,
                             struct ps_rstate *rs)
{
    const char *high = ps_range_pb_high(d);
    int found = 0;
    memset(rs, 0, sizeof(*rs));
    for (size_t i = 0; i < rp->n_ranges; i++) {
        const struct ps__rrange *par = rp->ranges[i];
        struct ps_rstate prs;
        if (par->id == d->id || par->table_id != d->table_id ||
            rt_utf16_cmpz(par->low, d->low ? d->low : "") < 0 ||
            (high != NULL &&
             (par->high == NULL || rt_utf16_cmpz(par->high, high) > 0)) ||
            ps_store_repl_get(rp->ps->store, par->id, &prs) != 0) {
            continue;
        }
        if (prs.applied_lsn >= rs->applied_lsn) {
            rs->applied_epoch = prs.applied_epoch;
            rs->applied_lsn = prs.applied_lsn;
        }
        if (prs.commit_lsn > rs->commit_lsn) {
            rs->commit_lsn = prs.commit_lsn;
        }
        rt_log(RT_LOG_INFO,
               "range %" PRIu64 ": merged from range %" PRIu64
               " at LSN %" PRIu64,
               d->id, par->id, prs.applied_lsn);
        found = 1;
    }
    return found;
}

/* Gives the core range @range_id's durable history (@rs, its `rs`
 * record, or its split parent's), so that a replica that restarted or
 * was split can still be caught up from its LSN (§7.3). */
static void ps__rr_history(struct ps_repl *rp,
                           uint64_t range_id,
                           const struct ps_rstate *rs)
{
    struct rt_repl_epoch_start h[RT_REPL_MAX_HISTORY];
    size_t n = rs->n_hist <= RT_REPL_MAX_HISTORY ? rs->n_hist : 0;
    for (size_t i = 0; i < n; i++) {
        h[i] = (struct rt_repl_epoch_start){rs->hist[i].epoch,
                                            rs->hist[i].first_lsn};
    }
    if (n > 0) {
        ps_rcore_set_history(rp->core, range_id, h, n);
    }
}

static void ps__rr_create(struct ps_repl *rp, const Rt__Range *d)
{
    struct ps_server *ps = rp->ps;
    struct ps_rcore_assignment a;
    struct ps_rstate rs;
    int split = 0;
    int rc = ps__assignment(d, &a);

    if (rc == 0) {
        rc = ps_store_repl_get(ps->store, d->id, &rs);
        if (rc == RT_ENOTFOUND) {
            split =
                ps__rr_split_from(rp, d, &rs) || ps__rr_merge_from(rp, d, &rs);
            if (!split) {
                rs.applied_lsn = 0;
            }
            rc = 0;
        }
    }
    if (rc == 0) {
        /* A copy cut short (LEARNING) is no copy. */
        a.lsn = rs.state == PS_RS_LEARNING ? 0 : rs.applied_lsn;
        rc = ps_rcore_assign(rp->core, &a, &rp->out);
    }
    if (rc == 0 && a.lsn != 0) {
        ps__rr_history(rp, d->id, &rs);
    }
    if (rc != 0) {
        rt_log(RT_LOG_ERROR, "range %" PRIu64 ": cannot replicate: %s", d->id,
               rt_strerror(rc));
        return;
    }
    struct ps__rrange *rr =
        ps__rr_new(rp, d, a.n_isr, d->server_id == ps->server_id, a.lsn);
    if (split && ps->writer != NULL) {
        /* Before the assignment's meta (the writer is FIFO): a restart
         * that finds the children finds their records. */
        ps__rstate_submit(rp, d->id, PS_RS_SET_APPLIED, &rs, 0);
    }
    ps__rr_persist(rp, rr);
    rt_log(RT_LOG_INFO,
           "range %" PRIu64 ": replicated as %s at epoch %" PRIu64
           ", %zu in sync, from LSN %" PRIu64,
           d->id, rr->primary ? "primary" : "secondary", d->epoch, a.n_isr,
           a.lsn);
}

/* After a restart: range @d as its durable state left it (ps_rcore_load:
 * a primary waits, ACTIVATING, for the assignment that confirms it). 0,
 * or the core's refusal (the caller creates it on the next assignment). */
static int ps__rr_restore(struct ps_repl *rp, const Rt__Range *d)
{
    struct ps_server *ps = rp->ps;
    struct ps_rcore_assignment a;
    struct ps_rcore_durable du;
    struct ps_rstate rs;
    int rc = ps__assignment(d, &a);

    if (rc == 0) {
        rc = ps_store_repl_get(ps->store, d->id, &rs);
        if (rc == RT_ENOTFOUND) {
            memset(&rs, 0, sizeof(rs));
            rc = 0;
        }
    }
    if (rc != 0) {
        return rc;
    }
    memset(&du, 0, sizeof(du));
    du.range_id = d->id;
    du.role =
        d->server_id == ps->server_id ? PS_RCORE_PRIMARY : PS_RCORE_SECONDARY;
    du.epoch = d->epoch;
    du.primary_id = d->server_id;
    du.primary_epoch = d->primary_epoch ? d->primary_epoch : d->epoch;
    memcpy(du.isr, a.isr, a.n_isr * sizeof(*a.isr));
    du.n_isr = a.n_isr;
    du.applied_lsn = rs.applied_lsn;
    /* The pending groups (`rp`) are not kept yet: the ISR is taken to
     * hold the applied LSN, as a first assignment does. */
    du.commit_lsn = rs.applied_lsn;
    du.sealed_epoch = rs.sealed_epoch;
    if (rs.state == PS_RS_LEARNING && du.role == PS_RCORE_SECONDARY) {
        /* A copy cut short by the restart: no copy (§3.3). */
        du.role = PS_RCORE_LEARNER;
        du.applied_lsn = du.commit_lsn = 0;
    }
    rc = ps_rcore_load(rp->core, &du, uv_now(ps->loop), &rp->out);
    if (rc != 0) {
        return rc;
    }
    if (du.applied_lsn != 0) {
        ps__rr_history(rp, d->id, &rs);
    }
    ps__rr_new(rp, d, a.n_isr, du.role == PS_RCORE_PRIMARY, rs.applied_lsn);
    rt_log(RT_LOG_INFO,
           "range %" PRIu64 ": restored as %s at epoch %" PRIu64
           " (sealed %" PRIu64 "), LSN %" PRIu64,
           d->id, ps_rcore_role_name(du.role), du.epoch, du.sealed_epoch,
           du.applied_lsn);
    return 0;
}

/* The core's configuration of @d; 0, or RT_EINVAL (too many replicas). */
static int ps__conf(const Rt__Range *d, struct rt_repl_conf *c)
{
    struct ps_rcore_assignment a;
    memset(c, 0, sizeof(*c));
    if (d->n_replicas > RT_REPL_MAX_REPLICAS || ps__assignment(d, &a) != 0) {
        return RT_EINVAL;
    }
    c->range_id = d->id;
    c->epoch = d->epoch;
    c->primary_id = d->server_id;
    c->primary_epoch = d->primary_epoch ? d->primary_epoch : d->epoch;
    for (size_t i = 0; i < d->n_replicas; i++) {
        c->members[i].server_id = d->replicas[i]->server_id;
        c->members[i].role = (enum rt_repl_role)d->replicas[i]->role;
    }
    c->n_members = d->n_replicas;
    memcpy(c->isr, a.isr, a.n_isr * sizeof(*a.isr));
    c->n_isr = a.n_isr;
    c->rf = d->rf;
    c->min_insync = d->min_insync;
    c->seal_epoch = d->seal_epoch;
    c->seal_kind = (enum rt_repl_seal_kind)d->seal_kind;
    c->seal_to = d->seal_to;
    return 0;
}

/* Feeds the core @d, a new configuration of @rr (ASSIGN: promotion,
 * step-down, new ISR, cancel, confirmation after a restart) and follows
 * the role it took. Returns 0 or the core's refusal (nothing changed). */
static int ps__conf_apply(struct ps_repl *rp,
                          struct ps__rrange *rr,
                          const Rt__Range *d,
                          uint64_t now)
{
    struct rt_repl_msg m = {.kind = RT_REPL_MSG_ASSIGN};
    struct ps_rcore_range_info info;
    size_t from = rp->out.n;
    int rc = ps__conf(d, &m.u.assign);
    if (rc != 0) {
        return rc;
    }
    struct rt_repl_event ev = {
        .kind = RT_REPL_EV_MSG, .now_ms = now, .peer = 0, .msg = &m};
    ps_rcore_step(rp->core, &ev, &rp->out);
    rc = RT_ENOTFOUND;
    for (size_t i = from; i < rp->out.n; i++) {
        const struct rt_repl_action *act = &rp->out.v[i];
        if (act->kind == RT_REPL_ACT_SEND &&
            act->msg.kind == RT_REPL_MSG_ASSIGN_RESP &&
            act->msg.u.assign_resp.range_id == d->id) {
            rc = act->msg.u.assign_resp.code;
        }
    }
    if (rc != 0) {
        return rc;
    }
    if (ps_rcore_range_get(rp->core, d->id, &info) != 0) {
        /* Dropped: the configuration no longer names this server. */
        ps__rr_forget(rp, rr);
        return 0;
    }
    rr->epoch = d->epoch;
    rr->primary_epoch = m.u.assign.primary_epoch;
    rr->primary_id = d->server_id;
    rr->min_insync = d->min_insync;
    rr->n_isr = m.u.assign.n_isr;
    if ((info.role == PS_RCORE_PRIMARY) != rr->primary) {
        rt_log(RT_LOG_INFO,
               "range %" PRIu64 ": %s at epoch %" PRIu64 " (LSN %" PRIu64 ")",
               rr->id,
               info.role == PS_RCORE_PRIMARY ? "promoted to primary"
                                             : "stepped down to secondary",
               d->epoch, info.applied_lsn);
    }
    ps__rr_capture(rp, rr, info.role == PS_RCORE_PRIMARY, info.last_lsn);
    ps__rr_persist(rp, rr);
    return 0;
}

static int ps__rr_bounds_same(const struct ps__rrange *rr, const Rt__Range *d)
{
    const char *high = ps_range_pb_high(d);
    if (strcmp(rr->low, d->low ? d->low : "") != 0 ||
        (rr->high == NULL) != (high == NULL)) {
        return 0;
    }
    return high == NULL || strcmp(rr->high, high) == 0;
}

/* 1 when @d names this server in a replica set of more than one. */
static int ps__replicated(const struct ps_server *ps, const Rt__Range *d)
{
    if (d->n_replicas < 2) {
        return 0;
    }
    for (size_t i = 0; i < d->n_replicas; i++) {
        if (d->replicas[i]->server_id == ps->server_id) {
            return 1;
        }
    }
    return 0;
}

/* Follows @rr's configuration @d (as the core took it) in the lease
 * structs: the granter's view of its primary, and, on its primary, the
 * lease set = the ISR secondaries of the applied assignment (a member
 * removed stays in it until that assignment is applied here, §6.2). */
static void ps__lease_sync(struct ps_repl *rp,
                           struct ps__rrange *rr,
                           const Rt__Range *d)
{
    struct ps_rcore_assignment a;
    if (rp->granter == NULL) {
        return;
    }
    /* RT_ESTALE: an older view than the granter's; it keeps its own. */
    (void)ps_lease_granter_set_range(rp->granter, rr->id, rr->primary_id,
                                     rr->epoch);
    if (!rr->primary || ps__assignment(d, &a) != 0) {
        (void)ps_lease_holder_drop_range(rp->holder, rr->id);
        rr->lease_held = rr->nolease = 0;
        return;
    }
    if (ps_lease_holder_set_range(rp->holder, rr->id, a.isr, a.n_isr) != 0) {
        (void)ps_lease_holder_drop_range(rp->holder, rr->id);
    }
}

/* A restarted primary's range (§7.1): its lease set is the ISR of @d and
 * every SupportReq releases it until its failover's assignment. */
static void ps__lease_restart_release(struct ps_repl *rp,
                                      struct ps__rrange *rr,
                                      const Rt__Range *d)
{
    struct ps_rcore_assignment a;
    if (rp->holder == NULL || rr->restart_released ||
        ps__assignment(d, &a) != 0 ||
        ps_lease_holder_set_range(rp->holder, rr->id, a.isr, a.n_isr) != 0) {
        return;
    }
    (void)ps_lease_holder_release(rp->holder, rr->id);
    rr->restart_released = 1;
    rr->lease_held = rr->nolease = 0;
}

/* Peers' incarnations, for the granter (an unknown one is refused). */
static void ps__lease_peers(struct ps_repl *rp,
                            Rt__Server *const *peers,
                            size_t n_peers)
{
    for (size_t i = 0; rp->granter != NULL && i < n_peers; i++) {
        struct ps__rpeer *p = ps__peer_find(rp, peers[i]->id);
        if (peers[i]->incarnation.len > 0 &&
            ps_lease_granter_peer(rp->granter, peers[i]->id,
                                  peers[i]->incarnation.data,
                                  peers[i]->incarnation.len) == 0 &&
            p != NULL) {
            p->inc_from_master = 1;
        }
    }
}

static void ps__support_kick(struct ps_repl *rp);

int ps_repl_assigned(struct ps_server *ps,
                     Rt__Range *const *v,
                     size_t n,
                     Rt__Server *const *peers,
                     size_t n_peers)
{
    struct ps_repl *rp = ps->repl;
    uint64_t now;
    int refused = 0;
    if (rp == NULL || rp->closing || ps__core_ensure(rp) != 0) {
        return 0;
    }
    now = uv_now(ps->loop);
    for (size_t i = 0; i < n_peers; i++) {
        if (peers[i]->id != ps->server_id && peers[i]->addr &&
            *peers[i]->addr) {
            ps__peer_set(rp, peers[i]->id, peers[i]->addr);
        }
    }
    ps__lease_peers(rp, peers, n_peers);
    for (size_t i = 0; i < rp->n_ranges; i++) {
        rp->ranges[i]->seen = 0;
    }
    for (size_t i = 0; i < n; i++) {
        const Rt__Range *d = v[i];
        struct ps__rrange *rr;
        struct ps_rcore_range_info info;
        int rc;
        if (!ps__replicated(ps, d)) {
            continue;
        }
        rr = ps__rr_find(rp, d->id);
        if (rr != NULL &&
            (rr->table_id != d->table_id || !ps__rr_bounds_same(rr, d))) {
            /* Same id, other bounds (the master never does this: a split
             * or merge makes new ids): start over at the durable LSN,
             * with the capture over the new bounds. */
            ps__rr_forget(rp, rr);
            rr = NULL;
        }
        if (rr == NULL) {
            ps__rr_create(rp, d);
            if ((rr = ps__rr_find(rp, d->id)) != NULL) {
                ps__lease_sync(rp, rr, d);
            }
            continue;
        }
        rr->seen = 1;
        if (d->epoch == rr->epoch && d->server_id == rr->primary_id &&
            !(ps_rcore_range_get(rp->core, d->id, &info) == 0 &&
              info.role == PS_RCORE_PRIMARY &&
              info.state == PS_RPRI_ACTIVATING)) {
            continue; /* unchanged (a primary waiting for it: not) */
        }
        rc = ps__conf_apply(rp, rr, d, now);
        if (rc == 0) {
            ps__lease_sync(rp, rr, d);
            if (rr->restart_released && rp->holder != NULL) {
                /* Failed over (to me or away): support counts anew. */
                (void)ps_lease_holder_resume(rp->holder, rr->id);
                rr->restart_released = 0;
            }
        }
        if (rc == RT_ENOTPRIMARY) {
            /* A restarted primary: its heartbeats ask for the failover.
             * Its lease is released so that the secondaries seal without
             * waiting out the support they gave its dead predecessor. */
            ps__lease_restart_release(rp, rr, d);
            rt_log(RT_LOG_INFO,
                   "range %" PRIu64
                   ": restarted as its primary at epoch %" PRIu64
                   "; waiting to be failed over",
                   d->id, d->epoch);
            rc = 0;
        }
        if (rc != 0) {
            /* Kept as it was; the master sends it again. The generation
             * and ISR are logged: a refusal repeats every resend, and
             * which rule refused shows only against the core's state. */
            char isr[96];
            size_t off = 0;
            isr[0] = '\0';
            for (size_t j = 0; j < d->n_isr && off < sizeof(isr); j++) {
                int w = snprintf(isr + off, sizeof(isr) - off, "%s%" PRIu64,
                                 j ? "," : "", d->isr[j]);
                off += w > 0 ? (size_t)w : 0;
            }
            rt_log(RT_LOG_WARN,
                   "range %" PRIu64 ": configuration at epoch %" PRIu64
                   " (primary %" PRIu64 ", primary_epoch %" PRIu64
                   ", ISR [%s]; here epoch %" PRIu64 ") refused: %s",
                   d->id, d->epoch, d->server_id, d->primary_epoch, isr,
                   rr->epoch, rt_strerror(rc));
            if (refused == 0) {
                refused = rc;
            }
        }
    }
    for (size_t i = rp->n_ranges; i-- > 0;) {
        if (!rp->ranges[i]->seen) {
            ps__rr_forget(rp, rp->ranges[i]);
        }
    }
    ps__repl_dispatch(rp);
    ps__support_kick(rp);
    return refused;
}

void ps_repl_restore(struct ps_server *ps)
{
    struct rt_buf blob = RT_BUF_INIT;
    Rt__Assignment *a;
    if (ps->server_id == 0 || ps->ranges.n == 0) {
        return;
    }
    if (ps->repl == NULL || ps__core_ensure(ps->repl) != 0) {
        return;
    }
    ps_ranges_pack(&ps->ranges, &blob);
    a = rt__assignment__unpack(NULL, blob.len, blob.data);
    for (size_t i = 0; a != NULL && i < a->n_ranges; i++) {
        const Rt__Range *d = a->ranges[i];
        int rc;
        if (!ps__replicated(ps, d) || ps__rr_find(ps->repl, d->id) != NULL) {
            continue;
        }
        rc = ps__rr_restore(ps->repl, d);
        if (rc == 0 && ps__rr_find(ps->repl, d->id) != NULL) {
            ps__lease_sync(ps->repl, ps__rr_find(ps->repl, d->id), d);
        }
        if (rc != 0) {
            rt_log(RT_LOG_WARN,
                   "range %" PRIu64
                   ": not restored (%s); waiting for the "
                   "master's assignment",
                   d->id, rt_strerror(rc));
        }
    }
    if (a != NULL) {
        rt__assignment__free_unpacked(a, NULL);
    }
    rt_buf_free(&blob);
    ps__repl_dispatch(ps->repl);
}

/* Client requests */

int ps_repl_route(struct ps_server *ps,
                  uint64_t range_id,
                  uint64_t epoch,
                  uint64_t *served_epoch)
{
    struct ps_repl *rp = ps->repl;
    struct ps__rrange *rr = NULL;
    struct ps_rcore_range_info info;
    if (rp == NULL || rp->n_ranges == 0 ||
        (rr = ps__rr_find(rp, range_id)) == NULL) {
        /* A range assigned with replicas that the core does not follow
         * (this server out of its ISR, or a refused assignment) is never
         * served as if it were RF 1. */
        const struct ps_range *r = ps_ranges_find(&ps->ranges, range_id);
        return r != NULL && r->n_replicas > 1 ? RT_ENOTPRIMARY : 1;
    }
    if (rr->held ||
        (rr->primary && ps_rcore_range_get(rp->core, range_id, &info) == 0 &&
         info.role == PS_RCORE_PRIMARY && info.state == PS_RPRI_FROZEN)) {
        return RT_EBUSY; /* a transfer's short window (§9.3): 503 at once */
    }
    if (!rr->primary || ps_rcore_range_get(rp->core, range_id, &info) != 0 ||
        !ps_rcore_info_serving(&info)) {
        return RT_ENOTPRIMARY;
    }
    if (epoch < rr->primary_epoch || epoch > rr->epoch) {
        return RT_ESTALE;
    }
    *served_epoch = rr->epoch;
    return 0;
}

int ps_repl_write_admit(struct ps_server *ps, uint64_t range_id)
{
    struct ps__rrange *rr = ps->repl ? ps__rr_find(ps->repl, range_id) : NULL;
    if (rr != NULL && rr->n_isr < rr->min_insync) {
        return RT_EBUSY;
    }
    /* NOLEASE (§6.4): checked now, not only at the last support round. */
    if (rr != NULL && rr->lease_held && ps->repl->holder != NULL &&
        ps_lease_holder_expiring(ps->repl->holder, range_id, ps__lease_now())) {
        return RT_EBUSY;
    }
    return 0;
}

size_t ps_repl_held_ops(const struct ps_server *ps)
{
    return ps->repl != NULL ? ps->repl->held_ops : 0;
}

void ps_repl_note_txn(struct ps_server *ps, uint64_t txn_id)
{
    if (ps->repl != NULL && txn_id > ps->repl->max_txn) {
        ps->repl->max_txn = txn_id;
    }
}

/* Moves the records of transaction @txn_id out of @rr's capture into
 * @grp; older ones (none expected: every change of the range has an LSN)
 * are dropped, later ones kept for their own group. Returns 0, or
 * RT_EIO when the capture lost records. */
static int ps__take_group(struct ps_server *ps,
                          struct ps__rrange *rr,
                          uint64_t txn_id,
                          struct rt_buf *grp)
{
    struct rt_buf keep = RT_BUF_INIT;
    struct ps_change c;
    size_t off = 0;
    int overflow = 0;

    ps_writer_log_take(ps->writer, &rr->log, &rr->pend, &overflow);
    if (overflow) {
        return RT_EIO;
    }
    while (ps_change_next(rr->pend.data, rr->pend.len, &off, &c) == 1) {
        if (c.txn_id == txn_id) {
            ps_change_append(grp, c.txn_id, c.key, c.kn, c.val, c.vn,
                             c.deleted);
        } else if (c.txn_id > txn_id) {
            ps_change_append(&keep, c.txn_id, c.key, c.kn, c.val, c.vn,
                             c.deleted);
        }
    }
    rt_buf_free(&rr->pend);
    rr->pend = keep;
    return 0;
}

void ps_repl_shipped(void *arg, const struct ps_shipped *v, size_t n)
{
    struct ps_server *ps = arg;
    struct ps_repl *rp = ps->repl;

    for (size_t i = 0; rp != NULL && !rp->closing && i < n; i++) {
        struct ps__rrange *rr = ps__rr_find(rp, v[i].range_id);
        struct rt_buf grp = RT_BUF_INIT;
        if (rr == NULL || !rr->primary || v[i].lsn <= rr->last_fed) {
            continue;
        }
        if (ps__take_group(ps, rr, v[i].txn_id, &grp) != 0) {
            rt_log(RT_LOG_ERROR,
                   "range %" PRIu64 ": capture overflowed; forgetting it",
                   rr->id);
            ps__rr_forget(rp, rr);
            continue;
        }
        struct rt_repl_event ev = {.kind = RT_REPL_EV_GROUP,
                                   .now_ms = uv_now(ps->loop),
                                   .range_id = v[i].range_id,
                                   .lsn = v[i].lsn,
                                   .records = grp.data,
                                   .records_len = grp.len};
        ps__keylog_feed(rp, rr, v[i].lsn, v[i].txn_id, grp.data, grp.len);
        ps_lsn_ring_push(&rr->ring, v[i].txn_id, v[i].lsn);
        rr->last_fed = v[i].lsn;
        int rc = ps_rcore_step(rp->core, &ev, &rp->out);
        rt_buf_free(&grp);
        if (rc != 0) {
            rt_log(RT_LOG_ERROR,
                   "range %" PRIu64 ": group LSN %" PRIu64 " not shipped: %s",
                   rr->id, v[i].lsn, rt_strerror(rc));
        }
    }
    if (rp != NULL) {
        ps__repl_dispatch(rp);
    }
}

void ps_repl_write_done(struct ps_server *ps,
                        struct ps_repl_wait *w,
                        const struct ps_write *pw)
{
    struct ps_repl *rp = ps->repl;
    struct ps__rrange *rr = rp ? ps__rr_find(rp, pw->range_id) : NULL;
    struct rt_buf grp = RT_BUF_INIT;
    uint64_t req = (uint64_t)(uintptr_t)w;
    int rc;

    w->range_id = pw->range_id;
    w->is_read = 0;
    w->ops = pw->n_ops;
    if (rr == NULL || rp->closing || (!rr->primary && pw->lsn == 0)) {
        w->cb(w, RT_ETIMEDOUT);
        return;
    }
    /* A group of mine that became durable after I stepped down still goes
     * to the core: it is applied here (its GROUP may have counted it in
     * flight already, which keeps catch-up probes busy until it lands);
     * the core answers its writes RT_ETIMEDOUT (outcome unknown). */
    struct rt_repl_event ev = {.kind = RT_REPL_EV_DISK_DONE,
                               .now_ms = uv_now(ps->loop),
                               .range_id = pw->range_id,
                               .lsn = pw->lsn,
                               .req_ids = &req,
                               .n_req_ids = 1};
    if (rr->primary && pw->lsn > rr->last_fed) {
        if (ps__take_group(ps, rr, pw->txn_id, &grp) != 0) {
            rt_log(RT_LOG_ERROR,
                   "range %" PRIu64 ": capture overflowed; forgetting it",
                   rr->id);
            ps__rr_forget(rp, rr);
            w->cb(w, RT_ETIMEDOUT);
            ps__repl_dispatch(rp);
            return;
        }
        ev.records = grp.data;
        ev.records_len = grp.len;
        ps__keylog_feed(rp, rr, pw->lsn, pw->txn_id, grp.data, grp.len);
        ps_lsn_ring_push(&rr->ring, pw->txn_id, pw->lsn);
        rr->last_fed = pw->lsn;
    }
    ps__wait_link(rp, w);
    rc = ps_rcore_step(rp->core, &ev, &rp->out);
    rt_buf_free(&grp);
    if (rc != 0) {
        /* Not kept by the core (an LSN out of order): outcome unknown. */
        rt_log(RT_LOG_ERROR, "range %" PRIu64 ": group LSN %" PRIu64 ": %s",
               rr->id, pw->lsn, rt_strerror(rc));
        ps__wait_fire(rp, w, RT_ETIMEDOUT);
    }
    ps__repl_dispatch(rp);
}

int ps_repl_read_wait(struct ps_server *ps,
                      struct ps_repl_wait *w,
                      uint64_t range_id,
                      uint64_t txn_id)
{
    struct ps_repl *rp = ps->repl;
    struct ps__rrange *rr = rp ? ps__rr_find(rp, range_id) : NULL;
    uint64_t lsn_t;

    if (rr == NULL || !rr->primary || rp->closing) {
        return RT_ENOTPRIMARY;
    }
    if (txn_id <= rp->max_txn) {
        lsn_t = ps_lsn_ring_at(&rr->ring, txn_id);
    } else {
        /* The read saw a commit the loop has not been told of: the
         * range's applied LSN now bounds lsn_T from above. */
        struct ps_rstate rs;
        int rc = ps_store_repl_get(ps->store, range_id, &rs);
        if (rc != 0 && rc != RT_ENOTFOUND) {
            return rc;
        }
        lsn_t = rc == 0 ? rs.applied_lsn : 0;
    }
    return ps_repl_lsn_wait(ps, w, range_id, lsn_t);
}

int ps_repl_lsn_wait(struct ps_server *ps,
                     struct ps_repl_wait *w,
                     uint64_t range_id,
                     uint64_t lsn_t)
{
    struct ps_repl *rp = ps->repl;
    struct ps__rrange *rr = rp ? ps__rr_find(rp, range_id) : NULL;
    struct ps_rcore_range_info info;

    if (rr == NULL || !rr->primary || rp->closing ||
        ps_rcore_range_get(rp->core, range_id, &info) != 0 ||
        !ps_rcore_info_serving(&info)) {
        return RT_ENOTPRIMARY;
    }
    if (info.commit_lsn >= lsn_t) {
        return ps__lease_ok(rp, range_id) ? 0 : RT_ENOTPRIMARY;
    }
    w->range_id = range_id;
    w->lsn = lsn_t;
    w->is_read = 1;
    w->ops = 0;
    w->deadline_ms =
        uv_now(ps->loop) +
        (ps->cfg.read_wait_ms ? ps->cfg.read_wait_ms : PS_REPL_READ_WAIT_MS);
    ps__wait_link(rp, w);
    if (!uv_is_active((uv_handle_t *)&rp->read_timer)) {
        uv_timer_start(&rp->read_timer, ps__read_timer_cb, 10, 10);
    }
    return 1;
}

/* Primary: the reply to a REPL_APPEND call. */
static void ps__append_reply(int status,
                             const uint8_t *body,
                             size_t len,
                             void *arg)
{
    struct ps__acall *call = arg;
    struct ps_server *ps = call->ps;
    uint64_t peer = call->peer;
    Rt__ReplAck *resp;

    free(call);
    if (status == RT_ECANCELED || ps->stopping || ps->repl == NULL ||
        ps->repl->closing) {
        return;
    }
    if (status != 0) {
        rt_log(RT_LOG_DEBUG, "REPL_APPEND to server %" PRIu64 ": %s", peer,
               rt_strerror(status));
        return; /* the core resends */
    }
    resp = rt__repl_ack__unpack(NULL, len, body);
    if (resp == NULL) {
        rt_log(RT_LOG_WARN, "bad ReplAck from server %" PRIu64, peer);
        return;
    }
    for (size_t i = 0; i < resp->n_acks; i++) {
        const Rt__RangeAck *ra = resp->acks[i];
        struct rt_repl_msg m = {.kind = RT_REPL_MSG_ACK};
        m.u.ack = (struct rt_repl_ack){.range_id = ra->range_id,
                                       .code = ra->code,
                                       .applied_lsn = ra->applied_lsn,
                                       .epoch = ra->epoch};
        struct rt_repl_event ev = {.kind = RT_REPL_EV_MSG,
                                   .now_ms = uv_now(ps->loop),
                                   .peer = peer,
                                   .msg = &m};
        ps__repl_step(ps->repl, &ev);
    }
    rt__repl_ack__free_unpacked(resp, NULL);
}

/* Secondary */

/* A group the core handed the writer failed (and the later ones with
 * it: the store refuses gaps): the core forgets the range and follows it
 * again from its durable LSN, so the primary's resend fills it in. */
static void ps__rr_rebuild(struct ps_repl *rp, uint64_t range_id)
{
    struct ps__rrange *rr = ps__rr_find(rp, range_id);
    struct rt_buf blob = RT_BUF_INIT;
    Rt__Assignment *a;
    if (rr == NULL || rr->primary) {
        return;
    }
    ps__rr_forget(rp, rr);
    ps_ranges_pack(&rp->ps->ranges, &blob);
    a = rt__assignment__unpack(NULL, blob.len, blob.data);
    for (size_t i = 0; a != NULL && i < a->n_ranges; i++) {
        if (a->ranges[i]->id == range_id &&
            ps__replicated(rp->ps, a->ranges[i])) {
            ps__rr_create(rp, a->ranges[i]);
        }
    }
    if (a != NULL) {
        rt__assignment__free_unpacked(a, NULL);
    }
    rt_buf_free(&blob);
    ps__repl_dispatch(rp);
}

static void ps__write_job_cb(struct ps_job *job)
{
    struct ps__rwrite *rw = container_of(job, struct ps__rwrite, job);
    struct ps_server *ps = rw->ps;
    struct ps_repl *rp = ps->repl;

    ps_repl_note_txn(ps, job->u.write.txn_id);
    if (job->u.write.status != 0) {
        rt_log(RT_LOG_ERROR,
               "range %" PRIu64 ": applying replicated LSN %" PRIu64
               " failed: %s; following again from the durable LSN",
               rw->range_id, rw->lsn, rt_strerror(job->u.write.status));
        if (rp != NULL && !rp->closing) {
            ps__rr_rebuild(rp, rw->range_id);
        }
    } else if (rp != NULL && !rp->closing) {
        struct rt_repl_event ev = {.kind = RT_REPL_EV_DISK_DONE,
                                   .now_ms = uv_now(ps->loop),
                                   .io_id = rw->io_id,
                                   .range_id = rw->range_id,
                                   .lsn = rw->lsn};
        const struct ps__rrange *rr = ps__rr_find(rp, rw->range_id);
        if (rr != NULL) {
            ps__keylog_feed(rp, rr, rw->lsn, job->u.write.txn_id, rw->recs,
                            rw->recs_len);
        }
        ps__repl_step(rp, &ev);
    }
    ps_write_reset(&job->u.write);
    free(rw->kvs);
    free(rw->recs);
    free(rw);
}

/* The checks the core does not make: CRC32C, then every key inside the
 * range (§4, REPL_APPEND). 0 or the code to NACK with. */
static int ps__group_check(struct ps_repl *rp, Rt__ReplGroup *g)
{
    struct ps__rrange *rr = ps__rr_find(rp, g->range_id);
    struct ps_change c;
    size_t off = 0;
    int rc;
    if (ps__group_crc(g) != g->crc32c) {
        return RT_ECORRUPT;
    }
    if (rr == NULL) {
        return 0; /* the core answers for unknown ranges */
    }
    while ((rc = ps_change_next(g->records.data, g->records.len, &off, &c)) ==
           1) {
        if (!ps__key_in(&rr->klo, &rr->khi, c.key, c.kn)) {
            return RT_EINVAL;
        }
    }
    return rc == 0 ? 0 : RT_EINVAL;
}

void ps_repl_on_append(struct ps_server *ps,
                       struct rt_rpc_conn *conn,
                       uint64_t id,
                       const uint8_t *body,
                       size_t len)
{
    const uint32_t method = RT__METHOD__REPL_APPEND;
    struct ps_repl *rp = ps->repl;
    Rt__ReplAppend *msg;
    struct ps__areq *q;

    if (rp == NULL || rp->closing) {
        rt_rpc_reply_err(conn, id, method, RT_EBUSY, NULL);
        return;
    }
    if (rp->core == NULL) {
        rt_rpc_reply_err(conn, id, method, RT_ESTALE, "no replicated ranges");
        return;
    }
    msg = rt__repl_append__unpack(NULL, len, body);
    if (msg == NULL) {
        rt_rpc_reply_err(conn, id, method, RT_EINVAL, "bad ReplAppend");
        return;
    }
    q = rt_xcalloc(1, sizeof(*q) + msg->n_groups * sizeof(q->items[0]));
    q->conn = conn;
    q->id = id;
    q->n = msg->n_groups;
    rt_rpc_conn_ref(conn);
    q->next = rp->areqs;
    rp->areqs = q;
    for (size_t i = 0; i < msg->n_groups; i++) {
        Rt__ReplGroup *g = msg->groups[i];
        struct ps__aitem *it = &q->items[i];
        int rc = ps__group_check(rp, g);
        it->range_id = g->range_id;
        it->lsn = g->lsn;
        if (rc != 0) {
            struct ps_rcore_range_info info;
            struct rt_repl_ack nack = {.range_id = g->range_id, .code = rc};
            if (ps_rcore_range_get(rp->core, g->range_id, &info) == 0) {
                nack.applied_lsn = info.applied_lsn;
                nack.epoch = info.epoch;
            }
            rt_log(RT_LOG_WARN,
                   "range %" PRIu64 ": append LSN %" PRIu64
                   " from server %" PRIu64 " refused: %s",
                   g->range_id, g->lsn, msg->from_server, rt_strerror(rc));
            ps__item_settle(q, it, &nack);
            continue;
        }
        struct ps__rrange *rr = ps__rr_find(rp, g->range_id);
        uint64_t epoch = g->epoch;
        /* Same primary generation, older configuration: the master
         * changed the ISR and told me first. The design's rule (epoch >=
         * mine, §4) would fence the primary over its own ISR change; only
         * an older generation is fenced. */
        if (rr != NULL && !rr->primary && g->primary_epoch != 0 &&
            g->primary_epoch == rr->primary_epoch && epoch < rr->epoch) {
            epoch = rr->epoch;
        }
        struct rt_repl_msg m = {.kind = RT_REPL_MSG_APPEND};
        m.u.append = (struct rt_repl_append){
            .range_id = g->range_id,
            .epoch = epoch,
            .lsn = g->lsn,
            .commit_lsn = g->commit_lsn,
            .records = g->records.data,
            .records_len = g->records.len,
            .gen = g->gen,
        };
        struct rt_repl_event ev = {.kind = RT_REPL_EV_MSG,
                                   .now_ms = uv_now(ps->loop),
                                   .peer = msg->from_server,
                                   .msg = &m};
        rp->cur = it;
        ps_rcore_step(rp->core, &ev, &rp->out);
        ps__repl_dispatch(rp);
        rp->cur = NULL;
    }
    rt__repl_append__free_unpacked(msg, NULL);
    ps__areqs_flush(rp);
}

void ps_repl_on_seal(struct ps_server *ps,
                     struct rt_rpc_conn *conn,
                     uint64_t id,
                     const uint8_t *body,
                     size_t len)
{
    const uint32_t method = RT__METHOD__SEAL;
    struct ps_repl *rp = ps->repl;
    Rt__SealReq *req;
    struct ps__sreq *q;

    if (rp == NULL || rp->closing) {
        rt_rpc_reply_err(conn, id, method, RT_EBUSY, NULL);
        return;
    }
    req = rt__seal_req__unpack(NULL, len, body);
    if (req == NULL) {
        rt_rpc_reply_err(conn, id, method, RT_EINVAL, "bad SealReq");
        return;
    }
    if (rp->core == NULL) {
        rt_rpc_reply_err(conn, id, method, RT_ENOTFOUND,
                         "no replicated ranges");
        rt__seal_req__free_unpacked(req, NULL);
        return;
    }
    /* §4: a master older than one already heard from (0: not said). */
    if (ps_fence_admit(ps, conn, id, method, req->master_term) != 0) {
        rt__seal_req__free_unpacked(req, NULL);
        return;
    }
    /* §6.2: S's promise. Busy until L after the last grant for the range
     * (or to its primary, or the restart grace), unless released; a SEAL
     * the guard lets through withdraws the range from its primary now,
     * before sealed_epoch is persisted and answered. A SEAL at or below
     * the epoch known here is left to the core (it refuses it). */
    struct ps__rrange *srr = ps__rr_find(rp, req->range_id);
    struct ps_rcore_range_info own;
    /* A restarted primary sealed for its own failover granted nothing
     * for the range: it led it (§5.3 "As built"); its restart grace is for
     * the ranges it followed. */
    bool own_restart = ps_rcore_range_get(rp->core, req->range_id, &own) == 0 &&
                       own.restarted && req->old_primary == ps->server_id;
    if (rp->granter != NULL && srr != NULL && req->new_epoch > srr->epoch &&
        !own_restart) {
        uint64_t retry = 0;
        int grc =
            ps_lease_granter_seal(rp->granter, req->range_id, req->new_epoch,
                                  ps__lease_now(), &retry);
        if (grc == RT_EBUSY) {
            Rt__SealResp resp = RT__SEAL_RESP__INIT;
            struct ps_rcore_range_info info;
            if (ps_rcore_range_get(rp->core, req->range_id, &info) == 0) {
                resp.applied_epoch = info.epoch;
                resp.applied_lsn = info.applied_lsn;
            }
            resp.retry_ms =
                retry > 0 ? (retry > UINT32_MAX ? UINT32_MAX : (uint32_t)retry)
                          : 1;
            rt_rpc_reply_pb(conn, id, method, 0, &resp.base);
            rt__seal_req__free_unpacked(req, NULL);
            return;
        }
    }
    q = rt_xcalloc(1, sizeof(*q));
    q->conn = conn;
    q->id = id;
    q->token = PS__SEAL_TOKEN | ++rp->next_token;
    q->range_id = req->range_id;
    q->new_epoch = req->new_epoch;
    rt_rpc_conn_ref(conn);
    q->next = rp->sreqs;
    rp->sreqs = q;
    struct rt_repl_msg m = {.kind = RT_REPL_MSG_SEAL};
    m.u.seal = (struct rt_repl_seal){.range_id = req->range_id,
                                     .old_epoch = req->old_epoch,
                                     .new_epoch = req->new_epoch,
                                     .old_primary = req->old_primary};
    struct rt_repl_event ev = {.kind = RT_REPL_EV_MSG,
                               .now_ms = uv_now(ps->loop),
                               .peer = q->token,
                               .msg = &m};
    rt__seal_req__free_unpacked(req, NULL);
    /* Answered in the dispatch (refusals, busy), or once sealed_epoch is
     * durable (ps__rstate_job_cb), or with the first such SEAL. */
    ps__repl_step(rp, &ev);
}

/* Leases: support (§6.2) */

static void ps__nolease_check(struct ps_repl *rp);

/* Primary: a peer's SupportResp (or the call's failure: no support
 * counted, the next round asks again). */
static void ps__support_reply(int status,
                              const uint8_t *body,
                              size_t len,
                              void *arg)
{
    struct ps__acall *call = arg;
    struct ps_server *ps = call->ps;
    uint64_t peer = call->peer, seq = call->seq;
    Rt__SupportResp *resp;

    free(call);
    if (status != 0 || ps->stopping || ps->repl == NULL || ps->repl->closing ||
        ps->repl->holder == NULL) {
        return;
    }
    resp = rt__support_resp__unpack(NULL, len, body);
    if (resp == NULL) {
        return;
    }
    if (resp->seq == seq) {
        struct ps__rpeer *p = ps__peer_find(ps->repl, peer);
        if (p != NULL && seq > p->resp_seq) {
            p->resp_seq = seq;
        }
        (void)ps_lease_holder_on_resp(ps->repl->holder, peer, seq,
                                      resp->granted, resp->withdrawn,
                                      resp->n_withdrawn);
        ps__nolease_check(ps->repl);
    }
    rt__support_resp__free_unpacked(resp, NULL);
}

/* §6.4 for every primary range: a lease that held and now expires within
 * PS_LEASE_NOLEASE_MS makes the range NOLEASE (reads RT_ENOTPRIMARY by
 * the lease check, new writes RT_EBUSY at admission) and its silent
 * members are proposed for removal through the core's ISR_CHANGE; the
 * range leaves NOLEASE when support returns or the ISR changes. */
static void ps__nolease_check(struct ps_repl *rp)
{
    uint64_t now = ps__lease_now();
    for (size_t i = 0; i < rp->n_ranges; i++) {
        struct ps__rrange *rr = rp->ranges[i];
        uint64_t silent[PS_LEASE_MAX_MEMBERS];
        size_t n = 0;
        if (!rr->primary) {
            continue;
        }
        if (ps_lease_holder_ok(rp->holder, rr->id, now)) {
            rr->lease_held = 1;
        }
        int lapsed =
            rr->lease_held && ps_lease_holder_expiring(rp->holder, rr->id, now);
        if (lapsed) {
            n = ps_lease_holder_silent(rp->holder, rr->id, now, silent,
                                       PS_LEASE_MAX_MEMBERS);
            if (!rr->nolease) {
                rt_log(RT_LOG_WARN,
                       "range %" PRIu64
                       ": read lease lapsing (NOLEASE), %zu member(s) "
                       "silent",
                       rr->id, n);
            }
        } else if (rr->nolease) {
            rt_log(RT_LOG_INFO, "range %" PRIu64 ": read lease back", rr->id);
        }
        rr->nolease = lapsed;
        (void)ps_rcore_set_silent(rp->core, rr->id, silent, n);
    }
}

/* One SupportReq to every peer whose link is up. The send time is read
 * before the request leaves (ps_lease_holder_send). */
/* §6.4 disk-stall self-fencing: a commit running for
 * cfg.stall_timeout_ms means the disk is stuck. The server stops asking
 * and granting support, so its primaries lose their leases (no read, no
 * write) and its secondaries may be sealed, and its heartbeat says
 * `stalled` so the master fails its primaries over at once. It recovers
 * when the commit completes. */
static void ps__stall_check(struct ps_repl *rp)
{
    struct ps_server *ps = rp->ps;
    uint64_t limit =
        ps->cfg.stall_timeout_ms ? ps->cfg.stall_timeout_ms : PS_REPL_STALL_MS;
    uint64_t busy = ps->writer ? ps_writer_busy_ms(ps->writer) : 0;
    int stalled = busy >= limit;
    if (stalled == rp->stalled) {
        return;
    }
    rp->stalled = stalled;
    if (stalled) {
        rt_log(RT_LOG_ERROR,
               "the writer has been in one commit for %" PRIu64
               " ms: fencing this server (no lease support) until it ends",
               busy);
    } else {
        rt_log(RT_LOG_WARN,
               "the writer finished its stalled commit: "
               "lease support resumes");
    }
    if (rp->granter != NULL) {
        ps_lease_granter_set_fenced(rp->granter, rp->fenced || rp->stalled);
    }
}

int ps_repl_stalled(struct ps_server *ps)
{
    return ps->repl != NULL && ps->repl->stalled;
}

static void ps__support_round(struct ps_repl *rp)
{
    struct ps_server *ps = rp->ps;
    if (!rp->closing) {
        ps__stall_check(rp);
    }
    if (rp->closing || rp->holder == NULL || ps->server_id == 0 || rp->fenced ||
        rp->stalled) {
        return;
    }
    ps__nolease_check(rp);
    for (size_t i = 0; i < rp->n_peers; i++) {
        struct ps__rpeer *p = rp->peers[i];
        Rt__SupportReq msg = RT__SUPPORT_REQ__INIT;
        struct ps_lease_req lr;
        struct ps__acall *call;
        if (p->cli == NULL) {
            continue;
        }
        ps_lease_holder_send(rp->holder, p->id, ps__lease_now(), &lr);
        rp->sent_seq = lr.seq;
        msg.from_server = ps->server_id;
        msg.incarnation.data = ps->incarnation;
        msg.incarnation.len = sizeof(ps->incarnation);
        msg.seq = lr.seq;
        msg.release = (uint64_t *)lr.release;
        msg.n_release = lr.n_release;
        call = rt_xcalloc(1, sizeof(*call));
        call->ps = ps;
        call->peer = p->id;
        call->seq = lr.seq;
        if (rt_rpc_call_pb(rt_rpc_client_conn(p->cli), RT__METHOD__REPL_SUPPORT,
                           &msg.base, PS_REPL_CALL_MS, ps__support_reply,
                           call) != 0) {
            free(call);
        }
    }
}

static void ps__support_timer_cb(uv_timer_t *t)
{
    struct ps_repl *rp = container_of(t, struct ps_repl, support_timer);
    ps__support_round(rp);
}

/* (Re)starts the support rounds at once: a new primary range must win
 * its lease before it can answer reads. */
static void ps__support_kick(struct ps_repl *rp)
{
    uint64_t period =
        rp->ps->cfg.repl_hb_ms ? rp->ps->cfg.repl_hb_ms : PS_REPL_HB_MS;
    if (!rp->closing && rp->holder != NULL) {
        uv_timer_start(&rp->support_timer, ps__support_timer_cb, 0, period);
    }
}

void ps_repl_on_support(struct ps_server *ps,
                        struct rt_rpc_conn *conn,
                        uint64_t id,
                        const uint8_t *body,
                        size_t len)
{
    const uint32_t method = RT__METHOD__REPL_SUPPORT;
    struct ps_repl *rp = ps->repl;
    Rt__SupportReq *req;
    Rt__SupportResp resp = RT__SUPPORT_RESP__INIT;
    struct ps_lease_answer ans = {0};

    req = rt__support_req__unpack(NULL, len, body);
    if (req == NULL) {
        rt_rpc_reply_err(conn, id, method, RT_EINVAL, "bad SupportReq");
        return;
    }
    resp.seq = req->seq;
    if (rp != NULL && !rp->closing && rp->granter != NULL) {
        /* A peer the master names without an incarnation (the master
         * does not send them yet): its own is taken, so the check only
         * bites once the master says. */
        struct ps__rpeer *p = ps__peer_find(rp, req->from_server);
        if (p != NULL && !p->inc_from_master) {
            (void)ps_lease_granter_peer(rp->granter, p->id,
                                        req->incarnation.data,
                                        req->incarnation.len);
        }
        /* Recorded before the reply is sent (§6.2). */
        ps_lease_granter_on_support(rp->granter, req->from_server,
                                    req->incarnation.data, req->incarnation.len,
                                    req->release, req->n_release,
                                    ps__lease_now(), &ans);
    }
    resp.granted = ans.granted;
    resp.withdrawn = (uint64_t *)ans.withdrawn;
    resp.n_withdrawn = ans.n_withdrawn;
    rt_rpc_reply_pb(conn, id, method, 0, &resp.base);
    rt__support_req__free_unpacked(req, NULL);
}

uint64_t ps_repl_lease_left(const struct ps_server *ps, uint64_t range_id)
{
    const struct ps_repl *rp = ps->repl;
    uint64_t left;
    if (rp == NULL || rp->holder == NULL) {
        return 0;
    }
    left = ps_lease_holder_remaining(rp->holder, range_id, ps__lease_now());
    return left > UINT32_MAX ? UINT32_MAX : left;
}

void ps_repl_lease_fence(struct ps_server *ps, int fenced)
{
    struct ps_repl *rp = ps->repl;
    if (rp == NULL) {
        return;
    }
    rp->fenced = fenced != 0;
    if (rp->granter != NULL) {
        ps_lease_granter_set_fenced(rp->granter, rp->fenced || rp->stalled);
    }
}

void ps_repl_drop_peer(struct ps_server *ps, uint64_t peer_id)
{
    struct ps__rpeer *p = ps->repl ? ps__peer_find(ps->repl, peer_id) : NULL;
    if (p != NULL && p->cli != NULL) {
        rt_rpc_conn_close(rt_rpc_client_conn(p->cli));
    }
}

/* Replication health per range: on a primary, how far each other
 * replica is behind it (its last LSN minus what the replica acked), ISR
 * and replica-set sizes, whether it holds its read lease, and how many of
 * its ranges have a replica outside the ISR; on a secondary, the groups it
 * accepted and has not made durable yet. */
static void ps__repl_metrics_lag(struct ps_server *ps, struct rt_buf *b)
{
    struct ps_repl *rp = ps->repl;
    size_t under = 0;
    rt_metrics_help(b, "rt_ps_repl_peer_lag_lsn", "gauge",
                    "Primary: its last LSN minus what each other replica "
                    "acked (isr=\"0\": a replica outside the ISR being "
                    "caught up).");
    for (size_t i = 0; i < rp->n_ranges; i++) {
        struct ps_rcore_range_info info;
        if (ps_rcore_range_get(rp->core, rp->ranges[i]->id, &info) != 0 ||
            info.role != PS_RCORE_PRIMARY) {
            continue;
        }
        for (size_t k = 0; k < info.n_isr_peers + info.n_learners; k++) {
            uint64_t acked = info.peer[k].acked;
            rt_buf_printf(b,
                          "rt_ps_repl_peer_lag_lsn{range=\"%" PRIu64
                          "\",peer=\"%" PRIu64 "\",isr=\"%d\"} %" PRIu64 "\n",
                          rp->ranges[i]->id, info.peer[k].id,
                          k<info.n_isr_peers, info.last_lsn> acked
                              ? info.last_lsn - acked
                              : 0);
        }
    }
    rt_metrics_help(b, "rt_ps_repl_isr_size", "gauge",
                    "Primary: replicas in the in-sync set, itself included.");
    for (size_t i = 0; i < rp->n_ranges; i++) {
        struct ps_rcore_range_info info;
        if (ps_rcore_range_get(rp->core, rp->ranges[i]->id, &info) != 0 ||
            info.role != PS_RCORE_PRIMARY) {
            continue;
        }
        rt_buf_printf(b, "rt_ps_repl_isr_size{range=\"%" PRIu64 "\"} %zu\n",
                      rp->ranges[i]->id, info.n_isr_peers + 1);
        under += info.n_learners > 0;
    }
    rt_metrics_help(b, "rt_ps_repl_replicas", "gauge",
                    "Primary: replicas of the range's set, in the ISR or "
                    "being caught up.");
    for (size_t i = 0; i < rp->n_ranges; i++) {
        struct ps_rcore_range_info info;
        if (ps_rcore_range_get(rp->core, rp->ranges[i]->id, &info) != 0 ||
            info.role != PS_RCORE_PRIMARY) {
            continue;
        }
        rt_buf_printf(b, "rt_ps_repl_replicas{range=\"%" PRIu64 "\"} %zu\n",
                      rp->ranges[i]->id,
                      info.n_isr_peers + 1 + info.n_learners);
    }
    rt_metrics_help(b, "rt_ps_repl_under_replicated_ranges", "gauge",
                    "Ranges this server leads with a replica of their set "
                    "outside the ISR.");
    rt_buf_printf(b, "rt_ps_repl_under_replicated_ranges %zu\n", under);
    rt_metrics_help(b, "rt_ps_repl_lease_held", "gauge",
                    "Primary: 1 while it may serve reads locally (its read "
                    "lease, or no other replica to ask), else 0.");
    for (size_t i = 0; i < rp->n_ranges; i++) {
        struct ps_rcore_range_info info;
        if (ps_rcore_range_get(rp->core, rp->ranges[i]->id, &info) != 0 ||
            info.role != PS_RCORE_PRIMARY) {
            continue;
        }
        rt_buf_printf(b, "rt_ps_repl_lease_held{range=\"%" PRIu64 "\"} %d\n",
                      rp->ranges[i]->id,
                      ps_repl_lease_left(ps, rp->ranges[i]->id) > 0);
    }
    rt_metrics_help(b, "rt_ps_repl_behind_lsn", "gauge",
                    "Secondary: groups accepted from the primary and not yet "
                    "durable here.");
    for (size_t i = 0; i < rp->n_ranges; i++) {
        struct ps_rcore_range_info info;
        if (ps_rcore_range_get(rp->core, rp->ranges[i]->id, &info) != 0 ||
            info.role != PS_RCORE_SECONDARY) {
            continue;
        }
        rt_buf_printf(
            b, "rt_ps_repl_behind_lsn{range=\"%" PRIu64 "\"} %" PRIu64 "\n",
            rp->ranges[i]->id,
            info.last_lsn > info.applied_lsn ? info.last_lsn - info.applied_lsn
                                             : 0);
    }
}

void ps_repl_metrics(struct ps_server *ps, struct rt_buf *b)
{
    struct ps_repl *rp = ps->repl;
    static const struct
    {
        const char *name, *help;
    } per_range[] = {
        {"rt_ps_repl_role", "Replica role: 1 primary, 2 secondary."},
        {"rt_ps_repl_last_lsn", "Last LSN written or accepted here."},
        {"rt_ps_repl_applied_lsn", "Last LSN durable here."},
        {"rt_ps_repl_commit_lsn",
         "Primary: cw, durable on every in-sync replica; secondary: the "
         "highest cw learned."},
        {"rt_ps_repl_buffered_groups",
         "Primary: groups in the send buffer (not acked by every peer)."},
        {"rt_ps_repl_lease",
         "Primary: ms of read lease left (0: reads refused; 4294967295: "
         "no secondary to ask)."},
    };
    if (rp == NULL) {
        return;
    }
    rt_buf_printf(b,
                  "# HELP rt_ps_repl_held_write_ops Entity ops of writes "
                  "waiting for their replicas.\n"
                  "# TYPE rt_ps_repl_held_write_ops gauge\n"
                  "rt_ps_repl_held_write_ops %zu\n"
                  "# HELP rt_ps_repl_held_reads Reads waiting for cw.\n"
                  "# TYPE rt_ps_repl_held_reads gauge\n"
                  "rt_ps_repl_held_reads %zu\n",
                  rp->held_ops, rp->n_reads);
    if (rp->core != NULL) {
        rt_buf_printf(
            b,
            "# HELP rt_ps_repl_catchups_total Catch-ups of replicas outside "
            "the ISR begun here as primary: tail = streamed from the "
            "replica's LSN, keyed = the keys changed since it (a full "
            "copy if the key log does not reach), full = a full copy.\n"
            "# TYPE rt_ps_repl_catchups_total counter\n"
            "rt_ps_repl_catchups_total{kind=\"tail\"} %" PRIu64
            "\n"
            "rt_ps_repl_catchups_total{kind=\"keyed\"} %" PRIu64
            "\n"
            "rt_ps_repl_catchups_total{kind=\"full\"} %" PRIu64 "\n",
            ps_rcore_catchups(rp->core, PS_RCORE_CATCHUP_TAIL),
            ps_rcore_catchups(rp->core, PS_RCORE_CATCHUP_KEYED),
            ps_rcore_catchups(rp->core, PS_RCORE_CATCHUP_FULL));
    }
    rt_buf_printf(b,
                  "# HELP rt_ps_repl_keylog_bytes Memory of the key log "
                  "(which keys each recent group changed, §2.3).\n"
                  "# TYPE rt_ps_repl_keylog_bytes gauge\n"
                  "rt_ps_repl_keylog_bytes %zu\n",
                  rp->keylog ? ps_keylog_bytes(rp->keylog) : 0);
    for (size_t k = 0; k < sizeof(per_range) / sizeof(per_range[0]); k++) {
        rt_buf_printf(b, "# HELP %s %s\n# TYPE %s gauge\n", per_range[k].name,
                      per_range[k].help, per_range[k].name);
        for (size_t i = 0; i < rp->n_ranges; i++) {
            struct ps_rcore_range_info info;
            uint64_t v[6];
            if (ps_rcore_range_get(rp->core, rp->ranges[i]->id, &info) != 0) {
                continue;
            }
            v[0] = (uint64_t)info.role;
            v[1] = info.last_lsn;
            v[2] = info.applied_lsn;
            v[3] = info.commit_lsn;
            v[4] = info.n_buffered;
            v[5] = ps_repl_lease_left(ps, rp->ranges[i]->id);
            rt_buf_printf(b, "%s{range=\"%" PRIu64 "\"} %" PRIu64 "\n",
                          per_range[k].name, rp->ranges[i]->id, v[k]);
        }
    }
    ps__repl_metrics_lag(ps, b);
}

Rt__ReplStatus *ps_repl_status(struct ps_server *ps, size_t *n)
{
    struct ps_repl *rp = ps->repl;
    Rt__ReplStatus *v;
    *n = 0;
    if (rp == NULL || rp->core == NULL || rp->n_ranges == 0) {
        return NULL;
    }
    v = rt_xcalloc(rp->n_ranges, sizeof(*v));
    for (size_t i = 0; i < rp->n_ranges; i++) {
        struct ps_rcore_range_info info;
        Rt__ReplStatus *st = &v[*n];
        if (ps_rcore_range_get(rp->core, rp->ranges[i]->id, &info) != 0) {
            continue;
        }
        rt__repl_status__init(st);
        st->range_id = rp->ranges[i]->id;
        st->role = (Rt__ReplRole)info.role;
        st->epoch = info.epoch;
        st->applied_lsn = info.applied_lsn;
        st->commit_lsn = info.commit_lsn;
        st->lease_ms = (uint32_t)ps_repl_lease_left(ps, st->range_id);
        st->restarted = info.restarted != 0;
        st->state = PS_REPL_ST_OTHER;
        if (info.role == PS_RCORE_PRIMARY) {
            st->state = info.state == PS_RPRI_SERVING ? PS_REPL_ST_OK
                        : info.state == PS_RPRI_ACTIVATING
                            ? PS_REPL_ST_ACTIVATING
                        : info.state == PS_RPRI_DEPOSED ? PS_REPL_ST_DEPOSED
                                                        : PS_REPL_ST_OTHER;
        } else if (info.role == PS_RCORE_SECONDARY) {
            st->state = info.state == PS_RSEC_FOLLOWING  ? PS_REPL_ST_OK
                        : info.state == PS_RSEC_SEALED   ? PS_REPL_ST_SEALED
                        : info.state == PS_RSEC_DIVERGED ? PS_REPL_ST_DIVERGED
                                                         : PS_REPL_ST_OTHER;
        }
        (*n)++;
    }
    return v;
}

int ps_repl_holds(const struct ps_server *ps, uint64_t range_id)
{
    return ps->repl && ps__rr_find(ps->repl, range_id) != NULL;
}

size_t ps_repl_peer_ids(const struct ps_server *ps, uint64_t *ids, size_t max)
{
    const struct ps_repl *rp = ps->repl;
    size_t n = 0;

    for (size_t i = 0; rp && i < rp->n_peers && n < max; i++) {
        if (rp->peers[i]->cli) {
            ids[n++] = rp->peers[i]->id;
        }
    }
    return n;
}

struct rt_rpc_conn *ps_repl_peer_conn(struct ps_server *ps, uint64_t peer_id)
{
    struct ps__rpeer *p = ps->repl ? ps__peer_find(ps->repl, peer_id) : NULL;
    return p && p->cli ? rt_rpc_client_conn(p->cli) : NULL;
}

int ps_repl_range_info(struct ps_server *ps,
                       uint64_t range_id,
                       struct ps_rcore_range_info *out)
{
    if (ps->repl == NULL || ps->repl->core == NULL) {
        return RT_ENOTFOUND;
    }
    return ps_rcore_range_get(ps->repl->core, range_id, out);
}

const struct ps_keylog *ps_repl_keylog(const struct ps_server *ps)
{
    return ps->repl != NULL ? ps->repl->keylog : NULL;
}

void ps_repl_keylog_forget(struct ps_server *ps, uint64_t range_id)
{
    if (ps->repl != NULL && ps->repl->keylog != NULL) {
        (void)ps_keylog_drop_range(ps->repl->keylog, range_id);
    }
}

uint64_t ps_repl_catchups(struct ps_server *ps, int kind)
{
    if (ps->repl == NULL || ps->repl->core == NULL) {
        return 0;
    }
    return ps_rcore_catchups(ps->repl->core, (enum ps_rcore_catchup)kind);
}

/* Life cycle */

/* The core knows its node id: (re)made once the master gave one. */
static int ps__core_ensure(struct ps_repl *rp)
{
    struct ps_server *ps = rp->ps;
    struct ps_rcore_config cfg = {
        .self_id = ps->server_id,
        .inflight =
            ps->cfg.repl_inflight ? ps->cfg.repl_inflight : PS_REPL_INFLIGHT,
        .resend_ms = PS_REPL_RESEND_MS,
        /* The SEAL guard is the granter's (ps_repl_on_seal), not the
         * core's fixed grace after the last append. */
        .seal_grace_ms = 0,
        .ack_timeout_ms = ps->cfg.ack_timeout_ms ? ps->cfg.ack_timeout_ms
                                                 : PS_REPL_ACK_TIMEOUT_MS,
        .conn_down_ms = PS_REPL_CONN_DOWN_MS,
        .write_hold_ms = ps->cfg.write_hold_ms ? ps->cfg.write_hold_ms
                                               : PS_REPL_WRITE_HOLD_MS,
        .master_id = PS__MASTER_PEER,
        .window_bytes = (uint64_t)ps->cfg.repl_window_mb << 20,
    };
    if (rp->core != NULL && rp->core_self == ps->server_id) {
        return 0;
    }
    while (rp->n_ranges > 0) {
        ps__rr_forget(rp, rp->ranges[rp->n_ranges - 1]);
    }
    ps__repl_dispatch(rp);
    ps_rcore_destroy(rp->core);
    rp->core = NULL;
    if (ps->server_id == 0) {
        return RT_EINVAL;
    }
    rp->core_self = ps->server_id;
    ps_lease_granter_destroy(rp->granter);
    ps_lease_holder_destroy(rp->holder);
    rp->granter = NULL;
    rp->holder = NULL;
    struct ps_lease_config lc = {
        .self_id = ps->server_id,
        .lease_ms = ps->cfg.lease_ms ? ps->cfg.lease_ms : PS_REPL_LEASE_MS,
        .drift_ppm = ps->cfg.drift_ppm ? ps->cfg.drift_ppm : PS_REPL_DRIFT_PPM,
        .eps_ms = PS_REPL_LEASE_EPS_MS,
        .start_ms = rp->start_ms,
    };
    int rc = ps_lease_granter_create(&lc, &rp->granter);
    if (rc == 0) {
        ps_lease_granter_set_fenced(rp->granter, rp->fenced);
        rc = ps_lease_holder_create(&lc, &rp->holder);
    }
    if (rc != 0) {
        rt_log(RT_LOG_ERROR, "lease configuration refused: %s",
               rt_strerror(rc));
        ps_lease_granter_destroy(rp->granter);
        rp->granter = NULL;
        return rc;
    }
    return ps_rcore_create(&cfg, &rp->core);
}

int ps_repl_start(struct ps_server *ps)
{
    struct ps_repl *rp;
    if (ps->cfg.repl_inflight > 100000) {
        return RT_EINVAL;
    }
    rp = rt_xcalloc(1, sizeof(*rp));
    rp->ps = ps;
    rp->waits.next = rp->waits.prev = &rp->waits;
    rt_repl_actions_init(&rp->out);
    uv_timer_init(ps->loop, &rp->core_timer);
    uv_timer_init(ps->loop, &rp->read_timer);
    uv_timer_init(ps->loop, &rp->support_timer);
    rp->start_ms = ps__lease_now();
    if (ps_keylog_create(
            (size_t)(ps->cfg.repl_log_mb ? ps->cfg.repl_log_mb : PS_REPL_LOG_MB)
                << 20,
            &rp->keylog) != 0) {
        rp->keylog = NULL;
    }
    rp->open_handles = 3;
    ps->repl = rp;
    return 0;
}

static void ps__repl_close_cb(uv_handle_t *h)
{
    struct ps_repl *rp = h->data;
    if (--rp->open_handles > 0) {
        return;
    }
    ps_rcore_destroy(rp->core);
    ps_lease_granter_destroy(rp->granter);
    ps_lease_holder_destroy(rp->holder);
    ps_keylog_destroy(rp->keylog);
    rt_repl_actions_close(&rp->out);
    free(rp);
}

void ps_repl_stop(struct ps_server *ps)
{
    struct ps_repl *rp = ps->repl;
    if (rp == NULL) {
        return;
    }
    ps->repl = NULL;
    rp->closing = 1;
    while (rp->waits.next != &rp->waits) {
        struct ps_repl_wait *w = rp->waits.next;
        ps__wait_fire(rp, w, w->is_read ? RT_EBUSY : RT_ETIMEDOUT);
    }
    while (rp->areqs != NULL) {
        struct ps__areq *q = rp->areqs;
        rp->areqs = q->next;
        rt_rpc_conn_unref(q->conn);
        free(q);
    }
    while (rp->sreqs != NULL) {
        struct ps__sreq *q = rp->sreqs;
        rp->sreqs = q->next;
        rt_rpc_reply_err(q->conn, q->id, RT__METHOD__SEAL, RT_EBUSY,
                         "shutting down");
        rt_rpc_conn_unref(q->conn);
        free(q);
    }
    for (size_t i = 0; i < rp->n_ranges; i++) {
        ps__rr_free(rp, rp->ranges[i]);
    }
    free(rp->ranges);
    for (size_t i = 0; i < rp->n_peers; i++) {
        struct ps__rpeer *p = rp->peers[i];
        if (p->cli != NULL) {
            rt_rpc_client_close(p->cli);
        }
        for (size_t j = 0; j < p->n_batch; j++) {
            free(p->batch[j]);
        }
        free(p->batch);
        free(p);
    }
    free(rp->peers);
    rp->core_timer.data = rp;
    rp->read_timer.data = rp;
    rp->support_timer.data = rp;
    uv_close((uv_handle_t *)&rp->core_timer, ps__repl_close_cb);
    uv_close((uv_handle_t *)&rp->read_timer, ps__repl_close_cb);
    uv_close((uv_handle_t *)&rp->support_timer, ps__repl_close_cb);
}

/* ---- transfers (docs/DESIGN-replication.md §9.3 step 2; ps_transfer) ---- */

int ps_repl_freeze(struct ps_server *ps,
                   uint64_t range_id,
                   uint64_t epoch,
                   uint64_t to)
{
    struct ps_repl *rp = ps->repl;
    struct ps__rrange *rr = rp ? ps__rr_find(rp, range_id) : NULL;
    int rc;
    if (rr == NULL || rp->core == NULL || rp->closing || !rr->primary) {
        return RT_ESTALE;
    }
    rc = ps_rcore_freeze(rp->core, range_id, epoch, to);
    if (rc != 0) {
        return rc;
    }
    /* Release the lease at once so that the ISR may seal without waiting
     * out L: every grant held for the range is void from here, and no
     * lapse of it is NOLEASE (nobody is to be removed for it). */
    if (rp->holder != NULL) {
        (void)ps_lease_holder_release(rp->holder, range_id);
    }
    rr->lease_held = rr->nolease = 0;
    (void)ps_rcore_set_silent(rp->core, range_id, NULL, 0);
    rr->release_seq = rp->sent_seq + 1;
    ps__support_round(rp);
    return 0;
}

int ps_repl_unfreeze(struct ps_server *ps, uint64_t range_id)
{
    struct ps_repl *rp = ps->repl;
    struct ps__rrange *rr = rp ? ps__rr_find(rp, range_id) : NULL;
    if (rr == NULL || rp->core == NULL || rp->closing) {
        return RT_ENOTFOUND;
    }
    if (rr->release_seq != 0 && rp->holder != NULL) {
        /* Only support asked for from now on counts (§9.3). */
        (void)ps_lease_holder_resume(rp->holder, range_id);
    }
    rr->release_seq = 0;
    if (ps_rcore_unfreeze(rp->core, range_id) != 0) {
        return RT_ENOTFOUND;
    }
    ps__support_kick(rp);
    return 0;
}

int ps_repl_transfer_ready(struct ps_server *ps,
                           uint64_t range_id,
                           uint64_t to,
                           int all,
                           uint64_t *lsn)
{
    struct ps_repl *rp = ps->repl;
    struct ps__rrange *rr = rp ? ps__rr_find(rp, range_id) : NULL;
    struct ps_rcore_range_info info;
    uint64_t acked = 0;
    if (rr == NULL || rp->core == NULL || rp->closing ||
        ps_rcore_range_get(rp->core, range_id, &info) != 0 ||
        info.role != PS_RCORE_PRIMARY || info.state != PS_RPRI_FROZEN ||
        ps_rcore_peer_acked(rp->core, range_id, to, &acked) != 0) {
        return RT_ESTALE;
    }
    *lsn = info.last_lsn;
    if (acked < info.last_lsn || (all && info.commit_lsn < info.last_lsn)) {
        return 0;
    }
    for (size_t i = 0; i < rp->n_peers; i++) {
        const struct ps__rpeer *p = rp->peers[i];
        if ((p->id == to || (all && p->cli != NULL)) &&
            p->resp_seq < rr->release_seq) {
            return 0;
        }
    }
    return 1;
}

int ps_repl_hold(struct ps_server *ps, uint64_t range_id, int on)
{
    struct ps__rrange *rr = ps->repl ? ps__rr_find(ps->repl, range_id) : NULL;
    if (rr == NULL) {
        return RT_ENOTFOUND;
    }
    rr->held = on != 0;
    return 0;
}
