/* Store: the partition server's one LMDB environment (DESIGN §3), holding
 * every range it serves. Named databases:
 *   "data"  storage key (common/rt_key.h) -> stored value (rt_entity.h)
 *   "meta"  "server_id" -> u64le; "ranges" -> opaque blob (the owned
 *           ranges, packed by the caller); "drop" ‖ u64be table_id -> ""
 *           for each table drop still in progress (resumed on restart);
 *           "dspan" ‖ u64be seq -> packed span, for each span drop in
 *           progress; other keys written by callers (ps_store_meta_write);
 *           "incarnation" -> 16 bytes (ps_store_meta_incarnation);
 *           "master_term" -> u64le, the highest master term seen
 *           (ps_store_meta_term; raised by ps_store_meta_write, never
 *           lowered); "key_format" -> u32le, the storage key format
 *           (RT_KEY_FORMAT, rt_key.h; missing = 1 in a store with data).
 *   "repl"  "rs" ‖ u64be range_id -> the range's replica state
 *           (ps_store_repl_get), written with every group changing it.
 *
 * The store executes entity operations (insert, replace, merge, delete,
 * upserts) with their existence and If-Match rules, stamps Timestamps, and
 * commits groups of write requests in one durable transaction (group commit:
 * default LMDB sync, never MDB_NOSYNC). It knows ranges only as the ids
 * writes carry to take their LSNs (ps_store_repl_get), and nothing of
 * ownership or RPC: callers check ownership before they come here.
 *
 * Checksums (docs/DESIGN-replication.md §5.6): every value an entity op
 * writes is sealed with the CRC32C of its storage key, header and blob
 * (rt_value_seal); raw writes (ps_kv) store values as given. Every read
 * that hands a stored value out (ps_store_get, ps_store_scan,
 * ps_store_snap_next) and every op that reads the old value (merge, an
 * ETag condition) checks it: a mismatch is RT_ECORRUPT for that request,
 * never the bad data, logged with the table. Values without the CRC flag
 * (written before checksums) are read unchecked. An unconditional replace,
 * upsert-replace or delete of a corrupt value succeeds: it never reads it.
 *
 * Threads: ps_store_open/close with no other user. Write functions
 * (ps_store_write_group, ps_store_meta_save, ps_store_drop_chunk) from one
 * thread at a time: the writer thread (ps_writer.h), or a test. Read
 * functions (ps_store_get, ps_store_scan, ps_store_meta_load,
 * ps_store_pending_drops) from any thread, concurrently with the writer:
 * each runs in its own read transaction (MDB_NOTLS) and never waits for it.
 *
 * Long keys: LMDB caps keys at ps_store_max_key() bytes (511 in Debian's
 * build), but a storage key can be ~6 KiB (PartitionKey and RowKey of 1024
 * UTF-16 units each). A storage key K shorter than T bytes (T =
 * ps_store_bucket_len(), max key - 1) is an LMDB key as is; a longer one
 * lives in a "bucket" record whose LMDB key is K[0:T] and whose value
 * holds, sorted, every (K[T:], value) pair of the long keys sharing that
 * prefix. Cutting keys to their first T bytes preserves order, no short
 * key is T bytes long, so LMDB order of records plus the order inside a
 * bucket is exactly memcmp order of full keys (README, "Long keys").
 *
 * Errors: RT_ENOTFOUND, RT_EEXIST, RT_EPRECOND per operation, and the
 * validation codes (RT_EINVAL, RT_EOUTOFRANGE, RT_ETOOMANYPROPS,
 * RT_EPROPTOOLARGE, RT_EENTITYTOOLARGE); LMDB failures become RT_ENOSPACE
 * (map full), RT_ECORRUPT, or RT_EIO. */
#ifndef PS_STORE_H
#define PS_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "rt_buf.h"

struct ps_store;
struct rt_filter;

