/* Entity binary codec: properties blob and stored value. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "rt_crc32c.h"
#include "rt_entity.h"
#include "rt_err.h"
#include "th_props.h"

/* Fixture / Helpers */

/* A blob with one property of every type. */
static void build_all(struct rt_buf *b)
{
    struct rt_props_writer w;
    struct rt_prop p;
    static const uint8_t bin[] = {0, 1, 2, 0xff};

    rt_props_begin(&w, b);
    p = th_prop_str("S", "h\xc3\xa9llo");
    rt_props_add(&w, &p);
    p = th_prop("Bin", RT_EDM_BINARY);
    p.v.bytes.p = bin;
    p.v.bytes.n = sizeof(bin);
    rt_props_add(&w, &p);
    p = th_prop("B", RT_EDM_BOOL);
    p.v.b = 1;
    rt_props_add(&w, &p);
    p = th_prop("When", RT_EDM_DATETIME);
    p.v.ticks = 633515328000000000ULL;
    rt_props_add(&w, &p);
    p = th_prop("D", RT_EDM_DOUBLE);
    p.v.d = -1.5e300;
    rt_props_add(&w, &p);
    p = th_prop("G", RT_EDM_GUID);
    for (int i = 0; i < 16; i++) {
        p.v.guid[i] = (uint8_t)(0xf0 + i);
    }
    rt_props_add(&w, &p);
    p = th_prop_i32("I", INT32_MIN);
    rt_props_add(&w, &p);
    p = th_prop("L", RT_EDM_INT64);
    p.v.i64 = INT64_MIN + 1;
    rt_props_add(&w, &p);
    p = th_prop_str("Empty", "");
    rt_props_add(&w, &p);
    rt_props_end(&w);
}

/* Tests */

/* Every type survives writer -> iterator unchanged, in the given order. */
static void test_roundtrip_all_types(void **state)
{
    struct rt_buf b = RT_BUF_INIT;
    struct rt_props_iter it;
    struct rt_prop p;
    (void)state;
    build_all(&b);
    assert_int_equal(rt_props_check(b.data, b.len), 0);
    assert_int_equal(rt_get_u16le(b.data), 9);
    assert_int_equal(rt_props_iter_init(&it, b.data, b.len), 0);

    assert_int_equal(rt_props_next(&it, &p), 1);
    assert_int_equal(p.type, RT_EDM_STRING);
    assert_int_equal(p.name_len, 1);
    assert_memory_equal(p.name, "S", 1);
    assert_int_equal(p.v.bytes.n, 6);
    assert_memory_equal(p.v.bytes.p, "h\xc3\xa9llo", 6);

    assert_int_equal(rt_props_next(&it, &p), 1);
    assert_int_equal(p.type, RT_EDM_BINARY);
    assert_int_equal(p.v.bytes.n, 4);
    assert_memory_equal(p.v.bytes.p, "\0\x01\x02\xff", 4);

    assert_int_equal(rt_props_next(&it, &p), 1);
    assert_int_equal(p.type, RT_EDM_BOOL);
    assert_int_equal(p.v.b, 1);

    assert_int_equal(rt_props_next(&it, &p), 1);
    assert_int_equal(p.type, RT_EDM_DATETIME);
    assert_true(p.v.ticks == 633515328000000000ULL);

    assert_int_equal(rt_props_next(&it, &p), 1);
    assert_int_equal(p.type, RT_EDM_DOUBLE);
    assert_true(p.v.d == -1.5e300);

    assert_int_equal(rt_props_next(&it, &p), 1);
    assert_int_equal(p.type, RT_EDM_GUID);
    assert_int_equal(p.v.guid[0], 0xf0);
    assert_int_equal(p.v.guid[15], 0xff);

    assert_int_equal(rt_props_next(&it, &p), 1);
    assert_int_equal(p.type, RT_EDM_INT32);
    assert_int_equal(p.v.i32, INT32_MIN);

    assert_int_equal(rt_props_next(&it, &p), 1);
    assert_int_equal(p.type, RT_EDM_INT64);
    assert_true(p.v.i64 == INT64_MIN + 1);

    assert_int_equal(rt_props_next(&it, &p), 1);
    assert_int_equal(p.type, RT_EDM_STRING);
    assert_int_equal(p.v.bytes.n, 0);

    assert_int_equal(rt_props_next(&it, &p), 0);
    rt_buf_free(&b);
}

/* The wire layout is exactly the documented one (count, type, name, LE). */
static void test_exact_layout(void **state)
{
    struct rt_buf b = RT_BUF_INIT;
    struct rt_props_writer w;
    struct rt_prop p = th_prop_i32("Ab", 0x01020304);
    static const uint8_t want[] = {1, 0, RT_EDM_INT32, 2, 'A', 'b', 4, 3, 2, 1};
    (void)state;
    rt_props_begin(&w, &b);
    rt_props_add(&w, &p);
    rt_props_end(&w);
    assert_int_equal(b.len, sizeof(want));
    assert_memory_equal(b.data, want, sizeof(want));
    rt_buf_free(&b);
}

