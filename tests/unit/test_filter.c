/* OData $filter: parsing, evaluation semantics, binary codec, key bounds. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "rt_entity.h"
#include "rt_err.h"
#include "rt_filter.h"
#include "rt_time.h"
#include "th_props.h"

/* Fixture */

static const uint8_t guid1[16] = {0xc9, 0xda, 0x64, 0x55, 0x21, 0x3d,
                                  0x42, 0xc9, 0x9a, 0x79, 0x3e, 0x91,
                                  0x49, 0xa5, 0x78, 0x33};
static const uint8_t bin1[3] = {0x01, 0x02, 0xff};

#define PK "P1"
#define RK "R005"

static uint64_t ticks_of(const char *iso)
{
    uint64_t t = 0;
    assert_int_equal(rt_time_parse_iso(iso, strlen(iso), &t), 0);
    return t;
}

/* The standard entity: one property of every type, plus numeric twins. */
static void std_blob(struct rt_buf *b)
{
    struct rt_props_writer w;
    struct rt_prop p;
    rt_props_begin(&w, b);
    p = th_prop("Name", RT_EDM_STRING);
    p.v.bytes.p = (const uint8_t *)"Alice";
    p.v.bytes.n = 5;
    rt_props_add(&w, &p);
    p = th_prop("Quote", RT_EDM_STRING);
    p.v.bytes.p = (const uint8_t *)"O'Brien";
    p.v.bytes.n = 7;
    rt_props_add(&w, &p);
    p = th_prop("Age", RT_EDM_INT32);
    p.v.i32 = 30;
    rt_props_add(&w, &p);
    p = th_prop("Big", RT_EDM_INT64);
    p.v.i64 = 5000000000LL;
    rt_props_add(&w, &p);
    p = th_prop("Count64", RT_EDM_INT64);
    p.v.i64 = 30;
    rt_props_add(&w, &p);
    p = th_prop("Precise", RT_EDM_INT64);
    p.v.i64 = 9007199254740993LL; /* 2^53 + 1: not a double */
    rt_props_add(&w, &p);
    p = th_prop("Score", RT_EDM_DOUBLE);
    p.v.d = 2.5;
    rt_props_add(&w, &p);
    p = th_prop("Whole", RT_EDM_DOUBLE);
    p.v.d = 30.0;
    rt_props_add(&w, &p);
    p = th_prop("Nan", RT_EDM_DOUBLE);
    p.v.d = NAN;
    rt_props_add(&w, &p);
    p = th_prop("IsActive", RT_EDM_BOOL);
    p.v.b = 1;
    rt_props_add(&w, &p);
    p = th_prop("IsDeleted", RT_EDM_BOOL);
    p.v.b = 0;
    rt_props_add(&w, &p);
    p = th_prop("Born", RT_EDM_DATETIME);
    p.v.ticks = ticks_of("1990-05-01T00:00:00Z");
    rt_props_add(&w, &p);
    p = th_prop("Id", RT_EDM_GUID);
    memcpy(p.v.guid, guid1, 16);
    rt_props_add(&w, &p);
    p = th_prop("Data", RT_EDM_BINARY);
    p.v.bytes.p = bin1;
    p.v.bytes.n = 3;
    rt_props_add(&w, &p);
    rt_props_end(&w);
}

static struct rt_buf g_blob = RT_BUF_INIT;
static uint64_t g_ticks;

static int setup(void **state)
{
    (void)state;
    rt_buf_init(&g_blob);
    std_blob(&g_blob);
    g_ticks = ticks_of("2024-05-01T10:11:12.5Z");
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    rt_buf_free(&g_blob);
    return 0;
}

/* Helpers */

static struct rt_filter *parse_ok(const char *text)
{
    struct rt_filter *f = NULL;
    char err[RT_ERRMSG_SIZE];
    int rv = rt_filter_parse(text, strlen(text), &f, err);
    if (rv != 0) {
        fail_msg("parse of \"%s\" failed: %d %s", text, rv, err);
    }
    return f;
}

/* Evaluates @text on the standard entity, directly and after an encode/
 * decode round trip; both must agree. */
static int match(const char *text)
{
    struct rt_filter *f = parse_ok(text), *g = NULL;
    struct rt_buf enc = RT_BUF_INIT;
    int r1, r2;

    r1 = rt_filter_eval(f, PK, 2, RK, 4, g_ticks, g_blob.data, g_blob.len);
    if (f != NULL) {
        rt_filter_encode(f, &enc);
        assert_int_equal(rt_filter_decode(enc.data, enc.len, &g), 0);
        r2 = rt_filter_eval(g, PK, 2, RK, 4, g_ticks, g_blob.data, g_blob.len);
        if (r1 != r2) {
            fail_msg("\"%s\": %d before encode, %d after", text, r1, r2);
        }
    }
    rt_filter_free(f);
    rt_filter_free(g);
    rt_buf_free(&enc);
    return r1;
}

#define MATCH(text) assert_int_equal(match(text), 1)
#define NOMATCH(text) assert_int_equal(match(text), 0)

/* Asserts @text is rejected with RT_EINVAL and a message containing @want. */
static void perr(const char *text, const char *want)
{
    struct rt_filter *f = (struct rt_filter *)1;
    char err[RT_ERRMSG_SIZE];
    int rv = rt_filter_parse(text, strlen(text), &f, err);
    if (rv != RT_EINVAL) {
        fail_msg("\"%s\": expected RT_EINVAL, got %d", text, rv);
    }
    assert_null(f);
    if (strstr(err, want) == NULL) {
        fail_msg("\"%s\": message \"%s\" lacks \"%s\"", text, err, want);
    }
}

static char *fmt(const char *text)
{
    struct rt_filter *f = parse_ok(text);
    struct rt_buf b = RT_BUF_INIT;
    rt_filter_format(f, &b);
    rt_filter_free(f);
    char *s = strdup(rt_buf_cstr(&b));
    rt_buf_free(&b);
    return s;
}

static void assert_fmt(const char *text, const char *want)
{
    char *s = fmt(text);
    assert_string_equal(s, want);
    free(s);
}

static struct rt_filter_bounds bounds_of(const char *text,
                                         struct rt_filter **keep)
{
    struct rt_filter_bounds b;
    *keep = parse_ok(text);
    assert_int_equal(rt_filter_bounds(*keep, &b), 0);
    return b;
}

static void assert_bound(const struct rt_filter_bound *b,
                         const char *s,
                         int incl)
{
    if (s == NULL) {
        assert_false(b->set);
        return;
    }
    assert_true(b->set);
    assert_int_equal(b->n, strlen(s));
    assert_memory_equal(b->s, s, b->n);
    assert_int_equal(b->inclusive, incl);
}

