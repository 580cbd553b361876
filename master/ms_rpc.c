/* RPC service of the master (contract in ms_rpc.h): one handler per
 * method of the "master" groups in proto/rt.proto, as listed in
 * master/README.md ("RPC").
 *
 * Happy paths answer at once, except CREATE_TABLE, which places the
 * range's replicas (ms_balance_place; fewer than min-insync live servers:
 * RT_EBUSY, nothing written), commits, then waits (bounded by the assign
 * timeout) for every replica's partition server to acknowledge
 * ASSIGN_RANGES, pushes MAP_UPDATE to the front ends and only then
 * replies. If a server does not answer, the table still exists and the
 * caller still gets success: the server's next heartbeat reply carries
 * the assignment. If the caller's connection is gone by then, the reply is
 * dropped by rt_rpc.
 *
 * The dispatcher decodes each request with the type its row in the
 * method table names (a malformed one gets RT_EINVAL) and frees it after
 * the handler. Every failure is answered with ms__fail() and an RT_E*
 * code. */
#include "ms_rpc.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ms_balance.h"
#include "ms_catalog.h"
#include "ms_cluster.h"
#include "ms_repl.h"
#include "ms_util.h"
#include "rt_alloc.h"
#include "rt_config.h"
#include "rt_err.h"
#include "rt_log.h"

#define MS__DROP_TIMEOUT_MS 2000

/* ---- connections ---- */

void ms_rpc_on_conn(struct rt_rpc_conn *conn, int up, void *ud)
{
    struct ms_rpc *rpc = ud;
    struct ms_peer *p = rt_rpc_conn_data(conn);

    if (up) {
        if (!p) {
            ms_cluster_peer_new(rpc->cl, conn);
        }
        return;
    }
    if (p) {
        if (p->server_id) {
            const struct ms_server *s =
                ms_cluster_server_find(rpc->cl, p->server_id);
            /* Only the server's current connection says it is gone (the
             * newest connection of an id wins). */
            if (s && s->conn == conn && rpc->repl) {
                ms_repl_conn_down(rpc->repl, s->id);
            }
        }
        ms_cluster_peer_gone(rpc->cl, p);
    }
}

/* ---- helpers ---- */

/* The request being handled: whom to answer (peer->conn), with which id
 * and method. */
struct ms__req
{
    struct ms_rpc *rpc;
    struct ms_peer *peer;
    uint64_t id;
    uint32_t method;
};

/* A handler: @req is the request body decoded with its method's
 * descriptor (NULL for the methods that take none), borrowed: the
 * dispatcher frees it after the handler returns. */
typedef void (*ms__handler)(const struct ms__req *q, void *req);

static const char *ms__str(const char *s)
{
    return s ? s : "";
}

static void ms__reply_table(struct rt_rpc_conn *conn,
                            uint64_t id,
                            uint32_t method,
                            const char *account,
                            const char *name,
                            uint64_t table_id)
{
    Rt__Table t = RT__TABLE__INIT;
    t.account = (char *)account;
    t.name = (char *)name;
    t.id = table_id;
    rt_rpc_reply_pb(conn, id, method, 0, &t.base);
}

static void ms__fail(const struct ms__req *q, int rc, const char *msg)
{
    rt_rpc_reply_err(q->peer->conn, q->id, q->method, rc, msg);
}

/* Replies @msg (NULL: an empty body). */
static void ms__reply_pb(const struct ms__req *q, const ProtobufCMessage *msg)
{
    if (msg) {
        rt_rpc_reply_pb(q->peer->conn, q->id, q->method, 0, msg);
    } else {
        rt_rpc_reply(q->peer->conn, q->id, q->method, 0, NULL, 0);
    }
}

/* Answers a registration or heartbeat with the server's assignment. When
 * the map changed (@changed; @bump: its version is not raised yet), the
 * map is marked changed before the reply and pushed after it. */
