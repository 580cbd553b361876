/* Store internals shared by the files of the store (ps_store.c: env,
 * open/close, long-key buckets, point access, iteration, change capture;
 * ps_store_write.c: group commits; ps_store_scan.c: gets, scans,
 * snapshots; ps_store_meta.c: meta records, table and span drops;
 * ps_store_repl.c: replica state records and group LSNs). Not
 * for other modules: they use ps_store.h.
 *
 * Thread: as the public function calling them (ps_store.h). */
#ifndef PS_STORE_INT_H
#define PS_STORE_INT_H

#include <lmdb.h>
#include <stddef.h>
#include <stdint.h>

#include "ps_store.h"
#include "rt_buf.h"

#define PS_META_SERVER_ID "server_id"
#define PS_META_RANGES "ranges"
#define PS_META_DROP "drop"               /* ‖ u64be table_id */
#define PS_META_BUCKET_LEN "bucket_len"   /* u32le T */
#define PS_META_MASTER_TERM "master_term" /* u64le, only ever raised */
#define PS_META_KEY_FORMAT "key_format"   /* u32le, RT_KEY_FORMAT */

/* The "repl" DB (ps_store_repl.c). Key: "rs" ‖ u64be range_id. Value, a
 * fixed layout rather than a packed rt.ReplicaState: it is rewritten by
 * every group commit for every range it changes, so it must cost one small
 * put and no allocation or varint work; the wire message (PROBE,
 * registration) is built from it when needed.
 *   u8 version (PS_RS_VERSION) ‖ u8 role ‖ u8 state ‖ u8 0 ‖
 *   u64le epoch ‖ u64le primary_epoch ‖ u64le applied_epoch ‖
 *   u64le applied_lsn ‖ u64le commit_lsn ‖ u64le sealed_epoch ‖
 *   u8 n_hist ‖ n_hist × (u64le epoch ‖ u64le first_lsn) ‖
 *   u32le CRC32C of the bytes before it (§5.6: stored values are
 *   checked). Version 1 (PS_RS_V1_SIZE bytes, no n_hist nor history) is
 *   still read: an unknown history. The pending keys ("rp" records) are a
 *   later field of the design; a new layout takes a new version byte. */
#define PS_RS_PREFIX "rs"
#define PS_RS_KEY_LEN 10
#define PS_RS_VERSION 2
#define PS_RS_V1_SIZE 56
#define PS_RS_FIXED 52 /* the fields before n_hist */
#define PS_RS_MAX_SIZE (PS_RS_FIXED + 1 + 16 * PS_RS_MAX_HISTORY + 4)

#define PS_BUCKET_VERSION 0xB1
#define PS_BUCKET_HDR 8

struct ps_store
{
    MDB_env *env;
    MDB_dbi data;
    MDB_dbi meta;
    MDB_dbi repl; /* "repl": replica state records */
    size_t max_key;
    size_t blen; /* T */
    /* Writer thread only. */
    uint64_t last_ticks;
    struct rt_buf kbuf;
    struct rt_buf vbuf;
    struct rt_buf mbuf;
    struct rt_buf bbuf;
    int capture;          /* record committed changes (ps_store_capture) */
    uint64_t cur_txn;     /* id of the write transaction being built */
    uint64_t changes;     /* puts and deletes made so far (ps__cap counts) */
    struct rt_buf lsnbuf; /* a group's (range_id, write index) pairs */
    struct rt_buf cap;
    uint64_t reserved_end; /* data file bytes reserved on disk (ps__reserve) */
    ps_store_precommit_fn precommit; /* ps_store_set_precommit */
    void *precommit_arg;
};

/* Byte order of keys (memcmp, shorter first on a tie). */
int ps__keycmp(const void *a, size_t an, const void *b, size_t bn);
/* An MDB_val borrowing @p. */
MDB_val ps__val(const void *p, size_t n);

/* Buckets (the layout is in ps_store.c's header comment). */
struct ps__bucket
{
    const uint8_t *p;
    const uint8_t *end;
    uint32_t left;
};

struct ps__bent
{
    const uint8_t *suf;
    size_t sn;
    const uint8_t *val;
    size_t vn;
};

/* Starts reading the bucket value @v (borrowed). Returns 0 or
 * RT_ECORRUPT. */
int ps__bucket_open(const MDB_val *v, struct ps__bucket *b);
/* Returns 1 (got @e), 0 (end) or RT_ECORRUPT. */
int ps__bucket_next(struct ps__bucket *b, struct ps__bent *e);
/* Appends u64be @v to @out: a table id as the first 8 bytes of a storage
 * key (the table's first key on its own), or the id in a meta key. */
void ps__append_u64be(struct rt_buf *out, uint64_t v);
/* Writes u32le @n ‖ @p[0..n) at @q (4 + @n bytes reserved); returns the
 * byte after it. The length-prefixed field of bucket entries, change
 * records and span markers. */
uint8_t *ps__put_field(uint8_t *q, const void *p, size_t n);
/* Starts building a bucket value in @out (its header, no entries). */
void ps__bucket_begin(struct rt_buf *out);
/* Stores the bucket built in @out, holding @count entries, as record @k:
 * deletes the record when @count is 0. Returns 0 or an RT_E* code. */
