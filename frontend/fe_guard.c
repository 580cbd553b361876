/* The front end's rules against hostile clients (contract in fe_guard.h).
 *
 * The shared counters are two chained hash tables (client address ->
 * connections, account -> requests running) behind one mutex: each
 * operation is one lookup, far cheaper than the accept or the request it
 * guards, and a worker holds the lock for nothing else. An entry whose
 * count drops to zero is freed, so a scan from many addresses leaves
 * nothing behind. */
#include <netinet/in.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "fe_guard.h"
#include "rt_alloc.h"
#include "rt_err.h"

/* ---- Framing -------------------------------------------------------- */

void fe_guard_framing_init(struct fe_guard_framing *f)
{
    memset(f, 0, sizeof(*f));
}

static int fe__name_is(const char *name, size_t len, const char *want)
{
    return len == strlen(want) && strncasecmp(name, want, len) == 0;
}

void fe_guard_framing_add(struct fe_guard_framing *f,
                          const char *name,
                          size_t name_len,
                          const char *value,
                          size_t value_len)
{
    if (memchr(name, ' ', name_len) || memchr(name, '\t', name_len)) {
        f->name_ws = 1;
        return;
    }
    if (fe__name_is(name, name_len, "Content-Length")) {
        uint64_t v = 0;
        f->ncl++;
        /* RFC 9112 §6.3: Content-Length = 1*DIGIT. No sign, no list, no
         * whitespace inside; more than 19 digits may not fit. */
        if (value_len == 0 || value_len > 19) {
            f->cl_bad = 1;
            return;
        }
        for (size_t i = 0; i < value_len; i++) {
            if (value[i] < '0' || value[i] > '9') {
                f->cl_bad = 1;
                return;
            }
            v = v * 10 + (uint64_t)(value[i] - '0');
        }
        f->cl = v;
    } else if (fe__name_is(name, name_len, "Transfer-Encoding")) {
        f->nte++;
        if (!fe__name_is(value, value_len, "chunked")) {
            f->te_bad = 1;
        }
    }
}

int fe_guard_framing_check(const struct fe_guard_framing *f,
                           int http10,
                           const char **why)
{
    const char *w = NULL;
    if (f->name_ws) {
        w = "whitespace between a header name and its colon";
    } else if (f->nte && f->ncl) {
        w = "Transfer-Encoding and Content-Length together";
    } else if (f->ncl > 1) {
        w = "more than one Content-Length";
    } else if (f->cl_bad) {
        w = "Content-Length is not a decimal number";
    } else if (f->nte > 1 || f->te_bad) {
        w = "Transfer-Encoding other than chunked";
    } else if (f->nte && http10) {
        w = "Transfer-Encoding on an HTTP/1.0 request";
    }
    if (why) {
        *why = w;
    }
    return w ? RT_EHEADER : 0;
}

/* ---- Deadlines ------------------------------------------------------ */

uint64_t fe_guard_deadline(const struct fe_guard_cfg *cfg,
                           enum fe_guard_phase phase,
                           uint64_t since_ms,
                           uint64_t body_bytes)
{
    uint64_t bound;
    switch (phase) {
        case FE_GUARD_FRESH:
        case FE_GUARD_HEADERS:
            bound = cfg->header_timeout_ms;
            break;
        case FE_GUARD_IDLE:
            bound = cfg->idle_timeout_ms;
            break;
        case FE_GUARD_BODY:
            bound = cfg->body_timeout_ms;
            if (bound && cfg->body_min_rate) {
                bound +=
                    body_bytes / cfg->body_min_rate * 1000 +
                    body_bytes % cfg->body_min_rate * 1000 / cfg->body_min_rate;
            }
            break;
        default:
            return UINT64_MAX;
    }
    return bound ? since_ms + bound : UINT64_MAX;
}

/* ---- A worker's connections ----------------------------------------- */

void fe_guard_list_add(struct fe_guard_list *l,
                       struct fe_guard_conn *c,
                       uint64_t now_ms)
{
    c->phase = FE_GUARD_FRESH;
    c->since_ms = now_ms;
    c->body_bytes = 0;
    c->served = 0;
    c->closing = 0;
    c->next = NULL;
    c->prev = l->tail;
    if (l->tail) {
        l->tail->next = c;
    } else {
        l->head = c;
    }
    l->tail = c;
    l->n++;
}

