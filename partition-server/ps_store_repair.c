/* Store side of corruption repair and scrub (docs/DESIGN-replication.md
 * §5.6, §13 step 13): read keys for another replica at a known LSN, put a
 * fetched value in place of a corrupt one, and verify stored values a
 * chunk at a time.
 *
 * Why a repair is safe without an LSN of its own: a value fetched from a
 * peer is the key's value at the peer's applied LSN f. The repair runs on
 * the writer thread in its own transaction and puts that value only when
 * (a) this replica's applied LSN for the range is >= f, and (b) the local
 * value still fails its checksum. Every write of the key at an LSN <= f
 * is in the fetched value; one at an LSN in (f, applied] would have
 * replaced the corrupt value here, so (b) says there was none. The
 * replica then holds exactly what its LSN says it holds, and nothing it
 * sends elsewhere changes. */
#include "ps_store.h"
#include "ps_store_int.h"

#include <lmdb.h>
#include <stdlib.h>
#include <string.h>

#include "rt_buf.h"
#include "rt_entity.h"
#include "rt_err.h"
#include "rt_lmdb.h"

int ps_store_fetch(struct ps_store *s,
                   uint64_t range_id,
                   const struct ps_fetch_key *keys,
                   size_t n,
                   struct rt_buf *vals,
                   int *found,
                   uint64_t *lsn)
{
    struct ps_rstate rs;
    MDB_txn *txn;
    int had, rc = mdb_txn_begin(s->env, NULL, MDB_RDONLY, &txn);

    if (rc != 0) {
        return rt_lmdb_err(rc);
    }
    rc = ps__rs_read(s, txn, range_id, &rs, &had);
    if (rc == 0 && (!had || rs.state != PS_RS_OK)) {
        rc = RT_ENOTFOUND; /* no complete copy here to answer from */
    }
    if (rc == 0) {
        *lsn = rs.applied_lsn;
    }
    for (size_t i = 0; rc == 0 && i < n; i++) {
        MDB_val v;
        int r = ps__lookup(s, txn, keys[i].key, keys[i].kn, &v);
        found[i] = r == 0;
        if (r == RT_ENOTFOUND) {
            continue;
        }
        if (r == 0) {
            r = ps__value_check(keys[i].key, keys[i].kn, v.mv_data, v.mv_size);
        }
        if (r != 0) {
            rc = r; /* a corrupt answer would spread the damage */
            break;
        }
        rt_buf_append(&vals[i], v.mv_data, v.mv_size);
    }
    mdb_txn_abort(txn);
    return rc;
}

int ps_store_repair(struct ps_store *s,
                    uint64_t range_id,
                    const uint8_t *key,
                    size_t kn,
                    const uint8_t *val,
                    size_t vn,
                    uint64_t min_lsn)
{
    struct ps_rstate rs;
    MDB_txn *txn;
    MDB_val v;
    int had, rc, cur;

    if (val && rt_value_check(val, vn, key, kn) != 0) {
        return RT_ECORRUPT; /* never replace damage with damage */
    }
    rc = mdb_txn_begin(s->env, NULL, 0, &txn);
    if (rc != 0) {
        return rt_lmdb_err(rc);
    }
    rc = ps__rs_read(s, txn, range_id, &rs, &had);
    if (rc == 0 && (!had || rs.applied_lsn < min_lsn)) {
        rc = RT_EBUSY; /* behind the peer: ask again once caught up */
    }
    if (rc != 0) {
        goto abort;
    }
    cur = ps__lookup(s, txn, key, kn, &v);
    if (cur == 0 && rt_value_check(v.mv_data, v.mv_size, key, kn) == 0) {
        rc = RT_EEXIST; /* written since: nothing to repair */
        goto abort;
    }
    if (cur == RT_ENOTFOUND && !val) {
        rc = RT_EEXIST;
        goto abort;
    }
    if (cur != 0 && cur != RT_ENOTFOUND && cur != RT_ECORRUPT) {
        rc = cur;
        goto abort;
    }
    rc = val ? ps__kv_put(s, txn, key, kn, val, vn)
             : ps__kv_del(s, txn, key, kn);
    if (rc != 0) {
        goto abort;
    }
    rc = mdb_txn_commit(txn);
    return rc == 0 ? 0 : rt_lmdb_err(rc);
abort:
    mdb_txn_abort(txn);
    return rc;
}

int ps_store_scrub(struct ps_store *s,
                   struct rt_buf *resume,
                   size_t max_bytes,
                   struct rt_buf *bad,
                   size_t max_bad,
                   size_t *n_bad,
                   uint64_t *bytes,
                   int *wrapped)
{
    struct ps__it it;
    MDB_txn *txn;
    int rc = mdb_txn_begin(s->env, NULL, MDB_RDONLY, &txn);

    *n_bad = 0;
    *bytes = 0;
    *wrapped = 0;
    if (rc != 0) {
        return rt_lmdb_err(rc);
    }
    memset(&it, 0, sizeof(it));
    if ((rc = ps__it_open(&it, s, txn)) != 0) {
        mdb_txn_abort(txn);
        return rc;
    }
    /* LMDB refuses an empty seek key; one zero byte sorts first. */
    static const uint8_t first[1] = {0};
    const uint8_t *from = resume->len ? resume->data : first;
    size_t from_n = resume->len ? resume->len : sizeof(first);
    for (rc = ps__it_seek(&it, from, from_n); rc == 0; rc = ps__it_next(&it)) {
        if (*bytes >= max_bytes || *n_bad >= max_bad) {
            break;
        }
        *bytes += it.kn + it.vn;
        if (rt_value_check(it.val, it.vn, it.key, it.kn) != 0) {
            ps_scrub_key_append(bad, it.key, it.kn);
            (*n_bad)++;
        }
    }
    if (rc == 0) {
        /* Stopped on an unexamined entry: resume there next time. */
        struct rt_buf at = RT_BUF_INIT;
        rt_buf_append(&at, it.key, it.kn); /* it.key may point into resume */
        rt_buf_free(resume);
        *resume = at;
    } else if (rc == RT_ENOTFOUND) {
        rt_buf_reset(resume);
        *wrapped = 1;
        rc = 0;
    }
    ps__it_close(&it);
    mdb_txn_abort(txn);
    return rc;
}

void ps_scrub_key_append(struct rt_buf *out, const uint8_t *key, size_t kn)
{
    uint8_t len[4] = {(uint8_t)(kn >> 24), (uint8_t)(kn >> 16),
                      (uint8_t)(kn >> 8), (uint8_t)kn};
    rt_buf_append(out, len, sizeof(len));
    rt_buf_append(out, key, kn);
}

int ps_scrub_key_next(const struct rt_buf *in,
                      size_t *off,
                      const uint8_t **key,
                      size_t *kn)
{
    size_t n;

    if (*off == in->len) {
        return 0;
    }
    if (in->len - *off < 4) {
        return RT_EINVAL;
    }
    n = (size_t)in->data[*off] << 24 | (size_t)in->data[*off + 1] << 16 |
        (size_t)in->data[*off + 2] << 8 | in->data[*off + 3];
    if (in->len - *off - 4 < n) {
        return RT_EINVAL;
    }
    *key = in->data + *off + 4;
    *kn = n;
    *off += 4 + n;
    return 1;
}
