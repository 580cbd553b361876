/* The catalog's state machine: the one function that applies a MasterCmd
 * (docs/DESIGN-master-ha.md §2.3-§2.4). The leader applies each of its
 * own mutations through it at once (speculatively, ms_cmd.c) and hands
 * the same bytes to Raft; every other member applies committed entries
 * through it in log order. Apply reads only the entry and the catalog (no
 * clock, no flag), so the same entries on the same state give the same
 * state and the same results everywhere.
 *
 * Two kinds of failure, kept apart:
 *  - a command's own result (res->rc): 0, a count, or a deterministic
 *    refusal (RT_ESTALE, RT_ETABLEEXISTS, RT_ENOTFOUND, RT_EINVAL, ...):
 *    every member computes the same one and writes nothing;
 *  - the return value: non-zero only when the entry could not be applied
 *    here (RT_EIO / RT_ENOSPACE / RT_ENOMEM: this member's storage or
 *    memory; RT_ECORRUPT: not a MasterCmd; RT_EPROTO: a newer command
 *    version; RT_EINTERNAL: this member's own entries out of order). Such
 *    an entry must never be skipped: a replica that gets one exits and
 *    rebuilds its view from the Raft snapshot and log (§2.5).
 *
 * Thread: the master's loop, like the catalog. */
#ifndef MS_FSM_H
#define MS_FSM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ms_catalog.h"

/* MasterCmd.version this binary writes and the newest it applies. */
#define MS_CMD_VERSION 1

/* What applying one command gave. Pointers point into the catalog and
 * stay valid until the next mutation; drop and ids are owned by the
 * result: ms_cmd_result_free() releases them (always call it). */
struct ms_cmd_result
{
    int rc;       /* the command's result, see above */
    bool changed; /* something was written (rc >= 0 and not a no-op) */
    bool skipped; /* ms_fsm_apply_committed: our own, already applied */
    const struct ms_table *table; /* CREATE_TABLE */
    const struct ms_range *range; /* CREATE_TABLE */
    struct ms_table_drop drop;    /* DELETE_TABLE */
    uint64_t *ids;                /* UPDATE_RANGES (one per put), SPLIT (2) */
    size_t nids;
    uint64_t id;             /* REGISTER_SERVER: server id; MERGE: new id */
    const Rt__MoveReq *move; /* MOVE_BEGIN */
};

void ms_cmd_result_free(struct ms_cmd_result *res);

/* Applies the packed MasterCmd @buf[0..@len) (borrowed) to @cat and fills
 * @res (initialised here). Returns 0 when the entry was applied (its own
 * result in res->rc) or a fatal code (see the file comment). */
int ms_fsm_apply(struct ms_catalog *cat,
                 const uint8_t *buf,
                 size_t len,
                 struct ms_cmd_result *res);

/* What the Raft FSM calls for a committed entry: an entry this process
 * produced (its origin and origin_boot are ours, ms_fsm_set_self) was
 * applied speculatively when it was proposed, so it is skipped
 * (res->skipped) after checking it is the next one expected (else
 * RT_EINTERNAL: an own entry lost or reordered, fatal); every other entry
 * is applied as by ms_fsm_apply. */
int ms_fsm_apply_committed(struct ms_catalog *cat,
                           const uint8_t *buf,
                           size_t len,
                           struct ms_cmd_result *res);

/* Stamps every entry @cat produces from now on with (@origin,
 * @origin_boot, origin_seq 1, 2, ...): @origin the member id (not 0),
 * @origin_boot random per process start, so no two processes share one. */
void ms_fsm_set_self(struct ms_catalog *cat,
                     uint64_t origin,
                     uint64_t origin_boot);

#endif
