/* rt-load: a load generator for Azure Table endpoints (rangetable, Azurite,
 * the real service over http). See README.md beside this file and --help.
 *
 * Layout: --threads worker threads, each with its own libuv loop and its
 * share of the connections ("slots": one connection, one request in flight,
 * HTTP/1.1 keep-alive). The main thread only starts the workers, reports
 * once a second (progress line, CSV row) and decides when the run ends.
 * Requests are written from templates into each slot's buffer (rl_req),
 * responses are parsed incrementally (rl_http); the hot path allocates
 * nothing.
 *
 * Closed loop (--workers N): every slot sends its next operation as soon as
 * the previous one finished. Open loop (--rate R): operations are due at
 * t0 + i/R; a due operation waits for a free connection, and its latency is
 * measured from the time it was due (so a stalled server cannot hide its
 * stall by slowing the client down: coordinated omission).
 *
 * 503 ServerBusy: with --retry sdk the request is sent again after an
 * exponential back-off with jitter (what the Azure SDKs do); the operation's
 * latency includes the waits. Every 503 answer and every retry is counted. */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <netdb.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <netinet/in.h>
#include <netinet/tcp.h>

#include "rl_internal.h"
#include "rt_addr.h"
#include "rt_config.h"

#define RL_RBUF 65536
#define RL_ACK_WIN (1u << 20)

/* Options */

static struct
{
    char *endpoint, *account, *key, *auth, *sas, *connect, *table;
    char *protocol;
    int create_table;
    long preload, preload_batch;
    char *workload, *mix, *dist, *pk_scheme, *rk_scheme, *entity_size;
    long partitions, props, batch_size, page_size, range_len, insert_start;
    long keys;
    char *scan_filter;
    long workers, rate, connections, threads, requests, seed;
    char *duration, *warmup, *timeout;
    char *retry, *retry_base, *retry_cap;
    long retry_max;
    char *csv, *json, *plot, *master_http, *label;
    int quiet;
} O;

static struct rt_opt rl_opts[] = {
    {"endpoint", RT_OPT_STR, &O.endpoint,
     "http://127.0.0.1:10002/devstoreaccount1",
     "table service URL: path-style http://host:port/account or host-style "
     "http://account.table.core.windows.net"},
    {"account", RT_OPT_STR, &O.account, "",
     "account name (default: from the endpoint)"},
    {"key", RT_OPT_STR, &O.key,
     "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/"
     "K1SZFPTOtr/KBHBeksoGMGw==",
     "base64 account key (default: the development account's)"},
    {"auth", RT_OPT_STR, &O.auth, "sharedkey",
     "sharedkey | sharedkeylite | sas | none"},
    {"sas", RT_OPT_STR, &O.sas, "",
     "with --auth sas: the SAS query string to append (default: an account "
     "SAS generated from --key, valid 24 h)"},
    {"connect", RT_OPT_STR, &O.connect, "",
     "HOST:PORT to connect to instead of the endpoint's host (e.g. a "
     "host-style name served on loopback)"},
    {"protocol", RT_OPT_STR, &O.protocol, "azure",
     "azure | etcd: etcd's v3 JSON gateway at --endpoint http://host:port "
     "(insert/upsert/update/merge = POST /v3/kv/put of a --entity-size "
     "value, get = POST /v3/kv/range; key = PartitionKey/RowKey, base64; "
     "no auth, no table, no preload)"},
    {"table", RT_OPT_STR, &O.table, "rtload", "table name"},
    {"create-table", RT_OPT_BOOL, &O.create_table, "false",
     "create the table first (an existing table is fine)"},
    {"preload", RT_OPT_INT, &O.preload, "0",
     "upsert entities 0..N-1 before the run (untimed)"},
    {"preload-batch", RT_OPT_INT, &O.preload_batch, "100",
     "entities per $batch when preloading (1 = single upserts; falls back to "
     "single upserts when the server refuses $batch)"},
    {"workload", RT_OPT_STR, &O.workload, "",
     "YCSB preset ycsb-a .. ycsb-f (sets --mix and --dist; an explicit "
     "--mix/--dist overrides)"},
    {"mix", RT_OPT_STR, &O.mix, "",
     "operations with weights, e.g. get=95,update=5 (default get)"},
    {"dist", RT_OPT_STR, &O.dist, "",
     "key distribution: uniform | zipfian[:theta] | latest[:theta] | seq-asc "
     "| seq-desc | hotset[:fraction[:prob[:period_s]]] (default uniform)"},
    {"partitions", RT_OPT_INT, &O.partitions, "1000",
     "distinct PartitionKeys; entity id -> PK id mod N (0 = a PK per entity)"},
    {"pk-scheme", RT_OPT_STR, &O.pk_scheme, "hash",
     "PartitionKey text: seq (key order = id order) | hash (spread)"},
    {"rk-scheme", RT_OPT_STR, &O.rk_scheme, "seq",
     "RowKey text: seq | hash | rev (descending, newest first)"},
    {"entity-size", RT_OPT_STR, &O.entity_size, "256",
     "approximate JSON size of an entity (e.g. 1k)"},
    {"props", RT_OPT_INT, &O.props, "8",
     "properties per entity besides the keys (Bucket Int32 0..99, Tag, then "
     "strings)"},
    {"batch-size", RT_OPT_INT, &O.batch_size, "100",
     "operations per $batch (op batch), 1..100"},
    {"page-size", RT_OPT_INT, &O.page_size, "1000",
     "$top of page, scan and query-parts"},
    {"range-len", RT_OPT_INT, &O.range_len, "50",
     "$top of query-rows (row range in one partition)"},
    {"scan-filter", RT_OPT_STR, &O.scan_filter, "Bucket lt 10",
     "$filter of the scan op (full scan, every page)"},
    {"keys", RT_OPT_INT, &O.keys, "-1",
     "entities 0..N-1 exist already: reads pick among them (default: "
     "--preload)"},
    {"insert-start", RT_OPT_INT, &O.insert_start, "-1",
     "first id of inserted entities (default: --keys; reads then include "
     "the acknowledged inserts)"},
    {"workers", RT_OPT_INT, &O.workers, "16",
     "closed loop: concurrent workers (= connections)"},
    {"rate", RT_OPT_INT, &O.rate, "0",
     "open loop: target operations/s (0 = closed loop)"},
    {"connections", RT_OPT_INT, &O.connections, "256",
     "open loop: connections (the most operations in flight)"},
    {"threads", RT_OPT_INT, &O.threads, "1",
     "event-loop threads sharing the connections"},
    {"duration", RT_OPT_STR, &O.duration, "10s",
     "measured time after the warm-up (0 = until --requests)"},
    {"warmup", RT_OPT_STR, &O.warmup, "0s", "unmeasured time first"},
    {"requests", RT_OPT_INT, &O.requests, "0",
     "stop after this many measured operations (0 = no bound)"},
    {"seed", RT_OPT_INT, &O.seed, "1", "random seed (runs are reproducible)"},
    {"timeout", RT_OPT_STR, &O.timeout, "30s", "per-request timeout"},
    {"retry", RT_OPT_STR, &O.retry, "sdk",
     "on 503: sdk (exponential back-off with jitter) | none"},
    {"retry-max", RT_OPT_INT, &O.retry_max, "3", "retries per operation"},
    {"retry-base", RT_OPT_STR, &O.retry_base, "800ms",
     "first back-off; doubles per retry, x0.8..1.2 jitter"},
    {"retry-cap", RT_OPT_STR, &O.retry_cap, "60s", "longest back-off"},
    {"csv", RT_OPT_STR, &O.csv, "", "per-second CSV file"},
    {"json", RT_OPT_STR, &O.json, "", "summary as JSON to FILE ('-' = stdout)"},
    {"plot", RT_OPT_STR, &O.plot, "",
     "write PREFIX.svg and PREFIX.png (gnuplot; implies PREFIX.csv if no "
     "--csv)"},
    {"master-http", RT_OPT_STR, &O.master_http, "",
     "rangetable master status API HOST:PORT: ranges per second and "
     "split/merge/move events in the CSV (the admin token from "
     "$RT_ADMIN_TOKEN_FILE, $RT_ADMIN_TOKEN or ./rt-data/admin.token)"},
    {"label", RT_OPT_STR, &O.label, "", "name of this run in the reports"},
    {"quiet", RT_OPT_BOOL, &O.quiet, "false", "no progress line"},
    {NULL, 0, NULL, NULL, NULL},
};

