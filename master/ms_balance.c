/* Load balancing: the decision loop (contract in ms_balance.h).
 *
 * Every tick: prune the bookkeeping of ranges that are gone, retry
 * unsettled aborts, let moves of replicated ranges go on, build the policy's
 * view of the cluster (servers with their load and moves, ranges in key order
 * with their load, age and busy flag, replicated ones with their ISR), ask the
 * policy, and hand each split, merge, move or transfer it decides to ms_exec.c;
 * hot/cool marks only write an event. Then drains: a draining server's ranges
 * move, one at a time up to max_moves, to the least-loaded usable server.
 * Once a second a history frame for the heat map.
 *
 * Operator requests (rtctl split / merge / move / transfer / drain)
 * arrive here from the HTTP thread through ms_admin and are handed to
 * ms_exec.c the same way; what a refused request gets is listed in
 * ms_exec.c.
 *
 * Replicated ranges (more than one replica): the policy balances their
 * primary role by transfers within the ISR (docs/DESIGN-replication.md
 * §9.4; it is told so in its view). A drain first transfers the primary
 * role of each one the server leads to its least loaded in-sync replica,
 * then moves each copy the server holds (add a learner elsewhere, remove
 * the copy: §9.3) to a live, non-draining server that holds none of that
 * range, chosen by ms_exec_rmove_target (zones, fewest replicas); a copy
 * no server can take stays, and the drain's "done" event says so. */
#include "ms_balance.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ms_catalog.h"
#include "ms_place.h"
#include "rt_alloc.h"
#include "rt_err.h"
#include "rt_log.h"
#include "rt_time.h"
#include "rt_utf8.h"

#define MS__MAX_DECISIONS 64
#define MS__FRAME_MS 1000

/* ms_exec_moved_cb: a move finished; a drain goes on with its next
 * range at once. */
static void ms__moved(void *arg);

/* ---- lifecycle and what the balancer hears ---- */

void ms_balance_init(struct ms_balance *b,
                     struct ms_cluster *cl,
                     struct ms_load *load,
                     struct ms_events *events,
                     struct ms_policy *policy,
                     const struct ms_policy_config *policy_cfg,
                     uint32_t tick_ms,
                     uint32_t move_timeout_ms,
                     uint32_t rf,
                     uint32_t min_insync)
{
    RT_PRE(rf >= 1 && rf <= MS_REPLICAS_MAX);
    RT_PRE(min_insync >= 1 && min_insync <= rf);
    memset(b, 0, sizeof(*b));
    b->rf = rf;
    b->min_insync = min_insync;
    b->cl = cl;
    b->load = load;
    b->events = events;
    b->policy = policy;
    b->policy_cfg = *policy_cfg;
    b->tick_ms = tick_ms;
    ms_exec_init(&b->exec, cl, load, events, move_timeout_ms, ms__moved, b);
}

void ms_balance_fini(struct ms_balance *b)
{
    ms_exec_fini(&b->exec);
}

void ms_balance_set_admin(struct ms_balance *b, struct ms_admin *admin)
{
    b->exec.admin = admin;
}

void ms_balance_on_register(struct ms_balance *b, struct ms_server *s)
{
    ms_exec_on_register(&b->exec, s);
}

void ms_balance_range_created(struct ms_balance *b, uint64_t range_id)
{
    ms_exec_range_created(&b->exec, range_id);
}

void ms_balance_server_state(struct ms_balance *b,
                             struct ms_server *s,
                             const char *why)
{
    const struct ms_server_rec *rec = ms_catalog_server_find(b->cl->cat, s->id);
    json_t *e = json_object();
    json_object_set_new(
        e, "kind",
        json_string(s->state == MS_SERVER_UP ? "server_up" : "server_down"));
    json_object_set_new(e, "server", json_integer((json_int_t)s->id));
    json_object_set_new(e, "addr", json_string(rec ? rec->addr : ""));
    json_object_set_new(
        e, "ranges",
        json_integer((json_int_t)ms_catalog_server_nranges(b->cl->cat, s->id)));
    json_object_set_new(e, "reason", json_string(why));
    ms_exec_event(&b->exec, e);
}

