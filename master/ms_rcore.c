/* The master's replica core of ms_rcore.h. Every state change goes through
 * ms__rcore_set_state() and the allowed-transition table of
 * DESIGN-replication.md §3.4; an illegal change is a bug and aborts.
 * Each event updates what it carries (liveness, a seal answer, a commit),
 * then ms__rcore_eval() looks at every range at the event's time and takes
 * the decisions that are due, and ms__rcore_arm() arms the one timer at
 * the next deadline. A failover's happy path: suspicion (eval, STABLE) ->
 * PROPOSE the intent -> COMMITTED (SEALING, SEALs) -> SEAL_RESPs -> eval
 * proposes the new configuration -> COMMITTED (ASSIGNING, ASSIGNs) ->
 * ASSIGN_RESP of the new primary (STABLE, EVENT "failover"). */
#include "ms_rcore.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "rt_alloc.h"
#include "rt_err.h"
#include "rt_log.h"

#define MS__RBIT(s) (1u << (s))
#define MS__RNEVER UINT64_MAX

static const char *const ms__rcore_names[MS_RCORE__NR] = {
    "stable", "sealing", "assigning", "adding"};

/* §3.4. ASSIGNING -> STABLE is also the dropped wait (primary suspected);
 * ADDING -> STABLE a learner's add or its failure; STABLE -> ASSIGNING
 * also a replica removed (ms_rcore_remove_replica). */
static const unsigned ms__rcore_allowed[MS_RCORE__NR] = {
    [MS_RCORE_STABLE] = MS__RBIT(MS_RCORE_SEALING) |
                        MS__RBIT(MS_RCORE_ASSIGNING) |
                        MS__RBIT(MS_RCORE_ADDING),
    [MS_RCORE_SEALING] = MS__RBIT(MS_RCORE_ASSIGNING),
    [MS_RCORE_ASSIGNING] = MS__RBIT(MS_RCORE_STABLE),
    [MS_RCORE_ADDING] =
        MS__RBIT(MS_RCORE_STABLE) | MS__RBIT(MS_RCORE_ASSIGNING),
};

/* What a pending proposal is for. */
enum ms__rop {
    MS__ROP_NONE,
    MS__ROP_SEAL_INTENT, /* seal_epoch = epoch + 1 */
    MS__ROP_FAILOVER,    /* the chosen primary at seal_epoch */
    MS__ROP_CANCEL,      /* same primary at seal_epoch */
    MS__ROP_ISR,         /* an ISR_CHANGE */
    MS__ROP_LEARNER,     /* a learner joins the replica set */
    MS__ROP_LEARNER_OUT, /* the learner failed: it leaves */
    MS__ROP_REMOVE,      /* a replica leaves (ms_rcore_remove_replica) */
};

struct ms__rserver
{
    uint64_t id;
    uint64_t heard_ms; /* last heartbeat, or when the server became known */
    uint64_t down_ms;  /* connection down since (if @down) */
    bool down;
    /* It reported a stalled writer (self-fenced) at @stalled_ms: suspected
     * like a silent server, until a heartbeat without it. */
    bool stalled;
    uint64_t stalled_ms;
};

struct ms__rrange
{
    struct rt_repl_conf conf;
    enum ms_rcore_state state;
    /* The proposal waiting for its COMMITTED (MS__ROP_NONE: none). */
    enum ms__rop prop;
    uint64_t prop_id;
    uint64_t prop_from; /* ISR_CHANGE: who asked */
    uint64_t prop_drop; /* a server the proposal removes from the set */
    struct rt_repl_conf prop_conf;
    uint64_t op_start_ms; /* when the operation began */
    const char *op_what;  /* ASSIGNING: the event at its end */
    /* SEALING, indexed like conf.isr. */
    bool sealed[RT_REPL_MAX_REPLICAS];
    uint64_t sealed_lsn[RT_REPL_MAX_REPLICAS];
    uint64_t resend_at[RT_REPL_MAX_REPLICAS];
    size_t n_sealed;
    uint64_t first_ok_ms;
    uint64_t seal_since_ms;
    /* ASSIGNING */
    uint64_t assign_at;
    /* ADDING */
    uint64_t learner;
    uint64_t learner_deadline;
    uint64_t learner_start_ms; /* its add committed (or was loaded) */
    uint64_t size_bytes;       /* ms_rcore_range_size(), 0: unknown */
    /* A transfer intent proposed: the old primary's LSN at its freeze. */
    uint64_t xfer_lsn;
    bool xfer_known;
    /* The primary of generation @restarted_pe (0: none) restarted: it
     * waits to be failed over, as a candidate sealed like a secondary. */
    uint64_t restarted_pe;
};

static bool ms__rcore_restarted(const struct ms__rrange *r)
{
    return r->restarted_pe != 0 && r->restarted_pe == r->conf.primary_epoch;
}

struct ms_rcore
{
    struct ms_rcore_config cfg;
    uint64_t start_ms;
    struct ms__rserver *servers;
    size_t n_servers, cap_servers;
    struct ms__rrange **ranges; /* sorted by range id (binary search) */
    size_t n_ranges, cap_ranges;
    uint64_t next_prop;
    uint64_t timer_at; /* 0: not armed */
};

/* How long a learner of @r may take to join: --learner-timeout-ms, or
 * more for a range whose copy at learner_min_mb_per_s takes longer than
 * that (MS_RCORE_LEARNER_FIXED_MS for the probe, the catch-up of the live
 * stream and the join on top of the copy itself). */
static uint64_t ms__rcore_learner_ms(const struct ms_rcore *m,
                                     const struct ms__rrange *r)
{
    uint64_t t = m->cfg.learner_timeout_ms;
    uint64_t per_ms = m->cfg.learner_min_mb_per_s * 1048576 / 1000;
    uint64_t by_size;
    if (per_ms == 0 || r->size_bytes == 0) {
        return t;
    }
    by_size = MS_RCORE_LEARNER_FIXED_MS + r->size_bytes / per_ms;
    return by_size > t ? by_size : t;
}

/* ADDING from @now_ms: the learner's deadline. */
static void ms__rcore_learner_arm(const struct ms_rcore *m,
                                  struct ms__rrange *r,
                                  uint64_t now_ms)
{
    r->learner_start_ms = now_ms;
    r->learner_deadline = now_ms + ms__rcore_learner_ms(m, r);
}

static void ms__rcore_set_state(struct ms__rrange *r, enum ms_rcore_state to)
{
    if ((unsigned)to >= MS_RCORE__NR ||
        !(ms__rcore_allowed[r->state] & MS__RBIT(to))) {
        rt_log(RT_LOG_ERROR, "range %llu: illegal master state change %s -> %s",
               (unsigned long long)r->conf.range_id,
               ms_rcore_state_name(r->state), ms_rcore_state_name(to));
        abort();
    }
    r->state = to;
}

