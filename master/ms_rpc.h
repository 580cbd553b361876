/* RPC service of the master: one handler per method of the "master" groups
 * in proto/rt.proto (partition servers register and heartbeat; front ends
 * say FE_HELLO, read the map and create, delete, list and get tables,
 * ACLs and service properties).
 *
 * The handlers change the catalog and the cluster state (ms_cluster.h)
 * and tell the balancer (ms_balance.h) about registrations, heartbeats
 * and new ranges, and the replication glue (ms_repl.h) about
 * registrations, heartbeats, closed partition-server connections, tables
 * created or deleted and ISR_CHANGE requests. The owner (ms_master.c) passes an
 * ms_rpc as the user data of rt_rpc_server_start() with these two callbacks.
 *
 * Thread: loop thread only. Both pointers are borrowed. */
#ifndef MS_RPC_H
#define MS_RPC_H

#include <stddef.h>
#include <stdint.h>

#include "rt_rpc.h"

struct ms_balance;
struct ms_cluster;
struct ms_repl;

struct ms_rpc
{
    struct ms_cluster *cl;
    struct ms_balance *bal;
    struct ms_repl *repl; /* failover of replicated ranges */
};

/* rt_rpc_request_cb: dispatches one request (@ud is a struct ms_rpc). */
/* 0 when request @method may run on @conn: the caller's certificate role
 * is one the master's method table allows (rt_rpc_authorize; a plain
 * connection allows all). Otherwise the request has been answered
 * RT_EPERM and logged: drop it. ms_rpc_on_request checks it itself; the
 * node calls it before what it serves without the table (MASTER_HELLO,
 * the answers of a follower). */
int ms_rpc_authorize(struct rt_rpc_conn *conn, uint32_t method, uint64_t id);
void ms_rpc_on_request(struct rt_rpc_conn *conn,
                       uint32_t method,
                       uint64_t id,
                       const uint8_t *body,
                       size_t len,
                       void *ud);
/* rt_rpc_conn_cb: a connection came up or went down (@ud as above). */
void ms_rpc_on_conn(struct rt_rpc_conn *conn, int up, void *ud);

#endif
