/* rl_hist: log-bucketed latency histogram. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "rl_hist.h"

/* Helpers */

static struct rl_hist *hist_new(void)
{
    struct rl_hist *h = malloc(sizeof(*h));
    assert_non_null(h);
    rl_hist_reset(h);
    return h;
}

static void assert_close(double got, double want, double rel)
{
    if (fabs(got - want) > rel * want + 1e-9) {
        fail_msg("got %f, want %f (+-%.2f%%)", got, want, rel * 100);
    }
}

/* Tests */

/* An empty histogram reports 0 for every percentile. */
static void test_empty(void **state)
{
    struct rl_hist *h = hist_new();
    (void)state;
    assert_true(rl_hist_pct(h, 50) == 0);
    assert_true(rl_hist_pct(h, 100) == 0);
    assert_true(rl_hist_mean(h) == 0);
    free(h);
}

/* Values below 128 us are exact. */
static void test_small_exact(void **state)
{
    struct rl_hist *h = hist_new();
    (void)state;
    for (uint64_t v = 1; v <= 100; v++) {
        rl_hist_add(h, v);
    }
    assert_true(rl_hist_pct(h, 50) == 50);
    assert_true(rl_hist_pct(h, 99) == 99);
    assert_true(rl_hist_pct(h, 100) == 100);
    assert_true(rl_hist_pct(h, 0) == 1);
    assert_close(rl_hist_mean(h), 50.5, 1e-9);
    free(h);
}

/* Every value falls in the bucket whose range holds it, and buckets are
 * at most 1/128 of their value wide. */
static void test_buckets_cover(void **state)
{
    (void)state;
    uint64_t prev_idx = 0;
    for (uint64_t v = 0; v < (1ULL << 36); v = v < 1000 ? v + 1 : v * 1.01) {
        unsigned i = rl_hist_index(v);
        assert_true(i < RL_HIST_NBUCKETS);
        assert_true(rl_hist_lower(i) <= v);
        assert_true(v < rl_hist_lower(i) + rl_hist_width(i));
        assert_true(i >= prev_idx);
        if (v >= 128) {
            assert_true(rl_hist_width(i) * 128 <= v + rl_hist_width(i));
        }
        prev_idx = i;
    }
}

/* Percentiles of a uniform 1..100000 us sample are within 0.5%. */
static void test_uniform_percentiles(void **state)
{
    struct rl_hist *h = hist_new();
    (void)state;
    for (uint64_t v = 1; v <= 100000; v++) {
        rl_hist_add(h, v);
    }
    assert_close(rl_hist_pct(h, 50), 50000, 0.005);
    assert_close(rl_hist_pct(h, 90), 90000, 0.005);
    assert_close(rl_hist_pct(h, 99), 99000, 0.005);
    assert_close(rl_hist_pct(h, 99.9), 99900, 0.005);
    assert_true(rl_hist_pct(h, 100) == 100000);
    assert_true(h->count == 100000);
    free(h);
}

/* A heavy tail: 99% at 1 ms, 1% at 1 s -> p99 is 1 ms, p99.5 is 1 s. */
static void test_tail(void **state)
{
    struct rl_hist *h = hist_new();
    (void)state;
    for (int i = 0; i < 9900; i++) {
        rl_hist_add(h, 1000);
    }
    for (int i = 0; i < 100; i++) {
        rl_hist_add(h, 1000000);
    }
    assert_close(rl_hist_pct(h, 99), 1000, 0.005);
    assert_close(rl_hist_pct(h, 99.5), 1000000, 0.005);
    free(h);
}

/* Merging two halves equals recording everything in one. */
static void test_merge(void **state)
{
    struct rl_hist *a = hist_new(), *b = hist_new(), *all = hist_new();
    (void)state;
    for (uint64_t v = 1; v <= 50000; v++) {
        rl_hist_add(v % 2 ? a : b, v * 7);
        rl_hist_add(all, v * 7);
    }
    rl_hist_merge(a, b);
    assert_true(a->count == all->count);
    assert_true(a->min == all->min && a->max == all->max);
    for (double p = 1; p < 100; p += 7.5) {
        assert_true(rl_hist_pct(a, p) == rl_hist_pct(all, p));
    }
    free(a);
    free(b);
    free(all);
}

/* Values beyond the range are clamped into the last bucket, max exact. */
static void test_huge(void **state)
{
    struct rl_hist *h = hist_new();
    (void)state;
    rl_hist_add(h, UINT64_MAX / 2);
    assert_true(rl_hist_index(UINT64_MAX / 2) < RL_HIST_NBUCKETS);
    assert_true(rl_hist_pct(h, 100) == (double)(UINT64_MAX / 2));
    free(h);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_empty),
        cmocka_unit_test(test_small_exact),
        cmocka_unit_test(test_buckets_cover),
        cmocka_unit_test(test_uniform_percentiles),
        cmocka_unit_test(test_tail),
        cmocka_unit_test(test_merge),
        cmocka_unit_test(test_huge),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
