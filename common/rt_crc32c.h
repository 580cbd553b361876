/* CRC32C (Castagnoli, polynomial 0x1EDC6F41, reflected 0x82F63B78): the
 * checksum of stored values and, later, of shipped replication data
 * (docs/DESIGN-replication.md §5.6). Same function as iSCSI, ext4 and
 * Google's crc32c library: rt_crc32c(0, "123456789", 9) == 0xE3069283.
 *
 * x86-64 CPUs with SSE4.2 use the crc32 instruction (chosen once, at the
 * first call, from the CPU's feature bits); every other CPU uses a
 * slicing-by-8 table. Both give the same results (tests/unit/test_crc32c.c
 * checks them against each other).
 *
 * Thread: pure functions, callable from any thread. */
#ifndef RT_CRC32C_H
#define RT_CRC32C_H

#include <stddef.h>
#include <stdint.h>

/* Extends @crc (0 to start, or the result of an earlier call) with
 * @p[0..n) and returns the new value, so a checksum of several pieces is
 * rt_crc32c(rt_crc32c(0, a, an), b, bn). @p (borrowed) may be NULL when @n
 * is 0. */
uint32_t rt_crc32c(uint32_t crc, const void *p, size_t n);

/* The two implementations behind rt_crc32c, for tests and benchmarks.
 * rt_crc32c_hw may be called only when rt_crc32c_has_hw() returns 1. */
uint32_t rt_crc32c_sw(uint32_t crc, const void *p, size_t n);
uint32_t rt_crc32c_hw(uint32_t crc, const void *p, size_t n);
int rt_crc32c_has_hw(void);

#endif
