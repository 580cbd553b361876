/* Execution of balancing decisions: splits, merges and moves carried out
 * against the partition servers (catalog commits, ASSIGN_RANGES,
 * MOVE_OUT / MOVE_DONE / MOVE_ABORT with their timeouts and retries), the
 * operations in flight and the per-range bookkeeping (when a range id
 * appeared, was last split or moved), and the event of each outcome.
 *
 * Whoever decides (ms_balance.c: the policy, drains, the operator) calls
 * ms_exec_start() with an order; nothing here decides. When a move completes
 * it fires the moved callback given to ms_exec_init(), so the decider can
 * go on (the next range of a drain).
 *
 * Operation lifetime: an ms_op is created by a successful start, lives in
 * ops while it runs, and is freed once it is finished and none of our
 * calls for it is in flight. An operator's request (ms_admin_req) attached
 * to it is answered exactly once: with the outcome, or 503 at shutdown.
 *
 * Thread: loop thread only. Ownership: everything passed to
 * ms_exec_init() is borrowed; operations and bookkeeping are released by
 * ms_exec_fini(). */
#ifndef MS_EXEC_H
#define MS_EXEC_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ms_admin.h"
#include "ms_cluster.h"
#include "ms_events.h"
#include "ms_load.h"
#include "ms_policy.h"
#include "ms_repl.h"
#include "ms_trace_rec.h"
#include "ms_util.h"

/* Balancing bookkeeping of one range id. */
struct ms_rmeta
{
    uint64_t range_id;
    uint64_t born_ms;  /* the id appeared (monotonic) */
    uint64_t split_ms; /* last split involving it or its parents */
    uint64_t move_ms;  /* its last move ended (0 = never) */
};

/* MS_OP_TRANSFER: the primary role of a replicated range handed to an
 * in-sync secondary (docs/DESIGN-replication.md §9.3 step 2), carried out
 * by ms_repl; the op holds the range until it ends. */
enum ms_op_kind { MS_OP_SPLIT, MS_OP_MERGE, MS_OP_MOVE, MS_OP_TRANSFER };

/* States of a range move (docs/DESIGN-moves.md); the legal changes are
 * the table in ms_exec.c. NEW = not started (also every split and
 * merge); COPYING = recorded, MOVE_OUT sent; ASSIGNING = committed,
 * waiting for the target's ASSIGN_RANGES reply; ABORTING = failed before
 * the commit, MOVE_ABORT to both ends until each acknowledged; DONE =
 * settled either way.
 * A replicated range's move (docs/DESIGN-replication.md §9.3): ADDING =
 * the target is a LEARNER, waiting until it joined the ISR; TRANSFERRING
 * = the source is the primary, its role goes to an in-sync member (the
 * target); REMOVING = the source leaves the replica set; ABORTING = the
 * transfer failed with the source still primary, the target leaves the
 * set again. */
enum ms_move_state {
    MS_MOVE_NEW,
    MS_MOVE_COPYING,
    MS_MOVE_ASSIGNING,
    MS_MOVE_ABORTING,
    MS_MOVE_DONE,
    MS_MOVE_ADDING,
    MS_MOVE_TRANSFERRING,
    MS_MOVE_REMOVING,
    MS_MOVE__NR
};

struct ms_exec;

