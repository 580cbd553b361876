/* Unit tests of the store's checksummed values (ps_store.h, "Checksums";
 * docs/DESIGN-replication.md §5.6) on a real LMDB environment: values
 * are sealed where they are written; a flipped byte, or a value under
 * another key, is RT_ECORRUPT on get, scan, snapshot and merge, never
 * data; values without the flag (written before checksums) still read.
 * Bad values are planted by closing the store and rewriting the record
 * with plain LMDB calls. Also the start-up check of data.mdb
 * (ps_store_file_check): its reading of LMDB's meta pages against
 * LMDB's own numbers, truncated files and bad magic. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <lmdb.h>

#include "ps_store.h"
#include "rt_entity.h"
#include "rt_err.h"
#include "rt_key.h"
#include "th_dir.h"
#include "th_lmdb.h"
#include "th_props.h"

/* Fixture */

#define MAP_SIZE (64u * 1024u * 1024u)
#define T 7 /* table id */

struct fx
{
    char dir[64];
    struct ps_store *s;
};

static void store_open(struct fx *f)
{
    char errmsg[RT_ERRMSG_SIZE] = "";
    assert_int_equal(ps_store_open(f->dir, MAP_SIZE, &f->s, errmsg), 0);
}

static int setup(void **state)
{
    struct fx *f = calloc(1, sizeof(*f));
    assert_int_equal(th_dir_create("test_ps_crc", f->dir, sizeof(f->dir)), 0);
    store_open(f);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fx *f = *state;
    ps_store_close(f->s);
    th_dir_remove(f->dir);
    free(f);
    return 0;
}

/* Helpers */

/* Applies one op on table T in its own group, with If-Match ETag
 * @if_match (0: none); returns the op's code. */
static int apply_if(struct ps_store *s,
                    enum ps_op_kind kind,
                    const char *pk,
                    const char *rk,
                    const char *val,
                    uint64_t if_match)
{
    struct rt_buf props = RT_BUF_INIT;
    struct ps_op op;
    struct ps_write w;
    struct ps_write *wp = &w;

    th_props1(&props, "v", val);
    memset(&op, 0, sizeof(op));
    op.kind = kind;
    op.pk = pk;
    op.rk = rk;
    op.props = props.data;
    op.props_len = props.len;
    op.if_match = if_match;
    memset(&w, 0, sizeof(w));
    w.table_id = T;
    w.ops = &op;
    w.n_ops = 1;
    w.failed_index = -1;
    assert_int_equal(ps_store_write_group(s, &wp, 1), 0);
    assert_int_equal(w.status, 0);
    rt_buf_free(&op.value);
    rt_buf_free(&props);
    return op.code;
}

static int apply(struct ps_store *s,
                 enum ps_op_kind kind,
                 const char *pk,
                 const char *rk,
                 const char *val)
{
    return apply_if(s, kind, pk, rk, val, 0);
}

static void put(struct ps_store *s, const char *pk, const char *rk)
{
    assert_int_equal(apply(s, PS_OP_UPSERT_REPLACE, pk, rk, rk), 0);
}

static void skey(struct rt_buf *k, const char *pk, const char *rk)
{
    rt_buf_reset(k);
    rt_key_entity(k, T, pk, strlen(pk), rk, strlen(rk));
}

/* With the store closed: opens the environment with plain LMDB and reads
 * the "data" record of (pk, rk) into @out when @out is set, then stores
 * @val (when set) under (pk2, rk2). */
static void raw(const struct fx *f,
                const char *pk,
                const char *rk,
                struct rt_buf *out,
                const char *pk2,
                const char *rk2,
                const struct rt_buf *val)
{
    struct rt_buf k = RT_BUF_INIT;
    if (out) {
        skey(&k, pk, rk);
        assert_int_equal(th_lmdb_get(f->dir, "data", k.data, k.len, out), 0);
    }
    if (val) {
        skey(&k, pk2, rk2);
        assert_int_equal(
            th_lmdb_put(f->dir, "data", k.data, k.len, val->data, val->len), 0);
    }
    rt_buf_free(&k);
}

