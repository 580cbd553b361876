/* ps_lease: read leases granted by the secondaries (docs/DESIGN-replication.md
 * §6.2, §6.4, §7.1), both sides, as pure bookkeeping. It does no I/O, reads
 * no clock and sends nothing: every time is an argument (the caller's
 * monotonic clock in ms), and what to send comes back as values the
 * caller packs into SupportReq / SupportResp.
 *
 * Granter (struct ps_lease_granter, this server as a secondary): answers a
 * peer primary's SupportReq, recording per range the time it last granted
 * (`last_grant[R]`) before the caller sends the reply; withdraws a range
 * when a SEAL moves it away or a newer configuration names another
 * primary; and guards SEAL: a range may be sealed only when nothing was
 * granted for it within the last L, or its primary released it, and not
 * within L of this process's start (restart grace: the grants of the
 * previous run were lost with its memory).
 * SupportResp has no list of granted ranges: its receiver counts every
 * range it does not withdraw, including ranges this server did not know
 * yet when it answered. So the granter also keeps the time of the last
 * answer granted to each peer, and a range's last grant includes the last
 * answer to its primary, to the primary a newer view replaced (taken when
 * the view changes), and to every peer when the range becomes known.
 *
 * Holder (struct ps_lease_holder, this server as a primary): numbers its
 * SupportReqs, remembers each one's send time, and counts a reply only
 * from that send time. Its lease over a range R lasts until
 *
 *   min over the lease set of R of  t_send(s) + D,
 *   D = floor(L·(1−ρ)/(1+ρ)) − ε       (ρ = drift_ppm / 10^6)
 *
 * where s is the newest request whose reply from that member granted and
 * did not withdraw R. The lease set is given by the caller: the ISR
 * secondaries, plus a joining member from the moment ISR_CHANGE{add} is
 * sent, plus a removed one until the assignment removing it is applied
 * (§6.2). An empty lease set (RF 1, ISR = {P}) holds the lease at once.
 *
 * Why the holder's lease ends before any granter may seal (and so before
 * any other primary exists, §7): real time is t; a clock runs at a rate in
 * [1−ρ, 1+ρ]. Clock values are whole ms, read by truncation.
 *  - P reads t_send before it sends request s; S receives it later, so the
 *    real instant of S's grant g comes after the real send instant.
 *  - P answers a read only while its clock reads now < t_send + D. Its
 *    clock advanced less than D since the send, so at most D/(1−ρ) real
 *    time passed: P's last answer is before send + D/(1−ρ)
 *      = send + L/(1+ρ) − ε/(1−ρ)   (with D's floor only shorter).
 *  - S records last_grant = its clock at g, truncated (at most 1 ms early)
 *    and seals only when its clock reads ≥ last_grant + L: its clock
 *    advanced more than L − 1 since g, so more than (L − 1)/(1+ρ) real time
 *    passed: the seal is after g + L/(1+ρ) − 1/(1+ρ).
 *  - ε ≥ 1 (checked at create) gives ε/(1−ρ) ≥ 1/(1+ρ), so P's last
 *    answer < send + L/(1+ρ) − 1/(1+ρ) < g + L/(1+ρ) − 1/(1+ρ) < the seal.
 *    ε (5 ms by default) also absorbs the time between P's check and its
 *    reply leaving. At ρ = 10^-3, L = 1500: D = 1497 − 5 = 1492 ms.
 *  - A withdrawal or a refusal (granted = false) voids the member's support
 *    at once, and a reply to a request older than the withdrawal never
 *    revives it; a release voids all support of the range and only
 *    requests sent after ps_lease_holder_resume() count again.
 *  - A restarted granter lost its last_grant records: it refuses every seal
 *    until its clock reads start + L, which is after every grant of the old
 *    run by the same argument (each of those came before the restart).
 *
 * Thread: one thread per struct (the loop). Ownership: the caller owns the
 * structs (create/destroy); arrays passed in are borrowed for the call;
 * arrays returned point into the struct and stay valid until the next
 * call on the same struct. Allocation aborts on out of memory (rt_alloc.h).
 */
#ifndef PS_LEASE_H
#define PS_LEASE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Members of one range's lease set (the ISR secondaries and the joining
 * or leaving ones): at most this many. */
#define PS_LEASE_MAX_MEMBERS 8
/* Requests per peer whose send time is remembered; a reply to an older
 * one is ignored (renewals are 250 ms apart and L is 1500 ms, so only the
 * last ~6 can matter). */
#define PS_LEASE_INFLIGHT 16
/* §6.4: a lease expiring within this many ms makes the range NOLEASE. */
#define PS_LEASE_NOLEASE_MS 50
/* The largest incarnation kept (the server's is 16 random bytes). */
#define PS_LEASE_INC_MAX 32
/* ps_lease_holder_until(): the lease needs nobody (empty lease set). */
#define PS_LEASE_FOREVER UINT64_MAX

