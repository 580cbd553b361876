/* Cluster credentials for mutual TLS on every cluster RPC connection.
 *
 * A node's credentials are a directory holding ca.crt (the cluster CA),
 * node.crt (this node's certificate, signed by that CA) and node.key (its
 * private key). node.key must not be readable by group or other, else it is
 * refused, as ssh refuses such a key. Both contexts speak TLS 1.3 only and
 * demand a certificate signed by the cluster CA from the other side
 * (SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT on both), so a
 * connection is authenticated both ways before any frame crosses it.
 *
 * Identity: a certificate's subject CN is "ROLE:NAME", ROLE one of master,
 * ps, fe, admin (master:m1, ps:ps1, fe:fe1, admin:operator). Authorization
 * is by ROLE (each daemon's RPC dispatch); a partition server's id is bound
 * to the full name that first registered it. Addresses are not part of the
 * identity: nodes are reached by IP and a certificate names no host.
 *
 * Thread: rt_tls_load/rt_tls_free run once in main(). The SSL_CTXs are
 * immutable after load and OpenSSL allows SSL_new on them from any thread,
 * so several loop threads share one struct rt_tls. rt_tls_peer_name and
 * rt_tls_name_split are pure. Never logs key material. */
#ifndef RT_TLS_H
#define RT_TLS_H

#include <stddef.h>

#include <openssl/ssl.h>

#define RT_TLS_NAME_MAX 128 /* "ROLE:NAME" with its NUL */
#define RT_TLS_ROLE_MAX 8   /* "master" with its NUL */

struct rt_tls;

/* Loads @dir/{ca.crt,node.crt,node.key} (@dir borrowed). On 0, *out
 * belongs to the caller (rt_tls_free). Errors, with @err (@errlen bytes)
 * saying which file and why: RT_ECONFIG (missing/unreadable/unparsable
 * file, key not matching the certificate, node certificate not signed by
 * the CA or expired, CN not "ROLE:NAME"), RT_EPERM (node.key readable by
 * group/other). */
int rt_tls_load(const char *dir, struct rt_tls **out, char *err, size_t errlen);
/* NULL is a no-op. The contexts must no longer be in use (their SSLs hold
 * references, so freeing while connections live is safe but pointless). */
void rt_tls_free(struct rt_tls *t);
/* Contexts for accepted and for outgoing connections; owned by @t. */
SSL_CTX *rt_tls_server_ctx(struct rt_tls *t);
SSL_CTX *rt_tls_client_ctx(struct rt_tls *t);
/* Own certificate's CN, "ROLE:NAME"; valid while @t is. */
const char *rt_tls_self_name(const struct rt_tls *t);
/* CN of the verified peer certificate ("ROLE:NAME") copied into @out (@n
 * bytes). 0, or RT_EPERM when there is none, it did not verify, or its CN
 * is missing, holds a NUL or does not fit. */
int rt_tls_peer_name(SSL *ssl, char *out, size_t n);
/* Splits "ROLE:NAME"; ROLE is one of master, ps, fe, admin and NAME is
 * 1..63 characters of [A-Za-z0-9._-]. 0, or RT_EINVAL (also when an output
 * does not fit). */
int rt_tls_name_split(const char *cn,
                      char *role,
                      size_t rn,
                      char *name,
                      size_t nn);

#endif
