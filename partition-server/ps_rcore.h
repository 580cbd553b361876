/* ps_rcore: the replica side of range replication as a pure state machine
 * (DESIGN-replication.md §11.1). It holds, per range, the role and state
 * of §3.1-§3.3, the primary's send buffer, per-peer streams, acks and the
 * commit LSN cw, and the client writes waiting for cw (§5.2-§5.4). It does
 * no I/O, reads no clock and draws no random numbers: time comes in with
 * each event, and everything it wants done comes out as actions, so the
 * same state and event always give the same state and actions. The daemon's
 * glue and tests/sim (sim_repl.c, sim_failover.c) drive the same code.
 *
 * Implemented so far: the write path, the seal / promotion side of
 * failover, the ISR shrink of §5.4 and the catch-up of replicas outside
 * the ISR (§3.3, §7.3, §8.1; no leases, no keyed catch-up).
 * - A range is created by ps_rcore_assign() at its durable LSN (0 for a
 *   new range): the primary goes ACTIVATING -> SERVING at once (nothing to
 *   catch up; support
 *   and catch-up come with leases and failover), a secondary FOLLOWING.
 *   ps_rcore_update() takes a later epoch and ISR, ps_rcore_forget() drops
 *   the range.
 * - Primary: the writer assigns LSNs; each DISK_DONE of a local group
 *   (range, lsn = last + 1, records, the client writes it holds) buffers
 *   the group and sends it to every ISR peer at once, pipelined: at most
 *   cfg.inflight groups unacked per peer, the rest waits in the buffer.
 *   Acks are cumulative; cw = min over the ISR of acked (own durable LSN
 *   included); a client write is answered (REPLY 0) when cw >= its LSN.
 *   A DISK_DONE at an LSN <= last (0 included) is no new group: its client
 *   writes (more writes of the last group, or writes that changed nothing,
 *   §5.2) are held until cw >= last.
 * - CONN up from a peer restarts every stream to it at acked + 1 (what
 *   was in flight on the old connection is lost); CONN down only starts
 *   the link-down clock of the ISR shrink (the resend rule covers loss).
 *   An RT_ELSNGAP NACK rewinds that peer's stream to applied + 1 (once per
 *   gap position); an RT_ESEALED NACK from a newer epoch deposes the
 *   primary and answers its held writes RT_ETIMEDOUT (outcome unknown).
 * - Resend rule (loss): one timer per node (PS_RCORE_TIMER_RESEND). While
 *   a peer has unacked groups it is armed every cfg.resend_ms; when it
 *   fires, a peer whose ack has not advanced for cfg.resend_ms since its
 *   last progress (ack advance, or a send that started from acked + 1) is
 *   rewound to acked + 1 and resent up to the window. Duplicates this
 *   causes are harmless: the receiver acks them without applying.
 * - Secondary: an append at accepted + 1 (accepted = highest LSN handed to
 *   the writer) becomes a WRITE action; its DISK_DONE makes it applied and
 *   acks it. lsn <= applied: acked again, not applied; applied < lsn <=
 *   accepted: ignored (its DISK_DONE acks it); any other LSN: RT_ELSNGAP
 *   with applied; an epoch older than the range's (or than its sealed
 *   epoch): RT_ESEALED with that epoch.
 * - ISR shrink (§5.4), checked at each resend tick of a SERVING or
 *   ACTIVATING primary (not a restarted one waiting for its assignment;
 *   cfg.ack_timeout_ms, conn_down_ms; 0 turns a check off): an ISR
 *   member whose oldest unacked group was committed ack_timeout_ms ago
 *   (counted from when the configuration naming it reached me, for
 *   groups older than that), or whose connection has been down
 *   conn_down_ms, or silent (ps_rcore_set_silent), is
 *   proposed for removal: ISR_CHANGE{remove} to cfg.master_id, one in
 *   flight per range (until an ISR_RESP error, or the epoch moves; after
 *   an error, asked again 5 resend periods later at the soonest). Its
 *   acks still count: held writes wait for the assignment at the
 *   committed epoch, whose ISR recomputes cw. A client write held
 *   cfg.write_hold_ms (the shrink cannot commit, or left the ISR below
 *   min_insync, which the glue enforces at admission) is answered
 *   RT_ETIMEDOUT (outcome unknown). A member that NACKs RT_ENOSPACE or
 *   RT_EDIVERGED (it cannot take my groups) is proposed for removal at
 *   once, until it acks again; RT_ECORRUPT (a frame that failed its CRC)
 *   is only resent.
 * - Failover (§3.1, §3.2, §7). SEAL{new_epoch} (from the master, @peer):
 *   unknown range RT_ENOTFOUND; new_epoch <= my epoch or < my sealed
 *   epoch RT_ESTALE; the same new_epoch again: the same answer (once
 *   persisted; nothing while the persist runs); a primary is DEPOSED and
 *   answers RT_ESTALE (it is not a sealable secondary); within
 *   cfg.seal_grace_ms of the last append from the primary, or of the
 *   node's start (ps_rcore_load), RT_EBUSY with retry_ms. That grace
 *   stands in for the lease rule ("no support granted to the old primary
 *   within the last L") until leases exist. Otherwise FOLLOWING -> SEALED:
 *   a WRITE action persists sealed_epoch (msg SEAL) and its DISK_DONE
 *   answers {0, applied}. The writer is FIFO, so every append accepted
 *   before the seal is durable by then: the answer's applied LSN is final
 *   (appends of older epochs are NACKed from the SEAL on).
 * - A SEALED secondary follows again on an assignment at >= its sealed
 *   epoch naming it SECONDARY, or on an append at >= its sealed epoch (a
 *   cancelled failover: the old primary goes on at the new epoch).
 * - ASSIGN (one range's configuration, from the master @peer), answered
 *   ASSIGN_RESP: older than my epoch or sealed epoch RT_ESTALE; naming me
 *   primary: a SEALED secondary is promoted, a DEPOSED primary of the
 *   same generation (a cancel) resumes, a serving primary takes the new
 *   ISR; a secondary asked to be primary without being sealed (or with
 *   an append still in its writer) RT_EINVAL.
 *   Promotion and resumption go ACTIVATING: the ISR members are assumed
 *   at the commit LSN I know (every ISR member acked it) and get my
 *   groups above it from the buffer, each duplicate acked with the
 *   member's applied LSN; SERVING once every member acked my last LSN.
 *   Secondaries keep the groups above the commit LSN they learned for
 *   that (the "key log" of §2.3, with records rather than keys). Naming
 *   me secondary: follow (a primary is DEPOSED first and then follows
 *   outside the ISR: rejoin and divergence are step 10). Omitting me: the
 *   range is dropped from the core.
 * - An append to a range held here as primary is answered RT_ESTALE with
 *   my epoch (and deposes me if the sender's epoch is newer); a primary
 *   answered RT_ESTALE or RT_ESEALED with a newer epoch is DEPOSED.
 * - A secondary acks each group to the node that sent it, at the epoch it
 *   came with: after following another generation, a group of the old
 *   one is never counted by the new primary.
 * - A local group whose DISK_DONE comes after the primary stopped
 *   serving is recorded as applied and its writes answered RT_ETIMEDOUT.
 *   DISK_DONE of a WRITE action echoes its io_id; a local group's has
 *   io_id 0 (a secondary's DISK_DONE with io_id 0 at an LSN it accepted
 *   is still taken as that replica write).
 * - ps_rcore_load() rebuilds a range after a restart from its durable
 *   state (rs record, pending groups): a primary ACTIVATING but silent
 *   until an assignment of its generation confirms it (§10.1; the
 *   registration's answer), then streaming its pending groups; a
 *   secondary FOLLOWING or SEALED; a LEARNER (a copy cut short) holds
 *   nothing and answers probes "no copy".
 * - Catch-up (primary side). Every replica of the set outside the ISR
 *   (ps_rcore_assignment.learners, or an ASSIGN's members not in its
 *   ISR) gets a PROBE; its answer (PROBE_RESP: state, applied LSN and
 *   history) decides (§7.3 with D = applied): a plain catch-up, streamed
 *   from its applied + 1, when the generation of its applied LSN starts
 *   at the same LSN in both histories, its applied LSN is not past that
 *   generation's end in mine, and my buffer still holds the next group;
 *   otherwise a full copy: a READ action (peer, io_id, lsn = my last
 *   LSN, msg = BEGIN with my history) that the glue runs at a snapshot
 *   LSN s >= that lsn, reporting READ_DONE(io_id, s) once the replica
 *   holds it durably (or a code: probed again later). Meanwhile the
 *   groups above the action's lsn stay in the buffer; the stream then
 *   starts at s + 1. Streams to such replicas never count for cw. Once
 *   one's ack reached cw and it lags at most cfg.join_lag groups, a
 *   SERVING primary sends ISR_CHANGE{add} (one ISR change per range in
 *   flight) and counts its acks for cw from then (§5.3); the assignment
 *   naming it in the ISR moves its stream among the ISR members'; an
 *   assignment at a later epoch without it, or an ISR_RESP error other
 *   than RT_EBUSY / RT_ESTALE, ends the join (those two may hide a
 *   commit of this very add, sent twice: it keeps counting and is asked
 *   again). A NACK of a replica not joining, or more than
 *   cfg.learn_window groups behind, sends it back to PROBE (probes are
 *   asked again every PS_RCORE_PROBE_TICKS resend periods). A member
 *   that an assignment of my generation leaves out of the ISR but keeps
 *   in the set is probed at the next tick, and my buffer keeps its
 *   groups above its last ack meanwhile, while they total at most
 *   cfg.window_bytes (past that it is released, and its catch-up will
 *   be a copy): a replica away for a moment rejoins by a plain catch-up.
 *   One whose history agrees but whose next group is no longer buffered
 *   gets a keyed copy: the READ's BEGIN has mode RT_REPL_BEGIN_KEYED and
 *   from_lsn = its applied LSN; the glue sends the current value (or a
 *   tombstone) of every key changed in (from_lsn, s] at a snapshot LSN
 *   s, or, if its key log does not reach back, a full copy instead;
 *   either ends in READ_DONE(s) like a full copy. One with a suffix I
 *   never had gets a keyed copy from D, the end of the prefix we share
 *   (for the newest generation of its history that began at the same LSN
 *   in mine, the lower of its two ends): the glue adds the keys the
 *   replica names for its LSNs above D. A keyed copy that fails (a
 *   READ_DONE with a code) makes that replica's next one full.
 *   ps_rcore_catchups() counts the catch-ups begun by kind.
 * - An ISR member that NACKs RT_ELSNGAP below the position I assumed
 *   for it (never confirmed by one of its acks: a restarted primary
 *   takes its members at its own applied LSN) and below my buffer gets,
 *   if no ack confirmed that position within a resend period, a full
 *   copy (READ) while it stays in the ISR, counted at the assumed
 *   position; one member of a range at a time; streamed from the copy's
 *   LSN after its READ_DONE.
 * - Catch-up (replica side). PROBE: my state (RT_ESTALE for an older
 *   epoch or if I serve as primary; RT_EBUSY while a write of mine is in
 *   flight). BEGIN (RT_ESTALE older epoch or serving primary, RT_EBUSY a
 *   write in flight, else accepted): I become a LEARNER CLEARING
 *   whatever I held (a deposed primary, a secondary, a learner), a WRITE
 *   action (msg BEGIN) persists LEARNING and, for a FULL one, clears my
 *   keys (a KEYED one is refused RT_EINVAL unless I hold a copy at its
 *   from_lsn or past it: nothing changes), and its
 *   DISK_DONE answers COPY_RESP{lsn 0} (COPYING). SNAP_END (the last
 *   chunk; RT_EINVAL unless COPYING that copy): a WRITE action (msg
 *   SNAP_END, lsn s) applies it with applied = s, and its DISK_DONE makes
 *   me a FOLLOWING secondary outside the ISR at s, with the primary's
 *   history, and answers COPY_RESP{lsn s}. A learner is never sealable
 *   (SEAL RT_ESTALE) and never promoted.
 * - History (§2): a range's generations (epoch, first LSN): a new range
 *   starts at (epoch, 1), a promotion adds (primary_epoch, last + 1), a
 *   secondary notes each append's generation (rt_repl_append.gen; 0
 *   makes its history unknown, and every catch-up of it a full copy). A
 *   duplicate append of another generation than my group at that LSN
 *   (a deposed primary's late local group), or an append accepted at the
 *   LSN such a late group then takes, makes a secondary DIVERGED: it
 *   never acks again, NACKs RT_EDIVERGED, and only a full copy repairs
 *   it.
 *
 * Thread: one thread per struct ps_rcore. Ownership: events are borrowed
 * for the call; actions go into the caller's list (rt_repl_ev.h). */
