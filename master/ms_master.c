/* Master core: lifecycle, wiring and the liveness tick. It owns the
 * catalog, the load model, the event log, the policy, the cluster state
 * (ms_cluster.c), the balancer (ms_balance.c), the replication glue
 * (ms_repl.c) and the RPC service (ms_rpc.c), and republishes the status
 * documents (ms_status.c) when the cluster reports a change. Nothing below
 * calls back into this file except through the change callback registered
 * here. */
#include "ms_master.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ms_admin.h"
#include "ms_balance.h"
#include "ms_catalog.h"
#include "ms_cluster.h"
#include "ms_events.h"
#include "ms_load.h"
#include "ms_policy.h"
#include "ms_repl.h"
#include "ms_rpc.h"
#include "ms_status.h"
#include "rt_alloc.h"
#include "rt_err.h"
#include "rt_log.h"
#include "rt_time.h"

#define MS__DEFAULT_TICK_MS 500
#define MS__DEFAULT_ASSIGN_MS 2000
#define MS__DEFAULT_HB_TIMEOUT_MS 3000
#define MS__STATUS_COALESCE_MS 20

struct ms_master
{
    uv_loop_t *loop;
    struct ms_master_config cfg;
    struct ms_catalog *cat;
    struct ms_policy policy;
    struct ms_load *load;     /* per-range load model and history */
    struct ms_events *events; /* decisions and outcomes */
    bool own_cat, own_events; /* opened here (else borrowed) */
    struct ms_admin *admin;   /* borrowed, may be NULL */
    bool admin_attached;      /* ours to detach (ms_master_set_admin) */
    struct rt_rpc_server *rpc_server;
    uv_timer_t tick;
    bool tick_open;
    bool stopping;

    struct ms_cluster cl;
    struct ms_balance bal;
    bool bal_open; /* bal initialised (ms_balance_fini() due) */
    struct ms_rpc rpc;
    struct ms_repl *repl; /* failover of replicated ranges */

    struct ms_status *status; /* borrowed, may be NULL */
    uv_timer_t status_timer;  /* a burst of changes -> one rebuild */
    bool status_timer_open;
    bool status_dirty;
    uint64_t status_cost_us; /* what the last rebuild took */
    uint64_t snapshot_ms;    /* when the status was last published */
    uint64_t coarse_seen;    /* ms_load_coarse_added() when last published */
    bool coarse_published;
    struct ms_status_hist_cache hist_fine; /* frames' JSON, per ring */
    struct ms_status_hist_cache hist_coarse;
};

/* ---- status ---- */

static void ms__status_refresh(struct ms_master *m)
{
    char *json, *metrics;
    uint64_t t0 = uv_hrtime();
    m->snapshot_ms = rt_time_mono_ms();
    if (!m->status) {
        return;
    }
    ms_status_build(&m->cl, &m->bal, m->repl, &json, &metrics);
    ms_status_publish(m->status, json, metrics);
    m->status_cost_us = (uv_hrtime() - t0) / 1000;
}

static void ms__status_history(struct ms_master *m)
{
    if (m->status) {
        ms_status_publish_doc(
            m->status, MS_STATUS_HISTORY,
            ms_status_build_history(&m->cl, &m->bal, false, &m->hist_fine));
        /* The coarse document changes only when a 10 s frame is added. */
        if (!m->coarse_published ||
            ms_load_coarse_added(m->load) != m->coarse_seen) {
            m->coarse_seen = ms_load_coarse_added(m->load);
            m->coarse_published = true;
            ms_status_publish_doc(m->status, MS_STATUS_HISTORY_COARSE,
                                  ms_status_build_history(&m->cl, &m->bal, true,
                                                          &m->hist_coarse));
        }
    }
}

static void ms__status_timer_cb(uv_timer_t *t)
{
    struct ms_master *m = t->data;
    m->status_dirty = false;
    ms__status_refresh(m);
}

