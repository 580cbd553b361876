/* Catalog: the master's durable state — tables of every account, the
 * partition map's ranges, known partition servers (id -> addr) and the
 * counters that hand out ids and the map version.
 *
 * It is an LMDB environment of its own (in the master's --data directory)
 * mirrored in memory: reads never touch LMDB, every mutation is one durable
 * write transaction (synced before the call returns) and only after the
 * commit succeeds is the in-memory mirror changed. A failed transaction is
 * aborted and leaves both untouched. Everything is reloaded by
 * ms_catalog_open().
 *
 * LMDB layout (named databases; values are rt.proto messages so fields can
 * be added later):
 *   tables    key account '\0' lower(name)   value rt.Table
 *   ranges    key range id (u64 BE)          value rt.Range (a record
 *             without replicas, written before they existed, loads as RF 1)
 *   servers   key server id (u64 BE)         value rt.Server (state: only
 *             draining; zone and incarnation as the server last registered)
 *   counters  key "next_table_id" | "next_range_id" | "next_server_id" |
 *             "map_version" | "next_move_id" | "master_term" value u64 BE
 *   props     key account                    value rt.ServiceProps
 *   deleted   key account '\0' lower(name)   value u64 BE: wall-clock ms at
 *             which the name may be created again (tombstone)
 *   moves     key move id (u64 BE)           value rt.MoveReq: a range move
 *             not settled yet (docs/DESIGN-moves.md; the Range inside is
 *             the range as it was when the move began)
 * A table's stored access policies (ACL) live in its rt.Table record
 * (field acl).
 *
 * Ids (tables, ranges, servers) are monotonic and never reused, so a
 * deleted and re-created table gets a new id (docs/DESIGN.md §3). The map
 * version goes up by one in the same transaction as every change of tables,
 * ranges or server addresses; ms_catalog_bump_version() covers changes the
 * catalog does not store (server liveness).
 *
 * Deletion grace period (docs/table-api-spec.md §3.3): with
 * ms_catalog_set_delete_grace() > 0, deleting a table leaves a durable
 * tombstone of its (account, lower-case name) for that long; creating the name
 * meanwhile fails with RT_ETABLEBEINGDELETED. Expired tombstones are ignored by
 * create and removed by ms_catalog_purge_tombstones() (or by the create that
 * finds one). Tombstone times are wall-clock (they survive restarts).
 *
 *   leader    key "current"                  value rt.LeaderStartCmd: the
 *             last LEADER_START taken (its term is counters.master_term)
 *
 * Commands (docs/DESIGN-master-ha.md §2.2-§2.5): every mutation below is
 * one rt.MasterCmd carrying all its inputs (the clock's now_ms, the delete
 * grace), applied through ms_fsm_apply() (ms_fsm.h) — the path a follower
 * takes for a committed entry — so every member computes the same state
 * and the same results. With a proposer (ms_catalog_set_proposer) the
 * packed entry of every mutation that changed state goes to it after the
 * apply; callers stay synchronous and the master holds what it sends out
 * until Raft committed the entry. ms_catalog_snapshot/_restore move the
 * whole catalog as a record stream (Raft snapshots).
 *
 * Key order: range bounds, split keys and merges compare PartitionKeys in
 * UTF-16 code-unit order (rt_utf16_cmpz, Azure's order, the order of the
 * partition servers' storage keys). A catalog holding a range whose bounds
 * are out of that order (split by an older release that compared UTF-8
 * bytes, at bounds from both the supplementary characters and
 * U+E000..U+FFFF) does not load, by ms_catalog_open or ms_catalog_restore:
 * the error names the range to merge (rtctl merge) with that release.
 *
 * Thread: not thread-safe; the master uses it from its loop thread only.
 * Pointers returned by the read functions are owned by the catalog and stay
 * valid until the next mutating call (anything not marked "read"). */
#ifndef MS_CATALOG_H
#define MS_CATALOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "rt.pb-c.h"
#include "rt_repl_ev.h"

#define MS_TABLE_NAME_MAX 63
#define MS_ACCOUNT_MAX 255
/* Table ACL limits (docs/table-api-spec.md §3.5, §9). */
#define MS_ACL_MAX 5
#define MS_ACL_ID_MAX 64
/* CORS rules per account (docs/table-api-spec.md §3.6, §9). */
#define MS_CORS_MAX 5

