/* Catalog snapshot, restore and digest (ms_catalog.h; docs/DESIGN-master-
 * ha.md §2.5). The snapshot is a plain record stream over every LMDB
 * database, not a copy of the environment: smaller, format-checked, and
 * restorable under the live mirror. Restore checks the whole stream (CRC,
 * counts, every frame, every record through the catalog's own load code)
 * inside one write transaction that it aborts on any doubt, so a bad
 * stream leaves LMDB and the mirror as they were. */
#include <stdlib.h>
#include <string.h>

#include "ms_catalog_int.h"
#include "rt_alloc.h"
#include "rt_buf.h"
#include "rt_crc32c.h"
#include "rt_err.h"
#include "rt_lmdb.h"
#include "rt_log.h"

#define MS__SNAP_FORMAT 1

static void ms__snap_frame(struct rt_buf *b, const ProtobufCMessage *m)
{
    size_t n = protobuf_c_message_get_packed_size(m);
    uint8_t *p = rt_buf_reserve(b, 4 + n);
    rt_put_u32be(p, (uint32_t)n);
    protobuf_c_message_pack(m, p + 4);
    b->len += 4 + n;
}

/* Calls @fn on every record of every database, in order; stops at the
 * first non-zero return. Returns 0, that value, or an RT_E* code. */
static int ms__snap_walk(
    struct ms_catalog *cat,
    int (*fn)(void *arg, size_t db, const MDB_val *k, const MDB_val *v),
    void *arg)
{
    MDB_txn *txn;
    int rc = mdb_txn_begin(cat->env, NULL, MDB_RDONLY, &txn);
    if (rc) {
        return rt_lmdb_err(rc);
    }
    for (size_t i = 0; i < MS_CAT_NDBS && rc == 0; i++) {
        MDB_cursor *cur;
        MDB_val k, v;
        rc = mdb_cursor_open(txn, *ms_cat_db(cat, i), &cur);
        if (rc) {
            rc = rt_lmdb_err(rc);
            break;
        }
        while ((rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) == 0) {
            rc = fn(arg, i, &k, &v);
            if (rc) {
                break;
            }
        }
        mdb_cursor_close(cur);
        if (rc == MDB_NOTFOUND) {
            rc = 0;
        }
    }
    mdb_txn_abort(txn);
    return rc;
}

struct ms__snap_body
{
    struct rt_buf buf;
    uint64_t n;
};

static int ms__snap_one(void *arg,
                        size_t db,
                        const MDB_val *k,
                        const MDB_val *v)
{
    struct ms__snap_body *b = arg;
    Rt__CatalogRecord rec = RT__CATALOG_RECORD__INIT;
    rec.db = (char *)ms_cat_db_name(db);
    rec.key.data = k->mv_data;
    rec.key.len = k->mv_size;
    rec.value.data = v->mv_data;
    rec.value.len = v->mv_size;
    ms__snap_frame(&b->buf, &rec.base);
    b->n++;
    return 0;
}

int ms_catalog_snapshot(struct ms_catalog *cat, struct rt_buf *out)
{
    struct ms__snap_body body = {RT_BUF_INIT, 0};
    Rt__CatalogSnapshot hdr = RT__CATALOG_SNAPSHOT__INIT;
    int err = ms__snap_walk(cat, ms__snap_one, &body);
    if (err) {
        rt_log(RT_LOG_ERROR, "catalog: snapshot: %s", rt_strerror(err));
        rt_buf_free(&body.buf);
        return err;
    }
    hdr.format = MS__SNAP_FORMAT;
    hdr.ndbs = MS_CAT_NDBS;
    hdr.nrecords = body.n;
    hdr.body_len = body.buf.len;
    hdr.body_crc = rt_crc32c(0, body.buf.data, body.buf.len);
    ms__snap_frame(out, &hdr.base);
    rt_buf_append(out, body.buf.data, body.buf.len);
    rt_buf_free(&body.buf);
    return 0;
}

