/* Reports of a finished simulation (contract in rs_report.h). */
#include "rs_report.h"

#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rt_alloc.h"

static int rs__dbl_cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double rs__pct(const double *v, size_t n, double p)
{
    size_t i;
    if (n == 0) {
        return 0;
    }
    i = (size_t)ceil(p * (double)n) - 1;
    return v[i < n ? i : n - 1];
}

static double rs__bm(const struct rs_sec *x)
{
    return x->mean > 0 ? x->busiest / x->mean : 1.0;
}

/* Recovered in this second: demand served (an idle second proves
 * nothing) with few 503s on evenly loaded servers. */
static bool rs__healthy(const struct rs_sec *x)
{
    if (x->demanded <= 0 || x->mean <= 0) {
        return false;
    }
    return x->refused / x->demanded < RS_RECOVER_503 &&
           rs__bm(x) < RS_RECOVER_BM;
}

/* Decisions undone within RS_THRASH_S: a merge of the two halves of a
 * split, a move (or transfer) of a range back to the server it left. */
static uint64_t rs__thrash(const struct rs_sim *s)
{
    uint64_t n = 0, win = (uint64_t)RS_THRASH_S * 1000;
    for (size_t j = 0; j < s->ndecs; j++) {
        const struct rs_dec *b = &s->decs[j];
        if (!b->ok) {
            continue;
        }
        for (size_t i = j; i-- > 0;) {
            const struct rs_dec *a = &s->decs[i];
            if (b->t_ms - a->t_ms > win) {
                break;
            }
            if (!a->ok) {
                continue;
            }
            if (b->kind == MS_DECIDE_MERGE && a->kind == MS_DECIDE_SPLIT &&
                a->new_ids[0] == b->range_id && a->new_ids[1] == b->range_id2) {
                n++;
                break;
            }
            if ((b->kind == MS_DECIDE_MOVE || b->kind == MS_DECIDE_TRANSFER) &&
                a->kind == b->kind && a->range_id == b->range_id &&
                a->from == b->server_id && a->server_id == b->from) {
                n++;
                break;
            }
        }
    }
    return n;
}

void rs_summarize(const struct rs_sim *s, struct rs_summary *out)
{
    double *bm = rt_xcalloc(s->nsecs ? s->nsecs : 1, sizeof(*bm));
    size_t nb = 0, last_step = 0;
    bool any_step = false;
    memset(out, 0, sizeof(*out));
    for (size_t t = 0; t < s->nsecs; t++) {
        const struct rs_sec *x = &s->secs[t];
        out->demanded += x->demanded;
        out->served += x->served;
        if (x->mean > 0) {
            bm[nb++] = rs__bm(x);
        }
    }
    /* Counted when carried out (the per-second rows miss the last
     * step's, which no later second sums). */
    out->splits = s->totals[MS_DECIDE_SPLIT];
    out->merges = s->totals[MS_DECIDE_MERGE];
    out->moves = s->totals[MS_DECIDE_MOVE];
    out->transfers = s->totals[MS_DECIDE_TRANSFER];
    out->bytes_moved = s->bytes_moved;
    out->refused_decisions = s->refused_decisions;
    out->ranges_end = s->nr;
    out->served_pct = out->demanded > 0 ? out->served / out->demanded : 1;
    out->refused_pct = 1 - out->served_pct;
    qsort(bm, nb, sizeof(*bm), rs__dbl_cmp);
    out->bm_p50 = rs__pct(bm, nb, 0.50);
    out->bm_p99 = rs__pct(bm, nb, 0.99);
    free(bm);
    /* Steps and recoveries. */
    for (size_t t = 1; t < s->nsecs; t++) {
        const struct rs_sec *x = &s->secs[t];
        double lo = x->demanded;
        bool step;
        for (size_t k = 1; k <= RS_STEP_WITHIN_S && k <= t; k++) {
            if (s->secs[t - k].demanded < lo) {
                lo = s->secs[t - k].demanded;
            }
        }
        step = x->step || (lo > 0 && x->demanded > RS_STEP_RISE * lo);
        if (!step || (any_step && t < last_step + 10)) {
            continue;
        }
        any_step = true;
        last_step = t;
        out->steps++;
        for (size_t u = t; u < s->nsecs; u++) {
            if (u > t && s->secs[u].step) {
                break; /* the next shift came first */
            }
            if (rs__healthy(&s->secs[u])) {
                double r = (double)(u - t);
                out->recovered++;
                out->recover_mean_s += r;
                if (r > out->recover_max_s) {
                    out->recover_max_s = r;
                }
                break;
            }
        }
    }
    if (out->recovered) {
        out->recover_mean_s /= (double)out->recovered;
    }
    out->thrash = rs__thrash(s);
}