/* Tests: parsing basics and literals */

/* An empty or blank filter means "no filter", and NULL matches everything. */
static void test_empty_filter(void **state)
{
    struct rt_filter *f = (struct rt_filter *)1;
    (void)state;
    assert_int_equal(rt_filter_parse("", 0, &f, NULL), 0);
    assert_null(f);
    assert_int_equal(rt_filter_parse(" \t  ", 4, &f, NULL), 0);
    assert_null(f);
    assert_int_equal(rt_filter_eval(NULL, "a", 1, "b", 1, 0, NULL, 0), 1);
}

/* String literals compare ordinally (UTF-16 code units), prefix first. */
static void test_string_literal(void **state)
{
    (void)state;
    MATCH("Name eq 'Alice'");
    NOMATCH("Name eq 'alice'");
    MATCH("Name ne 'Bob'");
    MATCH("Name gt 'Al'");
    MATCH("Name lt 'Alicf'");
    MATCH("Name ge 'Alice' and Name le 'Alice'");
    MATCH("Name lt 'a'"); /* 'A' < 'a' */
    MATCH("Name lt '\xc3\xa9'");
    NOMATCH("Name eq ''");
}

/* '' inside a string literal is one quote. */
static void test_string_escape(void **state)
{
    (void)state;
    MATCH("Quote eq 'O''Brien'");
    NOMATCH("Quote eq 'O''''Brien'");
    assert_fmt("Quote eq 'O''Brien'", "(Quote eq 'O''Brien')");
    assert_fmt("X eq ''''", "(X eq '''')");
}

/* Int32 literals, including the int32 extremes. */
static void test_int32_literal(void **state)
{
    (void)state;
    MATCH("Age eq 30");
    MATCH("Age gt -5");
    MATCH("Age lt 2147483647");
    MATCH("Age gt -2147483648");
    NOMATCH("Age ne 30");
    assert_fmt("A eq -2147483648", "(A eq -2147483648)");
}

/* Int64 literals carry an L or l suffix. */
static void test_int64_literal(void **state)
{
    (void)state;
    MATCH("Big eq 5000000000L");
    MATCH("Big eq 5000000000l");
    MATCH("Big lt 9223372036854775807L");
    MATCH("Big gt -9223372036854775808L");
    assert_fmt("A eq 7L", "(A eq 7L)");
}

/* Double literals: decimal point, exponent, d suffix, NaN/INF. */
static void test_double_literal(void **state)
{
    (void)state;
    MATCH("Score eq 2.5");
    MATCH("Score eq 2.5d");
    MATCH("Score eq 2.5D");
    MATCH("Score eq 25e-1");
    MATCH("Score eq 0.25E+1");
    MATCH("Score gt -2.0e10");
    MATCH("Score lt INF");
    MATCH("Score gt -INF");
    assert_fmt("A eq 1.5", "(A eq 1.5d)");
    assert_fmt("A eq -INF", "(A eq -INF)");
}

/* true/false literals; Boolean orders false < true. */
static void test_bool_literal(void **state)
{
    (void)state;
    MATCH("IsActive eq true");
    MATCH("IsDeleted eq false");
    MATCH("IsActive gt false");
    MATCH("IsDeleted lt true");
    NOMATCH("IsActive eq false");
    MATCH("IsActive eq TRUE");
}

/* datetime'...' literals compare by ticks, whatever the zone form. */
static void test_datetime_literal(void **state)
{
    (void)state;
    MATCH("Born eq datetime'1990-05-01T00:00:00Z'");
    MATCH("Born eq datetime'1990-05-01T00:00:00.0000000Z'");
    MATCH("Born eq datetime'1990-05-01T02:00:00+02:00'");
    MATCH("Born eq datetime'1990-05-01T00:00:00'");
    MATCH("Born lt datetime'1990-05-01T00:00:00.0000001Z'");
    MATCH("Born gt datetime'1990-04-30T23:59:59.999Z'");
    assert_fmt("A eq datetime'2008-07-10T00:00:00Z'",
               "(A eq datetime'2008-07-10T00:00:00Z')");
}

/* Timestamp is filterable as a DateTime taken from the entity's ticks. */
static void test_timestamp(void **state)
{
    (void)state;
    MATCH("Timestamp eq datetime'2024-05-01T10:11:12.5Z'");
    MATCH("Timestamp gt datetime'2024-01-01T00:00:00Z'");
    MATCH("Timestamp le datetime'2024-05-01T10:11:12.5Z'");
    NOMATCH("Timestamp lt datetime'2024-05-01T10:11:12.5Z'");
    NOMATCH("Timestamp eq '2024-05-01T10:11:12.5Z'");
}

/* guid'...' literals match Guid properties in any hex case. */
static void test_guid_literal(void **state)
{
    (void)state;
    MATCH("Id eq guid'c9da6455-213d-42c9-9a79-3e9149a57833'");
    MATCH("Id eq guid'C9DA6455-213D-42C9-9A79-3E9149A57833'");
    MATCH("Id ne guid'00000000-0000-0000-0000-000000000000'");
    NOMATCH("Id eq guid'00000000-0000-0000-0000-000000000000'");
    assert_fmt("A eq guid'C9DA6455-213D-42C9-9A79-3E9149A57833'",
               "(A eq guid'c9da6455-213d-42c9-9a79-3e9149a57833')");
}

/* X'hex' and binary'hex' literals compare bytewise. */
static void test_binary_literal(void **state)
{
    (void)state;
    MATCH("Data eq X'0102ff'");
    MATCH("Data eq binary'0102FF'");
    MATCH("Data gt X'0102'");
    MATCH("Data lt X'0103'");
    MATCH("Data gt X''");
    NOMATCH("Data eq X'0102fe'");
    assert_fmt("A eq binary'0AfF'", "(A eq X'0aff')");
}

/* Tests: evaluation semantics */

/* Int32, Int64 and Double compare by exact value across types. */
static void test_numeric_cross_type(void **state)
{
    (void)state;
    MATCH("Count64 eq 30"); /* Int32 literal vs Int64 */
    MATCH("Whole eq 30");   /* Int32 literal vs Double */
    MATCH("Age eq 30.0");   /* Double literal vs Int32 */
    MATCH("Age eq 30L");    /* Int64 literal vs Int32 */
    MATCH("Age lt 30.5");
    MATCH("Age gt 29.99");
    MATCH("Big gt 4.9e9");
    MATCH("Score gt 2");
    MATCH("Score lt 3L");
    /* 2^53+1 is not representable as a double: no false equality. */
    NOMATCH("Precise eq 9007199254740992.0");
    MATCH("Precise gt 9007199254740992.0");
    MATCH("Precise eq 9007199254740993L");
    MATCH("Big lt 1e300");
    MATCH("Big gt -1e300");
}

