/* The rules that every component shares from common/: strict UTF-8, UTF-16
 * lengths, hexadecimal digits, Azure's key and entity limits, and the LMDB
 * error mapping. */
#include <ctype.h>
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <arpa/inet.h>
#include <cmocka.h>
#include <lmdb.h>

#include "rt_addr.h"
#include "rt_alloc.h"
#include "rt_buf.h"
#include "rt_config.h"
#include "rt_entity.h"
#include "rt_err.h"
#include "rt_lmdb.h"
#include "rt_rand.h"
#include "rt_text.h"
#include "rt_utf8.h"

/* Helpers */

static size_t dec(const char *s, size_t n, uint32_t *cp)
{
    const uint8_t *p = (const uint8_t *)s;
    return rt_utf8_decode(p, p + n, cp);
}

/* Tests */

/* Every well-formed length decodes to its code point, boundaries included. */
static void test_utf8_decode_valid(void **state)
{
    uint32_t cp;
    (void)state;
    assert_int_equal(dec("A", 1, &cp), 1);
    assert_int_equal(cp, 'A');
    assert_int_equal(dec("\xC2\x80", 2, &cp), 2);
    assert_int_equal(cp, 0x80);
    assert_int_equal(dec("\xE0\xA0\x80", 3, &cp), 3);
    assert_int_equal(cp, 0x800);
    assert_int_equal(dec("\xEF\xBF\xBF", 3, &cp), 3);
    assert_int_equal(cp, 0xFFFF);
    assert_int_equal(dec("\xF0\x90\x80\x80", 4, &cp), 4);
    assert_int_equal(cp, 0x10000);
    assert_int_equal(dec("\xF4\x8F\xBF\xBF", 4, &cp), 4);
    assert_int_equal(cp, 0x10FFFF);
}

/* Overlong forms, surrogates, values past U+10FFFF, stray continuation
 * bytes and sequences cut by the end are refused. */
static void test_utf8_decode_invalid(void **state)
{
    uint32_t cp;
    (void)state;
    assert_int_equal(dec("\xC0\x80", 2, &cp), 0);
    assert_int_equal(dec("\xC1\xBF", 2, &cp), 0);
    assert_int_equal(dec("\xE0\x9F\xBF", 3, &cp), 0);
    assert_int_equal(dec("\xED\xA0\x80", 3, &cp), 0);
    assert_int_equal(dec("\xED\xBF\xBF", 3, &cp), 0);
    assert_int_equal(dec("\xF0\x8F\xBF\xBF", 4, &cp), 0);
    assert_int_equal(dec("\xF4\x90\x80\x80", 4, &cp), 0);
    assert_int_equal(dec("\xF5\x80\x80\x80", 4, &cp), 0);
    assert_int_equal(dec("\x80", 1, &cp), 0);
    assert_int_equal(dec("\xE2\x82", 2, &cp), 0);
    assert_int_equal(dec("\xF0\x9F\x98", 3, &cp), 0);
    assert_false(rt_utf8_valid("a\xFFz", 3));
    assert_true(rt_utf8_valid("", 0));
    assert_true(rt_utf8_valid("a\xC3\xA9\xF0\x9F\x98\x80", 7));
}

/* UTF-16 length counts a supplementary character as two units. */
static void test_utf8_utf16_units(void **state)
{
    (void)state;
    assert_int_equal(rt_utf8_utf16_units("", 0), 0);
    assert_int_equal(rt_utf8_utf16_units("abc", 3), 3);
    assert_int_equal(rt_utf8_utf16_units("\xC3\xA9", 2), 1);
    assert_int_equal(rt_utf8_utf16_units("\xE2\x82\xAC", 3), 1);
    assert_int_equal(rt_utf8_utf16_units("\xF0\x9F\x98\x80", 4), 2);
}

/* Encoding then decoding gives back every code point class. */
static void test_utf8_encode_roundtrip(void **state)
{
    static const uint32_t cps[] = {0,      0x7F,   0x80,   0x7FF,   0x800,
                                   0xD7FF, 0xE000, 0xFFFF, 0x10000, 0x10FFFF};
    (void)state;
    for (size_t i = 0; i < sizeof(cps) / sizeof(cps[0]); i++) {
        uint8_t buf[4];
        uint32_t cp;
        size_t n = rt_utf8_encode(cps[i], buf);
        assert_int_equal(rt_utf8_decode(buf, buf + n, &cp), n);
        assert_int_equal(cp, cps[i]);
    }
}

