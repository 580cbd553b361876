/* One member of a replicated master (ms_node.h says what and why; the
 * protocol is docs/DESIGN-master-ha.md §2.5, §2.7, §3). */
#include "ms_node.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "ms_admin.h"
#include "ms_catalog.h"
#include "ms_events.h"
#include "ms_fsm.h"
#include "ms_rpc.h"
#include "ms_rtls.h"
#include "ms_status.h"
#include "rt.pb-c.h"
#include "rt_addr.h"
#include "rt_alloc.h"
#include "rt_buf.h"
#include "rt_err.h"
#include "rt_log.h"
#include "rt_notify.h"
#include "rt_rpc.h"
#include "rt_time.h"

#define MS__NODE_TICK_MS 10
#define MS__NODE_STATUS_MS 1000
#define MS__NODE_PATH 4096
#define MS__NODE_MEMBERS 16
/* A follower's MASTER_HELLO older than this: shown as not reachable. */
#define MS__NODE_HELLO_STALE_MS 3000

struct ms_node
{
    uv_loop_t *loop;
    struct ms_node_config cfg;
    char data_dir[MS__NODE_PATH];
    char listen_host[256];
    char rpc_addr[300]; /* published: advertised, else listen_host:port */
    char http_addr[MS_RAFT_ADDR_SIZE];   /* published */
    char http_listen[MS_RAFT_ADDR_SIZE]; /* bound */
    struct ms_catalog *cat;
    struct ms_events *events; /* borrowed */
    struct ms_status *status; /* borrowed */
    struct ms_admin *admin;   /* borrowed */
    struct rt_rpc_server *rpc;
    struct ms_raft *raft;
    struct ms_master *session; /* while acting as the leader */
    /* RPCs answered RT_EBUSY (503 to clients) while elected and not
     * acting yet (metrics: the takeover's 503 window). */
    uint64_t busy_replies;
    bool barrier_pending;
    bool stopping;
    bool raft_closed;
    bool admin_attached;
    bool transferring; /* SIGTERM of a leader: handing over first */
    /* What the service manager's STATUS= last said (rt_notify). */
    uint64_t notified_leader;
    bool notified_acting;
    /* Own entries applied speculatively / come back committed: while they
     * differ the catalog is ahead of the applied index. Counted here, not
     * from raft's indexes: libraft may snapshot inside raft_apply itself,
     * before the proposal has an index. */
    uint64_t spec_applied, spec_committed;
    uint64_t transfer_ms;  /* when the SIGTERM transfer began */
    uint64_t last_ls_term; /* the LEADER_START last published */
    bool handing_over;     /* an operator's leadership transfer runs */
    /* A catalog from before the Raft log (DATA/data.mdb): imported by the
     * first leader session that finds the log's catalog empty, moved to
     * DATA/catalog-v0/ once the import is committed. */
    bool legacy;
    uint64_t import_index; /* the import's proposal, 0 = none pending */
    /* Follower: its link to the leader's RPC address (MASTER_HELLO). */
    struct rt_rpc_client *hello;
    char hello_addr[MS_RAFT_ADDR_SIZE];
    /* Leader: what each follower said last (by id, MS__NODE_MEMBERS). */
    struct ms__member
    {
        uint64_t id, term, commit, applied, heard_ms;
        char rpc[MS_RAFT_ADDR_SIZE], http[MS_RAFT_ADDR_SIZE];
    } members[MS__NODE_MEMBERS];
    bool reexec_armed;
    uv_timer_t reexec_timer;
    uv_timer_t tick;
    bool tick_open;
    uint64_t last_tick_ms, last_status_ms;
    uint64_t last_cpu_ms; /* the loop thread's CPU time at last_tick_ms */
    uint64_t last_leader; /* for the "elected" / "no leader" log lines */
    uint64_t no_leader_since_ms;
};

static void ms__node_drive(struct ms_node *n);
static void ms__node_stop_now(struct ms_node *n);
static size_t ms__node_voters(struct ms_node *n);

/* ---- re-execution (§2.7 item 3) ---- */

/* Marks every descriptor above stderr close-on-exec, so the new image
 * starts with nothing but stdio (LMDB, raft segments, sockets). */
static void ms__node_cloexec_all(void)
{
    DIR *d = opendir("/proc/self/fd");
    struct dirent *e;
    if (!d) {
        return;
    }
    while ((e = readdir(d)) != NULL) {
        int fd = atoi(e->d_name);
        if (fd > 2 && fd != dirfd(d)) {
            int fl = fcntl(fd, F_GETFD);
            if (fl >= 0) {
                fcntl(fd, F_SETFD, fl | FD_CLOEXEC);
            }
        }
    }
    closedir(d);
}

/* Never returns: this member's catalog may hold entries that will never
 * commit, so the process starts over (same PID, same ports) and rebuilds
 * its view from the Raft snapshot and log. */
static void ms__node_reexec(struct ms_node *n, const char *why)
{
    char **argv = rt_xcalloc((size_t)n->cfg.argc + 8, sizeof(*argv));
    char listen[300], http[300], raft[300];
    int k = 0;

    rt_log(RT_LOG_WARN,
           "master %" PRIu64
           ": %s: re-executing to rebuild the catalog "
           "from the raft log",
           n->cfg.id, why);
    for (int i = 0; i < n->cfg.argc; i++) {
        argv[k++] = n->cfg.argv[i];
    }
    /* The ports actually bound (port 0 in tests), so the member comes
     * back where its peers and clients know it; later flags win. */
    snprintf(listen, sizeof(listen), "%s:%d", n->listen_host,
             ms_node_rpc_port(n));
    argv[k++] = "--listen";
    argv[k++] = listen;
    if (n->http_listen[0]) {
        snprintf(http, sizeof(http), "%s", n->http_listen);
        argv[k++] = "--http";
        argv[k++] = http;
    }
    snprintf(raft, sizeof(raft), "%s", ms_raft_bind_addr(n->raft));
    argv[k++] = "--raft-listen";
    argv[k++] = raft;
    argv[k] = NULL;
    /* The load trace's end and zlib's trailer: execv flushes nothing. */
    ms_trace_rec_end(n->cfg.master.trace, "re-exec");
    fflush(stdout);
    fflush(stderr);
    ms__node_cloexec_all();
    /* The new image installs its handlers only after it has rebuilt its
     * view; a SIGTERM arriving before that would kill it uncleanly. The
     * mask survives execv and the signal stays pending until rt-master's
     * main unblocks it with its handlers in place. */
    sigset_t stop;
    sigemptyset(&stop);
    sigaddset(&stop, SIGINT);
    sigaddset(&stop, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &stop, NULL);
    execv("/proc/self/exe", argv);
    pthread_sigmask(SIG_UNBLOCK, &stop, NULL);
    rt_log(RT_LOG_ERROR, "re-exec failed: %s; exiting", strerror(errno));
    _exit(1);
}