/* A literal of another type than the stored property never matches, not
 * even with ne. */
static void test_type_mismatch(void **state)
{
    (void)state;
    NOMATCH("Age eq '30'");
    NOMATCH("Age ne '30'");
    NOMATCH("Name eq 30");
    NOMATCH("Name ne 30");
    NOMATCH("Id eq 'c9da6455-213d-42c9-9a79-3e9149a57833'");
    NOMATCH("Born eq '1990-05-01T00:00:00Z'");
    NOMATCH("Name eq datetime'1990-05-01T00:00:00Z'");
    NOMATCH("IsActive eq 1");
    NOMATCH("Data eq '0102ff'");
    NOMATCH("Name ne X'00'");
    NOMATCH("PartitionKey eq 1");
    NOMATCH("PartitionKey ne 1");
}

/* A property the entity lacks makes eq and ne false. */
static void test_missing_property(void **state)
{
    (void)state;
    NOMATCH("Missing eq 1");
    NOMATCH("Missing ne 1");
    NOMATCH("Missing ne 'x'");
    NOMATCH("age eq 30"); /* names are case-sensitive */
    MATCH("Missing eq 1 or Age eq 30");
}

/* not is plain negation: not of a comparison that failed on a missing
 * property or a type mismatch is true (documented choice). */
static void test_not_of_false(void **state)
{
    (void)state;
    MATCH("not (Missing eq 1)");
    MATCH("not (Age eq '30')");
    NOMATCH("not (Age eq 30)");
    MATCH("not not (Age eq 30)");
}

/* NaN compares false with every operator except ne. */
static void test_nan(void **state)
{
    (void)state;
    NOMATCH("Nan eq NaN");
    NOMATCH("Nan eq 1.0");
    NOMATCH("Nan lt 1");
    NOMATCH("Nan ge 1L");
    MATCH("Nan ne 1.0");
    MATCH("Nan ne 1");
    NOMATCH("Score eq NaN");
    NOMATCH("Score lt NaN");
    MATCH("Score ne NaN");
    NOMATCH("Age le NaN");
    MATCH("Age ne NaN");
}

/* PartitionKey and RowKey compare as strings from the eval arguments. */
static void test_keys(void **state)
{
    (void)state;
    MATCH("PartitionKey eq 'P1'");
    MATCH("RowKey eq 'R005'");
    MATCH("RowKey ge 'R' and RowKey lt 'S'");
    NOMATCH("PartitionKey eq 'P'");
    MATCH("PartitionKey gt 'P'");
    MATCH("PartitionKey eq 'P1' and RowKey ne 'R006'");
}

/* Strings compare in UTF-16 code-unit order, as Azure compares them: a
 * supplementary character (U+1F600, surrogates 0xD83D..) sorts before
 * U+E000..U+FFFF, in keys and in String properties alike; Binary stays
 * bytewise. */
static void test_utf16_order(void **state)
{
    static const char emoji[] = "\xf0\x9f\x98\x80"; /* U+1F600 */
    static const char ff01[] = "\xef\xbc\x81";      /* U+FF01 */
    struct rt_buf blob = RT_BUF_INIT;
    struct rt_props_writer w;
    struct rt_prop p;
    struct rt_filter *f;
    struct rt_filter_bounds b;
    (void)state;

    rt_props_begin(&w, &blob);
    p = th_prop("S", RT_EDM_STRING);
    p.v.bytes.p = (const uint8_t *)emoji;
    p.v.bytes.n = 4;
    rt_props_add(&w, &p);
    rt_props_end(&w);
    static const struct
    {
        const char *text;
        int want;
    } cases[] = {
        {"PartitionKey lt '\xef\xbc\x81'", 1},
        {"PartitionKey lt '\xee\x80\x80'", 1},
        {"PartitionKey gt '\xed\x9f\xbf'", 1}, /* U+D7FF */
        {"PartitionKey ge '\xf4\x8f\xbf\xbf'", 0},
        {"RowKey gt '\xf0\x9f\x98\x80'", 1},
        {"RowKey le '\xf0\x9f\x98\x80'", 0},
        {"S lt '\xee\x80\x80'", 1},
        {"S gt '\xef\xbf\xbf'", 0},
        {"S ge '\xf0\x90\x80\x80' and S lt '\xee\x80\x80'", 1},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        f = parse_ok(cases[i].text);
        int r = rt_filter_eval(f, emoji, 4, ff01, 3, 0, blob.data, blob.len);
        if (r != cases[i].want) {
            fail_msg("\"%s\": %d, want %d", cases[i].text, r, cases[i].want);
        }
        rt_filter_free(f);
    }
    /* A key range across the two groups is empty one way round only. */
    b = bounds_of(
        "PartitionKey ge '\xee\x80\x80' and "
        "PartitionKey lt '\xf0\x9f\x98\x80'",
        &f);
    assert_true(b.empty);
    rt_filter_free(f);
    b = bounds_of(
        "PartitionKey ge '\xf0\x9f\x98\x80' and "
        "PartitionKey lt '\xee\x80\x80'",
        &f);
    assert_false(b.empty);
    rt_filter_free(f);
    /* The tighter of two lower bounds is the later in UTF-16 order. */
    b = bounds_of(
        "PartitionKey ge '\xee\x80\x80' and "
        "PartitionKey ge '\xf0\x9f\x98\x80'",
        &f);
    assert_int_equal(b.pk_lo.n, 3);
    rt_filter_free(f);
    rt_buf_free(&blob);
}

/* and binds tighter than or. */
static void test_precedence_and_or(void **state)
{
    (void)state;
    /* true or (false and false) */
    MATCH("Age eq 30 or Age eq 1 and Age eq 2");
    /* (false and false) or true */
    MATCH("Age eq 1 and Age eq 2 or Age eq 30");
    /* false or (true and false) */
    NOMATCH("Age eq 1 or Age eq 30 and Age eq 2");
    assert_fmt("A eq 1 or B eq 2 and C eq 3",
               "((A eq 1) or ((B eq 2) and (C eq 3)))");
    assert_fmt("A eq 1 and B eq 2 and C eq 3",
               "(((A eq 1) and (B eq 2)) and (C eq 3))");
}

