/* Request header and query-parameter rules (docs/table-api-spec.md §2,
 * §6.3, §6.4, §11): metadata level, version syntax, Prefer, request id
 * echo, $top, $select and continuation tokens. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "fe_hdr.h"
#include "rt_err.h"

/* Accept and $format choose the metadata level; $format wins; Atom is
 * refused; nothing or a wildcard means minimal metadata. */
static void test_meta(void **state)
{
    enum fe_meta m;
    (void)state;
    assert_int_equal(fe_hdr_meta(NULL, NULL, &m), 0);
    assert_int_equal(m, FE_META_MINIMAL);
    assert_int_equal(fe_hdr_meta("application/json;odata=nometadata", NULL, &m),
                     0);
    assert_int_equal(m, FE_META_NONE);
    assert_int_equal(
        fe_hdr_meta("application/json; odata=fullmetadata", NULL, &m), 0);
    assert_int_equal(m, FE_META_FULL);
    assert_int_equal(fe_hdr_meta("application/json", NULL, &m), 0);
    assert_int_equal(m, FE_META_MINIMAL);
    assert_int_equal(fe_hdr_meta("*/*", NULL, &m), 0);
    assert_int_equal(m, FE_META_MINIMAL);
    assert_int_equal(
        fe_hdr_meta("application/atom+xml,application/xml", NULL, &m),
        RT_EATOMNOTSUPPORTED);
    assert_int_equal(fe_hdr_meta("application/atom+xml, application/json;"
                                 "odata=nometadata",
                                 NULL, &m),
                     0);
    assert_int_equal(m, FE_META_NONE);
    assert_int_equal(fe_hdr_meta("application/json;odata=nometadata",
                                 "application/json;odata=fullmetadata", &m),
                     0);
    assert_int_equal(m, FE_META_FULL);
    assert_int_equal(fe_hdr_meta(NULL, "atom", &m), RT_EATOMNOTSUPPORTED);
    assert_int_equal(fe_hdr_meta(NULL, "bogus", &m), RT_EQUERYPARAM);
}

/* x-ms-version must be a plausible date not before 2009-04-14. */
static void test_version(void **state)
{
    (void)state;
    assert_int_equal(fe_hdr_version_check("2019-02-02"), 0);
    assert_int_equal(fe_hdr_version_check("2020-12-06"), 0);
    assert_int_equal(fe_hdr_version_check("2030-01-01"), 0);
    assert_int_equal(fe_hdr_version_check("2009-04-14"), 0);
    assert_int_equal(fe_hdr_version_check("2008-01-01"), RT_EHEADER);
    assert_int_equal(fe_hdr_version_check("2019-13-02"), RT_EHEADER);
    assert_int_equal(fe_hdr_version_check("2019-02-2"), RT_EHEADER);
    assert_int_equal(fe_hdr_version_check("latest"), RT_EHEADER);
    assert_int_equal(fe_hdr_version_check(""), RT_EHEADER);
}

