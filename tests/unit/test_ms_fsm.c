/* Unit tests: catalog commands (master/ms_cmd.h, master/ms_fsm.h): every
 * mutation is one MasterCmd; the entries a catalog proposes, applied to
 * another catalog, give the same state and the same results. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ms_catalog.h"
#include "ms_fsm.h"
#include "rt_buf.h"
#include "rt_err.h"
#include "rt_log.h"
#include "th_ms.h"

/* ---- Fixture ---- */

#define MAX_ENTRIES 4096

/* One proposed entry and what the proposer's own apply returned. */
struct entry
{
    uint8_t *buf;
    size_t len;
    int rc;        /* the mutation's result (0 or a purge count) */
    uint64_t out;  /* its main output id (see out_of), 0 when none */
    uint64_t out2; /* a second id (a range's) or 0 */
};

struct fx
{
    struct th_ms_cat a; /* the proposer */
    struct th_ms_cat b; /* the follower */
    uint64_t now_ms;    /* a's wall clock */
    struct entry e[MAX_ENTRIES];
    size_t n;
    int fail_propose; /* next proposal's result */
    int last_rc;      /* the last step's result and outputs */
    uint64_t last_out, last_out2;
    uint64_t rng;
};

static uint64_t fx_clock(void *arg)
{
    return ((struct fx *)arg)->now_ms;
}

static int fx_propose(void *ud, const uint8_t *buf, size_t len)
{
    struct fx *f = ud;
    if (f->fail_propose) {
        return f->fail_propose;
    }
    assert_true(f->n < MAX_ENTRIES);
    f->e[f->n].buf = malloc(len ? len : 1);
    memcpy(f->e[f->n].buf, buf, len);
    f->e[f->n].len = len;
    f->n++;
    return 0;
}

static int setup(void **state)
{
    struct fx *f = calloc(1, sizeof(*f));
    if (!f || th_ms_cat_setup(&f->a, "test_ms_fsm_a") != 0 ||
        th_ms_cat_setup(&f->b, "test_ms_fsm_b") != 0) {
        free(f);
        return -1;
    }
    f->now_ms = 1700000000000ull;
    ms_catalog_set_clock(f->a.cat, fx_clock, f);
    ms_catalog_set_proposer(f->a.cat, fx_propose, f);
    ms_fsm_set_self(f->a.cat, 1, 0xa1);
    ms_fsm_set_self(f->b.cat, 2, 0xb2);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fx *f = *state;
    for (size_t i = 0; i < f->n; i++) {
        free(f->e[i].buf);
    }
    th_ms_cat_teardown(&f->a);
    th_ms_cat_teardown(&f->b);
    free(f);
    return 0;
}

/* ---- Helpers ---- */

static uint64_t rnd(struct fx *f, uint64_t n)
{
    /* xorshift64*: the same seed gives the same run. */
    f->rng ^= f->rng >> 12;
    f->rng ^= f->rng << 25;
    f->rng ^= f->rng >> 27;
    return (f->rng * 0x2545F4914F6CDD1Dull) % n;
}

static const char *const names[] = {"alpha", "Bravo", "charlie",
                                    "ALPHA", "delta", "1bad"};
#define NNAMES (sizeof(names) / sizeof(names[0]))

static const struct ms_range *some_range(struct fx *f, struct ms_catalog *cat)
{
    size_t n = ms_catalog_nranges(cat);
    return n ? ms_catalog_range_at(cat, rnd(f, n)) : NULL;
}

/* Records the outputs of the mutation that just ran on a, if it was
 * proposed (@before: entries before it). */
static void note(struct fx *f,
                 size_t before,
                 int rc,
                 uint64_t out,
                 uint64_t out2)
{
    f->last_rc = rc;
    f->last_out = out;
    f->last_out2 = out2;
    if (f->n == before) {
        return; /* a failed guard or a no-op: nothing proposed */
    }
    assert_int_equal(f->n, before + 1);
    assert_true(rc >= 0);
    f->e[before].rc = rc;
    f->e[before].out = out;
    f->e[before].out2 = out2;
}

