/* Unit tests of the replica core (ps_rcore.h) stepped by hand: one primary
 * core and one secondary core, with the actions of each step inspected.
 * The pipeline window, cw over the ISR, replies in LSN order, the
 * secondary's duplicate / gap / old-epoch answers, the primary's rewind on
 * RT_ELSNGAP, on its resend timer and on a reconnect, deposition on
 * RT_ESEALED, refused events, assignment at a durable LSN, later epochs,
 * forgetting a range, and writes held at the last LSN. Failover: SEAL
 * (checks, persist before the answer, grace, fence), promotion of a sealed
 * secondary (with an ISR of itself alone too), the resumption after a
 * cancel, stepping down, and ps_rcore_load() after a restart; appends to a
 * primary, acks to a group's sender, promotion after the writer drained. ISR
 * shrink: the ISR_CHANGE after late acks or a link down, one in flight,
 * released by the assignment; the write-hold limit. Catch-up of replicas
 * outside the ISR: probe, plain catch-up or full copy, the join and its
 * counting for cw, the replica's side of a copy, divergence on a duplicate
 * of another generation. tests/sim runs the same core at scale. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ps_rcore.h"
#include "rt_err.h"
#include "rt_repl_ev.h"

/* Fixture */

#define R 5 /* range id */

struct fx
{
    struct ps_rcore *p;  /* node 1, primary */
    struct ps_rcore *s2; /* node 2, secondary */
    struct rt_repl_actions out;
};

static int setup(void **state)
{
    struct fx *f = calloc(1, sizeof(*f));
    struct ps_rcore_config cfg = {.inflight = 2, .resend_ms = 100};
    struct ps_rcore_assignment a = {.range_id = R,
                                    .epoch = 3,
                                    .primary_id = 1,
                                    .isr = {1, 2, 3},
                                    .n_isr = 3};
    rt_repl_actions_init(&f->out);
    cfg.self_id = 1;
    assert_int_equal(ps_rcore_create(&cfg, &f->p), 0);
    assert_int_equal(ps_rcore_assign(f->p, &a, &f->out), 0);
    cfg.self_id = 2;
    assert_int_equal(ps_rcore_create(&cfg, &f->s2), 0);
    assert_int_equal(ps_rcore_assign(f->s2, &a, &f->out), 0);
    assert_int_equal(f->out.n, 0);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fx *f = *state;
    ps_rcore_destroy(f->p);
    ps_rcore_destroy(f->s2);
    rt_repl_actions_close(&f->out);
    free(f);
    return 0;
}

/* Helpers */

/* The primary's writer made group @lsn durable, holding request @req. */
static int local_done(struct fx *f, uint64_t now, uint64_t lsn, uint64_t req)
{
    rt_repl_actions_reset(&f->out);
    uint8_t rec[3] = {1, 2, (uint8_t)lsn};
    struct rt_repl_event ev = {.kind = RT_REPL_EV_DISK_DONE,
                               .now_ms = now,
                               .range_id = R,
                               .lsn = lsn,
                               .records = rec,
                               .records_len = sizeof(rec),
                               .req_ids = &req,
                               .n_req_ids = 1};
    return ps_rcore_step(f->p, &ev, &f->out);
}

static int ack(struct fx *f,
               uint64_t now,
               uint64_t peer,
               int32_t code,
               uint64_t applied,
               uint64_t epoch)
{
    rt_repl_actions_reset(&f->out);
    struct rt_repl_msg m = {.kind = RT_REPL_MSG_ACK};
    m.u.ack = (struct rt_repl_ack){
        .range_id = R, .code = code, .applied_lsn = applied, .epoch = epoch};
    struct rt_repl_event ev = {
        .kind = RT_REPL_EV_MSG, .now_ms = now, .peer = peer, .msg = &m};
    return ps_rcore_step(f->p, &ev, &f->out);
}

static int append(struct fx *f, uint64_t lsn, uint64_t epoch)
{
    rt_repl_actions_reset(&f->out);
    uint8_t rec[1] = {(uint8_t)lsn};
    struct rt_repl_msg m = {.kind = RT_REPL_MSG_APPEND};
    m.u.append = (struct rt_repl_append){.range_id = R,
                                         .epoch = epoch,
                                         .lsn = lsn,
                                         .records = rec,
                                         .records_len = 1};
    struct rt_repl_event ev = {
        .kind = RT_REPL_EV_MSG, .now_ms = 0, .peer = 1, .msg = &m};
    return ps_rcore_step(f->s2, &ev, &f->out);
}

static int applied(struct fx *f, uint64_t lsn)
{
    rt_repl_actions_reset(&f->out);
    struct rt_repl_event ev = {
        .kind = RT_REPL_EV_DISK_DONE, .range_id = R, .lsn = lsn};
    return ps_rcore_step(f->s2, &ev, &f->out);
}

/* How many actions of @kind are in the list; the last one in *last. */
static size_t count(const struct fx *f,
                    enum rt_repl_act_kind kind,
                    const struct rt_repl_action **last)
{
    size_t n = 0;
    for (size_t i = 0; i < f->out.n; i++) {
        if (f->out.v[i].kind == kind) {
            n++;
            if (last != NULL) {
                *last = &f->out.v[i];
            }
        }
    }
    return n;
}

/* Appends sent to @peer with LSNs from..to (0, 0: none). */
static void assert_appends(const struct fx *f,
                           uint64_t peer,
                           uint64_t from,
                           uint64_t to)
{
    uint64_t want = from;
    for (size_t i = 0; i < f->out.n; i++) {
        const struct rt_repl_action *a = &f->out.v[i];
        if (a->kind == RT_REPL_ACT_SEND && a->peer == peer &&
            a->msg.kind == RT_REPL_MSG_APPEND) {
            assert_true(from != 0);
            assert_int_equal(a->msg.u.append.lsn, want);
            assert_int_equal(a->msg.u.append.epoch, 3);
            want++;
        }
    }
    assert_int_equal(want, from == 0 ? 0 : to + 1);
}

/* Tests */

/* Groups go to every peer at once, at most the window unacked per peer;
 * an ack opens the window again. */
static void test_pipeline_window(void **state)
{
    struct fx *f = *state;
    assert_int_equal(local_done(f, 0, 1, 100), 0);
    assert_appends(f, 2, 1, 1);
    assert_appends(f, 3, 1, 1);
    assert_int_equal(count(f, RT_REPL_ACT_TIMER, NULL), 1);
    assert_int_equal(local_done(f, 1, 2, 101), 0);
    assert_appends(f, 2, 2, 2);
    assert_int_equal(local_done(f, 2, 3, 102), 0);
    assert_appends(f, 2, 0, 0); /* window full */
    assert_int_equal(ack(f, 3, 2, 0, 2, 3), 0);
    assert_appends(f, 2, 3, 3);
    assert_appends(f, 3, 0, 0);
    assert_int_equal(count(f, RT_REPL_ACT_REPLY, NULL), 0);
}

/* A write is answered once every ISR member has it, in LSN order; cw is
 * the minimum of the acks. */
static void test_reply_at_cw(void **state)
{
    struct fx *f = *state;
    const struct rt_repl_action *r = NULL;
    struct ps_rcore_range_info info;
    local_done(f, 0, 1, 100);
    local_done(f, 0, 2, 101);
    assert_int_equal(ack(f, 1, 2, 0, 2, 3), 0);
    assert_int_equal(count(f, RT_REPL_ACT_REPLY, NULL), 0);
    assert_int_equal(ack(f, 1, 3, 0, 1, 3), 0);
    assert_int_equal(count(f, RT_REPL_ACT_REPLY, &r), 1);
    assert_int_equal(r->req_id, 100);
    assert_int_equal(r->code, 0);
    assert_int_equal(ps_rcore_range_get(f->p, R, &info), 0);
    assert_int_equal(info.commit_lsn, 1);
    assert_int_equal(info.n_held, 1);
    /* A late, smaller ack changes nothing. */
    assert_int_equal(ack(f, 2, 3, 0, 0, 3), 0);
    assert_int_equal(count(f, RT_REPL_ACT_REPLY, NULL), 0);
    assert_int_equal(ack(f, 2, 3, 0, 2, 3), 0);
    assert_int_equal(count(f, RT_REPL_ACT_REPLY, &r), 1);
    assert_int_equal(r->req_id, 101);
    assert_int_equal(ps_rcore_range_get(f->p, R, &info), 0);
    assert_int_equal(info.n_buffered, 0);
}

/* The secondary applies at accepted + 1 only, acks after DISK_DONE, acks
 * duplicates again without applying, NACKs a gap with its applied LSN and
 * an older epoch with RT_ESEALED. */
static void test_secondary_rules(void **state)
{
    struct fx *f = *state;
    const struct rt_repl_action *a = NULL;
    assert_int_equal(append(f, 1, 3), 0);
    assert_int_equal(count(f, RT_REPL_ACT_WRITE, &a), 1);
    assert_int_equal(a->lsn, 1);
    assert_memory_equal(a->msg.u.append.records, (uint8_t[]){1}, 1);
    assert_int_equal(count(f, RT_REPL_ACT_SEND, NULL), 0);
    assert_int_equal(append(f, 2, 3), 0); /* pipelined: 1 not durable yet */
    assert_int_equal(count(f, RT_REPL_ACT_WRITE, NULL), 1);
    assert_int_equal(append(f, 2, 3), 0); /* in the writer: ignored */
    assert_int_equal(f->out.n, 0);
    assert_int_equal(applied(f, 1), 0);
    assert_int_equal(count(f, RT_REPL_ACT_SEND, &a), 1);
    assert_int_equal(a->peer, 1);
    assert_int_equal(a->msg.u.ack.code, 0);
    assert_int_equal(a->msg.u.ack.applied_lsn, 1);
    assert_int_equal(append(f, 1, 3), 0); /* duplicate */
    assert_int_equal(count(f, RT_REPL_ACT_WRITE, NULL), 0);
    assert_int_equal(count(f, RT_REPL_ACT_SEND, &a), 1);
    assert_int_equal(a->msg.u.ack.applied_lsn, 1);
    assert_int_equal(append(f, 4, 3), 0); /* gap */
    assert_int_equal(count(f, RT_REPL_ACT_SEND, &a), 1);
    assert_int_equal(a->msg.u.ack.code, RT_ELSNGAP);
    assert_int_equal(a->msg.u.ack.applied_lsn, 1);
    assert_int_equal(append(f, 3, 2), 0); /* older epoch */
    assert_int_equal(count(f, RT_REPL_ACT_SEND, &a), 1);
    assert_int_equal(a->msg.u.ack.code, RT_ESEALED);
    assert_int_equal(a->msg.u.ack.epoch, 3);
    assert_int_equal(count(f, RT_REPL_ACT_WRITE, NULL), 0);
}

/* RT_ELSNGAP rewinds the peer's stream to applied + 1, once per position;
 * its applied LSN counts as an ack. */
static void test_gap_rewinds_once(void **state)
{
    struct fx *f = *state;
    local_done(f, 0, 1, 100);
    local_done(f, 0, 2, 101);
    assert_int_equal(ack(f, 1, 2, RT_ELSNGAP, 0, 3), 0);
    assert_appends(f, 2, 1, 2);
    assert_int_equal(ack(f, 1, 2, RT_ELSNGAP, 0, 3), 0);
    assert_appends(f, 2, 0, 0);
    assert_int_equal(ack(f, 1, 2, RT_ELSNGAP, 1, 3), 0);
    assert_appends(f, 2, 2, 2);
}

/* The resend timer resends from acked + 1 to a peer without progress for
 * resend_ms, and not to one that progressed. */
static void test_resend_timer(void **state)
{
    struct fx *f = *state;
    local_done(f, 0, 1, 100);
    local_done(f, 0, 2, 101);
    assert_int_equal(ack(f, 60, 3, 0, 1, 3), 0);
    rt_repl_actions_reset(&f->out);
    struct rt_repl_event ev = {.kind = RT_REPL_EV_TIMER,
                               .now_ms = 100,
                               .timer_id = PS_RCORE_TIMER_RESEND};
    assert_int_equal(ps_rcore_step(f->p, &ev, &f->out), 0);
    assert_appends(f, 2, 1, 2);
    assert_appends(f, 3, 0, 0); /* acked at 60: 40 ms ago */
    assert_int_equal(count(f, RT_REPL_ACT_TIMER, NULL), 1);
}

/* An RT_ESEALED NACK from a newer epoch deposes the primary: its held
 * writes get RT_ETIMEDOUT (outcome unknown); a group the writer finishes
 * afterwards is applied and its writes get RT_ETIMEDOUT too. */
static void test_sealed_deposes(void **state)
{
    struct fx *f = *state;
    const struct rt_repl_action *r = NULL;
    struct ps_rcore_range_info info;
    local_done(f, 0, 1, 100);
    assert_int_equal(ack(f, 1, 2, RT_ESEALED, 0, 3), 0); /* not newer */
    assert_int_equal(count(f, RT_REPL_ACT_REPLY, NULL), 0);
    assert_int_equal(ack(f, 1, 2, RT_ESEALED, 0, 4), 0);
    assert_int_equal(count(f, RT_REPL_ACT_REPLY, &r), 1);
    assert_int_equal(r->code, RT_ETIMEDOUT);
    assert_int_equal(ps_rcore_range_get(f->p, R, &info), 0);
    assert_int_equal(info.role, PS_RCORE_PRIMARY);
    assert_int_equal(info.state, PS_RPRI_DEPOSED);
    assert_int_equal(local_done(f, 2, 2, 101), 0);
    assert_int_equal(count(f, RT_REPL_ACT_REPLY, &r), 1);
    assert_int_equal(r->req_id, 101);
    assert_int_equal(r->code, RT_ETIMEDOUT);
    assert_int_equal(count(f, RT_REPL_ACT_SEND, NULL), 0);
    assert_int_equal(local_done(f, 2, 4, 102), RT_EINVAL);
}

/* Events that do not fit are refused and change nothing: an ack from
 * outside the ISR or past the last LSN, a group out of LSN order, an
 * append for an unknown range (answered with an error ack), a second
 * assignment of the same range, a client write where I am not primary. */
