#include "th_lmdb.h"

#include <lmdb.h>

/* Large enough for any test environment: LMDB only reserves address
 * space, and refuses a map smaller than what the file already uses. */
#define TH_LMDB_MAP (1024UL * 1024 * 1024)

/* Opens @dir and begins a write transaction on database @db. */
static int th__open(const char *dir,
                    const char *db,
                    MDB_env **env,
                    MDB_txn **txn,
                    MDB_dbi *dbi)
{
    int rc = mdb_env_create(env);
    if (rc != 0) {
        return rc;
    }
    if ((rc = mdb_env_set_maxdbs(*env, 16)) != 0 ||
        (rc = mdb_env_set_mapsize(*env, TH_LMDB_MAP)) != 0 ||
        (rc = mdb_env_open(*env, dir, MDB_NOTLS, 0644)) != 0 ||
        (rc = mdb_txn_begin(*env, NULL, 0, txn)) != 0) {
        mdb_env_close(*env);
        return rc;
    }
    if ((rc = mdb_dbi_open(*txn, db, 0, dbi)) != 0) {
        mdb_txn_abort(*txn);
        mdb_env_close(*env);
    }
    return rc;
}

/* Commits (@rc == 0) or aborts, closes, and returns the first error. */
static int th__close(MDB_env *env, MDB_txn *txn, int rc)
{
    if (rc == 0) {
        rc = mdb_txn_commit(txn);
    } else {
        mdb_txn_abort(txn);
    }
    mdb_env_close(env);
    return rc;
}

int th_lmdb_get(const char *dir,
                const char *db,
                const void *key,
                size_t klen,
                struct rt_buf *out)
{
    MDB_env *env;
    MDB_txn *txn;
    MDB_dbi dbi;
    MDB_val k = {klen, (void *)key}, v;
    int rc = th__open(dir, db, &env, &txn, &dbi);
    if (rc != 0) {
        return rc;
    }
    rc = mdb_get(txn, dbi, &k, &v);
    if (rc == 0) {
        rt_buf_reset(out);
        rt_buf_append(out, v.mv_data, v.mv_size);
    }
    return th__close(env, txn, rc);
}

int th_lmdb_put(const char *dir,
                const char *db,
                const void *key,
                size_t klen,
                const void *val,
                size_t vlen)
{
    MDB_env *env;
    MDB_txn *txn;
    MDB_dbi dbi;
    MDB_val k = {klen, (void *)key}, v = {vlen, (void *)val};
    int rc = th__open(dir, db, &env, &txn, &dbi);
    if (rc != 0) {
        return rc;
    }
    return th__close(env, txn, mdb_put(txn, dbi, &k, &v, 0));
}

int th_lmdb_flip(const char *dir,
                 const char *db,
                 const void *key,
                 size_t klen,
                 long at,
                 uint8_t mask)
{
    struct rt_buf v = RT_BUF_INIT;
    int rc = th_lmdb_get(dir, db, key, klen, &v);
    if (rc == 0) {
        size_t i = at < 0 ? v.len - (size_t)(-at) : (size_t)at;
        v.data[i] ^= mask;
        rc = th_lmdb_put(dir, db, key, klen, v.data, v.len);
    }
    rt_buf_free(&v);
    return rc;
}