void ms_balance_loads(struct ms_balance *b,
                      struct ms_server *s,
                      const Rt__HeartbeatReq *req)
{
    uint64_t now = rt_time_mono_ms();
    s->pending = req->pending;
    s->max_server_eps = req->max_server_eps;
    s->max_range_eps = req->max_range_eps;
    bool *ignored = rt_xcalloc(req->n_loads ? req->n_loads : 1, sizeof(bool));
    for (size_t i = 0; i < req->n_loads; i++) {
        const Rt__RangeLoad *l = req->loads[i];
        const struct ms_range *r =
            ms_catalog_range_find(b->cl->cat, l->range_id);
        /* Only the owner's word counts (a source still reports a range it
         * is handing over; an old id may linger for a heartbeat). */
        if (!r || r->server_id != s->id) {
            ignored[i] = true;
            continue;
        }
        ms_load_report(b->load, s->id, l, req->max_server_eps,
                       req->max_range_eps, now);
    }
    ms_trace_rec_heartbeat(b->trace, req, ignored);
    free(ignored);
}

/* ---- the policy's view ---- */

static int ms__rv_cmp(const void *a, const void *b)
{
    const struct ms_range_view *x = a, *y = b;
    if (x->table_id != y->table_id) {
        return x->table_id < y->table_id ? -1 : 1;
    }
    return rt_utf16_cmpz(x->low, y->low);
}

static void ms__view(struct ms_balance *b, struct ms_cluster_view *view)
{
    size_t ns = b->cl->servers.n, nr = ms_catalog_nranges(b->cl->cat);
    struct ms_server_view *sv = rt_xcalloc(ns ? ns : 1, sizeof(*sv));
    struct ms_range_view *rv = rt_xcalloc(nr ? nr : 1, sizeof(*rv));
    size_t *counts = rt_xcalloc(ns ? ns : 1, sizeof(*counts));
    ms_cluster_range_counts(b->cl, counts);
    for (size_t i = 0; i < ns; i++) {
        const struct ms_server *s = b->cl->servers.v[i];
        const struct ms_server_rec *rec =
            ms_catalog_server_find(b->cl->cat, s->id);
        sv[i].id = s->id;
        sv[i].up = ms_cluster_server_usable(b->cl, s->id);
        sv[i].draining = rec && rec->draining;
        sv[i].nranges = counts[i];
        sv[i].pending = s->pending;
        sv[i].max_server_eps = s->max_server_eps;
        sv[i].max_range_eps = s->max_range_eps;
        sv[i].moving = ms_exec_server_moving(&b->exec, s->id);
        sv[i].move_ms = s->move_ms;
        sv[i].zone = rec ? rec->zone : "";
        sv[i].nreplicas = ms_catalog_server_nreplicas(b->cl->cat, s->id);
    }
    for (size_t i = 0; i < nr; i++) {
        const struct ms_range *r = ms_catalog_range_at(b->cl->cat, i);
        const struct ms_rmeta *rm = ms_exec_rmeta(&b->exec, r->id);
        rv[i].id = r->id;
        rv[i].table_id = r->table_id;
        rv[i].low = r->low;
        rv[i].high = r->high_inf ? NULL : r->high;
        rv[i].server_id = r->server_id;
        rv[i].epoch = r->epoch;
        rv[i].busy = ms_exec_busy(&b->exec, r->id);
        rv[i].replicated = r->nreplicas > 1;
        rv[i].isr = r->isr;
        rv[i].nisr = r->nisr;
        if (r->nreplicas > 1) {
            /* Freed by ms__view_free(). */
            uint64_t *ids = rt_xcalloc(r->nreplicas, sizeof(*ids));
            for (size_t k = 0; k < r->nreplicas; k++) {
                ids[k] = r->replicas[k].server_id;
            }
            rv[i].replicas = ids;
            rv[i].nreplicas = r->nreplicas;
        }
        rv[i].rf = r->rf;
        rv[i].born_ms = rm->born_ms;
        rv[i].split_ms = rm->split_ms;
        rv[i].move_ms = rm->move_ms;
        rv[i].load = ms_load_find(b->load, r->id);
    }
    qsort(rv, nr, sizeof(*rv), ms__rv_cmp);
    free(counts);
    view->servers = sv;
    view->nservers = ns;
    view->ranges = rv;
    view->nranges = nr;
    view->now_ms = rt_time_mono_ms();
    view->moves = ms_exec_moves(&b->exec);
}

