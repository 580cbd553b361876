/* The simulated cluster of rt-sim: servers, tables and ranges, a workload,
 * and a policy of the master (ms_policy.h: the same code, through the same
 * interface) asked at the master's cadence, whose decisions are carried
 * out through a cost model calibrated on a real cluster
 * (tools/rt-sim/README.md "Cost model").
 *
 * Discrete time: one step is one heartbeat period (tick_ms, 500 ms like
 * the partition servers' --heartbeat-ms and the master's tick). Each step:
 *  1. moves whose copy ends within the step switch servers at its start;
 *  2. the workload gives every range its demand (entities/s) for the step;
 *  3. throttling: a range in a ServerBusy window refuses that part of the
 *     step; a range serves at most its server's per-range cap; a server
 *     whose ranges ask more than its capacity serves each of them in
 *     proportion (the rest is refused: 503 ServerBusy);
 *  4. every server's heartbeat: per range the counters of the step with a
 *     few PartitionKey samples drawn from the demand inside the range,
 *     folded in by ms_load_report as the master does;
 *  5. the policy decides on a view built like ms_balance.c builds it
 *     (servers by id, ranges by table and low key, loads, busy flags,
 *     ages); each decision is logged and carried out (or refused as
 *     ms_exec.c refuses it: busy range, unknown range or server).
 *
 * The ranges are kept in one array sorted by (table, low) which is the
 * policy's view itself (no copy, no sort per step); a split or merge
 * shifts it once, and an index by range id follows it. The simulation
 * path reads no clock and no unseeded randomness and never iterates a
 * hash: same configuration, workload, policy and seed give the same
 * decisions, byte for byte.
 *
 * Thread: one simulation belongs to one thread. Ownership: rs_sim_create
 * copies its configuration; rs_sim_destroy frees everything. */
#ifndef RS_SIM_H
#define RS_SIM_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "ms_load.h"
#include "ms_policy.h"
#include "rs_work.h"
#include "rt_rand.h"

#define RS_RF_MAX 5
#define RS_UNBOUNDED UINT64_MAX

/* What carrying out a decision costs (defaults measured: README). */
struct rs_cost
{
    double split_window_ms;    /* ServerBusy window of a split */
    double merge_window_ms;    /* ... of a merge */
    double serial_ms;          /* the splits and merges of one policy call
                                * commit one after the other, this far
                                * apart (their new ranges' birth times) */
    double move_fixed_ms;      /* a move's setup + snapshot overhead */
    double move_mb_s;          /* copy bandwidth, MB/s (10^6 bytes) */
    double move_window_ms;     /* frozen + commit + assignment at the end */
    double transfer_window_ms; /* primary-role transfer */
};

void rs_cost_default(struct rs_cost *c);

struct rs_cfg
{
    size_t servers;
    size_t ranges;     /* at the start, spread evenly over the tables */
    size_t tables;     /* 0: ranges / 16, at least 1 */
    size_t zones;      /* servers are in zone "z<id % zones>" (0: no zones) */
    uint64_t keys;     /* key indexes, all tables */
    double server_eps; /* capacity of a server, entities/s */
    double range_eps;  /* per-range cap (0: none) */
    uint32_t rf;       /* copies of each range (1..RS_RF_MAX) */
    uint64_t entity_bytes; /* storage per key */
    uint32_t tick_ms;
    uint64_t seed;
    uint64_t start_unix_ms; /* the simulated wall clock of t = 0 */
    char policy[32];
    struct ms_policy_config pcfg;
    struct rs_cost cost;
};

/* Defaults: 10 servers, 100 ranges, 1e6 keys, 2500 entities/s per server
 * (bench-balance's cap), RF 1, 1 KiB entities, 500 ms, seed 1, policy
 * "default" with its defaults, the measured cost model. */
void rs_cfg_default(struct rs_cfg *cfg);

struct rs_server
{
    uint64_t id;
    char zone[24];
    double cap;
    bool up;
    unsigned moving;
    uint64_t move_ms;
    size_t nranges;
    size_t nreplicas;
    double demand; /* this step */
    double served;
};

struct rs_range
{
    uint64_t glo, ghi; /* global key indexes [glo, ghi); RS_UNBOUNDED */
    uint64_t keys, bytes;
    double mass; /* share of the demand, valid for shape mass_shape */
    uint64_t mass_shape;
    uint64_t busy_from, busy_until; /* ServerBusy window, ms */
    bool inflight;                  /* a move of it is under way */
    uint64_t reps[RS_RF_MAX];       /* replicas (the primary first) */
    uint64_t isr[RS_RF_MAX];
    double demand, served, refused; /* this step, entities/s */
    bool reported;
};

/* One decision of the policy, as logged. */
struct rs_dec
{
    uint64_t t_ms;
    enum ms_decision_kind kind;
    uint64_t range_id, range_id2, server_id, src_id;
    uint64_t from;       /* its server at the decision (a move of a
                          * secondary copy: the server that copy left) */
    uint64_t new_ids[2]; /* split: left, right; merge: new_ids[0] */
    uint64_t table_id;
    char *key;        /* split (owned) */
    char *low, *high; /* bounds at the decision (owned; high NULL) */
    uint64_t bytes;   /* move: bytes copied */
    double load;
    bool ok;
    char why[96]; /* refused: why */
    char reason[256];
};