static const char rl_help_more[] =
    "\n"
    "Operations (--mix NAME=WEIGHT,...):\n"
    "  insert        POST /t, a new entity (Prefer: return-no-content)\n"
    "  get           GET /t(PartitionKey='..',RowKey='..')\n"
    "  upsert        PUT without If-Match (insert or replace)\n"
    "  upsert-merge  PATCH without If-Match (insert or merge)\n"
    "  update        PUT with If-Match: *      merge  PATCH with If-Match: *\n"
    "  delete        DELETE with If-Match: *\n"
    "  query-point   $filter=PartitionKey eq .. and RowKey eq ..\n"
    "  query-rows    row range in one partition: PartitionKey eq .. and "
    "RowKey ge .., $top=--range-len\n"
    "  query-parts   partition range: PartitionKey ge .., $top=--page-size\n"
    "  scan          full scan with --scan-filter, following continuation "
    "tokens to the end\n"
    "  page          one query page: GET /t()?$top=--page-size\n"
    "  batch         POST /$batch: --batch-size inserts in one PartitionKey\n"
    "  rmw           GET, then MERGE with If-Match: <its ETag> (YCSB F)\n"
    "YCSB presets (--workload): a get50/merge50 zipfian, b get95/merge5 "
    "zipfian,\n"
    "  c get100 zipfian, d get95/insert5 latest, e query-rows95/insert5 "
    "zipfian,\n"
    "  f get50/rmw50 zipfian (YCSB update = MERGE of the entity).\n"
    "\n"
    "Keys: entity id i -> PartitionKey index i mod --partitions (0: one per\n"
    "entity), row i div --partitions. Reads pick an existing id by --dist;\n"
    "inserts take the next id (ascending; seq-desc: descending, "
    "prepend-only);\n"
    "batches use their own RowKeys (b...) in the same partitions. With\n"
    "--partitions 0 --pk-scheme seq, seq-asc inserts are append-only and\n"
    "seq-desc prepend-only in PartitionKey order; --pk-scheme hash spreads "
    "them.\n"
    "\n"
    "Modes: closed loop (--workers N) or open loop (--rate R over "
    "--connections);\n"
    "open-loop latency is measured from the intended send time "
    "(coordinated-\n"
    "omission aware); operations due when every connection was busy and "
    "never\n"
    "sent are reported as 'unsent'. --warmup, --duration, --requests, "
    "--seed.\n"
    "\n"
    "Output: a progress line per second on stderr; --csv: one row per second\n"
    "(ops/s, entities/s, p50/p95/p99/max ms, 503s and their rate, retries,\n"
    "404s, 409/412s, other errors, in flight, the table's ranges and the\n"
    "master's events when --master-http is given); a summary with "
    "percentiles\n"
    "from a log-bucketed histogram (<0.4% error) as text and --json; "
    "--plot\n"
    "PREFIX writes PREFIX.svg and PREFIX.png with events marked.\n"
    "Exit status: 0 when every operation got an expected answer, 1 when some\n"
    "failed (errors, or 503s left after retries), 2 on bad options.\n";

/* Runtime configuration */

static struct rl_reqcfg RC;
static struct rl_mix MIX;
static struct rl_dist_cfg DIST;
static struct sockaddr_storage ADDR;
static uint64_t TIMEOUT_MS, RETRY_BASE_MS, RETRY_CAP_MS;
static int RETRY_SDK;

/* Shared state */

enum rl_mode { RL_MODE_PRELOAD, RL_MODE_RUN };

static struct
{
    pthread_mutex_t mu; /* ids and ack windows */
    int64_t next_hi, next_lo;
    int64_t ack_hi, ack_lo; /* readable ids: [ack_lo, ack_hi) */
    uint8_t *win_hi, *win_lo;
    uint64_t batch_row;
    /* Preload work */
    uint64_t pre_items, pre_next, pre_done_entities;
    int pre_batch_ok; /* 0 after the server refused $batch */
    /* Run control (main writes, workers read) */
    enum rl_mode mode;
    volatile int go, stop;
    uint64_t t_start, t_warm, t_end; /* ns, uv_hrtime */
    uint64_t started_measured;
    int64_t insert_base;
    int64_t keys; /* ids [0, keys) exist before the run */
    int read_ext; /* reads follow the inserts (insert_base == keys) */
} G;

static volatile sig_atomic_t interrupted;

struct rl_worker;

enum rl_slot_state {
    SL_DOWN,
    SL_CONNECTING,
    SL_IDLE,
    SL_BUSY,
    SL_BACKOFF,
    SL_CLOSING,
};

struct rl_slot
{
    struct rl_worker *w;
    uv_tcp_t tcp;
    uv_connect_t creq;
    uv_write_t wreq;
    uv_timer_t timer;
    enum rl_slot_state st;
    int tcp_open;
    int pending;     /* an operation waits for the connection */
    int conn_failed; /* the last connect attempt failed */
    int has_op;
    char *wbuf;
    size_t wlen;
    char *rbuf;
    struct rl_resp resp;
    /* The current operation */
    enum rl_op op;
    int64_t id;
    uint64_t pki, brow0;
    unsigned bn;
    int phase;
    unsigned attempts;
    uint64_t entities, requests;
    uint64_t t_intended, t_sent;
    char etag[128];
    char npk[RL_CONT_MAX], nrk[RL_CONT_MAX];
    /* Preload item */
    uint64_t pre_item;
    unsigned pre_t;
    int pre_single;
    int ins_ack; /* id to acknowledge when done */
};

struct rl_worker
{
    int idx;
    pthread_t th;
    uv_loop_t loop;
    uv_timer_t tick;
    struct rl_slot *slots;
    int nslots;
    int connected;
    int busy; /* slots with an operation */
    struct rt_rng rng;
    struct rl_dist dist;
    /* Open loop */
    double rate;
    uint64_t issued;
    struct rl_slot **idle;
    int nidle;
    int started;
    int closing;
    /* Stats (mu: main reads) */
    pthread_mutex_t mu;
    struct rl_counts c_op[RL_OP__NR];
    struct rl_hist *h_op; /* [RL_OP__NR] */
    struct rl_counts c_int;
    struct rl_hist h_int;
    struct rl_errkind errs[RL_ERRKINDS];
    int nerrs;
    uint64_t measured_done;
    uint64_t unsent;
};

static struct rl_worker *W;
static int NW;

void rl_counts_add(struct rl_counts *d, const struct rl_counts *s)
{
    d->ops += s->ops;
    d->ok += s->ok;
    d->not_found += s->not_found;
    d->conflict += s->conflict;
    d->throttled += s->throttled;
    d->errors += s->errors;
    d->timeouts += s->timeouts;
    d->retries += s->retries;
    d->r503 += s->r503;
    d->requests += s->requests;
    d->entities += s->entities;
}

static uint64_t now_ns(void)
{
    return uv_hrtime();
}

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void die(const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "rt-load: ");
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n");
    exit(2);
}

/* Date cache: one string per second, per thread. */
static __thread char t_date[RL_DATE_LEN + 1];
static __thread time_t t_date_sec;

static const char *cur_date(void)
{
    time_t t = time(NULL);
    if (t != t_date_sec) {
        rl_http_date(t, t_date);
        t_date_sec = t;
    }
    return t_date;
}

/* Ids */

static void ack_insert(int64_t id)
{
    pthread_mutex_lock(&G.mu);
    if (id >= G.ack_hi) {
        G.win_hi[(uint64_t)id & (RL_ACK_WIN - 1)] = 1;
        while (G.win_hi[(uint64_t)G.ack_hi & (RL_ACK_WIN - 1)]) {
            G.win_hi[(uint64_t)G.ack_hi & (RL_ACK_WIN - 1)] = 0;
            __atomic_store_n(&G.ack_hi, G.ack_hi + 1, __ATOMIC_RELEASE);
        }
    } else if (id < G.ack_lo) {
        G.win_lo[(uint64_t)(-id) & (RL_ACK_WIN - 1)] = 1;
        while (G.win_lo[(uint64_t)(-(G.ack_lo - 1)) & (RL_ACK_WIN - 1)]) {
            G.win_lo[(uint64_t)(-(G.ack_lo - 1)) & (RL_ACK_WIN - 1)] = 0;
            __atomic_store_n(&G.ack_lo, G.ack_lo - 1, __ATOMIC_RELEASE);
        }
    }
    pthread_mutex_unlock(&G.mu);
}

static int64_t new_id(void)
{
    int64_t id;
    pthread_mutex_lock(&G.mu);
    if (DIST.kind == RL_DIST_SEQ_DESC) {
        id = --G.next_lo;
    } else {
        id = G.next_hi++;
    }
    pthread_mutex_unlock(&G.mu);
    return id;
}

/* An existing id by the distribution (0 if nothing exists yet). */
static int64_t pick_id(struct rl_worker *w)
{
    int64_t lo = __atomic_load_n(&G.ack_lo, __ATOMIC_ACQUIRE);
    int64_t hi =
        G.read_ext ? __atomic_load_n(&G.ack_hi, __ATOMIC_ACQUIRE) : G.keys;
    double el = (double)(now_ns() - G.t_start) / 1e9;
    if (hi <= lo) {
        return lo;
    }
    return lo +
           (int64_t)rl_dist_pick(&w->dist, &w->rng, (uint64_t)(hi - lo), el);
}

