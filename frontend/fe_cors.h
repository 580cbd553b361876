/* CORS for the Table service (docs/table-api-spec.md §3.6, §3.8): each
 * account's CORS rules as the master pushes them in the map, the answer to
 * a preflight (OPTIONS), the CORS headers of ordinary responses, and the
 * limits a rule must keep when Set Service Properties stores it.
 *
 * Layers:
 *  - the rules snapshot: fe_cors_map_update() [any worker's loop, after
 *    each map its fe_route installs: fe_http.c makes it part of the
 *    route's map observer] builds a new snapshot and
 *    installs it (fe_snap.h: unless another worker already installed a
 *    newer map); fe_cors_preflight() / fe_cors_headers() [the request's
 *    worker] read it under the snapshot's read lock.
 *  - pure matching and checking (any thread): fe_cors_match,
 *    fe_cors_list_ok.
 *
 * Ownership: the snapshot is owned by this module (fe_cors_reset() frees
 * it); the functions on a request add to its response only. */
#ifndef FE_CORS_H
#define FE_CORS_H

#include <stddef.h>

#include "rt.pb-c.h"

struct fe_req;

/* Limits of a rule (spec §3.6, §9). */
#define FE_CORS_MAX 5
#define FE_CORS_ITEMS_MAX 64   /* origins / literal headers per rule */
#define FE_CORS_PREFIXED_MAX 2 /* "x-ms-meta-*"-style headers per list */
#define FE_CORS_ITEM_LEN_MAX 256

/* ---- the rules snapshot ---- */

/* [any worker's loop] Rebuilds the snapshot from @map (borrowed:
 * everything needed is copied). A map older than the snapshot's is
 * ignored. */
void fe_cors_map_update(const Rt__Map *map);
/* Frees the snapshot (shutdown, tests). */
void fe_cors_reset(void);

/* ---- rules ---- */

/* The lists of a rule, for fe_cors_list_ok. */
enum fe_cors_list {
    FE_CORS_LIST_ORIGINS,
    FE_CORS_LIST_METHODS,
    FE_CORS_LIST_HEADERS,
};
/* Is the comma list @s a valid list of @kind? Items are trimmed and must
 * be 1..FE_CORS_ITEM_LEN_MAX characters; an empty list is valid unless
 * @required. Methods must be among DELETE GET HEAD MERGE POST OPTIONS PUT
 * PATCH ("*" is refused); origins and headers may be "*"; at most
 * FE_CORS_ITEMS_MAX literal items and FE_CORS_PREFIXED_MAX "prefix*"
 * headers. 1 or 0. */
int fe_cors_list_ok(const char *s, enum fe_cors_list kind, int required);

/* First rule of @rules matching @origin ("*" or exact, case-insensitive),
 * @method (in AllowedMethods) and every header of the comma list
 * @req_headers (NULL = none; "*", exact or "prefix*" match, any case).
 * Returns its index or -1. */
int fe_cors_match(Rt__CorsRule *const *rules,
                  size_t n,
                  const char *origin,
                  const char *method,
                  const char *req_headers);

/* ---- on a request ---- */

/* OPTIONS: the preflight answer (no auth), in the storage XML error shape
 * when refused. Returns FE_API_RESPOND. */
int fe_cors_preflight(struct fe_req *req);
/* Adds Access-Control-Allow-Origin / -Expose-Headers (and
 * -Allow-Credentials) to the response being sent when the request has an
 * Origin matching one of the account's rules, and Vary: Origin to a GET or
 * HEAD with an Origin that matched a rule naming it or, while the account
 * has rules, none (not after a "*" rule). Not for OPTIONS. */
void fe_cors_headers(struct fe_req *req);

#endif
