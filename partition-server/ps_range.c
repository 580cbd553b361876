/* Ranges: owned set, ownership check, load counters. */
#include "ps_range.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "rt_alloc.h"
#include "rt_err.h"
#include "rt_log.h"
#include "rt_utf8.h"

static void ps__range_free(struct ps_range *r)
{
    if (!r) {
        return;
    }
    ps_range_load_reset(r, 0);
    free(r->pend);
    free(r->low);
    free(r->high);
    free(r->replicas);
    free(r->isr);
    free(r);
}

/* Copies @d's replica set into @r. */
static void ps__range_set_replicas(struct ps_range *r, const Rt__Range *d)
{
    free(r->replicas);
    free(r->isr);
    r->replicas = NULL;
    r->isr = NULL;
    r->primary_id = d->server_id;
    r->primary_epoch = d->primary_epoch;
    r->n_replicas = d->n_replicas;
    r->n_isr = d->n_isr;
    if (d->n_replicas > 0) {
        r->replicas = rt_xcalloc(d->n_replicas, sizeof(*r->replicas));
        for (size_t i = 0; i < d->n_replicas; i++) {
            rt__replica__init(&r->replicas[i]);
            r->replicas[i].server_id = d->replicas[i]->server_id;
            r->replicas[i].role = d->replicas[i]->role;
        }
    }
    if (d->n_isr > 0) {
        r->isr = rt_xmemdup(d->isr, d->n_isr * sizeof(*d->isr));
    }
}

void ps_ranges_init(struct ps_ranges *rs)
{
    rs->v = NULL;
    rs->n = 0;
    rs->map_version = 0;
    rs->rng = 0x9E3779B97F4A7C15ULL;
    rs->range_eps = 0;
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
    /* Key order is UTF-16 code-unit order (rt_utf16_cmpz), as in Azure. */
    if (rt_utf16_cmpz(pk, r->low) < 0) {
        return 0;
    }
    return r->high == NULL || rt_utf16_cmpz(pk, r->high) < 0;
}

