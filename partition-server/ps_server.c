/* Server wiring: start-up order, shutdown order, metrics. The modules
 * below it (ps_rpc, ps_master, ps_move, ps_jobs, ps_repl) never call back
 * up here:
 * the server hands the master link its request dispatcher.
 *
 * Start: store -> meta (server id, ranges, master term) -> writer ->
 * resume unfinished drops -> replication glue (ps_repl_start) -> split
 * freezes (ps_split_start) -> span drops and frozen ranges
 * (ps_move_start) -> metrics HTTP -> RPC listener -> port file -> master
 * link. Any failure leaves a partly started server that
 * ps_server_stop() takes down.
 * Stop: moves in flight end (ps_move_stop), then the writer (it finishes
 * queued writes; their replies go out while connections are still open),
 * then split freezes still waiting (answered busy), replication (writes
 * still waiting for acks are answered, outcome unknown), the master link, the
 * listener and the metrics listener. */
#include "ps_server.h"
#include "ps_learn.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>

#include "ps_fence.h"
#include "ps_http.h"
#include "ps_jobs.h"
#include "ps_learn.h"
#include "ps_master.h"
#include "ps_move.h"
#include "ps_repair.h"
#include "ps_repl.h"
#include "ps_rpc.h"
#include "ps_split.h"
#include "ps_transfer.h"
#include "rt_addr.h"
#include "rt_alloc.h"
#include "rt_config.h"
#include "rt_err.h"
#include "rt_log.h"
#include "rt_metrics.h"

/* Metrics: a Prometheus text page rebuilt every second on the loop and
 * published under metrics_mu for the HTTP thread (ps_http.h). */

#define PS_METRICS_MS 1000

/* Entity RPC latency by method and group commit latency (the shared
 * buckets of common/rt_metrics.h). */
static void ps__metrics_latency(struct ps_server *ps,
                                const struct ps_writer_stats *ws,
                                struct rt_buf *b)
{
    static const char *const methods[PS_RPC_LAT__NR] = {
        [PS_RPC_LAT_WRITE] = "ENTITY_WRITE",
        [PS_RPC_LAT_GET] = "ENTITY_GET",
        [PS_RPC_LAT_SCAN] = "ENTITY_SCAN",
    };
    struct rt_hist_sum s;

    rt_metrics_help(b, "rt_ps_rpc_duration_seconds", "histogram",
                    "Entity RPCs admitted, from arrival to reply (a write "
                    "includes its group commit and its replicas' acks).");
    for (int m = 0; m < PS_RPC_LAT__NR; m++) {
        char l[32];
        memset(&s, 0, sizeof(s));
        rt_hist_add_to(&ps->rpc_lat[m], &s);
        snprintf(l, sizeof(l), "method=\"%s\"", methods[m]);
        rt_metrics_hist(b, "rt_ps_rpc_duration_seconds", l, &s);
    }
    memset(&s, 0, sizeof(s));
    for (unsigned i = 0; i <= RT_HIST_NB; i++) {
        s.b[i] = ws->lat[i];
    }
    s.sum_us = ws->group_us;
    rt_metrics_help(b, "rt_ps_group_commit_duration_seconds", "histogram",
                    "LMDB group commits holding writes (fsync included).");
    rt_metrics_hist(b, "rt_ps_group_commit_duration_seconds", NULL, &s);
}

/* The data directory's file system and the LMDB file in it: what an
 * operator alerts on before writes fail with RT_ENOSPACE. */
static void ps__metrics_disk(struct ps_server *ps, struct rt_buf *b)
{
    struct statvfs fs;
    struct stat st;
    char path[PATH_MAX];

    if (ps->cfg.data && statvfs(ps->cfg.data, &fs) == 0) {
        rt_metrics_help(b, "rt_ps_disk_free_bytes", "gauge",
                        "Bytes available to this server on the file system "
                        "of its data directory.");
        rt_buf_printf(
            b, "rt_ps_disk_free_bytes %llu\n",
            (unsigned long long)fs.f_bavail * (unsigned long long)fs.f_frsize);
        rt_metrics_help(b, "rt_ps_disk_size_bytes", "gauge",
                        "Size of that file system.");
        rt_buf_printf(
            b, "rt_ps_disk_size_bytes %llu\n",
            (unsigned long long)fs.f_blocks * (unsigned long long)fs.f_frsize);
    }
    snprintf(path, sizeof(path), "%s/data.mdb",
             ps->cfg.data ? ps->cfg.data : ".");
    rt_metrics_help(b, "rt_ps_store_file_bytes", "gauge",
                    "Size of the LMDB data file (it grows, never shrinks).");
    rt_buf_printf(b, "rt_ps_store_file_bytes %llu\n",
                  stat(path, &st) == 0 ? (unsigned long long)st.st_size : 0ULL);
    rt_metrics_help(b, "rt_ps_store_map_bytes", "gauge",
                    "LMDB map size (--map-size-mb): the most the data file "
                    "can hold.");
    rt_buf_printf(b, "rt_ps_store_map_bytes %llu\n",
                  (unsigned long long)ps->cfg.map_size);
}

