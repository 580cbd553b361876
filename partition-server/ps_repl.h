/* Replication glue: drives the pure replica core (ps_rcore.h) from the
 * real server (docs/DESIGN-replication.md §5, §6.3, §7, §11.1). It owns the
 * server's one struct ps_rcore, a client connection per peer server, the
 * per-range capture of the primary's change records, the (txn_id, lsn)
 * ring of each primary range (ps_lsn_ring.h), and the client requests
 * waiting for the commit LSN cw. RF-1 ranges (an empty or one-entry
 * replica set) never come here: ps_repl_route() answers 1 for them and
 * their requests go exactly the old way.
 *
 * What it does:
 *  - Assignments (ps_repl_assigned): a range whose replica set names more
 *    than one server is created in the core with this server's role, its
 *    ISR and epoch, at the applied LSN of its durable `rs` record (0 for a
 *    new range). A later configuration (another epoch or primary, or a
 *    primary still ACTIVATING) is fed to the core as an ASSIGN message:
 *    a sealed secondary named primary is promoted (ACTIVATING, SERVING
 *    once its ISR acked; the capture log and LSN ring start), a primary
 *    named secondary steps down (held writes RT_ETIMEDOUT; the capture
 *    stops), a cancel resumes a deposed primary, a new ISR recomputes
 *    cw. A configuration the core refuses is left as it was and becomes
 *    the ASSIGN_RANGES error status. Each taken role, epoch and
 *    primary_epoch is persisted in the `rs` record (PS_JOB_REPL_STATE)
 *    before that reply. A range no longer listed, or with other bounds,
 *    is forgotten (held writes RT_ETIMEDOUT: outcome unknown). A split
 *    (docs/DESIGN-replication.md §9.1): a range new here without an `rs`
 *    record that lies inside a range replicated here under another id
 *    starts at that parent's applied and commit LSN (the primary froze
 *    the parent until every ISR member held its last LSN, ps_split.h);
 *    those positions are persisted before the assignment's meta. A
 *    merge (§9.2): a new range that contains ranges replicated here
 *    starts at the highest of their positions.
 *  - Restart (ps_repl_restore): each replicated range of the persisted
 *    assignment is rebuilt with ps_rcore_load from its `rs` record (no
 *    pending groups are kept yet: commit = applied); a primary waits,
 *    ACTIVATING, for the registration's assignment.
 *  - SEAL (ps_repl_on_seal): first the lease guard of the granter
 *    (ps_lease_granter_seal: busy, with retry_ms, until --lease-ms after
 *    the last grant for the range or to its primary, or after the start;
 *    once let through, the range is withdrawn from its old primary at
 *    once); then the core's WRITE persists sealed_epoch (synced, after
 *    every write queued before) and only then is the reply sent. The
 *    core's own grace is off (seal_grace_ms 0).
 *  - Leases (§6): one ps_lease granter and holder beside the core, on
 *    the monotonic clock read fresh (uv_hrtime, never the loop's cached
 *    time). Every --repl-heartbeat-ms, and at once after an assignment,
 *    a SupportReq goes to every peer with a link; ps_repl_on_support
 *    answers a peer's. The granter's view of a range (primary, epoch)
 *    and the peers' incarnations follow the assignments; a peer the
 *    master names without an incarnation (the master does not send them
 *    yet) is checked against the incarnation its own requests carry.
 *    The holder's lease set of a primary range is the ISR secondaries of
 *    the applied assignment (a removed member counts until then; an ISR
 *    of one holds the lease at once). A lease that held and expires
 *    within PS_LEASE_NOLEASE_MS is NOLEASE: new writes RT_EBUSY, the
 *    silent members go to the core (ps_rcore_set_silent), which asks the
 *    master to remove them as it does late ones.
 *  - ISR shrink: the core's ISR_CHANGE{remove} (late acks for
 *    --ack-timeout-ms, or a link down PS_REPL_CONN_DOWN_MS) goes to the
 *    master as the ISR_CHANGE RPC on the master link; its outcome comes
 *    back as ISR_RESP; the assignment at the committed epoch releases the
 *    held writes. A write held --write-hold-ms is answered RT_ETIMEDOUT.
 *  - Heartbeats (ps_repl_status): a ReplStatus per replicated range.
 *  - Admission (ps_repl_route): only the primary serves client requests
 *    (a secondary answers RT_ENOTPRIMARY, a primary frozen for a transfer
 *    or held by ps_repl_hold RT_EBUSY), at any RangeRef.epoch in
 *    [primary_epoch, epoch] (an ISR change leaves front-end maps valid).
 *  - Primary writes (ps_repl_write_done): the writer gave the write its
 *    range's LSN in the group's transaction; the group's change records
 *    of the range (a ps_mlog over the range's key bounds, records of that
 *    transaction) go to the core with the write as a DISK_DONE; the core
 *    sends them to every ISR peer as REPL_APPEND (pipelined, at most
 *    --repl-inflight unacked per peer) and answers the write once cw >= its
 *    LSN. A write that changed nothing (a failed condition) waits for cw
 *    to reach the range's last LSN when it called back (§5.2).
 *  - Secondary: REPL_APPEND groups are checked (CRC32C over the packed
 *    group with crc32c = 0, keys inside the range's bounds), fed to the
 *    core, and written as raw records with their LSN (ps_write.repl_lsn)
 *    through the writer; the core acks once they are durable. A group of
 *    the range's current primary generation (ReplGroup.primary_epoch) at
 *    an older epoch counts as current: an ISR change the secondary heard
 *    of first must not fence its own primary (§4 says "epoch >= mine",
 *    which would).
 *  - Reads (ps_repl_read_wait): a read that ran in transaction T is
 *    answered once cw >= lsn_T (the ring when the loop has seen every
 *    commit up to T, else the range's `rs` applied LSN read after T, an
 *    upper bound), at most --read-wait-ms, then RT_EBUSY; and only if
 *    the read lease holds at that moment, else RT_ENOTPRIMARY (§6.3).
 *    Reads need no min_insync.
 *
 * REPL_APPEND and its reply: one request carries the groups queued for
 * one peer by one core step (one per range and LSN). The receiver answers
 * a request when each of its groups is settled: acked (a cumulative ack of
 * its range at or past its LSN, possibly for a later request) or refused
 * (a NACK or check failure while it was handled). The ReplAck holds, per
 * group, the RangeAck that settled it, so every reply is a set of ordinary
 * cumulative acks. When the range's state here is dropped (unassigned,
 * out of the ISR, or restarted after its writer failed a group), its
 * waiting groups are refused RT_ESTALE. A request the primary stops
 * waiting for (its call timed out) is covered by the core's resend rule,
 * and a reply lost with its connection costs only a resend: the primary's
 * core restarts the stream to a peer when the connection comes back.
 *
 * Not yet (later steps): a joining member in the lease set (no
 * ISR_CHANGE{add} yet), the disk-stall
 * detector that should call ps_repl_lease_fence, the SealResp history, the
 * activation timeout (a promoted primary asks to shrink its ISR instead), NACKs
 * RT_ENOSPACE / RT_EDIVERGED from this glue (the core handles them; a failing
 * secondary write is retried, and a lasting failure ends in the ack timeout),
 * the keyed undo of a deposed primary's divergent suffix (a full copy
 * replaces it), the `rp` pending groups, moves of replicated
 * ranges.
 *
 * Catch-up (ps_learn.h): replicas of the set outside the ISR are given to
 * the core as learners (ps_rcore_assignment.learners); a range whose `rs`
 * state is LEARNING (a copy cut short) is no copy: created or restored as
 * a learner at LSN 0. The core's probe / copy actions go to ps_learn
 * (the hook ps_repl_set_learn_hook sets, first in the dispatch), which
 * steps the core back through ps_repl_core_step. The appends carry no
 * generation (rt_repl_append.gen 0), so histories stay unknown here and every
 * catch-up is a full copy.
 *
 * Thread: the loop thread only. The struct lives in ps_server.repl. */
