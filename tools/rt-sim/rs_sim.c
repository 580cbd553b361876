/* The simulated cluster (contract in rs_sim.h).
 *
 * Times: s->now_ms counts simulated milliseconds from 0; what the policy
 * and the load model see is the monotonic clock mono = now + RS__MONO0,
 * never 0 (a 0 means "never" in the view), as the master's clock is when
 * it loads its catalog: the ranges of the start are born at that time.
 *
 * Refusals follow ms_exec.c: an unknown range or server, a range with a
 * move in flight, a split key outside the range, a merge of ranges that
 * are not adjacent on one server, a transfer to a server outside the
 * ISR. A refused decision is logged with "outcome":"refused". */
#include "rs_sim.h"
#include "rs_internal.h"

#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "rl_keys.h"
#include "rt_alloc.h"
#include "rt_err.h"

#define RS__MONO0 1000000ull
#define RS__MAX_DECISIONS 64
#define RS__SAMPLES_MAX 8

struct rs_op
{
    uint64_t range_id;
    uint64_t src, dst; /* servers; src = the copy that leaves */
    bool secondary;    /* a replicated range's secondary copy moves */
    uint64_t end_ms;   /* the copy is over: the switch */
    uint64_t bytes;
};

void rs_cost_default(struct rs_cost *c)
{
    /* master/README.md "Measured" (bench-balance, Release): a split 3-7
     * ms; a move of 10 MB / 100 MB / 1 GB copies in 59 ms / 1.0 s / 9.5 s
     * (least squares: 40 ms + size / 105 MB/s) with a ServerBusy window
     * of 2 / 6 / 5 ms; docs/DESIGN-replication.md: a transfer's window
     * 5-20 ms. Merges were not measured: taken as a split's. */
    c->split_window_ms = 5;
    c->merge_window_ms = 5;
    /* A recorded trace (tests/integration/test_sim.py): two splits
     * decided in one call at 7002 ms ended at 7008 and 7009 ms, their
     * ranges born 1 ms apart (the second pair was not yet past its
     * cool-down at the tick 3 s later, the first was). */
    c->serial_ms = 1;
    c->move_fixed_ms = 40;
    c->move_mb_s = 105;
    c->move_window_ms = 5;
    c->transfer_window_ms = 15;
}

void rs_cfg_default(struct rs_cfg *cfg)
{
    memset(cfg, 0, sizeof(*cfg));
    cfg->servers = 10;
    cfg->ranges = 100;
    cfg->keys = 1000000;
    cfg->server_eps = 2500;
    cfg->rf = 1;
    cfg->entity_bytes = 1024;
    cfg->tick_ms = 500;
    cfg->seed = 1;
    cfg->start_unix_ms = 1798761600000ull; /* 2027-01-01T00:00:00Z */
    snprintf(cfg->policy, sizeof(cfg->policy), "default");
    ms_policy_config_default(&cfg->pcfg);
    rs_cost_default(&cfg->cost);
}

double rs_cost_move_ms(const struct rs_cost *c, uint64_t bytes)
{
    return c->move_fixed_ms + (double)bytes / (c->move_mb_s * 1e6) * 1000.0;
}

double rs_throttle(const double *demand,
                   const double *avail,
                   size_t n,
                   double range_cap,
                   double cap,
                   double *served)
{
    double total = 0, f = 1;
    for (size_t i = 0; i < n; i++) {
        served[i] = demand[i] * (avail ? avail[i] : 1.0);
        if (range_cap > 0 && served[i] > range_cap) {
            served[i] = range_cap;
        }
        total += served[i];
    }
    if (cap > 0 && total > cap) {
        f = cap / total;
        total = 0;
        for (size_t i = 0; i < n; i++) {
            served[i] *= f;
            total += served[i];
        }
    }
    return total;
}

/* ---- keys and bounds ---- */

static const struct rl_keymap rs__keymap = {0, RL_KEY_SEQ, RL_KEY_SEQ};

uint64_t rs__mono(const struct rs_sim *s)
{
    return s->now_ms + RS__MONO0;
}

/* The PartitionKey of global key index @g in table @t (1-based). */
static void rs__pk(const struct rs_sim *s, uint64_t t, uint64_t g, char *out)
{
    rl_pk_of_index(&rs__keymap, g - (t - 1) * s->keys_per_table, out);
}

/* The global index of PartitionKey @pk of table @t; false when it is not
 * one of rl_pk_of_index's keys. */
static bool rs__gidx(const struct rs_sim *s,
                     uint64_t t,
                     const char *pk,
                     uint64_t *g)
{
    char *end;
    unsigned long long v;
    if (pk[0] != 'p' || pk[1] < '0' || pk[1] > '9') {
        return false;
    }
    v = strtoull(pk + 1, &end, 10);
    if (*end) {
        return false;
    }
    *g = (t - 1) * s->keys_per_table + v;
    return true;
}

void rs__bounds_add(struct rs_sim *s,
                    uint64_t id,
                    uint64_t table_id,
                    const char *low,
                    const char *high)
{
    if (id >= s->nbounds) {
        size_t n = s->nbounds ? s->nbounds : 64;
        while (n <= id) {
            n *= 2;
        }
        s->bounds = rt_xrealloc(s->bounds, n * sizeof(*s->bounds));
        memset(s->bounds + s->nbounds, 0,
               (n - s->nbounds) * sizeof(*s->bounds));
        s->nbounds = n;
    }
    s->bounds[id].table_id = table_id;
    s->bounds[id].low = rt_xstrdup(low);
    s->bounds[id].high = high ? rt_xstrdup(high) : NULL;
}

