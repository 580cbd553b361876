/* Re-replication planner (docs/DESIGN-replication.md §8.2, §8.3): which
 * replicated ranges get a new copy (a LEARNER on which server) and which
 * surplus replica leaves a set once the copy that replaced it joined the
 * ISR. Pure: the caller (ms_repl.c) describes the ranges, as ms_rcore
 * holds them, and the servers, as the cluster sees them; the decisions go
 * back to it, which carries them out through ms_rcore_add_learner() and
 * ms_rcore_remove_replica(). So it is unit-tested alone.
 *
 * The rules, applied to every range with no operation in flight:
 * - a member is *dead* when its server has not been heard from for
 *   cfg.after_ms (--rereplicate-after-ms), or is unknown;
 * - ADD: the range has no learner, its primary is live, fewer than rf
 *   members are not dead (a dead server's copy, or a range created with
 *   fewer live servers than rf, or one a wiped server left), and a
 *   placeable server that is not a member exists: ms_place_one() chooses
 *   it (distinct servers, zones, least loaded; the range's @avoid only
 *   when it is the one candidate). At most
 *   cfg.max_inflight learners at a time cluster-wide (those already being
 *   built count); ranges with the fewest live in-sync copies first, then
 *   by id;
 * - REMOVE: the range has more members than rf and a SECONDARY that is
 *   dead, the one a joined learner replaced (@retire), or outside the
 *   ISR, whose removal leaves at least rf in the ISR: the dead one silent
 *   the longest first, then @retire, then the one outside the ISR with
 *   the lowest id. Failing those, a set larger than rf whose removal
 *   still leaves rf in the ISR loses a live in-sync SECONDARY (reason
 *   "over_rf"), unless a move is under way on the range (@moving: the
 *   move removes its own source): one whose zone holds another copy of
 *   the range first (the zones the set spans stay), then the one on the
 *   server holding the most replicas, the most demand, the lowest id.
 *   This is what settles a move a master restart forgot (the move is not
 *   durable, its learner joined) and a move whose source became primary
 *   again. One removal per range per plan; removals are not rate-limited
 *   (they copy nothing).
 *
 * Thread: any; no state. Everything passed in is borrowed for the call. */
#ifndef MS_REREPL_H
#define MS_REREPL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "rt_repl_ev.h"

struct ms_rerepl_config
{
    uint64_t after_ms;   /* --rereplicate-after-ms (60000) */
    size_t max_inflight; /* --max-rereplications (2) */
};

/* One server the cluster knows. */
struct ms_rerepl_server
{
    uint64_t id;
    const char *zone;   /* NULL or "" = none */
    size_t nreplicas;   /* replicas it holds, any role */
    double demand;      /* load of the ranges it is primary of */
    bool placeable;     /* up, connected, not draining: may take a copy */
    uint64_t silent_ms; /* since it was last heard (0: heard just now) */
};

/* One followed range. */
struct ms_rerepl_range
{
    struct rt_repl_conf conf; /* committed */
    bool busy;   /* an operation in flight (not STABLE, or proposing) */
    bool adding; /* a learner is being built (counts for the limit) */
    /* A server whose learner for this range failed lately (0: none): it
     * is chosen again only when no other server can take the copy. */
    uint64_t avoid;
    /* The replica a joined learner replaced (0: none): surplus even if
     * it came back into the ISR meanwhile. */
    uint64_t retire;
    /* A move of this master is under way: a set of rf + 1 in-sync
     * members is its own doing, and it removes the copy it moves. */
    bool moving;
};

enum ms_rerepl_kind {
    MS_REREPL_ADD,    /* a LEARNER on @server */
    MS_REREPL_REMOVE, /* @server leaves the replica set */
};

struct ms_rerepl_decision
{
    enum ms_rerepl_kind kind;
    uint64_t range_id;
    uint64_t server;
    uint64_t replaces;  /* ADD: the dead member it stands in for (0: none) */
    const char *reason; /* static: "dead", "under_replicated", "surplus",
                           "over_rf" */
};

/* Plans over the @nr ranges @r and the @ns servers @s (ids distinct) and
 * writes at most @cap decisions to @out, removals first. Returns how many
 * were written. */
size_t ms_rerepl_plan(const struct ms_rerepl_config *cfg,
                      const struct ms_rerepl_range *r,
                      size_t nr,
                      const struct ms_rerepl_server *s,
                      size_t ns,
                      struct ms_rerepl_decision *out,
                      size_t cap);

#endif
