/* Unit tests of leases (ps_lease.h) with fake clocks: a holder (server 1,
 * the primary) and granters (servers 2 and 3, its secondaries) exchange
 * SupportReq / SupportResp by hand, at times the tests choose. Grant,
 * renew and expiry; the drift bound checked against simulated clocks at
 * the extreme rates; a late reply that must not extend the lease;
 * withdrawal (seal, newer view, refusal) and release/resume; the restart
 * grace; the SEAL guard; the NOLEASE 50 ms trigger. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ps_lease.h"
#include "rt_err.h"

/* Fixture */

#define P 1  /* the primary */
#define R 10 /* a range of P, lease set {2, 3} */
#define R2 11
#define L 1500
#define D 1492 /* floor(1500 * 0.999 / 1.001) - 5 */

static const uint8_t INC1[16] = {1, 1, 1};

struct fx
{
    struct ps_lease_holder *h;   /* server 1 */
    struct ps_lease_granter *g2; /* server 2 */
    struct ps_lease_granter *g3; /* server 3 */
};

static struct ps_lease_config cfg_of(uint64_t self, uint64_t start)
{
    return (struct ps_lease_config){.self_id = self,
                                    .lease_ms = L,
                                    .drift_ppm = 1000,
                                    .eps_ms = 5,
                                    .start_ms = start};
}

static int setup(void **state)
{
    struct fx *f = calloc(1, sizeof(*f));
    struct ps_lease_config c = cfg_of(P, 0);
    assert_int_equal(ps_lease_holder_create(&c, &f->h), 0);
    c = cfg_of(2, 0);
    assert_int_equal(ps_lease_granter_create(&c, &f->g2), 0);
    c = cfg_of(3, 0);
    assert_int_equal(ps_lease_granter_create(&c, &f->g3), 0);
    struct ps_lease_granter *gs[2] = {f->g2, f->g3};
    for (int i = 0; i < 2; i++) {
        assert_int_equal(ps_lease_granter_peer(gs[i], P, INC1, sizeof(INC1)),
                         0);
        assert_int_equal(ps_lease_granter_set_range(gs[i], R, P, 4), 0);
        assert_int_equal(ps_lease_granter_set_range(gs[i], R2, P, 4), 0);
    }
    uint64_t set[] = {2, 3};
    assert_int_equal(ps_lease_holder_set_range(f->h, R, set, 2), 0);
    assert_int_equal(ps_lease_holder_set_range(f->h, R2, set, 2), 0);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fx *f = *state;
    ps_lease_holder_destroy(f->h);
    ps_lease_granter_destroy(f->g2);
    ps_lease_granter_destroy(f->g3);
    free(f);
    return 0;
}

/* Helpers */

static struct ps_lease_granter *granter(struct fx *f, uint64_t id)
{
    return id == 2 ? f->g2 : f->g3;
}

/* P sends a SupportReq to @peer at P's time @t_send; returns its seq. */
static uint64_t send(struct fx *f, uint64_t peer, uint64_t t_send)
{
    struct ps_lease_req req;
    ps_lease_holder_send(f->h, peer, t_send, &req);
    return req.seq;
}

/* @peer answers request @seq (no release) at its time @t_grant; the reply
 * is then handed to P. Returns on_resp's result. */
static int answer(struct fx *f, uint64_t peer, uint64_t seq, uint64_t t_grant)
{
    struct ps_lease_answer a;
    ps_lease_granter_on_support(granter(f, peer), P, INC1, sizeof(INC1), NULL,
                                0, t_grant, &a);
    return ps_lease_holder_on_resp(f->h, peer, seq, a.granted, a.withdrawn,
                                   a.n_withdrawn);
}

/* One full round to both secondaries: sent at @t, granted at @t. */
static void round_trip(struct fx *f, uint64_t t)
{
    assert_int_equal(answer(f, 2, send(f, 2, t), t), 0);
    assert_int_equal(answer(f, 3, send(f, 3, t), t), 0);
}

/* Tests */