/* Slots */

static void slot_send(struct rl_slot *s);
static void slot_connect(struct rl_slot *s);
static void slot_close(struct rl_slot *s);
static void slot_next(struct rl_slot *s);

static void timer_stop(struct rl_slot *s)
{
    uv_timer_stop(&s->timer);
}

static void on_reconnect_timer(uv_timer_t *t);

static void on_close(uv_handle_t *h)
{
    struct rl_slot *s = h->data;
    s->tcp_open = 0;
    s->st = SL_DOWN;
    if (s->w->closing || G.stop > 1) {
        return;
    }
    if (s->pending) {
        if (s->conn_failed) {
            /* Not in a tight loop when the server is gone. */
            uv_timer_start(&s->timer, on_reconnect_timer, 20, 0);
        } else {
            slot_connect(s);
        }
    }
}

static void slot_close(struct rl_slot *s)
{
    timer_stop(s);
    if (s->tcp_open && !uv_is_closing((uv_handle_t *)&s->tcp)) {
        s->st = SL_CLOSING;
        uv_close((uv_handle_t *)&s->tcp, on_close);
    }
}

static void on_reconnect_timer(uv_timer_t *t)
{
    struct rl_slot *s = t->data;
    if (s->st == SL_DOWN && s->pending) {
        slot_connect(s);
    }
}

static void note_error(struct rl_worker *w,
                       enum rl_op op,
                       int status,
                       const char *code,
                       const char *detail)
{
    int i;
    for (i = 0; i < w->nerrs; i++) {
        if (w->errs[i].status == status && !strcmp(w->errs[i].code, code) &&
            !strcmp(w->errs[i].op, rl_op_name(op))) {
            w->errs[i].n++;
            return;
        }
    }
    if (w->nerrs < RL_ERRKINDS) {
        struct rl_errkind *e = &w->errs[w->nerrs++];
        e->status = status;
        snprintf(e->code, sizeof(e->code), "%s", code);
        snprintf(e->op, sizeof(e->op), "%s", rl_op_name(op));
        snprintf(e->detail, sizeof(e->detail), "%s", detail);
        for (char *p = e->detail; *p; p++) {
            if (*p == '\n' || *p == '\r') {
                *p = ' ';
            }
        }
        e->n = 1;
    }
}

/* Records the finished operation (status 0 = network error or timeout). */
static void op_record(struct rl_slot *s, int status, int timed_out)
{
    struct rl_worker *w = s->w;
    uint64_t now = now_ns();
    uint64_t us = (now - s->t_intended) / 1000;
    struct rl_counts c;
    int measured = G.mode == RL_MODE_RUN && s->t_intended >= G.t_warm &&
                   s->t_intended < G.t_end;
    memset(&c, 0, sizeof(c));
    c.ops = 1;
    c.requests = s->requests;
    c.retries = s->attempts;
    c.entities = s->entities;
    if (status >= 200 && status < 300) {
        c.ok = 1;
    } else if (status == 404) {
        c.not_found = 1;
    } else if (status == 409 || status == 412) {
        c.conflict = 1;
    } else if (status == 503) {
        c.throttled = 1;
    } else {
        c.errors = 1;
        c.timeouts = timed_out;
    }
    pthread_mutex_lock(&w->mu);
    c.r503 = 0;
    if (measured) {
        rl_counts_add(&w->c_op[s->op], &c);
        rl_hist_add(&w->h_op[s->op], us);
        w->measured_done++;
    }
    rl_counts_add(&w->c_int, &c);
    rl_hist_add(&w->h_int, us);
    if (c.errors) {
        note_error(w, s->op, status,
                   timed_out     ? "timeout"
                   : status == 0 ? "network"
                                 : s->resp.error_code,
                   status ? s->resp.body_head : "");
    }
    pthread_mutex_unlock(&w->mu);
}

/* Counts a 503 answer that will be retried (the final one is counted by
 * op_record through its status). */
static void count_503(struct rl_slot *s)
{
    struct rl_worker *w = s->w;
    int measured = G.mode == RL_MODE_RUN && s->t_intended >= G.t_warm &&
                   s->t_intended < G.t_end;
    pthread_mutex_lock(&w->mu);
    if (measured) {
        w->c_op[s->op].r503++;
    }
    w->c_int.r503++;
    pthread_mutex_unlock(&w->mu);
}

/* Picks and starts a new operation on @s, due at @t_intended. */
static void op_begin(struct rl_slot *s, uint64_t t_intended)
{
    struct rl_worker *w = s->w;
    s->has_op = 1;
    w->busy++;
    s->t_intended = t_intended;
    s->attempts = 0;
    s->phase = 0;
    s->entities = 0;
    s->requests = 0;
    s->etag[0] = s->npk[0] = s->nrk[0] = '\0';
    s->ins_ack = 0;
    if (G.mode == RL_MODE_PRELOAD) {
        s->op = RL_OP_BATCH; /* accounted as the preload */
    } else {
        s->op = rl_mix_pick(&MIX, (unsigned)rt_rng_below(&w->rng, MIX.total));
        switch (s->op) {
            case RL_OP_INSERT:
                s->id = new_id();
                s->ins_ack = 1;
                break;
            case RL_OP_BATCH: {
                int64_t any = pick_id(w);
                s->pki = rl_pk_index_of(&RC.km, any);
                s->bn = (unsigned)O.batch_size;
                s->brow0 =
                    __atomic_fetch_add(&G.batch_row, s->bn, __ATOMIC_RELAXED);
                break;
            }
            case RL_OP_SCAN:
            case RL_OP_PAGE:
                s->id = 0;
                break;
            default:
                s->id = pick_id(w);
        }
    }
    slot_send(s);
}

/* Preload: claims the next item (or continues the current one in single
 * mode). Returns 0 when nothing is left. */
static void preload_item_ids(uint64_t item,
                             int64_t *id0,
                             int64_t *step,
                             unsigned *n);

static int preload_next(struct rl_slot *s)
{
    for (;;) {
        int64_t id0, step;
        unsigned n;
        uint64_t item = __atomic_fetch_add(&G.pre_next, 1, __ATOMIC_RELAXED);
        if (item >= G.pre_items) {
            return 0;
        }
        preload_item_ids(item, &id0, &step, &n);
        if (n == 0) {
            continue; /* a partition with fewer rows than the others */
        }
        s->pre_item = item;
        s->pre_t = 0;
        s->pre_single = !__atomic_load_n(&G.pre_batch_ok, __ATOMIC_RELAXED);
        return 1;
    }
}

/* Ids of preload item @item: id0 + k * step for k < n. */
static void preload_item_ids(uint64_t item,
                             int64_t *id0,
                             int64_t *step,
                             unsigned *n)
{
    uint64_t P = RC.km.partitions;
    uint64_t B = (uint64_t)(O.preload_batch > 0 ? O.preload_batch : 1);
    uint64_t N = (uint64_t)O.preload;
    if (P == 0 || B == 1) {
        *id0 = (int64_t)(item * B);
        *step = 1;
        *n =
            item * B >= N ? 0 : (unsigned)(N - item * B < B ? N - item * B : B);
        return;
    }
    {
        uint64_t pki = item % P, chunk = item / P;
        uint64_t r0 = chunk * B;
        uint64_t first = pki + P * r0;
        uint64_t cnt = 0;
        while (cnt < B && first + P * cnt < N) {
            cnt++;
        }
        *id0 = (int64_t)first;
        *step = (int64_t)P;
        *n = (unsigned)cnt;
    }
}

static void write_cb(uv_write_t *req, int status);
static void on_timeout(uv_timer_t *t);

