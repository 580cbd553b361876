/* Load model (see ms_load.h). */
#include "ms_load.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ms_util.h"
#include "rt_alloc.h"
#include "rt_utf8.h"

struct ms_load
{
    double tau_ms;
    struct ms_vec ranges; /* struct ms_load_range *, by id */
    struct ms_vec bounds; /* struct ms_load_bounds *, by range id */
    struct ms_load_frame frames[MS_LOAD_HISTORY]; /* ring */
    size_t nframes;
    size_t frame_head; /* index of the oldest frame */
    uint64_t next_frame;
    /* Coarse ring and the bucket being summed (see ms_load.h). */
    struct ms_load_frame coarse[MS_LOAD_COARSE_HISTORY];
    size_t ncoarse;
    size_t coarse_head;
    uint64_t next_coarse;
    struct ms_vec acc_cells; /* struct ms__acc_cell *, by range id */
    struct ms_vec acc_srv;   /* struct ms__acc_srv *, by server id */
    uint64_t acc_bucket;     /* unix_ms / MS_LOAD_COARSE_MS */
    uint32_t acc_frames;     /* fine frames summed so far */
};

struct ms__acc_cell
{
    uint64_t range_id;
    const struct ms_load_bounds *b;
    uint64_t server_id; /* the latest */
    double sum;
    uint32_t n; /* fine frames that had the range */
};

struct ms__acc_srv
{
    uint64_t server_id;
    double sum;
};

/* ---- helpers ---- */

static struct ms_load_range *ms__lr_find(const struct ms_load *ld,
                                         uint64_t id,
                                         size_t *idx)
{
    return ms_vec_find(&ld->ranges, offsetof(struct ms_load_range, range_id),
                       id, idx);
}

static struct ms_load_range *ms__lr_get(struct ms_load *ld, uint64_t id)
{
    size_t i;
    struct ms_load_range *r = ms__lr_find(ld, id, &i);
    if (!r) {
        r = rt_xcalloc(1, sizeof(*r));
        r->range_id = id;
        ms_vec_insert(&ld->ranges, i, r);
    }
    return r;
}

static void ms__lr_free(struct ms_load_range *r)
{
    if (!r) {
        return;
    }
    for (size_t i = 0; i < MS_LOAD_SAMPLES; i++) {
        free(r->samples[i].pk);
    }
    free(r);
}

/* Appends a sample to the ring (the key is copied). */
static void ms__sample_add(struct ms_load_range *r,
                           const char *pk,
                           double w,
                           uint64_t at_ms)
{
    struct ms_pk_sample *s = &r->samples[r->sample_next];
    free(s->pk);
    s->pk = rt_xstrdup(pk);
    s->w = w;
    s->at_ms = at_ms;
    r->sample_next = (r->sample_next + 1) % MS_LOAD_SAMPLES;
    if (r->nsamples < MS_LOAD_SAMPLES) {
        r->nsamples++;
    }
}

static void ms__rates_scale(struct ms_load_rates *out,
                            const struct ms_load_rates *in,
                            double f)
{
    out->req_s = in->req_s * f;
    out->ent_s = in->ent_s * f;
    out->wbytes_s = in->wbytes_s * f;
    out->exec_frac = in->exec_frac * f;
    out->thr_s = in->thr_s * f;
    out->scan_s = in->scan_s * f;
}

static void ms__rates_add(struct ms_load_rates *acc,
                          const struct ms_load_rates *in)
{
    acc->req_s += in->req_s;
    acc->ent_s += in->ent_s;
    acc->wbytes_s += in->wbytes_s;
    acc->exec_frac += in->exec_frac;
    acc->thr_s += in->thr_s;
    acc->scan_s += in->scan_s;
}

/* ---- lifecycle ---- */

struct ms_load *ms_load_create(uint32_t tau_ms)
{
    struct ms_load *ld = rt_xcalloc(1, sizeof(*ld));
    ld->tau_ms = tau_ms ? tau_ms : MS_LOAD_DEFAULT_TAU;
    ld->next_frame = 1;
    ld->next_coarse = 1;
    return ld;
}