static void ms__reply_assignment(const struct ms__req *q,
                                 uint64_t server_id,
                                 bool changed,
                                 bool bump)
{
    struct ms_cluster *cl = q->rpc->cl;
    Rt__RegisterResp resp = RT__REGISTER_RESP__INIT;
    struct ms_assignment a;
    if (changed) {
        ms_cluster_map_changed(cl, bump);
    }
    ms_cluster_assignment(cl, server_id, &a);
    resp.server_id = server_id;
    resp.n_ranges = a.n_ranges;
    resp.ranges = a.ranges;
    resp.n_peers = a.n_peers;
    resp.peers = a.peers;
    resp.map_version = ms_catalog_map_version(cl->cat);
    resp.master_term = ms_catalog_master_term(cl->cat);
    ms__reply_pb(q, &resp.base);
    ms_assignment_free(&a);
    if (changed) {
        ms_cluster_map_push(cl);
    }
}

/* A committed change of the map (version raised by the catalog) is
 * answered with Empty only after MAP_UPDATE went out: a front end that
 * subscribed on this connection has the new map before the reply. */
static void ms__reply_pushed(const struct ms__req *q)
{
    ms_cluster_map_push(q->rpc->cl);
    ms__reply_pb(q, NULL);
}

static void ms__reply_map(const struct ms__req *q)
{
    const uint8_t *buf;
    size_t len;
    ms_cluster_map_packed(q->rpc->cl, &buf, &len);
    rt_rpc_reply(q->peer->conn, q->id, q->method, 0, buf, len);
}

/* ---- partition servers: register, heartbeat ---- */

/* A registration that names a known id with an incarnation other than the
 * stored one is a different disk behind that id. While the id is live it
 * is refused (RT_EEXIST: a copy of a data directory, or a wiped server
 * restarted before we saw it go; the latter passes once it is marked
 * down). A server that comes back wiped while down is first taken out of
 * every replica set and ISR (docs/DESIGN-replication.md §8.1: an empty
 * copy must never count as in sync), then accepted as a new, empty
 * server; while that cannot be done yet (it is still the primary of a
 * range, or the range is busy) it is refused with RT_EBUSY and retries.
 * An RF 1 range it owned stays assigned to it, as empty as its disk.
 * Returns false when the registration was refused (answered). */
static bool ms__check_incarnation(const struct ms__req *q,
                                  const Rt__RegisterReq *req)
{
    const struct ms_server_rec *rec;
    const struct ms_server *s;
    char was[2 * MS_INCARNATION_SIZE + 1], now[2 * MS_INCARNATION_SIZE + 1];

    rec = req->server_id
              ? ms_catalog_server_find(q->rpc->cl->cat, req->server_id)
              : NULL;
    if (!rec || !rec->has_incarnation || req->incarnation.len == 0 ||
        memcmp(rec->incarnation, req->incarnation.data, MS_INCARNATION_SIZE) ==
            0) {
        return true;
    }
    ms_hex(rec->incarnation, MS_INCARNATION_SIZE, was);
    ms_hex(req->incarnation.data, MS_INCARNATION_SIZE, now);
    s = ms_cluster_server_find(q->rpc->cl, rec->id);
    if (s && s->state == MS_SERVER_UP) {
        char msg[128];
        rt_log(RT_LOG_WARN,
               "server %" PRIu64
               ": registration from %s refused: incarnation %s, but the id "
               "is live with incarnation %s",
               rec->id, rt_rpc_conn_peer(q->peer->conn), now, was);
        snprintf(msg, sizeof(msg),
                 "server id %" PRIu64 " is live with another incarnation",
                 rec->id);
        ms__fail(q, RT_EEXIST, msg);
        return false;
    }
    rt_log(RT_LOG_WARN,
           "server %" PRIu64
           " is back with a new incarnation %s (was %s): its data was "
           "wiped or replaced",
           rec->id, now, was);
    if (ms_repl_server_wiped(q->rpc->repl, rec->id) != 0) {
        char msg[128];
        snprintf(msg, sizeof(msg),
                 "server id %" PRIu64
                 " was wiped: its replicas are removed first, retry",
                 rec->id);
        ms__fail(q, RT_EBUSY, msg);
        return false;
    }
    return true;
}

