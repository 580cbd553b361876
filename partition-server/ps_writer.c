/* Writer thread: group commit and hand-back to the loop.
 *
 * Happy path: submit (loop) -> queue + cond signal -> the thread takes the
 * whole queue (bounded by PS_GROUP_MAX_*), commits the writes in one
 * transaction, persists meta jobs, appends them to the done queue,
 * uv_async_send -> the loop drains the done queue and runs callbacks.
 * Drops advance one chunk per iteration, between groups, so a large drop
 * interleaves with writes instead of blocking them.
 *
 * Before taking a group the thread may wait a short, bounded time for more
 * writes (ps_writer_set_group_wait; the rule is ps_gwait.h's): it sleeps on
 * the same condition variable, which every submit signals, and takes the
 * group as soon as the queue reaches the policy's target, a non-write job
 * arrives, the bound passes or the writer is stopped. */
#include "ps_writer.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "ps_gwait.h"
#include "rt_alloc.h"
#include "rt_err.h"
#include "rt_log.h"
#include "rt_time.h"

struct ps_writer
{
    uv_loop_t *loop;
    struct ps_store *store;
    uv_thread_t thread;
    uv_async_t async;
    uv_mutex_t mu;
    uv_cond_t cond;
    /* Protected by mu. */
    struct ps_job *q_head, *q_tail;
    struct ps_job *d_head, *d_tail;
    int stop;
    struct ps_mlog *logs;
    struct ps_writer_stats stats;
    uint64_t busy_since_us; /* the group or drop chunk running began (0) */
    size_t q_ops;           /* entity ops and raw changes queued */
    size_t q_other;         /* queued jobs that are not writes */
    uint64_t group_wait_us; /* ps_writer_set_group_wait; 0 = off */
    /* Loop thread only. */
    size_t pending_ops;
    int stopped; /* ps_writer_stop ran: submit is a bug */
    /* Writer thread only. */
    struct ps_job *drops_head, *drops_tail;
    struct rt_buf capbuf;
    int group_capture; /* the group being committed captures */
    /* The previous group commit holding writes (ps_gwait.h inputs). */
    uint64_t last_sync_us;
    uint64_t last_end_us;
    size_t expect_ops;
    size_t last_group_ops;
    struct ps_gwait gwait; /* the policy's back-off */
    uint64_t waited_us;    /* the wait before the group being committed */
    /* Set before the thread sees a job (ps_writer_set_ship). */
    ps_writer_ship_fn ship_fn;
    void *ship_arg;
};

/* A PS_JOB_SHIPPED job: the writer's, freed by its callback. */
struct ps__shipjob
{
    struct ps_job job;
    struct ps_writer *w;
    size_t n;
    struct ps_shipped v[];
};

static void ps__list_push(struct ps_job **head,
                          struct ps_job **tail,
                          struct ps_job *job)
{
    job->next = NULL;
    if (*tail) {
        (*tail)->next = job;
    } else {
        *head = job;
    }
    *tail = job;
}

/* Entity ops and raw changes of @j (0 for a job that is not a write). */
static size_t ps__job_ops(const struct ps_job *j)
{
    if (j->kind != PS_JOB_WRITE) {
        return 0;
    }
    return j->u.write.n_ops + (j->u.write.kvs ? j->u.write.n_kvs : 0);
}

/* Writer thread */

static void ps__writer_done(struct ps_writer *w,
                            struct ps_job *head,
                            struct ps_job *tail)
{
    if (!head) {
        return;
    }
    uv_mutex_lock(&w->mu);
    if (w->d_tail) {
        w->d_tail->next = head;
    } else {
        w->d_head = head;
    }
    w->d_tail = tail;
    uv_mutex_unlock(&w->mu);
    uv_async_send(&w->async);
}

/* Takes queued jobs up to the group bounds. Called with mu held. */
static struct ps_job *ps__writer_take(struct ps_writer *w)
{
    struct ps_job *head = w->q_head, *last = NULL, *j;
    size_t ops = 0, bytes = 0;

