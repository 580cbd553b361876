/* URL parsing (docs/table-api-spec.md §1.1, §1.2, §1.3, §9): host-style
 * vs path-style addressing, account and secondary, Tables forms, key
 * predicates, table names and the decoded query string. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "fe_url.h"
#include "rt_err.h"
#include "rt_utf8.h"

/* ---- Helpers -------------------------------------------------------- */

static int parse(const char *raw, struct fe_path *p)
{
    fe_path_free(p);
    return fe_path_parse(raw, strlen(raw), p);
}

static void expect_entity(const char *raw,
                          const char *table,
                          const char *pk,
                          const char *rk)
{
    struct fe_path p;
    fe_path_init(&p);
    assert_int_equal(parse(raw, &p), 0);
    assert_int_equal(p.kind, FE_RES_ENTITY);
    assert_string_equal(p.table, table);
    assert_string_equal(p.pk, pk);
    assert_string_equal(p.rk, rk);
    assert_int_equal(p.pklen, strlen(pk));
    assert_int_equal(p.rklen, strlen(rk));
    fe_path_free(&p);
}

static void expect_error(const char *raw, int code)
{
    struct fe_path p;
    fe_path_init(&p);
    assert_int_equal(parse(raw, &p), code);
    fe_path_free(&p);
}

/* ---- Tests ---------------------------------------------------------- */

/* The first segment is the account; "-secondary" is stripped and noted. */
static void test_account(void **state)
{
    struct fe_path p;
    (void)state;
    fe_path_init(&p);
    assert_int_equal(parse("/devstoreaccount1/Tables", &p), 0);
    assert_string_equal(p.account, "devstoreaccount1");
    assert_false(p.secondary);
    assert_int_equal(parse("/devstoreaccount1-secondary/Tables", &p), 0);
    assert_string_equal(p.account, "devstoreaccount1");
    assert_string_equal(p.acct_seg, "devstoreaccount1-secondary");
    assert_true(p.secondary);
    assert_int_equal(parse("/devstoreaccount1", &p), 0);
    assert_int_equal(p.kind, FE_RES_SERVICE);
    assert_int_equal(parse("/devstoreaccount1/", &p), 0);
    assert_int_equal(p.kind, FE_RES_SERVICE);
    assert_int_equal(parse("/", &p), RT_EURI);
    assert_false(p.account_ok);
    assert_int_equal(parse("", &p), RT_EURI);
    assert_int_equal(parse("/bad%20acct/Tables", &p), RT_EURI);
    assert_false(p.account_ok);
    /* A resource error after a good account still lets auth run. */
    assert_int_equal(parse("/acct/a/b", &p), RT_EURI);
    assert_true(p.account_ok);
    fe_path_free(&p);
}

/* Tables, Tables(), Tables('x') (also percent-encoded), any case. */
static void test_tables(void **state)
{
    struct fe_path p;
    (void)state;
    fe_path_init(&p);
    assert_int_equal(parse("/a1/Tables", &p), 0);
    assert_int_equal(p.kind, FE_RES_TABLES);
    assert_int_equal(parse("/a1/Tables()", &p), 0);
    assert_int_equal(p.kind, FE_RES_TABLES);
    assert_int_equal(parse("/a1/tables", &p), 0);
    assert_int_equal(p.kind, FE_RES_TABLES);
    assert_int_equal(parse("/a1/Tables('mytable')", &p), 0);
    assert_int_equal(p.kind, FE_RES_TABLE_ONE);
    assert_string_equal(p.table, "mytable");
    assert_int_equal(parse("/a1/Tables(%27MyTable%27)", &p), 0);
    assert_int_equal(p.kind, FE_RES_TABLE_ONE);
    assert_string_equal(p.table, "MyTable");
    assert_int_equal(parse("/a1/Tables%28%27t12%27%29", &p), 0);
    assert_int_equal(p.kind, FE_RES_TABLE_ONE);
    assert_string_equal(p.table, "t12");
    assert_int_equal(parse("/a1/Tables('ab')", &p), RT_EOUTOFRANGE);
    assert_int_equal(parse("/a1/Tables('a-b')", &p), RT_EBADNAME);
    assert_int_equal(parse("/a1/Tables('abc'", &p), RT_EURI);
    assert_int_equal(parse("/a1/Tables(abc)", &p), RT_EURI);
    assert_int_equal(parse("/a1/$batch", &p), 0);
    assert_int_equal(p.kind, FE_RES_BATCH);
    assert_int_equal(parse("/a1/$metadata", &p), RT_EURI);
    /* One trailing slash names the same resource; two do not. */
    assert_int_equal(parse("/a1/Tables/", &p), 0);
    assert_int_equal(p.kind, FE_RES_TABLES);
    assert_int_equal(parse("/a1/Tables('mytable')/", &p), 0);
    assert_int_equal(p.kind, FE_RES_TABLE_ONE);
    assert_string_equal(p.table, "mytable");
    assert_int_equal(parse("/a1/mytable/", &p), 0);
    assert_int_equal(p.kind, FE_RES_TABLE);
    assert_int_equal(parse("/a1/Tables//", &p), RT_EURI);
    assert_int_equal(parse("/a1//", &p), RT_EURI);
    fe_path_free(&p);
}

