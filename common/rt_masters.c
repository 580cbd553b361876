/* Masters: the list a client follows to the acting master; see
 * rt_masters.h.
 *
 * Happy path of a link: rt_rpc_client_start on the first address ->
 * connection up -> the owner registers (or says hello) -> its reply,
 * status 0, goes through rt_masters_link_reply -> rt_masters_reached: this
 * master stays current for as long as it answers.
 *
 * Failure modes (lists of two or more, or a named leader being tried):
 *  - RT_ENOTLEADER answer: rt_masters_failed with the named leader ->
 *    rt_rpc_client_set_addr at once (the old connection's down is passed
 *    on to the owner but is no failure of the new address);
 *  - the connection closes: the next address, RT_MASTERS_TRY_MS after the
 *    last attempt began;
 *  - the address does not come up within RT_MASTERS_TRY_MS of the attempt
 *    (refused, unreachable, a slow handshake): the next address; the
 *    client keeps retrying the old one with its own backoff until the
 *    move, and an up meanwhile is taken;
 *  - every list address failed: the next round starts RT_MASTERS_ROUND_MS
 *    later.
 * With one address and no named leader the link never moves: the
 * client's own reconnect backoff (rt_rpc.h) applies, as before lists. */
#include "rt_masters.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt.pb-c.h"
#include "rt_addr.h"
#include "rt_alloc.h"
#include "rt_err.h"
#include "rt_log.h"

/* An address the RPC client accepts: host:port (numeric or a DNS name),
 * port not 0. */
static int rt__masters_addr_ok(const char *addr)
{
    return strlen(addr) < RT_MASTERS_ADDR_MAX &&
           rt_addr_dial_check(addr, NULL, NULL) == 0;
}

int rt_masters_init(struct rt_masters *m, const char *list)
{
    const char *p = list;

    memset(m, 0, sizeof(*m));
    if (list == NULL) {
        return RT_EINVAL;
    }
    for (;;) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);

        if (m->n == RT_MASTERS_MAX || len == 0 || len >= RT_MASTERS_ADDR_MAX) {
            return RT_EINVAL;
        }
        memcpy(m->addrs[m->n], p, len);
        m->addrs[m->n][len] = '\0';
        if (!rt__masters_addr_ok(m->addrs[m->n])) {
            return RT_EINVAL;
        }
        m->n++;
        if (!end) {
            return 0;
        }
        p = end + 1;
    }
}

const char *rt_masters_current(const struct rt_masters *m)
{
    return m->hint[0] ? m->hint : m->addrs[m->idx];
}

int rt_masters_on_hint(const struct rt_masters *m)
{
    return m->hint[0] != '\0';
}

uint32_t rt_masters_failed(struct rt_masters *m, const char *hint)
{
    int from_hint = rt_masters_on_hint(m);

    if (hint && hint[0] && strcmp(hint, rt_masters_current(m)) != 0 &&
        rt__masters_addr_ok(hint)) {
        snprintf(m->hint, sizeof(m->hint), "%s", hint);
        return from_hint ? RT_MASTERS_TRY_MS : 0;
    }
    m->hint[0] = '\0';
    m->idx = (m->idx + 1) % m->n;
    if (++m->failed >= m->n) {
        m->failed = 0;
        return RT_MASTERS_ROUND_MS;
    }
    return RT_MASTERS_TRY_MS;
}

void rt_masters_reached(struct rt_masters *m)
{
    m->failed = 0;
}

/* ---- Link ----------------------------------------------------------- */

struct rt_masters_link
{
    struct rt_masters list;
    char addr[RT_MASTERS_ADDR_MAX]; /* the client's: the old one until the
                                     * move's down is reported */
    struct rt_rpc_client *client;
    uv_loop_t *loop;
    uv_timer_t timer;    /* the pause before an attempt, then its window */
    int pausing;         /* the timer ends a pause (else a window) */
    uint64_t attempt_at; /* uv_now of the last attempt */
    int moving;          /* inside our own set_addr */
    rt_rpc_request_cb on_request;
    rt_rpc_conn_cb on_conn;
    void *ud;
};

/* The link moves only between several addresses or away from a named
 * leader: one address alone keeps the client's own reconnects. */
static int rt__link_follows(const struct rt_masters_link *l)
{
    return l->list.n > 1 || rt_masters_on_hint(&l->list);
}

static void rt__link_timer_cb(uv_timer_t *t);

/* Connects to the current address and gives it RT_MASTERS_TRY_MS. */
static void rt__link_attempt(struct rt_masters_link *l)
{
    const char *addr = rt_masters_current(&l->list);

    /* The first move after a master answered is news; the rounds of an
     * outage are not. */
    rt_log(l->list.failed <= 1 || rt_masters_on_hint(&l->list) ? RT_LOG_INFO
                                                               : RT_LOG_DEBUG,
           "trying master %s", addr);
    l->moving = 1;
    if (rt_rpc_client_set_addr(l->client, addr) != 0) {
        rt_log(RT_LOG_WARN, "master %s: bad address", addr); /* checked */
    }
    l->moving = 0;
    snprintf(l->addr, sizeof(l->addr), "%s", addr);
    l->attempt_at = uv_now(l->loop);
    l->pausing = 0;
    uv_timer_start(&l->timer, rt__link_timer_cb, RT_MASTERS_TRY_MS, 0);
}