static void ms__view_free(struct ms_cluster_view *view)
{
    for (size_t i = 0; i < view->nranges; i++) {
        free((void *)view->ranges[i].replicas);
    }
    free((void *)view->servers);
    free((void *)view->ranges);
    view->servers = NULL;
    view->ranges = NULL;
}

size_t ms_balance_place(struct ms_balance *b, uint64_t *ids, size_t *live)
{
    struct ms_cluster_view view;
    struct ms_place_server *cand;
    size_t n = 0, nc = 0;

    ms__view(b, &view);
    cand = rt_xcalloc(view.nservers ? view.nservers : 1, sizeof(*cand));
    for (size_t i = 0; i < view.nservers; i++) {
        const struct ms_server_view *sv = &view.servers[i];
        const struct ms_server_rec *rec =
            ms_catalog_server_find(b->cl->cat, sv->id);
        double demand = 0;
        if (!sv->up || sv->draining) {
            continue;
        }
        for (size_t j = 0; j < view.nranges; j++) {
            if (view.ranges[j].server_id == sv->id && view.ranges[j].load) {
                demand += ms_load_demand(&view.ranges[j].load->avg);
            }
        }
        cand[nc].id = sv->id;
        cand[nc].zone = rec ? rec->zone : "";
        cand[nc].nreplicas = ms_catalog_server_nreplicas(b->cl->cat, sv->id);
        cand[nc].demand = demand;
        nc++;
    }
    if (b->rf <= 1) {
        /* RF 1: the policy's choice, exactly as before replication. */
        ids[0] = ms_policy_place(b->policy, &view);
        n = ids[0] ? 1 : 0;
    } else {
        n = ms_place_replicas(cand, nc, b->rf, ids);
    }
    free(cand);
    ms__view_free(&view);
    *live = nc;
    return n;
}

/* ---- the tick ---- */

static void ms__mark_event(struct ms_balance *b, const struct ms_decision *d)
{
    const struct ms_range *r = ms_catalog_range_find(b->cl->cat, d->range_id);
    json_t *e = json_object();
    if (!r) {
        json_decref(e);
        return;
    }
    json_object_set_new(e, "kind", json_string(ms_decision_kind_name(d->kind)));
    json_object_set_new(e, "origin", json_string("policy"));
    ms_exec_ev_range(&b->exec, e, r);
    ms_exec_ev_decision(e, d);
    json_object_set_new(e, "load",
                        ms_exec_load_json(ms_load_find(b->load, r->id), false));
    if (d->kind == MS_DECIDE_HOT) {
        b->n_hot++;
    }
    ms_exec_event(&b->exec, e);
}

static void ms__sync_fail_event(struct ms_balance *b,
                                const struct ms_decision *d,
                                int rc,
                                const char *err)
{
    json_t *e = json_object();
    json_object_set_new(e, "kind", json_string(ms_decision_kind_name(d->kind)));
    json_object_set_new(e, "origin", json_string("policy"));
    json_object_set_new(e, "range", json_integer((json_int_t)d->range_id));
    ms_exec_ev_decision(e, d);
    json_object_set_new(e, "outcome", json_string("failed"));
    json_object_set_new(e, "error", json_string(err));
    json_object_set_new(e, "code", json_string(rt_err_name(rc)));
    ms_exec_event(&b->exec, e);
}

