/* Store replication records: the "repl" DB's replica state ("rs") of each
 * range, its fixed layout (ps_store_int.h), and the LSN a group commit
 * takes for each range it changes (docs/DESIGN-replication.md §2.2, §5.2).
 *
 * Happy path of a group's LSNs, inside its write transaction: each write
 * that changed data notes (range, write) (ps__repl_note); ps__repl_assign
 * sorts the notes by range, and for each range reads its record (absent =
 * LSN 0), moves applied_lsn and applied_epoch to (lsn + 1, epoch) -- or,
 * for a replica's raw writes, to the highest repl_lsn they carry, which
 * must follow applied_lsn without a gap (else RT_ELSNGAP) -- notes the
 * generation of each LSN in its history (ps__rs_hist_note), puts it
 * back, and gives that LSN to every write of the range. Failure modes: a
 * record that fails its checks is RT_ECORRUPT and an LMDB failure its code;
 * both poison the transaction, so the group fails as a whole and is retried
 * write by write (ps_store_write.c) without any LSN taken. */
#include "ps_store.h"
#include "ps_store_int.h"

#include <lmdb.h>
#include <stdlib.h>
#include <string.h>

#include "rt_buf.h"
#include "rt_crc32c.h"
#include "rt_err.h"
#include "rt_lmdb.h"

struct ps__rpair
{
    uint64_t range_id;
    size_t idx; /* the write, in group order */
};

static void ps__rs_key(uint8_t k[PS_RS_KEY_LEN], uint64_t range_id)
{
    memcpy(k, PS_RS_PREFIX, 2);
    rt_put_u64be(k + 2, range_id);
}

size_t ps__rs_encode(const struct ps_rstate *rs, uint8_t out[PS_RS_MAX_SIZE])
{
    size_t n = rs->n_hist <= PS_RS_MAX_HISTORY ? rs->n_hist : 0, off;
    out[0] = PS_RS_VERSION;
    out[1] = (uint8_t)rs->role;
    out[2] = (uint8_t)rs->state;
    out[3] = 0;
    rt_put_u64le(out + 4, rs->epoch);
    rt_put_u64le(out + 12, rs->primary_epoch);
    rt_put_u64le(out + 20, rs->applied_epoch);
    rt_put_u64le(out + 28, rs->applied_lsn);
    rt_put_u64le(out + 36, rs->commit_lsn);
    rt_put_u64le(out + 44, rs->sealed_epoch);
    out[PS_RS_FIXED] = (uint8_t)n;
    off = PS_RS_FIXED + 1;
    for (size_t i = 0; i < n; i++, off += 16) {
        rt_put_u64le(out + off, rs->hist[i].epoch);
        rt_put_u64le(out + off + 8, rs->hist[i].first_lsn);
    }
    rt_put_u32le(out + off, rt_crc32c(0, out, off));
    return off + 4;
}

int ps__rs_decode(const uint8_t *p, size_t n, struct ps_rstate *rs)
{
    size_t body, nh = 0;
    if (n < PS_RS_V1_SIZE || (p[0] != 1 && p[0] != PS_RS_VERSION) ||
        p[1] >= PS_RS_ROLE__NR || p[2] >= PS_RS__NR) {
        return RT_ECORRUPT;
    }
    if (p[0] == 1) {
        body = PS_RS_V1_SIZE - 4;
        if (n != PS_RS_V1_SIZE) {
            return RT_ECORRUPT;
        }
    } else {
        nh = p[PS_RS_FIXED];
        body = PS_RS_FIXED + 1 + 16 * nh;
        if (nh > PS_RS_MAX_HISTORY || n != body + 4) {
            return RT_ECORRUPT;
        }
    }
    if (rt_get_u32le(p + body) != rt_crc32c(0, p, body)) {
        return RT_ECORRUPT;
    }
    rs->role = (enum ps_rs_role)p[1];
    rs->state = (enum ps_rs_state)p[2];
    rs->epoch = rt_get_u64le(p + 4);
    rs->primary_epoch = rt_get_u64le(p + 12);
    rs->applied_epoch = rt_get_u64le(p + 20);
    rs->applied_lsn = rt_get_u64le(p + 28);
    rs->commit_lsn = rt_get_u64le(p + 36);
    rs->sealed_epoch = rt_get_u64le(p + 44);
    memset(rs->hist, 0, sizeof(rs->hist));
    rs->n_hist = nh;
    for (size_t i = 0; i < nh; i++) {
        const uint8_t *h = p + PS_RS_FIXED + 1 + 16 * i;
        rs->hist[i].epoch = rt_get_u64le(h);
        rs->hist[i].first_lsn = rt_get_u64le(h + 8);
    }
    return 0;
}

