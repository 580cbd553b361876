/* rt-sim's core: the simulated cluster under the master's default policy,
 * throttling arithmetic, the cost model's timing, workloads and
 * determinism (tools/rt-sim/rs_sim.h, rs_work.h). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "ms_trace.h"
#include "rs_report.h"
#include "rs_sim.h"
#include "rs_trace.h"
#include "rs_work.h"
#include "rt_err.h"

/* Helpers */

static struct rs_sim *mk(const char *policy,
                         size_t servers,
                         size_t ranges,
                         const char *workload,
                         double rate,
                         FILE *log)
{
    struct rs_cfg cfg;
    struct rs_work_cfg w;
    char err[256];
    struct rs_sim *s;
    rs_cfg_default(&cfg);
    cfg.servers = servers;
    cfg.ranges = ranges;
    cfg.tables = 1;
    cfg.keys = 100000;
    snprintf(cfg.policy, sizeof(cfg.policy), "%s", policy);
    assert_int_equal(rs_work_named(workload, cfg.keys, rate, 600, 7, &w), 0);
    s = rs_sim_create(&cfg, &w, log, err, sizeof(err));
    assert_non_null(s);
    return s;
}

static size_t count(const struct rs_sim *s, enum ms_decision_kind k)
{
    size_t n = 0;
    for (size_t i = 0; i < s->ndecs; i++) {
        n += s->decs[i].kind == k && s->decs[i].ok;
    }
    return n;
}

/* A trace of 2 servers and one range on server 1 taking @eps entities/s
 * with 8 samples of 100 PartitionKeys per heartbeat, @secs seconds,
 * written with the master's trace writer into @path. */
static void write_trace_born(const char *path,
                             double eps,
                             unsigned secs,
                             int64_t born_ago_ms)
{
    struct ms_trace_writer *w;
    char em[RT_ERRMSG_SIZE], kbuf[8][8];
    char *keys[8];
    Rt__TraceHeader hdr = RT__TRACE_HEADER__INIT;
    Rt__TracePolicyConfig pc = RT__TRACE_POLICY_CONFIG__INIT;
    Rt__TraceRecord rec = RT__TRACE_RECORD__INIT;
    Rt__TraceMap map = RT__TRACE_MAP__INIT;
    Rt__TraceServer sv[2], *svp[2];
    Rt__TraceRange rg = RT__TRACE_RANGE__INIT, *rgp = &rg;
    Rt__TraceTick tick = RT__TRACE_TICK__INIT;
    struct ms_policy_config dflt;
    unsigned n = 0;

    ms_policy_config_default(&dflt);
    assert_int_equal(ms_trace_writer_open(path, &w, em), 0);
    hdr.policy = "default";
    hdr.tick_ms = 500;
    hdr.start_unix_ms = 1800000000000ull;
    pc.split_eps = 300;
    pc.split_sustain_ms = dflt.split_sustain_ms;
    pc.split_cooldown_ms = dflt.split_cooldown_ms;
    pc.split_max_ranges = dflt.split_max_ranges;
    pc.hot_exit_pct = dflt.hot_exit_pct;
    pc.move_tolerance_pct = dflt.move_tolerance_pct;
    pc.move_min_eps = 100;
    pc.move_gain_pct = dflt.move_gain_pct;
    pc.move_cooldown_ms = dflt.move_cooldown_ms;
    pc.server_cooldown_ms = dflt.server_cooldown_ms;
    pc.max_moves = dflt.max_moves;
    pc.merge_eps = dflt.merge_eps;
    pc.merge_sustain_ms = dflt.merge_sustain_ms;
    pc.merge_max_bytes = dflt.merge_max_bytes;
    pc.merge_after_split_ms = dflt.merge_after_split_ms;
    hdr.policy_config = &pc;
    assert_int_equal(ms_trace_writer_segment(w, 0, &hdr, em), 0);
    for (int i = 0; i < 2; i++) {
        rt__trace_server__init(&sv[i]);
        sv[i].id = (uint64_t)i + 1;
        sv[i].up = true;
        svp[i] = &sv[i];
    }
    rg.id = 1;
    rg.table_id = 1;
    rg.table = "t";
    rg.low = "";
    rg.high = "";
    rg.high_inf = true;
    rg.server_id = 1;
    rg.epoch = 1;
    rg.rf = 1;
    if (born_ago_ms >= 0) {
        rg.times = true;
        rg.born_ago_ms = (uint64_t)born_ago_ms;
        rg.never_split = true;
    }
    map.servers = svp;
    map.n_servers = 2;
    map.ranges = &rgp;
    map.n_ranges = 1;
    map.cause = "start";
    rec.r_case = RT__TRACE_RECORD__R_MAP;
    rec.map = &map;
    assert_int_equal(ms_trace_writer_record(w, 1, &rec, em), 0);
    for (int k = 0; k < 8; k++) {
        keys[k] = kbuf[k];
    }
    for (uint64_t t = 500; t <= secs * 1000ull; t += 500) {
        Rt__HeartbeatReq hb = RT__HEARTBEAT_REQ__INIT;
        Rt__RangeLoad l = RT__RANGE_LOAD__INIT, *lp = &l;
        for (int k = 0; k < 8; k++) {
            snprintf(kbuf[k], sizeof(kbuf[k]), "k%03u", (n++ * 37) % 100);
        }
        l.range_id = 1;
        l.entities = (uint64_t)(eps / 2);
        l.requests = l.entities;
        l.interval_ms = 500;
        l.key_count = 1000;
        l.key_bytes = 1000000;
        l.sample_pks = keys;
        l.n_sample_pks = 8;
        hb.server_id = 1;
        hb.loads = &lp;
        hb.n_loads = 1;
        assert_int_equal(ms_trace_writer_heartbeat(w, t - 100, &hb, NULL, em),
                         0);
        hb.server_id = 2;
        hb.n_loads = 0;
        assert_int_equal(ms_trace_writer_heartbeat(w, t - 90, &hb, NULL, em),
                         0);
        rec.r_case = RT__TRACE_RECORD__R_TICK;
        rec.tick = &tick;
        tick.n++;
        assert_int_equal(ms_trace_writer_record(w, t, &rec, em), 0);
    }
    assert_int_equal(ms_trace_writer_close(w, secs * 1000ull, "end", em), 0);
}

