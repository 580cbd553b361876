/* Store metadata: the meta records (server id, incarnation, owned ranges,
 * the highest master term seen, drop and span drop markers, extra records
 * of range moves) and chunked
 * drops: of
 * a table, or of the key span a range move leaves behind. Both kinds run
 * the same chunk (ps__drop_chunk) and differ only in bounds and marker;
 * both resume after a restart. Writes run on the writer thread. */
#include "ps_store.h"
#include "ps_store_int.h"

#include <lmdb.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "rt_alloc.h"
#include "rt_err.h"
#include "rt_key.h"
#include "rt_lmdb.h"
#include "rt_log.h"

/* Meta */

int ps_store_meta_load(struct ps_store *s,
                       uint64_t *server_id,
                       struct rt_buf *ranges)
{
    MDB_txn *txn;
    MDB_val k, v;
    int rc;

    *server_id = 0;
    rc = mdb_txn_begin(s->env, NULL, MDB_RDONLY, &txn);
    if (rc != 0) {
        return rt_lmdb_err(rc);
    }
    k = ps__val(PS_META_SERVER_ID, strlen(PS_META_SERVER_ID));
    rc = mdb_get(txn, s->meta, &k, &v);
    if (rc == 0 && v.mv_size == 8) {
        *server_id = rt_get_u64le(v.mv_data);
    } else if (rc != 0 && rc != MDB_NOTFOUND) {
        goto out;
    }
    k = ps__val(PS_META_RANGES, strlen(PS_META_RANGES));
    rc = mdb_get(txn, s->meta, &k, &v);
    if (rc == 0) {
        rt_buf_append(ranges, v.mv_data, v.mv_size);
    }
    if (rc == MDB_NOTFOUND) {
        rc = 0;
    }
out:
    mdb_txn_abort(txn);
    return rt_lmdb_err(rc);
}

int ps_store_meta_save(struct ps_store *s,
                       uint64_t server_id,
                       const void *ranges,
                       size_t ranges_len)
{
    return ps_store_meta_write(s, server_id, ranges, ranges_len, 0, NULL, 0);
}

/* Puts @term as the master term record in @txn when it is above the
 * stored one: jobs snapshot the term when they are made, so one made
 * earlier may commit after a later one and must not lower it. */
static int ps__meta_raise_term(struct ps_store *s, MDB_txn *txn, uint64_t term)
{
    MDB_val k, v;
    uint8_t b[8];
    int rc;

    if (term == 0) {
        return 0;
    }
    k = ps__val(PS_META_MASTER_TERM, strlen(PS_META_MASTER_TERM));
    rc = mdb_get(txn, s->meta, &k, &v);
    if (rc == 0 && v.mv_size == 8 && rt_get_u64le(v.mv_data) >= term) {
        return 0;
    }
    if (rc != 0 && rc != MDB_NOTFOUND) {
        return rc;
    }
    rt_put_u64le(b, term);
    v = ps__val(b, sizeof(b));
    return mdb_put(txn, s->meta, &k, &v, 0);
}

int ps_store_meta_term(struct ps_store *s, uint64_t *master_term)
{
    MDB_txn *txn;
    MDB_val k, v;
    int rc;

    *master_term = 0;
    rc = mdb_txn_begin(s->env, NULL, MDB_RDONLY, &txn);
    if (rc != 0) {
        return rt_lmdb_err(rc);
    }
    k = ps__val(PS_META_MASTER_TERM, strlen(PS_META_MASTER_TERM));
    rc = mdb_get(txn, s->meta, &k, &v);
    if (rc == 0) {
        if (v.mv_size != 8) {
            mdb_txn_abort(txn);
            return RT_ECORRUPT;
        }
        *master_term = rt_get_u64le(v.mv_data);
    }
    mdb_txn_abort(txn);
    return rc == MDB_NOTFOUND ? 0 : rt_lmdb_err(rc);
}

