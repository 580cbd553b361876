/* Front-end metrics: per-worker shards, the scrape that sums them and the
 * status listener (the contract is in fe_metrics.h). */
#include "fe_metrics.h"

#include <inttypes.h>
#include <microhttpd.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "fe_auth.h"
#include "rt_addr.h"
#include "rt_alloc.h"
#include "rt_buf.h"
#include "rt_err.h"
#include "rt_http.h"
#include "rt_log.h"
#include "rt_metrics.h"

#define FE__OP_NAME(e, s) s,
static const char *const fe__op_names[FE_MOP__NR] = {
    FE_METRICS_OPS(FE__OP_NAME)};

static const int fe__codes[] = {FE_METRICS_CODES};
#define FE__NCODES (sizeof(fe__codes) / sizeof(fe__codes[0]))
/* The last code slot is "other". */
#define FE__CODE_SLOTS (FE__NCODES + 1)
/* Status classes of the latency histograms: 1xx-2xx, 3xx, 4xx, 5xx. */
#define FE__CLASSES 4
static const char *const fe__classes[FE__CLASSES] = {"2xx", "3xx", "4xx",
                                                     "5xx"};

static const char *const fe__rpc_errs[FE_MRPC__NR] = {
    "timeout", "connection", "not_sent", "busy", "stale", "canceled", "other"};
static const char *const fe__master_kinds[FE_MMASTER__NR] = {
    "table", "list_tables", "service", "get_map"};

struct fe__srv
{
    _Atomic uint64_t id; /* 0 = free; set once by the writer */
    struct rt_hist h;
};

struct fe_metrics_shard
{
    /* Indexed [account][op][code slot] and [account][op][class]. */
    rt_ctr *req;
    struct rt_hist *lat;
    rt_ctr *body_in; /* [account] */
    rt_ctr *body_out;
    rt_ctr begun, ended;
    rt_ctr conn_opened, conn_closed;
    struct fe__srv srv[FE_METRICS_SERVERS];
    struct rt_hist srv_other;
    rt_ctr rpc_err[FE_MRPC__NR];
    rt_ctr master[FE_MMASTER__NR][2]; /* [kind][0 ok, 1 error] */
    struct rt_hist master_lat;
    rt_ctr map_version; /* written by the worker, read by the scrape */
    const struct fe_metrics *m;
};

struct fe_metrics
{
    char (*acct)[FE_ACCOUNT_NAME_MAX + 1];
    size_t nacct; /* named accounts; slot nacct is "_other" */
    struct fe_metrics_shard **shards;
    unsigned nshards;
    struct MHD_Daemon *d;
};

/* ---- Label indexes ---- */

static size_t fe__acct_of(const struct fe_metrics *m, const char *name)
{
    if (name) {
        for (size_t i = 0; i < m->nacct; i++) {
            if (strcmp(m->acct[i], name) == 0) {
                return i;
            }
        }
    }
    return m->nacct;
}

static size_t fe__code_slot(int status)
{
    for (size_t i = 0; i < FE__NCODES; i++) {
        if (fe__codes[i] == status) {
            return i;
        }
    }
    return FE__NCODES;
}

static size_t fe__class_of(int status)
{
    if (status < 300) {
        return 0;
    }
    if (status < 400) {
        return 1;
    }
    return status < 500 ? 2 : 3;
}

enum fe_metrics_op fe_metrics_op_of(const char *name,
                                    const char *method,
                                    int if_match)
{
    /* PUT and MERGE without If-Match are the upserts (fe_op.h). */
    int upsert = !if_match;
    if (!name) {
        return method && strcmp(method, "OPTIONS") == 0 ? FE_MOP_PREFLIGHT
                                                        : FE_MOP_UNKNOWN;
    }
    for (int i = 0; i < FE_MOP_PREFLIGHT; i++) {
        if (strcmp(fe__op_names[i], name) == 0) {
            if (i == FE_MOP_UPDATE_ENTITY && upsert) {
                return FE_MOP_INSERT_OR_REPLACE;
            }
            if (i == FE_MOP_MERGE_ENTITY && upsert) {
                return FE_MOP_INSERT_OR_MERGE;
            }
            return (enum fe_metrics_op)i;
        }
    }
    return FE_MOP_UNKNOWN;
}

/* ---- Create / destroy ---- */

