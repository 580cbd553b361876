/* The load model and the default policy on synthetic loads: no master, no
 * network, the clock is whatever the test says. Each test builds a view
 * (servers, ranges, loads reported through ms_load_report) and checks the
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

#include <unistd.h>

#include "ms_events.h"
#include "ms_load.h"
#include "ms_policy.h"
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

static void policy(struct fx *f)
{
    if (f->pol.ops) {
        ms_policy_destroy(&f->pol);
    }
    assert_int_equal(ms_policy_create("default", &f->cfg, &f->pol), 0);
}

static void server(struct fx *f, uint64_t id, bool up)
{
    struct ms_server_view *s = &f->sv[f->ns++];
    memset(s, 0, sizeof(*s));
    s->id = id;
    s->up = up;
}

/* Reports one second of @eps entities/s for range @id, sampled from @pks
 * (NULL-terminated; every key once per report). */
static void report(struct fx *f,
                   uint64_t id,
                   uint64_t server,
                   double eps,
                   const char *const *pks,
                   uint64_t bytes)
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
    l.key_count = bytes / 100;
    l.key_bytes = bytes;
    l.n_sample_pks = n;
    l.sample_pks = (char **)pks;
    ms_load_report(f->ld, server, &l, 0, 0, f->now);
}

/* A range [low, high) (high NULL = +inf) of table 1, born long ago. */
static struct ms_range_view *range(struct fx *f,
                                   uint64_t id,
                                   const char *low,
                                   const char *high,
                                   uint64_t server)
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
    r->split_ms = 0;
    return r;
}

/* Runs decide at f->now; the decisions land in f->d. */
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

/* Reports @eps for every second from now to now + @secs (inclusive) and
 * runs decide after each. */
static void run(struct fx *f,
                uint64_t id,
                uint64_t server,
                double eps,
                const char *const *pks,
                int secs)
{
    for (int i = 0; i <= secs; i++) {
        report(f, id, server, eps, pks, 1000);
        decide(f);
        if (i < secs) {
            f->now += 1000;
        }
    }
}

static const char *const PKS[] = {"a", "b", "c", "d", "e", "f", "g", "h", NULL};

/* ---- Tests: load model ---- */

/* Rates are per second of the reported interval and smoothed with the
 * configured time constant; a step shows within one report. */
static void test_load_rates(void **state)
{
    struct fx *f = *state;
    const struct ms_load_range *l;
    Rt__RangeLoad x = RT__RANGE_LOAD__INIT;
    report(f, 7, 1, 1000, NULL, 0);
    l = ms_load_find(f->ld, 7);
    assert_non_null(l);
    assert_true(l->avg.ent_s > 999 && l->avg.ent_s < 1001); /* first: as is */
    f->now += 1000;
    report(f, 7, 1, 3000, NULL, 0);
    /* alpha = 1 - e^-1 = 0.632: 1000 + 0.632 * 2000 = 2264 */
    assert_true(l->avg.ent_s > 2200 && l->avg.ent_s < 2330);
    assert_true(l->cur.ent_s > 2999 && l->cur.ent_s < 3001);
    /* Half-second interval: counters are per interval. */
    x.range_id = 7;
    x.entities = 500;
    x.throttled = 100;
    x.exec_us = 250000;
    x.interval_ms = 500;
    f->now += 500;
    ms_load_report(f->ld, 1, &x, 0, 0, f->now);
    assert_true(l->cur.ent_s > 999 && l->cur.ent_s < 1001);
    assert_true(l->cur.thr_s > 199 && l->cur.thr_s < 201);
    assert_true(l->cur.exec_frac > 0.49 && l->cur.exec_frac < 0.51);
    assert_true(ms_load_demand(&l->cur) > 1199);
    ms_load_forget(f->ld, 7);
    assert_null(ms_load_find(f->ld, 7));
}

/* The split key is the sampled PK that halves the sampled load; keys
 * outside the range and stale samples do not count; one PK, or all the
 * load on the low bound, cannot be split. */
