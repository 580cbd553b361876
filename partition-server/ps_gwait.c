/* Group-commit wait policy: the rule of ps_gwait.h, nothing else. */
#include "ps_gwait.h"

uint64_t ps_gwait_decide(const struct ps_gwait_in *in, size_t *target_ops)
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
    *target_ops = target;
    return bound - in->since_sync_us;
}
