/* Status snapshot: the lock-protected documents and their builder. */
#include "ms_status.h"

#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ms_balance.h"
#include "ms_catalog.h"
#include "ms_cluster.h"
#include "ms_policy.h"
#include "ms_repl.h"
#include "ms_util.h"
#include "rt_alloc.h"
#include "rt_buf.h"
#include "rt_err.h"
#include "rt_log.h"
#include "rt_metrics.h"
#include "rt_time.h"

struct ms_status
{
    pthread_mutex_t lock;
    char *docs[MS_STATUS__NR]; /* guarded by lock */
    /* The member's side (ms_node.c), guarded by lock too. */
    bool follower;       /* not the acting leader: HTTP redirects */
    char *leader_http;   /* where to, NULL = no leader known */
    char *masters_json;  /* a JSON array, spliced in as "masters" */
    char *metrics_extra; /* appended to the metrics */
};

struct ms_status *ms_status_create(void)
{
    struct ms_status *st = rt_xcalloc(1, sizeof(*st));
    pthread_mutex_init(&st->lock, NULL);
    return st;
}

void ms_status_destroy(struct ms_status *st)
{
    if (!st) {
        return;
    }
    for (int i = 0; i < MS_STATUS__NR; i++) {
        free(st->docs[i]);
    }
    free(st->leader_http);
    free(st->masters_json);
    free(st->metrics_extra);
    pthread_mutex_destroy(&st->lock);
    free(st);
}

void ms_status_publish(struct ms_status *st, char *json, char *metrics)
{
    char *old[MS_STATUS__NR];
    pthread_mutex_lock(&st->lock);
    old[MS_STATUS_JSON] = st->docs[MS_STATUS_JSON];
    old[MS_STATUS_METRICS] = st->docs[MS_STATUS_METRICS];
    st->docs[MS_STATUS_JSON] = json;
    st->docs[MS_STATUS_METRICS] = metrics;
    pthread_mutex_unlock(&st->lock);
    free(old[MS_STATUS_JSON]);
    free(old[MS_STATUS_METRICS]);
}

void ms_status_publish_doc(struct ms_status *st,
                           enum ms_status_doc doc,
                           char *text)
{
    char *old;
    RT_PRE((int)doc >= 0 && doc < MS_STATUS__NR);
    pthread_mutex_lock(&st->lock);
    old = st->docs[doc];
    st->docs[doc] = text;
    pthread_mutex_unlock(&st->lock);
    free(old);
}

/* @doc with the member's parts added (lock held). */
static char *ms__status_doc_locked(const struct ms_status *st,
                                   enum ms_status_doc doc)
{
    const char *d = st->docs[doc];
    struct rt_buf b = RT_BUF_INIT;
    size_t n;

    if (!d) {
        return NULL;
    }
    n = strlen(d);
    if (doc == MS_STATUS_JSON && st->masters_json && n >= 2 &&
        d[n - 1] == '}') {
        /* The document is one object: "masters" goes in before its end. */
        rt_buf_append(&b, d, n - 1);
        rt_buf_printf(&b, "%s\"masters\":%s}", n > 2 ? "," : "",
                      st->masters_json);
    } else if (doc == MS_STATUS_METRICS && st->metrics_extra) {
        rt_buf_printf(&b, "%s%s", d, st->metrics_extra);
    } else {
        return rt_xstrdup(d);
    }
    rt_buf_append_u8(&b, 0);
    return (char *)b.data;
}

char *ms_status_copy(struct ms_status *st, enum ms_status_doc doc)
{
    char *copy;
    RT_PRE((int)doc >= 0 && doc < MS_STATUS__NR);
    pthread_mutex_lock(&st->lock);
    copy = ms__status_doc_locked(st, doc);
    pthread_mutex_unlock(&st->lock);
    return copy;
}

void ms_status_set_role(struct ms_status *st,
                        bool acting,
                        const char *leader_http)
{
    char *old;
    pthread_mutex_lock(&st->lock);
    st->follower = !acting;
    old = st->leader_http;
    st->leader_http =
        !acting && leader_http && *leader_http ? rt_xstrdup(leader_http) : NULL;
    pthread_mutex_unlock(&st->lock);
    free(old);
}

bool ms_status_role(struct ms_status *st, char **leader_http)
{
    bool acting;
    pthread_mutex_lock(&st->lock);
    acting = !st->follower;
    *leader_http = st->leader_http ? rt_xstrdup(st->leader_http) : NULL;
    pthread_mutex_unlock(&st->lock);
    return acting;
}

