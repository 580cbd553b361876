/* Trace recording (ms_trace_rec.h) over a real catalog and cluster state,
 * without a loop: what an attached recorder writes for each hook, a map
 * snapshot after a change, the file made only at the first attach, and a
 * write error that stops the trace (status, event) and nothing else. */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "ms_cluster.h"
#include "ms_events.h"
#include "ms_trace.h"
#include "ms_trace_rec.h"
#include "rt_err.h"
#include "th_ms.h"

/* ---- Fixture ---- */

struct fx
{
    struct th_ms_cat c;
    struct ms_cluster cl;
    struct ms_events *ev;
    char tdir[64];
    char path[128];
};

static int setup(void **state)
{
    struct fx *f = calloc(1, sizeof(*f));
    char em[RT_ERRMSG_SIZE];
    if (th_ms_cat_setup(&f->c, "test_ms_trace_rec") != 0) {
        return -1;
    }
    assert_int_equal(
        ms_catalog_create_table(f->c.cat, "acct", "first", 1, NULL, NULL), 0);
    ms_cluster_init(&f->cl, f->c.cat, 3000, 2000, NULL, NULL);
    assert_int_equal(ms_events_open(NULL, 0, &f->ev, em), 0);
    strcpy(f->tdir, "/tmp/test_ms_trace_rec.XXXXXX");
    assert_non_null(mkdtemp(f->tdir));
    snprintf(f->path, sizeof(f->path), "%s/run.rttrace", f->tdir);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fx *f = *state;
    char p[200];
    for (int i = 0; i < 3; i++) {
        snprintf(p, sizeof(p), i ? "%s.%d" : "%s", f->path, i);
        unlink(p);
    }
    rmdir(f->tdir);
    ms_events_close(f->ev);
    ms_cluster_fini(&f->cl);
    th_ms_cat_teardown(&f->c);
    free(f);
    return 0;
}

/* ---- Helpers ---- */

static const struct ms_trace_rec_info info = {
    .policy = "none",
    .tick_ms = 500,
    .load_tau_ms = 1500,
    .rf = 1,
    .min_insync = 1,
    .master_id = 2,
    .raft_term = 9,
};

/* One heartbeat of server 1 with one load of range @rid sampling @pk. */
static void heartbeat(struct ms_trace_rec *rec, uint64_t rid, const char *pk)
{
    Rt__RangeLoad l = RT__RANGE_LOAD__INIT, *lp = &l;
    Rt__HeartbeatReq hb = RT__HEARTBEAT_REQ__INIT;
    char *pks[1] = {(char *)pk};
    bool ignored = false;
    l.range_id = rid;
    l.entities = 10;
    l.interval_ms = 500;
    l.sample_pks = pks;
    l.n_sample_pks = 1;
    hb.server_id = 1;
    hb.loads = &lp;
    hb.n_loads = 1;
    ms_trace_rec_heartbeat(rec, &hb, &ignored);
}

/* The records of @path as a string of kind initials, the maps' range
 * counts in @nranges. */
static void read_back(const char *path, char *kinds, size_t *nranges)
{
    struct ms_trace_reader *r;
    Rt__TraceRecord *rec;
    char em[RT_ERRMSG_SIZE];
    size_t n = 0, m = 0;
    assert_int_equal(ms_trace_reader_open(path, &r, em), 0);
    while (ms_trace_reader_next(r, &rec, em) == 1) {
        kinds[n++] = ms_trace_record_kind(rec)[0];
        if (rec->r_case == RT__TRACE_RECORD__R_MAP) {
            nranges[m++] = rec->map->n_ranges;
        }
        if (rec->r_case == RT__TRACE_RECORD__R_HEADER) {
            assert_string_equal(rec->header->policy, "none");
            assert_int_equal(rec->header->master_id, 2);
            assert_int_equal(rec->header->raft_term, 9);
            assert_string_equal(rec->header->reason, "start");
        }
        if (rec->r_case == RT__TRACE_RECORD__R_END) {
            assert_string_equal(rec->end->reason, "shutdown");
        }
        ms_trace_record_free(rec);
    }
    kinds[n] = '\0';
    assert_false(ms_trace_reader_truncated(r));
    ms_trace_reader_close(r);
}

/* ---- Tests ---- */

