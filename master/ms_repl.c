/* Replication glue of ms_repl.h. Every input becomes one ms_rcore step
 * (ms__repl_step); its actions are carried out in order (ms__repl_apply)
 * and what they produce for the core (a proposal's COMMITTED, a reload
 * after a "stale" commit) is queued and stepped once the list is done.
 *
 * A failover's happy path, as the glue sees it: the primary's server goes
 * silent (no heartbeat for failover_after_ms, or its connection closed for
 * reconnect_grace_ms) -> the core proposes the intent -> catalog commit,
 * MAP_UPDATE -> SEAL calls to the live ISR secondaries -> their SealResp
 * (applied LSNs) -> the core proposes the new configuration -> catalog
 * commit, MAP_UPDATE -> ASSIGN_RANGES to the new primary first, then the
 * others -> the new primary's reply (or its heartbeat as PRIMARY at the
 * new epoch) -> the `failover` event. Failure modes: a SEAL answered busy
 * (retry_ms) is sent again after retry_ms; an unanswered or refused SEAL
 * is resent every resend_ms; a failed commit (the catalog moved, or the
 * table was deleted) drops the operation, and the range is reloaded from
 * the catalog (or forgotten when it is gone).
 *
 * A transfer (ms_repl_transfer): TRANSFER_PRIMARY to the primary -> its
 * answer -> ms_rcore_transfer proposes the TRANSFER intent -> the same
 * path as a failover from the SEALs on -> the core's "transfer" event
 * ends it through the caller's callback. A refusal, no answer or a stale
 * range before the intent sends TRANSFER_ABORT. */
#include "ms_repl.h"

#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ms_catalog.h"
#include "ms_cluster.h"
#include "ms_events.h"
#include "ms_rcore.h"
#include "ms_rerepl.h"
#include "rt_alloc.h"
#include "rt_err.h"
#include "rt_log.h"
#include "rt_repl_ev.h"
#include "rt_time.h"

#define MS__REPL_DEF_FAILOVER_MS 1500
#define MS__REPL_DEF_GRACE_MS 300
#define MS__REPL_DEF_SEAL_WAIT_MS 200
#define MS__REPL_DEF_LEASE_MS 1500
#define MS__REPL_DEF_RESEND_MS 250
#define MS__REPL_DEF_LEARNER_MS 30000
#define MS__REPL_DEF_LEARNER_MBPS 20
#define MS__REPL_DEF_SEAL_TIMEOUT_MS 1000
#define MS__REPL_DEF_REREPL_AFTER_MS 60000
#define MS__REPL_DEF_MAX_REREPL 2
#define MS__REPL_RR_TICK_MS 500 /* re-replication plan period */

const double ms_repl_bucket_le[MS_REPL_NBUCKETS] = {0.5, 1,  2,  3,
                                                    5,   10, 30, 60};

/* One followed range's failover figures, for its event. */
struct ms__repl_range
{
    uint64_t id;
    uint64_t suspected_ms; /* the intent was proposed (0: no failover) */
    bool restart_cause;    /* the primary restarted (else: went silent) */
    uint64_t silent_ms;    /* the old primary's silence then */
    uint64_t sealed_ms;    /* the new configuration was proposed */
    uint64_t committed_ms; /* ... and committed */
    uint64_t old_primary;
    uint64_t chosen;
    uint64_t chosen_lsn;
    uint64_t lsn_server[RT_REPL_MAX_REPLICAS]; /* SEAL answers: who ... */
    uint64_t lsn[RT_REPL_MAX_REPLICAS];        /* ... holds which LSN */
    size_t n_lsn;
    /* The last ReplStatus of each server that reported the range (the
     * oldest report makes room when full). */
    struct ms_repl_report rep[RT_REPL_MAX_REPLICAS];
    size_t n_rep;
    /* The learner re-replication added (0: none), for its events. */
    uint64_t rr_learner;
    uint64_t rr_replaces;
    uint64_t rr_start_ms;
    uint64_t rr_failed; /* the last learner that failed (0: none) */
    uint64_t rr_retire; /* the replica a joined learner replaced */
    /* ms_exec moves a copy of the range (ms_repl_add_learner until
     * ms_repl_move_end): its rf + 1 copies are not the planner's to trim. */
    bool moving;

    /* A transfer of ms_repl_transfer(): TRANSFER_PRIMARY asked of
     * @xfer_from, then (@xfer_intent) carried on by the core. */
    bool xfer, xfer_intent;
    uint64_t xfer_from, xfer_to, xfer_epoch;
    uint64_t xfer_t0, xfer_answer_ms, xfer_frozen_ms, xfer_lsn;
    ms_repl_transfer_cb xfer_cb;
    void *xfer_arg;
};

/* Something for the core once the current action list is done. */
struct ms__repl_def
{
    bool reload;    /* reload range @id from the catalog */
    uint64_t id;    /* COMMITTED: the proposal's io_id; reload: range id */
    int32_t code;   /* COMMITTED: the commit's outcome */
    uint64_t range; /* COMMITTED: its range */
};

/* The ISR_CHANGE request being handled (answered within its handler). */
struct ms__repl_isr_req
{
    struct rt_rpc_conn *conn;
    uint64_t id;
    uint64_t from;
    uint64_t range_id;
    const char *reason; /* the request's, borrowed */
    bool answered;
};

struct ms_repl
{
    uv_loop_t *loop;
    struct ms_cluster *cl;     /* borrowed */
    struct ms_events *events;  /* borrowed, may be NULL */
    struct ms_repl_config cfg; /* defaults filled in */
    struct ms_rcore *core;
    uv_timer_t timer;
    bool timer_open;
    bool stopping;

    struct ms__repl_range *ranges; /* followed ranges, sorted by id */
    size_t n_ranges, cap_ranges;

    struct ms__repl_def *defs; /* FIFO, drained by ms__repl_drain */
    size_t n_defs, cap_defs;
    bool draining;
    bool dirty; /* the status changed: tell the cluster's owner */

    struct ms__repl_isr_req *isr_req; /* NULL outside the handler */
    struct ms_repl_stats stats;

    uv_timer_t rr_timer; /* the re-replication plan, every tick */
    bool rr_timer_open;
    uint64_t start_ms;     /* silence of servers never heard counts from */
    const char *rm_reason; /* why the removal being committed was asked */
};

/* One call to a partition server (SEAL or ASSIGN_RANGES) in flight. */
struct ms__repl_call
{
    struct ms_repl *r;
    uint64_t peer;
    uint64_t range_id;
    uint64_t epoch; /* SEAL: the new epoch; ASSIGN: the configuration's */
};

static void ms__repl_step(struct ms_repl *r, const struct rt_repl_event *ev);
static void ms__repl_rr_start(struct ms_repl *r);
static void ms__repl_apply(struct ms_repl *r, const struct rt_repl_actions *a);
static void ms__repl_drain(struct ms_repl *r);
static void ms__repl_xfer_end(struct ms_repl *r,
                              uint64_t range_id,
                              int code,
                              const char *why,
                              bool abort);
static bool ms__repl_xfer_event(struct ms_repl *r,
                                const struct rt_repl_action *act);

/* ---- followed ranges ---- */

/* Where @id is in r->ranges, or would be inserted. */
static size_t ms__repl_slot(const struct ms_repl *r, uint64_t id)
{
    size_t lo = 0, hi = r->n_ranges;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (r->ranges[mid].id < id) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    return lo;
}

/* The followed range @id, or NULL. The pointer is valid until the next
 * range is added or deleted. */
static struct ms__repl_range *ms__repl_range(const struct ms_repl *r,
                                             uint64_t id)
{
    size_t i = ms__repl_slot(r, id);
    return i < r->n_ranges && r->ranges[i].id == id ? &r->ranges[i] : NULL;
}

static struct ms__repl_range *ms__repl_range_add(struct ms_repl *r, uint64_t id)
{
    size_t at = ms__repl_slot(r, id);
    struct ms__repl_range *rr;
    if (at < r->n_ranges && r->ranges[at].id == id) {
        return &r->ranges[at];
    }
    if (r->n_ranges == r->cap_ranges) {
        r->cap_ranges = r->cap_ranges ? 2 * r->cap_ranges : 16;
        r->ranges = rt_xrealloc(r->ranges, r->cap_ranges * sizeof(*r->ranges));
    }
    memmove(&r->ranges[at + 1], &r->ranges[at],
            (r->n_ranges - at) * sizeof(*r->ranges));
    r->n_ranges++;
    rr = &r->ranges[at];
    memset(rr, 0, sizeof(*rr));
    rr->id = id;
    return rr;
}

static void ms__repl_range_del(struct ms_repl *r, uint64_t id)
{
    size_t i = ms__repl_slot(r, id);
    if (i < r->n_ranges && r->ranges[i].id == id && r->ranges[i].xfer) {
        ms__repl_xfer_end(r, id, RT_ENOTFOUND, "range deleted", false);
        i = ms__repl_slot(r, id);
    }
    if (i < r->n_ranges && r->ranges[i].id == id) {
        memmove(&r->ranges[i], &r->ranges[i + 1],
                (r->n_ranges - i - 1) * sizeof(*r->ranges));
        r->n_ranges--;
    }
}

