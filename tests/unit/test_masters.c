/* Masters list: parsing, the order addresses are tried in and the waits
 * between them (pure), and a link that follows a follower's hint to the
 * leader or skips a dead master over real loopback connections. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "rt.pb-c.h"
#include "rt_err.h"
#include "rt_masters.h"
#include "rt_rpc.h"

/* ---- Tests: the list ------------------------------------------------ */

/* One address or several parse; the first is current. */
static void test_parse(void **state)
{
    struct rt_masters m;
    (void)state;
    assert_int_equal(rt_masters_init(&m, "127.0.0.1:10100"), 0);
    assert_int_equal(m.n, 1);
    assert_string_equal(rt_masters_current(&m), "127.0.0.1:10100");
    assert_int_equal(rt_masters_init(&m, "127.0.0.1:1,[::1]:2,localhost:3"), 0);
    assert_int_equal(m.n, 3);
    assert_string_equal(rt_masters_current(&m), "127.0.0.1:1");
    assert_string_equal(m.addrs[1], "[::1]:2");
    assert_string_equal(m.addrs[2], "localhost:3");
}

/* Empty entries, bad addresses, port 0 and too many entries are refused. */
static void test_parse_bad(void **state)
{
    struct rt_masters m;
    char many[RT_MASTERS_MAX * 20 + 32] = "";
    (void)state;
    assert_int_equal(rt_masters_init(&m, ""), RT_EINVAL);
    assert_int_equal(rt_masters_init(&m, NULL), RT_EINVAL);
    assert_int_equal(rt_masters_init(&m, "127.0.0.1:1,"), RT_EINVAL);
    assert_int_equal(rt_masters_init(&m, ",127.0.0.1:1"), RT_EINVAL);
    assert_int_equal(rt_masters_init(&m, "127.0.0.1:1,,127.0.0.1:2"),
                     RT_EINVAL);
    assert_int_equal(rt_masters_init(&m, "127.0.0.1"), RT_EINVAL);
    assert_int_equal(rt_masters_init(&m, "127.0.0.1:0"), RT_EINVAL);
    assert_int_equal(rt_masters_init(&m, "master_1:10100"), RT_EINVAL);
    /* A DNS name is an address (resolved when dialled). */
    assert_int_equal(rt_masters_init(&m, "rt-m1.internal:10100"), 0);
    for (int i = 0; i <= RT_MASTERS_MAX; i++) {
        strcat(many, i ? ",127.0.0.1:1" : "127.0.0.1:1");
    }
    assert_int_equal(rt_masters_init(&m, many), RT_EINVAL);
}

/* Without hints the list is walked in order, RT_MASTERS_TRY_MS apart, and
 * a round where every address failed ends with RT_MASTERS_ROUND_MS. */
static void test_rotation(void **state)
{
    struct rt_masters m;
    (void)state;
    assert_int_equal(rt_masters_init(&m,
                                     "127.0.0.1:1,127.0.0.1:2,"
                                     "127.0.0.1:3"),
                     0);
    assert_int_equal(rt_masters_failed(&m, NULL), RT_MASTERS_TRY_MS);
    assert_string_equal(rt_masters_current(&m), "127.0.0.1:2");
    assert_int_equal(rt_masters_failed(&m, ""), RT_MASTERS_TRY_MS);
    assert_string_equal(rt_masters_current(&m), "127.0.0.1:3");
    assert_int_equal(rt_masters_failed(&m, NULL), RT_MASTERS_ROUND_MS);
    assert_string_equal(rt_masters_current(&m), "127.0.0.1:1");
    /* A master that answered stays current and the round starts over. */
    assert_int_equal(rt_masters_failed(&m, NULL), RT_MASTERS_TRY_MS);
    rt_masters_reached(&m);
    assert_string_equal(rt_masters_current(&m), "127.0.0.1:2");
    assert_int_equal(rt_masters_failed(&m, NULL), RT_MASTERS_TRY_MS);
    assert_int_equal(rt_masters_failed(&m, NULL), RT_MASTERS_TRY_MS);
    assert_int_equal(rt_masters_failed(&m, NULL), RT_MASTERS_ROUND_MS);
    assert_string_equal(rt_masters_current(&m), "127.0.0.1:2");
}

/* A named leader is tried at once, even if it is not in the list; when it
 * fails the list goes on after the address that named it; a name from a
 * named leader waits RT_MASTERS_TRY_MS; a bad or self name is no name. */
