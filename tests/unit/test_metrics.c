/* rt_metrics: bucket choice, shard sums and the Prometheus text writer. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "rt_buf.h"
#include "rt_metrics.h"

/* Tests */

/* A value lands in the first bucket whose bound is >= it; beyond the last
 * bound, in +Inf. */
static void test_bucket_bounds(void **state)
{
    (void)state;
    assert_int_equal(rt_hist_bucket(0), 0);
    assert_int_equal(rt_hist_bucket(50), 0);
    assert_int_equal(rt_hist_bucket(51), 1);
    assert_int_equal(rt_hist_bucket(1000), 4);
    assert_int_equal(rt_hist_bucket(1001), 5);
    assert_int_equal(rt_hist_bucket(10000000), RT_HIST_NB - 1);
    assert_int_equal(rt_hist_bucket(10000001), RT_HIST_NB);
    assert_int_equal(rt_hist_bucket(UINT64_MAX), RT_HIST_NB);
    for (unsigned i = 0; i < RT_HIST_NB; i++) {
        assert_int_equal(rt_hist_bucket(rt_hist_le_us[i]), i);
        if (i > 0) {
            assert_true(rt_hist_le_us[i] > rt_hist_le_us[i - 1]);
        }
    }
}

/* Two shards sum bucket by bucket; count and sum follow. */
static void test_shards_sum(void **state)
{
    static struct rt_hist a, b;
    struct rt_hist_sum s;
    (void)state;
    rt_hist_observe(&a, 40);
    rt_hist_observe(&a, 700);
    rt_hist_observe(&b, 700);
    rt_hist_observe(&b, 20000000);
    memset(&s, 0, sizeof(s));
    rt_hist_add_to(&a, &s);
    rt_hist_add_to(&b, &s);
    assert_int_equal(s.count, 4);
    assert_int_equal(s.sum_us, 40 + 700 + 700 + 20000000);
    assert_int_equal(s.b[0], 1);
    assert_int_equal(s.b[4], 2);
    assert_int_equal(s.b[RT_HIST_NB], 1);
}

/* The text form: cumulative buckets in seconds, +Inf equal to _count, sum
 * in seconds, labels joined before le. */
static void test_hist_text(void **state)
{
    static struct rt_hist h;
    struct rt_hist_sum s;
    struct rt_buf b = RT_BUF_INIT;
    const char *t;
    (void)state;
    rt_hist_observe(&h, 40);
    rt_hist_observe(&h, 700);
    rt_hist_observe(&h, 700);
    memset(&s, 0, sizeof(s));
    rt_hist_add_to(&h, &s);
    rt_metrics_help(&b, "x_seconds", "histogram", "Latency.");
    rt_metrics_hist(&b, "x_seconds", "op=\"Get\"", &s);
    t = rt_buf_cstr(&b);
    assert_non_null(strstr(t,
                           "# HELP x_seconds Latency.\n"
                           "# TYPE x_seconds histogram\n"));
    assert_non_null(strstr(t, "x_seconds_bucket{op=\"Get\",le=\"5e-05\"} 1\n"));
    assert_non_null(
        strstr(t, "x_seconds_bucket{op=\"Get\",le=\"0.0005\"} 1\n"));
    assert_non_null(strstr(t, "x_seconds_bucket{op=\"Get\",le=\"0.001\"} 3\n"));
    assert_non_null(strstr(t, "x_seconds_bucket{op=\"Get\",le=\"10\"} 3\n"));
    assert_non_null(strstr(t, "x_seconds_bucket{op=\"Get\",le=\"+Inf\"} 3\n"));
    assert_non_null(strstr(t, "x_seconds_sum{op=\"Get\"} 0.00144\n"));
    assert_non_null(strstr(t, "x_seconds_count{op=\"Get\"} 3\n"));
    rt_buf_reset(&b);
    rt_metrics_hist(&b, "y", NULL, &s);
    t = rt_buf_cstr(&b);
    assert_non_null(strstr(t, "y_bucket{le=\"+Inf\"} 3\n"));
    assert_non_null(strstr(t, "y_count 3\n"));
    rt_buf_free(&b);
}

/* Other bounds: the same layout with the caller's le values. */
static void test_hist_le(void **state)
{
    static const double le[] = {1, 2, 4};
    const uint64_t counts[] = {5, 0, 1, 2};
    struct rt_buf b = RT_BUF_INIT;
    const char *t;
    (void)state;
    rt_metrics_hist_le(&b, "g", "", le, 3, counts, 20);
    t = rt_buf_cstr(&b);
    assert_string_equal(t,
                        "g_bucket{le=\"1\"} 5\n"
                        "g_bucket{le=\"2\"} 5\n"
                        "g_bucket{le=\"4\"} 6\n"
                        "g_bucket{le=\"+Inf\"} 8\n"
                        "g_sum 20\n"
                        "g_count 8\n");
    rt_buf_free(&b);
}

/* Label values and help text are escaped as the format says. */
static void test_escape(void **state)
{
    struct rt_buf b = RT_BUF_INIT;
    (void)state;
    rt_metrics_label(&b, "a\"b\\c\nd");
    assert_string_equal(rt_buf_cstr(&b), "a\\\"b\\\\c\\nd");
    rt_buf_reset(&b);
    rt_metrics_help(&b, "n", "counter", "x\\y\nz \"q\"");
    assert_string_equal(rt_buf_cstr(&b),
                        "# HELP n x\\\\y\\nz \"q\"\n# TYPE n counter\n");
    rt_buf_free(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bucket_bounds), cmocka_unit_test(test_shards_sum),
        cmocka_unit_test(test_hist_text),     cmocka_unit_test(test_hist_le),
        cmocka_unit_test(test_escape),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
