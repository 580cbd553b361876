/* Raft: libraft 0.22.1 behind the contract of ms_raft.h.
 *
 * Happy path: ms_raft_start() initialises the TCP transport, the uv backend
 * and the raft instance, bootstraps an empty directory when the rules of
 * design §4.4 allow it, then raft_start() restores the newest snapshot
 * through fsm.restore and re-applies the committed entries after it through
 * fsm.apply. A 10 ms poll timer (libraft has no state callback) and a
 * zero-delay "kick" timer armed by every apply and every failed request
 * compare role, term, leader, commit and applied index with what was last
 * reported and fire on_change when any moved. Proposals are raft_apply()
 * requests owning a raft_malloc'ed copy of the entry; their callback only
 * matters on failure.
 *
 * Failure modes and what the caller sees:
 * - refused start (empty dir, several peers, neither bootstrap nor join):
 *   RT_ECONFIG before anything was created;
 * - raft_init/raft_start failing: an error from ms_raft_start(), the
 *   instance closing itself on the loop;
 * - a proposal failed (RAFT_LEADERSHIPLOST on step-down or transfer):
 *   ms_raft_failed() != 0 and on_change;
 * - fsm.apply or a later fsm.restore failing: fatal log, exit(1) (libraft
 *   would stop applying, and skipping would fork the state);
 * - close: pending requests fail inside raft_close(); proposals silently,
 *   barriers and changes with RT_ECANCELED.
 */
#include "ms_raft.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <raft.h>
#include <raft/uv.h>

#include "ms_rtls.h"
#include "rt_addr.h"
#include "rt_alloc.h"
#include "rt_log.h"

#define MS_RAFT_POLL_MS 10
#define MS_RAFT_HDR 8 /* an entry's u64le payload length */

struct ms_raft
{
    uv_loop_t *loop;
    struct raft raft;
    struct raft_io io;
    struct raft_uv_transport transport;
    bool tls; /* transport is ms_rtls (mutual TLS), else raft_uv_tcp */
    struct raft_fsm rfsm;
    struct ms_raft_fsm fsm;
    void (*on_change)(void *ud);
    void *ud;
    uint64_t id;
    char addr[MS_RAFT_ADDR_SIZE]; /* advertised: in the configuration */
    char bind[MS_RAFT_ADDR_SIZE]; /* bound */
    uv_timer_t poll;
    uv_timer_t kick;
    bool timers;   /* poll and kick initialised */
    bool starting; /* inside raft_start(): restore errors are returned */
    bool closing;
    int open_handles; /* timers still closing */
    uint64_t last_proposed;
    uint64_t failed;
    uint64_t snapshots; /* snapshot writes finished (finalize called) */
    /* What on_change last reported. */
    int seen_state;
    uint64_t seen_term, seen_leader, seen_commit, seen_applied, seen_failed;
    void (*close_cb)(void *ud);
    void *close_ud;
};

/* One asynchronous request of the caller (barrier, transfer, change). */
struct ms_raft_req
{
    union {
        struct raft_barrier barrier;
        struct raft_transfer transfer;
        struct raft_change change;
    } u;
    struct ms_raft *r;
    uint64_t target; /* transfer: who should lead afterwards (0 = anyone) */
    ms_raft_done_cb cb;
    void *ud;
};

struct ms_raft_prop
{
    struct raft_apply req;
    struct ms_raft *r;
};

/* ---- errors ---- */

