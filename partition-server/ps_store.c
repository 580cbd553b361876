/* Store: LMDB environment, entity operations, group commit, scans, meta.
 *
 * Happy path of a group commit: one write transaction; each write's ops run
 * in order (validate, read the old value, check existence and If-Match,
 * build and validate the new entity, stamp ticks, put or delete); commit
 * with sync. Failure modes and what callers see:
 *  - an op's own validation or condition fails: that op's code, nothing
 *    else changes (every check runs before any put of that op);
 *  - an atomic write: the batch rules (count, one PK, no row twice) first,
 *    then every op is checked (merges included), nothing is put unless all
 *    pass; the failing op's code and index come back in the write;
 *  - LMDB fails (map full, I/O): the transaction is aborted, never
 *    continued; every write in the group is then retried alone, so only the
 *    writes that cannot fit fail (status RT_ENOSPACE / RT_EIO).
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

#include <errno.h>
#include <lmdb.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "rt_alloc.h"
#include "rt_entity.h"
#include "rt_err.h"
#include "rt_filter.h"
#include "rt_key.h"
#include "rt_lmdb.h"
#include "rt_log.h"
#include "rt_time.h"

#define PS_META_SERVER_ID "server_id"
#define PS_META_RANGES "ranges"
#define PS_META_DROP "drop"             /* ‖ u64be table_id */
#define PS_META_BUCKET_LEN "bucket_len" /* u32le T */

#define PS_BUCKET_VERSION 0xB1
#define PS_BUCKET_HDR 8

struct ps_store
{
    MDB_env *env;
    MDB_dbi data;
    MDB_dbi meta;
    size_t max_key;
    size_t blen; /* T */
    /* Writer thread only. */
    uint64_t last_ticks;
    struct rt_buf kbuf;
    struct rt_buf vbuf;
    struct rt_buf mbuf;
    struct rt_buf bbuf;
    int capture;      /* record committed changes (ps_store_capture) */
    uint64_t cur_txn; /* id of the write transaction being built */
    struct rt_buf cap;
};

/* Helpers */

static int ps__keycmp(const void *a, size_t an, const void *b, size_t bn)
{
    size_t m = an < bn ? an : bn;
    int c = m ? memcmp(a, b, m) : 0;
    if (c != 0) {
        return c;
    }
    return an < bn ? -1 : an > bn ? 1 : 0;
}

static MDB_val ps__val(const void *p, size_t n)
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

struct ps__bucket
{
    const uint8_t *p;
    const uint8_t *end;
    uint32_t left;
};

struct ps__bent
{
    const uint8_t *suf;
    size_t sn;
    const uint8_t *val;
    size_t vn;
};

static int ps__bucket_open(const MDB_val *v, struct ps__bucket *b)
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
static int ps__bucket_next(struct ps__bucket *b, struct ps__bent *e)
{
    size_t left = (size_t)(b->end - b->p);
    uint32_t n;

    if (b->left == 0) {
        return b->p == b->end ? 0 : RT_ECORRUPT;
    }
    if (left < 4 || (n = rt_get_u32le(b->p)) > left - 4) {
        return RT_ECORRUPT;
    }
    e->suf = b->p + 4;
    e->sn = n;
    b->p += 4 + (size_t)n;
    left -= 4 + (size_t)n;
    if (left < 4 || (n = rt_get_u32le(b->p)) > left - 4) {
        return RT_ECORRUPT;
    }
    e->val = b->p + 4;
    e->vn = n;
    b->p += 4 + (size_t)n;
    b->left--;
    return 1;
}

static void ps__bucket_add(struct rt_buf *out,
                           const uint8_t *suf,
                           size_t sn,
                           const uint8_t *val,
                           size_t vn)
{
    uint8_t *q = rt_buf_reserve(out, 8 + sn + vn);
    rt_put_u32le(q, (uint32_t)sn);
    if (sn) {
        memcpy(q + 4, suf, sn);
    }
    rt_put_u32le(q + 4 + sn, (uint32_t)vn);
    if (vn) {
        memcpy(q + 8 + sn, val, vn);
    }
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
    rt_put_u32le(q + 9, (uint32_t)kn);
    if (kn) {
        memcpy(q + 13, key, kn);
    }
    rt_put_u32le(q + 13 + kn, (uint32_t)vn);
    if (vn) {
        memcpy(q + 17 + kn, val, vn);
    }
    out->len += 17 + kn + vn;
}

