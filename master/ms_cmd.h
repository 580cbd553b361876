/* Commands: how a catalog mutation becomes one MasterCmd
 * (docs/DESIGN-master-ha.md §2.2-§2.3). ms_cmd.c implements every public
 * mutation of ms_catalog.h the same way: build a MasterCmd carrying every
 * input (now_ms from the catalog's clock, the delete grace), pack it, apply
 * it through ms_fsm_apply() (the path a follower takes), and, when it
 * changed state and a proposer is set (ms_catalog_set_proposer), hand the
 * packed bytes to the proposer. Callers stay synchronous: the result is
 * the speculative apply's; the master holds its output until Raft has
 * committed the entry (the output gate, outside the catalog).
 *
 * Thread: the master's loop, like the catalog. */
#ifndef MS_CMD_H
#define MS_CMD_H

#include "ms_catalog.h"
#include "ms_fsm.h"

/* Stamps @cmd (borrowed; its case and arguments set by the caller) with
 * the command version, this member's origin and next origin_seq and, when
 * 0, now_ms from the catalog's clock; packs, applies and proposes it as
 * above. @res is filled (release with ms_cmd_result_free() on every
 * path). Returns res->rc, or a fatal apply error (ms_fsm.h), or the
 * proposer's error (the entry was applied here but is not in the log: the
 * caller's process must not go on as leader). */
int ms_cmd_submit(struct ms_catalog *cat,
                  Rt__MasterCmd *cmd,
                  struct ms_cmd_result *res);

#endif
