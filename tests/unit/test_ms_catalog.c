/* Unit tests: master catalog (master/ms_catalog.h), no RPC involved. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <lmdb.h>

#include "ms_catalog.h"
#include "ms_policy.h"
#include "rt_err.h"
#include "rt_log.h"
#include "th_ms.h"

/* ---- Fixture ---- */

/* Each test gets a fresh catalog in its own temporary directory. */
static int setup(void **state)
{
    struct th_ms_cat *f = calloc(1, sizeof(*f));
    if (!f || th_ms_cat_setup(f, "test_ms_catalog") != 0) {
        free(f);
        return -1;
    }
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    th_ms_cat_teardown(*state);
    free(*state);
    return 0;
}

/* ---- Helpers ---- */

static uint64_t create(struct th_ms_cat *f,
                       const char *account,
                       const char *name)
{
    const struct ms_table *t = NULL;
    const struct ms_range *r = NULL;
    assert_int_equal(ms_catalog_create_table(f->cat, account, name, 1, &t, &r),
                     0);
    assert_non_null(t);
    assert_non_null(r);
    return t->id;
}

/* The RF 1 replica set the catalog keeps on every range until replication
 * runs: the owner is the one primary and the whole ISR. */
static void assert_rf1(const struct ms_range *r, uint64_t server_id)
{
    assert_true(ms_range_replicas_valid(r));
    assert_int_equal(r->server_id, server_id);
    assert_int_equal(r->nreplicas, 1);
    assert_int_equal(r->replicas[0].server_id, server_id);
    assert_int_equal(r->replicas[0].role, RT__REPL_ROLE__ROLE_PRIMARY);
    assert_int_equal(r->nisr, 1);
    assert_int_equal(r->isr[0], server_id);
    assert_int_equal(r->primary_epoch, r->epoch);
    assert_int_equal(r->rf, 1);
    assert_int_equal(r->min_insync, 1);
    assert_int_equal(r->seal_epoch, 0);
}

/* Writes @msg under range id @id straight into the catalog's LMDB (the
 * catalog is closed), as a master of an older build would have. */
static void put_raw_range(const char *dir, const Rt__Range *msg)
{
    MDB_env *env;
    MDB_txn *txn;
    MDB_dbi dbi;
    uint8_t key[8];
    size_t len = rt__range__get_packed_size(msg);
    uint8_t *buf = malloc(len ? len : 1);
    MDB_val k = {sizeof(key), key}, v = {len, buf};
    assert_non_null(buf);
    rt__range__pack(msg, buf);
    for (int i = 0; i < 8; i++) {
        key[i] = (uint8_t)(msg->id >> (56 - 8 * i));
    }
    assert_int_equal(mdb_env_create(&env), 0);
    assert_int_equal(mdb_env_set_maxdbs(env, 8), 0);
    assert_int_equal(mdb_env_open(env, dir, 0, 0644), 0);
    assert_int_equal(mdb_txn_begin(env, NULL, 0, &txn), 0);
    assert_int_equal(mdb_dbi_open(txn, "ranges", 0, &dbi), 0);
    assert_int_equal(mdb_put(txn, dbi, &k, &v, 0), 0);
    assert_int_equal(mdb_txn_commit(txn), 0);
    mdb_env_close(env);
    free(buf);
}

/* ---- Tests ---- */

/* Valid names pass; bad characters, lengths and "Tables" are refused. */
static void test_name_check(void **state)
{
    (void)state;
    assert_int_equal(ms_table_name_check("abc"), 0);
    assert_int_equal(ms_table_name_check("People2024"), 0);
    assert_int_equal(ms_table_name_check("ab"), RT_EBADNAME);
    assert_int_equal(ms_table_name_check("1abc"), RT_EBADNAME);
    assert_int_equal(ms_table_name_check("ab-c"), RT_EBADNAME);
    assert_int_equal(ms_table_name_check("ab c"), RT_EBADNAME);
    assert_int_equal(ms_table_name_check(""), RT_EBADNAME);
    assert_int_equal(ms_table_name_check("tables"), RT_EBADNAME);
    assert_int_equal(ms_table_name_check("TABLES"), RT_EBADNAME);
    assert_int_equal(ms_table_name_check("tables1"), 0);
    char name[80];
    memset(name, 'a', 63);
    name[63] = '\0';
    assert_int_equal(ms_table_name_check(name), 0);
    name[63] = 'a';
    name[64] = '\0';
    assert_int_equal(ms_table_name_check(name), RT_EBADNAME);
    assert_int_equal(ms_table_name_check("caf\xc3\xa9s"), RT_EBADNAME);
}

/* A created table has one unbounded range at epoch 1 on the chosen server,
 * can be found in any case and keeps the case it was created with. */
static void test_create_get(void **state)
{
    struct th_ms_cat *f = *state;
    const struct ms_table *t;
    const struct ms_range *r;
    uint64_t v0 = ms_catalog_map_version(f->cat);
    assert_int_equal(
        ms_catalog_create_table(f->cat, "acct", "People", 7, &t, &r), 0);
    assert_string_equal(t->name, "People");
    assert_string_equal(t->lname, "people");
    assert_string_equal(t->account, "acct");
    assert_int_equal(t->id, 1);
    assert_int_equal(r->table_id, t->id);
    assert_string_equal(r->low, "");
    assert_true(r->high_inf);
    assert_int_equal(r->server_id, 7);
    assert_int_equal(r->epoch, 1);
    assert_int_equal(ms_catalog_map_version(f->cat), v0 + 1);

    assert_ptr_equal(ms_catalog_table_find(f->cat, "acct", "PEOPLE"), t);
    assert_ptr_equal(ms_catalog_table_find(f->cat, "acct", "people"), t);
    assert_ptr_equal(ms_catalog_table_by_id(f->cat, t->id), t);
    assert_null(ms_catalog_table_find(f->cat, "other", "people"));
    assert_null(ms_catalog_table_find(f->cat, "acct", "nobody"));
    assert_ptr_equal(ms_catalog_range_find(f->cat, r->id), r);
    assert_int_equal(ms_catalog_server_nranges(f->cat, 7), 1);
    assert_int_equal(ms_catalog_server_nranges(f->cat, 8), 0);
}

/* Names clash case-insensitively within an account, not across accounts;
 * a refused create changes nothing. */
