/* Ranges: the set of ranges this server owns (exactly what the master last
 * assigned), the ownership check every entity request passes, and the
 * per-range load counters reported in heartbeats (DESIGN §4).
 *
 * A range is [low, high) over PartitionKey of one table (DESIGN §3); PKs
 * compare as raw UTF-8 bytes, which is the storage key order.
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

/* PartitionKeys sampled per range between two heartbeats (reservoir). */
#define PS_SAMPLE_MAX 16

struct ps_range {
    uint64_t id;
    uint64_t table_id;
    uint64_t epoch;
    char *low;  /* inclusive; "" = table start */
    char *high; /* exclusive; NULL = unbounded */
    /* Load since the previous heartbeat. */
    uint64_t requests;
    uint64_t entities;
    uint64_t bytes_written;
    uint64_t exec_us;
    /* Totals; approximate (0 until the engine tracks them). */
    uint64_t key_count;
    uint64_t key_bytes;
    char *sample[PS_SAMPLE_MAX];
    unsigned n_sample;
    uint64_t sample_seen;
};

struct ps_ranges {
    struct ps_range **v; /* sorted by id */
    size_t n;
    uint64_t map_version; /* of the assignment applied last */
    uint64_t rng;         /* reservoir sampling state */
};

void ps_ranges_init(struct ps_ranges *rs);
void ps_ranges_close(struct ps_ranges *rs);

struct ps_range *ps_ranges_find(const struct ps_ranges *rs, uint64_t id);
/* 1 when @pk (NUL-terminated) is inside [low, high). */
int ps_range_contains(const struct ps_range *r, const char *pk);

/* Ownership check of one request (SKELETON-PLAN flow 6): this server owns
 * @range_id at exactly @epoch, for @table_id, and @pk (NULL = no key to
 * check) is inside it. Returns 0 and *out, or RT_ESTALE. */
int ps_ranges_route(const struct ps_ranges *rs, uint64_t table_id,
                    uint64_t range_id, uint64_t epoch, const char *pk,
                    struct ps_range **out);

/* Serves exactly @v[0..n) from now on (borrowed; copied). Ranges that stay
 * (same id) keep their load counters. Returns 1 when the set changed (ids,
 * epochs or bounds), else 0. */
int ps_ranges_set(struct ps_ranges *rs, Rt__Range *const *v, size_t n);

/* Appends the set, packed as an rt.Assignment (with map_version), to @out:
 * the blob persisted in the store's meta. */
void ps_ranges_pack(const struct ps_ranges *rs, struct rt_buf *out);
/* Restores a set packed by ps_ranges_pack. Returns 0 or RT_ECORRUPT. */
int ps_ranges_unpack(struct ps_ranges *rs, const uint8_t *blob, size_t n);

/* Counts one request on @r: @entities read or written, @bytes written,
 * @exec_us of work, and offers @pk (may be NULL) to the PK sample. */
void ps_range_account(struct ps_ranges *rs, struct ps_range *r,
                      uint64_t entities, uint64_t bytes, uint64_t exec_us,
                      const char *pk);
/* Zeroes the since-last-heartbeat counters and the sample. */
void ps_range_load_reset(struct ps_range *r);

#endif
