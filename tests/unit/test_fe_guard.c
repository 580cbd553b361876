/* The front end's rules against hostile clients (fe_guard.h): request
 * framing per RFC 9112 §6.3, the deadlines of each connection phase, the
 * shedding order, and the shared caps (connections in total and per
 * address, the reserve, requests in flight per account). */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "fe_guard.h"
#include "rt_err.h"

/* Helpers */

/* Framing of the headers in @h (NULL-terminated name, value pairs). */
static int framing(const char *const *h, int http10)
{
    struct fe_guard_framing f;
    const char *why = NULL;
    int rc;
    fe_guard_framing_init(&f);
    for (; h[0]; h += 2) {
        fe_guard_framing_add(&f, h[0], strlen(h[0]), h[1], strlen(h[1]));
    }
    rc = fe_guard_framing_check(&f, http10, &why);
    assert_true((rc == 0) == (why == NULL));
    return rc;
}

static struct sockaddr_in v4(const char *ip)
{
    struct sockaddr_in sa;
    memset(&sa, 0, sizeof(sa));
    sa.sin_family = AF_INET;
    sa.sin_port = htons(1234);
    inet_pton(AF_INET, ip, &sa.sin_addr);
    return sa;
}

/* Tests */

/* One Content-Length, or one "chunked", or neither: accepted. */
static void test_framing_plain(void **state)
{
    static const char *const none[] = {"Host", "x", NULL};
    static const char *const cl[] = {"content-length", "42", NULL};
    static const char *const zero[] = {"Content-Length", "0", NULL};
    static const char *const te[] = {"Transfer-Encoding", "Chunked", NULL};
    (void)state;
    assert_int_equal(framing(none, 0), 0);
    assert_int_equal(framing(cl, 0), 0);
    assert_int_equal(framing(zero, 1), 0);
    assert_int_equal(framing(te, 0), 0);
}

/* Every shape a smuggler uses: RT_EHEADER. */
static void test_framing_ambiguous(void **state)
{
    static const char *const both[] = {"Content-Length", "5",
                                       "Transfer-Encoding", "chunked", NULL};
    static const char *const two[] = {"Content-Length", "0", "Content-Length",
                                      "40", NULL};
    static const char *const equal[] = {"Content-Length", "7", "content-length",
                                        "7", NULL};
    static const char *const list[] = {"Content-Length", "7, 7", NULL};
    static const char *const sign[] = {"Content-Length", "+7", NULL};
    static const char *const empty[] = {"Content-Length", "", NULL};
    static const char *const huge[] = {"Content-Length", "99999999999999999999",
                                       NULL};
    static const char *const gzip[] = {"Transfer-Encoding", "gzip", NULL};
    static const char *const tlist[] = {"Transfer-Encoding", "gzip, chunked",
                                        NULL};
    static const char *const ttwo[] = {"Transfer-Encoding", "chunked",
                                       "Transfer-Encoding", "chunked", NULL};
    static const char *const tpre[] = {"Transfer-Encoding", "xchunked", NULL};
    static const char *const te10[] = {"Transfer-Encoding", "chunked", NULL};
    (void)state;
    assert_int_equal(framing(both, 0), RT_EHEADER);
    assert_int_equal(framing(two, 0), RT_EHEADER);
    assert_int_equal(framing(equal, 0), RT_EHEADER);
    assert_int_equal(framing(list, 0), RT_EHEADER);
    assert_int_equal(framing(sign, 0), RT_EHEADER);
    assert_int_equal(framing(empty, 0), RT_EHEADER);
    assert_int_equal(framing(huge, 0), RT_EHEADER);
    assert_int_equal(framing(gzip, 0), RT_EHEADER);
    assert_int_equal(framing(tlist, 0), RT_EHEADER);
    assert_int_equal(framing(ttwo, 0), RT_EHEADER);
    assert_int_equal(framing(tpre, 0), RT_EHEADER);
    assert_int_equal(framing(te10, 1), RT_EHEADER);
}

/* RFC 9112 §5.1: whitespace between a field name and the colon, whatever
 * the field: RT_EHEADER (a proxy that trims it would frame by it). */
