/* The load model's history rings (ms_load_frame): the 1 s ring and the
 * 10 s one made from it. No master, no clock: each test passes the wall
 * time of every frame and reads the frames back. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ms_load.h"
#include "rt_log.h"

/* ---- Fixture ---- */

#define T0 1700000000000ull /* a multiple of 10 s */

static int setup(void **state)
{
    rt_log_init("test", RT_LOG_WARN);
    *state = ms_load_create(1000);
    return 0;
}

static int teardown(void **state)
{
    ms_load_destroy(*state);
    return 0;
}

/* ---- Helpers ---- */

/* Reports @eps entities/s for @range on @server over one second, so the
 * range's demand is @eps (its first report is taken as is, and a report
 * of the same rate keeps an average at that rate). */
static void report(struct ms_load *ld,
                   uint64_t range,
                   uint64_t server,
                   uint64_t eps,
                   uint64_t now)
{
    Rt__RangeLoad l = RT__RANGE_LOAD__INIT;
    l.range_id = range;
    l.entities = eps;
    l.interval_ms = 1000;
    ms_load_report(ld, server, &l, 0, 0, now);
}

static const struct ms_load_cell *cell(const struct ms_load_frame *f,
                                       uint64_t range)
{
    for (size_t i = 0; i < f->ncells; i++) {
        if (f->cells[i].b->range_id == range) {
            return &f->cells[i];
        }
    }
    return NULL;
}

static double server_demand(const struct ms_load_frame *f, uint64_t server)
{
    for (size_t i = 0; i < f->nservers; i++) {
        if (f->server_ids[i] == server) {
            return f->server_demand[i];
        }
    }
    return -1;
}

/* ---- Tests ---- */

/* No coarse frame until a fine frame of the next 10 s bucket comes; then
 * one, stamped with its bucket's start. */
static void test_coarse_after_bucket(void **state)
{
    struct ms_load *ld = *state;
    struct ms_load_frame_range r = {1, 1, "", NULL, 7};
    for (int s = 0; s < 10; s++) {
        ms_load_frame(ld, T0 + 500 + (uint64_t)s * 1000, &r, 1);
    }
    assert_int_equal(ms_load_nframes(ld), 10);
    assert_int_equal(ms_load_ncoarse(ld), 0);
    assert_int_equal(ms_load_coarse_added(ld), 0);
    ms_load_frame(ld, T0 + 10500, &r, 1);
    assert_int_equal(ms_load_ncoarse(ld), 1);
    assert_int_equal(ms_load_coarse_added(ld), 1);
    assert_int_equal(ms_load_coarse_at(ld, 0)->unix_ms, T0);
}

/* A coarse cell is the mean of the range's fine demands in the bucket;
 * a server's total is the mean over all the bucket's fine frames. */
static void test_coarse_mean(void **state)
{
    struct ms_load *ld = *state;
    struct ms_load_frame_range r[2] = {{1, 1, "", "m", 7},
                                       {2, 1, "m", NULL, 8}};
    const struct ms_load_frame *c;
    for (int s = 0; s < 10; s++) {
        /* range 1: 100 for 5 s then 300; range 2: always 50 */
        report(ld, 1, 7, s < 5 ? 100 : 300, T0 + (uint64_t)s * 1000);
        report(ld, 2, 8, 50, T0 + (uint64_t)s * 1000);
        if (s == 5) {
            /* A new rate after a steady one moves the average only by
             * alpha: set it outright for an exact mean. */
            ms_load_forget(ld, 1);
            report(ld, 1, 7, 300, T0 + (uint64_t)s * 1000);
        }
        ms_load_frame(ld, T0 + (uint64_t)s * 1000, r, 2);
    }
    ms_load_frame(ld, T0 + 10000, r, 2);
    c = ms_load_coarse_at(ld, 0);
    assert_int_equal(c->ncells, 2);
    assert_float_equal(cell(c, 1)->demand, 200.0, 0.01);
    assert_float_equal(cell(c, 2)->demand, 50.0, 0.01);
    assert_int_equal(cell(c, 2)->server_id, 8);
    assert_int_equal(c->nservers, 2);
    assert_float_equal(server_demand(c, 7), 200.0, 0.01);
    assert_float_equal(server_demand(c, 8), 50.0, 0.01);
}

