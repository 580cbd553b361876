/* Raft: the one module of the master that talks to libraft (0.22.1, the
 * legacy raft_apply / raft_fsm API, uv backend + TCP transport). It
 * replicates opaque byte entries for a state machine given as callbacks and
 * knows nothing about the catalog (docs/DESIGN-master-ha.md §2.5, §3, §4,
 * §7.2).
 *
 * Thread: the loop given to ms_raft_start() only; every callback below
 * (fsm, on_change, the done callbacks) runs on that loop. Done callbacks
 * and on_change never run inside the call that started an operation, but
 * libraft steps inside ms_raft_propose() and the other requests, and may
 * call fsm.snapshot there (it looks for a snapshot at every step): a
 * snapshot must refuse (RT_EBUSY) whenever the FSM holds state that is not
 * committed, including the entry being proposed.
 *
 * Entries on disk are framed by this module ([u64le length][payload][zero
 * padding to 8 bytes]: the uv backend refuses entries whose length is not a
 * multiple of 8); fsm.apply sees the payload exactly as proposed.
 *
 * The process must ignore SIGPIPE before ms_raft_start() (rt-master's main
 * does, tests too): libraft writes to peers' sockets that may have closed.
 *
 * Behaviour of libraft 0.22.1 this wrapper relies on, checked against its
 * source (src/legacy.c at v0.22.1) and by test_ms_raft.c:
 * - fsm.snapshot returning non-zero skips that snapshot: nothing is written,
 *   snapshot_finalize is not called, and libraft tries again after a later
 *   commit (the threshold is still exceeded). So RT_EBUSY from our snapshot
 *   callback means "not now" (a leader holding speculative, uncommitted
 *   state); test_snapshot_busy_skips shows the log keeps growing and the
 *   snapshot is taken once the callback agrees.
 * - A lone member whose listen address nobody connects to is fine: it
 *   self-elects and commits alone; with port 0 the wrapper picks a free
 *   port itself (bind + getsockname + close) so the configuration holds a
 *   real address (ms_raft_addr()).
 * - On leadership loss libraft fails every pending raft_apply with
 *   RAFT_LEADERSHIPLOST (LegacyFailPendingRequests); the entry may still be
 *   committed by the next leader. The wrapper surfaces it as
 *   ms_raft_failed() + on_change; it never knows whether such an entry will
 *   commit (the caller re-executes and rebuilds from the log, §2.5).
 * - An append that fails on disk is never reported as a failed proposal:
 *   the uv backend retries a full disk (raft_uv_set_disk_retry), and the
 *   legacy layer's append callback asserts that a failed append is only
 *   RAFT_CANCELED at close (src/legacy.c legacyPersistEntriesCb), so any
 *   other write error aborts the process (or, asserts compiled out, leaves
 *   the entry uncommitted forever: the caller's proposal timeout is the
 *   only net). A proposal fails only by leadership loss, transfer or close.
 * - fsm.apply returning non-zero stops libraft's apply loop with the entry
 *   unapplied; the wrapper therefore logs fatal and exit(1)s instead.
 * - restore owns its buffer in libraft's contract: the wrapper frees it and
 *   hands the FSM a borrowed view.
 * - libraft takes a snapshot at a step after the threshold is crossed (the
 *   next tick or request), then writes it asynchronously; a restart restores
 *   only snapshots whose write finished (ms_raft_snapshots()).
 * - With a segment size below libraft's 8 MiB default, its capacity check
 *   (proposals refused with RAFT_NOSPACE below 4 MiB of prepared segments)
 *   would refuse everything: the threshold is scaled to one segment.
 */
#ifndef MS_RAFT_H
#define MS_RAFT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "rt_buf.h"
#include "rt_err.h"

struct rt_tls;

/* "This member does not lead" (503 ServerBusy). */
#define MS_RAFT_ENOTLEADER RT_ENOTLEADER

#define MS_RAFT_ADDR_SIZE 64

struct ms_raft;

