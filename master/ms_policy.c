/* Policies "default" and "none", and the table of every policy by name
 * (see ms_policy.h; "crdb" lives in ms_policy_crdb.c).
 *
 * The default policy runs four passes over the view on every decide():
 *  1. marks: per range, hot / not hot with hysteresis (enter at the
 *     threshold, leave below hot_exit_pct% of it) and since when it is
 *     cold; a change is reported as a HOT / COOL mark;
 *  2. splits: hot for split_sustain_ms, not new (split_cooldown_ms), not
 *     busy, the table below split_max_ranges, and a load-median key;
 *  3. transfers (docs/DESIGN-replication.md §9.4): the same rule over the
 *     replicated ranges, whose primary role goes to the member of their
 *     ISR that evens the two servers out best (no copy);
 *  4. moves, only when no transfer was decided: while fewer than
 *     max_moves are in flight, the most loaded
 *     eligible server above mean * (1 + tolerance) gives the range that
 *     best evens it out with the least loaded one (ties: the smaller
 *     range, it copies faster);
 *  4b. replica counts, only when no transfer or move was decided: one
 *     secondary copy of a healthy replicated range from the fullest
 *     server to the emptiest eligible one holding none of it, when their
 *     replica counts are more than one apart (the zone rule first);
 *  5. merges: one pair per call, adjacent, same server, both cold long
 *     enough, small, and not split recently.
 * A range chosen by one pass is not used by a later one in the same call.
 * Replicated ranges (more than one replica) are split when hot like any
 * other, never merged; their load moves by transfers of the primary role,
 * and their copies move only by pass 4b. */
#include "ms_policy.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ms_policy_crdb.h"
#include "ms_policy_int.h"
#include "ms_util.h"
#include "rt_alloc.h"
#include "rt_err.h"

const char *ms_decision_kind_name(enum ms_decision_kind k)
{
    static const char *const names[MS_DECIDE__NR] = {
        "hot", "cool", "split", "merge", "move", "transfer"};
    return (int)k >= 0 && k < MS_DECIDE__NR ? names[k] : "?";
}

void ms_decisions_free(struct ms_decision *d, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(d[i].key);
        d[i].key = NULL;
    }
}

void ms_policy_config_default(struct ms_policy_config *cfg)
{
    memset(cfg, 0, sizeof(*cfg));
    cfg->split_eps = 2000;
    cfg->split_busy_pct = 0;
    cfg->split_sustain_ms = 1500;
    cfg->split_cooldown_ms = 3000;
    cfg->split_max_ranges = 64;
    cfg->hot_exit_pct = 70;
    cfg->move_tolerance_pct = 25;
    cfg->move_min_eps = 500;
    cfg->move_gain_pct = 10;
    cfg->move_cooldown_ms = 10000;
    cfg->server_cooldown_ms = 2000;
    cfg->max_moves = 2;
    cfg->merge_eps = 50;
    cfg->merge_sustain_ms = 60000;
    cfg->merge_max_bytes = 256ull << 20;
    cfg->merge_after_split_ms = 300000;
}

/* ---- placement (both policies) ---- */

/* ---- "none" ---- */

static const struct ms_policy_ops ms__none_ops = {
    .name = "none",
    .place = ms__pol_fewest_place,
    .decide = NULL,
    .destroy = NULL,
};

/* ---- "default" ---- */

struct ms__mark
{
    uint64_t range_id;
    bool hot;
    uint64_t hot_since;  /* monotonic ms; valid while hot */
    uint64_t cold_since; /* 0: not cold */
    uint64_t seen;       /* decide() call that last saw the range */
};

/* Since when a server is above the mean by the tolerance. */
struct ms__smark
{
    uint64_t server_id;
    uint64_t over_since; /* 0: not over */
};

struct ms__dflt
{
    struct ms_policy_config cfg;
    struct ms_vec marks; /* struct ms__mark *, by range id */
    struct ms__smark *smarks;
    size_t nsmarks;
    uint64_t calls;
};

/* The server's mark, creating it (kept sorted by id: a lookup is a
 * binary search, so a call stays O(servers log servers) at 1,000
 * servers). */
static struct ms__smark *ms__smark(struct ms__dflt *p, uint64_t id)
{
    size_t lo = 0, hi = p->nsmarks;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (p->smarks[mid].server_id < id) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    if (lo < p->nsmarks && p->smarks[lo].server_id == id) {
        return &p->smarks[lo];
    }
    p->smarks = rt_xrealloc(p->smarks, (p->nsmarks + 1) * sizeof(*p->smarks));
    memmove(p->smarks + lo + 1, p->smarks + lo,
            (p->nsmarks - lo) * sizeof(*p->smarks));
    p->nsmarks++;
    p->smarks[lo].server_id = id;
    p->smarks[lo].over_since = 0;
    return &p->smarks[lo];
}

