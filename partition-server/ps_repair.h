/* Corruption repair and scrub of replicated ranges
 * (docs/DESIGN-replication.md §5.6, §13 step 13).
 *
 * Every stored value carries a CRC32C over its storage key and bytes
 * (rt_value_check). When a value of a replicated range fails it here:
 *  - a point get at the primary is answered from another replica: the
 *    key is fetched (REPL_FETCH) from a peer that holds the range in its
 *    in-sync set at the range's epoch or later, at an applied LSN f of at
 *    least the primary's cw (so it has every acknowledged write); the
 *    answer waits, as every replicated read does, until cw >= f (never
 *    ahead of what every in-sync replica holds), and the fetched value
 *    replaces the corrupt one (ps_store_repair: only while the local
 *    value still fails its checksum and the local copy is at f or later);
 *  - a scan answers RT_EBUSY (503 ServerBusy: the SDKs retry) and the
 *    value is repaired the same way in the background;
 *  - the scrub (--scrub-mb-per-s, 0 = off) verifies every stored value,
 *    a budget of bytes per second on the libuv threadpool, and repairs
 *    what fails from a peer; on an RF-1 range there is no other copy:
 *    the value is reported (log, rt_ps_corrupt_values_total) and left.
 * Peers are tried in turn; one that answers with an error (not in the
 * in-sync set, behind f, corrupt too, down) is skipped. When none can
 * help, the get is answered RT_ECORRUPT (500) as before.
 *
 * REPL_FETCH (ps_repair_on_fetch), checks in order: body unpacks and
 * names 1..PS_REPAIR_MAX_KEYS keys → else RT_EINVAL; the range is held
 * here as a replicated range → else RT_ENOTFOUND; this server is in its
 * in-sync set at an epoch >= the request's → else RT_ESTALE; every key is
 * a storage key of the range's table inside its bounds → else RT_EINVAL;
 * a complete copy (rs state OK) whose applied LSN >= min_lsn → else
 * RT_ENOTFOUND / RT_EBUSY; no value asked for fails its checksum here
 * → else RT_ECORRUPT. Answer: FetchResp{lsn = applied, kvs in the
 * request's order, deleted = absent}.
 *
 * Not done: a write that reads a corrupt old value (merge, If-Match)
 * fails RT_ECORRUPT until the scrub repairs it; a bucket whose framing is
 * damaged (not just one value) is not repairable by key, and a flipped
 * byte in a key is repaired as "absent" (the original key stays missing):
 * both need a full copy of the range (learners).
 *
 * Thread: loop thread only; the struct lives in ps_server.repair. */
#ifndef PS_REPAIR_H
#define PS_REPAIR_H

#include <stddef.h>
#include <stdint.h>

#include "ps_state.h"
#include "rt_buf.h"
#include "rt_rpc.h"

#define PS_REPAIR_MAX_KEYS 1000
/* Timeout of one REPL_FETCH call. */
#define PS_REPAIR_CALL_MS 2000
/* Default of --scrub-mb-per-s. */
#define PS_SCRUB_MB_S 4

/* Starts the scrub timer (after ps_repl_start). Returns 0. */
int ps_repair_start(struct ps_server *ps);
/* Stops the scrub; repairs in flight finish without answering clients
 * (held gets are answered RT_EBUSY). Before the writer stops.
 * Idempotent; NULL-safe. */
void ps_repair_stop(struct ps_server *ps);

/* REPL_FETCH from a peer (@body borrowed): see the header comment. */
void ps_repair_on_fetch(struct ps_server *ps,
                        struct rt_rpc_conn *conn,
                        uint64_t id,
                        const uint8_t *body,
                        size_t len);

/* A get of replicated range @range_id (primary) found the value of
 * storage key @key[0..kn) corrupt: answers request @id on @conn
 * (ENTITY_GET) from a peer's copy, or RT_ECORRUPT, and repairs the value.
 * @conn is ref'd until then. */
void ps_repair_get(struct ps_server *ps,
                   struct rt_rpc_conn *conn,
                   uint64_t id,
                   uint64_t range_id,
                   const uint8_t *key,
                   size_t kn);

/* Repairs the value of @key[0..kn) in range @range_id in the background
 * (a scan or the scrub found it corrupt). An RF-1 range is only counted. */
void ps_repair_key(struct ps_server *ps,
                   uint64_t range_id,
                   const uint8_t *key,
                   size_t kn);

/* Appends rt_ps_scrub_bytes_total, rt_ps_scrub_passes_total,
 * rt_ps_corrupt_values_total, rt_ps_repairs_total{outcome} and
 * rt_ps_repair_fetches_served_total to the Prometheus page @b. */
void ps_repair_metrics(struct ps_server *ps, struct rt_buf *b);

#endif
