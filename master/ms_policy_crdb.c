/* Policy "crdb" (see ms_policy_crdb.h for the rules and their sources).
 *
 * State kept between calls: per range, since when it is hot (the split
 * finder's start) and since when it and its right-hand neighbour have
 * been cold enough together to merge; the time of the next rebalancer
 * run. Everything else is recomputed from the view on every call.
 *
 * This file calls nothing in ms_policy.c (which calls it): the small
 * helpers both need (eligibility, demand, placement, lookups in the view)
 * are in ms_policy_util.c (ms_policy_int.h). */
#include "ms_policy_crdb.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ms_policy_int.h"
#include "ms_util.h"
#include "rt_alloc.h"
#include "rt_err.h"
#include "rt_utf8.h"

struct ms__crdb_opts
{
    uint32_t interval_ms;
    double threshold_pct;
    double min_diff;
    double split_balance_pct;
    unsigned split_min_samples;
    unsigned hot_ranges;
};

/* CockroachDB's minLeaseLoadFraction and minReplicaLoadFraction
 * (pkg/kv/kvserver/store_rebalancer.go): a range carrying less of its
 * server's load than this is churn for no gain. */
#define MS__CRDB_MIN_LEASE_FRAC 0.005
#define MS__CRDB_MIN_REPLICA_FRAC 0.02

struct ms__cmark
{
    uint64_t range_id;
    bool hot;
    uint64_t hot_since;  /* the finder started recording (valid while hot) */
    uint64_t pair_id;    /* right-hand neighbour of the cold pair, 0: none */
    uint64_t pair_since; /* since when the pair is below the merge level */
    uint64_t seen;       /* decide() call that last saw the range */
};

struct ms__crdb
{
    struct ms_policy_config cfg;
    struct ms__crdb_opts o;
    struct ms_vec marks; /* struct ms__cmark *, by range id */
    uint64_t calls;
    uint64_t next_rebalance_ms; /* 0: not yet scheduled */
};

/* ---- helpers ---- */

static struct ms__cmark *ms__crdb_mark(struct ms__crdb *p, uint64_t id)
{
    return ms_vec_get(&p->marks, offsetof(struct ms__cmark, range_id), id,
                      sizeof(struct ms__cmark), NULL);
}

/* ---- the weighted split finder ---- */

char *ms_crdb_split_key(const struct ms_load_range *r,
                        const char *low,
                        const char *high,
                        uint64_t now_ms,
                        size_t min_samples,
                        double max_score,
                        double *score,
                        double *left_share)
{
    struct ms_load_samples sm;
    double left = 0, best_score = 0, best_left = 0;
    const char *best = NULL;
    char *out = NULL;

    ms_load_range_samples(r, low, high, now_ms, &sm);
    if (sm.nsamples < min_samples || sm.nsamples == 0) {
        ms_load_samples_free(&sm);
        return NULL;
    }
    for (size_t i = 0; i < sm.n; i++) {
        if (rt_utf16_cmpz(sm.v[i].pk, low) > 0 && left > 0) {
            double sc = fabs(left - (sm.total - left)) / sm.total;
            if (sc < max_score && (!best || sc < best_score)) {
                best = sm.v[i].pk;
                best_score = sc;
                best_left = left;
            }
        }
        left += sm.v[i].w;
    }
    if (best) {
        out = rt_xstrdup(best);
        if (score) {
            *score = best_score;
        }
        if (left_share) {
            *left_share = best_left / sm.total;
        }
    }
    ms_load_samples_free(&sm);
    return out;
}

/* ---- marks and load-based splits ---- */

