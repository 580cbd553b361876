/* ms_rcore: the master's side of range replication as a pure state machine
 * (DESIGN-replication.md §3.4, §7.1, §11.1). Per range it holds the
 * committed configuration (struct rt_repl_conf, the catalog's copy) and
 * the one operation in flight; per server, when it was last heard from.
 * It does no I/O, reads no clock and commits nothing itself: time comes in
 * with each event, catalog mutations go out as PROPOSE actions guarded by
 * a compare-and-set on (range, epoch, seal_epoch), and the caller feeds
 * their outcome back as a COMMITTED event. Only committed state is acted
 * on: a SEAL or ASSIGN that depends on a decision is sent after its
 * COMMITTED (§2.4). The master's glue and tests/sim drive the same code.
 *
 * States (one operation per range at a time):
 * - STABLE: nothing in flight. When the primary is suspected (no heartbeat
 *   for cfg.failover_after_ms, or its connection down for
 *   cfg.reconnect_grace_ms without a heartbeat since, or its heartbeat
 *   reports a stalled writer) and some ISR
 *   secondary is not, it proposes the intent seal_epoch = epoch + 1,
 *   FAILOVER. No server is suspected before cfg.failover_after_ms +
 *   cfg.lease_ms after the core was created (a new master must not read
 *   "not heard yet" as "dead", §2.4).
 * - SEALING (the intent committed, or loaded): SEAL to every ISR secondary
 *   not suspected, resent every cfg.resend_ms to those that have not
 *   answered (after retry_ms to those that answered RT_EBUSY). When one
 *   answered ok and cfg.seal_wait_ms passed since the first, or every ISR
 *   secondary not suspected answered ok, it chooses the sealed replier
 *   with the highest applied LSN (ties: lower id; a TRANSFER intent: its
 *   seal_to if it holds that maximum) and proposes epoch = seal_epoch,
 *   primary = chosen, primary_epoch = epoch, ISR = the sealed repliers,
 *   the old primary a SECONDARY outside the ISR. If instead the suspected
 *   primary heartbeats after the intent and no SEAL was answered ok yet
 *   (FAILOVER only), it proposes the cancel: epoch = seal_epoch, same
 *   primary, primary_epoch and ISR. Without any answer it waits.
 * - ASSIGNING (a new configuration committed): ASSIGN to every member, the
 *   primary first, resent to the primary every cfg.resend_ms until it
 *   answers ASSIGN_RESP at the epoch (then STABLE and an EVENT with the
 *   duration). If the primary becomes suspected meanwhile and some ISR
 *   secondary is not, the wait is dropped (STABLE), so that the next
 *   failover can start; without such a secondary the resends go on (the
 *   primary may only be cut off for a while).
 * - A transfer (ms_rcore_transfer) enters SEALING from STABLE with a
 *   TRANSFER intent whose old primary already counts as sealed.
 * - ADDING (a learner committed by ms_rcore_add_learner): ends with its
 *   ISR_CHANGE{add} (committed: T becomes SECONDARY and joins the ISR) or
 *   after its deadline, cfg.learner_timeout_ms or more for a large range
 *   (ms_rcore_range_size; committed: T leaves the replica set; an
 *   ASSIGN without T tells it to drop its copy, and the range is
 *   ASSIGNING until the primary answered at the new epoch). A SECONDARY
 *   outside the ISR that catches up first (a dead server back before the
 *   copy ended) may join too when that gives the ISR rf members: the same
 *   commit aborts the learner (it leaves the set; EVENT
 *   "learner_aborted"), DESIGN-replication.md §8.2. Any other ISR change
 *   waits (RT_EBUSY).
 *
 * Replicas leave the set by ms_rcore_remove_replica() (the caller
 * decides: re-replication's surplus after its learner joined, a server
 * whose disk was wiped): epoch + 1, the server out of the set and the
 * ISR; it gets the assignment without the range. From STABLE the range
 * then waits in ASSIGNING for the primary's answer (EVENT
 * "replica_removed" at its end); in ADDING the copy goes on.
 *
 * ISR_CHANGE from a primary is checked in the order of §4: unknown range
 * RT_ENOTFOUND; epoch not the current one RT_ESTALE; sender not the
 * primary RT_ENOTPRIMARY; removing the primary or a non-member, adding a
 * server that is not a LEARNER nor a SECONDARY outside the ISR (a
 * non-member, the primary, an ISR member), an empty change, a server
 * twice RT_EINVAL; any operation in
 * flight (a seal intent, an assignment outstanding, a proposal pending; in
 * ADDING anything but adding that learner) RT_EBUSY. An accepted change is
 * proposed (epoch + 1; ISR minus the removed, even below min-insync; the
 * added servers become SECONDARY and join the ISR); on its commit the
 * sender gets ISR_RESP{0, epoch} and the range goes ASSIGNING; a failed
 * commit answers the commit's code.
 *
 * A failed proposal (COMMITTED with a code: the catalog moved under the
 * core) drops the operation and emits EVENT "stale": the caller reloads
 * the range from the catalog with ms_rcore_load().
 *
 * Thread: one thread per struct ms_rcore. Ownership: events are borrowed
 * for the call; actions go into the caller's list (rt_repl_ev.h). */