/* Closes the store, flips one bit of (pk, rk)'s stored value at @at (from
 * the end when negative) and opens the store again. */
static void flip(struct fx *f, const char *pk, const char *rk, long at)
{
    struct rt_buf v = RT_BUF_INIT;
    ps_store_close(f->s);
    raw(f, pk, rk, &v, NULL, NULL, NULL);
    v.data[at < 0 ? (long)v.len + at : at] ^= 0x10;
    raw(f, NULL, NULL, NULL, pk, rk, &v);
    rt_buf_free(&v);
    store_open(f);
}

static struct ps_scan mkscan(void)
{
    struct ps_scan sc;
    memset(&sc, 0, sizeof(sc));
    sc.table_id = T;
    sc.low = "";
    return sc;
}

static int get(struct ps_store *s, const char *pk, const char *rk)
{
    struct rt_buf v = RT_BUF_INIT;
    int rc = ps_store_get(s, T, pk, rk, &v);
    if (rc != 0) {
        assert_int_equal(v.len, 0); /* no data on an error */
    }
    rt_buf_free(&v);
    return rc;
}

/* Tests */

/* The store seals what it writes: flag set, crc over the storage key. */
static void test_written_values_sealed(void **state)
{
    struct fx *f = *state;
    struct rt_buf v = RT_BUF_INIT, k = RT_BUF_INIT;
    put(f->s, "p", "a");
    assert_int_equal(ps_store_get(f->s, T, "p", "a", &v), 0);
    assert_true(v.data[1] & RT_VALUE_F_CRC);
    assert_true(rt_get_u32le(v.data + 4) != 0);
    skey(&k, "p", "a");
    assert_int_equal(rt_value_check(v.data, v.len, k.data, k.len), 0);
    rt_buf_free(&v);
    rt_buf_free(&k);
}

/* A flipped byte in the blob or the header: get and scan fail with
 * RT_ECORRUPT, the neighbours still read, a merge fails, and an
 * unconditional replace repairs the entity. */
static void test_flipped_byte(void **state)
{
    struct fx *f = *state;
    const long at[] = {-1, 9, 2};
    for (size_t i = 0; i < sizeof(at) / sizeof(at[0]); i++) {
        struct ps_scan sc = mkscan();
        put(f->s, "p", "a");
        put(f->s, "p", "b");
        put(f->s, "p", "c");
        flip(f, "p", "b", at[i]);
        assert_int_equal(get(f->s, "p", "b"), RT_ECORRUPT);
        assert_int_equal(get(f->s, "p", "a"), 0);
        assert_int_equal(get(f->s, "p", "c"), 0);
        assert_int_equal(ps_store_scan(f->s, &sc), RT_ECORRUPT);
        assert_int_equal(sc.n, 0);
        assert_null(sc.recs);
        /* A scan that ends before the bad key is fine. */
        sc = mkscan();
        sc.limit = 1;
        assert_int_equal(ps_store_scan(f->s, &sc), 0);
        assert_int_equal(sc.n, 1);
        ps_scan_free(&sc);
        assert_int_equal(apply(f->s, PS_OP_MERGE, "p", "b", "m"), RT_ECORRUPT);
        assert_int_equal(apply(f->s, PS_OP_UPSERT_MERGE, "p", "b", "m"),
                         RT_ECORRUPT);
        assert_int_equal(get(f->s, "p", "b"), RT_ECORRUPT);
        assert_int_equal(apply(f->s, PS_OP_UPSERT_REPLACE, "p", "b", "r"), 0);
        assert_int_equal(get(f->s, "p", "b"), 0);
        sc = mkscan();
        assert_int_equal(ps_store_scan(f->s, &sc), 0);
        assert_int_equal(sc.n, 3);
        ps_scan_free(&sc);
    }
}

/* Ops on a bad value: those that read it (an ETag condition) fail, an
 * unconditional delete or replace goes through without reading it. */
