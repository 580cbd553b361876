/* The replica core of ps_rcore.h. Every state change goes through
 * ps__rcore_set_state() and the allowed-transition tables of
 * DESIGN-replication.md §3.1-§3.3; an illegal change is a bug and aborts.
 * The happy path of a write: DISK_DONE on the primary (ps__rcore_local_done)
 * -> APPEND to each peer (ps__rcore_pump) -> WRITE on the secondary
 * (ps__rcore_append) -> its DISK_DONE -> ACK (ps__rcore_applied) -> cw
 * (ps__rcore_ack, ps__rcore_commit) -> REPLY. */
#include "ps_rcore.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "rt_alloc.h"
#include "rt_err.h"
#include "rt_log.h"

#define PS__RBIT(s) (1u << (s))
/* After a refused ISR_CHANGE, the next ask waits this many resend
 * periods. */
#define PS__ISR_RETRY_TICKS 5

/* State tables */

static const char *const ps__rpri_names[PS_RPRI__NR] = {
    "none", "activating", "serving", "nolease", "frozen", "deposed"};
static const char *const ps__rsec_names[PS_RSEC__NR] = {"none", "following",
                                                        "sealed", "diverged"};
static const char *const ps__rlrn_names[PS_RLRN__NR] = {
    "none", "probed", "clearing", "copying", "tailing", "ready"};

/* §3.1. NONE -> ACTIVATING is an assignment naming me primary; DEPOSED
 * ends the generation (the range then goes back to NONE to become a
 * secondary or be dropped). */
static const unsigned ps__rpri_allowed[PS_RPRI__NR] = {
    [PS_RPRI_NONE] = PS__RBIT(PS_RPRI_ACTIVATING),
    [PS_RPRI_ACTIVATING] =
        PS__RBIT(PS_RPRI_SERVING) | PS__RBIT(PS_RPRI_DEPOSED),
    [PS_RPRI_SERVING] = PS__RBIT(PS_RPRI_SERVING) | PS__RBIT(PS_RPRI_NOLEASE) |
                        PS__RBIT(PS_RPRI_FROZEN) | PS__RBIT(PS_RPRI_DEPOSED),
    [PS_RPRI_NOLEASE] = PS__RBIT(PS_RPRI_SERVING) | PS__RBIT(PS_RPRI_DEPOSED),
    [PS_RPRI_FROZEN] = PS__RBIT(PS_RPRI_SERVING) | PS__RBIT(PS_RPRI_DEPOSED),
    [PS_RPRI_DEPOSED] = PS__RBIT(PS_RPRI_NONE),
};

/* §3.2. NONE -> FOLLOWING: an assignment (a new range, or a READY learner);
 * -> NONE: promoted (SEALED), dropped, or turned learner (DIVERGED). */
static const unsigned ps__rsec_allowed[PS_RSEC__NR] = {
    [PS_RSEC_NONE] = PS__RBIT(PS_RSEC_FOLLOWING),
    [PS_RSEC_FOLLOWING] = PS__RBIT(PS_RSEC_FOLLOWING) |
                          PS__RBIT(PS_RSEC_SEALED) |
                          PS__RBIT(PS_RSEC_DIVERGED) | PS__RBIT(PS_RSEC_NONE),
    [PS_RSEC_SEALED] = PS__RBIT(PS_RSEC_FOLLOWING) |
                       PS__RBIT(PS_RSEC_DIVERGED) | PS__RBIT(PS_RSEC_NONE),
    [PS_RSEC_DIVERGED] = PS__RBIT(PS_RSEC_NONE),
};

/* §3.3. Any state -> NONE: REPL_ABORT, an assignment omitting me, or
 * READY -> secondary. */
static const unsigned ps__rlrn_allowed[PS_RLRN__NR] = {
    [PS_RLRN_NONE] = PS__RBIT(PS_RLRN_PROBED),
    [PS_RLRN_PROBED] = PS__RBIT(PS_RLRN_CLEARING) | PS__RBIT(PS_RLRN_COPYING) |
                       PS__RBIT(PS_RLRN_NONE),
    [PS_RLRN_CLEARING] = PS__RBIT(PS_RLRN_COPYING) | PS__RBIT(PS_RLRN_NONE),
    [PS_RLRN_COPYING] = PS__RBIT(PS_RLRN_TAILING) | PS__RBIT(PS_RLRN_NONE),
    [PS_RLRN_TAILING] = PS__RBIT(PS_RLRN_READY) | PS__RBIT(PS_RLRN_NONE),
    [PS_RLRN_READY] = PS__RBIT(PS_RLRN_NONE),
};

struct ps__rcore_table
{
    const unsigned *allowed;
    const char *const *names;
    unsigned nr;
};

static const struct ps__rcore_table ps__rcore_tables[PS_RCORE_ROLE__NR] = {
    [PS_RCORE_PRIMARY] = {ps__rpri_allowed, ps__rpri_names, PS_RPRI__NR},
    [PS_RCORE_SECONDARY] = {ps__rsec_allowed, ps__rsec_names, PS_RSEC__NR},
    [PS_RCORE_LEARNER] = {ps__rlrn_allowed, ps__rlrn_names, PS_RLRN__NR},
};

static const char *const ps__rcore_role_names[PS_RCORE_ROLE__NR] = {
    "none", "primary", "secondary", "learner"};

/* Node state */

struct ps__rcore_peer
{
    uint64_t id;
    uint64_t acked;       /* cumulative: durable on the peer */
    uint64_t next;        /* next LSN to send */
    uint64_t rewound_to;  /* the last ELSNGAP rewind (0: none pending) */
    uint64_t progress_ms; /* last ack advance or send from acked + 1 */
    /* §5.4: in my stream since (the ISR configuration that named it):
     * a group is not late for it before this. */
    uint64_t joined_ms;
    bool down; /* connection down since @down_ms */
    uint64_t down_ms;
    bool removing; /* named in my ISR_CHANGE in flight */
    /* A full copy to this ISR member (READ @copy_io) runs: it holds less
     * than my buffer can resend (a restarted primary's members). */
    uint64_t copy_io;
    bool confirmed;    /* it acked at least @acked (not only assumed) */
    uint64_t below_ms; /* since then it NACKs below @acked and my buffer */
    bool failed;       /* NACKed RT_ENOSPACE / RT_EDIVERGED: cannot follow */
    bool silent;       /* its lease support lapsed (ps_rcore_set_silent) */
};

/* The primary's view of a replica outside the ISR (§3.3, §8.1): probed,
 * copied (FULL), streamed like an ISR member but never counted for cw
 * until its ISR_CHANGE{add} is sent (joining). */
enum ps__rlp_state {
    PS__RLP_PROBE, /* probe sent at @probe_ms, or asked again then */
    PS__RLP_COPY,  /* full copy @io running; groups above @s.acked kept */
    PS__RLP_TAIL,  /* streamed from @s.acked + 1 */
};

struct ps__rcore_lpeer
{
    struct ps__rcore_peer s; /* its stream (id, acked, next, ...) */
    enum ps__rlp_state state;
    bool joining; /* TAIL and its ISR_CHANGE{add} sent: counted for cw */
    /* PROBE, an ISR member until my last assignment: my buffer keeps the
     * groups above @s.acked for it (@held_bytes of them, counted up to
     * @held_to) while they fit cfg.window_bytes. */
    bool hold, fresh; /* fresh: not probed since it left */
    bool no_keyed;    /* a keyed copy of it failed: the next is full */
    uint64_t held_bytes, held_to, window;
    uint64_t probe_ms;
    uint64_t io; /* COPY: the READ action's id */
};

struct ps__rcore_group
{
    uint64_t lsn;
    uint8_t *records;
    size_t len;
    /* Secondary: who sent it at which epoch (its ack goes there). */
    uint64_t from, epoch;
    uint64_t at_ms; /* primary: its local commit (0: before my stream) */
    uint64_t gen;   /* the generation that made it (0: unknown) */
};

struct ps__rcore_held
{
    uint64_t req_id;
    uint64_t lsn;
    uint64_t since_ms; /* held from (--write-hold-ms) */
};

struct ps__rcore_range
{
    uint64_t id;
    uint64_t epoch;
    uint64_t primary_id;
    uint64_t primary_epoch; /* the generation I follow or lead */
    uint64_t sealed_epoch;
    uint64_t seal_io;   /* the persist of sealed_epoch in flight (0) */
    uint64_t seal_from; /* who asked for it: the answer goes there */
    uint64_t heard_ms;  /* last append from the primary */
    bool await_assign;  /* restarted primary: silent until assigned */
    /* Restarted as the primary of an ISR of more than me: a secondary may
     * hold groups I shipped and never made durable, so I wait for a
     * failover (sealed like a secondary) instead of resuming. */
    bool restarted;
    bool isr_inflight; /* an ISR_CHANGE of mine at epoch @isr_epoch */
    uint64_t isr_epoch;
    uint64_t isr_not_before; /* after a refusal: no new ask before this */
    enum ps_rcore_role role;
    unsigned state;
    uint64_t last_lsn;
    uint64_t applied_lsn;
    uint64_t commit_lsn;
    struct ps__rcore_peer peers[PS_RCORE_MAX_REPLICAS];
    size_t n_peers;
    /* Send buffer (secondary: the groups above the commit LSN it knows):
     * groups buf_first .. buf_first + buf_n - 1, LSN order. */
    struct ps__rcore_group *buf;
    size_t buf_n, buf_cap;
    uint64_t buf_first;
    /* Client writes waiting for cw, LSN order: held[held_head..held_n). */
    struct ps__rcore_held *held;
    size_t held_head, held_n, held_cap;
    /* History (§2): the generations my applied sequence went through;
     * n_hist 0 = unknown (then every catch-up of or from it is a full
     * copy). */
    struct rt_repl_epoch_start hist[RT_REPL_MAX_HISTORY];
    size_t n_hist;
    /* Primary: the replicas of the set outside the ISR, caught up here. */
    struct ps__rcore_lpeer lpeers[PS_RCORE_MAX_REPLICAS];
    size_t n_lpeers;
    /* Replica being copied to (§3.3): the copy's epoch and sender, its
     * WRITE in flight (the BEGIN's clear or the end's apply) and the end's
     * LSN and history. */
    uint64_t copy_epoch, copy_from, copy_io, copy_lsn;
    uint64_t copy_id_seen; /* the BEGIN that started my copy (rt_repl_begin) */
    struct rt_repl_epoch_start copy_hist[RT_REPL_MAX_HISTORY];
    size_t n_copy_hist;
};

struct ps_rcore
{
    struct ps_rcore_config cfg;
    struct ps__rcore_range **ranges;
    size_t n_ranges, cap_ranges;
    bool timer_armed;
    uint64_t next_io;
    uint64_t started_ms; /* the seal grace runs from here too */
    uint64_t catchups[PS_RCORE_CATCHUP__NR];
};

/* Catch-up of replicas outside the ISR (section "Learners" below). */
static void ps__rcore_hist_note(struct ps__rcore_range *r,
                                uint64_t gen,
                                uint64_t lsn);
static const struct rt_repl_epoch_start *
ps__rcore_hist_at(const struct rt_repl_epoch_start *h, size_t n, uint64_t lsn);
static void ps__rcore_lrn_add(struct ps_rcore *node,
                              struct ps__rcore_range *r,
                              uint64_t id,
                              uint64_t now_ms,
                              struct rt_repl_actions *out);
static int ps__rcore_lrn_ack(struct ps_rcore *node,
                             struct ps__rcore_range *r,
                             const struct rt_repl_event *ev,
                             struct rt_repl_actions *out);
static void ps__rcore_lrn_tick(struct ps_rcore *node,
                               struct ps__rcore_range *r,
                               uint64_t now_ms,
                               struct rt_repl_actions *out);
static void ps__rcore_lrn_conn(struct ps_rcore *node,
                               struct ps__rcore_range *r,
                               const struct rt_repl_event *ev,
                               struct rt_repl_actions *out);
static void ps__rcore_lrn_sync(struct ps_rcore *node,
                               struct ps__rcore_range *r,
                               const struct rt_repl_conf *c,
                               uint64_t now_ms,
                               struct rt_repl_actions *out);
static int ps__rcore_lrn_step(struct ps_rcore *node,
                              const struct rt_repl_event *ev,
                              struct rt_repl_actions *out);
static void ps__rcore_lrn_refused(struct ps__rcore_range *r, int32_t code);
static void ps__rcore_isr_copy(struct ps_rcore *node,
                               struct ps__rcore_range *r,
                               struct ps__rcore_peer *p,
                               struct rt_repl_actions *out);
static void ps__rcore_lrn_left(const struct ps_rcore *node,
                               struct ps__rcore_range *r,
                               const struct ps__rcore_peer *p);
static uint64_t ps__rcore_lrn_floor(struct ps__rcore_range *r, uint64_t low);

/* The one place a range's state changes: within its role's table. */
static void ps__rcore_set_state(struct ps__rcore_range *r, unsigned to)
{
    const struct ps__rcore_table *t = &ps__rcore_tables[r->role];
    if (t->allowed == NULL || to >= t->nr ||
        !(t->allowed[r->state] & PS__RBIT(to))) {
        rt_log(RT_LOG_ERROR, "range %llu: illegal %s state change %s -> %s",
               (unsigned long long)r->id, ps__rcore_role_names[r->role],
               ps_rcore_state_name(r->role, r->state),
               ps_rcore_state_name(r->role, to));
        abort();
    }
    r->state = to;
}

const char *ps_rcore_role_name(enum ps_rcore_role r)
{
    return (unsigned)r < PS_RCORE_ROLE__NR ? ps__rcore_role_names[r] : "?";
}

const char *ps_rcore_state_name(enum ps_rcore_role r, unsigned state)
{
    if ((unsigned)r >= PS_RCORE_ROLE__NR || ps__rcore_tables[r].names == NULL ||
        state >= ps__rcore_tables[r].nr) {
        return "?";
    }
    return ps__rcore_tables[r].names[state];
}

/* Life cycle */

int ps_rcore_create(const struct ps_rcore_config *cfg, struct ps_rcore **out)
{
    if (cfg->inflight == 0 || cfg->resend_ms == 0 ||
        cfg->mutation >= PS_RCORE_MUT__NR) {
        return RT_EINVAL;
    }
    struct ps_rcore *n = rt_xcalloc(1, sizeof(*n));
    n->cfg = *cfg;
    *out = n;
    return 0;
}

static void ps__rcore_range_free(struct ps__rcore_range *r)
{
    for (size_t g = 0; g < r->buf_n; g++) {
        free(r->buf[g].records);
    }
    free(r->buf);
    free(r->held);
    free(r);
}

void ps_rcore_destroy(struct ps_rcore *node)
{
    if (node == NULL) {
        return;
    }
    for (size_t i = 0; i < node->n_ranges; i++) {
        ps__rcore_range_free(node->ranges[i]);
    }
    free(node->ranges);
    free(node);
}

