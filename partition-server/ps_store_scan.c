/* Store read path: point gets, filtered, projected and budgeted range
 * scans with their continuation keys, range totals (count scans), and
 * the counts and snapshots of the spans a range move reads. Each runs in its
 * own LMDB read transaction, so readers never wait for the writer. Thread: any
 * thread (point gets on the loop, scans and snapshots on the threadpool). */
#include "ps_store.h"
#include "ps_store_int.h"

#include <lmdb.h>
#include <stdlib.h>
#include <string.h>

#include "rt_alloc.h"
#include "rt_entity.h"
#include "rt_err.h"
#include "rt_filter.h"
#include "rt_key.h"
#include "rt_lmdb.h"
#include "rt_log.h"
#include "rt_time.h"

/* Reads */

int ps_store_get(struct ps_store *s,
                 uint64_t table_id,
                 const char *pk,
                 const char *rk,
                 struct rt_buf *value)
{
    uint64_t txn_id;
    return ps_store_get_txn(s, table_id, pk, rk, value, &txn_id);
}

int ps_store_get_txn(struct ps_store *s,
                     uint64_t table_id,
                     const char *pk,
                     const char *rk,
                     struct rt_buf *value,
                     uint64_t *txn_id)
{
    struct rt_buf key = RT_BUF_INIT;
    MDB_txn *txn;
    MDB_val v;
    int rc;

    *txn_id = 0;
    rt_key_entity(&key, table_id, pk, strlen(pk), rk, strlen(rk));
    rc = mdb_txn_begin(s->env, NULL, MDB_RDONLY, &txn);
    if (rc != 0) {
        rt_buf_free(&key);
        return rt_lmdb_err(rc);
    }
    *txn_id = (uint64_t)mdb_txn_id(txn);
    rc = ps__lookup(s, txn, key.data, key.len, &v);
    if (rc == 0) {
        rc = ps__value_check(key.data, key.len, v.mv_data, v.mv_size);
    }
    if (rc == 0) {
        rt_buf_append(value, v.mv_data, v.mv_size);
    }
    mdb_txn_abort(txn);
    rt_buf_free(&key);
    return rc;
}

/* Empties @sc's results (what they held is freed already or was never
 * set): the state ps_scan_free leaves and a scan starts from. */
static void ps__scan_clear(struct ps_scan *sc)
{
    sc->recs = NULL;
    sc->n = 0;
    sc->more = 0;
    sc->next_pk = NULL;
    sc->next_rk = NULL;
}

void ps_scan_free(struct ps_scan *sc)
{
    for (size_t i = 0; i < sc->n; i++) {
        free(sc->recs[i].pk);
        free(sc->recs[i].rk);
        free(sc->recs[i].value);
    }
    free(sc->recs);
    free(sc->next_pk);
    free(sc->next_rk);
    ps__scan_clear(sc);
}

/* Appends enc(@s[0..n)) to @out; with @after, the terminator is 0x00 0x02
 * instead of 0x00 0x01, which sorts after every key whose component is
 * exactly @s and before every key whose component is larger (rt_key.h: a
 * larger string continues with a byte >= 0x01 where @s ends, or an escaped
 * 0x00 0xFF). */
static void ps__enc_bound(struct rt_buf *out,
                          const char *s,
                          size_t n,
                          int after)
{
    rt_key_enc(out, s, n);
    if (after) {
        out->data[out->len - 1] = 0x02;
    }
}

/* Scan key range from the filter's bounds: *lo (when set) raises the start,
 * *hi (when set) lowers the end. Both are storage keys of @table_id. */