/* One split, merge or move being carried out. */
struct ms_op
{
    struct ms_exec *ex;
    enum ms_op_kind kind;
    const char *origin; /* "policy", "manual", "drain", "restart" */
    uint64_t t0_ms;     /* monotonic start */
    uint64_t range_id;
    uint64_t range_id2; /* merge: right-hand range */
    uint64_t server_id; /* owner / move source */
    uint64_t dst;       /* move target */
    uint64_t new_ids[2];
    json_t *ev;               /* the event, filled as it goes */
    struct ms_admin_req *req; /* operator waiting for it, or NULL */
    unsigned calls;           /* our RPCs for it in flight */
    bool finished;            /* nothing more to do: freed once calls
                               * is 0 */
    bool reported;            /* its event is written */
    /* moves */
    uint64_t move_id;
    uint64_t new_epoch;
    enum ms_move_state state; /* changed only by ms_exec.c's setter */
    uint64_t src_reg_gen;
    uint64_t out_done_ms;      /* MOVE_OUT answered (monotonic) */
    uint64_t frozen_ms;        /* from MoveResp */
    bool s_settled, t_settled; /* aborting: each end acknowledged */
    bool s_inflight, t_inflight;
    /* merge of replicated ranges: the epoch each range (range_id,
     * range_id2) was frozen at by its primary (0: no answer yet), and the
     * first failure */
    uint64_t frz_epoch[2];
    int frz_rc;
    /* move of a replicated range: when each phase began and ended
     * (monotonic, 0 = not reached), the retry deadline of the transfer's
     * start, and the failure reported when it settles */
    bool rmove;
    uint64_t add_end_ms, xfer_end_ms, xfer_until_ms;
    int rm_rc;
    char rm_err[200];
    uint64_t trace_id; /* the order's TraceDecision id (0: none) */
};

/* A move completed (committed and assigned). */
typedef void (*ms_exec_moved_cb)(void *arg);

struct ms_exec
{
    struct ms_cluster *cl;    /* borrowed */
    struct ms_load *load;     /* borrowed */
    struct ms_events *events; /* borrowed, may be NULL */
    struct ms_admin *admin;   /* borrowed, may be NULL: set by the owner */
    struct ms_repl *repl;     /* borrowed, may be NULL: set by the owner;
                               * splits of replicated ranges consult it,
                               * transfers need it */
    uint32_t move_timeout_ms; /* MOVE_OUT for an empty range; 0 = 30000 */
    ms_exec_moved_cb moved_cb;
    void *moved_arg;
    struct ms_trace_rec *trace; /* borrowed, may be NULL: set by the owner;
                                 * gets every operation's outcome */

    struct ms_vec ops;   /* struct ms_op *, in flight */
    struct ms_vec rmeta; /* struct ms_rmeta *, by range id */
    uint64_t n_splits, n_merges, n_moves, n_aborts, n_transfers;
};

/* Range bookkeeping for every range of the catalog (counted as just
 * split: what we do not know is treated conservatively) and an aborting
 * operation for every unsettled move record (a restart before the
 * commit; each writes an event). */
void ms_exec_init(struct ms_exec *ex,
                  struct ms_cluster *cl,
                  struct ms_load *load,
                  struct ms_events *events,
                  uint32_t move_timeout_ms,
                  ms_exec_moved_cb moved_cb,
                  void *moved_arg);
/* Frees every operation (operators still waiting get 503) and the
 * bookkeeping; only after the loop ran dry. */
void ms_exec_fini(struct ms_exec *ex);

/* ---- starting operations ---- */

/* What to start: a split of @range_id at @key (NULL: the load median), a
 * merge of @range_id with @range_id2 (0: its right-hand neighbour), a
 * move of @range_id to server @dst, or a transfer of replicated
 * @range_id's primary role to in-sync secondary @dst. @origin is a static
 * string ("policy", "manual", "drain"); @d (may be NULL) is the policy decision
 * behind it, recorded in the event; @req (may be NULL) is the operator waiting
 * for it. Everything is borrowed. */
struct ms_exec_order
{
    enum ms_op_kind kind;
    uint64_t range_id;
    uint64_t range_id2;
    uint64_t dst;
    uint64_t src; /* move of a replicated range: the replica that leaves
                   * (0: the primary) */
    const char *key;
    const char *origin;
    const struct ms_decision *d;
    struct ms_admin_req *req;
    uint64_t trace_id; /* its TraceDecision (0: none) */
};