    for (j = w->q_head; j; j = j->next) {
        if (last && (ops >= PS_GROUP_MAX_OPS || bytes >= PS_GROUP_MAX_BYTES)) {
            break;
        }
        /* A group runs its writes before its replica-state jobs: a write
         * queued after one (the first write of a range split here, whose
         * LSN continues the `rs` record written just before) waits for
         * the next group. */
        if (last && last->kind == PS_JOB_REPL_STATE &&
            j->kind == PS_JOB_WRITE) {
            break;
        }
        if (j->kind == PS_JOB_WRITE) {
            ops += j->u.write.n_ops + j->u.write.n_kvs;
            for (size_t i = 0; i < j->u.write.n_ops; i++) {
                bytes += j->u.write.ops[i].props_len;
            }
            for (size_t i = 0; j->u.write.kvs && i < j->u.write.n_kvs; i++) {
                bytes += j->u.write.kvs[i].kn + j->u.write.kvs[i].vn;
            }
        }
        last = j;
    }
    if (!last) {
        return NULL;
    }
    for (j = head;; j = j->next) {
        if (j->kind == PS_JOB_WRITE) {
            w->q_ops -= ps__job_ops(j);
        } else {
            w->q_other--;
        }
        if (j == last) {
            break;
        }
    }
    w->q_head = last->next;
    if (!w->q_head) {
        w->q_tail = NULL;
    }
    last->next = NULL;
    return head;
}

/* Appends the captured changes inside each log's bounds to that log.
 * Called with mu held. */
static void ps__writer_distribute(struct ps_writer *w)
{
    const struct rt_buf *b = &w->capbuf;
    struct ps_change c;
    size_t off = 0;
    int rc;

    while ((rc = ps_change_next(b->data, b->len, &off, &c)) == 1) {
        for (struct ps_mlog *l = w->logs; l; l = l->next) {
            size_t sz = 17 + c.kn + c.vn;
            int k1 =
                memcmp(c.key, l->lo.data, c.kn < l->lo.len ? c.kn : l->lo.len);
            int k2 =
                memcmp(c.key, l->hi.data, c.kn < l->hi.len ? c.kn : l->hi.len);
            if (k1 < 0 || (k1 == 0 && c.kn < l->lo.len) || k2 > 0 ||
                (k2 == 0 && c.kn >= l->hi.len)) {
                continue; /* outside [lo, hi) */
            }
            if (l->bytes + sz > PS_MLOG_MAX_BYTES) {
                l->overflow = 1;
                continue;
            }
            ps_change_append(&l->recs, c.txn_id, c.key, c.kn, c.val, c.vn,
                             c.deleted);
            l->n++;
            l->bytes += sz;
            w->stats.captured++;
        }
    }
    if (rc < 0) {
        rt_log(RT_LOG_ERROR, "writer: corrupt capture buffer");
    }
    rt_buf_reset(&w->capbuf);
}

static void ps__writer_shipped_cb(struct ps_job *job)
{
    struct ps__shipjob *sj = container_of(job, struct ps__shipjob, job);
    sj->w->ship_fn(sj->w->ship_arg, sj->v, sj->n);
    free(sj);
}

/* The store's pre-commit hook: the group's records go to the logs and its
 * (range, lsn, txn) list to the loop now, ahead of its commit. */
static void ps__writer_precommit(void *arg,
                                 struct ps_write *const *wr,
                                 size_t n,
                                 uint64_t txn_id)
{
    struct ps_writer *w = arg;
    struct ps__shipjob *sj;
    size_t k = 0;

    if (!w->group_capture) {
        return; /* no log saw it: the records come with the callbacks */
    }
    sj = rt_xcalloc(1, sizeof(*sj) + n * sizeof(sj->v[0]));
    for (size_t i = 0; i < n; i++) {
        bool seen = false;
        if (wr[i]->lsn == 0 || wr[i]->repl_lsn != 0) {
            continue;
        }
        for (size_t j = 0; j < k && !seen; j++) {
            seen = sj->v[j].range_id == wr[i]->range_id;
        }
        if (!seen) {
            sj->v[k++] = (struct ps_shipped){.range_id = wr[i]->range_id,
                                             .lsn = wr[i]->lsn,
                                             .txn_id = txn_id};
        }
    }
    sj->n = k;
    sj->w = w;
    sj->job.kind = PS_JOB_SHIPPED;
    sj->job.cb = ps__writer_shipped_cb;
    sj->job.next = NULL;
    ps_store_capture_take(w->store, &w->capbuf);
    uv_mutex_lock(&w->mu);
    ps__writer_distribute(w);
    uv_mutex_unlock(&w->mu);
    ps__writer_done(w, &sj->job, &sj->job);
}

