/* Load trace format (ms_trace.h): every record kind written and read back,
 * PartitionKey interning, segments, a file cut short by a crash, and
 * files the reader must refuse (a newer major version, not a trace). */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <zlib.h>

#include "ms_trace.h"
#include "rt_err.h"

/* ---- Fixture ---- */

struct fx
{
    char path[64];
};

static int setup(void **state)
{
    struct fx *f = calloc(1, sizeof(*f));
    int fd;
    strcpy(f->path, "/tmp/test_ms_trace.XXXXXX");
    fd = mkstemp(f->path);
    assert_true(fd >= 0);
    close(fd);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fx *f = *state;
    unlink(f->path);
    free(f);
    return 0;
}

/* ---- Helpers ---- */

static void header(Rt__TraceHeader *h, Rt__TracePolicyConfig *pc)
{
    rt__trace_header__init(h);
    rt__trace_policy_config__init(pc);
    pc->split_eps = 2000;
    pc->merge_max_bytes = 256ull << 20;
    h->start_unix_ms = 1700000000000ull;
    h->policy = "default";
    h->policy_config = pc;
    h->tick_ms = 500;
    h->reason = "start";
}

static Rt__RangeLoad *range_load(uint64_t id, char **pks, size_t n)
{
    Rt__RangeLoad *l = calloc(1, sizeof(*l));
    rt__range_load__init(l);
    l->range_id = id;
    l->requests = 10 * id;
    l->entities = 20 * id;
    l->bytes_written = 3000;
    l->exec_us = 4000;
    l->interval_ms = 1000;
    l->throttled = 2;
    l->scanned = 7;
    l->key_count = 99;
    l->key_bytes = 12345;
    l->sample_pks = pks;
    l->n_sample_pks = n;
    return l;
}

