/* RPC service of the master (contract in ms_rpc.h): one handler per
 * method of the "master" groups in proto/rt.proto, as listed in
 * master/README.md ("RPC").
 *
 * Happy paths answer at once, except CREATE_TABLE, which commits, then
 * waits (bounded by the assign timeout) for the owning partition server to
 * acknowledge ASSIGN_RANGES, pushes MAP_UPDATE to the front ends and only
 * then replies. If that server does not answer, the table still exists and
 * the caller still gets success: the server's next heartbeat reply carries
 * the assignment. If the caller's connection is gone by then, the reply is
 * dropped by rt_rpc.
 *
 * Every failure is answered with rt_rpc_reply_err() and an RT_E* code. */
#include "ms_rpc.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ms_balance.h"
#include "ms_catalog.h"
#include "ms_cluster.h"
#include "rt_alloc.h"
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
        ms_cluster_peer_gone(rpc->cl, p);
    }
}

/* ---- helpers ---- */

/* A handler: @req is the request body decoded with its method's
 * descriptor (NULL for the methods that take none), borrowed: the
 * dispatcher frees it after the handler returns. */
typedef void (*ms__handler)(struct ms_rpc *rpc,
                            struct ms_peer *peer,
                            uint64_t id,
                            uint32_t method,
                            void *req);

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

/* Answers a registration or heartbeat with the server's assignment. When
 * the map changed (@changed; @bump: its version is not raised yet), the
 * map is marked changed before the reply and pushed after it. */
static void ms__reply_assignment(struct ms_rpc *rpc,
                                 struct rt_rpc_conn *conn,
                                 uint64_t id,
                                 uint32_t method,
                                 uint64_t server_id,
                                 bool changed,
                                 bool bump)
{
    Rt__RegisterResp resp = RT__REGISTER_RESP__INIT;
    Rt__Range *rv, **rvp;
    if (changed) {
        ms_cluster_map_changed(rpc->cl, bump);
    }
    resp.server_id = server_id;
    resp.n_ranges = ms_cluster_assignment(rpc->cl, server_id, &rv, &rvp);
    resp.ranges = rvp;
    resp.map_version = ms_catalog_map_version(rpc->cl->cat);
    rt_rpc_reply_pb(conn, id, method, 0, &resp.base);
    free(rv);
    free(rvp);
    if (changed) {
        ms_cluster_map_push(rpc->cl);
    }
}

/* A committed change of the map (version raised by the catalog) is
 * answered with Empty only after MAP_UPDATE went out: a front end that
 * subscribed on this connection has the new map before the reply. */
static void ms__reply_pushed(struct ms_rpc *rpc,
                             struct rt_rpc_conn *conn,
                             uint64_t id,
                             uint32_t method)
{
    ms_cluster_map_push(rpc->cl);
    rt_rpc_reply(conn, id, method, 0, NULL, 0);
}

static void ms__reply_map(struct ms_rpc *rpc,
                          struct rt_rpc_conn *conn,
                          uint64_t id,
                          uint32_t method)
{
    const uint8_t *buf;
    size_t len;
    ms_cluster_map_packed(rpc->cl, &buf, &len);
    rt_rpc_reply(conn, id, method, 0, buf, len);
}

/* ---- partition servers: register, heartbeat ---- */

