/* Corruption repair and scrub (ps_repair.h says what and why).
 *
 * Happy path of one repair (struct ps__rop): the peers with a link are
 * asked in turn with REPL_FETCH{range, epoch, min_lsn = my cw (primary)
 * or 0, [key]}; the first good answer gives (value or absent, f); a held
 * get is answered after cw >= f; a PS_JOB_REPAIR puts the value if the
 * local one still fails its checksum. The op ends when both the client
 * answer (if any) and the repair job are done (two references).
 * Failure modes: no peer, every peer refuses or times out (2 s each):
 * the get is answered RT_ECORRUPT, the repair counted failed; the repair
 * job finds this copy behind f (RT_EBUSY, a secondary): counted failed,
 * the next scrub pass finds the value again; the server stops: held gets
 * RT_EBUSY. */
#include "ps_repair.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "ps_range.h"
#include "ps_rcore.h"
#include "ps_repl.h"
#include "ps_writer.h"
#include "rt.pb-c.h"
#include "rt_alloc.h"
#include "rt_err.h"
#include "rt_key.h"
#include "rt_log.h"

/* Peers asked per repair at most. */
#define PS__REPAIR_MAX_PEERS 16
/* Corrupt keys one scrub step hands to repair at most. */
#define PS__SCRUB_MAX_BAD 16
#define PS__SCRUB_TICK_MS 1000

struct ps_repair
{
    struct ps_server *ps;
    uv_timer_t timer;
    int closing;
    int timer_closed;
    size_t ops; /* repairs in flight: the struct is freed after the last */
    /* Scrub: next key, and the step on the threadpool. */
    struct rt_buf resume;
    int scrub_running;
    /* Counters (metrics). */
    uint64_t scrub_bytes, scrub_passes, corrupt, repaired, repair_failed,
        fetches_served;
};

/* One key being repaired. */
struct ps__rop
{
    struct ps_repair *rpr;
    uint64_t range_id;
    uint64_t epoch;
    uint64_t min_lsn;
    struct rt_buf key;
    uint64_t peers[PS__REPAIR_MAX_PEERS];
    size_t n_peers, next_peer;
    int refs;
    /* The get waiting for the value (conn NULL: none). */
    struct rt_rpc_conn *conn;
    uint64_t id;
    struct ps_repl_wait wait;
    /* What the peer answered. */
    int found;
    struct rt_buf val;
    uint64_t lsn;
    struct ps_job job;
};

/* One scrub step on the threadpool. */
struct ps__scrub
{
    uv_work_t work;
    struct ps_repair *rpr;
    struct rt_buf resume; /* in/out, swapped with the repairer's */
    struct rt_buf bad;
    size_t n_bad;
    uint64_t bytes;
    int wrapped;
    size_t budget;
    int rc;
};

static void ps__rpr_maybe_free(struct ps_repair *rpr)
{
    if (rpr->closing && rpr->timer_closed && rpr->ops == 0 &&
        !rpr->scrub_running) {
        rt_buf_free(&rpr->resume);
        free(rpr);
    }
}

/* Drops one reference of @op; the last frees it. */
static void ps__rop_unref(struct ps__rop *op)
{
    struct ps_repair *rpr = op->rpr;

    if (--op->refs > 0) {
        return;
    }
    rt_buf_free(&op->key);
    rt_buf_free(&op->val);
    free(op);
    rpr->ops--;
    ps__rpr_maybe_free(rpr);
}

/* Answers the held get (if any) with @code, or the fetched value. */
static void ps__rop_answer(struct ps__rop *op, int code)
{
    const uint32_t method = RT__METHOD__ENTITY_GET;

    if (op->conn == NULL) {
        return;
    }
    if (code == 0 && !op->found) {
        code = RT_ENOTFOUND;
    }
    if (code != 0) {
        rt_rpc_reply_err(op->conn, op->id, method, code, NULL);
    } else {
        Rt__GetResp resp = RT__GET_RESP__INIT;
        resp.value.data = op->val.data;
        resp.value.len = op->val.len;
        rt_rpc_reply_pb(op->conn, op->id, method, 0, &resp.base);
    }
    rt_rpc_conn_unref(op->conn);
    op->conn = NULL;
}

