/* Unit tests of the group-commit wait policy (ps_gwait.h), fed queue
 * depths and sync times by hand: off means never; a lone client never
 * waits; a shallow queue after a recent sync waits for the writes the last
 * group's clients will send, up to half the last sync and the configured
 * bound, minus the time already idle; a deep queue, a non-write job, a
 * first group or a stale sync never wait; a wait that gathered writes
 * slower than the last group committed them backs off (1, 2, 4 .. 64
 * eligible groups without a wait), one that kept up resets it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "ps_gwait.h"

/* 16 clients, groups alternating in halves: 8 queued when 8 were
 * committed by a 2 ms sync that ended 50 us ago. */
static struct ps_gwait_in shallow(void)
{
    return (struct ps_gwait_in){
        .max_us = 1000,
        .queued_ops = 8,
        .queued_other = 0,
        .last_sync_us = 2000,
        .since_sync_us = 50,
        .expect_ops = 16,
        .last_group_ops = 8,
    };
}

static void test_shallow_waits_for_expected(void **state)
{
    struct ps_gwait_in in = shallow();
    struct ps_gwait g = {0, 0};
    size_t target = 0;
    (void)state;
    /* min(1000, 2000 / 2) minus the 50 us already idle. */
    assert_int_equal(ps_gwait_decide(&g, &in, &target), 950);
    assert_int_equal(target, 16);
}

static void test_off_never_waits(void **state)
{
    struct ps_gwait_in in = shallow();
    struct ps_gwait g = {0, 0};
    size_t target = 77;
    (void)state;
    in.max_us = 0;
    assert_int_equal(ps_gwait_decide(&g, &in, &target), 0);
    assert_int_equal(target, 77); /* untouched */
}

static void test_lone_client_never_waits(void **state)
{
    struct ps_gwait_in in = shallow();
    struct ps_gwait g = {0, 0};
    size_t target = 0;
    (void)state;
    /* One client: its group held 1 op and nothing was queued at its end;
     * its next write is the whole expected load. */
    in.queued_ops = 1;
    in.expect_ops = 1;
    assert_int_equal(ps_gwait_decide(&g, &in, &target), 0);
    /* The same after a long idle gap. */
    in.since_sync_us = 1000000;
    assert_int_equal(ps_gwait_decide(&g, &in, &target), 0);
}

static void test_queue_reached_expected(void **state)
{
    struct ps_gwait_in in = shallow();
    struct ps_gwait g = {0, 0};
    size_t target = 0;
    (void)state;
    in.queued_ops = 16;
    assert_int_equal(ps_gwait_decide(&g, &in, &target), 0);
    in.queued_ops = 20; /* more came than the last group saw */
    assert_int_equal(ps_gwait_decide(&g, &in, &target), 0);
}

static void test_deep_queue_never_waits(void **state)
{
    struct ps_gwait_in in = shallow();
    struct ps_gwait g = {0, 0};
    size_t target = 0;
    (void)state;
    in.expect_ops = 4096;
    in.queued_ops = PS_GWAIT_DEEP;
    assert_int_equal(ps_gwait_decide(&g, &in, &target), 0);
    in.queued_ops = PS_GWAIT_DEEP + 1000;
    assert_int_equal(ps_gwait_decide(&g, &in, &target), 0);
    /* Just below the depth: wait, but only until the depth is reached,
     * not for the 4096 the last group had. */
    in.queued_ops = PS_GWAIT_DEEP - 1;
    assert_true(ps_gwait_decide(&g, &in, &target) > 0);
    assert_int_equal(target, PS_GWAIT_DEEP);
}

static void test_bound_is_min_of_flag_and_half_sync(void **state)
{
    struct ps_gwait_in in = shallow();
    struct ps_gwait g = {0, 0};
    size_t target = 0;
    (void)state;
    in.since_sync_us = 0;
    /* A fast disk: half of a 300 us sync. */
    in.last_sync_us = 300;
    assert_int_equal(ps_gwait_decide(&g, &in, &target), 150);
    /* A slow disk: the flag caps it. */
    in.last_sync_us = 40000;
    assert_int_equal(ps_gwait_decide(&g, &in, &target), 1000);
    in.max_us = 200;
    assert_int_equal(ps_gwait_decide(&g, &in, &target), 200);
    /* A 1 us sync leaves nothing to wait for. */
    in.last_sync_us = 1;
    assert_int_equal(ps_gwait_decide(&g, &in, &target), 0);
}

static void test_idle_time_counts(void **state)
{
    struct ps_gwait_in in = shallow();
    struct ps_gwait g = {0, 0};
    size_t target = 0;
    (void)state;
    /* The writer sat idle 999 of the 1000 us: 1 us left. */
    in.since_sync_us = 999;
    assert_int_equal(ps_gwait_decide(&g, &in, &target), 1);
    /* The last sync is not recent: the write goes at once. */
    in.since_sync_us = 1000;
    assert_int_equal(ps_gwait_decide(&g, &in, &target), 0);
    in.since_sync_us = 5000000;
    assert_int_equal(ps_gwait_decide(&g, &in, &target), 0);
}

