/* Cluster credentials for mutual TLS: see rt_tls.h for the contract.
 *
 * Load: read the three files, check node.key's mode before touching it,
 * build a server and a client context (TLS 1.3 only, peer certificate
 * required and verified against ca.crt only, no session tickets: a
 * connection is one long-lived session and resumption would only add
 * state), then verify our own certificate against the CA with the same
 * store so a node with a mismatched or expired certificate fails at start
 * rather than at every handshake. */
#include "rt_tls.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <openssl/err.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include "rt_alloc.h"
#include "rt_err.h"

struct rt_tls
{
    SSL_CTX *srv;
    SSL_CTX *cli;
    char self[RT_TLS_NAME_MAX];
};

/* Appends OpenSSL's queued errors (never key material: these are reason
 * strings) to @err and empties the queue. */
static void rt_tls__ssl_err(char *err, size_t errlen)
{
    unsigned long e;
    size_t used = strlen(err);
    while ((e = ERR_get_error()) != 0) {
        char buf[160];
        ERR_error_string_n(e, buf, sizeof(buf));
        if (used + 3 < errlen) {
            int w = snprintf(err + used, errlen - used, ": %s", buf);
            if (w > 0)
                used +=
                    (size_t)w < errlen - used ? (size_t)w : errlen - used - 1;
        }
    }
}

static int rt_tls__cn(X509 *crt, char *out, size_t n)
{
    X509_NAME *subj = X509_get_subject_name(crt);
    int idx = subj ? X509_NAME_get_index_by_NID(subj, NID_commonName, -1) : -1;
    if (idx < 0)
        return RT_EPERM;
    ASN1_STRING *s = X509_NAME_ENTRY_get_data(X509_NAME_get_entry(subj, idx));
    unsigned char *utf8 = NULL;
    int len = ASN1_STRING_to_UTF8(&utf8, s);
    if (len < 0)
        return RT_EPERM;
    int rc = 0;
    if ((size_t)len >= n || memchr(utf8, 0, (size_t)len) != NULL) {
        rc = RT_EPERM;
    } else {
        memcpy(out, utf8, (size_t)len);
        out[len] = '\0';
    }
    OPENSSL_free(utf8);
    return rc;
}

static int rt_tls__role_ok(const char *role, size_t len)
{
    static const char *const roles[] = {"master", "ps", "fe", "admin"};
    for (size_t i = 0; i < sizeof(roles) / sizeof(roles[0]); i++)
        if (strlen(roles[i]) == len && memcmp(roles[i], role, len) == 0)
            return 1;
    return 0;
}

int rt_tls_name_split(const char *cn,
                      char *role,
                      size_t rn,
                      char *name,
                      size_t nn)
{
    const char *colon = cn ? strchr(cn, ':') : NULL;
    if (colon == NULL)
        return RT_EINVAL;
    size_t rlen = (size_t)(colon - cn);
    const char *nm = colon + 1;
    size_t nlen = strlen(nm);
    if (!rt_tls__role_ok(cn, rlen) || nlen == 0 || nlen > 63)
        return RT_EINVAL;
    for (size_t i = 0; i < nlen; i++) {
        char c = nm[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
              (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-'))
            return RT_EINVAL;
    }
    if (rlen >= rn || nlen >= nn)
        return RT_EINVAL;
    memcpy(role, cn, rlen);
    role[rlen] = '\0';
    memcpy(name, nm, nlen + 1);
    return 0;
}

int rt_tls_peer_name(SSL *ssl, char *out, size_t n)
{
    if (n > 0)
        out[0] = '\0';
    X509 *peer = ssl ? SSL_get0_peer_certificate(ssl) : NULL;
    if (peer == NULL || SSL_get_verify_result(ssl) != X509_V_OK)
        return RT_EPERM;
    int rc = rt_tls__cn(peer, out, n);
    if (rc != 0 && n > 0)
        out[0] = '\0';
    return rc;
}

static SSL_CTX *rt_tls__ctx(const SSL_METHOD *method,
                            const char *ca,
                            const char *crt,
                            const char *key,
                            char *err,
                            size_t errlen)
{
    SSL_CTX *ctx = SSL_CTX_new(method);
    if (ctx == NULL) {
        snprintf(err, errlen, "SSL_CTX_new");
        goto fail;
    }
    SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION);
    SSL_CTX_set_max_proto_version(ctx, TLS1_3_VERSION);
    SSL_CTX_set_options(ctx, SSL_OP_NO_TICKET);
    SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
    if (SSL_CTX_use_certificate_chain_file(ctx, crt) != 1) {
        snprintf(err, errlen, "%s: cannot load certificate", crt);
        goto fail;
    }
    if (SSL_CTX_use_PrivateKey_file(ctx, key, SSL_FILETYPE_PEM) != 1) {
        snprintf(err, errlen, "%s: cannot load private key", key);
        goto fail;
    }
    if (SSL_CTX_check_private_key(ctx) != 1) {
        snprintf(err, errlen, "%s does not match %s", key, crt);
        goto fail;
    }
    /* Only the cluster CA is trusted: no system store. */
    if (SSL_CTX_load_verify_locations(ctx, ca, NULL) != 1) {
        snprintf(err, errlen, "%s: cannot load CA certificate", ca);
        goto fail;
    }
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT,
                       NULL);
    SSL_CTX_set_verify_depth(ctx, 2);
    return ctx;
fail:
    rt_tls__ssl_err(err, errlen);
    SSL_CTX_free(ctx);
    return NULL;
}

