/* The helpers both built-in policies use ("default" and "none" in
 * ms_policy.c, "crdb" in ms_policy_crdb.c), defined in ms_policy_util.c.
 * ms_policy_util.c calls neither policy file, so both may call it without
 * a call cycle between the policy files. Nothing outside the policy
 * files includes this header.
 *
 * Every function here is pure: it reads the view it is given (borrowed,
 * nothing kept) and keeps no state. Thread: the master's loop only, like
 * the policies. */
#ifndef MS_POLICY_INT_H
#define MS_POLICY_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ms_policy.h"

/* What one decide() call has decided so far: d[0 .. n) of at most max,
 * and which ranges of the view a pass has used already. sload, by_srv
 * and srv_off are the default policy's per-server index (NULL for a
 * policy that does not build one). */
struct ms__out
{
    struct ms_decision *d;
    size_t n;
    size_t max;
    bool *used;    /* per range of the view: chosen by this call */
    double *sload; /* demand of each server of the view (by index), as
                    * the call found it */
    /* The ranges of server index j, in view order: by_srv[srv_off[j] ..
     * srv_off[j + 1]) (a pass over one server's ranges costs its ranges,
     * not the cluster's). */
    size_t *by_srv;
    size_t *srv_off;
};

/* The next decision of @o, zeroed but for @kind and @range_id; NULL when
 * @o is full. The pointer stays valid for the decide() call. */
struct ms_decision *ms__pol_emit(struct ms__out *o,
                                 enum ms_decision_kind kind,
                                 uint64_t range_id);

/* A server that may be given ranges: up and not being drained. */
bool ms__pol_eligible(const struct ms_server_view *s);

/* An eligible server with no move in flight, out of its cooldown. */
bool ms__pol_server_free(const struct ms_policy_config *c,
                         const struct ms_cluster_view *v,
                         const struct ms_server_view *s);

/* Placement: the eligible server with the fewest ranges (ties: the
 * lowest id); 0 when none. Fits ms_policy_ops.place (@state unused). */
uint64_t ms__pol_fewest_place(void *state, const struct ms_cluster_view *v);

/* The smoothed demand of @r (0 without a load report). */
double ms__pol_demand(const struct ms_range_view *r);

/* The per-range cap of @r on @s (@s may be NULL): the server's, else the
 * one its load report carries; 0: none. */
uint64_t ms__pol_range_cap(const struct ms_range_view *r,
                           const struct ms_server_view *s);

/* @t is 0 (never) or at least @ms before @now. */
bool ms__pol_since(uint64_t now, uint64_t t, uint32_t ms);

/* The index of server @id in @v (v->nservers when absent): a binary
 * search, the view listing servers by id, with a scan as the fallback for
 * a view that does not. */
size_t ms__pol_server_idx(const struct ms_cluster_view *v, uint64_t id);

/* Server @id of @v, or NULL; points into @v. */
const struct ms_server_view *ms__pol_server(const struct ms_cluster_view *v,
                                            uint64_t id);

/* How many ranges of @v belong to table @tid. */
size_t ms__pol_table_nranges(const struct ms_cluster_view *v, uint64_t tid);

/* The zone of server @id ("" when it has none or is not in @v); points
 * into @v or is a literal. */
const char *ms__pol_zone_of(const struct ms_cluster_view *v, uint64_t id);

/* Copies of @r in @zone once its copy on @src has left. */
size_t ms__pol_kept_in_zone(const struct ms_cluster_view *v,
                            const struct ms_range_view *r,
                            uint64_t src,
                            const char *zone);

#endif
