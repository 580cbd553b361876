/* rt-frontend: flags, accounts, signals and the port file. The work
 * happens in fe_http's worker threads (each a libuv loop with its own
 * libmicrohttpd daemon and fe_route); this thread's loop only waits for
 * signals: SIGINT/SIGTERM stop, SIGHUP reloads the accounts file and
 * the HTTPS certificate and key. A reload reads and checks each whole
 * file first and puts the new accounts / certificate in service only if
 * it is valid; otherwise what is in service stays and the log says why
 * (file, line or mode; never a key). The two are independent: a bad
 * certificate does not hold back a good accounts file. The logic lives
 * in the `fe` library; this file only wires it. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include <uv.h>

#include "fe_acl.h"
#include "fe_auth.h"
#include "fe_cors.h"
#include "fe_http.h"
#include "fe_metrics.h"
#include "fe_tls.h"
#include "fe_xml.h"
#include "rt_addr.h"
#include "rt_config.h"
#include "rt_err.h"
#include "rt_log.h"
#include "rt_masters.h"
#include "rt_notify.h"
#include "rt_rpc.h"
#include "rt_tls.h"

struct fe_main
{
    uv_loop_t loop;
    uv_signal_t sigint;
    uv_signal_t sigterm;
    uv_signal_t sighup;
    uv_timer_t ready; /* until every worker has a map: READY=1 */
    struct fe_http *http;
    struct fe_metrics *metrics;
    struct fe_accounts_pub accounts;
    int dev_account;
    const char *accounts_file; /* NULL: none */
    const char *tls_cert;      /* NULL: no HTTPS */
    const char *tls_key;
    int stopping;
};

/* Ready for systemd (Type=notify) once listening and every worker can
 * route, i.e. has a partition map: requests before that would wait for
 * the master (or answer 503 while it is down). */
static void fe__ready_cb(uv_timer_t *t)
{
    struct fe_main *m = t->data;
    if (!fe_http_maps_ready(m->http)) {
        return;
    }
    uv_timer_stop(t);
    rt_notifyf("READY=1\nSTATUS=serving on port %d", fe_http_port(m->http));
    rt_log(RT_LOG_INFO, "partition map loaded: ready");
}

static void fe__on_signal(uv_signal_t *s, int signum)
{
    struct fe_main *m = s->data;
    if (m->stopping) {
        return;
    }
    m->stopping = 1;
    rt_log(RT_LOG_INFO, "signal %d: shutting down", signum);
    rt_notify("STOPPING=1");
    fe_http_stop(m->http);
    uv_close((uv_handle_t *)&m->sigint, NULL);
    uv_close((uv_handle_t *)&m->sigterm, NULL);
    uv_close((uv_handle_t *)&m->ready, NULL);
    uv_close((uv_handle_t *)&m->sighup, NULL);
}

/* A whole new account table: the development account if enabled, then
 * the file's. 0, or RT_ECONFIG with @errmsg set and @out empty. */
static int fe__accounts_build(const struct fe_main *m,
                              struct fe_accounts *out,
                              char *errmsg)
{
    fe_accounts_init(out);
    if (m->dev_account &&
        fe_accounts_add(out, FE_DEV_ACCOUNT, FE_DEV_KEY, NULL) != 0) {
        rt_errmsg_printf(errmsg, "cannot add the dev account");
        return RT_ECONFIG;
    }
    if (m->accounts_file &&
        fe_accounts_load(out, m->accounts_file, errmsg) != 0) {
        fe_accounts_free(out);
        return RT_ECONFIG;
    }
    if (out->n == 0) {
        rt_errmsg_printf(errmsg,
                         "no accounts (use --dev-account or --accounts)");
        return RT_ECONFIG;
    }
    return 0;
}

/* SIGHUP, certificate half: a valid new pair replaces the old one for
 * new connections (fe_http_reload_tls); a bad one is logged and ignored. */