const char *ms_rcore_state_name(enum ms_rcore_state s)
{
    return (unsigned)s < MS_RCORE__NR ? ms__rcore_names[s] : "?";
}

/* Life cycle */

int ms_rcore_create(const struct ms_rcore_config *cfg,
                    uint64_t now_ms,
                    struct ms_rcore **out)
{
    if (cfg->failover_after_ms == 0 || cfg->resend_ms == 0 ||
        cfg->mutation >= MS_RCORE_MUT__NR) {
        return RT_EINVAL;
    }
    struct ms_rcore *m = rt_xcalloc(1, sizeof(*m));
    m->cfg = *cfg;
    m->start_ms = now_ms;
    *out = m;
    return 0;
}

void ms_rcore_destroy(struct ms_rcore *m)
{
    if (m == NULL) {
        return;
    }
    for (size_t i = 0; i < m->n_ranges; i++) {
        free(m->ranges[i]);
    }
    free(m->ranges);
    free(m->servers);
    free(m);
}

/* Servers and suspicion (§7.1) */

static struct ms__rserver *ms__rcore_server(struct ms_rcore *m,
                                            uint64_t id,
                                            uint64_t now_ms)
{
    for (size_t i = 0; i < m->n_servers; i++) {
        if (m->servers[i].id == id) {
            return &m->servers[i];
        }
    }
    if (m->n_servers == m->cap_servers) {
        m->cap_servers = m->cap_servers ? 2 * m->cap_servers : 8;
        m->servers =
            rt_xrealloc(m->servers, m->cap_servers * sizeof(*m->servers));
    }
    struct ms__rserver *s = &m->servers[m->n_servers++];
    *s = (struct ms__rserver){.id = id, .heard_ms = now_ms};
    return s;
}

static const struct ms__rserver *ms__rcore_server_find(const struct ms_rcore *m,
                                                       uint64_t id)
{
    for (size_t i = 0; i < m->n_servers; i++) {
        if (m->servers[i].id == id) {
            return &m->servers[i];
        }
    }
    return NULL;
}

/* When @id becomes suspected if nothing is heard from it (MS__RNEVER: an
 * unknown server, which is never suspected: it holds no range). */
static uint64_t ms__rcore_suspect_at(const struct ms_rcore *m, uint64_t id)
{
    const struct ms__rserver *s = ms__rcore_server_find(m, id);
    if (s == NULL) {
        return MS__RNEVER;
    }
    uint64_t at = s->heard_ms + m->cfg.failover_after_ms;
    if (s->down && s->down_ms + m->cfg.reconnect_grace_ms < at) {
        at = s->down_ms + m->cfg.reconnect_grace_ms;
    }
    if (s->stalled && s->stalled_ms < at) {
        at = s->stalled_ms;
    }
    uint64_t grace = m->start_ms + m->cfg.failover_after_ms + m->cfg.lease_ms;
    return at > grace ? at : grace;
}

static bool ms__rcore_suspected(const struct ms_rcore *m,
                                uint64_t id,
                                uint64_t now_ms)
{
    return now_ms >= ms__rcore_suspect_at(m, id);
}

/* Ranges */

/* Where @range_id is in m->ranges, or would be inserted. */
static size_t ms__rcore_slot(const struct ms_rcore *m, uint64_t range_id)
{
    size_t lo = 0, hi = m->n_ranges;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (m->ranges[mid]->conf.range_id < range_id) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    return lo;
}

static struct ms__rrange *ms__rcore_find(const struct ms_rcore *m,
                                         uint64_t range_id)
{
    size_t i = ms__rcore_slot(m, range_id);
    return i < m->n_ranges && m->ranges[i]->conf.range_id == range_id
               ? m->ranges[i]
               : NULL;
}

static int ms__rcore_isr_index(const struct rt_repl_conf *c, uint64_t id)
{
    for (size_t i = 0; i < c->n_isr; i++) {
        if (c->isr[i] == id) {
            return (int)i;
        }
    }
    return -1;
}

static void ms__rcore_event(struct ms__rrange *r,
                            const char *what,
                            int32_t code,
                            uint64_t took_ms,
                            struct rt_repl_actions *out)
{
    struct rt_repl_action act = {.kind = RT_REPL_ACT_EVENT,
                                 .range_id = r->conf.range_id,
                                 .code = code,
                                 .at_ms = took_ms,
                                 .what = what};
    rt_repl_actions_add(out, &act);
}

static void ms__rcore_propose(struct ms_rcore *m,
                              struct ms__rrange *r,
                              enum ms__rop kind,
                              const struct rt_repl_conf *c,
                              struct rt_repl_actions *out)
{
    r->prop = kind;
    r->prop_id = ++m->next_prop;
    r->prop_conf = *c;
    struct rt_repl_action act = {.kind = RT_REPL_ACT_PROPOSE,
                                 .io_id = r->prop_id,
                                 .range_id = c->range_id,
                                 .guard_epoch = r->conf.epoch,
                                 .guard_seal_epoch = r->conf.seal_epoch,
                                 .conf = *c};
    rt_repl_actions_add(out, &act);
}

static void ms__rcore_send_assign(const struct ms__rrange *r,
                                  uint64_t peer,
                                  struct rt_repl_actions *out)
{
    struct rt_repl_action act = {.kind = RT_REPL_ACT_SEND, .peer = peer};
    act.msg.kind = RT_REPL_MSG_ASSIGN;
    act.msg.u.assign = r->conf;
    rt_repl_actions_add(out, &act);
}

/* ASSIGN of the committed configuration to every member, the primary
 * first; @also (if not 0 and not a member) gets it too: a server the
 * change removed learns it that way. */
static void ms__rcore_assign_all(const struct ms__rrange *r,
                                 uint64_t also,
                                 struct rt_repl_actions *out)
{
    ms__rcore_send_assign(r, r->conf.primary_id, out);
    for (size_t i = 0; i < r->conf.n_members; i++) {
        if (r->conf.members[i].server_id != r->conf.primary_id) {
            ms__rcore_send_assign(r, r->conf.members[i].server_id, out);
        }
    }
    if (also != 0 && rt_repl_conf_role(&r->conf, also) == RT_REPL_ROLE_NONE) {
        ms__rcore_send_assign(r, also, out);
    }
}

static void ms__rcore_send_seal(const struct ms__rrange *r,
                                uint64_t peer,
                                struct rt_repl_actions *out)
{
    struct rt_repl_action act = {.kind = RT_REPL_ACT_SEND, .peer = peer};
    act.msg.kind = RT_REPL_MSG_SEAL;
    act.msg.u.seal = (struct rt_repl_seal){
        .range_id = r->conf.range_id,
        .old_epoch = r->conf.epoch,
        .new_epoch = r->conf.seal_epoch,
        .old_primary = r->conf.primary_id,
    };
    rt_repl_actions_add(out, &act);
}

