/* rt-load internals shared by rt_load.c (options, engine, reports) and
 * rl_report.c (summary, CSV, JSON, plot, master status and events). */
#ifndef RL_INTERNAL_H
#define RL_INTERNAL_H

#include <pthread.h>
#include <stdint.h>

#include <uv.h>

#include "rl_hist.h"
#include "rl_http.h"
#include "rl_keys.h"
#include "rl_req.h"
#include "rl_spec.h"

/* Outcome counters of one operation kind (or of all). */
struct rl_counts
{
    uint64_t ops;       /* finished operations */
    uint64_t ok;        /* 2xx */
    uint64_t not_found; /* 404 */
    uint64_t conflict;  /* 409, 412 */
    uint64_t throttled; /* final answer 503 (after any retries) */
    uint64_t errors;    /* anything else: other statuses, network, timeouts */
    uint64_t timeouts;
    uint64_t retries;  /* re-sent after a 503 */
    uint64_t r503;     /* requests answered 503 (each attempt) */
    uint64_t requests; /* HTTP requests (pages, retries, rmw steps) */
    uint64_t entities; /* entities written or returned */
};

void rl_counts_add(struct rl_counts *d, const struct rl_counts *s);

/* The first distinct failures, for the report. */
#define RL_ERRKINDS 8
struct rl_errkind
{
    int status;
    char code[64];
    char op[16];
    char detail[160];
    uint64_t n;
};

/* One second of the run (all threads), for the progress line and CSV. */
struct rl_row
{
    int sec; /* 1-based: covers (sec-1, sec] */
    double unix_time;
    int warmup;
    struct rl_counts c;
    double p50, p95, p99, max; /* ms */
    int inflight;
    int ranges; /* table's ranges at the master, -1 unknown */
    char events[256];
};

struct rl_event
{
    double unix_s;
    char text[160];
};

struct rl_result
{
    double secs; /* measured window */
    struct rl_counts all;
    struct rl_counts op[RL_OP__NR];
    struct rl_hist h_all;
    struct rl_hist h_op[RL_OP__NR];
    struct rl_errkind errs[RL_ERRKINDS];
    int nerrs;
    uint64_t unsent; /* open loop: due but never sent */
    struct rl_row *rows;
    int nrows;
    struct rl_event *events;
    int nevents;
    int events_status; /* HTTP status of /api/events, 0 = not asked */
    int ranges_start, ranges_end;
    double start_unix;
};

/* rl_report.c */
struct rl_report_cfg
{
    const char *label;
    const char *csv;
    const char *json;
    const char *plot;
    const char *master_http;
    const char *table;
    const char *account;
    const char *mix;
    const char *dist;
    const char *mode; /* "closed 16 workers" / "open 5000/s" */
    char endpoint[512];
};

int rl_master_ranges(const char *master_http,
                     const char *account,
                     const char *table);
void rl_fetch_events(const char *master_http,
                     struct rl_result *r,
                     double t0_unix,
                     double t1_unix);
void rl_report_text(const struct rl_report_cfg *cfg, const struct rl_result *r);
int rl_report_csv(const struct rl_report_cfg *cfg, const struct rl_result *r);
int rl_report_json(const struct rl_report_cfg *cfg, const struct rl_result *r);
int rl_report_plot(const struct rl_report_cfg *cfg, const struct rl_result *r);
/* Blocking HTTP/1.0 GET on host:port; returns the status and the body in
 * *body (malloc, NUL-terminated) or -1. */
int rl_http_get_blocking(const char *hostport, const char *path, char **body);

#endif
