/* Store core: the LMDB environment (open, after the data-file check of
 * ps_store_file.c; close; the data, meta and repl DBs), key validation,
 * long-key buckets, point access, ordered iteration, the check of a value
 * read out (ps__value_check), change capture and the storage keys of a
 * span. The rest of the store sits on it: group commits
 * (ps_store_write.c), reads (ps_store_scan.c), meta records and drops
 * (ps_store_meta.c), replica state records and LSNs (ps_store_repl.c),
 * all behind ps_store.h.
 *
 * Long keys (ps_store.h): every access to the "data" DB goes through
 * ps__lookup / ps__kv_put / ps__kv_del (point access) or struct ps__it
 * (ordered iteration), which hide the buckets. A bucket value is
 *   u8 PS_BUCKET_VERSION ‖ u8 0 ‖ u16 0 ‖ u32le count ‖
 *   count × (u32le suffix_len ‖ suffix ‖ u32le value_len ‖ value)
 * with entries sorted by suffix (memcmp; all share the T-byte prefix, so
 * this is full-key order). Its first byte (0xB1) can never start a stored
 * entity value (RT_VALUE_VERSION), so a bucket is never mistaken for one. */
#include "ps_store.h"
#include "ps_store_int.h"

#include <errno.h>
#include <lmdb.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "rt_crc32c.h"
#include "rt_entity.h"
#include "rt_err.h"
#include "rt_key.h"
#include "rt_lmdb.h"
#include "rt_log.h"

/* Helpers */

int ps__keycmp(const void *a, size_t an, const void *b, size_t bn)
{
    size_t m = an < bn ? an : bn;
    int c = m ? memcmp(a, b, m) : 0;
    if (c != 0) {
        return c;
    }
    return an < bn ? -1 : an > bn ? 1 : 0;
}

MDB_val ps__val(const void *p, size_t n)
{
    MDB_val v;
    v.mv_data = (void *)p;
    v.mv_size = n;
    return v;
}

/* Validation (spec §9) */

int ps_key_check(const char *s)
{
    return rt_entity_key_check(s, strlen(s), NULL);
}

/* Buckets */

int ps__bucket_open(const MDB_val *v, struct ps__bucket *b)
{
    const uint8_t *p = v->mv_data;
    if (v->mv_size < PS_BUCKET_HDR || p[0] != PS_BUCKET_VERSION) {
        return RT_ECORRUPT;
    }
    b->left = rt_get_u32le(p + 4);
    b->p = p + PS_BUCKET_HDR;
    b->end = p + v->mv_size;
    return 0;
}

/* Returns 1 (got @e), 0 (end) or RT_ECORRUPT. */
int ps__get_field(const uint8_t **p,
                  const uint8_t *end,
                  const uint8_t **out,
                  size_t *n)
{
    size_t left = (size_t)(end - *p);
    uint32_t len;

    if (left < 4 || (len = rt_get_u32le(*p)) > left - 4) {
        return RT_ECORRUPT;
    }
    *out = *p + 4;
    *n = len;
    *p += 4 + (size_t)len;
    return 0;
}

int ps__bucket_next(struct ps__bucket *b, struct ps__bent *e)
{
    if (b->left == 0) {
        return b->p == b->end ? 0 : RT_ECORRUPT;
    }
    if (ps__get_field(&b->p, b->end, &e->suf, &e->sn) != 0 ||
        ps__get_field(&b->p, b->end, &e->val, &e->vn) != 0) {
        return RT_ECORRUPT;
    }
    b->left--;
    return 1;
}

void ps__append_u64be(struct rt_buf *out, uint64_t v)
{
    rt_put_u64be(rt_buf_reserve(out, 8), v);
    out->len += 8;
}

uint8_t *ps__put_field(uint8_t *q, const void *p, size_t n)
{
    rt_put_u32le(q, (uint32_t)n);
    if (n) {
        memcpy(q + 4, p, n);
    }
    return q + 4 + n;
}

void ps__bucket_begin(struct rt_buf *out)
{
    rt_buf_reset(out);
    rt_buf_reserve(out, PS_BUCKET_HDR);
    memset(out->data, 0, PS_BUCKET_HDR);
    out->data[0] = PS_BUCKET_VERSION;
    out->len = PS_BUCKET_HDR;
}