static void slot_send(struct rl_slot *s)
{
    struct rl_reqargs a;
    uv_buf_t b;
    enum rl_body_mode mode = RL_BODY_IGNORE;

    if (s->st != SL_IDLE) {
        s->pending = 1;
        if (s->st == SL_DOWN) {
            slot_connect(s);
        }
        return;
    }
    s->pending = 0;
    memset(&a, 0, sizeof(a));
    a.id = s->id;
    if (G.mode == RL_MODE_PRELOAD) {
        int64_t id0, step;
        unsigned n;
        preload_item_ids(s->pre_item, &id0, &step, &n);
        if (s->pre_single || n <= 1) {
            a.rq = RL_RQ_UPSERT;
            a.id = id0 + (int64_t)s->pre_t * step;
        } else {
            a.rq = RL_RQ_BATCH_UPSERT;
            a.id0 = id0;
            a.id_step = step;
            a.n = n;
            mode = RL_BODY_BATCH;
        }
    } else {
        switch (s->op) {
            case RL_OP_INSERT:
                a.rq = RL_RQ_INSERT;
                break;
            case RL_OP_GET:
                a.rq = RL_RQ_GET;
                break;
            case RL_OP_UPSERT:
                a.rq = RL_RQ_UPSERT;
                break;
            case RL_OP_UPSERT_MERGE:
                a.rq = RL_RQ_UPSERT_MERGE;
                break;
            case RL_OP_UPDATE:
                a.rq = RL_RQ_UPDATE;
                break;
            case RL_OP_MERGE:
                a.rq = RL_RQ_MERGE;
                break;
            case RL_OP_DELETE:
                a.rq = RL_RQ_DELETE;
                break;
            case RL_OP_QPOINT:
                a.rq = RL_RQ_QPOINT;
                mode = RL_BODY_ENTITIES;
                break;
            case RL_OP_QROWS:
                a.rq = RL_RQ_QROWS;
                mode = RL_BODY_ENTITIES;
                break;
            case RL_OP_QPARTS:
                a.rq = RL_RQ_QPARTS;
                mode = RL_BODY_ENTITIES;
                break;
            case RL_OP_SCAN:
                a.rq = RL_RQ_SCAN;
                a.next_pk = s->npk;
                a.next_rk = s->nrk;
                mode = RL_BODY_ENTITIES;
                break;
            case RL_OP_PAGE:
                a.rq = RL_RQ_PAGE;
                mode = RL_BODY_ENTITIES;
                break;
            case RL_OP_BATCH:
                a.rq = RL_RQ_BATCH_INSERT;
                a.n = s->bn;
                a.pk_index = s->pki;
                a.brow0 = s->brow0;
                mode = RL_BODY_BATCH;
                break;
            case RL_OP_RMW:
                if (s->phase == 0) {
                    a.rq = RL_RQ_GET;
                } else {
                    a.rq = RL_RQ_MERGE;
                    a.etag = s->etag;
                }
                break;
            case RL_OP__NR:
                break;
        }
    }
    s->wlen = rl_req_build(&RC, &a, cur_date(), s->wbuf);
    rl_resp_begin(&s->resp, mode);
    s->st = SL_BUSY;
    s->t_sent = now_ns();
    s->requests++;
    b = uv_buf_init(s->wbuf, (unsigned)s->wlen);
    uv_timer_start(&s->timer, on_timeout, TIMEOUT_MS, 0);
    if (uv_write(&s->wreq, (uv_stream_t *)&s->tcp, &b, 1, write_cb) != 0) {
        timer_stop(s);
        op_record(s, 0, 0);
        slot_close(s);
        slot_next(s);
    }
}

static void write_cb(uv_write_t *req, int status)
{
    (void)req;
    (void)status; /* a failed write shows up as a read error/EOF */
}

static void on_backoff(uv_timer_t *t)
{
    struct rl_slot *s = t->data;
    if (G.stop) {
        /* Stopping: give up on this operation (not recorded). */
        s->st = SL_IDLE;
        s->has_op = 0;
        s->w->busy--;
        return;
    }
    s->st = SL_IDLE;
    slot_send(s);
}

static uint64_t backoff_ms(struct rl_slot *s)
{
    double d = (double)RETRY_BASE_MS * pow(2.0, (double)(s->attempts - 1));
    d *= 0.8 + 0.4 * rt_rng_unit(&s->w->rng);
    if (d > (double)RETRY_CAP_MS) {
        d = (double)RETRY_CAP_MS;
    }
    return (uint64_t)d;
}

/* The response to the current request is complete. */
static void on_response(struct rl_slot *s)
{
    int status = s->resp.status;
    int close_after = s->resp.conn_close;
    timer_stop(s);
    s->st = SL_IDLE;
    if (close_after) {
        slot_close(s);
    }
    if (G.mode == RL_MODE_PRELOAD) {
        int64_t id0, step;
        unsigned n;
        preload_item_ids(s->pre_item, &id0, &step, &n);
        if (!s->pre_single && n > 1) {
            if (status == 202 && !s->resp.part_fail) {
                __atomic_fetch_add(&G.pre_done_entities, n, __ATOMIC_RELAXED);
                s->has_op = 0;
                s->w->busy--;
                slot_next(s);
                return;
            }
            if (status == 503 || s->resp.part_fail == 503) {
                s->st = SL_BACKOFF;
                uv_timer_start(&s->timer, on_backoff, 50, 0);
                return;
            }
            /* $batch refused (e.g. 501): single upserts from now on. */
            if (__atomic_exchange_n(&G.pre_batch_ok, 0, __ATOMIC_RELAXED)) {
                fprintf(stderr,
                        "rt-load: preload: $batch answered %d%s%s; "
                        "using single upserts\n",
                        s->resp.part_fail ? s->resp.part_fail : status,
                        s->resp.error_code[0] ? " " : "", s->resp.error_code);
            }
            s->pre_single = 1;
            s->pre_t = 0;
            slot_send(s);
            return;
        }
        if (status == 503) {
            s->st = SL_BACKOFF;
            uv_timer_start(&s->timer, on_backoff, 50, 0);
            return;
        }
        if (status < 200 || status >= 300) {
            s->op = RL_OP_UPSERT;
            op_record(s, status, 0); /* shows in the error list */
        } else {
            __atomic_fetch_add(&G.pre_done_entities, 1, __ATOMIC_RELAXED);
        }
        if (++s->pre_t < n) {
            slot_send(s);
            return;
        }
        s->has_op = 0;
        s->w->busy--;
        slot_next(s);
        return;
    }

    if (s->op == RL_OP_BATCH && status == 202 && s->resp.part_fail) {
        status = s->resp.part_fail;
    }
    if (status == 503 && RETRY_SDK && s->attempts < (unsigned)O.retry_max &&
        !G.stop) {
        count_503(s);
        s->attempts++;
        s->st = SL_BACKOFF;
        uv_timer_start(&s->timer, on_backoff, backoff_ms(s), 0);
        return;
    }
    if (status == 503) {
        count_503(s);
    }
    if (s->op == RL_OP_RMW && s->phase == 0 && status == 200) {
        snprintf(s->etag, sizeof(s->etag), "%s", s->resp.etag);
        s->phase = 1;
        slot_send(s);
        return;
    }
    if (status >= 200 && status < 300) {
        switch (s->op) {
            case RL_OP_INSERT:
            case RL_OP_GET:
            case RL_OP_UPSERT:
            case RL_OP_UPSERT_MERGE:
            case RL_OP_UPDATE:
            case RL_OP_MERGE:
            case RL_OP_DELETE:
            case RL_OP_RMW:
                s->entities += 1;
                break;
            case RL_OP_BATCH:
                s->entities += s->bn;
                break;
            default:
                s->entities += s->resp.entities;
        }
    }
    if (s->op == RL_OP_SCAN && status == 200 && s->resp.next_pk[0] && !G.stop) {
        memcpy(s->npk, s->resp.next_pk, sizeof(s->npk));
        memcpy(s->nrk, s->resp.next_rk, sizeof(s->nrk));
        slot_send(s);
        return;
    }
    op_record(s, status, 0);
    if (s->ins_ack) {
        ack_insert(s->id);
    }
    s->has_op = 0;
    s->w->busy--;
    slot_next(s);
}

/* A transport failure or timeout ends the current operation. */
static void slot_fail(struct rl_slot *s, int timed_out)
{
    if (s->has_op && s->st == SL_BUSY) {
        if (G.mode == RL_MODE_PRELOAD) {
            /* Try the same item again on a new connection. */
            s->pending = 1;
            slot_close(s);
            return;
        }
        op_record(s, 0, timed_out);
        if (s->ins_ack) {
            ack_insert(s->id);
        }
        s->has_op = 0;
        s->w->busy--;
    }
    slot_close(s);
    slot_next(s);
}

static void on_timeout(uv_timer_t *t)
{
    struct rl_slot *s = t->data;
    if (s->st == SL_BUSY) {
        slot_fail(s, 1);
    }
}

static void alloc_cb(uv_handle_t *h, size_t sz, uv_buf_t *buf)
{
    struct rl_slot *s = h->data;
    (void)sz;
    *buf = uv_buf_init(s->rbuf, RL_RBUF);
}

