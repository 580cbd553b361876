/* RPC over libuv TCP: length-prefixed frames carrying protobuf-c bodies.
 *
 * Frame: 24-byte header then `len` body bytes.
 *   u32be len      body length (<= RT_RPC_MAX_BODY, else framing error)
 *   u16be magic    0x5254 ("RT")
 *   u8    version  1
 *   u8    flags    bit0 RT_RPC_F_REPLY, bit1 RT_RPC_F_REQID
 *   u32be method   enum Rt__Method (proto/rt.proto)
 *   i32be status   replies: 0 or RT_E*; requests: 0
 *   u64be id       request id, echoed in the reply; 0 = one-way (no reply)
 * A framing error (bad magic/version/length) closes the connection.
 *
 * Request id: a request sent while the calling thread has a log request id
 * (rt_log_set_reqid) carries it: flag RT_RPC_F_REQID, and the body starts
 * with u8 n (1..RT_RPC_REQID_MAX) and the n bytes of the id, counted in
 * `len`, before the message. The receiver strips it, sets it as its own
 * thread's request id while the request callback runs, and restores the
 * previous one after, so the callee's log lines name the client's
 * x-ms-request-id. A malformed prefix is answered RT_EPROTO. Replies never
 * carry one.
 *
 * Connections are symmetric: on an established connection either side may
 * call the other; many requests may be outstanding; replies may come in any
 * order. A client connection (rt_rpc_client) reconnects by itself with
 * exponential backoff (50 ms doubling to 2 s); a server (rt_rpc_server)
 * accepts connections and serves them with the same request callback.
 *
 * Writes: the frames queued in one loop iteration leave in one write, and a
 * socket has at most one write in flight; frames queued meanwhile wait for
 * it. A frame still waiting has not reached the socket, which is how a
 * call that was never sent is told from one that was (RT_ENOTSENT vs
 * RT_ENOCONN, rt_rpc_conn_report_unsent).
 *
 * Thread: everything here runs on the loop thread that created the object.
 * Other threads must hop to the loop (uv_async_send) before calling in.
 *
 * Callbacks never run synchronously inside the call that started the
 * operation: a failure noticed at call time is reported on a later tick. */
#ifndef RT_RPC_H
#define RT_RPC_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include <protobuf-c/protobuf-c.h>

#define RT_RPC_HDR_SIZE 24
#define RT_RPC_MAGIC 0x5254
#define RT_RPC_VERSION 1
#define RT_RPC_F_REPLY 0x01
#define RT_RPC_F_REQID 0x02
#define RT_RPC_REQID_MAX 63
#define RT_RPC_MAX_BODY (64u * 1024u * 1024u)

struct rt_rpc_hdr
{
    uint32_t len;
    uint8_t flags;
    uint32_t method;
    int32_t status;
    uint64_t id;
};

/* Pure framing helpers (unit-tested on their own). */
void rt_rpc_hdr_encode(const struct rt_rpc_hdr *h,
                       uint8_t out[RT_RPC_HDR_SIZE]);
/* Returns 0 or RT_EPROTO (bad magic, version or length). */
int rt_rpc_hdr_decode(const uint8_t in[RT_RPC_HDR_SIZE], struct rt_rpc_hdr *h);

/* Incremental frame reader: feed any byte chunks; each complete frame is
 * delivered to @cb (body borrowed for the call). Returns 0, or RT_EPROTO
 * after which the stream is unusable. */
typedef int (*rt_rpc_frame_cb)(const struct rt_rpc_hdr *h,
                               const uint8_t *body,
                               void *arg);
struct rt_rpc_reader
{
    uint8_t hdr[RT_RPC_HDR_SIZE];
    size_t hdr_have;
    struct rt_rpc_hdr cur;
    uint8_t *body;
    size_t body_have;
    int failed;
};
void rt_rpc_reader_init(struct rt_rpc_reader *r);
void rt_rpc_reader_close(struct rt_rpc_reader *r);
/* A non-zero return from @cb stops feeding and is returned. */
int rt_rpc_reader_feed(struct rt_rpc_reader *r,
                       const uint8_t *data,
                       size_t n,
                       rt_rpc_frame_cb cb,
                       void *arg);

struct rt_rpc_conn;
struct rt_rpc_server;
struct rt_rpc_client;

/* An incoming request: @body is borrowed for the call. Answer with
 * rt_rpc_reply() now or later (keep @conn alive with rt_rpc_conn_ref()).
 * One-way requests (id 0) must not be answered (rt_rpc_reply ignores them). */