/* name and name() address the entity collection. */
static void test_table_collection(void **state)
{
    struct fe_path p;
    (void)state;
    fe_path_init(&p);
    assert_int_equal(parse("/a1/people", &p), 0);
    assert_int_equal(p.kind, FE_RES_TABLE);
    assert_string_equal(p.table, "people");
    assert_false(p.parens);
    assert_int_equal(parse("/a1/people()", &p), 0);
    assert_int_equal(p.kind, FE_RES_TABLE);
    assert_true(p.parens);
    assert_int_equal(parse("/a1/people( )", &p), 0);
    assert_int_equal(p.kind, FE_RES_TABLE);
    fe_path_free(&p);
}

/* Key predicates: literal quotes, %27 (Python), doubled quotes,
 * whitespace after the comma, either key order. */
static void test_keys(void **state)
{
    (void)state;
    expect_entity("/a1/people(PartitionKey='p1',RowKey='r1')", "people", "p1",
                  "r1");
    expect_entity("/a1/people(PartitionKey=%27p1%27,RowKey=%27r1%27)", "people",
                  "p1", "r1");
    expect_entity("/a1/people(PartitionKey='a', RowKey='b')", "people", "a",
                  "b");
    expect_entity("/a1/people(RowKey='r',PartitionKey='p')", "people", "p",
                  "r");
    expect_entity("/a1/people(PartitionKey='o''k',RowKey='''')", "people",
                  "o'k", "'");
    expect_entity("/a1/people(PartitionKey=%27o%27%27k%27,RowKey=%27a%20b%27)",
                  "people", "o'k", "a b");
    expect_entity("/a1/people(PartitionKey='',RowKey='')", "people", "", "");
    /* Parentheses, commas and '=' inside literals are data. */
    expect_entity("/a1/people(PartitionKey='a,b)',RowKey='x=(y)')", "people",
                  "a,b)", "x=(y)");
    /* UTF-8 keys decode byte for byte. */
    expect_entity("/a1/people(PartitionKey='%C3%A9',RowKey='%E2%82%AC')",
                  "people", "\xc3\xa9", "\xe2\x82\xac");
    /* '+' in a path is not a space. */
    expect_entity("/a1/people(PartitionKey='a+b',RowKey='c')", "people", "a+b",
                  "c");
}

/* Wrong key counts and malformed predicates are 400 InvalidInput. */
static void test_bad_keys(void **state)
{
    struct fe_path p;
    (void)state;
    fe_path_init(&p);
    assert_int_equal(parse("/a1/people(PartitionKey='p')", &p), RT_EINVAL);
    assert_string_equal(p.errmsg, FE_MSG_KEY_COUNT);
    assert_int_equal(parse("/a1/people(PartitionKey='p',RowKey='r',X='y')", &p),
                     RT_EINVAL);
    assert_string_equal(p.errmsg, FE_MSG_KEY_COUNT);
    assert_int_equal(parse("/a1/people('p')", &p), RT_EINVAL);
    assert_string_equal(p.errmsg, FE_MSG_KEY_COUNT);
    expect_error("/a1/people(PartitionKey='p',PartitionKey='r')", RT_EINVAL);
    expect_error("/a1/people(PartitionKey='p',Rowkey='r')", RT_EINVAL);
    expect_error("/a1/people(PartitionKey='p,RowKey='r')", RT_EINVAL);
    expect_error("/a1/people(PartitionKey=p,RowKey='r')", RT_EINVAL);
    expect_error("/a1/people(PartitionKey='p';RowKey='r')", RT_EINVAL);
    expect_error("/a1/people(PartitionKey='p',RowKey='r')x", RT_EURI);
    fe_path_free(&p);
}