static void ps__filter_keys(const struct rt_filter_bounds *fb,
                            uint64_t table_id,
                            struct rt_buf *lo,
                            int *lo_set,
                            struct rt_buf *hi,
                            int *hi_set)
{
    *lo_set = *hi_set = 0;
    if (fb->pk_eq) {
        const struct rt_filter_bound *p = &fb->pk_lo;
        ps__append_u64be(lo, table_id);
        rt_key_enc(lo, p->s, p->n);
        if (fb->rk_lo.set) {
            ps__enc_bound(lo, fb->rk_lo.s, fb->rk_lo.n, !fb->rk_lo.inclusive);
        }
        *lo_set = 1;
        ps__append_u64be(hi, table_id);
        if (fb->rk_hi.set) {
            rt_key_enc(hi, p->s, p->n);
            ps__enc_bound(hi, fb->rk_hi.s, fb->rk_hi.n, fb->rk_hi.inclusive);
        } else {
            ps__enc_bound(hi, p->s, p->n, 1);
        }
        *hi_set = 1;
        return;
    }
    if (fb->pk_lo.set) {
        ps__append_u64be(lo, table_id);
        ps__enc_bound(lo, fb->pk_lo.s, fb->pk_lo.n, !fb->pk_lo.inclusive);
        *lo_set = 1;
    }
    if (fb->pk_hi.set) {
        ps__append_u64be(hi, table_id);
        ps__enc_bound(hi, fb->pk_hi.s, fb->pk_hi.n, fb->pk_hi.inclusive);
        *hi_set = 1;
    }
}

static int ps__select_has(const struct ps_scan *sc, const char *name, size_t n)
{
    for (size_t i = 0; i < sc->n_select; i++) {
        const char *s = sc->select[i];
        if (strlen(s) == n && memcmp(s, name, n) == 0) {
            return 1;
        }
    }
    return 0;
}

/* Appends the projection of stored value @v (header unchanged, blob with
 * only the selected properties) to @out. */
static int ps__project(const struct ps_scan *sc,
                       const uint8_t *v,
                       size_t vn,
                       struct rt_buf *out)
{
    struct rt_props_writer pw;
    struct rt_props_iter it;
    struct rt_prop p;
    const uint8_t *blob;
    size_t blob_n;
    uint64_t ticks;
    uint8_t flags;
    int rv;

    if (rt_value_decode(v, vn, &ticks, &flags, &blob, &blob_n) != 0 ||
        rt_props_iter_init(&it, blob, blob_n) != 0) {
        return RT_ECORRUPT;
    }
    rt_buf_append(out, v, RT_VALUE_HDR_SIZE);
    /* The blob changes, so the stored crc would no longer match it. */
    rt_value_unseal(out->data + out->len - RT_VALUE_HDR_SIZE,
                    RT_VALUE_HDR_SIZE);
    rt_props_begin(&pw, out);
    while ((rv = rt_props_next(&it, &p)) == 1) {
        if (ps__select_has(sc, p.name, p.name_len)) {
            rt_props_add(&pw, &p);
        }
    }
    rt_props_end(&pw);
    return rv == 0 ? 0 : RT_ECORRUPT;
}

static int ps__scan_add(struct ps_scan *sc,
                        size_t *cap,
                        struct rt_buf *pk,
                        struct rt_buf *rk,
                        const uint8_t *v,
                        size_t vn,
                        int project,
                        struct rt_buf *pbuf)
{
    struct ps_rec *r;
    int rc;

    if (sc->n == *cap) {
        size_t ncap = *cap ? *cap * 2 : 16;
        struct ps_rec *nr = realloc(sc->recs, ncap * sizeof(*nr));
        if (!nr) {
            return RT_ENOMEM;
        }
        sc->recs = nr;
        *cap = ncap;
    }
    if (project) {
        rt_buf_reset(pbuf);
        if ((rc = ps__project(sc, v, vn, pbuf)) != 0) {
            return rc;
        }
        v = pbuf->data;
        vn = pbuf->len;
    }
    r = &sc->recs[sc->n];
    r->value = malloc(vn ? vn : 1);
    if (!r->value) {
        return RT_ENOMEM;
    }
    if (vn) {
        memcpy(r->value, v, vn);
    }
    r->value_len = vn;
    r->pk = rt_xstrndup((const char *)pk->data, pk->len);
    r->rk = rt_xstrndup((const char *)rk->data, rk->len);
    sc->n++;
    sc->bytes += vn;
    return 0;
}