/* The next frame of @buf at *@pos, or NULL (truncated / not that message). */
static ProtobufCMessage *ms__snap_next(const ProtobufCMessageDescriptor *d,
                                       const uint8_t *buf,
                                       size_t len,
                                       size_t *pos)
{
    ProtobufCMessage *m;
    size_t n;
    if (len - *pos < 4) {
        return NULL;
    }
    n = rt_get_u32be(buf + *pos);
    if (len - *pos - 4 < n) {
        return NULL;
    }
    m = protobuf_c_message_unpack(d, NULL, n, buf + *pos + 4);
    *pos += 4 + n;
    return m;
}

static void ms__snap_recs_free(Rt__CatalogRecord **recs, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        rt__catalog_record__free_unpacked(recs[i], NULL);
    }
    free(recs);
}

/* Parses and checks the whole stream: on 0, *@recs (*@nrecs of them,
 * release with ms__snap_recs_free) and *@dbs (each record's database). */
static int ms__snap_parse(const uint8_t *buf,
                          size_t len,
                          Rt__CatalogRecord ***recs,
                          size_t **dbs,
                          size_t *nrecs)
{
    size_t pos = 0, n = 0;
    Rt__CatalogSnapshot *hdr = (Rt__CatalogSnapshot *)ms__snap_next(
        &rt__catalog_snapshot__descriptor, buf, len, &pos);
    Rt__CatalogRecord **rv = NULL;
    size_t *dv = NULL;
    uint64_t want;

    if (!hdr || hdr->format != MS__SNAP_FORMAT || hdr->ndbs != MS_CAT_NDBS ||
        hdr->body_len != len - pos ||
        hdr->body_crc != rt_crc32c(0, buf + pos, len - pos) ||
        hdr->nrecords > (len - pos) / 4) {
        goto err_corrupt;
    }
    want = hdr->nrecords;
    rv = rt_xcalloc(want ? want : 1, sizeof(*rv));
    dv = rt_xcalloc(want ? want : 1, sizeof(*dv));
    for (; n < want; n++) {
        Rt__CatalogRecord *r = (Rt__CatalogRecord *)ms__snap_next(
            &rt__catalog_record__descriptor, buf, len, &pos);
        size_t db = 0;
        if (!r) {
            goto err_corrupt;
        }
        rv[n] = r;
        while (db < MS_CAT_NDBS && strcmp(r->db, ms_cat_db_name(db)) != 0) {
            db++;
        }
        /* LMDB keys are 1..511 bytes. */
        if (db == MS_CAT_NDBS || r->key.len == 0 || r->key.len > 511) {
            n++;
            goto err_corrupt;
        }
        dv[n] = db;
    }
    if (pos != len) {
        goto err_corrupt;
    }
    rt__catalog_snapshot__free_unpacked(hdr, NULL);
    *recs = rv;
    *dbs = dv;
    *nrecs = n;
    return 0;

err_corrupt:
    if (hdr) {
        rt__catalog_snapshot__free_unpacked(hdr, NULL);
    }
    if (rv) {
        ms__snap_recs_free(rv, n);
    }
    free(dv);
    return RT_ECORRUPT;
}

/* Moves @from's mirror (counters included) into @to, whose mirror is
 * freed first; @from is left empty. */
static void ms__snap_take_mirror(struct ms_catalog *to, struct ms_catalog *from)
{
    ms_cat_mirror_free(to);
    to->ctr = from->ctr;
    to->tables = from->tables;
    to->tables_by_id = from->tables_by_id;
    to->ranges = from->ranges;
    to->servers = from->servers;
    to->props = from->props;
    to->tombs = from->tombs;
    to->moves = from->moves;
    to->leader = from->leader;
}

