/* TLS material of the HTTPS listener: a certificate chain and its private
 * key, read from PEM files and checked with OpenSSL before libmicrohttpd
 * (which does the TLS itself, through GnuTLS) ever sees them.
 *
 * A struct fe_tls is immutable once loaded and reference-counted: every
 * HTTPS daemon of every worker holds one reference for its life, so a
 * reload (SIGHUP) can hand new material to the workers while the daemons
 * that still serve connections on the old certificate keep theirs.
 *
 * Thread: any. fe_tls_load reads files (main thread, at start and on
 * SIGHUP); the rest only counts references.
 * Secrets: the key bytes are wiped with OPENSSL_cleanse when the last
 * reference goes; nothing here logs them. */
#ifndef FE_TLS_H
#define FE_TLS_H

#include <stdatomic.h>
#include <stddef.h>

struct fe_tls
{
    char *cert_pem; /* NUL-terminated chain, leaf first */
    char *key_pem;  /* NUL-terminated private key */
    size_t key_len;
    /* For the log: the leaf's subject, serial (hex) and notAfter. */
    char subject[128];
    char serial[80];
    char not_after[40];
    atomic_uint refs;
};

/* Reads @cert_path (PEM chain, leaf first) and @key_path (PEM private
 * key, not encrypted). Refuses a key file readable or writable by group
 * or other (it is a secret), a chain without a certificate, a key that is
 * not the leaf's, and an encrypted key. On 0, *out holds one reference.
 * Errors: RT_ECONFIG with @errmsg (RT_ERRMSG_SIZE bytes) naming the file
 * and the reason (OpenSSL's error queue emptied into it). */
int fe_tls_load(const char *cert_path,
                const char *key_path,
                struct fe_tls **out,
                char *errmsg);
/* Takes one more reference; returns @t. */
struct fe_tls *fe_tls_hold(struct fe_tls *t);
/* Drops a reference (NULL ignored); the last one wipes and frees. */
void fe_tls_release(struct fe_tls *t);

#endif
