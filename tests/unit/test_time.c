/* Time: ticks <-> ISO 8601 and RFC 1123 text over the full 0001..9999 range. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "rt_err.h"
#include "rt_time.h"

/* Fixture / Helpers */

#define TPD (86400ULL * RT_TICKS_PER_SEC)

static uint64_t parse_ok(const char *s)
{
    uint64_t t = 0;
    assert_int_equal(rt_time_parse_iso(s, strlen(s), &t), 0);
    return t;
}

static int parse_rc(const char *s)
{
    uint64_t t = 0;
    return rt_time_parse_iso(s, strlen(s), &t);
}

static const char *fmt(uint64_t ticks)
{
    static char buf[RT_TIME_ISO_SIZE];
    size_t n = rt_time_format_iso(ticks, buf);
    assert_int_equal(n, strlen(buf));
    return buf;
}

static const char *fmt7(uint64_t ticks)
{
    static char buf[RT_TIME_ISO_SIZE];
    size_t n = rt_time_format_iso7(ticks, buf);
    assert_int_equal(n, strlen(buf));
    return buf;
}

/* Tests */

/* Well-known instants format as .NET prints them. */
static void test_format_known(void **state)
{
    (void)state;
    assert_string_equal(fmt(0), "0001-01-01T00:00:00Z");
    assert_string_equal(fmt(RT_TICKS_UNIX_EPOCH), "1970-01-01T00:00:00Z");
    assert_string_equal(fmt(RT_TICKS_MIN), "1601-01-01T00:00:00Z");
    assert_string_equal(fmt(RT_TICKS_MAX), "9999-12-31T23:59:59.9999999Z");
    assert_string_equal(fmt(633512448000000000ULL), "2008-07-10T00:00:00Z");
    assert_string_equal(fmt(637534365826754067ULL),
                        "2021-04-07T23:56:22.6754067Z");
    assert_string_equal(fmt(630874224000000000ULL), "2000-02-29T12:00:00Z");
}

/* The RoundtripKind form trims trailing fraction zeros and drops a zero
 * fraction; the 7-digit form never trims. */
static void test_fraction_trimming(void **state)
{
    uint64_t base = 633512448000000000ULL;
    (void)state;
    assert_string_equal(fmt(base + 5000000), "2008-07-10T00:00:00.5Z");
    assert_string_equal(fmt(base + 10), "2008-07-10T00:00:00.000001Z");
    assert_string_equal(fmt(base + 1), "2008-07-10T00:00:00.0000001Z");
    assert_string_equal(fmt(base + 1230000), "2008-07-10T00:00:00.123Z");
    assert_string_equal(fmt7(base), "2008-07-10T00:00:00.0000000Z");
    assert_string_equal(fmt7(base + 5000000), "2008-07-10T00:00:00.5000000Z");
    assert_string_equal(fmt7(RT_TICKS_MAX), "9999-12-31T23:59:59.9999999Z");
}

/* Every day from 0001-01-01 to 9999-12-31 formats to the next calendar
 * date (checks the civil arithmetic against a naive calendar walk). */
static void test_every_day(void **state)
{
    static const int dim[12] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    uint64_t day = 0;
    char want[64];
    (void)state;
    for (int y = 1; y <= 9999; y++) {
        int leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
        for (int m = 1; m <= 12; m++) {
            int nd = dim[m - 1] + (m == 2 && leap);
            for (int d = 1; d <= nd; d++, day++) {
                if (d != 1 && d != nd && d != 15) {
                    continue; /* sample: first, middle, last of each month */
                }
                snprintf(want, sizeof(want), "%04d-%02d-%02dT00:00:00Z", y, m,
                         d);
                assert_string_equal(fmt(day * TPD), want);
                if (y >= 1601) {
                    assert_true(parse_ok(want) == day * TPD);
                }
            }
        }
    }
    assert_true(day * TPD - 1 == RT_TICKS_MAX);
}