static struct ms__mark *ms__mark_get(struct ms__dflt *p, uint64_t id)
{
    return ms_vec_get(&p->marks, offsetof(struct ms__mark, range_id), id,
                      sizeof(struct ms__mark), NULL);
}

/* Pass 1: hot / cold marks. */
static void ms__pass_marks(struct ms__dflt *p,
                           const struct ms_cluster_view *v,
                           struct ms__out *o)
{
    const struct ms_policy_config *c = &p->cfg;
    for (size_t i = 0; i < v->nranges; i++) {
        const struct ms_range_view *r = &v->ranges[i];
        const struct ms_server_view *s = ms__pol_server(v, r->server_id);
        struct ms__mark *mk;
        double d, thr, busy;
        bool enter, stay;

        if (!r->load || !s || !s->up) {
            continue;
        }
        mk = ms__mark_get(p, r->id);
        mk->seen = p->calls;
        /* The smoothed demand, or the latest interval's when higher: a
         * step shows at the first heartbeat after it (a burst shorter
         * than split_sustain_ms still splits nothing). */
        d = fmax(ms__pol_demand(r), ms_load_demand(&r->load->cur));
        thr = ms_policy_hot_threshold(c, ms__pol_range_cap(r, s));
        busy = r->load->avg.exec_frac * 100.0;
        enter = d >= thr ||
                (c->split_busy_pct && busy >= (double)c->split_busy_pct &&
                 d >= c->split_eps / 4);
        stay = d >= thr * c->hot_exit_pct / 100.0 ||
               (c->split_busy_pct &&
                busy >= (double)c->split_busy_pct * c->hot_exit_pct / 100.0 &&
                d >= c->split_eps / 4 * c->hot_exit_pct / 100.0);
        if (!mk->hot && enter) {
            struct ms_decision *dd = ms__pol_emit(o, MS_DECIDE_HOT, r->id);
            mk->hot = true;
            mk->hot_since = v->now_ms;
            if (dd) {
                dd->load = d;
                dd->threshold = thr;
                snprintf(dd->reason, sizeof(dd->reason),
                         "demand %.0f/s >= %.0f/s (busy %.0f%%)", d, thr, busy);
            }
        } else if (mk->hot && !stay) {
            struct ms_decision *dd = ms__pol_emit(o, MS_DECIDE_COOL, r->id);
            mk->hot = false;
            if (dd) {
                dd->load = d;
                dd->threshold = thr * c->hot_exit_pct / 100.0;
                snprintf(dd->reason, sizeof(dd->reason),
                         "demand %.0f/s < %.0f/s after %.1f s hot", d,
                         dd->threshold,
                         (double)(v->now_ms - mk->hot_since) / 1000.0);
            }
        }
        if (d < c->merge_eps) {
            if (!mk->cold_since) {
                mk->cold_since = v->now_ms ? v->now_ms : 1;
            }
        } else {
            mk->cold_since = 0;
        }
    }
    /* Forget ranges that are gone. */
    for (size_t i = 0; i < p->marks.n;) {
        struct ms__mark *mk = p->marks.v[i];
        if (mk->seen != p->calls) {
            free(ms_vec_remove(&p->marks, i));
        } else {
            i++;
        }
    }
}

/* Per server of @v (by index): the demand of its ranges into o->sload,
 * and the lists o->by_srv / o->srv_off. */
static void ms__server_index(const struct ms_cluster_view *v, struct ms__out *o)
{
    size_t ns = v->nservers, nr = v->nranges;
    size_t *at = rt_xcalloc(nr ? nr : 1, sizeof(*at));
    o->sload = rt_xcalloc(ns ? ns : 1, sizeof(*o->sload));
    o->srv_off = rt_xcalloc(ns + 2, sizeof(*o->srv_off));
    o->by_srv = rt_xcalloc(nr ? nr : 1, sizeof(*o->by_srv));
    for (size_t i = 0; i < nr; i++) {
        at[i] = ms__pol_server_idx(v, v->ranges[i].server_id);
        if (at[i] < ns) {
            o->sload[at[i]] += ms__pol_demand(&v->ranges[i]);
            o->srv_off[at[i] + 2]++;
        }
    }
    for (size_t j = 0; j < ns; j++) {
        o->srv_off[j + 2] += o->srv_off[j + 1];
    }
    for (size_t i = 0; i < nr; i++) {
        if (at[i] < ns) {
            o->by_srv[o->srv_off[at[i] + 1]++] = i;
        }
    }
    free(at);
}