void ms_status_set_members(struct ms_status *st,
                           char *masters_json,
                           char *metrics_extra)
{
    char *old_m, *old_x;
    pthread_mutex_lock(&st->lock);
    old_m = st->masters_json;
    old_x = st->metrics_extra;
    st->masters_json = masters_json;
    st->metrics_extra = metrics_extra;
    pthread_mutex_unlock(&st->lock);
    free(old_m);
    free(old_x);
}

/* ---- builder (loop thread) ---- */

static json_t *ms__json_u64(uint64_t v)
{
    return json_integer((json_int_t)v);
}

/* Keys come from clients as UTF-8; should one hold an invalid byte, show
 * it as '?' rather than losing the whole document. */
/* Fewer in-sync copies than wanted (docs/DESIGN-replication.md §12.3):
 * a copy missing (created with fewer live servers, removed after a wipe),
 * out of the ISR (dead, lagging, an old primary not caught up yet) or
 * still being built (a learner). */
static bool ms__under_replicated(const struct ms_range *r)
{
    return r->nisr < r->rf;
}

static size_t ms__n_under_replicated(struct ms_cluster *cl)
{
    size_t n = 0;
    for (size_t i = 0; i < ms_catalog_nranges(cl->cat); i++) {
        n += ms__under_replicated(ms_catalog_range_at(cl->cat, i));
    }
    return n;
}

/* Ranges no live server serves as primary: none assigned, or the one
 * assigned is not up (until a failover gives it another, its keys answer
 * 503). */
static size_t ms__n_without_primary(struct ms_cluster *cl)
{
    size_t n = 0;
    for (size_t i = 0; i < ms_catalog_nranges(cl->cat); i++) {
        const struct ms_range *r = ms_catalog_range_at(cl->cat, i);
        const struct ms_server *s =
            r->server_id ? ms_cluster_server_find(cl, r->server_id) : NULL;
        n += s == NULL || s->state != MS_SERVER_UP;
    }
    return n;
}

static const char *ms__role_name(Rt__ReplRole role)
{
    switch (role) {
        case RT__REPL_ROLE__ROLE_PRIMARY:
            return "primary";
        case RT__REPL_ROLE__ROLE_SECONDARY:
            return "secondary";
        case RT__REPL_ROLE__ROLE_LEARNER:
            return "learner";
        default:
            return "none";
    }
}

/* Two of @r's replicas on servers that declared the same zone: the
 * placement ran out of zones (docs/DESIGN-replication.md §8.3). Servers
 * without a zone never count. */
static bool ms__zone_violation(const struct ms_catalog *cat,
                               const struct ms_range *r)
{
    for (size_t i = 0; i < r->nreplicas; i++) {
        const struct ms_server_rec *a =
            ms_catalog_server_find(cat, r->replicas[i].server_id);
        for (size_t j = i + 1; a && a->zone && *a->zone && j < r->nreplicas;
             j++) {
            const struct ms_server_rec *b =
                ms_catalog_server_find(cat, r->replicas[j].server_id);
            if (b && b->zone && strcmp(a->zone, b->zone) == 0) {
                return true;
            }
        }
    }
    return false;
}

static json_t *ms__json_key(const char *s)
{
    json_t *j = json_string(s);
    if (!j) {
        char *copy = rt_xstrdup(s);
        for (char *p = copy; *p; p++) {
            if ((unsigned char)*p >= 0x80) {
                *p = '?';
            }
        }
        j = json_string(copy);
        free(copy);
    }
    return j;
}

/* A replicated range's figures from its servers' heartbeats (§12.3):
 * "lease_ms" (what the primary reported, null: no report), "commit_lsn"
 * and "applied_lsn" (the primary's), and "lag", one object per other
 * replica: "server", "applied_lsn", "lag" (LSNs behind the primary's
 * applied LSN, null while either has not reported or when the replica's
 * report is of an older epoch, e.g. a dead server's from before the
 * failover; the two reports may be up to a heartbeat apart) and
 * "reported_ms_ago". RF 1 ranges: an empty
 * "lag" and nulls. */