static void read_cb(uv_stream_t *st, ssize_t n, const uv_buf_t *buf)
{
    struct rl_slot *s = st->data;
    size_t off = 0;
    if (n < 0) {
        if (s->st == SL_BUSY && n == UV_EOF && rl_resp_eof(&s->resp)) {
            on_response(s);
            slot_close(s);
            return;
        }
        if (s->st == SL_BUSY) {
            slot_fail(s, 0);
        } else {
            slot_close(s);
        }
        return;
    }
    while (off < (size_t)n) {
        size_t used = 0;
        int rc;
        if (s->st != SL_BUSY) {
            /* Bytes nobody asked for: the connection is out of step. */
            slot_close(s);
            return;
        }
        rc = rl_resp_feed(&s->resp, buf->base + off, (size_t)n - off, &used);
        off += used;
        if (rc < 0) {
            snprintf(s->resp.error_code, sizeof(s->resp.error_code),
                     "bad-http");
            slot_fail(s, 0);
            return;
        }
        if (rc == 1) {
            on_response(s);
        }
        if (used == 0 && rc == 0) {
            break;
        }
    }
}

static void connect_cb(uv_connect_t *req, int status)
{
    struct rl_slot *s = req->data;
    struct rl_worker *w = s->w;
    if (status != 0) {
        if (status != UV_ECANCELED) {
            static int said;
            if (!w->started &&
                !__atomic_exchange_n(&said, 1, __ATOMIC_RELAXED)) {
                fprintf(stderr, "rt-load: connect to %s:%d: %s\n", RC.t.host,
                        RC.t.port, uv_strerror(status));
            }
            s->conn_failed = 1;
            slot_close(s);
        }
        return;
    }
    s->conn_failed = 0;
    if (s->st != SL_CONNECTING) {
        return;
    }
    uv_tcp_nodelay(&s->tcp, 1);
    s->st = SL_IDLE;
    if (!s->w->started) {
        __atomic_fetch_add(&w->connected, 1, __ATOMIC_RELAXED);
    }
    uv_read_start((uv_stream_t *)&s->tcp, alloc_cb, read_cb);
    if (s->pending) {
        slot_send(s);
    }
}

static void slot_connect(struct rl_slot *s)
{
    int rc;
    if (s->st != SL_DOWN || s->tcp_open) {
        return;
    }
    uv_tcp_init(&s->w->loop, &s->tcp);
    s->tcp.data = s;
    s->tcp_open = 1;
    s->creq.data = s;
    s->st = SL_CONNECTING;
    rc =
        uv_tcp_connect(&s->creq, &s->tcp, (struct sockaddr *)&ADDR, connect_cb);
    if (rc != 0) {
        slot_close(s);
    }
}

/* Open loop: due operations not yet started. */
static uint64_t due_now(struct rl_worker *w, uint64_t now)
{
    double d;
    if (now <= G.t_start) {
        return 0;
    }
    d = (double)(now - G.t_start) / 1e9 * w->rate;
    return (uint64_t)d;
}

static uint64_t intended_of(struct rl_worker *w, uint64_t i)
{
    return G.t_start + (uint64_t)((double)i * 1e9 / w->rate);
}

static int bound_reached(void)
{
    if (O.requests <= 0 || G.mode != RL_MODE_RUN) {
        return 0;
    }
    return __atomic_load_n(&G.started_measured, __ATOMIC_RELAXED) >=
           (uint64_t)O.requests;
}

/* Starts the next operation on @s, or parks it. */
static void slot_next(struct rl_slot *s)
{
    struct rl_worker *w = s->w;
    uint64_t now;
    if (G.stop || !w->started || s->has_op) {
        return;
    }
    if (G.mode == RL_MODE_PRELOAD) {
        if (preload_next(s)) {
            s->has_op = 0;
            op_begin(s, now_ns());
        }
        return;
    }
    now = now_ns();
    if (bound_reached()) {
        return;
    }
    if (w->rate > 0) {
        if (w->issued < due_now(w, now)) {
            uint64_t t = intended_of(w, w->issued++);
            if (t >= G.t_warm) {
                __atomic_fetch_add(&G.started_measured, 1, __ATOMIC_RELAXED);
            }
            op_begin(s, t);
        } else {
            w->idle[w->nidle++] = s;
        }
        return;
    }
    if (now >= G.t_warm) {
        __atomic_fetch_add(&G.started_measured, 1, __ATOMIC_RELAXED);
    }
    op_begin(s, now);
}

static void close_all(struct rl_worker *w)
{
    w->closing = 1;
    for (int i = 0; i < w->nslots; i++) {
        struct rl_slot *s = &w->slots[i];
        if (s->tcp_open && !uv_is_closing((uv_handle_t *)&s->tcp)) {
            uv_close((uv_handle_t *)&s->tcp, on_close);
        }
        uv_close((uv_handle_t *)&s->timer, NULL);
    }
    uv_close((uv_handle_t *)&w->tick, NULL);
}

static void on_tick(uv_timer_t *t)
{
    struct rl_worker *w = t->data;
    uint64_t now = now_ns();
    if (w->closing) {
        return;
    }
    if (!w->started) {
        if (!G.go) {
            return;
        }
        w->started = 1;
        if (G.mode == RL_MODE_RUN && w->rate > 0) {
            for (int i = w->nslots - 1; i >= 0; i--) {
                w->idle[w->nidle++] = &w->slots[i];
            }
        } else {
            for (int i = 0; i < w->nslots; i++) {
                slot_next(&w->slots[i]);
            }
        }
    }
    if (G.stop) {
        /* Drain: wait for operations in flight, bounded by the caller. */
        for (int i = 0; i < w->nslots; i++) {
            struct rl_slot *s = &w->slots[i];
            if (s->st == SL_BACKOFF) {
                timer_stop(s);
                s->st = SL_IDLE;
                s->has_op = 0;
                w->busy--;
            } else if (s->has_op && s->st != SL_BUSY) {
                /* Waiting for a connection: abandoned, not recorded. */
                s->pending = 0;
                s->has_op = 0;
                w->busy--;
            }
        }
        if (w->busy == 0 || G.stop > 1) {
            if (w->rate > 0 && G.mode == RL_MODE_RUN) {
                uint64_t due = due_now(w, G.t_end < now ? G.t_end : now);
                w->unsent = due > w->issued ? due - w->issued : 0;
            }
            close_all(w);
        }
        return;
    }
    if (G.mode == RL_MODE_RUN && w->rate > 0) {
        uint64_t due = due_now(w, now);
        while (w->issued < due && w->nidle > 0 && !bound_reached()) {
            struct rl_slot *s = w->idle[--w->nidle];
            uint64_t ti = intended_of(w, w->issued++);
            if (ti >= G.t_warm) {
                __atomic_fetch_add(&G.started_measured, 1, __ATOMIC_RELAXED);
            }
            op_begin(s, ti);
        }
    }
}

static void *worker_main(void *arg)
{
    struct rl_worker *w = arg;
    uv_run(&w->loop, UV_RUN_DEFAULT);
    return NULL;
}

static void worker_init(struct rl_worker *w, int idx, int nslots, double rate)
{
    memset(w, 0, sizeof(*w));
    w->idx = idx;
    w->nslots = nslots;
    w->rate = rate;
    pthread_mutex_init(&w->mu, NULL);
    w->h_op = calloc(RL_OP__NR, sizeof(*w->h_op));
    w->slots = calloc((size_t)nslots, sizeof(*w->slots));
    w->idle = calloc((size_t)nslots, sizeof(*w->idle));
    if (!w->h_op || !w->slots || !w->idle) {
        die("out of memory");
    }
    for (int i = 0; i < RL_OP__NR; i++) {
        rl_hist_reset(&w->h_op[i]);
    }
    rl_hist_reset(&w->h_int);
    rt_rng_seed(&w->rng, (uint64_t)O.seed * 1000003ULL + (uint64_t)idx);
    {
        int64_t n = G.ack_hi - G.ack_lo;
        rl_dist_init(&w->dist, &DIST, n > 1 ? (uint64_t)n : 1000);
    }
    uv_loop_init(&w->loop);
    uv_timer_init(&w->loop, &w->tick);
    w->tick.data = w;
    uv_timer_start(&w->tick, on_tick, 1, 1);
    for (int i = 0; i < nslots; i++) {
        struct rl_slot *s = &w->slots[i];
        s->w = w;
        s->st = SL_DOWN;
        s->wbuf = malloc(RC.max_request);
        s->rbuf = malloc(RL_RBUF);
        if (!s->wbuf || !s->rbuf) {
            die("out of memory");
        }
        uv_timer_init(&w->loop, &s->timer);
        s->timer.data = s;
        slot_connect(s);
    }
}

static void worker_free(struct rl_worker *w)
{
    if (uv_loop_close(&w->loop) != 0) {
        fprintf(stderr, "rt-load: worker %d: loop not empty at exit\n", w->idx);
    }
    for (int i = 0; i < w->nslots; i++) {
        free(w->slots[i].wbuf);
        free(w->slots[i].rbuf);
    }
    free(w->slots);
    free(w->idle);
    free(w->h_op);
    pthread_mutex_destroy(&w->mu);
}

/* Main-thread view */