struct ms_catalog;

/* One stored access policy. Empty strings mean "absent". */
struct ms_acl_entry
{
    char *id;
    bool has_policy; /* <AccessPolicy> was present */
    char *start;
    char *expiry;
    char *permission; /* subset of "raud", in that order */
};

struct ms_table
{
    uint64_t id;
    char *account;
    char *name;               /* as created (case preserved) */
    char *lname;              /* lower-case key */
    struct ms_acl_entry *acl; /* stored access policies, nacl <= 5 */
    size_t nacl;
};

/* One account's table service properties (never-set accounts have none). */
struct ms_props
{
    char *account;
    Rt__ServiceProps *props; /* unpacked, owned by the catalog */
};

/* Most members a replica set can list (docs/DESIGN-replication.md §2). */
#define MS_REPLICAS_MAX 8

/* [low, high) over PartitionKey of one table; high_inf: no upper bound.
 *
 * The replica set (docs/DESIGN-replication.md §2.1) is kept consistent
 * with server_id by the catalog on every change of owner: server_id is the
 * one PRIMARY replica, the ISR holds it, no server appears twice
 * (ms_range_replicas_valid). A range made by ms_catalog_update_ranges
 * (a split, merge or move of an RF 1 range) or created with RF 1 has the
 * RF 1 set: replicas [{server_id, PRIMARY}], isr [server_id],
 * primary_epoch = epoch, rf = min_insync = 1. A table created with a
 * larger replication factor starts with the placed set
 * (ms_catalog_create_table_rs); such ranges are split and merged with
 * their set (ms_catalog_split_repl, ms_catalog_merge_repl), not moved
 * yet.
 * A range lives on the heap inside the catalog and is never copied by
 * value: replica_v points into it. */
struct ms_range
{
    uint64_t id;
    uint64_t table_id;
    char *low;
    char *high; /* "" when high_inf */
    bool high_inf;
    uint64_t server_id; /* the primary */
    uint64_t epoch;
    size_t nreplicas;
    Rt__Replica replicas[MS_REPLICAS_MAX];
    Rt__Replica *replica_v[MS_REPLICAS_MAX]; /* &replicas[i], for rt.Range */
    size_t nisr;
    uint64_t isr[MS_REPLICAS_MAX];
    uint64_t primary_epoch; /* epoch at which server_id became primary */
    uint32_t rf;            /* wanted copies */
    uint32_t min_insync;    /* ack floor */
    uint64_t seal_epoch;    /* failover/transfer intent; 0 = none */
    uint32_t seal_kind;
    uint64_t seal_to;
};

/* Fills @out (rt__range__init'ed here) borrowing @r's strings and replica
 * set: the range as stored, in the map, in an assignment and in a move
 * record. */
void ms_range_to_pb(const struct ms_range *r, Rt__Range *out);

/* True when @r's replica set is consistent: 1..MS_REPLICAS_MAX replicas,
 * exactly one PRIMARY and it is server_id, every role known, the ISR
 * (1..nreplicas) holds the primary and only non-learner replicas, no
 * server twice in either list, primary_epoch <= epoch, 1 <= min_insync <=
 * rf. Pure. */
bool ms_range_replicas_valid(const struct ms_range *r);

/* @r's replication configuration as the replica cores see it (roles and
 * seal kind as in rt.proto). Pure. */
void ms_range_to_repl_conf(const struct ms_range *r, struct rt_repl_conf *c);

/* True when @r's replica set names @server_id (any role). Pure. */
bool ms_range_names(const struct ms_range *r, uint64_t server_id);

/* rt.Server.state as stored in the catalog (the map's up/down state is
 * runtime only): a server being drained. */
#define MS_SERVER_REC_DRAINING 3

/* rt.Server.incarnation: 16 random bytes a partition server made with its
 * LMDB environment (docs/DESIGN-replication.md §2.1). */