int ps_store_scan(struct ps_store *s, struct ps_scan *sc)
{
    struct rt_buf start = RT_BUF_INIT, end = RT_BUF_INIT;
    struct rt_buf flo = RT_BUF_INIT, fhi = RT_BUF_INIT;
    struct rt_buf pk = RT_BUF_INIT, rk = RT_BUF_INIT, pbuf = RT_BUF_INIT;
    struct rt_filter_bounds fb;
    unsigned limit = sc->limit && sc->limit < PS_SCAN_MAX_LIMIT
                         ? sc->limit
                         : PS_SCAN_MAX_LIMIT;
    size_t max_bytes = sc->max_bytes ? sc->max_bytes : PS_SCAN_MAX_BYTES;
    uint64_t deadline =
        rt_time_mono_ms() + (sc->budget_ms ? sc->budget_ms : PS_SCAN_BUDGET_MS);
    int end_from_filter = 0, lo_set, hi_set, out_of_time = 0;
    int keys_in_filter, project = 0;
    size_t cap = 0;
    MDB_txn *txn = NULL;
    struct ps__it it;
    uint64_t tid;

    sc->txn_id = 0;
    int rc;

    ps__scan_clear(sc);
    sc->done = 0;
    sc->scanned = 0;
    sc->bytes = 0;
    memset(&it, 0, sizeof(it));
    rt_buf_init(&it.kb);

    for (size_t i = 0; i < sc->n_select; i++) {
        project = 1;
        if (strcmp(sc->select[i], "*") == 0) {
            project = 0;
            break;
        }
    }
    keys_in_filter = rt_filter_references(sc->filter, "PartitionKey", 12) ||
                     rt_filter_references(sc->filter, "RowKey", 6);
    rt_filter_bounds(sc->filter, &fb);
    if (fb.empty) {
        sc->done = 1; /* no entity can match, here or anywhere */
        rc = 0;
        goto out;
    }

    /* Start at max(range low, resume key, filter low); end at min(range
     * high, filter high). */
    rt_key_pk_prefix(&start, sc->table_id, sc->low, strlen(sc->low));
    if (sc->has_start) {
        struct rt_buf st = RT_BUF_INIT;
        rt_key_entity(&st, sc->table_id, sc->start_pk, strlen(sc->start_pk),
                      sc->start_rk, strlen(sc->start_rk));
        if (ps__keycmp(st.data, st.len, start.data, start.len) > 0) {
            rt_buf_free(&start);
            start = st;
        } else {
            rt_buf_free(&st);
        }
    }
    if (sc->high) {
        rt_key_pk_prefix(&end, sc->table_id, sc->high, strlen(sc->high));
    } else {
        rt_key_table_end(&end, sc->table_id);
    }
    ps__filter_keys(&fb, sc->table_id, &flo, &lo_set, &fhi, &hi_set);
    if (lo_set && ps__keycmp(flo.data, flo.len, start.data, start.len) > 0) {
        rt_buf_reset(&start);
        rt_buf_append(&start, flo.data, flo.len);
    }
    if (hi_set && ps__keycmp(fhi.data, fhi.len, end.data, end.len) <= 0) {
        rt_buf_reset(&end);
        rt_buf_append(&end, fhi.data, fhi.len);
        end_from_filter = 1;
    }
    if (ps__keycmp(start.data, start.len, end.data, end.len) >= 0) {
        sc->done = end_from_filter;
        rc = 0;
        goto out;
    }

    rc = mdb_txn_begin(s->env, NULL, MDB_RDONLY, &txn);
    if (rc != 0) {
        rc = rt_lmdb_err(rc);
        txn = NULL;
        goto out;
    }
    sc->txn_id = (uint64_t)mdb_txn_id(txn);
    rt_buf_free(&it.kb);
    if ((rc = ps__it_open(&it, s, txn)) != 0) {
        goto out;
    }
    for (rc = ps__it_seek(&it, start.data, start.len); rc == 0;
         rc = ps__it_next(&it)) {
        int split = 0;
        if (ps__keycmp(it.key, it.kn, end.data, end.len) >= 0) {
            break;
        }
        if (sc->n >= limit || sc->bytes >= max_bytes || out_of_time ||
            (sc->max_scanned && sc->scanned >= sc->max_scanned)) {
            /* Page budget spent, and the range still has this key. */
            rt_buf_reset(&pk);
            rt_buf_reset(&rk);
            if (rt_key_split(it.key, it.kn, &tid, &pk, &rk) != 0) {
                rc = RT_ECORRUPT;
                goto out_err;
            }
            sc->more = 1;
            sc->next_pk = rt_xstrndup((const char *)pk.data, pk.len);
            sc->next_rk = rt_xstrndup((const char *)rk.data, rk.len);
            break;
        }
        sc->scanned++;
        /* Checked before the filter looks at it: a bad value fails the
         * scan even when the filter would have skipped it, so a scan
         * never decides on corrupt data. */
        if ((rc = ps__value_check(it.key, it.kn, it.val, it.vn)) != 0) {
            if (sc->bad_key) {
                rt_buf_reset(sc->bad_key);
                rt_buf_append(sc->bad_key, it.key, it.kn);
            }
            goto out_err;
        }
        if (sc->scanned % PS_SCAN_CLOCK_EVERY == 0 &&
            rt_time_mono_ms() >= deadline) {
            out_of_time = 1; /* stop before the next key */
        }
        if (sc->filter) {
            const uint8_t *blob;
            size_t blob_n;
            uint64_t ticks;
            uint8_t flags;
            int m;
            if (keys_in_filter) {
                rt_buf_reset(&pk);
                rt_buf_reset(&rk);
                if (rt_key_split(it.key, it.kn, &tid, &pk, &rk) != 0) {
                    rc = RT_ECORRUPT;
                    goto out_err;
                }
                split = 1;
            }
            if (rt_value_decode(it.val, it.vn, &ticks, &flags, &blob,
                                &blob_n) != 0) {
                rc = RT_ECORRUPT;
                goto out_err;
            }
            m = rt_filter_eval(sc->filter, (const char *)pk.data, pk.len,
                               (const char *)rk.data, rk.len, ticks, blob,
                               blob_n);
            if (m < 0) {
                rc = m;
                goto out_err;
            }
            if (m == 0) {
                continue;
            }
        }
        if (!split) {
            rt_buf_reset(&pk);
            rt_buf_reset(&rk);
            if (rt_key_split(it.key, it.kn, &tid, &pk, &rk) != 0) {
                rc = RT_ECORRUPT;
                goto out_err;
            }
        }
        rc = ps__scan_add(sc, &cap, &pk, &rk, it.val, it.vn, project, &pbuf);
        if (rc != 0) {
            goto out_err;
        }
    }
    if (rc == RT_ENOTFOUND) {
        rc = 0; /* end of the database */
    }
    if (rc == 0) {
        sc->done = !sc->more && end_from_filter;
        goto out;
    }
out_err:
    ps_scan_free(sc);
out:
    ps__it_close(&it);
    if (txn) {
        mdb_txn_abort(txn);
    }
    rt_buf_free(&start);
    rt_buf_free(&end);
    rt_buf_free(&flo);
    rt_buf_free(&fhi);
    rt_buf_free(&pk);
    rt_buf_free(&rk);
    rt_buf_free(&pbuf);
    return rc;
}