static void ms__crdb_marks(struct ms__crdb *p,
                           const struct ms_cluster_view *v,
                           struct ms__out *o)
{
    for (size_t i = 0; i < v->nranges; i++) {
        const struct ms_range_view *r = &v->ranges[i];
        size_t si = ms__pol_server_idx(v, r->server_id);
        const struct ms_server_view *s =
            si < v->nservers ? &v->servers[si] : NULL;
        struct ms__cmark *mk;
        struct ms_decision *d;
        double dem, thr;

        if (!r->load || !s || !s->up) {
            continue;
        }
        mk = ms__crdb_mark(p, r->id);
        mk->seen = p->calls;
        dem = ms__pol_demand(r);
        thr = ms_policy_hot_threshold(&p->cfg, ms__pol_range_cap(r, s));
        if (!mk->hot && dem >= thr) {
            mk->hot = true;
            mk->hot_since = v->now_ms ? v->now_ms : 1;
            d = ms__pol_emit(o, MS_DECIDE_HOT, r->id);
            if (d) {
                d->load = dem;
                d->threshold = thr;
                snprintf(d->reason, sizeof(d->reason),
                         "demand %.0f/s >= load split threshold %.0f/s: "
                         "the split finder starts recording",
                         dem, thr);
            }
        } else if (mk->hot && dem < thr) {
            mk->hot = false;
            d = ms__pol_emit(o, MS_DECIDE_COOL, r->id);
            if (d) {
                d->load = dem;
                d->threshold = thr;
                snprintf(d->reason, sizeof(d->reason),
                         "demand %.0f/s < load split threshold %.0f/s after "
                         "%.1f s: the split finder is dropped",
                         dem, thr,
                         (double)(v->now_ms - mk->hot_since) / 1000.0);
            }
        }
    }
    for (size_t i = 0; i < p->marks.n;) {
        struct ms__cmark *mk = p->marks.v[i];
        if (mk->seen != p->calls) {
            free(ms_vec_remove(&p->marks, i));
        } else {
            i++;
        }
    }
}

static void ms__crdb_splits(struct ms__crdb *p,
                            const struct ms_cluster_view *v,
                            struct ms__out *o)
{
    const struct ms_policy_config *c = &p->cfg;
    for (size_t i = 0; i < v->nranges && o->n < o->max; i++) {
        const struct ms_range_view *r = &v->ranges[i];
        size_t si = ms__pol_server_idx(v, r->server_id);
        struct ms__cmark *mk;
        struct ms_decision *d;
        double score = 0, share = 0.5;
        char *key;

        if (!r->load || si == v->nservers || !v->servers[si].up || r->busy ||
            o->used[i]) {
            continue;
        }
        mk = ms__crdb_mark(p, r->id);
        if (!mk->hot || v->now_ms < mk->hot_since + c->split_sustain_ms ||
            !ms__pol_since(v->now_ms, r->born_ms, c->split_cooldown_ms) ||
            ms__pol_table_nranges(v, r->table_id) >= c->split_max_ranges) {
            continue;
        }
        key = ms_crdb_split_key(r->load, r->low, r->high, v->now_ms,
                                p->o.split_min_samples,
                                p->o.split_balance_pct / 100.0, &score, &share);
        if (!key) {
            continue; /* no key balances the load well enough */
        }
        d = ms__pol_emit(o, MS_DECIDE_SPLIT, r->id);
        d->key = key;
        d->load = ms__pol_demand(r);
        d->threshold =
            ms_policy_hot_threshold(c, ms__pol_range_cap(r, &v->servers[si]));
        d->share = share;
        snprintf(d->reason, sizeof(d->reason),
                 "load-based split: demand %.0f/s >= %.0f/s for %.1f s; "
                 "weighted finder key leaves %.0f%% left, %.0f%% right "
                 "(balance score %.2f < %.2f)",
                 d->load, d->threshold,
                 (double)(v->now_ms - mk->hot_since) / 1000.0, share * 100,
                 (1 - share) * 100, score, p->o.split_balance_pct / 100.0);
        o->used[i] = true;
    }
}

/* ---- the store rebalancer ---- */

struct ms__crdb_rb
{
    double *load; /* per server of the view: demand of its primaries */
    bool *tgt;    /* per server: took a range in this call */
    double mean, max_t, min_t;
    unsigned inflight;
};

/* shouldNotMoveAway: the source would fall below the underfull level. */
static bool ms__crdb_not_away(const struct ms__crdb_rb *rb,
                              size_t si,
                              double lr)
{
    return rb->load[si] - lr < rb->min_t;
}

/* shouldNotMoveTo: an underfull target may rise to the overfull level,
 * any other only to the mean. */
static bool ms__crdb_not_to(const struct ms__crdb_rb *rb, size_t ti, double lr)
{
    double nl = rb->load[ti] + lr;
    if (rb->load[ti] < rb->min_t) {
        return nl > rb->max_t;
    }
    return nl > rb->mean;
}

static bool ms__crdb_holds(const struct ms_range_view *r, uint64_t id)
{
    if (!r->replicated) {
        return r->server_id == id;
    }
    for (size_t k = 0; k < r->nreplicas; k++) {
        if (r->replicas[k] == id) {
            return true;
        }
    }
    return false;
}