/* A range split half-way through a bucket: the parent's cell is its mean
 * while it existed, each child's likewise, and the server's total is the
 * mean over the whole bucket. */
static void test_coarse_split_in_bucket(void **state)
{
    struct ms_load *ld = *state;
    struct ms_load_frame_range parent = {1, 1, "", NULL, 7};
    struct ms_load_frame_range kids[2] = {{2, 1, "", "k", 7},
                                          {3, 1, "k", NULL, 7}};
    const struct ms_load_frame *c;
    report(ld, 1, 7, 400, T0);
    for (int s = 0; s < 4; s++) {
        ms_load_frame(ld, T0 + (uint64_t)s * 1000, &parent, 1);
    }
    ms_load_forget(ld, 1);
    report(ld, 2, 7, 100, T0 + 4000);
    report(ld, 3, 7, 100, T0 + 4000);
    for (int s = 4; s < 10; s++) {
        ms_load_frame(ld, T0 + (uint64_t)s * 1000, kids, 2);
    }
    ms_load_frame(ld, T0 + 10000, kids, 2);
    c = ms_load_coarse_at(ld, 0);
    assert_int_equal(c->ncells, 3);
    assert_float_equal(cell(c, 1)->demand, 400.0, 0.01);
    assert_float_equal(cell(c, 2)->demand, 100.0, 0.01);
    assert_float_equal(cell(c, 3)->demand, 100.0, 0.01);
    /* (4 * 400 + 6 * 200) / 10 */
    assert_float_equal(server_demand(c, 7), 280.0, 0.01);
    assert_string_equal(cell(c, 3)->b->low, "k");
}

/* The coarse ring keeps MS_LOAD_COARSE_HISTORY frames, oldest first, and
 * a range gone from every fine frame keeps its bounds while a coarse
 * frame holds it, then they go. */
static void test_coarse_ring_bounded(void **state)
{
    struct ms_load *ld = *state;
    struct ms_load_frame_range old = {1, 1, "", NULL, 7};
    struct ms_load_frame_range cur = {2, 1, "", NULL, 7};
    size_t n = MS_LOAD_COARSE_HISTORY;
    bool found;
    /* One fine frame per bucket: each closes the previous bucket. */
    ms_load_frame(ld, T0, &old, 1);
    for (size_t k = 1; k <= n + 5; k++) {
        ms_load_frame(ld, T0 + k * MS_LOAD_COARSE_MS, &cur, 1);
        found = false;
        for (size_t i = 0; i < ms_load_nbounds(ld); i++) {
            found = found || ms_load_bounds_at(ld, i)->range_id == 1;
        }
        /* range 1 is in coarse frame 1 only, dropped at the (n+1)th. */
        assert_true(found == (k <= n));
    }
    assert_int_equal(ms_load_ncoarse(ld), n);
    assert_int_equal(ms_load_coarse_added(ld), n + 5);
    assert_int_equal(ms_load_coarse_at(ld, 0)->unix_ms,
                     T0 + 5 * MS_LOAD_COARSE_MS);
    assert_int_equal(ms_load_coarse_at(ld, n - 1)->unix_ms,
                     T0 + (n + 4) * MS_LOAD_COARSE_MS);
    for (size_t i = 1; i < n; i++) {
        assert_true(ms_load_coarse_at(ld, i)->unix_ms >
                    ms_load_coarse_at(ld, i - 1)->unix_ms);
    }
}

/* The fine ring stays what it was: MS_LOAD_HISTORY frames, and its
 * bounds are kept while either ring holds them. */
static void test_fine_ring_unchanged(void **state)
{
    struct ms_load *ld = *state;
    struct ms_load_frame_range r = {1, 1, "", NULL, 7};
    for (uint64_t s = 0; s < MS_LOAD_HISTORY + 30; s++) {
        ms_load_frame(ld, T0 + s * 1000, &r, 1);
    }
    assert_int_equal(ms_load_nframes(ld), MS_LOAD_HISTORY);
    assert_int_equal(ms_load_frame_at(ld, 0)->unix_ms, T0 + 30000);
    assert_int_equal(ms_load_ncoarse(ld), (MS_LOAD_HISTORY + 30) / 10 - 1);
    assert_int_equal(ms_load_nbounds(ld), 1);
}

/* Whether @b is the registry's entry for its range (the same object, so
 * not a freed one). */
