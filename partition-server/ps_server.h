/* Server: one partition server process — the libuv loop thread with its
 * RPC listener (front ends) and master link, the writer thread, the store
 * and the set of owned ranges. ps_main.c only parses flags and runs it.
 *
 * Thread: everything here runs on the loop thread, except the writer
 * thread's work inside ps_writer/ps_store.
 *
 * Lifecycle: ps_server_start(); uv_run(); on a signal ps_server_stop(),
 * which lets the loop run dry; after uv_run returns, ps_server_close(). */
#ifndef PS_SERVER_H
#define PS_SERVER_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "ps_range.h"
#include "ps_store.h"
#include "ps_writer.h"
#include "rt_rpc.h"

/* Strings are borrowed for the server's life. */
struct ps_config
{
    const char *listen;      /* "host:port" (port 0 = ephemeral) */
    const char *advertise;   /* "" = the actual listen address */
    const char *master;      /* "host:port" of rt-master */
    const char *data;        /* LMDB directory */
    const char *port_file;   /* "" = none */
    size_t max_pending;      /* queued write ops before RT_EBUSY */
    size_t map_size;         /* LMDB map size in bytes */
    uint64_t max_server_eps; /* entities/s for the whole server; 0 = none */
    uint64_t max_range_eps;  /* entities/s per range; 0 = none */
    const char *http;        /* metrics "host:port"; NULL or "" = off */
    size_t move_chunk;       /* MIGRATE_DATA body target; 0 = 256 KiB */
};

/* Heartbeat period (SKELETON-PLAN flow 1). */
#define PS_HEARTBEAT_MS 1000
/* Timeout of register/heartbeat calls to the master. */
#define PS_MASTER_CALL_MS 3000
/* Most ops one ENTITY_WRITE may carry (a $batch has at most 100). */
#define PS_MAX_OPS_PER_WRITE 1000

struct ps_server
{
    uv_loop_t *loop;
    struct ps_config cfg;
    struct ps_store *store;
    struct ps_writer *writer;
    struct ps_ranges ranges;
    struct rt_rpc_server *rpc;
    int port;           /* actual RPC port */
    char addr[320];     /* advertised "host:port" */
    uint64_t server_id; /* 0 until the master gives one */

    /* Master link (ps_master.c). */
    struct rt_rpc_client *master;
    uv_timer_t hb_timer;
    int hb_timer_init;
    int registered;
    int register_inflight;
    int hb_inflight;

    /* uv_queue_work requests out (scans, count scans, move snapshots);
     * the store must not close before they are back (ps_server_close
     * waits). */
    size_t work_inflight;

    /* Throttling: --max-server-eps (per-range buckets are in the ranges). */
    struct ps_tbucket tb;
    uint64_t throttled_total;

    /* Range moves (ps_move.c). */
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

/* Opens the store, restores server id and ranges from its meta, starts the
 * writer, listens, writes the port file and starts the master link.
 * Returns 0, or an error with ps->errmsg set; on error call
 * ps_server_stop(), run the loop, then ps_server_close(). */
int ps_server_start(struct ps_server *ps,
                    uv_loop_t *loop,
                    const struct ps_config *cfg);
/* Stops everything: the master link, then the writer (queued writes finish
 * and are answered), then the listener. Idempotent. */
void ps_server_stop(struct ps_server *ps);
/* After the loop has run dry (or once the handles are closed: it runs the
 * loop until every threadpool request is back): frees ranges and closes
 * the store. */
void ps_server_close(struct ps_server *ps);

/* Request dispatcher for every connection, the front ends' and the
 * master's (ps_rpc.c). @ud is the struct ps_server. */
void ps_rpc_on_request(struct rt_rpc_conn *conn,
                       uint32_t method,
                       uint64_t id,
                       const uint8_t *body,
                       size_t len,
                       void *ud);

/* Master link (ps_master.c): connect, register, heartbeat, and the
 * master's ASSIGN_RANGES / DROP_TABLE requests. */
int ps_master_start(struct ps_server *ps);
void ps_master_stop(struct ps_server *ps);
void ps_master_on_assign(struct ps_server *ps,
                         struct rt_rpc_conn *conn,
                         uint64_t id,
                         const uint8_t *body,
                         size_t len);
void ps_master_on_drop(struct ps_server *ps,
                       struct rt_rpc_conn *conn,
                       uint64_t id,
                       const uint8_t *body,
                       size_t len);

/* Range moves (ps_move.c, docs/DESIGN-moves.md). */
struct ps_move_out;
struct ps_move_in;
/* Restores what a previous run left: ranges frozen for a move (they stay
 * frozen until an assignment settles them), ranges being received, and
 * unfinished span drops. After the writer started. */
int ps_move_start(struct ps_server *ps);
/* Server stopping: moves in progress end (their MOVE_OUT is answered
 * RT_EBUSY); nothing is unfrozen (a persisted freeze survives). */
void ps_move_stop(struct ps_server *ps);
/* Frees what is left; after every threadpool request is back. */
void ps_move_close(struct ps_server *ps);
/* MOVE_OUT, MOVE_ABORT, MOVE_DONE, MIGRATE_BEGIN/DATA/END. */
void ps_move_on_request(struct ps_server *ps,
                        struct rt_rpc_conn *conn,
                        uint32_t method,
                        uint64_t id,
                        const uint8_t *body,
                        size_t len);
/* A new assignment was just applied (ps_ranges_set): settles frozen
 * ranges (see README "Moves"), ends moves whose range went away, and
 * forgets received ranges that are now served. @registration: it came
 * with a PS_REGISTER reply (a new session with the master). */
void ps_move_assigned(struct ps_server *ps, int registration);
/* Name of the state of the move of @range_id out of this server ("sync",
 * "begin", "snapshot", "tail", "freeze", "final", "done"), or NULL. */
const char *ps_move_out_state(const struct ps_server *ps, uint64_t range_id);
/* Appends the move metrics (Prometheus text). */
void ps_move_metrics(const struct ps_server *ps, struct rt_buf *out);

#endif