static void test_control_jobs_and_empty_queue(void **state)
{
    struct ps_gwait_in in = shallow();
    struct ps_gwait g = {0, 0};
    size_t target = 0;
    (void)state;
    /* A barrier, a meta or a replica-state job is queued. */
    in.queued_other = 1;
    assert_int_equal(ps_gwait_decide(&g, &in, &target), 0);
    /* Only a drop to advance: no write to group. */
    in = shallow();
    in.queued_ops = 0;
    assert_int_equal(ps_gwait_decide(&g, &in, &target), 0);
}

static void test_first_group_never_waits(void **state)
{
    struct ps_gwait_in in = shallow();
    struct ps_gwait g = {0, 0};
    size_t target = 0;
    (void)state;
    in.last_sync_us = 0;
    in.expect_ops = 0;
    assert_int_equal(ps_gwait_decide(&g, &in, &target), 0);
}

/* Runs @n eligible decisions and counts the waits among them. */
static int waits_in(struct ps_gwait *g, int n)
{
    struct ps_gwait_in in = shallow();
    size_t target = 0;
    int waits = 0;
    for (int i = 0; i < n; i++) {
        waits += ps_gwait_decide(g, &in, &target) > 0;
    }
    return waits;
}

static void test_paying_wait_keeps_waiting(void **state)
{
    struct ps_gwait_in in = shallow();
    struct ps_gwait g;
    (void)state;
    ps_gwait_init(&g);
    /* The last group committed 8 ops in 2000 us (4 per ms); 8 ops came
     * back in 100 us (80 per ms): it paid, the next group waits too. */
    assert_int_equal(ps_gwait_done(&g, &in, 8, 100), 1);
    assert_int_equal(waits_in(&g, 5), 5);
    /* Exactly the commit rate still pays: 4 ops in 1000 us. */
    assert_int_equal(ps_gwait_done(&g, &in, 4, 1000), 1);
    assert_int_equal(waits_in(&g, 1), 1);
}

static void test_unpaid_waits_back_off(void **state)
{
    struct ps_gwait_in in = shallow();
    struct ps_gwait g;
    (void)state;
    ps_gwait_init(&g);
    /* 3 ops in 950 us: slower than 4 per ms. */
    assert_int_equal(ps_gwait_done(&g, &in, 3, 950), 0);
    /* One eligible group goes without, then one waits. */
    assert_int_equal(waits_in(&g, 2), 1);
    assert_int_equal(ps_gwait_done(&g, &in, 0, 950), 0);
    assert_int_equal(waits_in(&g, 3), 1); /* 2 skipped */
    assert_int_equal(ps_gwait_done(&g, &in, 1, 950), 0);
    assert_int_equal(waits_in(&g, 5), 1); /* 4 skipped */
    /* Doubling stops at PS_GWAIT_MAX_SKIP. */
    for (int i = 0; i < 10; i++) {
        assert_int_equal(ps_gwait_done(&g, &in, 0, 950), 0);
    }
    assert_int_equal(waits_in(&g, PS_GWAIT_MAX_SKIP), 0);
    assert_int_equal(waits_in(&g, 1), 1);
    /* One wait that pays ends the back-off. */
    assert_int_equal(ps_gwait_done(&g, &in, 8, 200), 1);
    assert_int_equal(waits_in(&g, 4), 4);
}

static void test_skip_only_counts_eligible_groups(void **state)
{
    struct ps_gwait_in in = shallow();
    struct ps_gwait g;
    size_t target = 0;
    (void)state;
    ps_gwait_init(&g);
    assert_int_equal(ps_gwait_done(&g, &in, 0, 950), 0); /* skip 1 */
    /* Groups that would not wait anyway (a lone client, a deep queue)
     * leave the skip in place. */
    in.queued_ops = 16;
    assert_int_equal(ps_gwait_decide(&g, &in, &target), 0);
    in.queued_ops = PS_GWAIT_DEEP;
    assert_int_equal(ps_gwait_decide(&g, &in, &target), 0);
    assert_int_equal(waits_in(&g, 2), 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_shallow_waits_for_expected),
        cmocka_unit_test(test_off_never_waits),
        cmocka_unit_test(test_lone_client_never_waits),
        cmocka_unit_test(test_queue_reached_expected),
        cmocka_unit_test(test_deep_queue_never_waits),
        cmocka_unit_test(test_bound_is_min_of_flag_and_half_sync),
        cmocka_unit_test(test_idle_time_counts),
        cmocka_unit_test(test_control_jobs_and_empty_queue),
        cmocka_unit_test(test_first_group_never_waits),
        cmocka_unit_test(test_paying_wait_keeps_waiting),
        cmocka_unit_test(test_unpaid_waits_back_off),
        cmocka_unit_test(test_skip_only_counts_eligible_groups),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