/* Entity group transaction (spec §5.2): at most this many ops. */
#define PS_BATCH_MAX_OPS 100

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
struct ps_op
{
    /* in */
    enum ps_op_kind kind;
    const char *pk; /* NUL-terminated UTF-8 */
    const char *rk;
    const uint8_t *props; /* properties blob; ignored for DELETE */
    size_t props_len;
    int if_match_any;  /* If-Match: * */
    uint64_t if_match; /* If-Match ETag as ticks; 0 = no condition */
    int want_value;    /* copy the stored value into @value */
    /* out */
    int code;            /* 0, RT_EEXIST, RT_ENOTFOUND, RT_EPRECOND, ... */
    uint64_t ticks;      /* new Timestamp (0 for DELETE or failure) */
    struct rt_buf value; /* stored value when want_value and code == 0 */
};

/* One raw storage-level change (range moves): put @val under full storage
 * key @key, or delete @key (@deleted). No entity rules, no Timestamp: the
 * value is stored as given. Long keys go to their bucket as usual. */
struct ps_kv
{
    const uint8_t *key;
    size_t kn;
    const uint8_t *val; /* ignored when deleted */
    size_t vn;
    int deleted;
};

/* One write request: ops on one table. Not atomic: each op succeeds or
 * fails on its own. Atomic (entity group transaction, spec §5.2): at most
 * PS_BATCH_MAX_OPS ops (else RT_EINVAL at index PS_BATCH_MAX_OPS), one
 * PartitionKey (else RT_EDIFFPARTITIONS at the first op naming another),
 * each entity once (else RT_EDUPROW at the second occurrence); the ops run
 * in order in one transaction, all or nothing; the first failing op
 * decides status and failed_index.
 *
 * Every op is validated: key characters and UTF-8 (RT_EINVAL), key length
 * > RT_MAX_KEY_UTF16 UTF-16 units (RT_EOUTOFRANGE), a malformed properties
 * blob (RT_EINVAL), and the entity as it would be stored (after a merge):
 * more than RT_MAX_USER_PROPS properties (RT_ETOOMANYPROPS), a string or
 * binary value over its limit (RT_EPROPTOOLARGE), more than
 * RT_MAX_ENTITY_BYTES by Azure's size formula (RT_EENTITYTOOLARGE). */
struct ps_write
{
    /* in */
    uint64_t table_id;
    struct ps_op *ops; /* borrowed array of @n_ops */
    size_t n_ops;
    int atomic;
    /* out */
    int status;             /* 0; atomic: the failing op's code; any: an LMDB
                               failure (RT_ENOSPACE, RT_EIO) that failed them all */
    int failed_index;       /* atomic: index of the failing op; else -1 */
    const char *errmsg;     /* static message for status, or NULL (default) */
    uint64_t bytes_written; /* key + value bytes put */
    /* Effect on the stored data (load accounting), valid when committed:
     * entities added minus removed, and key + value bytes added minus
     * removed; txn_id is the id of the committing LMDB transaction (0 when
     * nothing was committed), comparable with ps_store_range_stats(). */
    int64_t count_delta;
    int64_t bytes_delta;
    uint64_t txn_id;
    /* Replication (docs/DESIGN-replication.md §5.2). In: @range_id, the
     * range the write belongs to (0 = none: no LSN). Out: @lsn, the LSN
     * the committing group took for that range when this write changed
     * data (every write of one range in one group shares it), 0 when it
     * changed nothing (a failed validation or condition) or had no range. */
    uint64_t range_id;
    uint64_t lsn;
    /* Raw mode (@kvs set; ops, n_ops and atomic are ignored): @n_kvs
     * storage-level puts/deletes (borrowed), applied in order; deleting a
     * missing key is not an error. status is 0 or an LMDB failure. */
    const struct ps_kv *kvs;
    size_t n_kvs;
    /* In, raw mode with @range_id: a replica applying its primary's group
     * @repl_lsn (0 = none). The range's record then takes applied_lsn =
     * @repl_lsn (the highest of the group's writes of the range) instead
     * of applied + 1, so two groups applied in one commit keep their own
     * LSNs, and the write takes it even when it changes nothing. The
     * range's writes of one commit must carry applied + 1, + 2, ... in
     * order: a gap or a repeat fails the write with RT_ELSNGAP (never a
     * hole in the data). */
    uint64_t repl_lsn;
    /* In, with @repl_lsn: the generation that made that group (its
     * primary_epoch; 0 = unknown), for the record's history. A write of
     * the range's primary (no @repl_lsn) is of the record's
     * primary_epoch. */
    uint64_t repl_gen;
};

