/* Range moves: what both sides share. META jobs that persist the range
 * set together with extra meta changes (freeze markers, move records,
 * span drop markers) in one transaction (ps_jobs' META job with extra
 * ops), span drops (the keys of a span deleted in chunks by the writer),
 * writer barriers, and the check of every state change against a side's
 * table. Each job calls its done callback (when set) on the loop thread
 * and frees itself.
 *
 * Thread: loop thread only. */
#include "ps_move_jobs.h"

#include <stdlib.h>
#include <string.h>

#include "ps_jobs.h"
#include "rt.pb-c.h"
#include "rt_alloc.h"
#include "rt_err.h"
#include "rt_log.h"

void ps__move_check_state(uint64_t move_id,
                          const unsigned *allowed,
                          const char *const *names,
                          unsigned from,
                          unsigned to)
{
    if (!(allowed[from] & PS__BIT(to))) {
        rt_log(RT_LOG_ERROR, "move %llu: illegal state change %s -> %s",
               (unsigned long long)move_id, names[from], names[to]);
        RT_PRE(!"illegal move state change");
    }
}

/* Meta jobs with extra changes */

struct ps_mjob *ps__mjob_new(struct ps_server *ps)
{
    struct ps_mjob *m = rt_xcalloc(1, sizeof(*m));
    m->ps = ps;
    rt_buf_init(&m->blob);
    rt_buf_init(&m->keys);
    rt_buf_init(&m->vals);
    return m;
}

/* Adds a put (@val non-NULL) or delete of meta key @key. Offsets are kept
 * and resolved at submit (the buffers may move while growing). */
static void ps__mjob_put(struct ps_mjob *m,
                         const struct rt_buf *key,
                         const void *val,
                         size_t vn)
{
    size_t i = m->n_ops++;
    struct ps_meta_op *op = &m->ops[i];

    RT_PRE(m->n_ops <= sizeof(m->ops) / sizeof(m->ops[0]));
    m->koff[i] = m->keys.len;
    op->kn = key->len;
    rt_buf_append(&m->keys, key->data, key->len);
    op->del = val == NULL;
    m->voff[i] = m->vals.len;
    op->vn = val ? vn : 0;
    if (val && vn) {
        rt_buf_append(&m->vals, val, vn);
    }
}

void ps__mjob_op(struct ps_mjob *m,
                 const char *prefix,
                 uint64_t id,
                 const void *val,
                 size_t vn)
{
    struct rt_buf k = RT_BUF_INIT;

    ps_store_meta_key(&k, prefix, id);
    ps__mjob_put(m, &k, val, vn);
    rt_buf_free(&k);
}

static void ps__mjob_cb(struct ps_job *job)
{
    struct ps_mjob *m = container_of(job, struct ps_mjob, job);

    if (job->status != 0) {
        rt_log(RT_LOG_ERROR, "move: persisting meta failed: %s",
               rt_strerror(job->status));
    }
    if (m->done) {
        m->done(m, job->status);
    }
    ps_jobs_answer(m->conn, m->id, m->method, job->status, "persisting failed");
    rt_buf_free(&m->blob);
    rt_buf_free(&m->keys);
    rt_buf_free(&m->vals);
    free(m);
}

/* Persists the current range set plus @m's ops in one transaction. */
void ps__mjob_submit(struct ps_mjob *m)
{
    struct ps_server *ps = m->ps;

    for (size_t i = 0; i < m->n_ops; i++) {
        m->ops[i].key = m->keys.data + m->koff[i];
        m->ops[i].val = m->ops[i].vn ? m->vals.data + m->voff[i] : NULL;
    }
    ps_jobs_meta_init(ps, &m->job, &m->blob);
    m->job.cb = ps__mjob_cb;
    m->job.u.meta.ops = m->ops;
    m->job.u.meta.n_ops = m->n_ops;
    if (m->conn) {
        rt_rpc_conn_ref(m->conn);
    }
    ps_writer_submit(ps->writer, &m->job);
}

/* Adds the span marker of a new span drop to @m; returns its seq. */
uint64_t ps__mjob_span(struct ps_mjob *m, const struct ps_span *sp)
{
    struct rt_buf k = RT_BUF_INIT, v = RT_BUF_INIT;
    uint64_t seq = m->ps->span_seq++;

    ps_store_span_marker(seq, sp, &k, &v);
    ps__mjob_put(m, &k, v.data, v.len);
    rt_buf_free(&k);
    rt_buf_free(&v);
    return seq;
}

/* Span drops */

static void ps__sjob_cb(struct ps_job *job)
{
    struct ps_sjob *sj = container_of(job, struct ps_sjob, job);

    sj->ps->span_drops--;
    if (sj->done) {
        sj->done(sj, job->status);
    }
    free(sj->low);
    free(sj->high);
    free(sj);
}

/* Queues the drop of span @sp with marker id @seq (the marker should have
 * been committed already, e.g. by a META job, for the drop to survive a
 * crash before its first chunk). */
struct ps_sjob *ps__span_drop(struct ps_server *ps,
                              uint64_t seq,
                              const struct ps_span *sp)
{
    struct ps_sjob *sj = rt_xcalloc(1, sizeof(*sj));

    sj->ps = ps;
    sj->low = rt_xstrdup(sp->low);
    sj->high = sp->high ? rt_xstrdup(sp->high) : NULL;
    sj->job.kind = PS_JOB_DROP_SPAN;
    sj->job.cb = ps__sjob_cb;
    sj->job.u.span.seq = seq;
    sj->job.u.span.span.table_id = sp->table_id;
    sj->job.u.span.span.low = sj->low;
    sj->job.u.span.span.high = sj->high;
    ps->span_drops++;
    return sj;
}

/* Barriers */

struct ps_barrier
{
    struct ps_job job;
    void (*done)(void *arg, int status);
    void *arg;
};

static void ps__barrier_cb(struct ps_job *job)
{
    struct ps_barrier *b = container_of(job, struct ps_barrier, job);
    b->done(b->arg, job->status);
    free(b);
}

void ps__barrier(struct ps_server *ps, void (*done)(void *, int), void *arg)
{
    struct ps_barrier *b = rt_xcalloc(1, sizeof(*b));
    b->done = done;
    b->arg = arg;
    b->job.kind = PS_JOB_BARRIER;
    b->job.cb = ps__barrier_cb;
    ps_writer_submit(ps->writer, &b->job);
}
