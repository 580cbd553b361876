/* sim_failover: the deterministic simulator of range replication with
 * crashes, pauses and failovers (DESIGN-replication.md §7, §10.2, §11.2).
 *
 * One thread, one seeded PRNG, one priority queue of timed events (the
 * world of sim_net.h). Four partition servers run the real ps_rcore
 * and one master runs the real ms_rcore over an in-memory catalog (one
 * range on nodes 1-3; node 4 is added as a learner once, at a random time
 * in the 3 s after the heal, and joins the ISR). Each partition server
 * has a durable store: the log of the groups it applied (LSN, content
 * hash, records) and its `rs` record (role, epoch, primary, ISR, sealed
 * epoch, commit LSN); a crash loses everything else (the core, the
 * writer's queue, the group on disk, messages in flight to it) and a
 * restart rebuilds the core with ps_rcore_load() and "registers" (the
 * master sends it the range's assignment, again at each of its heartbeats
 * until one is delivered). A pause freezes a node: every
 * event for it waits until it resumes. A cut blackholes the link between
 * the master and a partition server (no close: only silence). The master's
 * catalog commits take 1-5 ms; a master crash decides each commit in flight
 * (applied or not) and a restart loads the catalog (SEALING if a seal intent is
 * there) and sends every member the assignment. Partition servers heartbeat the
 * master every 500 ms. Every node's clock runs at its own rate within
 * 1 +- 1e-3. The network delays (heavy tail), reorders, duplicates and
 * loses messages until the heal. Leases do not exist yet: a secondary
 * refuses a SEAL for a fixed L after the last append from its primary or
 * its start (ps_rcore's seal_grace_ms), the master waits as long after
 * its start.
 *
 * Replicas outside the ISR (an old primary, a removed member, the
 * learner) are caught up by their primary: plain catch-up, or a full
 * copy run here as ps_learn does (BEGIN, on its answer a snapshot of the
 * primary's durable log as the copy's end, on that answer READ_DONE; a
 * copy unanswered for 3 s fails). A replica's log is cleared by a copy's
 * begin and replaced by its end; a restart while LEARNING holds nothing.
 *
 * Clients write unique values to the catalog's primary, from t = 0 until
 * the check. Faults happen in [1 s, 9 s]; at 9 s everything is healed.
 *
 * Properties (names of the task's brief; DESIGN §11.2 in brackets):
 *   P1 [P2]  no acknowledged write lost: when a write is acknowledged and
 *            whenever the catalog's ISR changes, every ISR member holds
 *            its group (same LSN, same content) durably; two different
 *            groups are never acknowledged at one LSN;
 *   P3       prefix: a replica applies a group only as its sender holds
 *            it, and acks a position to a primary of its epoch only if
 *            that primary holds the same group there;
 *   P4       at most one node acknowledges writes per epoch;
 *   P6       every catalog commit raises the epoch (or only sets the seal
 *            intent); a durable sealed epoch never decreases; a replica
 *            accepts no append of an epoch below its durable sealed one;
 *   P7       liveness: 10 s after the heal the master is STABLE, the
 *            catalog's primary SERVING at the catalog's epoch, and a
 *            write sent after 15 s was acknowledged;
 *   end      after a quiet drain every ISR member holds the primary's
 *            sequence exactly;
 *   rejoin   and so does every live member outside the ISR (caught up).
 *
 * Usage: sim_failover [--mutate NAME --expect PROP]
 *   SIM_SEEDS=N  seeds 1..N (default 1000); SIM_SEED=s  replays seed s
 *   with a trace. --mutate choose-min|no-seal (ms_rcore) or
 *   append-after-seal|shrink-early|learner-early|resume-restarted
 *   (ps_rcore) runs that
 *   test-only mutation and succeeds only if some seed violates PROP. */
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ms_rcore.h"
#include "ps_rcore.h"
#include "rt_alloc.h"
#include "rt_err.h"
#include "rt_rand.h"
#include "rt_repl_ev.h"
#include "sim_net.h"

#define SIM_PS 4
#define SIM_MEMBERS 3     /* the range's first replicas: nodes 1-3 */
#define SIM_SPARE 3       /* index of node 4, added as a learner once */
#define SIM_MASTER SIM_PS /* index of the master in sim.nodes */
#define SIM_MASTER_ID 100
#define SIM_KEYS 16
#define SIM_RANGE 7
#define SIM_TRACE_LINES 400
#define SIM_L 1000           /* the fixed lease wait standing in for leases */
#define SIM_HB 500           /* heartbeat period */
#define SIM_ACK_TIMEOUT 1000 /* a late ISR member: ISR_CHANGE{remove} */
#define SIM_FAULT_FROM 1000
#define SIM_HEAL 9000
#define SIM_CHECK (SIM_HEAL + 10000)
#define SIM_PROBE (SIM_HEAL + 6000) /* writes sent after this must be ok */
#define SIM_END (SIM_CHECK + 3000)

static struct
{
    uint64_t events, writes, acked, unknown, failed, failovers, cancels,
        crashes, pauses, master_crashes, stale_msgs, isr_asks, isr_changes,
        copies, copies_done, learners, joined;
} sim_totals;

/* Fixture */

enum sim_ev_kind {
    SIM_DELIVER, /* message to node @node */
    SIM_DISK,    /* a write of node @node is durable */
    SIM_TIMER,   /* node @node's core timer */
    SIM_CLIENT,  /* the clients send the next write */
    SIM_ARRIVE,  /* a client write reaches node @node */
    SIM_HBEAT,   /* node @node heartbeats */
    SIM_COMMIT,  /* a catalog commit lands */
    SIM_FAULT,   /* fault @fault starts (@gen 0) or ends (1) */
    SIM_CHECK_LIVE,
    SIM_COPY_TIMEOUT, /* full copy @io_id of node @node gives up */
    SIM_ADD,          /* the master adds node 4 as a learner */
};

struct sim_ev
{
    struct sim_item it; /* first: the queue's head */
    enum sim_ev_kind kind;
    int node;
    uint64_t inc; /* the node's incarnation when the event was made */
    uint64_t from;
    struct rt_repl_msg msg; /* DELIVER; an append's records are @blob */
    uint8_t *blob;          /* owned */
    size_t blob_len;
    uint64_t lsn, io_id, gen, req;
    bool seal_write; /* DISK of a seal persist */
    bool copy_clear; /* DISK of a copy's begin: the log is cleared */
    bool copy_end;   /* DISK of a copy's end: the log becomes @blob */
    /* DELIVER, DISK of an append: how many copies had replaced the
     * sender's log when it sent (P3 holds it to that log only). */
    uint64_t sender_copies;
    uint64_t sender_inc; /* ... and the sender's incarnation */
    uint64_t sealed_epoch;
    uint64_t *reqs; /* DISK of a local group: owned */
    size_t n_reqs;
    /* COMMIT */
    uint64_t guard_epoch, guard_seal;
    struct rt_repl_conf conf;
    bool dead;
    int fault;
};

struct sim_group
{
    uint64_t hash;
    uint8_t *records;
    size_t len;
};

struct sim_node
{
    uint64_t id;
    bool up;
    uint64_t inc;
    uint64_t paused_until;
    bool registered; /* took an assignment since its (re)start */
    double rate;
    uint64_t timer_gen;
    struct ps_rcore *ps; /* partition servers */
    struct ms_rcore *ms; /* the master */
    /* Durable (partition servers). */
    struct sim_group *log;
    size_t log_n, log_cap;
    struct ps_rcore_durable rs;
    uint64_t disk_free_at;
    /* The writer (memory). */
    uint64_t *queue;
    size_t queue_n, queue_cap;
    bool group_on_disk;
    uint64_t disk_lsn, disk_hash; /* that group, shipped before it is durable */
    /* The last copy end received, until its WRITE takes it. */
    uint8_t *snap_blob;
    size_t snap_len;
    uint64_t copies; /* copies that replaced my log */
};

/* A full copy a primary runs (the READ action: what ps_learn does): BEGIN
 * to the replica, on its answer a snapshot of the durable log sent as the
 * copy's end, on that answer READ_DONE. */
struct sim_copy
{
    bool live;
    int src;
    uint64_t src_inc;
    uint64_t peer, io;
    bool ended;
    uint64_t snap;
    struct rt_repl_begin begin;
};

enum sim_req_state { REQ_PENDING, REQ_OK, REQ_FAIL, REQ_UNKNOWN };

struct sim_req
{
    uint32_t key;
    uint64_t value;
    uint64_t lsn;
    int node;
    uint64_t sent_at;
    enum sim_req_state st;
};

