/* Load balancing, the decision loop: the load model fed by heartbeats,
 * the policy asked on every tick, drains, and the operator's requests
 * (rtctl split / merge / move / transfer / drain). The decisions are
 * carried out by
 * ms_exec.h, which the balancer embeds; server state changes, hot/cool
 * marks and drains are recorded as events.
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
#include "ms_exec.h"
#include "ms_load.h"
#include "ms_policy.h"
#include "rt.pb-c.h"

struct ms_balance
{
    struct ms_cluster *cl;      /* borrowed */
    struct ms_load *load;       /* borrowed: per-range load and history */
    struct ms_events *events;   /* borrowed: decisions and outcomes */
    struct ms_policy *policy;   /* borrowed */
    struct ms_admin *admin;     /* borrowed, may be NULL */
    struct ms_trace_rec *trace; /* borrowed, may be NULL: the load trace
                                 * (heartbeats, policy calls, decisions,
                                 * trace start/stop requests) */
    struct ms_policy_config policy_cfg;
    uint32_t tick_ms;
    uint32_t rf;         /* --replication-factor: copies of a new range */
    uint32_t min_insync; /* --min-insync: live servers a create needs */

    struct ms_exec exec; /* carries the decisions out; owns the ops */
    uint64_t frame_ms;   /* last history frame (monotonic) */
    uint64_t n_hot;      /* hot marks by the policy */
};

/* After the catalog is open: range bookkeeping, and unsettled moves found
 * in the catalog become aborting operations (settled once both servers
 * are back; ms_exec_init()). @events may be NULL. New tables get @rf
 * copies (1..MS_REPLICAS_MAX) and need @min_insync (1..@rf) live servers
 * (ms_balance_place). */
void ms_balance_init(struct ms_balance *b,
                     struct ms_cluster *cl,
                     struct ms_load *load,
                     struct ms_events *events,
                     struct ms_policy *policy,
                     const struct ms_policy_config *policy_cfg,
                     uint32_t tick_ms,
                     uint32_t move_timeout_ms,
                     uint32_t rf,
                     uint32_t min_insync);
/* Frees what is left (after the loop ran dry); operators still waiting
 * get 503. */
void ms_balance_fini(struct ms_balance *b);
/* Every liveness tick: bookkeeping, abort retries, policy, drains,
 * history frame.
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
/* Where a new table's first range goes (docs/DESIGN-replication.md
 * §8.3): writes to @ids (room for MS_REPLICAS_MAX) min(rf, live) distinct
 * servers among the usable, non-draining ones, the primary first, and
 * returns how many. RF 1: the policy's choice (ms_policy_place), as
 * before replication; RF > 1: ms_place_replicas (distinct zones while
 * possible, least-loaded by replica count, then demand). *@live gets the
 * number of usable, non-draining servers. The caller refuses the create
 * when fewer than min_insync were chosen. */
size_t ms_balance_place(struct ms_balance *b, uint64_t *ids, size_t *live);
/* An operator's request (ms_admin_cb; @arg is the balancer). */
void ms_balance_admin(struct ms_admin_req *req, void *arg);
/* Where operator requests are answered from now on (borrowed; NULL
 * until ms_admin is attached). */
void ms_balance_set_admin(struct ms_balance *b, struct ms_admin *admin);

#endif