static unsigned ps__hist_slot(size_t ops)
{
    unsigned i = 0;
    while (i < PS_WRITER_HIST - 1 && ((size_t)1 << i) < ops) {
        i++;
    }
    return i;
}

static void ps__writer_group(struct ps_writer *w,
                             struct ps_job *jobs,
                             int capture)
{
    struct ps_write *stack_writes[64];
    struct ps_write **writes = stack_writes;
    struct ps_job *done_head = NULL, *done_tail = NULL, *j, *next;
    size_t nw = 0, cap = 64, ops = 0, raw = 0;
    uint64_t t0, dt;

    for (j = jobs; j; j = j->next) {
        if (j->kind == PS_JOB_WRITE) {
            nw++;
        }
    }
    if (nw > cap) {
        writes = rt_xmalloc(nw * sizeof(*writes));
    }
    nw = 0;
    for (j = jobs; j; j = j->next) {
        if (j->kind == PS_JOB_WRITE) {
            writes[nw++] = &j->u.write;
            ops += j->u.write.n_ops;
            raw += j->u.write.kvs ? j->u.write.n_kvs : 0;
        }
    }

    ps_store_capture(w->store, capture);
    w->group_capture = capture;
    t0 = rt_time_mono_us();
    if (nw > 0) {
        ps_store_write_group(w->store, writes, nw);
    }
    dt = rt_time_mono_us() - t0;
    if (nw > 0) {
        rt_log(RT_LOG_DEBUG,
               "group commit: %zu writes, %zu ops, %llu us (waited %llu us)",
               nw, ops + raw, (unsigned long long)dt,
               (unsigned long long)w->waited_us);
    }
    if (capture) {
        ps_store_capture_take(w->store, &w->capbuf);
    }
    uv_mutex_lock(&w->mu);
    if (capture) {
        ps__writer_distribute(w);
    }
    if (nw > 0) {
        w->stats.groups++;
        w->stats.group_ops += ops + raw;
        w->stats.group_us += dt;
        w->stats.hist[ps__hist_slot(ops + raw)]++;
        w->stats.lat[rt_hist_bucket(dt)]++;
        w->stats.raw_kvs += raw;
        /* What the next group's wait is measured against: the clients
         * this group answers, plus those already queued, are the writes
         * likely to come. */
        w->last_sync_us = dt > 0 ? dt : 1;
        w->last_end_us = rt_time_mono_us();
        w->expect_ops = ops + raw + w->q_ops;
        w->last_group_ops = ops + raw;
    }
    uv_mutex_unlock(&w->mu);

    for (j = jobs; j; j = next) {
        next = j->next;
        switch (j->kind) {
            case PS_JOB_WRITE:
                j->status = j->u.write.status;
                j->exec_us = ops ? dt * j->u.write.n_ops / ops : 0;
                ps__list_push(&done_head, &done_tail, j);
                break;
            case PS_JOB_META:
                t0 = rt_time_mono_us();
                j->status = ps_store_meta_write(
                    w->store, j->u.meta.server_id, j->u.meta.ranges,
                    j->u.meta.ranges_len, j->u.meta.master_term, j->u.meta.ops,
                    j->u.meta.n_ops);
                j->exec_us = rt_time_mono_us() - t0;
                if (j->status != 0) {
                    rt_log(RT_LOG_ERROR, "persisting meta failed: %s",
                           rt_strerror(j->status));
                }
                ps__list_push(&done_head, &done_tail, j);
                break;
            case PS_JOB_DROP_TABLE:
                j->u.drop.deleted = 0;
                j->exec_us = 0;
                ps__list_push(&w->drops_head, &w->drops_tail, j);
                break;
            case PS_JOB_DROP_SPAN:
                j->u.span.deleted = 0;
                j->exec_us = 0;
                ps__list_push(&w->drops_head, &w->drops_tail, j);
                break;
            case PS_JOB_REPL_STATE:
                /* After the group: the writes queued before it are
                 * durable first (a seal's answer counts on that). */
                t0 = rt_time_mono_us();
                j->status =
                    ps_store_repl_update(w->store, j->u.rstate.range_id,
                                         j->u.rstate.set, &j->u.rstate.rs);
                j->exec_us = rt_time_mono_us() - t0;
                if (j->status != 0) {
                    rt_log(RT_LOG_ERROR,
                           "persisting range %llu replica state failed: %s",
                           (unsigned long long)j->u.rstate.range_id,
                           rt_strerror(j->status));
                }
                ps__list_push(&done_head, &done_tail, j);
                break;
            case PS_JOB_REPAIR:
                t0 = rt_time_mono_us();
                j->status = ps_store_repair(w->store, j->u.repair.range_id,
                                            j->u.repair.key, j->u.repair.kn,
                                            j->u.repair.val, j->u.repair.vn,
                                            j->u.repair.min_lsn);
                j->exec_us = rt_time_mono_us() - t0;
                ps__list_push(&done_head, &done_tail, j);
                break;
            case PS_JOB_BARRIER:
                j->status = 0;
                ps__list_push(&done_head, &done_tail, j);
                break;
            default:
                j->status = RT_EINVAL;
                ps__list_push(&done_head, &done_tail, j);
                break;
        }
    }
    if (writes != stack_writes) {
        free(writes);
    }
    ps__writer_done(w, done_head, done_tail);
}

