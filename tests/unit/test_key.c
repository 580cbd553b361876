/* Storage key encoding: order preservation (UTF-16 code-unit order, checked
 * against an independent UTF-16 encoder), self-delimiting, splitting, and
 * reading keys of format 1 (raw UTF-8 bytes). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "rt_err.h"
#include "rt_key.h"
#include "rt_utf8.h"

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

/* The order keys must sort in: Azure's (UTF-16 code units), checked
 * against an independent UTF-16 encoder in test_utf16_* below. */
static int ordinal_cmp(const char *a, size_t an, const char *b, size_t bn)
{
    return rt_utf16_cmp(a, an, b, bn);
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
    KV(""),
    KV("\0"),
    KV("\0\0"),
    KV("\0\x01"),
    KV("\0\xff"),
    KV("\x01"),
    KV("a"),
    KV("a\0"),
    KV("a\0b"),
    KV("a\x01"),
    KV("ab"),
    KV("abc"),
    KV("b"),
    KV("\xff"),
    KV("\xff\0"),
    KV("a\0\0"),
    KV("\xc3\xa9"),
    KV("Z"),
    KV("a\xff"),
    KV("\x7f"),
    /* U+E000, U+FF01, U+1F600, with NULs around them: the byte map and
     * the escape together. */
    KV("\xee\x80\x80"),
    KV("\xee\x80\x80\0"),
    KV("\0\xee\x80\x80"),
    KV("\xef\xbc\x81"),
    KV("\xf0\x9f\x98\x80"),
    KV("\xf0\x9f\x98\x80\0a"),
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

/* UTF-16 order, computed independently of rt_utf8: code points to UTF-16
 * code units, compared unit by unit. */

static size_t to_utf16(const uint32_t *cp, size_t n, uint16_t *out)
{
    size_t u = 0;
    for (size_t i = 0; i < n; i++) {
        if (cp[i] >= 0x10000) {
            uint32_t v = cp[i] - 0x10000;
            out[u++] = (uint16_t)(0xD800 + (v >> 10));
            out[u++] = (uint16_t)(0xDC00 + (v & 0x3FF));
        } else {
            out[u++] = (uint16_t)cp[i];
        }
    }
    return u;
}

static int utf16_order(const uint32_t *a,
                       size_t an,
                       const uint32_t *b,
                       size_t bn)
{
    uint16_t x[64], y[64];
    size_t xn = to_utf16(a, an, x), yn = to_utf16(b, bn, y);
    for (size_t i = 0; i < xn && i < yn; i++) {
        if (x[i] != y[i]) {
            return x[i] < y[i] ? -1 : 1;
        }
    }
    return xn < yn ? -1 : xn > yn ? 1 : 0;
}

/* Hand-written UTF-8 encoder, so the test does not trust rt_utf8_encode. */
static size_t to_utf8(const uint32_t *cp, size_t n, char *out)
{
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t c = cp[i];
        if (c < 0x80) {
            out[o++] = (char)c;
        } else if (c < 0x800) {
            out[o++] = (char)(0xC0 | (c >> 6));
            out[o++] = (char)(0x80 | (c & 0x3F));
        } else if (c < 0x10000) {
            out[o++] = (char)(0xE0 | (c >> 12));
            out[o++] = (char)(0x80 | ((c >> 6) & 0x3F));
            out[o++] = (char)(0x80 | (c & 0x3F));
        } else {
            out[o++] = (char)(0xF0 | (c >> 18));
            out[o++] = (char)(0x80 | ((c >> 12) & 0x3F));
            out[o++] = (char)(0x80 | ((c >> 6) & 0x3F));
            out[o++] = (char)(0x80 | (c & 0x3F));
        }
    }
    return o;
}

/* The boundaries of every UTF-8 length and of both remapped groups. */
static const uint32_t edges[] = {
    0x01,    0x41,    0x7F,    0x80,     0x7FF,    0x800,  0xD7FF,
    0xE000,  0xE001,  0xEFFF,  0xF000,   0xFF01,   0xFFFD, 0xFFFF,
    0x10000, 0x1F600, 0xFFFFF, 0x100000, 0x10FFFF,
};
#define NEDGES (sizeof(edges) / sizeof(edges[0]))

