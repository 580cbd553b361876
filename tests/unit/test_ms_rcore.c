/* Unit tests of the master's replica core (ms_rcore.h) stepped by hand:
 * one range at epoch 5, primary 1, ISR {1, 2, 3}, and the actions of each
 * step inspected. Every transition of the §3.4 table (suspicion, seal,
 * choice, cancel, assignment, ISR changes, learners, a returning
 * secondary's join, replicas leaving the set), every ISR_CHANGE refusal
 * with its code, and the restarts in SEALING and ADDING. tests/sim runs the
 * same core at scale. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ms_rcore.h"
#include "rt_err.h"
#include "rt_rand.h"
#include "rt_repl_ev.h"

/* Fixture */

#define R 9 /* range id */
#define FAIL 1500
#define LEASE 1000
#define GRACE (FAIL + LEASE) /* no suspicion before this */

struct fx
{
    struct ms_rcore *m;
    struct rt_repl_actions out;
};

static struct rt_repl_conf conf_at(uint64_t epoch)
{
    struct rt_repl_conf c = {.range_id = R,
                             .epoch = epoch,
                             .primary_id = 1,
                             .primary_epoch = 4,
                             .members = {{1, RT_REPL_ROLE_PRIMARY},
                                         {2, RT_REPL_ROLE_SECONDARY},
                                         {3, RT_REPL_ROLE_SECONDARY}},
                             .n_members = 3,
                             .isr = {1, 2, 3},
                             .n_isr = 3,
                             .rf = 3,
                             .min_insync = 2};
    return c;
}

static const struct ms_rcore_config cfg = {.failover_after_ms = FAIL,
                                           .reconnect_grace_ms = 300,
                                           .lease_ms = LEASE,
                                           .seal_wait_ms = 200,
                                           .resend_ms = 100,
                                           .learner_timeout_ms = 30000};

static int setup(void **state)
{
    struct fx *f = calloc(1, sizeof(*f));
    rt_repl_actions_init(&f->out);
    assert_int_equal(ms_rcore_create(&cfg, 0, &f->m), 0);
    struct rt_repl_conf c = conf_at(5);
    assert_int_equal(ms_rcore_load(f->m, &c, 0, &f->out), 0);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fx *f = *state;
    ms_rcore_destroy(f->m);
    rt_repl_actions_close(&f->out);
    free(f);
    return 0;
}

/* Helpers */

static int step(struct fx *f, const struct rt_repl_event *ev)
{
    rt_repl_actions_reset(&f->out);
    return ms_rcore_step(f->m, ev, &f->out);
}

static int heartbeat(struct fx *f, uint64_t now, uint64_t from)
{
    struct rt_repl_msg msg = {.kind = RT_REPL_MSG_HEARTBEAT};
    struct rt_repl_event ev = {
        .kind = RT_REPL_EV_MSG, .now_ms = now, .peer = from, .msg = &msg};
    return step(f, &ev);
}

static int tick(struct fx *f, uint64_t now)
{
    struct rt_repl_event ev = {.kind = RT_REPL_EV_TIMER,
                               .now_ms = now,
                               .timer_id = MS_RCORE_TIMER_TICK};
    return step(f, &ev);
}

static int committed(struct fx *f, uint64_t now, uint64_t id, int32_t code)
{
    struct rt_repl_event ev = {
        .kind = RT_REPL_EV_COMMITTED, .now_ms = now, .io_id = id, .code = code};
    return step(f, &ev);
}

static int seal_resp(struct fx *f,
                     uint64_t now,
                     uint64_t from,
                     int32_t code,
                     uint64_t new_epoch,
                     uint64_t lsn,
                     uint32_t retry_ms)
{
    struct rt_repl_msg msg = {.kind = RT_REPL_MSG_SEAL_RESP};
    msg.u.seal_resp = (struct rt_repl_seal_resp){.range_id = R,
                                                 .new_epoch = new_epoch,
                                                 .code = code,
                                                 .applied_epoch = 5,
                                                 .applied_lsn = lsn,
                                                 .retry_ms = retry_ms};
    struct rt_repl_event ev = {
        .kind = RT_REPL_EV_MSG, .now_ms = now, .peer = from, .msg = &msg};
    return step(f, &ev);
}

static int assign_resp(struct fx *f, uint64_t now, uint64_t from, uint64_t e)
{
    struct rt_repl_msg msg = {.kind = RT_REPL_MSG_ASSIGN_RESP};
    msg.u.assign_resp =
        (struct rt_repl_assign_resp){.range_id = R, .epoch = e, .code = 0};
    struct rt_repl_event ev = {
        .kind = RT_REPL_EV_MSG, .now_ms = now, .peer = from, .msg = &msg};
    return step(f, &ev);
}

static int isr_change_at(struct fx *f,
                         uint64_t now,
                         uint64_t from,
                         uint64_t range,
                         uint64_t epoch,
                         const uint64_t *rm,
                         size_t n_rm,
                         const uint64_t *add,
                         size_t n_add)
{
    struct rt_repl_msg msg = {.kind = RT_REPL_MSG_ISR_CHANGE};
    msg.u.isr_change.range_id = range;
    msg.u.isr_change.epoch = epoch;
    for (size_t i = 0; i < n_rm; i++) {
        msg.u.isr_change.remove[i] = rm[i];
    }
    msg.u.isr_change.n_remove = n_rm;
    for (size_t i = 0; i < n_add; i++) {
        msg.u.isr_change.add[i] = add[i];
    }
    msg.u.isr_change.n_add = n_add;
    struct rt_repl_event ev = {
        .kind = RT_REPL_EV_MSG, .now_ms = now, .peer = from, .msg = &msg};
    return step(f, &ev);
}

static int isr_change(struct fx *f,
                      uint64_t from,
                      uint64_t range,
                      uint64_t epoch,
                      const uint64_t *rm,
                      size_t n_rm,
                      const uint64_t *add,
                      size_t n_add)
{
    return isr_change_at(f, 10, from, range, epoch, rm, n_rm, add, n_add);
}

/* How many actions of @kind (and message @mk for SEND) are in the list;
 * the last one in *last. */
static size_t count(const struct fx *f,
                    enum rt_repl_act_kind kind,
                    int mk,
                    const struct rt_repl_action **last)
{
    size_t n = 0;
    for (size_t i = 0; i < f->out.n; i++) {
        const struct rt_repl_action *a = &f->out.v[i];
        if (a->kind == kind && (mk < 0 || (int)a->msg.kind == mk)) {
            n++;
            if (last != NULL) {
                *last = a;
            }
        }
    }
    return n;
}

static void assert_isr_resp(const struct fx *f, int32_t code)
{
    const struct rt_repl_action *a = NULL;
    assert_int_equal(count(f, RT_REPL_ACT_SEND, RT_REPL_MSG_ISR_RESP, &a), 1);
    assert_int_equal(a->msg.u.isr_resp.code, code);
    assert_int_equal(count(f, RT_REPL_ACT_PROPOSE, -1, NULL), 0);
}

static enum ms_rcore_state state_of(const struct fx *f)
{
    struct ms_rcore_range_info info;
    assert_int_equal(ms_rcore_range_get(f->m, R, &info), 0);
    return info.state;
}

static struct rt_repl_conf conf_of(const struct fx *f)
{
    struct ms_rcore_range_info info;
    assert_int_equal(ms_rcore_range_get(f->m, R, &info), 0);
    return info.conf;
}

/* Drives the range into SEALING at t = GRACE + 10: 2 and 3 heartbeat, 1
 * stays silent; returns the time. */
static uint64_t to_sealing(struct fx *f)
{
    const struct rt_repl_action *a = NULL;
    uint64_t t = GRACE - 100;
    heartbeat(f, t, 2);
    heartbeat(f, t, 3);
    assert_int_equal(tick(f, GRACE), 0);
    assert_int_equal(count(f, RT_REPL_ACT_PROPOSE, -1, &a), 1);
    assert_int_equal(committed(f, GRACE + 10, a->io_id, 0), 0);
    assert_int_equal(state_of(f), MS_RCORE_SEALING);
    return GRACE + 10;
}

/* Tests */

/* No suspicion during the start grace; then a silent primary gets a
 * FAILOVER intent guarded by (epoch, no seal), and nothing is sent before
 * it commits. */
static void test_suspicion_proposes_intent(void **state)
{
    struct fx *f = *state;
    const struct rt_repl_action *a = NULL;
    assert_int_equal(tick(f, GRACE - 1), 0);
    assert_int_equal(count(f, RT_REPL_ACT_PROPOSE, -1, NULL), 0);
    assert_int_equal(count(f, RT_REPL_ACT_TIMER, -1, &a), 1);
    assert_int_equal(a->at_ms, GRACE);
    heartbeat(f, GRACE - 100, 2);
    assert_int_equal(tick(f, GRACE), 0);
    assert_int_equal(count(f, RT_REPL_ACT_PROPOSE, -1, &a), 1);
    assert_int_equal(a->guard_epoch, 5);
    assert_int_equal(a->guard_seal_epoch, 0);
    assert_int_equal(a->conf.epoch, 5);
    assert_int_equal(a->conf.seal_epoch, 6);
    assert_int_equal(a->conf.seal_kind, RT_REPL_SEAL_FAILOVER);
    assert_int_equal(count(f, RT_REPL_ACT_SEND, -1, NULL), 0);
    assert_int_equal(state_of(f), MS_RCORE_STABLE);
    /* One proposal at a time. */
    assert_int_equal(tick(f, GRACE + 50), 0);
    assert_int_equal(count(f, RT_REPL_ACT_PROPOSE, -1, NULL), 0);
}

