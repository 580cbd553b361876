/* Store: LMDB environment, entity operations, group commit, scans, meta.
 *
 * Happy path of a group commit: one write transaction; each write's ops run
 * in order (read the old value, check existence and If-Match, stamp ticks,
 * put or delete); commit with sync. Failure modes and what callers see:
 *  - an op's own condition fails (exists, missing, ETag): that op's code,
 *    nothing else changes (checks run before any put of that op);
 *  - an atomic write: every op is checked first, nothing is put unless all
 *    pass; the failing op's code and index come back in the write;
 *  - LMDB fails (map full, I/O): the transaction is aborted, never
 *    continued; every write in the group is then retried alone, so only the
 *    writes that cannot fit fail (status RT_ENOSPACE / RT_EIO). */
#include "ps_store.h"

#include <errno.h>
#include <lmdb.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "rt_entity.h"
#include "rt_err.h"
#include "rt_key.h"
#include "rt_log.h"
#include "rt_time.h"

#define PS_META_SERVER_ID "server_id"
#define PS_META_RANGES "ranges"
#define PS_META_DROP "drop" /* ‖ u64be table_id */

struct ps_store {
    MDB_env *env;
    MDB_dbi data;
    MDB_dbi meta;
    size_t max_key;
    /* Writer thread only. */
    uint64_t last_ticks;
    struct rt_buf kbuf;
    struct rt_buf vbuf;
    struct rt_buf mbuf;
};

/* Helpers */

/* LMDB result -> RT_E* (the one place where LMDB codes are translated). */
static int ps__mdb_err(int rc)
{
    switch (rc) {
    case MDB_SUCCESS:
        return 0;
    case MDB_NOTFOUND:
        return RT_ENOTFOUND;
    case MDB_MAP_FULL:
    case ENOSPC:
        return RT_ENOSPACE;
    case MDB_TXN_FULL:
        return RT_ETOOLARGE;
    case MDB_BAD_VALSIZE:
        return RT_EOUTOFRANGE;
    case MDB_READERS_FULL:
        return RT_EBUSY;
    case MDB_CORRUPTED:
    case MDB_PAGE_NOTFOUND:
    case MDB_INVALID:
    case MDB_VERSION_MISMATCH:
        return RT_ECORRUPT;
    case ENOMEM:
        return RT_ENOMEM;
    default:
        return RT_EIO;
    }
}

