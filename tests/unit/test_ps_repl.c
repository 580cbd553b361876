/* Unit tests of the partition server's replication storage: the "repl"
 * DB's replica state records and the LSN each group commit takes per
 * range it changes (ps_store.h, ps_store_repl.c), on a real LMDB env in a
 * temporary directory without threads; and the (txn_id, lsn) ring reads
 * use to find lsn_T (ps_lsn_ring.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <lmdb.h>

#include "ps_lsn_ring.h"
#include "ps_store.h"
#include "rt_crc32c.h"
#include "rt_err.h"
#include "th_dir.h"
#include "th_props.h"

/* Fixture */

#define MAP_SIZE (64u * 1024u * 1024u)
#define TABLE 9

struct fx
{
    char dir[64];
    struct ps_store *s;
    struct rt_buf props;
};

static int setup(void **state)
{
    struct fx *f = calloc(1, sizeof(*f));
    char errmsg[RT_ERRMSG_SIZE] = "";
    assert_int_equal(th_dir_create("test_ps_repl", f->dir, sizeof(f->dir)), 0);
    assert_int_equal(ps_store_open(f->dir, MAP_SIZE, &f->s, errmsg), 0);
    rt_buf_init(&f->props);
    th_props1(&f->props, "v", "x");
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fx *f = *state;
    ps_store_close(f->s);
    th_dir_remove(f->dir);
    rt_buf_free(&f->props);
    free(f);
    return 0;
}

/* Closes and reopens the environment, nothing else (what a crash leaves:
 * every commit returned is durable, nothing else is kept). */
static void reopen(struct fx *f)
{
    char errmsg[RT_ERRMSG_SIZE] = "";
    ps_store_close(f->s);
    f->s = NULL;
    assert_int_equal(ps_store_open(f->dir, MAP_SIZE, &f->s, errmsg), 0);
}

/* Helpers */

static struct ps_op mkop(const struct fx *f,
                         enum ps_op_kind kind,
                         const char *pk,
                         const char *rk)
{
    struct ps_op op;
    memset(&op, 0, sizeof(op));
    op.kind = kind;
    op.pk = pk;
    op.rk = rk;
    op.props = f->props.data;
    op.props_len = f->props.len;
    return op;
}

static struct ps_write mkwrite(uint64_t range_id,
                               struct ps_op *ops,
                               size_t n,
                               int atomic)
{
    struct ps_write w;
    memset(&w, 0, sizeof(w));
    w.table_id = TABLE;
    w.ops = ops;
    w.n_ops = n;
    w.atomic = atomic;
    w.failed_index = -1;
    w.range_id = range_id;
    return w;
}

/* Commits @n writes as one group. */
static void group(struct fx *f, struct ps_write **w, size_t n)
{
    assert_int_equal(ps_store_write_group(f->s, w, n), 0);
}

/* One insert of (@pk, @rk) for @range_id in its own group; returns its
 * LSN. */
static uint64_t insert1(struct fx *f,
                        uint64_t range_id,
                        const char *pk,
                        const char *rk)
{
    struct ps_op op = mkop(f, PS_OP_INSERT, pk, rk);
    struct ps_write w = mkwrite(range_id, &op, 1, 0);
    struct ps_write *wp = &w;
    uint64_t lsn;
    group(f, &wp, 1);
    assert_int_equal(w.status, 0);
    assert_int_equal(op.code, 0);
    lsn = w.lsn;
    ps_write_reset(&w);
    return lsn;
}

/* The range's applied LSN (0 when it has no record). */
static uint64_t applied(struct fx *f, uint64_t range_id)
{
    struct ps_rstate rs;
    int rc = ps_store_repl_get(f->s, range_id, &rs);
    if (rc == RT_ENOTFOUND) {
        return 0;
    }
    assert_int_equal(rc, 0);
    return rs.applied_lsn;
}

static int exists(struct fx *f, const char *pk, const char *rk)
{
    struct rt_buf v = RT_BUF_INIT;
    int rc = ps_store_get(f->s, TABLE, pk, rk, &v);
    rt_buf_free(&v);
    assert_true(rc == 0 || rc == RT_ENOTFOUND);
    return rc == 0;
}

