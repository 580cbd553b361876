/* sim_repl: the deterministic simulator of range replication
 * (DESIGN-replication.md §11.2), write path without failures so far.
 *
 * One thread, one seeded PRNG, one priority queue of timed events (the
 * world of sim_net.h). Three simulated partition servers each run the
 * real ps_rcore over an in-memory store (a key -> value array plus the
 * applied sequence of groups) whose
 * writes become durable only at their DISK_DONE, one per node in FIFO
 * order (one writer, one disk). One range, ISR {P, S1, S2}, P primary.
 * Clients send writes of unique values to P, whose writer groups whatever
 * is queued while a group is on disk. The network delays (heavy tail),
 * reorders, duplicates and loses messages; nothing crashes yet.
 *
 * Checked after every step:
 *   P2  every acknowledged write is durable on every ISR member (its LSN
 *       is in the member's durable sequence with the primary's content);
 *   P3  every replica's durable applied sequence is a prefix of the
 *       primary's (same LSNs in order, same content).
 * At the end, once the network is quiet: every write was answered OK, all
 * replicas hold the same sequence and values, and the values are those of
 * the last write per key in LSN order.
 *
 * Usage: sim_repl [--mutate NAME --expect PROP]
 *   SIM_SEEDS=N  seeds 1..N (default 500); SIM_OPS=N writes per seed
 *   (default 500); SIM_SEED=s  replays seed s alone with a trace.
 *   --mutate ack-primary-only|accept-gap|no-resend runs ps_rcore with that
 *   test-only mutation and succeeds only if some seed violates PROP (P2,
 *   P3, live, end): it tests the checker. */
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ps_rcore.h"
#include "rt_alloc.h"
#include "rt_err.h"
#include "rt_rand.h"
#include "rt_repl_ev.h"
#include "sim_net.h"

#define SIM_NODES 3
#define SIM_KEYS 16
#define SIM_RANGE 7
#define SIM_TRACE_LINES 300

/* What the schedules exercised, summed over the seeds (printed at the end
 * so a change that stops exercising a path shows). */
static struct
{
    uint64_t groups, appends, acks, lost, duplicated, gaps, timers, events;
} sim_totals;

/* Fixture */

enum sim_ev_kind { SIM_DELIVER, SIM_DISK, SIM_TIMER, SIM_CLIENT };

struct sim_ev
{
    struct sim_item it; /* first: the queue's head */
    enum sim_ev_kind kind;
    int node;
    uint64_t from;          /* DELIVER */
    struct rt_repl_msg msg; /* DELIVER; an append's records are @blob */
    uint8_t *blob;          /* DELIVER, DISK: owned */
    size_t blob_len;
    uint64_t lsn;   /* DISK */
    uint64_t gen;   /* TIMER */
    uint64_t *reqs; /* DISK on the primary: owned */
    size_t n_reqs;
};

struct sim_node
{
    uint64_t id;
    struct ps_rcore *core;
    uint64_t vals[SIM_KEYS]; /* durable */
    uint64_t *seq;           /* durable: content hash of LSN i + 1 */
    size_t seq_n, seq_cap;
    uint64_t disk_free_at;
    uint64_t timer_gen;
    /* The primary's writer. */
    uint64_t *queue;
    size_t queue_n, queue_cap;
    bool group_on_disk;
    uint64_t wlsn;
};

struct sim_req
{
    uint32_t key;
    uint64_t value;
    uint64_t lsn;
    int replied; /* 0, or 1 + code */
    int32_t code;
};