static struct ps__rcore_range *ps__rcore_find(const struct ps_rcore *node,
                                              uint64_t range_id)
{
    for (size_t i = 0; i < node->n_ranges; i++) {
        if (node->ranges[i]->id == range_id) {
            return node->ranges[i];
        }
    }
    return NULL;
}

/* RT_EINVAL unless @a is well formed and names this node in its ISR. */
static int ps__rcore_check(const struct ps_rcore *node,
                           const struct ps_rcore_assignment *a)
{
    if (a->n_isr == 0 || a->n_isr > PS_RCORE_MAX_REPLICAS) {
        return RT_EINVAL;
    }
    bool in_isr = false, primary_in_isr = false;
    for (size_t i = 0; i < a->n_isr; i++) {
        in_isr |= a->isr[i] == node->cfg.self_id;
        primary_in_isr |= a->isr[i] == a->primary_id;
    }
    if (a->n_learners > PS_RCORE_MAX_REPLICAS || a->primary_epoch > a->epoch) {
        return RT_EINVAL;
    }
    for (size_t i = 0; i < a->n_learners; i++) {
        in_isr |= a->learners[i] == node->cfg.self_id;
    }
    return in_isr && primary_in_isr ? 0 : RT_EINVAL;
}

/* Rebuilds the peer list from @isr: peers kept keep their stream, new
 * ones are assumed at the commit LSN (every ISR member acked it), or at
 * the LSN my buffer starts after when that is higher: a range that came
 * here at an LSN (the half of a split, a merge: every ISR member held
 * it) or by a copy has nothing of its own below it to send, and a member
 * that NACKs below it gets a full copy (ps__rcore_ack). */
static void ps__rcore_set_peers(struct ps_rcore *node,
                                struct ps__rcore_range *r,
                                const uint64_t *isr,
                                size_t n_isr,
                                uint64_t now_ms)
{
    struct ps__rcore_peer old[PS_RCORE_MAX_REPLICAS];
    size_t n_old = r->n_peers;
    memcpy(old, r->peers, n_old * sizeof(*old));
    r->n_peers = 0;
    for (size_t i = 0; i < n_isr; i++) {
        if (isr[i] == node->cfg.self_id) {
            continue;
        }
        struct ps__rcore_peer *p = &r->peers[r->n_peers++];
        uint64_t at =
            r->commit_lsn > r->buf_first - 1 ? r->commit_lsn : r->buf_first - 1;
        *p = (struct ps__rcore_peer){.id = isr[i],
                                     .acked = at,
                                     .next = at + 1,
                                     .progress_ms = now_ms,
                                     .joined_ms = now_ms};
        for (size_t j = 0; j < n_old; j++) {
            if (old[j].id == isr[i]) {
                *p = old[j];
            }
        }
    }
    for (size_t j = 0; j < n_old; j++) {
        bool in = false;
        for (size_t i = 0; i < n_isr; i++) {
            in |= isr[i] == old[j].id;
        }
        if (!in) {
            ps__rcore_lrn_left(node, r, &old[j]);
        }
    }
}

int ps_rcore_assign(struct ps_rcore *node,
                    const struct ps_rcore_assignment *a,
                    struct rt_repl_actions *out)
{
    if (ps__rcore_find(node, a->range_id) != NULL) {
        return RT_EEXIST;
    }
    if (ps__rcore_check(node, a) != 0) {
        return RT_EINVAL;
    }
    struct ps__rcore_range *r = rt_xcalloc(1, sizeof(*r));
    r->id = a->range_id;
    r->epoch = a->epoch;
    r->primary_id = a->primary_id;
    r->last_lsn = r->applied_lsn = a->lsn;
    /* The master's generation, not @a->epoch: a split child at its
     * parent's epoch + 1 keeps the parent's primary_epoch, and its next
     * ASSIGN (an ISR change) is taken as the same generation only if
     * this matches it. */
    r->primary_epoch = a->primary_epoch != 0 ? a->primary_epoch : a->epoch;
    r->buf_first = a->lsn + 1;
    if (a->lsn == 0) {
        /* A new range: its whole history is this generation. */
        ps__rcore_hist_note(r, r->primary_epoch, 1);
    }
    bool learner = true;
    for (size_t i = 0; i < a->n_isr; i++) {
        learner &= a->isr[i] != node->cfg.self_id;
    }
    if (learner && a->lsn == 0) {
        /* Outside the ISR without a copy: a learner waiting for its
         * primary's probe (§3.3). */
        r->role = PS_RCORE_LEARNER;
        r->n_hist = 0;
    } else if (a->primary_id == node->cfg.self_id) {
        r->role = PS_RCORE_PRIMARY;
        /* Its members are taken to hold its durable LSN: nothing to catch
         * up (catch-up comes with failover, §3.1 ACTIVATING). */
        r->commit_lsn = a->lsn;
        ps__rcore_set_peers(node, r, a->isr, a->n_isr, 0);
        ps__rcore_set_state(r, PS_RPRI_ACTIVATING);
        ps__rcore_set_state(r, PS_RPRI_SERVING);
        for (size_t i = 0; i < a->n_learners; i++) {
            ps__rcore_lrn_add(node, r, a->learners[i], 0, out);
        }
    } else {
        r->role = PS_RCORE_SECONDARY;
        ps__rcore_set_state(r, PS_RSEC_FOLLOWING);
    }
    if (node->n_ranges == node->cap_ranges) {
        node->cap_ranges = node->cap_ranges ? 2 * node->cap_ranges : 8;
        node->ranges =
            rt_xrealloc(node->ranges, node->cap_ranges * sizeof(*node->ranges));
    }
    node->ranges[node->n_ranges++] = r;
    return 0;
}

/* Primary: streams, cw, replies */

static struct ps__rcore_group *ps__rcore_group(struct ps__rcore_range *r,
                                               uint64_t lsn)
{
    RT_PRE(lsn >= r->buf_first && lsn < r->buf_first + r->buf_n);
    return &r->buf[lsn - r->buf_first];
}

/* Sends @p every buffered group it has not been sent, up to the window. */
static void ps__rcore_pump(struct ps_rcore *node,
                           struct ps__rcore_range *r,
                           struct ps__rcore_peer *p,
                           uint64_t now_ms,
                           struct rt_repl_actions *out)
{
    if (p->copy_io != 0) {
        return; /* streamed from the copy's LSN once it is done */
    }
    if (p->next <= p->acked) {
        p->next = p->acked + 1;
    }
    while (p->next <= r->last_lsn &&
           p->next - 1 - p->acked < node->cfg.inflight) {
        if (p->next == p->acked + 1) {
            p->progress_ms = now_ms;
        }
        const struct ps__rcore_group *g = ps__rcore_group(r, p->next);
        struct rt_repl_action act = {.kind = RT_REPL_ACT_SEND, .peer = p->id};
        act.msg.kind = RT_REPL_MSG_APPEND;
        act.msg.u.append = (struct rt_repl_append){
            .range_id = r->id,
            .epoch = r->epoch,
            .lsn = g->lsn,
            .commit_lsn = r->commit_lsn,
            .records = g->records,
            .records_len = g->len,
            .gen = g->gen,
        };
        rt_repl_actions_add(out, &act);
        p->next++;
    }
}

/* Drops the groups every peer has acked (the primary has them all). */
static void ps__rcore_trim(struct ps__rcore_range *r)
{
    uint64_t low = r->last_lsn;
    for (size_t i = 0; i < r->n_peers; i++) {
        low = r->peers[i].acked < low ? r->peers[i].acked : low;
    }
    /* A replica being copied or streamed outside the ISR keeps its groups
     * (bounded by cfg.learn_window: past it, it starts again). */
    for (size_t i = 0; i < r->n_lpeers; i++) {
        const struct ps__rcore_lpeer *lp = &r->lpeers[i];
        if (lp->state != PS__RLP_PROBE && lp->s.acked < low) {
            low = lp->s.acked;
        }
    }
    low = ps__rcore_lrn_floor(r, low);
    size_t drop = 0;
    while (drop < r->buf_n && r->buf[drop].lsn <= low) {
        free(r->buf[drop].records);
        drop++;
    }
    if (drop > 0) {
        memmove(r->buf, r->buf + drop, (r->buf_n - drop) * sizeof(*r->buf));
        r->buf_n -= drop;
        r->buf_first += drop;
    }
}

/* §5.3 ack rule: cw = min over the ISR of acked, own durable LSN counted;
 * then answers every held write with LSN <= cw. */
static void ps__rcore_commit(struct ps_rcore *node,
                             struct ps__rcore_range *r,
                             struct rt_repl_actions *out)
{
    uint64_t cw = r->applied_lsn;
    if (node->cfg.mutation != PS_RCORE_MUT_ACK_PRIMARY_ONLY) {
        for (size_t i = 0; i < r->n_peers; i++) {
            if (r->peers[i].removing &&
                node->cfg.mutation == PS_RCORE_MUT_SHRINK_EARLY) {
                continue; /* the known-bad core */
            }
            cw = r->peers[i].acked < cw ? r->peers[i].acked : cw;
        }
        /* §5.3: a member whose join is pending counts from the moment its
         * ISR_CHANGE{add} was sent. */
        for (size_t i = 0; i < r->n_lpeers; i++) {
            if (r->lpeers[i].joining && r->lpeers[i].s.acked < cw) {
                cw = r->lpeers[i].s.acked;
            }
        }
    }
    RT_PRE(cw >= r->commit_lsn);
    r->commit_lsn = cw;
    while (r->held_head < r->held_n && r->held[r->held_head].lsn <= cw) {
        struct rt_repl_action act = {.kind = RT_REPL_ACT_REPLY,
                                     .req_id = r->held[r->held_head].req_id,
                                     .code = 0};
        rt_repl_actions_add(out, &act);
        r->held_head++;
    }
    if (r->held_head == r->held_n) {
        r->held_head = r->held_n = 0;
    }
}

static bool ps__rcore_unacked(const struct ps_rcore *node)
{
    for (size_t i = 0; i < node->n_ranges; i++) {
        const struct ps__rcore_range *r = node->ranges[i];
        if (r->role != PS_RCORE_PRIMARY || r->state == PS_RPRI_DEPOSED ||
            r->await_assign) {
            continue;
        }
        for (size_t j = 0; j < r->n_peers; j++) {
            if (r->peers[j].acked < r->last_lsn ||
                (r->peers[j].down && node->cfg.conn_down_ms != 0)) {
                return true;
            }
        }
        if (r->n_lpeers > 0) {
            return true; /* probes, copies and joins run on the timer */
        }
    }
    return false;
}

/* Keeps the resend timer armed while some peer has unacked groups. */
static void ps__rcore_arm(struct ps_rcore *node,
                          uint64_t now_ms,
                          struct rt_repl_actions *out)
{
    if (node->timer_armed || !ps__rcore_unacked(node)) {
        return;
    }
    struct rt_repl_action act = {.kind = RT_REPL_ACT_TIMER,
                                 .timer_id = PS_RCORE_TIMER_RESEND,
                                 .at_ms = now_ms + node->cfg.resend_ms};
    rt_repl_actions_add(out, &act);
    node->timer_armed = true;
}

/* Holds client writes @req_ids until cw >= @lsn (at least every held
 * write's LSN: the list stays in LSN order). */
static void ps__rcore_hold(struct ps__rcore_range *r,
                           uint64_t lsn,
                           uint64_t now_ms,
                           const uint64_t *req_ids,
                           size_t n)
{
    if (r->held_n + n > r->held_cap) {
        r->held_cap = 2 * (r->held_n + n);
        r->held = rt_xrealloc(r->held, r->held_cap * sizeof(*r->held));
    }
    for (size_t i = 0; i < n; i++) {
        r->held[r->held_n++] = (struct ps__rcore_held){
            .req_id = req_ids[i], .lsn = lsn, .since_ms = now_ms};
    }
}

static void ps__rcore_buffer(struct ps__rcore_range *r,
                             uint64_t lsn,
                             const uint8_t *records,
                             size_t len);

/* Appends my group @lsn to @r's send buffer, of my generation. */
static void ps__rcore_buf_add(struct ps__rcore_range *r,
                              uint64_t lsn,
                              const uint8_t *records,
                              size_t len,
                              uint64_t now_ms)
{
    ps__rcore_buffer(r, lsn, records, len);
    r->buf[r->buf_n - 1].at_ms = now_ms;
    r->buf[r->buf_n - 1].gen = r->primary_epoch;
}

/* §5.2/§5.3: the writer took group @ev->lsn and is committing it. It is
 * shipped now, in parallel with the local sync: cw counts my own durable
 * LSN (applied_lsn), so nothing is acknowledged before it is durable here
 * too. A secondary may then hold a group its primary lost in a crash; a
 * restarted primary is therefore failed over (ps_rcore_load), never
 * resumed. Not serving (deposed, a transfer's end): the group is still
 * mine and in flight, so it is buffered and counted in last_lsn (an
 * append at that LSN waits for it) but not sent. */
static int ps__rcore_group_in(struct ps_rcore *node,
                              struct ps__rcore_range *r,
                              const struct rt_repl_event *ev,
                              struct rt_repl_actions *out)
{
    if (ev->lsn != r->last_lsn + 1) {
        return RT_EINVAL;
    }
    r->last_lsn = ev->lsn;
    if (r->role != PS_RCORE_PRIMARY) {
        return 0; /* its DISK_DONE finds a secondary: ps__rcore_local_late */
    }
    ps__rcore_buf_add(r, ev->lsn, ev->records, ev->records_len, ev->now_ms);
    if (r->state != PS_RPRI_SERVING && r->state != PS_RPRI_FROZEN) {
        return 0;
    }
    for (size_t i = 0; i < r->n_peers; i++) {
        ps__rcore_pump(node, r, &r->peers[i], ev->now_ms, out);
    }
    ps__rcore_trim(r);
    return 0;
}

/* §5.2: the writer made group @ev->lsn of the range durable here (shipped
 * already if a GROUP event came first). */
static int ps__rcore_local_done(struct ps_rcore *node,
                                struct ps__rcore_range *r,
                                const struct rt_repl_event *ev,
                                struct rt_repl_actions *out)
{
    if ((r->state != PS_RPRI_SERVING && r->state != PS_RPRI_FROZEN) ||
        ev->lsn > r->last_lsn + 1) {
        return RT_EINVAL;
    }
    if (ev->lsn == r->applied_lsn + 1 && ev->lsn <= r->last_lsn) {
        /* Shipped at its GROUP: now durable here too. */
        r->applied_lsn = ev->lsn;
        ps__rcore_hold(r, r->last_lsn, ev->now_ms, ev->req_ids, ev->n_req_ids);
        ps__rcore_trim(r);
        ps__rcore_commit(node, r, out);
        return 0;
    }
    if (ev->lsn <= r->last_lsn) {
        /* Not a new group: another write of the last one, or a write that
         * changed nothing but saw the state up to it (§5.2). Held at the
         * last LSN, which keeps the held list in LSN order. */
        ps__rcore_hold(r, r->last_lsn, ev->now_ms, ev->req_ids, ev->n_req_ids);
        ps__rcore_commit(node, r, out);
        return 0;
    }
    if (r->applied_lsn != r->last_lsn) {
        return RT_EINVAL; /* a group without GROUP while one is in flight */
    }
    ps__rcore_buf_add(r, ev->lsn, ev->records, ev->records_len, ev->now_ms);
    r->last_lsn = ev->lsn;
    r->applied_lsn = ev->lsn;
    ps__rcore_hold(r, ev->lsn, ev->now_ms, ev->req_ids, ev->n_req_ids);
    for (size_t i = 0; i < r->n_peers; i++) {
        ps__rcore_pump(node, r, &r->peers[i], ev->now_ms, out);
    }
    ps__rcore_trim(r);
    ps__rcore_commit(node, r, out);
    return 0;
}

