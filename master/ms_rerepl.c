/* Re-replication planner (contract in ms_rerepl.h). Removals first: they
 * need no copy and make room (a set at rf + 1 takes no learner). Then the
 * ranges that need a copy are ordered by their live in-sync copies and
 * served while the cluster-wide limit allows; each chosen target counts
 * one replica more for the next choice, so one plan spreads its copies.
 * Quadratic in servers per range: a cluster's handful of servers and a
 * plan every tick cost nothing next to the commits that follow. */
#include "ms_rerepl.h"

#include <stdlib.h>
#include <string.h>

#include "ms_place.h"
#include "rt_alloc.h"

static const struct ms_rerepl_server *
ms__rerepl_server(const struct ms_rerepl_server *s, size_t ns, uint64_t id)
{
    for (size_t i = 0; i < ns; i++) {
        if (s[i].id == id) {
            return &s[i];
        }
    }
    return NULL;
}

static bool ms__rerepl_dead(const struct ms_rerepl_config *cfg,
                            const struct ms_rerepl_server *s,
                            size_t ns,
                            uint64_t id)
{
    const struct ms_rerepl_server *sv = ms__rerepl_server(s, ns, id);
    return sv == NULL || sv->silent_ms >= cfg->after_ms;
}

static uint64_t ms__rerepl_silent(const struct ms_rerepl_server *s,
                                  size_t ns,
                                  uint64_t id)
{
    const struct ms_rerepl_server *sv = ms__rerepl_server(s, ns, id);
    return sv ? sv->silent_ms : UINT64_MAX;
}

/* The surplus SECONDARY of @rr to remove, or 0: a dead one (silent the
 * longest first), else the replaced one (@rr->retire), else the one
 * outside the ISR with the lowest id. */
static uint64_t ms__rerepl_surplus(const struct ms_rerepl_config *cfg,
                                   const struct ms_rerepl_range *rr,
                                   const struct ms_rerepl_server *s,
                                   size_t ns)
{
    const struct rt_repl_conf *c = &rr->conf;
    uint64_t pick = 0;
    int pick_rank = 0;
    if (c->rf == 0 || c->n_members <= c->rf) {
        return 0;
    }
    for (size_t i = 0; i < c->n_members; i++) {
        uint64_t id = c->members[i].server_id;
        bool in = rt_repl_conf_in_isr(c, id);
        int rank = ms__rerepl_dead(cfg, s, ns, id) ? 3
                   : id == rr->retire              ? 2
                   : !in                           ? 1
                                                   : 0;
        if (c->members[i].role != RT_REPL_ROLE_SECONDARY || rank == 0 ||
            c->n_isr - (in ? 1 : 0) < c->rf) {
            continue;
        }
        if (pick == 0 || rank > pick_rank ||
            (rank == pick_rank &&
             (rank == 3 ? ms__rerepl_silent(s, ns, id) >
                              ms__rerepl_silent(s, ns, pick)
                        : id < pick))) {
            pick = id;
            pick_rank = rank;
        }
    }
    return pick;
}

/* Does another member of @c than @id sit in @id's zone? Servers the
 * cluster does not know count as zones of their own. */
static bool ms__rerepl_zone_shared(const struct rt_repl_conf *c,
                                   const struct ms_rerepl_server *s,
                                   size_t ns,
                                   uint64_t id)
{
    const struct ms_rerepl_server *me = ms__rerepl_server(s, ns, id);
    const char *z = me && me->zone ? me->zone : "";
    for (size_t i = 0; me && i < c->n_members; i++) {
        const struct ms_rerepl_server *o =
            ms__rerepl_server(s, ns, c->members[i].server_id);
        if (o && o != me && strcmp(o->zone ? o->zone : "", z) == 0) {
            return true;
        }
    }
    return false;
}

/* Is live in-sync SECONDARY @a a better one to drop from @c than @b (0:
 * none yet)? Zone shared, then most replicas, most demand, lowest id. */
