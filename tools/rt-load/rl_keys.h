/* Keys for rt-load: a random generator, the key distributions (uniform,
 * zipfian, latest, sequential ascending/descending, moving hot set) and the
 * mapping from an entity id to its PartitionKey and RowKey.
 *
 * Entity ids are 64-bit integers; the keys of an entity are a pure function
 * of its id (so any worker can read what another inserted):
 *   u = id + RL_ID_OFFSET (descending inserts use negative ids)
 *   partitions P >= 1: pk index = u mod P, row = u div P
 *   partitions P == 0: pk index = u (one PartitionKey per entity), row = 0
 * PartitionKey = "p" + 13 decimal digits (scheme seq: key order = id order)
 *              or "p" + 16 hex digits of a 64-bit mix (scheme hash: spread)
 * RowKey       = "r" + 13 digits (seq), "r" + 16 hex (hash), or
 *                "r" + 13 digits of (10^13 - 1 - row) (rev: newest first).
 * Every key is made of [a-z0-9], so it needs no escaping anywhere, and its
 * width is fixed per scheme.
 * Thread: struct rl_dist and struct rt_rng belong to one thread. */
#ifndef RL_KEYS_H
#define RL_KEYS_H

#include <stddef.h>
#include <stdint.h>

#include "rt_rand.h"

#define RL_ID_OFFSET 1000000000000LL /* 10^12 */
#define RL_KEY_MAX 24

enum rl_dist_kind {
    RL_DIST_UNIFORM,
    RL_DIST_ZIPFIAN,
    RL_DIST_LATEST,
    RL_DIST_SEQ_ASC,
    RL_DIST_SEQ_DESC,
    RL_DIST_HOTSET,
    RL_DIST__NR
};

struct rl_dist_cfg
{
    enum rl_dist_kind kind;
    double theta;        /* zipfian/latest, in (0, 1) */
    double hot_fraction; /* hotset: share of the keys that are hot */
    double hot_prob;     /* hotset: share of the requests going to them */
    double hot_period_s; /* hotset: the hot set moves every this many s */
};

/* Zipfian over ranks [0, n), Gray et al. / YCSB "ZipfianGenerator": rank 0
 * is the most popular. n may grow between calls (zeta is extended
 * incrementally, O(1) amortised per new item). */
struct rl_zipf
{
    double theta, alpha, zeta2, zetan, eta;
    uint64_t n;
};

void rl_zipf_init(struct rl_zipf *z, double theta, uint64_t n);
uint64_t rl_zipf_next(struct rl_zipf *z, struct rt_rng *r, uint64_t n);

struct rl_dist
{
    struct rl_dist_cfg cfg;
    struct rl_zipf zipf;
    uint64_t seq; /* sequential cursor */
};

void rl_dist_init(struct rl_dist *d,
                  const struct rl_dist_cfg *cfg,
                  uint64_t n_hint);
/* Picks an offset in [0, n) of an existing key (n > 0): 0 is the lowest
 * id. @elapsed_s drives the hot set's moves. */
uint64_t rl_dist_pick(struct rl_dist *d,
                      struct rt_rng *r,
                      uint64_t n,
                      double elapsed_s);

enum rl_key_scheme { RL_KEY_SEQ, RL_KEY_HASH, RL_KEY_REV };

struct rl_keymap
{
    uint64_t partitions;          /* 0 = one PartitionKey per entity */
    enum rl_key_scheme pk_scheme; /* SEQ or HASH */
    enum rl_key_scheme rk_scheme;
};

/* Fixed widths of the two keys under @m. */
size_t rl_pk_width(const struct rl_keymap *m);
size_t rl_rk_width(const struct rl_keymap *m);
/* Writes the keys of entity @id (NUL-terminated, RL_KEY_MAX bytes each).
 * Returns nothing: the widths are rl_pk_width/rl_rk_width. */
void rl_key_of(const struct rl_keymap *m, int64_t id, char *pk, char *rk);
/* PartitionKey of pk index @pki (for batches and partition scans). */
void rl_pk_of_index(const struct rl_keymap *m, uint64_t pki, char *pk);
uint64_t rl_pk_index_of(const struct rl_keymap *m, int64_t id);
/* RowKey of batch row @n: "b" + 13 digits (batches have their own row
 * namespace inside the normal partitions). */
void rl_batch_rk(uint64_t n, char *rk);

#endif