static void test_refused(void **state)
{
    struct fx *f = *state;
    const struct rt_repl_action *a = NULL;
    local_done(f, 0, 1, 100);
    assert_int_equal(ack(f, 1, 9, 0, 1, 3), RT_EINVAL);
    assert_int_equal(ack(f, 1, 2, 0, 5, 3), RT_EINVAL);
    assert_int_equal(local_done(f, 1, 3, 101), RT_EINVAL);
    rt_repl_actions_reset(&f->out);
    struct rt_repl_msg m = {.kind = RT_REPL_MSG_APPEND};
    m.u.append = (struct rt_repl_append){.range_id = 99, .epoch = 3, .lsn = 1};
    struct rt_repl_event ev = {.kind = RT_REPL_EV_MSG, .peer = 1, .msg = &m};
    assert_int_equal(ps_rcore_step(f->s2, &ev, &f->out), RT_EINVAL);
    assert_int_equal(count(f, RT_REPL_ACT_SEND, &a), 1);
    assert_int_equal(a->msg.u.ack.code, RT_EINVAL);
    struct ps_rcore_assignment as = {
        .range_id = R, .epoch = 3, .primary_id = 1, .isr = {1, 2}, .n_isr = 2};
    assert_int_equal(ps_rcore_assign(f->p, &as, &f->out), RT_EEXIST);
    rt_repl_actions_reset(&f->out);
    uint64_t req = 7;
    struct rt_repl_event cw = {.kind = RT_REPL_EV_CLIENT_WRITE,
                               .range_id = R,
                               .req_ids = &req,
                               .n_req_ids = 1};
    assert_int_equal(ps_rcore_step(f->s2, &cw, &f->out), 0);
    assert_int_equal(count(f, RT_REPL_ACT_REPLY, &a), 1);
    assert_int_equal(a->code, RT_ENOTPRIMARY);
    rt_repl_actions_reset(&f->out);
    assert_int_equal(ps_rcore_step(f->p, &cw, &f->out), 0);
    assert_int_equal(count(f, RT_REPL_ACT_REPLY, NULL), 0);
}

/* A range assigned after a restart starts at its durable LSN: the
 * primary's next group is that LSN + 1 and goes out alone, and the
 * secondary takes it as the next one and acks what it had again. */
static void test_assign_at_lsn(void **state)
{
    struct fx *f = *state;
    const struct rt_repl_action *a = NULL;
    struct ps_rcore_range_info info;
    struct ps_rcore_assignment as = {.range_id = R + 1,
                                     .epoch = 3,
                                     .primary_id = 1,
                                     .isr = {1, 2},
                                     .n_isr = 2,
                                     .lsn = 7};
    assert_int_equal(ps_rcore_assign(f->p, &as, &f->out), 0);
    assert_int_equal(ps_rcore_assign(f->s2, &as, &f->out), 0);
    assert_int_equal(ps_rcore_range_get(f->p, R + 1, &info), 0);
    assert_int_equal(info.applied_lsn, 7);
    assert_int_equal(info.commit_lsn, 7);
    rt_repl_actions_reset(&f->out);
    uint8_t rec = 1;
    uint64_t req = 100;
    struct rt_repl_event ev = {.kind = RT_REPL_EV_DISK_DONE,
                               .range_id = R + 1,
                               .lsn = 8,
                               .records = &rec,
                               .records_len = 1,
                               .req_ids = &req,
                               .n_req_ids = 1};
    assert_int_equal(ps_rcore_step(f->p, &ev, &f->out), 0);
    assert_int_equal(count(f, RT_REPL_ACT_SEND, &a), 1);
    assert_int_equal(a->msg.u.append.lsn, 8);
    struct rt_repl_msg m = {.kind = RT_REPL_MSG_APPEND};
    m.u.append = a->msg.u.append;
    assert_int_equal(m.u.append.records_len, 1);
    m.u.append.records = &rec; /* the list's copy goes with the reset */
    rt_repl_actions_reset(&f->out);
    struct rt_repl_event in = {.kind = RT_REPL_EV_MSG, .peer = 1, .msg = &m};
    assert_int_equal(ps_rcore_step(f->s2, &in, &f->out), 0);
    assert_int_equal(count(f, RT_REPL_ACT_WRITE, &a), 1);
    assert_int_equal(a->lsn, 8);
    m.u.append.lsn = 7;
    rt_repl_actions_reset(&f->out);
    assert_int_equal(ps_rcore_step(f->s2, &in, &f->out), 0);
    assert_int_equal(count(f, RT_REPL_ACT_SEND, &a), 1);
    assert_int_equal(a->msg.u.ack.code, 0);
    assert_int_equal(a->msg.u.ack.applied_lsn, 7);
}

/* A write that is not a new group (another write of the last group, or
 * one that changed nothing) is held until cw reaches the last LSN. */
static void test_hold_at_last(void **state)
{
    struct fx *f = *state;
    const struct rt_repl_action *r = NULL;
    uint64_t req = 200;
    local_done(f, 0, 1, 100);
    rt_repl_actions_reset(&f->out);
    struct rt_repl_event ev = {.kind = RT_REPL_EV_DISK_DONE,
                               .range_id = R,
                               .lsn = 0,
                               .req_ids = &req,
                               .n_req_ids = 1};
    assert_int_equal(ps_rcore_step(f->p, &ev, &f->out), 0);
    assert_int_equal(count(f, RT_REPL_ACT_SEND, NULL), 0);
    assert_int_equal(count(f, RT_REPL_ACT_REPLY, NULL), 0);
    ack(f, 1, 2, 0, 1, 3);
    assert_int_equal(ack(f, 1, 3, 0, 1, 3), 0);
    assert_int_equal(count(f, RT_REPL_ACT_REPLY, NULL), 2);
    /* With cw at the last LSN already, the answer comes at once. */
    rt_repl_actions_reset(&f->out);
    ev.lsn = 1;
    assert_int_equal(ps_rcore_step(f->p, &ev, &f->out), 0);
    assert_int_equal(count(f, RT_REPL_ACT_REPLY, &r), 1);
    assert_int_equal(r->req_id, 200);
}

/* A later epoch that drops a lagging member from the ISR lets cw rise
 * and releases the writes it held; an older epoch or another primary is
 * refused; forgetting the range answers its held writes RT_ETIMEDOUT. */
static void test_update_and_forget(void **state)
{
    struct fx *f = *state;
    const struct rt_repl_action *r = NULL;
    local_done(f, 0, 1, 100);
    local_done(f, 0, 2, 101);
    ack(f, 1, 2, 0, 2, 3);
    assert_int_equal(count(f, RT_REPL_ACT_REPLY, NULL), 0);
    struct ps_rcore_assignment as = {
        .range_id = R, .epoch = 4, .primary_id = 1, .isr = {1, 2}, .n_isr = 2};
    rt_repl_actions_reset(&f->out);
    assert_int_equal(ps_rcore_update(f->p, &as, 2, &f->out), 0);
    assert_int_equal(count(f, RT_REPL_ACT_REPLY, NULL), 2);
    assert_int_equal(ps_rcore_update(f->p, &as, 2, &f->out), RT_ESTALE);
    as.epoch = 5;
    as.primary_id = 2;
    assert_int_equal(ps_rcore_update(f->p, &as, 2, &f->out), RT_EINVAL);
    local_done(f, 3, 3, 102);
    rt_repl_actions_reset(&f->out);
    assert_int_equal(ps_rcore_forget(f->p, R, &f->out), 0);
    assert_int_equal(count(f, RT_REPL_ACT_REPLY, &r), 1);
    assert_int_equal(r->req_id, 102);
    assert_int_equal(r->code, RT_ETIMEDOUT);
    struct ps_rcore_range_info info;
    assert_int_equal(ps_rcore_range_get(f->p, R, &info), RT_ENOTFOUND);
    assert_int_equal(ps_rcore_forget(f->p, R, &f->out), RT_ENOTFOUND);
}

/* A peer's connection coming up restarts its stream at acked + 1 at
 * once; a connection going down sends nothing. */
static void test_conn_up_resends(void **state)
{
    struct fx *f = *state;
    local_done(f, 0, 1, 100);
    local_done(f, 0, 2, 101);
    ack(f, 1, 2, 0, 1, 3);
    rt_repl_actions_reset(&f->out);
    struct rt_repl_event ev = {
        .kind = RT_REPL_EV_CONN, .now_ms = 2, .peer = 2, .up = 0};
    assert_int_equal(ps_rcore_step(f->p, &ev, &f->out), 0);
    assert_appends(f, 2, 0, 0);
    ev.up = 1;
    assert_int_equal(ps_rcore_step(f->p, &ev, &f->out), 0);
    assert_appends(f, 2, 2, 2);
    assert_appends(f, 3, 0, 0);
}

/* Failover helpers: node @n receives a message from @peer. */
static int msg_to(struct fx *f,
                  struct ps_rcore *n,
                  uint64_t now,
                  uint64_t peer,
                  const struct rt_repl_msg *m)
{
    rt_repl_actions_reset(&f->out);
    struct rt_repl_event ev = {
        .kind = RT_REPL_EV_MSG, .now_ms = now, .peer = peer, .msg = m};
    return ps_rcore_step(n, &ev, &f->out);
}

#define MASTER 100

static int seal(struct fx *f, struct ps_rcore *n, uint64_t now, uint64_t e)
{
    struct rt_repl_msg m = {.kind = RT_REPL_MSG_SEAL};
    m.u.seal = (struct rt_repl_seal){
        .range_id = R, .old_epoch = e - 1, .new_epoch = e, .old_primary = 1};
    return msg_to(f, n, now, MASTER, &m);
}

static int assign(struct fx *f,
                  struct ps_rcore *n,
                  uint64_t epoch,
                  uint64_t primary,
                  uint64_t primary_epoch,
                  const uint64_t *isr,
                  size_t n_isr)
{
    struct rt_repl_msg m = {.kind = RT_REPL_MSG_ASSIGN};
    struct rt_repl_conf *c = &m.u.assign;
    c->range_id = R;
    c->epoch = epoch;
    c->primary_id = primary;
    c->primary_epoch = primary_epoch;
    for (uint64_t id = 1; id <= 3; id++) {
        c->members[c->n_members++] = (struct rt_repl_member){
            id, id == primary ? RT_REPL_ROLE_PRIMARY : RT_REPL_ROLE_SECONDARY};
    }
    memcpy(c->isr, isr, n_isr * sizeof(*isr));
    c->n_isr = n_isr;
    return msg_to(f, n, 0, MASTER, &m);
}

/* The last SEND of message kind @mk in the list (NULL: none). */
static const struct rt_repl_action *sent(const struct fx *f, int mk)
{
    const struct rt_repl_action *a = NULL;
    for (size_t i = 0; i < f->out.n; i++) {
        if (f->out.v[i].kind == RT_REPL_ACT_SEND &&
            (int)f->out.v[i].msg.kind == mk) {
            a = &f->out.v[i];
        }
    }
    return a;
}

static struct ps_rcore_range_info info_of(struct ps_rcore *n)
{
    struct ps_rcore_range_info info;
    assert_int_equal(ps_rcore_range_get(n, R, &info), 0);
    return info;
}

/* SEAL checks in the §4 order, the persist before the answer (which
 * counts the append still in the writer), idempotence, and the fence on
 * older-epoch appends. */
static void test_seal(void **state)
{
    struct fx *f = *state;
    const struct rt_repl_action *a = NULL;
    struct rt_repl_msg m = {.kind = RT_REPL_MSG_SEAL};
    m.u.seal = (struct rt_repl_seal){.range_id = 99, .new_epoch = 4};
    assert_int_equal(msg_to(f, f->s2, 0, MASTER, &m), 0);
    assert_int_equal(sent(f, RT_REPL_MSG_SEAL_RESP)->msg.u.seal_resp.code,
                     RT_ENOTFOUND);
    assert_int_equal(seal(f, f->s2, 0, 3), 0);
    assert_int_equal(sent(f, RT_REPL_MSG_SEAL_RESP)->msg.u.seal_resp.code,
                     RT_ESTALE);
    append(f, 1, 3);
    applied(f, 1);
    append(f, 2, 3); /* in the writer when the seal comes */
    assert_int_equal(seal(f, f->s2, 10, 4), 0);
    assert_null(sent(f, RT_REPL_MSG_SEAL_RESP));
    assert_int_equal(count(f, RT_REPL_ACT_WRITE, &a), 1);
    assert_int_equal(a->msg.kind, RT_REPL_MSG_SEAL);
    assert_int_equal(a->msg.u.seal.new_epoch, 4);
    uint64_t io = a->io_id;
    assert_int_equal(info_of(f->s2).state, PS_RSEC_SEALED);
    assert_int_equal(info_of(f->s2).sealed_epoch, 4);
    /* Again while persisting: nothing; an older epoch's append: fenced. */
    assert_int_equal(seal(f, f->s2, 11, 4), 0);
    assert_int_equal(f->out.n, 0);
    assert_int_equal(append(f, 3, 3), 0);
    assert_int_equal(count(f, RT_REPL_ACT_SEND, &a), 1);
    assert_int_equal(a->msg.u.ack.code, RT_ESEALED);
    assert_int_equal(a->msg.u.ack.epoch, 4);
    /* FIFO writer: group 2, then the seal. */
    assert_int_equal(applied(f, 2), 0);
    rt_repl_actions_reset(&f->out);
    struct rt_repl_event done = {
        .kind = RT_REPL_EV_DISK_DONE, .range_id = R, .io_id = io};
    assert_int_equal(ps_rcore_step(f->s2, &done, &f->out), 0);
    a = sent(f, RT_REPL_MSG_SEAL_RESP);
    assert_non_null(a);
    assert_int_equal(a->peer, MASTER);
    assert_int_equal(a->msg.u.seal_resp.code, 0);
    assert_int_equal(a->msg.u.seal_resp.applied_lsn, 2);
    assert_int_equal(a->msg.u.seal_resp.new_epoch, 4);
    /* Same seal again: same answer; an older one: RT_ESTALE. */
    assert_int_equal(seal(f, f->s2, 12, 4), 0);
    assert_int_equal(
        sent(f, RT_REPL_MSG_SEAL_RESP)->msg.u.seal_resp.applied_lsn, 2);
    struct rt_repl_msg old = m;
    old.u.seal.range_id = R;
    old.u.seal.new_epoch = 3;
    assert_int_equal(msg_to(f, f->s2, 13, MASTER, &old), 0);
    assert_int_equal(sent(f, RT_REPL_MSG_SEAL_RESP)->msg.u.seal_resp.code,
                     RT_ESTALE);
}

/* Within the grace after the primary's last append (or the start) a SEAL
 * answers RT_EBUSY with the time left. */
static void test_seal_grace(void **state)
{
    struct fx *f = *state;
    struct ps_rcore *s3 = NULL;
    struct ps_rcore_config cfg = {
        .self_id = 3, .inflight = 2, .resend_ms = 100, .seal_grace_ms = 1000};
    struct ps_rcore_assignment a = {.range_id = R,
                                    .epoch = 3,
                                    .primary_id = 1,
                                    .isr = {1, 2, 3},
                                    .n_isr = 3};
    assert_int_equal(ps_rcore_create(&cfg, &s3), 0);
    assert_int_equal(ps_rcore_assign(s3, &a, &f->out), 0);
    uint8_t rec = 1;
    struct rt_repl_msg m = {.kind = RT_REPL_MSG_APPEND};
    m.u.append = (struct rt_repl_append){
        .range_id = R, .epoch = 3, .lsn = 1, .records = &rec, .records_len = 1};
    assert_int_equal(msg_to(f, s3, 500, 1, &m), 0);
    assert_int_equal(seal(f, s3, 1200, 4), 0);
    const struct rt_repl_action *r = sent(f, RT_REPL_MSG_SEAL_RESP);
    assert_int_equal(r->msg.u.seal_resp.code, RT_EBUSY);
    assert_int_equal(r->msg.u.seal_resp.retry_ms, 300);
    assert_int_equal(info_of(s3).state, PS_RSEC_FOLLOWING);
    assert_int_equal(seal(f, s3, 1500, 4), 0);
    assert_int_equal(count(f, RT_REPL_ACT_WRITE, NULL), 1);
    ps_rcore_destroy(s3);
}

