/* OData JSON codec: entity parsing (types, names, limits), writing in the
 * three metadata levels, ETags and escaping. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "fe_odata.h"
#include "rt_entity.h"
#include "rt_err.h"
#include "rt_time.h"

/* Fixture / Helpers */

static char errmsg[RT_ERRMSG_SIZE];

static int parse(const char *json, struct fe_entity_in *in)
{
    fe_entity_in_init(in);
    return fe_odata_parse_entity(json, strlen(json), in, errmsg);
}

static int parse_rc(const char *json)
{
    struct fe_entity_in in;
    int rc = parse(json, &in);
    if (rc != 0) {
        assert_null(in.pk);
        assert_null(in.rk);
        assert_int_equal(in.props.len, 0);
    }
    fe_entity_in_free(&in);
    return rc;
}

/* Parses and returns the single property named @name. */
static struct rt_prop get_prop(struct fe_entity_in *in, const char *name)
{
    struct rt_prop p;
    assert_int_equal(rt_props_check(in->props.data, in->props.len), 0);
    assert_int_equal(
        rt_props_find(in->props.data, in->props.len, name, strlen(name), &p),
        1);
    return p;
}

static uint64_t ticks_of(const char *iso)
{
    uint64_t t;
    assert_int_equal(rt_time_parse_iso(iso, strlen(iso), &t), 0);
    return t;
}

#define TS "2024-05-01T10:11:12.3456789Z"
#define ETAG_JSON "W/\\\"datetime'2024-05-01T10%3A11%3A12.3456789Z'\\\""
#define ROOT "http://127.0.0.1:10002/devstoreaccount1"

/* Writes the entity of @json (parsed) with Timestamp TS. */
static char *write_json(const char *json,
                        enum fe_meta meta,
                        int element,
                        const char *const *select,
                        size_t nselect)
{
    struct fe_entity_in in;
    struct rt_buf value = RT_BUF_INIT, out = RT_BUF_INIT;
    struct fe_odata_ctx ctx = {
        ROOT, "devstoreaccount1", "people", meta, select, nselect};
    assert_int_equal(parse(json, &in), 0);
    rt_value_encode(&value, ticks_of(TS), 0, in.props.data, in.props.len);
    assert_int_equal(
        fe_odata_write_entity(&out, &ctx, in.pk, strlen(in.pk), in.rk,
                              strlen(in.rk), value.data, value.len, element),
        0);
    fe_entity_in_free(&in);
    rt_buf_free(&value);
    rt_buf_cstr(&out);
    size_t n;
    return (char *)rt_buf_steal(&out, &n);
}

static void expect_write(const char *json,
                         enum fe_meta meta,
                         int element,
                         const char *want)
{
    char *got = write_json(json, meta, element, NULL, 0);
    assert_string_equal(got, want);
    free(got);
}

/* Writes one double property in minimal metadata, returns its JSON text. */
static void expect_double(double d, const char *want)
{
    struct rt_buf blob = RT_BUF_INIT, value = RT_BUF_INIT, out = RT_BUF_INIT;
    struct rt_props_writer w;
    struct rt_prop p;
    struct fe_odata_ctx ctx = {ROOT, "acct", "t", FE_META_NONE, NULL, 0};
    memset(&p, 0, sizeof(p));
    p.name = "D";
    p.name_len = 1;
    p.type = RT_EDM_DOUBLE;
    p.v.d = d;
    rt_props_begin(&w, &blob);
    rt_props_add(&w, &p);
    rt_props_end(&w);
    rt_value_encode(&value, ticks_of(TS), 0, blob.data, blob.len);
    assert_int_equal(fe_odata_write_entity(&out, &ctx, "p", 1, "r", 1,
                                           value.data, value.len, 0),
                     0);
    const char *s = rt_buf_cstr(&out);
    const char *at = strstr(s, "\"D\":");
    assert_non_null(at);
    char got[64];
    snprintf(got, sizeof(got), "%.*s", (int)(strlen(at) - 5), at + 4);
    assert_string_equal(got, want);
    if (isfinite(d)) {
        assert_true(strtod(got, NULL) == d);
    }
    rt_buf_free(&blob);
    rt_buf_free(&value);
    rt_buf_free(&out);
}

#define ALL_TYPES                                                             \
    "{\"PartitionKey\":\"p1\",\"RowKey\":\"r1\",\"Name\":\"Ann\","            \
    "\"Age\":23,\"Score\":1.5,\"Active\":true,"                               \
    "\"Big@odata.type\":\"Edm.Int64\",\"Big\":\"9007199254740993\","          \
    "\"When@odata.type\":\"Edm.DateTime\",\"When\":\"2008-07-10T00:00:00Z\"," \
    "\"Id@odata.type\":\"Edm.Guid\","                                         \
    "\"Id\":\"c9da6455-213d-42c9-9a79-3e9149a57833\","                        \
    "\"Blob@odata.type\":\"Edm.Binary\",\"Blob\":\"AQIDBA==\","               \
    "\"N@odata.type\":\"Edm.Double\",\"N\":\"NaN\"}"

/* Tests: parsing */

