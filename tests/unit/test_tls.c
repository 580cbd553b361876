/* Cluster credentials (rt_tls) and the cluster CA (rt_pki): loading,
 * refusals, names, and handshakes between two in-memory endpoints. */
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

#include <openssl/err.h>
#include <openssl/ssl.h>

#include "rt_err.h"
#include "rt_pki.h"
#include "rt_tls.h"

/* ------------------------------------------------------------------ */
/* Fixture                                                             */
/* ------------------------------------------------------------------ */

static char g_root[256];

static void path(char *out, size_t n, const char *sub)
{
    snprintf(out, n, "%s/%s", g_root, sub);
}

static int setup_all(void **state)
{
    (void)state;
    char err[256];
    struct rt_pki_ca ca, other;
    snprintf(g_root, sizeof(g_root), "/tmp/test_tls.XXXXXX");
    if (mkdtemp(g_root) == NULL)
        return -1;
    char d[300];
    path(d, sizeof(d), "ca");
    if (rt_pki_ca_create("rangetable test CA", 30, &ca, err, sizeof(err)) ||
        rt_pki_ca_write(d, &ca, err, sizeof(err)))
        return -1;
    const char *nodes[][2] = {{"master:m1", "m1"},
                              {"ps:ps1", "ps1"},
                              {"fe:fe1", "fe1"},
                              {"admin:op", "op"}};
    for (size_t i = 0; i < 4; i++) {
        path(d, sizeof(d), nodes[i][1]);
        if (rt_pki_issue(&ca, nodes[i][0], 30, d, err, sizeof(err)) != 0)
            return -1;
    }
    /* A second CA whose node must never be accepted. */
    path(d, sizeof(d), "other");
    if (rt_pki_ca_create("another CA", 30, &other, err, sizeof(err)) ||
        rt_pki_issue(&other, "ps:ps1", 30, d, err, sizeof(err)))
        return -1;
    rt_pki_ca_free(&other);
    rt_pki_ca_free(&ca);
    return 0;
}

static int teardown_all(void **state)
{
    (void)state;
    char cmd[300];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", g_root);
    return system(cmd) == 0 ? 0 : -1;
}

static struct rt_tls *load(const char *sub)
{
    char d[300], err[256];
    struct rt_tls *t = NULL;
    path(d, sizeof(d), sub);
    int rc = rt_tls_load(d, &t, err, sizeof(err));
    if (rc != 0)
        fprintf(stderr, "load %s: %s\n", sub, err);
    assert_int_equal(rc, 0);
    return t;
}

/* Runs a handshake between @c (client) and @s (server) over memory BIO
 * pairs; returns 1 when both sides finished. */
static int handshake(struct rt_tls *c, struct rt_tls *s, SSL **cs, SSL **ss)
{
    SSL *a = SSL_new(rt_tls_client_ctx(c));
    SSL *b = SSL_new(rt_tls_server_ctx(s));
    BIO *ab, *ba;
    assert_int_equal(BIO_new_bio_pair(&ab, 0, &ba, 0), 1);
    SSL_set_bio(a, ab, ab);
    SSL_set_bio(b, ba, ba);
    SSL_set_connect_state(a);
    SSL_set_accept_state(b);
    int da = 0, db = 0, failed = 0;
    for (int i = 0; i < 50 && !(da && db) && !failed; i++) {
        if (!da) {
            int r = SSL_do_handshake(a);
            if (r == 1)
                da = 1;
            else if (SSL_get_error(a, r) != SSL_ERROR_WANT_READ)
                failed = 1;
        }
        if (!db) {
            int r = SSL_do_handshake(b);
            if (r == 1)
                db = 1;
            else if (SSL_get_error(b, r) != SSL_ERROR_WANT_READ)
                failed = 1;
        }
    }
    /* In TLS 1.3 the client finishes before the server has checked its
     * certificate; a refusal shows up on its first read. */
    if (da && db) {
        char x = 'x', y = 0;
        if (SSL_write(a, &x, 1) != 1 || SSL_read(b, &y, 1) != 1 || y != 'x')
            failed = 1;
    }
    ERR_clear_error();
    *cs = a;
    *ss = b;
    return da && db && !failed;
}

/* ------------------------------------------------------------------ */
/* Tests                                                               */
/* ------------------------------------------------------------------ */