/* Writes one segment with one record of every kind. */
static void write_all(const char *path, bool close_cleanly)
{
    struct ms_trace_writer *w;
    char em[RT_ERRMSG_SIZE];
    Rt__TraceHeader h;
    Rt__TracePolicyConfig pc;
    Rt__TraceRecord rec;
    char *pks1[] = {"a", "b", "a"};
    char *pks2[] = {"b", "c"};
    Rt__RangeLoad *loads[2];
    Rt__HeartbeatReq hb = RT__HEARTBEAT_REQ__INIT;
    bool ignored[2] = {false, true};

    assert_int_equal(ms_trace_writer_open(path, &w, em), 0);
    header(&h, &pc);
    assert_int_equal(ms_trace_writer_segment(w, 1000, &h, em), 0);

    {
        Rt__TraceMap m = RT__TRACE_MAP__INIT;
        Rt__TraceServer s = RT__TRACE_SERVER__INIT, *sp = &s;
        Rt__TraceRange r = RT__TRACE_RANGE__INIT, *rp = &r;
        uint64_t reps[] = {1, 2, 3};
        s.id = 1;
        s.zone = "z1";
        s.max_server_eps = 5000;
        s.up = true;
        r.id = 7;
        r.table_id = 3;
        r.table = "orders";
        r.low = "";
        r.high = "";
        r.high_inf = true;
        r.server_id = 1;
        r.epoch = 4;
        r.rf = 3;
        r.replicas = reps;
        r.n_replicas = 3;
        r.isr = reps;
        r.n_isr = 2;
        m.map_version = 11;
        m.servers = &sp;
        m.n_servers = 1;
        m.ranges = &rp;
        m.n_ranges = 1;
        m.cause = "start";
        rt__trace_record__init(&rec);
        rec.r_case = RT__TRACE_RECORD__R_MAP;
        rec.map = &m;
        assert_int_equal(ms_trace_writer_record(w, 1001, &rec, em), 0);
    }

    loads[0] = range_load(7, pks1, 3);
    loads[1] = range_load(8, pks2, 2);
    hb.server_id = 1;
    hb.pending = 5;
    hb.max_server_eps = 5000;
    hb.max_range_eps = 900;
    hb.loads = loads;
    hb.n_loads = 2;
    assert_int_equal(ms_trace_writer_heartbeat(w, 1500, &hb, ignored, em), 0);
    free(loads[0]);
    free(loads[1]);

    {
        Rt__TraceTick t = RT__TRACE_TICK__INIT;
        t.n = 1;
        t.ndecisions = 1;
        rt__trace_record__init(&rec);
        rec.r_case = RT__TRACE_RECORD__R_TICK;
        rec.tick = &t;
        assert_int_equal(ms_trace_writer_record(w, 1600, &rec, em), 0);
    }
    {
        Rt__TraceDecision d = RT__TRACE_DECISION__INIT;
        d.id = 1;
        d.kind = "split";
        d.origin = "policy";
        d.range_id = 7;
        d.key = "b";
        d.reason = "hot";
        d.load = 2500.5;
        d.share = 0.5;
        d.started = true;
        rt__trace_record__init(&rec);
        rec.r_case = RT__TRACE_RECORD__R_DECISION;
        rec.decision = &d;
        assert_int_equal(ms_trace_writer_record(w, 1600, &rec, em), 0);
    }
    {
        Rt__TraceOutcome o = RT__TRACE_OUTCOME__INIT;
        uint64_t nr[] = {9, 10};
        o.decision_id = 1;
        o.kind = "split";
        o.outcome = "done";
        o.new_ranges = nr;
        o.n_new_ranges = 2;
        rt__trace_record__init(&rec);
        rec.r_case = RT__TRACE_RECORD__R_OUTCOME;
        rec.outcome = &o;
        assert_int_equal(ms_trace_writer_record(w, 1700, &rec, em), 0);
    }
    {
        Rt__TraceEvent e = RT__TRACE_EVENT__INIT;
        e.seq = 42;
        e.kind = "server_down";
        e.json = "{\"kind\":\"server_down\"}";
        rt__trace_record__init(&rec);
        rec.r_case = RT__TRACE_RECORD__R_EVENT;
        rec.event = &e;
        assert_int_equal(ms_trace_writer_record(w, 1800, &rec, em), 0);
    }
    if (close_cleanly) {
        assert_int_equal(ms_trace_writer_close(w, 1900, "stop", em), 0);
    } else {
        /* A crash after a flush: what was on disk then has neither the
         * end record nor the gzip trailer. */
        size_t n = 0;
        char *copy = NULL;
        FILE *fp;
        assert_int_equal(ms_trace_writer_flush(w, em), 0);
        fp = fopen(path, "rb");
        assert_non_null(fp);
        copy = malloc(1 << 16);
        n = fread(copy, 1, 1 << 16, fp);
        fclose(fp);
        assert_int_equal(ms_trace_writer_close(w, 1900, NULL, em), 0);
        fp = fopen(path, "wb");
        fwrite(copy, 1, n, fp);
        fclose(fp);
        free(copy);
        return;
    }
}

/* Reads every record of @path into a kind sequence ("hkkm..."). */
static int read_kinds(const char *path, char *kinds, size_t cap, bool *trunc)
{
    struct ms_trace_reader *r;
    char em[RT_ERRMSG_SIZE];
    Rt__TraceRecord *rec;
    size_t n = 0;
    int rc;
    assert_int_equal(ms_trace_reader_open(path, &r, em), 0);
    while ((rc = ms_trace_reader_next(r, &rec, em)) == 1) {
        if (n + 1 < cap) {
            kinds[n++] = ms_trace_record_kind(rec)[0];
        }
        ms_trace_record_free(rec);
    }
    kinds[n] = '\0';
    *trunc = ms_trace_reader_truncated(r);
    ms_trace_reader_close(r);
    return rc;
}