typedef void (*rt_rpc_request_cb)(struct rt_rpc_conn *conn,
                                  uint32_t method,
                                  uint64_t id,
                                  const uint8_t *body,
                                  size_t len,
                                  void *ud);
/* A reply: status 0 or the peer's RT_E* code; RT_ETIMEDOUT when no reply
 * came in time (the request may have been executed, and one not yet
 * written when its time ran out may still be written later); RT_ENOCONN
 * when the connection was down or dropped before the reply; RT_ECANCELED
 * when the client/server is being closed. On a conn that reports unsent
 * calls (rt_rpc_conn_report_unsent), RT_ENOCONN is split: RT_ENOTSENT for
 * a request none of whose bytes was handed to the socket (the conn was
 * down at call time, the connect it waited for failed or was abandoned, or
 * it still waited behind an unfinished write when the connection dropped),
 * so the peer cannot have executed it; RT_ENOCONN for one that was
 * written, wholly or in part, whose outcome is unknown. @body is borrowed
 * for the call (NULL/0 on local errors). Fires exactly once. */
typedef void (*rt_rpc_reply_cb)(int status,
                                const uint8_t *body,
                                size_t len,
                                void *arg);
/* Connection came up (@up = 1) or went down (@up = 0). For servers, down
 * is the last callback for that conn. */
typedef void (*rt_rpc_conn_cb)(struct rt_rpc_conn *conn, int up, void *ud);

/* Listens on @host:@port (port 0 = ephemeral; see rt_rpc_server_port).
 * @on_conn may be NULL. Returns 0 or a libuv error. */
int rt_rpc_server_start(uv_loop_t *loop,
                        const char *host,
                        int port,
                        rt_rpc_request_cb on_request,
                        rt_rpc_conn_cb on_conn,
                        void *ud,
                        struct rt_rpc_server **out);
int rt_rpc_server_port(const struct rt_rpc_server *srv);
/* Stops listening, closes every accepted connection (pending calls on them
 * get RT_ECANCELED) and frees the server once all handles are closed. */
void rt_rpc_server_close(struct rt_rpc_server *srv);

/* Connects to "host:port" and keeps reconnecting. The host is a numeric
 * address or a DNS name (rt_addr_dial_check): a name is resolved with
 * uv_getaddrinfo before every connection attempt (never blocking the loop;
 * the connect timeout covers resolution and connect; calls made meanwhile
 * queue as for a connect in flight; a name that does not resolve fails
 * them RT_ENOCONN and is retried with the backoff), its addresses taken in
 * turn, one per attempt. @on_request serves the peer's calls on this
 * connection (may be NULL); @on_conn reports up/down (may be NULL).
 * Returns 0 or RT_EINVAL (bad address). */
int rt_rpc_client_start(uv_loop_t *loop,
                        const char *addr,
                        rt_rpc_request_cb on_request,
                        rt_rpc_conn_cb on_conn,
                        void *ud,
                        struct rt_rpc_client **out);
/* The client's connection object; stable for the client's life, whether or
 * not it is currently connected. */
struct rt_rpc_conn *rt_rpc_client_conn(struct rt_rpc_client *c);
/* With TLS: the client's connections come up only to a server whose
 * certificate role is one of @roles (RT_RPC_ROLE_* bits, below; 0 = any
 * member of the cluster, the default); another is refused like a failed
 * handshake (counted, warned), so a member of the wrong role that got
 * hold of the address can neither answer nor call. Call it right after
 * rt_rpc_client_start (the first handshake runs on a later tick). No
 * effect without TLS. */
void rt_rpc_client_expect_roles(struct rt_rpc_client *c, unsigned roles);
/* Points the client at a new address, numeric or a name (reconnects; a
 * resolution in flight for the old one is abandoned). */
int rt_rpc_client_set_addr(struct rt_rpc_client *c, const char *addr);
/* Closes the connection; pending calls get RT_ECANCELED; frees after the
 * handles close. */
void rt_rpc_client_close(struct rt_rpc_client *c);

/* Sends a request. @body is copied. @cb NULL = one-way (id 0, no reply).
 * @timeout_ms 0 = default 5000. Returns 0 (cb will fire exactly once) or
 * RT_EINVAL (body too large). A down connection is reported through cb
 * with RT_ENOCONN (RT_ENOTSENT if the conn reports unsent calls) on a
 * later tick. */
