/* The cluster's certificate authority: creates the CA and issues node
 * certificates for rt_tls (rtctl cluster init / add-node, and the tests).
 *
 * Keys are ECDSA P-256, signatures SHA-256, serials 128 random bits.
 * The CA certificate is CA:TRUE, pathlen 0, keyCertSign|cRLSign; a node
 * certificate is CA:FALSE, digitalSignature, serverAuth+clientAuth, subject
 * CN "ROLE:NAME" (rt_tls.h) and a DNS subjectAltName NAME.
 *
 * Files: a node directory holds ca.crt, node.crt (0644) and node.key
 * (0600), the directory 0700; the CA directory holds ca.crt and ca.key
 * (0600). Nothing is ever overwritten: an existing file is RT_EEXIST.
 * Thread: any; nothing is shared. Never logs or prints key material. */
#ifndef RT_PKI_H
#define RT_PKI_H

#include <stddef.h>

#include <openssl/evp.h>
#include <openssl/x509.h>

struct rt_pki_ca
{
    EVP_PKEY *key;
    X509 *crt;
};

/* A new CA named @cn valid for @days. 0 or RT_EINTERNAL (@err filled). On
 * 0, free with rt_pki_ca_free. */
int rt_pki_ca_create(const char *cn,
                     int days,
                     struct rt_pki_ca *ca,
                     char *err,
                     size_t errlen);
/* Reads @dir/ca.crt and @dir/ca.key. 0, RT_ENOTFOUND (no ca.crt),
 * RT_ECONFIG (unreadable, or the key does not match), RT_EPERM (ca.key
 * accessible by group/other). */
int rt_pki_ca_read(const char *dir,
                   struct rt_pki_ca *ca,
                   char *err,
                   size_t errlen);
/* Writes @dir/ca.crt and @dir/ca.key (creates @dir 0700 if missing).
 * RT_EEXIST when either exists, RT_EIO otherwise on failure. */
int rt_pki_ca_write(const char *dir,
                    const struct rt_pki_ca *ca,
                    char *err,
                    size_t errlen);
void rt_pki_ca_free(struct rt_pki_ca *ca);

/* Issues a key and certificate for @cn ("ROLE:NAME", checked with
 * rt_tls_name_split: RT_EINVAL) valid for @days, and writes them with the
 * CA certificate into @dir (created 0700; must not hold any of the three
 * files: RT_EEXIST). 0, RT_EINVAL, RT_EEXIST, RT_EIO or RT_EINTERNAL. */
int rt_pki_issue(const struct rt_pki_ca *ca,
                 const char *cn,
                 int days,
                 const char *dir,
                 char *err,
                 size_t errlen);

#endif
