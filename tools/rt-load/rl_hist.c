#include "rl_hist.h"

#include <string.h>

void rl_hist_reset(struct rl_hist *h)
{
    memset(h, 0, sizeof(*h));
    h->min = UINT64_MAX;
}

unsigned rl_hist_index(uint64_t us)
{
    unsigned m, shift;
    if (us < RL_HIST_SUB) {
        return (unsigned)us;
    }
    if (us >= (1ULL << RL_HIST_MAX_BITS)) {
        us = (1ULL << RL_HIST_MAX_BITS) - 1;
    }
    m = 63u - (unsigned)__builtin_clzll(us); /* 2^m <= us < 2^(m+1), m >= 7 */
    shift = m - RL_HIST_SUB_BITS;
    return RL_HIST_SUB + shift * RL_HIST_SUB +
           (unsigned)((us >> shift) - RL_HIST_SUB);
}

uint64_t rl_hist_lower(unsigned idx)
{
    unsigned shift, sub;
    if (idx < RL_HIST_SUB) {
        return idx;
    }
    shift = (idx - RL_HIST_SUB) / RL_HIST_SUB;
    sub = (idx - RL_HIST_SUB) % RL_HIST_SUB;
    return (uint64_t)(RL_HIST_SUB + sub) << shift;
}

uint64_t rl_hist_width(unsigned idx)
{
    if (idx < RL_HIST_SUB) {
        return 1;
    }
    return 1ULL << ((idx - RL_HIST_SUB) / RL_HIST_SUB);
}

void rl_hist_add(struct rl_hist *h, uint64_t us)
{
    h->b[rl_hist_index(us)]++;
    h->count++;
    h->sum += us;
    if (us < h->min) {
        h->min = us;
    }
    if (us > h->max) {
        h->max = us;
    }
}

void rl_hist_merge(struct rl_hist *dst, const struct rl_hist *src)
{
    if (!src->count) {
        return;
    }
    for (unsigned i = 0; i < RL_HIST_NBUCKETS; i++) {
        dst->b[i] += src->b[i];
    }
    dst->count += src->count;
    dst->sum += src->sum;
    if (src->min < dst->min) {
        dst->min = src->min;
    }
    if (src->max > dst->max) {
        dst->max = src->max;
    }
}

double rl_hist_pct(const struct rl_hist *h, double p)
{
    uint64_t want, seen = 0;
    if (!h->count) {
        return 0;
    }
    if (p >= 100.0) {
        return (double)h->max;
    }
    if (p <= 0.0) {
        return (double)h->min;
    }
    want = (uint64_t)(p / 100.0 * (double)h->count + 0.999999);
    if (want < 1) {
        want = 1;
    }
    for (unsigned i = 0; i < RL_HIST_NBUCKETS; i++) {
        seen += h->b[i];
        if (seen >= want) {
            double v =
                (double)rl_hist_lower(i) + (double)(rl_hist_width(i) - 1) / 2.0;
            if (v < (double)h->min) {
                v = (double)h->min;
            }
            if (v > (double)h->max) {
                v = (double)h->max;
            }
            return v;
        }
    }
    return (double)h->max;
}

double rl_hist_mean(const struct rl_hist *h)
{
    return h->count ? (double)h->sum / (double)h->count : 0;
}