/* The replicated state machine; all called on the loop. */
struct ms_raft_fsm
{
    void *ud;
    /* A committed entry, in log order, on every member (the leader too);
     * @buf is borrowed for the call. Non-zero = local failure: the wrapper
     * logs fatal and exit(1)s (skipping an entry would fork the state). */
    int (*apply)(void *ud, uint64_t index, const uint8_t *buf, size_t len);
    /* The whole state, appended to @out (empty on entry; the wrapper frees
     * it). RT_EBUSY (or any non-zero) = not now: libraft skips this
     * snapshot and asks again after a later commit. */
    int (*snapshot)(void *ud, struct rt_buf *out);
    /* Replace the whole state by @buf (borrowed; what snapshot wrote, as one
     * buffer). Called by ms_raft_start() (newest snapshot on disk, before
     * the committed entries after it are applied) and when the leader
     * installs a snapshot. Non-zero: at start, ms_raft_start() fails;
     * later, fatal exit(1). */
    int (*restore)(void *ud, const uint8_t *buf, size_t len);
};

struct ms_raft_peer
{
    uint64_t id;
    char addr[MS_RAFT_ADDR_SIZE]; /* raft transport "IPv4:port" */
};

enum ms_raft_role { MS_RAFT_VOTER, MS_RAFT_STANDBY, MS_RAFT_SPARE };

struct ms_raft_member
{
    uint64_t id;
    char addr[MS_RAFT_ADDR_SIZE];
    enum ms_raft_role role;
    uint64_t match_index; /* the leader's view; 0 on a follower */
};

struct ms_raft_opts
{
    uint64_t id;     /* >= 1 */
    const char *dir; /* libraft's directory, created if missing (one level) */
    const char *listen; /* raft transport bind "IPv4:port"; port 0 = pick */
    /* The address the other members dial, as the configuration stores it
     * (a name or another IP than the bound one: 0.0.0.0, NAT). NULL or ""
     * = the bound address. Needs a listen port other than 0. */
    const char *advertise;
    /* Initial voters, this member included; only read to bootstrap an empty
     * dir. Empty = one member {id: listen}. */
    const struct ms_raft_peer *peers;
    size_t npeers;
    bool bootstrap; /* allow bootstrapping an empty dir with several peers */
    bool join; /* empty dir: start with no configuration, wait to be added */
    unsigned election_ms;        /* 0 = 500 */
    unsigned heartbeat_ms;       /* 0 = 100 */
    unsigned snapshot_threshold; /* 0 = 1024 */
    unsigned snapshot_trailing;  /* 0 = 128 */
    size_t segment_size;         /* 0 = libraft's 8 MiB; tests use less */
    /* Cluster credentials (borrowed, must outlive the member): raft
     * traffic is mutual TLS accepting only certificates of role master
     * (ms_rtls.h). NULL = libraft's plain TCP (--insecure-rpc). */
    struct rt_tls *tls;
    unsigned tls_handshake_ms; /* 0 = MS_RTLS_HANDSHAKE_MS (5 s) */
};

/* Start a member on @loop. @o and @fsm are borrowed (copied). On 0, *out
 * belongs to the caller until ms_raft_close(). Inside this call libraft
 * restores the newest snapshot (fsm.restore); the entries after it are
 * re-applied (fsm.apply) once their commit is known: a lone voter elects
 * itself inside this call and applies them all before it returns (seen
 * with 0.22.1); a member of several applies them when a leader's first
 * append tells it the commit index. The caller acts on nothing before
 * its own start marker (LEADER_START, design §3.2) was applied.
 * Start rules (design §4.4): an empty dir with one member (no peers, or only
 * itself) or with --bootstrap is bootstrapped with the peers' configuration;
 * an empty dir with several peers and neither bootstrap nor join is refused
 * (RT_ECONFIG, @errmsg says how to rejoin); join starts empty and waits to
 * be added; a dir with state is started as it is (peers are ignored).
 * @on_change(@ud) fires whenever the applied or commit index advances, the
 * state, term or leader changes, or a proposal failed (polled every 10 ms:
 * 0.22.1 has no state callback; applies are reported on the next loop turn).
 * Errors: RT_EINVAL, RT_ECONFIG, RT_EIO, RT_ECORRUPT (restore failed),
 * RT_ENOMEM; @errmsg (RT_ERRMSG_SIZE) says why. On error, libraft's handles
 * may still be closing: run the loop before uv_loop_close(). */
int ms_raft_start(uv_loop_t *loop,
                  const struct ms_raft_opts *o,
                  const struct ms_raft_fsm *fsm,
                  void (*on_change)(void *ud),
                  void *ud,
                  struct ms_raft **out,
                  char *errmsg);

