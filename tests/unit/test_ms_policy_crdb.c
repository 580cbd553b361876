/* The "crdb" policy (ms_policy_crdb.h) on hand-built views: no master, no
 * network, the clock is whatever the test says. Each test builds servers
 * and ranges, reports their loads through ms_load_report and checks the
 * decisions of ms_policy_decide(). */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ms_load.h"
#include "ms_policy.h"
#include "ms_policy_crdb.h"
#include "rt_err.h"
#include "rt_log.h"

/* ---- Fixture ---- */

#define MAXR 16
#define MAXS 4

struct fx
{
    struct ms_load *ld;
    struct ms_policy pol;
    struct ms_policy_config cfg;
    struct ms_server_view sv[MAXS];
    size_t ns;
    struct ms_range_view rv[MAXR];
    size_t nr;
    uint64_t isr[MAXR][3];
    uint64_t now;
    unsigned moves;
    struct ms_decision d[64];
    size_t nd;
};

static int setup(void **state)
{
    struct fx *f = calloc(1, sizeof(*f));
    rt_log_init("test", RT_LOG_WARN);
    f->ld = ms_load_create(1000);
    ms_policy_config_default(&f->cfg);
    f->now = 100000;
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fx *f = *state;
    ms_decisions_free(f->d, f->nd);
    if (f->pol.ops) {
        ms_policy_destroy(&f->pol);
    }
    ms_load_destroy(f->ld);
    free(f);
    return 0;
}

/* ---- Helpers ---- */

static void policy(struct fx *f, const char *opts)
{
    char err[RT_ERRMSG_SIZE];
    if (f->pol.ops) {
        ms_policy_destroy(&f->pol);
    }
    f->cfg.opts = opts;
    assert_int_equal(ms_policy_create_msg("crdb", &f->cfg, &f->pol, err), 0);
    assert_string_equal(f->pol.ops->name, "crdb");
}

static void server(struct fx *f, uint64_t id)
{
    struct ms_server_view *s = &f->sv[f->ns++];
    memset(s, 0, sizeof(*s));
    s->id = id;
    s->up = true;
}

/* Reports one second of @eps entities/s for range @id, sampled from @pks
 * (NULL-terminated; every entry once per report, so a key listed twice
 * weighs twice). */
static void report(struct fx *f,
                   uint64_t id,
                   uint64_t server,
                   double eps,
                   const char *const *pks)
{
    Rt__RangeLoad l = RT__RANGE_LOAD__INIT;
    size_t n = 0;
    while (pks && pks[n]) {
        n++;
    }
    l.range_id = id;
    l.requests = (uint64_t)eps;
    l.entities = (uint64_t)eps;
    l.interval_ms = 1000;
    l.key_count = 10;
    l.key_bytes = 1000;
    l.n_sample_pks = n;
    l.sample_pks = (char **)pks;
    ms_load_report(f->ld, server, &l, 0, 0, f->now);
}

/* A single-copy range [low, high) (high NULL = +inf) of table 1, born
 * long ago, carrying @eps. */
static struct ms_range_view *range(struct fx *f,
                                   uint64_t id,
                                   const char *low,
                                   const char *high,
                                   uint64_t server,
                                   double eps)
{
    struct ms_range_view *r = &f->rv[f->nr++];
    memset(r, 0, sizeof(*r));
    r->id = id;
    r->table_id = 1;
    r->low = low;
    r->high = high;
    r->server_id = server;
    r->epoch = 1;
    r->born_ms = 1;
    report(f, id, server, eps, NULL);
    return r;
}

/* Makes @r replicated on servers 1, 2, 3 (all in sync), primary where it
 * is. */
static void replicate(struct fx *f, struct ms_range_view *r)
{
    uint64_t *set = f->isr[r - f->rv];
    set[0] = 1;
    set[1] = 2;
    set[2] = 3;
    r->replicated = true;
    r->isr = set;
    r->nisr = 3;
    r->replicas = set;
    r->nreplicas = 3;
    r->rf = 3;
}