/* not binds tighter than and/or and applies to one operand. */
static void test_precedence_not(void **state)
{
    (void)state;
    /* (not true) and true = false */
    NOMATCH("not Age eq 30 and Age eq 30");
    MATCH("not Age eq 1 and Age eq 30");
    assert_fmt("not A eq 1 and B eq 2", "((not (A eq 1)) and (B eq 2))");
    assert_fmt("not not A", "(not (not (A eq true)))");
}

/* Parentheses override precedence and may nest. */
static void test_parentheses(void **state)
{
    (void)state;
    /* (true or false) and false */
    NOMATCH("(Age eq 30 or Age eq 1) and Age eq 2");
    MATCH("((Age eq 30))");
    MATCH("not (Age eq 1 or Age eq 2)");
    MATCH("(Age eq 30)and(Name eq 'Alice')");
    assert_fmt("(A eq 1 or B eq 2) and C eq 3",
               "(((A eq 1) or (B eq 2)) and (C eq 3))");
}

/* "literal op Prop" is normalised to "Prop flipped-op literal". */
static void test_flipped_operands(void **state)
{
    (void)state;
    MATCH("30 eq Age");
    MATCH("29 lt Age");
    MATCH("31 gt Age");
    MATCH("30 ge Age");
    MATCH("30 le Age");
    NOMATCH("30 gt Age");
    MATCH("'P1' eq PartitionKey");
    assert_fmt("5 lt A", "(A gt 5)");
    assert_fmt("5 ge A", "(A le 5)");
    assert_fmt("'x' ne A", "(A ne 'x')");
}

/* A bare property is "Prop eq true". */
static void test_bare_boolean(void **state)
{
    (void)state;
    MATCH("IsActive");
    NOMATCH("IsDeleted");
    MATCH("not IsDeleted");
    MATCH("IsActive and not IsDeleted");
    NOMATCH("Age"); /* not a Boolean: mismatch */
    NOMATCH("Missing");
    assert_fmt("IsActive", "(IsActive eq true)");
}

/* A boolean literal is a term of its own (Azure accepts `$filter=true`):
 * folded while parsing, so no constant reaches the binary form. */
static void test_boolean_constant(void **state)
{
    struct rt_filter *f = (struct rt_filter *)1, *keep;
    struct rt_filter_bounds b;
    (void)state;
    assert_int_equal(rt_filter_parse("true", 4, &f, NULL), 0);
    assert_null(f); /* the same as no filter */
    assert_int_equal(rt_filter_parse("(not false)", 11, &f, NULL), 0);
    assert_null(f);
    MATCH("true");
    NOMATCH("false");
    NOMATCH("not true");
    MATCH("Age eq 30 and true");
    NOMATCH("Age eq 30 and false");
    NOMATCH("false and Age eq 30");
    MATCH("false or Age eq 30");
    MATCH("Age eq 31 or true");
    NOMATCH("Age eq 31 or false");
    MATCH(
        "(true and RowKey eq 'R005') and ((false or PartitionKey eq 'P1') "
        "or PartitionKey eq 'x')");
    NOMATCH(
        "(true and RowKey eq 'R005') and ((false or PartitionKey eq "
        "'P2') or PartitionKey eq 'x')");
    assert_fmt("true and Age eq 30", "(Age eq 30)");
    assert_fmt("Age eq 30 or false", "(Age eq 30)");
    /* A filter that folds to false matches nothing, and says so through
     * its bounds so the scan is skipped. */
    b = bounds_of("PartitionKey eq 'pk' and false", &keep);
    assert_true(b.empty);
    rt_filter_free(keep);
    b = bounds_of("PartitionKey eq 'pk' or false", &keep);
    assert_false(b.empty);
    assert_true(b.pk_eq);
    rt_filter_free(keep);
    /* A literal still cannot be compared with a literal. */
    perr("true eq true", "needs a property on one side");
}

/* Keywords and operators are accepted in any case; tabs separate tokens. */
static void test_keyword_case(void **state)
{
    (void)state;
    MATCH("Age EQ 30 AND Name Eq 'Alice'");
    MATCH("NOT (Age Gt 40)\tOr\tIsActive");
    MATCH("Age eq 30 and DATETIME'2020-01-01T00:00:00Z' gt Born");
    MATCH("Data eq x'0102ff'");
}

/* The canonical rendering parses back to the same rendering. */
static void test_format_roundtrip(void **state)
{
    static const char *filters[] = {
        "A eq 'it''s' and (B gt 1.25 or not C) and D eq X'00ff'",
        "Timestamp ge datetime'2021-04-07T23:56:22.6754067Z'",
        "E eq guid'c9da6455-213d-42c9-9a79-3e9149a57833' or F lt -3L",
        "G eq NaN or G eq -1e-300 or G eq 1.7976931348623157e308",
    };
    (void)state;
    for (size_t i = 0; i < sizeof(filters) / sizeof(filters[0]); i++) {
        char *a = fmt(filters[i]);
        char *b = fmt(a);
        assert_string_equal(a, b);
        free(a);
        free(b);
    }
}

/* rt_filter_references and rt_filter_comparisons report what is used. */
static void test_references(void **state)
{
    struct rt_filter *f = parse_ok("TableName eq 'abc' or not (X gt 1)");
    (void)state;
    assert_true(rt_filter_references(f, "TableName", 9));
    assert_true(rt_filter_references(f, "X", 1));
    assert_false(rt_filter_references(f, "x", 1));
    assert_false(rt_filter_references(f, "Table", 5));
    assert_int_equal(rt_filter_comparisons(f), 2);
    rt_filter_free(f);
}

/* A filter on keys alone never reads the blob; a malformed blob is
 * reported as RT_ECORRUPT when a property is needed. */
static void test_eval_blob(void **state)
{
    static const uint8_t bad[] = {2, 0, RT_EDM_INT32, 3, 'A', 'g'};
    struct rt_filter *f = parse_ok("PartitionKey eq 'P1'");
    (void)state;
    assert_int_equal(rt_filter_eval(f, "P1", 2, "", 0, 0, NULL, 0), 1);
    rt_filter_free(f);
    f = parse_ok("Age eq 30");
    assert_int_equal(rt_filter_eval(f, "P1", 2, "", 0, 0, bad, sizeof(bad)),
                     RT_ECORRUPT);
    assert_int_equal(rt_filter_eval(f, "P1", 2, "", 0, 0, bad, 1), RT_ECORRUPT);
    rt_filter_free(f);
    /* Short-circuit: the key test fails first, the blob is not read. */
    f = parse_ok("PartitionKey eq 'zz' and Age eq 30");
    assert_int_equal(rt_filter_eval(f, "P1", 2, "", 0, 0, bad, sizeof(bad)), 0);
    rt_filter_free(f);
    /* Query Tables: a tiny TableName blob. */
    struct rt_buf b = RT_BUF_INIT;
    struct rt_props_writer w;
    struct rt_prop p = th_prop("TableName", RT_EDM_STRING);
    p.v.bytes.p = (const uint8_t *)"mytable";
    p.v.bytes.n = 7;
    rt_props_begin(&w, &b);
    rt_props_add(&w, &p);
    rt_props_end(&w);
    f = parse_ok("TableName ge 'my' and TableName lt 'mz'");
    assert_int_equal(rt_filter_eval(f, "", 0, "", 0, 0, b.data, b.len), 1);
    rt_filter_free(f);
    rt_buf_free(&b);
}