static void ms__range_repl_json(json_t *o,
                                const struct ms_range *r,
                                struct ms_repl *repl,
                                uint64_t now)
{
    struct ms_repl_report prim, rep;
    bool has_prim = repl &&
                    ms_repl_report(repl, r->id, r->server_id, &prim) == 0 &&
                    prim.role == RT__REPL_ROLE__ROLE_PRIMARY;
    json_t *lag = json_array();
    json_object_set_new(o, "lease_ms",
                        has_prim ? ms__json_u64(prim.lease_ms) : json_null());
    json_object_set_new(
        o, "applied_lsn",
        has_prim ? ms__json_u64(prim.applied_lsn) : json_null());
    json_object_set_new(o, "commit_lsn",
                        has_prim ? ms__json_u64(prim.commit_lsn) : json_null());
    for (size_t j = 0; repl && r->nreplicas > 1 && j < r->nreplicas; j++) {
        uint64_t sid = r->replicas[j].server_id;
        json_t *l;
        if (sid == r->server_id) {
            continue;
        }
        l = json_object();
        json_object_set_new(l, "server", ms__json_u64(sid));
        if (ms_repl_report(repl, r->id, sid, &rep) == 0) {
            json_object_set_new(l, "applied_lsn",
                                ms__json_u64(rep.applied_lsn));
            json_object_set_new(
                l, "lag",
                has_prim && rep.epoch >= r->epoch
                    ? ms__json_u64(prim.applied_lsn > rep.applied_lsn
                                       ? prim.applied_lsn - rep.applied_lsn
                                       : 0)
                    : json_null());
            json_object_set_new(
                l, "reported_ms_ago",
                ms__json_u64(now > rep.at_ms ? now - rep.at_ms : 0));
        } else {
            json_object_set_new(l, "applied_lsn", json_null());
            json_object_set_new(l, "lag", json_null());
            json_object_set_new(l, "reported_ms_ago", json_null());
        }
        json_array_append_new(lag, l);
    }
    json_object_set_new(o, "lag", lag);
}

/* The replication operations in flight as "ops" entries: "kind"
 * ("failover", "transfer", "failover_cancelled", "isr_change",
 * "learner"), "range", "server" (its primary in the catalog), "state"
 * (the failover machine's), "running_ms" (since it began). */
static void ms__repl_ops_json(json_t *ops,
                              struct ms_cluster *cl,
                              struct ms_repl *repl,
                              uint64_t now)
{
    size_t n = repl ? ms_repl_ops(repl, NULL, 0) : 0;
    struct ms_repl_op *v;
    if (n == 0) {
        return;
    }
    v = rt_xcalloc(n, sizeof(*v));
    n = ms_repl_ops(repl, v, n);
    for (size_t i = 0; i < n; i++) {
        const struct ms_range *r =
            ms_catalog_range_find(cl->cat, v[i].range_id);
        json_t *oj = json_object();
        json_object_set_new(oj, "kind", json_string(v[i].kind));
        json_object_set_new(oj, "range", ms__json_u64(v[i].range_id));
        json_object_set_new(oj, "server", ms__json_u64(r ? r->server_id : 0));
        json_object_set_new(oj, "state", json_string(v[i].state));
        json_object_set_new(
            oj, "running_ms",
            ms__json_u64(now > v[i].since_ms ? now - v[i].since_ms : 0));
        json_array_append_new(ops, oj);
    }
    free(v);
}

