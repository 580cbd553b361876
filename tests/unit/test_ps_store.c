/* Unit tests of the partition server's store layer (ps_store.h): entity
 * ops, group commit, validation, entity group transactions, long keys
 * (buckets), filtered and budgeted scans, meta, table drops, and the load
 * accounting pieces of ps_range.h — on a real LMDB env in a temporary
 * directory, without RPC or threads. */
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

#include "ps_range.h"
#include "ps_store.h"
#include "rt_entity.h"
#include "rt_err.h"
#include "rt_filter.h"
#include "rt_key.h"
#include "th_dir.h"
#include "th_lmdb.h"
#include "th_props.h"

/* Fixture */

#define MAP_SIZE (64u * 1024u * 1024u)

struct fx
{
    char dir[64];
    struct ps_store *s;
};

static int setup(void **state)
{
    struct fx *f = calloc(1, sizeof(*f));
    char errmsg[RT_ERRMSG_SIZE] = "";
    assert_int_equal(th_dir_create("test_ps_store", f->dir, sizeof(f->dir)), 0);
    assert_int_equal(ps_store_open(f->dir, MAP_SIZE, &f->s, errmsg), 0);
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

static struct ps_op mkop(enum ps_op_kind kind,
                         const char *pk,
                         const char *rk,
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

static struct ps_write mkwrite(uint64_t table,
                               struct ps_op *ops,
                               size_t n,
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

static void put(struct ps_store *s,
                uint64_t table,
                const char *pk,
                const char *rk)
{
    struct rt_buf props = RT_BUF_INIT;
    th_props1(&props, "v", rk);
    struct ps_op op = mkop(PS_OP_UPSERT_REPLACE, pk, rk, &props);
    assert_int_equal(apply1(s, table, &op), 0);
    rt_buf_free(&op.value);
    rt_buf_free(&props);
}

static int exists(struct ps_store *s,
                  uint64_t table,
                  const char *pk,
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
    assert_int_equal(
        rt_value_decode(v->data, v->len, &ticks, &flags, &blob, &n), 0);
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
    assert_int_equal(
        rt_value_decode(v->data, v->len, &ticks, &flags, &blob, &n), 0);
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
    th_props1(&props, "name", "alice");
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
    th_props1(&props, "x", "1");
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
    th_props1(&props, "x", "1");
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
    th_props1(&a, "a", "1");
    th_props1(&b, "b", "2");

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
    th_props1(&props, "x", "1");
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
        {"b", "1"}, {"a", "2"},  {"ab", "1"}, {"a", "1"},
        {"b", "0"}, {"a", "10"}, {"c", ""},
    };
    const char *want[][2] = {
        {"a", "1"}, {"a", "10"}, {"a", "2"}, {"ab", "1"},
        {"b", "0"}, {"b", "1"},  {"c", ""},
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

/* The incarnation is made once with the environment (random, not zero)
 * and stays the same across reopens. */
static void test_incarnation(void **state)
{
    struct fx *f = *state;
    char errmsg[RT_ERRMSG_SIZE] = "";
    uint8_t a[PS_INCARNATION_SIZE], b[PS_INCARNATION_SIZE];
    uint8_t zero[PS_INCARNATION_SIZE] = {0};

    assert_int_equal(ps_store_meta_incarnation(f->s, a), 0);
    assert_memory_not_equal(a, zero, sizeof(a));
    assert_int_equal(ps_store_meta_incarnation(f->s, b), 0);
    assert_memory_equal(a, b, sizeof(a));
    assert_int_equal(ps_store_meta_save(f->s, 42, "r", 1), 0);
    ps_store_close(f->s);
    f->s = NULL;
    assert_int_equal(ps_store_open(f->dir, MAP_SIZE, &f->s, errmsg), 0);
    assert_int_equal(ps_store_meta_incarnation(f->s, b), 0);
    assert_memory_equal(a, b, sizeof(a));
}

/* The stored master term only rises: a lower one or 0 leaves it, and it
 * survives reopening the environment. */
static void test_meta_master_term(void **state)
{
    struct fx *f = *state;
    char errmsg[RT_ERRMSG_SIZE] = "";
    uint64_t term = 1;

    assert_int_equal(ps_store_meta_term(f->s, &term), 0);
    assert_int_equal(term, 0);
    assert_int_equal(ps_store_meta_write(f->s, 1, "", 0, 5, NULL, 0), 0);
    assert_int_equal(ps_store_meta_term(f->s, &term), 0);
    assert_int_equal(term, 5);
    assert_int_equal(ps_store_meta_write(f->s, 1, "", 0, 3, NULL, 0), 0);
    assert_int_equal(ps_store_meta_save(f->s, 1, "", 0), 0);
    assert_int_equal(ps_store_meta_term(f->s, &term), 0);
    assert_int_equal(term, 5);
    assert_int_equal(ps_store_meta_write(f->s, 1, "", 0, 7, NULL, 0), 0);
    ps_store_close(f->s);
    f->s = NULL;
    assert_int_equal(ps_store_open(f->dir, MAP_SIZE, &f->s, errmsg), 0);
    assert_int_equal(ps_store_meta_term(f->s, &term), 0);
    assert_int_equal(term, 7);
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
    th_props1(&props, "x", "y");
    struct ps_op op = mkop(PS_OP_UPSERT_REPLACE, "k", "v", &props);
    assert_int_equal(apply1(f->s, 3, &op), 0);
    assert_true(op.ticks > before);
    rt_buf_free(&op.value);
    rt_buf_free(&props);
}

/* A read-only open (inspection tools) reads what a writer left and
 * changes nothing: no data.mdb is refused, not created. */
static void test_open_read_only(void **state)
{
    struct fx *f = *state;
    char errmsg[RT_ERRMSG_SIZE] = "";
    char empty[64];
    struct rt_buf blob = RT_BUF_INIT;
    struct ps_store *ro = NULL;
    struct ps_rstate rs;
    uint64_t sid;

    put(f->s, 3, "k", "v");
    assert_int_equal(ps_store_meta_save(f->s, 7, "r", 1), 0);
    ps_store_close(f->s);
    f->s = NULL;

    assert_int_equal(ps_store_open_ro(f->dir, &ro, errmsg), 0);
    assert_true(exists(ro, 3, "k", "v"));
    assert_int_equal(ps_store_meta_load(ro, &sid, &blob), 0);
    assert_int_equal(sid, 7);
    assert_int_equal(blob.len, 1);
    assert_int_equal(ps_store_repl_get(ro, 99, &rs), RT_ENOTFOUND);
    rt_buf_free(&blob);
    ps_store_close(ro);

    assert_int_equal(th_dir_create("test_ps_store_ro", empty, sizeof(empty)),
                     0);
    assert_int_equal(ps_store_open_ro(empty, &ro, errmsg), RT_ENOTFOUND);
    assert_non_null(strstr(errmsg, "no data.mdb"));
    th_dir_remove(empty);

    assert_int_equal(ps_store_open(f->dir, MAP_SIZE, &f->s, errmsg), 0);
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

/* Helpers: bulk data, filters, long keys */

/* Writes @n ops in one atomic-free write (one group). */
static void put_many(struct ps_store *s,
                     uint64_t table,
                     struct ps_op *ops,
                     size_t n)
{
    struct ps_write w = mkwrite(table, ops, n, 0);
    struct ps_write *wp = &w;
    assert_int_equal(ps_store_write_group(s, &wp, 1), 0);
    assert_int_equal(w.status, 0);
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(ops[i].code, 0);
    }
    ps_write_reset(&w);
}

static struct rt_filter *filter(const char *text)
{
    struct rt_filter *f = NULL;
    char errmsg[RT_ERRMSG_SIZE] = "";
    int rc = rt_filter_parse(text, strlen(text), &f, errmsg);
    if (rc != 0) {
        fprintf(stderr, "filter '%s': %s\n", text, errmsg);
    }
    assert_int_equal(rc, 0);
    assert_non_null(f);
    return f;
}

/* A fresh scan of table @t over [low, high). */
static struct ps_scan mkscan(uint64_t t, const char *low, const char *high)
{
    struct ps_scan sc;
    memset(&sc, 0, sizeof(sc));
    sc.table_id = t;
    sc.low = low;
    sc.high = high;
    return sc;
}

/* Runs @sc page by page (resuming at next_pk/next_rk) until !more; returns
 * the entities as "pk|rk" lines appended to @out and the page count. */
static int scan_all(struct ps_store *s,
                    struct ps_scan *sc,
                    struct rt_buf *out,
                    uint64_t *scanned,
                    int *done)
{
    char *npk = NULL, *nrk = NULL;
    int pages = 0;
    *scanned = 0;
    for (;;) {
        assert_int_equal(ps_store_scan(s, sc), 0);
        pages++;
        *scanned += sc->scanned;
        for (size_t i = 0; i < sc->n; i++) {
            rt_buf_append_str(out, sc->recs[i].pk);
            rt_buf_append_str(out, "|");
            rt_buf_append_str(out, sc->recs[i].rk);
            rt_buf_append_str(out, "\n");
        }
        *done = sc->done;
        if (!sc->more) {
            assert_false(sc->done && sc->more);
            ps_scan_free(sc);
            break;
        }
        free(npk);
        free(nrk);
        npk = strdup(sc->next_pk);
        nrk = strdup(sc->next_rk);
        sc->has_start = 1;
        sc->start_pk = npk;
        sc->start_rk = nrk;
        ps_scan_free(sc);
        assert_true(pages < 100000);
    }
    free(npk);
    free(nrk);
    return pages;
}

/* Lines "pk|rk" of the matching entities of table 20 built by load20(). */
static const char *scan_text(struct ps_store *s, struct ps_scan *sc, int *done)
{
    static struct rt_buf out;
    uint64_t scanned;
    rt_buf_reset(&out);
    scan_all(s, sc, &out, &scanned, done);
    return rt_buf_cstr(&out);
}

/* Table 20: PKs a..e, RKs 1..5, each with Int32 n = pk index * 10 + rk and
 * a string s = "pk-rk". */
static void load20(struct ps_store *s)
{
    struct rt_buf props[25];
    struct ps_op ops[25];
    char pks[25][4], rks[25][4];
    for (int i = 0; i < 25; i++) {
        struct rt_props_writer w;
        struct rt_prop p;
        char sv[64];
        snprintf(pks[i], sizeof(pks[i]), "%c", 'a' + i / 5);
        snprintf(rks[i], sizeof(rks[i]), "%d", 1 + i % 5);
        snprintf(sv, sizeof(sv), "%.3s-%.3s", pks[i], rks[i]);
        rt_buf_init(&props[i]);
        rt_props_begin(&w, &props[i]);
        memset(&p, 0, sizeof(p));
        p.name = "n";
        p.name_len = 1;
        p.type = RT_EDM_INT32;
        p.v.i32 = (i / 5) * 10 + 1 + i % 5;
        rt_props_add(&w, &p);
        p.name = "s";
        p.type = RT_EDM_STRING;
        p.v.bytes.p = (const uint8_t *)sv;
        p.v.bytes.n = strlen(sv);
        rt_props_add(&w, &p);
        rt_props_end(&w);
        ops[i] = mkop(PS_OP_INSERT, pks[i], rks[i], &props[i]);
        ops[i].want_value = 0;
    }
    put_many(s, 20, ops, 25);
    for (int i = 0; i < 25; i++) {
        rt_buf_free(&props[i]);
    }
}

/* A string of @n copies of UTF-8 character @ch. */
static char *rep(const char *ch, size_t n)
{
    size_t cl = strlen(ch);
    char *s = malloc(cl * n + 1);
    for (size_t i = 0; i < n; i++) {
        memcpy(s + i * cl, ch, cl);
    }
    s[cl * n] = '\0';
    return s;
}

struct kv
{
    char *pk;
    char *rk;
};

static int kv_cmp(const void *a, const void *b)
{
    const struct kv *x = a, *y = b;
    int c = strcmp(x->pk, y->pk);
    return c ? c : strcmp(x->rk, y->rk);
}

/* Tests: long keys */

/* Keys up to the Azure limit (1024 UTF-16 units each) are stored, read,
 * rewritten and deleted; one unit more is OutOfRangeInput. */
static void test_long_key_limits(void **state)
{
    struct fx *f = *state;
    struct rt_buf props = RT_BUF_INIT, v = RT_BUF_INIT;
    char *ascii = rep("k", 1024), *ascii1 = rep("k", 1025);
    char *euro = rep("\xe2\x82\xac", 1024);     /* 3 bytes, 1 unit */
    char *smile = rep("\xf0\x9f\x98\x80", 512); /* 4 bytes, 2 units */
    char *smile1 = rep("\xf0\x9f\x98\x80", 513);
    th_props1(&props, "x", "1");

    assert_true(ps_store_bucket_len(f->s) < ps_store_max_key(f->s));
    struct ps_op op = mkop(PS_OP_INSERT, euro, euro, &props);
    assert_int_equal(apply1(f->s, 1, &op), 0); /* a 6 KiB storage key */
    rt_buf_free(&op.value);
    op = mkop(PS_OP_INSERT, ascii, smile, &props);
    assert_int_equal(apply1(f->s, 1, &op), 0);
    rt_buf_free(&op.value);
    op = mkop(PS_OP_INSERT, ascii1, "r", &props);
    assert_int_equal(apply1(f->s, 1, &op), RT_EOUTOFRANGE);
    op = mkop(PS_OP_INSERT, "p", smile1, &props);
    assert_int_equal(apply1(f->s, 1, &op), RT_EOUTOFRANGE);

    assert_int_equal(ps_store_get(f->s, 1, euro, euro, &v), 0);
    assert_string_equal(value_prop(&v, "x"), "1");
    rt_buf_reset(&v);
    assert_false(exists(f->s, 1, euro, ascii));

    /* Merge and delete through the bucket. */
    struct rt_buf b2 = RT_BUF_INIT;
    th_props1(&b2, "y", "2");
    op = mkop(PS_OP_MERGE, euro, euro, &b2);
    assert_int_equal(apply1(f->s, 1, &op), 0);
    rt_buf_free(&op.value);
    assert_int_equal(ps_store_get(f->s, 1, euro, euro, &v), 0);
    assert_string_equal(value_prop(&v, "x"), "1");
    assert_string_equal(value_prop(&v, "y"), "2");
    op = mkop(PS_OP_DELETE, euro, euro, NULL);
    assert_int_equal(apply1(f->s, 1, &op), 0);
    assert_false(exists(f->s, 1, euro, euro));
    assert_true(exists(f->s, 1, ascii, smile));

    rt_buf_free(&v);
    rt_buf_free(&b2);
    rt_buf_free(&props);
    free(ascii);
    free(ascii1);
    free(euro);
    free(smile);
    free(smile1);
}

/* Scans see exactly memcmp order of full keys over a mix of short keys,
 * long keys sharing prefixes (many per bucket) and keys around the bucket
 * length T, in one page or many (resuming inside buckets); gets, deletes
 * and table drops see every key. */
static void test_long_key_order(void **state)
{
    struct fx *f = *state;
    const size_t T = ps_store_bucket_len(f->s);
    /* Storage key length = 8 + (|pk| + 2) + (|rk| + 2). */
    const size_t pk_lens[] = {1,      2,      100,    T - 20, T - 14, T - 13,
                              T - 12, T - 11, T - 10, T - 3,  T + 5,  1000};
    struct kv keys[600];
    size_t n = 0;
    struct rt_buf props = RT_BUF_INIT;

    th_props1(&props, "x", "v");
    for (size_t i = 0; i < sizeof(pk_lens) / sizeof(pk_lens[0]); i++) {
        size_t pl = pk_lens[i];
        for (int c = 0; c < 2; c++) {
            char *pk = rep(c ? "b" : "a", pl);
            if (pl > 3) {
                pk[pl - 2] = 'm'; /* differs just before its end */
            }
            /* RowKeys: tiny ones, and ones that put the key at T-2..T+2
             * bytes, each with a variant that differs after byte T. */
            size_t need = T > pl + 12 ? T - pl - 12 : 0;
            const char *tiny[] = {"", "a", "ab", "b"};
            for (int t = 0; t < 4; t++) {
                keys[n].pk = strdup(pk);
                keys[n].rk = strdup(tiny[t]);
                n++;
            }
            for (int d = -2; d <= 2; d++) {
                if ((long)need + d < 0) {
                    continue;
                }
                size_t rl = (size_t)((long)need + d);
                for (int tail = 0; tail < 3; tail++) {
                    char *rk = malloc(rl + 3);
                    memset(rk, 'r', rl);
                    rk[rl] = '\0';
                    if (tail == 1) {
                        strcat(rk, "a");
                    } else if (tail == 2) {
                        strcat(rk, "za");
                    }
                    keys[n].pk = strdup(pk);
                    keys[n].rk = rk;
                    n++;
                }
            }
            free(pk);
        }
    }
    assert_true(n <= 600);
    qsort(keys, n, sizeof(keys[0]), kv_cmp);
    /* Drop exact duplicates (tiny RKs may repeat built ones). */
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        if (m > 0 && kv_cmp(&keys[m - 1], &keys[i]) == 0) {
            free(keys[i].pk);
            free(keys[i].rk);
            continue;
        }
        keys[m++] = keys[i];
    }
    n = m;

    /* Insert in a scrambled order, several groups. */
    for (size_t step = 0; step < 7; step++) {
        for (size_t i = step; i < n; i += 7) {
            struct ps_op op =
                mkop(PS_OP_INSERT, keys[i].pk, keys[i].rk, &props);
            op.want_value = 0;
            assert_int_equal(apply1(f->s, 3, &op), 0);
        }
    }
    put(f->s, 2, "zz", "zz"); /* neighbours stay out */
    put(f->s, 4, "", "");

    /* Full scan in one page, then in pages of 7 (resumes inside buckets). */
    unsigned limits[] = {1000, 7, 1};
    for (size_t li = 0; li < 3; li++) {
        struct ps_scan sc = mkscan(3, "", NULL);
        struct rt_buf out = RT_BUF_INIT, want = RT_BUF_INIT;
        uint64_t scanned;
        int done;
        sc.limit = limits[li];
        scan_all(f->s, &sc, &out, &scanned, &done);
        for (size_t i = 0; i < n; i++) {
            rt_buf_printf(&want, "%s|%s\n", keys[i].pk, keys[i].rk);
        }
        assert_int_equal(out.len, want.len);
        assert_memory_equal(out.data, want.data, want.len);
        assert_int_equal(scanned, n);
        rt_buf_free(&out);
        rt_buf_free(&want);
    }

    /* A range whose bounds are long PKs. */
    {
        struct ps_scan sc = mkscan(3, keys[n / 3].pk, keys[2 * n / 3].pk);
        struct rt_buf out = RT_BUF_INIT;
        uint64_t scanned;
        int done;
        size_t want = 0;
        for (size_t i = 0; i < n; i++) {
            want += strcmp(keys[i].pk, keys[n / 3].pk) >= 0 &&
                    strcmp(keys[i].pk, keys[2 * n / 3].pk) < 0;
        }
        sc.limit = 5;
        scan_all(f->s, &sc, &out, &scanned, &done);
        assert_int_equal(scanned, want);
        rt_buf_free(&out);
    }

    /* Range totals count bucket entries one by one. */
    uint64_t cnt, bytes, txn;
    assert_int_equal(
        ps_store_range_stats(f->s, 3, "", NULL, &cnt, &bytes, &txn), 0);
    assert_int_equal(cnt, n);

    /* Every other key deleted: gets and scans agree. */
    for (size_t i = 0; i < n; i += 2) {
        struct ps_op op = mkop(PS_OP_DELETE, keys[i].pk, keys[i].rk, NULL);
        assert_int_equal(apply1(f->s, 3, &op), 0);
    }
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(exists(f->s, 3, keys[i].pk, keys[i].rk), i % 2);
    }
    {
        struct ps_scan sc = mkscan(3, "", NULL);
        struct rt_buf out = RT_BUF_INIT, want = RT_BUF_INIT;
        uint64_t scanned;
        int done;
        sc.limit = 3;
        scan_all(f->s, &sc, &out, &scanned, &done);
        for (size_t i = 1; i < n; i += 2) {
            rt_buf_printf(&want, "%s|%s\n", keys[i].pk, keys[i].rk);
        }
        assert_int_equal(out.len, want.len);
        assert_memory_equal(out.data, want.data, want.len);
        rt_buf_free(&out);
        rt_buf_free(&want);
    }

    /* Dropping the table counts entities, not bucket records. */
    uint64_t deleted = 0;
    int rc;
    while ((rc = ps_store_drop_chunk(f->s, 3, 10, &deleted)) == 1) {
    }
    assert_int_equal(rc, 0);
    assert_int_equal(deleted, n / 2);
    assert_true(exists(f->s, 2, "zz", "zz"));
    assert_true(exists(f->s, 4, "", ""));
    for (size_t i = 0; i < n; i++) {
        free(keys[i].pk);
        free(keys[i].rk);
    }
    rt_buf_free(&props);
}

/* A store written before buckets existed (plain records of T and T+1
 * bytes, no bucket_len in meta) is converted on open: the keys read back
 * and scan in order. */
static void test_long_key_migration(void **state)
{
    struct fx *f = *state;
    const size_t T = ps_store_bucket_len(f->s);
    char errmsg[RT_ERRMSG_SIZE] = "";
    struct rt_buf props = RT_BUF_INIT, val = RT_BUF_INIT;
    MDB_env *env;
    MDB_txn *txn;
    MDB_dbi data, meta;
    MDB_val k, v;
    /* 8 + (|pk| + 2) + (|rk| + 2) = T, T + 1. */
    char *pk = rep("p", T - 13);
    const char *rks[] = {"a", "ab", "b"}; /* T, T + 1, T bytes */

    put(f->s, 1, "zz", "1");
    ps_store_close(f->s);
    f->s = NULL;
    th_props1(&props, "x", "old");
    rt_value_encode(&val, 42, 0, props.data, props.len);
    assert_int_equal(mdb_env_create(&env), 0);
    assert_int_equal(mdb_env_set_maxdbs(env, 4), 0);
    assert_int_equal(mdb_env_open(env, f->dir, 0, 0644), 0);
    assert_int_equal(mdb_txn_begin(env, NULL, 0, &txn), 0);
    assert_int_equal(mdb_dbi_open(txn, "data", 0, &data), 0);
    assert_int_equal(mdb_dbi_open(txn, "meta", 0, &meta), 0);
    k.mv_data = "bucket_len";
    k.mv_size = 10;
    assert_int_equal(mdb_del(txn, meta, &k, NULL), 0);
    for (int i = 0; i < 3; i++) {
        struct rt_buf key = RT_BUF_INIT;
        rt_key_entity(&key, 1, pk, strlen(pk), rks[i], strlen(rks[i]));
        assert_true(key.len <= T + 1);
        k.mv_data = key.data;
        k.mv_size = key.len;
        v.mv_data = val.data;
        v.mv_size = val.len;
        assert_int_equal(mdb_put(txn, data, &k, &v, 0), 0);
        rt_buf_free(&key);
    }
    assert_int_equal(mdb_txn_commit(txn), 0);
    mdb_env_close(env);

    assert_int_equal(ps_store_open(f->dir, MAP_SIZE, &f->s, errmsg), 0);
    assert_int_equal(ps_store_bucket_len(f->s), T);
    for (int i = 0; i < 3; i++) {
        assert_true(exists(f->s, 1, pk, rks[i]));
    }
    struct ps_scan sc = mkscan(1, "", NULL);
    assert_int_equal(ps_store_scan(f->s, &sc), 0);
    assert_int_equal(sc.n, 4);
    assert_string_equal(sc.recs[0].rk, "a");
    assert_string_equal(sc.recs[1].rk, "ab");
    assert_string_equal(sc.recs[2].rk, "b");
    assert_string_equal(sc.recs[3].pk, "zz");
    ps_scan_free(&sc);
    free(pk);
    rt_buf_free(&props);
    rt_buf_free(&val);
}

/* Tests: key format migration */

/* Storage key of format 1 (before UTF-16 order): the raw bytes of PK and
 * RK (no NUL in them), each ended by 00 01. */
static void old_key(struct rt_buf *out,
                    uint64_t table,
                    const char *pk,
                    const char *rk)
{
    uint8_t id[8];
    for (int i = 0; i < 8; i++) {
        id[i] = (uint8_t)(table >> (56 - 8 * i));
    }
    rt_buf_reset(out);
    rt_buf_append(out, id, 8);
    rt_buf_append(out, pk, strlen(pk));
    rt_buf_append(out, "\0\x01", 2);
    rt_buf_append(out, rk, strlen(rk));
    rt_buf_append(out, "\0\x01", 2);
}

/* Puts the format 1 key of (@pk, @rk) with a value sealed under it,
 * through a raw write (stored as given; long keys into buckets). */
static void put_old(struct ps_store *s,
                    uint64_t table,
                    const char *pk,
                    const char *rk)
{
    struct rt_buf props = RT_BUF_INIT, val = RT_BUF_INIT, key = RT_BUF_INIT;
    struct ps_kv kv;
    struct ps_write w = mkwrite(table, NULL, 0, 0);
    struct ps_write *wp = &w;

    th_props1(&props, "x", "old");
    old_key(&key, table, pk, rk);
    rt_value_encode(&val, 42, 0, props.data, props.len);
    rt_value_seal(val.data, val.len, key.data, key.len);
    memset(&kv, 0, sizeof(kv));
    kv.key = key.data;
    kv.kn = key.len;
    kv.val = val.data;
    kv.vn = val.len;
    w.kvs = &kv;
    w.n_kvs = 1;
    assert_int_equal(ps_store_write_group(s, &wp, 1), 0);
    assert_int_equal(w.status, 0);
    ps_write_reset(&w);
    rt_buf_free(&props);
    rt_buf_free(&val);
    rt_buf_free(&key);
}

#define MIG_ROWS 1100 /* more than one migration transaction */

/* A store written with key format 1 (keys with U+E000..U+FFFF kept their
 * 0xEE/0xEF lead bytes, values sealed under those keys, a long key in a
 * bucket, no key_format record) is refused read-only, migrated on open,
 * and then reads every entity back (CRCs valid under the new keys) in
 * UTF-16 order: the emoji partition before U+E000 and U+FF01. Reopening
 * changes nothing more. */
static void test_key_format_migration(void **state)
{
    struct fx *f = *state;
    const size_t T = ps_store_bucket_len(f->s);
    char errmsg[RT_ERRMSG_SIZE] = "";
    struct rt_buf out = RT_BUF_INIT;
    struct ps_store *ro = NULL;
    static const char *const pks[] = {"a", "z", "\xf0\x9f\x98\x80",
                                      "\xee\x80\x80",
                                      "\xef\xbc\x81"}; /* UTF-16 order */
    const size_t npks = sizeof(pks) / sizeof(pks[0]);
    char *longrk = rep("r", T); /* with its prefix: a key past T bytes */
    char rk[32];

    memcpy(longrk + T - 8, "\xef\xbc\x81", 3);
    put(f->s, 1, "zz", "ascii"); /* the same in both formats */
    for (size_t i = 0; i < npks; i++) {
        put_old(f->s, 1, pks[i], "\xee\x80\x80rk");
    }
    put_old(f->s, 1, "\xef\xbc\x81", longrk);
    for (int i = 0; i < MIG_ROWS; i++) {
        snprintf(rk, sizeof(rk), "%04d\xef\xbc\x81", i);
        put_old(f->s, 2, "\xee\x80\x80", rk);
    }
    ps_store_close(f->s);
    f->s = NULL;
    assert_int_equal(th_lmdb_get(f->dir, "meta", "key_format", 10, &out), 0);
    assert_int_equal(out.len, 4);
    assert_int_equal(out.data[0], RT_KEY_FORMAT);
    /* No record: what an older build left. */
    {
        MDB_env *env;
        MDB_txn *txn;
        MDB_dbi meta;
        MDB_val k = {10, "key_format"};
        assert_int_equal(mdb_env_create(&env), 0);
        assert_int_equal(mdb_env_set_maxdbs(env, 4), 0);
        assert_int_equal(mdb_env_open(env, f->dir, 0, 0644), 0);
        assert_int_equal(mdb_txn_begin(env, NULL, 0, &txn), 0);
        assert_int_equal(mdb_dbi_open(txn, "meta", 0, &meta), 0);
        assert_int_equal(mdb_del(txn, meta, &k, NULL), 0);
        assert_int_equal(mdb_txn_commit(txn), 0);
        mdb_env_close(env);
    }

    assert_int_equal(ps_store_open_ro(f->dir, &ro, errmsg), RT_ECORRUPT);
    assert_non_null(strstr(errmsg, "key format 1"));
    assert_non_null(strstr(errmsg, "rt-partition-server"));

    for (int pass = 0; pass < 2; pass++) {
        assert_int_equal(ps_store_open(f->dir, MAP_SIZE, &f->s, errmsg), 0);
        for (size_t i = 0; i < npks; i++) {
            struct rt_buf v = RT_BUF_INIT;
            assert_int_equal(
                ps_store_get(f->s, 1, pks[i], "\xee\x80\x80rk", &v), 0);
            assert_int_equal(value_ticks(&v), 42);
            rt_buf_free(&v);
        }
        assert_true(exists(f->s, 1, "\xef\xbc\x81", longrk));
        assert_true(exists(f->s, 1, "zz", "ascii"));
        snprintf(rk, sizeof(rk), "%04d\xef\xbc\x81", MIG_ROWS - 1);
        assert_true(exists(f->s, 2, "\xee\x80\x80", rk));

        struct ps_scan sc = mkscan(1, "", NULL);
        assert_int_equal(ps_store_scan(f->s, &sc), 0);
        assert_int_equal(sc.n, npks + 2);
        assert_string_equal(sc.recs[0].pk, "a");
        assert_string_equal(sc.recs[1].pk, "z");
        assert_string_equal(sc.recs[2].pk, "zz");
        assert_string_equal(sc.recs[3].pk, pks[2]); /* U+1F600 */
        assert_string_equal(sc.recs[4].pk, pks[3]); /* U+E000 */
        assert_string_equal(sc.recs[5].pk, pks[4]); /* U+FF01, long RK r... */
        assert_string_equal(sc.recs[5].rk, longrk);
        assert_string_equal(sc.recs[6].pk, pks[4]);
        assert_string_equal(sc.recs[6].rk, "\xee\x80\x80rk");
        ps_scan_free(&sc);

        /* A range bound between the groups cuts where UTF-16 order says:
         * [U+10000, U+E000) holds the emoji partition only. */
        sc = mkscan(1, "\xf0\x90\x80\x80", "\xee\x80\x80");
        assert_int_equal(ps_store_scan(f->s, &sc), 0);
        assert_int_equal(sc.n, 1);
        assert_string_equal(sc.recs[0].pk, pks[2]);
        ps_scan_free(&sc);

        uint64_t scanned = 0;
        int done = 0;
        rt_buf_reset(&out);
        sc = mkscan(2, "", NULL);
        scan_all(f->s, &sc, &out, &scanned, &done);
        assert_int_equal(scanned, MIG_ROWS);
        ps_store_close(f->s);
        f->s = NULL;
    }
    assert_int_equal(th_lmdb_get(f->dir, "meta", "key_format", 10, &out), 0);
    assert_int_equal(out.len, 4);
    assert_int_equal(out.data[0], RT_KEY_FORMAT);
    assert_int_equal(ps_store_open_ro(f->dir, &ro, errmsg), 0);
    ps_store_close(ro);
    free(longrk);
    rt_buf_free(&out);
    assert_int_equal(ps_store_open(f->dir, MAP_SIZE, &f->s, errmsg), 0);
}

/* Tests: validation */

/* Forbidden key characters and bad UTF-8 are InvalidInput, in PK and RK;
 * the rest of the group still succeeds. */
static void test_key_characters(void **state)
{
    struct fx *f = *state;
    const char *bad[] = {"a/b",
                         "a\\b",
                         "#",
                         "x?",
                         "\x01",
                         "\x1f",
                         "\x7f",
                         "\xc2\x80",
                         "\xc2\x9f",
                         "\xff",
                         "\xc3",
                         "\xc0\x80",
                         "\xed\xa0\x80",
                         "\xf4\x90\x80\x80"};
    const char *good[] = {"",
                          " ",
                          "a b",
                          "\xc2\xa0",
                          "~!@$%^&*()",
                          "\xe2\x82\xac",
                          "\xf0\x9f\x98\x80"};
    struct rt_buf props = RT_BUF_INIT;
    th_props1(&props, "x", "1");
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct ps_op op = mkop(PS_OP_UPSERT_REPLACE, bad[i], "r", &props);
        assert_int_equal(apply1(f->s, 1, &op), RT_EINVAL);
        op = mkop(PS_OP_UPSERT_MERGE, "p", bad[i], &props);
        assert_int_equal(apply1(f->s, 1, &op), RT_EINVAL);
        op = mkop(PS_OP_DELETE, "p", bad[i], NULL);
        assert_int_equal(apply1(f->s, 1, &op), RT_EINVAL);
        assert_int_equal(ps_key_check(bad[i]), RT_EINVAL);
    }
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        struct ps_op op = mkop(PS_OP_INSERT, good[i], good[i], &props);
        assert_int_equal(apply1(f->s, 1, &op), 0);
        rt_buf_free(&op.value);
        assert_true(exists(f->s, 1, good[i], good[i]));
    }
    rt_buf_free(&props);
}