/* A replicated range: more than one copy wanted or held. RF 1 ranges are
 * left to the code paths they always had. */
static bool ms__repl_wanted(const struct ms_range *rg)
{
    return rg->nreplicas > 1 || rg->rf > 1;
}

/* Loads (or reloads) @rg into the core. */
static void ms__repl_load(struct ms_repl *r, const struct ms_range *rg)
{
    struct rt_repl_conf c;
    struct rt_repl_actions a;
    int rc;
    ms_range_to_repl_conf(rg, &c);
    rt_repl_actions_init(&a);
    rc = ms_rcore_load(r->core, &c, rt_time_mono_ms(), &a);
    if (rc) {
        rt_log(RT_LOG_WARN,
               "range %" PRIu64 ": replica set not followed (%s): no failover",
               rg->id, rt_strerror(rc));
    } else {
        ms__repl_range_add(r, rg->id);
        if (rg->seal_epoch) {
            rt_log(RT_LOG_INFO,
                   "range %" PRIu64 ": resuming the seal of epoch %" PRIu64
                   " (primary %" PRIu64 ")",
                   rg->id, rg->seal_epoch, rg->server_id);
        }
    }
    ms__repl_apply(r, &a);
    rt_repl_actions_close(&a);
}

void ms_repl_sync(struct ms_repl *r)
{
    struct ms_catalog *cat = r->cl->cat;
    if (r->stopping) {
        return;
    }
    /* Gone from the catalog (table deleted): forget, so that nothing in
     * flight writes it back (the catalog refuses that too). */
    for (size_t i = 0; i < r->n_ranges;) {
        uint64_t id = r->ranges[i].id;
        if (ms_catalog_range_find(cat, id)) {
            i++;
            continue;
        }
        ms_rcore_forget(r->core, id);
        ms__repl_range_del(r, id);
        rt_log(RT_LOG_INFO, "range %" PRIu64 ": deleted, no longer followed",
               id);
    }
    for (size_t i = 0; i < ms_catalog_nranges(cat); i++) {
        const struct ms_range *rg = ms_catalog_range_at(cat, i);
        if (ms__repl_wanted(rg) && !ms__repl_range(r, rg->id)) {
            ms__repl_load(r, rg);
        }
    }
    ms__repl_drain(r);
}

/* ---- events and metrics ---- */

static json_t *ms__repl_ev_new(struct ms_repl *r,
                               const char *kind,
                               uint64_t range_id)
{
    const struct ms_range *rg = ms_catalog_range_find(r->cl->cat, range_id);
    json_t *e = json_object();
    json_object_set_new(e, "kind", json_string(kind));
    json_object_set_new(e, "range", json_integer((json_int_t)range_id));
    if (rg) {
        json_object_set_new(e, "table_id",
                            json_integer((json_int_t)rg->table_id));
        json_object_set_new(e, "server",
                            json_integer((json_int_t)rg->server_id));
        json_object_set_new(e, "epoch", json_integer((json_int_t)rg->epoch));
    }
    return e;
}

static void ms__repl_ev_add(struct ms_repl *r, json_t *e)
{
    if (r->events) {
        ms_events_add(r->events, e);
    } else {
        json_decref(e);
    }
}

static json_t *ms__repl_ids(const uint64_t *ids, size_t n)
{
    json_t *a = json_array();
    for (size_t i = 0; i < n; i++) {
        json_array_append_new(a, json_integer((json_int_t)ids[i]));
    }
    return a;
}

/* The failover is over: the new primary answered its assignment after
 * @took_ms (from the suspicion). */
static void ms__repl_failover_done(struct ms_repl *r,
                                   struct ms__repl_range *rr,
                                   uint64_t range_id,
                                   uint64_t took_ms)
{
    json_t *e = ms__repl_ev_new(r, "failover", range_id);
    double s = (double)took_ms / 1000.0;
    uint64_t t0 = rr ? rr->suspected_ms : 0;
    r->stats.failovers++;
    r->stats.failover_seconds_sum += s;
    for (size_t i = 0; i < MS_REPL_NBUCKETS; i++) {
        if (s <= ms_repl_bucket_le[i]) {
            r->stats.failover_le[i]++;
        }
    }
    json_object_set_new(e, "outcome", json_string("ok"));
    if (rr && t0) {
        json_object_set_new(
            e, "cause",
            json_string(rr->restart_cause ? "primary_restarted"
                                          : "primary_suspected"));
        json_object_set_new(e, "old_primary",
                            json_integer((json_int_t)rr->old_primary));
        json_object_set_new(e, "new_primary",
                            json_integer((json_int_t)rr->chosen));
        json_object_set_new(e, "chosen_lsn",
                            json_integer((json_int_t)rr->chosen_lsn));
        json_object_set_new(e, "suspected_ms",
                            json_integer((json_int_t)rr->silent_ms));
        json_object_set_new(
            e, "sealed_ms",
            json_integer((json_int_t)(rr->sealed_ms ? rr->sealed_ms - t0 : 0)));
        json_object_set_new(
            e, "committed_ms",
            json_integer(
                (json_int_t)(rr->committed_ms ? rr->committed_ms - t0 : 0)));
    }
    json_object_set_new(e, "duration_ms", json_integer((json_int_t)took_ms));
    rt_log(RT_LOG_INFO,
           "range %" PRIu64 ": failover from server %" PRIu64 " to %" PRIu64
           " done in %" PRIu64 " ms",
           range_id, rr ? rr->old_primary : 0, rr ? rr->chosen : 0, took_ms);
    ms__repl_ev_add(r, e);
    if (rr) {
        rr->suspected_ms = 0;
    }
}

/* An EVENT action of the core. */
static void ms__repl_event(struct ms_repl *r, const struct rt_repl_action *act)
{
    struct ms__repl_range *rr = ms__repl_range(r, act->range_id);
    const char *what = act->what ? act->what : "?";
    json_t *e;

    r->dirty = true;

    if (ms__repl_xfer_event(r, act)) {
        return;
    }
    if (strcmp(what, "failover") == 0) {
        ms__repl_failover_done(r, rr, act->range_id, act->at_ms);
        return;
    }
    if (strcmp(what, "isr_change") == 0 ||
        strcmp(what, "replica_removed") == 0) {
        /* isr_shrink / isr_grow / replica_removed went out at the
         * commit */
        return;
    }
    if (strcmp(what, "stale") == 0) {
        /* The catalog moved under the core: start over from it. */
        struct ms__repl_def d = {.reload = true, .id = act->range_id};
        if (r->n_defs == r->cap_defs) {
            r->cap_defs = r->cap_defs ? 2 * r->cap_defs : 8;
            r->defs = rt_xrealloc(r->defs, r->cap_defs * sizeof(*r->defs));
        }
        r->defs[r->n_defs++] = d;
    }
    if (strcmp(what, "failover_cancelled") == 0) {
        r->stats.cancels++;
        e = ms__repl_ev_new(r, "failover", act->range_id);
        json_object_set_new(e, "outcome", json_string("cancelled"));
        json_object_set_new(
            e, "reason",
            json_string(
                "the primary heartbeated before any seal was answered"));
        if (rr) {
            rr->suspected_ms = 0;
        }
    } else {
        /* "seal", "stale", "assign_dropped", "learner_failed". */
        char kind[48];
        snprintf(kind, sizeof(kind), "repl_%s", what);
        e = ms__repl_ev_new(r, kind, act->range_id);
        if (act->code) {
            json_object_set_new(e, "code", json_string(rt_err_name(act->code)));
        }
    }
    json_object_set_new(e, "duration_ms", json_integer((json_int_t)act->at_ms));
    rt_log(RT_LOG_INFO, "range %" PRIu64 ": %s (%s) after %" PRIu64 " ms",
           act->range_id, what, act->code ? rt_strerror(act->code) : "ok",
           act->at_ms);
    ms__repl_ev_add(r, e);
}

/* ---- SEAL ---- */