static char *ms__build_json(struct ms_cluster *cl,
                            struct ms_balance *bal,
                            struct ms_repl *repl,
                            const size_t *counts,
                            uint64_t now)
{
    json_t *root = json_object();
    json_t *servers = json_array();
    json_t *ranges = json_array();
    json_t *tables = json_array();
    char *out;

    for (size_t i = 0; i < cl->servers.n; i++) {
        const struct ms_server *s = cl->servers.v[i];
        const struct ms_server_rec *rec =
            ms_catalog_server_find(cl->cat, s->id);
        json_t *o = json_object();
        json_object_set_new(o, "id", ms__json_u64(s->id));
        json_object_set_new(o, "addr", json_string(rec ? rec->addr : ""));
        json_object_set_new(
            o, "state", json_string(s->state == MS_SERVER_UP ? "up" : "down"));
        json_object_set_new(o, "ranges", ms__json_u64(counts[i]));
        json_object_set_new(
            o, "replicas",
            ms__json_u64(ms_catalog_server_nreplicas(cl->cat, s->id)));
        /* null: not heard from since this master started. */
        json_object_set_new(
            o, "last_heartbeat_ms_ago",
            s->seen ? ms__json_u64(now - s->last_hb_ms) : json_null());
        /* Load balancing: draining, and the sum of its ranges' loads. */
        json_object_set_new(o, "draining", json_boolean(rec && rec->draining));
        /* Replication: its failure domain and its disk's identity (null
         * until a server that sends one registers). */
        json_object_set_new(o, "zone", json_string(rec ? rec->zone : ""));
        if (rec && rec->has_incarnation) {
            char hex[2 * MS_INCARNATION_SIZE + 1];
            json_object_set_new(o, "incarnation",
                                json_string(ms_hex(rec->incarnation,
                                                   MS_INCARNATION_SIZE, hex)));
        } else {
            json_object_set_new(o, "incarnation", json_null());
        }
        {
            struct ms_load_rates sum = {0};
            uint64_t keys = 0, bytes = 0;
            json_t *lo;
            for (size_t j = 0; j < ms_catalog_nranges(cl->cat); j++) {
                const struct ms_range *r = ms_catalog_range_at(cl->cat, j);
                const struct ms_load_range *l;
                if (r->server_id != s->id) {
                    continue;
                }
                l = ms_load_find(bal->load, r->id);
                if (!l) {
                    continue;
                }
                sum.req_s += l->avg.req_s;
                sum.ent_s += l->avg.ent_s;
                sum.wbytes_s += l->avg.wbytes_s;
                sum.exec_frac += l->avg.exec_frac;
                sum.thr_s += l->avg.thr_s;
                sum.scan_s += l->avg.scan_s;
                keys += l->key_count;
                bytes += l->key_bytes;
            }
            lo = json_object();
            json_object_set_new(lo, "demand",
                                json_real(round(ms_load_demand(&sum))));
            json_object_set_new(lo, "ent_s", json_real(round(sum.ent_s)));
            json_object_set_new(lo, "req_s", json_real(round(sum.req_s)));
            json_object_set_new(lo, "wbytes_s", json_real(round(sum.wbytes_s)));
            json_object_set_new(lo, "thr_s", json_real(round(sum.thr_s)));
            json_object_set_new(lo, "scan_s", json_real(round(sum.scan_s)));
            json_object_set_new(lo, "exec_frac",
                                json_real(round(sum.exec_frac * 1000) / 1000));
            json_object_set_new(lo, "keys", ms__json_u64(keys));
            json_object_set_new(lo, "bytes", ms__json_u64(bytes));
            json_object_set_new(o, "load", lo);
        }
        json_object_set_new(o, "pending", ms__json_u64(s->pending));
        json_object_set_new(o, "max_server_eps",
                            ms__json_u64(s->max_server_eps));
        json_object_set_new(o, "max_range_eps", ms__json_u64(s->max_range_eps));
        json_array_append_new(servers, o);
    }
    for (size_t i = 0; i < ms_catalog_nranges(cl->cat); i++) {
        const struct ms_range *r = ms_catalog_range_at(cl->cat, i);
        const struct ms_table *t = ms_catalog_table_by_id(cl->cat, r->table_id);
        json_t *o = json_object();
        json_object_set_new(o, "id", ms__json_u64(r->id));
        json_object_set_new(o, "table", t ? json_string(t->name) : json_null());
        json_object_set_new(o, "account",
                            t ? json_string(t->account) : json_null());
        json_object_set_new(o, "table_id", ms__json_u64(r->table_id));
        json_object_set_new(o, "low", ms__json_key(r->low));
        json_object_set_new(o, "high",
                            r->high_inf ? json_null() : ms__json_key(r->high));
        json_object_set_new(o, "server", ms__json_u64(r->server_id));
        json_object_set_new(o, "epoch", ms__json_u64(r->epoch));
        /* The replica set: "server" stays the primary for older tools. */
        {
            json_t *reps = json_array(), *roles = json_array();
            json_t *isr = json_array();
            for (size_t j = 0; j < r->nreplicas; j++) {
                json_array_append_new(reps,
                                      ms__json_u64(r->replicas[j].server_id));
                json_array_append_new(
                    roles, json_string(ms__role_name(r->replicas[j].role)));
            }
            for (size_t j = 0; j < r->nisr; j++) {
                json_array_append_new(isr, ms__json_u64(r->isr[j]));
            }
            json_object_set_new(o, "replicas", reps);
            json_object_set_new(o, "roles", roles);
            json_object_set_new(o, "primary", ms__json_u64(r->server_id));
            json_object_set_new(o, "insync", isr);
            json_object_set_new(o, "rf", ms__json_u64(r->rf));
            json_object_set_new(o, "min_insync", ms__json_u64(r->min_insync));
            json_object_set_new(o, "under_replicated",
                                json_boolean(ms__under_replicated(r)));
            json_object_set_new(o, "zone_violation",
                                json_boolean(ms__zone_violation(cl->cat, r)));
            json_object_set_new(o, "seal_epoch", ms__json_u64(r->seal_epoch));
        }
        {
            /* Where its failover machine stands (null: RF 1). */
            const char *st = repl ? ms_repl_range_state(repl, r->id) : NULL;
            json_object_set_new(o, "repl_state",
                                st ? json_string(st) : json_null());
            ms__range_repl_json(o, r, repl, now);
        }
        {
            const struct ms_load_range *l = ms_load_find(bal->load, r->id);
            const struct ms_server *s =
                ms_cluster_server_find(cl, r->server_id);
            double thr = ms_policy_hot_threshold(&bal->policy_cfg,
                                                 s ? s->max_range_eps : 0);
            json_object_set_new(o, "load", ms_exec_load_json(l, false));
            json_object_set_new(
                o, "hot", json_boolean(l && ms_load_demand(&l->avg) >= thr));
            json_object_set_new(o, "busy",
                                json_boolean(ms_exec_busy(&bal->exec, r->id)));
        }
        json_array_append_new(ranges, o);
    }
    for (size_t i = 0; i < ms_catalog_ntables(cl->cat); i++) {
        const struct ms_table *t = ms_catalog_table_at(cl->cat, i);
        json_t *o = json_object();
        json_object_set_new(o, "account", json_string(t->account));
        json_object_set_new(o, "name", json_string(t->name));
        json_object_set_new(o, "id", ms__json_u64(t->id));
        json_array_append_new(tables, o);
    }
    json_object_set_new(root, "servers", servers);
    json_object_set_new(root, "ranges", ranges);
    json_object_set_new(root, "tables", tables);
    json_object_set_new(root, "map_version",
                        ms__json_u64(ms_catalog_map_version(cl->cat)));
    {
        json_t *pol = json_object(), *ops = json_array();
        const struct ms_policy_config *c = &bal->policy_cfg;
        json_object_set_new(pol, "name", json_string(bal->policy->ops->name));
        json_object_set_new(pol, "split_eps", json_real(c->split_eps));
        json_object_set_new(pol, "max_moves", ms__json_u64(c->max_moves));
        json_object_set_new(root, "policy", pol);
        {
            json_t *rep = json_object();
            json_object_set_new(rep, "factor", ms__json_u64(bal->rf));
            json_object_set_new(rep, "min_insync",
                                ms__json_u64(bal->min_insync));
            json_object_set_new(rep, "under_replicated",
                                ms__json_u64(ms__n_under_replicated(cl)));
            json_object_set_new(root, "replication", rep);
        }
        for (size_t i = 0; i < bal->exec.ops.n; i++) {
            const struct ms_op *op = bal->exec.ops.v[i];
            static const char *const kinds[] = {"split", "merge", "move",
                                                "transfer"};
            json_t *oj = json_object();
            json_object_set_new(oj, "kind", json_string(kinds[op->kind]));
            json_object_set_new(oj, "range", ms__json_u64(op->range_id));
            json_object_set_new(oj, "server", ms__json_u64(op->server_id));
            if (op->kind == MS_OP_MOVE) {
                json_object_set_new(oj, "to", ms__json_u64(op->dst));
                json_object_set_new(oj, "move_id", ms__json_u64(op->move_id));
                json_object_set_new(
                    oj, "state",
                    json_string(ms_exec_move_state_name(op->state)));
            } else if (op->kind == MS_OP_TRANSFER) {
                json_object_set_new(oj, "to", ms__json_u64(op->dst));
            }
            json_object_set_new(oj, "origin", json_string(op->origin));
            json_object_set_new(oj, "running_ms",
                                ms__json_u64(now - op->t0_ms));
            json_array_append_new(ops, oj);
        }
        ms__repl_ops_json(ops, cl, repl, now);
        json_object_set_new(root, "ops", ops);
        json_object_set_new(
            root, "events_seq",
            ms__json_u64(bal->events ? ms_events_last_seq(bal->events) : 0));
    }
    out = json_dumps(
        root, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(10));
    json_decref(root);
    if (!out) {
        rt_log(RT_LOG_ERROR, "status: cannot encode JSON");
        out = rt_xstrdup("{}");
    }
    return out;
}

