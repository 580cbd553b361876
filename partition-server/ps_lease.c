/* Leases (ps_lease.h): the granter keeps one record per range it holds
 * (sorted by range id, binary search) and one per registered peer; the
 * holder keeps one record per range it is primary of (sorted the same
 * way) with its lease set inline, and per peer a ring of the send times of
 * its last PS_LEASE_INFLIGHT requests. Every answer is computed from these
 * records and the times passed in; nothing here reads a clock. */
#include "ps_lease.h"

#include <stdlib.h>
#include <string.h>

#include "rt_alloc.h"
#include "rt_err.h"

#define PPM 1000000u

int ps_lease_config_check(const struct ps_lease_config *cfg)
{
    if (cfg->lease_ms == 0 || cfg->drift_ppm >= PPM || cfg->eps_ms < 1 ||
        cfg->lease_ms > UINT64_MAX / PPM) {
        return RT_EINVAL;
    }
    return ps_lease_duration(cfg) > 0 ? 0 : RT_EINVAL;
}

uint64_t ps_lease_duration(const struct ps_lease_config *cfg)
{
    if (cfg->lease_ms == 0 || cfg->drift_ppm >= PPM ||
        cfg->lease_ms > UINT64_MAX / PPM) {
        return 0;
    }
    /* Truncating division: D only gets shorter, which is the safe side. */
    uint64_t d = cfg->lease_ms * (PPM - cfg->drift_ppm) /
                 ((uint64_t)PPM + cfg->drift_ppm);
    return d > cfg->eps_ms ? d - cfg->eps_ms : 0;
}

/* Index of the first of the @n elements at @base (sorted by a leading
 * uint64_t key, @size bytes apart) whose key is >= @id. */