int ps_store_meta_write(struct ps_store *s,
                        uint64_t server_id,
                        const void *ranges,
                        size_t ranges_len,
                        uint64_t master_term,
                        const struct ps_meta_op *ops,
                        size_t n_ops)
{
    MDB_txn *txn;
    MDB_val k, v;
    uint8_t id[8];
    int rc;

    rc = mdb_txn_begin(s->env, NULL, 0, &txn);
    if (rc != 0) {
        return rt_lmdb_err(rc);
    }
    rt_put_u64le(id, server_id);
    k = ps__val(PS_META_SERVER_ID, strlen(PS_META_SERVER_ID));
    v = ps__val(id, sizeof(id));
    rc = mdb_put(txn, s->meta, &k, &v, 0);
    if (rc == 0) {
        k = ps__val(PS_META_RANGES, strlen(PS_META_RANGES));
        v = ps__val(ranges, ranges_len);
        rc = mdb_put(txn, s->meta, &k, &v, 0);
    }
    if (rc == 0) {
        rc = ps__meta_raise_term(s, txn, master_term);
    }
    for (size_t i = 0; rc == 0 && i < n_ops; i++) {
        k = ps__val(ops[i].key, ops[i].kn);
        if (ops[i].del) {
            rc = mdb_del(txn, s->meta, &k, NULL);
            if (rc == MDB_NOTFOUND) {
                rc = 0;
            }
        } else {
            v = ps__val(ops[i].val, ops[i].vn);
            rc = mdb_put(txn, s->meta, &k, &v, 0);
        }
    }
    if (rc != 0) {
        mdb_txn_abort(txn);
        return rt_lmdb_err(rc);
    }
    return rt_lmdb_err(mdb_txn_commit(txn));
}

/* Incarnation */

#define PS__META_INCARNATION "incarnation"

int ps_store_meta_incarnation(struct ps_store *s,
                              uint8_t out[PS_INCARNATION_SIZE])
{
    MDB_txn *txn;
    MDB_val k, v;
    int rc;

    rc = mdb_txn_begin(s->env, NULL, 0, &txn);
    if (rc != 0) {
        return rt_lmdb_err(rc);
    }
    k = ps__val(PS__META_INCARNATION, strlen(PS__META_INCARNATION));
    rc = mdb_get(txn, s->meta, &k, &v);
    if (rc == 0) {
        mdb_txn_abort(txn);
        if (v.mv_size != PS_INCARNATION_SIZE) {
            return RT_ECORRUPT;
        }
        memcpy(out, v.mv_data, PS_INCARNATION_SIZE);
        return 0;
    }
    if (rc == MDB_NOTFOUND) {
        rc = uv_random(NULL, NULL, out, PS_INCARNATION_SIZE, 0, NULL);
        if (rc != 0) {
            rt_log(RT_LOG_ERROR, "incarnation: uv_random: %s", uv_strerror(rc));
            mdb_txn_abort(txn);
            return RT_EIO;
        }
        v = ps__val(out, PS_INCARNATION_SIZE);
        rc = mdb_put(txn, s->meta, &k, &v, 0);
    }
    if (rc != 0) {
        mdb_txn_abort(txn);
        return rt_lmdb_err(rc);
    }
    return rt_lmdb_err(mdb_txn_commit(txn));
}

/* Table drop markers */

/* Drop markers found by ps_store_pending_drops. */
struct ps__drops
{
    uint64_t *ids;
    size_t n;
};

/* ps_meta_cb over the PS_META_DROP prefix: keeps the table id of every
 * marker. Stops with RT_ENOMEM. */
static int ps__drops_add(uint64_t table_id,
                         const uint8_t *val,
                         size_t vn,
                         void *arg)
{
    struct ps__drops *d = arg;
    uint64_t *nids;

    (void)val;
    (void)vn;
    nids = realloc(d->ids, (d->n + 1) * sizeof(*nids));
    if (!nids) {
        return RT_ENOMEM;
    }
    d->ids = nids;
    d->ids[d->n++] = table_id;
    return 0;
}

int ps_store_pending_drops(struct ps_store *s, uint64_t **ids, size_t *n)
{
    struct ps__drops d = {NULL, 0};
    int rc;

    *ids = NULL;
    *n = 0;
    rc = ps_store_meta_scan(s, PS_META_DROP, ps__drops_add, &d);
    if (rc != 0) {
        free(d.ids);
        return rc;
    }
    *ids = d.ids;
    *n = d.n;
    return 0;
}

/* Meta scan */

