/* Cluster state: servers, peers, the packed map and calls to partition
 * servers (contract in ms_cluster.h). */
#include "ms_cluster.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt_alloc.h"
#include "rt_err.h"
#include "rt_log.h"
#include "rt_time.h"

/* ---- lifecycle ---- */

void ms_cluster_init(struct ms_cluster *cl,
                     struct ms_catalog *cat,
                     uint32_t heartbeat_timeout_ms,
                     uint32_t assign_timeout_ms,
                     ms_cluster_change_cb change_cb,
                     void *change_arg)
{
    memset(cl, 0, sizeof(*cl));
    cl->cat = cat;
    cl->heartbeat_timeout_ms = heartbeat_timeout_ms;
    cl->assign_timeout_ms = assign_timeout_ms;
    /* Known servers start down until they register again. */
    for (size_t i = 0; i < ms_catalog_nservers(cat); i++) {
        ms_cluster_server_get(cl, ms_catalog_server_at(cat, i)->id);
    }
    cl->change_cb = change_cb;
    cl->change_arg = change_arg;
}

void ms_cluster_fini(struct ms_cluster *cl)
{
    if (cl->inflight) {
        rt_log(RT_LOG_WARN, "master destroyed with %zu calls in flight",
               cl->inflight);
    }
    for (size_t i = 0; i < cl->servers.n; i++) {
        struct ms_server *s = cl->servers.v[i];
        if (s->conn) {
            rt_rpc_conn_unref(s->conn);
        }
        free(s);
    }
    for (size_t i = 0; i < cl->subscribers.n; i++) {
        rt_rpc_conn_unref(((struct ms_peer *)cl->subscribers.v[i])->conn);
    }
    for (size_t i = 0; i < cl->peers.n; i++) {
        struct ms_peer *p = cl->peers.v[i];
        rt_rpc_conn_set_data(p->conn, NULL);
        rt_rpc_conn_unref(p->conn);
        free(p);
    }
    ms_vec_free(&cl->servers);
    ms_vec_free(&cl->subscribers);
    ms_vec_free(&cl->peers);
    free(cl->map_buf);
    cl->map_buf = NULL;
}

/* ---- servers ---- */

#define MS__SERVER_ID offsetof(struct ms_server, id)

struct ms_server *ms_cluster_server_find(struct ms_cluster *cl, uint64_t id)
{
    return ms_vec_find(&cl->servers, MS__SERVER_ID, id, NULL);
}

struct ms_server *ms_cluster_server_get(struct ms_cluster *cl, uint64_t id)
{
    bool created;
    struct ms_server *s =
        ms_vec_get(&cl->servers, MS__SERVER_ID, id, sizeof(*s), &created);
    if (created) {
        s->state = MS_SERVER_DOWN;
    }
    return s;
}

void ms_cluster_server_attach(struct ms_cluster *cl,
                              struct ms_server *s,
                              struct ms_peer *peer)
{
    if (s->conn == peer->conn) {
        peer->server_id = s->id;
        return;
    }
    /* The connection spoke for another server before: detach it there. */
    if (peer->server_id && peer->server_id != s->id) {
        struct ms_server *other = ms_cluster_server_find(cl, peer->server_id);
        if (other && other->conn == peer->conn) {
            other->conn = NULL;
            rt_rpc_conn_unref(peer->conn);
        }
    }
    /* The server reconnected (or a second process claims its id): the
     * newest connection wins. */
    if (s->conn) {
        struct ms_peer *old = rt_rpc_conn_data(s->conn);
        if (old && old->server_id == s->id) {
            old->server_id = 0;
            if (rt_rpc_conn_is_up(s->conn)) {
                rt_log(RT_LOG_WARN,
                       "server %" PRIu64
                       " now speaks from %s; it was also "
                       "connected from %s",
                       s->id, rt_rpc_conn_peer(peer->conn),
                       rt_rpc_conn_peer(s->conn));
            }
        }
        rt_rpc_conn_unref(s->conn);
    }
    rt_rpc_conn_ref(peer->conn);
    s->conn = peer->conn;
    peer->server_id = s->id;
}

bool ms_cluster_server_alive(struct ms_cluster *cl, struct ms_server *s)
{
    (void)cl;
    s->seen = true;
    s->last_hb_ms = rt_time_mono_ms();
    if (s->state != MS_SERVER_UP) {
        s->state = MS_SERVER_UP;
        return true;
    }
    return false;
}

void ms_cluster_range_counts(struct ms_cluster *cl, size_t *counts)
{
    memset(counts, 0, cl->servers.n * sizeof(*counts));
    for (size_t i = 0; i < ms_catalog_nranges(cl->cat); i++) {
        uint64_t sid = ms_catalog_range_at(cl->cat, i)->server_id;
        size_t j;
        if (ms_vec_find(&cl->servers, MS__SERVER_ID, sid, &j)) {
            counts[j]++;
        }
    }
}