static void test_clash(void **state)
{
    struct th_ms_cat *f = *state;
    create(f, "acct", "Orders");
    uint64_t v = ms_catalog_map_version(f->cat);
    assert_int_equal(
        ms_catalog_create_table(f->cat, "acct", "oRdErS", 1, NULL, NULL),
        RT_ETABLEEXISTS);
    assert_int_equal(
        ms_catalog_create_table(f->cat, "acct", "bad-name", 1, NULL, NULL),
        RT_EBADNAME);
    assert_int_equal(ms_catalog_create_table(f->cat, "", "fine", 1, NULL, NULL),
                     RT_EINVAL);
    assert_int_equal(ms_catalog_map_version(f->cat), v);
    assert_int_equal(ms_catalog_ntables(f->cat), 1);
    create(f, "acct2", "orders");
    assert_int_equal(ms_catalog_ntables(f->cat), 2);
}

/* Deleting removes the table and its ranges and reports the owners; a
 * missing table is RT_ENOTFOUND. */
static void test_delete(void **state)
{
    struct th_ms_cat *f = *state;
    struct ms_table_drop drop;
    uint64_t id = create(f, "acct", "Gone");
    create(f, "acct", "Stays");
    assert_int_equal(ms_catalog_delete_table(f->cat, "acct", "GONE", &drop), 0);
    assert_int_equal(drop.table_id, id);
    assert_int_equal(drop.nservers, 1);
    assert_int_equal(drop.server_ids[0], 1);
    ms_table_drop_free(&drop);
    assert_null(ms_catalog_table_find(f->cat, "acct", "gone"));
    assert_null(ms_catalog_table_by_id(f->cat, id));
    assert_int_equal(ms_catalog_nranges(f->cat), 1);
    assert_int_equal(ms_catalog_ntables(f->cat), 1);
    assert_int_equal(ms_catalog_delete_table(f->cat, "acct", "gone", NULL),
                     RT_ENOTFOUND);
    assert_int_equal(ms_catalog_delete_table(f->cat, "x", "stays", NULL),
                     RT_ENOTFOUND);
}

/* A deleted and re-created table gets new table and range ids, also
 * after a restart. */
static void test_ids_not_reused(void **state)
{
    struct th_ms_cat *f = *state;
    const struct ms_table *t;
    const struct ms_range *r;
    uint64_t id1 = create(f, "acct", "Again");
    uint64_t rid1 = ms_catalog_range_at(f->cat, 0)->id;
    assert_int_equal(ms_catalog_delete_table(f->cat, "acct", "again", NULL), 0);
    assert_int_equal(
        ms_catalog_create_table(f->cat, "acct", "again", 1, &t, &r), 0);
    assert_true(t->id > id1);
    assert_true(r->id > rid1);
    uint64_t id2 = t->id, rid2 = r->id;
    assert_int_equal(ms_catalog_delete_table(f->cat, "acct", "again", NULL), 0);
    th_ms_cat_reopen(f);
    assert_int_equal(ms_catalog_ntables(f->cat), 0);
    assert_int_equal(
        ms_catalog_create_table(f->cat, "acct", "Again", 1, &t, &r), 0);
    assert_true(t->id > id2);
    assert_true(r->id > rid2);
}

/* Everything survives a close and reopen: tables (with case), ranges,
 * servers and the map version. */
static void test_persistence(void **state)
{
    struct th_ms_cat *f = *state;
    uint64_t sid;
    create(f, "acct", "Alpha");
    create(f, "acct", "beta");
    create(f, "other", "Gamma");
    assert_int_equal(ms_catalog_register_server(f->cat, 0, "127.0.0.1:4000",
                                                NULL, NULL, &sid, NULL),
                     0);
    uint64_t v = ms_catalog_map_version(f->cat);
    th_ms_cat_reopen(f);
    assert_int_equal(ms_catalog_map_version(f->cat), v);
    assert_int_equal(ms_catalog_ntables(f->cat), 3);
    assert_int_equal(ms_catalog_nranges(f->cat), 3);
    const struct ms_table *t = ms_catalog_table_find(f->cat, "acct", "ALPHA");
    assert_non_null(t);
    assert_string_equal(t->name, "Alpha");
    assert_ptr_equal(ms_catalog_table_by_id(f->cat, t->id), t);
    const struct ms_range *r = ms_catalog_range_at(f->cat, 0);
    assert_int_equal(r->table_id, t->id);
    assert_true(r->high_inf);
    assert_int_equal(r->epoch, 1);
    assert_int_equal(ms_catalog_nservers(f->cat), 1);
    assert_string_equal(ms_catalog_server_find(f->cat, sid)->addr,
                        "127.0.0.1:4000");
    assert_int_equal(ms_catalog_bump_version(f->cat), 0);
    th_ms_cat_reopen(f);
    assert_int_equal(ms_catalog_map_version(f->cat), v + 1);
}

/* Listing is per account, ordered by lower-case name, pages by start
 * (inclusive, any case) and limit, and names the next table. */
static void test_list_paging(void **state)
{
    struct th_ms_cat *f = *state;
    const char *names[] = {"delta", "Alpha", "charlie", "Bravo", "echo"};
    const char *order[] = {"Alpha", "Bravo", "charlie", "delta", "echo"};
    size_t first, count;
    const struct ms_table *next;
    for (size_t i = 0; i < 5; i++) {
        create(f, "acct", names[i]);
    }
    create(f, "aaa", "zulu");
    create(f, "zzz", "aardvark");

    ms_catalog_list_tables(f->cat, "acct", "", 0, &first, &count, &next);
    assert_int_equal(count, 5);
    assert_null(next);
    for (size_t i = 0; i < count; i++) {
        assert_string_equal(ms_catalog_table_at(f->cat, first + i)->name,
                            order[i]);
    }

    ms_catalog_list_tables(f->cat, "acct", "", 2, &first, &count, &next);
    assert_int_equal(count, 2);
    assert_string_equal(ms_catalog_table_at(f->cat, first)->name, "Alpha");
    assert_non_null(next);
    assert_string_equal(next->lname, "charlie");

    ms_catalog_list_tables(f->cat, "acct", next->lname, 2, &first, &count,
                           &next);
    assert_int_equal(count, 2);
    assert_string_equal(ms_catalog_table_at(f->cat, first)->name, "charlie");
    assert_string_equal(ms_catalog_table_at(f->cat, first + 1)->name, "delta");
    assert_string_equal(next->lname, "echo");

    ms_catalog_list_tables(f->cat, "acct", "ECHO", 2, &first, &count, &next);
    assert_int_equal(count, 1);
    assert_null(next);

    /* Start between names, and past the end. */
    ms_catalog_list_tables(f->cat, "acct", "c", 1000, &first, &count, &next);
    assert_int_equal(count, 3);
    assert_string_equal(ms_catalog_table_at(f->cat, first)->name, "charlie");
    ms_catalog_list_tables(f->cat, "acct", "zz", 0, &first, &count, &next);
    assert_int_equal(count, 0);
    assert_null(next);
    ms_catalog_list_tables(f->cat, "nobody", "", 0, &first, &count, &next);
    assert_int_equal(count, 0);
    assert_null(next);
}