/* Clears a write's outputs (frees op values) so it can be applied again or
 * dropped. Safe on a write never applied if its ops were zeroed. */
void ps_write_reset(struct ps_write *w);

/* What the newer of LMDB's two meta pages of DIR/data.mdb says, and the
 * file's length (ps_store_file_check). */
struct ps_store_file
{
    uint32_t psize;   /* page size */
    uint64_t last_pg; /* last page in use */
    uint64_t txnid;   /* last committed write transaction */
    uint64_t size;    /* file length in bytes */
};

/* The start-up check of DIR/data.mdb, before LMDB maps it (layout and
 * reasons in ps_store_file.c): reads both meta pages with pread and
 * checks the file holds every page the newer one says is in use.
 * Returns 0 (and *@info when @info is set), RT_ENOTFOUND when there is no
 * data.mdb (a new environment), RT_ECORRUPT with @errmsg "data file
 * DIR/data.mdb is truncated or corrupt: ..." (a short file, unreadable
 * metas, bad magic or version), or RT_EIO (open/stat failed). */
int ps_store_file_check(const char *dir,
                        struct ps_store_file *info,
                        char *errmsg);

/* Opens (creating when missing) the environment in directory @dir (created
 * if absent, one level) with a map of @map_size bytes, after
 * ps_store_file_check. A store of key format 1 (written before keys were
 * in UTF-16 order) is migrated in place first, in batches, logged with
 * counts (ps_store.c: idempotent, so a crash only repeats the scan); a
 * format newer than RT_KEY_FORMAT is refused (RT_ECORRUPT). On 0, *out
 * belongs to the caller (ps_store_close).
 * On error @errmsg (RT_ERRMSG_SIZE) says why. Errors: RT_EIO, RT_ECORRUPT
 * (a truncated or corrupt data file among others), RT_ENOSPACE. */
int ps_store_open(const char *dir,
                  size_t map_size,
                  struct ps_store **out,
                  char *errmsg);
/* Opens the existing environment in @dir read-only (MDB_RDONLY), for
 * inspection tools: nothing is created, migrated or written, and only the
 * read functions may be used. LMDB readers are safe next to a running
 * writer, so this works on a live directory too (each read sees one
 * committed snapshot). A store of key format 1 is refused (RT_ECORRUPT,
 * @errmsg says to start rt-partition-server on it once): its keys are not
 * in the order this build seeks in. On 0, *out belongs to the caller
 * (ps_store_close).
 * Errors, with @errmsg: RT_ENOTFOUND (no data.mdb), RT_ECORRUPT, RT_EIO. */
int ps_store_open_ro(const char *dir, struct ps_store **out, char *errmsg);
/* Closes the environment; no transaction may be running. NULL is ignored. */
void ps_store_close(struct ps_store *s);
/* Longest storage key LMDB accepts (511 with the stock build). */
size_t ps_store_max_key(const struct ps_store *s);
/* T: storage keys of T bytes or more live in buckets keyed by their first
 * T bytes. Fixed when the environment is created (kept in meta). */
size_t ps_store_bucket_len(const struct ps_store *s);

/* Key validation (spec §9), shared with the RPC layer: @s is a
 * NUL-terminated PartitionKey or RowKey. Returns 0; RT_EINVAL for bad
 * UTF-8 or a forbidden character (/ \ # ?, U+0000-U+001F, U+007F-U+009F);
 * RT_EOUTOFRANGE for more than RT_MAX_KEY_UTF16 UTF-16 code units. */
int ps_key_check(const char *s);

/* Applies @n write requests in ONE write transaction and commits it with
 * sync before returning (group commit). Each write's ops run in order; an
 * op sees the effects of the ops and writes before it. If the group fails
 * as a whole (LMDB error, e.g. map full), each write is retried in its own
 * transaction so one oversized write cannot fail its neighbours.
 * Timestamps: ticks = max(now, last assigned + 1, old ticks + 1), so no
 * two writes ever share a Timestamp and a rewrite always moves it forward.
 * Returns 0 (outcomes are in each write) or a negative code when even the
 * retries failed (it is also in each failed write's status). */
int ps_store_write_group(struct ps_store *s,
                         struct ps_write *const *w,
                         size_t n);