static void ms__frame_clear(struct ms_load_frame *f)
{
    free(f->cells);
    free(f->server_ids);
    free(f->server_demand);
    memset(f, 0, sizeof(*f));
}

void ms_load_destroy(struct ms_load *ld)
{
    if (!ld) {
        return;
    }
    for (size_t i = 0; i < ld->ranges.n; i++) {
        ms__lr_free(ld->ranges.v[i]);
    }
    ms_vec_free(&ld->ranges);
    for (size_t i = 0; i < MS_LOAD_HISTORY; i++) {
        ms__frame_clear(&ld->frames[i]);
    }
    for (size_t i = 0; i < MS_LOAD_COARSE_HISTORY; i++) {
        ms__frame_clear(&ld->coarse[i]);
    }
    for (size_t i = 0; i < ld->acc_cells.n; i++) {
        free(ld->acc_cells.v[i]);
    }
    ms_vec_free(&ld->acc_cells);
    for (size_t i = 0; i < ld->acc_srv.n; i++) {
        free(ld->acc_srv.v[i]);
    }
    ms_vec_free(&ld->acc_srv);
    for (size_t i = 0; i < ld->bounds.n; i++) {
        struct ms_load_bounds *b = ld->bounds.v[i];
        free(b->low);
        free(b->high);
        free(b);
    }
    ms_vec_free(&ld->bounds);
    free(ld);
}

/* ---- reports ---- */

void ms_load_report(struct ms_load *ld,
                    uint64_t server_id,
                    const Rt__RangeLoad *l,
                    uint64_t max_server_eps,
                    uint64_t max_range_eps,
                    uint64_t now_ms)
{
    struct ms_load_range *r = ms__lr_get(ld, l->range_id);
    struct ms_load_rates cur;
    uint64_t dt = l->interval_ms;
    double secs, alpha, w;

    if (dt == 0) {
        dt = r->last_ms && now_ms > r->last_ms ? now_ms - r->last_ms : 1000;
    }
    if (dt < 50) {
        dt = 50; /* a burst of back-to-back heartbeats: no huge rates */
    }
    secs = (double)dt / 1000.0;
    cur.req_s = (double)l->requests / secs;
    cur.ent_s = (double)l->entities / secs;
    cur.wbytes_s = (double)l->bytes_written / secs;
    cur.exec_frac = (double)l->exec_us / 1000.0 / (double)dt;
    cur.thr_s = (double)l->throttled / secs;
    cur.scan_s = (double)l->scanned / secs;

    if (r->reports == 0 && !r->estimated) {
        r->avg = cur; /* the first report is the best estimate we have */
        r->first_ms = now_ms;
    } else {
        struct ms_load_rates keep, add;
        if (r->reports == 0) {
            r->first_ms = now_ms;
        }
        alpha = 1.0 - exp(-(double)dt / ld->tau_ms);
        ms__rates_scale(&keep, &r->avg, 1.0 - alpha);
        ms__rates_scale(&add, &cur, alpha);
        ms__rates_add(&keep, &add);
        r->avg = keep;
    }
    r->cur = cur;
    r->estimated = false;
    r->reports++;
    r->last_ms = now_ms;
    r->server_id = server_id;
    r->key_count = l->key_count;
    r->key_bytes = l->key_bytes;
    r->max_server_eps = max_server_eps;
    r->max_range_eps = max_range_eps;
    if (l->n_sample_pks) {
        /* Every sample of a weighted reservoir stands for an equal share of
         * the interval's load (+1: idle ranges still weigh something). */
        w = ((double)l->entities + (double)l->throttled + 1.0) /
            (double)l->n_sample_pks;
        for (size_t i = 0; i < l->n_sample_pks; i++) {
            if (l->sample_pks[i]) {
                ms__sample_add(r, l->sample_pks[i], w, now_ms);
            }
        }
    }
}