static size_t decide(struct fx *f)
{
    struct ms_cluster_view v;
    ms_decisions_free(f->d, f->nd);
    for (size_t i = 0; i < f->nr; i++) {
        f->rv[i].load = ms_load_find(f->ld, f->rv[i].id);
    }
    memset(&v, 0, sizeof(v));
    v.servers = f->sv;
    v.nservers = f->ns;
    v.ranges = f->rv;
    v.nranges = f->nr;
    v.now_ms = f->now;
    v.moves = f->moves;
    f->nd = ms_policy_decide(&f->pol, &v, f->d, 64);
    return f->nd;
}

/* Runs the rebalancer once: the first call only schedules it. */
static size_t rebalance(struct fx *f)
{
    decide(f);
    f->now += 1000;
    return decide(f);
}

static const struct ms_decision *find(struct fx *f,
                                      enum ms_decision_kind k,
                                      uint64_t range_id)
{
    for (size_t i = 0; i < f->nd; i++) {
        if (f->d[i].kind == k &&
            (range_id == 0 || f->d[i].range_id == range_id)) {
            return &f->d[i];
        }
    }
    return NULL;
}

static size_t count(struct fx *f, enum ms_decision_kind k)
{
    size_t n = 0;
    for (size_t i = 0; i < f->nd; i++) {
        n += f->d[i].kind == k;
    }
    return n;
}

static size_t index_of(struct fx *f, const struct ms_decision *d)
{
    return (size_t)(d - f->d);
}

/* ---- Tests: creation ---- */

/* "crdb" is created by name; its options are parsed, an unknown or out
 * of range one is refused with a message naming it, and the policies
 * without options refuse any. */
static void test_create_and_options(void **state)
{
    struct fx *f = *state;
    struct ms_policy p = {0};
    char err[RT_ERRMSG_SIZE];

    assert_non_null(strstr(ms_policy_names(), "crdb"));
    assert_non_null(strstr(ms_policy_names(), "default"));
    policy(f, "interval_ms=200,threshold_pct=15,min_diff=50");
    f->cfg.opts = "bogus=1";
    assert_int_equal(ms_policy_create_msg("crdb", &f->cfg, &p, err), RT_EINVAL);
    assert_non_null(strstr(err, "bogus"));
    f->cfg.opts = "split_balance_pct=0";
    assert_int_equal(ms_policy_create_msg("crdb", &f->cfg, &p, err), RT_EINVAL);
    assert_non_null(strstr(err, "split_balance_pct"));
    f->cfg.opts = "interval_ms";
    assert_int_equal(ms_policy_create_msg("crdb", &f->cfg, &p, err), RT_EINVAL);
    f->cfg.opts = "interval_ms=1";
    assert_int_equal(ms_policy_create_msg("default", &f->cfg, &p, err),
                     RT_EINVAL);
    assert_non_null(strstr(err, "no options"));
    f->cfg.opts = NULL;
    assert_int_equal(ms_policy_create_msg("tikv", &f->cfg, &p, err), RT_EINVAL);
    assert_non_null(strstr(err, "crdb"));
}

/* ---- Tests: load-based splitting ---- */

/* The weighted finder picks the key that balances the sampled load on
 * its two sides (not the middle key), and finds none when no key leaves
 * the sides within 25% of each other. */
static void test_finder_key(void **state)
{
    struct fx *f = *state;
    static const char *const skew[] = {"a", "a", "a", "a", "b",
                                       "c", "d", "e", NULL};
    static const char *const lopsided[] = {"a", "a", "a", "a", "a",
                                           "a", "b", "c", NULL};
    const struct ms_load_range *l;
    double score = 1, share = 0;
    char *k;

    report(f, 1, 1, 800, skew);
    f->now += 1000;
    report(f, 1, 1, 800, skew);
    l = ms_load_find(f->ld, 1);
    k = ms_crdb_split_key(l, "", NULL, f->now, 10, 0.25, &score, &share);
    assert_non_null(k);
    assert_string_equal(k, "b"); /* a: 4/8 left, b..e: 4/8 right */
    assert_true(score < 0.01);
    assert_true(share > 0.49 && share < 0.51);
    free(k);
    /* Fewer samples than asked for: no key yet. */
    assert_null(ms_crdb_split_key(l, "", NULL, f->now, 17, 0.25, NULL, NULL));

    report(f, 2, 1, 800, lopsided);
    f->now += 1000;
    report(f, 2, 1, 800, lopsided);
    l = ms_load_find(f->ld, 2);
    /* Best is "b": 6/8 left, 2/8 right, score 0.5: not below 0.25. */
    assert_null(ms_crdb_split_key(l, "", NULL, f->now, 10, 0.25, NULL, NULL));
    k = ms_crdb_split_key(l, "", NULL, f->now, 10, 0.6, &score, NULL);
    assert_non_null(k);
    assert_string_equal(k, "b");
    assert_true(score > 0.49 && score < 0.51);
    free(k);
}