static void snapshot_interval(struct rl_counts *c,
                              struct rl_hist *h,
                              int *inflight)
{
    memset(c, 0, sizeof(*c));
    rl_hist_reset(h);
    *inflight = 0;
    for (int i = 0; i < NW; i++) {
        pthread_mutex_lock(&W[i].mu);
        rl_counts_add(c, &W[i].c_int);
        rl_hist_merge(h, &W[i].h_int);
        memset(&W[i].c_int, 0, sizeof(W[i].c_int));
        rl_hist_reset(&W[i].h_int);
        pthread_mutex_unlock(&W[i].mu);
        *inflight += __atomic_load_n(&W[i].busy, __ATOMIC_RELAXED);
    }
}

static uint64_t measured_done(void)
{
    uint64_t n = 0;
    for (int i = 0; i < NW; i++) {
        pthread_mutex_lock(&W[i].mu);
        n += W[i].measured_done;
        pthread_mutex_unlock(&W[i].mu);
    }
    return n;
}

static void sleep_until(uint64_t t)
{
    uint64_t now = now_ns();
    if (t > now) {
        struct timespec ts;
        uint64_t d = t - now;
        ts.tv_sec = (time_t)(d / 1000000000ULL);
        ts.tv_nsec = (long)(d % 1000000000ULL);
        nanosleep(&ts, NULL);
    }
}

static void on_signal(int sig)
{
    (void)sig;
    interrupted = 1;
}

static int rows_cap;

static void row_push(struct rl_result *res, const struct rl_row *r)
{
    if (res->nrows == rows_cap) {
        rows_cap = rows_cap ? rows_cap * 2 : 256;
        res->rows = realloc(res->rows, (size_t)rows_cap * sizeof(*res->rows));
        if (!res->rows) {
            die("out of memory");
        }
    }
    res->rows[res->nrows++] = *r;
}

/* Runs the engine in @mode. For RL_MODE_RUN fills @res. Returns 0. */
static int engine(enum rl_mode mode, struct rl_result *res)
{
    int nslots = (int)(O.rate > 0 ? O.connections : O.workers);
    uint64_t warm_us = 0, dur_us = 0, t_conn;
    char err[RL_ERR_SIZE];
    struct rl_hist h;
    int sec = 0;
    int connected;

    if (mode == RL_MODE_PRELOAD) {
        nslots = (int)(O.workers > 64 ? O.workers : 64);
    }
    if (rl_duration_parse(O.warmup, &warm_us, err) ||
        rl_duration_parse(O.duration, &dur_us, err)) {
        die("%s", err);
    }
    NW = (int)O.threads;
    if (NW > nslots) {
        NW = nslots;
    }
    G.mode = mode;
    G.go = 0;
    G.stop = 0;
    G.started_measured = 0;
    W = calloc((size_t)NW, sizeof(*W));
    if (!W) {
        die("out of memory");
    }
    for (int i = 0; i < NW; i++) {
        int n = nslots / NW + (i < nslots % NW);
        worker_init(
            &W[i], i, n,
            mode == RL_MODE_RUN && O.rate > 0 ? (double)O.rate / NW : 0);
    }
    for (int i = 0; i < NW; i++) {
        if (pthread_create(&W[i].th, NULL, worker_main, &W[i]) != 0) {
            die("pthread_create failed");
        }
    }
    /* Connections first: connecting is not part of any measurement. */
    t_conn = now_ns();
    for (;;) {
        connected = 0;
        for (int i = 0; i < NW; i++) {
            connected += __atomic_load_n(&W[i].connected, __ATOMIC_RELAXED);
        }
        if (connected >= nslots || interrupted) {
            break;
        }
        if (now_ns() - t_conn > 10000000000ULL) {
            if (connected == 0) {
                G.stop = 2;
                G.go = 1;
                for (int i = 0; i < NW; i++) {
                    pthread_join(W[i].th, NULL);
                }
                die("cannot connect to %s:%d", RC.t.host, RC.t.port);
            }
            fprintf(stderr,
                    "rt-load: only %d of %d connections up after "
                    "10 s; starting anyway\n",
                    connected, nslots);
            break;
        }
        usleep(2000);
    }
    G.t_start = now_ns();
    G.t_warm = G.t_start + warm_us * 1000ULL;
    G.t_end = dur_us ? G.t_warm + dur_us * 1000ULL : UINT64_MAX;
    if (res) {
        res->start_unix = (double)time(NULL);
        {
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            res->start_unix = (double)ts.tv_sec + ts.tv_nsec / 1e9;
        }
    }
    __atomic_store_n(&G.go, 1, __ATOMIC_RELEASE);

    /* Report every second; check the end every 20 ms. */
    rl_hist_reset(&h);
    for (;;) {
        uint64_t next = G.t_start + (uint64_t)(sec + 1) * 1000000000ULL;
        int end = 0;
        while (now_ns() < next) {
            sleep_until(now_ns() + 20000000ULL < next ? now_ns() + 20000000ULL
                                                      : next);
            if (interrupted) {
                end = 1;
                break;
            }
            if (mode == RL_MODE_RUN) {
                if (now_ns() >= G.t_end) {
                    end = 1;
                    break;
                }
                if (O.requests > 0 && measured_done() >= (uint64_t)O.requests) {
                    end = 1;
                    break;
                }
            } else if (__atomic_load_n(&G.pre_next, __ATOMIC_RELAXED) >=
                       G.pre_items) {
                int busy = 0;
                for (int i = 0; i < NW; i++) {
                    busy += __atomic_load_n(&W[i].busy, __ATOMIC_RELAXED);
                }
                if (!busy) {
                    end = 1;
                    break;
                }
            }
        }
        {
            struct rl_row r;
            struct timespec ts;
            double el = (double)(now_ns() - G.t_start) / 1e9;
            double span = el - sec;
            memset(&r, 0, sizeof(r));
            snapshot_interval(&r.c, &h, &r.inflight);
            sec++;
            if (span <= 0.05 && end) {
                /* A sliver at the end: not a row of its own. */
                span = 0;
            }
            r.sec = sec;
            clock_gettime(CLOCK_REALTIME, &ts);
            r.unix_time = (double)ts.tv_sec + ts.tv_nsec / 1e9;
            r.warmup =
                G.t_start + (uint64_t)(sec - 1) * 1000000000ULL < G.t_warm;
            r.p50 = rl_hist_pct(&h, 50) / 1000.0;
            r.p95 = rl_hist_pct(&h, 95) / 1000.0;
            r.p99 = rl_hist_pct(&h, 99) / 1000.0;
            r.max = rl_hist_pct(&h, 100) / 1000.0;
            r.ranges =
                mode == RL_MODE_RUN && O.master_http[0]
                    ? rl_master_ranges(O.master_http, RC.t.account, RC.t.table)
                    : -1;
            if (mode == RL_MODE_RUN && res && span > 0) {
                row_push(res, &r);
            }
            if (!O.quiet && span > 0) {
                double rate = (double)r.c.ops / (span < 1 ? span : 1);
                if (mode == RL_MODE_PRELOAD) {
                    static uint64_t prev;
                    uint64_t done =
                        __atomic_load_n(&G.pre_done_entities, __ATOMIC_RELAXED);
                    fprintf(stderr,
                            "rt-load preload [%4ds] %" PRIu64
                            "/%ld entities"
                            "  %.0f entities/s  in flight %d\n",
                            sec, done, O.preload, (double)(done - prev) / span,
                            r.inflight);
                    prev = done;
                } else {
                    char rg[32] = "";
                    if (r.ranges >= 0) {
                        snprintf(rg, sizeof(rg), "  ranges %d", r.ranges);
                    }
                    fprintf(
                        stderr,
                        "rt-load [%4ds %s] %8.0f ops/s  p50 %7.2f  p99 "
                        "%7.2f  max %7.2f ms  503 %5.1f%%  retries %" PRIu64
                        "  err %" PRIu64 "  404 %" PRIu64 "  in flight %d%s\n",
                        sec, r.warmup ? "warm" : "run ", rate, r.p50, r.p99,
                        r.max,
                        r.c.requests
                            ? 100.0 * (double)r.c.r503 / (double)r.c.requests
                            : 0.0,
                        r.c.retries, r.c.errors, r.c.not_found, r.inflight, rg);
                }
            }
        }
        if (end) {
            break;
        }
    }
    /* Stop and drain (bounded by the request timeout + 1 s). */
    {
        uint64_t t_stop = now_ns();
        if (mode == RL_MODE_RUN && G.t_end == UINT64_MAX) {
            G.t_end = t_stop;
        }
        if (mode == RL_MODE_RUN && t_stop < G.t_end) {
            G.t_end = t_stop; /* interrupted or bounded: window ends now */
        }
        G.stop = 1;
        for (;;) {
            int busy = 0;
            for (int i = 0; i < NW; i++) {
                busy += __atomic_load_n(&W[i].busy, __ATOMIC_RELAXED);
            }
            if (!busy || now_ns() - t_stop > (TIMEOUT_MS + 1000) * 1000000ULL) {
                break;
            }
            usleep(2000);
        }
        G.stop = 2;
    }
    for (int i = 0; i < NW; i++) {
        pthread_join(W[i].th, NULL);
    }
    if (res) {
        uint64_t t_last = G.t_end;
        res->secs = (double)(t_last - G.t_warm) / 1e9;
        if (res->secs <= 0) {
            res->secs = 1e-9;
        }
        for (int op = 0; op < RL_OP__NR; op++) {
            rl_hist_reset(&res->h_op[op]);
        }
        rl_hist_reset(&res->h_all);
        for (int i = 0; i < NW; i++) {
            for (int op = 0; op < RL_OP__NR; op++) {
                rl_counts_add(&res->op[op], &W[i].c_op[op]);
                rl_counts_add(&res->all, &W[i].c_op[op]);
                rl_hist_merge(&res->h_op[op], &W[i].h_op[op]);
                rl_hist_merge(&res->h_all, &W[i].h_op[op]);
            }
            res->unsent += W[i].unsent;
            for (int k = 0; k < W[i].nerrs; k++) {
                struct rl_errkind *e = &W[i].errs[k];
                int j;
                for (j = 0; j < res->nerrs; j++) {
                    if (res->errs[j].status == e->status &&
                        !strcmp(res->errs[j].code, e->code) &&
                        !strcmp(res->errs[j].op, e->op)) {
                        res->errs[j].n += e->n;
                        break;
                    }
                }
                if (j == res->nerrs && res->nerrs < RL_ERRKINDS) {
                    res->errs[res->nerrs++] = *e;
                }
            }
        }
    } else {
        /* Preload: report failures. */
        for (int i = 0; i < NW; i++) {
            for (int k = 0; k < W[i].nerrs; k++) {
                fprintf(stderr,
                        "rt-load: preload error: %" PRIu64 " x %d %s %s\n",
                        W[i].errs[k].n, W[i].errs[k].status, W[i].errs[k].code,
                        W[i].errs[k].detail);
            }
        }
    }
    for (int i = 0; i < NW; i++) {
        worker_free(&W[i]);
    }
    free(W);
    W = NULL;
    return 0;
}