static void test_split_key(void **state)
{
    struct fx *f = *state;
    static const char *const skew[] = {"a", "b", "c", "x", "x",
                                       "x", "x", "x", "y", NULL};
    static const char *const one[] = {"k", "k", "k", NULL};
    static const char *const low[] = {"m", "m", "m", "q", NULL};
    const struct ms_load_range *l;
    double share = 0;
    char *k;

    report(f, 1, 1, 900, PKS, 0);
    l = ms_load_find(f->ld, 1);
    k = ms_load_split_key(l, "", NULL, f->now, &share);
    assert_string_equal(k, "e"); /* a b c d | e f g h */
    assert_true(share > 0.49 && share < 0.51);
    free(k);
    /* Restricted to [c, g): c d e f -> e. */
    k = ms_load_split_key(l, "c", "g", f->now, NULL);
    assert_string_equal(k, "e");
    free(k);
    /* Stale samples are ignored. */
    assert_null(ms_load_split_key(l, "", NULL, f->now + 20000, NULL));

    /* Weighted: most load on x: the best cut is at x (3 left, 6 right)
     * rather than y (8 left, 1 right). */
    report(f, 2, 1, 900, skew, 0);
    k = ms_load_split_key(ms_load_find(f->ld, 2), "", NULL, f->now, &share);
    assert_string_equal(k, "x");
    assert_true(share > 0.3 && share < 0.35);
    free(k);

    /* One PartitionKey: never split inside it. */
    report(f, 3, 1, 900, one, 0);
    assert_null(
        ms_load_split_key(ms_load_find(f->ld, 3), "", NULL, f->now, NULL));
    /* Load on the low bound and one other key: the cut is that key and it
     * is strictly above low. */
    report(f, 4, 1, 900, low, 0);
    k = ms_load_split_key(ms_load_find(f->ld, 4), "m", NULL, f->now, NULL);
    assert_string_equal(k, "q");
    free(k);
    /* All on low: nothing. */
    assert_null(
        ms_load_split_key(ms_load_find(f->ld, 4), "m", "q", f->now, NULL));
    /* Unknown range: nothing. */
    assert_null(ms_load_split_key(NULL, "", NULL, f->now, NULL));
}

/* Children of a split inherit the parent's load in proportion of the
 * sampled load on each side, and its samples; a merge sums. */
static void test_load_split_merge(void **state)
{
    struct fx *f = *state;
    static const char *const pk[] = {"a", "b", "c", "x", NULL};
    const struct ms_load_range *l, *r, *m;
    report(f, 1, 3, 4000, pk, 4000);
    ms_load_split(f->ld, 1, "c", 10, 11);
    assert_null(ms_load_find(f->ld, 1));
    l = ms_load_find(f->ld, 10);
    r = ms_load_find(f->ld, 11);
    assert_true(l->estimated && r->estimated);
    assert_int_equal(l->server_id, 3);
    assert_true(l->avg.ent_s > 1999 && l->avg.ent_s < 2001); /* a b | c x */
    assert_true(r->avg.ent_s > 1999 && r->avg.ent_s < 2001);
    assert_int_equal(l->key_bytes + r->key_bytes, 4000);
    assert_int_equal(l->nsamples, 2);
    assert_int_equal(r->nsamples, 2);
    ms_load_merge(f->ld, 10, 11, 12);
    m = ms_load_find(f->ld, 12);
    assert_non_null(m);
    assert_null(ms_load_find(f->ld, 10));
    assert_true(m->avg.ent_s > 3999 && m->avg.ent_s < 4001);
    assert_int_equal(m->key_bytes, 4000);
    assert_int_equal(m->nsamples, 4);
}

/* History frames keep each range's demand and bounds; at most
 * MS_LOAD_HISTORY. The bounds of a range no kept 1 s frame mentions stay
 * while the 10 s history holds it (test_ms_load.c has the rest). */
static void test_history(void **state)
{
    struct fx *f = *state;
    struct ms_load_frame_range fr[2] = {{1, 1, "", "m", 1},
                                        {2, 1, "m", NULL, 2}};
    const struct ms_load_frame *fm;
    report(f, 1, 1, 500, NULL, 0);
    ms_load_frame(f->ld, 1000, fr, 2);
    assert_int_equal(ms_load_nframes(f->ld), 1);
    fm = ms_load_frame_at(f->ld, 0);
    assert_int_equal(fm->ncells, 2);
    assert_true(fm->cells[0].demand > 499);
    assert_string_equal(fm->cells[0].b->high, "m");
    assert_null(fm->cells[1].b->high);
    assert_int_equal(fm->nservers, 2);
    assert_int_equal(ms_load_nbounds(f->ld), 2);
    for (int i = 0; i < MS_LOAD_HISTORY + 5; i++) {
        ms_load_frame(f->ld, 2000 + (uint64_t)i, &fr[1], 1);
    }
    assert_int_equal(ms_load_nframes(f->ld), MS_LOAD_HISTORY);
    /* range 1 aged out of the 1 s ring, not of the 10 s bucket */
    assert_int_equal(ms_load_nbounds(f->ld), 2);
    assert_int_equal(ms_load_frame_at(f->ld, 0)->unix_ms, 2005);
}

/* ---- Tests: policy ---- */

/* A range is marked hot once when its demand crosses the threshold, stays
 * hot down to hot_exit_pct% of it (hysteresis), then is marked cool. */