/* A node's credentials load and name the node. */
static void test_load_names_self(void **state)
{
    (void)state;
    struct rt_tls *t = load("m1");
    assert_string_equal(rt_tls_self_name(t), "master:m1");
    assert_non_null(rt_tls_server_ctx(t));
    assert_non_null(rt_tls_client_ctx(t));
    rt_tls_free(t);
    t = load("ps1");
    assert_string_equal(rt_tls_self_name(t), "ps:ps1");
    rt_tls_free(t);
}

/* A key readable by group or other is refused with RT_EPERM, like ssh. */
static void test_load_refuses_open_key(void **state)
{
    (void)state;
    char d[300], k[320], err[256];
    struct rt_tls *t = NULL;
    path(d, sizeof(d), "fe1");
    snprintf(k, sizeof(k), "%s/node.key", d);
    assert_int_equal(chmod(k, 0640), 0);
    assert_int_equal(rt_tls_load(d, &t, err, sizeof(err)), RT_EPERM);
    assert_null(t);
    assert_non_null(strstr(err, "node.key"));
    assert_int_equal(chmod(k, 0600), 0);
    assert_int_equal(rt_tls_load(d, &t, err, sizeof(err)), 0);
    rt_tls_free(t);
}

/* A missing directory, or a node certificate from another CA than the
 * ca.crt beside it, is a configuration error at load. */
static void test_load_refuses_bad_files(void **state)
{
    (void)state;
    char d[300], cmd[2048], err[256];
    struct rt_tls *t = NULL;
    path(d, sizeof(d), "nope");
    assert_int_equal(rt_tls_load(d, &t, err, sizeof(err)), RT_ECONFIG);
    path(d, sizeof(d), "mixed");
    snprintf(cmd, sizeof(cmd),
             "mkdir -m 700 %s && cp -p %s/other/node.crt %s/other/node.key "
             "%s/ && cp %s/ca/ca.crt %s/",
             d, g_root, g_root, d, g_root, d);
    assert_int_equal(system(cmd), 0);
    assert_int_equal(rt_tls_load(d, &t, err, sizeof(err)), RT_ECONFIG);
    assert_non_null(strstr(err, "does not verify"));
    assert_null(t);
}

/* Two nodes of the cluster complete a handshake and each sees the other's
 * name. */
static void test_handshake_names_peers(void **state)
{
    (void)state;
    struct rt_tls *c = load("ps1"), *s = load("m1");
    SSL *a, *b;
    char n[RT_TLS_NAME_MAX];
    assert_true(handshake(c, s, &a, &b));
    assert_int_equal(rt_tls_peer_name(b, n, sizeof(n)), 0);
    assert_string_equal(n, "ps:ps1");
    assert_int_equal(rt_tls_peer_name(a, n, sizeof(n)), 0);
    assert_string_equal(n, "master:m1");
    assert_string_equal(SSL_get_version(a), "TLSv1.3");
    SSL_free(a);
    SSL_free(b);
    rt_tls_free(c);
    rt_tls_free(s);
}

/* A node of another CA fails the handshake, as client or as server. */
static void test_handshake_refuses_other_ca(void **state)
{
    (void)state;
    struct rt_tls *o = load("other"), *s = load("m1");
    SSL *a, *b;
    char n[RT_TLS_NAME_MAX];
    assert_false(handshake(o, s, &a, &b));
    assert_int_equal(rt_tls_peer_name(b, n, sizeof(n)), RT_EPERM);
    assert_string_equal(n, "");
    SSL_free(a);
    SSL_free(b);
    assert_false(handshake(s, o, &a, &b));
    assert_int_equal(rt_tls_peer_name(a, n, sizeof(n)), RT_EPERM);
    SSL_free(a);
    SSL_free(b);
    rt_tls_free(o);
    rt_tls_free(s);
}

