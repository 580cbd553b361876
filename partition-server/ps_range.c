/* Ranges: owned set, ownership check, load counters. */
#include "ps_range.h"

#include <stdlib.h>
#include <string.h>

#include "rt_err.h"
#include "rt_log.h"

static char *ps__xstrdup(const char *s)
{
    char *d = strdup(s ? s : "");
    if (!d) {
        rt_log(RT_LOG_FATAL, "out of memory");
        abort();
    }
    return d;
}

static void ps__range_free(struct ps_range *r)
{
    if (!r) {
        return;
    }
    ps_range_load_reset(r);
    free(r->low);
    free(r->high);
    free(r);
}

void ps_ranges_init(struct ps_ranges *rs)
{
    rs->v = NULL;
    rs->n = 0;
    rs->map_version = 0;
    rs->rng = 0x9E3779B97F4A7C15ULL;
}

void ps_ranges_close(struct ps_ranges *rs)
{
    for (size_t i = 0; i < rs->n; i++) {
        ps__range_free(rs->v[i]);
    }
    free(rs->v);
    rs->v = NULL;
    rs->n = 0;
}


int ps_range_contains(const struct ps_range *r, const char *pk)
{
    /* strcmp compares as unsigned char: UTF-8 byte order = key order. */
    if (strcmp(pk, r->low) < 0) {
        return 0;
    }
    return r->high == NULL || strcmp(pk, r->high) < 0;
}

int ps_ranges_route(const struct ps_ranges *rs, uint64_t table_id,
                    uint64_t range_id, uint64_t epoch, const char *pk,
                    struct ps_range **out)
{
    struct ps_range *r = ps_ranges_find(rs, range_id);
    if (!r || r->epoch != epoch || r->table_id != table_id) {
        return RT_ESTALE;
    }
    if (pk && !ps_range_contains(r, pk)) {
        return RT_ESTALE;
    }
    *out = r;
    return 0;
}

static int ps__range_cmp(const void *a, const void *b)
{
    const struct ps_range *x = *(struct ps_range *const *)a;
    const struct ps_range *y = *(struct ps_range *const *)b;
    return x->id < y->id ? -1 : x->id > y->id;
}

static int ps__range_same(const struct ps_range *r, const Rt__Range *d)
{
    const char *high = d->high_inf ? NULL : (d->high ? d->high : "");
    if (r->table_id != d->table_id || r->epoch != d->epoch ||
        strcmp(r->low, d->low ? d->low : "") != 0) {
        return 0;
    }
    if (!r->high || !high) {
        return r->high == high;
    }
    return strcmp(r->high, high) == 0;
}

static size_t ps__ranges_index(const struct ps_ranges *rs, uint64_t id)
{
    size_t lo = 0, hi = rs->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (rs->v[mid]->id == id) {
            return mid;
        }
        if (rs->v[mid]->id < id) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    return (size_t)-1;
}

struct ps_range *ps_ranges_find(const struct ps_ranges *rs, uint64_t id)
{
    size_t at = ps__ranges_index(rs, id);
    return at == (size_t)-1 ? NULL : rs->v[at];
}

int ps_ranges_set(struct ps_ranges *rs, Rt__Range *const *v, size_t n)
{
    struct ps_range **nv = calloc(n ? n : 1, sizeof(*nv));
    unsigned char *kept = calloc(rs->n ? rs->n : 1, 1);
    size_t nn = 0;
    int changed = 0;

    if (!nv || !kept) {
        rt_log(RT_LOG_FATAL, "out of memory");
        abort();
    }
    for (size_t i = 0; i < n; i++) {
        const Rt__Range *d = v[i];
        size_t at = ps__ranges_index(rs, d->id);
        struct ps_range *r;

        if (at != (size_t)-1 && kept[at]) {
            continue; /* duplicate id: a master bug; the first entry wins */
        }
        if (at != (size_t)-1) {
            /* A range we already serve keeps its load counters. */
            r = rs->v[at];
            kept[at] = 1;
            if (!ps__range_same(r, d)) {
                changed = 1;
            }
            free(r->low);
            free(r->high);
        } else {
            int dup = 0;
            for (size_t j = 0; j < nn && !dup; j++) {
                dup = nv[j]->id == d->id;
            }
            if (dup) {
                continue;
            }
            changed = 1;
            r = calloc(1, sizeof(*r));
            if (!r) {
                rt_log(RT_LOG_FATAL, "out of memory");
                abort();
            }
            r->id = d->id;
        }
        r->table_id = d->table_id;
        r->epoch = d->epoch;
        r->low = ps__xstrdup(d->low);
        r->high = d->high_inf ? NULL : ps__xstrdup(d->high);
        nv[nn++] = r;
    }
    for (size_t j = 0; j < rs->n; j++) {
        if (!kept[j]) {
            changed = 1; /* no longer ours */
            ps__range_free(rs->v[j]);
        }
    }
    free(kept);
    free(rs->v);
    qsort(nv, nn, sizeof(*nv), ps__range_cmp);
    rs->v = nv;
    rs->n = nn;
    return changed;
}

