/* What rt-sim writes and prints about a finished simulation: the
 * per-second metrics.csv, the dashboard's keyviz.json, and the summary
 * that `rt-sim compare` puts side by side (tools/rt-sim/README.md
 * defines every figure).
 *
 * Pure functions of the simulation (borrowed, read only): the same run
 * gives the same files. Thread: the caller's. */
#ifndef RS_REPORT_H
#define RS_REPORT_H

#include <stddef.h>
#include <stdint.h>

#include "rs_sim.h"

/* A load step: the demand rose by more than 30% within 3 s, or the
 * workload moved its hot keys. Recovered: the 503 rate back under 1% and
 * busiest / mean under 1.25. */
#define RS_STEP_RISE 1.30
#define RS_STEP_WITHIN_S 3
#define RS_RECOVER_503 0.01
#define RS_RECOVER_BM 1.25
#define RS_THRASH_S 600

struct rs_summary
{
    double demanded, served; /* entities, whole run */
    double served_pct, refused_pct;
    double bm_p50, bm_p99; /* busiest / mean over the seconds */
    uint64_t splits, merges, moves, transfers, bytes_moved;
    uint64_t refused_decisions;
    size_t steps, recovered;
    double recover_mean_s, recover_max_s; /* over the recovered steps */
    uint64_t thrash;                      /* decisions undone in 10 min */
    size_t ranges_end;
};

void rs_summarize(const struct rs_sim *s, struct rs_summary *out);
/* Writes DIR/metrics.csv; 0 or -1 (errno). */
int rs_write_metrics(const struct rs_sim *s, const char *path);
/* Writes keyviz.json; @policy and @seed are recorded in it. 0 or -1. */
int rs_write_keyviz(const struct rs_sim *s, const char *path);

#endif