/* The file appears at the first attach; every hook writes its record, a
 * map change shows as a new snapshot before the next record, and the
 * end is written at destroy. An older file is kept as FILE.1. */
static void test_hooks_and_map_changes(void **state)
{
    struct fx *f = *state;
    struct ms_trace_rec *rec;
    char em[RT_ERRMSG_SIZE], kinds[64];
    size_t nranges[8] = {0};
    struct ms_decision d = {.kind = MS_DECIDE_SPLIT, .range_id = 1};
    struct stat sb;
    FILE *old = fopen(f->path, "w");
    uint64_t id;

    fputs("older", old);
    fclose(old);
    assert_int_equal(ms_trace_rec_create(f->c.dir, f->path, &rec, em), 0);
    assert_int_equal(stat(f->path, &sb), 0);
    assert_int_equal(sb.st_size, 5); /* untouched until it leads */
    ms_trace_rec_attach(rec, &f->cl, f->ev, &info);
    assert_int_equal(stat(f->path, &sb), 0);
    assert_int_equal(stat(strcat(strcpy(kinds, f->path), ".1"), &sb), 0);
    assert_int_equal(sb.st_size, 5);

    heartbeat(rec, 1, "k1");
    ms_trace_rec_policy_call(rec, 0, 1);
    d.key = "k1";
    id = ms_trace_rec_decision(rec, &d, "policy", true, NULL);
    assert_int_equal(id, 1);
    ms_trace_rec_outcome(rec, id, "split", "done", NULL, NULL, 0, 0);
    ms_trace_rec_outcome(rec, id, "split", "refused", "x", NULL, 0, 0);
    /* A change of the map: the next record is preceded by a snapshot. */
    assert_int_equal(
        ms_catalog_create_table(f->c.cat, "acct", "second", 1, NULL, NULL), 0);
    heartbeat(rec, 1, "k1");
    {
        json_t *e = json_object();
        json_object_set_new(e, "kind", json_string("server_down"));
        ms_events_add(f->ev, e);
    }
    ms_trace_rec_detach(rec);
    /* Detached: nothing is written. */
    heartbeat(rec, 1, "k2");
    ms_trace_rec_destroy(rec);

    read_back(f->path, kinds, nranges);
    /* header, map, key k1, heartbeat, tick, decision, outcome (one), map
     * after the create, heartbeat, event, end */
    assert_string_equal(kinds, "hmkhtdomhee");
    assert_int_equal(nranges[0], 1);
    assert_int_equal(nranges[1], 2);
}

/* A write error (the file size limit here) stops the trace: the status
 * says why, a trace_stopped event is added, later hooks do nothing. */
static void test_write_error_stops_the_trace(void **state)
{
    struct fx *f = *state;
    struct ms_trace_rec *rec;
    struct rlimit old, lim;
    char em[RT_ERRMSG_SIZE], pk[160], *status, *events;

    assert_int_equal(ms_trace_rec_create(f->c.dir, f->path, &rec, em), 0);
    ms_trace_rec_attach(rec, &f->cl, f->ev, &info);
    getrlimit(RLIMIT_FSIZE, &old);
    lim = old;
    lim.rlim_cur = 8192;
    signal(SIGXFSZ, SIG_IGN);
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &lim), 0);
    /* Keys that do not compress, until zlib's buffer reaches the file. */
    for (unsigned i = 0; i < 4000; i++) {
        unsigned x = i * 2654435761u;
        for (size_t k = 0; k + 1 < sizeof(pk); k++) {
            x = x * 1103515245u + 12345u;
            pk[k] = (char)('a' + (x >> 16) % 26);
        }
        pk[sizeof(pk) - 1] = '\0';
        heartbeat(rec, 1, pk);
    }
    setrlimit(RLIMIT_FSIZE, &old);
    signal(SIGXFSZ, SIG_DFL);

    status = ms_trace_rec_status_json(rec);
    assert_non_null(strstr(status, "\"recording\":false"));
    assert_null(strstr(status, "\"error\":null"));
    free(status);
    events = ms_events_json(f->ev, 0, 0, 0);
    assert_non_null(strstr(events, "trace_stopped"));
    free(events);
    heartbeat(rec, 1, "after");
    ms_trace_rec_detach(rec);
    ms_trace_rec_destroy(rec);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_hooks_and_map_changes, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_write_error_stops_the_trace, setup,
                                        teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