/* libraft's codes become ours once, here (STYLE §4). */
static int ms_raft__err(const struct ms_raft *r, int rv)
{
    switch (rv) {
        case 0:
            return 0;
        case RAFT_NOTLEADER:
        case RAFT_LEADERSHIPLOST:
            return r->closing ? RT_ECANCELED : MS_RAFT_ENOTLEADER;
        case RAFT_CANTCHANGE:
        case RAFT_BUSY:
            return RT_EBUSY;
        case RAFT_NOMEM:
            return RT_ENOMEM;
        case RAFT_BADID:
        case RAFT_DUPLICATEID:
        case RAFT_DUPLICATEADDRESS:
        case RAFT_BADROLE:
        case RAFT_NOTFOUND:
        case RAFT_INVALID:
        case RAFT_MALFORMED:
            return RT_EINVAL;
        case RAFT_CANCELED:
        case RAFT_SHUTDOWN:
            return RT_ECANCELED;
        case RAFT_CORRUPT:
            return RT_ECORRUPT;
        case RAFT_NOSPACE:
            return RT_ENOSPACE;
        default:
            return RT_EIO;
    }
}

/* ---- change reporting ---- */

static void ms_raft__check(struct ms_raft *r)
{
    raft_id leader;
    const char *addr;
    int state;
    uint64_t term, commit, applied;

    if (r->closing)
        return;
    state = (int)raft_state(&r->raft);
    raft_leader(&r->raft, &leader, &addr);
    term = raft_current_term(&r->raft);
    commit = raft_commit_index(&r->raft);
    applied = raft_last_applied(&r->raft);
    if (state == r->seen_state && term == r->seen_term &&
        leader == r->seen_leader && commit == r->seen_commit &&
        applied == r->seen_applied && r->failed == r->seen_failed)
        return;
    if (state != r->seen_state || leader != r->seen_leader)
        rt_log(RT_LOG_INFO, "raft %llu: %s, term %llu, leader %llu",
               (unsigned long long)r->id, raft_state_name(state),
               (unsigned long long)term, (unsigned long long)leader);
    r->seen_state = state;
    r->seen_term = term;
    r->seen_leader = leader;
    r->seen_commit = commit;
    r->seen_applied = applied;
    r->seen_failed = r->failed;
    if (r->on_change != NULL)
        r->on_change(r->ud);
}

static void ms_raft__poll_cb(uv_timer_t *t)
{
    ms_raft__check(t->data);
}

/* Report on the next loop turn, outside libraft's own processing, so that
 * on_change may propose at once. */
static void ms_raft__kick(struct ms_raft *r)
{
    if (r->timers && !r->closing && !uv_is_active((uv_handle_t *)&r->kick))
        uv_timer_start(&r->kick, ms_raft__poll_cb, 0, 0);
}

/* ---- the FSM glue ---- */

static int ms_raft__apply(struct raft_fsm *rfsm,
                          const struct raft_buffer *buf,
                          void **result)
{
    struct ms_raft *r = rfsm->data;
    /* libraft sets last_applied right after this returns, and applies in
     * index order, so this entry's index is the next one. */
    uint64_t index = raft_last_applied(&r->raft) + 1;
    int rv;

    *result = NULL;
    if (r->closing)
        return 0; /* the view dies with us; the log is the record */
    if (buf->len < MS_RAFT_HDR ||
        rt_get_u64le(buf->base) > buf->len - MS_RAFT_HDR) {
        rt_log(RT_LOG_FATAL, "raft %llu: entry %llu: bad framing (%zu bytes)",
               (unsigned long long)r->id, (unsigned long long)index, buf->len);
        exit(1);
    }
    rv =
        r->fsm.apply(r->fsm.ud, index, (const uint8_t *)buf->base + MS_RAFT_HDR,
                     (size_t)rt_get_u64le(buf->base));
    if (rv != 0) {
        rt_log(RT_LOG_FATAL, "raft %llu: apply of entry %llu failed: %s",
               (unsigned long long)r->id, (unsigned long long)index,
               rt_strerror(rv));
        exit(1);
    }
    ms_raft__kick(r);
    return 0;
}