#ifndef PS_REPL_H
#define PS_REPL_H

#include <stddef.h>
#include <stdint.h>

#include "ps_state.h"
#include "rt.pb-c.h"
#include "rt_rpc.h"

/* Defaults of --repl-inflight and --read-wait-ms (ps_config 0). */
#define PS_REPL_INFLIGHT 32
/* Key log budget, MiB (--repl-log-mb; §2.3). */
#define PS_REPL_LOG_MB 64
#define PS_REPL_READ_WAIT_MS 1000
/* Defaults of --lease-ms (L), --repl-heartbeat-ms (the SupportReq
 * period) and --clock-drift-ppm (ρ), and the lease's ε (ps_lease.h). */
#define PS_REPL_LEASE_MS 1500
#define PS_REPL_HB_MS 250
#define PS_REPL_STALL_MS 5000 /* --stall-timeout-ms: a stuck commit fences */
#define PS_REPL_DRIFT_PPM 1000
#define PS_REPL_LEASE_EPS_MS 5
/* §5.4 defaults: --ack-timeout-ms (an ISR member with a group unacked
 * this long is proposed for removal),
 * the link-down time that does the same, --write-hold-ms (a write
 * waiting for its acks this long is answered RT_ETIMEDOUT). */
#define PS_REPL_ACK_TIMEOUT_MS 1000
#define PS_REPL_CONN_DOWN_MS 300
#define PS_REPL_WRITE_HOLD_MS 5000
/* Resend period of the core (its PS_RCORE_TIMER_RESEND). */
#define PS_REPL_RESEND_MS 200
/* A REPL_APPEND carries at most about this many record bytes (one group
 * more than that goes alone). */