/* ---- the range array ---- */

/* Points rv[i]'s replica arrays at rr[i]'s (after the arrays moved). */
void rs__index(struct rs_sim *s, size_t i)
{
    uint64_t id = s->rv[i].id;
    if (id >= s->npos) {
        size_t n = s->npos ? s->npos : 64;
        while (n <= id) {
            n *= 2;
        }
        s->pos = rt_xrealloc(s->pos, n * sizeof(*s->pos));
        memset(s->pos + s->npos, 0xff, (n - s->npos) * sizeof(*s->pos));
        s->npos = n;
    }
    s->pos[id] = i;
}

/* Points rv[i]'s replica arrays at rr[i]'s and indexes the ids again from
 * @from on (after the arrays moved or shifted). */
static void rs__fix_ptrs(struct rs_sim *s, size_t from)
{
    for (size_t i = from; i < s->nr; i++) {
        s->rv[i].isr = s->rr[i].isr;
        s->rv[i].replicas = s->rr[i].reps;
        rs__index(s, i);
    }
}

void rs__insert_at(struct rs_sim *s, size_t i)
{
    size_t from = i;
    if (s->nr == s->cap) {
        s->cap = s->cap ? s->cap * 2 : 64;
        s->rr = rt_xrealloc(s->rr, s->cap * sizeof(*s->rr));
        s->rv = rt_xrealloc(s->rv, s->cap * sizeof(*s->rv));
        from = 0; /* everything moved */
    }
    memmove(s->rr + i + 1, s->rr + i, (s->nr - i) * sizeof(*s->rr));
    memmove(s->rv + i + 1, s->rv + i, (s->nr - i) * sizeof(*s->rv));
    memset(&s->rr[i], 0, sizeof(s->rr[i]));
    memset(&s->rv[i], 0, sizeof(s->rv[i]));
    s->nr++;
    rs__fix_ptrs(s, from);
}

static void rs__remove_at(struct rs_sim *s, size_t i)
{
    memmove(s->rr + i, s->rr + i + 1, (s->nr - i - 1) * sizeof(*s->rr));
    memmove(s->rv + i, s->rv + i + 1, (s->nr - i - 1) * sizeof(*s->rv));
    s->nr--;
    rs__fix_ptrs(s, i);
}

size_t rs_sim_find(const struct rs_sim *s, uint64_t id)
{
    /* An id gone (split, merged) may still have a stale entry. */
    if (id < s->npos && s->pos[id] < s->nr && s->rv[s->pos[id]].id == id) {
        return s->pos[id];
    }
    return s->nr;
}

static struct rs_server *rs__server(struct rs_sim *s, uint64_t id)
{
    return id >= 1 && id <= s->ns ? &s->sv[id - 1] : NULL;
}

/* Counts of ranges and replicas per server, from scratch. */
void rs__recount(struct rs_sim *s)
{
    for (size_t j = 0; j < s->ns; j++) {
        s->sv[j].nranges = 0;
        s->sv[j].nreplicas = 0;
    }
    for (size_t i = 0; i < s->nr; i++) {
        struct rs_server *p = rs__server(s, s->rv[i].server_id);
        if (p) {
            p->nranges++;
        }
        for (size_t k = 0; k < s->rv[i].nreplicas; k++) {
            struct rs_server *q = rs__server(s, s->rr[i].reps[k]);
            if (q) {
                q->nreplicas++;
            }
        }
    }
}

/* ---- lifecycle ---- */

static void rs__layout(struct rs_sim *s)
{
    size_t T = s->cfg.tables, M = s->cfg.ranges, j = 0;
    uint64_t K = s->keys_per_table;
    char lo[RL_KEY_MAX], hi[RL_KEY_MAX];
    for (size_t t = 1; t <= T; t++) {
        size_t m = M / T + (t - 1 < M % T ? 1 : 0);
        uint64_t base = (t - 1) * K;
        if (m == 0) {
            m = 1;
        }
        for (size_t k = 0; k < m; k++, j++) {
            size_t i = s->nr;
            struct rs_range *r;
            struct ms_range_view *v;
            uint64_t glo = base + K * k / m, ghi = base + K * (k + 1) / m;
            rs__insert_at(s, i);
            r = &s->rr[i];
            v = &s->rv[i];
            r->glo = glo;
            r->ghi = k + 1 == m ? (t == T ? RS_UNBOUNDED : base + K) : ghi;
            r->keys = ghi - glo;
            r->bytes = r->keys * s->cfg.entity_bytes;
            lo[0] = '\0';
            if (k > 0) {
                rs__pk(s, t, glo, lo);
            }
            if (k + 1 < m) {
                rs__pk(s, t, ghi, hi);
            }
            v->id = s->next_id++;
            rs__index(s, i);
            v->table_id = t;
            rs__bounds_add(s, v->id, t, lo, k + 1 < m ? hi : NULL);
            v->low = s->bounds[v->id].low;
            v->high = s->bounds[v->id].high;
            v->epoch = 1;
            v->rf = s->cfg.rf;
            for (uint32_t c = 0; c < s->cfg.rf; c++) {
                r->reps[c] = (j + c) % s->ns + 1;
                r->isr[c] = r->reps[c];
            }
            v->server_id = r->reps[0];
            v->replicated = s->cfg.rf > 1;
            v->nisr = v->nreplicas = s->cfg.rf > 1 ? s->cfg.rf : 0;
            v->born_ms = v->split_ms = RS__MONO0;
        }
    }
}