/* A primary that heartbeats is not suspected; nor is one whose secondaries
 * are all silent (nothing to promote: the range waits). */
static void test_no_suspicion(void **state)
{
    struct fx *f = *state;
    heartbeat(f, GRACE - 10, 1);
    assert_int_equal(tick(f, GRACE), 0);
    assert_int_equal(count(f, RT_REPL_ACT_PROPOSE, -1, NULL), 0);
    assert_int_equal(tick(f, GRACE - 10 + FAIL), 0);
    assert_int_equal(count(f, RT_REPL_ACT_PROPOSE, -1, NULL), 0);
}

/* A connection down for the reconnect grace is suspicion too. */
static void test_conn_down_suspicion(void **state)
{
    struct fx *f = *state;
    uint64_t t = 3 * GRACE;
    heartbeat(f, t, 1);
    heartbeat(f, t, 2);
    struct rt_repl_event down = {
        .kind = RT_REPL_EV_CONN, .now_ms = t + 10, .peer = 1, .code = -1};
    assert_int_equal(step(f, &down), 0);
    assert_int_equal(tick(f, t + 309), 0);
    assert_int_equal(count(f, RT_REPL_ACT_PROPOSE, -1, NULL), 0);
    assert_int_equal(tick(f, t + 310), 0);
    assert_int_equal(count(f, RT_REPL_ACT_PROPOSE, -1, NULL), 1);
}

/* A heartbeat reporting a stalled writer is suspicion at once; a later
 * one without it lifts it. */
static void test_stalled_suspicion(void **state)
{
    struct fx *f = *state;
    uint64_t t = 3 * GRACE;
    heartbeat(f, t, 1);
    heartbeat(f, t, 2);
    struct rt_repl_msg msg = {.kind = RT_REPL_MSG_HEARTBEAT};
    msg.u.heartbeat.stalled = 1;
    struct rt_repl_event hb = {
        .kind = RT_REPL_EV_MSG, .now_ms = t + 10, .peer = 1, .msg = &msg};
    assert_int_equal(step(f, &hb), 0);
    assert_int_equal(count(f, RT_REPL_ACT_PROPOSE, -1, NULL), 1);
}

/* A restarted primary (ASSIGN_RESP RT_ENOTPRIMARY at the current epoch)
 * is failed over though it heartbeats: it is sealed too, the choice waits
 * for every live member, a tie keeps it primary in a new generation, and
 * the intent is not cancelled by its heartbeats. */
static void test_restarted_primary(void **state)
{
    struct fx *f = *state;
    const struct rt_repl_action *a = NULL;
    uint64_t t = 3 * GRACE;
    for (uint64_t s = 1; s <= 3; s++) {
        heartbeat(f, t, s);
    }
    struct rt_repl_msg msg = {.kind = RT_REPL_MSG_ASSIGN_RESP};
    msg.u.assign_resp = (struct rt_repl_assign_resp){
        .range_id = R, .epoch = 4, .code = RT_ENOTPRIMARY};
    struct rt_repl_event ev = {
        .kind = RT_REPL_EV_MSG, .now_ms = t, .peer = 1, .msg = &msg};
    assert_int_equal(step(f, &ev), 0); /* an old epoch: ignored */
    assert_int_equal(count(f, RT_REPL_ACT_PROPOSE, -1, NULL), 0);
    msg.u.assign_resp.epoch = 5;
    assert_int_equal(step(f, &ev), 0);
    assert_int_equal(count(f, RT_REPL_ACT_PROPOSE, -1, &a), 1);
    assert_int_equal(a->conf.seal_epoch, 6);
    assert_int_equal(committed(f, t + 1, a->io_id, 0), 0);
    assert_int_equal(state_of(f), MS_RCORE_SEALING);
    assert_int_equal(count(f, RT_REPL_ACT_SEND, RT_REPL_MSG_SEAL, NULL), 3);
    heartbeat(f, t + 3, 1); /* no cancel */
    assert_int_equal(count(f, RT_REPL_ACT_PROPOSE, -1, NULL), 0);
    assert_int_equal(seal_resp(f, t + 4, 2, 0, 6, 10, 0), 0);
    assert_int_equal(seal_resp(f, t + 5, 3, 0, 6, 10, 0), 0);
    assert_int_equal(tick(f, t + 500), 0); /* waits for the primary */
    assert_int_equal(count(f, RT_REPL_ACT_PROPOSE, -1, NULL), 0);
    assert_int_equal(seal_resp(f, t + 501, 1, 0, 6, 10, 0), 0);
    assert_int_equal(count(f, RT_REPL_ACT_PROPOSE, -1, &a), 1);
    assert_int_equal(a->conf.primary_id, 1);
    assert_int_equal(a->conf.primary_epoch, 6);
    assert_int_equal(a->conf.n_isr, 3);
}

/* SEALING: SEALs to the live ISR secondaries; RT_EBUSY answers are resent
 * after their retry_ms; when all live ones sealed, the highest applied LSN
 * is chosen and the new configuration proposed. */
static void test_seal_and_choose(void **state)
{
    struct fx *f = *state;
    const struct rt_repl_action *a = NULL;
    heartbeat(f, GRACE - 100, 2);
    heartbeat(f, GRACE - 100, 3);
    tick(f, GRACE);
    count(f, RT_REPL_ACT_PROPOSE, -1, &a);
    uint64_t id = a->io_id;
    assert_int_equal(committed(f, GRACE + 10, id, 0), 0);
    assert_int_equal(count(f, RT_REPL_ACT_SEND, RT_REPL_MSG_SEAL, &a), 2);
    assert_int_equal(a->msg.u.seal.old_epoch, 5);
    assert_int_equal(a->msg.u.seal.new_epoch, 6);
    assert_int_equal(a->msg.u.seal.old_primary, 1);
    assert_int_equal(count(f, RT_REPL_ACT_EVENT, -1, &a), 1);
    assert_string_equal(a->what, "seal");
    /* The same COMMITTED again is unknown. */
    assert_int_equal(committed(f, GRACE + 11, id, 0), RT_EINVAL);
    uint64_t t = GRACE + 20;
    assert_int_equal(seal_resp(f, t, 2, RT_EBUSY, 6, 0, 500), 0);
    assert_int_equal(seal_resp(f, t, 3, 0, 6, 40, 0), 0);
    assert_int_equal(count(f, RT_REPL_ACT_PROPOSE, -1, NULL), 0);
    /* Resend to 3 never (sealed); to 2 only after its retry_ms. */
    tick(f, t + 150);
    assert_int_equal(count(f, RT_REPL_ACT_SEND, RT_REPL_MSG_SEAL, NULL), 0);
    /* A reply of another seal epoch or from the primary is ignored. */
    assert_int_equal(seal_resp(f, t + 160, 2, 0, 7, 99, 0), 0);
    assert_int_equal(seal_resp(f, t + 160, 1, 0, 6, 99, 0), 0);
    assert_int_equal(count(f, RT_REPL_ACT_PROPOSE, -1, NULL), 0);
    heartbeat(f, t + 170, 2); /* keep 2 live */
    heartbeat(f, t + 170, 3);
    tick(f, t + 180);
    assert_int_equal(count(f, RT_REPL_ACT_PROPOSE, -1, NULL), 0);
    /* 200 ms after the first ok: choose among the sealed (only 3). */
    assert_int_equal(seal_resp(f, t + 190, 2, 0, 6, 41, 0), 0);
    assert_int_equal(count(f, RT_REPL_ACT_PROPOSE, -1, &a), 1);
    assert_int_equal(a->guard_epoch, 5);
    assert_int_equal(a->guard_seal_epoch, 6);
    assert_int_equal(a->conf.epoch, 6);
    assert_int_equal(a->conf.primary_id, 2);
    assert_int_equal(a->conf.primary_epoch, 6);
    assert_int_equal(a->conf.seal_epoch, 0);
    assert_int_equal(a->conf.n_isr, 2);
    assert_int_equal(a->conf.isr[0], 2);
    assert_int_equal(a->conf.isr[1], 3);
    assert_int_equal(rt_repl_conf_role(&a->conf, 1), RT_REPL_ROLE_SECONDARY);
    assert_int_equal(rt_repl_conf_role(&a->conf, 2), RT_REPL_ROLE_PRIMARY);
    id = a->io_id;
    /* Committed: ASSIGN to every member, the new primary first. */
    assert_int_equal(committed(f, t + 200, id, 0), 0);
    assert_int_equal(state_of(f), MS_RCORE_ASSIGNING);
    assert_int_equal(count(f, RT_REPL_ACT_SEND, RT_REPL_MSG_ASSIGN, NULL), 3);
    assert_int_equal(f->out.v[0].peer, 2);
    assert_int_equal(f->out.v[0].msg.u.assign.epoch, 6);
    /* Resent to the new primary until it answers at epoch 6. */
    heartbeat(f, t + 250, 2);
    tick(f, t + 300);
    assert_int_equal(count(f, RT_REPL_ACT_SEND, RT_REPL_MSG_ASSIGN, &a), 1);
    assert_int_equal(a->peer, 2);
    assert_int_equal(assign_resp(f, t + 310, 3, 6), 0);
    assert_int_equal(state_of(f), MS_RCORE_ASSIGNING);
    assert_int_equal(assign_resp(f, t + 310, 2, 5), 0);
    assert_int_equal(state_of(f), MS_RCORE_ASSIGNING);
    assert_int_equal(assign_resp(f, t + 320, 2, 6), 0);
    assert_int_equal(state_of(f), MS_RCORE_STABLE);
    assert_int_equal(count(f, RT_REPL_ACT_EVENT, -1, &a), 1);
    assert_string_equal(a->what, "failover");
    assert_int_equal(conf_of(f).primary_id, 2);
}