/* The duration D and the configurations refused. */
static void test_config(void **state)
{
    (void)state;
    struct ps_lease_config c = cfg_of(P, 0);
    assert_int_equal(ps_lease_duration(&c), D);
    c.drift_ppm = 0;
    assert_int_equal(ps_lease_duration(&c), L - 5);
    c = cfg_of(P, 0);
    c.eps_ms = 0;
    assert_int_equal(ps_lease_config_check(&c), RT_EINVAL);
    c = cfg_of(P, 0);
    c.lease_ms = 0;
    assert_int_equal(ps_lease_config_check(&c), RT_EINVAL);
    c = cfg_of(P, 0);
    c.drift_ppm = 1000000;
    assert_int_equal(ps_lease_config_check(&c), RT_EINVAL);
    c = cfg_of(P, 0);
    c.lease_ms = 5; /* D = 4 - 5 */
    assert_int_equal(ps_lease_config_check(&c), RT_EINVAL);
    struct ps_lease_holder *h = NULL;
    assert_int_equal(ps_lease_holder_create(&c, &h), RT_EINVAL);
    assert_null(h);
}

/* No lease before every member granted; it lasts D from the send time of
 * the oldest counted request; renewals move it; without them it expires. */
static void test_grant_renew_expire(void **state)
{
    struct fx *f = *state;
    assert_false(ps_lease_holder_ok(f->h, R, 0));
    assert_int_equal(ps_lease_holder_until(f->h, R), 0);
    assert_int_equal(answer(f, 2, send(f, 2, 100), 105), 0);
    assert_false(ps_lease_holder_ok(f->h, R, 110)); /* 3 not yet */
    assert_int_equal(answer(f, 3, send(f, 3, 120), 130), 0);
    assert_int_equal(ps_lease_holder_until(f->h, R), 100 + D);
    assert_true(ps_lease_holder_ok(f->h, R, 100 + D - 1));
    assert_false(ps_lease_holder_ok(f->h, R, 100 + D));
    assert_int_equal(ps_lease_holder_remaining(f->h, R, 600), 100 + D - 600);
    /* Renewal every 250 ms. */
    round_trip(f, 350);
    round_trip(f, 600);
    assert_int_equal(ps_lease_holder_until(f->h, R), 600 + D);
    /* Silence: it runs out, whatever the time a reply might have come. */
    assert_true(ps_lease_holder_ok(f->h, R, 600 + D - 1));
    assert_false(ps_lease_holder_ok(f->h, R, 600 + D));
    assert_int_equal(ps_lease_holder_remaining(f->h, R, 600 + D), 0);
    /* An empty lease set (RF 1) holds it at once and forever. */
    assert_int_equal(ps_lease_holder_set_range(f->h, 77, NULL, 0), 0);
    assert_int_equal(ps_lease_holder_until(f->h, 77), PS_LEASE_FOREVER);
    assert_true(ps_lease_holder_ok(f->h, 77, UINT64_MAX - 1));
    /* The holder's own id and duplicates are not members. */
    uint64_t set[] = {P, 2, 2};
    assert_int_equal(ps_lease_holder_set_range(f->h, 78, set, 3), 0);
    assert_int_equal(answer(f, 2, send(f, 2, 700), 700), 0);
    assert_int_equal(ps_lease_holder_until(f->h, 78), 700 + D);
    assert_false(ps_lease_holder_ok(f->h, 99, 0)); /* unknown range */
}

/* A member added to the lease set counts only once it grants; a member
 * kept keeps its support; too many members are refused. */
static void test_lease_set_change(void **state)
{
    struct fx *f = *state;
    round_trip(f, 100);
    uint64_t set[] = {2, 3, 4};
    assert_int_equal(ps_lease_holder_set_range(f->h, R, set, 3), 0);
    assert_false(ps_lease_holder_ok(f->h, R, 200));
    uint64_t two[] = {3};
    assert_int_equal(ps_lease_holder_set_range(f->h, R, two, 1), 0);
    assert_int_equal(ps_lease_holder_until(f->h, R), 100 + D);
    uint64_t many[PS_LEASE_MAX_MEMBERS + 1];
    for (size_t i = 0; i < PS_LEASE_MAX_MEMBERS + 1; i++) {
        many[i] = 100 + i;
    }
    assert_int_equal(
        ps_lease_holder_set_range(f->h, R, many, PS_LEASE_MAX_MEMBERS + 1),
        RT_EINVAL);
    assert_int_equal(ps_lease_holder_until(f->h, R), 100 + D);
}

/* The first real µs at which a clock running at @rate_ppm (10^6 = real
 * time), reading @off_ms at real 0 and read in whole ms by truncation,
 * reads >= @target_ms. */