/* Replica state of one range: the "rs" ‖ u64be range_id record of the
 * "repl" DB (docs/DESIGN-replication.md §2.2; layout in ps_store_int.h).
 * ps_store_write_group keeps it in step with the data: every group that
 * changes a range's data sets applied_lsn = applied_lsn + 1 (a replica's
 * raw writes: their repl_lsn) and applied_epoch = epoch in the same
 * transaction, so after any crash the
 * data is exactly applied_lsn. A range without a record is at LSN 0 (a
 * data directory from before replication, or a range never written). */
enum ps_rs_role {
    PS_RS_ROLE_NONE = 0, /* same numbers as rt.ReplRole */
    PS_RS_ROLE_PRIMARY = 1,
    PS_RS_ROLE_SECONDARY = 2,
    PS_RS_ROLE_LEARNER = 3,
    PS_RS_ROLE__NR
};
enum ps_rs_state {
    PS_RS_NONE = 0, /* no copy; same numbers as ReplicaState.state */
    PS_RS_OK = 1,
    PS_RS_LEARNING = 2,
    PS_RS_DIVERGED = 3,
    PS_RS__NR
};
/* One primary generation of a range: the epoch at which it took over and
 * the first LSN it wrote (rt.EpochStart). */
struct ps_rs_gen
{
    uint64_t epoch;
    uint64_t first_lsn;
};
/* Generations a record keeps (the oldest are dropped), as the core's
 * RT_REPL_MAX_HISTORY. */
#define PS_RS_MAX_HISTORY 16
struct ps_rstate
{
    uint64_t epoch;
    uint64_t primary_epoch;
    uint64_t applied_epoch;
    uint64_t applied_lsn;
    uint64_t commit_lsn; /* highest cw learned */
    uint64_t sealed_epoch;
    enum ps_rs_role role;
    enum ps_rs_state state;
    /* The generations that made LSNs 1 .. applied_lsn, oldest first
     * (docs/DESIGN-replication.md §2.2, §7.3); n_hist 0 = unknown. Kept
     * by every group commit in the same transaction as its data: a group
     * of another generation than the last entry's appends (gen, its LSN);
     * a group of unknown generation (0) makes the history unknown. */
    struct ps_rs_gen hist[PS_RS_MAX_HISTORY];
    size_t n_hist;
};
/* Reads range @range_id's record (own read transaction; any thread).
 * Returns 0, RT_ENOTFOUND (no record: LSN 0), RT_ECORRUPT (bad size,
 * version or CRC32C) or RT_EIO. */
int ps_store_repl_get(struct ps_store *s,
                      uint64_t range_id,
                      struct ps_rstate *out);
/* Durably replaces range @range_id's record with @rs (borrowed), in its
 * own write transaction: writer thread only (or a test), like every
 * write. For assignments and seals; group commits keep applied_* alone.
 * Returns 0 or RT_ENOSPACE / RT_EIO. */
int ps_store_repl_put(struct ps_store *s,
                      uint64_t range_id,
                      const struct ps_rstate *rs);
/* Which fields ps_store_repl_update sets. */
enum ps_rs_field {
    PS_RS_SET_EPOCH = 1u << 0,         /* epoch */
    PS_RS_SET_ROLE = 1u << 1,          /* role */
    PS_RS_SET_PRIMARY_EPOCH = 1u << 2, /* primary_epoch */
    PS_RS_SET_SEALED_EPOCH = 1u << 3,  /* sealed_epoch, never lowered */
    /* applied_epoch, applied_lsn, commit_lsn and the history: a range
     * split here starts where its parent is (docs/DESIGN-replication.md
     * §9.1); a copy's end sets them to its snapshot's */
    PS_RS_SET_APPLIED = 1u << 4,
    /* state: a learner's copy (docs/DESIGN-replication.md §3.3) */
    PS_RS_SET_STATE = 1u << 5,
};
/* Durably sets the fields @set (PS_RS_SET_* bits) of range @range_id's
 * record to those of @rs (borrowed), keeping the others (a missing record
 * starts as ps_store_repl_get's LSN 0), in one write transaction: writer
 * thread only (PS_JOB_REPL_STATE), like every write. Returns 0,
 * RT_ECORRUPT, RT_ENOSPACE or RT_EIO. */
