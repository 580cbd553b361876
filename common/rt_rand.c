#include "rt_rand.h"

uint64_t rt_mix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

void rt_rng_seed(struct rt_rng *r, uint64_t seed)
{
    for (int i = 0; i < 4; i++) {
        seed = rt_mix64(seed + (uint64_t)i);
        r->s[i] = seed ? seed : 1;
    }
}

void rt_rng_seed_bytes(struct rt_rng *r, const uint64_t s[4])
{
    for (int i = 0; i < 4; i++) {
        r->s[i] = s[i];
    }
    r->s[0] |= 1; /* xoshiro's one bad state is all zero */
}

static inline uint64_t rt__rotl(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

uint64_t rt_rng_next(struct rt_rng *r)
{
    uint64_t *s = r->s;
    uint64_t res = rt__rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rt__rotl(s[3], 45);
    return res;
}

uint64_t rt_rng_below(struct rt_rng *r, uint64_t n)
{
    /* Lemire's multiply-shift; bias < n / 2^64. */
    return (uint64_t)(((unsigned __int128)rt_rng_next(r) * n) >> 64);
}

double rt_rng_unit(struct rt_rng *r)
{
    return (double)(rt_rng_next(r) >> 11) * (1.0 / 9007199254740992.0);
}
