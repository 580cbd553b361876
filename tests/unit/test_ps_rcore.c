/* Unit tests of the replica core (ps_rcore.h) stepped by hand: one primary
 * core and one secondary core, with the actions of each step inspected.
 * The pipeline window, cw over the ISR, replies in LSN order, the
 * secondary's duplicate / gap / old-epoch answers, the primary's rewind on
 * RT_ELSNGAP, on its resend timer and on a reconnect, deposition on
 * RT_ESEALED, refused events, assignment at a durable LSN, later epochs,
 * forgetting a range, and writes held at the last LSN. tests/sim/sim_repl.c
 * runs the same core at scale. */
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
 * writes get RT_ETIMEDOUT (outcome unknown), later groups are refused. */
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
    assert_int_equal(local_done(f, 2, 2, 101), RT_EINVAL);
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
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