static void ms__rcore_isr_resp(uint64_t peer,
                               uint64_t range_id,
                               int32_t code,
                               uint64_t epoch,
                               struct rt_repl_actions *out)
{
    struct rt_repl_action act = {.kind = RT_REPL_ACT_SEND, .peer = peer};
    act.msg.kind = RT_REPL_MSG_ISR_RESP;
    act.msg.u.isr_resp = (struct rt_repl_isr_resp){
        .range_id = range_id, .code = code, .epoch = epoch};
    rt_repl_actions_add(out, &act);
}

static void ms__rcore_set_role(struct rt_repl_conf *c,
                               uint64_t id,
                               enum rt_repl_role role)
{
    for (size_t i = 0; i < c->n_members; i++) {
        if (c->members[i].server_id == id) {
            c->members[i].role = role;
        }
    }
}

/* @c without member @id (and without it in the ISR). */
static void ms__rcore_drop_member(struct rt_repl_conf *c, uint64_t id)
{
    size_t k = 0;
    for (size_t i = 0; i < c->n_members; i++) {
        if (c->members[i].server_id != id) {
            c->members[k++] = c->members[i];
        }
    }
    c->n_members = k;
    k = 0;
    for (size_t i = 0; i < c->n_isr; i++) {
        if (c->isr[i] != id) {
            c->isr[k++] = c->isr[i];
        }
    }
    c->n_isr = k;
}

/* The configuration after a failover to @chosen with ISR @isr: the old
 * primary stays a member, as a SECONDARY outside the ISR (it rejoins,
 * §8.1). */
static struct rt_repl_conf ms__rcore_failover_conf(const struct ms__rrange *r,
                                                   uint64_t chosen,
                                                   const uint64_t *isr,
                                                   size_t n_isr)
{
    struct rt_repl_conf c = r->conf;
    uint64_t new_epoch = c.seal_epoch ? c.seal_epoch : c.epoch + 1;
    ms__rcore_set_role(&c, c.primary_id, RT_REPL_ROLE_SECONDARY);
    ms__rcore_set_role(&c, chosen, RT_REPL_ROLE_PRIMARY);
    c.epoch = new_epoch;
    c.primary_id = chosen;
    c.primary_epoch = new_epoch;
    memcpy(c.isr, isr, n_isr * sizeof(*isr));
    c.n_isr = n_isr;
    c.seal_epoch = 0;
    c.seal_kind = RT_REPL_SEAL_NONE;
    c.seal_to = 0;
    return c;
}

/* SEALING -> (proposal): the sealed replier with the highest applied LSN
 * (ties: the lower id); a transfer's target if it holds that maximum. */
static void ms__rcore_choose(struct ms_rcore *m,
                             struct ms__rrange *r,
                             struct rt_repl_actions *out)
{
    const struct rt_repl_conf *c = &r->conf;
    uint64_t isr[RT_REPL_MAX_REPLICAS];
    size_t n = 0;
    int best = -1;
    for (size_t i = 0; i < c->n_isr; i++) {
        if (!r->sealed[i]) {
            continue;
        }
        isr[n++] = c->isr[i];
        if (best < 0) {
            best = (int)i;
            continue;
        }
        bool better;
        if (m->cfg.mutation == MS_RCORE_MUT_CHOOSE_MIN) {
            better = r->sealed_lsn[i] < r->sealed_lsn[best];
        } else {
            better = r->sealed_lsn[i] > r->sealed_lsn[best];
        }
        if (better || (r->sealed_lsn[i] == r->sealed_lsn[best] &&
                       c->isr[i] < c->isr[best])) {
            best = (int)i;
        }
    }
    RT_PRE(best >= 0);
    uint64_t chosen = c->isr[best];
    int old = ms__rcore_isr_index(c, c->primary_id);
    if (ms__rcore_restarted(r) && old >= 0 && r->sealed[old] &&
        r->sealed_lsn[old] == r->sealed_lsn[best]) {
        chosen = c->primary_id; /* no primary moves for a restart alone */
    }
    int to = ms__rcore_isr_index(c, c->seal_to);
    if (c->seal_kind == RT_REPL_SEAL_TRANSFER && to >= 0 && r->sealed[to] &&
        r->sealed_lsn[to] == r->sealed_lsn[best]) {
        chosen = c->seal_to;
    }
    struct rt_repl_conf next = ms__rcore_failover_conf(r, chosen, isr, n);
    ms__rcore_propose(m, r, MS__ROP_FAILOVER, &next, out);
}

/* Is some ISR secondary of @c not suspected (a failover could start)? */
static bool ms__rcore_live_secondary(const struct ms_rcore *m,
                                     const struct rt_repl_conf *c,
                                     uint64_t now)
{
    for (size_t i = 0; i < c->n_isr; i++) {
        if (c->isr[i] != c->primary_id &&
            !ms__rcore_suspected(m, c->isr[i], now)) {
            return true;
        }
    }
    return false;
}

/* When a transfer's (or a restart's) choice may be taken without every
 * live ISR member (see ms__rcore_transfer_waits): MS__RNEVER when it need
 * not wait. */
static uint64_t ms__rcore_transfer_until(const struct ms_rcore *m,
                                         const struct ms__rrange *r)
{
    const struct rt_repl_conf *c = &r->conf;
    if (c->seal_kind != RT_REPL_SEAL_TRANSFER && !ms__rcore_restarted(r)) {
        return MS__RNEVER;
    }
    return r->seal_since_ms + m->cfg.lease_ms + m->cfg.seal_wait_ms;
}

/* A transfer waits for the seal of every ISR secondary not suspected (its
 * target above all), up to lease_ms + seal_wait_ms after the intent: a
 * secondary refuses a SEAL (busy) for up to L, e.g. in the grace after
 * its start. Choosing without the target would turn a planned transfer
 * into a failover back to the old primary, and without another secondary
 * would leave that healthy copy out of the ISR. A restarted primary's
 * failover waits the same way: every member is usually alive (a whole
 * cluster restarted) and would otherwise need a catch-up. */
static bool ms__rcore_transfer_waits(const struct ms_rcore *m,
                                     const struct ms__rrange *r,
                                     uint64_t now)
{
    const struct rt_repl_conf *c = &r->conf;
    uint64_t until = ms__rcore_transfer_until(m, r);
    if (until == MS__RNEVER || now >= until) {
        return false;
    }
    for (size_t i = 0; i < c->n_isr; i++) {
        if ((c->isr[i] != c->primary_id || ms__rcore_restarted(r)) &&
            !r->sealed[i] && !ms__rcore_suspected(m, c->isr[i], now)) {
            return true;
        }
    }
    return false;
}

