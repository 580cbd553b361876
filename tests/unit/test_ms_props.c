/* Unit tests: the master catalog's access and account state
 * (master/ms_catalog.h): table ACLs, per-account service properties and
 * the deletion grace period (tombstones), without RPC. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ms_catalog.h"
#include "rt.pb-c.h"
#include "rt_err.h"
#include "rt_log.h"
#include "th_ms.h"

/* ---- Fixture ---- */

struct fx
{
    struct th_ms_cat c; /* catalog in a temporary directory */
    uint64_t now_ms;    /* the fake wall clock */
};

static uint64_t fx_clock(void *arg)
{
    return ((struct fx *)arg)->now_ms;
}

/* (Re)opens the catalog with the fake clock and @grace_ms. */
static void fx_reopen(struct fx *f, uint64_t grace_ms)
{
    th_ms_cat_reopen(&f->c);
    ms_catalog_set_clock(f->c.cat, fx_clock, f);
    ms_catalog_set_delete_grace(f->c.cat, grace_ms);
}

static int setup(void **state)
{
    struct fx *f = calloc(1, sizeof(*f));
    if (!f || th_ms_cat_setup(&f->c, "test_ms_props") != 0) {
        free(f);
        return -1;
    }
    f->now_ms = 1700000000000ull;
    fx_reopen(f, 0);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fx *f = *state;
    th_ms_cat_teardown(&f->c);
    free(f);
    return 0;
}

/* ---- Helpers ---- */

static void create(struct fx *f, const char *account, const char *name)
{
    assert_int_equal(
        ms_catalog_create_table(f->c.cat, account, name, 1, NULL, NULL), 0);
}

static struct ms_acl_entry entry(const char *id,
                                 const char *start,
                                 const char *expiry,
                                 const char *perm)
{
    struct ms_acl_entry e;
    e.id = (char *)id;
    e.has_policy = start || expiry || perm;
    e.start = (char *)(start ? start : "");
    e.expiry = (char *)(expiry ? expiry : "");
    e.permission = (char *)(perm ? perm : "");
    return e;
}

static Rt__CorsRule rule(const char *origins, const char *methods)
{
    Rt__CorsRule r = RT__CORS_RULE__INIT;
    r.allowed_origins = (char *)origins;
    r.allowed_methods = (char *)methods;
    r.allowed_headers = "x-ms-meta-*";
    r.exposed_headers = "";
    r.max_age = 60;
    return r;
}

/* ---- Tests: ACL ---- */

/* A set ACL is stored with the table, raises the map version and survives
 * a reopen with every field (absent AccessPolicy included). */
static void test_acl_set_persist(void **state)
{
    struct fx *f = *state;
    struct ms_acl_entry acl[3];
    const struct ms_table *t;
    uint64_t v;
    create(f, "acct", "People");
    v = ms_catalog_map_version(f->c.cat);
    acl[0] = entry("p1", "2024-01-01T00:00:00.0000000Z",
                   "2024-02-01T00:00:00.0000000Z", "raud");
    acl[1] = entry("p2", NULL, NULL, "r");
    acl[2] = entry("p3", NULL, NULL, NULL);
    assert_int_equal(ms_catalog_set_acl(f->c.cat, "acct", "PEOPLE", acl, 3), 0);
    assert_int_equal(ms_catalog_map_version(f->c.cat), v + 1);
    fx_reopen(f, 0);
    t = ms_catalog_table_find(f->c.cat, "acct", "people");
    assert_non_null(t);
    assert_int_equal(t->nacl, 3);
    assert_string_equal(t->acl[0].id, "p1");
    assert_true(t->acl[0].has_policy);
    assert_string_equal(t->acl[0].start, "2024-01-01T00:00:00.0000000Z");
    assert_string_equal(t->acl[0].expiry, "2024-02-01T00:00:00.0000000Z");
    assert_string_equal(t->acl[0].permission, "raud");
    assert_string_equal(t->acl[1].id, "p2");
    assert_string_equal(t->acl[1].start, "");
    assert_string_equal(t->acl[1].permission, "r");
    assert_string_equal(t->acl[2].id, "p3");
    assert_false(t->acl[2].has_policy);
    /* An empty ACL clears it, durably. */
    assert_int_equal(ms_catalog_set_acl(f->c.cat, "acct", "people", NULL, 0),
                     0);
    fx_reopen(f, 0);
    assert_int_equal(ms_catalog_table_find(f->c.cat, "acct", "people")->nacl,
                     0);
}