bool ms_cluster_server_usable(struct ms_cluster *cl, uint64_t id)
{
    struct ms_server *s = ms_cluster_server_find(cl, id);
    return s && s->state == MS_SERVER_UP && s->conn &&
           rt_rpc_conn_is_up(s->conn);
}

/* ---- peers ---- */

struct ms_peer *ms_cluster_peer_new(struct ms_cluster *cl,
                                    struct rt_rpc_conn *conn)
{
    struct ms_peer *p = rt_xcalloc(1, sizeof(*p));
    p->conn = conn;
    rt_rpc_conn_ref(conn);
    rt_rpc_conn_set_data(conn, p);
    ms_vec_push(&cl->peers, p);
    return p;
}

static void ms__vec_remove_ptr(struct ms_vec *vec, void *item)
{
    for (size_t i = 0; i < vec->n; i++) {
        if (vec->v[i] == item) {
            ms_vec_remove(vec, i);
            return;
        }
    }
}

void ms_cluster_peer_gone(struct ms_cluster *cl, struct ms_peer *p)
{
    struct rt_rpc_conn *conn = p->conn;
    if (p->subscribed) {
        ms__vec_remove_ptr(&cl->subscribers, p);
        rt_rpc_conn_unref(conn);
        rt_log(RT_LOG_INFO, "front end unsubscribed (connection closed)");
    }
    if (p->server_id) {
        struct ms_server *s = ms_cluster_server_find(cl, p->server_id);
        if (s && s->conn == conn) {
            s->conn = NULL;
            rt_rpc_conn_unref(conn);
            rt_log(RT_LOG_INFO,
                   "server %" PRIu64
                   " connection closed (down after "
                   "%" PRIu32 " ms without heartbeat)",
                   s->id, cl->heartbeat_timeout_ms);
        }
    }
    ms__vec_remove_ptr(&cl->peers, p);
    rt_rpc_conn_set_data(conn, NULL);
    rt_rpc_conn_unref(conn);
    free(p);
}

void ms_cluster_subscribe(struct ms_cluster *cl, struct ms_peer *peer)
{
    if (!peer->subscribed) {
        peer->subscribed = true;
        rt_rpc_conn_ref(peer->conn);
        ms_vec_push(&cl->subscribers, peer);
        rt_log(RT_LOG_INFO, "front end %s subscribed to map updates",
               rt_rpc_conn_peer(peer->conn));
    }
}

/* ---- the map ---- */

void ms_cluster_changed(struct ms_cluster *cl)
{
    if (cl->change_cb) {
        cl->change_cb(cl->change_arg);
    }
}

