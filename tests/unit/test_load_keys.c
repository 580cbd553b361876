/* rl_keys: random numbers, key distributions, id -> key mapping. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "rl_keys.h"

/* Helpers */

static uint64_t *sample(struct rl_dist_cfg *cfg,
                        uint64_t n,
                        int draws,
                        double elapsed)
{
    struct rl_dist d;
    struct rt_rng r;
    uint64_t *cnt = calloc(n, sizeof(*cnt));
    assert_non_null(cnt);
    rt_rng_seed(&r, 42);
    rl_dist_init(&d, cfg, n);
    for (int i = 0; i < draws; i++) {
        uint64_t v = rl_dist_pick(&d, &r, n, elapsed);
        assert_true(v < n);
        cnt[v]++;
    }
    return cnt;
}

/* Tests */

/* The same seed gives the same sequence; another seed does not. */
static void test_rng_seed(void **state)
{
    struct rt_rng a, b, c;
    (void)state;
    rt_rng_seed(&a, 7);
    rt_rng_seed(&b, 7);
    rt_rng_seed(&c, 8);
    for (int i = 0; i < 100; i++) {
        uint64_t x = rt_rng_next(&a);
        assert_true(x == rt_rng_next(&b));
        assert_true(x != rt_rng_next(&c));
    }
}

/* Uniform: ten buckets of 1000 keys each get 10% +- 0.5% of 200k draws. */
static void test_uniform(void **state)
{
    struct rl_dist_cfg cfg = {.kind = RL_DIST_UNIFORM};
    uint64_t *c = sample(&cfg, 10000, 200000, 0);
    (void)state;
    for (int b = 0; b < 10; b++) {
        uint64_t s = 0;
        for (int i = 0; i < 1000; i++) {
            s += c[b * 1000 + i];
        }
        assert_true(s > 19000 && s < 21000);
    }
    free(c);
}

/* Zipfian(0.99) over 1000 keys: rank 0 gets 1/zeta(1000) of the draws
 * (+-5%), the head is decreasing, and rank i/rank 1 ~ 1/i^theta. */
static void test_zipfian(void **state)
{
    struct rl_dist_cfg cfg = {.kind = RL_DIST_ZIPFIAN, .theta = 0.99};
    const int draws = 400000;
    uint64_t *c = sample(&cfg, 1000, draws, 0);
    double zeta = 0, p0;
    (void)state;
    for (int i = 1; i <= 1000; i++) {
        zeta += 1.0 / pow(i, 0.99);
    }
    p0 = (double)c[0] / draws;
    assert_true(fabs(p0 - 1.0 / zeta) < 0.05 / zeta);
    assert_true(c[0] > c[1] && c[1] > c[2] && c[2] > c[5] && c[5] > c[50]);
    /* rank 9 vs rank 0: (1/10)^0.99 */
    assert_true(fabs((double)c[9] / (double)c[0] - pow(0.1, 0.99)) < 0.02);
    /* The top 10% of keys take most of the draws. */
    {
        uint64_t top = 0;
        for (int i = 0; i < 100; i++) {
            top += c[i];
        }
        assert_true(top > draws * 0.6);
    }
    free(c);
}

/* Zipfian's n may grow between draws (inserts): draws stay below n and the
 * head keeps its weight. */
static void test_zipfian_growing(void **state)
{
    struct rl_dist_cfg cfg = {.kind = RL_DIST_ZIPFIAN, .theta = 0.9};
    struct rl_dist d;
    struct rt_rng r;
    uint64_t zero = 0;
    (void)state;
    rt_rng_seed(&r, 1);
    rl_dist_init(&d, &cfg, 10);
    for (uint64_t n = 10; n < 20010; n++) {
        uint64_t v = rl_dist_pick(&d, &r, n, 0);
        assert_true(v < n);
        zero += v == 0;
    }
    assert_true(zero > 500); /* ~ 1/zeta(n) ~ 6-10% */
}

/* Latest: the newest key (n-1) is the most popular. */
static void test_latest(void **state)
{
    struct rl_dist_cfg cfg = {.kind = RL_DIST_LATEST, .theta = 0.99};
    uint64_t *c = sample(&cfg, 1000, 100000, 0);
    (void)state;
    assert_true(c[999] > c[998] && c[998] > c[990] && c[990] > c[500]);
    free(c);
}

