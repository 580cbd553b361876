/* Range moves, the target side (docs/DESIGN-moves.md; DESIGN §5).
 *
 * MIGRATE_BEGIN records the move ("mvin" ‖ move id marker) and
 * clears the span (a span drop) before it answers; MIGRATE_DATA writes the
 * records as raw changes through the writer (group commits, synced);
 * MIGRATE_END checks the record count and answers after a BARRIER, i.e.
 * after everything received is durable. The range is not served until an
 * assignment lists it, which also forgets the record; MOVE_ABORT deletes
 * what was received (span drop) and forgets it.
 *
 * The states of a record are in ps__mvin_allowed. Failure modes: a
 * record outside the range, malformed or failing its checksum
 * (RT_ECORRUPT), a failed write or a wrong record count make the record
 * FAILED; later MIGRATE_DATA / END calls get its error, and MOVE_ABORT
 * deletes what it holds.
 *
 * Thread: loop thread only. */
#include "ps_move_in.h"

#include <stdlib.h>
#include <string.h>

#include "ps_jobs.h"
#include "ps_move_jobs.h"
#include "rt.pb-c.h"
#include "rt_alloc.h"
#include "rt_entity.h"
#include "rt_err.h"
#include "rt_key.h"
#include "rt_log.h"
#include "rt_utf8.h"

/* State */

static const char *const ps__mvin_names[PS_MVIN__NR] = {
    "clearing", "receiving", "complete", "restored", "failed"};

/* The allowed changes, one bit per target state. CLEARING and RESTORED
 * are first states (ps__mvin_new). A repeated MIGRATE_END confirms a
 * COMPLETE move again, and a MIGRATE_DATA the source sent after its
 * MIGRATE_END can still fail one; FAILED and RESTORED are final (the
 * record goes away with an abort or an assignment). */
static const unsigned ps__mvin_allowed[PS_MVIN__NR] = {
    [PS_MVIN_CLEARING] = PS__BIT(PS_MVIN_RECEIVING) | PS__BIT(PS_MVIN_FAILED),
    [PS_MVIN_RECEIVING] = PS__BIT(PS_MVIN_COMPLETE) | PS__BIT(PS_MVIN_FAILED),
    [PS_MVIN_COMPLETE] = PS__BIT(PS_MVIN_COMPLETE) | PS__BIT(PS_MVIN_FAILED),
    [PS_MVIN_RESTORED] = 0,
    [PS_MVIN_FAILED] = 0,
};

const char *ps__mvin_state_name(enum ps_mvin_state s)
{
    return ps__mvin_names[s];
}

/* The one place a received move's state changes. */
static void ps__mvin_set_state(struct ps_move_in *mi, enum ps_mvin_state to)
{
    ps__move_check_state(mi->move_id, ps__mvin_allowed, ps__mvin_names,
                         mi->state, to);
    mi->state = to;
}

/* A record that cannot complete: later calls get @code. */
static void ps__mvin_fail(struct ps_move_in *mi, int code)
{
    ps__mvin_set_state(mi, PS_MVIN_FAILED);
    mi->status = code;
}

static int ps__key_in(const uint8_t *k,
                      size_t kn,
                      const struct rt_buf *lo,
                      const struct rt_buf *hi)
{
    int c1 = memcmp(k, lo->data, kn < lo->len ? kn : lo->len);
    int c2 = memcmp(k, hi->data, kn < hi->len ? kn : hi->len);
    if (c1 < 0 || (c1 == 0 && kn < lo->len)) {
        return 0;
    }
    return c2 < 0 || (c2 == 0 && kn < hi->len);
}

struct ps_move_in *ps__mvin_by_move(struct ps_server *ps, uint64_t move_id)
{
    for (struct ps_move_in *mi = ps->moves_in; mi; mi = mi->next) {
        if (mi->move_id == move_id) {
            return mi;
        }
    }
    return NULL;
}