/* Keys: the forbidden characters, bad UTF-8, and the 1024-unit limit
 * counted in UTF-16 units, not bytes. */
static void test_key_check(void **state)
{
    size_t units = 0;
    char *k;
    (void)state;
    assert_int_equal(rt_entity_key_check("", 0, &units), 0);
    assert_int_equal(units, 0);
    assert_int_equal(rt_entity_key_check("a b'\"", 5, &units), 0);
    assert_int_equal(units, 5);
    assert_int_equal(rt_entity_key_check("a/b", 3, NULL), RT_EINVAL);
    assert_int_equal(rt_entity_key_check("a\\b", 3, NULL), RT_EINVAL);
    assert_int_equal(rt_entity_key_check("a#b", 3, NULL), RT_EINVAL);
    assert_int_equal(rt_entity_key_check("a?b", 3, NULL), RT_EINVAL);
    assert_int_equal(rt_entity_key_check("a\tb", 3, NULL), RT_EINVAL);
    assert_int_equal(rt_entity_key_check("a\x7f", 2, NULL), RT_EINVAL);
    assert_int_equal(rt_entity_key_check("\xC2\x85", 2, NULL), RT_EINVAL);
    assert_int_equal(rt_entity_key_check("\xC2\xA0", 2, NULL), 0);
    assert_int_equal(rt_entity_key_check("\xFF", 1, NULL), RT_EINVAL);
    assert_int_equal(rt_entity_key_check("a\0b", 3, NULL), RT_EINVAL);

    k = rt_xmalloc(4 * 1025);
    memset(k, 'x', 1025);
    assert_int_equal(rt_entity_key_check(k, 1024, &units), 0);
    assert_int_equal(units, 1024);
    assert_int_equal(rt_entity_key_check(k, 1025, NULL), RT_EOUTOFRANGE);
    /* 512 supplementary characters are 1024 units; one more is too many. */
    for (size_t i = 0; i < 513; i++) {
        memcpy(k + 4 * i, "\xF0\x9F\x98\x80", 4);
    }
    assert_int_equal(rt_entity_key_check(k, 4 * 512, &units), 0);
    assert_int_equal(units, 1024);
    assert_int_equal(rt_entity_key_check(k, 4 * 513, NULL), RT_EOUTOFRANGE);
    free(k);
}

/* The Azure size formula and the per-value limits. */
static void test_entity_check(void **state)
{
    struct rt_buf b = RT_BUF_INIT;
    struct rt_props_writer w;
    struct rt_prop p;
    uint8_t *big = rt_xcalloc(1, RT_MAX_BINARY + 1);
    (void)state;

    memset(&p, 0, sizeof(p));
    p.name = "Name";
    p.name_len = 4;
    p.type = RT_EDM_STRING;
    p.v.bytes.p = (const uint8_t *)"\xC3\xA9t\xC3\xA9";
    p.v.bytes.n = 5;
    /* 8 + 2*4 (name) + 4 + 2*3 (value) */
    assert_int_equal(rt_prop_azure_size(&p), 26);
    rt_props_begin(&w, &b);
    rt_props_add(&w, &p);
    rt_props_end(&w);
    assert_int_equal(rt_entity_check(b.data, b.len, 3, 3), 0);

    /* A binary value one byte over the limit. */
    b.len = 0;
    p.type = RT_EDM_BINARY;
    p.v.bytes.p = big;
    p.v.bytes.n = RT_MAX_BINARY + 1;
    assert_int_equal(rt_prop_check_limits(&p), RT_EPROPTOOLARGE);
    rt_props_begin(&w, &b);
    rt_props_add(&w, &p);
    rt_props_end(&w);
    assert_int_equal(rt_entity_check(b.data, b.len, 1, 1), RT_EPROPTOOLARGE);

    /* 253 properties are too many. */
    b.len = 0;
    rt_props_begin(&w, &b);
    for (int i = 0; i < RT_MAX_USER_PROPS + 1; i++) {
        char name[8];
        struct rt_prop q;
        memset(&q, 0, sizeof(q));
        q.name_len = (size_t)snprintf(name, sizeof(name), "p%d", i);
        q.name = name;
        q.type = RT_EDM_INT32;
        rt_props_add(&w, &q);
    }
    rt_props_end(&w);
    assert_int_equal(rt_entity_check(b.data, b.len, 1, 1), RT_ETOOMANYPROPS);

    /* Seventeen 64 KiB binaries pass the value limit but not 1 MiB. */
    b.len = 0;
    rt_props_begin(&w, &b);
    for (int i = 0; i < 17; i++) {
        char name[8];
        struct rt_prop q;
        memset(&q, 0, sizeof(q));
        q.name_len = (size_t)snprintf(name, sizeof(name), "b%d", i);
        q.name = name;
        q.type = RT_EDM_BINARY;
        q.v.bytes.p = big;
        q.v.bytes.n = RT_MAX_BINARY;
        rt_props_add(&w, &q);
    }
    rt_props_end(&w);
    assert_int_equal(rt_entity_check(b.data, b.len, 1, 1), RT_EENTITYTOOLARGE);

    /* A truncated blob is malformed input. */
    assert_int_equal(rt_entity_check(b.data, 3, 1, 1), RT_EINVAL);
    rt_buf_free(&b);
    free(big);
}