/* ACTIVATING -> SERVING (§3.1): every ISR member acked my last LSN. */
static void ps__rcore_activated(struct ps__rcore_range *r)
{
    if (r->state != PS_RPRI_ACTIVATING) {
        return;
    }
    for (size_t i = 0; i < r->n_peers; i++) {
        if (r->peers[i].acked < r->last_lsn) {
            return;
        }
    }
    ps__rcore_set_state(r, PS_RPRI_SERVING);
}

/* Any -> DEPOSED (§3.1): a newer epoch exists. Held writes may or may not
 * survive the new generation: RT_ETIMEDOUT (outcome unknown, §5.5). */
static void ps__rcore_depose(struct ps__rcore_range *r,
                             struct rt_repl_actions *out)
{
    ps__rcore_set_state(r, PS_RPRI_DEPOSED);
    for (size_t i = r->held_head; i < r->held_n; i++) {
        struct rt_repl_action act = {.kind = RT_REPL_ACT_REPLY,
                                     .req_id = r->held[i].req_id,
                                     .code = RT_ETIMEDOUT};
        rt_repl_actions_add(out, &act);
    }
    r->held_head = r->held_n = 0;
}

static void ps__rcore_isr_check(struct ps_rcore *node,
                                struct ps__rcore_range *r,
                                uint64_t now_ms,
                                struct rt_repl_actions *out);

static int ps__rcore_ack(struct ps_rcore *node,
                         struct ps__rcore_range *r,
                         const struct rt_repl_event *ev,
                         struct rt_repl_actions *out)
{
    const struct rt_repl_ack *ack = &ev->msg->u.ack;
    struct ps__rcore_peer *p = NULL;
    for (size_t i = 0; i < r->n_peers; i++) {
        if (r->peers[i].id == ev->peer) {
            p = &r->peers[i];
        }
    }
    if (p == NULL) {
        return ps__rcore_lrn_ack(node, r, ev, out);
    }
    if (r->state == PS_RPRI_DEPOSED || r->await_assign) {
        return 0;
    }
    if (ack->code == RT_ESEALED || ack->code == RT_ESTALE) {
        /* A member sealed past my epoch, or holding the range at a newer
         * epoch (a new primary, whose applied LSN may pass mine): my
         * generation is over. */
        if (ack->epoch > r->epoch) {
            ps__rcore_depose(r, out);
        }
        return 0;
    }
    if (ack->applied_lsn > r->last_lsn) {
        return RT_EINVAL;
    }
    if (ack->code == RT_ENOSPACE || ack->code == RT_EDIVERGED) {
        /* §5.4: it cannot take my groups (full disk, a history that
         * disagrees): proposed for removal at once. */
        p->failed = true;
        ps__rcore_isr_check(node, r, ev->now_ms, out);
        return 0;
    }
    if (ack->code != 0 && ack->code != RT_ELSNGAP) {
        return RT_EINVAL;
    }
    if (ack->code == 0) {
        p->failed = false;
    }
    /* Both carry the peer's durable position: a NACK acks too. */
    bool below = ack->applied_lsn < p->acked && !p->confirmed;
    if (ack->applied_lsn > p->acked) {
        p->acked = ack->applied_lsn;
        p->progress_ms = ev->now_ms;
    }
    p->confirmed |= ack->applied_lsn >= p->acked;
    if (p->confirmed) {
        p->below_ms = 0;
    }
    if (ack->code == RT_ELSNGAP && p->acked + 1 < p->next &&
        p->rewound_to != p->acked + 1) {
        /* Rewind once per gap position: the NACKs of the other groups
         * already in flight name the same position. */
        p->next = p->acked + 1;
        p->rewound_to = p->acked + 1;
    }
    if (ack->code == RT_ELSNGAP && below &&
        ack->applied_lsn + 1 < r->buf_first && p->below_ms == 0) {
        /* A full copy at the next resend tick after a whole period, if
         * no ack confirmed the position meanwhile (this NACK may be an
         * old one, overtaken by acks). */
        p->below_ms = ev->now_ms ? ev->now_ms : 1;
    }
    ps__rcore_pump(node, r, p, ev->now_ms, out);
    ps__rcore_trim(r);
    ps__rcore_commit(node, r, out);
    ps__rcore_activated(r);
    return 0;
}

/* §5.4: an ISR member late (its oldest unacked group older than
 * cfg.ack_timeout_ms) or unreachable (connection down cfg.conn_down_ms)
 * is proposed for removal: one ISR_CHANGE{remove} to the master per
 * range in flight. Its acks still count until the assignment at the
 * committed epoch removes it. An ACTIVATING primary (promoted, not a
 * restarted one waiting for its assignment) asks too: a member that died
 * after the promotion would otherwise keep it from serving (§3.1's
 * "report to master, ISR_CHANGE removing the laggards"). */
static void ps__rcore_isr_check(struct ps_rcore *node,
                                struct ps__rcore_range *r,
                                uint64_t now_ms,
                                struct rt_repl_actions *out)
{
    if ((r->state != PS_RPRI_SERVING && r->state != PS_RPRI_ACTIVATING) ||
        (r->isr_inflight && r->isr_epoch == r->epoch) ||
        now_ms < r->isr_not_before) {
        return;
    }
    r->isr_inflight = false;
    for (size_t i = 0; i < r->n_peers; i++) {
        r->peers[i].removing = false;
    }
    struct rt_repl_action act = {.kind = RT_REPL_ACT_SEND,
                                 .peer = node->cfg.master_id};
    act.msg.kind = RT_REPL_MSG_ISR_CHANGE;
    struct rt_repl_isr_change *c = &act.msg.u.isr_change;
    c->range_id = r->id;
    c->epoch = r->epoch;
    for (size_t i = 0; i < r->n_peers; i++) {
        const struct ps__rcore_peer *p = &r->peers[i];
        /* Its oldest unacked group: committed when, or (older than its
         * place in my stream) since it joined. */
        uint64_t since = p->joined_ms;
        if (p->acked < r->last_lsn && p->acked + 1 >= r->buf_first &&
            p->acked + 1 < r->buf_first + r->buf_n &&
            ps__rcore_group(r, p->acked + 1)->at_ms > since) {
            since = ps__rcore_group(r, p->acked + 1)->at_ms;
        }
        bool late = node->cfg.ack_timeout_ms != 0 && p->acked < r->last_lsn &&
                    now_ms - since >= node->cfg.ack_timeout_ms;
        bool gone = node->cfg.conn_down_ms != 0 && p->down &&
                    now_ms - p->down_ms >= node->cfg.conn_down_ms;
        if (late || gone || p->failed || p->silent) {
            c->remove[c->n_remove++] = p->id;
        }
    }
    if (c->n_remove == 0) {
        return;
    }
    rt_repl_actions_add(out, &act);
    r->isr_inflight = true;
    r->isr_epoch = r->epoch;
    for (size_t i = 0; i < r->n_peers; i++) {
        for (size_t j = 0; j < c->n_remove; j++) {
            r->peers[i].removing |= r->peers[i].id == c->remove[j];
        }
    }
    if (node->cfg.mutation == PS_RCORE_MUT_SHRINK_EARLY) {
        ps__rcore_commit(node, r, out);
    }
}

/* §5.4: a write held longer than cfg.write_hold_ms (the ISR cannot shrink,
 * or shrank below min_insync) is answered RT_ETIMEDOUT: outcome unknown. */
static void ps__rcore_hold_expire(struct ps_rcore *node,
                                  struct ps__rcore_range *r,
                                  uint64_t now_ms,
                                  struct rt_repl_actions *out)
{
    if (node->cfg.write_hold_ms == 0) {
        return;
    }
    while (r->held_head < r->held_n &&
           now_ms - r->held[r->held_head].since_ms >= node->cfg.write_hold_ms) {
        struct rt_repl_action act = {.kind = RT_REPL_ACT_REPLY,
                                     .req_id = r->held[r->held_head].req_id,
                                     .code = RT_ETIMEDOUT};
        rt_repl_actions_add(out, &act);
        r->held_head++;
    }
    if (r->held_head == r->held_n) {
        r->held_head = r->held_n = 0;
    }
}

/* The master's answer to my ISR_CHANGE: committed (the assignment at the
 * new epoch follows and ends the change), or refused (asked again at the
 * next tick if the member is still late). */
static int ps__rcore_isr_resp(struct ps_rcore *node,
                              struct ps__rcore_range *r,
                              const struct rt_repl_event *ev)
{
    const struct rt_repl_isr_resp *resp = &ev->msg->u.isr_resp;
    if (r == NULL || r->role != PS_RCORE_PRIMARY) {
        return RT_EINVAL;
    }
    if (resp->code != 0) {
        /* The master is busy with the range (a failover, another
         * change) or refused: ask again a resend period later at the
         * soonest, not at every tick. */
        r->isr_inflight = false;
        r->isr_not_before =
            ev->now_ms + PS__ISR_RETRY_TICKS * node->cfg.resend_ms;
        for (size_t i = 0; i < r->n_peers; i++) {
            r->peers[i].removing = false;
        }
        ps__rcore_lrn_refused(r, resp->code);
    }
    return 0;
}

static int ps__rcore_timer(struct ps_rcore *node,
                           const struct rt_repl_event *ev,
                           struct rt_repl_actions *out)
{
    if (ev->timer_id != PS_RCORE_TIMER_RESEND) {
        return RT_EINVAL;
    }
    node->timer_armed = false;
    for (size_t i = 0; i < node->n_ranges; i++) {
        struct ps__rcore_range *r = node->ranges[i];
        if (r->role != PS_RCORE_PRIMARY || r->state == PS_RPRI_DEPOSED ||
            r->await_assign) {
            continue;
        }
        for (size_t j = 0; j < r->n_peers; j++) {
            struct ps__rcore_peer *p = &r->peers[j];
            if (p->acked < r->last_lsn &&
                ev->now_ms - p->progress_ms >= node->cfg.resend_ms &&
                node->cfg.mutation != PS_RCORE_MUT_NO_RESEND) {
                p->next = p->acked + 1;
                p->rewound_to = 0;
                ps__rcore_pump(node, r, p, ev->now_ms, out);
            }
        }
        ps__rcore_isr_check(node, r, ev->now_ms, out);
        for (size_t j = 0; j < r->n_peers; j++) {
            struct ps__rcore_peer *p = &r->peers[j];
            if (!p->confirmed && p->below_ms != 0 &&
                ev->now_ms - p->below_ms >= node->cfg.resend_ms) {
                ps__rcore_isr_copy(node, r, p, out);
            }
        }
        ps__rcore_lrn_tick(node, r, ev->now_ms, out);
        ps__rcore_hold_expire(node, r, ev->now_ms, out);
    }
    return 0;
}

/* Secondary */

static void ps__rcore_send_ack(uint64_t peer,
                               const struct ps__rcore_range *r,
                               int32_t code,
                               uint64_t range_id,
                               struct rt_repl_actions *out)
{
    struct rt_repl_action act = {.kind = RT_REPL_ACT_SEND, .peer = peer};
    act.msg.kind = RT_REPL_MSG_ACK;
    act.msg.u.ack = (struct rt_repl_ack){
        .range_id = range_id,
        .code = code,
        .applied_lsn = r ? r->applied_lsn : 0,
        .epoch = r ? r->epoch : 0,
    };
    rt_repl_actions_add(out, &act);
}

/* Appends group @lsn to the buffer (a secondary's: what it would send
 * if promoted). */
static void ps__rcore_buffer(struct ps__rcore_range *r,
                             uint64_t lsn,
                             const uint8_t *records,
                             size_t len)
{
    if (r->buf_n == r->buf_cap) {
        r->buf_cap = r->buf_cap ? 2 * r->buf_cap : 16;
        r->buf = rt_xrealloc(r->buf, r->buf_cap * sizeof(*r->buf));
    }
    if (r->buf_n > 0 && lsn != r->buf_first + r->buf_n) {
        /* Only a test mutation (ACCEPT_GAP) applies out of order. */
        for (size_t g = 0; g < r->buf_n; g++) {
            free(r->buf[g].records);
        }
        r->buf_n = 0;
    }
    if (r->buf_n == 0) {
        r->buf_first = lsn;
    }
    r->buf[r->buf_n++] = (struct ps__rcore_group){
        .lsn = lsn,
        .records = len ? rt_xmemdup(records, len) : NULL,
        .len = len,
    };
}

/* A secondary drops the groups every ISR member has (<= its commit LSN). */
static void ps__rcore_trim_committed(struct ps__rcore_range *r)
{
    size_t drop = 0;
    while (drop < r->buf_n && r->buf[drop].lsn <= r->commit_lsn) {
        free(r->buf[drop].records);
        drop++;
    }
    if (drop > 0) {
        memmove(r->buf, r->buf + drop, (r->buf_n - drop) * sizeof(*r->buf));
        r->buf_n -= drop;
        r->buf_first += drop;
    }
}

/* The epoch below which appends are refused: the sealed one counts. */
static uint64_t ps__rcore_fence(const struct ps_rcore *node,
                                const struct ps__rcore_range *r)
{
    if (node->cfg.mutation == PS_RCORE_MUT_APPEND_AFTER_SEAL) {
        return r->epoch;
    }
    return r->sealed_epoch > r->epoch ? r->sealed_epoch : r->epoch;
}

/* §3.2 FOLLOWING -> FOLLOWING on REPL_APPEND; SEALED -> FOLLOWING on one
 * at >= the sealed epoch. */