/* A blob of @n string properties p0..p(n-1), each @len chars long. */
static void props_n(struct rt_buf *out, const char *prefix, int n, size_t len)
{
    struct rt_props_writer w;
    char *val = rep("v", len);
    rt_props_begin(&w, out);
    for (int i = 0; i < n; i++) {
        struct rt_prop p;
        char name[32];
        snprintf(name, sizeof(name), "%s%d", prefix, i);
        memset(&p, 0, sizeof(p));
        p.name = name;
        p.name_len = strlen(name);
        p.type = RT_EDM_STRING;
        p.v.bytes.p = (const uint8_t *)val;
        p.v.bytes.n = len;
        rt_props_add(&w, &p);
    }
    rt_props_end(&w);
    free(val);
}

/* A malformed blob is InvalidInput; an entity over the limits (also only
 * after a merge) is refused with the documented code and left unchanged. */
static void test_entity_limits(void **state)
{
    struct fx *f = *state;
    struct rt_buf a = RT_BUF_INIT, b = RT_BUF_INIT, v = RT_BUF_INIT;
    const uint8_t junk[] = {1, 0, 99, 1, 'x'};
    struct ps_op op;

    op = mkop(PS_OP_INSERT, "p", "junk", NULL);
    op.props = junk;
    op.props_len = sizeof(junk);
    assert_int_equal(apply1(f->s, 1, &op), RT_EINVAL);

    props_n(&a, "a", 253, 1);
    op = mkop(PS_OP_INSERT, "p", "r", &a);
    assert_int_equal(apply1(f->s, 1, &op), RT_ETOOMANYPROPS);
    rt_buf_reset(&a);
    props_n(&a, "s", 1, RT_MAX_STRING_UTF16 + 1);
    op = mkop(PS_OP_INSERT, "p", "r", &a);
    assert_int_equal(apply1(f->s, 1, &op), RT_EPROPTOOLARGE);

    /* 200 + 60 distinct properties: only the merge is too many. */
    rt_buf_reset(&a);
    props_n(&a, "a", 200, 1);
    op = mkop(PS_OP_INSERT, "p", "r", &a);
    assert_int_equal(apply1(f->s, 1, &op), 0);
    rt_buf_free(&op.value);
    props_n(&b, "b", 60, 1);
    op = mkop(PS_OP_MERGE, "p", "r", &b);
    assert_int_equal(apply1(f->s, 1, &op), RT_ETOOMANYPROPS);
    op = mkop(PS_OP_UPSERT_MERGE, "p", "r", &b);
    assert_int_equal(apply1(f->s, 1, &op), RT_ETOOMANYPROPS);
    /* Replacing is fine: only the new properties count. */
    op = mkop(PS_OP_REPLACE, "p", "r", &b);
    assert_int_equal(apply1(f->s, 1, &op), 0);
    rt_buf_free(&op.value);

    /* 10 x 32000 chars (~640 KB by Azure's formula), then 8 more: the
     * merged entity passes 1 MiB. */
    rt_buf_reset(&a);
    rt_buf_reset(&b);
    props_n(&a, "a", 10, 32000);
    props_n(&b, "b", 8, 32000);
    op = mkop(PS_OP_INSERT, "p", "big", &a);
    assert_int_equal(apply1(f->s, 1, &op), 0);
    rt_buf_free(&op.value);
    op = mkop(PS_OP_MERGE, "p", "big", &b);
    assert_int_equal(apply1(f->s, 1, &op), RT_EENTITYTOOLARGE);
    assert_int_equal(ps_store_get(f->s, 1, "p", "big", &v), 0);
    assert_null(value_prop(&v, "b0"));
    /* All 18 at once in a new entity: too large as well. */
    rt_buf_reset(&a);
    props_n(&a, "a", 18, 32000);
    op = mkop(PS_OP_INSERT, "p", "big2", &a);
    assert_int_equal(apply1(f->s, 1, &op), RT_EENTITYTOOLARGE);
    rt_buf_free(&a);
    rt_buf_free(&b);
    rt_buf_free(&v);
}

