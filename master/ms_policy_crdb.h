/* Policy "crdb": CockroachDB's load-based splitting, store rebalancer and
 * load-aware merge queue, as published, mapped onto ms_policy's view and
 * decisions (master/README.md "The crdb policy" says what is taken from
 * where and what differs).
 *
 * On every decide() (the master's tick, ~500 ms):
 *  - marks: a range is hot while its demand is at least the split
 *    threshold (cfg->split_eps, or 90% of its per-range cap when lower:
 *    kv.range_split.load_qps_threshold); the split finder records from
 *    the moment it became hot and forgets when it cools (no hysteresis,
 *    as in CockroachDB);
 *  - load-based splits: hot for cfg->split_sustain_ms (the finder's
 *    RecordDurationThreshold), not made in the last split_cooldown_ms,
 *    not busy, the table below split_max_ranges, at the key of the
 *    weighted finder (ms_crdb_split_key);
 *  - the store rebalancer, every interval_ms (the first one interval
 *    after the policy's first call, as CockroachDB waits out its first
 *    tick): each live, non-draining server above the overfull threshold
 *    (mean + max(mean * threshold_pct%, min_diff)) sheds its hottest
 *    ranges, hottest first: first by transfers of the primary role of
 *    replicated ranges to the coolest in-sync replica, then by moves
 *    (of a single copy, or of a replicated range's primary copy to a
 *    server holding none) to the coolest server; a range goes only if
 *    the source stays at or above the underfull threshold (mean -
 *    max(...)) and the target, when it is underfull, stays at or below
 *    the overfull threshold, and otherwise stays at or below the mean
 *    (shouldNotMoveAway / shouldNotMoveTo); a range carrying less than
 *    0.5% (transfers) or 2% (moves) of its server's demand is not worth
 *    it; the shared limits apply (max_moves in flight, a range moved in
 *    the last move_cooldown_ms stays, both servers free: not moving and
 *    past server_cooldown_ms);
 *  - the merge queue, one pair per call: adjacent single-copy ranges of
 *    one table on one live server whose summed demand stayed below half
 *    the split threshold for merge_sustain_ms, together at most
 *    merge_max_bytes, no split involving them in merge_after_split_ms.
 * Placement: the live, non-draining server with the fewest ranges.
 *
 * Options (cfg->opts, "KEY=VALUE,..."; CockroachDB's name in brackets):
 *   interval_ms=5000      rebalancer period
 *                         [kv.allocator.load_based_rebalancing_interval]
 *   threshold_pct=10      overfull above mean by this %
 *                         [kv.allocator.qps_rebalance_threshold]
 *   min_diff=100          ... and by at least this demand (entities/s)
 *                         [minQPSThresholdDifference]
 *   split_balance_pct=25  the finder's key must leave the two sides
 *                         within this % of each other [splitKeyThreshold]
 *   split_min_samples=10  sampled PartitionKeys needed in the range
 *                         [splitKeyMinCounter]
 *   hot_ranges=128        hottest ranges per server the rebalancer looks
 *                         at [numTopReplicasToTrack]
 *
 * Thread: master loop thread (as every policy). */
#ifndef MS_POLICY_CRDB_H
#define MS_POLICY_CRDB_H

#include "ms_load.h"
#include "ms_policy.h"

/* Creates the policy with @cfg (copied; not NULL: ms_policy_create()
 * passes the defaults) and its options parsed from cfg->opts. Returns 0, or
 * RT_EINVAL with
 * @errmsg (RT_ERRMSG_SIZE bytes) naming the bad option. */
int ms_policy_crdb_create(const struct ms_policy_config *cfg,
                          struct ms_policy *out,
                          char *errmsg);

/* The weighted split finder over @r's PartitionKey samples in [@low,
 * @high) (@high NULL: unbounded) not older than MS_LOAD_SAMPLE_MS before
 * @now_ms, in the order of keys (UTF-16 code units, rt_utf16_cmpz): for
 * each distinct sampled key K > @low, left = sampled weight
 * below K, right = the rest (a sample on K counts right, as CockroachDB
 * counts a request starting at the key); score = |left - right| / (left
 * + right). A sample is one PartitionKey and a PartitionKey is never
 * split, so no request crosses K: CockroachDB's "contained" counter is 0
 * and the score is its balance score alone. Returns the key with the
 * lowest score below @max_score (ties: the lowest key), malloc'd (caller
 * frees), or NULL when fewer than @min_samples samples are in the range
 * or no key scores below @max_score. *@score and *@left_share (may be
 * NULL) get its score and the weight share left of it. */
char *ms_crdb_split_key(const struct ms_load_range *r,
                        const char *low,
                        const char *high,
                        uint64_t now_ms,
                        size_t min_samples,
                        double max_score,
                        double *score,
                        double *left_share);

#endif
