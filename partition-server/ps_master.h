/* Master link: connect, register, heartbeat, and the master's
 * ASSIGN_RANGES / DROP_TABLE requests (docs/DESIGN.md §2, §4). The link
 * owns the hb_timer, master and registered fields of struct ps_server.
 *
 * Thread: loop thread only. */
#ifndef PS_MASTER_H
#define PS_MASTER_H

#include <stddef.h>
#include <stdint.h>

#include "ps_state.h"
#include "rt_rpc.h"

/* Heartbeat period when cfg.heartbeat_ms is 0 (--heartbeat-ms;
 * DESIGN-replication.md §12.2): the master's --failover-after-ms (1500)
 * then spans three missed heartbeats before it suspects a primary. */
#define PS_HEARTBEAT_MS 500
/* Timeout of register/heartbeat calls to the master. */
#define PS_MASTER_CALL_MS 3000

/* Connects to cfg.master (one master's RPC address, or a comma-separated
 * list of them: the link follows the leader, rt_masters.h) and starts the
 * heartbeat timer. Requests the
 * master sends on the link go to @on_request (with @ps as its ud): the
 * owner passes its dispatcher (ps_rpc_on_request), which hands
 * ASSIGN_RANGES and DROP_TABLE back to the functions below. Returns 0 or
 * a libuv / RT_E* error (RT_EINVAL: a bad address in the list); on error
 * ps_master_stop() cleans up. */
int ps_master_start(struct ps_server *ps, rt_rpc_request_cb on_request);
/* Stops the timer and closes the link. Idempotent. */
void ps_master_stop(struct ps_server *ps);
/* ASSIGN_RANGES: applies the assignment (unless older than the one
 * applied) and answers once it is durable. @body is borrowed. */
void ps_master_on_assign(struct ps_server *ps,
                         struct rt_rpc_conn *conn,
                         uint64_t id,
                         const uint8_t *body,
                         size_t len);
/* DROP_TABLE: answers once every key of the table is gone. */
void ps_master_on_drop(struct ps_server *ps,
                       struct rt_rpc_conn *conn,
                       uint64_t id,
                       const uint8_t *body,
                       size_t len);

#endif
