/* Shared Key: string-to-sign, signatures and the full request check
 * (docs/table-api-spec.md §7.1, §7.2). Expected signatures were computed
 * independently once with
 *   printf '<string-to-sign>' | openssl dgst -sha256 -mac HMAC \
 *       -macopt hexkey:<hex of the dev key> -binary | base64
 * and are hard-coded here with their inputs. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "fe_auth.h"
#include "rt_err.h"
#include "rt_time.h"

/* ---- Fixture -------------------------------------------------------- */

#define DATE1 "Mon, 14 Oct 2013 18:25:49 GMT"
#define DATE2 "Sun, 11 Oct 2009 19:52:39 GMT"
/* A different, valid key (base64 of 64 bytes 0x01..0x40). */
#define OTHER_KEY                                                          \
    "AQIDBAUGBwgJCgsMDQ4PEBESExQVFhcYGRobHB0eHyAhIiMkJSYnKCkqKywtLi8wMTIz" \
    "NDU2Nzg5Ojs8PT4/QA=="

static int setup(void **state)
{
    struct fe_accounts *a = malloc(sizeof(*a));
    fe_accounts_init(a);
    assert_int_equal(fe_accounts_add(a, FE_DEV_ACCOUNT, FE_DEV_KEY, NULL), 0);
    *state = a;
    return 0;
}

static int teardown(void **state)
{
    fe_accounts_free(*state);
    free(*state);
    return 0;
}

/* ---- Helpers -------------------------------------------------------- */

static const char *sts(struct rt_buf *b,
                       enum fe_auth_scheme s,
                       const char *verb,
                       const char *ct,
                       const char *date,
                       const char *path,
                       const char *comp)
{
    struct rt_buf res = RT_BUF_INIT;
    rt_buf_reset(b);
    fe_auth_canon_resource(&res, FE_DEV_ACCOUNT, path, strlen(path), comp);
    fe_auth_string_to_sign(b, s, verb, NULL, ct, date, rt_buf_cstr(&res));
    rt_buf_free(&res);
    return rt_buf_cstr(b);
}

static void expect_sig(const struct fe_accounts *a,
                       const char *msg,
                       const char *want)
{
    char got[FE_AUTH_SIG_SIZE];
    const struct fe_account *acct = fe_accounts_find(a, FE_DEV_ACCOUNT);
    assert_non_null(acct);
    fe_auth_sign(acct->key[0], acct->keylen[0], msg, strlen(msg), got);
    assert_string_equal(got, want);
    assert_int_equal(fe_auth_check(acct, msg, strlen(msg), want, strlen(want)),
                     0);
}

static int64_t unix_of(const char *date)
{
    int64_t t = 0;
    assert_int_equal(rt_time_parse_http_date(date, &t), 0);
    return t;
}

static void fill_req(struct fe_auth_req *r,
                     const char *verb,
                     const char *authz,
                     const char *ct,
                     const char *path,
                     const char *account,
                     const char *seg,
                     const char *comp)
{
    memset(r, 0, sizeof(*r));
    r->verb = verb;
    r->authorization = authz;
    r->content_type = ct;
    r->x_ms_date = DATE1;
    r->raw_path = path;
    r->raw_path_len = strlen(path);
    r->comp = comp;
    r->account = account;
    r->acct_seg = seg;
    r->now = unix_of(DATE1);
}

/* ---- Tests ---------------------------------------------------------- */

/* SharedKey for Table: VERB, Content-MD5, Content-Type, Date, resource;
 * path-style URLs carry the account twice. */
static void test_sharedkey_get(void **state)
{
    struct rt_buf b = RT_BUF_INIT;
    const char *s = sts(&b, FE_AUTH_SHAREDKEY, "GET", NULL, DATE1,
                        "/devstoreaccount1/Tables", NULL);
    assert_string_equal(
        s, "GET\n\n\n" DATE1 "\n/devstoreaccount1/devstoreaccount1/Tables");
    expect_sig(*state, s, "aXFIWneaQHd3oMlYqjw7rVCtAFE+bviqX39E2YJ5RGc=");
    rt_buf_free(&b);
}

