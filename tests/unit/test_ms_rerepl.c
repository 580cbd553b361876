/* The re-replication planner (ms_rerepl.h, docs/DESIGN-replication.md
 * §8.2) on hand-made ranges and servers: when a range gets a learner and
 * where, the rate limit and its order, the surplus replica that leaves
 * once the copy joined, and the trim of a set larger than rf that no
 * move is settling. Pure, no master. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "ms_rerepl.h"

/* ---- Fixture ---- */

#define AFTER 60000

static const struct ms_rerepl_config cfg = {.after_ms = AFTER,
                                            .max_inflight = 2};

/* Range @id, rf 3: primary 1, secondaries 2 and 3, all in the ISR. */
static struct ms_rerepl_range rng(uint64_t id)
{
    struct ms_rerepl_range r = {
        .conf = {.range_id = id,
                 .epoch = 5,
                 .primary_id = 1,
                 .primary_epoch = 5,
                 .members = {{1, RT_REPL_ROLE_PRIMARY},
                             {2, RT_REPL_ROLE_SECONDARY},
                             {3, RT_REPL_ROLE_SECONDARY}},
                 .n_members = 3,
                 .isr = {1, 2, 3},
                 .n_isr = 3,
                 .rf = 3,
                 .min_insync = 2}};
    return r;
}

#define SV(id_, zone_, nrep_, silent_)                                   \
    {                                                                    \
        .id = (id_), .zone = (zone_), .nreplicas = (nrep_), .demand = 0, \
        .placeable = (silent_) == 0, .silent_ms = (silent_)              \
    }

/* Removes @id from @r's ISR (it stays a SECONDARY). */
static void out_of_isr(struct ms_rerepl_range *r, uint64_t id)
{
    size_t k = 0;
    for (size_t i = 0; i < r->conf.n_isr; i++) {
        if (r->conf.isr[i] != id) {
            r->conf.isr[k++] = r->conf.isr[i];
        }
    }
    r->conf.n_isr = k;
}

/* ---- Tests ---- */

/* A replica silent for the grace is replaced by a learner on the
 * least-loaded live non-member; silent for less, nothing happens. */
static void test_dead_replaced(void **state)
{
    struct ms_rerepl_range r = rng(7);
    struct ms_rerepl_server s[] = {SV(1, "", 3, 0), SV(2, "", 3, 0),
                                   SV(3, "", 3, AFTER - 1), SV(4, "", 5, 0),
                                   SV(5, "", 2, 0)};
    struct ms_rerepl_decision d[4];
    (void)state;
    out_of_isr(&r, 3);
    assert_int_equal(ms_rerepl_plan(&cfg, &r, 1, s, 5, d, 4), 0);
    s[2].silent_ms = AFTER;
    assert_int_equal(ms_rerepl_plan(&cfg, &r, 1, s, 5, d, 4), 1);
    assert_int_equal(d[0].kind, MS_REREPL_ADD);
    assert_int_equal(d[0].range_id, 7);
    assert_int_equal(d[0].server, 5);
    assert_int_equal(d[0].replaces, 3);
    assert_string_equal(d[0].reason, "dead");
}

/* A range with fewer members than rf gets a copy when a server is there
 * to take it, in a zone its copies do not use yet. */
static void test_under_replicated_zones(void **state)
{
    struct ms_rerepl_range r = rng(7);
    struct ms_rerepl_server s[] = {SV(1, "a", 1, 0), SV(2, "b", 1, 0),
                                   SV(4, "a", 0, 0), SV(5, "c", 9, 0)};
    struct ms_rerepl_decision d[4];
    (void)state;
    r.conf.n_members = 2;
    r.conf.n_isr = 2;
    assert_int_equal(ms_rerepl_plan(&cfg, &r, 1, s, 4, d, 4), 1);
    assert_int_equal(d[0].server, 5);
    assert_int_equal(d[0].replaces, 0);
    assert_string_equal(d[0].reason, "under_replicated");
    /* No candidate: nothing. */
    assert_int_equal(ms_rerepl_plan(&cfg, &r, 1, s, 2, d, 4), 0);
}

/* Not touched: a range with an operation in flight, one with a learner,
 * one whose primary is dead, a healthy one. */
