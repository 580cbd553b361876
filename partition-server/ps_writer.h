/* Writer: the one thread that writes the store. The loop thread submits
 * jobs; the writer takes everything queued, applies all write jobs in ONE
 * durable transaction (group commit, ps_store_write_group), then meta,
 * replica-state and repair jobs (each its own synced transaction), then one
 * chunk of a table or span drop, and hands finished jobs back to the loop
 * thread through uv_async_send and a locked completion queue (sends coalesce,
 * so the whole queue is drained each time). A write queued after a
 * replica-state job is never taken into that job's group, so it commits
 * after it. Callbacks run in submission order,
 * except drops (they finish when their last chunk does); a BARRIER job's
 * callback therefore runs after every job submitted before it (drops excepted)
 * has committed and called back.
 *
 * Migration logs (range moves, docs/DESIGN-moves.md): while at least one
 * log is registered, the writer captures every change its group commits
 * make and appends those inside a log's key bounds to that log, with the
 * committing transaction's id, before any callback of that group runs.
 * Whether a group captures is decided when it is taken from the queue, so
 * a log registered now sees every group taken after its registration: a
 * BARRIER submitted after ps_writer_log_add calls back once every group
 * that might have missed the log has committed.
 *
 * Replication (docs/DESIGN-replication.md §5.2): a write job whose
 * u.write.range_id is set comes back with u.write.lsn, the LSN its group
 * took for that range (0 when it changed nothing), and u.write.txn_id;
 * the callbacks of one group run together, in submission order, so a
 * range's (range_id, lsn, txn_id) is known before any later group calls
 * back. The change records of an LSN are those a migration log over the
 * range's key bounds receives with that txn_id (ps_writer_log_add): the
 * writer keeps no other copy of them. With a ship callback set
 * (ps_writer_set_ship), a group holding such writes hands the loop its
 * (range_id, lsn, txn_id) list and distributes its records to the logs
 * BEFORE its commit, so the primary ships while its own sync runs
 * (§5.3); the callbacks of its jobs follow after the commit, in order.
 *
 * Adaptive group commit (ps_writer_set_group_wait, off until set): before
 * taking a group the writer may wait a short, bounded time for more
 * writes when the queue is shallow and the previous sync was recent; never
 * when the queue is deep, a non-write job is queued, or the writer is
 * stopping (ps_gwait.h has the rule and the reasons). A waited write is
 * committed and called back like any other: after its group's sync.
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
#include "rt_metrics.h"

enum ps_job_kind {
    PS_JOB_WRITE,      /* u.write: entity ops, or raw changes (u.write.kvs) */
    PS_JOB_META,       /* u.meta: persist server id and ranges (+ ops) */
    PS_JOB_DROP_TABLE, /* u.drop: delete every key of one table */
    PS_JOB_DROP_SPAN,  /* u.span: delete every key of one span */
    PS_JOB_BARRIER,    /* nothing: calls back after the jobs before it */
    PS_JOB_REPL_STATE, /* u.rstate: fields of a range's `rs` record */
    PS_JOB_REPAIR,     /* u.repair: a corrupt value from a peer's copy */
    PS_JOB_SHIPPED,    /* made by the writer: see ps_writer_set_ship */
    PS_JOB__NR
};

struct ps_job;
typedef void (*ps_job_cb)(struct ps_job *job);

