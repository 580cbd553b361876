/* Trace recording (ms_trace_rec.h): the master's hooks turned into
 * records of ms_trace.h.
 *
 * States: idle (no writer), recording detached (a writer, no session:
 * nothing is written), recording attached (a segment is open). A write
 * error takes it to idle with the error kept for the status. */
#include "ms_trace_rec.h"

#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "ms_catalog.h"
#include "ms_trace.h"
#include "ms_util.h"
#include "rt_alloc.h"
#include "rt_err.h"
#include "rt_log.h"
#include "rt_metrics.h"
#include "rt_time.h"

struct ms_trace_rec
{
    char *data_dir;
    struct ms_trace_writer *w; /* NULL: not recording */
    char *path;                /* of w */
    char *flag_path;           /* --trace, opened at the first attach */
    bool from_flag;            /* --trace: segment reason "start" first */
    /* The attached session. */
    struct ms_cluster *cl;
    struct ms_events *events;
    struct ms_trace_rec_info info;
    struct ms_policy_config policy_cfg;
    char *policy;
    bool attached;
    bool in_segment;
    uint64_t map_fp; /* fingerprint of the last snapshot */
    uint64_t ticks;
    uint64_t next_decision;
    uint64_t last_outcome; /* decision id of the last outcome written */
    uint64_t flush_ms;

    /* Read by any thread. */
    pthread_mutex_t lock;
    bool recording;
    char *file; /* path shown in the status */
    uint64_t since_unix_ms;
    struct ms_trace_stats st;
    uint64_t bytes_total, records_total; /* over every trace */
    uint64_t bytes_done, records_done;   /* of traces closed */
    char error[RT_ERRMSG_SIZE];
};

/* ---- status ---- */

static void ms__publish(struct ms_trace_rec *rec)
{
    struct ms_trace_stats st = {0};
    if (rec->w) {
        ms_trace_writer_stats(rec->w, &st);
    }
    pthread_mutex_lock(&rec->lock);
    rec->recording = rec->w != NULL;
    if (rec->w) {
        rec->st = st;
    }
    rec->bytes_total = rec->bytes_done + (rec->w ? st.file_bytes : 0);
    rec->records_total = rec->records_done + (rec->w ? st.records : 0);
    pthread_mutex_unlock(&rec->lock);
}

/* ---- writer lifetime ---- */

/* Closes the writer (@reason NULL: no end record). */
static int ms__close(struct ms_trace_rec *rec, const char *reason, char *em)
{
    struct ms_trace_stats st;
    int rc;
    if (!rec->w) {
        return 0;
    }
    ms_trace_writer_stats(rec->w, &st);
    /* The end record goes into the last segment, attached or not. */
    rc = ms_trace_writer_close(rec->w, rt_time_mono_ms(), reason, em);
    rec->w = NULL;
    rec->in_segment = false;
    pthread_mutex_lock(&rec->lock);
    /* What the file holds now that zlib's trailer is written. */
    {
        struct stat sb;
        if (stat(rec->path, &sb) == 0) {
            st.file_bytes = (uint64_t)sb.st_size;
        }
    }
    st.records += reason && st.segments ? 1 : 0;
    rec->st = st;
    rec->bytes_done += st.file_bytes;
    rec->records_done += st.records;
    pthread_mutex_unlock(&rec->lock);
    ms__publish(rec);
    rt_log(RT_LOG_INFO,
           "trace %s closed: %" PRIu64 " records, %" PRIu64 " bytes", rec->path,
           st.records, st.file_bytes);
    return rc;
}

/* A write error: stop recording, keep the error, tell the log and the
 * events (with the sink off: the event must not be traced). */
static void ms__fail(struct ms_trace_rec *rec, const char *em)
{
    char em2[RT_ERRMSG_SIZE];
    rt_log(RT_LOG_ERROR, "trace %s stopped: %s", rec->path, em);
    pthread_mutex_lock(&rec->lock);
    snprintf(rec->error, sizeof(rec->error), "%s", em);
    pthread_mutex_unlock(&rec->lock);
    ms__close(rec, NULL, em2);
    if (rec->events) {
        json_t *e = json_object();
        ms_events_set_sink(rec->events, NULL, NULL);
        json_object_set_new(e, "kind", json_string("trace_stopped"));
        json_object_set_new(e, "file", json_string(rec->path));
        json_object_set_new(e, "error", json_string(em));
        ms_events_add(rec->events, e);
    }
}