/* Unannotated JSON values get the §4.2 inferred types. */
static void test_parse_inferred_types(void **state)
{
    struct fe_entity_in in;
    struct rt_prop p;
    (void)state;
    assert_int_equal(
        parse("{\"PartitionKey\":\"p\",\"RowKey\":\"r\",\"S\":\"2008-07-10T00:"
              "00:00Z\",\"B\":false,\"I\":-2147483648,\"Big\":2147483648,"
              "\"R\":1.5,\"E\":1e3,\"Huge\":123456789012345678901234567890,"
              "\"NegHuge\":-99999999999999999999}",
              &in),
        0);
    assert_string_equal(in.pk, "p");
    assert_string_equal(in.rk, "r");
    p = get_prop(&in, "S");
    assert_int_equal(p.type, RT_EDM_STRING);
    assert_int_equal(p.v.bytes.n, 20);
    p = get_prop(&in, "B");
    assert_int_equal(p.type, RT_EDM_BOOL);
    assert_int_equal(p.v.b, 0);
    p = get_prop(&in, "I");
    assert_int_equal(p.type, RT_EDM_INT32);
    assert_int_equal(p.v.i32, INT32_MIN);
    p = get_prop(&in, "Big");
    assert_int_equal(p.type, RT_EDM_DOUBLE);
    assert_true(p.v.d == 2147483648.0);
    p = get_prop(&in, "R");
    assert_int_equal(p.type, RT_EDM_DOUBLE);
    assert_true(p.v.d == 1.5);
    p = get_prop(&in, "E");
    assert_int_equal(p.type, RT_EDM_DOUBLE);
    assert_true(p.v.d == 1000.0);
    p = get_prop(&in, "Huge");
    assert_int_equal(p.type, RT_EDM_DOUBLE);
    assert_true(p.v.d == 123456789012345678901234567890.0);
    p = get_prop(&in, "NegHuge");
    assert_int_equal(p.type, RT_EDM_DOUBLE);
    assert_true(p.v.d == -99999999999999999999.0);
    fe_entity_in_free(&in);
}

/* Annotated values convert from their JSON forms, annotation before or
 * after the value. */
static void test_parse_annotated_types(void **state)
{
    struct fe_entity_in in;
    struct rt_prop p;
    (void)state;
    assert_int_equal(
        parse("{\"L@odata.type\":\"Edm.Int64\",\"L\":\"-9223372036854775808\","
              "\"L2\":255,\"L2@odata.type\":\"Edm.Int64\","
              "\"W\":\"2008-07-10T00:00:00.5+01:00\","
              "\"W@odata.type\":\"Edm.DateTime\","
              "\"G@odata.type\":\"Edm.Guid\","
              "\"G\":\"C9DA6455-213d-42c9-9a79-3e9149a57833\","
              "\"Bin@odata.type\":\"Edm.Binary\",\"Bin\":\"AQIDBA==\","
              "\"N@odata.type\":\"Edm.Double\",\"N\":\"NaN\","
              "\"Inf@odata.type\":\"Edm.Double\",\"Inf\":\"Infinity\","
              "\"MInf@odata.type\":\"Edm.Double\",\"MInf\":\"-Infinity\","
              "\"DS@odata.type\":\"Edm.Double\",\"DS\":\"2.5e2\","
              "\"DI@odata.type\":\"Edm.Double\",\"DI\":7,"
              "\"I@odata.type\":\"Edm.Int32\",\"I\":\"-17\","
              "\"IR@odata.type\":\"Edm.Int32\",\"IR\":3.0,"
              "\"Bo@odata.type\":\"Edm.Boolean\",\"Bo\":\"true\","
              "\"Bo2@odata.type\":\"Edm.Boolean\",\"Bo2\":false,"
              "\"St@odata.type\":\"Edm.String\",\"St\":\"x\"}",
              &in),
        0);
    assert_null(in.pk);
    p = get_prop(&in, "L");
    assert_int_equal(p.type, RT_EDM_INT64);
    assert_true(p.v.i64 == INT64_MIN);
    p = get_prop(&in, "L2");
    assert_int_equal(p.type, RT_EDM_INT64);
    assert_true(p.v.i64 == 255);
    p = get_prop(&in, "W");
    assert_int_equal(p.type, RT_EDM_DATETIME);
    assert_true(p.v.ticks == ticks_of("2008-07-09T23:00:00.5Z"));
    p = get_prop(&in, "G");
    assert_int_equal(p.type, RT_EDM_GUID);
    assert_memory_equal(p.v.guid,
                        "\xc9\xda\x64\x55\x21\x3d\x42\xc9\x9a\x79\x3e\x91"
                        "\x49\xa5\x78\x33",
                        16);
    p = get_prop(&in, "Bin");
    assert_int_equal(p.type, RT_EDM_BINARY);
    assert_int_equal(p.v.bytes.n, 4);
    assert_memory_equal(p.v.bytes.p, "\x01\x02\x03\x04", 4);
    p = get_prop(&in, "N");
    assert_true(p.type == RT_EDM_DOUBLE && isnan(p.v.d));
    p = get_prop(&in, "Inf");
    assert_true(p.type == RT_EDM_DOUBLE && isinf(p.v.d) && p.v.d > 0);
    p = get_prop(&in, "MInf");
    assert_true(p.type == RT_EDM_DOUBLE && isinf(p.v.d) && p.v.d < 0);
    p = get_prop(&in, "DS");
    assert_true(p.type == RT_EDM_DOUBLE && p.v.d == 250.0);
    p = get_prop(&in, "DI");
    assert_true(p.type == RT_EDM_DOUBLE && p.v.d == 7.0);
    p = get_prop(&in, "I");
    assert_true(p.type == RT_EDM_INT32 && p.v.i32 == -17);
    p = get_prop(&in, "IR");
    assert_true(p.type == RT_EDM_INT32 && p.v.i32 == 3);
    p = get_prop(&in, "Bo");
    assert_true(p.type == RT_EDM_BOOL && p.v.b == 1);
    p = get_prop(&in, "Bo2");
    assert_true(p.type == RT_EDM_BOOL && p.v.b == 0);
    p = get_prop(&in, "St");
    assert_true(p.type == RT_EDM_STRING && p.v.bytes.n == 1);
    assert_int_equal(rt_get_u16le(in.props.data), 15);
    fe_entity_in_free(&in);
}

