/* A value the workers share that is rebuilt whole from each partition map
 * (the stored access policies of fe_acl, the CORS rules of fe_cors): one
 * worker at a time installs a new value, readers use the current one
 * under a read lock. Every worker's fe_route installs the maps it
 * receives, at slightly different times, so a value built from an older
 * map never replaces one built from a newer map; equal versions replace
 * (the same map).
 *
 * Thread: any. A value belongs to the snapshot once installed; the caller
 * frees what fe_snap_install and fe_snap_take hand back. */
#ifndef FE_SNAP_H
#define FE_SNAP_H

#include <pthread.h>
#include <stdint.h>

struct fe_snap
{
    pthread_rwlock_t lock;
    void *cur;        /* NULL until the first install */
    uint64_t version; /* of the map @cur was built from */
};
#define FE_SNAP_INIT                        \
    {                                       \
        PTHREAD_RWLOCK_INITIALIZER, NULL, 0 \
    }

/* Installs @v, built from map @version (taken). Returns what the caller
 * must free: the value it replaced (NULL if none), or @v itself when the
 * current value comes from a newer map. */
void *fe_snap_install(struct fe_snap *s, void *v, uint64_t version);
/* Removes the current value and returns it (shutdown, tests). */
void *fe_snap_take(struct fe_snap *s);
/* Takes the read lock and returns the current value (NULL if none); it is
 * valid until fe_snap_read_end, which must follow on the same thread. */
const void *fe_snap_read(struct fe_snap *s);
void fe_snap_read_end(struct fe_snap *s);

#endif