/* One random mutation of a random kind on a, with arguments drawn so that
 * guards fail now and then. */
static void one_step(struct fx *f, struct ms_catalog *cat)
{
    size_t before = f->n;
    const struct ms_range *r = some_range(f, cat);
    int rc;

    switch (rnd(f, 16)) {
        case 0: {
            static const uint8_t inc[2][MS_INCARNATION_SIZE] = {{1}, {2}};
            static const char *const addrs[] = {"h1:1", "h2:1", "h3:1", ""};
            uint64_t id = 0;
            bool changed;
            uint64_t pick = rnd(f, 3);
            rc = ms_catalog_register_server(
                cat, rnd(f, 5), addrs[rnd(f, 4)], rnd(f, 2) ? "z1" : NULL,
                pick == 2 ? NULL : inc[pick], &id, &changed);
            note(f, before, rc, id, 0);
            break;
        }
        case 1:
        case 2: {
            uint64_t servers[3] = {1 + rnd(f, 3), 1 + rnd(f, 3), 1 + rnd(f, 3)};
            const struct ms_replica_spec rs = {servers, 1 + rnd(f, 3), 3,
                                               (uint32_t)(1 + rnd(f, 2))};
            const struct ms_table *t = NULL;
            const struct ms_range *nr = NULL;
            rc = ms_catalog_create_table_rs(cat, "acct", names[rnd(f, NNAMES)],
                                            &rs, &t, &nr);
            note(f, before, rc, t ? t->id : 0, nr ? nr->id : 0);
            break;
        }
        case 3: {
            struct ms_table_drop drop = {0};
            ms_catalog_set_delete_grace(cat, rnd(f, 2) ? 1000 : 0);
            rc = ms_catalog_delete_table(cat, "acct", names[rnd(f, NNAMES)],
                                         &drop);
            note(f, before, rc, drop.table_id, drop.nservers);
            ms_table_drop_free(&drop);
            break;
        }
        case 4:
            rc = ms_catalog_purge_tombstones(cat);
            note(f, before, rc, 0, 0);
            break;
        case 5: {
            /* An RF 1 range handed to another server, or a new range. */
            struct ms_range_put p = {0};
            uint64_t id = 0, del = 1 + rnd(f, 20);
            if (!r) {
                break;
            }
            p.id = rnd(f, 2) ? r->id : 0;
            p.table_id = r->table_id;
            p.low = r->low;
            p.high = r->high_inf ? NULL : r->high;
            p.high_inf = r->high_inf;
            p.server_id = 1 + rnd(f, 3);
            p.epoch = r->epoch + 1;
            rc = ms_catalog_update_ranges(cat, &p, 1, &del, rnd(f, 2), &id);
            note(f, before, rc, id, 0);
            break;
        }
        case 6: {
            struct rt_repl_conf c;
            if (!r) {
                break;
            }
            ms_range_to_repl_conf(r, &c);
            c.epoch++;
            c.primary_epoch = c.epoch;
            rc = ms_catalog_range_apply_repl(cat, &c, r->epoch - rnd(f, 2),
                                             r->seal_epoch);
            note(f, before, rc, 0, 0);
            break;
        }
        case 7: {
            uint64_t ids[2] = {0, 0};
            static const char *const keys[] = {"m", "", "c", NULL};
            if (!r) {
                break;
            }
            rc = ms_catalog_split_repl(cat, r->id, r->epoch - rnd(f, 2),
                                       keys[rnd(f, 4)], ids);
            note(f, before, rc, ids[0], ids[1]);
            break;
        }
        case 8: {
            const struct ms_range *b = some_range(f, cat);
            uint64_t id = 0;
            if (!r || !b) {
                break;
            }
            /* Mostly r's right neighbour, so that merges do happen. */
            for (size_t i = 0; rnd(f, 4) && i < ms_catalog_nranges(cat); i++) {
                const struct ms_range *x = ms_catalog_range_at(cat, i);
                if (x->table_id == r->table_id && !r->high_inf &&
                    strcmp(x->low, r->high) == 0) {
                    b = x;
                    break;
                }
            }
            rc = ms_catalog_merge_repl(cat, r->id, r->epoch, b->id, b->epoch,
                                       &id);
            note(f, before, rc, id, 0);
            break;
        }
        case 9:
            rc = ms_catalog_bump_version(cat);
            note(f, before, rc, 0, 0);
            break;
        case 10: {
            struct ms_acl_entry e = {"id1", true, "2024-01-01", NULL,
                                     rnd(f, 3) ? "rw" : "x"};
            rc = ms_catalog_set_acl(cat, "acct", names[rnd(f, NNAMES)], &e,
                                    rnd(f, 2));
            note(f, before, rc, 0, 0);
            break;
        }
        case 11: {
            Rt__ServiceProps up = RT__SERVICE_PROPS__INIT;
            Rt__CorsRules cors = RT__CORS_RULES__INIT;
            Rt__CorsRule rule = RT__CORS_RULE__INIT;
            Rt__CorsRule *rules[MS_CORS_MAX + 1];
            for (size_t i = 0; i <= MS_CORS_MAX; i++) {
                rules[i] = &rule;
            }
            cors.n_rules = rnd(f, MS_CORS_MAX + 2);
            cors.rules = rules;
            up.cors = &cors;
            rc = ms_catalog_set_props(cat, rnd(f, 4) ? "acct" : "", &up);
            note(f, before, rc, 0, 0);
            break;
        }
        case 12:
            rc = ms_catalog_set_draining(cat, rnd(f, 5), rnd(f, 2));
            note(f, before, rc, 0, 0);
            break;
        case 13: {
            const Rt__MoveReq *mv = NULL;
            if (!r) {
                break;
            }
            rc = ms_catalog_move_begin(cat, r->id, 1 + rnd(f, 3),
                                       rnd(f, 5) ? "h9:1" : "", &mv);
            note(f, before, rc, mv ? mv->move_id : 0, 0);
            break;
        }
        case 14: {
            size_t n = ms_catalog_nmoves(cat);
            uint64_t id = n && rnd(f, 4)
                              ? ms_catalog_move_at(cat, rnd(f, n))->move_id
                              : 99;
            rc = rnd(f, 2) ? ms_catalog_move_commit(cat, id)
                           : ms_catalog_move_forget(cat, id);
            note(f, before, rc, 0, 0);
            break;
        }
        default: {
            const struct ms_leader_addrs addrs = {"r:1", "h:2", NULL};
            rc =
                ms_catalog_leader_start(cat, rnd(f, 40), 1 + rnd(f, 3), &addrs);
            note(f, before, rc, 0, 0);
            break;
        }
    }
}