/* With one ok answer and the other live secondary silent, the choice is
 * made seal_wait_ms after the first ok. */
static void test_seal_wait(void **state)
{
    struct fx *f = *state;
    const struct rt_repl_action *a = NULL;
    uint64_t t = to_sealing(f);
    heartbeat(f, t, 2);
    heartbeat(f, t, 3);
    assert_int_equal(seal_resp(f, t + 5, 3, 0, 6, 7, 0), 0);
    tick(f, t + 100);
    /* 2 has not answered: resent. */
    assert_int_equal(count(f, RT_REPL_ACT_SEND, RT_REPL_MSG_SEAL, &a), 1);
    assert_int_equal(a->peer, 2);
    tick(f, t + 204);
    assert_int_equal(count(f, RT_REPL_ACT_PROPOSE, -1, NULL), 0);
    tick(f, t + 205);
    assert_int_equal(count(f, RT_REPL_ACT_PROPOSE, -1, &a), 1);
    assert_int_equal(a->conf.primary_id, 3);
    assert_int_equal(a->conf.n_isr, 1);
}

/* The suspected primary heartbeats before any SEAL was answered ok: the
 * intent is cancelled (epoch = seal_epoch, same primary and ISR). */
static void test_cancel(void **state)
{
    struct fx *f = *state;
    const struct rt_repl_action *a = NULL;
    uint64_t t = to_sealing(f);
    assert_int_equal(seal_resp(f, t + 5, 2, RT_EBUSY, 6, 0, 300), 0);
    assert_int_equal(heartbeat(f, t + 10, 1), 0);
    assert_int_equal(count(f, RT_REPL_ACT_PROPOSE, -1, &a), 1);
    assert_int_equal(a->guard_seal_epoch, 6);
    assert_int_equal(a->conf.epoch, 6);
    assert_int_equal(a->conf.seal_epoch, 0);
    assert_int_equal(a->conf.primary_id, 1);
    assert_int_equal(a->conf.primary_epoch, 4);
    assert_int_equal(a->conf.n_isr, 3);
    /* An ok answer now is too late: the cancel is decided. */
    assert_int_equal(seal_resp(f, t + 12, 3, 0, 6, 9, 0), 0);
    assert_int_equal(count(f, RT_REPL_ACT_PROPOSE, -1, NULL), 0);
    assert_int_equal(committed(f, t + 15, a->io_id, 0), 0);
    assert_int_equal(state_of(f), MS_RCORE_ASSIGNING);
    assert_int_equal(count(f, RT_REPL_ACT_SEND, RT_REPL_MSG_ASSIGN, &a), 3);
    assert_int_equal(f->out.v[0].peer, 1);
    assert_int_equal(assign_resp(f, t + 20, 1, 6), 0);
    assert_int_equal(count(f, RT_REPL_ACT_EVENT, -1, &a), 1);
    assert_string_equal(a->what, "failover_cancelled");
    assert_int_equal(state_of(f), MS_RCORE_STABLE);
}

/* Once a SEAL was answered ok the primary's return cancels nothing. */
static void test_no_cancel_after_seal(void **state)
{
    struct fx *f = *state;
    const struct rt_repl_action *a = NULL;
    uint64_t t = to_sealing(f);
    assert_int_equal(seal_resp(f, t + 5, 2, 0, 6, 3, 0), 0);
    assert_int_equal(heartbeat(f, t + 10, 1), 0);
    assert_int_equal(count(f, RT_REPL_ACT_PROPOSE, -1, NULL), 0);
    assert_int_equal(seal_resp(f, t + 20, 3, 0, 6, 3, 0), 0);
    assert_int_equal(count(f, RT_REPL_ACT_PROPOSE, -1, &a), 1);
    assert_int_equal(a->conf.primary_id, 2); /* tie: the lower id */
}

/* A master restart loads the committed intent: SEALING at once, SEALs to
 * every ISR secondary, and the choice as before. */
static void test_restart_in_sealing(void **state)
{
    struct fx *f = *state;
    const struct rt_repl_action *a = NULL;
    ms_rcore_destroy(f->m);
    assert_int_equal(ms_rcore_create(&cfg, 50000, &f->m), 0);
    struct rt_repl_conf c = conf_at(5);
    c.seal_epoch = 6;
    c.seal_kind = RT_REPL_SEAL_FAILOVER;
    rt_repl_actions_reset(&f->out);
    assert_int_equal(ms_rcore_load(f->m, &c, 50000, &f->out), 0);
    assert_int_equal(state_of(f), MS_RCORE_SEALING);
    assert_int_equal(count(f, RT_REPL_ACT_SEND, RT_REPL_MSG_SEAL, NULL), 2);
    assert_int_equal(seal_resp(f, 50010, 3, 0, 6, 12, 0), 0);
    assert_int_equal(seal_resp(f, 50011, 2, 0, 6, 11, 0), 0);
    assert_int_equal(count(f, RT_REPL_ACT_PROPOSE, -1, &a), 1);
    assert_int_equal(a->conf.primary_id, 3);
    /* A bad catalog record is refused. */
    c.seal_epoch = 5;
    assert_int_equal(ms_rcore_load(f->m, &c, 50020, &f->out), RT_EINVAL);
    c = conf_at(5);
    c.primary_id = 4;
    assert_int_equal(ms_rcore_load(f->m, &c, 50020, &f->out), RT_EINVAL);
}

/* A forgotten range (its table deleted) is gone: its pending proposal's
 * COMMITTED no longer fits, answers about it change nothing, and no
 * decision is taken for it. */
static void test_forget(void **state)
{
    struct fx *f = *state;
    struct ms_rcore_range_info info;
    const struct rt_repl_action *a = NULL;
    heartbeat(f, GRACE - 100, 2);
    assert_int_equal(tick(f, GRACE), 0);
    assert_int_equal(count(f, RT_REPL_ACT_PROPOSE, -1, &a), 1);
    uint64_t prop = a->io_id;
    assert_int_equal(ms_rcore_forget(f->m, R), 0);
    assert_int_equal(ms_rcore_range_get(f->m, R, &info), RT_ENOTFOUND);
    assert_int_equal(committed(f, GRACE + 1, prop, 0), RT_EINVAL);
    assert_int_equal(count(f, RT_REPL_ACT_SEND, -1, NULL), 0);
    assert_int_equal(seal_resp(f, GRACE + 2, 2, 0, 6, 12, 0), 0);
    assert_int_equal(tick(f, GRACE + 5000), 0);
    assert_int_equal(count(f, RT_REPL_ACT_PROPOSE, -1, NULL), 0);
    assert_int_equal(ms_rcore_forget(f->m, R), RT_ENOTFOUND);
}

/* A transfer intent loaded at restart promotes its target when it holds
 * the highest LSN. */
static void test_restart_transfer(void **state)
{
    struct fx *f = *state;
    const struct rt_repl_action *a = NULL;
    struct rt_repl_conf c = conf_at(5);
    c.seal_epoch = 6;
    c.seal_kind = RT_REPL_SEAL_TRANSFER;
    c.seal_to = 3;
    assert_int_equal(ms_rcore_load(f->m, &c, 100, &f->out), 0);
    seal_resp(f, 110, 2, 0, 6, 12, 0);
    seal_resp(f, 111, 3, 0, 6, 12, 0);
    assert_int_equal(count(f, RT_REPL_ACT_PROPOSE, -1, &a), 1);
    assert_int_equal(a->conf.primary_id, 3);
}

/* A transfer: refusals first (unknown range, the primary or a non-member
 * as target, a stale epoch, an operation in flight); then the intent
 * TRANSFER seal_to 2, the old primary counted as sealed: SEALs go to 2
 * and 3 only, and once both answered the proposal names 2 primary with
 * 1 a SECONDARY in the ISR; the end is the "transfer" event. */
