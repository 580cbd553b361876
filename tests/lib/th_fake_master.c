#include "th_fake_master.h"

#include <stdio.h>
#include <string.h>

#include "rt_err.h"

static struct th_fm_slot *th__fm_by_conn(struct th_fake_master *m,
                                         struct rt_rpc_conn *conn)
{
    for (int i = 0; i < TH_FM_SLOTS; i++) {
        if (m->slot[i].id && m->slot[i].conn == conn) {
            return &m->slot[i];
        }
    }
    return NULL;
}

static struct th_fm_slot *th__fm_register_slot(struct th_fake_master *m,
                                               const char *addr,
                                               struct rt_rpc_conn *conn)
{
    struct th_fm_slot *s;

    for (int i = 0; i < TH_FM_SLOTS; i++) {
        if (m->slot[i].id && strcmp(m->slot[i].addr, addr) == 0) {
            return &m->slot[i];
        }
    }
    if ((s = th__fm_by_conn(m, conn)) != NULL) {
        return s;
    }
    for (int i = 0; i < TH_FM_SLOTS; i++) {
        if (m->slot[i].id && !m->slot[i].addr[0]) {
            return &m->slot[i];
        }
    }
    return NULL;
}

static struct th_fm_slot *th__fm_register(struct th_fake_master *m,
                                          struct rt_rpc_conn *conn,
                                          const uint8_t *body,
                                          size_t len)
{
    Rt__RegisterReq *req = rt__register_req__unpack(NULL, len, body);
    struct th_fm_slot *s;

    if (!req) {
        return NULL;
    }
    s = th__fm_register_slot(m, req->addr, conn);
    if (s) {
        s->registers++;
        s->reg_server_id = req->server_id;
        snprintf(s->reg_addr, sizeof(s->reg_addr), "%s", req->addr);
        s->reg_n_range_ids = req->n_range_ids;
        for (size_t i = 0; i < req->n_range_ids && i < TH_FM_RANGES; i++) {
            s->reg_range_ids[i] = req->range_ids[i];
        }
        if (s->conn != conn) {
            if (s->conn) {
                rt_rpc_conn_unref(s->conn);
            }
            rt_rpc_conn_ref(conn);
            s->conn = conn;
        }
    }
    rt__register_req__free_unpacked(req, NULL);
    return s;
}

static struct th_fm_slot *th__fm_heartbeat(struct th_fake_master *m,
                                           struct rt_rpc_conn *conn,
                                           const uint8_t *body,
                                           size_t len)
{
    Rt__HeartbeatReq *req = rt__heartbeat_req__unpack(NULL, len, body);
    struct th_fm_slot *s = NULL;

    if (!req) {
        return NULL;
    }
    for (int i = 0; i < TH_FM_SLOTS && !s; i++) {
        if (m->slot[i].id && m->slot[i].id == req->server_id) {
            s = &m->slot[i];
        }
    }
    if (!s) {
        s = th__fm_by_conn(m, conn);
    }
    if (s) {
        s->heartbeats++;
        s->hb_max_server_eps = req->max_server_eps;
        s->hb_max_range_eps = req->max_range_eps;
        for (size_t i = 0; i < req->n_loads; i++) {
            const Rt__RangeLoad *l = req->loads[i];
            s->hb_requests += l->requests;
            s->hb_throttled += l->throttled;
            s->hb_samples += l->n_sample_pks;
            if (l->range_id < TH_FM_KEYS) {
                s->hb_keys[l->range_id] = l->key_count;
                s->hb_key_bytes[l->range_id] = l->key_bytes;
                s->hb_interval_ms[l->range_id] = l->interval_ms;
            }
        }
    }
    rt__heartbeat_req__free_unpacked(req, NULL);
    return s;
}

static void th__fm_on_request(struct rt_rpc_conn *conn,
                              uint32_t method,
                              uint64_t id,
                              const uint8_t *body,
                              size_t len,
                              void *ud)
{
    struct th_fake_master *m = ud;
    Rt__RegisterResp resp = RT__REGISTER_RESP__INIT;
    struct th_fm_slot *s;

    if (m->not_leader != NULL && method != RT__METHOD__PING) {
        Rt__NotLeader hint = RT__NOT_LEADER__INIT;
        hint.leader_rpc_addr = (char *)m->not_leader;
        m->not_leader_answers++;
        rt_rpc_reply_notleader(conn, id, method, &hint);
        return;
    }
    if (method == RT__METHOD__PS_REGISTER) {
        s = th__fm_register(m, conn, body, len);
    } else if (method == RT__METHOD__PS_HEARTBEAT) {
        s = th__fm_heartbeat(m, conn, body, len);
    } else if (m->other != NULL) {
        m->other(conn, method, id, body, len, m->other_ud);
        return;
    } else {
        rt_rpc_reply_err(conn, id, method, RT_ENOTIMPL, "fake master");
        return;
    }
    if (!s) {
        m->bad_requests++;
        rt_rpc_reply_err(conn, id, method, RT_EINVAL, "fake master: who?");
        return;
    }
    resp.server_id = s->id;
    resp.n_ranges = s->n;
    resp.ranges = s->ptrs;
    resp.map_version = m->map_version;
    resp.master_term = m->master_term;
    rt_rpc_reply_pb(conn, id, method, 0, &resp.base);
}

int th_fake_master_start(struct th_fake_master *m, uv_loop_t *loop)
{
    int rc = rt_rpc_server_start(loop, "127.0.0.1", 0, th__fm_on_request, NULL,
                                 m, &m->srv);
    if (rc != 0) {
        m->srv = NULL;
        return rc;
    }
    m->port = rt_rpc_server_port(m->srv);
    snprintf(m->addr, sizeof(m->addr), "127.0.0.1:%d", m->port);
    return 0;
}

void th_fake_master_set_range(struct th_fake_master *m,
                              int s,
                              size_t i,
                              uint64_t id,
                              uint64_t table,
                              const char *low,
                              const char *high,
                              uint64_t epoch)
{
    struct th_fm_slot *sl = &m->slot[s];
    Rt__Range *r = &sl->ranges[i];

    rt__range__init(r);
    snprintf(sl->low[i], sizeof(sl->low[i]), "%s", low);
    snprintf(sl->high[i], sizeof(sl->high[i]), "%s", high ? high : "");
    r->id = id;
    r->table_id = table;
    r->low = sl->low[i];
    r->high = sl->high[i];
    r->high_inf = high == NULL;
    r->server_id = sl->id;
    r->epoch = epoch;
    sl->ptrs[i] = r;
}

void th_fake_master_forget(struct th_fake_master *m, int s)
{
    if (m->slot[s].conn) {
        rt_rpc_conn_unref(m->slot[s].conn);
        m->slot[s].conn = NULL;
    }
}

void th_fake_master_close(struct th_fake_master *m)
{
    for (int i = 0; i < TH_FM_SLOTS; i++) {
        th_fake_master_forget(m, i);
    }
    if (m->srv) {
        rt_rpc_server_close(m->srv);
        m->srv = NULL;
    }
}
