/* Master core: lifecycle, runtime server table, liveness, the packed map
 * and pushes to partition servers and front ends. Request handlers are in
 * ms_rpc.c; the status documents in ms_status.c. */
#include "ms_master.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ms_internal.h"
#include "ms_status.h"
#include "rt_alloc.h"
#include "rt_err.h"
#include "rt_log.h"
#include "rt_time.h"

#define MS__DEFAULT_TICK_MS 500
#define MS__DEFAULT_ASSIGN_MS 2000
#define MS__DEFAULT_HB_TIMEOUT_MS 3000

/* ---- servers ---- */

static size_t ms__server_lower_bound(const struct ms_master *m, uint64_t id)
{
    size_t lo = 0, hi = m->servers.n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (((struct ms_server *)m->servers.v[mid])->id < id) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    return lo;
}

struct ms_server *ms__server_find(struct ms_master *m, uint64_t id)
{
    size_t i = ms__server_lower_bound(m, id);
    if (i < m->servers.n && ((struct ms_server *)m->servers.v[i])->id == id) {
        return m->servers.v[i];
    }
    return NULL;
}

struct ms_server *ms__server_get(struct ms_master *m, uint64_t id)
{
    size_t i = ms__server_lower_bound(m, id);
    struct ms_server *s;
    if (i < m->servers.n && ((struct ms_server *)m->servers.v[i])->id == id) {
        return m->servers.v[i];
    }
    s = rt_xcalloc(1, sizeof(*s));
    s->id = id;
    s->state = MS_SERVER_DOWN;
    ms_vec_insert(&m->servers, i, s);
    return s;
}

