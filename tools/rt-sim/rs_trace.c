/* Trace replay, validation and dump (contract in rs_trace.h). */
#include "rs_trace.h"

#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ms_trace.h"
#include "rs_internal.h"
#include "rt_alloc.h"
#include "rt_err.h"

#define RS__HB_SAMPLES 32

struct rs_tkey
{
    uint64_t id;
    char *key;
};

/* ---- loading ---- */

int rs_trace_load(const char *path,
                  struct rs_trace **out,
                  char *err,
                  size_t errlen)
{
    struct ms_trace_reader *r;
    struct rs_trace *t;
    char em[RT_ERRMSG_SIZE];
    Rt__TraceRecord *rec;
    uint64_t base = 0, last = 0;
    int rc;

    if (ms_trace_reader_open(path, &r, em) != 0) {
        snprintf(err, errlen, "%s: %s", path, em);
        return -1;
    }
    t = rt_xcalloc(1, sizeof(*t));
    while ((rc = ms_trace_reader_next(r, &rec, em)) == 1) {
        if (rec->r_case == RT__TRACE_RECORD__R_HEADER && t->n > 0) {
            base = last; /* a new segment counts from 0 again */
        }
        if (t->n == t->cap) {
            t->cap = t->cap ? t->cap * 2 : 1024;
            t->rec = rt_xrealloc(t->rec, t->cap * sizeof(*t->rec));
            t->t = rt_xrealloc(t->t, t->cap * sizeof(*t->t));
        }
        t->rec[t->n] = rec;
        t->t[t->n] = last = base + rec->t_ms;
        t->n++;
        if (rec->r_case == RT__TRACE_RECORD__R_HEADER && !t->hdr) {
            t->hdr = rec->header;
        } else if (rec->r_case == RT__TRACE_RECORD__R_KEY) {
            if (t->nkeys == t->keys_cap) {
                t->keys_cap = t->keys_cap ? t->keys_cap * 2 : 1024;
                t->keys = rt_xrealloc(t->keys, t->keys_cap * sizeof(*t->keys));
            }
            t->keys[t->nkeys].id = rec->key->id;
            t->keys[t->nkeys].key = rec->key->key;
            t->nkeys++;
        }
    }
    t->truncated = ms_trace_reader_truncated(r);
    ms_trace_reader_close(r);
    if (rc < 0 || !t->hdr) {
        snprintf(err, errlen, "%s: %s", path, rc < 0 ? em : "no trace header");
        rs_trace_free(t);
        return -1;
    }
    *out = t;
    return 0;
}

void rs_trace_free(struct rs_trace *t)
{
    if (!t) {
        return;
    }
    for (size_t i = 0; i < t->n; i++) {
        ms_trace_record_free(t->rec[i]);
    }
    free(t->rec);
    free(t->t);
    free(t->keys);
    free(t);
}

const char *rs_trace_key(const struct rs_trace *t, uint64_t id)
{
    /* Ids only grow within a file, but a bounded writer table may
     * re-intern a key under a new id: the latest entry for @id wins. */
    size_t lo = 0, hi = t->nkeys;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (t->keys[mid].id < id) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    return lo < t->nkeys && t->keys[lo].id == id ? t->keys[lo].key : NULL;
}

static const Rt__TraceMap *rs__first_map(const struct rs_trace *t)
{
    for (size_t i = 0; i < t->n; i++) {
        if (t->rec[i]->r_case == RT__TRACE_RECORD__R_MAP) {
            return t->rec[i]->map;
        }
    }
    return NULL;
}