enum sim_fault_kind {
    FAULT_CRASH,  /* a partition server crashes, restarts at the end */
    FAULT_PAUSE,  /* a partition server is paused */
    FAULT_MASTER, /* the master crashes, restarts at the end */
    FAULT_CUT,    /* the link master <-> a partition server blackholes */
};

struct sim_fault
{
    enum sim_fault_kind kind;
    int node;
};

struct sim
{
    uint64_t seed;
    struct sim_net w; /* PRNG, clock, queue, network, trace, verdict */
    enum ps_rcore_mutation ps_mut;
    enum ms_rcore_mutation ms_mut;
    struct sim_node nodes[SIM_PS + 1];
    struct rt_repl_conf catalog;
    struct sim_req *reqs;
    size_t n_reqs, cap_reqs;
    uint64_t *ref; /* acked content hash per LSN (0: none) */
    size_t ref_cap;
    uint64_t ack_epoch_node[64]; /* P4: epoch -> node id that acked */
    struct sim_fault faults[8];
    uint64_t cut_until[SIM_PS]; /* link to the master cut until then */
    size_t n_faults;
    struct rt_repl_actions acts;
    struct sim_copy copies[8];
    uint64_t deliver_copies; /* sender_copies of the message being handled */
    uint64_t deliver_inc;    /* sender_inc of it */
};

/* Helpers */

static void sim_ev_free(struct sim_ev *e)
{
    free(e->blob);
    free(e->reqs);
    free(e);
}

static void sim_item_free(struct sim_item *it)
{
    sim_ev_free((struct sim_ev *)it);
}

static void sim_ev_push(struct sim *s, struct sim_ev *e)
{
    sim_push(&s->w, &e->it);
}

static struct sim_ev *sim_ev_new(struct sim *s,
                                 enum sim_ev_kind kind,
                                 int node,
                                 uint64_t at)
{
    struct sim_ev *e = rt_xcalloc(1, sizeof(*e));
    e->kind = kind;
    e->node = node;
    e->it.at = at;
    e->inc = node >= 0 ? s->nodes[node].inc : 0;
    return e;
}

static int sim_index(uint64_t id)
{
    return id == SIM_MASTER_ID ? SIM_MASTER : (int)id - 1;
}

/* The node's local clock, and the real time of a local deadline. */
static uint64_t sim_local(const struct sim *s, int ni)
{
    return sim_clock_local(&s->w, s->nodes[ni].rate);
}

static uint64_t sim_real(const struct sim *s, int ni, uint64_t local)
{
    return sim_clock_real(&s->w, s->nodes[ni].rate, local);
}

static uint64_t sim_group_hash(const uint8_t *p, size_t n)
{
    return sim_hash(p, n) | 1; /* never 0: 0 means "none" in sim.ref */
}

static uint64_t sim_log_hash(const struct sim_node *nd, uint64_t lsn)
{
    return lsn >= 1 && lsn <= nd->log_n ? nd->log[lsn - 1].hash : 0;
}

static struct sim_req *sim_req_new(struct sim *s)
{
    if (s->n_reqs == s->cap_reqs) {
        s->cap_reqs = s->cap_reqs ? 2 * s->cap_reqs : 256;
        s->reqs = rt_xrealloc(s->reqs, s->cap_reqs * sizeof(*s->reqs));
    }
    struct sim_req *rq = &s->reqs[s->n_reqs++];
    memset(rq, 0, sizeof(*rq));
    return rq;
}

/* Checks */

/* P1 for one acknowledged LSN on every member of the catalog's ISR. */
static void sim_check_acked(struct sim *s, uint64_t lsn)
{
    for (size_t i = 0; i < s->catalog.n_isr; i++) {
        const struct sim_node *m = &s->nodes[sim_index(s->catalog.isr[i])];
        if (sim_log_hash(m, lsn) != s->ref[lsn]) {
            sim_fail(&s->w, "P1",
                     "acknowledged lsn %" PRIu64 " not on ISR member %" PRIu64
                     " (epoch %" PRIu64 ", it has %zu groups)",
                     lsn, m->id, s->catalog.epoch, m->log_n);
            return;
        }
    }
}

static void sim_check_all_acked(struct sim *s)
{
    for (uint64_t l = 1; l < s->ref_cap && s->w.violated == NULL; l++) {
        if (s->ref[l] != 0) {
            sim_check_acked(s, l);
        }
    }
}

/* Durable effects */

static void sim_log_append(struct sim *s,
                           struct sim_node *nd,
                           uint64_t lsn,
                           const uint8_t *p,
                           size_t n)
{
    if (lsn != nd->log_n + 1) {
        sim_fail(&s->w, "P3",
                 "node %" PRIu64 " applies lsn %" PRIu64 " after %zu", nd->id,
                 lsn, nd->log_n);
        return;
    }
    if (nd->log_n == nd->log_cap) {
        nd->log_cap = nd->log_cap ? 2 * nd->log_cap : 64;
        nd->log = rt_xrealloc(nd->log, nd->log_cap * sizeof(*nd->log));
    }
    nd->log[nd->log_n++] = (struct sim_group){
        .hash = sim_group_hash(p, n),
        .records = n ? rt_xmemdup(p, n) : NULL,
        .len = n,
    };
}

/* After every step of a partition server: its rs record follows its core
 * (assignments persist synchronously in this model). */
static void sim_persist_rs(struct sim *s, int ni)
{
    struct sim_node *nd = &s->nodes[ni];
    struct ps_rcore_range_info info;
    if (nd->ps == NULL || ps_rcore_range_get(nd->ps, SIM_RANGE, &info) != 0) {
        return;
    }
    nd->rs.role = info.role;
    nd->rs.epoch = info.epoch;
    nd->rs.primary_id = info.primary_id;
    nd->rs.primary_epoch = info.primary_epoch;
}

/* Actions */

static void sim_send_blob(struct sim *s,
                          int from,
                          uint64_t to_id,
                          const struct rt_repl_msg *msg,
                          const uint8_t *blob,
                          size_t blob_len)
{
    int to = sim_index(to_id);
    if (to < 0 || to > SIM_MASTER) {
        return;
    }
    int ps = to == SIM_MASTER ? from : from == SIM_MASTER ? to : -1;
    if (ps >= 0 && ps < SIM_PS && s->cut_until[ps] > s->w.now) {
        return; /* blackholed */
    }
    /* Loss and duplication are faults too: none after the heal. */
    int copies = sim_net_copies(&s->w, s->w.now < SIM_HEAL);
    for (int c = 0; c < copies; c++) {
        uint64_t d = sim_net_delay(&s->w);
        struct sim_ev *e = sim_ev_new(s, SIM_DELIVER, to, s->w.now + d);
        e->from = s->nodes[from].id;
        e->sender_copies = s->nodes[from].copies;
        e->sender_inc = s->nodes[from].inc;
        e->msg = *msg;
        if (msg->kind == RT_REPL_MSG_APPEND) {
            e->blob_len = msg->u.append.records_len;
            e->blob = e->blob_len
                          ? rt_xmemdup(msg->u.append.records, e->blob_len)
                          : NULL;
            e->msg.u.append.records = e->blob;
        } else if (blob_len > 0) {
            e->blob_len = blob_len;
            e->blob = rt_xmemdup(blob, blob_len);
        }
        sim_ev_push(s, e);
    }
}

static void sim_send(struct sim *s,
                     int from,
                     uint64_t to_id,
                     const struct rt_repl_msg *msg)
{
    sim_send_blob(s, from, to_id, msg, NULL, 0);
}

