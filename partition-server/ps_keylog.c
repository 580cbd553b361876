/* Key log (ps_keylog.h). Each entry is one allocation: the header, then
 * an index of (offset, length) per key, then the key bytes. Entries sit on
 * two lists: their range's (oldest first, singly linked: entries only
 * leave from the front) and the log's global append order (doubly linked:
 * truncation skips entries above cw and unlinks later ones). Ranges are a
 * sorted array of pointers (binary search by id). */
#include "ps_keylog.h"

#include <stdlib.h>
#include <string.h>

#include "rt_alloc.h"
#include "rt_err.h"

struct ps_kl_range;

struct ps_kl_slot
{
    size_t off; /* from the start of the entry's key bytes */
    size_t len;
};

struct ps_kl_entry
{
    struct ps_kl_entry *g_prev, *g_next; /* global append order */
    struct ps_kl_entry *r_next;          /* the range's, oldest first */
    struct ps_kl_range *range;
    uint64_t lsn, epoch, txn_id;
    size_t bytes; /* the whole allocation */
    size_t n;
    struct ps_kl_slot slot[]; /* then the key bytes */
};

struct ps_kl_range
{
    uint64_t range_id;
    uint64_t base, last, cw;
    struct ps_kl_entry *head, *tail;
    size_t n_entries;
    size_t bytes; /* entries + this record */
};

struct ps_keylog
{
    size_t budget;
    size_t bytes;
    struct ps_kl_entry *g_head, *g_tail;
    struct ps_kl_range **ranges; /* sorted by range_id */
    size_t n_ranges, cap_ranges;
};

static const uint8_t *entry_keys(const struct ps_kl_entry *e)
{
    return (const uint8_t *)&e->slot[e->n];
}

void ps_keylog_keys_close(struct ps_keylog_keys *k)
{
    free(k->v);
    *k = (struct ps_keylog_keys){0};
}

int ps_keylog_create(size_t budget_bytes, struct ps_keylog **out)
{
    if (budget_bytes == 0) {
        return RT_EINVAL;
    }
    struct ps_keylog *kl = rt_xcalloc(1, sizeof(*kl));
    kl->budget = budget_bytes;
    *out = kl;
    return 0;
}

static size_t range_index(const struct ps_keylog *kl, uint64_t range_id)
{
    size_t lo = 0;
    size_t hi = kl->n_ranges;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (kl->ranges[mid]->range_id < range_id) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    return lo;
}

static struct ps_kl_range *range_find(const struct ps_keylog *kl,
                                      uint64_t range_id)
{
    size_t i = range_index(kl, range_id);
    if (i < kl->n_ranges && kl->ranges[i]->range_id == range_id) {
        return kl->ranges[i];
    }
    return NULL;
}

static struct ps_kl_range *range_get(struct ps_keylog *kl, uint64_t range_id)
{
    size_t i = range_index(kl, range_id);
    if (i < kl->n_ranges && kl->ranges[i]->range_id == range_id) {
        return kl->ranges[i];
    }
    if (kl->n_ranges == kl->cap_ranges) {
        kl->cap_ranges = kl->cap_ranges ? 2 * kl->cap_ranges : 16;
        kl->ranges =
            rt_xrealloc(kl->ranges, kl->cap_ranges * sizeof(*kl->ranges));
    }
    memmove(&kl->ranges[i + 1], &kl->ranges[i],
            (kl->n_ranges - i) * sizeof(*kl->ranges));
    kl->n_ranges++;
    struct ps_kl_range *r = rt_xcalloc(1, sizeof(*r));
    r->range_id = range_id;
    r->bytes = sizeof(*r);
    kl->bytes += r->bytes;
    kl->ranges[i] = r;
    return r;
}

