/* Placement of a new range's replica set (docs/DESIGN-replication.md
 * §8.3): which live servers hold its copies and which of them is the
 * primary. Pure: the caller (ms_balance.c) describes the candidate
 * servers, this module only chooses, so it is unit-tested alone.
 *
 * The rule: min(want, candidates) distinct servers, chosen one at a
 * time. Each pick takes, among the zones that hold the fewest replicas
 * chosen so far (and still have an unchosen candidate), the least-loaded
 * server: fewest replicas held, then least demand, then lowest id. So the
 * copies land in distinct zones while there are at least as many zones as
 * copies, and are spread as evenly as the zones allow otherwise. The
 * first pick is the least-loaded candidate overall: it is the primary.
 * Servers that declared no zone ("") share one zone.
 *
 * ms_place_one() applies the same rule to one more copy of a range that
 * already has some (re-replication, §8.2): the zones of the copies it
 * keeps count as chosen.
 *
 * Thread: any; no state. Everything passed in is borrowed for the call. */
#ifndef MS_PLACE_H
#define MS_PLACE_H

#include <stddef.h>
#include <stdint.h>

/* One server that may take a replica (up, connected, not draining). */
struct ms_place_server
{
    uint64_t id;
    const char *zone; /* failure domain; NULL or "" = none declared */
    size_t nreplicas; /* replicas it holds now, any role */
    double demand;    /* load of the ranges it is primary of (per s) */
};

/* Chooses up to @want distinct servers among the @n candidates @s (ids
 * distinct) and writes their ids to @out (room for @want), the primary
 * first. Returns how many were chosen: min(@want, @n). */
size_t ms_place_replicas(const struct ms_place_server *s,
                         size_t n,
                         size_t want,
                         uint64_t *out);

/* Chooses one server among the @n candidates @s (none of them holds the
 * range) for one more copy of a range whose kept copies are in the
 * @n_zones zones @zones (NULL or "" = none declared): the least-loaded
 * candidate among those whose zone holds the fewest of those copies.
 * Returns its index in @s, or -1 when @n is 0. */
int ms_place_one(const struct ms_place_server *s,
                 size_t n,
                 const char *const *zones,
                 size_t n_zones);

#endif