/* LMDB codes map to one RT_E* each, the same for every store. */
static void test_lmdb_err(void **state)
{
    (void)state;
    assert_int_equal(rt_lmdb_err(MDB_SUCCESS), 0);
    assert_int_equal(rt_lmdb_err(MDB_NOTFOUND), RT_ENOTFOUND);
    assert_int_equal(rt_lmdb_err(MDB_MAP_FULL), RT_ENOSPACE);
    assert_int_equal(rt_lmdb_err(ENOSPC), RT_ENOSPACE);
    assert_int_equal(rt_lmdb_err(MDB_TXN_FULL), RT_ETOOLARGE);
    assert_int_equal(rt_lmdb_err(MDB_BAD_VALSIZE), RT_EOUTOFRANGE);
    assert_int_equal(rt_lmdb_err(MDB_READERS_FULL), RT_EBUSY);
    assert_int_equal(rt_lmdb_err(MDB_CORRUPTED), RT_ECORRUPT);
    assert_int_equal(rt_lmdb_err(MDB_VERSION_MISMATCH), RT_ECORRUPT);
    assert_int_equal(rt_lmdb_err(ENOMEM), RT_ENOMEM);
    assert_int_equal(rt_lmdb_err(EIO), RT_EIO);
}

/* Allocation helpers copy exactly and terminate. */
static void test_alloc_copies(void **state)
{
    char *s;
    (void)state;
    s = rt_xstrdup(NULL);
    assert_string_equal(s, "");
    free(s);
    s = rt_xstrndup("abcdef", 3);
    assert_string_equal(s, "abc");
    free(s);
    s = rt_xmemdup("xy", 2);
    assert_memory_equal(s, "xy", 2);
    free(s);
}

/* Hex digits of either case have their value; nothing else is a digit. */
static void test_hexval(void **state)
{
    const char *digits = "0123456789abcdef";
    (void)state;
    for (int i = 0; i < 16; i++) {
        assert_int_equal(rt_hexval(digits[i]), i);
        assert_int_equal(rt_hexval(toupper((unsigned char)digits[i])), i);
    }
    assert_int_equal(rt_hexval('g'), -1);
    assert_int_equal(rt_hexval('G'), -1);
    assert_int_equal(rt_hexval('/'), -1);
    assert_int_equal(rt_hexval(':'), -1);
    assert_int_equal(rt_hexval('@'), -1);
    assert_int_equal(rt_hexval('`'), -1);
    assert_int_equal(rt_hexval('\0'), -1);
    assert_int_equal(rt_hexval((char)0xC3), -1);
    assert_int_equal(rt_hexval(0xC3), -1);
}

/* xoshiro256** from the state {1, 2, 3, 4}: the reference implementation's
 * first outputs, worked by hand (rotl(2 * 5, 7) * 9, then s[1] = 0). */
