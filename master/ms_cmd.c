/* The public mutations of ms_catalog.h as commands (see ms_cmd.h). Each
 * builds its MasterCmd on the stack from borrowed arguments (nothing is
 * copied before packing), submits it, and copies the results the caller
 * asked for out of the apply's result. Errors, results and "nothing
 * written on error" are the mutation bodies' (ms_catalog.c). */
#include "ms_cmd.h"

#include <stdlib.h>
#include <string.h>

#include "ms_catalog_int.h"
#include "rt_alloc.h"
#include "rt_err.h"
#include "rt_log.h"

void ms_catalog_set_proposer(struct ms_catalog *cat,
                             ms_catalog_propose_fn propose,
                             void *ud)
{
    cat->propose = propose;
    cat->propose_ud = ud;
}

int ms_cmd_submit(struct ms_catalog *cat,
                  Rt__MasterCmd *cmd,
                  struct ms_cmd_result *res)
{
    uint8_t *buf;
    size_t len;
    int err;

    cmd->version = MS_CMD_VERSION;
    cmd->origin = cat->origin;
    cmd->origin_boot = cat->origin_boot;
    cmd->origin_seq = cat->next_seq;
    if (cmd->now_ms == 0) {
        cmd->now_ms = ms_cat_now_ms(cat);
    }
    len = rt__master_cmd__get_packed_size(cmd);
    buf = rt_xmalloc(len ? len : 1);
    rt__master_cmd__pack(cmd, buf);
    err = ms_fsm_apply(cat, buf, len, res);
    if (err == 0 && res->changed && cat->propose) {
        /* Failed guards and no-ops write nothing and are not proposed:
         * every member would compute the same nothing. */
        err = cat->propose(cat->propose_ud, buf, len);
        if (err) {
            rt_log(RT_LOG_ERROR, "catalog: propose command %d: %s",
                   (int)cmd->cmd_case, rt_strerror(err));
        } else {
            cat->next_seq++;
        }
    }
    free(buf);
    return err ? err : res->rc;
}

int ms_catalog_create_table_rs(struct ms_catalog *cat,
                               const char *account,
                               const char *name,
                               const struct ms_replica_spec *rs,
                               const struct ms_table **table_out,
                               const struct ms_range **range_out)
{
    Rt__MasterCmd cmd = RT__MASTER_CMD__INIT;
    Rt__CreateTableCmd c = RT__CREATE_TABLE_CMD__INIT;
    struct ms_cmd_result res;
    int rc;
    c.account = (char *)account;
    c.name = (char *)name;
    c.n_servers = rs->n;
    c.servers = (uint64_t *)rs->servers;
    c.rf = rs->rf;
    c.min_insync = rs->min_insync;
    cmd.cmd_case = RT__MASTER_CMD__CMD_CREATE_TABLE;
    cmd.create_table = &c;
    rc = ms_cmd_submit(cat, &cmd, &res);
    if (rc == 0) {
        if (table_out) {
            *table_out = res.table;
        }
        if (range_out) {
            *range_out = res.range;
        }
    }
    ms_cmd_result_free(&res);
    return rc;
}

int ms_catalog_create_table(struct ms_catalog *cat,
                            const char *account,
                            const char *name,
                            uint64_t server_id,
                            const struct ms_table **table_out,
                            const struct ms_range **range_out)
{
    const struct ms_replica_spec rs = {&server_id, 1, 1, 1};
    return ms_catalog_create_table_rs(cat, account, name, &rs, table_out,
                                      range_out);
}

int ms_catalog_delete_table(struct ms_catalog *cat,
                            const char *account,
                            const char *name,
                            struct ms_table_drop *drop)
{
    Rt__MasterCmd cmd = RT__MASTER_CMD__INIT;
    Rt__DeleteTableCmd c = RT__DELETE_TABLE_CMD__INIT;
    struct ms_cmd_result res;
    int rc;
    c.account = (char *)account;
    c.name = (char *)name;
    c.grace_ms = cat->grace_ms;
    cmd.cmd_case = RT__MASTER_CMD__CMD_DELETE_TABLE;
    cmd.delete_table = &c;
    rc = ms_cmd_submit(cat, &cmd, &res);
    if (rc == 0 && drop) {
        *drop = res.drop; /* moved to the caller */
        memset(&res.drop, 0, sizeof(res.drop));
    }
    ms_cmd_result_free(&res);
    return rc;
}