/* Identity binding (docs/SECURITY.md): over TLS, a registration or a
 * heartbeat must come from a partition server's certificate, and for an id
 * already bound to a certificate name, from that one; else it is answered
 * RT_EPERM, logged, and changes nothing (the id's address above all).
 * Plain RPC (--insecure-rpc) binds nothing. */
static bool ms__check_identity(const struct ms__req *q,
                               uint64_t server_id,
                               const char *what)
{
    struct rt_rpc_conn *conn = q->peer->conn;
    const char *name = rt_rpc_conn_peer_name(conn);
    const struct ms_server_rec *rec;
    char msg[160];

    if (!name[0]) {
        return true;
    }
    if (rt_rpc_conn_role(conn) != RT_RPC_ROLE_PS) {
        snprintf(msg, sizeof(msg),
                 "%s: %s is not a partition server's certificate", what, name);
        rt_log(RT_LOG_WARN, "%s from %s refused", msg, rt_rpc_conn_peer(conn));
        ms__fail(q, RT_EPERM, msg);
        return false;
    }
    rec = server_id ? ms_catalog_server_find(q->rpc->cl->cat, server_id) : NULL;
    if (!rec || !rec->identity[0] || strcmp(rec->identity, name) == 0) {
        return true;
    }
    snprintf(msg, sizeof(msg), "%s: server id %" PRIu64 " belongs to %s", what,
             server_id, rec->identity);
    rt_log(RT_LOG_WARN,
           "%s from %s as %s refused: server id %" PRIu64
           " belongs to certificate %s (an impostor, or a node given "
           "another's data directory)",
           what, rt_rpc_conn_peer(conn), name, server_id, rec->identity);
    ms__fail(q, RT_EPERM, msg);
    return false;
}

static void ms__h_register(const struct ms__req *q, void *arg)
{
    const Rt__RegisterReq *req = arg;
    struct ms_server *s;
    uint64_t sid;
    bool addr_changed, came_up;
    size_t unknown = 0;
    int rc;

    if (!req->addr || !*req->addr) {
        ms__fail(q, RT_EINVAL, "register: addr is required");
        return;
    }
    if (req->incarnation.len != 0 &&
        req->incarnation.len != MS_INCARNATION_SIZE) {
        ms__fail(q, RT_EINVAL, "register: incarnation must be 16 bytes");
        return;
    }
    if (!rt_zone_valid(req->zone)) {
        ms__fail(q, RT_EINVAL,
                 "register: zone must be at most 64 of [A-Za-z0-9._-]");
        return;
    }
    if (!ms__check_identity(q, req->server_id, "register")) {
        return;
    }
    if (!ms__check_incarnation(q, req)) {
        return;
    }
    if (req->master_term_seen >= ms_catalog_master_term(q->rpc->cl->cat)) {
        /* The server has seen this term or a higher one (from a master
         * whose catalog is gone, or from before the log): take a higher
         * one, or it would refuse every answer of ours. A LEADER_START
         * like a new leader's; it commits before the answer leaves. */
        const Rt__LeaderStartCmd *ls = ms_catalog_leader(q->rpc->cl->cat);
        if (ls) {
            struct ms_leader_addrs a = {ls->rpc_addr, ls->http_addr,
                                        ls->raft_addr};
            uint64_t term = req->master_term_seen + 1;
            rc = ms_catalog_leader_start(q->rpc->cl->cat, term, ls->leader_id,
                                         &a);
            rt_log(rc ? RT_LOG_ERROR : RT_LOG_WARN,
                   "server %" PRIu64 " has seen master term %" PRIu64
                   ": this master's term goes to %" PRIu64 "%s%s",
                   req->server_id, req->master_term_seen, term, rc ? ": " : "",
                   rc ? rt_strerror(rc) : "");
        }
    }
    rc = ms_catalog_register_server_as(
        q->rpc->cl->cat, req->server_id, req->addr, req->zone,
        req->incarnation.len ? req->incarnation.data : NULL,
        rt_rpc_conn_peer_name(q->peer->conn), &sid, &addr_changed);
    if (rc) {
        ms__fail(q, rc, NULL);
        return;
    }
    s = ms_cluster_server_get(q->rpc->cl, sid);
    ms_cluster_server_attach(q->rpc->cl, s, q->peer);
    came_up = ms_cluster_server_alive(q->rpc->cl, s);
    ms_repl_heard(q->rpc->repl, sid, NULL);
    /* Its reply below lists its ranges: that settles aborted moves. */
    ms_balance_on_register(q->rpc->bal, s);
    if (came_up) {
        ms_balance_server_state(q->rpc->bal, s, "registered");
    }
    for (size_t i = 0; i < req->n_range_ids; i++) {
        const struct ms_range *r =
            ms_catalog_range_find(q->rpc->cl->cat, req->range_ids[i]);
        if (!r || !ms_range_names(r, sid)) {
            unknown++;
        }
    }
    rt_log(RT_LOG_INFO,
           "server %" PRIu64
           " registered%s from %s, addr %s, zone \"%s\", reports %zu "
           "ranges (%zu not assigned to it), assigned %zu",
           sid, req->server_id ? "" : " (new id)",
           rt_rpc_conn_peer(q->peer->conn), req->addr, ms__str(req->zone),
           req->n_range_ids, unknown,
           ms_catalog_server_nreplicas(q->rpc->cl->cat, sid));
    /* An addr, zone or incarnation change was versioned by the catalog
     * already. */
    ms__reply_assignment(q, sid, addr_changed || came_up, !addr_changed);
    if (addr_changed || came_up) {
        /* Its replica-set peers carry its address and state. */
        ms_cluster_assign_push_peers(q->rpc->cl, sid);
    }
}

