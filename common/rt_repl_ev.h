/* Replication events and actions: the vocabulary shared by the pure cores
 * (partition-server/ps_rcore, later master/ms_rcore) and whatever drives
 * them (the daemons' glue, tests/sim/sim_repl.c). DESIGN-replication.md
 * §11.1.
 *
 * A core takes one struct rt_repl_event per step and appends what it wants
 * done to a struct rt_repl_actions. Messages here are plain C structs; the
 * glue converts them to and from proto/rt.proto. Defined so far: the write
 * path (an append group and its ack) and failover (SEAL and its answer,
 * ISR_CHANGE and its answer, one range's assignment and its answer, a
 * server's heartbeat), catch-up of a replica outside the ISR (probe and
 * its answer, a full copy's begin and end and their answers), plus the
 * catalog mutation ms_rcore proposes.
 *
 * Thread: none of its own; a struct rt_repl_actions belongs to the caller
 * of one core. Ownership: an event and everything it points at is borrowed
 * for the step; the record bytes of every action are copied into the list
 * and stay valid until rt_repl_actions_reset() or _close(). */
#ifndef RT_REPL_EV_H
#define RT_REPL_EV_H

#include <stddef.h>
#include <stdint.h>

/* Events in. @now_ms is the node's local monotonic clock. */
enum rt_repl_ev_kind {
    RT_REPL_EV_MSG,          /* a decoded message from @peer */
    RT_REPL_EV_CONN,         /* connection to @peer up / down */
    RT_REPL_EV_TIMER,        /* timer @timer_id fired */
    RT_REPL_EV_DISK_DONE,    /* a write is durable: (range, lsn, ...) */
    RT_REPL_EV_READ_DONE,    /* a snapshot chunk / probe read / fetch read */
    RT_REPL_EV_CLIENT_WRITE, /* admission request for a range */
    RT_REPL_EV_CLIENT_READ,  /* a read finished evaluating at txn T */
    RT_REPL_EV_COMMITTED,    /* (ms_rcore) a proposed catalog change
                                committed or failed */
    RT_REPL_EV_GROUP,        /* (primary) the writer took @lsn for a group
                                of @range_id and is committing it: its
                                records may be shipped before they are
                                durable here */
    RT_REPL_EV__NR
};

/* Actions out. */
enum rt_repl_act_kind {
    RT_REPL_ACT_SEND,    /* message @msg to @peer */
    RT_REPL_ACT_WRITE,   /* submit to the writer: raw records of a group */
    RT_REPL_ACT_READ,    /* a FULL copy of range @range_id to @peer:
                            open a snapshot at an LSN s >= @lsn, send
                            @msg (BEGIN) with s, the chunks, the end;
                            READ_DONE @io_id reports s or the failure */
    RT_REPL_ACT_TIMER,   /* arm @timer_id at @at_ms (0 = cancel) */
    RT_REPL_ACT_REPLY,   /* answer client request @req_id with @code */
    RT_REPL_ACT_PROPOSE, /* (ms_rcore) a catalog mutation + its guard */
    RT_REPL_ACT_EVENT,   /* an event for the log and metrics */
    RT_REPL_ACT__NR
};

enum rt_repl_msg_kind {
    RT_REPL_MSG_APPEND,      /* primary -> replica: one group of one range */
    RT_REPL_MSG_ACK,         /* replica -> primary: cumulative ack or NACK */
    RT_REPL_MSG_SEAL,        /* master -> ISR member (SealReq); as a WRITE
                                action: persist the range's sealed_epoch, synced */
    RT_REPL_MSG_SEAL_RESP,   /* ISR member -> master (SealResp) */
    RT_REPL_MSG_ISR_CHANGE,  /* primary -> master (IsrChangeReq) */
    RT_REPL_MSG_ISR_RESP,    /* master -> primary: the ISR_CHANGE outcome */
    RT_REPL_MSG_ASSIGN,      /* master -> replica: one range's configuration */
    RT_REPL_MSG_ASSIGN_RESP, /* replica -> master: assignment applied */
    RT_REPL_MSG_HEARTBEAT,   /* partition server -> master: alive */
    RT_REPL_MSG_PROBE,       /* primary -> replica outside the ISR (ProbeReq) */
    RT_REPL_MSG_PROBE_RESP,  /* replica -> primary (ReplicaState) */
    RT_REPL_MSG_BEGIN,       /* primary -> replica: a FULL copy starts
                                (ReplBegin); as a WRITE action: persist
                                LEARNING and clear the range's keys */
    RT_REPL_MSG_SNAP_END,    /* primary -> replica: the copy's last chunk
                                (REPL_SNAP last); as a WRITE action: apply
                                it with applied = (snap_epoch, snap_lsn),
                                the history and state OK */
    RT_REPL_MSG_COPY_RESP,   /* replica -> primary: BEGIN durable (lsn 0),
                                or the copy durable at @lsn, or why not */
    RT_REPL_MSG__NR
};