/* Notes that LSN @lsn was made by generation @gen (0: unknown, which
 * forgets the history) in @rs's history, the way the core does
 * (ps_rcore.c ps__rcore_hist_note): a generation's first LSN opens an
 * entry, the oldest entry goes when the list is full. */
static void ps__rs_hist_note(struct ps_rstate *rs, uint64_t gen, uint64_t lsn)
{
    if (gen == 0) {
        rs->n_hist = 0;
        return;
    }
    if (rs->n_hist > 0 && rs->hist[rs->n_hist - 1].epoch == gen) {
        return;
    }
    if (rs->n_hist == 0 && lsn != 1) {
        /* Where its earlier generations began is unknown: so stays the
         * history (an entry starting here would claim that @gen began
         * here). */
        return;
    }
    if (rs->n_hist == PS_RS_MAX_HISTORY) {
        memmove(rs->hist, rs->hist + 1, (rs->n_hist - 1) * sizeof(*rs->hist));
        rs->n_hist--;
    }
    rs->hist[rs->n_hist++] = (struct ps_rs_gen){gen, lsn};
}

int ps__rs_read(struct ps_store *s,
                MDB_txn *txn,
                uint64_t range_id,
                struct ps_rstate *rs,
                int *found)
{
    uint8_t kb[PS_RS_KEY_LEN];
    MDB_val k = {PS_RS_KEY_LEN, kb}, v;
    int rc;

    ps__rs_key(kb, range_id);
    rc = mdb_get(txn, s->repl, &k, &v);
    if (rc == MDB_NOTFOUND) {
        memset(rs, 0, sizeof(*rs));
        rs->state = PS_RS_OK;
        *found = 0;
        return 0;
    }
    if (rc != 0) {
        return rt_lmdb_err(rc);
    }
    *found = 1;
    return ps__rs_decode(v.mv_data, v.mv_size, rs);
}

int ps__rs_snap_read(struct ps_store *s,
                     MDB_txn *txn,
                     uint64_t range_id,
                     struct ps_rstate *rs)
{
    int found, rc = ps__rs_read(s, txn, range_id, rs, &found);
    return rc == 0 && !found ? RT_ENOTFOUND : rc;
}

static int ps__rs_write(struct ps_store *s,
                        MDB_txn *txn,
                        uint64_t range_id,
                        const struct ps_rstate *rs)
{
    uint8_t kb[PS_RS_KEY_LEN], vb[PS_RS_MAX_SIZE];
    MDB_val k = {PS_RS_KEY_LEN, kb}, v = {0, vb};
    int rc;

    ps__rs_key(kb, range_id);
    v.mv_size = ps__rs_encode(rs, vb);
    rc = mdb_put(txn, s->repl, &k, &v, 0);
    return rc == 0 ? 0 : rt_lmdb_err(rc);
}

static int ps__rpair_cmp(const void *a, const void *b)
{
    const struct ps__rpair *x = a, *y = b;
    if (x->range_id != y->range_id) {
        return x->range_id < y->range_id ? -1 : 1;
    }
    return x->idx < y->idx ? -1 : x->idx > y->idx;
}

void ps__repl_note(struct ps_store *s, uint64_t range_id, size_t idx)
{
    struct ps__rpair one = {range_id, idx};
    rt_buf_append(&s->lsnbuf, &one, sizeof(one));
}