static void ms__h_heartbeat(const struct ms__req *q, void *arg)
{
    Rt__HeartbeatReq *req = arg;
    struct ms_server *s;
    bool came_up;

    if (!ms__check_identity(q, req->server_id, "heartbeat")) {
        return;
    }
    s = req->server_id ? ms_cluster_server_find(q->rpc->cl, req->server_id)
                       : NULL;
    if (!s) {
        char msg[96];
        snprintf(msg, sizeof(msg),
                 "unknown server id %" PRIu64 ": register first",
                 req->server_id);
        ms__fail(q, RT_ENOTFOUND, msg);
        return;
    }
    ms_cluster_server_attach(q->rpc->cl, s, q->peer);
    came_up = ms_cluster_server_alive(q->rpc->cl, s);
    /* The load model (ms_load.h) for the policy and the dashboard. */
    ms_balance_loads(q->rpc->bal, s, req);
    /* Liveness for failover, and the answer to a new configuration by a
     * primary that serves it. */
    ms_repl_heard(q->rpc->repl, s->id, req);
    if (came_up) {
        rt_log(RT_LOG_INFO, "server %" PRIu64 " up again (heartbeat)", s->id);
        ms_balance_server_state(q->rpc->bal, s, "heartbeat");
    }
    ms__reply_assignment(q, s->id, came_up, true);
    if (came_up) {
        ms_cluster_assign_push_peers(q->rpc->cl, s->id);
    }
}

/* ISR_CHANGE from a range's primary (docs/DESIGN-replication.md §4): the
 * sender is the server that speaks on this connection. */
static void ms__h_isr_change(const struct ms__req *q, void *arg)
{
    const Rt__IsrChangeReq *req = arg;
    ms_repl_isr_change(q->rpc->repl, q->peer->conn, q->id, q->peer->server_id,
                       req);
}

/* ---- front ends: hello, map ---- */

static void ms__h_hello(const struct ms__req *q, void *arg)
{
    (void)arg;
    ms_cluster_subscribe(q->rpc->cl, q->peer);
    ms__reply_map(q);
}

static void ms__h_get_map(const struct ms__req *q, void *arg)
{
    (void)arg;
    ms__reply_map(q);
}

static void ms__h_ping(const struct ms__req *q, void *arg)
{
    (void)arg;
    ms__reply_pb(q, NULL);
}

/* ---- create table ---- */

struct ms__create_op
{
    struct ms_rpc *rpc;
    struct rt_rpc_conn *conn; /* the caller's (ref held) */
    uint64_t id;
    uint64_t table_id;
    char *account;
    char *name;
    size_t waiting; /* ASSIGN_RANGES not answered yet */
};