/* Tests: bounds */

/* PartitionKey eq pins the partition. */
static void test_bounds_pk_eq(void **state)
{
    struct rt_filter *f;
    struct rt_filter_bounds b =
        bounds_of("PartitionKey eq 'p1' and Age gt 3", &f);
    (void)state;
    assert_false(b.empty);
    assert_true(b.pk_eq);
    assert_bound(&b.pk_lo, "p1", 1);
    assert_bound(&b.pk_hi, "p1", 1);
    assert_bound(&b.rk_lo, NULL, 0);
    assert_bound(&b.rk_hi, NULL, 0);
    rt_filter_free(f);
}

/* A PartitionKey range keeps the tightest bound of each side. */
static void test_bounds_pk_range(void **state)
{
    struct rt_filter *f;
    struct rt_filter_bounds b = bounds_of(
        "PartitionKey ge 'A' and PartitionKey gt 'A' and PartitionKey lt 'C' "
        "and 'B' ge PartitionKey and PartitionKey ne 'x'",
        &f);
    (void)state;
    assert_false(b.empty);
    assert_false(b.pk_eq);
    assert_bound(&b.pk_lo, "A", 0);
    assert_bound(&b.pk_hi, "B", 1);
    rt_filter_free(f);
}

/* With PartitionKey pinned, RowKey bounds are derived too; nested and
 * inside parentheses still belongs to the top-level conjunction. */
static void test_bounds_pk_eq_rk_range(void **state)
{
    struct rt_filter *f;
    struct rt_filter_bounds b = bounds_of(
        "PartitionKey eq 'p' and (RowKey ge 'r1' and RowKey lt 'r5') and "
        "(RowKey eq 'zz' or X eq 1)",
        &f);
    (void)state;
    assert_false(b.empty);
    assert_true(b.pk_eq);
    assert_bound(&b.rk_lo, "r1", 1);
    assert_bound(&b.rk_hi, "r5", 0);
    rt_filter_free(f);
    /* RowKey alone does not bound a (PK, RK)-ordered scan. */
    b = bounds_of("RowKey ge 'r1' and PartitionKey ge 'a'", &f);
    assert_false(b.pk_eq);
    assert_bound(&b.pk_lo, "a", 1);
    assert_bound(&b.rk_lo, NULL, 0);
    rt_filter_free(f);
}

/* Anything under or/not gives no bounds. */
static void test_bounds_or_not(void **state)
{
    struct rt_filter *f;
    struct rt_filter_bounds b =
        bounds_of("PartitionKey eq 'a' or PartitionKey eq 'b'", &f);
    (void)state;
    assert_false(b.empty);
    assert_false(b.pk_eq);
    assert_bound(&b.pk_lo, NULL, 0);
    assert_bound(&b.pk_hi, NULL, 0);
    rt_filter_free(f);
    b = bounds_of("not (PartitionKey eq 'a') and Age eq 1", &f);
    assert_false(b.empty);
    assert_bound(&b.pk_lo, NULL, 0);
    rt_filter_free(f);
    assert_int_equal(rt_filter_bounds(NULL, &b), 0);
    assert_false(b.empty);
    assert_bound(&b.pk_lo, NULL, 0);
}

/* Contradictory key constraints make the range empty. */
static void test_bounds_empty(void **state)
{
    static const char *empty[] = {
        "PartitionKey eq 'a' and PartitionKey eq 'b'",
        "PartitionKey gt 'a' and PartitionKey lt 'a'",
        "PartitionKey ge 'b' and PartitionKey le 'a'",
        "PartitionKey gt 'a' and PartitionKey le 'a'",
        "PartitionKey eq 1",
        "RowKey eq 'x' and RowKey eq 'y'",
        "PartitionKey eq 'p' and RowKey gt 'x' and RowKey lt 'b'",
    };
    static const char *nonempty[] = {
        "PartitionKey ge 'a' and PartitionKey le 'a'",
        "PartitionKey eq 'a' and (PartitionKey eq 'b' or X eq 1)",
        "PartitionKey eq 'a' or PartitionKey eq 1",
    };
    struct rt_filter *f;
    (void)state;
    for (size_t i = 0; i < sizeof(empty) / sizeof(empty[0]); i++) {
        struct rt_filter_bounds b = bounds_of(empty[i], &f);
        if (!b.empty) {
            fail_msg("\"%s\" should be empty", empty[i]);
        }
        rt_filter_free(f);
    }
    for (size_t i = 0; i < sizeof(nonempty) / sizeof(nonempty[0]); i++) {
        struct rt_filter_bounds b = bounds_of(nonempty[i], &f);
        if (b.empty) {
            fail_msg("\"%s\" should not be empty", nonempty[i]);
        }
        rt_filter_free(f);
    }
}

/* Tests: binary form */

static const char *rnd_cmp(unsigned r)
{
    static const char *cmps[] = {
        "Age eq 30",
        "Age gt 29.5",
        "Big ge 5000000000L",
        "Name lt 'B'",
        "Name eq 'Alice'",
        "Missing ne 1",
        "IsActive",
        "Score le 2.5d",
        "Nan ne NaN",
        "Id eq guid'c9da6455-213d-42c9-9a79-3e9149a57833'",
        "Data gt X'01'",
        "Born lt datetime'2000-01-01T00:00:00Z'",
        "PartitionKey eq 'P1'",
        "RowKey gt 'R'",
        "Timestamp gt "
        "datetime'2024-01-01T00:"
        "00:00Z'",
        "Age eq 'x'",
        "'q' lt Name",
        "IsDeleted eq true",
    };
    return cmps[r % (sizeof(cmps) / sizeof(cmps[0]))];
}