/* Our own certificate must chain to the CA we trust, so a wrong file or
 * an expired certificate is a start-up error, not a handshake mystery. */
static int rt_tls__verify_self(SSL_CTX *ctx, char *err, size_t errlen)
{
    X509 *self = SSL_CTX_get0_certificate(ctx);
    X509_STORE_CTX *sc = X509_STORE_CTX_new();
    int ok =
        sc != NULL &&
        X509_STORE_CTX_init(sc, SSL_CTX_get_cert_store(ctx), self, NULL) == 1 &&
        X509_verify_cert(sc) == 1;
    if (!ok)
        snprintf(
            err, errlen, "node.crt does not verify against ca.crt: %s",
            sc ? X509_verify_cert_error_string(X509_STORE_CTX_get_error(sc))
               : "out of memory");
    X509_STORE_CTX_free(sc);
    ERR_clear_error();
    return ok ? 0 : RT_ECONFIG;
}

int rt_tls_load(const char *dir, struct rt_tls **out, char *err, size_t errlen)
{
    char ca[1024], crt[1024], key[1024];
    struct stat st;
    *out = NULL;
    if (errlen > 0)
        err[0] = '\0';
    snprintf(ca, sizeof(ca), "%s/ca.crt", dir);
    snprintf(crt, sizeof(crt), "%s/node.crt", dir);
    snprintf(key, sizeof(key), "%s/node.key", dir);
    if (stat(key, &st) != 0) {
        snprintf(err, errlen, "%s: %s", key, strerror(errno));
        return RT_ECONFIG;
    }
    if ((st.st_mode & (S_IRWXG | S_IRWXO)) != 0) {
        snprintf(err, errlen,
                 "%s: permissions %04o are too open (the key must not be "
                 "accessible by group or other; chmod 600)",
                 key, (unsigned)(st.st_mode & 07777));
        return RT_EPERM;
    }
    struct rt_tls *t = rt_xcalloc(1, sizeof(*t));
    t->srv = rt_tls__ctx(TLS_server_method(), ca, crt, key, err, errlen);
    if (t->srv == NULL)
        goto fail;
    t->cli = rt_tls__ctx(TLS_client_method(), ca, crt, key, err, errlen);
    if (t->cli == NULL)
        goto fail;
    /* The server names the CA it accepts in its CertificateRequest. */
    STACK_OF(X509_NAME) *names = SSL_load_client_CA_file(ca);
    if (names == NULL) {
        snprintf(err, errlen, "%s: no CA certificate", ca);
        goto fail;
    }
    SSL_CTX_set_client_CA_list(t->srv, names);
    SSL_CTX_set_num_tickets(t->srv, 0);
    if (rt_tls__verify_self(t->srv, err, errlen) != 0)
        goto fail;
    char role[RT_TLS_ROLE_MAX], name[RT_TLS_NAME_MAX];
    if (rt_tls__cn(SSL_CTX_get0_certificate(t->srv), t->self,
                   sizeof(t->self)) != 0 ||
        rt_tls_name_split(t->self, role, sizeof(role), name, sizeof(name)) !=
            0) {
        snprintf(err, errlen,
                 "%s: subject CN is not ROLE:NAME (ROLE master, ps, fe or "
                 "admin)",
                 crt);
        goto fail;
    }
    *out = t;
    return 0;
fail:
    ERR_clear_error();
    rt_tls_free(t);
    return RT_ECONFIG;
}

void rt_tls_free(struct rt_tls *t)
{
    if (t == NULL)
        return;
    SSL_CTX_free(t->srv);
    SSL_CTX_free(t->cli);
    free(t);
}

SSL_CTX *rt_tls_server_ctx(struct rt_tls *t)
{
    return t->srv;
}

SSL_CTX *rt_tls_client_ctx(struct rt_tls *t)
{
    return t->cli;
}

const char *rt_tls_self_name(const struct rt_tls *t)
{
    return t->self;
}
