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
};

struct ps__rcore_group
{
    uint64_t lsn;
    uint8_t *records;
    size_t len;
};

struct ps__rcore_held
{
    uint64_t req_id;
    uint64_t lsn;
};

struct ps__rcore_range
{
    uint64_t id;
    uint64_t epoch;
    uint64_t primary_id;
    enum ps_rcore_role role;
    unsigned state;
    uint64_t last_lsn;
    uint64_t applied_lsn;
    uint64_t commit_lsn;
    struct ps__rcore_peer peers[PS_RCORE_MAX_REPLICAS];
    size_t n_peers;
    /* Send buffer: groups buf_first .. buf_first + buf_n - 1, LSN order. */
    struct ps__rcore_group *buf;
    size_t buf_n, buf_cap;
    uint64_t buf_first;
    /* Client writes waiting for cw, LSN order: held[held_head..held_n). */
    struct ps__rcore_held *held;
    size_t held_head, held_n, held_cap;
};

struct ps_rcore
{
    struct ps_rcore_config cfg;
    struct ps__rcore_range **ranges;
    size_t n_ranges, cap_ranges;
    bool timer_armed;
    uint64_t next_io;
};

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

static void ps__rcore_free_range(struct ps__rcore_range *r)
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
        ps__rcore_free_range(node->ranges[i]);
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
    return in_isr && primary_in_isr ? 0 : RT_EINVAL;
}

/* The primary's peers become the ISR of @a less this node. A member that
 * stays keeps its stream; a new one starts at cw (catch-up of a member
 * behind cw comes with learners, DESIGN-replication.md §3.3). */
static void ps__rcore_set_peers(struct ps_rcore *node,
                                struct ps__rcore_range *r,
                                const struct ps_rcore_assignment *a)
{
    struct ps__rcore_peer old[PS_RCORE_MAX_REPLICAS];
    size_t n_old = r->n_peers;
    memcpy(old, r->peers, sizeof(old));
    r->n_peers = 0;
    for (size_t i = 0; i < a->n_isr; i++) {
        if (a->isr[i] == node->cfg.self_id) {
            continue;
        }
        struct ps__rcore_peer *p = &r->peers[r->n_peers++];
        *p = (struct ps__rcore_peer){
            .id = a->isr[i], .acked = r->commit_lsn, .next = r->commit_lsn + 1};
        for (size_t j = 0; j < n_old; j++) {
            if (old[j].id == a->isr[i]) {
                *p = old[j];
            }
        }
    }
}

