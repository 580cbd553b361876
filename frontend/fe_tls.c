/* HTTPS certificate and key: see fe_tls.h. OpenSSL only parses and
 * cross-checks the PEM here, so a bad file is refused with a clear reason
 * before any daemon is touched; libmicrohttpd/GnuTLS then loads the same
 * bytes (MHD_OPTION_HTTPS_MEM_CERT/KEY). */
#include "fe_tls.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include "rt_alloc.h"
#include "rt_err.h"

#define FE_TLS_FILE_MAX (1024 * 1024)

/* Reads a whole (small) file, NUL-terminated. 0 or -errno. *st gets its
 * stat (of the open descriptor: the file read is the file checked). */
static int fe__read_file(const char *path,
                         char **out,
                         size_t *len,
                         struct stat *st)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    char *buf;
    size_t n = 0;
    if (fd < 0) {
        return -errno;
    }
    if (fstat(fd, st) != 0) {
        int e = errno;
        close(fd);
        return -e;
    }
    if (!S_ISREG(st->st_mode) || st->st_size > FE_TLS_FILE_MAX) {
        close(fd);
        return S_ISREG(st->st_mode) ? -EFBIG : -EINVAL; /* 1 MiB at most */
    }
    buf = rt_xmalloc((size_t)st->st_size + 1);
    while (n < (size_t)st->st_size) {
        ssize_t r = read(fd, buf + n, (size_t)st->st_size - n);
        if (r < 0 && errno == EINTR) {
            continue;
        }
        if (r <= 0) {
            break;
        }
        n += (size_t)r;
    }
    close(fd);
    buf[n] = '\0';
    *out = buf;
    *len = n;
    return 0;
}

/* Appends OpenSSL's error queue (emptied) to @errmsg. */
static void fe__ssl_errors(char *errmsg)
{
    unsigned long e;
    while ((e = ERR_get_error()) != 0) {
        char buf[160];
        ERR_error_string_n(e, buf, sizeof(buf));
        size_t l = strlen(errmsg);
        snprintf(errmsg + l, RT_ERRMSG_SIZE - l, ": %s", buf);
    }
}

/* An encrypted key would make OpenSSL prompt on the terminal: refuse. */
static int fe__no_password(char *buf, int size, int rw, void *u)
{
    (void)buf;
    (void)size;
    (void)rw;
    (void)u;
    return -1;
}

static void fe__describe(struct fe_tls *t, X509 *x)
{
    const ASN1_INTEGER *sn = X509_get0_serialNumber(x);
    BIGNUM *bn = ASN1_INTEGER_to_BN(sn, NULL);
    char *hex = bn ? BN_bn2hex(bn) : NULL;
    BIO *b = BIO_new(BIO_s_mem());
    snprintf(t->serial, sizeof(t->serial), "%s", hex ? hex : "?");
    OPENSSL_free(hex);
    BN_free(bn);
    X509_NAME_oneline(X509_get_subject_name(x), t->subject,
                      (int)sizeof(t->subject));
    if (b && ASN1_TIME_print(b, X509_get0_notAfter(x))) {
        int n = BIO_read(b, t->not_after, (int)sizeof(t->not_after) - 1);
        t->not_after[n > 0 ? n : 0] = '\0';
    }
    BIO_free(b);
}

int fe_tls_load(const char *cert_path,
                const char *key_path,
                struct fe_tls **out,
                char *errmsg)
{
    struct fe_tls *t = rt_xcalloc(1, sizeof(*t));
    struct stat st;
    size_t cert_len = 0;
    BIO *b = NULL;
    X509 *leaf = NULL;
    EVP_PKEY *pkey = NULL;
    int rc;

    *out = NULL;
    ERR_clear_error();
    rc = fe__read_file(cert_path, &t->cert_pem, &cert_len, &st);
    if (rc != 0) {
        rt_errmsg_printf(errmsg, "--tls-cert %s: %s", cert_path, strerror(-rc));
        goto err;
    }
    rc = fe__read_file(key_path, &t->key_pem, &t->key_len, &st);
    if (rc != 0) {
        rt_errmsg_printf(errmsg, "--tls-key %s: %s", key_path, strerror(-rc));
        goto err;
    }
    if (st.st_mode & (S_IRWXG | S_IRWXO)) {
        rt_errmsg_printf(errmsg,
                         "--tls-key %s has mode %04o: group/other may "
                         "access the private key (chmod 600)",
                         key_path, (unsigned)(st.st_mode & 07777));
        goto err;
    }
    b = BIO_new_mem_buf(t->cert_pem, (int)cert_len);
    leaf = b ? PEM_read_bio_X509(b, NULL, fe__no_password, NULL) : NULL;
    BIO_free(b);
    if (!leaf) {
        rt_errmsg_printf(errmsg, "--tls-cert %s: no PEM certificate",
                         cert_path);
        fe__ssl_errors(errmsg);
        goto err;
    }
    b = BIO_new_mem_buf(t->key_pem, (int)t->key_len);
    pkey = b ? PEM_read_bio_PrivateKey(b, NULL, fe__no_password, NULL) : NULL;
    BIO_free(b);
    if (!pkey) {
        rt_errmsg_printf(errmsg, "--tls-key %s: no unencrypted PEM private key",
                         key_path);
        ERR_clear_error(); /* may quote the key's bytes: not logged */
        goto err;
    }
    if (X509_check_private_key(leaf, pkey) != 1) {
        rt_errmsg_printf(errmsg,
                         "--tls-key %s is not the key of the first "
                         "certificate of %s",
                         key_path, cert_path);
        ERR_clear_error();
        goto err;
    }
    fe__describe(t, leaf);
    X509_free(leaf);
    EVP_PKEY_free(pkey);
    atomic_init(&t->refs, 1);
    *out = t;
    return 0;

err:
    X509_free(leaf);
    EVP_PKEY_free(pkey);
    atomic_init(&t->refs, 1);
    fe_tls_release(t);
    return RT_ECONFIG;
}

struct fe_tls *fe_tls_hold(struct fe_tls *t)
{
    atomic_fetch_add(&t->refs, 1);
    return t;
}

void fe_tls_release(struct fe_tls *t)
{
    if (!t || atomic_fetch_sub(&t->refs, 1) != 1) {
        return;
    }
    if (t->key_pem) {
        OPENSSL_cleanse(t->key_pem, t->key_len);
    }
    free(t->key_pem);
    free(t->cert_pem);
    free(t);
}
