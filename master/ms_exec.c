/* Execution of splits, merges and moves (contract in ms_exec.h).
 *
 * Split (R on S at K): one durable catalog transaction replaces R by
 * [low, K) and [K, high) with new ids at epoch + 1; ASSIGN_RANGES to S and
 * wait for its reply (bounded); push the map; event. Merge is the same
 * with two adjacent ranges of one server. Nothing is copied: both live in
 * S's LMDB. A front end with the old map gets StaleEpoch and refreshes.
 *
 * Move (R from S to T, docs/DESIGN-moves.md; the states and their legal
 * changes are the table under "the move state machine" below):
 *   1. record the move durably (ms_catalog_move_begin: move id, new
 *      epoch); MOVE_OUT to S with a timeout proportional to R's size;
 *   2. S copies R to T, freezes R and answers with the figures;
 *   3. check nothing changed meanwhile (R's epoch and owner, S did not
 *      register again — its registration reply would have unfrozen R —,
 *      T up and connected), then commit R -> T @ new epoch durably
 *      (ms_catalog_move_commit, which also drops the record);
 *   4. ASSIGN_RANGES to T, wait for the reply; push the map; MOVE_DONE to
 *      S (not waited for: S's next heartbeat reply no longer lists R,
 *      which settles it too); event with the frozen window.
 * Any failure before step 3's commit aborts: MOVE_ABORT to S (unfreeze)
 * and T (discard), repeated on later ticks until each end acknowledged
 * (S's registration also counts: its reply lists R), then the record is
 * forgotten. A master restart finds unsettled records and aborts them
 * the same way once S and T are back.
 *
 * Split and merge of ranges with more than one replica
 * (docs/DESIGN-replication.md §9.1, §9.2): freeze on the primary, commit
 * with the same replica set, assign (see "split of a replicated range"
 * and "merge of replicated ranges" below). A move of such a range
 * (docs/DESIGN-replication.md §9.3, "move of a replicated range" below)
 * adds a learner on the target, waits until it joined the ISR (read from
 * the committed catalog every tick), transfers the primary role to it if
 * the source is the primary, then removes the source from the set. Such
 * a move is not durable: from its learner until it ends it holds the
 * range in ms_repl (ms_repl_move_end), and a set a restart (or a failed
 * removal) leaves larger than rf is trimmed by re-replication's plan.
 *
 * Transfer (the primary role of replicated R from P to in-sync T,
 * docs/DESIGN-replication.md §9.3 step 2): checked here (R replicated, T
 * known and not P, R not busy), then carried out by ms_repl_transfer
 * (TRANSFER_PRIMARY, the seal intent, SEALs, the commit, assignments);
 * its callback ends the op with the event (the ServerBusy window) and
 * the move cool-downs of R, P and T. A refusal by ms_repl leaves no op
 * and no event.
 *
 * What an operator waiting for an operation sees: 400 bad arguments,
 * 404 no such range/server, 409 the range is busy, a move's target holds a
 * copy, or the request makes no sense now (server down, nothing to split at),
 * 500 the catalog failed, 503 master stopping or a move's target down, 504 a
 * timeout (a transfer: it ended with another primary than its target);
 * otherwise 200 with the event. */
#include "ms_exec.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ms_catalog.h"
#include "ms_place.h"
#include "ms_repl.h"
#include "rt_alloc.h"
#include "rt_err.h"
#include "rt_log.h"
#include "rt_time.h"
#include "rt_utf8.h"

#define MS__ABORT_TIMEOUT_MS 5000
#define MS__DONE_TIMEOUT_MS 5000
#define MS__EVENT_SAMPLES 32

/* ---- range bookkeeping ---- */

struct ms_rmeta *ms_exec_rmeta(struct ms_exec *ex, uint64_t id)
{
    bool created;
    struct ms_rmeta *rm =
        ms_vec_get(&ex->rmeta, offsetof(struct ms_rmeta, range_id), id,
                   sizeof(*rm), &created);
    if (created) {
        rm->born_ms = rt_time_mono_ms();
    }
    return rm;
}

const struct ms_rmeta *ms_exec_rmeta_find(const struct ms_exec *ex, uint64_t id)
{
    return ms_vec_find(&ex->rmeta, offsetof(struct ms_rmeta, range_id), id,
                       NULL);
}

static bool ms__range_exists(uint64_t id, void *arg)
{
    struct ms_exec *ex = arg;
    return ms_catalog_range_find(ex->cl->cat, id) != NULL;
}

void ms_exec_rmeta_prune(struct ms_exec *ex)
{
    for (size_t i = 0; i < ex->rmeta.n;) {
        struct ms_rmeta *rm = ex->rmeta.v[i];
        if (!ms_catalog_range_find(ex->cl->cat, rm->range_id)) {
            free(ms_vec_remove(&ex->rmeta, i));
        } else {
            i++;
        }
    }
    ms_load_retain(ex->load, ms__range_exists, ex);
}

void ms_exec_range_created(struct ms_exec *ex, uint64_t range_id)
{
    struct ms_rmeta *rm = ms_exec_rmeta(ex, range_id);
    rm->born_ms = rt_time_mono_ms();
    rm->split_ms = 0;
}

/* ---- the move state machine ---- */

#define MS__BIT(s) (1u << (s))

/* Every legal change of a range move's state, in one place
 * (docs/DESIGN-moves.md):
 *
 *   NEW -> COPYING -> ASSIGNING -> DONE
 *    |        |                     ^
 *    |        v                     |
 *    +---> ABORTING ----------------+
 *
 * NEW -> COPYING: recorded in the catalog, MOVE_OUT about to be sent.
 * NEW -> ABORTING: an unsettled record found at start (master restart).
 * COPYING -> ASSIGNING: MOVE_OUT answered and the move committed.
 * COPYING -> ABORTING: anything failed before the commit.
 * ASSIGNING -> DONE: the target answered ASSIGN_RANGES (or could not: its
 *   next heartbeat reply carries the range).
 * ABORTING -> DONE: both ends acknowledged MOVE_ABORT, record forgotten.
 * A replicated range's move (docs/DESIGN-replication.md §9.3):
 *
 *   NEW -> ADDING -> TRANSFERRING -> REMOVING -> DONE
 *   (ADDING -> REMOVING, ADDING -> DONE, TRANSFERRING -> ABORTING -> DONE)
 *
 * NEW -> ADDING: the learner on the target committed.
 * ADDING -> TRANSFERRING: it joined the ISR and the source is primary.
 * ADDING -> REMOVING: it joined and the source is not primary.
 * ADDING -> DONE: the learner failed or timed out (it left the set).
 * TRANSFERRING -> REMOVING: the source is no longer primary.
 * TRANSFERRING -> ABORTING: the transfer failed, the source still primary:
 *   the target leaves the set again.
 * ADDING, TRANSFERRING, ABORTING -> DONE: also when the range is gone.
 * REMOVING -> DONE: the source left the set (or cannot: it is primary
 *   again after a failover).
 * An operation cut short by shutdown keeps its state; it is freed, and
 * the next start aborts a move that was not committed. */
static const unsigned ms__move_allowed[MS_MOVE__NR] = {
    [MS_MOVE_NEW] = MS__BIT(MS_MOVE_COPYING) | MS__BIT(MS_MOVE_ABORTING) |
                    MS__BIT(MS_MOVE_ADDING),
    [MS_MOVE_COPYING] = MS__BIT(MS_MOVE_ASSIGNING) | MS__BIT(MS_MOVE_ABORTING),
    [MS_MOVE_ASSIGNING] = MS__BIT(MS_MOVE_DONE),
    [MS_MOVE_ABORTING] = MS__BIT(MS_MOVE_DONE),
    [MS_MOVE_DONE] = 0,
    [MS_MOVE_ADDING] = MS__BIT(MS_MOVE_TRANSFERRING) |
                       MS__BIT(MS_MOVE_REMOVING) | MS__BIT(MS_MOVE_DONE),
    [MS_MOVE_TRANSFERRING] = MS__BIT(MS_MOVE_REMOVING) |
                             MS__BIT(MS_MOVE_ABORTING) | MS__BIT(MS_MOVE_DONE),
    [MS_MOVE_REMOVING] = MS__BIT(MS_MOVE_DONE),
};

static const char *const ms__move_state_names[MS_MOVE__NR] = {
    [MS_MOVE_NEW] = "new",
    [MS_MOVE_COPYING] = "copying",
    [MS_MOVE_ASSIGNING] = "assigning",
    [MS_MOVE_ABORTING] = "aborting",
    [MS_MOVE_DONE] = "done",
    [MS_MOVE_ADDING] = "adding",
    [MS_MOVE_TRANSFERRING] = "transferring",
    [MS_MOVE_REMOVING] = "removing",
};

const char *ms_exec_move_state_name(enum ms_move_state st)
{
    return (unsigned)st < MS_MOVE__NR ? ms__move_state_names[st] : "?";
}

/* The only place a move's state changes. An illegal change is a bug in
 * this file: log it and abort rather than go on with a move whose two
 * ends may disagree about who owns the range. */
static void ms__move_set_state(struct ms_op *op, enum ms_move_state to)
{
    if (op->kind != MS_OP_MOVE || (unsigned)to >= MS_MOVE__NR ||
        !(ms__move_allowed[op->state] & MS__BIT(to))) {
        rt_log(RT_LOG_FATAL,
               "move %" PRIu64 " of range %" PRIu64
               ": illegal state change %s -> %s",
               op->move_id, op->range_id, ms_exec_move_state_name(op->state),
               ms_exec_move_state_name(to));
        abort();
    }
    op->state = to;
}

/* ---- ops ---- */

static bool ms__op_holds(const struct ms_op *op)
{
    /* An aborting move keeps its range busy until the source has
     * unfrozen it; the target's cleanup may take longer. */
    return !(op->kind == MS_OP_MOVE && op->state == MS_MOVE_ABORTING &&
             op->s_settled);
}

bool ms_exec_busy(struct ms_exec *ex, uint64_t range_id)
{
    for (size_t i = 0; i < ex->ops.n; i++) {
        const struct ms_op *op = ex->ops.v[i];
        if (!op->finished && ms__op_holds(op) &&
            (op->range_id == range_id || op->range_id2 == range_id)) {
            return true;
        }
    }
    return false;
}

unsigned ms_exec_moves(struct ms_exec *ex)
{
    unsigned n = 0;
    for (size_t i = 0; i < ex->ops.n; i++) {
        const struct ms_op *op = ex->ops.v[i];
        n += !op->finished &&
             (op->kind == MS_OP_MOVE || op->kind == MS_OP_TRANSFER) &&
             ms__op_holds(op);
    }
    return n;
}

unsigned ms_exec_server_moving(struct ms_exec *ex, uint64_t sid)
{
    unsigned n = 0;
    for (size_t i = 0; i < ex->ops.n; i++) {
        const struct ms_op *op = ex->ops.v[i];
        n += !op->finished &&
             (op->kind == MS_OP_MOVE || op->kind == MS_OP_TRANSFER) &&
             ms__op_holds(op) && (op->server_id == sid || op->dst == sid);
    }
    return n;
}

static struct ms_op *ms__op_new(struct ms_exec *ex,
                                enum ms_op_kind kind,
                                const char *origin,
                                struct ms_admin_req *req)
{
    struct ms_op *op = rt_xcalloc(1, sizeof(*op));
    op->ex = ex;
    op->kind = kind;
    op->origin = origin;
    op->t0_ms = rt_time_mono_ms();
    op->req = req;
    op->ev = json_object();
    ms_vec_push(&ex->ops, op);
    return op;
}