struct rs_sim *rs_sim_create(const struct rs_cfg *cfg,
                             const struct rs_work_cfg *wcfg,
                             FILE *declog,
                             char *err,
                             size_t errlen)
{
    struct rs_sim *s;
    if (cfg->servers < 1 || cfg->ranges < 1 || cfg->rf < 1 ||
        cfg->rf > RS_RF_MAX || cfg->rf > cfg->servers || cfg->tick_ms < 10 ||
        (wcfg && cfg->keys < cfg->ranges)) {
        snprintf(err, errlen,
                 "need servers >= 1, ranges >= 1, 1 <= rf <= min(%d, "
                 "servers), keys >= ranges, tick >= 10 ms",
                 RS_RF_MAX);
        return NULL;
    }
    s = rt_xcalloc(1, sizeof(*s));
    s->cfg = *cfg;
    s->replay = wcfg == NULL;
    {
        char em[RT_ERRMSG_SIZE];
        if (ms_policy_create_msg(cfg->policy, &cfg->pcfg, &s->policy, em) !=
            0) {
            snprintf(err, errlen, "policy '%s': %s", cfg->policy, em);
            free(s);
            return NULL;
        }
    }
    s->cfg.pcfg.opts = NULL; /* borrowed by the policy's creation only */
    if (!s->cfg.tables) {
        s->cfg.tables = cfg->ranges / 16 ? cfg->ranges / 16 : 1;
    }
    if (s->cfg.tables > s->cfg.ranges) {
        s->cfg.tables = s->cfg.ranges;
    }
    s->keys_per_table = cfg->keys / s->cfg.tables;
    s->load = ms_load_create(0);
    if (wcfg) {
        rs_work_init(&s->work, wcfg);
    }
    rt_rng_seed(&s->rng, cfg->seed);
    s->declog = declog;
    s->ns = cfg->servers;
    s->sv = rt_xcalloc(s->ns, sizeof(*s->sv));
    s->svv = rt_xcalloc(s->ns, sizeof(*s->svv));
    for (size_t j = 0; j < s->ns; j++) {
        s->sv[j].id = j + 1;
        s->sv[j].up = true;
        s->sv[j].cap = cfg->server_eps;
        if (cfg->zones) {
            snprintf(s->sv[j].zone, sizeof(s->sv[j].zone), "z%zu",
                     j % cfg->zones);
        }
    }
    s->next_id = 1;
    if (wcfg) {
        rs__layout(s);
        rs__recount(s);
    }
    return s;
}

void rs_sim_destroy(struct rs_sim *s)
{
    if (!s) {
        return;
    }
    ms_policy_destroy(&s->policy);
    ms_load_destroy(s->load);
    rs_work_fini(&s->work);
    for (size_t i = 0; i < s->ndecs; i++) {
        free(s->decs[i].key);
        free(s->decs[i].low);
        free(s->decs[i].high);
    }
    for (size_t i = 0; i < s->nbounds; i++) {
        free(s->bounds[i].low);
        free(s->bounds[i].high);
    }
    for (size_t i = 0; i < s->nframes; i++) {
        free(s->frames[i].cells);
        free(s->frames[i].server_demand);
    }
    free(s->frames);
    free(s->bounds);
    free(s->decs);
    free(s->secs);
    free(s->ops);
    free(s->recops);
    free(s->rr);
    free(s->rv);
    free(s->pos);
    free(s->sv);
    free(s->svv);
    free(s);
}

void rs_sim_frames(struct rs_sim *s, uint32_t every_s, size_t cells)
{
    s->frame_every_s = every_s;
    s->frame_cells = cells ? cells : 1;
}

/* ---- the decision log ---- */

static void rs__log(struct rs_sim *s, const struct rs_dec *d)
{
    json_t *o;
    char *txt;
    if (!s->declog) {
        return;
    }
    o = json_object();
    json_object_set_new(o, "t_ms", json_integer((json_int_t)d->t_ms));
    json_object_set_new(o, "kind", json_string(ms_decision_kind_name(d->kind)));
    json_object_set_new(o, "range", json_integer((json_int_t)d->range_id));
    if (d->range_id2) {
        json_object_set_new(o, "range2",
                            json_integer((json_int_t)d->range_id2));
    }
    if (d->key) {
        json_object_set_new(o, "key", json_string(d->key));
    }
    if (d->server_id) {
        json_object_set_new(o, "to", json_integer((json_int_t)d->server_id));
    }
    if (d->from) {
        json_object_set_new(o, "from", json_integer((json_int_t)d->from));
    }
    if (d->new_ids[0]) {
        json_t *a = json_array();
        for (int k = 0; k < 2 && d->new_ids[k]; k++) {
            json_array_append_new(a, json_integer((json_int_t)d->new_ids[k]));
        }
        json_object_set_new(o, "new_ranges", a);
    }
    if (d->bytes) {
        json_object_set_new(o, "bytes", json_integer((json_int_t)d->bytes));
    }
    json_object_set_new(o, "load", json_integer((json_int_t)llround(d->load)));
    json_object_set_new(o, "reason", json_string(d->reason));
    json_object_set_new(o, "outcome", json_string(d->ok ? "ok" : "refused"));
    if (!d->ok) {
        json_object_set_new(o, "why", json_string(d->why));
    }
    txt = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
    fprintf(s->declog, "%s\n", txt);
    free(txt);
    json_decref(o);
}

