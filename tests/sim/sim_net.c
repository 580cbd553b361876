/* sim_net: the simulated world of the simulators (see sim_net.h). Every
 * random draw goes through w->rng in the caller's order; nothing here
 * reads a real clock. */
#include "sim_net.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt_alloc.h"

void sim_net_init(struct sim_net *w,
                  uint64_t seed,
                  bool trace,
                  size_t trace_lines)
{
    memset(w, 0, sizeof(*w));
    rt_rng_seed(&w->rng, seed);
    w->trace = trace;
    if (trace) {
        w->trace_lines = trace_lines;
        w->trace_buf = rt_xcalloc(trace_lines, sizeof(*w->trace_buf));
    }
}

void sim_net_draw(struct sim_net *w,
                  double loss_max,
                  double dup_max,
                  uint64_t delay_max)
{
    w->loss = rt_rng_unit(&w->rng) * loss_max;
    w->dup = rt_rng_unit(&w->rng) * dup_max;
    w->delay_max = rt_rng_below(&w->rng, delay_max + 1);
}

void sim_net_close(struct sim_net *w, void (*free_item)(struct sim_item *))
{
    while (w->heap_n > 0) {
        free_item(sim_pop(w));
    }
    free(w->heap);
    free(w->trace_buf);
    w->heap = NULL;
    w->trace_buf = NULL;
}

/* Event queue */

static bool sim_before(const struct sim_item *a, const struct sim_item *b)
{
    return a->at < b->at || (a->at == b->at && a->seq < b->seq);
}

void sim_push(struct sim_net *w, struct sim_item *it)
{
    it->seq = w->seq++;
    if (w->heap_n == w->heap_cap) {
        w->heap_cap = w->heap_cap ? 2 * w->heap_cap : 256;
        w->heap = rt_xrealloc(w->heap, w->heap_cap * sizeof(*w->heap));
    }
    size_t i = w->heap_n++;
    while (i > 0 && sim_before(it, w->heap[(i - 1) / 2])) {
        w->heap[i] = w->heap[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    w->heap[i] = it;
}

struct sim_item *sim_pop(struct sim_net *w)
{
    struct sim_item *top = w->heap[0];
    struct sim_item *last = w->heap[--w->heap_n];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= w->heap_n) {
            break;
        }
        if (c + 1 < w->heap_n && sim_before(w->heap[c + 1], w->heap[c])) {
            c++;
        }
        if (!sim_before(w->heap[c], last)) {
            break;
        }
        w->heap[i] = w->heap[c];
        i = c;
    }
    if (w->heap_n > 0) {
        w->heap[i] = last;
    }
    return top;
}

struct sim_item *sim_next(struct sim_net *w, uint64_t until)
{
    if (w->heap_n == 0 || w->heap[0]->at > until) {
        return NULL;
    }
    struct sim_item *it = sim_pop(w);
    w->now = it->at;
    return it;
}

/* Network */

int sim_net_copies(struct sim_net *w, bool faulty)
{
    double loss = faulty ? w->loss : 0;
    double dup = faulty ? w->dup : 0;
    if (rt_rng_unit(&w->rng) < loss) {
        return 0;
    }
    if (rt_rng_unit(&w->rng) < dup) {
        return 2;
    }
    return 1;
}

uint64_t sim_net_delay(struct sim_net *w)
{
    uint64_t d = rt_rng_below(&w->rng, w->delay_max + 1);
    if (rt_rng_unit(&w->rng) < 0.05) {
        d *= 10; /* the heavy tail */
    }
    return d;
}

/* Clocks */

uint64_t sim_clock_local(const struct sim_net *w, double rate)
{
    return (uint64_t)((double)w->now * rate);
}

uint64_t sim_clock_real(const struct sim_net *w, double rate, uint64_t local)
{
    uint64_t t = (uint64_t)((double)local / rate) + 1;
    return t > w->now ? t : w->now;
}

/* Trace and verdict */

void sim_tracef(struct sim_net *w, const char *fmt, ...)
{
    if (!w->trace) {
        return;
    }
    va_list ap;
    va_start(ap, fmt);
    char *line = w->trace_buf[w->trace_n++ % w->trace_lines];
    int n = snprintf(line, SIM_TRACE_WIDTH, "%8" PRIu64 " ", w->now);
    vsnprintf(line + n, SIM_TRACE_WIDTH - (size_t)n, fmt, ap);
    va_end(ap);
}

void sim_fail(struct sim_net *w, const char *prop, const char *fmt, ...)
{
    if (w->violated != NULL) {
        return;
    }
    w->violated = prop;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(w->why, sizeof(w->why), fmt, ap);
    va_end(ap);
}

void sim_print_trace(const struct sim_net *w)
{
    if (!w->trace) {
        return;
    }
    size_t first =
        w->trace_n > w->trace_lines ? w->trace_n - w->trace_lines : 0;
    for (size_t i = first; i < w->trace_n; i++) {
        fprintf(stderr, "%s\n", w->trace_buf[i % w->trace_lines]);
    }
}

/* Utilities */

uint64_t sim_hash(const uint8_t *p, size_t n)
{
    uint64_t h = 0x12345;
    for (size_t i = 0; i < n; i++) {
        h = rt_mix64(h ^ p[i]);
    }
    return h;
}

uint64_t sim_env(const char *name, uint64_t dflt)
{
    const char *v = getenv(name);
    return v && *v ? strtoull(v, NULL, 10) : dflt;
}

int sim_args(int argc,
             char **argv,
             const char *prog,
             sim_mutation_cb mutation_of,
             void *ctx,
             const char **expect)
{
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--mutate") == 0) {
            if (mutation_of(argv[i + 1], ctx) != 0) {
                fprintf(stderr, "unknown mutation %s\n", argv[i + 1]);
                return -1;
            }
        } else if (strcmp(argv[i], "--expect") == 0) {
            *expect = argv[i + 1];
        } else {
            fprintf(stderr, "usage: %s [--mutate NAME --expect P]\n", prog);
            return -1;
        }
    }
    return 0;
}

int sim_drive(sim_run_cb run,
              void *ctx,
              const char *expect,
              uint64_t default_seeds,
              const char *replay_extra,
              uint64_t *seeds)
{
    if (getenv("SIM_SEED") != NULL) {
        uint64_t seed = sim_env("SIM_SEED", 1);
        const char *v = run(seed, true, ctx);
        printf("seed %" PRIu64 ": %s\n", seed, v ? v : "ok");
        return v ? 1 : 0;
    }
    *seeds = sim_env("SIM_SEEDS", default_seeds);
    for (uint64_t seed = 1; seed <= *seeds; seed++) {
        const char *v = run(seed, false, ctx);
        if (v != NULL && expect != NULL) {
            if (strcmp(v, expect) == 0) {
                printf("mutation caught: seed %" PRIu64 " violates %s\n", seed,
                       v);
                return 0;
            }
            fprintf(stderr, "mutation: expected %s, got %s\n", expect, v);
            return 1;
        }
        if (v != NULL) {
            fprintf(stderr, "replay: SIM_SEED=%" PRIu64 "%s\n", seed,
                    replay_extra);
            run(seed, true, ctx);
            return 1;
        }
    }
    if (expect != NULL) {
        fprintf(stderr, "mutation NOT caught in %" PRIu64 " seeds\n", *seeds);
        return 1;
    }
    return -1;
}
