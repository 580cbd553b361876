/* Load traces: writer and reader (ms_trace.h, docs/TRACE.md).
 *
 * Writer: records are packed with protobuf-c into a scratch buffer and
 * handed to zlib's gzwrite, which compresses into its own buffer and
 * writes to the file only when that fills or on ms_trace_writer_flush
 * (Z_SYNC_FLUSH, so a reader sees everything flushed even if the process
 * dies before gzclose writes the gzip trailer). Any zlib error is
 * reported as RT_EIO with gzerror's text; the caller decides to stop.
 *
 * Reader: gzread decodes (or passes a plain file through); records are
 * read whole into a growing buffer and unpacked. The end of input in the
 * middle of a record or of the gzip stream (gzerror Z_BUF_ERROR) is a
 * truncated file, not an error: the reader returns 0 after the last whole
 * record. */
#include "ms_trace.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "rt_alloc.h"
#include "rt_err.h"

/* ---- writer ---- */

struct ms__key_slot
{
    char *key; /* NULL: empty */
    uint64_t id;
};

struct ms_trace_writer
{
    gzFile gz;
    bool in_segment;
    uint64_t t0_ms;
    uint64_t last_t; /* t_ms of the last record: never decreases */
    struct ms_trace_stats st;
    uint8_t *buf; /* scratch for packing */
    size_t cap;
    /* Interned keys: open addressing, power-of-two size, never more than
     * half full. */
    struct ms__key_slot *slots;
    size_t nslots;
    size_t nkeys;
    uint64_t next_key_id;
};

static uint64_t ms__fnv1a(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++) {
        h = (h ^ (uint8_t)*s) * 1099511628211ull;
    }
    return h;
}

static void ms__keys_clear(struct ms_trace_writer *w)
{
    for (size_t i = 0; i < w->nslots; i++) {
        free(w->slots[i].key);
        w->slots[i].key = NULL;
    }
    w->nkeys = 0;
}

static int ms__gz_error(struct ms_trace_writer *w, const char *what, char *em)
{
    int zerr = 0;
    const char *msg = gzerror(w->gz, &zerr);
    if (zerr == Z_ERRNO) {
        msg = strerror(errno);
    }
    rt_errmsg_printf(em, "trace %s: %s", what, msg ? msg : "zlib error");
    return RT_EIO;
}

static int ms__write(struct ms_trace_writer *w,
                     const void *p,
                     size_t n,
                     char *em)
{
    if (n && gzwrite(w->gz, p, (unsigned)n) != (int)n) {
        return ms__gz_error(w, "write", em);
    }
    w->st.bytes += n;
    return 0;
}

