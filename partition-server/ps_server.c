/* Server wiring: start-up order, shutdown order, meta and drop jobs.
 *
 * Start: store -> meta (server id, ranges) -> writer -> resume unfinished
 * drops -> RPC listener -> port file -> master link. Any failure leaves a
 * partly started server that ps_server_stop() takes down.
 * Stop: writer first (it finishes queued writes; their replies go out while
 * connections are still open), then the master link, then the listener. */
#include "ps_server.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ps_internal.h"
#include "rt.pb-c.h"
#include "rt_config.h"
#include "rt_err.h"
#include "rt_log.h"

/* META and DROP jobs */

struct ps_meta_req {
    struct ps_job job;
    struct rt_rpc_conn *conn; /* NULL: nobody to answer */
    uint64_t id;
    uint32_t method;
    struct rt_buf blob;
};

static void ps__meta_done(struct ps_job *job)
{
    struct ps_meta_req *req = container_of(job, struct ps_meta_req, job);

    if (req->conn) {
        if (job->status == 0) {
            Rt__Empty e = RT__EMPTY__INIT;
            rt_rpc_reply_pb(req->conn, req->id, req->method, 0, &e.base);
        } else {
            rt_rpc_reply_err(req->conn, req->id, req->method, job->status,
                             "persisting ranges failed");
        }
        rt_rpc_conn_unref(req->conn);
    }
    rt_buf_free(&req->blob);
    free(req);
}

void ps__server_persist(struct ps_server *ps, struct rt_rpc_conn *conn,
                        uint64_t id, uint32_t method)
{
    struct ps_meta_req *req = calloc(1, sizeof(*req));

    if (!req) {
        rt_log(RT_LOG_FATAL, "out of memory");
        abort();
    }
    req->conn = conn;
    req->id = id;
    req->method = method;
    rt_buf_init(&req->blob);
    ps_ranges_pack(&ps->ranges, &req->blob);
    req->job.kind = PS_JOB_META;
    req->job.cb = ps__meta_done;
    req->job.u.meta.server_id = ps->server_id;
    req->job.u.meta.ranges = req->blob.data;
    req->job.u.meta.ranges_len = req->blob.len;
    if (conn) {
        rt_rpc_conn_ref(conn);
    }
    ps_writer_submit(ps->writer, &req->job);
}

struct ps_drop_req {
    struct ps_job job;
    struct ps_server *ps;
    struct rt_rpc_conn *conn;
    uint64_t id;
};

static void ps__drop_done(struct ps_job *job)
{
    struct ps_drop_req *req = container_of(job, struct ps_drop_req, job);

    if (job->status == 0 && !req->ps->stopping) {
        ps__server_recount_table(req->ps, job->u.drop.table_id);
    }
    if (req->conn) {
        if (job->status == 0) {
            Rt__Empty e = RT__EMPTY__INIT;
            rt_rpc_reply_pb(req->conn, req->id, RT__METHOD__DROP_TABLE, 0,
                            &e.base);
        } else {
            rt_rpc_reply_err(req->conn, req->id, RT__METHOD__DROP_TABLE,
                             job->status, "drop table failed");
        }
        rt_rpc_conn_unref(req->conn);
    }
    free(req);
}

void ps__server_drop(struct ps_server *ps, uint64_t table_id,
                     struct rt_rpc_conn *conn, uint64_t id)
{
    struct ps_drop_req *req = calloc(1, sizeof(*req));

    if (!req) {
        rt_log(RT_LOG_FATAL, "out of memory");
        abort();
    }
    req->ps = ps;
    req->conn = conn;
    req->id = id;
    req->job.kind = PS_JOB_DROP_TABLE;
    req->job.cb = ps__drop_done;
    req->job.u.drop.table_id = table_id;
    if (conn) {
        rt_rpc_conn_ref(conn);
    }
    ps_writer_submit(ps->writer, &req->job);
}

/* Count scans (load accounting: entity totals per range) */

struct ps_count_req {
    uv_work_t work;
    struct ps_server *ps;
    uint64_t range_id;
    uint64_t table_id;
    uint64_t gen;
    char *low;
    char *high; /* NULL = unbounded */
    int rc;
    uint64_t count, bytes, txn;
};

static void ps__count_work(uv_work_t *work)
{
    struct ps_count_req *req = container_of(work, struct ps_count_req, work);
    req->rc = ps_store_range_stats(req->ps->store, req->table_id, req->low,
                                   req->high, &req->count, &req->bytes,
                                   &req->txn);
}

static void ps__count_after(uv_work_t *work, int status)
{
    struct ps_count_req *req = container_of(work, struct ps_count_req, work);
    struct ps_server *ps = req->ps;
    struct ps_range *r = ps_ranges_find(&ps->ranges, req->range_id);

    ps->work_inflight--;
    if (r && r->count_gen == req->gen) {
        if (status == 0 && req->rc == 0) {
            ps_range_count_done(r, req->gen, req->count, req->bytes,
                                req->txn);
            rt_log(RT_LOG_DEBUG, "range %llu: %llu entities, %llu bytes",
                   (unsigned long long)r->id,
                   (unsigned long long)r->key_count,
                   (unsigned long long)r->key_bytes);
        } else {
            rt_log(RT_LOG_WARN, "counting range %llu failed: %s",
                   (unsigned long long)r->id,
                   rt_strerror(status ? RT_ECANCELED : req->rc));
            r->count_state = PS_COUNT_NONE;
        }
    }
    free(req->low);
    free(req->high);
    free(req);
}