/* The ids an entry's result names, as note() recorded them on a. */
static void outs_of(const struct ms_cmd_result *res,
                    uint64_t *out,
                    uint64_t *out2)
{
    *out = 0;
    *out2 = 0;
    if (res->table) {
        *out = res->table->id;
        *out2 = res->range->id;
    } else if (res->drop.table_id) {
        *out = res->drop.table_id;
        *out2 = res->drop.nservers;
    } else if (res->move) {
        *out = res->move->move_id;
    } else if (res->nids) {
        *out = res->ids[0];
        *out2 = res->nids == 2 ? res->ids[1] : 0;
    } else {
        *out = res->id;
    }
}

/* Runs @steps random mutations on a from @seed. */
static void run(struct fx *f, uint64_t seed, int steps)
{
    f->rng = seed;
    for (int i = 0; i < steps; i++) {
        f->now_ms += rnd(f, 700);
        one_step(f, f->a.cat);
    }
}

/* ---- Tests ---- */

/* The entries one catalog proposed, applied to another, give the same
 * catalog and, entry by entry, the same results. */
static void test_replay_same_state(void **state)
{
    struct fx *f = *state;
    size_t seen[32] = {0};
    run(f, 0x5eed1234, 1500);
    for (size_t i = 0; i < f->n; i++) {
        Rt__MasterCmd *cmd =
            rt__master_cmd__unpack(NULL, f->e[i].len, f->e[i].buf);
        assert_non_null(cmd);
        assert_true(cmd->cmd_case < 32);
        seen[cmd->cmd_case]++;
        rt__master_cmd__free_unpacked(cmd, NULL);
    }
    /* Every kind of mutation changed state at least once. */
    for (int c = RT__MASTER_CMD__CMD_CREATE_TABLE;
         c <= RT__MASTER_CMD__CMD_LEADER_START; c++) {
        if (!seen[c]) {
            print_error("command %d never proposed\n", c);
        }
        assert_true(seen[c] > 0);
    }
    for (size_t i = 0; i < f->n; i++) {
        struct ms_cmd_result res;
        uint64_t out, out2;
        assert_int_equal(
            ms_fsm_apply_committed(f->b.cat, f->e[i].buf, f->e[i].len, &res),
            0);
        assert_false(res.skipped);
        assert_true(res.changed);
        assert_int_equal(res.rc, f->e[i].rc);
        outs_of(&res, &out, &out2);
        assert_int_equal(out, f->e[i].out);
        assert_int_equal(out2, f->e[i].out2);
        ms_cmd_result_free(&res);
    }
    assert_int_equal(ms_catalog_digest(f->a.cat), ms_catalog_digest(f->b.cat));
    assert_int_equal(ms_catalog_map_version(f->a.cat),
                     ms_catalog_map_version(f->b.cat));
    assert_int_equal(ms_catalog_ntables(f->a.cat),
                     ms_catalog_ntables(f->b.cat));
    assert_int_equal(ms_catalog_nranges(f->a.cat),
                     ms_catalog_nranges(f->b.cat));
    /* What b holds on disk is what it shows. */
    th_ms_cat_reopen(&f->b);
    ms_fsm_set_self(f->b.cat, 2, 0xb3);
    assert_int_not_equal(ms_catalog_digest(f->b.cat), 0);
}