static void sim_reply(struct sim *s, int ni, uint64_t req_id, int32_t code)
{
    struct sim_node *nd = &s->nodes[ni];
    struct sim_req *rq = &s->reqs[req_id];
    if (rq->st != REQ_PENDING) {
        sim_fail(&s->w, "core", "req %" PRIu64 " answered twice", req_id);
        return;
    }
    sim_tracef(&s->w, "n%" PRIu64 " reply req %" PRIu64 " lsn %" PRIu64 " %d",
               nd->id, req_id, rq->lsn, code);
    if (code == RT_ENOTPRIMARY) {
        rq->st = REQ_FAIL;
        return;
    }
    if (code != 0) {
        rq->st = REQ_UNKNOWN;
        return;
    }
    rq->st = REQ_OK;
    sim_totals.acked++;
    uint64_t h = sim_log_hash(nd, rq->lsn);
    if (h == 0) {
        sim_fail(&s->w, "P1",
                 "n%" PRIu64 " acks lsn %" PRIu64 " it does not hold", nd->id,
                 rq->lsn);
        return;
    }
    if (rq->lsn >= s->ref_cap) {
        size_t cap = s->ref_cap ? s->ref_cap : 256;
        while (cap <= rq->lsn) {
            cap *= 2;
        }
        s->ref = rt_xrealloc(s->ref, cap * sizeof(*s->ref));
        memset(s->ref + s->ref_cap, 0, (cap - s->ref_cap) * sizeof(*s->ref));
        s->ref_cap = cap;
    }
    if (s->ref[rq->lsn] != 0 && s->ref[rq->lsn] != h) {
        sim_fail(&s->w, "P1",
                 "two different groups acknowledged at lsn %" PRIu64
                 " (the second by n%" PRIu64 ")",
                 rq->lsn, nd->id);
        return;
    }
    s->ref[rq->lsn] = h;
    /* P4: one acknowledging node per epoch. */
    struct ps_rcore_range_info info;
    if (nd->ps != NULL && ps_rcore_range_get(nd->ps, SIM_RANGE, &info) == 0 &&
        info.epoch < 64) {
        uint64_t *who = &s->ack_epoch_node[info.epoch];
        if (*who != 0 && *who != nd->id) {
            sim_fail(&s->w, "P4",
                     "n%" PRIu64 " and n%" PRIu64
                     " both acknowledge writes at epoch %" PRIu64,
                     *who, nd->id, info.epoch);
        }
        *who = nd->id;
    }
    sim_check_acked(s, rq->lsn);
}

/* P3 at the ack: a secondary acks position @a to a primary of its epoch
 * only if that primary holds the same group there (durably, or in its
 * writer: it ships before its own commit). */
static void sim_check_ack_sent(struct sim *s,
                               int ni,
                               uint64_t to,
                               const struct rt_repl_ack *ack)
{
    if (ack->code != 0 || ack->applied_lsn == 0) {
        return;
    }
    const struct sim_node *p = &s->nodes[sim_index(to)];
    struct ps_rcore_range_info info;
    if (p->ps == NULL || ps_rcore_range_get(p->ps, SIM_RANGE, &info) != 0 ||
        info.role != PS_RCORE_PRIMARY || info.epoch != ack->epoch) {
        return;
    }
    uint64_t a = ack->applied_lsn;
    uint64_t h = sim_log_hash(&s->nodes[ni], a);
    if (sim_log_hash(p, a) != h &&
        !(p->group_on_disk && p->disk_lsn == a && p->disk_hash == h)) {
        sim_fail(&s->w, "P3",
                 "n%" PRIu64 " acks lsn %" PRIu64 " to primary n%" PRIu64
                 " which holds %s",
                 s->nodes[ni].id, a, p->id,
                 a > p->log_n ? "less" : "another group there");
    }
}

/* The READ action of primary @ni: a full copy to @a->peer (a new one
 * replaces the last to that peer). */
static void sim_copy_start(struct sim *s,
                           int ni,
                           const struct rt_repl_action *a)
{
    struct sim_copy *c = NULL;
    for (size_t i = 0; i < sizeof(s->copies) / sizeof(s->copies[0]); i++) {
        struct sim_copy *k = &s->copies[i];
        if (!k->live || (k->src == ni && k->peer == a->peer) ||
            k->src_inc != s->nodes[k->src].inc) {
            c = k;
            break;
        }
    }
    if (c == NULL) {
        sim_fail(&s->w, "setup", "too many copies");
        return;
    }
    *c = (struct sim_copy){.live = true,
                           .src = ni,
                           .src_inc = s->nodes[ni].inc,
                           .peer = a->peer,
                           .io = a->io_id,
                           .begin = a->msg.u.begin};
    sim_totals.copies++;
    sim_tracef(&s->w, "n%" PRIu64 " copy io %" PRIu64 " to n%" PRIu64,
               s->nodes[ni].id, a->io_id, a->peer);
    sim_send(s, ni, a->peer, &a->msg);
    struct sim_ev *e = sim_ev_new(s, SIM_COPY_TIMEOUT, ni, s->w.now + 3000);
    e->io_id = a->io_id;
    sim_ev_push(s, e);
}

static void sim_run_actions(struct sim *s, int ni, uint64_t sender)
{
    struct sim_node *nd = &s->nodes[ni];
    for (size_t i = 0; i < s->acts.n && s->w.violated == NULL; i++) {
        const struct rt_repl_action *a = &s->acts.v[i];
        switch (a->kind) {
            case RT_REPL_ACT_SEND:
                sim_tracef(&s->w, "n%" PRIu64 " send %s to n%" PRIu64, nd->id,
                           rt_repl_msg_kind_name(a->msg.kind), a->peer);
                if (a->msg.kind == RT_REPL_MSG_ACK) {
                    sim_check_ack_sent(s, ni, a->peer, &a->msg.u.ack);
                } else if (a->msg.kind == RT_REPL_MSG_ISR_CHANGE) {
                    sim_totals.isr_asks++;
                }
                sim_send(s, ni, a->peer, &a->msg);
                break;
            case RT_REPL_ACT_WRITE: {
                uint64_t start =
                    nd->disk_free_at > s->w.now ? nd->disk_free_at : s->w.now;
                nd->disk_free_at = start + 1 + rt_rng_below(&s->w.rng, 4);
                struct sim_ev *e =
                    sim_ev_new(s, SIM_DISK, ni, nd->disk_free_at);
                e->io_id = a->io_id;
                e->from = sender;
                e->sender_copies = s->deliver_copies;
                e->sender_inc = s->deliver_inc;
                sim_tracef(&s->w,
                           "n%" PRIu64 " write lsn %" PRIu64 " io %" PRIu64,
                           nd->id, a->lsn, a->io_id);
                if (a->msg.kind == RT_REPL_MSG_APPEND &&
                    a->msg.u.append.epoch < nd->rs.sealed_epoch) {
                    /* P6: a sealed replica takes nothing older. */
                    sim_fail(&s->w, "P6",
                             "n%" PRIu64 " sealed at %" PRIu64
                             " accepts lsn %" PRIu64 " of epoch %" PRIu64,
                             nd->id, nd->rs.sealed_epoch, a->lsn,
                             a->msg.u.append.epoch);
                }
                if (a->msg.kind == RT_REPL_MSG_SEAL) {
                    e->seal_write = true;
                    e->sealed_epoch = a->msg.u.seal.new_epoch;
                } else if (a->msg.kind == RT_REPL_MSG_BEGIN) {
                    e->copy_clear = true;
                } else if (a->msg.kind == RT_REPL_MSG_SNAP_END) {
                    e->copy_end = true;
                    e->lsn = a->lsn;
                    e->blob = nd->snap_blob;
                    e->blob_len = nd->snap_len;
                    nd->snap_blob = NULL;
                    nd->snap_len = 0;
                } else {
                    e->lsn = a->lsn;
                    e->blob_len = a->msg.u.append.records_len;
                    e->blob = e->blob_len ? rt_xmemdup(a->msg.u.append.records,
                                                       e->blob_len)
                                          : NULL;
                }
                sim_ev_push(s, e);
                break;
            }
            case RT_REPL_ACT_TIMER:
                nd->timer_gen++;
                if (a->at_ms != 0) {
                    struct sim_ev *e =
                        sim_ev_new(s, SIM_TIMER, ni, sim_real(s, ni, a->at_ms));
                    e->gen = nd->timer_gen;
                    e->lsn = a->timer_id;
                    sim_ev_push(s, e);
                }
                break;
            case RT_REPL_ACT_REPLY:
                sim_reply(s, ni, a->req_id, a->code);
                break;
            case RT_REPL_ACT_READ:
                sim_copy_start(s, ni, a);
                break;
            case RT_REPL_ACT_PROPOSE: {
                struct sim_ev *e =
                    sim_ev_new(s, SIM_COMMIT, SIM_MASTER,
                               s->w.now + 1 + rt_rng_below(&s->w.rng, 5));
                e->io_id = a->io_id;
                e->guard_epoch = a->guard_epoch;
                e->guard_seal = a->guard_seal_epoch;
                e->conf = a->conf;
                sim_ev_push(s, e);
                break;
            }
            case RT_REPL_ACT_EVENT:
                sim_tracef(&s->w, "master event %s code %d took %" PRIu64,
                           a->what, a->code, a->at_ms);
                if (strcmp(a->what, "failover") == 0) {
                    sim_totals.failovers++;
                } else if (strcmp(a->what, "failover_cancelled") == 0) {
                    sim_totals.cancels++;
                } else if (strcmp(a->what, "isr_change") == 0) {
                    sim_totals.isr_changes++;
                } else if (strcmp(a->what, "stale") == 0) {
                    sim_fail(&s->w, "core", "a proposal failed its guard");
                }
                break;
            default:
                sim_fail(&s->w, "core", "unexpected action %s",
                         rt_repl_act_kind_name(a->kind));
                break;
        }
    }
    rt_repl_actions_reset(&s->acts);
}