/* Binary base64 edge cases: empty, one and two padding characters. */
static void test_parse_base64(void **state)
{
    struct fe_entity_in in;
    struct rt_prop p;
    (void)state;
    assert_int_equal(parse("{\"A@odata.type\":\"Edm.Binary\",\"A\":\"\","
                           "\"B@odata.type\":\"Edm.Binary\",\"B\":\"/w==\","
                           "\"C@odata.type\":\"Edm.Binary\",\"C\":\"//8=\","
                           "\"D@odata.type\":\"Edm.Binary\",\"D\":\"+/+/\"}",
                           &in),
                     0);
    p = get_prop(&in, "A");
    assert_int_equal(p.v.bytes.n, 0);
    p = get_prop(&in, "B");
    assert_int_equal(p.v.bytes.n, 1);
    assert_int_equal(p.v.bytes.p[0], 0xff);
    p = get_prop(&in, "C");
    assert_int_equal(p.v.bytes.n, 2);
    assert_memory_equal(p.v.bytes.p, "\xff\xff", 2);
    p = get_prop(&in, "D");
    assert_int_equal(p.v.bytes.n, 3);
    assert_memory_equal(p.v.bytes.p, "\xfb\xff\xbf", 3);
    fe_entity_in_free(&in);
}

/* Values that do not convert to their annotated type, unknown Edm types and
 * orphan annotations are InvalidInput. */
static void test_parse_bad_values(void **state)
{
    static const char *bad[] = {
        "{\"X@odata.type\":\"Edm.Int128\",\"X\":\"1\"}",
        "{\"X@odata.type\":\"edm.int64\",\"X\":\"1\"}",
        "{\"X@odata.type\":5,\"X\":\"1\"}",
        "{\"X@odata.type\":\"Edm.Int64\",\"X\":\"12a\"}",
        "{\"X@odata.type\":\"Edm.Int64\",\"X\":\"\"}",
        "{\"X@odata.type\":\"Edm.Int64\",\"X\":\"9223372036854775808\"}",
        "{\"X@odata.type\":\"Edm.Int64\",\"X\":1.5}",
        "{\"X@odata.type\":\"Edm.Int64\",\"X\":true}",
        "{\"X@odata.type\":\"Edm.Int32\",\"X\":2147483648}",
        "{\"X@odata.type\":\"Edm.Int32\",\"X\":\"-2147483649\"}",
        "{\"X@odata.type\":\"Edm.Guid\",\"X\":"
        "\"c9da6455213d42c99a793e9149a57833\"}",
        "{\"X@odata.type\":\"Edm.Guid\",\"X\":\"c9da6455-213d-42c9-9a79-"
        "3e9149a5783g\"}",
        "{\"X@odata.type\":\"Edm.Binary\",\"X\":\"AQID\\nBA==\"}",
        "{\"X@odata.type\":\"Edm.Binary\",\"X\":\"AQI\"}",
        "{\"X@odata.type\":\"Edm.Binary\",\"X\":\"A===\"}",
        "{\"X@odata.type\":\"Edm.Binary\",\"X\":\"AQ==AQ==\"}",
        "{\"X@odata.type\":\"Edm.Binary\",\"X\":12}",
        "{\"X@odata.type\":\"Edm.DateTime\",\"X\":\"\"}",
        "{\"X@odata.type\":\"Edm.DateTime\",\"X\":\"yesterday\"}",
        "{\"X@odata.type\":\"Edm.Double\",\"X\":\"nan\"}",
        "{\"X@odata.type\":\"Edm.Double\",\"X\":\"0x10\"}",
        "{\"X@odata.type\":\"Edm.Double\",\"X\":\" 1\"}",
        "{\"X@odata.type\":\"Edm.Double\",\"X\":\"1e999\"}",
        "{\"X@odata.type\":\"Edm.Boolean\",\"X\":\"yes\"}",
        "{\"X@odata.type\":\"Edm.String\",\"X\":5}",
        "{\"X@odata.type\":\"Edm.String\"}",
        "{\"X\":[1]}",
        "{\"X\":{\"a\":1}}",
        "{\"X\":1e400}",
    };
    (void)state;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        int rc = parse_rc(bad[i]);
        if (rc != RT_EINVAL) {
            fail_msg("%s -> %d", bad[i], rc);
        }
        assert_true(errmsg[0] != '\0');
    }
}

/* DateTime values outside 1601..9999 are OutOfRangeInput. */
static void test_parse_datetime_range(void **state)
{
    (void)state;
    assert_int_equal(parse_rc("{\"X@odata.type\":\"Edm.DateTime\","
                              "\"X\":\"1600-12-31T23:59:59Z\"}"),
                     RT_EOUTOFRANGE);
    assert_int_equal(parse_rc("{\"X@odata.type\":\"Edm.DateTime\","
                              "\"X\":\"0001-01-01T00:00:00Z\"}"),
                     RT_EOUTOFRANGE);
    assert_int_equal(parse_rc("{\"X@odata.type\":\"Edm.DateTime\","
                              "\"X\":\"1601-01-01T00:00:00Z\"}"),
                     0);
}

/* Keys must be JSON strings; an Edm.String annotation on them is fine,
 * any other annotation is not. */
static void test_parse_keys(void **state)
{
    struct fe_entity_in in;
    (void)state;
    assert_int_equal(parse_rc("{\"PartitionKey\":1,\"RowKey\":\"r\"}"),
                     RT_EINVAL);
    assert_int_equal(parse_rc("{\"PartitionKey\":\"p\",\"RowKey\":true}"),
                     RT_EINVAL);
    assert_int_equal(parse_rc("{\"PartitionKey\":null}"), RT_EINVAL);
    assert_int_equal(parse_rc("{\"PartitionKey\":\"p\\u0000q\"}"), RT_EINVAL);
    assert_int_equal(parse_rc("{\"PartitionKey@odata.type\":\"Edm.Int32\","
                              "\"PartitionKey\":\"1\"}"),
                     RT_EINVAL);
    assert_int_equal(parse("{\"PartitionKey@odata.type\":\"Edm.String\","
                           "\"PartitionKey\":\"\",\"RowKey\":\"\\u00e9\"}",
                           &in),
                     0);
    assert_string_equal(in.pk, "");
    assert_string_equal(in.rk, "\xc3\xa9");
    assert_int_equal(rt_get_u16le(in.props.data), 0);
    fe_entity_in_free(&in);
}

