/* Unit tests of the key log (ps_keylog.h): the keys changed in (from, to]
 * deduplicated and in byte order; the too-old answer; truncation to the
 * budget oldest first across ranges, never above a range's cw; a gap
 * restarting a range's log; the byte accounting, including a range drop. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ps_keylog.h"
#include "rt_err.h"

/* Helpers */

#define A 7 /* range ids */
#define B 8

/* Appends group @lsn of @range changing the NUL-separated @keys
 * ("k1\0k2\0" ..., ending with an empty string). */
static int add(struct ps_keylog *kl,
               uint64_t range,
               uint64_t lsn,
               const char *keys)
{
    struct ps_keylog_key k[16];
    size_t n = 0;
    for (const char *p = keys; *p != '\0'; p += strlen(p) + 1) {
        k[n++] =
            (struct ps_keylog_key){.p = (const uint8_t *)p, .len = strlen(p)};
    }
    return ps_keylog_append(kl, range, lsn, 3, 100 + lsn, k, n);
}

/* The answer as one "k1,k2," string (static buffer). */
static const char *joined(const struct ps_keylog_keys *out)
{
    static char buf[512];
    size_t w = 0;
    for (size_t i = 0; i < out->n; i++) {
        memcpy(buf + w, out->v[i].p, out->v[i].len);
        w += out->v[i].len;
        buf[w++] = ',';
    }
    buf[w] = '\0';
    return buf;
}

/* The bytes one entry of @n keys totalling @key_bytes costs: measured as
 * the difference an append makes in a fresh log. */
static size_t entry_cost(size_t n, size_t key_bytes)
{
    struct ps_keylog *kl;
    assert_int_equal(ps_keylog_create(1 << 20, &kl), 0);
    struct ps_keylog_key k[16];
    static const uint8_t z[64];
    for (size_t i = 0; i < n; i++) {
        k[i] = (struct ps_keylog_key){.p = z, .len = i == 0 ? key_bytes : 0};
    }
    assert_int_equal(ps_keylog_set_cw(kl, 1, 0), 0);
    size_t before = ps_keylog_bytes(kl);
    assert_int_equal(ps_keylog_append(kl, 1, 1, 1, 1, k, n), 0);
    size_t cost = ps_keylog_bytes(kl) - before;
    ps_keylog_destroy(kl);
    return cost;
}

/* Tests */

/* Keys of (from, to] come back once each, in byte order, whatever the
 * groups repeated; the bounds are exclusive / inclusive as stated. */
static void test_changed_dedup(void **state)
{
    (void)state;
    struct ps_keylog *kl;
    struct ps_keylog_keys out = {0};
    assert_int_equal(ps_keylog_create(1 << 20, &kl), 0);
    assert_int_equal(add(kl, A, 1, "m\0a\0"), 0);
    assert_int_equal(add(kl, A, 2, "b\0a\0a\0"), 0);
    assert_int_equal(add(kl, A, 3, "z\0"), 0);
    assert_int_equal(add(kl, A, 4, "b\0ab\0"), 0);
    assert_int_equal(add(kl, B, 1, "other\0"), 0);
    assert_int_equal(ps_keylog_changed(kl, A, 0, 4, &out), 5);
    assert_string_equal(joined(&out), "a,ab,b,m,z,");
    assert_int_equal(ps_keylog_changed(kl, A, 1, 2, &out), 2);
    assert_string_equal(joined(&out), "a,b,");
    assert_int_equal(ps_keylog_changed(kl, A, 3, 4, &out), 2);
    assert_string_equal(joined(&out), "ab,b,");
    assert_int_equal(ps_keylog_changed(kl, A, 4, 4, &out), 0);
    assert_int_equal(ps_keylog_changed(kl, A, 3, 5, &out), RT_EINVAL);
    assert_int_equal(ps_keylog_changed(kl, A, 3, 2, &out), RT_EINVAL);
    assert_int_equal(ps_keylog_changed(kl, 99, 0, 0, &out), RT_ENOTFOUND);
    uint64_t epoch = 0;
    uint64_t txn = 0;
    assert_int_equal(ps_keylog_entry(kl, A, 2, &epoch, &txn), 0);
    assert_int_equal(epoch, 3);
    assert_int_equal(txn, 102);
    assert_int_equal(ps_keylog_entry(kl, A, 9, &epoch, &txn), RT_ENOTFOUND);
    /* Not above the last LSN, or 0: refused. */
    assert_int_equal(add(kl, A, 4, "x\0"), RT_EINVAL);
    assert_int_equal(add(kl, A, 0, "x\0"), RT_EINVAL);
    ps_keylog_keys_close(&out);
    ps_keylog_destroy(kl);
}