#ifndef PS_RCORE_H
#define PS_RCORE_H

#include <stdint.h>
#include <stdio.h>

#include "rt_repl_ev.h"

#define PS_RCORE_MAX_REPLICAS 8
/* The node's one timer (RT_REPL_EV_TIMER / RT_REPL_ACT_TIMER): resends,
 * the ISR shrink checks and the write-hold limit. */
#define PS_RCORE_TIMER_RESEND 1

enum ps_rcore_role {
    PS_RCORE_NONE,
    PS_RCORE_PRIMARY,
    PS_RCORE_SECONDARY,
    PS_RCORE_LEARNER,
    PS_RCORE_ROLE__NR
};

/* §3.1. NONE: not (or no longer) a primary. */
enum ps_rpri_state {
    PS_RPRI_NONE,
    PS_RPRI_ACTIVATING,
    PS_RPRI_SERVING,
    PS_RPRI_NOLEASE,
    PS_RPRI_FROZEN,
    PS_RPRI_DEPOSED,
    PS_RPRI__NR
};

/* §3.2. NONE: not (or no longer) a secondary. */
enum ps_rsec_state {
    PS_RSEC_NONE,
    PS_RSEC_FOLLOWING,
    PS_RSEC_SEALED,
    PS_RSEC_DIVERGED,
    PS_RSEC__NR
};