static int ms_raft__snapshot(struct raft_fsm *rfsm,
                             struct raft_buffer *bufs[],
                             unsigned *n_bufs)
{
    struct ms_raft *r = rfsm->data;
    struct rt_buf out = RT_BUF_INIT;
    struct raft_buffer *b;
    int rv;

    rv = r->fsm.snapshot(r->fsm.ud, &out);
    if (rv != 0) {
        /* libraft skips this snapshot and retries after a later commit. */
        rt_buf_free(&out);
        return RAFT_BUSY;
    }
    b = raft_malloc(sizeof *b);
    if (b == NULL)
        goto err_nomem;
    b->len = out.len;
    b->base = raft_malloc(out.len > 0 ? out.len : 1);
    if (b->base == NULL) {
        raft_free(b);
        goto err_nomem;
    }
    if (out.len > 0)
        memcpy(b->base, out.data, out.len);
    rt_buf_free(&out);
    *bufs = b;
    *n_bufs = 1;
    return 0;

err_nomem:
    rt_buf_free(&out);
    return RAFT_NOMEM;
}

/* FSM version 2: libraft no longer frees the buffers of a snapshot it took;
 * this runs once it wrote them (or failed to). */
static int ms_raft__snapshot_finalize(struct raft_fsm *rfsm,
                                      struct raft_buffer *bufs[],
                                      unsigned *n_bufs)
{
    struct ms_raft *r = rfsm->data;

    r->snapshots++;
    if (*bufs != NULL) {
        for (unsigned i = 0; i < *n_bufs; i++)
            raft_free((*bufs)[i].base);
        raft_free(*bufs);
    }
    *bufs = NULL;
    *n_bufs = 0;
    return 0;
}

static int ms_raft__restore(struct raft_fsm *rfsm, struct raft_buffer *buf)
{
    struct ms_raft *r = rfsm->data;
    int rv;

    rv = r->fsm.restore(r->fsm.ud, buf->base, buf->len);
    if (rv != 0) {
        rt_log(r->starting ? RT_LOG_ERROR : RT_LOG_FATAL,
               "raft %llu: restore of a snapshot (%zu bytes) failed: %s",
               (unsigned long long)r->id, buf->len, rt_strerror(rv));
        if (!r->starting)
            exit(1);
        return RAFT_CORRUPT; /* libraft frees the buffer on this path */
    }
    /* On success the buffer is ours (libraft's restore contract). */
    raft_free(buf->base);
    ms_raft__kick(r);
    return 0;
}

/* ---- start ---- */

/* True when @dir does not exist or holds nothing. */
static bool ms_raft__dir_empty(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    bool empty = true;

    if (d == NULL)
        return true;
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) {
            empty = false;
            break;
        }
    }
    closedir(d);
    return empty;
}

/* @listen with port 0 becomes the same host with a port free right now, so
 * the configuration names an address others could use later. */
static int ms_raft__resolve_listen(const char *listen, char *out, char *errmsg)
{
    char host[INET6_ADDRSTRLEN]; /* 46: leaves room for ":port" */
    struct sockaddr_storage ss;
    socklen_t len;
    int port, fd, rv;

    if (rt_addr_split(listen, host, sizeof host, &port) != 0 ||
        rt_addr_ip(host, port, &ss, &len) != 0 || ss.ss_family != AF_INET) {
        rt_errmsg_printf(errmsg, "raft listen address %s: want IPv4:port",
                         listen);
        return RT_EINVAL;
    }
    if (port != 0) {
        snprintf(out, MS_RAFT_ADDR_SIZE, "%s", listen);
        return 0;
    }
    fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0)
        goto err_sys;
    rv = bind(fd, (struct sockaddr *)&ss, len);
    if (rv == 0)
        rv = getsockname(fd, (struct sockaddr *)&ss, &len);
    close(fd);
    if (rv != 0)
        goto err_sys;
    snprintf(out, MS_RAFT_ADDR_SIZE, "%s:%u", host,
             (unsigned)ntohs(((struct sockaddr_in *)&ss)->sin_port));
    return 0;