/* Tests: entity group transactions (spec §5.2) */

/* More than 100 ops: InvalidInput at index 100 with Azure's message;
 * nothing is written. */
static void test_batch_too_many_ops(void **state)
{
    struct fx *f = *state;
    struct rt_buf props = RT_BUF_INIT;
    struct ps_op ops[101];
    char rks[101][8];
    th_props1(&props, "x", "1");
    for (int i = 0; i < 101; i++) {
        snprintf(rks[i], sizeof(rks[i]), "%03d", i);
        ops[i] = mkop(PS_OP_INSERT, "p", rks[i], &props);
    }
    struct ps_write w = mkwrite(1, ops, 101, 1);
    struct ps_write *wp = &w;
    assert_int_equal(ps_store_write_group(f->s, &wp, 1), 0);
    assert_int_equal(w.status, RT_EINVAL);
    assert_int_equal(w.failed_index, 100);
    assert_non_null(w.errmsg);
    assert_non_null(strstr(w.errmsg, "100 changes"));
    assert_false(exists(f->s, 1, "p", "000"));
    ps_write_reset(&w);

    /* Exactly 100 is fine, applied in order (Timestamps increase). */
    w = mkwrite(1, ops, 100, 1);
    assert_int_equal(ps_store_write_group(f->s, &wp, 1), 0);
    assert_int_equal(w.status, 0);
    for (int i = 1; i < 100; i++) {
        assert_true(ops[i].ticks > ops[i - 1].ticks);
    }
    assert_true(exists(f->s, 1, "p", "099"));
    ps_write_reset(&w);
    rt_buf_free(&props);
}