/* Decisions due at @now for one range; true if its state changed (then
 * the caller looks again). */
static bool ms__rcore_eval_once(struct ms_rcore *m,
                                struct ms__rrange *r,
                                uint64_t now,
                                struct rt_repl_actions *out)
{
    struct rt_repl_conf *c = &r->conf;
    if (r->prop != MS__ROP_NONE) {
        return false; /* waiting for a commit */
    }
    switch (r->state) {
        case MS_RCORE_STABLE: {
            bool restarted = ms__rcore_restarted(r) &&
                             !ms__rcore_suspected(m, c->primary_id, now);
            if (!restarted && !ms__rcore_suspected(m, c->primary_id, now)) {
                return false;
            }
            uint64_t live[RT_REPL_MAX_REPLICAS];
            size_t n_live = 0;
            for (size_t i = 0; i < c->n_isr; i++) {
                if (c->isr[i] != c->primary_id &&
                    !ms__rcore_suspected(m, c->isr[i], now)) {
                    live[n_live++] = c->isr[i];
                }
            }
            if (n_live == 0 && !restarted) {
                return false; /* no in-sync copy to promote: wait */
            }
            r->op_start_ms = now;
            if (m->cfg.mutation == MS_RCORE_MUT_NO_SEAL && n_live > 0) {
                struct rt_repl_conf next =
                    ms__rcore_failover_conf(r, live[0], live, n_live);
                ms__rcore_propose(m, r, MS__ROP_FAILOVER, &next, out);
                return false;
            }
            struct rt_repl_conf next = *c;
            next.seal_epoch = c->epoch + 1;
            next.seal_kind = RT_REPL_SEAL_FAILOVER;
            next.seal_to = 0;
            ms__rcore_propose(m, r, MS__ROP_SEAL_INTENT, &next, out);
            return false;
        }
        case MS_RCORE_SEALING: {
            const struct ms__rserver *p =
                ms__rcore_server_find(m, c->primary_id);
            bool restarted = ms__rcore_restarted(r);
            if (c->seal_kind == RT_REPL_SEAL_FAILOVER && r->n_sealed == 0 &&
                !restarted && p != NULL && p->heard_ms > r->seal_since_ms &&
                !ms__rcore_suspected(m, c->primary_id, now)) {
                struct rt_repl_conf next = *c;
                next.epoch = c->seal_epoch;
                next.seal_epoch = 0;
                next.seal_kind = RT_REPL_SEAL_NONE;
                ms__rcore_propose(m, r, MS__ROP_CANCEL, &next, out);
                return false;
            }
            bool all = r->n_sealed > 0;
            for (size_t i = 0; i < c->n_isr; i++) {
                if ((c->isr[i] == c->primary_id && !restarted) ||
                    r->sealed[i] || ms__rcore_suspected(m, c->isr[i], now)) {
                    continue;
                }
                all = false;
                if (r->resend_at[i] <= now) {
                    ms__rcore_send_seal(r, c->isr[i], out);
                    r->resend_at[i] = now + m->cfg.resend_ms;
                }
            }
            if (r->n_sealed > 0 &&
                (all || now >= r->first_ok_ms + m->cfg.seal_wait_ms) &&
                !ms__rcore_transfer_waits(m, r, now)) {
                ms__rcore_choose(m, r, out);
            }
            return false;
        }
        case MS_RCORE_ASSIGNING:
            /* Drop the wait only if a failover can follow; else keep
             * resending: the primary may just be cut off for a while. A
             * restarted primary never answers: its failover follows. */
            if ((ms__rcore_suspected(m, c->primary_id, now) &&
                 ms__rcore_live_secondary(m, c, now)) ||
                ms__rcore_restarted(r)) {
                ms__rcore_event(r, "assign_dropped", RT_ETIMEDOUT,
                                now - r->op_start_ms, out);
                ms__rcore_set_state(r, MS_RCORE_STABLE);
                return true;
            }
            if (r->assign_at <= now) {
                ms__rcore_send_assign(r, c->primary_id, out);
                r->assign_at = now + m->cfg.resend_ms;
            }
            return false;
        case MS_RCORE_ADDING:
            /* A failover needs the range free: a learner whose primary is
             * gone, or that took too long, leaves the set first. */
            if (now >= r->learner_deadline || ms__rcore_restarted(r) ||
                ms__rcore_suspected(m, c->primary_id, now)) {
                struct rt_repl_conf next = *c;
                size_t k = 0;
                for (size_t i = 0; i < c->n_members; i++) {
                    if (c->members[i].server_id != r->learner) {
                        next.members[k++] = c->members[i];
                    }
                }
                next.n_members = k;
                next.epoch = c->epoch + 1;
                ms__rcore_propose(m, r, MS__ROP_LEARNER_OUT, &next, out);
            }
            return false;
        case MS_RCORE__NR:
            break;
    }
    return false;
}

static void ms__rcore_eval(struct ms_rcore *m,
                           uint64_t now,
                           struct rt_repl_actions *out)
{
    for (size_t i = 0; i < m->n_ranges; i++) {
        while (ms__rcore_eval_once(m, m->ranges[i], now, out)) {
        }
    }
}

static void ms__rcore_min(uint64_t *at, uint64_t cand, uint64_t now)
{
    if (cand > now && cand < *at) {
        *at = cand;
    }
}

/* Arms the timer at the next deadline after @now if it is earlier than
 * the one armed (a TIMER action replaces the previous one). */
static void ms__rcore_arm(struct ms_rcore *m,
                          uint64_t now,
                          struct rt_repl_actions *out)
{
    uint64_t at = MS__RNEVER;
    for (size_t i = 0; i < m->n_ranges; i++) {
        const struct ms__rrange *r = m->ranges[i];
        const struct rt_repl_conf *c = &r->conf;
        if (r->prop != MS__ROP_NONE) {
            continue;
        }
        switch (r->state) {
            case MS_RCORE_STABLE:
                ms__rcore_min(&at, ms__rcore_suspect_at(m, c->primary_id), now);
                break;
            case MS_RCORE_SEALING:
                if (r->n_sealed > 0) {
                    ms__rcore_min(&at, r->first_ok_ms + m->cfg.seal_wait_ms,
                                  now);
                    if (ms__rcore_transfer_until(m, r) != MS__RNEVER) {
                        ms__rcore_min(&at, ms__rcore_transfer_until(m, r), now);
                    }
                }
                for (size_t j = 0; j < c->n_isr; j++) {
                    if (c->isr[j] != c->primary_id && !r->sealed[j]) {
                        ms__rcore_min(&at, r->resend_at[j], now);
                        ms__rcore_min(&at, ms__rcore_suspect_at(m, c->isr[j]),
                                      now);
                    }
                }
                break;
            case MS_RCORE_ASSIGNING:
                ms__rcore_min(&at, r->assign_at, now);
                ms__rcore_min(&at, ms__rcore_suspect_at(m, c->primary_id), now);
                break;
            case MS_RCORE_ADDING:
                ms__rcore_min(&at, r->learner_deadline, now);
                ms__rcore_min(&at, ms__rcore_suspect_at(m, c->primary_id), now);
                break;
            case MS_RCORE__NR:
                break;
        }
    }
    if (at == MS__RNEVER || (m->timer_at > now && m->timer_at <= at)) {
        return;
    }
    struct rt_repl_action act = {.kind = RT_REPL_ACT_TIMER,
                                 .timer_id = MS_RCORE_TIMER_TICK,
                                 .at_ms = at};
    rt_repl_actions_add(out, &act);
    m->timer_at = at;
}