static void ms__run_policy(struct ms_balance *b)
{
    struct ms_decision d[MS__MAX_DECISIONS];
    struct ms_cluster_view view;
    char err[256];
    size_t n;

    ms__view(b, &view);
    n = ms_policy_decide(b->policy, &view, d, MS__MAX_DECISIONS);
    ms_trace_rec_policy_call(b->trace, view.now_ms, n);
    ms__view_free(&view);
    for (size_t i = 0; i < n; i++) {
        int rc = 0;
        err[0] = '\0';
        switch (d[i].kind) {
            case MS_DECIDE_HOT:
            case MS_DECIDE_COOL:
                ms_trace_rec_decision(b->trace, &d[i], "policy", false, NULL);
                ms__mark_event(b, &d[i]);
                break;
            case MS_DECIDE_SPLIT:
            case MS_DECIDE_MERGE:
            case MS_DECIDE_MOVE:
            case MS_DECIDE_TRANSFER: {
                const struct ms_exec_order o = {
                    .kind = d[i].kind == MS_DECIDE_SPLIT      ? MS_OP_SPLIT
                            : d[i].kind == MS_DECIDE_MERGE    ? MS_OP_MERGE
                            : d[i].kind == MS_DECIDE_TRANSFER ? MS_OP_TRANSFER
                                                              : MS_OP_MOVE,
                    .range_id = d[i].range_id,
                    .range_id2 = d[i].range_id2,
                    .dst = d[i].server_id,
                    .src = d[i].src_id,
                    .key = d[i].key,
                    .origin = "policy",
                    .d = &d[i],
                };
                struct ms_exec_order ot = o;
                /* Written before it starts (its outcome may follow at
                 * once); a refusal is written as its own outcome. */
                ot.trace_id = ms_trace_rec_decision(b->trace, &d[i], "policy",
                                                    true, NULL);
                rc = ms_exec_start(&b->exec, &ot, err, sizeof(err));
                if (rc) {
                    ms_trace_rec_outcome(b->trace, ot.trace_id,
                                         ms_decision_kind_name(d[i].kind),
                                         "refused", err, NULL, 0, 0);
                }
                break;
            }
            default:
                break;
        }
        if (rc) {
            rt_log(RT_LOG_WARN, "policy %s of range %" PRIu64 " not done: %s",
                   ms_decision_kind_name(d[i].kind), d[i].range_id, err);
            ms__sync_fail_event(b, &d[i], rc, err);
        }
    }
    ms_decisions_free(d, n);
}

/* The least-loaded usable, non-draining server other than @not. */
static uint64_t ms__drain_target(struct ms_balance *b, uint64_t not )
{
    uint64_t best = 0;
    double best_load = 0;
    size_t best_n = 0;
    for (size_t i = 0; i < b->cl->servers.n; i++) {
        const struct ms_server *s = b->cl->servers.v[i];
        const struct ms_server_rec *rec =
            ms_catalog_server_find(b->cl->cat, s->id);
        double load = 0;
        size_t n = 0;
        if (s->id == not || !ms_cluster_server_usable(b->cl, s->id) || !rec ||
            rec->draining) {
            continue;
        }
        for (size_t j = 0; j < ms_catalog_nranges(b->cl->cat); j++) {
            const struct ms_range *r = ms_catalog_range_at(b->cl->cat, j);
            const struct ms_load_range *l;
            if (r->server_id != s->id) {
                continue;
            }
            n++;
            l = ms_load_find(b->load, r->id);
            load += l ? ms_load_demand(&l->avg) : 0;
        }
        /* Pending moves into it count as well. */
        n += ms_exec_server_moving(&b->exec, s->id);
        if (!best || load < best_load || (load == best_load && n < best_n)) {
            best = s->id;
            best_load = load;
            best_n = n;
        }
    }
    return best;
}

/* The in-sync replica of replicated @r (not its primary) that is usable,
 * not draining, and primary of the least demand; 0 if none. */