/* Over budget, the oldest committed entries go; a position older than the
 * log reaches answers "too old". */
static void test_truncate_too_old(void **state)
{
    (void)state;
    size_t cost = entry_cost(1, 4);
    struct ps_keylog *kl;
    struct ps_keylog_keys out = {0};
    struct ps_keylog_range_info info;
    /* Room for the range record and three entries of one 4-byte key. */
    assert_int_equal(ps_keylog_create(1, &kl), 0);
    assert_int_equal(ps_keylog_set_cw(kl, A, 100), 0);
    size_t rec = ps_keylog_bytes(kl);
    ps_keylog_destroy(kl);
    assert_int_equal(ps_keylog_create(rec + 3 * cost, &kl), 0);
    assert_int_equal(ps_keylog_set_cw(kl, A, 100), 0);
    assert_int_equal(add(kl, A, 1, "k001\0"), 0);
    assert_int_equal(add(kl, A, 2, "k002\0"), 0);
    assert_int_equal(add(kl, A, 3, "k003\0"), 0);
    assert_int_equal(ps_keylog_bytes(kl), rec + 3 * cost);
    assert_int_equal(add(kl, A, 4, "k004\0"), 0);
    assert_int_equal(add(kl, A, 5, "k005\0"), 0);
    assert_true(ps_keylog_bytes(kl) <= ps_keylog_budget(kl));
    assert_int_equal(ps_keylog_range_get(kl, A, &info), 0);
    assert_int_equal(info.base, 2);
    assert_int_equal(info.last, 5);
    assert_int_equal(info.n_entries, 3);
    assert_int_equal(ps_keylog_changed(kl, A, 1, 5, &out), RT_ENOTFOUND);
    assert_int_equal(ps_keylog_changed(kl, A, 0, 3, &out), RT_ENOTFOUND);
    assert_int_equal(ps_keylog_changed(kl, A, 2, 5, &out), 3);
    assert_string_equal(joined(&out), "k003,k004,k005,");
    ps_keylog_keys_close(&out);
    ps_keylog_destroy(kl);
}

/* Entries above cw are never truncated, even far over budget; raising cw
 * lets them go. */
