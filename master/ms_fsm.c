/* Apply of one MasterCmd (see ms_fsm.h): unpack, check the version, turn
 * the entry back into the arguments of the mutation body (ms_cat_do_* in
 * ms_catalog.c) and run it. Nothing here reads a clock or a flag: now_ms
 * and the delete grace come from the entry. A field the entry cannot
 * carry as the caller gave it (a NULL string travels as "") is chosen so
 * the body decides exactly as it did on the caller's value. */
#include "ms_fsm.h"

#include <stdlib.h>
#include <string.h>

#include "ms_catalog_int.h"
#include "rt_alloc.h"
#include "rt_err.h"
#include "rt_log.h"

void ms_cmd_result_free(struct ms_cmd_result *res)
{
    ms_table_drop_free(&res->drop);
    free(res->ids);
    res->ids = NULL;
    res->nids = 0;
}

void ms_fsm_set_self(struct ms_catalog *cat,
                     uint64_t origin,
                     uint64_t origin_boot)
{
    RT_PRE(origin != 0);
    cat->origin = origin;
    cat->origin_boot = origin_boot;
    cat->next_seq = 1;
    cat->expect_seq = 1;
}

static int ms__fsm_update_ranges(struct ms_catalog *cat,
                                 const Rt__UpdateRangesCmd *c,
                                 struct ms_cmd_result *res)
{
    struct ms_range_put *puts =
        rt_xcalloc(c->n_puts ? c->n_puts : 1, sizeof(*puts));
    int rc;
    for (size_t i = 0; i < c->n_puts; i++) {
        const Rt__Range *r = c->puts[i];
        bool no_high = i < c->n_put_no_high && c->put_no_high[i];
        puts[i].id = r->id;
        puts[i].table_id = r->table_id;
        puts[i].low = r->low;
        puts[i].high = no_high ? NULL : r->high;
        puts[i].high_inf = r->high_inf;
        puts[i].server_id = r->server_id;
        puts[i].epoch = r->epoch;
    }
    res->ids = rt_xcalloc(c->n_puts ? c->n_puts : 1, sizeof(uint64_t));
    rc = ms_cat_do_update_ranges(cat, puts, c->n_puts, c->dels, c->n_dels,
                                 res->ids);
    if (rc == 0) {
        res->nids = c->n_puts;
    }
    free(puts);
    return rc;
}

static int ms__fsm_range_apply_repl(struct ms_catalog *cat,
                                    const Rt__RangeApplyReplCmd *c)
{
    const Rt__Range *r = c->conf;
    struct rt_repl_conf conf;
    if (r->n_replicas > RT_REPL_MAX_REPLICAS ||
        r->n_isr > RT_REPL_MAX_REPLICAS) {
        return RT_EINVAL;
    }
    memset(&conf, 0, sizeof(conf));
    conf.range_id = r->id;
    conf.epoch = r->epoch;
    conf.primary_id = r->server_id;
    conf.primary_epoch = r->primary_epoch;
    conf.n_members = r->n_replicas;
    for (size_t i = 0; i < r->n_replicas; i++) {
        conf.members[i].server_id = r->replicas[i]->server_id;
        conf.members[i].role = (enum rt_repl_role)r->replicas[i]->role;
    }
    conf.n_isr = r->n_isr;
    memcpy(conf.isr, r->isr, r->n_isr * sizeof(uint64_t));
    conf.rf = r->rf;
    conf.min_insync = r->min_insync;
    conf.seal_epoch = r->seal_epoch;
    conf.seal_kind = (enum rt_repl_seal_kind)r->seal_kind;
    conf.seal_to = r->seal_to;
    return ms_cat_do_range_apply_repl(cat, &conf, c->guard_epoch,
                                      c->guard_seal_epoch);
}

static int ms__fsm_set_acl(struct ms_catalog *cat, const Rt__SetAclCmd *c)
{
    struct ms_acl_entry *acl =
        rt_xcalloc(c->n_acl ? c->n_acl : 1, sizeof(*acl));
    int rc;
    for (size_t i = 0; i < c->n_acl; i++) {
        ms_acl_from_pb(c->acl[i], &acl[i]);
    }
    rc = ms_cat_do_set_acl(cat, c->account, c->name, acl, c->n_acl);
    free(acl);
    return rc;
}