static const char *const ms__op_kind_names[] = {
    [MS_OP_SPLIT] = "split",
    [MS_OP_MERGE] = "merge",
    [MS_OP_MOVE] = "move",
    [MS_OP_TRANSFER] = "transfer",
};

/* Starts the operation @o orders on its range @r (owner included); its
 * event opens with the range, the kind and the origin. */
static struct ms_op *ms__op_begin(struct ms_exec *ex,
                                  const struct ms_exec_order *o,
                                  const struct ms_range *r)
{
    struct ms_op *op = ms__op_new(ex, o->kind, o->origin, o->req);
    ms_exec_ev_range(ex, op->ev, r);
    json_object_set_new(op->ev, "kind",
                        json_string(ms__op_kind_names[o->kind]));
    json_object_set_new(op->ev, "origin", json_string(o->origin));
    op->range_id = r->id;
    op->server_id = r->server_id;
    op->trace_id = o->trace_id;
    return op;
}

/* The range an order names, or NULL with @err saying there is none (the
 * caller returns RT_ENOTFOUND). */
static const struct ms_range *ms__range_arg(struct ms_exec *ex,
                                            uint64_t id,
                                            char *err,
                                            size_t errlen)
{
    const struct ms_range *r = ms_catalog_range_find(ex->cl->cat, id);
    if (!r) {
        snprintf(err, errlen, "no range %" PRIu64, id);
    }
    return r;
}

/* The range a merge order joins with @a: its second range, or else the
 * right-hand neighbour of @a in the same table. 0, RT_ENOTFOUND (no such
 * range) or RT_EINVAL (@a is its table's last), @err saying why. */
static int ms__merge_partner(struct ms_exec *ex,
                             const struct ms_exec_order *o,
                             const struct ms_range *a,
                             const struct ms_range **b,
                             char *err,
                             size_t errlen)
{
    *b = NULL;
    if (o->range_id2 != 0) {
        *b = ms__range_arg(ex, o->range_id2, err, errlen);
        return *b ? 0 : RT_ENOTFOUND;
    }
    for (size_t i = 0; !a->high_inf && i < ms_catalog_nranges(ex->cl->cat);
         i++) {
        const struct ms_range *x = ms_catalog_range_at(ex->cl->cat, i);
        if (x->table_id == a->table_id && strcmp(x->low, a->high) == 0) {
            *b = x;
            return 0;
        }
    }
    snprintf(err, errlen,
             "range %" PRIu64
             " is the last of its table: nothing to merge "
             "it with",
             a->id);
    return RT_EINVAL;
}

/* Frees @op once it is finished and nothing of ours for it is in flight. */
static void ms__op_maybe_free(struct ms_op *op)
{
    struct ms_exec *ex = op->ex;
    if (!op->finished || op->calls) {
        return;
    }
    for (size_t i = 0; i < ex->ops.n; i++) {
        if (ex->ops.v[i] == op) {
            ms_vec_remove(&ex->ops, i);
            break;
        }
    }
    json_decref(op->ev);
    if (op->req) {
        ms_admin_complete(ex->admin, op->req, 503,
                          rt_xstrdup("{\"error\":\"master is stopping\"}"));
    }
    free(op);
    if (!ex->cl->stopping) {
        ms_cluster_changed(ex->cl);
    }
}

static int ms__http_status(int rc)
{
    switch (rc) {
        case 0:
            return 200;
        case RT_EINVAL:
            return 400;
        case RT_ENOTFOUND:
            return 404;
        case RT_EBUSY:
        case RT_ESTALE:
        case RT_EEXIST:
            return 409;
        case RT_ENOCONN:
            return 503;
        case RT_ETIMEDOUT:
            return 504;
        case RT_ENOTIMPL:
            return 501;
        default:
            return 500;
    }
}

char *ms_exec_json_text(json_t *o)
{
    char *s = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER |
                                JSON_REAL_PRECISION(10) | JSON_ENSURE_ASCII);
    return s ? s : rt_xstrdup("{}");
}

void ms_exec_admin_fail(struct ms_exec *ex,
                        struct ms_admin_req *req,
                        int rc,
                        const char *msg)
{
    json_t *o = json_object();
    json_object_set_new(o, "error", json_string(msg));
    json_object_set_new(o, "code", json_string(rt_err_name(rc)));
    ms_admin_complete(ex->admin, req, ms__http_status(rc),
                      ms_exec_json_text(o));
    json_decref(o);
}

uint64_t ms_exec_event(struct ms_exec *ex, json_t *e)
{
    if (!ex->events) {
        json_decref(e);
        return 0;
    }
    return ms_events_add(ex->events, e);
}

json_t *ms_exec_event_get(struct ms_exec *ex, json_t *e)
{
    if (!ex->events) {
        return e;
    }
    return ms_events_add_get(ex->events, e);
}

/* Writes @op's outcome (@rc, @error) into its event, records the event
 * and answers the operator waiting for @op. */
static void ms__op_report(struct ms_op *op, int rc, const char *error)
{
    struct ms_exec *ex = op->ex;
    json_t *e = op->ev;

    op->reported = true;
    json_object_set_new(e, "outcome",
                        json_string(rc == 0                  ? "ok"
                                    : op->kind == MS_OP_MOVE ? "aborted"
                                                             : "failed"));
    json_object_set_new(
        e, "duration_ms",
        json_integer((json_int_t)(rt_time_mono_ms() - op->t0_ms)));
    if (rc) {
        json_object_set_new(e, "error", json_string(error ? error : ""));
        json_object_set_new(e, "code", json_string(rt_err_name(rc)));
    }
    op->ev = ms_exec_event_get(ex, e);
    {
        /* The ranges a split or merge made, for a replay's comparison. */
        size_t nnew = op->kind == MS_OP_SPLIT   ? 2
                      : op->kind == MS_OP_MERGE ? 1
                                                : 0;
        uint64_t born = rc == 0 && nnew && op->new_ids[0]
                            ? ms_exec_rmeta(ex, op->new_ids[0])->born_ms
                            : 0;
        ms_trace_rec_outcome(
            ex->trace, op->trace_id, ms__op_kind_names[op->kind],
            rc == 0                  ? "done"
            : op->kind == MS_OP_MOVE ? "aborted"
                                     : "failed",
            rc ? error : NULL, op->new_ids, rc == 0 ? nnew : 0, born);
    }
    if (op->req) {
        ms_admin_complete(ex->admin, op->req, ms__http_status(rc),
                          ms_exec_json_text(op->ev));
        op->req = NULL;
    }
}

/* Finishes @op with outcome @rc: writes its event, answers the operator. */
static void ms__op_finish(struct ms_op *op, int rc, const char *error)
{
    if (op->finished) {
        return;
    }
    op->finished = true;
    if (op->ex->cl->stopping) {
        /* No event: a move still unsettled is aborted by the next start. */
        op->reported = true;
    } else {
        ms__op_report(op, rc, error);
    }
    ms__op_maybe_free(op);
}

/* The catalog refused @op's change: @op fails at once (its event is
 * written) and the caller answers the operator with @err. */
static int ms__op_catalog_fail(struct ms_op *op,
                               int rc,
                               char *err,
                               size_t errlen)
{
    snprintf(err, errlen, "catalog: %s", rt_strerror(rc));
    op->req = NULL;
    ms__op_finish(op, rc, err);
    return rc;
}

/* ---- JSON helpers ---- */

static json_t *ms__str_or_null(const char *s)
{
    json_t *j;
    if (!s) {
        return json_null();
    }
    j = json_string(s);
    return j ? j : json_string("?");
}

json_t *ms_exec_load_json(const struct ms_load_range *l, bool samples)
{
    json_t *o = json_object();
    struct ms_load_rates z = {0};
    const struct ms_load_rates *a = l ? &l->avg : &z;
    json_object_set_new(o, "demand", json_real(round(ms_load_demand(a))));
    json_object_set_new(o, "ent_s", json_real(round(a->ent_s)));
    json_object_set_new(o, "req_s", json_real(round(a->req_s)));
    json_object_set_new(o, "wbytes_s", json_real(round(a->wbytes_s)));
    json_object_set_new(o, "thr_s", json_real(round(a->thr_s)));
    json_object_set_new(o, "scan_s", json_real(round(a->scan_s)));
    json_object_set_new(o, "exec_frac",
                        json_real(round(a->exec_frac * 1000) / 1000));
    json_object_set_new(o, "keys",
                        json_integer(l ? (json_int_t)l->key_count : 0));
    json_object_set_new(o, "bytes",
                        json_integer(l ? (json_int_t)l->key_bytes : 0));
    if (l && l->estimated) {
        json_object_set_new(o, "estimated", json_true());
    }
    if (samples && l && l->nsamples) {
        json_t *arr = json_array();
        size_t n =
            l->nsamples < MS__EVENT_SAMPLES ? l->nsamples : MS__EVENT_SAMPLES;
        /* The most recent ones. */
        for (size_t k = 0; k < n; k++) {
            size_t idx =
                (l->sample_next + MS_LOAD_SAMPLES - 1 - k) % MS_LOAD_SAMPLES;
            const struct ms_pk_sample *s = &l->samples[idx];
            json_t *p;
            if (!s->pk) {
                continue;
            }
            p = json_array();
            json_array_append_new(p, ms__str_or_null(s->pk));
            json_array_append_new(p, json_real(round(s->w * 10) / 10));
            json_array_append_new(arr, p);
        }
        json_object_set_new(o, "samples", arr);
    }
    return o;
}

void ms_exec_ev_range(struct ms_exec *ex, json_t *e, const struct ms_range *r)
{
    const struct ms_table *t = ms_catalog_table_by_id(ex->cl->cat, r->table_id);
    json_object_set_new(e, "range", json_integer((json_int_t)r->id));
    json_object_set_new(e, "table", t ? json_string(t->name) : json_null());
    json_object_set_new(e, "table_id", json_integer((json_int_t)r->table_id));
    json_object_set_new(e, "low", ms__str_or_null(r->low));
    json_object_set_new(e, "high",
                        r->high_inf ? json_null() : ms__str_or_null(r->high));
    json_object_set_new(e, "server", json_integer((json_int_t)r->server_id));
    json_object_set_new(e, "epoch", json_integer((json_int_t)r->epoch));
}

void ms_exec_ev_decision(json_t *e, const struct ms_decision *d)
{
    if (!d) {
        return;
    }
    json_object_set_new(e, "reason", json_string(d->reason));
    if (d->threshold > 0) {
        json_object_set_new(e, "threshold", json_real(round(d->threshold)));
    }
    if (d->kind == MS_DECIDE_MOVE) {
        json_object_set_new(e, "src_demand", json_real(round(d->src_load)));
        json_object_set_new(e, "dst_demand", json_real(round(d->dst_load)));
        json_object_set_new(e, "mean_demand", json_real(round(d->mean_load)));
    }
    if (d->kind == MS_DECIDE_SPLIT) {
        json_object_set_new(e, "left_share",
                            json_real(round(d->share * 1000) / 1000));
    }
}

/* ---- split ---- */

/* The owner answered ASSIGN_RANGES for @op's committed change (@status):
 * the front ends get the new map now. A failure only goes into the
 * event: committed either way, the owner's next heartbeat reply carries
 * the new assignment. */
static void ms__op_assigned(struct ms_op *op, int status)
{
    ms_cluster_map_push(op->ex->cl);
    if (status) {
        json_object_set_new(op->ev, "assign_error",
                            json_string(rt_strerror(status)));
    }
}

