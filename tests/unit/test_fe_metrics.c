/* fe_metrics: operation labels, bounded account labels, shards summed at
 * scrape, and the listener answering GET /metrics and /health. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "fe_auth.h"
#include "fe_metrics.h"
#include "rt_buf.h"
#include "rt_err.h"

/* Fixture / Helpers */

static struct fe_metrics *make(struct fe_accounts *a, unsigned nshards)
{
    fe_accounts_init(a);
    assert_int_equal(fe_accounts_add(a, FE_DEV_ACCOUNT, FE_DEV_KEY, NULL), 0);
    assert_int_equal(fe_accounts_add(a, "acct2", FE_DEV_KEY, NULL), 0);
    return fe_metrics_create(a, nshards);
}

static char *scrape(struct fe_metrics *m)
{
    struct rt_buf b = RT_BUF_INIT;
    fe_metrics_write(m, &b);
    rt_buf_cstr(&b);
    return (char *)rt_buf_steal(&b, NULL);
}

/* A GET on a loopback port; returns the whole response (malloc'd). */
static char *http_get(int port, const char *path)
{
    struct sockaddr_in sa;
    char req[128], *out = calloc(1, 1 << 20);
    size_t n = 0;
    ssize_t r;
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    memset(&sa, 0, sizeof(sa));
    sa.sin_family = AF_INET;
    sa.sin_port = htons((uint16_t)port);
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    snprintf(req, sizeof(req),
             "GET %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", path);
    assert_int_equal(write(fd, req, strlen(req)), (ssize_t)strlen(req));
    while ((r = read(fd, out + n, (1 << 20) - 1 - n)) > 0) {
        n += (size_t)r;
    }
    close(fd);
    return out;
}

/* Tests */

/* Operation names map to their labels; PUT/MERGE without If-Match are the
 * upserts; no operation is Preflight for OPTIONS, else Unknown. */
static void test_op_labels(void **state)
{
    (void)state;
    assert_int_equal(fe_metrics_op_of("InsertEntity", "POST", 0),
                     FE_MOP_INSERT_ENTITY);
    assert_int_equal(fe_metrics_op_of("UpdateEntity", "PUT", 1),
                     FE_MOP_UPDATE_ENTITY);
    assert_int_equal(fe_metrics_op_of("UpdateEntity", "PUT", 0),
                     FE_MOP_INSERT_OR_REPLACE);
    assert_int_equal(fe_metrics_op_of("MergeEntity", "MERGE", 1),
                     FE_MOP_MERGE_ENTITY);
    assert_int_equal(fe_metrics_op_of("MergeEntity", "PATCH", 0),
                     FE_MOP_INSERT_OR_MERGE);
    assert_int_equal(fe_metrics_op_of("EntityGroupTransaction", "POST", 0),
                     FE_MOP_BATCH);
    assert_int_equal(fe_metrics_op_of(NULL, "OPTIONS", 0), FE_MOP_PREFLIGHT);
    assert_int_equal(fe_metrics_op_of(NULL, "GET", 0), FE_MOP_UNKNOWN);
    assert_int_equal(fe_metrics_op_of("NoSuchOp", "GET", 0), FE_MOP_UNKNOWN);
}

/* Requests counted on two shards are summed; an account not configured
 * (or none) is "_other", never the name the client sent. */
static void test_requests_summed(void **state)
{
    struct fe_accounts a;
    struct fe_metrics *m = make(&a, 2);
    struct fe_metrics_shard *s0 = fe_metrics_shard(m, 0);
    struct fe_metrics_shard *s1 = fe_metrics_shard(m, 1);
    char *t;
    (void)state;
    assert_null(fe_metrics_shard(m, 2));
    fe_metrics_req_done(s0, FE_DEV_ACCOUNT, FE_MOP_INSERT_ENTITY, 201, 100, 0,
                        700);
    fe_metrics_req_done(s1, FE_DEV_ACCOUNT, FE_MOP_INSERT_ENTITY, 201, 50, 0,
                        3000);
    fe_metrics_req_done(s1, FE_DEV_ACCOUNT, FE_MOP_INSERT_ENTITY, 409, 10, 200,
                        900);
    fe_metrics_req_done(s0, "attacker\"x", FE_MOP_GET_ENTITY, 403, 0, 300, 10);
    fe_metrics_req_done(s0, NULL, FE_MOP_UNKNOWN, 400, 0, 300, 10);
    fe_metrics_req_done(s0, "acct2", FE_MOP_QUERY_ENTITIES, 299, 0, 0, 10);
    fe_metrics_req_begin(s0);
    fe_metrics_req_begin(s1);
    fe_metrics_req_end(s1);
    fe_metrics_conn(s0, 1);
    fe_metrics_conn(s1, 1);
    fe_metrics_conn(s1, 0);
    fe_metrics_map_version(s0, 7);
    fe_metrics_map_version(s1, 9);
    t = scrape(m);
    assert_non_null(strstr(t,
                           "rt_fe_requests_total{account=\"devstoreaccount1"
                           "\",operation=\"InsertEntity\",status=\"201\"} "
                           "2\n"));
    assert_non_null(strstr(t,
                           "rt_fe_requests_total{account=\"devstoreaccount1"
                           "\",operation=\"InsertEntity\",status=\"409\"} "
                           "1\n"));
    assert_non_null(strstr(t,
                           "rt_fe_requests_total{account=\"_other\","
                           "operation=\"GetEntity\",status=\"403\"} 1\n"));
    assert_non_null(strstr(t,
                           "rt_fe_requests_total{account=\"_other\","
                           "operation=\"Unknown\",status=\"400\"} 1\n"));
    assert_non_null(strstr(t,
                           "rt_fe_requests_total{account=\"acct2\","
                           "operation=\"QueryEntities\",status=\"other\"} "
                           "1\n"));
    assert_null(strstr(t, "attacker"));
    assert_non_null(strstr(t,
                           "rt_fe_request_duration_seconds_bucket{account="
                           "\"devstoreaccount1\",operation=\"InsertEntity\","
                           "status_class=\"2xx\",le=\"0.001\"} 1\n"));
    assert_non_null(strstr(t,
                           "rt_fe_request_duration_seconds_count{account="
                           "\"devstoreaccount1\",operation=\"InsertEntity\","
                           "status_class=\"2xx\"} 2\n"));
    assert_non_null(strstr(t,
                           "rt_fe_request_duration_seconds_count{account="
                           "\"devstoreaccount1\",operation=\"InsertEntity\","
                           "status_class=\"4xx\"} 1\n"));
    assert_non_null(strstr(t,
                           "rt_fe_request_body_bytes_total{account="
                           "\"devstoreaccount1\"} 160\n"));
    assert_non_null(strstr(t,
                           "rt_fe_response_body_bytes_total{account="
                           "\"_other\"} 600\n"));
    assert_non_null(strstr(t, "rt_fe_requests_in_flight 1\n"));
    assert_non_null(strstr(t, "rt_fe_connections_open 1\n"));
    assert_non_null(strstr(t, "rt_fe_connections_total 2\n"));
    assert_non_null(strstr(t, "rt_fe_map_version 9\n"));
    assert_non_null(strstr(t,
                           "# TYPE rt_fe_request_duration_seconds "
                           "histogram\n"));
    free(t);
    fe_metrics_destroy(m);
    fe_accounts_free(&a);
}