static int ps__keycmp(const void *a, size_t an, const void *b, size_t bn)
{
    int c = memcmp(a, b, an < bn ? an : bn);
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

static char *ps__strdup_buf(struct rt_buf *b)
{
    char *s = malloc(b->len + 1);
    if (!s) {
        rt_log(RT_LOG_FATAL, "out of memory");
        abort();
    }
    if (b->len) {
        memcpy(s, b->data, b->len);
    }
    s[b->len] = '\0';
    return s;
}

/* Open / close */

int ps_store_open(const char *dir, size_t map_size, struct ps_store **out,
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
    rc = mdb_env_create(&s->env);
    if (rc != 0) {
        goto err_after_alloc;
    }
    if ((rc = mdb_env_set_maxdbs(s->env, 4)) != 0 ||
        (rc = mdb_env_set_mapsize(s->env, map_size)) != 0) {
        goto err_after_create;
    }
    /* MDB_NOTLS: read transactions are not tied to a thread's slot, so the
     * loop thread (and later uv_queue_work scans) can run many at once.
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
    rc = mdb_txn_begin(s->env, NULL, 0, &txn);
    if (rc != 0) {
        goto err_after_create;
    }
    if ((rc = mdb_dbi_open(txn, "data", MDB_CREATE, &s->data)) != 0 ||
        (rc = mdb_dbi_open(txn, "meta", MDB_CREATE, &s->meta)) != 0) {
        mdb_txn_abort(txn);
        goto err_after_create;
    }
    rc = mdb_txn_commit(txn);
    if (rc != 0) {
        goto err_after_create;
    }
    s->max_key = (size_t)mdb_env_get_maxkeysize(s->env);
    rt_buf_init(&s->kbuf);
    rt_buf_init(&s->vbuf);
    rt_buf_init(&s->mbuf);
    *out = s;
    return 0;

err_after_create:
    mdb_env_close(s->env);
err_after_alloc:
    free(s);
    rt_errmsg_printf(errmsg, "lmdb open %s: %s", dir, mdb_strerror(rc));
    return ps__mdb_err(rc);
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
    free(s);
}

size_t ps_store_max_key(const struct ps_store *s)
{
    return s->max_key;
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
    w->bytes_written = 0;
}

/* Fails the whole write: outputs cleared, @rc in status. failed_index is
 * kept (the attempt that failed set it). */
static void ps__write_fail(struct ps_write *w, int rc)
{
    int idx = w->failed_index;
    ps_write_reset(w);
    w->status = rc;
    w->failed_index = idx;
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
 * @check_only: evaluate the conditions, change nothing. */
static int ps__op_run(struct ps_store *s, MDB_txn *txn, uint64_t table_id,
                      struct ps_op *op, int check_only, uint64_t *bytes)
{
    MDB_val k, v;
    const uint8_t *old_blob = NULL;
    size_t old_blob_n = 0;
    uint64_t old_ticks = 0;
    uint8_t old_flags;
    int exists;
    int rc;

    op->code = 0;
    op->ticks = 0;
    rt_buf_reset(&s->kbuf);
    rt_key_entity(&s->kbuf, table_id, op->pk, strlen(op->pk), op->rk,
                  strlen(op->rk));
    if (s->kbuf.len > s->max_key) {
        /* The stock LMDB build caps keys at 511 bytes. */
        op->code = RT_EOUTOFRANGE;
        return 0;
    }
    k = ps__val(s->kbuf.data, s->kbuf.len);
    rc = mdb_get(txn, s->data, &k, &v);
    if (rc != 0 && rc != MDB_NOTFOUND) {
        return ps__mdb_err(rc);
    }
    exists = rc == 0;
    if (exists && op->kind != PS_OP_INSERT) {
        if (rt_value_decode(v.mv_data, v.mv_size, &old_ticks, &old_flags,
                            &old_blob, &old_blob_n) != 0) {
            op->code = RT_ECORRUPT;
            return 0;
        }
    }

    switch (op->kind) {
    case PS_OP_INSERT:
        /* Azure Table REST, Insert Entity: 409 EntityAlreadyExists. */
        if (exists) {
            op->code = RT_EEXIST;
        }
        break;
    case PS_OP_REPLACE:
    case PS_OP_MERGE:
    case PS_OP_DELETE:
        /* Update/Merge/Delete Entity: 404 when missing, 412 when the
         * If-Match ETag is not the current one ('*' matches any). */
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
    if (op->code != 0 || check_only) {
        return 0;
    }

    if (op->kind == PS_OP_DELETE) {
        rc = mdb_del(txn, s->data, &k, NULL);
        if (rc != 0) {
            return ps__mdb_err(rc);
        }
        *bytes += k.mv_size;
        return 0;
    }

    uint64_t ticks = ps__next_ticks(s, old_ticks);
    rt_buf_reset(&s->vbuf);
    if (exists && (op->kind == PS_OP_MERGE || op->kind == PS_OP_UPSERT_MERGE)) {
        /* Merge Entity: the update's properties, then the old ones it does
         * not name. The blob is built after the header is reserved. */
        rt_buf_reset(&s->mbuf);
        rc = rt_props_merge(&s->mbuf, old_blob, old_blob_n, op->props,
                            op->props_len);
        if (rc != 0) {
            op->code = rc;
            return 0;
        }
        rt_value_encode(&s->vbuf, ticks, 0, s->mbuf.data, s->mbuf.len);
    } else {
        rt_value_encode(&s->vbuf, ticks, 0, op->props, op->props_len);
    }
    v = ps__val(s->vbuf.data, s->vbuf.len);
    rc = mdb_put(txn, s->data, &k, &v, 0);
    if (rc != 0) {
        return ps__mdb_err(rc);
    }
    s->last_ticks = ticks;
    op->ticks = ticks;
    *bytes += k.mv_size + v.mv_size;
    if (op->want_value) {
        rt_buf_reset(&op->value);
        rt_buf_append(&op->value, s->vbuf.data, s->vbuf.len);
    }
    return 0;
}

/* Entity group transaction rule (Azure $batch): an entity appears once. */
static int ps__write_dup_index(const struct ps_write *w)
{
    for (size_t j = 1; j < w->n_ops; j++) {
        for (size_t i = 0; i < j; i++) {
            if (strcmp(w->ops[i].pk, w->ops[j].pk) == 0 &&
                strcmp(w->ops[i].rk, w->ops[j].rk) == 0) {
                return (int)j;
            }
        }
    }
    return -1;
}

/* Applies one write inside @txn. Returns 0 or a code that poisons the
 * transaction (the caller aborts it). */
static int ps__write_apply(struct ps_store *s, MDB_txn *txn,
                           struct ps_write *w)
{
    int rc;

    if (!w->atomic) {
        for (size_t i = 0; i < w->n_ops; i++) {
            rc = ps__op_run(s, txn, w->table_id, &w->ops[i], 0,
                            &w->bytes_written);
            if (rc != 0) {
                return rc;
            }
        }
        return 0;
    }

    /* Atomic: check everything, then put everything. */
    int dup = ps__write_dup_index(w);
    if (dup >= 0) {
        w->ops[dup].code = RT_EDUPROW;
        w->status = RT_EDUPROW;
        w->failed_index = dup;
        return 0;
    }
    for (size_t i = 0; i < w->n_ops; i++) {
        rc = ps__op_run(s, txn, w->table_id, &w->ops[i], 1,
                        &w->bytes_written);
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
        rc = ps__op_run(s, txn, w->table_id, &w->ops[i], 0,
                        &w->bytes_written);
        if (rc != 0) {
            return rc;
        }
        if (w->ops[i].code != 0) {
            /* Only a failure the checks cannot see (a corrupt old value met
             * by merge). Earlier ops are already put: abort the whole
             * transaction so the write stays all-or-nothing. */
            w->failed_index = (int)i;
            return w->ops[i].code;
        }
    }
    return 0;
}

static int ps__group_txn(struct ps_store *s, struct ps_write *const *w,
                         size_t n)
{
    MDB_txn *txn;
    int rc;

    for (size_t i = 0; i < n; i++) {
        ps_write_reset(w[i]);
    }
    rc = mdb_txn_begin(s->env, NULL, 0, &txn);
    if (rc != 0) {
        return ps__mdb_err(rc);
    }
    for (size_t i = 0; i < n; i++) {
        rc = ps__write_apply(s, txn, w[i]);
        if (rc != 0) {
            mdb_txn_abort(txn);
            return rc;
        }
    }
    rc = mdb_txn_commit(txn);
    return ps__mdb_err(rc);
}

int ps_store_write_group(struct ps_store *s, struct ps_write *const *w,
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
    rt_log(RT_LOG_WARN, "group commit of %zu writes failed (%s); retrying "
           "each alone", n, rt_strerror(rc));
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

int ps_store_get(struct ps_store *s, uint64_t table_id, const char *pk,
                 const char *rk, struct rt_buf *value)
{
    struct rt_buf key = RT_BUF_INIT;
    MDB_txn *txn;
    MDB_val k, v;
    int rc;

    rt_key_entity(&key, table_id, pk, strlen(pk), rk, strlen(rk));
    if (key.len > s->max_key) {
        rt_buf_free(&key);
        return RT_ENOTFOUND; /* could never have been stored */
    }
    rc = mdb_txn_begin(s->env, NULL, MDB_RDONLY, &txn);
    if (rc != 0) {
        rt_buf_free(&key);
        return ps__mdb_err(rc);
    }
    k = ps__val(key.data, key.len);
    rc = mdb_get(txn, s->data, &k, &v);
    if (rc == 0) {
        rt_buf_append(value, v.mv_data, v.mv_size);
    }
    mdb_txn_abort(txn);
    rt_buf_free(&key);
    return ps__mdb_err(rc);
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

static int ps__scan_add(struct ps_scan *sc, size_t *cap, struct rt_buf *pk,
                        struct rt_buf *rk, const MDB_val *v)
{
    struct ps_rec *r;
    if (sc->n == *cap) {
        size_t ncap = *cap ? *cap * 2 : 16;
        struct ps_rec *nr = realloc(sc->recs, ncap * sizeof(*nr));
        if (!nr) {
            return RT_ENOMEM;
        }
        sc->recs = nr;
        *cap = ncap;
    }
    r = &sc->recs[sc->n];
    r->value = malloc(v->mv_size ? v->mv_size : 1);
    if (!r->value) {
        return RT_ENOMEM;
    }
    memcpy(r->value, v->mv_data, v->mv_size);
    r->value_len = v->mv_size;
    r->pk = ps__strdup_buf(pk);
    r->rk = ps__strdup_buf(rk);
    sc->n++;
    return 0;
}

int ps_store_scan(struct ps_store *s, struct ps_scan *sc)
{
    struct rt_buf start = RT_BUF_INIT, end = RT_BUF_INIT;
    struct rt_buf pk = RT_BUF_INIT, rk = RT_BUF_INIT;
    unsigned limit = sc->limit && sc->limit < PS_SCAN_MAX_LIMIT
                         ? sc->limit
                         : PS_SCAN_MAX_LIMIT;
    size_t max_bytes = sc->max_bytes ? sc->max_bytes : PS_SCAN_MAX_BYTES;
    size_t bytes = 0, cap = 0;
    MDB_txn *txn = NULL;
    MDB_cursor *cur = NULL;
    MDB_val k, v;
    uint64_t tid;
    int rc;

    sc->recs = NULL;
    sc->n = 0;
    sc->more = 0;
    sc->next_pk = NULL;
    sc->next_rk = NULL;
    sc->scanned = 0;

    /* Start at max(range low, resume key); stop before the range high. */
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

    rc = mdb_txn_begin(s->env, NULL, MDB_RDONLY, &txn);
    if (rc != 0) {
        rc = ps__mdb_err(rc);
        goto out;
    }
    rc = mdb_cursor_open(txn, s->data, &cur);
    if (rc != 0) {
        rc = ps__mdb_err(rc);
        goto out;
    }
    /* A resume key longer than LMDB's limit cannot be searched for; seek
     * its prefix (which sorts before it) and skip forward. */
    k = ps__val(start.data, start.len < s->max_key ? start.len : s->max_key);
    rc = mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE);
    while (rc == 0 && ps__keycmp(k.mv_data, k.mv_size, start.data,
                                 start.len) < 0) {
        rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT);
    }
    for (; rc == 0; rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
        if (ps__keycmp(k.mv_data, k.mv_size, end.data, end.len) >= 0) {
            break;
        }
        rt_buf_reset(&pk);
        rt_buf_reset(&rk);
        if (rt_key_split(k.mv_data, k.mv_size, &tid, &pk, &rk) != 0) {
            rc = RT_ECORRUPT;
            goto out_err;
        }
        if (sc->n >= limit || bytes >= max_bytes) {
            /* Page budget spent, and the range still has this key. */
            sc->more = 1;
            sc->next_pk = ps__strdup_buf(&pk);
            sc->next_rk = ps__strdup_buf(&rk);
            break;
        }
        sc->scanned++;
        if (sc->match) {
            int m = sc->match(sc->match_arg, rt_buf_cstr(&pk),
                              rt_buf_cstr(&rk), v.mv_data, v.mv_size);
            if (m < 0) {
                rc = m;
                goto out_err;
            }
            if (m == 0) {
                continue;
            }
        }
        rc = ps__scan_add(sc, &cap, &pk, &rk, &v);
        if (rc != 0) {
            goto out_err;
        }
        bytes += v.mv_size;
    }
    rc = rc == MDB_NOTFOUND ? 0 : ps__mdb_err(rc);
    if (rc == 0) {
        goto out;
    }
out_err:
    ps_scan_free(sc);
out:
    if (cur) {
        mdb_cursor_close(cur);
    }
    if (txn) {
        mdb_txn_abort(txn);
    }
    rt_buf_free(&start);
    rt_buf_free(&end);
    rt_buf_free(&pk);
    rt_buf_free(&rk);
    return rc;
}

/* Meta */

int ps_store_meta_load(struct ps_store *s, uint64_t *server_id,
                       struct rt_buf *ranges)
{
    MDB_txn *txn;
    MDB_val k, v;
    int rc;

    *server_id = 0;
    rc = mdb_txn_begin(s->env, NULL, MDB_RDONLY, &txn);
    if (rc != 0) {
        return ps__mdb_err(rc);
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
    return ps__mdb_err(rc);
}

int ps_store_meta_save(struct ps_store *s, uint64_t server_id,
                       const void *ranges, size_t ranges_len)
{
    MDB_txn *txn;
    MDB_val k, v;
    uint8_t id[8];
    int rc;

    rc = mdb_txn_begin(s->env, NULL, 0, &txn);
    if (rc != 0) {
        return ps__mdb_err(rc);
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
    if (rc != 0) {
        mdb_txn_abort(txn);
        return ps__mdb_err(rc);
    }
    return ps__mdb_err(mdb_txn_commit(txn));
}

/* Drop table */

int ps_store_drop_chunk(struct ps_store *s, uint64_t table_id,
                        size_t max_keys, uint64_t *deleted)
{
    uint8_t lo[8], marker[sizeof(PS_META_DROP) - 1 + 8];
    struct rt_buf end = RT_BUF_INIT;
    MDB_txn *txn;
    MDB_cursor *cur;
    MDB_val k, v;
    size_t n = 0;
    int more = 0;
    int rc;

    rt_put_u64be(lo, table_id);
    rt_key_table_end(&end, table_id);
    memcpy(marker, PS_META_DROP, sizeof(PS_META_DROP) - 1);
    rt_put_u64be(marker + sizeof(PS_META_DROP) - 1, table_id);

    rc = mdb_txn_begin(s->env, NULL, 0, &txn);
    if (rc != 0) {
        rt_buf_free(&end);
        return ps__mdb_err(rc);
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
        return ps__mdb_err(rc);
    }
    *deleted += n;
    return more;

err:
    mdb_txn_abort(txn);
    rt_buf_free(&end);
    return ps__mdb_err(rc);
}

int ps_store_pending_drops(struct ps_store *s, uint64_t **ids, size_t *n)
{
    const size_t plen = sizeof(PS_META_DROP) - 1;
    MDB_txn *txn;
    MDB_cursor *cur;
    MDB_val k, v;
    uint64_t *out = NULL;
    size_t cnt = 0;
    int rc;

    *ids = NULL;
    *n = 0;
    rc = mdb_txn_begin(s->env, NULL, MDB_RDONLY, &txn);
    if (rc != 0) {
        return ps__mdb_err(rc);
    }
    rc = mdb_cursor_open(txn, s->meta, &cur);
    if (rc != 0) {
        mdb_txn_abort(txn);
        return ps__mdb_err(rc);
    }
    k = ps__val(PS_META_DROP, plen);
    for (rc = mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE); rc == 0;
         rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
        if (k.mv_size < plen || memcmp(k.mv_data, PS_META_DROP, plen) != 0) {
            break;
        }
        if (k.mv_size != plen + 8) {
            continue;
        }
        uint64_t *nout = realloc(out, (cnt + 1) * sizeof(*out));
        if (!nout) {
            rc = ENOMEM;
            break;
        }
        out = nout;
        out[cnt++] = rt_get_u64be((const uint8_t *)k.mv_data + plen);
    }
    mdb_cursor_close(cur);
    mdb_txn_abort(txn);
    if (rc != 0 && rc != MDB_NOTFOUND) {
        free(out);
        return ps__mdb_err(rc);
    }
    *ids = out;
    *n = cnt;
    return 0;
}