/* Timestamp, odata.* members and their annotations are ignored; null values
 * are not stored; properties keep their input order. */
static void test_parse_ignored(void **state)
{
    struct fe_entity_in in;
    struct rt_props_iter it;
    struct rt_prop p;
    (void)state;
    assert_int_equal(
        parse("{\"odata.metadata\":\"x\",\"odata.etag\":\"W/\\\"x\\\"\","
              "\"Timestamp@odata.type\":\"Edm.DateTime\","
              "\"Timestamp\":\"2020-01-01T00:00:00Z\",\"Z\":1,\"Gone\":null,"
              "\"Gone@odata.type\":\"Edm.Int64\",\"A\":2,\"M\":3}",
              &in),
        0);
    rt_props_iter_init(&it, in.props.data, in.props.len);
    const char *order[] = {"Z", "A", "M"};
    for (int i = 0; i < 3; i++) {
        assert_int_equal(rt_props_next(&it, &p), 1);
        assert_memory_equal(p.name, order[i], 1);
    }
    assert_int_equal(rt_props_next(&it, &p), 0);
    fe_entity_in_free(&in);
}

/* One fe_entity_in can be reused: a second parse releases the first
 * result (ASan's leak check would notice otherwise). */
static void test_parse_reuse(void **state)
{
    struct fe_entity_in in;
    (void)state;
    assert_int_equal(parse(ALL_TYPES, &in), 0);
    assert_int_equal(
        fe_odata_parse_entity("{\"PartitionKey\":\"z\"}", 20, &in, errmsg), 0);
    assert_string_equal(in.pk, "z");
    assert_null(in.rk);
    assert_int_equal(fe_odata_parse_entity("{\"A\":[]}", 8, &in, errmsg),
                     RT_EINVAL);
    assert_null(in.pk);
    fe_entity_in_free(&in);
}

/* Bodies that are not a JSON object, and duplicate members, are rejected
 * with the right codes. */
static void test_parse_not_object_and_dups(void **state)
{
    (void)state;
    assert_int_equal(parse_rc(""), RT_EINVAL);
    assert_int_equal(parse_rc("{"), RT_EINVAL);
    assert_int_equal(parse_rc("[1,2]"), RT_EINVAL);
    assert_int_equal(parse_rc("{\"a\":1} x"), RT_EINVAL);
    assert_int_equal(parse_rc("{\"a\":\"\xff\"}"), RT_EINVAL);
    assert_int_equal(parse_rc("{\"A\":1,\"A\":2}"), RT_EDUPPROPS);
    assert_int_equal(
        parse_rc("{\"PartitionKey\":\"a\",\"PartitionKey\":\"b\"}"),
        RT_EDUPPROPS);
    assert_int_equal(parse_rc("{}"), 0);
}

/* §9 property names: identifier-like, <= 255, not reserved. */
static void test_parse_names(void **state)
{
    char buf[600];
    char name[300];
    (void)state;
    static const char *bad[] = {"1abc", "a-b", "a b", "", "a.b", "a@b", "$x"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        snprintf(buf, sizeof(buf), "{\"%s\":1}", bad[i]);
        if (parse_rc(buf) != RT_EPROPNAME) {
            fail_msg("name %s accepted", bad[i]);
        }
    }
    /* jansson refuses NUL in member names outright. */
    assert_int_equal(parse_rc("{\"a\\u0000\":1}"), RT_EINVAL);
    assert_int_equal(parse_rc("{\"_x9\":1,\"\\u00e9t\\u00e9\":2,\"A1_\":3}"),
                     0);
    memset(name, 'n', 255);
    name[255] = '\0';
    snprintf(buf, sizeof(buf), "{\"%s\":1}", name);
    assert_int_equal(parse_rc(buf), 0);
    name[255] = 'n';
    name[256] = '\0';
    snprintf(buf, sizeof(buf), "{\"%s\":1}", name);
    assert_int_equal(parse_rc(buf), RT_EPROPNAMELONG);
}

/* At most 252 user properties; nulls and keys do not count. */
static void test_parse_too_many(void **state)
{
    struct rt_buf b = RT_BUF_INIT;
    (void)state;
    rt_buf_append_str(&b, "{\"PartitionKey\":\"p\",\"RowKey\":\"r\"");
    for (int i = 0; i < 252; i++) {
        rt_buf_printf(&b, ",\"P%d\":%d", i, i);
    }
    rt_buf_append_str(&b, ",\"Nul\":null}");
    assert_int_equal(parse_rc(rt_buf_cstr(&b)), 0);
    b.len -= 1;
    rt_buf_append_str(&b, ",\"One\":1}");
    assert_int_equal(parse_rc(rt_buf_cstr(&b)), RT_ETOOMANYPROPS);
    rt_buf_free(&b);
}

/* Strings are limited to 32767 UTF-16 units; a 4-byte UTF-8 character
 * counts as two. */