/* Opens @path for a new trace (idle before). */
static int ms__open(struct ms_trace_rec *rec, const char *path, char *em)
{
    int rc = ms_trace_writer_open(path, &rec->w, em);
    if (rc) {
        return rc;
    }
    free(rec->path);
    rec->path = rt_xstrdup(path);
    rec->ticks = 0;
    rec->next_decision = 1;
    rec->in_segment = false;
    pthread_mutex_lock(&rec->lock);
    free(rec->file);
    rec->file = rt_xstrdup(path);
    rec->since_unix_ms = ms_unix_ms();
    rec->error[0] = '\0';
    memset(&rec->st, 0, sizeof(rec->st));
    pthread_mutex_unlock(&rec->lock);
    ms__publish(rec);
    rt_log(RT_LOG_INFO, "trace: recording into %s", path);
    return 0;
}

/* ---- the map ---- */

static uint64_t ms__fp_mix(uint64_t h, const void *p, size_t n)
{
    const uint8_t *b = p;
    for (size_t i = 0; i < n; i++) {
        h = (h ^ b[i]) * 1099511628211ull;
    }
    return h;
}

static uint64_t ms__fp_u64(uint64_t h, uint64_t v)
{
    return ms__fp_mix(h, &v, sizeof(v));
}

static uint64_t ms__fp_str(uint64_t h, const char *s)
{
    return ms__fp_mix(h, s ? s : "", s ? strlen(s) + 1 : 1);
}

/* Everything a TraceMap holds but the servers' pending count (which every
 * heartbeat records anyway). */
static uint64_t ms__map_fp(struct ms_trace_rec *rec)
{
    struct ms_catalog *cat = rec->cl->cat;
    uint64_t h = 1469598103934665603ull;
    h = ms__fp_u64(h, ms_catalog_map_version(cat));
    for (size_t i = 0; i < ms_catalog_nranges(cat); i++) {
        const struct ms_range *r = ms_catalog_range_at(cat, i);
        h = ms__fp_u64(h, r->id);
        h = ms__fp_u64(h, r->server_id);
        h = ms__fp_u64(h, r->epoch);
        h = ms__fp_u64(h, r->rf);
        h = ms__fp_str(h, r->low);
        h = ms__fp_str(h, r->high_inf ? NULL : r->high);
        for (size_t k = 0; k < r->nreplicas; k++) {
            h = ms__fp_u64(h, r->replicas[k].server_id);
        }
        h = ms__fp_u64(h, r->nisr);
        for (size_t k = 0; k < r->nisr; k++) {
            h = ms__fp_u64(h, r->isr[k]);
        }
    }
    for (size_t i = 0; i < ms_catalog_nservers(cat); i++) {
        const struct ms_server_rec *s = ms_catalog_server_at(cat, i);
        const struct ms_server *rs = ms_cluster_server_find(rec->cl, s->id);
        h = ms__fp_u64(h, s->id);
        h = ms__fp_u64(h, ms_cluster_server_usable(rec->cl, s->id));
        h = ms__fp_u64(h, s->draining);
        h = ms__fp_str(h, s->zone);
        h = ms__fp_str(h, s->addr);
        h = ms__fp_u64(h, rs ? rs->max_server_eps : 0);
        h = ms__fp_u64(h, rs ? rs->max_range_eps : 0);
    }
    return h;
}

/* The birth and last split of @r's range, as time before the snapshot
 * taken at @now. A snapshot is written lazily, at the first record after
 * the change, so its own time can be a tick after the birth: a replay
 * that took it for the birth would count the split cool-down from there
 * and split a tick late. */
static void ms__range_times(struct ms_trace_rec *rec,
                            Rt__TraceRange *r,
                            uint64_t now)
{
    uint64_t born, split;
    if (!rec->info.range_times ||
        !rec->info.range_times(rec->info.range_times_arg, r->id, &born,
                               &split)) {
        return;
    }
    r->times = true;
    r->born_ago_ms = now > born ? now - born : 0;
    r->never_split = split == 0;
    r->split_ago_ms = split && now > split ? now - split : 0;
}

