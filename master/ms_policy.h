/* Policy: where ranges go and how the partition map is reshaped. A policy
 * is a vtable over a read-only view of the cluster, chosen by name in the
 * master's configuration (--policy), so another policy can be dropped in
 * and compared (docs/DESIGN.md §4). It never touches the catalog or the
 * network: the master builds the view, asks, carries the answer out and records
 * every decision, with the reason the policy gave, as an event.
 *
 * Two operations:
 *  - place: the server for a new table's first range;
 *  - decide: a list of decisions (split R at K, merge R1 R2, move R to S,
 *    transfer the primary role of replicated R to its in-sync replica S,
 *    move replicated R's copy on server S2 to S)
 *    plus informational marks (R became hot / cooled down) from the
 *    per-range loads and the time in the view. A policy may keep state
 *    between calls (e.g. since when a range is hot); the master calls
 *    decide about twice a second.
 *
 * Policies:
 *  - "default": placement on the live, non-draining server with the
 *    fewest ranges; split / move / merge as described at
 *    ms_policy_config below (master/README.md "Load balancing");
 *  - "none": the same placement, never decides anything (a baseline to
 *    compare against, or to reshape the map by hand with rtctl);
 *  - "crdb": CockroachDB's load-based splitting, store rebalancer and
 *    merge queue mapped onto our decisions (ms_policy_crdb.h).
 * The names are a table in ms_policy.c: another policy is one line there.
 *
 * Thread: master loop thread. The view and everything it points to is
 * borrowed for the duration of one call. */
#ifndef MS_POLICY_H
#define MS_POLICY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ms_load.h"

struct ms_server_view
{
    uint64_t id;
    bool up;
    bool draining;           /* being emptied: no new ranges, no move targets */
    size_t nranges;          /* ranges assigned in the map */
    uint32_t pending;        /* queued write ops at the last heartbeat */
    uint64_t max_server_eps; /* its caps (0 = none), from heartbeats */
    uint64_t max_range_eps;
    unsigned moving;  /* moves in flight from or to it */
    uint64_t move_ms; /* when its last move ended (0 = never) */
    const char *zone; /* its --zone ("" = none; NULL counts as "") */
    size_t nreplicas; /* replicas of ranges it holds, any role */
};

struct ms_range_view
{
    uint64_t id;
    uint64_t table_id;
    const char *low;
    const char *high; /* NULL: unbounded */
    uint64_t server_id;
    uint64_t epoch;
    bool busy;           /* a split, merge or move of it is in flight */
    bool replicated;     /* more than one replica: split when hot (pass 2),
                          * never merged (merges need aligned sets); its
                          * primary role may be transferred within its
                          * ISR, and a secondary copy moved to even out
                          * the servers' replica counts */
    const uint64_t *isr; /* replicated: the in-sync replicas, the primary
                          * (server_id) included */
    size_t nisr;
    const uint64_t *replicas; /* replicated: every member, any role */
    size_t nreplicas;
    uint32_t rf;       /* copies it should have (0: not known) */
    uint64_t born_ms;  /* this id appeared (create, split, merge, or the
                        * master's start for ranges it loaded) */
    uint64_t split_ms; /* the last split involving it or its parents
                        * (the master's start for ranges it loaded) */
    uint64_t move_ms;  /* its last move ended (0 = never) */
    const struct ms_load_range *load; /* NULL: nothing reported yet */
};

struct ms_cluster_view
{
    const struct ms_server_view *servers; /* by id */
    size_t nservers;
    const struct ms_range_view *ranges; /* by (table_id, low) */
    size_t nranges;
    uint64_t now_ms; /* monotonic */
    unsigned moves;  /* moves and transfers in flight (all kinds) */
};

enum ms_decision_kind {
    MS_DECIDE_HOT,   /* mark: range became hot (nothing to execute) */
    MS_DECIDE_COOL,  /* mark: range is no longer hot */
    MS_DECIDE_SPLIT, /* split range_id at key */
    MS_DECIDE_MERGE, /* merge range_id with range_id2 (adjacent, in order) */
    MS_DECIDE_MOVE,  /* move range_id to server_id */
    /* hand replicated range_id's primary role to server_id, a member of
     * its ISR (docs/DESIGN-replication.md §9.4) */
    MS_DECIDE_TRANSFER,
    MS_DECIDE__NR
};

const char *ms_decision_kind_name(enum ms_decision_kind k);

struct ms_decision
{
    enum ms_decision_kind kind;
    uint64_t range_id;
    uint64_t range_id2; /* merge: the right-hand neighbour */
    uint64_t server_id; /* move, transfer: the target */
    uint64_t src_id;    /* move of a replicated range's secondary copy:
                         * the server it leaves (0: the primary's copy) */
    char *key;          /* split: malloc'd, freed by ms_decisions_free */
    char reason[256];   /* one line for humans, kept in the event */
    /* Figures that justified it (0 when not applicable). */
    double load;      /* demand of range_id (entities + refused / s) */
    double load2;     /* merge: demand of range_id2 */
    double threshold; /* the threshold it was compared with */
    double src_load;  /* move, transfer: demand of the source and target
                       * servers */
    double dst_load;
    double mean_load; /* move: mean demand of eligible servers */
    double share;     /* split: sampled load share left of the key */
};