/* Another PartitionKey: CommandsInBatchActOnDifferentPartitions at the
 * first op naming it; a row twice: InvalidDuplicateRow at the second one;
 * whichever comes first in op order wins. */
static void test_batch_partition_and_dup(void **state)
{
    struct fx *f = *state;
    struct rt_buf props = RT_BUF_INIT;
    th_props1(&props, "x", "1");
    struct ps_op ops[5] = {
        mkop(PS_OP_INSERT, "p", "1", &props),
        mkop(PS_OP_INSERT, "p", "2", &props),
        mkop(PS_OP_INSERT, "q", "3", &props),
        mkop(PS_OP_INSERT, "p", "1", &props),
        mkop(PS_OP_INSERT, "r", "5", &props),
    };
    struct ps_write w = mkwrite(1, ops, 5, 1);
    struct ps_write *wp = &w;
    assert_int_equal(ps_store_write_group(f->s, &wp, 1), 0);
    assert_int_equal(w.status, RT_EDIFFPARTITIONS);
    assert_int_equal(w.failed_index, 2);
    ps_write_reset(&w);

    ops[2].pk = "p"; /* now the duplicate at 3 comes first */
    assert_int_equal(ps_store_write_group(f->s, &wp, 1), 0);
    assert_int_equal(w.status, RT_EDUPROW);
    assert_int_equal(w.failed_index, 3);
    ps_write_reset(&w);

    ops[3].rk = "4";
    assert_int_equal(ps_store_write_group(f->s, &wp, 1), 0);
    assert_int_equal(w.status, RT_EDIFFPARTITIONS);
    assert_int_equal(w.failed_index, 4);
    ps_write_reset(&w);
    assert_false(exists(f->s, 1, "p", "1"));

    /* Not atomic: mixed partitions and repeated rows are allowed. */
    w.atomic = 0;
    assert_int_equal(ps_store_write_group(f->s, &wp, 1), 0);
    assert_int_equal(w.status, 0);
    assert_true(exists(f->s, 1, "r", "5"));
    ps_write_reset(&w);
    rt_buf_free(&props);
}