static void ps__rop_released(struct ps_repl_wait *w, int code)
{
    struct ps__rop *op = container_of(w, struct ps__rop, wait);
    ps__rop_answer(op, code);
    ps__rop_unref(op);
}

static void ps__repair_done(struct ps_job *job)
{
    struct ps__rop *op = container_of(job, struct ps__rop, job);
    struct ps_repair *rpr = op->rpr;

    if (job->status == 0) {
        rpr->repaired++;
        rt_log(RT_LOG_WARN,
               "repair: range %" PRIu64
               ": a corrupt value was replaced by "
               "a peer's copy (at LSN %" PRIu64 ")",
               op->range_id, op->lsn);
    } else if (job->status != RT_EEXIST) {
        rpr->repair_failed++;
        rt_log(RT_LOG_WARN,
               "repair: range %" PRIu64 ": could not put the peer's copy: %s",
               op->range_id, rt_strerror(job->status));
    }
    ps__rop_unref(op);
}

/* Every peer failed: the get gets RT_ECORRUPT, the repair counts failed. */
static void ps__rop_fail(struct ps__rop *op)
{
    op->rpr->repair_failed++;
    rt_log(RT_LOG_ERROR,
           "repair: range %" PRIu64
           ": no replica could supply a good copy "
           "of a corrupt value (%zu asked)",
           op->range_id, op->n_peers);
    ps__rop_answer(op, RT_ECORRUPT);
    ps__rop_unref(op);
}

static void ps__rop_next(struct ps__rop *op);

/* Takes the peer's FetchResp; 0, or -1 when it is not a usable answer. */
static int ps__rop_take(struct ps__rop *op, const uint8_t *body, size_t len)
{
    Rt__FetchResp *resp = rt__fetch_resp__unpack(NULL, len, body);
    int rc = -1;

    if (resp && resp->n_kvs == 1 && resp->lsn >= op->min_lsn &&
        resp->kvs[0]->key.len == op->key.len &&
        memcmp(resp->kvs[0]->key.data, op->key.data, op->key.len) == 0) {
        const Rt__KeyValue *kv = resp->kvs[0];
        op->found = !kv->deleted;
        op->lsn = resp->lsn;
        rt_buf_reset(&op->val);
        if (op->found) {
            rt_buf_append(&op->val, kv->value.data, kv->value.len);
        }
        rc = 0;
    }
    if (resp) {
        rt__fetch_resp__free_unpacked(resp, NULL);
    }
    return rc;
}

static void ps__rop_fetched(int status,
                            const uint8_t *body,
                            size_t len,
                            void *arg)
{
    struct ps__rop *op = arg;
    struct ps_server *ps = op->rpr->ps;

    if (op->rpr->closing) {
        ps__rop_answer(op, RT_EBUSY);
        ps__rop_unref(op);
        return;
    }
    if (status != 0 || ps__rop_take(op, body, len) != 0) {
        ps__rop_next(op);
        return;
    }
    /* The repair job: a second reference. */
    op->refs++;
    memset(&op->job, 0, sizeof(op->job));
    op->job.kind = PS_JOB_REPAIR;
    op->job.cb = ps__repair_done;
    op->job.u.repair.range_id = op->range_id;
    op->job.u.repair.key = op->key.data;
    op->job.u.repair.kn = op->key.len;
    op->job.u.repair.val = op->found ? op->val.data : NULL;
    op->job.u.repair.vn = op->val.len;
    op->job.u.repair.min_lsn = op->lsn;
    ps_writer_submit(ps->writer, &op->job);

    if (op->conn) {
        /* Never answer ahead of what every in-sync replica holds. */
        int w;
        op->wait.cb = ps__rop_released;
        w = ps_repl_lsn_wait(ps, &op->wait, op->range_id, op->lsn);
        if (w == 1) {
            return; /* the fetch's reference goes with the wait */
        }
        ps__rop_answer(op, w);
    }
    ps__rop_unref(op);
}