static void ms__h_register(struct ms_rpc *rpc,
                           struct ms_peer *peer,
                           uint64_t id,
                           uint32_t method,
                           void *arg)
{
    const Rt__RegisterReq *req = arg;
    struct ms_server *s;
    uint64_t sid;
    bool addr_changed, came_up;
    size_t unknown = 0;
    int rc;

    if (!req->addr || !*req->addr) {
        rt_rpc_reply_err(peer->conn, id, method, RT_EINVAL,
                         "register: addr is required");
        return;
    }
    rc = ms_catalog_register_server(rpc->cl->cat, req->server_id, req->addr,
                                    &sid, &addr_changed);
    if (rc) {
        rt_rpc_reply_err(peer->conn, id, method, rc, NULL);
        return;
    }
    s = ms_cluster_server_get(rpc->cl, sid);
    ms_cluster_server_attach(rpc->cl, s, peer);
    came_up = ms_cluster_server_alive(rpc->cl, s);
    /* Its reply below lists its ranges: that settles aborted moves. */
    ms_balance_on_register(rpc->bal, s);
    if (came_up) {
        ms_balance_server_state(rpc->bal, s, "registered");
    }
    for (size_t i = 0; i < req->n_range_ids; i++) {
        const struct ms_range *r =
            ms_catalog_range_find(rpc->cl->cat, req->range_ids[i]);
        if (!r || r->server_id != sid) {
            unknown++;
        }
    }
    rt_log(RT_LOG_INFO,
           "server %" PRIu64
           " registered%s from %s, addr %s, reports %zu "
           "ranges (%zu not assigned to it), assigned %zu",
           sid, req->server_id ? "" : " (new id)", rt_rpc_conn_peer(peer->conn),
           req->addr, req->n_range_ids, unknown,
           ms_catalog_server_nranges(rpc->cl->cat, sid));
    /* An addr change was versioned by the catalog already. */
    ms__reply_assignment(rpc, peer->conn, id, method, sid,
                         addr_changed || came_up, !addr_changed);
}

static void ms__h_heartbeat(struct ms_rpc *rpc,
                            struct ms_peer *peer,
                            uint64_t id,
                            uint32_t method,
                            void *arg)
{
    Rt__HeartbeatReq *req = arg;
    struct ms_server *s;
    bool came_up;

    s = req->server_id ? ms_cluster_server_find(rpc->cl, req->server_id) : NULL;
    if (!s) {
        char msg[96];
        snprintf(msg, sizeof(msg),
                 "unknown server id %" PRIu64 ": register first",
                 req->server_id);
        rt_rpc_reply_err(peer->conn, id, method, RT_ENOTFOUND, msg);
        return;
    }
    ms_cluster_server_attach(rpc->cl, s, peer);
    came_up = ms_cluster_server_alive(rpc->cl, s);
    /* The load model (ms_load.h) for the policy and the dashboard. */
    ms_balance_loads(rpc->bal, s, req);
    if (came_up) {
        rt_log(RT_LOG_INFO, "server %" PRIu64 " up again (heartbeat)", s->id);
        ms_balance_server_state(rpc->bal, s, "heartbeat");
    }
    ms__reply_assignment(rpc, peer->conn, id, method, s->id, came_up, true);
}

/* ---- front ends: hello, map ---- */

static void ms__h_hello(struct ms_rpc *rpc,
                        struct ms_peer *peer,
                        uint64_t id,
                        uint32_t method,
                        void *arg)
{
    (void)arg;
    ms_cluster_subscribe(rpc->cl, peer);
    ms__reply_map(rpc, peer->conn, id, method);
}

static void ms__h_get_map(struct ms_rpc *rpc,
                          struct ms_peer *peer,
                          uint64_t id,
                          uint32_t method,
                          void *arg)
{
    (void)arg;
    ms__reply_map(rpc, peer->conn, id, method);
}

static void ms__h_ping(struct ms_rpc *rpc,
                       struct ms_peer *peer,
                       uint64_t id,
                       uint32_t method,
                       void *arg)
{
    (void)rpc;
    (void)arg;
    rt_rpc_reply(peer->conn, id, method, 0, NULL, 0);
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
    (void)status; /* logged by ms_cluster_call; success either way */
    (void)body;
    (void)len;
    ms__create_finish(arg);
}