static void ms__metric(struct rt_buf *b,
                       const char *name,
                       const char *type,
                       const char *help)
{
    rt_metrics_help(b, name, type, help);
}

/* A metric with one unlabelled sample: its HELP and TYPE lines, then
 * "@name @value". */
static void ms__metric1(struct rt_buf *b,
                        const char *name,
                        const char *type,
                        const char *help,
                        uint64_t value)
{
    ms__metric(b, name, type, help);
    rt_buf_printf(b, "%s %" PRIu64 "\n", name, value);
}

/* rt_master_failovers_total, rt_master_failover_seconds (histogram),
 * rt_master_isr_changes_total{kind}. */
static void ms__repl_metrics(struct rt_buf *b, struct ms_repl *repl)
{
    static const struct ms_repl_stats zero;
    const struct ms_repl_stats *st = repl ? ms_repl_stats(repl) : &zero;
    ms__metric1(b, "rt_master_failovers_total", "counter",
                "Failovers of replicated ranges completed (the new primary "
                "answered its assignment).",
                st->failovers);
    ms__metric1(b, "rt_master_failovers_cancelled_total", "counter",
                "Failovers cancelled: the primary came back before any "
                "seal was answered.",
                st->cancels);
    ms__metric(b, "rt_master_failover_seconds", "histogram",
               "Time from the primary's suspicion to the new primary's "
               "answer.");
    {
        /* failover_le is cumulative; the writer takes per-bucket counts. */
        uint64_t counts[MS_REPL_NBUCKETS + 1];
        uint64_t prev = 0;
        for (size_t i = 0; i < MS_REPL_NBUCKETS; i++) {
            counts[i] = st->failover_le[i] - prev;
            prev = st->failover_le[i];
        }
        counts[MS_REPL_NBUCKETS] = st->failovers - prev;
        rt_metrics_hist_le(b, "rt_master_failover_seconds", NULL,
                           ms_repl_bucket_le, MS_REPL_NBUCKETS, counts,
                           st->failover_seconds_sum);
    }
    ms__metric(b, "rt_master_isr_changes_total", "counter",
               "ISR changes committed, by kind.");
    rt_buf_printf(b,
                  "rt_master_isr_changes_total{kind=\"shrink\"} %" PRIu64 "\n",
                  st->isr_shrinks);
    rt_buf_printf(b, "rt_master_isr_changes_total{kind=\"grow\"} %" PRIu64 "\n",
                  st->isr_grows);
    ms__metric1(b, "rt_master_repl_ops_inflight", "gauge",
                "Replicated ranges with a failover or ISR operation in "
                "flight.",
                st->inflight);
    ms__metric1(b, "rt_master_rereplications_total", "counter",
                "Re-replication learners that joined the ISR.",
                st->rereplications);
    ms__metric1(b, "rt_master_rereplications_started_total", "counter",
                "Re-replication learners added.", st->rereplications_started);
    ms__metric1(b, "rt_master_rereplications_inflight", "gauge",
                "Re-replication learners being built.", st->rereplicating);
}

