/* Small helpers shared by the master's modules: allocation that aborts on
 * failure (the rt_buf policy: a master that cannot allocate small buffers
 * cannot serve anyway) and a growable array of pointers.
 * Thread: no shared state; each vector belongs to its owner. */
#ifndef MS_UTIL_H
#define MS_UTIL_H

#include <stddef.h>
#include <stdint.h>

void *ms_xmalloc(size_t n);
void *ms_xcalloc(size_t n, size_t size);
void *ms_xrealloc(void *p, size_t n);
char *ms_xstrdup(const char *s);

/* Growable array of pointers; the items are owned by whoever fills it. */
struct ms_vec
{
    void **v;
    size_t n;
    size_t cap;
};

void ms_vec_free(struct ms_vec *vec); /* frees the array, not the items */
void ms_vec_insert(struct ms_vec *vec, size_t i, void *item);
void ms_vec_push(struct ms_vec *vec, void *item);
/* Removes and returns item @i. */
void *ms_vec_remove(struct ms_vec *vec, size_t i);

/* Monotonic milliseconds (uv_hrtime), for liveness and timeouts. */
uint64_t ms_now_ms(void);

#endif