#define RT_REPL_MAX_REPLICAS 8
/* Generations a history keeps (the oldest are dropped: an unknown start
 * only makes a catch-up a full copy). */
#define RT_REPL_MAX_HISTORY 16

/* proto ReplRole. */
enum rt_repl_role {
    RT_REPL_ROLE_NONE,
    RT_REPL_ROLE_PRIMARY,
    RT_REPL_ROLE_SECONDARY,
    RT_REPL_ROLE_LEARNER,
    RT_REPL_ROLE__NR
};

/* proto Range.seal_kind. */
enum rt_repl_seal_kind {
    RT_REPL_SEAL_NONE,
    RT_REPL_SEAL_FAILOVER,
    RT_REPL_SEAL_TRANSFER,
};

struct rt_repl_member
{
    uint64_t server_id;
    enum rt_repl_role role;
};

/* One range's replication configuration: the catalog fields of
 * DESIGN-replication.md §2.1 (rt.Range) that the cores use. */
struct rt_repl_conf
{
    uint64_t range_id;
    uint64_t epoch;
    uint64_t primary_id; /* Range.server_id */
    uint64_t primary_epoch;
    struct rt_repl_member members[RT_REPL_MAX_REPLICAS]; /* Range.replicas */
    size_t n_members;
    uint64_t isr[RT_REPL_MAX_REPLICAS]; /* the primary included */
    size_t n_isr;
    uint32_t rf, min_insync;
    uint64_t seal_epoch; /* 0: no failover or transfer intent */
    enum rt_repl_seal_kind seal_kind;
    uint64_t seal_to;
};

/* SEAL (proto SealReq): fence generation @old_epoch of the range. */
struct rt_repl_seal
{
    uint64_t range_id;
    uint64_t old_epoch;
    uint64_t new_epoch;
    uint64_t old_primary;
};

/* The answer to a SEAL (proto SealResp plus the RPC's code). @code 0: the
 * sender persisted sealed_epoch = @new_epoch and holds (@applied_epoch,
 * @applied_lsn) durably; RT_EBUSY: retry after @retry_ms; RT_ESTALE,
 * RT_ENOTFOUND: refused (§4). */
struct rt_repl_seal_resp
{
    uint64_t range_id;
    uint64_t new_epoch;
    int32_t code;
    uint64_t applied_epoch;
    uint64_t applied_lsn;
    uint32_t retry_ms;
};

/* ISR_CHANGE (proto IsrChangeReq), sent by the primary at @epoch. */
struct rt_repl_isr_change
{
    uint64_t range_id;
    uint64_t epoch;
    uint64_t remove[RT_REPL_MAX_REPLICAS];
    size_t n_remove;
    uint64_t add[RT_REPL_MAX_REPLICAS];
    size_t n_add;
};

/* The outcome of an ISR_CHANGE: 0 and the committed @epoch, or the §4
 * error. */
struct rt_repl_isr_resp
{
    uint64_t range_id;
    int32_t code;
    uint64_t epoch;
};

/* The answer to an ASSIGN of @range_id at @epoch. */
struct rt_repl_assign_resp
{
    uint64_t range_id;
    uint64_t epoch;
    int32_t code;
};

/* One group of one range (proto ReplGroup inside REPL_APPEND). @records
 * are the group's change records, opaque to the core. */
struct rt_repl_append
{
    uint64_t range_id;
    uint64_t epoch;      /* the sender's configuration epoch */
    uint64_t lsn;        /* this group's LSN */
    uint64_t commit_lsn; /* the sender's cw when it sent the group */
    const uint8_t *records;
    size_t records_len;
    /* The generation (primary_epoch) that made the group, for the
     * receiver's history; 0 = unknown (the receiver's history then stays
     * unknown, and its catch-ups are full copies). */
    uint64_t gen;
};

