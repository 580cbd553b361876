/* rl_spec: operation mixes, YCSB presets, distributions, units. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "rl_spec.h"

/* A weighted mix keeps its weights and picks by them. */
static void test_mix(void **state)
{
    struct rl_mix m;
    char err[RL_ERR_SIZE], out[128];
    unsigned n[RL_OP__NR] = {0};
    (void)state;
    assert_int_equal(rl_mix_parse("get=95, update=5", &m, err), 0);
    assert_int_equal(m.total, 100);
    assert_int_equal(m.w[RL_OP_GET], 95);
    assert_int_equal(m.w[RL_OP_UPDATE], 5);
    for (unsigned u = 0; u < m.total; u++) {
        n[rl_mix_pick(&m, u)]++;
    }
    assert_int_equal(n[RL_OP_GET], 95);
    assert_int_equal(n[RL_OP_UPDATE], 5);
    rl_mix_format(&m, out, sizeof(out));
    assert_string_equal(out, "get=95,update=5");
}

/* A single name is 100% of it; ':' works like '='; decimals scale. */
static void test_mix_forms(void **state)
{
    struct rl_mix m;
    char err[RL_ERR_SIZE];
    (void)state;
    assert_int_equal(rl_mix_parse("insert", &m, err), 0);
    assert_int_equal(m.w[RL_OP_INSERT], 1);
    assert_int_equal(rl_mix_pick(&m, 0), RL_OP_INSERT);
    assert_int_equal(rl_mix_parse("batch:1,query-rows:3", &m, err), 0);
    assert_int_equal(m.w[RL_OP_BATCH], 1);
    assert_int_equal(m.w[RL_OP_QROWS], 3);
    assert_int_equal(rl_mix_parse("get=99.5,delete=0.5", &m, err), 0);
    assert_int_equal(m.w[RL_OP_GET], 99500);
    assert_int_equal(m.w[RL_OP_DELETE], 500);
    assert_int_equal(rl_mix_parse("read=1,upsert-merge=1,rmw=1", &m, err), 0);
    assert_int_equal(m.w[RL_OP_GET], 1);
    assert_int_equal(m.w[RL_OP_UPSERT_MERGE], 1);
}

/* Bad mixes are refused with a message. */
static void test_mix_errors(void **state)
{
    struct rl_mix m;
    char err[RL_ERR_SIZE] = "";
    (void)state;
    assert_int_equal(rl_mix_parse("", &m, err), -1);
    assert_int_equal(rl_mix_parse("frobnicate=1", &m, err), -1);
    assert_non_null(strstr(err, "frobnicate"));
    assert_int_equal(rl_mix_parse("get=-1", &m, err), -1);
    assert_int_equal(rl_mix_parse("get=x", &m, err), -1);
    assert_int_equal(rl_mix_parse("get=0", &m, err), -1);
}

/* YCSB presets map onto Table operations and distributions. */
static void test_ycsb(void **state)
{
    struct rl_mix m;
    struct rl_dist_cfg d;
    char err[RL_ERR_SIZE];
    (void)state;
    assert_int_equal(rl_ycsb_preset("ycsb-a", &m, &d, err), 0);
    assert_int_equal(m.w[RL_OP_GET], 50);
    assert_int_equal(m.w[RL_OP_MERGE], 50);
    assert_int_equal(d.kind, RL_DIST_ZIPFIAN);
    assert_int_equal(rl_ycsb_preset("B", &m, &d, err), 0);
    assert_int_equal(m.w[RL_OP_MERGE], 5);
    assert_int_equal(rl_ycsb_preset("c", &m, &d, err), 0);
    assert_int_equal(m.total, m.w[RL_OP_GET]);
    assert_int_equal(rl_ycsb_preset("ycsb-d", &m, &d, err), 0);
    assert_int_equal(d.kind, RL_DIST_LATEST);
    assert_int_equal(m.w[RL_OP_INSERT], 5);
    assert_int_equal(rl_ycsb_preset("ycsb-e", &m, &d, err), 0);
    assert_int_equal(m.w[RL_OP_QROWS], 95);
    assert_int_equal(rl_ycsb_preset("ycsb-f", &m, &d, err), 0);
    assert_int_equal(m.w[RL_OP_RMW], 50);
    assert_int_equal(rl_ycsb_preset("ycsb-g", &m, &d, err), -1);
}