/* A sealed secondary named primary at its sealed epoch: ACTIVATING, the
 * groups above its commit LSN go to the ISR, SERVING once acked. */
static void test_promotion(void **state)
{
    struct fx *f = *state;
    const struct rt_repl_action *a = NULL;
    append(f, 1, 3);
    applied(f, 1);
    append(f, 2, 3);
    applied(f, 2);
    seal(f, f->s2, 10, 4);
    count(f, RT_REPL_ACT_WRITE, &a);
    struct rt_repl_event done = {
        .kind = RT_REPL_EV_DISK_DONE, .range_id = R, .io_id = a->io_id};
    rt_repl_actions_reset(&f->out);
    ps_rcore_step(f->s2, &done, &f->out);
    /* Not at the sealed epoch: refused. */
    uint64_t isr[2] = {2, 3};
    assert_int_equal(assign(f, f->s2, 5, 2, 5, isr, 2), 0);
    assert_int_equal(sent(f, RT_REPL_MSG_ASSIGN_RESP)->msg.u.assign_resp.code,
                     RT_EINVAL);
    assert_int_equal(assign(f, f->s2, 4, 2, 4, isr, 2), 0);
    assert_int_equal(sent(f, RT_REPL_MSG_ASSIGN_RESP)->msg.u.assign_resp.code,
                     0);
    struct ps_rcore_range_info info = info_of(f->s2);
    assert_int_equal(info.role, PS_RCORE_PRIMARY);
    assert_int_equal(info.state, PS_RPRI_ACTIVATING);
    assert_int_equal(info.epoch, 4);
    /* Commit LSN 0 learned: groups 1 and 2 go to 3 (the window is 2). */
    size_t n = 0;
    for (size_t i = 0; i < f->out.n; i++) {
        a = &f->out.v[i];
        if (a->kind == RT_REPL_ACT_SEND && a->msg.kind == RT_REPL_MSG_APPEND) {
            assert_int_equal(a->peer, 3);
            assert_int_equal(a->msg.u.append.epoch, 4);
            assert_int_equal(a->msg.u.append.lsn, ++n);
        }
    }
    assert_int_equal(n, 2);
    uint64_t req = 9;
    struct rt_repl_event cw = {.kind = RT_REPL_EV_CLIENT_WRITE,
                               .range_id = R,
                               .req_ids = &req,
                               .n_req_ids = 1};
    rt_repl_actions_reset(&f->out);
    ps_rcore_step(f->s2, &cw, &f->out);
    assert_int_equal(count(f, RT_REPL_ACT_REPLY, &a), 1);
    assert_int_equal(a->code, RT_ENOTPRIMARY);
    /* 3 answers the duplicates with its applied LSN 2: SERVING. */
    struct rt_repl_msg m = {.kind = RT_REPL_MSG_ACK};
    m.u.ack = (struct rt_repl_ack){.range_id = R, .applied_lsn = 2, .epoch = 4};
    assert_int_equal(msg_to(f, f->s2, 20, 3, &m), 0);
    assert_int_equal(info_of(f->s2).state, PS_RPRI_SERVING);
    assert_int_equal(info_of(f->s2).commit_lsn, 2);
}

/* A secondary that got its range at an LSN (the half of a split, every
 * ISR member at that LSN) and has learned no commit LSN since is sealed
 * and promoted (a transfer or a failover right after the split): the
 * members are taken at that LSN, nothing below it is sent (it holds no
 * group there), and their acks make it SERVING. */
static void test_promotion_of_a_range_assigned_at_lsn(void **state)
{
    struct fx *f = *state;
    const struct rt_repl_action *a = NULL;
    struct ps_rcore_assignment as = {.range_id = R + 1,
                                     .epoch = 3,
                                     .primary_id = 1,
                                     .isr = {1, 2, 3},
                                     .n_isr = 3,
                                     .lsn = 7};
    assert_int_equal(ps_rcore_assign(f->s2, &as, &f->out), 0);
    rt_repl_actions_reset(&f->out);
    struct rt_repl_msg m = {.kind = RT_REPL_MSG_SEAL};
    m.u.seal = (struct rt_repl_seal){
        .range_id = R + 1, .old_epoch = 3, .new_epoch = 4, .old_primary = 1};
    assert_int_equal(msg_to(f, f->s2, 10000, MASTER, &m), 0);
    assert_int_equal(count(f, RT_REPL_ACT_WRITE, &a), 1);
    struct rt_repl_event done = {
        .kind = RT_REPL_EV_DISK_DONE, .range_id = R + 1, .io_id = a->io_id};
    rt_repl_actions_reset(&f->out);
    ps_rcore_step(f->s2, &done, &f->out);
    m = (struct rt_repl_msg){.kind = RT_REPL_MSG_ASSIGN};
    struct rt_repl_conf *c = &m.u.assign;
    c->range_id = R + 1;
    c->epoch = 4;
    c->primary_id = 2;
    c->primary_epoch = 4;
    for (uint64_t id = 1; id <= 3; id++) {
        c->members[c->n_members++] = (struct rt_repl_member){
            id, id == 2 ? RT_REPL_ROLE_PRIMARY : RT_REPL_ROLE_SECONDARY};
    }
    c->isr[0] = 2;
    c->isr[1] = 3;
    c->n_isr = 2;
    rt_repl_actions_reset(&f->out);
    assert_int_equal(msg_to(f, f->s2, 10001, MASTER, &m), 0);
    for (size_t i = 0; i < f->out.n; i++) {
        a = &f->out.v[i];
        assert_false(a->kind == RT_REPL_ACT_SEND &&
                     a->msg.kind == RT_REPL_MSG_APPEND &&
                     a->msg.u.append.lsn <= 7);
    }
    struct ps_rcore_range_info info;
    assert_int_equal(ps_rcore_range_get(f->s2, R + 1, &info), 0);
    assert_int_equal(info.role, PS_RCORE_PRIMARY);
    m = (struct rt_repl_msg){.kind = RT_REPL_MSG_ACK};
    m.u.ack =
        (struct rt_repl_ack){.range_id = R + 1, .applied_lsn = 7, .epoch = 4};
    assert_int_equal(msg_to(f, f->s2, 10002, 3, &m), 0);
    assert_int_equal(ps_rcore_range_get(f->s2, R + 1, &info), 0);
    assert_int_equal(info.state, PS_RPRI_SERVING);
    assert_int_equal(info.commit_lsn, 7);
}

/* A split child is created at its parent's epoch + 1 in the parent's
 * primary generation (the master keeps primary_epoch across a split).
 * The ISR change that follows (a member paused, dropped) names that
 * generation at a later epoch: the primary takes it as the same
 * generation and goes on serving, instead of refusing RT_EINVAL for
 * ever (which left the range without a primary); the secondary takes it
 * too, and a primary_epoch above the epoch is no assignment. */
static void test_split_child_isr_change(void **state)
{
    struct fx *f = *state;
    const uint64_t isr3[] = {1, 2, 3}, isr2[] = {1, 2};
    struct ps_rcore_assignment as = {.range_id = R,
                                     .epoch = 4,
                                     .primary_id = 1,
                                     .isr = {1, 2, 3},
                                     .n_isr = 3,
                                     .lsn = 7,
                                     .primary_epoch = 3};
    struct ps_rcore_range_info info;
    assert_int_equal(ps_rcore_forget(f->p, R, &f->out), 0);
    assert_int_equal(ps_rcore_forget(f->s2, R, &f->out), 0);
    as.primary_epoch = 5;
    assert_int_equal(ps_rcore_assign(f->p, &as, &f->out), RT_EINVAL);
    as.primary_epoch = 3;
    assert_int_equal(ps_rcore_assign(f->p, &as, &f->out), 0);
    assert_int_equal(ps_rcore_assign(f->s2, &as, &f->out), 0);
    info = info_of(f->p);
    assert_int_equal(info.primary_epoch, 3);
    assert_int_equal(info.epoch, 4);
    assert_true(ps_rcore_info_serving(&info));

    /* The same configuration again (a resend): accepted, nothing moves. */
    assert_int_equal(assign(f, f->p, 4, 1, 3, isr3, 3), 0);
    assert_int_equal(sent(f, RT_REPL_MSG_ASSIGN_RESP)->msg.u.assign_resp.code,
                     0);
    /* Node 3 dropped from the ISR at epoch 5, same generation. */
    assert_int_equal(assign(f, f->s2, 5, 1, 3, isr2, 2), 0);
    assert_int_equal(sent(f, RT_REPL_MSG_ASSIGN_RESP)->msg.u.assign_resp.code,
                     0);
    assert_int_equal(assign(f, f->p, 5, 1, 3, isr2, 2), 0);
    assert_int_equal(sent(f, RT_REPL_MSG_ASSIGN_RESP)->msg.u.assign_resp.code,
                     0);
    info = info_of(f->p);
    assert_int_equal(info.epoch, 5);
    assert_int_equal(info.primary_epoch, 3);
    assert_int_equal(info.n_isr_peers, 1);
    assert_true(ps_rcore_info_serving(&info));

    /* And it still replicates: group 8 goes to node 2 alone and is
     * answered once node 2 acks it. */
    assert_int_equal(local_done(f, 0, 8, 42), 0);
    const struct rt_repl_action *a = sent(f, RT_REPL_MSG_APPEND);
    assert_non_null(a);
    assert_int_equal(a->peer, 2);
    assert_int_equal(a->msg.u.append.lsn, 8);
    assert_int_equal(ack(f, 0, 2, 0, 8, 5), 0);
    assert_int_equal(count(f, RT_REPL_ACT_REPLY, &a), 1);
    assert_int_equal(a->req_id, 42);
    assert_int_equal(a->code, 0);
}

/* F4: a sealed secondary promoted with an ISR of itself alone serves at
 * once with cw = its applied LSN (reads wait for cw; no ack and no write,
 * refused below min_insync, would ever raise it). */
static void test_promotion_isr_of_one(void **state)
{
    struct fx *f = *state;
    const struct rt_repl_action *a = NULL;
    append(f, 1, 3);
    applied(f, 1);
    append(f, 2, 3);
    applied(f, 2);
    seal(f, f->s2, 10, 4);
    count(f, RT_REPL_ACT_WRITE, &a);
    struct rt_repl_event done = {
        .kind = RT_REPL_EV_DISK_DONE, .range_id = R, .io_id = a->io_id};
    rt_repl_actions_reset(&f->out);
    ps_rcore_step(f->s2, &done, &f->out);
    assert_int_equal(info_of(f->s2).commit_lsn, 0);
    uint64_t isr[1] = {2};
    assert_int_equal(assign(f, f->s2, 4, 2, 4, isr, 1), 0);
    assert_int_equal(sent(f, RT_REPL_MSG_ASSIGN_RESP)->msg.u.assign_resp.code,
                     0);
    struct ps_rcore_range_info info = info_of(f->s2);
    assert_int_equal(info.role, PS_RCORE_PRIMARY);
    assert_int_equal(info.state, PS_RPRI_SERVING);
    assert_int_equal(info.commit_lsn, 2);
    /* The answer, and probes of 1 and 3: replicas outside the ISR. */
    assert_int_equal(count(f, RT_REPL_ACT_SEND, &a), 3);
    assert_int_equal(a->msg.kind, RT_REPL_MSG_ASSIGN_RESP);
}

/* A cancelled failover: the primary deposed by a sealed secondary's NACK
 * resumes at the new epoch (same generation); the sealed secondary
 * follows its appends at that epoch. */
static void test_cancel_resumes(void **state)
{
    struct fx *f = *state;
    const struct rt_repl_action *a = NULL;
    local_done(f, 0, 1, 100);
    ack(f, 1, 2, RT_ESEALED, 0, 4);
    assert_int_equal(info_of(f->p).state, PS_RPRI_DEPOSED);
    uint64_t isr[3] = {1, 2, 3};
    assert_int_equal(assign(f, f->p, 4, 1, 3, isr, 3), 0);
    assert_int_equal(sent(f, RT_REPL_MSG_ASSIGN_RESP)->msg.u.assign_resp.code,
                     0);
    assert_int_equal(info_of(f->p).state, PS_RPRI_ACTIVATING);
    assert_int_equal(count(f, RT_REPL_ACT_SEND, NULL), 3); /* 2 appends */
    ack(f, 5, 2, 0, 1, 4);
    ack(f, 5, 3, 0, 1, 4);
    assert_int_equal(info_of(f->p).state, PS_RPRI_SERVING);
    /* The sealed secondary takes the epoch-4 append and follows. */
    seal(f, f->s2, 0, 4);
    count(f, RT_REPL_ACT_WRITE, &a);
    struct rt_repl_event done = {
        .kind = RT_REPL_EV_DISK_DONE, .range_id = R, .io_id = a->io_id};
    ps_rcore_step(f->s2, &done, &f->out);
    assert_int_equal(append(f, 1, 4), 0);
    assert_int_equal(count(f, RT_REPL_ACT_WRITE, NULL), 1);
    assert_int_equal(info_of(f->s2).state, PS_RSEC_FOLLOWING);
    assert_int_equal(info_of(f->s2).epoch, 4);
}

/* The primary ships group 2 at its GROUP (before its own commit), then
 * steps down before the commit ends: the group stays counted in flight
 * (a probe is busy, an append at 2 waits for it), and its late DISK_DONE
 * applies it, answers its write RT_ETIMEDOUT and marks the copy divergent
 * (whether it matches the new primary's 2 is unknown): probes answer
 * again, so the new primary can undo or copy it. */
static void test_shipped_then_stepped_down(void **state)
{
    struct fx *f = *state;
    const struct rt_repl_action *a = NULL;
    local_done(f, 0, 1, 100);
    uint8_t rec = 2;
    struct rt_repl_event g = {.kind = RT_REPL_EV_GROUP,
                              .now_ms = 1,
                              .range_id = R,
                              .lsn = 2,
                              .records = &rec,
                              .records_len = 1};
    rt_repl_actions_reset(&f->out);
    assert_int_equal(ps_rcore_step(f->p, &g, &f->out), 0);
    assert_int_equal(count(f, RT_REPL_ACT_SEND, &a), 2); /* to 2 and 3 */
    assert_int_equal(a->msg.u.append.lsn, 2);
    assert_int_equal(info_of(f->p).last_lsn, 2);
    assert_int_equal(info_of(f->p).applied_lsn, 1);
    uint64_t isr[2] = {2, 3};
    assert_int_equal(assign(f, f->p, 4, 2, 4, isr, 2), 0);
    assert_int_equal(info_of(f->p).role, PS_RCORE_SECONDARY);
    struct rt_repl_msg pb = {.kind = RT_REPL_MSG_PROBE};
    pb.u.probe = (struct rt_repl_probe){.range_id = R, .epoch = 4};
    assert_int_equal(msg_to(f, f->p, 2, 2, &pb), 0);
    assert_int_equal(sent(f, RT_REPL_MSG_PROBE_RESP)->msg.u.probe_resp.code,
                     RT_EBUSY);
    uint64_t req = 101;
    struct rt_repl_event d = {.kind = RT_REPL_EV_DISK_DONE,
                              .now_ms = 3,
                              .range_id = R,
                              .lsn = 2,
                              .req_ids = &req,
                              .n_req_ids = 1};
    rt_repl_actions_reset(&f->out);
    assert_int_equal(ps_rcore_step(f->p, &d, &f->out), 0);
    assert_int_equal(count(f, RT_REPL_ACT_REPLY, &a), 1);
    assert_int_equal(a->req_id, 101);
    assert_int_equal(a->code, RT_ETIMEDOUT);
    struct ps_rcore_range_info info = info_of(f->p);
    assert_int_equal(info.applied_lsn, 2);
    assert_int_equal(info.state, PS_RSEC_DIVERGED);
    assert_int_equal(msg_to(f, f->p, 4, 2, &pb), 0);
    a = sent(f, RT_REPL_MSG_PROBE_RESP);
    assert_int_equal(a->msg.u.probe_resp.code, 0);
    assert_int_equal(a->msg.u.probe_resp.state, RT_REPL_COPY_DIVERGED);
}