int ps__bucket_store(struct ps_store *s,
                     MDB_txn *txn,
                     MDB_val *k,
                     struct rt_buf *out,
                     uint32_t count)
{
    MDB_val v;
    int rc;

    if (count == 0) {
        rc = mdb_del(txn, s->data, k, NULL);
        return rc == MDB_NOTFOUND ? 0 : rt_lmdb_err(rc);
    }
    rt_put_u32le(out->data + 4, count);
    v = ps__val(out->data, out->len);
    return rt_lmdb_err(mdb_put(txn, s->data, k, &v, 0));
}

void ps__bucket_add(struct rt_buf *out,
                    const uint8_t *suf,
                    size_t sn,
                    const uint8_t *val,
                    size_t vn)
{
    uint8_t *q = rt_buf_reserve(out, 8 + sn + vn);
    ps__put_field(ps__put_field(q, suf, sn), val, vn);
    out->len += 8 + sn + vn;
}

/* Change records and capture */

void ps_change_append(struct rt_buf *out,
                      uint64_t txn_id,
                      const uint8_t *key,
                      size_t kn,
                      const uint8_t *val,
                      size_t vn,
                      int deleted)
{
    uint8_t *q;

    if (deleted) {
        vn = 0;
    }
    q = rt_buf_reserve(out, 17 + kn + vn);
    rt_put_u64le(q, txn_id);
    q[8] = deleted ? 1 : 0;
    ps__put_field(ps__put_field(q + 9, key, kn), val, vn);
    out->len += 17 + kn + vn;
}

int ps_change_next(const uint8_t *p, size_t n, size_t *off, struct ps_change *c)
{
    const uint8_t *q = p + *off, *end = p + n;

    if (*off >= n) {
        return 0;
    }
    if (n - *off < 9) {
        return RT_ECORRUPT;
    }
    c->txn_id = rt_get_u64le(q);
    c->deleted = q[8] != 0;
    q += 9;
    if (ps__get_field(&q, end, &c->key, &c->kn) != 0 ||
        ps__get_field(&q, end, &c->val, &c->vn) != 0) {
        return RT_ECORRUPT;
    }
    *off = (size_t)(q - p);
    return 1;
}

void ps_store_capture(struct ps_store *s, int on)
{
    s->capture = on;
}

void ps_store_set_precommit(struct ps_store *s,
                            ps_store_precommit_fn fn,
                            void *arg)
{
    s->precommit = fn;
    s->precommit_arg = arg;
}

void ps_store_capture_take(struct ps_store *s, struct rt_buf *out)
{
    if (s->cap.len == 0) {
        return;
    }
    if (out->len == 0) {
        struct rt_buf t = *out;
        *out = s->cap;
        s->cap = t;
        rt_buf_reset(&s->cap);
        return;
    }
    rt_buf_append(out, s->cap.data, s->cap.len);
    rt_buf_reset(&s->cap);
}

int ps__value_check(const uint8_t *key, size_t kn, const uint8_t *v, size_t vn)
{
    uint64_t table_id = 0;

    if (rt_value_check(v, vn, key, kn) == 0) {
        return 0;
    }
    if (kn >= 8) {
        table_id = rt_get_u64be(key);
    }
    rt_log(RT_LOG_ERROR,
           "store: corrupt value (checksum mismatch) in table %llu, storage "
           "key of %zu bytes with crc32c %08x",
           (unsigned long long)table_id, kn, rt_crc32c(0, key, kn));
    return RT_ECORRUPT;
}

void ps__cap(struct ps_store *s,
             const uint8_t *key,
             size_t kn,
             const uint8_t *val,
             size_t vn,
             int deleted)
{
    s->changes++;
    if (s->capture) {
        ps_change_append(&s->cap, s->cur_txn, key, kn, val, vn, deleted);
    }
}

/* Point access to the data DB */

/* Finds the stored value of full storage key @key in @txn. On 0, *v points
 * into LMDB memory (valid until the next update in @txn or its end).
 * Returns 0, RT_ENOTFOUND, RT_ECORRUPT or an LMDB failure. */
int ps__lookup(struct ps_store *s,
               MDB_txn *txn,
               const uint8_t *key,
               size_t kn,
               MDB_val *v)
{
    struct ps__bucket b;
    struct ps__bent e;
    MDB_val k;
    int rc;

    if (kn < s->blen) {
        k = ps__val(key, kn);
        return rt_lmdb_err(mdb_get(txn, s->data, &k, v));
    }
    k = ps__val(key, s->blen);
    rc = mdb_get(txn, s->data, &k, v);
    if (rc != 0) {
        return rt_lmdb_err(rc);
    }
    if (ps__bucket_open(v, &b) != 0) {
        return RT_ECORRUPT;
    }
    while ((rc = ps__bucket_next(&b, &e)) == 1) {
        int c = ps__keycmp(e.suf, e.sn, key + s->blen, kn - s->blen);
        if (c == 0) {
            *v = ps__val(e.val, e.vn);
            return 0;
        }
        if (c > 0) {
            return RT_ENOTFOUND; /* sorted: it is not further on */
        }
    }
    return rc == 0 ? RT_ENOTFOUND : rc;
}