/* The finder orders keys as the store does, by UTF-16 code units: U+1F600
 * (a surrogate pair, 0xD83D...) sorts before U+E000, the other way round
 * from their UTF-8 bytes, so the balancing key is U+1F600. */
static void test_finder_utf16_order(void **state)
{
    struct fx *f = *state;
    static const char *const keys[] = {"a", "a", "\xf0\x9f\x98\x80",
                                       "\xee\x80\x80", NULL};
    char *k;

    for (int i = 0; i < 3; i++) {
        report(f, 1, 1, 400, keys);
        f->now += 1000;
    }
    k = ms_crdb_split_key(ms_load_find(f->ld, 1), "", NULL, f->now, 10, 0.25,
                          NULL, NULL);
    assert_non_null(k);
    assert_string_equal(k, "\xf0\x9f\x98\x80");
    free(k);
    /* The range below U+E000 holds U+1F600: "a" 2/3 left of it, 1/3
     * right (score 1/3). */
    k = ms_crdb_split_key(ms_load_find(f->ld, 1), "", "\xee\x80\x80", f->now, 1,
                          0.5, NULL, NULL);
    assert_non_null(k);
    assert_string_equal(k, "\xf0\x9f\x98\x80");
    free(k);
}

/* A range above the load split threshold is marked hot at once, split
 * once it stayed hot for split_sustain_ms, at the weighted key, with the
 * reason naming the finder; a lopsided range is never split. */
static void test_hot_range_splits_at_weighted_key(void **state)
{
    struct fx *f = *state;
    static const char *const skew[] = {"a", "a", "a", "a", "b",
                                       "c", "d", "e", NULL};
    static const char *const lopsided[] = {"m", "m", "m", "m", "m",
                                           "m", "n", "o", NULL};
    const struct ms_decision *d;

    server(f, 1);
    server(f, 2);
    server(f, 3);
    range(f, 1, "", "l", 1, 3000);
    range(f, 2, "l", NULL, 2, 3000);
    policy(f, NULL);
    report(f, 1, 1, 3000, skew);
    report(f, 2, 2, 3000, lopsided);
    decide(f);
    assert_non_null(find(f, MS_DECIDE_HOT, 1));
    assert_non_null(find(f, MS_DECIDE_HOT, 2));
    assert_int_equal(count(f, MS_DECIDE_SPLIT), 0);
    f->now += 1000; /* hot for 1 s < split_sustain_ms (1.5 s) */
    report(f, 1, 1, 3000, skew);
    report(f, 2, 2, 3000, lopsided);
    decide(f);
    assert_int_equal(count(f, MS_DECIDE_SPLIT), 0);
    f->now += 1000;
    report(f, 1, 1, 3000, skew);
    report(f, 2, 2, 3000, lopsided);
    decide(f);
    d = find(f, MS_DECIDE_SPLIT, 1);
    assert_non_null(d);
    assert_string_equal(d->key, "b");
    assert_true(d->share > 0.49 && d->share < 0.51);
    assert_true(d->load >= 2999 && d->threshold == 2000);
    assert_non_null(strstr(d->reason, "weighted finder"));
    assert_null(find(f, MS_DECIDE_SPLIT, 2));

    /* Below the threshold: cool at once (no hysteresis), no split. */
    for (int i = 0; i < 3; i++) {
        f->now += 1000;
        report(f, 2, 2, 500, lopsided);
    }
    decide(f);
    assert_non_null(find(f, MS_DECIDE_COOL, 2));
}

/* ---- Tests: the store rebalancer ---- */

/* An overfull server sheds by a primary-role transfer of its hottest
 * range that fits an in-sync replica first; a range no replica can take
 * without going over, and a single-copy range, are then moved (replica
 * rebalancing) to the coolest server that stays under the threshold. */