static uint64_t ms__drain_isr_target(struct ms_balance *b,
                                     const struct ms_range *r)
{
    uint64_t best = 0;
    double best_load = 0;
    for (size_t k = 0; k < r->nisr; k++) {
        uint64_t id = r->isr[k];
        const struct ms_server_rec *rec =
            ms_catalog_server_find(b->cl->cat, id);
        double load = 0;
        if (id == r->server_id || !rec || rec->draining ||
            !ms_cluster_server_usable(b->cl, id)) {
            continue;
        }
        for (size_t j = 0; j < ms_catalog_nranges(b->cl->cat); j++) {
            const struct ms_range *x = ms_catalog_range_at(b->cl->cat, j);
            const struct ms_load_range *l;
            if (x->server_id == id) {
                l = ms_load_find(b->load, x->id);
                load += l ? ms_load_demand(&l->avg) : 0;
            }
        }
        if (!best || load < best_load) {
            best = id;
            best_load = load;
        }
    }
    return best;
}

/* The copies draining server @sid still holds once it leads nothing
 * (docs/DESIGN-replication.md §9.4): each replicated range naming it
 * moves that replica to ms_exec_rmove_target's choice, while fewer than
 * @cap moves run. True while some copy is moving or may move later;
 * *@kept counts those no server can take (they stay). */
static bool ms__drain_replicas(struct ms_balance *b,
                               uint64_t sid,
                               unsigned cap,
                               size_t *kept)
{
    bool pending = false;
    char err[256];
    for (size_t j = 0; j < ms_catalog_nranges(b->cl->cat); j++) {
        const struct ms_range *r = ms_catalog_range_at(b->cl->cat, j);
        struct ms_exec_order o = {.kind = MS_OP_MOVE, .origin = "drain"};
        if (r->nreplicas <= 1 || !ms_range_names(r, sid)) {
            continue;
        }
        if (ms_exec_busy(&b->exec, r->id)) {
            pending = true;
            continue;
        }
        o.range_id = r->id;
        o.src = sid;
        o.dst = ms_exec_rmove_target(&b->exec, r, sid);
        if (!o.dst) {
            (*kept)++;
            continue;
        }
        pending = true;
        if (ms_exec_moves(&b->exec) >= cap) {
            continue;
        }
        if (ms_exec_start(&b->exec, &o, err, sizeof(err)) != 0) {
            rt_log(RT_LOG_WARN, "drain of server %" PRIu64 ": %s", sid, err);
        }
        /* The catalog changed (a learner): go on at the next tick. */
        return true;
    }
    return pending;
}