static void ps__metrics_build(struct ps_server *ps, struct rt_buf *b)
{
    struct ps_writer_stats ws;

    memset(&ws, 0, sizeof(ws));
    if (ps->writer) {
        ps_writer_stats(ps->writer, &ws);
    }
    rt_buf_printf(b,
                  "# HELP rt_ps_info Partition server identity.\n"
                  "# TYPE rt_ps_info gauge\n"
                  "rt_ps_info{server_id=\"%llu\",addr=\"%s\"} 1\n"
                  "# HELP rt_ps_registered 1 while registered with the "
                  "master.\n# TYPE rt_ps_registered gauge\n"
                  "rt_ps_registered %d\n"
                  "# HELP rt_ps_ranges Ranges served.\n"
                  "# TYPE rt_ps_ranges gauge\nrt_ps_ranges %zu\n"
                  "# HELP rt_ps_pending_ops Write ops queued for the "
                  "writer.\n# TYPE rt_ps_pending_ops gauge\n"
                  "rt_ps_pending_ops %zu\n"
                  "# HELP rt_ps_max_server_eps Entities/s cap of the "
                  "server (0 = none).\n# TYPE rt_ps_max_server_eps gauge\n"
                  "rt_ps_max_server_eps %llu\n"
                  "# HELP rt_ps_max_range_eps Entities/s cap per range "
                  "(0 = none).\n# TYPE rt_ps_max_range_eps gauge\n"
                  "rt_ps_max_range_eps %llu\n"
                  "# HELP rt_ps_throttled_total Requests refused with "
                  "ServerBusy for load.\n"
                  "# TYPE rt_ps_throttled_total counter\n"
                  "rt_ps_throttled_total %llu\n",
                  (unsigned long long)ps->server_id, ps->addr, ps->registered,
                  ps->ranges.n,
                  ps->writer ? ps_writer_pending(ps->writer) : (size_t)0,
                  (unsigned long long)ps->cfg.max_server_eps,
                  (unsigned long long)ps->cfg.max_range_eps,
                  (unsigned long long)ps->throttled_total);

    static const struct
    {
        const char *name, *type, *help;
    } rm[] = {
        {"rt_ps_range_requests_total", "counter", "Requests served."},
        {"rt_ps_range_entities_total", "counter",
         "Entities written or returned."},
        {"rt_ps_range_bytes_written_total", "counter",
         "Key and value bytes written."},
        {"rt_ps_range_throttled_total", "counter",
         "Requests refused with ServerBusy for load."},
        {"rt_ps_range_keys", "gauge", "Entities stored."},
        {"rt_ps_range_key_bytes", "gauge", "Key and value bytes stored."},
        {"rt_ps_range_frozen", "gauge", "1 while frozen for a move."},
        {"rt_ps_range_epoch", "gauge", "Epoch served."},
    };
    for (size_t m = 0; m < sizeof(rm) / sizeof(rm[0]); m++) {
        rt_buf_printf(b, "# HELP %s %s\n# TYPE %s %s\n", rm[m].name, rm[m].help,
                      rm[m].name, rm[m].type);
        for (size_t i = 0; i < ps->ranges.n; i++) {
            const struct ps_range *r = ps->ranges.v[i];
            uint64_t v = 0;
            switch (m) {
                case 0:
                    v = r->tot_requests;
                    break;
                case 1:
                    v = r->tot_entities;
                    break;
                case 2:
                    v = r->tot_bytes;
                    break;
                case 3:
                    v = r->tot_throttled;
                    break;
                case 4:
                    v = r->key_count;
                    break;
                case 5:
                    v = r->key_bytes;
                    break;
                case 6:
                    v = (uint64_t)r->frozen;
                    break;
                default:
                    v = r->epoch;
                    break;
            }
            rt_buf_printf(b, "%s{range=\"%llu\",table=\"%llu\"} %llu\n",
                          rm[m].name, (unsigned long long)r->id,
                          (unsigned long long)r->table_id,
                          (unsigned long long)v);
        }
    }

    rt_buf_printf(b,
                  "# HELP rt_ps_group_commits_total Group commits holding "
                  "writes.\n# TYPE rt_ps_group_commits_total counter\n"
                  "rt_ps_group_commits_total %llu\n"
                  "# HELP rt_ps_group_commit_seconds_total Time spent in "
                  "them.\n# TYPE rt_ps_group_commit_seconds_total counter\n"
                  "rt_ps_group_commit_seconds_total %.6f\n"
                  "# HELP rt_ps_group_waits_total Group commits the writer "
                  "delayed for more writes (--group-wait-us).\n"
                  "# TYPE rt_ps_group_waits_total counter\n"
                  "rt_ps_group_waits_total %llu\n"
                  "# HELP rt_ps_group_wait_seconds_total Time spent in "
                  "those delays.\n"
                  "# TYPE rt_ps_group_wait_seconds_total counter\n"
                  "rt_ps_group_wait_seconds_total %.6f\n"
                  "# HELP rt_ps_group_waits_unpaid_total Delays that "
                  "gathered writes slower than the group before committed "
                  "them (the next waits back off).\n"
                  "# TYPE rt_ps_group_waits_unpaid_total counter\n"
                  "rt_ps_group_waits_unpaid_total %llu\n"
                  "# HELP rt_ps_group_commit_size Ops per group commit.\n"
                  "# TYPE rt_ps_group_commit_size histogram\n",
                  (unsigned long long)ws.groups, (double)ws.group_us / 1e6,
                  (unsigned long long)ws.waits, (double)ws.wait_us / 1e6,
                  (unsigned long long)ws.waits_unpaid);
    {
        /* Buckets of <= 1, 2, 4, ... ops, then the rest. */
        double le[PS_WRITER_HIST - 1];
        for (unsigned i = 0; i + 1 < PS_WRITER_HIST; i++) {
            le[i] = (double)(1u << i);
        }
        rt_metrics_hist_le(b, "rt_ps_group_commit_size", NULL, le,
                           PS_WRITER_HIST - 1, ws.hist, (double)ws.group_ops);
    }
    rt_buf_printf(b,
                  "# HELP rt_ps_migrated_in_records_total Records stored "
                  "for ranges moving in.\n"
                  "# TYPE rt_ps_migrated_in_records_total counter\n"
                  "rt_ps_migrated_in_records_total %llu\n"
                  "# HELP rt_ps_migration_log_records_total Writes logged "
                  "for ranges moving out.\n"
                  "# TYPE rt_ps_migration_log_records_total counter\n"
                  "rt_ps_migration_log_records_total %llu\n",
                  (unsigned long long)ws.raw_kvs,
                  (unsigned long long)ws.captured);
    ps__metrics_latency(ps, &ws, b);
    ps__metrics_disk(ps, b);
    ps_move_metrics(ps, b);
    ps_repl_metrics(ps, b);
    ps_learn_metrics(ps, b);
    ps_repair_metrics(ps, b);
    ps_fence_metrics(ps, b);
    rt_rpc_metrics(b);
}

