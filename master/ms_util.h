/* A growable array of pointers, used by the master's modules for their
 * lists (catalog tables and ranges, servers, operations). Memory comes from
 * rt_xrealloc (common/rt_alloc.h): growing never fails, it aborts.
 * Thread: no shared state; each vector belongs to its owner. */
#ifndef MS_UTIL_H
#define MS_UTIL_H

#include <stddef.h>

/* Growable array of pointers; the items are owned by whoever fills it.
 * Zero-initialise to get an empty vector. */
struct ms_vec
{
    void **v;
    size_t n;
    size_t cap;
};

void ms_vec_free(struct ms_vec *vec); /* frees the array, not the items */
/* Inserts @item at index @i (0 <= @i <= n), shifting the rest up. */
void ms_vec_insert(struct ms_vec *vec, size_t i, void *item);
void ms_vec_push(struct ms_vec *vec, void *item);
/* Removes and returns item @i. */
void *ms_vec_remove(struct ms_vec *vec, size_t i);

#endif