/* Loading */

static int ms__rcore_check_conf(const struct rt_repl_conf *c)
{
    if (c->primary_id == 0 || c->n_isr == 0 ||
        c->n_isr > RT_REPL_MAX_REPLICAS ||
        c->n_members > RT_REPL_MAX_REPLICAS ||
        ms__rcore_isr_index(c, c->primary_id) < 0 ||
        (c->seal_epoch != 0 && c->seal_epoch <= c->epoch)) {
        return RT_EINVAL;
    }
    return 0;
}

static void ms__rcore_enter_sealing(struct ms__rrange *r, uint64_t now)
{
    ms__rcore_set_state(r, MS_RCORE_SEALING);
    memset(r->sealed, 0, sizeof(r->sealed));
    memset(r->sealed_lsn, 0, sizeof(r->sealed_lsn));
    memset(r->resend_at, 0, sizeof(r->resend_at));
    r->n_sealed = 0;
    r->first_ok_ms = 0;
    r->seal_since_ms = now;
}

int ms_rcore_load(struct ms_rcore *m,
                  const struct rt_repl_conf *c,
                  uint64_t now_ms,
                  struct rt_repl_actions *out)
{
    int rc = ms__rcore_check_conf(c);
    if (rc != 0) {
        return rc;
    }
    struct ms__rrange *r = ms__rcore_find(m, c->range_id);
    if (r == NULL) {
        size_t at = ms__rcore_slot(m, c->range_id);
        if (m->n_ranges == m->cap_ranges) {
            m->cap_ranges = m->cap_ranges ? 2 * m->cap_ranges : 8;
            m->ranges =
                rt_xrealloc(m->ranges, m->cap_ranges * sizeof(*m->ranges));
        }
        r = rt_xcalloc(1, sizeof(*r));
        memmove(&m->ranges[at + 1], &m->ranges[at],
                (m->n_ranges - at) * sizeof(*m->ranges));
        m->ranges[at] = r;
        m->n_ranges++;
    }
    memset(r, 0, sizeof(*r));
    r->conf = *c;
    r->state = MS_RCORE_STABLE;
    r->op_start_ms = now_ms;
    ms__rcore_server(m, c->primary_id, now_ms);
    for (size_t i = 0; i < c->n_isr; i++) {
        ms__rcore_server(m, c->isr[i], now_ms);
    }
    for (size_t i = 0; i < c->n_members; i++) {
        ms__rcore_server(m, c->members[i].server_id, now_ms);
        if (c->members[i].role == RT_REPL_ROLE_LEARNER && c->seal_epoch == 0 &&
            r->state == MS_RCORE_STABLE) {
            ms__rcore_set_state(r, MS_RCORE_ADDING);
            r->learner = c->members[i].server_id;
            ms__rcore_learner_arm(m, r, now_ms);
        }
    }
    if (c->seal_epoch != 0) {
        /* A restart mid-failover: the intent is committed, so SEALs may
         * have been accepted; finish it (SEALs are idempotent). */
        ms__rcore_enter_sealing(r, now_ms);
    }
    ms__rcore_eval(m, now_ms, out);
    ms__rcore_arm(m, now_ms, out);
    return 0;
}

int ms_rcore_range_size(struct ms_rcore *m,
                        uint64_t range_id,
                        uint64_t size_bytes)
{
    struct ms__rrange *r = ms__rcore_find(m, range_id);
    uint64_t until;
    if (r == NULL) {
        return RT_ENOTFOUND;
    }
    r->size_bytes = size_bytes;
    if (r->state == MS_RCORE_ADDING) {
        /* Only ever later: a learner is not cut short by a smaller report
         * (the timer finds the later deadline when it fires). */
        until = r->learner_start_ms + ms__rcore_learner_ms(m, r);
        if (until > r->learner_deadline) {
            r->learner_deadline = until;
        }
    }
    return 0;
}

int ms_rcore_forget(struct ms_rcore *m, uint64_t range_id)
{
    size_t i = ms__rcore_slot(m, range_id);
    if (i == m->n_ranges || m->ranges[i]->conf.range_id != range_id) {
        return RT_ENOTFOUND;
    }
    free(m->ranges[i]);
    memmove(&m->ranges[i], &m->ranges[i + 1],
            (m->n_ranges - i - 1) * sizeof(*m->ranges));
    m->n_ranges--;
    return 0;
}

int ms_rcore_add_learner(struct ms_rcore *m,
                         uint64_t range_id,
                         uint64_t target,
                         uint64_t now_ms,
                         struct rt_repl_actions *out)
{
    struct ms__rrange *r = ms__rcore_find(m, range_id);
    if (r == NULL) {
        return RT_ENOTFOUND;
    }
    if (r->state != MS_RCORE_STABLE || r->prop != MS__ROP_NONE) {
        return RT_EBUSY;
    }
    struct rt_repl_conf next = r->conf;
    if (rt_repl_conf_role(&next, target) != RT_REPL_ROLE_NONE) {
        return RT_EEXIST;
    }
    if (target == 0 || next.n_members == RT_REPL_MAX_REPLICAS ||
        (next.rf != 0 && next.n_members + 1 > next.rf + 1)) {
        return RT_EINVAL;
    }
    next.members[next.n_members++] = (struct rt_repl_member){
        .server_id = target, .role = RT_REPL_ROLE_LEARNER};
    next.epoch++;
    ms__rcore_server(m, target, now_ms);
    r->op_start_ms = now_ms;
    ms__rcore_propose(m, r, MS__ROP_LEARNER, &next, out);
    return 0;
}