/* Steps node @ni (its core must be up). A refused message is normal in a
 * faulty network (late acks to a former primary, ...); any other refusal
 * is a core bug. */
static void sim_step(struct sim *s,
                     int ni,
                     struct rt_repl_event *ev,
                     uint64_t sender)
{
    ev->now_ms = sim_local(s, ni);
    int rc;
    if (ni == SIM_MASTER) {
        rc = ms_rcore_step(s->nodes[ni].ms, ev, &s->acts);
    } else {
        rc = ps_rcore_step(s->nodes[ni].ps, ev, &s->acts);
    }
    if (rc != 0 && ev->kind == RT_REPL_EV_MSG) {
        sim_totals.stale_msgs++;
    } else if (rc != 0) {
        sim_fail(&s->w, "core", "node %" PRIu64 " step %s: %s", s->nodes[ni].id,
                 rt_repl_ev_kind_name(ev->kind), rt_strerror(rc));
    }
    sim_run_actions(s, ni, sender);
    if (ni != SIM_MASTER) {
        sim_persist_rs(s, ni);
    }
}

/* The copy @c of a live primary ends: READ_DONE with @lsn or @code. */
static void sim_copy_done(struct sim *s,
                          struct sim_copy *c,
                          uint64_t lsn,
                          int32_t code)
{
    c->live = false;
    if (!s->nodes[c->src].up || c->src_inc != s->nodes[c->src].inc) {
        return;
    }
    sim_totals.copies_done += code == 0;
    struct rt_repl_event ev = {.kind = RT_REPL_EV_READ_DONE,
                               .io_id = c->io,
                               .range_id = SIM_RANGE,
                               .lsn = lsn,
                               .code = code};
    sim_step(s, c->src, &ev, 0);
}

/* A replica's answer to a copy of node @ni: after the begin, the
 * snapshot (the durable log, one blob of length-prefixed groups) goes as
 * the copy's end; after the end, the copy is done. */
static void sim_copy_resp(struct sim *s, int ni, struct sim_ev *e)
{
    const struct rt_repl_copy_resp *r = &e->msg.u.copy_resp;
    struct sim_node *nd = &s->nodes[ni];
    for (size_t i = 0; i < sizeof(s->copies) / sizeof(s->copies[0]); i++) {
        struct sim_copy *c = &s->copies[i];
        if (!c->live || c->src != ni || c->src_inc != nd->inc ||
            c->peer != e->from || r->epoch != c->begin.epoch) {
            continue;
        }
        if (r->code != 0) {
            sim_copy_done(s, c, 0, r->code);
        } else if (!c->ended && r->lsn == 0) {
            c->ended = true;
            c->snap = nd->log_n;
            size_t len = 0;
            for (size_t l = 0; l < nd->log_n; l++) {
                len += 4 + nd->log[l].len;
            }
            uint8_t *blob = rt_xmalloc(len + 1), *p = blob;
            for (size_t l = 0; l < nd->log_n; l++) {
                uint32_t n = (uint32_t)nd->log[l].len;
                memcpy(p, &n, 4);
                if (n > 0) {
                    memcpy(p + 4, nd->log[l].records, n);
                }
                p += 4 + n;
            }
            struct rt_repl_msg m = {.kind = RT_REPL_MSG_SNAP_END};
            m.u.begin = c->begin;
            m.u.begin.snap_lsn = c->snap;
            sim_tracef(&s->w,
                       "n%" PRIu64 " send snap_end %" PRIu64 " to n%" PRIu64,
                       nd->id, c->snap, c->peer);
            sim_send_blob(s, ni, c->peer, &m, blob, len);
            free(blob);
        } else if (c->ended && r->lsn == c->snap) {
            sim_copy_done(s, c, c->snap, 0);
        }
        return;
    }
}

/* An assignment naming node @ni for a range its core does not hold (the
 * spare added as a learner): the glue creates it (ps_rcore_assign). */
static void sim_assign_new(struct sim *s, int ni, const struct rt_repl_conf *c)
{
    struct sim_node *nd = &s->nodes[ni];
    struct ps_rcore_range_info info;
    if (nd->ps == NULL || ps_rcore_range_get(nd->ps, SIM_RANGE, &info) == 0 ||
        rt_repl_conf_role(c, nd->id) == RT_REPL_ROLE_NONE) {
        return;
    }
    struct ps_rcore_assignment a = {.range_id = c->range_id,
                                    .epoch = c->epoch,
                                    .primary_id = c->primary_id,
                                    .n_isr = c->n_isr,
                                    .lsn = nd->log_n};
    memcpy(a.isr, c->isr, c->n_isr * sizeof(*c->isr));
    for (size_t i = 0; i < c->n_members; i++) {
        if (!rt_repl_conf_in_isr(c, c->members[i].server_id)) {
            a.learners[a.n_learners++] = c->members[i].server_id;
        }
    }
    if (ps_rcore_assign(nd->ps, &a, &s->acts) != 0) {
        sim_fail(&s->w, "core", "n%" PRIu64 " assign of a new range refused",
                 nd->id);
        return;
    }
    sim_run_actions(s, ni, 0);
    sim_persist_rs(s, ni);
}

/* The master adds node 4 as a learner (re-replication's first half);
 * asked again until the master takes it, up to the heal. */
static void sim_add_learner(struct sim *s)
{
    struct sim_node *m = &s->nodes[SIM_MASTER];
    int rc = RT_EBUSY;
    if (m->up && rt_repl_conf_role(&s->catalog, s->nodes[SIM_SPARE].id) ==
                     RT_REPL_ROLE_NONE) {
        rc = ms_rcore_add_learner(m->ms, SIM_RANGE, s->nodes[SIM_SPARE].id,
                                  sim_local(s, SIM_MASTER), &s->acts);
        sim_run_actions(s, SIM_MASTER, 0);
    }
    if (rc == 0) {
        sim_totals.learners++;
        sim_tracef(&s->w, "master adds learner n%" PRIu64,
                   s->nodes[SIM_SPARE].id);
    } else if (s->w.now < SIM_PROBE) {
        sim_ev_push(s, sim_ev_new(s, SIM_ADD, -1, s->w.now + 300));
    }
}

/* The master sends every member the range's assignment: what registration
 * answers give partition servers. */
static void sim_register_all(struct sim *s, int only)
{
    struct rt_repl_msg m = {.kind = RT_REPL_MSG_ASSIGN};
    m.u.assign = s->catalog;
    for (size_t i = 0; i < s->catalog.n_members; i++) {
        int ni = sim_index(s->catalog.members[i].server_id);
        if (only < 0 || only == ni) {
            sim_send(s, SIM_MASTER, s->catalog.members[i].server_id, &m);
        }
    }
}

/* The primary's writer: one group on disk at a time. */
static void sim_writer_start(struct sim *s, int ni)
{
    struct sim_node *nd = &s->nodes[ni];
    if (nd->group_on_disk || nd->queue_n == 0 || nd->ps == NULL) {
        return;
    }
    struct ps_rcore_range_info info;
    if (ps_rcore_range_get(nd->ps, SIM_RANGE, &info) != 0) {
        return;
    }
    uint64_t start = nd->disk_free_at > s->w.now ? nd->disk_free_at : s->w.now;
    nd->disk_free_at = start + 1 + rt_rng_below(&s->w.rng, 4);
    struct sim_ev *e = sim_ev_new(s, SIM_DISK, ni, nd->disk_free_at);
    e->lsn = info.last_lsn + 1;
    e->blob_len = 12 * nd->queue_n;
    e->blob = rt_xmalloc(e->blob_len);
    e->reqs = rt_xmemdup(nd->queue, nd->queue_n * sizeof(*nd->queue));
    e->n_reqs = nd->queue_n;
    for (size_t i = 0; i < nd->queue_n; i++) {
        struct sim_req *rq = &s->reqs[nd->queue[i]];
        rq->lsn = e->lsn;
        memcpy(e->blob + 12 * i, &rq->key, 4);
        memcpy(e->blob + 12 * i + 4, &rq->value, 8);
    }
    nd->queue_n = 0;
    nd->group_on_disk = true;
    sim_ev_push(s, e);
    if (info.role == PS_RCORE_PRIMARY) {
        /* The daemon ships a primary's group before its local commit:
         * a crash before the DISK event loses it here only. */
        nd->disk_lsn = e->lsn;
        nd->disk_hash = sim_group_hash(e->blob, e->blob_len);
        struct rt_repl_event ev = {.kind = RT_REPL_EV_GROUP,
                                   .range_id = SIM_RANGE,
                                   .lsn = e->lsn,
                                   .records = e->blob,
                                   .records_len = e->blob_len};
        sim_step(s, ni, &ev, 0);
    }
}

