/* Writer thread: group commit and hand-back to the loop.
 *
 * Happy path: submit (loop) -> queue + cond signal -> the thread takes the
 * whole queue (bounded by PS_GROUP_MAX_*), commits the writes in one
 * transaction, persists meta jobs, appends them to the done queue,
 * uv_async_send -> the loop drains the done queue and runs callbacks.
 * Drops advance one chunk per iteration, between groups, so a large drop
 * interleaves with writes instead of blocking them. */
#include "ps_writer.h"

#include <stdlib.h>
#include <string.h>

#include "rt_err.h"
#include "rt_log.h"

struct ps_writer {
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
    /* Loop thread only. */
    size_t pending_ops;
    int stopped; /* ps_writer_stop ran: submit is a bug */
    /* Writer thread only. */
    struct ps_job *drops_head, *drops_tail;
};

static void ps__list_push(struct ps_job **head, struct ps_job **tail,
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

static uint64_t ps__now_us(void)
{
    return uv_hrtime() / 1000;
}

/* Writer thread */

static void ps__writer_done(struct ps_writer *w, struct ps_job *head,
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
        if (j->kind == PS_JOB_WRITE) {
            ops += j->u.write.n_ops;
            for (size_t i = 0; i < j->u.write.n_ops; i++) {
                bytes += j->u.write.ops[i].props_len;
            }
        }
        last = j;
    }
    if (!last) {
        return NULL;
    }
    w->q_head = last->next;
    if (!w->q_head) {
        w->q_tail = NULL;
    }
    last->next = NULL;
    return head;
}

static void ps__writer_group(struct ps_writer *w, struct ps_job *jobs)
{
    struct ps_write *stack_writes[64];
    struct ps_write **writes = stack_writes;
    struct ps_job *done_head = NULL, *done_tail = NULL, *j, *next;
    size_t nw = 0, cap = 64, ops = 0;
    uint64_t t0, dt;

    for (j = jobs; j; j = j->next) {
        if (j->kind == PS_JOB_WRITE) {
            nw++;
        }
    }
    if (nw > cap) {
        writes = malloc(nw * sizeof(*writes));
        if (!writes) {
            rt_log(RT_LOG_FATAL, "out of memory");
            abort();
        }
    }
    nw = 0;
    for (j = jobs; j; j = j->next) {
        if (j->kind == PS_JOB_WRITE) {
            writes[nw++] = &j->u.write;
            ops += j->u.write.n_ops;
        }
    }

    t0 = ps__now_us();
    if (nw > 0) {
        ps_store_write_group(w->store, writes, nw);
    }
    dt = ps__now_us() - t0;
    if (nw > 0) {
        rt_log(RT_LOG_DEBUG, "group commit: %zu writes, %zu ops, %llu us", nw,
               ops, (unsigned long long)dt);
    }

    for (j = jobs; j; j = next) {
        next = j->next;
        switch (j->kind) {
        case PS_JOB_WRITE:
            j->status = j->u.write.status;
            j->exec_us = ops ? dt * j->u.write.n_ops / ops : 0;
            ps__list_push(&done_head, &done_tail, j);
            break;
        case PS_JOB_META:
            t0 = ps__now_us();
            j->status = ps_store_meta_save(w->store, j->u.meta.server_id,
                                           j->u.meta.ranges,
                                           j->u.meta.ranges_len);
            j->exec_us = ps__now_us() - t0;
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

/* One chunk of the oldest drop; completes it when the table is empty. */
static void ps__writer_drop_step(struct ps_writer *w)
{
    struct ps_job *j = w->drops_head;
    uint64_t t0 = ps__now_us();
    int rc;

    rc = ps_store_drop_chunk(w->store, j->u.drop.table_id, PS_DROP_CHUNK,
                             &j->u.drop.deleted);
    j->exec_us += ps__now_us() - t0;
    if (rc == 1) {
        return;
    }
    w->drops_head = j->next;
    if (!w->drops_head) {
        w->drops_tail = NULL;
    }
    j->status = rc;
    if (rc == 0) {
        rt_log(RT_LOG_INFO, "dropped table %llu: %llu keys deleted",
               (unsigned long long)j->u.drop.table_id,
               (unsigned long long)j->u.drop.deleted);
    } else {
        rt_log(RT_LOG_ERROR, "drop table %llu failed: %s",
               (unsigned long long)j->u.drop.table_id, rt_strerror(rc));
    }
    j->next = NULL;
    ps__writer_done(w, j, j);
}

static void ps__writer_main(void *arg)
{
    struct ps_writer *w = arg;
    struct ps_job *jobs;

    for (;;) {
        uv_mutex_lock(&w->mu);
        while (!w->q_head && !w->drops_head && !w->stop) {
            uv_cond_wait(&w->cond, &w->mu);
        }
        if (w->stop && !w->q_head) {
            uv_mutex_unlock(&w->mu);
            break;
        }
        jobs = ps__writer_take(w);
        uv_mutex_unlock(&w->mu);

        if (jobs) {
            ps__writer_group(w, jobs);
        }
        if (w->drops_head) {
            ps__writer_drop_step(w);
        }
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
    struct ps_writer *w = container_of((uv_async_t *)h, struct ps_writer,
                                       async);
    uv_cond_destroy(&w->cond);
    uv_mutex_destroy(&w->mu);
    free(w);
}

int ps_writer_start(uv_loop_t *loop, struct ps_store *store,
                    struct ps_writer **out)
{
    struct ps_writer *w = calloc(1, sizeof(*w));
    int rc;

    if (!w) {
        return UV_ENOMEM;
    }
    w->loop = loop;
    w->store = store;
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

void ps_writer_submit(struct ps_writer *w, struct ps_job *job)
{
    job->nops = job->kind == PS_JOB_WRITE ? job->u.write.n_ops : 0;
    job->status = 0;
    job->exec_us = 0;
    RT_PRE(!w->stopped);
    w->pending_ops += job->nops;
    uv_mutex_lock(&w->mu);
    ps__list_push(&w->q_head, &w->q_tail, job);
    uv_cond_signal(&w->cond);
    uv_mutex_unlock(&w->mu);
}

size_t ps_writer_pending(const struct ps_writer *w)
{
    return w->pending_ops;
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