static void test_hot_hysteresis(void **state)
{
    struct fx *f = *state;
    f->cfg.split_sustain_ms = 60000; /* no split in this test */
    policy(f);
    server(f, 1, true);
    range(f, 1, "", NULL, 1);
    run(f, 1, 1, 1000, PKS, 2);
    assert_int_equal(f->nd, 0);
    report(f, 1, 1, 6000, PKS, 0);
    decide(f);
    assert_non_null(find(f, MS_DECIDE_HOT, 1));
    assert_true(find(f, MS_DECIDE_HOT, 1)->load >= 2000);
    assert_true(find(f, MS_DECIDE_HOT, 1)->reason[0]);
    /* Still hot down to 1500 (>= 70% of 2000): no new mark. */
    for (int i = 0; i < 6; i++) {
        f->now += 1000;
        report(f, 1, 1, 1500, PKS, 0);
        decide(f);
        assert_null(find(f, MS_DECIDE_HOT, 1));
        assert_null(find(f, MS_DECIDE_COOL, 1));
    }
    /* Below 1400: cool, once. */
    f->now += 1000;
    report(f, 1, 1, 500, PKS, 0);
    decide(f);
    assert_non_null(find(f, MS_DECIDE_COOL, 1));
    f->now += 1000;
    report(f, 1, 1, 500, PKS, 0);
    decide(f);
    assert_null(find(f, MS_DECIDE_COOL, 1));
    /* Up again: hot again. */
    f->now += 1000;
    report(f, 1, 1, 9000, PKS, 0);
    decide(f);
    assert_non_null(find(f, MS_DECIDE_HOT, 1));
}

/* A hot range splits only after split_sustain_ms, at the load median;
 * a new range (born within split_cooldown_ms) waits. */
static void test_split_sustain_and_cooldown(void **state)
{
    struct fx *f = *state;
    const struct ms_decision *d;
    policy(f);
    server(f, 1, true);
    server(f, 2, true);
    range(f, 1, "", NULL, 1);
    run(f, 1, 1, 5000, PKS, 1); /* hot at t, 1 s later: not yet */
    assert_null(find(f, MS_DECIDE_SPLIT, 0));
    f->now += 1000;
    report(f, 1, 1, 5000, PKS, 0);
    decide(f);
    d = find(f, MS_DECIDE_SPLIT, 1);
    assert_non_null(d);
    assert_string_equal(d->key, "e");
    assert_true(d->load > 4000);
    assert_true(d->share > 0.4 && d->share < 0.6);
    /* Never a move of it in the same round. */
    assert_null(find(f, MS_DECIDE_MOVE, 1));

    /* The same load on a range born 1 s ago: no split yet. */
    f->nr = 0;
    ms_load_forget(f->ld, 1);
    range(f, 2, "", NULL, 1)->born_ms = f->now;
    run(f, 2, 1, 5000, PKS, 2);
    assert_null(find(f, MS_DECIDE_SPLIT, 0));
    f->now += 1000;
    report(f, 2, 1, 5000, PKS, 0);
    decide(f);
    assert_non_null(find(f, MS_DECIDE_SPLIT, 2));
}

/* A split must help: with one server, or every server as loaded, a hot
 * range stays whole — unless its own per-range cap holds it back. */
static void test_split_only_when_it_helps(void **state)
{
    struct fx *f = *state;
    policy(f);
    server(f, 1, true);
    range(f, 1, "", NULL, 1);
    run(f, 1, 1, 5000, PKS, 4);
    assert_null(find(f, MS_DECIDE_SPLIT, 0));
    /* Three servers, each with an equally hot range: still nothing. */
    server(f, 2, true);
    server(f, 3, true);
    f->rv[0].high = "i";
    range(f, 2, "i", "q", 2);
    range(f, 3, "q", NULL, 3);
    for (int i = 0; i < 4; i++) {
        f->now += 1000;
        report(f, 1, 1, 5000, PKS, 0);
        report(f, 2, 2, 5000, (const char *const[]){"j", "k", "l", NULL}, 0);
        report(f, 3, 3, 5000, (const char *const[]){"r", "s", "t", NULL}, 0);
        decide(f);
        assert_null(find(f, MS_DECIDE_SPLIT, 0));
        assert_null(find(f, MS_DECIDE_MOVE, 0));
    }
    /* Server 3 idles: now a half of range 1 or 2 could go there. */
    for (int i = 0; i < 6; i++) {
        f->now += 1000;
        report(f, 1, 1, 5000, PKS, 0);
        report(f, 2, 2, 5000, (const char *const[]){"j", "k", "l", NULL}, 0);
        report(f, 3, 3, 0, NULL, 0);
        decide(f);
        if (find(f, MS_DECIDE_SPLIT, 0)) {
            break;
        }
    }
    assert_non_null(find(f, MS_DECIDE_SPLIT, 0));

    /* One server, but the range is at its per-range cap: split. */
    f->ns = 0;
    f->nr = 0;
    policy(f);
    server(f, 1, true);
    f->sv[0].max_range_eps = 1000;
    range(f, 1, "", NULL, 1);
    run(f, 1, 1, 1000, PKS, 3);
    assert_non_null(find(f, MS_DECIDE_SPLIT, 1));
}