#define MS_INCARNATION_SIZE 16
struct ms_server_rec
{
    uint64_t id;
    char *addr;
    bool draining;        /* rtctl drain: no new ranges, its ranges move away */
    char *zone;           /* failure domain, "" = none declared */
    bool has_incarnation; /* false until a server that sends one registers */
    uint8_t incarnation[MS_INCARNATION_SIZE];
    char *identity; /* certificate name bound to the id, "" = none yet */
};

/* A range to write with ms_catalog_update_ranges(): strings borrowed. */
struct ms_range_put
{
    uint64_t id; /* 0: a new range, id assigned in the transaction */
    uint64_t table_id;
    const char *low;
    const char *high;
    bool high_inf;
    uint64_t server_id;
    uint64_t epoch;
};

/* The replica set of a new table's first range (placed by the caller,
 * docs/DESIGN-replication.md §8.3). Borrowed. */
struct ms_replica_spec
{
    const uint64_t *servers; /* distinct ids; servers[0] is the primary */
    size_t n;                /* 1..MS_REPLICAS_MAX, at most rf */
    uint32_t rf;             /* wanted copies */
    uint32_t min_insync;     /* 1..rf */
};

/* What ms_catalog_delete_table() removed. Release with
 * ms_table_drop_free(). */
struct ms_table_drop
{
    uint64_t table_id;
    uint64_t *server_ids; /* distinct servers holding a replica (any
                           * role) of a removed range */
    size_t nservers;
};

/* Opens (creating if needed) the catalog in directory @dir (created with
 * its parents, mode 0755, if missing) and loads it. On 0 *out belongs to the
 * caller: ms_catalog_close() releases it. On error @errmsg (RT_ERRMSG_SIZE
 * bytes, may be NULL) says why. Errors: RT_EIO, RT_ECORRUPT, RT_ENOMEM. */
int ms_catalog_open(const char *dir, struct ms_catalog **out, char *errmsg);
/* Flags of ms_catalog_open_flags(). */
#define MS_CATALOG_NO_TERM_BUMP             \
    1u /* keep the stored master_term: with \
        * Raft it comes from LEADER_START */
/* Commits are not synced (MDB_NOSYNC): for a view rebuilt from the Raft
 * log at every start, where an fsync per mutation would only stall the
 * master's loop. */
#define MS_CATALOG_NOSYNC 2u
/* ms_catalog_open() is ms_catalog_open_flags(dir, 0, ...). */
int ms_catalog_open_flags(const char *dir,
                          unsigned flags,
                          struct ms_catalog **out,
                          char *errmsg);
void ms_catalog_close(struct ms_catalog *cat);

/* Receives the packed rt.MasterCmd (@buf, borrowed for the call) of a
 * mutation that was just applied and changed state. Returns 0 or an RT_E*
 * code: the mutation then returns that code although it was applied here
 * (not replicated: the leader must give up, re-exec itself and rebuild its
 * view from the Raft snapshot and log). */
typedef int (*ms_catalog_propose_fn)(void *ud, const uint8_t *buf, size_t len);
/* Sets (or with NULL clears) the proposer. Without one, mutations are
 * local only (a single master, the tests). */
void ms_catalog_set_proposer(struct ms_catalog *cat,
                             ms_catalog_propose_fn propose,
                             void *ud);

/* 0 when @name is a valid new table name: ^[A-Za-z][A-Za-z0-9]{2,62}$ and
 * not the reserved "Tables" (any case); else RT_EBADNAME. Pure. */
int ms_table_name_check(const char *name);

/* ---- reads ---- */
uint64_t ms_catalog_map_version(const struct ms_catalog *cat);
/* The master term: + 1, durably, at every ms_catalog_open() (so 1 on a
 * new catalog); with MS_CATALOG_NO_TERM_BUMP only LEADER_START raises it.
 * Carried in every assignment (docs/DESIGN-replication.md §2.4) so a partition
 * server can tell a newer master from an older one. */
uint64_t ms_catalog_master_term(const struct ms_catalog *cat);

/* Tables ordered by (account, lower-case name). */
size_t ms_catalog_ntables(const struct ms_catalog *cat);
const struct ms_table *ms_catalog_table_at(const struct ms_catalog *cat,
                                           size_t i);
/* Case-insensitive lookup; NULL when absent. */
const struct ms_table *ms_catalog_table_find(const struct ms_catalog *cat,
                                             const char *account,
                                             const char *name);