int ps__repl_assign(struct ps_store *s, MDB_txn *txn, struct ps_write *const *w)
{
    struct ps__rpair *p = (struct ps__rpair *)s->lsnbuf.data;
    size_t np = s->lsnbuf.len / sizeof(*p);

    if (np == 0) {
        return 0;
    }
    if (np > 1) {
        qsort(p, np, sizeof(*p), ps__rpair_cmp);
    }
    for (size_t a = 0; a < np;) {
        struct ps_rstate rs;
        int found, rc;
        size_t b = a;

        rc = ps__rs_read(s, txn, p[a].range_id, &rs, &found);
        if (rc != 0) {
            return rc;
        }
        uint64_t set = 0, next = rs.applied_lsn + 1;
        for (; b < np && p[b].range_id == p[a].range_id; b++) {
            uint64_t l = w[p[b].idx]->repl_lsn;
            if (l == 0) {
                continue;
            }
            /* A replica's groups land in LSN order or not at all: a gap
             * (an earlier group failed) or a repeat fails the commit. */
            if (l != next) {
                return RT_ELSNGAP;
            }
            if (l != set) {
                ps__rs_hist_note(&rs, w[p[b].idx]->repl_gen, l);
            }
            set = l;
            next++;
        }
        if (set == 0) {
            /* The primary's own group: of its generation, if it is one. */
            ps__rs_hist_note(
                &rs, rs.role == PS_RS_ROLE_PRIMARY ? rs.primary_epoch : 0,
                rs.applied_lsn + 1);
        }
        rs.applied_lsn = set != 0 ? set : rs.applied_lsn + 1;
        rs.applied_epoch = rs.epoch;
        rc = ps__rs_write(s, txn, p[a].range_id, &rs);
        if (rc != 0) {
            return rc;
        }
        b = a;
        for (; b < np && p[b].range_id == p[a].range_id; b++) {
            w[p[b].idx]->lsn = rs.applied_lsn;
        }
        a = b;
    }
    return 0;
}

int ps_store_repl_get(struct ps_store *s,
                      uint64_t range_id,
                      struct ps_rstate *out)
{
    MDB_txn *txn;
    int found = 0;
    int rc = mdb_txn_begin(s->env, NULL, MDB_RDONLY, &txn);

    if (rc != 0) {
        return rt_lmdb_err(rc);
    }
    rc = ps__rs_read(s, txn, range_id, out, &found);
    mdb_txn_abort(txn);
    if (rc == 0 && !found) {
        rc = RT_ENOTFOUND;
    }
    return rc;
}

int ps_store_repl_put(struct ps_store *s,
                      uint64_t range_id,
                      const struct ps_rstate *rs)
{
    MDB_txn *txn;
    int rc = mdb_txn_begin(s->env, NULL, 0, &txn);

    if (rc != 0) {
        return rt_lmdb_err(rc);
    }
    rc = ps__rs_write(s, txn, range_id, rs);
    if (rc != 0) {
        mdb_txn_abort(txn);
        return rc;
    }
    rc = mdb_txn_commit(txn);
    return rc == 0 ? 0 : rt_lmdb_err(rc);
}

int ps_store_repl_update(struct ps_store *s,
                         uint64_t range_id,
                         unsigned set,
                         const struct ps_rstate *rs)
{
    struct ps_rstate cur;
    MDB_txn *txn;
    int found, rc = mdb_txn_begin(s->env, NULL, 0, &txn);

    if (rc != 0) {
        return rt_lmdb_err(rc);
    }
    rc = ps__rs_read(s, txn, range_id, &cur, &found);
    if (rc == 0) {
        if (set & PS_RS_SET_EPOCH) {
            cur.epoch = rs->epoch;
        }
        if (set & PS_RS_SET_ROLE) {
            cur.role = rs->role;
        }
        if (set & PS_RS_SET_PRIMARY_EPOCH) {
            cur.primary_epoch = rs->primary_epoch;
        }
        if (set & PS_RS_SET_APPLIED) {
            cur.applied_epoch = rs->applied_epoch;
            cur.applied_lsn = rs->applied_lsn;
            cur.commit_lsn = rs->commit_lsn;
            memcpy(cur.hist, rs->hist, sizeof(cur.hist));
            cur.n_hist = rs->n_hist <= PS_RS_MAX_HISTORY ? rs->n_hist : 0;
        }
        if ((set & PS_RS_SET_SEALED_EPOCH) &&
            rs->sealed_epoch > cur.sealed_epoch) {
            cur.sealed_epoch = rs->sealed_epoch;
        }
        if (set & PS_RS_SET_STATE) {
            cur.state = rs->state;
        }
        rc = ps__rs_write(s, txn, range_id, &cur);
    }
    if (rc != 0) {
        mdb_txn_abort(txn);
        return rc;
    }
    rc = mdb_txn_commit(txn);
    return rc == 0 ? 0 : rt_lmdb_err(rc);
}
