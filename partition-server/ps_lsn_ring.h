/* LSN ring: the last (txn_id, lsn) pairs of one range, so a read that ran
 * in LMDB read transaction T can tell lsn_T, the range's highest LSN
 * committed in a write transaction <= T (docs/DESIGN-replication.md
 * §6.3: the reply waits until cw >= lsn_T). Pure, in memory, no I/O.
 *
 * The ring remembers PS_LSN_RING_N pairs plus a floor: the newest pair
 * pushed out (or the position the range started from). A lookup inside
 * the window is exact; one older than the floor answers the floor's LSN,
 * an upper bound of lsn_T: waiting for cw to reach it is safe (never a
 * dirty read), only slower. Such reads are rare: they started more than
 * PS_LSN_RING_N group commits of their range ago.
 *
 * Thread: the owner's (the loop thread: pushes come from the writer's
 * callbacks, in commit order). The struct is embedded by the caller. */
#ifndef PS_LSN_RING_H
#define PS_LSN_RING_H

#include <stdint.h>

#define PS_LSN_RING_N 16

struct ps_lsn_ring
{
    uint64_t txn[PS_LSN_RING_N];
    uint64_t lsn[PS_LSN_RING_N];
    unsigned head; /* next slot to write */
    unsigned n;    /* pairs held */
    uint64_t floor_txn;
    uint64_t floor_lsn;
};

/* Starts empty at LSN @lsn: the range's applied LSN when the ring is made,
 * committed in a transaction before any read opened from now on. */
void ps_lsn_ring_init(struct ps_lsn_ring *r, uint64_t lsn);
/* Records that write transaction @txn_id committed the range's LSN @lsn.
 * Pairs come in commit order; one not above the newest (a second write of
 * the same group, a stale callback) changes nothing. */
void ps_lsn_ring_push(struct ps_lsn_ring *r, uint64_t txn_id, uint64_t lsn);
/* lsn_T for a read in transaction @txn_id (see the header comment):
 * exact inside the window, else the floor's LSN (an upper bound). */
uint64_t ps_lsn_ring_at(const struct ps_lsn_ring *r, uint64_t txn_id);
/* The newest LSN known (the range's last LSN committed). */
uint64_t ps_lsn_ring_last(const struct ps_lsn_ring *r);

#endif
