/* rt-load reports: the text summary, the per-second CSV, the JSON summary,
 * gnuplot plots, and what rt-load asks the rangetable master (ranges of
 * the table, split/merge/move events). Runs on the main thread after the
 * run (the ranges query also once a second during it). */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "rl_internal.h"
#include "rt_addr.h"
#include "rt_buf.h"

/* The master's admin token, found as rtctl finds it: $RT_ADMIN_TOKEN_FILE,
 * else $RT_ADMIN_TOKEN, else ./rt-data/admin.token when it exists; ""
 * when none (a master with --status-open needs none). */
static void rl__admin_token(char *out, size_t n)
{
    const char *f = getenv("RT_ADMIN_TOKEN_FILE");
    const char *t = getenv("RT_ADMIN_TOKEN");
    size_t len = 0;
    out[0] = '\0';
    if ((!f || !*f) && t && *t) {
        snprintf(out, n, "%s", t);
        len = strlen(out);
    } else {
        FILE *fp;
        if (!f || !*f) {
            f = "./rt-data/admin.token";
        }
        fp = fopen(f, "r");
        if (fp) {
            len = fread(out, 1, n - 1, fp);
            fclose(fp);
            out[len] = '\0';
        }
    }
    while (len && strchr(" \t\r\n", out[len - 1])) {
        out[--len] = '\0';
    }
    if (strpbrk(out, " \t\r\n")) {
        out[0] = '\0'; /* not one token */
    }
}

int rl_http_get_blocking(const char *hostport, const char *path, char **body)
{
    char host[256];
    int port, fd, status = -1;
    struct sockaddr_storage sa;
    socklen_t salen;
    struct timeval tv = {3, 0};
    struct rt_buf b = RT_BUF_INIT;
    char req[512 + 4096];
    char token[4096];
    *body = NULL;
    rl__admin_token(token, sizeof(token));
    if (rt_addr_split(hostport, host, sizeof(host), &port) != 0 ||
        rt_addr_ip(host, port, &sa, &salen) != 0) {
        return -1;
    }
    fd = socket(sa.ss_family, SOCK_STREAM, 0);
    if (fd < 0) {
        return -1;
    }
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    snprintf(req, sizeof(req),
             "GET %s HTTP/1.0\r\nHost: %s\r\nConnection: close\r\n%s%s%s\r\n",
             path, hostport, token[0] ? "Authorization: Bearer " : "", token,
             token[0] ? "\r\n" : "");
    if (connect(fd, (struct sockaddr *)&sa, salen) != 0 ||
        write(fd, req, strlen(req)) != (ssize_t)strlen(req)) {
        close(fd);
        return -1;
    }
    for (;;) {
        uint8_t *p = rt_buf_reserve(&b, 65536);
        ssize_t n = read(fd, p, 65536);
        if (n <= 0) {
            break;
        }
        b.len += (size_t)n;
    }
    close(fd);
    {
        const char *s = rt_buf_cstr(&b);
        const char *e = strstr(s, "\r\n\r\n");
        if (e && strncmp(s, "HTTP/1.", 7) == 0 && strlen(s) > 12) {
            status = atoi(s + 9);
            *body = strdup(e + 4);
        }
    }
    rt_buf_free(&b);
    return status;
}

int rl_master_ranges(const char *master_http,
                     const char *account,
                     const char *table)
{
    char *body;
    json_t *root, *ranges, *r;
    size_t i;
    int n = 0;
    if (rl_http_get_blocking(master_http, "/api/status", &body) != 200 ||
        !body) {
        free(body);
        return -1;
    }
    root = json_loads(body, 0, NULL);
    free(body);
    if (!root) {
        return -1;
    }
    ranges = json_object_get(root, "ranges");
    json_array_foreach(ranges, i, r)
    {
        const char *t = json_string_value(json_object_get(r, "table"));
        const char *a = json_string_value(json_object_get(r, "account"));
        if (t && !strcasecmp(t, table) && (!a || !strcmp(a, account))) {
            n++;
        }
    }
    json_decref(root);
    return n;
}