/* Sequential ascending cycles 0..n-1; descending n-1..0. */
static void test_sequential(void **state)
{
    struct rl_dist_cfg up = {.kind = RL_DIST_SEQ_ASC};
    struct rl_dist_cfg down = {.kind = RL_DIST_SEQ_DESC};
    struct rl_dist a, b;
    struct rt_rng r;
    (void)state;
    rt_rng_seed(&r, 1);
    rl_dist_init(&a, &up, 5);
    rl_dist_init(&b, &down, 5);
    for (int i = 0; i < 12; i++) {
        assert_true(rl_dist_pick(&a, &r, 5, 0) == (uint64_t)(i % 5));
        assert_true(rl_dist_pick(&b, &r, 5, 0) == (uint64_t)(4 - i % 5));
    }
}

/* Hot set 1% / 90%: the window gets 90% + 10% * 1% of the draws, and it
 * moves to the next 1% after each period. */
static void test_hotset(void **state)
{
    struct rl_dist_cfg cfg = {.kind = RL_DIST_HOTSET,
                              .hot_fraction = 0.01,
                              .hot_prob = 0.9,
                              .hot_period_s = 10};
    uint64_t *c0 = sample(&cfg, 10000, 100000, 5);  /* window 0 */
    uint64_t *c1 = sample(&cfg, 10000, 100000, 15); /* window 1 */
    uint64_t h0 = 0, h1 = 0;
    (void)state;
    for (int i = 0; i < 100; i++) {
        h0 += c0[i];
        h1 += c1[100 + i];
    }
    assert_true(h0 > 89000 && h0 < 92000);
    assert_true(h1 > 89000 && h1 < 92000);
    assert_true(c1[0] < 10);
    free(c0);
    free(c1);
}

/* Keys: fixed widths, only [a-z0-9], deterministic; seq PKs sort like
 * their ids; P partitions hold ids mod P. */
static void test_keys(void **state)
{
    struct rl_keymap seq = {
        .partitions = 0, .pk_scheme = RL_KEY_SEQ, .rk_scheme = RL_KEY_SEQ};
    struct rl_keymap hash = {
        .partitions = 10, .pk_scheme = RL_KEY_HASH, .rk_scheme = RL_KEY_HASH};
    struct rl_keymap rev = {
        .partitions = 10, .pk_scheme = RL_KEY_SEQ, .rk_scheme = RL_KEY_REV};
    char pk[RL_KEY_MAX], rk[RL_KEY_MAX], pk2[RL_KEY_MAX], rk2[RL_KEY_MAX];
    (void)state;
    for (int64_t id = -50; id < 50; id++) {
        rl_key_of(&seq, id, pk, rk);
        rl_key_of(&seq, id + 1, pk2, rk2);
        assert_int_equal(strlen(pk), rl_pk_width(&seq));
        assert_int_equal(strlen(rk), rl_rk_width(&seq));
        assert_true(strcmp(pk, pk2) < 0);
        assert_true(strspn(pk, "abcdefghijklmnopqrstuvwxyz0123456789") ==
                    strlen(pk));
    }
    rl_key_of(&hash, 3, pk, rk);
    rl_key_of(&hash, 13, pk2, rk2);
    assert_string_equal(pk, pk2);     /* same partition */
    assert_string_not_equal(rk, rk2); /* different rows */
    assert_int_equal(strlen(pk), rl_pk_width(&hash));
    assert_int_equal(strlen(rk), 17);
    assert_true(rl_pk_index_of(&hash, 13) == rl_pk_index_of(&hash, 3));
    rl_key_of(&rev, 3, pk, rk);
    rl_key_of(&rev, 13, pk2, rk2);
    assert_true(strcmp(rk, rk2) > 0); /* newer row sorts first */
    rl_batch_rk(42, rk);
    assert_string_equal(rk, "b0000000000042");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rng_seed), cmocka_unit_test(test_uniform),
        cmocka_unit_test(test_zipfian),  cmocka_unit_test(test_zipfian_growing),
        cmocka_unit_test(test_latest),   cmocka_unit_test(test_sequential),
        cmocka_unit_test(test_hotset),   cmocka_unit_test(test_keys),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