/* Puts (@val non-NULL) or deletes (@val NULL) the entry of long key @key in
 * its bucket, rewriting the bucket; an emptied bucket is deleted. */
static int ps__bucket_put(struct ps_store *s,
                          MDB_txn *txn,
                          const uint8_t *key,
                          size_t kn,
                          const uint8_t *val,
                          size_t vn)
{
    const uint8_t *suf = key + s->blen;
    size_t sn = kn - s->blen;
    struct rt_buf *out = &s->bbuf;
    struct ps__bucket b;
    struct ps__bent e;
    MDB_val k = ps__val(key, s->blen), v;
    uint32_t count = 0;
    int placed = 0;
    int rc;

    ps__bucket_begin(out);

    rc = mdb_get(txn, s->data, &k, &v);
    if (rc != 0 && rc != MDB_NOTFOUND) {
        return rt_lmdb_err(rc);
    }
    if (rc == 0) {
        if (ps__bucket_open(&v, &b) != 0) {
            return RT_ECORRUPT;
        }
        while ((rc = ps__bucket_next(&b, &e)) == 1) {
            int c = ps__keycmp(e.suf, e.sn, suf, sn);
            if (c >= 0 && !placed) {
                placed = 1;
                if (val) {
                    ps__bucket_add(out, suf, sn, val, vn);
                    count++;
                }
                if (c == 0) {
                    continue; /* replaced or deleted */
                }
            }
            ps__bucket_add(out, e.suf, e.sn, e.val, e.vn);
            count++;
        }
        if (rc != 0) {
            return RT_ECORRUPT;
        }
    }
    if (!placed && val) {
        ps__bucket_add(out, suf, sn, val, vn);
        count++;
    }
    return ps__bucket_store(s, txn, &k, out, count);
}

int ps__kv_put(struct ps_store *s,
               MDB_txn *txn,
               const uint8_t *key,
               size_t kn,
               const uint8_t *val,
               size_t vn)
{
    if (kn < s->blen) {
        MDB_val k = ps__val(key, kn), v = ps__val(val, vn);
        return rt_lmdb_err(mdb_put(txn, s->data, &k, &v, 0));
    }
    return ps__bucket_put(s, txn, key, kn, val, vn);
}

int ps__kv_del(struct ps_store *s, MDB_txn *txn, const uint8_t *key, size_t kn)
{
    if (kn < s->blen) {
        MDB_val k = ps__val(key, kn);
        return rt_lmdb_err(mdb_del(txn, s->data, &k, NULL));
    }
    return ps__bucket_put(s, txn, key, kn, NULL, 0);
}

/* Ordered iteration over logical entries (bucket entries flattened). */

/* Points @it at bucket entry @e; it->kb holds the bucket key (T bytes).
 * The full key is the bucket key ‖ the entry's suffix. */
static void ps__it_at_entry(struct ps__it *it, const struct ps__bent *e)
{
    rt_buf_append(&it->kb, e->suf, e->sn);
    it->key = it->kb.data;
    it->kn = it->kb.len;
    it->val = e->val;
    it->vn = e->vn;
}

/* Positions on the first entry of the record the cursor op @op lands on
 * (skipping empty buckets). Returns 0, RT_ENOTFOUND (end) or an error. */
static int ps__it_load(struct ps__it *it, MDB_cursor_op op)
{
    for (;;) {
        int rc = mdb_cursor_get(it->cur, &it->k, &it->v, op);
        if (rc != 0) {
            return rt_lmdb_err(rc);
        }
        op = MDB_NEXT;
        if (it->k.mv_size != it->s->blen) {
            it->in_bucket = 0;
            it->key = it->k.mv_data;
            it->kn = it->k.mv_size;
            it->val = it->v.mv_data;
            it->vn = it->v.mv_size;
            return 0;
        }
        struct ps__bent e;
        if (ps__bucket_open(&it->v, &it->b) != 0) {
            return RT_ECORRUPT;
        }
        rc = ps__bucket_next(&it->b, &e);
        if (rc < 0) {
            return rc;
        }
        if (rc == 0) {
            continue; /* an empty bucket is never written; skip it */
        }
        it->in_bucket = 1;
        rt_buf_reset(&it->kb);
        rt_buf_append(&it->kb, it->k.mv_data, it->k.mv_size);
        ps__it_at_entry(it, &e);
        return 0;
    }
}

