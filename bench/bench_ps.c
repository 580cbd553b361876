/* bench_ps: the partition-server benchmark.
 *
 * One run measures, in order:
 *   1. raw LMDB on the same disk: synced puts, 1 per txn and 100 per txn
 *      (the limits every durable-write number is compared with);
 *   2. starts a real rt-master and one rt-partition-server (port 0,
 *      --port-file, temp data dirs), waits for the server to be up, creates
 *      two tables through the master RPC and learns their ranges (GET_MAP);
 *   3. durable single-entity inserts with 1, 16, 64 concurrent clients;
 *   4. entity group transactions (100 ops, one PK, atomic) x 16 outstanding;
 *   5. pipelined point gets on random existing keys;
 *   6. loads N entities (1000 ops per call, non-atomic) into a second table
 *      and scans it page by page with a ~10% filter (when common/rt_filter.h
 *      exists; else without a filter);
 *   7. prints a table (value, ratio to the LMDB limit and to the goal) and a
 *      JSON line; 8. stops the processes it started by PID.
 *
 * Everything runs on one thread and one libuv loop: the machine has two
 * cores shared with the processes under test. It asserts nothing about
 * speed; it exits non-zero only when something did not work.
 * See README.md beside this file. */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <libgen.h>
#include <limits.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <netinet/in.h>

#include <jansson.h>
#include <lmdb.h>
#include <uv.h>

#include "rt.pb-c.h"
#include "rt_buf.h"
#include "rt_config.h"
#include "rt_entity.h"
#include "rt_err.h"
#include "rt_key.h"
#include "rt_log.h"
#include "rt_rpc.h"
#include "rt_time.h"

#include "rt_filter.h"

extern char **environ;

#define BENCH_ACCOUNT "devstoreaccount1"
#define BENCH_FILTER "Bucket lt 10"
#define BENCH_WRITE_TIMEOUT_MS 60000
#define BENCH_READ_TIMEOUT_MS 30000
#define BENCH_MAX_DEPTH 4096

/* Targets set for the partition server on the reference 2-core machine;
 * the run prints each measurement against its target (bench/README.md). */
#define GOAL_INSERTS_64 25000.0
#define GOAL_GETS 200000.0
#define GOAL_SCAN 500000.0

/* Options */

static struct
{
    char *dir;
    char *bin_dir;
    char *json;
    char *clients;
    char *server_log_level;
    long entities;
    long lmdb_ms;
    long lmdb_per_txn;
    long insert_ms;
    long batch_ms;
    long get_ms;
    long warmup_ms;
    long batch_depth;
    long get_depth;
    long load_depth;
    long load_ops;
    long scan_limit;
    long max_pending;
    char *ps_args;
    int quick;
    int keep;
    int no_filter;
    int lmdb_same_batch;
} O;

static struct rt_opt bench_opts[] = {
    {"dir", RT_OPT_STR, &O.dir, "",
     "parent of the temp dir (default: mkdtemp in /tmp; must be on the disk "
     "you want to measure)"},
    {"bin-dir", RT_OPT_STR, &O.bin_dir, "",
     "build tree root holding master/rt-master and "
     "partition-server/rt-partition-server (or a dir holding both); default: "
     ".. from this binary"},
    {"quick", RT_OPT_BOOL, &O.quick, NULL,
     "~30 s smoke run (short phases, 100k entities)"},
    {"json", RT_OPT_STR, &O.json, "", "also write the JSON line to FILE"},
    {"keep", RT_OPT_BOOL, &O.keep, NULL,
     "keep the temp dir (data, server logs) after the run"},
    {"entities", RT_OPT_INT, &O.entities, "0",
     "entities loaded for the scan (0 = 1000000, --quick 100000)"},
    {"clients", RT_OPT_STR, &O.clients, "1,16,64",
     "concurrent single-insert clients, comma list"},
    {"lmdb-per-txn", RT_OPT_INT, &O.lmdb_per_txn, "0",
     "also measure N synced puts per txn (the group commit a closed loop "
     "of N writers allows at best; 0 = off)"},
    {"lmdb-ms", RT_OPT_INT, &O.lmdb_ms, "0",
     "raw LMDB phase length each (0 = 3000, --quick 1000)"},
    {"insert-ms", RT_OPT_INT, &O.insert_ms, "0",
     "single-insert phase length each (0 = 5000, --quick 2000)"},
    {"batch-ms", RT_OPT_INT, &O.batch_ms, "0",
     "batch phase length (0 = 5000, --quick 2000)"},
    {"get-ms", RT_OPT_INT, &O.get_ms, "0",
     "point-get phase length (0 = 5000, --quick 2000)"},
    {"warmup-ms", RT_OPT_INT, &O.warmup_ms, "0",
     "unmeasured warm-up before each phase (0 = 1000, --quick 300)"},
    {"batch-depth", RT_OPT_INT, &O.batch_depth, "16",
     "outstanding 100-op entity group transactions"},
    {"get-depth", RT_OPT_INT, &O.get_depth, "256", "outstanding point gets"},
    {"load-depth", RT_OPT_INT, &O.load_depth, "8", "outstanding load calls"},
    {"load-ops", RT_OPT_INT, &O.load_ops, "1000", "ops per load call"},
    {"scan-limit", RT_OPT_INT, &O.scan_limit, "1000", "scan page limit"},
    {"max-pending", RT_OPT_INT, &O.max_pending, "20000",
     "--max-pending passed to the partition server"},
    {"no-filter", RT_OPT_BOOL, &O.no_filter, NULL,
     "scan without a filter even when the filter module is available"},
    {"server-log-level", RT_OPT_STR, &O.server_log_level, "warn",
     "--log-level of the started servers (their logs go to the temp dir)"},
    {"lmdb-same-batch", RT_OPT_BOOL, &O.lmdb_same_batch, NULL,
     "also measure raw LMDB at as many puts per txn as each --clients "
     "value, and compare each insert phase with that"},
    {"ps-args", RT_OPT_STR, &O.ps_args, "",
     "extra flags for the partition server, space separated (an A/B of a "
     "server flag, e.g. \"--group-wait-us 0\")"},
    {NULL, 0, NULL, NULL, NULL},
};

/* Small helpers */

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static uint64_t now_ns(void)
{
    return uv_hrtime();
}

static double secs_since(uint64_t t0)
{
    return (double)(now_ns() - t0) / 1e9;
}

