/* Metrics: shared histogram layout and the Prometheus text writer (the
 * contract is in rt_metrics.h). */
#include "rt_metrics.h"

#include <inttypes.h>

const uint64_t rt_hist_le_us[RT_HIST_NB] = {
    50,    100,    250,    500,    1000,    2500,    5000,    10000,   25000,
    50000, 100000, 250000, 500000, 1000000, 2500000, 5000000, 10000000};

unsigned rt_hist_bucket(uint64_t us)
{
    /* Binary search: at most five comparisons on the request path. */
    unsigned lo = 0, hi = RT_HIST_NB;
    while (lo < hi) {
        unsigned mid = (lo + hi) / 2;
        if (us <= rt_hist_le_us[mid]) {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    return lo;
}

void rt_hist_add_to(const struct rt_hist *h, struct rt_hist_sum *s)
{
    for (unsigned i = 0; i <= RT_HIST_NB; i++) {
        uint64_t v = rt_ctr_get(&h->b[i]);
        s->b[i] += v;
        s->count += v;
    }
    s->sum_us += rt_ctr_get(&h->sum_us);
}

void rt_metrics_help(struct rt_buf *b,
                     const char *name,
                     const char *type,
                     const char *help)
{
    rt_buf_printf(b, "# HELP %s ", name);
    for (const char *p = help; *p; p++) {
        if (*p == '\\') {
            rt_buf_append(b, "\\\\", 2);
        } else if (*p == '\n') {
            rt_buf_append(b, "\\n", 2);
        } else {
            rt_buf_append_u8(b, (uint8_t)*p);
        }
    }
    rt_buf_printf(b, "\n# TYPE %s %s\n", name, type);
}

void rt_metrics_label(struct rt_buf *b, const char *v)
{
    for (const char *p = v; *p; p++) {
        if (*p == '\\') {
            rt_buf_append(b, "\\\\", 2);
        } else if (*p == '"') {
            rt_buf_append(b, "\\\"", 2);
        } else if (*p == '\n') {
            rt_buf_append(b, "\\n", 2);
        } else {
            rt_buf_append_u8(b, (uint8_t)*p);
        }
    }
}

/* One `_bucket` line; with @inf, the +Inf one. */
static void rt__bucket(struct rt_buf *b,
                       const char *name,
                       const char *labels,
                       double le,
                       int inf,
                       uint64_t cum)
{
    const char *sep = labels && *labels ? "," : "";
    if (inf) {
        rt_buf_printf(b, "%s_bucket{%s%sle=\"+Inf\"} %" PRIu64 "\n", name,
                      labels ? labels : "", sep, cum);
    } else {
        rt_buf_printf(b, "%s_bucket{%s%sle=\"%g\"} %" PRIu64 "\n", name,
                      labels ? labels : "", sep, le, cum);
    }
}

/* `_sum` and `_count`, with or without labels. */
static void rt__sum_count(struct rt_buf *b,
                          const char *name,
                          const char *labels,
                          double sum,
                          uint64_t count)
{
    if (labels && *labels) {
        rt_buf_printf(b, "%s_sum{%s} %.9g\n%s_count{%s} %" PRIu64 "\n", name,
                      labels, sum, name, labels, count);
    } else {
        rt_buf_printf(b, "%s_sum %.9g\n%s_count %" PRIu64 "\n", name, sum, name,
                      count);
    }
}

void rt_metrics_hist(struct rt_buf *b,
                     const char *name,
                     const char *labels,
                     const struct rt_hist_sum *s)
{
    uint64_t cum = 0;
    for (unsigned i = 0; i < RT_HIST_NB; i++) {
        cum += s->b[i];
        rt__bucket(b, name, labels, (double)rt_hist_le_us[i] / 1e6, 0, cum);
    }
    cum += s->b[RT_HIST_NB];
    rt__bucket(b, name, labels, 0, 1, cum);
    /* _count is the +Inf bucket by definition, even if a writer moved
     * between reading the buckets and the count. */
    rt__sum_count(b, name, labels, (double)s->sum_us / 1e6, cum);
}

void rt_metrics_hist_le(struct rt_buf *b,
                        const char *name,
                        const char *labels,
                        const double *le,
                        size_t n,
                        const uint64_t *counts,
                        double sum)
{
    uint64_t cum = 0;
    for (size_t i = 0; i < n; i++) {
        cum += counts[i];
        rt__bucket(b, name, labels, le[i], 0, cum);
    }
    cum += counts[n];
    rt__bucket(b, name, labels, 0, 1, cum);
    rt__sum_count(b, name, labels, sum, cum);
}