/* The same calls on two catalogs in the same state give the same results,
 * refusals included: no guard depends on anything but the state and the
 * command (b has no proposer, a's clock). */
static void test_lockstep_same_results(void **state)
{
    struct fx *f = *state;
    ms_catalog_set_clock(f->b.cat, fx_clock, f);
    f->rng = 0xfeed;
    for (int i = 0; i < 600; i++) {
        uint64_t rng, out, out2;
        int rc;
        f->now_ms += rnd(f, 700);
        rng = f->rng;
        one_step(f, f->a.cat);
        rc = f->last_rc;
        out = f->last_out;
        out2 = f->last_out2;
        f->rng = rng;
        one_step(f, f->b.cat);
        assert_int_equal(f->last_rc, rc);
        assert_int_equal(f->last_out, out);
        assert_int_equal(f->last_out2, out2);
    }
    assert_int_equal(ms_catalog_digest(f->a.cat), ms_catalog_digest(f->b.cat));
}

/* Its own committed entries are skipped by the catalog that proposed
 * them (it applied them when proposing), in order; one out of order is
 * fatal. */
static void test_own_entries_skipped(void **state)
{
    struct fx *f = *state;
    uint64_t digest;
    struct ms_cmd_result res;
    run(f, 42, 300);
    assert_true(f->n > 20);
    digest = ms_catalog_digest(f->a.cat);
    for (size_t i = 0; i < f->n; i++) {
        assert_int_equal(
            ms_fsm_apply_committed(f->a.cat, f->e[i].buf, f->e[i].len, &res),
            0);
        assert_true(res.skipped);
        ms_cmd_result_free(&res);
    }
    assert_int_equal(ms_catalog_digest(f->a.cat), digest);
    assert_int_equal(
        ms_fsm_apply_committed(f->a.cat, f->e[0].buf, f->e[0].len, &res),
        RT_EINTERNAL);
    ms_cmd_result_free(&res);
    /* Not a MasterCmd at all. */
    assert_int_equal(
        ms_fsm_apply(f->b.cat, (const uint8_t *)"\xff\xff", 2, &res),
        RT_ECORRUPT);
    ms_cmd_result_free(&res);
}

