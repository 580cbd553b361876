/* The cluster's certificate authority: see rt_pki.h.
 *
 * Everything goes through OpenSSL's X509/EVP APIs; files are created with
 * O_EXCL and their final mode, so a key is never readable by others even
 * for a moment and an existing credential is never replaced. */
#include "rt_pki.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>

#include "rt_err.h"
#include "rt_tls.h"

static int rt_pki__fail(char *err, size_t errlen, int code, const char *what)
{
    unsigned long e = ERR_get_error();
    char buf[160] = "";
    if (e != 0)
        ERR_error_string_n(e, buf, sizeof(buf));
    snprintf(err, errlen, "%s%s%s", what, e ? ": " : "", buf);
    ERR_clear_error();
    return code;
}

static EVP_PKEY *rt_pki__key(void)
{
    return EVP_EC_gen("P-256");
}

static int rt_pki__ext(X509 *crt, X509 *issuer, int nid, const char *value)
{
    X509V3_CTX v3;
    X509V3_set_ctx_nodb(&v3);
    X509V3_set_ctx(&v3, issuer, crt, NULL, NULL, 0);
    X509_EXTENSION *ext = X509V3_EXT_conf_nid(NULL, &v3, nid, value);
    if (ext == NULL)
        return -1;
    int ok = X509_add_ext(crt, ext, -1);
    X509_EXTENSION_free(ext);
    return ok == 1 ? 0 : -1;
}

/* A certificate for @key named @cn, signed by @ikey (issuer @issuer, NULL =
 * self-signed). */
static X509 *rt_pki__cert(EVP_PKEY *key,
                          const char *cn,
                          int days,
                          X509 *issuer,
                          EVP_PKEY *ikey,
                          int is_ca)
{
    X509 *crt = X509_new();
    BIGNUM *bn = BN_new();
    if (crt == NULL || bn == NULL || X509_set_version(crt, 2) != 1 ||
        BN_rand(bn, 127, BN_RAND_TOP_ANY, BN_RAND_BOTTOM_ANY) != 1 ||
        BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(crt)) == NULL)
        goto fail;
    /* An hour back, so a node whose clock lags a little accepts it. */
    if (X509_gmtime_adj(X509_getm_notBefore(crt), -3600) == NULL ||
        X509_gmtime_adj(X509_getm_notAfter(crt), (long)days * 86400L) == NULL)
        goto fail;
    X509_NAME *name = X509_get_subject_name(crt);
    if (X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8,
                                   (const unsigned char *)cn, -1, -1, 0) != 1 ||
        X509_set_issuer_name(
            crt, issuer ? X509_get_subject_name(issuer) : name) != 1 ||
        X509_set_pubkey(crt, key) != 1)
        goto fail;
    X509 *iss = issuer ? issuer : crt;
    if (is_ca) {
        if (rt_pki__ext(crt, iss, NID_basic_constraints,
                        "critical,CA:TRUE,pathlen:0") != 0 ||
            rt_pki__ext(crt, iss, NID_key_usage,
                        "critical,keyCertSign,cRLSign") != 0 ||
            rt_pki__ext(crt, iss, NID_subject_key_identifier, "hash") != 0)
            goto fail;
    } else {
        char san[128];
        const char *colon = strchr(cn, ':');
        snprintf(san, sizeof(san), "DNS:%s", colon ? colon + 1 : cn);
        if (rt_pki__ext(crt, iss, NID_basic_constraints, "critical,CA:FALSE") !=
                0 ||
            rt_pki__ext(crt, iss, NID_key_usage, "critical,digitalSignature") !=
                0 ||
            rt_pki__ext(crt, iss, NID_ext_key_usage, "serverAuth,clientAuth") !=
                0 ||
            rt_pki__ext(crt, iss, NID_subject_key_identifier, "hash") != 0 ||
            rt_pki__ext(crt, iss, NID_authority_key_identifier,
                        "keyid:always") != 0 ||
            rt_pki__ext(crt, iss, NID_subject_alt_name, san) != 0)
            goto fail;
    }
    if (X509_sign(crt, ikey, EVP_sha256()) <= 0)
        goto fail;
    BN_free(bn);
    return crt;
fail:
    BN_free(bn);
    X509_free(crt);
    return NULL;
}

int rt_pki_ca_create(const char *cn,
                     int days,
                     struct rt_pki_ca *ca,
                     char *err,
                     size_t errlen)
{
    ca->key = rt_pki__key();
    ca->crt = NULL;
    if (ca->key == NULL)
        return rt_pki__fail(err, errlen, RT_EINTERNAL, "CA key generation");
    ca->crt = rt_pki__cert(ca->key, cn, days, NULL, ca->key, 1);
    if (ca->crt == NULL) {
        rt_pki_ca_free(ca);
        return rt_pki__fail(err, errlen, RT_EINTERNAL, "CA certificate");
    }
    return 0;
}

void rt_pki_ca_free(struct rt_pki_ca *ca)
{
    EVP_PKEY_free(ca->key);
    X509_free(ca->crt);
    ca->key = NULL;
    ca->crt = NULL;
}

/* Opens @path for a new file of @mode; NULL (errno set) if it exists. */
static FILE *rt_pki__create(const char *path, mode_t mode)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
    if (fd < 0)
        return NULL;
    (void)fchmod(fd, mode); /* the umask may have narrowed it */
    FILE *f = fdopen(fd, "w");
    if (f == NULL)
        close(fd);
    return f;
}

