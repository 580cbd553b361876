/* Load balancing: the load model fed by heartbeats, the policy asked on
 * every tick, drains, and the splits, merges and moves that follow from
 * them or from the operator (rtctl split / merge / move / drain), each
 * recorded as an event.
 *
 * It acts on the cluster through ms_cluster.h and the catalog, and never
 * calls the modules above it (ms_rpc.c, ms_status.c, ms_master.c): what
 * they must know it reports through ms_cluster_changed() or its return
 * values.
 *
 * Thread: loop thread only. Ownership: everything passed to
 * ms_balance_init() is borrowed and must outlive the balancer; operations
 * and range bookkeeping are owned and released by ms_balance_fini(). */
#ifndef MS_BALANCE_H
#define MS_BALANCE_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "ms_admin.h"
#include "ms_cluster.h"
#include "ms_events.h"
#include "ms_load.h"
#include "ms_policy.h"
#include "ms_util.h"
#include "rt.pb-c.h"

/* Balancing bookkeeping of one range id. */
struct ms_rmeta
{
    uint64_t range_id;
    uint64_t born_ms;  /* the id appeared (monotonic) */
    uint64_t split_ms; /* last split involving it or its parents */
    uint64_t move_ms;  /* its last move ended (0 = never) */
};

enum ms_op_kind { MS_OP_SPLIT, MS_OP_MERGE, MS_OP_MOVE };

/* Move states (docs/DESIGN-moves.md): COPYING = recorded, MOVE_OUT sent;
 * ASSIGNING = committed, waiting for the target's ASSIGN_RANGES reply;
 * ABORTING = failed before the commit, MOVE_ABORT to both ends until
 * each acknowledged. */
enum ms_move_state { MS_MOVE_COPYING, MS_MOVE_ASSIGNING, MS_MOVE_ABORTING };

struct ms_balance;

/* One split, merge or move being carried out. Freed when finished and no
 * call of ours for it is in flight. */
struct ms_op
{
    struct ms_balance *b;
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

struct ms_balance
{
    struct ms_cluster *cl;    /* borrowed */
    struct ms_load *load;     /* borrowed: per-range load and history */
    struct ms_events *events; /* borrowed: decisions and outcomes */
    struct ms_policy *policy; /* borrowed */
    struct ms_admin *admin;   /* borrowed, may be NULL */
    struct ms_policy_config policy_cfg;
    uint32_t tick_ms;
    uint32_t move_timeout_ms; /* MOVE_OUT for an empty range; 0 = 30000 */

    uint64_t start_ms;
    uint64_t frame_ms;   /* last history frame (monotonic) */
    struct ms_vec ops;   /* struct ms_op *, in flight */
    struct ms_vec rmeta; /* struct ms_rmeta *, by range id */
    uint64_t n_splits, n_merges, n_moves, n_aborts, n_hot;
};

/* After the catalog is open: range bookkeeping, and unsettled moves found
 * in the catalog become aborting operations (settled once both servers
 * are back). @events may be NULL. */
void ms_balance_init(struct ms_balance *b,
                     struct ms_cluster *cl,
                     struct ms_load *load,
                     struct ms_events *events,
                     struct ms_policy *policy,
                     const struct ms_policy_config *policy_cfg,
                     uint32_t tick_ms,
                     uint32_t move_timeout_ms);
/* Frees what is left (after the loop ran dry); operators still waiting
 * get 503. */
void ms_balance_fini(struct ms_balance *b);
/* Every liveness tick: abort retries, policy, drains, history frame.
 * Returns true when a new history frame was recorded. */
bool ms_balance_tick(struct ms_balance *b);
/* A server registered (its reply lists its ranges: settles aborts). */
void ms_balance_on_register(struct ms_balance *b, struct ms_server *s);
/* A server went up or down (event). */
void ms_balance_server_state(struct ms_balance *b,
                             struct ms_server *s,
                             const char *why);
/* A heartbeat's loads. */
void ms_balance_loads(struct ms_balance *b,
                      struct ms_server *s,
                      const Rt__HeartbeatReq *req);
/* New range created by CREATE_TABLE. */
void ms_balance_range_created(struct ms_balance *b, uint64_t range_id);
/* The server a new table's range goes to (the policy's choice), or 0 when
 * no server is usable. */
uint64_t ms_balance_place(struct ms_balance *b);
/* An operator's request (ms_admin_cb; @arg is the balancer). */
void ms_balance_admin(struct ms_admin_req *req, void *arg);
/* Moves in flight, and whether @range_id is busy. */
unsigned ms_balance_moves(struct ms_balance *b);
bool ms_balance_busy(struct ms_balance *b, uint64_t range_id);
/* Records @e (taken) as an event; returns its seq (0 without events). */
uint64_t ms_balance_event(struct ms_balance *b, json_t *e);
/* {"demand":..,"ent_s":..,...} of a range's load (NULL load: zeros). */
json_t *ms_balance_load_json(const struct ms_load_range *l, bool samples);

#endif