int ps_store_repl_update(struct ps_store *s,
                         uint64_t range_id,
                         unsigned set,
                         const struct ps_rstate *rs);

/* Change records: the common form of captured changes and migration
 * logs (range moves). One record is
 *   u64le txn_id ‖ u8 deleted ‖ u32le key_len ‖ key ‖ u32le val_len ‖ val
 * with the full storage key (long keys included) and the stored value
 * (empty for a delete). */
struct ps_change
{
    uint64_t txn_id;
    int deleted;
    const uint8_t *key; /* points into the buffer read */
    size_t kn;
    const uint8_t *val;
    size_t vn;
};
void ps_change_append(struct rt_buf *out,
                      uint64_t txn_id,
                      const uint8_t *key,
                      size_t kn,
                      const uint8_t *val,
                      size_t vn,
                      int deleted);
/* Reads the record at *@off of @p[0..n) and advances *@off. Returns 1 (got
 * one), 0 (end) or RT_ECORRUPT. */
int ps_change_next(const uint8_t *p,
                   size_t n,
                   size_t *off,
                   struct ps_change *c);

/* Capture (writer thread only): while on, every put or delete a group
 * commit makes (entity ops and raw writes) is appended as a change record
 * with the id of its committing transaction; records of an aborted
 * transaction are discarded. ps_store_capture_take moves what was captured
 * so far to @out (appended) and empties the capture. */
void ps_store_capture(struct ps_store *s, int on);
void ps_store_capture_take(struct ps_store *s, struct rt_buf *out);

/* Pre-commit hook (writer thread): called by a group commit after the
 * writes are applied and their LSNs assigned, just before the commit,
 * when some write of the group took an LSN here (a primary's group of a
 * replicated range: lsn != 0, repl_lsn == 0), with the transaction's id.
 * It may take the capture and ship the changes before they are durable.
 * A group whose commit then fails cannot be taken back from the peers:
 * the process logs the failure and aborts (a restarted primary is failed
 * over, docs/DESIGN-replication.md §5.3). */
typedef void (*ps_store_precommit_fn)(void *arg,
                                      struct ps_write *const *w,
                                      size_t n,
                                      uint64_t txn_id);
void ps_store_set_precommit(struct ps_store *s,
                            ps_store_precommit_fn fn,
                            void *arg);

/* Point read. On 0 the stored value is appended to @value (caller-owned).
 * Errors: RT_ENOTFOUND, RT_ECORRUPT (checksum mismatch), RT_EIO. */
int ps_store_get(struct ps_store *s,
                 uint64_t table_id,
                 const char *pk,
                 const char *rk,
                 struct rt_buf *value);
/* ps_store_get that also gives the id of its read transaction in
 * *@txn_id (0 when none was opened): the read saw exactly the writes with
 * txn_id <= it (lsn_T of replicated reads, ps_lsn_ring.h). */
int ps_store_get_txn(struct ps_store *s,
                     uint64_t table_id,
                     const char *pk,
                     const char *rk,
                     struct rt_buf *value,
                     uint64_t *txn_id);

struct ps_rec
{
    char *pk;
    char *rk;
    uint8_t *value; /* stored value, projected when the scan has a select */
    size_t value_len;
};

/* A scan of one table's range. Inputs are borrowed; outputs belong to the
 * scan until ps_scan_free().
 *
 * Key range: from max(range low, resume key, the filter's lower key bound)
 * up to min(range high, the filter's upper key bound) (rt_filter_bounds).
 * The filter is evaluated on each stored value, without building JSON.
 * A page ends at @limit entities, at @max_bytes of returned values, when
 * @budget_ms have passed (the clock is read every PS_SCAN_CLOCK_EVERY keys),
 * or after @max_scanned keys; then more = 1 and next_pk/next_rk name the
 * first key not examined (a page may be empty and still have more). */