static int ps__rcore_append(struct ps_rcore *node,
                            struct ps__rcore_range *r,
                            const struct rt_repl_event *ev,
                            struct rt_repl_actions *out)
{
    const struct rt_repl_append *ap = &ev->msg->u.append;
    if (r == NULL) {
        ps__rcore_send_ack(ev->peer, NULL, RT_EINVAL, ap->range_id, out);
        return RT_EINVAL;
    }
    if (r->role != PS_RCORE_SECONDARY) {
        /* §4: not held as a secondary. A primary of an older epoch than
         * the sender's learns that it was deposed; the sender of an older
         * epoch learns it from my epoch in the answer. */
        if (r->role == PS_RCORE_PRIMARY && ap->epoch > r->epoch &&
            r->state != PS_RPRI_DEPOSED) {
            ps__rcore_depose(r, out);
        }
        ps__rcore_send_ack(ev->peer, r, RT_ESTALE, r->id, out);
        return 0;
    }
    uint64_t fence = ps__rcore_fence(node, r);
    if (ap->epoch < fence) {
        struct rt_repl_action act = {.kind = RT_REPL_ACT_SEND,
                                     .peer = ev->peer};
        act.msg.kind = RT_REPL_MSG_ACK;
        act.msg.u.ack = (struct rt_repl_ack){.range_id = r->id,
                                             .code = RT_ESEALED,
                                             .applied_lsn = r->applied_lsn,
                                             .epoch = fence};
        rt_repl_actions_add(out, &act);
        return 0;
    }
    if (r->state == PS_RSEC_SEALED && r->seal_io == 0 &&
        ap->epoch >= r->sealed_epoch) {
        ps__rcore_set_state(r, PS_RSEC_FOLLOWING);
    } else if (r->state == PS_RSEC_SEALED &&
               node->cfg.mutation == PS_RCORE_MUT_APPEND_AFTER_SEAL) {
        /* the known-bad core: fenced, yet still applying */
    } else if (r->state != PS_RSEC_FOLLOWING) {
        ps__rcore_send_ack(
            ev->peer, r,
            r->state == PS_RSEC_DIVERGED ? RT_EDIVERGED : RT_EINVAL, r->id,
            out);
        return RT_EINVAL;
    }
    if (ap->epoch > r->epoch) {
        r->epoch = ap->epoch;
        r->primary_id = ev->peer;
    }
    r->heard_ms = ev->now_ms;
    if (ap->lsn <= r->applied_lsn) {
        /* A duplicate, unless my group there is of another generation
         * (a deposed primary's late local group, say): then my history
         * disagrees with the sender's (§7.3). */
        const struct rt_repl_epoch_start *mine =
            ps__rcore_hist_at(r->hist, r->n_hist, ap->lsn);
        bool other = ap->gen != 0 && mine != NULL && mine->epoch != ap->gen;
        if (other) {
            ps__rcore_set_state(r, PS_RSEC_DIVERGED);
        }
        ps__rcore_send_ack(ev->peer, r, other ? RT_EDIVERGED : 0, r->id, out);
        return 0;
    }
    if (ap->lsn <= r->last_lsn) {
        return 0; /* being applied: its DISK_DONE acks it */
    }
    if (ap->lsn != r->last_lsn + 1 &&
        node->cfg.mutation != PS_RCORE_MUT_ACCEPT_GAP) {
        ps__rcore_send_ack(ev->peer, r, RT_ELSNGAP, r->id, out);
        return 0;
    }
    if (r->state == PS_RSEC_FOLLOWING) {
        ps__rcore_set_state(r, PS_RSEC_FOLLOWING);
    }
    r->last_lsn = ap->lsn;
    if (ap->commit_lsn > r->commit_lsn) {
        r->commit_lsn = ap->commit_lsn;
    }
    ps__rcore_buffer(r, ap->lsn, ap->records, ap->records_len);
    r->buf[r->buf_n - 1].from = ev->peer;
    r->buf[r->buf_n - 1].epoch = ap->epoch;
    r->buf[r->buf_n - 1].gen = ap->gen;
    ps__rcore_hist_note(r, ap->gen, ap->lsn);
    ps__rcore_trim_committed(r);
    struct rt_repl_action act = {.kind = RT_REPL_ACT_WRITE,
                                 .io_id = ++node->next_io,
                                 .range_id = r->id,
                                 .lsn = ap->lsn};
    act.msg.kind = RT_REPL_MSG_APPEND;
    act.msg.u.append = *ap;
    rt_repl_actions_add(out, &act);
    return 0;
}

static int ps__rcore_applied(struct ps_rcore *node,
                             struct ps__rcore_range *r,
                             const struct rt_repl_event *ev,
                             struct rt_repl_actions *out)
{
    if (ev->lsn <= r->applied_lsn || ev->lsn > r->last_lsn ||
        (ev->lsn != r->applied_lsn + 1 &&
         node->cfg.mutation != PS_RCORE_MUT_ACCEPT_GAP)) {
        return RT_EINVAL;
    }
    if (r->state == PS_RSEC_DIVERGED) {
        r->applied_lsn = ev->lsn;
        return 0; /* never acks (§3.2); a copy replaces it all */
    }
    r->applied_lsn = ev->lsn;
    /* The ack goes to the group's sender at the group's epoch: after an
     * assignment to another generation, a group of the old one must not
     * be counted by the new primary (it may not hold the same group). */
    struct rt_repl_action act = {.kind = RT_REPL_ACT_SEND,
                                 .peer = r->primary_id};
    act.msg.kind = RT_REPL_MSG_ACK;
    act.msg.u.ack = (struct rt_repl_ack){
        .range_id = r->id, .applied_lsn = r->applied_lsn, .epoch = r->epoch};
    if (r->buf_n > 0 && ev->lsn >= r->buf_first &&
        ev->lsn < r->buf_first + r->buf_n &&
        ps__rcore_group(r, ev->lsn)->from != 0) {
        act.peer = ps__rcore_group(r, ev->lsn)->from;
        act.msg.u.ack.epoch = ps__rcore_group(r, ev->lsn)->epoch;
    }
    rt_repl_actions_add(out, &act);
    return 0;
}

/* Failover: SEAL, assignments, restarts */

static void ps__rcore_seal_resp(uint64_t peer,
                                const struct ps__rcore_range *r,
                                uint64_t range_id,
                                uint64_t new_epoch,
                                int32_t code,
                                uint32_t retry_ms,
                                struct rt_repl_actions *out)
{
    struct rt_repl_action act = {.kind = RT_REPL_ACT_SEND, .peer = peer};
    act.msg.kind = RT_REPL_MSG_SEAL_RESP;
    act.msg.u.seal_resp = (struct rt_repl_seal_resp){
        .range_id = range_id,
        .new_epoch = new_epoch,
        .code = code,
        .applied_epoch = r ? r->epoch : 0,
        .applied_lsn = r ? r->applied_lsn : 0,
        .retry_ms = retry_ms,
    };
    rt_repl_actions_add(out, &act);
}

static void ps__rcore_step_down(struct ps__rcore_range *r,
                                struct rt_repl_actions *out);

/* §3.2 FOLLOWING -> SEALED, with the §4 checks in their order. */
static int ps__rcore_seal(struct ps_rcore *node,
                          const struct rt_repl_event *ev,
                          struct rt_repl_actions *out)
{
    const struct rt_repl_seal *sl = &ev->msg->u.seal;
    struct ps__rcore_range *r = ps__rcore_find(node, sl->range_id);
    if (r == NULL) {
        ps__rcore_seal_resp(ev->peer, NULL, sl->range_id, sl->new_epoch,
                            RT_ENOTFOUND, 0, out);
        return 0;
    }
    if (sl->new_epoch <= r->epoch || sl->new_epoch < r->sealed_epoch) {
        ps__rcore_seal_resp(ev->peer, r, r->id, sl->new_epoch, RT_ESTALE, 0,
                            out);
        return 0;
    }
    if (sl->new_epoch == r->sealed_epoch) {
        if (r->seal_io == 0) { /* persisted: the same answer again */
            ps__rcore_seal_resp(ev->peer, r, r->id, sl->new_epoch, 0, 0, out);
        }
        return 0;
    }
    bool restarted = r->restarted;
    if (restarted && r->role == PS_RCORE_PRIMARY) {
        /* A restarted primary is sealed like a secondary, at once: the
         * lease the grace protects was my dead predecessor's. It stays
         * `restarted` (never promoted back into its old generation, a
         * cancel included) until a new generation or another primary is
         * assigned. */
        ps__rcore_step_down(r, out);
        r->restarted = true;
    }
    if (r->role == PS_RCORE_PRIMARY) {
        if (r->state != PS_RPRI_DEPOSED) {
            ps__rcore_depose(r, out);
        }
        ps__rcore_seal_resp(ev->peer, r, r->id, sl->new_epoch, RT_ESTALE, 0,
                            out);
        return 0;
    }
    if (r->role != PS_RCORE_SECONDARY ||
        (r->state != PS_RSEC_FOLLOWING && r->state != PS_RSEC_SEALED) ||
        r->seal_io != 0) {
        ps__rcore_seal_resp(ev->peer, r, r->id, sl->new_epoch, RT_ESTALE, 0,
                            out);
        return 0;
    }
    uint64_t from =
        r->heard_ms > node->started_ms ? r->heard_ms : node->started_ms;
    if (!restarted && ev->now_ms < from + node->cfg.seal_grace_ms) {
        uint64_t wait = from + node->cfg.seal_grace_ms - ev->now_ms;
        ps__rcore_seal_resp(ev->peer, r, r->id, sl->new_epoch, RT_EBUSY,
                            (uint32_t)wait, out);
        return 0;
    }
    if (r->state == PS_RSEC_FOLLOWING) {
        ps__rcore_set_state(r, PS_RSEC_SEALED);
    }
    r->sealed_epoch = sl->new_epoch;
    r->seal_io = ++node->next_io;
    r->seal_from = ev->peer;
    struct rt_repl_action act = {
        .kind = RT_REPL_ACT_WRITE, .io_id = r->seal_io, .range_id = r->id};
    act.msg.kind = RT_REPL_MSG_SEAL;
    act.msg.u.seal = *sl;
    rt_repl_actions_add(out, &act);
    return 0;
}

/* The persist of sealed_epoch is durable: every append accepted before
 * it is too (FIFO writer), so applied is final for the old generation. */
static void ps__rcore_sealed(struct ps__rcore_range *r,
                             struct rt_repl_actions *out)
{
    r->seal_io = 0;
    ps__rcore_seal_resp(r->seal_from, r, r->id, r->sealed_epoch, 0, 0, out);
}

/* NONE -> ACTIVATING with the ISR of @a; streams what the members may
 * lack. cw is recomputed over the new ISR at once: with no other member
 * (an ISR of one, below min_insync, F4) no ack and no local write (refused)
 * would ever raise it, and reads wait for cw to reach their LSN. */
static void ps__rcore_activate(struct ps_rcore *node,
                               struct ps__rcore_range *r,
                               const uint64_t *isr,
                               size_t n_isr,
                               uint64_t now_ms,
                               struct rt_repl_actions *out)
{
    r->role = PS_RCORE_PRIMARY;
    r->state = PS_RPRI_NONE;
    r->await_assign = false;
    r->restarted = false;
    /* My generation starts after what I hold (a no-op on a resumption). */
    ps__rcore_hist_note(r, r->primary_epoch, r->last_lsn + 1);
    ps__rcore_set_state(r, PS_RPRI_ACTIVATING);
    r->n_peers = 0;
    ps__rcore_set_peers(node, r, isr, n_isr, now_ms);
    for (size_t i = 0; i < r->n_peers; i++) {
        ps__rcore_pump(node, r, &r->peers[i], now_ms, out);
    }
    ps__rcore_commit(node, r, out);
    ps__rcore_activated(r);
}

static void ps__rcore_assign_resp(uint64_t peer,
                                  uint64_t range_id,
                                  uint64_t epoch,
                                  int32_t code,
                                  struct rt_repl_actions *out)
{
    struct rt_repl_action act = {.kind = RT_REPL_ACT_SEND, .peer = peer};
    act.msg.kind = RT_REPL_MSG_ASSIGN_RESP;
    act.msg.u.assign_resp = (struct rt_repl_assign_resp){
        .range_id = range_id, .epoch = epoch, .code = code};
    rt_repl_actions_add(out, &act);
}

/* A primary that stops being one: DEPOSED (held writes answered), then a
 * secondary that follows @c's primary. */
static void ps__rcore_step_down(struct ps__rcore_range *r,
                                struct rt_repl_actions *out)
{
    if (r->state != PS_RPRI_DEPOSED) {
        ps__rcore_depose(r, out);
    }
    ps__rcore_set_state(r, PS_RPRI_NONE);
    r->await_assign = false;
    r->restarted = false;
    r->role = PS_RCORE_SECONDARY;
    r->state = PS_RSEC_NONE;
    r->n_peers = 0;
    r->n_lpeers = 0;
    ps__rcore_set_state(r, PS_RSEC_FOLLOWING);
    /* What it buffered as primary is above no commit it can trust. */
    ps__rcore_trim_committed(r);
}

static void ps__rcore_drop(struct ps_rcore *node, struct ps__rcore_range *r)
{
    for (size_t i = 0; i < node->n_ranges; i++) {
        if (node->ranges[i] == r) {
            node->ranges[i] = node->ranges[--node->n_ranges];
            break;
        }
    }
    ps__rcore_range_free(r);
}