err_sys:
    rt_errmsg_printf(errmsg, "raft listen address %s: %s", listen,
                     strerror(errno));
    return RT_EIO;
}

static int ms_raft__bootstrap(struct ms_raft *r,
                              const struct ms_raft_opts *o,
                              char *errmsg)
{
    struct raft_configuration conf;
    int rv = 0;

    raft_configuration_init(&conf);
    if (o->npeers == 0) {
        rv = raft_configuration_add(&conf, r->id, r->addr, RAFT_VOTER);
    } else {
        /* Every member bootstraps the very same configuration (the first
         * log entry must be identical everywhere): its own entry is the
         * address the others dial, as --peers names it, which need not be
         * the one it binds (a proxy, a NAT). */
        for (size_t i = 0; i < o->npeers && rv == 0; i++) {
            rv = raft_configuration_add(&conf, o->peers[i].id, o->peers[i].addr,
                                        RAFT_VOTER);
        }
    }
    if (rv == 0)
        rv = raft_bootstrap(&r->raft, &conf);
    raft_configuration_close(&conf);
    if (rv != 0) {
        rt_errmsg_printf(errmsg, "raft bootstrap: %s: %s", raft_strerror(rv),
                         raft_errmsg(&r->raft));
        return ms_raft__err(r, rv);
    }
    return 0;
}

/* Frees the transport after libraft closed it (or never used it). */
static void ms_raft__transport_free(struct ms_raft *r)
{
    if (r->tls)
        ms_rtls_close(&r->transport);
    else
        raft_uv_tcp_close(&r->transport);
}

static void ms_raft__abort_close_cb(struct raft *raft)
{
    struct ms_raft *r = raft->data;

    raft_uv_close(&r->io);
    ms_raft__transport_free(r);
    free(r);
}

