/* sim_net: the simulated world both simulators share (sim_repl,
 * sim_failover; DESIGN-replication.md §11.2): one seeded PRNG, one
 * priority queue of timed events, a network that delays (heavy tail),
 * reorders, duplicates and loses messages, per-node clock rates, a trace
 * ring, the first property violated, and the driver of a run over many
 * seeds.
 *
 * Determinism is the contract: every draw from @rng happens in the order
 * the caller makes its calls, events of equal time pop in push order, so
 * the same seed gives the same run, event for event. The module knows
 * nothing of cores or messages: a simulator's event embeds a
 * struct sim_item as its FIRST member and casts what sim_pop() returns.
 *
 * Times are simulated milliseconds (real time, the world's; a node's local
 * clock is derived from it by its rate). Thread: one, the simulator's. */
#ifndef SIM_NET_H
#define SIM_NET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "rt_rand.h"

#define SIM_TRACE_WIDTH 200

/* The head of a queued event: its due time and its push order. */
struct sim_item
{
    uint64_t at, seq;
};

struct sim_net
{
    struct rt_rng rng;
    uint64_t now;
    /* The network, drawn per seed by sim_net_draw(). */
    double loss, dup;
    uint64_t delay_max;
    /* The event queue: a binary min-heap on (at, seq). */
    struct sim_item **heap;
    size_t heap_n, heap_cap;
    uint64_t seq;
    /* The trace ring (only when @trace): the last trace_lines lines. */
    bool trace;
    char (*trace_buf)[SIM_TRACE_WIDTH];
    size_t trace_lines, trace_n;
    /* The first violation: property name (static) and message. */
    const char *violated;
    char why[256];
};

/* Seeds the world with @seed at time 0; keeps the last @trace_lines trace
 * lines when @trace. Draws nothing. */
void sim_net_init(struct sim_net *w,
                  uint64_t seed,
                  bool trace,
                  size_t trace_lines);
/* Draws the network of this seed, in this order: loss in [0, @loss_max),
 * duplication in [0, @dup_max), maximum delay in [0, @delay_max] ms. */
void sim_net_draw(struct sim_net *w,
                  double loss_max,
                  double dup_max,
                  uint64_t delay_max);
/* Frees every event still queued with @free_item, then the queue and the
 * trace ring. */
void sim_net_close(struct sim_net *w, void (*free_item)(struct sim_item *));

/* Queues @it (taken) at it->at; stamps its push order. */
void sim_push(struct sim_net *w, struct sim_item *it);
/* Removes and returns the earliest event (queue not empty). */
struct sim_item *sim_pop(struct sim_net *w);
/* The event loop's step: NULL if the queue is empty or its earliest event
 * is due after @until (it stays queued); else removes it, advances now to
 * its time and returns it (the caller's to free). */
struct sim_item *sim_next(struct sim_net *w, uint64_t until);

/* How many copies of one message the network delivers: 0 (lost), 1, or 2
 * (duplicated), by the seed's rates; with @faulty false, always 1 (the
 * draws are made all the same, so a run's later draws do not shift). */
int sim_net_copies(struct sim_net *w, bool faulty);
/* One copy's delay: up to delay_max ms, ten times that 5 % of the time. */
uint64_t sim_net_delay(struct sim_net *w);

/* A node's local clock at the world's now, for a clock running at @rate. */
uint64_t sim_clock_local(const struct sim_net *w, double rate);
/* The world time (not before now) at which such a clock reads @local. */
uint64_t sim_clock_real(const struct sim_net *w, double rate, uint64_t local);

/* Appends a line, prefixed with now, to the trace ring (when tracing). */
void sim_tracef(struct sim_net *w, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Records the first violation: property @prop (static string) and why. */
void sim_fail(struct sim_net *w, const char *prop, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Prints the trace ring to stderr, oldest line first. */
void sim_print_trace(const struct sim_net *w);

/* A content hash of @n bytes at @p. */
uint64_t sim_hash(const uint8_t *p, size_t n);
/* The environment variable @name as a number, or @dflt if unset/empty. */
uint64_t sim_env(const char *name, uint64_t dflt);

/* Sets the mutation --mutate @name stands for in @ctx; -1 if unknown. */
typedef int (*sim_mutation_cb)(const char *name, void *ctx);

/* Parses "[--mutate NAME --expect PROP]" (pairs, in any order): NAME goes
 * to @mutation_of, PROP (borrowed from @argv) to *expect. Returns 0, or -1
 * after printing the error or "usage: @prog ..." to stderr. */
int sim_args(int argc,
             char **argv,
             const char *prog,
             sim_mutation_cb mutation_of,
             void *ctx,
             const char **expect);

/* Runs one seed, traced or not; returns the violated property or NULL. */
typedef const char *(*sim_run_cb)(uint64_t seed, bool trace, void *ctx);

/* The driver both mains share. SIM_SEED=s replays seed s with a trace and
 * prints its verdict. Otherwise runs seeds 1..SIM_SEEDS (default
 * @default_seeds): with @expect (a mutation run) succeeds at the first
 * violation if it is @expect, fails if another property or none is
 * violated; without, a violation prints "replay: SIM_SEED=s@replay_extra"
 * and replays the seed traced. Returns the exit status, or -1 when every
 * seed passed without @expect: the caller prints its summary for *seeds. */
int sim_drive(sim_run_cb run,
              void *ctx,
              const char *expect,
              uint64_t default_seeds,
              const char *replay_extra,
              uint64_t *seeds);

#endif