const struct ms_table *ms_catalog_table_by_id(const struct ms_catalog *cat,
                                              uint64_t id);

/* One page of @account's tables in lower-case name order, starting at the
 * first whose lower-case name >= lower(@start) ("" = from the first).
 * @limit 0 or > 1000 means 1000. The page is ms_catalog_table_at(first ..
 * first + count - 1); *next is the table after the page or NULL. */
void ms_catalog_list_tables(const struct ms_catalog *cat,
                            const char *account,
                            const char *start,
                            uint32_t limit,
                            size_t *first,
                            size_t *count,
                            const struct ms_table **next);

/* Ranges ordered by id. */
size_t ms_catalog_nranges(const struct ms_catalog *cat);
const struct ms_range *ms_catalog_range_at(const struct ms_catalog *cat,
                                           size_t i);
const struct ms_range *ms_catalog_range_find(const struct ms_catalog *cat,
                                             uint64_t id);
/* Number of ranges @server_id is the primary (owner) of. */
size_t ms_catalog_server_nranges(const struct ms_catalog *cat,
                                 uint64_t server_id);
/* Number of ranges whose replica set names @server_id, any role. */
size_t ms_catalog_server_nreplicas(const struct ms_catalog *cat,
                                   uint64_t server_id);

/* Known servers ordered by id. */
size_t ms_catalog_nservers(const struct ms_catalog *cat);
const struct ms_server_rec *ms_catalog_server_at(const struct ms_catalog *cat,
                                                 size_t i);
const struct ms_server_rec *ms_catalog_server_find(const struct ms_catalog *cat,
                                                   uint64_t id);

/* ---- mutations (one durable transaction each) ---- */

/* Creates table @name (validated with ms_table_name_check) in @account with
 * one range [ "", +inf ) at epoch 1 whose replica set is @rs: rs->servers[0]
 * the primary (server_id), the others SECONDARY, all in the ISR,
 * primary_epoch 1, rf and min_insync from @rs. Strings are copied.
 * Optional outputs point into the catalog. Nothing is written on error.
 * Errors: RT_EBADNAME, RT_EINVAL (account empty or too long, or @rs not a
 * valid set: see ms_replica_spec and ms_range_replicas_valid),
 * RT_ETABLEEXISTS (case-insensitive clash), RT_ETABLEBEINGDELETED (the name
 * is in its deletion grace period), RT_EIO, RT_ENOSPACE. */
int ms_catalog_create_table_rs(struct ms_catalog *cat,
                               const char *account,
                               const char *name,
                               const struct ms_replica_spec *rs,
                               const struct ms_table **table_out,
                               const struct ms_range **range_out);
/* The same with the RF 1 set {server_id}, rf 1, min_insync 1. */
int ms_catalog_create_table(struct ms_catalog *cat,
                            const char *account,
                            const char *name,
                            uint64_t server_id,
                            const struct ms_table **table_out,
                            const struct ms_range **range_out);

/* Deletes @account's table @name (any case) and all its ranges, and with a
 * grace period > 0 writes the name's tombstone in the same transaction. On
 * 0, @drop (may be NULL) is filled and owned by the caller.
 * Errors: RT_ENOTFOUND, RT_EIO, RT_ENOSPACE. */
int ms_catalog_delete_table(struct ms_catalog *cat,
                            const char *account,
                            const char *name,
                            struct ms_table_drop *drop);
void ms_table_drop_free(struct ms_table_drop *drop);

/* Writes @nput ranges (insert or replace by id; id 0 = new) and deletes
 * @ndel range ids, in one transaction: the building block of split, merge
 * and move. A put makes an RF 1 range (its server_id the only replica).
 * @new_ids (may be NULL, else @nput entries) receives each put's id. Puts
 * must name an existing table; deleting an unknown id is an error.
 * Replicated ranges (more than one replica) cannot be split or merged yet
 * (docs/DESIGN-replication.md §9 comes later): deleting or replacing one
 * is RT_ENOTIMPL and writes nothing.
 * Errors: RT_EINVAL, RT_ENOTFOUND, RT_ENOTIMPL, RT_EIO, RT_ENOSPACE. */