static int ms__map_write(struct ms_trace_rec *rec,
                         const char *cause,
                         uint64_t fp,
                         char *em)
{
    struct ms_catalog *cat = rec->cl->cat;
    size_t ns = ms_catalog_nservers(cat), nr = ms_catalog_nranges(cat);
    Rt__TraceServer *sv = rt_xcalloc(ns ? ns : 1, sizeof(*sv));
    Rt__TraceServer **svp = rt_xcalloc(ns ? ns : 1, sizeof(*svp));
    Rt__TraceRange *rv = rt_xcalloc(nr ? nr : 1, sizeof(*rv));
    Rt__TraceRange **rvp = rt_xcalloc(nr ? nr : 1, sizeof(*rvp));
    uint64_t *reps = rt_xcalloc(nr ? nr * MS_REPLICAS_MAX : 1, sizeof(*reps));
    Rt__TraceMap m = RT__TRACE_MAP__INIT;
    Rt__TraceRecord r = RT__TRACE_RECORD__INIT;
    uint64_t now = rt_time_mono_ms();
    int rc;

    for (size_t i = 0; i < ns; i++) {
        const struct ms_server_rec *s = ms_catalog_server_at(cat, i);
        const struct ms_server *rs = ms_cluster_server_find(rec->cl, s->id);
        rt__trace_server__init(&sv[i]);
        sv[i].id = s->id;
        sv[i].zone = s->zone ? s->zone : "";
        sv[i].addr = s->addr ? s->addr : "";
        sv[i].max_server_eps = rs ? rs->max_server_eps : 0;
        sv[i].max_range_eps = rs ? rs->max_range_eps : 0;
        sv[i].up = ms_cluster_server_usable(rec->cl, s->id);
        sv[i].draining = s->draining;
        sv[i].pending = rs ? rs->pending : 0;
        svp[i] = &sv[i];
    }
    for (size_t i = 0; i < nr; i++) {
        const struct ms_range *x = ms_catalog_range_at(cat, i);
        const struct ms_table *t = ms_catalog_table_by_id(cat, x->table_id);
        uint64_t *ids = reps + i * MS_REPLICAS_MAX;
        rt__trace_range__init(&rv[i]);
        rv[i].id = x->id;
        rv[i].table_id = x->table_id;
        rv[i].table = t && t->name ? t->name : "";
        rv[i].low = x->low;
        rv[i].high = x->high_inf ? "" : x->high;
        rv[i].high_inf = x->high_inf;
        rv[i].server_id = x->server_id;
        rv[i].epoch = x->epoch;
        rv[i].rf = x->rf;
        for (size_t k = 0; k < x->nreplicas; k++) {
            ids[k] = x->replicas[k].server_id;
        }
        rv[i].replicas = ids;
        rv[i].n_replicas = x->nreplicas;
        rv[i].isr = (uint64_t *)x->isr;
        rv[i].n_isr = x->nisr;
        ms__range_times(rec, &rv[i], now);
        rvp[i] = &rv[i];
    }
    m.map_version = ms_catalog_map_version(cat);
    m.servers = svp;
    m.n_servers = ns;
    m.ranges = rvp;
    m.n_ranges = nr;
    m.cause = (char *)cause;
    r.r_case = RT__TRACE_RECORD__R_MAP;
    r.map = &m;
    rc = ms_trace_writer_record(rec->w, now, &r, em);
    if (rc == 0) {
        rec->map_fp = fp;
    }
    free(reps);
    free(rvp);
    free(rv);
    free(svp);
    free(sv);
    return rc;
}

/* True when records may be written now; writes a map snapshot first when
 * the map changed since the last one. A failure stops the trace. */
static bool ms__ready(struct ms_trace_rec *rec)
{
    char em[RT_ERRMSG_SIZE];
    uint64_t fp;
    if (!rec || !rec->w || !rec->attached || !rec->in_segment) {
        return false;
    }
    fp = ms__map_fp(rec);
    if (fp != rec->map_fp && ms__map_write(rec, "change", fp, em) != 0) {
        ms__fail(rec, em);
        return false;
    }
    return true;
}

static void ms__put(struct ms_trace_rec *rec, Rt__TraceRecord *r)
{
    char em[RT_ERRMSG_SIZE];
    if (ms_trace_writer_record(rec->w, rt_time_mono_ms(), r, em) != 0) {
        ms__fail(rec, em);
    }
}