/* The page size is capped at 1000. */
static void test_list_limit_cap(void **state)
{
    struct th_ms_cat *f = *state;
    char name[16];
    size_t first, count;
    const struct ms_table *next;
    for (int i = 0; i < 1002; i++) {
        snprintf(name, sizeof(name), "t%05d", i);
        assert_int_equal(
            ms_catalog_create_table(f->cat, "a", name, 1, NULL, NULL), 0);
    }
    ms_catalog_list_tables(f->cat, "a", "", 5000, &first, &count, &next);
    assert_int_equal(count, 1000);
    assert_non_null(next);
    assert_string_equal(next->lname, "t01000");
}

/* Server ids: 0 gets a fresh id, a known id is kept (addr may change), an
 * unknown id is adopted and the counter moves past it; all persist. */
static void test_servers(void **state)
{
    struct th_ms_cat *f = *state;
    uint64_t a, b, c, d;
    bool changed;
    uint64_t v0 = ms_catalog_map_version(f->cat);
    assert_int_equal(
        ms_catalog_register_server(f->cat, 0, "h:1", NULL, NULL, &a, &changed),
        0);
    assert_true(changed);
    assert_int_equal(
        ms_catalog_register_server(f->cat, 0, "h:2", NULL, NULL, &b, &changed),
        0);
    assert_int_not_equal(a, b);
    assert_int_equal(ms_catalog_map_version(f->cat), v0 + 2);
    /* Same id, same addr: nothing written. */
    assert_int_equal(
        ms_catalog_register_server(f->cat, a, "h:1", NULL, NULL, &c, &changed),
        0);
    assert_int_equal(c, a);
    assert_false(changed);
    assert_int_equal(ms_catalog_map_version(f->cat), v0 + 2);
    /* Same id, new addr (restart on another port). */
    assert_int_equal(
        ms_catalog_register_server(f->cat, a, "h:9", NULL, NULL, &c, &changed),
        0);
    assert_int_equal(c, a);
    assert_true(changed);
    /* Unknown id from a server that remembers it. */
    assert_int_equal(ms_catalog_register_server(f->cat, 40, "h:40", NULL, NULL,
                                                &d, &changed),
                     0);
    assert_int_equal(d, 40);
    assert_int_equal(
        ms_catalog_register_server(f->cat, 0, "", NULL, NULL, &d, NULL),
        RT_EINVAL);

    th_ms_cat_reopen(f);
    assert_int_equal(ms_catalog_nservers(f->cat), 3);
    assert_string_equal(ms_catalog_server_find(f->cat, a)->addr, "h:9");
    assert_string_equal(ms_catalog_server_find(f->cat, b)->addr, "h:2");
    assert_int_equal(
        ms_catalog_register_server(f->cat, 0, "h:3", NULL, NULL, &d, &changed),
        0);
    assert_true(d > 40);
    assert_int_equal(ms_catalog_server_at(f->cat, 0)->id, a);
}

/* A server id is bound to the certificate name that first registered it:
 * another name is refused (RT_EPERM) and moves nothing; the same name, or
 * plain RPC, may change the address; the binding persists. */
static void test_server_identity(void **state)
{
    struct th_ms_cat *f = *state;
    uint64_t a, c;
    bool changed;
    assert_int_equal(ms_catalog_register_server_as(f->cat, 0, "h:1", NULL, NULL,
                                                   "ps:ps1", &a, &changed),
                     0);
    assert_string_equal(ms_catalog_server_find(f->cat, a)->identity, "ps:ps1");
    uint64_t v = ms_catalog_map_version(f->cat);
    assert_int_equal(
        ms_catalog_register_server_as(f->cat, a, "evil:1", NULL, NULL,
                                      "ps:rogue", &c, &changed),
        RT_EPERM);
    assert_false(changed);
    assert_string_equal(ms_catalog_server_find(f->cat, a)->addr, "h:1");
    assert_int_equal(ms_catalog_map_version(f->cat), v);
    assert_int_equal(ms_catalog_register_server_as(f->cat, a, "h:2", NULL, NULL,
                                                   "ps:ps1", &c, &changed),
                     0);
    assert_true(changed);
    assert_int_equal(
        ms_catalog_register_server(f->cat, a, "h:3", NULL, NULL, &c, &changed),
        0);
    assert_string_equal(ms_catalog_server_find(f->cat, a)->identity, "ps:ps1");
    th_ms_cat_reopen(f);
    assert_string_equal(ms_catalog_server_find(f->cat, a)->identity, "ps:ps1");
    assert_int_equal(ms_catalog_register_server_as(f->cat, a, "evil:1", NULL,
                                                   NULL, "ps:rogue", &c, NULL),
                     RT_EPERM);
    assert_string_equal(ms_catalog_server_find(f->cat, a)->addr, "h:3");
}

/* Zone and incarnation are stored with the server: the first incarnation
 * is recorded (a server of an older build sends none and keeps what is
 * stored), a new one replaces it, a zone change is written; all persist. */
static void test_server_zone_incarnation(void **state)
{
    struct th_ms_cat *f = *state;
    uint8_t inc1[MS_INCARNATION_SIZE], inc2[MS_INCARNATION_SIZE];
    const struct ms_server_rec *rec;
    uint64_t a, c;
    bool changed;
    memset(inc1, 0x11, sizeof(inc1));
    memset(inc2, 0x22, sizeof(inc2));

    assert_int_equal(
        ms_catalog_register_server(f->cat, 0, "h:1", NULL, NULL, &a, &changed),
        0);
    rec = ms_catalog_server_find(f->cat, a);
    assert_string_equal(rec->zone, "");
    assert_false(rec->has_incarnation);
    /* Upgraded server: its first incarnation and zone are recorded. */
    assert_int_equal(
        ms_catalog_register_server(f->cat, a, "h:1", "z1", inc1, &c, &changed),
        0);
    assert_true(changed);
    /* The same again: nothing written; none sent: the stored one stays. */
    assert_int_equal(
        ms_catalog_register_server(f->cat, a, "h:1", "z1", inc1, &c, &changed),
        0);
    assert_false(changed);
    assert_int_equal(
        ms_catalog_register_server(f->cat, a, "h:1", "z1", NULL, &c, &changed),
        0);
    assert_false(changed);
    th_ms_cat_reopen(f);
    rec = ms_catalog_server_find(f->cat, a);
    assert_string_equal(rec->zone, "z1");
    assert_true(rec->has_incarnation);
    assert_memory_equal(rec->incarnation, inc1, sizeof(inc1));
    /* A new incarnation and zone replace the stored ones. */
    assert_int_equal(
        ms_catalog_register_server(f->cat, a, "h:1", "z2", inc2, &c, &changed),
        0);
    assert_true(changed);
    th_ms_cat_reopen(f);
    rec = ms_catalog_server_find(f->cat, a);
    assert_string_equal(rec->zone, "z2");
    assert_memory_equal(rec->incarnation, inc2, sizeof(inc2));
    /* Draining keeps them. */
    assert_int_equal(ms_catalog_set_draining(f->cat, a, true), 0);
    th_ms_cat_reopen(f);
    rec = ms_catalog_server_find(f->cat, a);
    assert_true(rec->draining);
    assert_string_equal(rec->zone, "z2");
    assert_memory_equal(rec->incarnation, inc2, sizeof(inc2));
}