static size_t file_size(const char *path)
{
    FILE *f = fopen(path, "rb");
    long n;
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    n = ftell(f);
    fclose(f);
    return (size_t)n;
}

/* ---- Tests ---- */

/* Every record kind reads back with the values written; sampled keys are
 * interned once each (a, b, c) and the heartbeat names them by id. */
static void test_round_trip(void **state)
{
    struct fx *f = *state;
    struct ms_trace_reader *r;
    char em[RT_ERRMSG_SIZE];
    Rt__TraceRecord *rec;
    unsigned major, minor;

    write_all(f->path, true);
    assert_int_equal(ms_trace_reader_open(f->path, &r, em), 0);
    ms_trace_reader_version(r, &major, &minor);
    assert_int_equal(major, MS_TRACE_MAJOR);
    assert_int_equal(minor, MS_TRACE_MINOR);

    assert_int_equal(ms_trace_reader_next(r, &rec, em), 1);
    assert_int_equal(rec->r_case, RT__TRACE_RECORD__R_HEADER);
    assert_int_equal(rec->t_ms, 0);
    assert_int_equal(rec->header->segment, 0);
    assert_string_equal(rec->header->policy, "default");
    assert_true(rec->header->policy_config->split_eps == 2000);
    assert_int_equal(rec->header->policy_config->merge_max_bytes, 256ull << 20);
    assert_int_equal(rec->header->tick_ms, 500);
    ms_trace_record_free(rec);

    assert_int_equal(ms_trace_reader_next(r, &rec, em), 1);
    assert_int_equal(rec->r_case, RT__TRACE_RECORD__R_MAP);
    assert_int_equal(rec->t_ms, 1);
    assert_int_equal(rec->map->map_version, 11);
    assert_int_equal(rec->map->n_servers, 1);
    assert_string_equal(rec->map->servers[0]->zone, "z1");
    assert_int_equal(rec->map->n_ranges, 1);
    assert_string_equal(rec->map->ranges[0]->table, "orders");
    assert_true(rec->map->ranges[0]->high_inf);
    assert_int_equal(rec->map->ranges[0]->n_replicas, 3);
    assert_int_equal(rec->map->ranges[0]->n_isr, 2);
    ms_trace_record_free(rec);

    /* Keys a, b (first load), c (second load) before the heartbeat. */
    for (int i = 0; i < 3; i++) {
        static const char *const want[] = {"a", "b", "c"};
        assert_int_equal(ms_trace_reader_next(r, &rec, em), 1);
        assert_int_equal(rec->r_case, RT__TRACE_RECORD__R_KEY);
        assert_string_equal(rec->key->key, want[i]);
        assert_string_equal(ms_trace_reader_key(r, rec->key->id), want[i]);
        ms_trace_record_free(rec);
    }
    assert_int_equal(ms_trace_reader_next(r, &rec, em), 1);
    assert_int_equal(rec->r_case, RT__TRACE_RECORD__R_HEARTBEAT);
    assert_int_equal(rec->t_ms, 500);
    {
        const Rt__TraceHeartbeat *hb = rec->heartbeat;
        const Rt__TraceLoad *l0 = hb->loads[0], *l1 = hb->loads[1];
        assert_int_equal(hb->server_id, 1);
        assert_int_equal(hb->pending, 5);
        assert_int_equal(hb->max_range_eps, 900);
        assert_int_equal(hb->n_loads, 2);
        assert_int_equal(l0->range_id, 7);
        assert_int_equal(l0->requests, 70);
        assert_int_equal(l0->entities, 140);
        assert_int_equal(l0->bytes_written, 3000);
        assert_int_equal(l0->exec_us, 4000);
        assert_int_equal(l0->interval_ms, 1000);
        assert_int_equal(l0->throttled, 2);
        assert_int_equal(l0->scanned, 7);
        assert_int_equal(l0->key_count, 99);
        assert_int_equal(l0->key_bytes, 12345);
        assert_false(l0->ignored);
        assert_true(l1->ignored);
        assert_int_equal(l0->n_sample_keys, 3);
        assert_string_equal(ms_trace_reader_key(r, l0->sample_keys[0]), "a");
        assert_string_equal(ms_trace_reader_key(r, l0->sample_keys[1]), "b");
        assert_int_equal(l0->sample_keys[2], l0->sample_keys[0]);
        assert_int_equal(l1->n_sample_keys, 2);
        assert_int_equal(l1->sample_keys[0], l0->sample_keys[1]);
        assert_string_equal(ms_trace_reader_key(r, l1->sample_keys[1]), "c");
    }
    {
        /* Back to the rt.RangeLoad the master received, byte for byte. */
        char *pks[3];
        Rt__RangeLoad back;
        char *want[] = {"a", "b", "a"};
        Rt__RangeLoad *orig = range_load(7, want, 3);
        uint8_t a[256], b[256];
        size_t na, nb;
        assert_int_equal(
            ms_trace_reader_range_load(r, rec->heartbeat->loads[0], &back, pks),
            0);
        na = rt__range_load__pack(orig, a);
        nb = rt__range_load__pack(&back, b);
        assert_int_equal(na, nb);
        assert_memory_equal(a, b, na);
        free(orig);
    }
    ms_trace_record_free(rec);

    assert_int_equal(ms_trace_reader_next(r, &rec, em), 1);
    assert_int_equal(rec->r_case, RT__TRACE_RECORD__R_TICK);
    assert_int_equal(rec->tick->n, 1);
    assert_int_equal(rec->t_ms, 600);
    ms_trace_record_free(rec);

    assert_int_equal(ms_trace_reader_next(r, &rec, em), 1);
    assert_int_equal(rec->r_case, RT__TRACE_RECORD__R_DECISION);
    assert_string_equal(rec->decision->kind, "split");
    assert_string_equal(rec->decision->key, "b");
    assert_true(rec->decision->load == 2500.5);
    assert_true(rec->decision->started);
    ms_trace_record_free(rec);

    assert_int_equal(ms_trace_reader_next(r, &rec, em), 1);
    assert_int_equal(rec->r_case, RT__TRACE_RECORD__R_OUTCOME);
    assert_int_equal(rec->outcome->decision_id, 1);
    assert_string_equal(rec->outcome->outcome, "done");
    assert_int_equal(rec->outcome->n_new_ranges, 2);
    assert_int_equal(rec->outcome->new_ranges[1], 10);
    ms_trace_record_free(rec);

    assert_int_equal(ms_trace_reader_next(r, &rec, em), 1);
    assert_int_equal(rec->r_case, RT__TRACE_RECORD__R_EVENT);
    assert_int_equal(rec->event->seq, 42);
    assert_string_equal(rec->event->kind, "server_down");
    ms_trace_record_free(rec);

    assert_int_equal(ms_trace_reader_next(r, &rec, em), 1);
    assert_int_equal(rec->r_case, RT__TRACE_RECORD__R_END);
    assert_string_equal(rec->end->reason, "stop");
    assert_int_equal(rec->t_ms, 900);
    ms_trace_record_free(rec);

    assert_int_equal(ms_trace_reader_next(r, &rec, em), 0);
    assert_false(ms_trace_reader_truncated(r));
    ms_trace_reader_close(r);
}