struct ps_job
{
    enum ps_job_kind kind;
    ps_job_cb cb;
    int status;       /* WRITE: see u.write.status; META/DROP: 0 or RT_E*;
                         RT_ECANCELED when stopped before it ran (drops) */
    uint64_t exec_us; /* writer time attributed to this job */
    union {
        struct ps_write write;
        struct
        {
            uint64_t server_id;
            const void *ranges; /* borrowed until cb */
            size_t ranges_len;
            uint64_t master_term;         /* raises the stored one; 0 = leave */
            const struct ps_meta_op *ops; /* more changes, same txn */
            size_t n_ops;
        } meta;
        struct
        {
            uint64_t table_id;
            uint64_t deleted; /* out */
        } drop;
        struct
        {
            uint64_t seq;        /* marker id (ps_store_span_drop_chunk) */
            struct ps_span span; /* strings borrowed until cb */
            uint64_t deleted;    /* out */
        } span;
        struct
        {
            uint64_t range_id;
            unsigned set;        /* PS_RS_SET_* (ps_store_repl_update) */
            struct ps_rstate rs; /* the values of the fields in @set */
        } rstate;
        struct
        {
            uint64_t range_id;
            const uint8_t *key; /* borrowed until cb */
            size_t kn;
            const uint8_t *val; /* NULL: the key is absent at the peer */
            size_t vn;
            uint64_t min_lsn; /* the peer's applied LSN it was read at */
        } repair;             /* status: ps_store_repair's */
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

/* A migration log. The caller fills lo/hi (storage key bounds [lo, hi))
 * before ps_writer_log_add and keeps the struct until ps_writer_log_remove
 * returns; the other fields belong to the writer while registered. */
struct ps_mlog
{
    struct rt_buf lo, hi;
    /* Protected by the writer's mutex (use ps_writer_log_take). */
    struct rt_buf recs; /* change records (ps_store.h) */
    uint64_t n;
    size_t bytes;
    int overflow; /* more than PS_MLOG_MAX_BYTES waited: records
                     were lost, the move must fail */
    struct ps_mlog *next;
};
#define PS_MLOG_MAX_BYTES (256u * 1024u * 1024u)

/* Group commit figures since start (metrics). */
#define PS_WRITER_HIST 14 /* groups of <=1, <=2, <=4, ... <=4096, more ops */
struct ps_writer_stats
{
    uint64_t groups;    /* group commits holding at least one write */
    uint64_t group_ops; /* entity ops and raw changes in them */
    uint64_t group_us;  /* time spent in them */
    uint64_t hist[PS_WRITER_HIST];
    uint64_t raw_kvs;      /* raw changes applied (ranges moved in) */
    uint64_t waits;        /* groups the writer waited for more writes */
    uint64_t wait_us;      /* time spent in those waits */
    uint64_t waits_unpaid; /* those that gathered writes slower than the
                              previous group committed them (back-off) */
    uint64_t captured;     /* changes appended to migration logs */
    /* Group commit durations, per bucket of rt_metrics.h (not
     * cumulative). */
    uint64_t lat[RT_HIST_NB + 1];
};

/* One range's group, shipped before its commit (ps_writer_set_ship). */
struct ps_shipped
{
    uint64_t range_id;
    uint64_t lsn;
    uint64_t txn_id;
};
typedef void (*ps_writer_ship_fn)(void *arg,
                                  const struct ps_shipped *v,
                                  size_t n);

/* Starts the thread. @store is borrowed and must outlive the writer.
 * Returns 0 or a libuv error. */
int ps_writer_start(uv_loop_t *loop,
                    struct ps_store *store,
                    struct ps_writer **out);
/* Asks for @fn (loop thread) with every group of replicated ranges before
 * its commit, ordered with the job callbacks: after those of every earlier
 * group, before those of its own. Only groups that capture (a log is
 * registered) are shipped early. Set before the first submit. */
void ps_writer_set_ship(struct ps_writer *w, ps_writer_ship_fn fn, void *arg);
/* Sets the adaptive wait's bound in microseconds (0 = off, the default):
 * the writer waits at most min(@max_us, half the previous group commit's
 * duration) between two syncs for more writes (ps_gwait.h). Any time. */
void ps_writer_set_group_wait(struct ps_writer *w, uint64_t max_us);
/* Queues @job (callback later, on the loop thread). Never after
 * ps_writer_stop. */
void ps_writer_submit(struct ps_writer *w, struct ps_job *job);
/* How long the group commit (or drop chunk) running now has taken, in
 * ms; 0 while idle. A disk that stalls shows here (self-fencing). */
uint64_t ps_writer_busy_ms(struct ps_writer *w);
/* Entity ops submitted and not yet completed (for back-pressure). */
size_t ps_writer_pending(const struct ps_writer *w);
/* Registers @log: see the header comment for what it receives. */
void ps_writer_log_add(struct ps_writer *w, struct ps_mlog *log);
/* Unregisters @log (its records stay in it; the caller frees them). */
void ps_writer_log_remove(struct ps_writer *w, struct ps_mlog *log);
/* Moves the records logged so far to @out (appended) and returns their
 * number; *overflow is set when records were dropped (PS_MLOG_MAX_BYTES). */
uint64_t ps_writer_log_take(struct ps_writer *w,
                            struct ps_mlog *log,
                            struct rt_buf *out,
                            int *overflow);
/* Copies the group commit figures (any time, loop thread). */
void ps_writer_stats(struct ps_writer *w, struct ps_writer_stats *out);

/* Lets the thread finish every queued write/meta job (an unfinished drop is
 * cancelled; its marker makes the next start resume it), joins it, runs the
 * remaining callbacks, and closes the async handle; the writer is freed
 * once the loop has run the close callback. Blocks the loop briefly. */
void ps_writer_stop(struct ps_writer *w);

#endif