static void test_hints(void **state)
{
    struct rt_masters m;
    (void)state;
    assert_int_equal(rt_masters_init(&m, "127.0.0.1:1,127.0.0.1:2"), 0);
    assert_int_equal(rt_masters_failed(&m, "127.0.0.1:9"), 0);
    assert_true(rt_masters_on_hint(&m));
    assert_string_equal(rt_masters_current(&m), "127.0.0.1:9");
    assert_int_equal(rt_masters_failed(&m, "127.0.0.1:8"), RT_MASTERS_TRY_MS);
    assert_string_equal(rt_masters_current(&m), "127.0.0.1:8");
    assert_int_equal(rt_masters_failed(&m, NULL), RT_MASTERS_TRY_MS);
    assert_false(rt_masters_on_hint(&m));
    assert_string_equal(rt_masters_current(&m), "127.0.0.1:2");
    assert_int_equal(rt_masters_failed(&m, "127.0.0.1:2"),
                     RT_MASTERS_ROUND_MS); /* names itself: no name */
    assert_string_equal(rt_masters_current(&m), "127.0.0.1:1");
    assert_int_equal(rt_masters_failed(&m, "no_such_host:1"),
                     RT_MASTERS_TRY_MS);
    assert_string_equal(rt_masters_current(&m), "127.0.0.1:2");
    /* One address: a named leader, then back to the address. */
    assert_int_equal(rt_masters_init(&m, "127.0.0.1:1"), 0);
    assert_int_equal(rt_masters_failed(&m, "127.0.0.1:2"), 0);
    assert_string_equal(rt_masters_current(&m), "127.0.0.1:2");
    assert_int_equal(rt_masters_failed(&m, NULL), RT_MASTERS_ROUND_MS);
    assert_string_equal(rt_masters_current(&m), "127.0.0.1:1");
}

/* ---- Fixture: two masters on loopback ---------------------------------- */

struct fx
{
    uv_loop_t loop;
    uv_timer_t watchdog;
    struct rt_rpc_server *follower, *leader;
    char leader_addr[64];
    struct rt_masters_link *link;
    int follower_calls, leader_calls;
    int ups, done;
    int moved;
    int first_dies; /* the first master to answer closes after it */
};

static struct fx F;

static void watchdog_cb(uv_timer_t *t)
{
    (void)t;
    fail_msg("test timed out");
}

/* A follower: every call is answered RT_ENOTLEADER naming the leader. */
static void follower_request(struct rt_rpc_conn *conn,
                             uint32_t method,
                             uint64_t id,
                             const uint8_t *body,
                             size_t len,
                             void *ud)
{
    Rt__NotLeader hint = RT__NOT_LEADER__INIT;
    (void)body;
    (void)len;
    (void)ud;
    F.follower_calls++;
    hint.leader_rpc_addr = F.leader_addr;
    rt_rpc_reply_notleader(conn, id, method, &hint);
}

static void leader_request(struct rt_rpc_conn *conn,
                           uint32_t method,
                           uint64_t id,
                           const uint8_t *body,
                           size_t len,
                           void *ud)
{
    (void)body;
    (void)len;
    (void)ud;
    F.leader_calls++;
    rt_rpc_reply(conn, id, method, 0, NULL, 0);
}

static void fx_close(void)
{
    uv_timer_stop(&F.watchdog);
    rt_masters_link_close(F.link);
    if (F.follower) {
        rt_rpc_server_close(F.follower);
    }
    rt_rpc_server_close(F.leader);
    uv_close((uv_handle_t *)&F.watchdog, NULL);
}

static void register_cb(int status, const uint8_t *body, size_t len, void *arg)
{
    (void)arg;
    if (status == RT_ECANCELED) {
        return;
    }
    if (rt_masters_link_reply(F.link, status, body, len)) {
        F.moved++;
        return; /* registers again once the link is up */
    }
    if (status == 0 && F.first_dies && F.done == 0) {
        /* The master that answered goes away: the link moves on. */
        F.done++;
        rt_rpc_server_close(F.follower);
        F.follower = NULL;
    } else if (status == 0) {
        F.done++;
        fx_close();
    }
}

/* The owner registers whenever the link comes up, as a partition server
 * does. */
static void link_conn(struct rt_rpc_conn *conn, int up, void *ud)
{
    (void)ud;
    if (up) {
        F.ups++;
        assert_int_equal(rt_rpc_call_pb(conn, RT__METHOD__PS_REGISTER, NULL, 0,
                                        register_cb, NULL),
                         0);
    }
}

/* Starts a master on an ephemeral port answering with @cb; its address
 * goes to @addr. */