/* A second segment starts with the magic and its own header, numbered 1,
 * with times counted from its own start; interned ids carry over. */
static void test_segments(void **state)
{
    struct fx *f = *state;
    struct ms_trace_writer *w;
    struct ms_trace_reader *r;
    struct ms_trace_stats st;
    char em[RT_ERRMSG_SIZE];
    Rt__TraceHeader h;
    Rt__TracePolicyConfig pc;
    Rt__TraceRecord *rec;
    char *pks[] = {"k"};
    Rt__RangeLoad *l = range_load(1, pks, 1);
    Rt__HeartbeatReq hb = RT__HEARTBEAT_REQ__INIT;
    hb.loads = &l;
    hb.n_loads = 1;

    assert_int_equal(ms_trace_writer_open(f->path, &w, em), 0);
    /* No record before a segment. */
    assert_int_equal(ms_trace_writer_heartbeat(w, 0, &hb, NULL, em), RT_EINVAL);
    header(&h, &pc);
    assert_int_equal(ms_trace_writer_segment(w, 100, &h, em), 0);
    assert_int_equal(ms_trace_writer_heartbeat(w, 150, &hb, NULL, em), 0);
    header(&h, &pc);
    h.reason = "leader";
    assert_int_equal(ms_trace_writer_segment(w, 5000, &h, em), 0);
    assert_int_equal(ms_trace_writer_heartbeat(w, 5020, &hb, NULL, em), 0);
    ms_trace_writer_stats(w, &st);
    assert_int_equal(st.segments, 2);
    assert_int_equal(st.keys, 1);
    assert_int_equal(st.records, 5); /* 2 headers, 1 key, 2 heartbeats */
    assert_int_equal(ms_trace_writer_close(w, 5100, "stop", em), 0);
    free(l);

    assert_int_equal(ms_trace_reader_open(f->path, &r, em), 0);
    assert_int_equal(ms_trace_reader_next(r, &rec, em), 1);
    assert_int_equal(rec->header->segment, 0);
    ms_trace_record_free(rec);
    assert_int_equal(ms_trace_reader_next(r, &rec, em), 1); /* key */
    ms_trace_record_free(rec);
    assert_int_equal(ms_trace_reader_next(r, &rec, em), 1);
    assert_int_equal(rec->t_ms, 50);
    ms_trace_record_free(rec);
    assert_int_equal(ms_trace_reader_next(r, &rec, em), 1);
    assert_int_equal(rec->r_case, RT__TRACE_RECORD__R_HEADER);
    assert_int_equal(rec->header->segment, 1);
    assert_string_equal(rec->header->reason, "leader");
    ms_trace_record_free(rec);
    assert_int_equal(ms_trace_reader_next(r, &rec, em), 1);
    assert_int_equal(rec->r_case, RT__TRACE_RECORD__R_HEARTBEAT);
    assert_int_equal(rec->t_ms, 20);
    assert_string_equal(
        ms_trace_reader_key(r, rec->heartbeat->loads[0]->sample_keys[0]), "k");
    ms_trace_record_free(rec);
    ms_trace_reader_close(r);
}

