/* rt-partition-server: flags, signals, the loop. Everything else is in the
 * ps library (ps_server.h). */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "ps_server.h"
#include "rt_addr.h"
#include "rt_config.h"
#include "rt_err.h"
#include "rt_log.h"
#include "rt_notify.h"
#include "rt_rpc.h"
#include "rt_tls.h"

static struct ps_server ps__server;
static uv_signal_t ps__sigint;
static uv_signal_t ps__sigterm;
static uv_signal_t ps__sighup;

static void ps__signal_cb(uv_signal_t *h, int signum)
{
    (void)h;
    rt_log(RT_LOG_INFO, "signal %d: shutting down", signum);
    rt_notify("STOPPING=1");
    uv_close((uv_handle_t *)&ps__sigint, NULL);
    uv_close((uv_handle_t *)&ps__sigterm, NULL);
    uv_close((uv_handle_t *)&ps__sighup, NULL);
    ps_server_stop(&ps__server);
}

/* `systemctl reload` sends SIGHUP to every daemon; a partition server has
 * nothing it can re-read (its credentials and flags take a restart), and
 * must not die of it: systemd would count that as a clean exit and not
 * restart it. */
static void ps__sighup_cb(uv_signal_t *h, int signum)
{
    (void)h;
    (void)signum;
    rt_log(RT_LOG_INFO,
           "SIGHUP: nothing to reload (flags and credentials take a "
           "restart: rtctl handover, then restart)");
}