/* A hot range whose load is all on one PartitionKey is never split; a
 * busy range is not split; the per-table cap holds. */
static void test_no_split_inside_pk(void **state)
{
    struct fx *f = *state;
    static const char *const one[] = {"hot", "hot", "hot", NULL};
    policy(f);
    server(f, 1, true);
    range(f, 1, "", NULL, 1);
    run(f, 1, 1, 9000, one, 5);
    assert_non_null(ms_load_find(f->ld, 1));
    assert_null(find(f, MS_DECIDE_SPLIT, 0));

    range(f, 2, "z", NULL, 1)->busy = true;
    f->rv[0].high = "z";
    run(f, 2, 1, 9000, (const char *const[]){"z1", "z2", "z3", NULL}, 4);
    assert_null(find(f, MS_DECIDE_SPLIT, 0));

    f->rv[1].busy = false;
    f->cfg.split_max_ranges = 2;
    policy(f);
    run(f, 2, 1, 9000, (const char *const[]){"z1", "z2", "z3", NULL}, 4);
    assert_null(find(f, MS_DECIDE_SPLIT, 0));
}

/* The threshold follows a lower per-range cap: demand counts refused
 * requests, so a throttled range still looks hot. */
static void test_threshold_with_caps(void **state)
{
    struct fx *f = *state;
    Rt__RangeLoad l = RT__RANGE_LOAD__INIT;
    policy(f);
    assert_true(ms_policy_hot_threshold(&f->cfg, 0) == 2000);
    assert_true(ms_policy_hot_threshold(&f->cfg, 1000) == 900);
    assert_true(ms_policy_hot_threshold(&f->cfg, 5000) == 2000);
    server(f, 1, true);
    f->sv[0].max_range_eps = 1000;
    range(f, 1, "", NULL, 1);
    l.range_id = 1;
    l.entities = 800;
    l.throttled = 400;
    l.interval_ms = 1000;
    ms_load_report(f->ld, 1, &l, 0, 1000, f->now);
    decide(f);
    assert_non_null(find(f, MS_DECIDE_HOT, 1));
}

/* An overloaded server gives the range that best evens it out to the
 * least-loaded live, non-draining server; down and draining servers are
 * never targets. */
static void test_move(void **state)
{
    struct fx *f = *state;
    const struct ms_decision *d;
    policy(f);
    server(f, 1, true);
    server(f, 2, false);
    server(f, 3, true);
    server(f, 4, true);
    f->sv[3].draining = true;
    range(f, 1, "", "m", 1);
    range(f, 2, "m", "t", 1);
    range(f, 3, "t", NULL, 3);
    report(f, 1, 1, 1500, NULL, 0);
    report(f, 2, 1, 1200, NULL, 0);
    report(f, 3, 3, 100, NULL, 0);
    decide(f);
    /* mean over 1 and 3 = 1400; server 1 = 2700 > 1750. Moving range 1
     * (1500) makes max(1200, 1600) = 1600, range 2 max(1500, 1300). */
    d = find(f, MS_DECIDE_MOVE, 0);
    assert_non_null(d);
    assert_int_equal(d->range_id, 2);
    assert_int_equal(d->server_id, 3);
    assert_true(d->src_load > 2699 && d->src_load < 2701);
    assert_true(d->mean_load > 1399 && d->mean_load < 1401);
    assert_int_equal(count(f, MS_DECIDE_MOVE), 1);

    /* Within tolerance: nothing. */
    for (int i = 0; i < 10; i++) {
        report(f, 1, 1, 700, NULL, 0);
        report(f, 2, 1, 700, NULL, 0);
        report(f, 3, 3, 1300, NULL, 0);
    }
    decide(f);
    assert_null(find(f, MS_DECIDE_MOVE, 0));
}

/* Replicated ranges are split when hot (their halves keep the replica
 * set) but never merged or moved (not supported yet): the move takes
 * another range, and with only replicated ranges on the loaded server
 * nothing moves. */