/* A primary named secondary (outside the ISR) steps down: held writes get
 * RT_ETIMEDOUT; an older assignment is stale; one omitting a node drops
 * its copy. */
static void test_assign_step_down(void **state)
{
    struct fx *f = *state;
    const struct rt_repl_action *a = NULL;
    local_done(f, 0, 1, 100);
    uint64_t isr[2] = {2, 3};
    assert_int_equal(assign(f, f->p, 2, 2, 2, isr, 2), 0);
    assert_int_equal(sent(f, RT_REPL_MSG_ASSIGN_RESP)->msg.u.assign_resp.code,
                     RT_ESTALE);
    assert_int_equal(assign(f, f->p, 4, 2, 4, isr, 2), 0);
    assert_int_equal(count(f, RT_REPL_ACT_REPLY, &a), 1);
    assert_int_equal(a->code, RT_ETIMEDOUT);
    struct ps_rcore_range_info info = info_of(f->p);
    assert_int_equal(info.role, PS_RCORE_SECONDARY);
    assert_int_equal(info.state, PS_RSEC_FOLLOWING);
    assert_int_equal(info.primary_id, 2);
    /* A FOLLOWING secondary named primary without a seal: refused. */
    assert_int_equal(assign(f, f->s2, 4, 2, 4, isr, 2), 0);
    assert_int_equal(sent(f, RT_REPL_MSG_ASSIGN_RESP)->msg.u.assign_resp.code,
                     RT_EINVAL);
    assert_int_equal(info_of(f->s2).role, PS_RCORE_SECONDARY);
    /* Named secondary of another primary: it follows that one. */
    uint64_t isr3[2] = {3, 2};
    assert_int_equal(assign(f, f->s2, 5, 3, 5, isr3, 2), 0);
    assert_int_equal(sent(f, RT_REPL_MSG_ASSIGN_RESP)->msg.u.assign_resp.code,
                     0); /* s2 is a member: it follows 3 */
    assert_int_equal(info_of(f->s2).primary_id, 3);
    struct rt_repl_msg m = {.kind = RT_REPL_MSG_ASSIGN};
    m.u.assign = (struct rt_repl_conf){.range_id = R,
                                       .epoch = 6,
                                       .primary_id = 3,
                                       .primary_epoch = 5,
                                       .isr = {3},
                                       .n_isr = 1};
    assert_int_equal(msg_to(f, f->s2, 0, MASTER, &m), 0);
    struct ps_rcore_range_info gone;
    assert_int_equal(ps_rcore_range_get(f->s2, R, &gone), RT_ENOTFOUND);
}

/* Freeze for a transfer (§4 TRANSFER_PRIMARY): checks in order (not
 * primary or another epoch RT_ESTALE, target outside the ISR RT_EINVAL,
 * frozen already RT_EBUSY); a frozen primary takes no client write but
 * still streams a group the writer finishes, counts its acks and answers
 * its write at cw; the target's ack is readable; unfreeze serves again. */
static void test_freeze(void **state)
{
    struct fx *f = *state;
    const struct rt_repl_action *a = NULL;
    uint64_t acked = 0;
    local_done(f, 0, 1, 100);
    assert_int_equal(ps_rcore_freeze(f->s2, R, 3, 1), RT_ESTALE);
    assert_int_equal(ps_rcore_freeze(f->p, R, 2, 2), RT_ESTALE);
    assert_int_equal(ps_rcore_freeze(f->p, R, 3, 4), RT_EINVAL);
    assert_int_equal(ps_rcore_freeze(f->p, R, 3, 2), 0);
    assert_int_equal(info_of(f->p).state, PS_RPRI_FROZEN);
    assert_int_equal(ps_rcore_freeze(f->p, R, 3, 2), RT_EBUSY);

    rt_repl_actions_reset(&f->out);
    uint64_t req = 101;
    struct rt_repl_event cw = {.kind = RT_REPL_EV_CLIENT_WRITE,
                               .range_id = R,
                               .req_ids = &req,
                               .n_req_ids = 1};
    assert_int_equal(ps_rcore_step(f->p, &cw, &f->out), 0);
    assert_int_equal(count(f, RT_REPL_ACT_REPLY, &a), 1);
    assert_int_equal(a->code, RT_ENOTPRIMARY);

    /* A write admitted before the freeze comes out of the writer. */
    assert_int_equal(local_done(f, 1, 2, 102), 0);
    assert_appends(f, 2, 2, 2);
    assert_int_equal(ack(f, 2, 2, 0, 2, 3), 0);
    assert_int_equal(ps_rcore_peer_acked(f->p, R, 2, &acked), 0);
    assert_int_equal(acked, 2);
    assert_int_equal(ps_rcore_peer_acked(f->p, R, 4, &acked), RT_ENOTFOUND);
    assert_int_equal(count(f, RT_REPL_ACT_REPLY, NULL), 0);
    assert_int_equal(ack(f, 3, 3, 0, 2, 3), 0);
    assert_int_equal(count(f, RT_REPL_ACT_REPLY, NULL), 2);
    assert_int_equal(info_of(f->p).commit_lsn, 2);

    assert_int_equal(ps_rcore_unfreeze(f->p, R), 0);
    assert_int_equal(info_of(f->p).state, PS_RPRI_SERVING);
    assert_int_equal(ps_rcore_unfreeze(f->p, R), RT_ENOTFOUND);
}

/* A frozen primary named secondary in the ISR of the target (a transfer
 * committed) follows it; one named primary of a new generation (the
 * transfer ended as a failover that chose it) activates again. */
static void test_frozen_assigned(void **state)
{
    struct fx *f = *state;
    local_done(f, 0, 1, 100);
    ack(f, 1, 2, 0, 1, 3);
    ack(f, 1, 3, 0, 1, 3);
    assert_int_equal(ps_rcore_freeze(f->p, R, 3, 2), 0);
    uint64_t isr[3] = {2, 1, 3};
    assert_int_equal(assign(f, f->p, 4, 2, 4, isr, 3), 0);
    assert_int_equal(sent(f, RT_REPL_MSG_ASSIGN_RESP)->msg.u.assign_resp.code,
                     0);
    struct ps_rcore_range_info info = info_of(f->p);
    assert_int_equal(info.role, PS_RCORE_SECONDARY);
    assert_int_equal(info.state, PS_RSEC_FOLLOWING);
    assert_int_equal(info.primary_id, 2);
    assert_int_equal(info.applied_lsn, 1);

    /* The other way: a fresh primary 1 of {1, 2} chosen again. */
    struct fx g;
    struct ps_rcore_config cfg = {.inflight = 2, .resend_ms = 100};
    struct ps_rcore_assignment a = {
        .range_id = R, .epoch = 3, .primary_id = 1, .isr = {1, 2}, .n_isr = 2};
    cfg.self_id = 1;
    rt_repl_actions_init(&g.out);
    assert_int_equal(ps_rcore_create(&cfg, &g.p), 0);
    assert_int_equal(ps_rcore_assign(g.p, &a, &g.out), 0);
    assert_int_equal(ps_rcore_freeze(g.p, R, 3, 2), 0);
    uint64_t isr1[2] = {1, 2};
    assert_int_equal(assign(&g, g.p, 4, 1, 4, isr1, 2), 0);
    assert_int_equal(sent(&g, RT_REPL_MSG_ASSIGN_RESP)->msg.u.assign_resp.code,
                     0);
    info = info_of(g.p);
    assert_int_equal(info.role, PS_RCORE_PRIMARY);
    assert_int_equal(info.primary_epoch, 4);
    assert_true(info.state == PS_RPRI_ACTIVATING ||
                info.state == PS_RPRI_SERVING);
    ps_rcore_destroy(g.p);
    rt_repl_actions_close(&g.out);
}

/* A restart: a primary with pending groups goes ACTIVATING and waits for
 * the assignment of its generation. With an ISR of more than itself it
 * does not resume (a secondary may hold a group it shipped and lost): it
 * answers RT_ENOTPRIMARY, takes a SEAL at once (the grace protected its
 * dead predecessor's lease), and on the failover choosing it streams its
 * groups and serves once acked. Alone in its ISR it resumes. A secondary
 * sealed above its epoch comes back SEALED. */
static void test_load(void **state)
{
    struct fx *f = *state;
    const struct rt_repl_action *a = NULL;
    struct ps_rcore *n = NULL;
    struct ps_rcore_config cfg = {
        .self_id = 1, .inflight = 4, .resend_ms = 100, .seal_grace_ms = 50};
    assert_int_equal(ps_rcore_create(&cfg, &n), 0);
    uint8_t rec[2] = {7, 8};
    struct ps_rcore_group_rec g[2] = {{6, &rec[0], 1}, {7, &rec[1], 1}};
    struct ps_rcore_durable d = {.range_id = R,
                                 .role = PS_RCORE_PRIMARY,
                                 .epoch = 3,
                                 .primary_id = 1,
                                 .primary_epoch = 2,
                                 .isr = {1, 2},
                                 .n_isr = 2,
                                 .applied_lsn = 7,
                                 .commit_lsn = 5,
                                 .groups = g,
                                 .n_groups = 1};
    rt_repl_actions_reset(&f->out);
    assert_int_equal(ps_rcore_load(n, &d, 1000, &f->out), RT_EINVAL);
    d.n_groups = 2;
    assert_int_equal(ps_rcore_load(n, &d, 1000, &f->out), 0);
    assert_int_equal(ps_rcore_load(n, &d, 1000, &f->out), RT_EEXIST);
    struct ps_rcore_range_info info = info_of(n);
    assert_int_equal(info.state, PS_RPRI_ACTIVATING);
    assert_int_equal(info.primary_epoch, 2);
    assert_true(info.restarted);
    assert_int_equal(f->out.n, 0); /* silent until assigned */
    uint64_t isr[2] = {1, 2};
    assert_int_equal(assign(f, n, 3, 1, 2, isr, 2), 0);
    assert_int_equal(sent(f, RT_REPL_MSG_ASSIGN_RESP)->msg.u.assign_resp.code,
                     RT_ENOTPRIMARY);
    assert_int_equal(count(f, RT_REPL_ACT_SEND, &a), 1); /* no append */
    assert_int_equal(info_of(n).state, PS_RPRI_ACTIVATING);
    /* Sealed within what would be the grace: no wait. */
    assert_int_equal(seal(f, n, 1001, 4), 0);
    assert_int_equal(count(f, RT_REPL_ACT_WRITE, &a), 1);
    assert_int_equal(a->msg.kind, RT_REPL_MSG_SEAL);
    info = info_of(n);
    assert_int_equal(info.role, PS_RCORE_SECONDARY);
    assert_int_equal(info.state, PS_RSEC_SEALED);
    assert_true(info.restarted); /* until a new generation */
    struct rt_repl_event done = {
        .kind = RT_REPL_EV_DISK_DONE, .range_id = R, .io_id = a->io_id};
    rt_repl_actions_reset(&f->out);
    assert_int_equal(ps_rcore_step(n, &done, &f->out), 0);
    a = sent(f, RT_REPL_MSG_SEAL_RESP);
    assert_int_equal(a->msg.u.seal_resp.code, 0);
    assert_int_equal(a->msg.u.seal_resp.applied_lsn, 7);
    /* A cancel (my old generation again) is refused: never resumed. */
    assert_int_equal(assign(f, n, 4, 1, 2, isr, 2), 0);
    assert_int_equal(sent(f, RT_REPL_MSG_ASSIGN_RESP)->msg.u.assign_resp.code,
                     RT_ENOTPRIMARY);
    assert_int_equal(info_of(n).state, PS_RSEC_SEALED);
    /* The failover chose me: groups 6 and 7 go to 2, then SERVING. */
    assert_int_equal(assign(f, n, 4, 1, 4, isr, 2), 0);
    assert_int_equal(sent(f, RT_REPL_MSG_ASSIGN_RESP)->msg.u.assign_resp.code,
                     0);
    assert_int_equal(info_of(n).state, PS_RPRI_ACTIVATING);
    a = sent(f, RT_REPL_MSG_APPEND);
    assert_non_null(a);
    assert_int_equal(a->msg.u.append.lsn, 7);
    assert_int_equal(a->msg.u.append.records[0], 8);
    struct rt_repl_msg m = {.kind = RT_REPL_MSG_ACK};
    m.u.ack = (struct rt_repl_ack){.range_id = R, .applied_lsn = 7, .epoch = 4};
    assert_int_equal(msg_to(f, n, 1005, 2, &m), 0);
    assert_int_equal(info_of(n).state, PS_RPRI_SERVING);
    assert_false(info_of(n).restarted);
    ps_rcore_destroy(n);
    /* Alone in its ISR: nothing can be ahead of it; it resumes. */
    assert_int_equal(ps_rcore_create(&cfg, &n), 0);
    d.isr[1] = 0;
    d.n_isr = 1;
    assert_int_equal(ps_rcore_load(n, &d, 1000, &f->out), 0);
    assert_false(info_of(n).restarted);
    assert_int_equal(assign(f, n, 3, 1, 2, isr, 1), 0);
    assert_int_equal(sent(f, RT_REPL_MSG_ASSIGN_RESP)->msg.u.assign_resp.code,
                     0);
    assert_int_equal(info_of(n).state, PS_RPRI_SERVING);
    d.isr[1] = 2;
    d.n_isr = 2;
    ps_rcore_destroy(n);
    cfg.self_id = 2;
    assert_int_equal(ps_rcore_create(&cfg, &n), 0);
    d.role = PS_RCORE_SECONDARY;
    d.sealed_epoch = 4;
    assert_int_equal(ps_rcore_load(n, &d, 1000, &f->out), 0);
    assert_int_equal(info_of(n).state, PS_RSEC_SEALED);
    /* The restart grace: no seal within seal_grace_ms of the start. */
    assert_int_equal(seal(f, n, 1010, 5), 0);
    assert_int_equal(sent(f, RT_REPL_MSG_SEAL_RESP)->msg.u.seal_resp.code,
                     RT_EBUSY);
    ps_rcore_destroy(n);
}