/* The same, the range's birth not recorded (a trace before minor 2). */
static void write_trace(const char *path, double eps, unsigned secs)
{
    write_trace_born(path, eps, secs, -1);
}

static struct rs_sim *replay(const char *path, const char *policy)
{
    struct rs_trace *t;
    struct rs_cfg cfg;
    struct rs_sim *s;
    char err[256];
    rs_cfg_default(&cfg);
    assert_int_equal(rs_trace_load(path, &t, err, sizeof(err)), 0);
    rs_trace_cfg(t, &cfg, true);
    snprintf(cfg.policy, sizeof(cfg.policy), "%s", policy);
    s = rs_replay_create(&cfg, t, NULL, err, sizeof(err));
    assert_non_null(s);
    rs_replay_run(s, t);
    rs_trace_free(t);
    return s;
}

/* Tests */

/* A range taking more than its server can serve is split at the
 * load-median key by the default policy, and a half moves to another
 * server; the 503 rate then falls. */
static void test_hot_range_splits_and_moves(void **state)
{
    struct rs_sim *s = mk("default", 3, 3, "zipfian", 5000, NULL);
    double refused_early, refused_late;
    (void)state;
    /* zipfian: the lowest keys (range 1 on server 1) carry most of it */
    rs_sim_run_until(s, 5000);
    refused_early = s->secs[1].refused;
    assert_true(refused_early > 1000);
    rs_sim_run_until(s, 120000);
    assert_true(count(s, MS_DECIDE_SPLIT) >= 1);
    assert_true(count(s, MS_DECIDE_MOVE) >= 1);
    for (size_t i = 0; i < s->ndecs; i++) {
        if (s->decs[i].kind == MS_DECIDE_SPLIT && s->decs[i].ok) {
            assert_non_null(s->decs[i].key);
            assert_true(strcmp(s->decs[i].key, s->decs[i].low) > 0);
            break;
        }
    }
    refused_late = s->secs[s->nsecs - 1].refused;
    assert_true(refused_late < refused_early / 4);
    rs_sim_destroy(s);
}