/* Logs how a table or span drop ended (@rc 0 or a negative code). */
static void ps__writer_drop_log(const struct ps_job *j, int rc)
{
    if (j->kind == PS_JOB_DROP_SPAN) {
        const struct ps_span *sp = &j->u.span.span;
        if (rc == 0) {
            rt_log(RT_LOG_INFO,
                   "dropped span of table %llu [%s, %s): %llu "
                   "keys deleted",
                   (unsigned long long)sp->table_id, sp->low ? sp->low : "",
                   sp->high ? sp->high : "+inf",
                   (unsigned long long)j->u.span.deleted);
        } else {
            rt_log(RT_LOG_ERROR, "span drop in table %llu failed: %s",
                   (unsigned long long)sp->table_id, rt_strerror(rc));
        }
    } else if (rc == 0) {
        rt_log(RT_LOG_INFO, "dropped table %llu: %llu keys deleted",
               (unsigned long long)j->u.drop.table_id,
               (unsigned long long)j->u.drop.deleted);
    } else {
        rt_log(RT_LOG_ERROR, "drop table %llu failed: %s",
               (unsigned long long)j->u.drop.table_id, rt_strerror(rc));
    }
}

/* One chunk of the oldest drop (a table or a span); completes it when
 * its keys are gone or it failed. */
static void ps__writer_drop_step(struct ps_writer *w)
{
    struct ps_job *j = w->drops_head;
    uint64_t t0 = rt_time_mono_us();
    int rc;

    if (j->kind == PS_JOB_DROP_SPAN) {
        rc = ps_store_span_drop_chunk(w->store, j->u.span.seq, &j->u.span.span,
                                      PS_DROP_CHUNK, &j->u.span.deleted);
    } else {
        rc = ps_store_drop_chunk(w->store, j->u.drop.table_id, PS_DROP_CHUNK,
                                 &j->u.drop.deleted);
    }
    j->exec_us += rt_time_mono_us() - t0;
    if (rc == 1) {
        return;
    }
    w->drops_head = j->next;
    if (!w->drops_head) {
        w->drops_tail = NULL;
    }
    j->status = rc;
    ps__writer_drop_log(j, rc);
    j->next = NULL;
    ps__writer_done(w, j, j);
}

/* Waits, with mu held and jobs queued, as long as ps_gwait_decide says
 * (see the file comment). */
