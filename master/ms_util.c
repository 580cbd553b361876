#include "ms_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <uv.h>

static void ms__oom(size_t n)
{
    fprintf(stderr, "rt-master: out of memory allocating %zu bytes\n", n);
    abort();
}

void *ms_xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p) {
        ms__oom(n);
    }
    return p;
}

void *ms_xcalloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (!p) {
        ms__oom(n * size);
    }
    return p;
}

void *ms_xrealloc(void *p, size_t n)
{
    void *q = realloc(p, n ? n : 1);
    if (!q) {
        ms__oom(n);
    }
    return q;
}

char *ms_xstrdup(const char *s)
{
    size_t n = strlen(s) + 1;
    char *p = ms_xmalloc(n);
    memcpy(p, s, n);
    return p;
}

void ms_vec_free(struct ms_vec *vec)
{
    free(vec->v);
    vec->v = NULL;
    vec->n = vec->cap = 0;
}

void ms_vec_insert(struct ms_vec *vec, size_t i, void *item)
{
    if (vec->n == vec->cap) {
        vec->cap = vec->cap ? vec->cap * 2 : 16;
        vec->v = ms_xrealloc(vec->v, vec->cap * sizeof(*vec->v));
    }
    memmove(&vec->v[i + 1], &vec->v[i], (vec->n - i) * sizeof(*vec->v));
    vec->v[i] = item;
    vec->n++;
}

void ms_vec_push(struct ms_vec *vec, void *item)
{
    ms_vec_insert(vec, vec->n, item);
}

void *ms_vec_remove(struct ms_vec *vec, size_t i)
{
    void *item = vec->v[i];
    memmove(&vec->v[i], &vec->v[i + 1], (vec->n - i - 1) * sizeof(*vec->v));
    vec->n--;
    return item;
}

uint64_t ms_now_ms(void)
{
    return uv_hrtime() / 1000000u;
}