static bool ms__crdb_in_isr(const struct ms_range_view *r, uint64_t id)
{
    for (size_t k = 0; k < r->nisr; k++) {
        if (r->isr[k] == id) {
            return true;
        }
    }
    return false;
}

/* The coolest acceptable target for range @r leaving server @si: for a
 * transfer (@transfer) an in-sync replica, else a server holding no copy
 * (for a replicated range, in a zone that holds no more of its other
 * copies than the source's: the copies never crowd into fewer zones).
 * Returns its index or v->nservers. */
static size_t ms__crdb_target(struct ms__crdb *p,
                              const struct ms_cluster_view *v,
                              const struct ms__crdb_rb *rb,
                              const struct ms_range_view *r,
                              size_t si,
                              double lr,
                              bool transfer)
{
    size_t ns = v->nservers, best = ns;
    for (size_t j = 0; j < ns; j++) {
        const struct ms_server_view *t = &v->servers[j];
        if (j == si || rb->tgt[j] || !ms__pol_server_free(&p->cfg, v, t)) {
            continue;
        }
        if (transfer ? !ms__crdb_in_isr(r, t->id) : ms__crdb_holds(r, t->id)) {
            continue;
        }
        if (!transfer && r->replicated &&
            ms__pol_kept_in_zone(v, r, v->servers[si].id,
                                 ms__pol_zone_of(v, t->id)) >
                ms__pol_kept_in_zone(v, r, v->servers[si].id,
                                     ms__pol_zone_of(v, v->servers[si].id))) {
            continue;
        }
        if (ms__crdb_not_to(rb, j, lr)) {
            continue;
        }
        if (best == ns || rb->load[j] < rb->load[best] ||
            (rb->load[j] == rb->load[best] && t->id < v->servers[best].id)) {
            best = j;
        }
    }
    return best;
}

static void ms__crdb_shift(struct ms__crdb *p,
                           const struct ms_cluster_view *v,
                           struct ms__out *o,
                           struct ms__crdb_rb *rb,
                           size_t ri,
                           size_t si,
                           size_t ti,
                           bool transfer)
{
    const struct ms_range_view *r = &v->ranges[ri];
    double lr = ms__pol_demand(r);
    struct ms_decision *d =
        ms__pol_emit(o, transfer ? MS_DECIDE_TRANSFER : MS_DECIDE_MOVE, r->id);
    d->server_id = v->servers[ti].id;
    d->load = lr;
    d->src_load = rb->load[si];
    d->dst_load = rb->load[ti];
    d->mean_load = rb->mean;
    d->threshold = rb->max_t;
    snprintf(d->reason, sizeof(d->reason),
             "store rebalancer (%s): server %" PRIu64
             " demand %.0f/s > overfull %.0f/s (mean %.0f/s + max(%.0f%%, "
             "%.0f/s)); %s %.0f/s to %sserver %" PRIu64
             " (%.0f/s -> %.0f/s, <= %s), source stays >= %.0f/s",
             transfer ? "lease transfer" : "replica rebalance",
             v->servers[si].id, rb->load[si], rb->max_t, rb->mean,
             p->o.threshold_pct, p->o.min_diff,
             transfer ? "its primary role, carrying" : "the range, carrying",
             lr, transfer ? "the coolest in-sync replica, " : "the coolest ",
             v->servers[ti].id, rb->load[ti], rb->load[ti] + lr,
             rb->load[ti] < rb->min_t ? "overfull" : "mean", rb->min_t);
    o->used[ri] = true;
    rb->load[si] -= lr;
    rb->load[ti] += lr;
    rb->tgt[ti] = true;
    rb->inflight++;
}

/* Index of the hottest range server @si is primary of, not busy, not
 * used by this call and not in @skip; or v->nranges. */
static size_t ms__crdb_next_hot(const struct ms_cluster_view *v,
                                const struct ms__out *o,
                                const bool *skip,
                                size_t si)
{
    size_t best = v->nranges;
    for (size_t i = 0; i < v->nranges; i++) {
        const struct ms_range_view *r = &v->ranges[i];
        if (r->server_id != v->servers[si].id || !r->load || r->busy ||
            o->used[i] || skip[i]) {
            continue;
        }
        if (best == v->nranges ||
            ms__pol_demand(r) > ms__pol_demand(&v->ranges[best])) {
            best = i;
        }
    }
    return best;
}

