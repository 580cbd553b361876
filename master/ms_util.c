#include "ms_util.h"

#include <stdlib.h>
#include <string.h>

#include "rt_alloc.h"

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
        vec->v = rt_xrealloc(vec->v, vec->cap * sizeof(*vec->v));
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