void ms_decisions_free(struct ms_decision *d, size_t n);

/* Thresholds of the default policy (flags of rt-master; defaults from
 * ms_policy_config_default, chosen for 3 partition servers on 2 cores). */
struct ms_policy_config
{
    /* Split a range whose demand stays >= split_eps entities/s (or >= 90%
     * of its server's per-range cap when that is lower) — or whose busy
     * fraction stays >= split_busy_pct% with at least split_eps/4 — for
     * split_sustain_ms, at the load-median PartitionKey, when the split
     * helps: the range is held back by its per-range cap, or another
     * live server carries less than its server minus half the range
     * (so a half can move there). A server above the mean whose load no
     * single range move evens out gets its busiest range split too. */
    double split_eps;           /* 2000 */
    unsigned split_busy_pct;    /* 0 = ignore the busy fraction */
    uint32_t split_sustain_ms;  /* 1500 */
    uint32_t split_cooldown_ms; /* 3000: a new range may not split sooner */
    unsigned split_max_ranges;  /* 64 ranges per table at most */
    unsigned hot_exit_pct;      /* 70: hot until demand < 70% of it */
    /* Move ranges off a server whose demand exceeds the mean of the live,
     * non-draining servers by move_tolerance_pct% and by move_min_eps, to
     * the least-loaded one, when that lowers the larger of the two by
     * move_gain_pct% at least. A server's demand is that of the ranges it
     * is primary of; replicated ranges are balanced first, and only, by
     * transferring their primary role within their ISR (no copy), with the
     * same thresholds, cooldowns and max_moves (docs/DESIGN-replication.md
     * §9.4); a call that decides a transfer decides no move. Then, in a
     * call that decided neither, replicas are balanced by count: when
     * the live, non-draining servers' replica counts differ by more than
     * one, one secondary copy of a healthy replicated range (ISR = its
     * rf members) moves from the fullest server to the emptiest one that
     * holds none of it (the zone rule of ms_place_one: a zone holding
     * fewer of the kept copies first), the range's smallest candidate
     * first; both servers free (not moving, server_cooldown_ms), the
     * range past move_cooldown_ms, under max_moves, one such move per
     * call. */
    unsigned move_tolerance_pct; /* 25 */
    double move_min_eps;         /* 500 */
    unsigned move_gain_pct;      /* 10 */
    uint32_t move_cooldown_ms;   /* 10000: per range, after a move */
    uint32_t server_cooldown_ms; /* 2000: per server, after a move */
    unsigned max_moves;          /* 2 moves in flight at most */
    /* Merge two adjacent ranges of one table on one server when both
     * stayed below merge_eps for merge_sustain_ms, together hold at most
     * merge_max_bytes, and no split involving them happened in the last
     * merge_after_split_ms. */
    double merge_eps;              /* 50 */
    uint32_t merge_sustain_ms;     /* 60000 */
    uint64_t merge_max_bytes;      /* 256 MiB */
    uint32_t merge_after_split_ms; /* 300000 (5 min) */
    /* Parameters only one policy has, "KEY=VALUE[,KEY=VALUE...]"
     * (rt-master --policy-opt; NULL or "" = none). Borrowed: read by
     * ms_policy_create() only, which refuses a key the policy does not
     * know; nothing of it is kept. */
    const char *opts;
};

void ms_policy_config_default(struct ms_policy_config *cfg);

struct ms_policy_ops
{
    const char *name;
    /* Server id for a new range, or 0 when no server can take it. */
    uint64_t (*place)(void *state, const struct ms_cluster_view *view);
    /* Writes up to @max decisions to @out; returns how many. */
    size_t (*decide)(void *state,
                     const struct ms_cluster_view *view,
                     struct ms_decision *out,
                     size_t max);
    void (*destroy)(void *state);
};

struct ms_policy
{
    const struct ms_policy_ops *ops;
    void *state;
};

/* Creates the policy named @name (one of ms_policy_names(); NULL =
 * "default") with @cfg (NULL = defaults; copied). Returns 0 or RT_EINVAL for an
 * unknown name. Release with ms_policy_destroy(). */
int ms_policy_create(const char *name,
                     const struct ms_policy_config *cfg,
                     struct ms_policy *out);
/* The same; on RT_EINVAL @errmsg (RT_ERRMSG_SIZE bytes) says what is
 * wrong: an unknown name (listing the known ones) or a bad cfg->opts. */
int ms_policy_create_msg(const char *name,
                         const struct ms_policy_config *cfg,
                         struct ms_policy *out,
                         char *errmsg);
/* The known policy names, "default|none|crdb" (static storage). */
const char *ms_policy_names(void);
void ms_policy_destroy(struct ms_policy *p);

static inline uint64_t ms_policy_place(const struct ms_policy *p,
                                       const struct ms_cluster_view *view)
{
    return p->ops->place(p->state, view);
}

static inline size_t ms_policy_decide(const struct ms_policy *p,
                                      const struct ms_cluster_view *view,
                                      struct ms_decision *out,
                                      size_t max)
{
    return p->ops->decide ? p->ops->decide(p->state, view, out, max) : 0;
}

/* The demand above which the default policy calls a range hot, given its
 * server's per-range cap (0 = none). */
double ms_policy_hot_threshold(const struct ms_policy_config *cfg,
                               uint64_t max_range_eps);

#endif