/* Table names: 3..63 chars, letter first, alphanumeric; "tables" reserved. */
static void test_table_names(void **state)
{
    const char *msg = NULL;
    char long_name[65];
    (void)state;
    assert_int_equal(fe_table_name_check("abc", 3, &msg), 0);
    assert_int_equal(fe_table_name_check("A1b2C3", 6, &msg), 0);
    assert_int_equal(fe_table_name_check("ab", 2, &msg), RT_EOUTOFRANGE);
    assert_string_equal(msg, FE_MSG_NAME_LENGTH);
    memset(long_name, 'a', 64);
    long_name[64] = '\0';
    assert_int_equal(fe_table_name_check(long_name, 63, &msg), 0);
    assert_int_equal(fe_table_name_check(long_name, 64, &msg), RT_EOUTOFRANGE);
    assert_int_equal(fe_table_name_check("1abc", 4, &msg), RT_EBADNAME);
    assert_string_equal(msg, FE_MSG_NAME_CHARS);
    assert_int_equal(fe_table_name_check("ab-c", 4, &msg), RT_EBADNAME);
    assert_int_equal(fe_table_name_check("ab_c", 4, &msg), RT_EBADNAME);
    assert_int_equal(fe_table_name_check("abc\xc3\xa9", 5, &msg), RT_EBADNAME);
    assert_int_equal(fe_table_name_check("Tables", 6, &msg), RT_EBADNAME);
    assert_int_equal(fe_table_name_check("TABLES", 6, &msg), RT_EBADNAME);
    assert_int_equal(fe_table_name_check("Tables1", 7, &msg), 0);
    expect_error("/a1/bad-name()", RT_EBADNAME);
    expect_error("/a1/ab", RT_EOUTOFRANGE);
}

/* Percent-decoding: %XX, stray '%', '+' only in query strings. */
static void test_decode(void **state)
{
    struct rt_buf b = RT_BUF_INIT;
    (void)state;
    fe_url_decode(&b, "a%20b+c%2B%zz%4", 15, 1);
    assert_string_equal(rt_buf_cstr(&b), "a b c+%zz%4");
    rt_buf_reset(&b);
    fe_url_decode(&b, "a+b%2f", 6, 0);
    assert_string_equal(rt_buf_cstr(&b), "a+b/");
    rt_buf_free(&b);
}

/* Query strings decode keys and values; the first occurrence wins. */
static void test_query(void **state)
{
    struct fe_query q;
    (void)state;
    fe_query_init(&q);
    fe_query_parse(&q,
                   "%24filter=PartitionKey%20eq%20%27a%27&$top=5&"
                   "NextRowKey=1!4!cjE&flag&$top=9&x=a+b",
                   strlen("%24filter=PartitionKey%20eq%20%27a%27&$top=5&"
                          "NextRowKey=1!4!cjE&flag&$top=9&x=a+b"));
    assert_string_equal(fe_query_get(&q, "$filter"), "PartitionKey eq 'a'");
    assert_string_equal(fe_query_get(&q, "$top"), "5");
    assert_string_equal(fe_query_get(&q, "NextRowKey"), "1!4!cjE");
    assert_string_equal(fe_query_get(&q, "flag"), "");
    assert_string_equal(fe_query_get(&q, "x"), "a b");
    assert_null(fe_query_get(&q, "missing"));
    fe_query_free(&q);
}