static void rs__push_dec(struct rs_sim *s, const struct rs_dec *d)
{
    if (s->ndecs == s->decs_cap) {
        s->decs_cap = s->decs_cap ? s->decs_cap * 2 : 256;
        s->decs = rt_xrealloc(s->decs, s->decs_cap * sizeof(*s->decs));
    }
    s->decs[s->ndecs++] = *d;
}

/* ---- carrying decisions out ---- */

static void rs__window(struct rs_range *r, uint64_t from, double ms)
{
    r->busy_from = from;
    r->busy_until = from + (uint64_t)llround(ms);
}

static bool rs__refuse(struct rs_dec *rec, const char *why)
{
    rec->ok = false;
    snprintf(rec->why, sizeof(rec->why), "%s", why);
    return false;
}

/* The recorded operation the simulation is about to carry out as @rec
 * (same kind, table, low bound, and split key or target, decided within
 * one tick of now): when its new ranges were born (split, merge) or it
 * ended (move), in simulated ms, or 0 when none was recorded: the cost
 * model then says. Each recorded operation is used once. */
static uint64_t rs__recorded_end(struct rs_sim *s, const struct rs_dec *rec)
{
    /* recops are in trace order (t_dec never decreases): only those
     * within one tick of now are looked at. */
    size_t lo = 0, hi = s->nrecops;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (s->recops[mid].t_dec + s->cfg.tick_ms < s->now_ms) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    for (size_t k = lo;
         k < s->nrecops && s->recops[k].t_dec <= s->now_ms + s->cfg.tick_ms;
         k++) {
        struct rs_recop *o = &s->recops[k];
        if (o->used || o->kind != rec->kind || o->table_id != rec->table_id ||
            !rec->low || strcmp(o->low, rec->low) != 0) {
            continue;
        }
        if (rec->kind == MS_DECIDE_SPLIT
                ? !o->key || !rec->key || strcmp(o->key, rec->key) != 0
                : (rec->kind == MS_DECIDE_MOVE ||
                   rec->kind == MS_DECIDE_TRANSFER) &&
                      o->to != rec->server_id) {
            continue;
        }
        o->used = true;
        if (rec->kind == MS_DECIDE_SPLIT || rec->kind == MS_DECIDE_MERGE) {
            return o->t_born > s->now_ms ? o->t_born : s->now_ms;
        }
        return o->t_end > s->now_ms ? o->t_end : s->now_ms;
    }
    return 0;
}

static bool rs__split(struct rs_sim *s, size_t i, struct rs_dec *rec)
{
    struct ms_range_view *v = &s->rv[i];
    struct rs_range *r = &s->rr[i];
    uint64_t g, left, right, t = v->table_id, lk, rk;
    uint64_t mono = rs__mono(s) +
                    (uint64_t)llround(s->call_commits * s->cfg.cost.serial_ms);
    struct rs_range parent = *r;
    struct ms_range_view pv = *v;
    uint64_t end;
    if (!rec->key || strcmp(rec->key, v->low) <= 0 ||
        (v->high && strcmp(rec->key, v->high) >= 0)) {
        return rs__refuse(rec, "split key outside the range");
    }
    end = rs__recorded_end(s, rec);
    if (end) {
        mono = end + RS__MONO0;
    }
    if (s->replay) {
        /* Replayed ranges have no key indexes: halves get half each. */
        g = r->glo;
    } else if (!rs__gidx(s, t, rec->key, &g) || g <= r->glo ||
               (r->ghi != RS_UNBOUNDED && g >= r->ghi)) {
        return rs__refuse(rec, "split key not a key of the workload");
    }
    left = s->next_id++;
    right = s->next_id++;
    rs__bounds_add(s, left, t, v->low, rec->key);
    rs__bounds_add(s, right, t, rec->key, v->high);
    ms_load_split(s->load, pv.id, rec->key, left, right);
    lk = s->replay ? parent.keys / 2
                   : (g - r->glo < parent.keys ? g - r->glo : parent.keys);
    rk = parent.keys - lk;
    rs__insert_at(s, i + 1);
    for (int k = 0; k < 2; k++) {
        struct rs_range *c = &s->rr[i + k];
        struct ms_range_view *cv = &s->rv[i + k];
        uint64_t id = k ? right : left;
        *c = parent;
        *cv = pv;
        c->glo = k ? g : parent.glo;
        c->ghi = k ? parent.ghi : g;
        c->keys = k ? rk : lk;
        c->bytes = parent.keys ? parent.bytes / parent.keys * c->keys : 0;
        c->mass_shape = 0;
        c->reported = false;
        cv->id = id;
        cv->low = s->bounds[id].low;
        cv->high = s->bounds[id].high;
        cv->epoch = pv.epoch + 1;
        cv->born_ms = cv->split_ms = mono;
        cv->move_ms = 0;
        cv->load = ms_load_find(s->load, id);
        rs__window(c, s->now_ms, s->cfg.cost.split_window_ms);
    }
    rs__fix_ptrs(s, i);
    rec->new_ids[0] = left;
    rec->new_ids[1] = right;
    return true;
}