/* Builds a random filter text with at most @budget (>= 1) comparisons. */
static void rnd_filter(struct rt_buf *b, unsigned budget, int depth)
{
    unsigned r = (unsigned)rand();
    if (budget == 1 || depth > 4 || r % 3 == 0) {
        if (r % 7 == 0) {
            rt_buf_append_str(b, "not ");
        }
        rt_buf_printf(b, "(%s)", rnd_cmp(r >> 4));
        return;
    }
    unsigned left = 1 + (r >> 8) % (budget - 1);
    rt_buf_append_str(b, r % 5 == 0 ? "not (" : "(");
    rnd_filter(b, left, depth + 1);
    rt_buf_append_str(b, (r >> 3) % 2 ? " and " : " or ");
    rnd_filter(b, budget - left, depth + 1);
    rt_buf_append_str(b, ")");
}

/* Random entity around the standard one: keys and a few values vary. */
static void rnd_entity(struct rt_buf *b, char *pk, char *rk)
{
    struct rt_props_writer w;
    struct rt_prop p;
    rt_props_begin(&w, b);
    if (rand() % 4) {
        p = th_prop("Age", rand() % 2 ? RT_EDM_INT32 : RT_EDM_STRING);
        if (p.type == RT_EDM_INT32) {
            p.v.i32 = 28 + rand() % 4;
        } else {
            p.v.bytes.p = (const uint8_t *)"x";
            p.v.bytes.n = 1;
        }
        rt_props_add(&w, &p);
    }
    if (rand() % 4) {
        p = th_prop("Name", RT_EDM_STRING);
        p.v.bytes.p = (const uint8_t *)(rand() % 2 ? "Alice" : "Bob");
        p.v.bytes.n = strlen((const char *)p.v.bytes.p);
        rt_props_add(&w, &p);
    }
    if (rand() % 2) {
        p = th_prop("IsActive", RT_EDM_BOOL);
        p.v.b = rand() % 2;
        rt_props_add(&w, &p);
    }
    if (rand() % 2) {
        p = th_prop("Score", RT_EDM_DOUBLE);
        p.v.d = rand() % 3 == 0 ? NAN : 2.0 + (rand() % 3) * 0.5;
        rt_props_add(&w, &p);
    }
    rt_props_end(&w);
    strcpy(pk, rand() % 2 ? "P1" : "P0");
    strcpy(rk, rand() % 2 ? "R1" : "Q");
}

/* Encoding then decoding gives a filter that evaluates and formats exactly
 * like the original, on random filters and entities. */
static void test_codec_random_equivalence(void **state)
{
    (void)state;
    srand(12345);
    for (int iter = 0; iter < 2000; iter++) {
        struct rt_buf text = RT_BUF_INIT, enc = RT_BUF_INIT;
        struct rt_buf f1 = RT_BUF_INIT, f2 = RT_BUF_INIT;
        unsigned budget = 1 + (unsigned)rand() % RT_FILTER_MAX_COMPARISONS;
        rnd_filter(&text, budget, 0);
        struct rt_filter *a = parse_ok(rt_buf_cstr(&text)), *b = NULL;
        rt_filter_encode(a, &enc);
        assert_int_equal(rt_filter_decode(enc.data, enc.len, &b), 0);
        rt_filter_format(a, &f1);
        rt_filter_format(b, &f2);
        assert_string_equal(rt_buf_cstr(&f1), rt_buf_cstr(&f2));
        for (int e = 0; e < 8; e++) {
            struct rt_buf blob = RT_BUF_INIT;
            char pk[8], rk[8];
            rnd_entity(&blob, pk, rk);
            uint64_t t = g_ticks - (uint64_t)(rand() % 2) * RT_TICKS_PER_SEC *
                                       86400 * 365;
            int r1 = rt_filter_eval(a, pk, strlen(pk), rk, strlen(rk), t,
                                    blob.data, blob.len);
            int r2 = rt_filter_eval(b, pk, strlen(pk), rk, strlen(rk), t,
                                    blob.data, blob.len);
            assert_true(r1 == 0 || r1 == 1);
            assert_int_equal(r1, r2);
            rt_buf_free(&blob);
        }
        rt_filter_free(a);
        rt_filter_free(b);
        rt_buf_free(&text);
        rt_buf_free(&enc);
        rt_buf_free(&f1);
        rt_buf_free(&f2);
    }
}

static const char *codec_sample =
    "(PartitionKey eq 'p' and not (Age gt 3 or Name lt 'x''y')) or "
    "Id eq guid'c9da6455-213d-42c9-9a79-3e9149a57833' or Data eq X'00ff' or "
    "Big eq 1L or Score lt 1.5 or IsActive or Born gt "
    "datetime'2001-01-01T00:00:00Z'";

/* Every proper prefix of an encoding is rejected as corrupt. */
static void test_decode_truncated(void **state)
{
    struct rt_filter *f = parse_ok(codec_sample), *g;
    struct rt_buf enc = RT_BUF_INIT;
    (void)state;
    rt_filter_encode(f, &enc);
    for (size_t n = 0; n < enc.len; n++) {
        uint8_t *copy = malloc(n ? n : 1); /* exact size for ASan */
        memcpy(copy, enc.data, n);
        g = (struct rt_filter *)1;
        assert_int_equal(rt_filter_decode(copy, n, &g), RT_ECORRUPT);
        assert_null(g);
        free(copy);
    }
    assert_int_equal(rt_filter_decode(enc.data, enc.len, &g), 0);
    rt_filter_free(g);
    /* Unknown version, trailing garbage. */
    enc.data[0] = 2;
    assert_int_equal(rt_filter_decode(enc.data, enc.len, &g), RT_ECORRUPT);
    enc.data[0] = RT_FILTER_ENC_VERSION;
    rt_buf_append_u8(&enc, 0);
    assert_int_equal(rt_filter_decode(enc.data, enc.len, &g), RT_ECORRUPT);
    rt_filter_free(f);
    rt_buf_free(&enc);
}

/* Random byte mutations decode to a usable filter or RT_ECORRUPT, never a
 * crash; whatever decodes can be evaluated and bounded. */