const struct ms_load_range *ms_load_find(const struct ms_load *ld,
                                         uint64_t range_id)
{
    return ms__lr_find(ld, range_id, NULL);
}

void ms_load_forget(struct ms_load *ld, uint64_t range_id)
{
    size_t i;
    struct ms_load_range *r = ms__lr_find(ld, range_id, &i);
    if (r) {
        ms_vec_remove(&ld->ranges, i);
        ms__lr_free(r);
    }
}

void ms_load_retain(struct ms_load *ld,
                    bool (*keep)(uint64_t range_id, void *arg),
                    void *arg)
{
    for (size_t i = 0; i < ld->ranges.n;) {
        struct ms_load_range *r = ld->ranges.v[i];
        if (keep(r->range_id, arg)) {
            i++;
        } else {
            ms_vec_remove(&ld->ranges, i);
            ms__lr_free(r);
        }
    }
}

/* ---- split / merge ---- */

static bool ms__in_range(const char *pk, const char *low, const char *high)
{
    return rt_utf16_cmpz(pk, low) >= 0 &&
           (!high || rt_utf16_cmpz(pk, high) < 0);
}

void ms_load_split(struct ms_load *ld,
                   uint64_t parent,
                   const char *key,
                   uint64_t left,
                   uint64_t right)
{
    struct ms_load_range *p = ms__lr_find(ld, parent, NULL);
    struct ms_load_range *l, *r;
    double wl = 0, wr = 0, share;

    if (!p) {
        return;
    }
    for (size_t i = 0; i < p->nsamples; i++) {
        const struct ms_pk_sample *s = &p->samples[i];
        if (rt_utf16_cmpz(s->pk, key) < 0) {
            wl += s->w;
        } else {
            wr += s->w;
        }
    }
    share = wl + wr > 0 ? wl / (wl + wr) : 0.5;
    l = ms__lr_get(ld, left); /* items are heap objects: @p stays valid */
    r = ms__lr_get(ld, right);
    l->server_id = r->server_id = p->server_id;
    l->first_ms = r->first_ms = p->last_ms;
    l->last_ms = r->last_ms = p->last_ms;
    l->estimated = r->estimated = true;
    ms__rates_scale(&l->avg, &p->avg, share);
    ms__rates_scale(&r->avg, &p->avg, 1.0 - share);
    ms__rates_scale(&l->cur, &p->cur, share);
    ms__rates_scale(&r->cur, &p->cur, 1.0 - share);
    l->key_count = (uint64_t)((double)p->key_count * share);
    r->key_count = p->key_count - l->key_count;
    l->key_bytes = (uint64_t)((double)p->key_bytes * share);
    r->key_bytes = p->key_bytes - l->key_bytes;
    l->max_range_eps = r->max_range_eps = p->max_range_eps;
    l->max_server_eps = r->max_server_eps = p->max_server_eps;
    for (size_t i = 0; i < p->nsamples; i++) {
        const struct ms_pk_sample *s = &p->samples[i];
        ms__sample_add(rt_utf16_cmpz(s->pk, key) < 0 ? l : r, s->pk, s->w,
                       s->at_ms);
    }
    ms_load_forget(ld, parent);
}

void ms_load_merge(struct ms_load *ld, uint64_t a, uint64_t b, uint64_t merged)
{
    struct ms_load_range *m = ms__lr_get(ld, merged);
    const uint64_t src[2] = {a, b};
    bool any = false;
    for (int k = 0; k < 2; k++) {
        struct ms_load_range *p = ms__lr_find(ld, src[k], NULL);
        if (!p) {
            continue;
        }
        any = true;
        m->server_id = p->server_id;
        if (p->last_ms > m->last_ms) {
            m->last_ms = p->last_ms;
            m->first_ms = p->last_ms;
        }
        ms__rates_add(&m->avg, &p->avg);
        ms__rates_add(&m->cur, &p->cur);
        m->key_count += p->key_count;
        m->key_bytes += p->key_bytes;
        m->max_range_eps = p->max_range_eps;
        m->max_server_eps = p->max_server_eps;
        for (size_t i = 0; i < p->nsamples; i++) {
            const struct ms_pk_sample *s = &p->samples[i];
            ms__sample_add(m, s->pk, s->w, s->at_ms);
        }
    }
    m->estimated = true;
    ms_load_forget(ld, a);
    ms_load_forget(ld, b);
    if (!any) {
        ms_load_forget(ld, merged);
    }
}