/* RPC latency per server id, merged across shards; errors by kind. */
static void test_rpc(void **state)
{
    struct fe_accounts a;
    struct fe_metrics *m = make(&a, 2);
    char *t;
    (void)state;
    fe_metrics_rpc(fe_metrics_shard(m, 0), 3, 0, 200);
    fe_metrics_rpc(fe_metrics_shard(m, 1), 3, RT_ETIMEDOUT, 5000000);
    fe_metrics_rpc(fe_metrics_shard(m, 1), 4, RT_ESTALE, 100);
    fe_metrics_master(fe_metrics_shard(m, 0), FE_MMASTER_TABLE, 0, 1000);
    fe_metrics_master(fe_metrics_shard(m, 1), FE_MMASTER_GET_MAP, RT_ENOCONN,
                      1000);
    t = scrape(m);
    assert_non_null(
        strstr(t, "rt_fe_ps_rpc_duration_seconds_count{server=\"3\"} 2\n"));
    assert_non_null(
        strstr(t, "rt_fe_ps_rpc_duration_seconds_count{server=\"4\"} 1\n"));
    assert_non_null(
        strstr(t, "rt_fe_ps_rpc_errors_total{kind=\"timeout\"} 1\n"));
    assert_non_null(strstr(t, "rt_fe_ps_rpc_errors_total{kind=\"stale\"} 1\n"));
    assert_non_null(strstr(t, "rt_fe_ps_rpc_errors_total{kind=\"busy\"} 0\n"));
    assert_non_null(strstr(t,
                           "rt_fe_master_calls_total{call=\"table\","
                           "result=\"ok\"} 1\n"));
    assert_non_null(strstr(t,
                           "rt_fe_master_calls_total{call=\"get_map\","
                           "result=\"error\"} 1\n"));
    assert_non_null(strstr(t, "rt_fe_master_call_duration_seconds_count 2\n"));
    free(t);
    fe_metrics_destroy(m);
    fe_accounts_free(&a);
}

/* The listener: /metrics is the exposition, /health ok, other paths 404,
 * a bad address is refused. */
static void test_listener(void **state)
{
    struct fe_accounts a;
    struct fe_metrics *m = make(&a, 1);
    char errmsg[RT_ERRMSG_SIZE];
    int port = 0;
    char *r;
    (void)state;
    assert_int_equal(fe_metrics_listen(m, "nohost", &port, errmsg), RT_EINVAL);
    assert_int_equal(fe_metrics_listen(m, "127.0.0.1:0", &port, errmsg), 0);
    assert_true(port > 0);
    fe_metrics_req_done(fe_metrics_shard(m, 0), "acct2", FE_MOP_GET_TABLE, 200,
                        0, 0, 10);
    r = http_get(port, "/metrics");
    assert_non_null(strstr(r, "HTTP/1.1 200"));
    assert_non_null(strstr(r, "text/plain; version=0.0.4"));
    assert_non_null(strstr(r,
                           "rt_fe_requests_total{account=\"acct2\","
                           "operation=\"GetTable\",status=\"200\"} 1\n"));
    free(r);
    r = http_get(port, "/health");
    assert_non_null(strstr(r, "HTTP/1.1 200"));
    free(r);
    r = http_get(port, "/Tables");
    assert_non_null(strstr(r, "HTTP/1.1 404"));
    free(r);
    fe_metrics_destroy(m);
    fe_accounts_free(&a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_op_labels),
        cmocka_unit_test(test_requests_summed),
        cmocka_unit_test(test_rpc),
        cmocka_unit_test(test_listener),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