void ms__server_attach(struct ms_master *m,
                       struct ms_server *s,
                       struct ms_peer *peer)
{
    if (s->conn == peer->conn) {
        peer->server_id = s->id;
        return;
    }
    /* The connection spoke for another server before: detach it there. */
    if (peer->server_id && peer->server_id != s->id) {
        struct ms_server *other = ms__server_find(m, peer->server_id);
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

bool ms__server_alive(struct ms_master *m, struct ms_server *s)
{
    (void)m;
    s->seen = true;
    s->last_hb_ms = rt_time_mono_ms();
    if (s->state != MS_SERVER_UP) {
        s->state = MS_SERVER_UP;
        return true;
    }
    return false;
}

void ms__range_counts(struct ms_master *m, size_t *counts)
{
    memset(counts, 0, m->servers.n * sizeof(*counts));
    for (size_t i = 0; i < ms_catalog_nranges(m->cat); i++) {
        uint64_t sid = ms_catalog_range_at(m->cat, i)->server_id;
        size_t j = ms__server_lower_bound(m, sid);
        if (j < m->servers.n &&
            ((struct ms_server *)m->servers.v[j])->id == sid) {
            counts[j]++;
        }
    }
}

/* ---- the map ---- */

static void ms__range_pb(Rt__Range *out, const struct ms_range *r)
{
    rt__range__init(out);
    out->id = r->id;
    out->table_id = r->table_id;
    out->low = r->low;
    out->high = r->high;
    out->high_inf = r->high_inf;
    out->server_id = r->server_id;
    out->epoch = r->epoch;
}

static void ms__map_build(struct ms_master *m)
{
    size_t ns = m->servers.n;
    size_t nr = ms_catalog_nranges(m->cat);
    size_t nt = ms_catalog_ntables(m->cat);
    size_t np = ms_catalog_nprops(m->cat);
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
        const struct ms_server *s = m->servers.v[i];
        const struct ms_server_rec *rec = ms_catalog_server_find(m->cat, s->id);
        rt__server__init(&sv[i]);
        sv[i].id = s->id;
        sv[i].addr = rec ? rec->addr : (char *)"";
        sv[i].state = s->state;
        svp[i] = &sv[i];
    }
    for (size_t i = 0; i < nr; i++) {
        ms__range_pb(&rv[i], ms_catalog_range_at(m->cat, i));
        rvp[i] = &rv[i];
    }
    for (size_t i = 0; i < nt; i++) {
        nacl += ms_catalog_table_at(m->cat, i)->nacl;
    }
    acl = rt_xcalloc(nacl ? nacl : 1, sizeof(*acl));
    aclp = rt_xcalloc(nacl ? nacl : 1, sizeof(*aclp));
    for (size_t i = 0; i < nt; i++) {
        const struct ms_table *t = ms_catalog_table_at(m->cat, i);
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
        const struct ms_props *p = ms_catalog_props_at(m->cat, i);
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
    map.version = ms_catalog_map_version(m->cat);
    map.n_servers = ns;
    map.servers = svp;
    map.n_ranges = nr;
    map.ranges = rvp;
    map.n_tables = nt;
    map.tables = tvp;
    map.n_accounts = na;
    map.accounts = avp;

    free(m->map_buf);
    m->map_len = rt__map__get_packed_size(&map);
    m->map_buf = rt_xmalloc(m->map_len);
    rt__map__pack(&map, m->map_buf);
    m->map_valid = true;

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

void ms__map_packed(struct ms_master *m, const uint8_t **buf, size_t *len)
{
    if (!m->map_valid) {
        ms__map_build(m);
    }
    *buf = m->map_buf;
    *len = m->map_len;
}

void ms__map_changed(struct ms_master *m, bool bump)
{
    if (bump) {
        int rc = ms_catalog_bump_version(m->cat);
        if (rc) {
            /* The change is still real; front ends get it with the old
             * version number and resync on the next one. */
            rt_log(RT_LOG_ERROR, "map version not raised: %s", rt_strerror(rc));
        }
    }
    m->map_valid = false;
    ms__status_refresh(m);
}

void ms__map_push(struct ms_master *m)
{
    const uint8_t *buf;
    size_t len;
    if (m->subscribers.n == 0) {
        return;
    }
    ms__map_packed(m, &buf, &len);
    for (size_t i = 0; i < m->subscribers.n; i++) {
        struct ms_peer *p = m->subscribers.v[i];
        rt_rpc_call(p->conn, RT__METHOD__MAP_UPDATE, buf, len, 0, NULL, NULL);
    }
    m->map_pushes++;
    rt_log(RT_LOG_DEBUG, "map version %" PRIu64 " pushed to %zu front ends",
           ms_catalog_map_version(m->cat), m->subscribers.n);
}

size_t ms__assignment(struct ms_master *m,
                      uint64_t server_id,
                      Rt__Range **ranges,
                      Rt__Range ***ptrs)
{
    size_t nr = ms_catalog_nranges(m->cat), n = 0;
    Rt__Range *rv = rt_xcalloc(nr ? nr : 1, sizeof(*rv));
    Rt__Range **rvp = rt_xcalloc(nr ? nr : 1, sizeof(*rvp));
    for (size_t i = 0; i < nr; i++) {
        const struct ms_range *r = ms_catalog_range_at(m->cat, i);
        if (r->server_id == server_id) {
            ms__range_pb(&rv[n], r);
            rvp[n] = &rv[n];
            n++;
        }
    }
    *ranges = rv;
    *ptrs = rvp;
    return n;
}

/* ---- calls to partition servers ---- */

struct ms__call
{
    struct ms_master *m;
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
    c->m->inflight--;
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

int ms__server_call(struct ms_master *m,
                    uint64_t server_id,
                    uint32_t method,
                    const char *what,
                    const ProtobufCMessage *msg,
                    uint32_t timeout_ms,
                    rt_rpc_reply_cb cb,
                    void *arg)
{
    struct ms_server *s = ms__server_find(m, server_id);
    struct ms__call *c;
    int rc;
    if (!s || !s->conn || !rt_rpc_conn_is_up(s->conn)) {
        rt_log(RT_LOG_DEBUG, "%s: server %" PRIu64 " not connected", what,
               server_id);
        return RT_ENOCONN;
    }
    c = rt_xcalloc(1, sizeof(*c));
    c->m = m;
    c->server_id = server_id;
    c->what = what;
    c->cb = cb;
    c->arg = arg;
    rc = rt_rpc_call_pb(s->conn, method, msg, timeout_ms, ms__call_done, c);
    if (rc) {
        free(c);
        return rc;
    }
    m->inflight++;
    return 0;
}

int ms__assign_push(struct ms_master *m,
                    uint64_t server_id,
                    uint32_t timeout_ms,
                    rt_rpc_reply_cb cb,
                    void *arg)
{
    Rt__Assignment a = RT__ASSIGNMENT__INIT;
    Rt__Range *rv, **rvp;
    int rc;
    a.n_ranges = ms__assignment(m, server_id, &rv, &rvp);
    a.ranges = rvp;
    a.map_version = ms_catalog_map_version(m->cat);
    rc = ms__server_call(
        m, server_id, RT__METHOD__ASSIGN_RANGES, "ASSIGN_RANGES", &a.base,
        timeout_ms ? timeout_ms : m->cfg.assign_timeout_ms, cb, arg);
    free(rv);
    free(rvp);
    return rc;
}

/* ---- status ---- */

void ms__status_refresh(struct ms_master *m)
{
    char *json, *metrics;
    m->snapshot_ms = rt_time_mono_ms();
    if (!m->status) {
        return;
    }
    ms_status_build(m, &json, &metrics);
    ms_status_publish(m->status, json, metrics);
}

void ms__status_history(struct ms_master *m)
{
    if (m->status) {
        ms_status_publish_doc(m->status, MS_STATUS_HISTORY,
                              ms_status_build_history(m));
    }
}

void ms_master_set_status(struct ms_master *m, struct ms_status *st)
{
    m->status = st;
    ms__status_refresh(m);
    if (st) {
        ms__status_history(m);
    }
}

/* ---- liveness ---- */

static void ms__tick_cb(uv_timer_t *t)
{
    struct ms_master *m = t->data;
    uint64_t now = rt_time_mono_ms();
    bool changed = false;

    for (size_t i = 0; i < m->servers.n; i++) {
        struct ms_server *s = m->servers.v[i];
        if (s->state == MS_SERVER_UP &&
            now - s->last_hb_ms > m->cfg.heartbeat_timeout_ms) {
            char why[96];
            s->state = MS_SERVER_DOWN;
            changed = true;
            rt_log(RT_LOG_WARN,
                   "server %" PRIu64 " down: no heartbeat for %" PRIu64 " ms",
                   s->id, now - s->last_hb_ms);
            snprintf(why, sizeof(why), "no heartbeat for %" PRIu64 " ms",
                     now - s->last_hb_ms);
            ms__balance_server_state(m, s, why);
        }
    }
    /* Deleted names whose grace period is over become free again. */
    if (ms_catalog_ntombstones(m->cat)) {
        int n = ms_catalog_purge_tombstones(m->cat);
        if (n > 0) {
            rt_log(RT_LOG_DEBUG, "purged %d expired table tombstones", n);
        }
    }
    if (changed) {
        ms__map_changed(m, true);
        ms__map_push(m);
    }
    /* Load balancing: history frame, policy decisions, drains, aborts. */
    ms__balance_tick(m);
    /* last_heartbeat_ms_ago and the loads move on: keep it fresh. */
    ms__status_refresh(m);
}

/* ---- lifecycle ---- */

int ms_master_start(uv_loop_t *loop,
                    const struct ms_master_config *cfg,
                    struct ms_master **out,
                    char *errmsg)
{
    struct ms_master *m = rt_xcalloc(1, sizeof(*m));
    int rc;

    m->loop = loop;
    m->cfg = *cfg;
    m->cfg.data_dir = NULL; /* borrowed only during start */
    m->cfg.listen_host = NULL;
    if (!m->cfg.tick_ms) {
        m->cfg.tick_ms = MS__DEFAULT_TICK_MS;
    }
    if (!m->cfg.assign_timeout_ms) {
        m->cfg.assign_timeout_ms = MS__DEFAULT_ASSIGN_MS;
    }
    if (!m->cfg.heartbeat_timeout_ms) {
        m->cfg.heartbeat_timeout_ms = MS__DEFAULT_HB_TIMEOUT_MS;
    }
    m->cfg.policy = NULL;
    {
        struct ms_policy_config zero;
        memset(&zero, 0, sizeof(zero));
        if (memcmp(&zero, &cfg->policy_cfg, sizeof(zero)) == 0) {
            ms_policy_config_default(&m->cfg.policy_cfg);
        }
    }
    rc = ms_policy_create(cfg->policy, &m->cfg.policy_cfg, &m->policy);
    if (rc) {
        if (errmsg) {
            rt_errmsg_printf(errmsg, "unknown policy '%s' (default|none)",
                             cfg->policy ? cfg->policy : "");
        }
        free(m);
        return rc;
    }
    m->load = ms_load_create(m->cfg.load_tau_ms);

    rc = ms_catalog_open(cfg->data_dir, &m->cat, errmsg);
    if (rc) {
        ms_policy_destroy(&m->policy);
        ms_load_destroy(m->load);
        free(m);
        return rc;
    }
    rc = ms_events_open(cfg->data_dir, m->cfg.events_cap, &m->events, errmsg);
    if (rc) {
        ms_catalog_close(m->cat);
        ms_policy_destroy(&m->policy);
        ms_load_destroy(m->load);
        free(m);
        return rc;
    }
    ms__balance_init(m);
    ms_catalog_set_delete_grace(m->cat, m->cfg.delete_grace_ms);
    /* Known servers start down until they register again. */
    for (size_t i = 0; i < ms_catalog_nservers(m->cat); i++) {
        ms__server_get(m, ms_catalog_server_at(m->cat, i)->id);
    }
    rc = rt_rpc_server_start(loop, cfg->listen_host, cfg->listen_port,
                             ms__on_request, ms__on_conn, m, &m->rpc);
    if (rc) {
        if (errmsg) {
            rt_errmsg_printf(errmsg, "listen on %s:%d: %s", cfg->listen_host,
                             cfg->listen_port, rt_strerror(rc));
        }
        m->stopping = true;
        ms_master_destroy(m);
        return rc;
    }
    uv_timer_init(loop, &m->tick);
    m->tick.data = m;
    m->tick_open = true;
    uv_timer_start(&m->tick, ms__tick_cb, m->cfg.tick_ms, m->cfg.tick_ms);
    rt_log(RT_LOG_INFO,
           "master up: rpc %s:%d, %zu tables, %zu ranges, %zu known servers, "
           "map version %" PRIu64 ", policy %s",
           cfg->listen_host, ms_master_rpc_port(m), ms_catalog_ntables(m->cat),
           ms_catalog_nranges(m->cat), ms_catalog_nservers(m->cat),
           ms_catalog_map_version(m->cat), m->policy.ops->name);
    *out = m;
    return 0;
}

int ms_master_set_admin(struct ms_master *m, struct ms_admin *adm)
{
    int rc = ms_admin_attach(adm, m->loop, ms__balance_admin, m);
    if (rc == 0) {
        m->admin = adm;
    }
    return rc;
}

struct ms_events *ms_master_events(struct ms_master *m)
{
    return m->events;
}

int ms_master_rpc_port(const struct ms_master *m)
{
    return m->rpc ? rt_rpc_server_port(m->rpc) : -1;
}

void ms_master_stop(struct ms_master *m)
{
    if (m->stopping) {
        return;
    }
    m->stopping = true;
    rt_log(RT_LOG_INFO, "master stopping");
    if (m->tick_open) {
        uv_timer_stop(&m->tick);
        uv_close((uv_handle_t *)&m->tick, NULL);
        m->tick_open = false;
    }
    if (m->admin) {
        /* Queued operator requests get 503; those in flight are answered
         * when their calls complete (RT_ECANCELED) below. */
        ms_admin_detach(m->admin);
    }
    if (m->rpc) {
        /* Drops every connection: ms__on_conn(down) runs for each, pending
         * calls complete with RT_ECANCELED on later ticks. */
        rt_rpc_server_close(m->rpc);
        m->rpc = NULL;
    }
}

void ms_master_destroy(struct ms_master *m)
{
    if (!m) {
        return;
    }
    if (m->inflight) {
        rt_log(RT_LOG_WARN, "master destroyed with %zu calls in flight",
               m->inflight);
    }
    for (size_t i = 0; i < m->servers.n; i++) {
        struct ms_server *s = m->servers.v[i];
        if (s->conn) {
            rt_rpc_conn_unref(s->conn);
        }
        free(s);
    }
    for (size_t i = 0; i < m->subscribers.n; i++) {
        rt_rpc_conn_unref(((struct ms_peer *)m->subscribers.v[i])->conn);
    }
    for (size_t i = 0; i < m->peers.n; i++) {
        struct ms_peer *p = m->peers.v[i];
        rt_rpc_conn_set_data(p->conn, NULL);
        rt_rpc_conn_unref(p->conn);
        free(p);
    }
    ms_vec_free(&m->servers);
    ms_vec_free(&m->subscribers);
    ms_vec_free(&m->peers);
    free(m->map_buf);
    ms__balance_fini(m);
    ms_policy_destroy(&m->policy);
    ms_load_destroy(m->load);
    ms_events_close(m->events);
    ms_catalog_close(m->cat);
    free(m);
}