/* The failing op's own code comes back with its index (EEXIST, ENOTFOUND,
 * EPRECOND, a bad key, a merge that grows too big), and no op of the batch
 * is visible, even ops before it; neighbours in the group still commit. */
static void test_batch_failing_op(void **state)
{
    struct fx *f = *state;
    struct rt_buf props = RT_BUF_INIT, many = RT_BUF_INIT;
    th_props1(&props, "x", "1");
    props_n(&many, "m", 200, 1);
    put(f->s, 1, "p", "old");
    struct ps_op seed = mkop(PS_OP_INSERT, "p", "wide", &many);
    assert_int_equal(apply1(f->s, 1, &seed), 0);
    rt_buf_free(&seed.value);
    rt_buf_reset(&many);
    props_n(&many, "n", 60, 1);

    struct
    {
        enum ps_op_kind kind;
        const char *rk;
        uint64_t if_match;
        int code;
        struct rt_buf *props;
    } cases[] = {
        {PS_OP_INSERT, "old", 0, RT_EEXIST, &props},
        {PS_OP_REPLACE, "missing", 0, RT_ENOTFOUND, &props},
        {PS_OP_DELETE, "missing", 0, RT_ENOTFOUND, NULL},
        {PS_OP_MERGE, "old", 1, RT_EPRECOND, &props},
        {PS_OP_INSERT, "bad#key", 0, RT_EINVAL, &props},
        {PS_OP_MERGE, "wide", 0, RT_ETOOMANYPROPS, &many},
    };
    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
        struct ps_op ops[3] = {
            mkop(PS_OP_INSERT, "p", "n1", &props),
            mkop(PS_OP_UPSERT_MERGE, "p", "n2", &props),
            mkop(cases[c].kind, "p", cases[c].rk, cases[c].props),
        };
        struct ps_op other = mkop(PS_OP_UPSERT_REPLACE, "z", "z", &props);
        ops[2].if_match = cases[c].if_match;
        struct ps_write w = mkwrite(1, ops, 3, 1);
        struct ps_write w2 = mkwrite(1, &other, 1, 0);
        struct ps_write *ws[] = {&w, &w2};
        assert_int_equal(ps_store_write_group(f->s, ws, 2), 0);
        assert_int_equal(w.status, cases[c].code);
        assert_int_equal(w.failed_index, 2);
        assert_int_equal(ops[2].code, cases[c].code);
        assert_int_equal(ops[0].ticks, 0);
        assert_false(exists(f->s, 1, "p", "n1"));
        assert_false(exists(f->s, 1, "p", "n2"));
        assert_int_equal(other.code, 0);
        assert_int_equal(w2.status, 0);
        ps_write_reset(&w);
        ps_write_reset(&w2);
    }
    rt_buf_free(&props);
    rt_buf_free(&many);
}