struct ps_scan
{
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
    const struct rt_filter *filter; /* NULL = every entity */
    const char *const *select;      /* projection: names kept in the returned
                                       values' blobs; NULL/0 or a "*" = all */
    size_t n_select;
    unsigned budget_ms;   /* 0 = PS_SCAN_BUDGET_MS */
    uint64_t max_scanned; /* keys examined per page; 0 = no limit */
    /* out */
    struct ps_rec *recs;
    size_t n;
    int more;      /* the range has more keys after the examined ones */
    char *next_pk; /* first unexamined key when more */
    char *next_rk;
    int done;         /* !more and the filter's upper key bound (or an empty
                         filter range) ended the scan: no key after it, in
                         this range or any later one, can match */
    uint64_t scanned; /* keys examined */
    size_t bytes;     /* returned value bytes */
    uint64_t txn_id;  /* the read transaction's id (0: none opened) */
    /* in, optional: on RT_ECORRUPT from a value's checksum, that value's
     * storage key is appended here (for repair, ps_repair.h) */
    struct rt_buf *bad_key;
};
#define PS_SCAN_MAX_LIMIT 1000u
#define PS_SCAN_MAX_BYTES (4u * 1024u * 1024u)
#define PS_SCAN_BUDGET_MS 5000u
#define PS_SCAN_CLOCK_EVERY 256u

/* Runs @sc in one read transaction (a snapshot). Thread-safe (any thread,
 * concurrently with the writer). Errors: RT_EIO, RT_ECORRUPT (a stored key
 * or value is malformed, or a value in the scanned key range fails its
 * checksum, even one the filter would skip), RT_ENOMEM. On error sc's
 * outputs are freed. A projected value ($select) carries no checksum: its
 * blob is not the stored one. */
int ps_store_scan(struct ps_store *s, struct ps_scan *sc);
void ps_scan_free(struct ps_scan *sc);

/* Entities and key + value bytes of table @table_id with PartitionKey in
 * [low, high) (high NULL = unbounded), counted in one read transaction whose
 * id goes to *txn_id: a write with txn_id <= *txn_id is included, a later
 * one is not. Thread-safe. Errors: RT_EIO, RT_ECORRUPT. */
int ps_store_range_stats(struct ps_store *s,
                         uint64_t table_id,
                         const char *low,
                         const char *high,
                         uint64_t *count,
                         uint64_t *bytes,
                         uint64_t *txn_id);

/* A PartitionKey span of one table: [low, high), high NULL = unbounded.
 * Strings are borrowed. */
struct ps_span
{
    uint64_t table_id;
    const char *low;
    const char *high;
};
/* Storage key bounds of @sp: [*lo, *hi) (appended). */
void ps_span_keys(const struct ps_span *sp,
                  struct rt_buf *lo,
                  struct rt_buf *hi);

/* Snapshot of one span (range moves): a read transaction kept open across
 * calls, iterated in key order (long keys flattened out of their buckets).
 * One thread at a time, any thread (MDB_NOTLS). */
struct ps_snap;
/* Opens the snapshot; its transaction id goes to *txn_id: a write with
 * txn_id <= *txn_id is in the snapshot, a later one is not. @sp is copied.
 * On 0, *out belongs to the caller (ps_store_snap_close, before the store
 * closes). Errors: RT_EIO, RT_EBUSY (no reader slot). */
int ps_store_snap_open(struct ps_store *s,
                       const struct ps_span *sp,
                       struct ps_snap **out,
                       uint64_t *txn_id);
/* Appends the next entries as change records (txn_id 0, never deleted)
 * to @out until at least @max_bytes of keys and values were added or the
 * span ends; adds the number of entries to *n and their key + value bytes
 * to *bytes. Returns 1 (more left), 0 (span done) or RT_ECORRUPT/RT_EIO;
 * RT_ECORRUPT (a value fails its checksum) must fail the move, so a bad
 * value is never copied to the target. */
int ps_store_snap_next(struct ps_snap *sn,
                       struct rt_buf *out,
                       size_t max_bytes,
                       uint64_t *n,
                       uint64_t *bytes);
void ps_store_snap_close(struct ps_snap *sn);
/* Appends the value at the snapshot of each storage key @keys[0..n)
 * (borrowed; inside the span or not) as a change record to @out: a put,
 * or a deleted record (a tombstone) for a key absent there; adds the
 * key + value bytes to *bytes. For a keyed catch-up
 * (docs/DESIGN-replication.md §7.3). Returns 0 or RT_ECORRUPT (a value
 * fails its checksum: never copied), RT_EIO. */
