/* Idle connections' memory (fe_pool.h): locating libmicrohttpd's
 * per-connection pool and releasing its all-zero pages.
 *
 * Happy path: the first request of a connection has its method at the
 * pool's first byte (page-aligned); the candidate range [method, method +
 * mapped size) ends with the request's first header record; the pool is
 * located. After each request the worker's sweep calls fe_pool_trim() on
 * connections idle for a while: the pages libmicrohttpd zeroed go back.
 *
 * Failure modes: the method is not page-aligned (empty lines before the
 * request line, which libmicrohttpd skips in place) -> not tried; the
 * record is not where 0.9.75 puts it (another libmicrohttpd, a build with
 * red zones, a page-multiple of leading empty lines) or process_vm_readv
 * fails (EFAULT on an unmapped guess, EPERM under a seccomp policy) ->
 * one failed try; madvise fails -> nothing released, logged by nobody
 * (the caller sees 0). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* process_vm_readv */
#endif
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <unistd.h>

#include "fe_pool.h"

/* MHD_pool_allocate() rounds a struct fe_pool_mhd_header to
 * 2 * sizeof(void *) and takes the first one of a request from the very
 * end of the pool, which MHD_pool_reset() has just reset. */
#define FE__ALIGN (2 * sizeof(void *))
#define FE__HDR_SLOT                                                   \
    ((sizeof(struct fe_pool_mhd_header) + FE__ALIGN - 1) / FE__ALIGN * \
     FE__ALIGN)

static size_t fe__page(void)
{
    static size_t page;
    if (!page) {
        long v = sysconf(_SC_PAGESIZE);
        page = v > 0 ? (size_t)v : 4096;
    }
    return page;
}

size_t fe_pool_mapped_size(size_t pool_size)
{
    size_t page = fe__page();
    /* MHD_pool_create(): malloc at or below 32 KiB or 4/3 of a page. */
    if (pool_size <= 32 * 1024 || pool_size < page * 4 / 3) {
        return 0;
    }
    return (pool_size + page - 1) / page * page;
}

static int fe__inside(uintptr_t base, size_t len, const char *p, size_t n)
{
    uintptr_t a = (uintptr_t)p;
    return a >= base && a - base <= len && n <= len - (a - base);
}

int fe_pool_locate(struct fe_pool *p,
                   size_t pool_size,
                   const char *method,
                   const struct fe_pool_first *first)
{
    size_t len = fe_pool_mapped_size(pool_size);
    uintptr_t base = (uintptr_t)method;
    struct fe_pool_mhd_header rec;
    struct iovec local, remote;

    if (p->base) {
        return 1;
    }
    if (!len || !first || !method || p->tries >= FE_POOL_LOCATE_TRIES ||
        base % fe__page() != 0) {
        return 0;
    }
    /* The strings must lie in the candidate, or it cannot be the pool. */
    if (!fe__inside(base, len, first->key, first->key_size) ||
        (first->value &&
         !fe__inside(base, len, first->value, first->value_size))) {
        p->tries++;
        return 0;
    }
    memset(&rec, 0, sizeof(rec));
    local.iov_base = &rec;
    local.iov_len = sizeof(rec);
    remote.iov_base = (void *)(base + len - FE__HDR_SLOT);
    remote.iov_len = sizeof(rec);
    if (process_vm_readv(getpid(), &local, 1, &remote, 1, 0) !=
            (ssize_t)sizeof(rec) ||
        rec.header != first->key || rec.header_size != first->key_size ||
        rec.value != first->value || rec.value_size != first->value_size ||
        rec.kind != first->kind) {
        p->tries++;
        return 0;
    }
    p->base = base;
    return 1;
}

unsigned fe_pool_trim_after_ms(unsigned waiting)
{
    return waiting >= FE_POOL_TRIM_MANY ? FE_POOL_TRIM_FAST_MS
                                        : FE_POOL_TRIM_IDLE_MS;
}

/* 1 when the @n bytes at @b are all zero. */
static int fe__zero(const unsigned char *b, size_t n)
{
    return b[0] == 0 && memcmp(b, b + 1, n - 1) == 0;
}

size_t fe_pool_trim(struct fe_pool *p, size_t pool_size)
{
    size_t page = fe__page();
    size_t len = fe_pool_mapped_size(pool_size);
    unsigned char *b = (unsigned char *)p->base;
    size_t released = 0, run = 0, off;

    if (!p->base || !p->dirty) {
        return 0;
    }
    p->dirty = 0;
    /* Runs of all-zero pages, one madvise per run; a page with any byte
     * set (a pipelined request's first bytes) stays as it is. */
    for (off = 0; off <= len; off += page) {
        if (off < len && fe__zero(b + off, page)) {
            run += page;
            continue;
        }
        if (run && madvise(b + off - run, run, MADV_DONTNEED) == 0) {
            released += run;
        }
        run = 0;
    }
    return released;
}