int ms_catalog_update_ranges(struct ms_catalog *cat,
                             const struct ms_range_put *puts,
                             size_t nput,
                             const uint64_t *dels,
                             size_t ndel,
                             uint64_t *new_ids);

/* Replaces range @c->range_id's replication configuration (primary,
 * epoch, primary_epoch, replicas, isr, rf, min_insync, seal intent) with
 * @c, in one durable transaction that raises the map version, only if
 * the stored range still has epoch @guard_epoch and seal_epoch
 * @guard_seal_epoch: the compare-and-set under every ms_rcore proposal
 * (docs/DESIGN-replication.md §2.4). Id, table and bounds are kept.
 * @c is borrowed. Errors: RT_ENOTFOUND (no such range: e.g. its table was
 * deleted meanwhile; nothing is written, so a failover never brings a
 * deleted range back), RT_ESTALE (the guard does not match), RT_EINVAL
 * (@c is not a valid replica set, or lowers the epoch), RT_EIO,
 * RT_ENOSPACE. */
int ms_catalog_range_apply_repl(struct ms_catalog *cat,
                                const struct rt_repl_conf *c,
                                uint64_t guard_epoch,
                                uint64_t guard_seal_epoch);

/* Splits replicated range @range_id at @key (docs/DESIGN-replication.md
 * §9.1), in one durable transaction that raises the map version: the
 * range is replaced by [low, @key) and [@key, high) with new ids
 * (*@new_ids, in that order), epoch + 1 and its replica set, ISR,
 * primary, primary_epoch, rf and min_insync; only if it still has epoch
 * @guard_epoch and no seal intent. @key is borrowed. Errors: RT_ENOTFOUND,
 * RT_ESTALE (the guard does not match), RT_EINVAL (@key not strictly
 * inside the range), RT_EIO, RT_ENOSPACE; nothing written on error. */
int ms_catalog_split_repl(struct ms_catalog *cat,
                          uint64_t range_id,
                          uint64_t guard_epoch,
                          const char *key,
                          uint64_t new_ids[2]);

/* Merges adjacent replicated ranges @a_id and @b_id (in key order) with
 * the same replica configuration (docs/DESIGN-replication.md §9.2; the
 * caller checks the sets match) in one durable transaction that raises
 * the map version: both are replaced by [a.low, b.high) under a new id
 * (*@new_id) at max(epochs) + 1 with @a_id's replica set, ISR, primary,
 * rf and min_insync and the higher primary_epoch; only if they still have
 * epochs @a_epoch and @b_epoch and no seal intent. Errors: RT_ENOTFOUND,
 * RT_ESTALE (a guard does not match), RT_EINVAL (not adjacent), RT_EIO,
 * RT_ENOSPACE; nothing written on error. */
int ms_catalog_merge_repl(struct ms_catalog *cat,
                          uint64_t a_id,
                          uint64_t a_epoch,
                          uint64_t b_id,
                          uint64_t b_epoch,
                          uint64_t *new_id);

/* Records a partition server. @want_id 0 assigns a fresh id; otherwise the
 * id is kept (recorded if unknown, e.g. after the master's data was lost,
 * and the id counter moves past it). @addr and @zone (NULL = "") are stored
 * when new or changed, and so is @incarnation (NULL = keep the stored one;
 * else MS_INCARNATION_SIZE bytes): whether a changed incarnation may
 * register at all is the caller's decision. All borrowed. *changed (may be
 * NULL) tells whether anything was written (the map version then went up).
 * Errors: RT_EINVAL (empty addr), RT_EIO, RT_ENOSPACE. */
int ms_catalog_register_server(struct ms_catalog *cat,
                               uint64_t want_id,
                               const char *addr,
                               const char *zone,
                               const uint8_t *incarnation,
                               uint64_t *id_out,
                               bool *changed);
/* The same, from a connection authenticated as certificate @identity
 * ("ps:NAME"; NULL or "" = plain RPC). The first registration of an id
 * with a name binds it; a registration for a bound id from another name
 * is refused with RT_EPERM, by every master alike (it is decided in the
 * command's apply), and changes nothing. */
