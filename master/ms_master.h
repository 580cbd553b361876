/* Master core: rt-master as one object — the catalog, the partition map,
 * partition-server liveness, load balancing and the RPC service.
 *
 * It owns an rt_rpc_server on the loop it is started on, one liveness
 * timer, the catalog (ms_catalog.h), the load model (ms_load.h), the
 * event log (ms_events.h), the policy (ms_policy.h), the cluster state
 * (ms_cluster.h), the balancer (ms_balance.h), the replication glue
 * that fails replicated ranges over (ms_repl.h) and the RPC handlers
 * (ms_rpc.h). Partition servers register and heartbeat; front ends say
 * FE_HELLO and get MAP_UPDATE pushed on every map change; table
 * create/delete/list/get are answered from the catalog.
 *
 * Thread: everything runs on the loop thread. The only thing another
 * thread may see is the status snapshot it publishes into an ms_status
 * (ms_status.h), which has its own lock.
 *
 * Lifetime: ms_master_start() -> uv_run() ... ms_master_stop() (closes the
 * listener, every connection and the timer; pending calls complete with
 * RT_ECANCELED on later ticks) -> uv_run() returns -> ms_master_destroy(). */
#ifndef MS_MASTER_H
#define MS_MASTER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "ms_policy.h"
#include "ms_trace_rec.h"

struct ms_admin;
struct ms_master;
struct ms_status;

struct ms_master_config
{
    const char *data_dir; /* catalog directory (borrowed during start) */
    /* A member of a replicated master (ms_node.h) starts its leader session
     * on what it already holds: the catalog view and the event log are
     * borrowed (not opened, not closed), and with no_listen the master
     * serves requests handed to it (ms_master_rpc()) on the member's
     * listener instead of opening its own. NULL / false: as alone. */
    struct ms_catalog *cat;
    struct ms_events *events;
    bool no_listen;
    const char *listen_host;       /* RPC listener */
    int listen_port;               /* 0 = ephemeral, see ms_master_rpc_port() */
    uint32_t heartbeat_timeout_ms; /* up -> down after this silence */
    uint32_t tick_ms;              /* liveness check period; 0 = 500 */
    uint32_t assign_timeout_ms;    /* wait for ASSIGN_RANGES; 0 = 2000 */
    uint64_t delete_grace_ms;      /* deleted names stay taken this long
                                    * (409 TableBeingDeleted); 0 = none */
    const char *policy;            /* ms_policy_names(); NULL = "default"
                                    * (borrowed during start) */
    struct ms_policy_config policy_cfg; /* all zero = the defaults
                                         * (opts aside: borrowed during
                                         * start) */
    uint32_t load_tau_ms;        /* load smoothing; 0 = MS_LOAD_DEFAULT_TAU */
    uint32_t move_timeout_ms;    /* MOVE_OUT timeout for an empty range; it
                                  * grows with the range's size; 0 = 30000 */
    size_t events_cap;           /* events kept in memory; 0 = 10000 */
    uint32_t replication_factor; /* copies of a new table's range,
                                  * 1..MS_REPLICAS_MAX; 0 = 1 */
    uint32_t min_insync;         /* 1..replication_factor; 0 = min(2, RF) */
    /* Failover of replicated ranges (ms_repl.h; 0 = the default). */
    uint64_t failover_after_ms;  /* 1500 */
    uint64_t reconnect_grace_ms; /* 300 */
    uint64_t seal_wait_ms;       /* 200 */
    uint64_t lease_ms;           /* 1500: the partition servers' lease */
    uint64_t repl_resend_ms;     /* SEAL / ASSIGN resend period: 250 */
    uint64_t learner_timeout_ms; /* 30000 */
    /* Re-replication (ms_rerepl.h; 0 = the default). */
    uint64_t rereplicate_after_ms; /* 60000 */
    uint64_t learner_min_mb_per_s; /* 20: a large range's learner waits more */
    uint32_t max_rereplications;   /* 2 */
    /* Load trace recorder (ms_trace_rec.h), borrowed, may be NULL: this
     * session records into it while it runs. */
    struct ms_trace_rec *trace;
    uint64_t master_id; /* for the trace header (0: a single master) */
};

/* Opens the catalog and the event log, starts listening and the liveness
 * timer (which also runs the policy). Servers known from the catalog start
 * "down" until they register; unsettled moves found in the catalog are
 * aborted once their servers are back. On 0 *out belongs to the caller.
 * Errors: RT_EINVAL (unknown policy, replication factor or min-insync
 * out of range), catalog errors (RT_EIO,
 * RT_ECORRUPT), or a libuv error from listening; @errmsg (RT_ERRMSG_SIZE
 * bytes) says why. */
int ms_master_start(uv_loop_t *loop,
                    const struct ms_master_config *cfg,
                    struct ms_master **out,
                    char *errmsg);
/* The RPC port actually bound (-1 with no_listen). */
int ms_master_rpc_port(const struct ms_master *m);
/* The handlers' context: pass it as @ud to ms_rpc_on_request() and
 * ms_rpc_on_conn() (ms_rpc.h) for requests of a listener the master does
 * not own (no_listen). */
struct ms_rpc *ms_master_rpc(struct ms_master *m);
/* Where to publish the status snapshot (JSON + metrics) from now on; it is
 * rebuilt at once, on every state change and at least every second.
 * @st is borrowed and must outlive the master (or be unset with NULL). */
void ms_master_set_status(struct ms_master *m, struct ms_status *st);
/* Where operator requests (POST /api/split, ...) come from from now on
 * (ms_admin.h); @adm is borrowed and must outlive the master. Returns 0
 * or a libuv error. */
int ms_master_set_admin(struct ms_master *m, struct ms_admin *adm);
/* The same for a member that attached @adm itself (ms_node.c): operator
 * requests reach the master through ms_master_admin(); the master does
 * not detach @adm. */
void ms_master_use_admin(struct ms_master *m, struct ms_admin *adm);
struct ms_admin_req;
void ms_master_admin(struct ms_master *m, struct ms_admin_req *req);
/* The event log (GET /api/events reads it from the HTTP thread). Owned
 * by the master; valid until ms_master_destroy(). */
struct ms_events *ms_master_events(struct ms_master *m);
/* Begins shutdown (idempotent). */
void ms_master_stop(struct ms_master *m);
/* Frees everything; only after ms_master_stop() and once uv_run() has
 * returned (all handles closed). */
void ms_master_destroy(struct ms_master *m);

#endif