/* proto EpochStart: generation @epoch began at @first_lsn. */
struct rt_repl_epoch_start
{
    uint64_t epoch;
    uint64_t first_lsn;
};

/* proto ReplicaState.state. */
enum rt_repl_copy_state {
    RT_REPL_COPY_NONE,     /* no copy (never copied, or a copy cut short) */
    RT_REPL_COPY_OK,       /* a whole copy up to its applied LSN */
    RT_REPL_COPY_LEARNING, /* a copy being built */
    RT_REPL_COPY_DIVERGED, /* holds LSNs the primary never had */
};

/* REPL_PROBE (proto ProbeReq). */
struct rt_repl_probe
{
    uint64_t range_id;
    uint64_t epoch;
};

/* The answer to a probe (proto ReplicaState plus the RPC's code): @code 0
 * or RT_ESTALE (the prober's epoch is older than mine, or I am a serving
 * primary); @applied_epoch is the generation of @applied_lsn in @history
 * (0 when the history is unknown: @n_history 0). */
struct rt_repl_replica_state
{
    uint64_t range_id;
    uint64_t epoch;
    int32_t code;
    enum rt_repl_copy_state state;
    uint64_t applied_epoch;
    uint64_t applied_lsn;
    struct rt_repl_epoch_start history[RT_REPL_MAX_HISTORY];
    size_t n_history;
};

/* REPL_BEGIN and the copy's end (proto ReplBegin; the last REPL_SNAP):
 * @snap_lsn and @snap_epoch are 0 in a BEGIN the primary's core asks for
 * (the snapshot is opened after it). @history is the primary's. @mode:
 * RT_REPL_BEGIN_FULL (0 reads as it) clears the replica's span first;
 * RT_REPL_BEGIN_KEYED keeps it and sends only the keys changed after
 * @from_lsn, the replica's applied LSN, which must still be it. */
enum rt_repl_begin_mode {
    RT_REPL_BEGIN_FULL = 1,
    RT_REPL_BEGIN_KEYED = 2,
};
struct rt_repl_begin
{
    uint64_t range_id;
    uint64_t epoch;
    /* The sender's id of this copy (0: none): a second BEGIN with the
     * same id, epoch and sender is a duplicate of one already taken and
     * must not clear the copy it started. */
    uint64_t copy_id;
    uint32_t mode;
    uint64_t from_lsn;
    uint64_t snap_lsn;
    uint64_t snap_epoch;
    struct rt_repl_epoch_start history[RT_REPL_MAX_HISTORY];
    size_t n_history;
};

/* The replica's answer to BEGIN (@lsn 0) or to the copy's end (@lsn =
 * snap_lsn): @code 0, or the §4 error (RT_ESTALE, RT_EINVAL, RT_EBUSY). */
struct rt_repl_copy_resp
{
    uint64_t range_id;
    uint64_t epoch;
    int32_t code;
    uint64_t lsn;
};

/* Answer to appends of one range (proto RangeAck). @code 0: every group up
 * to @applied_lsn is durable on the sender. RT_ELSNGAP: an append was not
 * at applied+1; @applied_lsn is the sender's durable position, from which
 * the primary resends. RT_ESEALED: the append's epoch is older than the
 * sender's @epoch. */
struct rt_repl_ack
{
    uint64_t range_id;
    int32_t code;
    uint64_t applied_lsn;
    uint64_t epoch;
};

struct rt_repl_msg
{
    enum rt_repl_msg_kind kind;
    union {
        struct rt_repl_append append;
        struct rt_repl_ack ack;
        struct rt_repl_seal seal;
        struct rt_repl_seal_resp seal_resp;
        struct rt_repl_isr_change isr_change;
        struct rt_repl_isr_resp isr_resp;
        struct rt_repl_conf assign;
        struct rt_repl_assign_resp assign_resp;
        struct rt_repl_probe probe;
        struct rt_repl_replica_state probe_resp;
        struct rt_repl_begin begin; /* BEGIN, SNAP_END */
        struct rt_repl_copy_resp copy_resp;
        /* HEARTBEAT (the sender is the event's @peer): its writer has
         * not finished a commit for --stall-timeout-ms; it fenced itself
         * and is to be failed over like a silent server. */
        struct
        {
            int stalled;
        } heartbeat;
    } u;
};

