/* Range moves (docs/DESIGN-moves.md; DESIGN §5): the entry points of
 * ps_move.h. Requests go to the source side (ps_move_out.c: MOVE_OUT)
 * or the target side (ps_move_in.c: MIGRATE_BEGIN / DATA / END); the
 * master's MOVE_ABORT and MOVE_DONE, assignments, start, stop and
 * metrics are dispatched here to both. The writer jobs both sides use
 * are in ps_move_jobs.c.
 *
 * Thread: loop thread only. */
#include "ps_move.h"

#include <stdlib.h>
#include <string.h>

#include "ps_fence.h"
#include "ps_jobs.h"
#include "ps_move_in.h"
#include "ps_move_jobs.h"
#include "ps_move_out.h"
#include "rt.pb-c.h"
#include "rt_err.h"
#include "rt_log.h"

/* Master requests */

static void ps__move_abort_req(struct ps_server *ps,
                               struct rt_rpc_conn *conn,
                               uint64_t id,
                               const uint8_t *body,
                               size_t len)
{
    const uint32_t method = RT__METHOD__MOVE_ABORT;
    Rt__MoveAbort *ma = rt__move_abort__unpack(NULL, len, body);
    struct ps_move_out *mv;
    struct ps_move_in *mi;

    if (!ma) {
        rt_rpc_reply_err(conn, id, method, RT_EINVAL, "bad MoveAbort");
        return;
    }
    if (ps_fence_admit(ps, conn, id, method, ma->master_term) != 0) {
        rt__move_abort__free_unpacked(ma, NULL);
        return;
    }
    mv = ps__mvout_by_move(ps, ma->move_id);
    mi = ps__mvin_by_move(ps, ma->move_id);
    if (mv) {
        ps__mvout_abort(mv);
    }
    if (mi) {
        ps__mvin_abort(mi, conn, id, method);
    } else {
        ps_jobs_reply_empty(conn, id, method); /* unknown: nothing to undo */
    }
    rt__move_abort__free_unpacked(ma, NULL);
}

static void ps__move_done_req(struct ps_server *ps,
                              struct rt_rpc_conn *conn,
                              uint64_t id,
                              const uint8_t *body,
                              size_t len)
{
    const uint32_t method = RT__METHOD__MOVE_DONE;
    Rt__MoveAbort *ma = rt__move_abort__unpack(NULL, len, body);
    struct ps_move_out *mv;

    if (!ma) {
        rt_rpc_reply_err(conn, id, method, RT_EINVAL, "bad MoveAbort");
        return;
    }
    if (ps_fence_admit(ps, conn, id, method, ma->master_term) != 0) {
        rt__move_abort__free_unpacked(ma, NULL);
        return;
    }
    mv = ps__mvout_by_move(ps, ma->move_id);
    if (!mv) {
        if (ps_ranges_find(&ps->ranges, ma->range_id)) {
            rt_rpc_reply_err(conn, id, method, RT_EINVAL,
                             "no such move of a range served here");
        } else {
            ps_jobs_reply_empty(conn, id, method); /* done already */
        }
    } else if (mv->state != PS_MVOUT_DONE) {
        rt_rpc_reply_err(conn, id, method, RT_EINVAL,
                         "the move has not finished copying");
    } else {
        ps__mvout_drop(mv, conn, id, method);
    }
    rt__move_abort__free_unpacked(ma, NULL);
}

void ps_move_on_request(struct ps_server *ps,
                        struct rt_rpc_conn *conn,
                        uint32_t method,
                        uint64_t id,
                        const uint8_t *body,
                        size_t len)
{
    switch (method) {
        case RT__METHOD__MOVE_OUT:
            ps__mvout_request(ps, conn, id, body, len);
            break;
        case RT__METHOD__MOVE_ABORT:
            ps__move_abort_req(ps, conn, id, body, len);
            break;
        case RT__METHOD__MOVE_DONE:
            ps__move_done_req(ps, conn, id, body, len);
            break;
        case RT__METHOD__MIGRATE_BEGIN:
            ps__mvin_begin(ps, conn, id, body, len);
            break;
        case RT__METHOD__MIGRATE_DATA:
            ps__mvin_data(ps, conn, id, body, len);
            break;
        case RT__METHOD__MIGRATE_END:
            ps__mvin_end(ps, conn, id, body, len);
            break;
        default:
            rt_rpc_reply_err(conn, id, method, RT_ENOTIMPL,
                             "not a move method");
            break;
    }
}

/* Assignments, start, stop */

void ps_move_assigned(struct ps_server *ps, int registration)
{
    ps__mvout_assigned(ps, registration);
    ps__mvin_assigned(ps);
}

static void ps__restore_span(uint64_t seq, const struct ps_span *sp, void *arg)
{
    struct ps__restore *rs = arg;
    rt_log(RT_LOG_INFO, "resuming the drop of table %llu [%s, %s)",
           (unsigned long long)sp->table_id, sp->low,
           sp->high ? sp->high : "+inf");
    ps_writer_submit(rs->ps->writer, &ps__span_drop(rs->ps, seq, sp)->job);
    if (seq >= rs->max_seq) {
        rs->max_seq = seq + 1;
    }
}