/* The "none" policy decides nothing: the hot range stays and keeps
 * refusing what its server cannot serve. */
static void test_none_keeps_refusing(void **state)
{
    struct rs_sim *s = mk("none", 3, 3, "zipfian", 5000, NULL);
    (void)state;
    rs_sim_run_until(s, 60000);
    assert_int_equal(s->ndecs, 0);
    assert_int_equal(s->nr, 3);
    /* capacity 2500/s on server 1: the rest of its demand is refused */
    assert_true(s->secs[59].refused > 1000);
    assert_true(fabs(s->secs[59].served + s->secs[59].refused -
                     s->secs[59].demanded) < 1e-6 * s->secs[59].demanded);
    rs_sim_destroy(s);
}

/* Throttling: ServerBusy windows first, then the per-range cap, then the
 * server's capacity shared in proportion. */
static void test_throttle_arithmetic(void **state)
{
    const double demand[2] = {800, 400}, avail[2] = {1.0, 0.5};
    double served[2], total;
    (void)state;
    total = rs_throttle(demand, avail, 2, 0, 900, served);
    assert_true(fabs(total - 900) < 1e-9);
    assert_true(fabs(served[0] - 720) < 1e-9); /* 800 * 0.9 */
    assert_true(fabs(served[1] - 180) < 1e-9); /* 400 * 0.5 * 0.9 */
    total = rs_throttle(demand, avail, 2, 500, 900, served);
    assert_true(fabs(served[0] - 500) < 1e-9);
    assert_true(fabs(served[1] - 200) < 1e-9);
    assert_true(fabs(total - 700) < 1e-9);
    total = rs_throttle(demand, NULL, 2, 0, 0, served);
    assert_true(fabs(total - 1200) < 1e-9);
}

/* A move copies for 40 ms + bytes / 105 MB/s while the source serves,
 * then switches servers behind a 5 ms ServerBusy window. */
static void test_move_timing(void **state)
{
    struct rs_cost c;
    struct rs_sim *s = mk("none", 2, 2, "uniform", 1000, NULL);
    struct ms_decision d;
    size_t i;
    uint64_t bytes;
    double ms;
    (void)state;
    rs_cost_default(&c);
    assert_true(fabs(rs_cost_move_ms(&c, 100000000) - (40 + 1000 / 1.05)) <
                1e-6);
    rs_sim_run_until(s, 1000);
    i = rs_sim_find(s, 1);
    bytes = s->rr[i].bytes; /* 50000 keys of 1 KiB: 51.2 MB */
    assert_int_equal(bytes, 50000ull * 1024);
    ms = rs_cost_move_ms(&s->cfg.cost, bytes); /* 527.6 ms */
    memset(&d, 0, sizeof(d));
    d.kind = MS_DECIDE_MOVE;
    d.range_id = 1;
    d.server_id = 2;
    assert_true(rs_sim_order(s, &d));
    assert_true(s->rr[rs_sim_find(s, 1)].inflight);
    /* A second order on a busy range is refused, as ms_exec refuses it. */
    assert_false(rs_sim_order(s, &d));
    rs_sim_step(s); /* 1000 -> 1500: the copy is not over */
    assert_int_equal(s->rv[rs_sim_find(s, 1)].server_id, 1);
    assert_true(1000 + ms > 1500);
    rs_sim_step(s); /* 1500 -> 2000: over at 1528: switched */
    i = rs_sim_find(s, 1);
    assert_int_equal(s->rv[i].server_id, 2);
    assert_false(s->rr[i].inflight);
    assert_int_equal(s->rr[i].busy_until - s->rr[i].busy_from, 5);
    assert_int_equal(s->bytes_moved, bytes);
    rs_sim_destroy(s);
}