/* Range updates (the building block of split and move) are one durable
 * change: new ranges get fresh ids, replaced ranges keep theirs. */
static void test_update_ranges(void **state)
{
    struct th_ms_cat *f = *state;
    const struct ms_table *t;
    const struct ms_range *r;
    uint64_t ids[2];
    assert_int_equal(
        ms_catalog_create_table(f->cat, "acct", "split", 1, &t, &r), 0);
    uint64_t tid = t->id, rid = r->id;
    /* Split [ "", inf ) at "m": replace the old range, add [m, inf). */
    struct ms_range_put puts[2] = {
        {.id = rid,
         .table_id = tid,
         .low = "",
         .high = "m",
         .server_id = 1,
         .epoch = 2},
        {.id = 0,
         .table_id = tid,
         .low = "m",
         .high_inf = true,
         .server_id = 2,
         .epoch = 2},
    };
    assert_int_equal(ms_catalog_update_ranges(f->cat, puts, 2, NULL, 0, ids),
                     0);
    assert_int_equal(ids[0], rid);
    assert_true(ids[1] > rid);
    th_ms_cat_reopen(f);
    assert_int_equal(ms_catalog_nranges(f->cat), 2);
    r = ms_catalog_range_find(f->cat, rid);
    assert_string_equal(r->high, "m");
    assert_false(r->high_inf);
    assert_int_equal(r->epoch, 2);
    r = ms_catalog_range_find(f->cat, ids[1]);
    assert_string_equal(r->low, "m");
    assert_true(r->high_inf);
    assert_int_equal(r->server_id, 2);
    /* Merge back: delete the upper range, widen the lower one. */
    struct ms_range_put merged = {.id = rid,
                                  .table_id = tid,
                                  .low = "",
                                  .high_inf = true,
                                  .server_id = 1,
                                  .epoch = 3};
    assert_int_equal(
        ms_catalog_update_ranges(f->cat, &merged, 1, &ids[1], 1, NULL), 0);
    assert_int_equal(ms_catalog_nranges(f->cat), 1);
    /* Errors leave everything unchanged. */
    uint64_t v = ms_catalog_map_version(f->cat);
    assert_int_equal(
        ms_catalog_update_ranges(f->cat, NULL, 0, &ids[1], 1, NULL),
        RT_ENOTFOUND);
    struct ms_range_put bad = merged;
    bad.table_id = 999;
    assert_int_equal(ms_catalog_update_ranges(f->cat, &bad, 1, NULL, 0, NULL),
                     RT_ENOTFOUND);
    bad = merged;
    bad.id = 999;
    assert_int_equal(ms_catalog_update_ranges(f->cat, &bad, 1, NULL, 0, NULL),
                     RT_EINVAL);
    assert_int_equal(ms_catalog_map_version(f->cat), v);
    /* Deleting the table removes split ranges on every owner. */
    struct ms_table_drop drop;
    assert_int_equal(ms_catalog_update_ranges(f->cat, puts, 2, NULL, 0, ids),
                     0);
    assert_int_equal(ms_catalog_delete_table(f->cat, "acct", "split", &drop),
                     0);
    assert_int_equal(drop.nservers, 2);
    ms_table_drop_free(&drop);
    assert_int_equal(ms_catalog_nranges(f->cat), 0);
}

/* A range record written before replica sets existed loads as RF 1 (the
 * owner is primary and ISR, primary_epoch = epoch) and is stored with its
 * replica set at its next change; a record whose replica set breaks the
 * invariants does not load. */
static void test_range_old_record(void **state)
{
    struct th_ms_cat *f = *state;
    const struct ms_range *r;
    const struct ms_table *t;
    char errmsg[RT_ERRMSG_SIZE];
    Rt__Range old = RT__RANGE__INIT;
    uint64_t tid, rid;

    assert_int_equal(ms_catalog_create_table(f->cat, "acct", "old", 3, &t, &r),
                     0);
    tid = t->id;
    rid = r->id;
    assert_rf1(r, 3);
    ms_catalog_close(f->cat);
    f->cat = NULL;
    old.id = rid;
    old.table_id = tid;
    old.low = "";
    old.high = "";
    old.high_inf = true;
    old.server_id = 4;
    old.epoch = 9;
    put_raw_range(f->dir, &old);
    assert_int_equal(ms_catalog_open(f->dir, &f->cat, errmsg), 0);
    r = ms_catalog_range_find(f->cat, rid);
    assert_non_null(r);
    assert_int_equal(r->epoch, 9);
    assert_rf1(r, 4);
    {
        Rt__Range pb;
        ms_range_to_pb(r, &pb);
        assert_int_equal(pb.n_replicas, 1);
        assert_int_equal(pb.replicas[0]->server_id, 4);
        assert_int_equal(pb.n_isr, 1);
        assert_int_equal(pb.isr[0], 4);
        assert_int_equal(pb.primary_epoch, 9);
        assert_int_equal(pb.rf, 1);
        assert_int_equal(pb.min_insync, 1);
    }

    /* A primary that is not server_id: the record is refused. */
    {
        Rt__Replica rep = RT__REPLICA__INIT, *repv[1] = {&rep};
        uint64_t isr[1] = {5};
        rep.server_id = 5;
        rep.role = RT__REPL_ROLE__ROLE_PRIMARY;
        old.n_replicas = 1;
        old.replicas = repv;
        old.n_isr = 1;
        old.isr = isr;
        old.primary_epoch = 9;
        old.rf = 1;
        old.min_insync = 1;
        ms_catalog_close(f->cat);
        f->cat = NULL;
        put_raw_range(f->dir, &old);
        assert_int_equal(ms_catalog_open(f->dir, &f->cat, errmsg), RT_ECORRUPT);
        /* The same set with server_id 5 loads as stored. */
        old.server_id = 5;
        put_raw_range(f->dir, &old);
        assert_int_equal(ms_catalog_open(f->dir, &f->cat, errmsg), 0);
        assert_rf1(ms_catalog_range_find(f->cat, rid), 5);
    }
}