/* Blocking one-shot request on a fresh connection (create table). */
static int blocking_request(const struct rl_reqargs *a, struct rl_resp *resp)
{
    char *buf = malloc(RC.max_request);
    char rb[8192];
    size_t len;
    int fd, rc = -1;
    struct timeval tv = {10, 0};
    char date[RL_DATE_LEN + 1];
    if (!buf) {
        return -1;
    }
    rl_http_date(time(NULL), date);
    len = rl_req_build(&RC, a, date, buf);
    fd = socket(ADDR.ss_family, SOCK_STREAM, 0);
    if (fd < 0) {
        free(buf);
        return -1;
    }
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    if (connect(fd, (struct sockaddr *)&ADDR,
                ADDR.ss_family == AF_INET6 ? sizeof(struct sockaddr_in6)
                                           : sizeof(struct sockaddr_in)) != 0 ||
        write(fd, buf, len) != (ssize_t)len) {
        goto out;
    }
    rl_resp_begin(resp, RL_BODY_IGNORE);
    for (;;) {
        ssize_t n = read(fd, rb, sizeof(rb));
        size_t used;
        int r;
        if (n <= 0) {
            rc = rl_resp_eof(resp) ? 0 : -1;
            break;
        }
        r = rl_resp_feed(resp, rb, (size_t)n, &used);
        if (r != 0) {
            rc = r == 1 ? 0 : -1;
            break;
        }
    }
out:
    close(fd);
    free(buf);
    return rc;
}

static void resolve(void)
{
    struct addrinfo hints, *ai = NULL;
    char host[256], port[16];
    int rc;
    if (O.connect[0]) {
        int p;
        if (rt_addr_split(O.connect, host, sizeof(host), &p) != 0) {
            die("bad --connect '%s'", O.connect);
        }
        snprintf(port, sizeof(port), "%d", p);
    } else {
        snprintf(host, sizeof(host), "%s", RC.t.host);
        snprintf(port, sizeof(port), "%d", RC.t.port);
    }
    memset(&hints, 0, sizeof(hints));
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    rc = getaddrinfo(host, port, &hints, &ai);
    if (rc != 0 || !ai) {
        die("cannot resolve %s: %s", host, gai_strerror(rc));
    }
    memcpy(&ADDR, ai->ai_addr, ai->ai_addrlen);
    freeaddrinfo(ai);
}

static void urlenc_filter(const char *in, char *out, size_t n)
{
    static const char hx[] = "0123456789ABCDEF";
    size_t o = 0;
    for (const unsigned char *p = (const unsigned char *)in; *p && o + 4 < n;
         p++) {
        if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
            (*p >= '0' && *p <= '9') || strchr("-_.~'()", *p)) {
            out[o++] = (char)*p;
        } else {
            out[o++] = '%';
            out[o++] = hx[*p >> 4];
            out[o++] = hx[*p & 15];
        }
    }
    out[o] = '\0';
}