/* Tests */

/* Each group that changes a range takes the range's next LSN, from 1, and
 * the range's record says the last one. */
static void test_lsn_per_group(void **state)
{
    struct fx *f = *state;
    char rk[16];

    assert_int_equal(applied(f, 7), 0);
    for (int i = 1; i <= 5; i++) {
        snprintf(rk, sizeof(rk), "r%d", i);
        assert_int_equal(insert1(f, 7, "p", rk), (uint64_t)i);
        assert_int_equal(applied(f, 7), (uint64_t)i);
    }
    struct ps_rstate rs;
    assert_int_equal(ps_store_repl_get(f->s, 7, &rs), 0);
    assert_int_equal(rs.state, PS_RS_OK);
    assert_int_equal(rs.applied_epoch, rs.epoch);
}

/* An entity group transaction is one LSN, and so is a non-atomic write of
 * several ops, and so are several writes of one range in one group. */
static void test_batch_one_lsn(void **state)
{
    struct fx *f = *state;
    struct ps_op b[5], m[3], one[2];
    const char *rks[] = {"a", "b", "c", "d", "e"};

    for (int i = 0; i < 5; i++) {
        b[i] = mkop(f, PS_OP_INSERT, "p", rks[i]);
    }
    struct ps_write wb = mkwrite(3, b, 5, 1);
    struct ps_write *wp = &wb;
    group(f, &wp, 1);
    assert_int_equal(wb.status, 0);
    assert_int_equal(wb.lsn, 1);
    assert_int_equal(applied(f, 3), 1);

    for (int i = 0; i < 3; i++) {
        m[i] = mkop(f, PS_OP_UPSERT_REPLACE, "q", rks[i]);
    }
    struct ps_write wm = mkwrite(3, m, 3, 0);
    wp = &wm;
    group(f, &wp, 1);
    assert_int_equal(wm.lsn, 2);

    one[0] = mkop(f, PS_OP_INSERT, "s", "1");
    one[1] = mkop(f, PS_OP_DELETE, "p", "a");
    struct ps_write w1 = mkwrite(3, &one[0], 1, 0);
    struct ps_write w2 = mkwrite(3, &one[1], 1, 0);
    struct ps_write *ws[] = {&w1, &w2};
    group(f, ws, 2);
    assert_int_equal(one[0].code, 0);
    assert_int_equal(one[1].code, 0);
    assert_int_equal(w1.lsn, 3);
    assert_int_equal(w2.lsn, 3);
    assert_int_equal(w1.txn_id, w2.txn_id);
    assert_int_equal(applied(f, 3), 3);
    assert_false(exists(f, "p", "a"));
}

/* A group touching two ranges takes one LSN for each, in the same
 * transaction; a write of no range takes none and writes no record. */
static void test_two_ranges_one_group(void **state)
{
    struct fx *f = *state;
    struct ps_op o[4];

    assert_int_equal(insert1(f, 2, "b0", "x"), 1);
    o[0] = mkop(f, PS_OP_INSERT, "a1", "x");
    o[1] = mkop(f, PS_OP_INSERT, "b1", "x");
    o[2] = mkop(f, PS_OP_INSERT, "a2", "x");
    o[3] = mkop(f, PS_OP_INSERT, "z", "x");
    struct ps_write w0 = mkwrite(1, &o[0], 1, 0);
    struct ps_write w1 = mkwrite(2, &o[1], 1, 0);
    struct ps_write w2 = mkwrite(1, &o[2], 1, 0);
    struct ps_write w3 = mkwrite(0, &o[3], 1, 0);
    struct ps_write *ws[] = {&w0, &w1, &w2, &w3};
    group(f, ws, 4);
    assert_int_equal(w0.lsn, 1);
    assert_int_equal(w2.lsn, 1);
    assert_int_equal(w1.lsn, 2);
    assert_int_equal(w3.lsn, 0);
    assert_int_equal(w0.txn_id, w1.txn_id);
    assert_int_equal(applied(f, 1), 1);
    assert_int_equal(applied(f, 2), 2);
    struct ps_rstate rs;
    assert_int_equal(ps_store_repl_get(f->s, 0, &rs), RT_ENOTFOUND);
}