int ms_rcore_remove_replica(struct ms_rcore *m,
                            uint64_t range_id,
                            uint64_t server,
                            uint64_t now_ms,
                            struct rt_repl_actions *out)
{
    struct ms__rrange *r = ms__rcore_find(m, range_id);
    if (r == NULL) {
        return RT_ENOTFOUND;
    }
    if ((r->state != MS_RCORE_STABLE && r->state != MS_RCORE_ADDING) ||
        r->prop != MS__ROP_NONE || r->conf.seal_epoch != 0) {
        return RT_EBUSY;
    }
    enum rt_repl_role role = rt_repl_conf_role(&r->conf, server);
    if (role == RT_REPL_ROLE_NONE || role == RT_REPL_ROLE_PRIMARY) {
        return RT_EINVAL;
    }
    struct rt_repl_conf next = r->conf;
    ms__rcore_drop_member(&next, server);
    next.epoch++;
    r->prop_drop = server;
    if (r->state == MS_RCORE_STABLE) {
        r->op_start_ms = now_ms;
    }
    /* The learner of ADDING leaves as a failed one would. */
    ms__rcore_propose(m, r,
                      r->state == MS_RCORE_ADDING && server == r->learner
                          ? MS__ROP_LEARNER_OUT
                          : MS__ROP_REMOVE,
                      &next, out);
    return 0;
}

/* Transfers (§9.3 step 2) */

/* The checks of ms_rcore_transfer(), in its order. */
static int ms__rcore_transfer_check(const struct ms__rrange *r,
                                    uint64_t epoch,
                                    uint64_t to)
{
    const struct rt_repl_conf *c = &r->conf;
    if (epoch != c->epoch) {
        return RT_ESTALE;
    }
    if (to == c->primary_id || !rt_repl_conf_in_isr(c, to)) {
        return RT_EINVAL;
    }
    if (r->state != MS_RCORE_STABLE || r->prop != MS__ROP_NONE ||
        c->seal_epoch != 0) {
        return RT_EBUSY;
    }
    return 0;
}

/* SEALING of a transfer intent just committed: the old primary's
 * TRANSFER answer is its seal (it froze at xfer_lsn, released its lease
 * and serves nothing more of this generation), so it counts as a sealed
 * replier and stays in the ISR of the next configuration. */
static void ms__rcore_transfer_sealed(struct ms__rrange *r, uint64_t now)
{
    int p = ms__rcore_isr_index(&r->conf, r->conf.primary_id);
    bool known = r->xfer_known;
    r->xfer_known = false;
    if (r->conf.seal_kind != RT_REPL_SEAL_TRANSFER || p < 0 || !known) {
        return; /* loaded after a restart: P's LSN is not known */
    }
    r->sealed[p] = true;
    r->sealed_lsn[p] = r->xfer_lsn;
    r->n_sealed = 1;
    r->first_ok_ms = now;
}

int ms_rcore_transfer_check(const struct ms_rcore *m,
                            uint64_t range_id,
                            uint64_t to,
                            struct rt_repl_conf *conf)
{
    const struct ms__rrange *r = ms__rcore_find(m, range_id);
    if (r == NULL) {
        return RT_ENOTFOUND;
    }
    *conf = r->conf;
    return ms__rcore_transfer_check(r, r->conf.epoch, to);
}

int ms_rcore_transfer(struct ms_rcore *m,
                      uint64_t range_id,
                      uint64_t epoch,
                      uint64_t to,
                      uint64_t lsn,
                      uint64_t now_ms,
                      struct rt_repl_actions *out)
{
    struct ms__rrange *r = ms__rcore_find(m, range_id);
    if (r == NULL) {
        return RT_ENOTFOUND;
    }
    int rc = ms__rcore_transfer_check(r, epoch, to);
    if (rc != 0) {
        return rc;
    }
    struct rt_repl_conf next = r->conf;
    next.seal_epoch = r->conf.epoch + 1;
    next.seal_kind = RT_REPL_SEAL_TRANSFER;
    next.seal_to = to;
    r->xfer_lsn = lsn;
    r->xfer_known = true;
    r->op_start_ms = now_ms;
    ms__rcore_propose(m, r, MS__ROP_SEAL_INTENT, &next, out);
    ms__rcore_arm(m, now_ms, out);
    return 0;
}

/* Events */

static int ms__rcore_seal_resp(struct ms_rcore *m,
                               const struct rt_repl_event *ev)
{
    const struct rt_repl_seal_resp *sr = &ev->msg->u.seal_resp;
    struct ms__rrange *r = ms__rcore_find(m, sr->range_id);
    if (r == NULL || r->state != MS_RCORE_SEALING || r->prop != MS__ROP_NONE ||
        sr->new_epoch != r->conf.seal_epoch) {
        return 0; /* late or duplicate: the decision is taken */
    }
    int i = ms__rcore_isr_index(&r->conf, ev->peer);
    if (i < 0 || (ev->peer == r->conf.primary_id && !ms__rcore_restarted(r))) {
        return 0;
    }
    if (sr->code == 0 && !r->sealed[i]) {
        r->sealed[i] = true;
        r->sealed_lsn[i] = sr->applied_lsn;
        if (r->n_sealed++ == 0) {
            r->first_ok_ms = ev->now_ms;
        }
    } else if (sr->code == RT_EBUSY) {
        r->resend_at[i] = ev->now_ms + sr->retry_ms;
    }
    return 0;
}

/* May @id join the ISR of @c: a LEARNER, or a SECONDARY outside the ISR
 * (an old primary after a failover, a secondary an ISR shrink removed). */
static bool ms__rcore_may_join(const struct rt_repl_conf *c, uint64_t id)
{
    enum rt_repl_role role = rt_repl_conf_role(c, id);
    return role == RT_REPL_ROLE_LEARNER ||
           (role == RT_REPL_ROLE_SECONDARY && !rt_repl_conf_in_isr(c, id));
}

/* ADDING: would one more in-sync copy besides the learner give the range
 * rf of them? Then a returning secondary that caught up first wins and
 * the learner is aborted (DESIGN-replication.md §8.2). */
static bool ms__rcore_learner_surplus(const struct ms__rrange *r)
{
    return r->conf.rf != 0 && r->conf.n_isr + 1 >= r->conf.rf;
}

/* §4 ISR_CHANGE checks, in order; 0 if the change may be proposed. */
static int ms__rcore_isr_check(const struct ms__rrange *r,
                               uint64_t from,
                               const struct rt_repl_isr_change *ic)
{
    const struct rt_repl_conf *c = &r->conf;
    if (ic->epoch != c->epoch) {
        return RT_ESTALE;
    }
    if (from != c->primary_id) {
        return RT_ENOTPRIMARY;
    }
    if (ic->n_remove + ic->n_add == 0 || ic->n_remove > RT_REPL_MAX_REPLICAS ||
        ic->n_add > RT_REPL_MAX_REPLICAS) {
        return RT_EINVAL;
    }
    uint64_t seen[2 * RT_REPL_MAX_REPLICAS];
    size_t n_seen = 0;
    for (size_t i = 0; i < ic->n_remove + ic->n_add; i++) {
        bool rm = i < ic->n_remove;
        uint64_t id = rm ? ic->remove[i] : ic->add[i - ic->n_remove];
        for (size_t j = 0; j < n_seen; j++) {
            if (seen[j] == id) {
                return RT_EINVAL;
            }
        }
        seen[n_seen++] = id;
        if (rm && (id == c->primary_id || !rt_repl_conf_in_isr(c, id))) {
            return RT_EINVAL;
        }
        if (!rm && !ms__rcore_may_join(c, id)) {
            return RT_EINVAL;
        }
    }
    if (r->prop != MS__ROP_NONE || c->seal_epoch != 0) {
        return RT_EBUSY;
    }
    if (r->state == MS_RCORE_ADDING) {
        /* Only the learner's own join ends ADDING, or a returning
         * secondary's that makes the learner surplus (it is aborted). */
        if (ic->n_remove != 0 || ic->n_add != 1 ||
            (ic->add[0] != r->learner && !ms__rcore_learner_surplus(r))) {
            return RT_EBUSY;
        }
    } else if (r->state != MS_RCORE_STABLE) {
        return RT_EBUSY;
    }
    return 0;
}

