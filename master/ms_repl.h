/* Replication glue: the running master's side of range replication
 * (docs/DESIGN-replication.md §3.4, §4, §7). It owns one ms_rcore (the
 * pure per-range failover state machine) and turns its actions into I/O,
 * and the master's inputs into its events:
 *
 * - in: every replicated range of the catalog (loaded at start, a
 *   seal_epoch found there resumes its failover in SEALING; tables
 *   created or deleted later through ms_repl_sync()), registrations and
 *   heartbeats (HeartbeatReq.repl: a PRIMARY at the committed epoch or
 *   later answers that range's assignment), partition-server connections
 *   closing, ISR_CHANGE requests, the answers to our calls, one uv timer;
 *   each ReplStatus of a followed range is also kept (the last one per
 *   server) for the status (ms_repl_report);
 * - out: each PROPOSE is one durable catalog commit guarded by (epoch,
 *   seal_epoch) (ms_catalog_range_apply_repl) followed by MAP_UPDATE to
 *   the front ends; SEAL is an RPC (SealReq -> SealResp; retry_ms > 0
 *   means busy); ASSIGN is the server's full ASSIGN_RANGES push (a
 *   successful reply from the range's primary answers it); ISR_RESP
 *   answers the ISR_CHANGE request (the committed rt.Range, or the §4
 *   error); EVENT goes to the event log (`failover`, `isr_shrink`,
 *   `isr_grow`, ...) and the counters behind the metrics;
 * - re-replication (§8): a second uv timer runs the ms_rerepl plan every
 *   500 ms (learners where copies are dead or missing, surplus replicas
 *   removed once replaced), and registrations with a new incarnation
 *   remove the wiped server from every set first (ms_repl_server_wiped).
 *
 * RF 1 ranges are never loaded: they never fail over. A COMMITTED event
 * is stepped only after every action of the step that proposed it was
 * carried out (the core's timer action must not be overtaken), so every
 * decision is taken on committed state only. Commits are synchronous on
 * the loop (as every catalog mutation of the master), so an ISR_CHANGE is
 * answered before its handler returns.
 *
 * Thread: loop thread only. Ownership: the cluster (and its catalog) and
 * the event log are borrowed and must outlive the glue. Lifetime:
 * ms_repl_create() -> ... -> ms_repl_stop() (closes the timer; answers
 * still in flight are dropped when they arrive) -> uv_run() returns ->
 * ms_repl_destroy(). */
#ifndef MS_REPL_H
#define MS_REPL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "rt.pb-c.h"
#include "rt_rpc.h"

struct ms_cluster;
struct ms_events;
struct ms_repl;

/* Timings (docs/DESIGN-replication.md §12.2). 0 picks the default. */
struct ms_repl_config
{
    uint64_t failover_after_ms;    /* --failover-after-ms, 1500 */
    uint64_t reconnect_grace_ms;   /* --reconnect-grace-ms, 300 */
    uint64_t seal_wait_ms;         /* --seal-wait-ms, 200 */
    uint64_t lease_ms;             /* --lease-ms, 1500 */
    uint64_t resend_ms;            /* SEAL / ASSIGN resend period, 250 */
    uint64_t learner_timeout_ms;   /* --learner-timeout-ms, 30000 */
    uint64_t learner_min_mb_per_s; /* --learner-min-mb-per-s, 20 */
    uint32_t seal_timeout_ms;      /* one SEAL call's timeout, 1000 */
    uint64_t rereplicate_after_ms; /* --rereplicate-after-ms, 60000 */
    uint32_t max_rereplications;   /* --max-rereplications, 2 */
};

#define MS_REPL_NBUCKETS 8

/* What the metrics show (counters since the master started). */
struct ms_repl_stats
{
    uint64_t failovers; /* new primary answered its assignment */
    uint64_t cancels;   /* the old primary came back before any seal */
    /* rt_master_failover_seconds: failovers that took at most
     * ms_repl_bucket_le[i] seconds (cumulative), and their sum. */
    uint64_t failover_le[MS_REPL_NBUCKETS];
    double failover_seconds_sum;
    uint64_t isr_shrinks, isr_grows;
    size_t ranges;                   /* replicated ranges followed */
    size_t inflight;                 /* of them, with an operation in flight */
    uint64_t rereplications_started; /* learners re-replication added */
    uint64_t rereplications;         /* ... that joined the ISR */
    size_t rereplicating;            /* ... being built now */
};

extern const double ms_repl_bucket_le[MS_REPL_NBUCKETS];