/* The Content-Type header value is signed verbatim. */
static void test_sharedkey_post(void **state)
{
    struct rt_buf b = RT_BUF_INIT;
    const char *s =
        sts(&b, FE_AUTH_SHAREDKEY, "POST", "application/json;odata=nometadata",
            DATE1, "/devstoreaccount1/people", NULL);
    assert_string_equal(s, "POST\n\napplication/json;odata=nometadata\n" DATE1
                           "\n/devstoreaccount1/devstoreaccount1/people");
    expect_sig(*state, s, "OO8ecpkTMVQAtUAn27TxeCXYrFzyNmn9r8DS3PDUbGw=");
    rt_buf_free(&b);
}

/* SharedKeyLite signs only the date and the resource. */
static void test_sharedkeylite(void **state)
{
    struct rt_buf b = RT_BUF_INIT;
    const char *s = sts(&b, FE_AUTH_SHAREDKEYLITE, "GET", "ignored", DATE2,
                        "/devstoreaccount1/Tables", NULL);
    assert_string_equal(s, DATE2 "\n/devstoreaccount1/devstoreaccount1/Tables");
    expect_sig(*state, s, "ErXwXhFUdsOaklxX2/UTRDcWl4T591pmLcUzbBU+SRI=");
    rt_buf_free(&b);
}

/* Only the comp parameter joins the canonicalized resource. */
static void test_comp(void **state)
{
    struct rt_buf b = RT_BUF_INIT;
    const char *s = sts(&b, FE_AUTH_SHAREDKEY, "GET", NULL, DATE1,
                        "/devstoreaccount1/mytable", "acl");
    assert_string_equal(s, "GET\n\n\n" DATE1
                           "\n/devstoreaccount1/devstoreaccount1/mytable"
                           "?comp=acl");
    expect_sig(*state, s, "5507Qt8emuG0YkWoFg2OtQH/JmgiyyrkLsHBiawyW58=");
    rt_buf_free(&b);
}

/* A wrong key, a tampered signature or a wrong length never verifies. */
static void test_wrong_key(void **state)
{
    struct fe_accounts other;
    const struct fe_account *acct;
    const char *msg =
        "GET\n\n\n" DATE1 "\n/devstoreaccount1/devstoreaccount1/Tables";
    const char *good = "aXFIWneaQHd3oMlYqjw7rVCtAFE+bviqX39E2YJ5RGc=";
    fe_accounts_init(&other);
    assert_int_equal(fe_accounts_add(&other, FE_DEV_ACCOUNT, OTHER_KEY, NULL),
                     0);
    acct = fe_accounts_find(&other, FE_DEV_ACCOUNT);
    assert_int_equal(fe_auth_check(acct, msg, strlen(msg), good, strlen(good)),
                     RT_EAUTH);
    acct = fe_accounts_find(*state, FE_DEV_ACCOUNT);
    assert_int_equal(
        fe_auth_check(acct, msg, strlen(msg),
                      "bXFIWneaQHd3oMlYqjw7rVCtAFE+bviqX39E2YJ5RGc=", 44),
        RT_EAUTH);
    assert_int_equal(fe_auth_check(acct, msg, strlen(msg), good, 43), RT_EAUTH);
    fe_accounts_free(&other);
}

/* key2 verifies too (key rotation). */
static void test_key2(void **state)
{
    struct fe_accounts a;
    const char *msg =
        "GET\n\n\n" DATE1 "\n/devstoreaccount1/devstoreaccount1/Tables";
    const char *good = "aXFIWneaQHd3oMlYqjw7rVCtAFE+bviqX39E2YJ5RGc=";
    (void)state;
    fe_accounts_init(&a);
    assert_int_equal(fe_accounts_add(&a, FE_DEV_ACCOUNT, OTHER_KEY, FE_DEV_KEY),
                     0);
    assert_int_equal(fe_auth_check(fe_accounts_find(&a, FE_DEV_ACCOUNT), msg,
                                   strlen(msg), good, strlen(good)),
                     0);
    fe_accounts_free(&a);
}