static char *ms__build_metrics(struct ms_cluster *cl,
                               struct ms_balance *bal,
                               struct ms_repl *repl)
{
    struct rt_buf b = RT_BUF_INIT;
    size_t up = 0, down = 0, under = 0, len;
    char *out;
    for (size_t i = 0; i < cl->servers.n; i++) {
        if (((struct ms_server *)cl->servers.v[i])->state == MS_SERVER_UP) {
            up++;
        } else {
            down++;
        }
    }
    ms__metric(&b, "rt_master_servers", "gauge",
               "Partition servers known to the master, by state.");
    rt_buf_printf(&b, "rt_master_servers{state=\"up\"} %zu\n", up);
    rt_buf_printf(&b, "rt_master_servers{state=\"down\"} %zu\n", down);
    ms__metric1(&b, "rt_master_ranges", "gauge", "Ranges in the partition map.",
                ms_catalog_nranges(cl->cat));
    under = ms__n_under_replicated(cl);
    ms__metric1(&b, "rt_master_under_replicated_ranges", "gauge",
                "Ranges with fewer in-sync copies than their replication "
                "factor.",
                under);
    ms__metric1(&b, "rt_master_ranges_without_primary", "gauge",
                "Ranges whose primary is none or a server that is not up.",
                ms__n_without_primary(cl));
    ms__metric1(&b, "rt_master_balancer_actions_total", "counter",
                "Splits, merges, moves and primaryship transfers the "
                "balancer and operators committed.",
                bal->exec.n_splits + bal->exec.n_merges + bal->exec.n_moves +
                    bal->exec.n_transfers);
    ms__metric1(&b, "rt_master_tables", "gauge",
                "Tables in the catalog (all accounts).",
                ms_catalog_ntables(cl->cat));
    ms__metric1(&b, "rt_master_map_version", "gauge",
                "Version of the partition map.",
                ms_catalog_map_version(cl->cat));
    ms__metric1(&b, "rt_master_fe_subscribers", "gauge",
                "Front-end connections subscribed to map updates.",
                cl->subscribers.n);
    ms__metric1(&b, "rt_master_rpc_requests_total", "counter",
                "RPC requests received by the master.", cl->rpc_requests);
    ms__metric1(&b, "rt_master_map_pushes_total", "counter",
                "MAP_UPDATE broadcasts to front ends.", cl->map_pushes);
    ms__metric1(&b, "rt_master_splits_total", "counter",
                "Range splits committed (policy and operator).",
                bal->exec.n_splits);
    ms__metric1(&b, "rt_master_merges_total", "counter",
                "Range merges committed.", bal->exec.n_merges);
    ms__metric(&b, "rt_master_moves_total", "counter",
               "Range moves by outcome.");
    rt_buf_printf(&b, "rt_master_moves_total{outcome=\"ok\"} %" PRIu64 "\n",
                  bal->exec.n_moves);
    rt_buf_printf(&b,
                  "rt_master_moves_total{outcome=\"aborted\"} %" PRIu64 "\n",
                  bal->exec.n_aborts);
    ms__metric1(&b, "rt_master_moves_inflight", "gauge",
                "Range moves and primaryship transfers in flight.",
                ms_exec_moves(&bal->exec));
    ms__metric1(&b, "rt_master_transfers_total", "counter",
                "Primaryship transfers that made their target primary.",
                bal->exec.n_transfers);
    ms__metric1(&b, "rt_master_hot_marks_total", "counter",
                "Times a range was marked hot by the policy.", bal->n_hot);
    ms__metric1(&b, "rt_master_events_total", "counter",
                "Events recorded since this master started.",
                bal->events ? ms_events_added(bal->events) : 0);
    ms__repl_metrics(&b, repl);
    rt_buf_cstr(&b);
    out = (char *)rt_buf_steal(&b, &len);
    return out;
}

