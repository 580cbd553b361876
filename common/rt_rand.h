/* Fast non-cryptographic random numbers: xoshiro256** (Blackman and Vigna)
 * and the splitmix64 finaliser. For request ids, sampling and generated
 * load; never for keys, signatures or anything an attacker must not guess
 * (those use OpenSSL's RAND_bytes).
 *
 * Thread: a struct rt_rng belongs to one thread; the functions keep no
 * other state. */
#ifndef RT_RAND_H
#define RT_RAND_H

#include <stdint.h>

struct rt_rng
{
    uint64_t s[4]; /* never all zero */
};

/* Seeds @r from one 64-bit value (the same seed gives the same stream). */
void rt_rng_seed(struct rt_rng *r, uint64_t seed);
/* Seeds @r from 32 bytes (e.g. from RAND_bytes); fixes an all-zero state. */
void rt_rng_seed_bytes(struct rt_rng *r, const uint64_t s[4]);
uint64_t rt_rng_next(struct rt_rng *r);
/* Uniform in [0, n) (n > 0), without modulo bias worth noticing. */
uint64_t rt_rng_below(struct rt_rng *r, uint64_t n);
/* Uniform double in [0, 1). */
double rt_rng_unit(struct rt_rng *r);
/* splitmix64's finaliser: a well-spread 64-bit hash of @x. */
uint64_t rt_mix64(uint64_t x);

#endif