/* Event time in unix seconds, or -1. */
static double ev_time(json_t *e)
{
    static const char *const ms_keys[] = {"unix_ms", "ts_ms",        "time_ms",
                                          "t_ms",    "timestamp_ms", "at_ms"};
    static const char *const keys[] = {"unix", "ts", "time", "timestamp",
                                       "t",    "at", "when"};
    for (size_t i = 0; i < sizeof(ms_keys) / sizeof(*ms_keys); i++) {
        json_t *v = json_object_get(e, ms_keys[i]);
        if (json_is_number(v)) {
            return json_number_value(v) / 1000.0;
        }
    }
    for (size_t i = 0; i < sizeof(keys) / sizeof(*keys); i++) {
        json_t *v = json_object_get(e, keys[i]);
        if (json_is_number(v)) {
            double x = json_number_value(v);
            return x > 1e14 ? x / 1e6 : x > 1e11 ? x / 1000.0 : x;
        }
        if (json_is_string(v)) {
            struct tm tm;
            const char *s = json_string_value(v);
            const char *rest;
            memset(&tm, 0, sizeof(tm));
            rest = strptime(s, "%Y-%m-%dT%H:%M:%S", &tm);
            if (rest) {
                double frac = 0;
                if (*rest == '.') {
                    frac = strtod(rest, NULL);
                }
                return (double)timegm(&tm) + frac;
            }
        }
    }
    return -1;
}

static void ev_text(json_t *e, char *out, size_t n)
{
    static const char *const type_keys[] = {"type", "kind", "event", "action",
                                            "decision"};
    const char *k;
    json_t *v;
    size_t len = 0;
    const char *type = NULL;
    out[0] = '\0';
    for (size_t i = 0; i < sizeof(type_keys) / sizeof(*type_keys); i++) {
        type = json_string_value(json_object_get(e, type_keys[i]));
        if (type) {
            break;
        }
    }
    len += (size_t)snprintf(out, n, "%s", type ? type : "event");
    json_object_foreach(e, k, v)
    {
        char val[64];
        if (len + 2 >= n) {
            break;
        }
        if (!strcmp(k, "type") || !strcmp(k, "kind") || !strcmp(k, "event") ||
            !strcmp(k, "action") || strstr(k, "time") || strstr(k, "ts") ||
            !strcmp(k, "t") || !strcmp(k, "unix") || !strcmp(k, "unix_ms") ||
            !strcmp(k, "at") || !strcmp(k, "at_ms") || !strcmp(k, "when")) {
            continue;
        }
        if (json_is_string(v)) {
            snprintf(val, sizeof(val), "%s", json_string_value(v));
        } else if (json_is_integer(v)) {
            snprintf(val, sizeof(val), "%" JSON_INTEGER_FORMAT,
                     json_integer_value(v));
        } else if (json_is_real(v)) {
            snprintf(val, sizeof(val), "%g", json_real_value(v));
        } else {
            continue;
        }
        len += (size_t)snprintf(out + len, n - len, " %s=%s", k, val);
    }
    if (len >= n) {
        out[n - 1] = '\0';
    }
    for (char *p = out; *p; p++) {
        if (*p == ',' || *p == ';' || *p == '"' || *p == '\n' || *p == '\'') {
            *p = ' ';
        }
    }
}

static void ev_add(struct rl_result *r, json_t *e, double t0, double t1)
{
    double t = ev_time(e);
    struct rl_event *ev;
    if (!json_is_object(e) || t < 0 || t < t0 || t > t1) {
        return;
    }
    ev = realloc(r->events, (size_t)(r->nevents + 1) * sizeof(*ev));
    if (!ev) {
        return;
    }
    r->events = ev;
    ev = &r->events[r->nevents++];
    ev->unix_s = t;
    ev_text(e, ev->text, sizeof(ev->text));
    /* Into the row of its second. */
    for (int i = 0; i < r->nrows; i++) {
        struct rl_row *row = &r->rows[i];
        if (t <= row->unix_time || i == r->nrows - 1) {
            size_t l = strlen(row->events);
            if (l + strlen(ev->text) + 2 < sizeof(row->events)) {
                snprintf(row->events + l, sizeof(row->events) - l, "%s%s",
                         l ? "; " : "", ev->text);
            }
            break;
        }
    }
}

