/* LSN ring (ps_lsn_ring.h): a circular array of (txn_id, lsn) pairs in
 * commit order, both increasing, with a floor below the oldest. A lookup
 * scans from the newest pair down: the reads that matter are recent, and
 * the ring is small. */
#include "ps_lsn_ring.h"

#include <string.h>

void ps_lsn_ring_init(struct ps_lsn_ring *r, uint64_t lsn)
{
    memset(r, 0, sizeof(*r));
    r->floor_lsn = lsn;
}

uint64_t ps_lsn_ring_last(const struct ps_lsn_ring *r)
{
    if (r->n == 0) {
        return r->floor_lsn;
    }
    return r->lsn[(r->head + PS_LSN_RING_N - 1) % PS_LSN_RING_N];
}

void ps_lsn_ring_push(struct ps_lsn_ring *r, uint64_t txn_id, uint64_t lsn)
{
    if (lsn <= ps_lsn_ring_last(r)) {
        return;
    }
    if (r->n == PS_LSN_RING_N) {
        /* The oldest pair becomes the floor. */
        r->floor_txn = r->txn[r->head];
        r->floor_lsn = r->lsn[r->head];
    } else {
        r->n++;
    }
    r->txn[r->head] = txn_id;
    r->lsn[r->head] = lsn;
    r->head = (r->head + 1) % PS_LSN_RING_N;
}

uint64_t ps_lsn_ring_at(const struct ps_lsn_ring *r, uint64_t txn_id)
{
    for (unsigned k = 1; k <= r->n; k++) {
        unsigned i = (r->head + PS_LSN_RING_N - k) % PS_LSN_RING_N;
        if (r->txn[i] <= txn_id) {
            return r->lsn[i];
        }
    }
    /* Older than every pair held: the floor is exact when T is at or
     * after the floor's commit, and an upper bound before it. */
    return r->floor_lsn;
}