static void test_overfull_sheds_transfer_then_move(void **state)
{
    struct fx *f = *state;
    const struct ms_decision *t, *m;

    f->cfg.split_eps = 100000; /* no load-based splits in this test */
    server(f, 1);
    server(f, 2);
    server(f, 3);
    replicate(f, range(f, 1, "", "b", 1, 1500));
    replicate(f, range(f, 2, "b", "c", 1, 1000));
    range(f, 3, "c", "d", 1, 800);
    range(f, 4, "d", "e", 2, 100);
    range(f, 5, "e", NULL, 3, 100);
    policy(f, "interval_ms=1000");
    /* mean 1167, overfull above 1283, underfull below 1050; server 1 at
     * 3300. Range 1 (1500/s) would push any replica over 1283: it goes
     * to the replica phase, where every server holds it already. */
    rebalance(f);
    t = find(f, MS_DECIDE_TRANSFER, 2);
    assert_non_null(t);
    assert_int_equal(t->server_id, 2);
    assert_true(t->src_load > 3299 && t->src_load < 3301);
    assert_true(t->threshold > 1283 && t->threshold < 1284);
    assert_non_null(strstr(t->reason, "lease transfer"));
    m = find(f, MS_DECIDE_MOVE, 3);
    assert_non_null(m);
    assert_int_equal(m->server_id, 3); /* server 2 just took a range */
    assert_int_equal(m->src_id, 0);
    assert_non_null(strstr(m->reason, "replica rebalance"));
    assert_true(index_of(f, t) < index_of(f, m));
    assert_null(find(f, MS_DECIDE_TRANSFER, 1));
    assert_null(find(f, MS_DECIDE_MOVE, 1));
    assert_int_equal(count(f, MS_DECIDE_TRANSFER) + count(f, MS_DECIDE_MOVE),
                     2);

    /* Not between two runs of the rebalancer. */
    f->now += 500;
    decide(f);
    assert_int_equal(count(f, MS_DECIDE_TRANSFER) + count(f, MS_DECIDE_MOVE),
                     0);
}

/* A replicated range whose load no in-sync replica can take moves its
 * primary copy to a server holding none, when one exists. */
static void test_replicated_moves_primary_copy(void **state)
{
    struct fx *f = *state;
    const struct ms_decision *m;
    struct ms_range_view *r;

    f->cfg.split_eps = 100000;
    server(f, 1);
    server(f, 2);
    server(f, 3);
    server(f, 4);
    r = range(f, 1, "", "b", 1, 600);
    replicate(f, r);
    range(f, 2, "b", "c", 1, 600);
    range(f, 3, "c", "d", 2, 500);
    range(f, 4, "d", NULL, 3, 500);
    policy(f, "interval_ms=1000");
    /* mean 550, overfull above 650, underfull below 450 (min_diff 100
     * is more than 10%). Server 1 at 1200. Range 1 (600/s): its replicas 2 and
     * 3 are not underfull and would pass the mean; server 4 (empty, underfull)
     * holds no copy and stays at 600 <= 650: replica rebalance of the primary
     * copy. */
    rebalance(f);
    m = find(f, MS_DECIDE_MOVE, 1);
    assert_non_null(m);
    assert_int_equal(m->server_id, 4);
    assert_int_equal(m->src_id, 0);
    assert_null(find(f, MS_DECIDE_TRANSFER, 0));
}

/* Servers within the threshold of the mean (10%, at least min_diff) are
 * left alone. */
static void test_no_action_within_threshold(void **state)
{
    struct fx *f = *state;

    f->cfg.split_eps = 100000;
    server(f, 1);
    server(f, 2);
    server(f, 3);
    range(f, 1, "", "b", 1, 1000);
    range(f, 2, "b", "c", 2, 1080);
    range(f, 3, "c", "d", 3, 950);
    range(f, 4, "d", NULL, 1, 100);
    policy(f, "interval_ms=1000");
    /* mean 1043, overfull above 1147: server 1 at 1100 is not. */
    rebalance(f);
    assert_int_equal(f->nd, 0);

    /* At 5% and no minimum, server 1 is overfull (above 1095): range 1
     * (1000/s) would leave it below the underfull level (991), range 4
     * (100/s) fits the underfull server 3 (950 -> 1050 <= 1095). */
    policy(f, "interval_ms=1000,threshold_pct=5,min_diff=0");
    rebalance(f);
    assert_int_equal(count(f, MS_DECIDE_MOVE), 1);
    assert_int_equal(find(f, MS_DECIDE_MOVE, 4)->server_id, 3);
}