int ps__it_next(struct ps__it *it)
{
    if (it->in_bucket) {
        struct ps__bent e;
        int rc = ps__bucket_next(&it->b, &e);
        if (rc < 0) {
            return rc;
        }
        if (rc == 1) {
            it->kb.len = it->s->blen;
            ps__it_at_entry(it, &e);
            return 0;
        }
    }
    return ps__it_load(it, MDB_NEXT);
}

/* Positions on the first entry whose full key is >= @key. The LMDB seek
 * uses the key cut to T bytes: a record before that cut holds only
 * entries before @key (cutting preserves order), and the entries of the
 * record found that are still smaller are skipped. */
int ps__it_seek(struct ps__it *it, const uint8_t *key, size_t kn)
{
    int rc;

    it->k = ps__val(key, kn < it->s->blen ? kn : it->s->blen);
    rc = ps__it_load(it, MDB_SET_RANGE);
    while (rc == 0 && ps__keycmp(it->key, it->kn, key, kn) < 0) {
        rc = ps__it_next(it);
    }
    return rc;
}

int ps__it_open(struct ps__it *it, struct ps_store *s, MDB_txn *txn)
{
    memset(it, 0, sizeof(*it));
    it->s = s;
    rt_buf_init(&it->kb);
    return rt_lmdb_err(mdb_cursor_open(txn, s->data, &it->cur));
}

void ps__it_close(struct ps__it *it)
{
    if (it->cur) {
        mdb_cursor_close(it->cur);
    }
    rt_buf_free(&it->kb);
}

/* Open / close */

/* A store written before buckets existed may hold keys of T or more bytes
 * (up to the LMDB maximum) as plain records: move them into buckets. Runs
 * once, in the transaction that first records T. */
static int ps__bucket_migrate(struct ps_store *s, MDB_txn *txn)
{
    struct rt_buf keys = RT_BUF_INIT, vals = RT_BUF_INIT;
    MDB_cursor *cur;
    MDB_val k, v;
    size_t moved = 0;
    int rc;

    rc = mdb_cursor_open(txn, s->data, &cur);
    if (rc != 0) {
        return rt_lmdb_err(rc);
    }
    for (rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST); rc == 0;
         rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
        if (k.mv_size >= s->blen) {
            ps__bucket_add(&keys, k.mv_data, k.mv_size, v.mv_data, 0);
            ps__bucket_add(&vals, v.mv_data, v.mv_size, NULL, 0);
        }
    }
    mdb_cursor_close(cur);
    rc = rc == MDB_NOTFOUND ? 0 : rt_lmdb_err(rc);
    for (size_t ko = 0, vo = 0; rc == 0 && ko < keys.len; moved++) {
        uint32_t kn = rt_get_u32le(keys.data + ko);
        uint32_t vn = rt_get_u32le(vals.data + vo);
        const uint8_t *kp = keys.data + ko + 4, *vp = vals.data + vo + 4;
        k = ps__val(kp, kn);
        rc = rt_lmdb_err(mdb_del(txn, s->data, &k, NULL));
        if (rc == 0) {
            rc = ps__bucket_put(s, txn, kp, kn, vp, vn);
        }
        ko += 8 + kn;
        vo += 8 + vn;
    }
    if (rc == 0 && moved > 0) {
        rt_log(RT_LOG_INFO, "store: moved %zu long keys into buckets", moved);
    }
    rt_buf_free(&keys);
    rt_buf_free(&vals);
    return rc;
}

/* Key format (rt_key.h). Format 1 kept U+E000..U+FFFF's UTF-8 lead bytes
 * 0xEE/0xEF as they are, so those keys sorted after the supplementary
 * characters; format 2 maps them to 0xF5/0xF6 (UTF-16 order). A store
 * without the meta record and with data is format 1; an empty one is made
 * format 2 at once. Migration rewrites only the keys whose PK or RK holds
 * 0xEE/0xEF (nothing else changes between the formats), in transactions of
 * at most PS__MIG_KEYS keys or PS__MIG_BYTES of values. It is idempotent:
 * a rewritten key holds no 0xEE/0xEF (rt_key_dec reads both forms, and
 * valid UTF-8 never holds 0xF5/0xF6, so no rewrite can land on an existing
 * key), so a crash between batches only makes the next open scan again;
 * the format record is written in the transaction of the last batch. */