struct fe_metrics *fe_metrics_create(const struct fe_accounts *accounts,
                                     unsigned nshards)
{
    struct fe_metrics *m = rt_xcalloc(1, sizeof(*m));
    size_t na;
    m->nacct = accounts ? accounts->n : 0;
    if (m->nacct > FE_METRICS_ACCOUNTS) {
        m->nacct = FE_METRICS_ACCOUNTS;
    }
    m->acct = rt_xcalloc(m->nacct + 1, sizeof(*m->acct));
    for (size_t i = 0; i < m->nacct; i++) {
        snprintf(m->acct[i], sizeof(m->acct[i]), "%s", accounts->v[i].name);
    }
    na = m->nacct + 1;
    m->nshards = nshards;
    m->shards = rt_xcalloc(nshards, sizeof(*m->shards));
    for (unsigned i = 0; i < nshards; i++) {
        /* Each shard its own allocation, so two workers never write to
         * one cache line. */
        struct fe_metrics_shard *s = rt_xcalloc(1, sizeof(*s));
        s->req = rt_xcalloc(na * FE_MOP__NR * FE__CODE_SLOTS, sizeof(rt_ctr));
        s->lat = rt_xcalloc(na * FE_MOP__NR * FE__CLASSES, sizeof(*s->lat));
        s->body_in = rt_xcalloc(na, sizeof(rt_ctr));
        s->body_out = rt_xcalloc(na, sizeof(rt_ctr));
        s->m = m;
        m->shards[i] = s;
    }
    return m;
}

void fe_metrics_destroy(struct fe_metrics *m)
{
    if (!m) {
        return;
    }
    if (m->d) {
        MHD_stop_daemon(m->d);
    }
    for (unsigned i = 0; i < m->nshards; i++) {
        struct fe_metrics_shard *s = m->shards[i];
        free(s->req);
        free(s->lat);
        free(s->body_in);
        free(s->body_out);
        free(s);
    }
    free(m->shards);
    free(m->acct);
    free(m);
}

struct fe_metrics_shard *fe_metrics_shard(struct fe_metrics *m, unsigned i)
{
    return m && i < m->nshards ? m->shards[i] : NULL;
}

/* ---- Writers ---- */

void fe_metrics_conn(struct fe_metrics_shard *s, int open)
{
    if (s) {
        rt_ctr_add(open ? &s->conn_opened : &s->conn_closed, 1);
    }
}

void fe_metrics_req_begin(struct fe_metrics_shard *s)
{
    if (s) {
        rt_ctr_add(&s->begun, 1);
    }
}

void fe_metrics_req_end(struct fe_metrics_shard *s)
{
    if (s) {
        rt_ctr_add(&s->ended, 1);
    }
}

void fe_metrics_req_done(struct fe_metrics_shard *s,
                         const char *account,
                         enum fe_metrics_op op,
                         int status,
                         uint64_t in,
                         uint64_t out,
                         uint64_t us)
{
    size_t a;
    if (!s) {
        return;
    }
    a = fe__acct_of(s->m, account);
    rt_ctr_add(
        &s->req[(a * FE_MOP__NR + op) * FE__CODE_SLOTS + fe__code_slot(status)],
        1);
    rt_hist_observe(
        &s->lat[(a * FE_MOP__NR + op) * FE__CLASSES + fe__class_of(status)],
        us);
    rt_ctr_add(&s->body_in[a], in);
    rt_ctr_add(&s->body_out[a], out);
}

static enum fe_metrics_rpc_err fe__rpc_err(int status)
{
    switch (status) {
        case RT_ETIMEDOUT:
            return FE_MRPC_TIMEOUT;
        case RT_ENOCONN:
            return FE_MRPC_CONN;
        case RT_ENOTSENT:
            return FE_MRPC_NOTSENT;
        case RT_EBUSY:
            return FE_MRPC_BUSY;
        case RT_ESTALE:
        case RT_ENOTPRIMARY:
            return FE_MRPC_STALE;
        case RT_ECANCELED:
            return FE_MRPC_CANCELED;
        default:
            return FE_MRPC_OTHER;
    }
}