static void ms__repl_seal_cb(int status,
                             const uint8_t *body,
                             size_t len,
                             void *arg)
{
    struct ms__repl_call *call = arg;
    struct ms_repl *r = call->r;
    struct rt_repl_msg msg = {.kind = RT_REPL_MSG_SEAL_RESP};
    struct rt_repl_seal_resp *sr = &msg.u.seal_resp;
    struct rt_repl_event ev = {
        .kind = RT_REPL_EV_MSG, .peer = call->peer, .msg = &msg};

    if (r->stopping) {
        free(call);
        return;
    }
    sr->range_id = call->range_id;
    sr->new_epoch = call->epoch;
    sr->code = status;
    if (status == 0) {
        Rt__SealResp *resp = rt__seal_resp__unpack(NULL, len, body);
        if (!resp) {
            sr->code = RT_EINVAL;
        } else if (resp->retry_ms > 0) {
            sr->code = RT_EBUSY;
            sr->retry_ms = resp->retry_ms;
        } else {
            struct ms__repl_range *rr = ms__repl_range(r, call->range_id);
            sr->applied_epoch = resp->applied_epoch;
            sr->applied_lsn = resp->applied_lsn;
            if (rr && rr->n_lsn < RT_REPL_MAX_REPLICAS) {
                rr->lsn_server[rr->n_lsn] = call->peer;
                rr->lsn[rr->n_lsn++] = resp->applied_lsn;
            }
        }
        if (resp) {
            rt__seal_resp__free_unpacked(resp, NULL);
        }
    }
    rt_log(sr->code == 0 ? RT_LOG_INFO : RT_LOG_DEBUG,
           "range %" PRIu64 ": SEAL epoch %" PRIu64 " on server %" PRIu64
           ": %s, applied lsn %" PRIu64 " retry %" PRIu32 " ms",
           call->range_id, call->epoch, call->peer,
           sr->code ? rt_strerror(sr->code) : "sealed", sr->applied_lsn,
           sr->retry_ms);
    ev.now_ms = rt_time_mono_ms();
    free(call);
    ms__repl_step(r, &ev);
}

static void ms__repl_send_seal(struct ms_repl *r,
                               uint64_t peer,
                               const struct rt_repl_seal *s)
{
    Rt__SealReq req = RT__SEAL_REQ__INIT;
    struct ms__repl_call *call = rt_xcalloc(1, sizeof(*call));
    call->r = r;
    call->peer = peer;
    call->range_id = s->range_id;
    call->epoch = s->new_epoch;
    req.range_id = s->range_id;
    req.old_epoch = s->old_epoch;
    req.new_epoch = s->new_epoch;
    req.old_primary = s->old_primary;
    req.master_term = ms_catalog_master_term(r->cl->cat);
    if (ms_cluster_call(r->cl, peer, RT__METHOD__SEAL, "SEAL", &req.base,
                        r->cfg.seal_timeout_ms, ms__repl_seal_cb, call) != 0) {
        /* Not connected: the core sends it again after resend_ms. */
        free(call);
    }
}

/* ---- ASSIGN ---- */

static void ms__repl_assign_cb(int status,
                               const uint8_t *body,
                               size_t len,
                               void *arg)
{
    struct ms__repl_call *call = arg;
    struct ms_repl *r = call->r;
    struct rt_repl_msg msg = {.kind = RT_REPL_MSG_ASSIGN_RESP};
    struct rt_repl_event ev = {
        .kind = RT_REPL_EV_MSG, .peer = call->peer, .msg = &msg};
    (void)body;
    (void)len;
    if (r->stopping || status != 0) {
        /* A refusal or no answer: the core resends to the primary. */
        free(call);
        return;
    }
    msg.u.assign_resp.range_id = call->range_id;
    msg.u.assign_resp.epoch = call->epoch;
    msg.u.assign_resp.code = 0;
    ev.now_ms = rt_time_mono_ms();
    free(call);
    ms__repl_step(r, &ev);
}

static void ms__repl_send_assign(struct ms_repl *r,
                                 uint64_t peer,
                                 const struct rt_repl_conf *c)
{
    struct ms__repl_call *call = rt_xcalloc(1, sizeof(*call));
    call->r = r;
    call->peer = peer;
    call->range_id = c->range_id;
    call->epoch = c->epoch;
    /* The server's whole assignment, as every other push: it carries the
     * range's committed configuration from the catalog. */
    if (ms_cluster_assign_push(r->cl, peer, 0, ms__repl_assign_cb, call) != 0) {
        free(call);
    }
}

/* ---- ISR_CHANGE answers ---- */

static void ms__repl_isr_reply(struct ms_repl *r,
                               uint64_t peer,
                               const struct rt_repl_isr_resp *ir)
{
    struct ms__repl_isr_req *q = r->isr_req;
    if (!q || q->answered || q->from != peer || q->range_id != ir->range_id) {
        rt_log(RT_LOG_WARN,
               "range %" PRIu64 ": ISR_CHANGE answer for server %" PRIu64
               " without its request",
               ir->range_id, peer);
        return;
    }
    q->answered = true;
    if (ir->code == 0) {
        const struct ms_range *rg =
            ms_catalog_range_find(r->cl->cat, ir->range_id);
        Rt__Range msg;
        if (rg) {
            ms_range_to_pb(rg, &msg);
            rt_rpc_reply_pb(q->conn, q->id, RT__METHOD__ISR_CHANGE, 0,
                            &msg.base);
            return;
        }
        rt_rpc_reply_err(q->conn, q->id, RT__METHOD__ISR_CHANGE, RT_ENOTFOUND,
                         "range deleted");
        return;
    }
    rt_rpc_reply_err(q->conn, q->id, RT__METHOD__ISR_CHANGE, ir->code, NULL);
}

/* ---- PROPOSE: one guarded catalog commit ---- */

static void ms__repl_defer_commit(struct ms_repl *r,
                                  uint64_t io_id,
                                  uint64_t range_id,
                                  int32_t code)
{
    if (r->n_defs == r->cap_defs) {
        r->cap_defs = r->cap_defs ? 2 * r->cap_defs : 8;
        r->defs = rt_xrealloc(r->defs, r->cap_defs * sizeof(*r->defs));
    }
    r->defs[r->n_defs++] = (struct ms__repl_def){
        .reload = false, .id = io_id, .code = code, .range = range_id};
}

/* The ISR members of @a not in @b. */
static size_t ms__repl_isr_minus(const struct rt_repl_conf *a,
                                 const struct rt_repl_conf *b,
                                 uint64_t *out)
{
    size_t n = 0;
    for (size_t i = 0; i < a->n_isr; i++) {
        if (!rt_repl_conf_in_isr(b, a->isr[i])) {
            out[n++] = a->isr[i];
        }
    }
    return n;
}

/* Of the @n servers @ids, keeps (in place) those still members of @c: an
 * ISR member that left the set is a removal, not an ISR shrink. */
static size_t ms__repl_members_only(const struct rt_repl_conf *c,
                                    uint64_t *ids,
                                    size_t n)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (rt_repl_conf_role(c, ids[i]) != RT_REPL_ROLE_NONE) {
            ids[k++] = ids[i];
        }
    }
    return k;
}

/* The replica set of @old -> @c: event `replica_removed` per server that
 * left it (a re-replication learner leaving ends its copy, `rereplicate`
 * with outcome "failed"). True when the set grew (a learner was added):
 * there is no ISR change to report. */
static bool ms__repl_set_changed(struct ms_repl *r,
                                 struct ms__repl_range *rr,
                                 const struct rt_repl_conf *old,
                                 const struct rt_repl_conf *c,
                                 uint64_t now)
{
    for (size_t i = 0; i < old->n_members; i++) {
        uint64_t id = old->members[i].server_id;
        json_t *e;
        const char *why = r->rm_reason;
        if (rt_repl_conf_role(c, id) != RT_REPL_ROLE_NONE) {
            continue;
        }
        if (!why) {
            /* The core's own removals: a learner that timed out (or whose
             * primary is gone), or one a returning secondary made
             * surplus by joining first. */
            why = r->isr_req ? "learner_aborted" : "learner_failed";
        }
        e = ms__repl_ev_new(r, "replica_removed", c->range_id);
        json_object_set_new(e, "removed", json_integer((json_int_t)id));
        json_object_set_new(
            e, "role",
            json_string(old->members[i].role == RT_REPL_ROLE_LEARNER
                            ? "learner"
                            : "secondary"));
        json_object_set_new(e, "reason", json_string(why));
        ms__repl_ev_add(r, e);
        if (rr && rr->rr_retire == id) {
            rr->rr_retire = 0;
        }
        rt_log(RT_LOG_INFO,
               "range %" PRIu64 ": server %" PRIu64
               " left the replica set at epoch %" PRIu64 " (%s)",
               c->range_id, id, c->epoch, why);
        if (rr && rr->rr_learner == id) {
            e = ms__repl_ev_new(r, "rereplicate", c->range_id);
            json_object_set_new(
                e, "phase",
                json_string(strcmp(why, "learner_aborted") == 0 ? "aborted"
                                                                : "failed"));
            if (strcmp(why, "learner_aborted") != 0) {
                rr->rr_failed = id;
            }
            json_object_set_new(e, "learner", json_integer((json_int_t)id));
            json_object_set_new(
                e, "duration_ms",
                json_integer((json_int_t)(now - rr->rr_start_ms)));
            ms__repl_ev_add(r, e);
            rr->rr_learner = 0;
        }
    }
    return c->n_members > old->n_members;
}

/* The @n servers @came joined the ISR: a re-replication learner among
 * them has finished its copy (`rereplicate`, outcome "done"). */