static void ps__mvin_free(struct ps_move_in *mi)
{
    free(mi->low);
    free(mi->high);
    rt_buf_free(&mi->lo);
    rt_buf_free(&mi->hi);
    free(mi);
}

static void ps__mvin_unlink(struct ps_move_in *mi)
{
    struct ps_server *ps = mi->ps;
    for (struct ps_move_in **pp = &ps->moves_in; *pp; pp = &(*pp)->next) {
        if (*pp == mi) {
            *pp = mi->next;
            break;
        }
    }
    mi->next = NULL;
}

/* A new record in its first state: CLEARING (MIGRATE_BEGIN) or RESTORED
 * (from meta after a restart), linked into ps->moves_in. */
static struct ps_move_in *ps__mvin_new(struct ps_server *ps,
                                       uint64_t move_id,
                                       const Rt__Range *r,
                                       enum ps_mvin_state first)
{
    struct ps_move_in *mi = rt_xcalloc(1, sizeof(*mi));
    struct ps_span sp;

    RT_PRE(first == PS_MVIN_CLEARING || first == PS_MVIN_RESTORED);
    mi->ps = ps;
    mi->state = first;
    mi->move_id = move_id;
    mi->range_id = r->id;
    mi->table_id = r->table_id;
    mi->low = rt_xstrdup(r->low);
    mi->high = ps_range_pb_high(r) ? rt_xstrdup(r->high) : NULL;
    rt_buf_init(&mi->lo);
    rt_buf_init(&mi->hi);
    sp.table_id = mi->table_id;
    sp.low = mi->low;
    sp.high = mi->high;
    ps_span_keys(&sp, &mi->lo, &mi->hi);
    mi->next = ps->moves_in;
    ps->moves_in = mi;
    return mi;
}

/* MIGRATE_BEGIN, DATA, END */

/* Deferred reply bound to a move-in generation (the record may be gone
 * or begun again when the job calls back). */
struct ps_mvin_wait
{
    struct ps_server *ps;
    uint64_t move_id;
    uint64_t gen;
    struct rt_rpc_conn *conn;
    uint64_t id;
    int status;
};

/* Binds @w to @mi's current generation and request @id on @conn (not
 * ref'd here). */
static void ps__mvin_wait_init(struct ps_mvin_wait *w,
                               struct ps_move_in *mi,
                               struct rt_rpc_conn *conn,
                               uint64_t id)
{
    w->ps = mi->ps;
    w->move_id = mi->move_id;
    w->gen = mi->gen;
    w->conn = conn;
    w->id = id;
}

/* A heap wait holding a reference on @conn until ps__mvin_wait_free. */
static struct ps_mvin_wait *ps__mvin_wait_new(struct ps_move_in *mi,
                                              struct rt_rpc_conn *conn,
                                              uint64_t id)
{
    struct ps_mvin_wait *w = rt_xcalloc(1, sizeof(*w));
    ps__mvin_wait_init(w, mi, conn, id);
    rt_rpc_conn_ref(conn);
    return w;
}

static void ps__mvin_wait_free(struct ps_mvin_wait *w)
{
    rt_rpc_conn_unref(w->conn);
    free(w);
}

/* The record, or NULL if it is gone or begun again since @w was bound. */
static struct ps_move_in *ps__mvin_wait_find(struct ps_mvin_wait *w)
{
    struct ps_move_in *mi = ps__mvin_by_move(w->ps, w->move_id);
    return mi && mi->gen == w->gen ? mi : NULL;
}

/* The record of @move_id while it receives; otherwise answers @id with
 * the record's error (RT_ENOTFOUND when there is none) and returns NULL. */
static struct ps_move_in *ps__mvin_receiving(struct ps_server *ps,
                                             uint64_t move_id,
                                             struct rt_rpc_conn *conn,
                                             uint64_t id,
                                             uint32_t method)
{
    struct ps_move_in *mi = ps__mvin_by_move(ps, move_id);

    if (!mi || mi->state != PS_MVIN_RECEIVING) {
        rt_rpc_reply_err(conn, id, method,
                         mi && mi->status ? mi->status : RT_ENOTFOUND,
                         "no such move receiving");
        return NULL;
    }
    return mi;
}

