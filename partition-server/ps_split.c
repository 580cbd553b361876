/* Freeze of a replicated range's primary for its split (contract in
 * ps_split.h, docs/DESIGN-replication.md §9.1).
 *
 * Happy path: RANGE_FREEZE -> checks -> record (BARRIER): new writes on
 * the range get RT_EBUSY from now on -> a writer barrier, so every write
 * admitted before has its LSN and is in the replica core -> WAITING: a
 * 1 ms timer polls the core until the range's cw equals its last LSN and
 * no client write is held -> FreezeResp, FROZEN until an assignment, a
 * RANGE_THAW or a registration settles it.
 * Failure modes: the range stops being primary here or leaves the
 * assignment while waiting (RT_ENOTPRIMARY / RT_ESTALE to the freeze); a
 * thaw while waiting (RT_ECANCELED); the server stops (RT_EBUSY). A
 * secondary that does not acknowledge keeps the freeze waiting until the
 * core's ISR shrink commits and cw moves past it, or until the master's
 * call times out and it sends RANGE_THAW. */
#include "ps_split.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "ps_fence.h"
#include "ps_range.h"
#include "ps_rcore.h"
#include "ps_repl.h"
#include "ps_writer.h"
#include "rt.pb-c.h"
#include "rt_alloc.h"
#include "rt_err.h"
#include "rt_log.h"

enum ps__frz_state {
    PS__FRZ_BARRIER, /* the writer barrier is out */
    PS__FRZ_WAITING, /* waiting for cw = last LSN */
    PS__FRZ_FROZEN,  /* answered; frozen until settled */
};

struct ps__frz
{
    struct ps_server *ps;
    struct ps_job barrier; /* PS_JOB_BARRIER */
    enum ps__frz_state state;
    int gone;                 /* settled while the barrier was out */
    uint64_t range_id, epoch; /* as the request named it */
    struct rt_rpc_conn *conn; /* the freeze waiting (a reference) */
    uint64_t req_id;
    uint64_t t_freeze_ms;
    Rt__FreezeResp resp; /* FROZEN: the answer, for a repeat */
    struct ps__frz *next;
};

struct ps_split
{
    struct ps__frz *head;
    uv_timer_t timer;
    int closing;
};

static struct ps__frz *ps__frz_find(const struct ps_split *sp, uint64_t id)
{
    for (struct ps__frz *f = sp ? sp->head : NULL; f != NULL; f = f->next) {
        if (f->range_id == id && !f->gone) {
            return f;
        }
    }
    return NULL;
}

static void ps__frz_unlink(struct ps_split *sp, struct ps__frz *f)
{
    for (struct ps__frz **p = &sp->head; *p != NULL; p = &(*p)->next) {
        if (*p == f) {
            *p = f->next;
            return;
        }
    }
}

/* Answers the waiting freeze of @f, if any, with @code (0: FreezeResp). */
static void ps__frz_answer(struct ps__frz *f, int code, const char *why)
{
    const uint32_t method = RT__METHOD__RANGE_FREEZE;
    if (f->conn == NULL) {
        return;
    }
    if (code == 0) {
        rt_rpc_reply_pb(f->conn, f->req_id, method, 0,
                        (const ProtobufCMessage *)&f->resp);
    } else {
        rt_rpc_reply_err(f->conn, f->req_id, method, code, why);
    }
    rt_rpc_conn_unref(f->conn);
    f->conn = NULL;
}

/* Ends the freeze of @f: the waiting request (if any) gets @code, the
 * range takes writes again (if it is still here). Freed now, or by the
 * barrier's callback when it is still out. */
static void ps__frz_end(struct ps_split *sp,
                        struct ps__frz *f,
                        int code,
                        const char *why)
{
    ps__frz_answer(f, code, why);
    if (f->state == PS__FRZ_BARRIER) {
        f->gone = 1;
        return;
    }
    ps__frz_unlink(sp, f);
    free(f);
}