static void ms__repl_rr_joined(struct ms_repl *r,
                               struct ms__repl_range *rr,
                               const uint64_t *came,
                               size_t n,
                               uint64_t now)
{
    for (size_t i = 0; rr && rr->rr_learner && i < n; i++) {
        json_t *e;
        if (came[i] != rr->rr_learner) {
            continue;
        }
        e = ms__repl_ev_new(r, "rereplicate", rr->id);
        json_object_set_new(e, "phase", json_string("done"));
        json_object_set_new(e, "learner", json_integer((json_int_t)came[i]));
        json_object_set_new(e, "replaces",
                            json_integer((json_int_t)rr->rr_replaces));
        json_object_set_new(e, "duration_ms",
                            json_integer((json_int_t)(now - rr->rr_start_ms)));
        ms__repl_ev_add(r, e);
        rt_log(RT_LOG_INFO,
               "range %" PRIu64 ": re-replication to server %" PRIu64
               " done in %" PRIu64 " ms",
               rr->id, came[i], now - rr->rr_start_ms);
        r->stats.rereplications++;
        rr->rr_retire = rr->rr_replaces;
        rr->rr_learner = 0;
        rr->rr_failed = 0;
    }
}

/* Bookkeeping and events of a committed change from @old to @c. */
static void ms__repl_committed(struct ms_repl *r,
                               const struct rt_repl_conf *old,
                               const struct rt_repl_conf *c,
                               uint64_t now)
{
    struct ms__repl_range *rr = ms__repl_range(r, c->range_id);
    uint64_t gone[RT_REPL_MAX_REPLICAS], came[RT_REPL_MAX_REPLICAS];
    size_t n_gone, n_came;
    const char *reason = "";

    if (old->seal_epoch == 0 && c->seal_epoch != 0) {
        if (c->seal_kind == RT_REPL_SEAL_TRANSFER) {
            rt_log(RT_LOG_INFO,
                   "range %" PRIu64 ": transfer from primary %" PRIu64
                   " to %" PRIu64 "; sealing epoch %" PRIu64,
                   c->range_id, c->primary_id, c->seal_to, c->seal_epoch);
            return;
        }
        rt_log(
            RT_LOG_WARN,
            "range %" PRIu64 ": primary %" PRIu64 " %s; sealing epoch %" PRIu64,
            c->range_id, c->primary_id,
            rr && rr->restart_cause ? "restarted" : "suspected", c->seal_epoch);
        return;
    }
    if (old->seal_epoch != 0 && c->seal_epoch == 0) {
        if (rr && c->primary_id != old->primary_id) {
            rr->committed_ms = now;
        }
        rt_log(RT_LOG_INFO,
               "range %" PRIu64 ": epoch %" PRIu64
               " committed, primary %" PRIu64 " (was %" PRIu64 "), %zu in sync",
               c->range_id, c->epoch, c->primary_id, old->primary_id, c->n_isr);
        return;
    }
    if (ms__repl_set_changed(r, rr, old, c, now)) {
        return; /* a learner joined the set */
    }
    n_gone = ms__repl_isr_minus(old, c, gone);
    n_gone = ms__repl_members_only(c, gone, n_gone);
    n_came = ms__repl_isr_minus(c, old, came);
    ms__repl_rr_joined(r, rr, came, n_came, now);
    if (r->isr_req && r->isr_req->range_id == c->range_id) {
        reason = r->isr_req->reason;
    }
    if (n_gone) {
        json_t *e = ms__repl_ev_new(r, "isr_shrink", c->range_id);
        json_object_set_new(e, "removed", ms__repl_ids(gone, n_gone));
        json_object_set_new(e, "isr", ms__repl_ids(c->isr, c->n_isr));
        json_object_set_new(e, "reason", json_string(reason));
        r->stats.isr_shrinks++;
        ms__repl_ev_add(r, e);
    }
    if (n_came) {
        json_t *e = ms__repl_ev_new(r, "isr_grow", c->range_id);
        json_object_set_new(e, "added", ms__repl_ids(came, n_came));
        json_object_set_new(e, "isr", ms__repl_ids(c->isr, c->n_isr));
        json_object_set_new(e, "reason", json_string(reason));
        r->stats.isr_grows++;
        ms__repl_ev_add(r, e);
    }
    rt_log(RT_LOG_INFO,
           "range %" PRIu64 ": ISR change committed at epoch %" PRIu64
           " (-%zu +%zu, %zu in sync)",
           c->range_id, c->epoch, n_gone, n_came, c->n_isr);
}

static void ms__repl_propose(struct ms_repl *r,
                             const struct rt_repl_action *act)
{
    struct ms_rcore_range_info info;
    struct ms__repl_range *rr = ms__repl_range(r, act->conf.range_id);
    const struct rt_repl_conf *c = &act->conf;
    uint64_t now = rt_time_mono_ms();
    int rc;

    if (ms_rcore_range_get(r->core, c->range_id, &info) != 0) {
        ms__repl_defer_commit(r, act->io_id, c->range_id, RT_ENOTFOUND);
        return;
    }
    if (rr && info.conf.seal_epoch == 0 && c->seal_epoch != 0) {
        const struct ms_server *s =
            ms_cluster_server_find(r->cl, info.conf.primary_id);
        rr->suspected_ms = now;
        rr->restart_cause = info.restarted != 0;
        rr->silent_ms = s && s->seen ? now - s->last_hb_ms : 0;
        rr->sealed_ms = rr->committed_ms = 0;
        rr->old_primary = info.conf.primary_id;
        rr->chosen = rr->chosen_lsn = 0;
        rr->n_lsn = 0;
    } else if (rr && info.conf.seal_epoch != 0 && c->seal_epoch == 0 &&
               c->primary_epoch != info.conf.primary_epoch) {
        if (!rr->suspected_ms) {
            /* Resumed after a master restart: timed from here. */
            rr->suspected_ms = now;
            rr->old_primary = info.conf.primary_id;
        }
        rr->sealed_ms = now;
        rr->chosen = c->primary_id;
        for (size_t i = 0; i < rr->n_lsn; i++) {
            if (rr->lsn_server[i] == c->primary_id) {
                rr->chosen_lsn = rr->lsn[i];
            }
        }
    }
    rc = ms_catalog_range_apply_repl(r->cl->cat, c, act->guard_epoch,
                                     act->guard_seal_epoch);
    if (rc) {
        rt_log(RT_LOG_WARN,
               "range %" PRIu64 ": replication change to epoch %" PRIu64
               " not committed: %s",
               c->range_id, c->epoch, rt_strerror(rc));
    } else {
        ms__repl_committed(r, &info.conf, c, now);
        r->dirty = true;
        ms_cluster_map_changed(r->cl, false);
        ms_cluster_map_push(r->cl);
    }
    ms__repl_defer_commit(r, act->io_id, c->range_id, rc);
}

/* ---- the timer ---- */

static void ms__repl_timer_cb(uv_timer_t *t)
{
    struct ms_repl *r = t->data;
    struct rt_repl_event ev = {.kind = RT_REPL_EV_TIMER,
                               .timer_id = MS_RCORE_TIMER_TICK};
    if (r->stopping) {
        return;
    }
    ev.now_ms = rt_time_mono_ms();
    ms__repl_step(r, &ev);
}

static void ms__repl_arm(struct ms_repl *r, uint64_t at_ms)
{
    uint64_t now = rt_time_mono_ms();
    if (!r->timer_open) {
        return;
    }
    if (at_ms == 0) {
        uv_timer_stop(&r->timer);
        return;
    }
    uv_timer_start(&r->timer, ms__repl_timer_cb, at_ms > now ? at_ms - now : 0,
                   0);
}

/* ---- the driver ---- */

static void ms__repl_apply(struct ms_repl *r, const struct rt_repl_actions *a)
{
    for (size_t i = 0; i < a->n && !r->stopping; i++) {
        const struct rt_repl_action *act = &a->v[i];
        switch (act->kind) {
            case RT_REPL_ACT_SEND:
                switch (act->msg.kind) {
                    case RT_REPL_MSG_SEAL:
                        ms__repl_send_seal(r, act->peer, &act->msg.u.seal);
                        break;
                    case RT_REPL_MSG_ASSIGN:
                        ms__repl_send_assign(r, act->peer, &act->msg.u.assign);
                        break;
                    case RT_REPL_MSG_ISR_RESP:
                        ms__repl_isr_reply(r, act->peer, &act->msg.u.isr_resp);
                        break;
                    default:
                        rt_log(RT_LOG_ERROR, "ms_rcore sent a %s",
                               rt_repl_msg_kind_name(act->msg.kind));
                        break;
                }
                break;
            case RT_REPL_ACT_TIMER:
                ms__repl_arm(r, act->at_ms);
                break;
            case RT_REPL_ACT_PROPOSE:
                ms__repl_propose(r, act);
                break;
            case RT_REPL_ACT_EVENT:
                ms__repl_event(r, act);
                break;
            default:
                rt_log(RT_LOG_ERROR, "ms_rcore asked for a %s",
                       rt_repl_act_kind_name(act->kind));
                break;
        }
    }
}