/* Prefer, client request ids, body media types. */
static void test_misc_headers(void **state)
{
    char big[1100];
    (void)state;
    assert_int_equal(fe_hdr_prefer(NULL), FE_PREFER_NONE);
    assert_int_equal(fe_hdr_prefer("return-no-content"), FE_PREFER_NO_CONTENT);
    assert_int_equal(fe_hdr_prefer("return-content"), FE_PREFER_CONTENT);
    assert_int_equal(fe_hdr_prefer("odata.x, return-no-content"),
                     FE_PREFER_NO_CONTENT);
    assert_true(fe_hdr_client_id_ok("abc-123 x"));
    assert_false(fe_hdr_client_id_ok("a\x01"));
    assert_false(fe_hdr_client_id_ok("caf\xc3\xa9"));
    memset(big, 'a', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    assert_false(fe_hdr_client_id_ok(big));
    big[1024] = '\0';
    assert_true(fe_hdr_client_id_ok(big));
    assert_int_equal(fe_hdr_body_type(NULL), 0);
    assert_int_equal(fe_hdr_body_type("application/json;odata=nometadata"), 0);
    assert_int_equal(fe_hdr_body_type("application/atom+xml;type=entry"),
                     RT_EATOMNOTSUPPORTED);
}

/* $top: positive integers, clamped to the page size. */
static void test_top(void **state)
{
    unsigned t = 0;
    (void)state;
    assert_int_equal(fe_hdr_top("5", 1000, &t), 0);
    assert_int_equal(t, 5);
    assert_int_equal(fe_hdr_top("5000", 1000, &t), 0);
    assert_int_equal(t, 1000);
    assert_int_equal(fe_hdr_top("0", 1000, &t), 0);
    assert_int_equal(t, 0);
    assert_int_equal(fe_hdr_top("-1", 1000, &t), RT_EQUERYPARAM);
    assert_int_equal(fe_hdr_top("1x", 1000, &t), RT_EQUERYPARAM);
    assert_int_equal(fe_hdr_top("", 1000, &t), RT_EQUERYPARAM);
}

/* $select names are trimmed; "*" means everything. */
static void test_select(void **state)
{
    char **names;
    size_t n;
    (void)state;
    assert_int_equal(fe_hdr_select(" Name, Age ,PartitionKey", &names, &n), 0);
    assert_int_equal(n, 3);
    assert_string_equal(names[0], "Name");
    assert_string_equal(names[1], "Age");
    assert_string_equal(names[2], "PartitionKey");
    free(names);
    assert_int_equal(fe_hdr_select("*", &names, &n), 0);
    assert_int_equal(n, 0);
    assert_null(names);
    assert_int_equal(fe_hdr_select("a,,b", &names, &n), RT_EQUERYPARAM);
}

/* Tokens round-trip any key, including empty and non-ASCII ones. */
static void test_tokens(void **state)
{
    const char *keys[] = {"",
                          "a",
                          "ab",
                          "abc",
                          "p1",
                          "o'k/#?",
                          "\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80",
                          "x y+z"};
    struct rt_buf tok = RT_BUF_INIT, back = RT_BUF_INIT;
    (void)state;
    for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
        rt_buf_reset(&tok);
        rt_buf_reset(&back);
        fe_token_encode(&tok, keys[i], strlen(keys[i]));
        /* URL- and header-safe characters only. */
        assert_int_equal(strspn(rt_buf_cstr(&tok),
                                "0123456789!abcdefghijklmnopqrstuvwxyz"
                                "ABCDEFGHIJKLMNOPQRSTUVWXYZ-_"),
                         tok.len);
        assert_int_equal(fe_token_decode(rt_buf_cstr(&tok), &back), 0);
        assert_int_equal(back.len, strlen(keys[i]));
        if (back.len) {
            assert_memory_equal(back.data, keys[i], back.len);
        }
    }
    rt_buf_reset(&tok);
    fe_token_encode(&tok, "", 0);
    assert_string_equal(rt_buf_cstr(&tok), "1!0!");
    rt_buf_reset(&back);
    assert_int_equal(fe_token_decode("garbage", &back), RT_EINVAL);
    assert_int_equal(fe_token_decode("1!3!a*b", &back), RT_EINVAL);
    assert_int_equal(fe_token_decode("1!9!cDE", &back), RT_EINVAL);
    rt_buf_free(&tok);
    rt_buf_free(&back);
}

/* Request ids are fresh v4 GUIDs. */
static void test_guid(void **state)
{
    char a[FE_GUID_SIZE], b[FE_GUID_SIZE];
    (void)state;
    fe_hdr_guid(a);
    fe_hdr_guid(b);
    assert_int_equal(strlen(a), 36);
    assert_int_equal(a[8], '-');
    assert_int_equal(a[14], '4');
    assert_string_not_equal(a, b);
    /* Lower-case hex in 8-4-4-4-12 groups, RFC 4122 variant, all fresh. */
    for (int k = 0; k < 1000; k++) {
        fe_hdr_guid(a);
        for (int i = 0; i < 36; i++) {
            if (i == 8 || i == 13 || i == 18 || i == 23) {
                assert_int_equal(a[i], '-');
            } else {
                assert_non_null(strchr("0123456789abcdef", a[i]));
            }
        }
        assert_non_null(strchr("89ab", a[19]));
        assert_string_not_equal(a, b);
    }
}

/* Version gates (spec §11): JSON named explicitly with a version before
 * 2013-08-15 is 415 JsonFormatNotSupported; no version sent = lenient;
 * Atom stays refused for every version. */
static void test_version_gates(void **state)
{
    enum fe_meta m;
    (void)state;
    assert_int_equal(fe_hdr_meta_v("application/json", NULL, "2013-08-15", &m),
                     0);
    assert_int_equal(fe_hdr_meta_v("application/json", NULL, "2012-02-12", &m),
                     RT_EJSONNOTSUPPORTED);
    assert_int_equal(fe_hdr_meta_v(NULL, "json", "2011-08-18", &m),
                     RT_EJSONNOTSUPPORTED);
    assert_int_equal(
        fe_hdr_meta_v("application/json;odata=nometadata", NULL, NULL, &m), 0);
    assert_int_equal(m, FE_META_NONE);
    /* Nothing named: answered (as JSON) for any version. */
    assert_int_equal(fe_hdr_meta_v(NULL, NULL, "2009-09-19", &m), 0);
    assert_int_equal(fe_hdr_meta_v("*/*", NULL, "2009-09-19", &m), 0);
    assert_int_equal(
        fe_hdr_meta_v("application/atom+xml", NULL, "2009-09-19", &m),
        RT_EATOMNOTSUPPORTED);
    assert_int_equal(
        fe_hdr_meta_v("application/atom+xml", NULL, "2019-02-02", &m),
        RT_EATOMNOTSUPPORTED);
    assert_int_equal(fe_hdr_body_type_v("application/json", "2012-02-12"),
                     RT_EJSONNOTSUPPORTED);
    assert_int_equal(fe_hdr_body_type_v("application/json", "2019-02-02"), 0);
    assert_int_equal(fe_hdr_body_type_v("application/json", NULL), 0);
    assert_int_equal(fe_hdr_body_type_v(NULL, "2012-02-12"), 0);
    assert_int_equal(fe_hdr_body_type_v("application/atom+xml", "2012-02-12"),
                     RT_EATOMNOTSUPPORTED);
}