#ifndef MS_RCORE_H
#define MS_RCORE_H

#include <stdint.h>
#include <stdio.h>

#include "rt_repl_ev.h"

/* The core's one timer (RT_REPL_EV_TIMER / RT_REPL_ACT_TIMER): armed at
 * the next deadline (suspicion, seal wait, resend, learner timeout). */
#define MS_RCORE_TIMER_TICK 1

enum ms_rcore_state {
    MS_RCORE_STABLE,
    MS_RCORE_SEALING,
    MS_RCORE_ASSIGNING,
    MS_RCORE_ADDING,
    MS_RCORE__NR
};

/* Known-bad behaviours, FOR TESTS ONLY (tests/sim checks that its
 * properties catch them). Production code always uses MS_RCORE_MUT_NONE. */
enum ms_rcore_mutation {
    MS_RCORE_MUT_NONE,
    /* the new primary is the sealed replier with the LOWEST applied LSN. */
    MS_RCORE_MUT_CHOOSE_MIN,
    /* the failover commits as soon as the intent is committed, choosing
     * the first live ISR secondary without sealing anyone. */
    MS_RCORE_MUT_NO_SEAL,
    MS_RCORE_MUT__NR
};

struct ms_rcore_config
{
    uint64_t failover_after_ms;      /* --failover-after-ms (1500), > 0 */
    uint64_t reconnect_grace_ms;     /* --reconnect-grace-ms (300) */
    uint64_t lease_ms;               /* L, the partition servers' lease */
    uint64_t seal_wait_ms;           /* --seal-wait-ms (200) */
    uint64_t resend_ms;              /* SEAL / ASSIGN resend period, > 0 */
    uint64_t learner_timeout_ms;     /* --learner-timeout-ms (30000) */
    uint64_t learner_min_mb_per_s;   /* --learner-min-mb-per-s (20), 0: off */
    enum ms_rcore_mutation mutation; /* tests only */
};

/* A learner of a range of B bytes (ms_rcore_range_size()) has
 * max(learner_timeout_ms, MS_RCORE_LEARNER_FIXED_MS + B at
 * learner_min_mb_per_s) to join; with learner_min_mb_per_s 0, or B not
 * known, learner_timeout_ms. The fixed part is the probe, the catch-up of
 * the live stream after the copy, and the join. */
#define MS_RCORE_LEARNER_FIXED_MS 10000

/* What ms_rcore_range_get() reports. */
struct ms_rcore_range_info
{
    enum ms_rcore_state state;
    struct rt_repl_conf conf; /* the committed configuration */
    int proposing;            /* a proposal is waiting for its COMMITTED */
    size_t n_sealed;          /* SEALING: ISR secondaries that sealed */
    /* The operation in flight, for the status: "failover" or "transfer"
     * (from the intent's proposal to the new primary's answer),
     * "failover_cancelled", "isr_change", "learner", "replica_removed";
     * NULL when none.
     * Static string. */
    const char *op;
    uint64_t op_start_ms; /* when @op began (with @op only) */
    int restarted;        /* its primary restarted and waits for a failover */
};

struct ms_rcore;

/* A core with no ranges and no servers, started at @now_ms (the start of
 * the suspicion grace). @cfg is copied. Errors: RT_EINVAL (a zero
 * failover_after_ms or resend_ms, an unknown mutation). On 0, *out
 * belongs to the caller: ms_rcore_destroy(). */
int ms_rcore_create(const struct ms_rcore_config *cfg,
                    uint64_t now_ms,
                    struct ms_rcore **out);
void ms_rcore_destroy(struct ms_rcore *m);

/* Loads (or replaces) range @c->range_id from the catalog: SEALING if
 * @c->seal_epoch is set (SEALs go out, they are idempotent), ADDING if a
 * member is a LEARNER, else STABLE; whatever was in flight for the range
 * is forgotten. Every member becomes a known server. Errors: RT_EINVAL
 * (no primary, the primary not in the ISR, a seal_epoch not above the
 * epoch, too many replicas). */
int ms_rcore_load(struct ms_rcore *m,
                  const struct rt_repl_conf *c,
                  uint64_t now_ms,
                  struct rt_repl_actions *out);

/* The size of range @range_id as its primary last reported it (bytes of
 * keys and values). It sets the deadline of the range's learners: one
 * being built gets the later of its deadline and its start plus the
 * time the new size allows (never earlier); a later one is armed with
 * it. Unknown (0) until reported: a restarted master arms a loaded
 * learner by learner_timeout_ms and extends it at the first report.
 * Errors: RT_ENOTFOUND. */