static void test_framing_name_whitespace(void **state)
{
    static const char *const te[] = {"Transfer-Encoding ", "chunked", NULL};
    static const char *const cl[] = {"Content-Length\t", "0", NULL};
    static const char *const other[] = {"X-Thing ", "1", NULL};
    (void)state;
    assert_int_equal(framing(te, 0), RT_EHEADER);
    assert_int_equal(framing(cl, 0), RT_EHEADER);
    assert_int_equal(framing(other, 0), RT_EHEADER);
}

/* Each phase's bound; zero disables; the body bound grows with what
 * arrived. */
static void test_deadlines(void **state)
{
    struct fe_guard_cfg c = {.header_timeout_ms = 10000,
                             .body_timeout_ms = 20000,
                             .body_min_rate = 1000,
                             .idle_timeout_ms = 30000};
    (void)state;
    assert_int_equal(fe_guard_deadline(&c, FE_GUARD_FRESH, 5, 0), 10005);
    assert_int_equal(fe_guard_deadline(&c, FE_GUARD_HEADERS, 5, 0), 10005);
    assert_int_equal(fe_guard_deadline(&c, FE_GUARD_IDLE, 5, 0), 30005);
    assert_int_equal(fe_guard_deadline(&c, FE_GUARD_BODY, 5, 0), 20005);
    assert_int_equal(fe_guard_deadline(&c, FE_GUARD_BODY, 5, 2500), 22505);
    assert_true(fe_guard_deadline(&c, FE_GUARD_BUSY, 5, 0) == UINT64_MAX);
    c.idle_timeout_ms = 0;
    assert_true(fe_guard_deadline(&c, FE_GUARD_IDLE, 5, 0) == UINT64_MAX);
}

static int swept;
static void on_swept(struct fe_guard_conn *c, void *arg)
{
    (void)arg;
    c->closing = 1;
    swept++;
}

/* A first request's header bound runs from the accept, a later one's
 * from its request line; the sweep reports each overdue one once. */
static void test_list_sweep(void **state)
{
    struct fe_guard_cfg cfg = {.header_timeout_ms = 100,
                               .idle_timeout_ms = 1000};
    struct fe_guard_list l = {0};
    struct fe_guard_conn a = {0}, b = {0};
    (void)state;
    fe_guard_list_add(&l, &a, 0);
    fe_guard_list_add(&l, &b, 0);
    fe_guard_conn_phase(&a, FE_GUARD_HEADERS, 90); /* keeps since 0 */
    fe_guard_conn_phase(&b, FE_GUARD_BODY, 50);
    fe_guard_conn_phase(&b, FE_GUARD_BUSY, 60);
    fe_guard_conn_phase(&b, FE_GUARD_IDLE, 70); /* served */
    fe_guard_conn_phase(&b, FE_GUARD_HEADERS, 80);
    swept = 0;
    assert_int_equal(fe_guard_list_sweep(&l, &cfg, 150, on_swept, NULL), 1);
    assert_true(a.closing && !b.closing);
    assert_int_equal(fe_guard_list_sweep(&l, &cfg, 150, on_swept, NULL), 0);
    assert_int_equal(fe_guard_list_sweep(&l, &cfg, 180, on_swept, NULL), 1);
    assert_int_equal(swept, 2);
    fe_guard_list_remove(&l, &a);
    fe_guard_list_remove(&l, &b);
    assert_null(l.head);
    assert_int_equal(l.n, 0);
}

/* The victim is the oldest never-served connection still waiting for its
 * request; an idle served one only when there is none; never a busy one
 * or the newcomer. */
static void test_list_victim(void **state)
{
    struct fe_guard_list l = {0};
    struct fe_guard_conn busy = {0}, idle = {0}, slow = {0}, nu = {0};
    (void)state;
    fe_guard_list_add(&l, &busy, 0);
    fe_guard_list_add(&l, &idle, 1);
    fe_guard_list_add(&l, &slow, 2);
    fe_guard_list_add(&l, &nu, 3);
    fe_guard_conn_phase(&busy, FE_GUARD_BUSY, 5);
    fe_guard_conn_phase(&idle, FE_GUARD_BUSY, 5);
    fe_guard_conn_phase(&idle, FE_GUARD_IDLE, 6);
    fe_guard_conn_phase(&slow, FE_GUARD_HEADERS, 7);
    assert_ptr_equal(fe_guard_list_victim(&l, &nu), &slow);
    slow.closing = 1;
    assert_ptr_equal(fe_guard_list_victim(&l, &nu), &idle);
    idle.closing = 1;
    assert_null(fe_guard_list_victim(&l, &nu));
}