static void test_parse_string_limit(void **state)
{
    struct rt_buf b = RT_BUF_INIT;
    (void)state;
    rt_buf_append_str(&b, "{\"S\":\"");
    for (int i = 0; i < 32767; i++) {
        rt_buf_append_u8(&b, 'a');
    }
    rt_buf_append_str(&b, "\"}");
    assert_int_equal(parse_rc(rt_buf_cstr(&b)), 0);
    rt_buf_reset(&b);
    rt_buf_append_str(&b, "{\"S\":\"");
    for (int i = 0; i < 32768; i++) {
        rt_buf_append_u8(&b, 'a');
    }
    rt_buf_append_str(&b, "\"}");
    assert_int_equal(parse_rc(rt_buf_cstr(&b)), RT_EPROPTOOLARGE);
    /* 16383 emoji (2 units each) + 1 ASCII = 32767 units: fits. */
    rt_buf_reset(&b);
    rt_buf_append_str(&b, "{\"S\":\"a");
    for (int i = 0; i < 16383; i++) {
        rt_buf_append(&b, "\xf0\x9f\x98\x80", 4);
    }
    rt_buf_append_str(&b, "\"}");
    assert_int_equal(parse_rc(rt_buf_cstr(&b)), 0);
    /* 16384 emoji = 32768 units: too large although only 16384 chars. */
    rt_buf_reset(&b);
    rt_buf_append_str(&b, "{\"S\":\"");
    for (int i = 0; i < 16384; i++) {
        rt_buf_append(&b, "\xf0\x9f\x98\x80", 4);
    }
    rt_buf_append_str(&b, "\"}");
    assert_int_equal(parse_rc(rt_buf_cstr(&b)), RT_EPROPTOOLARGE);
    /* 3-byte characters count once: 32767 of them fit. */
    rt_buf_reset(&b);
    rt_buf_append_str(&b, "{\"S@odata.type\":\"Edm.String\",\"S\":\"");
    for (int i = 0; i < 32767; i++) {
        rt_buf_append(&b, "\xe2\x82\xac", 3);
    }
    rt_buf_append_str(&b, "\"}");
    assert_int_equal(parse_rc(rt_buf_cstr(&b)), 0);
    rt_buf_free(&b);
}

/* Binary values are limited to 64 KiB decoded. */
static void test_parse_binary_limit(void **state)
{
    struct rt_buf b = RT_BUF_INIT;
    (void)state;
    /* 65536 bytes = 21845 full groups + 1 byte ("AA==") */
    rt_buf_append_str(&b, "{\"B@odata.type\":\"Edm.Binary\",\"B\":\"");
    for (int i = 0; i < 21845; i++) {
        rt_buf_append(&b, "AAAA", 4);
    }
    rt_buf_append_str(&b, "AA==\"}");
    assert_int_equal(parse_rc(rt_buf_cstr(&b)), 0);
    b.len -= 6;
    rt_buf_append_str(&b, "AAA=\"}"); /* 65537 bytes */
    assert_int_equal(parse_rc(rt_buf_cstr(&b)), RT_EPROPTOOLARGE);
    rt_buf_free(&b);
}

/* The §9 size formula caps an entity at 1 MiB. */
static void test_parse_entity_too_large(void **state)
{
    struct rt_buf b = RT_BUF_INIT;
    (void)state;
    /* 16 x (8 + 2*2 + 2*32000 + 4) = 1024256 + 4: fits. */
    rt_buf_append_str(&b, "{");
    for (int i = 0; i < 16; i++) {
        rt_buf_printf(&b, "%s\"S%c\":\"", i ? "," : "", 'a' + i);
        for (int k = 0; k < 32000; k++) {
            rt_buf_append_u8(&b, 'x');
        }
        rt_buf_append_u8(&b, '"');
    }
    rt_buf_append_str(&b, "}");
    assert_int_equal(parse_rc(rt_buf_cstr(&b)), 0);
    /* One more such string pushes it over 1 MiB. */
    b.len -= 1;
    rt_buf_append_str(&b, ",\"Sz\":\"");
    for (int k = 0; k < 32000; k++) {
        rt_buf_append_u8(&b, 'x');
    }
    rt_buf_append_str(&b, "\"}");
    assert_int_equal(parse_rc(rt_buf_cstr(&b)), RT_EENTITYTOOLARGE);
    rt_buf_free(&b);
}

/* Key validation as the front end applies it (rt_entity_key_check):
 * forbidden characters, control ranges, invalid UTF-8 and
 * the 1024 UTF-16 unit limit. */
static void test_check_key(void **state)
{
    char big[2100];
    (void)state;
    assert_int_equal(rt_entity_key_check("", 0, NULL), 0);
    assert_int_equal(rt_entity_key_check("abc \xc3\xa9!'", 8, NULL), 0);
    assert_int_equal(rt_entity_key_check("a/b", 3, NULL), RT_EINVAL);
    assert_int_equal(rt_entity_key_check("a\\b", 3, NULL), RT_EINVAL);
    assert_int_equal(rt_entity_key_check("a#b", 3, NULL), RT_EINVAL);
    assert_int_equal(rt_entity_key_check("a?b", 3, NULL), RT_EINVAL);
    assert_int_equal(rt_entity_key_check("a\tb", 3, NULL), RT_EINVAL);
    assert_int_equal(rt_entity_key_check("a\x7f", 2, NULL), RT_EINVAL);
    assert_int_equal(rt_entity_key_check("\xc2\x85", 2, NULL), RT_EINVAL);
    assert_int_equal(rt_entity_key_check("\xc2\xa0", 2, NULL), 0);
    assert_int_equal(rt_entity_key_check("\xff", 1, NULL), RT_EINVAL);
    assert_int_equal(rt_entity_key_check("\xc3", 1, NULL), RT_EINVAL);
    assert_int_equal(rt_entity_key_check("\xed\xa0\x80", 3, NULL), RT_EINVAL);
    assert_int_equal(rt_entity_key_check("\xc0\xaf", 2, NULL), RT_EINVAL);
    memset(big, 'k', 1025);
    assert_int_equal(rt_entity_key_check(big, 1024, NULL), 0);
    assert_int_equal(rt_entity_key_check(big, 1025, NULL), RT_EOUTOFRANGE);
    for (int i = 0; i < 512; i++) {
        memcpy(big + 4 * i, "\xf0\x9f\x98\x80", 4);
    }
    assert_int_equal(rt_entity_key_check(big, 2048, NULL), 0);
    big[2048] = 'x';
    assert_int_equal(rt_entity_key_check(big, 2049, NULL), RT_EOUTOFRANGE);
}

