/* rl_http: the incremental response parser. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "rl_http.h"

/* Helpers */

/* Feeds @s in pieces of @step bytes; returns the feed result and the
 * number of bytes consumed. */
static int feed_steps(struct rl_resp *r,
                      const char *s,
                      size_t step,
                      size_t *consumed)
{
    size_t off = 0, n = strlen(s);
    int rc = 0;
    while (off < n) {
        size_t k = n - off < step ? n - off : step, used = 0;
        rc = rl_resp_feed(r, s + off, k, &used);
        off += used;
        if (rc != 0) {
            break;
        }
        assert_int_equal(used, k);
    }
    *consumed = off;
    return rc;
}

static const char get_resp[] =
    "HTTP/1.1 200 OK\r\n"
    "Content-Type: application/json;odata=nometadata\r\n"
    "ETag: W/\"datetime'2024-05-01T10%3A11%3A12.3456789Z'\"\r\n"
    "x-ms-continuation-NextPartitionKey: 1!8!cDAwMQ--\r\n"
    "X-MS-Continuation-NextRowKey: 1!4!cjE-\r\n"
    "Content-Length: 56\r\n"
    "\r\n"
    "{\"value\":[{\"RowKey\":\"a\"},{\"RowKey\":\"b\"},{\"RowKey\":\"c\"}]}"
    "  ";

/* Each test gets a struct rl_resp on the heap, filled with junk so that a
 * field rl_resp_begin forgets to initialise shows up in every build (not
 * only under ASan, which fills malloc'd memory with 0xbe). The teardown
 * frees it even when an assertion ends the test early. */
static int resp_setup(void **state)
{
    struct rl_resp *r = malloc(sizeof(*r));
    if (!r) {
        return -1;
    }
    memset(r, 0xa5, sizeof(*r));
    *state = r;
    return 0;
}

static int resp_teardown(void **state)
{
    free(*state);
    *state = NULL;
    return 0;
}

/* Tests */

/* A Content-Length response split at every possible point parses the
 * same: status, ETag, continuation, entity count. */
static void test_content_length_any_split(void **state)
{
    struct rl_resp *r = *state;
    for (size_t step = 1; step <= sizeof(get_resp); step++) {
        size_t used;
        rl_resp_begin(r, RL_BODY_ENTITIES);
        assert_int_equal(feed_steps(r, get_resp, step, &used), 1);
        assert_int_equal(used, strlen(get_resp) - 2); /* not the next */
        assert_int_equal(r->status, 200);
        assert_string_equal(r->etag,
                            "W/\"datetime'2024-05-01T10%3A11%3A12.3456789Z'\"");
        assert_string_equal(r->next_pk, "1!8!cDAwMQ--");
        assert_string_equal(r->next_rk, "1!4!cjE-");
        assert_int_equal(r->entities, 3);
        assert_int_equal(r->body_bytes, 56);
    }
}

/* Two pipelined responses: the first stops exactly at its end. */
static void test_back_to_back(void **state)
{
    struct rl_resp *r = *state;
    const char two[] =
        "HTTP/1.1 204 No Content\r\nETag: x\r\n\r\n"
        "HTTP/1.1 404 Not Found\r\nContent-Length: 2\r\n"
        "x-ms-error-code: ResourceNotFound\r\n\r\n{}";
    size_t used;
    rl_resp_begin(r, RL_BODY_IGNORE);
    assert_int_equal(rl_resp_feed(r, two, strlen(two), &used), 1);
    assert_int_equal(r->status, 204);
    rl_resp_begin(r, RL_BODY_IGNORE);
    assert_int_equal(rl_resp_feed(r, two + used, strlen(two) - used, &used), 1);
    assert_int_equal(r->status, 404);
    assert_string_equal(r->error_code, "ResourceNotFound");
    assert_string_equal(r->body_head, "{}");
}

/* Chunked body with extensions and a trailer; split anywhere. */
static void test_chunked(void **state)
{
    struct rl_resp *r = *state;
    const char resp[] =
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n"
        "\r\n"
        "5;ext=1\r\n\"RowK\r\n"
        "c\r\ney\":\"x\"\"RowK\r\n"
        "4\r\ney\":\r\n"
        "0\r\nX-Trailer: 1\r\n\r\n";
    for (size_t step = 1; step < sizeof(resp); step++) {
        size_t used;
        rl_resp_begin(r, RL_BODY_ENTITIES);
        assert_int_equal(feed_steps(r, resp, step, &used), 1);
        assert_int_equal(used, strlen(resp));
        assert_true(r->chunked);
        assert_int_equal(r->body_bytes, 21);
        assert_int_equal(r->entities, 2);
    }
}