static void ms__create_finish(struct ms__create_op *op)
{
    ms_cluster_map_push(op->rpc->cl);
    ms__reply_table(op->conn, op->id, RT__METHOD__CREATE_TABLE, op->account,
                    op->name, op->table_id);
    rt_rpc_conn_unref(op->conn);
    free(op->account);
    free(op->name);
    free(op);
}

static void ms__create_assigned_cb(int status,
                                   const uint8_t *body,
                                   size_t len,
                                   void *arg)
{
    struct ms__create_op *op = arg;
    (void)status; /* logged by ms_cluster_call; success either way */
    (void)body;
    (void)len;
    if (--op->waiting == 0) {
        ms__create_finish(op);
    }
}

/* The refusal when fewer than min-insync servers can take the range
 * (docs/DESIGN-replication.md §8.3); RF 1 keeps its old message. */
static void ms__create_refuse(const struct ms__req *q,
                              const char *account,
                              const char *name,
                              size_t live)
{
    uint32_t need = q->rpc->bal->min_insync;
    char msg[128];
    if (need <= 1) {
        snprintf(msg, sizeof(msg), "no live partition server");
    } else {
        snprintf(msg, sizeof(msg),
                 "table creation needs %" PRIu32
                 " live partition servers, %zu %s up",
                 need, live, live == 1 ? "is" : "are");
    }
    rt_log(RT_LOG_WARN, "create table %s/%s: %s", account, name, msg);
    ms__fail(q, RT_EBUSY, msg);
}

static void ms__h_create(const struct ms__req *q, void *arg)
{
    const Rt__TableReq *req = arg;
    const char *account = ms__str(req->account), *name = ms__str(req->name);
    const struct ms_table *t;
    const struct ms_range *r;
    struct ms__create_op *op;
    uint64_t ids[MS_REPLICAS_MAX];
    struct ms_replica_spec rs;
    size_t n, live;
    char list[MS_REPLICAS_MAX * 24] = "";
    int rc;

    if (ms_table_name_check(name) != 0) {
        ms__fail(q, RT_EBADNAME, NULL);
        return;
    }
    if (!*account || strlen(account) > MS_ACCOUNT_MAX) {
        ms__fail(q, RT_EINVAL, "account is required");
        return;
    }
    if (ms_catalog_table_find(q->rpc->cl->cat, account, name)) {
        ms__fail(q, RT_ETABLEEXISTS, NULL);
        return;
    }
    if (ms_catalog_table_deleting(q->rpc->cl->cat, account, name)) {
        /* Spec §3.2/§3.3: 409 TableBeingDeleted during the grace period. */
        ms__fail(q, RT_ETABLEBEINGDELETED, NULL);
        return;
    }
    n = ms_balance_place(q->rpc->bal, ids, &live);
    if (n == 0 || n < q->rpc->bal->min_insync) {
        ms__create_refuse(q, account, name, live);
        return;
    }
    rs.servers = ids;
    rs.n = n;
    rs.rf = q->rpc->bal->rf;
    rs.min_insync = q->rpc->bal->min_insync;
    rc =
        ms_catalog_create_table_rs(q->rpc->cl->cat, account, name, &rs, &t, &r);
    if (rc) {
        ms__fail(q, rc, NULL);
        return;
    }
    for (size_t i = 0, len = 0; i < n && len < sizeof(list); i++) {
        len += (size_t)snprintf(list + len, sizeof(list) - len, "%s%" PRIu64,
                                i ? "," : "", ids[i]);
    }
    rt_log(RT_LOG_INFO,
           "table %s/%s created: id %" PRIu64 ", range %" PRIu64
           " on server %" PRIu64 " (replicas %s, rf %" PRIu32
           "), map version %" PRIu64,
           account, t->name, t->id, r->id, ids[0], list, rs.rf,
           ms_catalog_map_version(q->rpc->cl->cat));
    ms_balance_range_created(q->rpc->bal, r->id);
    ms_cluster_map_changed(q->rpc->cl, false);
    ms_repl_sync(q->rpc->repl);

    op = rt_xcalloc(1, sizeof(*op));
    op->rpc = q->rpc;
    op->conn = q->peer->conn;
    rt_rpc_conn_ref(op->conn);
    op->id = q->id;
    op->table_id = t->id;
    op->account = rt_xstrdup(t->account);
    op->name = rt_xstrdup(t->name);
    /* Every replica is told; the reply waits for all of them (bounded).
     * One not connected learns it from its next heartbeat reply. */
    op->waiting = 1;
    for (size_t i = 0; i < n; i++) {
        if (ms_cluster_assign_push(q->rpc->cl, ids[i], 0,
                                   ms__create_assigned_cb, op) == 0) {
            op->waiting++;
        }
    }
    if (--op->waiting == 0) {
        ms__create_finish(op);
    }
}

