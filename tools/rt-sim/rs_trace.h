/* Trace replay for rt-sim: a load trace recorded by a master
 * (docs/TRACE.md, read with master/ms_trace.h) drives the simulated
 * cluster instead of a synthetic workload, and the decisions the
 * simulated policy takes can be checked against the recorded ones.
 *
 * Replay model (tools/rt-sim/README.md "Trace replay"): the cluster
 * starts as the first recorded map (servers, ranges, replicas). Records
 * are replayed in time order:
 *  - each recorded heartbeat is folded in by ms_load_report at its
 *    recorded time. A recorded range that exists in the simulated map
 *    with the same bounds gets its counters and samples as recorded (so
 *    under the recorded policy the load model sees exactly what the
 *    master saw). Otherwise (the maps diverged) its counters are
 *    redistributed over the simulated ranges by its PartitionKey
 *    samples, each sample standing for an equal share (as ms_load
 *    weighs them), and each simulated range reports its share with the
 *    samples that fell in it;
 *  - at each recorded tick the policy is called with the view of the
 *    simulated map at that time, and its decisions are carried out by
 *    the cost model (rs_sim.h);
 *  - a recorded map adds the ranges of tables created during the trace
 *    and follows servers going up and down.
 *
 * Thread: the caller's. The trace is read whole into memory. */
#ifndef RS_TRACE_H
#define RS_TRACE_H

#include <stdio.h>

#include "rs_sim.h"
#include "rt.pb-c.h"

struct rs_trace
{
    Rt__TraceRecord **rec;
    uint64_t *t; /* each record's time from the trace's start, ms (the
                  * segments laid end to end) */
    size_t n, cap;
    struct rs_tkey *keys; /* interned PartitionKeys, by id */
    size_t nkeys, keys_cap;
    const Rt__TraceHeader *hdr; /* the first segment's */
    bool truncated;
};

/* Reads the trace at @path. 0, or -1 with @err set. Free with
 * rs_trace_free. */
int rs_trace_load(const char *path,
                  struct rs_trace **out,
                  char *err,
                  size_t errlen);
void rs_trace_free(struct rs_trace *t);
/* The PartitionKey interned as @id, or NULL. */
const char *rs_trace_key(const struct rs_trace *t, uint64_t id);
/* Sets @cfg's servers, tick, start time and, when @recorded_policy,
 * the policy and its configuration to the recorded ones. */
void rs_trace_cfg(const struct rs_trace *t,
                  struct rs_cfg *cfg,
                  bool recorded_policy);
/* A simulation of @t's first map under @cfg (see rs_sim_create). */
struct rs_sim *rs_replay_create(const struct rs_cfg *cfg,
                                const struct rs_trace *t,
                                FILE *declog,
                                char *err,
                                size_t errlen);
/* Replays every record of @t. */
void rs_replay_run(struct rs_sim *s, const struct rs_trace *t);

/* Compares @s's decisions (a replay of @t) with the recorded ones of
 * origin "policy", prints the match to @out (matched, missing, extra,
 * time offsets, and why each difference arose where it can tell) and
 * returns the number of recorded decisions not matched within one tick. */
size_t rs_validate(const struct rs_sim *s, const struct rs_trace *t, FILE *out);

#endif