/* $batch: the status of each part; a failed changeset reports it. */
static void test_batch_parts(void **state)
{
    struct rl_resp *r = *state;
    char resp[1024];
    const char ok_body[] =
        "--batchresponse_1\r\nContent-Type: multipart/mixed; "
        "boundary=changesetresponse_2\r\n\r\n--changesetresponse_2\r\n"
        "Content-Type: application/http\r\n\r\nHTTP/1.1 204 No Content\r\n"
        "\r\n--changesetresponse_2\r\nContent-Type: application/http\r\n\r\n"
        "HTTP/1.1 204 No Content\r\n\r\n--changesetresponse_2--\r\n";
    const char bad_body[] =
        "--changesetresponse_2\r\n\r\nHTTP/1.1 409 Conflict\r\n\r\n"
        "{\"odata.error\":{}}\r\n--changesetresponse_2--\r\n";
    size_t used;
    snprintf(resp, sizeof(resp),
             "HTTP/1.1 202 Accepted\r\nContent-Length: %zu\r\n\r\n%s",
             strlen(ok_body), ok_body);
    rl_resp_begin(r, RL_BODY_BATCH);
    assert_int_equal(feed_steps(r, resp, 7, &used), 1);
    assert_int_equal(r->status, 202);
    assert_int_equal(r->parts, 2);
    assert_int_equal(r->part_fail, 0);
    snprintf(resp, sizeof(resp),
             "HTTP/1.1 202 Accepted\r\nContent-Length: %zu\r\n\r\n%s",
             strlen(bad_body), bad_body);
    rl_resp_begin(r, RL_BODY_BATCH);
    assert_int_equal(feed_steps(r, resp, 3, &used), 1);
    assert_int_equal(r->parts, 1);
    assert_int_equal(r->part_fail, 409);
}

/* 100 Continue is skipped; HTTP/1.0 without a length ends at EOF. */
static void test_interim_and_eof(void **state)
{
    struct rl_resp *r = *state;
    const char a[] =
        "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\n"
        "Content-Length: 0\r\n\r\n";
    const char b[] = "HTTP/1.0 200 OK\r\n\r\nhello";
    size_t used;
    rl_resp_begin(r, RL_BODY_IGNORE);
    assert_int_equal(rl_resp_feed(r, a, strlen(a), &used), 1);
    assert_int_equal(r->status, 201);
    rl_resp_begin(r, RL_BODY_IGNORE);
    assert_int_equal(rl_resp_feed(r, b, strlen(b), &used), 0);
    assert_true(r->conn_close);
    assert_int_equal(rl_resp_eof(r), 1);
    assert_int_equal(r->body_bytes, 5);
}

/* Garbage and bad chunk sizes are protocol errors. */
static void test_errors(void **state)
{
    struct rl_resp *r = *state;
    const char bad[] = "SMTP ready\r\n";
    const char badchunk[] =
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n"
        "\r\nzz\r\n";
    size_t used;
    rl_resp_begin(r, RL_BODY_IGNORE);
    assert_int_equal(rl_resp_feed(r, bad, strlen(bad), &used), -1);
    rl_resp_begin(r, RL_BODY_IGNORE);
    assert_int_equal(rl_resp_feed(r, badchunk, strlen(badchunk), &used), -1);
    rl_resp_begin(r, RL_BODY_IGNORE);
    assert_int_equal(rl_resp_eof(r), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_content_length_any_split,
                                        resp_setup, resp_teardown),
        cmocka_unit_test_setup_teardown(test_back_to_back, resp_setup,
                                        resp_teardown),
        cmocka_unit_test_setup_teardown(test_chunked, resp_setup,
                                        resp_teardown),
        cmocka_unit_test_setup_teardown(test_batch_parts, resp_setup,
                                        resp_teardown),
        cmocka_unit_test_setup_teardown(test_interim_and_eof, resp_setup,
                                        resp_teardown),
        cmocka_unit_test_setup_teardown(test_errors, resp_setup, resp_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