/* ---- delete table ---- */

static void ms__h_delete(const struct ms__req *q, void *arg)
{
    const Rt__TableReq *req = arg;
    struct ms_table_drop drop;
    int rc;

    rc = ms_catalog_delete_table(q->rpc->cl->cat, ms__str(req->account),
                                 ms__str(req->name), &drop);
    if (rc) {
        ms__fail(q, rc, NULL);
        return;
    }
    rt_log(RT_LOG_INFO,
           "table %s/%s deleted: id %" PRIu64
           ", dropping on %zu servers, "
           "map version %" PRIu64,
           ms__str(req->account), ms__str(req->name), drop.table_id,
           drop.nservers, ms_catalog_map_version(q->rpc->cl->cat));
    ms_cluster_map_changed(q->rpc->cl, false);
    /* A failover of its range in flight stops here. */
    ms_repl_sync(q->rpc->repl);
    for (size_t i = 0; i < drop.nservers; i++) {
        Rt__DropTableReq d = RT__DROP_TABLE_REQ__INIT;
        d.table_id = drop.table_id;
        d.master_term = ms_catalog_master_term(q->rpc->cl->cat);
        /* Not waited for: a server that misses it drops the ranges when
         * its next heartbeat reply no longer lists them. */
        ms_cluster_call(q->rpc->cl, drop.server_ids[i], RT__METHOD__DROP_TABLE,
                        "DROP_TABLE", &d.base, MS__DROP_TIMEOUT_MS, NULL, NULL);
        ms_cluster_assign_push(q->rpc->cl, drop.server_ids[i], 0, NULL, NULL);
    }
    ms_table_drop_free(&drop);
    ms__reply_pushed(q);
}

/* ---- list / get tables ---- */

static void ms__h_list(const struct ms__req *q, void *arg)
{
    const Rt__ListTablesReq *req = arg;
    Rt__ListTablesResp resp = RT__LIST_TABLES_RESP__INIT;
    const struct ms_table *next;
    Rt__Table *tv, **tvp;
    size_t first, count;

    ms_catalog_list_tables(q->rpc->cl->cat, ms__str(req->account),
                           ms__str(req->start), req->limit, &first, &count,
                           &next);
    tv = rt_xcalloc(count ? count : 1, sizeof(*tv));
    tvp = rt_xcalloc(count ? count : 1, sizeof(*tvp));
    for (size_t i = 0; i < count; i++) {
        const struct ms_table *t =
            ms_catalog_table_at(q->rpc->cl->cat, first + i);
        rt__table__init(&tv[i]);
        tv[i].account = t->account;
        tv[i].name = t->name;
        tv[i].id = t->id;
        tvp[i] = &tv[i];
    }
    resp.n_tables = count;
    resp.tables = tvp;
    resp.next = next ? next->lname : (char *)"";
    ms__reply_pb(q, &resp.base);
    free(tv);
    free(tvp);
}

static void ms__h_get_table(const struct ms__req *q, void *arg)
{
    const Rt__TableReq *req = arg;
    const struct ms_table *t = ms_catalog_table_find(
        q->rpc->cl->cat, ms__str(req->account), ms__str(req->name));
    if (t) {
        ms__reply_table(q->peer->conn, q->id, q->method, t->account, t->name,
                        t->id);
    } else {
        ms__fail(q, RT_ETABLENOTFOUND, NULL);
    }
}