/* Tests: filtered scans */

/* Key comparisons narrow the cursor range (only candidate keys are
 * examined), the rest is evaluated per entity; `done` is set when the
 * filter's upper bound ended the scan, not when the range did. */
static void test_filter_scan(void **state)
{
    struct fx *f = *state;
    struct
    {
        const char *filter;
        const char *low, *high;
        const char *want;
        uint64_t scanned;
        int done;
    } cases[] = {
        {"PartitionKey eq 'b'", "", NULL, "b|1\nb|2\nb|3\nb|4\nb|5\n", 5, 1},
        {"PartitionKey eq 'b' and RowKey ge '2' and RowKey lt '4'", "", NULL,
         "b|2\nb|3\n", 2, 1},
        {"RowKey le '2' and PartitionKey eq 'c'", "", NULL, "c|1\nc|2\n", 2, 1},
        {"PartitionKey eq 'c' and RowKey gt '4'", "", NULL, "c|5\n", 1, 1},
        {"PartitionKey gt 'c'", "", NULL,
         "d|1\nd|2\nd|3\nd|4\nd|5\ne|1\ne|2\ne|3\ne|4\ne|5\n", 10, 0},
        {"PartitionKey ge 'b' and PartitionKey lt 'c'", "", NULL,
         "b|1\nb|2\nb|3\nb|4\nb|5\n", 5, 1},
        {"PartitionKey le 'b' and n gt 13", "", NULL, "b|4\nb|5\n", 10, 1},
        {"n eq 22 or s eq 'd-4'", "", NULL, "c|2\nd|4\n", 25, 0},
        {"not (n lt 41)", "", NULL, "e|1\ne|2\ne|3\ne|4\ne|5\n", 25, 0},
        {"n eq 'x'", "", NULL, "", 25, 0}, /* type mismatch: no match */
        /* Range [b, d): the filter's bound below the range end. */
        {"PartitionKey lt 'c'", "b", "d", "b|1\nb|2\nb|3\nb|4\nb|5\n", 5, 1},
        {"PartitionKey lt 'x'", "b", "d",
         "b|1\nb|2\nb|3\nb|4\nb|5\nc|1\nc|2\nc|3\nc|4\nc|5\n", 10, 0},
        {"PartitionKey lt 'b'", "c", "d", "", 0, 1},
        {"PartitionKey ge 'x'", "c", "d", "", 0, 0},
        {"PartitionKey eq 'a' and PartitionKey eq 'b'", "", NULL, "", 0, 1},
        {"PartitionKey eq 3", "", NULL, "", 0, 1},
    };
    load20(f->s);
    put(f->s, 21, "a", "1"); /* next table: never reached */
    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
        struct rt_filter *fl = filter(cases[c].filter);
        struct ps_scan sc = mkscan(20, cases[c].low, cases[c].high);
        struct rt_buf out = RT_BUF_INIT;
        uint64_t scanned;
        int done;
        sc.filter = fl;
        scan_all(f->s, &sc, &out, &scanned, &done);
        if (strcmp(rt_buf_cstr(&out), cases[c].want) != 0 ||
            scanned != cases[c].scanned || done != cases[c].done) {
            fprintf(stderr, "filter %s: got '%s' scanned %llu done %d\n",
                    cases[c].filter, rt_buf_cstr(&out),
                    (unsigned long long)scanned, done);
        }
        assert_string_equal(rt_buf_cstr(&out), cases[c].want);
        assert_int_equal(scanned, cases[c].scanned);
        assert_int_equal(done, cases[c].done);
        rt_buf_free(&out);
        rt_filter_free(fl);
    }
}

/* A filtered scan pages at the limit with the next key, and resuming
 * there (as the front end does) gives every match exactly once. */
static void test_filter_scan_pages(void **state)
{
    struct fx *f = *state;
    struct rt_filter *fl = filter("n ge 13 and n le 42");
    struct ps_scan sc = mkscan(20, "", NULL);
    int done;
    load20(f->s);
    sc.filter = fl;
    sc.limit = 4;
    assert_int_equal(ps_store_scan(f->s, &sc), 0);
    assert_int_equal(sc.n, 4);
    assert_true(sc.more);
    assert_false(sc.done);
    assert_string_equal(sc.recs[0].pk, "b");
    assert_string_equal(sc.recs[0].rk, "3");
    assert_string_equal(sc.next_pk, "c");
    assert_string_equal(sc.next_rk, "2");
    ps_scan_free(&sc);
    sc.limit = 4;
    assert_string_equal(scan_text(f->s, &sc, &done),
                        "b|3\nb|4\nb|5\nc|1\nc|2\nc|3\nc|4\nc|5\n"
                        "d|1\nd|2\nd|3\nd|4\nd|5\ne|1\ne|2\n");
    rt_filter_free(fl);
}

/* $select: the returned values hold only the selected properties (keys
 * and Timestamp are outside the blob); "*" returns everything. */
static void test_select_projection(void **state)
{
    struct fx *f = *state;
    const char *sel[] = {"s", "PartitionKey", "nope"};
    const char *star[] = {"n", "*"};
    struct ps_scan sc = mkscan(20, "", NULL);
    struct rt_buf v = RT_BUF_INIT;
    load20(f->s);
    sc.select = sel;
    sc.n_select = 3;
    sc.limit = 2;
    assert_int_equal(ps_store_scan(f->s, &sc), 0);
    assert_int_equal(sc.n, 2);
    rt_buf_append(&v, sc.recs[1].value, sc.recs[1].value_len);
    assert_string_equal(value_prop(&v, "s"), "a-2");
    assert_null(value_prop(&v, "n"));
    struct rt_buf full = RT_BUF_INIT;
    assert_int_equal(ps_store_get(f->s, 20, "a", "2", &full), 0);
    assert_int_equal(value_ticks(&v), value_ticks(&full));
    assert_true(v.len < full.len);
    ps_scan_free(&sc);

    sc.select = star;
    sc.n_select = 2;
    assert_int_equal(ps_store_scan(f->s, &sc), 0);
    assert_int_equal(sc.recs[1].value_len, full.len);
    assert_memory_equal(sc.recs[1].value, full.data, full.len);
    ps_scan_free(&sc);
    rt_buf_free(&v);
    rt_buf_free(&full);
}

/* Budgets: a key-count or time budget can end a page with no results but
 * more = 1 and the next key, and paging on finds the one match. */
static void test_scan_budgets(void **state)
{
    struct fx *f = *state;
    enum { N = 30000 };
    struct ps_op *ops = calloc(1000, sizeof(*ops));
    char(*rks)[8] = calloc(1000, 8);
    struct rt_buf props = RT_BUF_INIT, needle = RT_BUF_INIT;
    th_props1(&props, "x", "hay");
    th_props1(&needle, "x", "needle");
    for (int g = 0; g < N / 1000; g++) {
        for (int i = 0; i < 1000; i++) {
            snprintf(rks[i], 8, "%06d", g * 1000 + i);
            ops[i] = mkop(PS_OP_INSERT, "p", rks[i],
                          g * 1000 + i == N - 1 ? &needle : &props);
            ops[i].want_value = 0;
        }
        put_many(f->s, 1, ops, 1000);
    }

    struct rt_filter *fl = filter("x eq 'needle'");
    struct ps_scan sc = mkscan(1, "", NULL);
    sc.filter = fl;
    sc.max_scanned = 100;
    assert_int_equal(ps_store_scan(f->s, &sc), 0);
    assert_int_equal(sc.n, 0);
    assert_true(sc.more);
    assert_int_equal(sc.scanned, 100);
    assert_string_equal(sc.next_rk, "000100");
    ps_scan_free(&sc);

    /* Time: 1 ms is far less than scanning 30000 values takes. */
    struct rt_buf out = RT_BUF_INIT;
    uint64_t scanned;
    int done, pages;
    sc = mkscan(1, "", NULL);
    sc.filter = fl;
    sc.budget_ms = 1;
    pages = scan_all(f->s, &sc, &out, &scanned, &done);
    assert_true(pages > 1);
    assert_int_equal(scanned, N);
    assert_string_equal(rt_buf_cstr(&out), "p|029999\n");

    /* Without a budget it is one page. */
    rt_buf_reset(&out);
    sc = mkscan(1, "", NULL);
    sc.filter = fl;
    assert_int_equal(scan_all(f->s, &sc, &out, &scanned, &done), 1);
    rt_filter_free(fl);
    rt_buf_free(&out);
    rt_buf_free(&props);
    rt_buf_free(&needle);
    free(ops);
    free(rks);
}

/* Tests: load accounting */

/* Range totals equal what a scan sees; each committed write reports its
 * effect (count and bytes deltas) and the txn id that orders it against a
 * count's snapshot. */