static uint64_t first_at(uint64_t target_ms, uint64_t rate_ppm, uint64_t off)
{
    uint64_t num = (target_ms - off) * 1000000000ull;
    return (num + rate_ppm - 1) / rate_ppm;
}

/* Clock value (ms) of that clock at real µs @t_us. */
static uint64_t clock_ms(uint64_t t_us, uint64_t rate_ppm, uint64_t off)
{
    return off + t_us * rate_ppm / 1000000000ull;
}

/* Simulates one grant at the extreme rates: P's clock slow (1 - ρ), S's
 * fast (1 + ρ), the request granted in the real µs it is sent. Returns P's
 * last lease-valid real µs minus S's first real µs allowed to seal
 * (negative = safe). */
static int64_t margin_us(uint64_t dur_ms, uint64_t send_us)
{
    const uint64_t p_rate = 1000000 - 1000;
    const uint64_t s_rate = 1000000 + 1000;
    uint64_t t_send = clock_ms(send_us, p_rate, 7);
    uint64_t last_grant = clock_ms(send_us, s_rate, 3);
    /* ps_lease_holder_ok: valid while the clock reads < t_send + D. */
    uint64_t last_ok = first_at(t_send + dur_ms, p_rate, 7) - 1;
    /* ps_lease_granter_seal_wait: 0 once it reads >= last_grant + L. */
    uint64_t seal = first_at(last_grant + L, s_rate, 3);
    return (int64_t)last_ok - (int64_t)seal;
}

/* Drift at the bound: with both clocks at the extreme rates of ρ and every
 * sub-millisecond phase, the holder's lease ends before the granter may
 * seal, even at the smallest ε; with the drift correction left out
 * (D = L - ε) it would not. */
static void test_drift_bound(void **state)
{
    (void)state;
    struct ps_lease_config c = cfg_of(P, 0);
    c.eps_ms = 1;
    uint64_t dur = ps_lease_duration(&c);
    assert_int_equal(dur, 1496);
    int64_t worst = INT64_MIN;
    bool unsafe = false;
    for (uint64_t t = 1000000; t < 1000000 + 20000; t++) {
        int64_t m = margin_us(dur, t);
        worst = m > worst ? m : worst;
        unsafe = unsafe || margin_us(L - 1, t) >= 0;
    }
    assert_true(worst < 0);
    assert_true(unsafe);
}

/* A reply counts from its request's send time, so one arriving late never
 * extends the lease past that; an older reply never moves it back; an
 * unknown or forgotten seq is ignored. */
static void test_late_resp(void **state)
{
    struct fx *f = *state;
    uint64_t s1 = send(f, 2, 100);
    uint64_t s2 = send(f, 2, 400);
    assert_int_equal(answer(f, 3, send(f, 3, 400), 400), 0);
    /* The reply to s1 arrives at 1700, after 100 + D. */
    assert_int_equal(answer(f, 2, s1, 1650), 0);
    assert_int_equal(ps_lease_holder_until(f->h, R), 100 + D);
    assert_false(ps_lease_holder_ok(f->h, R, 1700));
    assert_int_equal(answer(f, 2, s2, 1700), 0);
    assert_int_equal(ps_lease_holder_until(f->h, R), 400 + D);
    /* s1 again (duplicate, late): no change. */
    assert_int_equal(answer(f, 2, s1, 1750), 0);
    assert_int_equal(ps_lease_holder_until(f->h, R), 400 + D);
    /* Unknown seq, wrong peer. */
    assert_int_equal(answer(f, 2, 999, 1750), RT_ENOTFOUND);
    assert_int_equal(answer(f, 3, s2, 1750), RT_ENOTFOUND);
    /* Forgotten: older than the last PS_LEASE_INFLIGHT sends to the peer. */
    uint64_t old = send(f, 2, 500);
    for (int i = 0; i < PS_LEASE_INFLIGHT; i++) {
        send(f, 2, 500);
    }
    assert_int_equal(answer(f, 2, old, 600), RT_ENOTFOUND);
    assert_int_equal(ps_lease_holder_until(f->h, R), 400 + D);
}

/* A sealed range is withdrawn: the holder loses that member's support for
 * it at once, other ranges keep theirs, and an older grant arriving late
 * does not revive it. A newer view naming another primary withdraws too;
 * a refusal (wrong incarnation) voids every range. */
