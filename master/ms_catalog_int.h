/* The catalog's insides, shared by its own files only: ms_catalog.c (LMDB,
 * mirror, reads, the bodies of the mutations; ms_catalog_lead.c the
 * LEADER_START one), ms_cmd.c (the public
 * mutations: build a MasterCmd, apply it, hand it to the proposer),
 * ms_fsm.c (apply: unpack, dispatch to ms_cat_do_*) and ms_catalog_snap.c
 * (snapshot, restore, digest). Nothing outside those files includes it.
 *
 * ms_cat_do_* are the mutation bodies as they were before commands: they
 * evaluate their guards against the mirror, write one LMDB transaction and
 * then change the mirror. They read no clock and no flag (now_ms and the
 * delete grace are arguments), so every member applying the same command
 * to the same state gets the same result. A failure that is this member's
 * own (LMDB begin/put/commit, out of memory) is also recorded in
 * cat->local_err, so ms_fsm can tell it from a deterministic result.
 *
 * Thread: the master's loop only, like the catalog. */
#ifndef MS_CATALOG_INT_H
#define MS_CATALOG_INT_H

#include <lmdb.h>

#include "ms_catalog.h"
#include "ms_util.h"
#include "rt.pb-c.h"

struct ms_counters
{
    uint64_t next_table_id;
    uint64_t next_range_id;
    uint64_t next_server_id;
    uint64_t map_version;
    uint64_t next_move_id;
    uint64_t master_term;
};

#define MS__NCOUNTERS 6

/* Named databases (see ms_catalog.h), in snapshot and digest order. */
#define MS_CAT_NDBS 8

struct ms_catalog
{
    MDB_env *env;
    MDB_dbi db_tables;
    MDB_dbi db_ranges;
    MDB_dbi db_servers;
    MDB_dbi db_counters;
    MDB_dbi db_props;
    MDB_dbi db_deleted;
    MDB_dbi db_moves;
    MDB_dbi db_leader;
    int lock_fd; /* flock: one master per data directory */
    struct ms_counters ctr;
    struct ms_vec tables;       /* struct ms_table *, by (account, lname) */
    struct ms_vec tables_by_id; /* the same tables, by id */
    struct ms_vec ranges;       /* struct ms_range *, by id */
    struct ms_vec servers;      /* struct ms_server_rec *, by id */
    struct ms_vec props;        /* struct ms_props *, by account */
    struct ms_vec tombs;        /* struct ms__tomb *, by (account, lname) */
    struct ms_vec moves;        /* Rt__MoveReq * (unpacked), by move_id */
    Rt__LeaderStartCmd *leader; /* the last LEADER_START taken, or NULL */
    uint64_t grace_ms;
    uint64_t (*clock)(void *arg); /* wall clock ms; NULL = real time */
    void *clock_arg;

    /* Set by a failed LMDB transaction or allocation inside ms_cat_do_*;
     * cleared by ms_fsm before each apply. */
    int local_err;

    /* Commands (ms_cmd.c, ms_fsm.c). */
    ms_catalog_propose_fn propose; /* NULL: not replicated */
    void *propose_ud;
    uint64_t origin;      /* this member's id (0 = not set) */
    uint64_t origin_boot; /* this process start */
    uint64_t next_seq;    /* origin_seq of the next entry proposed */
    uint64_t expect_seq;  /* origin_seq of the next own committed entry */
};

/* The wall clock of ms_catalog_set_clock (real time by default). */
uint64_t ms_cat_now_ms(const struct ms_catalog *cat);

/* A write transaction of a mutation body: begin (an LMDB code), then
 * finish: commits with @ctr as the new counters, or aborts when @rc (an
 * LMDB code) says an earlier step failed. Returns 0 or an RT_E* code;
 * either failure also sets cat->local_err. */
int ms_cat_txn_begin(struct ms_catalog *cat, MDB_txn **txn);
int ms_cat_txn_finish(struct ms_catalog *cat,
                      MDB_txn *txn,
                      int rc,
                      const struct ms_counters *ctr,
                      const char *what);

