/* Range moves, both ends (docs/DESIGN-moves.md; DESIGN §5): the outgoing
 * side answers the master's MOVE_OUT by copying a range to its target
 * (snapshot, log tail, freeze, final tail) and the incoming side stores
 * what MIGRATE_BEGIN / DATA / END bring. The moves hang off struct
 * ps_server (moves_out, moves_in, span_seq, span_drops, mvc).
 *
 * Thread: loop thread only; snapshots are read on the libuv threadpool. */
#ifndef PS_MOVE_H
#define PS_MOVE_H

#include <stddef.h>
#include <stdint.h>

#include "ps_state.h"
#include "rt_buf.h"
#include "rt_rpc.h"

/* Restores what a previous run left: ranges frozen for a move (they stay
 * frozen until an assignment settles them), ranges being received, and
 * unfinished span drops. After the writer started. */
int ps_move_start(struct ps_server *ps);
/* Server stopping: moves in progress end (their MOVE_OUT is answered
 * RT_EBUSY); nothing is unfrozen (a persisted freeze survives). */
void ps_move_stop(struct ps_server *ps);
/* Frees what is left; after every threadpool request is back. */
void ps_move_close(struct ps_server *ps);
/* MOVE_OUT, MOVE_ABORT, MOVE_DONE, MIGRATE_BEGIN/DATA/END. */
void ps_move_on_request(struct ps_server *ps,
                        struct rt_rpc_conn *conn,
                        uint32_t method,
                        uint64_t id,
                        const uint8_t *body,
                        size_t len);
/* A new assignment was just applied (ps_ranges_set): settles frozen
 * ranges (see README "Moves"), ends moves whose range went away, and
 * forgets received ranges that are now served. @registration: it came
 * with a PS_REGISTER reply (a new session with the master). */
void ps_move_assigned(struct ps_server *ps, int registration);
/* Name of the state of the move of @range_id out of this server ("sync",
 * "begin", "snapshot", "tail", "freeze", "final", "done"), or NULL. */
const char *ps_move_out_state(const struct ps_server *ps, uint64_t range_id);
/* Appends the move metrics (Prometheus text). */
void ps_move_metrics(const struct ps_server *ps, struct rt_buf *out);

#endif
