/* Workloads of rt-sim: the demand on every key over simulated time.
 *
 * A workload is a key distribution of rt-load (struct rl_dist_cfg, parsed
 * by rl_dist_parse: the same uniform / zipfian / latest / sequential / hot
 * set models, so a simulated zipfian is the one rt-load drives a real
 * cluster with) plus a rate profile over time. Keys are global indexes
 * g in [0, keys): table t holds [t * keys_per_table, (t + 1) *
 * keys_per_table) and its PartitionKey is rl_pk_of_index() of g - t *
 * keys_per_table under the "seq" scheme, so key order is index order and
 * a range is an interval of indexes.
 *
 * Instead of drawing one request at a time the simulator asks for the
 * probability mass of an interval (rs_work_cdf) and for a few PartitionKey
 * samples inside it (rs_work_sample, inverse-CDF within the interval): the
 * same distribution, in O(1) per range instead of O(requests).
 *
 * Named workloads (rs_work_named):
 *   uniform   uniform, constant rate
 *   zipfian   zipfian theta 0.99 (rank 0 = the lowest key), constant rate
 *   hotset    1% of the keys get 90% of the demand; the hot window moves
 *             to the next 1% every 120 s
 *   tail      append-only: every request inserts the next key (seq-asc);
 *             the key space grows at the rate, the load is on its end
 *   diurnal   zipfian, rate * (1 + 0.6 sin): a day compressed into
 *             period_s (the run's duration by default), starting at night
 *   flash     uniform, plus a flash crowd of half the rate again on
 *             0.1% of the keys (a seeded place) from flash_at_s for
 *             flash_len_s
 *
 * Pure: no clock, no I/O; randomness only from the caller's seeded rng.
 * Thread: one workload belongs to one thread. */
#ifndef RS_WORK_H
#define RS_WORK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "rl_keys.h"
#include "rt_rand.h"

enum rs_profile {
    RS_PROFILE_CONST,
    RS_PROFILE_DIURNAL,
    RS_PROFILE_FLASH,
};

struct rs_work_cfg
{
    char name[32];
    struct rl_dist_cfg dist; /* rt-load's key distribution */
    enum rs_profile profile;
    uint64_t keys;   /* key indexes at the start, all tables */
    double rate;     /* base demand, entities/s */
    double period_s; /* diurnal: one day (0: the run's duration) */
    double amplitude;
    double flash_at_s, flash_len_s, flash_mult, flash_fraction;
    uint64_t seed; /* where the flash crowd lands */
};

/* Fills @cfg for the named workload (list above) with @keys and @rate;
 * 0, or -1 for an unknown name. */
int rs_work_named(const char *name,
                  uint64_t keys,
                  double rate,
                  double duration_s,
                  uint64_t seed,
                  struct rs_work_cfg *cfg);

struct rs_work
{
    struct rs_work_cfg cfg;
    double t_s;      /* the time of the interval being asked about */
    double dt_s;     /* its length */
    uint64_t nkeys;  /* keys now (grows for append-only) */
    uint64_t shape;  /* changes whenever rs_work_cdf would answer
                      * differently for some interval (the caller's mass
                      * cache key) */
    double rate_now; /* demand over the interval, entities/s */
    /* zipfian: exact prefix sums below RS_ZIPF_EXACT, an integral beyond */
    double *zh;
    double zh_total;
    uint64_t hot_lo, hot_n;    /* hot set / flash crowd window (no wrap) */
    double hot_p;              /* share of the demand on it */
    uint64_t tail_lo, tail_hi; /* append-only: keys inserted now */
    bool step;                 /* the shape stepped at this interval (a
                                * hot set moved, a flash crowd began) */
};

#define RS_ZIPF_EXACT 4096

void rs_work_init(struct rs_work *w, const struct rs_work_cfg *cfg);
void rs_work_fini(struct rs_work *w);
/* Moves the workload to the interval [@t_s, @t_s + @dt_s). */
void rs_work_at(struct rs_work *w, double t_s, double dt_s);
/* Share of the demand on keys [0, @x) in the current interval (0..1,
 * non-decreasing; x past the key space gives 1). */
double rs_work_cdf(const struct rs_work *w, uint64_t x);
/* A key index in [@lo, @hi) drawn by the distribution restricted to it
 * (@hi > @lo; UINT64_MAX = unbounded). */
uint64_t rs_work_sample(const struct rs_work *w,
                        struct rt_rng *rng,
                        uint64_t lo,
                        uint64_t hi);

#endif
