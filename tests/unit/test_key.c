/* Storage key encoding: order preservation, self-delimiting, splitting. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "rt_err.h"
#include "rt_key.h"

/* Fixture / Helpers */

struct kv
{
    const char *s;
    size_t n;
};

#define KV(lit)              \
    {                        \
        lit, sizeof(lit) - 1 \
    }

static int ordinal_cmp(const char *a, size_t an, const char *b, size_t bn)
{
    size_t m = an < bn ? an : bn;
    int c = memcmp(a, b, m);
    if (c) {
        return c;
    }
    return an < bn ? -1 : an > bn ? 1 : 0;
}

static int sign(int v)
{
    return v < 0 ? -1 : v > 0 ? 1 : 0;
}

static int key_cmp(const struct rt_buf *a, const struct rt_buf *b)
{
    return ordinal_cmp((const char *)a->data, a->len, (const char *)b->data,
                       b->len);
}

static const struct kv samples[] = {
    KV(""),      KV("\0"),       KV("\0\0"), KV("\0\x01"), KV("\0\xff"),
    KV("\x01"),  KV("a"),        KV("a\0"),  KV("a\0b"),   KV("a\x01"),
    KV("ab"),    KV("abc"),      KV("b"),    KV("\xff"),   KV("\xff\0"),
    KV("a\0\0"), KV("\xc3\xa9"), KV("Z"),    KV("a\xff"),  KV("\x7f"),
};
#define NSAMPLES (sizeof(samples) / sizeof(samples[0]))

/* Tests */

/* memcmp order of entity keys equals (PK, RK) ordinal order, embedded NULs
 * and prefixes included. */
static void test_order_pk_rk(void **state)
{
    (void)state;
    for (size_t a = 0; a < NSAMPLES; a++) {
        for (size_t b = 0; b < NSAMPLES; b++) {
            for (size_t c = 0; c < NSAMPLES; c += 3) {
                for (size_t d = 0; d < NSAMPLES; d += 2) {
                    struct rt_buf k1 = RT_BUF_INIT, k2 = RT_BUF_INIT;
                    rt_key_entity(&k1, 7, samples[a].s, samples[a].n,
                                  samples[c].s, samples[c].n);
                    rt_key_entity(&k2, 7, samples[b].s, samples[b].n,
                                  samples[d].s, samples[d].n);
                    int want = ordinal_cmp(samples[a].s, samples[a].n,
                                           samples[b].s, samples[b].n);
                    if (want == 0) {
                        want = ordinal_cmp(samples[c].s, samples[c].n,
                                           samples[d].s, samples[d].n);
                    }
                    assert_int_equal(sign(key_cmp(&k1, &k2)), sign(want));
                    rt_buf_free(&k1);
                    rt_buf_free(&k2);
                }
            }
        }
    }
}

/* The table id dominates: every key of table 1 sorts before table 2, and
 * table_end(1) lies between them. */
static void test_order_table(void **state)
{
    struct rt_buf a = RT_BUF_INIT, b = RT_BUF_INIT, end = RT_BUF_INIT;
    (void)state;
    rt_key_entity(&a, 1, "\xff\xff\xff", 3, "\xff", 1);
    rt_key_entity(&b, 2, "", 0, "", 0);
    rt_key_table_end(&end, 1);
    assert_true(key_cmp(&a, &b) < 0);
    assert_true(key_cmp(&a, &end) < 0);
    assert_true(key_cmp(&end, &b) <= 0);
    assert_int_equal(end.len, 8);
    assert_memory_equal(end.data, "\0\0\0\0\0\0\0\x02", 8);
    rt_buf_free(&a);
    rt_buf_free(&b);
    rt_buf_free(&end);
}

/* The encoding is exactly the documented bytes: big-endian id, 0x00 -> 00 FF,
 * terminator 00 01. */
static void test_exact_bytes(void **state)
{
    struct rt_buf k = RT_BUF_INIT;
    static const uint8_t want[] = {0,   0, 0,    0,   0, 0, 1, 2,
                                   'a', 0, 0xff, 'b', 0, 1, 0, 1};
    (void)state;
    rt_key_entity(&k, 0x102, "a\0b", 3, "", 0);
    assert_int_equal(k.len, sizeof(want));
    assert_memory_equal(k.data, want, sizeof(want));
    rt_buf_free(&k);
}

/* A PK prefix bounds exactly the keys of that partition from below, and
 * sorts after every key of smaller partitions. */
static void test_pk_prefix(void **state)
{
    struct rt_buf pre = RT_BUF_INIT, k = RT_BUF_INIT, lo = RT_BUF_INIT;
    (void)state;
    rt_key_pk_prefix(&pre, 3, "p", 1);
    rt_key_entity(&k, 3, "p", 1, "", 0);
    rt_key_entity(&lo, 3, "\x6f\xff", 2, "zzz", 3); /* "o\xff" < "p" */
    assert_true(key_cmp(&pre, &k) < 0);
    assert_memory_equal(k.data, pre.data, pre.len);
    assert_true(key_cmp(&lo, &pre) < 0);
    rt_buf_free(&pre);
    rt_buf_free(&k);
    rt_buf_free(&lo);
}