int ms_catalog_update_ranges(struct ms_catalog *cat,
                             const struct ms_range_put *puts,
                             size_t nput,
                             const uint64_t *dels,
                             size_t ndel,
                             uint64_t *new_ids)
{
    Rt__MasterCmd cmd = RT__MASTER_CMD__INIT;
    Rt__UpdateRangesCmd c = RT__UPDATE_RANGES_CMD__INIT;
    Rt__Range *rv = rt_xcalloc(nput ? nput : 1, sizeof(*rv));
    Rt__Range **rp = rt_xcalloc(nput ? nput : 1, sizeof(*rp));
    protobuf_c_boolean *no_high = rt_xcalloc(nput ? nput : 1, sizeof(*no_high));
    struct ms_cmd_result res;
    int rc;
    for (size_t i = 0; i < nput; i++) {
        rt__range__init(&rv[i]);
        rv[i].id = puts[i].id;
        rv[i].table_id = puts[i].table_id;
        rv[i].low = (char *)puts[i].low;
        rv[i].high = (char *)puts[i].high;
        rv[i].high_inf = puts[i].high_inf;
        rv[i].server_id = puts[i].server_id;
        rv[i].epoch = puts[i].epoch;
        no_high[i] = puts[i].high == NULL;
        rp[i] = &rv[i];
    }
    c.n_puts = nput;
    c.puts = rp;
    c.n_dels = ndel;
    c.dels = (uint64_t *)dels;
    c.n_put_no_high = nput;
    c.put_no_high = no_high;
    cmd.cmd_case = RT__MASTER_CMD__CMD_UPDATE_RANGES;
    cmd.update_ranges = &c;
    rc = ms_cmd_submit(cat, &cmd, &res);
    if (rc == 0 && new_ids) {
        memcpy(new_ids, res.ids, nput * sizeof(uint64_t));
    }
    ms_cmd_result_free(&res);
    free(no_high);
    free(rp);
    free(rv);
    return rc;
}

int ms_catalog_range_apply_repl(struct ms_catalog *cat,
                                const struct rt_repl_conf *conf,
                                uint64_t guard_epoch,
                                uint64_t guard_seal_epoch)
{
    Rt__MasterCmd cmd = RT__MASTER_CMD__INIT;
    Rt__RangeApplyReplCmd c = RT__RANGE_APPLY_REPL_CMD__INIT;
    Rt__Range r = RT__RANGE__INIT;
    Rt__Replica rv[RT_REPL_MAX_REPLICAS], *rp[RT_REPL_MAX_REPLICAS];
    struct ms_cmd_result res;
    int rc;
    /* The entry cannot carry more than the conf can hold; the body would
     * refuse such a set anyway. */
    if (conf->n_members > RT_REPL_MAX_REPLICAS ||
        conf->n_isr > RT_REPL_MAX_REPLICAS) {
        return RT_EINVAL;
    }
    r.id = conf->range_id;
    r.epoch = conf->epoch;
    r.server_id = conf->primary_id;
    r.primary_epoch = conf->primary_epoch;
    for (size_t i = 0; i < conf->n_members; i++) {
        rt__replica__init(&rv[i]);
        rv[i].server_id = conf->members[i].server_id;
        rv[i].role = (Rt__ReplRole)conf->members[i].role;
        rp[i] = &rv[i];
    }
    r.n_replicas = conf->n_members;
    r.replicas = rp;
    r.n_isr = conf->n_isr;
    r.isr = (uint64_t *)conf->isr;
    r.rf = conf->rf;
    r.min_insync = conf->min_insync;
    r.seal_epoch = conf->seal_epoch;
    r.seal_kind = (uint32_t)conf->seal_kind;
    r.seal_to = conf->seal_to;
    c.conf = &r;
    c.guard_epoch = guard_epoch;
    c.guard_seal_epoch = guard_seal_epoch;
    cmd.cmd_case = RT__MASTER_CMD__CMD_RANGE_APPLY_REPL;
    cmd.range_apply_repl = &c;
    rc = ms_cmd_submit(cat, &cmd, &res);
    ms_cmd_result_free(&res);
    return rc;
}

int ms_catalog_split_repl(struct ms_catalog *cat,
                          uint64_t range_id,
                          uint64_t guard_epoch,
                          const char *key,
                          uint64_t new_ids[2])
{
    Rt__MasterCmd cmd = RT__MASTER_CMD__INIT;
    Rt__SplitReplCmd c = RT__SPLIT_REPL_CMD__INIT;
    struct ms_cmd_result res;
    int rc;
    c.range_id = range_id;
    c.guard_epoch = guard_epoch;
    c.key = (char *)key; /* NULL travels as "": never inside a range */
    cmd.cmd_case = RT__MASTER_CMD__CMD_SPLIT_REPL;
    cmd.split_repl = &c;
    rc = ms_cmd_submit(cat, &cmd, &res);
    if (rc == 0) {
        new_ids[0] = res.ids[0];
        new_ids[1] = res.ids[1];
    }
    ms_cmd_result_free(&res);
    return rc;
}