/* ---- table ACLs and service properties ---- */

static void ms__h_get_acl(const struct ms__req *q, void *arg)
{
    const Rt__AclReq *req = arg;
    Rt__AclReq resp = RT__ACL_REQ__INIT;
    Rt__SignedIdentifier sv[MS_ACL_MAX], *svp[MS_ACL_MAX];
    const struct ms_table *t = ms_catalog_table_find(
        q->rpc->cl->cat, ms__str(req->account), ms__str(req->name));
    if (!t) {
        ms__fail(q, RT_ETABLENOTFOUND, NULL);
        return;
    }
    resp.account = t->account;
    resp.name = t->name;
    for (size_t i = 0; i < t->nacl && i < MS_ACL_MAX; i++) {
        ms_acl_to_pb(&t->acl[i], &sv[i]);
        svp[i] = &sv[i];
    }
    resp.n_acl = t->nacl < MS_ACL_MAX ? t->nacl : MS_ACL_MAX;
    resp.acl = svp;
    ms__reply_pb(q, &resp.base);
}

static void ms__h_set_acl(const struct ms__req *q, void *arg)
{
    const Rt__AclReq *req = arg;
    struct ms_acl_entry acl[MS_ACL_MAX];
    int rc;
    if (req->n_acl > MS_ACL_MAX) {
        ms__fail(q, RT_EXML, "more than 5 signed identifiers");
        return;
    }
    for (size_t i = 0; i < req->n_acl; i++) {
        ms_acl_from_pb(req->acl[i], &acl[i]);
    }
    rc = ms_catalog_set_acl(q->rpc->cl->cat, ms__str(req->account),
                            ms__str(req->name), acl, req->n_acl);
    if (rc) {
        ms__fail(q, rc, NULL);
        return;
    }
    rt_log(RT_LOG_INFO,
           "table %s/%s: ACL set (%zu identifiers), map version %" PRIu64,
           ms__str(req->account), ms__str(req->name), req->n_acl,
           ms_catalog_map_version(q->rpc->cl->cat));
    ms_cluster_map_changed(q->rpc->cl, false);
    ms__reply_pushed(q);
}

static void ms__h_get_props(const struct ms__req *q, void *arg)
{
    const Rt__ServicePropsReq *req = arg;
    Rt__ServiceProps empty = RT__SERVICE_PROPS__INIT;
    /* Never set: all sections absent; the front end emits the defaults. */
    const Rt__ServiceProps *p =
        ms_catalog_props(q->rpc->cl->cat, ms__str(req->account));
    ms__reply_pb(q, p ? &p->base : &empty.base);
}

static void ms__h_set_props(const struct ms__req *q, void *arg)
{
    const Rt__ServicePropsReq *req = arg;
    Rt__ServiceProps empty = RT__SERVICE_PROPS__INIT;
    int rc = ms_catalog_set_props(q->rpc->cl->cat, ms__str(req->account),
                                  req->props ? req->props : &empty);
    if (rc) {
        ms__fail(q, rc, NULL);
        return;
    }
    rt_log(RT_LOG_INFO,
           "account %s: service properties set, map version %" PRIu64,
           ms__str(req->account), ms_catalog_map_version(q->rpc->cl->cat));
    ms_cluster_map_changed(q->rpc->cl, false);
    ms__reply_pushed(q);
}

/* ---- dispatch ---- */

/* MASTER_HELLO is served by ms_node before this table is consulted; a
 * master without a Raft node (tests) has no followers to hear from. */
static void ms__h_not_here(const struct ms__req *q, void *arg)
{
    (void)arg;
    ms__fail(q, RT_ENOTIMPL, "method not served by this master");
}

#define MS__PS RT_RPC_ROLE_PS
#define MS__FE RT_RPC_ROLE_FE
#define MS__MASTER RT_RPC_ROLE_MASTER
#define MS__ANY (RT_RPC_ROLE_PS | RT_RPC_ROLE_FE | RT_RPC_ROLE_MASTER)