int ps_change_next(const uint8_t *p, size_t n, size_t *off, struct ps_change *c)
{
    size_t o = *off, left;
    uint32_t kn, vn;

    if (o >= n) {
        return 0;
    }
    left = n - o;
    if (left < 13 || (kn = rt_get_u32le(p + o + 9)) > left - 13 ||
        left - 13 - kn < 4 ||
        (vn = rt_get_u32le(p + o + 13 + kn)) > left - 17 - kn) {
        return RT_ECORRUPT;
    }
    c->txn_id = rt_get_u64le(p + o);
    c->deleted = p[o + 8] != 0;
    c->key = p + o + 13;
    c->kn = kn;
    c->val = p + o + 17 + kn;
    c->vn = vn;
    *off = o + 17 + kn + vn;
    return 1;
}

void ps_store_capture(struct ps_store *s, int on)
{
    s->capture = on;
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

static void ps__cap(struct ps_store *s,
                    const uint8_t *key,
                    size_t kn,
                    const uint8_t *val,
                    size_t vn,
                    int deleted)
{
    if (s->capture) {
        ps_change_append(&s->cap, s->cur_txn, key, kn, val, vn, deleted);
    }
}

/* Point access to the data DB */

/* Finds the stored value of full storage key @key in @txn. On 0, *v points
 * into LMDB memory (valid until the next update in @txn or its end).
 * Returns 0, RT_ENOTFOUND, RT_ECORRUPT or an LMDB failure. */
static int ps__lookup(struct ps_store *s,
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

    rt_buf_reset(out);
    rt_buf_reserve(out, PS_BUCKET_HDR);
    memset(out->data, 0, PS_BUCKET_HDR);
    out->data[0] = PS_BUCKET_VERSION;
    out->len = PS_BUCKET_HDR;

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
    if (count == 0) {
        rc = mdb_del(txn, s->data, &k, NULL);
        return rc == MDB_NOTFOUND ? 0 : rt_lmdb_err(rc);
    }
    rt_put_u32le(out->data + 4, count);
    v = ps__val(out->data, out->len);
    return rt_lmdb_err(mdb_put(txn, s->data, &k, &v, 0));
}

static int ps__kv_put(struct ps_store *s,
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

static int ps__kv_del(struct ps_store *s,
                      MDB_txn *txn,
                      const uint8_t *key,
                      size_t kn)
{
    if (kn < s->blen) {
        MDB_val k = ps__val(key, kn);
        return rt_lmdb_err(mdb_del(txn, s->data, &k, NULL));
    }
    return ps__bucket_put(s, txn, key, kn, NULL, 0);
}

/* Ordered iteration over logical entries (bucket entries flattened). */

struct ps__it
{
    struct ps_store *s;
    MDB_cursor *cur;
    MDB_val k, v; /* current LMDB record */
    int in_bucket;
    struct ps__bucket b;
    struct rt_buf kb;   /* full key of the current bucket entry */
    const uint8_t *key; /* current entry: full storage key */
    size_t kn;
    const uint8_t *val; /* its stored value (LMDB memory) */
    size_t vn;
};

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
        rt_buf_append(&it->kb, e.suf, e.sn);
        it->key = it->kb.data;
        it->kn = it->kb.len;
        it->val = e.val;
        it->vn = e.vn;
        return 0;
    }
}

static int ps__it_next(struct ps__it *it)
{
    if (it->in_bucket) {
        struct ps__bent e;
        int rc = ps__bucket_next(&it->b, &e);
        if (rc < 0) {
            return rc;
        }
        if (rc == 1) {
            it->kb.len = it->s->blen;
            rt_buf_append(&it->kb, e.suf, e.sn);
            it->key = it->kb.data;
            it->kn = it->kb.len;
            it->val = e.val;
            it->vn = e.vn;
            return 0;
        }
    }
    return ps__it_load(it, MDB_NEXT);
}

/* Positions on the first entry whose full key is >= @key. The LMDB seek
 * uses the key cut to T bytes: a record before that cut holds only
 * entries before @key (cutting preserves order), and the entries of the
 * record found that are still smaller are skipped. */