int ms_catalog_register_server_as(struct ms_catalog *cat,
                                  uint64_t want_id,
                                  const char *addr,
                                  const char *zone,
                                  const uint8_t *incarnation,
                                  const char *identity,
                                  uint64_t *id_out,
                                  bool *changed);

/* Map version + 1, durably (for map changes the catalog does not store).
 * Errors: RT_EIO, RT_ENOSPACE. */
int ms_catalog_bump_version(struct ms_catalog *cat);

/* ---- table ACLs (docs/table-api-spec.md §3.4, §3.5) ---- */

/* Fills @out (rt__signed_identifier__init'ed here) borrowing @e's strings. */
void ms_acl_to_pb(const struct ms_acl_entry *e, Rt__SignedIdentifier *out);
/* The other way: fills @out borrowing @si's strings. */
void ms_acl_from_pb(const Rt__SignedIdentifier *si, struct ms_acl_entry *out);

/* 0 when @acl (@n entries) is within the limits: n <= MS_ACL_MAX, ids
 * 1..MS_ACL_ID_MAX bytes and distinct, permission characters a subsequence
 * of "raud"; else RT_EXML (400 InvalidXmlDocument). Pure. */
int ms_acl_check(const struct ms_acl_entry *acl, size_t n);

/* Replaces the ACL of @account's table @name (any case) with @acl (strings
 * copied; n 0 clears it) and raises the map version (the ACL travels in the
 * map). Errors: RT_ETABLENOTFOUND, RT_EXML (ms_acl_check), RT_EIO,
 * RT_ENOSPACE. */
int ms_catalog_set_acl(struct ms_catalog *cat,
                       const char *account,
                       const char *name,
                       const struct ms_acl_entry *acl,
                       size_t n);

/* ---- service properties (docs/table-api-spec.md §3.6) ---- */

/* Accounts with stored properties, ordered by account. */
size_t ms_catalog_nprops(const struct ms_catalog *cat);
const struct ms_props *ms_catalog_props_at(const struct ms_catalog *cat,
                                           size_t i);
/* @account's stored properties or NULL (never set: defaults apply). */
const Rt__ServiceProps *ms_catalog_props(const struct ms_catalog *cat,
                                         const char *account);

/* Merges @update into @account's properties: each section present in
 * @update (logging, hour_metrics, minute_metrics, cors) replaces the stored
 * one, absent sections are kept. Raises the map version (CORS rules travel
 * in the map). @update is borrowed. Errors: RT_EINVAL (account empty or too
 * long), RT_EXML (more than MS_CORS_MAX rules), RT_EIO, RT_ENOSPACE. */
int ms_catalog_set_props(struct ms_catalog *cat,
                         const char *account,
                         const Rt__ServiceProps *update);

/* ---- deletion grace period (tombstones) ---- */

/* Grace period of later deletes, in ms (0, the default, keeps no
 * tombstones; existing ones still count). */
void ms_catalog_set_delete_grace(struct ms_catalog *cat, uint64_t grace_ms);
/* Wall clock in ms since the Unix epoch used for tombstones; NULL restores
 * the real clock (tests install a fake one). */
void ms_catalog_set_clock(struct ms_catalog *cat,
                          uint64_t (*now_ms)(void *arg),
                          void *arg);
/* True while @account's name (any case) is in its grace period. Read. */
bool ms_catalog_table_deleting(const struct ms_catalog *cat,
                               const char *account,
                               const char *name);
/* Tombstones held (expired ones included until purged). Read. */
size_t ms_catalog_ntombstones(const struct ms_catalog *cat);
/* Removes expired tombstones in one transaction (none expired: no
 * transaction). Returns how many were removed, or RT_EIO / RT_ENOSPACE. */
int ms_catalog_purge_tombstones(struct ms_catalog *cat);

/* ---- load balancing ---- */

/* Marks @server_id as draining (or not), durably. Not a map change.
 * Errors: RT_ENOTFOUND, RT_EIO, RT_ENOSPACE. */
int ms_catalog_set_draining(struct ms_catalog *cat,
                            uint64_t server_id,
                            bool draining);

/* Unsettled moves, by move id (DESIGN-moves.md: "pending" until the
 * commit, or until both ends acknowledged the abort). Read. */