/* Failed guards and no-ops are not proposed; a proposer's error is the
 * mutation's. */
static void test_proposer(void **state)
{
    struct fx *f = *state;
    uint64_t id;
    bool changed;
    assert_int_equal(
        ms_catalog_create_table(f->a.cat, "acct", "alpha", 1, NULL, NULL), 0);
    assert_int_equal(f->n, 1);
    assert_int_equal(
        ms_catalog_create_table(f->a.cat, "acct", "ALPHA", 1, NULL, NULL),
        RT_ETABLEEXISTS);
    assert_int_equal(ms_catalog_register_server(f->a.cat, 0, "h:1", NULL, NULL,
                                                &id, &changed),
                     0);
    assert_int_equal(f->n, 2);
    assert_int_equal(ms_catalog_register_server(f->a.cat, id, "h:1", NULL, NULL,
                                                &id, &changed),
                     0);
    assert_false(changed);
    assert_int_equal(ms_catalog_purge_tombstones(f->a.cat), 0);
    assert_int_equal(ms_catalog_set_draining(f->a.cat, id, false), 0);
    assert_int_equal(f->n, 2);
    f->fail_propose = RT_EIO;
    assert_int_equal(ms_catalog_bump_version(f->a.cat), RT_EIO);
    assert_int_equal(f->n, 2);
    f->fail_propose = 0;
    /* Without a proposer: today's local catalog. */
    ms_catalog_set_proposer(f->a.cat, NULL, NULL);
    assert_int_equal(ms_catalog_bump_version(f->a.cat), 0);
    assert_int_equal(f->n, 2);
}

/* LEADER_START only raises the term; with NO_TERM_BUMP only it does. */
static void test_leader_start_monotonic(void **state)
{
    struct fx *f = *state;
    char errmsg[RT_ERRMSG_SIZE];
    const struct ms_leader_addrs addrs = {"r:1", "h:1", "t:1"};
    struct ms_catalog *cat;
    const Rt__LeaderStartCmd *ls;
    ms_catalog_close(f->b.cat);
    f->b.cat = NULL;
    assert_int_equal(
        ms_catalog_open_flags(f->b.dir, MS_CATALOG_NO_TERM_BUMP, &cat, errmsg),
        0);
    assert_int_equal(ms_catalog_master_term(cat), 1); /* the setup's open */
    assert_null(ms_catalog_leader(cat));
    assert_int_equal(ms_catalog_leader_start(cat, 5, 2, &addrs), 0);
    assert_int_equal(ms_catalog_master_term(cat), 5);
    assert_int_equal(ms_catalog_leader_start(cat, 3, 3, NULL), RT_ESTALE);
    assert_int_equal(ms_catalog_leader_start(cat, 5, 3, NULL), RT_ESTALE);
    ls = ms_catalog_leader(cat);
    assert_non_null(ls);
    assert_int_equal(ls->leader_id, 2);
    assert_string_equal(ls->http_addr, "h:1");
    assert_int_equal(ms_catalog_master_term(cat), 5);
    ms_catalog_close(cat);
    assert_int_equal(
        ms_catalog_open_flags(f->b.dir, MS_CATALOG_NO_TERM_BUMP, &cat, errmsg),
        0);
    assert_int_equal(ms_catalog_master_term(cat), 5);
    assert_int_equal(ms_catalog_leader(cat)->leader_id, 2);
    ms_catalog_close(cat);
    th_ms_cat_reopen(&f->b); /* ms_catalog_open: + 1 as today */
    assert_int_equal(ms_catalog_master_term(f->b.cat), 6);
    assert_int_equal(ms_catalog_leader_start(f->b.cat, 7, 4, &addrs), 0);
    assert_int_equal(ms_catalog_master_term(f->b.cat), 7);
    assert_int_equal(ms_catalog_leader(f->b.cat)->leader_id, 4);
}