static void ms__split_assigned_cb(int status,
                                  const uint8_t *body,
                                  size_t len,
                                  void *arg)
{
    struct ms_op *op = arg;
    (void)body;
    (void)len;
    op->calls--;
    if (!op->ex->cl->stopping) {
        ms__op_assigned(op, status);
    }
    json_object_set_new(
        op->ev, "assign_ms",
        json_integer((json_int_t)(rt_time_mono_ms() - op->out_done_ms)));
    ms__op_finish(op, 0, NULL);
}

/* @op's change of the map is committed: marks the map changed and sends
 * ASSIGN_RANGES to @sid; @cb gets the reply, or RT_ENOCONN at once when
 * @sid is not connected (its next heartbeat reply carries the ranges). */
static void ms__op_assign(struct ms_op *op, uint64_t sid, rt_rpc_reply_cb cb)
{
    ms_cluster_map_changed(op->ex->cl, false);
    op->calls++;
    if (ms_cluster_assign_push(op->ex->cl, sid, 0, cb, op) != 0) {
        cb(RT_ENOCONN, NULL, 0, op);
    }
}

static int ms__split(struct ms_exec *ex,
                     const struct ms_exec_order *o,
                     const struct ms_range *r,
                     char *err,
                     size_t errlen)
{
    uint64_t range_id = r->id;
    const char *key = o->key;
    const struct ms_load_range *l;
    struct ms_range_put puts[2];
    char *median = NULL;
    uint64_t ids[2], epoch, sid, table_id;
    struct ms_op *op;
    struct ms_rmeta *rm;
    double share = -1;
    int rc;

    if (ms_exec_busy(ex, range_id)) {
        snprintf(err, errlen,
                 "range %" PRIu64
                 " is busy (a move, split or "
                 "merge of it is in flight)",
                 range_id);
        return RT_EBUSY;
    }
    if (!ms_cluster_server_usable(ex->cl, r->server_id)) {
        snprintf(err, errlen,
                 "server %" PRIu64 " owning range %" PRIu64 " is down",
                 r->server_id, range_id);
        return RT_EBUSY;
    }
    l = ms_load_find(ex->load, range_id);
    if (!key) {
        median = ms_load_split_key(l, r->low, r->high_inf ? NULL : r->high,
                                   rt_time_mono_ms(), &share);
        if (!median) {
            snprintf(err, errlen,
                     "range %" PRIu64
                     " has no load samples "
                     "with two PartitionKeys: give the split key",
                     range_id);
            return RT_EBUSY;
        }
        key = median;
    }
    if (rt_utf16_cmpz(key, r->low) <= 0 ||
        (!r->high_inf && rt_utf16_cmpz(key, r->high) >= 0)) {
        snprintf(err, errlen,
                 "split key must lie strictly inside the "
                 "range (low < key < high)");
        free(median);
        return RT_EINVAL;
    }
    op = ms__op_begin(ex, o, r);
    json_object_set_new(op->ev, "key", ms__str_or_null(key));
    if (share >= 0) {
        json_object_set_new(op->ev, "left_share",
                            json_real(round(share * 1000) / 1000));
    }
    ms_exec_ev_decision(op->ev, o->d);
    json_object_set_new(op->ev, "load", ms_exec_load_json(l, true));
    sid = r->server_id;
    epoch = r->epoch + 1;
    table_id = r->table_id;
    puts[0] =
        (struct ms_range_put){0, table_id, r->low, key, false, sid, epoch};
    puts[1] = (struct ms_range_put){0,           table_id, key,  r->high,
                                    r->high_inf, sid,      epoch};
    rc = ms_catalog_update_ranges(ex->cl->cat, puts, 2, &range_id, 1, ids);
    if (rc) {
        free(median);
        return ms__op_catalog_fail(op, rc, err, errlen);
    }
    /* r is gone from the catalog now. */
    op->new_ids[0] = ids[0];
    op->new_ids[1] = ids[1];
    ms_load_split(ex->load, range_id, key, ids[0], ids[1]);
    for (int i = 0; i < 2; i++) {
        rm = ms_exec_rmeta(ex, ids[i]);
        rm->born_ms = rm->split_ms = rt_time_mono_ms();
    }
    ex->n_splits++;
    json_t *nr = json_array();
    json_array_append_new(nr, json_integer((json_int_t)ids[0]));
    json_array_append_new(nr, json_integer((json_int_t)ids[1]));
    json_object_set_new(op->ev, "new_ranges", nr);
    json_object_set_new(op->ev, "new_epoch", json_integer((json_int_t)epoch));
    rt_log(RT_LOG_INFO,
           "split range %" PRIu64 " at '%s' -> %" PRIu64 ", %" PRIu64
           " on server %" PRIu64 " (%s)",
           range_id, key, ids[0], ids[1], sid, o->origin);
    free(median);
    op->out_done_ms = rt_time_mono_ms();
    ms__op_assign(op, sid, ms__split_assigned_cb);
    return 0;
}

/* ---- split of a replicated range ---- */

/* docs/DESIGN-replication.md §9.1, as built: RANGE_FREEZE to the primary
 * P (new writes RT_EBUSY; answered once cw = its last LSN, so every ISR
 * member holds all of R); then, if nothing changed meanwhile (R's epoch
 * is the one P answered at, same primary, no seal intent, the replica
 * core STABLE, P did not register again — its registration reply would
 * have thawed R), one catalog commit replaces R by its two halves with
 * R's replica set, ISR and primary at epoch + 1 (ms_catalog_split_repl);
 * ASSIGN_RANGES to the secondaries, then to P; map push once P answered.
 * Every replica derives the children's `rs` records from R's when it
 * applies the assignment (ps_repl.c), so they continue from R's LSN.
 * Anything else before the commit: RANGE_THAW to P (not waited for: if
 * it is lost, P's next registration thaws R) and the split fails. */

#define MS__FREEZE_TIMEOUT_MS 5000
#define MS__THAW_TIMEOUT_MS 3000

/* The split key of @o on @r (the load median when @o names none), or
 * NULL with @err and *@rc; *@share is the median's left share (-1 when
 * the key was given). The result is malloc'd. */
static char *ms__split_key(struct ms_exec *ex,
                           const struct ms_exec_order *o,
                           const struct ms_range *r,
                           double *share,
                           int *rc,
                           char *err,
                           size_t errlen)
{
    char *key;
    *share = -1;
    if (o->key) {
        key = rt_xstrdup(o->key);
    } else {
        key = ms_load_split_key(ms_load_find(ex->load, r->id), r->low,
                                r->high_inf ? NULL : r->high, rt_time_mono_ms(),
                                share);
        if (!key) {
            snprintf(err, errlen,
                     "range %" PRIu64
                     " has no load samples "
                     "with two PartitionKeys: give the split key",
                     r->id);
            *rc = RT_EBUSY;
            return NULL;
        }
    }
    if (rt_utf16_cmpz(key, r->low) <= 0 ||
        (!r->high_inf && rt_utf16_cmpz(key, r->high) >= 0)) {
        snprintf(err, errlen,
                 "split key must lie strictly inside the "
                 "range (low < key < high)");
        free(key);
        *rc = RT_EINVAL;
        return NULL;
    }
    return key;
}

/* RANGE_THAW to @op's primary: the split will not commit. */
static void ms__rsplit_thaw(struct ms_op *op)
{
    Rt__FreezeReq req = RT__FREEZE_REQ__INIT;
    req.range_id = op->range_id;
    req.master_term = ms_catalog_master_term(op->ex->cl->cat);
    (void)ms_cluster_call(op->ex->cl, op->server_id, RT__METHOD__RANGE_THAW,
                          "RANGE_THAW", &req.base, MS__THAW_TIMEOUT_MS, NULL,
                          NULL);
}

/* Why @op's range cannot be split now that its primary froze it at
 * @epoch (NULL: it can). */
static const char *ms__rsplit_changed(struct ms_op *op, uint64_t epoch)
{
    struct ms_exec *ex = op->ex;
    const struct ms_range *r = ms_catalog_range_find(ex->cl->cat, op->range_id);
    const struct ms_server *p = ms_cluster_server_find(ex->cl, op->server_id);
    const char *st =
        ex->repl ? ms_repl_range_state(ex->repl, op->range_id) : NULL;
    if (!r || r->epoch != epoch || r->server_id != op->server_id ||
        r->seal_epoch != 0) {
        return "the range changed while it was frozen";
    }
    if (!p || p->reg_gen != op->src_reg_gen) {
        return "the primary registered again while frozen";
    }
    if (st && strcmp(st, "stable") != 0) {
        return "a replication change of the range is in flight";
    }
    return NULL;
}

/* Commits @op's split of its frozen range (epoch @epoch) and assigns the
 * children. 0, or the error with @err (nothing committed). */
static int ms__rsplit_commit(struct ms_op *op,
                             uint64_t epoch,
                             char *err,
                             size_t errlen)
{
    struct ms_exec *ex = op->ex;
    const char *key = json_string_value(json_object_get(op->ev, "key"));
    const struct ms_range *c;
    uint64_t ids[2];
    struct ms_rmeta *rm;
    int rc;

    rc = ms_catalog_split_repl(ex->cl->cat, op->range_id, epoch, key, ids);
    if (rc) {
        snprintf(err, errlen, "catalog: %s", rt_strerror(rc));
        return rc;
    }
    op->new_ids[0] = ids[0];
    op->new_ids[1] = ids[1];
    op->new_epoch = epoch + 1;
    if (ex->repl) {
        ms_repl_sync(ex->repl); /* forgets R, follows the children */
    }
    ms_load_split(ex->load, op->range_id, key, ids[0], ids[1]);
    for (int i = 0; i < 2; i++) {
        rm = ms_exec_rmeta(ex, ids[i]);
        rm->born_ms = rm->split_ms = rt_time_mono_ms();
    }
    ex->n_splits++;
    json_t *nr = json_array();
    json_array_append_new(nr, json_integer((json_int_t)ids[0]));
    json_array_append_new(nr, json_integer((json_int_t)ids[1]));
    json_object_set_new(op->ev, "new_ranges", nr);
    json_object_set_new(op->ev, "new_epoch",
                        json_integer((json_int_t)op->new_epoch));
    rt_log(RT_LOG_INFO,
           "split replicated range %" PRIu64 " at '%s' -> %" PRIu64 ", %" PRIu64
           " (primary %" PRIu64 ", epoch %" PRIu64 ", %s)",
           op->range_id, key, ids[0], ids[1], op->server_id, op->new_epoch,
           op->origin);
    /* The secondaries first: the primary's children serve at once and
     * stream to them. Not waited for (a late one learns it from its
     * heartbeat reply; appends meanwhile are resent). */
    c = ms_catalog_range_find(ex->cl->cat, ids[0]);
    ms_cluster_map_changed(ex->cl, false);
    for (size_t i = 0; c && i < c->nreplicas; i++) {
        uint64_t sid = c->replicas[i].server_id;
        if (sid != op->server_id) {
            (void)ms_cluster_assign_push(ex->cl, sid, 0, NULL, NULL);
        }
    }
    op->out_done_ms = rt_time_mono_ms();
    ms__op_assign(op, op->server_id, ms__split_assigned_cb);
    return 0;
}