static void ms__node_reexec_timer(uv_timer_t *t)
{
    struct ms_node *n = t->data;
    if (!n->stopping) {
        ms__node_reexec(n, "after the leadership transfer");
    }
}

/* Re-executes after 300 ms: time for the HTTP thread to send the answer
 * of the request that caused it. */
static void ms__node_reexec_soon(struct ms_node *n, const char *why)
{
    if (n->reexec_armed) {
        return;
    }
    rt_log(RT_LOG_INFO, "master %" PRIu64 ": %s; re-executing shortly",
           n->cfg.id, why);
    n->reexec_armed = true;
    uv_timer_init(n->loop, &n->reexec_timer);
    n->reexec_timer.data = n;
    uv_timer_start(&n->reexec_timer, ms__node_reexec_timer, 300, 0);
}

/* ---- the state machine (ms_raft_fsm) ---- */

static int ms__fsm_apply(void *ud,
                         uint64_t index,
                         const uint8_t *buf,
                         size_t len)
{
    struct ms_node *n = ud;
    struct ms_cmd_result res;
    int rc = ms_fsm_apply_committed(n->cat, buf, len, &res);
    if (rc == 0 && res.skipped) {
        n->spec_committed++;
    }
    if (rc != 0) {
        rt_log(RT_LOG_ERROR,
               "raft entry %" PRIu64 " cannot be applied here: %s", index,
               rt_strerror(rc));
    }
    ms_cmd_result_free(&res);
    return rc;
}

static int ms__fsm_snapshot(void *ud, struct rt_buf *out)
{
    struct ms_node *n = ud;
    /* The leader's catalog is ahead of the applied index while its own
     * proposals are in flight: a snapshot now would hold entries the log
     * replays after it. libraft asks again after a later commit. */
    if (n->spec_applied != n->spec_committed) {
        return RT_EBUSY;
    }
    return ms_catalog_snapshot(n->cat, out);
}

static int ms__fsm_restore(void *ud, const uint8_t *buf, size_t len)
{
    struct ms_node *n = ud;
    return ms_catalog_restore(n->cat, buf, len);
}

/* ---- output gate and proposals ---- */

static uint64_t ms__gate_need(void *ud)
{
    struct ms_node *n = ud;
    return ms_raft_last_proposed(n->raft);
}

static uint64_t ms__gate_have(void *ud)
{
    struct ms_node *n = ud;
    return ms_raft_commit_index(n->raft);
}

static int ms__node_propose(void *ud, const uint8_t *buf, size_t len)
{
    struct ms_node *n = ud;
    int rc;
    n->spec_applied++;
    if (n->transferring || n->stopping || n->handing_over) {
        /* Going away: what it holds is rebuilt at the next start. */
        return MS_RAFT_ENOTLEADER;
    }
    rc = ms_raft_propose(n->raft, buf, len, NULL);
    if (rc != 0) {
        /* Applied here, not replicated: this view cannot be trusted. */
        ms__node_reexec(n, "a proposal was refused");
    }
    return 0;
}

/* ---- the follower's RPC answers ---- */

static void ms__node_hint(struct ms_node *n, Rt__NotLeader *hint)
{
    const Rt__LeaderStartCmd *ls = ms_catalog_leader(n->cat);
    uint64_t leader = ms_raft_leader(n->raft, NULL);

    rt__not_leader__init(hint);
    hint->master_term = ms_catalog_master_term(n->cat);
    hint->leader_id = leader;
    /* The addresses are known from the leader's LEADER_START once it is
     * applied here; until then the client goes round its list. */
    if (leader && leader != n->cfg.id && ls && ls->leader_id == leader) {
        hint->leader_rpc_addr = ls->rpc_addr;
        hint->leader_http_addr = ls->http_addr;
    }
}

/* Leader: a follower's MASTER_HELLO, kept for the status. */
static void ms__node_on_hello(struct ms_node *n,
                              struct rt_rpc_conn *conn,
                              uint64_t id,
                              const uint8_t *body,
                              size_t len)
{
    Rt__MasterHello *h = rt__master_hello__unpack(NULL, len, body);
    struct ms__member *slot = NULL;

    if (!h) {
        rt_rpc_reply_err(conn, id, RT__METHOD__MASTER_HELLO, RT_EINVAL,
                         "bad MasterHello");
        return;
    }
    for (size_t i = 0; i < MS__NODE_MEMBERS; i++) {
        if (n->members[i].id == h->id || (!slot && n->members[i].id == 0)) {
            slot = &n->members[i];
            if (n->members[i].id == h->id) {
                break;
            }
        }
    }
    if (slot && h->id) {
        slot->id = h->id;
        slot->term = h->term;
        slot->commit = h->commit_index;
        slot->applied = h->apply_index;
        slot->heard_ms = rt_time_mono_ms();
        snprintf(slot->rpc, sizeof(slot->rpc), "%s", h->rpc_addr);
        snprintf(slot->http, sizeof(slot->http), "%s", h->http_addr);
    }
    rt__master_hello__free_unpacked(h, NULL);
    rt_rpc_reply(conn, id, RT__METHOD__MASTER_HELLO, 0, NULL, 0);
}

static const struct ms__member *ms__node_member(const struct ms_node *n,
                                                uint64_t id)
{
    for (size_t i = 0; i < MS__NODE_MEMBERS; i++) {
        if (n->members[i].id == id &&
            rt_time_mono_ms() - n->members[i].heard_ms <=
                MS__NODE_HELLO_STALE_MS) {
            return &n->members[i];
        }
    }
    return NULL;
}

/* Follower: tells the leader (its RPC address from its LEADER_START) where
 * this member listens and how far its log is. */