static void test_never_above_cw(void **state)
{
    (void)state;
    struct ps_keylog *kl;
    struct ps_keylog_keys out = {0};
    struct ps_keylog_range_info info;
    assert_int_equal(ps_keylog_create(1, &kl), 0);
    assert_int_equal(ps_keylog_set_cw(kl, A, 2), 0);
    for (uint64_t lsn = 1; lsn <= 6; lsn++) {
        assert_int_equal(add(kl, A, lsn, "key\0"), 0);
    }
    assert_int_equal(ps_keylog_range_get(kl, A, &info), 0);
    assert_int_equal(info.base, 2);
    assert_int_equal(info.n_entries, 4);
    assert_true(ps_keylog_bytes(kl) > ps_keylog_budget(kl));
    assert_int_equal(ps_keylog_changed(kl, A, 2, 6, &out), 1);
    /* cw never goes back. */
    assert_int_equal(ps_keylog_set_cw(kl, A, 1), 0);
    assert_int_equal(ps_keylog_range_get(kl, A, &info), 0);
    assert_int_equal(info.cw, 2);
    assert_int_equal(ps_keylog_set_cw(kl, A, 5), 0);
    assert_int_equal(ps_keylog_range_get(kl, A, &info), 0);
    assert_int_equal(info.base, 5);
    assert_int_equal(info.n_entries, 1);
    /* Everything committed: the log may empty, and still answers for the
     * position it ends at. */
    assert_int_equal(ps_keylog_set_cw(kl, A, 6), 0);
    assert_int_equal(ps_keylog_range_get(kl, A, &info), 0);
    assert_int_equal(info.n_entries, 0);
    assert_int_equal(info.base, 6);
    assert_int_equal(ps_keylog_changed(kl, A, 6, 6, &out), 0);
    assert_int_equal(ps_keylog_changed(kl, A, 5, 6, &out), RT_ENOTFOUND);
    /* The next group continues from there. */
    assert_int_equal(add(kl, A, 7, "key\0"), 0);
    assert_int_equal(ps_keylog_range_get(kl, A, &info), 0);
    assert_int_equal(info.base, 6);
    assert_int_equal(info.last, 7);
    ps_keylog_keys_close(&out);
    ps_keylog_destroy(kl);
}

/* Truncation takes the oldest entries across ranges, skipping a range's
 * entries above its cw and taking younger committed ones instead. */
static void test_oldest_first_across_ranges(void **state)
{
    (void)state;
    size_t cost = entry_cost(1, 2);
    struct ps_keylog *kl;
    struct ps_keylog_range_info a;
    struct ps_keylog_range_info b;
    assert_int_equal(ps_keylog_create(1, &kl), 0);
    assert_int_equal(ps_keylog_set_cw(kl, A, 100), 0);
    assert_int_equal(ps_keylog_set_cw(kl, B, 100), 0);
    size_t recs = ps_keylog_bytes(kl);
    ps_keylog_destroy(kl);
    assert_int_equal(ps_keylog_create(recs + 4 * cost, &kl), 0);
    assert_int_equal(ps_keylog_set_cw(kl, A, 100), 0);
    assert_int_equal(ps_keylog_set_cw(kl, B, 0), 0);
    /* Append order B1 A1 B2 A2 fills the budget; B has nothing committed. */
    assert_int_equal(add(kl, B, 1, "b1\0"), 0);
    assert_int_equal(add(kl, A, 1, "a1\0"), 0);
    assert_int_equal(add(kl, B, 2, "b2\0"), 0);
    assert_int_equal(add(kl, A, 2, "a2\0"), 0);
    assert_int_equal(ps_keylog_bytes(kl), recs + 4 * cost);
    /* The oldest, B1, is above B's cw: A1 goes instead. */
    assert_int_equal(add(kl, A, 3, "a3\0"), 0);
    assert_int_equal(ps_keylog_range_get(kl, A, &a), 0);
    assert_int_equal(ps_keylog_range_get(kl, B, &b), 0);
    assert_int_equal(a.base, 1);
    assert_int_equal(b.base, 0);
    assert_int_equal(b.n_entries, 2);
    /* Then A2, skipping B1 and B2. */
    assert_int_equal(add(kl, A, 4, "a4\0"), 0);
    assert_int_equal(ps_keylog_range_get(kl, A, &a), 0);
    assert_int_equal(a.base, 2);
    /* B commits: now B1, the oldest, goes first, before A3. */
    assert_int_equal(ps_keylog_set_cw(kl, B, 2), 0);
    assert_int_equal(ps_keylog_bytes(kl), recs + 4 * cost);
    assert_int_equal(add(kl, A, 5, "a5\0"), 0);
    assert_int_equal(ps_keylog_range_get(kl, A, &a), 0);
    assert_int_equal(ps_keylog_range_get(kl, B, &b), 0);
    assert_int_equal(a.base, 2);
    assert_int_equal(b.base, 1);
    assert_int_equal(ps_keylog_bytes(kl), recs + 4 * cost);
    assert_int_equal(a.bytes + b.bytes, ps_keylog_bytes(kl));
    ps_keylog_destroy(kl);
}