static void ms__rsplit_frozen_cb(int status,
                                 const uint8_t *body,
                                 size_t len,
                                 void *arg)
{
    struct ms_op *op = arg;
    Rt__FreezeResp *resp = NULL;
    const char *why;
    char err[256];
    int rc = status;

    op->calls--;
    if (op->ex->cl->stopping) {
        ms__op_finish(op, RT_ECANCELED, "master stopping");
        return;
    }
    if (rc == 0 && !(resp = rt__freeze_resp__unpack(NULL, len, body))) {
        rc = RT_EIO;
    }
    if (rc) {
        snprintf(err, sizeof(err), "RANGE_FREEZE: %s", rt_strerror(rc));
        ms__rsplit_thaw(op);
        ms__op_finish(op, rc, err);
        return;
    }
    json_t *fz = json_object();
    json_object_set_new(fz, "lsn", json_integer((json_int_t)resp->lsn));
    json_object_set_new(fz, "frozen_ms",
                        json_integer((json_int_t)resp->frozen_ms));
    json_object_set_new(op->ev, "freeze", fz);
    why = ms__rsplit_changed(op, resp->epoch);
    rc = why ? RT_ESTALE : ms__rsplit_commit(op, resp->epoch, err, sizeof(err));
    rt__freeze_resp__free_unpacked(resp, NULL);
    if (rc) {
        ms__rsplit_thaw(op);
        ms__op_finish(op, rc, why ? why : err);
    }
}

static int ms__rsplit(struct ms_exec *ex,
                      const struct ms_exec_order *o,
                      const struct ms_range *r,
                      char *err,
                      size_t errlen)
{
    Rt__FreezeReq req = RT__FREEZE_REQ__INIT;
    const struct ms_server *p = ms_cluster_server_find(ex->cl, r->server_id);
    const char *st = ex->repl ? ms_repl_range_state(ex->repl, r->id) : NULL;
    struct ms_op *op;
    double share;
    char *key;
    int rc = 0;

    if (ms_exec_busy(ex, r->id)) {
        snprintf(err, errlen,
                 "range %" PRIu64
                 " is busy (a move, split or "
                 "merge of it is in flight)",
                 r->id);
        return RT_EBUSY;
    }
    if (!p || !ms_cluster_server_usable(ex->cl, r->server_id)) {
        snprintf(err, errlen,
                 "server %" PRIu64 " owning range %" PRIu64 " is down",
                 r->server_id, r->id);
        return RT_EBUSY;
    }
    if (r->seal_epoch != 0 || (st && strcmp(st, "stable") != 0)) {
        snprintf(err, errlen,
                 "range %" PRIu64 " is changing its replica configuration (%s)",
                 r->id, st ? st : "sealing");
        return RT_EBUSY;
    }
    key = ms__split_key(ex, o, r, &share, &rc, err, errlen);
    if (!key) {
        return rc;
    }
    op = ms__op_begin(ex, o, r);
    json_object_set_new(op->ev, "key", ms__str_or_null(key));
    free(key);
    if (share >= 0) {
        json_object_set_new(op->ev, "left_share",
                            json_real(round(share * 1000) / 1000));
    }
    json_object_set_new(op->ev, "replicas",
                        json_integer((json_int_t)r->nreplicas));
    ms_exec_ev_decision(op->ev, o->d);
    json_object_set_new(op->ev, "load",
                        ms_exec_load_json(ms_load_find(ex->load, r->id), true));
    op->src_reg_gen = p->reg_gen;
    req.range_id = r->id;
    req.epoch = r->epoch;
    req.master_term = ms_catalog_master_term(ex->cl->cat);
    rc = ms_cluster_call(ex->cl, r->server_id, RT__METHOD__RANGE_FREEZE,
                         "RANGE_FREEZE", &req.base, MS__FREEZE_TIMEOUT_MS,
                         ms__rsplit_frozen_cb, op);
    if (rc) {
        snprintf(err, errlen, "RANGE_FREEZE: %s", rt_strerror(rc));
        op->req = NULL;
        ms__op_finish(op, rc, err);
        return rc;
    }
    op->calls++;
    ms_cluster_changed(ex->cl); /* the split shows in "ops" at once */
    return 0;
}

/* ---- merge of replicated ranges ---- */

/* docs/DESIGN-replication.md §9.2, built like the split of §9.1: both
 * ranges must have the same replica set, ISR and primary, with every
 * replica in sync (a copy outside the ISR would take the merged range's
 * LSN without holding both parents: refused 409 with the reason). Both
 * are frozen on the primary (RANGE_FREEZE each); once both answered and
 * nothing changed, one commit replaces them by one range at max(epochs)
 * + 1 (ms_catalog_merge_repl); each replica starts it at the higher of
 * the parents' LSNs (ps_repl.c). Any failure before the commit thaws
 * both. */

/* Why @a and @b (adjacent, in key order) cannot be merged as replicated
 * ranges, or NULL. @buf holds the reason. */
static const char *ms__rmerge_refusal(const struct ms_range *a,
                                      const struct ms_range *b,
                                      char *buf,
                                      size_t len)
{
    const struct ms_range *rs[2] = {a, b};
    for (int k = 0; k < 2; k++) {
        if (rs[k]->nisr != rs[k]->nreplicas) {
            snprintf(buf, len,
                     "range %" PRIu64
                     " has %zu replicas but %zu in sync: "
                     "a merge needs every replica in sync",
                     rs[k]->id, rs[k]->nreplicas, rs[k]->nisr);
            return buf;
        }
    }
    if (a->nreplicas != b->nreplicas || a->server_id != b->server_id ||
        a->nisr != b->nisr) {
        snprintf(buf, len,
                 "ranges %" PRIu64 " and %" PRIu64
                 " have different replica sets, ISRs or primaries: move or "
                 "transfer one first",
                 a->id, b->id);
        return buf;
    }
    for (size_t i = 0; i < a->nreplicas; i++) {
        bool same = false;
        for (size_t j = 0; j < b->nreplicas; j++) {
            same =
                same || (b->replicas[j].server_id == a->replicas[i].server_id &&
                         b->replicas[j].role == a->replicas[i].role);
        }
        if (!same) {
            snprintf(buf, len,
                     "ranges %" PRIu64 " and %" PRIu64
                     " have different replica sets: server %" PRIu64
                     " is not a replica of both in the same role",
                     a->id, b->id, a->replicas[i].server_id);
            return buf;
        }
    }
    return NULL;
}

static void ms__rmerge_thaw(struct ms_op *op)
{
    ms__rsplit_thaw(op);
    if (op->range_id2) {
        uint64_t id = op->range_id;
        op->range_id = op->range_id2;
        ms__rsplit_thaw(op);
        op->range_id = id;
    }
}

/* Both freezes answered: commit and assign, or thaw and fail. */
static void ms__rmerge_decide(struct ms_op *op)
{
    struct ms_exec *ex = op->ex;
    const char *why = NULL;
    char err[256];
    uint64_t id, ids[2] = {op->range_id, op->range_id2};
    struct ms_rmeta *rm;
    const struct ms_range *m;
    uint64_t split_ms = 0;
    int rc = op->frz_rc;

    if (rc) {
        snprintf(err, sizeof(err), "RANGE_FREEZE: %s", rt_strerror(rc));
        why = err;
    }
    for (int k = 0; !why && k < 2; k++) {
        uint64_t keep = op->range_id;
        op->range_id = ids[k];
        why = ms__rsplit_changed(op, op->frz_epoch[k]);
        op->range_id = keep;
        rc = why ? RT_ESTALE : 0;
    }
    if (!why) {
        for (int k = 0; k < 2; k++) {
            rm = ms_exec_rmeta(ex, ids[k]);
            if (rm->split_ms > split_ms) {
                split_ms = rm->split_ms;
            }
        }
        rc = ms_catalog_merge_repl(ex->cl->cat, ids[0], op->frz_epoch[0],
                                   ids[1], op->frz_epoch[1], &id);
        if (rc) {
            snprintf(err, sizeof(err), "catalog: %s", rt_strerror(rc));
            why = err;
        }
    }
    if (why) {
        ms__rmerge_thaw(op);
        ms__op_finish(op, rc, why);
        return;
    }
    op->new_ids[0] = id;
    if (ex->repl) {
        ms_repl_sync(ex->repl); /* forgets both, follows the merged one */
    }
    ms_load_merge(ex->load, ids[0], ids[1], id);
    rm = ms_exec_rmeta(ex, id);
    rm->born_ms = rt_time_mono_ms();
    rm->split_ms = split_ms;
    ex->n_merges++;
    m = ms_catalog_range_find(ex->cl->cat, id);
    op->new_epoch = m ? m->epoch : 0;
    json_object_set_new(op->ev, "new_range", json_integer((json_int_t)id));
    json_object_set_new(op->ev, "new_epoch",
                        json_integer((json_int_t)op->new_epoch));
    rt_log(RT_LOG_INFO,
           "merged replicated ranges %" PRIu64 " and %" PRIu64 " -> %" PRIu64
           " (primary %" PRIu64 ", epoch %" PRIu64 ", %s)",
           ids[0], ids[1], id, op->server_id, op->new_epoch, op->origin);
    ms_cluster_map_changed(ex->cl, false);
    for (size_t i = 0; m && i < m->nreplicas; i++) {
        uint64_t sid = m->replicas[i].server_id;
        if (sid != op->server_id) {
            (void)ms_cluster_assign_push(ex->cl, sid, 0, NULL, NULL);
        }
    }
    op->out_done_ms = rt_time_mono_ms();
    ms__op_assign(op, op->server_id, ms__split_assigned_cb);
}

static void ms__rmerge_frozen(struct ms_op *op,
                              int k,
                              int status,
                              const uint8_t *body,
                              size_t len)
{
    Rt__FreezeResp *resp = NULL;
    op->calls--;
    if (op->ex->cl->stopping) {
        if (op->calls == 0) {
            ms__op_finish(op, RT_ECANCELED, "master stopping");
        }
        return;
    }
    if (status == 0 && !(resp = rt__freeze_resp__unpack(NULL, len, body))) {
        status = RT_EIO;
    }
    if (status) {
        op->frz_rc = op->frz_rc ? op->frz_rc : status;
    } else {
        json_t *fz = json_object_get(op->ev, "freeze");
        json_t *one = json_object();
        json_object_set_new(one, "lsn", json_integer((json_int_t)resp->lsn));
        json_object_set_new(one, "frozen_ms",
                            json_integer((json_int_t)resp->frozen_ms));
        json_array_append_new(fz, one);
        op->frz_epoch[k] = resp->epoch;
        rt__freeze_resp__free_unpacked(resp, NULL);
    }
    if (op->calls == 0) {
        ms__rmerge_decide(op);
    }
}

static void ms__rmerge_frozen_a_cb(int status,
                                   const uint8_t *body,
                                   size_t len,
                                   void *arg)
{
    ms__rmerge_frozen(arg, 0, status, body, len);
}

static void ms__rmerge_frozen_b_cb(int status,
                                   const uint8_t *body,
                                   size_t len,
                                   void *arg)
{
    ms__rmerge_frozen(arg, 1, status, body, len);
}