static void ms__run_drains(struct ms_balance *b)
{
    unsigned cap = b->policy_cfg.max_moves ? b->policy_cfg.max_moves : 1;
    char err[256];
    for (size_t i = 0; i < ms_catalog_nservers(b->cl->cat); i++) {
        const struct ms_server_rec *rec = ms_catalog_server_at(b->cl->cat, i);
        struct ms_server *s;
        size_t left;
        if (!rec->draining) {
            continue;
        }
        s = ms_cluster_server_find(b->cl, rec->id);
        left = ms_catalog_server_nranges(b->cl->cat, rec->id);
        if (left == 0) {
            size_t kept = 0;
            if (ms__drain_replicas(b, rec->id, cap, &kept)) {
                continue; /* copies still to move */
            }
            if (s && !s->drain_reported &&
                ms_exec_server_moving(&b->exec, rec->id) == 0) {
                json_t *e = json_object();
                s->drain_reported = true;
                json_object_set_new(e, "kind", json_string("drain"));
                json_object_set_new(e, "server",
                                    json_integer((json_int_t)rec->id));
                json_object_set_new(e, "outcome", json_string("done"));
                if (kept) {
                    char note[200];
                    snprintf(note, sizeof(note),
                             "%zu replicated ranges keep their copy on "
                             "server %" PRIu64
                             ": no other live server holds none of them",
                             kept, rec->id);
                    json_object_set_new(e, "replicas_kept",
                                        json_integer((json_int_t)kept));
                    json_object_set_new(e, "note", json_string(note));
                }
                ms_exec_event(&b->exec, e);
                rt_log(RT_LOG_INFO, "server %" PRIu64 " drained", rec->id);
            }
            continue;
        }
        if (!ms_cluster_server_usable(b->cl, rec->id)) {
            continue;
        }
        for (size_t j = 0; j < ms_catalog_nranges(b->cl->cat) &&
                           ms_exec_moves(&b->exec) < cap;
             j++) {
            const struct ms_range *r = ms_catalog_range_at(b->cl->cat, j);
            struct ms_exec_order o = {.kind = MS_OP_MOVE, .origin = "drain"};
            if (r->server_id != rec->id || ms_exec_busy(&b->exec, r->id)) {
                continue;
            }
            o.range_id = r->id;
            if (r->nreplicas > 1) {
                /* Its primary role goes to an in-sync replica (§9.4);
                 * its copy stays until learners can move it. */
                o.kind = MS_OP_TRANSFER;
                o.dst = ms__drain_isr_target(b, r);
                if (!o.dst) {
                    continue;
                }
            } else {
                o.dst = ms__drain_target(b, rec->id);
            }
            if (!o.dst) {
                break;
            }
            if (ms_exec_start(&b->exec, &o, err, sizeof(err)) != 0) {
                rt_log(RT_LOG_WARN, "drain of server %" PRIu64 ": %s", rec->id,
                       err);
                break;
            }
            /* The catalog may have changed (a move record): restart the
             * scan on the next tick. */
            break;
        }
    }
}

static void ms__moved(void *arg)
{
    ms__run_drains(arg);
}

/* ---- history ---- */

static int ms__fr_cmp(const void *a, const void *b)
{
    const struct ms_load_frame_range *x = a, *y = b;
    if (x->table_id != y->table_id) {
        return x->table_id < y->table_id ? -1 : 1;
    }
    return rt_utf16_cmpz(x->low, y->low);
}

static void ms__history_frame(struct ms_balance *b)
{
    size_t nr = ms_catalog_nranges(b->cl->cat);
    struct ms_load_frame_range *fr = rt_xcalloc(nr ? nr : 1, sizeof(*fr));
    for (size_t i = 0; i < nr; i++) {
        const struct ms_range *r = ms_catalog_range_at(b->cl->cat, i);
        fr[i].range_id = r->id;
        fr[i].table_id = r->table_id;
        fr[i].low = r->low;
        fr[i].high = r->high_inf ? NULL : r->high;
        fr[i].server_id = r->server_id;
    }
    qsort(fr, nr, sizeof(*fr), ms__fr_cmp);
    ms_load_frame(b->load, ms_unix_ms(), fr, nr);
    free(fr);
}

bool ms_balance_tick(struct ms_balance *b)
{
    uint64_t now = rt_time_mono_ms();
    if (b->cl->stopping) {
        return false;
    }
    ms_exec_rmeta_prune(&b->exec);
    ms_exec_retry_aborts(&b->exec);
    ms_exec_progress(&b->exec);
    ms__run_policy(b);
    ms__run_drains(b);
    if (now - b->frame_ms + b->tick_ms / 2 >= MS__FRAME_MS) {
        b->frame_ms = now;
        ms__history_frame(b);
        return true;
    }
    return false;
}

/* ---- operator requests ---- */

/* Ranges with more than one replica whose replica set names @server_id. */
static size_t ms__replicated_held(struct ms_balance *b, uint64_t server_id)
{
    size_t n = 0;
    for (size_t i = 0; i < ms_catalog_nranges(b->cl->cat); i++) {
        const struct ms_range *r = ms_catalog_range_at(b->cl->cat, i);
        if (r->nreplicas > 1 && ms_range_names(r, server_id)) {
            n++;
        }
    }
    return n;
}