void fe_metrics_rpc(struct fe_metrics_shard *s,
                    uint64_t server_id,
                    int status,
                    uint64_t us)
{
    struct rt_hist *h;
    if (!s) {
        return;
    }
    h = &s->srv_other;
    for (size_t i = 0; i < FE_METRICS_SERVERS; i++) {
        uint64_t id = atomic_load_explicit(&s->srv[i].id, memory_order_relaxed);
        if (id == server_id) {
            h = &s->srv[i].h;
            break;
        }
        if (id == 0 && server_id != 0) {
            /* Claim the slot; the scrape sees the id (release) before it
             * reads the histogram. */
            atomic_store_explicit(&s->srv[i].id, server_id,
                                  memory_order_release);
            h = &s->srv[i].h;
            break;
        }
    }
    rt_hist_observe(h, us);
    if (status != 0) {
        rt_ctr_add(&s->rpc_err[fe__rpc_err(status)], 1);
    }
}

void fe_metrics_master(struct fe_metrics_shard *s,
                       enum fe_metrics_master kind,
                       int status,
                       uint64_t us)
{
    if (!s) {
        return;
    }
    rt_ctr_add(&s->master[kind][status != 0], 1);
    rt_hist_observe(&s->master_lat, us);
}

void fe_metrics_map_version(struct fe_metrics_shard *s, uint64_t version)
{
    if (s) {
        atomic_store_explicit(&s->map_version, version, memory_order_relaxed);
    }
}

/* ---- Scrape ---- */

static void fe__labels(struct rt_buf *l, const char *acct, const char *op)
{
    rt_buf_reset(l);
    rt_buf_append_str(l, "account=\"");
    rt_metrics_label(l, acct);
    rt_buf_printf(l, "\",operation=\"%s\"", op);
}

static const char *fe__acct_name(const struct fe_metrics *m, size_t a)
{
    return a < m->nacct ? m->acct[a] : "_other";
}

/* Requests by account, operation and status; latency by status class. */
static void fe__write_requests(struct fe_metrics *m, struct rt_buf *b)
{
    size_t na = m->nacct + 1;
    struct rt_buf l = RT_BUF_INIT;

    rt_metrics_help(b, "rt_fe_requests_total", "counter",
                    "Table API requests answered, by account, operation and "
                    "HTTP status.");
    for (size_t a = 0; a < na; a++) {
        for (size_t op = 0; op < FE_MOP__NR; op++) {
            for (size_t c = 0; c < FE__CODE_SLOTS; c++) {
                uint64_t v = 0;
                size_t ix = (a * FE_MOP__NR + op) * FE__CODE_SLOTS + c;
                for (unsigned w = 0; w < m->nshards; w++) {
                    v += rt_ctr_get(&m->shards[w]->req[ix]);
                }
                if (v == 0) {
                    continue;
                }
                fe__labels(&l, fe__acct_name(m, a), fe__op_names[op]);
                if (c < FE__NCODES) {
                    rt_buf_printf(&l, ",status=\"%d\"", fe__codes[c]);
                } else {
                    rt_buf_append_str(&l, ",status=\"other\"");
                }
                rt_buf_printf(b, "rt_fe_requests_total{%s} %" PRIu64 "\n",
                              rt_buf_cstr(&l), v);
            }
        }
    }
    rt_metrics_help(b, "rt_fe_request_duration_seconds", "histogram",
                    "Time from a request's headers to its response queued, "
                    "by account, operation and status class.");
    for (size_t a = 0; a < na; a++) {
        for (size_t op = 0; op < FE_MOP__NR; op++) {
            for (size_t c = 0; c < FE__CLASSES; c++) {
                struct rt_hist_sum s;
                size_t ix = (a * FE_MOP__NR + op) * FE__CLASSES + c;
                memset(&s, 0, sizeof(s));
                for (unsigned w = 0; w < m->nshards; w++) {
                    rt_hist_add_to(&m->shards[w]->lat[ix], &s);
                }
                if (s.count == 0) {
                    continue;
                }
                fe__labels(&l, fe__acct_name(m, a), fe__op_names[op]);
                rt_buf_printf(&l, ",status_class=\"%s\"", fe__classes[c]);
                rt_metrics_hist(b, "rt_fe_request_duration_seconds",
                                rt_buf_cstr(&l), &s);
            }
        }
    }
    for (int dir = 0; dir < 2; dir++) {
        const char *name = dir ? "rt_fe_response_body_bytes_total"
                               : "rt_fe_request_body_bytes_total";
        rt_metrics_help(b, name, "counter",
                        dir ? "Response body bytes sent, by account."
                            : "Request body bytes received, by account.");
        for (size_t a = 0; a < na; a++) {
            uint64_t v = 0;
            for (unsigned w = 0; w < m->nshards; w++) {
                v += rt_ctr_get(dir ? &m->shards[w]->body_out[a]
                                    : &m->shards[w]->body_in[a]);
            }
            rt_buf_reset(&l);
            rt_metrics_label(&l, fe__acct_name(m, a));
            rt_buf_printf(b, "%s{account=\"%s\"} %" PRIu64 "\n", name,
                          rt_buf_cstr(&l), v);
        }
    }
    rt_buf_free(&l);
}