/* Every method the master serves: its request type (NULL: the body is
 * ignored), its handler, and the roles whose certificates may call it
 * (docs/SECURITY.md; an admin certificate may call anything): partition
 * servers register, report and ask for ISR changes; front ends read the
 * map and change tables, ACLs and service properties; masters greet the
 * leader. A method absent here is refused to every role but admin. */
static const struct ms__method
{
    uint32_t method;
    const ProtobufCMessageDescriptor *req;
    ms__handler fn;
    unsigned roles;
} ms__methods[] = {
    {RT__METHOD__PS_REGISTER, &rt__register_req__descriptor, ms__h_register,
     MS__PS},
    {RT__METHOD__PS_HEARTBEAT, &rt__heartbeat_req__descriptor, ms__h_heartbeat,
     MS__PS},
    {RT__METHOD__ISR_CHANGE, &rt__isr_change_req__descriptor, ms__h_isr_change,
     MS__PS},
    {RT__METHOD__FE_HELLO, NULL, ms__h_hello, MS__FE},
    {RT__METHOD__GET_MAP, NULL, ms__h_get_map, MS__FE},
    {RT__METHOD__CREATE_TABLE, &rt__table_req__descriptor, ms__h_create,
     MS__FE},
    {RT__METHOD__DELETE_TABLE, &rt__table_req__descriptor, ms__h_delete,
     MS__FE},
    {RT__METHOD__LIST_TABLES, &rt__list_tables_req__descriptor, ms__h_list,
     MS__FE},
    {RT__METHOD__GET_TABLE, &rt__table_req__descriptor, ms__h_get_table,
     MS__FE},
    {RT__METHOD__GET_ACL, &rt__acl_req__descriptor, ms__h_get_acl, MS__FE},
    {RT__METHOD__SET_ACL, &rt__acl_req__descriptor, ms__h_set_acl, MS__FE},
    {RT__METHOD__GET_SERVICE_PROPS, &rt__service_props_req__descriptor,
     ms__h_get_props, MS__FE},
    {RT__METHOD__SET_SERVICE_PROPS, &rt__service_props_req__descriptor,
     ms__h_set_props, MS__FE},
    {RT__METHOD__MASTER_HELLO, NULL, ms__h_not_here, MS__MASTER},
    {RT__METHOD__PING, NULL, ms__h_ping, MS__ANY},
};

static const struct ms__method *ms__method_find(uint32_t method)
{
    for (size_t i = 0; i < sizeof(ms__methods) / sizeof(ms__methods[0]); i++) {
        if (ms__methods[i].method == method) {
            return &ms__methods[i];
        }
    }
    return NULL;
}

int ms_rpc_authorize(struct rt_rpc_conn *conn, uint32_t method, uint64_t id)
{
    const struct ms__method *m = ms__method_find(method);
    return rt_rpc_authorize(conn, method, id, m ? m->roles : 0);
}

void ms_rpc_on_request(struct rt_rpc_conn *conn,
                       uint32_t method,
                       uint64_t id,
                       const uint8_t *body,
                       size_t len,
                       void *ud)
{
    struct ms_rpc *rpc = ud;
    struct ms__req q = {rpc, rt_rpc_conn_data(conn), id, method};
    const struct ms__method *m = NULL;
    ProtobufCMessage *req = NULL;

    if (ms_rpc_authorize(conn, method, id) != 0) {
        return;
    }
    rpc->cl->rpc_requests++;
    if (!q.peer) {
        q.peer = ms_cluster_peer_new(rpc->cl, conn);
    }
    if (rpc->cl->stopping) {
        ms__fail(&q, RT_EBUSY, "master is stopping");
        return;
    }
    m = ms__method_find(method);
    if (!m) {
        rt_log(RT_LOG_DEBUG, "method %" PRIu32 " from %s not served here",
               method, rt_rpc_conn_peer(conn));
        ms__fail(&q, RT_ENOTIMPL, "method not served by the master");
        return;
    }
    if (m->req) {
        req = protobuf_c_message_unpack(m->req, NULL, len, body);
        if (!req) {
            ms__fail(&q, RT_EINVAL, "malformed request body");
            return;
        }
    }
    m->fn(&q, req);
    if (req) {
        protobuf_c_message_free_unpacked(req, NULL);
    }
}