static bool ms__rerepl_over_better(const struct rt_repl_conf *c,
                                   const struct ms_rerepl_server *s,
                                   size_t ns,
                                   uint64_t a,
                                   uint64_t b)
{
    const struct ms_rerepl_server *x = ms__rerepl_server(s, ns, a);
    const struct ms_rerepl_server *y = ms__rerepl_server(s, ns, b);
    bool zx, zy;
    if (b == 0) {
        return true;
    }
    zx = ms__rerepl_zone_shared(c, s, ns, a);
    zy = ms__rerepl_zone_shared(c, s, ns, b);
    if (zx != zy) {
        return zx;
    }
    if (x->nreplicas != y->nreplicas) {
        return x->nreplicas > y->nreplicas;
    }
    if (x->demand != y->demand) {
        return x->demand > y->demand;
    }
    return a < b;
}

/* The live in-sync SECONDARY of @rr to drop because the set is larger
 * than rf (contract in ms_rerepl.h, "over_rf"), or 0. */
static uint64_t ms__rerepl_over_rf(const struct ms_rerepl_config *cfg,
                                   const struct ms_rerepl_range *rr,
                                   const struct ms_rerepl_server *s,
                                   size_t ns)
{
    const struct rt_repl_conf *c = &rr->conf;
    uint64_t pick = 0;
    if (rr->moving || c->rf == 0 || c->n_members <= c->rf ||
        c->n_isr < c->rf + 1) {
        return 0;
    }
    for (size_t i = 0; i < c->n_members; i++) {
        uint64_t id = c->members[i].server_id;
        if (c->members[i].role != RT_REPL_ROLE_SECONDARY ||
            !rt_repl_conf_in_isr(c, id) || ms__rerepl_dead(cfg, s, ns, id)) {
            continue;
        }
        if (ms__rerepl_over_better(c, s, ns, id, pick)) {
            pick = id;
        }
    }
    return pick;
}

/* A range that needs a copy, with its sort key. */
struct ms__rerepl_need
{
    size_t idx;
    size_t live_isr;
    uint64_t replaces;
};

static int ms__rerepl_need_cmp(const void *a, const void *b)
{
    const struct ms__rerepl_need *x = a, *y = b;
    if (x->live_isr != y->live_isr) {
        return x->live_isr < y->live_isr ? -1 : 1;
    }
    return x->idx < y->idx ? -1 : x->idx > y->idx;
}

/* Does range @rr need a copy? Fills @need when it does. */
static bool ms__rerepl_needs(const struct ms_rerepl_config *cfg,
                             const struct ms_rerepl_range *rr,
                             const struct ms_rerepl_server *s,
                             size_t ns,
                             struct ms__rerepl_need *need)
{
    const struct rt_repl_conf *c = &rr->conf;
    size_t healthy = 0;
    uint64_t dead_id = 0;
    if (rr->busy || c->rf == 0 || c->n_members >= c->rf + 1 ||
        c->n_members >= RT_REPL_MAX_REPLICAS ||
        ms__rerepl_dead(cfg, s, ns, c->primary_id)) {
        return false;
    }
    for (size_t i = 0; i < c->n_members; i++) {
        uint64_t id = c->members[i].server_id;
        if (c->members[i].role == RT_REPL_ROLE_LEARNER) {
            return false;
        }
        if (ms__rerepl_dead(cfg, s, ns, id)) {
            if (dead_id == 0 || ms__rerepl_silent(s, ns, id) >
                                    ms__rerepl_silent(s, ns, dead_id)) {
                dead_id = id;
            }
        } else {
            healthy++;
        }
    }
    if (healthy >= c->rf) {
        return false;
    }
    need->live_isr = 0;
    for (size_t i = 0; i < c->n_isr; i++) {
        need->live_isr += !ms__rerepl_dead(cfg, s, ns, c->isr[i]);
    }
    need->replaces = dead_id;
    return true;
}

/* ADD for range @c: the target chosen among the placeable non-members
 * other than @avoid (@cand scratch of @ns entries, @load the replicas
 * counted so far), as 1 + its index in @s, or 0 when there is none. */