/* §3.3. NONE: not (or no longer) a learner. */
enum ps_rlrn_state {
    PS_RLRN_NONE,
    PS_RLRN_PROBED,
    PS_RLRN_CLEARING,
    PS_RLRN_COPYING,
    PS_RLRN_TAILING,
    PS_RLRN_READY,
    PS_RLRN__NR
};

/* Known-bad behaviours, FOR TESTS ONLY (tests/sim checks that its
 * properties catch them). Production code always uses PS_RCORE_MUT_NONE. */
enum ps_rcore_mutation {
    PS_RCORE_MUT_NONE,
    /* cw = the primary's own durable LSN: acks before the ISR has it. */
    PS_RCORE_MUT_ACK_PRIMARY_ONLY,
    /* a secondary accepts an append past a gap. */
    PS_RCORE_MUT_ACCEPT_GAP,
    /* the resend timer resends nothing: lost appends stay lost. */
    PS_RCORE_MUT_NO_RESEND,
    /* a sealed secondary still accepts appends of older epochs. */
    PS_RCORE_MUT_APPEND_AFTER_SEAL,
    /* cw stops counting an ISR member once its removal is asked, before
     * the master committed it. */
    PS_RCORE_MUT_SHRINK_EARLY,
    /* a replica being copied is proposed for the ISR (and counted for
     * cw at the copy's start position) before its copy finished. */
    PS_RCORE_MUT_LEARNER_EARLY,
    /* a restarted primary resumes its generation (as if no secondary
     * could hold a group it shipped before its own commit). */
    PS_RCORE_MUT_RESUME_RESTARTED,
    PS_RCORE_MUT__NR
};