/* NaN and negative zero keep their bit patterns. */
static void test_double_bits(void **state)
{
    struct rt_buf b = RT_BUF_INIT;
    struct rt_props_writer w;
    struct rt_prop p = th_prop("D", RT_EDM_DOUBLE), q;
    (void)state;
    rt_props_begin(&w, &b);
    p.v.d = NAN;
    rt_props_add(&w, &p);
    p.v.d = -0.0;
    rt_props_add(&w, &p);
    rt_props_end(&w);
    assert_int_equal(rt_props_find(b.data, b.len, "D", 1, &q), 1);
    assert_true(isnan(q.v.d));
    struct rt_props_iter it;
    rt_props_iter_init(&it, b.data, b.len);
    rt_props_next(&it, &q);
    assert_int_equal(rt_props_next(&it, &q), 1);
    assert_true(q.v.d == 0.0 && signbit(q.v.d));
    rt_buf_free(&b);
}

/* An empty blob is two zero bytes and iterates to nothing. */
static void test_empty_blob(void **state)
{
    struct rt_buf b = RT_BUF_INIT;
    struct rt_props_writer w;
    struct rt_props_iter it;
    struct rt_prop p;
    (void)state;
    rt_props_begin(&w, &b);
    rt_props_end(&w);
    assert_int_equal(b.len, 2);
    assert_int_equal(rt_props_check(b.data, b.len), 0);
    assert_int_equal(rt_props_iter_init(&it, b.data, b.len), 0);
    assert_int_equal(rt_props_next(&it, &p), 0);
    assert_int_equal(rt_props_find(b.data, b.len, "x", 1, &p), 0);
    rt_buf_free(&b);
}

/* A blob truncated at any byte offset is reported corrupt, never read past
 * its end (each prefix is a heap copy of exactly that size). */
static void test_truncated_every_offset(void **state)
{
    struct rt_buf b = RT_BUF_INIT;
    (void)state;
    build_all(&b);
    for (size_t n = 0; n < b.len; n++) {
        uint8_t *copy = malloc(n ? n : 1);
        struct rt_prop p;
        struct rt_buf m = RT_BUF_INIT;
        memcpy(copy, b.data, n);
        assert_int_equal(rt_props_check(copy, n), RT_ECORRUPT);
        int rv = rt_props_find(copy, n, "nope", 4, &p);
        assert_true(rv == RT_ECORRUPT);
        assert_int_equal(rt_props_merge(&m, copy, n, b.data, b.len),
                         RT_ECORRUPT);
        assert_int_equal(m.len, 0);
        free(copy);
        rt_buf_free(&m);
    }
    rt_buf_free(&b);
}

/* Unknown types, zero-length names, bools other than 0/1, bad counts and
 * trailing bytes are corrupt. */
static void test_corrupt_fields(void **state)
{
    static const struct
    {
        const char *b;
        size_t n;
    } bad[] = {
        {"\x01\x00\x09\x01x", 5},                      /* type 9 */
        {"\x01\x00\x00\x01x", 5},                      /* type 0 */
        {"\x01\x00\x03\x00\x01", 5},                   /* empty name */
        {"\x01\x00\x03\x01x\x02", 6},                  /* bool 2 */
        {"\x02\x00\x03\x01x\x01", 6},                  /* count too big */
        {"\x01\x00\x03\x01x\x01Z", 7},                 /* trailing byte */
        {"\x01\x00\x01\x01x\xff\xff\xff\xff", 9},      /* huge length */
        {"\x01\x00\x02\x01x\x02\x00\x00\x00\x01", 10}, /* short binary */
        {"\x01", 1},
    };
    (void)state;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        uint8_t *copy = malloc(bad[i].n);
        memcpy(copy, bad[i].b, bad[i].n);
        assert_int_equal(rt_props_check(copy, bad[i].n), RT_ECORRUPT);
        free(copy);
    }
}

/* Find returns the named property, is case-sensitive, and 0 when absent. */
static void test_find(void **state)
{
    struct rt_buf b = RT_BUF_INIT;
    struct rt_prop p;
    (void)state;
    build_all(&b);
    assert_int_equal(rt_props_find(b.data, b.len, "L", 1, &p), 1);
    assert_int_equal(p.type, RT_EDM_INT64);
    assert_int_equal(rt_props_find(b.data, b.len, "when", 4, &p), 0);
    assert_int_equal(rt_props_find(b.data, b.len, "When", 4, &p), 1);
    assert_int_equal(rt_props_find(b.data, b.len, "Whe", 3, &p), 0);
    rt_buf_free(&b);
}