#define PS_REPL_BATCH_BYTES (16u * 1024u * 1024u)
/* Timeout of one REPL_APPEND call. */
#define PS_REPL_CALL_MS 5000

/* A client request waiting for cw, embedded in the caller's request. The
 * caller sets @cb; it fires exactly once, with 0 (answer as computed) or
 * an error to answer instead: RT_ETIMEDOUT (a write whose outcome is
 * unknown: the range was forgotten or the server stops), RT_EBUSY (a read
 * that waited --read-wait-ms, or the server stops), RT_ENOTPRIMARY (a
 * read whose range is no longer primary here). The caller frees the
 * request in (or after) @cb, never before. */
struct ps_repl_wait;
typedef void (*ps_repl_wait_cb)(struct ps_repl_wait *w, int code);
struct ps_repl_wait
{
    ps_repl_wait_cb cb;
    /* private */
    uint64_t range_id;
    uint64_t lsn;         /* reads: lsn_T */
    uint64_t deadline_ms; /* reads */
    int is_read;
    size_t ops; /* writes: entity ops (ps_repl_held_ops) */
    struct ps_repl_wait *prev, *next;
};

/* Sets up the glue and its timers (after the writer started); the core
 * itself is made at the first assignment, once the server has its id.
 * Returns 0 or RT_EINVAL (--repl-inflight above 100000). */
int ps_repl_start(struct ps_server *ps);
/* Answers every waiting request (writes RT_ETIMEDOUT, reads RT_EBUSY),
 * closes the peer connections and the timers; frees everything once the
 * loop has run their close callbacks. After the writer stopped (its last
 * callbacks may still hand writes here), before the RPC server closes (so
 * the answers go out). Idempotent; NULL-safe on a server never started. */
void ps_repl_stop(struct ps_server *ps);

/* An assignment was applied (ps_ranges_set): @v[0..n) are every range
 * this server holds (borrowed), @peers the servers their replica sets
 * name. See the header comment. Returns 0, or the code with which the
 * core refused the first replicated range it did not take (that range is
 * left as it was): the ASSIGN_RANGES reply carries it. */
int ps_repl_assigned(struct ps_server *ps,
                     Rt__Range *const *v,
                     size_t n,
                     Rt__Server *const *peers,
                     size_t n_peers);

/* At start, after ps_repl_start: the ranges restored from meta keep the
 * replica roles they were last assigned (a secondary answers
 * RT_ENOTPRIMARY from the first request on); peer addresses come with the
 * registration reply. */
void ps_repl_restore(struct ps_server *ps);

/* Admission of a client request for @range_id at RangeRef.epoch @epoch.
 * Returns 1: not replicated (route as RF 1); 0: replicated and served
 * here, *@served_epoch = the range's epoch (what ps_ranges_route checks);
 * RT_ENOTPRIMARY (not the serving primary) or RT_ESTALE (@epoch outside
 * [primary_epoch, epoch]). */
int ps_repl_route(struct ps_server *ps,
                  uint64_t range_id,
                  uint64_t epoch,
                  uint64_t *served_epoch);

/* §5.1 for a write admitted by ps_repl_route == 0: RT_EBUSY when the ISR
 * is below the range's min_insync (never an acknowledgement with fewer
 * copies), else 0. */
int ps_repl_write_admit(struct ps_server *ps, uint64_t range_id);

/* Entity ops of the writes committed and waiting for cw: they count
 * against --max-pending with the writer's queue, so a stalled secondary
 * pushes back on clients instead of growing the held list. */
size_t ps_repl_held_ops(const struct ps_server *ps);

/* Every write callback, replicated or not: the loop has seen the commits
 * up to @txn_id (they call back in commit order). */
void ps_repl_note_txn(struct ps_server *ps, uint64_t txn_id);

/* The writer has been stuck in one commit for --stall-timeout-ms: this
 * server fenced itself (no lease support asked or granted); its heartbeat
 * says so. Checked at every support round. */
