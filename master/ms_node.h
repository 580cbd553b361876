/* One member of a replicated master (docs/DESIGN-master-ha.md): the Raft
 * instance (ms_raft.h), the catalog as its state machine (ms_fsm.h), the
 * RPC listener, and — while this member is the acting leader — the master
 * session (ms_master.h) that does everything a lone master did.
 *
 * Happy path: start -> the catalog view is rebuilt from the Raft snapshot
 * and log (every start; the LMDB under DATA/catalog is only a view) -> a
 * follower answers RPCs with RT_ENOTLEADER (+ who leads) and HTTP with 307
 * -> elected: a Raft barrier (every earlier entry applied here), then
 * LEADER_START (master_term above every earlier one) and the session
 * starts; its catalog mutations are applied at once and proposed
 * (ms_catalog_set_proposer), and rt_rpc holds every frame until the commit
 * index reaches what was proposed when it was queued (§2.7).
 * Failure modes: leadership lost, a proposal failed, or a stall of the loop
 * longer than half an election timeout with other voters: the member
 * re-executes its own binary (same PID, same ports) and comes back as a
 * follower with a view rebuilt from what was committed. A fatal apply
 * error exits (ms_raft.h).
 *
 * Thread: the loop. */
#ifndef MS_NODE_H
#define MS_NODE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "ms_master.h"
#include "ms_raft.h"

struct ms_admin;
struct ms_events;
struct ms_node;
struct ms_status;

struct ms_node_config
{
    /* The leader session's configuration; data_dir and the RPC listener
     * are the member's (cat, events, no_listen are set here). */
    struct ms_master_config master;
    /* This member's HTTP "host:port" as others reach it (published in the
     * masters list, NotLeader hints and 307 redirects; "" = none), and the
     * one bound (re-execution binds it again; NULL = http_addr). */
    const char *http_addr;
    const char *http_listen;
    /* The RPC "host:port" others dial (NULL or "" = the bound host and
     * port). */
    const char *rpc_advertise;
    uint64_t id; /* Raft id, >= 1 */
    const char *raft_listen;
    const char *raft_advertise;       /* NULL or "" = raft_listen */
    const struct ms_raft_peer *peers; /* initial voters (empty: alone) */
    size_t npeers;
    bool bootstrap, join;
    unsigned election_ms, heartbeat_ms;
    unsigned snapshot_threshold, snapshot_trailing;
    /* Cluster credentials (borrowed, outlive the member): raft traffic over
     * mutual TLS between masters (ms_rtls.h); NULL = plain TCP. */
    struct rt_tls *tls;
    /* The command line, to re-execute with (borrowed for the process's
     * life). */
    int argc;
    char **argv;
};

/* Starts the member: the view, the listener, Raft. @events, @status and
 * @admin are borrowed and outlive the member. Errors as ms_raft_start()
 * and ms_master_start(), or a libuv error from listening; @errmsg says
 * why. */
int ms_node_start(uv_loop_t *loop,
                  const struct ms_node_config *cfg,
                  struct ms_events *events,
                  struct ms_status *status,
                  struct ms_admin *admin,
                  struct ms_node **out,
                  char *errmsg);
int ms_node_rpc_port(const struct ms_node *n);
/* The raft transport address actually bound. */
const char *ms_node_raft_addr(const struct ms_node *n);
/* The RPC address published to the others (advertised, else bound). */
const char *ms_node_rpc_addr(const struct ms_node *n);
/* Begins shutdown (idempotent); then run the loop dry and destroy. */
void ms_node_stop(struct ms_node *n);
void ms_node_destroy(struct ms_node *n);

#endif