static int ps__it_seek(struct ps__it *it, const uint8_t *key, size_t kn)
{
    int rc;

    it->k = ps__val(key, kn < it->s->blen ? kn : it->s->blen);
    rc = ps__it_load(it, MDB_SET_RANGE);
    while (rc == 0 && ps__keycmp(it->key, it->kn, key, kn) < 0) {
        rc = ps__it_next(it);
    }
    return rc;
}

static int ps__it_open(struct ps__it *it, struct ps_store *s, MDB_txn *txn)
{
    memset(it, 0, sizeof(*it));
    it->s = s;
    rt_buf_init(&it->kb);
    return rt_lmdb_err(mdb_cursor_open(txn, s->data, &it->cur));
}

static void ps__it_close(struct ps__it *it)
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
    int rc;
    int dead = 0;

    if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
        rt_errmsg_printf(errmsg, "mkdir %s: %s", dir, strerror(errno));
        return RT_EIO;
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
        (rc = mdb_dbi_open(txn, "meta", MDB_CREATE, &s->meta)) != 0) {
        mdb_txn_abort(txn);
        goto err_after_create;
    }
    if ((rc = ps__bucket_len_init(s, txn, errmsg)) != 0) {
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
    *out = s;
    return 0;

err_after_create:
    mdb_env_close(s->env);
err_after_alloc:
    free(s);
    rt_errmsg_printf(errmsg, "lmdb open %s: %s", dir, mdb_strerror(rc));
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

/* Entity operations */

void ps_write_reset(struct ps_write *w)
{
    for (size_t i = 0; i < w->n_ops; i++) {
        struct ps_op *op = &w->ops[i];
        op->code = 0;
        op->ticks = 0;
        rt_buf_free(&op->value);
    }
    w->status = 0;
    w->failed_index = -1;
    w->errmsg = NULL;
    w->bytes_written = 0;
    w->count_delta = 0;
    w->bytes_delta = 0;
    w->txn_id = 0;
}

/* Fails the whole write: outputs cleared, @rc in status. failed_index and
 * errmsg are kept (the attempt that failed set them). */
static void ps__write_fail(struct ps_write *w, int rc)
{
    int idx = w->failed_index;
    const char *msg = w->errmsg;
    ps_write_reset(w);
    w->status = rc;
    w->failed_index = idx;
    w->errmsg = msg;
}

static uint64_t ps__next_ticks(struct ps_store *s, uint64_t old_ticks)
{
    uint64_t t = rt_time_now_ticks();
    if (t <= s->last_ticks) {
        t = s->last_ticks + 1;
    }
    if (t <= old_ticks) {
        t = old_ticks + 1;
    }
    return t;
}

/* Runs one op inside @txn. The op's own outcome goes to op->code; the
 * return value is 0 or an LMDB failure that poisons the transaction.
 * @check_only: evaluate every condition (merge and size included), change
 * nothing. Effects are added to @w's byte and delta counters. */
static int ps__op_run(struct ps_store *s,
                      MDB_txn *txn,
                      struct ps_write *w,
                      struct ps_op *op,
                      int check_only)
{
    MDB_val v;
    const uint8_t *old_blob = NULL, *blob;
    size_t old_blob_n = 0, blob_n, pk_units, rk_units, old_len = 0;
    uint64_t old_ticks = 0;
    uint8_t old_flags;
    int exists, merge;
    int rc;

    op->code = 0;
    op->ticks = 0;
    if ((int)op->kind <= 0 || (int)op->kind >= (int)PS_OP__NR) {
        op->code = RT_EINVAL;
        return 0;
    }
    /* Validation first: Azure answers 400 before looking at the data. */
    if ((rc = rt_entity_key_check(op->pk, strlen(op->pk), &pk_units)) != 0 ||
        (rc = rt_entity_key_check(op->rk, strlen(op->rk), &rk_units)) != 0) {
        op->code = rc;
        return 0;
    }
    if (op->kind != PS_OP_DELETE &&
        (rc = rt_entity_check(op->props, op->props_len, pk_units, rk_units)) !=
            0) {
        op->code = rc;
        return 0;
    }
    rt_buf_reset(&s->kbuf);
    rt_key_entity(&s->kbuf, w->table_id, op->pk, strlen(op->pk), op->rk,
                  strlen(op->rk));
    rc = ps__lookup(s, txn, s->kbuf.data, s->kbuf.len, &v);
    if (rc != 0 && rc != RT_ENOTFOUND) {
        if (rc == RT_ECORRUPT) {
            op->code = rc;
            return 0;
        }
        return rc;
    }
    exists = rc == 0;
    if (exists) {
        old_len = v.mv_size;
        if (rt_value_decode(v.mv_data, v.mv_size, &old_ticks, &old_flags,
                            &old_blob, &old_blob_n) != 0) {
            op->code = RT_ECORRUPT;
            return 0;
        }
    }

    switch (op->kind) {
        case PS_OP_INSERT:
            /* Insert Entity: 409 EntityAlreadyExists. */
            if (exists) {
                op->code = RT_EEXIST;
            }
            break;
        case PS_OP_REPLACE:
        case PS_OP_MERGE:
        case PS_OP_DELETE:
            /* Update/Merge/Delete Entity: 404 ResourceNotFound when missing,
             * 412 UpdateConditionNotSatisfied on an ETag mismatch. */
            if (!exists) {
                op->code = RT_ENOTFOUND;
            } else if (!op->if_match_any && op->if_match != 0 &&
                       op->if_match != old_ticks) {
                op->code = RT_EPRECOND;
            }
            break;
        case PS_OP_UPSERT_REPLACE:
        case PS_OP_UPSERT_MERGE:
            break;
        default:
            op->code = RT_EINVAL;
            break;
    }
    if (op->code != 0) {
        return 0;
    }

    if (op->kind == PS_OP_DELETE) {
        if (check_only) {
            return 0;
        }
        rc = ps__kv_del(s, txn, s->kbuf.data, s->kbuf.len);
        if (rc != 0) {
            return rc;
        }
        ps__cap(s, s->kbuf.data, s->kbuf.len, NULL, 0, 1);
        w->bytes_written += s->kbuf.len;
        w->count_delta -= 1;
        w->bytes_delta -= (int64_t)(s->kbuf.len + old_len);
        return 0;
    }

    blob = op->props;
    blob_n = op->props_len;
    merge =
        exists && (op->kind == PS_OP_MERGE || op->kind == PS_OP_UPSERT_MERGE);
    if (merge) {
        /* Merge Entity: the update's properties, then the old ones it does
         * not name; the result must still be a valid entity. */
        rt_buf_reset(&s->mbuf);
        rc = rt_props_merge(&s->mbuf, old_blob, old_blob_n, op->props,
                            op->props_len);
        if (rc == 0) {
            rc = rt_entity_check(s->mbuf.data, s->mbuf.len, pk_units, rk_units);
            if (rc == RT_EINVAL) {
                rc = RT_ECORRUPT; /* the old blob, not the caller's */
            }
        }
        if (rc != 0) {
            op->code = rc;
            return 0;
        }
        blob = s->mbuf.data;
        blob_n = s->mbuf.len;
    }
    if (check_only) {
        return 0;
    }

    uint64_t ticks = ps__next_ticks(s, old_ticks);
    rt_buf_reset(&s->vbuf);
    rt_value_encode(&s->vbuf, ticks, 0, blob, blob_n);
    rc = ps__kv_put(s, txn, s->kbuf.data, s->kbuf.len, s->vbuf.data,
                    s->vbuf.len);
    if (rc != 0) {
        return rc;
    }
    ps__cap(s, s->kbuf.data, s->kbuf.len, s->vbuf.data, s->vbuf.len, 0);
    s->last_ticks = ticks;
    op->ticks = ticks;
    w->bytes_written += s->kbuf.len + s->vbuf.len;
    if (exists) {
        w->bytes_delta += (int64_t)s->vbuf.len - (int64_t)old_len;
    } else {
        w->count_delta += 1;
        w->bytes_delta += (int64_t)(s->kbuf.len + s->vbuf.len);
    }
    if (op->want_value) {
        rt_buf_reset(&op->value);
        rt_buf_append(&op->value, s->vbuf.data, s->vbuf.len);
    }
    return 0;
}

/* Entity group transaction rules (spec §5.2), in op order so the first
 * offending op is named: one PartitionKey, and each entity once. Returns
 * the index of the offending op (its code in *code) or -1. */
static int ps__batch_rules(const struct ps_write *w, int *code)
{
    for (size_t j = 1; j < w->n_ops; j++) {
        if (strcmp(w->ops[j].pk, w->ops[0].pk) != 0) {
            *code = RT_EDIFFPARTITIONS;
            return (int)j;
        }
        for (size_t i = 0; i < j; i++) {
            if (strcmp(w->ops[i].rk, w->ops[j].rk) == 0) {
                *code = RT_EDUPROW;
                return (int)j;
            }
        }
    }
    return -1;
}

/* Raw mode: storage-level puts and deletes (range moves). Every change is
 * checked before any is made, so a bad one fails only its own write. */
static int ps__raw_apply(struct ps_store *s, MDB_txn *txn, struct ps_write *w)
{
    for (size_t i = 0; i < w->n_kvs; i++) {
        const struct ps_kv *kv = &w->kvs[i];
        if (kv->kn <= 8 || kv->kn > RT_KEY_MAX ||
            (!kv->deleted && kv->vn == 0)) {
            w->status = RT_EINVAL;
            w->failed_index = (int)i;
            return 0;
        }
    }
    for (size_t i = 0; i < w->n_kvs; i++) {
        const struct ps_kv *kv = &w->kvs[i];
        int rc;
        if (kv->deleted) {
            rc = ps__kv_del(s, txn, kv->key, kv->kn);
            if (rc == RT_ENOTFOUND) {
                rc = 0;
            }
        } else {
            rc = ps__kv_put(s, txn, kv->key, kv->kn, kv->val, kv->vn);
        }
        if (rc != 0) {
            return rc;
        }
        ps__cap(s, kv->key, kv->kn, kv->val, kv->vn, kv->deleted);
        w->bytes_written += kv->kn + (kv->deleted ? 0 : kv->vn);
    }
    return 0;
}

/* Applies one write inside @txn. Returns 0 or a code that poisons the
 * transaction (the caller aborts it). */
static int ps__write_apply(struct ps_store *s, MDB_txn *txn, struct ps_write *w)
{
    int rc, code = 0, bad;

    if (w->kvs) {
        return ps__raw_apply(s, txn, w);
    }
    if (!w->atomic) {
        for (size_t i = 0; i < w->n_ops; i++) {
            rc = ps__op_run(s, txn, w, &w->ops[i], 0);
            if (rc != 0) {
                return rc;
            }
        }
        return 0;
    }

    /* Atomic: batch rules, then check everything, then put everything. */
    if (w->n_ops > PS_BATCH_MAX_OPS) {
        w->status = RT_EINVAL;
        w->failed_index = PS_BATCH_MAX_OPS;
        w->errmsg =
            "The batch request operation exceeds the maximum 100 "
            "changes per change set.";
        return 0;
    }
    bad = ps__batch_rules(w, &code);
    if (bad >= 0) {
        w->ops[bad].code = code;
        w->status = code;
        w->failed_index = bad;
        return 0;
    }
    for (size_t i = 0; i < w->n_ops; i++) {
        rc = ps__op_run(s, txn, w, &w->ops[i], 1);
        if (rc != 0) {
            return rc;
        }
        if (w->ops[i].code != 0) {
            w->status = w->ops[i].code;
            w->failed_index = (int)i;
            return 0;
        }
    }
    for (size_t i = 0; i < w->n_ops; i++) {
        rc = ps__op_run(s, txn, w, &w->ops[i], 0);
        if (rc != 0) {
            return rc;
        }
        if (w->ops[i].code != 0) {
            /* The checks above saw the same state, so this cannot happen;
             * if it does, earlier ops are already put: abort the whole
             * transaction so the write stays all-or-nothing. */
            w->failed_index = (int)i;
            return w->ops[i].code;
        }
    }
    return 0;
}

static int ps__group_txn(struct ps_store *s,
                         struct ps_write *const *w,
                         size_t n)
{
    MDB_txn *txn;
    uint64_t id;
    size_t mark = s->cap.len;
    int rc;

    for (size_t i = 0; i < n; i++) {
        ps_write_reset(w[i]);
    }
    rc = mdb_txn_begin(s->env, NULL, 0, &txn);
    if (rc != 0) {
        return rt_lmdb_err(rc);
    }
    id = (uint64_t)mdb_txn_id(txn);
    s->cur_txn = id;
    for (size_t i = 0; i < n; i++) {
        rc = ps__write_apply(s, txn, w[i]);
        if (rc != 0) {
            mdb_txn_abort(txn);
            s->cap.len = mark; /* nothing of it was committed */
            return rc;
        }
    }
    rc = mdb_txn_commit(txn);
    if (rc != 0) {
        s->cap.len = mark;
        return rt_lmdb_err(rc);
    }
    for (size_t i = 0; i < n; i++) {
        w[i]->txn_id = id;
    }
    return 0;
}

int ps_store_write_group(struct ps_store *s,
                         struct ps_write *const *w,
                         size_t n)
{
    int rc, last = 0;

    if (n == 0) {
        return 0;
    }
    rc = ps__group_txn(s, w, n);
    if (rc == 0) {
        return 0;
    }
    if (n == 1) {
        ps__write_fail(w[0], rc);
        return rc;
    }
    rt_log(RT_LOG_WARN,
           "group commit of %zu writes failed (%s); retrying "
           "each alone",
           n, rt_strerror(rc));
    for (size_t i = 0; i < n; i++) {
        rc = ps__group_txn(s, &w[i], 1);
        if (rc != 0) {
            ps__write_fail(w[i], rc);
            last = rc;
        }
    }
    return last;
}

/* Reads */

int ps_store_get(struct ps_store *s,
                 uint64_t table_id,
                 const char *pk,
                 const char *rk,
                 struct rt_buf *value)
{
    struct rt_buf key = RT_BUF_INIT;
    MDB_txn *txn;
    MDB_val v;
    int rc;

    rt_key_entity(&key, table_id, pk, strlen(pk), rk, strlen(rk));
    rc = mdb_txn_begin(s->env, NULL, MDB_RDONLY, &txn);
    if (rc != 0) {
        rt_buf_free(&key);
        return rt_lmdb_err(rc);
    }
    rc = ps__lookup(s, txn, key.data, key.len, &v);
    if (rc == 0) {
        rt_buf_append(value, v.mv_data, v.mv_size);
    }
    mdb_txn_abort(txn);
    rt_buf_free(&key);
    return rc;
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
    sc->recs = NULL;
    sc->n = 0;
    sc->more = 0;
    sc->next_pk = NULL;
    sc->next_rk = NULL;
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

static void ps__key_table(struct rt_buf *out, uint64_t table_id)
{
    rt_put_u64be(rt_buf_reserve(out, 8), table_id);
    out->len += 8;
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
        ps__key_table(lo, table_id);
        rt_key_enc(lo, p->s, p->n);
        if (fb->rk_lo.set) {
            ps__enc_bound(lo, fb->rk_lo.s, fb->rk_lo.n, !fb->rk_lo.inclusive);
        }
        *lo_set = 1;
        ps__key_table(hi, table_id);
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
        ps__key_table(lo, table_id);
        ps__enc_bound(lo, fb->pk_lo.s, fb->pk_lo.n, !fb->pk_lo.inclusive);
        *lo_set = 1;
    }
    if (fb->pk_hi.set) {
        ps__key_table(hi, table_id);
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
    int rc;

    sc->recs = NULL;
    sc->n = 0;
    sc->more = 0;
    sc->next_pk = NULL;
    sc->next_rk = NULL;
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
    return ps_store_meta_write(s, server_id, ranges, ranges_len, NULL, 0);
}

int ps_store_meta_write(struct ps_store *s,
                        uint64_t server_id,
                        const void *ranges,
                        size_t ranges_len,
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

/* Drop table */

int ps_store_drop_chunk(struct ps_store *s,
                        uint64_t table_id,
                        size_t max_keys,
                        uint64_t *deleted)
{
    uint8_t lo[8], marker[sizeof(PS_META_DROP) - 1 + 8];
    struct rt_buf end = RT_BUF_INIT;
    MDB_txn *txn;
    MDB_cursor *cur;
    MDB_val k, v;
    size_t n = 0;
    uint64_t entities = 0;
    int more = 0;
    int rc;

    rt_put_u64be(lo, table_id);
    rt_key_table_end(&end, table_id);
    memcpy(marker, PS_META_DROP, sizeof(PS_META_DROP) - 1);
    rt_put_u64be(marker + sizeof(PS_META_DROP) - 1, table_id);

    rc = mdb_txn_begin(s->env, NULL, 0, &txn);
    if (rc != 0) {
        rt_buf_free(&end);
        return rt_lmdb_err(rc);
    }
    rc = mdb_cursor_open(txn, s->data, &cur);
    if (rc != 0) {
        goto err;
    }
    for (;;) {
        /* Re-seek after each delete: simple, and a B-tree descent costs
         * about a microsecond. */
        k = ps__val(lo, sizeof(lo));
        rc = mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE);
        if (rc == MDB_NOTFOUND ||
            (rc == 0 &&
             ps__keycmp(k.mv_data, k.mv_size, end.data, end.len) >= 0)) {
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
        if (k.mv_size == s->blen) {
            struct ps__bucket b;
            if (ps__bucket_open(&v, &b) != 0) {
                rc = MDB_CORRUPTED;
                break;
            }
            entities += b.left; /* a bucket holds this many entities */
        } else {
            entities++;
        }
        rc = mdb_cursor_del(cur, 0);
        if (rc != 0) {
            break;
        }
        n++;
    }
    mdb_cursor_close(cur);
    if (rc != 0) {
        goto err;
    }
    k = ps__val(marker, sizeof(marker));
    if (more) {
        v = ps__val("", 0);
        rc = mdb_put(txn, s->meta, &k, &v, 0);
    } else {
        rc = mdb_del(txn, s->meta, &k, NULL);
        if (rc == MDB_NOTFOUND) {
            rc = 0;
        }
    }
    if (rc != 0) {
        goto err;
    }
    rc = mdb_txn_commit(txn);
    rt_buf_free(&end);
    if (rc != 0) {
        return rt_lmdb_err(rc);
    }
    *deleted += entities;
    return more;

err:
    mdb_txn_abort(txn);
    rt_buf_free(&end);
    return rt_lmdb_err(rc);
}

/* Drop markers found by ps_store_pending_drops. */
struct ps__drops
{
    uint64_t *ids;
    size_t n;
};

/* ps_meta_cb over the PS_META_DROP prefix: keeps the table id of every
 * well-formed marker (prefix + u64be). Stops with RT_ENOMEM. */
static int ps__drops_add(const uint8_t *key,
                         size_t kn,
                         const uint8_t *val,
                         size_t vn,
                         void *arg)
{
    const size_t plen = sizeof(PS_META_DROP) - 1;
    struct ps__drops *d = arg;
    uint64_t *nids;

    (void)val;
    (void)vn;
    if (kn != plen + 8) {
        return 0;
    }
    nids = realloc(d->ids, (d->n + 1) * sizeof(*nids));
    if (!nids) {
        return RT_ENOMEM;
    }
    d->ids = nids;
    d->ids[d->n++] = rt_get_u64be(key + plen);
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
        stop = cb(k.mv_data, k.mv_size, v.mv_data, v.mv_size, arg);
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

/* Span drops */

void ps_store_span_marker(uint64_t seq,
                          const struct ps_span *sp,
                          struct rt_buf *key,
                          struct rt_buf *val)
{
    const char *low = sp->low ? sp->low : "";
    size_t ln = strlen(low), hn = sp->high ? strlen(sp->high) : 0;
    uint8_t *q;

    rt_buf_append(key, PS_META_SPAN_PREFIX, strlen(PS_META_SPAN_PREFIX));
    rt_put_u64be(rt_buf_reserve(key, 8), seq);
    key->len += 8;
    q = rt_buf_reserve(val, 17 + ln + hn);
    rt_put_u64le(q, sp->table_id);
    q[8] = sp->high != NULL;
    rt_put_u32le(q + 9, (uint32_t)ln);
    memcpy(q + 13, low, ln);
    rt_put_u32le(q + 13 + ln, (uint32_t)hn);
    if (hn) {
        memcpy(q + 17 + ln, sp->high, hn);
    }
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
    rt_buf_reset(out);
    rt_buf_reserve(out, PS_BUCKET_HDR);
    memset(out->data, 0, PS_BUCKET_HDR);
    out->data[0] = PS_BUCKET_VERSION;
    out->len = PS_BUCKET_HDR;
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
    if (kept == 0) {
        rc = mdb_del(txn, s->data, &k, NULL);
        return rc == MDB_NOTFOUND ? 0 : rt_lmdb_err(rc);
    }
    rt_put_u32le(out->data + 4, kept);
    v = ps__val(out->data, out->len);
    return rt_lmdb_err(mdb_put(txn, s->data, &k, &v, 0));
}

int ps_store_span_drop_chunk(struct ps_store *s,
                             uint64_t seq,
                             const struct ps_span *sp,
                             size_t max_keys,
                             uint64_t *deleted)
{
    struct rt_buf lo = RT_BUF_INIT, hi = RT_BUF_INIT;
    struct rt_buf mk = RT_BUF_INIT, mv = RT_BUF_INIT;
    uint64_t entities = 0;
    struct ps__it it;
    MDB_txn *txn;
    MDB_val k, v;
    size_t n = 0;
    int more = 0, it_open = 0;
    int rc;

    ps_span_keys(sp, &lo, &hi);
    ps_store_span_marker(seq, sp, &mk, &mv);
    rc = mdb_txn_begin(s->env, NULL, 0, &txn);
    if (rc != 0) {
        rc = rt_lmdb_err(rc);
        goto out;
    }
    rc = ps__it_open(&it, s, txn);
    if (rc != 0) {
        goto err;
    }
    it_open = 1;
    for (;;) {
        /* Re-seek after each change, as ps_store_drop_chunk does. */
        rc = ps__it_seek(&it, lo.data, lo.len);
        if (rc == RT_ENOTFOUND ||
            (rc == 0 && ps__keycmp(it.key, it.kn, hi.data, hi.len) >= 0)) {
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
            rc = ps__bucket_cut(s, txn, it.k, it.v, &lo, &hi, &entities);
        } else {
            rc = rt_lmdb_err(mdb_cursor_del(it.cur, 0));
            entities++;
        }
        if (rc != 0) {
            break;
        }
        n++;
    }
    if (rc != 0) {
        goto err;
    }
    k = ps__val(mk.data, mk.len);
    if (more) {
        v = ps__val(mv.data, mv.len);
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
    ps__it_close(&it);
    it_open = 0;
    rc = mdb_txn_commit(txn);
    if (rc != 0) {
        rc = rt_lmdb_err(rc);
        goto out;
    }
    *deleted += entities;
    rc = more;
    goto out;

err:
    if (it_open) {
        ps__it_close(&it);
    }
    mdb_txn_abort(txn);
out:
    rt_buf_free(&lo);
    rt_buf_free(&hi);
    rt_buf_free(&mk);
    rt_buf_free(&mv);
    return rc;
}

struct ps__spans_arg
{
    ps_span_cb cb;
    void *arg;
};

static int ps__spans_one(const uint8_t *key,
                         size_t kn,
                         const uint8_t *val,
                         size_t vn,
                         void *arg)
{
    const size_t plen = strlen(PS_META_SPAN_PREFIX);
    struct ps__spans_arg *a = arg;
    struct ps_span sp;
    char *low, *high = NULL;
    uint32_t ln, hn;

    if (kn != plen + 8 || vn < 17 || (ln = rt_get_u32le(val + 9)) > vn - 17 ||
        (hn = rt_get_u32le(val + 13 + ln)) != vn - 17 - ln) {
        rt_log(RT_LOG_WARN, "store: ignoring a malformed span marker");
        return 0;
    }
    low = rt_xstrndup((const char *)val + 13, ln);
    if (val[8]) {
        high = rt_xstrndup((const char *)val + 17 + ln, hn);
    }
    sp.table_id = rt_get_u64le(val);
    sp.low = low;
    sp.high = high;
    a->cb(rt_get_u64be(key + plen), &sp, a->arg);
    free(low);
    free(high);
    return 0;
}

int ps_store_pending_spans(struct ps_store *s, ps_span_cb cb, void *arg)
{
    struct ps__spans_arg a = {cb, arg};
    return ps_store_meta_scan(s, PS_META_SPAN_PREFIX, ps__spans_one, &a);
}