/* Reads of two catalogs agree: tables, ranges, servers, moves, counters,
 * the leader. */
static void assert_same_reads(struct ms_catalog *x, struct ms_catalog *y)
{
    assert_int_equal(ms_catalog_map_version(x), ms_catalog_map_version(y));
    assert_int_equal(ms_catalog_master_term(x), ms_catalog_master_term(y));
    assert_int_equal(ms_catalog_ntables(x), ms_catalog_ntables(y));
    for (size_t i = 0; i < ms_catalog_ntables(x); i++) {
        const struct ms_table *a = ms_catalog_table_at(x, i);
        const struct ms_table *b = ms_catalog_table_at(y, i);
        assert_int_equal(a->id, b->id);
        assert_string_equal(a->name, b->name);
        assert_int_equal(a->nacl, b->nacl);
    }
    assert_int_equal(ms_catalog_nranges(x), ms_catalog_nranges(y));
    for (size_t i = 0; i < ms_catalog_nranges(x); i++) {
        const struct ms_range *a = ms_catalog_range_at(x, i);
        const struct ms_range *b = ms_catalog_range_at(y, i);
        assert_int_equal(a->id, b->id);
        assert_int_equal(a->epoch, b->epoch);
        assert_int_equal(a->server_id, b->server_id);
        assert_int_equal(a->nreplicas, b->nreplicas);
        assert_string_equal(a->low, b->low);
    }
    assert_int_equal(ms_catalog_nservers(x), ms_catalog_nservers(y));
    assert_int_equal(ms_catalog_nmoves(x), ms_catalog_nmoves(y));
    assert_int_equal(ms_catalog_nprops(x), ms_catalog_nprops(y));
    assert_int_equal(ms_catalog_ntombstones(x), ms_catalog_ntombstones(y));
    assert_int_equal(ms_catalog_leader(x) != NULL,
                     ms_catalog_leader(y) != NULL);
}

/* A snapshot restored into another catalog gives the same catalog, on
 * disk too; a truncated or garbled one is refused and changes nothing. */