static void test_conditions_on_bad_value(void **state)
{
    struct fx *f = *state;
    put(f->s, "p", "a");
    put(f->s, "p", "b");
    flip(f, "p", "a", -1);
    flip(f, "p", "b", -1);
    assert_int_equal(apply_if(f->s, PS_OP_REPLACE, "p", "a", "x", 12345),
                     RT_ECORRUPT);
    assert_int_equal(apply_if(f->s, PS_OP_DELETE, "p", "a", "x", 12345),
                     RT_ECORRUPT);
    assert_int_equal(apply(f->s, PS_OP_INSERT, "p", "a", "x"), RT_EEXIST);
    assert_int_equal(apply(f->s, PS_OP_DELETE, "p", "a", "x"), 0);
    assert_int_equal(get(f->s, "p", "a"), RT_ENOTFOUND);
    assert_int_equal(apply(f->s, PS_OP_REPLACE, "p", "b", "y"), 0);
    assert_int_equal(get(f->s, "p", "b"), 0);
}

/* A move's snapshot stops at a bad value instead of copying it. */
static void test_snapshot_fails(void **state)
{
    struct fx *f = *state;
    struct ps_span sp = {T, "", NULL};
    struct ps_snap *sn;
    struct rt_buf out = RT_BUF_INIT;
    uint64_t txn, n = 0, bytes = 0;
    int rc;
    put(f->s, "p", "a");
    put(f->s, "p", "b");
    flip(f, "p", "b", -2);
    assert_int_equal(ps_store_snap_open(f->s, &sp, &sn, &txn), 0);
    while ((rc = ps_store_snap_next(sn, &out, 1, &n, &bytes)) == 1) {
    }
    assert_int_equal(rc, RT_ECORRUPT);
    assert_int_equal(n, 1); /* only "a" was copied */
    ps_store_snap_close(sn);
    rt_buf_free(&out);
}

/* The crc covers the key: a sealed value copied under another key is
 * corrupt there and still good under its own. */
static void test_crc_covers_key(void **state)
{
    struct fx *f = *state;
    struct rt_buf v = RT_BUF_INIT;
    put(f->s, "p", "a");
    ps_store_close(f->s);
    raw(f, "p", "a", &v, "p", "z", &v);
    store_open(f);
    assert_int_equal(get(f->s, "p", "a"), 0);
    assert_int_equal(get(f->s, "p", "z"), RT_ECORRUPT);
    rt_buf_free(&v);
}

/* Values written before checksums (flag clear, crc 0) read unchecked, by
 * get and scan, and a write over one seals it. */
static void test_unsealed_values_read(void **state)
{
    struct fx *f = *state;
    struct rt_buf props = RT_BUF_INIT, v = RT_BUF_INIT, got = RT_BUF_INIT;
    struct ps_scan sc = mkscan();
    th_props1(&props, "v", "old");
    rt_value_encode(&v, 12345, 0, props.data, props.len);
    ps_store_close(f->s);
    raw(f, NULL, NULL, NULL, "p", "old", &v);
    store_open(f);
    assert_int_equal(ps_store_get(f->s, T, "p", "old", &got), 0);
    assert_int_equal(got.len, v.len);
    assert_memory_equal(got.data, v.data, v.len);
    assert_int_equal(ps_store_scan(f->s, &sc), 0);
    assert_int_equal(sc.n, 1);
    ps_scan_free(&sc);
    assert_int_equal(apply(f->s, PS_OP_MERGE, "p", "old", "new"), 0);
    rt_buf_reset(&got);
    assert_int_equal(ps_store_get(f->s, T, "p", "old", &got), 0);
    assert_true(got.data[1] & RT_VALUE_F_CRC);
    rt_buf_free(&props);
    rt_buf_free(&v);
    rt_buf_free(&got);
}

/* A projection ($select) changes the blob, so it carries no crc. */
static void test_projection_unsealed(void **state)
{
    struct fx *f = *state;
    const char *sel[] = {"nope"};
    struct ps_scan sc = mkscan();
    put(f->s, "p", "a");
    sc.select = sel;
    sc.n_select = 1;
    assert_int_equal(ps_store_scan(f->s, &sc), 0);
    assert_int_equal(sc.n, 1);
    assert_int_equal(sc.recs[0].value[1] & RT_VALUE_F_CRC, 0);
    assert_int_equal(rt_get_u32le(sc.recs[0].value + 4), 0);
    ps_scan_free(&sc);
}

