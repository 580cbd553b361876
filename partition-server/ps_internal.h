/* Helpers shared between the partition server's modules (ps_server.c,
 * ps_master.c, ps_rpc.c); not for other components or tests.
 * Thread: loop thread only. */
#ifndef PS_INTERNAL_H
#define PS_INTERNAL_H

#include <stdint.h>

#include "ps_server.h"

/* Queues a META job persisting server id + owned ranges (a snapshot taken
 * now). When @conn is set, answers request @id with @method (Empty, or the
 * error) once the commit is durable; @conn is ref'd until then. */
void ps__server_persist(struct ps_server *ps,
                        struct rt_rpc_conn *conn,
                        uint64_t id,
                        uint32_t method);
/* Queues a drop of every key of @table_id; answers @conn/@id (if @conn)
 * when the table is empty. */
void ps__server_drop(struct ps_server *ps,
                     uint64_t table_id,
                     struct rt_rpc_conn *conn,
                     uint64_t id);

/* Starts a count scan (uv_queue_work) for every range with count_wanted
 * (new, or bounds changed); the result lands in its totals. */
void ps__server_count_wanted(struct ps_server *ps);
/* Marks every range of @table_id for a recount and starts the scans. */
void ps__server_recount_table(struct ps_server *ps, uint64_t table_id);

#endif