/* Creates the glue on @loop and loads every replicated range of @cl's
 * catalog (the suspicion grace of ms_rcore starts now). @cfg is copied.
 * Errors: RT_EINVAL (ms_rcore refused the configuration). On 0, *out
 * belongs to the caller. */
int ms_repl_create(uv_loop_t *loop,
                   struct ms_cluster *cl,
                   struct ms_events *events,
                   const struct ms_repl_config *cfg,
                   struct ms_repl **out);
/* Closes the timer and stops acting (idempotent). */
void ms_repl_stop(struct ms_repl *r);
/* Frees everything; after ms_repl_stop() and once the loop has run the
 * close callbacks. NULL is ignored. */
void ms_repl_destroy(struct ms_repl *r);

/* Server @server_id registered or heartbeated: it is alive now. With
 * @req (a heartbeat, borrowed), each ReplStatus reporting PRIMARY at the
 * committed epoch or later answers that range's assignment, and each
 * RangeLoad of a range it is primary of gives the core that range's size
 * (key_bytes: its learners' deadline, ms_rcore_range_size()). */
void ms_repl_heard(struct ms_repl *r,
                   uint64_t server_id,
                   const Rt__HeartbeatReq *req);
/* Server @server_id's current connection closed. */
void ms_repl_conn_down(struct ms_repl *r, uint64_t server_id);
/* The catalog's set of ranges changed (a table created or deleted):
 * replicated ranges not followed yet are loaded, followed ones no longer
 * in the catalog are forgotten (a failover in flight stops there). */
void ms_repl_sync(struct ms_repl *r);
/* ISR_CHANGE request @id on @conn (borrowed) from server @from (0: not a
 * registered partition server): answered on @conn before returning, with
 * status 0 + the committed rt.Range, or RT_ENOTFOUND, RT_ESTALE,
 * RT_ENOTPRIMARY, RT_EINVAL, RT_EBUSY (§4, in that order). */
void ms_repl_isr_change(struct ms_repl *r,
                        struct rt_rpc_conn *conn,
                        uint64_t id,
                        uint64_t from,
                        const Rt__IsrChangeReq *req);

/* Runs one re-replication plan now (ms_rerepl.h; also every 500 ms on
 * the glue's own timer): learners added where copies are missing or dead
 * (at most max_rereplications being built), surplus replicas removed once
 * their replacement joined. Each decision is one guarded commit through
 * the core; events `rereplicate` (phase start / done / failed) and
 * `replica_removed`. */
void ms_repl_rereplicate(struct ms_repl *r);

/* Server @server_id registered with a new incarnation (its disk was wiped,
 * docs/DESIGN-replication.md §8.1): commits its removal from every replica
 * set and ISR it is in (epoch + 1 each, event `replica_removed` with
 * reason "wiped") before it is assigned anything. Returns 0 when it is in
 * none any more, or RT_EBUSY when some range could not be changed now (it
 * is still that range's primary, which only a failover changes, or
 * another operation is in flight): the caller refuses the registration
 * and the server retries. */
int ms_repl_server_wiped(struct ms_repl *r, uint64_t server_id);

/* The replica-set changes of a move (docs/DESIGN-replication.md §9.3
 * steps 1 and 3), carried out through the core like re-replication's: one
 * guarded catalog commit each, done or refused before the call returns.
 * ms_repl_add_learner: @server joins @range_id's set as a LEARNER and its
 * copy starts; the catalog then shows how it ends (the learner's
 * ISR_CHANGE{add} makes it an in-sync SECONDARY; a failure or the learner
 * timeout removes it, event `replica_removed`). ms_repl_remove_replica:
 * @server leaves the set and the ISR (event `replica_removed` with
 * @reason, a static string) and is assigned the range no more. Errors,
 * nothing changed: RT_EINVAL (not replicated; add: no room; remove: not a
 * member, or the primary), RT_EEXIST (add: already a member), RT_EBUSY
 * (an operation in flight on the range, a transfer, the master
 * stopping), RT_ESTALE (the commit failed: the catalog moved). */
int ms_repl_add_learner(struct ms_repl *r,
                        uint64_t range_id,
                        uint64_t server,
                        char *err,
                        size_t errlen);
int ms_repl_remove_replica(struct ms_repl *r,
                           uint64_t range_id,
                           uint64_t server,
                           const char *reason,
                           char *err,
                           size_t errlen);
/* The move that ms_repl_add_learner() began on @range_id ended, however
 * it ended: from now on the re-replication plan trims a set larger than
 * rf itself ("over_rf", ms_rerepl.h). Until then it leaves the move's
 * rf + 1 copies alone. Not durable: a master restart forgets the move,
 * so the plan settles its extra copy. NULL @r or an unknown range is
 * ignored. */
