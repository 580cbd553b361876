/* Master-term fencing (docs/DESIGN-master-ha.md §5.4): a partition server
 * takes commands only from the newest master it has heard of. Every master
 * request that changes what it serves (ASSIGN_RANGES, DROP_TABLE, MOVE_OUT,
 * MOVE_ABORT, MOVE_DONE, TRANSFER_PRIMARY, TRANSFER_ABORT, RANGE_FREEZE,
 * RANGE_THAW, REPL_ABORT, SEAL) and every registration or heartbeat reply
 * carries the sender's master_term; one below the highest seen comes from
 * a deposed master and is refused, a higher one is recorded, and 0 (a
 * master older than the field) is taken without changing anything.
 *
 * The highest term lives in ps->master_term; every META job carries it
 * (ps_jobs_meta_init), so the term an assignment brought is durable before
 * that assignment is answered, and ps_server loads it at start: a restarted
 * server cannot be taken back by a deposed master. It is never lowered.
 *
 * Thread: loop thread only. Calls nothing else of the partition server. */
#ifndef PS_FENCE_H
#define PS_FENCE_H

#include <stddef.h>
#include <stdint.h>

#include "ps_state.h"
#include "rt_rpc.h"

/* Checks a master's @term against the highest seen: 0 when it is taken
 * (0, or at least the highest; a higher one becomes the highest, in memory
 * until the next META job), RT_ESTALE when it is below (counted in
 * ps->master_term_refused; nothing changes). @what names the message for
 * the log. */
int ps_fence_check(struct ps_server *ps, uint64_t term, const char *what);

/* ps_fence_check for request @id of @method on @conn: on RT_ESTALE it also
 * answers the request with RT_ESTALE "older master term N < M", so the
 * caller only frees its message and returns. Over mutual TLS only a
 * master's (or an admin's) certificate may carry a term: a peer's request
 * with one (REPL_ABORT from a primary sends 0) is answered RT_EPERM and
 * moves nothing, so no partition server can fence the masters out. */
int ps_fence_admit(struct ps_server *ps,
                   struct rt_rpc_conn *conn,
                   uint64_t id,
                   uint32_t method,
                   uint64_t term);

/* Appends the fencing metrics (rt_ps_master_term,
 * rt_ps_master_term_refused_total) to @b. */
void ps_fence_metrics(const struct ps_server *ps, struct rt_buf *b);

#endif