/* A split of hot range @r on @s helps when the range is held back by its
 * own per-range cap, or when half of it could go to another live,
 * non-draining server that would still carry less than @s. Otherwise
 * (one server, or every server as loaded) more ranges buy nothing. */
static bool ms__split_helps(const struct ms_cluster_view *v,
                            const struct ms__out *o,
                            const struct ms_range_view *r,
                            const struct ms_server_view *s)
{
    uint64_t cap = ms__pol_range_cap(r, s);
    double d = ms__pol_demand(r), ls;
    if (cap && d >= 0.9 * (double)cap) {
        return true;
    }
    ls = o->sload[s - v->servers];
    for (size_t j = 0; j < v->nservers; j++) {
        const struct ms_server_view *t = &v->servers[j];
        if (t->id == s->id || !ms__pol_eligible(t)) {
            continue;
        }
        if (ls - o->sload[j] > d / 2) {
            return true;
        }
    }
    return false;
}

/* Pass 2: splits. */
static void ms__pass_splits(struct ms__dflt *p,
                            const struct ms_cluster_view *v,
                            struct ms__out *o)
{
    const struct ms_policy_config *c = &p->cfg;
    for (size_t i = 0; i < v->nranges && o->n < o->max; i++) {
        const struct ms_range_view *r = &v->ranges[i];
        const struct ms_server_view *s = ms__pol_server(v, r->server_id);
        struct ms__mark *mk;
        struct ms_decision *d;
        double share = 0.5;
        char *key;

        /* A replicated range splits too (docs/DESIGN-replication.md
         * §9.1): its halves keep the replica set; a half then balances by
         * a primaryship transfer rather than a move (§9.4). */
        if (!r->load || !s || !s->up || r->busy || o->used[i]) {
            continue;
        }
        mk = ms__mark_get(p, r->id);
        if (!mk->hot || v->now_ms < mk->hot_since + c->split_sustain_ms ||
            !ms__pol_since(v->now_ms, r->born_ms, c->split_cooldown_ms) ||
            ms__pol_table_nranges(v, r->table_id) >= c->split_max_ranges ||
            !ms__split_helps(v, o, r, s)) {
            continue;
        }
        key = ms_load_split_key(r->load, r->low, r->high, v->now_ms, &share);
        if (!key) {
            continue; /* one PartitionKey carries it all: cannot split */
        }
        d = ms__pol_emit(o, MS_DECIDE_SPLIT, r->id);
        d->key = key;
        d->load = ms__pol_demand(r);
        d->threshold = ms_policy_hot_threshold(c, ms__pol_range_cap(r, s));
        d->share = share;
        snprintf(d->reason, sizeof(d->reason),
                 "demand %.0f/s >= %.0f/s for %.1f s; load-median key "
                 "leaves %.0f%% of the sampled load on the left",
                 d->load, d->threshold,
                 (double)(v->now_ms - mk->hot_since) / 1000.0, share * 100);
        o->used[i] = true;
    }
}

/* Above this demand a server is over the mean of the eligible servers
 * by move_tolerance_pct%. */
static double ms__over_threshold(const struct ms_policy_config *c, double mean)
{
    return mean * (1.0 + c->move_tolerance_pct / 100.0);
}

/* A server with demand @load gives ranges away: over the threshold and
 * at least move_min_eps above the mean. */
static bool ms__overloaded(const struct ms_policy_config *c,
                           double load,
                           double mean)
{
    return load > ms__over_threshold(c, mean) && load - mean >= c->move_min_eps;
}

/* Pass 3 helper: the server at @si is above the mean but no move helps;
 * split its busiest range (not new, demand >= move_min_eps) at the load
 * median. */