/* ms_cluster_change_cb: the map, a server or an operation changed. The
 * documents are rebuilt at once, unless a rebuild costs over a ms and one
 * was done within the last MS__STATUS_COALESCE_MS: then once, that long
 * after, for the whole burst
 * (a failover of hundreds of ranges commits hundreds of changes in a row;
 * a rebuild each kept the loop busy for most of a second). */
static void ms__cluster_changed(void *arg)
{
    struct ms_master *m = arg;
    uint64_t now = rt_time_mono_ms();
    if (m->status_dirty) {
        return; /* a rebuild is due already */
    }
    if (!m->status_timer_open || m->status_cost_us < 1000 ||
        now - m->snapshot_ms >= MS__STATUS_COALESCE_MS) {
        /* Cheap (a small cluster), or the first change of a burst: at
         * once. */
        ms__status_refresh(m);
        return;
    }
    m->status_dirty = true;
    uv_timer_start(&m->status_timer, ms__status_timer_cb,
                   MS__STATUS_COALESCE_MS, 0);
}

void ms_master_set_status(struct ms_master *m, struct ms_status *st)
{
    m->status = st;
    m->coarse_published = false;
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

    for (size_t i = 0; i < m->cl.servers.n; i++) {
        struct ms_server *s = m->cl.servers.v[i];
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
            ms_balance_server_state(&m->bal, s, why);
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
        ms_cluster_map_changed(&m->cl, true);
        ms_cluster_map_push(&m->cl);
    }
    /* Load balancing: history frame, policy decisions, drains, aborts. */
    if (ms_balance_tick(&m->bal)) {
        ms__status_history(m);
    }
    ms_trace_rec_tick(m->cfg.trace);
    /* last_heartbeat_ms_ago and the loads move on: keep it fresh. */
    ms__status_refresh(m);
}

/* ---- lifecycle ---- */