int ps_repl_stalled(struct ps_server *ps);

/* The writer's ship callback (ps_writer_set_ship, @arg the server): the
 * groups @v are being committed; each primary range's records are taken
 * from its log and shipped to the ISR now, while the local sync runs. Its
 * write callbacks follow with the same LSNs (ps_repl_write_done). */
void ps_repl_shipped(void *arg, const struct ps_shipped *v, size_t n);

/* Write @pw (its job called back; admitted by ps_repl_route == 0) is held
 * until cw covers it; @w->cb fires then (possibly before this returns). */
void ps_repl_write_done(struct ps_server *ps,
                        struct ps_repl_wait *w,
                        const struct ps_write *pw);

/* A read of @range_id (admitted by ps_repl_route == 0) ran in read
 * transaction @txn_id. Returns 0: answer now; an RT_E* code: answer that
 * instead, now; 1: held, @w->cb fires later (never before this returns). */
int ps_repl_read_wait(struct ps_server *ps,
                      struct ps_repl_wait *w,
                      uint64_t range_id,
                      uint64_t txn_id);

/* ps_repl_read_wait for a read whose snapshot is at LSN @lsn of
 * @range_id (a value fetched from a peer at its applied LSN): the same
 * answers. */
int ps_repl_lsn_wait(struct ps_server *ps,
                     struct ps_repl_wait *w,
                     uint64_t range_id,
                     uint64_t lsn);

/* 1 when @range_id is held here as a replicated range (any role). */
int ps_repl_holds(const struct ps_server *ps, uint64_t range_id);
/* The ids of the peer servers this server has a link to (at most @max),
 * the replicas a corrupt value can be fetched from (ps_repair.h). */
size_t ps_repl_peer_ids(const struct ps_server *ps, uint64_t *ids, size_t max);
/* The client connection to peer @peer_id (connected or not), or NULL. */
struct rt_rpc_conn *ps_repl_peer_conn(struct ps_server *ps, uint64_t peer_id);

/* REPL_APPEND from a primary (@body borrowed). */
void ps_repl_on_append(struct ps_server *ps,
                       struct rt_rpc_conn *conn,
                       uint64_t id,
                       const uint8_t *body,
                       size_t len);

/* SEAL from the master (@body borrowed; on the master link or the RPC
 * server): answered status 0 + SealResp once sealed_epoch is durable
 * (SealResp.retry_ms > 0: busy, nothing changed, ask again then), or
 * error status RT_ENOTFOUND / RT_ESTALE (§4; RT_ESTALE "older master
 * term N < M" also for a master_term below the highest seen, ps_fence.h,
 * 0 taken as unsaid). History is not sent yet. */
void ps_repl_on_seal(struct ps_server *ps,
                     struct rt_rpc_conn *conn,
                     uint64_t id,
                     const uint8_t *body,
                     size_t len);

/* REPL_SUPPORT from a peer primary (@body borrowed): answered at once
 * from the granter (ps_lease.h), which records the grants first. */
void ps_repl_on_support(struct ps_server *ps,
                        struct rt_rpc_conn *conn,
                        uint64_t id,
                        const uint8_t *body,
                        size_t len);

/* Ms of read lease left on @range_id now (§6.3 b): 0 when not held here
 * (not primary, or support missing), UINT32_MAX when the lease needs
 * nobody (no ISR secondary); else capped there. */
uint64_t ps_repl_lease_left(const struct ps_server *ps, uint64_t range_id);

/* Self-fencing (§6.4): while @fenced, this server neither asks for nor
 * grants lease support, so its primaries lose their leases within L and
 * its peers' primaries lose this server's support. The disk-stall
 * detector that should call it is not built; tests use it to cut
 * support. */
void ps_repl_lease_fence(struct ps_server *ps, int fenced);

/* Closes the connection to peer @peer_id (it reconnects at once): what a
 * network fault does, for tests. */
void ps_repl_drop_peer(struct ps_server *ps, uint64_t peer_id);

/* Appends the replication metrics to the Prometheus page @b:
 * rt_ps_repl_held_write_ops, rt_ps_repl_held_reads, and per replicated
 * range rt_ps_repl_role (1 primary, 2 secondary), rt_ps_repl_last_lsn,
 * rt_ps_repl_applied_lsn, rt_ps_repl_commit_lsn (cw, or the highest
 * learned), rt_ps_repl_buffered_groups, rt_ps_repl_lease (ms left,
 * ps_repl_lease_left). */
void ps_repl_metrics(struct ps_server *ps, struct rt_buf *b);

