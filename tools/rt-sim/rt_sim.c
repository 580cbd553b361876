/* rt-sim: the offline load-balancing simulator (tools/rt-sim/README.md).
 *
 *   rt-sim run --policy P --workload W [options] --out DIR
 *   rt-sim compare --policies P1,P2[,...] --workload W [options] --out DIR
 *
 * run writes DIR/decisions.jsonl, DIR/metrics.csv and DIR/keyviz.json and
 * prints a summary with the simulator's speed; compare runs each policy
 * on the same workload and seed (DIR/<policy>/...), prints the table side
 * by side, writes DIR/compare.csv and plots with gnuplot when it is
 * installed. Exit 0, 2 on a usage error, 1 when a file cannot be written.
 *
 * The wall clock is read only to print the speed, never by the
 * simulation. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ms_util.h"
#include "rs_report.h"
#include "rs_sim.h"
#include "rs_trace.h"
#include "rs_work.h"

struct rs_args
{
    struct rs_cfg cfg;
    char workload[32];
    char policies[256];
    const char *out;
    const char *trace_path;
    struct rs_trace *trace; /* loaded once for every policy */
    bool policy_given;
    double duration_s;
    double load; /* demand as a share of the cluster's capacity */
    double rate; /* entities/s (overrides load) */
    size_t frames_max, cells;
    bool quiet;
};

static void rs__usage(FILE *f)
{
    fprintf(f,
            "usage: rt-sim run --policy P (--workload W | --trace FILE) "
            "[options] --out DIR\n"
            "       rt-sim compare --policies P1,P2[,...] (--workload W | "
            "--trace FILE) [options] --out DIR\n"
            "       rt-sim validate TRACE\n"
            "(rtctl trace dump TRACE prints a trace)\n"
            "workloads: uniform zipfian hotset tail diurnal flash\n"
            "options: --servers N (10) --ranges M (100) --tables T "
            "(ranges/16)\n"
            "         --keys K (1000000) --duration S (600) --seed N (1)\n"
            "         --capacity EPS per server (2500) --range-cap EPS (0)\n"
            "         --load F demand / capacity (0.6) | --rate EPS\n"
            "         --rf N (1) --zones N (0) --tick-ms MS (500)\n"
            "         --split-eps N --split-max-ranges N --max-moves N\n"
            "         --policy-opt K=V[,K=V] (a policy's own parameters)\n"
            "         --move-mb-s N --frames N (300) --cells N (2000) "
            "--quiet\n");
}

static int rs__num(const char *name, const char *v, double *out)
{
    char *end;
    errno = 0;
    *out = v ? strtod(v, &end) : 0;
    if (!v || errno || *end || *out < 0) {
        fprintf(stderr, "rt-sim: %s: a number >= 0 expected\n", name);
        return -1;
    }
    return 0;
}

