/* fe_pool.h: locating a libmicrohttpd 0.9.75 connection pool from its
 * request (and refusing every wrong guess without touching memory it
 * does not own), and releasing only the all-zero pages of a located one,
 * content unchanged. The pools here are anonymous mappings laid out the
 * way MHD_pool_create()/MHD_pool_allocate() lay them out. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmocka.h>

#include "fe_http.h"
#include "fe_pool.h"

/* Helpers */

static size_t page(void)
{
    return (size_t)sysconf(_SC_PAGESIZE);
}

/* A pool of FE_HTTP_POOL bytes followed by one inaccessible page (so a
 * guess past its end would fault if it were read directly). */
static unsigned char *pool_map(size_t *len)
{
    size_t l = fe_pool_mapped_size(FE_HTTP_POOL);
    unsigned char *b = mmap(NULL, l + page(), PROT_READ | PROT_WRITE,
                            MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    assert_true(b != MAP_FAILED);
    assert_int_equal(mprotect(b + l, page(), PROT_NONE), 0);
    *len = l;
    return b;
}

static void pool_unmap(unsigned char *b, size_t len)
{
    munmap(b, len + page());
}

/* Writes a request line at @at ("GET /t HTTP/1.1" parsed in place) and
 * one header "Host: x" right after it, with its record where
 * MHD_pool_allocate(from_end) puts the first one: the pool's last 64
 * bytes. Fills @f as fe_http's iterator would. */
static void fake_request(unsigned char *b,
                         size_t len,
                         unsigned char *at,
                         struct fe_pool_first *f)
{
    struct fe_pool_mhd_header rec;
    char *key = (char *)at + 16;
    char *val = key + 5;
    memcpy(at, "GET\0/t\0HTTP/1.1", 16);
    memcpy(key, "Host\0x", 6);
    memset(&rec, 0, sizeof(rec));
    rec.header = key;
    rec.header_size = 4;
    rec.value = val;
    rec.value_size = 1;
    rec.kind = 1; /* MHD_HEADER_KIND */
    memcpy(b + len - 64, &rec, sizeof(rec));
    f->key = key;
    f->key_size = 4;
    f->value = val;
    f->value_size = 1;
    f->kind = 1;
}

static int resident(const unsigned char *p)
{
    unsigned char v = 0;
    assert_int_equal(mincore((void *)p, page(), &v), 0);
    return v & 1;
}

/* Tests */

static void test_mapped_size(void **state)
{
    (void)state;
    assert_int_equal(fe_pool_mapped_size(32 * 1024), 0); /* malloc'd */
    assert_int_equal(fe_pool_mapped_size(112 * 1024), 112 * 1024);
    assert_int_equal(fe_pool_mapped_size(100000) % page(), 0);
    assert_true(fe_pool_mapped_size(100000) >= 100000);
}

static void test_locate(void **state)
{
    size_t len;
    unsigned char *b = pool_map(&len);
    struct fe_pool p = {0};
    struct fe_pool_first f;
    (void)state;
    fake_request(b, len, b, &f);
    assert_int_equal(fe_pool_locate(&p, FE_HTTP_POOL, (char *)b, &f), 1);
    assert_ptr_equal((void *)p.base, b);
    assert_int_equal(p.tries, 0);
    /* Located once: later requests change nothing. */
    assert_int_equal(fe_pool_locate(&p, FE_HTTP_POOL, (char *)b + 5, NULL), 1);
    assert_ptr_equal((void *)p.base, b);
    pool_unmap(b, len);
}

static void test_locate_refuses_wrong_guesses(void **state)
{
    size_t len;
    unsigned char *b = pool_map(&len);
    struct fe_pool p = {0};
    struct fe_pool_first f, g;
    (void)state;
    fake_request(b, len, b, &f);
    /* Empty lines before the request line: not page-aligned, not tried. */
    assert_int_equal(fe_pool_locate(&p, FE_HTTP_POOL, (char *)b + 2, &f), 0);
    assert_int_equal(p.tries, 0);
    /* No value list, or a pool libmicrohttpd does not mmap. */
    assert_int_equal(fe_pool_locate(&p, FE_HTTP_POOL, (char *)b, NULL), 0);
    assert_int_equal(fe_pool_locate(&p, 32 * 1024, (char *)b, &f), 0);
    assert_int_equal(p.tries, 0);
    /* A page-multiple of empty lines: the request line is one page in,
     * so the candidate runs one page past the pool, into the inaccessible
     * page. The record is not where it must be: refused, no fault. */
    fake_request(b, len, b + page(), &g);
    memset(b + len - 64, 0, 64);
    assert_int_equal(fe_pool_locate(&p, FE_HTTP_POOL, (char *)b + page(), &g),
                     0);
    assert_int_equal(p.tries, 1);
    assert_int_equal(p.base, 0);
    /* A record that differs in any field is not this request's. */
    fake_request(b, len, b, &f);
    f.kind = 8; /* MHD_GET_ARGUMENT_KIND */
    assert_int_equal(fe_pool_locate(&p, FE_HTTP_POOL, (char *)b, &f), 0);
    f.kind = 1;
    f.value_size = 2;
    assert_int_equal(fe_pool_locate(&p, FE_HTTP_POOL, (char *)b, &f), 0);
    assert_int_equal(p.tries, FE_POOL_LOCATE_TRIES);
    /* Out of tries: even the right guess is no longer made. */
    f.value_size = 1;
    assert_int_equal(fe_pool_locate(&p, FE_HTTP_POOL, (char *)b, &f), 0);
    assert_int_equal(p.base, 0);
    pool_unmap(b, len);
}

static void test_trim_releases_only_zero_pages(void **state)
{
    size_t len, off;
    unsigned char *b = pool_map(&len);
    struct fe_pool p = {0};
    struct fe_pool_first f;
    (void)state;
    fake_request(b, len, b, &f);
    assert_int_equal(fe_pool_locate(&p, FE_HTTP_POOL, (char *)b, &f), 1);
    /* What MHD_pool_reset() leaves: all zero but the first bytes of a
     * pipelined request, here in page 0 and at the end of page 3. */
    memset(b, 0, len);
    memcpy(b, "GET /next", 9);
    b[4 * page() - 1] = 'x';
    for (off = 0; off < len; off += page()) {
        assert_true(resident(b + off));
    }
    assert_int_equal(fe_pool_trim(&p, FE_HTTP_POOL), 0); /* not dirty */
    p.dirty = 1;
    assert_int_equal(fe_pool_trim(&p, FE_HTTP_POOL), len - 2 * page());
    assert_int_equal(p.dirty, 0);
    for (off = 0; off < len; off += page()) {
        int kept = off == 0 || off == 3 * page();
        assert_int_equal(resident(b + off), kept);
    }
    /* Content is what it was: the kept bytes, zeros everywhere else. */
    assert_memory_equal(b, "GET /next", 9);
    assert_int_equal(b[4 * page() - 1], 'x');
    for (off = 9; off < len; off++) {
        if (off != 4 * page() - 1) {
            assert_int_equal(b[off], 0);
        }
    }
    /* Not dirty again until the next request. */
    assert_int_equal(fe_pool_trim(&p, FE_HTTP_POOL), 0);
    pool_unmap(b, len);
}

static void test_trim_after(void **state)
{
    (void)state;
    assert_int_equal(fe_pool_trim_after_ms(0), FE_POOL_TRIM_IDLE_MS);
    assert_int_equal(fe_pool_trim_after_ms(FE_POOL_TRIM_MANY - 1),
                     FE_POOL_TRIM_IDLE_MS);
    assert_int_equal(fe_pool_trim_after_ms(FE_POOL_TRIM_MANY),
                     FE_POOL_TRIM_FAST_MS);
    assert_true(FE_POOL_TRIM_FAST_MS < FE_POOL_TRIM_IDLE_MS);
}

static void test_trim_unlocated(void **state)
{
    struct fe_pool p = {0};
    (void)state;
    p.dirty = 1;
    assert_int_equal(fe_pool_trim(&p, FE_HTTP_POOL), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mapped_size),
        cmocka_unit_test(test_locate),
        cmocka_unit_test(test_locate_refuses_wrong_guesses),
        cmocka_unit_test(test_trim_releases_only_zero_pages),
        cmocka_unit_test(test_trim_after),
        cmocka_unit_test(test_trim_unlocated),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