struct ps_fetch_key;
int ps_store_snap_keys(struct ps_snap *sn,
                       const struct ps_fetch_key *keys,
                       size_t n,
                       struct rt_buf *out,
                       uint64_t *bytes);
/* Range @range_id's `rs` record as of the snapshot (ps_store_repl_get in
 * its transaction): since a group's data and its record commit together,
 * the snapshot holds exactly the data of *out's applied_lsn. Same errors
 * as ps_store_repl_get. */
int ps_store_snap_repl_get(struct ps_snap *sn,
                           uint64_t range_id,
                           struct ps_rstate *out);

/* Corruption repair (ps_store_repair.c). */

/* One storage key to fetch (borrowed). */
struct ps_fetch_key
{
    const uint8_t *key;
    size_t kn;
};
/* Reads @keys[0..n) and range @range_id's applied LSN (*@lsn) in one read
 * transaction, for a peer repairing its copy: found[i] = 1 with the
 * stored value appended to vals[i], or 0 (absent). Errors: RT_ENOTFOUND
 * (no complete copy of the range here: no `rs` record, or not OK),
 * RT_ECORRUPT (one of the values fails its checksum here too), RT_EIO.
 * Thread-safe. */
int ps_store_fetch(struct ps_store *s,
                   uint64_t range_id,
                   const struct ps_fetch_key *keys,
                   size_t n,
                   struct rt_buf *vals,
                   int *found,
                   uint64_t *lsn);
/* Replaces the corrupt local value of storage key @key with @val (NULL:
 * deletes the key), a value a peer read at its applied LSN @min_lsn of
 * range @range_id, in one synced transaction; only when the range's
 * applied LSN here is >= @min_lsn and the local value still fails its
 * checksum (the file comment says why that is safe). Returns 0 (repaired),
 * RT_EEXIST (nothing to repair: the key was written since, or is absent
 * as the peer says), RT_EBUSY (this copy is behind @min_lsn: ask again
 * later), RT_ECORRUPT (@val itself fails its checksum) or an LMDB error.
 * Writer thread (PS_JOB_REPAIR). */
int ps_store_repair(struct ps_store *s,
                    uint64_t range_id,
                    const uint8_t *key,
                    size_t kn,
                    const uint8_t *val,
                    size_t vn,
                    uint64_t min_lsn);
/* Verifies stored values from storage key @resume on (empty: the start)
 * in one read transaction, until @max_bytes of keys and values were
 * checked or @max_bad failed: their keys are appended to @bad
 * (ps_scrub_key_append), their count to *@n_bad, the bytes checked to
 * *@bytes. @resume becomes the first unexamined key, or empty with
 * *@wrapped = 1 at the end of the data. Returns 0 or an error (RT_ECORRUPT:
 * a bucket is unreadable). Thread-safe. */
int ps_store_scrub(struct ps_store *s,
                   struct rt_buf *resume,
                   size_t max_bytes,
                   struct rt_buf *bad,
                   size_t max_bad,
                   size_t *n_bad,
                   uint64_t *bytes,
                   int *wrapped);
/* A list of storage keys packed as u32be length ‖ key. _next returns 1
 * (one more: *key borrowed from @in), 0 (end) or RT_EINVAL. */
void ps_scrub_key_append(struct rt_buf *out, const uint8_t *key, size_t kn);
int ps_scrub_key_next(const struct rt_buf *in,
                      size_t *off,
                      const uint8_t **key,
                      size_t *kn);

/* Entities of @sp (one read transaction). Thread-safe. */
int ps_store_span_count(struct ps_store *s,
                        const struct ps_span *sp,
                        uint64_t *count);

/* The server's incarnation: 16 random bytes made the first time the
 * environment is opened (or upgraded) and never changed, so the master can
 * tell this disk from a wiped or copied one (docs/DESIGN-replication.md
 * §2.2). Reads the "incarnation" meta record, creating it when missing:
 * call it before the writer thread starts. Errors: RT_ECORRUPT (a record of
 * another size), RT_EIO, RT_ENOSPACE. */
#define PS_INCARNATION_SIZE 16
int ps_store_meta_incarnation(struct ps_store *s,
                              uint8_t out[PS_INCARNATION_SIZE]);