int ms_raft_start(uv_loop_t *loop,
                  const struct ms_raft_opts *o,
                  const struct ms_raft_fsm *fsm,
                  void (*on_change)(void *ud),
                  void *ud,
                  struct ms_raft **out,
                  char *errmsg)
{
    struct ms_raft *r;
    bool empty, self_only, bootstrap = false;
    int rv;

    errmsg[0] = '\0';
    if (o->id == 0 || o->dir == NULL || o->listen == NULL ||
        fsm->apply == NULL || fsm->snapshot == NULL || fsm->restore == NULL) {
        rt_errmsg_printf(errmsg, "raft: id, dir, listen and fsm are required");
        return RT_EINVAL;
    }
    empty = ms_raft__dir_empty(o->dir);
    self_only = o->npeers == 0 || (o->npeers == 1 && o->peers[0].id == o->id);
    if (empty && !o->join) {
        if (!self_only && !o->bootstrap) {
            /* A wiped member reusing its id could vote twice in one term. */
            rt_errmsg_printf(
                errmsg,
                "data dir is empty but this member (id %llu) may belong to "
                "an existing cluster: rejoin under a new id (--join --id N, "
                "then rtctl master remove %llu; rtctl master add ...), or "
                "pass --bootstrap for a new cluster",
                (unsigned long long)o->id, (unsigned long long)o->id);
            return RT_ECONFIG;
        }
        bootstrap = true;
    }
    if (mkdir(o->dir, 0755) != 0 && errno != EEXIST) {
        rt_errmsg_printf(errmsg, "raft dir %s: %s", o->dir, strerror(errno));
        return RT_EIO;
    }

    r = rt_xcalloc(1, sizeof *r);
    r->loop = loop;
    r->id = o->id;
    r->fsm = *fsm;
    r->on_change = on_change;
    r->ud = ud;
    r->seen_state = -1;
    rv = ms_raft__resolve_listen(o->listen, r->bind, errmsg);
    if (rv != 0)
        goto err_after_alloc;
    if (o->advertise && *o->advertise) {
        if (strlen(o->advertise) >= MS_RAFT_ADDR_SIZE) {
            rt_errmsg_printf(errmsg, "raft advertise address %s: too long",
                             o->advertise);
            rv = RT_EINVAL;
            goto err_after_alloc;
        }
        snprintf(r->addr, sizeof(r->addr), "%s", o->advertise);
    } else {
        snprintf(r->addr, sizeof(r->addr), "%s", r->bind);
    }

    r->rfsm.version = 2;
    r->rfsm.data = r;
    r->rfsm.apply = ms_raft__apply;
    r->rfsm.snapshot = ms_raft__snapshot;
    r->rfsm.restore = ms_raft__restore;
    r->rfsm.snapshot_finalize = ms_raft__snapshot_finalize;

    r->transport.version = 1; /* the struct versions are ours to fill */
    r->io.version = 2;
    /* With cluster credentials every raft connection is mutual TLS between
     * certificates of role master; without them (--insecure-rpc) it is
     * libraft's own plain TCP. */
    r->tls = o->tls != NULL;
    rv = r->tls ? ms_rtls_init(&r->transport, loop, o->tls)
                : raft_uv_tcp_init(&r->transport, loop);
    if (rv == 0 && r->tls && o->tls_handshake_ms > 0)
        ms_rtls_set_handshake_ms(&r->transport, o->tls_handshake_ms);
    if (rv != 0) {
        rt_errmsg_printf(errmsg, "raft transport: %s", raft_strerror(rv));
        rv = ms_raft__err(r, rv);
        goto err_after_alloc;
    }
    if (strcmp(r->addr, r->bind) != 0) {
        /* libraft listens on the address raft_init() names unless told
         * otherwise; the configuration keeps the advertised one. */
        rv = r->tls ? ms_rtls_set_bind_address(&r->transport, r->bind)
                    : raft_uv_tcp_set_bind_address(&r->transport, r->bind);
        if (rv != 0) {
            rt_errmsg_printf(errmsg, "raft bind address %s: %s", r->bind,
                             raft_strerror(rv));
            rv = ms_raft__err(r, rv);
            ms_raft__transport_free(r);
            goto err_after_alloc;
        }
    }
    rv = raft_uv_init(&r->io, loop, o->dir, &r->transport);
    if (rv != 0) {
        rt_errmsg_printf(errmsg, "raft io %s: %s", o->dir, r->io.errmsg);
        rv = ms_raft__err(r, rv);
        goto err_after_transport;
    }
    rv = raft_init(&r->raft, &r->io, &r->rfsm, r->id, r->addr);
    if (rv != 0) {
        rt_errmsg_printf(errmsg, "raft init: %s", raft_errmsg(&r->raft));
        rv = ms_raft__err(r, rv);
        goto err_after_io;
    }
    r->raft.data = r;
    raft_set_election_timeout(&r->raft, o->election_ms ? o->election_ms : 500);
    raft_set_heartbeat_timeout(&r->raft,
                               o->heartbeat_ms ? o->heartbeat_ms : 100);
    raft_set_pre_vote(&r->raft, true);
    if (o->segment_size > 0) {
        /* libraft refuses proposals (RAFT_NOSPACE) while the prepared open
         * segments hold less than its capacity threshold, 4 MiB by default:
         * with smaller segments that is never reached, so scale it to one
         * segment. */
        raft_uv_set_segment_size(&r->io, o->segment_size);
        raft_set_capacity_threshold(&r->raft,
                                    (unsigned short)(o->segment_size / 1024));
    }
    raft_set_snapshot_threshold(
        &r->raft, o->snapshot_threshold ? o->snapshot_threshold : 1024);
    raft_set_snapshot_trailing(
        &r->raft, o->snapshot_trailing ? o->snapshot_trailing : 128);

    if (bootstrap) {
        rv = ms_raft__bootstrap(r, o, errmsg);
        if (rv != 0)
            goto err_after_init;
    }
    r->starting = true;
    rv = raft_start(&r->raft);
    r->starting = false;
    if (rv != 0) {
        /* libraft's transport says nothing when it cannot listen. */
        rt_errmsg_printf(errmsg,
                         "raft start %s: %s: %s (listening on %s: is another "
                         "master using that address? --raft-listen)",
                         o->dir, raft_strerror(rv), raft_errmsg(&r->raft),
                         r->addr);
        rv = ms_raft__err(r, rv);
        goto err_after_init;
    }

    uv_timer_init(loop, &r->poll);
    uv_timer_init(loop, &r->kick);
    r->poll.data = r;
    r->kick.data = r;
    r->timers = true;
    uv_timer_start(&r->poll, ms_raft__poll_cb, MS_RAFT_POLL_MS,
                   MS_RAFT_POLL_MS);
    ms_raft__kick(r);
    rt_log(RT_LOG_INFO,
           "raft %llu: started on %s (advertised %s, %s), dir %s%s",
           (unsigned long long)r->id, r->bind, r->addr,
           r->tls ? "mutual TLS" : "plain TCP", o->dir,
           bootstrap ? " (bootstrapped)" : "");
    *out = r;
    return 0;

err_after_init:
    r->closing = true;
    raft_close(&r->raft, ms_raft__abort_close_cb);
    return rv;
err_after_io:
    raft_uv_close(&r->io);
err_after_transport:
    ms_raft__transport_free(r);
err_after_alloc:
    free(r);
    return rv;
}