/* A primary answers an append RT_ESTALE with its epoch and is deposed by
 * one of a newer epoch; a primary answered RT_ESTALE at a newer epoch is
 * deposed. */
static void test_append_to_primary(void **state)
{
    struct fx *f = *state;
    const struct rt_repl_action *a = NULL;
    uint8_t rec = 1;
    struct rt_repl_msg m = {.kind = RT_REPL_MSG_APPEND};
    m.u.append = (struct rt_repl_append){
        .range_id = R, .epoch = 2, .lsn = 1, .records = &rec, .records_len = 1};
    assert_int_equal(msg_to(f, f->p, 0, 2, &m), 0);
    a = sent(f, RT_REPL_MSG_ACK);
    assert_int_equal(a->msg.u.ack.code, RT_ESTALE);
    assert_int_equal(a->msg.u.ack.epoch, 3);
    assert_int_equal(info_of(f->p).state, PS_RPRI_SERVING);
    m.u.append.epoch = 4;
    assert_int_equal(msg_to(f, f->p, 0, 2, &m), 0);
    assert_int_equal(info_of(f->p).state, PS_RPRI_DEPOSED);
    /* The other way: an old primary told RT_ESTALE by a newer one. */
    struct ps_rcore *p2 = NULL;
    struct ps_rcore_config cfg = {.self_id = 1, .inflight = 2, .resend_ms = 9};
    struct ps_rcore_assignment as = {
        .range_id = R, .epoch = 3, .primary_id = 1, .isr = {1, 2}, .n_isr = 2};
    assert_int_equal(ps_rcore_create(&cfg, &p2), 0);
    assert_int_equal(ps_rcore_assign(p2, &as, &f->out), 0);
    struct rt_repl_msg k = {.kind = RT_REPL_MSG_ACK};
    k.u.ack = (struct rt_repl_ack){
        .range_id = R, .code = RT_ESTALE, .applied_lsn = 50, .epoch = 5};
    assert_int_equal(msg_to(f, p2, 0, 2, &k), 0);
    assert_int_equal(info_of(p2).state, PS_RPRI_DEPOSED);
    ps_rcore_destroy(p2);
}

/* A group applied after the secondary followed another generation is
 * acked to its sender at its epoch, not to the new primary. */
static void test_ack_to_sender(void **state)
{
    struct fx *f = *state;
    const struct rt_repl_action *a = NULL;
    append(f, 1, 3); /* from node 1 at epoch 3, in the writer */
    uint64_t isr[2] = {3, 1};
    assert_int_equal(assign(f, f->s2, 4, 3, 4, isr, 2), 0);
    assert_int_equal(info_of(f->s2).primary_id, 3);
    assert_int_equal(applied(f, 1), 0);
    a = sent(f, RT_REPL_MSG_ACK);
    assert_int_equal(a->peer, 1);
    assert_int_equal(a->msg.u.ack.epoch, 3);
}

/* A sealed secondary with an append still in its writer is not promoted
 * yet: RT_EINVAL, and the resent assignment is taken once it drained. */
static void test_promotion_waits_for_writer(void **state)
{
    struct fx *f = *state;
    const struct rt_repl_action *a = NULL;
    struct ps_rcore_config cfg = {.self_id = 2,
                                  .inflight = 2,
                                  .resend_ms = 100,
                                  .mutation = PS_RCORE_MUT_APPEND_AFTER_SEAL};
    struct ps_rcore *s = NULL;
    struct ps_rcore_assignment as = {.range_id = R,
                                     .epoch = 3,
                                     .primary_id = 1,
                                     .isr = {1, 2, 3},
                                     .n_isr = 3};
    assert_int_equal(ps_rcore_create(&cfg, &s), 0);
    assert_int_equal(ps_rcore_assign(s, &as, &f->out), 0);
    seal(f, s, 10, 4);
    count(f, RT_REPL_ACT_WRITE, &a);
    struct rt_repl_event done = {
        .kind = RT_REPL_EV_DISK_DONE, .range_id = R, .io_id = a->io_id};
    rt_repl_actions_reset(&f->out);
    ps_rcore_step(s, &done, &f->out);
    /* Only the known-bad core takes this append after sealing. */
    uint8_t rec = 1;
    struct rt_repl_msg m = {.kind = RT_REPL_MSG_APPEND};
    m.u.append = (struct rt_repl_append){
        .range_id = R, .epoch = 3, .lsn = 1, .records = &rec, .records_len = 1};
    assert_int_equal(msg_to(f, s, 11, 1, &m), 0);
    count(f, RT_REPL_ACT_WRITE, &a);
    uint64_t io = a->io_id;
    uint64_t isr[2] = {2, 3};
    assert_int_equal(assign(f, s, 4, 2, 4, isr, 2), 0);
    assert_int_equal(sent(f, RT_REPL_MSG_ASSIGN_RESP)->msg.u.assign_resp.code,
                     RT_EINVAL);
    done = (struct rt_repl_event){
        .kind = RT_REPL_EV_DISK_DONE, .range_id = R, .lsn = 1, .io_id = io};
    rt_repl_actions_reset(&f->out);
    assert_int_equal(ps_rcore_step(s, &done, &f->out), 0);
    assert_int_equal(assign(f, s, 4, 2, 4, isr, 2), 0);
    assert_int_equal(sent(f, RT_REPL_MSG_ASSIGN_RESP)->msg.u.assign_resp.code,
                     0);
    assert_int_equal(info_of(s).state, PS_RPRI_ACTIVATING);
    ps_rcore_destroy(s);
}

/* ISR shrink (§5.4): a primary node 1 of {1, 2, 3} at epoch 3 with the
 * late-ack, link-down and write-hold limits on. */
static struct ps_rcore *shrink_node(struct fx *f)
{
    struct ps_rcore *n;
    struct ps_rcore_config cfg = {.self_id = 1,
                                  .inflight = 2,
                                  .resend_ms = 100,
                                  .ack_timeout_ms = 1000,
                                  .conn_down_ms = 300,
                                  .write_hold_ms = 5000,
                                  .master_id = MASTER};
    struct ps_rcore_assignment a = {.range_id = R,
                                    .epoch = 3,
                                    .primary_id = 1,
                                    .isr = {1, 2, 3},
                                    .n_isr = 3};
    assert_int_equal(ps_rcore_create(&cfg, &n), 0);
    assert_int_equal(ps_rcore_assign(n, &a, &f->out), 0);
    return n;
}

/* The last step sent the master an ISR_CHANGE removing @server alone. */
static void assert_asks_removal(struct fx *f, uint64_t server)
{
    const struct rt_repl_action *a = sent(f, RT_REPL_MSG_ISR_CHANGE);
    assert_non_null(a);
    assert_int_equal(a->msg.u.isr_change.n_remove, 1);
    assert_int_equal(a->msg.u.isr_change.remove[0], server);
}

static int step_ev(struct fx *f, struct ps_rcore *n, struct rt_repl_event *ev)
{
    rt_repl_actions_reset(&f->out);
    return ps_rcore_step(n, ev, &f->out);
}

static int timer_at(struct fx *f, struct ps_rcore *n, uint64_t now)
{
    struct rt_repl_event ev = {.kind = RT_REPL_EV_TIMER,
                               .now_ms = now,
                               .timer_id = PS_RCORE_TIMER_RESEND};
    return step_ev(f, n, &ev);
}

static int isr_resp(struct fx *f, struct ps_rcore *n, uint64_t now, int code)
{
    struct rt_repl_msg m = {.kind = RT_REPL_MSG_ISR_RESP};
    m.u.isr_resp = (struct rt_repl_isr_resp){
        .range_id = R, .code = code, .epoch = code ? 0 : 4};
    return msg_to(f, n, now, MASTER, &m);
}

/* A member whose ack does not advance for the ack timeout while it lacks
 * a group is proposed for removal, once (one change in flight); a refused
 * change is asked again after a pause; the held write is answered when the
 * assignment at the committed epoch removes the member. */
static void test_isr_shrink_late_ack(void **state)
{
    struct fx *f = *state;
    struct ps_rcore *n = shrink_node(f);
    uint8_t rec = 1;
    uint64_t req = 10;
    struct rt_repl_event done = {.kind = RT_REPL_EV_DISK_DONE,
                                 .range_id = R,
                                 .lsn = 1,
                                 .records = &rec,
                                 .records_len = 1,
                                 .req_ids = &req,
                                 .n_req_ids = 1};
    assert_int_equal(step_ev(f, n, &done), 0);
    struct rt_repl_msg m = {.kind = RT_REPL_MSG_ACK};
    m.u.ack = (struct rt_repl_ack){.range_id = R, .applied_lsn = 1, .epoch = 3};
    assert_int_equal(msg_to(f, n, 10, 2, &m), 0);
    assert_int_equal(count(f, RT_REPL_ACT_REPLY, NULL), 0);
    assert_int_equal(timer_at(f, n, 900), 0);
    assert_null(sent(f, RT_REPL_MSG_ISR_CHANGE));
    assert_int_equal(timer_at(f, n, 1000), 0);
    const struct rt_repl_action *a = sent(f, RT_REPL_MSG_ISR_CHANGE);
    assert_non_null(a);
    assert_int_equal(a->peer, MASTER);
    assert_int_equal(a->msg.u.isr_change.range_id, R);
    assert_int_equal(a->msg.u.isr_change.epoch, 3);
    assert_int_equal(a->msg.u.isr_change.n_remove, 1);
    assert_int_equal(a->msg.u.isr_change.remove[0], 3);
    assert_int_equal(timer_at(f, n, 1100), 0);
    assert_null(sent(f, RT_REPL_MSG_ISR_CHANGE));
    /* Refused: asked again five resend periods later, not before. */
    assert_int_equal(isr_resp(f, n, 1150, RT_EBUSY), 0);
    assert_int_equal(timer_at(f, n, 1600), 0);
    assert_null(sent(f, RT_REPL_MSG_ISR_CHANGE));
    assert_int_equal(timer_at(f, n, 1650), 0);
    assert_non_null(sent(f, RT_REPL_MSG_ISR_CHANGE));
    /* Committed: nothing more until the assignment. */
    assert_int_equal(isr_resp(f, n, 1700, 0), 0);
    assert_int_equal(timer_at(f, n, 1800), 0);
    assert_null(sent(f, RT_REPL_MSG_ISR_CHANGE));
    assert_int_equal(count(f, RT_REPL_ACT_REPLY, NULL), 0);
    uint64_t isr[2] = {1, 2};
    assert_int_equal(assign(f, n, 4, 1, 3, isr, 2), 0);
    assert_int_equal(count(f, RT_REPL_ACT_REPLY, &a), 1);
    assert_int_equal(a->req_id, 10);
    assert_int_equal(a->code, 0);
    assert_int_equal(info_of(n).commit_lsn, 1);
    assert_int_equal(timer_at(f, n, 5000), 0);
    assert_null(sent(f, RT_REPL_MSG_ISR_CHANGE));
    ps_rcore_destroy(n);
}

/* Lateness is the age of the member's oldest unacked group, not the time
 * since its last ack: a member that acks, but slower than the writes,
 * is removed once its oldest unacked group is ack-timeout old. */
static void test_isr_shrink_oldest_group(void **state)
{
    struct fx *f = *state;
    struct ps_rcore *n = shrink_node(f);
    uint8_t rec = 1;
    uint64_t req = 12;
    struct rt_repl_event done = {.kind = RT_REPL_EV_DISK_DONE,
                                 .range_id = R,
                                 .lsn = 1,
                                 .records = &rec,
                                 .records_len = 1,
                                 .req_ids = &req,
                                 .n_req_ids = 1};
    assert_int_equal(step_ev(f, n, &done), 0);
    done.now_ms = 500;
    done.lsn = 2;
    assert_int_equal(step_ev(f, n, &done), 0);
    struct rt_repl_msg m = {.kind = RT_REPL_MSG_ACK};
    m.u.ack = (struct rt_repl_ack){.range_id = R, .applied_lsn = 2, .epoch = 3};
    assert_int_equal(msg_to(f, n, 600, 2, &m), 0);
    m.u.ack.applied_lsn = 1;
    assert_int_equal(msg_to(f, n, 900, 3, &m), 0);
    assert_int_equal(timer_at(f, n, 1400), 0);
    assert_null(sent(f, RT_REPL_MSG_ISR_CHANGE));
    assert_int_equal(timer_at(f, n, 1500), 0);
    assert_asks_removal(f, 3);
    ps_rcore_destroy(n);
}

/* A member that NACKs RT_ENOSPACE is proposed for removal at once; a
 * corrupt frame (RT_ECORRUPT) is only resent. */
static void test_isr_shrink_nack(void **state)
{
    struct fx *f = *state;
    struct ps_rcore *n = shrink_node(f);
    uint8_t rec = 1;
    uint64_t req = 13;
    struct rt_repl_event done = {.kind = RT_REPL_EV_DISK_DONE,
                                 .range_id = R,
                                 .lsn = 1,
                                 .records = &rec,
                                 .records_len = 1,
                                 .req_ids = &req,
                                 .n_req_ids = 1};
    assert_int_equal(step_ev(f, n, &done), 0);
    struct rt_repl_msg m = {.kind = RT_REPL_MSG_ACK};
    m.u.ack = (struct rt_repl_ack){
        .range_id = R, .code = RT_ECORRUPT, .applied_lsn = 0, .epoch = 3};
    msg_to(f, n, 10, 3, &m);
    assert_null(sent(f, RT_REPL_MSG_ISR_CHANGE));
    m.u.ack.code = RT_ENOSPACE;
    assert_int_equal(msg_to(f, n, 20, 3, &m), 0);
    assert_asks_removal(f, 3);
    ps_rcore_destroy(n);
}

/* A promoted primary whose ISR member never acks the groups it streams
 * (it died after the seal) asks for its removal after the ack timeout
 * and serves once the assignment without it comes. */