/* Asks the next peer, or fails when none is left. */
static void ps__rop_next(struct ps__rop *op)
{
    struct ps_server *ps = op->rpr->ps;

    while (op->next_peer < op->n_peers) {
        uint64_t peer = op->peers[op->next_peer++];
        struct rt_rpc_conn *conn = ps_repl_peer_conn(ps, peer);
        Rt__FetchReq req = RT__FETCH_REQ__INIT;
        ProtobufCBinaryData k = {op->key.len, op->key.data};
        if (conn == NULL) {
            continue;
        }
        req.range_id = op->range_id;
        req.epoch = op->epoch;
        req.min_lsn = op->min_lsn;
        req.n_keys = 1;
        req.keys = &k;
        if (rt_rpc_call_pb(conn, RT__METHOD__REPL_FETCH, &req.base,
                           PS_REPAIR_CALL_MS, ps__rop_fetched, op) == 0) {
            return;
        }
    }
    ps__rop_fail(op);
}

/* Starts the repair of @key in replicated range @r; @conn/@id: a get to
 * answer (conn NULL: none). */
static void ps__rop_start(struct ps_repair *rpr,
                          const struct ps_range *r,
                          const uint8_t *key,
                          size_t kn,
                          struct rt_rpc_conn *conn,
                          uint64_t id)
{
    struct ps_server *ps = rpr->ps;
    struct ps__rop *op = rt_xcalloc(1, sizeof(*op));
    struct ps_rcore_range_info info;

    op->rpr = rpr;
    op->range_id = r->id;
    op->epoch = r->epoch;
    op->refs = 1;
    rt_buf_init(&op->key);
    rt_buf_init(&op->val);
    rt_buf_append(&op->key, key, kn);
    /* A primary needs every acknowledged write: the peer must be at my
     * cw at least. A secondary's repair checks the LSN when it applies. */
    if (ps_repl_range_info(ps, r->id, &info) == 0 &&
        info.role == PS_RCORE_PRIMARY) {
        op->min_lsn = info.commit_lsn;
    }
    op->n_peers = ps_repl_peer_ids(ps, op->peers, PS__REPAIR_MAX_PEERS);
    if (conn) {
        op->conn = conn;
        op->id = id;
        rt_rpc_conn_ref(conn);
    }
    rpr->ops++;
    rpr->corrupt++;
    ps__rop_next(op);
}

void ps_repair_get(struct ps_server *ps,
                   struct rt_rpc_conn *conn,
                   uint64_t id,
                   uint64_t range_id,
                   const uint8_t *key,
                   size_t kn)
{
    struct ps_repair *rpr = ps->repair;
    struct ps_range *r = ps_ranges_find(&ps->ranges, range_id);

    if (rpr == NULL || rpr->closing || r == NULL) {
        rt_rpc_reply_err(conn, id, RT__METHOD__ENTITY_GET, RT_ECORRUPT, NULL);
        return;
    }
    ps__rop_start(rpr, r, key, kn, conn, id);
}

void ps_repair_key(struct ps_server *ps,
                   uint64_t range_id,
                   const uint8_t *key,
                   size_t kn)
{
    struct ps_repair *rpr = ps->repair;
    struct ps_range *r = ps_ranges_find(&ps->ranges, range_id);

    if (rpr == NULL || rpr->closing) {
        return;
    }
    if (r == NULL || !ps_repl_holds(ps, range_id)) {
        rpr->corrupt++;
        rt_log(RT_LOG_ERROR,
               "repair: a corrupt value in range %" PRIu64
               " has no other copy (replication factor 1): it stays "
               "unreadable until it is overwritten or deleted",
               range_id);
        return;
    }
    ps__rop_start(rpr, r, key, kn, NULL, 0);
}