int rs_write_metrics(const struct rs_sim *s, const char *path)
{
    FILE *f = fopen(path, "w");
    if (!f) {
        return -1;
    }
    fprintf(f,
            "t_s,demanded,served,refused,refused_pct,busiest,mean,"
            "busiest_over_mean,ranges,splits,merges,moves,transfers,"
            "bytes_moved,step\n");
    for (size_t t = 0; t < s->nsecs; t++) {
        const struct rs_sec *x = &s->secs[t];
        fprintf(f,
                "%zu,%.1f,%.1f,%.1f,%.3f,%.1f,%.1f,%.3f,%u,%u,%u,%u,%u,"
                "%" PRIu64 ",%d\n",
                t + 1, x->demanded, x->served, x->refused,
                x->demanded > 0 ? 100.0 * x->refused / x->demanded : 0.0,
                x->busiest, x->mean, rs__bm(x), x->ranges, x->splits, x->merges,
                x->moves, x->transfers, x->bytes_moved, x->step ? 1 : 0);
    }
    return fclose(f) == 0 ? 0 : -1;
}

/* @str as a JSON string literal. */
static void rs__jstr(FILE *f, const char *str)
{
    json_t *j;
    char *t;
    if (!str) {
        fputs("null", f);
        return;
    }
    j = json_string(str);
    t = j ? json_dumps(j, JSON_ENCODE_ANY) : NULL;
    fputs(t ? t : "\"\"", f);
    free(t);
    json_decref(j);
}

