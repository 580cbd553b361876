/* Policy: where ranges go. A policy is a vtable over a read-only view of
 * the cluster, so another policy can be dropped in and compared (DESIGN
 * §4). It never touches the catalog or the network: the master builds the
 * view, asks, and carries out the answer.
 *
 * This slice has one decision, placing a new table's first range. The
 * load-balancing issue adds a `decide` operation (split / move / merge
 * proposals from the per-range loads that are already in the view) next
 * to `place`.
 *
 * Thread: master loop thread. The view and everything it points to is
 * borrowed for the duration of one call. */
#ifndef MS_POLICY_H
#define MS_POLICY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Per-range load as reported in the latest heartbeat (rt.RangeLoad). */
struct ms_range_load
{
    uint64_t range_id;
    uint64_t requests; /* since the previous heartbeat */
    uint64_t entities;
    uint64_t bytes_written;
    uint64_t exec_us;
    uint64_t key_count; /* totals */
    uint64_t key_bytes;
};

struct ms_server_view
{
    uint64_t id;
    bool up;
    size_t nranges;                    /* ranges assigned in the map */
    const struct ms_range_load *loads; /* latest heartbeat, may be NULL */
    size_t nloads;
    uint32_t pending; /* queued write ops at the last heartbeat */
};

struct ms_cluster_view
{
    const struct ms_server_view *servers;
    size_t nservers;
};

struct ms_policy_ops
{
    const char *name;
    /* Server id for a new range, or 0 when no server can take it. */
    uint64_t (*place)(void *state, const struct ms_cluster_view *view);
};

struct ms_policy
{
    const struct ms_policy_ops *ops;
    void *state;
};

/* The default policy: a new range goes to the live server with the fewest
 * ranges (ties: the lowest id). Stateless; the result needs no release. */
struct ms_policy ms_policy_default(void);

static inline uint64_t ms_policy_place(const struct ms_policy *p,
                                       const struct ms_cluster_view *view)
{
    return p->ops->place(p->state, view);
}

#endif