/* Crash and restart */

static void sim_ps_start(struct sim *s, int ni)
{
    struct sim_node *nd = &s->nodes[ni];
    struct ps_rcore_config cfg = {.self_id = nd->id,
                                  .inflight = 32,
                                  .resend_ms = 150,
                                  .seal_grace_ms = SIM_L,
                                  .ack_timeout_ms = SIM_ACK_TIMEOUT,
                                  .conn_down_ms = 300,
                                  .write_hold_ms = 5000,
                                  .master_id = SIM_MASTER_ID,
                                  .mutation = s->ps_mut};
    if (ps_rcore_create(&cfg, &nd->ps) != 0) {
        sim_fail(&s->w, "setup", "ps_rcore_create");
        return;
    }
    nd->up = true;
}

static void sim_crash(struct sim *s, int ni)
{
    struct sim_node *nd = &s->nodes[ni];
    if (!nd->up) {
        return;
    }
    sim_tracef(&s->w, "n%" PRIu64 " CRASH", nd->id);
    nd->up = false;
    nd->inc++;
    nd->timer_gen++;
    if (ni == SIM_MASTER) {
        sim_totals.master_crashes++;
        ms_rcore_destroy(nd->ms);
        nd->ms = NULL;
        /* Each commit in flight is decided now: applied or not. */
        for (size_t i = 0; i < s->w.heap_n; i++) {
            struct sim_ev *e = (struct sim_ev *)s->w.heap[i];
            if (e->kind == SIM_COMMIT && !e->dead) {
                e->dead = true;
                if (rt_rng_below(&s->w.rng, 2) == 0 &&
                    s->catalog.epoch == e->guard_epoch &&
                    s->catalog.seal_epoch == e->guard_seal) {
                    s->catalog = e->conf;
                    sim_check_all_acked(s);
                }
            }
        }
        return;
    }
    sim_totals.crashes++;
    ps_rcore_destroy(nd->ps);
    nd->ps = NULL;
    nd->queue_n = 0;
    nd->group_on_disk = false;
    for (size_t i = 0; i < s->n_reqs; i++) {
        if (s->reqs[i].node == ni && s->reqs[i].st == REQ_PENDING) {
            s->reqs[i].st = REQ_UNKNOWN;
        }
    }
    /* The master sees the connection close. */
    struct sim_node *m = &s->nodes[SIM_MASTER];
    if (m->up) {
        struct rt_repl_event ev = {
            .kind = RT_REPL_EV_CONN, .peer = nd->id, .code = RT_ENOCONN};
        sim_step(s, SIM_MASTER, &ev, 0);
    }
}

static void sim_master_start(struct sim *s)
{
    struct sim_node *m = &s->nodes[SIM_MASTER];
    struct ms_rcore_config cfg = {.failover_after_ms = 1500,
                                  .reconnect_grace_ms = 300,
                                  .lease_ms = SIM_L,
                                  .seal_wait_ms = 200,
                                  .resend_ms = 100,
                                  .learner_timeout_ms = 4000,
                                  .mutation = s->ms_mut};
    if (ms_rcore_create(&cfg, sim_local(s, SIM_MASTER), &m->ms) != 0 ||
        ms_rcore_load(m->ms, &s->catalog, sim_local(s, SIM_MASTER), &s->acts) !=
            0) {
        sim_fail(&s->w, "setup", "ms_rcore");
        return;
    }
    m->up = true;
    sim_run_actions(s, SIM_MASTER, 0);
    sim_register_all(s, -1);
}

static void sim_restart(struct sim *s, int ni)
{
    struct sim_node *nd = &s->nodes[ni];
    if (nd->up) {
        return;
    }
    sim_tracef(&s->w, "n%" PRIu64 " RESTART", nd->id);
    if (ni == SIM_MASTER) {
        sim_master_start(s);
        return;
    }
    sim_ps_start(s, ni);
    nd->registered = false;
    /* The pending groups: those above the commit LSN of the rs record. */
    struct ps_rcore_durable d = nd->rs;
    if (d.role == PS_RCORE_LEARNER) {
        /* A copy cut short: LEARNING, i.e. nothing (§3.3). */
        for (size_t l = 0; l < nd->log_n; l++) {
            free(nd->log[l].records);
        }
        nd->log_n = 0;
        nd->copies++;
        d.commit_lsn = 0;
    }
    d.applied_lsn = nd->log_n;
    if (d.commit_lsn > d.applied_lsn) {
        d.commit_lsn = d.applied_lsn;
    }
    size_t n = d.applied_lsn - d.commit_lsn;
    struct ps_rcore_group_rec *g = rt_xcalloc(n + 1, sizeof(*g));
    for (size_t i = 0; i < n; i++) {
        const struct sim_group *sg = &nd->log[d.commit_lsn + i];
        g[i] = (struct ps_rcore_group_rec){.lsn = d.commit_lsn + 1 + i,
                                           .records = sg->records,
                                           .len = sg->len};
    }
    d.groups = g;
    d.n_groups = n;
    int rc = ps_rcore_load(nd->ps, &d, sim_local(s, ni), &s->acts);
    free(g);
    if (rc != 0) {
        sim_fail(&s->w, "core", "n%" PRIu64 " load: %s", nd->id,
                 rt_strerror(rc));
        return;
    }
    sim_run_actions(s, ni, 0);
    if (s->nodes[SIM_MASTER].up) {
        struct rt_repl_event ev = {
            .kind = RT_REPL_EV_CONN, .peer = nd->id, .code = 0};
        sim_step(s, SIM_MASTER, &ev, 0);
        sim_register_all(s, ni);
    }
}

/* Events */

static bool sim_defer_if_paused(struct sim *s, struct sim_ev **ep)
{
    struct sim_ev *e = *ep;
    if (e->node < 0 || e->node > SIM_MASTER) {
        return false;
    }
    if (s->nodes[e->node].paused_until > s->w.now) {
        e->it.at = s->nodes[e->node].paused_until;
        sim_ev_push(s, e);
        *ep = NULL;
        return true;
    }
    return false;
}

static void sim_client(struct sim *s)
{
    if (s->w.now < SIM_CHECK) {
        sim_ev_push(s, sim_ev_new(s, SIM_CLIENT, -1,
                                  s->w.now + 1 + rt_rng_below(&s->w.rng, 40)));
    }
    uint64_t id = s->n_reqs;
    struct sim_req *rq = sim_req_new(s);
    rq->key = (uint32_t)rt_rng_below(&s->w.rng, SIM_KEYS);
    rq->value = id + 1;
    rq->sent_at = s->w.now;
    rq->node = sim_index(s->catalog.primary_id);
    sim_totals.writes++;
    if (!s->nodes[rq->node].up) {
        rq->st = REQ_FAIL; /* connection refused: never sent */
        return;
    }
    struct sim_ev *e = sim_ev_new(s, SIM_ARRIVE, rq->node,
                                  s->w.now + rt_rng_below(&s->w.rng, 5));
    e->req = id;
    sim_ev_push(s, e);
}

static void sim_arrive(struct sim *s, struct sim_ev *e)
{
    struct sim_node *nd = &s->nodes[e->node];
    struct rt_repl_event ev = {.kind = RT_REPL_EV_CLIENT_WRITE,
                               .range_id = SIM_RANGE,
                               .req_ids = &e->req,
                               .n_req_ids = 1};
    sim_step(s, e->node, &ev, 0);
    if (s->reqs[e->req].st != REQ_PENDING) {
        return;
    }
    if (nd->queue_n == nd->queue_cap) {
        nd->queue_cap = nd->queue_cap ? 2 * nd->queue_cap : 16;
        nd->queue = rt_xrealloc(nd->queue, nd->queue_cap * sizeof(*nd->queue));
    }
    nd->queue[nd->queue_n++] = e->req;
    sim_writer_start(s, e->node);
}

