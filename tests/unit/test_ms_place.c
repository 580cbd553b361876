/* Placement of a new range's replica set and of one more copy (ms_place.h,
 * docs/DESIGN-replication.md §8.3) on hand-made candidate lists: pure, no
 * master. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "ms_place.h"

/* ---- Helpers ---- */

#define S(id_, zone_, nrep_, demand_)                       \
    {                                                       \
        .id = (id_), .zone = (zone_), .nreplicas = (nrep_), \
        .demand = (demand_)                                 \
    }

static bool has(const uint64_t *ids, size_t n, uint64_t id)
{
    for (size_t i = 0; i < n; i++) {
        if (ids[i] == id) {
            return true;
        }
    }
    return false;
}

static bool distinct(const uint64_t *ids, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        for (size_t j = i + 1; j < n; j++) {
            if (ids[i] == ids[j]) {
                return false;
            }
        }
    }
    return true;
}

/* ---- Tests ---- */

/* Copies land on distinct servers, the least-loaded first: it is the
 * primary. */
static void test_distinct_least_loaded(void **state)
{
    const struct ms_place_server s[] = {
        S(1, "", 5, 0),
        S(2, "", 1, 0),
        S(3, "", 3, 0),
        S(4, "", 2, 0),
    };
    uint64_t ids[8];
    (void)state;
    assert_int_equal(ms_place_replicas(s, 4, 3, ids), 3);
    assert_true(distinct(ids, 3));
    assert_int_equal(ids[0], 2); /* fewest replicas: primary */
    assert_int_equal(ids[1], 4);
    assert_int_equal(ids[2], 3);
}

/* Ties in replica count go by demand, then by the lowest id. */
static void test_ties(void **state)
{
    const struct ms_place_server s[] = {
        S(3, NULL, 1, 10.0),
        S(1, NULL, 1, 50.0),
        S(2, NULL, 1, 10.0),
        S(4, NULL, 0, 99.0),
    };
    uint64_t ids[8];
    (void)state;
    assert_int_equal(ms_place_replicas(s, 4, 4, ids), 4);
    assert_int_equal(ids[0], 4);
    assert_int_equal(ids[1], 2);
    assert_int_equal(ids[2], 3);
    assert_int_equal(ids[3], 1);
}

/* With at least as many zones as copies, each copy is in its own zone,
 * even when a lighter server shares a zone with one already chosen. */
static void test_zones_respected(void **state)
{
    const struct ms_place_server s[] = {
        S(1, "a", 0, 0), S(2, "a", 1, 0), S(3, "b", 4, 0),
        S(4, "c", 5, 0), S(5, "b", 6, 0),
    };
    uint64_t ids[8];
    (void)state;
    assert_int_equal(ms_place_replicas(s, 5, 3, ids), 3);
    assert_int_equal(ids[0], 1);
    assert_int_equal(ids[1], 3); /* not 2: zone a has a copy */
    assert_int_equal(ids[2], 4); /* not 5: zone b has a copy */
}

/* Fewer zones than copies: spread as evenly as the zones allow, the
 * least-loaded within each zone. */
static void test_zones_spread(void **state)
{
    const struct ms_place_server s[] = {
        S(1, "a", 0, 0), S(2, "a", 1, 0), S(3, "a", 2, 0),
        S(4, "b", 9, 0), S(5, "b", 9, 0),
    };
    uint64_t ids[8];
    size_t in_a = 0, in_b = 0;
    (void)state;
    assert_int_equal(ms_place_replicas(s, 5, 4, ids), 4);
    assert_true(distinct(ids, 4));
    for (size_t i = 0; i < 4; i++) {
        if (ids[i] <= 3) {
            in_a++;
        } else {
            in_b++;
        }
    }
    assert_int_equal(in_a, 2);
    assert_int_equal(in_b, 2);
    assert_int_equal(ids[0], 1);
    assert_true(has(ids, 4, 2) && !has(ids, 4, 3));

    /* Three copies, two zones: two in one zone, one in the other. */
    assert_int_equal(ms_place_replicas(s, 5, 3, ids), 3);
    assert_int_equal(ids[0], 1);
    assert_int_equal(ids[1], 4);
    assert_int_equal(ids[2], 2);
}

/* Servers that declared no zone share one: NULL and "" are the same. */
static void test_no_zone_is_one_zone(void **state)
{
    const struct ms_place_server s[] = {
        S(1, NULL, 0, 0),
        S(2, "", 0, 0),
        S(3, "x", 7, 0),
    };
    uint64_t ids[8];
    (void)state;
    assert_int_equal(ms_place_replicas(s, 3, 2, ids), 2);
    assert_int_equal(ids[0], 1);
    assert_int_equal(ids[1], 3); /* the other zone before server 2 */
}

/* Fewer candidates than copies: every candidate, once; none: nothing. */
static void test_fewer_candidates(void **state)
{
    const struct ms_place_server s[] = {S(7, "a", 0, 0), S(8, "a", 0, 0)};
    uint64_t ids[8];
    (void)state;
    assert_int_equal(ms_place_replicas(s, 2, 3, ids), 2);
    assert_true(distinct(ids, 2));
    assert_int_equal(ids[0], 7);
    assert_int_equal(ms_place_replicas(s, 0, 3, ids), 0);
    assert_int_equal(ms_place_replicas(s, 2, 0, ids), 0);
}

/* One more copy: a zone the kept copies do not use wins over a lighter
 * server in a used zone; among equally used zones the lightest server. */
static void test_one_more_zone(void **state)
{
    const struct ms_place_server s[] = {
        S(4, "a", 0, 0),
        S(5, "b", 7, 50),
        S(6, "c", 7, 10),
    };
    const char *kept[] = {"a", "b"};
    (void)state;
    assert_int_equal(ms_place_one(s, 3, kept, 2), 2);
    const char *kept2[] = {"a", "b", "c"};
    assert_int_equal(ms_place_one(s, 3, kept2, 3), 0);
    assert_int_equal(ms_place_one(s, 0, kept, 2), -1);
}

/* One more copy without zones: the least-loaded candidate (replicas, then
 * demand, then id). */
static void test_one_more_least_loaded(void **state)
{
    const struct ms_place_server s[] = {
        S(7, NULL, 2, 0),
        S(3, "", 1, 9),
        S(2, NULL, 1, 9),
    };
    const char *kept[] = {NULL, ""};
    (void)state;
    assert_int_equal(ms_place_one(s, 3, kept, 2), 2);
    assert_int_equal(ms_place_one(s, 3, NULL, 0), 2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_distinct_least_loaded),
        cmocka_unit_test(test_ties),
        cmocka_unit_test(test_zones_respected),
        cmocka_unit_test(test_zones_spread),
        cmocka_unit_test(test_no_zone_is_one_zone),
        cmocka_unit_test(test_fewer_candidates),
        cmocka_unit_test(test_one_more_zone),
        cmocka_unit_test(test_one_more_least_loaded),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
