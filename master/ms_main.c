/* rt-master: flags, signals and the loop; the logic is in libms. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "ms_http.h"
#include "ms_master.h"
#include "ms_status.h"
#include "rt_config.h"
#include "rt_err.h"
#include "rt_log.h"

#define MS_SUMMARY                                                       \
    "rangetable master: table catalog, partition map, partition-server " \
    "liveness and the status API (GET /health, /api/status, /metrics)."

struct ms_main
{
    struct ms_master *m;
    uv_signal_t sigint;
    uv_signal_t sigterm;
};

static void ms__signal_cb(uv_signal_t *h, int signum)
{
    struct ms_main *mm = h->data;
    rt_log(RT_LOG_INFO, "signal %d: shutting down", signum);
    ms_master_stop(mm->m);
    uv_close((uv_handle_t *)&mm->sigint, NULL);
    uv_close((uv_handle_t *)&mm->sigterm, NULL);
}

static int ms__hostport(const char *flag,
                        const char *addr,
                        char *host,
                        size_t hostlen,
                        int *port)
{
    if (rt_split_hostport(addr, host, hostlen, port) != 0) {
        fprintf(stderr, "rt-master: --%s: expected HOST:PORT, got '%s'\n", flag,
                addr);
        return -1;
    }
    /* "[::1]:10100" */
    if (host[0] == '[') {
        size_t n = strlen(host);
        if (n >= 2 && host[n - 1] == ']') {
            memmove(host, host + 1, n - 2);
            host[n - 2] = '\0';
        }
    }
    return 0;
}

int main(int argc, char **argv)
{
    char *listen = NULL, *http = NULL, *data = NULL, *port_file = NULL;
    char *log_level = NULL;
    long hb_timeout = 0;
    long delete_grace = 0;
    struct rt_opt opts[] = {
        {"listen", RT_OPT_STR, &listen, "127.0.0.1:10100",
         "RPC listen address HOST:PORT (port 0: ephemeral)"},
        {"http", RT_OPT_STR, &http, "127.0.0.1:10101",
         "status HTTP API address HOST:PORT (empty: off)"},
        {"data", RT_OPT_STR, &data, "./rt-data/master",
         "data directory (catalog LMDB)"},
        {"heartbeat-timeout-ms", RT_OPT_INT, &hb_timeout, "3000",
         "mark a partition server down after this long without heartbeat"},
        {"delete-grace-ms", RT_OPT_INT, &delete_grace, "30000",
         "a deleted table's name cannot be created again for this long "
         "(409 TableBeingDeleted); 0: no grace period"},
        {"port-file", RT_OPT_STR, &port_file, NULL,
         "write rpc=PORT and http=PORT lines here once listening"},
        {"log-level", RT_OPT_STR, &log_level, "info", "debug|info|warn|error"},
        {0},
    };
    char rpc_host[256], http_host[256], errmsg[RT_ERRMSG_SIZE] = "";
    int rpc_port, http_port = 0, level, rc, exit_code = 1;
    struct ms_master_config cfg = {0};
    struct ms_status *status = NULL;
    struct ms_http *httpd = NULL;
    struct ms_main mm = {0};
    uv_loop_t loop;

    rt_config_parse("rt-master", MS_SUMMARY, opts, argc, argv, NULL, 0);
    level = rt_log_level_parse(log_level);
    if (level < 0) {
        fprintf(stderr, "rt-master: --log-level: unknown level '%s'\n",
                log_level);
        rt_config_free(opts);
        return 2;
    }
    rt_log_init("ms", (enum rt_log_level)level);
    if (ms__hostport("listen", listen, rpc_host, sizeof(rpc_host), &rpc_port) !=
            0 ||
        (*http && ms__hostport("http", http, http_host, sizeof(http_host),
                               &http_port) != 0)) {
        rt_config_free(opts);
        return 2;
    }
    if (hb_timeout <= 0 || hb_timeout > 3600 * 1000) {
        fprintf(stderr, "rt-master: --heartbeat-timeout-ms: out of range\n");
        rt_config_free(opts);
        return 2;
    }
    if (delete_grace < 0 || delete_grace > 7L * 24 * 3600 * 1000) {
        fprintf(stderr, "rt-master: --delete-grace-ms: out of range\n");
        rt_config_free(opts);
        return 2;
    }
    if (!*data) {
        fprintf(stderr, "rt-master: --data is required\n");
        rt_config_free(opts);
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);
    uv_loop_init(&loop);

    cfg.data_dir = data;
    cfg.listen_host = rpc_host;
    cfg.listen_port = rpc_port;
    cfg.heartbeat_timeout_ms = (uint32_t)hb_timeout;
    cfg.delete_grace_ms = (uint64_t)delete_grace;
    rc = ms_master_start(&loop, &cfg, &mm.m, errmsg);
    if (rc) {
        rt_log(RT_LOG_ERROR, "cannot start: %s", errmsg);
        goto out_loop;
    }
    status = ms_status_create();
    ms_master_set_status(mm.m, status);
    if (*http) {
        rc = ms_http_start(http_host, http_port, status, &httpd, errmsg);
        if (rc) {
            rt_log(RT_LOG_ERROR, "cannot start: %s", errmsg);
            goto out_master;
        }
    }
    if (*port_file) {
        const char *keys[2] = {"rpc", "http"};
        int ports[2] = {ms_master_rpc_port(mm.m),
                        httpd ? ms_http_port(httpd) : 0};
        rc = rt_write_port_file(port_file, keys, ports, httpd ? 2 : 1);
        if (rc) {
            rt_log(RT_LOG_ERROR, "cannot write port file %s: %s", port_file,
                   strerror(-rc));
            goto out_master;
        }
    }
    uv_signal_init(&loop, &mm.sigint);
    uv_signal_init(&loop, &mm.sigterm);
    mm.sigint.data = mm.sigterm.data = &mm;
    uv_signal_start(&mm.sigint, ms__signal_cb, SIGINT);
    uv_signal_start(&mm.sigterm, ms__signal_cb, SIGTERM);
    rt_log(RT_LOG_INFO, "rt-master ready: rpc port %d, http port %d",
           ms_master_rpc_port(mm.m), httpd ? ms_http_port(httpd) : 0);

    uv_run(&loop, UV_RUN_DEFAULT);
    exit_code = 0;

out_master:
    /* The HTTP thread first: it reads the status the master publishes. */
    ms_http_stop(httpd);
    ms_master_stop(mm.m);
    uv_run(&loop, UV_RUN_DEFAULT);
    ms_master_destroy(mm.m);
    ms_status_destroy(status);
out_loop:
    uv_run(&loop, UV_RUN_DEFAULT); /* let failed listeners close */
    if (uv_loop_close(&loop) != 0) {
        rt_log(RT_LOG_WARN, "loop closed with handles still open");
    }
    rt_log(RT_LOG_INFO, "rt-master exiting (%d)", exit_code);
    rt_config_free(opts);
    return exit_code;
}