static bool rs__merge(struct rs_sim *s, size_t i, struct rs_dec *rec)
{
    struct ms_range_view *a = &s->rv[i], *b;
    uint64_t id, end,
        mono = rs__mono(s) +
               (uint64_t)llround(s->call_commits * s->cfg.cost.serial_ms);
    if (i + 1 >= s->nr || s->rv[i + 1].id != rec->range_id2) {
        return rs__refuse(rec, "not adjacent to the second range");
    }
    b = &s->rv[i + 1];
    if (a->table_id != b->table_id || !a->high ||
        strcmp(a->high, b->low) != 0 || a->server_id != b->server_id) {
        return rs__refuse(rec, "not adjacent on one server");
    }
    if (s->rr[i + 1].inflight) {
        return rs__refuse(rec, "second range busy");
    }
    if ((end = rs__recorded_end(s, rec)) != 0) {
        mono = end + RS__MONO0;
    }
    id = s->next_id++;
    rs__bounds_add(s, id, a->table_id, a->low, b->high);
    ms_load_merge(s->load, a->id, b->id, id);
    s->rr[i].ghi = s->rr[i + 1].ghi;
    s->rr[i].keys += s->rr[i + 1].keys;
    s->rr[i].bytes += s->rr[i + 1].bytes;
    s->rr[i].mass_shape = 0;
    a->split_ms = a->split_ms > b->split_ms ? a->split_ms : b->split_ms;
    a->id = id;
    rs__index(s, i);
    a->low = s->bounds[id].low;
    a->high = s->bounds[id].high;
    a->epoch = (a->epoch > b->epoch ? a->epoch : b->epoch) + 1;
    a->born_ms = mono;
    a->move_ms = 0;
    rs__window(&s->rr[i], s->now_ms, s->cfg.cost.merge_window_ms);
    rs__remove_at(s, i + 1);
    s->rv[i].load = ms_load_find(s->load, id);
    rec->new_ids[0] = id;
    return true;
}

static bool rs__holds(const struct rs_range *r, size_t n, uint64_t id)
{
    for (size_t k = 0; k < n; k++) {
        if (r->reps[k] == id) {
            return true;
        }
    }
    return false;
}

static bool rs__move(struct rs_sim *s, size_t i, struct rs_dec *rec)
{
    struct ms_range_view *v = &s->rv[i];
    struct rs_range *r = &s->rr[i];
    struct rs_server *dst = rs__server(s, rec->server_id), *src;
    struct rs_op *op;
    size_t nrep = v->replicated ? v->nreplicas : 1;
    uint64_t from = rec->src_id ? rec->src_id : v->server_id;
    if (!dst || !dst->up) {
        return rs__refuse(rec, "target server unknown or down");
    }
    if (v->replicated ? rs__holds(r, nrep, dst->id) : dst->id == v->server_id) {
        return rs__refuse(rec, "target already holds a copy");
    }
    if (rec->src_id && !rs__holds(r, nrep, rec->src_id)) {
        return rs__refuse(rec, "source holds no copy");
    }
    src = rs__server(s, from);
    if (s->nops == s->ops_cap) {
        s->ops_cap = s->ops_cap ? s->ops_cap * 2 : 16;
        s->ops = rt_xrealloc(s->ops, s->ops_cap * sizeof(*s->ops));
    }
    op = &s->ops[s->nops++];
    op->range_id = v->id;
    op->src = from;
    op->dst = dst->id;
    op->secondary = rec->src_id != 0 && rec->src_id != v->server_id;
    op->bytes = r->bytes;
    op->end_ms = rs__recorded_end(s, rec);
    if (!op->end_ms) {
        op->end_ms = s->now_ms +
                     (uint64_t)llround(rs_cost_move_ms(&s->cfg.cost, r->bytes));
    }
    r->inflight = true;
    dst->moving++;
    if (src) {
        src->moving++;
    }
    s->moves_inflight++;
    rec->from = from;
    rec->bytes = r->bytes;
    return true;
}

static bool rs__transfer(struct rs_sim *s, size_t i, struct rs_dec *rec)
{
    struct ms_range_view *v = &s->rv[i];
    struct rs_range *r = &s->rr[i];
    struct rs_server *a = rs__server(s, v->server_id);
    struct rs_server *b = rs__server(s, rec->server_id);
    size_t k;
    if (!v->replicated) {
        return rs__refuse(rec, "not replicated");
    }
    for (k = 0; k < v->nisr && r->isr[k] != rec->server_id; k++) {
    }
    if (k == v->nisr || rec->server_id == v->server_id || !b || !b->up) {
        return rs__refuse(rec, "target not an in-sync replica");
    }
    /* The primary goes first in the replica list. */
    for (k = 0; k < v->nreplicas && r->reps[k] != rec->server_id; k++) {
    }
    if (k < v->nreplicas) {
        r->reps[k] = r->reps[0];
        r->reps[0] = rec->server_id;
    }
    rec->from = v->server_id;
    v->server_id = rec->server_id;
    v->epoch++;
    v->move_ms = rs__mono(s);
    if (a) {
        a->move_ms = rs__mono(s);
        a->nranges--;
    }
    b->move_ms = rs__mono(s);
    b->nranges++;
    rs__window(r, s->now_ms, s->cfg.cost.transfer_window_ms);
    return true;
}

