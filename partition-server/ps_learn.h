/* ps_learn: the catch-up glue of range replication
 * (docs/DESIGN-replication.md §3.3, §7.3, §8.1, §8.2): the RPCs and I/O
 * behind the replica core's catch-up of replicas outside the ISR
 * (ps_rcore.h, "Catch-up"). ps_repl owns the core and hands this module
 * the core's catch-up actions; this module feeds the core the events they
 * lead to (through ps_repl_core_step).
 *
 * Primary side:
 *  - SEND PROBE -> a REPL_PROBE call to the replica; its ReplicaState (or
 *    error) goes back to the core as PROBE_RESP.
 *  - READ (a full copy to a replica) -> on the libuv threadpool, one LMDB
 *    read transaction: the range's span and its `rs` record, whose
 *    applied LSN s is exactly the snapshot's (data and record commit
 *    together); REPL_BEGIN{FULL, snap_lsn s, snap_epoch, history}; once
 *    answered, REPL_SNAP chunks of PS_LEARN_CHUNK bytes read from that
 *    transaction (one threadpool read at a time), up to PS_LEARN_WINDOW
 *    calls in flight, seq from 0; the last one, with last = true and
 *    count = every entry sent, only once all the others were answered
 *    ok (the replica's final record then follows every chunk); once it
 *    is answered
 *    (the replica holds the copy durably at s), READ_DONE(s) to the core,
 *    which streams from s + 1. Any failure (a call's error or timeout, a
 *    read error) is READ_DONE with the code: the core probes again later.
 *    A new copy to the same replica and range replaces the running one.
 *  - READ with BEGIN mode KEYED, from_lsn D (§7.3): the same snapshot at
 *    s; then, on the loop, the keys the server's key log (ps_repl_keylog)
 *    says changed in (D, s] -- polled every PS_LEARN_KEY_WAIT_MS, at most
 *    PS_LEARN_KEY_WAITS times, until the log holds s (the writer's
 *    callbacks up to s are on their way) -- are copied out;
 *    REPL_BEGIN{KEYED, from_lsn D, s, ...}; the keys its answer names (the
 *    replica's own LSNs above D: a suffix I never had) are added; the
 *    chunks carry each key's value at s, or a tombstone (KeyValue.deleted)
 *    for a key absent there; the rest as for a full copy. A log that
 *    holds nothing of the range, does not reach back to D, or does not
 *    reach s in time makes it a full copy (logged, counted).
 * Replica side (each request is answered once, from the core's answer):
 *  - REPL_PROBE: the core's ReplicaState, or its error (RT_ESTALE: not
 *    replicated here at that epoch; RT_EBUSY: a write in flight).
 *  - REPL_BEGIN (mode FULL or KEYED, else RT_EINVAL; the range must be
 *    assigned here, else RT_ESTALE): the core turns the copy LEARNER; its
 *    WRITE forgets the range's key log, persists rs state LEARNING
 *    (applied 0) and, FULL only, then drops the range's span (chunked,
 *    like MIGRATE_BEGIN); answered Empty once done. A KEYED one from
 *    below my applied LSN first takes the keys my LSNs above it changed
 *    from my key log (RT_ENOTFOUND when it does not reach back: nothing
 *    changes) and is answered with them (ReplicaState.pending_keys). A
 *    restart from here finds LEARNING: "no copy".
 *  - REPL_SNAP (a tombstone deletes its key): checked in order (§4): a copy
 * begun here for the range (else RT_EINVAL), the copy's epoch (older RT_ESTALE,
 * other RT_EINVAL), seq the next one (else RT_EINVAL), the CRC32C of the packed
 * message with crc32c = 0 (else RT_ECORRUPT), every key inside the range (else
 * RT_EINVAL), and on the last chunk count = entries received (else RT_EINVAL);
 * a failed check changes nothing but ends the copy here (its later chunks fail
 * too; the primary starts again). A chunk is written raw (no LSN) and answered
 * once durable; the last one goes to the core (SNAP_END), whose WRITE writes it
 * and then sets rs applied = (snap_epoch, s), state OK, role SECONDARY;
 * answered Empty once that is durable. Crash between: state LEARNING, "no
 * copy".
 *
 * Metrics: rt_repl_catchups_total{mode="full"|"keyed"} (copies finished,
 * primary side), rt_repl_keyed_fallbacks_total, rt_repl_copy_bytes_total (key +
 * value bytes sent in copies), rt_repl_copies_running,
 * rt_repl_copies_received_total (replica side). A plain catch-up needs no I/O
 * here: the core streams it.
 *
 * Not yet: sending REPL_ABORT (a primary's abandoned copy is replaced by
 * the next BEGIN), copies read from a secondary, the single-chunk atomic
 * apply of a small keyed copy (it always goes through LEARNING).
 *
 * Thread: the loop thread (snapshot reads on the threadpool). The state
 * lives in ps_server.learn, made at first use. */