/* The documented limits (docs/table-api-spec.md §3.5, §9) are RT_EXML and
 * change nothing; a missing table is RT_ETABLENOTFOUND. */
static void test_acl_limits(void **state)
{
    struct fx *f = *state;
    struct ms_acl_entry acl[6];
    char id64[65], id65[66];
    uint64_t v;
    create(f, "acct", "Limits");
    memset(id64, 'a', 64);
    id64[64] = '\0';
    memset(id65, 'b', 65);
    id65[65] = '\0';
    for (int i = 0; i < 6; i++) {
        static const char *ids[] = {"a", "b", "c", "d", "e", "f"};
        acl[i] = entry(ids[i], NULL, NULL, "r");
    }
    v = ms_catalog_map_version(f->c.cat);
    assert_int_equal(ms_catalog_set_acl(f->c.cat, "acct", "limits", acl, 6),
                     RT_EXML);
    assert_int_equal(ms_catalog_set_acl(f->c.cat, "acct", "limits", acl, 5), 0);
    assert_int_equal(ms_catalog_map_version(f->c.cat), v + 1);
    v++;
    acl[0] = entry(id65, NULL, NULL, "r");
    assert_int_equal(ms_catalog_set_acl(f->c.cat, "acct", "limits", acl, 1),
                     RT_EXML);
    acl[0] = entry(id64, NULL, NULL, "r");
    assert_int_equal(ms_catalog_set_acl(f->c.cat, "acct", "limits", acl, 1), 0);
    v++;
    acl[0] = entry("", NULL, NULL, "r");
    assert_int_equal(ms_catalog_set_acl(f->c.cat, "acct", "limits", acl, 1),
                     RT_EXML);
    static const char *bad[] = {"w", "ar", "rr", "dr", "raudx", "R"};
    static const char *good[] = {"r",  "a",   "u",    "d", "ra",
                                 "rd", "aud", "raud", ""};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        acl[0] = entry("x", NULL, NULL, bad[i]);
        assert_int_equal(ms_catalog_set_acl(f->c.cat, "acct", "limits", acl, 1),
                         RT_EXML);
    }
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        acl[0] = entry("x", NULL, NULL, good[i]);
        assert_int_equal(ms_catalog_set_acl(f->c.cat, "acct", "limits", acl, 1),
                         0);
        v++;
    }
    acl[0] = entry("same", NULL, NULL, "r");
    acl[1] = entry("same", NULL, NULL, "a");
    assert_int_equal(ms_catalog_set_acl(f->c.cat, "acct", "limits", acl, 2),
                     RT_EXML);
    assert_int_equal(ms_catalog_map_version(f->c.cat), v);
    assert_int_equal(ms_catalog_set_acl(f->c.cat, "acct", "nosuch", acl, 1),
                     RT_ETABLENOTFOUND);
    assert_int_equal(ms_catalog_set_acl(f->c.cat, "other", "limits", acl, 1),
                     RT_ETABLENOTFOUND);
}

/* A deleted and re-created table starts with no ACL. */
static void test_acl_dies_with_table(void **state)
{
    struct fx *f = *state;
    struct ms_acl_entry acl[1] = {entry("p", NULL, NULL, "r")};
    create(f, "acct", "Short");
    assert_int_equal(ms_catalog_set_acl(f->c.cat, "acct", "short", acl, 1), 0);
    assert_int_equal(ms_catalog_delete_table(f->c.cat, "acct", "short", NULL),
                     0);
    create(f, "acct", "Short");
    assert_int_equal(ms_catalog_table_find(f->c.cat, "acct", "short")->nacl, 0);
}

/* ---- Tests: service properties ---- */

/* Sections present in an update replace the stored ones, absent sections
 * are kept, an empty Cors clears the rules; all of it survives a reopen.
 * Never-set accounts have no properties. */