static bool rs__apply(struct rs_sim *s, const struct ms_decision *d)
{
    struct rs_dec rec;
    size_t i = rs_sim_find(s, d->range_id);
    bool ok = true;
    memset(&rec, 0, sizeof(rec));
    rec.t_ms = s->now_ms;
    rec.kind = d->kind;
    rec.range_id = d->range_id;
    rec.range_id2 = d->range_id2;
    rec.server_id = d->server_id;
    rec.src_id = d->src_id;
    rec.load = d->load;
    rec.key = d->key ? rt_xstrdup(d->key) : NULL;
    rec.ok = true;
    snprintf(rec.reason, sizeof(rec.reason), "%s", d->reason);
    if (i == s->nr) {
        ok = rs__refuse(&rec, "no such range");
    } else {
        rec.table_id = s->rv[i].table_id;
        rec.from = s->rv[i].server_id;
        rec.low = rt_xstrdup(s->rv[i].low);
        rec.high = s->rv[i].high ? rt_xstrdup(s->rv[i].high) : NULL;
        if (d->kind != MS_DECIDE_HOT && d->kind != MS_DECIDE_COOL &&
            s->rr[i].inflight) {
            ok = rs__refuse(&rec, "range busy");
        }
    }
    if (ok) {
        switch (d->kind) {
            case MS_DECIDE_SPLIT:
                ok = rs__split(s, i, &rec);
                break;
            case MS_DECIDE_MERGE:
                ok = rs__merge(s, i, &rec);
                break;
            case MS_DECIDE_MOVE:
                ok = rs__move(s, i, &rec);
                break;
            case MS_DECIDE_TRANSFER:
                ok = rs__transfer(s, i, &rec);
                break;
            default:
                break;
        }
    }
    if (ok) {
        s->totals[d->kind]++;
        switch (d->kind) {
            case MS_DECIDE_SPLIT:
            case MS_DECIDE_MERGE: {
                /* One range more (split) or fewer (merge) on its server
                 * and on each of its replicas' servers. */
                size_t j = rs_sim_find(s, rec.new_ids[0]);
                bool more = d->kind == MS_DECIDE_SPLIT;
                struct rs_server *p = rs__server(s, s->rv[j].server_id);
                if (p) {
                    p->nranges = more ? p->nranges + 1 : p->nranges - 1;
                }
                for (size_t k = 0; k < s->rv[j].nreplicas; k++) {
                    struct rs_server *q = rs__server(s, s->rr[j].reps[k]);
                    if (q) {
                        q->nreplicas =
                            more ? q->nreplicas + 1 : q->nreplicas - 1;
                    }
                }
                if (more) {
                    s->acc.splits++;
                } else {
                    s->acc.merges++;
                }
                s->call_commits++;
                break;
            }
            case MS_DECIDE_MOVE:
                s->acc.moves++;
                break;
            case MS_DECIDE_TRANSFER:
                s->acc.transfers++;
                break;
            default:
                break;
        }
    } else {
        s->refused_decisions++;
    }
    rs__log(s, &rec);
    rs__push_dec(s, &rec);
    return ok;
}

bool rs_sim_order(struct rs_sim *s, const struct ms_decision *d)
{
    return rs__apply(s, d);
}

/* Moves whose copy ends within the step switch at its start: the range
 * serves from its new server for the whole step (early by less than a
 * step), and the ServerBusy window at the copy's end falls inside it. */
void rs__ops_progress(struct rs_sim *s, uint64_t horizon)
{
    for (size_t o = 0; o < s->nops;) {
        struct rs_op *op = &s->ops[o];
        size_t i;
        struct rs_server *src, *dst;
        if (op->end_ms >= horizon) {
            o++;
            continue;
        }
        i = rs_sim_find(s, op->range_id);
        src = rs__server(s, op->src);
        dst = rs__server(s, op->dst);
        if (i < s->nr) {
            struct ms_range_view *v = &s->rv[i];
            struct rs_range *r = &s->rr[i];
            if (!v->replicated) {
                v->server_id = op->dst;
            } else {
                for (size_t k = 0; k < v->nreplicas; k++) {
                    if (r->reps[k] == op->src) {
                        r->reps[k] = op->dst;
                    }
                    if (k < v->nisr && r->isr[k] == op->src) {
                        r->isr[k] = op->dst;
                    }
                }
                if (!op->secondary) {
                    v->server_id = op->dst;
                }
            }
            v->epoch++;
            v->move_ms = op->end_ms + RS__MONO0;
            r->inflight = false;
            if (!op->secondary) {
                rs__window(r, op->end_ms, s->cfg.cost.move_window_ms);
            }
        }
        if (src) {
            src->moving--;
            src->move_ms = op->end_ms + RS__MONO0;
        }
        if (dst) {
            dst->moving--;
            dst->move_ms = op->end_ms + RS__MONO0;
        }
        s->moves_inflight--;
        s->bytes_moved += op->bytes;
        s->acc.bytes_moved += op->bytes;
        s->ops[o] = s->ops[--s->nops];
        rs__recount(s);
    }
}

