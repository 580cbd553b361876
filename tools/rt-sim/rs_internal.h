/* Helpers of rs_sim.c shared with rs_trace.c (the replay drives the same
 * simulated cluster from recorded heartbeats instead of a workload).
 * Contracts as in rs_sim.h; times in simulated ms (s->now_ms). */
#ifndef RS_INTERNAL_H
#define RS_INTERNAL_H

#include "rs_sim.h"

/* What the policy and the load model see as "now" for s->now_ms. */
uint64_t rs__mono(const struct rs_sim *s);
/* Moves whose copy ends before @horizon (ms) switch servers. */
void rs__ops_progress(struct rs_sim *s, uint64_t horizon);
/* One call of the policy on the current view; its decisions carried out. */
void rs__policy(struct rs_sim *s);
/* Adds the current step's demand (rr[].demand/served/refused, servers'
 * demand) to the second being summed. */
void rs__account(struct rs_sim *s);
/* Recounts the servers' ranges and replicas. */
void rs__recount(struct rs_sim *s);
/* A zeroed range at index @i of the sorted arrays. */
void rs__insert_at(struct rs_sim *s, size_t i);
/* Indexes rv[@i]'s id (after its id was set). */
void rs__index(struct rs_sim *s, size_t i);
/* Records the bounds of range @id (copied). */
void rs__bounds_add(struct rs_sim *s,
                    uint64_t id,
                    uint64_t table_id,
                    const char *low,
                    const char *high);

#endif