static int ms__rmerge(struct ms_exec *ex,
                      const struct ms_exec_order *o,
                      const struct ms_range *a,
                      char *err,
                      size_t errlen)
{
    rt_rpc_reply_cb cbs[2] = {ms__rmerge_frozen_a_cb, ms__rmerge_frozen_b_cb};
    const struct ms_range *b = NULL, *rs[2];
    const struct ms_server *p;
    struct ms_op *op;
    json_t *parts;
    char why[200];
    int rc = 0;

    if ((rc = ms__merge_partner(ex, o, a, &b, err, errlen)) != 0) {
        return rc;
    }
    if (a->table_id != b->table_id || a->high_inf ||
        strcmp(a->high, b->low) != 0) {
        snprintf(err, errlen,
                 "ranges %" PRIu64 " and %" PRIu64 " are not adjacent", a->id,
                 b->id);
        return RT_EINVAL;
    }
    if (ms__rmerge_refusal(a, b, why, sizeof(why))) {
        snprintf(err, errlen, "%s", why);
        return RT_EBUSY;
    }
    if (ms_exec_busy(ex, a->id) || ms_exec_busy(ex, b->id)) {
        snprintf(err, errlen, "range %" PRIu64 " or %" PRIu64 " is busy", a->id,
                 b->id);
        return RT_EBUSY;
    }
    p = ms_cluster_server_find(ex->cl, a->server_id);
    if (!p || !ms_cluster_server_usable(ex->cl, a->server_id)) {
        snprintf(err, errlen, "server %" PRIu64 " is down", a->server_id);
        return RT_EBUSY;
    }
    rs[0] = a;
    rs[1] = b;
    for (int k = 0; k < 2; k++) {
        const char *st =
            ex->repl ? ms_repl_range_state(ex->repl, rs[k]->id) : NULL;
        if (rs[k]->seal_epoch != 0 || (st && strcmp(st, "stable") != 0)) {
            snprintf(err, errlen,
                     "range %" PRIu64
                     " is changing its replica configuration (%s)",
                     rs[k]->id, st ? st : "sealing");
            return RT_EBUSY;
        }
    }
    op = ms__op_begin(ex, o, a);
    json_object_set_new(op->ev, "range2", json_integer((json_int_t)b->id));
    json_object_set_new(op->ev, "high",
                        b->high_inf ? json_null() : ms__str_or_null(b->high));
    json_object_set_new(op->ev, "replicas",
                        json_integer((json_int_t)a->nreplicas));
    json_object_set_new(op->ev, "freeze", json_array());
    ms_exec_ev_decision(op->ev, o->d);
    parts = json_array();
    json_array_append_new(
        parts, ms_exec_load_json(ms_load_find(ex->load, a->id), false));
    json_array_append_new(
        parts, ms_exec_load_json(ms_load_find(ex->load, b->id), false));
    json_object_set_new(op->ev, "loads", parts);
    op->range_id2 = b->id;
    op->src_reg_gen = p->reg_gen;
    for (int k = 0; k < 2; k++) {
        Rt__FreezeReq req = RT__FREEZE_REQ__INIT;
        req.range_id = rs[k]->id;
        req.epoch = rs[k]->epoch;
        req.master_term = ms_catalog_master_term(ex->cl->cat);
        rc = ms_cluster_call(ex->cl, a->server_id, RT__METHOD__RANGE_FREEZE,
                             "RANGE_FREEZE", &req.base, MS__FREEZE_TIMEOUT_MS,
                             cbs[k], op);
        if (rc) {
            break;
        }
        op->calls++;
    }
    if (rc && op->calls == 0) {
        snprintf(err, errlen, "RANGE_FREEZE: %s", rt_strerror(rc));
        op->req = NULL;
        ms__op_finish(op, rc, err);
        return rc;
    }
    if (rc) {
        /* The first is out: its answer decides (and thaws both). */
        op->frz_rc = rc;
    }
    ms_cluster_changed(ex->cl);
    return 0;
}

/* ---- merge ---- */

static int ms__merge(struct ms_exec *ex,
                     const struct ms_exec_order *o,
                     const struct ms_range *a,
                     char *err,
                     size_t errlen)
{
    const struct ms_range *b = NULL;
    struct ms_range_put put;
    uint64_t dels[2], id, sid, split_ms = 0;
    struct ms_op *op;
    struct ms_rmeta *rm;
    json_t *parts;
    int rc;

    if ((rc = ms__merge_partner(ex, o, a, &b, err, errlen)) != 0) {
        return rc;
    }
    if (a->table_id != b->table_id || a->high_inf ||
        strcmp(a->high, b->low) != 0) {
        snprintf(err, errlen,
                 "ranges %" PRIu64 " and %" PRIu64 " are not adjacent", a->id,
                 b->id);
        return RT_EINVAL;
    }
    if (b->nreplicas > 1) {
        snprintf(err, errlen,
                 "ranges %" PRIu64 " and %" PRIu64
                 " have different replica sets (%zu and %zu replicas)",
                 a->id, b->id, a->nreplicas, b->nreplicas);
        return RT_EBUSY;
    }
    if (a->server_id != b->server_id) {
        snprintf(err, errlen,
                 "ranges %" PRIu64 " and %" PRIu64
                 " are on "
                 "servers %" PRIu64 " and %" PRIu64 ": move one first",
                 a->id, b->id, a->server_id, b->server_id);
        return RT_EBUSY;
    }
    if (ms_exec_busy(ex, a->id) || ms_exec_busy(ex, b->id)) {
        snprintf(err, errlen, "range %" PRIu64 " or %" PRIu64 " is busy", a->id,
                 b->id);
        return RT_EBUSY;
    }
    if (!ms_cluster_server_usable(ex->cl, a->server_id)) {
        snprintf(err, errlen, "server %" PRIu64 " is down", a->server_id);
        return RT_EBUSY;
    }
    op = ms__op_begin(ex, o, a);
    json_object_set_new(op->ev, "range2", json_integer((json_int_t)b->id));
    json_object_set_new(op->ev, "high",
                        b->high_inf ? json_null() : ms__str_or_null(b->high));
    ms_exec_ev_decision(op->ev, o->d);
    parts = json_array();
    json_array_append_new(
        parts, ms_exec_load_json(ms_load_find(ex->load, a->id), false));
    json_array_append_new(
        parts, ms_exec_load_json(ms_load_find(ex->load, b->id), false));
    json_object_set_new(op->ev, "loads", parts);
    op->range_id2 = b->id;
    sid = a->server_id;
    put =
        (struct ms_range_put){0,
                              a->table_id,
                              a->low,
                              b->high,
                              b->high_inf,
                              sid,
                              (a->epoch > b->epoch ? a->epoch : b->epoch) + 1};
    dels[0] = a->id;
    dels[1] = b->id;
    for (int i = 0; i < 2; i++) {
        rm = ms_exec_rmeta(ex, dels[i]);
        if (rm->split_ms > split_ms) {
            split_ms = rm->split_ms;
        }
    }
    rc = ms_catalog_update_ranges(ex->cl->cat, &put, 1, dels, 2, &id);
    if (rc) {
        return ms__op_catalog_fail(op, rc, err, errlen);
    }
    op->new_ids[0] = id;
    ms_load_merge(ex->load, dels[0], dels[1], id);
    rm = ms_exec_rmeta(ex, id);
    rm->born_ms = rt_time_mono_ms();
    rm->split_ms = split_ms;
    ex->n_merges++;
    json_object_set_new(op->ev, "new_range", json_integer((json_int_t)id));
    json_object_set_new(op->ev, "new_epoch",
                        json_integer((json_int_t)put.epoch));
    rt_log(RT_LOG_INFO,
           "merged ranges %" PRIu64 " and %" PRIu64 " -> %" PRIu64
           " on server %" PRIu64 " (%s)",
           dels[0], dels[1], id, sid, o->origin);
    op->out_done_ms = rt_time_mono_ms();
    ms__op_assign(op, sid, ms__split_assigned_cb);
    return 0;
}

/* ---- move ---- */

/* The "move" object of a move's event: {"id", "new_epoch"}; the copy
 * and commit figures are added to it as the move goes. */
static json_t *ms__move_json(const struct ms_op *op)
{
    json_t *mv = json_object();
    json_object_set_new(mv, "id", json_integer((json_int_t)op->move_id));
    json_object_set_new(mv, "new_epoch",
                        json_integer((json_int_t)op->new_epoch));
    return mv;
}

static void ms__abort_kick(struct ms_op *op);

/* The move failed before the commit: abort both ends
 * (docs/DESIGN-moves.md, "Move": failure before the commit). */
static void ms__move_abort(struct ms_op *op, int rc, const char *why)
{
    struct ms_exec *ex = op->ex;
    ms__move_set_state(op, MS_MOVE_ABORTING);
    ex->n_aborts++;
    rt_log(RT_LOG_WARN,
           "move %" PRIu64 " of range %" PRIu64 " from server %" PRIu64
           " to %" PRIu64 " aborted: %s",
           op->move_id, op->range_id, op->server_id, op->dst, why);
    /* The event and the operator's answer now; the two ends settle in
     * the background (the op stays until they have). */
    if (!op->reported && !ex->cl->stopping) {
        ms__op_report(op, rc, why);
    }
    ms__abort_kick(op);
}

/* Both ends acknowledged the abort: forget the record, free the op. */
static void ms__abort_settled(struct ms_op *op)
{
    struct ms_exec *ex = op->ex;
    int rc = ms_catalog_move_forget(ex->cl->cat, op->move_id);
    if (rc && rc != RT_ENOTFOUND) {
        rt_log(RT_LOG_ERROR, "move %" PRIu64 ": cannot forget the record: %s",
               op->move_id, rt_strerror(rc));
        return; /* retried on the next tick */
    }
    rt_log(RT_LOG_INFO,
           "move %" PRIu64 " of range %" PRIu64
           " settled "
           "(aborted on both ends)",
           op->move_id, op->range_id);
    ms__move_set_state(op, MS_MOVE_DONE);
    op->finished = true;
    ms__op_maybe_free(op);
}

struct ms__abort_call
{
    struct ms_op *op;
    bool source;
};

static void ms__abort_cb(int status, const uint8_t *body, size_t len, void *arg)
{
    struct ms__abort_call *c = arg;
    struct ms_op *op = c->op;
    bool source = c->source;
    (void)body;
    (void)len;
    free(c);
    op->calls--;
    if (source) {
        op->s_inflight = false;
    } else {
        op->t_inflight = false;
    }
    if (status == 0 || (status != RT_ENOCONN && status != RT_ETIMEDOUT &&
                        status != RT_ECANCELED)) {
        /* Answered: done (an error code from the server means it knows
         * nothing to undo). */
        if (status) {
            rt_log(RT_LOG_WARN, "MOVE_ABORT %" PRIu64 " to %s: %s", op->move_id,
                   source ? "source" : "target", rt_strerror(status));
        }
        if (source) {
            op->s_settled = true;
        } else {
            op->t_settled = true;
        }
    }
    if (op->ex->cl->stopping) {
        op->finished = true;
        ms__op_maybe_free(op);
        return;
    }
    /* Settled once: a source whose registration settled it may still
     * answer a MOVE_ABORT sent before. */
    if (op->s_settled && op->t_settled && !op->finished) {
        ms__abort_settled(op);
    } else {
        ms__op_maybe_free(op);
    }
}

/* Sends MOVE_ABORT to the ends that have not acknowledged it and are
 * connected (and registered since we started); others are retried on
 * later ticks. */
static void ms__abort_kick(struct ms_op *op)
{
    struct ms_exec *ex = op->ex;
    Rt__MoveAbort ab = RT__MOVE_ABORT__INIT;
    ab.move_id = op->move_id;
    ab.range_id = op->range_id;
    ab.master_term = ms_catalog_master_term(ex->cl->cat);
    for (int k = 0; k < 2 && !ex->cl->stopping; k++) {
        bool source = k == 0;
        bool *settled = source ? &op->s_settled : &op->t_settled;
        bool *inflight = source ? &op->s_inflight : &op->t_inflight;
        uint64_t sid = source ? op->server_id : op->dst;
        struct ms_server *s = ms_cluster_server_find(ex->cl, sid);
        struct ms__abort_call *c;
        if (*settled || *inflight) {
            continue;
        }
        if (!s) {
            *settled = true; /* a server we have never heard of */
            continue;
        }
        if (!s->seen || !s->conn || !rt_rpc_conn_is_up(s->conn)) {
            continue;
        }
        c = rt_xcalloc(1, sizeof(*c));
        c->op = op;
        c->source = source;
        if (ms_cluster_call(ex->cl, sid, RT__METHOD__MOVE_ABORT, "MOVE_ABORT",
                            &ab.base, MS__ABORT_TIMEOUT_MS, ms__abort_cb,
                            c) == 0) {
            op->calls++;
            *inflight = true;
        } else {
            free(c);
        }
    }
    if (op->s_settled && op->t_settled && !op->finished) {
        ms__abort_settled(op);
    }
}

