/* Internals shared by the master's modules (ms_master.c, ms_rpc.c,
 * ms_status.c). Not part of any contract outside master/.
 * Thread: loop thread only. */
#ifndef MS_INTERNAL_H
#define MS_INTERNAL_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "ms_admin.h"
#include "ms_catalog.h"
#include "ms_events.h"
#include "ms_load.h"
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
    uint64_t last_hb_ms;      /* monotonic ms of the last register/heartbeat */
    struct rt_rpc_conn *conn; /* its connection (ref held), or NULL */
    uint32_t pending;         /* queued write ops at the last heartbeat */
    uint64_t max_server_eps;  /* its caps, from heartbeats (0 = none) */
    uint64_t max_range_eps;
    uint64_t reg_gen;    /* registrations since the master started */
    uint64_t move_ms;    /* when its last move ended (0 = never) */
    bool drain_reported; /* "drain done" event written */
};

/* Balancing bookkeeping of one range id (ms_balance.c). */
struct ms_rmeta
{
    uint64_t range_id;
    uint64_t born_ms;  /* the id appeared (monotonic) */
    uint64_t split_ms; /* last split involving it or its parents */
    uint64_t move_ms;  /* its last move ended (0 = never) */
};

enum ms_op_kind { MS_OP_SPLIT, MS_OP_MERGE, MS_OP_MOVE };

/* Move states (DESIGN-moves.md): COPYING = recorded, MOVE_OUT sent;
 * ASSIGNING = committed, waiting for the target's ASSIGN_RANGES reply;
 * ABORTING = failed before the commit, MOVE_ABORT to both ends until
 * each acknowledged. */
enum ms_move_state { MS_MOVE_COPYING, MS_MOVE_ASSIGNING, MS_MOVE_ABORTING };

/* One split, merge or move being carried out (ms_balance.c). Freed when
 * finished and no call of ours for it is in flight. */
struct ms_op
{
    struct ms_master *m;
    enum ms_op_kind kind;
    const char *origin; /* "policy", "manual", "drain", "restart" */
    uint64_t t0_ms;     /* monotonic start */
    uint64_t range_id;
    uint64_t range_id2; /* merge: right-hand range */
    uint64_t server_id; /* owner / move source */
    uint64_t dst;       /* move target */
    uint64_t new_ids[2];
    json_t *ev;               /* the event, filled as it goes */
    struct ms_admin_req *req; /* operator waiting for it, or NULL */
    unsigned calls;           /* our RPCs for it in flight */
    bool finished;            /* nothing more to do: freed once calls
                               * is 0 */
    bool reported;            /* its event is written */
    /* moves */
    uint64_t move_id;
    uint64_t new_epoch;
    enum ms_move_state state;
    uint64_t src_reg_gen;
    uint64_t out_done_ms;      /* MOVE_OUT answered (monotonic) */
    uint64_t frozen_ms;        /* from MoveResp */
    bool s_settled, t_settled; /* aborting: each end acknowledged */
    bool s_inflight, t_inflight;
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
    struct ms_load *load;     /* per-range load model and history */
    struct ms_events *events; /* decisions and outcomes */
    struct ms_admin *admin;   /* borrowed, may be NULL */
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

    /* load balancing (ms_balance.c) */
    uint64_t start_ms;
    uint64_t frame_ms;   /* last history frame (monotonic) */
    struct ms_vec ops;   /* struct ms_op *, in flight */
    struct ms_vec rmeta; /* struct ms_rmeta *, by range id */
    uint64_t n_splits, n_merges, n_moves, n_aborts, n_hot;
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
/* The policy's view of the cluster (ms_balance.c); release with
 * ms__cluster_view_free(). */
void ms__cluster_view(struct ms_master *m, struct ms_cluster_view *view);
void ms__cluster_view_free(struct ms_cluster_view *view);
void ms__status_refresh(struct ms_master *m);
/* Rebuilds and publishes the history document (after a new frame). */
void ms__status_history(struct ms_master *m);

/* ---- ms_balance.c ---- */
/* After the catalog is open: range bookkeeping, unsettled moves to abort. */
void ms__balance_init(struct ms_master *m);
/* Frees what is left (after the loop ran dry). */
void ms__balance_fini(struct ms_master *m);
/* Every liveness tick: history frame, policy, drains, abort retries. */
void ms__balance_tick(struct ms_master *m);
/* A server registered (its reply lists its ranges: settles aborts). */
void ms__balance_on_register(struct ms_master *m, struct ms_server *s);
/* A server went up or down (event). */
void ms__balance_server_state(struct ms_master *m,
                              struct ms_server *s,
                              const char *why);
/* A heartbeat's loads. */
void ms__balance_loads(struct ms_master *m,
                       struct ms_server *s,
                       const Rt__HeartbeatReq *req);
/* New range created by CREATE_TABLE. */
void ms__balance_range_created(struct ms_master *m, uint64_t range_id);
/* An operator's request from the HTTP thread (ms_admin_cb). */
void ms__balance_admin(struct ms_admin_req *req, void *arg);
/* Moves in flight, and whether @range_id is busy. */
unsigned ms__balance_moves(struct ms_master *m);
bool ms__balance_busy(struct ms_master *m, uint64_t range_id);
/* Records @e (taken) as an event; returns its seq (0 without events). */
uint64_t ms__event(struct ms_master *m, json_t *e);
/* {"demand":..,"ent_s":..,...} of a range's load (NULL load: zeros). */
json_t *ms__load_json(const struct ms_load_range *l, bool samples);

/* ---- ms_rpc.c ---- */
void ms__on_request(struct rt_rpc_conn *conn,
                    uint32_t method,
                    uint64_t id,
                    const uint8_t *body,
                    size_t len,
                    void *ud);
void ms__on_conn(struct rt_rpc_conn *conn, int up, void *ud);

#endif
