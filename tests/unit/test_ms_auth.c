/* The master's HTTP access rules (ms_auth.h): the token file checks, the
 * Bearer comparison, the cross-origin refusal of actions and the
 * --status-open / --admin-insecure switches, on token files written to a
 * temporary directory. No HTTP: the decision function alone. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "ms_auth.h"
#include "rt_err.h"

/* ---- Fixture ---- */

#define HEX_TOKEN \
    "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
#define B64_TOKEN "q83vEjRWeJq83vEjRWeJq83vEjRWeJq83vEjRWeJq80"

static char dir[64];
static char path[128];

static int setup(void **state)
{
    (void)state;
    snprintf(dir, sizeof(dir), "/tmp/test_ms_auth.XXXXXX");
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof(path), "%s/token", dir);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    unlink(path);
    rmdir(dir);
    return 0;
}

/* ---- Helpers ---- */

static void write_token(const char *text, mode_t mode)
{
    FILE *f;
    unlink(path);
    f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
    assert_int_equal(chmod(path, mode), 0);
}

static struct ms_auth *make(bool insecure, bool status_open)
{
    struct ms_auth *a = NULL;
    char errmsg[RT_ERRMSG_SIZE] = "";
    assert_int_equal(ms_auth_create(path, insecure, status_open, &a, errmsg),
                     0);
    return a;
}

static enum ms_auth_verdict check(struct ms_auth *a,
                                  enum ms_auth_route route,
                                  const char *authorization,
                                  const char *origin,
                                  const char *fetch_site)
{
    struct ms_auth_req r = {.route = route,
                            .authorization = authorization,
                            .origin = origin,
                            .host = "127.0.0.1:10101",
                            .sec_fetch_site = fetch_site};
    return ms_auth_check(a, &r);
}

/* ---- Tests ---- */

/* A token file group or others may read, an empty one, a short one and
 * one with two words are refused; hex and base64 tokens of 32 bytes with
 * a trailing newline are accepted. */
static void test_token_file_rules(void **state)
{
    unsigned char d[32];
    char errmsg[RT_ERRMSG_SIZE] = "";
    (void)state;

    write_token(HEX_TOKEN "\n", 0644);
    assert_int_equal(ms_auth_read_token(path, d, errmsg), RT_EINVAL);
    assert_non_null(strstr(errmsg, "too open"));
    assert_null(strstr(errmsg, HEX_TOKEN));
    write_token(HEX_TOKEN "\n", 0640);
    assert_int_equal(ms_auth_read_token(path, d, errmsg), RT_EINVAL);
    write_token("\n", 0600);
    assert_int_equal(ms_auth_read_token(path, d, errmsg), RT_EINVAL);
    assert_non_null(strstr(errmsg, "empty"));
    write_token("0123456789abcdef0123456789abcdef0123456789\n", 0600);
    assert_int_equal(ms_auth_read_token(path, d, errmsg), RT_EINVAL);
    assert_non_null(strstr(errmsg, "too short"));
    write_token(HEX_TOKEN " " HEX_TOKEN "\n", 0600);
    assert_int_equal(ms_auth_read_token(path, d, errmsg), RT_EINVAL);
    write_token(HEX_TOKEN "\n", 0600);
    assert_int_equal(ms_auth_read_token(path, d, errmsg), 0);
    write_token(B64_TOKEN "=\n", 0400);
    assert_int_equal(ms_auth_read_token(path, d, errmsg), 0);
    unlink(path);
    assert_int_equal(ms_auth_read_token(path, d, errmsg), RT_EIO);
}

/* Without a header (or with another scheme) an action is 401; with a
 * wrong token 403; with the right one, in any scheme case, it passes. */
static void test_bearer(void **state)
{
    struct ms_auth *a;
    (void)state;
    write_token(HEX_TOKEN "\n", 0600);
    a = make(false, false);
    assert_int_equal(check(a, MS_AUTH_MUTATE, NULL, NULL, NULL),
                     MS_AUTH_MISSING);
    assert_int_equal(check(a, MS_AUTH_MUTATE, "Basic " HEX_TOKEN, NULL, NULL),
                     MS_AUTH_MISSING);
    assert_int_equal(check(a, MS_AUTH_MUTATE, "Bearer ", NULL, NULL),
                     MS_AUTH_MISSING);
    assert_int_equal(check(a, MS_AUTH_MUTATE, "Bearer x", NULL, NULL),
                     MS_AUTH_WRONG);
    assert_int_equal(
        check(a, MS_AUTH_MUTATE, "Bearer " HEX_TOKEN "0", NULL, NULL),
        MS_AUTH_WRONG);
    assert_int_equal(check(a, MS_AUTH_MUTATE, "Bearer " HEX_TOKEN, NULL, NULL),
                     MS_AUTH_OK);
    assert_int_equal(
        check(a, MS_AUTH_MUTATE, "bearer  " HEX_TOKEN " ", NULL, NULL),
        MS_AUTH_OK);
    assert_int_equal(ms_auth_status(MS_AUTH_MISSING), 401);
    assert_int_equal(ms_auth_status(MS_AUTH_WRONG), 403);
    ms_auth_destroy(a);
}

/* An action from another origin is refused even with the right token; the
 * master's own origin and a client that sends no Origin pass. */