int ps_store_range_stats(struct ps_store *s,
                         uint64_t table_id,
                         const char *low,
                         const char *high,
                         uint64_t *count,
                         uint64_t *bytes,
                         uint64_t *txn_id)
{
    struct rt_buf start = RT_BUF_INIT, end = RT_BUF_INIT;
    struct ps__it it;
    MDB_txn *txn;
    uint64_t c = 0, b = 0;
    int rc;

    rt_key_pk_prefix(&start, table_id, low, strlen(low));
    if (high) {
        rt_key_pk_prefix(&end, table_id, high, strlen(high));
    } else {
        rt_key_table_end(&end, table_id);
    }
    rc = mdb_txn_begin(s->env, NULL, MDB_RDONLY, &txn);
    if (rc != 0) {
        rt_buf_free(&start);
        rt_buf_free(&end);
        return rt_lmdb_err(rc);
    }
    *txn_id = (uint64_t)mdb_txn_id(txn);
    rc = ps__it_open(&it, s, txn);
    if (rc == 0) {
        for (rc = ps__it_seek(&it, start.data, start.len); rc == 0;
             rc = ps__it_next(&it)) {
            if (ps__keycmp(it.key, it.kn, end.data, end.len) >= 0) {
                break;
            }
            c++;
            b += it.kn + it.vn;
        }
        if (rc == RT_ENOTFOUND) {
            rc = 0;
        }
    }
    ps__it_close(&it);
    mdb_txn_abort(txn);
    rt_buf_free(&start);
    rt_buf_free(&end);
    if (rc == 0) {
        *count = c;
        *bytes = b;
    }
    return rc;
}

/* Spans */

int ps_store_span_count(struct ps_store *s,
                        const struct ps_span *sp,
                        uint64_t *count)
{
    uint64_t bytes, txn;
    return ps_store_range_stats(s, sp->table_id, sp->low ? sp->low : "",
                                sp->high, count, &bytes, &txn);
}

