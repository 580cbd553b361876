/* Metrics: counters and latency histograms cheap enough for a request path,
 * and the Prometheus text exposition format (version 0.0.4) they are
 * scraped in. Every daemon's /metrics goes through rt_metrics_help and
 * rt_metrics_hist, so names, label escaping and histogram layout cannot
 * differ between them.
 *
 * Sharding: a counter or histogram has exactly one writer thread (a front
 * end worker, a daemon's loop). Writers add with relaxed atomic loads and
 * stores (plain moves on x86/arm64, no lock prefix, no fence); a scraper
 * on another thread reads with relaxed loads and sums the shards of every
 * writer (rt_hist_add_to). A scrape is therefore not an atomic snapshot:
 * a histogram's _count may differ by a request in flight from the sum of
 * its buckets read a moment earlier, which Prometheus tolerates (rates are
 * computed over many scrapes). Nothing here allocates or locks.
 *
 * Latency buckets are fixed and shared by every histogram (RT_HIST_LE_US:
 * 1-2.5-5 steps from 50 us to 10 s), so histograms of different daemons
 * aggregate with histogram_quantile() over the same `le` set. Values are
 * recorded in microseconds and exposed in seconds, the Prometheus base
 * unit. */
#ifndef RT_METRICS_H
#define RT_METRICS_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "rt_buf.h"

/* Single-writer counter (see above). Zero-initialised memory is 0. */
typedef _Atomic uint64_t rt_ctr;

static inline void rt_ctr_add(rt_ctr *c, uint64_t n)
{
    atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + n,
                          memory_order_relaxed);
}

static inline uint64_t rt_ctr_get(const rt_ctr *c)
{
    return atomic_load_explicit((rt_ctr *)c, memory_order_relaxed);
}

/* Upper bounds of the finite buckets, in microseconds; a last bucket
 * (+Inf) takes the rest. */
#define RT_HIST_NB 17
extern const uint64_t rt_hist_le_us[RT_HIST_NB];

/* A latency histogram shard: one writer, per-bucket (not cumulative)
 * counts. Zero-initialised memory is an empty histogram. */
struct rt_hist
{
    rt_ctr b[RT_HIST_NB + 1];
    rt_ctr sum_us;
};

/* The bucket index of @us (0..RT_HIST_NB). */
unsigned rt_hist_bucket(uint64_t us);

/* [the shard's writer] Records one observation of @us microseconds. */
static inline void rt_hist_observe(struct rt_hist *h, uint64_t us)
{
    rt_ctr_add(&h->b[rt_hist_bucket(us)], 1);
    rt_ctr_add(&h->sum_us, us);
}

/* A plain (not shared) sum of shards, what a scrape writes out. */
struct rt_hist_sum
{
    uint64_t b[RT_HIST_NB + 1];
    uint64_t sum_us;
    uint64_t count;
};

/* [any thread] Adds shard @h into @s (zero @s first). */
void rt_hist_add_to(const struct rt_hist *h, struct rt_hist_sum *s);

/* Appends "# HELP @name @help\n# TYPE @name @type\n" (@type "counter",
 * "gauge" or "histogram"). @help is escaped as the format requires
 * (backslash and newline). */
void rt_metrics_help(struct rt_buf *b,
                     const char *name,
                     const char *type,
                     const char *help);

/* Appends the label value @v escaped for the text format (backslash,
 * double quote, newline), without the quotes. */
void rt_metrics_label(struct rt_buf *b, const char *v);

/* Appends the series of histogram @name for one label set: @labels is
 * the already formatted and escaped inside of the braces (`a="x",b="y"`),
 * "" or NULL for none. Writes the cumulative `_bucket{...,le="..."}`
 * lines (le in seconds, ending with +Inf), `_sum` (seconds) and
 * `_count`. The HELP/TYPE lines are the caller's (once per name). */
void rt_metrics_hist(struct rt_buf *b,
                     const char *name,
                     const char *labels,
                     const struct rt_hist_sum *s);

/* The same for a histogram with other bounds (not latency): @n finite
 * upper bounds @le (ascending, in the unit exposed), @counts[n + 1]
 * per-bucket counts (the last is +Inf), @sum in the unit exposed. */
void rt_metrics_hist_le(struct rt_buf *b,
                        const char *name,
                        const char *labels,
                        const double *le,
                        size_t n,
                        const uint64_t *counts,
                        double sum);

#endif