static void test_replicated_skipped(void **state)
{
    struct fx *f = *state;
    const struct ms_decision *d;
    policy(f);
    server(f, 1, true);
    server(f, 2, true);
    range(f, 1, "", NULL, 1)->replicated = true;
    run(f, 1, 1, 5000, PKS, 1);
    f->now += 1000;
    report(f, 1, 1, 5000, PKS, 0);
    decide(f);
    assert_non_null(find(f, MS_DECIDE_SPLIT, 1));
    assert_null(find(f, MS_DECIDE_MOVE, 0));

    /* Moves: the replicated range 2 would be the better one to move. */
    f->nr = 0;
    ms_load_forget(f->ld, 1);
    f->ns = 0;
    server(f, 1, true);
    server(f, 3, true);
    range(f, 1, "", "m", 1);
    range(f, 2, "m", "t", 1)->replicated = true;
    range(f, 3, "t", NULL, 3);
    report(f, 1, 1, 1500, NULL, 0);
    report(f, 2, 1, 1200, NULL, 0);
    report(f, 3, 3, 100, NULL, 0);
    decide(f);
    d = find(f, MS_DECIDE_MOVE, 0);
    assert_non_null(d);
    assert_int_equal(d->range_id, 1);
    f->rv[0].replicated = true;
    decide(f);
    assert_null(find(f, MS_DECIDE_MOVE, 0));

    /* Merges: two cold neighbours, one of them replicated. */
    f->nr = 0;
    f->cfg.merge_sustain_ms = 0;
    f->cfg.merge_after_split_ms = 0;
    policy(f);
    range(f, 4, "", "g", 1);
    range(f, 5, "g", NULL, 1)->replicated = true;
    report(f, 4, 1, 1, NULL, 100);
    report(f, 5, 1, 1, NULL, 100);
    decide(f);
    f->now += 1000;
    decide(f);
    assert_null(find(f, MS_DECIDE_MERGE, 0));
    f->rv[1].replicated = false;
    decide(f);
    assert_non_null(find(f, MS_DECIDE_MERGE, 4));
}

/* Primaries first (docs/DESIGN-replication.md §9.4): a server that is
 * primary of three replicated ranges hands the primary role of one to the
 * least loaded member of its ISR (no move is decided in that call); a
 * target outside the ISR, draining, or cooling down is never chosen; a
 * range transferred recently stays; the "none" policy decides nothing. */
static void test_transfer_primaries(void **state)
{
    struct fx *f = *state;
    const struct ms_decision *d;
    static const uint64_t isr123[] = {1, 2, 3}, isr13[] = {1, 3};
    struct ms_policy none;
    policy(f);
    server(f, 1, true);
    server(f, 2, true);
    server(f, 3, true);
    for (uint64_t id = 1; id <= 3; id++) {
        struct ms_range_view *r = range(f, id,
                                        id == 1   ? ""
                                        : id == 2 ? "g"
                                                  : "p",
                                        id == 1   ? "g"
                                        : id == 2 ? "p"
                                                  : NULL,
                                        1);
        r->replicated = true;
        r->isr = isr123;
        r->nisr = 3;
        report(f, id, 1, 1000, NULL, 0);
    }
    range(f, 4, "", NULL, 3)->table_id = 2; /* RF 1, idle */
    report(f, 4, 3, 10, NULL, 0);
    decide(f);
    /* Server 1: 3000/s, mean 1003/s: one range's primary role goes to
     * server 2 (0/s), the least loaded in-sync replica. */
    assert_int_equal(count(f, MS_DECIDE_TRANSFER), 1);
    assert_int_equal(count(f, MS_DECIDE_MOVE), 0);
    d = find(f, MS_DECIDE_TRANSFER, 0);
    assert_int_equal(d->server_id, 2);
    assert_true(d->src_load > 2999 && d->src_load < 3001);
    assert_non_null(strstr(d->reason, "takes the primary role"));

    /* Server 2 outside every ISR but range 3's {1, 3}: server 3. */
    for (size_t i = 0; i < 3; i++) {
        f->rv[i].isr = isr13;
        f->rv[i].nisr = 2;
    }
    decide(f);
    d = find(f, MS_DECIDE_TRANSFER, 0);
    assert_non_null(d);
    assert_int_equal(d->server_id, 3);
    /* ... unless it is draining, or cooling down after a move. */
    f->sv[2].draining = true;
    decide(f);
    assert_null(find(f, MS_DECIDE_TRANSFER, 0));
    f->sv[2].draining = false;
    f->sv[2].move_ms = f->now - 100;
    decide(f);
    assert_null(find(f, MS_DECIDE_TRANSFER, 0));
    f->sv[2].move_ms = 0;
    /* A range transferred recently stays; the others may go. */
    for (size_t i = 0; i < 3; i++) {
        f->rv[i].move_ms = f->now - 100;
    }
    decide(f);
    assert_null(find(f, MS_DECIDE_TRANSFER, 0));
    f->rv[1].move_ms = 0;
    decide(f);
    d = find(f, MS_DECIDE_TRANSFER, 0);
    assert_non_null(d);
    assert_int_equal(d->range_id, 2);

    /* "none" never decides. */
    struct ms_cluster_view v = {.servers = f->sv,
                                .nservers = f->ns,
                                .ranges = f->rv,
                                .nranges = f->nr,
                                .now_ms = f->now};
    assert_int_equal(ms_policy_create("none", NULL, &none), 0);
    assert_int_equal(ms_policy_decide(&none, &v, f->d + 32, 32), 0);
    ms_policy_destroy(&none);
}