/* Steps what the applied actions produced, oldest first, until nothing is
 * left (each step may queue more). Not re-entered. */
static void ms__repl_drain(struct ms_repl *r)
{
    if (r->draining) {
        return;
    }
    r->draining = true;
    while (r->n_defs > 0 && !r->stopping) {
        struct ms__repl_def d = r->defs[0];
        memmove(&r->defs[0], &r->defs[1], (r->n_defs - 1) * sizeof(*r->defs));
        r->n_defs--;
        if (d.reload) {
            const struct ms_range *rg = ms_catalog_range_find(r->cl->cat, d.id);
            if (rg && ms__repl_wanted(rg)) {
                ms__repl_load(r, rg);
            } else if (ms__repl_range(r, d.id)) {
                ms_rcore_forget(r->core, d.id);
                ms__repl_range_del(r, d.id);
            }
            continue;
        }
        struct rt_repl_event ev = {.kind = RT_REPL_EV_COMMITTED,
                                   .now_ms = rt_time_mono_ms(),
                                   .io_id = d.id,
                                   .range_id = d.range,
                                   .code = d.code};
        struct rt_repl_actions a;
        rt_repl_actions_init(&a);
        if (ms_rcore_step(r->core, &ev, &a) == 0) {
            ms__repl_apply(r, &a);
        }
        rt_repl_actions_close(&a);
    }
    r->n_defs = 0;
    r->draining = false;
    if (r->dirty) {
        r->dirty = false;
        ms_cluster_changed(r->cl);
    }
}

static void ms__repl_step(struct ms_repl *r, const struct rt_repl_event *ev)
{
    struct rt_repl_actions a;
    if (r->stopping) {
        return;
    }
    rt_repl_actions_init(&a);
    ms_rcore_step(r->core, ev, &a);
    ms__repl_apply(r, &a);
    rt_repl_actions_close(&a);
    ms__repl_drain(r);
}

/* ---- inputs ---- */

static void ms__repl_keep_report(struct ms_repl *r,
                                 uint64_t server_id,
                                 const Rt__ReplStatus *st)
{
    struct ms__repl_range *rr = ms__repl_range(r, st->range_id);
    struct ms_repl_report *rep = NULL;
    if (!rr) {
        return;
    }
    for (size_t i = 0; i < rr->n_rep && !rep; i++) {
        if (rr->rep[i].server_id == server_id) {
            rep = &rr->rep[i];
        }
    }
    if (!rep && rr->n_rep < RT_REPL_MAX_REPLICAS) {
        rep = &rr->rep[rr->n_rep++];
    }
    if (!rep) {
        rep = &rr->rep[0];
        for (size_t i = 1; i < rr->n_rep; i++) {
            if (rr->rep[i].at_ms < rep->at_ms) {
                rep = &rr->rep[i];
            }
        }
    }
    *rep = (struct ms_repl_report){
        .server_id = server_id,
        .role = (int)st->role,
        .epoch = st->epoch,
        .applied_lsn = st->applied_lsn,
        .commit_lsn = st->commit_lsn,
        .lease_ms = st->lease_ms,
        .state = st->state,
        .at_ms = rt_time_mono_ms(),
    };
}

void ms_repl_heard(struct ms_repl *r,
                   uint64_t server_id,
                   const Rt__HeartbeatReq *req)
{
    struct rt_repl_msg msg = {.kind = RT_REPL_MSG_HEARTBEAT};
    msg.u.heartbeat.stalled = req != NULL && req->stalled;
    if (msg.u.heartbeat.stalled) {
        /* Every heartbeat while it lasts; the failover logs at warn. */
        rt_log(RT_LOG_DEBUG,
               "server %" PRIu64
               " reports a stalled writer: failing its "
               "primaries over",
               server_id);
    }
    struct rt_repl_event ev = {.kind = RT_REPL_EV_MSG,
                               .now_ms = rt_time_mono_ms(),
                               .peer = server_id,
                               .msg = &msg};
    /* A restarted primary asks for its failover before the heartbeat
     * could cancel one begun while it was away. */
    for (size_t i = 0; req && i < req->n_repl && !r->stopping; i++) {
        const Rt__ReplStatus *st = req->repl[i];
        struct rt_repl_msg am = {.kind = RT_REPL_MSG_ASSIGN_RESP};
        struct rt_repl_event rev = {.kind = RT_REPL_EV_MSG,
                                    .now_ms = ev.now_ms,
                                    .peer = server_id,
                                    .msg = &am};
        if (!st->restarted) {
            continue; /* (sealed already, it reports as a secondary) */
        }
        am.u.assign_resp.range_id = st->range_id;
        am.u.assign_resp.epoch = st->epoch;
        am.u.assign_resp.code = RT_ENOTPRIMARY;
        ms__repl_step(r, &rev);
    }
    ms__repl_step(r, &ev);
    for (size_t i = 0; req && i < req->n_repl; i++) {
        ms__repl_keep_report(r, server_id, req->repl[i]);
    }
    for (size_t i = 0; req && i < req->n_loads; i++) {
        /* The primary's size of a range sets its learners' deadline (a
         * learner's own report would be of its partial copy). */
        struct ms_rcore_range_info info;
        const Rt__RangeLoad *ld = req->loads[i];
        if (ms_rcore_range_get(r->core, ld->range_id, &info) == 0 &&
            info.conf.primary_id == server_id) {
            ms_rcore_range_size(r->core, ld->range_id, ld->key_bytes);
        }
    }
    for (size_t i = 0; req && i < req->n_repl && !r->stopping; i++) {
        const Rt__ReplStatus *st = req->repl[i];
        struct ms_rcore_range_info info;
        struct rt_repl_msg am = {.kind = RT_REPL_MSG_ASSIGN_RESP};
        if (st->role != RT__REPL_ROLE__ROLE_PRIMARY || st->restarted ||
            ms_rcore_range_get(r->core, st->range_id, &info) != 0 ||
            info.state != MS_RCORE_ASSIGNING ||
            info.conf.primary_id != server_id || st->epoch < info.conf.epoch) {
            continue;
        }
        /* The primary serves the configuration (or a later one): as good
         * as its ASSIGN_RANGES reply. */
        am.u.assign_resp.range_id = st->range_id;
        am.u.assign_resp.epoch = info.conf.epoch;
        ev.msg = &am;
        ev.now_ms = rt_time_mono_ms();
        ms__repl_step(r, &ev);
    }
}

void ms_repl_conn_down(struct ms_repl *r, uint64_t server_id)
{
    struct rt_repl_event ev = {.kind = RT_REPL_EV_CONN,
                               .now_ms = rt_time_mono_ms(),
                               .peer = server_id,
                               .up = 0,
                               .code = RT_ENOCONN};
    ms__repl_step(r, &ev);
}

void ms_repl_isr_change(struct ms_repl *r,
                        struct rt_rpc_conn *conn,
                        uint64_t id,
                        uint64_t from,
                        const Rt__IsrChangeReq *req)
{
    struct ms__repl_isr_req q = {
        .conn = conn, .id = id, .from = from, .range_id = req->range_id};
    struct rt_repl_msg msg = {.kind = RT_REPL_MSG_ISR_CHANGE};
    struct rt_repl_isr_change *ic = &msg.u.isr_change;
    struct rt_repl_event ev = {.kind = RT_REPL_EV_MSG,
                               .now_ms = rt_time_mono_ms(),
                               .peer = from,
                               .msg = &msg};

    if (req->n_remove > RT_REPL_MAX_REPLICAS ||
        req->n_add > RT_REPL_MAX_REPLICAS) {
        rt_rpc_reply_err(conn, id, RT__METHOD__ISR_CHANGE, RT_EINVAL,
                         "too many servers in the change");
        return;
    }
    ic->range_id = req->range_id;
    ic->epoch = req->epoch;
    ic->n_remove = req->n_remove;
    if (req->n_remove) { /* an empty list may be NULL */
        memcpy(ic->remove, req->remove, req->n_remove * sizeof(uint64_t));
    }
    ic->n_add = req->n_add;
    if (req->n_add) {
        memcpy(ic->add, req->add, req->n_add * sizeof(uint64_t));
    }
    rt_log(RT_LOG_INFO,
           "range %" PRIu64 ": ISR_CHANGE from server %" PRIu64
           " at epoch %" PRIu64 " (-%zu +%zu): %s",
           req->range_id, from, req->epoch, req->n_remove, req->n_add,
           req->reason ? req->reason : "");
    q.reason = req->reason ? req->reason : "";
    r->isr_req = &q;
    ms__repl_step(r, &ev);
    r->isr_req = NULL;
    if (!q.answered) {
        /* Commits are synchronous, so the core always answered; stay
         * safe if it did not. */
        rt_rpc_reply_err(conn, id, RT__METHOD__ISR_CHANGE, RT_EBUSY,
                         "not decided");
    }
}