/* An assignment of a range I hold (§3.1, §3.2). */
static int ps__rcore_assign_msg(struct ps_rcore *node,
                                const struct rt_repl_event *ev,
                                struct rt_repl_actions *out)
{
    const struct rt_repl_conf *c = &ev->msg->u.assign;
    uint64_t self = node->cfg.self_id;
    struct ps__rcore_range *r = ps__rcore_find(node, c->range_id);
    if (r == NULL) {
        ps__rcore_assign_resp(ev->peer, c->range_id, c->epoch, RT_ENOTFOUND,
                              out);
        return 0;
    }
    if (c->epoch < r->epoch || c->epoch < r->sealed_epoch ||
        c->n_isr > PS_RCORE_MAX_REPLICAS) {
        ps__rcore_assign_resp(ev->peer, r->id, c->epoch, RT_ESTALE, out);
        return 0;
    }
    bool in_isr = rt_repl_conf_in_isr(c, self);
    bool member = in_isr || rt_repl_conf_role(c, self) != RT_REPL_ROLE_NONE;
    if (c->primary_id == self) {
        if (r->restarted && c->n_isr > 1 &&
            r->primary_epoch == c->primary_epoch) {
            /* Not resumed: the master fails me over (I am a candidate).
             * The epoch is taken so that my reports name the current one. */
            r->epoch = c->epoch;
            ps__rcore_assign_resp(ev->peer, r->id, c->epoch, RT_ENOTPRIMARY,
                                  out);
            return 0;
        }
        if (r->role == PS_RCORE_PRIMARY && r->state != PS_RPRI_DEPOSED &&
            r->primary_epoch == c->primary_epoch) {
            /* Same generation: a new ISR (or a cancel seen in time), or
             * the assignment a restarted primary waits for. */
            r->await_assign = false;
            r->epoch = c->epoch;
            ps__rcore_set_peers(node, r, c->isr, c->n_isr, ev->now_ms);
            for (size_t i = 0; i < r->n_peers; i++) {
                ps__rcore_pump(node, r, &r->peers[i], ev->now_ms, out);
            }
            ps__rcore_trim(r);
            ps__rcore_commit(node, r, out);
            ps__rcore_activated(r);
        } else if (r->role == PS_RCORE_PRIMARY && r->state == PS_RPRI_FROZEN) {
            /* A transfer that ended as a failover choosing me again (§9.3:
             * I held the highest LSN): a new generation of mine. */
            ps__rcore_depose(r, out);
            ps__rcore_set_state(r, PS_RPRI_NONE);
            r->epoch = c->epoch;
            r->primary_epoch = c->primary_epoch;
            ps__rcore_activate(node, r, c->isr, c->n_isr, ev->now_ms, out);
        } else if (r->role == PS_RCORE_PRIMARY &&
                   r->primary_epoch == c->primary_epoch) {
            /* DEPOSED by a seal of a failover that was then cancelled. */
            r->await_assign = false;
            r->epoch = c->epoch;
            ps__rcore_set_state(r, PS_RPRI_NONE);
            ps__rcore_activate(node, r, c->isr, c->n_isr, ev->now_ms, out);
        } else if (r->role == PS_RCORE_SECONDARY &&
                   r->state == PS_RSEC_SEALED && r->seal_io == 0 &&
                   r->applied_lsn == r->last_lsn &&
                   c->epoch == r->sealed_epoch) {
            /* (Nothing of the old generation may still be in the writer:
             * the master resends the assignment until it is taken.) */
            /* Promoted: SEALED -> NONE, primary ACTIVATING at the epoch. */
            ps__rcore_set_state(r, PS_RSEC_NONE);
            r->epoch = c->epoch;
            r->primary_id = self;
            r->primary_epoch = c->primary_epoch;
            ps__rcore_activate(node, r, c->isr, c->n_isr, ev->now_ms, out);
        } else if (!(r->role == PS_RCORE_PRIMARY && r->epoch == c->epoch)) {
            ps__rcore_assign_resp(ev->peer, r->id, c->epoch, RT_EINVAL, out);
            return 0;
        }
    } else if (member) {
        r->restarted = false; /* another primary: nothing to resume */
        if (r->role == PS_RCORE_PRIMARY) {
            ps__rcore_step_down(r, out);
        } else if (r->role == PS_RCORE_SECONDARY &&
                   r->state == PS_RSEC_SEALED && r->seal_io == 0) {
            ps__rcore_set_state(r, PS_RSEC_FOLLOWING);
        }
        r->epoch = c->epoch;
        r->primary_id = c->primary_id;
        r->primary_epoch = c->primary_epoch;
    } else {
        if (r->role == PS_RCORE_PRIMARY && r->state != PS_RPRI_DEPOSED) {
            ps__rcore_depose(r, out);
        }
        ps__rcore_drop(node, r);
        r = NULL;
    }
    if (r != NULL && r->role == PS_RCORE_PRIMARY &&
        r->state != PS_RPRI_DEPOSED) {
        ps__rcore_lrn_sync(node, r, c, ev->now_ms, out);
    }
    ps__rcore_assign_resp(ev->peer, c->range_id, c->epoch, 0, out);
    return 0;
}

/* A local group durable after the range stopped serving (deposed, or a
 * secondary now): it is applied here, and its writes' outcome is unknown
 * (the new generation may not have it). */
static int ps__rcore_local_late(struct ps__rcore_range *r,
                                const struct rt_repl_event *ev,
                                struct rt_repl_actions *out)
{
    if (r->role == PS_RCORE_SECONDARY && ev->lsn == r->applied_lsn + 1 &&
        ev->lsn <= r->last_lsn + 1) {
        /* My own late group took this LSN (shipped at its GROUP, or my
         * new primary's append was accepted at it first): whether my copy
         * still matches the new primary's sequence is not known, so it is
         * treated as divergent (§3.2, §7.3: undone by key or copied). */
        r->applied_lsn = ev->lsn;
        if (ev->lsn > r->last_lsn) {
            r->last_lsn = ev->lsn;
        }
        if (r->state != PS_RSEC_DIVERGED) {
            ps__rcore_set_state(r, PS_RSEC_DIVERGED);
        }
        for (size_t i = 0; i < ev->n_req_ids; i++) {
            struct rt_repl_action act = {.kind = RT_REPL_ACT_REPLY,
                                         .req_id = ev->req_ids[i],
                                         .code = RT_ETIMEDOUT};
            rt_repl_actions_add(out, &act);
        }
        return 0;
    }
    if (r->role == PS_RCORE_PRIMARY && ev->lsn == r->applied_lsn + 1 &&
        ev->lsn <= r->last_lsn) {
        /* Shipped (and buffered) at its GROUP while I still served. */
        r->applied_lsn = ev->lsn;
    } else if (ev->lsn != r->applied_lsn + 1 || ev->lsn != r->last_lsn + 1) {
        return RT_EINVAL;
    } else {
        r->applied_lsn = r->last_lsn = ev->lsn;
        ps__rcore_buffer(r, ev->lsn, ev->records, ev->records_len);
    }
    for (size_t i = 0; i < ev->n_req_ids; i++) {
        struct rt_repl_action act = {.kind = RT_REPL_ACT_REPLY,
                                     .req_id = ev->req_ids[i],
                                     .code = RT_ETIMEDOUT};
        rt_repl_actions_add(out, &act);
    }
    return 0;
}

int ps_rcore_load(struct ps_rcore *node,
                  const struct ps_rcore_durable *d,
                  uint64_t now_ms,
                  struct rt_repl_actions *out)
{
    if (ps__rcore_find(node, d->range_id) != NULL) {
        return RT_EEXIST;
    }
    if ((d->role != PS_RCORE_PRIMARY && d->role != PS_RCORE_SECONDARY &&
         (d->role != PS_RCORE_LEARNER || d->applied_lsn != 0)) ||
        d->n_isr > PS_RCORE_MAX_REPLICAS || d->commit_lsn > d->applied_lsn ||
        d->n_groups != d->applied_lsn - d->commit_lsn) {
        return RT_EINVAL;
    }
    for (size_t i = 0; i < d->n_groups; i++) {
        if (d->groups[i].lsn != d->commit_lsn + 1 + i) {
            return RT_EINVAL;
        }
    }
    bool self_in = false, primary_in = false;
    for (size_t i = 0; i < d->n_isr; i++) {
        self_in |= d->isr[i] == node->cfg.self_id;
        primary_in |= d->isr[i] == d->primary_id;
    }
    if (!primary_in || (d->role == PS_RCORE_PRIMARY &&
                        (!self_in || d->primary_id != node->cfg.self_id))) {
        return RT_EINVAL;
    }
    if (now_ms > node->started_ms) {
        node->started_ms = now_ms;
    }
    struct ps__rcore_range *r = rt_xcalloc(1, sizeof(*r));
    r->id = d->range_id;
    r->epoch = d->epoch;
    r->primary_id = d->primary_id;
    r->primary_epoch = d->primary_epoch;
    r->sealed_epoch = d->sealed_epoch;
    r->applied_lsn = r->last_lsn = d->applied_lsn;
    r->commit_lsn = d->commit_lsn;
    r->buf_first = d->commit_lsn + 1;
    for (size_t i = 0; i < d->n_groups; i++) {
        ps__rcore_buffer(r, d->groups[i].lsn, d->groups[i].records,
                         d->groups[i].len);
    }
    if (node->n_ranges == node->cap_ranges) {
        node->cap_ranges = node->cap_ranges ? 2 * node->cap_ranges : 8;
        node->ranges =
            rt_xrealloc(node->ranges, node->cap_ranges * sizeof(*node->ranges));
    }
    node->ranges[node->n_ranges++] = r;
    if (d->role == PS_RCORE_PRIMARY) {
        /* §10.1: nothing as primary before an assignment confirms it. */
        r->role = PS_RCORE_PRIMARY;
        ps__rcore_set_state(r, PS_RPRI_ACTIVATING);
        ps__rcore_set_peers(node, r, d->isr, d->n_isr, now_ms);
        r->await_assign = true;
        r->restarted =
            d->n_isr > 1 && node->cfg.mutation != PS_RCORE_MUT_RESUME_RESTARTED;
    } else if (d->role == PS_RCORE_LEARNER) {
        /* §3.3: a copy cut short by the restart is no copy. */
        r->role = PS_RCORE_LEARNER;
    } else {
        r->role = PS_RCORE_SECONDARY;
        ps__rcore_set_state(r, PS_RSEC_FOLLOWING);
        if (d->sealed_epoch > d->epoch) {
            ps__rcore_set_state(r, PS_RSEC_SEALED);
        }
    }
    ps__rcore_arm(node, now_ms, out);
    return 0;
}

/* Assignments after the first */

int ps_rcore_update(struct ps_rcore *node,
                    const struct ps_rcore_assignment *a,
                    uint64_t now_ms,
                    struct rt_repl_actions *out)
{
    struct ps__rcore_range *r = ps__rcore_find(node, a->range_id);
    if (r == NULL) {
        return RT_ENOTFOUND;
    }
    if (a->epoch <= r->epoch) {
        return RT_ESTALE;
    }
    if (ps__rcore_check(node, a) != 0 || a->primary_id != r->primary_id) {
        return RT_EINVAL;
    }
    r->epoch = a->epoch;
    if (r->role != PS_RCORE_PRIMARY || r->state == PS_RPRI_DEPOSED) {
        return 0;
    }
    ps__rcore_set_peers(node, r, a->isr, a->n_isr, now_ms);
    for (size_t i = 0; i < r->n_peers; i++) {
        ps__rcore_pump(node, r, &r->peers[i], now_ms, out);
    }
    ps__rcore_trim(r);
    ps__rcore_commit(node, r, out);
    ps__rcore_arm(node, now_ms, out);
    return 0;
}

int ps_rcore_forget(struct ps_rcore *node,
                    uint64_t range_id,
                    struct rt_repl_actions *out)
{
    for (size_t i = 0; i < node->n_ranges; i++) {
        struct ps__rcore_range *r = node->ranges[i];
        if (r->id != range_id) {
            continue;
        }
        if (r->role == PS_RCORE_PRIMARY && r->state != PS_RPRI_DEPOSED) {
            ps__rcore_depose(r, out);
        }
        ps__rcore_range_free(r);
        node->ranges[i] = node->ranges[--node->n_ranges];
        return 0;
    }
    return RT_ENOTFOUND;
}

/* A connection to @ev->peer came up: whatever was in flight on the old
 * one is lost, so every stream to it restarts from acked + 1 at once
 * instead of at the next resend tick. */
static int ps__rcore_conn(struct ps_rcore *node,
                          const struct rt_repl_event *ev,
                          struct rt_repl_actions *out)
{
    for (size_t i = 0; i < node->n_ranges; i++) {
        struct ps__rcore_range *r = node->ranges[i];
        if (r->role != PS_RCORE_PRIMARY || r->state == PS_RPRI_DEPOSED) {
            continue;
        }
        ps__rcore_lrn_conn(node, r, ev, out);
        for (size_t j = 0; j < r->n_peers; j++) {
            struct ps__rcore_peer *p = &r->peers[j];
            if (p->id != ev->peer) {
                continue;
            }
            if (!ev->up) {
                if (!p->down) {
                    p->down = true;
                    p->down_ms = ev->now_ms;
                }
                continue;
            }
            p->down = false;
            p->next = p->acked + 1;
            p->rewound_to = 0;
            ps__rcore_pump(node, r, p, ev->now_ms, out);
        }
    }
    return 0;
}

/* Learners: catch-up of replicas outside the ISR (§3.3, §7.3, §8.1)
 *
 * Primary side, per replica of the set outside the ISR (an lpeer): PROBE
 * -> (plain catch-up: TAIL from its applied + 1) or (COPY: a READ action
 * runs a full copy at a snapshot LSN s >= the position kept for it; its
 * READ_DONE starts the stream at s + 1: TAIL) -> joining (ISR_CHANGE{add}
 * sent once its ack reached cw and it lags at most cfg.join_lag groups;
 * counted for cw from then) -> an ISR member, at the assignment that names
 * it. Anything that goes wrong (a NACK, a failed copy, more than
 * cfg.learn_window groups behind) goes back to PROBE.
 * Replica side: PROBE answered with my ReplicaState; BEGIN turns me into
 * a LEARNER (CLEARING: WRITE persists LEARNING and clears my keys, then
 * COPYING); the end of the copy (SNAP_END: WRITE applies the last chunk
 * with applied = s) makes me a FOLLOWING secondary outside the ISR that
 * takes appends from s + 1. */

static const char *const ps__rlp_names[] = {"probe", "copy", "tail"};

/* Notes that group @lsn was made by generation @gen (0: unknown, which
 * forgets the history: every later catch-up is a full copy, until a copy
 * brings the sender's history). */
static void ps__rcore_hist_note(struct ps__rcore_range *r,
                                uint64_t gen,
                                uint64_t lsn)
{
    if (gen == 0) {
        r->n_hist = 0;
        return;
    }
    if (r->n_hist > 0 && r->hist[r->n_hist - 1].epoch == gen) {
        return;
    }
    if (r->n_hist == 0 && lsn != 1) {
        /* Unknown stays unknown: an entry starting here would claim that
         * @gen began here, and agree with another replica's such entry
         * although their earlier groups may differ. */
        return;
    }
    if (r->n_hist == RT_REPL_MAX_HISTORY) {
        memmove(r->hist, r->hist + 1, (r->n_hist - 1) * sizeof(*r->hist));
        r->n_hist--;
    }
    r->hist[r->n_hist++] = (struct rt_repl_epoch_start){gen, lsn};
}

/* The entry of @h[@n] that LSN @lsn belongs to (NULL: unknown). */
static const struct rt_repl_epoch_start *
ps__rcore_hist_at(const struct rt_repl_epoch_start *h, size_t n, uint64_t lsn)
{
    const struct rt_repl_epoch_start *at = NULL;
    for (size_t i = 0; i < n && h[i].first_lsn <= lsn; i++) {
        at = &h[i];
    }
    return at;
}

/* §7.3 with D = applied: the replica's sequence up to its applied LSN is
 * a prefix of mine iff the generation of its applied LSN began at the
 * same LSN in both histories and its applied LSN is not past that
 * generation's end in mine. Unknown histories never agree. */
static bool ps__rcore_agrees(const struct ps__rcore_range *r,
                             const struct rt_repl_replica_state *rs)
{
    if (rs->state != RT_REPL_COPY_OK || rs->n_history == 0 ||
        rs->n_history > RT_REPL_MAX_HISTORY || r->n_hist == 0 ||
        rs->applied_lsn > r->last_lsn) {
        return false;
    }
    const struct rt_repl_epoch_start *g =
        ps__rcore_hist_at(rs->history, rs->n_history, rs->applied_lsn);
    if (g == NULL) {
        return false;
    }
    for (size_t i = 0; i < r->n_hist; i++) {
        if (r->hist[i].epoch != g->epoch) {
            continue;
        }
        uint64_t end =
            i + 1 < r->n_hist ? r->hist[i + 1].first_lsn - 1 : r->last_lsn;
        return r->hist[i].first_lsn == g->first_lsn && rs->applied_lsn <= end;
    }
    return false;
}

/* §7.3: the end D of the prefix the replica's sequence shares with mine
 * (0: none known): for the newest generation of its history that began at
 * the same LSN in mine, the lower of that generation's ends in the two.
 * Up to D one primary of one generation made every LSN in both. */