#define PS__MIG_KEYS 1024
#define PS__MIG_BYTES (16u << 20)

/* Reads the key format: *fmt = 1 or RT_KEY_FORMAT. Records RT_KEY_FORMAT
 * in @txn when the record is missing and the data DB is empty. */
static int ps__key_format_get(struct ps_store *s,
                              MDB_txn *txn,
                              int rdonly,
                              uint32_t *fmt,
                              char *errmsg)
{
    MDB_val k = ps__val(PS_META_KEY_FORMAT, strlen(PS_META_KEY_FORMAT)), v;
    MDB_stat st;
    uint8_t b[4];
    int rc = mdb_get(txn, s->meta, &k, &v);

    if (rc == 0) {
        if (v.mv_size != 4 || (*fmt = rt_get_u32le(v.mv_data)) < 1) {
            rt_errmsg_printf(errmsg, "meta %s: bad value", PS_META_KEY_FORMAT);
            return RT_ECORRUPT;
        }
        if (*fmt > RT_KEY_FORMAT) {
            rt_errmsg_printf(errmsg,
                             "store has key format %u; this build reads "
                             "formats up to %d (a newer rt-partition-server "
                             "wrote it)",
                             *fmt, RT_KEY_FORMAT);
            return RT_ECORRUPT;
        }
        return 0;
    }
    if (rc != MDB_NOTFOUND) {
        rt_errmsg_printf(errmsg, "meta: %s", mdb_strerror(rc));
        return rt_lmdb_err(rc);
    }
    if ((rc = mdb_stat(txn, s->data, &st)) != 0) {
        rt_errmsg_printf(errmsg, "data: %s", mdb_strerror(rc));
        return rt_lmdb_err(rc);
    }
    *fmt = st.ms_entries == 0 ? RT_KEY_FORMAT : 1;
    if (*fmt == 1 || rdonly) {
        return 0;
    }
    rt_put_u32le(b, RT_KEY_FORMAT);
    v = ps__val(b, 4);
    rc = mdb_put(txn, s->meta, &k, &v, 0);
    if (rc != 0) {
        rt_errmsg_printf(errmsg, "meta: %s", mdb_strerror(rc));
    }
    return rt_lmdb_err(rc);
}

/* 1 when the PK or RK of storage key @key (format 1 or 2) holds a byte
 * that format 2 writes differently. */
static int ps__key_old_bytes(const uint8_t *key, size_t kn)
{
    for (size_t i = 8; i < kn; i++) {
        if (key[i] == 0xEE || key[i] == 0xEF) {
            return 1;
        }
    }
    return 0;
}

/* Rewrites the entries collected in @batch (ps__bucket_add fields: old
 * key, value) under their format 2 keys, resealing each value whose CRC
 * matched its old key (a value that did not match is moved as it is, so
 * reads still report it corrupt). */
static int ps__key_rewrite(struct ps_store *s,
                           MDB_txn *txn,
                           const struct rt_buf *batch)
{
    struct rt_buf pk = RT_BUF_INIT, rk = RT_BUF_INIT, nk = RT_BUF_INIT,
                  nv = RT_BUF_INIT;
    const uint8_t *p = batch->data, *end = p + batch->len;
    int rc = 0;

    while (rc == 0 && p < end) {
        const uint8_t *key, *val, *blob;
        size_t kn, vn, bn;
        uint64_t table_id, ticks;
        uint8_t flags = 0;

        if (ps__get_field(&p, end, &key, &kn) != 0 ||
            ps__get_field(&p, end, &val, &vn) != 0) {
            rc = RT_ECORRUPT;
            break;
        }
        rt_buf_reset(&pk);
        rt_buf_reset(&rk);
        rt_buf_reset(&nk);
        rt_buf_reset(&nv);
        if (rt_key_split(key, kn, &table_id, &pk, &rk) != 0) {
            rc = RT_ECORRUPT;
            break;
        }
        rt_key_entity(&nk, table_id, (const char *)pk.data, pk.len,
                      (const char *)rk.data, rk.len);
        rt_buf_append(&nv, val, vn);
        if (rt_value_decode(val, vn, &ticks, &flags, &blob, &bn) == 0 &&
            (flags & RT_VALUE_F_CRC) && rt_value_check(val, vn, key, kn) == 0) {
            rt_value_seal(nv.data, nv.len, nk.data, nk.len);
        }
        rc = ps__kv_del(s, txn, key, kn);
        if (rc == 0) {
            rc = ps__kv_put(s, txn, nk.data, nk.len, nv.data, nv.len);
        }
    }
    rt_buf_free(&pk);
    rt_buf_free(&rk);
    rt_buf_free(&nk);
    rt_buf_free(&nv);
    return rc;
}