/* Runs @cmd's body; sets res->rc and res->changed. RT_ECORRUPT when the
 * entry lacks what its case needs. */
static int ms__fsm_dispatch(struct ms_catalog *cat,
                            const Rt__MasterCmd *cmd,
                            struct ms_cmd_result *res)
{
    bool changed = false;
    int rc;
    switch (cmd->cmd_case) {
        case RT__MASTER_CMD__CMD_CREATE_TABLE: {
            const Rt__CreateTableCmd *c = cmd->create_table;
            const struct ms_replica_spec rs = {c->servers, c->n_servers, c->rf,
                                               c->min_insync};
            rc = ms_cat_do_create_table(cat, c->account, c->name, &rs,
                                        cmd->now_ms, &res->table, &res->range);
            break;
        }
        case RT__MASTER_CMD__CMD_DELETE_TABLE: {
            const Rt__DeleteTableCmd *c = cmd->delete_table;
            rc = ms_cat_do_delete_table(cat, c->account, c->name, c->grace_ms,
                                        cmd->now_ms, &res->drop);
            break;
        }
        case RT__MASTER_CMD__CMD_UPDATE_RANGES:
            rc = ms__fsm_update_ranges(cat, cmd->update_ranges, res);
            break;
        case RT__MASTER_CMD__CMD_RANGE_APPLY_REPL:
            if (!cmd->range_apply_repl->conf) {
                return RT_ECORRUPT;
            }
            rc = ms__fsm_range_apply_repl(cat, cmd->range_apply_repl);
            break;
        case RT__MASTER_CMD__CMD_SPLIT_REPL: {
            const Rt__SplitReplCmd *c = cmd->split_repl;
            res->ids = rt_xcalloc(2, sizeof(uint64_t));
            rc = ms_cat_do_split_repl(cat, c->range_id, c->guard_epoch, c->key,
                                      res->ids);
            res->nids = rc == 0 ? 2 : 0;
            break;
        }
        case RT__MASTER_CMD__CMD_MERGE_REPL: {
            const Rt__MergeReplCmd *c = cmd->merge_repl;
            rc = ms_cat_do_merge_repl(cat, c->a_id, c->a_epoch, c->b_id,
                                      c->b_epoch, &res->id);
            break;
        }
        case RT__MASTER_CMD__CMD_REGISTER_SERVER: {
            const Rt__RegisterServerCmd *c = cmd->register_server;
            if (c->incarnation.len != 0 &&
                c->incarnation.len != MS_INCARNATION_SIZE) {
                return RT_ECORRUPT;
            }
            rc = ms_cat_do_register_server(
                cat, c->want_id, c->addr, c->zone,
                c->incarnation.len ? c->incarnation.data : NULL, c->identity,
                &res->id, &changed);
            res->changed = rc == 0 && changed;
            res->rc = rc;
            return 0;
        }
        case RT__MASTER_CMD__CMD_BUMP_VERSION:
            rc = ms_cat_do_bump_version(cat);
            break;
        case RT__MASTER_CMD__CMD_SET_ACL:
            rc = ms__fsm_set_acl(cat, cmd->set_acl);
            break;
        case RT__MASTER_CMD__CMD_SET_PROPS: {
            static const Rt__ServiceProps none = RT__SERVICE_PROPS__INIT;
            const Rt__SetPropsCmd *c = cmd->set_props;
            rc = ms_cat_do_set_props(cat, c->account,
                                     c->update ? c->update : &none);
            break;
        }
        case RT__MASTER_CMD__CMD_PURGE_TOMBSTONES:
            rc = ms_cat_do_purge_tombstones(cat, cmd->now_ms);
            res->changed = rc > 0;
            res->rc = rc;
            return 0;
        case RT__MASTER_CMD__CMD_SET_DRAINING:
            rc = ms_cat_do_set_draining(cat, cmd->set_draining->server_id,
                                        cmd->set_draining->draining, &changed);
            res->changed = rc == 0 && changed;
            res->rc = rc;
            return 0;
        case RT__MASTER_CMD__CMD_MOVE_BEGIN: {
            const Rt__MoveBeginCmd *c = cmd->move_begin;
            rc = ms_cat_do_move_begin(cat, c->range_id, c->target_id,
                                      c->target_addr, &res->move);
            break;
        }
        case RT__MASTER_CMD__CMD_MOVE_COMMIT:
            rc = ms_cat_do_move_commit(cat, cmd->move_commit->move_id);
            break;
        case RT__MASTER_CMD__CMD_MOVE_FORGET:
            rc = ms_cat_do_move_forget(cat, cmd->move_forget->move_id);
            break;
        case RT__MASTER_CMD__CMD_LEADER_START:
            rc = ms_cat_do_leader_start(cat, cmd->leader_start);
            break;
        case RT__MASTER_CMD__CMD_IMPORT_CATALOG:
            rc = ms_cat_do_import(cat, cmd->import_catalog->snapshot.data,
                                  cmd->import_catalog->snapshot.len);
            break;
        default:
            return RT_ECORRUPT;
    }
    res->rc = rc;
    res->changed = rc == 0;
    return 0;
}