static void fe__reload_tls(struct fe_main *m)
{
    struct fe_tls *tls;
    char errmsg[RT_ERRMSG_SIZE] = "";
    char what[300];
    if (!m->tls_cert) {
        return;
    }
    if (fe_tls_load(m->tls_cert, m->tls_key, &tls, errmsg) != 0) {
        rt_log(RT_LOG_ERROR, "SIGHUP: %s; the certificate in service stays",
               errmsg);
        return;
    }
    snprintf(what, sizeof(what), "%s serial %s (until %s)", tls->subject,
             tls->serial, tls->not_after);
    if (fe_http_reload_tls(m->http, tls) == 0) {
        rt_log(RT_LOG_INFO, "SIGHUP: HTTPS certificate %s for new connections",
               what);
    } else {
        rt_log(RT_LOG_DEBUG, "SIGHUP: HTTPS certificate %s unchanged", what);
    }
}

static void fe__on_sighup(uv_signal_t *s, int signum)
{
    struct fe_main *m = s->data;
    struct fe_accounts a;
    char errmsg[RT_ERRMSG_SIZE] = "";
    size_t n;
    (void)signum;
    if (m->stopping) {
        return;
    }
    fe__reload_tls(m);
    if (!m->accounts_file) {
        return;
    }
    if (fe__accounts_build(m, &a, errmsg) != 0) {
        rt_log(RT_LOG_ERROR, "SIGHUP: %s; the accounts in service stay",
               errmsg);
        return;
    }
    n = a.n;
    fe_accounts_publish(&m->accounts, &a);
    rt_log(RT_LOG_INFO, "SIGHUP: %zu account(s) from %s in service", n,
           m->accounts_file);
}

/* Each client connection is a descriptor: the soft open-file limit goes
 * up to the hard one, and a cap the limit cannot hold is lowered (with a
 * warning) rather than left to fail at accept(), where libmicrohttpd
 * would stop accepting altogether. 256 descriptors stay for the
 * partition-server and master links, logs and LMDB-free headroom. */
static void fe__raise_nofile(long *max_conns)
{
    struct rlimit rl;
    long room;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0) {
        return;
    }
    if (rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
        getrlimit(RLIMIT_NOFILE, &rl);
    }
    room = rl.rlim_cur == RLIM_INFINITY ? (1L << 30) : (long)rl.rlim_cur - 256;
    if (room < 64) {
        room = 64;
    }
    if (*max_conns == 0 || *max_conns > room) {
        if (*max_conns) {
            rt_log(RT_LOG_WARN,
                   "--max-connections %ld is above what the open-file "
                   "limit (%ld) allows: using %ld",
                   *max_conns, (long)rl.rlim_cur, room);
        }
        *max_conns = room;
    }
}