/* Replica counts (the fourth server of an RF-3 cluster of three): one
 * secondary copy moves from a fullest server to the empty one, the
 * smallest candidate range first, never a primary's copy, one per call,
 * with a reason; nothing when counts are at most one apart, a range is
 * not healthy (ISR short of rf), a move or transfer is already decided
 * or too many are in flight, or the target is cooling down; the zone
 * rule picks a zone that holds fewer of the kept copies. */
static void test_replica_balance(void **state)
{
    struct fx *f = *state;
    const struct ms_decision *d;
    static const uint64_t set[] = {1, 2, 3};
    policy(f);
    for (uint64_t id = 1; id <= 4; id++) {
        server(f, id, true);
        f->sv[id - 1].nreplicas = id == 4 ? 0 : 4;
    }
    for (uint64_t id = 1; id <= 4; id++) {
        struct ms_range_view *r = range(f, id, "", NULL, 1 + (id - 1) % 3);
        r->table_id = id;
        r->replicated = true;
        r->isr = r->replicas = set;
        r->nisr = r->nreplicas = 3;
        r->rf = 3;
        report(f, id, r->server_id, 1, NULL, id == 3 ? 1000 : 5000);
    }
    decide(f);
    assert_int_equal(count(f, MS_DECIDE_MOVE), 1);
    d = find(f, MS_DECIDE_MOVE, 0);
    assert_int_equal(d->server_id, 4);
    /* Server 1 (the lowest id of the fullest) gives range 3's copy: the
     * smallest range it holds a secondary copy of. */
    assert_int_equal(d->src_id, 1);
    assert_int_equal(d->range_id, 3);
    assert_non_null(strstr(d->reason, "replica counts"));

    /* Range 3 not healthy: the next smallest of server 1's (2 or 4). */
    f->rv[2].nisr = 2;
    decide(f);
    d = find(f, MS_DECIDE_MOVE, 0);
    assert_non_null(d);
    assert_int_equal(d->src_id, 1);
    assert_true(d->range_id == 2 || d->range_id == 4);
    f->rv[2].nisr = 3;

    /* At most one apart: nothing. */
    f->sv[3].nreplicas = 3;
    decide(f);
    assert_int_equal(count(f, MS_DECIDE_MOVE), 0);
    f->sv[3].nreplicas = 0;
    /* The target cooling down, or max_moves in flight: nothing. */
    f->sv[3].move_ms = f->now - 100;
    decide(f);
    assert_int_equal(count(f, MS_DECIDE_MOVE), 0);
    f->sv[3].move_ms = 0;
    f->moves = f->cfg.max_moves;
    decide(f);
    assert_int_equal(count(f, MS_DECIDE_MOVE), 0);
    f->moves = 0;

    /* Zones: servers 1 and 4 in z1, 2 in z2, 3 in z3: server 1's copy
     * may go to 4 (z1 keeps its copy). With 4 in z2 it may not (z1
     * would hold none, z2 two): server 2's copy goes instead. */
    f->sv[0].zone = f->sv[3].zone = "z1";
    f->sv[1].zone = "z2";
    f->sv[2].zone = "z3";
    decide(f);
    d = find(f, MS_DECIDE_MOVE, 0);
    assert_non_null(d);
    assert_int_equal(d->server_id, 4);
    assert_int_equal(d->src_id, 1);
    f->sv[3].zone = "z2"; /* now 4 is in z2: server 1's copy stays */
    decide(f);
    d = find(f, MS_DECIDE_MOVE, 0);
    assert_non_null(d);
    assert_int_not_equal(d->src_id, 1);
    assert_int_equal(d->server_id, 4);
}

/* Cool-downs: a server that just took part in a move, or is moving, is
 * left alone; a range moved recently does not move again. */
static void test_move_cooldowns(void **state)
{
    struct fx *f = *state;
    policy(f);
    server(f, 1, true);
    server(f, 2, true);
    range(f, 1, "", "m", 1);
    range(f, 2, "m", NULL, 1);
    report(f, 1, 1, 1500, NULL, 0);
    report(f, 2, 1, 1500, NULL, 0);
    f->sv[1].move_ms = f->now - 500; /* target cooling down */
    decide(f);
    assert_null(find(f, MS_DECIDE_MOVE, 0));
    f->sv[1].move_ms = f->now - 2500;
    f->sv[0].moving = 1; /* source busy with another move */
    decide(f);
    assert_null(find(f, MS_DECIDE_MOVE, 0));
    f->sv[0].moving = 0;
    f->rv[0].move_ms = f->now - 1000; /* range 1 moved a second ago */
    decide(f);
    assert_non_null(find(f, MS_DECIDE_MOVE, 2));
    assert_null(find(f, MS_DECIDE_MOVE, 1));
}

/* The cap on moves in flight: none beyond max_moves, counting those
 * already running. */
