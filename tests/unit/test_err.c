/* Error table: codes map to the Azure status/code pairs of the spec. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "rt_err.h"

/* Client-visible codes carry the HTTP status and Azure code of spec §8.2. */
static void test_azure_mapping(void **state)
{
    (void)state;
    assert_int_equal(rt_err_http_status(RT_ENOTFOUND), 404);
    assert_string_equal(rt_err_azure_code(RT_ENOTFOUND), "ResourceNotFound");
    assert_int_equal(rt_err_http_status(RT_ETABLEEXISTS), 409);
    assert_string_equal(rt_err_azure_code(RT_EAUTH), "AuthenticationFailed");
    assert_int_equal(rt_err_http_status(RT_EAUTH), 403);
    assert_int_equal(rt_err_http_status(RT_EBUSY), 503);
    assert_string_equal(rt_err_azure_code(RT_EBUSY), "ServerBusy");
    assert_int_equal(rt_err_http_status(RT_EPRECOND), 412);
}

/* Internal codes surface as retryable 503 ServerBusy, never as raw names. */
static void test_internal_codes(void **state)
{
    (void)state;
    assert_int_equal(rt_err_http_status(RT_ESTALE), 503);
    assert_string_equal(rt_err_azure_code(RT_ENOCONN), "ServerBusy");
    assert_int_equal(rt_err_http_status(RT_ECORRUPT), 500);
}

/* A store that cannot take writes is Azure's retryable 503 ServerBusy with
 * the documented text; the logs keep saying why. */
static void test_store_full_is_server_busy(void **state)
{
    (void)state;
    static const char busy[] =
        "The server is currently unable to receive "
        "requests. Please retry your request.";
    for (int code = RT_ENOSPACE, i = 0; i < 2; code = RT_EIO, i++) {
        assert_int_equal(rt_err_http_status(code), 503);
        assert_string_equal(rt_err_azure_code(code), "ServerBusy");
        assert_string_equal(rt_err_client_message(code), busy);
    }
    assert_string_equal(rt_strerror(RT_ENOSPACE), "Storage is full.");
    assert_string_equal(rt_strerror(RT_EIO), "I/O error.");
    /* Every internal code gets its Azure code's public text; public codes
     * and unknown ones keep theirs. */
    assert_string_equal(rt_err_client_message(RT_ESTALE), busy);
    assert_string_equal(rt_err_client_message(RT_ECORRUPT),
                        rt_err_message(RT_EINTERNAL));
    assert_string_equal(rt_err_client_message(RT_ENOTFOUND),
                        rt_err_message(RT_ENOTFOUND));
    assert_string_equal(rt_err_client_message(-2), rt_err_message(-2));
}

/* Replication codes: a request to a non-primary is a retryable 503 like a
 * stale map; the replica-to-replica ones are internal 500s. Their numbers
 * come after ECONFIG's and never change. */
static void test_replication_codes(void **state)
{
    (void)state;
    assert_int_equal(RT_ECONFIG, -10108);
    assert_int_equal(RT_ENOTPRIMARY, -10109);
    assert_int_equal(RT_ESEALED, -10110);
    assert_int_equal(RT_ELSNGAP, -10111);
    assert_int_equal(RT_EDIVERGED, -10112);
    assert_int_equal(rt_err_http_status(RT_ENOTPRIMARY), 503);
    assert_string_equal(rt_err_azure_code(RT_ENOTPRIMARY), "ServerBusy");
    assert_int_equal(rt_err_http_status(RT_ESEALED), 500);
    assert_string_equal(rt_err_azure_code(RT_ESEALED), "InternalError");
    assert_int_equal(rt_err_http_status(RT_ELSNGAP), 500);
    assert_int_equal(rt_err_http_status(RT_EDIVERGED), 500);
    assert_string_equal(rt_err_name(RT_EDIVERGED), "EDIVERGED");
    assert_true(rt_err_is_rt(RT_ELSNGAP));
}

/* A call rt_rpc never wrote is a retryable 503 (nothing was executed); its
 * number follows the replication codes and never changes. */
static void test_notsent_code(void **state)
{
    (void)state;
    assert_int_equal(RT_ENOTSENT, -10113);
    assert_int_equal(rt_err_http_status(RT_ENOTSENT), 503);
    assert_string_equal(rt_err_azure_code(RT_ENOTSENT), "ServerBusy");
    assert_string_equal(rt_err_name(RT_ENOTSENT), "ENOTSENT");
}

/* A follower master's answer is a retryable 503 ServerBusy; its number is
 * the one DESIGN-master-ha.md §5.2 fixes. */
static void test_notleader_code(void **state)
{
    (void)state;
    assert_int_equal(RT_ENOTLEADER, -10114);
    assert_int_equal(rt_err_http_status(RT_ENOTLEADER), 503);
    assert_string_equal(rt_err_azure_code(RT_ENOTLEADER), "ServerBusy");
    assert_string_equal(rt_err_name(RT_ENOTLEADER), "ENOTLEADER");
}

/* Unknown codes (libuv's) fall back to 500 InternalError; messages exist. */
static void test_unknown(void **state)
{
    (void)state;
    assert_int_equal(rt_err_http_status(-2), 500);
    assert_string_equal(rt_err_azure_code(-2), "InternalError");
    assert_false(rt_err_is_rt(-2));
    assert_true(rt_err_is_rt(RT_EINVAL));
    assert_string_equal(rt_err_name(RT_EINVAL), "EINVAL");
    assert_non_null(rt_strerror(-2));
}

/* Wrapping prepends context to the previous message. */
static void test_wrap(void **state)
{
    char msg[RT_ERRMSG_SIZE] = "";
    (void)state;
    rt_errmsg_printf(msg, "lmdb: %s", "full");
    rt_errmsg_wrapf(msg, "open range %d", 17);
    assert_string_equal(msg, "open range 17: lmdb: full");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_azure_mapping),
        cmocka_unit_test(test_internal_codes),
        cmocka_unit_test(test_store_full_is_server_busy),
        cmocka_unit_test(test_replication_codes),
        cmocka_unit_test(test_notsent_code),
        cmocka_unit_test(test_notleader_code),
        cmocka_unit_test(test_unknown),
        cmocka_unit_test(test_wrap),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