static uint64_t ms__rerepl_target(const struct ms_rerepl_config *cfg,
                                  const struct rt_repl_conf *c,
                                  uint64_t avoid,
                                  const struct ms_rerepl_server *s,
                                  size_t ns,
                                  const size_t *load,
                                  struct ms_place_server *cand,
                                  size_t *cand_idx)
{
    const char *zones[RT_REPL_MAX_REPLICAS];
    size_t nz = 0, nc = 0;
    for (size_t i = 0; i < c->n_members; i++) {
        const struct ms_rerepl_server *sv =
            ms__rerepl_server(s, ns, c->members[i].server_id);
        if (sv && !ms__rerepl_dead(cfg, s, ns, sv->id)) {
            zones[nz++] = sv->zone;
        }
    }
    for (size_t i = 0; i < ns; i++) {
        if (!s[i].placeable || s[i].id == avoid ||
            rt_repl_conf_role(c, s[i].id) != RT_REPL_ROLE_NONE) {
            continue;
        }
        cand[nc] = (struct ms_place_server){.id = s[i].id,
                                            .zone = s[i].zone,
                                            .nreplicas = load[i],
                                            .demand = s[i].demand};
        cand_idx[nc++] = i;
    }
    int pick = ms_place_one(cand, nc, zones, nz);
    return pick < 0 ? 0 : cand_idx[pick] + 1;
}

size_t ms_rerepl_plan(const struct ms_rerepl_config *cfg,
                      const struct ms_rerepl_range *r,
                      size_t nr,
                      const struct ms_rerepl_server *s,
                      size_t ns,
                      struct ms_rerepl_decision *out,
                      size_t cap)
{
    size_t n = 0, inflight = 0, nneed = 0;
    struct ms__rerepl_need *need = rt_xcalloc(nr ? nr : 1, sizeof(*need));
    size_t *load = rt_xcalloc(ns ? ns : 1, sizeof(*load));
    struct ms_place_server *cand = rt_xcalloc(ns ? ns : 1, sizeof(*cand));
    size_t *cand_idx = rt_xcalloc(ns ? ns : 1, sizeof(*cand_idx));

    for (size_t i = 0; i < ns; i++) {
        load[i] = s[i].nreplicas;
    }
    for (size_t i = 0; i < nr; i++) {
        inflight += r[i].adding;
        if (r[i].busy || n == cap) {
            continue;
        }
        const char *why = "surplus";
        uint64_t gone = ms__rerepl_surplus(cfg, &r[i], s, ns);
        if (gone == 0) {
            gone = ms__rerepl_over_rf(cfg, &r[i], s, ns);
            why = "over_rf";
        }
        if (gone != 0) {
            out[n++] =
                (struct ms_rerepl_decision){.kind = MS_REREPL_REMOVE,
                                            .range_id = r[i].conf.range_id,
                                            .server = gone,
                                            .reason = why};
            continue;
        }
        if (ms__rerepl_needs(cfg, &r[i], s, ns, &need[nneed])) {
            need[nneed++].idx = i;
        }
    }
    qsort(need, nneed, sizeof(*need), ms__rerepl_need_cmp);
    for (size_t k = 0; k < nneed && n < cap && inflight < cfg->max_inflight;
         k++) {
        const struct ms_rerepl_range *rr = &r[need[k].idx];
        const struct rt_repl_conf *c = &rr->conf;
        uint64_t t =
            ms__rerepl_target(cfg, c, rr->avoid, s, ns, load, cand, cand_idx);
        if (t == 0 && rr->avoid != 0) {
            t = ms__rerepl_target(cfg, c, 0, s, ns, load, cand, cand_idx);
        }
        if (t == 0) {
            continue; /* nowhere to put it: the range stays as it is */
        }
        load[t - 1]++;
        out[n++] = (struct ms_rerepl_decision){
            .kind = MS_REREPL_ADD,
            .range_id = c->range_id,
            .server = s[t - 1].id,
            .replaces = need[k].replaces,
            .reason = need[k].replaces ? "dead" : "under_replicated"};
        inflight++;
    }
    free(cand_idx);
    free(cand);
    free(load);
    free(need);
    return n;
}