/* Snapshots */

struct ps_snap
{
    struct ps_store *s;
    MDB_txn *txn;
    struct ps__it it;
    struct rt_buf start, end;
    int state; /* 0: not positioned; 1: it holds the next entry; 2: done */
};

int ps_store_snap_open(struct ps_store *s,
                       const struct ps_span *sp,
                       struct ps_snap **out,
                       uint64_t *txn_id)
{
    struct ps_snap *sn = calloc(1, sizeof(*sn));
    int rc;

    if (!sn) {
        return RT_ENOMEM;
    }
    sn->s = s;
    rt_buf_init(&sn->start);
    rt_buf_init(&sn->end);
    ps_span_keys(sp, &sn->start, &sn->end);
    rc = mdb_txn_begin(s->env, NULL, MDB_RDONLY, &sn->txn);
    if (rc != 0) {
        rt_buf_free(&sn->start);
        rt_buf_free(&sn->end);
        free(sn);
        return rt_lmdb_err(rc);
    }
    rc = ps__it_open(&sn->it, s, sn->txn);
    if (rc != 0) {
        mdb_txn_abort(sn->txn);
        rt_buf_free(&sn->start);
        rt_buf_free(&sn->end);
        free(sn);
        return rc;
    }
    *txn_id = (uint64_t)mdb_txn_id(sn->txn);
    *out = sn;
    return 0;
}

int ps_store_snap_repl_get(struct ps_snap *sn,
                           uint64_t range_id,
                           struct ps_rstate *out)
{
    return ps__rs_snap_read(sn->s, sn->txn, range_id, out);
}

int ps_store_snap_next(struct ps_snap *sn,
                       struct rt_buf *out,
                       size_t max_bytes,
                       uint64_t *n,
                       uint64_t *bytes)
{
    size_t added = 0;
    int rc = 0;

    if (sn->state == 2) {
        return 0;
    }
    if (sn->state == 0) {
        rc = ps__it_seek(&sn->it, sn->start.data, sn->start.len);
        sn->state = 1;
    }
    for (; rc == 0; rc = ps__it_next(&sn->it)) {
        if (ps__keycmp(sn->it.key, sn->it.kn, sn->end.data, sn->end.len) >= 0) {
            rc = RT_ENOTFOUND;
            break;
        }
        if (added >= max_bytes) {
            return 1; /* the current entry goes first next time */
        }
        /* A move must fail rather than copy a bad value to its target. */
        if ((rc = ps__value_check(sn->it.key, sn->it.kn, sn->it.val,
                                  sn->it.vn)) != 0) {
            return rc;
        }
        ps_change_append(out, 0, sn->it.key, sn->it.kn, sn->it.val, sn->it.vn,
                         0);
        added += sn->it.kn + sn->it.vn;
        *n += 1;
        *bytes += sn->it.kn + sn->it.vn;
    }
    if (rc == RT_ENOTFOUND) {
        sn->state = 2;
        return 0;
    }
    return rc;
}

int ps_store_snap_keys(struct ps_snap *sn,
                       const struct ps_fetch_key *keys,
                       size_t n,
                       struct rt_buf *out,
                       uint64_t *bytes)
{
    for (size_t i = 0; i < n; i++) {
        MDB_val v;
        int rc = ps__lookup(sn->s, sn->txn, keys[i].key, keys[i].kn, &v);
        if (rc == RT_ENOTFOUND) {
            ps_change_append(out, 0, keys[i].key, keys[i].kn, NULL, 0, 1);
            *bytes += keys[i].kn;
            continue;
        }
        if (rc == 0) {
            rc = ps__value_check(keys[i].key, keys[i].kn, v.mv_data, v.mv_size);
        }
        if (rc != 0) {
            return rc;
        }
        ps_change_append(out, 0, keys[i].key, keys[i].kn, v.mv_data, v.mv_size,
                         0);
        *bytes += keys[i].kn + v.mv_size;
    }
    return 0;
}

void ps_store_snap_close(struct ps_snap *sn)
{
    if (!sn) {
        return;
    }
    ps__it_close(&sn->it);
    mdb_txn_abort(sn->txn);
    rt_buf_free(&sn->start);
    rt_buf_free(&sn->end);
    free(sn);
}