static void test_isr_shrink_activating(void **state)
{
    struct fx *f = *state;
    struct ps_rcore *n;
    struct ps_rcore_config cfg = {.self_id = 2,
                                  .inflight = 2,
                                  .resend_ms = 100,
                                  .ack_timeout_ms = 1000,
                                  .conn_down_ms = 300,
                                  .write_hold_ms = 5000,
                                  .master_id = MASTER};
    struct ps_rcore_assignment a = {.range_id = R,
                                    .epoch = 3,
                                    .primary_id = 1,
                                    .isr = {1, 2, 3},
                                    .n_isr = 3};
    const struct rt_repl_action *act = NULL;
    assert_int_equal(ps_rcore_create(&cfg, &n), 0);
    assert_int_equal(ps_rcore_assign(n, &a, &f->out), 0);
    uint8_t rec = 1;
    struct rt_repl_msg m = {.kind = RT_REPL_MSG_APPEND};
    m.u.append = (struct rt_repl_append){
        .range_id = R, .epoch = 3, .lsn = 1, .records = &rec, .records_len = 1};
    assert_int_equal(msg_to(f, n, 0, 1, &m), 0);
    count(f, RT_REPL_ACT_WRITE, &act);
    struct rt_repl_event done = {.kind = RT_REPL_EV_DISK_DONE,
                                 .range_id = R,
                                 .lsn = 1,
                                 .io_id = act->io_id};
    assert_int_equal(step_ev(f, n, &done), 0);
    assert_int_equal(seal(f, n, 0, 4), 0);
    count(f, RT_REPL_ACT_WRITE, &act);
    done = (struct rt_repl_event){
        .kind = RT_REPL_EV_DISK_DONE, .range_id = R, .io_id = act->io_id};
    assert_int_equal(step_ev(f, n, &done), 0);
    uint64_t isr[2] = {2, 3};
    assert_int_equal(assign(f, n, 4, 2, 4, isr, 2), 0);
    assert_int_equal(info_of(n).state, PS_RPRI_ACTIVATING);
    assert_int_equal(timer_at(f, n, 999), 0);
    assert_null(sent(f, RT_REPL_MSG_ISR_CHANGE));
    assert_int_equal(timer_at(f, n, 1000), 0);
    act = sent(f, RT_REPL_MSG_ISR_CHANGE);
    assert_non_null(act);
    assert_int_equal(act->msg.u.isr_change.epoch, 4);
    assert_int_equal(act->msg.u.isr_change.n_remove, 1);
    assert_int_equal(act->msg.u.isr_change.remove[0], 3);
    uint64_t alone[1] = {2};
    assert_int_equal(assign(f, n, 5, 2, 4, alone, 1), 0);
    assert_int_equal(info_of(n).state, PS_RPRI_SERVING);
    ps_rcore_destroy(n);
}

/* A member whose connection stays down for 300 ms is proposed for
 * removal even with nothing to send; one that comes back in time is
 * not. */
static void test_isr_shrink_link_down(void **state)
{
    struct fx *f = *state;
    struct ps_rcore *n = shrink_node(f);
    struct rt_repl_event ev = {
        .kind = RT_REPL_EV_CONN, .now_ms = 0, .peer = 3, .up = 0};
    assert_int_equal(step_ev(f, n, &ev), 0);
    assert_int_equal(count(f, RT_REPL_ACT_TIMER, NULL), 1);
    ev.now_ms = 100;
    ev.up = 1;
    assert_int_equal(step_ev(f, n, &ev), 0);
    assert_int_equal(timer_at(f, n, 500), 0);
    assert_null(sent(f, RT_REPL_MSG_ISR_CHANGE));
    ev.now_ms = 600;
    ev.up = 0;
    assert_int_equal(step_ev(f, n, &ev), 0);
    assert_int_equal(timer_at(f, n, 800), 0);
    assert_null(sent(f, RT_REPL_MSG_ISR_CHANGE));
    assert_int_equal(timer_at(f, n, 900), 0);
    assert_asks_removal(f, 3);
    ps_rcore_destroy(n);
}

/* A write held past the write-hold limit (the shrink never commits) is
 * answered RT_ETIMEDOUT, and not again when the acks come later. */
static void test_write_hold_expires(void **state)
{
    struct fx *f = *state;
    struct ps_rcore *n = shrink_node(f);
    uint8_t rec = 1;
    uint64_t req = 11;
    struct rt_repl_event done = {.kind = RT_REPL_EV_DISK_DONE,
                                 .range_id = R,
                                 .lsn = 1,
                                 .records = &rec,
                                 .records_len = 1,
                                 .req_ids = &req,
                                 .n_req_ids = 1};
    const struct rt_repl_action *a = NULL;
    assert_int_equal(step_ev(f, n, &done), 0);
    assert_int_equal(timer_at(f, n, 4999), 0);
    assert_int_equal(count(f, RT_REPL_ACT_REPLY, NULL), 0);
    assert_int_equal(timer_at(f, n, 5000), 0);
    assert_int_equal(count(f, RT_REPL_ACT_REPLY, &a), 1);
    assert_int_equal(a->req_id, 11);
    assert_int_equal(a->code, RT_ETIMEDOUT);
    struct rt_repl_msg m = {.kind = RT_REPL_MSG_ACK};
    m.u.ack = (struct rt_repl_ack){.range_id = R, .applied_lsn = 1, .epoch = 3};
    assert_int_equal(msg_to(f, n, 5001, 2, &m), 0);
    assert_int_equal(msg_to(f, n, 5002, 3, &m), 0);
    assert_int_equal(count(f, RT_REPL_ACT_REPLY, NULL), 0);
    assert_int_equal(info_of(n).commit_lsn, 1);
    ps_rcore_destroy(n);
}

/* Catch-up of replicas outside the ISR */

static int probe_resp(struct fx *f,
                      uint64_t now,
                      uint64_t peer,
                      enum rt_repl_copy_state st,
                      uint64_t applied,
                      uint64_t gen)
{
    struct rt_repl_msg m = {.kind = RT_REPL_MSG_PROBE_RESP};
    m.u.probe_resp = (struct rt_repl_replica_state){
        .range_id = R, .epoch = 4, .state = st, .applied_lsn = applied};
    if (gen != 0) {
        m.u.probe_resp.history[0] = (struct rt_repl_epoch_start){gen, 1};
        m.u.probe_resp.n_history = 1;
        m.u.probe_resp.applied_epoch = gen;
    }
    return msg_to(f, f->p, now, peer, &m);
}

/* The last action of @kind (NULL: none). */
static const struct rt_repl_action *action(const struct fx *f,
                                           enum rt_repl_act_kind kind)
{
    const struct rt_repl_action *a = NULL;
    count(f, kind, &a);
    return a;
}

/* An assignment that leaves 3 outside the ISR makes the primary probe it;
 * "no copy" asks for a full copy at my last LSN, whose groups stay
 * buffered; the copy's end starts the stream after the snapshot; once the
 * replica's ack reaches cw it is proposed for the ISR and counts for cw
 * from then; the assignment naming it moves it among the members. */
static void test_learner_full_copy(void **state)
{
    struct fx *f = *state;
    struct ps_rcore_learner_info li;
    local_done(f, 0, 1, 100);
    local_done(f, 0, 2, 101);
    ack(f, 1, 2, 0, 2, 3);
    ack(f, 1, 3, 0, 2, 3);
    uint64_t isr[2] = {1, 2};
    assert_int_equal(assign(f, f->p, 4, 1, 3, isr, 2), 0);
    const struct rt_repl_action *a = sent(f, RT_REPL_MSG_PROBE);
    assert_non_null(a);
    assert_int_equal(a->peer, 3);
    assert_int_equal(a->msg.u.probe.epoch, 4);
    assert_int_equal(info_of(f->p).n_learners, 1);

    assert_int_equal(probe_resp(f, 2, 3, RT_REPL_COPY_NONE, 0, 0), 0);
    a = action(f, RT_REPL_ACT_READ);
    assert_non_null(a);
    assert_int_equal(a->peer, 3);
    assert_int_equal(a->lsn, 2);
    assert_int_equal(a->msg.kind, RT_REPL_MSG_BEGIN);
    assert_int_equal(a->msg.u.begin.n_history, 1);
    assert_int_equal(a->msg.u.begin.history[0].epoch, 3);
    uint64_t io = a->io_id;
    assert_int_equal(ps_rcore_learner_get(f->p, R, 3, &li), 0);
    assert_string_equal(li.state, "copy");

    /* While it copies: not streamed, not counted. */
    local_done(f, 3, 3, 102);
    assert_appends(f, 3, 0, 0);
    ack(f, 4, 2, 0, 3, 4);
    assert_int_equal(count(f, RT_REPL_ACT_REPLY, NULL), 1);
    assert_int_equal(info_of(f->p).n_buffered, 1); /* kept for 3 */

    struct rt_repl_event done = {.kind = RT_REPL_EV_READ_DONE,
                                 .now_ms = 5,
                                 .io_id = io,
                                 .range_id = R,
                                 .lsn = 2};
    rt_repl_actions_reset(&f->out);
    assert_int_equal(ps_rcore_step(f->p, &done, &f->out), 0);
    a = sent(f, RT_REPL_MSG_APPEND);
    assert_non_null(a);
    assert_int_equal(a->peer, 3);
    assert_int_equal(a->msg.u.append.lsn, 3);
    assert_int_equal(a->msg.u.append.gen, 3);

    assert_int_equal(ack(f, 6, 3, 0, 3, 4), 0);
    a = sent(f, RT_REPL_MSG_ISR_CHANGE);
    assert_non_null(a);
    assert_int_equal(a->msg.u.isr_change.n_add, 1);
    assert_int_equal(a->msg.u.isr_change.add[0], 3);
    assert_int_equal(a->msg.u.isr_change.epoch, 4);
    assert_int_equal(ps_rcore_learner_get(f->p, R, 3, &li), 0);
    assert_true(li.joining);

    /* Joining: its ack is needed now. */
    local_done(f, 7, 4, 103);
    ack(f, 8, 2, 0, 4, 4);
    assert_int_equal(count(f, RT_REPL_ACT_REPLY, NULL), 0);
    ack(f, 9, 3, 0, 4, 4);
    assert_int_equal(count(f, RT_REPL_ACT_REPLY, NULL), 1);

    uint64_t isr3[3] = {1, 2, 3};
    assert_int_equal(assign(f, f->p, 5, 1, 3, isr3, 3), 0);
    assert_int_equal(ps_rcore_learner_get(f->p, R, 3, &li), RT_ENOTFOUND);
    assert_int_equal(info_of(f->p).n_learners, 0);
    assert_null(sent(f, RT_REPL_MSG_PROBE));
}

/* §7.3: a replica whose applied LSN is in my history (same generation
 * start) and whose next group is still buffered is streamed from there;
 * one of another generation gets a full copy. */
static void test_learner_plain_or_full(void **state)
{
    struct fx *f = *state;
    local_done(f, 0, 1, 100);
    local_done(f, 0, 2, 101);
    uint64_t isr[2] = {1, 2};
    assert_int_equal(assign(f, f->p, 4, 1, 3, isr, 2), 0);
    assert_int_equal(probe_resp(f, 1, 3, RT_REPL_COPY_OK, 1, 2), 0);
    assert_non_null(action(f, RT_REPL_ACT_READ)); /* generation 2 */
    assert_null(sent(f, RT_REPL_MSG_APPEND));

    /* Probed again after the failed copy; the same generation agrees. */
    struct rt_repl_event done = {.kind = RT_REPL_EV_READ_DONE,
                                 .now_ms = 2,
                                 .io_id = action(f, RT_REPL_ACT_READ)->io_id,
                                 .range_id = R,
                                 .code = RT_ETIMEDOUT};
    rt_repl_actions_reset(&f->out);
    assert_int_equal(ps_rcore_step(f->p, &done, &f->out), 0);
    struct rt_repl_event tick = {.kind = RT_REPL_EV_TIMER,
                                 .now_ms = 2 + PS_RCORE_PROBE_TICKS * 100,
                                 .timer_id = PS_RCORE_TIMER_RESEND};
    rt_repl_actions_reset(&f->out);
    assert_int_equal(ps_rcore_step(f->p, &tick, &f->out), 0);
    assert_non_null(sent(f, RT_REPL_MSG_PROBE));
    assert_int_equal(probe_resp(f, 600, 3, RT_REPL_COPY_OK, 1, 3), 0);
    assert_null(action(f, RT_REPL_ACT_READ));
    const struct rt_repl_action *a = sent(f, RT_REPL_MSG_APPEND);
    assert_non_null(a);
    assert_int_equal(a->peer, 3);
    assert_int_equal(a->msg.u.append.lsn, 2);
    /* Its position 1 is already at cw (0: nobody acked): it may join. */
    assert_int_equal(count(f, RT_REPL_ACT_SEND, NULL), 2);
    assert_non_null(sent(f, RT_REPL_MSG_ISR_CHANGE));
}

/* Replaces the primary by one whose buffer keeps @window bytes for a
 * member that left the ISR, at the same assignment. */
static void primary_with_window(struct fx *f, uint64_t window)
{
    struct ps_rcore_config cfg = {
        .self_id = 1, .inflight = 8, .resend_ms = 100, .window_bytes = window};
    struct ps_rcore_assignment a = {.range_id = R,
                                    .epoch = 3,
                                    .primary_id = 1,
                                    .isr = {1, 2, 3},
                                    .n_isr = 3};
    ps_rcore_destroy(f->p);
    assert_int_equal(ps_rcore_create(&cfg, &f->p), 0);
    rt_repl_actions_reset(&f->out);
    assert_int_equal(ps_rcore_assign(f->p, &a, &f->out), 0);
}

/* §2.3, §7.3: a member that an assignment of my generation leaves out of
 * the ISR (late, paused) is probed at once, and my buffer keeps its
 * groups above its last ack although every ISR member acked them; back,
 * it is streamed from its applied LSN (no copy) and joins. */
static void test_left_member_tail(void **state)
{
    struct fx *f = *state;
    struct ps_rcore_learner_info li;
    primary_with_window(f, 1000);
    local_done(f, 0, 1, 100);
    ack(f, 1, 2, 0, 1, 3);
    ack(f, 1, 3, 0, 1, 3);
    local_done(f, 2, 2, 101);
    local_done(f, 2, 3, 102);
    ack(f, 3, 2, 0, 3, 3);
    uint64_t isr[2] = {1, 2};
    assert_int_equal(assign(f, f->p, 4, 1, 3, isr, 2), 0);
    assert_non_null(sent(f, RT_REPL_MSG_PROBE));
    assert_int_equal(ps_rcore_learner_get(f->p, R, 3, &li), 0);
    assert_string_equal(li.state, "probe");
    assert_int_equal(li.acked, 1);
    local_done(f, 4, 4, 103);
    ack(f, 5, 2, 0, 4, 4);
    assert_int_equal(count(f, RT_REPL_ACT_REPLY, NULL), 1);
    assert_int_equal(info_of(f->p).n_buffered, 3); /* 2..4, kept for 3 */

    assert_int_equal(probe_resp(f, 6, 3, RT_REPL_COPY_OK, 1, 3), 0);
    assert_null(action(f, RT_REPL_ACT_READ));
    const struct rt_repl_action *ap = sent(f, RT_REPL_MSG_APPEND);
    assert_non_null(ap);
    assert_int_equal(ap->peer, 3);
    assert_int_equal(ap->msg.u.append.lsn, 4); /* the last of 2, 3, 4 */
    assert_int_equal(ap->msg.u.append.gen, 3);
    assert_int_equal(ps_rcore_catchups(f->p, PS_RCORE_CATCHUP_TAIL), 1);
    assert_int_equal(ps_rcore_catchups(f->p, PS_RCORE_CATCHUP_FULL), 0);
    assert_int_equal(ack(f, 7, 3, 0, 4, 4), 0);
    const struct rt_repl_action *a = sent(f, RT_REPL_MSG_ISR_CHANGE);
    assert_non_null(a);
    assert_int_equal(a->msg.u.isr_change.add[0], 3);
    assert_int_equal(info_of(f->p).n_buffered, 0);
}