/* Database @i (< MS_CAT_NDBS): its name and its handle. */
const char *ms_cat_db_name(size_t i);
MDB_dbi *ms_cat_db(struct ms_catalog *cat, size_t i);

/* Fills @cat's counters and empty mirror from every database as seen by
 * @txn. Errors: RT_ECORRUPT (a record that does not decode or breaks a
 * rule, or a range whose bounds are out of UTF-16 key order: logged with
 * the rtctl merge that fixes it), RT_EIO. On error the mirror may be
 * partly filled:
 * ms_cat_mirror_free() empties it. */
int ms_cat_load(struct ms_catalog *cat, MDB_txn *txn);
/* Frees every mirror item and empties the vectors. */
void ms_cat_mirror_free(struct ms_catalog *cat);

/* The mutation bodies: arguments, results and errors as the public
 * function of the same name in ms_catalog.h, plus: */
int ms_cat_do_create_table(struct ms_catalog *cat,
                           const char *account,
                           const char *name,
                           const struct ms_replica_spec *rs,
                           uint64_t now_ms, /* a tombstone's expiry check */
                           const struct ms_table **table_out,
                           const struct ms_range **range_out);
int ms_cat_do_delete_table(struct ms_catalog *cat,
                           const char *account,
                           const char *name,
                           uint64_t grace_ms, /* 0: no tombstone */
                           uint64_t now_ms,
                           struct ms_table_drop *drop);
int ms_cat_do_update_ranges(struct ms_catalog *cat,
                            const struct ms_range_put *puts,
                            size_t nput,
                            const uint64_t *dels,
                            size_t ndel,
                            uint64_t *new_ids);
int ms_cat_do_range_apply_repl(struct ms_catalog *cat,
                               const struct rt_repl_conf *c,
                               uint64_t guard_epoch,
                               uint64_t guard_seal_epoch);
int ms_cat_do_split_repl(struct ms_catalog *cat,
                         uint64_t range_id,
                         uint64_t guard_epoch,
                         const char *key,
                         uint64_t new_ids[2]);
int ms_cat_do_merge_repl(struct ms_catalog *cat,
                         uint64_t a_id,
                         uint64_t a_epoch,
                         uint64_t b_id,
                         uint64_t b_epoch,
                         uint64_t *new_id);
int ms_cat_do_register_server(struct ms_catalog *cat,
                              uint64_t want_id,
                              const char *addr,
                              const char *zone,
                              const uint8_t *incarnation,
                              const char *identity,
                              uint64_t *id_out,
                              bool *changed);
int ms_cat_do_bump_version(struct ms_catalog *cat);
int ms_cat_do_set_acl(struct ms_catalog *cat,
                      const char *account,
                      const char *name,
                      const struct ms_acl_entry *acl,
                      size_t n);
int ms_cat_do_set_props(struct ms_catalog *cat,
                        const char *account,
                        const Rt__ServiceProps *update);
/* Removes the tombstones expired at @now_ms. */
int ms_cat_do_purge_tombstones(struct ms_catalog *cat, uint64_t now_ms);
/* *changed: false when the server already had that state. */
int ms_cat_do_set_draining(struct ms_catalog *cat,
                           uint64_t server_id,
                           bool draining,
                           bool *changed);
int ms_cat_do_move_begin(struct ms_catalog *cat,
                         uint64_t range_id,
                         uint64_t target_id,
                         const char *target_addr,
                         const Rt__MoveReq **out);
int ms_cat_do_move_commit(struct ms_catalog *cat, uint64_t move_id);
int ms_cat_do_move_forget(struct ms_catalog *cat, uint64_t move_id);
/* Takes @ls (borrowed, copied) when its master_term is above the stored
 * one: the term and the leader record change in one transaction. Else
 * RT_ESTALE and nothing is written. */
int ms_cat_do_leader_start(struct ms_catalog *cat,
                           const Rt__LeaderStartCmd *ls);
/* IMPORT: restores the snapshot @snap into an empty catalog (no table,
 * range or server); RT_EEXIST when it is not empty, RT_ECORRUPT when the
 * stream is bad (both: nothing written, the same on every member). */
int ms_cat_do_import(struct ms_catalog *cat, const uint8_t *snap, size_t len);

#endif