/* Migrates a format 1 store to format 2 (see above), logging the counts. */
static int ps__key_migrate(struct ps_store *s, const char *dir, char *errmsg)
{
    struct rt_buf batch = RT_BUF_INIT, resume = RT_BUF_INIT;
    size_t scanned = 0, rewritten = 0, txns = 0;
    int done = 0;
    int rc = 0;

    rt_buf_append_u8(&resume, 0x00); /* before every key; LMDB has no "" */
    rt_log(RT_LOG_INFO,
           "store %s: key format 1 -> %d (keys in UTF-16 order): migrating",
           dir, RT_KEY_FORMAT);
    while (rc == 0 && !done) {
        struct ps__it it;
        MDB_txn *txn;
        size_t n = 0;

        rc = rt_lmdb_err(mdb_txn_begin(s->env, NULL, 0, &txn));
        if (rc != 0) {
            break;
        }
        rt_buf_reset(&batch);
        rc = ps__it_open(&it, s, txn);
        if (rc == 0) {
            rc = ps__it_seek(&it, resume.data, resume.len);
        }
        for (; rc == 0; rc = ps__it_next(&it)) {
            scanned++;
            if (!ps__key_old_bytes(it.key, it.kn)) {
                continue;
            }
            if (n == PS__MIG_KEYS || batch.len >= PS__MIG_BYTES) {
                /* Resume here: this key is the first one not taken. */
                rt_buf_reset(&resume);
                rt_buf_append(&resume, it.key, it.kn);
                scanned--;
                break;
            }
            ps__bucket_add(&batch, it.key, it.kn, it.val, it.vn);
            n++;
        }
        ps__it_close(&it);
        if (rc == RT_ENOTFOUND) {
            done = 1;
            rc = 0;
        }
        if (rc == 0) {
            rc = ps__key_rewrite(s, txn, &batch);
        }
        if (rc == 0 && done) {
            MDB_val k = ps__val(PS_META_KEY_FORMAT, strlen(PS_META_KEY_FORMAT)),
                    v;
            uint8_t b[4];
            rt_put_u32le(b, RT_KEY_FORMAT);
            v = ps__val(b, 4);
            rc = rt_lmdb_err(mdb_put(txn, s->meta, &k, &v, 0));
        }
        if (rc != 0) {
            mdb_txn_abort(txn);
            break;
        }
        rc = rt_lmdb_err(mdb_txn_commit(txn));
        rewritten += n;
        txns++;
    }
    if (rc == 0) {
        rt_log(RT_LOG_INFO,
               "store %s: key format %d: rewrote %zu keys (%zu records "
               "read) in %zu transactions",
               dir, RT_KEY_FORMAT, rewritten, scanned, txns);
    } else {
        rt_errmsg_printf(errmsg,
                         "migrating keys to format %d (after %zu rewritten, "
                         "committed; the next start resumes): %s",
                         RT_KEY_FORMAT, rewritten, rt_strerror(rc));
    }
    rt_buf_free(&batch);
    rt_buf_free(&resume);
    return rc;
}

/* Reads or (first open) fixes T in meta. */
static int ps__bucket_len_init(struct ps_store *s, MDB_txn *txn, char *errmsg)
{
    MDB_val k = ps__val(PS_META_BUCKET_LEN, strlen(PS_META_BUCKET_LEN)), v;
    uint8_t b[4];
    int rc = mdb_get(txn, s->meta, &k, &v);

    if (rc == 0) {
        if (v.mv_size != 4) {
            rt_errmsg_printf(errmsg, "meta %s: bad size", PS_META_BUCKET_LEN);
            return RT_ECORRUPT;
        }
        s->blen = rt_get_u32le(v.mv_data);
        if (s->blen > s->max_key || s->blen < 64) {
            rt_errmsg_printf(errmsg,
                             "store made with bucket key length %zu; "
                             "this LMDB allows keys of %zu bytes",
                             s->blen, s->max_key);
            return RT_ECORRUPT;
        }
        return 0;
    }
    if (rc != MDB_NOTFOUND) {
        rt_errmsg_printf(errmsg, "meta: %s", mdb_strerror(rc));
        return rt_lmdb_err(rc);
    }
    s->blen = s->max_key - 1;
    if ((rc = ps__bucket_migrate(s, txn)) != 0) {
        rt_errmsg_printf(errmsg, "moving long keys: %s", rt_strerror(rc));
        return rc;
    }
    rt_put_u32le(b, (uint32_t)s->blen);
    v = ps__val(b, 4);
    rc = mdb_put(txn, s->meta, &k, &v, 0);
    if (rc != 0) {
        rt_errmsg_printf(errmsg, "meta: %s", mdb_strerror(rc));
    }
    return rt_lmdb_err(rc);
}