void fe_guard_list_remove(struct fe_guard_list *l, struct fe_guard_conn *c)
{
    if (c->prev) {
        c->prev->next = c->next;
    } else {
        l->head = c->next;
    }
    if (c->next) {
        c->next->prev = c->prev;
    } else {
        l->tail = c->prev;
    }
    c->prev = c->next = NULL;
    l->n--;
}

void fe_guard_conn_phase(struct fe_guard_conn *c,
                         enum fe_guard_phase phase,
                         uint64_t now_ms)
{
    if (phase == FE_GUARD_HEADERS && c->phase == FE_GUARD_FRESH) {
        c->phase = phase; /* the first request's bound runs from accept */
        return;
    }
    if (phase == FE_GUARD_BODY) {
        c->body_bytes = 0;
    }
    if (phase == FE_GUARD_IDLE && c->phase != FE_GUARD_IDLE) {
        c->served++;
    }
    c->phase = phase;
    c->since_ms = now_ms;
}

unsigned fe_guard_list_sweep(struct fe_guard_list *l,
                             const struct fe_guard_cfg *cfg,
                             uint64_t now_ms,
                             void (*cb)(struct fe_guard_conn *c, void *arg),
                             void *arg)
{
    unsigned n = 0;
    for (struct fe_guard_conn *c = l->head; c; c = c->next) {
        if (c->closing) {
            continue;
        }
        if (now_ms >=
            fe_guard_deadline(cfg, c->phase, c->since_ms, c->body_bytes)) {
            cb(c, arg);
            n++;
        }
    }
    return n;
}

struct fe_guard_conn *fe_guard_list_victim(struct fe_guard_list *l,
                                           const struct fe_guard_conn *except)
{
    struct fe_guard_conn *idle = NULL;
    for (struct fe_guard_conn *c = l->head; c; c = c->next) {
        if (c == except || c->closing) {
            continue;
        }
        if (c->served == 0 &&
            (c->phase == FE_GUARD_FRESH || c->phase == FE_GUARD_HEADERS)) {
            return c;
        }
        if (!idle && c->phase == FE_GUARD_IDLE) {
            idle = c;
        }
    }
    return idle;
}

/* ---- Counters ------------------------------------------------------- */

#define FE_GUARD_BUCKETS 1024

struct fe__gent
{
    struct fe__gent *next;
    unsigned count;
    size_t klen;
    unsigned char key[];
};

struct fe__gtab
{
    struct fe__gent *b[FE_GUARD_BUCKETS];
};

struct fe_guard
{
    struct fe_guard_cfg cfg;
    pthread_mutex_t mu;
    unsigned conns;
    struct fe__gtab addrs;
    struct fe__gtab accts;
};

/* FNV-1a: the keys are short, and a flood from many addresses spreads
 * over the buckets well enough that a chain stays short. */
static unsigned fe__hash(const unsigned char *k, size_t n)
{
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++) {
        h = (h ^ k[i]) * 16777619u;
    }
    return h % FE_GUARD_BUCKETS;
}

/* The entry for @k, created with count 0 when @create; NULL otherwise. */
static struct fe__gent **fe__gtab_find(struct fe__gtab *t,
                                       const void *k,
                                       size_t n,
                                       int create)
{
    struct fe__gent **pp = &t->b[fe__hash(k, n)];
    for (; *pp; pp = &(*pp)->next) {
        if ((*pp)->klen == n && memcmp((*pp)->key, k, n) == 0) {
            return pp;
        }
    }
    if (!create) {
        return NULL;
    }
    *pp = rt_xcalloc(1, sizeof(**pp) + n);
    (*pp)->klen = n;
    memcpy((*pp)->key, k, n);
    return pp;
}

/* Drops one count of the entry at @pp, freeing it at zero. */
static void fe__gtab_dec(struct fe__gent **pp)
{
    struct fe__gent *e = *pp;
    if (e->count > 0) {
        e->count--;
    }
    if (e->count == 0) {
        *pp = e->next;
        free(e);
    }
}

static void fe__gtab_free(struct fe__gtab *t)
{
    for (size_t i = 0; i < FE_GUARD_BUCKETS; i++) {
        while (t->b[i]) {
            struct fe__gent *e = t->b[i];
            t->b[i] = e->next;
            free(e);
        }
    }
}