int ps_move_start(struct ps_server *ps)
{
    struct ps__restore rs = {ps, 1, 0};
    int rc;

    rc = ps_store_pending_spans(ps->store, ps__restore_span, &rs);
    if (rc == 0) {
        rc = ps_store_meta_scan(ps->store, PS_META_MVOUT, ps__mvout_restore,
                                &rs);
    }
    if (rc == 0) {
        rc = ps_store_meta_scan(ps->store, PS_META_MVIN, ps__mvin_restore, &rs);
    }
    /* Marker ids must not repeat: start after the highest pending one,
     * and after anything a clock-free counter could have used before. */
    ps->span_seq = rs.max_seq > ps->span_seq ? rs.max_seq : ps->span_seq;
    if (ps->span_seq < 1) {
        ps->span_seq = 1;
    }
    return rc;
}

void ps_move_stop(struct ps_server *ps)
{
    ps__mvout_stop(ps);
}

void ps_move_close(struct ps_server *ps)
{
    ps__mvout_close(ps);
    ps__mvin_close(ps);
}

const char *ps_move_out_state(const struct ps_server *ps, uint64_t range_id)
{
    const struct ps_move_out *mv = ps__mvout_by_range(ps, range_id);
    return mv ? ps__mvout_state_name(mv->state) : NULL;
}

void ps_move_metrics(const struct ps_server *ps, struct rt_buf *out)
{
    size_t nout = 0, nin = 0;

    for (const struct ps_move_out *mv = ps->moves_out; mv; mv = mv->next) {
        nout++;
    }
    for (const struct ps_move_in *mi = ps->moves_in; mi; mi = mi->next) {
        nin++;
    }
    rt_buf_printf(out,
                  "# HELP rt_ps_moves_out Moves out of this server now.\n"
                  "# TYPE rt_ps_moves_out gauge\nrt_ps_moves_out %zu\n"
                  "# HELP rt_ps_moves_in Ranges being received or held.\n"
                  "# TYPE rt_ps_moves_in gauge\nrt_ps_moves_in %zu\n",
                  nout, nin);
    rt_buf_printf(out,
                  "# HELP rt_ps_move_out_state One series per move "
                  "out, labelled with its state.\n"
                  "# TYPE rt_ps_move_out_state gauge\n");
    for (const struct ps_move_out *mv = ps->moves_out; mv; mv = mv->next) {
        rt_buf_printf(out,
                      "rt_ps_move_out_state{move=\"%llu\",range=\"%llu"
                      "\",state=\"%s\"} 1\n",
                      (unsigned long long)mv->move_id,
                      (unsigned long long)mv->range_id,
                      ps__mvout_state_name(mv->state));
    }
    rt_buf_printf(out,
                  "# HELP rt_ps_move_in_state One series per move "
                  "in, labelled with its state.\n"
                  "# TYPE rt_ps_move_in_state gauge\n");
    for (const struct ps_move_in *mi = ps->moves_in; mi; mi = mi->next) {
        rt_buf_printf(out,
                      "rt_ps_move_in_state{move=\"%llu\",range=\"%llu\","
                      "state=\"%s\"} 1\n",
                      (unsigned long long)mi->move_id,
                      (unsigned long long)mi->range_id,
                      ps__mvin_state_name(mi->state));
    }
    rt_buf_printf(out,
                  "# HELP rt_ps_moves_total Moves by side and outcome.\n"
                  "# TYPE rt_ps_moves_total counter\n"
                  "rt_ps_moves_total{side=\"out\",result=\"copied\"} %llu\n"
                  "rt_ps_moves_total{side=\"out\",result=\"failed\"} %llu\n"
                  "rt_ps_moves_total{side=\"out\",result=\"dropped\"} %llu\n"
                  "rt_ps_moves_total{side=\"in\",result=\"received\"} %llu\n"
                  "rt_ps_moves_total{side=\"in\",result=\"aborted\"} %llu\n"
                  "# HELP rt_ps_move_last_frozen_ms Frozen window of the "
                  "last move out (freeze to target confirmation).\n"
                  "# TYPE rt_ps_move_last_frozen_ms gauge\n"
                  "rt_ps_move_last_frozen_ms %llu\n"
                  "# HELP rt_ps_move_last_snapshot_ms Snapshot copy time "
                  "of the last move out.\n"
                  "# TYPE rt_ps_move_last_snapshot_ms gauge\n"
                  "rt_ps_move_last_snapshot_ms %llu\n"
                  "# HELP rt_ps_span_drops Key span deletions queued or "
                  "running.\n# TYPE rt_ps_span_drops gauge\n"
                  "rt_ps_span_drops %zu\n",
                  (unsigned long long)ps->mvc.out_done,
                  (unsigned long long)ps->mvc.out_failed,
                  (unsigned long long)ps->mvc.out_dropped,
                  (unsigned long long)ps->mvc.in_done,
                  (unsigned long long)ps->mvc.in_aborted,
                  (unsigned long long)ps->mvc.last_frozen_ms,
                  (unsigned long long)ps->mvc.last_snapshot_ms, ps->span_drops);
}
