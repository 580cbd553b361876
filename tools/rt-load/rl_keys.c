#include "rl_keys.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* Zipfian */

static double rl__zeta_add(uint64_t from, uint64_t to, double theta, double acc)
{
    for (uint64_t i = from + 1; i <= to; i++) {
        acc += 1.0 / pow((double)i, theta);
    }
    return acc;
}

static void rl__zipf_eta(struct rl_zipf *z)
{
    z->eta = (1.0 - pow(2.0 / (double)z->n, 1.0 - z->theta)) /
             (1.0 - z->zeta2 / z->zetan);
}

void rl_zipf_init(struct rl_zipf *z, double theta, uint64_t n)
{
    if (n < 2) {
        n = 2;
    }
    z->theta = theta;
    z->alpha = 1.0 / (1.0 - theta);
    z->zeta2 = rl__zeta_add(0, 2, theta, 0);
    z->zetan = rl__zeta_add(0, n, theta, 0);
    z->n = n;
    rl__zipf_eta(z);
}

uint64_t rl_zipf_next(struct rl_zipf *z, struct rt_rng *r, uint64_t n)
{
    double u, uz;
    uint64_t v;
    if (n <= 1) {
        return 0;
    }
    if (n > z->n) {
        z->zetan = rl__zeta_add(z->n, n, z->theta, z->zetan);
        z->n = n;
        rl__zipf_eta(z);
    }
    /* (A shrinking n keeps the larger zeta: close enough, and rare.) */
    u = rt_rng_unit(r);
    uz = u * z->zetan;
    if (uz < 1.0) {
        return 0;
    }
    if (uz < 1.0 + pow(0.5, z->theta)) {
        return 1 < n ? 1 : 0;
    }
    v = (uint64_t)((double)z->n * pow(z->eta * u - z->eta + 1.0, z->alpha));
    return v < n ? v : n - 1;
}

/* Distributions */

void rl_dist_init(struct rl_dist *d,
                  const struct rl_dist_cfg *cfg,
                  uint64_t n_hint)
{
    memset(d, 0, sizeof(*d));
    d->cfg = *cfg;
    if (cfg->kind == RL_DIST_ZIPFIAN || cfg->kind == RL_DIST_LATEST) {
        rl_zipf_init(&d->zipf, cfg->theta, n_hint);
    }
}

uint64_t rl_dist_pick(struct rl_dist *d,
                      struct rt_rng *r,
                      uint64_t n,
                      double elapsed_s)
{
    if (n == 0) {
        return 0;
    }
    switch (d->cfg.kind) {
        case RL_DIST_UNIFORM:
            return rt_rng_below(r, n);
        case RL_DIST_ZIPFIAN:
            return rl_zipf_next(&d->zipf, r, n);
        case RL_DIST_LATEST:
            return n - 1 - rl_zipf_next(&d->zipf, r, n);
        case RL_DIST_SEQ_ASC:
            return d->seq++ % n;
        case RL_DIST_SEQ_DESC:
            return n - 1 - d->seq++ % n;
        case RL_DIST_HOTSET: {
            uint64_t hot = (uint64_t)(d->cfg.hot_fraction * (double)n);
            uint64_t win;
            if (hot < 1) {
                hot = 1;
            }
            if (hot >= n || rt_rng_unit(r) >= d->cfg.hot_prob) {
                return rt_rng_below(r, n);
            }
            win = d->cfg.hot_period_s > 0
                      ? (uint64_t)(elapsed_s / d->cfg.hot_period_s)
                      : 0;
            return (win * hot + rt_rng_below(r, hot)) % n;
        }
        case RL_DIST__NR:
            break;
    }
    return 0;
}

/* Keys */

size_t rl_pk_width(const struct rl_keymap *m)
{
    return m->pk_scheme == RL_KEY_HASH ? 17 : 14;
}

size_t rl_rk_width(const struct rl_keymap *m)
{
    return m->rk_scheme == RL_KEY_HASH ? 17 : 14;
}

static void rl__dec13(char *out, char prefix, uint64_t v)
{
    out[0] = prefix;
    for (int i = 13; i >= 1; i--) {
        out[i] = (char)('0' + v % 10);
        v /= 10;
    }
    out[14] = '\0';
}

static void rl__hex16(char *out, char prefix, uint64_t v)
{
    static const char hx[] = "0123456789abcdef";
    out[0] = prefix;
    for (int i = 16; i >= 1; i--) {
        out[i] = hx[v & 15];
        v >>= 4;
    }
    out[17] = '\0';
}

void rl_pk_of_index(const struct rl_keymap *m, uint64_t pki, char *pk)
{
    if (m->pk_scheme == RL_KEY_HASH) {
        rl__hex16(pk, 'p', rt_mix64(pki ^ 0x5eedULL));
    } else {
        rl__dec13(pk, 'p', pki);
    }
}

uint64_t rl_pk_index_of(const struct rl_keymap *m, int64_t id)
{
    uint64_t u = (uint64_t)(id + RL_ID_OFFSET);
    return m->partitions ? u % m->partitions : u;
}

void rl_key_of(const struct rl_keymap *m, int64_t id, char *pk, char *rk)
{
    uint64_t u = (uint64_t)(id + RL_ID_OFFSET);
    uint64_t pki = m->partitions ? u % m->partitions : u;
    uint64_t row = m->partitions ? u / m->partitions : 0;
    rl_pk_of_index(m, pki, pk);
    switch (m->rk_scheme) {
        case RL_KEY_HASH:
            rl__hex16(rk, 'r', rt_mix64(row ^ 0x7a11ULL));
            break;
        case RL_KEY_REV:
            rl__dec13(rk, 'r', 9999999999999ULL - row % 10000000000000ULL);
            break;
        case RL_KEY_SEQ:
            rl__dec13(rk, 'r', row);
            break;
    }
}

void rl_batch_rk(uint64_t n, char *rk)
{
    rl__dec13(rk, 'b', n);
}