/* RPC latency per partition server (ids merged across workers). */
static void fe__write_rpc(struct fe_metrics *m, struct rt_buf *b)
{
    uint64_t ids[FE_METRICS_SERVERS];
    struct rt_hist_sum sums[FE_METRICS_SERVERS], other;
    size_t n = 0;

    memset(sums, 0, sizeof(sums));
    memset(&other, 0, sizeof(other));
    for (unsigned w = 0; w < m->nshards; w++) {
        struct fe_metrics_shard *s = m->shards[w];
        rt_hist_add_to(&s->srv_other, &other);
        for (size_t i = 0; i < FE_METRICS_SERVERS; i++) {
            uint64_t id =
                atomic_load_explicit(&s->srv[i].id, memory_order_acquire);
            size_t k;
            if (id == 0) {
                break;
            }
            for (k = 0; k < n && ids[k] != id; k++) {
            }
            if (k == n) {
                if (n == FE_METRICS_SERVERS) {
                    rt_hist_add_to(&s->srv[i].h, &other);
                    continue;
                }
                ids[n++] = id;
            }
            rt_hist_add_to(&s->srv[i].h, &sums[k]);
        }
    }
    rt_metrics_help(b, "rt_fe_ps_rpc_duration_seconds", "histogram",
                    "Entity RPC round trips to each partition server "
                    "(server id), failures included.");
    for (size_t k = 0; k < n; k++) {
        char l[48];
        snprintf(l, sizeof(l), "server=\"%" PRIu64 "\"", ids[k]);
        rt_metrics_hist(b, "rt_fe_ps_rpc_duration_seconds", l, &sums[k]);
    }
    if (other.count) {
        rt_metrics_hist(b, "rt_fe_ps_rpc_duration_seconds", "server=\"other\"",
                        &other);
    }
    rt_metrics_help(b, "rt_fe_ps_rpc_errors_total", "counter",
                    "Entity RPCs to partition servers that failed, by why.");
    for (size_t k = 0; k < FE_MRPC__NR; k++) {
        uint64_t v = 0;
        for (unsigned w = 0; w < m->nshards; w++) {
            v += rt_ctr_get(&m->shards[w]->rpc_err[k]);
        }
        rt_buf_printf(b, "rt_fe_ps_rpc_errors_total{kind=\"%s\"} %" PRIu64 "\n",
                      fe__rpc_errs[k], v);
    }
}