int main(int argc, char **argv)
{
    char *listen = NULL, *advertise = NULL, *master = NULL, *data = NULL;
    char *zone = NULL;
    char *port_file = NULL, *log_level = NULL, *http = NULL;
    long max_pending = 0, map_size_mb = 0, group_wait_us = 0;
    long max_server_eps = 0, max_range_eps = 0, move_chunk_kb = 0;
    long repl_inflight = 0, read_wait_ms = 0, lease_ms = 0;
    long repl_hb_ms = 0, drift_ppm = 0;
    long ack_timeout_ms = 0, write_hold_ms = 0, heartbeat_ms = 0;
    long stall_timeout_ms = 0;
    long scrub_mb_s = 0, repl_window_mb = 0, repl_log_mb = 0;
    char *cluster_tls = NULL;
    int insecure_rpc = 0;
    struct rt_tls *tls = NULL;
    int check_config = 0;
    struct rt_opt opts[] = {
        {"listen", RT_OPT_STR, &listen, "127.0.0.1:0",
         "RPC listen address host:port (port 0 = ephemeral)"},
        {"advertise", RT_OPT_STR, &advertise, "",
         "address registered with the master, which front ends and the "
         "other partition servers dial: HOST:PORT, a numeric address or a "
         "DNS name (default: the listen address; required when that is "
         "0.0.0.0 or ::)"},
        {"check-config", RT_OPT_BOOL, &check_config, NULL,
         "parse and check the flags and the config file, then exit: 0 "
         "valid, 2 not (nothing is opened or bound)"},
        {"master", RT_OPT_STR, &master, "127.0.0.1:10100",
         "rt-master RPC address, or the comma-separated addresses of "
         "several masters (the server follows their leader)"},
        {"data", RT_OPT_STR, &data, NULL, "LMDB data directory (required)"},
        {"zone", RT_OPT_STR, &zone, "",
         "failure domain reported to the master (placement)"},
        {"port-file", RT_OPT_STR, &port_file, "",
         "write 'rpc=PORT' (and 'http=PORT') here after listening"},
        {"http", RT_OPT_STR, &http, "",
         "metrics HTTP listener host:port (GET /metrics, /health); "
         "empty = off"},
        {"max-server-eps", RT_OPT_INT, &max_server_eps, "0",
         "entities/s cap for the whole server, then ServerBusy (0 = none)"},
        {"max-range-eps", RT_OPT_INT, &max_range_eps, "0",
         "entities/s cap per range, then ServerBusy (0 = none)"},
        {"move-chunk-kb", RT_OPT_INT, &move_chunk_kb, "256",
         "size of the MIGRATE_DATA chunks a range move sends, KiB"},
        {"heartbeat-ms", RT_OPT_INT, &heartbeat_ms, "500",
         "PS_HEARTBEAT (loads, replica status) to the master this often, "
         "50..60000; the master's --failover-after-ms should span three"},
        {"repl-inflight", RT_OPT_INT, &repl_inflight, "32",
         "replication: appends sent to a peer and not yet acked, per range"},
        {"read-wait-ms", RT_OPT_INT, &read_wait_ms, "1000",
         "replication: how long a read waits for its data to be on every "
         "in-sync replica, then ServerBusy"},
        {"scrub-mb-per-s", RT_OPT_INT, &scrub_mb_s, "4",
         "verify this many MiB of stored values per second and repair "
         "corrupt ones of replicated ranges from a peer (0 = off)"},
        {"lease-ms", RT_OPT_INT, &lease_ms, "1500",
         "replication: L; a secondary refuses to seal its range this long "
         "after it last supported the primary's lease (and after start)"},
        {"repl-heartbeat-ms", RT_OPT_INT, &repl_hb_ms, "250",
         "replication: a primary asks its peers for lease support this "
         "often"},
        {"clock-drift-ppm", RT_OPT_INT, &drift_ppm, "1000",
         "replication: the clock rate error the lease bound allows, ppm"},
        {"ack-timeout-ms", RT_OPT_INT, &ack_timeout_ms, "1000",
         "replication: an in-sync replica with a write unacked this long "
         "is removed from the in-sync set (asked of the master)"},
        {"write-hold-ms", RT_OPT_INT, &write_hold_ms, "5000",
         "replication: a write waiting this long for its replicas is "
         "answered OperationTimedOut (outcome unknown)"},
        {"stall-timeout-ms", RT_OPT_INT, &stall_timeout_ms, "5000",
         "replication: a commit stuck this long (a stalled disk) fences "
         "this server: no lease support asked or granted, and its "
         "heartbeat asks the master to fail its primaries over"},
        {"repl-window-mb", RT_OPT_INT, &repl_window_mb, "64",
         "replication: MiB of groups a primary keeps for a replica that "
         "left the in-sync set, so that it can catch up from its LSN "
         "(1..65536)"},
        {"repl-log-mb", RT_OPT_INT, &repl_log_mb, "64",
         "replication: MiB of memory for the key log (which keys each "
         "recent group changed), for catch-ups by key (1..65536)"},
        {"max-pending", RT_OPT_INT, &max_pending, "20000",
         "queued write ops before answering ServerBusy"},
        {"group-wait-us", RT_OPT_INT, &group_wait_us, "1000",
         "adaptive group commit: wait at most this long (and at most half "
         "the last sync) for more writes before a sync, only while the "
         "queue is shallow and the last sync was recent (0..10000; 0 = "
         "off)"},
        {"map-size-mb", RT_OPT_INT, &map_size_mb, "4096",
         "LMDB map size (the most data this server can hold), MiB"},
        RT_RPC_TLS_OPTS(cluster_tls, insecure_rpc),
        {"log-level", RT_OPT_STR, &log_level, "info", "debug|info|warn|error"},
        {NULL, 0, NULL, NULL, NULL},
    };
    const char *summary =
        "rangetable partition server: serves the table ranges the master "
        "assigns, from one LMDB environment.";
    struct ps_config cfg;
    uv_loop_t loop;
    int rc, code = 0;

    rt_config_parse("rt-partition-server", summary, opts, argc, argv, NULL, 0);
    if (rt_log_init_flag("rt-partition-server", "ps", log_level) != 0) {
        rt_config_free(opts);
        return 2;
    }
    if (!*data) {
        fprintf(stderr,
                "rt-partition-server: --data DIR is required "
                "(try --help)\n");
        rt_config_free(opts);
        return 2;
    }
    if (repl_inflight < 1 || repl_inflight > 100000 || read_wait_ms < 1 ||
        read_wait_ms > 600000 || lease_ms < 1 || lease_ms > 600000 ||
        ack_timeout_ms < 1 || ack_timeout_ms > 600000 || write_hold_ms < 1 ||
        write_hold_ms > 600000 || lease_ms < 10 || repl_hb_ms < 1 ||
        repl_hb_ms > 600000 || drift_ppm < 0 || drift_ppm > 100000 ||
        repl_window_mb < 1 || repl_window_mb > 65536 || repl_log_mb < 1 ||
        repl_log_mb > 65536) {
        fprintf(stderr,
                "rt-partition-server: --repl-inflight 1..100000, "
                "--read-wait-ms, --lease-ms (10 and up), "
                "--repl-heartbeat-ms, --ack-timeout-ms and "
                "--write-hold-ms 1..600000, --clock-drift-ppm 0..100000, "
                "--repl-window-mb and --repl-log-mb 1..65536\n");
        rt_config_free(opts);
        return 2;
    }
    if (scrub_mb_s < 0 || scrub_mb_s > 4096) {
        fprintf(stderr, "rt-partition-server: --scrub-mb-per-s 0..4096\n");
        rt_config_free(opts);
        return 2;
    }
    if (stall_timeout_ms < 100 || stall_timeout_ms > 3600000) {
        fprintf(stderr,
                "rt-partition-server: --stall-timeout-ms must be "
                "100..3600000 (got %ld)\n",
                stall_timeout_ms);
        rt_config_free(opts);
        return 2;
    }
    if (heartbeat_ms < 50 || heartbeat_ms > 60000) {
        fprintf(stderr,
                "rt-partition-server: --heartbeat-ms must be 50..60000 "
                "(got %ld)\n",
                heartbeat_ms);
        rt_config_free(opts);
        return 2;
    }
    if (max_server_eps < 0 || max_range_eps < 0 || move_chunk_kb < 1 ||
        move_chunk_kb > 16384) {
        fprintf(stderr,
                "rt-partition-server: --max-server-eps and "
                "--max-range-eps must be 0 or positive, "
                "--move-chunk-kb 1..16384\n");
        rt_config_free(opts);
        return 2;
    }
    if (!rt_zone_valid(zone)) {
        fprintf(stderr,
                "rt-partition-server: --zone: at most %d of [A-Za-z0-9._-]\n",
                RT_ZONE_MAX);
        rt_config_free(opts);
        return 2;
    }
    if (group_wait_us < 0 || group_wait_us > 10000) {
        fprintf(stderr, "rt-partition-server: --group-wait-us: 0..10000\n");
        rt_config_free(opts);
        return 2;
    }
    if (max_pending < 1 || map_size_mb < 1) {
        fprintf(stderr,
                "rt-partition-server: --max-pending and "
                "--map-size-mb must be positive\n");
        rt_config_free(opts);
        return 2;
    }
    if (rt_rpc_tls_flags("rt-partition-server", cluster_tls, insecure_rpc,
                         &tls) != 0) {
        rt_config_free(opts);
        return 2;
    }
    {
        char host[256];
        int port;
        if (rt_addr_split(listen, host, sizeof(host), &port) != 0) {
            fprintf(stderr,
                    "rt-partition-server: --listen: expected HOST:PORT, got "
                    "'%s'\n",
                    listen);
            rt_config_free(opts);
            return 2;
        }
        if (*advertise ? rt_addr_dial_check(advertise, NULL, NULL) != 0
                       : (!strcmp(host, "0.0.0.0") || !strcmp(host, "::"))) {
            fprintf(stderr,
                    "rt-partition-server: --advertise: the HOST:PORT others "
                    "dial (a numeric address or a DNS name) is required "
                    "with a wildcard --listen; got '%s'\n",
                    advertise);
            rt_config_free(opts);
            return 2;
        }
    }
    if (check_config) {
        printf("rt-partition-server: configuration OK\n");
        rt_config_free(opts);
        return 0;
    }
    /* A peer that vanishes mid-write must not kill us. */
    signal(SIGPIPE, SIG_IGN);

    cfg.listen = listen;
    cfg.advertise = advertise;
    cfg.master = master;
    cfg.data = data;
    cfg.port_file = port_file;
    cfg.zone = zone;
    cfg.max_pending = (size_t)max_pending;
    cfg.group_wait_us = (uint32_t)group_wait_us;
    cfg.map_size = (size_t)map_size_mb * 1024 * 1024;
    cfg.max_server_eps = (uint64_t)max_server_eps;
    cfg.max_range_eps = (uint64_t)max_range_eps;
    cfg.http = http;
    cfg.move_chunk = (size_t)move_chunk_kb * 1024;
    cfg.repl_inflight = (uint32_t)repl_inflight;
    cfg.read_wait_ms = (uint32_t)read_wait_ms;
    cfg.lease_ms = (uint32_t)lease_ms;
    cfg.repl_hb_ms = (uint32_t)repl_hb_ms;
    cfg.drift_ppm = (uint32_t)drift_ppm;
    cfg.ack_timeout_ms = (uint32_t)ack_timeout_ms;
    cfg.write_hold_ms = (uint32_t)write_hold_ms;
    cfg.heartbeat_ms = (uint32_t)heartbeat_ms;
    cfg.stall_timeout_ms = (uint32_t)stall_timeout_ms;
    cfg.scrub_mb_s = (uint32_t)scrub_mb_s;
    cfg.repl_window_mb = (uint32_t)repl_window_mb;
    cfg.repl_log_mb = (uint32_t)repl_log_mb;

    rc = uv_loop_init(&loop);
    if (rc != 0) {
        fprintf(stderr, "rt-partition-server: uv_loop_init: %s\n",
                uv_strerror(rc));
        rt_config_free(opts);
        return 1;
    }
    /* Until the loop's handler is in place, a SIGHUP must not end it. */
    signal(SIGHUP, SIG_IGN);
    uv_signal_init(&loop, &ps__sigint);
    uv_signal_init(&loop, &ps__sigterm);
    uv_signal_init(&loop, &ps__sighup);
    rc = ps_server_start(&ps__server, &loop, &cfg);
    if (rc != 0) {
        rt_log(RT_LOG_ERROR, "start failed: %s", ps__server.errmsg);
        uv_close((uv_handle_t *)&ps__sigint, NULL);
        uv_close((uv_handle_t *)&ps__sigterm, NULL);
        uv_close((uv_handle_t *)&ps__sighup, NULL);
        ps_server_stop(&ps__server);
        /* 2: the data directory is unusable (a truncated data.mdb, ...);
         * restarting will not help, the operator must act. */
        code = rc == RT_ECORRUPT ? 2 : 1;
    } else {
        uv_signal_start(&ps__sigint, ps__signal_cb, SIGINT);
        uv_signal_start(&ps__sigterm, ps__signal_cb, SIGTERM);
        uv_signal_start(&ps__sighup, ps__sighup_cb, SIGHUP);
    }
    uv_run(&loop, UV_RUN_DEFAULT);
    ps_server_close(&ps__server);
    rc = uv_loop_close(&loop);
    if (rc != 0) {
        rt_log(RT_LOG_WARN, "loop closed with handles open: %s",
               uv_strerror(rc));
    }
    if (code == 0) {
        rt_log(RT_LOG_INFO, "stopped");
    }
    rt_rpc_set_tls(NULL);
    rt_tls_free(tls);
    rt_config_free(opts);
    return code;
}