static void ms__node_say_hello(struct ms_node *n)
{
    const Rt__LeaderStartCmd *ls = ms_catalog_leader(n->cat);
    Rt__MasterHello h = RT__MASTER_HELLO__INIT;
    char rpc[300];

    if (n->session || !ls || !ls->rpc_addr || !*ls->rpc_addr ||
        ls->leader_id == n->cfg.id ||
        ms_raft_leader(n->raft, NULL) != ls->leader_id) {
        return;
    }
    if (!n->hello || strcmp(n->hello_addr, ls->rpc_addr) != 0) {
        snprintf(n->hello_addr, sizeof(n->hello_addr), "%s", ls->rpc_addr);
        if (n->hello) {
            if (rt_rpc_client_set_addr(n->hello, n->hello_addr) != 0) {
                return;
            }
        } else if (rt_rpc_client_start(n->loop, n->hello_addr, NULL, NULL, NULL,
                                       &n->hello) != 0) {
            n->hello = NULL;
            return;
        } else {
            rt_rpc_client_expect_roles(n->hello, RT_RPC_ROLE_MASTER);
        }
    }
    snprintf(rpc, sizeof(rpc), "%s", n->rpc_addr);
    h.id = n->cfg.id;
    h.rpc_addr = rpc;
    h.http_addr = n->http_addr;
    h.term = ms_raft_term(n->raft);
    h.commit_index = ms_raft_commit_index(n->raft);
    h.apply_index = ms_raft_applied_index(n->raft);
    rt_rpc_call_pb(rt_rpc_client_conn(n->hello), RT__METHOD__MASTER_HELLO,
                   &h.base, 1000, NULL, NULL);
}

static void ms__node_on_request(struct rt_rpc_conn *conn,
                                uint32_t method,
                                uint64_t id,
                                const uint8_t *body,
                                size_t len,
                                void *ud)
{
    struct ms_node *n = ud;
    Rt__NotLeader hint;

    if (ms_rpc_authorize(conn, method, id) != 0) {
        return;
    }
    if (method == RT__METHOD__MASTER_HELLO) {
        ms__node_on_hello(n, conn, id, body, len);
        return;
    }
    if (n->session) {
        ms_rpc_on_request(conn, method, id, body, len,
                          ms_master_rpc(n->session));
        return;
    }
    if (n->stopping || !n->raft) {
        rt_rpc_reply_err(conn, id, method, RT_EBUSY, "master is stopping");
        return;
    }
    if (method == RT__METHOD__PING) {
        rt_rpc_reply(conn, id, method, 0, NULL, 0);
        return;
    }
    if (ms_raft_is_leader(n->raft)) {
        /* Elected, acting in a moment (barrier, LEADER_START): the client
         * stays and retries here rather than going round its list. */
        n->busy_replies++;
        rt_rpc_reply_err(conn, id, method, RT_EBUSY,
                         "this master is taking over; retry");
        return;
    }
    ms__node_hint(n, &hint);
    rt_rpc_reply_notleader(
        conn, id, method,
        hint.leader_rpc_addr && *hint.leader_rpc_addr ? &hint : NULL);
}

static void ms__node_on_conn(struct rt_rpc_conn *conn, int up, void *ud)
{
    struct ms_node *n = ud;
    if (n->session) {
        ms_rpc_on_conn(conn, up, ms_master_rpc(n->session));
    }
}

/* ---- status ---- */

/* The masters array of the status JSON and the member's metrics. */
/* systemd's STATUS= line (systemctl status rt-master), on a change of
 * leader or of this member's acting role only: one datagram each. */
static void ms__node_notify_role(struct ms_node *n, uint64_t leader)
{
    bool acting = n->session != NULL;

    if (leader == n->notified_leader && acting == n->notified_acting) {
        return;
    }
    n->notified_leader = leader;
    n->notified_acting = acting;
    if (acting) {
        rt_notifyf("STATUS=master %" PRIu64 ": leader, rpc %s, term %" PRIu64,
                   n->cfg.id, n->rpc_addr, ms_raft_term(n->raft));
    } else if (leader) {
        rt_notifyf("STATUS=master %" PRIu64 ": follower of master %" PRIu64
                   ", rpc %s",
                   n->cfg.id, leader, n->rpc_addr);
    } else {
        rt_notifyf("STATUS=master %" PRIu64 ": no leader known, rpc %s",
                   n->cfg.id, n->rpc_addr);
    }
}