int main(int argc, char **argv)
{
    char *listen = NULL, *master = NULL, *accounts_file = NULL;
    char *https_listen = NULL, *tls_cert = NULL, *tls_key = NULL;
    struct fe_tls *tls = NULL;
    char *port_file = NULL, *log_level = NULL, *http = NULL;
    long threads = 0, max_body = 0, pool_kib = 0;
    long max_conns = 0, max_conns_ip = 0, reserve = 0, max_inflight = 0;
    long header_ms = 0, body_ms = 0, body_rate = 0, idle_ms = 0;
    int dev_account = 0, check_config = 0;
    char *cluster_tls = NULL;
    int insecure_rpc = 0;
    struct rt_tls *rpc_tls = NULL;
    struct rt_opt opts[] = {
        {"listen", RT_OPT_STR, &listen, "127.0.0.1:10002",
         "HTTP address for the Table REST API (port 0 = ephemeral; "
         "\"\" = no plain HTTP)"},
        {"https-listen", RT_OPT_STR, &https_listen, NULL,
         "HTTPS address for the same API (TLS 1.2+; needs --tls-cert and "
         "--tls-key; port 0 = ephemeral)"},
        {"tls-cert", RT_OPT_STR, &tls_cert, NULL,
         "PEM certificate chain for --https-listen, server certificate "
         "first (re-read on SIGHUP)"},
        {"tls-key", RT_OPT_STR, &tls_key, NULL,
         "PEM private key of --tls-cert, mode 600 (re-read on SIGHUP)"},
        {"master", RT_OPT_STR, &master, "127.0.0.1:10100",
         "rt-master RPC address, or the comma-separated addresses of "
         "several masters (the front end follows their leader)"},
        {"threads", RT_OPT_INT, &threads, "2",
         "worker threads (each: a libuv loop, a libmicrohttpd daemon and "
         "its own connections to the master and partition servers)"},
        {"dev-account", RT_OPT_BOOL, &dev_account, "true",
         "serve devstoreaccount1 with the emulator's well-known key"},
        {"accounts", RT_OPT_STR, &accounts_file, NULL,
         "file of 'name base64key1 [base64key2]' lines"},
        {"http", RT_OPT_STR, &http, "",
         "status listener host:port (GET /metrics in the Prometheus text "
         "format, GET /health), never the Table API port; empty = none, "
         "port 0 = ephemeral"},
        {"port-file", RT_OPT_STR, &port_file, NULL,
         "write 'http=PORT' and/or 'https=PORT' (and 'metrics=PORT' with "
         "--http) here once listening"},
        {"log-level", RT_OPT_STR, &log_level, "info", "debug|info|warn|error"},
        {"max-body", RT_OPT_INT, &max_body, "4194304",
         "largest request body in bytes (else 413 RequestBodyTooLarge)"},
        {"http-pool-kib", RT_OPT_INT, &pool_kib, "112",
         "libmicrohttpd's memory per connection, KiB (16..1024). 112 fits "
         "a 32 KiB URL and 64 KiB of headers, so oversized ones get our "
         "414 InvalidUri / 400; smaller costs less CPU per request "
         "(libmicrohttpd zeroes it after each one), and a request head "
         "that does not fit gets libmicrohttpd's bare 414/431"},
        {"check-config", RT_OPT_BOOL, &check_config, NULL,
         "parse and check the flags, the config file and the accounts "
         "file, then exit: 0 valid, 2 not (nothing is bound)"},
        {"max-connections", RT_OPT_INT, &max_conns, "4096",
         "client connections, all workers together (more are refused; 0 = "
         "no cap beyond the open-file limit)"},
        {"max-connections-per-ip", RT_OPT_INT, &max_conns_ip, "512",
         "client connections from one address (0 = no cap)"},
        {"connection-reserve", RT_OPT_INT, &reserve, "256",
         "above max-connections minus this, each new connection closes the "
         "oldest one that has not sent a whole request yet"},
        {"header-timeout-ms", RT_OPT_INT, &header_ms, "10000",
         "a request line and headers must arrive within this (from the "
         "accept for a new connection; 0 = no bound)"},
        {"body-timeout-ms", RT_OPT_INT, &body_ms, "20000",
         "a request body must arrive within this plus 1 s per "
         "--body-min-rate bytes received (0 = no bound)"},
        {"body-min-rate", RT_OPT_INT, &body_rate, "65536",
         "bytes per second a body may take beyond --body-timeout-ms"},
        {"idle-timeout-ms", RT_OPT_INT, &idle_ms, "30000",
         "a keep-alive connection idle this long between requests is "
         "closed (0 = never)"},
        {"max-inflight-per-account", RT_OPT_INT, &max_inflight, "1024",
         "requests of one account running at once; more get 503 "
         "ServerBusy (0 = no cap)"},
        RT_RPC_TLS_OPTS(cluster_tls, insecure_rpc),
        {NULL, 0, NULL, NULL, NULL},
    };
    struct fe_accounts accounts;
    struct fe_http_cfg cfg;
    struct fe_main m;
    char errmsg[RT_ERRMSG_SIZE] = "";
    size_t naccounts;
    int rc, exit_code = 0, metrics_port = 0;

    rt_config_parse("rt-frontend",
                    "rangetable front end: the Azure Table Storage REST API",
                    opts, argc, argv, NULL, 0);
    if (rt_log_init_flag("rt-frontend", "fe", log_level) != 0) {
        rt_config_free(opts);
        return 2;
    }
    if (threads < 1 || threads > 256 || max_body < 1024 || pool_kib < 16 ||
        pool_kib > 1024) {
        fprintf(stderr,
                "rt-frontend: --threads must be 1..256, --max-body at least "
                "1024 and --http-pool-kib 16..1024\n");
        rt_config_free(opts);
        return 2;
    }
    if (max_conns < 0 || max_conns_ip < 0 || reserve < 0 || header_ms < 0 ||
        body_ms < 0 || body_rate < 0 || idle_ms < 0 || max_inflight < 0 ||
        (max_conns && reserve >= max_conns)) {
        fprintf(stderr,
                "rt-frontend: the connection caps, timeouts and rates must "
                "be >= 0, and --connection-reserve below "
                "--max-connections\n");
        rt_config_free(opts);
        return 2;
    }
    /* Before the worker threads: they share the contexts read-only. */
    if (rt_rpc_tls_flags("rt-frontend", cluster_tls, insecure_rpc, &rpc_tls) !=
        0) {
        rt_config_free(opts);
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);
    fe__raise_nofile(&max_conns);
    /* libxml2's globals, once, before the worker threads parse. */
    fe_xml_init();

    memset(&m, 0, sizeof(m));
    m.dev_account = dev_account;
    m.accounts_file = accounts_file && *accounts_file ? accounts_file : NULL;
    if (fe__accounts_build(&m, &accounts, errmsg) != 0) {
        fprintf(stderr, "rt-frontend: %s\n", errmsg);
        rt_config_free(opts);
        return 2;
    }
    naccounts = accounts.n;
    if (https_listen && *https_listen) {
        if (!tls_cert || !*tls_cert || !tls_key || !*tls_key) {
            fprintf(stderr,
                    "rt-frontend: --https-listen needs --tls-cert "
                    "and --tls-key\n");
            fe_accounts_free(&accounts);
            rt_config_free(opts);
            return 2;
        }
        if (fe_tls_load(tls_cert, tls_key, &tls, errmsg) != 0) {
            fprintf(stderr, "rt-frontend: %s\n", errmsg);
            fe_accounts_free(&accounts);
            rt_config_free(opts);
            return 2;
        }
        m.tls_cert = tls_cert;
        m.tls_key = tls_key;
    } else if ((tls_cert && *tls_cert) || (tls_key && *tls_key)) {
        rt_log(RT_LOG_WARN,
               "--tls-cert/--tls-key without --https-listen: no HTTPS");
    }
    {
        struct rt_masters ms;
        struct sockaddr_storage ss;
        socklen_t sslen;
        const char *bad = NULL, *what = NULL;
        if (*listen && rt_addr_parse(listen, &ss, &sslen) != 0) {
            bad = listen, what = "--listen";
        } else if (https_listen && *https_listen &&
                   rt_addr_parse(https_listen, &ss, &sslen) != 0) {
            bad = https_listen, what = "--https-listen";
        } else if (*http && rt_addr_parse(http, &ss, &sslen) != 0) {
            bad = http, what = "--http";
        }
        if (bad) {
            fprintf(stderr,
                    "rt-frontend: %s: expected a numeric HOST:PORT, got "
                    "'%s'\n",
                    what, bad);
        } else if (rt_masters_init(&ms, master) != 0) {
            fprintf(stderr, "rt-frontend: bad --master address '%s'\n", master);
            bad = master;
        }
        if (bad || check_config) {
            if (!bad) {
                printf("rt-frontend: configuration OK (%zu account(s)%s)\n",
                       accounts.n, tls ? ", HTTPS certificate" : "");
            }
            fe_tls_release(tls);
            fe_accounts_free(&accounts);
            rt_config_free(opts);
            return bad ? 2 : 0;
        }
    }
    fe_accounts_pub_init(&m.accounts);
    fe_accounts_publish(&m.accounts, &accounts);

    uv_loop_init(&m.loop);
    memset(&cfg, 0, sizeof(cfg));
    cfg.listen = listen;
    cfg.https_listen = tls ? https_listen : NULL;
    cfg.tls = tls;
    cfg.master = master;
    cfg.threads = (unsigned)threads;
    cfg.max_body = (size_t)max_body;
    cfg.http_pool = (size_t)pool_kib * 1024;
    cfg.accounts = &m.accounts;
    cfg.guard.max_conns = (unsigned)max_conns;
    cfg.guard.max_conns_per_ip = (unsigned)max_conns_ip;
    cfg.guard.reserve = (unsigned)reserve;
    if (cfg.guard.reserve >= cfg.guard.max_conns) {
        cfg.guard.reserve = cfg.guard.max_conns / 16; /* cap was lowered */
    }
    cfg.guard.max_inflight_per_account = (unsigned)max_inflight;
    cfg.guard.header_timeout_ms = (uint64_t)header_ms;
    cfg.guard.body_timeout_ms = (uint64_t)body_ms;
    cfg.guard.body_min_rate = (uint64_t)body_rate;
    cfg.guard.idle_timeout_ms = (uint64_t)idle_ms;
    {
        /* The account label set is the accounts at start (metrics copies
         * the names); accounts a SIGHUP adds count as "_other". */
        const struct fe_accounts *a0 = fe_accounts_acquire(&m.accounts);
        m.metrics = fe_metrics_create(a0, cfg.threads);
        fe_accounts_release(a0);
    }
    cfg.metrics = m.metrics;
    if (*http && fe_metrics_listen(m.metrics, http, &metrics_port, errmsg)) {
        fprintf(stderr, "rt-frontend: %s\n", errmsg);
        fe_metrics_destroy(m.metrics);
        uv_loop_close(&m.loop);
        fe_tls_release(tls);
        fe_accounts_pub_fini(&m.accounts);
        rt_config_free(opts);
        return 2;
    }
    rc = fe_http_start(&cfg, &m.http);
    if (rc != 0) {
        fe_tls_release(tls);
        if (rc == RT_EINVAL) {
            fprintf(stderr, "rt-frontend: bad --master address '%s'\n", master);
        }
        fe_metrics_destroy(m.metrics);
        uv_loop_close(&m.loop);
        fe_accounts_pub_fini(&m.accounts);
        rt_config_free(opts);
        return rc == RT_EINVAL ? 2 : 1;
    }
    if (port_file && *port_file) {
        const char *keys[3];
        int ports[3], nports = 0;
        if (fe_http_port(m.http)) {
            keys[nports] = "http";
            ports[nports++] = fe_http_port(m.http);
        }
        if (fe_http_tls_port(m.http)) {
            keys[nports] = "https";
            ports[nports++] = fe_http_tls_port(m.http);
        }
        if (*http) {
            keys[nports] = "metrics";
            ports[nports++] = metrics_port;
        }
        rc = rt_write_port_file(port_file, keys, ports, nports);
        if (rc != 0) {
            rt_log(RT_LOG_ERROR, "cannot write port file %s: %s", port_file,
                   strerror(-rc));
            exit_code = 1;
        }
    }
    uv_signal_init(&m.loop, &m.sigint);
    uv_signal_init(&m.loop, &m.sigterm);
    m.sigint.data = &m;
    m.sigterm.data = &m;
    uv_signal_start(&m.sigint, fe__on_signal, SIGINT);
    uv_signal_start(&m.sigterm, fe__on_signal, SIGTERM);
    uv_signal_init(&m.loop, &m.sighup);
    m.sighup.data = &m;
    uv_signal_start(&m.sighup, fe__on_sighup, SIGHUP);
    if (fe_http_port(m.http)) {
        rt_log(RT_LOG_INFO,
               "listening on %s (port %d), master %s, %ld threads, "
               "%zu account(s)",
               listen, fe_http_port(m.http), master, threads, naccounts);
    } else {
        rt_log(RT_LOG_INFO,
               "plain HTTP off, master %s, %ld threads, %zu account(s)", master,
               threads, naccounts);
    }
    if (m.tls_cert) {
        rt_log(RT_LOG_INFO,
               "HTTPS on %s (port %d): certificate %s serial %s (until %s)",
               https_listen, fe_http_tls_port(m.http), tls->subject,
               tls->serial, tls->not_after);
    }
    fe_tls_release(tls); /* the server holds its own reference */
    uv_timer_init(&m.loop, &m.ready);
    m.ready.data = &m;
    uv_timer_start(&m.ready, fe__ready_cb, 0, 50);
    if (exit_code != 0) {
        fe__on_signal(&m.sigterm, SIGTERM);
    }

    uv_run(&m.loop, UV_RUN_DEFAULT);

    fe_http_destroy(m.http);       /* waits for the workers to drain */
    fe_metrics_destroy(m.metrics); /* after the workers: they write it */
    fe_acl_reset();
    fe_cors_reset();
    if (uv_loop_close(&m.loop) != 0) {
        rt_log(RT_LOG_WARN, "loop closed with handles still open");
    }
    fe_accounts_pub_fini(&m.accounts);
    rt_rpc_set_tls(NULL);
    rt_tls_free(rpc_tls);
    rt_config_free(opts);
    rt_log(RT_LOG_INFO, "stopped");
    return exit_code;
}
