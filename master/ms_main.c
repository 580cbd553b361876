/* rt-master: flags, signals and the loop; the logic is in libms. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <uv.h>

#include "ms_admin.h"
#include "ms_auth.h"
#include "ms_catalog.h"
#include "ms_events.h"
#include "ms_http.h"
#include "ms_master.h"
#include "ms_node.h"
#include "ms_policy.h"
#include "ms_status.h"
#include "ms_trace_rec.h"
#include "ms_util.h"
#include "rt_addr.h"
#include "rt_config.h"
#include "rt_err.h"
#include "rt_log.h"
#include "rt_notify.h"
#include "rt_rpc.h"
#include "rt_tls.h"

#define MS_SUMMARY                                                       \
    "rangetable master: table catalog, partition map, partition-server " \
    "liveness, load balancing (split / merge / move), the status and "   \
    "admin API and the dashboard (GET /, /api/status, /api/events, "     \
    "/metrics)."

/* Masters in --peers at most (Raft groups of 3 or 5 are the point). */
#define MS__MAX_PEERS 9

struct ms_main
{
    struct ms_node *n;
    struct ms_auth *auth;
    uv_signal_t sigint;
    uv_signal_t sigterm;
    uv_signal_t sighup;
};

/* SIGHUP: read the admin token file again (rotation). */
static void ms__sighup_cb(uv_signal_t *h, int signum)
{
    struct ms_main *mm = h->data;
    char errmsg[RT_ERRMSG_SIZE];
    (void)signum;
    if (!ms_auth_has_token(mm->auth)) {
        rt_log(RT_LOG_INFO, "SIGHUP: no --admin-token-file to reload");
    } else if (ms_auth_reload(mm->auth, errmsg) != 0) {
        rt_log(RT_LOG_ERROR, "SIGHUP: %s; the previous admin token stays",
               errmsg);
    } else {
        rt_log(RT_LOG_INFO, "SIGHUP: admin token reloaded");
    }
}

static void ms__signal_cb(uv_signal_t *h, int signum)
{
    struct ms_main *mm = h->data;
    rt_log(RT_LOG_INFO, "signal %d: shutting down", signum);
    rt_notify("STOPPING=1\nSTATUS=stopping (a leader hands over first)");
    ms_node_stop(mm->n);
    uv_close((uv_handle_t *)&mm->sigint, NULL);
    uv_close((uv_handle_t *)&mm->sigterm, NULL);
    uv_close((uv_handle_t *)&mm->sighup, NULL);
}

static int ms__hostport(const char *flag,
                        const char *addr,
                        char *host,
                        size_t hostlen,
                        int *port)
{
    if (rt_addr_split(addr, host, hostlen, port) != 0) {
        fprintf(stderr, "rt-master: --%s: expected HOST:PORT, got '%s'\n", flag,
                addr);
        return -1;
    }
    return 0;
}

/* @bind (flag --@bflag) is what this master binds; @adv (--@aflag) what
 * the others dial. A wildcard bind (0.0.0.0, ::) is nothing a peer can
 * dial, so it needs an advertised address; one given must be dialable (a
 * numeric address or a DNS name, a port other than 0), and a bound port 0
 * cannot be advertised (the port is known only once bound). */
static int ms__check_advertise(const char *bflag,
                               const char *bind,
                               const char *aflag,
                               const char *adv)
{
    char host[256];
    int port;

    if (rt_addr_split(bind, host, sizeof(host), &port) != 0) {
        fprintf(stderr, "rt-master: --%s: expected HOST:PORT, got '%s'\n",
                bflag, bind);
        return -1;
    }
    if (*adv) {
        if (rt_addr_dial_check(adv, NULL, NULL) != 0 ||
            strlen(adv) >= MS_RAFT_ADDR_SIZE) {
            fprintf(stderr,
                    "rt-master: --%s: expected HOST:PORT (a numeric address "
                    "or a DNS name, port 1..65535), got '%s'\n",
                    aflag, adv);
            return -1;
        }
        if (port == 0) {
            fprintf(stderr, "rt-master: --%s needs a fixed port in --%s\n",
                    aflag, bflag);
            return -1;
        }
        return 0;
    }
    if (!strcmp(host, "0.0.0.0") || !strcmp(host, "::")) {
        fprintf(stderr,
                "rt-master: --%s %s binds every address: say which one the "
                "others dial with --%s HOST:PORT\n",
                bflag, bind, aflag);
        return -1;
    }
    return 0;
}