/* rebalanceStore for server @si: the lease loop over its hottest ranges,
 * then the replica loop over those that found no lease target. */
static void ms__crdb_shed(struct ms__crdb *p,
                          const struct ms_cluster_view *v,
                          struct ms__out *o,
                          struct ms__crdb_rb *rb,
                          size_t si)
{
    const struct ms_policy_config *c = &p->cfg;
    bool *seen = rt_xcalloc(v->nranges ? v->nranges : 1, sizeof(*seen));
    size_t *hot =
        rt_xcalloc(p->o.hot_ranges ? p->o.hot_ranges : 1, sizeof(*hot));
    size_t nhot = 0, nleft = 0;
    size_t *left =
        rt_xcalloc(p->o.hot_ranges ? p->o.hot_ranges : 1, sizeof(*left));

    /* The hottest ranges, in descending demand (ReplicaRankings). */
    while (nhot < p->o.hot_ranges) {
        size_t i = ms__crdb_next_hot(v, o, seen, si);
        if (i == v->nranges) {
            break;
        }
        seen[i] = true;
        hot[nhot++] = i;
    }
    /* Phase 1: primary-role transfers (lease transfers). */
    for (size_t k = 0; k < nhot; k++) {
        const struct ms_range_view *r = &v->ranges[hot[k]];
        double lr = ms__pol_demand(r);
        size_t ti;
        if (rb->load[si] <= rb->max_t || rb->inflight >= c->max_moves ||
            o->n >= o->max) {
            goto out;
        }
        if (lr < rb->load[si] * MS__CRDB_MIN_LEASE_FRAC ||
            !ms__pol_since(v->now_ms, r->move_ms, c->move_cooldown_ms)) {
            continue;
        }
        if (!r->replicated || ms__crdb_not_away(rb, si, lr) ||
            (ti = ms__crdb_target(p, v, rb, r, si, lr, true)) == v->nservers) {
            left[nleft++] = hot[k];
            continue;
        }
        ms__crdb_shift(p, v, o, rb, hot[k], si, ti, true);
    }
    /* Phase 2: replica rebalancing (moves) of what found no transfer. */
    for (size_t k = 0; k < nleft; k++) {
        const struct ms_range_view *r = &v->ranges[left[k]];
        double lr = ms__pol_demand(r);
        size_t ti;
        if (rb->load[si] <= rb->max_t || rb->inflight >= c->max_moves ||
            o->n >= o->max) {
            break;
        }
        if (lr < rb->load[si] * MS__CRDB_MIN_REPLICA_FRAC ||
            ms__crdb_not_away(rb, si, lr)) {
            continue;
        }
        /* Over- or under-replicated ranges are left to re-replication. */
        if (r->replicated &&
            (r->rf == 0 || r->nreplicas != r->rf || r->nisr != r->nreplicas)) {
            continue;
        }
        ti = ms__crdb_target(p, v, rb, r, si, lr, false);
        if (ti == v->nservers) {
            continue;
        }
        ms__crdb_shift(p, v, o, rb, left[k], si, ti, false);
    }
out:
    free(left);
    free(hot);
    free(seen);
}

static void ms__crdb_rebalance(struct ms__crdb *p,
                               const struct ms_cluster_view *v,
                               struct ms__out *o)
{
    const struct ms_policy_config *c = &p->cfg;
    size_t ns = v->nservers, nel = 0;
    struct ms__crdb_rb rb = {0};
    bool *done;
    double margin;