struct ps_lease_config
{
    uint64_t self_id;   /* this server's id */
    uint64_t lease_ms;  /* L (--lease-ms, 1500); > 0 */
    uint32_t drift_ppm; /* ρ in parts per million (--clock-drift-ppm, 1000);
                           < 10^6 */
    uint64_t eps_ms;    /* ε, check-to-reply slack (5); >= 1, see above */
    uint64_t start_ms;  /* the caller's clock when this process started:
                           the granter's restart grace ends at start + L */
};

/* Checks @cfg: RT_EINVAL unless lease_ms > 0, drift_ppm < 10^6,
 * eps_ms >= 1 and the holder's duration D (above) is > 0; else 0. */
int ps_lease_config_check(const struct ps_lease_config *cfg);
/* D of the header comment for @cfg (0 when @cfg fails the check). */
uint64_t ps_lease_duration(const struct ps_lease_config *cfg);

/* ---- Granter: this server supporting peer primaries ---- */

struct ps_lease_granter;

/* A granter with no peers and no ranges; @cfg is copied. Errors:
 * RT_EINVAL (ps_lease_config_check). On 0, *out belongs to the caller:
 * ps_lease_granter_destroy(). */
int ps_lease_granter_create(const struct ps_lease_config *cfg,
                            struct ps_lease_granter **out);
void ps_lease_granter_destroy(struct ps_lease_granter *g);

/* Server @peer_id is registered with incarnation @inc (@len bytes,
 * borrowed): from the peers[] of an assignment or registration reply.
 * Replaces an earlier one. Errors: RT_EINVAL (@len 0 or above
 * PS_LEASE_INC_MAX). */
int ps_lease_granter_peer(struct ps_lease_granter *g,
                          uint64_t peer_id,
                          const uint8_t *inc,
                          size_t len);

/* This server's view of range @range_id: configuration @epoch names
 * @primary_id (0: none; this server's own id: nothing to grant). Creates
 * the range's record. A view naming another primary withdraws the range
 * from the old one (its SupportResps list the range in `withdrawn` from
 * now on); the time of the last grant is kept, so a later SEAL still waits
 * for it. A view at or above the epoch a SEAL reserved lifts the seal.
 * Errors: RT_ESTALE (@epoch below the view's: nothing changes). */
int ps_lease_granter_set_range(struct ps_lease_granter *g,
                               uint64_t range_id,
                               uint64_t primary_id,
                               uint64_t epoch);
/* Forgets range @range_id (its copy is dropped here). 0 or RT_ENOTFOUND. */
int ps_lease_granter_drop_range(struct ps_lease_granter *g, uint64_t range_id);

/* Disk-stall self-fencing (§6.4): while @fenced, every SupportReq is
 * answered granted = false and records nothing. */
void ps_lease_granter_set_fenced(struct ps_lease_granter *g, bool fenced);

/* What to answer one SupportReq (SupportResp without its seq). */
struct ps_lease_answer
{
    bool granted;
    const uint64_t *withdrawn; /* into the granter; see the header */
    size_t n_withdrawn;
};

/* A SupportReq from @peer_id with incarnation @inc/@len and release list
 * @release[@n_release] (all borrowed), received at @now. Refused
 * (granted = false, nothing recorded) if the peer's incarnation is unknown
 * or differs, or while fenced. Otherwise, for every range whose view names
 * @peer_id primary and that no SEAL has withdrawn: a range in @release is
 * marked released (no grant); every other one is granted, last_grant =
 * @now, and loses an earlier release. `withdrawn` lists the ranges whose
 * support this peer lost: sealed away from it, or a view naming another
 * primary. The caller sends the answer after this returns, which is the
 * "record before replying" rule of §6.2. */
void ps_lease_granter_on_support(struct ps_lease_granter *g,
                                 uint64_t peer_id,
                                 const uint8_t *inc,
                                 size_t inc_len,
                                 const uint64_t *release,
                                 size_t n_release,
                                 uint64_t now,
                                 struct ps_lease_answer *out);

/* The SEAL guard of §3.2 / §6.2 for range @range_id at @now: the ms to
 * wait before a seal may be accepted, 0 if it may be now. Positive while
 * now < start + L (restart grace), or while now < last_grant + L (the
 * range's, or while not sealed the last answer granted to its primary)
 * unless the primary released the range and nothing was granted since.
 * An unknown range: only the grace applies. */
uint64_t ps_lease_granter_seal_wait(const struct ps_lease_granter *g,
                                    uint64_t range_id,
                                    uint64_t now);
/* Accepts SEAL{@new_epoch} for @range_id at @now if the guard allows:
 * then the range is withdrawn from its primary at once (before the caller
 * persists sealed_epoch and replies) and nothing is granted for it until
 * a view at >= @new_epoch arrives. Errors: RT_ENOTFOUND (no view of the
 * range), RT_EBUSY with *retry_ms = the wait (nothing changes). The
 * caller checks the epochs of §4 before. */
