/* Range moves: the types the move files share (ps_move.c, the public
 * entry points; ps_move_out.c, the source side; ps_move_in.c, the target
 * side; ps_move_jobs.c, the writer jobs both sides use). Private to
 * those files; everything else uses ps_move.h.
 *
 * Thread: loop thread only. */
#ifndef PS_MOVE_INT_H
#define PS_MOVE_INT_H

#include <stddef.h>
#include <stdint.h>

#include "ps_state.h"
#include "ps_store.h"
#include "ps_writer.h"
#include "rt_buf.h"
#include "rt_rpc.h"

#define PS_MOVE_WINDOW 4 /* MIGRATE_DATA calls out at once */
#define PS_MOVE_CHUNK (256u * 1024u)
#define PS_MOVE_TAIL_SMALL 64   /* records: small enough to freeze */
#define PS_MOVE_TAIL_ROUNDS 3   /* log rounds before freezing anyway */
#define PS_MOVE_BEGIN_MS 120000 /* the target may clear stale keys */
#define PS_MOVE_CALL_MS 30000

#define PS_META_MVOUT "mvout" /* ‖ u64be range id -> packed MoveReq */
#define PS_META_MVIN "mvin"   /* ‖ u64be move id -> packed MigrateBegin */

/* One bit per state, in the allowed-change tables of the two sides. */
#define PS__BIT(s) (1u << (s))

/* The states of a move out, in order; the allowed changes are in
 * ps_move_out.c (ps__mvout_set_state). */
enum ps_mvout_state {
    PS_MVOUT_SYNC,
    PS_MVOUT_BEGIN,
    PS_MVOUT_SNAPSHOT,
    PS_MVOUT_TAIL,
    PS_MVOUT_FREEZE,
    PS_MVOUT_FINAL,
    PS_MVOUT_DONE,
    PS_MVOUT_ENDED, /* unlinked; freed when the last callback is back */
    PS_MVOUT__NR
};

struct ps_move_out
{
    struct ps_server *ps;
    struct ps_move_out *next;
    int refs;                  /* the list's + one per callback out */
    enum ps_mvout_state state; /* changed by ps__mvout_set_state only */
    uint64_t move_id;
    uint64_t range_id;
    uint64_t table_id;
    uint64_t epoch;
    uint64_t new_epoch;
    char *low;
    char *high; /* NULL = unbounded */
    char *target;
    struct rt_buf marker; /* packed MoveReq: the freeze marker's value */
    int marker_put;       /* a META job putting the marker was submitted */
    /* MOVE_OUT to answer (ref'd), NULL once answered or restored. */
    struct rt_rpc_conn *conn;
    uint64_t req_id;
    struct rt_rpc_client *cli;
    struct ps_mlog log;
    int log_on;
    struct ps_snap *snap;
    uint64_t snap_txn;
    int producing; /* a snapshot work item is out */
    int snap_eof;
    struct rt_buf pend; /* log records to send */
    size_t pend_off;
    uint64_t pend_n;
    unsigned inflight; /* MIGRATE_DATA / MIGRATE_END calls out */
    int end_sent;
    int end_ok;
    unsigned rounds;
    uint64_t kvs, bytes; /* records sent (snapshot + log) */
    uint64_t t_start, t_snap, t_freeze, t_end; /* uv_hrtime, ns */
};

/* The states of a move in; the allowed changes are in ps_move_in.c
 * (ps__mvin_set_state). */
enum ps_mvin_state {
    PS_MVIN_CLEARING, /* MIGRATE_BEGIN: span being cleared */
    PS_MVIN_RECEIVING,
    PS_MVIN_COMPLETE, /* MIGRATE_END confirmed */
    PS_MVIN_RESTORED, /* from meta after a restart */
    PS_MVIN_FAILED,   /* a write failed or the count was wrong */
    PS_MVIN__NR
};

struct ps_move_in
{
    struct ps_server *ps;
    struct ps_move_in *next;
    enum ps_mvin_state state; /* changed by ps__mvin_set_state only */
    uint64_t move_id;
    uint64_t range_id;
    uint64_t table_id;
    char *low;
    char *high;
    struct rt_buf lo, hi; /* storage key bounds */
    uint64_t received;    /* records accepted */
    uint64_t bytes;
    int status;   /* first failure */
    uint64_t gen; /* bumped by each MIGRATE_BEGIN */
};

/* Restoring moves at start (meta scans, ps_move_start). */
struct ps__restore
{
    struct ps_server *ps;
    uint64_t max_seq;
    int rc;
};

#endif