/* A call of move @op was answered: one call less in flight. Once the
 * master is stopping nothing more happens: @op is finished (freed when
 * its last call is back; the next start aborts a move not committed)
 * and false comes back. */
static bool ms__move_answered(struct ms_op *op)
{
    op->calls--;
    if (op->ex->cl->stopping) {
        op->finished = true;
        ms__op_maybe_free(op);
        return false;
    }
    return true;
}

static void ms__move_assigned_cb(int status,
                                 const uint8_t *body,
                                 size_t len,
                                 void *arg)
{
    struct ms_op *op = arg;
    struct ms_exec *ex = op->ex;
    Rt__MoveAbort done = RT__MOVE_ABORT__INIT;
    uint64_t now = rt_time_mono_ms();
    (void)body;
    (void)len;
    if (!ms__move_answered(op)) {
        return;
    }
    ms__op_assigned(op, status);
    /* Source frozen from its freeze until front ends have the new map. */
    json_object_set_new(
        op->ev, "busy_ms",
        json_integer((json_int_t)(op->frozen_ms + (now - op->out_done_ms))));
    json_object_set_new(op->ev, "commit_assign_ms",
                        json_integer((json_int_t)(now - op->out_done_ms)));
    done.move_id = op->move_id;
    done.range_id = op->range_id;
    done.master_term = ms_catalog_master_term(ex->cl->cat);
    ms_cluster_call(ex->cl, op->server_id, RT__METHOD__MOVE_DONE, "MOVE_DONE",
                    &done.base, MS__DONE_TIMEOUT_MS, NULL, NULL);
    for (int k = 0; k < 2; k++) {
        struct ms_server *s =
            ms_cluster_server_find(ex->cl, k == 0 ? op->server_id : op->dst);
        if (s) {
            s->move_ms = now; /* the server cool-down starts */
        }
    }
    ms_exec_rmeta(ex, op->range_id)->move_ms = now;
    ex->n_moves++;
    rt_log(RT_LOG_INFO,
           "moved range %" PRIu64 " from server %" PRIu64 " to %" PRIu64
           " (move %" PRIu64 ", frozen %" PRIu64 " ms at the source, %" PRIu64
           " ms in all)",
           op->range_id, op->server_id, op->dst, op->move_id, op->frozen_ms,
           now - op->t0_ms);
    ms__move_set_state(op, MS_MOVE_DONE);
    ms__op_finish(op, 0, NULL);
    /* A drained server reports "done" at once; the next range moves. */
    if (ex->moved_cb) {
        ex->moved_cb(ex->moved_arg);
    }
}

static void ms__move_out_cb(int status,
                            const uint8_t *body,
                            size_t len,
                            void *arg)
{
    struct ms_op *op = arg;
    struct ms_exec *ex = op->ex;
    const struct ms_range *r;
    struct ms_server *src;
    Rt__MoveResp *resp;
    json_t *mv;
    char why[200];
    uint64_t t;
    int rc;

    op->out_done_ms = rt_time_mono_ms();
    if (!ms__move_answered(op)) {
        return;
    }
    mv = json_object_get(op->ev, "move");
    json_object_set_new(
        mv, "copy_ms", json_integer((json_int_t)(op->out_done_ms - op->t0_ms)));
    if (status) {
        snprintf(why, sizeof(why), "MOVE_OUT: %s", rt_strerror(status));
        ms__move_abort(op, status, why);
        return;
    }
    resp = rt__move_resp__unpack(NULL, len, body);
    if (!resp) {
        ms__move_abort(op, RT_EINVAL, "MOVE_OUT: undecodable MoveResp");
        return;
    }
    op->frozen_ms = resp->frozen_ms;
    json_object_set_new(mv, "entities",
                        json_integer((json_int_t)resp->entities));
    json_object_set_new(mv, "bytes", json_integer((json_int_t)resp->bytes));
    json_object_set_new(mv, "snapshot_ms",
                        json_integer((json_int_t)resp->snapshot_ms));
    json_object_set_new(mv, "frozen_ms",
                        json_integer((json_int_t)resp->frozen_ms));
    json_object_set_new(mv, "tail_rounds",
                        json_integer((json_int_t)resp->tail_rounds));
    rt__move_resp__free_unpacked(resp, NULL);

    /* Did anything change while it copied? */
    r = ms_catalog_range_find(ex->cl->cat, op->range_id);
    src = ms_cluster_server_find(ex->cl, op->server_id);
    if (!r || r->server_id != op->server_id || r->epoch + 1 != op->new_epoch) {
        ms__move_abort(op, RT_ESTALE, "the range changed while it was copied");
        return;
    }
    if (!src || src->reg_gen != op->src_reg_gen) {
        /* Its registration reply listed the range: it has unfrozen it. */
        ms__move_abort(op, RT_ESTALE,
                       "the source registered again while copying");
        return;
    }
    if (!ms_cluster_server_usable(ex->cl, op->dst)) {
        ms__move_abort(op, RT_ENOCONN, "the target is down");
        return;
    }
    t = rt_time_mono_ms();
    rc = ms_catalog_move_commit(ex->cl->cat, op->move_id);
    if (rc) {
        snprintf(why, sizeof(why), "commit: %s", rt_strerror(rc));
        ms__move_abort(op, rc, why);
        return;
    }
    json_object_set_new(mv, "commit_ms",
                        json_integer((json_int_t)(rt_time_mono_ms() - t)));
    ms__move_set_state(op, MS_MOVE_ASSIGNING);
    ms__op_assign(op, op->dst, ms__move_assigned_cb);
}

static int ms__move(struct ms_exec *ex,
                    const struct ms_exec_order *o,
                    const struct ms_range *r,
                    char *err,
                    size_t errlen)
{
    uint64_t range_id = r->id, dst = o->dst;
    const struct ms_server_rec *rec = ms_catalog_server_find(ex->cl->cat, dst);
    const struct ms_load_range *l = ms_load_find(ex->load, range_id);
    const Rt__MoveReq *mv;
    struct ms_server *src;
    struct ms_op *op;
    uint64_t bytes, keys, timeout;
    int rc;

    if (!rec) {
        snprintf(err, errlen, "no server %" PRIu64, dst);
        return RT_ENOTFOUND;
    }
    if (r->server_id == dst) {
        snprintf(err, errlen, "range %" PRIu64 " is already on server %" PRIu64,
                 range_id, dst);
        return RT_EINVAL;
    }
    if (ms_exec_busy(ex, range_id)) {
        snprintf(err, errlen, "range %" PRIu64 " is busy", range_id);
        return RT_EBUSY;
    }
    if (!ms_cluster_server_usable(ex->cl, r->server_id)) {
        snprintf(err, errlen, "source server %" PRIu64 " is down",
                 r->server_id);
        return RT_EBUSY;
    }
    if (!ms_cluster_server_usable(ex->cl, dst)) {
        snprintf(err, errlen, "target server %" PRIu64 " is down", dst);
        return RT_EBUSY;
    }
    if (rec->draining) {
        snprintf(err, errlen, "target server %" PRIu64 " is draining", dst);
        return RT_EBUSY;
    }
    src = ms_cluster_server_find(ex->cl, r->server_id);
    op = ms__op_begin(ex, o, r);
    json_object_set_new(op->ev, "to", json_integer((json_int_t)dst));
    ms_exec_ev_decision(op->ev, o->d);
    json_object_set_new(op->ev, "load", ms_exec_load_json(l, false));
    op->dst = dst;
    ms__move_set_state(op, MS_MOVE_COPYING);
    op->src_reg_gen = src->reg_gen;
    rc = ms_catalog_move_begin(ex->cl->cat, range_id, dst, rec->addr, &mv);
    if (rc) {
        return ms__op_catalog_fail(op, rc, err, errlen);
    }
    op->move_id = mv->move_id;
    op->new_epoch = mv->new_epoch;
    json_object_set_new(op->ev, "move", ms__move_json(op));

    /* Generous: copying takes about 1 s per 1M small entities here. */
    bytes = l ? l->key_bytes : 0;
    keys = l ? l->key_count : 0;
    timeout = (ex->move_timeout_ms ? ex->move_timeout_ms : 30000) +
              bytes / 20000 + keys / 100;
    if (timeout > 3600 * 1000) {
        timeout = 3600 * 1000;
    }
    rt_log(RT_LOG_INFO,
           "move %" PRIu64 ": range %" PRIu64 " (%" PRIu64 " keys, %" PRIu64
           " bytes) from server %" PRIu64 " to %" PRIu64
           " (%s), timeout %" PRIu64 " ms",
           op->move_id, range_id, keys, bytes, op->server_id, dst, o->origin,
           timeout);
    /* The move record is the MOVE_OUT request (DESIGN-moves.md). */
    rc =
        ms_cluster_call(ex->cl, op->server_id, RT__METHOD__MOVE_OUT, "MOVE_OUT",
                        &mv->base, (uint32_t)timeout, ms__move_out_cb, op);
    if (rc) {
        /* Recorded already: abort it properly (answers @req). */
        snprintf(err, errlen, "MOVE_OUT: %s", rt_strerror(rc));
        ms__move_abort(op, rc, err);
        return 0;
    }
    op->calls++;
    ms_cluster_changed(ex->cl); /* the move shows in "ops" at once */
    return 0;
}

/* ---- transfers (docs/DESIGN-replication.md §9.3 step 2) ---- */

/* ms_repl_transfer_cb: the transfer ended; its event and the operator's
 * answer carry the ServerBusy window. */
static void ms__transfer_done(void *arg,
                              int code,
                              const struct ms_repl_transfer_result *res)
{
    struct ms_op *op = arg;
    struct ms_exec *ex = op->ex;
    json_t *e = op->ev;
    op->calls--;
    json_object_set_new(e, "new_primary",
                        json_integer((json_int_t)res->new_primary));
    json_object_set_new(e, "new_epoch", json_integer((json_int_t)res->epoch));
    json_object_set_new(e, "lsn", json_integer((json_int_t)res->lsn));
    json_object_set_new(e, "frozen_ms",
                        json_integer((json_int_t)res->frozen_ms));
    json_object_set_new(e, "window_ms",
                        json_integer((json_int_t)res->window_ms));
    if (code == 0) {
        uint64_t now = rt_time_mono_ms();
        struct ms_server *s = ms_cluster_server_find(ex->cl, op->server_id);
        struct ms_server *t = ms_cluster_server_find(ex->cl, op->dst);
        ex->n_transfers++;
        /* The cool-downs of a move (docs/DESIGN-replication.md §9.4). */
        ms_exec_rmeta(ex, op->range_id)->move_ms = now;
        if (s) {
            s->move_ms = now;
        }
        if (t) {
            t->move_ms = now;
        }
    }
    ms__op_finish(op, code, code ? res->error : NULL);
    if (code == 0 && ex->moved_cb && !ex->cl->stopping) {
        ex->moved_cb(ex->moved_arg); /* a drain goes on */
    }
}