/* Format then parse gives back the same ticks across the accepted range. */
static void test_roundtrip(void **state)
{
    uint64_t x = 88172645463325252ULL;
    (void)state;
    for (int i = 0; i < 100000; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        uint64_t t = RT_TICKS_MIN + x % (RT_TICKS_MAX - RT_TICKS_MIN + 1);
        char buf[RT_TIME_ISO_SIZE];
        uint64_t back = 0;
        size_t n = rt_time_format_iso(t, buf);
        assert_int_equal(rt_time_parse_iso(buf, n, &back), 0);
        assert_true(back == t);
        n = rt_time_format_iso7(t, buf);
        assert_int_equal(rt_time_parse_iso(buf, n, &back), 0);
        assert_true(back == t);
    }
}

/* Optional seconds, 1-7 fraction digits, missing zone (UTC) and numeric
 * offsets are accepted. */
static void test_parse_variants(void **state)
{
    uint64_t base = 633512448000000000ULL; /* 2008-07-10T00:00:00Z */
    (void)state;
    assert_true(parse_ok("2008-07-10T00:00:00Z") == base);
    assert_true(parse_ok("2008-07-10T00:00:00") == base);
    assert_true(parse_ok("2008-07-10T00:00Z") == base);
    assert_true(parse_ok("2008-07-10T00:00") == base);
    assert_true(parse_ok("2008-07-10T00:00:00.5Z") == base + 5000000);
    assert_true(parse_ok("2008-07-10T00:00:00.123Z") == base + 1230000);
    assert_true(parse_ok("2008-07-10T00:00:00.123456Z") == base + 1234560);
    assert_true(parse_ok("2008-07-10T00:00:00.1234567Z") == base + 1234567);
    assert_true(parse_ok("2008-07-10T02:00:00+02:00") == base);
    assert_true(parse_ok("2008-07-09T18:30:00-05:30") == base);
    assert_true(parse_ok("2008-07-10T00:00:00+00:00") == base);
}

/* Bad syntax and impossible dates are InvalidInput. */
static void test_parse_syntax_errors(void **state)
{
    static const char *bad[] = {
        "",
        "2008",
        "2008-07-10",
        "2008-07-10 00:00:00Z",
        "2008-7-10T00:00:00Z",
        "2008-13-10T00:00:00Z",
        "2008-00-10T00:00:00Z",
        "2008-02-30T00:00:00Z",
        "2023-02-29T00:00:00Z",
        "1900-02-29T00:00:00Z",
        "2008-07-10T24:00:00Z",
        "2008-07-10T00:60:00Z",
        "2008-07-10T00:00:60Z",
        "2008-07-10T00:00:00.Z",
        "2008-07-10T00:00:00.12345678Z",
        "2008-07-10T00:00:00ZZ",
        "2008-07-10T00:00:00Z ",
        "2008-07-10T00:00:00+2:00",
        "2008-07-10T00:00:00+02",
        "2008-07-10T00:00:00+02:60",
        "x008-07-10T00:00:00Z",
        "2008-07-10T00:00:0",
    };
    (void)state;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_int_equal(parse_rc(bad[i]), RT_EINVAL);
    }
    assert_int_equal(parse_rc("2000-02-29T00:00:00Z"), 0);
}

/* Dates outside 1601..9999 (after applying the zone) are OutOfRange; the
 * exact boundaries are accepted. */
static void test_parse_range(void **state)
{
    (void)state;
    assert_true(parse_ok("1601-01-01T00:00:00Z") == RT_TICKS_MIN);
    assert_true(parse_ok("9999-12-31T23:59:59.9999999Z") == RT_TICKS_MAX);
    assert_int_equal(parse_rc("1600-12-31T23:59:59.9999999Z"), RT_EOUTOFRANGE);
    assert_int_equal(parse_rc("0001-01-01T00:00:00Z"), RT_EOUTOFRANGE);
    assert_int_equal(parse_rc("0000-01-01T00:00:00Z"), RT_EOUTOFRANGE);
    assert_int_equal(parse_rc("1601-01-01T00:00:00+00:01"), RT_EOUTOFRANGE);
    assert_int_equal(parse_rc("9999-12-31T23:59:59.9999999-00:01"),
                     RT_EOUTOFRANGE);
    assert_true(parse_ok("1601-01-01T00:00:00-00:01") ==
                RT_TICKS_MIN + 60 * RT_TICKS_PER_SEC);
}