/* ms_trace_rec_info.range_times: the executor's record of @id. */
static bool ms__range_times(void *arg,
                            uint64_t id,
                            uint64_t *born_ms,
                            uint64_t *split_ms)
{
    const struct ms_rmeta *rm = ms_exec_rmeta_find(arg, id);
    if (!rm) {
        return false;
    }
    *born_ms = rm->born_ms;
    *split_ms = rm->split_ms;
    return true;
}

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
    if (!m->cfg.replication_factor) {
        m->cfg.replication_factor = 1;
    }
    if (!m->cfg.min_insync) {
        m->cfg.min_insync =
            m->cfg.replication_factor < 2 ? m->cfg.replication_factor : 2;
    }
    if (m->cfg.replication_factor > MS_REPLICAS_MAX ||
        m->cfg.min_insync > m->cfg.replication_factor) {
        if (errmsg) {
            rt_errmsg_printf(errmsg,
                             "replication factor %u must be 1..%d and "
                             "min-insync %u at most the replication factor",
                             m->cfg.replication_factor, MS_REPLICAS_MAX,
                             m->cfg.min_insync);
        }
        rc = RT_EINVAL;
        goto err_after_alloc;
    }
    {
        /* Thresholds all zero = the defaults; the policy's own options
         * (opts) are kept either way. */
        struct ms_policy_config zero, given = cfg->policy_cfg;
        memset(&zero, 0, sizeof(zero));
        given.opts = NULL;
        if (memcmp(&zero, &given, sizeof(zero)) == 0) {
            ms_policy_config_default(&m->cfg.policy_cfg);
            m->cfg.policy_cfg.opts = cfg->policy_cfg.opts;
        }
    }
    {
        char perr[RT_ERRMSG_SIZE];
        rc = ms_policy_create_msg(cfg->policy, &m->cfg.policy_cfg, &m->policy,
                                  perr);
        if (rc) {
            if (errmsg) {
                rt_errmsg_printf(errmsg, "%s", perr);
            }
            goto err_after_alloc;
        }
        m->cfg.policy_cfg.opts = NULL; /* borrowed for the create only */
    }
    m->load = ms_load_create(m->cfg.load_tau_ms);

    m->cat = cfg->cat;
    if (!m->cat) {
        rc = ms_catalog_open(cfg->data_dir, &m->cat, errmsg);
        if (rc) {
            goto err_after_load;
        }
        m->own_cat = true;
    }
    m->events = cfg->events;
    if (!m->events) {
        rc = ms_events_open(cfg->data_dir, m->cfg.events_cap, &m->events,
                            errmsg);
        if (rc) {
            goto err_after_catalog;
        }
        m->own_events = true;
    }
    ms_catalog_set_delete_grace(m->cat, m->cfg.delete_grace_ms);
    ms_cluster_init(&m->cl, m->cat, m->cfg.heartbeat_timeout_ms,
                    m->cfg.assign_timeout_ms, ms__cluster_changed, m);
    ms_balance_init(&m->bal, &m->cl, m->load, m->events, &m->policy,
                    &m->cfg.policy_cfg, m->cfg.tick_ms, m->cfg.move_timeout_ms,
                    m->cfg.replication_factor, m->cfg.min_insync);
    m->bal_open = true;
    m->rpc.cl = &m->cl;
    m->rpc.bal = &m->bal;
    rc = cfg->no_listen
             ? 0
             : rt_rpc_server_start(loop, cfg->listen_host, cfg->listen_port,
                                   ms_rpc_on_request, ms_rpc_on_conn, &m->rpc,
                                   &m->rpc_server);
    if (rc) {
        if (errmsg) {
            rt_errmsg_printf(errmsg, "listen on %s:%d: %s", cfg->listen_host,
                             cfg->listen_port, rt_strerror(rc));
        }
        m->stopping = true;
        ms_master_destroy(m);
        return rc;
    }
    {
        struct ms_repl_config rcfg = {
            .failover_after_ms = m->cfg.failover_after_ms,
            .reconnect_grace_ms = m->cfg.reconnect_grace_ms,
            .seal_wait_ms = m->cfg.seal_wait_ms,
            .lease_ms = m->cfg.lease_ms,
            .resend_ms = m->cfg.repl_resend_ms,
            .learner_timeout_ms = m->cfg.learner_timeout_ms,
            .learner_min_mb_per_s = m->cfg.learner_min_mb_per_s,
            .rereplicate_after_ms = m->cfg.rereplicate_after_ms,
            .max_rereplications = m->cfg.max_rereplications,
        };
        /* Loads every replicated range; a seal intent found in the
         * catalog resumes its failover (SEALs go out once the servers
         * are connected again). Requests reach the handlers only once
         * the loop runs, so m->rpc.repl is set in time. The defaults
         * replace every zero, so ms_rcore accepts the timings. */
        rc = ms_repl_create(loop, &m->cl, m->events, &rcfg, &m->repl);
        RT_PRE(rc == 0);
        m->rpc.repl = m->repl;
        m->bal.exec.repl = m->repl;
    }
    if (cfg->trace) {
        /* A new segment with a fresh map: this session leads from now. */
        const struct ms_trace_rec_info ti = {
            .policy = m->cfg.policy,
            .policy_cfg = &m->cfg.policy_cfg,
            .tick_ms = m->cfg.tick_ms,
            .load_tau_ms =
                m->cfg.load_tau_ms ? m->cfg.load_tau_ms : MS_LOAD_DEFAULT_TAU,
            .rf = m->cfg.replication_factor,
            .min_insync = m->cfg.min_insync,
            .master_id = m->cfg.master_id,
            .raft_term = ms_catalog_master_term(m->cat),
            .range_times = ms__range_times,
            .range_times_arg = &m->bal.exec,
        };
        m->bal.trace = cfg->trace;
        m->bal.exec.trace = cfg->trace;
        ms_trace_rec_attach(cfg->trace, &m->cl, m->events, &ti);
    }
    uv_timer_init(loop, &m->tick);
    m->tick.data = m;
    m->tick_open = true;
    uv_timer_init(loop, &m->status_timer);
    m->status_timer.data = m;
    m->status_timer_open = true;
    uv_timer_start(&m->tick, ms__tick_cb, m->cfg.tick_ms, m->cfg.tick_ms);
    rt_log(RT_LOG_INFO,
           "master up: rpc %s:%d (-1: the member's listener), %zu tables, %zu "
           "ranges, %zu known servers, "
           "map version %" PRIu64
           ", policy %s, replication factor %u (min-insync %u)",
           cfg->listen_host, ms_master_rpc_port(m), ms_catalog_ntables(m->cat),
           ms_catalog_nranges(m->cat), ms_catalog_nservers(m->cat),
           ms_catalog_map_version(m->cat), m->policy.ops->name,
           m->cfg.replication_factor, m->cfg.min_insync);
    *out = m;
    return 0;

