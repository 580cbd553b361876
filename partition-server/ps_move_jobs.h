/* Range moves: the writer jobs and helpers both sides of a move share
 * (ps_move_out.c, ps_move_in.c, ps_move.c). Private to the move files.
 *
 * Thread: loop thread only; every done callback runs on it, once. */
#ifndef PS_MOVE_JOBS_H
#define PS_MOVE_JOBS_H

#include <stddef.h>
#include <stdint.h>

#include "ps_move_int.h"

/* Checks a change of a move's state @from -> @to against @allowed (per
 * state, PS__BIT of each state it may change to; @names for the log). An
 * illegal change is our bug: logged, and fatal in a debug build. */
void ps__move_check_state(uint64_t move_id,
                          const unsigned *allowed,
                          const char *const *names,
                          unsigned from,
                          unsigned to);

/* A META job: the current range set plus up to 8 extra meta changes, in
 * one transaction. When @conn is set it is answered (Empty or the error,
 * with @method) once the job is durable; @done (if set) runs first. */
struct ps_mjob
{
    struct ps_job job;
    struct ps_server *ps;
    struct rt_buf blob; /* ranges */
    struct rt_buf keys, vals;
    struct ps_meta_op ops[8];
    size_t koff[8], voff[8]; /* into keys / vals, resolved at submit */
    size_t n_ops;
    void (*done)(struct ps_mjob *m, int status);
    void *arg;
    struct rt_rpc_conn *conn; /* answered Empty/error with method when set */
    uint64_t id;
    uint32_t method;
};

/* A new META job with no changes yet. */
struct ps_mjob *ps__mjob_new(struct ps_server *ps);
/* Adds a put (@val non-NULL, copied) or delete of the meta record
 * @prefix ‖ u64be @id (PS_META_MVOUT, PS_META_MVIN). */
void ps__mjob_op(struct ps_mjob *m,
                 const char *prefix,
                 uint64_t id,
                 const void *val,
                 size_t vn);
/* Adds the span marker of a new span drop to @m; returns its seq. */
uint64_t ps__mjob_span(struct ps_mjob *m, const struct ps_span *sp);
/* Packs the current range set and submits @m to the writer; @m is freed
 * after its callbacks. */
void ps__mjob_submit(struct ps_mjob *m);

/* A span drop job: every key of one span deleted, in chunks. */
struct ps_sjob
{
    struct ps_job job;
    struct ps_server *ps;
    char *low;
    char *high;
    void (*done)(struct ps_sjob *sj, int status);
    void *arg;
    uint64_t gen;
};

/* Builds the drop of span @sp (copied) with marker id @seq, counted in
 * ps->span_drops; the caller sets done/arg and submits sj->job (the
 * marker should be committed first, e.g. by a META job, for the drop to
 * survive a crash before its first chunk). */
struct ps_sjob *ps__span_drop(struct ps_server *ps,
                              uint64_t seq,
                              const struct ps_span *sp);

/* Submits a BARRIER job: @done(@arg, status) runs once every job
 * submitted before it has committed and called back. */
void ps__barrier(struct ps_server *ps,
                 void (*done)(void *arg, int status),
                 void *arg);

#endif