int rt_rpc_call(struct rt_rpc_conn *conn,
                uint32_t method,
                const uint8_t *body,
                size_t len,
                uint32_t timeout_ms,
                rt_rpc_reply_cb cb,
                void *arg);
/* Packs @msg (may be NULL = empty body) and calls rt_rpc_call. */
int rt_rpc_call_pb(struct rt_rpc_conn *conn,
                   uint32_t method,
                   const ProtobufCMessage *msg,
                   uint32_t timeout_ms,
                   rt_rpc_reply_cb cb,
                   void *arg);
/* Answers request @id with @status and @body (copied). Silently dropped when
 * @id is 0 or the connection has gone. Returns 0. */
int rt_rpc_reply(struct rt_rpc_conn *conn,
                 uint64_t id,
                 uint32_t method,
                 int32_t status,
                 const uint8_t *body,
                 size_t len);
int rt_rpc_reply_pb(struct rt_rpc_conn *conn,
                    uint64_t id,
                    uint32_t method,
                    int32_t status,
                    const ProtobufCMessage *msg);
/* Error reply with an rt.Error{message} body (NULL message: the code's
 * own text). _at names the failed operation of a multi-operation request
 * (rt.Error.index); the plain form sends -1, "the request as a whole". */
int rt_rpc_reply_err(struct rt_rpc_conn *conn,
                     uint64_t id,
                     uint32_t method,
                     int32_t status,
                     const char *message);
int rt_rpc_reply_err_at(struct rt_rpc_conn *conn,
                        uint64_t id,
                        uint32_t method,
                        int32_t status,
                        int32_t index,
                        const char *message);
/* A master that is not the acting leader answers request @id with
 * RT_ENOTLEADER and @hint (borrowed; NULL = no leader known) as the body,
 * an rt.NotLeader (docs/DESIGN-master-ha.md §5.2). Returns 0. */
struct Rt__NotLeader;
int rt_rpc_reply_notleader(struct rt_rpc_conn *conn,
                           uint64_t id,
                           uint32_t method,
                           const struct Rt__NotLeader *hint);
/* The hint of a reply: when @status is RT_ENOTLEADER and @body decodes as
 * an rt.NotLeader, returns it (the caller frees it with
 * rt__not_leader__free_unpacked); otherwise NULL (another status, or a
 * follower that knows no leader and sent no body). */
struct Rt__NotLeader *rt_notleader_parse(int status,
                                         const uint8_t *body,
                                         size_t len);

/* Output gate (the master's output commit, docs/DESIGN-master-ha.md §2.7):
 * while set, each frame queued is tagged with need(ud) at that moment, and
 * a connection's buffered frames leave only once have(ud) reaches the
 * highest tag among them (frames keep their order; a held frame counts as
 * never sent for RT_ENOTSENT). Call rt_rpc_gate_release() whenever have()
 * advanced. One gate per process; rt_rpc_gate_set(NULL) removes it and
 * releases everything held. */
struct rt_rpc_gate
{
    uint64_t (*need)(void *ud);
    uint64_t (*have)(void *ud);
    void *ud;
};
void rt_rpc_gate_set(const struct rt_rpc_gate *g);
void rt_rpc_gate_release(void);

/* Mutual TLS on every connection (rt_tls.h). Call once, before creating any
 * server or client, from main(); each server and client keeps the setting
 * in force when it is created. @tls is borrowed and must outlive every RPC
 * object using it; NULL (the default) = plain TCP, exactly as without TLS.
 * With TLS, a connection becomes up only after a TLS 1.3 handshake in which
 * both sides presented a certificate of the cluster CA whose CN is
 * ROLE:NAME: a server closes one that fails (or does not finish within
 * 5 s) before reading any request, counts it and warns (at most once a
 * second); a client counts the handshake as part of its connect (bounded
 * by the connect timeout; what waited fails as for a failed connect) and
 * retries with backoff. Thread: the contexts are shared read-only by every
 * loop thread. */
struct rt_tls;
void rt_rpc_set_tls(struct rt_tls *tls);
/* The two rt_opt rows (common/rt_config.h) every daemon whose only
 * cluster transport is this RPC offers for rt_rpc_tls_flags: --cluster-tls
 * DIR into char *@dir_var, --insecure-rpc into int @insecure_var. */