int main(int argc, char **argv)
{
    char err[RL_ERR_SIZE] = "";
    char mixbuf[256];
    uint64_t v;
    struct rl_result *res;
    struct rl_report_cfg rep;
    int rc = 0;
    char *plot_csv = NULL;

    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            rt_config_usage("rt-load",
                            "Load generator for Azure Table endpoints "
                            "(rangetable, Azurite, the real service over "
                            "http).",
                            rl_opts, stdout);
            fputs(rl_help_more, stdout);
            return 0;
        }
    }
    rt_config_parse("rt-load", "Load generator for Azure Table endpoints.",
                    rl_opts, argc, argv, NULL, 0);
    signal(SIGPIPE, SIG_IGN);
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);

    /* Target and auth */
    memset(&RC, 0, sizeof(RC));
    if (rl_target_parse(&RC.t, O.endpoint, O.account, err) != 0) {
        die("%s", err);
    }
    snprintf(RC.t.table, sizeof(RC.t.table), "%s", O.table);
    if (!strcasecmp(O.auth, "sharedkey")) {
        RC.t.auth = RL_AUTH_SHAREDKEY;
    } else if (!strcasecmp(O.auth, "sharedkeylite")) {
        RC.t.auth = RL_AUTH_SHAREDKEYLITE;
    } else if (!strcasecmp(O.auth, "sas")) {
        RC.t.auth = RL_AUTH_SAS;
    } else if (!strcasecmp(O.auth, "none")) {
        RC.t.auth = RL_AUTH_NONE;
    } else {
        die("--auth: sharedkey, sharedkeylite, sas or none");
    }
    if (O.key[0]) {
        if (rl_signer_init(&RC.t.signer, RC.t.account, O.key) != 0) {
            die("--key is not a base64 key (or the account name is too "
                "long)");
        }
        RC.t.have_key = 1;
    }
    if (RC.t.auth == RL_AUTH_SAS) {
        if (O.sas[0]) {
            snprintf(RC.t.sas, sizeof(RC.t.sas), "%s",
                     O.sas[0] == '?' ? O.sas + 1 : O.sas);
        } else if (RC.t.have_key) {
            time_t now = time(NULL);
            if (rl_sas_account(&RC.t.signer, now - 900, now + 86400, RC.t.sas,
                               sizeof(RC.t.sas)) != 0) {
                die("cannot build the SAS token");
            }
        } else {
            die("--auth sas needs --sas or --key");
        }
    }

    /* Workload */
    if (O.workload[0]) {
        if (rl_ycsb_preset(O.workload, &MIX, &DIST, err) != 0) {
            die("%s", err);
        }
    } else {
        rl_mix_parse("get", &MIX, err);
        rl_dist_parse("uniform", &DIST, err);
    }
    if (O.mix[0] && rl_mix_parse(O.mix, &MIX, err) != 0) {
        die("--mix: %s", err);
    }
    if (O.dist[0] && rl_dist_parse(O.dist, &DIST, err) != 0) {
        die("--dist: %s", err);
    }
    if (!strcasecmp(O.protocol, "etcd")) {
        for (int op = 0; op < RL_OP__NR; op++) {
            if (MIX.w[op] && op != RL_OP_INSERT && op != RL_OP_GET &&
                op != RL_OP_UPSERT && op != RL_OP_UPDATE && op != RL_OP_MERGE) {
                die("--protocol etcd: --mix takes insert, upsert, update, "
                    "merge and get only");
            }
        }
        if (O.create_table || O.preload > 0) {
            die("--protocol etcd: no --create-table or --preload");
        }
        RC.etcd = 1;
    } else if (strcasecmp(O.protocol, "azure")) {
        die("--protocol: azure or etcd");
    }
    if (O.partitions < 0) {
        die("--partitions must be >= 0");
    }
    RC.km.partitions = (uint64_t)O.partitions;
    {
        enum rl_key_scheme ks;
        if (rl_scheme_parse(O.pk_scheme, 0, &ks, err) != 0) {
            die("--pk-scheme: %s", err);
        }
        RC.km.pk_scheme = ks;
        if (rl_scheme_parse(O.rk_scheme, 1, &ks, err) != 0) {
            die("--rk-scheme: %s", err);
        }
        RC.km.rk_scheme = ks;
    }
    if (rl_size_parse(O.entity_size, &v, err) != 0) {
        die("--entity-size: %s", err);
    }
    RC.entity_size = v;
    if (O.props < 1 || O.props > 250) {
        die("--props must be 1..250");
    }
    RC.props = (unsigned)O.props;
    if (O.batch_size < 1 || O.batch_size > 100) {
        die("--batch-size must be 1..100");
    }
    if (O.preload_batch < 1 || O.preload_batch > 100) {
        die("--preload-batch must be 1..100");
    }
    RC.page_size = (unsigned)(O.page_size > 0 ? O.page_size : 1000);
    RC.range_len = (unsigned)(O.range_len > 0 ? O.range_len : 50);
    urlenc_filter(O.scan_filter, RC.scan_filter, sizeof(RC.scan_filter));
    if (rl_reqcfg_prepare(
            &RC,
            (unsigned)(O.batch_size > O.preload_batch ? O.batch_size
                                                      : O.preload_batch),
            err) != 0) {
        die("%s", err);
    }
    if (O.workers < 1 || O.connections < 1 || O.threads < 1) {
        die("--workers, --connections and --threads must be >= 1");
    }
    if (rl_duration_parse(O.timeout, &v, err) != 0) {
        die("--timeout: %s", err);
    }
    TIMEOUT_MS = v / 1000 ? v / 1000 : 1;
    if (rl_duration_parse(O.retry_base, &v, err) != 0) {
        die("--retry-base: %s", err);
    }
    RETRY_BASE_MS = v / 1000;
    if (rl_duration_parse(O.retry_cap, &v, err) != 0) {
        die("--retry-cap: %s", err);
    }
    RETRY_CAP_MS = v / 1000;
    if (!strcasecmp(O.retry, "sdk")) {
        RETRY_SDK = 1;
    } else if (!strcasecmp(O.retry, "none")) {
        RETRY_SDK = 0;
    } else {
        die("--retry: sdk or none");
    }
    {
        uint64_t d, w;
        if (rl_duration_parse(O.duration, &d, err) ||
            rl_duration_parse(O.warmup, &w, err)) {
            die("%s", err);
        }
        if (d == 0 && O.requests <= 0) {
            die("--duration 0 needs --requests N");
        }
    }
    {
        struct rlimit rl;
        if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
            rl.rlim_cur = rl.rlim_max;
            setrlimit(RLIMIT_NOFILE, &rl);
        }
    }
    resolve();

    /* Id space */
    pthread_mutex_init(&G.mu, NULL);
    G.win_hi = calloc(RL_ACK_WIN, 1);
    G.win_lo = calloc(RL_ACK_WIN, 1);
    if (!G.win_hi || !G.win_lo) {
        die("out of memory");
    }
    G.keys = O.keys >= 0 ? O.keys : O.preload;
    G.insert_base = O.insert_start >= 0 ? O.insert_start : G.keys;
    G.read_ext = G.insert_base == G.keys;
    G.ack_lo = 0;
    G.ack_hi = G.insert_base;
    G.next_hi = G.insert_base;
    G.next_lo = 0;
    G.batch_row = (uint64_t)time(NULL) * 1000ULL;

    if (O.create_table) {
        struct rl_reqargs a;
        struct rl_resp *r = calloc(1, sizeof(*r));
        memset(&a, 0, sizeof(a));
        a.rq = RL_RQ_CREATE_TABLE;
        if (!r || blocking_request(&a, r) != 0) {
            die("create table %s: no answer from %s:%d", O.table, RC.t.host,
                RC.t.port);
        }
        if (r->status != 201 && r->status != 204 && r->status != 409) {
            die("create table %s: HTTP %d %s %s", O.table, r->status,
                r->error_code, r->body_head);
        }
        if (!O.quiet) {
            fprintf(stderr, "rt-load: table %s %s\n", O.table,
                    r->status == 409 ? "exists" : "created");
        }
        free(r);
    }
    if (O.preload > 0) {
        uint64_t P = RC.km.partitions, B = (uint64_t)O.preload_batch;
        uint64_t N = (uint64_t)O.preload;
        uint64_t t0 = now_ns();
        if (P == 0 || B == 1) {
            G.pre_items = (N + B - 1) / B;
            G.pre_batch_ok = 0;
        } else {
            uint64_t rows = (N + P - 1) / P;
            G.pre_items = P * ((rows + B - 1) / B);
            G.pre_batch_ok = 1;
        }
        engine(RL_MODE_PRELOAD, NULL);
        if (interrupted) {
            return 130;
        }
        if (!O.quiet) {
            double s = (double)(now_ns() - t0) / 1e9;
            fprintf(stderr,
                    "rt-load: preloaded %" PRIu64
                    " entities in "
                    "%.1f s (%.0f/s)\n",
                    G.pre_done_entities, s, (double)G.pre_done_entities / s);
        }
        if (G.pre_done_entities < N) {
            fprintf(stderr,
                    "rt-load: preload incomplete: %" PRIu64 " of %" PRIu64 "\n",
                    G.pre_done_entities, N);
            rc = 1;
        }
    }

    /* The run */
    res = calloc(1, sizeof(*res));
    if (!res) {
        die("out of memory");
    }
    if (O.master_http[0]) {
        res->ranges_start =
            rl_master_ranges(O.master_http, RC.t.account, RC.t.table);
    }
    rl_mix_format(&MIX, mixbuf, sizeof(mixbuf));
    if (!O.quiet) {
        fprintf(stderr,
                "rt-load: %s %s%s, mix %s, dist %s, %ld partitions, "
                "%" PRIu64 "-byte entities, %u threads\n",
                O.endpoint, O.rate > 0 ? "open loop " : "closed loop ",
                O.rate > 0 ? "" : "", mixbuf, rl_dist_name(DIST.kind),
                O.partitions, (uint64_t)RC.body.n, (unsigned)O.threads);
    }
    engine(RL_MODE_RUN, res);
    {
        double t1 = res->start_unix + (double)(res->nrows + 1);
        if (O.master_http[0]) {
            res->ranges_end =
                rl_master_ranges(O.master_http, RC.t.account, RC.t.table);
            rl_fetch_events(O.master_http, res, res->start_unix - 1, t1 + 1);
        } else {
            res->ranges_start = res->ranges_end = -1;
        }
    }

    memset(&rep, 0, sizeof(rep));
    rep.label = O.label;
    rep.csv = O.csv;
    rep.json = O.json;
    rep.plot = O.plot;
    rep.master_http = O.master_http;
    rep.table = O.table;
    rep.account = RC.t.account;
    rep.mix = mixbuf;
    rep.dist = O.dist[0] ? O.dist : rl_dist_name(DIST.kind);
    {
        static char mode[64];
        if (O.rate > 0) {
            snprintf(mode, sizeof(mode), "open %ld/s over %ld connections",
                     O.rate, O.connections);
        } else {
            snprintf(mode, sizeof(mode), "closed %ld workers", O.workers);
        }
        rep.mode = mode;
    }
    snprintf(rep.endpoint, sizeof(rep.endpoint), "%s", O.endpoint);
    if (O.plot[0] && !O.csv[0]) {
        size_t n = strlen(O.plot) + 5;
        plot_csv = malloc(n);
        snprintf(plot_csv, n, "%s.csv", O.plot);
        rep.csv = plot_csv;
    }
    rl_report_text(&rep, res);
    if (rep.csv[0] && rl_report_csv(&rep, res) != 0) {
        rc = 1;
    }
    if (rep.json[0] && rl_report_json(&rep, res) != 0) {
        rc = 1;
    }
    if (rep.plot[0] && rl_report_plot(&rep, res) != 0) {
        rc = 1;
    }
    if (res->all.errors || res->all.throttled) {
        rc = 1;
    }
    if (interrupted) {
        rc = 130;
    }
    free(plot_csv);
    free(res->rows);
    free(res->events);
    free(res);
    free(G.win_hi);
    free(G.win_lo);
    rl_signer_wipe(&RC.t.signer);
    rl_reqcfg_free(&RC);
    rt_config_free(rl_opts);
    return rc;
}