struct ps_rcore_config
{
    uint64_t self_id;       /* this server's id */
    uint32_t inflight;      /* groups unacked per peer (--repl-inflight, 32) */
    uint64_t resend_ms;     /* resend rule period (> 0) */
    uint64_t seal_grace_ms; /* SEAL refused this long after the last
                               append from the primary or the start (L) */
    /* §5.4 (0 turns each off): an ISR member with a group unacked for
     * ack_timeout_ms (--ack-timeout-ms), or whose connection has been
     * down conn_down_ms, is proposed for
     * removal (ISR_CHANGE to master_id); a client write held longer than
     * write_hold_ms is answered RT_ETIMEDOUT (--write-hold-ms). */
    uint64_t ack_timeout_ms;
    uint64_t conn_down_ms;
    uint64_t write_hold_ms;
    uint64_t master_id;              /* the peer ISR_CHANGE goes to */
    enum ps_rcore_mutation mutation; /* tests only */
    /* Catch-up (§3.3, §8.1; 0 = the defaults below): groups a replica
     * outside the ISR may be behind (or a copy may take) before it starts
     * again with a new full copy; groups behind my last LSN at which a
     * caught-up replica may join the ISR (--join-lag). */
    uint64_t learn_window;
    uint64_t join_lag;
    /* Bytes of groups my buffer keeps for a member that left the ISR and
     * was not probed yet (--repl-window-mb; 0 = PS_RCORE_WINDOW_BYTES). */
    uint64_t window_bytes;
};