int ps_store_meta_scan(struct ps_store *s,
                       const char *prefix,
                       ps_meta_cb cb,
                       void *arg)
{
    size_t plen = strlen(prefix);
    MDB_txn *txn;
    MDB_cursor *cur;
    MDB_val k, v;
    int rc, stop = 0;

    rc = mdb_txn_begin(s->env, NULL, MDB_RDONLY, &txn);
    if (rc != 0) {
        return rt_lmdb_err(rc);
    }
    rc = mdb_cursor_open(txn, s->meta, &cur);
    if (rc != 0) {
        mdb_txn_abort(txn);
        return rt_lmdb_err(rc);
    }
    k = ps__val(prefix, plen);
    for (rc = mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE); rc == 0;
         rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
        if (k.mv_size < plen || memcmp(k.mv_data, prefix, plen) != 0) {
            break;
        }
        if (k.mv_size != plen + 8) {
            continue;
        }
        stop = cb(rt_get_u64be((const uint8_t *)k.mv_data + plen), v.mv_data,
                  v.mv_size, arg);
        if (stop != 0) {
            break;
        }
    }
    mdb_cursor_close(cur);
    mdb_txn_abort(txn);
    if (stop != 0) {
        return stop;
    }
    return rc == 0 || rc == MDB_NOTFOUND ? 0 : rt_lmdb_err(rc);
}

void ps_store_meta_key(struct rt_buf *out, const char *prefix, uint64_t id)
{
    rt_buf_append(out, prefix, strlen(prefix));
    ps__append_u64be(out, id);
}

/* Drops: tables and spans */

void ps_store_span_marker(uint64_t seq,
                          const struct ps_span *sp,
                          struct rt_buf *key,
                          struct rt_buf *val)
{
    const char *low = sp->low ? sp->low : "";
    size_t ln = strlen(low), hn = sp->high ? strlen(sp->high) : 0;
    uint8_t *q;

    ps_store_meta_key(key, PS_META_SPAN_PREFIX, seq);
    q = rt_buf_reserve(val, 17 + ln + hn);
    rt_put_u64le(q, sp->table_id);
    q[8] = sp->high != NULL;
    ps__put_field(ps__put_field(q + 9, low, ln), sp->high, hn);
    val->len += 17 + ln + hn;
}

/* Rewrites bucket record @k (value @v) without its entries whose full key
 * is in [@lo, @hi); deletes it when none is left. */
static int ps__bucket_cut(struct ps_store *s,
                          MDB_txn *txn,
                          MDB_val k,
                          MDB_val v,
                          const struct rt_buf *lo,
                          const struct rt_buf *hi,
                          uint64_t *removed)
{
    struct rt_buf *out = &s->bbuf;
    struct rt_buf full = RT_BUF_INIT;
    struct ps__bucket b;
    struct ps__bent e;
    uint32_t kept = 0;
    int rc;

    if (ps__bucket_open(&v, &b) != 0) {
        return RT_ECORRUPT;
    }
    ps__bucket_begin(out);
    while ((rc = ps__bucket_next(&b, &e)) == 1) {
        rt_buf_reset(&full);
        rt_buf_append(&full, k.mv_data, k.mv_size);
        rt_buf_append(&full, e.suf, e.sn);
        if (ps__keycmp(full.data, full.len, lo->data, lo->len) >= 0 &&
            ps__keycmp(full.data, full.len, hi->data, hi->len) < 0) {
            *removed += 1;
            continue;
        }
        ps__bucket_add(out, e.suf, e.sn, e.val, e.vn);
        kept++;
    }
    rt_buf_free(&full);
    if (rc != 0) {
        return RT_ECORRUPT;
    }
    return ps__bucket_store(s, txn, &k, out, kept);
}

/* One chunk of a drop (a table or a span): in one transaction, deletes
 * up to @max_keys LMDB records holding keys in [@lo, @hi) (a bucket
 * straddling a bound is rewritten without the entries inside), then puts
 * the marker @mk -> @mv[0..mvn) while keys remain or deletes it when none do.
 * Adds the entities deleted to *deleted. Returns 1 (keys remain), 0 or a
 * negative code. */
