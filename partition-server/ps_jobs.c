/* Jobs: the asynchronous operations on the server's state that the
 * server, the RPC handlers, the master link and the move files share:
 * persisting the server id and the owned ranges (a META job; the move
 * files build theirs on ps_jobs_meta_init), dropping a table (a
 * DROP_TABLE job), the count scans that keep each range's entity totals
 * (uv_queue_work), and the Empty-or-error answer of a request held
 * across a job. The writer thread runs the META and DROP jobs; their
 * callbacks and everything here run on the loop thread.
 *
 * Failure modes: a META or DROP job that fails answers its request with
 * the error (RT_ENOSPACE, RT_EIO, ...); with nobody to answer it is only
 * lost until the next assignment persists again (a drop's marker makes
 * the next start resume it). A count scan that fails or is cancelled
 * leaves the range's totals at PS_COUNT_NONE, to be counted again when
 * its bounds next change. */
#include "ps_jobs.h"

#include <stdlib.h>
#include <string.h>

#include "rt.pb-c.h"
#include "rt_alloc.h"
#include "rt_err.h"
#include "rt_log.h"

/* META and DROP jobs */

void ps_jobs_reply_empty(struct rt_rpc_conn *conn, uint64_t id, uint32_t method)
{
    Rt__Empty e = RT__EMPTY__INIT;
    rt_rpc_reply_pb(conn, id, method, 0, &e.base);
}

void ps_jobs_answer(struct rt_rpc_conn *conn,
                    uint64_t id,
                    uint32_t method,
                    int status,
                    const char *why)
{
    if (!conn) {
        return;
    }
    if (status == 0) {
        ps_jobs_reply_empty(conn, id, method);
    } else {
        rt_rpc_reply_err(conn, id, method, status, why);
    }
    rt_rpc_conn_unref(conn);
}

void ps_jobs_meta_init(struct ps_server *ps,
                       struct ps_job *job,
                       struct rt_buf *blob)
{
    ps_ranges_pack(&ps->ranges, blob);
    job->kind = PS_JOB_META;
    job->u.meta.server_id = ps->server_id;
    job->u.meta.ranges = blob->data;
    job->u.meta.ranges_len = blob->len;
    /* Every META job carries the highest master term seen: the one an
     * assignment brought is durable before its answer (DESIGN-master-ha
     * §5.4). */
    job->u.meta.master_term = ps->master_term;
}

struct ps_meta_req
{
    struct ps_job job;
    struct rt_rpc_conn *conn; /* NULL: nobody to answer */
    uint64_t id;
    uint32_t method;
    struct rt_buf blob;
};

static void ps__meta_done(struct ps_job *job)
{
    struct ps_meta_req *req = container_of(job, struct ps_meta_req, job);

    ps_jobs_answer(req->conn, req->id, req->method, job->status,
                   "persisting ranges failed");
    rt_buf_free(&req->blob);
    free(req);
}

void ps_jobs_persist(struct ps_server *ps,
                     struct rt_rpc_conn *conn,
                     uint64_t id,
                     uint32_t method)
{
    struct ps_meta_req *req = rt_xcalloc(1, sizeof(*req));

    req->conn = conn;
    req->id = id;
    req->method = method;
    rt_buf_init(&req->blob);
    ps_jobs_meta_init(ps, &req->job, &req->blob);
    req->job.cb = ps__meta_done;
    if (conn) {
        rt_rpc_conn_ref(conn);
    }
    ps_writer_submit(ps->writer, &req->job);
}

struct ps_drop_req
{
    struct ps_job job;
    struct ps_server *ps;
    struct rt_rpc_conn *conn;
    uint64_t id;
};

static void ps__drop_done(struct ps_job *job)
{
    struct ps_drop_req *req = container_of(job, struct ps_drop_req, job);

    if (job->status == 0 && !req->ps->stopping) {
        ps_jobs_recount_table(req->ps, job->u.drop.table_id);
    }
    ps_jobs_answer(req->conn, req->id, RT__METHOD__DROP_TABLE, job->status,
                   "drop table failed");
    free(req);
}

void ps_jobs_drop(struct ps_server *ps,
                  uint64_t table_id,
                  struct rt_rpc_conn *conn,
                  uint64_t id)
{
    struct ps_drop_req *req = rt_xcalloc(1, sizeof(*req));

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

struct ps_count_req
{
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
    req->rc =
        ps_store_range_stats(req->ps->store, req->table_id, req->low, req->high,
                             &req->count, &req->bytes, &req->txn);
}

static void ps__count_after(uv_work_t *work, int status)
{
    struct ps_count_req *req = container_of(work, struct ps_count_req, work);
    struct ps_server *ps = req->ps;
    struct ps_range *r = ps_ranges_find(&ps->ranges, req->range_id);

    ps->work_inflight--;
    if (r && r->count_gen == req->gen) {
        if (status == 0 && req->rc == 0) {
            ps_range_count_done(r, req->gen, req->count, req->bytes, req->txn);
            rt_log(RT_LOG_DEBUG, "range %llu: %llu entities, %llu bytes",
                   (unsigned long long)r->id, (unsigned long long)r->key_count,
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

void ps_jobs_count_wanted(struct ps_server *ps)
{
    for (size_t i = 0; i < ps->ranges.n && !ps->stopping; i++) {
        struct ps_range *r = ps->ranges.v[i];
        struct ps_count_req *req;
        int rc;

        if (!r->count_wanted) {
            continue;
        }
        req = rt_xcalloc(1, sizeof(*req));
        req->low = rt_xstrdup(r->low);
        req->high = r->high ? rt_xstrdup(r->high) : NULL;
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

void ps_jobs_recount_table(struct ps_server *ps, uint64_t table_id)
{
    for (size_t i = 0; i < ps->ranges.n; i++) {
        if (ps->ranges.v[i]->table_id == table_id) {
            ps->ranges.v[i]->count_wanted = 1;
        }
    }
    ps_jobs_count_wanted(ps);
}