/* Ranges split in UTF-16 key order: U+1F600 lies inside ["", U+E000), so
 * that split is taken and U+FF01 is refused there. A catalog whose stored
 * bounds are out of UTF-16 order ([U+E000, U+1F600), as an older release
 * comparing UTF-8 bytes could split) does not load, and the message names
 * the range and rtctl merge; with the range merged back it loads. */
static void test_range_key_order(void **state)
{
    struct th_ms_cat *f = *state;
    const struct ms_range *r;
    const struct ms_table *t;
    char errmsg[RT_ERRMSG_SIZE] = "";
    uint64_t halves[2], quarters[2], rid;
    Rt__Range bad = RT__RANGE__INIT, extra = RT__RANGE__INIT;
    char want[64];

    assert_int_equal(
        ms_catalog_create_table(f->cat, "acct", "keyorder", 1, &t, &r), 0);
    rid = r->id;
    assert_int_equal(
        ms_catalog_split_repl(f->cat, rid, r->epoch, "\xee\x80\x80", halves),
        0);
    r = ms_catalog_range_find(f->cat, halves[0]);
    assert_int_equal(ms_catalog_split_repl(f->cat, halves[0], r->epoch,
                                           "\xef\xbc\x81", quarters),
                     RT_EINVAL);
    assert_int_equal(ms_catalog_split_repl(f->cat, halves[0], r->epoch,
                                           "\xf0\x9f\x98\x80", quarters),
                     0);
    r = ms_catalog_range_find(f->cat, halves[1]);
    assert_int_equal(ms_catalog_split_repl(f->cat, halves[1], r->epoch,
                                           "\xf0\x9f\x98\x80", quarters),
                     RT_EINVAL);
    /* Rewritten below as a record of an older build (no replica set:
     * loads as RF 1 on its server). */
    bad.id = r->id;
    bad.table_id = r->table_id;
    bad.low = "\xee\x80\x80";
    bad.server_id = r->server_id;
    bad.epoch = r->epoch;
    ms_catalog_close(f->cat);
    f->cat = NULL;

    /* [U+E000, U+1F600) + [U+1F600, inf): a chain in UTF-8 byte order. */
    extra = bad;
    extra.id = 100;
    extra.low = "\xf0\x9f\x98\x80";
    bad.high = "\xf0\x9f\x98\x80";
    bad.high_inf = false;
    put_raw_range(f->dir, &bad);
    put_raw_range(f->dir, &extra);
    assert_int_equal(ms_catalog_open(f->dir, &f->cat, errmsg), RT_ECORRUPT);
    snprintf(want, sizeof(want), "rtctl merge %llu",
             (unsigned long long)bad.id);
    assert_non_null(strstr(errmsg, want));
    assert_non_null(strstr(errmsg, "UTF-16"));

    bad.high = "";
    bad.high_inf = true;
    put_raw_range(f->dir, &bad);
    {
        MDB_env *env;
        MDB_txn *txn;
        MDB_dbi dbi;
        uint8_t key[8] = {0, 0, 0, 0, 0, 0, 0, 100};
        MDB_val k = {sizeof(key), key};
        assert_int_equal(mdb_env_create(&env), 0);
        assert_int_equal(mdb_env_set_maxdbs(env, 8), 0);
        assert_int_equal(mdb_env_open(env, f->dir, 0, 0644), 0);
        assert_int_equal(mdb_txn_begin(env, NULL, 0, &txn), 0);
        assert_int_equal(mdb_dbi_open(txn, "ranges", 0, &dbi), 0);
        assert_int_equal(mdb_del(txn, dbi, &k, NULL), 0);
        assert_int_equal(mdb_txn_commit(txn), 0);
        mdb_env_close(env);
    }
    assert_int_equal(ms_catalog_open(f->dir, &f->cat, errmsg), 0);
    assert_int_equal(ms_catalog_nranges(f->cat), 3);
}

/* Every change of owner keeps the replica set on the owner: a created
 * range, both halves of a split, a merge, a committed move, and all of
 * them after a reopen. */
static void test_range_replicas_follow_owner(void **state)
{
    struct th_ms_cat *f = *state;
    const struct ms_table *t;
    const struct ms_range *r;
    const Rt__MoveReq *mv;
    uint64_t ids[2], tid, rid;

    assert_int_equal(
        ms_catalog_create_table(f->cat, "acct", "owners", 1, &t, &r), 0);
    tid = t->id;
    rid = r->id;
    assert_rf1(r, 1);
    /* Split at "m": the upper half goes to another server. */
    struct ms_range_put puts[2] = {
        {rid, tid, "", "m", false, 1, 2},
        {0, tid, "m", NULL, true, 2, 2},
    };
    assert_int_equal(ms_catalog_update_ranges(f->cat, puts, 2, NULL, 0, ids),
                     0);
    assert_rf1(ms_catalog_range_find(f->cat, ids[0]), 1);
    assert_rf1(ms_catalog_range_find(f->cat, ids[1]), 2);
    /* Move the upper half to server 1: the move record carries the set as
     * it was, the committed range the new one. */
    assert_int_equal(ms_catalog_move_begin(f->cat, ids[1], 1, "h:1", &mv), 0);
    assert_int_equal(mv->range->n_replicas, 1);
    assert_int_equal(mv->range->replicas[0]->server_id, 2);
    assert_int_equal(ms_catalog_move_commit(f->cat, mv->move_id), 0);
    r = ms_catalog_range_find(f->cat, ids[1]);
    assert_int_equal(r->epoch, 3);
    assert_rf1(r, 1);
    /* Merge the two halves back. */
    struct ms_range_put merged = {rid, tid, "", NULL, true, 1, 4};
    assert_int_equal(
        ms_catalog_update_ranges(f->cat, &merged, 1, &ids[1], 1, NULL), 0);
    assert_int_equal(ms_catalog_nranges(f->cat), 1);
    assert_rf1(ms_catalog_range_find(f->cat, rid), 1);
    th_ms_cat_reopen(f);
    r = ms_catalog_range_find(f->cat, rid);
    assert_int_equal(r->epoch, 4);
    assert_rf1(r, 1);
}

/* A table created with a placed replica set keeps it: the first server
 * primary, the others secondaries, all in the ISR, rf and min_insync as
 * given; the same after a reopen; and counted on every server it names. */