static void ps__metrics_publish(struct ps_server *ps)
{
    struct rt_buf b = RT_BUF_INIT;
    char *old;

    ps__metrics_build(ps, &b);
    rt_buf_cstr(&b);
    uv_mutex_lock(&ps->metrics_mu);
    old = ps->metrics_text;
    ps->metrics_text = (char *)b.data;
    uv_mutex_unlock(&ps->metrics_mu);
    free(old);
}

static void ps__metrics_timer_cb(uv_timer_t *t)
{
    struct ps_server *ps = container_of(t, struct ps_server, metrics_timer);
    if (!ps->stopping) {
        ps__metrics_publish(ps);
    }
}

static int ps__metrics_start(struct ps_server *ps)
{
    char errmsg[RT_ERRMSG_SIZE] = "";
    int rc;

    if (!ps->cfg.http || !*ps->cfg.http) {
        return 0;
    }
    if ((rc = uv_mutex_init(&ps->metrics_mu)) != 0) {
        snprintf(ps->errmsg, sizeof(ps->errmsg), "mutex: %s", uv_strerror(rc));
        return RT_EIO;
    }
    ps->metrics_mu_init = 1;
    ps__metrics_publish(ps);
    rc = ps_http_start(ps->cfg.http, &ps->metrics_mu, &ps->metrics_text,
                       &ps->http, &ps->http_port, errmsg);
    if (rc != 0) {
        ps->http = NULL;
        snprintf(ps->errmsg, sizeof(ps->errmsg), "%s", errmsg);
        return rc;
    }
    uv_timer_init(ps->loop, &ps->metrics_timer);
    ps->metrics_timer_init = 1;
    uv_timer_start(&ps->metrics_timer, ps__metrics_timer_cb, PS_METRICS_MS,
                   PS_METRICS_MS);
    return 0;
}