/* A decoded NUL is kept with its length, never cuts a value, and makes the
 * query fail fe_query_check; a key holding a NUL matches no name. */
static void test_query_nul(void **state)
{
    struct fe_query q;
    const char *v;
    size_t n = 0;
    int why = 0;
    const char *qs = "$top=1%00x&$filter%00junk=a&$select=a";
    (void)state;
    fe_query_init(&q);
    fe_query_parse(&q, qs, strlen(qs));
    v = fe_query_get_n(&q, "$top", &n);
    assert_non_null(v);
    assert_int_equal(n, 3);
    assert_memory_equal(v, "1\0x", 3);
    assert_null(fe_query_get(&q, "$filter")); /* "$filter\0junk" */
    assert_string_equal(fe_query_get(&q, "$select"), "a");
    assert_int_equal(fe_query_check(&q, &why), 1);
    assert_int_equal(why, FE_QUERY_NUL);
    fe_query_free(&q);

    fe_query_init(&q);
    qs = "a=1&$filter%00=x";
    fe_query_parse(&q, qs, strlen(qs));
    assert_int_equal(fe_query_check(&q, &why), 2); /* NUL in a key */
    assert_int_equal(why, FE_QUERY_NUL);
    fe_query_free(&q);

    fe_query_init(&q);
    qs = "a=%C3%A9%E2%82%AC%F0%9F%98%80&b=ok";
    fe_query_parse(&q, qs, strlen(qs));
    assert_int_equal(fe_query_check(&q, &why), 0);
    fe_query_free(&q);
}

/* Query values must be UTF-8: stray continuation bytes, truncated
 * sequences, overlongs, surrogates and code points past U+10FFFF fail. */
static void test_query_utf8(void **state)
{
    static const char *const bad[] = {
        "%FF",       "%80",       "a%C3",         "%C0%AF",
        "%E0%80%AF", "%ED%A0%80", "%F4%90%80%80", "%F8%88%80%80%80",
        "x%E2%82",   "%C3%28",
    };
    (void)state;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct fe_query q;
        char qs[64];
        int why = 0;
        snprintf(qs, sizeof(qs), "ok=1&v=%s", bad[i]);
        fe_query_init(&q);
        fe_query_parse(&q, qs, strlen(qs));
        assert_int_equal(fe_query_check(&q, &why), 2);
        assert_int_equal(why, FE_QUERY_UTF8);
        fe_query_free(&q);
    }
    assert_true(rt_utf8_valid("\xf4\x8f\xbf\xbf", 4)); /* U+10FFFF */
    assert_true(rt_utf8_valid("\xed\x9f\xbf", 3));     /* U+D7FF */
    assert_false(rt_utf8_valid("\xed\xbf\xbf", 3));    /* surrogate */
    assert_true(rt_utf8_valid("", 0));
}

/* The Python SDK's path-style secondary URL loses its repeated account
 * segment; anything else is left alone. */
static void test_secondary_fix(void **state)
{
    static const struct
    {
        const char *in, *out;
    } cases[] = {
        {"/acct-secondary/acct/Tables", "/acct-secondary/Tables"},
        {"/acct-secondary/acct/t(PartitionKey='a',RowKey='b')",
         "/acct-secondary/t(PartitionKey='a',RowKey='b')"},
        {"/acct-secondary/acct/", "/acct-secondary/"},
        {"/acct-secondary/acct", "/acct-secondary/acct"},       /* no '/' */
        {"/acct-secondary/acctx/T", "/acct-secondary/acctx/T"}, /* other */
        {"/acct-secondary/Tables", "/acct-secondary/Tables"},
        {"/acct/acct/Tables", "/acct/acct/Tables"}, /* not secondary */
        {"/-secondary/x", "/-secondary/x"},
        {"/", "/"},
        {"", ""},
    };
    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char buf[128];
        size_t n = strlen(cases[i].in);
        memcpy(buf, cases[i].in, n + 1);
        n = fe_url_secondary_fix(buf, n);
        assert_int_equal(n, strlen(cases[i].out));
        assert_string_equal(buf, cases[i].out);
    }
}