static int rt_pki__write(const char *dir,
                         const char *file,
                         X509 *crt,
                         EVP_PKEY *key,
                         char *err,
                         size_t errlen)
{
    char path[1024];
    snprintf(path, sizeof(path), "%s/%s", dir, file);
    FILE *f = rt_pki__create(path, key ? 0600 : 0644);
    if (f == NULL) {
        int e = errno;
        snprintf(err, errlen, "%s: %s", path, strerror(e));
        return e == EEXIST ? RT_EEXIST : RT_EIO;
    }
    int ok = key ? PEM_write_PrivateKey(f, key, NULL, NULL, 0, NULL, NULL)
                 : PEM_write_X509(f, crt);
    if (fflush(f) != 0 || fsync(fileno(f)) != 0)
        ok = 0;
    if (fclose(f) != 0)
        ok = 0;
    if (ok != 1) {
        unlink(path);
        return rt_pki__fail(err, errlen, RT_EIO, path);
    }
    return 0;
}

static int rt_pki__mkdir(const char *dir, char *err, size_t errlen)
{
    if (mkdir(dir, 0700) != 0 && errno != EEXIST) {
        snprintf(err, errlen, "%s: %s", dir, strerror(errno));
        return RT_EIO;
    }
    return 0;
}

static int rt_pki__absent(const char *dir,
                          const char *const *files,
                          size_t n,
                          char *err,
                          size_t errlen)
{
    for (size_t i = 0; i < n; i++) {
        char path[1024];
        struct stat st;
        snprintf(path, sizeof(path), "%s/%s", dir, files[i]);
        if (lstat(path, &st) == 0) {
            snprintf(err, errlen, "%s exists; refusing to overwrite", path);
            return RT_EEXIST;
        }
    }
    return 0;
}

int rt_pki_ca_write(const char *dir,
                    const struct rt_pki_ca *ca,
                    char *err,
                    size_t errlen)
{
    static const char *const files[] = {"ca.crt", "ca.key"};
    int rc = rt_pki__mkdir(dir, err, errlen);
    if (rc == 0)
        rc = rt_pki__absent(dir, files, 2, err, errlen);
    if (rc == 0)
        rc = rt_pki__write(dir, "ca.key", NULL, ca->key, err, errlen);
    if (rc == 0)
        rc = rt_pki__write(dir, "ca.crt", ca->crt, NULL, err, errlen);
    return rc;
}

int rt_pki_ca_read(const char *dir,
                   struct rt_pki_ca *ca,
                   char *err,
                   size_t errlen)
{
    char path[1024];
    struct stat st;
    ca->key = NULL;
    ca->crt = NULL;
    snprintf(path, sizeof(path), "%s/ca.crt", dir);
    FILE *f = fopen(path, "r");
    if (f == NULL) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return errno == ENOENT ? RT_ENOTFOUND : RT_ECONFIG;
    }
    ca->crt = PEM_read_X509(f, NULL, NULL, NULL);
    fclose(f);
    if (ca->crt == NULL)
        return rt_pki__fail(err, errlen, RT_ECONFIG, path);
    snprintf(path, sizeof(path), "%s/ca.key", dir);
    if (stat(path, &st) == 0 && (st.st_mode & (S_IRWXG | S_IRWXO)) != 0) {
        snprintf(err, errlen, "%s: permissions %04o are too open (chmod 600)",
                 path, (unsigned)(st.st_mode & 07777));
        rt_pki_ca_free(ca);
        return RT_EPERM;
    }
    f = fopen(path, "r");
    if (f == NULL) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        rt_pki_ca_free(ca);
        return RT_ECONFIG;
    }
    ca->key = PEM_read_PrivateKey(f, NULL, NULL, NULL);
    fclose(f);
    if (ca->key == NULL || X509_check_private_key(ca->crt, ca->key) != 1) {
        rt_pki_ca_free(ca);
        return rt_pki__fail(err, errlen, RT_ECONFIG, path);
    }
    return 0;
}

int rt_pki_issue(const struct rt_pki_ca *ca,
                 const char *cn,
                 int days,
                 const char *dir,
                 char *err,
                 size_t errlen)
{
    static const char *const files[] = {"ca.crt", "node.crt", "node.key"};
    char role[RT_TLS_ROLE_MAX], name[RT_TLS_NAME_MAX];
    if (rt_tls_name_split(cn, role, sizeof(role), name, sizeof(name)) != 0) {
        snprintf(err, errlen,
                 "%s: not ROLE:NAME (ROLE master, ps, fe or admin; NAME of "
                 "[A-Za-z0-9._-])",
                 cn);
        return RT_EINVAL;
    }
    int rc = rt_pki__mkdir(dir, err, errlen);
    if (rc == 0)
        rc = rt_pki__absent(dir, files, 3, err, errlen);
    if (rc != 0)
        return rc;
    EVP_PKEY *key = rt_pki__key();
    if (key == NULL)
        return rt_pki__fail(err, errlen, RT_EINTERNAL, "key generation");
    X509 *crt = rt_pki__cert(key, cn, days, ca->crt, ca->key, 0);
    if (crt == NULL) {
        EVP_PKEY_free(key);
        return rt_pki__fail(err, errlen, RT_EINTERNAL, "certificate");
    }
    rc = rt_pki__write(dir, "node.key", NULL, key, err, errlen);
    if (rc == 0)
        rc = rt_pki__write(dir, "node.crt", crt, NULL, err, errlen);
    if (rc == 0)
        rc = rt_pki__write(dir, "ca.crt", ca->crt, NULL, err, errlen);
    X509_free(crt);
    EVP_PKEY_free(key);
    return rc;
}
