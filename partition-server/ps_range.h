/* Ranges: the set of ranges this server owns (exactly what the master last
 * assigned), the ownership check every entity request passes, and the
 * per-range load counters reported in heartbeats (DESIGN §4).
 *
 * A range is [low, high) over PartitionKey of one table (DESIGN §3); PKs
 * compare in UTF-16 code-unit order (rt_utf16_cmpz), Azure's key order and
 * the storage key order (rt_key.h).
 *
 * Thread: loop thread only. Ownership: a struct ps_range belongs to the
 * set; pointers stay valid until the next ps_ranges_set / ps_ranges_close,
 * so async work keeps the range id, not the pointer. */
#ifndef PS_RANGE_H
#define PS_RANGE_H

#include <stddef.h>
#include <stdint.h>

#include "rt.pb-c.h"
#include "rt_buf.h"

/* PartitionKeys sampled per range between two heartbeats (weighted
 * reservoir over requests, ps_range_account). */
#define PS_SAMPLE_MAX 32

/* Entity totals of a range (ps_range_count_*): how far they can be trusted. */
enum ps_count_state {
    PS_COUNT_NONE,    /* never counted: totals are 0 */
    PS_COUNT_RUNNING, /* a count scan is out; totals are the last known */
    PS_COUNT_VALID,   /* totals = count at count_txn + later deltas */
    PS_COUNT__NR
};

/* Token bucket for throttling (docs/DESIGN.md §4, "Throttling"): @rate
 * entities per second, refilled every millisecond of the loop clock, at
 * most PS_TBUCKET_BURST_MS worth of tokens banked. A request is admitted
 * while the balance is positive and then charged what it really cost (a
 * write its ops up front, a read the entities it returned), so the
 * balance may go negative: large requests are never starved, and the long
 * run average stays at @rate. Kept in milli-tokens. rate 0 = no cap. */
#define PS_TBUCKET_BURST_MS 100
struct ps_tbucket
{
    uint64_t rate;    /* entities/s; 0 = unlimited */
    int64_t mtokens;  /* balance, 1/1000 entity */
    uint64_t last_ms; /* loop clock of the last refill */
};
void ps_tbucket_init(struct ps_tbucket *b, uint64_t rate, uint64_t now_ms);
/* Refills to @now_ms; 1 when a request may go ahead (balance > 0 or no
 * cap), else 0. */
int ps_tbucket_admit(struct ps_tbucket *b, uint64_t now_ms);
/* Takes @entities from the balance. */
void ps_tbucket_charge(struct ps_tbucket *b, uint64_t entities);

/* Effect of one committed write, kept while a count scan is out. */
struct ps_count_delta
{
    uint64_t txn_id;
    int64_t count;
    int64_t bytes;
};

struct ps_range
{
    uint64_t id;
    uint64_t table_id;
    uint64_t epoch;
    char *low;  /* inclusive; "" = table start */
    char *high; /* exclusive; NULL = unbounded */
    /* The replica set as assigned (kept so the persisted set restores it;
     * ps_repl owns what it means): primary, primary_epoch, replicas and
     * isr. n_replicas 0 = RF 1. */
    uint64_t primary_id;
    uint64_t primary_epoch;
    Rt__Replica *replicas;
    size_t n_replicas;
    uint64_t *isr;
    size_t n_isr;
    /* Load since the previous heartbeat (load_since_ms, loop clock). */
    uint64_t load_since_ms;
    uint64_t requests;
    uint64_t entities;
    uint64_t scanned;
    uint64_t bytes_written;
    uint64_t exec_us;
    uint64_t throttled; /* requests refused with RT_EBUSY (caps, queue) */
    /* Since this range was first served here (metrics; never reset). */
    uint64_t tot_requests;
    uint64_t tot_entities;
    uint64_t tot_bytes;
    uint64_t tot_throttled;
    /* Moving out (ps_move_out.c): every request gets RT_EBUSY. */
    int frozen;
    struct ps_tbucket tb; /* per-range cap (--max-range-eps) */
    char *sample[PS_SAMPLE_MAX];
    double sample_key[PS_SAMPLE_MAX]; /* A-Res keys: log(u) / weight */
    unsigned n_sample;
    /* Totals: entities and key + value bytes (see ps_range_count_*). */
    uint64_t key_count;
    uint64_t key_bytes;
    enum ps_count_state count_state;
    uint64_t count_gen; /* bumped when bounds change: a running count of
                           an older generation is stale */
    uint64_t count_txn; /* snapshot the totals are based on (VALID) */
    int count_wanted;   /* bounds are new: a count scan must be started */
    struct ps_count_delta *pend; /* writes seen while RUNNING */
    size_t n_pend, cap_pend;
};