/* ---- proposals ---- */

static void ms_raft__apply_cb(struct raft_apply *req, int status, void *result)
{
    struct ms_raft_prop *p = req->data;
    struct ms_raft *r = p->r;

    (void)result;
    if (status != 0 && !r->closing) {
        rt_log(RT_LOG_WARN, "raft %llu: proposal %llu failed: %s",
               (unsigned long long)r->id, (unsigned long long)req->index,
               raft_strerror(status));
        if (r->failed == 0)
            r->failed = req->index;
        ms_raft__kick(r);
    }
    free(p);
}

int ms_raft_propose(struct ms_raft *r,
                    const uint8_t *buf,
                    size_t len,
                    uint64_t *index_out)
{
    struct ms_raft_prop *p;
    struct raft_buffer b;
    int rv;

    if (r->closing || raft_state(&r->raft) != RAFT_LEADER)
        return MS_RAFT_ENOTLEADER;
    /* The uv backend refuses entries whose length is not a multiple of 8
     * (RAFT_INVALID, "entry buffers must be 8-byte aligned"): frame the
     * payload as [u64le length][payload][zero padding]. */
    b.len = MS_RAFT_HDR + ((len + 7) & ~(size_t)7);
    b.base = raft_calloc(1, b.len);
    if (b.base == NULL)
        return RT_ENOMEM;
    rt_put_u64le(b.base, len);
    if (len > 0)
        memcpy((uint8_t *)b.base + MS_RAFT_HDR, buf, len);
    p = rt_xcalloc(1, sizeof *p);
    p->r = r;
    p->req.data = p;
    rv = raft_apply(&r->raft, &p->req, &b, 1, ms_raft__apply_cb);
    if (rv != 0) {
        /* Refusals before the entry reached the log leave the buffer ours;
         * after that (a failed append) libraft has released it already. */
        if (rv == RAFT_NOTLEADER || rv == RAFT_NOSPACE)
            raft_free(b.base);
        free(p);
        rt_log(RT_LOG_WARN, "raft %llu: propose: %s", (unsigned long long)r->id,
               raft_errmsg(&r->raft));
        return ms_raft__err(r, rv);
    }
    r->last_proposed = p->req.index;
    if (index_out != NULL)
        *index_out = p->req.index;
    return 0;
}

uint64_t ms_raft_failed(const struct ms_raft *r)
{
    return r->failed;
}

