/* The helpers of ms_policy_int.h, and ms_policy_hot_threshold() of
 * ms_policy.h (the split threshold both policies use). This file calls nothing
 * in ms_policy.c or ms_policy_crdb.c: both call it. */
#include <string.h>

#include "ms_load.h"
#include "ms_policy_int.h"

struct ms_decision *ms__pol_emit(struct ms__out *o,
                                 enum ms_decision_kind kind,
                                 uint64_t range_id)
{
    struct ms_decision *d;
    if (o->n >= o->max) {
        return NULL;
    }
    d = &o->d[o->n++];
    memset(d, 0, sizeof(*d));
    d->kind = kind;
    d->range_id = range_id;
    return d;
}

bool ms__pol_eligible(const struct ms_server_view *s)
{
    return s->up && !s->draining;
}

bool ms__pol_server_free(const struct ms_policy_config *c,
                         const struct ms_cluster_view *v,
                         const struct ms_server_view *s)
{
    return ms__pol_eligible(s) && s->moving == 0 &&
           ms__pol_since(v->now_ms, s->move_ms, c->server_cooldown_ms);
}

uint64_t ms__pol_fewest_place(void *state, const struct ms_cluster_view *v)
{
    const struct ms_server_view *best = NULL;
    (void)state;
    for (size_t i = 0; i < v->nservers; i++) {
        const struct ms_server_view *s = &v->servers[i];
        if (!ms__pol_eligible(s)) {
            continue;
        }
        if (!best || s->nranges < best->nranges ||
            (s->nranges == best->nranges && s->id < best->id)) {
            best = s;
        }
    }
    return best ? best->id : 0;
}

double ms__pol_demand(const struct ms_range_view *r)
{
    return r->load ? ms_load_demand(&r->load->avg) : 0.0;
}

uint64_t ms__pol_range_cap(const struct ms_range_view *r,
                           const struct ms_server_view *s)
{
    if (s && s->max_range_eps) {
        return s->max_range_eps;
    }
    return r->load ? r->load->max_range_eps : 0;
}

bool ms__pol_since(uint64_t now, uint64_t t, uint32_t ms)
{
    return t == 0 || now >= t + ms;
}

size_t ms__pol_server_idx(const struct ms_cluster_view *v, uint64_t id)
{
    size_t lo = 0, hi = v->nservers;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (v->servers[mid].id < id) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    if (lo < v->nservers && v->servers[lo].id == id) {
        return lo;
    }
    for (size_t i = 0; i < v->nservers; i++) {
        if (v->servers[i].id == id) {
            return i;
        }
    }
    return v->nservers;
}

const struct ms_server_view *ms__pol_server(const struct ms_cluster_view *v,
                                            uint64_t id)
{
    size_t i = ms__pol_server_idx(v, id);
    return i < v->nservers ? &v->servers[i] : NULL;
}

size_t ms__pol_table_nranges(const struct ms_cluster_view *v, uint64_t tid)
{
    size_t n = 0;
    for (size_t i = 0; i < v->nranges; i++) {
        n += v->ranges[i].table_id == tid;
    }
    return n;
}

const char *ms__pol_zone_of(const struct ms_cluster_view *v, uint64_t id)
{
    const struct ms_server_view *s = ms__pol_server(v, id);
    return s && s->zone ? s->zone : "";
}

size_t ms__pol_kept_in_zone(const struct ms_cluster_view *v,
                            const struct ms_range_view *r,
                            uint64_t src,
                            const char *zone)
{
    size_t n = 0;
    for (size_t k = 0; k < r->nreplicas; k++) {
        n += r->replicas[k] != src &&
             strcmp(ms__pol_zone_of(v, r->replicas[k]), zone) == 0;
    }
    return n;
}

double ms_policy_hot_threshold(const struct ms_policy_config *cfg,
                               uint64_t max_range_eps)
{
    double t = cfg->split_eps;
    if (max_range_eps > 0 && 0.9 * (double)max_range_eps < t) {
        t = 0.9 * (double)max_range_eps;
    }
    return t;
}