static void ps__mvin_begin_meta_cb(struct ps_mjob *m, int status)
{
    struct ps_mvin_wait *w = m->arg;
    if (status != 0 && w->status == 0) {
        w->status = status;
    }
}

static void ps__mvin_cleared_cb(struct ps_sjob *sj, int status)
{
    struct ps_mvin_wait *w = sj->arg;
    struct ps_move_in *mi = ps__mvin_wait_find(w);
    const uint32_t method = RT__METHOD__MIGRATE_BEGIN;

    if (status != 0 && w->status == 0) {
        w->status = status;
    }
    if (!mi || mi->state != PS_MVIN_CLEARING) {
        rt_rpc_reply_err(w->conn, w->id, method, RT_ECANCELED, "move aborted");
    } else if (w->status != 0) {
        ps__mvin_fail(mi, w->status);
        rt_rpc_reply_err(w->conn, w->id, method, w->status,
                         "clearing the range failed");
    } else {
        ps__mvin_set_state(mi, PS_MVIN_RECEIVING);
        ps_jobs_reply_empty(w->conn, w->id, method);
    }
    ps__mvin_wait_free(w);
}

/* 1 when @mb replaces record @mi: the same move begun again, or another
 * move of the same range. */
static int ps__mvin_replaced_by(const struct ps_move_in *mi,
                                const Rt__MigrateBegin *mb)
{
    return mi->move_id == mb->move_id || (mi->range_id == mb->range->id &&
                                          mi->table_id == mb->range->table_id);
}

void ps__mvin_begin(struct ps_server *ps,
                    struct rt_rpc_conn *conn,
                    uint64_t id,
                    const uint8_t *body,
                    size_t len)
{
    const uint32_t method = RT__METHOD__MIGRATE_BEGIN;
    Rt__MigrateBegin *mb = rt__migrate_begin__unpack(NULL, len, body);
    struct ps_move_in *mi;
    struct ps_mvin_wait *w;
    struct ps_mjob *m;
    struct ps_sjob *sj;
    struct ps_span sp;
    uint64_t seq;
    const char *high;

    if (!mb || !mb->range || mb->range->table_id == 0 || mb->move_id == 0) {
        rt_rpc_reply_err(conn, id, method, RT_EINVAL, "bad MigrateBegin");
        goto out;
    }
    high = ps_range_pb_high(mb->range);
    if (ps_ranges_overlap(&ps->ranges, mb->range->table_id,
                          mb->range->low ? mb->range->low : "", high, 0)) {
        rt_rpc_reply_err(conn, id, method, RT_EINVAL,
                         "the range overlaps a range served here");
        goto out;
    }
    /* Older records this one replaces: the same move begun again, or an
     * earlier move of the same range (the master runs one move per range
     * at a time, so that one is dead; its keys are cleared below). Any
     * other overlap is refused. */
    for (mi = ps->moves_in; mi; mi = mi->next) {
        int same = ps__mvin_replaced_by(mi, mb);
        if (same && mi->state == PS_MVIN_CLEARING) {
            rt_rpc_reply_err(conn, id, method, RT_EBUSY,
                             "MIGRATE_BEGIN already in progress");
            goto out;
        }
        if (same || mi->table_id != mb->range->table_id) {
            continue;
        }
        if ((!mi->high || rt_utf16_cmpz(mb->range->low, mi->high) < 0) &&
            (!high || rt_utf16_cmpz(mi->low, high) < 0)) {
            rt_rpc_reply_err(conn, id, method, RT_EBUSY,
                             "another move into this key range is pending");
            goto out;
        }
    }
    m = ps__mjob_new(ps);
    for (struct ps_move_in *next = NULL, *o = ps->moves_in; o; o = next) {
        next = o->next;
        if (!ps__mvin_replaced_by(o, mb)) {
            continue;
        }
        if (o->move_id != mb->move_id && m->n_ops < 6) {
            ps__mjob_op(m, PS_META_MVIN, o->move_id, NULL, 0);
            rt_log(RT_LOG_INFO,
                   "move %llu: replaced by move %llu of the "
                   "same range",
                   (unsigned long long)o->move_id,
                   (unsigned long long)mb->move_id);
        }
        ps__mvin_unlink(o);
        ps__mvin_free(o);
    }
    mi = ps__mvin_new(ps, mb->move_id, mb->range, PS_MVIN_CLEARING);
    mi->gen = ++ps->span_seq; /* any unique number */

    w = ps__mvin_wait_new(mi, conn, id);

    /* Record the move and the span drop marker, then clear the span. */
    sp.table_id = mi->table_id;
    sp.low = mi->low;
    sp.high = mi->high;
    ps__mjob_op(m, PS_META_MVIN, mi->move_id, body, len);
    seq = ps__mjob_span(m, &sp);
    m->done = ps__mvin_begin_meta_cb;
    m->arg = w;
    ps__mjob_submit(m);
    sj = ps__span_drop(ps, seq, &sp);
    sj->done = ps__mvin_cleared_cb;
    sj->arg = w;
    ps_writer_submit(ps->writer, &sj->job);
    rt_log(RT_LOG_INFO,
           "move %llu: receiving range %llu (table %llu [%s, "
           "%s)) from %s",
           (unsigned long long)mi->move_id, (unsigned long long)mi->range_id,
           (unsigned long long)mi->table_id, mi->low,
           mi->high ? mi->high : "+inf", rt_rpc_conn_peer(conn));
out:
    if (mb) {
        rt__migrate_begin__free_unpacked(mb, NULL);
    }
}