int ps_rcore_assign(struct ps_rcore *node,
                    const struct ps_rcore_assignment *a,
                    struct rt_repl_actions *out)
{
    (void)out;
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
    r->buf_first = a->lsn + 1;
    if (a->primary_id == node->cfg.self_id) {
        r->role = PS_RCORE_PRIMARY;
        /* Its members are taken to hold its durable LSN: nothing to catch
         * up (catch-up comes with failover, §3.1 ACTIVATING). */
        r->commit_lsn = a->lsn;
        ps__rcore_set_peers(node, r, a);
        ps__rcore_set_state(r, PS_RPRI_ACTIVATING);
        ps__rcore_set_state(r, PS_RPRI_SERVING);
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
            cw = r->peers[i].acked < cw ? r->peers[i].acked : cw;
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
        if (r->role != PS_RCORE_PRIMARY || r->state == PS_RPRI_DEPOSED) {
            continue;
        }
        for (size_t j = 0; j < r->n_peers; j++) {
            if (r->peers[j].acked < r->last_lsn) {
                return true;
            }
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
                           const uint64_t *req_ids,
                           size_t n)
{
    if (r->held_n + n > r->held_cap) {
        r->held_cap = 2 * (r->held_n + n);
        r->held = rt_xrealloc(r->held, r->held_cap * sizeof(*r->held));
    }
    for (size_t i = 0; i < n; i++) {
        r->held[r->held_n++] =
            (struct ps__rcore_held){.req_id = req_ids[i], .lsn = lsn};
    }
}

/* §5.2: the writer made group @ev->lsn of the range durable here. */
static int ps__rcore_local_done(struct ps_rcore *node,
                                struct ps__rcore_range *r,
                                const struct rt_repl_event *ev,
                                struct rt_repl_actions *out)
{
    if (r->state != PS_RPRI_SERVING || ev->lsn > r->last_lsn + 1) {
        return RT_EINVAL;
    }
    if (ev->lsn <= r->last_lsn) {
        /* Not a new group: another write of the last one, or a write that
         * changed nothing but saw the state up to it (§5.2). Held at the
         * last LSN, which keeps the held list in LSN order. */
        ps__rcore_hold(r, r->last_lsn, ev->req_ids, ev->n_req_ids);
        ps__rcore_commit(node, r, out);
        return 0;
    }
    if (r->buf_n == r->buf_cap) {
        r->buf_cap = r->buf_cap ? 2 * r->buf_cap : 16;
        r->buf = rt_xrealloc(r->buf, r->buf_cap * sizeof(*r->buf));
    }
    if (r->buf_n == 0) {
        r->buf_first = ev->lsn;
    }
    r->buf[r->buf_n++] = (struct ps__rcore_group){
        .lsn = ev->lsn,
        .records =
            ev->records_len ? rt_xmemdup(ev->records, ev->records_len) : NULL,
        .len = ev->records_len,
    };
    r->last_lsn = ev->lsn;
    r->applied_lsn = ev->lsn;
    ps__rcore_hold(r, ev->lsn, ev->req_ids, ev->n_req_ids);
    for (size_t i = 0; i < r->n_peers; i++) {
        ps__rcore_pump(node, r, &r->peers[i], ev->now_ms, out);
    }
    ps__rcore_trim(r);
    ps__rcore_commit(node, r, out);
    return 0;
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
    if (p == NULL || ack->applied_lsn > r->last_lsn) {
        return RT_EINVAL;
    }
    if (r->state == PS_RPRI_DEPOSED) {
        return 0;
    }
    if (ack->code == RT_ESEALED) {
        if (ack->epoch > r->epoch) {
            ps__rcore_depose(r, out);
        }
        return 0;
    }
    if (ack->code != 0 && ack->code != RT_ELSNGAP) {
        return RT_EINVAL;
    }
    /* Both carry the peer's durable position: a NACK acks too. */
    if (ack->applied_lsn > p->acked) {
        p->acked = ack->applied_lsn;
        p->progress_ms = ev->now_ms;
    }
    if (ack->code == RT_ELSNGAP && p->acked + 1 < p->next &&
        p->rewound_to != p->acked + 1) {
        /* Rewind once per gap position: the NACKs of the other groups
         * already in flight name the same position. */
        p->next = p->acked + 1;
        p->rewound_to = p->acked + 1;
    }
    ps__rcore_pump(node, r, p, ev->now_ms, out);
    ps__rcore_trim(r);
    ps__rcore_commit(node, r, out);
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
        if (r->role != PS_RCORE_PRIMARY || r->state == PS_RPRI_DEPOSED) {
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

/* §3.2 FOLLOWING -> FOLLOWING on REPL_APPEND. */
static int ps__rcore_append(struct ps_rcore *node,
                            struct ps__rcore_range *r,
                            const struct rt_repl_event *ev,
                            struct rt_repl_actions *out)
{
    const struct rt_repl_append *ap = &ev->msg->u.append;
    if (r == NULL || r->role != PS_RCORE_SECONDARY) {
        ps__rcore_send_ack(ev->peer, NULL, RT_EINVAL, ap->range_id, out);
        return RT_EINVAL;
    }
    if (ap->epoch < r->epoch) {
        ps__rcore_send_ack(ev->peer, r, RT_ESEALED, r->id, out);
        return 0;
    }
    if (r->state != PS_RSEC_FOLLOWING) {
        ps__rcore_send_ack(ev->peer, r, RT_EINVAL, r->id, out);
        return RT_EINVAL;
    }
    if (ap->lsn <= r->applied_lsn) {
        ps__rcore_send_ack(ev->peer, r, 0, r->id, out);
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
    ps__rcore_set_state(r, PS_RSEC_FOLLOWING);
    r->last_lsn = ap->lsn;
    if (ap->commit_lsn > r->commit_lsn) {
        r->commit_lsn = ap->commit_lsn;
    }
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
    r->applied_lsn = ev->lsn;
    ps__rcore_send_ack(r->primary_id, r, 0, r->id, out);
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
    ps__rcore_set_peers(node, r, a);
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
        ps__rcore_free_range(r);
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
    if (!ev->up) {
        return 0;
    }
    for (size_t i = 0; i < node->n_ranges; i++) {
        struct ps__rcore_range *r = node->ranges[i];
        if (r->role != PS_RCORE_PRIMARY || r->state == PS_RPRI_DEPOSED) {
            continue;
        }
        for (size_t j = 0; j < r->n_peers; j++) {
            struct ps__rcore_peer *p = &r->peers[j];
            if (p->id == ev->peer) {
                p->next = p->acked + 1;
                p->rewound_to = 0;
                ps__rcore_pump(node, r, p, ev->now_ms, out);
            }
        }
    }
    return 0;
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
            }
            break;
        case RT_REPL_EV_DISK_DONE:
            if (r != NULL && r->role == PS_RCORE_PRIMARY) {
                rc = ps__rcore_local_done(node, r, ev, out);
            } else if (r != NULL && r->role == PS_RCORE_SECONDARY) {
                rc = ps__rcore_applied(node, r, ev, out);
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
    };
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
    }
}