#define PS_RCORE_WINDOW_BYTES (64u << 20)

#define PS_RCORE_LEARN_WINDOW 8192
#define PS_RCORE_JOIN_LAG 64
/* A probe unanswered (or a copy failed) is asked again this many resend
 * periods later. */
#define PS_RCORE_PROBE_TICKS 5

/* A range as the master assigns it. */
struct ps_rcore_assignment
{
    uint64_t range_id;
    uint64_t epoch;
    uint64_t primary_id;
    uint64_t isr[PS_RCORE_MAX_REPLICAS]; /* the primary included */
    size_t n_isr;
    uint64_t lsn; /* ps_rcore_assign: the durable applied LSN it starts
                     from (0 = a new range; after a restart, its `rs`) */
    /* Replicas of the set outside the ISR (SECONDARY or LEARNER): the
     * primary catches them up; this node may be one. */
    uint64_t learners[PS_RCORE_MAX_REPLICAS];
    size_t n_learners;
    /* The epoch the primary's generation began at (0 = @epoch): below
     * @epoch for the children of a split or merge, which go on with
     * their parent's generation (a later ASSIGN of theirs names it). */
    uint64_t primary_epoch;
};

/* What ps_rcore_range_get() reports. */
struct ps_rcore_range_info
{
    enum ps_rcore_role role;
    unsigned state; /* enum ps_rpri_state / ps_rsec_state by role */
    uint64_t epoch;
    uint64_t last_lsn;    /* primary: last local group; else: accepted */
    uint64_t applied_lsn; /* durable here */
    uint64_t commit_lsn;  /* primary: cw; else: the highest cw learned */
    size_t n_held;        /* primary: client writes waiting for cw */
    size_t n_buffered;    /* groups buffered (primary: the send buffer;
                             secondary: those above its commit LSN) */
    uint64_t primary_id;
    uint64_t primary_epoch;
    uint64_t sealed_epoch;
    size_t n_learners; /* primary: replicas outside the ISR it catches up */
    int restarted;     /* a restarted primary waiting to be failed over */
    /* Primary: the other ISR members (n_isr_peers of them), then the
     * replicas outside the ISR (n_learners), with what each acked
     * (durable there); metrics derive replication lag from them. */
    size_t n_isr_peers;
    struct
    {
        uint64_t id;
        uint64_t acked;
    } peer[2 * PS_RCORE_MAX_REPLICAS];
};

/* @i is a primary serving its range (state numbers are per role: a
 * SEALED secondary's equals SERVING's, so the role is checked too). */
static inline int ps_rcore_info_serving(const struct ps_rcore_range_info *i)
{
    return i->role == PS_RCORE_PRIMARY && i->state == PS_RPRI_SERVING;
}

/* The primary's view of one replica outside the ISR. */
struct ps_rcore_learner_info
{
    const char *state; /* "probe", "copy", "tail" */
    int joining;       /* its ISR_CHANGE{add} is in flight: counted for cw */
    uint64_t acked;    /* durable there (copy: the position kept for it) */
    uint64_t copy_io;  /* copy: the READ action's id */
};

/* One group of a range's durable pending suffix (its `rp` records). */
struct ps_rcore_group_rec
{
    uint64_t lsn;
    const uint8_t *records;
    size_t len;
};