/* HeartbeatReq.repl: ReplStatus.state of a replicated range. */
enum ps_repl_status_state {
    PS_REPL_ST_OK = 1,         /* primary SERVING, secondary FOLLOWING */
    PS_REPL_ST_ACTIVATING = 2, /* primary not serving yet (promotion,
                                  restart waiting for its assignment) */
    PS_REPL_ST_DIVERGED = 3,   /* secondary: never acks, not promotable */
    PS_REPL_ST_SEALED = 4,     /* secondary fenced its old generation */
    PS_REPL_ST_DEPOSED = 5,    /* primary whose generation ended */
    PS_REPL_ST_OTHER = 6,      /* primary NOLEASE / FROZEN, learner */
};

/* One ReplStatus per replicated range held here, for the heartbeat:
 * range_id, role (the core's, same numbers as rt.ReplRole), epoch,
 * applied_lsn, commit_lsn (cw, or the highest learned), lease_ms
 * (ps_repl_lease_left) and state (enum ps_repl_status_state). Returns a
 * malloc'ed array the caller frees (NULL when *n = 0). */
Rt__ReplStatus *ps_repl_status(struct ps_server *ps, size_t *n);

/* For ps_learn (catch-up). The core's actions go first to @hook (set
 * after ps_repl_start, by the server: ps_learn_action), which returns 1
 * for those it took; NULL drops none, runs none of them. */
struct rt_repl_event;
struct rt_repl_action;
typedef int (*ps_repl_action_hook)(struct ps_server *ps,
                                   const struct rt_repl_action *a);
void ps_repl_set_learn_hook(struct ps_server *ps, ps_repl_action_hook hook);
/* Steps the core with @ev (borrowed) and runs its actions; nothing
 * before the core exists or once stopping. */
void ps_repl_core_step(struct ps_server *ps, const struct rt_repl_event *ev);

/* Transfers of primaryship (docs/DESIGN-replication.md §3.1 FROZEN, §4,
 * §9.3 step 2), driven by ps_transfer.
 * ps_repl_freeze: the core's ps_rcore_freeze (same errors: RT_ESTALE,
 * RT_EINVAL, RT_EBUSY; RT_ESTALE too for a range not primary here); then
 * the read lease is released (ps_lease_holder_release: every grant void,
 * the range listed in `release` of every SupportReq) and a support round
 * goes out at once, so the ISR may seal without waiting out L. From then
 * ps_repl_route answers RT_EBUSY for the range.
 * ps_repl_unfreeze: back to SERVING; the lease must be won again (only
 * support asked for after this counts). RT_ENOTFOUND if not frozen here.
 * ps_repl_transfer_ready: 1 when the frozen range may be handed over:
 * @to acked its last LSN (*@lsn) and answered a SupportReq carrying the
 * release; with @all, also every ISR member acked it (cw = last, so no
 * write stays held) and every connected peer answered such a request;
 * 0 not yet; RT_ESTALE when the range is no longer a frozen primary
 * here. */
int ps_repl_freeze(struct ps_server *ps,
                   uint64_t range_id,
                   uint64_t epoch,
                   uint64_t to);
int ps_repl_unfreeze(struct ps_server *ps, uint64_t range_id);
int ps_repl_transfer_ready(struct ps_server *ps,
                           uint64_t range_id,
                           uint64_t to,
                           int all,
                           uint64_t *lsn);

/* While @on, ps_repl_route answers RT_EBUSY for @range_id whatever its
 * state: a freeze found persisted after a restart (ps_transfer), before
 * the core could be frozen again. 0 or RT_ENOTFOUND (not replicated
 * here). */
int ps_repl_hold(struct ps_server *ps, uint64_t range_id, int on);

/* The core's view of @range_id (tests, rtctl): 0 or RT_ENOTFOUND (not
 * replicated here). */
struct ps_rcore_range_info;
int ps_repl_range_info(struct ps_server *ps,
                       uint64_t range_id,
                       struct ps_rcore_range_info *out);

/* Catch-ups of kind @kind (enum ps_rcore_catchup) this server began as a
 * primary (tests, metrics). */
uint64_t ps_repl_catchups(struct ps_server *ps, int kind);

/* The server's key log (§2.3; NULL before ps_repl_start), fed with every
 * group committed here: valid until ps_repl_stop (tests, metrics). */
struct ps_keylog;
const struct ps_keylog *ps_repl_keylog(const struct ps_server *ps);
/* Forgets range @range_id's key log: a copy is replacing the data it
 * describes (its entries may name another history's keys). */
void ps_repl_keylog_forget(struct ps_server *ps, uint64_t range_id);

#endif