int ms_catalog_merge_repl(struct ms_catalog *cat,
                          uint64_t a_id,
                          uint64_t a_epoch,
                          uint64_t b_id,
                          uint64_t b_epoch,
                          uint64_t *new_id)
{
    Rt__MasterCmd cmd = RT__MASTER_CMD__INIT;
    Rt__MergeReplCmd c = RT__MERGE_REPL_CMD__INIT;
    struct ms_cmd_result res;
    int rc;
    c.a_id = a_id;
    c.a_epoch = a_epoch;
    c.b_id = b_id;
    c.b_epoch = b_epoch;
    cmd.cmd_case = RT__MASTER_CMD__CMD_MERGE_REPL;
    cmd.merge_repl = &c;
    rc = ms_cmd_submit(cat, &cmd, &res);
    if (rc == 0) {
        *new_id = res.id;
    }
    ms_cmd_result_free(&res);
    return rc;
}

int ms_catalog_register_server(struct ms_catalog *cat,
                               uint64_t want_id,
                               const char *addr,
                               const char *zone,
                               const uint8_t *incarnation,
                               uint64_t *id_out,
                               bool *changed)
{
    return ms_catalog_register_server_as(cat, want_id, addr, zone, incarnation,
                                         NULL, id_out, changed);
}

int ms_catalog_register_server_as(struct ms_catalog *cat,
                                  uint64_t want_id,
                                  const char *addr,
                                  const char *zone,
                                  const uint8_t *incarnation,
                                  const char *identity,
                                  uint64_t *id_out,
                                  bool *changed)
{
    Rt__MasterCmd cmd = RT__MASTER_CMD__INIT;
    Rt__RegisterServerCmd c = RT__REGISTER_SERVER_CMD__INIT;
    struct ms_cmd_result res;
    int rc;
    if (changed) {
        *changed = false;
    }
    c.want_id = want_id;
    c.addr = (char *)addr;         /* NULL and "" are refused alike */
    c.zone = (char *)zone;         /* NULL and "" are the same zone */
    c.identity = (char *)identity; /* NULL and "" are plain RPC */
    if (incarnation) {
        c.incarnation.data = (uint8_t *)incarnation;
        c.incarnation.len = MS_INCARNATION_SIZE;
    }
    cmd.cmd_case = RT__MASTER_CMD__CMD_REGISTER_SERVER;
    cmd.register_server = &c;
    rc = ms_cmd_submit(cat, &cmd, &res);
    if (rc == 0) {
        *id_out = res.id;
        if (changed) {
            *changed = res.changed;
        }
    }
    ms_cmd_result_free(&res);
    return rc;
}

/* Submits a command whose only result is its code. */
static int ms__cmd_simple(struct ms_catalog *cat, Rt__MasterCmd *cmd)
{
    struct ms_cmd_result res;
    int rc = ms_cmd_submit(cat, cmd, &res);
    ms_cmd_result_free(&res);
    return rc;
}

int ms_catalog_bump_version(struct ms_catalog *cat)
{
    Rt__MasterCmd cmd = RT__MASTER_CMD__INIT;
    Rt__BumpVersionCmd c = RT__BUMP_VERSION_CMD__INIT;
    cmd.cmd_case = RT__MASTER_CMD__CMD_BUMP_VERSION;
    cmd.bump_version = &c;
    return ms__cmd_simple(cat, &cmd);
}

int ms_catalog_set_acl(struct ms_catalog *cat,
                       const char *account,
                       const char *name,
                       const struct ms_acl_entry *acl,
                       size_t n)
{
    Rt__MasterCmd cmd = RT__MASTER_CMD__INIT;
    Rt__SetAclCmd c = RT__SET_ACL_CMD__INIT;
    Rt__SignedIdentifier *sv = rt_xcalloc(n ? n : 1, sizeof(*sv));
    Rt__SignedIdentifier **sp = rt_xcalloc(n ? n : 1, sizeof(*sp));
    int rc;
    /* NULL strings travel as "": the body copies and checks them so. */
    for (size_t i = 0; i < n; i++) {
        ms_acl_to_pb(&acl[i], &sv[i]);
        sp[i] = &sv[i];
    }
    c.account = (char *)account;
    c.name = (char *)name;
    c.n_acl = n;
    c.acl = sp;
    cmd.cmd_case = RT__MASTER_CMD__CMD_SET_ACL;
    cmd.set_acl = &c;
    rc = ms__cmd_simple(cat, &cmd);
    free(sp);
    free(sv);
    return rc;
}