/* Unlinks and frees the oldest entry of @r. */
static void drop_oldest(struct ps_keylog *kl, struct ps_kl_range *r)
{
    struct ps_kl_entry *e = r->head;
    r->head = e->r_next;
    if (r->head == NULL) {
        r->tail = NULL;
    }
    r->base = e->lsn;
    r->n_entries--;
    r->bytes -= e->bytes;
    if (e->g_prev != NULL) {
        e->g_prev->g_next = e->g_next;
    } else {
        kl->g_head = e->g_next;
    }
    if (e->g_next != NULL) {
        e->g_next->g_prev = e->g_prev;
    } else {
        kl->g_tail = e->g_prev;
    }
    kl->bytes -= e->bytes;
    free(e);
}

/* Drops entries oldest first until within budget, skipping those above
 * their range's cw. A range's entries are in LSN order in the global list
 * and cw is fixed during the walk, so once one is skipped every later one
 * of its range is skipped too: only range prefixes go. */
static void truncate_to_budget(struct ps_keylog *kl)
{
    struct ps_kl_entry *e = kl->g_head;
    while (kl->bytes > kl->budget && e != NULL) {
        struct ps_kl_entry *next = e->g_next;
        if (e->lsn <= e->range->cw) {
            RT_PRE(e == e->range->head);
            drop_oldest(kl, e->range);
        }
        e = next;
    }
}

void ps_keylog_destroy(struct ps_keylog *kl)
{
    if (kl == NULL) {
        return;
    }
    for (size_t i = 0; i < kl->n_ranges; i++) {
        while (kl->ranges[i]->head != NULL) {
            drop_oldest(kl, kl->ranges[i]);
        }
        free(kl->ranges[i]);
    }
    free(kl->ranges);
    free(kl);
}

int ps_keylog_append(struct ps_keylog *kl,
                     uint64_t range_id,
                     uint64_t lsn,
                     uint64_t epoch,
                     uint64_t txn_id,
                     const struct ps_keylog_key *keys,
                     size_t n)
{
    struct ps_kl_range *r = range_find(kl, range_id);
    if (lsn == 0 || (r != NULL && lsn <= r->last)) {
        return RT_EINVAL;
    }
    if (r == NULL) {
        r = range_get(kl, range_id);
    }
    if (r->n_entries > 0 && lsn != r->last + 1) {
        while (r->head != NULL) {
            drop_oldest(kl, r);
        }
    }
    if (r->n_entries == 0) {
        r->base = lsn - 1;
    }
    size_t key_bytes = 0;
    for (size_t i = 0; i < n; i++) {
        key_bytes += keys[i].len;
    }
    size_t bytes =
        sizeof(struct ps_kl_entry) + n * sizeof(struct ps_kl_slot) + key_bytes;
    struct ps_kl_entry *e = rt_xmalloc(bytes);
    *e = (struct ps_kl_entry){.range = r,
                              .lsn = lsn,
                              .epoch = epoch,
                              .txn_id = txn_id,
                              .bytes = bytes,
                              .n = n};
    uint8_t *p = (uint8_t *)&e->slot[n];
    size_t off = 0;
    for (size_t i = 0; i < n; i++) {
        e->slot[i] = (struct ps_kl_slot){.off = off, .len = keys[i].len};
        if (keys[i].len > 0) {
            memcpy(p + off, keys[i].p, keys[i].len);
        }
        off += keys[i].len;
    }
    if (r->tail != NULL) {
        r->tail->r_next = e;
    } else {
        r->head = e;
    }
    r->tail = e;
    r->last = lsn;
    r->n_entries++;
    r->bytes += bytes;
    e->g_prev = kl->g_tail;
    if (kl->g_tail != NULL) {
        kl->g_tail->g_next = e;
    } else {
        kl->g_head = e;
    }
    kl->g_tail = e;
    kl->bytes += bytes;
    truncate_to_budget(kl);
    return 0;
}

int ps_keylog_set_cw(struct ps_keylog *kl, uint64_t range_id, uint64_t cw)
{
    struct ps_kl_range *r = range_get(kl, range_id);
    if (cw > r->cw) {
        r->cw = cw;
        truncate_to_budget(kl);
    }
    return 0;
}