/* REPL_FETCH */

/* 0 when this server may answer a fetch of @r at @epoch: it holds @r as
 * a replicated range in its in-sync set at @epoch or later. */
static int ps__fetch_allowed(const struct ps_server *ps,
                             const struct ps_range *r,
                             uint64_t epoch)
{
    if (r->epoch < epoch) {
        return RT_ESTALE;
    }
    for (size_t i = 0; i < r->n_isr; i++) {
        if (r->isr[i] == ps->server_id) {
            return 0;
        }
    }
    return RT_ESTALE;
}

/* 0 when storage key @k belongs to range @r. */
static int ps__key_of(const struct ps_range *r,
                      const uint8_t *k,
                      size_t kn,
                      struct rt_buf *pk,
                      struct rt_buf *rk)
{
    uint64_t tid;
    int in;

    rt_buf_reset(pk);
    rt_buf_reset(rk);
    if (rt_key_split(k, kn, &tid, pk, rk) != 0 || tid != r->table_id) {
        return RT_EINVAL;
    }
    rt_buf_append_u8(pk, 0);
    in = ps_range_contains(r, (const char *)pk->data);
    return in ? 0 : RT_EINVAL;
}

void ps_repair_on_fetch(struct ps_server *ps,
                        struct rt_rpc_conn *conn,
                        uint64_t id,
                        const uint8_t *body,
                        size_t len)
{
    const uint32_t method = RT__METHOD__REPL_FETCH;
    Rt__FetchReq *req = rt__fetch_req__unpack(NULL, len, body);
    struct ps_fetch_key *keys = NULL;
    struct rt_buf *vals = NULL, pk = RT_BUF_INIT, rk = RT_BUF_INIT;
    Rt__KeyValue *kvs = NULL, **kvp = NULL;
    struct ps_range *r;
    int *found = NULL, rc = 0;
    uint64_t lsn = 0;

    if (req == NULL || req->n_keys == 0 || req->n_keys > PS_REPAIR_MAX_KEYS) {
        rt_rpc_reply_err(conn, id, method, RT_EINVAL,
                         "REPL_FETCH: bad FetchReq or key count");
        goto out;
    }
    r = ps_ranges_find(&ps->ranges, req->range_id);
    if (r == NULL || !ps_repl_holds(ps, req->range_id)) {
        rt_rpc_reply_err(conn, id, method, RT_ENOTFOUND,
                         "REPL_FETCH: range not held here as a replica");
        goto out;
    }
    if ((rc = ps__fetch_allowed(ps, r, req->epoch)) != 0) {
        rt_rpc_reply_err(conn, id, method, rc,
                         "REPL_FETCH: not in the range's in-sync set at "
                         "that epoch");
        goto out;
    }
    keys = rt_xcalloc(req->n_keys, sizeof(*keys));
    vals = rt_xcalloc(req->n_keys, sizeof(*vals));
    found = rt_xcalloc(req->n_keys, sizeof(*found));
    for (size_t i = 0; i < req->n_keys; i++) {
        rt_buf_init(&vals[i]);
        keys[i].key = req->keys[i].data;
        keys[i].kn = req->keys[i].len;
        if (ps__key_of(r, keys[i].key, keys[i].kn, &pk, &rk) != 0) {
            rc = RT_EINVAL;
        }
    }
    if (rc != 0) {
        rt_rpc_reply_err(conn, id, method, rc,
                         "REPL_FETCH: a key outside the range");
        goto out_bufs;
    }
    rc = ps_store_fetch(ps->store, r->id, keys, req->n_keys, vals, found, &lsn);
    if (rc == 0 && lsn < req->min_lsn) {
        rc = RT_EBUSY;
    }
    if (rc != 0) {
        rt_rpc_reply_err(conn, id, method, rc, NULL);
        goto out_bufs;
    }
    {
        Rt__FetchResp resp = RT__FETCH_RESP__INIT;
        kvs = rt_xcalloc(req->n_keys, sizeof(*kvs));
        kvp = rt_xcalloc(req->n_keys, sizeof(*kvp));
        for (size_t i = 0; i < req->n_keys; i++) {
            rt__key_value__init(&kvs[i]);
            kvs[i].key = req->keys[i];
            kvs[i].value.data = vals[i].data;
            kvs[i].value.len = vals[i].len;
            kvs[i].deleted = !found[i];
            kvp[i] = &kvs[i];
        }
        resp.lsn = lsn;
        resp.n_kvs = req->n_keys;
        resp.kvs = kvp;
        rt_rpc_reply_pb(conn, id, method, 0, &resp.base);
        if (ps->repair) {
            ps->repair->fetches_served++;
        }
    }
out_bufs:
    for (size_t i = 0; i < req->n_keys; i++) {
        rt_buf_free(&vals[i]);
    }
out:
    free(kvs);
    free(kvp);
    free(keys);
    free(vals);
    free(found);
    rt_buf_free(&pk);
    rt_buf_free(&rk);
    if (req) {
        rt__fetch_req__free_unpacked(req, NULL);
    }
}