static void test_left_alone(void **state)
{
    struct ms_rerepl_range r[4] = {rng(1), rng(2), rng(3), rng(4)};
    struct ms_rerepl_server s[] = {SV(1, "", 3, 0), SV(2, "", 3, 0),
                                   SV(3, "", 3, 0), SV(4, "", 0, 0)};
    struct ms_rerepl_decision d[4];
    (void)state;
    r[0].conf.n_members = 2;
    r[0].busy = true;
    r[1].conf.members[2].role = RT_REPL_ROLE_LEARNER;
    r[1].conf.n_isr = 2;
    r[2].conf.primary_id = 9;
    r[2].conf.members[0].server_id = 9;
    r[2].conf.isr[0] = 9;
    r[2].conf.n_members = 2;
    assert_int_equal(ms_rerepl_plan(&cfg, r, 4, s, 4, d, 4), 0);
}

/* At most max_inflight learners cluster-wide, counting those being built;
 * the ranges with the fewest live in-sync copies go first. */
static void test_rate_limit_order(void **state)
{
    struct ms_rerepl_range r[4] = {rng(1), rng(2), rng(3), rng(4)};
    struct ms_rerepl_server s[] = {SV(1, "", 4, 0), SV(2, "", 4, 0),
                                   SV(3, "", 4, 0), SV(4, "", 0, 0),
                                   SV(5, "", 0, 0)};
    struct ms_rerepl_decision d[8];
    (void)state;
    for (int i = 0; i < 3; i++) {
        r[i].conf.n_members = 2; /* {1, 2} */
        r[i].conf.n_isr = 2;
    }
    r[1].conf.n_isr = 1; /* 2 outside the ISR: fewest in sync */
    r[3].busy = r[3].adding = true;
    assert_int_equal(ms_rerepl_plan(&cfg, r, 4, s, 5, d, 8), 1);
    assert_int_equal(d[0].range_id, 2);
    r[3].busy = r[3].adding = false;
    assert_int_equal(ms_rerepl_plan(&cfg, r, 4, s, 5, d, 8), 2);
    assert_int_equal(d[0].range_id, 2);
    assert_int_equal(d[1].range_id, 1);
    /* One plan spreads its copies. */
    assert_true(d[0].server != d[1].server);
}

/* Once the learner joined (rf + 1 members, rf in the ISR) the dead
 * replica leaves; a live one outside the ISR too; never while the ISR
 * would drop below rf, never the primary or a learner. */
static void test_surplus_removed(void **state)
{
    struct ms_rerepl_range r = rng(7);
    struct ms_rerepl_server s[] = {SV(1, "", 3, 0), SV(2, "", 3, 0),
                                   SV(3, "", 3, 2 * AFTER), SV(4, "", 1, 0)};
    struct ms_rerepl_decision d[4];
    (void)state;
    r.conf.members[3] = (struct rt_repl_member){4, RT_REPL_ROLE_SECONDARY};
    r.conf.n_members = 4;
    r.conf.isr[3] = 4;
    r.conf.n_isr = 4;
    /* Dead 3 still in the ISR: it goes (the ISR keeps 3). */
    assert_int_equal(ms_rerepl_plan(&cfg, &r, 1, s, 4, d, 4), 1);
    assert_int_equal(d[0].kind, MS_REREPL_REMOVE);
    assert_int_equal(d[0].server, 3);
    assert_string_equal(d[0].reason, "surplus");
    /* 3 back and catching up outside the ISR: it is the surplus. */
    s[2].silent_ms = 0;
    out_of_isr(&r, 3);
    assert_int_equal(ms_rerepl_plan(&cfg, &r, 1, s, 4, d, 4), 1);
    assert_int_equal(d[0].server, 3);
    /* The ISR too small without the candidate: nothing. */
    out_of_isr(&r, 4);
    assert_int_equal(ms_rerepl_plan(&cfg, &r, 1, s, 4, d, 4), 0);
    /* All four in the ISR while a move is under way: the move's... */
    r = rng(7);
    r.conf.members[3] = (struct rt_repl_member){4, RT_REPL_ROLE_SECONDARY};
    r.conf.n_members = 4;
    r.conf.isr[3] = 4;
    r.conf.n_isr = 4;
    r.moving = true;
    assert_int_equal(ms_rerepl_plan(&cfg, &r, 1, s, 4, d, 4), 0);
    /* ... unless one of them is the replica a joined learner replaced
     * (it came back into the ISR before it was removed). */
    r.retire = 3;
    assert_int_equal(ms_rerepl_plan(&cfg, &r, 1, s, 4, d, 4), 1);
    assert_int_equal(d[0].server, 3);
    assert_string_equal(d[0].reason, "surplus");
}

/* rf + 1 in-sync copies with no move under way (a move a master restart
 * forgot): one secondary leaves, never the primary; the one sharing a
 * zone first, then the fullest server, the most demand, the lowest id;
 * nothing while busy or when the ISR would drop below rf. */
