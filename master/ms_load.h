/* Load model: what the partition servers' heartbeats say about each range,
 * turned into rates, smoothed, and kept as a short history for the
 * dashboard's heat map (docs/DESIGN.md §4).
 *
 * Each heartbeat carries, per range, counters since the previous heartbeat
 * and the length of that interval (rt.RangeLoad). ms_load_report() turns
 * them into per-second rates, folds them into an exponentially weighted
 * moving average (time constant tau: alpha = 1 - exp(-dt / tau), so the
 * smoothing does not depend on the heartbeat period) and keeps the
 * PartitionKey samples of the last seconds, each weighted by the entities
 * of its interval divided by the number of samples in it (the server's
 * sample is a weighted reservoir: every sampled PK stands for an equal
 * share of that interval's load).
 *
 * "Demand" is the load unit of the policy: entities/s served plus requests
 * refused with Busy per second (what was asked of the range, not only what
 * a throttled server let through).
 *
 * The history is a ring of frames, one per ms_load_frame() call (the
 * master calls it once a second): every range's demand and its bounds at
 * that time, and every server's total. Bounds are copied into a registry
 * shared by the frames, so a range that was split or moved away still
 * shows where it was.
 *
 * A second, coarser ring keeps an hour for the dashboard to zoom over:
 * one frame per MS_LOAD_COARSE_MS of wall time (the fine frames whose
 * unix_ms falls in [k * 10 s, (k + 1) * 10 s)), each range's demand the
 * mean over the fine frames of that bucket that had the range (a range
 * split half-way shows what it carried while it existed), each server's
 * the sum of its fine totals over the bucket divided by the bucket's fine
 * frames (the mean over the whole 10 s). A bucket becomes a frame when
 * the first fine frame of a later bucket comes. Memory: a coarse frame
 * costs 24 bytes per range it holds plus 12 per server, so 360 frames of
 * R ranges are 8.6 KB * R (1,000 ranges: 8.6 MB), plus one bounds entry
 * per range referenced in the hour.
 *
 * Pure data structure: no I/O, no clock of its own (callers pass
 * monotonic milliseconds). Thread: not thread-safe; the master uses it
 * from its loop thread only. Returned pointers stay valid until the next
 * mutating call. */
#ifndef MS_LOAD_H
#define MS_LOAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "rt.pb-c.h"

#define MS_LOAD_SAMPLES 256        /* PK samples kept per range */
#define MS_LOAD_SAMPLE_MS 10000    /* samples older than this are dropped */
#define MS_LOAD_HISTORY 120        /* frames kept (about 2 minutes) */
#define MS_LOAD_DEFAULT_TAU 1500   /* ms */
#define MS_LOAD_COARSE_MS 10000    /* wall time per coarse frame */
#define MS_LOAD_COARSE_HISTORY 360 /* coarse frames kept (1 hour) */

/* Per-second rates of one range (or a sum over ranges). */
struct ms_load_rates
{
    double req_s;     /* requests */
    double ent_s;     /* entities written, read or returned */
    double wbytes_s;  /* key + value bytes written */
    double exec_frac; /* execution time / wall time (1 = one core busy) */
    double thr_s;     /* requests refused with Busy (caps, queue full) */
    double scan_s;    /* keys examined by scans */
};

struct ms_pk_sample
{
    char *pk;
    double w;       /* entities this sample stands for */
    uint64_t at_ms; /* when it was reported */
};

struct ms_load_range
{
    uint64_t range_id;
    uint64_t server_id;       /* who reported it last */
    uint64_t first_ms;        /* first report */
    uint64_t last_ms;         /* latest report */
    uint64_t reports;         /* heartbeats folded in */
    bool estimated;           /* rates inherited from a split or merge,
                               * no report of its own yet */
    struct ms_load_rates avg; /* smoothed */
    struct ms_load_rates cur; /* the latest interval alone */
    uint64_t key_count;       /* entities (as last reported) */
    uint64_t key_bytes;       /* storage bytes */
    uint64_t max_range_eps;   /* caps its server reported (0 = none) */
    uint64_t max_server_eps;
    struct ms_pk_sample samples[MS_LOAD_SAMPLES]; /* ring */
    size_t nsamples;
    size_t sample_next;
};

/* One range in a history frame. */
struct ms_load_bounds
{
    uint64_t range_id;
    uint64_t table_id;
    char *low;
    char *high;           /* NULL: unbounded */
    uint64_t last_frame;  /* frame number that last referenced it */
    uint64_t last_coarse; /* coarse frame number that did (0: none) */
};

struct ms_load_cell
{
    const struct ms_load_bounds *b;
    uint64_t server_id;
    float demand;
};

struct ms_load_frame
{
    uint64_t n;       /* frame number (monotonic) */
    uint64_t unix_ms; /* wall clock */
    struct ms_load_cell *cells;
    size_t ncells;
    uint64_t *server_ids; /* parallel arrays */
    float *server_demand;
    size_t nservers;
};

/* What the master tells ms_load_frame() about one range. */
struct ms_load_frame_range
{
    uint64_t range_id;
    uint64_t table_id;
    const char *low;
    const char *high; /* NULL: unbounded */
    uint64_t server_id;
};