struct ps_mvin_data
{
    struct ps_job job;
    struct ps_mvin_wait w;
    Rt__MigrateData *msg;
    struct ps_kv kvs[];
};

static void ps__mvin_data_cb(struct ps_job *job)
{
    struct ps_mvin_data *d = container_of(job, struct ps_mvin_data, job);
    struct ps_move_in *mi = ps__mvin_wait_find(&d->w);
    int status = job->u.write.status;
    const uint32_t method = RT__METHOD__MIGRATE_DATA;

    if (status != 0 && mi && mi->status == 0) {
        ps__mvin_fail(mi, status);
    }
    if (status != 0) {
        rt_rpc_reply_err(d->w.conn, d->w.id, method, status,
                         "storing the records failed");
    } else if (!mi) {
        rt_rpc_reply_err(d->w.conn, d->w.id, method, RT_ECANCELED,
                         "move aborted");
    } else {
        ps_jobs_reply_empty(d->w.conn, d->w.id, method);
    }
    rt_rpc_conn_unref(d->w.conn);
    rt__migrate_data__free_unpacked(d->msg, NULL);
    free(d);
}

void ps__mvin_data(struct ps_server *ps,
                   struct rt_rpc_conn *conn,
                   uint64_t id,
                   const uint8_t *body,
                   size_t len)
{
    const uint32_t method = RT__METHOD__MIGRATE_DATA;
    Rt__MigrateData *md = rt__migrate_data__unpack(NULL, len, body);
    struct ps_move_in *mi;
    struct ps_mvin_data *d;
    uint64_t bytes = 0;

    if (!md) {
        rt_rpc_reply_err(conn, id, method, RT_EINVAL, "bad MigrateData");
        return;
    }
    mi = ps__mvin_receiving(ps, md->move_id, conn, id, method);
    if (!mi) {
        goto out_free;
    }
    for (size_t i = 0; i < md->n_kvs; i++) {
        const Rt__KeyValue *kv = md->kvs[i];
        uint64_t ticks;
        uint8_t flags;
        const uint8_t *blob;
        size_t blob_n;
        if (kv->key.len > RT_KEY_MAX ||
            !ps__key_in(kv->key.data, kv->key.len, &mi->lo, &mi->hi) ||
            (!kv->deleted &&
             rt_value_decode(kv->value.data, kv->value.len, &ticks, &flags,
                             &blob, &blob_n) != 0)) {
            rt_rpc_reply_err(conn, id, method, RT_EINVAL,
                             "record outside the range or malformed");
            ps__mvin_fail(mi, RT_EINVAL);
            goto out_free;
        }
        /* The source checked it too; this catches damage on the way. */
        if (!kv->deleted && rt_value_check(kv->value.data, kv->value.len,
                                           kv->key.data, kv->key.len) != 0) {
            rt_rpc_reply_err(conn, id, method, RT_ECORRUPT,
                             "record fails its checksum");
            ps__mvin_fail(mi, RT_ECORRUPT);
            goto out_free;
        }
        bytes += kv->key.len + kv->value.len;
    }
    d = rt_xcalloc(1, sizeof(*d) + md->n_kvs * sizeof(struct ps_kv));
    d->msg = md;
    ps__mvin_wait_init(&d->w, mi, conn, id);
    for (size_t i = 0; i < md->n_kvs; i++) {
        const Rt__KeyValue *kv = md->kvs[i];
        d->kvs[i].key = kv->key.data;
        d->kvs[i].kn = kv->key.len;
        d->kvs[i].val = kv->value.data;
        d->kvs[i].vn = kv->value.len;
        d->kvs[i].deleted = kv->deleted;
    }
    mi->received += md->n_kvs;
    mi->bytes += bytes;
    if (md->n_kvs == 0) {
        ps_jobs_reply_empty(conn, id, method);
        free(d);
        goto out_free;
    }
    rt_rpc_conn_ref(conn);
    d->job.kind = PS_JOB_WRITE;
    d->job.cb = ps__mvin_data_cb;
    d->job.u.write.table_id = mi->table_id;
    d->job.u.write.kvs = d->kvs;
    d->job.u.write.n_kvs = md->n_kvs;
    d->job.u.write.failed_index = -1;
    ps_writer_submit(ps->writer, &d->job);
    return;
out_free:
    rt__migrate_data__free_unpacked(md, NULL);
}