/* An LSN past last + 1 restarts the range's log there: the positions
 * before it are too old. */
static void test_gap_restarts(void **state)
{
    (void)state;
    struct ps_keylog *kl;
    struct ps_keylog_keys out = {0};
    struct ps_keylog_range_info info;
    assert_int_equal(ps_keylog_create(1 << 20, &kl), 0);
    assert_int_equal(add(kl, A, 1, "x\0"), 0);
    assert_int_equal(add(kl, A, 2, "y\0"), 0);
    size_t two = ps_keylog_bytes(kl);
    assert_int_equal(add(kl, A, 5, "z\0"), 0);
    assert_int_equal(ps_keylog_range_get(kl, A, &info), 0);
    assert_int_equal(info.base, 4);
    assert_int_equal(info.n_entries, 1);
    assert_true(ps_keylog_bytes(kl) < two);
    assert_int_equal(ps_keylog_changed(kl, A, 2, 5, &out), RT_ENOTFOUND);
    assert_int_equal(ps_keylog_changed(kl, A, 4, 5, &out), 1);
    assert_string_equal(joined(&out), "z,");
    /* A log that starts above 1 (after a restart) starts at lsn - 1. */
    assert_int_equal(add(kl, B, 40, "q\0"), 0);
    assert_int_equal(ps_keylog_changed(kl, B, 39, 40, &out), 1);
    assert_int_equal(ps_keylog_changed(kl, B, 38, 40, &out), RT_ENOTFOUND);
    ps_keylog_keys_close(&out);
    ps_keylog_destroy(kl);
}

/* Bytes follow what is held: each entry costs its header, index and key
 * bytes; dropping a range gives back exactly what it held. */
static void test_drop_accounting(void **state)
{
    (void)state;
    struct ps_keylog *kl;
    struct ps_keylog_keys out = {0};
    struct ps_keylog_range_info info;
    assert_int_equal(ps_keylog_create(1 << 20, &kl), 0);
    assert_int_equal(ps_keylog_bytes(kl), 0);
    assert_int_equal(add(kl, A, 1, "aaaa\0"), 0);
    size_t only_a = ps_keylog_bytes(kl);
    assert_true(entry_cost(2, 10) > entry_cost(1, 10));
    assert_int_equal(entry_cost(1, 10), entry_cost(1, 4) + 6);
    assert_int_equal(add(kl, B, 1, "b1\0b2\0"), 0);
    assert_int_equal(add(kl, B, 2, "b3\0"), 0);
    assert_int_equal(ps_keylog_range_get(kl, B, &info), 0);
    assert_int_equal(ps_keylog_bytes(kl), only_a + info.bytes);
    assert_int_equal(ps_keylog_drop_range(kl, B), 0);
    assert_int_equal(ps_keylog_bytes(kl), only_a);
    assert_int_equal(ps_keylog_drop_range(kl, B), RT_ENOTFOUND);
    assert_int_equal(ps_keylog_range_get(kl, B, &info), RT_ENOTFOUND);
    assert_int_equal(ps_keylog_changed(kl, B, 0, 1, &out), RT_ENOTFOUND);
    assert_int_equal(ps_keylog_changed(kl, A, 0, 1, &out), 1);
    assert_int_equal(ps_keylog_drop_range(kl, A), 0);
    assert_int_equal(ps_keylog_bytes(kl), 0);
    ps_keylog_destroy(kl);
    assert_int_equal(ps_keylog_create(0, &kl), RT_EINVAL);
    ps_keylog_keys_close(&out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_changed_dedup),
        cmocka_unit_test(test_truncate_too_old),
        cmocka_unit_test(test_never_above_cw),
        cmocka_unit_test(test_oldest_first_across_ranges),
        cmocka_unit_test(test_gap_restarts),
        cmocka_unit_test(test_drop_accounting),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