/* ---- lifecycle and inspection ---- */

int ms_repl_create(uv_loop_t *loop,
                   struct ms_cluster *cl,
                   struct ms_events *events,
                   const struct ms_repl_config *cfg,
                   struct ms_repl **out)
{
    struct ms_repl *r = rt_xcalloc(1, sizeof(*r));
    struct ms_rcore_config rc_cfg;
    int rc;

    r->loop = loop;
    r->cl = cl;
    r->events = events;
    r->cfg = *cfg;
#define MS__REPL_DEF(f, v) \
    if (!r->cfg.f) {       \
        r->cfg.f = (v);    \
    }
    MS__REPL_DEF(failover_after_ms, MS__REPL_DEF_FAILOVER_MS)
    MS__REPL_DEF(reconnect_grace_ms, MS__REPL_DEF_GRACE_MS)
    MS__REPL_DEF(seal_wait_ms, MS__REPL_DEF_SEAL_WAIT_MS)
    MS__REPL_DEF(lease_ms, MS__REPL_DEF_LEASE_MS)
    MS__REPL_DEF(resend_ms, MS__REPL_DEF_RESEND_MS)
    MS__REPL_DEF(learner_timeout_ms, MS__REPL_DEF_LEARNER_MS)
    MS__REPL_DEF(learner_min_mb_per_s, MS__REPL_DEF_LEARNER_MBPS)
    MS__REPL_DEF(seal_timeout_ms, MS__REPL_DEF_SEAL_TIMEOUT_MS)
    MS__REPL_DEF(rereplicate_after_ms, MS__REPL_DEF_REREPL_AFTER_MS)
    MS__REPL_DEF(max_rereplications, MS__REPL_DEF_MAX_REREPL)
#undef MS__REPL_DEF
    rc_cfg = (struct ms_rcore_config){
        .failover_after_ms = r->cfg.failover_after_ms,
        .reconnect_grace_ms = r->cfg.reconnect_grace_ms,
        .lease_ms = r->cfg.lease_ms,
        .seal_wait_ms = r->cfg.seal_wait_ms,
        .resend_ms = r->cfg.resend_ms,
        .learner_timeout_ms = r->cfg.learner_timeout_ms,
        .learner_min_mb_per_s = r->cfg.learner_min_mb_per_s,
        .mutation = MS_RCORE_MUT_NONE,
    };
    rc = ms_rcore_create(&rc_cfg, rt_time_mono_ms(), &r->core);
    if (rc) {
        free(r);
        return rc;
    }
    uv_timer_init(loop, &r->timer);
    r->timer.data = r;
    r->timer_open = true;
    r->start_ms = rt_time_mono_ms();
    ms__repl_rr_start(r);
    ms_repl_sync(r);
    *out = r;
    return 0;
}

void ms_repl_stop(struct ms_repl *r)
{
    if (!r || r->stopping) {
        return;
    }
    r->stopping = true;
    if (r->timer_open) {
        uv_timer_stop(&r->timer);
        uv_close((uv_handle_t *)&r->timer, NULL);
        r->timer_open = false;
    }
    if (r->rr_timer_open) {
        uv_timer_stop(&r->rr_timer);
        uv_close((uv_handle_t *)&r->rr_timer, NULL);
        r->rr_timer_open = false;
    }
}

void ms_repl_destroy(struct ms_repl *r)
{
    if (!r) {
        return;
    }
    ms_rcore_destroy(r->core);
    free(r->ranges);
    free(r->defs);
    free(r);
}

const char *ms_repl_range_state(const struct ms_repl *r, uint64_t range_id)
{
    struct ms_rcore_range_info info;
    if (ms_rcore_range_get(r->core, range_id, &info) != 0) {
        return NULL;
    }
    return ms_rcore_state_name(info.state);
}

int ms_repl_report(const struct ms_repl *r,
                   uint64_t range_id,
                   uint64_t server_id,
                   struct ms_repl_report *out)
{
    const struct ms__repl_range *rr = ms__repl_range(r, range_id);
    for (size_t i = 0; rr && i < rr->n_rep; i++) {
        if (rr->rep[i].server_id == server_id) {
            *out = rr->rep[i];
            return 0;
        }
    }
    return RT_ENOTFOUND;
}

size_t ms_repl_ops(const struct ms_repl *r, struct ms_repl_op *out, size_t cap)
{
    size_t n = 0;
    for (size_t i = 0; i < r->n_ranges; i++) {
        struct ms_rcore_range_info info;
        if (ms_rcore_range_get(r->core, r->ranges[i].id, &info) != 0 ||
            !info.op) {
            continue;
        }
        if (n < cap) {
            out[n] = (struct ms_repl_op){
                .range_id = r->ranges[i].id,
                .kind = info.op,
                .state = ms_rcore_state_name(info.state),
                .since_ms = info.op_start_ms,
            };
        }
        n++;
    }
    return n;
}

const struct ms_repl_stats *ms_repl_stats(struct ms_repl *r)
{
    r->stats.ranges = r->n_ranges;
    r->stats.inflight = 0;
    r->stats.rereplicating = 0;
    for (size_t i = 0; i < r->n_ranges; i++) {
        struct ms_rcore_range_info info;
        if (ms_rcore_range_get(r->core, r->ranges[i].id, &info) == 0 &&
            (info.state != MS_RCORE_STABLE || info.proposing)) {
            r->stats.inflight++;
        }
        if (r->ranges[i].rr_learner) {
            r->stats.rereplicating++;
        }
    }
    return &r->stats;
}

/* ---- re-replication and wiped servers (DESIGN-replication §8) ---- */

/* One decision carried out through the core: its proposal is committed
 * (synchronously) and the commit stepped before this returns. 0 when the
 * core proposed it, else the core's refusal. */
static int ms__repl_rr_do(struct ms_repl *r,
                          const struct ms_rerepl_decision *d,
                          uint64_t now)
{
    struct rt_repl_actions a;
    int rc;
    rt_repl_actions_init(&a);
    if (d->kind == MS_REREPL_ADD) {
        rc = ms_rcore_add_learner(r->core, d->range_id, d->server, now, &a);
    } else {
        rc = ms_rcore_remove_replica(r->core, d->range_id, d->server, now, &a);
    }
    r->rm_reason = d->reason;
    if (rc == 0) {
        ms__repl_apply(r, &a);
    }
    rt_repl_actions_close(&a);
    ms__repl_drain(r);
    r->rm_reason = NULL;
    return rc;
}

/* An ADD was carried out: if its learner is in the committed set, the
 * copy has begun (`rereplicate`, phase "start"). */
static void ms__repl_rr_started(struct ms_repl *r,
                                const struct ms_rerepl_decision *d,
                                uint64_t now)
{
    struct ms_rcore_range_info info;
    struct ms__repl_range *rr = ms__repl_range(r, d->range_id);
    json_t *e;
    if (!rr || ms_rcore_range_get(r->core, d->range_id, &info) != 0 ||
        rt_repl_conf_role(&info.conf, d->server) != RT_REPL_ROLE_LEARNER) {
        return;
    }
    rr->rr_learner = d->server;
    rr->rr_replaces = d->replaces;
    rr->rr_start_ms = now;
    r->stats.rereplications_started++;
    e = ms__repl_ev_new(r, "rereplicate", d->range_id);
    json_object_set_new(e, "phase", json_string("start"));
    json_object_set_new(e, "learner", json_integer((json_int_t)d->server));
    json_object_set_new(e, "replaces", json_integer((json_int_t)d->replaces));
    json_object_set_new(e, "reason", json_string(d->reason));
    ms__repl_ev_add(r, e);
    rt_log(RT_LOG_INFO,
           "range %" PRIu64 ": re-replicating to server %" PRIu64
           " (%s, replaces %" PRIu64 ")",
           d->range_id, d->server, d->reason, d->replaces);
}