static void test_cross_origin(void **state)
{
    const char *tok = "Bearer " HEX_TOKEN;
    struct ms_auth *a;
    (void)state;
    write_token(HEX_TOKEN "\n", 0600);
    a = make(false, true);
    assert_int_equal(check(a, MS_AUTH_MUTATE, tok, "http://evil.example", NULL),
                     MS_AUTH_CROSS_ORIGIN);
    assert_int_equal(
        check(a, MS_AUTH_MUTATE, NULL, "http://evil.example", NULL),
        MS_AUTH_CROSS_ORIGIN);
    assert_int_equal(check(a, MS_AUTH_MUTATE, tok, "null", NULL),
                     MS_AUTH_CROSS_ORIGIN);
    assert_int_equal(
        check(a, MS_AUTH_MUTATE, tok, "http://127.0.0.1:10102", NULL),
        MS_AUTH_CROSS_ORIGIN);
    assert_int_equal(check(a, MS_AUTH_MUTATE, tok, NULL, "cross-site"),
                     MS_AUTH_CROSS_ORIGIN);
    assert_int_equal(
        check(a, MS_AUTH_MUTATE, tok, "http://127.0.0.1:10101", "same-origin"),
        MS_AUTH_OK);
    assert_int_equal(check(a, MS_AUTH_MUTATE, tok, NULL, NULL), MS_AUTH_OK);
    /* Behind a TLS proxy that passes the Host on. */
    assert_int_equal(
        check(a, MS_AUTH_MUTATE, tok, "https://127.0.0.1:10101", NULL),
        MS_AUTH_OK);
    assert_int_equal(
        check(a, MS_AUTH_MUTATE, tok, "ftp://127.0.0.1:10101", NULL),
        MS_AUTH_CROSS_ORIGIN);
    ms_auth_destroy(a);
}

/* Reads need the token by default; --status-open opens them and only
 * them; /health is always open. */
static void test_status_open(void **state)
{
    struct ms_auth *a;
    (void)state;
    write_token(HEX_TOKEN "\n", 0600);
    a = make(false, false);
    assert_int_equal(check(a, MS_AUTH_READ, NULL, NULL, NULL), MS_AUTH_MISSING);
    assert_int_equal(check(a, MS_AUTH_OPEN, NULL, NULL, NULL), MS_AUTH_OK);
    ms_auth_destroy(a);
    a = make(false, true);
    assert_int_equal(check(a, MS_AUTH_READ, NULL, NULL, NULL), MS_AUTH_OK);
    assert_int_equal(check(a, MS_AUTH_MUTATE, NULL, NULL, NULL),
                     MS_AUTH_MISSING);
    ms_auth_destroy(a);
}

/* Without a token file actions are refused, unless --admin-insecure,
 * which still refuses other origins. */
static void test_no_token(void **state)
{
    struct ms_auth *a = NULL;
    char errmsg[RT_ERRMSG_SIZE];
    (void)state;
    assert_int_equal(ms_auth_create(NULL, false, false, &a, errmsg), 0);
    assert_false(ms_auth_has_token(a));
    assert_int_equal(check(a, MS_AUTH_MUTATE, "Bearer " HEX_TOKEN, NULL, NULL),
                     MS_AUTH_DISABLED);
    assert_int_equal(check(a, MS_AUTH_READ, NULL, NULL, NULL),
                     MS_AUTH_DISABLED);
    assert_non_null(
        strstr(ms_auth_message(MS_AUTH_DISABLED), "--admin-token-file"));
    ms_auth_destroy(a);
    assert_int_equal(ms_auth_create("", true, false, &a, errmsg), 0);
    assert_int_equal(check(a, MS_AUTH_MUTATE, NULL, NULL, NULL), MS_AUTH_OK);
    assert_int_equal(check(a, MS_AUTH_READ, NULL, NULL, NULL), MS_AUTH_OK);
    assert_int_equal(
        check(a, MS_AUTH_MUTATE, NULL, "http://evil.example", NULL),
        MS_AUTH_CROSS_ORIGIN);
    ms_auth_destroy(a);
}

/* A reload swaps the token at once; a reload of a bad file keeps the old
 * one. */
static void test_reload(void **state)
{
    char errmsg[RT_ERRMSG_SIZE];
    struct ms_auth *a;
    (void)state;
    write_token(HEX_TOKEN "\n", 0600);
    a = make(false, false);
    write_token(B64_TOKEN "\n", 0600);
    assert_int_equal(ms_auth_reload(a, errmsg), 0);
    assert_int_equal(check(a, MS_AUTH_READ, "Bearer " HEX_TOKEN, NULL, NULL),
                     MS_AUTH_WRONG);
    assert_int_equal(check(a, MS_AUTH_READ, "Bearer " B64_TOKEN, NULL, NULL),
                     MS_AUTH_OK);
    write_token("short\n", 0600);
    assert_int_equal(ms_auth_reload(a, errmsg), RT_EINVAL);
    assert_int_equal(check(a, MS_AUTH_READ, "Bearer " B64_TOKEN, NULL, NULL),
                     MS_AUTH_OK);
    ms_auth_destroy(a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_token_file_rules),
        cmocka_unit_test(test_bearer),
        cmocka_unit_test(test_cross_origin),
        cmocka_unit_test(test_status_open),
        cmocka_unit_test(test_no_token),
        cmocka_unit_test(test_reload),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