static int key_cmp(const void *a, const void *b)
{
    const struct ps_keylog_key *x = a;
    const struct ps_keylog_key *y = b;
    size_t n = x->len < y->len ? x->len : y->len;
    int c = n > 0 ? memcmp(x->p, y->p, n) : 0;
    if (c != 0) {
        return c;
    }
    return x->len < y->len ? -1 : x->len > y->len;
}

int ps_keylog_changed(const struct ps_keylog *kl,
                      uint64_t range_id,
                      uint64_t from_lsn,
                      uint64_t to_lsn,
                      struct ps_keylog_keys *out)
{
    out->n = 0;
    const struct ps_kl_range *r = range_find(kl, range_id);
    if (from_lsn > to_lsn) {
        return RT_EINVAL;
    }
    if (r == NULL || (r->n_entries == 0 && r->last == 0)) {
        return RT_ENOTFOUND;
    }
    if (to_lsn > r->last) {
        return RT_EINVAL;
    }
    if (from_lsn < r->base) {
        return RT_ENOTFOUND;
    }
    for (const struct ps_kl_entry *e = r->head; e != NULL; e = e->r_next) {
        if (e->lsn <= from_lsn) {
            continue;
        }
        if (e->lsn > to_lsn) {
            break;
        }
        if (out->n + e->n > out->cap) {
            size_t cap = out->cap ? 2 * out->cap : 64;
            while (cap < out->n + e->n) {
                cap *= 2;
            }
            out->v = rt_xrealloc(out->v, cap * sizeof(*out->v));
            out->cap = cap;
        }
        for (size_t i = 0; i < e->n; i++) {
            out->v[out->n++] = (struct ps_keylog_key){
                .p = entry_keys(e) + e->slot[i].off, .len = e->slot[i].len};
        }
    }
    if (out->n > 1) {
        qsort(out->v, out->n, sizeof(*out->v), key_cmp);
        size_t w = 1;
        for (size_t i = 1; i < out->n; i++) {
            if (key_cmp(&out->v[i], &out->v[w - 1]) != 0) {
                out->v[w++] = out->v[i];
            }
        }
        out->n = w;
    }
    return (int)out->n;
}

int ps_keylog_entry(const struct ps_keylog *kl,
                    uint64_t range_id,
                    uint64_t lsn,
                    uint64_t *epoch,
                    uint64_t *txn_id)
{
    const struct ps_kl_range *r = range_find(kl, range_id);
    for (const struct ps_kl_entry *e = r ? r->head : NULL; e != NULL;
         e = e->r_next) {
        if (e->lsn == lsn) {
            *epoch = e->epoch;
            *txn_id = e->txn_id;
            return 0;
        }
    }
    return RT_ENOTFOUND;
}

int ps_keylog_drop_range(struct ps_keylog *kl, uint64_t range_id)
{
    size_t i = range_index(kl, range_id);
    if (i == kl->n_ranges || kl->ranges[i]->range_id != range_id) {
        return RT_ENOTFOUND;
    }
    struct ps_kl_range *r = kl->ranges[i];
    while (r->head != NULL) {
        drop_oldest(kl, r);
    }
    kl->bytes -= r->bytes;
    free(r);
    memmove(&kl->ranges[i], &kl->ranges[i + 1],
            (kl->n_ranges - i - 1) * sizeof(*kl->ranges));
    kl->n_ranges--;
    return 0;
}

int ps_keylog_range_get(const struct ps_keylog *kl,
                        uint64_t range_id,
                        struct ps_keylog_range_info *out)
{
    const struct ps_kl_range *r = range_find(kl, range_id);
    if (r == NULL) {
        return RT_ENOTFOUND;
    }
    *out = (struct ps_keylog_range_info){.base = r->base,
                                         .last = r->last,
                                         .cw = r->cw,
                                         .n_entries = r->n_entries,
                                         .bytes = r->bytes};
    return 0;
}

size_t ps_keylog_bytes(const struct ps_keylog *kl)
{
    return kl->bytes;
}

size_t ps_keylog_budget(const struct ps_keylog *kl)
{
    return kl->budget;
}