int ms_catalog_set_props(struct ms_catalog *cat,
                         const char *account,
                         const Rt__ServiceProps *update)
{
    Rt__MasterCmd cmd = RT__MASTER_CMD__INIT;
    Rt__SetPropsCmd c = RT__SET_PROPS_CMD__INIT;
    c.account = (char *)account;
    c.update = (Rt__ServiceProps *)update;
    cmd.cmd_case = RT__MASTER_CMD__CMD_SET_PROPS;
    cmd.set_props = &c;
    return ms__cmd_simple(cat, &cmd);
}

int ms_catalog_purge_tombstones(struct ms_catalog *cat)
{
    Rt__MasterCmd cmd = RT__MASTER_CMD__INIT;
    Rt__PurgeTombstonesCmd c = RT__PURGE_TOMBSTONES_CMD__INIT;
    cmd.cmd_case = RT__MASTER_CMD__CMD_PURGE_TOMBSTONES;
    cmd.purge_tombstones = &c;
    return ms__cmd_simple(cat, &cmd);
}

int ms_catalog_set_draining(struct ms_catalog *cat,
                            uint64_t server_id,
                            bool draining)
{
    Rt__MasterCmd cmd = RT__MASTER_CMD__INIT;
    Rt__SetDrainingCmd c = RT__SET_DRAINING_CMD__INIT;
    c.server_id = server_id;
    c.draining = draining;
    cmd.cmd_case = RT__MASTER_CMD__CMD_SET_DRAINING;
    cmd.set_draining = &c;
    return ms__cmd_simple(cat, &cmd);
}

int ms_catalog_move_begin(struct ms_catalog *cat,
                          uint64_t range_id,
                          uint64_t target_id,
                          const char *target_addr,
                          const Rt__MoveReq **out)
{
    Rt__MasterCmd cmd = RT__MASTER_CMD__INIT;
    Rt__MoveBeginCmd c = RT__MOVE_BEGIN_CMD__INIT;
    struct ms_cmd_result res;
    int rc;
    c.range_id = range_id;
    c.target_id = target_id;
    c.target_addr = (char *)target_addr; /* NULL and "" refused alike */
    cmd.cmd_case = RT__MASTER_CMD__CMD_MOVE_BEGIN;
    cmd.move_begin = &c;
    rc = ms_cmd_submit(cat, &cmd, &res);
    if (rc == 0) {
        *out = res.move;
    }
    ms_cmd_result_free(&res);
    return rc;
}

int ms_catalog_move_commit(struct ms_catalog *cat, uint64_t move_id)
{
    Rt__MasterCmd cmd = RT__MASTER_CMD__INIT;
    Rt__MoveIdCmd c = RT__MOVE_ID_CMD__INIT;
    c.move_id = move_id;
    cmd.cmd_case = RT__MASTER_CMD__CMD_MOVE_COMMIT;
    cmd.move_commit = &c;
    return ms__cmd_simple(cat, &cmd);
}

int ms_catalog_move_forget(struct ms_catalog *cat, uint64_t move_id)
{
    Rt__MasterCmd cmd = RT__MASTER_CMD__INIT;
    Rt__MoveIdCmd c = RT__MOVE_ID_CMD__INIT;
    c.move_id = move_id;
    cmd.cmd_case = RT__MASTER_CMD__CMD_MOVE_FORGET;
    cmd.move_forget = &c;
    return ms__cmd_simple(cat, &cmd);
}

int ms_catalog_leader_start(struct ms_catalog *cat,
                            uint64_t master_term,
                            uint64_t leader_id,
                            const struct ms_leader_addrs *addrs)
{
    Rt__MasterCmd cmd = RT__MASTER_CMD__INIT;
    Rt__LeaderStartCmd c = RT__LEADER_START_CMD__INIT;
    c.master_term = master_term;
    c.leader_id = leader_id;
    if (addrs) {
        c.rpc_addr = (char *)addrs->rpc;
        c.http_addr = (char *)addrs->http;
        c.raft_addr = (char *)addrs->raft;
    }
    cmd.cmd_case = RT__MASTER_CMD__CMD_LEADER_START;
    cmd.leader_start = &c;
    return ms__cmd_simple(cat, &cmd);
}

int ms_catalog_import(struct ms_catalog *cat, const uint8_t *snap, size_t len)
{
    Rt__MasterCmd cmd = RT__MASTER_CMD__INIT;
    Rt__ImportCmd c = RT__IMPORT_CMD__INIT;
    c.snapshot.data = (uint8_t *)snap;
    c.snapshot.len = len;
    cmd.cmd_case = RT__MASTER_CMD__CMD_IMPORT_CATALOG;
    cmd.import_catalog = &c;
    return ms__cmd_simple(cat, &cmd);
}