void ms_repl_move_end(struct ms_repl *r, uint64_t range_id);

/* A planned primaryship transfer (docs/DESIGN-replication.md §9.3 step
 * 2), the outcome given to its callback. */
struct ms_repl_transfer_result
{
    uint64_t from, to;    /* old primary, target */
    uint64_t new_primary; /* primary of the range at the end */
    uint64_t epoch;       /* the range's epoch at the end */
    uint64_t lsn;         /* the old primary's last LSN when frozen */
    uint64_t frozen_ms;   /* frozen until it answered (its own count) */
    /* The ServerBusy window: frozen_ms + from its answer to the end (the
     * seal, the commit, the new primary's answer); 0 if never answered. */
    uint64_t window_ms;
    char error[160]; /* why it failed ("" on success) */
};
/* Fires once: @code 0 (the target is primary), or why not: an RT_E* of
 * TRANSFER_PRIMARY (refused by the old primary, or no answer: then
 * TRANSFER_ABORT went to it, sent again up to 3 times while it fails
 * with the server connected), RT_ESTALE (the range changed before the
 * intent committed: TRANSFER_ABORT too), RT_ETIMEDOUT (after the intent:
 * the transfer ended as a failover and another server is primary, or the
 * new primary did not answer), RT_ENOTFOUND (range deleted). @res is
 * borrowed for the call. Never fires after ms_repl_stop(). */
typedef void (*ms_repl_transfer_cb)(void *arg,
                                    int code,
                                    const struct ms_repl_transfer_result *res);
/* Timeout of the TRANSFER_PRIMARY call (the old primary gives up at 3 s). */
#define MS_REPL_TRANSFER_CALL_MS 5000

/* Starts the transfer of replicated range @range_id's primary role to
 * @to: TRANSFER_PRIMARY{range, epoch, to, epoch + 1} to the primary; its
 * answer {lsn, frozen_ms} becomes ms_rcore_transfer() (intent TRANSFER,
 * SEALs, the new configuration with @to primary and the old primary a
 * SECONDARY in the ISR, assignments, MAP_UPDATE). Returns 0 (@cb fires
 * later, never before this returns) or, with @err saying why and nothing
 * changed: RT_EINVAL (not replicated, or @to not an in-sync secondary:
 * the primary itself, not a member, outside the ISR), RT_EBUSY (an
 * operation in flight on the range, the target down, the primary not
 * connected, the master stopping), RT_ENOTFOUND. */
int ms_repl_transfer(struct ms_repl *r,
                     uint64_t range_id,
                     uint64_t to,
                     ms_repl_transfer_cb cb,
                     void *arg,
                     char *err,
                     size_t errlen);
/* A transfer of @range_id is in flight (NULL @r: false). */
bool ms_repl_transferring(const struct ms_repl *r, uint64_t range_id);

/* What server @server_id last reported of range @range_id in
 * HeartbeatReq.repl (docs/DESIGN-replication.md §12.3). */
struct ms_repl_report
{
    uint64_t server_id;
    int role; /* Rt__ReplRole */
    uint64_t epoch;
    uint64_t applied_lsn;
    uint64_t commit_lsn;
    uint32_t lease_ms; /* as reported (a primary's lease left; 0: none) */
    uint32_t state;
    uint64_t at_ms; /* when it came (rt_time_mono_ms) */
};

/* 0 and *out filled, or RT_ENOTFOUND (range not followed, or nothing
 * reported by that server since this master started). */
int ms_repl_report(const struct ms_repl *r,
                   uint64_t range_id,
                   uint64_t server_id,
                   struct ms_repl_report *out);

/* A replication operation in flight on one range, for the status. */
struct ms_repl_op
{
    uint64_t range_id;
    const char *kind;  /* ms_rcore_range_info.op: "failover", "isr_change",
                        * "learner", ...; static */
    const char *state; /* the core's state: "sealing", "assigning", ...;
                        * static */
    uint64_t since_ms; /* when it began (rt_time_mono_ms) */
};

/* The operations in flight, in range id order: the first @cap of them in
 * @out (may be NULL with @cap 0); returns how many there are. */
size_t ms_repl_ops(const struct ms_repl *r, struct ms_repl_op *out, size_t cap);

/* The range's state in the core ("stable", "sealing", ...), or NULL when
 * it is not followed (RF 1). The string is static. */
const char *ms_repl_range_state(const struct ms_repl *r, uint64_t range_id);
/* Counters for the metrics (valid until the next call into @r). */
const struct ms_repl_stats *ms_repl_stats(struct ms_repl *r);

#endif