/* "ID=HOST:PORT,..." into @out (at most MS__MAX_PEERS, ids distinct). */
static int ms__parse_peers(const char *list,
                           struct ms_raft_peer *out,
                           size_t *n)
{
    const char *p = list;
    *n = 0;
    while (p && *p) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        char item[128], host[64], *eq, *num_end;
        unsigned long long pid;
        int port;
        if (len == 0 || len >= sizeof(item) || *n == MS__MAX_PEERS) {
            goto bad;
        }
        memcpy(item, p, len);
        item[len] = 0;
        eq = strchr(item, '=');
        if (!eq) {
            goto bad;
        }
        *eq = 0;
        pid = strtoull(item, &num_end, 10);
        if (*num_end || pid == 0 ||
            rt_addr_split(eq + 1, host, sizeof(host), &port) != 0 ||
            port <= 0 || strlen(eq + 1) >= MS_RAFT_ADDR_SIZE) {
            goto bad;
        }
        for (size_t i = 0; i < *n; i++) {
            if (out[i].id == pid) {
                goto bad;
            }
        }
        out[*n].id = pid;
        snprintf(out[*n].addr, sizeof(out[*n].addr), "%s", eq + 1);
        (*n)++;
        p = end ? end + 1 : NULL;
    }
    return 0;
bad:
    fprintf(stderr,
            "rt-master: --peers: expected ID=HOST:PORT,... (distinct ids "
            ">= 1, at most %d), got '%s'\n",
            MS__MAX_PEERS, list);
    return -1;
}