static void test_create_replicated(void **state)
{
    struct th_ms_cat *f = *state;
    const uint64_t servers[3] = {2, 5, 3};
    const struct ms_replica_spec rs = {servers, 3, 3, 2};
    const struct ms_range *r;
    uint64_t rid;

    assert_int_equal(
        ms_catalog_create_table_rs(f->cat, "acct", "tripled", &rs, NULL, &r),
        0);
    rid = r->id;
    for (int pass = 0; pass < 2; pass++) {
        r = ms_catalog_range_find(f->cat, rid);
        assert_non_null(r);
        assert_true(ms_range_replicas_valid(r));
        assert_int_equal(r->server_id, 2);
        assert_int_equal(r->epoch, 1);
        assert_int_equal(r->primary_epoch, 1);
        assert_int_equal(r->nreplicas, 3);
        assert_int_equal(r->nisr, 3);
        for (size_t i = 0; i < 3; i++) {
            assert_int_equal(r->replicas[i].server_id, servers[i]);
            assert_int_equal(r->replicas[i].role,
                             i == 0 ? RT__REPL_ROLE__ROLE_PRIMARY
                                    : RT__REPL_ROLE__ROLE_SECONDARY);
            assert_int_equal(r->isr[i], servers[i]);
            assert_true(ms_range_names(r, servers[i]));
        }
        assert_false(ms_range_names(r, 4));
        assert_int_equal(r->rf, 3);
        assert_int_equal(r->min_insync, 2);
        assert_int_equal(ms_catalog_server_nranges(f->cat, 2), 1);
        assert_int_equal(ms_catalog_server_nranges(f->cat, 5), 0);
        assert_int_equal(ms_catalog_server_nreplicas(f->cat, 5), 1);
        assert_int_equal(ms_catalog_server_nreplicas(f->cat, 4), 0);
        th_ms_cat_reopen(f);
    }
    /* Fewer copies than rf (under-replicated) is a valid set. */
    const struct ms_replica_spec two = {servers, 2, 3, 2};
    assert_int_equal(
        ms_catalog_create_table_rs(f->cat, "acct", "doubled", &two, NULL, &r),
        0);
    assert_int_equal(r->nreplicas, 2);
    assert_int_equal(r->rf, 3);
}

/* A replica set that is not valid writes nothing: a server twice, more
 * copies than rf, min_insync above rf, no server at all. */
static void test_create_replicated_invalid(void **state)
{
    struct th_ms_cat *f = *state;
    const uint64_t twice[2] = {4, 4}, ok[2] = {4, 6};
    const struct ms_replica_spec bad[] = {
        {twice, 2, 3, 2},
        {ok, 2, 1, 1},
        {ok, 2, 2, 3},
        {ok, 0, 3, 2},
    };
    uint64_t v0 = ms_catalog_map_version(f->cat);
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_int_equal(ms_catalog_create_table_rs(f->cat, "acct", "nope",
                                                    &bad[i], NULL, NULL),
                         RT_EINVAL);
    }
    assert_int_equal(ms_catalog_ntables(f->cat), 0);
    assert_int_equal(ms_catalog_nranges(f->cat), 0);
    assert_int_equal(ms_catalog_map_version(f->cat), v0);
    th_ms_cat_reopen(f);
    assert_int_equal(ms_catalog_ntables(f->cat), 0);
    /* The name is still free. */
    assert_int_equal(ms_catalog_create_table_rs(
                         f->cat, "acct", "nope",
                         &(struct ms_replica_spec){ok, 2, 2, 2}, NULL, NULL),
                     0);
}

/* A replicated range is not split, merged or moved yet: the catalog
 * refuses to delete, replace or move it and changes nothing. Deleting its
 * table reports every server holding a copy. */
static void test_replicated_stays(void **state)
{
    struct th_ms_cat *f = *state;
    const uint64_t servers[3] = {1, 2, 3};
    const struct ms_replica_spec rs = {servers, 3, 3, 2};
    const struct ms_table *t;
    const struct ms_range *r;
    const Rt__MoveReq *mv = NULL;
    struct ms_table_drop drop;
    uint64_t tid, rid, v0;

    assert_int_equal(
        ms_catalog_create_table_rs(f->cat, "acct", "pinned", &rs, &t, &r), 0);
    tid = t->id;
    rid = r->id;
    v0 = ms_catalog_map_version(f->cat);
    struct ms_range_put halves[2] = {
        {rid, tid, "", "m", false, 1, 2},
        {0, tid, "m", NULL, true, 1, 2},
    };
    assert_int_equal(ms_catalog_update_ranges(f->cat, halves, 2, NULL, 0, NULL),
                     RT_ENOTIMPL);
    assert_int_equal(
        ms_catalog_update_ranges(f->cat, &halves[1], 1, &rid, 1, NULL),
        RT_ENOTIMPL);
    assert_int_equal(ms_catalog_move_begin(f->cat, rid, 4, "h:4", &mv),
                     RT_ENOTIMPL);
    assert_null(mv);
    assert_int_equal(ms_catalog_nmoves(f->cat), 0);
    assert_int_equal(ms_catalog_map_version(f->cat), v0);
    assert_int_equal(ms_catalog_nranges(f->cat), 1);
    r = ms_catalog_range_find(f->cat, rid);
    assert_int_equal(r->epoch, 1);
    assert_int_equal(r->nreplicas, 3);

    assert_int_equal(ms_catalog_delete_table(f->cat, "acct", "pinned", &drop),
                     0);
    assert_int_equal(drop.table_id, tid);
    assert_int_equal(drop.nservers, 3);
    for (size_t i = 0; i < 3; i++) {
        assert_int_equal(drop.server_ids[i], servers[i]);
    }
    ms_table_drop_free(&drop);
}

/* A replication change commits only under its guard (epoch, seal_epoch):
 * the seal intent, then the failover to a secondary; a stale guard, an
 * invalid set or a deleted range write nothing, and the change survives a
 * reopen. */