static void sim_disk(struct sim *s, struct sim_ev *e)
{
    struct sim_node *nd = &s->nodes[e->node];
    struct ps_rcore_range_info held;
    if (e->io_id != 0 && ps_rcore_range_get(nd->ps, SIM_RANGE, &held) != 0) {
        /* A replica write of a range dropped meanwhile (a learner that
         * failed): durable, of no interest to anyone. */
        sim_tracef(&s->w,
                   "n%" PRIu64 " write io %" PRIu64 " of a dropped range",
                   nd->id, e->io_id);
        return;
    }
    if (e->io_id != 0 && !e->seal_write && !e->copy_clear && !e->copy_end &&
        e->lsn != nd->log_n + 1 && held.role == PS_RCORE_SECONDARY &&
        held.state == PS_RSEC_DIVERGED) {
        /* A deposed primary's late group took this LSN first: the store
         * refuses the replica write (RT_ELSNGAP), the core ignores it. */
        sim_tracef(&s->w, "n%" PRIu64 " write lsn %" PRIu64 " refused", nd->id,
                   e->lsn);
        return;
    }
    struct rt_repl_event ev = {
        .kind = RT_REPL_EV_DISK_DONE, .range_id = SIM_RANGE, .io_id = e->io_id};
    if (e->seal_write) {
        if (e->sealed_epoch < nd->rs.sealed_epoch) {
            sim_fail(&s->w, "P6", "n%" PRIu64 " sealed epoch goes down",
                     nd->id);
        }
        nd->rs.sealed_epoch = e->sealed_epoch;
        sim_tracef(&s->w, "n%" PRIu64 " sealed %" PRIu64 " durable", nd->id,
                   e->sealed_epoch);
        sim_step(s, e->node, &ev, 0);
        return;
    }
    if (e->copy_clear || e->copy_end) {
        /* A copy's begin clears the replica's data (state LEARNING); its
         * end replaces it by the snapshot, in one transaction. */
        for (size_t l = 0; l < nd->log_n; l++) {
            free(nd->log[l].records);
        }
        nd->log_n = 0;
        nd->rs.commit_lsn = 0;
        nd->copies++;
        for (size_t off = 0; e->copy_end && off + 4 <= e->blob_len;) {
            uint32_t n;
            memcpy(&n, e->blob + off, 4);
            sim_log_append(s, nd, nd->log_n + 1, e->blob + off + 4, n);
            off += 4 + n;
        }
        if (e->copy_end && nd->log_n != e->lsn) {
            sim_fail(&s->w, "setup", "copy of %zu groups for lsn %" PRIu64,
                     nd->log_n, e->lsn);
        }
        sim_tracef(&s->w, "n%" PRIu64 " copy %s durable, %zu groups", nd->id,
                   e->copy_end ? "end" : "begin", nd->log_n);
        ev.lsn = e->lsn;
        sim_step(s, e->node, &ev, 0);
        return;
    }
    if (e->from != 0 &&
        e->sender_copies == s->nodes[sim_index(e->from)].copies &&
        e->sender_inc == s->nodes[sim_index(e->from)].inc) {
        /* P3: a replica applies what its sender holds at that LSN (unless
         * a copy replaced the sender's log since it sent, or it crashed:
         * a primary ships its group before its own commit), durably or
         * in its writer. */
        const struct sim_node *p = &s->nodes[sim_index(e->from)];
        uint64_t h = sim_group_hash(e->blob, e->blob_len);
        if (sim_log_hash(p, e->lsn) != h &&
            !(p->group_on_disk && p->disk_lsn == e->lsn && p->disk_hash == h)) {
            sim_fail(&s->w, "P3",
                     "n%" PRIu64 " applies lsn %" PRIu64
                     " that its sender n%" PRIu64 " does not hold",
                     nd->id, e->lsn, p->id);
        }
    }
    sim_log_append(s, nd, e->lsn, e->blob, e->blob_len);
    sim_tracef(&s->w, "n%" PRIu64 " disk lsn %" PRIu64, nd->id, e->lsn);
    ev.lsn = e->lsn;
    ev.records = e->blob;
    ev.records_len = e->blob_len;
    ev.req_ids = e->reqs;
    ev.n_req_ids = e->n_reqs;
    sim_step(s, e->node, &ev, 0);
    struct ps_rcore_range_info info;
    if (nd->ps != NULL && ps_rcore_range_get(nd->ps, SIM_RANGE, &info) == 0) {
        nd->rs.commit_lsn = info.commit_lsn;
    }
    if (e->reqs != NULL) {
        nd->group_on_disk = false;
        sim_writer_start(s, e->node);
    }
}

static void sim_commit(struct sim *s, struct sim_ev *e)
{
    struct sim_node *m = &s->nodes[SIM_MASTER];
    int32_t code = RT_ESTALE;
    if (s->catalog.epoch == e->guard_epoch &&
        s->catalog.seal_epoch == e->guard_seal) {
        const struct rt_repl_conf *c = &e->conf;
        bool intent = c->epoch == s->catalog.epoch && c->seal_epoch != 0 &&
                      s->catalog.seal_epoch == 0;
        if (!intent && c->epoch <= s->catalog.epoch) {
            sim_fail(&s->w, "P6", "commit at epoch %" PRIu64 " after %" PRIu64,
                     c->epoch, s->catalog.epoch);
        }
        if (rt_repl_conf_in_isr(c, s->nodes[SIM_SPARE].id) &&
            !rt_repl_conf_in_isr(&s->catalog, s->nodes[SIM_SPARE].id)) {
            sim_totals.joined++;
        }
        s->catalog = *c;
        code = 0;
        sim_tracef(&s->w,
                   "catalog epoch %" PRIu64 " primary %" PRIu64 " seal %" PRIu64
                   " isr %zu",
                   c->epoch, c->primary_id, c->seal_epoch, c->n_isr);
        sim_check_all_acked(s);
    }
    if (m->up && e->inc == m->inc) {
        struct rt_repl_event ev = {
            .kind = RT_REPL_EV_COMMITTED, .io_id = e->io_id, .code = code};
        sim_step(s, SIM_MASTER, &ev, 0);
    }
}

static void sim_fault(struct sim *s, struct sim_ev *e)
{
    const struct sim_fault *f = &s->faults[e->fault];
    int ni = f->kind == FAULT_MASTER ? SIM_MASTER : f->node;
    bool begin = e->gen == 0;
    if (f->kind == FAULT_CUT) {
        if (begin && e->lsn > s->cut_until[ni]) {
            s->cut_until[ni] = e->lsn;
            sim_tracef(&s->w, "n%" PRIu64 " CUT from the master until %" PRIu64,
                       s->nodes[ni].id, e->lsn);
        }
        return;
    }
    if (f->kind == FAULT_PAUSE) {
        if (begin) {
            sim_totals.pauses++;
            /* Overlapping pauses: the later end wins, so deferred events
             * keep their order. */
            if (e->lsn > s->nodes[ni].paused_until) {
                s->nodes[ni].paused_until = e->lsn; /* the end time */
            }
            sim_tracef(&s->w, "n%" PRIu64 " PAUSE until %" PRIu64,
                       s->nodes[ni].id, e->lsn);
        }
        return;
    }
    if (begin) {
        sim_crash(s, ni);
    } else {
        sim_restart(s, ni);
    }
}

static void sim_check_live(struct sim *s)
{
    struct sim_node *m = &s->nodes[SIM_MASTER];
    struct ms_rcore_range_info mi;
    if (!m->up || ms_rcore_range_get(m->ms, SIM_RANGE, &mi) != 0 ||
        mi.state != MS_RCORE_STABLE) {
        sim_fail(&s->w, "P7", "master not STABLE 10 s after the heal");
        return;
    }
    const struct sim_node *p = &s->nodes[sim_index(s->catalog.primary_id)];
    struct ps_rcore_range_info info;
    if (p->ps == NULL || ps_rcore_range_get(p->ps, SIM_RANGE, &info) != 0 ||
        info.role != PS_RCORE_PRIMARY || info.state != PS_RPRI_SERVING ||
        info.epoch != s->catalog.epoch) {
        sim_fail(&s->w, "P7",
                 "primary n%" PRIu64 " not SERVING at epoch %" PRIu64
                 " 10 s after the heal",
                 p->id, s->catalog.epoch);
        return;
    }
    for (size_t i = s->n_reqs; i-- > 0;) {
        const struct sim_req *rq = &s->reqs[i];
        if (rq->sent_at >= SIM_PROBE && rq->sent_at + 1000 < s->w.now) {
            if (rq->st != REQ_OK) {
                sim_fail(&s->w, "P7", "write %zu sent at %" PRIu64 " not ok", i,
                         rq->sent_at);
            }
            return;
        }
    }
    sim_fail(&s->w, "P7", "no write sent after the heal");
}