/* ---- one step ---- */

/* Part of [t0, t0 + dt) the range is not in a ServerBusy window. */
static double rs__avail(const struct rs_range *r, uint64_t t0, uint64_t dt)
{
    uint64_t a = r->busy_from > t0 ? r->busy_from : t0;
    uint64_t b = r->busy_until < t0 + dt ? r->busy_until : t0 + dt;
    if (b <= a) {
        return 1.0;
    }
    return 1.0 - (double)(b - a) / (double)dt;
}

static void rs__demand(struct rs_sim *s)
{
    struct rs_work *w = &s->work;
    uint64_t dt = s->cfg.tick_ms;
    rs_work_at(w, (double)s->now_ms / 1000.0, (double)dt / 1000.0);
    if (w->step) {
        s->acc.step = true;
    }
    for (size_t j = 0; j < s->ns; j++) {
        s->sv[j].demand = 0;
        s->sv[j].served = 0;
    }
    /* The cap applies to what a range may serve; then the servers. */
    for (size_t i = 0; i < s->nr; i++) {
        struct rs_range *r = &s->rr[i];
        struct rs_server *p = rs__server(s, s->rv[i].server_id);
        double pre;
        if (r->mass_shape != w->shape) {
            double hi = r->ghi == RS_UNBOUNDED ? 1.0 : rs_work_cdf(w, r->ghi);
            r->mass = hi - rs_work_cdf(w, r->glo);
            if (r->mass < 0) {
                r->mass = 0;
            }
            r->mass_shape = w->shape;
        }
        r->demand = w->rate_now * r->mass;
        pre = r->demand * rs__avail(r, s->now_ms, dt);
        if (s->cfg.range_eps > 0 && pre > s->cfg.range_eps) {
            pre = s->cfg.range_eps;
        }
        if (!p || !p->up) {
            pre = 0;
        }
        r->served = pre;
        if (p) {
            p->demand += r->demand;
            p->served += pre;
        }
    }
    for (size_t i = 0; i < s->nr; i++) {
        struct rs_range *r = &s->rr[i];
        struct rs_server *p = rs__server(s, s->rv[i].server_id);
        if (p && p->cap > 0 && p->served > p->cap) {
            r->served *= p->cap / p->served;
        }
        r->refused = r->demand - r->served;
        if (r->refused < 0) {
            r->refused = 0;
        }
    }
    for (size_t j = 0; j < s->ns; j++) {
        struct rs_server *p = &s->sv[j];
        if (p->cap > 0 && p->served > p->cap) {
            p->served = p->cap;
        }
    }
}

static void rs__heartbeats(struct rs_sim *s)
{
    uint64_t dt = s->cfg.tick_ms, mono = rs__mono(s) + dt;
    char keys[RS__SAMPLES_MAX][RL_KEY_MAX];
    char *kp[RS__SAMPLES_MAX];
    for (int k = 0; k < RS__SAMPLES_MAX; k++) {
        kp[k] = keys[k];
    }
    for (size_t i = 0; i < s->nr; i++) {
        struct rs_range *r = &s->rr[i];
        struct ms_range_view *v = &s->rv[i];
        struct rs_server *p = rs__server(s, v->server_id);
        Rt__RangeLoad l = RT__RANGE_LOAD__INIT;
        uint64_t ent, thr, n;
        if (!p || !p->up) {
            continue;
        }
        /* An idle range whose average has decayed says nothing new. */
        if (r->reported && r->demand <= 0 &&
            (!v->load || ms_load_demand(&v->load->avg) < 0.01)) {
            continue;
        }
        ent = (uint64_t)llround(r->served * (double)dt / 1000.0);
        thr = (uint64_t)llround(r->refused * (double)dt / 1000.0);
        l.range_id = v->id;
        l.requests = ent;
        l.entities = ent;
        l.bytes_written = ent * s->cfg.entity_bytes;
        l.exec_us = p->cap > 0
                        ? (uint64_t)(r->served / p->cap * (double)dt * 1000.0)
                        : 0;
        l.key_count = r->keys;
        l.key_bytes = r->bytes;
        l.interval_ms = dt;
        l.throttled = thr;
        /* A partition server sends up to 32 samples a heartbeat; a few
         * per step already keep the 10 s sample window full (the split
         * key needs no more) and cost far less. */
        n = r->demand > 0 ? 1 + (ent + thr) / 256 : 0;
        if (n > RS__SAMPLES_MAX) {
            n = RS__SAMPLES_MAX;
        }
        for (uint64_t k = 0; k < n; k++) {
            uint64_t g = rs_work_sample(&s->work, &s->rng, r->glo, r->ghi);
            rs__pk(s, v->table_id, g, keys[k]);
        }
        l.n_sample_pks = n;
        l.sample_pks = kp;
        ms_load_report(s->load, p->id, &l, (uint64_t)p->cap,
                       (uint64_t)s->cfg.range_eps, mono);
        r->reported = true;
        if (!v->load) {
            v->load = ms_load_find(s->load, v->id);
        }
    }
}