/* Tests: writing */

/* Minimal metadata, single entity: the spec §4.1 example byte for byte. */
static void test_write_minimal_element(void **state)
{
    (void)state;
    expect_write(
        ALL_TYPES, FE_META_MINIMAL, 1,
        "{\"odata.metadata\":\"" ROOT
        "/$metadata#people/@Element\","
        "\"odata.etag\":\"" ETAG_JSON
        "\","
        "\"PartitionKey\":\"p1\",\"RowKey\":\"r1\",\"Timestamp\":\"" TS
        "\","
        "\"Name\":\"Ann\",\"Age\":23,\"Score\":1.5,\"Active\":true,"
        "\"Big@odata.type\":\"Edm.Int64\",\"Big\":\"9007199254740993\","
        "\"When@odata.type\":\"Edm.DateTime\",\"When\":\"2008-07-10T00:00:"
        "00Z\","
        "\"Id@odata.type\":\"Edm.Guid\","
        "\"Id\":\"c9da6455-213d-42c9-9a79-3e9149a57833\","
        "\"Blob@odata.type\":\"Edm.Binary\",\"Blob\":\"AQIDBA==\","
        "\"N@odata.type\":\"Edm.Double\",\"N\":\"NaN\"}");
}

/* Minimal metadata inside a query page: no odata.metadata, etag kept. */
static void test_write_minimal_in_query(void **state)
{
    (void)state;
    expect_write("{\"PartitionKey\":\"p\",\"RowKey\":\"r\",\"X\":1}",
                 FE_META_MINIMAL, 0,
                 "{\"odata.etag\":\"" ETAG_JSON
                 "\",\"PartitionKey\":\"p\","
                 "\"RowKey\":\"r\",\"Timestamp\":\"" TS "\",\"X\":1}");
}

/* Full metadata adds type, id, editLink and the Timestamp annotation. */
static void test_write_full(void **state)
{
    (void)state;
    expect_write(
        "{\"PartitionKey\":\"p'1 /\",\"RowKey\":\"r\",\"X\":1,"
        "\"L@odata.type\":\"Edm.Int64\",\"L\":\"5\"}",
        FE_META_FULL, 1,
        "{\"odata.metadata\":\"" ROOT
        "/$metadata#people/@Element\","
        "\"odata.type\":\"devstoreaccount1.people\","
        "\"odata.id\":\"" ROOT
        "/people(PartitionKey='p%27%271%20%2F',RowKey='r')\","
        "\"odata.etag\":\"" ETAG_JSON
        "\","
        "\"odata.editLink\":\"people(PartitionKey='p%27%271%20%2F',"
        "RowKey='r')\","
        "\"PartitionKey\":\"p'1 /\",\"RowKey\":\"r\","
        "\"Timestamp@odata.type\":\"Edm.DateTime\",\"Timestamp\":\"" TS
        "\","
        "\"X\":1,\"L@odata.type\":\"Edm.Int64\",\"L\":\"5\"}");
}

/* No metadata: no annotations at all, values keep their string forms. */
static void test_write_nometadata(void **state)
{
    (void)state;
    expect_write(
        ALL_TYPES, FE_META_NONE, 1,
        "{\"PartitionKey\":\"p1\",\"RowKey\":\"r1\",\"Timestamp\":\"" TS
        "\","
        "\"Name\":\"Ann\",\"Age\":23,\"Score\":1.5,\"Active\":true,"
        "\"Big\":\"9007199254740993\",\"When\":\"2008-07-10T00:00:00Z\","
        "\"Id\":\"c9da6455-213d-42c9-9a79-3e9149a57833\","
        "\"Blob\":\"AQIDBA==\",\"N\":\"NaN\"}");
}

/* $select keeps only the listed names (system ones included only when
 * listed); odata.etag stays in minimal metadata; "*" selects all. */
static void test_write_select(void **state)
{
    static const char *const sel[] = {"Age", "RowKey", "Missing", "Big"};
    static const char *const star[] = {"*"};
    char *got;
    (void)state;
    got = write_json(ALL_TYPES, FE_META_MINIMAL, 0, sel, 4);
    assert_string_equal(got, "{\"odata.etag\":\"" ETAG_JSON
                             "\",\"RowKey\":"
                             "\"r1\",\"Age\":23,\"Big@odata.type\":"
                             "\"Edm.Int64\",\"Big\":\"9007199254740993\"}");
    free(got);
    got = write_json(ALL_TYPES, FE_META_NONE, 0, sel, 1);
    assert_string_equal(got, "{\"Age\":23}");
    free(got);
    got = write_json(ALL_TYPES, FE_META_NONE, 0, sel, 0);
    assert_string_equal(got, "{}");
    free(got);
    static const char *const ts[] = {"Timestamp"};
    got = write_json(ALL_TYPES, FE_META_FULL, 0, ts, 1);
    assert_non_null(strstr(got, "\"odata.etag\""));
    assert_non_null(strstr(
        got, ",\"Timestamp@odata.type\":\"Edm.DateTime\",\"Timestamp\""));
    assert_null(strstr(got, "PartitionKey\":"));
    free(got);
    char *all = write_json(ALL_TYPES, FE_META_MINIMAL, 0, NULL, 0);
    got = write_json(ALL_TYPES, FE_META_MINIMAL, 0, star, 1);
    assert_string_equal(got, all);
    free(got);
    free(all);
}

/* Finite doubles always carry '.' or an exponent and round-trip; NaN and
 * infinities are strings. */
static void test_write_doubles(void **state)
{
    (void)state;
    expect_double(1.0, "1.0");
    expect_double(1.5, "1.5");
    expect_double(0.1, "0.1");
    expect_double(1e300, "1e+300");
    expect_double(-0.0, "-0.0");
    expect_double(6824053932181.0, "6824053932181.0");
    expect_double(1.0 / 3.0, "0.3333333333333333");
    expect_double(0.1 + 0.2, "0.30000000000000004");
    expect_double(2147483648.0, "2147483648.0");
    expect_double(5e-324, "4.94065645841247e-324");
    expect_double(NAN, "\"NaN\"");
    expect_double(INFINITY, "\"Infinity\"");
    expect_double(-INFINITY, "\"-Infinity\"");
}