/* Authorization header forms: schemes, malformed values, Bearer. */
static void test_parse_header(void **state)
{
    struct fe_auth_hdr h;
    (void)state;
    assert_int_equal(fe_auth_parse_header("SharedKey acct:c2ln", &h), 0);
    assert_int_equal(h.scheme, FE_AUTH_SHAREDKEY);
    assert_int_equal(h.account_len, 4);
    assert_memory_equal(h.account, "acct", 4);
    assert_int_equal(h.sig_len, 4);
    assert_int_equal(fe_auth_parse_header("SharedKeyLite a:b=", &h), 0);
    assert_int_equal(h.scheme, FE_AUTH_SHAREDKEYLITE);
    assert_int_equal(fe_auth_parse_header("SharedKey acct", &h), RT_EAUTHINFO);
    assert_int_equal(fe_auth_parse_header("SharedKey :sig", &h), RT_EAUTHINFO);
    assert_int_equal(fe_auth_parse_header("SharedKey acct:", &h), RT_EAUTHINFO);
    assert_int_equal(fe_auth_parse_header("Basic dXNlcjpwdw==", &h),
                     RT_EAUTHINFO);
    assert_int_equal(fe_auth_parse_header("SharedKeyacct:sig", &h),
                     RT_EAUTHINFO);
    assert_int_equal(fe_auth_parse_header("Bearer eyJ0", &h), RT_EAUTH);
}

/* The whole check: good request, missing header, unknown account, wrong
 * account in the header, skewed clock, raw (percent-encoded) path. */
static void test_verify(void **state)
{
    struct fe_auth_req r;
    char why[RT_ERRMSG_SIZE];
    const struct fe_accounts *a = *state;

    fill_req(&r, "GET",
             "SharedKey devstoreaccount1:"
             "aXFIWneaQHd3oMlYqjw7rVCtAFE+bviqX39E2YJ5RGc=",
             NULL, "/devstoreaccount1/Tables", "devstoreaccount1",
             "devstoreaccount1", NULL);
    assert_int_equal(fe_auth_verify(a, &r, why), 0);

    /* Date header used when there is no x-ms-date. */
    r.x_ms_date = NULL;
    r.date = DATE1;
    assert_int_equal(fe_auth_verify(a, &r, why), 0);
    r.date = NULL;
    assert_int_equal(fe_auth_verify(a, &r, why), RT_EAUTH);
    r.x_ms_date = DATE1;

    r.now += FE_AUTH_MAX_SKEW_SECS + 1;
    assert_int_equal(fe_auth_verify(a, &r, why), RT_EAUTH);
    r.now -= 2 * (FE_AUTH_MAX_SKEW_SECS + 1);
    assert_int_equal(fe_auth_verify(a, &r, why), RT_EAUTH);
    r.now += FE_AUTH_MAX_SKEW_SECS + 1;

    r.authorization = NULL;
    assert_int_equal(fe_auth_verify(a, &r, why), RT_ENOAUTH);
    r.authorization = "SharedKey devstoreaccount1";
    assert_int_equal(fe_auth_verify(a, &r, why), RT_EAUTHINFO);
    r.authorization =
        "SharedKey other:"
        "aXFIWneaQHd3oMlYqjw7rVCtAFE+bviqX39E2YJ5RGc=";
    assert_int_equal(fe_auth_verify(a, &r, why), RT_EAUTH);
    r.account = "nosuchaccount";
    r.authorization =
        "SharedKey nosuchaccount:"
        "aXFIWneaQHd3oMlYqjw7rVCtAFE+bviqX39E2YJ5RGc=";
    assert_int_equal(fe_auth_verify(a, &r, why), RT_EAUTH);

    /* The raw path, %27 and all, is what was signed. */
    fill_req(&r, "GET",
             "SharedKey devstoreaccount1:"
             "qe4dUagF0mXdqyXoW+PjrGRYtQ9BEWpoCy15nD37zNs=",
             NULL,
             "/devstoreaccount1/people(PartitionKey=%27p%27,RowKey=%27r%27)",
             "devstoreaccount1", "devstoreaccount1", NULL);
    assert_int_equal(fe_auth_verify(a, &r, why), 0);
    r.raw_path = "/devstoreaccount1/people(PartitionKey='p',RowKey='r')";
    r.raw_path_len = strlen(r.raw_path);
    assert_int_equal(fe_auth_verify(a, &r, why), RT_EAUTH);
}

