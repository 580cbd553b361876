/* CRC32C: the standard check value, known vectors (RFC 3720 B.4), the
 * hardware and table paths against each other at every length and
 * alignment, and extension in pieces. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "rt_crc32c.h"

/* Both implementations, or the table twice on a CPU without SSE4.2. */
static uint32_t impl(int hw, uint32_t crc, const void *p, size_t n)
{
    if (hw && rt_crc32c_has_hw()) {
        return rt_crc32c_hw(crc, p, n);
    }
    return rt_crc32c_sw(crc, p, n);
}

static void test_check_value(void **state)
{
    (void)state;
    for (int hw = 0; hw < 2; hw++) {
        assert_int_equal(impl(hw, 0, "123456789", 9), 0xE3069283u);
        assert_int_equal(impl(hw, 0, NULL, 0), 0);
    }
    assert_int_equal(rt_crc32c(0, "123456789", 9), 0xE3069283u);
}

/* RFC 3720 appendix B.4: 32 bytes of zeros, of 0xFF, ascending. */
static void test_rfc3720(void **state)
{
    uint8_t b[32];
    (void)state;
    for (int hw = 0; hw < 2; hw++) {
        memset(b, 0, sizeof(b));
        assert_int_equal(impl(hw, 0, b, 32), 0x8A9136AAu);
        memset(b, 0xFF, sizeof(b));
        assert_int_equal(impl(hw, 0, b, 32), 0x62A8AB43u);
        for (int i = 0; i < 32; i++) {
            b[i] = (uint8_t)i;
        }
        assert_int_equal(impl(hw, 0, b, 32), 0x46DD794Eu);
    }
}

static void test_hw_equals_sw(void **state)
{
    uint8_t buf[600];
    uint32_t x = 12345;
    (void)state;
    for (size_t i = 0; i < sizeof(buf); i++) {
        x = x * 1103515245u + 12345u;
        buf[i] = (uint8_t)(x >> 16);
    }
    for (size_t off = 0; off < 8; off++) {
        for (size_t n = 0; n + off <= 520; n++) {
            uint32_t s = rt_crc32c_sw(0x1234u, buf + off, n);
            assert_int_equal(impl(1, 0x1234u, buf + off, n), s);
            assert_int_equal(rt_crc32c(0x1234u, buf + off, n), s);
        }
    }
}

static void test_extend(void **state)
{
    const char *s = "the quick brown fox jumps over the lazy dog";
    size_t n = strlen(s);
    (void)state;
    for (size_t cut = 0; cut <= n; cut++) {
        for (int hw = 0; hw < 2; hw++) {
            uint32_t c = impl(hw, 0, s, cut);
            assert_int_equal(impl(hw, c, s + cut, n - cut), rt_crc32c(0, s, n));
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_check_value),
        cmocka_unit_test(test_rfc3720),
        cmocka_unit_test(test_hw_equals_sw),
        cmocka_unit_test(test_extend),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