void rl_fetch_events(const char *master_http,
                     struct rl_result *r,
                     double t0_unix,
                     double t1_unix)
{
    char *body = NULL;
    char path[128];
    json_t *root;
    snprintf(path, sizeof(path), "/api/events?since_ms=%.0f", t0_unix * 1000.0);
    r->events_status = rl_http_get_blocking(master_http, path, &body);
    if (r->events_status != 200 || !body) {
        free(body);
        return;
    }
    root = json_loads(body, JSON_DECODE_ANY, NULL);
    if (root) {
        json_t *arr =
            json_is_array(root) ? root : json_object_get(root, "events");
        size_t i;
        json_t *e;
        json_array_foreach(arr, i, e)
        {
            ev_add(r, e, t0_unix, t1_unix);
        }
        json_decref(root);
    } else {
        /* JSON lines */
        char *save = NULL;
        for (char *line = strtok_r(body, "\n", &save); line;
             line = strtok_r(NULL, "\n", &save)) {
            json_t *e = json_loads(line, 0, NULL);
            if (e) {
                ev_add(r, e, t0_unix, t1_unix);
                json_decref(e);
            }
        }
    }
    free(body);
}

static double pct_ms(const struct rl_hist *h, double p)
{
    return rl_hist_pct(h, p) / 1000.0;
}

void rl_report_text(const struct rl_report_cfg *cfg, const struct rl_result *r)
{
    const struct rl_counts *a = &r->all;
    printf("\nrt-load summary%s%s\n", cfg->label[0] ? ": " : "", cfg->label);
    printf("  endpoint %s, table %s, %s\n", cfg->endpoint, cfg->table,
           cfg->mode);
    printf("  mix %s, dist %s\n", cfg->mix, cfg->dist);
    printf("  measured %.2f s: %" PRIu64
           " ops = %.1f ops/s, %.1f "
           "entities/s, %" PRIu64 " HTTP requests\n",
           r->secs, a->ops, (double)a->ops / r->secs,
           (double)a->entities / r->secs, a->requests);
    printf("  %-13s %9s %9s %9s %9s %9s %9s %9s %9s\n", "latency (ms)", "ops/s",
           "p50", "p90", "p95", "p99", "p99.9", "max", "mean");
    for (int op = -1; op < RL_OP__NR; op++) {
        const struct rl_hist *h = op < 0 ? &r->h_all : &r->h_op[op];
        const struct rl_counts *c = op < 0 ? a : &r->op[op];
        if (op >= 0 && !c->ops) {
            continue;
        }
        printf("  %-13s %9.1f %9.3f %9.3f %9.3f %9.3f %9.3f %9.3f %9.3f\n",
               op < 0 ? "all" : rl_op_name((enum rl_op)op),
               (double)c->ops / r->secs, pct_ms(h, 50), pct_ms(h, 90),
               pct_ms(h, 95), pct_ms(h, 99), pct_ms(h, 99.9), pct_ms(h, 100),
               rl_hist_mean(h) / 1000.0);
    }
    printf("  outcomes: ok %" PRIu64 ", 404 %" PRIu64 ", 409/412 %" PRIu64
           ", 503 after retries %" PRIu64 ", errors %" PRIu64
           " (timeouts %" PRIu64 ")\n",
           a->ok, a->not_found, a->conflict, a->throttled, a->errors,
           a->timeouts);
    printf("  throttling: %" PRIu64
           " answers 503 (%.2f%% of requests), %" PRIu64 " retries\n",
           a->r503,
           a->requests ? 100.0 * (double)a->r503 / (double)a->requests : 0.0,
           a->retries);
    if (r->unsent) {
        printf("  open loop: %" PRIu64
               " operations were due but never sent "
               "(every connection busy): the target rate was not reached\n",
               r->unsent);
    }
    for (int i = 0; i < r->nerrs; i++) {
        const struct rl_errkind *e = &r->errs[i];
        printf("  error: %" PRIu64 " x %s -> %d %s %s\n", e->n, e->op,
               e->status, e->code, e->detail);
    }
    if (r->ranges_start >= 0) {
        printf("  master: table ranges %d -> %d", r->ranges_start,
               r->ranges_end);
        if (r->events_status == 200) {
            printf(", %d events during the run\n", r->nevents);
            for (int i = 0; i < r->nevents && i < 20; i++) {
                printf("    +%6.1f s  %s\n",
                       r->events[i].unix_s - r->start_unix, r->events[i].text);
            }
        } else {
            printf(" (events API: %s)\n", r->events_status == 404
                                              ? "404, not there yet"
                                              : "no answer");
        }
    }
    fflush(stdout);
}