static struct rt_rpc_server *start_master(rt_rpc_request_cb cb,
                                          char *addr,
                                          size_t size)
{
    struct rt_rpc_server *srv;
    assert_int_equal(
        rt_rpc_server_start(&F.loop, "127.0.0.1", 0, cb, NULL, NULL, &srv), 0);
    snprintf(addr, size, "127.0.0.1:%d", rt_rpc_server_port(srv));
    return srv;
}

static void fx_init(void)
{
    memset(&F, 0, sizeof(F));
    assert_int_equal(uv_loop_init(&F.loop), 0);
    uv_timer_init(&F.loop, &F.watchdog);
    uv_timer_start(&F.watchdog, watchdog_cb, 8000, 0);
}

static void fx_run(void)
{
    uv_run(&F.loop, UV_RUN_DEFAULT);
    assert_int_equal(uv_loop_close(&F.loop), 0);
}

/* ---- Tests: the link ------------------------------------------------- */

/* Given FOLLOWER,LEADER, the link follows the follower's hint and the
 * owner ends registered at the leader. */
static void test_link_follows_hint(void **state)
{
    char follower[64], list[160];
    (void)state;
    fx_init();
    F.follower = start_master(follower_request, follower, sizeof(follower));
    F.leader =
        start_master(leader_request, F.leader_addr, sizeof(F.leader_addr));
    snprintf(list, sizeof(list), "%s,%s", follower, F.leader_addr);
    assert_int_equal(
        rt_masters_link_start(&F.loop, list, NULL, link_conn, NULL, &F.link),
        0);
    fx_run();
    assert_int_equal(F.follower_calls, 1);
    assert_int_equal(F.leader_calls, 1);
    assert_int_equal(F.moved, 1);
    assert_int_equal(F.ups, 2);
    assert_int_equal(F.done, 1);
}

/* A follower that names a leader outside the list: the link learns it. */
static void test_link_learns_leader(void **state)
{
    char follower[64];
    (void)state;
    fx_init();
    F.follower = start_master(follower_request, follower, sizeof(follower));
    F.leader =
        start_master(leader_request, F.leader_addr, sizeof(F.leader_addr));
    assert_int_equal(rt_masters_link_start(&F.loop, follower, NULL, link_conn,
                                           NULL, &F.link),
                     0);
    fx_run();
    assert_int_equal(F.leader_calls, 1);
    assert_int_equal(F.moved, 1);
    assert_int_equal(F.done, 1);
}

/* A dead first master (nobody listens) is passed over for the next
 * address of the list. */
static void test_link_skips_dead(void **state)
{
    char dead[64], list[160];
    struct rt_rpc_server *gone;
    (void)state;
    fx_init();
    gone = start_master(leader_request, dead, sizeof(dead));
    rt_rpc_server_close(gone);
    F.follower = start_master(follower_request, list, sizeof(list));
    F.leader =
        start_master(leader_request, F.leader_addr, sizeof(F.leader_addr));
    snprintf(list, sizeof(list), "%s,%s", dead, F.leader_addr);
    assert_int_equal(
        rt_masters_link_start(&F.loop, list, NULL, link_conn, NULL, &F.link),
        0);
    fx_run();
    assert_int_equal(F.follower_calls, 0);
    assert_int_equal(F.leader_calls, 1);
    assert_int_equal(F.moved, 0);
    assert_int_equal(F.ups, 1);
    assert_int_equal(F.done, 1);
}

/* A master that answered and then went away: the link moves to the next
 * address of the list at once and the owner registers there. */
static void test_link_leader_dies(void **state)
{
    char first[64], list[160];
    (void)state;
    fx_init();
    F.first_dies = 1;
    F.follower = start_master(leader_request, first, sizeof(first));
    F.leader =
        start_master(leader_request, F.leader_addr, sizeof(F.leader_addr));
    snprintf(list, sizeof(list), "%s,%s", first, F.leader_addr);
    assert_int_equal(
        rt_masters_link_start(&F.loop, list, NULL, link_conn, NULL, &F.link),
        0);
    fx_run();
    assert_int_equal(F.leader_calls, 2);
    assert_int_equal(F.moved, 0);
    assert_int_equal(F.ups, 2);
    assert_int_equal(F.done, 2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse),
        cmocka_unit_test(test_parse_bad),
        cmocka_unit_test(test_rotation),
        cmocka_unit_test(test_hints),
        cmocka_unit_test(test_link_follows_hint),
        cmocka_unit_test(test_link_learns_leader),
        cmocka_unit_test(test_link_skips_dead),
        cmocka_unit_test(test_link_leader_dies),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
