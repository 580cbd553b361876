/* Range moves, the source side (ps_move_out.c): MOVE_OUT and what ends a
 * move out. Private to the move files; everything else uses ps_move.h.
 *
 * Thread: loop thread only. */
#ifndef PS_MOVE_OUT_H
#define PS_MOVE_OUT_H

#include <stddef.h>
#include <stdint.h>

#include "ps_move_int.h"

/* "sync", "begin", "snapshot", "tail", "freeze", "final", "done",
 * "ended". */
const char *ps__mvout_state_name(enum ps_mvout_state s);
/* The move out with @move_id / of range @range_id, or NULL. */
struct ps_move_out *ps__mvout_by_move(struct ps_server *ps, uint64_t move_id);
struct ps_move_out *ps__mvout_by_range(const struct ps_server *ps,
                                       uint64_t range_id);

/* MOVE_OUT: starts the move and answers @conn/@id when it is DONE or has
 * failed (or at once: bad request, not our range, already moving). */
void ps__mvout_request(struct ps_server *ps,
                       struct rt_rpc_conn *conn,
                       uint64_t id,
                       const uint8_t *body,
                       size_t len);
/* MOVE_ABORT: a DONE move is unfrozen and forgotten; any other fails
 * with RT_ECANCELED. @mv is gone on return. */
void ps__mvout_abort(struct ps_move_out *mv);
/* A DONE move committed (MOVE_DONE, or an assignment without the range):
 * the range is dropped here, its keys deleted in the background. Answers
 * @conn/@id/@method (if @conn) once that is durable. @mv is gone on
 * return. */
void ps__mvout_drop(struct ps_move_out *mv,
                    struct rt_rpc_conn *conn,
                    uint64_t id,
                    uint32_t method);
/* Settles moves out after a new assignment (see ps_move_assigned). */
void ps__mvout_assigned(struct ps_server *ps, int registration);
/* ps_store_meta_scan callback for "mvout" markers (@arg: struct
 * ps__restore): the range stays frozen, its move DONE, until settled. */
int ps__mvout_restore(uint64_t range_id,
                      const uint8_t *val,
                      size_t vn,
                      void *arg);
/* Server stopping: moves not DONE fail with RT_EBUSY, keeping any
 * committed freeze. */
void ps__mvout_stop(struct ps_server *ps);
/* Frees every move out; after every threadpool request is back. */
void ps__mvout_close(struct ps_server *ps);

#endif