static void test_rng_known_answers(void **state)
{
    (void)state;
    const uint64_t s[4] = {1, 2, 3, 4}, zero[4] = {0, 0, 0, 0};
    struct rt_rng r, a, b;
    rt_rng_seed_bytes(&r, s);
    assert_int_equal(rt_rng_next(&r), 11520);
    assert_int_equal(rt_rng_next(&r), 0);

    rt_rng_seed_bytes(&r, zero); /* the one bad state is repaired */
    assert_true(r.s[0] | r.s[1] | r.s[2] | r.s[3]);

    rt_rng_seed(&a, 42);
    rt_rng_seed(&b, 42);
    for (int i = 0; i < 100; i++) {
        assert_int_equal(rt_rng_next(&a), rt_rng_next(&b));
    }
    for (int i = 0; i < 100; i++) {
        double u = rt_rng_unit(&a);
        assert_true(rt_rng_below(&b, 7) < 7);
        assert_true(u >= 0.0 && u < 1.0);
    }
    assert_int_not_equal(rt_mix64(1), rt_mix64(2));
}

/* Addresses as the flags write them: one rule for every listener and
 * client. */
static void test_addr(void **state)
{
    (void)state;
    char host[64];
    int port;
    struct sockaddr_storage ss;
    socklen_t len;

    assert_int_equal(rt_addr_split("[::1]:10002", host, sizeof(host), &port),
                     0);
    assert_string_equal(host, "::1");
    assert_int_equal(port, 10002);
    assert_int_equal(rt_addr_split("::1:80", host, sizeof(host), &port), 0);
    assert_string_equal(host, "::1");
    static const char *const bad[] = {
        ":80",        "1.2.3.4:",      "1.2.3.4",    "1.2.3.4:-1",
        "1.2.3.4:8x", "1.2.3.4:65536", "1.2.3.4: 8", NULL};
    for (int i = 0; bad[i]; i++) {
        assert_int_equal(rt_addr_split(bad[i], host, sizeof(host), &port),
                         RT_EINVAL);
    }
    assert_int_equal(rt_addr_split("123456789:1", host, 8, &port), RT_EINVAL);

    assert_int_equal(rt_addr_parse("localhost:0", &ss, &len), 0);
    assert_int_equal(ss.ss_family, AF_INET);
    assert_int_equal(len, sizeof(struct sockaddr_in));
    assert_int_equal(((struct sockaddr_in *)&ss)->sin_addr.s_addr,
                     htonl(INADDR_LOOPBACK));
    assert_int_equal(rt_addr_parse("[::1]:443", &ss, &len), 0);
    assert_int_equal(ss.ss_family, AF_INET6);
    assert_int_equal(len, sizeof(struct sockaddr_in6));
    assert_int_equal(ntohs(((struct sockaddr_in6 *)&ss)->sin6_port), 443);
    /* no name lookup: a daemon must not wait on DNS */
    assert_int_equal(rt_addr_parse("example.com:80", &ss, &len), RT_EINVAL);
    assert_int_equal(rt_addr_ip("10.0.0.1", 70000, &ss, NULL), RT_EINVAL);
}

/* --zone names: bounded and plain, since the master stores and shows them. */
static void test_zone(void **state)
{
    (void)state;
    char z[RT_ZONE_MAX + 2];
    memset(z, 'a', sizeof(z));
    z[RT_ZONE_MAX] = '\0';
    assert_true(rt_zone_valid(z));
    z[RT_ZONE_MAX] = 'a';
    z[RT_ZONE_MAX + 1] = '\0';
    assert_false(rt_zone_valid(z));
    assert_true(rt_zone_valid(""));
    assert_true(rt_zone_valid(NULL));
    assert_true(rt_zone_valid("eu-west_1.rack7"));
    assert_false(rt_zone_valid("a zone"));
    assert_false(rt_zone_valid("z\n"));
    assert_false(rt_zone_valid("\xc3\xa9"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_utf8_decode_valid),
        cmocka_unit_test(test_utf8_decode_invalid),
        cmocka_unit_test(test_utf8_utf16_units),
        cmocka_unit_test(test_utf8_encode_roundtrip),
        cmocka_unit_test(test_key_check),
        cmocka_unit_test(test_entity_check),
        cmocka_unit_test(test_lmdb_err),
        cmocka_unit_test(test_alloc_copies),
        cmocka_unit_test(test_hexval),
        cmocka_unit_test(test_rng_known_answers),
        cmocka_unit_test(test_addr),
        cmocka_unit_test(test_zone),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