/* DateTime values print in RoundtripKind form; strings are JSON-escaped. */
static void test_write_datetime_and_escapes(void **state)
{
    (void)state;
    expect_write(
        "{\"PartitionKey\":\"a\\\"b\",\"RowKey\":\"\\u0001\\n\",\"S\":"
        "\"q\\\\\\u00e9\\ud83d\\ude00\",\"T@odata.type\":\"Edm.DateTime\","
        "\"T\":\"2021-04-07T23:56:22.6754067Z\",\"U@odata.type\":"
        "\"Edm.DateTime\",\"U\":\"2021-04-07T23:56:22.5000000Z\"}",
        FE_META_NONE, 0,
        "{\"PartitionKey\":\"a\\\"b\",\"RowKey\":\"\\u0001\\u000A\","
        "\"Timestamp\":\"" TS
        "\",\"S\":\"q\\\\\xc3\xa9\xf0\x9f\x98\x80\","
        "\"T\":\"2021-04-07T23:56:22.6754067Z\","
        "\"U\":\"2021-04-07T23:56:22.5Z\"}");
}

/* A corrupt stored value is reported and nothing is appended. */
static void test_write_corrupt(void **state)
{
    struct rt_buf value = RT_BUF_INIT, out = RT_BUF_INIT;
    struct fe_odata_ctx ctx = {ROOT, "a", "t", FE_META_FULL, NULL, 0};
    struct fe_entity_in in;
    (void)state;
    assert_int_equal(parse(ALL_TYPES, &in), 0);
    rt_value_encode(&value, 1, 0, in.props.data, in.props.len);
    rt_buf_append(&out, "[", 1);
    for (size_t n = 0; n < value.len; n++) {
        uint8_t *copy = malloc(n ? n : 1);
        memcpy(copy, value.data, n);
        assert_int_equal(
            fe_odata_write_entity(&out, &ctx, "p", 1, "r", 1, copy, n, 0),
            RT_ECORRUPT);
        assert_int_equal(out.len, 1);
        free(copy);
    }
    fe_entity_in_free(&in);
    rt_buf_free(&value);
    rt_buf_free(&out);
}

/* Parse -> write (nometadata) -> parse gives the same properties blob. */
static void test_parse_write_roundtrip(void **state)
{
    struct fe_entity_in a, b;
    struct rt_buf value = RT_BUF_INIT, out = RT_BUF_INIT;
    struct fe_odata_ctx ctx = {ROOT, "a", "t", FE_META_MINIMAL, NULL, 0};
    (void)state;
    assert_int_equal(parse(ALL_TYPES, &a), 0);
    fe_entity_in_init(&b);
    rt_value_encode(&value, ticks_of(TS), 0, a.props.data, a.props.len);
    assert_int_equal(
        fe_odata_write_entity(&out, &ctx, a.pk, strlen(a.pk), a.rk,
                              strlen(a.rk), value.data, value.len, 1),
        0);
    assert_int_equal(
        fe_odata_parse_entity((const char *)out.data, out.len, &b, errmsg), 0);
    assert_string_equal(a.pk, b.pk);
    assert_string_equal(a.rk, b.rk);
    assert_int_equal(a.props.len, b.props.len);
    assert_memory_equal(a.props.data, b.props.data, a.props.len);
    fe_entity_in_free(&a);
    fe_entity_in_free(&b);
    rt_buf_free(&value);
    rt_buf_free(&out);
}

/* Mutated and truncated bodies never crash the parser, and whatever it
 * accepts writes back out without error. */
static void test_parse_fuzz(void **state)
{
    const char *base = ALL_TYPES;
    size_t n = strlen(base);
    uint32_t seed = 42;
    struct fe_odata_ctx ctx = {ROOT, "a", "t", FE_META_FULL, NULL, 0};
    (void)state;
    for (int round = 0; round < 5000; round++) {
        char *body = malloc(n);
        struct fe_entity_in in;
        size_t len = n;
        memcpy(body, base, n);
        for (int k = 0; k < 1 + round % 4; k++) {
            seed = seed * 1103515245u + 12345u;
            size_t at = (seed >> 8) % n;
            static const char alphabet[] =
                "\"{}:,0123456789.eE-+\\@ aZ\x80\xff";
            body[at] = alphabet[(seed >> 20) % (sizeof(alphabet) - 1)];
        }
        if (round % 3 == 0) {
            seed = seed * 1103515245u + 12345u;
            len = (seed >> 8) % n;
        }
        fe_entity_in_init(&in);
        if (fe_odata_parse_entity(body, len, &in, errmsg) == 0) {
            struct rt_buf value = RT_BUF_INIT, out = RT_BUF_INIT;
            rt_value_encode(&value, 1, 0, in.props.data, in.props.len);
            assert_int_equal(
                fe_odata_write_entity(&out, &ctx, in.pk ? in.pk : "", 0,
                                      in.rk ? in.rk : "", 0, value.data,
                                      value.len, 1),
                0);
            rt_buf_free(&value);
            rt_buf_free(&out);
        }
        fe_entity_in_free(&in);
        free(body);
    }
}

/* Tests: ETag and escaping */