static void ps__writer_group_wait(struct ps_writer *w)
{
    struct ps_gwait_in in;
    uint64_t now = rt_time_mono_us(), t0 = now, wait, deadline;
    size_t target = 0, before = w->q_ops;

    w->waited_us = 0;
    if (w->stop) {
        return;
    }
    in = (struct ps_gwait_in){
        .max_us = w->group_wait_us,
        .queued_ops = w->q_ops,
        .queued_other = w->q_other > 0,
        .last_sync_us = w->last_sync_us,
        .since_sync_us = now > w->last_end_us ? now - w->last_end_us : 0,
        .expect_ops = w->expect_ops,
        .last_group_ops = w->last_group_ops,
    };
    wait = ps_gwait_decide(&w->gwait, &in, &target);
    if (wait == 0) {
        return;
    }
    deadline = now + wait;
    while (!w->stop && w->q_other == 0 && w->q_ops < target && now < deadline) {
        (void)uv_cond_timedwait(&w->cond, &w->mu, (deadline - now) * 1000);
        now = rt_time_mono_us();
    }
    w->waited_us = now - t0;
    if (!ps_gwait_done(&w->gwait, &in, w->q_ops - before, w->waited_us)) {
        w->stats.waits_unpaid++;
    }
    w->stats.waits++;
    w->stats.wait_us += w->waited_us;
}

static void ps__writer_main(void *arg)
{
    struct ps_writer *w = arg;
    struct ps_job *jobs;
    int capture;

    for (;;) {
        uv_mutex_lock(&w->mu);
        while (!w->q_head && !w->drops_head && !w->stop) {
            uv_cond_wait(&w->cond, &w->mu);
        }
        if (w->stop && !w->q_head) {
            uv_mutex_unlock(&w->mu);
            break;
        }
        if (w->q_head) {
            ps__writer_group_wait(w);
        }
        jobs = ps__writer_take(w);
        /* Decided with the take: a log registered before this point sees
         * this group (see ps_writer.h). */
        capture = w->logs != NULL;
        uv_mutex_unlock(&w->mu);

        if (jobs || w->drops_head) {
            uv_mutex_lock(&w->mu);
            w->busy_since_us = rt_time_mono_us();
            uv_mutex_unlock(&w->mu);
        }
        if (jobs) {
            ps__writer_group(w, jobs, capture);
        }
        if (w->drops_head) {
            ps__writer_drop_step(w);
        }
        uv_mutex_lock(&w->mu);
        w->busy_since_us = 0;
        uv_mutex_unlock(&w->mu);
    }

    /* Unfinished drops: their meta marker resumes them on the next start. */
    while (w->drops_head) {
        struct ps_job *j = w->drops_head;
        w->drops_head = j->next;
        j->status = RT_ECANCELED;
        j->next = NULL;
        ps__writer_done(w, j, j);
    }
    w->drops_tail = NULL;
}

/* Loop thread */

static void ps__writer_drain(struct ps_writer *w)
{
    struct ps_job *j, *next;

    uv_mutex_lock(&w->mu);
    j = w->d_head;
    w->d_head = w->d_tail = NULL;
    uv_mutex_unlock(&w->mu);
    for (; j; j = next) {
        next = j->next;
        w->pending_ops -= j->nops;
        j->cb(j);
    }
}

static void ps__writer_async_cb(uv_async_t *a)
{
    struct ps_writer *w = container_of(a, struct ps_writer, async);
    ps__writer_drain(w);
}

static void ps__writer_close_cb(uv_handle_t *h)
{
    struct ps_writer *w =
        container_of((uv_async_t *)h, struct ps_writer, async);
    uv_cond_destroy(&w->cond);
    uv_mutex_destroy(&w->mu);
    rt_buf_free(&w->capbuf);
    free(w);
}

int ps_writer_start(uv_loop_t *loop,
                    struct ps_store *store,
                    struct ps_writer **out)
{
    struct ps_writer *w = calloc(1, sizeof(*w));
    int rc;