static int ms__transfer(struct ms_exec *ex,
                        const struct ms_exec_order *o,
                        const struct ms_range *r,
                        char *err,
                        size_t errlen)
{
    struct ms_op *op;
    int rc;
    if (r->nreplicas <= 1) {
        snprintf(err, errlen,
                 "range %" PRIu64
                 " has one replica: there is no other to hand its primary "
                 "role to",
                 r->id);
        return RT_EINVAL;
    }
    if (!ms_catalog_server_find(ex->cl->cat, o->dst)) {
        snprintf(err, errlen, "no server %" PRIu64, o->dst);
        return RT_ENOTFOUND;
    }
    if (r->server_id == o->dst) {
        snprintf(err, errlen,
                 "server %" PRIu64 " is already the primary of range %" PRIu64,
                 o->dst, r->id);
        return RT_EINVAL;
    }
    if (!ex->repl) {
        snprintf(err, errlen, "replication is not running");
        return RT_EBUSY;
    }
    if (ms_exec_busy(ex, r->id)) {
        snprintf(err, errlen, "range %" PRIu64 " is busy", r->id);
        return RT_EBUSY;
    }
    op = ms__op_begin(ex, o, r);
    op->dst = o->dst;
    json_object_set_new(op->ev, "to", json_integer((json_int_t)o->dst));
    ms_exec_ev_decision(op->ev, o->d);
    op->calls++;
    rc = ms_repl_transfer(ex->repl, r->id, o->dst, ms__transfer_done, op, err,
                          errlen);
    if (rc) {
        /* Refused before anything was asked: no event, nothing changed. */
        op->calls--;
        op->req = NULL;
        op->finished = op->reported = true;
        ms__op_maybe_free(op);
        return rc;
    }
    ms_cluster_changed(ex->cl); /* the transfer shows in "ops" at once */
    return 0;
}

/* ---- move of a replicated range (docs/DESIGN-replication.md §9.3) ---- */

/* The zone of server @id as it registered ("" when none or unknown). */
static const char *ms__zone(struct ms_exec *ex, uint64_t id)
{
    const struct ms_server_rec *rec = ms_catalog_server_find(ex->cl->cat, id);
    return rec && rec->zone ? rec->zone : "";
}

/* Copies of @r in @zone once @src has left. */
static size_t ms__zone_copies(struct ms_exec *ex,
                              const struct ms_range *r,
                              uint64_t src,
                              const char *zone)
{
    size_t n = 0;
    for (size_t i = 0; i < r->nreplicas; i++) {
        uint64_t id = r->replicas[i].server_id;
        n += id != src && strcmp(ms__zone(ex, id), zone) == 0;
    }
    return n;
}

/* May server @id take a copy of @r: known, usable, not draining, not a
 * member? */
static bool ms__rmove_candidate(struct ms_exec *ex,
                                const struct ms_range *r,
                                uint64_t id)
{
    const struct ms_server_rec *rec = ms_catalog_server_find(ex->cl->cat, id);
    return rec && !rec->draining && ms_cluster_server_usable(ex->cl, id) &&
           !ms_range_names(r, id);
}

uint64_t ms_exec_rmove_target(struct ms_exec *ex,
                              const struct ms_range *r,
                              uint64_t src)
{
    size_t n = 0, nz = 0;
    struct ms_place_server *c = rt_xcalloc(ex->cl->servers.n + 1, sizeof(*c));
    const char *zones[MS_REPLICAS_MAX];
    uint64_t best = 0;
    int k;
    for (size_t i = 0; i < ex->cl->servers.n; i++) {
        const struct ms_server *s = ex->cl->servers.v[i];
        if (!ms__rmove_candidate(ex, r, s->id)) {
            continue;
        }
        c[n++] = (struct ms_place_server){
            .id = s->id,
            .zone = ms__zone(ex, s->id),
            .nreplicas = ms_catalog_server_nreplicas(ex->cl->cat, s->id) +
                         ms_exec_server_moving(ex, s->id),
        };
    }
    for (size_t i = 0; i < r->nreplicas; i++) {
        if (r->replicas[i].server_id != src) {
            zones[nz++] = ms__zone(ex, r->replicas[i].server_id);
        }
    }
    k = ms_place_one(c, n, zones, nz);
    if (k >= 0) {
        best = c[k].id;
    }
    free(c);
    return best;
}

/* The zone rule of ms_place_one for a chosen target @dst: no candidate's
 * zone would hold fewer of the kept copies than @dst's. */
static bool ms__rmove_zone_ok(struct ms_exec *ex,
                              const struct ms_range *r,
                              uint64_t src,
                              uint64_t dst,
                              char *err,
                              size_t errlen)
{
    const char *z = ms__zone(ex, dst);
    size_t mine = ms__zone_copies(ex, r, src, z);
    for (size_t i = 0; i < ex->cl->servers.n; i++) {
        const struct ms_server *s = ex->cl->servers.v[i];
        const char *sz;
        if (!ms__rmove_candidate(ex, r, s->id)) {
            continue;
        }
        sz = ms__zone(ex, s->id);
        if (ms__zone_copies(ex, r, src, sz) < mine) {
            snprintf(err, errlen,
                     "zone rule: zone \"%s\" of server %" PRIu64
                     " would hold %zu copies of range %" PRIu64
                     ", zone \"%s\" of server %" PRIu64 " fewer",
                     z, dst, mine + 1, r->id, sz, s->id);
            return false;
        }
    }
    return true;
}

/* The role of @id in @r's committed set (RT__REPL_ROLE__... or -1). */
static int ms__role(const struct ms_range *r, uint64_t id)
{
    for (size_t i = 0; i < r->nreplicas; i++) {
        if (r->replicas[i].server_id == id) {
            return (int)r->replicas[i].role;
        }
    }
    return -1;
}

static bool ms__in_isr(const struct ms_range *r, uint64_t id)
{
    for (size_t i = 0; i < r->nisr; i++) {
        if (r->isr[i] == id) {
            return true;
        }
    }
    return false;
}

/* The move settles: its event with the phases, the cool-downs and the
 * next step of a drain on success. */
static void ms__rmove_done(struct ms_op *op, int rc, const char *why)
{
    struct ms_exec *ex = op->ex;
    uint64_t now = rt_time_mono_ms();
    json_t *ph = json_object();
    uint64_t add_end = op->add_end_ms ? op->add_end_ms : now;
    json_object_set_new(ph, "adding_ms",
                        json_integer((json_int_t)(add_end - op->t0_ms)));
    if (op->xfer_end_ms) {
        json_object_set_new(
            ph, "transfer_ms",
            json_integer((json_int_t)(op->xfer_end_ms - add_end)));
    }
    if (op->add_end_ms) {
        uint64_t from = op->xfer_end_ms ? op->xfer_end_ms : add_end;
        json_object_set_new(
            ph, op->state == MS_MOVE_ABORTING ? "aborting_ms" : "removing_ms",
            json_integer((json_int_t)(now - from)));
    }
    json_object_set_new(op->ev, "phases", ph);
    json_object_set_new(op->ev, "state",
                        json_string(ms_exec_move_state_name(op->state)));
    ms__move_set_state(op, MS_MOVE_DONE);
    /* A set left larger than rf (the source primary again) is the
     * re-replication plan's to trim from now on. */
    ms_repl_move_end(ex->repl, op->range_id);
    if (rc == 0) {
        struct ms_server *s = ms_cluster_server_find(ex->cl, op->server_id);
        struct ms_server *t = ms_cluster_server_find(ex->cl, op->dst);
        ex->n_moves++;
        ms_exec_rmeta(ex, op->range_id)->move_ms = now;
        if (s) {
            s->move_ms = now;
        }
        if (t) {
            t->move_ms = now;
        }
        rt_log(RT_LOG_INFO,
               "range %" PRIu64 ": replica moved from server %" PRIu64
               " to %" PRIu64,
               op->range_id, op->server_id, op->dst);
    } else {
        ex->n_aborts++;
        rt_log(RT_LOG_WARN,
               "range %" PRIu64 ": move of its replica from server %" PRIu64
               " to %" PRIu64 " failed: %s",
               op->range_id, op->server_id, op->dst, why);
    }
    ms__op_finish(op, rc, why);
    if (rc == 0 && ex->moved_cb && !ex->cl->stopping) {
        ex->moved_cb(ex->moved_arg); /* a drain goes on */
    }
}

/* The transfer failed with the source still primary: the target leaves
 * the set again (ABORTING, retried every tick while the range is busy). */
static void ms__rmove_abort(struct ms_op *op, int rc, const char *why)
{
    op->rm_rc = rc;
    /* A longer reason is cut to the field (bounded so -O2 sees it). */
    snprintf(op->rm_err, sizeof(op->rm_err), "%.*s",
             (int)sizeof(op->rm_err) - 1, why);
    ms__move_set_state(op, MS_MOVE_ABORTING);
}

/* ms_repl_transfer_cb of a move's step 2. */
static void ms__rmove_transferred(void *arg,
                                  int code,
                                  const struct ms_repl_transfer_result *res)
{
    struct ms_op *op = arg;
    struct ms_exec *ex = op->ex;
    const struct ms_range *r;
    op->calls--;
    op->xfer_end_ms = rt_time_mono_ms();
    json_object_set_new(op->ev, "new_primary",
                        json_integer((json_int_t)res->new_primary));
    json_object_set_new(op->ev, "frozen_ms",
                        json_integer((json_int_t)res->frozen_ms));
    json_object_set_new(op->ev, "window_ms",
                        json_integer((json_int_t)res->window_ms));
    {
        /* The figures rtctl prints for a move: the ServerBusy window is
         * the transfer's (the copy froze nothing). */
        json_t *mv = json_object();
        json_object_set_new(mv, "frozen_ms",
                            json_integer((json_int_t)res->frozen_ms));
        json_object_set_new(op->ev, "move", mv);
        json_object_set_new(op->ev, "busy_ms",
                            json_integer((json_int_t)res->window_ms));
        json_object_set_new(
            op->ev, "commit_assign_ms",
            json_integer((json_int_t)(res->window_ms > res->frozen_ms
                                          ? res->window_ms - res->frozen_ms
                                          : 0)));
    }
    if (op->finished || ex->cl->stopping) {
        ms__op_maybe_free(op);
        return;
    }
    r = ms_catalog_range_find(ex->cl->cat, op->range_id);
    if (code == 0 || (r && r->server_id != op->server_id)) {
        /* The source is no longer primary (a failover may have chosen
         * another member than the target): it may leave. */
        ms__move_set_state(op, MS_MOVE_REMOVING);
    } else {
        char why[200];
        snprintf(why, sizeof(why), "transfer: %s", res->error);
        ms__rmove_abort(op, code ? code : RT_ESTALE, why);
    }
    /* The removal waits for the next tick (ms_exec_progress): this runs
     * inside ms_repl's handling of the transfer, which a new commit
     * through it must not re-enter. */
}

