/* Primaryship transfer, the old primary's side (docs/DESIGN-replication.md
 * §3.1 FROZEN, §4 TRANSFER_PRIMARY, §9.3 step 2). The master hands the
 * primary role of a replicated range to an ISR secondary T without a data
 * copy; this server, the primary, makes that safe and short:
 *
 *  - TRANSFER_PRIMARY{range_id, epoch, to_server = T, new_epoch}: checked
 *    in the order of §4 (not the primary at @epoch RT_ESTALE; T not in the
 *    ISR RT_EINVAL; frozen already: the same request (range, epoch, T)
 *    gets the same answer, another one RT_EBUSY). Then the range freezes
 *    (ps_repl_freeze: reads and writes RT_EBUSY, which the front end
 *    answers 503 at once; the read lease released with a support round at
 *    once), the freeze is persisted (meta PS_TRANSFER_META ‖ range id;
 *    the job, FIFO, is also the writer barrier that lets every write
 *    admitted before the freeze reach the core), and the answer waits
 *    until T acked the last LSN and answered a SupportReq carrying the
 *    release (for the first PS_TRANSFER_ALL_MS also every ISR member, so
 *    that no write stays held, and every connected peer). Answer: status
 *    0 + TransferResp{lsn, frozen_ms = ms since the freeze}. Not ready
 *    within PS_TRANSFER_READY_MS: the range is unfrozen and the answer is
 *    RT_ETIMEDOUT; the marker not written: unfrozen, its error.
 *  - TRANSFER_ABORT{range_id, epoch}: a freeze of that epoch ends (the
 *    lease must be won again); a request still waiting gets RT_ECANCELED.
 *    Always answered Empty (idempotent).
 *  - Assignments (ps_transfer_assigned, after ps_repl_assigned): a frozen
 *    range the core no longer holds as a frozen primary was settled (the
 *    transfer committed: it follows T in the ISR; or the transfer ended as
 *    a failover that chose this server again: it activates with a fresh
 *    lease); one still frozen but assigned at a newer epoch with this
 *    server still primary (the master decided otherwise) is unfrozen.
 *  - A range frozen for PS_TRANSFER_ORPHAN_MS without a decision, whose
 *    assignment still names this server primary at the frozen epoch, is
 *    unfrozen (the master lost track; DESIGN-moves §6). Safety does not
 *    rest on this: a secondary that sealed refuses the old generation's
 *    appends and support.
 *  - Restart: a marker found at start whose range this server still
 *    holds as primary at the frozen epoch keeps it answering RT_EBUSY
 *    (ps_repl_hold) until an assignment at a newer epoch or naming
 *    another primary, TRANSFER_ABORT, or the orphan rule; a
 *    TRANSFER_PRIMARY for it gets RT_EBUSY. Other markers are deleted.
 *    Every end of a freeze deletes its marker.
 *
 * Thread: the loop thread only. The state lives in ps_server.xfer. */
#ifndef PS_TRANSFER_H
#define PS_TRANSFER_H

#include <stddef.h>
#include <stdint.h>

#include "ps_state.h"
#include "rt_rpc.h"

/* Meta record of a freeze: PS_TRANSFER_META ‖ u64be range id ->
 * u64be epoch ‖ u64be target. */
#define PS_TRANSFER_META "rfrz"

/* Waits of the answer (ms since the freeze). */
#define PS_TRANSFER_ALL_MS 300
#define PS_TRANSFER_READY_MS 3000
/* A freeze nobody decided about for this long ends (§3.1). */
#define PS_TRANSFER_ORPHAN_MS 10000

/* Sets up the state and its timer, and restores the freezes found
 * persisted (after ps_repl_restore, with the writer running). 0 or a
 * libuv error. */
int ps_transfer_start(struct ps_server *ps);
/* Answers every waiting request RT_EBUSY and closes the timer; the state
 * is freed by the timer's close callback. After the writer stopped (every
 * barrier called back), before ps_repl_stop. Idempotent, NULL-safe. */
void ps_transfer_stop(struct ps_server *ps);

/* TRANSFER_PRIMARY or TRANSFER_ABORT on @conn (borrowed; a reference is
 * held while the answer waits); @body borrowed. See the header comment. */
void ps_transfer_on_request(struct ps_server *ps,
                            struct rt_rpc_conn *conn,
                            uint32_t method,
                            uint64_t id,
                            const uint8_t *body,
                            size_t len);

/* An assignment was applied (after ps_repl_assigned). */
void ps_transfer_assigned(struct ps_server *ps);

/* Ranges frozen here for a transfer now (metrics, tests). */
size_t ps_transfer_frozen(const struct ps_server *ps);

#endif