static void sim_handle(struct sim *s, struct sim_ev *e)
{
    struct sim_node *nd = e->node >= 0 ? &s->nodes[e->node] : NULL;
    if (e->kind == SIM_HBEAT) {
        /* A live, running server heartbeats every SIM_HB. */
        struct ps_rcore_range_info info;
        if (nd->up) {
            struct rt_repl_msg m = {.kind = RT_REPL_MSG_HEARTBEAT};
            sim_send(s, e->node, SIM_MASTER_ID, &m);
        }
        if (nd->up && nd->ps != NULL &&
            ps_rcore_range_get(nd->ps, SIM_RANGE, &info) == 0 &&
            info.restarted) {
            /* As the daemon's heartbeat reports it (ReplStatus). */
            struct rt_repl_msg m = {.kind = RT_REPL_MSG_ASSIGN_RESP};
            m.u.assign_resp =
                (struct rt_repl_assign_resp){.range_id = SIM_RANGE,
                                             .epoch = info.epoch,
                                             .code = RT_ENOTPRIMARY};
            sim_send(s, e->node, SIM_MASTER_ID, &m);
        }
        sim_ev_push(s, sim_ev_new(s, SIM_HBEAT, e->node, s->w.now + SIM_HB));
        return;
    }
    bool node_ev = e->kind == SIM_DELIVER || e->kind == SIM_DISK ||
                   e->kind == SIM_TIMER || e->kind == SIM_ARRIVE ||
                   e->kind == SIM_COPY_TIMEOUT;
    if (node_ev && (!nd->up || e->inc != nd->inc)) {
        if (e->kind == SIM_ARRIVE && s->reqs[e->req].st == REQ_PENDING) {
            s->reqs[e->req].st = REQ_UNKNOWN;
        }
        return;
    }
    switch (e->kind) {
        case SIM_DELIVER: {
            struct rt_repl_event ev = {
                .kind = RT_REPL_EV_MSG, .peer = e->from, .msg = &e->msg};
            /* Registration is retried until answered: a heartbeat from a
             * server that has taken no assignment since its start gets
             * one; taking any assignment answers it. */
            if (e->msg.kind == RT_REPL_MSG_HEARTBEAT &&
                !s->nodes[sim_index(e->from)].registered) {
                sim_register_all(s, sim_index(e->from));
            }
            if (e->msg.kind == RT_REPL_MSG_ASSIGN) {
                nd->registered = true;
                sim_assign_new(s, e->node, &e->msg.u.assign);
            }
            if (e->msg.kind == RT_REPL_MSG_APPEND) {
                ev.range_id = e->msg.u.append.range_id;
            }
            sim_tracef(&s->w, "n%" PRIu64 " recv %s from n%" PRIu64, nd->id,
                       rt_repl_msg_kind_name(e->msg.kind), e->from);
            if (e->msg.kind == RT_REPL_MSG_COPY_RESP) {
                sim_copy_resp(s, e->node, e);
                break;
            }
            if (e->msg.kind == RT_REPL_MSG_SNAP_END) {
                free(nd->snap_blob);
                nd->snap_blob = e->blob;
                nd->snap_len = e->blob_len;
                e->blob = NULL;
            }
            s->deliver_copies = e->sender_copies;
            s->deliver_inc = e->sender_inc;
            sim_step(s, e->node, &ev, e->from);
            s->deliver_copies = 0;
            s->deliver_inc = 0;
            break;
        }
        case SIM_DISK:
            sim_disk(s, e);
            break;
        case SIM_TIMER:
            if (e->gen == nd->timer_gen) {
                struct rt_repl_event ev = {.kind = RT_REPL_EV_TIMER,
                                           .timer_id = e->lsn};
                sim_step(s, e->node, &ev, 0);
            }
            break;
        case SIM_ARRIVE:
            sim_arrive(s, e);
            break;
        case SIM_HBEAT:
            break;
        case SIM_CLIENT:
            sim_client(s);
            break;
        case SIM_COMMIT:
            if (!e->dead) {
                sim_commit(s, e);
            }
            break;
        case SIM_FAULT:
            sim_fault(s, e);
            break;
        case SIM_CHECK_LIVE:
            sim_check_live(s);
            break;
        case SIM_ADD:
            sim_add_learner(s);
            break;
        case SIM_COPY_TIMEOUT:
            for (size_t i = 0; i < sizeof(s->copies) / sizeof(s->copies[0]);
                 i++) {
                struct sim_copy *c = &s->copies[i];
                if (c->live && c->src == e->node && c->io == e->io_id &&
                    c->src_inc == e->inc) {
                    sim_copy_done(s, c, 0, RT_ETIMEDOUT);
                }
            }
            break;
    }
}

/* The end: after the drain every ISR member holds the primary's sequence,
 * and so does every live member outside the ISR (caught up: "rejoin"). */
static void sim_check_end(struct sim *s)
{
    const struct sim_node *p = &s->nodes[sim_index(s->catalog.primary_id)];
    for (size_t i = 0; i < s->catalog.n_members; i++) {
        uint64_t id = s->catalog.members[i].server_id;
        const struct sim_node *m = &s->nodes[sim_index(id)];
        bool same = m->log_n == p->log_n;
        for (size_t l = 0; same && l < p->log_n; l++) {
            same = m->log[l].hash == p->log[l].hash;
        }
        if (!rt_repl_conf_in_isr(&s->catalog, id) && m->up && !same) {
            sim_fail(&s->w, "rejoin",
                     "n%" PRIu64
                     " outside the ISR has %zu groups%s, the "
                     "primary %zu",
                     id, m->log_n,
                     m->log_n == p->log_n ? " (other content)" : "", p->log_n);
            return;
        }
    }
    for (size_t i = 0; i < s->catalog.n_isr; i++) {
        const struct sim_node *m = &s->nodes[sim_index(s->catalog.isr[i])];
        if (m->log_n != p->log_n) {
            sim_fail(&s->w, "end",
                     "ISR member n%" PRIu64
                     " has %zu groups, the "
                     "primary %zu",
                     m->id, m->log_n, p->log_n);
            return;
        }
        for (size_t l = 0; l < p->log_n; l++) {
            if (m->log[l].hash != p->log[l].hash) {
                sim_fail(&s->w, "end", "n%" PRIu64 " lsn %zu differs", m->id,
                         l + 1);
                return;
            }
        }
    }
    for (size_t i = 0; i < s->n_reqs; i++) {
        switch (s->reqs[i].st) {
            case REQ_PENDING:
                sim_fail(&s->w, "end", "write %zu never answered", i);
                return;
            case REQ_UNKNOWN:
                sim_totals.unknown++;
                break;
            case REQ_FAIL:
                sim_totals.failed++;
                break;
            case REQ_OK:
                break;
        }
    }
}

/* The schedule of faults, drawn from the seed: 1-4 crashes, pauses or
 * master-link cuts of a partition server (node 1, the first primary,
 * twice as likely) or master crashes, each 300-4000 ms, all over by the
 * heal. */
static void sim_schedule(struct sim *s)
{
    s->n_faults = 1 + rt_rng_below(&s->w.rng, 4);
    for (size_t i = 0; i < s->n_faults; i++) {
        struct sim_fault *f = &s->faults[i];
        uint64_t r = rt_rng_below(&s->w.rng, 10);
        f->kind = r < 3   ? FAULT_CRASH
                  : r < 6 ? FAULT_PAUSE
                  : r < 8 ? FAULT_CUT
                          : FAULT_MASTER;
        f->node = (int)rt_rng_below(&s->w.rng, SIM_MEMBERS + 1) % SIM_MEMBERS;
        uint64_t len = 300 + rt_rng_below(&s->w.rng, 3700);
        uint64_t at = SIM_FAULT_FROM +
                      rt_rng_below(&s->w.rng, SIM_HEAL - SIM_FAULT_FROM - len);
        struct sim_ev *b = sim_ev_new(s, SIM_FAULT, -1, at);
        b->fault = (int)i;
        b->lsn = at + len;
        sim_ev_push(s, b);
        struct sim_ev *e = sim_ev_new(s, SIM_FAULT, -1, at + len);
        e->fault = (int)i;
        e->gen = 1;
        sim_ev_push(s, e);
    }
}

static void sim_free(struct sim *s)
{
    sim_net_close(&s->w, sim_item_free);
    for (int i = 0; i <= SIM_MASTER; i++) {
        struct sim_node *nd = &s->nodes[i];
        ps_rcore_destroy(nd->ps);
        ms_rcore_destroy(nd->ms);
        for (size_t l = 0; l < nd->log_n; l++) {
            free(nd->log[l].records);
        }
        free(nd->log);
        free(nd->queue);
        free(nd->snap_blob);
    }
    free(s->reqs);
    free(s->ref);
    rt_repl_actions_close(&s->acts);
}

