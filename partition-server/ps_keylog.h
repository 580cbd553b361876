/* ps_keylog: the key log of docs/DESIGN-replication.md §2.3, in memory.
 * Per range it remembers, for each of its last group commits, (lsn,
 * epoch, txn_id, the storage keys the group changed), so catch-up can ship
 * the current values of "the keys changed in (from_lsn, to_lsn]" instead of
 * the historical records, or answer that the log no longer reaches back
 * that far (a full copy is needed). Every replica keeps one (a promoted
 * secondary catches the others up); it is lost on restart, which only
 * makes the next catch-up a full copy. Pure: no I/O, no clock, no threads.
 *
 * Budget and truncation: all ranges share one byte budget (--repl-log-mb).
 * When an append or a raised cw leaves the log above it, whole entries are
 * dropped oldest first (in append order, across ranges), but never an
 * entry above its range's cw (commit LSN: cw at a primary, the highest cw
 * learned at a secondary): those are the not-yet-committed suffix that a
 * failover may still need (§7.3), bounded by the pipeline window, so the
 * log may stay above budget while they are all it holds. Each range's log
 * is therefore always a contiguous run of LSNs (base, last]: entries go in
 * in LSN order and leave from the oldest.
 *
 * Accounting: ps_keylog_bytes() is the memory the log holds for entries
 * (each one allocation: a header, an index of its keys, the key bytes)
 * and range records, as sizeof() and the lengths give it (malloc's own
 * overhead is not counted). Dropping a range gives all of its bytes back.
 *
 * Thread: one thread per struct (the loop, fed from the writer's
 * callbacks in commit order). Ownership: keys passed in are copied; keys
 * returned point into the log and stay valid until the next call that
 * changes it (append, set_cw, drop). Allocation aborts on out of memory
 * (rt_alloc.h). */
#ifndef PS_KEYLOG_H
#define PS_KEYLOG_H

#include <stddef.h>
#include <stdint.h>

struct ps_keylog;

/* One storage key (bytes, not NUL-terminated). */
struct ps_keylog_key
{
    const uint8_t *p;
    size_t len;
};

/* A caller-owned list of keys the log fills; ps_keylog_keys_close() frees
 * the array (not the keys, which belong to the log). Zero it to init. */
struct ps_keylog_keys
{
    struct ps_keylog_key *v;
    size_t n, cap;
};

void ps_keylog_keys_close(struct ps_keylog_keys *k);

/* What ps_keylog_range_get() reports. */
struct ps_keylog_range_info
{
    uint64_t base; /* keys are known for LSNs in (base, last] */
    uint64_t last; /* the newest LSN appended */
    uint64_t cw;   /* entries at or below it may be truncated */
    size_t n_entries;
    size_t bytes; /* this range's share of ps_keylog_bytes() */
};

/* An empty log with a budget of @budget_bytes (> 0). Errors: RT_EINVAL.
 * On 0, *out belongs to the caller: ps_keylog_destroy(). */
int ps_keylog_create(size_t budget_bytes, struct ps_keylog **out);
void ps_keylog_destroy(struct ps_keylog *kl);

/* Group @lsn (committed in write transaction @txn_id, at configuration
 * @epoch) changed @keys[@n] (copied; a key may repeat) of range
 * @range_id. The first entry of a range starts its log at base = @lsn - 1;
 * an @lsn above last + 1 (LSNs this log never saw, e.g. a copy applied in
 * between) restarts it there, dropping the older entries. Then truncates
 * to the budget. Errors: RT_EINVAL (@lsn 0, or not above the range's last:
 * nothing changes). */
int ps_keylog_append(struct ps_keylog *kl,
                     uint64_t range_id,
                     uint64_t lsn,
                     uint64_t epoch,
                     uint64_t txn_id,
                     const struct ps_keylog_key *keys,
                     size_t n);

/* Range @range_id's commit LSN is now @cw (a lower value than the one
 * known changes nothing: cw never goes back); then truncates to the
 * budget. Creates the range's record if it has none (no entries yet).
 * Returns 0. */
int ps_keylog_set_cw(struct ps_keylog *kl, uint64_t range_id, uint64_t cw);

/* The keys range @range_id changed in LSNs (@from_lsn, @to_lsn], each
 * once, in byte order, appended to @out after clearing it. Returns their
 * count (>= 0). Errors: RT_ENOTFOUND (too old: the log does not reach
 * back to @from_lsn, or holds nothing for the range — a full copy is
 * needed), RT_EINVAL (@from_lsn > @to_lsn, or @to_lsn above the range's
 * last LSN). */
int ps_keylog_changed(const struct ps_keylog *kl,
                      uint64_t range_id,
                      uint64_t from_lsn,
                      uint64_t to_lsn,
                      struct ps_keylog_keys *out);

/* The epoch and txn_id of range @range_id's group @lsn, if the log holds
 * it: 0, or RT_ENOTFOUND. */
int ps_keylog_entry(const struct ps_keylog *kl,
                    uint64_t range_id,
                    uint64_t lsn,
                    uint64_t *epoch,
                    uint64_t *txn_id);

/* Forgets range @range_id (dropped, split away, or its copy replaced):
 * all its bytes are given back. 0 or RT_ENOTFOUND. */
int ps_keylog_drop_range(struct ps_keylog *kl, uint64_t range_id);

/* 0 and *out filled, or RT_ENOTFOUND. */
int ps_keylog_range_get(const struct ps_keylog *kl,
                        uint64_t range_id,
                        struct ps_keylog_range_info *out);

/* Bytes held (see Accounting above); may exceed the budget only by
 * entries above their range's cw. */
size_t ps_keylog_bytes(const struct ps_keylog *kl);
size_t ps_keylog_budget(const struct ps_keylog *kl);

#endif