/* ---- segments ---- */

static void ms__event_sink(void *arg,
                           uint64_t seq,
                           const char *kind,
                           const char *json)
{
    struct ms_trace_rec *rec = arg;
    Rt__TraceEvent e = RT__TRACE_EVENT__INIT;
    Rt__TraceRecord r = RT__TRACE_RECORD__INIT;
    if (!ms__ready(rec)) {
        return;
    }
    e.seq = seq;
    e.kind = (char *)kind;
    e.json = (char *)json;
    r.r_case = RT__TRACE_RECORD__R_EVENT;
    r.event = &e;
    ms__put(rec, &r);
}

static void ms__segment(struct ms_trace_rec *rec, const char *reason)
{
    Rt__TraceHeader h = RT__TRACE_HEADER__INIT;
    Rt__TracePolicyConfig pc = RT__TRACE_POLICY_CONFIG__INIT;
    const struct ms_policy_config *c = &rec->policy_cfg;
    char em[RT_ERRMSG_SIZE];
    uint64_t now = rt_time_mono_ms();

    pc.split_eps = c->split_eps;
    pc.split_busy_pct = c->split_busy_pct;
    pc.split_sustain_ms = c->split_sustain_ms;
    pc.split_cooldown_ms = c->split_cooldown_ms;
    pc.split_max_ranges = c->split_max_ranges;
    pc.hot_exit_pct = c->hot_exit_pct;
    pc.move_tolerance_pct = c->move_tolerance_pct;
    pc.move_min_eps = c->move_min_eps;
    pc.move_gain_pct = c->move_gain_pct;
    pc.move_cooldown_ms = c->move_cooldown_ms;
    pc.server_cooldown_ms = c->server_cooldown_ms;
    pc.max_moves = c->max_moves;
    pc.merge_eps = c->merge_eps;
    pc.merge_sustain_ms = c->merge_sustain_ms;
    pc.merge_max_bytes = c->merge_max_bytes;
    pc.merge_after_split_ms = c->merge_after_split_ms;
    h.start_unix_ms = ms_unix_ms();
    h.master_id = rec->info.master_id;
    h.raft_term = rec->info.raft_term;
    h.policy = rec->policy;
    h.policy_config = &pc;
    h.tick_ms = rec->info.tick_ms;
    h.load_tau_ms = rec->info.load_tau_ms;
    h.rf = rec->info.rf;
    h.min_insync = rec->info.min_insync;
    h.reason = (char *)reason;
    if (ms_trace_writer_segment(rec->w, now, &h, em) != 0 ||
        ms__map_write(rec, "start", ms__map_fp(rec), em) != 0) {
        ms__fail(rec, em);
        return;
    }
    rec->in_segment = true;
    rec->ticks = 0;
    rec->next_decision = 1;
    rec->flush_ms = now;
    ms_events_set_sink(rec->events, ms__event_sink, rec);
    ms__publish(rec);
}

/* ---- lifetime ---- */

/* Renames an existing @path to the first free @path.N. */
static int ms__rotate(const char *path, char *em)
{
    struct stat sb;
    char *dst;
    size_t n = strlen(path) + 24;
    if (stat(path, &sb) != 0) {
        return 0;
    }
    dst = rt_xmalloc(n);
    for (unsigned i = 1;; i++) {
        snprintf(dst, n, "%s.%u", path, i);
        if (stat(dst, &sb) != 0) {
            break;
        }
    }
    if (rename(path, dst) != 0) {
        rt_errmsg_printf(em, "trace: rename %s to %s: %s", path, dst,
                         strerror(errno));
        free(dst);
        return RT_EIO;
    }
    rt_log(RT_LOG_INFO, "trace: the older %s is now %s", path, dst);
    free(dst);
    return 0;
}