/* Host header -> addressing style (spec §1.1, Azurite's rule): IP
 * literals, localhost, host.docker.internal and dotless names are
 * path-style; any other DNS name gives its first label. */
static void test_host_style(void **state)
{
    const char *label = NULL;
    size_t n = 0;
    (void)state;
    assert_false(fe_url_host_style(NULL, &label, &n));
    assert_false(fe_url_host_style("", &label, &n));
    assert_false(fe_url_host_style("127.0.0.1:10002", &label, &n));
    assert_false(fe_url_host_style("10.1.2.3", &label, &n));
    assert_false(fe_url_host_style("[::1]:10002", &label, &n));
    assert_false(fe_url_host_style("localhost:10002", &label, &n));
    assert_false(fe_url_host_style("LOCALHOST", &label, &n));
    assert_false(fe_url_host_style("host.docker.internal:10002", &label, &n));
    assert_false(fe_url_host_style("azurite:10002", &label, &n));
    assert_false(fe_url_host_style(".example.com", &label, &n));
    assert_true(fe_url_host_style("acct.table.core.windows.net", &label, &n));
    assert_int_equal(n, 4);
    assert_memory_equal(label, "acct", 4);
    assert_true(fe_url_host_style("acct-secondary.table.core.windows.net:443",
                                  &label, &n));
    assert_int_equal(n, 14);
    assert_memory_equal(label, "acct-secondary", 14);
    assert_true(fe_url_host_style("myacct.rt.example.com:10002", &label, &n));
    assert_int_equal(n, 6);
}

/* Host-style paths hold no account segment: the whole path is the
 * resource, and "-secondary" on the host label marks the secondary. */
static void test_host_paths(void **state)
{
    struct fe_path p;
    (void)state;
    fe_path_init(&p);
    assert_int_equal(fe_path_parse_host("acct", 4, "/Tables", 7, &p), 0);
    assert_true(p.host_style);
    assert_true(p.account_ok);
    assert_string_equal(p.account, "acct");
    assert_int_equal(p.kind, FE_RES_TABLES);
    fe_path_free(&p);
    assert_int_equal(fe_path_parse_host("acct", 4, "/", 1, &p), 0);
    assert_int_equal(p.kind, FE_RES_SERVICE);
    fe_path_free(&p);
    assert_int_equal(fe_path_parse_host("acct", 4, "", 0, &p), 0);
    assert_int_equal(p.kind, FE_RES_SERVICE);
    fe_path_free(&p);
    assert_int_equal(
        fe_path_parse_host("acct-secondary", 14,
                           "/people(PartitionKey='a',RowKey=%27b%27)", 40, &p),
        0);
    assert_true(p.secondary);
    assert_string_equal(p.account, "acct");
    assert_string_equal(p.acct_seg, "acct-secondary");
    assert_int_equal(p.kind, FE_RES_ENTITY);
    assert_string_equal(p.pk, "a");
    assert_string_equal(p.rk, "b");
    fe_path_free(&p);
    assert_int_equal(fe_path_parse_host("acct", 4, "/$batch", 7, &p), 0);
    assert_int_equal(p.kind, FE_RES_BATCH);
    fe_path_free(&p);
    /* A path-style URL sent to a host-style name is a two-segment path. */
    assert_int_equal(
        fe_path_parse_host("acct", 4, "/devstoreaccount1/Tables", 24, &p),
        RT_EURI);
    assert_true(p.account_ok);
    fe_path_free(&p);
    assert_int_equal(fe_path_parse_host("bad_label", 9, "/Tables", 7, &p),
                     RT_EURI);
    assert_false(p.account_ok);
    fe_path_free(&p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_account),
        cmocka_unit_test(test_tables),
        cmocka_unit_test(test_table_collection),
        cmocka_unit_test(test_keys),
        cmocka_unit_test(test_bad_keys),
        cmocka_unit_test(test_table_names),
        cmocka_unit_test(test_decode),
        cmocka_unit_test(test_query),
        cmocka_unit_test(test_query_nul),
        cmocka_unit_test(test_query_utf8),
        cmocka_unit_test(test_secondary_fix),
        cmocka_unit_test(test_host_style),
        cmocka_unit_test(test_host_paths),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
