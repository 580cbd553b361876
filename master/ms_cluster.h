/* Cluster state: what the master knows about the live cluster beyond the
 * durable catalog — the partition servers it has heard from (liveness,
 * connection, the figures of their last heartbeat), every accepted RPC
 * connection (peers) and the front ends subscribed to map updates, the
 * packed partition map built from the catalog, and the calls the master
 * makes to partition servers (ASSIGN_RANGES, DROP_TABLE, moves).
 *
 * It sits below the modules that act on the cluster (ms_rpc.c handles
 * requests, ms_balance.c decides, ms_exec.c carries out, ms_status.c
 * reports) and above the catalog. It never calls them: when the map or
 * anything else shown in the status changes it fires the change callback
 * its owner (ms_master.c) registered with ms_cluster_init().
 *
 * Thread: loop thread only. Ownership: the catalog is borrowed (it must
 * outlive the cluster); servers, peers and the packed map are owned and
 * released by ms_cluster_fini(). */
#ifndef MS_CLUSTER_H
#define MS_CLUSTER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ms_catalog.h"
#include "ms_util.h"
#include "rt.pb-c.h"
#include "rt_rpc.h"

/* Values match rt.Server.state. */
enum ms_server_state {
    MS_SERVER_UP = 1,
    MS_SERVER_DOWN = 2,
};

/* Runtime view of one partition server (the catalog keeps id -> addr). */
struct ms_server
{
    uint64_t id;
    enum ms_server_state state;
    bool seen;                /* registered or heartbeated since we started */
    uint64_t last_hb_ms;      /* monotonic ms of the last register/heartbeat */
    struct rt_rpc_conn *conn; /* its connection (ref held), or NULL */
    uint32_t pending;         /* queued write ops at the last heartbeat */
    uint64_t max_server_eps;  /* its caps, from heartbeats (0 = none) */
    uint64_t max_range_eps;
    uint64_t reg_gen;    /* registrations since the master started */
    uint64_t move_ms;    /* when its last move ended (0 = never) */
    bool drain_reported; /* "drain done" event written */
};

/* What we know about one accepted connection (rt_rpc_conn_data). */
struct ms_peer
{
    struct rt_rpc_conn *conn; /* ref held */
    uint64_t server_id;       /* a partition server's conn; 0 otherwise */
    bool subscribed;          /* a front end that said FE_HELLO */
};

/* Something shown in the status changed (the map, a server, an
 * operation): the owner republishes. Never called re-entrantly from
 * ms_cluster_init(). */
typedef void (*ms_cluster_change_cb)(void *arg);

struct ms_cluster
{
    struct ms_catalog *cat;        /* borrowed */
    uint32_t heartbeat_timeout_ms; /* up -> down after this silence */
    uint32_t assign_timeout_ms;    /* default ASSIGN_RANGES timeout */
    bool stopping;                 /* set by the owner on shutdown */

    struct ms_vec servers;     /* struct ms_server *, by id */
    struct ms_vec peers;       /* struct ms_peer *, every live conn's */
    struct ms_vec subscribers; /* struct ms_peer *, FE_HELLO'd */

    /* Packed rt.Map, rebuilt lazily after each change. */
    uint8_t *map_buf;
    size_t map_len;
    bool map_valid;

    size_t inflight; /* our calls to partition servers not yet answered */
    uint64_t rpc_requests;
    uint64_t map_pushes;

    ms_cluster_change_cb change_cb;
    void *change_arg;
};

/* Sets up an empty cluster over @cat (borrowed). Every server the catalog
 * knows starts down until it registers again. @change_cb (may be NULL)
 * fires on every ms_cluster_changed() / ms_cluster_map_changed(). */
void ms_cluster_init(struct ms_cluster *cl,
                     struct ms_catalog *cat,
                     uint32_t heartbeat_timeout_ms,
                     uint32_t assign_timeout_ms,
                     ms_cluster_change_cb change_cb,
                     void *change_arg);
/* Drops every server, peer and subscriber (and their connection refs) and
 * the packed map. Calls still in flight must have completed. */
void ms_cluster_fini(struct ms_cluster *cl);

/* ---- servers ---- */