void ms_status_hist_cache_free(struct ms_status_hist_cache *c)
{
    for (size_t i = 0; i < c->cap; i++) {
        free(c->text[i]);
    }
    free(c->n);
    free(c->text);
    memset(c, 0, sizeof(*c));
}

/* {"t":..,"r":[[range,demand,server],..],"s":[[server,demand],..]} */
static char *ms__frame_json(const struct ms_load_frame *f)
{
    json_t *fo = json_object(), *r = json_array(), *s = json_array();
    char *out;
    for (size_t j = 0; j < f->ncells; j++) {
        json_t *c = json_array();
        json_array_append_new(c, ms__json_u64(f->cells[j].b->range_id));
        json_array_append_new(c, json_real(round(f->cells[j].demand)));
        json_array_append_new(c, ms__json_u64(f->cells[j].server_id));
        json_array_append_new(r, c);
    }
    for (size_t j = 0; j < f->nservers; j++) {
        json_t *c = json_array();
        json_array_append_new(c, ms__json_u64(f->server_ids[j]));
        json_array_append_new(c, json_real(round(f->server_demand[j])));
        json_array_append_new(s, c);
    }
    json_object_set_new(fo, "t", ms__json_u64(f->unix_ms));
    json_object_set_new(fo, "r", r);
    json_object_set_new(fo, "s", s);
    out = json_dumps(fo, JSON_COMPACT | JSON_REAL_PRECISION(10));
    json_decref(fo);
    return out ? out : rt_xstrdup("{}");
}

/* @f's text: from @cache (may be NULL) or made (and kept there). The
 * returned text belongs to the cache; without one, to the caller (*@own
 * says which). */