static bool registered(const struct ms_load *ld, const struct ms_load_bounds *b)
{
    for (size_t i = 0; i < ms_load_nbounds(ld); i++) {
        if (ms_load_bounds_at(ld, i) == b) {
            return true;
        }
    }
    return false;
}

static void assert_frames_registered(const struct ms_load *ld)
{
    for (size_t i = 0; i < ms_load_nframes(ld); i++) {
        const struct ms_load_frame *f = ms_load_frame_at(ld, i);
        for (size_t j = 0; j < f->ncells; j++) {
            assert_true(registered(ld, f->cells[j].b));
        }
    }
    for (size_t i = 0; i < ms_load_ncoarse(ld); i++) {
        const struct ms_load_frame *f = ms_load_coarse_at(ld, i);
        for (size_t j = 0; j < f->ncells; j++) {
            assert_true(registered(ld, f->cells[j].b));
        }
    }
}

/* A history document names the bounds of every range its frames name:
 * through splits and merges over more than both rings hold, and a clock
 * stepped back, every cell of every kept frame (fine and coarse) is in
 * the registry, and the registry keeps no more than the frames and the
 * bucket being summed need. */
static void test_bounds_cover_frames(void **state)
{
    struct ms_load *ld = *state;
    /* The live ranges: one table cut at single-letter keys. */
    struct ms_load_frame_range live[27];
    static const char *const cuts[27] = {
        "",  "a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l", "m",
        "n", "o", "p", "q", "r", "s", "t", "u", "v", "w", "x", "y", "z"};
    size_t nlive = 1, cut = 1;
    uint64_t next_id = 2, t = T0;
    unsigned seed = 12345;
    const uint64_t steps =
        MS_LOAD_COARSE_HISTORY * (MS_LOAD_COARSE_MS / 1000) + 300;

    live[0] = (struct ms_load_frame_range){1, 1, "", NULL, 7};
    for (uint64_t s = 0; s < steps; s++) {
        seed = seed * 1103515245u + 12345u;
        if (s % 5 == 0 && cut < 26) {
            /* Split the last range at the next letter. */
            struct ms_load_frame_range *p = &live[nlive - 1];
            live[nlive] = (struct ms_load_frame_range){next_id + 1, 1,
                                                       cuts[cut], NULL, 8};
            *p = (struct ms_load_frame_range){next_id, 1, p->low, cuts[cut], 7};
            next_id += 2;
            nlive++;
            cut++;
        } else if (s % 13 == 0 && nlive > 1) {
            /* Merge the last two. */
            struct ms_load_frame_range *a = &live[nlive - 2];
            *a = (struct ms_load_frame_range){next_id++, 1, a->low, NULL, 7};
            nlive--;
            cut--;
        }
        report(ld, live[0].range_id, 7, (seed >> 8) % 100, t);
        /* Once, the wall clock steps back over a bucket boundary. */
        t = s == 1000 ? t - 15000 : t + 1000;
        ms_load_frame(ld, t, live, nlive);
        if (s % 7 == 0 || s + 1 == steps) {
            assert_frames_registered(ld);
        }
    }
    assert_int_equal(ms_load_ncoarse(ld), MS_LOAD_COARSE_HISTORY);
    /* Nothing beyond what the rings and the bucket name: every id the
     * last coarse frames or the fine ring name, and only those. */
    for (size_t i = 0; i < ms_load_nbounds(ld); i++) {
        const struct ms_load_bounds *b = ms_load_bounds_at(ld, i);
        bool used = false;
        for (size_t k = 0; k < ms_load_nframes(ld) && !used; k++) {
            const struct ms_load_frame *f = ms_load_frame_at(ld, k);
            for (size_t j = 0; j < f->ncells; j++) {
                used = used || f->cells[j].b == b;
            }
        }
        for (size_t k = 0; k < ms_load_ncoarse(ld) && !used; k++) {
            const struct ms_load_frame *f = ms_load_coarse_at(ld, k);
            for (size_t j = 0; j < f->ncells; j++) {
                used = used || f->cells[j].b == b;
            }
        }
        assert_true(used);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_coarse_after_bucket, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_coarse_mean, setup, teardown),
        cmocka_unit_test_setup_teardown(test_coarse_split_in_bucket, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_coarse_ring_bounded, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_fine_ring_unchanged, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_bounds_cover_frames, setup,
                                        teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
