/* Jobs: asynchronous operations on the server's state shared by the
 * server, the RPC handlers, the master link and the move files: persist
 * the owned ranges (the META job the move files extend), drop a table,
 * count the entities of ranges, and answer a request held across a job.
 *
 * Thread: loop thread only. The META and DROP jobs run on the writer
 * thread (ps_writer.h), count scans on the libuv threadpool, counted in
 * ps->work_inflight (ps_server_close waits for them). */
#ifndef PS_JOBS_H
#define PS_JOBS_H

#include <stdint.h>

#include "ps_state.h"
#include "rt_rpc.h"

/* Replies 0 with an Empty body. */
void ps_jobs_reply_empty(struct rt_rpc_conn *conn,
                         uint64_t id,
                         uint32_t method);
/* Ends a request held across a job: when @conn is set, answers @id with
 * @method (Empty when @status is 0, else Error{@why}) and drops the
 * reference the job held on @conn. */
void ps_jobs_answer(struct rt_rpc_conn *conn,
                    uint64_t id,
                    uint32_t method,
                    int status,
                    const char *why);
/* Makes @job a META job of the server id, the owned ranges, packed now
 * into @blob (empty; the job points into it, so it must stay until the
 * job calls back), and the highest master term seen now (stored unless a
 * higher one already is). */
void ps_jobs_meta_init(struct ps_server *ps,
                       struct ps_job *job,
                       struct rt_buf *blob);

/* Queues a META job persisting server id + owned ranges + master term (a
 * snapshot taken now). When @conn is set, answers request @id with
 * @method (Empty, or the error) once the commit is durable; @conn is
 * ref'd until then. */
void ps_jobs_persist(struct ps_server *ps,
                     struct rt_rpc_conn *conn,
                     uint64_t id,
                     uint32_t method);
/* Queues a drop of every key of @table_id; answers @conn/@id (if @conn)
 * with DROP_TABLE when the table is empty, then recounts the table's
 * ranges. @conn is ref'd until then. */
void ps_jobs_drop(struct ps_server *ps,
                  uint64_t table_id,
                  struct rt_rpc_conn *conn,
                  uint64_t id);
/* Starts a count scan (uv_queue_work) for every range with count_wanted
 * (new, or bounds changed); the result lands in its totals. Does nothing
 * while the server is stopping. */
void ps_jobs_count_wanted(struct ps_server *ps);
/* Marks every range of @table_id for a recount and starts the scans. */
void ps_jobs_recount_table(struct ps_server *ps, uint64_t table_id);

#endif
