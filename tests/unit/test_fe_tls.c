/* fe_tls: the HTTPS certificate and key files, checked before
 * libmicrohttpd sees them. The pairs are made here with OpenSSL (a
 * self-signed P-256 certificate per key), written to temporary files, and
 * each refusal is checked for its reason. */
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
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include "fe_tls.h"
#include "rt_err.h"

struct pair
{
    char dir[64];
    char cert[96];
    char key[96];
};

static EVP_PKEY *new_key(void)
{
    EVP_PKEY *k = EVP_PKEY_Q_keygen(NULL, NULL, "EC", "P-256");
    assert_non_null(k);
    return k;
}

/* Self-signed certificate of @key with serial @serial, PEM in @path. */
static void write_cert(const char *path, EVP_PKEY *key, long serial)
{
    X509 *x = X509_new();
    FILE *f = fopen(path, "w");
    assert_non_null(x);
    assert_non_null(f);
    ASN1_INTEGER_set(X509_get_serialNumber(x), serial);
    X509_gmtime_adj(X509_getm_notBefore(x), -60);
    X509_gmtime_adj(X509_getm_notAfter(x), 3600);
    X509_set_pubkey(x, key);
    X509_NAME_add_entry_by_txt(X509_get_subject_name(x), "CN", MBSTRING_ASC,
                               (const unsigned char *)"unit", -1, -1, 0);
    X509_set_issuer_name(x, X509_get_subject_name(x));
    assert_true(X509_sign(x, key, EVP_sha256()) > 0);
    assert_int_equal(PEM_write_X509(f, x), 1);
    fclose(f);
    X509_free(x);
}

static void write_key(const char *path, EVP_PKEY *key, mode_t mode)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    assert_int_equal(PEM_write_PrivateKey(f, key, NULL, NULL, 0, NULL, NULL),
                     1);
    fclose(f);
    assert_int_equal(chmod(path, mode), 0);
}

static int setup(void **state)
{
    struct pair *p = calloc(1, sizeof(*p));
    snprintf(p->dir, sizeof(p->dir), "/tmp/test_fe_tls_XXXXXX");
    assert_non_null(mkdtemp(p->dir));
    snprintf(p->cert, sizeof(p->cert), "%s/cert.pem", p->dir);
    snprintf(p->key, sizeof(p->key), "%s/key.pem", p->dir);
    *state = p;
    return 0;
}

static int teardown(void **state)
{
    struct pair *p = *state;
    unlink(p->cert);
    unlink(p->key);
    rmdir(p->dir);
    free(p);
    return 0;
}

static void test_good_pair(void **state)
{
    struct pair *p = *state;
    char errmsg[RT_ERRMSG_SIZE] = "";
    struct fe_tls *t = NULL;
    EVP_PKEY *k = new_key();
    write_cert(p->cert, k, 0x1234);
    write_key(p->key, k, 0600);
    assert_int_equal(fe_tls_load(p->cert, p->key, &t, errmsg), 0);
    assert_non_null(t);
    assert_string_equal(t->serial, "1234");
    assert_non_null(strstr(t->subject, "CN=unit"));
    assert_non_null(strstr(t->cert_pem, "BEGIN CERTIFICATE"));
    assert_non_null(strstr(t->key_pem, "PRIVATE KEY"));
    assert_ptr_equal(fe_tls_hold(t), t);
    fe_tls_release(t);
    fe_tls_release(t); /* the last reference: freed (ASan checks) */
    fe_tls_release(NULL);
    EVP_PKEY_free(k);
}

static void test_refusals(void **state)
{
    struct pair *p = *state;
    char errmsg[RT_ERRMSG_SIZE] = "";
    struct fe_tls *t = NULL;
    EVP_PKEY *k = new_key(), *other = new_key();
    FILE *f;

    /* A key file group/other can read. */
    write_cert(p->cert, k, 1);
    write_key(p->key, k, 0640);
    assert_int_equal(fe_tls_load(p->cert, p->key, &t, errmsg), RT_ECONFIG);
    assert_null(t);
    assert_non_null(strstr(errmsg, "mode 0640"));
    /* The key of another certificate. */
    write_key(p->key, other, 0600);
    assert_int_equal(fe_tls_load(p->cert, p->key, &t, errmsg), RT_ECONFIG);
    assert_non_null(strstr(errmsg, "is not the key of the first"));
    /* No certificate in the chain file. */
    f = fopen(p->cert, "w");
    fputs("-----BEGIN CERTIFICATE-----\nbm9wZQ==\n", f);
    fclose(f);
    write_key(p->key, k, 0600);
    assert_int_equal(fe_tls_load(p->cert, p->key, &t, errmsg), RT_ECONFIG);
    assert_non_null(strstr(errmsg, "no PEM certificate"));
    /* An encrypted key: refused, never a password prompt. */
    write_cert(p->cert, k, 2);
    f = fopen(p->key, "w");
    assert_int_equal(PEM_write_PrivateKey(f, k, EVP_aes_128_cbc(),
                                          (unsigned char *)"pw", 2, NULL, NULL),
                     1);
    fclose(f);
    assert_int_equal(fe_tls_load(p->cert, p->key, &t, errmsg), RT_ECONFIG);
    assert_non_null(strstr(errmsg, "no unencrypted PEM private key"));
    /* Missing files. */
    unlink(p->key);
    assert_int_equal(fe_tls_load(p->cert, p->key, &t, errmsg), RT_ECONFIG);
    assert_non_null(strstr(errmsg, "--tls-key"));
    assert_int_equal(fe_tls_load("/nonexistent/c.pem", p->key, &t, errmsg),
                     RT_ECONFIG);
    assert_non_null(strstr(errmsg, "--tls-cert /nonexistent/c.pem"));
    EVP_PKEY_free(k);
    EVP_PKEY_free(other);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_good_pair, setup, teardown),
        cmocka_unit_test_setup_teardown(test_refusals, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