static void test_withdraw(void **state)
{
    struct fx *f = *state;
    round_trip(f, 100);
    /* Sent before the seal; its reply (granting R) arrives last. */
    uint64_t s_old = send(f, 2, 1550);
    uint64_t retry;
    /* No grant to P since 100: the guard allows at 100 + L. */
    assert_int_equal(ps_lease_granter_seal(f->g2, R, 5, 1600, &retry), 0);
    uint64_t s = send(f, 2, 1700);
    struct ps_lease_answer a;
    ps_lease_granter_on_support(f->g2, P, INC1, sizeof(INC1), NULL, 0, 1700,
                                &a);
    assert_true(a.granted);
    assert_int_equal(a.n_withdrawn, 1);
    assert_int_equal(a.withdrawn[0], R);
    assert_int_equal(ps_lease_holder_on_resp(f->h, 2, s, a.granted, a.withdrawn,
                                             a.n_withdrawn),
                     0);
    round_trip(f, 1800); /* 3 still grants both; 2 only R2 */
    assert_int_equal(ps_lease_holder_until(f->h, R), 0);
    assert_int_equal(ps_lease_holder_until(f->h, R2), 1800 + D);
    /* Sealed: the answers at 1700 and 1800 granted nothing for R. */
    assert_int_equal(ps_lease_granter_seal_wait(f->g2, R, 1800), 0);
    /* The old reply (answered before the seal) must not revive R. */
    assert_int_equal(ps_lease_holder_on_resp(f->h, 2, s_old, true, NULL, 0), 0);
    assert_int_equal(ps_lease_holder_until(f->h, R), 0);
    /* A newer view at S3 names server 4: R is withdrawn from P there. */
    assert_int_equal(ps_lease_granter_set_range(f->g3, R2, 4, 6), 0);
    ps_lease_granter_on_support(f->g3, P, INC1, sizeof(INC1), NULL, 0, 1900,
                                &a);
    assert_int_equal(a.n_withdrawn, 1);
    assert_int_equal(a.withdrawn[0], R2);
    /* An older view is refused and changes nothing. */
    assert_int_equal(ps_lease_granter_set_range(f->g3, R2, P, 5), RT_ESTALE);
    /* A wrong incarnation: refused, and the holder drops all support. */
    uint8_t other[16] = {9};
    ps_lease_granter_on_support(f->g2, P, other, sizeof(other), NULL, 0, 1950,
                                &a);
    assert_false(a.granted);
    assert_int_equal(a.n_withdrawn, 0);
    s = send(f, 2, 1950);
    assert_int_equal(ps_lease_holder_on_resp(f->h, 2, s, false, NULL, 0), 0);
    assert_int_equal(ps_lease_holder_until(f->h, R2), 0);
    /* An unknown peer is refused too. */
    ps_lease_granter_on_support(f->g2, 42, INC1, sizeof(INC1), NULL, 0, 1950,
                                &a);
    assert_false(a.granted);
}

/* Release: the holder loses the lease at once and lists the range in each
 * request; the granter may then seal at once (after its grace); resuming
 * needs fresh support from requests sent after the resume. */