/* The server @id, or NULL. Valid until the next ms_cluster_server_get(). */
struct ms_server *ms_cluster_server_find(struct ms_cluster *cl, uint64_t id);
/* The server @id, created (down, never seen) when unknown. */
struct ms_server *ms_cluster_server_get(struct ms_cluster *cl, uint64_t id);
/* Makes @peer's connection the server's (and detaches it from any other
 * server it spoke for; the newest connection wins). */
void ms_cluster_server_attach(struct ms_cluster *cl,
                              struct ms_server *s,
                              struct ms_peer *peer);
/* Marks @s alive now; returns true when it went from down to up. */
bool ms_cluster_server_alive(struct ms_cluster *cl, struct ms_server *s);
/* Up, connected and the connection is up: calls to it can be made. */
bool ms_cluster_server_usable(struct ms_cluster *cl, uint64_t id);
/* counts[i] = ranges whose primary (owner) is cl->servers.v[i] (@counts
 * has cl->servers.n entries). */
void ms_cluster_range_counts(struct ms_cluster *cl, size_t *counts);

/* ---- peers ---- */

/* A new accepted connection: its peer record (rt_rpc_conn_data). */
struct ms_peer *ms_cluster_peer_new(struct ms_cluster *cl,
                                    struct rt_rpc_conn *conn);
/* @peer's connection closed: unsubscribes it, detaches it from its server
 * and frees @peer. */
void ms_cluster_peer_gone(struct ms_cluster *cl, struct ms_peer *peer);
/* @peer (a front end) gets MAP_UPDATE pushes from now on (idempotent). */
void ms_cluster_subscribe(struct ms_cluster *cl, struct ms_peer *peer);

/* ---- the map ---- */

/* Something shown in the status changed (not the map): fires the change
 * callback. */
void ms_cluster_changed(struct ms_cluster *cl);
/* Something in the map changed (already in the catalog): drop the cached
 * Map and fire the change callback. @bump: also raise the map version
 * durably (changes the catalog does not version itself, e.g. liveness). */
void ms_cluster_map_changed(struct ms_cluster *cl, bool bump);
/* Sends MAP_UPDATE (one-way) to every subscribed front end. */
void ms_cluster_map_push(struct ms_cluster *cl);
/* The packed current rt.Map (owned by @cl, valid until the next change). */
void ms_cluster_map_packed(struct ms_cluster *cl,
                           const uint8_t **buf,
                           size_t *len);
/* A server's assignment as rt.RegisterResp / rt.Assignment carry it. */
struct ms_assignment
{
    Rt__Range **ranges; /* n_ranges entries, pointing into rv */
    size_t n_ranges;
    Rt__Server **peers; /* n_peers entries, pointing into sv */
    size_t n_peers;
    Rt__Range *rv;
    Rt__Server *sv;
};

/* Fills @a with @server_id's assignment: every range whose replica set
 * names it, any role (an RF 1 range names only its owner), in id order,
 * and as peers every server those ranges' replica sets name (itself
 * included), in id order, with addr, zone and up/down state. The arrays
 * are malloc'd (ms_assignment_free); strings borrow the catalog and stay
 * valid until its next change. */
void ms_cluster_assignment(struct ms_cluster *cl,
                           uint64_t server_id,
                           struct ms_assignment *a);
void ms_assignment_free(struct ms_assignment *a);
/* ASSIGN_RANGES (not waited for) to every other server sharing a replica
 * set with @server_id: its address or state changed, and their peers[]
 * carry it. Unconnected servers learn it from their next heartbeat. */
void ms_cluster_assign_push_peers(struct ms_cluster *cl, uint64_t server_id);

/* ---- calls to partition servers ---- */

/* Calls @method with @msg on @server_id's connection; failures are
 * logged. Returns 0 (then @cb, which may be NULL, fires exactly once with
 * the reply status) or RT_ENOCONN when the server is not connected (then
 * @cb never fires). @what names the call in logs (static string). */
int ms_cluster_call(struct ms_cluster *cl,
                    uint64_t server_id,
                    uint32_t method,
                    const char *what,
                    const ProtobufCMessage *msg,
                    uint32_t timeout_ms,
                    rt_rpc_reply_cb cb,
                    void *arg);
/* ASSIGN_RANGES with @server_id's full assignment; as ms_cluster_call.
 * @timeout_ms 0 = the configured assign timeout. */
int ms_cluster_assign_push(struct ms_cluster *cl,
                           uint64_t server_id,
                           uint32_t timeout_ms,
                           rt_rpc_reply_cb cb,
                           void *arg);

#endif
