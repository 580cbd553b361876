/* Store write path: entity operations (insert, replace, merge, delete,
 * upserts), entity group transaction rules, Timestamps, raw changes of
 * ranges moving in, and the group commit that runs them (writer thread).
 *
 * Happy path of a group commit: one write transaction; each write's ops run
 * in order (validate, read the old value, check existence and If-Match,
 * build and validate the new entity, stamp ticks, put or delete); each
 * range the writes changed takes its next LSN in the same transaction
 * (ps_store_repl.c); commit with sync. Failure modes and what callers see:
 *  - an op's own validation or condition fails: that op's code, nothing
 *    else changes (every check runs before any put of that op);
 *  - an atomic write: the batch rules (count, one PK, no row twice) first,
 *    then every op is checked (merges included), nothing is put unless all
 *    pass; the failing op's code and index come back in the write;
 *  - LMDB fails (map full, I/O): the transaction is aborted, never
 *    continued; every write in the group is then retried alone, so only the
 *    writes that cannot fit fail (status RT_ENOSPACE / RT_EIO);
 *  - the file system is full: the disk blocks the commit may write past
 *    the file's end are reserved (fallocate, keeping the size) before a
 *    primary ships the group, so a full disk is RT_ENOSPACE before
 *    anything leaves, not a failed commit of a group peers may hold
 *    (which stops the server). */
#include "ps_store.h"
#include "ps_store_int.h"

#include <errno.h>
#include <fcntl.h>
#include <lmdb.h>
#include <stdlib.h>
#include <string.h>

#include "rt_entity.h"
#include "rt_err.h"
#include "rt_key.h"
#include "rt_lmdb.h"
#include "rt_log.h"
#include "rt_time.h"

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
    w->lsn = 0;
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
        if (ps__value_check(s->kbuf.data, s->kbuf.len, v.mv_data, v.mv_size) !=
            0) {
            /* An op that reads the old value (merge, ETag condition) must
             * not act on bad data; one that just replaces or deletes it
             * never looks at it, and is how a client repairs the entity. */
            if (op->kind == PS_OP_MERGE || op->kind == PS_OP_UPSERT_MERGE ||
                (!op->if_match_any && op->if_match != 0)) {
                op->code = RT_ECORRUPT;
                return 0;
            }
            old_ticks = 0;
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
    rt_value_seal(s->vbuf.data, s->vbuf.len, s->kbuf.data, s->kbuf.len);
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

/* Disk space the commit of the group just built may write past the last
 * page in use: its bytes three times (copy-on-write rewrites whole pages,
 * split leaves are half full) plus a B-tree path per entity op and the
 * free list, at least PS_RESERVE_MIN.
 * Reserved in chunks of PS_RESERVE_CHUNK ahead so most groups need no
 * system call. */
#define PS_RESERVE_MIN (1u << 20)
#define PS_RESERVE_CHUNK (8u << 20)

static int ps__reserve(struct ps_store *s, struct ps_write *const *w, size_t n)
{
    MDB_envinfo info;
    MDB_stat st;
    mdb_filehandle_t fd;
    uint64_t need = PS_RESERVE_MIN, from, end;
    int rc;

    for (size_t i = 0; i < n; i++) {
        /* Raw changes (a range moving in: many small puts) are covered
         * by the bytes: leaves half full are 2x, their branches less. */
        need += 3 * w[i]->bytes_written + (w[i]->n_ops + 1) * 8 * 4096;
    }
    if (mdb_env_info(s->env, &info) != 0 || mdb_env_stat(s->env, &st) != 0 ||
        mdb_env_get_fd(s->env, &fd) != 0) {
        return 0; /* nothing to go by: the commit tells */
    }
    from = ((uint64_t)info.me_last_pgno + 1) * st.ms_psize;
    end = from + need;
    if (end > info.me_mapsize) {
        end = info.me_mapsize; /* past the map is MDB_MAP_FULL anyway */
    }
    if (end <= s->reserved_end || end <= from) {
        return 0;
    }
    /* A chunk ahead when the disk has it, else exactly what is needed. */
    rc = fallocate(fd, FALLOC_FL_KEEP_SIZE, (off_t)from,
                   (off_t)(end - from + PS_RESERVE_CHUNK));
    if (rc == 0) {
        s->reserved_end = end + PS_RESERVE_CHUNK;
        return 0;
    }
    if (errno == ENOSPC) {
        rc = fallocate(fd, FALLOC_FL_KEEP_SIZE, (off_t)from,
                       (off_t)(end - from));
        if (rc == 0) {
            s->reserved_end = end;
            return 0;
        }
    }
    if (errno == ENOSPC || errno == EDQUOT) {
        return RT_ENOSPACE;
    }
    /* EOPNOTSUPP and the like: no reservation on this file system. */
    return 0;
}

/* Runs the pre-commit hook when the group holds a primary's group of a
 * replicated range; returns whether it ran. */
static int ps__group_ship(struct ps_store *s,
                          struct ps_write *const *w,
                          size_t n,
                          uint64_t txn_id)
{
    if (s->precommit == NULL) {
        return 0;
    }
    for (size_t i = 0; i < n; i++) {
        if (w[i]->lsn != 0 && w[i]->repl_lsn == 0) {
            s->precommit(s->precommit_arg, w, n, txn_id);
            return 1;
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
    int rc, shipped;

    for (size_t i = 0; i < n; i++) {
        ps_write_reset(w[i]);
    }
    rc = mdb_txn_begin(s->env, NULL, 0, &txn);
    if (rc != 0) {
        return rt_lmdb_err(rc);
    }
    id = (uint64_t)mdb_txn_id(txn);
    s->cur_txn = id;
    rt_buf_reset(&s->lsnbuf);
    for (size_t i = 0; i < n; i++) {
        uint64_t before = s->changes;
        rc = ps__write_apply(s, txn, w[i]);
        if (rc != 0) {
            goto err_abort;
        }
        /* A write whose checks failed put nothing: it takes no LSN. */
        if ((s->changes != before || w[i]->repl_lsn != 0) &&
            w[i]->range_id != 0) {
            ps__repl_note(s, w[i]->range_id, i);
        }
    }
    /* The LSNs commit with the data: after a crash, applied_lsn is
     * exactly what the data holds (docs/DESIGN-replication.md §2.2). */
    rc = ps__repl_assign(s, txn, w);
    if (rc != 0) {
        goto err_abort;
    }
    rc = ps__reserve(s, w, n);
    if (rc != 0) {
        goto err_abort;
    }
    shipped = ps__group_ship(s, w, n, id);
    rc = mdb_txn_commit(txn);
    if (rc != 0) {
        rc = rt_lmdb_err(rc);
        if (shipped) {
            /* Peers may hold this group already; an LSN reused for other
             * changes would make them diverge silently. */
            rt_log(RT_LOG_FATAL,
                   "commit of a replicated group shipped before its local "
                   "commit failed (%s): stopping",
                   rt_strerror(rc));
            abort();
        }
        goto err_uncommitted;
    }
    for (size_t i = 0; i < n; i++) {
        w[i]->txn_id = id;
    }
    return 0;

err_abort:
    mdb_txn_abort(txn);
err_uncommitted:
    s->cap.len = mark; /* nothing of it was committed */
    for (size_t i = 0; i < n; i++) {
        w[i]->lsn = 0;
    }
    return rc;
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