void rs_trace_cfg(const struct rs_trace *t,
                  struct rs_cfg *cfg,
                  bool recorded_policy)
{
    const Rt__TraceHeader *h = t->hdr;
    uint64_t maxid = 1;
    /* Servers join during a trace: every one any map or heartbeat names. */
    for (size_t k = 0; k < t->n; k++) {
        const Rt__TraceRecord *rec = t->rec[k];
        if (rec->r_case == RT__TRACE_RECORD__R_MAP) {
            for (size_t i = 0; i < rec->map->n_servers; i++) {
                if (rec->map->servers[i]->id > maxid) {
                    maxid = rec->map->servers[i]->id;
                }
            }
        } else if (rec->r_case == RT__TRACE_RECORD__R_HEARTBEAT &&
                   rec->heartbeat->server_id > maxid) {
            maxid = rec->heartbeat->server_id;
        }
    }
    cfg->servers = maxid;
    cfg->ranges = 1;
    cfg->rf = 1;
    cfg->server_eps = 0; /* the recorded caps (heartbeats) */
    if (h->tick_ms) {
        cfg->tick_ms = h->tick_ms;
    }
    cfg->start_unix_ms = h->start_unix_ms;
    if (recorded_policy && h->policy && h->policy[0]) {
        snprintf(cfg->policy, sizeof(cfg->policy), "%s", h->policy);
    }
    if (recorded_policy && h->policy_config) {
        const Rt__TracePolicyConfig *p = h->policy_config;
        struct ms_policy_config *c = &cfg->pcfg;
        c->split_eps = p->split_eps;
        c->split_busy_pct = p->split_busy_pct;
        c->split_sustain_ms = p->split_sustain_ms;
        c->split_cooldown_ms = p->split_cooldown_ms;
        c->split_max_ranges = p->split_max_ranges;
        c->hot_exit_pct = p->hot_exit_pct;
        c->move_tolerance_pct = p->move_tolerance_pct;
        c->move_min_eps = p->move_min_eps;
        c->move_gain_pct = p->move_gain_pct;
        c->move_cooldown_ms = p->move_cooldown_ms;
        c->server_cooldown_ms = p->server_cooldown_ms;
        c->max_moves = p->max_moves;
        c->merge_eps = p->merge_eps;
        c->merge_sustain_ms = p->merge_sustain_ms;
        c->merge_max_bytes = p->merge_max_bytes;
        c->merge_after_split_ms = p->merge_after_split_ms;
    }
}

/* ---- the simulated map ---- */

/* The index of the range of table @tid holding @key (the last whose low
 * is <= key), or s->nr. */
