/* Split (and merge) of a replicated range, the primary's part
 * (docs/DESIGN-replication.md §9.1, §9.2; a merge freezes each of its two
 * ranges the same way): before the master commits the split
 * of range R (same replica set, ISR and primary; new ids, epoch + 1), it
 * asks R's primary to freeze R with RANGE_FREEZE. The primary then
 * refuses new writes on R (RT_EBUSY, 503 ServerBusy; reads go on), lets
 * every write already admitted reach the store (a writer barrier), waits
 * until cw equals R's last LSN (every ISR member acknowledged everything,
 * so every held write is answered) and answers FreezeResp{lsn, epoch,
 * frozen_ms}. R stays frozen until one of:
 *  - an applied assignment no longer lists R: the split committed (the
 *    children take R's LSN in ps_repl.c and serve at once);
 *  - RANGE_THAW from the master: the split did not commit;
 *  - a registration reply that still lists R: the master decided nothing
 *    (it restarted, or saw this server register again, and never commits
 *    a split whose primary registered after the freeze).
 * The freeze is not persisted: a restarted primary waits for its
 * registration's assignment anyway (ps_repl.c), which settles it.
 *
 * Both are taken from the master link only (RT_EINVAL on any other
 * connection: nobody else may hold a range's writes).
 * RANGE_FREEZE{range_id, epoch} answers, in this order: RT_EINVAL (bad
 * body, or R not replicated here), RT_ESTALE (R not served here at that
 * epoch), RT_EBUSY (R is moving, or a freeze of R is still waiting),
 * RT_ENOTPRIMARY (not R's serving primary); later RT_ENOTPRIMARY (this
 * server stopped being R's primary while waiting), RT_ESTALE (R was
 * reassigned while waiting), RT_ECANCELED (thawed while waiting). The
 * same request after the answer gets the same answer. RANGE_THAW{range_id}
 * is answered Empty (also for a range not frozen: idempotent).
 *
 * Thread: loop thread only. The state lives in ps_server.split. */
#ifndef PS_SPLIT_H
#define PS_SPLIT_H

#include <stddef.h>
#include <stdint.h>

#include "ps_state.h"
#include "rt_rpc.h"

/* Poll period of a freeze waiting for cw. */
#define PS_SPLIT_POLL_MS 1

/* Sets up the state and its timer. Returns 0. */
int ps_split_start(struct ps_server *ps);
/* Answers waiting freezes RT_EBUSY and frees everything once the timer
 * closed. After the writer stopped (its barrier callbacks have run).
 * Idempotent; NULL-safe. */
void ps_split_stop(struct ps_server *ps);

/* RANGE_FREEZE / RANGE_THAW from the master (@body borrowed). */
void ps_split_on_freeze(struct ps_server *ps,
                        struct rt_rpc_conn *conn,
                        uint64_t id,
                        const uint8_t *body,
                        size_t len);
void ps_split_on_thaw(struct ps_server *ps,
                      struct rt_rpc_conn *conn,
                      uint64_t id,
                      const uint8_t *body,
                      size_t len);

/* Admission of a write on replicated range @range_id: RT_EBUSY while it
 * is frozen for a split, else 0. */
int ps_split_write_admit(const struct ps_server *ps, uint64_t range_id);

/* An assignment was applied (@registration: it answered PS_REGISTER):
 * settles the freezes as the header says. */
void ps_split_assigned(struct ps_server *ps, int registration);

/* Frozen ranges (metrics, tests). */
size_t ps_split_frozen(const struct ps_server *ps);

#endif