/* Checks rt_utf16_cmp, rt_utf16_cmpz, the order of storage keys (as PK and
 * as RK) and the split round trip for the strings @a and @b. */
static void check_pair(const uint32_t *a,
                       size_t an,
                       const uint32_t *b,
                       size_t bn)
{
    char x[256], y[256];
    size_t xn = to_utf8(a, an, x), yn = to_utf8(b, bn, y);
    int want = utf16_order(a, an, b, bn);
    struct rt_buf k1 = RT_BUF_INIT, k2 = RT_BUF_INIT, pk = RT_BUF_INIT,
                  rk = RT_BUF_INIT;
    uint64_t id;

    assert_int_equal(rt_utf16_cmp(x, xn, y, yn), want);
    x[xn] = y[yn] = '\0';
    assert_int_equal(rt_utf16_cmpz(x, y), want);
    rt_key_entity(&k1, 9, x, xn, "r", 1);
    rt_key_entity(&k2, 9, y, yn, "r", 1);
    assert_int_equal(sign(key_cmp(&k1, &k2)), want);
    rt_buf_reset(&k1);
    rt_buf_reset(&k2);
    rt_key_entity(&k1, 9, "p", 1, x, xn);
    rt_key_entity(&k2, 9, "p", 1, y, yn);
    assert_int_equal(sign(key_cmp(&k1, &k2)), want);
    assert_int_equal(rt_key_split(k1.data, k1.len, &id, &pk, &rk), 0);
    assert_int_equal(rk.len, xn);
    assert_memory_equal(rk.data, x, xn);
    rt_buf_free(&k1);
    rt_buf_free(&k2);
    rt_buf_free(&pk);
    rt_buf_free(&rk);
}

/* Every pair of boundary code points, alone, after a common prefix and
 * followed by other boundary characters: the comparison and the key order
 * are UTF-16 order (U+10000 and U+10FFFF before U+E000 and U+FFFF). */
static void test_utf16_edges(void **state)
{
    (void)state;
    for (size_t i = 0; i < NEDGES; i++) {
        for (size_t j = 0; j < NEDGES; j++) {
            uint32_t a[3] = {edges[i]}, b[3] = {edges[j]};
            check_pair(a, 1, b, 1);
            for (size_t k = 0; k < NEDGES; k += 4) {
                uint32_t c[3] = {0x61, edges[i], edges[k]};
                uint32_t d[3] = {0x61, edges[j], edges[(k + 5) % NEDGES]};
                check_pair(c, 3, d, 3);
                a[1] = edges[k];
                check_pair(a, 2, b, 1); /* b is a prefix or differs */
            }
        }
    }
    /* The case that was wrong: an emoji sorts before U+FF01. */
    assert_true(rt_utf16_cmpz("\xf0\x9f\x98\x80", "\xef\xbc\x81") < 0);
    assert_true(rt_utf16_cmpz("\xf4\x8f\xbf\xbf", "\xee\x80\x80") < 0);
    assert_true(rt_utf16_cmpz("\xed\x9f\xbf", "\xf0\x90\x80\x80") < 0);
    assert_true(rt_utf16_cmpz("", "\xee\x80\x80") < 0);
}

static uint32_t rand_cp(void)
{
    /* Weighted to the ranges where the orders differ. */
    switch (rand() % 6) {
        case 0:
            return 0x20 + (uint32_t)(rand() % 0x5F);
        case 1:
            return 0x80 + (uint32_t)(rand() % (0xD800 - 0x80));
        case 2:
        case 3:
            return 0xE000 + (uint32_t)(rand() % 0x2000);
        default:
            return 0x10000 + (uint32_t)(rand() % 0x100000);
    }
}

struct rstr
{
    uint32_t cp[8];
    size_t n;
    struct rt_buf key;
};