/* Merge: update values win (type changes included), untouched old
 * properties are kept after the update's, in their order. */
static void test_merge(void **state)
{
    struct rt_buf old = RT_BUF_INIT, upd = RT_BUF_INIT, out = RT_BUF_INIT;
    struct rt_props_writer w;
    struct rt_prop p;
    struct rt_props_iter it;
    (void)state;

    rt_props_begin(&w, &old);
    p = th_prop_str("A", "old");
    rt_props_add(&w, &p);
    p = th_prop_i32("B", 1);
    rt_props_add(&w, &p);
    p = th_prop_i32("C", 3);
    rt_props_add(&w, &p);
    rt_props_end(&w);

    rt_props_begin(&w, &upd);
    p = th_prop_str("B", "now a string");
    rt_props_add(&w, &p);
    p = th_prop_i32("D", 4);
    rt_props_add(&w, &p);
    rt_props_end(&w);

    rt_buf_append(&out, "xy", 2); /* merge appends */
    assert_int_equal(rt_props_merge(&out, old.data, old.len, upd.data, upd.len),
                     0);
    assert_int_equal(rt_props_check(out.data + 2, out.len - 2), 0);
    rt_props_iter_init(&it, out.data + 2, out.len - 2);
    const char *order[] = {"B", "D", "A", "C"};
    for (int i = 0; i < 4; i++) {
        assert_int_equal(rt_props_next(&it, &p), 1);
        assert_int_equal(p.name_len, 1);
        assert_memory_equal(p.name, order[i], 1);
        if (i == 0) {
            assert_int_equal(p.type, RT_EDM_STRING);
        }
        if (i == 2) {
            assert_memory_equal(p.v.bytes.p, "old", 3);
        }
    }
    assert_int_equal(rt_props_next(&it, &p), 0);
    rt_buf_free(&old);
    rt_buf_free(&upd);
    rt_buf_free(&out);
}

/* Merge refuses a result above the property limit and appends nothing. */
static void test_merge_too_many(void **state)
{
    struct rt_buf old = RT_BUF_INIT, upd = RT_BUF_INIT, out = RT_BUF_INIT;
    struct rt_props_writer w;
    char names[300][16];
    (void)state;
    rt_props_begin(&w, &old);
    for (int i = 0; i < 200; i++) {
        snprintf(names[i], sizeof(names[i]), "o%d", i);
        struct rt_prop p = th_prop_i32(names[i], i);
        rt_props_add(&w, &p);
    }
    rt_props_end(&w);
    rt_props_begin(&w, &upd);
    for (int i = 200; i < 300; i++) {
        snprintf(names[i], sizeof(names[i]), "u%d", i);
        struct rt_prop p = th_prop_i32(names[i], i);
        rt_props_add(&w, &p);
    }
    rt_props_end(&w);
    assert_int_equal(rt_props_merge(&out, old.data, old.len, upd.data, upd.len),
                     RT_ETOOMANYPROPS);
    assert_int_equal(out.len, 0);
    /* Overlapping names count once. */
    assert_int_equal(rt_props_merge(&out, old.data, old.len, old.data, old.len),
                     0);
    assert_int_equal(rt_get_u16le(out.data), 200);
    rt_buf_free(&old);
    rt_buf_free(&upd);
    rt_buf_free(&out);
}

/* Stored value: header fields round-trip and the blob follows the header. */
static void test_value_roundtrip(void **state)
{
    struct rt_buf blob = RT_BUF_INIT, v = RT_BUF_INIT;
    const uint8_t *bp;
    size_t bn;
    uint64_t ticks;
    uint8_t flags;
    (void)state;
    build_all(&blob);
    rt_value_encode(&v, 638500000000000000ULL, 0x5a, blob.data, blob.len);
    assert_int_equal(v.len, RT_VALUE_HDR_SIZE + blob.len);
    assert_int_equal(v.data[0], RT_VALUE_VERSION);
    assert_int_equal(rt_value_decode(v.data, v.len, &ticks, &flags, &bp, &bn),
                     0);
    assert_true(ticks == 638500000000000000ULL);
    assert_int_equal(flags, 0x5a);
    assert_int_equal(bn, blob.len);
    assert_memory_equal(bp, blob.data, bn);
    rt_buf_free(&blob);
    rt_buf_free(&v);
}