static int ps__drop_chunk(struct ps_store *s,
                          const struct rt_buf *lo,
                          const struct rt_buf *hi,
                          const struct rt_buf *mk,
                          const void *mv,
                          size_t mvn,
                          size_t max_keys,
                          uint64_t *deleted)
{
    uint64_t entities = 0;
    struct ps__it it;
    MDB_txn *txn;
    MDB_val k, v;
    size_t n = 0;
    int more = 0;
    int rc;

    rc = mdb_txn_begin(s->env, NULL, 0, &txn);
    if (rc != 0) {
        return rt_lmdb_err(rc);
    }
    rc = ps__it_open(&it, s, txn);
    while (rc == 0) {
        /* Re-seek after each change: simple, and a B-tree descent costs
         * about a microsecond. */
        rc = ps__it_seek(&it, lo->data, lo->len);
        if (rc == RT_ENOTFOUND ||
            (rc == 0 && ps__keycmp(it.key, it.kn, hi->data, hi->len) >= 0)) {
            rc = 0;
            break;
        }
        if (rc != 0) {
            break;
        }
        if (n >= max_keys) {
            more = 1;
            break;
        }
        if (it.in_bucket) {
            rc = ps__bucket_cut(s, txn, it.k, it.v, lo, hi, &entities);
        } else {
            rc = rt_lmdb_err(mdb_cursor_del(it.cur, 0));
            entities++;
        }
        n++;
    }
    ps__it_close(&it);
    if (rc != 0) {
        goto err;
    }
    k = ps__val(mk->data, mk->len);
    if (more) {
        v = ps__val(mv, mvn);
        rc = mdb_put(txn, s->meta, &k, &v, 0);
    } else {
        rc = mdb_del(txn, s->meta, &k, NULL);
        if (rc == MDB_NOTFOUND) {
            rc = 0;
        }
    }
    if (rc != 0) {
        rc = rt_lmdb_err(rc);
        goto err;
    }
    rc = mdb_txn_commit(txn);
    if (rc != 0) {
        return rt_lmdb_err(rc);
    }
    *deleted += entities;
    return more;

err:
    mdb_txn_abort(txn);
    return rc;
}

int ps_store_span_drop_chunk(struct ps_store *s,
                             uint64_t seq,
                             const struct ps_span *sp,
                             size_t max_keys,
                             uint64_t *deleted)
{
    struct rt_buf lo = RT_BUF_INIT, hi = RT_BUF_INIT;
    struct rt_buf mk = RT_BUF_INIT, mv = RT_BUF_INIT;
    int rc;

    ps_span_keys(sp, &lo, &hi);
    ps_store_span_marker(seq, sp, &mk, &mv);
    rc = ps__drop_chunk(s, &lo, &hi, &mk, mv.data, mv.len, max_keys, deleted);
    rt_buf_free(&lo);
    rt_buf_free(&hi);
    rt_buf_free(&mk);
    rt_buf_free(&mv);
    return rc;
}

/* A table drop is the drop of the table's whole key span; its marker is
 * PS_META_DROP ‖ u64be table_id -> "". */
int ps_store_drop_chunk(struct ps_store *s,
                        uint64_t table_id,
                        size_t max_keys,
                        uint64_t *deleted)
{
    struct rt_buf lo = RT_BUF_INIT, hi = RT_BUF_INIT;
    struct rt_buf mk = RT_BUF_INIT;
    int rc;

    ps__append_u64be(&lo, table_id); /* the table's first key */
    rt_key_table_end(&hi, table_id);
    ps_store_meta_key(&mk, PS_META_DROP, table_id);
    rc = ps__drop_chunk(s, &lo, &hi, &mk, "", 0, max_keys, deleted);
    rt_buf_free(&lo);
    rt_buf_free(&hi);
    rt_buf_free(&mk);
    return rc;
}

struct ps__spans_arg
{
    ps_span_cb cb;
    void *arg;
};

static int ps__spans_one(uint64_t seq, const uint8_t *val, size_t vn, void *arg)
{
    struct ps__spans_arg *a = arg;
    const uint8_t *q = val + 9, *end = val + vn, *lp, *hp;
    struct ps_span sp;
    char *low, *high = NULL;
    size_t ln, hn;

    if (vn < 9 || ps__get_field(&q, end, &lp, &ln) != 0 ||
        ps__get_field(&q, end, &hp, &hn) != 0 || q != end) {
        rt_log(RT_LOG_WARN, "store: ignoring a malformed span marker");
        return 0;
    }
    low = rt_xstrndup((const char *)lp, ln);
    if (val[8]) {
        high = rt_xstrndup((const char *)hp, hn);
    }
    sp.table_id = rt_get_u64le(val);
    sp.low = low;
    sp.high = high;
    a->cb(seq, &sp, a->arg);
    free(low);
    free(high);
    return 0;
}

int ps_store_pending_spans(struct ps_store *s, ps_span_cb cb, void *arg)
{
    struct ps__spans_arg a = {cb, arg};
    return ps_store_meta_scan(s, PS_META_SPAN_PREFIX, ps__spans_one, &a);
}