int main(int argc, char **argv)
{
    char *listen = NULL, *http = NULL, *data = NULL, *port_file = NULL;
    char *log_level = NULL;
    long hb_timeout = 0;
    long delete_grace = 0;
    char *policy = NULL, *policy_opt = NULL;
    long split_eps = 0, split_busy = 0, split_sustain = 0, split_cool = 0;
    long split_max = 0, hot_exit = 0, move_tol = 0, move_min = 0;
    long move_gain = 0, move_cool = 0, server_cool = 0, max_moves = 0;
    long merge_eps = 0, merge_sustain = 0, merge_max_mb = 0;
    long merge_after_split = 0, load_tau = 0, events_max = 0;
    long rf = 0, min_insync = 0;
    long failover_after = 0, reconnect_grace = 0, seal_wait = 0, lease = 0;
    long learner_timeout = 0, rereplicate_after = 0, max_rereplications = 0;
    long learner_mbps = 0;
    long id = 0, election_ms = 0, heartbeat_ms = 0, snap_threshold = 0;
    long snap_trailing = 0;
    int bootstrap = 0, join = 0;
    char *peers = NULL, *raft_listen = NULL;
    char *trace_path = NULL;
    struct ms_trace_rec *trace = NULL;
    char *advertise = NULL, *http_advertise = NULL, *raft_advertise = NULL;
    int check_config = 0;
    char *token_file = NULL;
    int admin_insecure = 0, status_open = 0;
    char *cluster_tls = NULL;
    int insecure_rpc = 0;
    struct rt_tls *tls = NULL;
    struct rt_opt opts[] = {
        {"id", RT_OPT_INT, &id, "1",
         "this master's id among the masters (>= 1; never reused for "
         "another disk)"},
        {"peers", RT_OPT_STR, &peers, "",
         "the initial masters' raft addresses ID=HOST:PORT,... (this one "
         "included); empty: a single master. Read only to bootstrap an "
         "empty data directory"},
        {"raft-listen", RT_OPT_STR, &raft_listen, "127.0.0.1:10102",
         "raft transport address HOST:PORT to bind (port 0: ephemeral)"},
        {"raft-advertise", RT_OPT_STR, &raft_advertise, "",
         "the raft address the other masters dial, HOST:PORT (a name or "
         "another IP; must match this member's entry in --peers); empty: "
         "--raft-listen"},
        {"bootstrap", RT_OPT_BOOL, &bootstrap, NULL,
         "with --peers: bootstrap a new cluster on an empty data directory "
         "(each initial master, once)"},
        {"join", RT_OPT_BOOL, &join, NULL,
         "start with an empty data directory and wait to be added "
         "(rtctl master add)"},
        {"raft-election-ms", RT_OPT_INT, &election_ms, "500",
         "raft election timeout (randomised up to twice this)"},
        {"raft-heartbeat-ms", RT_OPT_INT, &heartbeat_ms, "100",
         "raft heartbeat period"},
        {"raft-snapshot-threshold", RT_OPT_INT, &snap_threshold, "1024",
         "raft entries between snapshots of the catalog"},
        {"raft-snapshot-trailing", RT_OPT_INT, &snap_trailing, "128",
         "raft entries kept after a snapshot"},
        {"listen", RT_OPT_STR, &listen, "127.0.0.1:10100",
         "RPC listen address HOST:PORT (port 0: ephemeral)"},
        {"advertise", RT_OPT_STR, &advertise, "",
         "the RPC address partition servers, front ends, tools and the "
         "other masters dial, HOST:PORT (published in the masters list "
         "and NotLeader hints); empty: --listen"},
        {"http", RT_OPT_STR, &http, "127.0.0.1:10101",
         "status HTTP API address HOST:PORT (empty: off)"},
        {"http-advertise", RT_OPT_STR, &http_advertise, "",
         "the status API address clients are redirected to (307) and "
         "rtctl finds in the masters list, HOST:PORT; empty: --http"},
        {"check-config", RT_OPT_BOOL, &check_config, NULL,
         "parse and check the flags and the config file, then exit: 0 "
         "valid, 2 not (nothing is opened or bound)"},
        {"admin-token-file", RT_OPT_STR, &token_file, "",
         "file holding the admin token (>= 32 random bytes, hex or "
         "base64; mode 0600 or stricter; re-read on SIGHUP): every HTTP "
         "endpoint but /health then needs Authorization: Bearer TOKEN"},
        {"status-open", RT_OPT_BOOL, &status_open, NULL,
         "serve the read-only endpoints (/api/status, /api/history, "
         "/api/events, /metrics) without the token; actions still need it"},
        {"admin-insecure", RT_OPT_BOOL, &admin_insecure, NULL,
         "without --admin-token-file: serve every endpoint, actions "
         "included, to anyone who can reach --http (old setups only)"},
        {"data", RT_OPT_STR, &data, "./rt-data/master",
         "data directory (catalog LMDB)"},
        {"heartbeat-timeout-ms", RT_OPT_INT, &hb_timeout, "3000",
         "mark a partition server down after this long without heartbeat"},
        {"delete-grace-ms", RT_OPT_INT, &delete_grace, "30000",
         "a deleted table's name cannot be created again for this long "
         "(409 TableBeingDeleted); 0: no grace period"},
        {"replication-factor", RT_OPT_INT, &rf, "3",
         "copies of each new table's range (1..8), on distinct servers "
         "(distinct zones while there are enough)"},
        {"min-insync", RT_OPT_INT, &min_insync, NULL,
         "in-sync copies a range's writes need, and live servers a table "
         "creation needs; at most --replication-factor (default: "
         "min(2, RF))"},
        {"failover-after-ms", RT_OPT_INT, &failover_after, "1500",
         "a replicated range's primary silent this long (no heartbeat) is "
         "suspected and its range fails over"},
        {"reconnect-grace-ms", RT_OPT_INT, &reconnect_grace, "300",
         "... or this long after its connection closed without a "
         "heartbeat since"},
        {"seal-wait-ms", RT_OPT_INT, &seal_wait, "200",
         "after the first sealed secondary answered, wait this long for "
         "the others before choosing the new primary"},
        {"lease-ms", RT_OPT_INT, &lease, "1500",
         "the partition servers' --lease-ms (must match): a secondary "
         "refuses a seal this long after its last append, and no server "
         "is suspected before failover-after + lease after a start"},
        {"learner-timeout-ms", RT_OPT_INT, &learner_timeout, "30000",
         "a learner not in sync this long after its add committed is "
         "taken out of the replica set again (or longer for a large "
         "range: see --learner-min-mb-per-s)"},
        {"learner-min-mb-per-s", RT_OPT_INT, &learner_mbps, "20",
         "the slowest copy rate a learner is given time for: a range of "
         "B MB waits max(learner-timeout, 10 s + B / this) (1..100000)"},
        {"rereplicate-after-ms", RT_OPT_INT, &rereplicate_after, "60000",
         "a replica whose server is silent this long is replaced: a "
         "learner on another server, then the dead replica is removed"},
        {"max-rereplications", RT_OPT_INT, &max_rereplications, "2",
         "learners being built at once, cluster-wide (1..1000)"},
        {"policy", RT_OPT_STR, &policy, "default",
         "load-balancing policy: default | none (never splits, merges or "
         "moves by itself; rtctl still can) | crdb (CockroachDB's "
         "load-based splitting, store rebalancer and merge queue; "
         "master/README.md)"},
        {"policy-opt", RT_OPT_STR, &policy_opt, "",
         "the policy's own parameters, KEY=VALUE[,KEY=VALUE...] (crdb: "
         "interval_ms, threshold_pct, min_diff, split_balance_pct, "
         "split_min_samples, hot_ranges); the --split-*, --move-*, "
         "--merge-* and --max-moves flags apply to every policy"},
        {"split-eps", RT_OPT_INT, &split_eps, "2000",
         "split a range whose demand (entities/s + refused requests/s) "
         "stays at or above this (or above 90% of its server's "
         "--max-range-eps when lower)"},
        {"split-busy-pct", RT_OPT_INT, &split_busy, "0",
         "... or whose execution time stays above this % of wall time "
         "with at least split-eps/4 (0: ignore; synced writes keep a "
         "writer busy at any rate, so this is off by default)"},
        {"split-sustain-ms", RT_OPT_INT, &split_sustain, "1500",
         "... for this long (hot since)"},
        {"split-cooldown-ms", RT_OPT_INT, &split_cool, "3000",
         "a range made by a split or merge may not split sooner"},
        {"split-max-ranges", RT_OPT_INT, &split_max, "64",
         "no split when the table has this many ranges"},
        {"hot-exit-pct", RT_OPT_INT, &hot_exit, "70",
         "hysteresis: a hot range stays hot until its demand drops below "
         "this % of the threshold"},
        {"move-tolerance-pct", RT_OPT_INT, &move_tol, "25",
         "move ranges off a server whose demand exceeds the mean of the "
         "live servers by this %"},
        {"move-min-eps", RT_OPT_INT, &move_min, "500",
         "... and by at least this many entities/s"},
        {"move-gain-pct", RT_OPT_INT, &move_gain, "10",
         "a move must lower the larger of source and target by this %"},
        {"move-cooldown-ms", RT_OPT_INT, &move_cool, "10000",
         "a moved range does not move again sooner"},
        {"server-cooldown-ms", RT_OPT_INT, &server_cool, "2000",
         "a server that took part in a move is left alone this long"},
        {"max-moves", RT_OPT_INT, &max_moves, "2",
         "moves in flight at most (policy and drains)"},
        {"merge-eps", RT_OPT_INT, &merge_eps, "50",
         "merge two adjacent ranges on one server both below this "
         "demand ..."},
        {"merge-sustain-ms", RT_OPT_INT, &merge_sustain, "60000",
         "... for this long ..."},
        {"merge-max-mb", RT_OPT_INT, &merge_max_mb, "256",
         "... holding at most this many MiB together ..."},
        {"merge-after-split-ms", RT_OPT_INT, &merge_after_split, "300000",
         "... and not within this long of a split involving them"},
        {"load-tau-ms", RT_OPT_INT, &load_tau, "1500",
         "time constant of the load smoothing (EWMA)"},
        {"events-max", RT_OPT_INT, &events_max, "10000",
         "events kept in memory for GET /api/events (all are appended to "
         "DATA/events.jsonl)"},
        {"trace", RT_OPT_STR, &trace_path, "",
         "record a load trace (docs/TRACE.md) into this file while this "
         "master leads; an existing file is renamed FILE.N first"},
        {"port-file", RT_OPT_STR, &port_file, NULL,
         "write rpc=PORT and http=PORT lines here once listening"},
        {"log-level", RT_OPT_STR, &log_level, "info", "debug|info|warn|error"},
        {"cluster-tls", RT_OPT_STR, &cluster_tls, "",
         "directory with this node's cluster credentials (ca.crt, "
         "node.crt, node.key of a master:NAME certificate; rtctl cluster "
         "init): every RPC connection and the raft traffic between masters "
         "is mutual TLS (raft takes only master certificates)"},
        {"insecure-rpc", RT_OPT_BOOL, &insecure_rpc, NULL,
         "run the cluster RPC and raft without --cluster-tls: "
         "unauthenticated and unencrypted (a trusted loopback only)"},
        {0},
    };
    char rpc_host[256], http_host[256], errmsg[RT_ERRMSG_SIZE] = "";
    int rpc_port, http_port = 0, rc, exit_code = 1;
    struct ms_master_config cfg = {0};
    struct ms_status *status = NULL;
    struct ms_admin *admin = NULL;
    struct ms_http *httpd = NULL;
    struct ms_main mm = {0};
    struct ms_node_config ncfg = {0};
    struct ms_events *events = NULL;
    struct ms_raft_peer peer_v[MS__MAX_PEERS];
    size_t npeers = 0;
    char http_addr[300] = "";
    uv_loop_t loop;

    rt_config_parse("rt-master", MS_SUMMARY, opts, argc, argv, NULL, 0);
    if (rt_log_init_flag("rt-master", "ms", log_level) != 0) {
        goto bad_flags;
    }
    if (ms__hostport("listen", listen, rpc_host, sizeof(rpc_host), &rpc_port) !=
            0 ||
        (*http && ms__hostport("http", http, http_host, sizeof(http_host),
                               &http_port) != 0)) {
        goto bad_flags;
    }
    if (id < 1 || election_ms < 50 || election_ms > 60000 ||
        heartbeat_ms < 10 || heartbeat_ms >= election_ms ||
        snap_threshold < 1 || snap_trailing < 0) {
        fprintf(stderr,
                "rt-master: --id must be >= 1, --raft-election-ms 50..60000, "
                "--raft-heartbeat-ms 10..(election - 1), "
                "--raft-snapshot-threshold >= 1\n");
        goto bad_flags;
    }
    if (ms__parse_peers(peers, peer_v, &npeers) != 0) {
        goto bad_flags;
    }
    if (ms__check_advertise("listen", listen, "advertise", advertise) != 0 ||
        (*http && ms__check_advertise("http", http, "http-advertise",
                                      http_advertise) != 0) ||
        ms__check_advertise("raft-listen", raft_listen, "raft-advertise",
                            raft_advertise) != 0) {
        goto bad_flags;
    }
    if (npeers > 0 && !join && *raft_advertise) {
        /* Every member bootstraps the same configuration, so its own
         * entry is what it tells the others. (Without --raft-advertise the
         * entry may differ from --raft-listen: a proxy in front, as the
         * fault harness does.) */
        for (size_t i = 0; i < npeers; i++) {
            if (peer_v[i].id == (uint64_t)id &&
                strcmp(peer_v[i].addr, raft_advertise) != 0) {
                fprintf(stderr,
                        "rt-master: --peers names member %ld at %s but "
                        "--raft-advertise says %s\n",
                        id, peer_v[i].addr, raft_advertise);
                goto bad_flags;
            }
        }
    }
    if (npeers > 0 && !join) {
        bool self = false;
        for (size_t i = 0; i < npeers; i++) {
            self = self || peer_v[i].id == (uint64_t)id;
        }
        if (!self) {
            fprintf(stderr, "rt-master: --peers must include --id %ld\n", id);
            goto bad_flags;
        }
    }
    if (hb_timeout <= 0 || hb_timeout > 3600 * 1000) {
        fprintf(stderr, "rt-master: --heartbeat-timeout-ms: out of range\n");
        goto bad_flags;
    }
    if (delete_grace < 0 || delete_grace > 7L * 24 * 3600 * 1000) {
        fprintf(stderr, "rt-master: --delete-grace-ms: out of range\n");
        goto bad_flags;
    }
    if (!*data) {
        fprintf(stderr, "rt-master: --data is required\n");
        goto bad_flags;
    }
    if (rf < 1 || rf > MS_REPLICAS_MAX) {
        fprintf(stderr, "rt-master: --replication-factor: must be 1..%d\n",
                MS_REPLICAS_MAX);
        goto bad_flags;
    }
    if (min_insync == 0) {
        min_insync = rf < 2 ? rf : 2;
    }
    if (failover_after <= 0 || failover_after > 3600 * 1000 ||
        reconnect_grace <= 0 || reconnect_grace > 3600 * 1000 ||
        seal_wait <= 0 || seal_wait > 3600 * 1000 || lease <= 0 ||
        lease > 3600 * 1000 || learner_timeout <= 0 ||
        learner_timeout > 3600 * 1000) {
        fprintf(stderr,
                "rt-master: --failover-after-ms, --reconnect-grace-ms, "
                "--seal-wait-ms, --lease-ms and --learner-timeout-ms must "
                "be 1..3600000\n");
        goto bad_flags;
    }
    if (learner_mbps <= 0 || learner_mbps > 100000) {
        fprintf(stderr,
                "rt-master: --learner-min-mb-per-s must be 1..100000\n");
        goto bad_flags;
    }
    if (rereplicate_after <= 0 || rereplicate_after > 7 * 24 * 3600 * 1000L ||
        max_rereplications <= 0 || max_rereplications > 1000) {
        fprintf(stderr,
                "rt-master: --rereplicate-after-ms must be 1..604800000 and "
                "--max-rereplications 1..1000\n");
        goto bad_flags;
    }
    if (min_insync < 1 || min_insync > rf) {
        fprintf(stderr,
                "rt-master: --min-insync %ld: must be 1..%ld (at most "
                "--replication-factor)\n",
                min_insync, rf);
        goto bad_flags;
    }
    {
        const long *nonneg[] = {
            &split_eps, &split_busy,    &split_sustain, &split_cool,
            &split_max, &hot_exit,      &move_tol,      &move_min,
            &move_gain, &move_cool,     &server_cool,   &max_moves,
            &merge_eps, &merge_sustain, &merge_max_mb,  &merge_after_split,
            &load_tau,  &events_max};
        for (size_t i = 0; i < sizeof(nonneg) / sizeof(nonneg[0]); i++) {
            if (*nonneg[i] < 0 || *nonneg[i] > 1000L * 1000 * 1000) {
                fprintf(stderr, "rt-master: policy flags must be >= 0\n");
                goto bad_flags;
            }
        }
        if (split_eps == 0 || split_max < 2 || hot_exit > 100 ||
            split_busy > 1000 || move_gain > 100 || events_max == 0 ||
            load_tau == 0) {
            fprintf(stderr,
                    "rt-master: --split-eps, --events-max and "
                    "--load-tau-ms must be > 0, --split-max-ranges >= 2, "
                    "--hot-exit-pct and --move-gain-pct <= 100\n");
            goto bad_flags;
        }
    }
    if (rt_rpc_tls_flags("rt-master", cluster_tls, insecure_rpc, &tls) != 0) {
        goto bad_flags;
    }
    {
        /* An unknown policy or option is a bad flag (exit 2), not a
         * leader that cannot start its session. */
        struct ms_policy_config pc;
        struct ms_policy probe;
        char perr[RT_ERRMSG_SIZE];
        ms_policy_config_default(&pc);
        pc.opts = policy_opt;
        if (ms_policy_create_msg(policy, &pc, &probe, perr) != 0) {
            fprintf(stderr, "rt-master: --policy / --policy-opt: %s\n", perr);
            goto bad_flags;
        }
        ms_policy_destroy(&probe);
    }
    /* Before anything that needs freeing: a bad token file is a bad
     * flag (exit 2). */
    rc = ms_auth_create(token_file, admin_insecure != 0, status_open != 0,
                        &mm.auth, errmsg);
    if (rc) {
        rt_log(RT_LOG_ERROR, "cannot start: %s", errmsg);
        goto bad_flags;
    }
    if (*token_file && admin_insecure) {
        rt_log(RT_LOG_WARN,
               "--admin-insecure ignored: --admin-token-file "
               "is given, the token is required");
    } else if (*http && !*token_file && admin_insecure) {
        rt_log(RT_LOG_WARN,
               "--admin-insecure: anyone who can reach %s may split, move, "
               "drain and change the masters; use --admin-token-file",
               http);
    } else if (*http && !*token_file) {
        rt_log(RT_LOG_WARN,
               "no --admin-token-file: admin actions%s are refused (403)",
               status_open ? "" : " and the status");
    }
    if (check_config) {
        printf("rt-master: configuration OK\n");
        ms_auth_destroy(mm.auth);
        rt_config_free(opts);
        return 0;
    }
    signal(SIGPIPE, SIG_IGN);
    /* Until the loop's handler is in place (after the member started), a
     * SIGHUP meant as "reload the token" must not end the process. */
    signal(SIGHUP, SIG_IGN);
    uv_loop_init(&loop);

    cfg.data_dir = data;
    cfg.listen_host = rpc_host;
    cfg.listen_port = rpc_port;
    cfg.heartbeat_timeout_ms = (uint32_t)hb_timeout;
    cfg.delete_grace_ms = (uint64_t)delete_grace;
    cfg.policy = policy;
    cfg.policy_cfg.split_eps = (double)split_eps;
    cfg.policy_cfg.split_busy_pct = (unsigned)split_busy;
    cfg.policy_cfg.split_sustain_ms = (uint32_t)split_sustain;
    cfg.policy_cfg.split_cooldown_ms = (uint32_t)split_cool;
    cfg.policy_cfg.split_max_ranges = (unsigned)split_max;
    cfg.policy_cfg.hot_exit_pct = (unsigned)hot_exit;
    cfg.policy_cfg.move_tolerance_pct = (unsigned)move_tol;
    cfg.policy_cfg.move_min_eps = (double)move_min;
    cfg.policy_cfg.move_gain_pct = (unsigned)move_gain;
    cfg.policy_cfg.move_cooldown_ms = (uint32_t)move_cool;
    cfg.policy_cfg.server_cooldown_ms = (uint32_t)server_cool;
    cfg.policy_cfg.max_moves = (unsigned)max_moves;
    cfg.policy_cfg.merge_eps = (double)merge_eps;
    cfg.policy_cfg.merge_sustain_ms = (uint32_t)merge_sustain;
    cfg.policy_cfg.merge_max_bytes = (uint64_t)merge_max_mb << 20;
    cfg.policy_cfg.merge_after_split_ms = (uint32_t)merge_after_split;
    cfg.policy_cfg.opts = policy_opt;
    cfg.load_tau_ms = (uint32_t)load_tau;
    cfg.events_cap = (size_t)events_max;
    cfg.replication_factor = (uint32_t)rf;
    cfg.min_insync = (uint32_t)min_insync;
    cfg.failover_after_ms = (uint64_t)failover_after;
    cfg.reconnect_grace_ms = (uint64_t)reconnect_grace;
    cfg.seal_wait_ms = (uint64_t)seal_wait;
    cfg.lease_ms = (uint64_t)lease;
    cfg.learner_timeout_ms = (uint64_t)learner_timeout;
    cfg.learner_min_mb_per_s = (uint64_t)learner_mbps;
    cfg.rereplicate_after_ms = (uint64_t)rereplicate_after;
    cfg.max_rereplications = (uint32_t)max_rereplications;
    status = ms_status_create();
    admin = ms_admin_create();
    /* Like the partition server, a master starts in a data directory
     * that does not exist yet; the event log is the first file in it. */
    if (ms_mkdir_p(data) != 0) {
        rt_log(RT_LOG_ERROR, "cannot start: mkdir %s: %s", data,
               strerror(errno));
        goto out_loop;
    }
    rc = ms_events_open(data, cfg.events_cap, &events, errmsg);
    if (rc) {
        rt_log(RT_LOG_ERROR, "cannot start: %s", errmsg);
        goto out_loop;
    }
    rc = ms_trace_rec_create(data, trace_path, &trace, errmsg);
    if (rc) {
        rt_log(RT_LOG_ERROR, "cannot start: %s", errmsg);
        goto out_loop;
    }
    cfg.trace = trace;
    if (*http) {
        rc = ms_http_start(http_host, http_port, status, events, admin, mm.auth,
                           &httpd, errmsg);
        if (rc) {
            rt_log(RT_LOG_ERROR, "cannot start: %s", errmsg);
            goto out_loop;
        }
        ms_http_set_trace(httpd, trace);
        snprintf(http_addr, sizeof(http_addr), "%s:%d", http_host,
                 ms_http_port(httpd));
    }
    ncfg.master = cfg;
    ncfg.http_listen = http_addr;
    ncfg.http_addr = *http_advertise ? http_advertise : http_addr;
    ncfg.rpc_advertise = advertise;
    ncfg.raft_advertise = raft_advertise;
    ncfg.id = (uint64_t)id;
    ncfg.raft_listen = raft_listen;
    ncfg.peers = peer_v;
    ncfg.npeers = npeers;
    ncfg.bootstrap = bootstrap != 0;
    ncfg.join = join != 0;
    ncfg.election_ms = (unsigned)election_ms;
    ncfg.heartbeat_ms = (unsigned)heartbeat_ms;
    ncfg.snapshot_threshold = (unsigned)snap_threshold;
    ncfg.snapshot_trailing = (unsigned)snap_trailing;
    ncfg.tls = tls;
    ncfg.argc = argc;
    ncfg.argv = argv;
    rc = ms_node_start(&loop, &ncfg, events, status, admin, &mm.n, errmsg);
    if (rc) {
        rt_log(RT_LOG_ERROR, "cannot start: %s", errmsg);
        goto out_loop;
    }
    if (*port_file) {
        const char *keys[3] = {"rpc", "raft", "http"};
        int ports[3] = {ms_node_rpc_port(mm.n), 0,
                        httpd ? ms_http_port(httpd) : 0};
        char rh[256];
        if (rt_addr_split(ms_node_raft_addr(mm.n), rh, sizeof(rh), &ports[1]) !=
            0) {
            ports[1] = 0;
        }
        rc = rt_write_port_file(port_file, keys, ports, httpd ? 3 : 2);
        if (rc) {
            rt_log(RT_LOG_ERROR, "cannot write port file %s: %s", port_file,
                   strerror(-rc));
            goto out_master;
        }
    }
    uv_signal_init(&loop, &mm.sigint);
    uv_signal_init(&loop, &mm.sigterm);
    uv_signal_init(&loop, &mm.sighup);
    mm.sigint.data = mm.sigterm.data = mm.sighup.data = &mm;
    uv_signal_start(&mm.sigint, ms__signal_cb, SIGINT);
    uv_signal_start(&mm.sigterm, ms__signal_cb, SIGTERM);
    uv_signal_start(&mm.sighup, ms__sighup_cb, SIGHUP);
    /* A re-executed member starts with these blocked (see ms_node); one
     * that arrived meanwhile is delivered now, to the handlers above. */
    sigset_t stop;
    sigemptyset(&stop);
    sigaddset(&stop, SIGINT);
    sigaddset(&stop, SIGTERM);
    pthread_sigmask(SIG_UNBLOCK, &stop, NULL);
    rt_log(RT_LOG_INFO, "rt-master ready: rpc port %d, http port %d, raft %s",
           ms_node_rpc_port(mm.n), httpd ? ms_http_port(httpd) : 0,
           ms_node_raft_addr(mm.n));
    /* Raft has started and the RPC port listens: systemd (Type=notify) may
     * start what is ordered after us. Whether this member leads is its
     * status page's business, not readiness: a follower serves too (it
     * redirects and answers NotLeader with the leader's address). */
    rt_notify("READY=1"); /* STATUS= lines follow the role (ms_node) */

    uv_run(&loop, UV_RUN_DEFAULT);
    exit_code = 0;

out_master:
    /* The HTTP thread first: it reads the status the master publishes. */
    ms_http_stop(httpd);
    httpd = NULL;
    ms_node_stop(mm.n);
    uv_run(&loop, UV_RUN_DEFAULT);
    ms_node_destroy(mm.n);
out_loop:
    ms_http_stop(httpd);
    uv_run(&loop, UV_RUN_DEFAULT); /* let failed listeners close */
    ms_trace_rec_destroy(trace);   /* its end record, once nothing leads */
    ms_events_close(events);
    ms_status_destroy(status);
    ms_admin_destroy(admin);
    ms_auth_destroy(mm.auth);
    if (uv_loop_close(&loop) != 0) {
        rt_log(RT_LOG_WARN, "loop closed with handles still open");
    }
    rt_log(RT_LOG_INFO, "rt-master exiting (%d)", exit_code);
    rt_rpc_set_tls(NULL);
    rt_tls_free(tls);
    rt_config_free(opts);
    return exit_code;

bad_flags: /* the message is out already */
    rt_config_free(opts);
    return 2;
}