static uint64_t ps__rcore_agreed(const struct ps__rcore_range *r,
                                 const struct rt_repl_replica_state *rs)
{
    if ((rs->state != RT_REPL_COPY_OK && rs->state != RT_REPL_COPY_DIVERGED) ||
        rs->n_history > RT_REPL_MAX_HISTORY) {
        return 0;
    }
    for (size_t i = rs->n_history; i-- > 0;) {
        const struct rt_repl_epoch_start *e = &rs->history[i];
        uint64_t end_r = i + 1 < rs->n_history
                             ? rs->history[i + 1].first_lsn - 1
                             : rs->applied_lsn;
        for (size_t j = 0; j < r->n_hist; j++) {
            if (r->hist[j].epoch != e->epoch) {
                continue;
            }
            if (r->hist[j].first_lsn != e->first_lsn) {
                return 0;
            }
            uint64_t end_q =
                j + 1 < r->n_hist ? r->hist[j + 1].first_lsn - 1 : r->last_lsn;
            return end_r < end_q ? end_r : end_q;
        }
    }
    return 0;
}

static struct ps__rcore_lpeer *ps__rcore_lpeer(struct ps__rcore_range *r,
                                               uint64_t id)
{
    for (size_t i = 0; i < r->n_lpeers; i++) {
        if (r->lpeers[i].s.id == id) {
            return &r->lpeers[i];
        }
    }
    return NULL;
}

static uint64_t ps__rcore_learn_window(const struct ps_rcore *node)
{
    return node->cfg.learn_window ? node->cfg.learn_window
                                  : PS_RCORE_LEARN_WINDOW;
}

/* (Again) PROBE: REPL_PROBE to the replica; its stream and any copy of
 * it are forgotten (a copy's late READ_DONE no longer matches). */
static void ps__rcore_lrn_probe(struct ps__rcore_range *r,
                                struct ps__rcore_lpeer *lp,
                                uint64_t now_ms,
                                bool send,
                                struct rt_repl_actions *out)
{
    lp->state = PS__RLP_PROBE;
    lp->joining = false;
    lp->io = 0;
    lp->probe_ms = now_ms;
    if (!send) {
        return;
    }
    struct rt_repl_action act = {.kind = RT_REPL_ACT_SEND, .peer = lp->s.id};
    act.msg.kind = RT_REPL_MSG_PROBE;
    act.msg.u.probe =
        (struct rt_repl_probe){.range_id = r->id, .epoch = r->epoch};
    rt_repl_actions_add(out, &act);
}

static void ps__rcore_lrn_add(struct ps_rcore *node,
                              struct ps__rcore_range *r,
                              uint64_t id,
                              uint64_t now_ms,
                              struct rt_repl_actions *out)
{
    if (id == node->cfg.self_id || ps__rcore_lpeer(r, id) != NULL ||
        r->n_lpeers == PS_RCORE_MAX_REPLICAS) {
        return;
    }
    struct ps__rcore_lpeer *lp = &r->lpeers[r->n_lpeers++];
    *lp = (struct ps__rcore_lpeer){.s = {.id = id, .progress_ms = now_ms}};
    ps__rcore_lrn_probe(r, lp, now_ms, true, out);
}

/* ISR member @p left the ISR by an assignment of my generation: if the
 * set keeps it (ps__rcore_lrn_sync drops it otherwise), it is probed at
 * the next tick, and my buffer keeps its groups above its last ack
 * meanwhile (ps__rcore_lrn_floor): back soon, it rejoins by a plain
 * catch-up. */
static void ps__rcore_lrn_left(const struct ps_rcore *node,
                               struct ps__rcore_range *r,
                               const struct ps__rcore_peer *p)
{
    if (ps__rcore_lpeer(r, p->id) != NULL ||
        r->n_lpeers == PS_RCORE_MAX_REPLICAS) {
        return;
    }
    struct ps__rcore_lpeer *lp = &r->lpeers[r->n_lpeers++];
    *lp = (struct ps__rcore_lpeer){
        .s = {.id = p->id, .acked = p->acked, .progress_ms = 0},
        .state = PS__RLP_PROBE,
        .fresh = true,
        .hold = p->acked + 1 >= r->buf_first,
        .held_to = p->acked,
        .window = node->cfg.window_bytes ? node->cfg.window_bytes
                                         : PS_RCORE_WINDOW_BYTES,
    };
}

/* The lowest LSN my buffer must keep, from @low: also every held
 * replica's last ack, while the groups above it total at most its window
 * (one that passes it is let go: a dead peer pins no more memory than
 * that, and its catch-up will be a copy). */
static uint64_t ps__rcore_lrn_floor(struct ps__rcore_range *r, uint64_t low)
{
    for (size_t i = 0; i < r->n_lpeers; i++) {
        struct ps__rcore_lpeer *lp = &r->lpeers[i];
        if (!lp->hold) {
            continue;
        }
        if (lp->state != PS__RLP_PROBE || lp->s.acked + 1 < r->buf_first) {
            lp->hold = false;
            continue;
        }
        uint64_t from = lp->held_to > lp->s.acked ? lp->held_to : lp->s.acked;
        for (uint64_t l = from + 1; l <= r->last_lsn; l++) {
            lp->held_bytes += ps__rcore_group(r, l)->len;
        }
        lp->held_to = r->last_lsn;
        if (lp->held_bytes > lp->window) {
            lp->hold = false;
            continue;
        }
        low = lp->s.acked < low ? lp->s.acked : low;
    }
    return low;
}

/* TAIL from @from + 1: the replica holds my sequence up to @from. */
static void ps__rcore_lrn_tail(struct ps_rcore *node,
                               struct ps__rcore_range *r,
                               struct ps__rcore_lpeer *lp,
                               uint64_t from,
                               uint64_t now_ms,
                               struct rt_repl_actions *out)
{
    lp->state = PS__RLP_TAIL;
    lp->io = 0;
    lp->s.acked = from;
    lp->s.next = from + 1;
    lp->s.rewound_to = 0;
    lp->s.progress_ms = now_ms;
    ps__rcore_pump(node, r, &lp->s, now_ms, out);
    ps__rcore_trim(r);
}

/* §3.3 TAILING -> READY: the first streamed replica whose ack reached cw
 * and lags at most cfg.join_lag is proposed for the ISR, one ISR change
 * per range in flight; it counts for cw from now. */
static void ps__rcore_lrn_join(struct ps_rcore *node,
                               struct ps__rcore_range *r,
                               uint64_t now_ms,
                               struct rt_repl_actions *out)
{
    if (r->state != PS_RPRI_SERVING ||
        (r->isr_inflight && r->isr_epoch == r->epoch) ||
        now_ms < r->isr_not_before) {
        return;
    }
    uint64_t lag = node->cfg.join_lag ? node->cfg.join_lag : PS_RCORE_JOIN_LAG;
    for (size_t i = 0; i < r->n_lpeers; i++) {
        struct ps__rcore_lpeer *lp = &r->lpeers[i];
        bool early = node->cfg.mutation == PS_RCORE_MUT_LEARNER_EARLY &&
                     lp->state == PS__RLP_COPY; /* the known-bad core */
        /* A join already counted is asked again (its last answer was no
         * proof either way). */
        if (!lp->joining && !(early || (lp->state == PS__RLP_TAIL &&
                                        lp->s.acked >= r->commit_lsn &&
                                        lp->s.acked + lag >= r->last_lsn))) {
            continue;
        }
        struct rt_repl_action act = {.kind = RT_REPL_ACT_SEND,
                                     .peer = node->cfg.master_id};
        act.msg.kind = RT_REPL_MSG_ISR_CHANGE;
        act.msg.u.isr_change = (struct rt_repl_isr_change){
            .range_id = r->id, .epoch = r->epoch, .n_add = 1};
        act.msg.u.isr_change.add[0] = lp->s.id;
        rt_repl_actions_add(out, &act);
        r->isr_inflight = true;
        r->isr_epoch = r->epoch;
        lp->joining = true;
        ps__rcore_commit(node, r, out);
        return;
    }
}

/* My ISR_CHANGE was refused. RT_EBUSY (a change in flight: maybe this
 * very add, sent twice) and RT_ESTALE (the range moved past my epoch:
 * maybe by this add) are no proof that it was not committed: the
 * replica keeps counting for cw, and the add is asked again, until an
 * assignment says whether it is in the ISR. Any other refusal is
 * final at my epoch: the join is over, and that replica goes last, so
 * that the next join asks for another one first (the master may take
 * only a learner it is adding, say). */
static void ps__rcore_lrn_refused(struct ps__rcore_range *r, int32_t code)
{
    if (code == RT_EBUSY || code == RT_ESTALE) {
        return;
    }
    for (size_t i = 0; i < r->n_lpeers; i++) {
        if (!r->lpeers[i].joining) {
            continue;
        }
        struct ps__rcore_lpeer lp = r->lpeers[i];
        lp.joining = false;
        memmove(&r->lpeers[i], &r->lpeers[i + 1],
                (r->n_lpeers - i - 1) * sizeof(lp));
        r->lpeers[r->n_lpeers - 1] = lp;
        return;
    }
}

/* A copy of @r to @peer (the READ action @io, BEGIN with my history):
 * FULL, or KEYED from @from_lsn. */
static void ps__rcore_copy_start(const struct ps__rcore_range *r,
                                 uint64_t peer,
                                 uint64_t io,
                                 uint32_t mode,
                                 uint64_t from_lsn,
                                 struct rt_repl_actions *out)
{
    struct rt_repl_action act = {.kind = RT_REPL_ACT_READ,
                                 .peer = peer,
                                 .io_id = io,
                                 .range_id = r->id,
                                 .lsn = r->last_lsn};
    act.msg.kind = RT_REPL_MSG_BEGIN;
    act.msg.u.begin = (struct rt_repl_begin){.range_id = r->id,
                                             .epoch = r->epoch,
                                             .mode = mode,
                                             .from_lsn = from_lsn,
                                             .copy_id = io};
    memcpy(act.msg.u.begin.history, r->hist, r->n_hist * sizeof(*r->hist));
    act.msg.u.begin.n_history = r->n_hist;
    rt_repl_actions_add(out, &act);
}

/* §7.3 on the replica's answer to my probe: plain catch-up from its
 * applied LSN if our histories agree there and my buffer still holds the
 * next group, else a full copy (READ action) at a snapshot LSN >= my last
 * LSN, whose groups above that are kept for it meanwhile. */
static int ps__rcore_lrn_probed(struct ps_rcore *node,
                                struct ps__rcore_range *r,
                                const struct rt_repl_event *ev,
                                struct rt_repl_actions *out)
{
    const struct rt_repl_replica_state *rs = &ev->msg->u.probe_resp;
    struct ps__rcore_lpeer *lp = ps__rcore_lpeer(r, ev->peer);
    if (lp == NULL || lp->state != PS__RLP_PROBE ||
        r->state == PS_RPRI_DEPOSED || r->await_assign) {
        return 0; /* not (or no longer) asked */
    }
    if (rs->code != 0) {
        ps__rcore_lrn_probe(r, lp, ev->now_ms, false, out);
        return 0; /* asked again after PS_RCORE_PROBE_TICKS */
    }
    lp->hold = false; /* it is streamed or copied from here on */
    if (ps__rcore_agrees(r, rs) && rs->applied_lsn + 1 >= r->buf_first) {
        node->catchups[PS_RCORE_CATCHUP_TAIL]++;
        rt_log(RT_LOG_INFO,
               "range %" PRIu64 ": server %" PRIu64
               ": plain catch-up from LSN %" PRIu64 " (my last %" PRIu64 ")",
               r->id, lp->s.id, rs->applied_lsn, r->last_lsn);
        ps__rcore_lrn_tail(node, r, lp, rs->applied_lsn, ev->now_ms, out);
        ps__rcore_lrn_join(node, r, ev->now_ms, out);
        return 0;
    }
    /* §7.3: an agreeing replica the buffer no longer reaches needs only
     * the keys changed since its applied LSN (the glue copies in full if
     * its key log does not reach back that far); one with a suffix I
     * never had (D < its applied) also those of its suffix, which it
     * names from its own key log when it accepts (else refuses: then a
     * full copy). */
    uint64_t from =
        ps__rcore_agrees(r, rs) ? rs->applied_lsn : ps__rcore_agreed(r, rs);
    bool keyed = !lp->no_keyed && from > 0;
    node->catchups[keyed ? PS_RCORE_CATCHUP_KEYED : PS_RCORE_CATCHUP_FULL]++;
    lp->state = PS__RLP_COPY;
    lp->io = ++node->next_io;
    lp->s.acked = r->last_lsn; /* kept from here: s >= it */
    lp->s.next = 0;
    lp->s.progress_ms = ev->now_ms;
    ps__rcore_copy_start(r, lp->s.id, lp->io,
                         keyed ? RT_REPL_BEGIN_KEYED : RT_REPL_BEGIN_FULL,
                         keyed ? from : 0, out);
    ps__rcore_lrn_join(node, r, ev->now_ms, out);
    return 0;
}

/* An ISR member NACKs below the position I took it to hold and below
 * my buffer (I restarted, and my `rp` groups are not kept): only a full
 * copy brings it level. It stays in the ISR meanwhile, counted at the
 * position assumed (cw never passes what it acks afterwards). */
static void ps__rcore_isr_copy(struct ps_rcore *node,
                               struct ps__rcore_range *r,
                               struct ps__rcore_peer *p,
                               struct rt_repl_actions *out)
{
    if (p->copy_io != 0 || r->state == PS_RPRI_DEPOSED || r->await_assign) {
        return;
    }
    for (size_t i = 0; i < r->n_peers; i++) {
        if (r->peers[i].copy_io != 0) {
            return; /* one at a time: the others keep their copies */
        }
    }
    p->copy_io = ++node->next_io;
    ps__rcore_copy_start(r, p->id, p->copy_io, RT_REPL_BEGIN_FULL, 0, out);
}

/* The full copy's READ_DONE: the replica holds my sequence up to s. */
static int ps__rcore_lrn_copied(struct ps_rcore *node,
                                const struct rt_repl_event *ev,
                                struct rt_repl_actions *out)
{
    struct ps__rcore_range *r = ps__rcore_find(node, ev->range_id);
    if (r == NULL || r->role != PS_RCORE_PRIMARY) {
        return 0; /* the range left: the copy no longer matters */
    }
    for (size_t i = 0; i < r->n_peers; i++) {
        struct ps__rcore_peer *p = &r->peers[i];
        if (p->copy_io == 0 || p->copy_io != ev->io_id) {
            continue;
        }
        p->copy_io = 0;
        p->below_ms = 0;
        if (ev->code == 0 && ev->lsn >= p->acked) {
            p->acked = ev->lsn;
            p->confirmed = true;
        }
        p->next = p->acked + 1;
        p->rewound_to = 0;
        p->progress_ms = ev->now_ms;
        ps__rcore_pump(node, r, p, ev->now_ms, out);
        ps__rcore_trim(r);
        ps__rcore_commit(node, r, out);
        ps__rcore_activated(r);
        return 0;
    }
    for (size_t i = 0; i < r->n_lpeers; i++) {
        struct ps__rcore_lpeer *lp = &r->lpeers[i];
        if (lp->state != PS__RLP_COPY || lp->io != ev->io_id) {
            continue;
        }
        if (ev->code != 0 || ev->lsn < lp->s.acked) {
            lp->no_keyed = true; /* whatever failed, a full copy next */
            ps__rcore_lrn_probe(r, lp, ev->now_ms, false, out);
        } else {
            ps__rcore_lrn_tail(node, r, lp, ev->lsn, ev->now_ms, out);
            ps__rcore_lrn_join(node, r, ev->now_ms, out);
        }
        return 0;
    }
    return 0;
}

