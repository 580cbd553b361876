/* Test helpers: a partition server's LMDB environment touched with plain
 * LMDB calls while the server (or its store) is closed, to plant damage a
 * real disk could cause. Keys are storage keys (rt_key_entity).
 *
 * Each call opens the environment in @dir, does its one transaction and
 * closes it. Returns 0 or an LMDB error code (MDB_NOTFOUND for a missing
 * key). Thread: any; the environment must not be open elsewhere in this
 * process. */
#ifndef TH_LMDB_H
#define TH_LMDB_H

#include <stddef.h>
#include <stdint.h>

#include "rt_buf.h"

/* Reads the record @key of database @db into @out (replacing its
 * contents). */
int th_lmdb_get(const char *dir,
                const char *db,
                const void *key,
                size_t klen,
                struct rt_buf *out);

/* Stores @val (@vlen bytes) under @key in database @db. */
int th_lmdb_put(const char *dir,
                const char *db,
                const void *key,
                size_t klen,
                const void *val,
                size_t vlen);

/* XORs byte @at of the record @key (from the end when negative) with
 * @mask, in place. */
int th_lmdb_flip(const char *dir,
                 const char *db,
                 const void *key,
                 size_t klen,
                 long at,
                 uint8_t mask);

#endif