static int ms__rcore_isr_change(struct ms_rcore *m,
                                const struct rt_repl_event *ev,
                                struct rt_repl_actions *out)
{
    const struct rt_repl_isr_change *ic = &ev->msg->u.isr_change;
    struct ms__rrange *r = ms__rcore_find(m, ic->range_id);
    int rc = r == NULL ? RT_ENOTFOUND : ms__rcore_isr_check(r, ev->peer, ic);
    if (rc != 0) {
        ms__rcore_isr_resp(ev->peer, ic->range_id, rc, r ? r->conf.epoch : 0,
                           out);
        return 0;
    }
    struct rt_repl_conf next = r->conf;
    size_t k = 0;
    for (size_t i = 0; i < next.n_isr; i++) {
        bool gone = false;
        for (size_t j = 0; j < ic->n_remove; j++) {
            gone |= next.isr[i] == ic->remove[j];
        }
        if (!gone) {
            next.isr[k++] = next.isr[i];
        }
    }
    next.n_isr = k;
    for (size_t j = 0; j < ic->n_add; j++) {
        ms__rcore_set_role(&next, ic->add[j], RT_REPL_ROLE_SECONDARY);
        next.isr[next.n_isr++] = ic->add[j];
    }
    r->prop_drop = 0;
    if (r->state == MS_RCORE_ADDING && ic->add[0] != r->learner) {
        ms__rcore_drop_member(&next, r->learner);
        r->prop_drop = r->learner;
    }
    next.epoch++;
    r->prop_from = ev->peer;
    if (r->state == MS_RCORE_STABLE) {
        r->op_start_ms = ev->now_ms;
    }
    ms__rcore_propose(m, r, MS__ROP_ISR, &next, out);
    return 0;
}

static void ms__rcore_to_assigning(struct ms_rcore *m,
                                   struct ms__rrange *r,
                                   const char *what,
                                   uint64_t also,
                                   uint64_t now,
                                   struct rt_repl_actions *out)
{
    ms__rcore_set_state(r, MS_RCORE_ASSIGNING);
    r->op_what = what;
    ms__rcore_assign_all(r, also, out);
    r->assign_at = now + m->cfg.resend_ms;
}

/* MS__ROP_REMOVE committed: the removed server gets the assignment
 * without the range (it drops its copy). From STABLE the primary's answer
 * is waited for (ASSIGNING, then EVENT "replica_removed"); in ADDING the
 * learner's copy goes on and the event goes out at once. */
static void ms__rcore_removed(struct ms_rcore *m,
                              struct ms__rrange *r,
                              uint64_t now,
                              struct rt_repl_actions *out)
{
    if (r->state == MS_RCORE_ADDING) {
        ms__rcore_assign_all(r, r->prop_drop, out);
        ms__rcore_event(r, "replica_removed", 0, now - r->op_start_ms, out);
        return;
    }
    ms__rcore_to_assigning(m, r, "replica_removed", r->prop_drop, now, out);
}

static int ms__rcore_committed(struct ms_rcore *m,
                               const struct rt_repl_event *ev,
                               struct rt_repl_actions *out)
{
    struct ms__rrange *r = NULL;
    for (size_t i = 0; i < m->n_ranges && r == NULL; i++) {
        if (m->ranges[i]->prop != MS__ROP_NONE &&
            m->ranges[i]->prop_id == ev->io_id) {
            r = m->ranges[i];
        }
    }
    if (r == NULL) {
        return RT_EINVAL;
    }
    enum ms__rop kind = r->prop;
    r->prop = MS__ROP_NONE;
    if (ev->code != 0) {
        if (kind == MS__ROP_ISR) {
            ms__rcore_isr_resp(r->prop_from, r->conf.range_id, ev->code,
                               r->conf.epoch, out);
        }
        ms__rcore_event(r, "stale", ev->code, ev->now_ms - r->op_start_ms, out);
        return 0;
    }
    uint64_t old_primary = r->conf.primary_id;
    uint64_t learner = r->learner;
    bool xfer = r->conf.seal_kind == RT_REPL_SEAL_TRANSFER;
    r->conf = r->prop_conf;
    switch (kind) {
        case MS__ROP_SEAL_INTENT:
            ms__rcore_enter_sealing(r, ev->now_ms);
            ms__rcore_transfer_sealed(r, ev->now_ms);
            ms__rcore_event(r, "seal", 0, ev->now_ms - r->op_start_ms, out);
            break;
        case MS__ROP_FAILOVER:
            ms__rcore_to_assigning(m, r, xfer ? "transfer" : "failover",
                                   old_primary, ev->now_ms, out);
            break;
        case MS__ROP_CANCEL:
            ms__rcore_to_assigning(m, r, "failover_cancelled", 0, ev->now_ms,
                                   out);
            break;
        case MS__ROP_ISR: {
            ms__rcore_isr_resp(r->prop_from, r->conf.range_id, 0, r->conf.epoch,
                               out);
            if (r->prop_drop != 0) {
                ms__rcore_event(r, "learner_aborted", 0,
                                ev->now_ms - r->op_start_ms, out);
            }
            ms__rcore_to_assigning(m, r, "isr_change", r->prop_drop, ev->now_ms,
                                   out);
            break;
        }
        case MS__ROP_LEARNER:
            ms__rcore_set_state(r, MS_RCORE_ADDING);
            for (size_t i = 0; i < r->conf.n_members; i++) {
                if (r->conf.members[i].role == RT_REPL_ROLE_LEARNER) {
                    r->learner = r->conf.members[i].server_id;
                }
            }
            ms__rcore_learner_arm(m, r, ev->now_ms);
            ms__rcore_assign_all(r, 0, out);
            break;
        case MS__ROP_LEARNER_OUT:
            /* The primary must hear of the new epoch (a lost ASSIGN
             * would leave it asking changes at the old one): wait for
             * its answer like any other commit; the event is now. */
            ms__rcore_event(r, "learner_failed", RT_ETIMEDOUT,
                            ev->now_ms - r->op_start_ms, out);
            r->learner = 0;
            ms__rcore_to_assigning(m, r, NULL, learner, ev->now_ms, out);
            break;
        case MS__ROP_REMOVE:
            ms__rcore_removed(m, r, ev->now_ms, out);
            break;
        case MS__ROP_NONE:
            break;
    }
    return 0;
}