/* Start */

static int ps__load_meta(struct ps_server *ps)
{
    struct rt_buf blob = RT_BUF_INIT;
    int rc;

    rc = ps_store_meta_incarnation(ps->store, ps->incarnation);
    if (rc == 0) {
        rc = ps_store_meta_load(ps->store, &ps->server_id, &blob);
    }
    if (rc == 0) {
        rc = ps_store_meta_term(ps->store, &ps->master_term);
    }
    if (rc == 0 && blob.len > 0) {
        rc = ps_ranges_unpack(&ps->ranges, blob.data, blob.len);
    }
    rt_buf_free(&blob);
    if (rc != 0) {
        snprintf(ps->errmsg, sizeof(ps->errmsg), "reading meta: %s",
                 rt_strerror(rc));
    }
    return rc;
}

static int ps__resume_drops(struct ps_server *ps)
{
    uint64_t *ids;
    size_t n;
    int rc = ps_store_pending_drops(ps->store, &ids, &n);

    if (rc != 0) {
        snprintf(ps->errmsg, sizeof(ps->errmsg), "reading drops: %s",
                 rt_strerror(rc));
        return rc;
    }
    for (size_t i = 0; i < n; i++) {
        rt_log(RT_LOG_INFO, "resuming drop of table %llu",
               (unsigned long long)ids[i]);
        ps_jobs_drop(ps, ids[i], NULL, 0);
    }
    free(ids);
    return 0;
}

static int ps__listen(struct ps_server *ps)
{
    char host[256];
    int port, rc;

    if (rt_addr_split(ps->cfg.listen, host, sizeof(host), &port) != 0) {
        snprintf(ps->errmsg, sizeof(ps->errmsg), "bad --listen '%s'",
                 ps->cfg.listen);
        return RT_EINVAL;
    }
    rc = rt_rpc_server_start(ps->loop, host, port, ps_rpc_on_request, NULL, ps,
                             &ps->rpc);
    if (rc != 0) {
        ps->rpc = NULL;
        snprintf(ps->errmsg, sizeof(ps->errmsg), "listen on %s: %s",
                 ps->cfg.listen, rt_strerror(rc));
        return rc;
    }
    ps->port = rt_rpc_server_port(ps->rpc);
    if (ps->cfg.advertise && *ps->cfg.advertise) {
        snprintf(ps->addr, sizeof(ps->addr), "%s", ps->cfg.advertise);
    } else {
        /* A wildcard address is not something peers can dial. */
        const char *h =
            (!strcmp(host, "0.0.0.0") || !strcmp(host, "::") || !*host)
                ? "127.0.0.1"
                : host;
        snprintf(ps->addr, sizeof(ps->addr), "%s:%d", h, ps->port);
    }
    if (ps->cfg.port_file && *ps->cfg.port_file) {
        const char *keys[] = {"rpc", "http"};
        int values[] = {ps->port, ps->http_port};
        rc = rt_write_port_file(ps->cfg.port_file, keys, values,
                                ps->http ? 2 : 1);
        if (rc != 0) {
            snprintf(ps->errmsg, sizeof(ps->errmsg), "port file %s: %s",
                     ps->cfg.port_file, strerror(-rc));
            return RT_EIO;
        }
    }
    return 0;
}