/* The clock reads near time(NULL); monotonic ms and us never go back. */
static void test_clocks(void **state)
{
    (void)state;
    uint64_t t = rt_time_now_ticks();
    uint64_t unix_now = (uint64_t)time(NULL);
    uint64_t secs = (t - RT_TICKS_UNIX_EPOCH) / RT_TICKS_PER_SEC;
    assert_true(secs + 2 >= unix_now && secs <= unix_now + 2);
    uint64_t a = rt_time_mono_ms();
    uint64_t b = rt_time_mono_ms();
    assert_true(b >= a);
    assert_true(rt_time_mono_us() / 1000 >= b);
}

/* RFC 1123 dates parse to Unix seconds, including the spec example. */
static void test_http_date_parse(void **state)
{
    int64_t s = 0;
    (void)state;
    assert_int_equal(
        rt_time_parse_http_date("Mon, 14 Oct 2013 18:25:49 GMT", &s), 0);
    assert_true(s == 1381775149);
    assert_int_equal(
        rt_time_parse_http_date("Thu, 01 Jan 1970 00:00:00 GMT", &s), 0);
    assert_true(s == 0);
    assert_int_equal(
        rt_time_parse_http_date("Wed, 31 Dec 1969 23:59:59 GMT", &s), 0);
    assert_true(s == -1);
    static const char *bad[] = {
        "",
        "Mon, 14 Oct 2013 18:25:49",
        "Mon, 14 Oct 2013 18:25:49 UTC",
        "Mon 14 Oct 2013 18:25:49 GMT",
        "Mon, 14 Foo 2013 18:25:49 GMT",
        "Xyz, 14 Oct 2013 18:25:49 GMT",
        "Mon, 32 Oct 2013 18:25:49 GMT",
        "Mon, 31 Sep 2013 18:25:49 GMT",
        "Mon, 14 Oct 2013 25:25:49 GMT",
        "Mon, 14 Oct 2013 18:25:49 GMTx",
        "2013-10-14T18:25:49Z",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_int_equal(rt_time_parse_http_date(bad[i], &s), RT_EINVAL);
    }
}

/* The HTTP date of now has the RFC 1123 shape and parses back to now. */
static void test_http_date_now(void **state)
{
    char buf[64];
    int64_t s = 0;
    (void)state;
    rt_time_http_date(buf, sizeof(buf));
    assert_int_equal(strlen(buf), 29);
    assert_string_equal(buf + 25, " GMT");
    assert_int_equal(buf[3], ',');
    assert_int_equal(rt_time_parse_http_date(buf, &s), 0);
    int64_t now = (int64_t)time(NULL);
    assert_true(s >= now - 2 && s <= now + 2);
    /* Weekday matches the date: compare with gmtime. */
    static const char *wd[] = {"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"};
    time_t tt = (time_t)s;
    struct tm tm;
    gmtime_r(&tt, &tm);
    assert_memory_equal(buf, wd[tm.tm_wday], 3);
    /* A short buffer is truncated, still NUL-terminated. */
    char small[8];
    rt_time_http_date(small, sizeof(small));
    assert_int_equal(strlen(small), 7);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_format_known),
        cmocka_unit_test(test_fraction_trimming),
        cmocka_unit_test(test_every_day),
        cmocka_unit_test(test_roundtrip),
        cmocka_unit_test(test_parse_variants),
        cmocka_unit_test(test_parse_syntax_errors),
        cmocka_unit_test(test_parse_range),
        cmocka_unit_test(test_clocks),
        cmocka_unit_test(test_http_date_parse),
        cmocka_unit_test(test_http_date_now),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