/* 1 when @f's wait is over (answered or ended), else 0. */
static int ps__frz_poll(struct ps_split *sp, struct ps__frz *f, uint64_t now)
{
    struct ps_server *ps = f->ps;
    struct ps_rcore_range_info info;

    if (ps_ranges_find(&ps->ranges, f->range_id) == NULL) {
        ps__frz_end(sp, f, RT_ESTALE, "range reassigned while freezing");
        return 1;
    }
    if (ps_repl_range_info(ps, f->range_id, &info) != 0 ||
        info.role != PS_RCORE_PRIMARY) {
        ps__frz_end(sp, f, RT_ENOTPRIMARY, "no longer the range's primary");
        return 1;
    }
    if (info.state != PS_RPRI_SERVING || info.commit_lsn != info.last_lsn ||
        info.n_held != 0) {
        return 0;
    }
    f->state = PS__FRZ_FROZEN;
    f->resp.lsn = info.last_lsn;
    f->resp.epoch = info.epoch;
    f->resp.frozen_ms = now - f->t_freeze_ms;
    rt_log(RT_LOG_INFO,
           "range %" PRIu64 ": frozen for a split at LSN %" PRIu64
           " (epoch %" PRIu64 ") after %" PRIu64 " ms",
           f->range_id, info.last_lsn, info.epoch, f->resp.frozen_ms);
    ps__frz_answer(f, 0, NULL);
    return 1;
}

static void ps__split_timer_cb(uv_timer_t *t)
{
    struct ps_split *sp = container_of(t, struct ps_split, timer);
    uint64_t now = uv_now(t->loop);
    int waiting = 0;
    struct ps__frz *f, *next;

    for (f = sp->head; f != NULL; f = next) {
        next = f->next;
        if (f->state == PS__FRZ_WAITING && !ps__frz_poll(sp, f, now)) {
            waiting = 1;
        }
    }
    if (!waiting) {
        uv_timer_stop(&sp->timer);
    }
}

static void ps__split_kick(struct ps_split *sp)
{
    if (!sp->closing) {
        uv_timer_start(&sp->timer, ps__split_timer_cb, PS_SPLIT_POLL_MS,
                       PS_SPLIT_POLL_MS);
    }
}

static void ps__frz_barrier_cb(struct ps_job *job)
{
    struct ps__frz *f = container_of(job, struct ps__frz, barrier);
    struct ps_split *sp = f->ps->split;

    if (f->gone) {
        ps__frz_unlink(sp, f);
        free(f);
        return;
    }
    f->state = PS__FRZ_WAITING;
    if (sp->closing) {
        ps__frz_end(sp, f, RT_EBUSY, "shutting down");
        return;
    }
    if (!ps__frz_poll(sp, f, uv_now(f->ps->loop))) {
        ps__split_kick(sp);
    }
}

/* 1 when @conn is this server's link to the master: a freeze holds a
 * range's writes until the master decides, so nobody else may ask. */
static int ps__from_master(const struct ps_server *ps,
                           const struct rt_rpc_conn *conn)
{
    return ps->master != NULL && conn == rt_rpc_client_conn(ps->master);
}

void ps_split_on_freeze(struct ps_server *ps,
                        struct rt_rpc_conn *conn,
                        uint64_t id,
                        const uint8_t *body,
                        size_t len)
{
    const uint32_t method = RT__METHOD__RANGE_FREEZE;
    struct ps_split *sp = ps->split;
    Rt__FreezeReq *req = rt__freeze_req__unpack(NULL, len, body);
    struct ps_rcore_range_info info;
    struct ps_range *r;
    struct ps__frz *f;

    if (!ps__from_master(ps, conn)) {
        rt_rpc_reply_err(conn, id, method, RT_EINVAL,
                         "RANGE_FREEZE comes on the master link only");
        goto out;
    }
    if (req == NULL || sp == NULL || sp->closing || ps->writer == NULL) {
        rt_rpc_reply_err(conn, id, method, req ? RT_EBUSY : RT_EINVAL,
                         req ? "shutting down" : "bad FreezeReq");
        goto out;
    }
    if (ps_fence_admit(ps, conn, id, method, req->master_term) != 0) {
        goto out;
    }
    if (ps_repl_range_info(ps, req->range_id, &info) != 0) {
        rt_rpc_reply_err(conn, id, method, RT_EINVAL,
                         "range not replicated here");
        goto out;
    }
    r = ps_ranges_find(&ps->ranges, req->range_id);
    if (r == NULL || r->epoch != req->epoch) {
        rt_rpc_reply_err(conn, id, method, RT_ESTALE, NULL);
        goto out;
    }
    f = ps__frz_find(sp, req->range_id);
    if (f != NULL && f->state == PS__FRZ_FROZEN) {
        rt_rpc_reply_pb(conn, id, method, 0,
                        (const ProtobufCMessage *)&f->resp);
        goto out;
    }
    if (f != NULL || r->frozen) {
        rt_rpc_reply_err(conn, id, method, RT_EBUSY,
                         "range already frozen (a move or a split)");
        goto out;
    }
    if (!ps_rcore_info_serving(&info)) {
        rt_rpc_reply_err(conn, id, method, RT_ENOTPRIMARY, NULL);
        goto out;
    }
    f = rt_xcalloc(1, sizeof(*f));
    f->ps = ps;
    f->state = PS__FRZ_BARRIER;
    f->range_id = req->range_id;
    f->epoch = req->epoch;
    f->conn = conn;
    f->req_id = id;
    f->t_freeze_ms = uv_now(ps->loop);
    rt__freeze_resp__init(&f->resp);
    rt_rpc_conn_ref(conn);
    f->next = sp->head;
    sp->head = f;
    f->barrier.kind = PS_JOB_BARRIER;
    f->barrier.cb = ps__frz_barrier_cb;
    ps_writer_submit(ps->writer, &f->barrier);
    rt_log(RT_LOG_INFO,
           "range %" PRIu64 ": freezing writes for a split (epoch %" PRIu64
           ", last LSN %" PRIu64 ", cw %" PRIu64 ")",
           f->range_id, f->epoch, info.last_lsn, info.commit_lsn);
out:
    if (req != NULL) {
        rt__freeze_req__free_unpacked(req, NULL);
    }
}