static void ms__node_publish(struct ms_node *n)
{
    struct ms_raft_member mem[16];
    size_t nm = ms_raft_config(n->raft, mem, 16);
    const Rt__LeaderStartCmd *ls = ms_catalog_leader(n->cat);
    uint64_t leader = ms_raft_leader(n->raft, NULL);
    json_t *arr = json_array();
    struct rt_buf m = RT_BUF_INIT;
    char *text;

    ms__node_notify_role(n, leader);

    for (size_t i = 0; i < nm && i < 16; i++) {
        json_t *o = json_object();
        bool self = mem[i].id == n->cfg.id;
        json_object_set_new(o, "id", json_integer((json_int_t)mem[i].id));
        json_object_set_new(o, "raft_addr", json_string(mem[i].addr));
        if (self) {
            json_object_set_new(o, "addr", json_string(n->rpc_addr));
            json_object_set_new(o, "http", json_string(n->http_addr));
        } else if (n->session && ms__node_member(n, mem[i].id)) {
            const struct ms__member *f = ms__node_member(n, mem[i].id);
            json_object_set_new(o, "addr", json_string(f->rpc));
            json_object_set_new(o, "http", json_string(f->http));
            json_object_set_new(o, "term", json_integer((json_int_t)f->term));
            json_object_set_new(o, "commit_index",
                                json_integer((json_int_t)f->commit));
            json_object_set_new(o, "apply_index",
                                json_integer((json_int_t)f->applied));
            json_object_set_new(
                o, "last_contact_ms",
                json_integer((json_int_t)(rt_time_mono_ms() - f->heard_ms)));
        } else if (ls && ls->leader_id == mem[i].id) {
            json_object_set_new(o, "addr", json_string(ls->rpc_addr));
            json_object_set_new(o, "http", json_string(ls->http_addr));
        }
        if (n->session && !self) {
            json_object_set_new(
                o, "reachable",
                json_boolean(ms__node_member(n, mem[i].id) != NULL));
        }
        json_object_set_new(
            o, "role",
            json_string(mem[i].role == MS_RAFT_VOTER     ? "voter"
                        : mem[i].role == MS_RAFT_STANDBY ? "standby"
                                                         : "spare"));
        json_object_set_new(o, "leader", json_boolean(mem[i].id == leader));
        if (self) {
            json_object_set_new(
                o, "term", json_integer((json_int_t)ms_raft_term(n->raft)));
            json_object_set_new(
                o, "master_term",
                json_integer((json_int_t)ms_catalog_master_term(n->cat)));
            json_object_set_new(
                o, "commit_index",
                json_integer((json_int_t)ms_raft_commit_index(n->raft)));
            json_object_set_new(
                o, "apply_index",
                json_integer((json_int_t)ms_raft_applied_index(n->raft)));
        }
        if (n->session && !self) {
            json_object_set_new(o, "match_index",
                                json_integer((json_int_t)mem[i].match_index));
        }
        json_array_append_new(arr, o);
    }
    text = json_dumps(arr, JSON_COMPACT);
    json_decref(arr);
    {
        size_t voters = 0, standbys = 0, spares = 0;
        for (size_t i = 0; i < nm; i++) {
            voters += mem[i].role == MS_RAFT_VOTER;
            standbys += mem[i].role == MS_RAFT_STANDBY;
            spares += mem[i].role == MS_RAFT_SPARE;
        }
        rt_buf_printf(
            &m,
            "# HELP rt_master_raft_members Members of the masters' Raft "
            "configuration, by role.\n"
            "# TYPE rt_master_raft_members gauge\n"
            "rt_master_raft_members{role=\"voter\"} %zu\n"
            "rt_master_raft_members{role=\"standby\"} %zu\n"
            "rt_master_raft_members{role=\"spare\"} %zu\n"
            "# HELP rt_master_raft_elected 1 while this master is the Raft "
            "leader (acting or about to: rt_master_leader).\n"
            "# TYPE rt_master_raft_elected gauge\n"
            "rt_master_raft_elected %d\n"
            "# HELP rt_master_raft_leader_id The leader this master knows "
            "of (0: none).\n"
            "# TYPE rt_master_raft_leader_id gauge\n"
            "rt_master_raft_leader_id %" PRIu64
            "\n"
            "# HELP rt_master_takeover_busy_total Requests answered "
            "ServerBusy while elected and not acting yet.\n"
            "# TYPE rt_master_takeover_busy_total counter\n"
            "rt_master_takeover_busy_total %" PRIu64 "\n",
            voters, standbys, spares, ms_raft_is_leader(n->raft) ? 1 : 0,
            leader, n->busy_replies);
    }
    rt_buf_printf(&m,
                  "# HELP rt_master_leader 1 while this master acts as the "
                  "leader (serves the cluster), else 0.\n"
                  "# TYPE rt_master_leader gauge\n"
                  "rt_master_leader %d\n"
                  "# HELP rt_master_raft_term Raft term.\n"
                  "# TYPE rt_master_raft_term gauge\n"
                  "rt_master_raft_term %" PRIu64
                  "\n"
                  "# HELP rt_master_commit_index Raft commit index.\n"
                  "# TYPE rt_master_commit_index gauge\n"
                  "rt_master_commit_index %" PRIu64
                  "\n"
                  "# HELP rt_master_apply_index Raft index applied.\n"
                  "# TYPE rt_master_apply_index gauge\n"
                  "rt_master_apply_index %" PRIu64 "\n",
                  n->session ? 1 : 0, ms_raft_term(n->raft),
                  ms_raft_commit_index(n->raft),
                  ms_raft_applied_index(n->raft));
    rt_rpc_metrics(&m);
    if (n->cfg.tls != NULL) {
        /* Raft over mutual TLS: refusals are what an alert watches. */
        struct ms_rtls_stats st;

        ms_raft_transport_stats(n->raft, &st);
        rt_buf_printf(&m,
                      "# TYPE rt_master_raft_conns_total counter\n"
                      "rt_master_raft_conns_total{dir=\"in\","
                      "result=\"accepted\"} %" PRIu64
                      "\n"
                      "rt_master_raft_conns_total{dir=\"in\","
                      "result=\"refused\"} %" PRIu64
                      "\n"
                      "rt_master_raft_conns_total{dir=\"out\","
                      "result=\"connected\"} %" PRIu64
                      "\n"
                      "rt_master_raft_conns_total{dir=\"out\","
                      "result=\"failed\"} %" PRIu64 "\n",
                      st.accepted, st.refused, st.connected, st.connect_failed);
    }
    rt_buf_append_u8(&m, 0);
    ms_status_set_members(n->status, text, (char *)m.data);
    if (!n->session) {
        /* A follower's own documents: who it is and whom it follows (its
         * HTTP answers redirect, but /metrics and tools read these). */
        json_t *o = json_object();
        json_object_set_new(o, "role", json_string("follower"));
        json_object_set_new(o, "id", json_integer((json_int_t)n->cfg.id));
        json_object_set_new(o, "leader", json_integer((json_int_t)leader));
        ms_status_publish(n->status, json_dumps(o, JSON_COMPACT),
                          rt_xstrdup(""));
        json_decref(o);
        /* Elected but not acting yet (barrier, LEADER_START): no one to
         * redirect to, least of all itself. */
        ms_status_set_role(
            n->status, false,
            leader && leader != n->cfg.id && ls && ls->leader_id == leader
                ? ls->http_addr
                : NULL);
    }
}

/* ---- a catalog from before the log (design §2.6) ---- */

/* Moves DATA/data.mdb and lock.mdb to DATA/catalog-v0/ (kept, never
 * deleted by the master). */
static void ms__node_legacy_aside(struct ms_node *n)
{
    char from[2 * MS__NODE_PATH], to[2 * MS__NODE_PATH];
    static const char *const files[] = {"data.mdb", "lock.mdb"};

    snprintf(to, sizeof(to), "%s/catalog-v0", n->data_dir);
    if (mkdir(to, 0755) != 0 && errno != EEXIST) {
        rt_log(RT_LOG_ERROR, "mkdir %s: %s", to, strerror(errno));
        return;
    }
    for (size_t i = 0; i < 2; i++) {
        snprintf(from, sizeof(from), "%s/%s", n->data_dir, files[i]);
        snprintf(to, sizeof(to), "%s/catalog-v0/%s", n->data_dir, files[i]);
        if (rename(from, to) != 0 && errno != ENOENT) {
            rt_log(RT_LOG_ERROR, "rename %s: %s", from, strerror(errno));
            return;
        }
    }
    n->legacy = false;
    rt_log(RT_LOG_INFO,
           "the catalog from before the raft log is in the log now; its "
           "files are kept in %s/catalog-v0",
           n->data_dir);
}

/* The leader's first act when the log's catalog is empty and the data
 * directory holds a catalog from before the log: IMPORT it. */
