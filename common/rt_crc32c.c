/* CRC32C: the crc32 instruction of SSE4.2 where the CPU has it, else a
 * slicing-by-8 table (8 lookups per 8 bytes). Debian 12 packages no C
 * library for CRC32C (Google's crc32c is not in it), hence our own; the
 * choice between the two is made once, under pthread_once, with the
 * tables built there too. */
#include "rt_crc32c.h"

#include <pthread.h>
#include <string.h>

#define RT_CRC32C_POLY 0x82F63B78u /* 0x1EDC6F41 bit-reversed */

static uint32_t rt__crc_tab[8][256];
static int rt__crc_hw;
static pthread_once_t rt__crc_once = PTHREAD_ONCE_INIT;

static void rt__crc_init(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) {
            c = (c >> 1) ^ (RT_CRC32C_POLY & (0u - (c & 1u)));
        }
        rt__crc_tab[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; i++) {
        for (int t = 1; t < 8; t++) {
            uint32_t c = rt__crc_tab[t - 1][i];
            rt__crc_tab[t][i] = (c >> 8) ^ rt__crc_tab[0][c & 0xFF];
        }
    }
#if defined(__x86_64__) && defined(__GNUC__)
    __builtin_cpu_init();
    rt__crc_hw = __builtin_cpu_supports("sse4.2") != 0;
#endif
}

int rt_crc32c_has_hw(void)
{
    pthread_once(&rt__crc_once, rt__crc_init);
    return rt__crc_hw;
}

uint32_t rt_crc32c_sw(uint32_t crc, const void *p, size_t n)
{
    const uint8_t *b = p;
    uint32_t c = ~crc;

    pthread_once(&rt__crc_once, rt__crc_init);
    while (n >= 8) {
        /* Little-endian load of the first four bytes, whatever the host. */
        uint32_t lo = c ^ ((uint32_t)b[0] | (uint32_t)b[1] << 8 |
                           (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24);
        c = rt__crc_tab[7][lo & 0xFF] ^ rt__crc_tab[6][(lo >> 8) & 0xFF] ^
            rt__crc_tab[5][(lo >> 16) & 0xFF] ^ rt__crc_tab[4][lo >> 24] ^
            rt__crc_tab[3][b[4]] ^ rt__crc_tab[2][b[5]] ^ rt__crc_tab[1][b[6]] ^
            rt__crc_tab[0][b[7]];
        b += 8;
        n -= 8;
    }
    while (n--) {
        c = (c >> 8) ^ rt__crc_tab[0][(c ^ *b++) & 0xFF];
    }
    return ~c;
}

#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("sse4.2"))) uint32_t rt_crc32c_hw(uint32_t crc,
                                                        const void *p,
                                                        size_t n)
{
    const uint8_t *b = p;
    uint64_t c = ~crc;

    while (n >= 8) {
        uint64_t w;
        memcpy(&w, b, 8); /* unaligned; x86-64 is little-endian */
        c = __builtin_ia32_crc32di(c, w);
        b += 8;
        n -= 8;
    }
    while (n--) {
        c = __builtin_ia32_crc32qi((uint32_t)c, *b++);
    }
    return ~(uint32_t)c;
}
#else
uint32_t rt_crc32c_hw(uint32_t crc, const void *p, size_t n)
{
    return rt_crc32c_sw(crc, p, n); /* never called: rt_crc32c_has_hw() 0 */
}
#endif

uint32_t rt_crc32c(uint32_t crc, const void *p, size_t n)
{
    if (rt_crc32c_has_hw()) {
        return rt_crc32c_hw(crc, p, n);
    }
    return rt_crc32c_sw(crc, p, n);
}