/* The ETag is the spec's exact text and parses back, ':' raw or %3A. */
static void test_etag(void **state)
{
    char e[64];
    uint64_t t = ticks_of("2017-10-16T23:00:05.5000867Z"), back = 0;
    int any = 1;
    (void)state;
    fe_odata_etag(t, e);
    assert_string_equal(e, "W/\"datetime'2017-10-16T23%3A00%3A05.5000867Z'\"");
    assert_int_equal(fe_odata_parse_etag(e, &back, &any), 0);
    assert_true(back == t);
    assert_int_equal(any, 0);
    back = 0;
    assert_int_equal(
        fe_odata_parse_etag("W/\"datetime'2017-10-16T23:00:05.5000867Z'\"",
                            &back, &any),
        0);
    assert_true(back == t);
    assert_int_equal(
        fe_odata_parse_etag("W/\"datetime'2017-10-16T23%3a00%3a05.5000867Z'\"",
                            &back, &any),
        0);
    assert_true(back == t);
    assert_int_equal(fe_odata_parse_etag("*", &back, &any), 0);
    assert_int_equal(any, 1);
    /* A zero fraction still has 7 digits. */
    fe_odata_etag(ticks_of("2017-10-16T23:00:05Z"), e);
    assert_string_equal(e, "W/\"datetime'2017-10-16T23%3A00%3A05.0000000Z'\"");
}

/* Anything we could not have issued is InvalidInput. */
static void test_etag_invalid(void **state)
{
    static const char *bad[] = {
        "",
        "\"datetime'2017-10-16T23%3A00%3A05.5000867Z'\"",
        "W/\"0x5B168C7B6E589D2\"",
        "W/\"datetime'2017-10-16T23%3A00%3A05.5Z'\"",
        "W/\"datetime'2017-10-16T23%3A00%3A05.5000867Z'",
        "W/\"datetime'garbage'\"",
        "W/\"datetime''\"",
        "W/\"datetime'2017-10-16T23%3A00%3A05.5000867Z%3A'\"",
        "**",
    };
    uint64_t t;
    int any;
    (void)state;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        if (fe_odata_parse_etag(bad[i], &t, &any) != RT_EINVAL) {
            fail_msg("etag accepted: %s", bad[i]);
        }
    }
}

/* JSON escaping yields valid JSON for control characters, quotes and even
 * invalid UTF-8 (replaced by U+FFFD). */
static void test_json_escape(void **state)
{
    struct rt_buf b = RT_BUF_INIT;
    (void)state;
    fe_json_escape(&b, "a\"b\\c\x1f\x7f\xc3\xa9\xff\xe2\x82", 12);
    assert_string_equal(rt_buf_cstr(&b),
                        "a\\\"b\\\\c\\u001F\x7f\xc3\xa9\\ufffd\\ufffd\\ufffd");
    rt_buf_reset(&b);
    fe_json_escape(&b, "\0", 1);
    assert_string_equal(rt_buf_cstr(&b), "\\u0000");
    rt_buf_free(&b);
}

/* Every byte value at every position of a 24-byte string (so inside and
 * outside each 8-byte block the escaper skips whole): escaped exactly as
 * one byte on its own is, the rest copied as is. */
static void test_json_escape_every_byte(void **state)
{
    struct rt_buf b = RT_BUF_INIT;
    char in[24], want[64];
    (void)state;
    for (int pos = 0; pos < 24; pos++) {
        for (int c = 0; c < 256; c++) {
            char one[8];
            if (c == '"' || c == '\\') {
                snprintf(one, sizeof(one), "\\%c", c);
            } else if (c < 0x20) {
                snprintf(one, sizeof(one), "\\u%04X", c);
            } else if (c >= 0x80) {
                snprintf(one, sizeof(one), "\\ufffd"); /* lone byte */
            } else {
                snprintf(one, sizeof(one), "%c", c);
            }
            memset(in, 'x', sizeof(in));
            in[pos] = (char)c;
            snprintf(want, sizeof(want), "%.*s%s%.*s", pos, in, one,
                     (int)sizeof(in) - pos - 1, in + pos + 1);
            rt_buf_reset(&b);
            fe_json_escape(&b, in, sizeof(in));
            assert_string_equal(rt_buf_cstr(&b), want);
        }
    }
    rt_buf_free(&b);
}

/* URL escaping keeps RFC 3986 unreserved characters only. */
static void test_url_escape(void **state)
{
    struct rt_buf b = RT_BUF_INIT;
    (void)state;
    fe_url_escape(&b, "aZ09-._~ /'%\xc3\xa9", 14);
    assert_string_equal(rt_buf_cstr(&b), "aZ09-._~%20%2F%27%25%C3%A9");
    rt_buf_free(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_inferred_types),
        cmocka_unit_test(test_parse_annotated_types),
        cmocka_unit_test(test_parse_base64),
        cmocka_unit_test(test_parse_bad_values),
        cmocka_unit_test(test_parse_datetime_range),
        cmocka_unit_test(test_parse_keys),
        cmocka_unit_test(test_parse_ignored),
        cmocka_unit_test(test_parse_reuse),
        cmocka_unit_test(test_parse_not_object_and_dups),
        cmocka_unit_test(test_parse_names),
        cmocka_unit_test(test_parse_too_many),
        cmocka_unit_test(test_parse_string_limit),
        cmocka_unit_test(test_parse_binary_limit),
        cmocka_unit_test(test_parse_entity_too_large),
        cmocka_unit_test(test_check_key),
        cmocka_unit_test(test_write_minimal_element),
        cmocka_unit_test(test_write_minimal_in_query),
        cmocka_unit_test(test_write_full),
        cmocka_unit_test(test_write_nometadata),
        cmocka_unit_test(test_write_select),
        cmocka_unit_test(test_write_doubles),
        cmocka_unit_test(test_write_datetime_and_escapes),
        cmocka_unit_test(test_json_escape_every_byte),
        cmocka_unit_test(test_write_corrupt),
        cmocka_unit_test(test_parse_write_roundtrip),
        cmocka_unit_test(test_parse_fuzz),
        cmocka_unit_test(test_etag),
        cmocka_unit_test(test_etag_invalid),
        cmocka_unit_test(test_json_escape),
        cmocka_unit_test(test_url_escape),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