static void ms__node_import(struct ms_node *n)
{
    struct ms_catalog *old = NULL;
    struct rt_buf snap = RT_BUF_INIT;
    char errmsg[RT_ERRMSG_SIZE] = "";
    int rc;

    if (ms_catalog_ntables(n->cat) || ms_catalog_nranges(n->cat) ||
        ms_catalog_nservers(n->cat)) {
        ms__node_legacy_aside(n); /* imported by an earlier life */
        return;
    }
    rc = ms_catalog_open(n->data_dir, &old, errmsg);
    if (rc == 0) {
        rc = ms_catalog_snapshot(old, &snap);
        ms_catalog_close(old);
    }
    if (rc == 0) {
        rc = ms_catalog_import(n->cat, snap.data, snap.len);
    }
    rt_buf_free(&snap);
    if (rc != 0) {
        /* Leading with an empty catalog would tell every partition server
         * that its ranges belong to no table: stop instead, and leave the
         * files as they are for the operator (the message says why). */
        rt_log(RT_LOG_ERROR,
               "cannot import the catalog of %s/data.mdb (from before the "
               "raft log): %s %s; stopping (the files are unchanged)",
               n->data_dir, rt_strerror(rc), errmsg);
        exit(2);
    }
    n->import_index = ms_raft_last_proposed(n->raft);
    rt_log(RT_LOG_WARN,
           "imported the catalog from before the raft log: %zu tables, %zu "
           "ranges, %zu servers (raft index %" PRIu64 ")",
           ms_catalog_ntables(n->cat), ms_catalog_nranges(n->cat),
           ms_catalog_nservers(n->cat), n->import_index);
}

/* ---- leadership ---- */

static void ms__node_session_start(struct ms_node *n)
{
    struct ms_master_config mc = n->cfg.master;
    struct rt_rpc_gate gate = {ms__gate_need, ms__gate_have, n};
    char rpc[300], errmsg[RT_ERRMSG_SIZE] = "";
    struct ms_leader_addrs addrs;
    uint64_t term, old = ms_catalog_master_term(n->cat);
    json_t *ev;
    int rc;

    snprintf(rpc, sizeof(rpc), "%s", n->rpc_addr);
    addrs.rpc = rpc;
    addrs.http = n->http_addr;
    addrs.raft = ms_raft_addr(n->raft);
    ms_catalog_set_proposer(n->cat, ms__node_propose, n);
    rt_rpc_gate_set(&gate);
    if (n->legacy) {
        ms__node_import(n);
    }
    /* Above every term a partition server may have seen: the raft term
     * (one leader per term) or, after an import, the stored one + 1. */
    term = ms_raft_term(n->raft);
    if (term <= old) {
        term = old + 1;
    }
    rc = ms_catalog_leader_start(n->cat, term, n->cfg.id, &addrs);
    if (rc != 0) {
        ms__node_reexec(n, "LEADER_START failed");
    }
    mc.cat = n->cat;
    mc.events = n->events;
    mc.no_listen = true;
    mc.master_id = n->cfg.id;
    rc = ms_master_start(n->loop, &mc, &n->session, errmsg);
    if (rc != 0) {
        rt_log(RT_LOG_ERROR, "cannot start the leader session: %s", errmsg);
        exit(1);
    }
    ms_master_set_status(n->session, n->status);
    if (n->admin) {
        ms_master_use_admin(n->session, n->admin);
        ms_admin_set_gate(n->admin, &gate);
    }
    ms_status_set_role(n->status, true, NULL);
    ev = json_object();
    json_object_set_new(ev, "kind", json_string("master_elected"));
    json_object_set_new(ev, "leader", json_integer((json_int_t)n->cfg.id));
    json_object_set_new(ev, "term",
                        json_integer((json_int_t)ms_raft_term(n->raft)));
    json_object_set_new(ev, "master_term", json_integer((json_int_t)term));
    if (n->no_leader_since_ms) {
        json_object_set_new(ev, "no_leader_ms",
                            json_integer((json_int_t)(rt_time_mono_ms() -
                                                      n->no_leader_since_ms)));
    }
    ms_events_add(n->events, ev);
    rt_log(RT_LOG_INFO,
           "master %" PRIu64 " leads (raft term %" PRIu64
           ", master term %" PRIu64 ")",
           n->cfg.id, ms_raft_term(n->raft), term);
    ms__node_publish(n);
}

static void ms__node_barrier_done(void *ud, int status)
{
    struct ms_node *n = ud;
    n->barrier_pending = false;
    if (n->stopping || n->session) {
        return;
    }
    if (status != 0 || !ms_raft_is_leader(n->raft)) {
        ms__node_drive(n); /* lost it meanwhile: follow, or try again */
        return;
    }
    /* Every entry of earlier terms is applied here now. */
    ms__node_session_start(n);
}

static void ms__node_drive(struct ms_node *n)
{
    uint64_t leader;

    if (n->stopping || !n->raft) {
        return;
    }
    if (n->session) {
        if (n->handing_over) {
            return; /* the transfer's end re-executes the member */
        }
        if (n->transferring) {
            /* Stopping: the transfer's end stops the member; libraft does
             * not end a transfer whose leader stepped down (no quorum). */
            if (!ms_raft_is_leader(n->raft) ||
                rt_time_mono_ms() - n->transfer_ms >
                    2u * (n->cfg.election_ms ? n->cfg.election_ms : 500)) {
                ms__node_stop_now(n);
            }
            return;
        }
        if (ms_raft_failed(n->raft)) {
            ms__node_reexec(n, "a proposal failed (leadership lost)");
        }
        if (!ms_raft_is_leader(n->raft)) {
            ms__node_reexec(n, "no longer the raft leader");
        }
        rt_rpc_gate_release();
        if (n->admin) {
            ms_admin_gate_release(n->admin);
        }
        if (n->import_index &&
            ms_raft_commit_index(n->raft) >= n->import_index) {
            n->import_index = 0;
            ms__node_legacy_aside(n);
        }
        if (ms_catalog_master_term(n->cat) != n->last_ls_term) {
            n->last_ls_term = ms_catalog_master_term(n->cat);
            ms__node_publish(n);
        }
        return;
    }
    leader = ms_raft_leader(n->raft, NULL);
    {
        /* A LEADER_START applied here names the leader's addresses: the
         * redirects and hints can use them at once. */
        const Rt__LeaderStartCmd *ls = ms_catalog_leader(n->cat);
        uint64_t t = ls ? ls->master_term : 0;
        if (t != n->last_ls_term) {
            n->last_ls_term = t;
            ms__node_publish(n);
        }
    }
    if (leader != n->last_leader) {
        if (leader == 0) {
            n->no_leader_since_ms = rt_time_mono_ms();
        } else {
            rt_log(RT_LOG_INFO, "master %" PRIu64 ": leader is %" PRIu64,
                   n->cfg.id, leader);
        }
        n->last_leader = leader;
        ms__node_publish(n);
    }
    if (ms_raft_is_leader(n->raft) && !n->barrier_pending) {
        if (ms_raft_barrier(n->raft, ms__node_barrier_done, n) == 0) {
            n->barrier_pending = true;
        }
    }
}