/* The start-up check reads what LMDB itself reports: page size, last
 * used page and last txn id of a real environment with a few hundred
 * pages. A layout mismatch with the installed LMDB fails here. */
static void test_file_meta_matches_lmdb(void **state)
{
    struct fx *f = *state;
    char errmsg[RT_ERRMSG_SIZE] = "";
    char rk[32], big[2000];
    struct ps_store_file info;
    MDB_envinfo ei;
    MDB_stat st;
    MDB_env *env;

    memset(big, 'x', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    for (int i = 0; i < 400; i++) {
        snprintf(rk, sizeof(rk), "r%05d", i);
        assert_int_equal(apply(f->s, PS_OP_UPSERT_REPLACE, "p", rk, big), 0);
    }
    ps_store_close(f->s);
    f->s = NULL;
    assert_int_equal(mdb_env_create(&env), 0);
    assert_int_equal(mdb_env_set_maxdbs(env, 4), 0);
    assert_int_equal(mdb_env_set_mapsize(env, MAP_SIZE), 0);
    assert_int_equal(mdb_env_open(env, f->dir, MDB_RDONLY, 0644), 0);
    assert_int_equal(mdb_env_info(env, &ei), 0);
    assert_int_equal(mdb_env_stat(env, &st), 0);
    mdb_env_close(env);
    assert_int_equal(ps_store_file_check(f->dir, &info, errmsg), 0);
    assert_int_equal(info.psize, st.ms_psize);
    assert_int_equal(info.last_pg, ei.me_last_pgno);
    assert_int_equal(info.txnid, ei.me_last_txnid);
    assert_true(info.last_pg > 100);
    assert_true(info.size >= (info.last_pg + 1) * info.psize);
    store_open(f);
}

/* Truncates DIR/data.mdb to @len bytes. */
static void cut(const struct fx *f, long long len)
{
    char path[128];
    snprintf(path, sizeof(path), "%s/data.mdb", f->dir);
    assert_int_equal(truncate(path, (off_t)len), 0);
}

/* A data.mdb shorter than its last used page, or without readable metas,
 * is refused with the message, by the check and by ps_store_open; no
 * data.mdb is a new environment. */
static void test_file_truncated(void **state)
{
    struct fx *f = *state;
    char errmsg[RT_ERRMSG_SIZE] = "";
    char rk[32];
    const long long lens[] = {-1, 1, 4095, 0};
    struct ps_store_file info;
    struct ps_store *s = NULL;

    for (int i = 0; i < 500; i++) {
        snprintf(rk, sizeof(rk), "r%05d", i);
        put(f->s, "p", rk);
    }
    ps_store_close(f->s);
    f->s = NULL;
    assert_int_equal(ps_store_file_check(f->dir, &info, errmsg), 0);
    for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
        long long len =
            lens[i] < 0 ? (long long)(info.last_pg * info.psize) : lens[i];
        cut(f, len);
        errmsg[0] = '\0';
        assert_int_equal(ps_store_file_check(f->dir, NULL, errmsg),
                         RT_ECORRUPT);
        assert_non_null(strstr(errmsg, "/data.mdb is truncated or corrupt: "));
        assert_non_null(strstr(errmsg, f->dir));
        assert_int_equal(ps_store_open(f->dir, MAP_SIZE, &s, errmsg),
                         RT_ECORRUPT);
        assert_non_null(strstr(errmsg, "is truncated or corrupt"));
    }
    /* Wiping the directory is how the operator recovers. */
    th_dir_remove(f->dir);
    assert_int_equal(ps_store_file_check(f->dir, NULL, errmsg), RT_ENOTFOUND);
    store_open(f);
}