/* The caps: per address, in total, and the reserve that sheds. */
static void test_conn_caps(void **state)
{
    struct fe_guard_cfg cfg = {
        .max_conns = 6, .max_conns_per_ip = 3, .reserve = 2};
    struct fe_guard *g;
    struct sockaddr_in a = v4("10.0.0.1"), b = v4("10.0.0.2");
    struct sockaddr_in c = v4("10.0.0.3");
    struct sockaddr_in a2 = v4("10.0.0.1");
    (void)state;
    a2.sin_port = htons(999); /* another port, the same address */
    assert_int_equal(fe_guard_create(&cfg, &g), 0);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(fe_guard_conn_open(g, (struct sockaddr *)&a),
                         FE_GUARD_ADMIT);
    }
    assert_int_equal(fe_guard_conn_check(g, (struct sockaddr *)&a2),
                     FE_GUARD_REFUSE_ADDR);
    assert_int_equal(fe_guard_conn_open(g, (struct sockaddr *)&a2),
                     FE_GUARD_REFUSE_ADDR);
    assert_int_equal(fe_guard_conn_open(g, (struct sockaddr *)&b),
                     FE_GUARD_ADMIT);
    /* 5 > 6 - 2: admitted, shed one */
    assert_int_equal(fe_guard_conn_open(g, (struct sockaddr *)&b),
                     FE_GUARD_ADMIT_SHED);
    assert_int_equal(fe_guard_conn_open(g, (struct sockaddr *)&c),
                     FE_GUARD_ADMIT_SHED);
    assert_int_equal(fe_guard_conns(g), 6);
    assert_int_equal(fe_guard_conn_open(g, (struct sockaddr *)&c),
                     FE_GUARD_REFUSE_ALL);
    fe_guard_conn_close(g, (struct sockaddr *)&a);
    assert_int_equal(fe_guard_conn_open(g, (struct sockaddr *)&a2),
                     FE_GUARD_ADMIT_SHED);
    for (int i = 0; i < 3; i++) {
        fe_guard_conn_close(g, (struct sockaddr *)&a);
    }
    fe_guard_conn_close(g, (struct sockaddr *)&b);
    fe_guard_conn_close(g, (struct sockaddr *)&b);
    fe_guard_conn_close(g, (struct sockaddr *)&c);
    assert_int_equal(fe_guard_conns(g), 0);
    fe_guard_destroy(g);
}

/* Requests in flight per account: the excess is RT_EBUSY, other accounts
 * are unaffected, and an exit frees a place. */
static void test_acct_inflight(void **state)
{
    struct fe_guard_cfg cfg = {.max_inflight_per_account = 2};
    struct fe_guard_cfg none = {0};
    struct fe_guard *g, *u;
    (void)state;
    fe_guard_create(&cfg, &g);
    assert_int_equal(fe_guard_acct_enter(g, "a"), 0);
    assert_int_equal(fe_guard_acct_enter(g, "a"), 0);
    assert_int_equal(fe_guard_acct_enter(g, "a"), RT_EBUSY);
    assert_int_equal(fe_guard_acct_enter(g, "b"), 0);
    fe_guard_acct_exit(g, "a");
    assert_int_equal(fe_guard_acct_enter(g, "a"), 0);
    fe_guard_acct_exit(g, "a");
    fe_guard_acct_exit(g, "a");
    fe_guard_acct_exit(g, "b");
    fe_guard_destroy(g);
    fe_guard_create(&none, &u);
    for (int i = 0; i < 100; i++) {
        assert_int_equal(fe_guard_acct_enter(u, "a"), 0);
    }
    fe_guard_destroy(u);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_framing_plain),
        cmocka_unit_test(test_framing_ambiguous),
        cmocka_unit_test(test_framing_name_whitespace),
        cmocka_unit_test(test_deadlines),
        cmocka_unit_test(test_list_sweep),
        cmocka_unit_test(test_list_victim),
        cmocka_unit_test(test_conn_caps),
        cmocka_unit_test(test_acct_inflight),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