static void sim_print_trace_and_cores(struct sim *s)
{
    sim_print_trace(&s->w);
    for (int i = 0; i < SIM_PS; i++) {
        if (s->nodes[i].ps != NULL) {
            ps_rcore_dump(s->nodes[i].ps, stderr);
        }
        fprintf(stderr, "n%d: %zu durable groups, sealed %" PRIu64 "\n", i + 1,
                s->nodes[i].log_n, s->nodes[i].rs.sealed_epoch);
    }
    if (s->nodes[SIM_MASTER].ms != NULL) {
        ms_rcore_dump(s->nodes[SIM_MASTER].ms, stderr);
    }
}

static const char *sim_run(uint64_t seed,
                           enum ps_rcore_mutation ps_mut,
                           enum ms_rcore_mutation ms_mut,
                           bool trace)
{
    struct sim *s = rt_xcalloc(1, sizeof(*s));
    s->seed = seed;
    s->ps_mut = ps_mut;
    s->ms_mut = ms_mut;
    sim_net_init(&s->w, seed, trace, SIM_TRACE_LINES);
    rt_repl_actions_init(&s->acts);
    sim_net_draw(&s->w, 0.05, 0.05, 30);
    s->catalog = (struct rt_repl_conf){.range_id = SIM_RANGE,
                                       .epoch = 1,
                                       .primary_id = 1,
                                       .primary_epoch = 1,
                                       .members = {{1, RT_REPL_ROLE_PRIMARY},
                                                   {2, RT_REPL_ROLE_SECONDARY},
                                                   {3, RT_REPL_ROLE_SECONDARY}},
                                       .n_members = 3,
                                       .isr = {1, 2, 3},
                                       .n_isr = 3,
                                       .rf = 3,
                                       .min_insync = 2};
    struct ps_rcore_assignment as = {.range_id = SIM_RANGE,
                                     .epoch = 1,
                                     .primary_id = 1,
                                     .isr = {1, 2, 3},
                                     .n_isr = 3};
    for (int i = 0; i <= SIM_MASTER; i++) {
        struct sim_node *nd = &s->nodes[i];
        nd->id = i == SIM_MASTER ? SIM_MASTER_ID : (uint64_t)i + 1;
        nd->rate = 1.0 + (rt_rng_unit(&s->w.rng) * 2.0 - 1.0) * 1e-3;
        if (i == SIM_MASTER) {
            continue;
        }
        sim_ps_start(s, i);
        sim_ev_push(
            s, sim_ev_new(s, SIM_HBEAT, i, rt_rng_below(&s->w.rng, SIM_HB)));
        nd->registered = true;
        if (i == SIM_SPARE) {
            nd->rs = (struct ps_rcore_durable){.range_id = SIM_RANGE};
            continue; /* no copy until it is added */
        }
        if (ps_rcore_assign(nd->ps, &as, &s->acts) != 0) {
            sim_fail(&s->w, "setup", "assign n%d", i + 1);
        }
        rt_repl_actions_reset(&s->acts);
        nd->rs = (struct ps_rcore_durable){
            .range_id = SIM_RANGE,
            .role = i == 0 ? PS_RCORE_PRIMARY : PS_RCORE_SECONDARY,
            .epoch = 1,
            .primary_id = 1,
            .primary_epoch = 1,
            .isr = {1, 2, 3},
            .n_isr = 3};
    }
    sim_master_start(s);
    sim_tracef(&s->w, "seed %" PRIu64 " loss %.3f dup %.3f delay<=%" PRIu64,
               seed, s->w.loss, s->w.dup, s->w.delay_max);
    sim_schedule(s);
    /* After the heal: a learner that fails (its primary suspected, or
     * late) leaves through ms_rcore's LEARNER_OUT commit, whose
     * assignment is sent once and not resent, so a lost one would leave
     * the primary at the old epoch (the master's half of step 10). */
    sim_ev_push(s, sim_ev_new(s, SIM_ADD, -1,
                              SIM_HEAL + rt_rng_below(&s->w.rng, 3000)));
    sim_ev_push(s, sim_ev_new(s, SIM_CLIENT, -1, 0));
    sim_ev_push(s, sim_ev_new(s, SIM_CHECK_LIVE, -1, SIM_CHECK));
    struct sim_item *it;
    while (s->w.violated == NULL && (it = sim_next(&s->w, SIM_END))) {
        struct sim_ev *e = (struct sim_ev *)it;
        if (sim_defer_if_paused(s, &e)) {
            continue;
        }
        /* The ASSIGN of a restarted server carries the current ISR. */
        if (e->kind == SIM_DELIVER && e->msg.kind == RT_REPL_MSG_ASSIGN &&
            e->node < SIM_PS && s->nodes[e->node].up &&
            e->inc == s->nodes[e->node].inc &&
            rt_repl_conf_role(&e->msg.u.assign, s->nodes[e->node].id) !=
                RT_REPL_ROLE_NONE &&
            e->msg.u.assign.epoch >= s->nodes[e->node].rs.epoch) {
            memcpy(s->nodes[e->node].rs.isr, e->msg.u.assign.isr,
                   sizeof(e->msg.u.assign.isr));
            s->nodes[e->node].rs.n_isr = e->msg.u.assign.n_isr;
        }
        sim_handle(s, e);
        sim_ev_free(e);
        sim_totals.events++;
    }
    if (s->w.violated == NULL) {
        sim_check_end(s);
    }
    const char *v = s->w.violated;
    if (v != NULL && trace) {
        sim_print_trace_and_cores(s);
    }
    if (v != NULL) {
        fprintf(stderr, "seed %" PRIu64 ": %s violated: %s\n", seed, v,
                s->w.why);
    }
    sim_free(s);
    free(s);
    return v;
}

/* Tests */

struct sim_opts
{
    enum ps_rcore_mutation ps_mut;
    enum ms_rcore_mutation ms_mut;
};

static const char *sim_run_seed(uint64_t seed, bool trace, void *ctx)
{
    const struct sim_opts *o = ctx;
    return sim_run(seed, o->ps_mut, o->ms_mut, trace);
}

/* The mutations --mutate names: ms_rcore's or ps_rcore's. */
static int sim_mutation_of(const char *name, void *ctx)
{
    struct sim_opts *o = ctx;
    if (strcmp(name, "choose-min") == 0) {
        o->ms_mut = MS_RCORE_MUT_CHOOSE_MIN;
    } else if (strcmp(name, "no-seal") == 0) {
        o->ms_mut = MS_RCORE_MUT_NO_SEAL;
    } else if (strcmp(name, "append-after-seal") == 0) {
        o->ps_mut = PS_RCORE_MUT_APPEND_AFTER_SEAL;
    } else if (strcmp(name, "shrink-early") == 0) {
        o->ps_mut = PS_RCORE_MUT_SHRINK_EARLY;
    } else if (strcmp(name, "learner-early") == 0) {
        o->ps_mut = PS_RCORE_MUT_LEARNER_EARLY;
    } else if (strcmp(name, "resume-restarted") == 0) {
        o->ps_mut = PS_RCORE_MUT_RESUME_RESTARTED;
    } else {
        return -1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    struct sim_opts opts = {.ps_mut = PS_RCORE_MUT_NONE,
                            .ms_mut = MS_RCORE_MUT_NONE};
    const char *expect = NULL;
    if (sim_args(argc, argv, "sim_failover", sim_mutation_of, &opts, &expect) !=
        0) {
        return 2;
    }
    uint64_t seeds = 0;
    int rc = sim_drive(sim_run_seed, &opts, expect, 1000, "", &seeds);
    if (rc >= 0) {
        return rc;
    }
    printf("%" PRIu64 " seeds: ok (%" PRIu64 " events, %" PRIu64
           " writes: %" PRIu64 " acknowledged, %" PRIu64 " unknown, %" PRIu64
           " refused; %" PRIu64 " failovers, %" PRIu64 " cancelled, %" PRIu64
           " server crashes, %" PRIu64 " pauses, %" PRIu64
           " master crashes, %" PRIu64 " refused messages, %" PRIu64
           " ISR shrinks asked, %" PRIu64 " ISR changes, %" PRIu64
           " full copies (%" PRIu64 " done), %" PRIu64
           " learners added, %" PRIu64 " joined)\n",
           seeds, sim_totals.events, sim_totals.writes, sim_totals.acked,
           sim_totals.unknown, sim_totals.failed, sim_totals.failovers,
           sim_totals.cancels, sim_totals.crashes, sim_totals.pauses,
           sim_totals.master_crashes, sim_totals.stale_msgs,
           sim_totals.isr_asks, sim_totals.isr_changes, sim_totals.copies,
           sim_totals.copies_done, sim_totals.learners, sim_totals.joined);
    return 0;
}
