#include "rt_lmdb.h"

#include <errno.h>
#include <lmdb.h>

#include "rt_err.h"

int rt_lmdb_err(int mdb_rc)
{
    switch (mdb_rc) {
        case MDB_SUCCESS:
            return 0;
        case MDB_NOTFOUND:
            return RT_ENOTFOUND;
        case MDB_MAP_FULL:
        case ENOSPC:
            return RT_ENOSPACE;
        case MDB_TXN_FULL:
            return RT_ETOOLARGE;
        case MDB_BAD_VALSIZE:
            return RT_EOUTOFRANGE;
        case MDB_READERS_FULL:
            return RT_EBUSY;
        case MDB_CORRUPTED:
        case MDB_PAGE_NOTFOUND:
        case MDB_INVALID:
        case MDB_VERSION_MISMATCH:
            return RT_ECORRUPT;
        case ENOMEM:
            return RT_ENOMEM;
        default:
            return RT_EIO;
    }
}