static void ms__node_on_change(void *ud)
{
    ms__node_drive(ud);
}

/* CPU time of the calling thread (the loop), in ms. */
static uint64_t ms__node_loop_cpu_ms(void)
{
    struct timespec ts;
    if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0) {
        return 0;
    }
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static void ms__node_tick(uv_timer_t *t)
{
    struct ms_node *n = t->data;
    uint64_t now = rt_time_mono_ms();
    unsigned et = n->cfg.election_ms ? n->cfg.election_ms : 500;

    /* A leader whose loop stood still (SIGSTOP, swap) longer than the
     * election timeout may have been deposed without noticing (followers
     * wait at least that long before they elect, so a shorter stall
     * cannot have); with other voters it starts over rather than act on
     * timers that ran while it was away. */
    uint64_t cpu = ms__node_loop_cpu_ms();
    if (n->session && n->last_tick_ms && now - n->last_tick_ms > et &&
        ms__node_voters(n) > 1) {
        uint64_t gap = now - n->last_tick_ms, used = cpu - n->last_cpu_ms;
        /* A loop that was busy all along (a burst of commits) ran its
         * timers late but observed everything in order; one that did not
         * run (stopped, starved) may act on what it saw before. */
        if (used * 2 < gap) {
            char why[96];
            snprintf(why, sizeof(why),
                     "the loop stalled for %" PRIu64 " ms (%" PRIu64
                     " ms of CPU)",
                     gap, used);
            ms__node_reexec(n, why);
        }
        rt_log(RT_LOG_WARN,
               "master %" PRIu64 ": the loop was busy for %" PRIu64
               " ms (%" PRIu64 " ms of CPU): raft heartbeats were late",
               n->cfg.id, gap, used);
    }
    n->last_tick_ms = now;
    n->last_cpu_ms = cpu;
    ms__node_drive(n);
    if (now - n->last_status_ms >= MS__NODE_STATUS_MS) {
        n->last_status_ms = now;
        ms__node_say_hello(n);
        ms__node_publish(n);
    }
}

/* ---- operator requests ---- */

static void ms__node_admin_json(struct ms_node *n,
                                struct ms_admin_req *req,
                                int http,
                                const char *fmt,
                                int status)
{
    json_t *o = json_object();
    json_object_set_new(o, http == 200 ? "outcome" : "error", json_string(fmt));
    if (status) {
        json_object_set_new(o, "status", json_string(rt_strerror(status)));
    }
    ms_admin_complete(n->admin, req, http, json_dumps(o, JSON_COMPACT));
    json_decref(o);
}

struct ms__node_op
{
    struct ms_node *n;
    struct ms_admin_req *req;
    enum ms_admin_kind kind;
};

static void ms__node_op_done(void *ud, int status)
{
    struct ms__node_op *op = ud;
    struct ms_node *n = op->n;

    if (status == 0 && op->kind == MS_ADMIN_MASTER_ADD) {
        /* A spare now: catch it up and make it a voter. */
        op->kind = MS_ADMIN__NR;
        if (ms_raft_assign_voter(n->raft, op->req->server_id, ms__node_op_done,
                                 op) == 0) {
            return;
        }
        status = RT_EBUSY;
    }
    if (op->kind == MS_ADMIN_MASTER_TRANSFER) {
        /* Led until now: the view may hold what never commits. */
        ms__node_reexec_soon(n, "leadership handed over");
    }
    if (status == MS_RAFT_ENOTLEADER && op->kind != MS_ADMIN_MASTER_TRANSFER) {
        /* Leadership lost during an add or remove: it may yet commit under
         * the next leader. Both are idempotent, so the answer says to ask
         * the leader again (rtctl moves on to the next master). */
        ms__node_admin_json(n, op->req, 503,
                            "this master is not the leader any more (lost "
                            "during the change): repeat it on the leader",
                            status);
        free(op);
        return;
    }
    if (status == 0) {
        json_t *ev = json_object();
        const char *what =
            op->kind == MS_ADMIN_MASTER_REMOVE     ? "master_member_removed"
            : op->kind == MS_ADMIN_MASTER_TRANSFER ? "master_transferred"
                                                   : "master_member_added";
        json_object_set_new(ev, "kind", json_string(what));
        json_object_set_new(ev, "id",
                            json_integer((json_int_t)op->req->server_id));
        ms_events_add(n->events, ev);
        ms__node_admin_json(n, op->req, 200, what, 0);
    } else {
        ms__node_admin_json(n, op->req,
                            status == RT_EBUSY || status == RT_ETIMEDOUT ? 503
                            : status == RT_EINVAL                        ? 400
                                                                         : 409,
                            "the master configuration change failed", status);
    }
    free(op);
}

