/* Allocation that never returns NULL.
 *
 * Every daemon follows one policy: a process that cannot allocate a few
 * hundred bytes cannot keep any promise it makes, so it logs and aborts,
 * and a restart recovers from the durable state in LMDB (crash-only, as
 * the kill -9 fault runs exercise). rt_buf follows the same policy.
 * Large or client-sized allocations that should fail softly (a 4 MiB
 * batch body, say) check their size before asking.
 *
 * Thread: all functions are thread-safe. Memory comes from malloc and is
 * released with free(). A zero size allocates one byte, so the result is
 * always a unique non-NULL pointer. */
#ifndef RT_ALLOC_H
#define RT_ALLOC_H

#include <stddef.h>

void *rt_xmalloc(size_t n);
void *rt_xcalloc(size_t n, size_t size);
/* Like realloc(); @p may be NULL. */
void *rt_xrealloc(void *p, size_t n);
/* A copy of @s (NULL is copied as ""). */
char *rt_xstrdup(const char *s);
/* A NUL-terminated copy of the first @n bytes of @s (which may hold NULs
 * or lack a terminator). */
char *rt_xstrndup(const char *s, size_t n);
/* A copy of @n bytes of @p. */
void *rt_xmemdup(const void *p, size_t n);

#endif