int ms_catalog_restore(struct ms_catalog *cat, const uint8_t *buf, size_t len)
{
    Rt__CatalogRecord **recs;
    struct ms_catalog *shell;
    size_t *dbs, n;
    MDB_txn *txn;
    int rc, err;

    err = ms__snap_parse(buf, len, &recs, &dbs, &n);
    if (err) {
        rt_log(RT_LOG_ERROR,
               "catalog: restore: not a valid snapshot (%zu "
               "bytes)",
               len);
        return err;
    }
    rc = mdb_txn_begin(cat->env, NULL, 0, &txn);
    if (rc) {
        err = rt_lmdb_err(rc);
        goto err_after_parse;
    }
    for (size_t i = 0; rc == 0 && i < MS_CAT_NDBS; i++) {
        rc = mdb_drop(txn, *ms_cat_db(cat, i), 0);
    }
    for (size_t i = 0; rc == 0 && i < n; i++) {
        MDB_val k = {recs[i]->key.len, recs[i]->key.data};
        MDB_val v = {recs[i]->value.len, recs[i]->value.data};
        rc = mdb_put(txn, *ms_cat_db(cat, dbs[i]), &k, &v, MDB_NOOVERWRITE);
    }
    if (rc) {
        /* A key twice is the stream's fault; anything else ours. */
        err = rc == MDB_KEYEXIST ? RT_ECORRUPT : rt_lmdb_err(rc);
        mdb_txn_abort(txn);
        goto err_after_parse;
    }
    /* The new mirror, loaded by the open code from this transaction: if
     * a record does not load, nothing is committed. */
    shell = rt_xcalloc(1, sizeof(*shell));
    for (size_t i = 0; i < MS_CAT_NDBS; i++) {
        *ms_cat_db(shell, i) = *ms_cat_db(cat, i);
    }
    err = ms_cat_load(shell, txn);
    if (err == 0) {
        rc = mdb_txn_commit(txn);
        err = rc ? rt_lmdb_err(rc) : 0;
    } else {
        mdb_txn_abort(txn);
    }
    if (err) {
        ms_cat_mirror_free(shell);
        free(shell);
        goto err_after_parse;
    }
    ms__snap_take_mirror(cat, shell);
    free(shell);
    ms__snap_recs_free(recs, n);
    free(dbs);
    rt_log(RT_LOG_INFO,
           "catalog: restored %zu records: %zu tables, %zu ranges, %zu "
           "servers, map version %llu, master term %llu",
           n, cat->tables.n, cat->ranges.n, cat->servers.n,
           (unsigned long long)cat->ctr.map_version,
           (unsigned long long)cat->ctr.master_term);
    return 0;

err_after_parse:
    rt_log(RT_LOG_ERROR, "catalog: restore: %s", rt_strerror(err));
    ms__snap_recs_free(recs, n);
    free(dbs);
    return err;
}

/* FNV-1a, 64 bits: ordered, so equal sequences of records hash alike. */
static void ms__fnv(uint64_t *h, const void *p, size_t n)
{
    const uint8_t *b = p;
    for (size_t i = 0; i < n; i++) {
        *h = (*h ^ b[i]) * 0x100000001b3ull;
    }
}

static int ms__digest_one(void *arg,
                          size_t db,
                          const MDB_val *k,
                          const MDB_val *v)
{
    uint64_t *h = arg;
    uint8_t len[8];
    ms__fnv(h, ms_cat_db_name(db), strlen(ms_cat_db_name(db)) + 1);
    rt_put_u32be(len, (uint32_t)k->mv_size);
    rt_put_u32be(len + 4, (uint32_t)v->mv_size);
    ms__fnv(h, len, sizeof(len));
    ms__fnv(h, k->mv_data, k->mv_size);
    ms__fnv(h, v->mv_data, v->mv_size);
    return 0;
}

uint64_t ms_catalog_digest(struct ms_catalog *cat)
{
    uint64_t h = 0xcbf29ce484222325ull;
    return ms__snap_walk(cat, ms__digest_one, &h) ? 0 : h;
}

int ms_cat_do_import(struct ms_catalog *cat, const uint8_t *snap, size_t len)
{
    int rc;

    if (ms_catalog_ntables(cat) || ms_catalog_nranges(cat) ||
        ms_catalog_nservers(cat)) {
        return RT_EEXIST;
    }
    rc = ms_catalog_restore(cat, snap, len);
    if (rc != 0 && rc != RT_ECORRUPT) {
        cat->local_err = rc; /* this member's storage, not the entry */
    }
    return rc;
}