void ps_split_on_thaw(struct ps_server *ps,
                      struct rt_rpc_conn *conn,
                      uint64_t id,
                      const uint8_t *body,
                      size_t len)
{
    const uint32_t method = RT__METHOD__RANGE_THAW;
    Rt__FreezeReq *req = rt__freeze_req__unpack(NULL, len, body);
    struct ps__frz *f;

    if (req == NULL || !ps__from_master(ps, conn)) {
        rt_rpc_reply_err(
            conn, id, method, RT_EINVAL,
            req ? "RANGE_THAW comes on the master link only" : "bad FreezeReq");
        if (req != NULL) {
            rt__freeze_req__free_unpacked(req, NULL);
        }
        return;
    }
    if (ps_fence_admit(ps, conn, id, method, req->master_term) != 0) {
        rt__freeze_req__free_unpacked(req, NULL);
        return;
    }
    f = ps__frz_find(ps->split, req->range_id);
    if (f != NULL) {
        rt_log(RT_LOG_INFO, "range %" PRIu64 ": thawed (split not committed)",
               f->range_id);
        ps__frz_end(ps->split, f, RT_ECANCELED, "thawed");
    }
    rt__freeze_req__free_unpacked(req, NULL);
    rt_rpc_reply(conn, id, method, 0, NULL, 0);
}

int ps_split_write_admit(const struct ps_server *ps, uint64_t range_id)
{
    return ps__frz_find(ps->split, range_id) != NULL ? RT_EBUSY : 0;
}

void ps_split_assigned(struct ps_server *ps, int registration)
{
    struct ps_split *sp = ps->split;
    struct ps__frz *f, *next;

    for (f = sp ? sp->head : NULL; f != NULL; f = next) {
        next = f->next;
        if (f->gone) {
            continue;
        }
        if (ps_ranges_find(&ps->ranges, f->range_id) == NULL) {
            /* The split committed (or the range went elsewhere). */
            ps__frz_end(sp, f, RT_ESTALE, "range reassigned while freezing");
        } else if (registration) {
            rt_log(RT_LOG_INFO,
                   "range %" PRIu64
                   ": thawed by the registration (split not committed)",
                   f->range_id);
            ps__frz_end(sp, f, RT_ECANCELED, "registered again");
        }
    }
}

size_t ps_split_frozen(const struct ps_server *ps)
{
    size_t n = 0;
    for (const struct ps__frz *f = ps->split ? ps->split->head : NULL;
         f != NULL; f = f->next) {
        n += !f->gone;
    }
    return n;
}

int ps_split_start(struct ps_server *ps)
{
    struct ps_split *sp = rt_xcalloc(1, sizeof(*sp));
    uv_timer_init(ps->loop, &sp->timer);
    ps->split = sp;
    return 0;
}

static void ps__split_close_cb(uv_handle_t *h)
{
    free(container_of((uv_timer_t *)h, struct ps_split, timer));
}

void ps_split_stop(struct ps_server *ps)
{
    struct ps_split *sp = ps->split;
    if (sp == NULL || sp->closing) {
        return;
    }
    sp->closing = 1;
    while (sp->head != NULL) {
        struct ps__frz *f = sp->head;
        sp->head = f->next;
        ps__frz_answer(f, RT_EBUSY, "shutting down");
        free(f);
    }
    ps->split = NULL;
    uv_timer_stop(&sp->timer);
    uv_close((uv_handle_t *)&sp->timer, ps__split_close_cb);
}