/* Scrub */

static void ps__scrub_work(uv_work_t *work)
{
    struct ps__scrub *st = container_of(work, struct ps__scrub, work);
    st->rc =
        ps_store_scrub(st->rpr->ps->store, &st->resume, st->budget, &st->bad,
                       PS__SCRUB_MAX_BAD, &st->n_bad, &st->bytes, &st->wrapped);
}

/* A corrupt key the scrub found: repair it in the range that holds it. */
static void ps__scrub_found(struct ps_repair *rpr,
                            const uint8_t *key,
                            size_t kn)
{
    struct ps_server *ps = rpr->ps;
    struct rt_buf pk = RT_BUF_INIT, rk = RT_BUF_INIT;
    uint64_t tid;
    struct ps_range *r = NULL;

    if (rt_key_split(key, kn, &tid, &pk, &rk) == 0) {
        rt_buf_append_u8(&pk, 0);
        r = ps_ranges_find_key(&ps->ranges, tid, (const char *)pk.data);
    }
    if (r == NULL) {
        /* Not a key of a range served here (a copy being dropped, or a
         * damaged key): only counted. */
        rpr->corrupt++;
        rt_log(RT_LOG_ERROR,
               "scrub: a corrupt value outside every range "
               "held here");
    } else {
        rt_log(RT_LOG_ERROR,
               "scrub: a stored value of range %" PRIu64 " fails its checksum",
               r->id);
        ps_repair_key(ps, r->id, key, kn);
    }
    rt_buf_free(&pk);
    rt_buf_free(&rk);
}

static void ps__scrub_after(uv_work_t *work, int status)
{
    struct ps__scrub *st = container_of(work, struct ps__scrub, work);
    struct ps_repair *rpr = st->rpr;
    struct ps_server *ps = rpr->ps;

    ps->work_inflight--;
    rpr->scrub_running = 0;
    if (status == 0 && !rpr->closing) {
        if (st->rc != 0) {
            /* A damaged bucket stops the walk there: start over next
             * time (the log names the failure once per pass). */
            rt_log(RT_LOG_ERROR, "scrub: stopped: %s", rt_strerror(st->rc));
            rpr->corrupt++;
            rt_buf_reset(&rpr->resume);
        } else {
            const uint8_t *k;
            size_t kn, off = 0;
            rpr->scrub_bytes += st->bytes;
            rpr->scrub_passes += st->wrapped ? 1 : 0;
            rt_buf_free(&rpr->resume);
            rpr->resume = st->resume;
            rt_buf_init(&st->resume);
            while (ps_scrub_key_next(&st->bad, &off, &k, &kn) == 1) {
                ps__scrub_found(rpr, k, kn);
            }
        }
    }
    rt_buf_free(&st->resume);
    rt_buf_free(&st->bad);
    free(st);
    ps__rpr_maybe_free(rpr);
}