static void test_release(void **state)
{
    struct fx *f = *state;
    round_trip(f, 2000);
    assert_int_equal(ps_lease_holder_release(f->h, R), 0);
    assert_false(ps_lease_holder_ok(f->h, R, 2001));
    assert_true(ps_lease_holder_ok(f->h, R2, 2001));
    struct ps_lease_req req;
    ps_lease_holder_send(f->h, 2, 2100, &req);
    assert_int_equal(req.n_release, 1);
    assert_int_equal(req.release[0], R);
    uint64_t retry;
    assert_int_equal(ps_lease_granter_seal(f->g2, R, 5, 2100, &retry),
                     RT_EBUSY);
    assert_int_equal(retry, 2000 + L - 2100);
    struct ps_lease_answer a;
    ps_lease_granter_on_support(f->g2, P, INC1, sizeof(INC1), req.release,
                                req.n_release, 2100, &a);
    assert_true(a.granted);
    assert_int_equal(a.n_withdrawn, 0);
    assert_int_equal(ps_lease_holder_on_resp(f->h, 2, req.seq, true, NULL, 0),
                     0);
    assert_false(ps_lease_holder_ok(f->h, R, 2101)); /* released */
    /* R2 was granted at 2100, R was released: R may be sealed now, R2 not. */
    assert_int_equal(ps_lease_granter_seal_wait(f->g2, R, 2100), 0);
    assert_int_equal(ps_lease_granter_seal_wait(f->g2, R2, 2100), L);
    /* Resume (transfer aborted): a reply to a request sent before it
     * does not count. */
    uint64_t before = send(f, 2, 2150);
    assert_int_equal(ps_lease_holder_resume(f->h, R), 0);
    ps_lease_holder_send(f->h, 2, 2200, &req);
    assert_int_equal(req.n_release, 0);
    assert_int_equal(answer(f, 2, before, 2200), 0);
    assert_int_equal(answer(f, 3, send(f, 3, 2200), 2200), 0);
    assert_false(ps_lease_holder_ok(f->h, R, 2201));
    /* The granter answered without a release: R is granted again, so the
     * guard waits for it. */
    assert_int_equal(ps_lease_granter_seal_wait(f->g2, R, 2200), L);
    assert_int_equal(answer(f, 2, req.seq, 2210), 0);
    assert_int_equal(ps_lease_holder_until(f->h, R), 2200 + D);
    assert_int_equal(ps_lease_holder_release(f->h, 99), RT_ENOTFOUND);
    assert_int_equal(ps_lease_holder_resume(f->h, 99), RT_ENOTFOUND);
}

/* A restarted granter refuses every seal for L from its start, grants or
 * not; an unknown range is not found. */
static void test_restart_grace(void **state)
{
    (void)state;
    struct ps_lease_config c = cfg_of(2, 50000);
    struct ps_lease_granter *g;
    assert_int_equal(ps_lease_granter_create(&c, &g), 0);
    assert_int_equal(ps_lease_granter_set_range(g, R, P, 4), 0);
    uint64_t retry = 0;
    assert_int_equal(ps_lease_granter_seal(g, R, 5, 50000, &retry), RT_EBUSY);
    assert_int_equal(retry, L);
    assert_int_equal(ps_lease_granter_seal(g, R, 5, 50000 + L - 1, &retry),
                     RT_EBUSY);
    assert_int_equal(retry, 1);
    assert_int_equal(ps_lease_granter_seal_wait(g, 99, 50000 + 1), L - 1);
    assert_int_equal(ps_lease_granter_seal(g, 99, 5, 50000 + L, &retry),
                     RT_ENOTFOUND);
    assert_int_equal(ps_lease_granter_seal(g, R, 5, 50000 + L, &retry), 0);
    assert_int_equal(retry, 0);
    ps_lease_granter_destroy(g);
}

/* The SEAL guard: busy until last_grant + L on the granter's clock, with
 * the remaining ms; afterwards sealing withdraws the range so nothing more
 * is granted for it until a view at the sealed epoch; answers to the
 * primary while a range was unknown count for it once known; fencing
 * grants nothing. */