/* What a restart finds of a range (its `rs` record and pending groups). */
struct ps_rcore_durable
{
    uint64_t range_id;
    enum ps_rcore_role role; /* PRIMARY, SECONDARY, or LEARNER: a copy that
                                was being built (rs state LEARNING), which
                                holds nothing (applied and commit 0) */
    uint64_t epoch;
    uint64_t primary_id;
    uint64_t primary_epoch;
    uint64_t isr[PS_RCORE_MAX_REPLICAS];
    size_t n_isr;
    uint64_t applied_lsn;
    uint64_t commit_lsn;   /* the highest cw known when last written */
    uint64_t sealed_epoch; /* 0: never sealed */
    /* The groups commit_lsn + 1 .. applied_lsn in order (borrowed). */
    const struct ps_rcore_group_rec *groups;
    size_t n_groups;
};

struct ps_rcore;

/* A node with no ranges. @cfg is copied. Errors: RT_EINVAL (inflight or
 * resend_ms zero). On 0, *out belongs to the caller: ps_rcore_destroy(). */
int ps_rcore_create(const struct ps_rcore_config *cfg, struct ps_rcore **out);
void ps_rcore_destroy(struct ps_rcore *node);

/* Creates range @a->range_id here with the role @a gives this node
 * (primary: SERVING; secondary: FOLLOWING; named in @a->learners: a
 * LEARNER without a copy at LSN 0, else a FOLLOWING secondary outside
 * the ISR), at LSN @a->lsn: applied, last and (primary) cw, in the
 * primary generation @a->primary_epoch (0 = @a->epoch). A primary
 * takes its ISR members to hold @a->lsn too (their RT_ELSNGAP NACKs below
 * the send buffer are answered by nothing), and probes @a->learners (SEND
 * actions in @out). Errors: RT_EEXIST (range known), RT_EINVAL (this node
 * neither in the ISR nor a learner, too many replicas, or a
 * primary_epoch above the epoch). */
int ps_rcore_assign(struct ps_rcore *node,
                    const struct ps_rcore_assignment *a,
                    struct rt_repl_actions *out);

/* A later assignment of a known range at a higher epoch, same primary
 * (@a->lsn is ignored): takes the epoch and, on the primary, the ISR: a
 * member that stays keeps its stream, a new one starts at cw, a removed
 * one no longer counts, so cw may rise and release held writes (REPLY in
 * @out). Errors: RT_ENOTFOUND, RT_ESTALE (epoch not above the range's),
 * RT_EINVAL (this node not in the ISR, or another primary: the caller
 * forgets the range and assigns it again). */
int ps_rcore_update(struct ps_rcore *node,
                    const struct ps_rcore_assignment *a,
                    uint64_t now_ms,
                    struct rt_repl_actions *out);

/* §6.4 NOLEASE: of primary range @range_id's ISR peers, exactly those in
 * @ids[@n] (borrowed) are silent: their lease support lapsed. A silent
 * member is proposed for removal like a late one (ISR_CHANGE{remove} at
 * the next resend tick). Each call replaces the last. RT_ENOTFOUND if the
 * range is unknown or not primary here. */
int ps_rcore_set_silent(struct ps_rcore *node,
                        uint64_t range_id,
                        const uint64_t *ids,
                        size_t n);

/* Transfer of primaryship (§3.1 FROZEN, §4 TRANSFER_PRIMARY, §9.3).
 * ps_rcore_freeze: SERVING -> FROZEN for a transfer of @range_id at
 * @epoch to ISR member @to. While FROZEN the range takes no client write
 * (CLIENT_WRITE RT_ENOTPRIMARY; the glue answers RT_EBUSY before that),
 * still takes the DISK_DONE of groups already in the writer and streams
 * them, counts acks and answers held writes as cw covers them, and never
 * proposes an ISR removal. Errors, in this order: RT_ESTALE (not the
 * primary here, or not at @epoch, or deposed, or a restarted primary not
 * confirmed yet), RT_EINVAL (@to not an ISR peer), RT_EBUSY (not SERVING:
 * frozen already, activating, or without lease). An assignment naming
 * another primary steps a frozen primary down like a serving one; one
 * naming it primary of a new generation (the transfer ended as a
 * failover that chose it) activates it again.
 * ps_rcore_unfreeze: FROZEN -> SERVING (TRANSFER_ABORT); RT_ENOTFOUND
 * when the range is not a frozen primary here.
 * ps_rcore_peer_acked: *@acked = ISR peer @peer's cumulative ack of
 * primary range @range_id; RT_ENOTFOUND otherwise. */