int ps_ranges_route(const struct ps_ranges *rs,
                    uint64_t table_id,
                    uint64_t range_id,
                    uint64_t epoch,
                    const char *pk,
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

struct ps_range *ps_ranges_find_key(const struct ps_ranges *rs,
                                    uint64_t table_id,
                                    const char *pk)
{
    for (size_t i = 0; i < rs->n; i++) {
        if (rs->v[i]->table_id == table_id && ps_range_contains(rs->v[i], pk)) {
            return rs->v[i];
        }
    }
    return NULL;
}

int ps_ranges_overlap(const struct ps_ranges *rs,
                      uint64_t table_id,
                      const char *low,
                      const char *high,
                      uint64_t skip_id)
{
    for (size_t i = 0; i < rs->n; i++) {
        const struct ps_range *r = rs->v[i];
        if (r->table_id != table_id || r->id == skip_id) {
            continue;
        }
        /* [a, b) and [c, d) intersect iff a < d and c < b. */
        if ((!r->high || rt_utf16_cmpz(low, r->high) < 0) &&
            (!high || rt_utf16_cmpz(r->low, high) < 0)) {
            return 1;
        }
    }
    return 0;
}

static int ps__range_cmp(const void *a, const void *b)
{
    const struct ps_range *x = *(struct ps_range *const *)a;
    const struct ps_range *y = *(struct ps_range *const *)b;
    return x->id < y->id ? -1 : x->id > y->id;
}

const char *ps_range_pb_high(const Rt__Range *d)
{
    return d->high_inf ? NULL : (d->high ? d->high : "");
}

void ps_range_pb_set_high(Rt__Range *d, const char *high)
{
    d->high = high ? (char *)high : (char *)"";
    d->high_inf = high == NULL;
}

static int ps__range_bounds_same(const struct ps_range *r, const Rt__Range *d)
{
    const char *high = ps_range_pb_high(d);
    if (r->table_id != d->table_id || strcmp(r->low, d->low ? d->low : "")) {
        return 0;
    }
    if (!r->high || !high) {
        return r->high == high;
    }
    return strcmp(r->high, high) == 0;
}

static int ps__range_same(const struct ps_range *r, const Rt__Range *d)
{
    return r->epoch == d->epoch && ps__range_bounds_same(r, d);
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
    struct ps_range **nv = rt_xcalloc(n, sizeof(*nv));
    unsigned char *kept = rt_xcalloc(rs->n, 1);
    size_t nn = 0;
    int changed = 0;

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
            if (!ps__range_bounds_same(r, d)) {
                r->count_wanted = 1; /* totals are of other bounds */
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
            r = rt_xcalloc(1, sizeof(*r));
            r->id = d->id;
            r->count_wanted = 1;
            ps_tbucket_init(&r->tb, rs->range_eps, 0);
        }
        r->table_id = d->table_id;
        r->epoch = d->epoch;
        r->low = rt_xstrdup(d->low);
        r->high = ps_range_pb_high(d) ? rt_xstrdup(d->high) : NULL;
        ps__range_set_replicas(r, d);
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

int ps_ranges_remove(struct ps_ranges *rs, uint64_t id)
{
    size_t at = ps__ranges_index(rs, id);
    if (at == (size_t)-1) {
        return 0;
    }
    ps__range_free(rs->v[at]);
    memmove(&rs->v[at], &rs->v[at + 1], (rs->n - at - 1) * sizeof(*rs->v));
    rs->n--;
    return 1;
}

void ps_ranges_pack(const struct ps_ranges *rs, struct rt_buf *out)
{
    Rt__Assignment a = RT__ASSIGNMENT__INIT;
    Rt__Range *items = rt_xcalloc(rs->n, sizeof(*items));
    Rt__Range **ptrs = rt_xcalloc(rs->n, sizeof(*ptrs));
    Rt__Replica ***reps = rt_xcalloc(rs->n, sizeof(*reps));
    size_t len;

    for (size_t i = 0; i < rs->n; i++) {
        const struct ps_range *r = rs->v[i];
        rt__range__init(&items[i]);
        items[i].id = r->id;
        items[i].table_id = r->table_id;
        items[i].epoch = r->epoch;
        items[i].low = r->low;
        ps_range_pb_set_high(&items[i], r->high);
        items[i].server_id = r->primary_id;
        items[i].primary_epoch = r->primary_epoch;
        if (r->n_replicas > 0) {
            reps[i] = rt_xcalloc(r->n_replicas, sizeof(*reps[i]));
            for (size_t k = 0; k < r->n_replicas; k++) {
                reps[i][k] = &r->replicas[k];
            }
            items[i].replicas = reps[i];
            items[i].n_replicas = r->n_replicas;
        }
        items[i].isr = r->isr;
        items[i].n_isr = r->n_isr;
        ptrs[i] = &items[i];
    }
    a.n_ranges = rs->n;
    a.ranges = ptrs;
    a.map_version = rs->map_version;
    len = rt__assignment__get_packed_size(&a);
    rt__assignment__pack(&a, rt_buf_reserve(out, len));
    out->len += len;
    for (size_t i = 0; i < rs->n; i++) {
        free(reps[i]);
    }
    free(reps);
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

/* Uniform in (0, 1). */
static double ps__uniform(struct ps_ranges *rs)
{
    return ((double)(ps__rand(rs) >> 11) + 0.5) / 9007199254740992.0;
}

void ps_range_account(struct ps_ranges *rs,
                      struct ps_range *r,
                      uint64_t entities,
                      uint64_t bytes,
                      uint64_t exec_us,
                      const char *pk)
{
    double key;
    unsigned min = 0;

    r->requests++;
    r->entities += entities;
    r->bytes_written += bytes;
    r->exec_us += exec_us;
    r->tot_requests++;
    r->tot_entities += entities;
    r->tot_bytes += bytes;
    if (!pk) {
        return;
    }
    /* Weighted reservoir (A-Res): keep the PS_SAMPLE_MAX largest keys
     * u^(1/w), here as log(u)/w. With w = entities, a request that moved
     * 100 entities counts like 100 single-entity requests, so the
     * load-median split key the master picks from the sample follows the
     * load, not only the request count. */
    key = log(ps__uniform(rs)) / (double)(entities ? entities : 1);
    if (r->n_sample < PS_SAMPLE_MAX) {
        r->sample[r->n_sample] = rt_xstrdup(pk);
        r->sample_key[r->n_sample++] = key;
        return;
    }
    for (unsigned i = 1; i < r->n_sample; i++) {
        if (r->sample_key[i] < r->sample_key[min]) {
            min = i;
        }
    }
    if (key > r->sample_key[min]) {
        free(r->sample[min]);
        r->sample[min] = rt_xstrdup(pk);
        r->sample_key[min] = key;
    }
}

void ps_range_throttled(struct ps_range *r)
{
    r->throttled++;
    r->tot_throttled++;
}

void ps_range_load_reset(struct ps_range *r, uint64_t now_ms)
{
    r->load_since_ms = now_ms;
    r->requests = 0;
    r->throttled = 0;
    r->entities = 0;
    r->scanned = 0;
    r->bytes_written = 0;
    r->exec_us = 0;
    for (unsigned i = 0; i < r->n_sample; i++) {
        free(r->sample[i]);
        r->sample[i] = NULL;
    }
    r->n_sample = 0;
}

/* Totals */

static uint64_t ps__add_signed(uint64_t v, int64_t d)
{
    if (d < 0 && (uint64_t)(-d) > v) {
        return 0; /* never below zero, even if a delta was missed */
    }
    return v + (uint64_t)d;
}

uint64_t ps_range_count_start(struct ps_range *r)
{
    r->count_wanted = 0;
    r->count_state = PS_COUNT_RUNNING;
    r->n_pend = 0;
    return ++r->count_gen;
}

int ps_range_count_done(struct ps_range *r,
                        uint64_t gen,
                        uint64_t count,
                        uint64_t bytes,
                        uint64_t txn)
{
    if (gen != r->count_gen || r->count_state != PS_COUNT_RUNNING) {
        return 0;
    }
    /* Writes that completed while the scan ran: those committed after its
     * snapshot are not in @count yet. */
    for (size_t i = 0; i < r->n_pend; i++) {
        if (r->pend[i].txn_id > txn) {
            count = ps__add_signed(count, r->pend[i].count);
            bytes = ps__add_signed(bytes, r->pend[i].bytes);
        }
    }
    r->n_pend = 0;
    r->key_count = count;
    r->key_bytes = bytes;
    r->count_txn = txn;
    r->count_state = PS_COUNT_VALID;
    return 1;
}

void ps_range_count_write(struct ps_range *r,
                          uint64_t txn_id,
                          int64_t dcount,
                          int64_t dbytes)
{
    if (txn_id == 0 || (dcount == 0 && dbytes == 0)) {
        return;
    }
    switch (r->count_state) {
        case PS_COUNT_VALID:
            if (txn_id > r->count_txn) {
                r->key_count = ps__add_signed(r->key_count, dcount);
                r->key_bytes = ps__add_signed(r->key_bytes, dbytes);
            }
            break;
        case PS_COUNT_RUNNING:
            /* Callbacks arrive in commit order: merge with the last entry of
             * the same transaction (a group commit has many writes). */
            if (r->n_pend > 0 && r->pend[r->n_pend - 1].txn_id == txn_id) {
                r->pend[r->n_pend - 1].count += dcount;
                r->pend[r->n_pend - 1].bytes += dbytes;
                break;
            }
            if (r->n_pend == r->cap_pend) {
                size_t ncap = r->cap_pend ? 2 * r->cap_pend : 64;
                r->pend = rt_xrealloc(r->pend, ncap * sizeof(*r->pend));
                r->cap_pend = ncap;
            }
            r->pend[r->n_pend].txn_id = txn_id;
            r->pend[r->n_pend].count = dcount;
            r->pend[r->n_pend].bytes = dbytes;
            r->n_pend++;
            break;
        default:
            break; /* no count yet: the coming scan will see it */
    }
}

/* Throttling */

void ps_tbucket_init(struct ps_tbucket *b, uint64_t rate, uint64_t now_ms)
{
    b->rate = rate;
    b->mtokens = (int64_t)(rate * PS_TBUCKET_BURST_MS); /* start full */
    b->last_ms = now_ms;
}

int ps_tbucket_admit(struct ps_tbucket *b, uint64_t now_ms)
{
    int64_t cap;

    if (b->rate == 0) {
        return 1;
    }
    /* rate entities/s = rate milli-tokens per ms. */
    cap = (int64_t)(b->rate * PS_TBUCKET_BURST_MS);
    if (cap < 1000) {
        cap = 1000; /* at least one entity can always be banked */
    }
    if (now_ms > b->last_ms) {
        uint64_t add = (now_ms - b->last_ms) * b->rate;
        b->mtokens = add > (uint64_t)(cap - b->mtokens)
                         ? cap
                         : b->mtokens + (int64_t)add;
        b->last_ms = now_ms;
    }
    return b->mtokens > 0;
}

void ps_tbucket_charge(struct ps_tbucket *b, uint64_t entities)
{
    if (b->rate == 0) {
        return;
    }
    b->mtokens -= (int64_t)(entities * 1000);
}