int ps_store_open(const char *dir,
                  size_t map_size,
                  struct ps_store **out,
                  char *errmsg)
{
    struct ps_store *s;
    MDB_txn *txn;
    uint32_t fmt = RT_KEY_FORMAT;
    int rc;
    int dead = 0;

    if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
        rt_errmsg_printf(errmsg, "mkdir %s: %s", dir, strerror(errno));
        return RT_EIO;
    }
    rc = ps_store_file_check(dir, NULL, errmsg);
    if (rc != 0 && rc != RT_ENOTFOUND) {
        return rc;
    }
    s = calloc(1, sizeof(*s));
    if (!s) {
        rt_errmsg_printf(errmsg, "out of memory");
        return RT_ENOMEM;
    }
    rt_buf_init(&s->kbuf);
    rt_buf_init(&s->vbuf);
    rt_buf_init(&s->mbuf);
    rt_buf_init(&s->bbuf);
    rt_buf_init(&s->lsnbuf);
    rc = mdb_env_create(&s->env);
    if (rc != 0) {
        goto err_after_alloc;
    }
    if ((rc = mdb_env_set_maxdbs(s->env, 4)) != 0 ||
        (rc = mdb_env_set_mapsize(s->env, map_size)) != 0 ||
        (rc = mdb_env_set_maxreaders(s->env, 256)) != 0) {
        goto err_after_create;
    }
    /* MDB_NOTLS: read transactions are not tied to a thread's slot, so the
     * loop thread and the uv_queue_work scans can run many at once.
     * No MDB_NOSYNC / MDB_NOMETASYNC: a commit is durable when it returns
     * (DESIGN §6). */
    rc = mdb_env_open(s->env, dir, MDB_NOTLS, 0644);
    if (rc != 0) {
        goto err_after_create;
    }
    mdb_reader_check(s->env, &dead);
    if (dead > 0) {
        rt_log(RT_LOG_WARN, "store %s: cleared %d stale reader slots", dir,
               dead);
    }
    s->max_key = (size_t)mdb_env_get_maxkeysize(s->env);
    rc = mdb_txn_begin(s->env, NULL, 0, &txn);
    if (rc != 0) {
        goto err_after_create;
    }
    if ((rc = mdb_dbi_open(txn, "data", MDB_CREATE, &s->data)) != 0 ||
        (rc = mdb_dbi_open(txn, "meta", MDB_CREATE, &s->meta)) != 0 ||
        /* Created here when missing: a data directory from before
         * replication upgrades in place, every range at LSN 0. */
        (rc = mdb_dbi_open(txn, "repl", MDB_CREATE, &s->repl)) != 0) {
        mdb_txn_abort(txn);
        goto err_after_create;
    }
    if ((rc = ps__bucket_len_init(s, txn, errmsg)) != 0 ||
        (rc = ps__key_format_get(s, txn, 0, &fmt, errmsg)) != 0) {
        mdb_txn_abort(txn);
        mdb_env_close(s->env);
        rt_buf_free(&s->bbuf);
        free(s);
        return rc;
    }
    rc = mdb_txn_commit(txn);
    if (rc != 0) {
        goto err_after_create;
    }
    if (fmt < RT_KEY_FORMAT && (rc = ps__key_migrate(s, dir, errmsg)) != 0) {
        ps_store_close(s);
        return rc;
    }
    *out = s;
    return 0;

err_after_create:
    mdb_env_close(s->env);
err_after_alloc:
    free(s);
    rt_errmsg_printf(errmsg, "lmdb open %s: %s", dir, mdb_strerror(rc));
    return rt_lmdb_err(rc);
}