static void rs__iso(uint64_t unix_ms, char *out, size_t n)
{
    time_t secs = (time_t)(unix_ms / 1000);
    struct tm tm;
    char day[32];
    gmtime_r(&secs, &tm);
    strftime(day, sizeof(day), "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(out, n, "%.24s.%03uZ", day, (unsigned)(unix_ms % 1000));
}

int rs_write_keyviz(const struct rs_sim *s, const char *path)
{
    FILE *f = fopen(path, "w");
    bool *seen = rt_xcalloc(s->nbounds ? s->nbounds : 1, sizeof(*seen));
    bool first = true;
    char iso[40];
    if (!f) {
        free(seen);
        return -1;
    }
    fprintf(f, "{\"source\":\"rt-sim\",\"policy\":");
    rs__jstr(f, s->cfg.policy);
    fprintf(f, ",\"seed\":%" PRIu64 ",\"workload\":", s->cfg.seed);
    rs__jstr(f, s->work.cfg.name);
    fprintf(f, ",\"history\":{\"step_ms\":%u,\"threshold\":%.0f,\"tables\":{",
            s->frame_every_s * 1000, s->cfg.pcfg.split_eps);
    for (size_t t = 1; t <= s->cfg.tables; t++) {
        fprintf(f, "%s\"%zu\":\"t%zu\"", t > 1 ? "," : "", t, t);
    }
    fprintf(f, "},\"frames\":[");
    for (size_t k = 0; k < s->nframes; k++) {
        const struct rs_frame *fr = &s->frames[k];
        fprintf(f, "%s{\"t\":%" PRIu64 ",\"r\":[", k ? "," : "",
                s->cfg.start_unix_ms + fr->t_ms);
        for (size_t c = 0; c < fr->ncells; c++) {
            fprintf(f, "%s[%" PRIu64 ",%.0f,%u]", c ? "," : "",
                    fr->cells[c].range_id, fr->cells[c].demand,
                    fr->cells[c].server);
            if (fr->cells[c].range_id < s->nbounds) {
                seen[fr->cells[c].range_id] = true;
            }
        }
        fprintf(f, "],\"s\":[");
        for (size_t j = 0; j < s->ns; j++) {
            fprintf(f, "%s[%zu,%.0f]", j ? "," : "", j + 1,
                    fr->server_demand[j]);
        }
        fprintf(f, "]}");
    }
    fprintf(f, "],\"ranges\":{");
    for (size_t id = 0; id < s->nbounds; id++) {
        if (!seen[id] || !s->bounds[id].low) {
            continue;
        }
        fprintf(f, "%s\"%zu\":{\"table_id\":%" PRIu64 ",\"low\":",
                first ? "" : ",", id, s->bounds[id].table_id);
        rs__jstr(f, s->bounds[id].low);
        fprintf(f, ",\"high\":");
        rs__jstr(f, s->bounds[id].high);
        fprintf(f, "}");
        first = false;
    }
    fprintf(f, "}},\"events\":[");
    first = true;
    for (size_t i = 0; i < s->ndecs; i++) {
        const struct rs_dec *d = &s->decs[i];
        uint64_t unix_ms = s->cfg.start_unix_ms + d->t_ms;
        rs__iso(unix_ms, iso, sizeof(iso));
        fprintf(f,
                "%s{\"seq\":%zu,\"unix_ms\":%" PRIu64
                ",\"time\":\"%s\",\"range\":%" PRIu64 ",\"table\":\"t%" PRIu64
                "\",\"table_id\":%" PRIu64 ",\"low\":",
                first ? "" : ",", i + 1, unix_ms, iso, d->range_id, d->table_id,
                d->table_id);
        rs__jstr(f, d->low ? d->low : "");
        fprintf(f, ",\"high\":");
        rs__jstr(f, d->high);
        fprintf(f,
                ",\"server\":%" PRIu64
                ",\"kind\":\"%s\",\"origin\":"
                "\"policy\"",
                d->from, ms_decision_kind_name(d->kind));
        if (d->kind == MS_DECIDE_MOVE || d->kind == MS_DECIDE_TRANSFER) {
            fprintf(f, ",\"to\":%" PRIu64, d->server_id);
        }
        if (d->key) {
            fprintf(f, ",\"key\":");
            rs__jstr(f, d->key);
        }
        if (d->kind == MS_DECIDE_SPLIT && d->ok) {
            fprintf(f, ",\"new_ranges\":[%" PRIu64 ",%" PRIu64 "]",
                    d->new_ids[0], d->new_ids[1]);
        }
        if (d->kind == MS_DECIDE_MERGE) {
            fprintf(f, ",\"range2\":%" PRIu64, d->range_id2);
            if (d->ok) {
                fprintf(f, ",\"new_range\":%" PRIu64, d->new_ids[0]);
            }
        }
        fprintf(f, ",\"reason\":");
        rs__jstr(f, d->reason);
        if (d->kind != MS_DECIDE_HOT && d->kind != MS_DECIDE_COOL) {
            fprintf(f, ",\"outcome\":\"%s\"", d->ok ? "ok" : "failed");
            if (!d->ok) {
                fprintf(f, ",\"error\":");
                rs__jstr(f, d->why);
            }
        }
        fprintf(f, "}");
        first = false;
    }
    fprintf(f, "]}\n");
    free(seen);
    return fclose(f) == 0 ? 0 : -1;
}