void ms_balance_admin(struct ms_admin_req *req, void *arg)
{
    struct ms_balance *b = arg;
    char err[256] = "";
    int rc = 0;

    if (b->cl->stopping) {
        ms_exec_admin_fail(&b->exec, req, RT_EBUSY, "master is stopping");
        return;
    }
    switch (req->kind) {
        case MS_ADMIN_TRACE_START:
        case MS_ADMIN_TRACE_STOP: {
            char em[RT_ERRMSG_SIZE];
            if (!b->trace) {
                rc = RT_ENOTIMPL;
                snprintf(err, sizeof(err), "this master records no traces");
                break;
            }
            rc = req->kind == MS_ADMIN_TRACE_START
                     ? ms_trace_rec_start(b->trace, req->key, em)
                     : ms_trace_rec_stop(b->trace, em);
            if (rc) {
                snprintf(err, sizeof(err), "%s", em);
                break;
            }
            ms_admin_complete(b->exec.admin, req, 200,
                              ms_trace_rec_status_json(b->trace));
            return;
        }
        case MS_ADMIN_SPLIT:
        case MS_ADMIN_MERGE:
        case MS_ADMIN_MOVE:
        case MS_ADMIN_TRANSFER: {
            /* rtctl merge names the left-hand range only. */
            const struct ms_exec_order o = {
                .kind = req->kind == MS_ADMIN_SPLIT      ? MS_OP_SPLIT
                        : req->kind == MS_ADMIN_MERGE    ? MS_OP_MERGE
                        : req->kind == MS_ADMIN_TRANSFER ? MS_OP_TRANSFER
                                                         : MS_OP_MOVE,
                .range_id = req->range_id,
                .dst = req->server_id,
                .key = req->key,
                .origin = "manual",
                .req = req,
            };
            rc = ms_exec_start(&b->exec, &o, err, sizeof(err));
            break;
        }
        case MS_ADMIN_DRAIN: {
            const struct ms_server_rec *rec =
                ms_catalog_server_find(b->cl->cat, req->server_id);
            struct ms_server *s = ms_cluster_server_find(b->cl, req->server_id);
            json_t *e;
            size_t nrep;
            if (!rec) {
                snprintf(err, sizeof(err), "no server %" PRIu64,
                         req->server_id);
                rc = RT_ENOTFOUND;
                break;
            }
            nrep = ms__replicated_held(b, req->server_id);
            rc = ms_catalog_set_draining(b->cl->cat, req->server_id,
                                         !req->cancel);
            if (rc) {
                snprintf(err, sizeof(err), "catalog: %s", rt_strerror(rc));
                break;
            }
            if (s) {
                s->drain_reported = false;
            }
            e = json_object();
            json_object_set_new(e, "kind", json_string("drain"));
            json_object_set_new(e, "origin", json_string("manual"));
            json_object_set_new(e, "server",
                                json_integer((json_int_t)req->server_id));
            json_object_set_new(
                e, "outcome",
                json_string(req->cancel ? "cancelled" : "started"));
            json_object_set_new(
                e, "ranges",
                json_integer((json_int_t)ms_catalog_server_nranges(
                    b->cl->cat, req->server_id)));
            if (!req->cancel && nrep) {
                /* Primaries are transferred away first, then each copy
                 * moves (ms__drain_replicas). */
                json_object_set_new(e, "replicas",
                                    json_integer((json_int_t)nrep));
            }
            e = ms_exec_event_get(&b->exec, e);
            rt_log(RT_LOG_INFO, "server %" PRIu64 " %s", req->server_id,
                   req->cancel ? "no longer draining" : "draining");
            ms_cluster_changed(b->cl);
            /* completing releases @req: read what we still need first. */
            bool start = !req->cancel;
            ms_admin_complete(b->exec.admin, req, 200, ms_exec_json_text(e));
            json_decref(e);
            if (start) {
                ms__run_drains(b);
            }
            return;
        }
        default:
            rc = RT_EINVAL;
            snprintf(err, sizeof(err), "unknown request");
            break;
    }
    if (rc) {
        ms_exec_admin_fail(&b->exec, req, rc, err);
    }
}