static void ms__balance_split(struct ms__dflt *p,
                              const struct ms_cluster_view *v,
                              struct ms__out *o,
                              size_t si,
                              double load_s,
                              double mean)
{
    const struct ms_policy_config *c = &p->cfg;
    const struct ms_range_view *best = NULL;
    size_t bi = 0;
    struct ms_decision *d;
    double share = 0.5;
    char *key;

    for (size_t q = o->srv_off[si]; q < o->srv_off[si + 1]; q++) {
        size_t i = o->by_srv[q];
        const struct ms_range_view *r = &v->ranges[i];
        if (r->server_id != v->servers[si].id) {
            continue;
        }
        if (o->used[i]) {
            return; /* already split or moved in this call */
        }
        if (r->busy || r->replicated || !r->load ||
            !ms__pol_since(v->now_ms, r->born_ms, c->split_cooldown_ms)) {
            continue;
        }
        if (!best || ms__pol_demand(r) > ms__pol_demand(best)) {
            best = r;
            bi = i;
        }
    }
    if (!best || ms__pol_demand(best) < c->move_min_eps ||
        ms__pol_table_nranges(v, best->table_id) >= c->split_max_ranges ||
        o->n >= o->max) {
        return;
    }
    key =
        ms_load_split_key(best->load, best->low, best->high, v->now_ms, &share);
    if (!key) {
        return;
    }
    d = ms__pol_emit(o, MS_DECIDE_SPLIT, best->id);
    d->key = key;
    d->load = ms__pol_demand(best);
    d->src_load = load_s;
    d->mean_load = mean;
    d->threshold = ms__over_threshold(c, mean);
    d->share = share;
    snprintf(d->reason, sizeof(d->reason),
             "server %" PRIu64
             " demand %.0f/s > mean %.0f/s + %u%% and no "
             "whole range evens it out: split its busiest (%.0f/s) so a part "
             "can move",
             v->servers[si].id, load_s, mean, c->move_tolerance_pct, d->load);
    o->used[bi] = true;
}

/* Pass 3: moves. */
/* Emits a move or transfer (@kind) of range @best from server @si to
 * server @ti of @v, carrying @lr of demand, with the loads before it, and
 * books it: the range is used by this round, @lr leaves load[@si] for
 * load[@ti]. The caller writes the reason. */
static struct ms_decision *ms__emit_shift(struct ms__out *o,
                                          enum ms_decision_kind kind,
                                          const struct ms_policy_config *c,
                                          const struct ms_cluster_view *v,
                                          const struct ms_range_view *best,
                                          size_t si,
                                          size_t ti,
                                          double lr,
                                          double mean,
                                          double *load)
{
    struct ms_decision *d = ms__pol_emit(o, kind, best->id);
    d->server_id = v->servers[ti].id;
    d->load = lr;
    d->src_load = load[si];
    d->dst_load = load[ti];
    d->mean_load = mean;
    d->threshold = ms__over_threshold(c, mean);
    o->used[best - v->ranges] = true;
    load[si] -= lr;
    load[ti] += lr;
    return d;
}

static void ms__pass_moves(struct ms__dflt *p,
                           const struct ms_cluster_view *v,
                           struct ms__out *o)
{
    const struct ms_policy_config *c = &p->cfg;
    size_t ns = v->nservers, neligible = 0;
    double *load = rt_xcalloc(ns ? ns : 1, sizeof(*load));
    bool *taken = rt_xcalloc(ns ? ns : 1, sizeof(*taken));
    unsigned moves = v->moves;
    double mean = 0;

    for (size_t i = 0; i < o->n; i++) {
        if (o->d[i].kind == MS_DECIDE_TRANSFER) {
            /* Loads have changed: moves wait for the next call. */
            free(load);
            free(taken);
            return;
        }
    }
    for (size_t j = 0; j < ns; j++) {
        const struct ms_server_view *s = &v->servers[j];
        if (ms__pol_eligible(s)) {
            neligible++;
        }
    }
    memcpy(load, o->sload, ns * sizeof(*load));
    for (size_t j = 0; j < ns; j++) {
        if (ms__pol_eligible(&v->servers[j])) {
            mean += load[j];
        }
    }
    if (neligible < 2) {
        for (size_t j = 0; j < ns; j++) {
            ms__smark(p, v->servers[j].id)->over_since = 0;
        }
        goto out;
    }
    mean /= (double)neligible;
    for (size_t j = 0; j < ns; j++) {
        const struct ms_server_view *s = &v->servers[j];
        struct ms__smark *sm = ms__smark(p, s->id);
        bool over = ms__pol_eligible(s) && ms__overloaded(c, load[j], mean);
        if (!over) {
            sm->over_since = 0;
        } else if (!sm->over_since) {
            sm->over_since = v->now_ms ? v->now_ms : 1;
        }
    }