static void ms__map_build(struct ms_cluster *cl)
{
    size_t ns = cl->servers.n;
    size_t nr = ms_catalog_nranges(cl->cat);
    size_t nt = ms_catalog_ntables(cl->cat);
    size_t np = ms_catalog_nprops(cl->cat);
    size_t nacl = 0, ai = 0, na = 0;
    Rt__SignedIdentifier *acl;
    Rt__SignedIdentifier **aclp;
    Rt__AccountProps *av = rt_xcalloc(np ? np : 1, sizeof(*av));
    Rt__AccountProps **avp = rt_xcalloc(np ? np : 1, sizeof(*avp));
    Rt__Server *sv = rt_xcalloc(ns ? ns : 1, sizeof(*sv));
    Rt__Server **svp = rt_xcalloc(ns ? ns : 1, sizeof(*svp));
    Rt__Range *rv = rt_xcalloc(nr ? nr : 1, sizeof(*rv));
    Rt__Range **rvp = rt_xcalloc(nr ? nr : 1, sizeof(*rvp));
    Rt__Table *tv = rt_xcalloc(nt ? nt : 1, sizeof(*tv));
    Rt__Table **tvp = rt_xcalloc(nt ? nt : 1, sizeof(*tvp));
    Rt__Map map = RT__MAP__INIT;

    for (size_t i = 0; i < ns; i++) {
        const struct ms_server *s = cl->servers.v[i];
        const struct ms_server_rec *rec =
            ms_catalog_server_find(cl->cat, s->id);
        rt__server__init(&sv[i]);
        sv[i].id = s->id;
        sv[i].addr = rec ? rec->addr : (char *)"";
        sv[i].state = s->state;
        svp[i] = &sv[i];
    }
    for (size_t i = 0; i < nr; i++) {
        ms_range_to_pb(ms_catalog_range_at(cl->cat, i), &rv[i]);
        rvp[i] = &rv[i];
    }
    for (size_t i = 0; i < nt; i++) {
        nacl += ms_catalog_table_at(cl->cat, i)->nacl;
    }
    acl = rt_xcalloc(nacl ? nacl : 1, sizeof(*acl));
    aclp = rt_xcalloc(nacl ? nacl : 1, sizeof(*aclp));
    for (size_t i = 0; i < nt; i++) {
        const struct ms_table *t = ms_catalog_table_at(cl->cat, i);
        rt__table__init(&tv[i]);
        tv[i].account = t->account;
        tv[i].name = t->name;
        tv[i].id = t->id;
        /* Stored access policies: front ends check SAS "si" locally. */
        tv[i].n_acl = t->nacl;
        tv[i].acl = &aclp[ai];
        for (size_t j = 0; j < t->nacl; j++, ai++) {
            ms_acl_to_pb(&t->acl[j], &acl[ai]);
            aclp[ai] = &acl[ai];
        }
        tvp[i] = &tv[i];
    }
    /* CORS rules of every account that has some (front ends answer
     * preflights and add CORS headers without asking us). */
    for (size_t i = 0; i < np; i++) {
        const struct ms_props *p = ms_catalog_props_at(cl->cat, i);
        if (!p->props->cors || p->props->cors->n_rules == 0) {
            continue;
        }
        rt__account_props__init(&av[na]);
        av[na].account = p->account;
        av[na].n_cors = p->props->cors->n_rules;
        av[na].cors = p->props->cors->rules;
        avp[na] = &av[na];
        na++;
    }
    map.version = ms_catalog_map_version(cl->cat);
    map.n_servers = ns;
    map.servers = svp;
    map.n_ranges = nr;
    map.ranges = rvp;
    map.n_tables = nt;
    map.tables = tvp;
    map.n_accounts = na;
    map.accounts = avp;

    free(cl->map_buf);
    cl->map_len = rt__map__get_packed_size(&map);
    cl->map_buf = rt_xmalloc(cl->map_len);
    rt__map__pack(&map, cl->map_buf);
    cl->map_valid = true;

    free(sv);
    free(svp);
    free(rv);
    free(rvp);
    free(tv);
    free(tvp);
    free(acl);
    free(aclp);
    free(av);
    free(avp);
}

void ms_cluster_map_packed(struct ms_cluster *cl,
                           const uint8_t **buf,
                           size_t *len)
{
    if (!cl->map_valid) {
        ms__map_build(cl);
    }
    *buf = cl->map_buf;
    *len = cl->map_len;
}

void ms_cluster_map_changed(struct ms_cluster *cl, bool bump)
{
    if (bump) {
        int rc = ms_catalog_bump_version(cl->cat);
        if (rc) {
            /* The change is still real; front ends get it with the old
             * version number and resync on the next one. */
            rt_log(RT_LOG_ERROR, "map version not raised: %s", rt_strerror(rc));
        }
    }
    cl->map_valid = false;
    ms_cluster_changed(cl);
}

void ms_cluster_map_push(struct ms_cluster *cl)
{
    const uint8_t *buf;
    size_t len;
    if (cl->subscribers.n == 0) {
        return;
    }
    ms_cluster_map_packed(cl, &buf, &len);
    for (size_t i = 0; i < cl->subscribers.n; i++) {
        struct ms_peer *p = cl->subscribers.v[i];
        rt_rpc_call(p->conn, RT__METHOD__MAP_UPDATE, buf, len, 0, NULL, NULL);
    }
    cl->map_pushes++;
    rt_log(RT_LOG_DEBUG, "map version %" PRIu64 " pushed to %zu front ends",
           ms_catalog_map_version(cl->cat), cl->subscribers.n);
}

void ms_cluster_assignment(struct ms_cluster *cl,
                           uint64_t server_id,
                           struct ms_assignment *a)
{
    size_t nr = ms_catalog_nranges(cl->cat), ns = ms_catalog_nservers(cl->cat);
    bool *named = rt_xcalloc(ns ? ns : 1, sizeof(*named));