static void test_decode_mutated(void **state)
{
    struct rt_filter *f = parse_ok(codec_sample), *g;
    struct rt_buf enc = RT_BUF_INIT;
    int ok = 0;
    (void)state;
    rt_filter_encode(f, &enc);
    srand(777);
    for (int iter = 0; iter < 5000; iter++) {
        uint8_t *copy = malloc(enc.len);
        memcpy(copy, enc.data, enc.len);
        int flips = 1 + rand() % 4;
        for (int k = 0; k < flips; k++) {
            size_t at = (size_t)rand() % enc.len;
            copy[at] = rand() % 3 ? (uint8_t)rand() : (uint8_t)(copy[at] ^ 1);
        }
        size_t n = rand() % 8 == 0 ? (size_t)rand() % enc.len : enc.len;
        int rv = rt_filter_decode(copy, n, &g);
        assert_true(rv == 0 || rv == RT_ECORRUPT);
        if (rv == 0) {
            struct rt_filter_bounds b;
            int r = rt_filter_eval(g, PK, 2, RK, 4, g_ticks, g_blob.data,
                                   g_blob.len);
            assert_true(r == 0 || r == 1);
            assert_int_equal(rt_filter_bounds(g, &b), 0);
            ok++;
        }
        rt_filter_free(g);
        free(copy);
    }
    print_message("mutations decoded successfully: %d of 5000\n", ok);
    rt_filter_free(f);
    rt_buf_free(&enc);
}

/* A hostile encoding nesting deeper than RT_FILTER_MAX_DEPTH is rejected;
 * bad indices and types too. */
static void test_decode_hostile(void **state)
{
    struct rt_buf enc = RT_BUF_INIT;
    struct rt_filter *g;
    static const uint8_t head[] = {1, 1, 0, RT_EDM_BOOL, 1, 'A', 1};
    (void)state;
    rt_buf_append(&enc, head, sizeof(head));
    for (int i = 0; i < 100000; i++) {
        rt_buf_append_u8(&enc, 1); /* not */
    }
    rt_buf_append_u8(&enc, 0);
    rt_buf_append_u8(&enc, 0);
    assert_int_equal(rt_filter_decode(enc.data, enc.len, &g), RT_ECORRUPT);
    rt_buf_reset(&enc);
    rt_buf_append(&enc, head, sizeof(head));
    rt_buf_append_u8(&enc, 0);
    rt_buf_append_u8(&enc, 0);
    assert_int_equal(rt_filter_decode(enc.data, enc.len, &g), 0);
    rt_filter_free(g);
    enc.data[enc.len - 1] = 1; /* comparison index out of range */
    assert_int_equal(rt_filter_decode(enc.data, enc.len, &g), RT_ECORRUPT);
    enc.data[enc.len - 1] = 0;
    enc.data[3] = 9; /* unknown literal type */
    assert_int_equal(rt_filter_decode(enc.data, enc.len, &g), RT_ECORRUPT);
    enc.data[3] = RT_EDM_BOOL;
    enc.data[2] = 6; /* unknown operator */
    assert_int_equal(rt_filter_decode(enc.data, enc.len, &g), RT_ECORRUPT);
    enc.data[2] = 0;
    enc.data[6] = 2; /* bool not 0/1 */
    assert_int_equal(rt_filter_decode(enc.data, enc.len, &g), RT_ECORRUPT);
    rt_buf_free(&enc);
}

/* Tests: errors */

/* Unbalanced parentheses are rejected either way round. */
static void test_err_parens(void **state)
{
    (void)state;
    perr("(Age eq 30", "never closed");
    perr("Age eq 30)", "unexpected ')'");
    perr("((Age eq 30)", "never closed");
    perr("()", "unexpected ')'");
}

/* Unknown operators and stray characters are named in the message. */
static void test_err_unknown_operator(void **state)
{
    (void)state;
    perr("Age equals 30", "unknown operator 'equals'");
    perr("Age = 30", "unexpected character '='");
    perr("Age eq 30 xor Age eq 1", "unexpected 'xor'");
    perr("Age has 30", "unknown operator 'has'");
    perr("Age eq 30 \x01", "unexpected byte 0x01");
    perr("Age eq .5", "unexpected character '.'");
    perr("Age eq 1 eq 2", "chained comparison");
}

/* 15 comparisons are accepted, the 16th is refused. */
static void test_err_too_many_comparisons(void **state)
{
    struct rt_buf b = RT_BUF_INIT;
    struct rt_filter *f;
    (void)state;
    for (int i = 0; i < RT_FILTER_MAX_COMPARISONS; i++) {
        rt_buf_printf(&b, "%sA%d eq %d", i ? " or " : "", i, i);
    }
    f = parse_ok(rt_buf_cstr(&b));
    assert_int_equal(rt_filter_comparisons(f), 15);
    rt_filter_free(f);
    rt_buf_append_str(&b, " or IsActive");
    perr(rt_buf_cstr(&b), "too many comparisons");
    rt_buf_free(&b);
}

/* Integer literals outside their type's range are refused with Azure's
 * wording. */
static void test_err_int_overflow(void **state)
{
    (void)state;
    perr("Age eq 2147483648", "Unrecognized 'Edm.Int32' literal '2147483648'");
    perr("Age eq -2147483649", "Unrecognized 'Edm.Int32' literal");
    perr("Age eq 99999999999999999999999", "Unrecognized 'Edm.Int32'");
    perr("Big eq 9223372036854775808L", "Unrecognized 'Edm.Int64'");
    perr("Score eq 1e400", "Unrecognized 'Edm.Double'");
    perr("Age eq 12abc", "unrecognized literal '12abc'");
    perr("Age eq 1.", "unrecognized literal");
    perr("Age eq 1.5L", "unrecognized literal");
}

/* Malformed guid literals are refused. */
static void test_err_bad_guid(void **state)
{
    (void)state;
    perr("Id eq guid'c9da6455-213d-42c9-9a79-3e9149a5783'",
         "Unrecognized 'Edm.Guid'");
    perr("Id eq guid'c9da6455213d-42c9-9a79-3e9149a578333'",
         "Unrecognized 'Edm.Guid'");
    perr("Id eq guid'g9da6455-213d-42c9-9a79-3e9149a57833'",
         "Unrecognized 'Edm.Guid'");
    perr("Id eq guid''", "Unrecognized 'Edm.Guid'");
}

/* Binary literals need an even number of hex digits. */
static void test_err_bad_binary(void **state)
{
    (void)state;
    perr("Data eq X'012'", "odd number of hex digits");
    perr("Data eq binary'0g'", "not hex");
    perr("Data eq X'01", "unterminated");
}

/* and/or/not without an operand are refused. */
static void test_err_dangling(void **state)
{
    (void)state;
    perr("Age eq 30 and", "unexpected end of filter");
    perr("Age eq 30 or", "unexpected end of filter");
    perr("and Age eq 30", "unexpected 'and'");
    perr("Age eq 30 and or Age eq 1", "unexpected 'or'");
    perr("not", "unexpected end of filter");
    perr("Age eq", "unexpected end of filter");
}

/* Property-to-property and literal-to-literal comparisons are refused. */
static void test_err_operands(void **state)
{
    (void)state;
    perr("Age eq Big", "comparing two properties");
    perr("1 eq 1", "needs a property");
    perr("'a'", "must be compared with a property");
    perr("42", "must be compared with a property");
}

