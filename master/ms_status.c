/* Status snapshot: the lock-protected documents and their builder. */
#include "ms_status.h"

#include <inttypes.h>
#include <jansson.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "ms_internal.h"
#include "rt_buf.h"
#include "rt_err.h"
#include "rt_log.h"

struct ms_status
{
    pthread_mutex_t lock;
    char *docs[MS_STATUS__NR]; /* guarded by lock */
};

struct ms_status *ms_status_create(void)
{
    struct ms_status *st = ms_xcalloc(1, sizeof(*st));
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

char *ms_status_copy(struct ms_status *st, enum ms_status_doc doc)
{
    char *copy = NULL;
    RT_PRE((int)doc >= 0 && doc < MS_STATUS__NR);
    pthread_mutex_lock(&st->lock);
    if (st->docs[doc]) {
        copy = ms_xstrdup(st->docs[doc]);
    }
    pthread_mutex_unlock(&st->lock);
    return copy;
}

/* ---- builder (loop thread) ---- */

static json_t *ms__json_u64(uint64_t v)
{
    return json_integer((json_int_t)v);
}

/* Keys come from clients as UTF-8; should one hold an invalid byte, show
 * it as '?' rather than losing the whole document. */
static json_t *ms__json_key(const char *s)
{
    json_t *j = json_string(s);
    if (!j) {
        char *copy = ms_xstrdup(s);
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

static char *ms__build_json(struct ms_master *m,
                            const size_t *counts,
                            uint64_t now)
{
    json_t *root = json_object();
    json_t *servers = json_array();
    json_t *ranges = json_array();
    json_t *tables = json_array();
    char *out;

    for (size_t i = 0; i < m->servers.n; i++) {
        const struct ms_server *s = m->servers.v[i];
        const struct ms_server_rec *rec = ms_catalog_server_find(m->cat, s->id);
        json_t *o = json_object();
        json_object_set_new(o, "id", ms__json_u64(s->id));
        json_object_set_new(o, "addr", json_string(rec ? rec->addr : ""));
        json_object_set_new(
            o, "state", json_string(s->state == MS_SERVER_UP ? "up" : "down"));
        json_object_set_new(o, "ranges", ms__json_u64(counts[i]));
        /* null: not heard from since this master started. */
        json_object_set_new(
            o, "last_heartbeat_ms_ago",
            s->seen ? ms__json_u64(now - s->last_hb_ms) : json_null());
        json_array_append_new(servers, o);
    }
    for (size_t i = 0; i < ms_catalog_nranges(m->cat); i++) {
        const struct ms_range *r = ms_catalog_range_at(m->cat, i);
        const struct ms_table *t = ms_catalog_table_by_id(m->cat, r->table_id);
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
        json_array_append_new(ranges, o);
    }
    for (size_t i = 0; i < ms_catalog_ntables(m->cat); i++) {
        const struct ms_table *t = ms_catalog_table_at(m->cat, i);
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
                        ms__json_u64(ms_catalog_map_version(m->cat)));
    out = json_dumps(root, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(root);
    if (!out) {
        rt_log(RT_LOG_ERROR, "status: cannot encode JSON");
        out = ms_xstrdup("{}");
    }
    return out;
}

static void ms__metric(struct rt_buf *b,
                       const char *name,
                       const char *type,
                       const char *help)
{
    rt_buf_printf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static char *ms__build_metrics(struct ms_master *m)
{
    struct rt_buf b = RT_BUF_INIT;
    size_t up = 0, down = 0, len;
    char *out;
    for (size_t i = 0; i < m->servers.n; i++) {
        if (((struct ms_server *)m->servers.v[i])->state == MS_SERVER_UP) {
            up++;
        } else {
            down++;
        }
    }
    ms__metric(&b, "rt_master_servers", "gauge",
               "Partition servers known to the master, by state.");
    rt_buf_printf(&b, "rt_master_servers{state=\"up\"} %zu\n", up);
    rt_buf_printf(&b, "rt_master_servers{state=\"down\"} %zu\n", down);
    ms__metric(&b, "rt_master_ranges", "gauge", "Ranges in the partition map.");
    rt_buf_printf(&b, "rt_master_ranges %zu\n", ms_catalog_nranges(m->cat));
    ms__metric(&b, "rt_master_tables", "gauge",
               "Tables in the catalog (all accounts).");
    rt_buf_printf(&b, "rt_master_tables %zu\n", ms_catalog_ntables(m->cat));
    ms__metric(&b, "rt_master_map_version", "gauge",
               "Version of the partition map.");
    rt_buf_printf(&b, "rt_master_map_version %" PRIu64 "\n",
                  ms_catalog_map_version(m->cat));
    ms__metric(&b, "rt_master_fe_subscribers", "gauge",
               "Front-end connections subscribed to map updates.");
    rt_buf_printf(&b, "rt_master_fe_subscribers %zu\n", m->subscribers.n);
    ms__metric(&b, "rt_master_rpc_requests_total", "counter",
               "RPC requests received by the master.");
    rt_buf_printf(&b, "rt_master_rpc_requests_total %" PRIu64 "\n",
                  m->rpc_requests);
    ms__metric(&b, "rt_master_map_pushes_total", "counter",
               "MAP_UPDATE broadcasts to front ends.");
    rt_buf_printf(&b, "rt_master_map_pushes_total %" PRIu64 "\n",
                  m->map_pushes);
    rt_buf_cstr(&b);
    out = (char *)rt_buf_steal(&b, &len);
    return out;
}

void ms_status_build(struct ms_master *m, char **json, char **metrics)
{
    size_t *counts =
        ms_xcalloc(m->servers.n ? m->servers.n : 1, sizeof(*counts));
    ms__range_counts(m, counts);
    *json = ms__build_json(m, counts, ms_now_ms());
    *metrics = ms__build_metrics(m);
    free(counts);
}