static size_t lower_bound(const void *base, size_t n, size_t size, uint64_t id)
{
    size_t lo = 0;
    size_t hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        uint64_t key;
        memcpy(&key, (const char *)base + mid * size, sizeof(key));
        if (key < id) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    return lo;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a;
    uint64_t y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static bool sorted_has(const uint64_t *v, size_t n, uint64_t id)
{
    size_t i = lower_bound(v, n, sizeof(*v), id);
    return i < n && v[i] == id;
}

/* Copies @src[@n] into *@dst (grown as needed), sorted. */
static void sorted_copy(uint64_t **dst,
                        size_t *cap,
                        const uint64_t *src,
                        size_t n)
{
    if (n > *cap) {
        *dst = rt_xrealloc(*dst, n * sizeof(**dst));
        *cap = n;
    }
    if (n > 0) {
        memcpy(*dst, src, n * sizeof(*src));
        qsort(*dst, n, sizeof(**dst), cmp_u64);
    }
}

/* ---- Granter ---- */

struct ps_lgrant_range
{
    uint64_t range_id;       /* first: the sort key */
    uint64_t primary;        /* the view's primary (0: none) */
    uint64_t epoch;          /* the view's epoch */
    uint64_t withdrawn_from; /* an old primary told `withdrawn` (0: none) */
    uint64_t sealed_epoch;   /* a seal accepted for this epoch (0: none) */
    uint64_t last_grant;     /* valid when has_grant */
    bool has_grant;
    bool released; /* the primary released it; nothing granted since */
};

struct ps_lgrant_peer
{
    uint64_t id; /* first: the sort key */
    uint8_t inc[PS_LEASE_INC_MAX];
    size_t inc_len;
    uint64_t last_grant; /* the last answer granted = true, when has_grant */
    bool has_grant;
};

struct ps_lease_granter
{
    struct ps_lease_config cfg;
    struct ps_lgrant_range *ranges;
    size_t n_ranges, cap_ranges;
    struct ps_lgrant_peer *peers;
    size_t n_peers, cap_peers;
    bool fenced;
    uint64_t *withdrawn; /* the last answer's list */
    size_t cap_withdrawn;
    uint64_t *release; /* scratch: the request's release list, sorted */
    size_t cap_release;
};

int ps_lease_granter_create(const struct ps_lease_config *cfg,
                            struct ps_lease_granter **out)
{
    int rc = ps_lease_config_check(cfg);
    if (rc != 0) {
        return rc;
    }
    struct ps_lease_granter *g = rt_xcalloc(1, sizeof(*g));
    g->cfg = *cfg;
    *out = g;
    return 0;
}

void ps_lease_granter_destroy(struct ps_lease_granter *g)
{
    if (g == NULL) {
        return;
    }
    free(g->ranges);
    free(g->peers);
    free(g->withdrawn);
    free(g->release);
    free(g);
}

static const struct ps_lgrant_peer *gpeer_find(const struct ps_lease_granter *g,
                                               uint64_t peer_id)
{
    size_t i = lower_bound(g->peers, g->n_peers, sizeof(*g->peers), peer_id);
    if (i < g->n_peers && g->peers[i].id == peer_id) {
        return &g->peers[i];
    }
    return NULL;
}

/* Raises @r's last grant to the last answer granted to @peer_id: every
 * range such an answer did not list as withdrawn counts for that peer. */
static void grange_take_peer_grant(const struct ps_lease_granter *g,
                                   struct ps_lgrant_range *r,
                                   uint64_t peer_id)
{
    const struct ps_lgrant_peer *p = gpeer_find(g, peer_id);
    if (p == NULL || !p->has_grant) {
        return;
    }
    if (!r->has_grant || p->last_grant > r->last_grant) {
        r->last_grant = p->last_grant;
        r->has_grant = true;
    }
}

static struct ps_lgrant_range *grange_find(const struct ps_lease_granter *g,
                                           uint64_t range_id)
{
    size_t i =
        lower_bound(g->ranges, g->n_ranges, sizeof(*g->ranges), range_id);
    if (i < g->n_ranges && g->ranges[i].range_id == range_id) {
        return &g->ranges[i];
    }
    return NULL;
}

int ps_lease_granter_peer(struct ps_lease_granter *g,
                          uint64_t peer_id,
                          const uint8_t *inc,
                          size_t len)
{
    if (len == 0 || len > PS_LEASE_INC_MAX) {
        return RT_EINVAL;
    }
    size_t i = lower_bound(g->peers, g->n_peers, sizeof(*g->peers), peer_id);
    if (i == g->n_peers || g->peers[i].id != peer_id) {
        if (g->n_peers == g->cap_peers) {
            g->cap_peers = g->cap_peers ? 2 * g->cap_peers : 8;
            g->peers = rt_xrealloc(g->peers, g->cap_peers * sizeof(*g->peers));
        }
        memmove(&g->peers[i + 1], &g->peers[i],
                (g->n_peers - i) * sizeof(*g->peers));
        g->n_peers++;
        memset(&g->peers[i], 0, sizeof(g->peers[i]));
        g->peers[i].id = peer_id;
    }
    memcpy(g->peers[i].inc, inc, len);
    g->peers[i].inc_len = len;
    return 0;
}

int ps_lease_granter_set_range(struct ps_lease_granter *g,
                               uint64_t range_id,
                               uint64_t primary_id,
                               uint64_t epoch)
{
    size_t i =
        lower_bound(g->ranges, g->n_ranges, sizeof(*g->ranges), range_id);
    struct ps_lgrant_range *r;
    if (i == g->n_ranges || g->ranges[i].range_id != range_id) {
        if (g->n_ranges == g->cap_ranges) {
            g->cap_ranges = g->cap_ranges ? 2 * g->cap_ranges : 16;
            g->ranges =
                rt_xrealloc(g->ranges, g->cap_ranges * sizeof(*g->ranges));
        }
        memmove(&g->ranges[i + 1], &g->ranges[i],
                (g->n_ranges - i) * sizeof(*g->ranges));
        g->n_ranges++;
        r = &g->ranges[i];
        memset(r, 0, sizeof(*r));
        r->range_id = range_id;
        /* Answers sent before this range was known withdrew nothing for
         * it, so their receivers may count them for it. */
        for (size_t k = 0; k < g->n_peers; k++) {
            grange_take_peer_grant(g, r, g->peers[k].id);
        }
    } else {
        r = &g->ranges[i];
        if (epoch < r->epoch) {
            return RT_ESTALE;
        }
    }
    if (primary_id == g->cfg.self_id) {
        primary_id = 0; /* this server never supports itself */
    }
    if (primary_id != r->primary) {
        if (r->primary != 0) {
            /* Its answers count for this range up to now; from now on
             * they list it as withdrawn. */
            grange_take_peer_grant(g, r, r->primary);
            r->withdrawn_from = r->primary;
        }
        if (r->withdrawn_from == primary_id) {
            r->withdrawn_from = 0; /* the old primary is primary again */
        }
        r->primary = primary_id;
        r->released = false;
    }
    r->epoch = epoch;
    if (r->sealed_epoch != 0 && epoch >= r->sealed_epoch) {
        r->sealed_epoch = 0; /* the master's decision arrived */
    }
    return 0;
}

int ps_lease_granter_drop_range(struct ps_lease_granter *g, uint64_t range_id)
{
    struct ps_lgrant_range *r = grange_find(g, range_id);
    if (r == NULL) {
        return RT_ENOTFOUND;
    }
    size_t i = (size_t)(r - g->ranges);
    memmove(r, r + 1, (g->n_ranges - i - 1) * sizeof(*r));
    g->n_ranges--;
    return 0;
}

void ps_lease_granter_set_fenced(struct ps_lease_granter *g, bool fenced)
{
    g->fenced = fenced;
}

static void push_withdrawn(struct ps_lease_granter *g, size_t *n, uint64_t id)
{
    if (*n == g->cap_withdrawn) {
        g->cap_withdrawn = g->cap_withdrawn ? 2 * g->cap_withdrawn : 8;
        g->withdrawn =
            rt_xrealloc(g->withdrawn, g->cap_withdrawn * sizeof(*g->withdrawn));
    }
    g->withdrawn[(*n)++] = id;
}

void ps_lease_granter_on_support(struct ps_lease_granter *g,
                                 uint64_t peer_id,
                                 const uint8_t *inc,
                                 size_t inc_len,
                                 const uint64_t *release,
                                 size_t n_release,
                                 uint64_t now,
                                 struct ps_lease_answer *out)
{
    *out = (struct ps_lease_answer){0};
    size_t p = lower_bound(g->peers, g->n_peers, sizeof(*g->peers), peer_id);
    if (g->fenced || p == g->n_peers || g->peers[p].id != peer_id ||
        g->peers[p].inc_len != inc_len ||
        memcmp(g->peers[p].inc, inc, inc_len) != 0) {
        return;
    }
    g->peers[p].last_grant = now;
    g->peers[p].has_grant = true;
    sorted_copy(&g->release, &g->cap_release, release, n_release);
    size_t n = 0;
    for (size_t i = 0; i < g->n_ranges; i++) {
        struct ps_lgrant_range *r = &g->ranges[i];
        if (r->primary == peer_id && r->sealed_epoch == 0) {
            if (sorted_has(g->release, n_release, r->range_id)) {
                r->released = true;
            } else {
                r->released = false;
                r->last_grant = now;
                r->has_grant = true;
            }
        } else if (r->primary == peer_id || r->withdrawn_from == peer_id) {
            push_withdrawn(g, &n, r->range_id);
        }
    }
    out->granted = true;
    out->withdrawn = g->withdrawn;
    out->n_withdrawn = n;
}

uint64_t ps_lease_granter_seal_wait(const struct ps_lease_granter *g,
                                    uint64_t range_id,
                                    uint64_t now)
{
    uint64_t until = g->cfg.start_ms + g->cfg.lease_ms;
    const struct ps_lgrant_range *r = grange_find(g, range_id);
    if (r != NULL && !r->released) {
        /* The range's own grants, and every answer its primary got (an
         * answer counts for each range it does not withdraw). */
        uint64_t last = r->has_grant ? r->last_grant : 0;
        bool any = r->has_grant;
        const struct ps_lgrant_peer *p = gpeer_find(g, r->primary);
        if (r->sealed_epoch == 0 && p != NULL && p->has_grant) {
            last = any && last > p->last_grant ? last : p->last_grant;
            any = true;
        }
        if (any && last + g->cfg.lease_ms > until) {
            until = last + g->cfg.lease_ms;
        }
    }
    return now >= until ? 0 : until - now;
}

int ps_lease_granter_seal(struct ps_lease_granter *g,
                          uint64_t range_id,
                          uint64_t new_epoch,
                          uint64_t now,
                          uint64_t *retry_ms)
{
    struct ps_lgrant_range *r = grange_find(g, range_id);
    *retry_ms = 0;
    if (r == NULL) {
        return RT_ENOTFOUND;
    }
    uint64_t wait = ps_lease_granter_seal_wait(g, range_id, now);
    if (wait > 0) {
        *retry_ms = wait;
        return RT_EBUSY;
    }
    if (new_epoch > r->sealed_epoch) {
        r->sealed_epoch = new_epoch;
    }
    return 0;
}

/* ---- Holder ---- */

struct ps_lhold_member
{
    uint64_t peer;
    uint64_t t_send;    /* support from this send time, when has */
    uint64_t seq_floor; /* replies to requests below it never count */
    bool has;
};

struct ps_lhold_range
{
    uint64_t range_id; /* first: the sort key */
    size_t n;
    struct ps_lhold_member m[PS_LEASE_MAX_MEMBERS];
    bool released;
};

struct ps_lhold_peer
{
    uint64_t id; /* first: the sort key */
    uint64_t seq[PS_LEASE_INFLIGHT];
    uint64_t t_send[PS_LEASE_INFLIGHT];
    unsigned head; /* next slot */
};

struct ps_lease_holder
{
    struct ps_lease_config cfg;
    uint64_t dur; /* D */
    uint64_t next_seq;
    struct ps_lhold_range *ranges;
    size_t n_ranges, cap_ranges;
    struct ps_lhold_peer *peers;
    size_t n_peers, cap_peers;
    uint64_t *release; /* the last request's release list */
    size_t cap_release;
    uint64_t *withdrawn; /* scratch: a reply's withdrawn list, sorted */
    size_t cap_withdrawn;
};

int ps_lease_holder_create(const struct ps_lease_config *cfg,
                           struct ps_lease_holder **out)
{
    int rc = ps_lease_config_check(cfg);
    if (rc != 0) {
        return rc;
    }
    struct ps_lease_holder *h = rt_xcalloc(1, sizeof(*h));
    h->cfg = *cfg;
    h->dur = ps_lease_duration(cfg);
    h->next_seq = 1;
    *out = h;
    return 0;
}

void ps_lease_holder_destroy(struct ps_lease_holder *h)
{
    if (h == NULL) {
        return;
    }
    free(h->ranges);
    free(h->peers);
    free(h->release);
    free(h->withdrawn);
    free(h);
}

static struct ps_lhold_range *hrange_find(const struct ps_lease_holder *h,
                                          uint64_t range_id)
{
    size_t i =
        lower_bound(h->ranges, h->n_ranges, sizeof(*h->ranges), range_id);
    if (i < h->n_ranges && h->ranges[i].range_id == range_id) {
        return &h->ranges[i];
    }
    return NULL;
}

static struct ps_lhold_member *hmember(struct ps_lhold_range *r, uint64_t peer)
{
    for (size_t k = 0; k < r->n; k++) {
        if (r->m[k].peer == peer) {
            return &r->m[k];
        }
    }
    return NULL;
}

int ps_lease_holder_set_range(struct ps_lease_holder *h,
                              uint64_t range_id,
                              const uint64_t *members,
                              size_t n)
{
    struct ps_lhold_member next[PS_LEASE_MAX_MEMBERS];
    size_t nn = 0;
    struct ps_lhold_range *r = hrange_find(h, range_id);
    for (size_t i = 0; i < n; i++) {
        uint64_t id = members[i];
        bool dup = id == h->cfg.self_id;
        for (size_t k = 0; k < nn && !dup; k++) {
            dup = next[k].peer == id;
        }
        if (dup) {
            continue;
        }
        if (nn == PS_LEASE_MAX_MEMBERS) {
            return RT_EINVAL;
        }
        struct ps_lhold_member *old = r ? hmember(r, id) : NULL;
        next[nn++] = old ? *old : (struct ps_lhold_member){.peer = id};
    }
    if (r == NULL) {
        size_t i =
            lower_bound(h->ranges, h->n_ranges, sizeof(*h->ranges), range_id);
        if (h->n_ranges == h->cap_ranges) {
            h->cap_ranges = h->cap_ranges ? 2 * h->cap_ranges : 16;
            h->ranges =
                rt_xrealloc(h->ranges, h->cap_ranges * sizeof(*h->ranges));
        }
        memmove(&h->ranges[i + 1], &h->ranges[i],
                (h->n_ranges - i) * sizeof(*h->ranges));
        h->n_ranges++;
        r = &h->ranges[i];
        memset(r, 0, sizeof(*r));
        r->range_id = range_id;
    }
    memcpy(r->m, next, nn * sizeof(next[0]));
    r->n = nn;
    return 0;
}

int ps_lease_holder_drop_range(struct ps_lease_holder *h, uint64_t range_id)
{
    struct ps_lhold_range *r = hrange_find(h, range_id);
    if (r == NULL) {
        return RT_ENOTFOUND;
    }
    size_t i = (size_t)(r - h->ranges);
    memmove(r, r + 1, (h->n_ranges - i - 1) * sizeof(*r));
    h->n_ranges--;
    return 0;
}

int ps_lease_holder_release(struct ps_lease_holder *h, uint64_t range_id)
{
    struct ps_lhold_range *r = hrange_find(h, range_id);
    if (r == NULL) {
        return RT_ENOTFOUND;
    }
    r->released = true;
    for (size_t k = 0; k < r->n; k++) {
        r->m[k].has = false;
    }
    return 0;
}

int ps_lease_holder_resume(struct ps_lease_holder *h, uint64_t range_id)
{
    struct ps_lhold_range *r = hrange_find(h, range_id);
    if (r == NULL) {
        return RT_ENOTFOUND;
    }
    r->released = false;
    for (size_t k = 0; k < r->n; k++) {
        r->m[k].has = false;
        r->m[k].seq_floor = h->next_seq;
    }
    return 0;
}

static struct ps_lhold_peer *hpeer_get(struct ps_lease_holder *h,
                                       uint64_t peer_id,
                                       bool create)
{
    size_t i = lower_bound(h->peers, h->n_peers, sizeof(*h->peers), peer_id);
    if (i < h->n_peers && h->peers[i].id == peer_id) {
        return &h->peers[i];
    }
    if (!create) {
        return NULL;
    }
    if (h->n_peers == h->cap_peers) {
        h->cap_peers = h->cap_peers ? 2 * h->cap_peers : 8;
        h->peers = rt_xrealloc(h->peers, h->cap_peers * sizeof(*h->peers));
    }
    memmove(&h->peers[i + 1], &h->peers[i],
            (h->n_peers - i) * sizeof(*h->peers));
    h->n_peers++;
    memset(&h->peers[i], 0, sizeof(h->peers[i]));
    h->peers[i].id = peer_id;
    return &h->peers[i];
}

void ps_lease_holder_send(struct ps_lease_holder *h,
                          uint64_t peer_id,
                          uint64_t now,
                          struct ps_lease_req *out)
{
    struct ps_lhold_peer *p = hpeer_get(h, peer_id, true);
    uint64_t seq = h->next_seq++;
    p->seq[p->head] = seq;
    p->t_send[p->head] = now;
    p->head = (p->head + 1) % PS_LEASE_INFLIGHT;
    size_t n = 0;
    for (size_t i = 0; i < h->n_ranges; i++) {
        struct ps_lhold_range *r = &h->ranges[i];
        if (!r->released || hmember(r, peer_id) == NULL) {
            continue;
        }
        if (n == h->cap_release) {
            h->cap_release = h->cap_release ? 2 * h->cap_release : 8;
            h->release =
                rt_xrealloc(h->release, h->cap_release * sizeof(*h->release));
        }
        h->release[n++] = r->range_id;
    }
    *out = (struct ps_lease_req){
        .seq = seq, .release = h->release, .n_release = n};
}

int ps_lease_holder_on_resp(struct ps_lease_holder *h,
                            uint64_t peer_id,
                            uint64_t seq,
                            bool granted,
                            const uint64_t *withdrawn,
                            size_t n)
{
    struct ps_lhold_peer *p = hpeer_get(h, peer_id, false);
    uint64_t t_send = 0;
    bool found = false;
    for (unsigned k = 0; p != NULL && k < PS_LEASE_INFLIGHT && !found; k++) {
        if (p->seq[k] == seq && seq != 0) {
            t_send = p->t_send[k];
            found = true;
        }
    }
    if (!found) {
        return RT_ENOTFOUND;
    }
    sorted_copy(&h->withdrawn, &h->cap_withdrawn, withdrawn, n);
    for (size_t i = 0; i < h->n_ranges; i++) {
        struct ps_lhold_range *r = &h->ranges[i];
        struct ps_lhold_member *m = hmember(r, peer_id);
        if (m == NULL) {
            continue;
        }
        if (!granted || sorted_has(h->withdrawn, n, r->range_id)) {
            /* Void now, and no reply to an older request revives it. */
            m->has = false;
            if (seq + 1 > m->seq_floor) {
                m->seq_floor = seq + 1;
            }
            continue;
        }
        if (seq < m->seq_floor) {
            continue;
        }
        if (!m->has || t_send > m->t_send) {
            m->t_send = t_send;
        }
        m->has = true;
    }
    return 0;
}

uint64_t ps_lease_holder_until(const struct ps_lease_holder *h,
                               uint64_t range_id)
{
    const struct ps_lhold_range *r = hrange_find(h, range_id);
    if (r == NULL || r->released) {
        return 0;
    }
    uint64_t until = PS_LEASE_FOREVER;
    for (size_t k = 0; k < r->n; k++) {
        if (!r->m[k].has) {
            return 0;
        }
        uint64_t end = r->m[k].t_send + h->dur;
        if (end < until) {
            until = end;
        }
    }
    return until;
}

bool ps_lease_holder_ok(const struct ps_lease_holder *h,
                        uint64_t range_id,
                        uint64_t now)
{
    return now < ps_lease_holder_until(h, range_id);
}

uint64_t ps_lease_holder_remaining(const struct ps_lease_holder *h,
                                   uint64_t range_id,
                                   uint64_t now)
{
    uint64_t until = ps_lease_holder_until(h, range_id);
    if (until == PS_LEASE_FOREVER) {
        return UINT64_MAX;
    }
    return now < until ? until - now : 0;
}

bool ps_lease_holder_expiring(const struct ps_lease_holder *h,
                              uint64_t range_id,
                              uint64_t now)
{
    return !ps_lease_holder_ok(h, range_id, now + PS_LEASE_NOLEASE_MS);
}

size_t ps_lease_holder_silent(const struct ps_lease_holder *h,
                              uint64_t range_id,
                              uint64_t now,
                              uint64_t *out,
                              size_t cap)
{
    const struct ps_lhold_range *r = hrange_find(h, range_id);
    size_t n = 0;
    for (size_t k = 0; r != NULL && k < r->n; k++) {
        const struct ps_lhold_member *m = &r->m[k];
        if (m->has && now + PS_LEASE_NOLEASE_MS < m->t_send + h->dur) {
            continue;
        }
        if (n < cap) {
            out[n] = m->peer;
        }
        n++;
    }
    return n;
}