/* A write that fails its checks changes nothing and takes no LSN, alone or
 * next to a write of the same range that succeeds. */
static void test_failed_write_no_lsn(void **state)
{
    struct fx *f = *state;
    struct ps_op o[3], b[2];

    assert_int_equal(insert1(f, 4, "p", "1"), 1);

    o[0] = mkop(f, PS_OP_INSERT, "p", "1"); /* exists */
    struct ps_write w0 = mkwrite(4, &o[0], 1, 0);
    struct ps_write *wp = &w0;
    group(f, &wp, 1);
    assert_int_equal(o[0].code, RT_EEXIST);
    assert_int_equal(w0.lsn, 0);
    assert_int_equal(applied(f, 4), 1);

    o[1] = mkop(f, PS_OP_REPLACE, "p", "nope"); /* missing */
    o[2] = mkop(f, PS_OP_INSERT, "p", "2");
    struct ps_write w1 = mkwrite(4, &o[1], 1, 0);
    struct ps_write w2 = mkwrite(4, &o[2], 1, 0);
    struct ps_write *ws[] = {&w1, &w2};
    group(f, ws, 2);
    assert_int_equal(o[1].code, RT_ENOTFOUND);
    assert_int_equal(w1.lsn, 0);
    assert_int_equal(w2.lsn, 2);
    assert_int_equal(applied(f, 4), 2);

    /* A batch whose second op fails puts nothing. */
    b[0] = mkop(f, PS_OP_INSERT, "p", "3");
    b[1] = mkop(f, PS_OP_INSERT, "p", "1");
    struct ps_write wb = mkwrite(4, b, 2, 1);
    wp = &wb;
    group(f, &wp, 1);
    assert_int_equal(wb.status, RT_EEXIST);
    assert_int_equal(wb.failed_index, 1);
    assert_int_equal(wb.lsn, 0);
    assert_int_equal(applied(f, 4), 2);
    assert_false(exists(f, "p", "3"));
}

/* After a crash (close, reopen) the applied LSN is the number of groups
 * committed for the range, the data is theirs, and LSNs go on from it. */
static void test_reopen_applied_matches_data(void **state)
{
    struct fx *f = *state;
    char rk[16];

    for (int i = 1; i <= 20; i++) {
        snprintf(rk, sizeof(rk), "r%02d", i);
        insert1(f, 11, "p", rk);
        if (i % 4 == 0) {
            insert1(f, 12, "q", rk);
        }
    }
    reopen(f);
    assert_int_equal(applied(f, 11), 20);
    assert_int_equal(applied(f, 12), 5);
    for (int i = 1; i <= 20; i++) {
        snprintf(rk, sizeof(rk), "r%02d", i);
        assert_true(exists(f, "p", rk));
        assert_int_equal(exists(f, "q", rk), i % 4 == 0);
    }
    assert_int_equal(insert1(f, 11, "p", "r21"), 21);
}

/* A data directory made before replication (no "repl" DB) opens, keeps
 * its data, and starts every range at LSN 0. */
static void test_old_directory_upgrades(void **state)
{
    struct fx *f = *state;
    MDB_env *env;
    MDB_txn *txn;
    MDB_dbi dbi;

    insert1(f, 0, "old", "1");
    ps_store_close(f->s);
    f->s = NULL;
    /* Remove the "repl" DB as if it had never been there. */
    assert_int_equal(mdb_env_create(&env), 0);
    assert_int_equal(mdb_env_set_maxdbs(env, 4), 0);
    assert_int_equal(mdb_env_set_mapsize(env, MAP_SIZE), 0);
    assert_int_equal(mdb_env_open(env, f->dir, 0, 0644), 0);
    assert_int_equal(mdb_txn_begin(env, NULL, 0, &txn), 0);
    assert_int_equal(mdb_dbi_open(txn, "repl", 0, &dbi), 0);
    assert_int_equal(mdb_drop(txn, dbi, 1), 0);
    assert_int_equal(mdb_txn_commit(txn), 0);
    assert_int_equal(mdb_txn_begin(env, NULL, MDB_RDONLY, &txn), 0);
    assert_int_equal(mdb_dbi_open(txn, "repl", 0, &dbi), MDB_NOTFOUND);
    mdb_txn_abort(txn);
    mdb_env_close(env);

    reopen(f);
    assert_true(exists(f, "old", "1"));
    assert_int_equal(applied(f, 5), 0);
    assert_int_equal(insert1(f, 5, "old", "2"), 1);
    reopen(f);
    assert_int_equal(applied(f, 5), 1);
}