static void ps__scrub_tick(uv_timer_t *t)
{
    struct ps_repair *rpr = t->data;
    struct ps_server *ps = rpr->ps;
    struct ps__scrub *st;

    if (rpr->closing || rpr->scrub_running || ps->stopping) {
        return;
    }
    st = rt_xcalloc(1, sizeof(*st));
    st->rpr = rpr;
    st->budget =
        (size_t)ps->cfg.scrub_mb_s * 1024u * 1024u * PS__SCRUB_TICK_MS / 1000u;
    rt_buf_init(&st->resume);
    rt_buf_init(&st->bad);
    rt_buf_append(&st->resume, rpr->resume.data, rpr->resume.len);
    if (uv_queue_work(ps->loop, &st->work, ps__scrub_work, ps__scrub_after) !=
        0) {
        rt_buf_free(&st->resume);
        free(st);
        return;
    }
    rpr->scrub_running = 1;
    ps->work_inflight++;
}

int ps_repair_start(struct ps_server *ps)
{
    struct ps_repair *rpr = rt_xcalloc(1, sizeof(*rpr));

    rpr->ps = ps;
    rt_buf_init(&rpr->resume);
    uv_timer_init(ps->loop, &rpr->timer);
    rpr->timer.data = rpr;
    if (ps->cfg.scrub_mb_s > 0) {
        uv_timer_start(&rpr->timer, ps__scrub_tick, PS__SCRUB_TICK_MS,
                       PS__SCRUB_TICK_MS);
    }
    ps->repair = rpr;
    return 0;
}

static void ps__timer_closed(uv_handle_t *h)
{
    struct ps_repair *rpr = h->data;
    rpr->timer_closed = 1;
    ps__rpr_maybe_free(rpr);
}

void ps_repair_stop(struct ps_server *ps)
{
    struct ps_repair *rpr = ps ? ps->repair : NULL;

    if (rpr == NULL || rpr->closing) {
        return;
    }
    rpr->closing = 1;
    ps->repair = NULL;
    uv_timer_stop(&rpr->timer);
    uv_close((uv_handle_t *)&rpr->timer, ps__timer_closed);
}

void ps_repair_metrics(struct ps_server *ps, struct rt_buf *b)
{
    const struct ps_repair *rpr = ps->repair;

    if (rpr == NULL) {
        return;
    }
    rt_buf_printf(
        b,
        "# HELP rt_ps_scrub_bytes_total Key and value bytes the scrub "
        "verified.\n"
        "# TYPE rt_ps_scrub_bytes_total counter\n"
        "rt_ps_scrub_bytes_total %" PRIu64
        "\n"
        "# HELP rt_ps_scrub_passes_total Complete scrub passes over the "
        "store.\n"
        "# TYPE rt_ps_scrub_passes_total counter\n"
        "rt_ps_scrub_passes_total %" PRIu64
        "\n"
        "# HELP rt_ps_corrupt_values_total Stored values found failing "
        "their checksum (reads and scrub).\n"
        "# TYPE rt_ps_corrupt_values_total counter\n"
        "rt_ps_corrupt_values_total %" PRIu64
        "\n"
        "# HELP rt_ps_repairs_total Corrupt values repaired from another "
        "replica, or not.\n"
        "# TYPE rt_ps_repairs_total counter\n"
        "rt_ps_repairs_total{outcome=\"repaired\"} %" PRIu64
        "\n"
        "rt_ps_repairs_total{outcome=\"failed\"} %" PRIu64
        "\n"
        "# HELP rt_ps_repair_fetches_served_total REPL_FETCH requests "
        "answered for peers.\n"
        "# TYPE rt_ps_repair_fetches_served_total counter\n"
        "rt_ps_repair_fetches_served_total %" PRIu64 "\n",
        rpr->scrub_bytes, rpr->scrub_passes, rpr->corrupt, rpr->repaired,
        rpr->repair_failed, rpr->fetches_served);
}
