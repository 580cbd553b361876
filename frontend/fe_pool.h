/* Idle connections' memory: hands the pages of libmicrohttpd's
 * per-connection memory pool that hold nothing but zeros back to the
 * kernel while a keep-alive connection waits for its next request.
 *
 * Why: libmicrohttpd 0.9.75 gives each connection a pool of
 * MHD_OPTION_CONNECTION_MEMORY_LIMIT bytes (FE_HTTP_POOL, 112 KiB: our
 * URL and header limits must fit it to get their Azure errors) from its
 * own anonymous mmap, and after every keep-alive request MHD_pool_reset()
 * memsets the whole pool, so a connection that has served one request
 * keeps all of it resident: 10,000 idle connections held ~1.1 GB. The
 * pool cannot be smaller (the oversized-head errors) and libmicrohttpd has
 * no option to skip the zeroing.
 *
 * How, and why it is safe: MADV_DONTNEED on a private anonymous page makes
 * the next access read a fresh zero-filled page. On a page whose bytes are
 * all zero that changes nothing any reader can see, whatever
 * libmicrohttpd is doing with the page, so fe_pool_trim() releases only
 * pages it has just checked are all zero, on the thread that owns the
 * connection (the worker: no other thread touches the pool), between two
 * MHD_run() calls. What must be exact is the pool's address range, which
 * libmicrohttpd does not expose: fe_pool_locate() derives it from the
 * request line (parsed in place at the start of the pool's read buffer,
 * which is the start of the pool) and proves it by finding the first
 * header record of the request (libmicrohttpd allocates those from the
 * pool's end) at the candidate range's last bytes, read with
 * process_vm_readv() so that a wrong guess cannot fault. Anything else
 * (leading empty lines moved the request line, another libmicrohttpd
 * layout, a pool not from mmap, the syscall refused) leaves the
 * connection unlocated and untouched: the cost is then the memory, never
 * correctness.
 *
 * Thread: the worker that owns the connection. No allocation. */
#ifndef FE_POOL_H
#define FE_POOL_H

#include <stddef.h>
#include <stdint.h>

/* Failed proofs after which a connection is no longer tried (each costs
 * one syscall). */
#define FE_POOL_LOCATE_TRIES 3

/* When to trim. A trimmed pool costs its next request ~100 us of page
 * faults (libmicrohttpd zeroes the whole pool again), so a connection is
 * trimmed once it has been idle FE_POOL_TRIM_IDLE_MS: at most one such
 * request per connection per 5 s of quiet, never for one that keeps
 * sending. While FE_POOL_TRIM_MANY or more idle connections of a worker
 * hold an untrimmed pool (28 MiB and more: a burst of new clients), the
 * bound is FE_POOL_TRIM_FAST_MS instead, so a burst's memory is held for
 * one second, not five. */
#define FE_POOL_TRIM_IDLE_MS 5000
#define FE_POOL_TRIM_FAST_MS 1000
#define FE_POOL_TRIM_MANY 256

/* The idle time after which a pool is trimmed when @waiting idle
 * connections of the worker hold an untrimmed one. */
unsigned fe_pool_trim_after_ms(unsigned waiting);

/* libmicrohttpd 0.9.75's struct MHD_HTTP_Header (src/microhttpd/
 * internal.h), the record of one request value as it lies in a pool;
 * fe_pool_locate() proves a pool's range by finding one. */
struct fe_pool_mhd_header
{
    void *next;
    void *prev;
    char *header;
    size_t header_size;
    char *value;
    size_t value_size;
    int kind;
};

/* Per connection, zeroed at its start (embedded in the caller's record). */
struct fe_pool
{
    uintptr_t base; /* the pool's first byte; 0: not located */
    unsigned tries; /* failed proofs */
    int dirty;      /* served a request since the last trim */
};

/* The first entry of a request's value list as libmicrohttpd reported it
 * (all pointers borrowed, into the pool). */
struct fe_pool_first
{
    const char *key;
    size_t key_size;
    const char *value; /* NULL for an argument without '=' */
    size_t value_size;
    int kind; /* enum MHD_ValueKind */
};

/* Locates the pool of a connection whose current request has its method
 * at @method and @first as the first entry of its value list (NULL: the
 * request has none; nothing is tried). @pool_size: the pool size given to
 * libmicrohttpd. Does nothing once located or after FE_POOL_LOCATE_TRIES
 * failed proofs. Returns 1 when @p is located (now or before), else 0. */
int fe_pool_locate(struct fe_pool *p,
                   size_t pool_size,
                   const char *method,
                   const struct fe_pool_first *first);

/* Releases every all-zero page of a located, dirty pool and clears dirty.
 * Call only between requests (libmicrohttpd reset the pool after the
 * last one), on the connection's thread, while the connection is open.
 * Returns the bytes released (0: not located, not dirty, or none). */
size_t fe_pool_trim(struct fe_pool *p, size_t pool_size);

/* The bytes of a pool of @pool_size as libmicrohttpd maps it (rounded up
 * to pages), or 0 when it does not mmap one (32 KiB or less: malloc). */
size_t fe_pool_mapped_size(size_t pool_size);

#endif