static void test_range_stats_and_deltas(void **state)
{
    struct fx *f = *state;
    uint64_t c0, b0, t0, c1, b1, t1;
    struct rt_buf props = RT_BUF_INIT, big = RT_BUF_INIT;
    load20(f->s);
    assert_int_equal(ps_store_range_stats(f->s, 20, "b", "d", &c0, &b0, &t0),
                     0);
    assert_int_equal(c0, 10);
    assert_true(b0 > 10 * RT_VALUE_HDR_SIZE);

    th_props1(&props, "x", "1");
    th_props1(&big, "x", "a much longer value than before");
    struct ps_op ops[4] = {
        mkop(PS_OP_INSERT, "b", "9", &props),     /* +1 */
        mkop(PS_OP_DELETE, "c", "1", NULL),       /* -1 */
        mkop(PS_OP_UPSERT_MERGE, "b", "1", &big), /* grows */
        mkop(PS_OP_INSERT, "b", "1", &props),     /* fails */
    };
    struct ps_write w = mkwrite(20, ops, 4, 0);
    struct ps_write *wp = &w;
    assert_int_equal(ps_store_write_group(f->s, &wp, 1), 0);
    assert_int_equal(ops[3].code, RT_EEXIST);
    assert_true(w.txn_id > t0);
    assert_int_equal(w.count_delta, 0);
    assert_int_equal(ps_store_range_stats(f->s, 20, "b", "d", &c1, &b1, &t1),
                     0);
    assert_int_equal(t1, w.txn_id);
    assert_int_equal(c1, c0);
    assert_int_equal((int64_t)b1 - (int64_t)b0, w.bytes_delta);
    ps_write_reset(&w);
    rt_buf_free(&props);
    rt_buf_free(&big);
}

/* The range's totals reconcile a count scan with writes that completed
 * while it ran: only writes after its snapshot are added. */
static void test_range_count_reconcile(void **state)
{
    struct ps_range r;
    (void)state;
    memset(&r, 0, sizeof(r));
    ps_range_count_write(&r, 5, 1, 10); /* before any count: ignored */
    uint64_t gen = ps_range_count_start(&r);
    ps_range_count_write(&r, 7, 1, 100);  /* in the snapshot (txn 8) */
    ps_range_count_write(&r, 9, 2, 200);  /* after it */
    ps_range_count_write(&r, 9, -1, -50); /* same group commit */
    ps_range_count_write(&r, 10, 1, 1);
    assert_int_equal(ps_range_count_done(&r, gen, 40, 4000, 8), 1);
    assert_int_equal(r.count_state, PS_COUNT_VALID);
    assert_int_equal(r.key_count, 40 + 2 - 1 + 1);
    assert_int_equal(r.key_bytes, 4000 + 200 - 50 + 1);
    ps_range_count_write(&r, 8, 5, 5); /* late callback, counted */
    ps_range_count_write(&r, 11, -3, -30);
    assert_int_equal(r.key_count, 39);
    assert_int_equal(r.key_bytes, 4121);

    /* A result of a superseded count is dropped. */
    uint64_t g1 = ps_range_count_start(&r);
    uint64_t g2 = ps_range_count_start(&r);
    assert_int_equal(ps_range_count_done(&r, g1, 1, 1, 20), 0);
    assert_int_equal(ps_range_count_done(&r, g2, 2, 2, 20), 1);
    assert_int_equal(r.key_count, 2);
    free(r.pend);
}

/* The PK sample is weighted by load: a PK whose requests carry 100
 * entities each shows up far more often than one with single-entity
 * requests at the same request rate. */
static void test_weighted_sample(void **state)
{
    struct ps_ranges rs;
    struct ps_range r;
    int heavy = 0, total = 0;
    (void)state;
    ps_ranges_init(&rs);
    for (int round = 0; round < 20; round++) {
        memset(&r, 0, sizeof(r));
        for (int i = 0; i < 500; i++) {
            ps_range_account(&rs, &r, 1, 0, 1, "light");
            ps_range_account(&rs, &r, 100, 0, 1, "heavy");
        }
        assert_int_equal(r.requests, 1000);
        assert_int_equal(r.entities, 500 * 101);
        assert_int_equal(r.n_sample, PS_SAMPLE_MAX);
        for (unsigned i = 0; i < r.n_sample; i++) {
            heavy += strcmp(r.sample[i], "heavy") == 0;
            total++;
        }
        ps_range_load_reset(&r, 0);
    }
    /* Expected share ~ 100/101; an unweighted sample would give 1/2. */
    assert_true(heavy * 10 > total * 9);
    ps_ranges_close(&rs);
}

/* Tests: range moves (capture, raw writes, snapshots, span drops) */

/* While capture is on, a group commit records each put and delete it made
 * (with its transaction id), not the ops that failed; capture off records
 * nothing. */
static void test_capture(void **state)
{
    struct fx *f = *state;
    struct rt_buf props = RT_BUF_INIT, cap = RT_BUF_INIT;
    struct ps_change c;
    size_t off = 0;
    th_props1(&props, "x", "1");
    put(f->s, 1, "p", "old");

    ps_store_capture(f->s, 1);
    struct ps_op ops[3] = {
        mkop(PS_OP_INSERT, "p", "a", &props),
        mkop(PS_OP_INSERT, "p", "old", &props), /* fails: exists */
        mkop(PS_OP_DELETE, "p", "old", NULL),
    };
    struct ps_write w = mkwrite(1, ops, 3, 0);
    struct ps_write *wp = &w;
    assert_int_equal(ps_store_write_group(f->s, &wp, 1), 0);
    assert_int_equal(ops[1].code, RT_EEXIST);
    ps_store_capture_take(f->s, &cap);
    assert_int_equal(ps_change_next(cap.data, cap.len, &off, &c), 1);
    assert_int_equal(c.txn_id, w.txn_id);
    assert_false(c.deleted);
    assert_int_equal(c.vn, ops[0].value.len);
    assert_memory_equal(c.val, ops[0].value.data, c.vn);
    assert_int_equal(ps_change_next(cap.data, cap.len, &off, &c), 1);
    assert_true(c.deleted);
    assert_int_equal(c.vn, 0);
    assert_int_equal(c.txn_id, w.txn_id);
    assert_int_equal(ps_change_next(cap.data, cap.len, &off, &c), 0);
    ps_write_reset(&w);

    rt_buf_reset(&cap);
    ps_store_capture(f->s, 0);
    put(f->s, 1, "p", "b");
    ps_store_capture_take(f->s, &cap);
    assert_int_equal(cap.len, 0);
    rt_buf_free(&cap);
    rt_buf_free(&props);
}

/* Raw writes store full keys and values as given (long keys into their
 * buckets), delete missing keys quietly, and a malformed one fails only
 * its own write. */
static void test_raw_writes(void **state)
{
    struct fx *f = *state;
    struct rt_buf props = RT_BUF_INIT, k1 = RT_BUF_INIT, k2 = RT_BUF_INIT;
    struct rt_buf val = RT_BUF_INIT, v = RT_BUF_INIT;
    char longpk[900];
    memset(longpk, 'L', sizeof(longpk) - 1);
    longpk[sizeof(longpk) - 1] = '\0';
    th_props1(&props, "x", "raw");
    rt_value_encode(&val, 12345, 0, props.data, props.len);
    rt_key_entity(&k1, 3, "p", 1, "r", 1);
    rt_key_entity(&k2, 3, longpk, strlen(longpk), "r", 1);

    struct ps_kv kvs[3] = {
        {k1.data, k1.len, val.data, val.len, 0},
        {k2.data, k2.len, val.data, val.len, 0},
        {k1.data, k1.len - 1, NULL, 0, 1}, /* not there: fine */
    };
    struct ps_write w;
    memset(&w, 0, sizeof(w));
    w.table_id = 3;
    w.kvs = kvs;
    w.n_kvs = 3;
    struct ps_kv bad = {k1.data, k1.len, NULL, 0, 0}; /* put, no value */
    struct ps_write wb;
    memset(&wb, 0, sizeof(wb));
    wb.kvs = &bad;
    wb.n_kvs = 1;
    struct ps_write *ws[2] = {&w, &wb};
    assert_int_equal(ps_store_write_group(f->s, ws, 2), 0);
    assert_int_equal(w.status, 0);
    assert_int_equal(wb.status, RT_EINVAL);
    assert_int_equal(ps_store_get(f->s, 3, "p", "r", &v), 0);
    assert_int_equal(value_ticks(&v), 12345);
    rt_buf_reset(&v);
    assert_int_equal(ps_store_get(f->s, 3, longpk, "r", &v), 0);
    assert_string_equal(value_prop(&v, "x"), "raw");

    kvs[0].deleted = 1;
    w.n_kvs = 1;
    ws[0] = &w;
    assert_int_equal(ps_store_write_group(f->s, ws, 1), 0);
    assert_false(exists(f->s, 3, "p", "r"));
    rt_buf_free(&props);
    rt_buf_free(&k1);
    rt_buf_free(&k2);
    rt_buf_free(&val);
    rt_buf_free(&v);
}