    if (p->next_rebalance_ms == 0) {
        p->next_rebalance_ms = v->now_ms + p->o.interval_ms;
        return;
    }
    if (v->now_ms < p->next_rebalance_ms) {
        return;
    }
    p->next_rebalance_ms = v->now_ms + p->o.interval_ms;
    if (ns == 0) {
        return;
    }
    rb.load = rt_xcalloc(ns, sizeof(*rb.load));
    rb.tgt = rt_xcalloc(ns, sizeof(*rb.tgt));
    done = rt_xcalloc(ns, sizeof(*done));
    rb.inflight = v->moves;
    for (size_t i = 0; i < v->nranges; i++) {
        size_t j = ms__pol_server_idx(v, v->ranges[i].server_id);
        if (j < ns) {
            rb.load[j] += ms__pol_demand(&v->ranges[i]);
        }
    }
    for (size_t j = 0; j < ns; j++) {
        if (ms__pol_eligible(&v->servers[j])) {
            rb.mean += rb.load[j];
            nel++;
        }
    }
    if (nel < 2) {
        goto out;
    }
    rb.mean /= (double)nel;
    margin = fmax(rb.mean * p->o.threshold_pct / 100.0, p->o.min_diff);
    rb.max_t = rb.mean + margin;
    rb.min_t = rb.mean - margin;
    /* Every store runs its own rebalancer; here the overfull ones take
     * their turn hottest first, each seeing what the previous one moved. */
    for (;;) {
        size_t si = ns;
        for (size_t j = 0; j < ns; j++) {
            if (!done[j] && ms__pol_server_free(c, v, &v->servers[j]) &&
                rb.load[j] > rb.max_t &&
                (si == ns || rb.load[j] > rb.load[si])) {
                si = j;
            }
        }
        if (si == ns || rb.inflight >= c->max_moves || o->n >= o->max) {
            break;
        }
        done[si] = true;
        ms__crdb_shed(p, v, o, &rb, si);
    }
out:
    free(done);
    free(rb.tgt);
    free(rb.load);
}

/* ---- the merge queue ---- */

static void ms__crdb_merges(struct ms__crdb *p,
                            const struct ms_cluster_view *v,
                            struct ms__out *o)
{
    const struct ms_policy_config *c = &p->cfg;
    bool merged = false;
    for (size_t i = 0; i + 1 < v->nranges; i++) {
        const struct ms_range_view *a = &v->ranges[i], *b = &v->ranges[i + 1];
        size_t si = ms__pol_server_idx(v, a->server_id);
        const struct ms_server_view *s =
            si < v->nservers ? &v->servers[si] : NULL;
        struct ms__cmark *ma;
        struct ms_decision *d;
        double sum, level;

        if (a->table_id != b->table_id || !a->high ||
            strcmp(a->high, b->low) != 0 || !a->load || !b->load || !s ||
            !s->up) {
            continue;
        }
        ma = ms__crdb_mark(p, a->id);
        sum = ms__pol_demand(a) + ms__pol_demand(b);
        level = ms_policy_hot_threshold(c, ms__pol_range_cap(a, s)) / 2;
        /* The pair's clock runs whether or not it can merge now, so the
         * rule reads "below half the threshold for merge_sustain_ms". */
        if (sum >= level) {
            ma->pair_id = 0;
            ma->pair_since = 0;
            continue;
        }
        if (ma->pair_id != b->id || !ma->pair_since) {
            ma->pair_id = b->id;
            ma->pair_since = v->now_ms ? v->now_ms : 1;
        }
        if (merged || o->n >= o->max || a->server_id != b->server_id ||
            a->busy || b->busy || a->replicated || b->replicated ||
            o->used[i] || o->used[i + 1] ||
            v->now_ms < ma->pair_since + c->merge_sustain_ms ||
            a->load->key_bytes + b->load->key_bytes > c->merge_max_bytes ||
            !ms__pol_since(v->now_ms, a->split_ms, c->merge_after_split_ms) ||
            !ms__pol_since(v->now_ms, b->split_ms, c->merge_after_split_ms)) {
            continue;
        }
        d = ms__pol_emit(o, MS_DECIDE_MERGE, a->id);
        d->range_id2 = b->id;
        d->load = ms__pol_demand(a);
        d->load2 = ms__pol_demand(b);
        d->threshold = level;
        snprintf(d->reason, sizeof(d->reason),
                 "merge queue: together %.1f/s < half the load split "
                 "threshold (%.0f/s) for %.0f s, %" PRIu64 " bytes",
                 sum, level, (double)(v->now_ms - ma->pair_since) / 1000.0,
                 a->load->key_bytes + b->load->key_bytes);
        o->used[i] = o->used[i + 1] = true;
        merged = true;
    }
}

/* ---- ops ---- */

static size_t ms__crdb_decide(void *state,
                              const struct ms_cluster_view *v,
                              struct ms_decision *out,
                              size_t max)
{
    struct ms__crdb *p = state;
    struct ms__out o = {out, 0, max, NULL, NULL, NULL, NULL};

    p->calls++;
    o.used = rt_xcalloc(v->nranges ? v->nranges : 1, sizeof(*o.used));
    ms__crdb_marks(p, v, &o);
    ms__crdb_splits(p, v, &o);
    ms__crdb_rebalance(p, v, &o);
    ms__crdb_merges(p, v, &o);
    free(o.used);
    return o.n;
}