/* Meta: server id (0 = none yet) and the owned-ranges blob (appended to
 * @ranges; empty when none was saved). */
int ps_store_meta_load(struct ps_store *s,
                       uint64_t *server_id,
                       struct rt_buf *ranges);
/* Durably replaces server id and ranges blob (@ranges borrowed). */
int ps_store_meta_save(struct ps_store *s,
                       uint64_t server_id,
                       const void *ranges,
                       size_t ranges_len);
/* One more change of the meta DB, made in the same transaction. */
struct ps_meta_op
{
    const void *key;
    size_t kn;
    const void *val; /* ignored when del */
    size_t vn;
    int del; /* delete @key (missing is fine) */
};
/* ps_store_meta_save plus @ops, all in one durable transaction, which
 * also raises the stored master term to @master_term when that is higher
 * (0, or a lower one, leaves it: the record is never lowered,
 * docs/DESIGN-master-ha.md §5.4). */
int ps_store_meta_write(struct ps_store *s,
                        uint64_t server_id,
                        const void *ranges,
                        size_t ranges_len,
                        uint64_t master_term,
                        const struct ps_meta_op *ops,
                        size_t n_ops);
/* The highest master term ps_store_meta_write stored (0 when none was).
 * Any thread (a read transaction). Errors: RT_ECORRUPT (a record of
 * another size), RT_EIO. */
int ps_store_meta_term(struct ps_store *s, uint64_t *master_term);
/* Appends the meta key @prefix ‖ u64be @id (the form of every per-id
 * record: drop and span markers, move records) to @out. */
void ps_store_meta_key(struct rt_buf *out, const char *prefix, uint64_t id);
/* Calls @cb for every per-id meta record @prefix ‖ u64be id, in key
 * order, with the id and the value (borrowed for the call); other keys
 * that start with @prefix are skipped. A non-zero return from @cb stops
 * and is returned. */
typedef int (*ps_meta_cb)(uint64_t id,
                          const uint8_t *val,
                          size_t vn,
                          void *arg);
int ps_store_meta_scan(struct ps_store *s,
                       const char *prefix,
                       ps_meta_cb cb,
                       void *arg);

/* Deletes up to @max_keys LMDB records of table @table_id in one
 * transaction (a bucket record counts once). While keys remain, a "drop" marker
 * for the table is kept in meta so that a restarted server finishes the job
 * (ps_store_pending_drops). Adds the number of entities deleted to *deleted.
 * Returns 1 when keys remain, 0 when the table is empty (marker removed), or a
 * negative code. */
int ps_store_drop_chunk(struct ps_store *s,
                        uint64_t table_id,
                        size_t max_keys,
                        uint64_t *deleted);
/* Tables whose drop did not finish. On 0, *ids (malloc'd, free()) holds
 * *n ids. */
int ps_store_pending_drops(struct ps_store *s, uint64_t **ids, size_t *n);

/* Span drops (range moves: the source's keys after MOVE_DONE, a target's
 * keys after MOVE_ABORT or before MIGRATE_BEGIN). Like table drops, chunked
 * and resumable: while keys remain, meta holds the marker
 * PS_META_SPAN_PREFIX ‖ u64be @seq whose value is the packed span
 * (ps_store_span_marker builds both, e.g. to commit the marker together
 * with other meta changes before the first chunk runs).
 * Deletes up to @max_keys LMDB records of @sp in one transaction (a bucket
 * straddling a span bound is rewritten without the span's entries); adds
 * the entities deleted to *deleted. Returns 1 (keys remain), 0 (span
 * empty, marker removed) or a negative code. */
#define PS_META_SPAN_PREFIX "dspan"
int ps_store_span_drop_chunk(struct ps_store *s,
                             uint64_t seq,
                             const struct ps_span *sp,
                             size_t max_keys,
                             uint64_t *deleted);
void ps_store_span_marker(uint64_t seq,
                          const struct ps_span *sp,
                          struct rt_buf *key,
                          struct rt_buf *val);
/* Unfinished span drops, in seq order: calls @cb with each (span strings
 * borrowed for the call). */
typedef void (*ps_span_cb)(uint64_t seq, const struct ps_span *sp, void *arg);
int ps_store_pending_spans(struct ps_store *s, ps_span_cb cb, void *arg);

#endif
