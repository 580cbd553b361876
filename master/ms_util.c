#include "ms_util.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "rt_alloc.h"

uint64_t ms_unix_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
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

static uint64_t ms__vec_key(const struct ms_vec *vec, size_t i, size_t key_off)
{
    uint64_t key;
    memcpy(&key, (const char *)vec->v[i] + key_off, sizeof(key));
    return key;
}

size_t ms_vec_lower_bound_by(const struct ms_vec *vec,
                             int (*cmp)(const void *item, const void *key),
                             const void *key)
{
    size_t lo = 0, hi = vec->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (cmp(vec->v[mid], key) < 0) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    return lo;
}

struct ms__u64_key
{
    size_t off;
    uint64_t key;
};

static int ms__u64_cmp(const void *item, const void *key)
{
    const struct ms__u64_key *k = key;
    uint64_t v;
    memcpy(&v, (const char *)item + k->off, sizeof(v));
    return v < k->key ? -1 : v > k->key;
}

size_t ms_vec_lower_bound(const struct ms_vec *vec,
                          size_t key_off,
                          uint64_t key)
{
    const struct ms__u64_key k = {key_off, key};
    return ms_vec_lower_bound_by(vec, ms__u64_cmp, &k);
}

void *ms_vec_find(const struct ms_vec *vec,
                  size_t key_off,
                  uint64_t key,
                  size_t *at)
{
    size_t i = ms_vec_lower_bound(vec, key_off, key);
    if (at) {
        *at = i;
    }
    return i < vec->n && ms__vec_key(vec, i, key_off) == key ? vec->v[i] : NULL;
}

void *ms_vec_get(struct ms_vec *vec,
                 size_t key_off,
                 uint64_t key,
                 size_t size,
                 bool *created)
{
    size_t i;
    void *item = ms_vec_find(vec, key_off, key, &i);
    if (created) {
        *created = !item;
    }
    if (!item) {
        item = rt_xcalloc(1, size);
        memcpy((char *)item + key_off, &key, sizeof(key));
        ms_vec_insert(vec, i, item);
    }
    return item;
}

void *ms_vec_remove(struct ms_vec *vec, size_t i)
{
    void *item = vec->v[i];
    memmove(&vec->v[i], &vec->v[i + 1], (vec->n - i - 1) * sizeof(*vec->v));
    vec->n--;
    return item;
}

char *ms_hex(const uint8_t *b, size_t n, char *out)
{
    static const char digits[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = digits[b[i] >> 4];
        out[2 * i + 1] = digits[b[i] & 15];
    }
    out[2 * n] = '\0';
    return out;
}

int ms_mkdir_p(const char *dir)
{
    char path[4096];
    size_t n = strlen(dir);
    if (n == 0 || n >= sizeof(path)) {
        errno = EINVAL;
        return -1;
    }
    memcpy(path, dir, n + 1);
    for (char *p = path + 1; *p; p++) {
        if (*p == '/') {
            *p = '\0';
            if (mkdir(path, 0755) != 0 && errno != EEXIST) {
                return -1;
            }
            *p = '/';
        }
    }
    if (mkdir(path, 0755) != 0 && errno != EEXIST) {
        return -1;
    }
    return 0;
}