/* A file cut anywhere (a crash) reads up to its last whole record, then
 * ends as truncated, never as an error. */
static void test_truncated(void **state)
{
    struct fx *f = *state;
    char kinds[64], full[64];
    bool trunc;
    size_t size;
    uint8_t *data;
    FILE *fp;

    write_all(f->path, true);
    assert_int_equal(read_kinds(f->path, full, sizeof(full), &trunc), 0);
    assert_false(trunc);
    assert_string_equal(full, "hmkkkhtdoee");

    size = file_size(f->path);
    data = malloc(size);
    fp = fopen(f->path, "rb");
    assert_int_equal(fread(data, 1, size, fp), size);
    fclose(fp);
    /* Every cut past the magic yields a prefix of the records. */
    for (size_t cut = 24; cut < size - 8; cut += 3) {
        fp = fopen(f->path, "wb");
        fwrite(data, 1, cut, fp);
        fclose(fp);
        assert_int_equal(read_kinds(f->path, kinds, sizeof(kinds), &trunc), 0);
        assert_true(trunc);
        assert_true(strncmp(full, kinds, strlen(kinds)) == 0);
    }
    free(data);

    /* A crash after a flush, without close's end record or trailer. */
    write_all(f->path, false);
    assert_int_equal(read_kinds(f->path, kinds, sizeof(kinds), &trunc), 0);
    assert_string_equal(kinds, "hmkkkhtdoe");
    assert_true(trunc);
}