static void test_props_merge_persist(void **state)
{
    struct fx *f = *state;
    Rt__ServiceProps up = RT__SERVICE_PROPS__INIT;
    Rt__LoggingProps log = RT__LOGGING_PROPS__INIT;
    Rt__RetentionPolicy ret = RT__RETENTION_POLICY__INIT;
    Rt__MetricsProps hour = RT__METRICS_PROPS__INIT;
    Rt__CorsRules cors = RT__CORS_RULES__INIT;
    Rt__CorsRule r1 = rule("http://a.com", "GET,PUT");
    Rt__CorsRule r2 = rule("*", "GET");
    Rt__CorsRule *rules[2] = {&r1, &r2};
    const Rt__ServiceProps *p;
    uint64_t v = ms_catalog_map_version(f->c.cat);

    assert_null(ms_catalog_props(f->c.cat, "acct"));
    log.version = "1.0";
    log.log_read = true;
    ret.enabled = true;
    ret.days = 7;
    log.retention = &ret;
    up.logging = &log;
    assert_int_equal(ms_catalog_set_props(f->c.cat, "acct", &up), 0);
    assert_int_equal(ms_catalog_map_version(f->c.cat), v + 1);

    /* Only CORS and hour metrics now: logging is kept. */
    memset(&up, 0, sizeof(up));
    rt__service_props__init(&up);
    hour.version = "1.0";
    hour.enabled = true;
    hour.include_apis = true;
    up.hour_metrics = &hour;
    cors.n_rules = 2;
    cors.rules = rules;
    up.cors = &cors;
    assert_int_equal(ms_catalog_set_props(f->c.cat, "acct", &up), 0);
    fx_reopen(f, 0);
    p = ms_catalog_props(f->c.cat, "acct");
    assert_non_null(p);
    assert_non_null(p->logging);
    assert_true(p->logging->log_read);
    assert_false(p->logging->log_write);
    assert_int_equal(p->logging->retention->days, 7);
    assert_non_null(p->hour_metrics);
    assert_true(p->hour_metrics->include_apis);
    assert_null(p->minute_metrics);
    assert_non_null(p->cors);
    assert_int_equal(p->cors->n_rules, 2);
    assert_string_equal(p->cors->rules[0]->allowed_origins, "http://a.com");
    assert_string_equal(p->cors->rules[1]->allowed_methods, "GET");
    assert_int_equal(p->cors->rules[0]->max_age, 60);
    assert_null(ms_catalog_props(f->c.cat, "other"));
    assert_int_equal(ms_catalog_nprops(f->c.cat), 1);
    assert_string_equal(ms_catalog_props_at(f->c.cat, 0)->account, "acct");

    /* An empty <Cors/> clears the rules and keeps everything else. */
    memset(&up, 0, sizeof(up));
    rt__service_props__init(&up);
    cors.n_rules = 0;
    cors.rules = NULL;
    up.cors = &cors;
    assert_int_equal(ms_catalog_set_props(f->c.cat, "acct", &up), 0);
    fx_reopen(f, 0);
    p = ms_catalog_props(f->c.cat, "acct");
    assert_non_null(p->cors);
    assert_int_equal(p->cors->n_rules, 0);
    assert_non_null(p->logging);
    assert_non_null(p->hour_metrics);
}

/* More than five CORS rules and a missing account are refused and change
 * nothing. */
static void test_props_limits(void **state)
{
    struct fx *f = *state;
    Rt__ServiceProps up = RT__SERVICE_PROPS__INIT;
    Rt__CorsRules cors = RT__CORS_RULES__INIT;
    Rt__CorsRule r = rule("*", "GET");
    Rt__CorsRule *rules[6] = {&r, &r, &r, &r, &r, &r};
    uint64_t v = ms_catalog_map_version(f->c.cat);
    cors.rules = rules;
    cors.n_rules = 6;
    up.cors = &cors;
    assert_int_equal(ms_catalog_set_props(f->c.cat, "acct", &up), RT_EXML);
    assert_int_equal(ms_catalog_set_props(f->c.cat, "", &up), RT_EINVAL);
    assert_int_equal(ms_catalog_map_version(f->c.cat), v);
    assert_null(ms_catalog_props(f->c.cat, "acct"));
    cors.n_rules = 5;
    assert_int_equal(ms_catalog_set_props(f->c.cat, "acct", &up), 0);
    assert_int_equal(ms_catalog_props(f->c.cat, "acct")->cors->n_rules, 5);
}

/* ---- Tests: deletion grace period ---- */

/* During the grace period the name (any case) cannot be created again in
 * that account (other accounts are free); once it is over, create works
 * and consumes the tombstone. */
