/* RPC handlers: the request dispatcher of every connection, the front
 * ends' (the listener) and the master's (the master link's client). It
 * serves ENTITY_WRITE / ENTITY_GET / ENTITY_SCAN / PING itself and hands
 * ASSIGN_RANGES / DROP_TABLE to ps_master and MOVE_* / MIGRATE_* to
 * ps_move.
 *
 * Thread: loop thread only. */
#ifndef PS_RPC_H
#define PS_RPC_H

#include <stddef.h>
#include <stdint.h>

#include "ps_state.h"
#include "rt_rpc.h"

/* Most ops one ENTITY_WRITE may carry (a $batch has at most 100). */
#define PS_MAX_OPS_PER_WRITE 1000

/* An rt_rpc request callback: @ud is the struct ps_server. @body is
 * borrowed for the call; replies go out on @conn, now or later (the
 * connection is ref'd while a reply is pending). While the server is
 * stopping every request is answered RT_EBUSY. */
void ps_rpc_on_request(struct rt_rpc_conn *conn,
                       uint32_t method,
                       uint64_t id,
                       const uint8_t *body,
                       size_t len,
                       void *ud);

#endif