static void test_over_rf(void **state)
{
    struct ms_rerepl_range r = rng(7);
    struct ms_rerepl_server s[] = {SV(1, "", 9, 0), SV(2, "", 3, 0),
                                   SV(3, "", 5, 0), SV(4, "", 1, 0)};
    struct ms_rerepl_decision d[4];
    (void)state;
    r.conf.members[3] = (struct rt_repl_member){4, RT_REPL_ROLE_SECONDARY};
    r.conf.n_members = 4;
    r.conf.isr[3] = 4;
    r.conf.n_isr = 4;
    /* The fullest secondary's server (3), not the primary's (1). */
    assert_int_equal(ms_rerepl_plan(&cfg, &r, 1, s, 4, d, 4), 1);
    assert_int_equal(d[0].kind, MS_REREPL_REMOVE);
    assert_int_equal(d[0].server, 3);
    assert_string_equal(d[0].reason, "over_rf");
    /* Equal counts: the most demand, then the lowest id. */
    s[1].nreplicas = s[2].nreplicas = s[3].nreplicas = 4;
    s[3].demand = 10;
    assert_int_equal(ms_rerepl_plan(&cfg, &r, 1, s, 4, d, 4), 1);
    assert_int_equal(d[0].server, 4);
    s[3].demand = 0;
    assert_int_equal(ms_rerepl_plan(&cfg, &r, 1, s, 4, d, 4), 1);
    assert_int_equal(d[0].server, 2);
    /* Zones a (1, 2), b (3), c (4): 2 shares its zone with the primary,
     * so it goes even from the emptiest server; 3 or 4 would leave the
     * set in two zones. */
    s[0].zone = s[1].zone = "a";
    s[2].zone = "b";
    s[3].zone = "c";
    s[1].nreplicas = 0;
    assert_int_equal(ms_rerepl_plan(&cfg, &r, 1, s, 4, d, 4), 1);
    assert_int_equal(d[0].server, 2);
    /* Busy (an operation in flight): nothing. */
    r.busy = true;
    assert_int_equal(ms_rerepl_plan(&cfg, &r, 1, s, 4, d, 4), 0);
    r.busy = false;
    /* Only rf in the ISR: the outside one goes as "surplus" instead... */
    out_of_isr(&r, 4);
    assert_int_equal(ms_rerepl_plan(&cfg, &r, 1, s, 4, d, 4), 1);
    assert_int_equal(d[0].server, 4);
    assert_string_equal(d[0].reason, "surplus");
    /* ... and an rf-sized set is left alone. */
    r = rng(7);
    assert_int_equal(ms_rerepl_plan(&cfg, &r, 1, s, 4, d, 4), 0);
}

/* A server whose learner failed for the range is passed over while
 * another can take the copy, and chosen again when it is the only one. */
static void test_avoid_failed_target(void **state)
{
    struct ms_rerepl_range r = rng(7);
    struct ms_rerepl_server s[] = {SV(1, "", 1, 0), SV(2, "", 1, 0),
                                   SV(4, "", 0, 0), SV(5, "", 3, 0)};
    struct ms_rerepl_decision d[2];
    (void)state;
    r.conf.n_members = 2;
    r.conf.n_isr = 2;
    r.avoid = 4;
    assert_int_equal(ms_rerepl_plan(&cfg, &r, 1, s, 4, d, 2), 1);
    assert_int_equal(d[0].server, 5);
    assert_int_equal(ms_rerepl_plan(&cfg, &r, 1, s, 3, d, 2), 1);
    assert_int_equal(d[0].server, 4);
}

/* @cap bounds the decisions written. */
static void test_cap(void **state)
{
    struct ms_rerepl_range r[2] = {rng(1), rng(2)};
    struct ms_rerepl_server s[] = {SV(1, "", 2, 0), SV(2, "", 2, 0),
                                   SV(4, "", 0, 0)};
    struct ms_rerepl_decision d[1];
    (void)state;
    r[0].conf.n_members = r[1].conf.n_members = 2;
    r[0].conf.n_isr = r[1].conf.n_isr = 2;
    assert_int_equal(ms_rerepl_plan(&cfg, r, 2, s, 3, d, 1), 1);
    assert_int_equal(ms_rerepl_plan(&cfg, r, 2, s, 3, d, 0), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dead_replaced),
        cmocka_unit_test(test_under_replicated_zones),
        cmocka_unit_test(test_left_alone),
        cmocka_unit_test(test_rate_limit_order),
        cmocka_unit_test(test_surplus_removed),
        cmocka_unit_test(test_over_rf),
        cmocka_unit_test(test_avoid_failed_target),
        cmocka_unit_test(test_cap),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