static void test_grace_blocks_create(void **state)
{
    struct fx *f = *state;
    fx_reopen(f, 30000);
    create(f, "acct", "Orders");
    assert_int_equal(ms_catalog_delete_table(f->c.cat, "acct", "orders", NULL),
                     0);
    assert_true(ms_catalog_table_deleting(f->c.cat, "acct", "ORDERS"));
    assert_false(ms_catalog_table_deleting(f->c.cat, "other", "orders"));
    assert_int_equal(ms_catalog_ntombstones(f->c.cat), 1);
    assert_int_equal(
        ms_catalog_create_table(f->c.cat, "acct", "oRdErS", 1, NULL, NULL),
        RT_ETABLEBEINGDELETED);
    create(f, "other", "Orders");
    f->now_ms += 29999;
    assert_int_equal(
        ms_catalog_create_table(f->c.cat, "acct", "Orders", 1, NULL, NULL),
        RT_ETABLEBEINGDELETED);
    f->now_ms += 1;
    assert_false(ms_catalog_table_deleting(f->c.cat, "acct", "orders"));
    create(f, "acct", "Orders");
    assert_int_equal(ms_catalog_ntombstones(f->c.cat), 0);
}

/* Tombstones are durable: a restarted master still refuses the name until
 * the grace period (fixed at delete time) is over. */
static void test_grace_persists(void **state)
{
    struct fx *f = *state;
    fx_reopen(f, 10000);
    create(f, "acct", "Durable");
    assert_int_equal(ms_catalog_delete_table(f->c.cat, "acct", "durable", NULL),
                     0);
    fx_reopen(f, 0); /* a later grace setting does not shorten it */
    assert_int_equal(ms_catalog_ntombstones(f->c.cat), 1);
    assert_int_equal(
        ms_catalog_create_table(f->c.cat, "acct", "Durable", 1, NULL, NULL),
        RT_ETABLEBEINGDELETED);
    f->now_ms += 10000;
    fx_reopen(f, 0);
    create(f, "acct", "Durable");
}

/* Purging removes exactly the expired tombstones, durably; with no grace
 * period a delete leaves none. */
static void test_grace_purge(void **state)
{
    struct fx *f = *state;
    fx_reopen(f, 1000);
    create(f, "acct", "First");
    create(f, "acct", "Second");
    assert_int_equal(ms_catalog_delete_table(f->c.cat, "acct", "first", NULL),
                     0);
    f->now_ms += 600;
    assert_int_equal(ms_catalog_delete_table(f->c.cat, "acct", "second", NULL),
                     0);
    assert_int_equal(ms_catalog_purge_tombstones(f->c.cat), 0);
    f->now_ms += 400; /* first expires now, second in 600 ms */
    assert_int_equal(ms_catalog_purge_tombstones(f->c.cat), 1);
    assert_int_equal(ms_catalog_ntombstones(f->c.cat), 1);
    fx_reopen(f, 1000);
    assert_int_equal(ms_catalog_ntombstones(f->c.cat), 1);
    assert_true(ms_catalog_table_deleting(f->c.cat, "acct", "second"));
    f->now_ms += 600;
    assert_int_equal(ms_catalog_purge_tombstones(f->c.cat), 1);
    assert_int_equal(ms_catalog_ntombstones(f->c.cat), 0);

    fx_reopen(f, 0);
    create(f, "acct", "Third");
    assert_int_equal(ms_catalog_delete_table(f->c.cat, "acct", "third", NULL),
                     0);
    assert_int_equal(ms_catalog_ntombstones(f->c.cat), 0);
    create(f, "acct", "Third");
}

/* A name re-created after its grace period and deleted again gets one
 * fresh tombstone with a new grace period. */
static void test_grace_renew(void **state)
{
    struct fx *f = *state;
    fx_reopen(f, 1000);
    create(f, "acct", "Renew");
    assert_int_equal(ms_catalog_delete_table(f->c.cat, "acct", "renew", NULL),
                     0);
    f->now_ms += 1000;
    create(f, "acct", "RENEW");
    f->now_ms += 500;
    assert_int_equal(ms_catalog_delete_table(f->c.cat, "acct", "renew", NULL),
                     0);
    assert_int_equal(ms_catalog_ntombstones(f->c.cat), 1);
    f->now_ms += 999;
    assert_true(ms_catalog_table_deleting(f->c.cat, "acct", "Renew"));
    f->now_ms += 1;
    assert_false(ms_catalog_table_deleting(f->c.cat, "acct", "Renew"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_acl_set_persist, setup, teardown),
        cmocka_unit_test_setup_teardown(test_acl_limits, setup, teardown),
        cmocka_unit_test_setup_teardown(test_acl_dies_with_table, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_props_merge_persist, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_props_limits, setup, teardown),
        cmocka_unit_test_setup_teardown(test_grace_blocks_create, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_grace_persists, setup, teardown),
        cmocka_unit_test_setup_teardown(test_grace_purge, setup, teardown),
        cmocka_unit_test_setup_teardown(test_grace_renew, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