static void test_transfer(void **state)
{
    struct fx *f = *state;
    const struct rt_repl_action *a = NULL;
    struct rt_repl_conf c;
    rt_repl_actions_reset(&f->out);
    assert_int_equal(ms_rcore_transfer_check(f->m, 77, 2, &c), RT_ENOTFOUND);
    assert_int_equal(ms_rcore_transfer_check(f->m, R, 1, &c), RT_EINVAL);
    assert_int_equal(ms_rcore_transfer_check(f->m, R, 4, &c), RT_EINVAL);
    assert_int_equal(ms_rcore_transfer_check(f->m, R, 2, &c), 0);
    assert_int_equal(c.epoch, 5);
    assert_int_equal(ms_rcore_transfer(f->m, R, 4, 2, 40, 100, &f->out),
                     RT_ESTALE);
    assert_int_equal(count(f, RT_REPL_ACT_PROPOSE, -1, NULL), 0);

    assert_int_equal(ms_rcore_transfer(f->m, R, 5, 2, 40, 100, &f->out), 0);
    assert_int_equal(count(f, RT_REPL_ACT_PROPOSE, -1, &a), 1);
    assert_int_equal(a->conf.seal_epoch, 6);
    assert_int_equal(a->conf.seal_kind, RT_REPL_SEAL_TRANSFER);
    assert_int_equal(a->conf.seal_to, 2);
    assert_int_equal(a->guard_epoch, 5);
    /* One operation at a time. */
    assert_int_equal(ms_rcore_transfer_check(f->m, R, 3, &c), RT_EBUSY);

    assert_int_equal(committed(f, 110, a->io_id, 0), 0);
    assert_int_equal(state_of(f), MS_RCORE_SEALING);
    assert_int_equal(count(f, RT_REPL_ACT_SEND, RT_REPL_MSG_SEAL, NULL), 2);
    for (size_t i = 0; i < f->out.n; i++) {
        if (f->out.v[i].kind == RT_REPL_ACT_SEND) {
            assert_int_not_equal(f->out.v[i].peer, 1);
        }
    }
    seal_resp(f, 115, 2, 0, 6, 40, 0);
    assert_int_equal(count(f, RT_REPL_ACT_PROPOSE, -1, NULL), 0);
    seal_resp(f, 116, 3, 0, 6, 38, 0);
    assert_int_equal(count(f, RT_REPL_ACT_PROPOSE, -1, &a), 1);
    assert_int_equal(a->conf.epoch, 6);
    assert_int_equal(a->conf.primary_id, 2);
    assert_int_equal(a->conf.primary_epoch, 6);
    assert_int_equal(a->conf.n_isr, 3);
    assert_true(rt_repl_conf_in_isr(&a->conf, 1));
    assert_int_equal(rt_repl_conf_role(&a->conf, 1), RT_REPL_ROLE_SECONDARY);
    assert_int_equal(a->conf.seal_epoch, 0);

    assert_int_equal(committed(f, 120, a->io_id, 0), 0);
    assert_int_equal(state_of(f), MS_RCORE_ASSIGNING);
    assert_int_equal(count(f, RT_REPL_ACT_SEND, RT_REPL_MSG_ASSIGN, &a), 3);
    assert_int_equal(f->out.v[0].peer, 2); /* the new primary first */
    assert_int_equal(assign_resp(f, 125, 2, 6), 0);
    assert_int_equal(state_of(f), MS_RCORE_STABLE);
    assert_int_equal(count(f, RT_REPL_ACT_EVENT, -1, &a), 1);
    assert_string_equal(a->what, "transfer");
    assert_int_equal(a->at_ms, 25);
}

/* A transfer whose target does not answer its SEAL finishes as a
 * failover among the sealed: not after the seal wait, but after lease +
 * seal wait (the target may be busy sealing that long), the old primary
 * (it holds the highest LSN) is primary again at the new epoch with the
 * other replier; the silent target leaves the ISR. */
static void test_transfer_target_silent(void **state)
{
    struct fx *f = *state;
    const struct rt_repl_action *a = NULL;
    rt_repl_actions_reset(&f->out);
    assert_int_equal(ms_rcore_transfer(f->m, R, 5, 2, 40, 100, &f->out), 0);
    assert_int_equal(count(f, RT_REPL_ACT_PROPOSE, -1, &a), 1);
    assert_int_equal(committed(f, 110, a->io_id, 0), 0);
    seal_resp(f, 115, 3, 0, 6, 40, 0);
    seal_resp(f, 116, 2, RT_EBUSY, 6, 0, 500);
    assert_int_equal(count(f, RT_REPL_ACT_PROPOSE, -1, NULL), 0);
    assert_int_equal(tick(f, 110 + 200), 0);
    assert_int_equal(count(f, RT_REPL_ACT_PROPOSE, -1, NULL), 0);
    assert_int_equal(tick(f, 110 + LEASE + 200), 0);
    assert_int_equal(count(f, RT_REPL_ACT_PROPOSE, -1, &a), 1);
    assert_int_equal(a->conf.primary_id, 1);
    assert_int_equal(a->conf.epoch, 6);
    assert_int_equal(a->conf.n_isr, 2);
    assert_false(rt_repl_conf_in_isr(&a->conf, 2));
}

/* A failed intent commit (the catalog moved) drops the transfer: "stale",
 * and the range is free again once reloaded. */
static void test_transfer_commit_failed(void **state)
{
    struct fx *f = *state;
    const struct rt_repl_action *a = NULL;
    rt_repl_actions_reset(&f->out);
    assert_int_equal(ms_rcore_transfer(f->m, R, 5, 3, 40, 100, &f->out), 0);
    assert_int_equal(count(f, RT_REPL_ACT_PROPOSE, -1, &a), 1);
    assert_int_equal(committed(f, 110, a->io_id, RT_ESTALE), 0);
    assert_int_equal(count(f, RT_REPL_ACT_EVENT, -1, &a), 1);
    assert_string_equal(a->what, "stale");
    assert_int_equal(state_of(f), MS_RCORE_STABLE);
    assert_int_equal(conf_of(f).seal_epoch, 0);
}

/* ISR_CHANGE refusals, in the order of §4. */
static void test_isr_change_refused(void **state)
{
    struct fx *f = *state;
    uint64_t two = 2, one = 1, four = 4, dup[2] = {2, 2};
    assert_int_equal(isr_change(f, 1, R + 1, 5, &two, 1, NULL, 0), 0);
    assert_isr_resp(f, RT_ENOTFOUND);
    assert_int_equal(isr_change(f, 1, R, 4, &two, 1, NULL, 0), 0);
    assert_isr_resp(f, RT_ESTALE);
    assert_int_equal(isr_change(f, 2, R, 5, &two, 1, NULL, 0), 0);
    assert_isr_resp(f, RT_ENOTPRIMARY);
    assert_int_equal(isr_change(f, 1, R, 5, &one, 1, NULL, 0), 0);
    assert_isr_resp(f, RT_EINVAL); /* the primary */
    assert_int_equal(isr_change(f, 1, R, 5, &four, 1, NULL, 0), 0);
    assert_isr_resp(f, RT_EINVAL); /* not a member */
    assert_int_equal(isr_change(f, 1, R, 5, NULL, 0, &two, 1), 0);
    assert_isr_resp(f, RT_EINVAL); /* not a learner */
    assert_int_equal(isr_change(f, 1, R, 5, dup, 2, NULL, 0), 0);
    assert_isr_resp(f, RT_EINVAL); /* twice */
    assert_int_equal(isr_change(f, 1, R, 5, NULL, 0, NULL, 0), 0);
    assert_isr_resp(f, RT_EINVAL); /* empty */
    /* An operation in flight: a pending proposal, then the seal. */
    assert_int_equal(isr_change(f, 1, R, 5, &two, 1, NULL, 0), 0);
    assert_int_equal(count(f, RT_REPL_ACT_PROPOSE, -1, NULL), 1);
    assert_int_equal(isr_change(f, 1, R, 5, &two, 1, NULL, 0), 0);
    assert_isr_resp(f, RT_EBUSY);
}

/* While a seal intent is committed every ISR change is refused (§7.2). */
static void test_isr_change_while_sealing(void **state)
{
    struct fx *f = *state;
    uint64_t two = 2;
    to_sealing(f);
    assert_int_equal(isr_change(f, 1, R, 5, &two, 1, NULL, 0), 0);
    assert_isr_resp(f, RT_EBUSY);
}

/* An accepted removal: epoch + 1, the ISR without S (S stays a member),
 * ISR_RESP after the commit, ASSIGN to the primary first; a failed commit
 * answers its code. */