static void ps__mvin_end_done(void *arg, int status)
{
    struct ps_mvin_wait *w = arg;
    struct ps_move_in *mi = ps__mvin_wait_find(w);
    const uint32_t method = RT__METHOD__MIGRATE_END;

    if (!mi) {
        rt_rpc_reply_err(w->conn, w->id, method, RT_ECANCELED, "move aborted");
    } else if (status != 0 || mi->status != 0) {
        rt_rpc_reply_err(w->conn, w->id, method,
                         mi->status ? mi->status : status,
                         "storing the records failed");
    } else {
        /* Every record is committed (group commits are synced). */
        ps__mvin_set_state(mi, PS_MVIN_COMPLETE);
        w->ps->mvc.in_done++;
        rt_log(RT_LOG_INFO,
               "move %llu: range %llu received (%llu records, "
               "%llu bytes, durable); served once assigned",
               (unsigned long long)mi->move_id,
               (unsigned long long)mi->range_id,
               (unsigned long long)mi->received, (unsigned long long)mi->bytes);
        ps_jobs_reply_empty(w->conn, w->id, method);
    }
    ps__mvin_wait_free(w);
}

void ps__mvin_end(struct ps_server *ps,
                  struct rt_rpc_conn *conn,
                  uint64_t id,
                  const uint8_t *body,
                  size_t len)
{
    const uint32_t method = RT__METHOD__MIGRATE_END;
    Rt__MigrateEnd *me = rt__migrate_end__unpack(NULL, len, body);
    struct ps_move_in *mi;
    struct ps_mvin_wait *w;

    if (!me) {
        rt_rpc_reply_err(conn, id, method, RT_EINVAL, "bad MigrateEnd");
        return;
    }
    mi = ps__mvin_receiving(ps, me->move_id, conn, id, method);
    if (!mi) {
        goto out;
    }
    if (mi->received != me->entities) {
        rt_log(RT_LOG_ERROR,
               "move %llu: source sent %llu records, %llu "
               "arrived",
               (unsigned long long)mi->move_id,
               (unsigned long long)me->entities,
               (unsigned long long)mi->received);
        ps__mvin_fail(mi, RT_ECORRUPT);
        rt_rpc_reply_err(conn, id, method, RT_ECORRUPT,
                         "record count mismatch");
        goto out;
    }
    w = ps__mvin_wait_new(mi, conn, id);
    ps__barrier(ps, ps__mvin_end_done, w);
out:
    rt__migrate_end__free_unpacked(me, NULL);
}