void fe_metrics_write(struct fe_metrics *m, struct rt_buf *b)
{
    uint64_t begun = 0, ended = 0, opened = 0, closed = 0, mapv = 0;
    struct rt_hist_sum ms;

    fe__write_requests(m, b);
    memset(&ms, 0, sizeof(ms));
    for (unsigned w = 0; w < m->nshards; w++) {
        struct fe_metrics_shard *s = m->shards[w];
        uint64_t v = rt_ctr_get(&s->map_version);
        /* Ended before begun: a request that ends between the two reads
         * cannot make the gauge negative. */
        ended += rt_ctr_get(&s->ended);
        begun += rt_ctr_get(&s->begun);
        closed += rt_ctr_get(&s->conn_closed);
        opened += rt_ctr_get(&s->conn_opened);
        rt_hist_add_to(&s->master_lat, &ms);
        if (v > mapv) {
            mapv = v;
        }
    }
    rt_metrics_help(b, "rt_fe_requests_in_flight", "gauge",
                    "Requests whose headers arrived and that libmicrohttpd "
                    "has not finished with.");
    rt_buf_printf(b, "rt_fe_requests_in_flight %" PRIu64 "\n",
                  begun > ended ? begun - ended : 0);
    rt_metrics_help(b, "rt_fe_connections_open", "gauge",
                    "Client connections open on the Table API port.");
    rt_buf_printf(b, "rt_fe_connections_open %" PRIu64 "\n",
                  opened > closed ? opened - closed : 0);
    rt_metrics_help(b, "rt_fe_connections_total", "counter",
                    "Client connections accepted.");
    rt_buf_printf(b, "rt_fe_connections_total %" PRIu64 "\n", opened);
    fe__write_rpc(m, b);
    rt_metrics_help(b, "rt_fe_master_calls_total", "counter",
                    "Calls to the master, by purpose and result.");
    for (size_t k = 0; k < FE_MMASTER__NR; k++) {
        for (int e = 0; e < 2; e++) {
            uint64_t v = 0;
            for (unsigned w = 0; w < m->nshards; w++) {
                v += rt_ctr_get(&m->shards[w]->master[k][e]);
            }
            rt_buf_printf(b,
                          "rt_fe_master_calls_total{call=\"%s\",result=\"%s\"}"
                          " %" PRIu64 "\n",
                          fe__master_kinds[k], e ? "error" : "ok", v);
        }
    }
    rt_metrics_help(b, "rt_fe_master_call_duration_seconds", "histogram",
                    "Round trips of calls to the master.");
    rt_metrics_hist(b, "rt_fe_master_call_duration_seconds", NULL, &ms);
    rt_metrics_help(b, "rt_fe_map_version", "gauge",
                    "Newest partition map version installed by any worker "
                    "(0: none yet).");
    rt_buf_printf(b, "rt_fe_map_version %" PRIu64 "\n", mapv);
    rt_metrics_help(b, "rt_fe_workers", "gauge", "Worker threads.");
    rt_buf_printf(b, "rt_fe_workers %u\n", m->nshards);
}

/* ---- Listener ---- */

static enum MHD_Result fe__metrics_handler(void *cls,
                                           struct MHD_Connection *c,
                                           const char *url,
                                           const char *method,
                                           const char *version,
                                           const char *upload_data,
                                           size_t *upload_data_size,
                                           void **con_cls)
{
    struct fe_metrics *m = cls;
    struct rt_buf b = RT_BUF_INIT;
    enum MHD_Result ret;
    (void)version;
    (void)upload_data;
    (void)upload_data_size;
    (void)con_cls;

    if (rt_http_basic(c, method, url, &ret)) {
        return ret;
    }
    if (strcmp(url, "/metrics") != 0) {
        return rt_http_send(c, MHD_HTTP_NOT_FOUND, "text/plain", "not found\n",
                            false);
    }
    fe_metrics_write(m, &b);
    rt_buf_cstr(&b);
    return rt_http_send(c, MHD_HTTP_OK, "text/plain; version=0.0.4",
                        (const char *)rt_buf_steal(&b, NULL), true);
}

int fe_metrics_listen(struct fe_metrics *m,
                      const char *addr,
                      int *port_out,
                      char *errmsg)
{
    struct sockaddr_storage ss;
    unsigned int flags =
        MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL | MHD_USE_ERROR_LOG;
    const union MHD_DaemonInfo *info;
    char host[256];
    int port;

    if (rt_addr_split(addr, host, sizeof(host), &port) != 0) {
        rt_errmsg_printf(errmsg, "bad --http address '%s'", addr);
        return RT_EINVAL;
    }
    if (rt_http_sockaddr(host, port, &ss, &flags) != 0) {
        rt_errmsg_printf(errmsg, "bad --http host '%s'", host);
        return RT_EINVAL;
    }
    m->d = MHD_start_daemon(
        flags, (uint16_t)port, NULL, NULL, fe__metrics_handler, m,
        MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&ss,
        MHD_OPTION_CONNECTION_TIMEOUT, (unsigned int)30, MHD_OPTION_END);
    if (!m->d) {
        rt_errmsg_printf(errmsg, "http: cannot listen on %s", addr);
        return RT_EIO;
    }
    info = MHD_get_daemon_info(m->d, MHD_DAEMON_INFO_BIND_PORT);
    *port_out = info ? info->port : port;
    rt_log(RT_LOG_INFO, "http: metrics on %s:%d", host, *port_out);
    return 0;
}