    memset(a, 0, sizeof(*a));
    a->rv = rt_xcalloc(nr ? nr : 1, sizeof(*a->rv));
    a->ranges = rt_xcalloc(nr ? nr : 1, sizeof(*a->ranges));
    a->sv = rt_xcalloc(ns ? ns : 1, sizeof(*a->sv));
    a->peers = rt_xcalloc(ns ? ns : 1, sizeof(*a->peers));
    for (size_t i = 0; i < nr; i++) {
        const struct ms_range *r = ms_catalog_range_at(cl->cat, i);
        if (!ms_range_names(r, server_id)) {
            continue;
        }
        ms_range_to_pb(r, &a->rv[a->n_ranges]);
        a->ranges[a->n_ranges] = &a->rv[a->n_ranges];
        a->n_ranges++;
        for (size_t j = 0; j < ns; j++) {
            named[j] = named[j] ||
                       ms_range_names(r, ms_catalog_server_at(cl->cat, j)->id);
        }
    }
    for (size_t j = 0; j < ns; j++) {
        const struct ms_server_rec *rec = ms_catalog_server_at(cl->cat, j);
        const struct ms_server *s;
        Rt__Server *pv = &a->sv[a->n_peers];
        if (!named[j]) {
            continue;
        }
        s = ms_cluster_server_find(cl, rec->id);
        rt__server__init(pv);
        pv->id = rec->id;
        pv->addr = rec->addr;
        pv->zone = rec->zone;
        pv->state = s ? s->state : MS_SERVER_DOWN;
        /* Peers check lease support requests against it (ps_lease). */
        if (rec->has_incarnation) {
            pv->incarnation.data = (uint8_t *)rec->incarnation;
            pv->incarnation.len = MS_INCARNATION_SIZE;
        }
        a->peers[a->n_peers++] = pv;
    }
    free(named);
}

void ms_assignment_free(struct ms_assignment *a)
{
    free(a->rv);
    free(a->ranges);
    free(a->sv);
    free(a->peers);
    memset(a, 0, sizeof(*a));
}

/* ---- calls to partition servers ---- */

struct ms__call
{
    struct ms_cluster *cl;
    uint64_t server_id;
    const char *what;
    rt_rpc_reply_cb cb;
    void *arg;
};

static void ms__call_done(int status,
                          const uint8_t *body,
                          size_t len,
                          void *arg)
{
    struct ms__call *c = arg;
    c->cl->inflight--;
    if (status) {
        rt_log(status == RT_ECANCELED ? RT_LOG_DEBUG : RT_LOG_WARN,
               "%s to server %" PRIu64
               " failed: %s (the heartbeat "
               "reconciles)",
               c->what, c->server_id, rt_strerror(status));
    }
    if (c->cb) {
        c->cb(status, body, len, c->arg);
    }
    free(c);
}

int ms_cluster_call(struct ms_cluster *cl,
                    uint64_t server_id,
                    uint32_t method,
                    const char *what,
                    const ProtobufCMessage *msg,
                    uint32_t timeout_ms,
                    rt_rpc_reply_cb cb,
                    void *arg)
{
    struct ms_server *s = ms_cluster_server_find(cl, server_id);
    struct ms__call *c;
    int rc;
    if (!s || !s->conn || !rt_rpc_conn_is_up(s->conn)) {
        rt_log(RT_LOG_DEBUG, "%s: server %" PRIu64 " not connected", what,
               server_id);
        return RT_ENOCONN;
    }
    c = rt_xcalloc(1, sizeof(*c));
    c->cl = cl;
    c->server_id = server_id;
    c->what = what;
    c->cb = cb;
    c->arg = arg;
    rc = rt_rpc_call_pb(s->conn, method, msg, timeout_ms, ms__call_done, c);
    if (rc) {
        free(c);
        return rc;
    }
    cl->inflight++;
    return 0;
}

int ms_cluster_assign_push(struct ms_cluster *cl,
                           uint64_t server_id,
                           uint32_t timeout_ms,
                           rt_rpc_reply_cb cb,
                           void *arg)
{
    Rt__Assignment a = RT__ASSIGNMENT__INIT;
    struct ms_assignment as;
    int rc;
    ms_cluster_assignment(cl, server_id, &as);
    a.n_ranges = as.n_ranges;
    a.ranges = as.ranges;
    a.n_peers = as.n_peers;
    a.peers = as.peers;
    a.map_version = ms_catalog_map_version(cl->cat);
    a.master_term = ms_catalog_master_term(cl->cat);
    rc = ms_cluster_call(
        cl, server_id, RT__METHOD__ASSIGN_RANGES, "ASSIGN_RANGES", &a.base,
        timeout_ms ? timeout_ms : cl->assign_timeout_ms, cb, arg);
    ms_assignment_free(&as);
    return rc;
}

void ms_cluster_assign_push_peers(struct ms_cluster *cl, uint64_t server_id)
{
    for (size_t j = 0; j < ms_catalog_nservers(cl->cat); j++) {
        uint64_t other = ms_catalog_server_at(cl->cat, j)->id;
        bool shares = false;
        if (other == server_id) {
            continue;
        }
        for (size_t i = 0; !shares && i < ms_catalog_nranges(cl->cat); i++) {
            const struct ms_range *r = ms_catalog_range_at(cl->cat, i);
            shares = ms_range_names(r, server_id) && ms_range_names(r, other);
        }
        if (shares) {
            ms_cluster_assign_push(cl, other, 0, NULL, NULL);
        }
    }
}