/* Short values and unknown versions are corrupt. */
static void test_value_corrupt(void **state)
{
    uint8_t v[RT_VALUE_HDR_SIZE + 2] = {0};
    const uint8_t *bp;
    size_t bn;
    uint64_t ticks;
    uint8_t flags;
    (void)state;
    v[0] = RT_VALUE_VERSION;
    assert_int_equal(rt_value_decode(v, sizeof(v), &ticks, &flags, &bp, &bn),
                     0);
    for (size_t n = 0; n < sizeof(v); n++) {
        assert_int_equal(rt_value_decode(v, n, &ticks, &flags, &bp, &bn),
                         RT_ECORRUPT);
    }
    v[0] = 2;
    assert_int_equal(rt_value_decode(v, sizeof(v), &ticks, &flags, &bp, &bn),
                     RT_ECORRUPT);
}

/* Sealed values: the crc covers key, header and blob; every flipped bit
 * and a different key are caught; an unsealed value is not checked; the
 * crc field is the CRC32C of key ‖ header with crc 0 ‖ blob. */
static void test_value_crc(void **state)
{
    struct rt_buf blob = RT_BUF_INIT, v = RT_BUF_INIT;
    const uint8_t key[] = "\0\0\0\0\0\0\0\1pk\0\1rk\0\1";
    const uint8_t other[] = "\0\0\0\0\0\0\0\1pk\0\1rl\0\1";
    uint8_t hdr[RT_VALUE_HDR_SIZE];
    uint32_t c;
    (void)state;
    build_all(&blob);
    rt_value_encode(&v, 638500000000000000ULL, 0, blob.data, blob.len);
    assert_int_equal(rt_value_check(v.data, v.len, key, sizeof(key)), 0);
    rt_value_seal(v.data, v.len, key, sizeof(key));
    assert_int_equal(v.data[1], RT_VALUE_F_CRC);
    assert_int_equal(rt_value_check(v.data, v.len, key, sizeof(key)), 0);
    memcpy(hdr, v.data, sizeof(hdr));
    memset(hdr + 4, 0, 4);
    c = rt_crc32c(0, key, sizeof(key));
    c = rt_crc32c(c, hdr, sizeof(hdr));
    c = rt_crc32c(c, v.data + RT_VALUE_HDR_SIZE, v.len - RT_VALUE_HDR_SIZE);
    assert_int_equal(rt_get_u32le(v.data + 4), c);
    assert_int_equal(rt_value_check(v.data, v.len, other, sizeof(other)),
                     RT_ECORRUPT);
    for (size_t i = 0; i < v.len; i++) {
        for (int bit = 0; bit < 8; bit++) {
            int want = i == 1 && bit == 0 ? 0 : RT_ECORRUPT;
            v.data[i] ^= (uint8_t)(1u << bit);
            /* Clearing the flag leaves an unsealed value: not checked. */
            assert_int_equal(rt_value_check(v.data, v.len, key, sizeof(key)),
                             want);
            v.data[i] ^= (uint8_t)(1u << bit);
        }
    }
    assert_int_equal(rt_value_check(v.data, v.len - 1, key, sizeof(key)),
                     RT_ECORRUPT);
    assert_int_equal(rt_value_check(v.data, 3, key, sizeof(key)), RT_ECORRUPT);
    rt_value_unseal(v.data, v.len);
    assert_int_equal(v.data[1], 0);
    assert_int_equal(rt_get_u32le(v.data + 4), 0);
    assert_int_equal(rt_value_check(v.data, v.len, other, sizeof(other)), 0);
    rt_buf_free(&blob);
    rt_buf_free(&v);
}

/* Random garbage never crashes the decoder. */
static void test_fuzz_garbage(void **state)
{
    uint32_t seed = 12345;
    (void)state;
    for (int round = 0; round < 20000; round++) {
        size_t n = (size_t)(round % 40);
        uint8_t *buf = malloc(n ? n : 1);
        for (size_t i = 0; i < n; i++) {
            seed = seed * 1103515245u + 12345u;
            buf[i] = (uint8_t)(seed >> 16);
            if (i < 2 && (seed & 0x100)) {
                buf[i] = i == 0 ? 2 : 0;
            }
        }
        struct rt_prop p;
        (void)rt_props_check(buf, n);
        (void)rt_props_find(buf, n, "x", 1, &p);
        free(buf);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_roundtrip_all_types),
        cmocka_unit_test(test_exact_layout),
        cmocka_unit_test(test_double_bits),
        cmocka_unit_test(test_empty_blob),
        cmocka_unit_test(test_truncated_every_offset),
        cmocka_unit_test(test_corrupt_fields),
        cmocka_unit_test(test_find),
        cmocka_unit_test(test_merge),
        cmocka_unit_test(test_merge_too_many),
        cmocka_unit_test(test_value_roundtrip),
        cmocka_unit_test(test_value_corrupt),
        cmocka_unit_test(test_value_crc),
        cmocka_unit_test(test_fuzz_garbage),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