struct ms_load;

/* @tau_ms 0 = MS_LOAD_DEFAULT_TAU. Never fails (allocation aborts). */
struct ms_load *ms_load_create(uint32_t tau_ms);
void ms_load_destroy(struct ms_load *ld);

static inline double ms_load_demand(const struct ms_load_rates *r)
{
    return r->ent_s + r->thr_s;
}

/* Folds one heartbeat entry of @server_id into the model at @now_ms.
 * @l is borrowed. Caps are the server's (HeartbeatReq). */
void ms_load_report(struct ms_load *ld,
                    uint64_t server_id,
                    const Rt__RangeLoad *l,
                    uint64_t max_server_eps,
                    uint64_t max_range_eps,
                    uint64_t now_ms);

/* The range's model, or NULL when nothing was reported (or inherited). */
const struct ms_load_range *ms_load_find(const struct ms_load *ld,
                                         uint64_t range_id);
/* Drops the range (deleted table, or its id was replaced). */
void ms_load_forget(struct ms_load *ld, uint64_t range_id);
/* Keeps only ranges for which @keep(range_id, arg) is true. */
void ms_load_retain(struct ms_load *ld,
                    bool (*keep)(uint64_t range_id, void *arg),
                    void *arg);

/* A split of @parent at @key into @left = [low, key) and @right = [key,
 * high): the children start with the parent's rates divided in the
 * proportion of the sampled load on each side (half each without
 * samples), its samples sorted to their side, and its key totals divided
 * the same way; they are marked estimated until their own reports come.
 * The parent is forgotten. No-op when the parent is unknown. */
void ms_load_split(struct ms_load *ld,
                   uint64_t parent,
                   const char *key,
                   uint64_t left,
                   uint64_t right);
/* A merge of @a and @b into @merged: sums, samples of both. */
void ms_load_merge(struct ms_load *ld, uint64_t a, uint64_t b, uint64_t merged);

/* One sampled PartitionKey and the weight its samples stand for. */
struct ms_load_wpk
{
    const char *pk; /* borrowed from the range's samples */
    double w;
};

/* The fresh samples of one range, by key. */
struct ms_load_samples
{
    struct ms_load_wpk *v; /* distinct keys in UTF-16 order (malloc'd) */
    size_t n;              /* entries of v */
    size_t nsamples;       /* samples folded into v */
    double total;          /* their summed weight */
};

/* The samples of @r (may be NULL) in [@low, @high) (@high NULL:
 * unbounded), not older than MS_LOAD_SAMPLE_MS before @now_ms and of
 * positive weight, sorted in the Table service's UTF-16 key order with
 * equal keys folded into one entry of their summed weight. Samples taken
 * before a split or merge changed the bounds are left out. *@out is
 * always set (all zero when there is no sample); its pks point into @r
 * and stay valid until @r's next report, split, merge or forget, and
 * ms_load_samples_free() releases the array. */
void ms_load_range_samples(const struct ms_load_range *r,
                           const char *low,
                           const char *high,
                           uint64_t now_ms,
                           struct ms_load_samples *out);
/* Frees @s->v and zeroes @s. */
void ms_load_samples_free(struct ms_load_samples *s);

/* The load-median split key of [@low, @high) (@high NULL: unbounded) from
 * @r's samples not older than MS_LOAD_SAMPLE_MS before @now_ms: the
 * sampled PartitionKey K with low < K (< high), some sampled load below
 * K, that divides the sampled weight most evenly into [low, K) and [K,
 * high). A PartitionKey is never split and range bounds are
 * PartitionKeys, so any such K is a valid split point. Returns a malloc'd
 * key (caller frees), or NULL when there is none (no samples, or all the
 * load on one PartitionKey). *@left_share (may be NULL) gets the fraction
 * of the sampled weight below K. */
char *ms_load_split_key(const struct ms_load_range *r,
                        const char *low,
                        const char *high,
                        uint64_t now_ms,
                        double *left_share);

/* Records a history frame at @unix_ms with @n ranges (borrowed) and
 * their current demand. Server totals are summed from the ranges. */
void ms_load_frame(struct ms_load *ld,
                   uint64_t unix_ms,
                   const struct ms_load_frame_range *ranges,
                   size_t n);
/* Frames oldest first: @i in [0, ms_load_nframes()). */
size_t ms_load_nframes(const struct ms_load *ld);
const struct ms_load_frame *ms_load_frame_at(const struct ms_load *ld,
                                             size_t i);
/* Every range bound referenced by a kept frame. */
size_t ms_load_nbounds(const struct ms_load *ld);
const struct ms_load_bounds *ms_load_bounds_at(const struct ms_load *ld,
                                               size_t i);

/* Coarse frames oldest first: @i in [0, ms_load_ncoarse()). t (unix_ms)
 * is the start of the frame's bucket; the cells' b are in the same
 * registry as the fine frames'. */
size_t ms_load_ncoarse(const struct ms_load *ld);
const struct ms_load_frame *ms_load_coarse_at(const struct ms_load *ld,
                                              size_t i);
/* Coarse frames recorded since creation (a change means a new one). */
uint64_t ms_load_coarse_added(const struct ms_load *ld);

#endif
