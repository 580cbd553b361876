/* Latency histogram with log-spaced buckets (HdrHistogram's layout, fixed
 * precision): values below 128 are exact, above that every power of two is
 * cut into 128 sub-buckets, so a reported percentile is within 0.4% of the
 * true value (the bucket midpoint is reported). Unit: microseconds, up to
 * 2^40 us (12 days). Fixed size, no allocation after init: recording is an
 * index computation and one increment.
 * Thread: not shared; merge copies between threads under the caller's lock. */
#ifndef RL_HIST_H
#define RL_HIST_H

#include <stdint.h>

#define RL_HIST_SUB_BITS 7
#define RL_HIST_SUB (1u << RL_HIST_SUB_BITS)
#define RL_HIST_MAX_BITS 40
#define RL_HIST_NBUCKETS \
    (RL_HIST_SUB * (RL_HIST_MAX_BITS - RL_HIST_SUB_BITS + 1))

struct rl_hist
{
    uint64_t count;
    uint64_t sum; /* us, for the mean */
    uint64_t min, max;
    uint32_t b[RL_HIST_NBUCKETS];
};

void rl_hist_reset(struct rl_hist *h);
void rl_hist_add(struct rl_hist *h, uint64_t us);
/* Adds @src into @dst. */
void rl_hist_merge(struct rl_hist *dst, const struct rl_hist *src);
/* Value (us) at percentile @p in [0, 100]: the smallest recorded value v
 * with at least ceil(p/100 * count) values <= v, reported as its bucket's
 * midpoint clamped to [min, max]. 0 when empty. p = 100 returns max. */
double rl_hist_pct(const struct rl_hist *h, double p);
double rl_hist_mean(const struct rl_hist *h);

/* Bucket helpers (exposed for tests). */
unsigned rl_hist_index(uint64_t us);
uint64_t rl_hist_lower(unsigned idx);
uint64_t rl_hist_width(unsigned idx);

#endif