int ms_trace_rec_create(const char *data_dir,
                        const char *path,
                        struct ms_trace_rec **out,
                        char *errmsg)
{
    struct ms_trace_rec *rec = rt_xcalloc(1, sizeof(*rec));
    rec->data_dir = rt_xstrdup(data_dir ? data_dir : ".");
    pthread_mutex_init(&rec->lock, NULL);
    rec->policy = rt_xstrdup("default");
    if (path && *path) {
        /* The file is made when this member first leads (a follower that
         * never leads leaves none); a directory it cannot write into
         * fails the start now rather than then. */
        char *dir = rt_xstrdup(path), *slash = strrchr(dir, '/');
        const char *d = slash ? (slash == dir ? "/" : dir) : ".";
        if (slash && slash != dir) {
            *slash = '\0';
        }
        if (access(d, W_OK | X_OK) != 0) {
            rt_errmsg_printf(errmsg, "trace %s: directory %s: %s", path, d,
                             strerror(errno));
            free(dir);
            ms_trace_rec_destroy(rec);
            return RT_EIO;
        }
        free(dir);
        rec->flag_path = rt_xstrdup(path);
        rec->from_flag = true;
    }
    *out = rec;
    return 0;
}

void ms_trace_rec_destroy(struct ms_trace_rec *rec)
{
    char em[RT_ERRMSG_SIZE];
    if (!rec) {
        return;
    }
    if (ms__close(rec, "shutdown", em) != 0) {
        rt_log(RT_LOG_WARN, "trace: %s", em);
    }
    pthread_mutex_destroy(&rec->lock);
    free(rec->file);
    free(rec->path);
    free(rec->flag_path);
    free(rec->policy);
    free(rec->data_dir);
    free(rec);
}

void ms_trace_rec_attach(struct ms_trace_rec *rec,
                         struct ms_cluster *cl,
                         struct ms_events *events,
                         const struct ms_trace_rec_info *info)
{
    rec->cl = cl;
    rec->events = events;
    rec->info = *info;
    if (info->policy_cfg) {
        rec->policy_cfg = *info->policy_cfg;
    } else {
        ms_policy_config_default(&rec->policy_cfg);
    }
    free(rec->policy);
    rec->policy = rt_xstrdup(info->policy ? info->policy : "default");
    rec->info.policy = rec->policy;
    rec->info.policy_cfg = &rec->policy_cfg;
    rec->attached = true;
    if (rec->flag_path) {
        /* --trace: an older file (a restart, a re-execution) is kept as
         * FILE.N; this process's segments go to a fresh FILE. */
        char em[RT_ERRMSG_SIZE];
        char *path = rec->flag_path;
        rec->flag_path = NULL;
        if (ms__rotate(path, em) != 0 || ms__open(rec, path, em) != 0) {
            rt_log(RT_LOG_ERROR, "trace %s not recorded: %s", path, em);
            pthread_mutex_lock(&rec->lock);
            snprintf(rec->error, sizeof(rec->error), "%s", em);
            pthread_mutex_unlock(&rec->lock);
        }
        free(path);
    }
    if (rec->w) {
        ms__segment(rec, rec->from_flag ? "start" : "leader");
        rec->from_flag = false;
    }
}

void ms_trace_rec_detach(struct ms_trace_rec *rec)
{
    char em[RT_ERRMSG_SIZE];
    if (!rec || !rec->attached) {
        return;
    }
    if (rec->events) {
        ms_events_set_sink(rec->events, NULL, NULL);
    }
    if (rec->w && ms_trace_writer_flush(rec->w, em) != 0) {
        ms__fail(rec, em);
    }
    ms__publish(rec);
    rec->attached = false;
    rec->in_segment = false;
    rec->cl = NULL;
    rec->events = NULL;
}

void ms_trace_rec_tick(struct ms_trace_rec *rec)
{
    char em[RT_ERRMSG_SIZE];
    uint64_t now = rt_time_mono_ms();
    if (!rec || !rec->w || now - rec->flush_ms < MS_TRACE_FLUSH_MS) {
        return;
    }
    rec->flush_ms = now;
    if (ms_trace_writer_flush(rec->w, em) != 0) {
        ms__fail(rec, em);
        return;
    }
    ms__publish(rec);
}

/* ---- hooks ---- */

void ms_trace_rec_heartbeat(struct ms_trace_rec *rec,
                            const Rt__HeartbeatReq *req,
                            const bool *ignored)
{
    char em[RT_ERRMSG_SIZE];
    if (!ms__ready(rec)) {
        return;
    }
    if (ms_trace_writer_heartbeat(rec->w, rt_time_mono_ms(), req, ignored,
                                  em) != 0) {
        ms__fail(rec, em);
    }
}