int ps_lease_granter_seal(struct ps_lease_granter *g,
                          uint64_t range_id,
                          uint64_t new_epoch,
                          uint64_t now,
                          uint64_t *retry_ms);

/* ---- Holder: this server as a primary, holding leases ---- */

struct ps_lease_holder;

/* A holder with no ranges; @cfg is copied. Errors: RT_EINVAL
 * (ps_lease_config_check). On 0, *out belongs to the caller:
 * ps_lease_holder_destroy(). */
int ps_lease_holder_create(const struct ps_lease_config *cfg,
                           struct ps_lease_holder **out);
void ps_lease_holder_destroy(struct ps_lease_holder *h);

/* Sets the lease set of range @range_id to @members[@n] (borrowed; this
 * server's own id and duplicates are skipped), creating the range (not
 * released, no support yet). A member kept keeps its support; a new one
 * starts with none, so the lease is not held until it grants. Errors:
 * RT_EINVAL (more than PS_LEASE_MAX_MEMBERS members). */
int ps_lease_holder_set_range(struct ps_lease_holder *h,
                              uint64_t range_id,
                              const uint64_t *members,
                              size_t n);
/* Forgets range @range_id. 0 or RT_ENOTFOUND. */
int ps_lease_holder_drop_range(struct ps_lease_holder *h, uint64_t range_id);

/* Releases range @range_id (§9.3, planned transfer: the caller froze it
 * durably first): every support held for it is void, the lease is not
 * held, and every SupportReq lists the range in `release` until
 * ps_lease_holder_resume(). 0 or RT_ENOTFOUND. */
int ps_lease_holder_release(struct ps_lease_holder *h, uint64_t range_id);
/* Ends a release (TRANSFER_ABORT): the range must win fresh support, so
 * only replies to requests sent after this call count. 0 or RT_ENOTFOUND. */
int ps_lease_holder_resume(struct ps_lease_holder *h, uint64_t range_id);

/* A SupportReq to send (the caller adds from_server and incarnation). */
struct ps_lease_req
{
    uint64_t seq;
    const uint64_t *release; /* into the holder; see the header */
    size_t n_release;
};

/* Numbers a SupportReq to @peer_id sent at @now (the caller reads its clock
 * before sending) and remembers @now as its send time. `release` lists
 * the released ranges whose lease set holds @peer_id. Sequence numbers
 * increase across all peers. */
void ps_lease_holder_send(struct ps_lease_holder *h,
                          uint64_t peer_id,
                          uint64_t now,
                          struct ps_lease_req *out);
/* The SupportResp of @peer_id to request @seq: @granted, @withdrawn[@n]
 * (borrowed). Granted: every range whose lease set holds the peer, that is
 * not released, not in @withdrawn, and whose floors @seq passes (resume,
 * an earlier withdrawal) now has the peer's support from t_send(@seq), or
 * keeps a newer one (a late reply never moves it). A withdrawn range (or
 * every range when not granted) loses the peer's support, and replies to
 * requests up to @seq never give it back. Errors: RT_ENOTFOUND (a @seq
 * not sent to this peer, or forgotten: ignored, nothing changes). */
int ps_lease_holder_on_resp(struct ps_lease_holder *h,
                            uint64_t peer_id,
                            uint64_t seq,
                            bool granted,
                            const uint64_t *withdrawn,
                            size_t n);

/* The instant (holder's clock) at which the lease over @range_id ends:
 * PS_LEASE_FOREVER for an empty lease set, 0 when not held (unknown or
 * released range, a member that never granted). */
uint64_t ps_lease_holder_until(const struct ps_lease_holder *h,
                               uint64_t range_id);
/* The lease over @range_id is valid at @now (now < until): the check of
 * §6.3 (b) before answering a read. */
bool ps_lease_holder_ok(const struct ps_lease_holder *h,
                        uint64_t range_id,
                        uint64_t now);
/* Ms of lease left at @now: 0 if not valid, UINT64_MAX if forever. */
uint64_t ps_lease_holder_remaining(const struct ps_lease_holder *h,
                                   uint64_t range_id,
                                   uint64_t now);
/* The NOLEASE trigger of §6.4: the lease is not valid at @now +
 * PS_LEASE_NOLEASE_MS (so never for an empty lease set). */
bool ps_lease_holder_expiring(const struct ps_lease_holder *h,
                              uint64_t range_id,
                              uint64_t now);
/* The members of @range_id's lease set whose support is missing or ends
 * within PS_LEASE_NOLEASE_MS of @now (the "silent" ones NOLEASE asks the
 * master to remove), written to @out (up to @cap). Returns their count
 * (0 for an unknown range). */
size_t ps_lease_holder_silent(const struct ps_lease_holder *h,
                              uint64_t range_id,
                              uint64_t now,
                              uint64_t *out,
                              size_t cap);

#endif