/* A snapshot sees the span as of its opening, in key order (bucket
 * entries flattened), in chunks, whatever is written meanwhile. */
static void test_snapshot(void **state)
{
    struct fx *f = *state;
    struct ps_span sp = {4, "b", "d"};
    struct ps_snap *sn;
    struct rt_buf out = RT_BUF_INIT, pk = RT_BUF_INIT, rk = RT_BUF_INIT;
    struct ps_change c;
    uint64_t txn, n = 0, bytes = 0, tid;
    char longpk[700];
    size_t off = 0, seen = 0;
    int rc, chunks = 0;

    memset(longpk, 'c', sizeof(longpk) - 1);
    longpk[sizeof(longpk) - 1] = '\0';
    put(f->s, 4, "a", "1");
    put(f->s, 4, "b", "1");
    put(f->s, 4, "b", "2");
    put(f->s, 4, longpk, "1");
    put(f->s, 4, longpk, "2");
    put(f->s, 4, "c", "1");
    put(f->s, 4, "d", "1");
    put(f->s, 5, "b", "1");
    assert_int_equal(ps_store_snap_open(f->s, &sp, &sn, &txn), 0);
    put(f->s, 4, "b", "3"); /* after the snapshot */
    while ((rc = ps_store_snap_next(sn, &out, 1, &n, &bytes)) == 1) {
        chunks++;
    }
    assert_int_equal(rc, 0);
    assert_int_equal(n, 5);
    assert_true(chunks >= 4);
    const char *want_pk[] = {"b", "b", "c", longpk, longpk};
    const char *want_rk[] = {"1", "2", "1", "1", "2"};
    while (ps_change_next(out.data, out.len, &off, &c) == 1) {
        rt_buf_reset(&pk);
        rt_buf_reset(&rk);
        assert_int_equal(rt_key_split(c.key, c.kn, &tid, &pk, &rk), 0);
        assert_int_equal(tid, 4);
        assert_int_equal(pk.len, strlen(want_pk[seen]));
        assert_memory_equal(pk.data, want_pk[seen], pk.len);
        assert_memory_equal(rk.data, want_rk[seen], rk.len);
        seen++;
    }
    assert_int_equal(seen, 5);
    assert_int_equal(ps_store_snap_next(sn, &out, 1, &n, &bytes), 0);
    ps_store_snap_close(sn);
    rt_buf_free(&out);
    rt_buf_free(&pk);
    rt_buf_free(&rk);
}

static void any_span_cb(uint64_t seq, const struct ps_span *sp, void *arg)
{
    (void)seq;
    (void)sp;
    (*(int *)arg)++;
}

/* A span drop deletes exactly the span, in chunks, keeps a resume marker
 * while keys remain, and cuts a bucket that straddles a bound (long
 * PartitionKeys sharing their first 500 bytes) instead of deleting it. */
static void test_span_drop(void **state)
{
    struct fx *f = *state;
    char base[600], pk_lo[620], pk_mid[620], pk_hi[620];
    struct ps_span sp;
    uint64_t deleted = 0, cnt;
    struct ps_span all = {6, "", NULL};
    int rc, chunks = 0;

    memset(base, 'a', sizeof(base) - 1);
    base[sizeof(base) - 1] = '\0';
    snprintf(pk_lo, sizeof(pk_lo), "%sc", base);
    snprintf(pk_mid, sizeof(pk_mid), "%sm", base);
    snprintf(pk_hi, sizeof(pk_hi), "%sx", base);
    for (int i = 0; i < 30; i++) {
        char rk[8];
        snprintf(rk, sizeof(rk), "%02d", i);
        put(f->s, 6, "A", rk);
        put(f->s, 6, pk_lo, rk);
        put(f->s, 6, pk_hi, rk);
        put(f->s, 6, "b", rk);
        put(f->s, 7, "A", rk);
    }
    /* [A, base+"m"): "A" rows and the pk_lo rows, not pk_hi or "b". */
    sp.table_id = 6;
    sp.low = "A";
    sp.high = pk_mid;
    while ((rc = ps_store_span_drop_chunk(f->s, 9, &sp, 7, &deleted)) == 1) {
        int markers = 0;
        chunks++;
        assert_int_equal(ps_store_pending_spans(f->s, any_span_cb, &markers),
                         0);
        assert_int_equal(markers, 1);
    }
    assert_int_equal(rc, 0);
    assert_true(chunks >= 4);
    assert_int_equal(deleted, 60);
    assert_false(exists(f->s, 6, "A", "00"));
    assert_false(exists(f->s, 6, pk_lo, "29"));
    assert_true(exists(f->s, 6, pk_hi, "00"));
    assert_true(exists(f->s, 6, "b", "29"));
    assert_true(exists(f->s, 7, "A", "00"));
    assert_int_equal(ps_store_span_count(f->s, &all, &cnt), 0);
    assert_int_equal(cnt, 60);
}

static void count_span_cb(uint64_t seq, const struct ps_span *sp, void *arg)
{
    int *n = arg;
    assert_int_equal(seq, 11);
    assert_int_equal(sp->table_id, 6);
    assert_string_equal(sp->low, "k");
    assert_null(sp->high);
    (*n)++;
}

/* The marker of an unfinished span drop is listed for resumption until
 * the last chunk removes it; meta_write commits extra meta ops. */
static void test_span_marker(void **state)
{
    struct fx *f = *state;
    struct ps_span sp = {6, "k", NULL};
    struct rt_buf k = RT_BUF_INIT, v = RT_BUF_INIT;
    uint64_t deleted = 0;
    int n = 0;

    for (int i = 0; i < 5; i++) {
        char rk[8];
        snprintf(rk, sizeof(rk), "%d", i);
        put(f->s, 6, "k", rk);
    }
    ps_store_span_marker(11, &sp, &k, &v);
    struct ps_meta_op op = {k.data, k.len, v.data, v.len, 0};
    assert_int_equal(ps_store_meta_write(f->s, 1, "", 0, 0, &op, 1), 0);
    assert_int_equal(ps_store_pending_spans(f->s, count_span_cb, &n), 0);
    assert_int_equal(n, 1);
    assert_int_equal(ps_store_span_drop_chunk(f->s, 11, &sp, 2, &deleted), 1);
    n = 0;
    assert_int_equal(ps_store_pending_spans(f->s, count_span_cb, &n), 0);
    assert_int_equal(n, 1);
    while (ps_store_span_drop_chunk(f->s, 11, &sp, 2, &deleted) == 1) {
    }
    assert_int_equal(deleted, 5);
    n = 0;
    assert_int_equal(ps_store_pending_spans(f->s, count_span_cb, &n), 0);
    assert_int_equal(n, 0);
    rt_buf_free(&k);
    rt_buf_free(&v);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_insert_then_get, setup, teardown),
        cmocka_unit_test_setup_teardown(test_dup_insert_neighbours, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_atomic_all_or_nothing, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_conditional_ops, setup, teardown),
        cmocka_unit_test_setup_teardown(test_timestamps_increase, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_scan_order_and_pages, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_scan_range_bounds, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_persist_reopen, setup, teardown),
        cmocka_unit_test_setup_teardown(test_meta_master_term, setup, teardown),
        cmocka_unit_test_setup_teardown(test_open_read_only, setup, teardown),
        cmocka_unit_test_setup_teardown(test_incarnation, setup, teardown),
        cmocka_unit_test_setup_teardown(test_drop_table, setup, teardown),
        cmocka_unit_test_setup_teardown(test_long_key_limits, setup, teardown),
        cmocka_unit_test_setup_teardown(test_long_key_order, setup, teardown),
        cmocka_unit_test_setup_teardown(test_key_format_migration, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_long_key_migration, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_key_characters, setup, teardown),
        cmocka_unit_test_setup_teardown(test_entity_limits, setup, teardown),
        cmocka_unit_test_setup_teardown(test_batch_too_many_ops, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_batch_partition_and_dup, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_batch_failing_op, setup, teardown),
        cmocka_unit_test_setup_teardown(test_filter_scan, setup, teardown),
        cmocka_unit_test_setup_teardown(test_filter_scan_pages, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_select_projection, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_scan_budgets, setup, teardown),
        cmocka_unit_test_setup_teardown(test_range_stats_and_deltas, setup,
                                        teardown),
        cmocka_unit_test(test_range_count_reconcile),
        cmocka_unit_test(test_weighted_sample),
        cmocka_unit_test_setup_teardown(test_capture, setup, teardown),
        cmocka_unit_test_setup_teardown(test_raw_writes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_snapshot, setup, teardown),
        cmocka_unit_test_setup_teardown(test_span_drop, setup, teardown),
        cmocka_unit_test_setup_teardown(test_span_marker, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