static void ms__node_admin(struct ms_admin_req *req, void *arg)
{
    struct ms_node *n = arg;
    struct ms__node_op *op;
    int rc;

    if (req->kind != MS_ADMIN_MASTER_ADD &&
        req->kind != MS_ADMIN_MASTER_REMOVE &&
        req->kind != MS_ADMIN_MASTER_TRANSFER) {
        if (n->session) {
            ms_master_admin(n->session, req);
        } else {
            ms__node_admin_json(n, req, 503, "this master is not the leader",
                                0);
        }
        return;
    }
    if (!n->session || n->stopping) {
        ms__node_admin_json(n, req, 503, "this master is not the leader", 0);
        return;
    }
    if (req->kind != MS_ADMIN_MASTER_TRANSFER && req->server_id == 0) {
        ms__node_admin_json(n, req, 400, "a master id is >= 1", 0);
        return;
    }
    if (req->kind == MS_ADMIN_MASTER_ADD) {
        char host[64];
        int port;
        if (!req->key || strlen(req->key) >= MS_RAFT_ADDR_SIZE ||
            rt_addr_split(req->key, host, sizeof(host), &port) != 0 ||
            port <= 0) {
            ms__node_admin_json(n, req, 400,
                                "addr: the new master's raft HOST:PORT", 0);
            return;
        }
    }
    /* Membership requests are idempotent, so an operator (or rtctl) may
     * repeat one whose answer was lost to an election: the configuration
     * already as asked is success; an added member still a spare is made
     * a voter, the second half of an add. */
    {
        struct ms_raft_member mem[16];
        size_t nm = ms_raft_config(n->raft, mem, 16);
        const struct ms_raft_member *m = NULL;
        for (size_t i = 0; i < nm && i < 16; i++) {
            if (mem[i].id == req->server_id) {
                m = &mem[i];
            }
        }
        if (req->kind == MS_ADMIN_MASTER_REMOVE && !m) {
            ms__node_admin_json(n, req, 200, "master_member_removed", 0);
            return;
        }
        if (req->kind == MS_ADMIN_MASTER_ADD && m) {
            if (strcmp(m->addr, req->key) != 0) {
                ms__node_admin_json(n, req, 409,
                                    "that master id is a member with another "
                                    "address: remove it first",
                                    0);
                return;
            }
            if (m->role == MS_RAFT_VOTER) {
                ms__node_admin_json(n, req, 200, "master_member_added", 0);
                return;
            }
        }
        op = rt_xcalloc(1, sizeof(*op));
        op->n = n;
        op->req = req;
        op->kind = req->kind;
        if (req->kind == MS_ADMIN_MASTER_ADD && m) {
            op->kind = MS_ADMIN__NR; /* only the voter half is left */
            rc = ms_raft_assign_voter(n->raft, req->server_id, ms__node_op_done,
                                      op);
            goto started;
        }
    }
    switch (req->kind) {
        case MS_ADMIN_MASTER_ADD:
            rc = ms_raft_add(n->raft, req->server_id, req->key,
                             ms__node_op_done, op);
            break;
        case MS_ADMIN_MASTER_REMOVE:
            if (req->server_id == n->cfg.id) {
                /* Lead no more first: the next leader removes it. */
                rc = RT_EINVAL;
                free(op);
                ms__node_admin_json(n, req, 409,
                                    "this master leads: transfer the "
                                    "leadership first (rtctl master "
                                    "transfer), then remove it from the "
                                    "new leader",
                                    0);
                return;
            }
            rc = ms_raft_remove(n->raft, req->server_id, ms__node_op_done, op);
            break;
        default:
            /* The session ends first (nothing acts or proposes during the
             * hand-over); the member re-executes once the answer is out. */
            ms_master_stop(n->session);
            n->handing_over = true;
            rc =
                ms_raft_transfer(n->raft, req->server_id, ms__node_op_done, op);
            if (rc != 0) {
                ms__node_reexec_soon(n, "a leadership transfer was refused");
            }
            break;
    }
started:
    if (rc != 0) {
        free(op);
        ms__node_admin_json(n, req,
                            rc == RT_EBUSY    ? 503
                            : rc == RT_EINVAL ? 400
                                              : 409,
                            "the master configuration change was refused", rc);
    }
}

/* ---- lifecycle ---- */

/* Empties the catalog view's directory: the view is rebuilt from the raft
 * snapshot and log at every start (§2.5). */
static int ms__node_fresh_view(const char *dir, char *errmsg)
{
    static const char *const files[] = {"data.mdb", "lock.mdb"};
    char path[2 * MS__NODE_PATH];

    if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
        rt_errmsg_printf(errmsg, "mkdir %s: %s", dir, strerror(errno));
        return RT_EIO;
    }
    for (size_t i = 0; i < 2; i++) {
        snprintf(path, sizeof(path), "%s/%s", dir, files[i]);
        if (unlink(path) != 0 && errno != ENOENT) {
            rt_errmsg_printf(errmsg, "unlink %s: %s", path, strerror(errno));
            return RT_EIO;
        }
    }
    return 0;
}