static void test_range_apply_repl(void **state)
{
    struct th_ms_cat *f = *state;
    const uint64_t servers[3] = {1, 2, 3};
    const struct ms_replica_spec rs = {servers, 3, 3, 2};
    const struct ms_table *t;
    const struct ms_range *r;
    struct rt_repl_conf c, bad;
    uint64_t rid, v0;

    assert_int_equal(
        ms_catalog_create_table_rs(f->cat, "acct", "fail", &rs, &t, &r), 0);
    rid = r->id;
    ms_range_to_repl_conf(r, &c);
    assert_int_equal(c.primary_id, 1);
    assert_int_equal(c.n_members, 3);
    assert_int_equal(c.members[1].role, RT_REPL_ROLE_SECONDARY);
    assert_int_equal(c.n_isr, 3);
    v0 = ms_catalog_map_version(f->cat);

    /* The intent: seal_epoch 2 at epoch 1. */
    c.seal_epoch = 2;
    c.seal_kind = RT_REPL_SEAL_FAILOVER;
    assert_int_equal(ms_catalog_range_apply_repl(f->cat, &c, 1, 0), 0);
    assert_int_equal(ms_catalog_map_version(f->cat), v0 + 1);
    r = ms_catalog_range_find(f->cat, rid);
    assert_int_equal(r->seal_epoch, 2);
    assert_int_equal(r->epoch, 1);
    /* The same guard again is stale now. */
    assert_int_equal(ms_catalog_range_apply_repl(f->cat, &c, 1, 0), RT_ESTALE);

    /* Server 2 takes over at epoch 2; 1 stays a secondary outside the
     * ISR. */
    c.epoch = 2;
    c.primary_id = 2;
    c.primary_epoch = 2;
    c.members[0].role = RT_REPL_ROLE_SECONDARY;
    c.members[1].role = RT_REPL_ROLE_PRIMARY;
    c.isr[0] = 2;
    c.isr[1] = 3;
    c.n_isr = 2;
    c.seal_epoch = 0;
    c.seal_kind = RT_REPL_SEAL_NONE;
    bad = c;
    bad.primary_id = 3; /* not the PRIMARY member */
    assert_int_equal(ms_catalog_range_apply_repl(f->cat, &bad, 1, 2),
                     RT_EINVAL);
    bad = c;
    bad.epoch = 0;
    assert_int_equal(ms_catalog_range_apply_repl(f->cat, &bad, 1, 2),
                     RT_EINVAL);
    assert_int_equal(ms_catalog_range_apply_repl(f->cat, &c, 1, 1), RT_ESTALE);
    assert_int_equal(ms_catalog_map_version(f->cat), v0 + 1);
    assert_int_equal(ms_catalog_range_apply_repl(f->cat, &c, 1, 2), 0);

    th_ms_cat_reopen(f);
    r = ms_catalog_range_find(f->cat, rid);
    assert_non_null(r);
    assert_int_equal(r->server_id, 2);
    assert_int_equal(r->epoch, 2);
    assert_int_equal(r->primary_epoch, 2);
    assert_int_equal(r->seal_epoch, 0);
    assert_int_equal(r->nisr, 2);
    assert_int_equal(r->isr[0], 2);
    assert_int_equal(r->replicas[0].role, RT__REPL_ROLE__ROLE_SECONDARY);
    assert_true(ms_range_replicas_valid(r));

    /* A deleted table's range is never written back. */
    assert_int_equal(ms_catalog_delete_table(f->cat, "acct", "fail", NULL), 0);
    assert_int_equal(ms_catalog_range_apply_repl(f->cat, &c, 2, 0),
                     RT_ENOTFOUND);
    assert_int_equal(ms_catalog_nranges(f->cat), 0);
}

/* The invariants themselves: one primary equal to server_id, the ISR holds
 * it and no learner, nobody twice. */
static void test_range_replicas_valid(void **state)
{
    struct th_ms_cat *f = *state;
    const struct ms_range *cr;
    struct ms_range r;
    (void)state;
    assert_int_equal(
        ms_catalog_create_table(f->cat, "acct", "valid", 1, NULL, &cr), 0);
    r = *cr; /* a copy: replica_v still points into the catalog's range */
    r.nreplicas = 3;
    r.replicas[1].server_id = 2;
    r.replicas[1].role = RT__REPL_ROLE__ROLE_SECONDARY;
    r.replicas[2].server_id = 3;
    r.replicas[2].role = RT__REPL_ROLE__ROLE_LEARNER;
    r.nisr = 2;
    r.isr[1] = 2;
    r.rf = 3;
    r.min_insync = 2;
    assert_true(ms_range_replicas_valid(&r));
    r.isr[1] = 3; /* a learner in the ISR */
    assert_false(ms_range_replicas_valid(&r));
    r.isr[1] = 1; /* the primary twice */
    assert_false(ms_range_replicas_valid(&r));
    r.isr[1] = 2;
    r.isr[0] = 2; /* ISR without the primary (and 2 twice) */
    assert_false(ms_range_replicas_valid(&r));
    r.isr[0] = 1;
    r.replicas[2].server_id = 2; /* a server twice */
    assert_false(ms_range_replicas_valid(&r));
    r.replicas[2].server_id = 3;
    r.replicas[1].role = RT__REPL_ROLE__ROLE_PRIMARY; /* two primaries */
    assert_false(ms_range_replicas_valid(&r));
    r.replicas[1].role = RT__REPL_ROLE__ROLE_SECONDARY;
    r.server_id = 2; /* server_id is not the primary */
    assert_false(ms_range_replicas_valid(&r));
    r.server_id = 1;
    r.min_insync = 4; /* above rf */
    assert_false(ms_range_replicas_valid(&r));
    r.min_insync = 2;
    assert_true(ms_range_replicas_valid(&r));
}

/* Every open of the catalog is a new master term, durably: 1 on a new
 * catalog, then + 1 per reopen; the map version does not move with it. */
static void test_master_term(void **state)
{
    struct th_ms_cat *f = *state;
    uint64_t v = ms_catalog_map_version(f->cat);
    assert_int_equal(ms_catalog_master_term(f->cat), 1);
    th_ms_cat_reopen(f);
    assert_int_equal(ms_catalog_master_term(f->cat), 2);
    th_ms_cat_reopen(f);
    assert_int_equal(ms_catalog_master_term(f->cat), 3);
    assert_int_equal(ms_catalog_map_version(f->cat), v);
}

/* A second master on the same directory is refused. */
static void test_dir_lock(void **state)
{
    struct th_ms_cat *f = *state;
    struct ms_catalog *other = NULL;
    char errmsg[RT_ERRMSG_SIZE];
    assert_int_equal(ms_catalog_open(f->dir, &other, errmsg), RT_EIO);
    assert_null(other);
    assert_non_null(strstr(errmsg, "another master"));
}

/* The default policy picks the live, non-draining server with the fewest
 * ranges; both policies place alike; unknown names are refused. */