/* A record put by an assignment keeps its fields; groups move only
 * applied_lsn and applied_epoch (to the record's epoch). */
static void test_record_fields_kept(void **state)
{
    struct fx *f = *state;
    struct ps_rstate rs, got;

    memset(&rs, 0, sizeof(rs));
    rs.epoch = 4;
    rs.primary_epoch = 3;
    rs.applied_epoch = 2;
    rs.applied_lsn = 40;
    rs.commit_lsn = 39;
    rs.sealed_epoch = 1;
    rs.role = PS_RS_ROLE_PRIMARY;
    rs.state = PS_RS_OK;
    assert_int_equal(ps_store_repl_put(f->s, 8, &rs), 0);
    assert_int_equal(ps_store_repl_get(f->s, 8, &got), 0);
    assert_memory_equal(&rs, &got, sizeof(rs));

    assert_int_equal(insert1(f, 8, "p", "1"), 41);
    assert_int_equal(ps_store_repl_get(f->s, 8, &got), 0);
    rs.applied_lsn = 41;
    rs.applied_epoch = 4;
    assert_memory_equal(&rs, &got, sizeof(rs));
}

/* An update sets only the fields it names (a missing record starts at
 * LSN 0, state OK), keeps the LSNs a group wrote, and never lowers the
 * sealed epoch; it survives a reopen. */
static void test_record_update(void **state)
{
    struct fx *f = *state;
    struct ps_rstate rs, got;

    memset(&rs, 0, sizeof(rs));
    rs.epoch = 2;
    rs.primary_epoch = 2;
    rs.role = PS_RS_ROLE_SECONDARY;
    rs.sealed_epoch = 9; /* not named: ignored */
    assert_int_equal(
        ps_store_repl_update(
            f->s, 8, PS_RS_SET_EPOCH | PS_RS_SET_ROLE | PS_RS_SET_PRIMARY_EPOCH,
            &rs),
        0);
    assert_int_equal(ps_store_repl_get(f->s, 8, &got), 0);
    assert_int_equal(got.epoch, 2);
    assert_int_equal(got.primary_epoch, 2);
    assert_int_equal(got.role, PS_RS_ROLE_SECONDARY);
    assert_int_equal(got.sealed_epoch, 0);
    assert_int_equal(got.applied_lsn, 0);
    assert_int_equal(got.state, PS_RS_OK);
    assert_int_equal(insert1(f, 8, "p", "1"), 1);
    rs.sealed_epoch = 3;
    assert_int_equal(ps_store_repl_update(f->s, 8, PS_RS_SET_SEALED_EPOCH, &rs),
                     0);
    rs.sealed_epoch = 2;
    assert_int_equal(ps_store_repl_update(f->s, 8, PS_RS_SET_SEALED_EPOCH, &rs),
                     0);
    reopen(f);
    assert_int_equal(ps_store_repl_get(f->s, 8, &got), 0);
    assert_int_equal(got.sealed_epoch, 3);
    assert_int_equal(got.applied_lsn, 1);
    assert_int_equal(got.applied_epoch, 2);
    assert_int_equal(got.epoch, 2);
    assert_int_equal(got.role, PS_RS_ROLE_SECONDARY);
}

/* A damaged record is RT_ECORRUPT: writes of that range fail whole
 * (never an LSN guessed), other ranges go on. */