void ms_repl_rereplicate(struct ms_repl *r)
{
    struct ms_cluster *cl = r->cl;
    uint64_t now = rt_time_mono_ms();
    size_t nr = r->n_ranges, ns = cl->servers.n, k = 0, n;
    struct ms_rerepl_range *rv;
    struct ms_rerepl_server *sv;
    struct ms_rerepl_decision *d;
    struct ms_rerepl_config pc = {
        .after_ms = r->cfg.rereplicate_after_ms,
        .max_inflight = r->cfg.max_rereplications,
    };

    if (r->stopping || nr == 0) {
        return;
    }
    rv = rt_xcalloc(nr, sizeof(*rv));
    sv = rt_xcalloc(ns ? ns : 1, sizeof(*sv));
    d = rt_xcalloc(nr, sizeof(*d));
    for (size_t i = 0; i < nr; i++) {
        struct ms_rcore_range_info info;
        if (ms_rcore_range_get(r->core, r->ranges[i].id, &info) != 0) {
            continue;
        }
        rv[k].conf = info.conf;
        rv[k].busy = info.state != MS_RCORE_STABLE || info.proposing ||
                     r->ranges[i].xfer;
        rv[k].adding = info.state == MS_RCORE_ADDING;
        if (info.conf.n_members <= info.conf.rf) {
            r->ranges[i].rr_retire = 0; /* nothing surplus any more */
        }
        rv[k].avoid = r->ranges[i].rr_failed;
        rv[k].retire = r->ranges[i].rr_retire;
        rv[k].moving = r->ranges[i].moving;
        k++;
    }
    for (size_t i = 0; i < ns; i++) {
        const struct ms_server *s = cl->servers.v[i];
        const struct ms_server_rec *rec =
            ms_catalog_server_find(cl->cat, s->id);
        uint64_t since = s->seen ? s->last_hb_ms : r->start_ms;
        sv[i] = (struct ms_rerepl_server){
            .id = s->id,
            .zone = rec ? rec->zone : "",
            .nreplicas = ms_catalog_server_nreplicas(cl->cat, s->id),
            .placeable =
                ms_cluster_server_usable(cl, s->id) && !(rec && rec->draining),
            .silent_ms = now > since ? now - since : 0,
        };
    }
    n = ms_rerepl_plan(&pc, rv, k, sv, ns, d, nr);
    for (size_t i = 0; i < n && !r->stopping; i++) {
        int rc = ms__repl_rr_do(r, &d[i], now);
        if (rc) {
            rt_log(RT_LOG_DEBUG,
                   "range %" PRIu64 ": re-replication step on server %" PRIu64
                   " not taken: %s",
                   d[i].range_id, d[i].server, rt_strerror(rc));
        } else if (d[i].kind == MS_REREPL_ADD) {
            ms__repl_rr_started(r, &d[i], now);
        }
    }
    free(d);
    free(sv);
    free(rv);
}

static void ms__repl_rr_timer_cb(uv_timer_t *t)
{
    ms_repl_rereplicate(t->data);
}

static void ms__repl_rr_start(struct ms_repl *r)
{
    uv_timer_init(r->loop, &r->rr_timer);
    r->rr_timer.data = r;
    r->rr_timer_open = true;
    uv_timer_start(&r->rr_timer, ms__repl_rr_timer_cb, MS__REPL_RR_TICK_MS,
                   MS__REPL_RR_TICK_MS);
}

int ms_repl_server_wiped(struct ms_repl *r, uint64_t server_id)
{
    uint64_t now = rt_time_mono_ms();
    int rc = 0;
    if (r->stopping) {
        return RT_EBUSY;
    }
    for (size_t i = 0; i < r->n_ranges; i++) {
        struct ms_rcore_range_info info;
        uint64_t id = r->ranges[i].id;
        struct ms_rerepl_decision d = {.kind = MS_REREPL_REMOVE,
                                       .range_id = id,
                                       .server = server_id,
                                       .reason = "wiped"};
        enum rt_repl_role role;
        if (ms_rcore_range_get(r->core, id, &info) != 0) {
            continue;
        }
        role = rt_repl_conf_role(&info.conf, server_id);
        if (role == RT_REPL_ROLE_NONE) {
            continue;
        }
        if (role == RT_REPL_ROLE_PRIMARY || ms__repl_rr_do(r, &d, now) != 0 ||
            (ms_rcore_range_get(r->core, id, &info) == 0 &&
             rt_repl_conf_role(&info.conf, server_id) != RT_REPL_ROLE_NONE)) {
            /* Still its primary (a failover must come first), or another
             * operation in flight: the server registers again later. */
            rt_log(RT_LOG_WARN,
                   "range %" PRIu64 ": wiped server %" PRIu64
                   " not removed yet (%s)",
                   id, server_id,
                   role == RT_REPL_ROLE_PRIMARY ? "still its primary"
                                                : "operation in flight");
            rc = RT_EBUSY;
        }
    }
    return rc;
}

/* ---- a move's replica-set changes (DESIGN-replication §9.3) ---- */

/* @d through the core (ms__repl_rr_do), then checked in the committed
 * configuration: the learner in the set (@want_in) or the server gone. */
static int ms__repl_move_do(struct ms_repl *r,
                            const struct ms_rerepl_decision *d,
                            bool want_in,
                            char *err,
                            size_t errlen)
{
    struct ms_rcore_range_info info;
    int rc;
    if (r->stopping) {
        snprintf(err, errlen, "master is stopping");
        return RT_EBUSY;
    }
    if (!ms__repl_range(r, d->range_id)) {
        snprintf(err, errlen, "range %" PRIu64 " is not replicated",
                 d->range_id);
        return RT_EINVAL;
    }
    if (ms_repl_transferring(r, d->range_id)) {
        snprintf(err, errlen, "range %" PRIu64 " is transferring", d->range_id);
        return RT_EBUSY;
    }
    rc = ms__repl_rr_do(r, d, rt_time_mono_ms());
    if (rc) {
        snprintf(err, errlen,
                 "range %" PRIu64 ": %s of server %" PRIu64 " refused (%s)",
                 d->range_id, want_in ? "learner" : "removal", d->server,
                 rt_strerror(rc));
        return rc;
    }
    if (ms_rcore_range_get(r->core, d->range_id, &info) != 0 ||
        (rt_repl_conf_role(&info.conf, d->server) != RT_REPL_ROLE_NONE) !=
            want_in) {
        snprintf(err, errlen,
                 "range %" PRIu64 ": the change of server %" PRIu64
                 " was not committed",
                 d->range_id, d->server);
        return RT_ESTALE;
    }
    return 0;
}

int ms_repl_add_learner(struct ms_repl *r,
                        uint64_t range_id,
                        uint64_t server,
                        char *err,
                        size_t errlen)
{
    const struct ms_rerepl_decision d = {.kind = MS_REREPL_ADD,
                                         .range_id = range_id,
                                         .server = server,
                                         .reason = "move"};
    int rc = ms__repl_move_do(r, &d, true, err, errlen);
    struct ms__repl_range *rr = ms__repl_range(r, range_id);
    if (rc == 0 && rr) {
        rr->moving = true;
    }
    return rc;
}

void ms_repl_move_end(struct ms_repl *r, uint64_t range_id)
{
    struct ms__repl_range *rr = r ? ms__repl_range(r, range_id) : NULL;
    if (rr) {
        rr->moving = false;
    }
}

int ms_repl_remove_replica(struct ms_repl *r,
                           uint64_t range_id,
                           uint64_t server,
                           const char *reason,
                           char *err,
                           size_t errlen)
{
    const struct ms_rerepl_decision d = {.kind = MS_REREPL_REMOVE,
                                         .range_id = range_id,
                                         .server = server,
                                         .reason = reason};
    return ms__repl_move_do(r, &d, false, err, errlen);
}

/* ---- transfers (docs/DESIGN-replication.md §9.3 step 2) ---- */

/* A TRANSFER_ABORT in flight: sent again (up to MS__REPL_ABORT_TRIES
 * times) when it failed while the old primary is still connected. */
#define MS__REPL_ABORT_TRIES 3
struct ms__repl_abort
{
    struct ms_repl *r;
    uint64_t peer;
    uint64_t range_id, epoch, to;
    unsigned tries;
};

static void ms__repl_abort_send(struct ms__repl_abort *a);

static void ms__repl_abort_cb(int status,
                              const uint8_t *body,
                              size_t len,
                              void *arg)
{
    struct ms__repl_abort *a = arg;
    (void)body;
    (void)len;
    if (status == 0 || a->r->stopping || ++a->tries >= MS__REPL_ABORT_TRIES) {
        if (status != 0 && !a->r->stopping) {
            rt_log(RT_LOG_WARN,
                   "range %" PRIu64 ": TRANSFER_ABORT to server %" PRIu64
                   " not answered (%s): it unfreezes by itself",
                   a->range_id, a->peer, rt_strerror(status));
        }
        free(a);
        return;
    }
    ms__repl_abort_send(a);
}

/* Not connected: the old primary is down or reconnecting, and unfreezes
 * by itself (its 3 s / 10 s rules, or its next assignment). */
static void ms__repl_abort_send(struct ms__repl_abort *a)
{
    Rt__TransferReq req = RT__TRANSFER_REQ__INIT;
    req.range_id = a->range_id;
    req.epoch = a->epoch;
    req.to_server = a->to;
    req.master_term = ms_catalog_master_term(a->r->cl->cat);
    if (ms_cluster_call(a->r->cl, a->peer, RT__METHOD__TRANSFER_ABORT,
                        "TRANSFER_ABORT", &req.base, MS_REPL_TRANSFER_CALL_MS,
                        ms__repl_abort_cb, a) != 0) {
        free(a);
    }
}

/* Ends the transfer of @range_id: the callback gets @code (and @why);
 * with @abort the old primary is told TRANSFER_ABORT (not waited for;
 * resent a few times if it fails while the server is connected). */