/* The buffer kept for a member out of the ISR is bounded: past the
 * window its groups are let go (a dead peer pins no more memory), and its
 * catch-up is a keyed copy from its applied LSN (its history agrees), or
 * a full one when its history disagrees. A member removed from the set is
 * no longer kept at all. */
static void test_left_member_window(void **state)
{
    struct fx *f = *state;
    primary_with_window(f, 7); /* local_done's groups are 3 bytes */
    local_done(f, 0, 1, 100);
    ack(f, 1, 2, 0, 1, 3);
    ack(f, 1, 3, 0, 1, 3);
    uint64_t isr[2] = {1, 2};
    assert_int_equal(assign(f, f->p, 4, 1, 3, isr, 2), 0);
    local_done(f, 2, 2, 101);
    local_done(f, 2, 3, 102);
    ack(f, 3, 2, 0, 3, 4);
    assert_int_equal(info_of(f->p).n_buffered, 2); /* 6 bytes: kept */
    local_done(f, 4, 4, 103);
    ack(f, 5, 2, 0, 4, 4);
    assert_int_equal(info_of(f->p).n_buffered, 0); /* 9 bytes: let go */
    assert_int_equal(probe_resp(f, 6, 3, RT_REPL_COPY_OK, 1, 3), 0);
    const struct rt_repl_action *a = action(f, RT_REPL_ACT_READ);
    assert_non_null(a);
    assert_int_equal(a->peer, 3);
    assert_int_equal(a->lsn, 4);
    assert_int_equal(a->msg.u.begin.mode, RT_REPL_BEGIN_KEYED);
    assert_int_equal(a->msg.u.begin.from_lsn, 1);
    assert_null(sent(f, RT_REPL_MSG_APPEND));
    assert_int_equal(ps_rcore_catchups(f->p, PS_RCORE_CATCHUP_KEYED), 1);
    assert_int_equal(ps_rcore_catchups(f->p, PS_RCORE_CATCHUP_TAIL), 0);
    /* Its READ_DONE(s) streams from s + 1 as after a full copy. */
    struct rt_repl_event done = {.kind = RT_REPL_EV_READ_DONE,
                                 .now_ms = 7,
                                 .io_id = a->io_id,
                                 .range_id = R,
                                 .lsn = 4};
    rt_repl_actions_reset(&f->out);
    assert_int_equal(ps_rcore_step(f->p, &done, &f->out), 0);
    struct ps_rcore_learner_info li;
    assert_int_equal(ps_rcore_learner_get(f->p, R, 3, &li), 0);
    assert_string_equal(li.state, "tail");
    assert_int_equal(li.acked, 4);

    /* Another generation at its applied LSN: a full copy. */
    primary_with_window(f, 7);
    local_done(f, 0, 1, 100);
    ack(f, 1, 2, 0, 1, 3);
    ack(f, 1, 3, 0, 1, 3);
    assert_int_equal(assign(f, f->p, 4, 1, 3, isr, 2), 0);
    for (uint64_t l = 2; l <= 4; l++) {
        local_done(f, l, l, 100 + l);
        ack(f, l, 2, 0, l, 4);
    }
    assert_int_equal(probe_resp(f, 6, 3, RT_REPL_COPY_OK, 1, 2), 0);
    a = action(f, RT_REPL_ACT_READ);
    assert_non_null(a);
    assert_int_equal(a->msg.u.begin.mode, RT_REPL_BEGIN_FULL);
    assert_int_equal(ps_rcore_catchups(f->p, PS_RCORE_CATCHUP_FULL), 1);

    /* Server 2 leaves the ISR and the set at once: nothing kept. */
    primary_with_window(f, 1000);
    local_done(f, 0, 1, 100);
    ack(f, 1, 3, 0, 1, 3);
    local_done(f, 2, 2, 101);
    ack(f, 3, 3, 0, 2, 3);
    struct rt_repl_msg m = {.kind = RT_REPL_MSG_ASSIGN};
    struct rt_repl_conf *c = &m.u.assign;
    c->range_id = R;
    c->epoch = 4;
    c->primary_id = 1;
    c->primary_epoch = 3;
    c->members[0] = (struct rt_repl_member){1, RT_REPL_ROLE_PRIMARY};
    c->members[1] = (struct rt_repl_member){3, RT_REPL_ROLE_SECONDARY};
    c->n_members = 2;
    c->isr[0] = 1;
    c->isr[1] = 3;
    c->n_isr = 2;
    assert_int_equal(msg_to(f, f->p, 4, MASTER, &m), 0);
    assert_null(sent(f, RT_REPL_MSG_PROBE));
    assert_int_equal(info_of(f->p).n_learners, 0);
    assert_int_equal(info_of(f->p).n_buffered, 0);
}

/* A range's durable history given back after a load: checked, then
 * answered in probes. */
static void test_set_history(void **state)
{
    struct fx *f = *state;
    struct rt_repl_epoch_start h[2] = {{2, 1}, {3, 5}};
    assert_int_equal(ps_rcore_set_history(f->s2, R + 1, h, 2), RT_ENOTFOUND);
    assert_int_equal(ps_rcore_set_history(f->s2, R, h, 0), RT_EINVAL);
    /* Its last entry past applied + 1 (0 + 1). */
    assert_int_equal(ps_rcore_set_history(f->s2, R, h, 2), RT_EINVAL);
    struct rt_repl_epoch_start bad[2] = {{3, 1}, {2, 1}};
    assert_int_equal(ps_rcore_set_history(f->s2, R, bad, 2), RT_EINVAL);
    for (uint64_t l = 1; l <= 5; l++) {
        append(f, l, 3);
        applied(f, l);
    }
    assert_int_equal(ps_rcore_set_history(f->s2, R, h, 2), 0);
    struct rt_repl_msg m = {.kind = RT_REPL_MSG_PROBE};
    m.u.probe = (struct rt_repl_probe){.range_id = R, .epoch = 3};
    assert_int_equal(msg_to(f, f->s2, 0, 1, &m), 0);
    const struct rt_repl_action *a = sent(f, RT_REPL_MSG_PROBE_RESP);
    assert_non_null(a);
    assert_int_equal(a->msg.u.probe_resp.applied_lsn, 5);
    assert_int_equal(a->msg.u.probe_resp.n_history, 2);
    assert_int_equal(a->msg.u.probe_resp.history[1].epoch, 3);
    assert_int_equal(a->msg.u.probe_resp.history[1].first_lsn, 5);
    assert_int_equal(a->msg.u.probe_resp.applied_epoch, 3);
}

/* §7.3: a replica with a suffix I never had (its newest generation is
 * not in my history) gets a keyed copy from D, the end of the prefix we
 * share (min of the shared generation's ends); one sharing no generation
 * start with me, or whose keyed copy failed, a full one. */
static void test_learner_divergent_keyed(void **state)
{
    struct fx *f = *state;
    primary_with_window(f, 7);
    local_done(f, 0, 1, 100);
    ack(f, 1, 2, 0, 1, 3);
    ack(f, 1, 3, 0, 1, 3);
    uint64_t isr[2] = {1, 2};
    assert_int_equal(assign(f, f->p, 4, 1, 3, isr, 2), 0);
    for (uint64_t l = 2; l <= 8; l++) {
        local_done(f, l, l, 100 + l);
        ack(f, l, 2, 0, l, 4);
    }
    struct rt_repl_epoch_start mine[2] = {{3, 1}, {5, 5}};
    assert_int_equal(ps_rcore_set_history(f->p, R, mine, 2), 0);
    struct rt_repl_msg m = {.kind = RT_REPL_MSG_PROBE_RESP};
    m.u.probe_resp =
        (struct rt_repl_replica_state){.range_id = R,
                                       .epoch = 4,
                                       .state = RT_REPL_COPY_DIVERGED,
                                       .applied_lsn = 7,
                                       .applied_epoch = 4,
                                       .n_history = 2};
    m.u.probe_resp.history[0] = (struct rt_repl_epoch_start){3, 1};
    m.u.probe_resp.history[1] = (struct rt_repl_epoch_start){4, 5};
    assert_int_equal(msg_to(f, f->p, 9, 3, &m), 0);
    const struct rt_repl_action *a = action(f, RT_REPL_ACT_READ);
    assert_non_null(a);
    assert_int_equal(a->msg.u.begin.mode, RT_REPL_BEGIN_KEYED);
    assert_int_equal(a->msg.u.begin.from_lsn, 4);
    uint64_t io = a->io_id;
    /* It failed (the replica's key log did not reach back): full next. */
    struct rt_repl_event done = {.kind = RT_REPL_EV_READ_DONE,
                                 .now_ms = 10,
                                 .io_id = io,
                                 .range_id = R,
                                 .code = RT_ENOTFOUND};
    rt_repl_actions_reset(&f->out);
    assert_int_equal(ps_rcore_step(f->p, &done, &f->out), 0);
    struct rt_repl_event tick = {.kind = RT_REPL_EV_TIMER,
                                 .now_ms = 10 + PS_RCORE_PROBE_TICKS * 100,
                                 .timer_id = PS_RCORE_TIMER_RESEND};
    rt_repl_actions_reset(&f->out);
    assert_int_equal(ps_rcore_step(f->p, &tick, &f->out), 0);
    assert_non_null(sent(f, RT_REPL_MSG_PROBE));
    assert_int_equal(msg_to(f, f->p, 600, 3, &m), 0);
    a = action(f, RT_REPL_ACT_READ);
    assert_non_null(a);
    assert_int_equal(a->msg.u.begin.mode, RT_REPL_BEGIN_FULL);

    /* No generation start in common: full at once. */
    primary_with_window(f, 7);
    local_done(f, 0, 1, 100);
    ack(f, 1, 2, 0, 1, 3);
    ack(f, 1, 3, 0, 1, 3);
    assert_int_equal(assign(f, f->p, 4, 1, 3, isr, 2), 0);
    for (uint64_t l = 2; l <= 8; l++) {
        local_done(f, l, l, 100 + l);
        ack(f, l, 2, 0, l, 4);
    }
    m.u.probe_resp.history[0] = (struct rt_repl_epoch_start){3, 2};
    assert_int_equal(msg_to(f, f->p, 9, 3, &m), 0);
    a = action(f, RT_REPL_ACT_READ);
    assert_non_null(a);
    assert_int_equal(a->msg.u.begin.mode, RT_REPL_BEGIN_FULL);
}

/* The replica side of a keyed copy (§7.3): a KEYED BEGIN is refused,
 * changing nothing, for an unknown range, an older epoch, or a from_lsn
 * above my applied LSN; accepted, I am a LEARNER (never acks, never
 * sealable) whose WRITE persists LEARNING without clearing (mode KEYED
 * in the action), until the end's WRITE makes me a follower at s. */
static void test_learner_replica_keyed(void **state)
{
    struct fx *f = *state;
    for (uint64_t l = 1; l <= 3; l++) {
        append(f, l, 3);
        applied(f, l);
    }
    struct rt_repl_msg b = {.kind = RT_REPL_MSG_BEGIN};
    b.u.begin = (struct rt_repl_begin){.range_id = R + 1,
                                       .epoch = 3,
                                       .mode = RT_REPL_BEGIN_KEYED,
                                       .from_lsn = 3};
    assert_int_equal(msg_to(f, f->s2, 1, 1, &b), 0);
    assert_int_equal(sent(f, RT_REPL_MSG_COPY_RESP)->msg.u.copy_resp.code,
                     RT_ESTALE);
    b.u.begin.range_id = R;
    b.u.begin.epoch = 2;
    assert_int_equal(msg_to(f, f->s2, 1, 1, &b), 0);
    assert_int_equal(sent(f, RT_REPL_MSG_COPY_RESP)->msg.u.copy_resp.code,
                     RT_ESTALE);
    b.u.begin.epoch = 3;
    b.u.begin.from_lsn = 4; /* I hold only 3: LSN 4's keys would be lost */
    assert_int_equal(msg_to(f, f->s2, 1, 1, &b), 0);
    assert_int_equal(sent(f, RT_REPL_MSG_COPY_RESP)->msg.u.copy_resp.code,
                     RT_EINVAL);
    assert_null(action(f, RT_REPL_ACT_WRITE));
    struct ps_rcore_range_info info = info_of(f->s2);
    assert_int_equal(info.role, PS_RCORE_SECONDARY);
    assert_int_equal(info.applied_lsn, 3);

    b.u.begin.from_lsn = 3;
    assert_int_equal(msg_to(f, f->s2, 1, 1, &b), 0);
    const struct rt_repl_action *a = action(f, RT_REPL_ACT_WRITE);
    assert_non_null(a);
    assert_int_equal(a->msg.kind, RT_REPL_MSG_BEGIN);
    assert_int_equal(a->msg.u.begin.mode, RT_REPL_BEGIN_KEYED);
    uint64_t io = a->io_id;
    info = info_of(f->s2);
    assert_int_equal(info.role, PS_RCORE_LEARNER);
    assert_int_equal(seal(f, f->s2, 5000, 4), 0);
    assert_int_equal(sent(f, RT_REPL_MSG_SEAL_RESP)->msg.u.seal_resp.code,
                     RT_ESTALE);
    /* A second BEGIN while the first one's WRITE runs: busy. */
    assert_int_equal(msg_to(f, f->s2, 1, 1, &b), 0);
    assert_int_equal(sent(f, RT_REPL_MSG_COPY_RESP)->msg.u.copy_resp.code,
                     RT_EBUSY);
    struct rt_repl_event d = {
        .kind = RT_REPL_EV_DISK_DONE, .now_ms = 3, .range_id = R, .io_id = io};
    rt_repl_actions_reset(&f->out);
    assert_int_equal(ps_rcore_step(f->s2, &d, &f->out), 0);
    assert_int_equal(sent(f, RT_REPL_MSG_COPY_RESP)->msg.u.copy_resp.code, 0);
    struct rt_repl_msg e = {.kind = RT_REPL_MSG_SNAP_END};
    e.u.begin = (struct rt_repl_begin){
        .range_id = R, .epoch = 3, .snap_lsn = 9, .n_history = 1};
    e.u.begin.history[0] = (struct rt_repl_epoch_start){3, 1};
    assert_int_equal(msg_to(f, f->s2, 4, 1, &e), 0);
    a = action(f, RT_REPL_ACT_WRITE);
    assert_non_null(a);
    d.io_id = a->io_id;
    rt_repl_actions_reset(&f->out);
    assert_int_equal(ps_rcore_step(f->s2, &d, &f->out), 0);
    assert_int_equal(sent(f, RT_REPL_MSG_COPY_RESP)->msg.u.copy_resp.lsn, 9);
    info = info_of(f->s2);
    assert_int_equal(info.role, PS_RCORE_SECONDARY);
    assert_int_equal(info.applied_lsn, 9);
}

/* The replica side of a full copy: probe answers, BEGIN clears (never
 * sealable meanwhile), the end's WRITE makes it a follower at s. Bad
 * input changes nothing. */