/* A client with no certificate at all is refused by the server. */
static void test_handshake_refuses_no_cert(void **state)
{
    (void)state;
    struct rt_tls *s = load("m1");
    SSL_CTX *bare = SSL_CTX_new(TLS_client_method());
    SSL_CTX_set_verify(bare, SSL_VERIFY_NONE, NULL);
    SSL *a = SSL_new(bare), *b = SSL_new(rt_tls_server_ctx(s));
    BIO *ab, *ba;
    assert_int_equal(BIO_new_bio_pair(&ab, 0, &ba, 0), 1);
    SSL_set_bio(a, ab, ab);
    SSL_set_bio(b, ba, ba);
    SSL_set_connect_state(a);
    SSL_set_accept_state(b);
    int server_failed = 0;
    for (int i = 0; i < 20; i++) {
        (void)SSL_do_handshake(a);
        int r = SSL_do_handshake(b);
        if (r <= 0 && SSL_get_error(b, r) == SSL_ERROR_SSL) {
            server_failed = 1;
            break;
        }
        assert_int_not_equal(r, 1);
    }
    assert_true(server_failed);
    char n[RT_TLS_NAME_MAX];
    assert_int_equal(rt_tls_peer_name(b, n, sizeof(n)), RT_EPERM);
    ERR_clear_error();
    SSL_free(a);
    SSL_free(b);
    SSL_CTX_free(bare);
    rt_tls_free(s);
}

/* ROLE:NAME splits only for the four roles and a well-formed name. */
static void test_name_split(void **state)
{
    (void)state;
    char r[RT_TLS_ROLE_MAX], n[RT_TLS_NAME_MAX];
    assert_int_equal(
        rt_tls_name_split("ps:ps-1.a_b", r, sizeof(r), n, sizeof(n)), 0);
    assert_string_equal(r, "ps");
    assert_string_equal(n, "ps-1.a_b");
    assert_int_equal(
        rt_tls_name_split("admin:operator", r, sizeof(r), n, sizeof(n)), 0);
    assert_string_equal(r, "admin");
    const char *bad[] = {"",      "ps",     "ps:",    ":x",       "root:x",
                         "psx:a", "ps:a b", "ps:a:b", "master:é", "PS:a"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        assert_int_equal(rt_tls_name_split(bad[i], r, sizeof(r), n, sizeof(n)),
                         RT_EINVAL);
    assert_int_equal(rt_tls_name_split("master:m1", r, 3, n, sizeof(n)),
                     RT_EINVAL);
}

/* The CA refuses to overwrite an existing CA or node, and issues more
 * nodes from the CA read back from disk. */
static void test_pki_no_overwrite_and_reissue(void **state)
{
    (void)state;
    char d[300], err[256];
    struct rt_pki_ca ca, again;
    struct stat st;
    path(d, sizeof(d), "ca");
    assert_int_equal(rt_pki_ca_create("x", 1, &again, err, sizeof(err)), 0);
    assert_int_equal(rt_pki_ca_write(d, &again, err, sizeof(err)), RT_EEXIST);
    rt_pki_ca_free(&again);
    assert_int_equal(rt_pki_ca_read(d, &ca, err, sizeof(err)), 0);
    char k[320];
    snprintf(k, sizeof(k), "%s/ca.key", d);
    assert_int_equal(stat(k, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);
    path(d, sizeof(d), "m1");
    assert_int_equal(rt_pki_issue(&ca, "master:m1", 1, d, err, sizeof(err)),
                     RT_EEXIST);
    path(d, sizeof(d), "fe2");
    assert_int_equal(rt_pki_issue(&ca, "bogus", 1, d, err, sizeof(err)),
                     RT_EINVAL);
    assert_int_equal(rt_pki_issue(&ca, "fe:fe2", 1, d, err, sizeof(err)), 0);
    assert_int_equal(stat(d, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0700);
    snprintf(k, sizeof(k), "%s/node.key", d);
    assert_int_equal(stat(k, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);
    rt_pki_ca_free(&ca);
    struct rt_tls *c = load("fe2"), *s = load("ps1");
    SSL *a, *b;
    assert_true(handshake(c, s, &a, &b));
    SSL_free(a);
    SSL_free(b);
    rt_tls_free(c);
    rt_tls_free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_load_names_self),
        cmocka_unit_test(test_load_refuses_open_key),
        cmocka_unit_test(test_load_refuses_bad_files),
        cmocka_unit_test(test_handshake_names_peers),
        cmocka_unit_test(test_handshake_refuses_other_ca),
        cmocka_unit_test(test_handshake_refuses_no_cert),
        cmocka_unit_test(test_name_split),
        cmocka_unit_test(test_pki_no_overwrite_and_reissue),
    };
    return cmocka_run_group_tests(tests, setup_all, teardown_all);
}