static int rs__parse(int argc, char **argv, struct rs_args *a)
{
    memset(a, 0, sizeof(*a));
    rs_cfg_default(&a->cfg);
    snprintf(a->workload, sizeof(a->workload), "zipfian");
    a->duration_s = 600;
    a->load = 0.6;
    a->frames_max = 300;
    a->cells = 2000;
    for (int i = 2; i < argc; i++) {
        const char *k = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        double x = 0;
        if (strcmp(k, "--quiet") == 0) {
            a->quiet = true;
            continue;
        }
        if (!v) {
            fprintf(stderr, "rt-sim: %s needs a value\n", k);
            return -1;
        }
        i++;
        if (strcmp(k, "--policy") == 0) {
            snprintf(a->cfg.policy, sizeof(a->cfg.policy), "%s", v);
            a->policy_given = true;
        } else if (strcmp(k, "--trace") == 0) {
            a->trace_path = v;
        } else if (strcmp(k, "--policy-opt") == 0) {
            a->cfg.pcfg.opts = v; /* argv: lives as long as the program */
        } else if (strcmp(k, "--policies") == 0) {
            snprintf(a->policies, sizeof(a->policies), "%s", v);
        } else if (strcmp(k, "--workload") == 0) {
            snprintf(a->workload, sizeof(a->workload), "%s", v);
        } else if (strcmp(k, "--out") == 0) {
            a->out = v;
        } else {
            if (rs__num(k, v, &x) != 0) {
                return -1;
            }
            if (strcmp(k, "--servers") == 0) {
                a->cfg.servers = (size_t)x;
            } else if (strcmp(k, "--ranges") == 0) {
                a->cfg.ranges = (size_t)x;
            } else if (strcmp(k, "--tables") == 0) {
                a->cfg.tables = (size_t)x;
            } else if (strcmp(k, "--keys") == 0) {
                a->cfg.keys = (uint64_t)x;
            } else if (strcmp(k, "--duration") == 0) {
                a->duration_s = x;
            } else if (strcmp(k, "--seed") == 0) {
                a->cfg.seed = (uint64_t)x;
            } else if (strcmp(k, "--capacity") == 0) {
                a->cfg.server_eps = x;
            } else if (strcmp(k, "--range-cap") == 0) {
                a->cfg.range_eps = x;
            } else if (strcmp(k, "--load") == 0) {
                a->load = x;
            } else if (strcmp(k, "--rate") == 0) {
                a->rate = x;
            } else if (strcmp(k, "--rf") == 0) {
                a->cfg.rf = (uint32_t)x;
            } else if (strcmp(k, "--zones") == 0) {
                a->cfg.zones = (size_t)x;
            } else if (strcmp(k, "--tick-ms") == 0) {
                a->cfg.tick_ms = (uint32_t)x;
            } else if (strcmp(k, "--split-eps") == 0) {
                a->cfg.pcfg.split_eps = x;
            } else if (strcmp(k, "--split-max-ranges") == 0) {
                a->cfg.pcfg.split_max_ranges = (unsigned)x;
            } else if (strcmp(k, "--max-moves") == 0) {
                a->cfg.pcfg.max_moves = (unsigned)x;
            } else if (strcmp(k, "--move-mb-s") == 0 && x > 0) {
                a->cfg.cost.move_mb_s = x;
            } else if (strcmp(k, "--frames") == 0) {
                a->frames_max = (size_t)x;
            } else if (strcmp(k, "--cells") == 0) {
                a->cells = (size_t)x;
            } else {
                fprintf(stderr, "rt-sim: unknown option %s\n", k);
                return -1;
            }
        }
    }
    if (a->duration_s < 1) {
        fprintf(stderr, "rt-sim: --duration must be >= 1 s\n");
        return -1;
    }
    return 0;
}