/* timeout: positive seconds, clamped to 30. */
static void test_timeout(void **state)
{
    unsigned t = 0;
    (void)state;
    assert_int_equal(fe_hdr_timeout("5", &t), 0);
    assert_int_equal(t, 5);
    assert_int_equal(fe_hdr_timeout("30", &t), 0);
    assert_int_equal(t, 30);
    assert_int_equal(fe_hdr_timeout("31", &t), 0);
    assert_int_equal(t, FE_TIMEOUT_MAX);
    assert_int_equal(fe_hdr_timeout("99999999999", &t), 0);
    assert_int_equal(t, FE_TIMEOUT_MAX);
    assert_int_equal(fe_hdr_timeout("0", &t), RT_EQUERYPARAM);
    assert_int_equal(fe_hdr_timeout("-1", &t), RT_EQUERYPARAM);
    assert_int_equal(fe_hdr_timeout("", &t), RT_EQUERYPARAM);
    assert_int_equal(fe_hdr_timeout("5s", &t), RT_EQUERYPARAM);
}

/* Continuation tokens as clients send them back: standard base64
 * characters, '=' padding and a '+' turned into a space by form decoding
 * are tolerated. */
static void test_token_tolerance(void **state)
{
    struct rt_buf back = RT_BUF_INIT;
    (void)state;
    /* "~~~" is "fn5-" in base64url, "fn5+" in base64. */
    assert_int_equal(fe_token_decode("1!4!fn5+", &back), 0);
    assert_string_equal(rt_buf_cstr(&back), "~~~");
    rt_buf_reset(&back);
    assert_int_equal(fe_token_decode("1!4!fn5 ", &back), 0);
    assert_string_equal(rt_buf_cstr(&back), "~~~");
    rt_buf_reset(&back);
    assert_int_equal(fe_token_decode("1!4!cDE=", &back), 0);
    assert_string_equal(rt_buf_cstr(&back), "p1");
    rt_buf_reset(&back);
    assert_int_equal(fe_token_decode("1!0!", &back), 0);
    assert_int_equal(back.len, 0);
    assert_int_equal(fe_token_decode("", &back), RT_EINVAL);
    assert_int_equal(fe_token_decode("2!3!cDE", &back), RT_EINVAL);
    assert_int_equal(fe_token_decode("1!x!cDE", &back), RT_EINVAL);
    assert_int_equal(fe_token_decode("1!1!c", &back), RT_EINVAL);
    rt_buf_free(&back);
}

/* If-Match: "*", our ETags, foreign weak ETags (never match), empty (412)
 * and anything else (400). */
static void test_if_match(void **state)
{
    uint64_t t = 1;
    int any = 0;
    (void)state;
    assert_int_equal(fe_hdr_if_match("*", &t, &any), 0);
    assert_true(any);
    assert_int_equal(
        fe_hdr_if_match("W/\"datetime'2017-10-16T23%3A00%3A05.5000867Z'\"", &t,
                        &any),
        0);
    assert_false(any);
    assert_true(t != 0 && t != FE_ETAG_NEVER);
    assert_int_equal(fe_hdr_if_match("W/\"0x8D5B168C7B6E589\"", &t, &any), 0);
    assert_true(t == FE_ETAG_NEVER);
    assert_int_equal(
        fe_hdr_if_match("W/\"datetime'2001-01-01T00%3A00%3A00Z'\"", &t, &any),
        0);
    assert_true(t == FE_ETAG_NEVER);
    /* A lower-case weak indicator is still a weak ETag; never ours. */
    assert_int_equal(fe_hdr_if_match("w/\"wrong\"", &t, &any), 0);
    assert_true(t == FE_ETAG_NEVER);
    assert_int_equal(
        fe_hdr_if_match("w/\"datetime'2017-10-16T23%3A00%3A05.5000867Z'\"", &t,
                        &any),
        0);
    assert_true(t == FE_ETAG_NEVER);
    assert_int_equal(fe_hdr_if_match("", &t, &any), RT_EPRECOND);
    assert_int_equal(fe_hdr_if_match("  ", &t, &any), RT_EPRECOND);
    assert_int_equal(fe_hdr_if_match("bogus", &t, &any), RT_EINVAL);
    assert_int_equal(fe_hdr_if_match("\"strong\"", &t, &any), RT_EINVAL);
    assert_int_equal(fe_hdr_if_match("W/\"", &t, &any), RT_EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_meta),
        cmocka_unit_test(test_version),
        cmocka_unit_test(test_misc_headers),
        cmocka_unit_test(test_top),
        cmocka_unit_test(test_select),
        cmocka_unit_test(test_tokens),
        cmocka_unit_test(test_guid),
        cmocka_unit_test(test_version_gates),
        cmocka_unit_test(test_timeout),
        cmocka_unit_test(test_token_tolerance),
        cmocka_unit_test(test_if_match),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
