/* LEADER_START in the catalog (see ms_catalog.h, ms_catalog_int.h): the
 * term only grows, and the leader record changes with it in one
 * transaction. Loaded at open by ms_catalog.c (the "leader" database). */
#include <stdlib.h>

#include "ms_catalog_int.h"
#include "rt_alloc.h"
#include "rt_err.h"
#include "rt_lmdb.h"

const Rt__LeaderStartCmd *ms_catalog_leader(const struct ms_catalog *cat)
{
    return cat->leader;
}

int ms_cat_do_leader_start(struct ms_catalog *cat, const Rt__LeaderStartCmd *ls)
{
    static const char key[] = "current";
    struct ms_counters ctr = cat->ctr;
    Rt__LeaderStartCmd *copy;
    uint8_t *buf;
    size_t len;
    MDB_txn *txn;
    int rc, err;

    /* Terms only grow: an older leader's entry committed late is a no-op. */
    if (ls->master_term <= ctr.master_term) {
        return RT_ESTALE;
    }
    ctr.master_term = ls->master_term;
    len = rt__leader_start_cmd__get_packed_size(ls);
    buf = rt_xmalloc(len ? len : 1);
    rt__leader_start_cmd__pack(ls, buf);
    copy = rt__leader_start_cmd__unpack(NULL, len, buf);
    if (!copy) {
        free(buf);
        cat->local_err = RT_ENOMEM;
        return RT_ENOMEM;
    }
    rc = ms_cat_txn_begin(cat, &txn);
    if (rc) {
        err = rt_lmdb_err(rc);
        goto err_after_copy;
    }
    {
        MDB_val k = {sizeof(key) - 1, (void *)key}, v = {len, buf};
        rc = mdb_put(txn, cat->db_leader, &k, &v, 0);
    }
    err = ms_cat_txn_finish(cat, txn, rc, &ctr, "leader start");
    if (err) {
        goto err_after_copy;
    }
    free(buf);
    if (cat->leader) {
        rt__leader_start_cmd__free_unpacked(cat->leader, NULL);
    }
    cat->leader = copy;
    return 0;

err_after_copy:
    rt__leader_start_cmd__free_unpacked(copy, NULL);
    free(buf);
    return err;
}