void ps__server_count_wanted(struct ps_server *ps)
{
    for (size_t i = 0; i < ps->ranges.n && !ps->stopping; i++) {
        struct ps_range *r = ps->ranges.v[i];
        struct ps_count_req *req;
        int rc;

        if (!r->count_wanted) {
            continue;
        }
        req = calloc(1, sizeof(*req));
        if (!req || !(req->low = strdup(r->low)) ||
            (r->high && !(req->high = strdup(r->high)))) {
            rt_log(RT_LOG_FATAL, "out of memory");
            abort();
        }
        req->ps = ps;
        req->range_id = r->id;
        req->table_id = r->table_id;
        req->gen = ps_range_count_start(r);
        rc = uv_queue_work(ps->loop, &req->work, ps__count_work,
                           ps__count_after);
        if (rc != 0) {
            rt_log(RT_LOG_ERROR, "uv_queue_work: %s", uv_strerror(rc));
            r->count_state = PS_COUNT_NONE;
            free(req->low);
            free(req->high);
            free(req);
            continue;
        }
        ps->work_inflight++;
    }
}

void ps__server_recount_table(struct ps_server *ps, uint64_t table_id)
{
    for (size_t i = 0; i < ps->ranges.n; i++) {
        if (ps->ranges.v[i]->table_id == table_id) {
            ps->ranges.v[i]->count_wanted = 1;
        }
    }
    ps__server_count_wanted(ps);
}

/* Start */

static int ps__load_meta(struct ps_server *ps)
{
    struct rt_buf blob = RT_BUF_INIT;
    int rc;

    rc = ps_store_meta_load(ps->store, &ps->server_id, &blob);
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
        ps__server_drop(ps, ids[i], NULL, 0);
    }
    free(ids);
    return 0;
}

static int ps__listen(struct ps_server *ps)
{
    char host[256];
    int port, rc;

    if (rt_split_hostport(ps->cfg.listen, host, sizeof(host), &port) != 0) {
        snprintf(ps->errmsg, sizeof(ps->errmsg), "bad --listen '%s'",
                 ps->cfg.listen);
        return RT_EINVAL;
    }
    rc = rt_rpc_server_start(ps->loop, host, port, ps_rpc_on_request, NULL,
                             ps, &ps->rpc);
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
        const char *h = (!strcmp(host, "0.0.0.0") || !strcmp(host, "::") ||
                         !*host)
                            ? "127.0.0.1"
                            : host;
        snprintf(ps->addr, sizeof(ps->addr), "%s:%d", h, ps->port);
    }
    if (ps->cfg.port_file && *ps->cfg.port_file) {
        const char *keys[] = {"rpc"};
        int values[] = {ps->port};
        rc = rt_write_port_file(ps->cfg.port_file, keys, values, 1);
        if (rc != 0) {
            snprintf(ps->errmsg, sizeof(ps->errmsg), "port file %s: %s",
                     ps->cfg.port_file, strerror(-rc));
            return RT_EIO;
        }
    }
    return 0;
}

int ps_server_start(struct ps_server *ps, uv_loop_t *loop,
                    const struct ps_config *cfg)
{
    char errmsg[RT_ERRMSG_SIZE] = "";
    int rc;

    memset(ps, 0, sizeof(*ps));
    ps->loop = loop;
    ps->cfg = *cfg;
    ps_ranges_init(&ps->ranges);

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
    if ((rc = ps__resume_drops(ps)) != 0) {
        return rc;
    }
    for (size_t i = 0; i < ps->ranges.n; i++) {
        ps_range_load_reset(ps->ranges.v[i], uv_now(loop));
    }
    ps__server_count_wanted(ps);
    if ((rc = ps__listen(ps)) != 0) {
        return rc;
    }
    rc = ps_master_start(ps);
    if (rc != 0) {
        snprintf(ps->errmsg, sizeof(ps->errmsg), "master link to %s: %s",
                 cfg->master, rt_strerror(rc));
        return rc;
    }
    rt_log(RT_LOG_INFO, "partition server up: rpc port %d (advertised %s), "
           "data %s, server id %llu, %zu ranges, master %s", ps->port,
           ps->addr, cfg->data, (unsigned long long)ps->server_id,
           ps->ranges.n, cfg->master);
    return 0;
}

void ps_server_stop(struct ps_server *ps)
{
    if (ps->stopping) {
        return;
    }
    ps->stopping = 1;
    if (ps->writer) {
        ps_writer_stop(ps->writer);
        ps->writer = NULL;
    }
    ps_master_stop(ps);
    if (ps->rpc) {
        rt_rpc_server_close(ps->rpc);
        ps->rpc = NULL;
    }
}

void ps_server_close(struct ps_server *ps)
{
    /* Scans and counts read the store from the threadpool. */
    while (ps->work_inflight > 0) {
        uv_run(ps->loop, UV_RUN_ONCE);
    }
    ps_ranges_close(&ps->ranges);
    ps_store_close(ps->store);
    ps->store = NULL;
}