/* Split gives back the table id, PK and RK exactly for every sample. */
static void test_split_roundtrip(void **state)
{
    (void)state;
    for (size_t a = 0; a < NSAMPLES; a++) {
        for (size_t b = 0; b < NSAMPLES; b++) {
            struct rt_buf k = RT_BUF_INIT, pk = RT_BUF_INIT, rk = RT_BUF_INIT;
            uint64_t id = 0;
            rt_key_entity(&k, 0x0123456789abcdefULL, samples[a].s, samples[a].n,
                          samples[b].s, samples[b].n);
            assert_int_equal(rt_key_split(k.data, k.len, &id, &pk, &rk), 0);
            assert_true(id == 0x0123456789abcdefULL);
            assert_int_equal(pk.len, samples[a].n);
            assert_int_equal(rk.len, samples[b].n);
            if (pk.len) {
                assert_memory_equal(pk.data, samples[a].s, pk.len);
            }
            if (rk.len) {
                assert_memory_equal(rk.data, samples[b].s, rk.len);
            }
            rt_buf_free(&k);
            rt_buf_free(&pk);
            rt_buf_free(&rk);
        }
    }
}

/* Decoding one string reports the bytes consumed, terminator included. */
static void test_dec_consumed(void **state)
{
    struct rt_buf out = RT_BUF_INIT;
    static const uint8_t in[] = {'x', 0, 0xff, 0, 1, 'r', 0, 1};
    size_t used = 0;
    (void)state;
    assert_int_equal(rt_key_dec(in, sizeof(in), &used, &out), 0);
    assert_int_equal(used, 5);
    assert_int_equal(out.len, 2);
    assert_memory_equal(out.data, "x\0", 2);
    rt_buf_free(&out);
}

/* Corrupt keys (short, bad escape, missing terminator, trailing bytes) are
 * rejected and leave the output buffers as they were. */
static void test_split_corrupt(void **state)
{
    static const struct
    {
        const char *k;
        size_t n;
    } bad[] = {
        {"", 0},
        {"\0\0\0\0\0\0\0", 7},
        {"\0\0\0\0\0\0\0\x01", 8},
        {"\0\0\0\0\0\0\0\x01"
         "a\0\x01",
         11},
        {"\0\0\0\0\0\0\0\x01"
         "a\0\x02\0\x01",
         13},
        {"\0\0\0\0\0\0\0\x01"
         "\0\x01\0\x01x",
         13},
        {"\0\0\0\0\0\0\0\x01"
         "\0\x01\0",
         11},
        {"\0\0\0\0\0\0\0\x01"
         "\0\x01\0\x01\0\x01",
         14},
    };
    (void)state;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct rt_buf pk = RT_BUF_INIT, rk = RT_BUF_INIT;
        uint64_t id = 99;
        rt_buf_append(&pk, "keep", 4);
        assert_int_equal(
            rt_key_split((const uint8_t *)bad[i].k, bad[i].n, &id, &pk, &rk),
            RT_ECORRUPT);
        assert_int_equal(pk.len, 4);
        assert_int_equal(rk.len, 0);
        assert_true(id == 99);
        rt_buf_free(&pk);
        rt_buf_free(&rk);
    }
}

/* Every truncation of a valid key is rejected without reading past the end
 * (heap copy of exactly n bytes, so ASan sees any overread). */
static void test_split_truncated(void **state)
{
    struct rt_buf k = RT_BUF_INIT;
    (void)state;
    rt_key_entity(&k, 5, "p\0q", 3, "r\0", 2);
    for (size_t n = 0; n < k.len; n++) {
        struct rt_buf pk = RT_BUF_INIT, rk = RT_BUF_INIT;
        uint64_t id;
        uint8_t *copy = malloc(n ? n : 1);
        memcpy(copy, k.data, n);
        assert_int_equal(rt_key_split(copy, n, &id, &pk, &rk), RT_ECORRUPT);
        free(copy);
        rt_buf_free(&pk);
        rt_buf_free(&rk);
    }
    rt_buf_free(&k);
}

/* The longest keys we accept fit RT_KEY_MAX. */
static void test_key_max(void **state)
{
    struct rt_buf k = RT_BUF_INIT;
    char *s = calloc(4096, 1); /* all NUL: worst case doubling */
    (void)state;
    rt_key_entity(&k, 1, s, 4096, s, 4096);
    assert_true(k.len <= RT_KEY_MAX);
    free(s);
    rt_buf_free(&k);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_order_pk_rk),
        cmocka_unit_test(test_order_table),
        cmocka_unit_test(test_exact_bytes),
        cmocka_unit_test(test_pk_prefix),
        cmocka_unit_test(test_split_roundtrip),
        cmocka_unit_test(test_dec_consumed),
        cmocka_unit_test(test_split_corrupt),
        cmocka_unit_test(test_split_truncated),
        cmocka_unit_test(test_key_max),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