static void ms__h_create(struct ms_rpc *rpc,
                         struct ms_peer *peer,
                         uint64_t id,
                         uint32_t method,
                         void *arg)
{
    const Rt__TableReq *req = arg;
    const char *account = ms__str(req->account), *name = ms__str(req->name);
    const struct ms_table *t;
    const struct ms_range *r;
    struct ms__create_op *op;
    uint64_t sid;
    int rc;

    if (ms_table_name_check(name) != 0) {
        rt_rpc_reply_err(peer->conn, id, method, RT_EBADNAME, NULL);
        return;
    }
    if (!*account || strlen(account) > MS_ACCOUNT_MAX) {
        rt_rpc_reply_err(peer->conn, id, method, RT_EINVAL,
                         "account is required");
        return;
    }
    if (ms_catalog_table_find(rpc->cl->cat, account, name)) {
        rt_rpc_reply_err(peer->conn, id, method, RT_ETABLEEXISTS, NULL);
        return;
    }
    if (ms_catalog_table_deleting(rpc->cl->cat, account, name)) {
        /* Spec §3.2/§3.3: 409 TableBeingDeleted during the grace period. */
        rt_rpc_reply_err(peer->conn, id, method, RT_ETABLEBEINGDELETED, NULL);
        return;
    }
    sid = ms_balance_place(rpc->bal);
    if (!sid) {
        rt_log(RT_LOG_WARN, "create table %s/%s: no live partition server",
               account, name);
        rt_rpc_reply_err(peer->conn, id, method, RT_EBUSY,
                         "no live partition server");
        return;
    }
    rc = ms_catalog_create_table(rpc->cl->cat, account, name, sid, &t, &r);
    if (rc) {
        rt_rpc_reply_err(peer->conn, id, method, rc, NULL);
        return;
    }
    rt_log(RT_LOG_INFO,
           "table %s/%s created: id %" PRIu64 ", range %" PRIu64
           " on server %" PRIu64 ", map version %" PRIu64,
           account, t->name, t->id, r->id, sid,
           ms_catalog_map_version(rpc->cl->cat));
    ms_balance_range_created(rpc->bal, r->id);
    ms_cluster_map_changed(rpc->cl, false);

    op = rt_xcalloc(1, sizeof(*op));
    op->rpc = rpc;
    op->conn = peer->conn;
    rt_rpc_conn_ref(op->conn);
    op->id = id;
    op->table_id = t->id;
    op->account = rt_xstrdup(t->account);
    op->name = rt_xstrdup(t->name);
    if (ms_cluster_assign_push(rpc->cl, sid, 0, ms__create_assigned_cb, op) !=
        0) {
        ms__create_finish(op); /* not connected: the heartbeat reconciles */
    }
}

/* ---- delete table ---- */

static void ms__h_delete(struct ms_rpc *rpc,
                         struct ms_peer *peer,
                         uint64_t id,
                         uint32_t method,
                         void *arg)
{
    const Rt__TableReq *req = arg;
    struct ms_table_drop drop;
    int rc;

    rc = ms_catalog_delete_table(rpc->cl->cat, ms__str(req->account),
                                 ms__str(req->name), &drop);
    if (rc) {
        rt_rpc_reply_err(peer->conn, id, method, rc, NULL);
        return;
    }
    rt_log(RT_LOG_INFO,
           "table %s/%s deleted: id %" PRIu64
           ", dropping on %zu servers, "
           "map version %" PRIu64,
           ms__str(req->account), ms__str(req->name), drop.table_id,
           drop.nservers, ms_catalog_map_version(rpc->cl->cat));
    ms_cluster_map_changed(rpc->cl, false);
    for (size_t i = 0; i < drop.nservers; i++) {
        Rt__DropTableReq d = RT__DROP_TABLE_REQ__INIT;
        d.table_id = drop.table_id;
        /* Not waited for: a server that misses it drops the ranges when
         * its next heartbeat reply no longer lists them. */
        ms_cluster_call(rpc->cl, drop.server_ids[i], RT__METHOD__DROP_TABLE,
                        "DROP_TABLE", &d.base, MS__DROP_TIMEOUT_MS, NULL, NULL);
        ms_cluster_assign_push(rpc->cl, drop.server_ids[i], 0, NULL, NULL);
    }
    ms_table_drop_free(&drop);
    ms__reply_pushed(rpc, peer->conn, id, method);
}

/* ---- list / get tables ---- */