err_after_catalog:
    if (m->own_cat) {
        ms_catalog_close(m->cat);
    }
err_after_load:
    ms_policy_destroy(&m->policy);
    ms_load_destroy(m->load);
err_after_alloc:
    free(m);
    return rc;
}

int ms_master_set_admin(struct ms_master *m, struct ms_admin *adm)
{
    int rc = ms_admin_attach(adm, m->loop, ms_balance_admin, &m->bal);
    if (rc == 0) {
        m->admin = adm;
        m->admin_attached = true;
        ms_balance_set_admin(&m->bal, adm);
    }
    return rc;
}

void ms_master_use_admin(struct ms_master *m, struct ms_admin *adm)
{
    m->admin = adm;
    ms_balance_set_admin(&m->bal, adm);
}

void ms_master_admin(struct ms_master *m, struct ms_admin_req *req)
{
    ms_balance_admin(req, &m->bal);
}

struct ms_events *ms_master_events(struct ms_master *m)
{
    return m->events;
}

int ms_master_rpc_port(const struct ms_master *m)
{
    return m->rpc_server ? rt_rpc_server_port(m->rpc_server) : -1;
}

struct ms_rpc *ms_master_rpc(struct ms_master *m)
{
    return &m->rpc;
}

void ms_master_stop(struct ms_master *m)
{
    if (m->stopping) {
        return;
    }
    m->stopping = true;
    m->cl.stopping = true;
    rt_log(RT_LOG_INFO, "master stopping");
    if (m->tick_open) {
        uv_timer_stop(&m->tick);
        uv_close((uv_handle_t *)&m->tick, NULL);
        m->tick_open = false;
    }
    if (m->status_timer_open) {
        uv_timer_stop(&m->status_timer);
        uv_close((uv_handle_t *)&m->status_timer, NULL);
        m->status_timer_open = false;
    }
    ms_repl_stop(m->repl);
    /* Nothing more is recorded from this session (flushed). */
    ms_trace_rec_detach(m->cfg.trace);
    m->bal.trace = NULL;
    m->bal.exec.trace = NULL;
    if (m->admin_attached) {
        /* Queued operator requests get 503; those in flight are answered
         * when their calls complete (RT_ECANCELED) below. */
        ms_admin_detach(m->admin);
    }
    if (m->rpc_server) {
        /* Drops every connection: ms_rpc_on_conn(down) runs for each,
         * pending calls complete with RT_ECANCELED on later ticks. */
        rt_rpc_server_close(m->rpc_server);
        m->rpc_server = NULL;
    }
}

void ms_master_destroy(struct ms_master *m)
{
    if (!m) {
        return;
    }
    /* The balancer first: its operations may still answer operators. */
    if (m->bal_open) {
        ms_balance_fini(&m->bal);
    }
    ms_repl_destroy(m->repl);
    ms_cluster_fini(&m->cl);
    ms_policy_destroy(&m->policy);
    ms_load_destroy(m->load);
    ms_status_hist_cache_free(&m->hist_fine);
    ms_status_hist_cache_free(&m->hist_coarse);
    if (m->own_events) {
        ms_events_close(m->events);
    }
    if (m->own_cat) {
        ms_catalog_close(m->cat);
    }
    free(m);
}