/* An ack (or NACK) from a replica outside the ISR. */
static int ps__rcore_lrn_ack(struct ps_rcore *node,
                             struct ps__rcore_range *r,
                             const struct rt_repl_event *ev,
                             struct rt_repl_actions *out)
{
    const struct rt_repl_ack *ack = &ev->msg->u.ack;
    struct ps__rcore_lpeer *lp = ps__rcore_lpeer(r, ev->peer);
    if (lp == NULL) {
        return RT_EINVAL;
    }
    if (r->state == PS_RPRI_DEPOSED || r->await_assign ||
        lp->state != PS__RLP_TAIL) {
        return 0;
    }
    if (ack->code != 0 && ack->code != RT_ELSNGAP) {
        if (lp->joining) {
            /* The master may have committed it into the ISR already (it
             * may refuse my epoch because it heard of the new one
             * first): it counts until the master's answer or the
             * assignment says otherwise. */
            return 0;
        }
        /* It cannot take my stream (no copy any more, diverged, full):
         * find out again what it holds. */
        ps__rcore_lrn_probe(r, lp, ev->now_ms, false, out);
        return 0;
    }
    uint64_t top = lp->s.acked > r->last_lsn ? lp->s.acked : r->last_lsn;
    if (ack->applied_lsn > top) {
        return RT_EINVAL;
    }
    struct ps__rcore_peer *p = &lp->s;
    if (ack->applied_lsn > p->acked) {
        p->acked = ack->applied_lsn;
        p->progress_ms = ev->now_ms;
    }
    if (ack->code == RT_ELSNGAP && p->acked + 1 < p->next &&
        p->rewound_to != p->acked + 1) {
        p->next = p->acked + 1;
        p->rewound_to = p->acked + 1;
    }
    ps__rcore_pump(node, r, p, ev->now_ms, out);
    ps__rcore_trim(r);
    ps__rcore_commit(node, r, out);
    ps__rcore_lrn_join(node, r, ev->now_ms, out);
    return 0;
}

/* The resend tick: probes asked again, streams resent as for ISR members,
 * a replica past cfg.learn_window starts again. */
static void ps__rcore_lrn_tick(struct ps_rcore *node,
                               struct ps__rcore_range *r,
                               uint64_t now_ms,
                               struct rt_repl_actions *out)
{
    uint64_t win = ps__rcore_learn_window(node);
    for (size_t i = 0; i < r->n_lpeers; i++) {
        struct ps__rcore_lpeer *lp = &r->lpeers[i];
        struct ps__rcore_peer *p = &lp->s;
        if (lp->state == PS__RLP_PROBE) {
            if (now_ms - lp->probe_ms >=
                PS_RCORE_PROBE_TICKS * node->cfg.resend_ms) {
                ps__rcore_lrn_probe(r, lp, now_ms, true, out);
            }
            continue;
        }
        if (p->acked + win < r->last_lsn && !lp->joining) {
            ps__rcore_lrn_probe(r, lp, now_ms, true, out);
            ps__rcore_trim(r);
            continue;
        }
        if (lp->state == PS__RLP_TAIL && p->acked < r->last_lsn &&
            now_ms - p->progress_ms >= node->cfg.resend_ms) {
            p->next = p->acked + 1;
            p->rewound_to = 0;
            ps__rcore_pump(node, r, p, now_ms, out);
        }
    }
    ps__rcore_lrn_join(node, r, now_ms, out);
}

static void ps__rcore_lrn_conn(struct ps_rcore *node,
                               struct ps__rcore_range *r,
                               const struct rt_repl_event *ev,
                               struct rt_repl_actions *out)
{
    struct ps__rcore_lpeer *lp = ps__rcore_lpeer(r, ev->peer);
    if (lp == NULL || !ev->up) {
        return;
    }
    if (lp->state == PS__RLP_PROBE) {
        ps__rcore_lrn_probe(r, lp, ev->now_ms, true, out);
    } else if (lp->state == PS__RLP_TAIL) {
        lp->s.next = lp->s.acked + 1;
        lp->s.rewound_to = 0;
        ps__rcore_pump(node, r, &lp->s, ev->now_ms, out);
    }
}

/* An assignment of my primary range: a replica the ISR now names takes
 * its stream along (it was counted since its join); the others of the
 * set are caught up (new ones probed); a join not committed by it is
 * over (the master refuses an ISR_CHANGE of an older epoch). */
static void ps__rcore_lrn_sync(struct ps_rcore *node,
                               struct ps__rcore_range *r,
                               const struct rt_repl_conf *c,
                               uint64_t now_ms,
                               struct rt_repl_actions *out)
{
    for (size_t i = 0; i < r->n_lpeers;) {
        struct ps__rcore_lpeer *lp = &r->lpeers[i];
        bool keep = rt_repl_conf_role(c, lp->s.id) != RT_REPL_ROLE_NONE &&
                    !rt_repl_conf_in_isr(c, lp->s.id);
        for (size_t j = 0; j < r->n_peers; j++) {
            struct ps__rcore_peer *p = &r->peers[j];
            if (p->id == lp->s.id && lp->state == PS__RLP_TAIL) {
                if (lp->s.acked > p->acked) {
                    p->acked = lp->s.acked;
                    p->next = lp->s.next > p->acked ? lp->s.next : p->acked + 1;
                    p->progress_ms = now_ms;
                }
                p->confirmed = lp->s.acked >= p->acked;
            }
        }
        if (keep) {
            /* A join still in flight at this epoch (the same assignment
             * again) goes on; one of an older epoch was not committed. */
            lp->joining =
                lp->joining && r->isr_inflight && r->isr_epoch == r->epoch;
            i++;
        } else {
            *lp = r->lpeers[--r->n_lpeers];
        }
    }
    for (size_t i = 0; i < c->n_members; i++) {
        uint64_t id = c->members[i].server_id;
        if (c->members[i].role != RT_REPL_ROLE_NONE &&
            !rt_repl_conf_in_isr(c, id)) {
            struct ps__rcore_lpeer *lp = ps__rcore_lpeer(r, id);
            if (lp != NULL && lp->fresh) {
                /* It just left the ISR (ps__rcore_lrn_left). */
                lp->fresh = false;
                ps__rcore_lrn_probe(r, lp, now_ms, true, out);
            }
            ps__rcore_lrn_add(node, r, id, now_ms, out);
        }
    }
    for (size_t i = 0; i < r->n_peers; i++) {
        ps__rcore_pump(node, r, &r->peers[i], now_ms, out);
    }
    ps__rcore_trim(r);
    ps__rcore_commit(node, r, out);
    ps__rcore_activated(r);
}

/* Replica side */

static void ps__rcore_copy_resp(uint64_t peer,
                                uint64_t range_id,
                                uint64_t epoch,
                                int32_t code,
                                uint64_t lsn,
                                struct rt_repl_actions *out)
{
    struct rt_repl_action act = {.kind = RT_REPL_ACT_SEND, .peer = peer};
    act.msg.kind = RT_REPL_MSG_COPY_RESP;
    act.msg.u.copy_resp = (struct rt_repl_copy_resp){
        .range_id = range_id, .epoch = epoch, .code = code, .lsn = lsn};
    rt_repl_actions_add(out, &act);
}

/* REPL_PROBE: my ReplicaState (§3.3 NONE -> PROBED for a learner). */
static int ps__rcore_lrn_probe_in(struct ps__rcore_range *r,
                                  const struct rt_repl_event *ev,
                                  struct rt_repl_actions *out)
{
    const struct rt_repl_probe *pb = &ev->msg->u.probe;
    struct rt_repl_action act = {.kind = RT_REPL_ACT_SEND, .peer = ev->peer};
    act.msg.kind = RT_REPL_MSG_PROBE_RESP;
    struct rt_repl_replica_state *rs = &act.msg.u.probe_resp;
    rs->range_id = pb->range_id;
    if (r == NULL || pb->epoch < r->epoch ||
        (r->role == PS_RCORE_PRIMARY && r->state != PS_RPRI_DEPOSED)) {
        rs->code = RT_ESTALE;
        rs->epoch = r ? r->epoch : 0;
        rt_repl_actions_add(out, &act);
        return 0;
    }
    rs->epoch = r->epoch;
    if (r->last_lsn != r->applied_lsn || r->seal_io != 0 || r->copy_io != 0) {
        /* A write of mine is in flight: my answer would be stale at once. */
        rs->code = RT_EBUSY;
        rt_repl_actions_add(out, &act);
        return 0;
    }
    if (r->role == PS_RCORE_LEARNER) {
        if (r->state == PS_RLRN_NONE) {
            ps__rcore_set_state(r, PS_RLRN_PROBED);
        }
        rs->state = r->state == PS_RLRN_PROBED ? RT_REPL_COPY_NONE
                                               : RT_REPL_COPY_LEARNING;
    } else {
        rs->state =
            r->role == PS_RCORE_SECONDARY && r->state == PS_RSEC_DIVERGED
                ? RT_REPL_COPY_DIVERGED
                : RT_REPL_COPY_OK;
        rs->applied_lsn = r->applied_lsn;
        const struct rt_repl_epoch_start *g =
            ps__rcore_hist_at(r->hist, r->n_hist, r->applied_lsn);
        rs->applied_epoch = g ? g->epoch : 0;
        memcpy(rs->history, r->hist, r->n_hist * sizeof(*r->hist));
        rs->n_history = r->n_hist;
    }
    rt_repl_actions_add(out, &act);
    return 0;
}

/* REPL_BEGIN (§3.3 -> CLEARING): whatever I held of the range is given
 * up as a copy; the WRITE persists LEARNING and, for a FULL one, clears my
 * keys (a KEYED one keeps them: only the keys changed after its from_lsn
 * come, with those of my own LSNs above it). Refused (nothing changes):
 * RT_ESTALE for an older epoch or a serving primary, RT_EBUSY while a
 * write of mine for the range is in flight, RT_EINVAL for a KEYED one
 * unless I hold a copy at its from_lsn or past it. */
static int ps__rcore_lrn_begin(struct ps_rcore *node,
                               struct ps__rcore_range *r,
                               const struct rt_repl_event *ev,
                               struct rt_repl_actions *out)
{
    const struct rt_repl_begin *b = &ev->msg->u.begin;
    if (r != NULL && b->copy_id != 0 && b->copy_id == r->copy_id_seen &&
        b->epoch == r->copy_epoch && ev->peer == r->copy_from) {
        return 0; /* a duplicate of the copy I took (or finished) */
    }
    if (r == NULL || b->epoch < r->epoch ||
        (r->role == PS_RCORE_PRIMARY && r->state != PS_RPRI_DEPOSED)) {
        ps__rcore_copy_resp(ev->peer, b->range_id, b->epoch, RT_ESTALE, 0, out);
        return 0;
    }
    if (r->copy_io != 0 || r->seal_io != 0 || r->last_lsn != r->applied_lsn ||
        b->n_history > RT_REPL_MAX_HISTORY) {
        ps__rcore_copy_resp(
            ev->peer, r->id, b->epoch,
            b->n_history > RT_REPL_MAX_HISTORY ? RT_EINVAL : RT_EBUSY, 0, out);
        return 0;
    }
    if (b->mode == RT_REPL_BEGIN_KEYED &&
        (r->role == PS_RCORE_LEARNER || b->from_lsn > r->applied_lsn)) {
        /* Keyed: only the keys changed after @from_lsn come (and those
         * of my LSNs above it, which the glue names from my key log), so
         * I must hold a copy at that LSN or past it (not a copy cut
         * short): the sender probes again. */
        ps__rcore_copy_resp(ev->peer, r->id, b->epoch, RT_EINVAL, 0, out);
        return 0;
    }
    if (r->role == PS_RCORE_PRIMARY || r->role == PS_RCORE_SECONDARY) {
        ps__rcore_set_state(r, 0); /* DEPOSED / FOLLOWING, ... -> NONE */
        r->role = PS_RCORE_LEARNER;
        r->state = PS_RLRN_NONE;
    } else if (r->state != PS_RLRN_NONE) {
        ps__rcore_set_state(r, PS_RLRN_NONE);
    }
    ps__rcore_set_state(r, PS_RLRN_PROBED);
    ps__rcore_set_state(r, PS_RLRN_CLEARING);
    for (size_t g = 0; g < r->buf_n; g++) {
        free(r->buf[g].records);
    }
    r->buf_n = 0;
    r->n_peers = r->n_lpeers = 0;
    r->n_hist = 0;
    r->applied_lsn = r->last_lsn = r->commit_lsn = 0;
    r->held_head = r->held_n = 0;
    r->await_assign = false;
    /* Epoch and primary stay as assignments set them: the sender is only
     * this copy's (in the daemon, a per-range token). */
    r->copy_epoch = b->epoch;
    r->copy_from = ev->peer;
    r->copy_id_seen = b->copy_id;
    r->copy_io = ++node->next_io;
    struct rt_repl_action act = {
        .kind = RT_REPL_ACT_WRITE, .io_id = r->copy_io, .range_id = r->id};
    act.msg.kind = RT_REPL_MSG_BEGIN;
    act.msg.u.begin = *b;
    rt_repl_actions_add(out, &act);
    return 0;
}

/* The copy's last chunk (§3.3 COPYING): its WRITE applies it with
 * applied = (snap_epoch, snap_lsn). RT_EINVAL unless I am COPYING that
 * copy with nothing in flight. */
static int ps__rcore_lrn_end(struct ps_rcore *node,
                             struct ps__rcore_range *r,
                             const struct rt_repl_event *ev,
                             struct rt_repl_actions *out)
{
    const struct rt_repl_begin *b = &ev->msg->u.begin;
    if (r == NULL || r->role != PS_RCORE_LEARNER ||
        r->state != PS_RLRN_COPYING || r->copy_io != 0 ||
        b->epoch != r->copy_epoch || ev->peer != r->copy_from ||
        b->n_history > RT_REPL_MAX_HISTORY) {
        ps__rcore_copy_resp(
            ev->peer, b->range_id, b->epoch,
            r != NULL && b->epoch < r->epoch ? RT_ESTALE : RT_EINVAL,
            b->snap_lsn, out);
        return 0;
    }
    r->copy_lsn = b->snap_lsn;
    memcpy(r->copy_hist, b->history, b->n_history * sizeof(*b->history));
    r->n_copy_hist = b->n_history;
    r->copy_io = ++node->next_io;
    struct rt_repl_action act = {.kind = RT_REPL_ACT_WRITE,
                                 .io_id = r->copy_io,
                                 .range_id = r->id,
                                 .lsn = b->snap_lsn};
    act.msg.kind = RT_REPL_MSG_SNAP_END;
    act.msg.u.begin = *b;
    rt_repl_actions_add(out, &act);
    return 0;
}