#ifndef PS_LEARN_H
#define PS_LEARN_H

#include <stddef.h>
#include <stdint.h>

#include "ps_state.h"
#include "rt_repl_ev.h"
#include "rt_rpc.h"

/* Bytes of keys and values per REPL_SNAP chunk, and chunks in flight
 * (the last one goes alone, after the others were answered). */
#define PS_LEARN_CHUNK (256u * 1024u)
#define PS_LEARN_WINDOW 4
/* Timeout of one REPL_PROBE / REPL_BEGIN / REPL_SNAP call. */
#define PS_LEARN_CALL_MS 10000
/* A keyed copy waits for the key log to reach its snapshot's LSN this
 * many polls of PS_LEARN_KEY_WAIT_MS (a threadpool sleep), then copies in
 * full. */
#define PS_LEARN_KEY_WAITS 500
#define PS_LEARN_KEY_WAIT_MS 2

/* The core's peer id for the primary that runs a copy or probe of range
 * @range_id here (the requests do not name their sender). */
#define PS_LEARN_TOKEN(range_id) ((UINT64_C(1) << 62) | (range_id))
#define PS_LEARN_IS_TOKEN(peer) (((peer) >> 62) == 1)

/* REPL_PROBE, REPL_BEGIN, REPL_SNAP from a primary (@body borrowed). */
void ps_learn_on_probe(struct ps_server *ps,
                       struct rt_rpc_conn *conn,
                       uint64_t id,
                       const uint8_t *body,
                       size_t len);
void ps_learn_on_begin(struct ps_server *ps,
                       struct rt_rpc_conn *conn,
                       uint64_t id,
                       const uint8_t *body,
                       size_t len);
void ps_learn_on_snap(struct ps_server *ps,
                      struct rt_rpc_conn *conn,
                      uint64_t id,
                      const uint8_t *body,
                      size_t len);
/* REPL_ABORT (@body borrowed): a copy received here for the range at an
 * epoch up to the request's is dropped (its chunks refused from then on,
 * a chunk waiting for its write answered RT_ECANCELED); answered Empty
 * either way (idempotent). */
void ps_learn_on_abort(struct ps_server *ps,
                       struct rt_rpc_conn *conn,
                       uint64_t id,
                       const uint8_t *body,
                       size_t len);

/* A core action for this module (borrowed): SEND of PROBE, PROBE_RESP or
 * COPY_RESP; READ; WRITE of BEGIN or SNAP_END. Returns 1 if taken, 0 if
 * not one of those. */
int ps_learn_action(struct ps_server *ps, const struct rt_repl_action *a);

/* Answers every waiting request RT_EBUSY and stops the copies (their
 * snapshots close once their threadpool work returned). Before
 * ps_repl_stop. Idempotent. */
void ps_learn_stop(struct ps_server *ps);

/* After ps_server_close drained the threadpool: frees the state. */
void ps_learn_free(struct ps_server *ps);

/* Full copies received and applied here, and finished here as their
 * primary (the metrics' counters; tests). */
uint64_t ps_learn_received(const struct ps_server *ps);
uint64_t ps_learn_copies_done(const struct ps_server *ps);

/* Appends the metrics above to the Prometheus page @b. */
void ps_learn_metrics(struct ps_server *ps, struct rt_buf *b);

#endif