static void test_isr_remove(void **state)
{
    struct fx *f = *state;
    const struct rt_repl_action *a = NULL;
    uint64_t three = 3;
    assert_int_equal(isr_change(f, 1, R, 5, &three, 1, NULL, 0), 0);
    assert_int_equal(count(f, RT_REPL_ACT_PROPOSE, -1, &a), 1);
    assert_int_equal(a->guard_epoch, 5);
    assert_int_equal(a->conf.epoch, 6);
    assert_int_equal(a->conf.n_isr, 2);
    assert_int_equal(a->conf.primary_epoch, 4);
    assert_int_equal(rt_repl_conf_role(&a->conf, 3), RT_REPL_ROLE_SECONDARY);
    assert_int_equal(count(f, RT_REPL_ACT_SEND, -1, NULL), 0);
    uint64_t id = a->io_id;
    assert_int_equal(committed(f, 20, id, 0), 0);
    assert_int_equal(count(f, RT_REPL_ACT_SEND, RT_REPL_MSG_ISR_RESP, &a), 1);
    assert_int_equal(a->msg.u.isr_resp.code, 0);
    assert_int_equal(a->msg.u.isr_resp.epoch, 6);
    assert_int_equal(count(f, RT_REPL_ACT_SEND, RT_REPL_MSG_ASSIGN, NULL), 3);
    assert_int_equal(f->out.v[1].peer, 1);
    assert_int_equal(state_of(f), MS_RCORE_ASSIGNING);
    assert_int_equal(assign_resp(f, 30, 1, 6), 0);
    assert_int_equal(state_of(f), MS_RCORE_STABLE);
    assert_int_equal(conf_of(f).n_isr, 2);
    /* The next change, whose commit fails (the catalog moved). */
    uint64_t two = 2;
    assert_int_equal(isr_change(f, 1, R, 6, &two, 1, NULL, 0), 0);
    count(f, RT_REPL_ACT_PROPOSE, -1, &a);
    assert_int_equal(committed(f, 40, a->io_id, RT_ESTALE), 0);
    assert_int_equal(count(f, RT_REPL_ACT_SEND, RT_REPL_MSG_ISR_RESP, &a), 1);
    assert_int_equal(a->msg.u.isr_resp.code, RT_ESTALE);
    assert_int_equal(count(f, RT_REPL_ACT_EVENT, -1, &a), 1);
    assert_string_equal(a->what, "stale");
    assert_int_equal(conf_of(f).epoch, 6);
}

/* A learner: STABLE -> ADDING; only its own ISR add is taken meanwhile;
 * the add makes it a SECONDARY in the ISR. */
static void test_learner_joins(void **state)
{
    struct fx *f = *state;
    const struct rt_repl_action *a = NULL;
    assert_int_equal(ms_rcore_add_learner(f->m, R + 1, 4, 0, &f->out),
                     RT_ENOTFOUND);
    assert_int_equal(ms_rcore_add_learner(f->m, R, 3, 0, &f->out), RT_EEXIST);
    rt_repl_actions_reset(&f->out);
    assert_int_equal(ms_rcore_add_learner(f->m, R, 4, 0, &f->out), 0);
    assert_int_equal(ms_rcore_add_learner(f->m, R, 5, 0, &f->out), RT_EBUSY);
    assert_int_equal(count(f, RT_REPL_ACT_PROPOSE, -1, &a), 1);
    assert_int_equal(a->conf.epoch, 6);
    assert_int_equal(rt_repl_conf_role(&a->conf, 4), RT_REPL_ROLE_LEARNER);
    assert_int_equal(committed(f, 5, a->io_id, 0), 0);
    assert_int_equal(state_of(f), MS_RCORE_ADDING);
    assert_int_equal(count(f, RT_REPL_ACT_SEND, RT_REPL_MSG_ASSIGN, NULL), 4);
    uint64_t two = 2, four = 4;
    assert_int_equal(isr_change(f, 1, R, 6, &two, 1, NULL, 0), 0);
    assert_isr_resp(f, RT_EBUSY);
    assert_int_equal(isr_change(f, 1, R, 6, NULL, 0, &four, 1), 0);
    assert_int_equal(count(f, RT_REPL_ACT_PROPOSE, -1, &a), 1);
    assert_int_equal(a->conf.n_isr, 4);
    assert_int_equal(rt_repl_conf_role(&a->conf, 4), RT_REPL_ROLE_SECONDARY);
    assert_int_equal(committed(f, 20, a->io_id, 0), 0);
    assert_int_equal(state_of(f), MS_RCORE_ASSIGNING);
    assert_int_equal(assign_resp(f, 30, 1, 7), 0);
    assert_int_equal(state_of(f), MS_RCORE_STABLE);
}

/* A learner that does not join within the timeout leaves the set; the
 * assignment without it goes to it too, and the primary's answer at the
 * new epoch is waited for (resent until it comes), with no second
 * event. */
static void test_learner_timeout(void **state)
{
    struct fx *f = *state;
    const struct rt_repl_action *a = NULL;
    assert_int_equal(ms_rcore_add_learner(f->m, R, 4, 0, &f->out), 0);
    count(f, RT_REPL_ACT_PROPOSE, -1, &a);
    committed(f, 0, a->io_id, 0);
    heartbeat(f, 29000, 1);
    heartbeat(f, 29000, 2);
    tick(f, 29999);
    assert_int_equal(count(f, RT_REPL_ACT_PROPOSE, -1, NULL), 0);
    tick(f, 30000);
    assert_int_equal(count(f, RT_REPL_ACT_PROPOSE, -1, &a), 1);
    assert_int_equal(a->conf.n_members, 3);
    assert_int_equal(a->conf.epoch, 7);
    assert_int_equal(committed(f, 30001, a->io_id, 0), 0);
    assert_int_equal(state_of(f), MS_RCORE_ASSIGNING);
    assert_int_equal(count(f, RT_REPL_ACT_SEND, RT_REPL_MSG_ASSIGN, &a), 4);
    assert_int_equal(a->peer, 4);
    assert_int_equal(count(f, RT_REPL_ACT_EVENT, -1, &a), 1);
    assert_string_equal(a->what, "learner_failed");
    rt_repl_actions_reset(&f->out);
    tick(f, 30001 + 1000);
    assert_true(count(f, RT_REPL_ACT_SEND, RT_REPL_MSG_ASSIGN, &a) >= 1);
    rt_repl_actions_reset(&f->out);
    assert_int_equal(assign_resp(f, 31500, 1, 7), 0);
    assert_int_equal(state_of(f), MS_RCORE_STABLE);
    assert_int_equal(count(f, RT_REPL_ACT_EVENT, -1, NULL), 0);
}

/* Heartbeats of servers 1, 2 and 3 every second from @from to @to, each
 * followed by a tick: the primary stays live through a long copy. */
static void beat_until(struct fx *f, uint64_t from, uint64_t to)
{
    for (uint64_t t = from; t <= to; t += 1000) {
        heartbeat(f, t, 1);
        heartbeat(f, t, 2);
        heartbeat(f, t, 3);
        tick(f, t);
        assert_int_equal(count(f, RT_REPL_ACT_PROPOSE, -1, NULL), 0);
    }
}

/* With --learner-min-mb-per-s 20 a learner of a 2 GiB range has
 * 10 s + 2048 MiB / 20 MiB/s = 112.4 s (MiB/s counted as 20971 bytes/ms), not
 * the 30 s timeout; a size reported while the copy runs extends its deadline
 * (never shortens it); a small range keeps the 30 s; a learner loaded by a
 * restarted master starts at 30 s and is extended by the first report. */
static void test_learner_timeout_grows_with_size(void **state)
{
    struct fx *f = *state;
    struct ms_rcore_config c2 = cfg;
    struct rt_repl_conf c = conf_at(5);
    const struct rt_repl_action *a = NULL;
    const uint64_t gib2 = 2048ull << 20;
    c2.learner_min_mb_per_s = 20;
    ms_rcore_destroy(f->m);
    assert_int_equal(ms_rcore_create(&c2, 0, &f->m), 0);
    assert_int_equal(ms_rcore_load(f->m, &c, 0, &f->out), 0);
    assert_int_equal(ms_rcore_range_size(f->m, 99, 1), RT_ENOTFOUND);

    /* 2 GiB known before the add. */
    assert_int_equal(ms_rcore_range_size(f->m, R, gib2), 0);
    assert_int_equal(ms_rcore_add_learner(f->m, R, 4, 0, &f->out), 0);
    count(f, RT_REPL_ACT_PROPOSE, -1, &a);
    committed(f, 0, a->io_id, 0);
    beat_until(f, 1000, 112000);
    tick(f, 112500);
    assert_int_equal(count(f, RT_REPL_ACT_PROPOSE, -1, &a), 1);
    assert_int_equal(a->conf.n_members, 3);
    committed(f, 112501, a->io_id, 0);
    assign_resp(f, 112502, 1, 7);
    assert_int_equal(state_of(f), MS_RCORE_STABLE);

    /* A small range: the 30 s timeout (the primary heard meanwhile). */
    beat_until(f, 113000, 200000);
    assert_int_equal(ms_rcore_range_size(f->m, R, 1 << 20), 0);
    assert_int_equal(ms_rcore_add_learner(f->m, R, 4, 200000, &f->out), 0);
    count(f, RT_REPL_ACT_PROPOSE, -1, &a);
    committed(f, 200000, a->io_id, 0);
    beat_until(f, 201000, 229000);
    /* The range grows to 2 GiB during the copy: 112.4 s from the add;
     * a smaller report later does not shorten it. */
    assert_int_equal(ms_rcore_range_size(f->m, R, gib2), 0);
    assert_int_equal(ms_rcore_range_size(f->m, R, 1 << 20), 0);
    beat_until(f, 230000, 312000);
    tick(f, 312500);
    assert_int_equal(count(f, RT_REPL_ACT_PROPOSE, -1, &a), 1);
    committed(f, 312501, a->io_id, 0);
    assign_resp(f, 312502, 1, 9);
    assert_int_equal(state_of(f), MS_RCORE_STABLE);

    /* A learner loaded at 400 s (a master restart): 30 s until the
     * first report of 2 GiB extends it to 112.4 s. */
    c = conf_at(9);
    c.members[3] = (struct rt_repl_member){4, RT_REPL_ROLE_LEARNER};
    c.n_members = 4;
    ms_rcore_destroy(f->m);
    assert_int_equal(ms_rcore_create(&c2, 400000, &f->m), 0);
    rt_repl_actions_reset(&f->out);
    assert_int_equal(ms_rcore_load(f->m, &c, 400000, &f->out), 0);
    assert_int_equal(state_of(f), MS_RCORE_ADDING);
    assert_int_equal(ms_rcore_range_size(f->m, R, gib2), 0);
    beat_until(f, 401000, 512000);
    tick(f, 512500);
    assert_int_equal(count(f, RT_REPL_ACT_PROPOSE, -1, &a), 1);
    assert_int_equal(a->conf.n_members, 3);
}