static size_t rs__holding(const struct rs_sim *s, uint64_t tid, const char *key)
{
    size_t lo = 0, hi = s->nr;
    while (lo < hi) { /* first range after (tid, key) */
        size_t mid = lo + (hi - lo) / 2;
        const struct ms_range_view *v = &s->rv[mid];
        if (v->table_id < tid ||
            (v->table_id == tid && strcmp(v->low, key) <= 0)) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    if (lo == 0 || s->rv[lo - 1].table_id != tid) {
        return s->nr;
    }
    return lo - 1;
}

static bool rs__has_table(const struct rs_sim *s, uint64_t tid)
{
    size_t i = rs__holding(s, tid, "");
    return i < s->nr;
}

/* Adds the recorded ranges of tables the simulation does not have. */
static void rs__adopt_map(struct rs_sim *s, const Rt__TraceMap *m)
{
    bool added = false;
    for (size_t k = 0; k < m->n_servers; k++) {
        const Rt__TraceServer *x = m->servers[k];
        if (x->id >= 1 && x->id <= s->ns) {
            struct rs_server *p = &s->sv[x->id - 1];
            p->up = x->up;
            snprintf(p->zone, sizeof(p->zone), "%s", x->zone ? x->zone : "");
        }
    }
    bool *known = rt_xcalloc(m->n_ranges + 1, sizeof(*known));
    for (size_t k = 0; k < m->n_ranges; k++) {
        known[k] = rs__has_table(s, m->ranges[k]->table_id);
    }
    for (size_t k = 0; k < m->n_ranges; k++) {
        const Rt__TraceRange *x = m->ranges[k];
        size_t i;
        struct ms_range_view *v;
        struct rs_range *r;
        if (known[k] || rs_sim_find(s, x->id) < s->nr) {
            continue; /* the simulation has its own map of that table */
        }
        /* Insert in (table, low) order. */
        for (i = 0; i < s->nr; i++) {
            if (s->rv[i].table_id > x->table_id ||
                (s->rv[i].table_id == x->table_id &&
                 strcmp(s->rv[i].low, x->low) > 0)) {
                break;
            }
        }
        rs__insert_at(s, i);
        rs__bounds_add(s, x->id, x->table_id, x->low,
                       x->high_inf ? NULL : x->high);
        v = &s->rv[i];
        r = &s->rr[i];
        v->id = x->id;
        rs__index(s, i);
        v->table_id = x->table_id;
        v->low = s->bounds[x->id].low;
        v->high = s->bounds[x->id].high;
        v->server_id = x->server_id;
        v->epoch = x->epoch;
        v->rf = x->rf;
        if (x->times) {
            /* As the recording master counted them (its snapshot is
             * written lazily, up to a tick after the change). An instant
             * before the simulated clock's origin is 0, which the policy
             * reads as long ago, as it was. */
            uint64_t mono = rs__mono(s);
            v->born_ms = x->born_ago_ms < mono ? mono - x->born_ago_ms : 0;
            v->split_ms = x->never_split || x->split_ago_ms >= mono
                              ? 0
                              : mono - x->split_ago_ms;
        } else {
            v->born_ms = v->split_ms = rs__mono(s);
        }
        if (x->n_replicas > 1) {
            size_t nrep = x->n_replicas < RS_RF_MAX ? x->n_replicas : RS_RF_MAX;
            size_t nisr = x->n_isr < RS_RF_MAX ? x->n_isr : RS_RF_MAX;
            v->replicated = true;
            v->nreplicas = nrep;
            v->nisr = nisr;
            for (size_t c = 0; c < nrep; c++) {
                r->reps[c] = x->replicas[c];
            }
            for (size_t c = 0; c < nisr; c++) {
                r->isr[c] = x->isr[c];
            }
        } else {
            r->reps[0] = x->server_id;
        }
        if (x->id >= s->next_id) {
            s->next_id = x->id + 1;
        }
        added = true;
    }
    free(known);
    if (added) {
        rs__recount(s);
    }
}

/* What a simulated range was given of diverged recorded loads since the
 * last tick: summed over every recorded range and heartbeat that fed it,
 * reported once at the tick (two reports for one interval would read as
 * two intervals to ms_load). */
struct rs__pend
{
    uint64_t range_id;
    double ent, thr, req, wb, exec;
    uint64_t interval_ms, max_server_eps, max_range_eps;
    char *samples[RS__HB_SAMPLES]; /* borrowed from the trace */
    size_t nsamples;
};

struct rs_replay_ctx
{
    const struct rs_trace *t;
    const Rt__TraceMap *map; /* the latest recorded map */
    struct rs__pend *pend;
    size_t npend, pend_cap;
};

static const Rt__TraceRange *rs__rec_range(const Rt__TraceMap *m, uint64_t id)
{
    for (size_t k = 0; m && k < m->n_ranges; k++) {
        if (m->ranges[k]->id == id) {
            return m->ranges[k];
        }
    }
    return NULL;
}

static void rs__report(struct rs_sim *s,
                       size_t i,
                       uint64_t interval_ms,
                       uint64_t max_server_eps,
                       uint64_t max_range_eps,
                       double ent,
                       double thr,
                       double req,
                       double wb,
                       double exec,
                       char **samples,
                       size_t nsamples)
{
    struct ms_range_view *v = &s->rv[i];
    Rt__RangeLoad rl = RT__RANGE_LOAD__INIT;
    rl.range_id = v->id;
    rl.interval_ms = interval_ms;
    rl.requests = (uint64_t)llround(req);
    rl.entities = (uint64_t)llround(ent);
    rl.bytes_written = (uint64_t)llround(wb);
    rl.exec_us = (uint64_t)llround(exec);
    rl.throttled = (uint64_t)llround(thr);
    rl.scanned = 0;
    rl.key_count = s->rr[i].keys;
    rl.key_bytes = s->rr[i].bytes;
    rl.sample_pks = samples;
    rl.n_sample_pks = nsamples;
    ms_load_report(s->load, v->server_id, &rl, max_server_eps, max_range_eps,
                   rs__mono(s));
    s->rr[i].reported = true;
    if (!v->load) {
        v->load = ms_load_find(s->load, v->id);
    }
}

static void rs__heartbeat(struct rs_sim *s,
                          struct rs_replay_ctx *c,
                          const Rt__TraceHeartbeat *hb)
{
    const struct rs_trace *t = c->t;
    if (hb->server_id >= 1 && hb->server_id <= s->ns) {
        s->sv[hb->server_id - 1].cap = (double)hb->max_server_eps;
    }
    s->cfg.range_eps = (double)hb->max_range_eps;
    for (size_t k = 0; k < hb->n_loads; k++) {
        const Rt__TraceLoad *l = hb->loads[k];
        const Rt__TraceRange *x = rs__rec_range(c->map, l->range_id);
        size_t i, ns = 0;
        char *keys[RS__HB_SAMPLES];
        if (l->ignored || !x) {
            continue;
        }
        for (size_t q = 0; q < l->n_sample_keys && ns < RS__HB_SAMPLES; q++) {
            const char *key = rs_trace_key(t, l->sample_keys[q]);
            if (key) {
                keys[ns++] = (char *)key;
            }
        }
        i = rs__holding(s, x->table_id, x->low);
        if (i < s->nr && strcmp(s->rv[i].low, x->low) == 0 &&
            ((!s->rv[i].high && x->high_inf) ||
             (s->rv[i].high && !x->high_inf &&
              strcmp(s->rv[i].high, x->high) == 0))) {
            /* The same range in both maps: exactly as recorded. */
            s->rr[i].keys = l->key_count;
            s->rr[i].bytes = l->key_bytes;
            rs__report(s, i, l->interval_ms, hb->max_server_eps,
                       hb->max_range_eps, (double)l->entities,
                       (double)l->throttled, (double)l->requests,
                       (double)l->bytes_written, (double)l->exec_us, keys, ns);
            continue;
        }
        /* The maps diverged: each sample carries an equal share to the
         * simulated range holding its key; no samples: all of it to the
         * range holding the recorded low key. */
        for (size_t q = 0; q < (ns ? ns : 1); q++) {
            size_t j = rs__holding(s, x->table_id, ns ? keys[q] : x->low);
            double w = 1.0 / (double)(ns ? ns : 1);
            struct rs__pend *pd = NULL;
            if (j == s->nr) {
                continue;
            }
            for (size_t z = 0; z < c->npend && !pd; z++) {
                if (c->pend[z].range_id == s->rv[j].id) {
                    pd = &c->pend[z];
                }
            }
            if (!pd) {
                if (c->npend == c->pend_cap) {
                    c->pend_cap = c->pend_cap ? c->pend_cap * 2 : 64;
                    c->pend =
                        rt_xrealloc(c->pend, c->pend_cap * sizeof(*c->pend));
                }
                pd = &c->pend[c->npend++];
                memset(pd, 0, sizeof(*pd));
                pd->range_id = s->rv[j].id;
            }
            pd->ent += w * (double)l->entities;
            pd->thr += w * (double)l->throttled;
            pd->req += w * (double)l->requests;
            pd->wb += w * (double)l->bytes_written;
            pd->exec += w * (double)l->exec_us;
            if (l->interval_ms > pd->interval_ms) {
                pd->interval_ms = l->interval_ms;
            }
            pd->max_server_eps = hb->max_server_eps;
            pd->max_range_eps = hb->max_range_eps;
            if (ns && pd->nsamples < RS__HB_SAMPLES) {
                pd->samples[pd->nsamples++] = keys[q];
            }
        }
    }
}

/* The diverged loads gathered since the last tick, one report each. */
static void rs__flush(struct rs_sim *s, struct rs_replay_ctx *c)
{
    for (size_t z = 0; z < c->npend; z++) {
        const struct rs__pend *pd = &c->pend[z];
        size_t i = rs_sim_find(s, pd->range_id);
        if (i < s->nr) {
            rs__report(s, i, pd->interval_ms, pd->max_server_eps,
                       pd->max_range_eps, pd->ent, pd->thr, pd->req, pd->wb,
                       pd->exec, (char **)pd->samples, pd->nsamples);
        }
    }
    c->npend = 0;
}

/* The step's demand from the loads reported lately (for the metrics). */
static void rs__replay_account(struct rs_sim *s)
{
    uint64_t now = rs__mono(s), fresh = 3ull * s->cfg.tick_ms;
    for (size_t j = 0; j < s->ns; j++) {
        s->sv[j].demand = s->sv[j].served = 0;
    }
    for (size_t i = 0; i < s->nr; i++) {
        const struct ms_load_range *l = s->rv[i].load;
        struct rs_range *r = &s->rr[i];
        uint64_t sid = s->rv[i].server_id;
        r->demand = r->served = r->refused = 0;
        if (l && l->last_ms + fresh >= now) {
            r->served = l->cur.ent_s;
            r->refused = l->cur.thr_s;
            r->demand = r->served + r->refused;
        }
        if (sid >= 1 && sid <= s->ns) {
            s->sv[sid - 1].demand += r->demand;
            s->sv[sid - 1].served += r->served;
        }
    }
    rs__account(s);
}

static bool rs__kind(const char *name, enum ms_decision_kind *out)
{
    static const enum ms_decision_kind kinds[] = {
        MS_DECIDE_SPLIT, MS_DECIDE_MERGE, MS_DECIDE_MOVE, MS_DECIDE_TRANSFER};
    for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++) {
        if (strcmp(name, ms_decision_kind_name(kinds[k])) == 0) {
            *out = kinds[k];
            return true;
        }
    }
    return false;
}

