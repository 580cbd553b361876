/* Base64 as the front end reads and writes it (fe_b64.h): standard,
 * padded and strict for Edm.Binary and account keys; base64url without
 * padding, and tolerant of what clients do to it, for continuation
 * tokens. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "fe_b64.h"
#include "rt_err.h"

/* Helpers */

static int dec(const char *s, uint8_t *out)
{
    return fe_b64_decode(s, strlen(s), out);
}

/* Tests */

/* Every length round-trips, and the text is RFC 4648's. */
static void test_roundtrip(void **state)
{
    static const char *const text[] = {"", "AA==", "AAE=", "AAEC", "AAECAw=="};
    const uint8_t bytes[] = {0, 1, 2, 3};
    (void)state;
    for (size_t n = 0; n <= 4; n++) {
        char enc[FE_B64_ENCODED_SIZE(4)];
        uint8_t back[FE_B64_DECODED_SIZE(8)];
        assert_int_equal(fe_b64_encode(bytes, n, enc), strlen(text[n]));
        assert_string_equal(enc, text[n]);
        assert_int_equal(dec(enc, back), (int)n);
        assert_memory_equal(back, bytes, n);
    }
}

/* Whitespace, misplaced or excess padding, and foreign characters are
 * errors, not skipped. */
static void test_strict(void **state)
{
    uint8_t out[16];
    (void)state;
    assert_int_equal(dec("QQ==", out), 1);
    assert_int_equal(dec("QUI=", out), 2);
    assert_int_equal(dec("QQ=", out), RT_EINVAL);
    assert_int_equal(dec("Q===", out), RT_EINVAL);
    assert_int_equal(dec("QQ=A", out), RT_EINVAL);
    assert_int_equal(dec("Q=QA", out), RT_EINVAL);
    assert_int_equal(dec("=QQA", out), RT_EINVAL);
    assert_int_equal(dec(" QQA", out), RT_EINVAL);
    assert_int_equal(dec("QQA ", out), RT_EINVAL);
    assert_int_equal(dec("QQ==\n", out), RT_EINVAL);
    assert_int_equal(dec("QQ-_", out), RT_EINVAL);
    assert_int_equal(dec("QQ==QUI=", out), RT_EINVAL);
}

/* base64url drops the padding and swaps '+' and '/' for '-' and '_'; the
 * decoder also takes the standard alphabet and a form-decoded ' '. */
static void test_url(void **state)
{
    const uint8_t tilde[] = {'~', '~', '~'};
    char enc[FE_B64_ENCODED_SIZE(3)];
    uint8_t out[8];
    (void)state;
    assert_int_equal(fe_b64url_encode(tilde, 3, enc), 4);
    assert_string_equal(enc, "fn5-");
    assert_int_equal(fe_b64url_encode("p1", 2, enc), 3);
    assert_string_equal(enc, "cDE");
    assert_int_equal(fe_b64url_decode("fn5-", 4, out), 3);
    assert_memory_equal(out, tilde, 3);
    assert_int_equal(fe_b64url_decode("fn5+", 4, out), 3);
    assert_int_equal(fe_b64url_decode("fn5 ", 4, out), 3);
    assert_int_equal(fe_b64url_decode("cDE", 3, out), 2);
    assert_memory_equal(out, "p1", 2);
    assert_int_equal(fe_b64url_decode("", 0, out), 0);
    assert_int_equal(fe_b64url_decode("c", 1, out), RT_EINVAL);
    assert_int_equal(fe_b64url_decode("cD=", 3, out), RT_EINVAL);
    assert_int_equal(fe_b64url_decode("a*b", 3, out), RT_EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_roundtrip),
        cmocka_unit_test(test_strict),
        cmocka_unit_test(test_url),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