static void test_move_cap(void **state)
{
    struct fx *f = *state;
    policy(f);
    for (uint64_t s = 1; s <= 4; s++) {
        server(f, s, true);
    }
    range(f, 1, "", "c", 1);
    range(f, 2, "c", "f", 1);
    range(f, 3, "f", "k", 2);
    range(f, 4, "k", NULL, 2);
    report(f, 1, 1, 3000, NULL, 0);
    report(f, 2, 1, 3000, NULL, 0);
    report(f, 3, 2, 3000, NULL, 0);
    report(f, 4, 2, 3000, NULL, 0);
    f->cfg.split_eps = 100000; /* not hot: only moves */
    policy(f);
    decide(f);
    assert_int_equal(count(f, MS_DECIDE_MOVE), 2);
    /* Two different targets. */
    assert_int_not_equal(f->d[0].server_id, f->d[1].server_id);
    f->moves = 1;
    decide(f);
    assert_int_equal(count(f, MS_DECIDE_MOVE), 1);
    f->moves = 2;
    decide(f);
    assert_int_equal(count(f, MS_DECIDE_MOVE), 0);
    f->cfg.max_moves = 1;
    policy(f);
    f->moves = 0;
    decide(f);
    assert_int_equal(count(f, MS_DECIDE_MOVE), 1);
}

/* A server whose load is one big range cannot be evened out by moving it:
 * the policy splits that range instead (then a half can move). */
static void test_balance_split(void **state)
{
    struct fx *f = *state;
    const struct ms_decision *d;
    f->cfg.split_eps = 100000;
    policy(f);
    server(f, 1, true);
    server(f, 2, true);
    range(f, 1, "", NULL, 1);
    /* Over the mean for less than split_sustain_ms: wait. */
    run(f, 1, 1, 1800, PKS, 1);
    assert_null(find(f, MS_DECIDE_MOVE, 0));
    assert_null(find(f, MS_DECIDE_SPLIT, 0));
    f->now += 1000;
    report(f, 1, 1, 1800, PKS, 0);
    decide(f);
    assert_null(find(f, MS_DECIDE_MOVE, 0));
    d = find(f, MS_DECIDE_SPLIT, 1);
    assert_non_null(d);
    assert_string_equal(d->key, "e");
    /* Too little load to bother: nothing. */
    report(f, 1, 1, 300, PKS, 0);
    f->now += 10000;
    report(f, 1, 1, 300, PKS, 0);
    decide(f);
    assert_int_equal(count(f, MS_DECIDE_SPLIT), 0);
}

/* Adjacent cold small ranges of one table on one server merge after
 * merge_sustain_ms; not if on two servers, too big, busy, split recently
 * or not cold long enough. */
static void test_merge(void **state)
{
    struct fx *f = *state;
    const struct ms_decision *d;
    f->cfg.merge_sustain_ms = 5000;
    f->cfg.merge_after_split_ms = 20000;
    f->cfg.merge_max_bytes = 10000;
    policy(f);
    server(f, 1, true);
    server(f, 2, true);
    range(f, 1, "", "g", 1);
    range(f, 2, "g", "p", 1);
    range(f, 3, "p", NULL, 2);
    for (int i = 0; i <= 4; i++) {
        report(f, 1, 1, 10, NULL, 1000);
        report(f, 2, 1, 10, NULL, 1000);
        report(f, 3, 2, 10, NULL, 1000);
        decide(f);
        assert_null(find(f, MS_DECIDE_MERGE, 0)); /* not cold long enough */
        f->now += 1000;
    }
    report(f, 1, 1, 10, NULL, 1000);
    decide(f);
    d = find(f, MS_DECIDE_MERGE, 1);
    assert_non_null(d);
    assert_int_equal(d->range_id2, 2);
    assert_int_equal(count(f, MS_DECIDE_MERGE), 1); /* never 2 and 3 */

    /* Recently split: no. */
    f->rv[1].split_ms = f->now - 1000;
    decide(f);
    assert_null(find(f, MS_DECIDE_MERGE, 0));
    f->rv[1].split_ms = f->now - 30000;
    /* Busy: no. */
    f->rv[0].busy = true;
    decide(f);
    assert_null(find(f, MS_DECIDE_MERGE, 0));
    f->rv[0].busy = false;
    /* Too big together: no. */
    report(f, 2, 1, 10, NULL, 9500);
    decide(f);
    assert_null(find(f, MS_DECIDE_MERGE, 0));
    report(f, 2, 1, 10, NULL, 1000);
    decide(f);
    assert_non_null(find(f, MS_DECIDE_MERGE, 1));
    /* A warm one resets the cold clock. */
    report(f, 2, 1, 500, NULL, 1000);
    decide(f);
    report(f, 2, 1, 10, NULL, 1000);
    report(f, 2, 1, 10, NULL, 1000);
    f->now += 1000;
    report(f, 2, 1, 10, NULL, 1000);
    decide(f);
    assert_null(find(f, MS_DECIDE_MERGE, 0));
    /* On different servers: never. */
    f->rv[1].server_id = 2;
    f->now += 10000;
    report(f, 2, 2, 10, NULL, 1000);
    decide(f);
    assert_null(find(f, MS_DECIDE_MERGE, 1));
    assert_non_null(find(f, MS_DECIDE_MERGE, 2)); /* 2 and 3 on server 2 */
}