/* One simulated second. */
struct rs_sec
{
    double demanded, served, refused; /* entities/s */
    double busiest, mean;             /* server demand */
    uint32_t ranges;
    uint32_t splits, merges, moves, transfers;
    uint64_t bytes_moved;
    bool step; /* the workload stepped in this second */
};

/* A heat-map frame (downsampled for keyviz.json). */
struct rs_cell
{
    uint64_t range_id;
    float demand;
    uint32_t server; /* index + 1 of the server */
};

struct rs_frame
{
    uint64_t t_ms;
    struct rs_cell *cells;
    size_t ncells;
    float *server_demand; /* by server index */
};

/* Bounds of every range id ever made (ids are dense from 1). */
struct rs_bounds
{
    uint64_t table_id;
    char *low, *high;
};

struct rs_op; /* a move in flight */

/* A replayed trace's operation that started, and when it ended (simulated
 * ms; rs_trace.c). */
struct rs_recop
{
    uint64_t t_dec, t_end;
    uint64_t t_born; /* split, merge: the new ranges' birth */
    enum ms_decision_kind kind;
    uint64_t table_id;
    const char *low; /* borrowed from the trace */
    const char *key; /* split; NULL otherwise */
    uint64_t to;     /* move, transfer */
    bool used;
};

struct rs_sim
{
    struct rs_cfg cfg;
    bool replay; /* driven by a trace (rs_trace.h), not a workload */
    struct ms_policy policy;
    struct ms_load *load;
    struct rs_work work;
    struct rt_rng rng;
    uint64_t keys_per_table;

    struct rs_server *sv; /* by id (id = index + 1) */
    struct ms_server_view *svv;
    size_t ns;

    struct rs_range *rr; /* parallel to rv, by (table, low) */
    struct ms_range_view *rv;
    size_t nr, cap;
    size_t *pos; /* by range id: its index in rv (checked: may be stale) */
    size_t npos;
    uint64_t next_id;

    /* Replay: the recorded operations, by which an operation the
     * recorded cluster also carried out ends when it did there rather
     * than when the cost model says (a split's halves are born, a move's
     * copy ends). */
    struct rs_recop *recops;
    size_t nrecops;

    struct rs_op *ops;
    size_t nops, ops_cap;
    unsigned moves_inflight;
    unsigned call_commits; /* splits and merges of the current call */

    uint64_t now_ms;
    uint64_t ticks;
    uint64_t range_ticks; /* sum of ranges over ticks (speed figure) */

    struct rs_dec *decs;
    size_t ndecs, decs_cap;
    FILE *declog; /* borrowed; may be NULL */
    uint64_t seq;

    struct rs_sec *secs;
    size_t nsecs, secs_cap;
    struct rs_sec acc; /* the second being summed */
    unsigned acc_ticks;

    struct rs_bounds *bounds;
    size_t nbounds;

    struct rs_frame *frames;
    size_t nframes, frames_cap;
    uint32_t frame_every_s; /* 0: no frames */
    size_t frame_cells;     /* at most this many cells per frame */

    uint64_t totals[MS_DECIDE__NR]; /* carried-out decisions by kind */
    uint64_t refused_decisions;
    uint64_t bytes_moved;
};

/* A new simulation at t = 0 with @cfg (copied) and workload @wcfg
 * (copied; NULL: an empty cluster of cfg->servers servers for a replay,
 * rs_trace.h). Returns NULL with @err set for an unknown policy or a bad
 * configuration. @declog (borrowed, may be NULL) gets one JSON line per
 * decision. */
struct rs_sim *rs_sim_create(const struct rs_cfg *cfg,
                             const struct rs_work_cfg *wcfg,
                             FILE *declog,
                             char *err,
                             size_t errlen);
void rs_sim_destroy(struct rs_sim *s);
/* One step (tick_ms). */
void rs_sim_step(struct rs_sim *s);
/* Steps until @t_ms. */
void rs_sim_run_until(struct rs_sim *s, uint64_t t_ms);
/* Frames for keyviz.json: one every @every_s seconds of at most @cells
 * ranges (the busiest); call before stepping. */
void rs_sim_frames(struct rs_sim *s, uint32_t every_s, size_t cells);

/* Carries out @d (borrowed) now, as an operator's rtctl order would be:
 * logged like the policy's decisions. Returns whether it was done. */
bool rs_sim_order(struct rs_sim *s, const struct ms_decision *d);
/* The index in s->rv of range @id, or s->nr (O(1)). */
size_t rs_sim_find(const struct rs_sim *s, uint64_t id);
/* Throttling of one server for one step (exposed for tests): @demand[n]
 * after ServerBusy windows (@avail[n], 0..1) and the per-range cap
 * @range_cap (0 none), the server's capacity @cap (0 none); writes
 * @served[n] and returns the total served. */
double rs_throttle(const double *demand,
                   const double *avail,
                   size_t n,
                   double range_cap,
                   double cap,
                   double *served);
/* The copy time of a move of @bytes under @c, ms. */
double rs_cost_move_ms(const struct rs_cost *c, uint64_t bytes);

#endif
