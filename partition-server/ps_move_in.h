/* Range moves, the target side (ps_move_in.c): MIGRATE_BEGIN / DATA /
 * END and the records of ranges being received. Private to the move
 * files; everything else uses ps_move.h.
 *
 * Thread: loop thread only. */
#ifndef PS_MOVE_IN_H
#define PS_MOVE_IN_H

#include <stddef.h>
#include <stdint.h>

#include "ps_move_int.h"

/* "clearing", "receiving", "complete", "restored", "failed". */
const char *ps__mvin_state_name(enum ps_mvin_state s);
/* The received move @move_id, or NULL. */
struct ps_move_in *ps__mvin_by_move(struct ps_server *ps, uint64_t move_id);

/* MIGRATE_BEGIN / DATA / END from the source; each answers @conn/@id,
 * at once or once its writes are durable. @body is borrowed. */
void ps__mvin_begin(struct ps_server *ps,
                    struct rt_rpc_conn *conn,
                    uint64_t id,
                    const uint8_t *body,
                    size_t len);
void ps__mvin_data(struct ps_server *ps,
                   struct rt_rpc_conn *conn,
                   uint64_t id,
                   const uint8_t *body,
                   size_t len);
void ps__mvin_end(struct ps_server *ps,
                  struct rt_rpc_conn *conn,
                  uint64_t id,
                  const uint8_t *body,
                  size_t len);
/* MOVE_ABORT: deletes what @mi received (unless a served range covers
 * the span now) and forgets it; answers @conn once that is durably
 * scheduled. @mi is gone on return. */
void ps__mvin_abort(struct ps_move_in *mi,
                    struct rt_rpc_conn *conn,
                    uint64_t id,
                    uint32_t method);
/* Forgets the records of ranges the new assignment lists here. */
void ps__mvin_assigned(struct ps_server *ps);
/* ps_store_meta_scan callback for "mvin" records (@arg: struct
 * ps__restore). */
int ps__mvin_restore(uint64_t move_id,
                     const uint8_t *val,
                     size_t vn,
                     void *arg);
/* Frees every record. */
void ps__mvin_close(struct ps_server *ps);

#endif