/* Functions, arithmetic and null are not part of the Table service
 * subset. */
static void test_err_unsupported(void **state)
{
    (void)state;
    perr("startswith(Name, 'A')", "function 'startswith' is not supported");
    perr("startswith(Name, 'A') eq true", "function 'startswith'");
    perr("Age add 1 eq 31", "arithmetic operator 'add'");
    perr("Age eq 30 sub 1", "arithmetic operator 'sub'");
    perr("Name eq null", "null literal");
    perr("Age eq datetimeoffset'2020-01-01T00:00:00Z'",
         "unsupported literal type 'datetimeoffset'");
}

/* Bad datetimes and unterminated strings are refused. */
static void test_err_literals(void **state)
{
    (void)state;
    perr("Born eq datetime'1990-13-01T00:00:00Z'",
         "Unrecognized 'Edm.DateTime'");
    perr("Born eq datetime'1500-01-01T00:00:00Z'", "out of range");
    perr("Name eq 'abc", "unterminated string");
    perr("Name eq 'abc''", "unterminated string");
}

/* Nesting beyond RT_FILTER_MAX_NESTING is refused instead of recursing. */
static void test_err_nesting(void **state)
{
    struct rt_buf b = RT_BUF_INIT;
    struct rt_filter *f;
    (void)state;
    for (int i = 0; i < RT_FILTER_MAX_NESTING; i++) {
        rt_buf_append_str(&b, i % 2 ? "(" : "not ");
    }
    rt_buf_append_str(&b, "A");
    for (int i = 0; i < RT_FILTER_MAX_NESTING / 2; i++) {
        rt_buf_append_str(&b, ")");
    }
    f = parse_ok(rt_buf_cstr(&b));
    rt_filter_free(f);
    rt_buf_reset(&b);
    for (int i = 0; i < 100000; i++) {
        rt_buf_append_str(&b, "(");
    }
    perr(rt_buf_cstr(&b), "nested too deeply");
    rt_buf_reset(&b);
    for (int i = 0; i < 100000; i++) {
        rt_buf_append_str(&b, "not ");
    }
    perr(rt_buf_cstr(&b), "nested too deeply");
    rt_buf_free(&b);
}

/* Tests: throughput (printed, not asserted) */

/* A 3-comparison filter on a 10-property blob, 1M evaluations. */
static void test_throughput(void **state)
{
    struct rt_buf blob = RT_BUF_INIT;
    struct rt_props_writer w;
    struct rt_prop p;
    char names[10][16];
    (void)state;
    rt_props_begin(&w, &blob);
    for (int i = 0; i < 10; i++) {
        snprintf(names[i], sizeof(names[i]), "Property%d", i);
        if (i % 3 == 0) {
            p = th_prop(names[i], RT_EDM_STRING);
            p.v.bytes.p = (const uint8_t *)"some string value";
            p.v.bytes.n = 17;
        } else if (i % 3 == 1) {
            p = th_prop(names[i], RT_EDM_INT32);
            p.v.i32 = i * 10;
        } else {
            p = th_prop(names[i], RT_EDM_DOUBLE);
            p.v.d = i * 1.5;
        }
        rt_props_add(&w, &p);
    }
    rt_props_end(&w);
    struct rt_filter *f = parse_ok(
        "Property7 eq 70 and Property9 eq 'some string value' and "
        "Property8 gt 1.0");
    const int iters = 1000000;
    long hits = 0;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int i = 0; i < iters; i++) {
        hits += rt_filter_eval(f, "pk", 2, "rk", 2, 0, blob.data, blob.len);
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double ns = ((double)(t1.tv_sec - t0.tv_sec) * 1e9 +
                 (double)(t1.tv_nsec - t0.tv_nsec)) /
                iters;
    assert_int_equal(hits, iters);
    printf(
        "filter throughput: %.1f ns/eval (3 comparisons, 10-property "
        "blob, %zu bytes)\n",
        ns, blob.len);
    rt_filter_free(f);
    rt_buf_free(&blob);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_empty_filter),
        cmocka_unit_test(test_string_literal),
        cmocka_unit_test(test_string_escape),
        cmocka_unit_test(test_int32_literal),
        cmocka_unit_test(test_int64_literal),
        cmocka_unit_test(test_double_literal),
        cmocka_unit_test(test_bool_literal),
        cmocka_unit_test(test_datetime_literal),
        cmocka_unit_test(test_timestamp),
        cmocka_unit_test(test_guid_literal),
        cmocka_unit_test(test_binary_literal),
        cmocka_unit_test(test_numeric_cross_type),
        cmocka_unit_test(test_type_mismatch),
        cmocka_unit_test(test_missing_property),
        cmocka_unit_test(test_not_of_false),
        cmocka_unit_test(test_boolean_constant),
        cmocka_unit_test(test_nan),
        cmocka_unit_test(test_keys),
        cmocka_unit_test(test_utf16_order),
        cmocka_unit_test(test_precedence_and_or),
        cmocka_unit_test(test_precedence_not),
        cmocka_unit_test(test_parentheses),
        cmocka_unit_test(test_flipped_operands),
        cmocka_unit_test(test_bare_boolean),
        cmocka_unit_test(test_keyword_case),
        cmocka_unit_test(test_format_roundtrip),
        cmocka_unit_test(test_references),
        cmocka_unit_test(test_eval_blob),
        cmocka_unit_test(test_bounds_pk_eq),
        cmocka_unit_test(test_bounds_pk_range),
        cmocka_unit_test(test_bounds_pk_eq_rk_range),
        cmocka_unit_test(test_bounds_or_not),
        cmocka_unit_test(test_bounds_empty),
        cmocka_unit_test(test_codec_random_equivalence),
        cmocka_unit_test(test_decode_truncated),
        cmocka_unit_test(test_decode_mutated),
        cmocka_unit_test(test_decode_hostile),
        cmocka_unit_test(test_err_parens),
        cmocka_unit_test(test_err_unknown_operator),
        cmocka_unit_test(test_err_too_many_comparisons),
        cmocka_unit_test(test_err_int_overflow),
        cmocka_unit_test(test_err_bad_guid),
        cmocka_unit_test(test_err_bad_binary),
        cmocka_unit_test(test_err_dangling),
        cmocka_unit_test(test_err_operands),
        cmocka_unit_test(test_err_unsupported),
        cmocka_unit_test(test_err_literals),
        cmocka_unit_test(test_err_nesting),
        cmocka_unit_test(test_throughput),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
