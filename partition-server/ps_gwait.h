/* Group-commit wait: whether the writer, about to take a group, should
 * first wait a short, bounded time for more writes to join it.
 *
 * Why: with N clients each waiting for its answer before sending the next
 * write (the SDKs, a front end's connections), groups settle into two
 * halves that alternate: while one half's sync runs, the other half
 * queues; when it ends, the writer takes that half at once, and the first
 * half's next writes arrive a round trip later, into the next group. Each
 * sync then carries N/2 writes. Waiting one round trip for them (far less
 * than a sync) lets one sync carry all N.
 *
 * The rule (ps_gwait_decide), in order: no wait when off (max_us 0), when
 * a job other than a write is queued (meta, barrier, replica state: the
 * control plane never waits), when nothing is queued, before the first
 * group, when the queue is deep (PS_GWAIT_DEEP ops: the group is large
 * already), or when the queue already holds as many ops as were in the
 * system at the end of the previous group commit (its ops plus those
 * queued then: with one client that is 1, so a lone client never waits).
 * Otherwise wait until that many ops are queued (capped at PS_GWAIT_DEEP),
 * for at most min(max_us, last_sync_us / 2) counted from the end of the
 * previous group commit: the time the writer already sat idle counts, so
 * the disk never idles longer than that bound between two syncs, and a
 * write that finds the writer idle long after the last sync never waits.
 *
 * A wait must also pay (ps_gwait_done): while the writer waits the disk is
 * idle, so the writes it gathers per microsecond must come at least as
 * fast as the previous group commit committed them (its ops over its
 * duration). When writes trickle in instead of coming back in a burst (a
 * front end short of CPU, clients that pause between writes) a wait only
 * adds latency: each wait that did not pay doubles the number of eligible
 * groups that then go without one (1, 2, 4 .. PS_GWAIT_MAX_SKIP); a wait
 * that paid resets it.
 *
 * Durability is not the policy's concern: a waited write is committed and
 * answered exactly as any other (after its group's sync, and at RF 3 its
 * replicas' acks).
 *
 * Pure: no clock, no I/O; its only state is the back-off, in a struct the
 * writer (ps_writer.c, writer thread only) embeds and feeds. */
#ifndef PS_GWAIT_H
#define PS_GWAIT_H

#include <stddef.h>
#include <stdint.h>

/* A queue this deep (entity ops and raw changes) is a large group: never
 * wait for more (the raw LMDB reference commits 100 puts per sync). */
#define PS_GWAIT_DEEP 128
/* The most eligible groups skipped after waits that did not pay. */
#define PS_GWAIT_MAX_SKIP 64

struct ps_gwait
{
    unsigned skip;    /* eligible groups still to go without a wait */
    unsigned backoff; /* the skip the next unpaid wait sets, halved */
};

struct ps_gwait_in
{
    uint64_t max_us;       /* the configured bound (--group-wait-us); 0 = off */
    size_t queued_ops;     /* entity ops and raw changes queued now */
    int queued_other;      /* a job that is not a write is queued */
    uint64_t last_sync_us; /* the previous group commit's duration; 0 = none */
    uint64_t since_sync_us; /* time since the previous group commit ended */
    size_t expect_ops;      /* ops in the previous group + ops queued when it
                               ended */
    size_t last_group_ops;  /* ops in the previous group */
};

/* Zeroes @g: no back-off. */
void ps_gwait_init(struct ps_gwait *g);
/* Returns how long to wait at most, in microseconds (0 = take the group
 * now), and sets *target_ops to the queue depth that ends the wait early
 * (left unchanged when the answer is 0). A group that would wait while
 * @g is backing off uses up one skip instead. @in is borrowed. */
uint64_t ps_gwait_decide(struct ps_gwait *g,
                         const struct ps_gwait_in *in,
                         size_t *target_ops);
/* Reports a wait ps_gwait_decide asked for: it lasted @waited_us and
 * @gained_ops more ops were queued at its end; @in is what the decision
 * was fed (borrowed). Returns 1 when the wait paid (back-off reset), 0
 * when it did not (back-off doubled, up to PS_GWAIT_MAX_SKIP). */
int ps_gwait_done(struct ps_gwait *g,
                  const struct ps_gwait_in *in,
                  size_t gained_ops,
                  uint64_t waited_us);

#endif
