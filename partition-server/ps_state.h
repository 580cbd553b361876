/* State: the one struct ps_server of a partition server process and its
 * configuration, shared by the modules that run on the loop thread
 * (ps_server, ps_rpc, ps_master, ps_move, ps_jobs, ps_repl). Only types live
 * here, no functions, so each of those modules can include it without depending
 * on another: ps_server.c owns the struct (start, stop, close); the others read
 * and update the parts their comments name.
 *
 * Thread: the loop thread, except metrics_text (metrics_mu). */
#ifndef PS_STATE_H
#define PS_STATE_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "ps_range.h"
#include "ps_store.h"
#include "ps_writer.h"
#include "rt_metrics.h"
#include "rt_rpc.h"

struct ps_move_out;
struct ps_move_in;
struct ps_http;
struct ps_repl;
struct ps_learn;
struct ps_repair;
struct ps_transfer;

/* Strings are borrowed for the server's life. */
struct ps_config
{
    const char *listen;      /* "host:port" (port 0 = ephemeral) */
    const char *advertise;   /* "" = the actual listen address */
    const char *master;      /* "host:port" of rt-master */
    const char *data;        /* LMDB directory */
    const char *port_file;   /* "" = none */
    const char *zone;        /* failure domain sent at registration; "" */
    size_t max_pending;      /* queued write ops before RT_EBUSY */
    uint32_t group_wait_us;  /* adaptive group-commit wait bound; 0 = off */
    size_t map_size;         /* LMDB map size in bytes */
    uint64_t max_server_eps; /* entities/s for the whole server; 0 = none */
    uint64_t max_range_eps;  /* entities/s per range; 0 = none */
    const char *http;        /* metrics "host:port"; NULL or "" = off */
    size_t move_chunk;       /* MIGRATE_DATA body target; 0 = 256 KiB */
    uint32_t repl_inflight;  /* appends unacked per peer; 0 = 32 */
    uint32_t read_wait_ms;   /* a replicated read waiting for cw; 0 = 1000 */
    uint32_t scrub_mb_s;     /* scrub budget per second; 0 = off */
    uint32_t lease_ms;       /* L of the read leases; 0 = 1500 */
    uint32_t repl_hb_ms;     /* SupportReq period; 0 = 250 */
    uint32_t drift_ppm;      /* ρ of the lease bound; 0 = 1000 */
    uint32_t ack_timeout_ms; /* late ISR member -> shrink; 0 = 1000 */
    uint32_t write_hold_ms;  /* held write -> RT_ETIMEDOUT; 0 = 5000 */
    uint32_t heartbeat_ms;   /* master heartbeat period; 0 = 500 */
    uint32_t repl_window_mb; /* buffer kept for a peer out of the ISR; 0 = 64 */
    uint32_t repl_log_mb;    /* key log budget (§2.3); 0 = 64 */
    uint32_t stall_timeout_ms; /* writer stuck this long: fence; 0 = 5000 */
};

/* The entity RPCs timed from arrival to reply (metrics). */
enum ps_rpc_lat {
    PS_RPC_LAT_WRITE,
    PS_RPC_LAT_GET,
    PS_RPC_LAT_SCAN,
    PS_RPC_LAT__NR
};

struct ps_server
{
    uv_loop_t *loop;
    struct ps_config cfg;
    struct ps_store *store;
    struct ps_writer *writer;
    struct ps_ranges ranges;
    struct rt_rpc_server *rpc;
    int port;                                 /* actual RPC port */
    char addr[320];                           /* advertised "host:port" */
    uint64_t server_id;                       /* 0 until the master gives one */
    uint8_t incarnation[PS_INCARNATION_SIZE]; /* from meta, never changes */

    /* Master link (ps_master.c): @master is @master_link's client. */
    struct rt_masters_link *master_link;
    struct rt_rpc_client *master;
    uv_timer_t hb_timer;
    int hb_timer_init;
    int registered;
    int register_inflight;
    int hb_inflight;
    /* The highest master term seen (ps_fence.h): loaded from meta at
     * start, raised by master requests and replies, persisted by every
     * META job; never lowered. */
    uint64_t master_term;
    uint64_t master_term_refused; /* requests and replies refused for it */

    /* uv_queue_work requests out (scans, count scans, move snapshots);
     * the store must not close before they are back (ps_server_close
     * waits). */
    size_t work_inflight;

    /* Throttling: --max-server-eps (per-range buckets are in the ranges). */
    struct ps_tbucket tb;
    uint64_t throttled_total;
    /* Entity RPCs, arrival to reply (rt_ps_rpc_duration_seconds{method});
     * loop thread only. */
    struct rt_hist rpc_lat[PS_RPC_LAT__NR];

    /* Replication (ps_repl.c): the replica core and its glue. */
    struct ps_repl *repl;
    /* Catch-up of replicas outside the ISR (ps_learn.c). */
    struct ps_learn *learn;
    /* Corruption repair and scrub (ps_repair.c). */
    struct ps_repair *repair;
    /* Freezes of replicated ranges for their split (ps_split.c). */
    struct ps_split *split;
    /* Primaryship transfers (ps_transfer.c): ranges frozen for one. */
    struct ps_transfer *xfer;

    /* Range moves (ps_move*.c; the structs are in ps_move_int.h). */
    struct ps_move_out *moves_out;
    struct ps_move_in *moves_in;
    uint64_t span_seq; /* next span drop marker id */
    size_t span_drops; /* span drops queued or running */
    struct ps_move_counters
    {
        uint64_t out_done, out_failed, out_dropped;
        uint64_t in_done, in_aborted;
        uint64_t last_frozen_ms, last_snapshot_ms, last_entities;
    } mvc;

    /* Metrics (ps_http.c): a text snapshot rebuilt every second on the
     * loop, read by the HTTP thread under metrics_mu only. */
    struct ps_http *http;
    int http_port;
    uv_timer_t metrics_timer;
    int metrics_timer_init;
    uv_mutex_t metrics_mu;
    int metrics_mu_init;
    char *metrics_text; /* protected by metrics_mu */

    int stopping;
    char errmsg[256];
};

#endif