/* Secondary: signing with or without "-secondary" in the path verifies. */
static void test_secondary(void **state)
{
    struct fe_auth_req r;
    char why[RT_ERRMSG_SIZE];
    const struct fe_accounts *a = *state;

    fill_req(&r, "GET",
             "SharedKeyLite devstoreaccount1:"
             "l8Rgtxn3zbjt3FYlpsXPTrRQfLfBe3VKwm/Qi6mPq1M=",
             NULL, "/devstoreaccount1-secondary/Tables", "devstoreaccount1",
             "devstoreaccount1-secondary", NULL);
    assert_int_equal(fe_auth_verify(a, &r, why), 0);
    r.authorization =
        "SharedKeyLite devstoreaccount1:"
        "vpFjK7fRjHfv1FiamukN3yq7R/ioRgEgWlGgVlA/9Nw=";
    assert_int_equal(fe_auth_verify(a, &r, why), 0);
}

/* Host-style (spec §1.1, §7.1): the raw path has no account segment, so
 * the signed resource is "/" + account + path, and there is no alternative
 * "-secondary" spelling to try (fe_api passes acct_seg NULL). Expected
 * signatures computed with openssl dgst -sha256 -mac HMAC. */
static void test_host_style(void **state)
{
    struct fe_auth_req r;
    char why[RT_ERRMSG_SIZE];
    const struct fe_accounts *a = *state;

    fill_req(&r, "GET",
             "SharedKey devstoreaccount1:"
             "Wb/vdWTXrSg5Kep/nJpq8TOLLCMzBbA6KqAOCkm1cCY=",
             NULL, "/Tables", "devstoreaccount1", NULL, NULL);
    assert_int_equal(fe_auth_verify(a, &r, why), 0);
    /* The path-style signature of the same request does not verify. */
    r.authorization =
        "SharedKey devstoreaccount1:"
        "aXFIWneaQHd3oMlYqjw7rVCtAFE+bviqX39E2YJ5RGc=";
    assert_int_equal(fe_auth_verify(a, &r, why), RT_EAUTH);
}

/* Accounts file: comments, blank lines, two keys; bad lines rejected. */
static void test_accounts_file(void **state)
{
    char path[] = "/tmp/test_fe_auth_XXXXXX";
    char errmsg[RT_ERRMSG_SIZE] = "";
    struct fe_accounts a;
    const struct fe_account *acct;
    int fd = mkstemp(path);
    FILE *f;
    (void)state;
    assert_true(fd >= 0);
    f = fdopen(fd, "w");
    fprintf(f, "# accounts\n\nacct1 %s\n  acct2 %s %s  # two keys\n",
            FE_DEV_KEY, OTHER_KEY, FE_DEV_KEY);
    fclose(f);
    fe_accounts_init(&a);
    assert_int_equal(fe_accounts_load(&a, path, errmsg), 0);
    assert_int_equal(a.n, 2);
    acct = fe_accounts_find(&a, "acct2");
    assert_non_null(acct);
    assert_int_equal(acct->nkeys, 2);
    assert_int_equal(acct->keylen[0], 64);
    assert_null(fe_accounts_find(&a, "acct3"));
    fe_accounts_free(&a);

    f = fopen(path, "w");
    fprintf(f, "acct1 not*base64\n");
    fclose(f);
    fe_accounts_init(&a);
    assert_int_equal(fe_accounts_load(&a, path, errmsg), RT_ECONFIG);
    fe_accounts_free(&a);
    unlink(path);
}

/* The file holds keys: group/other access is refused (the message says
 * the mode, never a key); a bad line is named by its number only. */