/* Abort, assignments, restart */

/* Deletes what @mi received (unless a served range covers the span now)
 * and forgets it; answers @conn once that is durably scheduled. */
void ps__mvin_abort(struct ps_move_in *mi,
                    struct rt_rpc_conn *conn,
                    uint64_t id,
                    uint32_t method)
{
    struct ps_server *ps = mi->ps;
    struct ps_span sp = {mi->table_id, mi->low, mi->high};
    struct ps_mjob *m = ps__mjob_new(ps);
    uint64_t seq = 0;
    int del = !ps_ranges_overlap(&ps->ranges, sp.table_id, sp.low, sp.high, 0);

    ps__mjob_op(m, PS_META_MVIN, mi->move_id, NULL, 0);
    if (del) {
        seq = ps__mjob_span(m, &sp);
    }
    m->conn = conn;
    m->id = id;
    m->method = method;
    ps__mjob_submit(m);
    if (del) {
        ps_writer_submit(ps->writer, &ps__span_drop(ps, seq, &sp)->job);
    }
    rt_log(RT_LOG_INFO,
           "move %llu: aborted; deleting the %llu records "
           "received for range %llu",
           (unsigned long long)mi->move_id, (unsigned long long)mi->received,
           (unsigned long long)mi->range_id);
    ps->mvc.in_aborted++;
    ps__mvin_unlink(mi);
    ps__mvin_free(mi);
}

void ps__mvin_assigned(struct ps_server *ps)
{
    struct ps_move_in *mi, *inext;

    for (mi = ps->moves_in; mi; mi = inext) {
        inext = mi->next;
        if (ps_ranges_find(&ps->ranges, mi->range_id)) {
            struct ps_mjob *m = ps__mjob_new(ps);
            rt_log(RT_LOG_INFO,
                   "move %llu: range %llu assigned here; "
                   "serving what was received",
                   (unsigned long long)mi->move_id,
                   (unsigned long long)mi->range_id);
            ps__mjob_op(m, PS_META_MVIN, mi->move_id, NULL, 0);
            ps__mjob_submit(m);
            ps__mvin_unlink(mi);
            ps__mvin_free(mi);
        }
    }
}

int ps__mvin_restore(uint64_t move_id, const uint8_t *val, size_t vn, void *arg)
{
    struct ps__restore *rs = arg;
    Rt__MigrateBegin *mb;
    struct ps_move_in *mi;

    (void)move_id; /* the record holds it too */
    mb = rt__migrate_begin__unpack(NULL, vn, val);
    if (!mb || !mb->range) {
        if (mb) {
            rt__migrate_begin__free_unpacked(mb, NULL);
        }
        return 0;
    }
    mi = ps__mvin_new(rs->ps, mb->move_id, mb->range, PS_MVIN_RESTORED);
    rt_log(RT_LOG_INFO,
           "move %llu: holding keys received for range %llu; "
           "waiting for the master (assignment or MOVE_ABORT)",
           (unsigned long long)mi->move_id, (unsigned long long)mi->range_id);
    rt__migrate_begin__free_unpacked(mb, NULL);
    return 0;
}

void ps__mvin_close(struct ps_server *ps)
{
    while (ps->moves_in) {
        struct ps_move_in *mi = ps->moves_in;
        ps->moves_in = mi->next;
        ps__mvin_free(mi);
    }
}