void rs__policy(struct rs_sim *s)
{
    struct ms_decision d[RS__MAX_DECISIONS];
    struct ms_cluster_view view;
    size_t n;
    for (size_t j = 0; j < s->ns; j++) {
        struct ms_server_view *x = &s->svv[j];
        const struct rs_server *p = &s->sv[j];
        x->id = p->id;
        x->up = p->up;
        x->draining = false;
        x->nranges = p->nranges;
        x->pending = 0;
        x->max_server_eps = (uint64_t)p->cap;
        x->max_range_eps = (uint64_t)s->cfg.range_eps;
        x->moving = p->moving;
        x->move_ms = p->move_ms;
        x->zone = p->zone;
        x->nreplicas = p->nreplicas;
    }
    for (size_t i = 0; i < s->nr; i++) {
        s->rv[i].busy = s->rr[i].inflight;
    }
    view.servers = s->svv;
    view.nservers = s->ns;
    view.ranges = s->rv;
    view.nranges = s->nr;
    view.now_ms = rs__mono(s);
    view.moves = s->moves_inflight;
    s->call_commits = 0;
    n = ms_policy_decide(&s->policy, &view, d, RS__MAX_DECISIONS);
    for (size_t k = 0; k < n; k++) {
        rs__apply(s, &d[k]);
    }
    ms_decisions_free(d, n);
}

static int rs__cell_cmp(const void *a, const void *b)
{
    const struct rs_cell *x = a, *y = b;
    if (x->demand != y->demand) {
        return x->demand > y->demand ? -1 : 1;
    }
    return x->range_id < y->range_id ? -1 : x->range_id > y->range_id;
}

static void rs__frame(struct rs_sim *s)
{
    struct rs_frame *f;
    size_t n = s->nr;
    if (s->nframes == s->frames_cap) {
        s->frames_cap = s->frames_cap ? s->frames_cap * 2 : 64;
        s->frames = rt_xrealloc(s->frames, s->frames_cap * sizeof(*s->frames));
    }
    f = &s->frames[s->nframes++];
    f->t_ms = s->now_ms;
    f->cells = rt_xcalloc(n ? n : 1, sizeof(*f->cells));
    for (size_t i = 0; i < n; i++) {
        f->cells[i].range_id = s->rv[i].id;
        f->cells[i].demand = (float)s->rr[i].demand;
        f->cells[i].server = (uint32_t)s->rv[i].server_id;
    }
    if (n > s->frame_cells) {
        /* The busiest: a heat map shows where the heat is. */
        qsort(f->cells, n, sizeof(*f->cells), rs__cell_cmp);
        n = s->frame_cells;
        f->cells = rt_xrealloc(f->cells, n * sizeof(*f->cells));
    }
    f->ncells = n;
    f->server_demand = rt_xcalloc(s->ns, sizeof(*f->server_demand));
    for (size_t j = 0; j < s->ns; j++) {
        f->server_demand[j] = (float)s->sv[j].demand;
    }
}

void rs__account(struct rs_sim *s)
{
    double busiest = 0, sum = 0;
    size_t live = 0;
    unsigned per_s = 1000 / s->cfg.tick_ms ? 1000 / s->cfg.tick_ms : 1;
    for (size_t j = 0; j < s->ns; j++) {
        if (!s->sv[j].up) {
            continue;
        }
        live++;
        sum += s->sv[j].demand;
        if (s->sv[j].demand > busiest) {
            busiest = s->sv[j].demand;
        }
    }
    for (size_t i = 0; i < s->nr; i++) {
        s->acc.demanded += s->rr[i].demand;
        s->acc.served += s->rr[i].served;
        s->acc.refused += s->rr[i].refused;
    }
    s->acc.busiest += busiest;
    s->acc.mean += live ? sum / (double)live : 0;
    if (++s->acc_ticks < per_s) {
        return;
    }
    s->acc.demanded /= s->acc_ticks;
    s->acc.served /= s->acc_ticks;
    s->acc.refused /= s->acc_ticks;
    s->acc.busiest /= s->acc_ticks;
    s->acc.mean /= s->acc_ticks;
    s->acc.ranges = (uint32_t)s->nr;
    if (s->nsecs == s->secs_cap) {
        s->secs_cap = s->secs_cap ? s->secs_cap * 2 : 256;
        s->secs = rt_xrealloc(s->secs, s->secs_cap * sizeof(*s->secs));
    }
    s->secs[s->nsecs++] = s->acc;
    memset(&s->acc, 0, sizeof(s->acc));
    s->acc_ticks = 0;
    if (s->frame_every_s && (s->nsecs - 1) % s->frame_every_s == 0) {
        rs__frame(s);
    }
}

void rs_sim_step(struct rs_sim *s)
{
    rs__ops_progress(s, s->now_ms + s->cfg.tick_ms);
    rs__demand(s);
    rs__heartbeats(s);
    rs__account(s);
    s->now_ms += s->cfg.tick_ms;
    rs__policy(s);
    s->ticks++;
    s->range_ticks += s->nr;
}

void rs_sim_run_until(struct rs_sim *s, uint64_t t_ms)
{
    while (s->now_ms < t_ms) {
        rs_sim_step(s);
    }
}