/* Append @buf (borrowed, copied) to the log. On 0, *@index_out (optional) is
 * its index and ms_raft_last_proposed() returns it. The entry comes back
 * through fsm.apply once committed, or its failure (leadership lost,
 * transfer, close) is reported through on_change + ms_raft_failed().
 * Errors: MS_RAFT_ENOTLEADER (not leader, or a transfer is running),
 * RT_ENOMEM, RT_EIO. */
int ms_raft_propose(struct ms_raft *r,
                    const uint8_t *buf,
                    size_t len,
                    uint64_t *index_out);

/* The index of the first proposal that failed since start (0 = none): such
 * an entry may or may not commit later, so the caller stops trusting its
 * speculative state (the master re-executes itself). */
uint64_t ms_raft_failed(const struct ms_raft *r);

/* Snapshots whose write finished since start (fsm.snapshot agreed, libraft
 * wrote it or gave up); rt_master_snapshots_total. */
uint64_t ms_raft_snapshots(const struct ms_raft *r);

uint64_t ms_raft_last_proposed(const struct ms_raft *r);
uint64_t ms_raft_commit_index(struct ms_raft *r);
uint64_t ms_raft_applied_index(struct ms_raft *r);
uint64_t ms_raft_term(struct ms_raft *r);
bool ms_raft_is_leader(struct ms_raft *r);
/* The TLS transport's counters (ms_rtls.h); all zero over plain TCP. */
struct ms_rtls_stats;
void ms_raft_transport_stats(struct ms_raft *r, struct ms_rtls_stats *out);
/* This member's id and raft address as the others dial it (the advertised
 * one, else the bound one with port 0 resolved). */
uint64_t ms_raft_id(const struct ms_raft *r);
const char *ms_raft_addr(const struct ms_raft *r);
/* The raft transport address actually bound (port 0 resolved). */
const char *ms_raft_bind_addr(const struct ms_raft *r);
/* The leader's id (0 = none known) and, in *@addr (optional), its raft
 * address, valid until control returns to the loop ("" when none). */
uint64_t ms_raft_leader(struct ms_raft *r, const char **addr);

/* Completion of an asynchronous operation: 0, MS_RAFT_ENOTLEADER (not
 * leader, or leadership lost before the entry committed), RT_EBUSY (a
 * configuration change is already running), RT_EINVAL (bad id, role or
 * address), RT_ETIMEDOUT (a transfer that did not move leadership),
 * RT_ECANCELED (closed). Never called if the starting call failed. */
typedef void (*ms_raft_done_cb)(void *ud, int status);

/* A barrier entry: @cb when every entry before it is applied here. */
int ms_raft_barrier(struct ms_raft *r, ms_raft_done_cb cb, void *ud);
/* Move leadership to @id (0 = libraft picks the most up-to-date voter).
 * @cb fires when the target leads (0) or after an election timeout
 * (RT_ETIMEDOUT). Proposals are refused while it runs. */
int ms_raft_transfer(struct ms_raft *r,
                     uint64_t id,
                     ms_raft_done_cb cb,
                     void *ud);
/* Configuration changes, one at a time (else RT_EBUSY). add makes @id a
 * spare at @addr (borrowed); assign_voter catches it up, then promotes. */
int ms_raft_add(struct ms_raft *r,
                uint64_t id,
                const char *addr,
                ms_raft_done_cb cb,
                void *ud);
int ms_raft_assign_voter(struct ms_raft *r,
                         uint64_t id,
                         ms_raft_done_cb cb,
                         void *ud);
int ms_raft_remove(struct ms_raft *r,
                   uint64_t id,
                   ms_raft_done_cb cb,
                   void *ud);

/* The current configuration (committed or not) into @out (up to @max);
 * returns the number of members (may exceed @max). */
size_t ms_raft_config(struct ms_raft *r,
                      struct ms_raft_member *out,
                      size_t max);

/* Stop: pending proposals fail (their failure is not reported), pending
 * done callbacks get their status, then @cb(@ud) fires once every handle is
 * closed; @r is freed before @cb. No fsm callback runs after this call. */
void ms_raft_close(struct ms_raft *r, void (*cb)(void *ud), void *ud);

#endif