int ps_store_open_ro(const char *dir, struct ps_store **out, char *errmsg)
{
    struct ps_store *s;
    MDB_txn *txn;
    MDB_val k = ps__val(PS_META_BUCKET_LEN, strlen(PS_META_BUCKET_LEN)), v;
    int rc;

    rc = ps_store_file_check(dir, NULL, errmsg);
    if (rc == RT_ENOTFOUND) {
        rt_errmsg_printf(errmsg, "%s holds no data.mdb", dir);
        return rc;
    }
    if (rc != 0) {
        return rc;
    }
    s = calloc(1, sizeof(*s));
    if (!s) {
        rt_errmsg_printf(errmsg, "out of memory");
        return RT_ENOMEM;
    }
    rc = mdb_env_create(&s->env);
    if (rc != 0) {
        goto err_after_alloc;
    }
    /* Map size 0: the size the environment was last given. */
    if ((rc = mdb_env_set_maxdbs(s->env, 4)) != 0 ||
        (rc = mdb_env_open(s->env, dir, MDB_RDONLY | MDB_NOTLS, 0644)) != 0) {
        goto err_after_create;
    }
    s->max_key = (size_t)mdb_env_get_maxkeysize(s->env);
    rc = mdb_txn_begin(s->env, NULL, MDB_RDONLY, &txn);
    if (rc != 0) {
        goto err_after_create;
    }
    if ((rc = mdb_dbi_open(txn, "data", 0, &s->data)) != 0 ||
        (rc = mdb_dbi_open(txn, "meta", 0, &s->meta)) != 0) {
        mdb_txn_abort(txn);
        goto err_after_create;
    }
    rc = mdb_dbi_open(txn, "repl", 0, &s->repl);
    if (rc == MDB_NOTFOUND) {
        /* A directory from before replication: every range is at LSN 0.
         * The main DB holds only DB names, never an "rs" key, so reading
         * replica states from it finds none. */
        rc = mdb_dbi_open(txn, NULL, 0, &s->repl);
    }
    if (rc == 0) {
        rc = mdb_get(txn, s->meta, &k, &v);
        if (rc == 0 && v.mv_size == 4) {
            s->blen = rt_get_u32le(v.mv_data);
        } else if (rc == MDB_NOTFOUND) {
            s->blen = s->max_key - 1; /* never held a long key */
            rc = 0;
        } else if (rc == 0) {
            rc = MDB_CORRUPTED;
        }
    }
    if (rc == 0) {
        uint32_t fmt = RT_KEY_FORMAT;
        rc = ps__key_format_get(s, txn, 1, &fmt, errmsg);
        if (rc == 0 && fmt < RT_KEY_FORMAT) {
            /* Its keys are in the old order: range bounds and seeks of this
             * build would miss some. Only a writer migrates. */
            rt_errmsg_printf(errmsg,
                             "%s has key format %u (before UTF-16 key "
                             "order); start rt-partition-server on it once "
                             "to migrate it to format %d",
                             dir, fmt, RT_KEY_FORMAT);
            mdb_txn_abort(txn);
            mdb_env_close(s->env);
            free(s);
            return RT_ECORRUPT;
        }
        if (rc != 0) {
            mdb_txn_abort(txn);
            mdb_env_close(s->env);
            free(s);
            return rc;
        }
    }
    /* Committed, not aborted: DB handles opened in an aborted transaction
     * are closed with it, even in a read-only one. */
    if (rc != 0) {
        mdb_txn_abort(txn);
        goto err_after_create;
    }
    rc = mdb_txn_commit(txn);
    if (rc != 0) {
        goto err_after_create;
    }
    *out = s;
    return 0;

err_after_create:
    mdb_env_close(s->env);
err_after_alloc:
    free(s);
    rt_errmsg_printf(errmsg, "lmdb open %s read-only: %s", dir,
                     mdb_strerror(rc));
    return rt_lmdb_err(rc);
}

void ps_store_close(struct ps_store *s)
{
    if (!s) {
        return;
    }
    mdb_env_close(s->env);
    rt_buf_free(&s->kbuf);
    rt_buf_free(&s->vbuf);
    rt_buf_free(&s->mbuf);
    rt_buf_free(&s->bbuf);
    rt_buf_free(&s->cap);
    rt_buf_free(&s->lsnbuf);
    free(s);
}

size_t ps_store_max_key(const struct ps_store *s)
{
    return s->max_key;
}

size_t ps_store_bucket_len(const struct ps_store *s)
{
    return s->blen;
}

/* Spans */

void ps_span_keys(const struct ps_span *sp,
                  struct rt_buf *lo,
                  struct rt_buf *hi)
{
    const char *low = sp->low ? sp->low : "";
    rt_key_pk_prefix(lo, sp->table_id, low, strlen(low));
    if (sp->high) {
        rt_key_pk_prefix(hi, sp->table_id, sp->high, strlen(sp->high));
    } else {
        rt_key_table_end(hi, sp->table_id);
    }
}