static void test_accounts_file_private(void **state)
{
    char path[] = "/tmp/test_fe_auth_XXXXXX";
    char errmsg[RT_ERRMSG_SIZE] = "";
    struct fe_accounts a;
    int fd = mkstemp(path);
    FILE *f;
    (void)state;
    assert_true(fd >= 0);
    f = fdopen(fd, "w");
    fprintf(f, "acct1 %s\nacct2 %s x y\n", FE_DEV_KEY, OTHER_KEY);
    fclose(f);
    fe_accounts_init(&a);
    assert_int_equal(fe_accounts_load(&a, path, errmsg), RT_ECONFIG);
    assert_non_null(strstr(errmsg, ":2: expected"));
    assert_null(strstr(errmsg, OTHER_KEY));
    assert_null(strstr(errmsg, FE_DEV_KEY));
    fe_accounts_free(&a);

    f = fopen(path, "w");
    fprintf(f, "acct1 %s\n", FE_DEV_KEY);
    fclose(f);
    assert_int_equal(chmod(path, 0644), 0);
    fe_accounts_init(&a);
    assert_int_equal(fe_accounts_load(&a, path, errmsg), RT_ECONFIG);
    assert_non_null(strstr(errmsg, "mode 0644"));
    assert_non_null(strstr(errmsg, "chmod 600"));
    assert_int_equal(a.n, 0);
    fe_accounts_free(&a);
    assert_int_equal(chmod(path, 0620), 0); /* group may write: refused */
    assert_int_equal(fe_accounts_load(&a, path, errmsg), RT_ECONFIG);
    assert_int_equal(chmod(path, 0600), 0);
    assert_int_equal(fe_accounts_load(&a, path, errmsg), 0);
    assert_int_equal(a.n, 1);
    fe_accounts_free(&a);
    unlink(path);
}

/* A reader keeps the table it acquired across a publish; new readers get
 * the new one; the last release frees (ASan checks the rest). */
static void test_accounts_publish(void **state)
{
    struct fe_accounts_pub pub;
    struct fe_accounts a;
    const struct fe_accounts *h1, *h2;
    (void)state;
    fe_accounts_pub_init(&pub);
    assert_null(fe_accounts_acquire(&pub));
    fe_accounts_init(&a);
    assert_int_equal(fe_accounts_add(&a, "acct1", FE_DEV_KEY, NULL), 0);
    fe_accounts_publish(&pub, &a);
    assert_int_equal(a.n, 0); /* moved out */
    h1 = fe_accounts_acquire(&pub);
    assert_non_null(fe_accounts_find(h1, "acct1"));

    assert_int_equal(fe_accounts_add(&a, "acct2", OTHER_KEY, NULL), 0);
    fe_accounts_publish(&pub, &a);
    h2 = fe_accounts_acquire(&pub);
    assert_non_null(fe_accounts_find(h1, "acct1")); /* still the old one */
    assert_null(fe_accounts_find(h1, "acct2"));
    assert_non_null(fe_accounts_find(h2, "acct2"));
    assert_null(fe_accounts_find(h2, "acct1"));
    fe_accounts_release(h1);
    fe_accounts_pub_fini(&pub); /* h2 outlives the publisher */
    assert_non_null(fe_accounts_find(h2, "acct2"));
    fe_accounts_release(h2);
    fe_accounts_release(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_sharedkey_get, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sharedkey_post, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sharedkeylite, setup, teardown),
        cmocka_unit_test_setup_teardown(test_comp, setup, teardown),
        cmocka_unit_test_setup_teardown(test_wrong_key, setup, teardown),
        cmocka_unit_test(test_key2),
        cmocka_unit_test(test_parse_header),
        cmocka_unit_test_setup_teardown(test_verify, setup, teardown),
        cmocka_unit_test_setup_teardown(test_host_style, setup, teardown),
        cmocka_unit_test_setup_teardown(test_secondary, setup, teardown),
        cmocka_unit_test(test_accounts_file),
        cmocka_unit_test(test_accounts_file_private),
        cmocka_unit_test(test_accounts_publish),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