/* A split refuses its window's share of the step: 5 ms of 500 ms. */
static void test_split_window(void **state)
{
    struct rs_sim *s = mk("none", 2, 2, "uniform", 1000, NULL);
    struct ms_decision d;
    size_t i;
    (void)state;
    rs_sim_run_until(s, 1000);
    memset(&d, 0, sizeof(d));
    d.kind = MS_DECIDE_SPLIT;
    d.range_id = 1;
    d.key = "p0000000025000";
    assert_true(rs_sim_order(s, &d));
    assert_int_equal(s->nr, 3);
    i = rs_sim_find(s, 3); /* the left half */
    assert_int_equal(i, 0);
    assert_int_equal(s->rr[0].ghi, 25000);
    assert_int_equal(s->rv[1].id, 4);
    assert_string_equal(s->rv[1].low, "p0000000025000");
    rs_sim_step(s);
    /* each half: 250/s of demand, 1% of it refused */
    assert_true(fabs(s->rr[0].demand - 250) < 1e-6);
    assert_true(fabs(s->rr[0].refused - 2.5) < 1e-6);
    /* a key outside the range is refused */
    d.range_id = 3;
    d.key = "p0000000030000";
    assert_false(rs_sim_order(s, &d));
    rs_sim_destroy(s);
}

/* Workloads: the CDF is a distribution; zipfian puts most of the demand
 * on the lowest keys; the hot set moves at its period; a sample falls in
 * the interval asked. */
static void test_workloads(void **state)
{
    struct rs_work_cfg c;
    struct rs_work w;
    struct rt_rng r;
    (void)state;
    rt_rng_seed(&r, 3);
    assert_int_equal(rs_work_named("zipfian", 1000000, 100, 600, 1, &c), 0);
    rs_work_init(&w, &c);
    rs_work_at(&w, 0, 0.5);
    assert_true(rs_work_cdf(&w, 0) == 0);
    assert_true(fabs(rs_work_cdf(&w, 1000000) - 1) < 1e-12);
    assert_true(rs_work_cdf(&w, 1000) > 0.3);
    assert_true(rs_work_cdf(&w, 5000) > rs_work_cdf(&w, 4000));
    for (int k = 0; k < 100; k++) {
        uint64_t g = rs_work_sample(&w, &r, 5000, 9000);
        assert_true(g >= 5000 && g < 9000);
    }
    rs_work_fini(&w);

    assert_int_equal(rs_work_named("hotset", 100000, 100, 600, 1, &c), 0);
    rs_work_init(&w, &c);
    rs_work_at(&w, 0, 0.5);
    /* 1% = 1000 keys at [0, 1000) get 90% + their uniform share */
    assert_true(fabs(rs_work_cdf(&w, 1000) - (0.9 + 0.1 * 0.01)) < 1e-9);
    rs_work_at(&w, 121, 0.5);
    assert_true(w.step);
    assert_true(fabs(rs_work_cdf(&w, 1000) - 0.1 * 0.01) < 1e-9);
    rs_work_fini(&w);

    assert_int_equal(rs_work_named("nosuch", 1, 1, 1, 1, &c), -1);
}

/* The same configuration and seed give the same decision log, byte for
 * byte. */
static void test_determinism(void **state)
{
    char *buf[2] = {NULL, NULL};
    size_t len[2] = {0, 0};
    (void)state;
    for (int k = 0; k < 2; k++) {
        FILE *f = open_memstream(&buf[k], &len[k]);
        struct rs_sim *s = mk("default", 4, 8, "hotset", 8000, f);
        rs_sim_run_until(s, 300000);
        rs_sim_destroy(s);
        fclose(f);
    }
    assert_true(len[0] > 0);
    assert_int_equal(len[0], len[1]);
    assert_memory_equal(buf[0], buf[1], len[0]);
    free(buf[0]);
    free(buf[1]);
}

