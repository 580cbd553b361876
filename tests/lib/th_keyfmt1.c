/* th-keyfmt1 DIR: turns a stopped partition server's data directory back
 * into key format 1 (rt_key.h: PK and RK bytes as they are, before keys
 * were in UTF-16 order), as an older release would have left it, so the
 * integration tests can watch a real server migrate it at start
 * (tests/integration/test_key_order.py). Test-only: never installed.
 *
 * What it does, in one LMDB write transaction: every plain record of the
 * "data" DB whose PK or RK holds a byte that format 2 remaps (0xF5/0xF6)
 * is rewritten under its format 1 key, its value resealed under that key
 * when it carried a valid CRC; the meta record "key_format" is deleted.
 * Long keys (bucket records of the bucket length) are refused: the tests
 * that use it keep keys short. Prints the number of keys rewritten.
 * Exit status: 0 done, 1 an LMDB or data error (message on stderr), 2
 * usage or a long key met. */
#include <lmdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt_buf.h"
#include "rt_entity.h"
#include "rt_utf8.h"

static int th__fail(const char *what, int rc)
{
    fprintf(stderr, "th-keyfmt1: %s: %s\n", what, mdb_strerror(rc));
    return 1;
}

int main(int argc, char **argv)
{
    MDB_env *env;
    MDB_txn *txn;
    MDB_dbi data, meta;
    MDB_cursor *cur;
    MDB_val k, v, bk = {10, "bucket_len"}, fk = {10, "key_format"};
    struct rt_buf keys = RT_BUF_INIT, vals = RT_BUF_INIT;
    size_t blen = 0, n = 0;
    int rc;

    if (argc != 2) {
        fprintf(stderr, "usage: th-keyfmt1 DATA_DIR\n");
        return 2;
    }
    if ((rc = mdb_env_create(&env)) != 0 ||
        (rc = mdb_env_set_maxdbs(env, 4)) != 0 ||
        (rc = mdb_env_open(env, argv[1], 0, 0644)) != 0) {
        return th__fail(argv[1], rc);
    }
    if ((rc = mdb_txn_begin(env, NULL, 0, &txn)) != 0 ||
        (rc = mdb_dbi_open(txn, "data", 0, &data)) != 0 ||
        (rc = mdb_dbi_open(txn, "meta", 0, &meta)) != 0) {
        return th__fail("open data/meta", rc);
    }
    if (mdb_get(txn, meta, &bk, &v) == 0 && v.mv_size == 4) {
        const uint8_t *p = v.mv_data;
        blen = (size_t)p[0] | (size_t)p[1] << 8 | (size_t)p[2] << 16 |
               (size_t)p[3] << 24;
    }
    if ((rc = mdb_cursor_open(txn, data, &cur)) != 0) {
        return th__fail("cursor", rc);
    }
    for (rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST); rc == 0;
         rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
        const uint8_t *kp = k.mv_data;
        int remapped = 0;
        for (size_t i = 8; i < k.mv_size; i++) {
            remapped |= kp[i] == 0xF5 || kp[i] == 0xF6;
        }
        if (!remapped) {
            continue;
        }
        if (blen && k.mv_size >= blen) {
            fprintf(stderr, "th-keyfmt1: a long key (bucket): not supported\n");
            return 2;
        }
        rt_buf_append_u8(&keys, (uint8_t)(k.mv_size >> 8));
        rt_buf_append_u8(&keys, (uint8_t)k.mv_size);
        rt_buf_append(&keys, k.mv_data, k.mv_size);
        rt_buf_append_u8(&vals, (uint8_t)(v.mv_size >> 24));
        rt_buf_append_u8(&vals, (uint8_t)(v.mv_size >> 16));
        rt_buf_append_u8(&vals, (uint8_t)(v.mv_size >> 8));
        rt_buf_append_u8(&vals, (uint8_t)v.mv_size);
        rt_buf_append(&vals, v.mv_data, v.mv_size);
    }
    mdb_cursor_close(cur);
    if (rc != MDB_NOTFOUND) {
        return th__fail("scan", rc);
    }
    for (size_t ko = 0, vo = 0; ko < keys.len; n++) {
        size_t kn = (size_t)keys.data[ko] << 8 | keys.data[ko + 1];
        size_t vn = (size_t)vals.data[vo] << 24 |
                    (size_t)vals.data[vo + 1] << 16 |
                    (size_t)vals.data[vo + 2] << 8 | vals.data[vo + 3];
        uint8_t *key = keys.data + ko + 2, *val = vals.data + vo + 4;
        uint8_t old[512];
        uint64_t ticks;
        uint8_t flags = 0;
        const uint8_t *blob;
        size_t bn;
        int sealed;

        memcpy(old, key, kn);
        for (size_t i = 8; i < kn; i++) {
            old[i] = rt_utf16_unbyte(old[i]);
        }
        sealed = rt_value_decode(val, vn, &ticks, &flags, &blob, &bn) == 0 &&
                 (flags & RT_VALUE_F_CRC) &&
                 rt_value_check(val, vn, key, kn) == 0;
        k.mv_data = key;
        k.mv_size = kn;
        if ((rc = mdb_del(txn, data, &k, NULL)) != 0) {
            return th__fail("del", rc);
        }
        if (sealed) {
            rt_value_seal(val, vn, old, kn);
        }
        k.mv_data = old;
        v.mv_data = val;
        v.mv_size = vn;
        if ((rc = mdb_put(txn, data, &k, &v, 0)) != 0) {
            return th__fail("put", rc);
        }
        ko += 2 + kn;
        vo += 4 + vn;
    }
    rc = mdb_del(txn, meta, &fk, NULL);
    if (rc != 0 && rc != MDB_NOTFOUND) {
        return th__fail("del key_format", rc);
    }
    if ((rc = mdb_txn_commit(txn)) != 0) {
        return th__fail("commit", rc);
    }
    mdb_env_close(env);
    rt_buf_free(&keys);
    rt_buf_free(&vals);
    printf("%zu\n", n);
    return 0;
}