static void test_snapshot_restore(void **state)
{
    struct fx *f = *state;
    struct rt_buf snap = RT_BUF_INIT, other = RT_BUF_INIT;
    uint64_t digest;
    run(f, 7, 800);
    assert_int_equal(ms_catalog_snapshot(f->a.cat, &snap), 0);
    /* b holds something else first: restore replaces all of it. */
    assert_int_equal(
        ms_catalog_create_table(f->b.cat, "zz", "gone", 9, NULL, NULL), 0);
    assert_int_equal(ms_catalog_restore(f->b.cat, snap.data, snap.len), 0);
    assert_int_equal(ms_catalog_digest(f->a.cat), ms_catalog_digest(f->b.cat));
    assert_same_reads(f->a.cat, f->b.cat);
    assert_null(ms_catalog_table_find(f->b.cat, "zz", "gone"));
    th_ms_cat_reopen(&f->b); /* + 1 master term: compare the rest */
    assert_int_equal(ms_catalog_ntables(f->b.cat),
                     ms_catalog_ntables(f->a.cat));
    assert_int_equal(ms_catalog_nranges(f->b.cat),
                     ms_catalog_nranges(f->a.cat));
    assert_int_equal(ms_catalog_map_version(f->b.cat),
                     ms_catalog_map_version(f->a.cat));

    /* Bad streams: b as it is stays so. */
    assert_int_equal(
        ms_catalog_create_table(f->b.cat, "zz", "kept", 9, NULL, NULL), 0);
    digest = ms_catalog_digest(f->b.cat);
    assert_int_equal(ms_catalog_restore(f->b.cat, snap.data, snap.len - 1),
                     RT_ECORRUPT);
    assert_int_equal(ms_catalog_restore(f->b.cat, snap.data, snap.len / 2),
                     RT_ECORRUPT);
    assert_int_equal(ms_catalog_restore(f->b.cat, snap.data, 3), RT_ECORRUPT);
    snap.data[snap.len / 2] ^= 0x40;
    assert_int_equal(ms_catalog_restore(f->b.cat, snap.data, snap.len),
                     RT_ECORRUPT);
    snap.data[snap.len / 2] ^= 0x40;
    rt_buf_append(&snap, "x", 1);
    assert_int_equal(ms_catalog_restore(f->b.cat, snap.data, snap.len),
                     RT_ECORRUPT);
    assert_int_equal(ms_catalog_digest(f->b.cat), digest);
    assert_non_null(ms_catalog_table_find(f->b.cat, "zz", "kept"));

    /* Two snapshots concatenated are not one. */
    snap.len--;
    assert_int_equal(ms_catalog_snapshot(f->a.cat, &other), 0);
    rt_buf_append(&snap, other.data, other.len);
    assert_int_equal(ms_catalog_restore(f->b.cat, snap.data, snap.len),
                     RT_ECORRUPT);
    assert_int_equal(ms_catalog_digest(f->b.cat), digest);
    rt_buf_free(&snap);
    rt_buf_free(&other);
}

/* IMPORT: a catalog kept before the log replaces an empty one (the
 * entry replayed elsewhere gives the same catalog); a catalog that holds
 * anything refuses it and stays as it is. */
static void test_import(void **state)
{
    struct fx *f = *state;
    struct rt_buf snap = RT_BUF_INIT;
    uint64_t digest;

    run(f, 11, 300);
    assert_int_equal(ms_catalog_snapshot(f->a.cat, &snap), 0);
    assert_true(ms_catalog_ntables(f->a.cat) > 0);
    /* b is empty: it takes the import, and so does a replay of it. */
    assert_int_equal(ms_catalog_import(f->b.cat, snap.data, snap.len), 0);
    assert_int_equal(ms_catalog_ntables(f->b.cat),
                     ms_catalog_ntables(f->a.cat));
    assert_int_equal(ms_catalog_nranges(f->b.cat),
                     ms_catalog_nranges(f->a.cat));
    assert_int_equal(ms_catalog_digest(f->a.cat), ms_catalog_digest(f->b.cat));
    /* Not empty any more: refused, nothing written. */
    digest = ms_catalog_digest(f->b.cat);
    assert_int_equal(ms_catalog_import(f->b.cat, snap.data, snap.len),
                     RT_EEXIST);
    assert_int_equal(ms_catalog_digest(f->b.cat), digest);
    /* A bad stream into an empty catalog: refused as corrupt. */
    {
        struct th_ms_cat c;
        assert_int_equal(th_ms_cat_setup(&c, "test_ms_fsm_c"), 0);
        assert_int_equal(ms_catalog_import(c.cat, snap.data, snap.len - 1),
                         RT_ECORRUPT);
        assert_int_equal(ms_catalog_ntables(c.cat), 0);
        th_ms_cat_teardown(&c);
    }
    rt_buf_free(&snap);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_replay_same_state, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_lockstep_same_results, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_own_entries_skipped, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_proposer, setup, teardown),
        cmocka_unit_test_setup_teardown(test_leader_start_monotonic, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_snapshot_restore, setup, teardown),
        cmocka_unit_test_setup_teardown(test_import, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