/* The summary finds the hot set's steps and a recovery after each. */
static void test_summary_steps(void **state)
{
    struct rs_sim *s = mk("default", 4, 8, "hotset", 6000, NULL);
    struct rs_summary sum;
    (void)state;
    rs_sim_run_until(s, 600000);
    rs_summarize(s, &sum);
    assert_true(sum.steps >= 4);
    assert_true(sum.splits >= 1);
    assert_true(sum.served_pct > 0.5 && sum.served_pct <= 1.0);
    rs_sim_destroy(s);
}

/* A replayed trace: the recorded hot range is split by the default
 * policy at a sampled key and a half moves to the idle server; under
 * "none" nothing is decided and the demand is the recorded one. */
static void test_replay(void **state)
{
    char path[] = "/tmp/test_sim_core_XXXXXX";
    int fd = mkstemp(path);
    struct rs_sim *a, *b;
    double da = 0, db = 0;
    (void)state;
    assert_true(fd >= 0);
    close(fd);
    write_trace(path, 800, 30);
    a = replay(path, "default");
    assert_int_equal(a->cfg.servers, 2);
    assert_true(a->cfg.pcfg.split_eps == 300);
    assert_true(count(a, MS_DECIDE_SPLIT) >= 1);
    assert_true(count(a, MS_DECIDE_MOVE) >= 1);
    for (size_t i = 0; i < a->ndecs; i++) {
        if (a->decs[i].kind == MS_DECIDE_SPLIT) {
            assert_true(a->decs[i].key[0] == 'k');
            break;
        }
    }
    b = replay(path, "none");
    assert_int_equal(b->ndecs, 0);
    assert_int_equal(b->nr, 1);
    for (size_t t = 0; t < a->nsecs && t < b->nsecs; t++) {
        da += a->secs[t].demanded;
        db += b->secs[t].demanded;
    }
    /* 800/s over the seconds after the first report */
    assert_true(db > 800.0 * 25 && db < 800.0 * 31);
    assert_true(fabs(da - db) < 0.05 * db);
    rs_sim_destroy(a);
    rs_sim_destroy(b);
    unlink(path);
}

/* The time of @s's first split, 0 when none. */
static uint64_t first_split_ms(const struct rs_sim *s)
{
    for (size_t i = 0; i < s->ndecs; i++) {
        if (s->decs[i].kind == MS_DECIDE_SPLIT && s->decs[i].ok) {
            return s->decs[i].t_ms;
        }
    }
    return 0;
}

/* A range's recorded birth (TraceRange.times) sets when the split
 * cool-down lets it split: born at the trace's first snapshot (the
 * replay's clock origin), not before the 3 s cool-down has passed; born two
 * hours before the trace (earlier than the simulated clock's origin), as soon
 * as its load allows; with no birth recorded, at the snapshot. */
static void test_replay_range_birth(void **state)
{
    char path[] = "/tmp/test_sim_core_XXXXXX";
    int fd = mkstemp(path);
    uint64_t now_born, old_born, unknown;
    struct rs_sim *s;
    (void)state;
    assert_true(fd >= 0);
    close(fd);
    write_trace_born(path, 800, 10, 0);
    s = replay(path, "default");
    now_born = first_split_ms(s);
    rs_sim_destroy(s);
    write_trace_born(path, 800, 10, 2 * 3600 * 1000);
    s = replay(path, "default");
    old_born = first_split_ms(s);
    rs_sim_destroy(s);
    write_trace(path, 800, 10);
    s = replay(path, "default");
    unknown = first_split_ms(s);
    rs_sim_destroy(s);
    unlink(path);
    assert_true(now_born >= 3000);
    assert_true(old_born > 0 && old_born < now_born);
    assert_int_equal(unknown, now_born);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hot_range_splits_and_moves),
        cmocka_unit_test(test_replay_range_birth),
        cmocka_unit_test(test_none_keeps_refusing),
        cmocka_unit_test(test_throttle_arithmetic),
        cmocka_unit_test(test_move_timing),
        cmocka_unit_test(test_split_window),
        cmocka_unit_test(test_workloads),
        cmocka_unit_test(test_determinism),
        cmocka_unit_test(test_summary_steps),
        cmocka_unit_test(test_replay),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