static int ms__rcore_assign_resp(struct ms_rcore *m,
                                 const struct rt_repl_event *ev,
                                 struct rt_repl_actions *out)
{
    const struct rt_repl_assign_resp *ar = &ev->msg->u.assign_resp;
    struct ms__rrange *r = ms__rcore_find(m, ar->range_id);
    if (r != NULL && ar->code == RT_ENOTPRIMARY &&
        ev->peer == r->conf.primary_id && ar->epoch == r->conf.epoch &&
        r->conf.n_isr > 1) {
        /* The primary restarted: fail it over (ms__rcore_eval_once). */
        r->restarted_pe = r->conf.primary_epoch;
        return 0;
    }
    if (r == NULL || r->state != MS_RCORE_ASSIGNING ||
        ev->peer != r->conf.primary_id || ar->epoch != r->conf.epoch ||
        ar->code != 0) {
        return 0; /* late, duplicate, or from another replica */
    }
    ms__rcore_set_state(r, MS_RCORE_STABLE);
    if (r->op_what != NULL) {
        ms__rcore_event(r, r->op_what, 0, ev->now_ms - r->op_start_ms, out);
    }
    return 0;
}

int ms_rcore_step(struct ms_rcore *m,
                  const struct rt_repl_event *ev,
                  struct rt_repl_actions *out)
{
    int rc = RT_EINVAL;
    switch (ev->kind) {
        case RT_REPL_EV_MSG:
            if (ev->msg == NULL) {
                break;
            }
            switch (ev->msg->kind) {
                case RT_REPL_MSG_HEARTBEAT: {
                    struct ms__rserver *s =
                        ms__rcore_server(m, ev->peer, ev->now_ms);
                    s->heard_ms = ev->now_ms;
                    s->down = false;
                    if (ev->msg->u.heartbeat.stalled && !s->stalled) {
                        s->stalled_ms = ev->now_ms;
                    }
                    s->stalled = ev->msg->u.heartbeat.stalled != 0;
                    rc = 0;
                    break;
                }
                case RT_REPL_MSG_SEAL_RESP:
                    rc = ms__rcore_seal_resp(m, ev);
                    break;
                case RT_REPL_MSG_ISR_CHANGE:
                    rc = ms__rcore_isr_change(m, ev, out);
                    break;
                case RT_REPL_MSG_ASSIGN_RESP:
                    rc = ms__rcore_assign_resp(m, ev, out);
                    break;
                default:
                    break;
            }
            break;
        case RT_REPL_EV_CONN: {
            struct ms__rserver *s = ms__rcore_server(m, ev->peer, ev->now_ms);
            if (ev->code == 0) {
                s->down = false;
            } else if (!s->down) {
                s->down = true;
                s->down_ms = ev->now_ms;
            }
            rc = 0;
            break;
        }
        case RT_REPL_EV_TIMER:
            if (ev->timer_id == MS_RCORE_TIMER_TICK) {
                m->timer_at = 0;
                rc = 0;
            }
            break;
        case RT_REPL_EV_COMMITTED:
            rc = ms__rcore_committed(m, ev, out);
            break;
        default:
            break;
    }
    if (rc == 0) {
        ms__rcore_eval(m, ev->now_ms, out);
    }
    ms__rcore_arm(m, ev->now_ms, out);
    return rc;
}

/* Inspection */

/* What ms_rcore_range_info.op says of @r. */
static const char *ms__rcore_op_name(const struct ms__rrange *r)
{
    const struct rt_repl_conf *c = &r->conf;
    switch (r->state) {
        case MS_RCORE_SEALING:
            return c->seal_to ? "transfer" : "failover";
        case MS_RCORE_ASSIGNING:
            return r->op_what;
        case MS_RCORE_ADDING:
            return "learner";
        case MS_RCORE_STABLE:
        case MS_RCORE__NR:
            break;
    }
    switch (r->prop) {
        case MS__ROP_SEAL_INTENT:
            return r->prop_conf.seal_to ? "transfer" : "failover";
        case MS__ROP_ISR:
            return "isr_change";
        case MS__ROP_LEARNER:
        case MS__ROP_LEARNER_OUT:
            return "learner";
        case MS__ROP_REMOVE:
            return "replica_removed";
        case MS__ROP_FAILOVER:
            return "failover";
        case MS__ROP_CANCEL:
            return "failover_cancelled";
        case MS__ROP_NONE:
            break;
    }
    return NULL;
}

int ms_rcore_range_get(const struct ms_rcore *m,
                       uint64_t range_id,
                       struct ms_rcore_range_info *out)
{
    const struct ms__rrange *r = ms__rcore_find(m, range_id);
    if (r == NULL) {
        return RT_ENOTFOUND;
    }
    *out = (struct ms_rcore_range_info){
        .state = r->state,
        .conf = r->conf,
        .proposing = r->prop != MS__ROP_NONE,
        .n_sealed = r->n_sealed,
        .op = ms__rcore_op_name(r),
        .op_start_ms = r->op_start_ms,
        .restarted = ms__rcore_restarted(r),
    };
    if (!out->op) {
        out->op_start_ms = 0;
    }
    return 0;
}

void ms_rcore_dump(const struct ms_rcore *m, FILE *f)
{
    for (size_t i = 0; i < m->n_ranges; i++) {
        const struct ms__rrange *r = m->ranges[i];
        const struct rt_repl_conf *c = &r->conf;
        fprintf(f,
                "master range %" PRIu64 " %s epoch %" PRIu64 " primary %" PRIu64
                " (since %" PRIu64 ") seal_epoch %" PRIu64
                " proposing %d sealed %zu isr",
                c->range_id, ms_rcore_state_name(r->state), c->epoch,
                c->primary_id, c->primary_epoch, c->seal_epoch,
                r->prop != MS__ROP_NONE, r->n_sealed);
        for (size_t j = 0; j < c->n_isr; j++) {
            fprintf(f, " %" PRIu64, c->isr[j]);
        }
        fprintf(f, "\n");
    }
    for (size_t i = 0; i < m->n_servers; i++) {
        const struct ms__rserver *s = &m->servers[i];
        fprintf(f, "master server %" PRIu64 " heard %" PRIu64 " down %d\n",
                s->id, s->heard_ms, s->down);
    }
}