/* The bytes that identify a client address: the IP, not the port. */
static size_t fe__addr_key(const struct sockaddr *sa, unsigned char *k)
{
    if (sa && sa->sa_family == AF_INET) {
        k[0] = 4;
        memcpy(k + 1, &((const struct sockaddr_in *)sa)->sin_addr, 4);
        return 5;
    }
    if (sa && sa->sa_family == AF_INET6) {
        k[0] = 6;
        memcpy(k + 1, &((const struct sockaddr_in6 *)sa)->sin6_addr, 16);
        return 17;
    }
    k[0] = 0;
    return 1;
}

int fe_guard_create(const struct fe_guard_cfg *cfg, struct fe_guard **out)
{
    struct fe_guard *g = rt_xcalloc(1, sizeof(*g));
    g->cfg = *cfg;
    pthread_mutex_init(&g->mu, NULL);
    *out = g;
    return 0;
}

void fe_guard_destroy(struct fe_guard *g)
{
    if (!g) {
        return;
    }
    fe__gtab_free(&g->addrs);
    fe__gtab_free(&g->accts);
    pthread_mutex_destroy(&g->mu);
    free(g);
}

const struct fe_guard_cfg *fe_guard_get_cfg(const struct fe_guard *g)
{
    return &g->cfg;
}

/* Under g->mu: the refusal for one more connection from @k, or ADMIT. */
static int fe__conn_judge(struct fe_guard *g, const unsigned char *k, size_t n)
{
    if (g->cfg.max_conns && g->conns >= g->cfg.max_conns) {
        return FE_GUARD_REFUSE_ALL;
    }
    if (g->cfg.max_conns_per_ip) {
        struct fe__gent **pp = fe__gtab_find(&g->addrs, k, n, 0);
        if (pp && (*pp)->count >= g->cfg.max_conns_per_ip) {
            return FE_GUARD_REFUSE_ADDR;
        }
    }
    return FE_GUARD_ADMIT;
}

int fe_guard_conn_check(struct fe_guard *g, const struct sockaddr *addr)
{
    unsigned char k[17];
    size_t n = fe__addr_key(addr, k);
    int rc;
    pthread_mutex_lock(&g->mu);
    rc = fe__conn_judge(g, k, n);
    pthread_mutex_unlock(&g->mu);
    return rc;
}

int fe_guard_conn_open(struct fe_guard *g, const struct sockaddr *addr)
{
    unsigned char k[17];
    size_t n = fe__addr_key(addr, k);
    int rc;
    pthread_mutex_lock(&g->mu);
    rc = fe__conn_judge(g, k, n);
    if (rc == FE_GUARD_ADMIT) {
        (*fe__gtab_find(&g->addrs, k, n, 1))->count++;
        g->conns++;
        if (g->cfg.max_conns && g->cfg.reserve &&
            g->conns > g->cfg.max_conns - g->cfg.reserve) {
            rc = FE_GUARD_ADMIT_SHED;
        }
    }
    pthread_mutex_unlock(&g->mu);
    return rc;
}

void fe_guard_conn_close(struct fe_guard *g, const struct sockaddr *addr)
{
    unsigned char k[17];
    size_t n = fe__addr_key(addr, k);
    struct fe__gent **pp;
    pthread_mutex_lock(&g->mu);
    pp = fe__gtab_find(&g->addrs, k, n, 0);
    if (pp) {
        fe__gtab_dec(pp);
    }
    if (g->conns > 0) {
        g->conns--;
    }
    pthread_mutex_unlock(&g->mu);
}

unsigned fe_guard_conns(struct fe_guard *g)
{
    unsigned n;
    pthread_mutex_lock(&g->mu);
    n = g->conns;
    pthread_mutex_unlock(&g->mu);
    return n;
}

int fe_guard_acct_enter(struct fe_guard *g, const char *account)
{
    struct fe__gent *e;
    int rc = 0;
    if (!g->cfg.max_inflight_per_account) {
        return 0;
    }
    pthread_mutex_lock(&g->mu);
    e = *fe__gtab_find(&g->accts, account, strlen(account), 1);
    if (e->count >= g->cfg.max_inflight_per_account) {
        rc = RT_EBUSY; /* e->count > 0: the entry stays */
    } else {
        e->count++;
    }
    pthread_mutex_unlock(&g->mu);
    return rc;
}

void fe_guard_acct_exit(struct fe_guard *g, const char *account)
{
    struct fe__gent **pp;
    if (!g->cfg.max_inflight_per_account) {
        return;
    }
    pthread_mutex_lock(&g->mu);
    pp = fe__gtab_find(&g->accts, account, strlen(account), 0);
    if (pp) {
        fe__gtab_dec(pp);
    }
    pthread_mutex_unlock(&g->mu);
}