/* Bad magic in either meta page is refused. */
static void test_file_bad_magic(void **state)
{
    struct fx *f = *state;
    char errmsg[RT_ERRMSG_SIZE] = "";
    char path[128];
    struct ps_store_file info;
    uint8_t junk[4] = {1, 2, 3, 4};
    FILE *fp;

    put(f->s, "p", "a");
    ps_store_close(f->s);
    f->s = NULL;
    assert_int_equal(ps_store_file_check(f->dir, &info, errmsg), 0);
    snprintf(path, sizeof(path), "%s/data.mdb", f->dir);
    for (int page = 1; page >= 0; page--) {
        fp = fopen(path, "r+b");
        assert_non_null(fp);
        /* mm_magic: the first word after the page header. */
        assert_int_equal(
            fseek(fp, (long)(page * info.psize + sizeof(size_t) + 8), SEEK_SET),
            0);
        assert_int_equal(fwrite(junk, 1, 4, fp), 4);
        fclose(fp);
        assert_int_equal(ps_store_file_check(f->dir, NULL, errmsg),
                         RT_ECORRUPT);
        assert_non_null(strstr(errmsg, "bad magic"));
    }
}

/* Repair (ps_store_repair.c): a peer's copy read by ps_store_fetch at LSN
 * f replaces a corrupt value only while this copy is at f or later and
 * the value still fails its checksum; a fetch never hands out a corrupt
 * value; the scrub finds the bad key and resumes where it stopped. */
#define RANGE 42

static void rs_at(struct fx *f, uint64_t lsn)
{
    struct ps_rstate rs;
    memset(&rs, 0, sizeof(rs));
    rs.applied_lsn = lsn;
    rs.state = PS_RS_OK;
    assert_int_equal(ps_store_repl_put(f->s, RANGE, &rs), 0);
}

static void test_repair_and_fetch(void **state)
{
    struct fx *f = *state;
    struct rt_buf good = RT_BUF_INIT, k = RT_BUF_INIT, v = RT_BUF_INIT;
    struct rt_buf vals[2] = {RT_BUF_INIT, RT_BUF_INIT};
    struct ps_fetch_key keys[2];
    int found[2];
    uint64_t lsn = 0;

    put(f->s, "p", "a");
    put(f->s, "p", "b");
    rs_at(f, 5);
    assert_int_equal(ps_store_get(f->s, T, "p", "b", &good), 0);
    skey(&k, "p", "b");

    /* A fetch answers values, absent keys and the applied LSN. */
    keys[0].key = k.data;
    keys[0].kn = k.len;
    skey(&v, "p", "zz");
    keys[1].key = v.data;
    keys[1].kn = v.len;
    assert_int_equal(ps_store_fetch(f->s, RANGE, keys, 2, vals, found, &lsn),
                     0);
    assert_int_equal(lsn, 5);
    assert_int_equal(found[0], 1);
    assert_int_equal(found[1], 0);
    assert_memory_equal(vals[0].data, good.data, good.len);
    rt_buf_free(&vals[0]);
    rt_buf_free(&vals[1]);
    /* No rs record: no complete copy to answer from. */
    assert_int_equal(
        ps_store_fetch(f->s, RANGE + 1, keys, 1, vals, found, &lsn),
        RT_ENOTFOUND);
    rt_buf_free(&vals[0]);

    flip(f, "p", "b", -1);
    assert_int_equal(get(f->s, "p", "b"), RT_ECORRUPT);
    /* The corrupt copy is never handed out. */
    assert_int_equal(ps_store_fetch(f->s, RANGE, keys, 1, vals, found, &lsn),
                     RT_ECORRUPT);
    rt_buf_free(&vals[0]);
    /* A copy read at an LSN this replica has not reached waits. */
    assert_int_equal(
        ps_store_repair(f->s, RANGE, k.data, k.len, good.data, good.len, 6),
        RT_EBUSY);
    /* Damage never replaces damage. */
    good.data[good.len - 1] ^= 0x10;
    assert_int_equal(
        ps_store_repair(f->s, RANGE, k.data, k.len, good.data, good.len, 5),
        RT_ECORRUPT);
    good.data[good.len - 1] ^= 0x10;
    assert_int_equal(
        ps_store_repair(f->s, RANGE, k.data, k.len, good.data, good.len, 5), 0);
    rt_buf_reset(&v);
    assert_int_equal(ps_store_get(f->s, T, "p", "b", &v), 0);
    assert_int_equal(v.len, good.len);
    assert_memory_equal(v.data, good.data, good.len);
    /* Whole again (or written since): nothing to repair. */
    assert_int_equal(
        ps_store_repair(f->s, RANGE, k.data, k.len, good.data, good.len, 5),
        RT_EEXIST);
    /* Absent at the peer: a corrupt entry is deleted, an absent one
     * left alone. */
    flip(f, "p", "a", -1);
    skey(&k, "p", "a");
    assert_int_equal(ps_store_repair(f->s, RANGE, k.data, k.len, NULL, 0, 5),
                     0);
    assert_int_equal(get(f->s, "p", "a"), RT_ENOTFOUND);
    assert_int_equal(ps_store_repair(f->s, RANGE, k.data, k.len, NULL, 0, 5),
                     RT_EEXIST);
    rt_buf_free(&good);
    rt_buf_free(&k);
    rt_buf_free(&v);
}

