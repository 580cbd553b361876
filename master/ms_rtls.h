/* Raft over mutual TLS: a libraft 0.22 `struct raft_uv_transport` that
 * authenticates both ends of every connection between masters with the
 * cluster certificates (common/rt_tls.h) and encrypts the traffic.
 *
 * It does what libraft's raft_uv_tcp does (listen on the member's address,
 * dial peers, carry raft's own handshake: protocol version, server id and
 * address), but inside TLS 1.3, and it hands libraft a connection only once
 * the peer presented a certificate of the cluster CA whose CN has the role
 * `master` ("master:NAME"). Anything else (plain TCP, another CA, a `ps:`,
 * `fe:` or `admin:` certificate, a handshake slower than the bound) is
 * closed before one byte reaches libraft, and logged at warn (rate-limited,
 * with the peer address and the reason).
 *
 * libraft reads and writes the stream it is given directly, so TLS cannot
 * sit inside it: libraft gets one end of a socketpair(AF_UNIX) wrapped in a
 * uv_pipe_t, and the transport pumps bytes between the other end and the
 * TLS connection (see ms_rtls.c for why with one thread per connection).
 *
 * Thread: every function here runs on @loop's thread, and so do libraft's
 * callbacks (accept_cb, connect cb, close cb). The connection threads touch
 * nothing of libraft's or of the loop's.
 *
 * Ownership: the caller embeds the raft_uv_transport (as for
 * raft_uv_tcp_init); @tls is borrowed and must outlive the transport (its
 * SSL_CTXs are referenced by live connections until they end). Every fd is
 * CLOEXEC, so a master that re-executes itself leaks none into its next
 * life. */
#ifndef MS_RTLS_H
#define MS_RTLS_H

#include <stdint.h>

#include <raft.h>
#include <raft/uv.h>
#include <uv.h>

struct rt_tls;

/* Default bound on a connection's TCP connect + TLS handshake + raft
 * handshake, in ms. */
#define MS_RTLS_HANDSHAKE_MS 5000
/* Incoming connections still in their handshake at most; more are closed at
 * once (a flood of half-open connections costs one thread each). */
#define MS_RTLS_MAX_HANDSHAKING 64
/* ... of which from one address at most. */
#define MS_RTLS_MAX_HANDSHAKING_PER_IP 8

/* Counters, for tests and metrics; monotonic since init. */
struct ms_rtls_stats
{
    uint64_t accepted;       /* incoming connections handed to libraft */
    uint64_t refused;        /* incoming connections closed before that */
    uint64_t connected;      /* outgoing connections handed to libraft */
    uint64_t connect_failed; /* outgoing attempts that failed */
    uint64_t accept_pauses;  /* accept failed (EMFILE...): paused 100 ms */
};

/* Like raft_uv_tcp_init(): fills @t (t->version must be 1, t->data is kept)
 * with the TLS transport's callbacks for raft_uv_init(). 0, or RAFT_INVALID
 * (bad version) / RAFT_NOMEM with t->errmsg set. On 0, ms_rtls_close()
 * releases it after the transport's close callback fired (libraft's
 * raft_close() does that through raft_uv_close()). */
int ms_rtls_init(struct raft_uv_transport *t,
                 uv_loop_t *loop,
                 struct rt_tls *tls);

/* Bound on each connection's handshake (default MS_RTLS_HANDSHAKE_MS).
 * Before listen/connect. */
void ms_rtls_set_handshake_ms(struct raft_uv_transport *t, unsigned ms);

/* Listen on @address (numeric HOST:PORT) instead of the address raft_init()
 * names, which stays the one sent to peers in the raft handshake (the
 * advertised one); like raft_uv_tcp_set_bind_address. Before listen.
 * 0 or RAFT_NAMETOOLONG. */
int ms_rtls_set_bind_address(struct raft_uv_transport *t, const char *address);

/* Releases what ms_rtls_init() allocated: after init when the transport was
 * never used by libraft, or after its close callback fired. */
void ms_rtls_close(struct raft_uv_transport *t);

/* A copy of the counters (read on the loop thread). */
void ms_rtls_get_stats(struct raft_uv_transport *t, struct ms_rtls_stats *out);

#endif