static void test_corrupt_record(void **state)
{
    struct fx *f = *state;
    MDB_env *env;
    MDB_txn *txn;
    MDB_dbi dbi;
    uint8_t kb[10] = {'r', 's', 0, 0, 0, 0, 0, 0, 0, 6};
    MDB_val k = {sizeof(kb), kb}, v;
    uint8_t copy[64];

    insert1(f, 6, "p", "1");
    ps_store_close(f->s);
    f->s = NULL;
    assert_int_equal(mdb_env_create(&env), 0);
    assert_int_equal(mdb_env_set_maxdbs(env, 4), 0);
    assert_int_equal(mdb_env_set_mapsize(env, MAP_SIZE), 0);
    assert_int_equal(mdb_env_open(env, f->dir, 0, 0644), 0);
    assert_int_equal(mdb_txn_begin(env, NULL, 0, &txn), 0);
    assert_int_equal(mdb_dbi_open(txn, "repl", 0, &dbi), 0);
    assert_int_equal(mdb_get(txn, dbi, &k, &v), 0);
    assert_true(v.mv_size <= sizeof(copy));
    memcpy(copy, v.mv_data, v.mv_size);
    copy[30] ^= 0x01; /* a bit of applied_lsn */
    v.mv_data = copy;
    assert_int_equal(mdb_put(txn, dbi, &k, &v, 0), 0);
    assert_int_equal(mdb_txn_commit(txn), 0);
    mdb_env_close(env);
    reopen(f);

    struct ps_rstate rs;
    assert_int_equal(ps_store_repl_get(f->s, 6, &rs), RT_ECORRUPT);
    struct ps_op o = mkop(f, PS_OP_INSERT, "p", "2");
    struct ps_write w = mkwrite(6, &o, 1, 0);
    struct ps_write *wp = &w;
    assert_int_equal(ps_store_write_group(f->s, &wp, 1), RT_ECORRUPT);
    assert_int_equal(w.status, RT_ECORRUPT);
    assert_int_equal(w.lsn, 0);
    assert_false(exists(f, "p", "2"));
    assert_int_equal(insert1(f, 1, "other", "1"), 1);
}

/* Raw writes (storage-level changes) of a range take LSNs too. */
static void test_raw_write_lsn(void **state)
{
    struct fx *f = *state;
    uint8_t key[12] = {0, 0, 0, 0, 0, 0, 0, TABLE, 'a', 0, 'b', 0};
    uint8_t val[4] = {1, 2, 3, 4};
    struct ps_kv kv = {key, sizeof(key), val, sizeof(val), 0};
    struct ps_write w;

    memset(&w, 0, sizeof(w));
    w.table_id = TABLE;
    w.kvs = &kv;
    w.n_kvs = 1;
    w.failed_index = -1;
    w.range_id = 13;
    struct ps_write *wp = &w;
    group(f, &wp, 1);
    assert_int_equal(w.status, 0);
    assert_int_equal(w.lsn, 1);
}

/* A replica's raw writes carry their primary's LSNs: two groups applied
 * in one commit leave the record at the higher one, an empty group still
 * takes its LSN, a gap or a repeat is refused, and a read reports the
 * transaction it ran in. */
static void test_raw_write_explicit_lsn(void **state)
{
    struct fx *f = *state;
    uint8_t key[12] = {0, 0, 0, 0, 0, 0, 0, TABLE, 'a', 0, 'b', 0};
    uint8_t val[4] = {1, 2, 3, 4};
    struct ps_kv kv = {key, sizeof(key), val, sizeof(val), 0};
    struct ps_write w[2];
    struct ps_write *wp[2] = {&w[0], &w[1]};

    memset(w, 0, sizeof(w));
    for (int i = 0; i < 2; i++) {
        w[i].table_id = TABLE;
        w[i].kvs = &kv;
        w[i].n_kvs = 1;
        w[i].failed_index = -1;
        w[i].range_id = 13;
        w[i].repl_lsn = 1 + (uint64_t)i;
    }
    group(f, wp, 2);
    assert_int_equal(w[0].status, 0);
    assert_int_equal(applied(f, 13), 2);
    w[0].n_kvs = 0;
    w[0].repl_lsn = 3;
    group(f, wp, 1);
    assert_int_equal(w[0].status, 0);
    assert_int_equal(applied(f, 13), 3);
    /* A gap (4 missing) or a repeat fails the write, nothing applied. */
    w[0].repl_lsn = 5;
    assert_int_equal(ps_store_write_group(f->s, wp, 1), RT_ELSNGAP);
    assert_int_equal(w[0].status, RT_ELSNGAP);
    w[0].repl_lsn = 3;
    assert_int_equal(ps_store_write_group(f->s, wp, 1), RT_ELSNGAP);
    assert_int_equal(applied(f, 13), 3);
    w[0].repl_lsn = 4;
    group(f, wp, 1);
    assert_int_equal(applied(f, 13), 4);
    struct rt_buf v = RT_BUF_INIT;
    uint64_t txn = 0;
    assert_int_equal(ps_store_get_txn(f->s, TABLE, "nokey", "x", &v, &txn),
                     RT_ENOTFOUND);
    assert_int_equal(txn, w[0].txn_id);
    rt_buf_free(&v);
}