/* ASSIGNING whose new primary dies before answering: the wait is dropped
 * and the next failover can start. */
static void test_assign_dropped(void **state)
{
    struct fx *f = *state;
    const struct rt_repl_action *a = NULL;
    uint64_t t = to_sealing(f);
    seal_resp(f, t + 1, 2, 0, 6, 5, 0);
    seal_resp(f, t + 2, 3, 0, 6, 4, 0);
    count(f, RT_REPL_ACT_PROPOSE, -1, &a);
    committed(f, t + 3, a->io_id, 0);
    assert_int_equal(state_of(f), MS_RCORE_ASSIGNING);
    heartbeat(f, t + 4, 3);
    /* 2 was last heard at GRACE - 100. */
    tick(f, GRACE - 100 + FAIL);
    assert_int_equal(state_of(f), MS_RCORE_STABLE);
    assert_int_equal(count(f, RT_REPL_ACT_EVENT, -1, &a), 1);
    assert_string_equal(a->what, "assign_dropped");
    assert_int_equal(count(f, RT_REPL_ACT_PROPOSE, -1, &a), 1);
    assert_int_equal(a->conf.seal_epoch, 7);
}

/* ADDING whose primary is suspected: the learner leaves first (one
 * operation at a time), then the failover starts. */
static void test_adding_then_failover(void **state)
{
    struct fx *f = *state;
    const struct rt_repl_action *a = NULL;
    assert_int_equal(ms_rcore_add_learner(f->m, R, 4, 0, &f->out), 0);
    count(f, RT_REPL_ACT_PROPOSE, -1, &a);
    committed(f, 0, a->io_id, 0);
    heartbeat(f, GRACE - 100, 2);
    tick(f, GRACE);
    assert_int_equal(count(f, RT_REPL_ACT_PROPOSE, -1, &a), 1);
    assert_int_equal(rt_repl_conf_role(&a->conf, 4), RT_REPL_ROLE_NONE);
    assert_int_equal(a->conf.seal_epoch, 0);
    assert_int_equal(committed(f, GRACE + 1, a->io_id, 0), 0);
    assert_int_equal(count(f, RT_REPL_ACT_PROPOSE, -1, &a), 1);
    assert_int_equal(a->conf.seal_epoch, 8);
    assert_int_equal(a->conf.seal_kind, RT_REPL_SEAL_FAILOVER);
}

/* SEALING with every ISR secondary silent: nothing is sent, nothing is
 * chosen; the range waits for one to come back. */
static void test_sealing_waits(void **state)
{
    struct fx *f = *state;
    uint64_t t = to_sealing(f);
    /* 2 and 3 were last heard at GRACE - 100. */
    tick(f, GRACE - 100 + FAIL);
    tick(f, t + 5000);
    assert_int_equal(count(f, RT_REPL_ACT_SEND, -1, NULL), 0);
    assert_int_equal(count(f, RT_REPL_ACT_PROPOSE, -1, NULL), 0);
    assert_int_equal(state_of(f), MS_RCORE_SEALING);
    assert_int_equal(heartbeat(f, t + 5001, 3), 0);
    assert_int_equal(count(f, RT_REPL_ACT_SEND, RT_REPL_MSG_SEAL, NULL), 1);
}

/* A learner beyond rf + 1 members is refused. */
static void test_learner_rf(void **state)
{
    struct fx *f = *state;
    const struct rt_repl_action *a = NULL;
    assert_int_equal(ms_rcore_add_learner(f->m, R, 4, 0, &f->out), 0);
    count(f, RT_REPL_ACT_PROPOSE, -1, &a);
    committed(f, 0, a->io_id, 0);
    uint64_t four = 4;
    isr_change(f, 1, R, 6, NULL, 0, &four, 1);
    count(f, RT_REPL_ACT_PROPOSE, -1, &a);
    committed(f, 1, a->io_id, 0);
    assign_resp(f, 2, 1, 7);
    assert_int_equal(state_of(f), MS_RCORE_STABLE);
    assert_int_equal(ms_rcore_add_learner(f->m, R, 5, 3, &f->out), RT_EINVAL);
}

/* ASSIGNING whose new primary is cut off while no other ISR member is
 * live: the assignment keeps being resent until it answers. */
static void test_assign_kept(void **state)
{
    struct fx *f = *state;
    const struct rt_repl_action *a = NULL;
    uint64_t t = to_sealing(f);
    seal_resp(f, t + 1, 2, 0, 6, 5, 0);
    tick(f, t + 300); /* the seal wait: 3 never answered */
    count(f, RT_REPL_ACT_PROPOSE, -1, &a);
    assert_int_equal(a->conf.n_isr, 1);
    committed(f, t + 301, a->io_id, 0);
    assert_int_equal(state_of(f), MS_RCORE_ASSIGNING);
    tick(f, GRACE - 100 + FAIL + 50); /* 2 suspected too */
    assert_int_equal(state_of(f), MS_RCORE_ASSIGNING);
    assert_int_equal(count(f, RT_REPL_ACT_SEND, RT_REPL_MSG_ASSIGN, &a), 1);
    assert_int_equal(a->peer, 2);
    assert_int_equal(heartbeat(f, t + 5000, 2), 0);
    assert_int_equal(assign_resp(f, t + 5001, 2, 6), 0);
    assert_int_equal(state_of(f), MS_RCORE_STABLE);
}

/* Events the master does not take, and bad configurations. */
static void test_refused(void **state)
{
    struct fx *f = *state;
    struct rt_repl_msg msg = {.kind = RT_REPL_MSG_APPEND};
    struct rt_repl_event ev = {.kind = RT_REPL_EV_MSG, .peer = 1, .msg = &msg};
    assert_int_equal(step(f, &ev), RT_EINVAL);
    ev = (struct rt_repl_event){.kind = RT_REPL_EV_TIMER, .timer_id = 99};
    assert_int_equal(step(f, &ev), RT_EINVAL);
    struct ms_rcore_config bad = cfg;
    struct ms_rcore *m = NULL;
    bad.resend_ms = 0;
    assert_int_equal(ms_rcore_create(&bad, 0, &m), RT_EINVAL);
    struct ms_rcore_range_info info;
    assert_int_equal(ms_rcore_range_get(f->m, R + 1, &info), RT_ENOTFOUND);
}

/* Many ranges loaded in no particular order are each found by id (the
 * core keeps them sorted for its lookups); forgetting some leaves the
 * others found, and a forgotten one is gone. */
static void test_many_ranges_found(void **state)
{
    struct fx *f = *state;
    struct ms_rcore_range_info info;
    const uint64_t n = 200;
    for (uint64_t k = 0; k < n; k++) {
        struct rt_repl_conf c = conf_at(5);
        c.range_id = 1000 + (k * 7919) % n; /* a permutation of 0..n-1 */
        assert_int_equal(ms_rcore_load(f->m, &c, 0, &f->out), 0);
    }
    for (uint64_t id = 1000; id < 1000 + n; id += 2) {
        assert_int_equal(ms_rcore_forget(f->m, id), 0);
    }
    assert_int_equal(ms_rcore_forget(f->m, 1000), RT_ENOTFOUND);
    for (uint64_t id = 1000; id < 1000 + n; id++) {
        int rc = ms_rcore_range_get(f->m, id, &info);
        if (id % 2 == 0) {
            assert_int_equal(rc, RT_ENOTFOUND);
        } else {
            assert_int_equal(rc, 0);
            assert_int_equal(info.conf.range_id, id);
        }
    }
    assert_int_equal(ms_rcore_range_get(f->m, R, &info), 0);
    assert_int_equal(ms_rcore_range_get(f->m, 999, &info), RT_ENOTFOUND);
    assert_int_equal(ms_rcore_range_get(f->m, 1000 + n, &info), RT_ENOTFOUND);
}