struct ps_ranges
{
    struct ps_range **v; /* sorted by id */
    size_t n;
    uint64_t map_version; /* of the assignment applied last */
    uint64_t rng;         /* reservoir sampling state */
    uint64_t range_eps;   /* cap of each new range's bucket (0 = none) */
};

void ps_ranges_init(struct ps_ranges *rs);
void ps_ranges_close(struct ps_ranges *rs);

struct ps_range *ps_ranges_find(const struct ps_ranges *rs, uint64_t id);
/* The range of @table_id holding @pk, or NULL. */
struct ps_range *ps_ranges_find_key(const struct ps_ranges *rs,
                                    uint64_t table_id,
                                    const char *pk);
/* 1 when some range of the set intersects [@low, @high) of @table_id
 * (@high NULL = unbounded); @skip_id (0 = none) is not considered. */
int ps_ranges_overlap(const struct ps_ranges *rs,
                      uint64_t table_id,
                      const char *low,
                      const char *high,
                      uint64_t skip_id);
/* Stops serving range @id (nothing else changes). Returns 1 if it was
 * served. Pointers to it become invalid. */
int ps_ranges_remove(struct ps_ranges *rs, uint64_t id);
/* 1 when @pk (NUL-terminated) is inside [low, high). */
int ps_range_contains(const struct ps_range *r, const char *pk);

/* Ownership check of one request (docs/DESIGN.md §2, step 3): this
 * server owns @range_id at exactly @epoch, for @table_id, and @pk (NULL =
 * no key to check) is inside it. Returns 0 and *out, or RT_ESTALE. */
int ps_ranges_route(const struct ps_ranges *rs,
                    uint64_t table_id,
                    uint64_t range_id,
                    uint64_t epoch,
                    const char *pk,
                    struct ps_range **out);

/* The upper bound of @d as the server keeps it: NULL for +inf (high_inf),
 * else d->high ("" when unset). Borrowed from @d. */
const char *ps_range_pb_high(const Rt__Range *d);
/* Sets @d's upper bound from @high (NULL = +inf; borrowed, not copied). */
void ps_range_pb_set_high(Rt__Range *d, const char *high);

/* Serves exactly @v[0..n) from now on (borrowed; copied). Ranges that stay
 * (same id) keep their load counters, and their totals if the bounds are
 * the same; a new range or one whose bounds changed gets count_wanted.
 * Returns 1 when the set changed (ids, epochs or bounds), else 0. */
int ps_ranges_set(struct ps_ranges *rs, Rt__Range *const *v, size_t n);

/* Appends the set, packed as an rt.Assignment (with map_version and each
 * range's replica set), to @out: the blob persisted in the store's meta. */
void ps_ranges_pack(const struct ps_ranges *rs, struct rt_buf *out);
/* Restores a set packed by ps_ranges_pack. Returns 0 or RT_ECORRUPT. */
int ps_ranges_unpack(struct ps_ranges *rs, const uint8_t *blob, size_t n);

/* Counts one request on @r: @entities read or written, @bytes written,
 * @exec_us of work, and offers @pk (may be NULL) to the PK sample with
 * weight max(1, @entities): a weighted reservoir (Efraimidis-Spirakis
 * A-Res) over requests, so a PK's chance to be sampled is proportional to
 * the entities its requests carried. */
void ps_range_account(struct ps_ranges *rs,
                      struct ps_range *r,
                      uint64_t entities,
                      uint64_t bytes,
                      uint64_t exec_us,
                      const char *pk);
/* Counts one request refused with RT_EBUSY for load (not for a freeze). */
void ps_range_throttled(struct ps_range *r);
/* Zeroes the since-last-heartbeat counters and the sample; @now_ms starts
 * the next interval. */
void ps_range_load_reset(struct ps_range *r, uint64_t now_ms);

/* Entity totals, maintained incrementally (see README "Load accounting").
 * A count scan (ps_store_range_stats, off the loop) gives the totals at a
 * snapshot txn; every committed write adds its deltas with its txn id.
 *  - ps_range_count_start: a scan is being started; returns the generation
 *    to hand back with its result.
 *  - ps_range_count_done: the scan of generation @gen found @count/@bytes
 *    at snapshot @txn: totals = those + deltas of writes after @txn. A
 *    result of an older generation is ignored (returns 0), else 1.
 *  - ps_range_count_write: a write with @txn_id and deltas committed. */
uint64_t ps_range_count_start(struct ps_range *r);
int ps_range_count_done(struct ps_range *r,
                        uint64_t gen,
                        uint64_t count,
                        uint64_t bytes,
                        uint64_t txn);
void ps_range_count_write(struct ps_range *r,
                          uint64_t txn_id,
                          int64_t dcount,
                          int64_t dbytes);

#endif