int ps_rcore_freeze(struct ps_rcore *node,
                    uint64_t range_id,
                    uint64_t epoch,
                    uint64_t to);
int ps_rcore_unfreeze(struct ps_rcore *node, uint64_t range_id);
int ps_rcore_peer_acked(const struct ps_rcore *node,
                        uint64_t range_id,
                        uint64_t peer,
                        uint64_t *acked);

/* The range is no longer this node's (or changes role): a primary's held
 * writes are answered RT_ETIMEDOUT (outcome unknown, §5.5) in @out, and
 * everything the node kept of the range is freed. RT_ENOTFOUND if
 * unknown. */
int ps_rcore_forget(struct ps_rcore *node,
                    uint64_t range_id,
                    struct rt_repl_actions *out);
/* Rebuilds range @d->range_id after a restart at @now_ms (the start of
 * the seal grace): a PRIMARY goes ACTIVATING and waits for an ASSIGN of
 * its generation, then streams its pending groups to its ISR (SERVING
 * once they acked, at once without peers); a SECONDARY goes FOLLOWING,
 * or SEALED if @d->sealed_epoch > @d->epoch. Everything in @d
 * is copied. Errors: RT_EEXIST (range known), RT_EINVAL (another role,
 * @d->groups not exactly commit_lsn + 1 .. applied_lsn, the primary not
 * in the ISR, a PRIMARY record of another node or without this node in
 * its ISR, too many replicas). */
int ps_rcore_load(struct ps_rcore *node,
                  const struct ps_rcore_durable *d,
                  uint64_t now_ms,
                  struct rt_repl_actions *out);

/* One step: applies @ev, appends the actions to @out. Returns 0, or
 * RT_EINVAL for an event that does not fit (unknown range, an ack from
 * outside the ISR, an ack past the last LSN): the state is unchanged and,
 * for an append, an error ack is in @out. */
int ps_rcore_step(struct ps_rcore *node,
                  const struct rt_repl_event *ev,
                  struct rt_repl_actions *out);

/* Primary range @range_id's catch-up of replica @peer: 0 and *out
 * filled, or RT_ENOTFOUND. */
int ps_rcore_learner_get(const struct ps_rcore *node,
                         uint64_t range_id,
                         uint64_t peer,
                         struct ps_rcore_learner_info *out);

/* Range @range_id's history (§2.3, §7.3): @h[@n] (copied; oldest first),
 * the generations that made its LSNs up to its applied LSN, as its `rs`
 * record keeps them, for a range loaded or assigned at a non-zero LSN
 * (the core starts only a new range's history itself). RT_ENOTFOUND, or
 * RT_EINVAL (@n 0 or above RT_REPL_MAX_HISTORY, entries not increasing,
 * or the last entry past the applied LSN + 1): nothing changes. */
int ps_rcore_set_history(struct ps_rcore *node,
                         uint64_t range_id,
                         const struct rt_repl_epoch_start *h,
                         size_t n);

/* Catch-ups this node began as a primary, by kind. */
enum ps_rcore_catchup {
    PS_RCORE_CATCHUP_TAIL,  /* streamed from the replica's applied + 1 */
    PS_RCORE_CATCHUP_KEYED, /* a keyed copy (READ, BEGIN mode KEYED) */
    PS_RCORE_CATCHUP_FULL,  /* a full copy (READ) */
    PS_RCORE_CATCHUP__NR
};
uint64_t ps_rcore_catchups(const struct ps_rcore *node,
                           enum ps_rcore_catchup kind);

/* 0 and *out filled, or RT_ENOTFOUND. */
int ps_rcore_range_get(const struct ps_rcore *node,
                       uint64_t range_id,
                       struct ps_rcore_range_info *out);

/* One line per range and one per peer stream, for traces and rtctl. */
void ps_rcore_dump(const struct ps_rcore *node, FILE *f);

const char *ps_rcore_role_name(enum ps_rcore_role r);
/* @state of role @r. */
const char *ps_rcore_state_name(enum ps_rcore_role r, unsigned state);

#endif