uint64_t ms_raft_snapshots(const struct ms_raft *r)
{
    return r->snapshots;
}

uint64_t ms_raft_last_proposed(const struct ms_raft *r)
{
    return r->last_proposed;
}

uint64_t ms_raft_commit_index(struct ms_raft *r)
{
    return raft_commit_index(&r->raft);
}

uint64_t ms_raft_applied_index(struct ms_raft *r)
{
    return raft_last_applied(&r->raft);
}

uint64_t ms_raft_term(struct ms_raft *r)
{
    return raft_current_term(&r->raft);
}

bool ms_raft_is_leader(struct ms_raft *r)
{
    return !r->closing && raft_state(&r->raft) == RAFT_LEADER;
}

uint64_t ms_raft_id(const struct ms_raft *r)
{
    return r->id;
}

const char *ms_raft_addr(const struct ms_raft *r)
{
    return r->addr;
}

const char *ms_raft_bind_addr(const struct ms_raft *r)
{
    return r->bind;
}

uint64_t ms_raft_leader(struct ms_raft *r, const char **addr)
{
    raft_id id = 0;
    const char *a = NULL;

    raft_leader(&r->raft, &id, &a);
    if (addr != NULL)
        *addr = a != NULL ? a : "";
    return id;
}

/* ---- barrier, transfer, configuration changes ---- */

static struct ms_raft_req *ms_raft__req_new(struct ms_raft *r,
                                            ms_raft_done_cb cb,
                                            void *ud)
{
    struct ms_raft_req *q = rt_xcalloc(1, sizeof *q);

    q->r = r;
    q->cb = cb;
    q->ud = ud;
    return q;
}

static void ms_raft__req_finish(struct ms_raft_req *q, int status)
{
    ms_raft_done_cb cb = q->cb;
    void *ud = q->ud;

    free(q);
    if (cb != NULL)
        cb(ud, status);
}

/* The end of starting request @q: libraft's @rv (0: @q is libraft's until
 * its callback) as ours, @q freed when libraft refused it. */
static int ms_raft__req_started(struct ms_raft_req *q, int rv)
{
    struct ms_raft *r = q->r;

    if (rv != 0) {
        free(q);
        return ms_raft__err(r, rv);
    }
    return 0;
}

static void ms_raft__barrier_cb(struct raft_barrier *b, int status)
{
    struct ms_raft_req *q = b->data;

    ms_raft__req_finish(q, ms_raft__err(q->r, status));
}

int ms_raft_barrier(struct ms_raft *r, ms_raft_done_cb cb, void *ud)
{
    struct ms_raft_req *q;

    if (r->closing)
        return RT_ECANCELED;
    q = ms_raft__req_new(r, cb, ud);
    q->u.barrier.data = q;
    return ms_raft__req_started(
        q, raft_barrier(&r->raft, &q->u.barrier, ms_raft__barrier_cb));
}

static void ms_raft__transfer_cb(struct raft_transfer *t)
{
    struct ms_raft_req *q = t->data;
    struct ms_raft *r = q->r;
    raft_id leader = ms_raft_leader(r, NULL);
    int status;

    if (r->closing)
        status = RT_ECANCELED;
    else if (leader != 0 && leader != r->id &&
             (q->target == 0 || leader == q->target))
        status = 0;
    else
        status = RT_ETIMEDOUT;
    ms_raft__kick(r);
    ms_raft__req_finish(q, status);
}

int ms_raft_transfer(struct ms_raft *r,
                     uint64_t id,
                     ms_raft_done_cb cb,
                     void *ud)
{
    struct ms_raft_req *q;

    if (r->closing)
        return RT_ECANCELED;
    q = ms_raft__req_new(r, cb, ud);
    q->target = id;
    q->u.transfer.data = q;
    return ms_raft__req_started(
        q, raft_transfer(&r->raft, &q->u.transfer, id, ms_raft__transfer_cb));
}

