/* LMDB result codes -> RT_E*: the one place where they are translated
 * (STYLE.md §4, "translate at the boundary, once"). Both stores that use
 * LMDB, the partition server's and the master's catalog, call this, so a
 * full disk or an oversized transaction means the same thing everywhere:
 *
 *   MDB_SUCCESS                  0
 *   MDB_NOTFOUND                 RT_ENOTFOUND
 *   MDB_MAP_FULL, ENOSPC         RT_ENOSPACE   (storage full; the map size
 *                                               or the disk: the same to a
 *                                               client, 500 InternalError)
 *   MDB_TXN_FULL                 RT_ETOOLARGE  (one transaction dirtied more
 *                                               pages than LMDB allows: the
 *                                               request is too large, 413)
 *   MDB_BAD_VALSIZE              RT_EOUTOFRANGE
 *   MDB_READERS_FULL             RT_EBUSY      (retryable: 503 ServerBusy)
 *   MDB_CORRUPTED, _PAGE_NOTFOUND,
 *   _INVALID, _VERSION_MISMATCH  RT_ECORRUPT
 *   ENOMEM                       RT_ENOMEM
 *   anything else                RT_EIO
 *
 * Thread: pure function. */
#ifndef RT_LMDB_H
#define RT_LMDB_H

int rt_lmdb_err(int mdb_rc);

#endif
