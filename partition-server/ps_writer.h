/* Writer: the one thread that writes the store. The loop thread submits
 * jobs; the writer takes everything queued, applies all write jobs in ONE
 * durable transaction (group commit, ps_store_write_group), then meta jobs,
 * then one chunk of a table drop, and hands finished jobs back to the loop
 * thread through uv_async_send and a locked completion queue (sends
 * coalesce, so the whole queue is drained each time).
 *
 * Threads: ps_writer_start/submit/pending/stop on the loop thread only.
 * Job callbacks run on the loop thread, exactly once per submitted job.
 *
 * Ownership: a job is borrowed from submit until its callback; the caller
 * embeds struct ps_job in its own request (container_of) and frees it in
 * (or after) the callback. */
#ifndef PS_WRITER_H
#define PS_WRITER_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "ps_store.h"

enum ps_job_kind {
    PS_JOB_WRITE,      /* u.write: entity ops */
    PS_JOB_META,       /* u.meta: persist server id and ranges */
    PS_JOB_DROP_TABLE, /* u.drop: delete every key of one table */
    PS_JOB__NR
};

struct ps_job;
typedef void (*ps_job_cb)(struct ps_job *job);

struct ps_job {
    enum ps_job_kind kind;
    ps_job_cb cb;
    int status;       /* WRITE: see u.write.status; META/DROP: 0 or RT_E*;
                         RT_ECANCELED when stopped before it ran (drops) */
    uint64_t exec_us; /* writer time attributed to this job */
    union {
        struct ps_write write;
        struct {
            uint64_t server_id;
            const void *ranges; /* borrowed until cb */
            size_t ranges_len;
        } meta;
        struct {
            uint64_t table_id;
            uint64_t deleted; /* out */
        } drop;
    } u;
    /* private */
    struct ps_job *next;
    size_t nops;
};

/* Keys deleted per drop transaction, so a drop never stalls writes. */
#define PS_DROP_CHUNK 10000
/* Upper bounds of one group commit. */
#define PS_GROUP_MAX_OPS 4096
#define PS_GROUP_MAX_BYTES (16u * 1024u * 1024u)

struct ps_writer;

/* Starts the thread. @store is borrowed and must outlive the writer.
 * Returns 0 or a libuv error. */
int ps_writer_start(uv_loop_t *loop, struct ps_store *store,
                    struct ps_writer **out);
/* Queues @job (callback later, on the loop thread). Never after
 * ps_writer_stop. */
void ps_writer_submit(struct ps_writer *w, struct ps_job *job);
/* Entity ops submitted and not yet completed (for back-pressure). */
size_t ps_writer_pending(const struct ps_writer *w);
/* Lets the thread finish every queued write/meta job (an unfinished drop is
 * cancelled; its marker makes the next start resume it), joins it, runs the
 * remaining callbacks, and closes the async handle; the writer is freed
 * once the loop has run the close callback. Blocks the loop briefly. */
void ps_writer_stop(struct ps_writer *w);

#endif