static void test_learner_replica(void **state)
{
    struct fx *f = *state;
    append(f, 1, 3);
    applied(f, 1);
    struct rt_repl_msg m = {.kind = RT_REPL_MSG_PROBE};
    m.u.probe = (struct rt_repl_probe){.range_id = R, .epoch = 3};
    assert_int_equal(msg_to(f, f->s2, 0, 1, &m), 0);
    const struct rt_repl_action *a = sent(f, RT_REPL_MSG_PROBE_RESP);
    assert_int_equal(a->msg.u.probe_resp.code, 0);
    assert_int_equal(a->msg.u.probe_resp.state, RT_REPL_COPY_OK);
    assert_int_equal(a->msg.u.probe_resp.applied_lsn, 1);
    assert_int_equal(a->msg.u.probe_resp.n_history, 0); /* gen unknown */
    m.u.probe.epoch = 2;
    assert_int_equal(msg_to(f, f->s2, 0, 1, &m), 0);
    assert_int_equal(sent(f, RT_REPL_MSG_PROBE_RESP)->msg.u.probe_resp.code,
                     RT_ESTALE);

    struct rt_repl_msg b = {.kind = RT_REPL_MSG_BEGIN};
    b.u.begin = (struct rt_repl_begin){.range_id = R, .epoch = 2};
    assert_int_equal(msg_to(f, f->s2, 1, 1, &b), 0);
    assert_int_equal(sent(f, RT_REPL_MSG_COPY_RESP)->msg.u.copy_resp.code,
                     RT_ESTALE);
    assert_int_equal(info_of(f->s2).role, PS_RCORE_SECONDARY);
    b.u.begin.epoch = 3;
    assert_int_equal(msg_to(f, f->s2, 1, 1, &b), 0);
    a = action(f, RT_REPL_ACT_WRITE);
    assert_non_null(a);
    assert_int_equal(a->msg.kind, RT_REPL_MSG_BEGIN);
    uint64_t clear_io = a->io_id;
    struct ps_rcore_range_info info = info_of(f->s2);
    assert_int_equal(info.role, PS_RCORE_LEARNER);
    assert_int_equal(info.state, PS_RLRN_CLEARING);
    assert_int_equal(info.applied_lsn, 0);
    assert_int_equal(seal(f, f->s2, 5000, 4), 0);
    assert_int_equal(sent(f, RT_REPL_MSG_SEAL_RESP)->msg.u.seal_resp.code,
                     RT_ESTALE);

    struct rt_repl_msg e = {.kind = RT_REPL_MSG_SNAP_END};
    e.u.begin = (struct rt_repl_begin){
        .range_id = R, .epoch = 3, .snap_lsn = 7, .n_history = 1};
    e.u.begin.history[0] = (struct rt_repl_epoch_start){3, 1};
    assert_int_equal(msg_to(f, f->s2, 2, 1, &e), 0); /* still clearing */
    assert_int_equal(sent(f, RT_REPL_MSG_COPY_RESP)->msg.u.copy_resp.code,
                     RT_EINVAL);
    struct rt_repl_event d = {.kind = RT_REPL_EV_DISK_DONE,
                              .now_ms = 3,
                              .range_id = R,
                              .io_id = clear_io};
    rt_repl_actions_reset(&f->out);
    assert_int_equal(ps_rcore_step(f->s2, &d, &f->out), 0);
    a = sent(f, RT_REPL_MSG_COPY_RESP);
    assert_int_equal(a->peer, 1);
    assert_int_equal(a->msg.u.copy_resp.code, 0);
    assert_int_equal(a->msg.u.copy_resp.lsn, 0);
    assert_int_equal(info_of(f->s2).state, PS_RLRN_COPYING);
    assert_int_equal(append(f, 8, 3), 0); /* no appends while copying */
    assert_int_equal(sent(f, RT_REPL_MSG_ACK)->msg.u.ack.code, RT_ESTALE);

    e.u.begin.epoch = 4; /* another copy's end */
    assert_int_equal(msg_to(f, f->s2, 4, 1, &e), 0);
    assert_int_equal(sent(f, RT_REPL_MSG_COPY_RESP)->msg.u.copy_resp.code,
                     RT_EINVAL);
    e.u.begin.epoch = 3;
    assert_int_equal(msg_to(f, f->s2, 4, 1, &e), 0);
    a = action(f, RT_REPL_ACT_WRITE);
    assert_int_equal(a->msg.kind, RT_REPL_MSG_SNAP_END);
    assert_int_equal(a->lsn, 7);
    d.io_id = a->io_id;
    rt_repl_actions_reset(&f->out);
    assert_int_equal(ps_rcore_step(f->s2, &d, &f->out), 0);
    assert_int_equal(sent(f, RT_REPL_MSG_COPY_RESP)->msg.u.copy_resp.lsn, 7);
    info = info_of(f->s2);
    assert_int_equal(info.role, PS_RCORE_SECONDARY);
    assert_int_equal(info.state, PS_RSEC_FOLLOWING);
    assert_int_equal(info.applied_lsn, 7);
    assert_int_equal(append(f, 8, 3), 0);
    assert_non_null(action(f, RT_REPL_ACT_WRITE));
    m.u.probe.epoch = 3;
    assert_int_equal(msg_to(f, f->s2, 5, 1, &m), 0); /* 8 in flight */
    assert_int_equal(sent(f, RT_REPL_MSG_PROBE_RESP)->msg.u.probe_resp.code,
                     RT_EBUSY);
}

/* A duplicate of another generation than my group at that LSN: DIVERGED,
 * NACKed, and nothing is acked from then on. */
static void test_learner_diverged_duplicate(void **state)
{
    struct fx *f = *state;
    uint8_t rec = 1;
    struct rt_repl_msg m = {.kind = RT_REPL_MSG_APPEND};
    m.u.append = (struct rt_repl_append){.range_id = R,
                                         .epoch = 3,
                                         .lsn = 1,
                                         .records = &rec,
                                         .records_len = 1,
                                         .gen = 3};
    assert_int_equal(msg_to(f, f->s2, 0, 1, &m), 0);
    applied(f, 1);
    m.u.append.gen = 4;
    m.u.append.epoch = 4;
    assert_int_equal(msg_to(f, f->s2, 1, 1, &m), 0);
    assert_int_equal(sent(f, RT_REPL_MSG_ACK)->msg.u.ack.code, RT_EDIVERGED);
    assert_int_equal(info_of(f->s2).state, PS_RSEC_DIVERGED);
    m.u.append.lsn = 2;
    assert_int_equal(msg_to(f, f->s2, 2, 1, &m), RT_EINVAL);
    assert_int_equal(sent(f, RT_REPL_MSG_ACK)->msg.u.ack.code, RT_EDIVERGED);
    assert_null(action(f, RT_REPL_ACT_WRITE));
}

/* A restarted primary, failed over to itself, whose ISR member NACKs
 * below the position assumed at the promotion and below the (empty)
 * buffer: a whole resend period later,
 * with no ack confirming that position, it gets a full copy (one member
 * at a time) and is streamed from the copy's LSN. */
static void test_isr_member_copy(void **state)
{
    struct fx *f = *state;
    struct ps_rcore *n = NULL;
    struct ps_rcore_config cfg = {
        .self_id = 1, .inflight = 4, .resend_ms = 100, .seal_grace_ms = 50};
    assert_int_equal(ps_rcore_create(&cfg, &n), 0);
    struct ps_rcore_durable d = {.range_id = R,
                                 .role = PS_RCORE_PRIMARY,
                                 .epoch = 3,
                                 .primary_id = 1,
                                 .primary_epoch = 3,
                                 .isr = {1, 2, 3},
                                 .n_isr = 3,
                                 .applied_lsn = 5,
                                 .commit_lsn = 5};
    rt_repl_actions_reset(&f->out);
    assert_int_equal(ps_rcore_load(n, &d, 0, &f->out), 0);
    assert_int_equal(seal(f, n, 1, 4), 0);
    struct rt_repl_event sealed = {
        .kind = RT_REPL_EV_DISK_DONE,
        .range_id = R,
        .io_id = action(f, RT_REPL_ACT_WRITE)->io_id};
    rt_repl_actions_reset(&f->out);
    assert_int_equal(ps_rcore_step(n, &sealed, &f->out), 0);
    uint64_t isr[3] = {1, 2, 3};
    assert_int_equal(assign(f, n, 4, 1, 4, isr, 3), 0);
    assert_int_equal(info_of(n).state, PS_RPRI_SERVING);
    uint8_t rec = 6;
    uint64_t req = 100;
    struct rt_repl_event g = {.kind = RT_REPL_EV_DISK_DONE,
                              .now_ms = 10,
                              .range_id = R,
                              .lsn = 6,
                              .records = &rec,
                              .records_len = 1,
                              .req_ids = &req,
                              .n_req_ids = 1};
    rt_repl_actions_reset(&f->out);
    assert_int_equal(ps_rcore_step(n, &g, &f->out), 0);
    struct rt_repl_msg m = {.kind = RT_REPL_MSG_ACK};
    m.u.ack = (struct rt_repl_ack){
        .range_id = R, .code = RT_ELSNGAP, .applied_lsn = 2, .epoch = 4};
    assert_int_equal(msg_to(f, n, 20, 2, &m), 0);
    assert_null(action(f, RT_REPL_ACT_READ)); /* maybe an old NACK */
    m.u.ack.applied_lsn = 3;
    assert_int_equal(msg_to(f, n, 30, 3, &m), 0);
    struct rt_repl_event tick = {.kind = RT_REPL_EV_TIMER,
                                 .now_ms = 130,
                                 .timer_id = PS_RCORE_TIMER_RESEND};
    rt_repl_actions_reset(&f->out);
    assert_int_equal(ps_rcore_step(n, &tick, &f->out), 0);
    assert_int_equal(count(f, RT_REPL_ACT_READ, NULL), 1); /* one at a time */
    const struct rt_repl_action *a = action(f, RT_REPL_ACT_READ);
    assert_int_equal(a->peer, 2);
    assert_int_equal(a->lsn, 6);
    struct rt_repl_event done = {.kind = RT_REPL_EV_READ_DONE,
                                 .now_ms = 140,
                                 .io_id = a->io_id,
                                 .range_id = R,
                                 .lsn = 6};
    rt_repl_actions_reset(&f->out);
    assert_int_equal(ps_rcore_step(n, &done, &f->out), 0);
    assert_null(sent(f, RT_REPL_MSG_APPEND)); /* it holds 6 already */
    m.u.ack = (struct rt_repl_ack){.range_id = R, .applied_lsn = 6, .epoch = 4};
    assert_int_equal(msg_to(f, n, 150, 2, &m), 0);
    tick.now_ms = 300;
    rt_repl_actions_reset(&f->out);
    assert_int_equal(ps_rcore_step(n, &tick, &f->out), 0);
    a = action(f, RT_REPL_ACT_READ);
    assert_non_null(a);
    assert_int_equal(a->peer, 3);
    ps_rcore_destroy(n);
}

/* A restart while LEARNING (a copy cut short): the range holds nothing,
 * answers probes "no copy", takes no appends and is never sealable; a
 * LEARNER record with an applied LSN is refused. */
static void test_learner_load(void **state)
{
    struct fx *f = *state;
    struct ps_rcore *n = NULL;
    struct ps_rcore_config cfg = {
        .self_id = 3, .inflight = 4, .resend_ms = 100};
    assert_int_equal(ps_rcore_create(&cfg, &n), 0);
    struct ps_rcore_durable d = {.range_id = R,
                                 .role = PS_RCORE_LEARNER,
                                 .epoch = 4,
                                 .primary_id = 1,
                                 .primary_epoch = 3,
                                 .isr = {1, 2},
                                 .n_isr = 2,
                                 .applied_lsn = 5,
                                 .commit_lsn = 5};
    rt_repl_actions_reset(&f->out);
    assert_int_equal(ps_rcore_load(n, &d, 0, &f->out), RT_EINVAL);
    d.applied_lsn = d.commit_lsn = 0;
    assert_int_equal(ps_rcore_load(n, &d, 0, &f->out), 0);
    assert_int_equal(info_of(n).role, PS_RCORE_LEARNER);
    struct rt_repl_msg m = {.kind = RT_REPL_MSG_PROBE};
    m.u.probe = (struct rt_repl_probe){.range_id = R, .epoch = 4};
    assert_int_equal(msg_to(f, n, 1, 1, &m), 0);
    const struct rt_repl_action *a = sent(f, RT_REPL_MSG_PROBE_RESP);
    assert_int_equal(a->msg.u.probe_resp.code, 0);
    assert_int_equal(a->msg.u.probe_resp.state, RT_REPL_COPY_NONE);
    assert_int_equal(info_of(n).state, PS_RLRN_PROBED);
    assert_int_equal(seal(f, n, 5000, 5), 0);
    assert_int_equal(sent(f, RT_REPL_MSG_SEAL_RESP)->msg.u.seal_resp.code,
                     RT_ESTALE);
    ps_rcore_destroy(n);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_pipeline_window, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reply_at_cw, setup, teardown),
        cmocka_unit_test_setup_teardown(test_secondary_rules, setup, teardown),
        cmocka_unit_test_setup_teardown(test_gap_rewinds_once, setup, teardown),
        cmocka_unit_test_setup_teardown(test_resend_timer, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sealed_deposes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_assign_at_lsn, setup, teardown),
        cmocka_unit_test_setup_teardown(test_hold_at_last, setup, teardown),
        cmocka_unit_test_setup_teardown(test_update_and_forget, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_conn_up_resends, setup, teardown),
        cmocka_unit_test_setup_teardown(test_seal, setup, teardown),
        cmocka_unit_test_setup_teardown(test_seal_grace, setup, teardown),
        cmocka_unit_test_setup_teardown(test_promotion, setup, teardown),
        cmocka_unit_test_setup_teardown(
            test_promotion_of_a_range_assigned_at_lsn, setup, teardown),
        cmocka_unit_test_setup_teardown(test_split_child_isr_change, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_promotion_isr_of_one, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_cancel_resumes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_assign_step_down, setup, teardown),
        cmocka_unit_test_setup_teardown(test_shipped_then_stepped_down, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_freeze, setup, teardown),
        cmocka_unit_test_setup_teardown(test_frozen_assigned, setup, teardown),
        cmocka_unit_test_setup_teardown(test_load, setup, teardown),
        cmocka_unit_test_setup_teardown(test_append_to_primary, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_ack_to_sender, setup, teardown),
        cmocka_unit_test_setup_teardown(test_promotion_waits_for_writer, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_isr_shrink_late_ack, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_isr_shrink_oldest_group, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_isr_shrink_nack, setup, teardown),
        cmocka_unit_test_setup_teardown(test_isr_shrink_activating, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_isr_shrink_link_down, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_write_hold_expires, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_learner_full_copy, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_learner_plain_or_full, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_left_member_tail, setup, teardown),
        cmocka_unit_test_setup_teardown(test_left_member_window, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_set_history, setup, teardown),
        cmocka_unit_test_setup_teardown(test_learner_replica, setup, teardown),
        cmocka_unit_test_setup_teardown(test_learner_replica_keyed, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_learner_divergent_keyed, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_learner_diverged_duplicate, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_isr_member_copy, setup, teardown),
        cmocka_unit_test_setup_teardown(test_learner_load, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
