/* Unit tests of the partition server's store layer (ps_store.h): entity
 * ops, group commit, scans, meta, table drops — on a real LMDB env in a
 * temporary directory, without RPC or threads. */
#include <ftw.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "ps_store.h"
#include "rt_entity.h"
#include "rt_err.h"

/* Fixture */

#define MAP_SIZE (64u * 1024u * 1024u)

struct fx {
    char dir[64];
    struct ps_store *s;
};

static int rm_cb(const char *path, const struct stat *sb, int flag,
                 struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(path);
}

static int setup(void **state)
{
    struct fx *f = calloc(1, sizeof(*f));
    char errmsg[RT_ERRMSG_SIZE] = "";
    snprintf(f->dir, sizeof(f->dir), "/tmp/test_ps_store.XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    assert_int_equal(ps_store_open(f->dir, MAP_SIZE, &f->s, errmsg), 0);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fx *f = *state;
    ps_store_close(f->s);
    nftw(f->dir, rm_cb, 8, FTW_DEPTH | FTW_PHYS);
    free(f);
    return 0;
}

/* Helpers */

/* A properties blob with one string property name=value. */
static void props1(struct rt_buf *out, const char *name, const char *value)
{
    struct rt_props_writer w;
    struct rt_prop p;
    memset(&p, 0, sizeof(p));
    p.name = name;
    p.name_len = strlen(name);
    p.type = RT_EDM_STRING;
    p.v.bytes.p = (const uint8_t *)value;
    p.v.bytes.n = strlen(value);
    rt_props_begin(&w, out);
    rt_props_add(&w, &p);
    rt_props_end(&w);
}

static struct ps_op mkop(enum ps_op_kind kind, const char *pk, const char *rk,
                         const struct rt_buf *props)
{
    struct ps_op op;
    memset(&op, 0, sizeof(op));
    op.kind = kind;
    op.pk = pk;
    op.rk = rk;
    op.props = props ? props->data : NULL;
    op.props_len = props ? props->len : 0;
    op.want_value = 1;
    return op;
}

static struct ps_write mkwrite(uint64_t table, struct ps_op *ops, size_t n,
                               int atomic)
{
    struct ps_write w;
    memset(&w, 0, sizeof(w));
    w.table_id = table;
    w.ops = ops;
    w.n_ops = n;
    w.atomic = atomic;
    w.failed_index = -1;
    return w;
}

/* Applies one single-op write in its own group; returns the op code. */
static int apply1(struct ps_store *s, uint64_t table, struct ps_op *op)
{
    struct ps_write w = mkwrite(table, op, 1, 0);
    struct ps_write *wp = &w;
    assert_int_equal(ps_store_write_group(s, &wp, 1), 0);
    assert_int_equal(w.status, 0);
    return op->code;
}

static void put(struct ps_store *s, uint64_t table, const char *pk,
                const char *rk)
{
    struct rt_buf props = RT_BUF_INIT;
    props1(&props, "v", rk);
    struct ps_op op = mkop(PS_OP_UPSERT_REPLACE, pk, rk, &props);
    assert_int_equal(apply1(s, table, &op), 0);
    rt_buf_free(&op.value);
    rt_buf_free(&props);
}

static int exists(struct ps_store *s, uint64_t table, const char *pk,
                  const char *rk)
{
    struct rt_buf v = RT_BUF_INIT;
    int rc = ps_store_get(s, table, pk, rk, &v);
    rt_buf_free(&v);
    assert_true(rc == 0 || rc == RT_ENOTFOUND);
    return rc == 0;
}

static uint64_t value_ticks(const struct rt_buf *v)
{
    uint64_t ticks;
    uint8_t flags;
    const uint8_t *blob;
    size_t n;
    assert_int_equal(rt_value_decode(v->data, v->len, &ticks, &flags, &blob,
                                     &n), 0);
    return ticks;
}

/* Returns the string property @name of stored value @v (static buffer). */
static const char *value_prop(const struct rt_buf *v, const char *name)
{
    static char out[256];
    uint64_t ticks;
    uint8_t flags;
    const uint8_t *blob;
    size_t n;
    struct rt_prop p;
    assert_int_equal(rt_value_decode(v->data, v->len, &ticks, &flags, &blob,
                                     &n), 0);
    if (rt_props_find(blob, n, name, strlen(name), &p) != 1) {
        return NULL;
    }
    snprintf(out, sizeof(out), "%.*s", (int)p.v.bytes.n,
             (const char *)p.v.bytes.p);
    return out;
}

/* Tests */

/* An inserted entity reads back with its properties and Timestamp. */
static void test_insert_then_get(void **state)
{
    struct fx *f = *state;
    struct rt_buf props = RT_BUF_INIT, v = RT_BUF_INIT;
    props1(&props, "name", "alice");
    struct ps_op op = mkop(PS_OP_INSERT, "p1", "r1", &props);

    assert_int_equal(apply1(f->s, 7, &op), 0);
    assert_true(op.ticks > 0);
    assert_int_equal(value_ticks(&op.value), op.ticks);

    assert_int_equal(ps_store_get(f->s, 7, "p1", "r1", &v), 0);
    assert_int_equal(v.len, op.value.len);
    assert_memory_equal(v.data, op.value.data, v.len);
    assert_string_equal(value_prop(&v, "name"), "alice");

    /* Same key in another table, or another row: not found. */
    assert_int_equal(exists(f->s, 8, "p1", "r1"), 0);
    assert_int_equal(exists(f->s, 7, "p1", "r2"), 0);
    rt_buf_free(&v);
    rt_buf_free(&op.value);
    rt_buf_free(&props);
}

/* In one group commit, a duplicate insert fails with EEXIST and its
 * neighbours (before and after it) still succeed. */
static void test_dup_insert_neighbours(void **state)
{
    struct fx *f = *state;
    struct rt_buf props = RT_BUF_INIT;
    props1(&props, "x", "1");
    put(f->s, 1, "old", "r");

    struct ps_op o1 = mkop(PS_OP_INSERT, "a", "r", &props);
    struct ps_op o2 = mkop(PS_OP_INSERT, "a", "r", &props);   /* dup in group */
    struct ps_op o3 = mkop(PS_OP_INSERT, "old", "r", &props); /* dup on disk */
    struct ps_op o4 = mkop(PS_OP_INSERT, "b", "r", &props);
    struct ps_write w1 = mkwrite(1, &o1, 1, 0), w2 = mkwrite(1, &o2, 1, 0);
    struct ps_write w3 = mkwrite(1, &o3, 1, 0), w4 = mkwrite(1, &o4, 1, 0);
    struct ps_write *ws[] = {&w1, &w2, &w3, &w4};

    assert_int_equal(ps_store_write_group(f->s, ws, 4), 0);
    assert_int_equal(o1.code, 0);
    assert_int_equal(o2.code, RT_EEXIST);
    assert_int_equal(o3.code, RT_EEXIST);
    assert_int_equal(o4.code, 0);
    assert_int_equal(o2.value.len, 0); /* no echo on failure */
    assert_true(exists(f->s, 1, "a", "r"));
    assert_true(exists(f->s, 1, "b", "r"));
    for (size_t i = 0; i < 4; i++) {
        ps_write_reset(ws[i]);
    }
    rt_buf_free(&props);
}

/* An atomic write is all-or-nothing; a non-atomic one is per op. */
static void test_atomic_all_or_nothing(void **state)
{
    struct fx *f = *state;
    struct rt_buf props = RT_BUF_INIT;
    props1(&props, "x", "1");
    put(f->s, 1, "p", "exists");

    struct ps_op ops[3] = {
        mkop(PS_OP_INSERT, "p", "new1", &props),
        mkop(PS_OP_UPSERT_MERGE, "p", "new2", &props),
        mkop(PS_OP_INSERT, "p", "exists", &props),
    };
    struct ps_write w = mkwrite(1, ops, 3, 1);
    struct ps_write *wp = &w;
    assert_int_equal(ps_store_write_group(f->s, &wp, 1), 0);
    assert_int_equal(w.status, RT_EEXIST);
    assert_int_equal(w.failed_index, 2);
    assert_false(exists(f->s, 1, "p", "new1"));
    assert_false(exists(f->s, 1, "p", "new2"));
    ps_write_reset(&w);

    /* The same ops, not atomic: the first two land. */
    w.atomic = 0;
    assert_int_equal(ps_store_write_group(f->s, &wp, 1), 0);
    assert_int_equal(w.status, 0);
    assert_int_equal(ops[0].code, 0);
    assert_int_equal(ops[1].code, 0);
    assert_int_equal(ops[2].code, RT_EEXIST);
    assert_true(exists(f->s, 1, "p", "new1"));
    ps_write_reset(&w);

    /* An atomic write naming one entity twice is refused whole. */
    struct ps_op dup[2] = {
        mkop(PS_OP_UPSERT_REPLACE, "p", "d", &props),
        mkop(PS_OP_DELETE, "p", "d", NULL),
    };
    struct ps_write wd = mkwrite(1, dup, 2, 1);
    wp = &wd;
    assert_int_equal(ps_store_write_group(f->s, &wp, 1), 0);
    assert_int_equal(wd.status, RT_EDUPROW);
    assert_int_equal(wd.failed_index, 1);
    assert_false(exists(f->s, 1, "p", "d"));
    ps_write_reset(&wd);

    /* A successful atomic write lands whole. */
    struct ps_op ok[2] = {
        mkop(PS_OP_INSERT, "p", "k1", &props),
        mkop(PS_OP_DELETE, "p", "exists", NULL),
    };
    ok[1].if_match_any = 1;
    struct ps_write wo = mkwrite(1, ok, 2, 1);
    wp = &wo;
    assert_int_equal(ps_store_write_group(f->s, &wp, 1), 0);
    assert_int_equal(wo.status, 0);
    assert_true(exists(f->s, 1, "p", "k1"));
    assert_false(exists(f->s, 1, "p", "exists"));
    ps_write_reset(&wo);
    rt_buf_free(&props);
}

/* Replace/merge/delete need the entity and a matching ETag; upserts do
 * not; merge keeps the properties the update does not name. */
static void test_conditional_ops(void **state)
{
    struct fx *f = *state;
    struct rt_buf a = RT_BUF_INIT, b = RT_BUF_INIT, v = RT_BUF_INIT;
    props1(&a, "a", "1");
    props1(&b, "b", "2");

    struct ps_op op = mkop(PS_OP_REPLACE, "p", "r", &a);
    assert_int_equal(apply1(f->s, 1, &op), RT_ENOTFOUND);
    op = mkop(PS_OP_MERGE, "p", "r", &a);
    assert_int_equal(apply1(f->s, 1, &op), RT_ENOTFOUND);
    op = mkop(PS_OP_DELETE, "p", "r", NULL);
    assert_int_equal(apply1(f->s, 1, &op), RT_ENOTFOUND);

    op = mkop(PS_OP_UPSERT_MERGE, "p", "r", &a);
    assert_int_equal(apply1(f->s, 1, &op), 0);
    uint64_t t1 = op.ticks;
    rt_buf_free(&op.value);

    op = mkop(PS_OP_MERGE, "p", "r", &b);
    op.if_match = t1 + 1; /* stale ETag */
    assert_int_equal(apply1(f->s, 1, &op), RT_EPRECOND);
    op = mkop(PS_OP_MERGE, "p", "r", &b);
    op.if_match = t1;
    assert_int_equal(apply1(f->s, 1, &op), 0);
    uint64_t t2 = op.ticks;
    rt_buf_free(&op.value);
    assert_int_equal(ps_store_get(f->s, 1, "p", "r", &v), 0);
    assert_string_equal(value_prop(&v, "a"), "1");
    assert_string_equal(value_prop(&v, "b"), "2");
    rt_buf_reset(&v);

    op = mkop(PS_OP_REPLACE, "p", "r", &b);
    op.if_match_any = 1;
    assert_int_equal(apply1(f->s, 1, &op), 0);
    rt_buf_free(&op.value);
    assert_int_equal(ps_store_get(f->s, 1, "p", "r", &v), 0);
    assert_null(value_prop(&v, "a"));
    assert_string_equal(value_prop(&v, "b"), "2");
    rt_buf_reset(&v);

    op = mkop(PS_OP_DELETE, "p", "r", NULL);
    op.if_match = t2; /* replaced since */
    assert_int_equal(apply1(f->s, 1, &op), RT_EPRECOND);
    op = mkop(PS_OP_DELETE, "p", "r", NULL);
    assert_int_equal(apply1(f->s, 1, &op), 0);
    assert_false(exists(f->s, 1, "p", "r"));

    rt_buf_free(&v);
    rt_buf_free(&a);
    rt_buf_free(&b);
}

/* Every write gets a fresh, strictly larger Timestamp, also within one
 * group and also for rewrites of the same entity. */
static void test_timestamps_increase(void **state)
{
    struct fx *f = *state;
    struct rt_buf props = RT_BUF_INIT;
    props1(&props, "x", "1");
    struct ps_op ops[6];
    struct ps_write ws[6];
    struct ps_write *wp[6];
    for (int i = 0; i < 6; i++) {
        /* Same key rewritten, and other keys in between. */
        ops[i] = mkop(PS_OP_UPSERT_REPLACE, "p", i % 2 ? "r" : "s", &props);
        ws[i] = mkwrite(1, &ops[i], 1, 0);
        wp[i] = &ws[i];
    }
    assert_int_equal(ps_store_write_group(f->s, wp, 6), 0);
    for (int i = 1; i < 6; i++) {
        assert_int_equal(ops[i].code, 0);
        assert_true(ops[i].ticks > ops[i - 1].ticks);
    }
    uint64_t last = ops[5].ticks;
    for (int i = 0; i < 6; i++) {
        ps_write_reset(&ws[i]);
    }
    /* Separate groups, back to back. */
    for (int i = 0; i < 20; i++) {
        struct ps_op op = mkop(PS_OP_UPSERT_MERGE, "p", "r", &props);
        assert_int_equal(apply1(f->s, 1, &op), 0);
        assert_true(op.ticks > last);
        last = op.ticks;
        rt_buf_free(&op.value);
    }
    rt_buf_free(&props);
}

/* Scans return keys in (PartitionKey, RowKey) order across partitions,
 * page by page, with the next key when the range has more. */
static void test_scan_order_and_pages(void **state)
{
    struct fx *f = *state;
    /* Inserted out of order; "a" < "a\x01"? no NULs: "a" < "ab" < "b". */
    const char *keys[][2] = {
        {"b", "1"}, {"a", "2"}, {"ab", "1"}, {"a", "1"}, {"b", "0"},
        {"a", "10"}, {"c", ""},
    };
    const char *want[][2] = {
        {"a", "1"}, {"a", "10"}, {"a", "2"}, {"ab", "1"}, {"b", "0"},
        {"b", "1"}, {"c", ""},
    };
    for (size_t i = 0; i < 7; i++) {
        put(f->s, 5, keys[i][0], keys[i][1]);
    }
    put(f->s, 4, "z", "z"); /* neighbouring tables stay out */
    put(f->s, 6, "a", "0");

    struct ps_scan sc;
    size_t got = 0;
    memset(&sc, 0, sizeof(sc));
    sc.table_id = 5;
    sc.low = "";
    sc.limit = 3;
    for (int page = 0; page < 3; page++) {
        assert_int_equal(ps_store_scan(f->s, &sc), 0);
        assert_true(sc.n <= 3);
        for (size_t i = 0; i < sc.n; i++, got++) {
            assert_string_equal(sc.recs[i].pk, want[got][0]);
            assert_string_equal(sc.recs[i].rk, want[got][1]);
        }
        if (page < 2) {
            assert_int_equal(sc.n, 3);
            assert_true(sc.more);
            assert_string_equal(sc.next_pk, want[got][0]);
            assert_string_equal(sc.next_rk, want[got][1]);
            static char npk[16], nrk[16];
            snprintf(npk, sizeof(npk), "%s", sc.next_pk);
            snprintf(nrk, sizeof(nrk), "%s", sc.next_rk);
            sc.has_start = 1;
            sc.start_pk = npk;
            sc.start_rk = nrk;
        } else {
            assert_int_equal(sc.n, 1);
            assert_false(sc.more);
            assert_null(sc.next_pk);
        }
        ps_scan_free(&sc);
    }
    assert_int_equal(got, 7);

    /* Exactly `limit` left: no "more". */
    memset(&sc, 0, sizeof(sc));
    sc.table_id = 5;
    sc.low = "";
    sc.limit = 7;
    assert_int_equal(ps_store_scan(f->s, &sc), 0);
    assert_int_equal(sc.n, 7);
    assert_false(sc.more);
    ps_scan_free(&sc);

    /* A byte budget ends the page early (at least one entity). */
    memset(&sc, 0, sizeof(sc));
    sc.table_id = 5;
    sc.low = "";
    sc.max_bytes = 1;
    assert_int_equal(ps_store_scan(f->s, &sc), 0);
    assert_int_equal(sc.n, 1);
    assert_true(sc.more);
    assert_string_equal(sc.next_pk, "a");
    assert_string_equal(sc.next_rk, "10");
    ps_scan_free(&sc);
}

/* A range scan starts at max(low, start) and stops before high: "more" is
 * about this range only, not the rest of the table. */
static void test_scan_range_bounds(void **state)
{
    struct fx *f = *state;
    const char *pks[] = {"a", "b", "bb", "c", "d", "e"};
    for (size_t i = 0; i < 6; i++) {
        put(f->s, 9, pks[i], "r1");
        put(f->s, 9, pks[i], "r2");
    }
    struct ps_scan sc;
    memset(&sc, 0, sizeof(sc));
    sc.table_id = 9;
    sc.low = "b";
    sc.high = "d";
    assert_int_equal(ps_store_scan(f->s, &sc), 0);
    assert_int_equal(sc.n, 6); /* b, bb, c x 2 rows */
    assert_string_equal(sc.recs[0].pk, "b");
    assert_string_equal(sc.recs[5].pk, "c");
    assert_string_equal(sc.recs[5].rk, "r2");
    assert_false(sc.more);
    ps_scan_free(&sc);

    /* Page ending exactly at the range end: no more. */
    sc.limit = 6;
    assert_int_equal(ps_store_scan(f->s, &sc), 0);
    assert_int_equal(sc.n, 6);
    assert_false(sc.more);
    ps_scan_free(&sc);

    /* Start key before low is clamped to low; inside it resumes there. */
    sc.limit = 0;
    sc.has_start = 1;
    sc.start_pk = "a";
    sc.start_rk = "r2";
    assert_int_equal(ps_store_scan(f->s, &sc), 0);
    assert_int_equal(sc.n, 6);
    ps_scan_free(&sc);
    sc.start_pk = "bb";
    sc.start_rk = "r2";
    assert_int_equal(ps_store_scan(f->s, &sc), 0);
    assert_int_equal(sc.n, 3);
    assert_string_equal(sc.recs[0].pk, "bb");
    assert_string_equal(sc.recs[0].rk, "r2");
    ps_scan_free(&sc);

    /* Unbounded high runs to the table's end. */
    memset(&sc, 0, sizeof(sc));
    sc.table_id = 9;
    sc.low = "d";
    assert_int_equal(ps_store_scan(f->s, &sc), 0);
    assert_int_equal(sc.n, 4);
    ps_scan_free(&sc);
}

/* Data and meta survive closing and reopening the environment. */
static void test_persist_reopen(void **state)
{
    struct fx *f = *state;
    char errmsg[RT_ERRMSG_SIZE] = "";
    struct rt_buf blob = RT_BUF_INIT;
    uint64_t sid;

    assert_int_equal(ps_store_meta_load(f->s, &sid, &blob), 0);
    assert_int_equal(sid, 0);
    assert_int_equal(blob.len, 0);

    put(f->s, 3, "k", "v");
    assert_int_equal(ps_store_meta_save(f->s, 42, "ranges!", 7), 0);
    ps_store_close(f->s);
    f->s = NULL;
    assert_int_equal(ps_store_open(f->dir, MAP_SIZE, &f->s, errmsg), 0);

    assert_true(exists(f->s, 3, "k", "v"));
    assert_int_equal(ps_store_meta_load(f->s, &sid, &blob), 0);
    assert_int_equal(sid, 42);
    assert_int_equal(blob.len, 7);
    assert_memory_equal(blob.data, "ranges!", 7);
    rt_buf_free(&blob);

    /* A rewrite after reopening still gets a later Timestamp. */
    struct rt_buf v = RT_BUF_INIT;
    assert_int_equal(ps_store_get(f->s, 3, "k", "v", &v), 0);
    uint64_t before = value_ticks(&v);
    rt_buf_free(&v);
    struct rt_buf props = RT_BUF_INIT;
    props1(&props, "x", "y");
    struct ps_op op = mkop(PS_OP_UPSERT_REPLACE, "k", "v", &props);
    assert_int_equal(apply1(f->s, 3, &op), 0);
    assert_true(op.ticks > before);
    rt_buf_free(&op.value);
    rt_buf_free(&props);
}

/* Dropping a table removes all its keys, chunk by chunk, and nothing of
 * its neighbours; an unfinished drop is remembered. */
static void test_drop_table(void **state)
{
    struct fx *f = *state;
    char rk[16];
    uint64_t deleted = 0, *ids;
    size_t n;
    int rc;

    for (int i = 0; i < 10; i++) {
        snprintf(rk, sizeof(rk), "%02d", i);
        put(f->s, 10, "p", rk);
        put(f->s, 11, "p", rk);
        put(f->s, 12, "p", rk);
    }
    rc = ps_store_drop_chunk(f->s, 11, 4, &deleted);
    assert_int_equal(rc, 1);
    assert_int_equal(deleted, 4);
    assert_int_equal(ps_store_pending_drops(f->s, &ids, &n), 0);
    assert_int_equal(n, 1);
    assert_int_equal(ids[0], 11);
    free(ids);
    while ((rc = ps_store_drop_chunk(f->s, 11, 4, &deleted)) == 1) {
    }
    assert_int_equal(rc, 0);
    assert_int_equal(deleted, 10);
    assert_int_equal(ps_store_pending_drops(f->s, &ids, &n), 0);
    assert_int_equal(n, 0);
    free(ids);

    struct ps_scan sc;
    memset(&sc, 0, sizeof(sc));
    sc.table_id = 11;
    sc.low = "";
    assert_int_equal(ps_store_scan(f->s, &sc), 0);
    assert_int_equal(sc.n, 0);
    ps_scan_free(&sc);
    sc.table_id = 10;
    assert_int_equal(ps_store_scan(f->s, &sc), 0);
    assert_int_equal(sc.n, 10);
    ps_scan_free(&sc);
    sc.table_id = 12;
    assert_int_equal(ps_store_scan(f->s, &sc), 0);
    assert_int_equal(sc.n, 10);
    ps_scan_free(&sc);

    /* Dropping an empty or unknown table is a no-op success. */
    deleted = 0;
    assert_int_equal(ps_store_drop_chunk(f->s, 99, 4, &deleted), 0);
    assert_int_equal(deleted, 0);
}

/* Keys beyond LMDB's key limit are refused, not truncated. */
static void test_key_too_long(void **state)
{
    struct fx *f = *state;
    size_t n = ps_store_max_key(f->s);
    char *pk = malloc(n + 1);
    struct rt_buf props = RT_BUF_INIT;
    memset(pk, 'k', n);
    pk[n] = '\0';
    props1(&props, "x", "1");
    struct ps_op op = mkop(PS_OP_INSERT, pk, "r", &props);
    assert_int_equal(apply1(f->s, 1, &op), RT_EOUTOFRANGE);
    assert_false(exists(f->s, 1, pk, "r"));

    /* A scan resuming at such a key still works. */
    put(f->s, 1, "zz", "r");
    struct ps_scan sc;
    memset(&sc, 0, sizeof(sc));
    sc.table_id = 1;
    sc.low = "";
    sc.has_start = 1;
    sc.start_pk = pk;
    sc.start_rk = "r";
    assert_int_equal(ps_store_scan(f->s, &sc), 0);
    assert_int_equal(sc.n, 1);
    assert_string_equal(sc.recs[0].pk, "zz");
    ps_scan_free(&sc);
    rt_buf_free(&props);
    free(pk);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_insert_then_get, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_dup_insert_neighbours, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_atomic_all_or_nothing, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_conditional_ops, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_timestamps_increase, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_scan_order_and_pages, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_scan_range_bounds, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_persist_reopen, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_drop_table, setup, teardown),
        cmocka_unit_test_setup_teardown(test_key_too_long, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