void ps_ranges_pack(const struct ps_ranges *rs, struct rt_buf *out)
{
    Rt__Assignment a = RT__ASSIGNMENT__INIT;
    Rt__Range *items = calloc(rs->n ? rs->n : 1, sizeof(*items));
    Rt__Range **ptrs = calloc(rs->n ? rs->n : 1, sizeof(*ptrs));
    size_t len;

    if (!items || !ptrs) {
        rt_log(RT_LOG_FATAL, "out of memory");
        abort();
    }
    for (size_t i = 0; i < rs->n; i++) {
        const struct ps_range *r = rs->v[i];
        rt__range__init(&items[i]);
        items[i].id = r->id;
        items[i].table_id = r->table_id;
        items[i].epoch = r->epoch;
        items[i].low = r->low;
        items[i].high = r->high ? r->high : (char *)"";
        items[i].high_inf = r->high == NULL;
        ptrs[i] = &items[i];
    }
    a.n_ranges = rs->n;
    a.ranges = ptrs;
    a.map_version = rs->map_version;
    len = rt__assignment__get_packed_size(&a);
    rt__assignment__pack(&a, rt_buf_reserve(out, len));
    out->len += len;
    free(items);
    free(ptrs);
}

int ps_ranges_unpack(struct ps_ranges *rs, const uint8_t *blob, size_t n)
{
    Rt__Assignment *a = rt__assignment__unpack(NULL, n, blob);
    if (!a) {
        return RT_ECORRUPT;
    }
    ps_ranges_set(rs, a->ranges, a->n_ranges);
    rs->map_version = a->map_version;
    rt__assignment__free_unpacked(a, NULL);
    return 0;
}

static uint64_t ps__rand(struct ps_ranges *rs)
{
    /* xorshift64*: good enough for sampling. */
    uint64_t x = rs->rng;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    rs->rng = x;
    return x * 0x2545F4914F6CDD1DULL;
}

void ps_range_account(struct ps_ranges *rs, struct ps_range *r,
                      uint64_t entities, uint64_t bytes, uint64_t exec_us,
                      const char *pk)
{
    r->requests++;
    r->entities += entities;
    r->bytes_written += bytes;
    r->exec_us += exec_us;
    if (!pk) {
        return;
    }
    /* Reservoir sampling (Algorithm R): every request's PK has the same
     * chance to be in the sample the master splits by. */
    r->sample_seen++;
    if (r->n_sample < PS_SAMPLE_MAX) {
        r->sample[r->n_sample++] = ps__xstrdup(pk);
        return;
    }
    uint64_t j = ps__rand(rs) % r->sample_seen;
    if (j < PS_SAMPLE_MAX) {
        free(r->sample[j]);
        r->sample[j] = ps__xstrdup(pk);
    }
}

void ps_range_load_reset(struct ps_range *r)
{
    r->requests = 0;
    r->entities = 0;
    r->bytes_written = 0;
    r->exec_us = 0;
    for (unsigned i = 0; i < r->n_sample; i++) {
        free(r->sample[i]);
        r->sample[i] = NULL;
    }
    r->n_sample = 0;
    r->sample_seen = 0;
}