static size_t ms__varint(uint8_t *out, uint64_t v)
{
    size_t n = 0;
    while (v >= 0x80) {
        out[n++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    out[n++] = (uint8_t)v;
    return n;
}

int ms_trace_writer_open(const char *path,
                         struct ms_trace_writer **out,
                         char *errmsg)
{
    struct ms_trace_writer *w;
    gzFile gz = gzopen(path, "wb6");
    if (!gz) {
        rt_errmsg_printf(errmsg, "trace %s: %s", path,
                         errno ? strerror(errno) : "cannot open");
        return RT_EIO;
    }
    /* zlib's buffers: what one flush interval of a busy cluster makes. */
    gzbuffer(gz, 64 * 1024);
    w = rt_xcalloc(1, sizeof(*w));
    w->gz = gz;
    w->nslots = 1024;
    w->slots = rt_xcalloc(w->nslots, sizeof(*w->slots));
    w->next_key_id = 1;
    *out = w;
    return 0;
}

uint64_t ms_trace_writer_rel(const struct ms_trace_writer *w, uint64_t now_ms)
{
    return now_ms >= w->t0_ms ? now_ms - w->t0_ms : 0;
}

static int ms__put(struct ms_trace_writer *w,
                   uint64_t now_ms,
                   Rt__TraceRecord *rec,
                   char *em)
{
    uint8_t len[10];
    size_t n, nl;
    int rc;

    /* A time taken before the previous record was written (a policy
     * call's view) would go back by a few ms: records keep their order. */
    rec->t_ms = ms_trace_writer_rel(w, now_ms);
    if (rec->t_ms < w->last_t) {
        rec->t_ms = w->last_t;
    }
    w->last_t = rec->t_ms;
    n = rt__trace_record__get_packed_size(rec);
    if (n > w->cap) {
        w->cap = n * 2;
        w->buf = rt_xrealloc(w->buf, w->cap);
    }
    rt__trace_record__pack(rec, w->buf);
    nl = ms__varint(len, n);
    if ((rc = ms__write(w, len, nl, em)) ||
        (rc = ms__write(w, w->buf, n, em))) {
        return rc;
    }
    w->st.records++;
    return 0;
}

int ms_trace_writer_segment(struct ms_trace_writer *w,
                            uint64_t now_ms,
                            Rt__TraceHeader *hdr,
                            char *errmsg)
{
    Rt__TraceRecord rec = RT__TRACE_RECORD__INIT;
    uint8_t magic[MS_TRACE_MAGIC_LEN + 4];
    int rc;

    memcpy(magic, MS_TRACE_MAGIC, MS_TRACE_MAGIC_LEN);
    magic[8] = MS_TRACE_MAJOR & 0xff;
    magic[9] = MS_TRACE_MAJOR >> 8;
    magic[10] = MS_TRACE_MINOR & 0xff;
    magic[11] = MS_TRACE_MINOR >> 8;
    if ((rc = ms__write(w, magic, sizeof(magic), errmsg))) {
        return rc;
    }
    w->t0_ms = now_ms;
    w->last_t = 0;
    w->in_segment = true;
    hdr->segment = w->st.segments++;
    rec.r_case = RT__TRACE_RECORD__R_HEADER;
    rec.header = hdr;
    return ms__put(w, now_ms, &rec, errmsg);
}

int ms_trace_writer_record(struct ms_trace_writer *w,
                           uint64_t now_ms,
                           Rt__TraceRecord *rec,
                           char *errmsg)
{
    if (!w->in_segment || rec->r_case == RT__TRACE_RECORD__R__NOT_SET) {
        rt_errmsg_printf(errmsg, "trace: %s",
                         w->in_segment ? "empty record" : "no segment");
        return RT_EINVAL;
    }
    return ms__put(w, now_ms, rec, errmsg);
}

/* The id of @key, writing its TraceKey record when it is new. */
static int ms__intern(struct ms_trace_writer *w,
                      uint64_t now_ms,
                      const char *key,
                      uint64_t *id,
                      char *em)
{
    size_t mask, i;
    Rt__TraceKey k = RT__TRACE_KEY__INIT;
    Rt__TraceRecord rec = RT__TRACE_RECORD__INIT;
    int rc;

    if (w->nkeys >= MS_TRACE_KEYS_MAX) {
        ms__keys_clear(w);
    }
    if ((w->nkeys + 1) * 2 > w->nslots) {
        /* Grow: rehash into twice the slots. */
        struct ms__key_slot *old = w->slots;
        size_t nold = w->nslots;
        w->nslots *= 2;
        w->slots = rt_xcalloc(w->nslots, sizeof(*w->slots));
        for (size_t j = 0; j < nold; j++) {
            if (old[j].key) {
                size_t m = w->nslots - 1;
                size_t at = ms__fnv1a(old[j].key) & m;
                while (w->slots[at].key) {
                    at = (at + 1) & m;
                }
                w->slots[at] = old[j];
            }
        }
        free(old);
    }
    mask = w->nslots - 1;
    for (i = ms__fnv1a(key) & mask; w->slots[i].key; i = (i + 1) & mask) {
        if (strcmp(w->slots[i].key, key) == 0) {
            *id = w->slots[i].id;
            return 0;
        }
    }
    k.id = w->next_key_id;
    k.key = (char *)key;
    rec.r_case = RT__TRACE_RECORD__R_KEY;
    rec.key = &k;
    if ((rc = ms__put(w, now_ms, &rec, em))) {
        return rc;
    }
    w->slots[i].key = rt_xstrdup(key);
    w->slots[i].id = w->next_key_id++;
    w->nkeys++;
    w->st.keys++;
    *id = w->slots[i].id;
    return 0;
}

int ms_trace_writer_heartbeat(struct ms_trace_writer *w,
                              uint64_t now_ms,
                              const Rt__HeartbeatReq *req,
                              const bool *ignored,
                              char *errmsg)
{
    Rt__TraceHeartbeat hb = RT__TRACE_HEARTBEAT__INIT;
    Rt__TraceRecord rec = RT__TRACE_RECORD__INIT;
    Rt__TraceLoad *loads, **lp;
    size_t nsamples = 0, used = 0;
    uint64_t *ids;
    int rc = 0;

    if (!w->in_segment) {
        rt_errmsg_printf(errmsg, "trace: no segment");
        return RT_EINVAL;
    }
    for (size_t i = 0; i < req->n_loads; i++) {
        nsamples += req->loads[i]->n_sample_pks;
    }
    loads = rt_xcalloc(req->n_loads ? req->n_loads : 1, sizeof(*loads));
    lp = rt_xcalloc(req->n_loads ? req->n_loads : 1, sizeof(*lp));
    ids = rt_xcalloc(nsamples ? nsamples : 1, sizeof(*ids));
    for (size_t i = 0; i < req->n_loads && !rc; i++) {
        const Rt__RangeLoad *l = req->loads[i];
        Rt__TraceLoad *t = &loads[i];
        rt__trace_load__init(t);
        t->range_id = l->range_id;
        t->interval_ms = l->interval_ms;
        t->requests = l->requests;
        t->entities = l->entities;
        t->bytes_written = l->bytes_written;
        t->exec_us = l->exec_us;
        t->throttled = l->throttled;
        t->scanned = l->scanned;
        t->key_count = l->key_count;
        t->key_bytes = l->key_bytes;
        t->ignored = ignored ? ignored[i] : false;
        t->sample_keys = ids + used;
        for (size_t j = 0; j < l->n_sample_pks && !rc; j++) {
            rc = ms__intern(w, now_ms, l->sample_pks[j], &ids[used], errmsg);
            used++;
            t->n_sample_keys++;
        }
        lp[i] = t;
    }
    if (!rc) {
        hb.server_id = req->server_id;
        hb.pending = req->pending;
        hb.max_server_eps = req->max_server_eps;
        hb.max_range_eps = req->max_range_eps;
        hb.stalled = req->stalled;
        hb.loads = lp;
        hb.n_loads = req->n_loads;
        rec.r_case = RT__TRACE_RECORD__R_HEARTBEAT;
        rec.heartbeat = &hb;
        rc = ms__put(w, now_ms, &rec, errmsg);
    }
    free(ids);
    free(lp);
    free(loads);
    return rc;
}

int ms_trace_writer_flush(struct ms_trace_writer *w, char *errmsg)
{
    if (gzflush(w->gz, Z_SYNC_FLUSH) != Z_OK) {
        return ms__gz_error(w, "flush", errmsg);
    }
    return 0;
}

void ms_trace_writer_stats(const struct ms_trace_writer *w,
                           struct ms_trace_stats *st)
{
    *st = w->st;
    st->file_bytes = (uint64_t)gzoffset(w->gz);
}

int ms_trace_writer_close(struct ms_trace_writer *w,
                          uint64_t now_ms,
                          const char *reason,
                          char *errmsg)
{
    int rc = 0, zrc;
    if (reason && w->in_segment) {
        Rt__TraceEnd end = RT__TRACE_END__INIT;
        Rt__TraceRecord rec = RT__TRACE_RECORD__INIT;
        end.reason = (char *)reason;
        rec.r_case = RT__TRACE_RECORD__R_END;
        rec.end = &end;
        rc = ms__put(w, now_ms, &rec, errmsg);
    }
    zrc = gzclose(w->gz);
    if (!rc && zrc != Z_OK) {
        rt_errmsg_printf(errmsg, "trace close: %s",
                         zrc == Z_ERRNO ? strerror(errno) : "zlib error");
        rc = RT_EIO;
    }
    ms__keys_clear(w);
    free(w->slots);
    free(w->buf);
    free(w);
    return rc;
}

/* ---- reader ---- */

struct ms_trace_reader
{
    gzFile gz;
    unsigned major, minor;
    bool truncated;
    bool at_magic; /* the segment's magic was read, its header not yet */
    uint8_t *buf;
    size_t cap;
    char **keys; /* by id */
    size_t nkeys;
};

/* Reads up to @n bytes; returns how many (< @n at the end). A short read
 * that is not a clean end marks the file truncated; a zlib error other
 * than a cut stream is returned as RT_EIO/RT_ECORRUPT. */
static int ms__read(struct ms_trace_reader *r, void *p, size_t n, char *em)
{
    size_t got = 0;
    while (got < n) {
        int k = gzread(r->gz, (uint8_t *)p + got, (unsigned)(n - got));
        if (k > 0) {
            got += (size_t)k;
            continue;
        }
        if (k < 0) {
            int zerr = 0;
            const char *msg = gzerror(r->gz, &zerr);
            if (zerr == Z_BUF_ERROR) {
                r->truncated = true; /* the gzip stream was cut */
                break;
            }
            rt_errmsg_printf(em, "trace read: %s",
                             zerr == Z_ERRNO ? strerror(errno) : msg);
            return zerr == Z_ERRNO ? RT_EIO : RT_ECORRUPT;
        }
        /* 0: end of input; a cut gzip stream also ends this way. */
        {
            int zerr = 0;
            gzerror(r->gz, &zerr);
            if (zerr == Z_BUF_ERROR) {
                r->truncated = true;
            }
        }
        break;
    }
    return (int)got;
}

/* After the 0 byte of a magic: the rest of it and the version. */
static int ms__magic(struct ms_trace_reader *r, bool first, char *em)
{
    uint8_t m[MS_TRACE_MAGIC_LEN - 1 + 4];
    int n = ms__read(r, m, sizeof(m), em);
    if (n < 0) {
        return n;
    }
    if ((size_t)n < sizeof(m)) {
        if (first) {
            rt_errmsg_printf(em, "not a trace file (too short)");
            return RT_ECORRUPT;
        }
        r->truncated = true;
        return 0;
    }
    if (memcmp(m, MS_TRACE_MAGIC + 1, MS_TRACE_MAGIC_LEN - 1) != 0) {
        rt_errmsg_printf(em, "not a trace file (bad magic)");
        return RT_ECORRUPT;
    }
    r->major = m[7] | (unsigned)m[8] << 8;
    r->minor = m[9] | (unsigned)m[10] << 8;
    if (r->major > MS_TRACE_MAJOR) {
        rt_errmsg_printf(em,
                         "trace format version %u.%u is newer than this "
                         "reader's %u.%u: use a newer reader",
                         r->major, r->minor, MS_TRACE_MAJOR, MS_TRACE_MINOR);
        return RT_EPROTO;
    }
    r->at_magic = true;
    return 1;
}

int ms_trace_reader_open(const char *path,
                         struct ms_trace_reader **out,
                         char *errmsg)
{
    struct ms_trace_reader *r;
    uint8_t b;
    int rc;
    gzFile gz = gzopen(path, "rb");
    if (!gz) {
        rt_errmsg_printf(errmsg, "trace %s: %s", path,
                         errno ? strerror(errno) : "cannot open");
        return RT_EIO;
    }
    r = rt_xcalloc(1, sizeof(*r));
    r->gz = gz;
    rc = ms__read(r, &b, 1, errmsg);
    if (rc == 1 && b != 0) {
        rt_errmsg_printf(errmsg, "not a trace file (bad magic)");
        rc = RT_ECORRUPT;
    } else if (rc == 0) {
        rt_errmsg_printf(errmsg, "not a trace file (empty)");
        rc = RT_ECORRUPT;
    }
    if (rc == 1) {
        rc = ms__magic(r, true, errmsg);
    }
    if (rc < 0) {
        rt_errmsg_wrapf(errmsg, "%s", path);
        ms_trace_reader_close(r);
        return rc;
    }
    *out = r;
    return 0;
}

static void ms__remember_key(struct ms_trace_reader *r, const Rt__TraceKey *k)
{
    if (k->id == 0 || k->id > (1ull << 32)) {
        return;
    }
    if (k->id >= r->nkeys) {
        size_t n = r->nkeys ? r->nkeys : 1024;
        while (n <= k->id) {
            n *= 2;
        }
        r->keys = rt_xrealloc(r->keys, n * sizeof(*r->keys));
        memset(r->keys + r->nkeys, 0, (n - r->nkeys) * sizeof(*r->keys));
        r->nkeys = n;
    }
    free(r->keys[k->id]);
    r->keys[k->id] = rt_xstrdup(k->key ? k->key : "");
}

int ms_trace_reader_next(struct ms_trace_reader *r,
                         Rt__TraceRecord **out,
                         char *errmsg)
{
    uint64_t len = 0;
    unsigned shift = 0;
    Rt__TraceRecord *rec;
    uint8_t b;
    int n;

    for (;;) {
        /* The record's length, a varint; a 0 first byte is a magic. */
        n = ms__read(r, &b, 1, errmsg);
        if (n <= 0) {
            return n;
        }
        if (b != 0 || shift) {
            break;
        }
        if ((n = ms__magic(r, false, errmsg)) <= 0) {
            return n;
        }
    }
    for (;;) {
        len |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            break;
        }
        shift += 7;
        if (shift > 35) {
            rt_errmsg_printf(errmsg, "trace: bad record length");
            return RT_ECORRUPT;
        }
        n = ms__read(r, &b, 1, errmsg);
        if (n <= 0) {
            r->truncated = true;
            return n;
        }
    }
    if (len == 0 || len > MS_TRACE_RECORD_MAX) {
        rt_errmsg_printf(errmsg, "trace: bad record length %llu",
                         (unsigned long long)len);
        return RT_ECORRUPT;
    }
    if (len > r->cap) {
        r->cap = len;
        r->buf = rt_xrealloc(r->buf, r->cap);
    }
    n = ms__read(r, r->buf, len, errmsg);
    if (n < 0) {
        return n;
    }
    if ((uint64_t)n < len) {
        r->truncated = true;
        return 0;
    }
    rec = rt__trace_record__unpack(NULL, len, r->buf);
    if (!rec) {
        rt_errmsg_printf(errmsg, "trace: a record does not decode");
        return RT_ECORRUPT;
    }
    if (r->at_magic && rec->r_case != RT__TRACE_RECORD__R_HEADER) {
        rt__trace_record__free_unpacked(rec, NULL);
        rt_errmsg_printf(errmsg, "trace: a segment without its header");
        return RT_ECORRUPT;
    }
    r->at_magic = false;
    if (rec->r_case == RT__TRACE_RECORD__R_KEY) {
        ms__remember_key(r, rec->key);
    }
    *out = rec;
    return 1;
}

bool ms_trace_reader_truncated(const struct ms_trace_reader *r)
{
    return r->truncated;
}

void ms_trace_reader_version(const struct ms_trace_reader *r,
                             unsigned *major,
                             unsigned *minor)
{
    *major = r->major;
    *minor = r->minor;
}

const char *ms_trace_reader_key(const struct ms_trace_reader *r, uint64_t id)
{
    return id < r->nkeys ? r->keys[id] : NULL;
}

int ms_trace_reader_range_load(const struct ms_trace_reader *r,
                               const Rt__TraceLoad *t,
                               Rt__RangeLoad *out,
                               char **pks)
{
    rt__range_load__init(out);
    for (size_t i = 0; i < t->n_sample_keys; i++) {
        const char *k = ms_trace_reader_key(r, t->sample_keys[i]);
        if (!k) {
            return RT_ECORRUPT;
        }
        pks[i] = (char *)k;
    }
    out->range_id = t->range_id;
    out->requests = t->requests;
    out->entities = t->entities;
    out->bytes_written = t->bytes_written;
    out->exec_us = t->exec_us;
    out->key_count = t->key_count;
    out->key_bytes = t->key_bytes;
    out->sample_pks = pks;
    out->n_sample_pks = t->n_sample_keys;
    out->interval_ms = t->interval_ms;
    out->scanned = t->scanned;
    out->throttled = t->throttled;
    return 0;
}

void ms_trace_reader_close(struct ms_trace_reader *r)
{
    if (!r) {
        return;
    }
    gzclose(r->gz);
    for (size_t i = 0; i < r->nkeys; i++) {
        free(r->keys[i]);
    }
    free(r->keys);
    free(r->buf);
    free(r);
}

void ms_trace_record_free(Rt__TraceRecord *rec)
{
    if (rec) {
        rt__trace_record__free_unpacked(rec, NULL);
    }
}

const char *ms_trace_record_kind(const Rt__TraceRecord *rec)
{
    switch (rec->r_case) {
        case RT__TRACE_RECORD__R_HEADER:
            return "header";
        case RT__TRACE_RECORD__R_KEY:
            return "key";
        case RT__TRACE_RECORD__R_MAP:
            return "map";
        case RT__TRACE_RECORD__R_HEARTBEAT:
            return "heartbeat";
        case RT__TRACE_RECORD__R_TICK:
            return "tick";
        case RT__TRACE_RECORD__R_DECISION:
            return "decision";
        case RT__TRACE_RECORD__R_OUTCOME:
            return "outcome";
        case RT__TRACE_RECORD__R_EVENT:
            return "event";
        case RT__TRACE_RECORD__R_END:
            return "end";
        default:
            return "unknown";
    }
}
