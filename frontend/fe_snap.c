/* Shared map snapshots: see fe_snap.h. */
#include "fe_snap.h"

void *fe_snap_install(struct fe_snap *s, void *v, uint64_t version)
{
    void *old;
    pthread_rwlock_wrlock(&s->lock);
    if (s->cur && version < s->version) {
        old = v; /* keep the newer value, drop this one */
    } else {
        old = s->cur;
        s->cur = v;
        s->version = version;
    }
    pthread_rwlock_unlock(&s->lock);
    return old;
}

void *fe_snap_take(struct fe_snap *s)
{
    void *old;
    pthread_rwlock_wrlock(&s->lock);
    old = s->cur;
    s->cur = NULL;
    s->version = 0;
    pthread_rwlock_unlock(&s->lock);
    return old;
}

const void *fe_snap_read(struct fe_snap *s)
{
    pthread_rwlock_rdlock(&s->lock);
    return s->cur;
}

void fe_snap_read_end(struct fe_snap *s)
{
    pthread_rwlock_unlock(&s->lock);
}
