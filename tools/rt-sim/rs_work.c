/* Workloads of rt-sim (contract in rs_work.h).
 *
 * The CDFs follow rl_dist_pick (tools/rt-load/rl_keys.c) exactly where it
 * is exact (uniform, hot set, sequential) and the zipfian law it
 * approximates (rank r, r = 0 the lowest key, has weight (r + 1)^-theta):
 * prefix sums for the first RS_ZIPF_EXACT ranks, the Euler-Maclaurin
 * integral beyond (relative error < 1e-4 there), which also inverts in
 * closed form for sampling. */
#include "rs_work.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rl_spec.h"
#include "rt_alloc.h"

int rs_work_named(const char *name,
                  uint64_t keys,
                  double rate,
                  double duration_s,
                  uint64_t seed,
                  struct rs_work_cfg *cfg)
{
    char err[RL_ERR_SIZE];
    const char *dist = NULL;
    memset(cfg, 0, sizeof(*cfg));
    cfg->profile = RS_PROFILE_CONST;
    if (strcmp(name, "uniform") == 0 || strcmp(name, "flash") == 0) {
        dist = "uniform";
    } else if (strcmp(name, "zipfian") == 0 || strcmp(name, "diurnal") == 0) {
        dist = "zipfian:0.99";
    } else if (strcmp(name, "hotset") == 0) {
        dist = "hotset:0.01:0.9:120";
    } else if (strcmp(name, "tail") == 0) {
        dist = "seq-asc";
    } else {
        return -1;
    }
    if (rl_dist_parse(dist, &cfg->dist, err) != 0) {
        return -1;
    }
    snprintf(cfg->name, sizeof(cfg->name), "%s", name);
    cfg->keys = keys;
    cfg->rate = rate;
    cfg->seed = seed;
    if (strcmp(name, "diurnal") == 0) {
        cfg->profile = RS_PROFILE_DIURNAL;
        cfg->period_s = duration_s;
        cfg->amplitude = 0.6;
    } else if (strcmp(name, "flash") == 0) {
        cfg->profile = RS_PROFILE_FLASH;
        cfg->flash_at_s = duration_s / 4;
        cfg->flash_len_s = duration_s / 5;
        cfg->flash_mult = 0.5;
        cfg->flash_fraction = 0.001;
    }
    return 0;
}

/* ---- zipfian ---- */

static double rs__zint(double x, double theta)
{
    return pow(x, 1.0 - theta) / (1.0 - theta);
}

/* Sum of (r + 1)^-theta over ranks r < x. */
static double rs__zh(const struct rs_work *w, double x)
{
    double th = w->cfg.dist.theta;
    if (x <= 0) {
        return 0;
    }
    if (x <= RS_ZIPF_EXACT) {
        uint64_t i = (uint64_t)x;
        return w->zh[i];
    }
    return w->zh[RS_ZIPF_EXACT] + rs__zint(x + 0.5, th) -
           rs__zint(RS_ZIPF_EXACT + 0.5, th);
}

/* The rank whose prefix sum reaches @h (inverse of rs__zh). */
static uint64_t rs__zh_inv(const struct rs_work *w, double h)
{
    double th = w->cfg.dist.theta, x;
    if (h <= w->zh[RS_ZIPF_EXACT]) {
        size_t lo = 0, hi = RS_ZIPF_EXACT;
        while (lo < hi) { /* first i with zh[i + 1] > h */
            size_t mid = (lo + hi) / 2;
            if (w->zh[mid + 1] > h) {
                hi = mid;
            } else {
                lo = mid + 1;
            }
        }
        return lo;
    }
    x = pow((h - w->zh[RS_ZIPF_EXACT] + rs__zint(RS_ZIPF_EXACT + 0.5, th)) *
                (1.0 - th),
            1.0 / (1.0 - th)) -
        0.5;
    return x < RS_ZIPF_EXACT ? RS_ZIPF_EXACT : (uint64_t)x;
}

/* ---- lifecycle ---- */

void rs_work_init(struct rs_work *w, const struct rs_work_cfg *cfg)
{
    memset(w, 0, sizeof(*w));
    w->cfg = *cfg;
    w->nkeys = cfg->keys ? cfg->keys : 1;
    if (cfg->dist.kind == RL_DIST_ZIPFIAN || cfg->dist.kind == RL_DIST_LATEST) {
        w->zh = rt_xcalloc(RS_ZIPF_EXACT + 1, sizeof(*w->zh));
        for (size_t i = 1; i <= RS_ZIPF_EXACT; i++) {
            w->zh[i] = w->zh[i - 1] + pow((double)i, -cfg->dist.theta);
        }
        w->zh_total = rs__zh(w, (double)w->nkeys);
    }
    w->shape = 1;
}

void rs_work_fini(struct rs_work *w)
{
    free(w->zh);
    w->zh = NULL;
}

static double rs__rate(const struct rs_work *w, double t)
{
    const struct rs_work_cfg *c = &w->cfg;
    switch (c->profile) {
        case RS_PROFILE_DIURNAL: {
            double p = c->period_s > 0 ? c->period_s : 86400;
            /* -cos: the run starts at the night's trough */
            return c->rate * (1.0 + c->amplitude * -cos(2 * M_PI * t / p));
        }
        case RS_PROFILE_FLASH:
            if (t >= c->flash_at_s && t < c->flash_at_s + c->flash_len_s) {
                return c->rate * (1.0 + c->flash_mult);
            }
            return c->rate;
        case RS_PROFILE_CONST:
            break;
    }
    return c->rate;
}