static void test_policy_place(void **state)
{
    (void)state;
    struct ms_policy p, none, bad;
    struct ms_server_view sv[3] = {
        {.id = 1, .up = true, .nranges = 3},
        {.id = 2, .up = false, .nranges = 0},
        {.id = 3, .up = true, .nranges = 2},
    };
    struct ms_cluster_view v = {.servers = sv, .nservers = 3};
    assert_int_equal(ms_policy_create("default", NULL, &p), 0);
    assert_int_equal(ms_policy_create("none", NULL, &none), 0);
    assert_int_equal(ms_policy_create("random", NULL, &bad), RT_EINVAL);
    assert_int_equal(ms_policy_place(&p, &v), 3);
    assert_int_equal(ms_policy_place(&none, &v), 3);
    sv[2].draining = true;
    assert_int_equal(ms_policy_place(&p, &v), 1);
    sv[2].draining = false;
    sv[0].nranges = 2;
    assert_int_equal(ms_policy_place(&p, &v), 1);
    sv[0].up = sv[2].up = false;
    assert_int_equal(ms_policy_place(&p, &v), 0);
    v.nservers = 0;
    assert_int_equal(ms_policy_place(&p, &v), 0);
    assert_int_equal(ms_policy_decide(&none, &v, NULL, 0), 0);
    ms_policy_destroy(&p);
    ms_policy_destroy(&none);
}

/* A move record is durable until committed (range -> target at the new
 * epoch, in the same transaction) or forgotten; a changed range refuses
 * the commit; draining survives a reopen. */
static void test_moves_and_draining(void **state)
{
    struct th_ms_cat *f = *state;
    const struct ms_range *r;
    const Rt__MoveReq *mv;
    uint64_t sid1, sid2, v0, rid, mid;
    char errmsg[RT_ERRMSG_SIZE];

    assert_int_equal(ms_catalog_register_server(f->cat, 0, "127.0.0.1:1", NULL,
                                                NULL, &sid1, NULL),
                     0);
    assert_int_equal(ms_catalog_register_server(f->cat, 0, "127.0.0.1:2", NULL,
                                                NULL, &sid2, NULL),
                     0);
    assert_int_equal(
        ms_catalog_create_table(f->cat, "acct", "moving", sid1, NULL, &r), 0);
    rid = r->id;
    v0 = ms_catalog_map_version(f->cat);
    assert_int_equal(ms_catalog_move_begin(f->cat, rid, sid1, "x", &mv),
                     RT_EINVAL); /* to its own owner */
    assert_int_equal(ms_catalog_move_begin(f->cat, 999, sid2, "x", &mv),
                     RT_ENOTFOUND);
    assert_int_equal(
        ms_catalog_move_begin(f->cat, rid, sid2, "127.0.0.1:2", &mv), 0);
    mid = mv->move_id;
    assert_int_equal(mv->new_epoch, 2);
    assert_int_equal(mv->range->epoch, 1);
    assert_int_equal(mv->target_server_id, sid2);
    assert_int_equal(ms_catalog_map_version(f->cat), v0); /* not a map change */
    assert_int_equal(ms_catalog_set_draining(f->cat, sid1, true), 0);
    assert_int_equal(ms_catalog_set_draining(f->cat, 77, true), RT_ENOTFOUND);

    /* Reopen: the pending move and the draining flag are back. */
    ms_catalog_close(f->cat);
    assert_int_equal(ms_catalog_open(f->dir, &f->cat, errmsg), 0);
    assert_int_equal(ms_catalog_nmoves(f->cat), 1);
    mv = ms_catalog_move_at(f->cat, 0);
    assert_int_equal(mv->move_id, mid);
    assert_string_equal(mv->target_addr, "127.0.0.1:2");
    assert_true(ms_catalog_server_find(f->cat, sid1)->draining);
    assert_false(ms_catalog_server_find(f->cat, sid2)->draining);

    /* Commit: same id and bounds, new owner and epoch, record gone. */
    assert_int_equal(ms_catalog_move_commit(f->cat, mid), 0);
    r = ms_catalog_range_find(f->cat, rid);
    assert_int_equal(r->server_id, sid2);
    assert_int_equal(r->epoch, 2);
    assert_true(r->high_inf);
    assert_int_equal(ms_catalog_nmoves(f->cat), 0);
    assert_true(ms_catalog_map_version(f->cat) > v0);
    assert_int_equal(ms_catalog_move_commit(f->cat, mid), RT_ENOTFOUND);

    /* A move whose range changed meanwhile cannot commit; forget it. */
    assert_int_equal(
        ms_catalog_move_begin(f->cat, rid, sid1, "127.0.0.1:1", &mv), 0);
    mid = mv->move_id;
    {
        struct ms_range_put p = {rid, r->table_id, "", NULL, true, sid2, 5};
        assert_int_equal(ms_catalog_update_ranges(f->cat, &p, 1, NULL, 0, NULL),
                         0);
    }
    assert_int_equal(ms_catalog_move_commit(f->cat, mid), RT_ESTALE);
    assert_int_equal(ms_catalog_nmoves(f->cat), 1);
    assert_int_equal(ms_catalog_move_forget(f->cat, mid), 0);
    assert_int_equal(ms_catalog_move_forget(f->cat, mid), RT_ENOTFOUND);
    ms_catalog_close(f->cat);
    assert_int_equal(ms_catalog_open(f->dir, &f->cat, errmsg), 0);
    assert_int_equal(ms_catalog_nmoves(f->cat), 0);
    /* Move ids are never reused. */
    assert_int_equal(
        ms_catalog_move_begin(f->cat, rid, sid1, "127.0.0.1:1", &mv), 0);
    assert_true(mv->move_id > mid);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_name_check),
        cmocka_unit_test_setup_teardown(test_create_get, setup, teardown),
        cmocka_unit_test_setup_teardown(test_clash, setup, teardown),
        cmocka_unit_test_setup_teardown(test_delete, setup, teardown),
        cmocka_unit_test_setup_teardown(test_ids_not_reused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_persistence, setup, teardown),
        cmocka_unit_test_setup_teardown(test_list_paging, setup, teardown),
        cmocka_unit_test_setup_teardown(test_list_limit_cap, setup, teardown),
        cmocka_unit_test_setup_teardown(test_servers, setup, teardown),
        cmocka_unit_test_setup_teardown(test_server_identity, setup, teardown),
        cmocka_unit_test_setup_teardown(test_server_zone_incarnation, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_update_ranges, setup, teardown),
        cmocka_unit_test_setup_teardown(test_range_key_order, setup, teardown),
        cmocka_unit_test_setup_teardown(test_range_old_record, setup, teardown),
        cmocka_unit_test_setup_teardown(test_range_replicas_follow_owner, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_range_replicas_valid, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_create_replicated, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_create_replicated_invalid, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_range_apply_repl, setup, teardown),
        cmocka_unit_test_setup_teardown(test_replicated_stays, setup, teardown),
        cmocka_unit_test_setup_teardown(test_dir_lock, setup, teardown),
        cmocka_unit_test_setup_teardown(test_master_term, setup, teardown),
        cmocka_unit_test(test_policy_place),
        cmocka_unit_test_setup_teardown(test_moves_and_draining, setup,
                                        teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