/* The history (docs/DESIGN-replication.md §2.2, §7.3) moves with the
 * data: a primary's groups are of its record's primary_epoch, a
 * replica's of the generation they carry; a new generation opens an
 * entry at its first LSN, an unknown one (0) forgets the history, and a
 * history that is unknown stays so (no entry claims where an earlier
 * generation began). It survives a reopen; a version-1 record (no
 * history) still reads, as an unknown history. */
static void test_record_history(void **state)
{
    struct fx *f = *state;
    struct ps_rstate rs, got;
    uint8_t key[12] = {0, 0, 0, 0, 0, 0, 0, TABLE, 'a', 0, 'b', 0};
    uint8_t val[4] = {1, 2, 3, 4};
    struct ps_kv kv = {key, sizeof(key), val, sizeof(val), 0};
    struct ps_write w;
    struct ps_write *wp = &w;

    memset(&rs, 0, sizeof(rs));
    rs.epoch = 3;
    rs.primary_epoch = 3;
    rs.role = PS_RS_ROLE_PRIMARY;
    assert_int_equal(
        ps_store_repl_update(
            f->s, 8, PS_RS_SET_EPOCH | PS_RS_SET_ROLE | PS_RS_SET_PRIMARY_EPOCH,
            &rs),
        0);
    assert_int_equal(insert1(f, 8, "p", "1"), 1);
    assert_int_equal(insert1(f, 8, "p", "2"), 2);
    rs.epoch = rs.primary_epoch = 5;
    assert_int_equal(
        ps_store_repl_update(f->s, 8, PS_RS_SET_EPOCH | PS_RS_SET_PRIMARY_EPOCH,
                             &rs),
        0);
    assert_int_equal(insert1(f, 8, "p", "3"), 3);
    /* A secondary now: groups of generation 7, from LSN 4. */
    rs.role = PS_RS_ROLE_SECONDARY;
    assert_int_equal(ps_store_repl_update(f->s, 8, PS_RS_SET_ROLE, &rs), 0);
    memset(&w, 0, sizeof(w));
    w.table_id = TABLE;
    w.kvs = &kv;
    w.n_kvs = 1;
    w.failed_index = -1;
    w.range_id = 8;
    w.repl_lsn = 4;
    w.repl_gen = 7;
    group(f, &wp, 1);
    assert_int_equal(w.status, 0);
    reopen(f);
    assert_int_equal(ps_store_repl_get(f->s, 8, &got), 0);
    assert_int_equal(got.applied_lsn, 4);
    assert_int_equal(got.n_hist, 3);
    assert_int_equal(got.hist[0].epoch, 3);
    assert_int_equal(got.hist[0].first_lsn, 1);
    assert_int_equal(got.hist[1].epoch, 5);
    assert_int_equal(got.hist[1].first_lsn, 3);
    assert_int_equal(got.hist[2].epoch, 7);
    assert_int_equal(got.hist[2].first_lsn, 4);
    /* A group of unknown generation: unknown from then on. */
    w.repl_lsn = 5;
    w.repl_gen = 0;
    group(f, &wp, 1);
    w.repl_lsn = 6;
    w.repl_gen = 7;
    group(f, &wp, 1);
    assert_int_equal(ps_store_repl_get(f->s, 8, &got), 0);
    assert_int_equal(got.applied_lsn, 6);
    assert_int_equal(got.n_hist, 0);
    /* Set with the applied position (a copy's end, a split). */
    rs.applied_lsn = 6;
    rs.n_hist = 1;
    rs.hist[0] = (struct ps_rs_gen){2, 1};
    assert_int_equal(ps_store_repl_update(f->s, 8, PS_RS_SET_APPLIED, &rs), 0);
    assert_int_equal(ps_store_repl_get(f->s, 8, &got), 0);
    assert_int_equal(got.n_hist, 1);
    assert_int_equal(got.hist[0].epoch, 2);

    /* Version 1: 56 bytes, CRC32C over the first 52. */
    MDB_env *env;
    MDB_txn *txn;
    MDB_dbi dbi;
    uint8_t kb[10] = {'r', 's', 0, 0, 0, 0, 0, 0, 0, 8};
    uint8_t v1[56];
    MDB_val k = {sizeof(kb), kb}, v = {sizeof(v1), v1};
    memset(v1, 0, sizeof(v1));
    v1[0] = 1;
    v1[1] = PS_RS_ROLE_SECONDARY;
    v1[2] = PS_RS_OK;
    v1[28] = 9; /* applied_lsn */
    uint32_t crc = rt_crc32c(0, v1, 52);
    memcpy(v1 + 52, &crc, 4); /* little-endian hosts only, as the store */
    ps_store_close(f->s);
    f->s = NULL;
    assert_int_equal(mdb_env_create(&env), 0);
    assert_int_equal(mdb_env_set_maxdbs(env, 4), 0);
    assert_int_equal(mdb_env_set_mapsize(env, MAP_SIZE), 0);
    assert_int_equal(mdb_env_open(env, f->dir, 0, 0644), 0);
    assert_int_equal(mdb_txn_begin(env, NULL, 0, &txn), 0);
    assert_int_equal(mdb_dbi_open(txn, "repl", 0, &dbi), 0);
    assert_int_equal(mdb_put(txn, dbi, &k, &v, 0), 0);
    assert_int_equal(mdb_txn_commit(txn), 0);
    mdb_env_close(env);
    reopen(f);
    assert_int_equal(ps_store_repl_get(f->s, 8, &got), 0);
    assert_int_equal(got.applied_lsn, 9);
    assert_int_equal(got.role, PS_RS_ROLE_SECONDARY);
    assert_int_equal(got.n_hist, 0);
}