int rl_report_csv(const struct rl_report_cfg *cfg, const struct rl_result *r)
{
    FILE *f = fopen(cfg->csv, "w");
    if (!f) {
        fprintf(stderr, "rt-load: cannot write %s\n", cfg->csv);
        return -1;
    }
    fprintf(f,
            "second,unix_time,phase,ops,ops_per_s,entities_per_s,p50_ms,"
            "p95_ms,p99_ms,max_ms,answers_503,rate_503,retries,throttled,"
            "not_found,conflict,errors,inflight,ranges,events\n");
    for (int i = 0; i < r->nrows; i++) {
        const struct rl_row *w = &r->rows[i];
        double span = i == 0 ? 1.0 : w->unix_time - r->rows[i - 1].unix_time;
        if (span <= 0.01) {
            span = 1.0;
        }
        if (span > 0.95 && span < 1.05) {
            span = 1.0;
        }
        fprintf(f,
                "%d,%.3f,%s,%" PRIu64 ",%.1f,%.1f,%.3f,%.3f,%.3f,%.3f,%" PRIu64
                ",%.4f,%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64
                ",%d,%d,\"%s\"\n",
                w->sec, w->unix_time, w->warmup ? "warmup" : "run", w->c.ops,
                (double)w->c.ops / span, (double)w->c.entities / span, w->p50,
                w->p95, w->p99, w->max, w->c.r503,
                w->c.requests ? (double)w->c.r503 / (double)w->c.requests : 0,
                w->c.retries, w->c.throttled, w->c.not_found, w->c.conflict,
                w->c.errors, w->inflight, w->ranges, w->events);
    }
    if (fclose(f) != 0) {
        return -1;
    }
    return 0;
}

static json_t *counts_json(const struct rl_counts *c, double secs)
{
    return json_pack(
        "{s:I,s:f,s:f,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I}", "ops",
        (json_int_t)c->ops, "ops_per_s", (double)c->ops / secs,
        "entities_per_s", (double)c->entities / secs, "ok", (json_int_t)c->ok,
        "not_found", (json_int_t)c->not_found, "conflict",
        (json_int_t)c->conflict, "throttled", (json_int_t)c->throttled,
        "errors", (json_int_t)c->errors, "timeouts", (json_int_t)c->timeouts,
        "retries", (json_int_t)c->retries, "answers_503", (json_int_t)c->r503,
        "requests", (json_int_t)c->requests, "entities",
        (json_int_t)c->entities);
}

static json_t *lat_json(const struct rl_hist *h)
{
    return json_pack("{s:f,s:f,s:f,s:f,s:f,s:f,s:f,s:f}", "p50", pct_ms(h, 50),
                     "p90", pct_ms(h, 90), "p95", pct_ms(h, 95), "p99",
                     pct_ms(h, 99), "p999", pct_ms(h, 99.9), "max",
                     pct_ms(h, 100), "min",
                     h->count ? (double)h->min / 1000.0 : 0.0, "mean",
                     rl_hist_mean(h) / 1000.0);
}

int rl_report_json(const struct rl_report_cfg *cfg, const struct rl_result *r)
{
    json_t *root = json_object(), *ops = json_object(), *errs = json_array(),
           *evs = json_array();
    json_t *all = counts_json(&r->all, r->secs);
    int rc = 0;
    json_object_set_new(root, "label", json_string(cfg->label));
    json_object_set_new(root, "endpoint", json_string(cfg->endpoint));
    json_object_set_new(root, "table", json_string(cfg->table));
    json_object_set_new(root, "mode", json_string(cfg->mode));
    json_object_set_new(root, "mix", json_string(cfg->mix));
    json_object_set_new(root, "dist", json_string(cfg->dist));
    json_object_set_new(root, "seconds", json_real(r->secs));
    json_object_set_new(all, "latency_ms", lat_json(&r->h_all));
    json_object_set_new(root, "all", all);
    for (int op = 0; op < RL_OP__NR; op++) {
        json_t *o;
        if (!r->op[op].ops) {
            continue;
        }
        o = counts_json(&r->op[op], r->secs);
        json_object_set_new(o, "latency_ms", lat_json(&r->h_op[op]));
        json_object_set_new(ops, rl_op_name((enum rl_op)op), o);
    }
    json_object_set_new(root, "ops", ops);
    json_object_set_new(root, "unsent", json_integer((json_int_t)r->unsent));
    for (int i = 0; i < r->nerrs; i++) {
        json_array_append_new(
            errs,
            json_pack("{s:s,s:i,s:s,s:I,s:s}", "op", r->errs[i].op, "status",
                      r->errs[i].status, "code", r->errs[i].code, "count",
                      (json_int_t)r->errs[i].n, "detail", r->errs[i].detail));
    }
    json_object_set_new(root, "errors", errs);
    json_object_set_new(root, "ranges_start", json_integer(r->ranges_start));
    json_object_set_new(root, "ranges_end", json_integer(r->ranges_end));
    for (int i = 0; i < r->nevents; i++) {
        json_array_append_new(
            evs,
            json_pack("{s:f,s:s}", "t", r->events[i].unix_s - r->start_unix,
                      "text", r->events[i].text));
    }
    json_object_set_new(root, "events", evs);
    if (!strcmp(cfg->json, "-")) {
        char *s = json_dumps(root, JSON_COMPACT);
        printf("JSON %s\n", s);
        free(s);
    } else if (json_dump_file(root, cfg->json, JSON_INDENT(1)) != 0) {
        fprintf(stderr, "rt-load: cannot write %s\n", cfg->json);
        rc = -1;
    }
    json_decref(root);
    return rc;
}