int ms_node_start(uv_loop_t *loop,
                  const struct ms_node_config *cfg,
                  struct ms_events *events,
                  struct ms_status *status,
                  struct ms_admin *admin,
                  struct ms_node **out,
                  char *errmsg)
{
    struct ms_node *n = rt_xcalloc(1, sizeof(*n));
    char view[MS__NODE_PATH + 16], rdir[MS__NODE_PATH + 16];
    struct ms_raft_opts ro;
    struct ms_raft_fsm fsm = {n, ms__fsm_apply, ms__fsm_snapshot,
                              ms__fsm_restore};
    uint64_t boot = 0;
    int rc;

    n->loop = loop;
    n->cfg = *cfg;
    n->events = events;
    n->status = status;
    n->admin = admin;
    snprintf(n->data_dir, sizeof(n->data_dir), "%s", cfg->master.data_dir);
    snprintf(n->listen_host, sizeof(n->listen_host), "%s",
             cfg->master.listen_host);
    snprintf(n->http_addr, sizeof(n->http_addr), "%s",
             cfg->http_addr ? cfg->http_addr : "");
    snprintf(n->http_listen, sizeof(n->http_listen), "%s",
             cfg->http_listen ? cfg->http_listen : n->http_addr);
    n->cfg.master.data_dir = n->data_dir;
    n->cfg.master.listen_host = n->listen_host;
    n->cfg.http_addr = n->http_addr;
    n->cfg.http_listen = n->http_listen;
    n->cfg.rpc_advertise = NULL;  /* copied into rpc_addr below */
    n->cfg.raft_advertise = NULL; /* given to raft, which copies it */
    ms_status_set_role(status, false, NULL);

    if (mkdir(n->data_dir, 0755) != 0 && errno != EEXIST) {
        rt_errmsg_printf(errmsg, "mkdir %s: %s", n->data_dir, strerror(errno));
        rc = RT_EIO;
        goto err;
    }
    {
        char old[2 * MS__NODE_PATH];
        struct stat st;
        snprintf(old, sizeof(old), "%s/data.mdb", n->data_dir);
        n->legacy = stat(old, &st) == 0;
    }
    snprintf(view, sizeof(view), "%s/catalog", n->data_dir);
    if ((rc = ms__node_fresh_view(view, errmsg)) != 0 ||
        (rc = ms_catalog_open_flags(view,
                                    MS_CATALOG_NO_TERM_BUMP | MS_CATALOG_NOSYNC,
                                    &n->cat, errmsg)) != 0) {
        goto err;
    }
    ms_catalog_set_delete_grace(n->cat, cfg->master.delete_grace_ms);
    /* (origin, boot) tells this process's own entries from every other
     * member's and from its own earlier lives'. */
    while (boot == 0) {
        if (getrandom(&boot, sizeof(boot), 0) != sizeof(boot)) {
            boot = rt_time_mono_ms() ^ ((uint64_t)getpid() << 32);
        }
    }
    ms_fsm_set_self(n->cat, cfg->id, boot);

    rc = rt_rpc_server_start(loop, n->listen_host, cfg->master.listen_port,
                             ms__node_on_request, ms__node_on_conn, n, &n->rpc);
    if (rc != 0) {
        rt_errmsg_printf(errmsg, "listen on %s:%d: %s", n->listen_host,
                         cfg->master.listen_port, rt_strerror(rc));
        goto err;
    }

    if (cfg->rpc_advertise && *cfg->rpc_advertise) {
        snprintf(n->rpc_addr, sizeof(n->rpc_addr), "%s", cfg->rpc_advertise);
    } else {
        snprintf(n->rpc_addr, sizeof(n->rpc_addr), "%s:%d", n->listen_host,
                 ms_node_rpc_port(n));
    }

    if (admin) {
        rc = ms_admin_attach(admin, loop, ms__node_admin, n);
        if (rc != 0) {
            rt_errmsg_printf(errmsg, "admin queue: %s", rt_strerror(rc));
            goto err;
        }
        n->admin_attached = true;
    }

    snprintf(rdir, sizeof(rdir), "%s/raft", n->data_dir);
    memset(&ro, 0, sizeof(ro));
    ro.id = cfg->id;
    ro.dir = rdir;
    ro.listen = cfg->raft_listen;
    ro.advertise = cfg->raft_advertise;
    ro.peers = cfg->peers;
    ro.npeers = cfg->npeers;
    ro.bootstrap = cfg->bootstrap;
    ro.join = cfg->join;
    ro.election_ms = cfg->election_ms;
    ro.heartbeat_ms = cfg->heartbeat_ms;
    ro.snapshot_threshold = cfg->snapshot_threshold;
    ro.snapshot_trailing = cfg->snapshot_trailing;
    ro.tls = cfg->tls;
    rc =
        ms_raft_start(loop, &ro, &fsm, ms__node_on_change, n, &n->raft, errmsg);
    if (rc != 0) {
        n->raft = NULL;
        goto err;
    }
    uv_timer_init(loop, &n->tick);
    n->tick.data = n;
    n->tick_open = true;
    uv_timer_start(&n->tick, ms__node_tick, MS__NODE_TICK_MS, MS__NODE_TICK_MS);
    rt_log(RT_LOG_INFO,
           "master %" PRIu64
           " up: rpc %s:%d (advertised %s), raft %s, %zu voters configured",
           cfg->id, n->listen_host, ms_node_rpc_port(n), n->rpc_addr,
           ms_raft_addr(n->raft), cfg->npeers ? cfg->npeers : (size_t)1);
    ms__node_publish(n);
    *out = n;
    return 0;

err:
    n->stopping = true;
    if (n->admin_attached) {
        ms_admin_detach(admin);
    }
    if (n->rpc) {
        rt_rpc_server_close(n->rpc);
    }
    if (n->cat) {
        ms_catalog_close(n->cat);
    }
    free(n);
    return rc;
}

int ms_node_rpc_port(const struct ms_node *n)
{
    return n->rpc ? rt_rpc_server_port(n->rpc) : -1;
}

const char *ms_node_raft_addr(const struct ms_node *n)
{
    return n->raft ? ms_raft_bind_addr(n->raft) : "";
}

const char *ms_node_rpc_addr(const struct ms_node *n)
{
    return n->rpc_addr;
}

static void ms__node_raft_closed(void *ud)
{
    struct ms_node *n = ud;
    n->raft_closed = true;
}

/* Voters of the current configuration. */
static size_t ms__node_voters(struct ms_node *n)
{
    struct ms_raft_member mem[16];
    size_t nm = ms_raft_config(n->raft, mem, 16), v = 0;
    for (size_t i = 0; i < nm && i < 16; i++) {
        v += mem[i].role == MS_RAFT_VOTER;
    }
    return v;
}

static void ms__node_handed_over(void *ud, int status)
{
    struct ms_node *n = ud;
    rt_log(RT_LOG_INFO, "leadership %s before stopping",
           status == 0 ? "handed over" : "not handed over");
    ms__node_stop_now(n);
}

void ms_node_stop(struct ms_node *n)
{
    if (n->stopping || n->transferring) {
        return;
    }
    /* A leader with other voters hands over first (about a millisecond):
     * a rolling restart then costs no election timeout. */
    if (n->session && n->raft && ms__node_voters(n) > 1) {
        n->transferring = true;
        n->transfer_ms = rt_time_mono_ms();
        if (ms_raft_transfer(n->raft, 0, ms__node_handed_over, n) == 0) {
            return;
        }
    }
    ms__node_stop_now(n);
}

static void ms__node_stop_now(struct ms_node *n)
{
    if (n->stopping) {
        return;
    }
    n->stopping = true;
    if (n->reexec_armed) {
        uv_timer_stop(&n->reexec_timer);
        uv_close((uv_handle_t *)&n->reexec_timer, NULL);
    }
    if (n->admin_attached) {
        ms_admin_detach(n->admin);
        n->admin_attached = false;
    }
    if (n->session) {
        ms_master_stop(n->session);
    }
    rt_rpc_gate_set(NULL);
    if (n->tick_open) {
        uv_timer_stop(&n->tick);
        uv_close((uv_handle_t *)&n->tick, NULL);
        n->tick_open = false;
    }
    if (n->rpc) {
        rt_rpc_server_close(n->rpc);
        n->rpc = NULL;
    }
    if (n->hello) {
        rt_rpc_client_close(n->hello);
        n->hello = NULL;
    }
    if (n->raft) {
        ms_raft_close(n->raft, ms__node_raft_closed, n);
        n->raft = NULL;
    }
}

void ms_node_destroy(struct ms_node *n)
{
    if (!n) {
        return;
    }
    if (n->session) {
        ms_master_destroy(n->session);
    }
    ms_catalog_set_proposer(n->cat, NULL, NULL);
    ms_catalog_close(n->cat);
    free(n);
}