void ms_trace_rec_policy_call(struct ms_trace_rec *rec,
                              uint64_t now_ms,
                              size_t n)
{
    Rt__TraceTick t = RT__TRACE_TICK__INIT;
    Rt__TraceRecord r = RT__TRACE_RECORD__INIT;
    char em[RT_ERRMSG_SIZE];
    if (!ms__ready(rec)) {
        return;
    }
    t.n = ++rec->ticks;
    t.ndecisions = (uint32_t)n;
    r.r_case = RT__TRACE_RECORD__R_TICK;
    r.tick = &t;
    /* The view's time, so a replay asks its policy at the same instant. */
    if (ms_trace_writer_record(rec->w, now_ms, &r, em) != 0) {
        ms__fail(rec, em);
    }
}

uint64_t ms_trace_rec_decision(struct ms_trace_rec *rec,
                               const struct ms_decision *d,
                               const char *origin,
                               bool started,
                               const char *error)
{
    Rt__TraceDecision x = RT__TRACE_DECISION__INIT;
    Rt__TraceRecord r = RT__TRACE_RECORD__INIT;
    if (!ms__ready(rec)) {
        return 0;
    }
    x.id = rec->next_decision++;
    x.kind = (char *)ms_decision_kind_name(d->kind);
    x.origin = (char *)(origin ? origin : "policy");
    x.range_id = d->range_id;
    x.range_id2 = d->range_id2;
    x.server_id = d->server_id;
    x.src_id = d->src_id;
    x.key = d->key ? d->key : "";
    x.reason = (char *)d->reason;
    x.load = d->load;
    x.load2 = d->load2;
    x.threshold = d->threshold;
    x.src_load = d->src_load;
    x.dst_load = d->dst_load;
    x.mean_load = d->mean_load;
    x.share = d->share;
    x.started = started;
    x.error = (char *)(error ? error : "");
    r.r_case = RT__TRACE_RECORD__R_DECISION;
    r.decision = &x;
    ms__put(rec, &r);
    return rec->w ? x.id : 0;
}

void ms_trace_rec_outcome(struct ms_trace_rec *rec,
                          uint64_t decision_id,
                          const char *kind,
                          const char *outcome,
                          const char *error,
                          const uint64_t *new_ranges,
                          size_t nnew,
                          uint64_t born_ms)
{
    Rt__TraceOutcome o = RT__TRACE_OUTCOME__INIT;
    Rt__TraceRecord r = RT__TRACE_RECORD__INIT;
    if (!ms__ready(rec)) {
        return;
    }
    /* One outcome per decision: an order refused after its operation
     * began (a catalog failure) has had its "failed" one already. */
    if (decision_id && decision_id == rec->last_outcome) {
        return;
    }
    rec->last_outcome = decision_id;
    o.decision_id = decision_id;
    o.kind = (char *)kind;
    o.outcome = (char *)outcome;
    o.error = (char *)(error ? error : "");
    o.new_ranges = (uint64_t *)new_ranges;
    o.n_new_ranges = nnew;
    o.born_ms = born_ms ? ms_trace_writer_rel(rec->w, born_ms) : 0;
    r.r_case = RT__TRACE_RECORD__R_OUTCOME;
    r.outcome = &o;
    ms__put(rec, &r);
}

/* ---- operator control ---- */