/* A group that LMDB fails as a whole (map full) takes no LSN; its writes,
 * retried one by one, each take their own when they commit. */
static void test_failed_group_retried_alone(void **state)
{
    struct fx *f = *state;
    char errmsg[RT_ERRMSG_SIZE] = "";
    enum { NW = 3, VLEN = 400 * 1024 };
    uint8_t keys[NW][12];
    uint8_t *val = calloc(1, VLEN);
    struct ps_kv kv[NW];
    struct ps_write w[NW], *wp[NW];
    uint64_t next = 1;
    int ok = 0;

    /* A 1 MiB map: the three 400 KiB values cannot commit together. */
    ps_store_close(f->s);
    th_dir_remove(f->dir);
    assert_int_equal(th_dir_create("test_ps_repl", f->dir, sizeof(f->dir)), 0);
    assert_int_equal(ps_store_open(f->dir, 1024 * 1024, &f->s, errmsg), 0);
    assert_non_null(val);
    memset(val, 7, VLEN);
    for (int i = 0; i < NW; i++) {
        uint8_t k[12] = {0, 0, 0, 0, 0, 0, 0, TABLE, 'k', 0, (uint8_t)i, 0};
        memcpy(keys[i], k, sizeof(k));
        kv[i] = (struct ps_kv){keys[i], sizeof(keys[i]), val, VLEN, 0};
        memset(&w[i], 0, sizeof(w[i]));
        w[i].table_id = TABLE;
        w[i].kvs = &kv[i];
        w[i].n_kvs = 1;
        w[i].failed_index = -1;
        w[i].range_id = 21;
        wp[i] = &w[i];
    }
    ps_store_write_group(f->s, wp, NW);
    for (int i = 0; i < NW; i++) {
        if (w[i].status == 0) {
            assert_int_equal(w[i].lsn, next);
            next++;
            ok++;
        } else {
            assert_int_equal(w[i].status, RT_ENOSPACE);
            assert_int_equal(w[i].lsn, 0);
        }
    }
    assert_true(ok >= 1 && ok < NW);
    assert_int_equal(applied(f, 21), (uint64_t)ok);
    free(val);
}

