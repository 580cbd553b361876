/* The default policy ("fewest-ranges"). */
#include "ms_policy.h"

static uint64_t ms__fewest_place(void *state,
                                 const struct ms_cluster_view *view)
{
    const struct ms_server_view *best = NULL;
    (void)state;
    for (size_t i = 0; i < view->nservers; i++) {
        const struct ms_server_view *s = &view->servers[i];
        if (!s->up) {
            continue;
        }
        if (!best || s->nranges < best->nranges ||
            (s->nranges == best->nranges && s->id < best->id)) {
            best = s;
        }
    }
    return best ? best->id : 0;
}

static const struct ms_policy_ops ms__fewest_ops = {
    .name = "fewest-ranges",
    .place = ms__fewest_place,
};

struct ms_policy ms_policy_default(void)
{
    struct ms_policy p = {&ms__fewest_ops, NULL};
    return p;
}