int ps__bucket_store(struct ps_store *s,
                     MDB_txn *txn,
                     MDB_val *k,
                     struct rt_buf *out,
                     uint32_t count);
/* Reads the field u32le n ‖ n bytes at *@p (ending before @end): *@out
 * points at the bytes, *@n is n, *@p moves past it. Returns 0, or
 * RT_ECORRUPT when it does not fit. */
int ps__get_field(const uint8_t **p,
                  const uint8_t *end,
                  const uint8_t **out,
                  size_t *n);
/* Appends one entry to a bucket being built in @out. */
void ps__bucket_add(struct rt_buf *out,
                    const uint8_t *suf,
                    size_t sn,
                    const uint8_t *val,
                    size_t vn);

/* Checks the stored value @v[0..vn) read under full storage key
 * @key[0..kn) (rt_value_check: its CRC32C when it has one). Returns 0, or
 * RT_ECORRUPT after logging the table and a fingerprint of the key (never
 * the key: rt_log.h); the caller logs the range. Every path that hands a
 * stored value out calls it. */
int ps__value_check(const uint8_t *key, size_t kn, const uint8_t *v, size_t vn);

/* Counts a change, and records it in the capture buffer when capture is
 * on (writer thread). */
void ps__cap(struct ps_store *s,
             const uint8_t *key,
             size_t kn,
             const uint8_t *val,
             size_t vn,
             int deleted);

/* Replica state records (ps_store_repl.c). */

/* Encodes @rs at @out (PS_RS_MAX_SIZE bytes) and returns its length /
 * decodes @n bytes at @p. Decoding returns 0 or RT_ECORRUPT (size,
 * version, CRC32C, an enum or a history length out of range). */
size_t ps__rs_encode(const struct ps_rstate *rs, uint8_t out[PS_RS_MAX_SIZE]);
int ps__rs_decode(const uint8_t *p, size_t n, struct ps_rstate *rs);
/* Reads range @range_id's record in @txn into @rs, *@found = 1. A missing
 * one is a range at LSN 0 that holds a copy (it is being written): state
 * OK, all else 0, *@found = 0. Returns 0 or an error. */
int ps__rs_read(struct ps_store *s,
                MDB_txn *txn,
                uint64_t range_id,
                struct ps_rstate *rs,
                int *found);
/* Range @range_id's record in @txn: 0, RT_ENOTFOUND or the decode's or
 * LMDB's error. */
int ps__rs_snap_read(struct ps_store *s,
                     MDB_txn *txn,
                     uint64_t range_id,
                     struct ps_rstate *rs);
/* Notes that write @idx of the group being built changed data of range
 * @range_id (non-zero). The notes start empty with each group
 * transaction (s->lsnbuf reset). */
void ps__repl_note(struct ps_store *s, uint64_t range_id, size_t idx);
/* Takes the next LSN of every range noted, inside write transaction @txn:
 * one read and one put of the range's "rs" record per range, whatever the
 * number of its writes; sets each noted write's lsn (@w: the group).
 * Returns 0 or an error that poisons @txn (RT_ECORRUPT for a bad
 * record). */
int ps__repl_assign(struct ps_store *s,
                    MDB_txn *txn,
                    struct ps_write *const *w);

/* Point access to the data DB, hiding the buckets. */

/* Finds the stored value of full storage key @key in @txn. On 0, *v points
 * into LMDB memory (valid until the next update in @txn or its end).
 * Returns 0, RT_ENOTFOUND, RT_ECORRUPT or an LMDB failure. */
int ps__lookup(struct ps_store *s,
               MDB_txn *txn,
               const uint8_t *key,
               size_t kn,
               MDB_val *v);
/* Stores @val under @key in write transaction @txn. Returns 0 or an
 * error (RT_ENOSPACE, RT_ECORRUPT, ...). */
int ps__kv_put(struct ps_store *s,
               MDB_txn *txn,
               const uint8_t *key,
               size_t kn,
               const uint8_t *val,
               size_t vn);
/* Deletes @key in write transaction @txn (absent is not an error).
 * Returns 0 or an error. */
int ps__kv_del(struct ps_store *s, MDB_txn *txn, const uint8_t *key, size_t kn);

/* Ordered iteration over logical entries (bucket entries flattened). */
struct ps__it
{
    struct ps_store *s;
    MDB_cursor *cur;
    MDB_val k, v; /* current LMDB record */
    int in_bucket;
    struct ps__bucket b;
    struct rt_buf kb;   /* full key of the current bucket entry */
    const uint8_t *key; /* current entry: full storage key */
    size_t kn;
    const uint8_t *val; /* its stored value (LMDB memory) */
    size_t vn;
};

/* Opens a cursor on the data DB in @txn. Returns 0 or an error. */
int ps__it_open(struct ps__it *it, struct ps_store *s, MDB_txn *txn);
/* Positions on the first entry whose full key is >= @key. Returns 0,
 * RT_ENOTFOUND (end) or an error. */
int ps__it_seek(struct ps__it *it, const uint8_t *key, size_t kn);
/* Moves to the next entry. Returns 0, RT_ENOTFOUND (end) or an error. */
int ps__it_next(struct ps__it *it);
/* Closes the cursor; the transaction stays open. */
void ps__it_close(struct ps__it *it);

#endif
