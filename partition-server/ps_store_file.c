/* Store start-up check of DIR/data.mdb (docs/DESIGN-replication.md §5.6,
 * last bullet): before LMDB maps the file, read its two meta pages with
 * pread and refuse a file shorter than the pages its newer meta says are
 * in use. LMDB itself would map the short file and the process would die
 * with SIGBUS at the first access past its end, possibly long after
 * start; this turns that into a clear message and exit status 2.
 *
 * LMDB's on-disk meta is not public API (liblmdb mdb.c, LMDB 0.9, the
 * version Debian 12 ships), so the layout is spelled out here and kept to
 * the fields we need; tests/unit/test_ps_crc.c compares what this file
 * reads with mdb_env_info()/mdb_env_stat() on a real environment, so a
 * layout change fails that test, not a production start. With P =
 * sizeof(size_t) (pgno_t, txnid_t and pointers are all P bytes; all
 * integers native-endian):
 *
 *   page i (i = 0, 1) at file offset i * psize, header (MDB_page):
 *     pgno_t p_pgno (= i) ‖ u16 pad ‖ u16 mp_flags (P_META 0x08) ‖ u32
 *     -> the meta (MDB_meta) starts at PAGEHDRSZ = P + 8:
 *     u32 mm_magic (0xBEEFC0DE) ‖ u32 mm_version (1) ‖ void *mm_address ‖
 *     size_t mm_mapsize ‖ MDB_db mm_dbs[2] ‖ pgno_t mm_last_pg ‖
 *     txnid_t mm_txnid
 *   MDB_db = u32 md_pad ‖ u16 flags ‖ u16 depth ‖ 5 × P bytes, 8 + 5P;
 *   mm_dbs[0].md_pad is the page size (mm_psize).
 *
 * So mm_last_pg is at meta offset 8 + 2P + 2(8 + 5P) = 24 + 12P, txnid P
 * bytes later, psize at 8 + 2P. LMDB refuses an environment whose metas
 * do not both carry the magic and version, and uses the one with the
 * larger txnid; so do we. Thread: any, before the environment is open. */
#include "ps_store.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "rt_err.h"

#define PS_MDB_MAGIC 0xBEEFC0DEu
#define PS_MDB_VERSION 1u
#define PS_MDB_P_META 0x08u
#define PS_MDB_P sizeof(size_t)
#define PS_MDB_PAGEHDR (PS_MDB_P + 8)
#define PS_MDB_OFF_PSIZE (8 + 2 * PS_MDB_P)
#define PS_MDB_OFF_LAST (24 + 12 * PS_MDB_P)
#define PS_MDB_OFF_TXNID (PS_MDB_OFF_LAST + PS_MDB_P)
/* Page header and meta, up to and including mm_txnid. */
#define PS_MDB_HEAD (PS_MDB_PAGEHDR + PS_MDB_OFF_TXNID + PS_MDB_P)

/* A P-byte native integer (pgno_t, txnid_t) at @p. */
static uint64_t ps__mdb_word(const uint8_t *p)
{
    size_t v;
    memcpy(&v, p, sizeof(v));
    return (uint64_t)v;
}

static uint32_t ps__mdb_u32(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, sizeof(v));
    return v;
}

static uint16_t ps__mdb_u16(const uint8_t *p)
{
    uint16_t v;
    memcpy(&v, p, sizeof(v));
    return v;
}

/* Reads meta page @i at @off of @fd into @m; returns NULL or what is
 * wrong with it. */
static const char *ps__mdb_meta(int fd,
                                int i,
                                off_t off,
                                struct ps_store_file *m)
{
    uint8_t b[PS_MDB_HEAD];
    const uint8_t *mm = b + PS_MDB_PAGEHDR;
    ssize_t n;

    do {
        n = pread(fd, b, sizeof(b), off);
    } while (n < 0 && errno == EINTR);
    if (n != (ssize_t)sizeof(b)) {
        return "a meta page is cut short";
    }
    if (ps__mdb_u32(mm) != PS_MDB_MAGIC) {
        return "bad magic in a meta page";
    }
    if (ps__mdb_u32(mm + 4) != PS_MDB_VERSION) {
        return "unknown LMDB data version in a meta page";
    }
    if (ps__mdb_word(b) != (uint64_t)i ||
        !(ps__mdb_u16(b + PS_MDB_P + 2) & PS_MDB_P_META)) {
        return "a meta page has a bad page header";
    }
    m->psize = ps__mdb_u32(mm + PS_MDB_OFF_PSIZE);
    m->last_pg = ps__mdb_word(mm + PS_MDB_OFF_LAST);
    m->txnid = ps__mdb_word(mm + PS_MDB_OFF_TXNID);
    if (m->psize < 512 || m->psize > 65536 || (m->psize & (m->psize - 1))) {
        return "a meta page has a bad page size";
    }
    return NULL;
}

int ps_store_file_check(const char *dir,
                        struct ps_store_file *info,
                        char *errmsg)
{
    char path[4096];
    struct ps_store_file m[2];
    const struct ps_store_file *newer;
    const char *why = NULL;
    struct stat st;
    uint64_t need;
    int fd, rc = 0;

    snprintf(path, sizeof(path), "%s/data.mdb", dir);
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT) {
            return RT_ENOTFOUND; /* a new environment */
        }
        rt_errmsg_printf(errmsg, "open %s: %s", path, strerror(errno));
        return RT_EIO;
    }
    if (fstat(fd, &st) != 0) {
        rt_errmsg_printf(errmsg, "stat %s: %s", path, strerror(errno));
        close(fd);
        return RT_EIO;
    }
    memset(m, 0, sizeof(m));
    why = ps__mdb_meta(fd, 0, 0, &m[0]);
    if (!why) {
        why = ps__mdb_meta(fd, 1, (off_t)m[0].psize, &m[1]);
    }
    close(fd);
    if (why) {
        rt_errmsg_printf(errmsg,
                         "data file %s is truncated or corrupt: %s (file is "
                         "%lld bytes)",
                         path, why, (long long)st.st_size);
        return RT_ECORRUPT;
    }
    newer = m[1].txnid > m[0].txnid ? &m[1] : &m[0];
    need = (newer->last_pg + 1) * (uint64_t)newer->psize;
    if (newer->last_pg < 1 || (uint64_t)st.st_size < need) {
        rt_errmsg_printf(errmsg,
                         "data file %s is truncated or corrupt: it is %lld "
                         "bytes, its last used page %llu needs %llu (page "
                         "size %u, txn %llu)",
                         path, (long long)st.st_size,
                         (unsigned long long)newer->last_pg,
                         (unsigned long long)need, newer->psize,
                         (unsigned long long)newer->txnid);
        rc = RT_ECORRUPT;
    }
    if (info) {
        *info = *newer;
        info->size = (uint64_t)st.st_size;
    }
    return rc;
}