#define RT_RPC_TLS_OPTS(dir_var, insecure_var)                                \
    {"cluster-tls", RT_OPT_STR, &(dir_var), "",                               \
     "directory with this node's cluster credentials (ca.crt, "               \
     "node.crt, node.key; rtctl cluster init): every RPC connection is "      \
     "mutual TLS"},                                                           \
    {                                                                         \
        "insecure-rpc", RT_OPT_BOOL, &(insecure_var), NULL,                   \
            "run the cluster RPC without --cluster-tls: unauthenticated and " \
            "unencrypted (a trusted loopback only)"                           \
    }

/* A daemon's --cluster-tls DIR / --insecure-rpc flags (the same on every
 * binary), after logging is set up and before any server or client: with
 * @dir non-empty, loads it (rt_tls_load), sets it (rt_rpc_set_tls) and
 * returns it in *out (the caller frees it after the loop, with
 * rt_tls_free; the master's other transports may share it); with
 * @insecure, warns that the RPC is unauthenticated and leaves TLS off
 * (*out NULL). Neither, both, or a bad directory: tells stderr why,
 * prefixed with @prog, and returns -1 (the caller exits 2). */
int rt_rpc_tls_flags(const char *prog,
                     const char *dir,
                     int insecure,
                     struct rt_tls **out);
/* Connections refused by TLS (failed or unfinished handshakes) since start,
 * over all threads. */
uint64_t rt_rpc_tls_refused(void);
/* The verified peer certificate's CN, "ROLE:NAME" (rt_tls.h), or "" on a
 * plain connection or while down. Valid while the conn is. Authorization
 * decisions use this, never the address. */
const char *rt_rpc_conn_peer_name(const struct rt_rpc_conn *conn);

/* Authorization by role. A daemon's request dispatch keeps one table: for
 * each method it serves, the roles (RT_RPC_ROLE_* bits) whose certificates
 * may call it, and asks rt_rpc_authorize before running a request. */
#define RT_RPC_ROLE_MASTER 0x1u
#define RT_RPC_ROLE_PS 0x2u
#define RT_RPC_ROLE_FE 0x4u
#define RT_RPC_ROLE_ADMIN 0x8u
/* The RT_RPC_ROLE_* bit of @conn's verified peer; 0 on a plain connection
 * (no TLS) or while down. */
unsigned rt_rpc_conn_role(const struct rt_rpc_conn *conn);
/* 0 when request @method (id @id) on @conn may run: a plain connection
 * (TLS off: --insecure-rpc allows everything, as before), an admin
 * certificate, or a peer whose role is in @allowed. Otherwise answers the
 * request RT_EPERM (naming method and role; a one-way request gets no
 * answer), warns (at most once a second per process, with how many were
 * refused meanwhile; rt_rpc_refused_calls counts them all) and returns
 * RT_EPERM: the caller drops the request. */
int rt_rpc_authorize(struct rt_rpc_conn *conn,
                     uint32_t method,
                     uint64_t id,
                     unsigned allowed);
/* Requests refused by rt_rpc_authorize since start (all threads). */
uint64_t rt_rpc_refused_calls(void);
/* Appends both counters to a Prometheus text page:
 * rt_rpc_tls_refused_total and rt_rpc_refused_calls_total. */
struct rt_buf;
void rt_rpc_metrics(struct rt_buf *b);

/* Reference counting for server-side connections held across async work.
 * A conn stays valid (but maybe closed) until its last unref. */
void rt_rpc_conn_ref(struct rt_rpc_conn *conn);
void rt_rpc_conn_unref(struct rt_rpc_conn *conn);
/* @on != 0: calls on @conn that fail because the connection is down or
 * dropped complete with RT_ENOTSENT when their request was never written
 * to the socket (see rt_rpc_reply_cb), so the caller may send them again
 * without risking a second execution. Off by default: such calls complete
 * with RT_ENOCONN, as callers written before this status expect. Takes
 * effect for calls that fail from now on. */
void rt_rpc_conn_report_unsent(struct rt_rpc_conn *conn, int on);
int rt_rpc_conn_is_up(const struct rt_rpc_conn *conn);
/* "ip:port" of the peer (empty when down). Valid while the conn is. */
const char *rt_rpc_conn_peer(const struct rt_rpc_conn *conn);
/* One user pointer per connection. */
void rt_rpc_conn_set_data(struct rt_rpc_conn *conn, void *data);
void *rt_rpc_conn_data(const struct rt_rpc_conn *conn);
/* Closes this connection (server side: for good; client side: it will
 * reconnect). */
void rt_rpc_conn_close(struct rt_rpc_conn *conn);

#endif