static bool ms__name_ok(const char *name)
{
    size_t n = strlen(name);
    if (n == 0 || n > 64 || name[0] == '.') {
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        char c = name[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
              (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-')) {
            return false;
        }
    }
    return true;
}

int ms_trace_rec_start(struct ms_trace_rec *rec, const char *name, char *errmsg)
{
    char gen[64], *dir, *path;
    struct stat sb;
    size_t n;
    int rc;

    if (rec->w) {
        rt_errmsg_printf(errmsg, "a trace is being recorded already (%s)",
                         rec->path);
        return RT_EEXIST;
    }
    if (!name || !*name) {
        time_t t = (time_t)(ms_unix_ms() / 1000);
        struct tm tm;
        gmtime_r(&t, &tm);
        strftime(gen, sizeof(gen), "trace-%Y%m%d-%H%M%S", &tm);
        name = gen;
    }
    if (!ms__name_ok(name)) {
        rt_errmsg_printf(errmsg,
                         "bad trace name: use 1 to 64 of A-Z a-z 0-9 . _ - "
                         "(not starting with '.')");
        return RT_EINVAL;
    }
    n = strlen(rec->data_dir) + strlen(name) + 32;
    dir = rt_xmalloc(n);
    path = rt_xmalloc(n);
    snprintf(dir, n, "%s/%s", rec->data_dir, MS_TRACE_DIR);
    snprintf(path, n, "%s/%s%s", dir, name, MS_TRACE_EXT);
    if (mkdir(dir, 0750) != 0 && errno != EEXIST) {
        rt_errmsg_printf(errmsg, "trace: mkdir %s: %s", dir, strerror(errno));
        rc = RT_EIO;
    } else if (stat(path, &sb) == 0) {
        rt_errmsg_printf(errmsg, "trace %s exists: choose another name", name);
        rc = RT_EEXIST;
    } else {
        rc = ms__open(rec, path, errmsg);
    }
    if (rc == 0 && rec->attached) {
        ms__segment(rec, "rtctl");
        if (!rec->w) {
            pthread_mutex_lock(&rec->lock);
            rt_errmsg_printf(errmsg, "%s", rec->error);
            pthread_mutex_unlock(&rec->lock);
            rc = RT_EIO;
        }
    }
    free(path);
    free(dir);
    return rc;
}

void ms_trace_rec_end(struct ms_trace_rec *rec, const char *reason)
{
    char em[RT_ERRMSG_SIZE];
    if (!rec || !rec->w) {
        return;
    }
    if (rec->events) {
        ms_events_set_sink(rec->events, NULL, NULL);
    }
    if (ms__close(rec, reason, em) != 0) {
        rt_log(RT_LOG_WARN, "trace: %s", em);
    }
}

int ms_trace_rec_stop(struct ms_trace_rec *rec, char *errmsg)
{
    if (!rec->w) {
        rt_errmsg_printf(errmsg, "no trace is being recorded");
        return RT_ENOTFOUND;
    }
    if (rec->events) {
        ms_events_set_sink(rec->events, NULL, NULL);
    }
    return ms__close(rec, "stop", errmsg);
}

/* ---- observation ---- */

char *ms_trace_rec_status_json(struct ms_trace_rec *rec)
{
    json_t *o = json_object();
    char *text;
    pthread_mutex_lock(&rec->lock);
    json_object_set_new(o, "recording", json_boolean(rec->recording));
    json_object_set_new(o, "file",
                        rec->file ? json_string(rec->file) : json_null());
    json_object_set_new(o, "bytes",
                        json_integer((json_int_t)rec->st.file_bytes));
    json_object_set_new(o, "records",
                        json_integer((json_int_t)rec->st.records));
    json_object_set_new(o, "segments",
                        json_integer((json_int_t)rec->st.segments));
    if (rec->since_unix_ms) {
        char iso[40];
        time_t t = (time_t)(rec->since_unix_ms / 1000);
        struct tm tm;
        gmtime_r(&t, &tm);
        strftime(iso, sizeof(iso), "%Y-%m-%dT%H:%M:%SZ", &tm);
        json_object_set_new(o, "since",
                            json_integer((json_int_t)rec->since_unix_ms));
        json_object_set_new(o, "since_time", json_string(iso));
    } else {
        json_object_set_new(o, "since", json_null());
    }
    json_object_set_new(o, "error",
                        rec->error[0] ? json_string(rec->error) : json_null());
    pthread_mutex_unlock(&rec->lock);
    text = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(o);
    return text ? text : rt_xstrdup("{}");
}

void ms_trace_rec_metrics(struct ms_trace_rec *rec, struct rt_buf *b)
{
    uint64_t bytes, records;
    pthread_mutex_lock(&rec->lock);
    bytes = rec->bytes_total;
    records = rec->records_total;
    pthread_mutex_unlock(&rec->lock);
    rt_metrics_help(b, "rt_master_trace_bytes_total", "counter",
                    "Compressed bytes of load traces handed to their files "
                    "(written at least every second)");
    rt_buf_printf(b, "rt_master_trace_bytes_total %" PRIu64 "\n", bytes);
    rt_metrics_help(b, "rt_master_trace_records_total", "counter",
                    "Load trace records written");
    rt_buf_printf(b, "rt_master_trace_records_total %" PRIu64 "\n", records);
}