/* Every started decision of the trace with the time its outcome was
 * recorded (decision ids count from 1 again in each segment). */
static void rs__recops(struct rs_sim *s, const struct rs_trace *t)
{
    const Rt__TraceMap *map = NULL;
    size_t seg0 = 0; /* the current segment's first operation */
    s->recops = rt_xcalloc(t->n + 1, sizeof(*s->recops));
    for (size_t k = 0; k < t->n; k++) {
        const Rt__TraceRecord *rec = t->rec[k];
        struct rs_recop *o;
        switch (rec->r_case) {
            case RT__TRACE_RECORD__R_HEADER:
                seg0 = s->nrecops;
                break;
            case RT__TRACE_RECORD__R_MAP:
                map = rec->map;
                break;
            case RT__TRACE_RECORD__R_DECISION: {
                const Rt__TraceDecision *d = rec->decision;
                const Rt__TraceRange *x = rs__rec_range(map, d->range_id);
                enum ms_decision_kind kind;
                if (!d->started || !x || !rs__kind(d->kind, &kind)) {
                    break;
                }
                o = &s->recops[s->nrecops++];
                o->t_dec = t->t[k];
                o->kind = kind;
                o->table_id = x->table_id;
                o->low = x->low;
                o->key = d->key && d->key[0] ? d->key : NULL;
                o->to = d->server_id;
                o->used = true; /* until its outcome is found */
                /* The decision's id, kept in t_end meanwhile. */
                o->t_end = d->id;
                break;
            }
            case RT__TRACE_RECORD__R_OUTCOME:
                for (size_t j = s->nrecops; j > seg0; j--) {
                    o = &s->recops[j - 1];
                    if (o->used && o->t_end == rec->outcome->decision_id) {
                        /* A failed operation changed nothing to copy. */
                        o->t_end = t->t[k];
                        /* Older traces lack the birth: the outcome's time
                         * is a few ms after it. */
                        o->t_born =
                            rec->outcome->born_ms
                                ? t->t[k] - rec->t_ms + rec->outcome->born_ms
                                : t->t[k];
                        o->used = strcmp(rec->outcome->outcome, "done") != 0;
                        break;
                    }
                }
                break;
            default:
                break;
        }
    }
}

