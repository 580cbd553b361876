/* Masters: how a partition server or a front end finds the acting master
 * among several (docs/DESIGN-master-ha.md §5.1-§5.2).
 *
 * --master takes a comma-separated list of RPC addresses (one address
 * still works). The client keeps the last master that answered; when the
 * connection fails, closes, or the master answers RT_ENOTLEADER, it goes
 * at once to the leader the answer names (rt.NotLeader.leader_rpc_addr),
 * else to the next address of the list. Attempts start at least
 * RT_MASTERS_TRY_MS apart (a named leader at once), and after the whole
 * list failed the next round waits RT_MASTERS_ROUND_MS.
 *
 * Two layers:
 *  - struct rt_masters: the list and the position in it; pure (no I/O, no
 *    clock), unit-tested on its own;
 *  - struct rt_masters_link: an rt_rpc_client that follows it. A list of
 *    one address behaves exactly as a plain rt_rpc_client (its own
 *    reconnect backoff, no extra timer) until a master names another
 *    leader.
 *
 * Thread: a struct rt_masters is owned by one thread; a link lives on the
 * loop that created it, like every rt_rpc object. */
#ifndef RT_MASTERS_H
#define RT_MASTERS_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "rt_rpc.h"

#define RT_MASTERS_MAX 16       /* addresses in a list */
#define RT_MASTERS_ADDR_MAX 128 /* bytes of one address, NUL included */
#define RT_MASTERS_TRY_MS 100   /* between attempts */
#define RT_MASTERS_ROUND_MS 500 /* after a round where every address failed */

struct rt_masters
{
    char addrs[RT_MASTERS_MAX][RT_MASTERS_ADDR_MAX];
    size_t n;
    size_t idx;                     /* the list address tried last */
    size_t failed;                  /* list addresses failed this round */
    char hint[RT_MASTERS_ADDR_MAX]; /* non-empty: trying a named leader */
};

/* Parses @list ("host:port[,host:port...]", rt_addr rules, port not 0)
 * into @m; the first address is current. Returns 0, or RT_EINVAL for an
 * empty entry, a bad address or more than RT_MASTERS_MAX of them (@m is
 * then unusable). Nothing is kept of @list. */
int rt_masters_init(struct rt_masters *m, const char *list);
/* The address to talk to now: the named leader being tried, else the
 * current list address. Valid until the next call that changes @m. */
const char *rt_masters_current(const struct rt_masters *m);
/* 1 when a named leader (not a list address) is current. */
int rt_masters_on_hint(const struct rt_masters *m);
/* The current address failed (connect failure, connection closed, or an
 * RT_ENOTLEADER answer). @hint (borrowed; NULL or "" = none) is the leader
 * the answer named: when it is a valid address other than the current one
 * it becomes current, else the next list address does (after a named
 * leader, the one after the list address that named it). Returns how many
 * ms to wait before the attempt on the new current address: 0 for a
 * leader named by a list address, RT_MASTERS_TRY_MS for the next address
 * (or a leader named by a named leader, so stale names cannot spin), and
 * RT_MASTERS_ROUND_MS when every list address failed since the last
 * rt_masters_reached(). */
uint32_t rt_masters_failed(struct rt_masters *m, const char *hint);
/* The current master answered as the leader: it stays current and the
 * round starts over. */
void rt_masters_reached(struct rt_masters *m);

/* A link: an rt_rpc_client to the current master of a list. @on_request
 * serves the master's calls (may be NULL) and @on_conn reports the
 * connection up or down (may be NULL), both with @ud, as for
 * rt_rpc_client_start; a move to another master is reported as a down
 * then an up. Returns 0 with *@out set (rt_masters_link_close frees it),
 * or RT_EINVAL (bad list). */
struct rt_masters_link;
int rt_masters_link_start(uv_loop_t *loop,
                          const char *list,
                          rt_rpc_request_cb on_request,
                          rt_rpc_conn_cb on_conn,
                          void *ud,
                          struct rt_masters_link **out);
/* The link's client: stable for the link's life (calls go on
 * rt_rpc_client_conn of it). */
struct rt_rpc_client *rt_masters_link_client(struct rt_masters_link *l);
/* The master the client talks to, for log lines (inside the down callback
 * of a move, still the old one). Valid until the link moves. */
const char *rt_masters_link_addr(const struct rt_masters_link *l);
/* Every reply the owner gets from the master goes through here (@body
 * borrowed). Status 0: this master acts, the round starts over.
 * RT_ENOTLEADER: the link moves to the leader named in the body or to the
 * next address, and returns 1: what the owner did with the old master
 * (registration, subscription) must be done again once the link is up.
 * Any other status: nothing (a closed connection moves the link by
 * itself). Returns 0 when the link did not move. */
int rt_masters_link_reply(struct rt_masters_link *l,
                          int status,
                          const uint8_t *body,
                          size_t len);
/* Closes the client (pending calls get RT_ECANCELED) and the timer; the
 * memory goes once the loop has run their close callbacks. */
void rt_masters_link_close(struct rt_masters_link *l);

#endif