/* ---- split key ---- */

static int ms__wpk_cmp(const void *a, const void *b)
{
    return rt_utf16_cmpz(((const struct ms_load_wpk *)a)->pk,
                         ((const struct ms_load_wpk *)b)->pk);
}

void ms_load_range_samples(const struct ms_load_range *r,
                           const char *low,
                           const char *high,
                           uint64_t now_ms,
                           struct ms_load_samples *out)
{
    struct ms_load_wpk *v;
    size_t n = 0, k = 0;

    memset(out, 0, sizeof(*out));
    if (!r || r->nsamples == 0) {
        return;
    }
    v = rt_xcalloc(r->nsamples, sizeof(*v));
    for (size_t i = 0; i < r->nsamples; i++) {
        const struct ms_pk_sample *s = &r->samples[i];
        if (now_ms > s->at_ms && now_ms - s->at_ms > MS_LOAD_SAMPLE_MS) {
            continue;
        }
        if (!ms__in_range(s->pk, low, high) || s->w <= 0) {
            continue; /* reported before a split or merge changed the bounds */
        }
        v[n].pk = s->pk;
        v[n].w = s->w;
        out->total += s->w;
        n++;
    }
    qsort(v, n, sizeof(*v), ms__wpk_cmp);
    /* Fold equal keys: a PartitionKey is never split, so only its summed
     * weight matters. */
    for (size_t i = 0; i < n;) {
        size_t j = i;
        double here = 0;
        while (j < n && strcmp(v[j].pk, v[i].pk) == 0) {
            here += v[j].w;
            j++;
        }
        v[k].pk = v[i].pk;
        v[k].w = here;
        k++;
        i = j;
    }
    out->v = v;
    out->n = k;
    out->nsamples = n;
}

void ms_load_samples_free(struct ms_load_samples *s)
{
    free(s->v);
    memset(s, 0, sizeof(*s));
}

char *ms_load_split_key(const struct ms_load_range *r,
                        const char *low,
                        const char *high,
                        uint64_t now_ms,
                        double *left_share)
{
    struct ms_load_samples sm;
    double below = 0, best_diff = 0, best_below = 0;
    const char *best = NULL;
    char *out = NULL;

    ms_load_range_samples(r, low, high, now_ms, &sm);
    /* Candidate K = each distinct sampled key > low; the weight below K is
     * the sum over samples with a smaller key. */
    for (size_t i = 0; i < sm.n; i++) {
        if (rt_utf16_cmpz(sm.v[i].pk, low) > 0 && below > 0) {
            double diff = fabs(sm.total - 2 * below);
            if (!best || diff < best_diff) {
                best = sm.v[i].pk;
                best_diff = diff;
                best_below = below;
            }
        }
        below += sm.v[i].w;
    }
    if (best) {
        out = rt_xstrdup(best);
        if (left_share) {
            *left_share = sm.total > 0 ? best_below / sm.total : 0.5;
        }
    }
    ms_load_samples_free(&sm);
    return out;
}

/* ---- history ---- */