static void ms_raft__change_cb(struct raft_change *c, int status)
{
    struct ms_raft_req *q = c->data;

    ms_raft__kick(q->r);
    ms_raft__req_finish(q, ms_raft__err(q->r, status));
}

int ms_raft_add(struct ms_raft *r,
                uint64_t id,
                const char *addr,
                ms_raft_done_cb cb,
                void *ud)
{
    struct ms_raft_req *q;

    if (r->closing)
        return RT_ECANCELED;
    q = ms_raft__req_new(r, cb, ud);
    q->u.change.data = q;
    return ms_raft__req_started(
        q, raft_add(&r->raft, &q->u.change, id, addr, ms_raft__change_cb));
}

int ms_raft_assign_voter(struct ms_raft *r,
                         uint64_t id,
                         ms_raft_done_cb cb,
                         void *ud)
{
    struct ms_raft_req *q;

    if (r->closing)
        return RT_ECANCELED;
    q = ms_raft__req_new(r, cb, ud);
    q->u.change.data = q;
    return ms_raft__req_started(q, raft_assign(&r->raft, &q->u.change, id,
                                               RAFT_VOTER, ms_raft__change_cb));
}

int ms_raft_remove(struct ms_raft *r, uint64_t id, ms_raft_done_cb cb, void *ud)
{
    struct ms_raft_req *q;

    if (r->closing)
        return RT_ECANCELED;
    q = ms_raft__req_new(r, cb, ud);
    q->u.change.data = q;
    return ms_raft__req_started(
        q, raft_remove(&r->raft, &q->u.change, id, ms_raft__change_cb));
}

size_t ms_raft_config(struct ms_raft *r, struct ms_raft_member *out, size_t max)
{
    const struct raft_configuration *c = &r->raft.configuration;
    bool leader = raft_state(&r->raft) == RAFT_LEADER;

    for (unsigned i = 0; i < c->n && i < max; i++) {
        const struct raft_server *s = &c->servers[i];
        raft_index match = 0;

        out[i].id = s->id;
        snprintf(out[i].addr, sizeof out[i].addr, "%s", s->address);
        out[i].role = s->role == RAFT_VOTER     ? MS_RAFT_VOTER
                      : s->role == RAFT_STANDBY ? MS_RAFT_STANDBY
                                                : MS_RAFT_SPARE;
        if (leader && raft_match_index(&r->raft, s->id, &match) != 0)
            match = 0;
        out[i].match_index = match;
    }
    return c->n;
}

void ms_raft_transport_stats(struct ms_raft *r, struct ms_rtls_stats *out)
{
    memset(out, 0, sizeof *out);
    if (r->tls)
        ms_rtls_get_stats(&r->transport, out);
}

/* ---- close ---- */

static void ms_raft__timer_close_cb(uv_handle_t *h)
{
    struct ms_raft *r = h->data;
    void (*cb)(void *ud);
    void *ud;

    if (--r->open_handles > 0)
        return;
    cb = r->close_cb;
    ud = r->close_ud;
    free(r);
    if (cb != NULL)
        cb(ud);
}

static void ms_raft__close_cb(struct raft *raft)
{
    struct ms_raft *r = raft->data;

    raft_uv_close(&r->io);
    ms_raft__transport_free(r);
    r->open_handles = 2;
    uv_close((uv_handle_t *)&r->poll, ms_raft__timer_close_cb);
    uv_close((uv_handle_t *)&r->kick, ms_raft__timer_close_cb);
}

void ms_raft_close(struct ms_raft *r, void (*cb)(void *ud), void *ud)
{
    RT_PRE(!r->closing);
    r->closing = true;
    r->close_cb = cb;
    r->close_ud = ud;
    uv_timer_stop(&r->poll);
    uv_timer_stop(&r->kick);
    raft_close(&r->raft, ms_raft__close_cb);
}