int rl_report_plot(const struct rl_report_cfg *cfg, const struct rl_result *r)
{
    char gp[1024], cmd[4096];
    FILE *f;
    int rc = 0;
    snprintf(gp, sizeof(gp), "%s.gp", cfg->plot);
    f = fopen(gp, "w");
    if (!f) {
        fprintf(stderr, "rt-load: cannot write %s\n", gp);
        return -1;
    }
    fprintf(f,
            "# rt-load plot of %s (gnuplot; the terminal is set by the "
            "caller)\n"
            "set datafile separator ','\n"
            "set key outside top center horizontal\n"
            "set grid\n"
            "set multiplot layout 2,1 title '%s: %s, %s'\n"
            "set ylabel 'ops/s'\nset y2label '503 answers/s'\n"
            "set ytics nomirror\nset y2tics\n"
            "set yrange [0:*]\nset y2range [0:*]\n",
            cfg->csv, cfg->label[0] ? cfg->label : "rt-load", cfg->mix,
            cfg->mode);
    for (int i = 0; i < r->nevents; i++) {
        double x = r->events[i].unix_s - r->start_unix;
        char word[32];
        sscanf(r->events[i].text, "%31s", word);
        fprintf(f,
                "set arrow from %.2f, graph 0 to %.2f, graph 1 nohead "
                "lc rgb 'red' dt 2\n"
                "set label '%s' at %.2f, graph 0.97 rotate by 90 right "
                "font ',8' tc rgb 'red'\n",
                x, x, word, x);
    }
    fprintf(f,
            "plot '%s' using 1:5 skip 1 with lines lw 2 title 'ops/s', "
            "'' using 1:11 skip 1 axes x1y2 with lines lc rgb 'orange' "
            "title '503/s'\n"
            "set xlabel 'elapsed (s)'\nunset y2label\nunset y2tics\n"
            "set ytics mirror\nset ylabel 'latency (ms)'\n"
            "set logscale y\nset yrange [*:*]\n"
            "plot '%s' using 1:($7>0?$7:NaN) skip 1 with lines title 'p50', "
            "'' using 1:($9>0?$9:NaN) skip 1 with lines title 'p99', "
            "'' using 1:($10>0?$10:NaN) skip 1 with lines title 'max'\n"
            "unset multiplot\n",
            cfg->csv, cfg->csv);
    fclose(f);
    if (system("command -v gnuplot >/dev/null 2>&1") != 0) {
        fprintf(stderr,
                "rt-load: gnuplot not found (apt-get install "
                "gnuplot-nox); plot script left in %s\n",
                gp);
        return -1;
    }
    snprintf(cmd, sizeof(cmd),
             "gnuplot -e \"set terminal svg size 1100,750 dynamic; set "
             "output '%s.svg'\" '%s' && gnuplot -e \"set terminal pngcairo "
             "size 1100,750; set output '%s.png'\" '%s'",
             cfg->plot, gp, cfg->plot, gp);
    if (system(cmd) != 0) {
        fprintf(stderr, "rt-load: gnuplot failed (%s)\n", gp);
        rc = -1;
    }
    return rc;
}