/* Distributions with and without parameters. */
static void test_dist(void **state)
{
    struct rl_dist_cfg d;
    char err[RL_ERR_SIZE];
    (void)state;
    assert_int_equal(rl_dist_parse("uniform", &d, err), 0);
    assert_int_equal(d.kind, RL_DIST_UNIFORM);
    assert_int_equal(rl_dist_parse("zipfian", &d, err), 0);
    assert_true(d.theta == 0.99);
    assert_int_equal(rl_dist_parse("zipfian:0.5", &d, err), 0);
    assert_true(d.theta == 0.5);
    assert_int_equal(rl_dist_parse("latest:0.8", &d, err), 0);
    assert_int_equal(d.kind, RL_DIST_LATEST);
    assert_int_equal(rl_dist_parse("seq-asc", &d, err), 0);
    assert_int_equal(d.kind, RL_DIST_SEQ_ASC);
    assert_int_equal(rl_dist_parse("seq-desc", &d, err), 0);
    assert_int_equal(d.kind, RL_DIST_SEQ_DESC);
    assert_int_equal(rl_dist_parse("hotset:0.05:0.8:30s", &d, err), 0);
    assert_int_equal(d.kind, RL_DIST_HOTSET);
    assert_true(d.hot_fraction == 0.05 && d.hot_prob == 0.8 &&
                d.hot_period_s == 30);
    assert_int_equal(rl_dist_parse("hotset", &d, err), 0);
    assert_true(d.hot_fraction == 0.01 && d.hot_period_s == 10);
    assert_int_equal(rl_dist_parse("zipfian:1", &d, err), -1);
    assert_int_equal(rl_dist_parse("zipfian:0.5:1", &d, err), -1);
    assert_int_equal(rl_dist_parse("uniform:3", &d, err), -1);
    assert_int_equal(rl_dist_parse("hotset:2", &d, err), -1);
    assert_int_equal(rl_dist_parse("gaussian", &d, err), -1);
}

/* Durations, sizes, lists and key schemes. */
static void test_units(void **state)
{
    uint64_t v;
    long l[4];
    enum rl_key_scheme k;
    char err[RL_ERR_SIZE];
    (void)state;
    assert_int_equal(rl_duration_parse("10", &v, err), 0);
    assert_true(v == 10000000);
    assert_int_equal(rl_duration_parse("250ms", &v, err), 0);
    assert_true(v == 250000);
    assert_int_equal(rl_duration_parse("1.5s", &v, err), 0);
    assert_true(v == 1500000);
    assert_int_equal(rl_duration_parse("2m", &v, err), 0);
    assert_true(v == 120000000);
    assert_int_equal(rl_duration_parse("5 parsecs", &v, err), -1);
    assert_int_equal(rl_size_parse("1k", &v, err), 0);
    assert_true(v == 1024);
    assert_int_equal(rl_size_parse("256", &v, err), 0);
    assert_true(v == 256);
    assert_int_equal(rl_size_parse("2MiB", &v, err), 0);
    assert_true(v == 2097152);
    assert_int_equal(rl_size_parse("-1", &v, err), -1);
    assert_int_equal(rl_intlist_parse("1,4,16", l, 4, err), 3);
    assert_true(l[2] == 16);
    assert_int_equal(rl_intlist_parse("1,2,3,4,5", l, 4, err), -1);
    assert_int_equal(rl_scheme_parse("hash", 0, &k, err), 0);
    assert_int_equal(k, RL_KEY_HASH);
    assert_int_equal(rl_scheme_parse("rev", 0, &k, err), -1);
    assert_int_equal(rl_scheme_parse("rev", 1, &k, err), 0);
    assert_int_equal(k, RL_KEY_REV);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mix),        cmocka_unit_test(test_mix_forms),
        cmocka_unit_test(test_mix_errors), cmocka_unit_test(test_ycsb),
        cmocka_unit_test(test_dist),       cmocka_unit_test(test_units),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