static void ms__h_list(struct ms_rpc *rpc,
                       struct ms_peer *peer,
                       uint64_t id,
                       uint32_t method,
                       void *arg)
{
    const Rt__ListTablesReq *req = arg;
    Rt__ListTablesResp resp = RT__LIST_TABLES_RESP__INIT;
    const struct ms_table *next;
    Rt__Table *tv, **tvp;
    size_t first, count;

    ms_catalog_list_tables(rpc->cl->cat, ms__str(req->account),
                           ms__str(req->start), req->limit, &first, &count,
                           &next);
    tv = rt_xcalloc(count ? count : 1, sizeof(*tv));
    tvp = rt_xcalloc(count ? count : 1, sizeof(*tvp));
    for (size_t i = 0; i < count; i++) {
        const struct ms_table *t = ms_catalog_table_at(rpc->cl->cat, first + i);
        rt__table__init(&tv[i]);
        tv[i].account = t->account;
        tv[i].name = t->name;
        tv[i].id = t->id;
        tvp[i] = &tv[i];
    }
    resp.n_tables = count;
    resp.tables = tvp;
    resp.next = next ? next->lname : (char *)"";
    rt_rpc_reply_pb(peer->conn, id, method, 0, &resp.base);
    free(tv);
    free(tvp);
}

static void ms__h_get_table(struct ms_rpc *rpc,
                            struct ms_peer *peer,
                            uint64_t id,
                            uint32_t method,
                            void *arg)
{
    const Rt__TableReq *req = arg;
    const struct ms_table *t = ms_catalog_table_find(
        rpc->cl->cat, ms__str(req->account), ms__str(req->name));
    if (t) {
        ms__reply_table(peer->conn, id, method, t->account, t->name, t->id);
    } else {
        rt_rpc_reply_err(peer->conn, id, method, RT_ETABLENOTFOUND, NULL);
    }
}

/* ---- table ACLs and service properties ---- */