struct rs_sim *rs_replay_create(const struct rs_cfg *cfg,
                                const struct rs_trace *t,
                                FILE *declog,
                                char *err,
                                size_t errlen)
{
    const Rt__TraceMap *m = rs__first_map(t);
    struct rs_sim *s;
    if (!m) {
        snprintf(err, errlen, "the trace has no map");
        return NULL;
    }
    s = rs_sim_create(cfg, NULL, declog, err, errlen);
    if (!s) {
        return NULL;
    }
    for (size_t j = 0; j < s->ns; j++) {
        s->sv[j].up = false; /* until a map names it */
    }
    rs__recops(s, t);
    rs__adopt_map(s, m);
    return s;
}

void rs_replay_run(struct rs_sim *s, const struct rs_trace *t)
{
    struct rs_replay_ctx c;
    memset(&c, 0, sizeof(c));
    c.t = t;
    for (size_t k = 0; k < t->n; k++) {
        const Rt__TraceRecord *rec = t->rec[k];
        if (t->t[k] > s->now_ms) {
            s->now_ms = t->t[k];
        }
        switch (rec->r_case) {
            case RT__TRACE_RECORD__R_MAP:
                c.map = rec->map;
                rs__adopt_map(s, rec->map);
                break;
            case RT__TRACE_RECORD__R_HEARTBEAT:
                rs__heartbeat(s, &c, rec->heartbeat);
                break;
            case RT__TRACE_RECORD__R_TICK:
                rs__flush(s, &c);
                rs__ops_progress(s, s->now_ms + 1);
                rs__replay_account(s);
                rs__policy(s);
                s->ticks++;
                s->range_ticks += s->nr;
                break;
            default:
                break;
        }
    }
    free(c.pend);
}