struct sim
{
    uint64_t seed;
    struct sim_net w; /* PRNG, clock, queue, network, trace, verdict */
    enum ps_rcore_mutation mutation;
    struct sim_node nodes[SIM_NODES];
    struct sim_req *reqs;
    size_t n_reqs, ops;
    uint64_t max_acked_lsn;
    struct rt_repl_actions acts;
    /* Drawn from the seed, after the network. */
    uint64_t disk_max;
    uint64_t events;
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

static struct sim_ev *sim_ev_new(enum sim_ev_kind kind, int node, uint64_t at)
{
    struct sim_ev *e = rt_xcalloc(1, sizeof(*e));
    e->kind = kind;
    e->node = node;
    e->it.at = at;
    return e;
}

static int sim_node_of(uint64_t id)
{
    return (int)id - 1;
}

/* Makes group @lsn durable on @nd: values and the applied sequence. */
static void sim_apply(struct sim *s,
                      struct sim_node *nd,
                      uint64_t lsn,
                      const uint8_t *p,
                      size_t n)
{
    for (size_t off = 0; off + 12 <= n; off += 12) {
        uint32_t k;
        uint64_t v;
        memcpy(&k, p + off, 4);
        memcpy(&v, p + off + 4, 8);
        nd->vals[k] = v;
    }
    if (nd->seq_n == nd->seq_cap) {
        nd->seq_cap = nd->seq_cap ? 2 * nd->seq_cap : 64;
        nd->seq = rt_xrealloc(nd->seq, nd->seq_cap * sizeof(*nd->seq));
    }
    uint64_t h = sim_hash(p, n);
    /* P3: the primary's sequence is the reference; a replica applies only
     * what the primary made durable first. */
    struct sim_node *pn = &s->nodes[0];
    if (nd != pn) {
        if (lsn != nd->seq_n + 1) {
            sim_fail(&s->w, "P3",
                     "node %" PRIu64 " applied lsn %" PRIu64 " after %zu",
                     nd->id, lsn, nd->seq_n);
        } else if (lsn > pn->seq_n || pn->seq[lsn - 1] != h) {
            sim_fail(&s->w, "P3",
                     "node %" PRIu64 " lsn %" PRIu64 " is not the primary's",
                     nd->id, lsn);
        }
    }
    nd->seq[nd->seq_n++] = h;
}

/* P2 after every step: the highest acknowledged LSN (replies go out in
 * LSN order) is durable on every ISR member; with P3 its content is the
 * primary's. */
static void sim_check_p2(struct sim *s)
{
    for (int i = 0; i < SIM_NODES; i++) {
        if (s->nodes[i].seq_n < s->max_acked_lsn) {
            sim_fail(&s->w, "P2",
                     "lsn %" PRIu64 " acknowledged, node %" PRIu64
                     " has %zu durable",
                     s->max_acked_lsn, s->nodes[i].id, s->nodes[i].seq_n);
        }
    }
}

/* Executes the actions node @ni asked for. */
static void sim_run_actions(struct sim *s, int ni)
{
    struct sim_node *nd = &s->nodes[ni];
    for (size_t i = 0; i < s->acts.n; i++) {
        const struct rt_repl_action *a = &s->acts.v[i];
        switch (a->kind) {
            case RT_REPL_ACT_SEND: {
                int copies = sim_net_copies(&s->w, true);
                sim_totals.lost += copies == 0;
                sim_totals.duplicated += copies == 2;
                if (a->msg.kind == RT_REPL_MSG_APPEND) {
                    sim_totals.appends++;
                } else {
                    sim_totals.acks++;
                    sim_totals.gaps += a->msg.u.ack.code == RT_ELSNGAP;
                }
                const char *what =
                    a->msg.kind == RT_REPL_MSG_APPEND ? "append" : "ack";
                uint64_t lsn = a->msg.kind == RT_REPL_MSG_APPEND
                                   ? a->msg.u.append.lsn
                                   : a->msg.u.ack.applied_lsn;
                sim_tracef(
                    &s->w,
                    "n%" PRIu64 " send %s %" PRIu64 " to n%" PRIu64
                    " code %d x%d",
                    nd->id, what, lsn, a->peer,
                    a->msg.kind == RT_REPL_MSG_ACK ? a->msg.u.ack.code : 0,
                    copies);
                for (int c = 0; c < copies; c++) {
                    uint64_t d = sim_net_delay(&s->w);
                    struct sim_ev *e = sim_ev_new(
                        SIM_DELIVER, sim_node_of(a->peer), s->w.now + d);
                    e->from = nd->id;
                    e->msg = a->msg;
                    if (a->msg.kind == RT_REPL_MSG_APPEND) {
                        e->blob_len = a->msg.u.append.records_len;
                        e->blob =
                            rt_xmemdup(a->msg.u.append.records, e->blob_len);
                        e->msg.u.append.records = e->blob;
                    }
                    sim_ev_push(s, e);
                }
                break;
            }
            case RT_REPL_ACT_WRITE: {
                uint64_t start =
                    nd->disk_free_at > s->w.now ? nd->disk_free_at : s->w.now;
                nd->disk_free_at =
                    start + 1 + rt_rng_below(&s->w.rng, s->disk_max + 1);
                struct sim_ev *e = sim_ev_new(SIM_DISK, ni, nd->disk_free_at);
                e->lsn = a->lsn;
                e->blob_len = a->msg.u.append.records_len;
                e->blob = rt_xmemdup(a->msg.u.append.records, e->blob_len);
                sim_ev_push(s, e);
                break;
            }
            case RT_REPL_ACT_TIMER:
                nd->timer_gen++;
                if (a->at_ms != 0) {
                    struct sim_ev *e = sim_ev_new(SIM_TIMER, ni, a->at_ms);
                    e->gen = nd->timer_gen;
                    sim_ev_push(s, e);
                }
                break;
            case RT_REPL_ACT_REPLY: {
                struct sim_req *rq = &s->reqs[a->req_id];
                sim_tracef(&s->w,
                           "reply req %" PRIu64 " lsn %" PRIu64 " code %d",
                           a->req_id, rq->lsn, a->code);
                if (rq->replied) {
                    sim_fail(&s->w, "P2", "req %" PRIu64 " answered twice",
                             a->req_id);
                }
                rq->replied = 1;
                rq->code = a->code;
                if (a->code == 0 && rq->lsn > s->max_acked_lsn) {
                    s->max_acked_lsn = rq->lsn;
                }
                break;
            }
            default:
                sim_fail(&s->w, "core", "unexpected action %s",
                         rt_repl_act_kind_name(a->kind));
                break;
        }
    }
    rt_repl_actions_reset(&s->acts);
}

static void sim_step(struct sim *s, int ni, const struct rt_repl_event *ev)
{
    int rc = ps_rcore_step(s->nodes[ni].core, ev, &s->acts);
    if (rc != 0) {
        sim_fail(&s->w, "core", "node %d step %s: %s", ni + 1,
                 rt_repl_ev_kind_name(ev->kind), rt_strerror(rc));
    }
    sim_run_actions(s, ni);
}

/* The primary's writer: one group on disk at a time, holding every write
 * queued when it starts. */
static void sim_writer_start(struct sim *s)
{
    struct sim_node *p = &s->nodes[0];
    if (p->group_on_disk || p->queue_n == 0) {
        return;
    }
    uint64_t start = p->disk_free_at > s->w.now ? p->disk_free_at : s->w.now;
    p->disk_free_at = start + 1 + rt_rng_below(&s->w.rng, s->disk_max + 1);
    struct sim_ev *e = sim_ev_new(SIM_DISK, 0, p->disk_free_at);
    e->lsn = ++p->wlsn;
    e->blob_len = 12 * p->queue_n;
    e->blob = rt_xmalloc(e->blob_len);
    e->reqs = rt_xmemdup(p->queue, p->queue_n * sizeof(*p->queue));
    e->n_reqs = p->queue_n;
    for (size_t i = 0; i < p->queue_n; i++) {
        struct sim_req *rq = &s->reqs[p->queue[i]];
        rq->lsn = e->lsn;
        memcpy(e->blob + 12 * i, &rq->key, 4);
        memcpy(e->blob + 12 * i + 4, &rq->value, 8);
    }
    p->queue_n = 0;
    p->group_on_disk = true;
    sim_totals.groups++;
    sim_ev_push(s, e);
}

static void sim_client(struct sim *s)
{
    uint64_t id = s->n_reqs++;
    struct sim_req *rq = &s->reqs[id];
    rq->key = (uint32_t)rt_rng_below(&s->w.rng, SIM_KEYS);
    rq->value = id + 1; /* unique per write */
    struct rt_repl_event ev = {.kind = RT_REPL_EV_CLIENT_WRITE,
                               .now_ms = s->w.now,
                               .range_id = SIM_RANGE,
                               .req_ids = &id,
                               .n_req_ids = 1};
    sim_step(s, 0, &ev);
    if (rq->replied) {
        return;
    }
    struct sim_node *p = &s->nodes[0];
    if (p->queue_n == p->queue_cap) {
        p->queue_cap = p->queue_cap ? 2 * p->queue_cap : 16;
        p->queue = rt_xrealloc(p->queue, p->queue_cap * sizeof(*p->queue));
    }
    p->queue[p->queue_n++] = id;
    sim_writer_start(s);
    if (s->n_reqs < s->ops) {
        uint64_t gap = rt_rng_below(&s->w.rng, 5);
        sim_ev_push(s, sim_ev_new(SIM_CLIENT, 0, s->w.now + gap));
    }
}

static void sim_handle(struct sim *s, struct sim_ev *e)
{
    struct sim_node *nd = &s->nodes[e->node];
    switch (e->kind) {
        case SIM_CLIENT:
            sim_client(s);
            break;
        case SIM_DELIVER: {
            struct rt_repl_event ev = {.kind = RT_REPL_EV_MSG,
                                       .now_ms = s->w.now,
                                       .peer = e->from,
                                       .msg = &e->msg};
            sim_tracef(
                &s->w, "n%" PRIu64 " recv %s from n%" PRIu64 " lsn %" PRIu64,
                nd->id, e->msg.kind == RT_REPL_MSG_APPEND ? "append" : "ack",
                e->from,
                e->msg.kind == RT_REPL_MSG_APPEND ? e->msg.u.append.lsn
                                                  : e->msg.u.ack.applied_lsn);
            sim_step(s, e->node, &ev);
            break;
        }
        case SIM_DISK: {
            sim_tracef(&s->w, "n%" PRIu64 " disk done lsn %" PRIu64, nd->id,
                       e->lsn);
            sim_apply(s, nd, e->lsn, e->blob, e->blob_len);
            struct rt_repl_event ev = {.kind = RT_REPL_EV_DISK_DONE,
                                       .now_ms = s->w.now,
                                       .range_id = SIM_RANGE,
                                       .lsn = e->lsn,
                                       .records = e->blob,
                                       .records_len = e->blob_len,
                                       .req_ids = e->reqs,
                                       .n_req_ids = e->n_reqs};
            sim_step(s, e->node, &ev);
            if (e->node == 0) {
                nd->group_on_disk = false;
                sim_writer_start(s);
            }
            break;
        }
        case SIM_TIMER:
            if (e->gen == nd->timer_gen) {
                struct rt_repl_event ev = {.kind = RT_REPL_EV_TIMER,
                                           .now_ms = s->w.now,
                                           .timer_id = PS_RCORE_TIMER_RESEND};
                sim_tracef(&s->w, "n%" PRIu64 " timer", nd->id);
                sim_totals.timers++;
                sim_step(s, e->node, &ev);
            }
            break;
    }
}

/* The end: everything answered, all replicas equal to the model. */
static void sim_check_end(struct sim *s)
{
    uint64_t model[SIM_KEYS] = {0};
    uint64_t model_lsn[SIM_KEYS] = {0};
    for (size_t i = 0; i < s->n_reqs; i++) {
        const struct sim_req *rq = &s->reqs[i];
        if (!rq->replied || rq->code != 0) {
            sim_fail(&s->w, "end", "req %zu not answered OK", i);
            return;
        }
        /* Within a group the later request wins: they are in id order. */
        if (rq->lsn >= model_lsn[rq->key]) {
            model[rq->key] = rq->value;
            model_lsn[rq->key] = rq->lsn;
        }
    }
    const struct sim_node *p = &s->nodes[0];
    for (int n = 0; n < SIM_NODES; n++) {
        const struct sim_node *nd = &s->nodes[n];
        if (nd->seq_n != p->seq_n ||
            memcmp(nd->seq, p->seq, p->seq_n * sizeof(*p->seq)) != 0 ||
            memcmp(nd->vals, model, sizeof(model)) != 0) {
            sim_fail(&s->w, "end",
                     "node %" PRIu64
                     " differs (%zu groups, "
                     "primary %zu)",
                     nd->id, nd->seq_n, p->seq_n);
            return;
        }
        struct ps_rcore_range_info info;
        ps_rcore_range_get(nd->core, SIM_RANGE, &info);
        if (info.applied_lsn != p->seq_n ||
            (n == 0 && (info.commit_lsn != p->seq_n || info.n_held != 0 ||
                        info.n_buffered != 0))) {
            sim_fail(&s->w, "end", "node %" PRIu64 " core not quiet", nd->id);
            return;
        }
    }
}

static void sim_free(struct sim *s)
{
    sim_net_close(&s->w, sim_item_free);
    for (int i = 0; i < SIM_NODES; i++) {
        ps_rcore_destroy(s->nodes[i].core);
        free(s->nodes[i].seq);
        free(s->nodes[i].queue);
    }
    free(s->reqs);
    rt_repl_actions_close(&s->acts);
}

static void sim_print_trace_and_cores(struct sim *s)
{
    sim_print_trace(&s->w);
    for (int i = 0; i < SIM_NODES; i++) {
        ps_rcore_dump(s->nodes[i].core, stderr);
    }
}

/* Runs one seed; returns the violated property or NULL. */
static const char *sim_run(uint64_t seed,
                           size_t ops,
                           enum ps_rcore_mutation mutation,
                           bool trace)
{
    struct sim *s = rt_xcalloc(1, sizeof(*s));
    s->seed = seed;
    s->mutation = mutation;
    s->ops = ops;
    sim_net_init(&s->w, seed, trace, SIM_TRACE_LINES);
    rt_repl_actions_init(&s->acts);
    sim_net_draw(&s->w, 0.10, 0.05, 50);
    s->disk_max = 1 + rt_rng_below(&s->w.rng, 5);
    static const uint32_t inflights[] = {1, 2, 4, 32};
    struct ps_rcore_config cfg = {
        .inflight = inflights[rt_rng_below(&s->w.rng, 4)],
        .resend_ms = 100 + rt_rng_below(&s->w.rng, 200),
        .mutation = mutation,
    };
    struct ps_rcore_assignment as = {.range_id = SIM_RANGE,
                                     .epoch = 1,
                                     .primary_id = 1,
                                     .isr = {1, 2, 3},
                                     .n_isr = 3};
    for (int i = 0; i < SIM_NODES; i++) {
        cfg.self_id = (uint64_t)i + 1;
        s->nodes[i].id = cfg.self_id;
        if (ps_rcore_create(&cfg, &s->nodes[i].core) != 0 ||
            ps_rcore_assign(s->nodes[i].core, &as, &s->acts) != 0) {
            sim_fail(&s->w, "setup", "node %d", i + 1);
        }
        rt_repl_actions_reset(&s->acts);
    }
    s->reqs = rt_xcalloc(ops + 1, sizeof(*s->reqs));
    sim_tracef(&s->w,
               "seed %" PRIu64 " loss %.3f dup %.3f delay<=%" PRIu64
               " disk<=%" PRIu64 " inflight %u resend %" PRIu64,
               seed, s->w.loss, s->w.dup, s->w.delay_max, s->disk_max,
               cfg.inflight, cfg.resend_ms);
    if (ops > 0) {
        sim_ev_push(s, sim_ev_new(SIM_CLIENT, 0, 0));
    }
    uint64_t limit = 2000 * (uint64_t)ops + 100000;
    struct sim_item *it;
    while (s->w.violated == NULL && (it = sim_next(&s->w, UINT64_MAX))) {
        struct sim_ev *e = (struct sim_ev *)it;
        sim_handle(s, e);
        sim_ev_free(e);
        sim_totals.events++;
        sim_check_p2(s);
        if (++s->events > limit) {
            sim_fail(&s->w, "live", "no quiet network after %" PRIu64 " events",
                     s->events);
        }
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
    size_t ops;
    enum ps_rcore_mutation mutation;
};

static const char *sim_run_seed(uint64_t seed, bool trace, void *ctx)
{
    const struct sim_opts *o = ctx;
    return sim_run(seed, o->ops, o->mutation, trace);
}

/* The mutations --mutate names: ps_rcore's. */
static int sim_mutation_of(const char *name, void *ctx)
{
    struct sim_opts *o = ctx;
    if (strcmp(name, "ack-primary-only") == 0) {
        o->mutation = PS_RCORE_MUT_ACK_PRIMARY_ONLY;
    } else if (strcmp(name, "accept-gap") == 0) {
        o->mutation = PS_RCORE_MUT_ACCEPT_GAP;
    } else if (strcmp(name, "no-resend") == 0) {
        o->mutation = PS_RCORE_MUT_NO_RESEND;
    } else {
        return -1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    struct sim_opts opts = {.ops = sim_env("SIM_OPS", 500),
                            .mutation = PS_RCORE_MUT_NONE};
    const char *expect = NULL;
    if (sim_args(argc, argv, "sim_repl", sim_mutation_of, &opts, &expect) !=
        0) {
        return 2;
    }
    char replay[64];
    snprintf(replay, sizeof(replay), " SIM_OPS=%zu", opts.ops);
    uint64_t seeds = 0;
    int rc = sim_drive(sim_run_seed, &opts, expect, 500, replay, &seeds);
    if (rc >= 0) {
        return rc;
    }
    size_t ops = opts.ops;
    printf("%" PRIu64 " seeds x %zu writes: ok (%" PRIu64 " events, %" PRIu64
           " groups, %" PRIu64 " appends, %" PRIu64 " acks, %" PRIu64
           " lost, %" PRIu64 " duplicated, %" PRIu64 " gap NACKs, %" PRIu64
           " resend timers)\n",
           seeds, ops, sim_totals.events, sim_totals.groups, sim_totals.appends,
           sim_totals.acks, sim_totals.lost, sim_totals.duplicated,
           sim_totals.gaps, sim_totals.timers);
    return 0;
}
