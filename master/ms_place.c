/* Placement of a replica set (contract in ms_place.h).
 *
 * Quadratic in the number of candidates per pick, and a range has at most
 * MS_REPLICAS_MAX copies: a cluster's handful of servers costs nothing
 * next to the catalog commit that follows. */
#include "ms_place.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "rt_alloc.h"

static const char *ms__place_zone(const struct ms_place_server *s)
{
    return s->zone ? s->zone : "";
}

/* True when @a is less loaded than @b: replicas, then demand, then id. */
static bool ms__place_lighter(const struct ms_place_server *a,
                              const struct ms_place_server *b)
{
    if (a->nreplicas != b->nreplicas) {
        return a->nreplicas < b->nreplicas;
    }
    if (a->demand != b->demand) {
        return a->demand < b->demand;
    }
    return a->id < b->id;
}

/* Replicas already chosen in @zone. */
static size_t ms__place_in_zone(const struct ms_place_server *s,
                                const bool *chosen,
                                size_t n,
                                const char *zone)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (chosen[i] && strcmp(ms__place_zone(&s[i]), zone) == 0) {
            k++;
        }
    }
    return k;
}

size_t ms_place_replicas(const struct ms_place_server *s,
                         size_t n,
                         size_t want,
                         uint64_t *out)
{
    bool *chosen = rt_xcalloc(n ? n : 1, sizeof(*chosen));
    size_t got = 0;

    while (got < want) {
        size_t best = n, best_zone_k = 0;
        for (size_t i = 0; i < n; i++) {
            size_t k;
            if (chosen[i]) {
                continue;
            }
            k = ms__place_in_zone(s, chosen, n, ms__place_zone(&s[i]));
            if (best == n || k < best_zone_k ||
                (k == best_zone_k && ms__place_lighter(&s[i], &s[best]))) {
                best = i;
                best_zone_k = k;
            }
        }
        if (best == n) {
            break; /* every candidate is chosen */
        }
        chosen[best] = true;
        out[got++] = s[best].id;
    }
    free(chosen);
    return got;
}

int ms_place_one(const struct ms_place_server *s,
                 size_t n,
                 const char *const *zones,
                 size_t n_zones)
{
    int best = -1;
    size_t best_k = 0;
    for (size_t i = 0; i < n; i++) {
        size_t k = 0;
        for (size_t j = 0; j < n_zones; j++) {
            const char *z = zones[j] ? zones[j] : "";
            k += strcmp(z, ms__place_zone(&s[i])) == 0;
        }
        if (best < 0 || k < best_k ||
            (k == best_k && ms__place_lighter(&s[i], &s[best]))) {
            best = (int)i;
            best_k = k;
        }
    }
    return best;
}