static void test_scrub_finds_and_resumes(void **state)
{
    struct fx *f = *state;
    struct rt_buf resume = RT_BUF_INIT, bad = RT_BUF_INIT, k = RT_BUF_INIT;
    const uint8_t *bk;
    size_t n_bad, bkn, off = 0;
    uint64_t bytes, total = 0;
    int wrapped, steps = 0;
    char rk[16];

    for (int i = 0; i < 50; i++) {
        snprintf(rk, sizeof(rk), "r%02d", i);
        put(f->s, "p", rk);
    }
    flip(f, "p", "r17", -1);
    /* The whole store in one step: one bad key, the end reached. */
    assert_int_equal(ps_store_scrub(f->s, &resume, 1u << 20, &bad, 16, &n_bad,
                                    &bytes, &wrapped),
                     0);
    assert_int_equal(n_bad, 1);
    assert_int_equal(wrapped, 1);
    assert_int_equal(resume.len, 0);
    assert_int_equal(ps_scrub_key_next(&bad, &off, &bk, &bkn), 1);
    skey(&k, "p", "r17");
    assert_int_equal(bkn, k.len);
    assert_memory_equal(bk, k.data, k.len);
    assert_int_equal(ps_scrub_key_next(&bad, &off, &bk, &bkn), 0);
    /* Small budgets: several steps, each resuming after the last, the
     * bad key found once per pass. */
    rt_buf_reset(&bad);
    do {
        assert_int_equal(ps_store_scrub(f->s, &resume, 200, &bad, 16, &n_bad,
                                        &bytes, &wrapped),
                         0);
        total += bytes;
        steps++;
    } while (!wrapped && steps < 1000);
    assert_true(wrapped);
    assert_true(steps > 5);
    off = 0;
    assert_int_equal(ps_scrub_key_next(&bad, &off, &bk, &bkn), 1);
    assert_int_equal(ps_scrub_key_next(&bad, &off, &bk, &bkn), 0);
    assert_true(total > 0);
    rt_buf_free(&resume);
    rt_buf_free(&bad);
    rt_buf_free(&k);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_written_values_sealed, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_flipped_byte, setup, teardown),
        cmocka_unit_test_setup_teardown(test_conditions_on_bad_value, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_snapshot_fails, setup, teardown),
        cmocka_unit_test_setup_teardown(test_crc_covers_key, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unsealed_values_read, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_projection_unsealed, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_file_meta_matches_lmdb, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_file_truncated, setup, teardown),
        cmocka_unit_test_setup_teardown(test_file_bad_magic, setup, teardown),
        cmocka_unit_test_setup_teardown(test_repair_and_fetch, setup, teardown),
        cmocka_unit_test_setup_teardown(test_scrub_finds_and_resumes, setup,
                                        teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