static const struct ms_load_bounds *ms__bounds_get(
    struct ms_load *ld,
    const struct ms_load_frame_range *fr,
    uint64_t frame_n)
{
    bool created;
    struct ms_load_bounds *b =
        ms_vec_get(&ld->bounds, offsetof(struct ms_load_bounds, range_id),
                   fr->range_id, sizeof(*b), &created);
    if (created) {
        b->table_id = fr->table_id;
        b->low = rt_xstrdup(fr->low ? fr->low : "");
        b->high = fr->high ? rt_xstrdup(fr->high) : NULL;
    }
    b->last_frame = frame_n;
    /* Kept while the bucket, then the coarse frame made of it, is. */
    b->last_coarse = ld->next_coarse;
    return b;
}

static int ms__u64_cmp(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* ---- coarse history ---- */

/* Turns the bucket summed so far into the newest coarse frame (the oldest
 * one goes when the ring is full) and empties the accumulator. */
static void ms__coarse_flush(struct ms_load *ld)
{
    struct ms_load_frame *f;
    size_t slot;

    if (ld->ncoarse == MS_LOAD_COARSE_HISTORY) {
        slot = ld->coarse_head;
        ld->coarse_head = (ld->coarse_head + 1) % MS_LOAD_COARSE_HISTORY;
    } else {
        slot = (ld->coarse_head + ld->ncoarse) % MS_LOAD_COARSE_HISTORY;
        ld->ncoarse++;
    }
    f = &ld->coarse[slot];
    ms__frame_clear(f);
    f->n = ld->next_coarse++;
    f->unix_ms = ld->acc_bucket * MS_LOAD_COARSE_MS;
    f->ncells = ld->acc_cells.n;
    f->cells = rt_xcalloc(f->ncells ? f->ncells : 1, sizeof(*f->cells));
    for (size_t i = 0; i < ld->acc_cells.n; i++) {
        struct ms__acc_cell *a = ld->acc_cells.v[i];
        f->cells[i].b = a->b;
        f->cells[i].server_id = a->server_id;
        f->cells[i].demand = (float)(a->sum / a->n);
        free(a);
    }
    ld->acc_cells.n = 0;
    f->nservers = ld->acc_srv.n;
    f->server_ids =
        rt_xcalloc(f->nservers ? f->nservers : 1, sizeof(*f->server_ids));
    f->server_demand =
        rt_xcalloc(f->nservers ? f->nservers : 1, sizeof(*f->server_demand));
    for (size_t i = 0; i < ld->acc_srv.n; i++) {
        struct ms__acc_srv *a = ld->acc_srv.v[i];
        f->server_ids[i] = a->server_id;
        f->server_demand[i] = (float)(a->sum / ld->acc_frames);
        free(a);
    }
    ld->acc_srv.n = 0;
    ld->acc_frames = 0;
}

/* Closes the bucket being summed when a fine frame at @unix_ms starts
 * another one (a clock stepped back starts one too). Called before the
 * frame's bounds are marked, so they carry the number of the bucket they
 * will be summed into. */
static void ms__coarse_roll(struct ms_load *ld, uint64_t unix_ms)
{
    uint64_t bucket = unix_ms / MS_LOAD_COARSE_MS;

    if (ld->acc_frames && bucket != ld->acc_bucket) {
        ms__coarse_flush(ld);
    }
    ld->acc_bucket = bucket;
}

/* Adds fine frame @f to the current bucket. */
static void ms__coarse_add(struct ms_load *ld, const struct ms_load_frame *f)
{
    ld->acc_frames++;
    for (size_t i = 0; i < f->ncells; i++) {
        const struct ms_load_cell *c = &f->cells[i];
        struct ms__acc_cell *a =
            ms_vec_get(&ld->acc_cells, offsetof(struct ms__acc_cell, range_id),
                       c->b->range_id, sizeof(*a), NULL);
        a->b = c->b;
        a->server_id = c->server_id;
        a->sum += c->demand;
        a->n++;
    }
    for (size_t i = 0; i < f->nservers; i++) {
        struct ms__acc_srv *a =
            ms_vec_get(&ld->acc_srv, offsetof(struct ms__acc_srv, server_id),
                       f->server_ids[i], sizeof(*a), NULL);
        a->sum += f->server_demand[i];
    }
}

void ms_load_frame(struct ms_load *ld,
                   uint64_t unix_ms,
                   const struct ms_load_frame_range *ranges,
                   size_t n)
{
    struct ms_load_frame *f;
    uint64_t oldest, oldest_coarse;
    size_t slot;

    ms__coarse_roll(ld, unix_ms);
    if (ld->nframes == MS_LOAD_HISTORY) {
        slot = ld->frame_head;
        ld->frame_head = (ld->frame_head + 1) % MS_LOAD_HISTORY;
    } else {
        slot = (ld->frame_head + ld->nframes) % MS_LOAD_HISTORY;
        ld->nframes++;
    }
    f = &ld->frames[slot];
    ms__frame_clear(f);
    f->n = ld->next_frame++;
    f->unix_ms = unix_ms;
    f->cells = rt_xcalloc(n ? n : 1, sizeof(*f->cells));
    f->ncells = n;
    f->server_ids = rt_xcalloc(n ? n : 1, sizeof(*f->server_ids));
    f->server_demand = rt_xcalloc(n ? n : 1, sizeof(*f->server_demand));
    for (size_t i = 0; i < n; i++) {
        const struct ms_load_range *r = ms__lr_find(ld, ranges[i].range_id, 0);
        f->cells[i].b = ms__bounds_get(ld, &ranges[i], f->n);
        f->cells[i].server_id = ranges[i].server_id;
        f->cells[i].demand = r ? (float)ms_load_demand(&r->avg) : 0.0f;
        f->server_ids[i] = ranges[i].server_id;
    }
    /* Server totals: distinct ids, then sums. */
    qsort(f->server_ids, n, sizeof(*f->server_ids), ms__u64_cmp);
    for (size_t i = 0; i < n; i++) {
        if (f->nservers == 0 ||
            f->server_ids[f->nservers - 1] != f->server_ids[i]) {
            f->server_ids[f->nservers++] = f->server_ids[i];
        }
    }
    for (size_t i = 0; i < n; i++) {
        for (size_t j = 0; j < f->nservers; j++) {
            if (f->server_ids[j] == f->cells[i].server_id) {
                f->server_demand[j] += f->cells[i].demand;
                break;
            }
        }
    }
    ms__coarse_add(ld, f);
    /* Bounds no kept frame (fine, coarse or the bucket being summed)
     * references any more go. */
    oldest = ld->frames[ld->frame_head].n;
    oldest_coarse =
        ld->ncoarse ? ld->coarse[ld->coarse_head].n : ld->next_coarse;
    for (size_t i = 0; i < ld->bounds.n;) {
        struct ms_load_bounds *b = ld->bounds.v[i];
        if (b->last_frame < oldest && b->last_coarse < oldest_coarse) {
            ms_vec_remove(&ld->bounds, i);
            free(b->low);
            free(b->high);
            free(b);
        } else {
            i++;
        }
    }
}

size_t ms_load_nframes(const struct ms_load *ld)
{
    return ld->nframes;
}

const struct ms_load_frame *ms_load_frame_at(const struct ms_load *ld, size_t i)
{
    return &ld->frames[(ld->frame_head + i) % MS_LOAD_HISTORY];
}

size_t ms_load_nbounds(const struct ms_load *ld)
{
    return ld->bounds.n;
}

const struct ms_load_bounds *ms_load_bounds_at(const struct ms_load *ld,
                                               size_t i)
{
    return ld->bounds.v[i];
}

size_t ms_load_ncoarse(const struct ms_load *ld)
{
    return ld->ncoarse;
}

const struct ms_load_frame *ms_load_coarse_at(const struct ms_load *ld,
                                              size_t i)
{
    return &ld->coarse[(ld->coarse_head + i) % MS_LOAD_COARSE_HISTORY];
}

uint64_t ms_load_coarse_added(const struct ms_load *ld)
{
    return ld->next_coarse - 1;
}