    if (!w) {
        return UV_ENOMEM;
    }
    w->loop = loop;
    w->store = store;
    ps_gwait_init(&w->gwait);
    if ((rc = uv_mutex_init(&w->mu)) != 0) {
        goto err_after_alloc;
    }
    if ((rc = uv_cond_init(&w->cond)) != 0) {
        goto err_after_mutex;
    }
    if ((rc = uv_async_init(loop, &w->async, ps__writer_async_cb)) != 0) {
        goto err_after_cond;
    }
    if ((rc = uv_thread_create(&w->thread, ps__writer_main, w)) != 0) {
        /* The handle is initialised: it must be closed, and w freed in the
         * close callback. */
        uv_close((uv_handle_t *)&w->async, ps__writer_close_cb);
        return rc;
    }
    *out = w;
    return 0;

err_after_cond:
    uv_cond_destroy(&w->cond);
err_after_mutex:
    uv_mutex_destroy(&w->mu);
err_after_alloc:
    free(w);
    return rc;
}

void ps_writer_set_ship(struct ps_writer *w, ps_writer_ship_fn fn, void *arg)
{
    w->ship_fn = fn;
    w->ship_arg = arg;
    ps_store_set_precommit(w->store, fn ? ps__writer_precommit : NULL,
                           fn ? w : NULL);
}

void ps_writer_submit(struct ps_writer *w, struct ps_job *job)
{
    job->nops = job->kind == PS_JOB_WRITE ? job->u.write.n_ops : 0;
    job->status = 0;
    job->exec_us = 0;
    RT_PRE(!w->stopped);
    w->pending_ops += job->nops;
    uv_mutex_lock(&w->mu);
    ps__list_push(&w->q_head, &w->q_tail, job);
    if (job->kind == PS_JOB_WRITE) {
        w->q_ops += ps__job_ops(job);
    } else {
        w->q_other++;
    }
    uv_cond_signal(&w->cond);
    uv_mutex_unlock(&w->mu);
}

void ps_writer_set_group_wait(struct ps_writer *w, uint64_t max_us)
{
    uv_mutex_lock(&w->mu);
    w->group_wait_us = max_us;
    uv_mutex_unlock(&w->mu);
}

size_t ps_writer_pending(const struct ps_writer *w)
{
    return w->pending_ops;
}

void ps_writer_log_add(struct ps_writer *w, struct ps_mlog *log)
{
    rt_buf_init(&log->recs);
    log->n = 0;
    log->bytes = 0;
    log->overflow = 0;
    uv_mutex_lock(&w->mu);
    log->next = w->logs;
    w->logs = log;
    uv_mutex_unlock(&w->mu);
}

void ps_writer_log_remove(struct ps_writer *w, struct ps_mlog *log)
{
    uv_mutex_lock(&w->mu);
    for (struct ps_mlog **pp = &w->logs; *pp; pp = &(*pp)->next) {
        if (*pp == log) {
            *pp = log->next;
            break;
        }
    }
    log->next = NULL;
    uv_mutex_unlock(&w->mu);
}

uint64_t ps_writer_log_take(struct ps_writer *w,
                            struct ps_mlog *log,
                            struct rt_buf *out,
                            int *overflow)
{
    uint64_t n;

    uv_mutex_lock(&w->mu);
    n = log->n;
    if (log->recs.len > 0) {
        rt_buf_append(out, log->recs.data, log->recs.len);
    }
    rt_buf_reset(&log->recs);
    log->n = 0;
    log->bytes = 0;
    *overflow = log->overflow;
    uv_mutex_unlock(&w->mu);
    return n;
}

uint64_t ps_writer_busy_ms(struct ps_writer *w)
{
    uint64_t since, now = rt_time_mono_us();
    uv_mutex_lock(&w->mu);
    since = w->busy_since_us;
    uv_mutex_unlock(&w->mu);
    return since != 0 && now > since ? (now - since) / 1000 : 0;
}

void ps_writer_stats(struct ps_writer *w, struct ps_writer_stats *out)
{
    uv_mutex_lock(&w->mu);
    *out = w->stats;
    uv_mutex_unlock(&w->mu);
}

void ps_writer_stop(struct ps_writer *w)
{
    uv_mutex_lock(&w->mu);
    w->stop = 1;
    uv_cond_signal(&w->cond);
    uv_mutex_unlock(&w->mu);
    uv_thread_join(&w->thread);
    w->stopped = 1;
    ps__writer_drain(w);
    uv_close((uv_handle_t *)&w->async, ps__writer_close_cb);
}