int ms_rcore_range_size(struct ms_rcore *m,
                        uint64_t range_id,
                        uint64_t size_bytes);

/* Forgets range @range_id (its table was deleted): whatever was in flight
 * for it is dropped, and later answers about it are ignored. A proposal
 * of it still waiting for its COMMITTED gets RT_EINVAL from that step.
 * Errors: RT_ENOTFOUND. */
int ms_rcore_forget(struct ms_rcore *m, uint64_t range_id);

/* STABLE -> (proposal) -> ADDING: add server @target as a LEARNER of
 * @range_id. Errors: RT_ENOTFOUND (range), RT_EBUSY (operation in
 * flight), RT_EEXIST (already a member), RT_EINVAL (rf would be exceeded
 * by more than one, or no room). */
int ms_rcore_add_learner(struct ms_rcore *m,
                         uint64_t range_id,
                         uint64_t target,
                         uint64_t now_ms,
                         struct rt_repl_actions *out);

/* STABLE or ADDING -> (proposal): server @server leaves the replica set
 * (and the ISR) of @range_id; in ADDING the learner itself leaves as a
 * failed one does (STABLE, EVENT "learner_failed"). Errors: RT_ENOTFOUND
 * (range), RT_EBUSY (another operation in flight, a seal intent),
 * RT_EINVAL (not a member, or the primary: it leaves only by a failover
 * or a transfer). */
int ms_rcore_remove_replica(struct ms_rcore *m,
                            uint64_t range_id,
                            uint64_t server,
                            uint64_t now_ms,
                            struct rt_repl_actions *out);

/* A planned primaryship transfer (DESIGN-replication.md §9.3 step 2).
 * ms_rcore_transfer_check: may @range_id's primary hand over to @to now?
 * *@conf gets the committed configuration (the epoch TRANSFER_PRIMARY
 * names). ms_rcore_transfer: the primary answered TRANSFER_PRIMARY{range,
 * @epoch, to @to} ok: it is frozen, @to acked everything up to @lsn, and
 * it released its lease. STABLE -> (proposal) -> SEALING: proposes the
 * intent seal_epoch = epoch + 1, TRANSFER, seal_to @to. Once committed,
 * the old primary's answer stands for its SEAL (it froze at @lsn and
 * serves nothing more of its generation): it counts as a sealed replier
 * at @lsn and so stays in the ISR, as a SECONDARY, of the configuration
 * that names @to primary. The rest runs as a failover: SEALs to the other
 * ISR members, the choice (@to, which holds the maximum), ASSIGNING, and
 * the EVENT "transfer" when @to answered its assignment. The choice waits
 * for the seal of every ISR secondary not suspected (@to above all), up to
 * lease_ms + seal_wait_ms after the intent (a secondary answers SEAL busy
 * for up to L, as in the grace after its start); without @to, the highest
 * LSN wins, which may be the old primary (a failover back to it). A
 * transfer
 * intent loaded after a restart finishes as a plain failover among the
 * sealed secondaries. Errors (both, in this order): RT_ENOTFOUND (range
 * not followed), RT_ESTALE (the range is no longer at @epoch), RT_EINVAL
 * (@to is the primary or not in the ISR), RT_EBUSY (an operation in
 * flight). */
int ms_rcore_transfer_check(const struct ms_rcore *m,
                            uint64_t range_id,
                            uint64_t to,
                            struct rt_repl_conf *conf);
int ms_rcore_transfer(struct ms_rcore *m,
                      uint64_t range_id,
                      uint64_t epoch,
                      uint64_t to,
                      uint64_t lsn,
                      uint64_t now_ms,
                      struct rt_repl_actions *out);

/* One step: MSG (HEARTBEAT, SEAL_RESP, ISR_CHANGE, ASSIGN_RESP from
 * @ev->peer), CONN (@ev->code 0: up, else down), TIMER, COMMITTED
 * (@ev->io_id, @ev->code). Returns 0, or RT_EINVAL for an event that
 * does not fit (a message kind the master does not take, an unknown
 * proposal or timer): state unchanged. A refused ISR_CHANGE returns 0
 * with its ISR_RESP error in @out. */
int ms_rcore_step(struct ms_rcore *m,
                  const struct rt_repl_event *ev,
                  struct rt_repl_actions *out);

/* 0 and *out filled, or RT_ENOTFOUND. */
int ms_rcore_range_get(const struct ms_rcore *m,
                       uint64_t range_id,
                       struct ms_rcore_range_info *out);

/* One line per range and per known server, for traces and rtctl. */
void ms_rcore_dump(const struct ms_rcore *m, FILE *f);

const char *ms_rcore_state_name(enum ms_rcore_state s);

#endif