static uint64_t mix64(uint64_t x)
{
    /* splitmix64 finaliser */
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

static uint64_t rng_state = 0x2545f4914f6cdd1dULL;
static uint64_t rng_next(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

static double cpu_self_s(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 +
           (double)ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
}

/* CPU seconds (user + system) of @pid from /proc, or -1. */
static double cpu_pid_s(pid_t pid)
{
    char path[64], buf[1024];
    FILE *f;
    size_t n;
    char *p;
    unsigned long ut = 0, st = 0;

    if (pid <= 0) {
        return -1;
    }
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    f = fopen(path, "r");
    if (!f) {
        return -1;
    }
    n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    p = strrchr(buf, ')');
    if (!p) {
        return -1;
    }
    /* After ")": state(3) ppid pgrp session tty tpgid flags minflt cminflt
     * majflt cmajflt utime(14) stime(15). */
    if (sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu",
               &ut, &st) != 2) {
        return -1;
    }
    return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

/* Latency samples (µs), exact percentiles by sorting. */
struct lat
{
    uint32_t *v;
    size_t n, cap;
};

static void lat_add(struct lat *l, uint64_t ns)
{
    uint64_t us = ns / 1000;
    if (l->n == l->cap) {
        l->cap = l->cap ? l->cap * 2 : 4096;
        l->v = realloc(l->v, l->cap * sizeof(*l->v));
        if (!l->v) {
            die("out of memory");
        }
    }
    l->v[l->n++] = us > UINT32_MAX ? UINT32_MAX : (uint32_t)us;
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

/* Percentile @p (0..100) in ms; sorts in place. */
static double lat_pct_ms(struct lat *l, double p)
{
    size_t i;
    if (l->n == 0) {
        return 0;
    }
    qsort(l->v, l->n, sizeof(*l->v), cmp_u32);
    i = (size_t)(p / 100.0 * (double)(l->n - 1) + 0.5);
    return l->v[i] / 1000.0;
}

static void lat_free(struct lat *l)
{
    free(l->v);
    memset(l, 0, sizeof(*l));
}

/* Processes we started (stopped by PID only). */

struct child
{
    const char *name;
    pid_t pid;
    char log[PATH_MAX];
    int exited;
    int status;
};

static struct child ch_master = {"rt-master", 0, "", 0, 0};
static struct child ch_ps = {"rt-partition-server", 0, "", 0, 0};
static char tmp_root[1024];

static void child_stop(struct child *c)
{
    int st;
    uint64_t t0;

    if (c->pid <= 0 || c->exited) {
        return;
    }
    kill(c->pid, SIGTERM);
    t0 = now_ns();
    for (;;) {
        pid_t r = waitpid(c->pid, &st, WNOHANG);
        if (r == c->pid) {
            c->exited = 1;
            c->status = st;
            return;
        }
        if (r < 0) {
            c->exited = 1;
            c->status = -1;
            return;
        }
        if (now_ns() - t0 > 15ULL * 1000000000ULL) {
            fprintf(stderr,
                    "bench: %s (pid %d) ignored SIGTERM for 15 s, "
                    "sending SIGKILL\n",
                    c->name, (int)c->pid);
            kill(c->pid, SIGKILL);
            waitpid(c->pid, &st, 0);
            c->exited = 1;
            c->status = st;
            return;
        }
        usleep(10000);
    }
}

/* Has the child died on its own? */
static int child_dead(struct child *c)
{
    int st;
    if (c->pid <= 0 || c->exited) {
        return c->exited;
    }
    if (waitpid(c->pid, &st, WNOHANG) == c->pid) {
        c->exited = 1;
        c->status = st;
        return 1;
    }
    return 0;
}

static void child_tail(const struct child *c, int lines)
{
    char cmd[PATH_MAX + 64];
    if (!c->log[0]) {
        return;
    }
    fprintf(stderr, "---- last lines of %s (%s) ----\n", c->name, c->log);
    fflush(stderr);
    snprintf(cmd, sizeof(cmd), "tail -n %d '%s' >&2", lines, c->log);
    if (system(cmd) != 0) {
        fprintf(stderr, "(could not read the log)\n");
    }
}

/* Counts "level=warn|error|fatal" lines in @c's log and prints the first
 * @show of them; *@san = 1 when a sanitizer report is there. */
static int log_scan(const struct child *c, int show, int *san)
{
    char line[2048];
    int n = 0;
    FILE *f = c->log[0] ? fopen(c->log, "r") : NULL;

    *san = 0;
    if (!f) {
        return 0;
    }
    while (fgets(line, sizeof(line), f)) {
        if (strstr(line, "Sanitizer") || strstr(line, "runtime error:")) {
            *san = 1;
        }
        if (strstr(line, "level=warn") || strstr(line, "level=error") ||
            strstr(line, "level=fatal")) {
            if (n++ < show) {
                printf("  %s: %s", c->name, line);
            }
        }
    }
    fclose(f);
    return n;
}

static int rm_cb(const char *path,
                 const struct stat *sb,
                 int flag,
                 struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(path);
}

static void cleanup(void)
{
    child_stop(&ch_ps);
    child_stop(&ch_master);
    if (tmp_root[0] && !O.keep) {
        nftw(tmp_root, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
        tmp_root[0] = '\0';
    }
}

static void die(const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "bench: ");
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n");
    if (child_dead(&ch_ps)) {
        fprintf(stderr, "bench: rt-partition-server exited (status 0x%x)\n",
                ch_ps.status);
    }
    child_tail(&ch_ps, 30);
    child_tail(&ch_master, 10);
    O.keep = 1; /* keep the logs for a post-mortem */
    cleanup();
    if (tmp_root[0]) {
        fprintf(stderr, "bench: kept %s\n", tmp_root);
    }
    exit(1);
}

static volatile sig_atomic_t interrupted;

static void on_fatal_signal(int sig)
{
    /* First signal: the phases notice (check_interrupt) and clean up.
     * Second one: async-signal-safe hard stop of our children by PID. */
    if (!interrupted) {
        interrupted = sig;
        return;
    }
    if (ch_ps.pid > 0 && !ch_ps.exited) {
        kill(ch_ps.pid, SIGTERM);
        waitpid(ch_ps.pid, NULL, 0);
    }
    if (ch_master.pid > 0 && !ch_master.exited) {
        kill(ch_master.pid, SIGTERM);
        waitpid(ch_master.pid, NULL, 0);
    }
    _exit(128 + sig);
}

/* Stops the servers and removes the temp dir (unless --keep) after a
 * SIGINT/SIGTERM. */
static void check_interrupt(void)
{
    if (!interrupted) {
        return;
    }
    fprintf(stderr, "\nbench: interrupted, stopping the servers\n");
    cleanup();
    if (O.keep && tmp_root[0]) {
        fprintf(stderr, "bench: kept %s\n", tmp_root);
    }
    exit(128 + interrupted);
}

static void child_start(struct child *c, const char *bin, char *const argv[])
{
    posix_spawn_file_actions_t fa;
    int rc;

    snprintf(c->log, sizeof(c->log), "%s/%s.log", tmp_root, c->name);
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 1, c->log,
                                     O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&fa, 1, 2);
    rc = posix_spawn(&c->pid, bin, &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0) {
        c->pid = 0;
        die("cannot start %s: %s", bin, strerror(rc));
    }
}

/* Waits for @path to hold "key=port" for every key; fills @ports. */
static void wait_port_file(struct child *c,
                           const char *path,
                           const char *const *keys,
                           int *ports,
                           int n)
{
    uint64_t t0 = now_ns();
    for (;;) {
        FILE *f = fopen(path, "r");
        if (f) {
            char line[128];
            int got = 0;
            for (int i = 0; i < n; i++) {
                ports[i] = 0;
            }
            while (fgets(line, sizeof(line), f)) {
                for (int i = 0; i < n; i++) {
                    size_t kl = strlen(keys[i]);
                    if (strncmp(line, keys[i], kl) == 0 && line[kl] == '=') {
                        ports[i] = atoi(line + kl + 1);
                    }
                }
            }
            fclose(f);
            for (int i = 0; i < n; i++) {
                got += ports[i] > 0;
            }
            if (got == n) {
                return;
            }
        }
        check_interrupt();
        if (child_dead(c)) {
            die("%s exited during start-up (status 0x%x)", c->name, c->status);
        }
        if (now_ns() - t0 > 15ULL * 1000000000ULL) {
            die("%s wrote no port file %s in 15 s", c->name, path);
        }
        usleep(20000);
    }
}

/* Blocking HTTP/1.0 GET on 127.0.0.1:@port. Returns the body (malloc) or
 * NULL. */
static char *http_get(int port, const char *path)
{
    struct sockaddr_in sa;
    struct timeval tv = {2, 0};
    struct rt_buf b = RT_BUF_INIT;
    char req[256];
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    char *body = NULL;

    if (fd < 0) {
        return NULL;
    }
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    memset(&sa, 0, sizeof(sa));
    sa.sin_family = AF_INET;
    sa.sin_port = htons((uint16_t)port);
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
        goto out;
    }
    snprintf(req, sizeof(req),
             "GET %s HTTP/1.0\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n",
             path);
    if (write(fd, req, strlen(req)) != (ssize_t)strlen(req)) {
        goto out;
    }
    for (;;) {
        uint8_t *p = rt_buf_reserve(&b, 4096);
        ssize_t n = read(fd, p, 4096);
        if (n <= 0) {
            break;
        }
        b.len += (size_t)n;
    }
    {
        const char *s = rt_buf_cstr(&b);
        const char *e = strstr(s, "\r\n\r\n");
        if (e && strncmp(s, "HTTP/1.", 7) == 0 && strstr(s, " 200 ")) {
            body = strdup(e + 4);
        }
    }
out:
    close(fd);
    rt_buf_free(&b);
    return body;
}

/* Number of servers "up" in the master's /api/status, or -1. */
static int master_servers_up(int http_port)
{
    char *body = http_get(http_port, "/api/status");
    json_t *root, *servers, *s;
    json_error_t err;
    size_t i;
    int up = 0;

    if (!body) {
        return -1;
    }
    root = json_loads(body, 0, &err);
    free(body);
    if (!root) {
        return -1;
    }
    servers = json_object_get(root, "servers");
    json_array_foreach(servers, i, s)
    {
        const char *st = json_string_value(json_object_get(s, "state"));
        up += st && strcmp(st, "up") == 0;
    }
    json_decref(root);
    return up;
}

/* Loop plumbing */

static uv_loop_t loop;

static void wait_tmo_cb(uv_timer_t *t)
{
    *(int *)t->data = 1;
}

/* Runs the loop until *@flag or @timeout_ms. Returns 0 or -1 (timeout). */
static int loop_wait(volatile int *flag, uint64_t timeout_ms)
{
    uv_timer_t t;
    int timed_out = 0;

    uv_timer_init(&loop, &t);
    t.data = &timed_out;
    uv_timer_start(&t, wait_tmo_cb, timeout_ms, 0);
    while (!*flag && !timed_out) {
        uv_run(&loop, UV_RUN_ONCE);
        check_interrupt();
    }
    uv_timer_stop(&t);
    uv_close((uv_handle_t *)&t, NULL);
    uv_run(&loop, UV_RUN_NOWAIT); /* let the close callback run */
    return *flag ? 0 : -1;
}

static void conn_cb(struct rt_rpc_conn *conn, int up, void *ud)
{
    (void)conn;
    *(int *)ud = up;
}

struct sync_call
{
    int done;
    int status;
    uint8_t *body;
    size_t len;
};

static void sync_cb(int status, const uint8_t *body, size_t len, void *arg)
{
    struct sync_call *sc = arg;
    sc->status = status;
    sc->len = len;
    sc->body = malloc(len ? len : 1);
    if (!sc->body) {
        die("out of memory");
    }
    if (len) {
        memcpy(sc->body, body, len);
    }
    sc->done = 1;
}

/* Calls and waits; the caller frees sc->body. */
static void call_sync(struct rt_rpc_conn *conn,
                      uint32_t method,
                      const ProtobufCMessage *msg,
                      struct sync_call *sc)
{
    memset(sc, 0, sizeof(*sc));
    if (rt_rpc_call_pb(conn, method, msg, 10000, sync_cb, sc) != 0) {
        die("rt_rpc_call_pb(method %u) failed", method);
    }
    loop_wait(&sc->done, 30000);
    if (!sc->done) {
        die("no reply to method %u", method);
    }
}

static const char *err_body_msg(const struct sync_call *sc, char *buf, size_t n)
{
    Rt__Error *e = rt__error__unpack(NULL, sc->len, sc->body);
    snprintf(buf, n, "%s", e && e->message ? e->message : "");
    if (e) {
        rt__error__free_unpacked(e, NULL);
    }
    return buf;
}

/* Entities and keys */

/* Key ids: bit 63 set = batch entity (batch << 8 | row), else a single
 * insert. The key text is a function of the id, so gets can pick any
 * id that was acknowledged. */
#define KID_BATCH (1ULL << 63)

static void key_single(uint64_t k, char *pk, char *rk)
{
    /* PKs spread over the key space (a random B-tree position per insert,
     * like independent clients), RK the sequence. */
    snprintf(pk, 24, "s%016" PRIx64, mix64(k));
    snprintf(rk, 24, "%010" PRIu64, k);
}

static void key_batch_pk(uint64_t b, char *pk)
{
    snprintf(pk, 24, "b%016" PRIx64, mix64(b | (1ULL << 62)));
}

static void key_from_kid(uint64_t kid, char *pk, char *rk)
{
    if (kid & KID_BATCH) {
        key_batch_pk((kid & ~KID_BATCH) >> 8, pk);
        snprintf(rk, 24, "%03u", (unsigned)(kid & 0xff));
    } else {
        key_single(kid, pk, rk);
    }
}

/* Loaded (scan) table: key order = load order, 100 rows per PK. */
static void key_load(uint64_t i, char *pk, char *rk)
{
    snprintf(pk, 24, "p%08" PRIu64, i / 100);
    snprintf(rk, 24, "r%03u", (unsigned)(i % 100));
}

static const char name_chars[] = "abcdefghijklmnopqrstuvwxyz0123456789";

/* Appends a ~180-byte properties blob of 7 typed properties to @out.
 * Bucket = uniform 0..99 (the scan filter keeps Bucket < 10). */
static void props_build(struct rt_buf *out, uint64_t seed)
{
    struct rt_props_writer w;
    struct rt_prop p;
    char name[64], email[32];
    uint64_t h = mix64(seed ^ 0xabcdef);

    for (size_t i = 0; i < sizeof(name); i++) {
        name[i] = name_chars[(h >> (i % 58)) % 36];
    }
    memcpy(name, "Customer ", 9);
    snprintf(email, sizeof(email), "user%012" PRIx64 "@example.org",
             (uint64_t)(h & 0xffffffffffffULL));

    rt_props_begin(&w, out);
    memset(&p, 0, sizeof(p));
    p.name = "Name";
    p.name_len = 4;
    p.type = RT_EDM_STRING;
    p.v.bytes.p = (const uint8_t *)name;
    p.v.bytes.n = sizeof(name);
    rt_props_add(&w, &p);

    p.name = "Email";
    p.name_len = 5;
    p.type = RT_EDM_STRING;
    p.v.bytes.p = (const uint8_t *)email;
    p.v.bytes.n = strlen(email);
    rt_props_add(&w, &p);

    p.name = "Age";
    p.name_len = 3;
    p.type = RT_EDM_INT32;
    p.v.i32 = 18 + (int32_t)(h % 70);
    rt_props_add(&w, &p);

    p.name = "Score";
    p.name_len = 5;
    p.type = RT_EDM_DOUBLE;
    p.v.d = (double)(h >> 11) / 9007199254740992.0;
    rt_props_add(&w, &p);

    p.name = "Created";
    p.name_len = 7;
    p.type = RT_EDM_DATETIME;
    p.v.ticks = RT_TICKS_UNIX_EPOCH + 1700000000ULL * RT_TICKS_PER_SEC +
                (h % 100000000ULL) * RT_TICKS_PER_SEC / 10;
    rt_props_add(&w, &p);

    p.name = "Active";
    p.name_len = 6;
    p.type = RT_EDM_BOOL;
    p.v.b = (int)((h >> 20) & 1);
    rt_props_add(&w, &p);

    p.name = "Bucket";
    p.name_len = 6;
    p.type = RT_EDM_INT32;
    p.v.i32 = (int32_t)(mix64(seed) % 100);
    rt_props_add(&w, &p);
    rt_props_end(&w);
}

/* 1. Raw LMDB baseline */

struct lmdb_result
{
    double rate; /* puts/s */
    double commit_p50_ms, commit_p99_ms;
};

static void lmdb_phase(MDB_env *env,
                       MDB_dbi dbi,
                       uint64_t *kctr,
                       int per_txn,
                       long dur_ms,
                       long warm_ms,
                       struct lmdb_result *res)
{
    struct rt_buf key = RT_BUF_INIT, val = RT_BUF_INIT, props = RT_BUF_INIT;
    struct lat lat = {0};
    uint64_t t_start = now_ns();
    uint64_t t_meas = t_start + (uint64_t)warm_ms * 1000000ULL;
    uint64_t t_end = t_meas + (uint64_t)dur_ms * 1000000ULL;
    uint64_t puts = 0;
    char pk[24], rk[24];

    for (;;) {
        uint64_t t0 = now_ns();
        MDB_txn *txn;
        int rc;
        check_interrupt();
        if (t0 >= t_end) {
            break;
        }
        rc = mdb_txn_begin(env, NULL, 0, &txn);
        if (rc != 0) {
            die("lmdb txn_begin: %s", mdb_strerror(rc));
        }
        for (int i = 0; i < per_txn; i++) {
            uint64_t k = (*kctr)++;
            MDB_val mk, mv;
            key_single(k, pk, rk);
            rt_buf_reset(&key);
            rt_buf_reset(&val);
            rt_buf_reset(&props);
            rt_key_entity(&key, 1, pk, strlen(pk), rk, strlen(rk));
            props_build(&props, k);
            rt_value_encode(&val, rt_time_now_ticks(), 0, props.data,
                            props.len);
            mk.mv_data = key.data;
            mk.mv_size = key.len;
            mv.mv_data = val.data;
            mv.mv_size = val.len;
            rc = mdb_put(txn, dbi, &mk, &mv, 0);
            if (rc != 0) {
                die("lmdb put: %s", mdb_strerror(rc));
            }
        }
        rc = mdb_txn_commit(txn);
        if (rc != 0) {
            die("lmdb commit: %s", mdb_strerror(rc));
        }
        if (t0 >= t_meas) {
            puts += (uint64_t)per_txn;
            lat_add(&lat, now_ns() - t0);
        }
    }
    res->rate = (double)puts / ((double)dur_ms / 1000.0);
    res->commit_p50_ms = lat_pct_ms(&lat, 50);
    res->commit_p99_ms = lat_pct_ms(&lat, 99);
    lat_free(&lat);
    rt_buf_free(&key);
    rt_buf_free(&val);
    rt_buf_free(&props);
}

/* 3-5: closed-loop RPC phases */

enum ph_kind { PH_INSERT, PH_BATCH, PH_GET, PH_LOAD };

struct phase;
struct slot
{
    struct phase *ph;
    uint64_t t0;
    uint64_t a; /* kid, batch number or load start index */
    unsigned n; /* entities in the call */
};

struct phase
{
    enum ph_kind kind;
    int depth;
    struct rt_rpc_conn *conn;
    Rt__RangeRef *route;
    uint64_t t_start, t_meas, t_end; /* window [t_meas, t_end) */
    uint64_t total;                  /* PH_LOAD: entities to load */
    uint64_t issued;                 /* PH_LOAD: entities issued */
    uint64_t loaded;                 /* PH_LOAD: acknowledged */
    uint64_t t_done;
    int outstanding;
    int stop;
    /* Counted inside the window. */
    uint64_t calls, units;
    uint64_t errors, busy, notfound;
    int first_err;
    char first_err_msg[128];
    struct lat lat;
    struct slot *slots;
    /* CPU */
    double cpu_self0, cpu_ps0;
    double cpu_self_pct, cpu_ps_pct;
};

/* Acknowledged key ids (for gets). */
static struct
{
    uint64_t *v;
    size_t n, cap;
} have;
static uint64_t next_single = 1, next_batch = 1;

static void have_add(uint64_t kid)
{
    if (have.n == have.cap) {
        have.cap = have.cap ? have.cap * 2 : 65536;
        have.v = realloc(have.v, have.cap * sizeof(*have.v));
        if (!have.v) {
            die("out of memory");
        }
    }
    have.v[have.n++] = kid;
}

/* Scratch for building requests (copied by rt_rpc_call_pb). */
static struct rt_buf scratch_props = RT_BUF_INIT;
static Rt__EntityOp *scratch_ops;
static Rt__EntityOp **scratch_op_ptrs;
static char (*scratch_keys)[2][24];
static size_t *scratch_off;
static size_t scratch_cap;

static void scratch_reserve(size_t n)
{
    if (n <= scratch_cap) {
        return;
    }
    scratch_ops = realloc(scratch_ops, n * sizeof(*scratch_ops));
    scratch_op_ptrs = realloc(scratch_op_ptrs, n * sizeof(*scratch_op_ptrs));
    scratch_keys = realloc(scratch_keys, n * sizeof(*scratch_keys));
    scratch_off = realloc(scratch_off, (n + 1) * sizeof(*scratch_off));
    if (!scratch_ops || !scratch_op_ptrs || !scratch_keys || !scratch_off) {
        die("out of memory");
    }
    scratch_cap = n;
}

static void ph_reply(int status, const uint8_t *body, size_t len, void *arg);

/* Sends a write of @n ops whose keys/props the caller put in scratch. */
static int send_write(struct slot *s, size_t n, int atomic, uint32_t tmo)
{
    Rt__WriteReq req = RT__WRITE_REQ__INIT;
    for (size_t i = 0; i < n; i++) {
        Rt__EntityOp *op = &scratch_ops[i];
        rt__entity_op__init(op);
        op->kind = RT__OP_KIND__OP_INSERT;
        op->pk = scratch_keys[i][0];
        op->rk = scratch_keys[i][1];
        op->props.data = scratch_props.data + scratch_off[i];
        op->props.len = scratch_off[i + 1] - scratch_off[i];
        scratch_op_ptrs[i] = op;
    }
    req.route = s->ph->route;
    req.n_ops = n;
    req.ops = scratch_op_ptrs;
    req.atomic = atomic;
    return rt_rpc_call_pb(s->ph->conn, RT__METHOD__ENTITY_WRITE, &req.base, tmo,
                          ph_reply, s);
}

/* Issues the next call on @s. Returns 1 if issued, 0 if nothing to do. */
static int ph_issue(struct slot *s)
{
    struct phase *ph = s->ph;
    int rc = 0;

    s->t0 = now_ns();
    switch (ph->kind) {
        case PH_INSERT: {
            uint64_t k = next_single++;
            scratch_reserve(1);
            rt_buf_reset(&scratch_props);
            key_single(k, scratch_keys[0][0], scratch_keys[0][1]);
            scratch_off[0] = 0;
            props_build(&scratch_props, k);
            scratch_off[1] = scratch_props.len;
            s->a = k;
            s->n = 1;
            rc = send_write(s, 1, 0, BENCH_WRITE_TIMEOUT_MS);
            break;
        }
        case PH_BATCH: {
            uint64_t b = next_batch++;
            char pk[24];
            scratch_reserve(100);
            rt_buf_reset(&scratch_props);
            key_batch_pk(b, pk);
            for (unsigned j = 0; j < 100; j++) {
                memcpy(scratch_keys[j][0], pk, sizeof(pk));
                snprintf(scratch_keys[j][1], 24, "%03u", j);
                scratch_off[j] = scratch_props.len;
                props_build(&scratch_props, KID_BATCH | (b << 8) | j);
            }
            scratch_off[100] = scratch_props.len;
            s->a = b;
            s->n = 100;
            rc = send_write(s, 100, 1, BENCH_WRITE_TIMEOUT_MS);
            break;
        }
        case PH_GET: {
            Rt__GetReq req = RT__GET_REQ__INIT;
            char pk[24], rk[24];
            uint64_t kid = have.v[rng_next() % have.n];
            key_from_kid(kid, pk, rk);
            req.route = ph->route;
            req.pk = pk;
            req.rk = rk;
            s->a = kid;
            s->n = 1;
            rc = rt_rpc_call_pb(ph->conn, RT__METHOD__ENTITY_GET, &req.base,
                                BENCH_READ_TIMEOUT_MS, ph_reply, s);
            break;
        }
        case PH_LOAD: {
            uint64_t start = ph->issued;
            unsigned n;
            if (start >= ph->total) {
                return 0;
            }
            n = (unsigned)(ph->total - start < (uint64_t)O.load_ops
                               ? ph->total - start
                               : (uint64_t)O.load_ops);
            ph->issued += n;
            s->a = start;
            s->n = n;
            /* fall through to the resend path */
            goto load_send;
        }
    }
    goto sent;

load_send:
    scratch_reserve(s->n);
    rt_buf_reset(&scratch_props);
    for (unsigned j = 0; j < s->n; j++) {
        key_load(s->a + j, scratch_keys[j][0], scratch_keys[j][1]);
        scratch_off[j] = scratch_props.len;
        props_build(&scratch_props, s->a + j);
    }
    scratch_off[s->n] = scratch_props.len;
    rc = send_write(s, s->n, 0, BENCH_WRITE_TIMEOUT_MS);

sent:
    if (rc != 0) {
        die("rt_rpc_call failed: %s", rt_strerror(rc));
    }
    ph->outstanding++;
    return 1;
}

static void ph_note_err(struct phase *ph, int code, const char *msg)
{
    ph->errors++;
    if (!ph->first_err) {
        ph->first_err = code;
        snprintf(ph->first_err_msg, sizeof(ph->first_err_msg), "%s",
                 msg ? msg : "");
    }
}

/* Checks a WriteResp: every op code 0. Returns 0 or the first bad code. */
static int write_resp_check(const uint8_t *body, size_t len, unsigned n)
{
    Rt__WriteResp *r = rt__write_resp__unpack(NULL, len, body);
    int code = 0;
    if (!r) {
        return RT_EPROTO;
    }
    if (r->n_results != n) {
        code = RT_EPROTO;
    }
    for (size_t i = 0; i < r->n_results && code == 0; i++) {
        code = r->results[i]->code;
    }
    rt__write_resp__free_unpacked(r, NULL);
    return code;
}

static void ph_reply(int status, const uint8_t *body, size_t len, void *arg)
{
    struct slot *s = arg;
    struct phase *ph = s->ph;
    uint64_t now = now_ns();
    int code = status;
    /* Completions inside the window count (steady-state throughput). */
    int in_window = now >= ph->t_meas && now < ph->t_end;
    int retry_same = 0;

    ph->outstanding--;
    if (status == RT_ECANCELED) {
        return;
    }
    if (code == 0 && ph->kind != PH_GET) {
        code = write_resp_check(body, len, s->n);
    }
    if (code == 0 && ph->kind == PH_GET && len <= RT_VALUE_HDR_SIZE) {
        code = RT_EPROTO;
    }
    if (code == 0) {
        switch (ph->kind) {
            case PH_INSERT:
                have_add(s->a);
                break;
            case PH_BATCH:
                for (unsigned j = 0; j < 100; j++) {
                    have_add(KID_BATCH | (s->a << 8) | j);
                }
                break;
            case PH_LOAD:
                ph->loaded += s->n;
                break;
            case PH_GET:
                break;
        }
        if (ph->kind == PH_LOAD || in_window) {
            ph->calls++;
            ph->units += s->n;
            lat_add(&ph->lat, now - s->t0);
        }
    } else if (code == RT_EBUSY) {
        ph->busy++;
        retry_same = ph->kind == PH_LOAD;
    } else {
        char msg[128] = "";
        if (status != 0 && body && len) {
            Rt__Error *e = rt__error__unpack(NULL, len, body);
            if (e) {
                snprintf(msg, sizeof(msg), "%s (index %d)", e->message,
                         e->index);
                rt__error__free_unpacked(e, NULL);
            }
        }
        if (code == RT_ENOTFOUND) {
            ph->notfound++;
        }
        ph_note_err(ph, code, msg);
        if (ph->kind == PH_LOAD) {
            ph->stop = 1; /* the scan count would be wrong */
        }
    }

    if (ph->stop) {
        return;
    }
    if (ph->kind == PH_LOAD) {
        if (retry_same) {
            /* Back-pressure: resend the same slice. */
            ph->outstanding++;
            s->t0 = now_ns();
            scratch_reserve(s->n);
            rt_buf_reset(&scratch_props);
            for (unsigned j = 0; j < s->n; j++) {
                key_load(s->a + j, scratch_keys[j][0], scratch_keys[j][1]);
                scratch_off[j] = scratch_props.len;
                props_build(&scratch_props, s->a + j);
            }
            scratch_off[s->n] = scratch_props.len;
            if (send_write(s, s->n, 0, BENCH_WRITE_TIMEOUT_MS) != 0) {
                die("rt_rpc_call failed");
            }
            return;
        }
        if (!ph_issue(s) && ph->outstanding == 0) {
            ph->t_done = now_ns();
        }
        return;
    }
    if (now < ph->t_end) {
        ph_issue(s);
    }
}

static void ph_init(struct phase *ph,
                    enum ph_kind kind,
                    int depth,
                    struct rt_rpc_conn *conn,
                    Rt__RangeRef *route)
{
    memset(ph, 0, sizeof(*ph));
    ph->kind = kind;
    ph->depth = depth < 1                 ? 1
                : depth > BENCH_MAX_DEPTH ? BENCH_MAX_DEPTH
                                          : depth;
    ph->conn = conn;
    ph->route = route;
    ph->slots = calloc((size_t)ph->depth, sizeof(*ph->slots));
    if (!ph->slots) {
        die("out of memory");
    }
}

static void ph_run(struct phase *ph, long warm_ms, long dur_ms)
{
    uint64_t t0 = now_ns();
    double self0 = cpu_self_s(), ps0;

    ph->t_start = t0;
    ph->t_meas = t0 + (uint64_t)warm_ms * 1000000ULL;
    ph->t_end = ph->t_meas + (uint64_t)dur_ms * 1000000ULL;
    if (ph->kind == PH_LOAD) {
        ph->t_meas = t0;
        ph->t_end = UINT64_MAX;
    }
    ps0 = cpu_pid_s(ch_ps.pid);
    for (int i = 0; i < ph->depth; i++) {
        ph->slots[i].ph = ph;
        if (!ph_issue(&ph->slots[i])) {
            break;
        }
    }
    while (ph->outstanding > 0) {
        uv_run(&loop, UV_RUN_ONCE);
        check_interrupt();
        if (child_dead(&ch_ps)) {
            die("rt-partition-server died during the %s phase (status 0x%x)",
                ph->kind == PH_LOAD ? "load" : "measured", ch_ps.status);
        }
    }
    if (ph->kind == PH_LOAD && !ph->t_done) {
        ph->t_done = now_ns();
    }
    {
        /* CPU over the whole phase including warm-up. */
        double wall = secs_since(t0);
        double ps1 = cpu_pid_s(ch_ps.pid);
        ph->cpu_self_pct = 100.0 * (cpu_self_s() - self0) / wall;
        ph->cpu_ps_pct = ps0 >= 0 && ps1 >= 0 ? 100.0 * (ps1 - ps0) / wall : -1;
    }
}

static double ph_rate(const struct phase *ph)
{
    double win;
    if (ph->kind == PH_LOAD) {
        win = (double)(ph->t_done - ph->t_start) / 1e9;
    } else {
        win = (double)(ph->t_end - ph->t_meas) / 1e9;
    }
    return win > 0 ? (double)ph->units / win : 0;
}

/* 6. Scan */

struct scan_result
{
    double rate;          /* entities examined per second */
    double returned_rate; /* entities returned per second */
    uint64_t pages, returned, bad_match;
    double secs;
    double page_p50_ms, page_p99_ms;
    double cpu_self_pct, cpu_ps_pct;
};

static int filter_check(const char *pk,
                        const char *rk,
                        const uint8_t *v,
                        size_t n);

struct scan_call
{
    int done;
    int status;
    Rt__ScanResp *resp;
};

static void scan_cb(int status, const uint8_t *body, size_t len, void *arg)
{
    struct scan_call *c = arg;
    c->status = status;
    c->resp = status == 0 ? rt__scan_resp__unpack(NULL, len, body) : NULL;
    if (status == 0 && !c->resp) {
        c->status = RT_EPROTO;
    }
    c->done = 1;
}

/* Scans the whole range page by page. @max_pages 0 = all (a warm-up passes
 * a small number). */
static void scan_run(struct rt_rpc_conn *conn,
                     Rt__RangeRef *route,
                     const struct rt_buf *filter,
                     uint64_t max_pages,
                     struct scan_result *res)
{
    char *start_pk = NULL, *start_rk = NULL;
    struct lat lat = {0};
    uint64_t t0 = now_ns();
    double self0 = cpu_self_s(), ps0 = cpu_pid_s(ch_ps.pid);

    memset(res, 0, sizeof(*res));
    for (;;) {
        Rt__ScanReq req = RT__SCAN_REQ__INIT;
        struct scan_call c = {0};
        uint64_t p0 = now_ns();
        req.route = route;
        req.limit = (uint32_t)O.scan_limit;
        if (start_pk) {
            req.has_start = 1;
            req.start_pk = start_pk;
            req.start_rk = start_rk;
        }
        if (filter && filter->len) {
            req.filter.data = filter->data;
            req.filter.len = filter->len;
        }
        if (rt_rpc_call_pb(conn, RT__METHOD__ENTITY_SCAN, &req.base,
                           BENCH_READ_TIMEOUT_MS, scan_cb, &c) != 0) {
            die("scan call failed");
        }
        while (!c.done) {
            uv_run(&loop, UV_RUN_ONCE);
        }
        check_interrupt();
        if (c.status != 0) {
            die("ENTITY_SCAN failed: %s (%s)", rt_err_name(c.status),
                rt_strerror(c.status));
        }
        lat_add(&lat, now_ns() - p0);
        res->pages++;
        res->returned += c.resp->n_entities;
        if (filter && filter->len) {
            for (size_t i = 0; i < c.resp->n_entities; i++) {
                const Rt__EntityRec *e = c.resp->entities[i];
                res->bad_match += filter_check(e->pk, e->rk, e->value.data,
                                               e->value.len) != 1;
            }
        }
        free(start_pk);
        free(start_rk);
        start_pk = start_rk = NULL;
        if (c.resp->more) {
            start_pk = strdup(c.resp->next_pk);
            start_rk = strdup(c.resp->next_rk);
        }
        rt__scan_resp__free_unpacked(c.resp, NULL);
        if (!start_pk || (max_pages && res->pages >= max_pages)) {
            break;
        }
    }
    free(start_pk);
    free(start_rk);
    res->secs = secs_since(t0);
    res->page_p50_ms = lat_pct_ms(&lat, 50);
    res->page_p99_ms = lat_pct_ms(&lat, 99);
    res->cpu_self_pct = 100.0 * (cpu_self_s() - self0) / res->secs;
    {
        double ps1 = cpu_pid_s(ch_ps.pid);
        res->cpu_ps_pct =
            ps0 >= 0 && ps1 >= 0 ? 100.0 * (ps1 - ps0) / res->secs : -1;
    }
    lat_free(&lat);
}

/* The scan filter, parsed once (NULL with --no-filter). */
static struct rt_filter *scan_filter;

/* Parses BENCH_FILTER once and encodes it into @out; dies on a parse
 * error. */
static void filter_encode(struct rt_buf *out)
{
    char errmsg[RT_ERRMSG_SIZE] = "";
    int rc = rt_filter_parse(BENCH_FILTER, strlen(BENCH_FILTER), &scan_filter,
                             errmsg);
    if (rc != 0 || !scan_filter) {
        die("rt_filter_parse(\"%s\"): %s %s", BENCH_FILTER, rt_err_name(rc),
            errmsg);
    }
    rt_filter_encode(scan_filter, out);
}

/* Does a returned entity match the scan filter (checked on our side)?
 * 1 yes, 0 no, <0 undecodable. */
static int filter_check(const char *pk,
                        const char *rk,
                        const uint8_t *v,
                        size_t n)
{
    uint64_t ticks;
    uint8_t flags;
    const uint8_t *blob;
    size_t blob_n;
    if (rt_value_decode(v, n, &ticks, &flags, &blob, &blob_n) != 0) {
        return RT_ECORRUPT;
    }
    return rt_filter_eval(scan_filter, pk, strlen(pk), rk, strlen(rk), ticks,
                          blob, blob_n);
}

/* Set-up */

struct table_ref
{
    Rt__RangeRef route;
    char server_addr[128];
};

static void create_table(struct rt_rpc_conn *ms,
                         const char *name,
                         struct table_ref *out)
{
    Rt__TableReq req = RT__TABLE_REQ__INIT;
    struct sync_call sc;
    Rt__Table *t;
    Rt__Map *map;
    uint64_t table_id;
    uint64_t server_id = 0;
    char msg[128];

    req.account = BENCH_ACCOUNT;
    req.name = (char *)name;
    call_sync(ms, RT__METHOD__CREATE_TABLE, &req.base, &sc);
    if (sc.status != 0) {
        die("CREATE_TABLE %s: %s (%s)", name, rt_err_name(sc.status),
            err_body_msg(&sc, msg, sizeof(msg)));
    }
    t = rt__table__unpack(NULL, sc.len, sc.body);
    free(sc.body);
    if (!t) {
        die("CREATE_TABLE: bad reply");
    }
    table_id = t->id;
    rt__table__free_unpacked(t, NULL);

    call_sync(ms, RT__METHOD__GET_MAP, NULL, &sc);
    if (sc.status != 0) {
        die("GET_MAP: %s", rt_err_name(sc.status));
    }
    map = rt__map__unpack(NULL, sc.len, sc.body);
    free(sc.body);
    if (!map) {
        die("GET_MAP: bad reply");
    }
    memset(out, 0, sizeof(*out));
    rt__range_ref__init(&out->route);
    for (size_t i = 0; i < map->n_ranges; i++) {
        Rt__Range *r = map->ranges[i];
        if (r->table_id == table_id) {
            if (out->route.range_id) {
                die("table %s has more than one range", name);
            }
            out->route.table_id = table_id;
            out->route.range_id = r->id;
            out->route.epoch = r->epoch;
            server_id = r->server_id;
        }
    }
    for (size_t i = 0; i < map->n_servers; i++) {
        if (map->servers[i]->id == server_id) {
            snprintf(out->server_addr, sizeof(out->server_addr), "%s",
                     map->servers[i]->addr);
        }
    }
    rt__map__free_unpacked(map, NULL);
    if (!out->route.range_id || !out->server_addr[0]) {
        die("GET_MAP: no range/server for table %s (id %" PRIu64 ")", name,
            table_id);
    }
}

/* Waits until the PS serves @t: a get of a missing key answers
 * RT_ENOTFOUND (not RT_ESTALE). */
static void wait_served(struct rt_rpc_conn *ps, struct table_ref *t)
{
    uint64_t t0 = now_ns();
    for (;;) {
        Rt__GetReq req = RT__GET_REQ__INIT;
        struct sync_call sc;
        req.route = &t->route;
        req.pk = "probe";
        req.rk = "probe";
        call_sync(ps, RT__METHOD__ENTITY_GET, &req.base, &sc);
        free(sc.body);
        if (sc.status == RT_ENOTFOUND) {
            return;
        }
        if (sc.status != RT_ESTALE && sc.status != RT_ENOCONN) {
            die("probe get: unexpected %s", rt_err_name(sc.status));
        }
        if (now_ns() - t0 > 10ULL * 1000000000ULL) {
            die("partition server does not serve range %" PRIu64
                " after 10 s (%s)",
                t->route.range_id, rt_err_name(sc.status));
        }
        usleep(50000);
    }
}

static void locate_bin(const char *name,
                       const char *subdir,
                       char *out,
                       size_t n)
{
    char base[PATH_MAX];
    char cand[2][PATH_MAX + 128];

    if (O.bin_dir && *O.bin_dir) {
        snprintf(base, sizeof(base), "%s", O.bin_dir);
    } else {
        char exe[PATH_MAX];
        ssize_t k = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
        if (k <= 0) {
            die("readlink /proc/self/exe: %s", strerror(errno));
        }
        exe[k] = '\0';
        snprintf(base, sizeof(base), "%s/..", dirname(exe));
    }
    snprintf(cand[0], sizeof(cand[0]), "%s/%s/%s", base, subdir, name);
    snprintf(cand[1], sizeof(cand[1]), "%s/%s", base, name);
    for (int i = 0; i < 2; i++) {
        if (access(cand[i], X_OK) == 0) {
            char *rp = realpath(cand[i], NULL);
            if (!rp || strlen(rp) >= n) {
                die("cannot resolve %s", cand[i]);
            }
            memcpy(out, rp, strlen(rp) + 1);
            free(rp);
            return;
        }
    }
    die("cannot find %s (tried %s and %s; use --bin-dir)", name, cand[0],
        cand[1]);
}

static uint64_t file_size(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? (uint64_t)st.st_size : 0;
}

/* Report */

struct row
{
    const char *metric;
    double value;
    const char *unit;
    double limit; /* LMDB limit compared with, 0 = none */
    const char *limit_name;
    double goal; /* 0 = none */
    int lower_is_better;
};

static struct row rows[64];
static int n_rows;

static void row_add(const char *metric,
                    double value,
                    const char *unit,
                    double limit,
                    const char *limit_name,
                    double goal)
{
    struct row *r = &rows[n_rows++];
    r->metric = metric;
    r->value = value;
    r->unit = unit;
    r->limit = limit;
    r->limit_name = limit_name;
    r->goal = goal;
}

static void print_rate_line(const char *what, const struct phase *ph)
{
    printf(
        "  %-34s %10.0f %-10s p50 %7.2f ms  p99 %7.2f ms  "
        "(cpu: ps %3.0f%%, bench %3.0f%%)",
        what, ph_rate(ph),
        ph->kind == PH_BATCH || ph->kind == PH_LOAD ? "entities/s"
        : ph->kind == PH_GET                        ? "gets/s"
                                                    : "inserts/s",
        lat_pct_ms((struct lat *)&ph->lat, 50),
        lat_pct_ms((struct lat *)&ph->lat, 99), ph->cpu_ps_pct,
        ph->cpu_self_pct);
    if (ph->busy || ph->errors) {
        printf("  busy %" PRIu64 " errors %" PRIu64, ph->busy, ph->errors);
        if (ph->errors) {
            printf(" (first: %s %s)", rt_err_name(ph->first_err),
                   ph->first_err_msg);
        }
    }
    printf("\n");
    fflush(stdout);
}

static void json_num(struct rt_buf *j, const char *k, double v)
{
    const char *sep = j->len > 1 ? "," : "";
    if (v > -9e15 && v < 9e15 && (double)(long long)v == v) {
        rt_buf_printf(j, "%s\"%s\":%lld", sep, k, (long long)v);
    } else if (v > -1e6 && v < 1e6) {
        rt_buf_printf(j, "%s\"%s\":%.3f", sep, k, v);
    } else {
        rt_buf_printf(j, "%s\"%s\":%.0f", sep, k, v);
    }
}

int main(int argc, char **argv)
{
    char master_bin[PATH_MAX], ps_bin[PATH_MAX];
    char path[PATH_MAX + 64];
    char mport_file[PATH_MAX + 64], pport_file[PATH_MAX + 64];
    struct sigaction sa;
    struct stat st_dir, st_work;
    int ms_ports[2], ps_port[1];
    int ms_up = 0, ps_up = 0;
    struct rt_rpc_client *ms_cli, *ps_cli;
    struct table_ref tbl_w, tbl_s;
    struct lmdb_result lm1, lm100, lmn = {0}, lmc[8];
    struct phase ph_ins[8];
    long clients[8];
    int n_clients = 0;
    struct phase ph_b, ph_g, ph_l;
    struct scan_result sr, warm;
    struct rt_buf filter = RT_BUF_INIT;
    int have_filter;
    uint64_t t_all = now_ns();
    int rc = 0;

    rt_config_parse("bench_ps",
                    "Partition-server benchmark: raw LMDB limits, then a "
                    "real rt-master + rt-partition-server over RPC.",
                    bench_opts, argc, argv, NULL, 0);
    if (O.quick) {
        O.entities = O.entities ? O.entities : 100000;
        O.lmdb_ms = O.lmdb_ms ? O.lmdb_ms : 1000;
        O.insert_ms = O.insert_ms ? O.insert_ms : 2000;
        O.batch_ms = O.batch_ms ? O.batch_ms : 2000;
        O.get_ms = O.get_ms ? O.get_ms : 2000;
        O.warmup_ms = O.warmup_ms ? O.warmup_ms : 300;
    } else {
        O.entities = O.entities ? O.entities : 1000000;
        O.lmdb_ms = O.lmdb_ms ? O.lmdb_ms : 3000;
        O.insert_ms = O.insert_ms ? O.insert_ms : 5000;
        O.batch_ms = O.batch_ms ? O.batch_ms : 5000;
        O.get_ms = O.get_ms ? O.get_ms : 5000;
        O.warmup_ms = O.warmup_ms ? O.warmup_ms : 1000;
    }
    if (O.load_ops < 1 || O.load_ops > 1000) {
        fprintf(stderr, "bench: --load-ops must be 1..1000\n");
        return 2;
    }
    {
        char *s = strdup(O.clients), *save = NULL;
        for (char *t = strtok_r(s, ",", &save); t && n_clients < 8;
             t = strtok_r(NULL, ",", &save)) {
            clients[n_clients++] = atol(t);
        }
        free(s);
        if (n_clients == 0) {
            fprintf(stderr, "bench: --clients needs at least one number\n");
            return 2;
        }
    }
    rt_log_init("bench", RT_LOG_ERROR);
    signal(SIGPIPE, SIG_IGN);
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_fatal_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);

    locate_bin("rt-master", "master", master_bin, sizeof(master_bin));
    locate_bin("rt-partition-server", "partition-server", ps_bin,
               sizeof(ps_bin));

    if (O.dir && strlen(O.dir) > 900) {
        fprintf(stderr, "bench: --dir too long\n");
        return 2;
    }
    snprintf(tmp_root, sizeof(tmp_root), "%s/bench_ps.XXXXXX",
             O.dir && *O.dir ? O.dir : "/tmp");
    if (!mkdtemp(tmp_root)) {
        fprintf(stderr, "bench: mkdtemp %s: %s\n", tmp_root, strerror(errno));
        tmp_root[0] = '\0';
        return 1;
    }
    printf("bench_ps: data in %s%s\n", tmp_root, O.quick ? " (quick)" : "");
    if (stat(tmp_root, &st_dir) == 0 && stat("/work", &st_work) == 0 &&
        st_dir.st_dev != st_work.st_dev) {
        printf("  note: %s is not on the same filesystem as /work\n", tmp_root);
    }
    printf("  binaries: %s, %s\n", master_bin, ps_bin);
    fflush(stdout);

    /* 1. Raw LMDB */
    {
        MDB_env *env;
        MDB_txn *txn;
        MDB_dbi dbi;
        uint64_t kctr = 1;
        int r;
        snprintf(path, sizeof(path), "%s/lmdb", tmp_root);
        mkdir(path, 0755);
        if ((r = mdb_env_create(&env)) != 0 ||
            (r = mdb_env_set_mapsize(env, 4ULL << 30)) != 0 ||
            (r = mdb_env_set_maxdbs(env, 2)) != 0 ||
            (r = mdb_env_open(env, path, 0, 0644)) != 0 ||
            (r = mdb_txn_begin(env, NULL, 0, &txn)) != 0 ||
            (r = mdb_dbi_open(txn, "data", MDB_CREATE, &dbi)) != 0 ||
            (r = mdb_txn_commit(txn)) != 0) {
            die("lmdb open %s: %s", path, mdb_strerror(r));
        }
        {
            struct rt_buf pb = RT_BUF_INIT;
            props_build(&pb, 1);
            printf(
                "\n[1] raw LMDB, synced commits, %zu-byte values, random "
                "keys, %ld ms each (limits)\n",
                pb.len + RT_VALUE_HDR_SIZE, O.lmdb_ms);
            rt_buf_free(&pb);
        }
        lmdb_phase(env, dbi, &kctr, 1, O.lmdb_ms, O.warmup_ms, &lm1);
        printf(
            "  %-34s %10.0f puts/s     commit p50 %6.2f ms  p99 %6.2f "
            "ms\n",
            "1 put per txn", lm1.rate, lm1.commit_p50_ms, lm1.commit_p99_ms);
        lmdb_phase(env, dbi, &kctr, 100, O.lmdb_ms, O.warmup_ms, &lm100);
        printf(
            "  %-34s %10.0f puts/s     commit p50 %6.2f ms  p99 %6.2f "
            "ms\n",
            "100 puts per txn", lm100.rate, lm100.commit_p50_ms,
            lm100.commit_p99_ms);
        if (O.lmdb_per_txn > 0) {
            char name[48];
            lmdb_phase(env, dbi, &kctr, (int)O.lmdb_per_txn, O.lmdb_ms,
                       O.warmup_ms, &lmn);
            snprintf(name, sizeof(name), "%ld puts per txn", O.lmdb_per_txn);
            printf(
                "  %-34s %10.0f puts/s     commit p50 %6.2f ms  p99 %6.2f "
                "ms\n",
                name, lmn.rate, lmn.commit_p50_ms, lmn.commit_p99_ms);
        }
        for (int i = 0; O.lmdb_same_batch && i < n_clients; i++) {
            char name[64];
            lmc[i] = clients[i] == 1     ? lm1
                     : clients[i] == 100 ? lm100
                                         : (struct lmdb_result){0};
            if (clients[i] == 1 || clients[i] == 100) {
                continue;
            }
            lmdb_phase(env, dbi, &kctr, (int)clients[i], O.lmdb_ms, O.warmup_ms,
                       &lmc[i]);
            snprintf(name, sizeof(name), "%ld puts per txn", clients[i]);
            printf(
                "  %-34s %10.0f puts/s     commit p50 %6.2f ms  p99 %6.2f "
                "ms\n",
                name, lmc[i].rate, lmc[i].commit_p50_ms, lmc[i].commit_p99_ms);
        }
        mdb_env_close(env);
        nftw(path, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
        fflush(stdout);
    }

    /* 2. Cluster */
    {
        char ms_data[PATH_MAX + 64], ps_data[PATH_MAX + 64];
        char master_addr[64];
        const char *mkeys[2] = {"rpc", "http"};
        const char *pkeys[1] = {"rpc"};
        uint64_t t0;
        int up = -1;

        snprintf(ms_data, sizeof(ms_data), "%s/master", tmp_root);
        snprintf(ps_data, sizeof(ps_data), "%s/ps", tmp_root);
        snprintf(mport_file, sizeof(mport_file), "%s/master.port", tmp_root);
        snprintf(pport_file, sizeof(pport_file), "%s/ps.port", tmp_root);
        /* Plain RPC (--insecure-rpc): this measures the partition
         * server's own work over loopback, as a client on the same host;
         * what mutual TLS adds is measured through the front end
         * (tools/rt-load/scenarios/lib.sh, RT_CLUSTER_TLS). */
        {
            /* --status-open: only GET /api/status is read here.
             * --replication-factor 1: one partition server holds the only
             * copy (the master's default wants more servers than this
             * bench starts, and refuses to create its tables).
             * --raft-listen 127.0.0.1:0: the default Raft port is fixed,
             * and another master on this host may hold it. */
            char *av[] = {master_bin,
                          "--listen",
                          "127.0.0.1:0",
                          "--http",
                          "127.0.0.1:0",
                          "--status-open",
                          "--raft-listen",
                          "127.0.0.1:0",
                          "--replication-factor",
                          "1",
                          "--data",
                          ms_data,
                          "--port-file",
                          mport_file,
                          "--log-level",
                          O.server_log_level,
                          "--insecure-rpc",
                          NULL};
            child_start(&ch_master, master_bin, av);
        }
        wait_port_file(&ch_master, mport_file, mkeys, ms_ports, 2);
        snprintf(master_addr, sizeof(master_addr), "127.0.0.1:%d", ms_ports[0]);
        {
            char maxp[32];
            snprintf(maxp, sizeof(maxp), "%ld", O.max_pending);
            char *av[] = {ps_bin,
                          "--listen",
                          "127.0.0.1:0",
                          "--master",
                          master_addr,
                          "--data",
                          ps_data,
                          "--port-file",
                          pport_file,
                          "--max-pending",
                          maxp,
                          "--log-level",
                          O.server_log_level,
                          "--insecure-rpc",
                          NULL,
                          NULL,
                          NULL,
                          NULL,
                          NULL,
                          NULL,
                          NULL,
                          NULL,
                          NULL};
            char *extra = strdup(O.ps_args ? O.ps_args : ""), *save = NULL;
            size_t n = 0;
            while (av[n]) {
                n++;
            }
            for (char *t = strtok_r(extra, " ", &save);
                 t && n < sizeof(av) / sizeof(av[0]) - 1;
                 t = strtok_r(NULL, " ", &save)) {
                av[n++] = t;
            }
            child_start(&ch_ps, ps_bin, av);
            free(extra);
        }
        wait_port_file(&ch_ps, pport_file, pkeys, ps_port, 1);
        t0 = now_ns();
        while ((up = master_servers_up(ms_ports[1])) < 1) {
            check_interrupt();
            if (child_dead(&ch_ps) || child_dead(&ch_master)) {
                die("a server exited during start-up");
            }
            if (now_ns() - t0 > 15ULL * 1000000000ULL) {
                die("no partition server up at the master after 15 s");
            }
            usleep(50000);
        }
        printf(
            "\n[2] cluster: rt-master pid %d (rpc %d, http %d), "
            "rt-partition-server pid %d (rpc %d), up after %.2f s\n",
            (int)ch_master.pid, ms_ports[0], ms_ports[1], (int)ch_ps.pid,
            ps_port[0], secs_since(t0));

        uv_loop_init(&loop);
        if (rt_rpc_client_start(&loop, master_addr, NULL, conn_cb, &ms_up,
                                &ms_cli) != 0) {
            die("rt_rpc_client_start master");
        }
        if (loop_wait(&ms_up, 10000) != 0) {
            die("cannot connect to the master at %s", master_addr);
        }
        create_table(rt_rpc_client_conn(ms_cli), "benchwrites", &tbl_w);
        create_table(rt_rpc_client_conn(ms_cli), "benchscan", &tbl_s);
        if (strcmp(tbl_w.server_addr, tbl_s.server_addr) != 0) {
            die("tables on different servers?");
        }
        if (rt_rpc_client_start(&loop, tbl_w.server_addr, NULL, conn_cb, &ps_up,
                                &ps_cli) != 0) {
            die("rt_rpc_client_start %s", tbl_w.server_addr);
        }
        if (loop_wait(&ps_up, 10000) != 0) {
            die("cannot connect to the partition server at %s",
                tbl_w.server_addr);
        }
        wait_served(rt_rpc_client_conn(ps_cli), &tbl_w);
        wait_served(rt_rpc_client_conn(ps_cli), &tbl_s);
        printf("  tables: benchwrites (table %" PRIu64 ", range %" PRIu64
               ", epoch %" PRIu64 "), benchscan (table %" PRIu64
               ", range %" PRIu64 ") on %s\n",
               tbl_w.route.table_id, tbl_w.route.range_id, tbl_w.route.epoch,
               tbl_s.route.table_id, tbl_s.route.range_id, tbl_w.server_addr);
        {
            struct rt_buf pb = RT_BUF_INIT;
            char pk[24], rk[24];
            props_build(&pb, 1);
            key_single(1, pk, rk);
            printf(
                "  entity: 7 properties, %zu-byte blob, %zu-byte stored "
                "value, keys %zu+%zu bytes\n",
                pb.len, pb.len + RT_VALUE_HDR_SIZE, strlen(pk), strlen(rk));
            rt_buf_free(&pb);
        }
        fflush(stdout);
    }
    struct rt_rpc_conn *psc = rt_rpc_client_conn(ps_cli);

    /* 3. Single inserts */
    printf(
        "\n[3] durable single-entity inserts (closed loop, %ld ms each, "
        "%ld ms warm-up)\n",
        O.insert_ms, O.warmup_ms);
    for (int i = 0; i < n_clients; i++) {
        char what[64];
        ph_init(&ph_ins[i], PH_INSERT, (int)clients[i], psc, &tbl_w.route);
        ph_run(&ph_ins[i], O.warmup_ms, O.insert_ms);
        snprintf(what, sizeof(what), "%ld client%s", clients[i],
                 clients[i] == 1 ? "" : "s");
        print_rate_line(what, &ph_ins[i]);
    }

    /* 4. Entity group transactions */
    printf(
        "\n[4] entity group transactions: 100 inserts, one PK, atomic, "
        "%ld outstanding\n",
        O.batch_depth);
    ph_init(&ph_b, PH_BATCH, (int)O.batch_depth, psc, &tbl_w.route);
    ph_run(&ph_b, O.warmup_ms, O.batch_ms);
    print_rate_line("100-op transactions", &ph_b);
    printf("  %-34s %10.0f txns/s\n", "", ph_rate(&ph_b) / 100.0);

    /* 5. Point gets */
    printf(
        "\n[5] point gets, %ld outstanding, random keys among %zu "
        "acknowledged entities\n",
        O.get_depth, have.n);
    if (have.n == 0) {
        die("no acknowledged entities to read");
    }
    ph_init(&ph_g, PH_GET, (int)O.get_depth, psc, &tbl_w.route);
    ph_run(&ph_g, O.warmup_ms, O.get_ms);
    print_rate_line("gets", &ph_g);
    if (ph_g.notfound) {
        printf("  PROBLEM: %" PRIu64
               " gets of acknowledged keys answered "
               "not found\n",
               ph_g.notfound);
    }

    /* 6. Load + scan */
    printf(
        "\n[6] load %ld entities (%ld ops per call, non-atomic, %ld "
        "outstanding) into benchscan, then scan\n",
        O.entities, O.load_ops, O.load_depth);
    fflush(stdout);
    ph_init(&ph_l, PH_LOAD, (int)O.load_depth, psc, &tbl_s.route);
    ph_l.total = (uint64_t)O.entities;
    ph_run(&ph_l, 0, 0);
    print_rate_line("load", &ph_l);
    if (ph_l.loaded != ph_l.total) {
        die("load incomplete: %" PRIu64 " of %" PRIu64 " acknowledged",
            ph_l.loaded, ph_l.total);
    }
    snprintf(path, sizeof(path), "%s/ps/data.mdb", tmp_root);
    uint64_t ps_db_bytes = file_size(path);
    printf("  partition server data.mdb: %.1f MiB after %zu + %" PRIu64
           " entities (%.0f bytes/entity)\n",
           (double)ps_db_bytes / 1048576.0, have.n, ph_l.loaded,
           (double)ps_db_bytes / (double)(have.n + ph_l.loaded));

    have_filter = !O.no_filter;
    if (have_filter) {
        filter_encode(&filter);
        printf("  filter: %s (%zu bytes encoded, ~10%% match)\n", BENCH_FILTER,
               filter.len);
    } else {
        printf("  filter: none (--no-filter)\n");
    }
    /* Warm-up: the first pages (brings the loop and page cache up). */
    scan_run(psc, &tbl_s.route, have_filter ? &filter : NULL, 20, &warm);
    scan_run(psc, &tbl_s.route, have_filter ? &filter : NULL, 0, &sr);
    sr.rate = (double)ph_l.loaded / sr.secs;
    sr.returned_rate = (double)sr.returned / sr.secs;
    printf("  %-34s %10.0f entities/s scanned (%" PRIu64 " in %.2f s, %" PRIu64
           " pages, page p50 %.2f ms p99 %.2f ms; cpu: ps %3.0f%%, "
           "bench %3.0f%%)\n",
           "scan", sr.rate, ph_l.loaded, sr.secs, sr.pages, sr.page_p50_ms,
           sr.page_p99_ms, sr.cpu_ps_pct, sr.cpu_self_pct);
    printf("  %-34s %10.0f entities/s returned (%" PRIu64 " returned)\n", "",
           sr.returned_rate, sr.returned);
    if (have_filter) {
        if (sr.returned > ph_l.loaded / 5) {
            printf("  PROBLEM: the server returned %" PRIu64 " of %" PRIu64
                   " entities for a ~10%% filter: the filter was not "
                   "applied\n",
                   sr.returned, ph_l.loaded);
        } else if (sr.bad_match) {
            printf("  PROBLEM: %" PRIu64
                   " returned entities do not match "
                   "the filter\n",
                   sr.bad_match);
        }
    } else if (sr.returned != ph_l.loaded) {
        printf("  PROBLEM: the unfiltered scan returned %" PRIu64
               " entities, %" PRIu64 " were loaded\n",
               sr.returned, ph_l.loaded);
        rc = 1;
    }

    /* 7. Report */
    {
        static char names[8][64], refs[8][32];
        for (int i = 0; i < n_clients; i++) {
            snprintf(names[i], sizeof(names[i]), "insert, %ld client%s",
                     clients[i], clients[i] == 1 ? "" : "s");
            snprintf(refs[i], sizeof(refs[i]), "lmdb %ld/txn",
                     O.lmdb_same_batch ? clients[i]
                     : clients[i] == 1 ? 1L
                                       : 100L);
            row_add(names[i], ph_rate(&ph_ins[i]), "inserts/s",
                    O.lmdb_same_batch ? lmc[i].rate
                    : clients[i] == 1 ? lm1.rate
                                      : lm100.rate,
                    refs[i], clients[i] == 64 ? GOAL_INSERTS_64 : 0);
        }
        row_add("group txn 100 ops x16", ph_rate(&ph_b), "entities/s",
                lm100.rate, "lmdb 100/txn", 0);
        row_add("point get x256", ph_rate(&ph_g), "gets/s", 0, NULL, GOAL_GETS);
        row_add("load 1000/call x8", ph_rate(&ph_l), "entities/s", lm100.rate,
                "lmdb 100/txn", 0);
        row_add(have_filter ? "filtered scan (examined)"
                            : "scan, no filter (examined)",
                sr.rate, "entities/s", 0, NULL, GOAL_SCAN);
        row_add("scan, returned", sr.returned_rate, "entities/s", 0, NULL, 0);
        row_add("raw lmdb 1 put/txn", lm1.rate, "puts/s", 0, NULL, 0);
        row_add("raw lmdb 100 puts/txn", lm100.rate, "puts/s", 0, NULL, 0);

        printf("\n%-30s %12s %-11s %-22s %s\n", "metric", "value", "unit",
               "vs LMDB limit", "vs goal");
        printf("%-30s %12s %-11s %-22s %s\n", "------------------------------",
               "------------", "-----------", "----------------------",
               "----------------");
        for (int i = 0; i < n_rows; i++) {
            char lim[48] = "", goal[48] = "";
            if (rows[i].limit > 0) {
                snprintf(lim, sizeof(lim), "%.2fx %s",
                         rows[i].value / rows[i].limit, rows[i].limit_name);
            }
            if (rows[i].goal > 0) {
                snprintf(goal, sizeof(goal), "%.2fx of %.0f%s",
                         rows[i].value / rows[i].goal, rows[i].goal,
                         rows[i].value >= rows[i].goal ? " (met)" : "");
            }
            printf("%-30s %12.0f %-11s %-22s %s\n", rows[i].metric,
                   rows[i].value, rows[i].unit, lim, goal);
        }
        printf("\nlatency (ms)                     p50       p99\n");
        for (int i = 0; i < n_clients; i++) {
            printf("  insert, %3ld client%s %s %9.2f %9.2f\n", clients[i],
                   clients[i] == 1 ? " " : "s", clients[i] < 10 ? "   " : "   ",
                   lat_pct_ms(&ph_ins[i].lat, 50),
                   lat_pct_ms(&ph_ins[i].lat, 99));
        }
        printf("  group txn (100 ops)        %9.2f %9.2f\n",
               lat_pct_ms(&ph_b.lat, 50), lat_pct_ms(&ph_b.lat, 99));
        printf("  point get                  %9.2f %9.2f\n",
               lat_pct_ms(&ph_g.lat, 50), lat_pct_ms(&ph_g.lat, 99));
        printf("  scan page                  %9.2f %9.2f\n", sr.page_p50_ms,
               sr.page_p99_ms);
    }

    /* JSON line */
    {
        struct rt_buf j = RT_BUF_INIT;
        uint64_t errs = ph_b.errors + ph_g.errors + ph_l.errors;
        rt_buf_append_str(&j, "{");
        rt_buf_printf(&j, "\"bench\":\"bench_ps\",\"quick\":%s",
                      O.quick ? "true" : "false");
        json_num(&j, "entities", (double)O.entities);
        json_num(&j, "lmdb_put_1_per_txn_per_s", lm1.rate);
        json_num(&j, "lmdb_put_100_per_txn_per_s", lm100.rate);
        json_num(&j, "lmdb_commit_1_p50_ms", lm1.commit_p50_ms);
        json_num(&j, "lmdb_commit_100_p50_ms", lm100.commit_p50_ms);
        if (O.lmdb_per_txn > 0) {
            json_num(&j, "lmdb_per_txn", (double)O.lmdb_per_txn);
            json_num(&j, "lmdb_put_n_per_txn_per_s", lmn.rate);
            json_num(&j, "lmdb_commit_n_p50_ms", lmn.commit_p50_ms);
        }
        for (int i = 0; i < n_clients; i++) {
            char k[64];
            errs += ph_ins[i].errors;
            snprintf(k, sizeof(k), "insert_c%ld_per_s", clients[i]);
            json_num(&j, k, ph_rate(&ph_ins[i]));
            snprintf(k, sizeof(k), "insert_c%ld_p50_ms", clients[i]);
            json_num(&j, k, lat_pct_ms(&ph_ins[i].lat, 50));
            snprintf(k, sizeof(k), "insert_c%ld_p99_ms", clients[i]);
            json_num(&j, k, lat_pct_ms(&ph_ins[i].lat, 99));
            snprintf(k, sizeof(k), "insert_c%ld_ps_cpu_pct", clients[i]);
            json_num(&j, k, ph_ins[i].cpu_ps_pct);
            if (O.lmdb_same_batch && clients[i] != 1 && clients[i] != 100) {
                snprintf(k, sizeof(k), "lmdb_put_%ld_per_txn_per_s",
                         clients[i]);
                json_num(&j, k, lmc[i].rate);
            }
        }
        json_num(&j, "batch100_entities_per_s", ph_rate(&ph_b));
        json_num(&j, "batch100_p50_ms", lat_pct_ms(&ph_b.lat, 50));
        json_num(&j, "batch100_p99_ms", lat_pct_ms(&ph_b.lat, 99));
        json_num(&j, "get_per_s", ph_rate(&ph_g));
        json_num(&j, "get_p50_ms", lat_pct_ms(&ph_g.lat, 50));
        json_num(&j, "get_p99_ms", lat_pct_ms(&ph_g.lat, 99));
        json_num(&j, "get_ps_cpu_pct", ph_g.cpu_ps_pct);
        json_num(&j, "get_bench_cpu_pct", ph_g.cpu_self_pct);
        json_num(&j, "load_entities_per_s", ph_rate(&ph_l));
        json_num(&j, "scan_examined_per_s", sr.rate);
        json_num(&j, "scan_returned_per_s", sr.returned_rate);
        json_num(&j, "scan_returned", (double)sr.returned);
        json_num(&j, "scan_pages", (double)sr.pages);
        json_num(&j, "scan_page_p50_ms", sr.page_p50_ms);
        json_num(&j, "scan_page_p99_ms", sr.page_p99_ms);
        rt_buf_printf(&j, ",\"scan_filter\":%s",
                      have_filter ? "\"" BENCH_FILTER "\"" : "null");
        json_num(&j, "ps_data_mdb_bytes", (double)ps_db_bytes);
        json_num(&j, "errors", (double)errs);
        json_num(&j, "busy", (double)(ph_b.busy + ph_l.busy));
        rt_buf_append_str(&j, "}");
        printf("\nJSON %s\n", rt_buf_cstr(&j));
        if (O.json && *O.json) {
            FILE *f = fopen(O.json, "w");
            if (!f || fprintf(f, "%s\n", rt_buf_cstr(&j)) < 0) {
                fprintf(stderr, "bench: cannot write %s\n", O.json);
                rc = 1;
            }
            if (f) {
                fclose(f);
            }
        }
        rt_buf_free(&j);
    }

    /* 8. Stop */
    rt_rpc_client_close(ps_cli);
    rt_rpc_client_close(ms_cli);
    uv_run(&loop, UV_RUN_DEFAULT);
    if (uv_loop_close(&loop) != 0) {
        fprintf(stderr, "bench: loop not empty at close\n");
    }
    child_stop(&ch_ps);
    child_stop(&ch_master);
    for (int i = 0; i < 2; i++) {
        struct child *c = i == 0 ? &ch_ps : &ch_master;
        if (!WIFEXITED(c->status) || WEXITSTATUS(c->status) != 0) {
            printf("PROBLEM: %s exited with status 0x%x on SIGTERM\n", c->name,
                   c->status);
            child_tail(c, 20);
            rc = 1;
        }
    }
    for (int i = 0; i < 2; i++) {
        struct child *c = i == 0 ? &ch_ps : &ch_master;
        int san = 0, warn = log_scan(c, 3, &san);
        if (san) {
            printf("PROBLEM: sanitizer report in %s\n", c->log);
            O.keep = 1;
            rc = 1;
        }
        if (warn) {
            printf(
                "note: %s logged %d warn/error lines (shown above; log "
                "kept with --keep)\n",
                c->name, warn);
        }
    }
    printf("\ntotal %.1f s%s\n", secs_since(t_all),
           O.keep ? "" : ", temp dir removed");
    if (O.keep) {
        printf("kept %s\n", tmp_root);
        tmp_root[0] = '\0';
    }
    cleanup();
    for (int i = 0; i < n_clients; i++) {
        free(ph_ins[i].slots);
        lat_free(&ph_ins[i].lat);
    }
    free(ph_b.slots);
    lat_free(&ph_b.lat);
    free(ph_g.slots);
    lat_free(&ph_g.lat);
    free(ph_l.slots);
    lat_free(&ph_l.lat);
    rt_buf_free(&filter);
    rt_filter_free(scan_filter);
    rt_buf_free(&scratch_props);
    free(scratch_ops);
    free(scratch_op_ptrs);
    free(scratch_keys);
    free(scratch_off);
    free(have.v);
    rt_config_free(bench_opts);
    return rc;
}