    while (moves < c->max_moves && o->n < o->max) {
        const struct ms_range_view *best = NULL;
        double best_max = 0, lr_best = 0;
        size_t si = ns, ti = ns;

        for (size_t j = 0; j < ns; j++) {
            const struct ms_server_view *s = &v->servers[j];
            if (taken[j] || !ms__pol_server_free(c, v, s)) {
                continue;
            }
            if (!ms__overloaded(c, load[j], mean)) {
                continue;
            }
            if (si == ns || load[j] > load[si]) {
                si = j;
            }
        }
        if (si == ns) {
            break;
        }
        for (size_t j = 0; j < ns; j++) {
            if (j == si || taken[j] ||
                !ms__pol_server_free(c, v, &v->servers[j])) {
                continue;
            }
            if (ti == ns || load[j] < load[ti]) {
                ti = j;
            }
        }
        if (ti == ns) {
            break;
        }
        for (size_t q = o->srv_off[si]; q < o->srv_off[si + 1]; q++) {
            size_t i = o->by_srv[q];
            const struct ms_range_view *r = &v->ranges[i];
            double lr, nm;
            if (r->server_id != v->servers[si].id || r->busy || r->replicated ||
                o->used[i] || !r->load ||
                !ms__pol_since(v->now_ms, r->move_ms, c->move_cooldown_ms)) {
                continue;
            }
            lr = ms__pol_demand(r);
            nm = fmax(load[si] - lr, load[ti] + lr);
            if (!best || nm < best_max ||
                (nm == best_max &&
                 r->load->key_bytes < best->load->key_bytes)) {
                best = r;
                best_max = nm;
                lr_best = lr;
            }
        }
        taken[si] = true;
        if (!best || best_max > load[si] * (1.0 - c->move_gain_pct / 100.0)) {
            /* No whole range evens it out (one range carries most of the
             * load): split the busiest one so that a half can move, once
             * the server has been over for split_sustain_ms. */
            if (v->now_ms >= ms__smark(p, v->servers[si].id)->over_since +
                                 c->split_sustain_ms) {
                ms__balance_split(p, v, o, si, load[si], mean);
            }
            continue;
        }
        {
            struct ms_decision *d = ms__emit_shift(
                o, MS_DECIDE_MOVE, c, v, best, si, ti, lr_best, mean, load);
            snprintf(d->reason, sizeof(d->reason),
                     "server %" PRIu64
                     " demand %.0f/s > mean %.0f/s + %u%%; "
                     "server %" PRIu64
                     " least loaded (%.0f/s); moving "
                     "%.0f/s makes the larger %.0f/s",
                     v->servers[si].id, d->src_load, mean,
                     c->move_tolerance_pct, v->servers[ti].id, d->dst_load,
                     lr_best, best_max);
            taken[ti] = true;
            moves++;
        }
    }
out:
    free(load);
    free(taken);
}

/* Pass 3: transfers of primary roles (see the header comment). */
static void ms__pass_transfers(struct ms__dflt *p,
                               const struct ms_cluster_view *v,
                               struct ms__out *o)
{
    const struct ms_policy_config *c = &p->cfg;
    size_t ns = v->nservers, neligible = 0;
    double *load = rt_xcalloc(ns ? ns : 1, sizeof(*load));
    bool *taken = rt_xcalloc(ns ? ns : 1, sizeof(*taken));
    unsigned moves = v->moves;
    double mean = 0;

    memcpy(load, o->sload, ns * sizeof(*load));
    for (size_t j = 0; j < ns; j++) {
        if (ms__pol_eligible(&v->servers[j])) {
            mean += load[j];
            neligible++;
        }
    }
    if (neligible < 2) {
        goto out;
    }
    mean /= (double)neligible;
    while (moves < c->max_moves && o->n < o->max) {
        const struct ms_range_view *best = NULL;
        double best_max = 0, lr_best = 0;
        size_t si = ns, ti = ns;
        for (size_t j = 0; j < ns; j++) {
            if (!taken[j] && ms__pol_server_free(c, v, &v->servers[j]) &&
                ms__overloaded(c, load[j], mean) &&
                (si == ns || load[j] > load[si])) {
                si = j;
            }
        }
        if (si == ns) {
            break;
        }
        taken[si] = true;
        for (size_t q = o->srv_off[si]; q < o->srv_off[si + 1]; q++) {
            size_t i = o->by_srv[q];
            const struct ms_range_view *r = &v->ranges[i];
            double lr;
            if (r->server_id != v->servers[si].id || !r->replicated ||
                r->busy || o->used[i] || !r->load ||
                !ms__pol_since(v->now_ms, r->move_ms, c->move_cooldown_ms)) {
                continue;
            }
            lr = ms__pol_demand(r);
            for (size_t k = 0; k < r->nisr; k++) {
                size_t j = ms__pol_server_idx(v, r->isr[k]);
                double nm;
                if (j == ns || j == si || taken[j] ||
                    !ms__pol_server_free(c, v, &v->servers[j])) {
                    continue;
                }
                nm = fmax(load[si] - lr, load[j] + lr);
                if (!best || nm < best_max) {
                    best = r;
                    best_max = nm;
                    lr_best = lr;
                    ti = j;
                }
            }
        }
        if (!best || best_max > load[si] * (1.0 - c->move_gain_pct / 100.0)) {
            continue;
        }
        {
            struct ms_decision *d = ms__emit_shift(
                o, MS_DECIDE_TRANSFER, c, v, best, si, ti, lr_best, mean, load);
            snprintf(d->reason, sizeof(d->reason),
                     "server %" PRIu64
                     " primary demand %.0f/s > mean %.0f/s + %u%%; "
                     "in-sync replica on server %" PRIu64
                     " (%.0f/s) takes the primary role: "
                     "%.0f/s moves, the larger becomes %.0f/s",
                     v->servers[si].id, d->src_load, mean,
                     c->move_tolerance_pct, v->servers[ti].id, d->dst_load,
                     lr_best, best_max);
            taken[ti] = true;
            moves++;
        }
    }
out:
    free(load);
    free(taken);
}