/* A learner's WRITE is durable: the clear (CLEARING -> COPYING, BEGIN
 * answered) or the copy's end (COPYING -> TAILING: applied = s, and I
 * follow at once as a secondary outside the ISR). A local group of a
 * deposed primary that became a learner meanwhile: its writes' outcome
 * is unknown. */
static int ps__rcore_lrn_written(struct ps__rcore_range *r,
                                 const struct rt_repl_event *ev,
                                 struct rt_repl_actions *out)
{
    if (ev->io_id == 0 || ev->io_id != r->copy_io) {
        for (size_t i = 0; i < ev->n_req_ids; i++) {
            struct rt_repl_action act = {.kind = RT_REPL_ACT_REPLY,
                                         .req_id = ev->req_ids[i],
                                         .code = RT_ETIMEDOUT};
            rt_repl_actions_add(out, &act);
        }
        return ev->io_id == 0 ? 0 : RT_EINVAL;
    }
    r->copy_io = 0;
    if (r->state == PS_RLRN_CLEARING) {
        ps__rcore_set_state(r, PS_RLRN_COPYING);
        ps__rcore_copy_resp(r->copy_from, r->id, r->copy_epoch, 0, 0, out);
        return 0;
    }
    ps__rcore_set_state(r, PS_RLRN_TAILING);
    r->applied_lsn = r->last_lsn = r->copy_lsn;
    r->commit_lsn = 0;
    r->buf_first = r->copy_lsn + 1;
    memcpy(r->hist, r->copy_hist, r->n_copy_hist * sizeof(*r->hist));
    r->n_hist = r->n_copy_hist;
    r->heard_ms = ev->now_ms;
    ps__rcore_set_state(r, PS_RLRN_NONE);
    r->role = PS_RCORE_SECONDARY;
    r->state = PS_RSEC_NONE;
    ps__rcore_set_state(r, PS_RSEC_FOLLOWING);
    ps__rcore_copy_resp(r->copy_from, r->id, r->copy_epoch, 0, r->copy_lsn,
                        out);
    return 0;
}

static int ps__rcore_lrn_step(struct ps_rcore *node,
                              const struct rt_repl_event *ev,
                              struct rt_repl_actions *out)
{
    if (ev->kind == RT_REPL_EV_READ_DONE) {
        return ps__rcore_lrn_copied(node, ev, out);
    }
    if (ev->kind == RT_REPL_EV_DISK_DONE) {
        return ps__rcore_lrn_written(ps__rcore_find(node, ev->range_id), ev,
                                     out);
    }
    const struct rt_repl_msg *m = ev->msg;
    struct ps__rcore_range *r;
    switch (m->kind) {
        case RT_REPL_MSG_PROBE:
            return ps__rcore_lrn_probe_in(
                ps__rcore_find(node, m->u.probe.range_id), ev, out);
        case RT_REPL_MSG_PROBE_RESP:
            r = ps__rcore_find(node, m->u.probe_resp.range_id);
            if (r == NULL || r->role != PS_RCORE_PRIMARY) {
                return 0;
            }
            return ps__rcore_lrn_probed(node, r, ev, out);
        case RT_REPL_MSG_BEGIN:
            return ps__rcore_lrn_begin(
                node, ps__rcore_find(node, m->u.begin.range_id), ev, out);
        case RT_REPL_MSG_SNAP_END:
            return ps__rcore_lrn_end(
                node, ps__rcore_find(node, m->u.begin.range_id), ev, out);
        default:
            return RT_EINVAL;
    }
}

/* Step */

int ps_rcore_step(struct ps_rcore *node,
                  const struct rt_repl_event *ev,
                  struct rt_repl_actions *out)
{
    struct ps__rcore_range *r = ps__rcore_find(node, ev->range_id);
    int rc = RT_EINVAL;
    switch (ev->kind) {
        case RT_REPL_EV_MSG:
            if (ev->msg == NULL) {
                break;
            }
            if (ev->msg->kind == RT_REPL_MSG_APPEND) {
                rc = ps__rcore_append(
                    node, ps__rcore_find(node, ev->msg->u.append.range_id), ev,
                    out);
            } else if (ev->msg->kind == RT_REPL_MSG_ACK) {
                r = ps__rcore_find(node, ev->msg->u.ack.range_id);
                if (r != NULL && r->role == PS_RCORE_PRIMARY) {
                    rc = ps__rcore_ack(node, r, ev, out);
                }
            } else if (ev->msg->kind == RT_REPL_MSG_SEAL) {
                rc = ps__rcore_seal(node, ev, out);
            } else if (ev->msg->kind == RT_REPL_MSG_ASSIGN) {
                rc = ps__rcore_assign_msg(node, ev, out);
            } else if (ev->msg->kind == RT_REPL_MSG_ISR_RESP) {
                rc = ps__rcore_isr_resp(
                    node, ps__rcore_find(node, ev->msg->u.isr_resp.range_id),
                    ev);
            } else {
                rc = ps__rcore_lrn_step(node, ev, out);
            }
            break;
        case RT_REPL_EV_READ_DONE:
            rc = ps__rcore_lrn_step(node, ev, out);
            break;
        case RT_REPL_EV_DISK_DONE:
            /* A replica's WRITE echoes its io_id; a local group has none
             * (older callers left it 0 for replica writes too: an LSN the
             * secondary accepted tells those apart). */
            if (r == NULL) {
                break;
            }
            if ((ev->io_id != 0 && ev->io_id == r->copy_io) ||
                r->role == PS_RCORE_LEARNER) {
                rc = ps__rcore_lrn_step(node, ev, out);
            } else if (ev->io_id != 0 && ev->io_id == r->seal_io) {
                ps__rcore_sealed(r, out);
                rc = 0;
            } else if (r->role == PS_RCORE_PRIMARY &&
                       (r->state == PS_RPRI_SERVING ||
                        r->state == PS_RPRI_FROZEN) &&
                       ev->io_id == 0) {
                rc = ps__rcore_local_done(node, r, ev, out);
            } else if (r->role == PS_RCORE_SECONDARY &&
                       (ev->io_id != 0 ||
                        (ev->lsn <= r->last_lsn && ev->n_req_ids == 0))) {
                rc = ps__rcore_applied(node, r, ev, out);
            } else if (ev->io_id == 0) {
                rc = ps__rcore_local_late(r, ev, out);
            }
            break;
        case RT_REPL_EV_GROUP:
            if (r != NULL) {
                rc = ps__rcore_group_in(node, r, ev, out);
            }
            break;
        case RT_REPL_EV_TIMER:
            rc = ps__rcore_timer(node, ev, out);
            break;
        case RT_REPL_EV_CONN:
            rc = ps__rcore_conn(node, ev, out);
            break;
        case RT_REPL_EV_CLIENT_WRITE:
            if (ev->n_req_ids == 1 &&
                (r == NULL || r->role != PS_RCORE_PRIMARY ||
                 r->state != PS_RPRI_SERVING)) {
                struct rt_repl_action act = {.kind = RT_REPL_ACT_REPLY,
                                             .req_id = ev->req_ids[0],
                                             .code = RT_ENOTPRIMARY};
                rt_repl_actions_add(out, &act);
                rc = 0;
            } else if (ev->n_req_ids == 1) {
                rc = 0; /* admitted: the caller hands it to the writer */
            }
            break;
        default:
            break; /* not part of the write path yet */
    }
    ps__rcore_arm(node, ev->now_ms, out);
    return rc;
}

/* Inspection */

/* Transfers (§3.1 FROZEN, §4 TRANSFER_PRIMARY) */

int ps_rcore_freeze(struct ps_rcore *node,
                    uint64_t range_id,
                    uint64_t epoch,
                    uint64_t to)
{
    struct ps__rcore_range *r = ps__rcore_find(node, range_id);
    if (r == NULL || r->role != PS_RCORE_PRIMARY || r->epoch != epoch ||
        r->state == PS_RPRI_DEPOSED || r->await_assign) {
        return RT_ESTALE;
    }
    bool member = false;
    for (size_t i = 0; i < r->n_peers; i++) {
        member |= r->peers[i].id == to;
    }
    if (!member) {
        return RT_EINVAL;
    }
    if (r->state != PS_RPRI_SERVING) {
        return RT_EBUSY; /* frozen already, activating, or without lease */
    }
    ps__rcore_set_state(r, PS_RPRI_FROZEN);
    return 0;
}

int ps_rcore_unfreeze(struct ps_rcore *node, uint64_t range_id)
{
    struct ps__rcore_range *r = ps__rcore_find(node, range_id);
    if (r == NULL || r->role != PS_RCORE_PRIMARY ||
        r->state != PS_RPRI_FROZEN) {
        return RT_ENOTFOUND;
    }
    ps__rcore_set_state(r, PS_RPRI_SERVING);
    return 0;
}

int ps_rcore_peer_acked(const struct ps_rcore *node,
                        uint64_t range_id,
                        uint64_t peer,
                        uint64_t *acked)
{
    const struct ps__rcore_range *r = ps__rcore_find(node, range_id);
    if (r == NULL || r->role != PS_RCORE_PRIMARY) {
        return RT_ENOTFOUND;
    }
    for (size_t i = 0; i < r->n_peers; i++) {
        if (r->peers[i].id == peer) {
            *acked = r->peers[i].acked;
            return 0;
        }
    }
    return RT_ENOTFOUND;
}

int ps_rcore_set_silent(struct ps_rcore *node,
                        uint64_t range_id,
                        const uint64_t *ids,
                        size_t n)
{
    struct ps__rcore_range *r = ps__rcore_find(node, range_id);
    if (r == NULL || r->role != PS_RCORE_PRIMARY) {
        return RT_ENOTFOUND;
    }
    for (size_t i = 0; i < r->n_peers; i++) {
        r->peers[i].silent = false;
        for (size_t j = 0; j < n; j++) {
            r->peers[i].silent |= r->peers[i].id == ids[j];
        }
    }
    return 0;
}

int ps_rcore_set_history(struct ps_rcore *node,
                         uint64_t range_id,
                         const struct rt_repl_epoch_start *h,
                         size_t n)
{
    struct ps__rcore_range *r = ps__rcore_find(node, range_id);
    if (r == NULL) {
        return RT_ENOTFOUND;
    }
    if (n == 0 || n > RT_REPL_MAX_HISTORY ||
        h[n - 1].first_lsn > r->applied_lsn + 1) {
        return RT_EINVAL;
    }
    for (size_t i = 1; i < n; i++) {
        if (h[i].first_lsn <= h[i - 1].first_lsn ||
            h[i].epoch <= h[i - 1].epoch) {
            return RT_EINVAL;
        }
    }
    memcpy(r->hist, h, n * sizeof(*h));
    r->n_hist = n;
    return 0;
}

uint64_t ps_rcore_catchups(const struct ps_rcore *node,
                           enum ps_rcore_catchup kind)
{
    return kind < PS_RCORE_CATCHUP__NR ? node->catchups[kind] : 0;
}

int ps_rcore_range_get(const struct ps_rcore *node,
                       uint64_t range_id,
                       struct ps_rcore_range_info *out)
{
    const struct ps__rcore_range *r = ps__rcore_find(node, range_id);
    if (r == NULL) {
        return RT_ENOTFOUND;
    }
    *out = (struct ps_rcore_range_info){
        .role = r->role,
        .state = r->state,
        .epoch = r->epoch,
        .last_lsn = r->last_lsn,
        .applied_lsn = r->applied_lsn,
        .commit_lsn = r->commit_lsn,
        .n_held = r->held_n - r->held_head,
        .n_buffered = r->buf_n,
        .restarted = r->restarted,
        .primary_id = r->primary_id,
        .primary_epoch = r->primary_epoch,
        .sealed_epoch = r->sealed_epoch,
        .n_learners = r->role == PS_RCORE_PRIMARY ? r->n_lpeers : 0,
    };
    if (r->role == PS_RCORE_PRIMARY) {
        size_t n = 0;
        for (size_t i = 0; i < r->n_peers; i++, n++) {
            out->peer[n].id = r->peers[i].id;
            out->peer[n].acked = r->peers[i].acked;
        }
        out->n_isr_peers = r->n_peers;
        for (size_t i = 0; i < r->n_lpeers; i++, n++) {
            out->peer[n].id = r->lpeers[i].s.id;
            out->peer[n].acked = r->lpeers[i].s.acked;
        }
    }
    return 0;
}

int ps_rcore_learner_get(const struct ps_rcore *node,
                         uint64_t range_id,
                         uint64_t peer,
                         struct ps_rcore_learner_info *out)
{
    struct ps__rcore_range *r = ps__rcore_find(node, range_id);
    struct ps__rcore_lpeer *lp = r != NULL && r->role == PS_RCORE_PRIMARY
                                     ? ps__rcore_lpeer(r, peer)
                                     : NULL;
    if (lp == NULL) {
        return RT_ENOTFOUND;
    }
    *out = (struct ps_rcore_learner_info){.state = ps__rlp_names[lp->state],
                                          .joining = lp->joining,
                                          .acked = lp->s.acked,
                                          .copy_io = lp->io};
    return 0;
}

void ps_rcore_dump(const struct ps_rcore *node, FILE *f)
{
    for (size_t i = 0; i < node->n_ranges; i++) {
        const struct ps__rcore_range *r = node->ranges[i];
        fprintf(f,
                "node %" PRIu64 " range %" PRIu64 " %s/%s epoch %" PRIu64
                " last %" PRIu64 " applied %" PRIu64 " commit %" PRIu64
                " buffered %zu held %zu\n",
                node->cfg.self_id, r->id, ps_rcore_role_name(r->role),
                ps_rcore_state_name(r->role, r->state), r->epoch, r->last_lsn,
                r->applied_lsn, r->commit_lsn, r->buf_n,
                r->held_n - r->held_head);
        for (size_t j = 0; j < r->n_peers; j++) {
            const struct ps__rcore_peer *p = &r->peers[j];
            fprintf(f,
                    "  peer %" PRIu64 " acked %" PRIu64 " next %" PRIu64
                    " rewound_to %" PRIu64 " progress_ms %" PRIu64 "\n",
                    p->id, p->acked, p->next, p->rewound_to, p->progress_ms);
        }
        for (size_t j = 0; r->role == PS_RCORE_PRIMARY && j < r->n_lpeers;
             j++) {
            const struct ps__rcore_lpeer *lp = &r->lpeers[j];
            fprintf(f,
                    "  learner %" PRIu64 " %s%s acked %" PRIu64 " next %" PRIu64
                    "\n",
                    lp->s.id, ps__rlp_names[lp->state],
                    lp->joining ? " joining" : "", lp->s.acked, lp->s.next);
        }
    }
}