size_t ms_catalog_nmoves(const struct ms_catalog *cat);
const Rt__MoveReq *ms_catalog_move_at(const struct ms_catalog *cat, size_t i);
const Rt__MoveReq *ms_catalog_move_find(const struct ms_catalog *cat,
                                        uint64_t move_id);

/* Step 1 of a move: records, durably, that range @range_id (as it is now)
 * moves to @target_id (@target_addr copied) at epoch + 1 under a fresh
 * move id. *@out points into the catalog (valid until the record goes).
 * Not a map change. Errors: RT_ENOTFOUND (no range), RT_EINVAL (target is
 * the owner, or no address), RT_ENOTIMPL (the range has more than one
 * replica: moves of replicated ranges come later), RT_EIO, RT_ENOSPACE. */
int ms_catalog_move_begin(struct ms_catalog *cat,
                          uint64_t range_id,
                          uint64_t target_id,
                          const char *target_addr,
                          const Rt__MoveReq **out);
/* Step 5: in one transaction, the range becomes the target's at the new
 * epoch (same id and bounds), the move record is removed and the map
 * version goes up. Errors: RT_ENOTFOUND (no such move), RT_ESTALE (the
 * range is gone or changed since the move began: the record is kept, the
 * caller aborts), RT_EIO, RT_ENOSPACE. */
int ms_catalog_move_commit(struct ms_catalog *cat, uint64_t move_id);
/* Removes a settled (aborted) move record. Errors: RT_ENOTFOUND, RT_EIO,
 * RT_ENOSPACE. */
int ms_catalog_move_forget(struct ms_catalog *cat, uint64_t move_id);

/* ---- leadership (docs/DESIGN-master-ha.md §3.2) ---- */

/* A leader's addresses, borrowed; NULL = "". */
struct ms_leader_addrs
{
    const char *rpc;
    const char *http;
    const char *raft;
};

/* LEADER_START: sets master_term to @master_term and records @leader_id
 * and @addrs as the leader, durably, only if @master_term is above the
 * stored term. Errors: RT_ESTALE (not above: nothing written, as when an
 * older leader's entry commits late), RT_EIO, RT_ENOSPACE. */
int ms_catalog_leader_start(struct ms_catalog *cat,
                            uint64_t master_term,
                            uint64_t leader_id,
                            const struct ms_leader_addrs *addrs);
/* IMPORT (docs/DESIGN-master-ha.md §2.6): the catalog a master kept
 * before the Raft log, as ms_catalog_snapshot() wrote it (@snap
 * borrowed), replaces an empty catalog; the leader proposes it once.
 * Errors: RT_EEXIST (the catalog holds a table, range or server: nothing
 * written), RT_ECORRUPT (not a valid snapshot), RT_EIO, RT_ENOSPACE. */
int ms_catalog_import(struct ms_catalog *cat, const uint8_t *snap, size_t len);
/* The last LEADER_START taken, or NULL. Read. */
const Rt__LeaderStartCmd *ms_catalog_leader(const struct ms_catalog *cat);

/* ---- snapshot, restore, digest (docs/DESIGN-master-ha.md §2.5) ---- */

struct rt_buf;

/* Appends every record of every database to @out as a stream of frames
 * (u32 BE length + packed message): an rt.CatalogSnapshot header (record
 * count, body length and CRC32C), then one rt.CatalogRecord per record.
 * The stream parses when buffers holding it are concatenated. Read.
 * Errors: RT_EIO (nothing useful appended). */
int ms_catalog_snapshot(struct ms_catalog *cat, struct rt_buf *out);
/* Replaces the whole catalog with the stream @buf[0..@len) (borrowed):
 * parses and checks all of it first, then empties and refills every
 * database in one transaction and reloads the mirror from it; pointers
 * from earlier reads are invalid afterwards. A bad stream changes nothing.
 * Errors: RT_ECORRUPT (not a whole valid stream), RT_EIO, RT_ENOSPACE. */
int ms_catalog_restore(struct ms_catalog *cat, const uint8_t *buf, size_t len);
/* A hash of every record of every database in order, for tests: equal
 * catalogs give equal digests. Read (0 when LMDB cannot be read). */
uint64_t ms_catalog_digest(struct ms_catalog *cat);

#endif
