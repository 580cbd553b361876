#include "rt_alloc.h"

#include <stdlib.h>
#include <string.h>

#include "rt_log.h"

static void rt__oom(size_t n)
{
    rt_log(RT_LOG_FATAL, "out of memory allocating %zu bytes", n);
    abort();
}

void *rt_xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p) {
        rt__oom(n);
    }
    return p;
}

void *rt_xcalloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (!p) {
        rt__oom(n * size);
    }
    return p;
}

void *rt_xrealloc(void *p, size_t n)
{
    void *q = realloc(p, n ? n : 1);
    if (!q) {
        rt__oom(n);
    }
    return q;
}

char *rt_xstrdup(const char *s)
{
    return rt_xstrndup(s ? s : "", s ? strlen(s) : 0);
}

char *rt_xstrndup(const char *s, size_t n)
{
    char *p = rt_xmalloc(n + 1);
    if (n) {
        memcpy(p, s, n);
    }
    p[n] = '\0';
    return p;
}

void *rt_xmemdup(const void *p, size_t n)
{
    void *q = rt_xmalloc(n);
    if (n) {
        memcpy(q, p, n);
    }
    return q;
}
