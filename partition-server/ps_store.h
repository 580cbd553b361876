/* Store: the partition server's one LMDB environment (DESIGN §3), holding
 * every range it serves. Named databases:
 *   "data"  storage key (common/rt_key.h) -> stored value (rt_entity.h)
 *   "meta"  "server_id" -> u64le; "ranges" -> opaque blob (the owned
 *           ranges, packed by the caller); "drop" ‖ u64be table_id -> ""
 *           for each table drop still in progress (resumed on restart).
 *
 * The store executes entity operations (insert, replace, merge, delete,
 * upserts) with their existence and If-Match rules, stamps Timestamps, and
 * commits groups of write requests in one durable transaction (group commit:
 * default LMDB sync, never MDB_NOSYNC). It knows nothing about ranges,
 * epochs or RPC: callers check ownership before they come here.
 *
 * Threads: ps_store_open/close with no other user. Write functions
 * (ps_store_write_group, ps_store_meta_save, ps_store_drop_chunk) from one
 * thread at a time: the writer thread (ps_writer.h), or a test. Read
 * functions (ps_store_get, ps_store_scan, ps_store_meta_load,
 * ps_store_pending_drops) from any thread, concurrently with the writer:
 * each runs in its own read transaction (MDB_NOTLS) and never waits for it.
 *
 * Errors: RT_ENOTFOUND, RT_EEXIST, RT_EPRECOND per operation; LMDB failures
 * become RT_ENOSPACE (map full), RT_ECORRUPT, or RT_EIO. Keys longer than
 * LMDB's key limit (ps_store_max_key) are refused with RT_EOUTOFRANGE. */
#ifndef PS_STORE_H
#define PS_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "rt_buf.h"

struct ps_store;

/* Same numbers as rt.OpKind (proto/rt.proto). */
enum ps_op_kind {
    PS_OP_INSERT = 1,
    PS_OP_REPLACE = 2,        /* entity must exist */
    PS_OP_MERGE = 3,          /* entity must exist */
    PS_OP_DELETE = 4,         /* entity must exist */
    PS_OP_UPSERT_REPLACE = 5, /* insert or replace */
    PS_OP_UPSERT_MERGE = 6,   /* insert or merge */
    PS_OP__NR
};

/* One entity operation. Inputs are borrowed (they must stay valid until
 * the write is done); outputs belong to the op: ps_write_reset() frees. */
struct ps_op {
    /* in */
    enum ps_op_kind kind;
    const char *pk; /* NUL-terminated UTF-8 */
    const char *rk;
    const uint8_t *props; /* properties blob; ignored for DELETE */
    size_t props_len;
    int if_match_any; /* If-Match: * */
    uint64_t if_match; /* If-Match ETag as ticks; 0 = no condition */
    int want_value;    /* copy the stored value into @value */
    /* out */
    int code;           /* 0, RT_EEXIST, RT_ENOTFOUND, RT_EPRECOND, ... */
    uint64_t ticks;     /* new Timestamp (0 for DELETE or failure) */
    struct rt_buf value; /* stored value when want_value and code == 0 */
};

/* One write request: ops on one table. Not atomic: each op succeeds or
 * fails on its own. Atomic (entity group transaction): all or nothing; the
 * first failing op decides status and failed_index. */
struct ps_write {
    /* in */
    uint64_t table_id;
    struct ps_op *ops; /* borrowed array of @n_ops */
    size_t n_ops;
    int atomic;
    /* out */
    int status;       /* 0; atomic: the failing op's code; any: an LMDB
                         failure (RT_ENOSPACE, RT_EIO) that failed them all */
    int failed_index; /* atomic: index of the failing op; else -1 */
    uint64_t bytes_written; /* key + value bytes put */
};

/* Clears a write's outputs (frees op values) so it can be applied again or
 * dropped. Safe on a write never applied if its ops were zeroed. */
void ps_write_reset(struct ps_write *w);

/* Opens (creating when missing) the environment in directory @dir (created
 * if absent, one level) with a map of @map_size bytes. On 0, *out belongs to
 * the caller (ps_store_close). On error @errmsg (RT_ERRMSG_SIZE) says why.
 * Errors: RT_EIO, RT_ECORRUPT, RT_ENOSPACE. */