struct rt_repl_event
{
    enum rt_repl_ev_kind kind;
    uint64_t now_ms;
    uint64_t peer;     /* MSG, CONN: the other node */
    uint64_t timer_id; /* TIMER */
    uint64_t io_id;    /* DISK_DONE, READ_DONE: the WRITE/READ action's id */
    int up;            /* CONN: 1 up, 0 down */
    const struct rt_repl_msg *msg; /* MSG */
    /* GROUP (primary): @range_id, @lsn and the group's @records, before
     * the local commit. DISK_DONE of a local group (primary): the writer
     * assigned @lsn to the group's changes of @range_id and they are
     * durable; @records as in GROUP when no GROUP came first; @req_ids are
     * the client writes it holds. DISK_DONE of a replica's WRITE: @range_id and
     * @lsn of it. CLIENT_WRITE: @range_id and @req_ids[0]. READ_DONE of a copy
     * (the READ action): @range_id, and @lsn = the snapshot's LSN s, now
     * durable on the replica, or @code why the copy failed. */
    uint64_t range_id;
    uint64_t lsn;
    const uint8_t *records;
    size_t records_len;
    const uint64_t *req_ids;
    size_t n_req_ids;
    int32_t code; /* COMMITTED: 0, or why the proposal @io_id failed;
                     CONN: 0 up, an RT_E* code down; READ_DONE: 0 or
                     why the copy failed */
};

struct rt_repl_action
{
    enum rt_repl_act_kind kind;
    uint64_t peer;     /* SEND */
    uint64_t timer_id; /* TIMER */
    uint64_t at_ms;    /* TIMER: 0 cancels */
    uint64_t io_id;    /* WRITE: echoed by the DISK_DONE event */
    uint64_t req_id;   /* REPLY */
    int32_t code;      /* REPLY: 0 or an RT_E* code */
    uint64_t range_id; /* WRITE: range and LSN of the group */
    uint64_t lsn;
    struct rt_repl_msg msg; /* SEND; an append's records point into the
                               list's own copy (WRITE: @msg.u.append, or
                               @msg.u.seal for a seal's persist) */
    /* PROPOSE (@io_id names it in the COMMITTED event): commit @conf only
     * if the catalog's range still has epoch @guard_epoch and seal_epoch
     * @guard_seal_epoch (a compare-and-set, DESIGN-replication.md §2.4). */
    uint64_t guard_epoch;
    uint64_t guard_seal_epoch;
    struct rt_repl_conf conf;
    /* EVENT: a static name ("failover", "seal", ...), @range_id, @code,
     * @at_ms = how long the operation took. */
    const char *what;
};

/* A growable list of actions, embedded by the caller. */
struct rt_repl_actions
{
    struct rt_repl_action *v;
    size_t n, cap;
    uint8_t **blobs; /* record copies, freed at reset */
    size_t n_blobs, cap_blobs;
};

void rt_repl_actions_init(struct rt_repl_actions *a);
/* Drops every action and the record copies; keeps the capacity. */
void rt_repl_actions_reset(struct rt_repl_actions *a);
void rt_repl_actions_close(struct rt_repl_actions *a);
/* Appends a copy of @act; if @act->msg is an append, its records are
 * copied too. Returns the stored action (valid until the next append,
 * reset or close). Never fails (allocation failure aborts, rt_alloc.h). */
struct rt_repl_action *rt_repl_actions_add(struct rt_repl_actions *a,
                                           const struct rt_repl_action *act);

const char *rt_repl_ev_kind_name(enum rt_repl_ev_kind k);
const char *rt_repl_act_kind_name(enum rt_repl_act_kind k);
const char *rt_repl_msg_kind_name(enum rt_repl_msg_kind k);
const char *rt_repl_role_name(enum rt_repl_role r);

/* Helpers over a configuration: is @id in its ISR; its role in @c (NONE
 * if it is not a member). */
int rt_repl_conf_in_isr(const struct rt_repl_conf *c, uint64_t id);
enum rt_repl_role rt_repl_conf_role(const struct rt_repl_conf *c, uint64_t id);

#endif