static void ms__repl_xfer_end(struct ms_repl *r,
                              uint64_t range_id,
                              int code,
                              const char *why,
                              bool abort)
{
    struct ms__repl_range *rr = ms__repl_range(r, range_id);
    struct ms_repl_transfer_result res = {0};
    struct ms_rcore_range_info info;
    ms_repl_transfer_cb cb;
    void *arg;
    if (!rr || !rr->xfer) {
        return;
    }
    res.from = rr->xfer_from;
    res.to = rr->xfer_to;
    res.lsn = rr->xfer_lsn;
    res.frozen_ms = rr->xfer_frozen_ms;
    if (ms_rcore_range_get(r->core, range_id, &info) == 0) {
        res.new_primary = info.conf.primary_id;
        res.epoch = info.conf.epoch;
    }
    if (rr->xfer_answer_ms) {
        res.window_ms =
            rr->xfer_frozen_ms + (rt_time_mono_ms() - rr->xfer_answer_ms);
    }
    if (why) {
        snprintf(res.error, sizeof(res.error), "%s", why);
    }
    if (abort) {
        struct ms__repl_abort *a = rt_xcalloc(1, sizeof(*a));
        *a = (struct ms__repl_abort){.r = r,
                                     .peer = rr->xfer_from,
                                     .range_id = range_id,
                                     .epoch = rr->xfer_epoch,
                                     .to = rr->xfer_to};
        ms__repl_abort_send(a);
    }
    cb = rr->xfer_cb;
    arg = rr->xfer_arg;
    rr->xfer = rr->xfer_intent = false;
    rr->xfer_cb = NULL;
    rt_log(code ? RT_LOG_WARN : RT_LOG_INFO,
           "range %" PRIu64 ": transfer from server %" PRIu64 " to %" PRIu64
           ": %s (frozen %" PRIu64 " ms, window %" PRIu64 " ms)",
           range_id, res.from, res.to, code ? res.error : "done", res.frozen_ms,
           res.window_ms);
    r->dirty = true;
    if (cb) {
        cb(arg, code, &res);
    }
}

/* An EVENT of the core about a range with a transfer in flight; true when
 * it is consumed (the transfer's own event is its caller's). */
static bool ms__repl_xfer_event(struct ms_repl *r,
                                const struct rt_repl_action *act)
{
    struct ms__repl_range *rr = ms__repl_range(r, act->range_id);
    const char *what = act->what ? act->what : "";
    struct ms_rcore_range_info info;
    char why[128];
    if (!rr || !rr->xfer || !rr->xfer_intent) {
        return false;
    }
    if (strcmp(what, "transfer") == 0) {
        uint64_t to = rr->xfer_to;
        if (ms_rcore_range_get(r->core, act->range_id, &info) == 0 &&
            info.conf.primary_id != to) {
            /* Finished as a failover among the sealed (§9.3). */
            snprintf(why, sizeof(why),
                     "target did not seal in time: server %" PRIu64
                     " is primary at epoch %" PRIu64,
                     info.conf.primary_id, info.conf.epoch);
            ms__repl_xfer_end(r, act->range_id, RT_ETIMEDOUT, why, false);
        } else {
            ms__repl_xfer_end(r, act->range_id, 0, NULL, false);
        }
        return true;
    }
    if (strcmp(what, "stale") == 0) {
        /* The intent did not commit: the old primary is still frozen. */
        ms__repl_xfer_end(r, act->range_id, RT_ESTALE,
                          "catalog changed before the intent committed", true);
    } else if (strcmp(what, "assign_dropped") == 0) {
        ms__repl_xfer_end(r, act->range_id, RT_ETIMEDOUT,
                          "new primary did not answer its assignment", false);
    }
    return false;
}

static void ms__repl_xfer_cb(int status,
                             const uint8_t *body,
                             size_t len,
                             void *arg)
{
    struct ms__repl_call *call = arg;
    struct ms_repl *r = call->r;
    uint64_t range_id = call->range_id, epoch = call->epoch;
    struct ms__repl_range *rr;
    Rt__TransferResp *resp;
    struct rt_repl_actions a;
    char why[128];
    int rc;

    free(call);
    rr = r->stopping ? NULL : ms__repl_range(r, range_id);
    if (!rr || !rr->xfer || rr->xfer_intent || rr->xfer_epoch != epoch) {
        return;
    }
    if (status != 0) {
        snprintf(why, sizeof(why), "TRANSFER_PRIMARY on server %" PRIu64 ": %s",
                 rr->xfer_from, rt_strerror(status));
        ms__repl_xfer_end(r, range_id, status, why, true);
        return;
    }
    resp = rt__transfer_resp__unpack(NULL, len, body);
    if (!resp) {
        ms__repl_xfer_end(r, range_id, RT_EINVAL, "bad TransferResp", true);
        return;
    }
    rr->xfer_answer_ms = rt_time_mono_ms();
    rr->xfer_frozen_ms = resp->frozen_ms;
    rr->xfer_lsn = resp->lsn;
    rt__transfer_resp__free_unpacked(resp, NULL);
    rt_repl_actions_init(&a);
    rc = ms_rcore_transfer(r->core, range_id, epoch, rr->xfer_to, rr->xfer_lsn,
                           rr->xfer_answer_ms, &a);
    if (rc) {
        rt_repl_actions_close(&a);
        snprintf(why, sizeof(why), "range changed meanwhile: %s",
                 rt_strerror(rc));
        ms__repl_xfer_end(r, range_id, rc, why, true);
        return;
    }
    rr->xfer_intent = true;
    ms__repl_apply(r, &a); /* the intent's commit (rr may move) */
    rt_repl_actions_close(&a);
    ms__repl_drain(r);
}

int ms_repl_transfer(struct ms_repl *r,
                     uint64_t range_id,
                     uint64_t to,
                     ms_repl_transfer_cb cb,
                     void *arg,
                     char *err,
                     size_t errlen)
{
    struct ms__repl_range *rr = ms__repl_range(r, range_id);
    Rt__TransferReq req = RT__TRANSFER_REQ__INIT;
    struct ms__repl_call *call;
    struct rt_repl_conf c;
    int rc;

    if (r->stopping) {
        snprintf(err, errlen, "master is stopping");
        return RT_EBUSY;
    }
    if (!rr) {
        snprintf(err, errlen, "range %" PRIu64 " is not replicated", range_id);
        return RT_EINVAL;
    }
    rc = ms_rcore_transfer_check(r->core, range_id, to, &c);
    if (rc == 0 && rr->xfer) {
        rc = RT_EBUSY;
    }
    if (rc == RT_EINVAL) {
        snprintf(err, errlen,
                 "server %" PRIu64
                 " is not an in-sync secondary of range "
                 "%" PRIu64 " (primary %" PRIu64 ")",
                 to, range_id, c.primary_id);
        return rc;
    }
    if (rc) {
        snprintf(err, errlen, "range %" PRIu64 " is busy (%s)", range_id,
                 rr->xfer ? "transferring" : ms_repl_range_state(r, range_id));
        return rc;
    }
    if (!ms_cluster_server_usable(r->cl, to)) {
        snprintf(err, errlen, "target server %" PRIu64 " is down", to);
        return RT_EBUSY;
    }
    req.range_id = range_id;
    req.epoch = c.epoch;
    req.to_server = to;
    req.new_epoch = c.epoch + 1;
    req.master_term = ms_catalog_master_term(r->cl->cat);
    call = rt_xcalloc(1, sizeof(*call));
    call->r = r;
    call->peer = c.primary_id;
    call->range_id = range_id;
    call->epoch = c.epoch;
    rc = ms_cluster_call(r->cl, c.primary_id, RT__METHOD__TRANSFER_PRIMARY,
                         "TRANSFER_PRIMARY", &req.base,
                         MS_REPL_TRANSFER_CALL_MS, ms__repl_xfer_cb, call);
    if (rc) {
        free(call);
        snprintf(err, errlen, "primary server %" PRIu64 " is not connected",
                 c.primary_id);
        return RT_EBUSY;
    }
    rr->xfer = true;
    rr->xfer_intent = false;
    rr->xfer_from = c.primary_id;
    rr->xfer_to = to;
    rr->xfer_epoch = c.epoch;
    rr->xfer_t0 = rt_time_mono_ms();
    rr->xfer_answer_ms = rr->xfer_frozen_ms = rr->xfer_lsn = 0;
    rr->xfer_cb = cb;
    rr->xfer_arg = arg;
    r->dirty = true;
    rt_log(RT_LOG_INFO,
           "range %" PRIu64 ": transfer from server %" PRIu64 " to %" PRIu64
           " at epoch %" PRIu64,
           range_id, c.primary_id, to, c.epoch);
    return 0;
}

bool ms_repl_transferring(const struct ms_repl *r, uint64_t range_id)
{
    const struct ms__repl_range *rr = r ? ms__repl_range(r, range_id) : NULL;
    return rr && rr->xfer;
}