static int cmp_by_key(const void *a, const void *b)
{
    return key_cmp(&((const struct rstr *)a)->key,
                   &((const struct rstr *)b)->key);
}

/* Random strings sorted by their storage keys (memcmp) come out in UTF-16
 * code-unit order, and every pair compares the same way. */
static void test_utf16_random_sort(void **state)
{
    enum { N = 2000 };
    struct rstr *v = calloc(N, sizeof(*v));
    (void)state;
    srand(1234);
    for (size_t i = 0; i < N; i++) {
        char s[64];
        v[i].n = (size_t)(rand() % 5);
        for (size_t j = 0; j < v[i].n; j++) {
            v[i].cp[j] = rand_cp();
        }
        rt_key_pk_prefix(&v[i].key, 4, s, to_utf8(v[i].cp, v[i].n, s));
    }
    qsort(v, N, sizeof(*v), cmp_by_key);
    for (size_t i = 1; i < N; i++) {
        assert_true(utf16_order(v[i - 1].cp, v[i - 1].n, v[i].cp, v[i].n) <= 0);
    }
    for (size_t i = 0; i < 20000; i++) {
        size_t a = (size_t)rand() % N, b = (size_t)rand() % N;
        check_pair(v[a].cp, v[a].n, v[b].cp, v[b].n);
    }
    for (size_t i = 0; i < N; i++) {
        rt_buf_free(&v[i].key);
    }
    free(v);
}

/* The exact bytes of format 2: 0xEE/0xEF leads become 0xF5/0xF6, the
 * continuation bytes and other leads stay. */
static void test_utf16_exact_bytes(void **state)
{
    struct rt_buf k = RT_BUF_INIT;
    static const uint8_t want[] = {0xF5, 0x80, 0x80, 0xF6, 0xBF,
                                   0xBF, 0xF0, 0x9F, 0x98, 0x80,
                                   0xED, 0x9F, 0xBF, 0,    1};
    (void)state;
    rt_key_enc(&k, "\xee\x80\x80\xef\xbf\xbf\xf0\x9f\x98\x80\xed\x9f\xbf", 13);
    assert_int_equal(k.len, sizeof(want));
    assert_memory_equal(k.data, want, sizeof(want));
    rt_buf_free(&k);
}

/* A key of format 1 (raw 0xEE/0xEF) decodes to the same strings as its
 * format 2 form, so a store can be read while it is being migrated. */
static void test_format1_decodes(void **state)
{
    static const uint8_t old[] = {0,    0,    0,    0,    0,    0, 0,
                                  3,    'a',  0xEE, 0x80, 0x80, 0, 1,
                                  0xEF, 0xBC, 0x81, 0,    1};
    struct rt_buf pk = RT_BUF_INIT, rk = RT_BUF_INIT, nk = RT_BUF_INIT;
    uint64_t id = 0;
    (void)state;
    assert_int_equal(rt_key_split(old, sizeof(old), &id, &pk, &rk), 0);
    assert_true(id == 3);
    assert_int_equal(pk.len, 4);
    assert_memory_equal(pk.data, "a\xee\x80\x80", 4);
    assert_int_equal(rk.len, 3);
    assert_memory_equal(rk.data, "\xef\xbc\x81", 3);
    rt_key_entity(&nk, id, (const char *)pk.data, pk.len, (const char *)rk.data,
                  rk.len);
    assert_int_equal(nk.len, sizeof(old));
    assert_memory_not_equal(nk.data, old, sizeof(old));
    assert_int_equal(nk.data[9], 0xF5);
    assert_int_equal(nk.data[14], 0xF6);
    rt_buf_free(&pk);
    rt_buf_free(&rk);
    rt_buf_free(&nk);
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
        cmocka_unit_test(test_utf16_edges),
        cmocka_unit_test(test_utf16_random_sort),
        cmocka_unit_test(test_utf16_exact_bytes),
        cmocka_unit_test(test_format1_decodes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
