/* Trace recording: the acting master writes a load trace (docs/TRACE.md,
 * the format of ms_trace.h) of what it sees and decides, for offline
 * replay against any policy.
 *
 * One recorder lives as long as the rt-master process (a member of a
 * replicated master leads in sessions); it records only while a leader
 * session is attached (followers get no heartbeats). Each attach starts a
 * new segment in the same file, with a header and a full map snapshot.
 *
 * What it writes, and who calls:
 *  - heartbeats as received (ms_balance_loads);
 *  - each policy call and its decisions (ms_balance's tick);
 *  - how executed operations ended (ms_exec);
 *  - every master event (a sink on ms_events: server up/down, failovers,
 *    operator actions, splits, moves);
 *  - a full map snapshot before any record whenever the map or a server's
 *    state changed since the last one (a fingerprint comparison).
 *
 * Writing never stalls the loop for long: records go to zlib's buffer,
 * handed to the file when it fills and at least every second
 * (ms_trace_rec_tick) and on stop; never fsync'd. A write error stops the
 * recording, logs one line and adds a "trace_stopped" event; the master
 * goes on.
 *
 * Files: --trace FILE, created when this process first leads (an existing
 * FILE is renamed to the first free FILE.N then; a follower that never
 * leads makes none; a deposed leader re-executes itself, so each term it
 * leads usually has its own file), or `rtctl trace start NAME` ->
 * DATA/traces/NAME.rttrace (NAME is [A-Za-z0-9._-], 1..64, not starting with
 * '.'; the client never chooses a path).
 *
 * Thread: everything on the loop thread, except ms_trace_rec_status_json()
 * and ms_trace_rec_metrics(), which any thread may call (a mutex guards
 * the figures they read, refreshed at every flush, start and stop). */
#ifndef MS_TRACE_REC_H
#define MS_TRACE_REC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ms_cluster.h"
#include "ms_events.h"
#include "ms_policy.h"
#include "rt.pb-c.h"
#include "rt_buf.h"

#define MS_TRACE_DIR "traces"
#define MS_TRACE_EXT ".rttrace"
#define MS_TRACE_FLUSH_MS 1000

struct ms_trace_rec;

/* What a segment's header says about the leader session (borrowed during
 * ms_trace_rec_attach). */
struct ms_trace_rec_info
{
    const char *policy; /* NULL = "default" */
    const struct ms_policy_config *policy_cfg;
    uint32_t tick_ms;
    uint32_t load_tau_ms;
    uint32_t rf;
    uint32_t min_insync;
    uint64_t master_id;
    uint64_t raft_term;
    /* When range @id was born and last split (monotonic ms, 0 = never
     * split), for the map snapshots; false when unknown. NULL: none. */
    bool (*range_times)(void *arg,
                        uint64_t id,
                        uint64_t *born_ms,
                        uint64_t *split_ms);
    void *range_times_arg;
};

/* A recorder for a master whose data directory is @data_dir (borrowed,
 * copied). With @path (--trace, may be NULL) it records from the first
 * attach, which creates the file; a directory that cannot be written
 * fails now. Errors: RT_EIO (@errmsg says why). */
int ms_trace_rec_create(const char *data_dir,
                        const char *path,
                        struct ms_trace_rec **out,
                        char *errmsg);
/* Ends the trace (TraceEnd "shutdown") and frees @rec (NULL: no-op).
 * Detach first. */
void ms_trace_rec_destroy(struct ms_trace_rec *rec);

/* A leader session begins over @cl (borrowed until detach): while
 * recording, a new segment (header from @info) and a map snapshot. Also
 * subscribes to @events (borrowed until detach). */
void ms_trace_rec_attach(struct ms_trace_rec *rec,
                         struct ms_cluster *cl,
                         struct ms_events *events,
                         const struct ms_trace_rec_info *info);
/* The session ends: flushes; nothing is recorded until the next attach. */
void ms_trace_rec_detach(struct ms_trace_rec *rec);
/* Every master tick: flushes once MS_TRACE_FLUSH_MS have passed. */
void ms_trace_rec_tick(struct ms_trace_rec *rec);

/* ---- hooks (all no-ops when @rec is NULL or not recording) ---- */

/* Heartbeat @req as it arrived; @ignored: one flag per load the master
 * did not fold in. */
void ms_trace_rec_heartbeat(struct ms_trace_rec *rec,
                            const Rt__HeartbeatReq *req,
                            const bool *ignored);
/* A policy call at @now_ms (the view's time) that returned @n decisions. */
void ms_trace_rec_policy_call(struct ms_trace_rec *rec,
                              uint64_t now_ms,
                              size_t n);
/* A decision of @origin and whether its execution started (@error: why
 * not). Returns its id for ms_trace_rec_outcome (0 when not recording). */
uint64_t ms_trace_rec_decision(struct ms_trace_rec *rec,
                               const struct ms_decision *d,
                               const char *origin,
                               bool started,
                               const char *error);
/* How an operation ended (only the first outcome of a decision is
 * written): @decision_id (0: none), @kind ("split", ...),
 * @outcome ("done", "failed", "aborted"), @error (NULL when none), the
 * ranges it made (@nnew entries) and when they were born (@born_ms,
 * monotonic; 0: none). */
void ms_trace_rec_outcome(struct ms_trace_rec *rec,
                          uint64_t decision_id,
                          const char *kind,
                          const char *outcome,
                          const char *error,
                          const uint64_t *new_ranges,
                          size_t nnew,
                          uint64_t born_ms);

/* ---- operator control (loop thread) ---- */

/* Starts recording into DATA/traces/@name.rttrace (@name NULL or "": a
 * name from the time, trace-YYYYmmdd-HHMMSS). When a session is attached
 * the segment begins at once. Errors: RT_EINVAL (bad name), RT_EEXIST (a
 * trace is being recorded, or the file exists), RT_EIO. @errmsg says
 * why. */
int ms_trace_rec_start(struct ms_trace_rec *rec,
                       const char *name,
                       char *errmsg);
/* Ends the trace now with a TraceEnd of @reason, closing the file (before
 * the process re-executes itself: nothing else would flush it). */
void ms_trace_rec_end(struct ms_trace_rec *rec, const char *reason);
/* Stops recording (TraceEnd "stop"). Errors: RT_ENOTFOUND (nothing is
 * being recorded), RT_EIO (the file may lack its end). */
int ms_trace_rec_stop(struct ms_trace_rec *rec, char *errmsg);

/* ---- observation (any thread) ---- */

/* The status as GET /api/trace serves it: {"recording", "file",
 * "bytes", "records", "segments", "since" (unix ms), "since_time",
 * "error"}: malloc'd JSON text. */
char *ms_trace_rec_status_json(struct ms_trace_rec *rec);
/* Appends rt_master_trace_bytes_total and rt_master_trace_records_total
 * (Prometheus text) to @b. */
void ms_trace_rec_metrics(struct ms_trace_rec *rec, struct rt_buf *b);

#endif