/* The ring: lsn_T is the newest LSN committed at or before T, exact
 * inside the window; older reads get the floor, never less than lsn_T. */
static void test_lsn_ring(void **state)
{
    struct ps_lsn_ring r;
    (void)state;

    ps_lsn_ring_init(&r, 5);
    assert_int_equal(ps_lsn_ring_at(&r, 0), 5);
    assert_int_equal(ps_lsn_ring_at(&r, 100), 5);
    assert_int_equal(ps_lsn_ring_last(&r), 5);

    /* Txn ids grow by 10, LSNs by 1: LSN 6 in txn 110, ... */
    for (uint64_t i = 1; i <= 3; i++) {
        ps_lsn_ring_push(&r, 100 + 10 * i, 5 + i);
    }
    assert_int_equal(ps_lsn_ring_at(&r, 109), 5);
    assert_int_equal(ps_lsn_ring_at(&r, 110), 6);
    assert_int_equal(ps_lsn_ring_at(&r, 125), 7);
    assert_int_equal(ps_lsn_ring_at(&r, 130), 8);
    assert_int_equal(ps_lsn_ring_at(&r, 1000), 8);
    assert_int_equal(ps_lsn_ring_last(&r), 8);

    /* Not above the newest: ignored. */
    ps_lsn_ring_push(&r, 140, 8);
    ps_lsn_ring_push(&r, 150, 2);
    assert_int_equal(ps_lsn_ring_last(&r), 8);
    assert_int_equal(ps_lsn_ring_at(&r, 150), 8);

    /* Wrap: LSN 9..(8 + 2N) in txns 200, 210, ... */
    for (uint64_t i = 1; i <= 2 * PS_LSN_RING_N; i++) {
        ps_lsn_ring_push(&r, 190 + 10 * i, 8 + i);
    }
    uint64_t last = 8 + 2 * PS_LSN_RING_N;
    uint64_t oldest = last - PS_LSN_RING_N + 1;
    uint64_t oldest_txn = 190 + 10 * (oldest - 8);
    assert_int_equal(ps_lsn_ring_last(&r), last);
    assert_int_equal(ps_lsn_ring_at(&r, 1u << 30), last);
    assert_int_equal(ps_lsn_ring_at(&r, oldest_txn), oldest);
    assert_int_equal(ps_lsn_ring_at(&r, oldest_txn + 15), oldest + 1);
    /* The floor (the pair pushed out last) is exact from its commit on. */
    assert_int_equal(ps_lsn_ring_at(&r, oldest_txn - 5), oldest - 1);
    /* Older than the floor: an upper bound, safe for the cw gate. */
    assert_int_equal(ps_lsn_ring_at(&r, 0), oldest - 1);
    assert_true(ps_lsn_ring_at(&r, 115) >= 6);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_lsn_per_group, setup, teardown),
        cmocka_unit_test_setup_teardown(test_batch_one_lsn, setup, teardown),
        cmocka_unit_test_setup_teardown(test_two_ranges_one_group, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_failed_write_no_lsn, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_reopen_applied_matches_data, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_old_directory_upgrades, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_record_fields_kept, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_record_update, setup, teardown),
        cmocka_unit_test_setup_teardown(test_record_history, setup, teardown),
        cmocka_unit_test_setup_teardown(test_corrupt_record, setup, teardown),
        cmocka_unit_test_setup_teardown(test_raw_write_lsn, setup, teardown),
        cmocka_unit_test_setup_teardown(test_raw_write_explicit_lsn, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_failed_group_retried_alone, setup,
                                        teardown),
        cmocka_unit_test(test_lsn_ring),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