/* 1 while waiting to try the next address: the move is decided, and what
 * the old master still says (a second RT_ENOTLEADER, its close) is not
 * another failure. */
static int rt__link_pausing(const struct rt_masters_link *l)
{
    return l->pausing && uv_is_active((const uv_handle_t *)&l->timer);
}

/* The current address failed: on to the next (or the named leader). */
static void rt__link_move(struct rt_masters_link *l, const char *hint)
{
    uint32_t wait;
    uint64_t now = uv_now(l->loop);

    if (rt__link_pausing(l)) {
        return;
    }
    wait = rt_masters_failed(&l->list, hint);

    if (wait == RT_MASTERS_TRY_MS) {
        /* Attempts start RT_MASTERS_TRY_MS apart: a window that ran out
         * has waited already. */
        uint64_t due = l->attempt_at + RT_MASTERS_TRY_MS;
        wait = due > now ? (uint32_t)(due - now) : 0;
    }
    if (wait == 0) {
        rt__link_attempt(l);
        return;
    }
    l->pausing = 1;
    uv_timer_start(&l->timer, rt__link_timer_cb, wait, 0);
}

static void rt__link_timer_cb(uv_timer_t *t)
{
    struct rt_masters_link *l = t->data;

    if (l->pausing) {
        rt__link_attempt(l);
    } else if (!rt_rpc_conn_is_up(rt_rpc_client_conn(l->client))) {
        rt_log(RT_LOG_DEBUG, "master %s did not answer in %d ms",
               rt_masters_current(&l->list), RT_MASTERS_TRY_MS);
        rt__link_move(l, NULL);
    }
}

static void rt__link_on_conn(struct rt_rpc_conn *conn, int up, void *ud)
{
    struct rt_masters_link *l = ud;

    if (up) {
        uv_timer_stop(&l->timer);
    }
    if (l->on_conn) {
        l->on_conn(conn, up, l->ud);
    }
    if (!up && !l->moving && rt__link_follows(l)) {
        rt__link_move(l, NULL);
    }
}

static void rt__link_on_request(struct rt_rpc_conn *conn,
                                uint32_t method,
                                uint64_t id,
                                const uint8_t *body,
                                size_t len,
                                void *ud)
{
    struct rt_masters_link *l = ud;

    if (l->on_request) {
        l->on_request(conn, method, id, body, len, l->ud);
    } else {
        rt_rpc_reply_err(conn, id, method, RT_ENOTIMPL, NULL);
    }
}

int rt_masters_link_start(uv_loop_t *loop,
                          const char *list,
                          rt_rpc_request_cb on_request,
                          rt_rpc_conn_cb on_conn,
                          void *ud,
                          struct rt_masters_link **out)
{
    struct rt_masters_link *l = rt_xcalloc(1, sizeof(*l));
    int rc = rt_masters_init(&l->list, list);

    if (rc == 0) {
        rc = rt_rpc_client_start(loop, rt_masters_current(&l->list),
                                 rt__link_on_request, rt__link_on_conn, l,
                                 &l->client);
    }
    if (rc == 0) {
        /* Only a master may answer a registration or push a map. */
        rt_rpc_client_expect_roles(l->client, RT_RPC_ROLE_MASTER);
    }
    if (rc != 0) {
        free(l);
        return rc;
    }
    l->loop = loop;
    snprintf(l->addr, sizeof(l->addr), "%s", rt_masters_current(&l->list));
    l->on_request = on_request;
    l->on_conn = on_conn;
    l->ud = ud;
    uv_timer_init(loop, &l->timer);
    l->timer.data = l;
    l->attempt_at = uv_now(loop);
    if (rt__link_follows(l)) {
        uv_timer_start(&l->timer, rt__link_timer_cb, RT_MASTERS_TRY_MS, 0);
    }
    *out = l;
    return 0;
}

struct rt_rpc_client *rt_masters_link_client(struct rt_masters_link *l)
{
    return l->client;
}

const char *rt_masters_link_addr(const struct rt_masters_link *l)
{
    return l->addr;
}

int rt_masters_link_reply(struct rt_masters_link *l,
                          int status,
                          const uint8_t *body,
                          size_t len)
{
    Rt__NotLeader *n;

    if (status == 0) {
        rt_masters_reached(&l->list);
        return 0;
    }
    if (status != RT_ENOTLEADER) {
        return 0;
    }
    n = rt_notleader_parse(status, body, len);
    rt_log(RT_LOG_INFO, "master %s is not the leader (leader: %s)",
           rt_masters_current(&l->list),
           n && n->leader_rpc_addr[0] ? n->leader_rpc_addr : "unknown");
    rt__link_move(l, n ? n->leader_rpc_addr : NULL);
    if (n) {
        rt__not_leader__free_unpacked(n, NULL);
    }
    return 1;
}

static void rt__link_close_cb(uv_handle_t *h)
{
    free(h->data);
}

void rt_masters_link_close(struct rt_masters_link *l)
{
    if (l == NULL) {
        return;
    }
    l->moving = 1; /* the close's down is no failure */
    rt_rpc_client_close(l->client);
    uv_close((uv_handle_t *)&l->timer, rt__link_close_cb);
}