static int ms__fsm_run(struct ms_catalog *cat,
                       const Rt__MasterCmd *cmd,
                       struct ms_cmd_result *res)
{
    int err;
    if (cmd->version > MS_CMD_VERSION) {
        rt_log(RT_LOG_ERROR,
               "fsm: MasterCmd version %u > %u: upgrade this member",
               (unsigned)cmd->version, (unsigned)MS_CMD_VERSION);
        return RT_EPROTO;
    }
    cat->local_err = 0;
    err = ms__fsm_dispatch(cat, cmd, res);
    if (err) {
        rt_log(RT_LOG_ERROR, "fsm: command %d lacks its arguments",
               (int)cmd->cmd_case);
        return err;
    }
    if (cat->local_err) {
        /* Not the command's result: this member could not apply it. */
        err = cat->local_err;
        cat->local_err = 0;
        res->changed = false;
        return err;
    }
    return 0;
}

static Rt__MasterCmd *ms__fsm_unpack(const uint8_t *buf,
                                     size_t len,
                                     struct ms_cmd_result *res)
{
    Rt__MasterCmd *cmd = rt__master_cmd__unpack(NULL, len, buf);
    memset(res, 0, sizeof(*res));
    if (!cmd) {
        rt_log(RT_LOG_ERROR, "fsm: an entry of %zu bytes is not a MasterCmd",
               len);
    }
    return cmd;
}

int ms_fsm_apply(struct ms_catalog *cat,
                 const uint8_t *buf,
                 size_t len,
                 struct ms_cmd_result *res)
{
    Rt__MasterCmd *cmd = ms__fsm_unpack(buf, len, res);
    int err;
    if (!cmd) {
        return RT_ECORRUPT;
    }
    err = ms__fsm_run(cat, cmd, res);
    rt__master_cmd__free_unpacked(cmd, NULL);
    return err;
}

int ms_fsm_apply_committed(struct ms_catalog *cat,
                           const uint8_t *buf,
                           size_t len,
                           struct ms_cmd_result *res)
{
    Rt__MasterCmd *cmd = ms__fsm_unpack(buf, len, res);
    int err = 0;
    if (!cmd) {
        return RT_ECORRUPT;
    }
    if (cat->origin != 0 && cmd->origin == cat->origin &&
        cmd->origin_boot == cat->origin_boot) {
        /* Applied when it was proposed. Raft commits our entries in the
         * order we proposed them; a gap means one was lost or reordered
         * and our speculative state is not the log's. */
        if (cmd->origin_seq != cat->expect_seq) {
            rt_log(RT_LOG_ERROR, "fsm: own entry %llu committed, %llu expected",
                   (unsigned long long)cmd->origin_seq,
                   (unsigned long long)cat->expect_seq);
            err = RT_EINTERNAL;
        } else {
            cat->expect_seq++;
            res->skipped = true;
        }
    } else {
        err = ms__fsm_run(cat, cmd, res);
    }
    rt__master_cmd__free_unpacked(cmd, NULL);
    return err;
}