static void test_seal_guard(void **state)
{
    struct fx *f = *state;
    round_trip(f, 5000);
    uint64_t retry;
    assert_int_equal(ps_lease_granter_seal(f->g2, R, 5, 5000 + L - 1, &retry),
                     RT_EBUSY);
    assert_int_equal(retry, 1);
    assert_int_equal(ps_lease_granter_seal(f->g2, R, 5, 5000 + L, &retry), 0);
    /* Idempotent. */
    assert_int_equal(ps_lease_granter_seal(f->g2, R, 5, 5000 + L, &retry), 0);
    /* Support requests keep coming: R stays withdrawn, not granted. */
    round_trip(f, 7000);
    assert_int_equal(ps_lease_granter_seal_wait(f->g2, R, 7000), 0);
    assert_int_equal(ps_lease_granter_seal_wait(f->g2, R2, 7000), L);
    /* The master's decision at epoch 5: Q = 3 is primary. Grants to P no
     * longer count for R; grants to 3 do. */
    assert_int_equal(ps_lease_granter_peer(f->g2, 3, INC1, sizeof(INC1)), 0);
    assert_int_equal(ps_lease_granter_set_range(f->g2, R, 3, 5), 0);
    struct ps_lease_answer a;
    ps_lease_granter_on_support(f->g2, 3, INC1, sizeof(INC1), NULL, 0, 8000,
                                &a);
    assert_true(a.granted);
    assert_int_equal(a.n_withdrawn, 0);
    assert_int_equal(ps_lease_granter_seal(f->g2, R, 6, 8000 + 10, &retry),
                     RT_EBUSY);
    assert_int_equal(retry, L - 10);
    /* A range learned after an answer to its primary: the answer counted
     * for it (it was not withdrawn), so a seal waits for it. */
    round_trip(f, 9000);
    assert_int_equal(ps_lease_granter_set_range(f->g2, 50, P, 4), 0);
    assert_int_equal(ps_lease_granter_seal_wait(f->g2, 50, 9100), L - 100);
    /* The same when the view names another primary: P may still count
     * those answers for it. */
    assert_int_equal(ps_lease_granter_set_range(f->g2, 51, 4, 4), 0);
    assert_int_equal(ps_lease_granter_seal_wait(f->g2, 51, 9100), L - 100);
    /* Fenced (disk stall): nothing granted, nothing recorded. */
    ps_lease_granter_set_fenced(f->g2, true);
    ps_lease_granter_on_support(f->g2, P, INC1, sizeof(INC1), NULL, 0, 9500,
                                &a);
    assert_false(a.granted);
    assert_int_equal(ps_lease_granter_seal_wait(f->g2, R2, 10000), L - 1000);
    ps_lease_granter_set_fenced(f->g2, false);
    assert_int_equal(ps_lease_granter_drop_range(f->g2, 50), 0);
    assert_int_equal(ps_lease_granter_drop_range(f->g2, 50), RT_ENOTFOUND);
    assert_int_equal(ps_lease_granter_seal(f->g2, 50, 5, 20000, &retry),
                     RT_ENOTFOUND);
}

/* NOLEASE fires when the lease would end within 50 ms, and names the
 * members whose support is missing or ending; never for RF 1. */
static void test_nolease_trigger(void **state)
{
    struct fx *f = *state;
    assert_true(ps_lease_holder_expiring(f->h, R, 0)); /* never granted */
    assert_int_equal(answer(f, 2, send(f, 2, 100), 100), 0);
    assert_int_equal(answer(f, 3, send(f, 3, 300), 300), 0);
    uint64_t until = 100 + D;
    assert_false(
        ps_lease_holder_expiring(f->h, R, until - PS_LEASE_NOLEASE_MS - 1));
    assert_true(ps_lease_holder_expiring(f->h, R, until - PS_LEASE_NOLEASE_MS));
    assert_true(ps_lease_holder_ok(f->h, R, until - PS_LEASE_NOLEASE_MS));
    uint64_t silent[4];
    assert_int_equal(ps_lease_holder_silent(
                         f->h, R, until - PS_LEASE_NOLEASE_MS - 1, silent, 4),
                     0);
    assert_int_equal(
        ps_lease_holder_silent(f->h, R, until - PS_LEASE_NOLEASE_MS, silent, 4),
        1);
    assert_int_equal(silent[0], 2);
    assert_int_equal(ps_lease_holder_silent(f->h, R, 300 + D, silent, 4), 2);
    assert_int_equal(ps_lease_holder_silent(f->h, R, 300 + D, silent, 1), 2);
    assert_int_equal(ps_lease_holder_silent(f->h, 99, 0, silent, 4), 0);
    assert_int_equal(ps_lease_holder_set_range(f->h, 77, NULL, 0), 0);
    assert_false(ps_lease_holder_expiring(f->h, 77, UINT64_MAX / 2));
    assert_int_equal(ps_lease_holder_drop_range(f->h, 77), 0);
    assert_int_equal(ps_lease_holder_drop_range(f->h, 77), RT_ENOTFOUND);
    assert_true(ps_lease_holder_expiring(f->h, 77, 0));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_config),
        cmocka_unit_test_setup_teardown(test_grant_renew_expire, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_lease_set_change, setup, teardown),
        cmocka_unit_test(test_drift_bound),
        cmocka_unit_test_setup_teardown(test_late_resp, setup, teardown),
        cmocka_unit_test_setup_teardown(test_withdraw, setup, teardown),
        cmocka_unit_test_setup_teardown(test_release, setup, teardown),
        cmocka_unit_test(test_restart_grace),
        cmocka_unit_test_setup_teardown(test_seal_guard, setup, teardown),
        cmocka_unit_test_setup_teardown(test_nolease_trigger, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