int ps_server_start(struct ps_server *ps,
                    uv_loop_t *loop,
                    const struct ps_config *cfg)
{
    char errmsg[RT_ERRMSG_SIZE] = "";
    int rc;

    memset(ps, 0, sizeof(*ps));
    ps->loop = loop;
    ps->cfg = *cfg;
    ps_ranges_init(&ps->ranges);
    ps->ranges.range_eps = cfg->max_range_eps;
    ps_tbucket_init(&ps->tb, cfg->max_server_eps, uv_now(loop));

    rc = ps_store_open(cfg->data, cfg->map_size, &ps->store, errmsg);
    if (rc != 0) {
        snprintf(ps->errmsg, sizeof(ps->errmsg), "%s", errmsg);
        ps->store = NULL;
        return rc;
    }
    if ((rc = ps__load_meta(ps)) != 0) {
        return rc;
    }
    rc = ps_writer_start(loop, ps->store, &ps->writer);
    if (rc != 0) {
        ps->writer = NULL;
        snprintf(ps->errmsg, sizeof(ps->errmsg), "writer thread: %s",
                 rt_strerror(rc));
        return rc;
    }
    ps_writer_set_ship(ps->writer, ps_repl_shipped, ps);
    ps_writer_set_group_wait(ps->writer, cfg->group_wait_us);
    if ((rc = ps__resume_drops(ps)) != 0) {
        return rc;
    }
    if ((rc = ps_repl_start(ps)) == 0) {
        ps_repl_set_learn_hook(ps, ps_learn_action);
    }
    if (rc != 0) {
        snprintf(ps->errmsg, sizeof(ps->errmsg), "replication: %s",
                 rt_strerror(rc));
        return rc;
    }
    ps_repl_restore(ps);
    ps_repair_start(ps);
    ps_split_start(ps);
    if ((rc = ps_transfer_start(ps)) != 0) {
        snprintf(ps->errmsg, sizeof(ps->errmsg), "transfers: %s",
                 rt_strerror(rc));
        return rc;
    }
    if ((rc = ps_move_start(ps)) != 0) {
        snprintf(ps->errmsg, sizeof(ps->errmsg), "restoring moves: %s",
                 rt_strerror(rc));
        return rc;
    }
    for (size_t i = 0; i < ps->ranges.n; i++) {
        ps_range_load_reset(ps->ranges.v[i], uv_now(loop));
    }
    ps_jobs_count_wanted(ps);
    if ((rc = ps__metrics_start(ps)) != 0) {
        return rc;
    }
    if ((rc = ps__listen(ps)) != 0) {
        return rc;
    }
    rc = ps_master_start(ps, ps_rpc_on_request);
    if (rc != 0) {
        snprintf(ps->errmsg, sizeof(ps->errmsg), "master link to %s: %s",
                 cfg->master, rt_strerror(rc));
        return rc;
    }
    rt_log(RT_LOG_INFO,
           "partition server up: rpc port %d (advertised %s), "
           "data %s, server id %llu, %zu ranges, master %s",
           ps->port, ps->addr, cfg->data, (unsigned long long)ps->server_id,
           ps->ranges.n, cfg->master);
    return 0;
}

void ps_server_stop(struct ps_server *ps)
{
    if (ps->stopping) {
        return;
    }
    ps->stopping = 1;
    ps_move_stop(ps);
    ps_repair_stop(ps);
    if (ps->writer) {
        ps_writer_stop(ps->writer);
        ps->writer = NULL;
    }
    ps_learn_stop(ps); /* its waiting requests answered first */
    ps_split_stop(ps);
    ps_transfer_stop(ps);
    ps_repl_stop(ps);
    ps_master_stop(ps);
    if (ps->rpc) {
        rt_rpc_server_close(ps->rpc);
        ps->rpc = NULL;
    }
    if (ps->metrics_timer_init) {
        uv_timer_stop(&ps->metrics_timer);
        uv_close((uv_handle_t *)&ps->metrics_timer, NULL);
        ps->metrics_timer_init = 0;
    }
    ps_http_stop(ps->http);
    ps->http = NULL;
}

void ps_server_close(struct ps_server *ps)
{
    /* Scans and counts read the store from the threadpool. */
    while (ps->work_inflight > 0) {
        uv_run(ps->loop, UV_RUN_ONCE);
    }
    ps_move_close(ps); /* closes snapshot transactions */
    ps_learn_free(ps);
    ps_ranges_close(&ps->ranges);
    ps_store_close(ps->store);
    ps->store = NULL;
    if (ps->metrics_mu_init) {
        uv_mutex_destroy(&ps->metrics_mu);
        ps->metrics_mu_init = 0;
    }
    free(ps->metrics_text);
    ps->metrics_text = NULL;
}
