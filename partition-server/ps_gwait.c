/* Group-commit wait policy: the rule of ps_gwait.h and its back-off. */
#include "ps_gwait.h"

#include <string.h>

void ps_gwait_init(struct ps_gwait *g)
{
    memset(g, 0, sizeof(*g));
}

uint64_t ps_gwait_decide(struct ps_gwait *g,
                         const struct ps_gwait_in *in,
                         size_t *target_ops)
{
    uint64_t bound;
    size_t target;

    if (in->max_us == 0 || in->queued_other || in->queued_ops == 0 ||
        in->last_sync_us == 0 || in->queued_ops >= PS_GWAIT_DEEP) {
        return 0;
    }
    target = in->expect_ops < PS_GWAIT_DEEP ? in->expect_ops : PS_GWAIT_DEEP;
    if (in->queued_ops >= target) {
        return 0;
    }
    bound = in->last_sync_us / 2;
    if (bound > in->max_us) {
        bound = in->max_us;
    }
    if (in->since_sync_us >= bound) {
        return 0;
    }
    if (g->skip > 0) {
        g->skip--;
        return 0;
    }
    *target_ops = target;
    return bound - in->since_sync_us;
}

int ps_gwait_done(struct ps_gwait *g,
                  const struct ps_gwait_in *in,
                  size_t gained_ops,
                  uint64_t waited_us)
{
    /* gained / waited >= last_group_ops / last_sync_us, without division. */
    if ((uint64_t)gained_ops * in->last_sync_us >=
        waited_us * (uint64_t)in->last_group_ops) {
        g->backoff = 0;
        g->skip = 0;
        return 1;
    }
    g->backoff = g->backoff == 0 ? 1 : g->backoff * 2;
    if (g->backoff > PS_GWAIT_MAX_SKIP) {
        g->backoff = PS_GWAIT_MAX_SKIP;
    }
    g->skip = g->backoff;
    return 0;
}