/* A newer major version is refused with a message naming both versions;
 * a newer minor version is read. */
static void test_version(void **state)
{
    struct fx *f = *state;
    struct ms_trace_reader *r;
    char em[RT_ERRMSG_SIZE];
    uint8_t raw[12];
    gzFile gz;

    memcpy(raw, MS_TRACE_MAGIC, MS_TRACE_MAGIC_LEN);
    raw[8] = MS_TRACE_MAJOR + 1;
    raw[9] = 0;
    raw[10] = 0;
    raw[11] = 0;
    gz = gzopen(f->path, "wb");
    gzwrite(gz, raw, sizeof(raw));
    gzclose(gz);
    assert_int_equal(ms_trace_reader_open(f->path, &r, em), RT_EPROTO);
    assert_non_null(strstr(em, "newer"));
    assert_non_null(strstr(em, "2.0"));
    {
        char ours[16];
        snprintf(ours, sizeof(ours), "%d.%d", MS_TRACE_MAJOR, MS_TRACE_MINOR);
        assert_non_null(strstr(em, ours));
    }

    raw[8] = MS_TRACE_MAJOR;
    raw[10] = 7;
    gz = gzopen(f->path, "wb");
    gzwrite(gz, raw, sizeof(raw));
    gzclose(gz);
    assert_int_equal(ms_trace_reader_open(f->path, &r, em), 0);
    ms_trace_reader_close(r);
}

/* Something else than a trace is refused as corrupt. */
static void test_not_a_trace(void **state)
{
    struct fx *f = *state;
    struct ms_trace_reader *r;
    char em[RT_ERRMSG_SIZE];
    FILE *fp = fopen(f->path, "wb");
    fputs("{\"kind\":\"split\"}\n", fp);
    fclose(fp);
    assert_int_equal(ms_trace_reader_open(f->path, &r, em), RT_ECORRUPT);
    assert_non_null(strstr(em, "not a trace"));
    fp = fopen(f->path, "wb");
    fclose(fp);
    assert_int_equal(ms_trace_reader_open(f->path, &r, em), RT_ECORRUPT);
    assert_int_equal(ms_trace_reader_open("/nonexistent/x", &r, em), RT_EIO);
}

/* The writer's key table is bounded: past MS_TRACE_KEYS_MAX keys it
 * forgets them, and a key seen again gets a new id that still reads
 * back as the same key. */
static void test_key_table_bounded(void **state)
{
    struct fx *f = *state;
    struct ms_trace_writer *w;
    struct ms_trace_reader *r;
    struct ms_trace_stats st;
    char em[RT_ERRMSG_SIZE];
    Rt__TraceHeader h;
    Rt__TracePolicyConfig pc;
    Rt__TraceRecord *rec;
    char buf[32], *pk = buf;
    Rt__RangeLoad *l = range_load(1, &pk, 1);
    Rt__HeartbeatReq hb = RT__HEARTBEAT_REQ__INIT;
    uint64_t first_id = 0, last_id = 0;
    hb.loads = &l;
    hb.n_loads = 1;

    assert_int_equal(ms_trace_writer_open(f->path, &w, em), 0);
    header(&h, &pc);
    assert_int_equal(ms_trace_writer_segment(w, 0, &h, em), 0);
    for (unsigned i = 0; i <= MS_TRACE_KEYS_MAX; i++) {
        snprintf(buf, sizeof(buf), "pk%u", i);
        assert_int_equal(ms_trace_writer_heartbeat(w, i, &hb, NULL, em), 0);
    }
    snprintf(buf, sizeof(buf), "pk0");
    assert_int_equal(ms_trace_writer_heartbeat(w, 1, &hb, NULL, em), 0);
    ms_trace_writer_stats(w, &st);
    assert_int_equal(st.keys, MS_TRACE_KEYS_MAX + 2);
    assert_int_equal(ms_trace_writer_close(w, 2, "stop", em), 0);
    free(l);

    assert_int_equal(ms_trace_reader_open(f->path, &r, em), 0);
    while (ms_trace_reader_next(r, &rec, em) == 1) {
        if (rec->r_case == RT__TRACE_RECORD__R_HEARTBEAT) {
            last_id = rec->heartbeat->loads[0]->sample_keys[0];
            if (!first_id) {
                first_id = last_id;
            }
        }
        ms_trace_record_free(rec);
    }
    assert_true(last_id != first_id);
    assert_string_equal(ms_trace_reader_key(r, last_id), "pk0");
    assert_string_equal(ms_trace_reader_key(r, first_id), "pk0");
    ms_trace_reader_close(r);
}