void rs_work_at(struct rs_work *w, double t_s, double dt_s)
{
    const struct rs_work_cfg *c = &w->cfg;
    uint64_t old_lo = w->hot_lo, old_n = w->hot_n;
    double old_p = w->hot_p;
    w->t_s = t_s;
    w->dt_s = dt_s;
    w->step = false;
    w->rate_now = rs__rate(w, t_s);
    w->hot_n = 0;
    w->hot_p = 0;
    if (c->dist.kind == RL_DIST_HOTSET) {
        /* rl_dist_pick: window win covers [win * hot, win * hot + hot)
         * mod n, with probability hot_prob; the rest is uniform. */
        uint64_t hot = (uint64_t)(c->dist.hot_fraction * (double)w->nkeys);
        uint64_t win = c->dist.hot_period_s > 0
                           ? (uint64_t)(t_s / c->dist.hot_period_s)
                           : 0;
        if (hot < 1) {
            hot = 1;
        }
        if (hot < w->nkeys) {
            w->hot_lo = (win * hot) % w->nkeys;
            w->hot_n = hot;
            w->hot_p = c->dist.hot_prob;
        }
    } else if (c->profile == RS_PROFILE_FLASH && w->rate_now > c->rate) {
        struct rt_rng r;
        uint64_t hot = (uint64_t)(c->flash_fraction * (double)w->nkeys);
        if (hot < 1) {
            hot = 1;
        }
        rt_rng_seed(&r, c->seed ^ 0xf1a5c);
        w->hot_n = hot;
        w->hot_lo = rt_rng_below(&r, w->nkeys - hot + 1);
        w->hot_p = (w->rate_now - c->rate) / w->rate_now;
    }
    if (w->hot_lo != old_lo || w->hot_n != old_n || w->hot_p != old_p) {
        w->shape++;
        w->step = w->hot_n > 0;
    }
    if (c->dist.kind == RL_DIST_SEQ_ASC) {
        /* Every request inserts the next key. */
        uint64_t n = (uint64_t)(w->rate_now * dt_s + 0.5);
        w->tail_lo = w->nkeys;
        w->tail_hi = w->nkeys + (n ? n : 1);
        w->nkeys = w->tail_hi;
        w->shape++;
    }
}

/* Keys of [0, x) inside the window [lo, lo + n) taken mod nkeys. */
static double rs__overlap(uint64_t x, uint64_t lo, uint64_t n, uint64_t nk)
{
    uint64_t a = lo, b = lo + n, v = 0;
    if (b <= nk) {
        v = x <= a ? 0 : (x >= b ? n : x - a);
    } else { /* wraps: [a, nk) and [0, b - nk) */
        uint64_t b2 = b - nk;
        v = (x <= a ? 0 : (x >= nk ? nk - a : x - a)) + (x >= b2 ? b2 : x);
    }
    return (double)v;
}

double rs_work_cdf(const struct rs_work *w, uint64_t x)
{
    const struct rs_work_cfg *c = &w->cfg;
    double nk = (double)w->nkeys, u;
    if (c->dist.kind == RL_DIST_SEQ_ASC || c->dist.kind == RL_DIST_SEQ_DESC) {
        if (x <= w->tail_lo) {
            return 0;
        }
        if (x >= w->tail_hi) {
            return 1;
        }
        return (double)(x - w->tail_lo) / (double)(w->tail_hi - w->tail_lo);
    }
    if (x >= w->nkeys) {
        return 1;
    }
    switch (c->dist.kind) {
        case RL_DIST_ZIPFIAN:
            u = rs__zh(w, (double)x) / w->zh_total;
            break;
        case RL_DIST_LATEST:
            u = 1.0 - rs__zh(w, nk - (double)x) / w->zh_total;
            break;
        default:
            u = (double)x / nk;
            break;
    }
    if (w->hot_n) {
        u = (1.0 - w->hot_p) * u +
            w->hot_p * rs__overlap(x, w->hot_lo, w->hot_n, w->nkeys) /
                (double)w->hot_n;
    }
    return u;
}

uint64_t rs_work_sample(const struct rs_work *w,
                        struct rt_rng *rng,
                        uint64_t lo,
                        uint64_t hi)
{
    const struct rs_work_cfg *c = &w->cfg;
    double flo, fhi, u;
    uint64_t a, b;
    if (hi > w->nkeys && hi != UINT64_MAX) {
        hi = hi > lo + 1 ? hi : lo + 1;
    }
    if (hi == UINT64_MAX) {
        hi = w->nkeys > lo ? w->nkeys : lo + 1;
    }
    flo = rs_work_cdf(w, lo);
    fhi = rs_work_cdf(w, hi);
    if (fhi <= flo) {
        return lo + rt_rng_below(rng, hi - lo);
    }
    u = flo + rt_rng_unit(rng) * (fhi - flo);
    if (c->dist.kind == RL_DIST_ZIPFIAN && !w->hot_n) {
        uint64_t k = rs__zh_inv(w, u * w->zh_total);
        return k < lo ? lo : (k >= hi ? hi - 1 : k);
    }
    /* Otherwise bisect the CDF: the first key whose next one passes u. */
    a = lo;
    b = hi - 1;
    while (a < b) {
        uint64_t m = a + (b - a) / 2;
        if (rs_work_cdf(w, m + 1) > u) {
            b = m;
        } else {
            a = m + 1;
        }
    }
    return a;
}