/* A range moved within move_cooldown_ms is not moved again, even when it
 * is the only range that would help; after the cooldown it moves. */
static void test_no_thrash(void **state)
{
    struct fx *f = *state;
    struct ms_range_view *r2;
    const struct ms_decision *m;

    f->cfg.split_eps = 100000;
    server(f, 1);
    server(f, 2);
    server(f, 3);
    range(f, 1, "", "b", 1, 900);
    r2 = range(f, 2, "b", "c", 1, 600);
    range(f, 3, "c", NULL, 3, 0);
    /* mean 500, overfull above 600, underfull below 400: range 1
     * (900/s) would push an empty server over 600; range 2 fits. */
    r2->move_ms = f->now - 1000; /* it just arrived here */
    policy(f, "interval_ms=1000");
    rebalance(f);
    assert_int_equal(count(f, MS_DECIDE_MOVE), 0);
    f->now += f->cfg.move_cooldown_ms;
    decide(f);
    m = find(f, MS_DECIDE_MOVE, 2);
    assert_non_null(m);
    assert_int_equal(m->server_id, 2);
}

/* max_moves bounds what one run starts, counting moves in flight. */
static void test_max_moves(void **state)
{
    struct fx *f = *state;

    f->cfg.split_eps = 100000;
    f->cfg.max_moves = 2;
    server(f, 1);
    server(f, 2);
    server(f, 3);
    range(f, 1, "", "b", 1, 300);
    range(f, 2, "b", "c", 1, 300);
    range(f, 3, "c", "d", 1, 300);
    range(f, 4, "d", NULL, 1, 300);
    f->moves = 1;
    policy(f, "interval_ms=1000");
    rebalance(f);
    assert_int_equal(count(f, MS_DECIDE_MOVE), 1);
}

/* ---- Tests: the merge queue ---- */

/* Adjacent single-copy ranges on one server whose summed demand stayed
 * below half the split threshold for merge_sustain_ms are merged, one
 * pair per call; a pair above it, or on two servers, is not. */
static void test_merge_cold_neighbours(void **state)
{
    struct fx *f = *state;
    const struct ms_decision *d;

    f->cfg.merge_sustain_ms = 5000;
    server(f, 1);
    server(f, 2);
    range(f, 1, "", "b", 1, 300);
    range(f, 2, "b", "c", 1, 400); /* 700 < 1000 = 2000 / 2 */
    range(f, 3, "c", "d", 1, 700); /* 1100 with range 2, 1400 with 4 */
    range(f, 4, "d", "e", 1, 700);
    range(f, 5, "e", NULL, 2, 10); /* cold but on another server */
    policy(f, "interval_ms=100000");
    decide(f);
    assert_int_equal(count(f, MS_DECIDE_MERGE), 0);
    f->now += 4000;
    decide(f);
    assert_int_equal(count(f, MS_DECIDE_MERGE), 0);
    f->now += 1000;
    decide(f);
    assert_int_equal(count(f, MS_DECIDE_MERGE), 1);
    d = find(f, MS_DECIDE_MERGE, 1);
    assert_non_null(d);
    assert_int_equal(d->range_id2, 2);
    assert_true(d->threshold == 1000);
    assert_non_null(strstr(d->reason, "merge queue"));

    /* Recently split: not merged (merge_after_split_ms). */
    f->rv[0].split_ms = f->now - 1000;
    f->now += 1000;
    decide(f);
    assert_int_equal(count(f, MS_DECIDE_MERGE), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_create_and_options, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_finder_key, setup, teardown),
        cmocka_unit_test_setup_teardown(test_finder_utf16_order, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_hot_range_splits_at_weighted_key,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_overfull_sheds_transfer_then_move,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_replicated_moves_primary_copy,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_no_action_within_threshold, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_no_thrash, setup, teardown),
        cmocka_unit_test_setup_teardown(test_max_moves, setup, teardown),
        cmocka_unit_test_setup_teardown(test_merge_cold_neighbours, setup,
                                        teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