static const char *ms__frame_text(struct ms_status_hist_cache *cache,
                                  size_t cap,
                                  const struct ms_load_frame *f,
                                  char **own)
{
    size_t slot;
    *own = NULL;
    if (!cache) {
        return *own = ms__frame_json(f);
    }
    if (cache->cap != cap) {
        ms_status_hist_cache_free(cache);
        cache->cap = cap;
        cache->n = rt_xcalloc(cap, sizeof(*cache->n));
        cache->text = rt_xcalloc(cap, sizeof(*cache->text));
    }
    /* Frames are numbered from 1 without gaps and the ring holds the
     * last @cap: no two kept frames share a slot. */
    slot = (size_t)(f->n % cap);
    if (cache->n[slot] != f->n || !cache->text[slot]) {
        free(cache->text[slot]);
        cache->text[slot] = ms__frame_json(f);
        cache->n[slot] = f->n;
    }
    return cache->text[slot];
}

char *ms_status_build_history(struct ms_cluster *cl,
                              struct ms_balance *bal,
                              bool coarse,
                              struct ms_status_hist_cache *cache)
{
    size_t nframes =
        coarse ? ms_load_ncoarse(bal->load) : ms_load_nframes(bal->load);
    size_t cap = coarse ? MS_LOAD_COARSE_HISTORY : MS_LOAD_HISTORY;
    json_t *root = json_object(), *tables = json_object();
    json_t *ranges = json_object();
    char key[32], *head, *out;
    struct rt_buf b;
    size_t len;

    for (size_t i = 0; i < ms_catalog_ntables(cl->cat); i++) {
        const struct ms_table *t = ms_catalog_table_at(cl->cat, i);
        snprintf(key, sizeof(key), "%" PRIu64, t->id);
        json_object_set_new(tables, key, json_string(t->name));
    }
    for (size_t i = 0; i < ms_load_nbounds(bal->load); i++) {
        const struct ms_load_bounds *bd = ms_load_bounds_at(bal->load, i);
        json_t *o = json_object();
        snprintf(key, sizeof(key), "%" PRIu64, bd->range_id);
        json_object_set_new(o, "table_id", ms__json_u64(bd->table_id));
        json_object_set_new(o, "low", ms__json_key(bd->low));
        json_object_set_new(o, "high",
                            bd->high ? ms__json_key(bd->high) : json_null());
        json_object_set_new(ranges, key, o);
    }
    json_object_set_new(root, "step_ms",
                        json_integer(coarse ? MS_LOAD_COARSE_MS : 1000));
    json_object_set_new(root, "max_frames", json_integer((json_int_t)cap));
    json_object_set_new(root, "threshold",
                        json_real(bal->policy_cfg.split_eps));
    json_object_set_new(root, "tables", tables);
    json_object_set_new(root, "ranges", ranges);
    /* The head without its closing brace, then "frames" from the texts. */
    head = json_dumps(root, JSON_COMPACT | JSON_REAL_PRECISION(10));
    json_decref(root);
    if (!head) {
        return rt_xstrdup("{}");
    }
    rt_buf_init(&b);
    rt_buf_append(&b, head, strlen(head) - 1);
    free(head);
    rt_buf_append_str(&b, ",\"frames\":[");
    for (size_t i = 0; i < nframes; i++) {
        const struct ms_load_frame *f = coarse ? ms_load_coarse_at(bal->load, i)
                                               : ms_load_frame_at(bal->load, i);
        char *own;
        const char *text = ms__frame_text(cache, cap, f, &own);
        if (i) {
            rt_buf_append_str(&b, ",");
        }
        rt_buf_append_str(&b, text);
        free(own);
    }
    rt_buf_append_str(&b, "]}");
    rt_buf_cstr(&b);
    out = (char *)rt_buf_steal(&b, &len);
    return out;
}

void ms_status_build(struct ms_cluster *cl,
                     struct ms_balance *bal,
                     struct ms_repl *repl,
                     char **json,
                     char **metrics)
{
    size_t *counts =
        rt_xcalloc(cl->servers.n ? cl->servers.n : 1, sizeof(*counts));
    ms_cluster_range_counts(cl, counts);
    *json = ms__build_json(cl, bal, repl, counts, rt_time_mono_ms());
    *metrics = ms__build_metrics(cl, bal, repl);
    free(counts);
}
