/* Internals shared by the master's modules (ms_master.c, ms_rpc.c,
 * ms_status.c). Not part of any contract outside master/.
 * Thread: loop thread only. */
#ifndef MS_INTERNAL_H
#define MS_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "ms_catalog.h"
#include "ms_master.h"
#include "ms_policy.h"
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
    uint64_t last_hb_ms;      /* ms_now_ms() of the last register/heartbeat */
    struct rt_rpc_conn *conn; /* its connection (ref held), or NULL */
    struct ms_range_load *loads; /* latest heartbeat's loads (for policy) */
    size_t nloads;
    uint32_t pending;
};

/* What we know about one accepted connection (rt_rpc_conn_data). */
struct ms_peer
{
    struct ms_master *m;
    struct rt_rpc_conn *conn;
    uint64_t server_id; /* a partition server's conn; 0 otherwise */
    bool subscribed;    /* a front end that said FE_HELLO */
};

struct ms_master
{
    uv_loop_t *loop;
    struct ms_master_config cfg;
    struct ms_catalog *cat;
    struct ms_policy policy;
    struct rt_rpc_server *rpc;
    uv_timer_t tick;
    bool tick_open;
    bool stopping;

    struct ms_vec servers;     /* struct ms_server *, by id */
    struct ms_vec peers;       /* struct ms_peer *, every live conn's */
    struct ms_vec subscribers; /* struct ms_peer *, FE_HELLO'd */

    /* Packed rt.Map, rebuilt lazily after each change. */
    uint8_t *map_buf;
    size_t map_len;
    bool map_valid;

    struct ms_status *status; /* borrowed, may be NULL */
    uint64_t snapshot_ms;     /* when the status was last published */

    size_t inflight; /* our calls to partition servers not yet answered */
    uint64_t rpc_requests;
    uint64_t map_pushes;
};

/* ---- ms_master.c ---- */
struct ms_server *ms__server_find(struct ms_master *m, uint64_t id);
struct ms_server *ms__server_get(struct ms_master *m, uint64_t id);
/* Makes @conn the server's connection (and detaches it from any other). */
void ms__server_attach(struct ms_master *m,
                       struct ms_server *s,
                       struct ms_peer *peer);
/* Marks @s alive now; returns true when it went from down to up. */
bool ms__server_alive(struct ms_master *m, struct ms_server *s);

/* Something in the map changed (already in the catalog): drop the cached
 * Map and republish the status. @bump: also raise the map version durably
 * (changes the catalog does not version itself, e.g. liveness). */
void ms__map_changed(struct ms_master *m, bool bump);
/* Sends MAP_UPDATE (one-way) to every subscribed front end. */
void ms__map_push(struct ms_master *m);
/* The packed current rt.Map (owned by @m, valid until the next change). */
void ms__map_packed(struct ms_master *m, const uint8_t **buf, size_t *len);
/* Fills an rt.RegisterResp/Assignment range list for @server_id. The
 * returned arrays are malloc'd (free both); strings borrow the catalog. */
size_t ms__assignment(struct ms_master *m,
                      uint64_t server_id,
                      Rt__Range **ranges,
                      Rt__Range ***ptrs);
/* Calls @method with @msg on @server_id's connection; failures are
 * logged. Returns 0 (then @cb, which may be NULL, fires exactly once with
 * the reply status) or RT_ENOCONN when the server is not connected (then
 * @cb never fires). @what names the call in logs (static string). */
int ms__server_call(struct ms_master *m,
                    uint64_t server_id,
                    uint32_t method,
                    const char *what,
                    const ProtobufCMessage *msg,
                    uint32_t timeout_ms,
                    rt_rpc_reply_cb cb,
                    void *arg);
/* ASSIGN_RANGES with @server_id's full assignment; as ms__server_call.
 * @timeout_ms 0 = the configured assign timeout. */
int ms__assign_push(struct ms_master *m,
                    uint64_t server_id,
                    uint32_t timeout_ms,
                    rt_rpc_reply_cb cb,
                    void *arg);
/* counts[i] = ranges assigned to m->servers.v[i] (@counts has
 * m->servers.n entries). */
void ms__range_counts(struct ms_master *m, size_t *counts);
/* The policy's view of the cluster; free with free(view->servers). */
void ms__cluster_view(struct ms_master *m, struct ms_cluster_view *view);
void ms__status_refresh(struct ms_master *m);

/* ---- ms_rpc.c ---- */
void ms__on_request(struct rt_rpc_conn *conn,
                    uint32_t method,
                    uint64_t id,
                    const uint8_t *body,
                    size_t len,
                    void *ud);
void ms__on_conn(struct rt_rpc_conn *conn, int up, void *ud);

#endif