/* Reloads the range with 3 a SECONDARY outside the ISR {1, 2} (an old
 * primary after a failover, or a secondary an ISR shrink removed). */
static void load_outside(struct fx *f)
{
    struct rt_repl_conf c = conf_at(5);
    c.isr[0] = 1;
    c.isr[1] = 2;
    c.n_isr = 2;
    assert_int_equal(ms_rcore_load(f->m, &c, 0, &f->out), 0);
    rt_repl_actions_reset(&f->out);
}

/* A SECONDARY outside the ISR that caught up joins it: epoch + 1, it is in
 * the ISR, the primary is answered, everyone assigned; the same add again,
 * an ISR member, the primary or a non-member is refused. */
static void test_isr_add_secondary(void **state)
{
    struct fx *f = *state;
    const struct rt_repl_action *a = NULL;
    uint64_t one = 1, two = 2, three = 3, four = 4;
    load_outside(f);
    assert_int_equal(isr_change(f, 1, R, 5, NULL, 0, &two, 1), 0);
    assert_isr_resp(f, RT_EINVAL); /* in the ISR already */
    assert_int_equal(isr_change(f, 1, R, 5, NULL, 0, &one, 1), 0);
    assert_isr_resp(f, RT_EINVAL); /* the primary */
    assert_int_equal(isr_change(f, 1, R, 5, NULL, 0, &four, 1), 0);
    assert_isr_resp(f, RT_EINVAL); /* not a member */
    assert_int_equal(isr_change(f, 2, R, 5, NULL, 0, &three, 1), 0);
    assert_isr_resp(f, RT_ENOTPRIMARY);
    assert_int_equal(isr_change(f, 1, R, 4, NULL, 0, &three, 1), 0);
    assert_isr_resp(f, RT_ESTALE);
    assert_int_equal(isr_change(f, 1, R, 5, NULL, 0, &three, 1), 0);
    assert_int_equal(count(f, RT_REPL_ACT_PROPOSE, -1, &a), 1);
    assert_int_equal(a->guard_epoch, 5);
    assert_int_equal(a->conf.epoch, 6);
    assert_int_equal(a->conf.n_isr, 3);
    assert_int_equal(a->conf.isr[2], 3);
    assert_int_equal(a->conf.n_members, 3);
    assert_int_equal(rt_repl_conf_role(&a->conf, 3), RT_REPL_ROLE_SECONDARY);
    assert_int_equal(a->conf.primary_epoch, 4);
    /* Twice while the first is pending: busy. */
    uint64_t id = a->io_id;
    assert_int_equal(isr_change(f, 1, R, 5, NULL, 0, &three, 1), 0);
    assert_isr_resp(f, RT_EBUSY);
    assert_int_equal(committed(f, 20, id, 0), 0);
    assert_int_equal(count(f, RT_REPL_ACT_SEND, RT_REPL_MSG_ISR_RESP, &a), 1);
    assert_int_equal(a->msg.u.isr_resp.code, 0);
    assert_int_equal(a->msg.u.isr_resp.epoch, 6);
    assert_int_equal(count(f, RT_REPL_ACT_SEND, RT_REPL_MSG_ASSIGN, NULL), 3);
    assert_int_equal(assign_resp(f, 30, 1, 6), 0);
    assert_int_equal(state_of(f), MS_RCORE_STABLE);
    /* Now in the ISR: adding it again is refused. */
    assert_int_equal(isr_change(f, 1, R, 6, NULL, 0, &three, 1), 0);
    assert_isr_resp(f, RT_EINVAL);
    assert_int_equal(conf_of(f).epoch, 6);
}

/* ADDING, and the secondary the learner was to replace catches up first:
 * its join makes the ISR rf strong, so the same commit takes the learner
 * out of the set (it is told by an assignment without the range). */
static void test_returning_secondary_aborts_learner(void **state)
{
    struct fx *f = *state;
    const struct rt_repl_action *a = NULL;
    uint64_t three = 3;
    load_outside(f);
    assert_int_equal(ms_rcore_add_learner(f->m, R, 4, 0, &f->out), 0);
    count(f, RT_REPL_ACT_PROPOSE, -1, &a);
    assert_int_equal(committed(f, 1, a->io_id, 0), 0);
    assert_int_equal(state_of(f), MS_RCORE_ADDING);
    assert_int_equal(isr_change(f, 1, R, 6, NULL, 0, &three, 1), 0);
    assert_int_equal(count(f, RT_REPL_ACT_PROPOSE, -1, &a), 1);
    assert_int_equal(a->conf.epoch, 7);
    assert_int_equal(a->conf.n_isr, 3);
    assert_int_equal(a->conf.n_members, 3);
    assert_int_equal(rt_repl_conf_role(&a->conf, 4), RT_REPL_ROLE_NONE);
    assert_int_equal(committed(f, 20, a->io_id, 0), 0);
    assert_int_equal(count(f, RT_REPL_ACT_EVENT, -1, &a), 1);
    assert_string_equal(a->what, "learner_aborted");
    assert_int_equal(count(f, RT_REPL_ACT_SEND, RT_REPL_MSG_ASSIGN, &a), 4);
    assert_int_equal(a->peer, 4);
    assert_int_equal(state_of(f), MS_RCORE_ASSIGNING);
    assert_int_equal(assign_resp(f, 30, 1, 7), 0);
    assert_int_equal(state_of(f), MS_RCORE_STABLE);
}

/* ADDING with two copies missing: a returning secondary's join would not
 * make the learner surplus, so it waits (RT_EBUSY) for the learner. */
static void test_returning_secondary_waits(void **state)
{
    struct fx *f = *state;
    const struct rt_repl_action *a = NULL;
    uint64_t three = 3;
    struct rt_repl_conf c = conf_at(5);
    c.n_isr = 1; /* {1}: 2 and 3 outside */
    assert_int_equal(ms_rcore_load(f->m, &c, 0, &f->out), 0);
    assert_int_equal(ms_rcore_add_learner(f->m, R, 4, 0, &f->out), 0);
    count(f, RT_REPL_ACT_PROPOSE, -1, &a);
    assert_int_equal(committed(f, 1, a->io_id, 0), 0);
    assert_int_equal(isr_change(f, 1, R, 6, NULL, 0, &three, 1), 0);
    assert_isr_resp(f, RT_EBUSY);
    assert_int_equal(state_of(f), MS_RCORE_ADDING);
}

/* A replica leaves the set: refusals first (unknown range, the primary, a
 * non-member, an operation in flight), then epoch + 1 without it, the
 * assignment to the members and to it, the primary's answer, the event. */
static void test_remove_replica(void **state)
{
    struct fx *f = *state;
    const struct rt_repl_action *a = NULL;
    assert_int_equal(ms_rcore_remove_replica(f->m, R + 1, 3, 0, &f->out),
                     RT_ENOTFOUND);
    assert_int_equal(ms_rcore_remove_replica(f->m, R, 1, 0, &f->out),
                     RT_EINVAL);
    assert_int_equal(ms_rcore_remove_replica(f->m, R, 4, 0, &f->out),
                     RT_EINVAL);
    rt_repl_actions_reset(&f->out);
    assert_int_equal(ms_rcore_remove_replica(f->m, R, 3, 0, &f->out), 0);
    assert_int_equal(ms_rcore_remove_replica(f->m, R, 2, 0, &f->out), RT_EBUSY);
    assert_int_equal(count(f, RT_REPL_ACT_PROPOSE, -1, &a), 1);
    assert_int_equal(a->guard_epoch, 5);
    assert_int_equal(a->conf.epoch, 6);
    assert_int_equal(a->conf.n_members, 2);
    assert_int_equal(a->conf.n_isr, 2);
    assert_int_equal(rt_repl_conf_role(&a->conf, 3), RT_REPL_ROLE_NONE);
    assert_false(rt_repl_conf_in_isr(&a->conf, 3));
    struct ms_rcore_range_info info;
    assert_int_equal(ms_rcore_range_get(f->m, R, &info), 0);
    assert_string_equal(info.op, "replica_removed");
    assert_int_equal(committed(f, 10, a->io_id, 0), 0);
    assert_int_equal(count(f, RT_REPL_ACT_SEND, RT_REPL_MSG_ASSIGN, &a), 3);
    assert_int_equal(a->peer, 3);
    assert_int_equal(f->out.v[0].peer, 1);
    assert_int_equal(state_of(f), MS_RCORE_ASSIGNING);
    assert_int_equal(assign_resp(f, 30, 1, 6), 0);
    assert_int_equal(state_of(f), MS_RCORE_STABLE);
    assert_int_equal(count(f, RT_REPL_ACT_EVENT, -1, &a), 1);
    assert_string_equal(a->what, "replica_removed");
    assert_int_equal(a->at_ms, 30);
    assert_int_equal(conf_of(f).n_members, 2);
}

/* In ADDING another replica may leave (the copy goes on); the learner
 * itself leaves as a failed one (STABLE). */