static void ms__crdb_destroy(void *state)
{
    struct ms__crdb *p = state;
    for (size_t i = 0; i < p->marks.n; i++) {
        free(p->marks.v[i]);
    }
    ms_vec_free(&p->marks);
    free(p);
}

static const struct ms_policy_ops ms__crdb_ops = {
    .name = "crdb",
    .place = ms__pol_fewest_place,
    .decide = ms__crdb_decide,
    .destroy = ms__crdb_destroy,
};

/* ---- options ---- */

static void ms__crdb_opts_default(struct ms__crdb_opts *o)
{
    o->interval_ms = 5000;
    o->threshold_pct = 10;
    o->min_diff = 100;
    o->split_balance_pct = 25;
    o->split_min_samples = 10;
    o->hot_ranges = 128;
}

/* One KEY=VALUE of @len bytes at @kv into @o. */
static int ms__crdb_opt(struct ms__crdb_opts *o,
                        const char *kv,
                        size_t len,
                        char *errmsg)
{
    static const struct
    {
        const char *key;
        double lo, hi;
    } keys[] = {
        {"interval_ms", 1, 3600000},
        {"threshold_pct", 0, 1000},
        {"min_diff", 0, 1e9},
        {"split_balance_pct", 1, 100},
        {"split_min_samples", 1, MS_LOAD_SAMPLES},
        {"hot_ranges", 1, 100000},
    };
    char buf[128], *eq, *end;
    double val;

    if (len >= sizeof(buf)) {
        rt_errmsg_printf(errmsg, "policy crdb: option '%.*s...' too long", 32,
                         kv);
        return RT_EINVAL;
    }
    memcpy(buf, kv, len);
    buf[len] = '\0';
    eq = strchr(buf, '=');
    if (!eq) {
        rt_errmsg_printf(errmsg, "policy crdb: option '%s' is not KEY=VALUE",
                         buf);
        return RT_EINVAL;
    }
    *eq = '\0';
    errno = 0;
    val = strtod(eq + 1, &end);
    for (size_t k = 0; k < sizeof(keys) / sizeof(keys[0]); k++) {
        if (strcmp(buf, keys[k].key) != 0) {
            continue;
        }
        if (errno || end == eq + 1 || *end != '\0' || !(val >= keys[k].lo) ||
            !(val <= keys[k].hi)) {
            rt_errmsg_printf(errmsg,
                             "policy crdb: %s=%s: must be a number in "
                             "%g..%g",
                             buf, eq + 1, keys[k].lo, keys[k].hi);
            return RT_EINVAL;
        }
        switch (k) {
            case 0:
                o->interval_ms = (uint32_t)val;
                break;
            case 1:
                o->threshold_pct = val;
                break;
            case 2:
                o->min_diff = val;
                break;
            case 3:
                o->split_balance_pct = val;
                break;
            case 4:
                o->split_min_samples = (unsigned)val;
                break;
            default:
                o->hot_ranges = (unsigned)val;
                break;
        }
        return 0;
    }
    rt_errmsg_printf(errmsg,
                     "policy crdb: unknown option '%s' (interval_ms, "
                     "threshold_pct, min_diff, split_balance_pct, "
                     "split_min_samples, hot_ranges)",
                     buf);
    return RT_EINVAL;
}

int ms_policy_crdb_create(const struct ms_policy_config *cfg,
                          struct ms_policy *out,
                          char *errmsg)
{
    struct ms__crdb *p = rt_xcalloc(1, sizeof(*p));
    const char *s;

    p->cfg = *cfg;
    p->cfg.opts = NULL; /* borrowed: not kept */
    ms__crdb_opts_default(&p->o);
    s = cfg->opts ? cfg->opts : "";
    while (*s) {
        size_t len = strcspn(s, ",");
        if (len > 0) {
            int rc = ms__crdb_opt(&p->o, s, len, errmsg);
            if (rc) {
                free(p);
                return rc;
            }
        }
        s += len;
        if (*s == ',') {
            s++;
        }
    }
    out->ops = &ms__crdb_ops;
    out->state = p;
    return 0;
}