int ps_store_open(const char *dir, size_t map_size, struct ps_store **out,
                  char *errmsg);
/* Closes the environment; no transaction may be running. NULL is ignored. */
void ps_store_close(struct ps_store *s);
/* Longest storage key LMDB accepts (511 with the stock build). */
size_t ps_store_max_key(const struct ps_store *s);

/* Applies @n write requests in ONE write transaction and commits it with
 * sync before returning (group commit). Each write's ops run in order; an
 * op sees the effects of the ops and writes before it. If the group fails
 * as a whole (LMDB error, e.g. map full), each write is retried in its own
 * transaction so one oversized write cannot fail its neighbours.
 * Timestamps: ticks = max(now, last assigned + 1, old ticks + 1), so no
 * two writes ever share a Timestamp and a rewrite always moves it forward.
 * Returns 0 (outcomes are in each write) or a negative code when even the
 * retries failed (it is also in each failed write's status). */
int ps_store_write_group(struct ps_store *s, struct ps_write *const *w,
                         size_t n);

/* Point read. On 0 the stored value is appended to @value (caller-owned).
 * Errors: RT_ENOTFOUND, RT_EIO. */
int ps_store_get(struct ps_store *s, uint64_t table_id, const char *pk,
                 const char *rk, struct rt_buf *value);

/* Scan filter hook (the filter evaluator arrives in a later issue): return
 * 1 to include the entity, 0 to skip it, or a negative code to stop. */
typedef int (*ps_scan_match_cb)(void *arg, const char *pk, const char *rk,
                                const uint8_t *value, size_t len);

struct ps_rec {
    char *pk;
    char *rk;
    uint8_t *value;
    size_t value_len;
};

/* A scan over [max(low, start), high) of one table's range. Inputs are
 * borrowed; outputs belong to the scan until ps_scan_free(). */
struct ps_scan {
    /* in */
    uint64_t table_id;
    const char *low;  /* range low PK, inclusive ("" = table start) */
    const char *high; /* range high PK, exclusive; NULL = unbounded */
    int has_start;    /* resume at (start_pk, start_rk), inclusive */
    const char *start_pk;
    const char *start_rk;
    unsigned limit;   /* max entities returned (0 = PS_SCAN_MAX_LIMIT) */
    size_t max_bytes; /* value byte budget (0 = PS_SCAN_MAX_BYTES); at least
                         one entity is always returned when one exists */
    ps_scan_match_cb match; /* NULL = every entity */
    void *match_arg;
    /* out */
    struct ps_rec *recs;
    size_t n;
    int more;      /* the range has more keys after the returned ones */
    char *next_pk; /* first unreturned key when more */
    char *next_rk;
    uint64_t scanned; /* keys visited */
};
#define PS_SCAN_MAX_LIMIT 1000u
#define PS_SCAN_MAX_BYTES (4u * 1024u * 1024u)

/* Runs @sc in one read transaction (a snapshot). Errors: RT_EIO,
 * RT_ECORRUPT, or the match callback's code. On error sc's outputs are
 * freed. */
int ps_store_scan(struct ps_store *s, struct ps_scan *sc);
void ps_scan_free(struct ps_scan *sc);

/* Meta: server id (0 = none yet) and the owned-ranges blob (appended to
 * @ranges; empty when none was saved). */
int ps_store_meta_load(struct ps_store *s, uint64_t *server_id,
                       struct rt_buf *ranges);
/* Durably replaces server id and ranges blob (@ranges borrowed). */
int ps_store_meta_save(struct ps_store *s, uint64_t server_id,
                       const void *ranges, size_t ranges_len);

/* Deletes up to @max_keys keys of table @table_id in one transaction. While
 * keys remain, a "drop" marker for the table is kept in meta so that a
 * restarted server finishes the job (ps_store_pending_drops). Adds the
 * number deleted to *deleted. Returns 1 when keys remain, 0 when the table
 * is empty (marker removed), or a negative code. */
int ps_store_drop_chunk(struct ps_store *s, uint64_t table_id,
                        size_t max_keys, uint64_t *deleted);
/* Tables whose drop did not finish. On 0, *ids (malloc'd, free()) holds
 * *n ids. */
int ps_store_pending_drops(struct ps_store *s, uint64_t **ids, size_t *n);

#endif