static void ms__h_get_acl(struct ms_rpc *rpc,
                          struct ms_peer *peer,
                          uint64_t id,
                          uint32_t method,
                          void *arg)
{
    const Rt__AclReq *req = arg;
    Rt__AclReq resp = RT__ACL_REQ__INIT;
    Rt__SignedIdentifier sv[MS_ACL_MAX], *svp[MS_ACL_MAX];
    const struct ms_table *t = ms_catalog_table_find(
        rpc->cl->cat, ms__str(req->account), ms__str(req->name));
    if (!t) {
        rt_rpc_reply_err(peer->conn, id, method, RT_ETABLENOTFOUND, NULL);
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
    rt_rpc_reply_pb(peer->conn, id, method, 0, &resp.base);
}

static void ms__h_set_acl(struct ms_rpc *rpc,
                          struct ms_peer *peer,
                          uint64_t id,
                          uint32_t method,
                          void *arg)
{
    const Rt__AclReq *req = arg;
    struct ms_acl_entry acl[MS_ACL_MAX];
    int rc;
    if (req->n_acl > MS_ACL_MAX) {
        rt_rpc_reply_err(peer->conn, id, method, RT_EXML,
                         "more than 5 signed identifiers");
        return;
    }
    for (size_t i = 0; i < req->n_acl; i++) {
        const Rt__SignedIdentifier *si = req->acl[i];
        acl[i].id = si->id;
        acl[i].has_policy = si->has_policy;
        acl[i].start = si->start;
        acl[i].expiry = si->expiry;
        acl[i].permission = si->permission;
    }
    rc = ms_catalog_set_acl(rpc->cl->cat, ms__str(req->account),
                            ms__str(req->name), acl, req->n_acl);
    if (rc) {
        rt_rpc_reply_err(peer->conn, id, method, rc, NULL);
        return;
    }
    rt_log(RT_LOG_INFO,
           "table %s/%s: ACL set (%zu identifiers), map version %" PRIu64,
           ms__str(req->account), ms__str(req->name), req->n_acl,
           ms_catalog_map_version(rpc->cl->cat));
    ms_cluster_map_changed(rpc->cl, false);
    ms__reply_pushed(rpc, peer->conn, id, method);
}

static void ms__h_get_props(struct ms_rpc *rpc,
                            struct ms_peer *peer,
                            uint64_t id,
                            uint32_t method,
                            void *arg)
{
    const Rt__ServicePropsReq *req = arg;
    Rt__ServiceProps empty = RT__SERVICE_PROPS__INIT;
    /* Never set: all sections absent; the front end emits the defaults. */
    const Rt__ServiceProps *p =
        ms_catalog_props(rpc->cl->cat, ms__str(req->account));
    rt_rpc_reply_pb(peer->conn, id, method, 0, p ? &p->base : &empty.base);
}

static void ms__h_set_props(struct ms_rpc *rpc,
                            struct ms_peer *peer,
                            uint64_t id,
                            uint32_t method,
                            void *arg)
{
    const Rt__ServicePropsReq *req = arg;
    Rt__ServiceProps empty = RT__SERVICE_PROPS__INIT;
    int rc = ms_catalog_set_props(rpc->cl->cat, ms__str(req->account),
                                  req->props ? req->props : &empty);
    if (rc) {
        rt_rpc_reply_err(peer->conn, id, method, rc, NULL);
        return;
    }
    rt_log(RT_LOG_INFO,
           "account %s: service properties set, map version %" PRIu64,
           ms__str(req->account), ms_catalog_map_version(rpc->cl->cat));
    ms_cluster_map_changed(rpc->cl, false);
    ms__reply_pushed(rpc, peer->conn, id, method);
}

/* ---- dispatch ---- */

/* Every method the master serves: its request type (NULL: the body is
 * ignored) and its handler. */
static const struct ms__method
{
    uint32_t method;
    const ProtobufCMessageDescriptor *req;
    ms__handler fn;
} ms__methods[] = {
    {RT__METHOD__PS_REGISTER, &rt__register_req__descriptor, ms__h_register},
    {RT__METHOD__PS_HEARTBEAT, &rt__heartbeat_req__descriptor, ms__h_heartbeat},
    {RT__METHOD__FE_HELLO, NULL, ms__h_hello},
    {RT__METHOD__GET_MAP, NULL, ms__h_get_map},
    {RT__METHOD__CREATE_TABLE, &rt__table_req__descriptor, ms__h_create},
    {RT__METHOD__DELETE_TABLE, &rt__table_req__descriptor, ms__h_delete},
    {RT__METHOD__LIST_TABLES, &rt__list_tables_req__descriptor, ms__h_list},
    {RT__METHOD__GET_TABLE, &rt__table_req__descriptor, ms__h_get_table},
    {RT__METHOD__GET_ACL, &rt__acl_req__descriptor, ms__h_get_acl},
    {RT__METHOD__SET_ACL, &rt__acl_req__descriptor, ms__h_set_acl},
    {RT__METHOD__GET_SERVICE_PROPS, &rt__service_props_req__descriptor,
     ms__h_get_props},
    {RT__METHOD__SET_SERVICE_PROPS, &rt__service_props_req__descriptor,
     ms__h_set_props},
    {RT__METHOD__PING, NULL, ms__h_ping},
};

void ms_rpc_on_request(struct rt_rpc_conn *conn,
                       uint32_t method,
                       uint64_t id,
                       const uint8_t *body,
                       size_t len,
                       void *ud)
{
    struct ms_rpc *rpc = ud;
    struct ms_peer *peer = rt_rpc_conn_data(conn);
    const struct ms__method *m = NULL;
    ProtobufCMessage *req = NULL;

    rpc->cl->rpc_requests++;
    if (!peer) {
        peer = ms_cluster_peer_new(rpc->cl, conn);
    }
    if (rpc->cl->stopping) {
        rt_rpc_reply_err(conn, id, method, RT_EBUSY, "master is stopping");
        return;
    }
    for (size_t i = 0; i < sizeof(ms__methods) / sizeof(ms__methods[0]); i++) {
        if (ms__methods[i].method == method) {
            m = &ms__methods[i];
            break;
        }
    }
    if (!m) {
        rt_log(RT_LOG_DEBUG, "method %" PRIu32 " from %s not served here",
               method, rt_rpc_conn_peer(conn));
        rt_rpc_reply_err(conn, id, method, RT_ENOTIMPL,
                         "method not served by the master");
        return;
    }
    if (m->req) {
        req = protobuf_c_message_unpack(m->req, NULL, len, body);
        if (!req) {
            rt_rpc_reply_err(conn, id, method, RT_EINVAL,
                             "malformed request body");
            return;
        }
    }
    m->fn(rpc, peer, id, method, req);
    if (req) {
        protobuf_c_message_free_unpacked(req, NULL);
    }
}