/* A write error (a full disk) comes back as RT_EIO with a message, at
 * the latest on flush; closing still frees the writer. */
static void test_write_error(void **state)
{
    struct ms_trace_writer *w;
    char em[RT_ERRMSG_SIZE] = "";
    Rt__TraceHeader h;
    Rt__TracePolicyConfig pc;
    int rc;
    (void)state;
    if (access("/dev/full", W_OK) != 0) {
        skip();
    }
    assert_int_equal(ms_trace_writer_open("/dev/full", &w, em), 0);
    header(&h, &pc);
    rc = ms_trace_writer_segment(w, 0, &h, em);
    if (rc == 0) {
        rc = ms_trace_writer_flush(w, em);
    }
    assert_int_equal(rc, RT_EIO);
    assert_non_null(strstr(em, "trace"));
    assert_true(strlen(em) > strlen("trace flush: "));
    ms_trace_writer_close(w, 1, NULL, em);
}

/* t_ms never decreases: a record stamped before the previous one gets
 * the previous one's time. */
static void test_time_monotonic(void **state)
{
    struct fx *f = *state;
    struct ms_trace_writer *w;
    struct ms_trace_reader *r;
    char em[RT_ERRMSG_SIZE];
    Rt__TraceHeader h;
    Rt__TracePolicyConfig pc;
    Rt__TraceTick t = RT__TRACE_TICK__INIT;
    Rt__TraceRecord rec = RT__TRACE_RECORD__INIT, *got;
    static const uint64_t at[] = {1200, 1100, 1300};
    static const uint64_t want[] = {0, 200, 200, 300};

    rec.r_case = RT__TRACE_RECORD__R_TICK;
    rec.tick = &t;
    assert_int_equal(ms_trace_writer_open(f->path, &w, em), 0);
    header(&h, &pc);
    assert_int_equal(ms_trace_writer_segment(w, 1000, &h, em), 0);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(ms_trace_writer_record(w, at[i], &rec, em), 0);
    }
    assert_int_equal(ms_trace_writer_close(w, 1300, NULL, em), 0);
    assert_int_equal(ms_trace_reader_open(f->path, &r, em), 0);
    for (int i = 0; i < 4; i++) {
        assert_int_equal(ms_trace_reader_next(r, &got, em), 1);
        assert_int_equal(got->t_ms, want[i]);
        ms_trace_record_free(got);
    }
    ms_trace_reader_close(r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_round_trip, setup, teardown),
        cmocka_unit_test_setup_teardown(test_segments, setup, teardown),
        cmocka_unit_test_setup_teardown(test_truncated, setup, teardown),
        cmocka_unit_test_setup_teardown(test_version, setup, teardown),
        cmocka_unit_test_setup_teardown(test_not_a_trace, setup, teardown),
        cmocka_unit_test_setup_teardown(test_key_table_bounded, setup,
                                        teardown),
        cmocka_unit_test(test_write_error),
        cmocka_unit_test_setup_teardown(test_time_monotonic, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