/* Pass 4b: replica counts (see ms_policy_config). */

static bool ms__holds(const struct ms_range_view *r, uint64_t id)
{
    for (size_t k = 0; k < r->nreplicas; k++) {
        if (r->replicas[k] == id) {
            return true;
        }
    }
    return false;
}

/* The target for @r's copy on server @si: a free eligible server holding
 * no copy and at least two replicas fewer than @si, whose zone holds no
 * more of the kept copies than @si's (the copies never crowd into fewer
 * zones), in a zone holding the fewest kept copies, then the emptiest,
 * then the lowest id; @ns if none. */
static size_t ms__replica_target(const struct ms_policy_config *c,
                                 const struct ms_cluster_view *v,
                                 const struct ms_range_view *r,
                                 size_t si)
{
    size_t ns = v->nservers, best = ns, best_z = 0;
    uint64_t src = v->servers[si].id;
    for (size_t j = 0; j < ns; j++) {
        const struct ms_server_view *t = &v->servers[j];
        size_t z;
        if (j == si || !ms__pol_server_free(c, v, t) || ms__holds(r, t->id) ||
            t->nreplicas + 1 >= v->servers[si].nreplicas) {
            continue;
        }
        z = ms__pol_kept_in_zone(v, r, src, t->zone ? t->zone : "");
        if (z > ms__pol_kept_in_zone(v, r, src, ms__pol_zone_of(v, src))) {
            continue; /* its zone would hold more than the source's did */
        }
        if (best == ns || z < best_z ||
            (z == best_z && (t->nreplicas < v->servers[best].nreplicas ||
                             (t->nreplicas == v->servers[best].nreplicas &&
                              t->id < v->servers[best].id)))) {
            best = j;
            best_z = z;
        }
    }
    if (best == ns) {
        return ns;
    }
    /* ms_place_one's zone rule, as the executor checks it: no eligible
     * server outside the set may sit in a zone with fewer kept copies. */
    for (size_t j = 0; j < ns; j++) {
        const struct ms_server_view *t = &v->servers[j];
        if (j != si && ms__pol_eligible(t) && !ms__holds(r, t->id) &&
            ms__pol_kept_in_zone(v, r, src, t->zone ? t->zone : "") < best_z) {
            return ns;
        }
    }
    return best;
}

static void ms__pass_replicas(struct ms__dflt *p,
                              const struct ms_cluster_view *v,
                              struct ms__out *o)
{
    const struct ms_policy_config *c = &p->cfg;
    size_t ns = v->nservers, lo = ns, hi = ns;
    bool *tried;