/* One step of a replicated move, from the committed catalog. */
static void ms__rmove_step(struct ms_op *op)
{
    struct ms_exec *ex = op->ex;
    const struct ms_range *r = ms_catalog_range_find(ex->cl->cat, op->range_id);
    uint64_t now = rt_time_mono_ms();
    char err[256];
    int rc;

    if (op->finished || op->calls || ex->cl->stopping) {
        return;
    }
    if (!r) {
        ms__rmove_done(op, RT_ENOTFOUND, "the range was deleted");
        return;
    }
    switch (op->state) {
        case MS_MOVE_ADDING: {
            int role = ms__role(r, op->dst);
            if (role < 0) {
                ms__rmove_done(op, RT_ETIMEDOUT,
                               "the learner failed or timed out: nothing "
                               "else changed");
                return;
            }
            if (role == RT__REPL_ROLE__ROLE_LEARNER ||
                !ms__in_isr(r, op->dst)) {
                return; /* still copying */
            }
            op->add_end_ms = now;
            if (r->server_id != op->server_id) {
                ms__move_set_state(op, MS_MOVE_REMOVING);
                break;
            }
            ms__move_set_state(op, MS_MOVE_TRANSFERRING);
            op->xfer_until_ms = now + 10000;
        }
            /* fall through */
        case MS_MOVE_TRANSFERRING:
            if (r->server_id != op->server_id) {
                ms__move_set_state(op, MS_MOVE_REMOVING);
                break;
            }
            op->calls++;
            rc = ms_repl_transfer(ex->repl, r->id, op->dst,
                                  ms__rmove_transferred, op, err, sizeof(err));
            if (rc == 0) {
                return;
            }
            op->calls--;
            if (rc == RT_EBUSY && now < op->xfer_until_ms) {
                return; /* the join's assignment is still out: next tick */
            }
            ms__rmove_abort(op, rc, err);
            break;
        default:
            break;
    }
    if (op->state == MS_MOVE_REMOVING) {
        if (ms__role(r, op->server_id) < 0) {
            ms__rmove_done(op, 0, NULL);
            return;
        }
        rc = ms_repl_remove_replica(ex->repl, r->id, op->server_id, "move", err,
                                    sizeof(err));
        if (rc == 0) {
            ms__rmove_done(op, 0, NULL);
        } else if (rc != RT_EBUSY) {
            /* The source is primary again (a failover back to it): the
             * move fails, and the re-replication plan removes one of the
             * rf + 1 copies (never the primary) once the move ended. */
            ms__rmove_done(op, rc, err);
        }
        return;
    }
    if (op->state == MS_MOVE_ABORTING) {
        if (ms__role(r, op->dst) < 0 || r->server_id == op->dst) {
            ms__rmove_done(op, op->rm_rc, op->rm_err);
            return;
        }
        rc = ms_repl_remove_replica(ex->repl, r->id, op->dst, "move_aborted",
                                    err, sizeof(err));
        if (rc != RT_EBUSY) {
            ms__rmove_done(op, op->rm_rc, op->rm_err);
        }
    }
}

void ms_exec_progress(struct ms_exec *ex)
{
    /* A step may finish (and free) its op: walk a copy of the ranges. */
    uint64_t *ids;
    size_t n = 0;
    if (!ex->ops.n) {
        return;
    }
    ids = rt_xcalloc(ex->ops.n, sizeof(*ids));
    for (size_t i = 0; i < ex->ops.n; i++) {
        const struct ms_op *op = ex->ops.v[i];
        if (op->rmove && !op->finished) {
            ids[n++] = op->range_id;
        }
    }
    for (size_t k = 0; k < n; k++) {
        for (size_t i = 0; i < ex->ops.n; i++) {
            struct ms_op *op = ex->ops.v[i];
            if (op->rmove && !op->finished && op->range_id == ids[k]) {
                ms__rmove_step(op);
                break;
            }
        }
    }
    free(ids);
}

static int ms__rmove(struct ms_exec *ex,
                     const struct ms_exec_order *o,
                     const struct ms_range *r,
                     char *err,
                     size_t errlen)
{
    uint64_t src = o->src ? o->src : r->server_id, dst = o->dst;
    const struct ms_server_rec *rec = ms_catalog_server_find(ex->cl->cat, dst);
    struct ms_op *op;
    int rc;

    if (!rec) {
        snprintf(err, errlen, "no server %" PRIu64, dst);
        return RT_ENOTFOUND;
    }
    if (ms__role(r, src) < 0) {
        snprintf(err, errlen,
                 "server %" PRIu64 " holds no replica of range %" PRIu64, src,
                 r->id);
        return RT_EINVAL;
    }
    if (ms_range_names(r, dst)) {
        snprintf(err, errlen,
                 "server %" PRIu64 " already holds a replica of range %" PRIu64,
                 dst, r->id);
        return RT_EEXIST;
    }
    if (!ms_cluster_server_usable(ex->cl, dst)) {
        snprintf(err, errlen, "target server %" PRIu64 " is down", dst);
        return RT_ENOCONN;
    }
    if (rec->draining) {
        snprintf(err, errlen, "target server %" PRIu64 " is draining", dst);
        return RT_EBUSY;
    }
    if (!ex->repl) {
        snprintf(err, errlen, "replication is not running");
        return RT_EBUSY;
    }
    if (ms_exec_busy(ex, r->id)) {
        snprintf(err, errlen, "range %" PRIu64 " is busy", r->id);
        return RT_EBUSY;
    }
    if (!ms__rmove_zone_ok(ex, r, src, dst, err, errlen)) {
        return RT_EINVAL;
    }
    /* The event describes the range before the move: begin first (the
     * learner's commit replaces @r in the catalog). */
    op = ms__op_begin(ex, o, r);
    op->rmove = true;
    op->server_id = src;
    op->dst = dst;
    json_object_set_new(op->ev, "from", json_integer((json_int_t)src));
    json_object_set_new(op->ev, "to", json_integer((json_int_t)dst));
    json_object_set_new(op->ev, "replicated", json_true());
    ms_exec_ev_decision(op->ev, o->d);
    rc = ms_repl_add_learner(ex->repl, op->range_id, dst, err, errlen);
    if (rc) {
        /* Refused before anything changed: no event. */
        op->req = NULL;
        op->finished = op->reported = true;
        ms__op_maybe_free(op);
        return rc == RT_EINVAL ? RT_EBUSY : rc;
    }
    ms__move_set_state(op, MS_MOVE_ADDING);
    rt_log(RT_LOG_INFO,
           "range %" PRIu64 ": moving its replica from server %" PRIu64
           " to %" PRIu64 " (%s): learner added",
           op->range_id, src, dst, o->origin);
    ms_cluster_changed(ex->cl); /* the move shows in "ops" at once */
    return 0;
}

/* ---- starting ---- */

/* A range with more than one replica: its split goes to ms__rsplit, its
 * merge to ms__rmerge, its move to ms__rmove. */
static bool ms__replicated(const struct ms_range *r)
{
    return r->nreplicas > 1;
}

int ms_exec_start(struct ms_exec *ex,
                  const struct ms_exec_order *o,
                  char *err,
                  size_t errlen)
{
    const struct ms_range *r = ms__range_arg(ex, o->range_id, err, errlen);
    if (!r) {
        return RT_ENOTFOUND;
    }
    if (o->kind == MS_OP_TRANSFER) {
        return ms__transfer(ex, o, r, err, errlen);
    }
    if (ms__replicated(r)) {
        if (o->kind == MS_OP_SPLIT) {
            return ms__rsplit(ex, o, r, err, errlen);
        }
        if (o->kind == MS_OP_MERGE) {
            return ms__rmerge(ex, o, r, err, errlen);
        }
        return ms__rmove(ex, o, r, err, errlen);
    }
    switch (o->kind) {
        case MS_OP_SPLIT:
            return ms__split(ex, o, r, err, errlen);
        case MS_OP_MERGE:
            return ms__merge(ex, o, r, err, errlen);
        case MS_OP_MOVE:
            return ms__move(ex, o, r, err, errlen);
        case MS_OP_TRANSFER:
            break;
    }
    snprintf(err, errlen, "unknown operation %d", (int)o->kind);
    return RT_EINVAL;
}

void ms_exec_retry_aborts(struct ms_exec *ex)
{
    /* ms__abort_kick may free ops, so walk a copy of their move ids. */
    uint64_t *ids;
    size_t n = 0;
    if (!ex->ops.n) {
        return;
    }
    ids = rt_xcalloc(ex->ops.n, sizeof(*ids));
    for (size_t i = 0; i < ex->ops.n; i++) {
        const struct ms_op *op = ex->ops.v[i];
        if (op->kind == MS_OP_MOVE && !op->rmove &&
            op->state == MS_MOVE_ABORTING) {
            ids[n++] = op->move_id;
        }
    }
    for (size_t k = 0; k < n; k++) {
        for (size_t i = 0; i < ex->ops.n; i++) {
            struct ms_op *op = ex->ops.v[i];
            if (op->kind == MS_OP_MOVE && !op->rmove && op->move_id == ids[k] &&
                op->state == MS_MOVE_ABORTING) {
                ms__abort_kick(op);
                break;
            }
        }
    }
    free(ids);
}

/* ---- restart: unsettled moves ---- */

void ms_exec_init(struct ms_exec *ex,
                  struct ms_cluster *cl,
                  struct ms_load *load,
                  struct ms_events *events,
                  uint32_t move_timeout_ms,
                  ms_exec_moved_cb moved_cb,
                  void *moved_arg)
{
    uint64_t now = rt_time_mono_ms();
    memset(ex, 0, sizeof(*ex));
    ex->cl = cl;
    ex->load = load;
    ex->events = events;
    ex->move_timeout_ms = move_timeout_ms;
    ex->moved_cb = moved_cb;
    ex->moved_arg = moved_arg;
    for (size_t i = 0; i < ms_catalog_nranges(ex->cl->cat); i++) {
        struct ms_rmeta *rm =
            ms_exec_rmeta(ex, ms_catalog_range_at(ex->cl->cat, i)->id);
        /* Conservative: what we do not know counts as just split. */
        rm->born_ms = rm->split_ms = now;
    }
    for (size_t i = 0; i < ms_catalog_nmoves(ex->cl->cat); i++) {
        const Rt__MoveReq *mv = ms_catalog_move_at(ex->cl->cat, i);
        struct ms_op *op = ms__op_new(ex, MS_OP_MOVE, "restart", NULL);
        json_t *e = json_object();
        op->move_id = mv->move_id;
        op->range_id = mv->range->id;
        op->server_id = mv->range->server_id;
        op->dst = mv->target_server_id;
        op->new_epoch = mv->new_epoch;
        ms__move_set_state(op, MS_MOVE_ABORTING);
        op->reported = true; /* its event is written here */
        json_object_set_new(e, "kind", json_string("move"));
        json_object_set_new(e, "origin", json_string("restart"));
        json_object_set_new(e, "range", json_integer((json_int_t)op->range_id));
        json_object_set_new(e, "server",
                            json_integer((json_int_t)op->server_id));
        json_object_set_new(e, "to", json_integer((json_int_t)op->dst));
        json_object_set_new(e, "move", ms__move_json(op));
        json_object_set_new(e, "outcome", json_string("aborted"));
        json_object_set_new(e, "error",
                            json_string("master restarted before the commit"));
        ms_exec_event(ex, e);
        rt_log(RT_LOG_WARN,
               "move %" PRIu64 " of range %" PRIu64 " (server %" PRIu64
               " -> %" PRIu64
               ") was not committed before the restart: "
               "aborting it once both servers are back",
               op->move_id, op->range_id, op->server_id, op->dst);
        ex->n_aborts++;
    }
}

void ms_exec_fini(struct ms_exec *ex)
{
    for (size_t i = 0; i < ex->ops.n; i++) {
        struct ms_op *op = ex->ops.v[i];
        json_decref(op->ev);
        if (op->req) {
            ms_admin_complete(ex->admin, op->req, 503,
                              rt_xstrdup("{\"error\":\"master stopped\"}"));
        }
        free(op);
    }
    ms_vec_free(&ex->ops);
    for (size_t i = 0; i < ex->rmeta.n; i++) {
        free(ex->rmeta.v[i]);
    }
    ms_vec_free(&ex->rmeta);
}

void ms_exec_on_register(struct ms_exec *ex, struct ms_server *s)
{
    s->reg_gen++;
    for (size_t i = 0; i < ex->ops.n; i++) {
        struct ms_op *op = ex->ops.v[i];
        if (op->kind == MS_OP_MOVE && op->state == MS_MOVE_ABORTING &&
            op->server_id == s->id && !op->s_settled) {
            /* Its registration reply lists the range at the old epoch:
             * the source unfreezes it (ps README, "Moves"). */
            op->s_settled = true;
        }
    }
}