/* ---- validation ---- */

struct rs__vdec
{
    uint64_t t;
    const char *kind;
    uint64_t table_id;
    const char *low, *high; /* high NULL: unbounded */
    const char *key;
    uint64_t to;
    long match; /* index of the other side, -1 */
};

static bool rs__streq(const char *a, const char *b)
{
    return (!a && !b) || (a && b && strcmp(a, b) == 0);
}

static bool rs__same(const struct rs__vdec *a, const struct rs__vdec *b)
{
    if (strcmp(a->kind, b->kind) != 0 || a->table_id != b->table_id ||
        !rs__streq(a->low, b->low)) {
        return false;
    }
    if (strcmp(a->kind, "split") == 0) {
        return rs__streq(a->key, b->key);
    }
    if (strcmp(a->kind, "move") == 0 || strcmp(a->kind, "transfer") == 0) {
        return a->to == b->to;
    }
    return true;
}

size_t rs_validate(const struct rs_sim *s, const struct rs_trace *t, FILE *out)
{
    struct rs__vdec *rv = rt_xcalloc(t->n + 1, sizeof(*rv));
    struct rs__vdec *sv = rt_xcalloc(s->ndecs + 1, sizeof(*sv));
    size_t nrec = 0, nsim = 0, matched = 0, missing = 0, extra = 0;
    const Rt__TraceMap *map = NULL;
    uint64_t tick = s->cfg.tick_ms;
    double off_sum = 0, off_max = 0;

    for (size_t k = 0; k < t->n; k++) {
        const Rt__TraceRecord *rec = t->rec[k];
        const Rt__TraceDecision *d;
        const Rt__TraceRange *x;
        if (rec->r_case == RT__TRACE_RECORD__R_MAP) {
            map = rec->map;
        }
        if (rec->r_case != RT__TRACE_RECORD__R_DECISION) {
            continue;
        }
        d = rec->decision;
        if (!d->started || strcmp(d->origin, "policy") != 0 ||
            strcmp(d->kind, "hot") == 0 || strcmp(d->kind, "cool") == 0) {
            continue;
        }
        x = rs__rec_range(map, d->range_id);
        rv[nrec].t = t->t[k];
        rv[nrec].kind = d->kind;
        rv[nrec].table_id = x ? x->table_id : 0;
        rv[nrec].low = x ? x->low : "?";
        rv[nrec].high = x && !x->high_inf ? x->high : NULL;
        rv[nrec].key = d->key && d->key[0] ? d->key : NULL;
        rv[nrec].to = d->server_id;
        rv[nrec].match = -1;
        nrec++;
    }
    for (size_t k = 0; k < s->ndecs; k++) {
        const struct rs_dec *d = &s->decs[k];
        if (!d->ok || d->kind == MS_DECIDE_HOT || d->kind == MS_DECIDE_COOL) {
            continue;
        }
        sv[nsim].t = d->t_ms;
        sv[nsim].kind = ms_decision_kind_name(d->kind);
        sv[nsim].table_id = d->table_id;
        sv[nsim].low = d->low;
        sv[nsim].high = d->high;
        sv[nsim].key = d->key;
        sv[nsim].to = d->server_id;
        sv[nsim].match = -1;
        nsim++;
    }
    /* Within one tick first, then at any offset (reported as late or
     * early). */
    for (int pass = 0; pass < 2; pass++) {
        for (size_t a = 0; a < nrec; a++) {
            long best = -1;
            double bo = 0;
            if (rv[a].match >= 0) {
                continue;
            }
            for (size_t b = 0; b < nsim; b++) {
                double o = (double)sv[b].t - (double)rv[a].t;
                if (sv[b].match >= 0 || !rs__same(&rv[a], &sv[b]) ||
                    (pass == 0 && fabs(o) > (double)tick)) {
                    continue;
                }
                if (best < 0 || fabs(o) < fabs(bo)) {
                    best = (long)b;
                    bo = o;
                }
            }
            if (best >= 0) {
                rv[a].match = best;
                sv[best].match = (long)a;
            }
        }
    }
    fprintf(out, "recorded policy decisions %zu, simulated %zu\n", nrec, nsim);
    for (size_t a = 0; a < nrec; a++) {
        const struct rs__vdec *r = &rv[a];
        if (r->match >= 0) {
            double o = (double)sv[r->match].t - (double)r->t;
            bool close = fabs(o) <= (double)tick;
            char to[32] = "";
            if (r->to) {
                snprintf(to, sizeof(to), " to %" PRIu64, r->to);
            }
            fprintf(out,
                    "%s %8.1f s %-8s table %" PRIu64
                    " low \"%s\"%s%s%s "
                    "offset %+.0f ms%s\n",
                    close ? "match  " : "late   ", (double)r->t / 1000.0,
                    r->kind, r->table_id, r->low, r->key ? " key " : "",
                    r->key ? r->key : "", to, o,
                    close ? "" : " (more than one decision interval)");
            if (close) {
                matched++;
                off_sum += fabs(o);
                if (fabs(o) > off_max) {
                    off_max = fabs(o);
                }
            } else {
                missing++;
            }
            continue;
        }
        missing++;
        fprintf(out, "missing %8.1f s %-8s table %" PRIu64 " low \"%s\"%s%s",
                (double)r->t / 1000.0, r->kind, r->table_id, r->low,
                r->key ? " key " : "", r->key ? r->key : "");
        /* Why: a decision of the same kind on the same range, different
         * in its key or target? */
        for (size_t b = 0; b < nsim; b++) {
            if (strcmp(sv[b].kind, r->kind) == 0 &&
                sv[b].table_id == r->table_id && rs__streq(sv[b].low, r->low)) {
                fprintf(out,
                        " -- the simulation decided it at %.1f s %s%s "
                        "(target %" PRIu64 " vs %" PRIu64 ")",
                        (double)sv[b].t / 1000.0, sv[b].key ? "at key " : "",
                        sv[b].key ? sv[b].key : "", sv[b].to, r->to);
                break;
            }
        }
        fprintf(out, "\n");
    }
    for (size_t b = 0; b < nsim; b++) {
        if (sv[b].match < 0) {
            extra++;
            fprintf(out,
                    "extra   %8.1f s %-8s table %" PRIu64
                    " low \"%s\"%s%s (the master did not decide it: its "
                    "view differed, or the trace ended first)\n",
                    (double)sv[b].t / 1000.0, sv[b].kind, sv[b].table_id,
                    sv[b].low ? sv[b].low : "", sv[b].key ? " key " : "",
                    sv[b].key ? sv[b].key : "");
        }
    }
    fprintf(out,
            "matched %zu of %zu within one decision interval (%" PRIu64
            " ms): mean offset %.0f ms, max %.0f ms; missing %zu, extra "
            "%zu\n",
            matched, nrec, tick, matched ? off_sum / (double)matched : 0.0,
            off_max, missing, extra);
    free(rv);
    free(sv);
    return missing;
}