    if (v->moves >= c->max_moves || o->n >= o->max) {
        return;
    }
    for (size_t i = 0; i < o->n; i++) {
        if (o->d[i].kind == MS_DECIDE_MOVE ||
            o->d[i].kind == MS_DECIDE_TRANSFER) {
            return; /* the loads change first */
        }
    }
    for (size_t j = 0; j < ns; j++) {
        const struct ms_server_view *s = &v->servers[j];
        if (!ms__pol_eligible(s)) {
            continue;
        }
        if (lo == ns || s->nreplicas < v->servers[lo].nreplicas) {
            lo = j;
        }
        if (hi == ns || s->nreplicas > v->servers[hi].nreplicas) {
            hi = j;
        }
    }
    if (lo == ns || v->servers[hi].nreplicas <= v->servers[lo].nreplicas + 1) {
        return;
    }
    /* From the fullest free server that has a copy to give. */
    tried = rt_xcalloc(ns, sizeof(*tried));
    for (;;) {
        const struct ms_range_view *best = NULL;
        size_t si = ns, ti = ns;
        for (size_t j = 0; j < ns; j++) {
            const struct ms_server_view *s = &v->servers[j];
            if (!tried[j] && ms__pol_server_free(c, v, s) &&
                s->nreplicas > v->servers[lo].nreplicas + 1 &&
                (si == ns || s->nreplicas > v->servers[si].nreplicas)) {
                si = j;
            }
        }
        if (si == ns) {
            break;
        }
        tried[si] = true;
        for (size_t i = 0; i < v->nranges; i++) {
            const struct ms_range_view *r = &v->ranges[i];
            size_t t;
            if (!r->replicated || r->busy || o->used[i] ||
                r->server_id == v->servers[si].id ||
                !ms__holds(r, v->servers[si].id) || r->rf == 0 ||
                r->nreplicas != r->rf || r->nisr != r->nreplicas ||
                !ms__pol_since(v->now_ms, r->move_ms, c->move_cooldown_ms)) {
                continue;
            }
            t = ms__replica_target(c, v, r, si);
            if (t == ns) {
                continue;
            }
            if (!best || (r->load ? r->load->key_bytes : 0) <
                             (best->load ? best->load->key_bytes : 0)) {
                best = r;
                ti = t;
            }
        }
        if (best) {
            struct ms_decision *d = ms__pol_emit(o, MS_DECIDE_MOVE, best->id);
            d->server_id = v->servers[ti].id;
            d->src_id = v->servers[si].id;
            d->load = ms__pol_demand(best);
            o->used[best - v->ranges] = true;
            snprintf(d->reason, sizeof(d->reason),
                     "replica counts: server %" PRIu64
                     " holds %zu, server %" PRIu64
                     " %zu (more than one apart): a secondary copy moves "
                     "(%" PRIu64 " bytes)",
                     v->servers[si].id, v->servers[si].nreplicas,
                     v->servers[ti].id, v->servers[ti].nreplicas,
                     best->load ? best->load->key_bytes : 0);
            break;
        }
    }
    free(tried);
}

/* Pass 5: one merge. */
static void ms__pass_merges(struct ms__dflt *p,
                            const struct ms_cluster_view *v,
                            struct ms__out *o)
{
    const struct ms_policy_config *c = &p->cfg;
    for (size_t i = 0; i + 1 < v->nranges && o->n < o->max; i++) {
        const struct ms_range_view *a = &v->ranges[i], *b = &v->ranges[i + 1];
        const struct ms_server_view *s = ms__pol_server(v, a->server_id);
        struct ms__mark *ma, *mb;
        struct ms_decision *d;
        if (a->table_id != b->table_id || !a->high ||
            strcmp(a->high, b->low) != 0 || a->server_id != b->server_id ||
            !s || !s->up || a->busy || b->busy || a->replicated ||
            b->replicated || o->used[i] || o->used[i + 1] || !a->load ||
            !b->load) {
            continue;
        }
        if (a->load->key_bytes + b->load->key_bytes > c->merge_max_bytes) {
            continue;
        }
        if (!ms__pol_since(v->now_ms, a->split_ms, c->merge_after_split_ms) ||
            !ms__pol_since(v->now_ms, b->split_ms, c->merge_after_split_ms)) {
            continue;
        }
        ma = ms__mark_get(p, a->id);
        mb = ms__mark_get(p, b->id);
        if (!ma->cold_since || !mb->cold_since ||
            v->now_ms < ma->cold_since + c->merge_sustain_ms ||
            v->now_ms < mb->cold_since + c->merge_sustain_ms) {
            continue;
        }
        d = ms__pol_emit(o, MS_DECIDE_MERGE, a->id);
        d->range_id2 = b->id;
        d->load = ms__pol_demand(a);
        d->load2 = ms__pol_demand(b);
        d->threshold = c->merge_eps;
        snprintf(d->reason, sizeof(d->reason),
                 "both below %.0f/s for %.0f s (%.1f/s, %.1f/s), %" PRIu64
                 " bytes together",
                 c->merge_eps, c->merge_sustain_ms / 1000.0, d->load, d->load2,
                 a->load->key_bytes + b->load->key_bytes);
        o->used[i] = o->used[i + 1] = true;
        break;
    }
}