/* Returns 0 when the operation started (it finishes later, writes its
 * event and answers @o->req) or an error with @err (@errlen bytes) saying
 * why; then @o->req is untouched and the caller answers it. A move that
 * fails after it was recorded is not an error here: it aborts and
 * reports like any other.
 * Errors: RT_ENOTFOUND (no such range or server), RT_EINVAL (arguments
 * that make no sense; a transfer of an RF-1 range, or to a server that is
 * the primary or not in the ISR), RT_EBUSY (the range is busy, changing
 * its replica configuration, or a server is down or draining),
 * or a catalog error. A move of a replicated range also refuses, nothing
 * changed: RT_EEXIST (the target already holds a replica, 409),
 * RT_ENOCONN (the target is down, 503), RT_EINVAL (the source holds no
 * replica, or the target breaks the zone rule, 400). A split of a replicated
 * range that fails after its primary froze it reports like any other
 * (RT_ESTALE: the range changed meanwhile, 409); so does a transfer that fails
 * after it started (its event, outcome "failed"). */
int ms_exec_start(struct ms_exec *ex,
                  const struct ms_exec_order *o,
                  char *err,
                  size_t errlen);

/* A target for the replica of replicated @r on server @src (a drain's
 * move): among the usable, not draining servers that hold no replica of
 * @r, the one ms_place_one() chooses (zones, then fewest replicas,
 * counting moves into it); 0 when there is none. */
uint64_t ms_exec_rmove_target(struct ms_exec *ex,
                              const struct ms_range *r,
                              uint64_t src);

/* ---- progress ---- */

/* Sends MOVE_ABORT again to the ends of aborting moves that have not
 * acknowledged it yet (every tick). */
void ms_exec_retry_aborts(struct ms_exec *ex);
/* Moves of replicated ranges go on (every tick): a learner that joined
 * or failed, a transfer or a removal to (re)start. */
void ms_exec_progress(struct ms_exec *ex);
/* A server registered: its reply lists its ranges at their old epoch,
 * which settles the source end of aborting moves. */
void ms_exec_on_register(struct ms_exec *ex, struct ms_server *s);

/* ---- queries ---- */

/* An operation of @range_id holds it (no other may start). */
bool ms_exec_busy(struct ms_exec *ex, uint64_t range_id);
/* Moves and transfers holding their range (max_moves counts both). */
unsigned ms_exec_moves(struct ms_exec *ex);
/* Moves and transfers holding their range with @sid as source or
 * target. */
unsigned ms_exec_server_moving(struct ms_exec *ex, uint64_t sid);
/* The bookkeeping of @id, created (born now) when unknown. Valid until the
 * next call that creates or prunes. */
struct ms_rmeta *ms_exec_rmeta(struct ms_exec *ex, uint64_t id);
/* The bookkeeping of @id, or NULL when it has none yet. */
const struct ms_rmeta *ms_exec_rmeta_find(const struct ms_exec *ex,
                                          uint64_t id);
/* Drops the bookkeeping (and the load) of ranges no longer in the
 * catalog. */
void ms_exec_rmeta_prune(struct ms_exec *ex);
/* A range created by CREATE_TABLE: born now, never split. */
void ms_exec_range_created(struct ms_exec *ex, uint64_t range_id);
/* "new", "copying", ... */
const char *ms_exec_move_state_name(enum ms_move_state st);

/* ---- events and operator answers ---- */

/* Records @e (taken) as an event; returns its seq (0 without events). */
uint64_t ms_exec_event(struct ms_exec *ex, json_t *e);
/* Records @e (taken) and returns the event as stored (new reference). */
json_t *ms_exec_event_get(struct ms_exec *ex, json_t *e);
/* range, table, table_id, low, high, server, epoch of @r into @e. */
void ms_exec_ev_range(struct ms_exec *ex, json_t *e, const struct ms_range *r);
/* The decision's reason and figures into @e (@d may be NULL). */
void ms_exec_ev_decision(json_t *e, const struct ms_decision *d);
/* {"demand":..,"ent_s":..,...} of a range's load (NULL load: zeros). */
json_t *ms_exec_load_json(const struct ms_load_range *l, bool samples);
/* Compact JSON text of @o (malloc'd; never NULL). */
char *ms_exec_json_text(json_t *o);
/* Answers @req with an error (no operation involved): HTTP status from
 * @rc, body {"error": @msg, "code": name of @rc}. */
void ms_exec_admin_fail(struct ms_exec *ex,
                        struct ms_admin_req *req,
                        int rc,
                        const char *msg);

#endif