/* Ranges on a down server get no decisions; "none" never decides. */
static void test_down_and_none(void **state)
{
    struct fx *f = *state;
    struct ms_policy none;
    struct ms_cluster_view v;
    policy(f);
    server(f, 1, false);
    server(f, 2, true);
    range(f, 1, "", NULL, 1);
    run(f, 1, 1, 9000, PKS, 4);
    assert_int_equal(f->nd, 0);
    assert_int_equal(ms_policy_create("none", &f->cfg, &none), 0);
    memset(&v, 0, sizeof(v));
    v.servers = f->sv;
    v.nservers = f->ns;
    v.ranges = f->rv;
    v.nranges = f->nr;
    v.now_ms = f->now;
    f->sv[0].up = true;
    assert_int_equal(ms_policy_decide(&none, &v, f->d, 64), 0);
    assert_int_equal(ms_policy_place(&none, &v), 1);
    ms_policy_destroy(&none);
}

/* ---- Tests: events ---- */

/* Events get increasing seqs and times, the ring keeps the last cap,
 * since/limit select, and a reopen reloads the file and goes on with the
 * sequence. */
static void test_events(void **state)
{
    char dir[64], path[128], err[256];
    struct ms_events *ev;
    char *j;
    (void)state;
    snprintf(dir, sizeof(dir), "/tmp/test_ms_events.XXXXXX");
    assert_non_null(mkdtemp(dir));
    assert_int_equal(ms_events_open(dir, 3, &ev, err), 0);
    for (int i = 1; i <= 5; i++) {
        json_t *e = json_object();
        json_object_set_new(e, "kind", json_string("split"));
        json_object_set_new(e, "n", json_integer(i));
        assert_int_equal(ms_events_add(ev, e), (uint64_t)i);
    }
    assert_int_equal(ms_events_last_seq(ev), 5);
    j = ms_events_json(ev, 0, 0, 0);
    assert_null(strstr(j, "\"n\":2"));
    assert_non_null(strstr(j, "\"seq\":3,\"unix_ms\":"));
    assert_non_null(strstr(j, "\"n\":5"));
    free(j);
    j = ms_events_json(ev, 4, 0, 0);
    assert_null(strstr(j, "\"n\":4"));
    assert_non_null(strstr(j, "\"n\":5"));
    free(j);
    j = ms_events_json(ev, 0, 0, 1);
    assert_null(strstr(j, "\"n\":4"));
    assert_non_null(strstr(j, "\"n\":5"));
    free(j);
    j = ms_events_json(ev, 0, (uint64_t)1 << 62, 0);
    assert_string_equal(j, "[]\n");
    free(j);
    ms_events_close(ev);

    /* Reopen with room for all: the file has all five. */
    assert_int_equal(ms_events_open(dir, 10, &ev, err), 0);
    assert_int_equal(ms_events_last_seq(ev), 5);
    j = ms_events_json(ev, 0, 0, 0);
    assert_non_null(strstr(j, "\"n\":1"));
    free(j);
    assert_int_equal(ms_events_add(ev, json_object()), 6);
    assert_int_equal(ms_events_added(ev), 1);
    ms_events_close(ev);
    snprintf(path, sizeof(path), "%s/%s", dir, MS_EVENTS_FILE);
    unlink(path);
    rmdir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_load_rates, setup, teardown),
        cmocka_unit_test_setup_teardown(test_split_key, setup, teardown),
        cmocka_unit_test_setup_teardown(test_load_split_merge, setup, teardown),
        cmocka_unit_test_setup_teardown(test_history, setup, teardown),
        cmocka_unit_test_setup_teardown(test_hot_hysteresis, setup, teardown),
        cmocka_unit_test_setup_teardown(test_split_sustain_and_cooldown, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_no_split_inside_pk, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_split_only_when_it_helps, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_threshold_with_caps, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_move, setup, teardown),
        cmocka_unit_test_setup_teardown(test_move_cooldowns, setup, teardown),
        cmocka_unit_test_setup_teardown(test_replica_balance, setup, teardown),
        cmocka_unit_test_setup_teardown(test_transfer_primaries, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_replicated_skipped, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_move_cap, setup, teardown),
        cmocka_unit_test_setup_teardown(test_balance_split, setup, teardown),
        cmocka_unit_test_setup_teardown(test_merge, setup, teardown),
        cmocka_unit_test_setup_teardown(test_down_and_none, setup, teardown),
        cmocka_unit_test(test_events),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
