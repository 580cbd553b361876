/* A growable array of pointers, used by the master's modules for their
 * lists (catalog tables and ranges, servers, operations), and the one
 * binary search over such a list kept sorted; the wall clock in
 * milliseconds; bytes as hex for logs and JSON. Memory comes from
 * rt_xrealloc (common/rt_alloc.h): growing never fails, it aborts.
 * Thread: no shared state; each vector belongs to its owner. */
#ifndef MS_UTIL_H
#define MS_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

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

/* Binary search in a sorted vector: the first index whose item does not
 * sort before @key (n when none). @cmp(item, key) is < 0 when the item
 * sorts before the key. */
size_t ms_vec_lower_bound_by(const struct ms_vec *vec,
                             int (*cmp)(const void *item, const void *key),
                             const void *key);

/* Vectors kept sorted by a uint64_t key that every item holds at byte
 * offset @key_off (offsetof(struct x, id)). */
/* The first index whose item's key is >= @key (n when none). */
size_t ms_vec_lower_bound(const struct ms_vec *vec,
                          size_t key_off,
                          uint64_t key);
/* The item whose key is @key, or NULL. *@at (may be NULL) gets its index,
 * or where an item with @key goes (for ms_vec_insert()). */
void *ms_vec_find(const struct ms_vec *vec,
                  size_t key_off,
                  uint64_t key,
                  size_t *at);
/* The item whose key is @key; when there is none, a new zeroed item of
 * @size bytes (rt_xcalloc: owned by whoever owns the items) holding @key
 * is inserted in its place and *@created (may be NULL) is set. */
void *ms_vec_get(struct ms_vec *vec,
                 size_t key_off,
                 uint64_t key,
                 size_t size,
                 bool *created);

/* Wall-clock milliseconds since the Unix epoch (CLOCK_REALTIME). */
uint64_t ms_unix_ms(void);

/* Writes @n bytes of @b as lower-case hex plus a NUL into @out (2n + 1
 * bytes). Returns @out. */
char *ms_hex(const uint8_t *b, size_t n, char *out);

/* mkdir -p @dir (mode 0755 for what it creates): 0 or -1 with errno. */
int ms_mkdir_p(const char *dir);

#endif