static size_t ms__dflt_decide(void *state,
                              const struct ms_cluster_view *v,
                              struct ms_decision *out,
                              size_t max)
{
    struct ms__dflt *p = state;
    struct ms__out o = {out, 0, max, NULL, NULL, NULL, NULL};

    p->calls++;
    o.used = rt_xcalloc(v->nranges ? v->nranges : 1, sizeof(*o.used));
    ms__server_index(v, &o);
    ms__pass_marks(p, v, &o);
    ms__pass_splits(p, v, &o);
    ms__pass_transfers(p, v, &o);
    ms__pass_moves(p, v, &o);
    ms__pass_replicas(p, v, &o);
    ms__pass_merges(p, v, &o);
    free(o.used);
    free(o.sload);
    free(o.by_srv);
    free(o.srv_off);
    return o.n;
}

static void ms__dflt_destroy(void *state)
{
    struct ms__dflt *p = state;
    for (size_t i = 0; i < p->marks.n; i++) {
        free(p->marks.v[i]);
    }
    ms_vec_free(&p->marks);
    free(p->smarks);
    free(p);
}

static const struct ms_policy_ops ms__dflt_ops = {
    .name = "default",
    .place = ms__pol_fewest_place,
    .decide = ms__dflt_decide,
    .destroy = ms__dflt_destroy,
};

static int ms__dflt_create(const struct ms_policy_config *cfg,
                           struct ms_policy *out,
                           char *errmsg)
{
    struct ms__dflt *p;
    (void)errmsg;
    p = rt_xcalloc(1, sizeof(*p));
    p->cfg = *cfg;
    p->cfg.opts = NULL; /* borrowed: not kept */
    out->ops = &ms__dflt_ops;
    out->state = p;
    return 0;
}

static int ms__none_create(const struct ms_policy_config *cfg,
                           struct ms_policy *out,
                           char *errmsg)
{
    (void)cfg;
    (void)errmsg;
    out->ops = &ms__none_ops;
    out->state = NULL;
    return 0;
}

/* The policies by name: a new one is one line here. @takes_opts: whether
 * it reads cfg->opts (the others refuse them, so a typo is not silently
 * ignored). */
static const struct
{
    const char *name;
    int (*create)(const struct ms_policy_config *cfg,
                  struct ms_policy *out,
                  char *errmsg);
    bool takes_opts;
} ms__policies[] = {
    {"default", ms__dflt_create, false},
    {"none", ms__none_create, false},
    {"crdb", ms_policy_crdb_create, true},
};

#define MS__NPOLICIES (sizeof(ms__policies) / sizeof(ms__policies[0]))

const char *ms_policy_names(void)
{
    static char names[128];
    if (!names[0]) {
        size_t off = 0;
        for (size_t i = 0; i < MS__NPOLICIES; i++) {
            off += (size_t)snprintf(names + off, sizeof(names) - off, "%s%s",
                                    i ? "|" : "", ms__policies[i].name);
        }
    }
    return names;
}

int ms_policy_create_msg(const char *name,
                         const struct ms_policy_config *cfg,
                         struct ms_policy *out,
                         char *errmsg)
{
    struct ms_policy_config dflt;
    if (!name) {
        name = "default";
    }
    if (!cfg) {
        ms_policy_config_default(&dflt);
        cfg = &dflt;
    }
    for (size_t i = 0; i < MS__NPOLICIES; i++) {
        if (strcmp(name, ms__policies[i].name) != 0) {
            continue;
        }
        if (!ms__policies[i].takes_opts && cfg->opts && cfg->opts[0]) {
            rt_errmsg_printf(errmsg, "policy %s takes no options ('%s')", name,
                             cfg->opts);
            return RT_EINVAL;
        }
        return ms__policies[i].create(cfg, out, errmsg);
    }
    rt_errmsg_printf(errmsg, "unknown policy '%s' (%s)", name,
                     ms_policy_names());
    return RT_EINVAL;
}

int ms_policy_create(const char *name,
                     const struct ms_policy_config *cfg,
                     struct ms_policy *out)
{
    char errmsg[RT_ERRMSG_SIZE];
    return ms_policy_create_msg(name, cfg, out, errmsg);
}

void ms_policy_destroy(struct ms_policy *p)
{
    if (p->ops && p->ops->destroy) {
        p->ops->destroy(p->state);
    }
    p->ops = NULL;
    p->state = NULL;
}