static double rs__wall(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

struct rs_result
{
    struct rs_summary sum;
    double wall_s, cpu_s, sim_s;
    uint64_t range_ticks;
    size_t servers;
};

/* One simulation of @policy into @dir. 0, 1 (files), 2 (usage). */
static int rs__run_one(const struct rs_args *a,
                       const char *policy,
                       const char *dir,
                       struct rs_result *res)
{
    struct rs_cfg cfg = a->cfg;
    struct rs_work_cfg wcfg;
    struct rs_sim *s;
    char path[4096], err[256];
    double rate, t0;
    clock_t c0;
    uint32_t every;
    FILE *declog;
    int rc = 0;

    if (a->trace) {
        /* A replay: the cluster, tick, clock and thresholds of the trace
         * (the operator's settings, the same for every policy compared),
         * under @policy. */
        rs_trace_cfg(a->trace, &cfg, true);
        snprintf(cfg.policy, sizeof(cfg.policy), "%s", policy);
    } else {
        snprintf(cfg.policy, sizeof(cfg.policy), "%s", policy);
        rate = a->rate > 0 ? a->rate
                           : a->load * cfg.server_eps * (double)cfg.servers;
        if (rs_work_named(a->workload, cfg.keys, rate, a->duration_s, cfg.seed,
                          &wcfg) != 0) {
            fprintf(stderr, "rt-sim: unknown workload '%s'\n", a->workload);
            return 2;
        }
    }
    if (ms_mkdir_p(dir) != 0) {
        fprintf(stderr, "rt-sim: %s: %s\n", dir, strerror(errno));
        return 1;
    }
    snprintf(path, sizeof(path), "%s/decisions.jsonl", dir);
    declog = fopen(path, "w");
    if (!declog) {
        fprintf(stderr, "rt-sim: %s: %s\n", path, strerror(errno));
        return 1;
    }
    s = a->trace ? rs_replay_create(&cfg, a->trace, declog, err, sizeof(err))
                 : rs_sim_create(&cfg, &wcfg, declog, err, sizeof(err));
    if (!s) {
        fprintf(stderr, "rt-sim: %s\n", err);
        fclose(declog);
        return 2;
    }
    every = (uint32_t)((a->duration_s + (double)a->frames_max - 1) /
                       (double)(a->frames_max ? a->frames_max : 1));
    rs_sim_frames(s, every ? every : 1, a->cells);
    t0 = rs__wall();
    c0 = clock();
    if (a->trace) {
        rs_replay_run(s, a->trace);
    } else {
        rs_sim_run_until(s, (uint64_t)(a->duration_s * 1000));
    }
    res->wall_s = rs__wall() - t0;
    res->cpu_s = (double)(clock() - c0) / CLOCKS_PER_SEC;
    res->sim_s = (double)s->now_ms / 1000.0;
    res->range_ticks = s->range_ticks;
    res->servers = s->ns;
    rs_summarize(s, &res->sum);
    if (fclose(declog) != 0) {
        rc = 1;
    }
    snprintf(path, sizeof(path), "%s/metrics.csv", dir);
    if (rs_write_metrics(s, path) != 0) {
        fprintf(stderr, "rt-sim: %s: %s\n", path, strerror(errno));
        rc = 1;
    }
    snprintf(path, sizeof(path), "%s/keyviz.json", dir);
    if (rs_write_keyviz(s, path) != 0) {
        fprintf(stderr, "rt-sim: %s: %s\n", path, strerror(errno));
        rc = 1;
    }
    rs_sim_destroy(s);
    return rc;
}

static void rs__print_speed(const char *policy, const struct rs_result *r)
{
    double w = r->wall_s > 1e-6 ? r->wall_s : 1e-6;
    double c = r->cpu_s > 1e-6 ? r->cpu_s : 1e-6;
    printf(
        "%s: %.0f simulated s in %.2f wall s (%.2f CPU s): %.1f "
        "simulated s per wall s (%.1f per CPU s), %.3g range-ticks per "
        "wall s (%zu servers, %zu ranges at the end)\n",
        policy, r->sim_s, r->wall_s, r->cpu_s, r->sim_s / w, r->sim_s / c,
        (double)r->range_ticks / w, r->servers, r->sum.ranges_end);
}

static void rs__print_summary(const struct rs_result *r)
{
    const struct rs_summary *x = &r->sum;
    printf(
        "served %.1f%% of the demand, 503 %.2f%%, busiest/mean p50 %.2f "
        "p99 %.2f\n"
        "splits %" PRIu64 " merges %" PRIu64 " moves %" PRIu64
        " transfers %" PRIu64 ", %.1f MB moved, %" PRIu64
        " decisions refused, thrash %" PRIu64
        "\n"
        "load steps %zu, recovered %zu (mean %.1f s, max %.1f s)\n",
        100 * x->served_pct, 100 * x->refused_pct, x->bm_p50, x->bm_p99,
        x->splits, x->merges, x->moves, x->transfers,
        (double)x->bytes_moved / 1e6, x->refused_decisions, x->thrash, x->steps,
        x->recovered, x->recover_mean_s, x->recover_max_s);
}

static int rs__cmd_run(const struct rs_args *a)
{
    struct rs_result r;
    /* A replay without --policy: the recorded one. */
    const char *policy =
        a->trace && !a->policy_given && a->trace->hdr->policy[0]
            ? a->trace->hdr->policy
            : a->cfg.policy;
    int rc = rs__run_one(a, policy, a->out, &r);
    if (rc) {
        return rc;
    }
    if (!a->quiet) {
        rs__print_summary(&r);
    }
    rs__print_speed(policy, &r);
    return 0;
}

#define RS__MAXPOL 8

static void rs__plot(const struct rs_args *a, char pols[][32], size_t np)
{
    char gp[4096], cmd[8192];
    FILE *f;
    snprintf(gp, sizeof(gp), "%s/compare.gp", a->out);
    f = fopen(gp, "w");
    if (!f) {
        return;
    }
    fprintf(f,
            "# rt-sim compare plot (gnuplot; terminal set by the caller)\n"
            "set datafile separator ','\nset key outside top center "
            "horizontal\nset grid\nset xlabel 'simulated s'\n"
            "set multiplot layout 3,1 title 'rt-sim %s'\n"
            "set offsets 0, 0, graph 0.05, 0\n"
            "set ylabel 'served entities/s'\nplot ",
            a->workload);
    /* Demand is the same for every policy (one workload, one seed): one
     * dashed line for it, so served vs demanded reads off one panel. */
    if (np) {
        fprintf(f,
                "'%s/metrics.csv' using 1:2 skip 1 with lines dt 2 lc "
                "'black' title 'demanded', ",
                pols[0]);
    }
    for (size_t p = 0; p < np; p++) {
        fprintf(
            f,
            "%s'%s/metrics.csv' using 1:3 skip 1 with lines lt %zu title '%s'",
            p ? ", " : "", pols[p], p + 1, pols[p]);
    }
    fprintf(f, "\nset ylabel '503 %%'\nplot ");
    for (size_t p = 0; p < np; p++) {
        fprintf(
            f,
            "%s'%s/metrics.csv' using 1:5 skip 1 with lines lt %zu title '%s'",
            p ? ", " : "", pols[p], p + 1, pols[p]);
    }
    fprintf(f, "\nset ylabel 'busiest / mean'\nplot ");
    for (size_t p = 0; p < np; p++) {
        fprintf(
            f,
            "%s'%s/metrics.csv' using 1:8 skip 1 with lines lt %zu title '%s'",
            p ? ", " : "", pols[p], p + 1, pols[p]);
    }
    fprintf(f, "\nunset multiplot\n");
    fclose(f);
    if (system("command -v gnuplot >/dev/null 2>&1") != 0) {
        printf(
            "gnuplot not found (apt-get install gnuplot-nox): no plots; "
            "script left in %s\n",
            gp);
        return;
    }
    snprintf(cmd, sizeof(cmd),
             "cd '%s' && gnuplot -e \"set terminal svg size 1100,900 "
             "dynamic; set output 'compare.svg'\" compare.gp",
             a->out);
    if (system(cmd) != 0) {
        fprintf(stderr, "rt-sim: gnuplot failed (%s)\n", gp);
    } else {
        printf("plot: %s/compare.svg\n", a->out);
    }
}

static int rs__cmd_compare(const struct rs_args *a)
{
    char pols[RS__MAXPOL][32], dir[4096], path[4096];
    struct rs_result res[RS__MAXPOL];
    size_t np = 0;
    const char *p = a->policies[0] ? a->policies : "default,none";
    FILE *csv;

    while (*p && np < RS__MAXPOL) {
        size_t n = strcspn(p, ",");
        snprintf(pols[np], sizeof(pols[np]), "%.*s", (int)n, p);
        if (pols[np][0]) {
            np++;
        }
        p += n + (p[n] == ',');
    }
    for (size_t i = 0; i < np; i++) {
        int rc;
        snprintf(dir, sizeof(dir), "%s/%s", a->out, pols[i]);
        rc = rs__run_one(a, pols[i], dir, &res[i]);
        if (rc) {
            return rc;
        }
        rs__print_speed(pols[i], &res[i]);
    }
    printf("\n%-28s %s\n", a->trace ? "trace" : "workload",
           a->trace ? a->trace_path : a->workload);
    printf("%-28s", "policy");
    for (size_t i = 0; i < np; i++) {
        printf(" %14s", pols[i]);
    }
    printf("\n");
#define ROW(label, fmt, expr)                         \
    do {                                              \
        printf("%-28s", label);                       \
        for (size_t i = 0; i < np; i++) {             \
            const struct rs_summary *x = &res[i].sum; \
            (void)x;                                  \
            printf(" %14" fmt, expr);                 \
        }                                             \
        printf("\n");                                 \
    } while (0)
    ROW("demanded (M entities)", ".2f", x->demanded / 1e6);
    ROW("served / demanded %", ".2f", 100 * x->served_pct);
    ROW("503 rate %", ".3f", 100 * x->refused_pct);
    ROW("busiest/mean p50", ".2f", x->bm_p50);
    ROW("busiest/mean p99", ".2f", x->bm_p99);
    ROW("splits", PRIu64, x->splits);
    ROW("merges", PRIu64, x->merges);
    ROW("moves", PRIu64, x->moves);
    ROW("transfers", PRIu64, x->transfers);
    ROW("MB moved", ".1f", (double)x->bytes_moved / 1e6);
    ROW("load steps", "zu", x->steps);
    ROW("recovered", "zu", x->recovered);
    ROW("recovery mean s", ".1f", x->recover_mean_s);
    ROW("recovery max s", ".1f", x->recover_max_s);
    ROW("thrash (undone < 10 min)", PRIu64, x->thrash);
    ROW("ranges at the end", "zu", x->ranges_end);
#undef ROW
    snprintf(path, sizeof(path), "%s/compare.csv", a->out);
    csv = fopen(path, "w");
    if (!csv) {
        fprintf(stderr, "rt-sim: %s: %s\n", path, strerror(errno));
        return 1;
    }
    fprintf(csv,
            "policy,workload,demanded,served_pct,refused_pct,bm_p50,bm_p99,"
            "splits,merges,moves,transfers,bytes_moved,steps,recovered,"
            "recover_mean_s,recover_max_s,thrash,ranges_end,wall_s\n");
    for (size_t i = 0; i < np; i++) {
        const struct rs_summary *x = &res[i].sum;
        fprintf(csv,
                "%s,%s,%.0f,%.4f,%.4f,%.3f,%.3f,%" PRIu64 ",%" PRIu64
                ",%" PRIu64 ",%" PRIu64 ",%" PRIu64
                ",%zu,%zu,%.2f,%.2f,%" PRIu64 ",%zu,%.3f\n",
                pols[i], a->workload, x->demanded, 100 * x->served_pct,
                100 * x->refused_pct, x->bm_p50, x->bm_p99, x->splits,
                x->merges, x->moves, x->transfers, x->bytes_moved, x->steps,
                x->recovered, x->recover_mean_s, x->recover_max_s, x->thrash,
                x->ranges_end, res[i].wall_s);
    }
    if (fclose(csv) != 0) {
        return 1;
    }
    rs__plot(a, pols, np);
    return 0;
}

static int rs__cmd_validate(struct rs_args *a)
{
    struct rs_cfg cfg = a->cfg;
    const struct rs_trace *t = a->trace;
    char err[256];
    struct rs_sim *s;
    size_t missing;
    rs_trace_cfg(t, &cfg, true);
    printf(
        "replaying %zu records (%.1f s%s) under the recorded policy "
        "\"%s\"\n",
        t->n, t->n ? (double)t->t[t->n - 1] / 1e3 : 0.0,
        t->truncated ? ", cut short" : "", cfg.policy);
    s = rs_replay_create(&cfg, t, NULL, err, sizeof(err));
    if (!s) {
        fprintf(stderr, "rt-sim: %s\n", err);
        return 2;
    }
    rs_replay_run(s, t);
    missing = rs_validate(s, t, stdout);
    rs_sim_destroy(s);
    return missing ? 3 : 0;
}

static int rs__main_cmd(int argc, char **argv)
{
    struct rs_args a;
    char err[512];
    int rc;
    if (rs__parse(argc, argv, &a) != 0) {
        rs__usage(stderr);
        return 2;
    }
    if (a.trace_path &&
        rs_trace_load(a.trace_path, &a.trace, err, sizeof(err)) != 0) {
        fprintf(stderr, "rt-sim: %s\n", err);
        return 1;
    }
    if (strcmp(argv[1], "validate") == 0) {
        rc = a.trace ? rs__cmd_validate(&a) : 2;
    } else if (!a.out) {
        fprintf(stderr, "rt-sim: --out DIR is required\n");
        rc = 2;
    } else if (strcmp(argv[1], "run") == 0) {
        rc = rs__cmd_run(&a);
    } else {
        rc = rs__cmd_compare(&a);
    }
    rs_trace_free(a.trace);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc < 2 || strcmp(argv[1], "-h") == 0 ||
        strcmp(argv[1], "--help") == 0) {
        rs__usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    if (strcmp(argv[1], "validate") == 0) {
        /* rt-sim validate TRACE [options] */
        char *v[64];
        int n = 0;
        if (argc < 3 || argc > 60) {
            rs__usage(stderr);
            return 2;
        }
        v[n++] = argv[0];
        v[n++] = argv[1];
        v[n++] = "--trace";
        for (int i = 2; i < argc; i++) {
            v[n++] = argv[i];
        }
        v[n] = NULL;
        return rs__main_cmd(n, v);
    }
    if (strcmp(argv[1], "run") != 0 && strcmp(argv[1], "compare") != 0) {
        fprintf(stderr, "rt-sim: unknown command '%s'\n", argv[1]);
        rs__usage(stderr);
        return 2;
    }
    return rs__main_cmd(argc, argv);
}