static void test_remove_while_adding(void **state)
{
    struct fx *f = *state;
    const struct rt_repl_action *a = NULL;
    assert_int_equal(ms_rcore_add_learner(f->m, R, 4, 0, &f->out), 0);
    count(f, RT_REPL_ACT_PROPOSE, -1, &a);
    assert_int_equal(ms_rcore_remove_replica(f->m, R, 3, 0, &f->out),
                     RT_EBUSY); /* the learner's proposal is pending */
    assert_int_equal(committed(f, 1, a->io_id, 0), 0);
    rt_repl_actions_reset(&f->out);
    assert_int_equal(ms_rcore_remove_replica(f->m, R, 3, 2, &f->out), 0);
    count(f, RT_REPL_ACT_PROPOSE, -1, &a);
    assert_int_equal(a->conf.n_members, 3);
    assert_int_equal(committed(f, 3, a->io_id, 0), 0);
    assert_int_equal(state_of(f), MS_RCORE_ADDING);
    assert_int_equal(count(f, RT_REPL_ACT_SEND, RT_REPL_MSG_ASSIGN, &a), 4);
    assert_int_equal(a->peer, 3);
    assert_int_equal(count(f, RT_REPL_ACT_EVENT, -1, &a), 1);
    assert_string_equal(a->what, "replica_removed");
    rt_repl_actions_reset(&f->out);
    assert_int_equal(ms_rcore_remove_replica(f->m, R, 4, 4, &f->out), 0);
    count(f, RT_REPL_ACT_PROPOSE, -1, &a);
    assert_int_equal(a->conf.n_members, 2);
    assert_int_equal(committed(f, 5, a->io_id, 0), 0);
    assert_int_equal(state_of(f), MS_RCORE_ASSIGNING);
    assert_int_equal(count(f, RT_REPL_ACT_EVENT, -1, &a), 1);
    assert_string_equal(a->what, "learner_failed");
}

/* A master restarted while a learner was being built loads the range in
 * ADDING with a fresh timeout from the load; the learner's join then
 * commits as before. */
static void test_restart_in_adding(void **state)
{
    struct fx *f = *state;
    const struct rt_repl_action *a = NULL;
    uint64_t four = 4;
    struct rt_repl_conf c = conf_at(6);
    c.members[3] = (struct rt_repl_member){4, RT_REPL_ROLE_LEARNER};
    c.n_members = 4;
    assert_int_equal(ms_rcore_load(f->m, &c, 100, &f->out), 0);
    assert_int_equal(state_of(f), MS_RCORE_ADDING);
    heartbeat(f, 30000, 1);
    heartbeat(f, 30000, 2);
    tick(f, 30099);
    assert_int_equal(count(f, RT_REPL_ACT_PROPOSE, -1, NULL), 0);
    assert_int_equal(isr_change(f, 1, R, 6, NULL, 0, &four, 1), 0);
    assert_int_equal(count(f, RT_REPL_ACT_PROPOSE, -1, &a), 1);
    assert_int_equal(a->conf.n_isr, 4);
    assert_int_equal(committed(f, 30100, a->io_id, 0), 0);
    assert_int_equal(state_of(f), MS_RCORE_ASSIGNING);
}

/* The committed configuration @c is well formed: one PRIMARY, in the
 * ISR; the ISR inside the set and without learners; at most rf + 1
 * members, at most one learner. */
static void assert_conf_sane(const struct rt_repl_conf *c)
{
    size_t primaries = 0, learners = 0;
    assert_true(rt_repl_conf_in_isr(c, c->primary_id));
    for (size_t i = 0; i < c->n_members; i++) {
        primaries += c->members[i].role == RT_REPL_ROLE_PRIMARY;
        learners += c->members[i].role == RT_REPL_ROLE_LEARNER;
    }
    assert_int_equal(primaries, 1);
    assert_true(learners <= 1);
    assert_true(c->n_members <= c->rf + 1);
    for (size_t i = 0; i < c->n_isr; i++) {
        enum rt_repl_role role = rt_repl_conf_role(c, c->isr[i]);
        assert_true(role == RT_REPL_ROLE_PRIMARY ||
                    role == RT_REPL_ROLE_SECONDARY);
    }
}

/* Random ISR changes (valid or not), learners added and removed, replicas
 * removed, commits that succeed or find the catalog moved, assignment
 * answers and learner timeouts, with every server heartbeating: every
 * proposal is guarded by the catalog's epoch and raises it by one, every
 * committed configuration is well formed, and the core's view is always
 * the catalog's. */
static void test_random_reconfigurations(void **state)
{
    struct fx *f = *state;
    struct rt_rng rng;
    struct rt_repl_conf cat = conf_at(5); /* the catalog's copy */
    uint64_t now = 0, pending = 0;
    struct rt_repl_conf pending_conf = cat;
    size_t commits = 0, joined = 0, left = 0;
    size_t seen_isr = cat.n_isr, seen_members = cat.n_members;
    rt_rng_seed(&rng, 42);
    for (int it = 0; it < 20000; it++) {
        uint64_t sid = 1 + rt_rng_below(&rng, 6);
        const struct rt_repl_action *a = NULL;
        now += rt_rng_below(&rng, 400);
        for (uint64_t s = 1; s <= 6; s++) {
            heartbeat(f, now, s); /* nobody is ever suspected */
        }
        rt_repl_actions_reset(&f->out);
        switch (rt_rng_below(&rng, 7)) {
            case 0:
                isr_change_at(f, now, cat.primary_id, R, cat.epoch, &sid, 1,
                              NULL, 0);
                break;
            case 1:
                isr_change_at(f, now, cat.primary_id, R, cat.epoch, NULL, 0,
                              &sid, 1);
                break;
            case 2:
                ms_rcore_add_learner(f->m, R, sid, now, &f->out);
                break;
            case 3:
                ms_rcore_remove_replica(f->m, R, sid, now, &f->out);
                break;
            case 4:
                assign_resp(f, now, cat.primary_id, cat.epoch);
                break;
            case 5:
                tick(f, now + rt_rng_below(&rng, 40000));
                break;
            default:
                if (pending) {
                    int32_t code = rt_rng_below(&rng, 8) == 0 ? RT_ESTALE : 0;
                    uint64_t id = pending;
                    if (code == 0) {
                        cat = pending_conf;
                        commits++;
                        joined += pending_conf.n_isr > seen_isr;
                        left += pending_conf.n_members < seen_members;
                    }
                    pending = 0;
                    assert_int_equal(committed(f, now, id, code), 0);
                    if (code != 0) {
                        /* The glue reloads from the catalog. */
                        assert_int_equal(
                            ms_rcore_load(f->m, &cat, now, &f->out), 0);
                    }
                }
                break;
        }
        if (count(f, RT_REPL_ACT_PROPOSE, -1, &a) == 1) {
            assert_int_equal(pending, 0);
            assert_int_equal(a->guard_epoch, cat.epoch);
            assert_int_equal(a->conf.epoch, cat.epoch + 1);
            assert_conf_sane(&a->conf);
            pending = a->io_id;
            pending_conf = a->conf;
        }
        struct rt_repl_conf seen = conf_of(f);
        assert_int_equal(seen.epoch, cat.epoch);
        assert_int_equal(seen.n_members, cat.n_members);
        assert_int_equal(seen.n_isr, cat.n_isr);
        assert_conf_sane(&seen);
        seen_isr = seen.n_isr;
        seen_members = seen.n_members;
    }
    /* The walk went through joins and removals many times. */
    assert_true(commits > 500);
    assert_true(joined > 50);
    assert_true(left > 50);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_many_ranges_found, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_suspicion_proposes_intent, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_no_suspicion, setup, teardown),
        cmocka_unit_test_setup_teardown(test_conn_down_suspicion, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_stalled_suspicion, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_restarted_primary, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_seal_and_choose, setup, teardown),
        cmocka_unit_test_setup_teardown(test_seal_wait, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cancel, setup, teardown),
        cmocka_unit_test_setup_teardown(test_no_cancel_after_seal, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_forget, setup, teardown),
        cmocka_unit_test_setup_teardown(test_restart_in_sealing, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_restart_transfer, setup, teardown),
        cmocka_unit_test_setup_teardown(test_transfer, setup, teardown),
        cmocka_unit_test_setup_teardown(test_transfer_target_silent, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_transfer_commit_failed, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_isr_change_refused, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_isr_change_while_sealing, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_isr_remove, setup, teardown),
        cmocka_unit_test_setup_teardown(test_learner_joins, setup, teardown),
        cmocka_unit_test_setup_teardown(test_learner_timeout, setup, teardown),
        cmocka_unit_test_setup_teardown(test_learner_timeout_grows_with_size,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_assign_dropped, setup, teardown),
        cmocka_unit_test_setup_teardown(test_assign_kept, setup, teardown),
        cmocka_unit_test_setup_teardown(test_adding_then_failover, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_sealing_waits, setup, teardown),
        cmocka_unit_test_setup_teardown(test_learner_rf, setup, teardown),
        cmocka_unit_test_setup_teardown(test_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_isr_add_secondary, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_returning_secondary_aborts_learner,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_returning_secondary_waits, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_remove_replica, setup, teardown),
        cmocka_unit_test_setup_teardown(test_remove_while_adding, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_restart_in_adding, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_random_reconfigurations, setup,
                                        teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
