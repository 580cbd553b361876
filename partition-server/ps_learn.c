/* Catch-up glue (ps_learn.h).
 *
 * Happy path of a full copy. Primary: the core's READ -> ps__copy_start
 * -> threadpool: open the snapshot, read `rs` in it (s) -> REPL_BEGIN ->
 * its reply -> threadpool: the next chunk -> REPL_SNAP -> its reply ->
 * ... -> the last chunk's reply -> READ_DONE(s) to the core. Replica:
 * REPL_BEGIN -> the core's WRITE(BEGIN) -> rs LEARNING, span drop -> its
 * callback -> DISK_DONE -> the core's COPY_RESP -> the reply; each
 * REPL_SNAP -> a raw write -> the reply; the last one -> the core's WRITE
 * (SNAP_END) -> raw write, then rs (applied s, OK) -> DISK_DONE -> the
 * core's COPY_RESP(s) -> the reply. A keyed copy: the same, except that
 * after the snapshot the primary takes the keys out of its key log
 * (ps__copy_keys, polled through the threadpool until the log holds s),
 * adds those the BEGIN's answer names (ps__copy_own_keys), and reads the
 * chunks key by key (ps_store_snap_keys); the replica names its own keys
 * (ps__own_keys) and drops no span.
 * Failure modes: a call failing or timing out ends the copy on the
 * primary (READ_DONE with the code; the core probes again); a chunk
 * failing its checks or its write ends it on the replica (the request is
 * answered with the error and later chunks fail); a span drop or state
 * persist failing is logged and answered RT_EIO (the core keeps the range
 * CLEARING: later copies get RT_EBUSY until a restart, which finds
 * LEARNING and starts over). */
#include "ps_learn.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "ps_fence.h"
#include "ps_jobs.h"
#include "ps_keylog.h"
#include "ps_move_jobs.h"
#include "ps_range.h"
#include "ps_rcore.h"
#include "ps_repl.h"
#include "ps_store.h"
#include "ps_writer.h"
#include "rt.pb-c.h"
#include "rt_alloc.h"
#include "rt_buf.h"
#include "rt_crc32c.h"
#include "rt_err.h"
#include "rt_log.h"

/* A request of a primary waiting for the core's answer (REPL_PROBE) or a
 * write (REPL_BEGIN, REPL_SNAP). */
struct ps__lwait
{
    struct rt_rpc_conn *conn; /* a reference is held */
    uint64_t id;
    uint32_t method;
    uint64_t range_id;
    struct ps__lwait *next;
};

/* Replica side: the copy being received for one range. */
struct ps__lrecv
{
    uint64_t range_id;
    uint64_t table_id;
    uint64_t epoch;
    uint64_t snap_lsn, snap_epoch;
    struct rt_repl_epoch_start hist[RT_REPL_MAX_HISTORY];
    size_t n_hist;
    int keyed; /* BEGIN mode KEYED: my keys were kept */
    /* KEYED from below my applied LSN: the keys my LSNs above it changed
     * (from my key log), named in my answer to the BEGIN. */
    struct rt_buf own; /* each key preceded by its u32le length */
    size_t n_own;
    uint32_t next_seq;
    uint64_t count;
    char *low, *high;
    struct rt_buf klo, khi; /* storage key bounds [klo, khi) */
    Rt__ReplSnap *last;     /* the last chunk, until the core's WRITE */
    struct ps__lrecv *next;
};

/* Primary side: one full copy to one replica (the core's READ). */
struct ps__lcopy
{
    struct ps_server *ps;
    uint64_t range_id, peer, io, epoch;
    struct rt_repl_epoch_start hist[RT_REPL_MAX_HISTORY];
    size_t n_hist;
    struct ps_span span; /* strings owned */
    struct ps_snap *snap;
    uint64_t s, s_epoch;
    /* Keyed (BEGIN mode KEYED, §7.3): the replica holds my sequence up to
     * @from; the keys changed in (@from, s] (copied out of the key log
     * into @keybuf once it reached s, @waits polls of it so far) are
     * sent from @next_key on. Without them it is a full copy. */
    int keyed, begun;
    uint64_t from;
    unsigned waits;
    struct rt_buf keybuf, own; /* own: the keys the replica named */
    struct ps_fetch_key *keys;
    size_t n_keys, next_key;
    uint32_t seq;
    uint64_t count, bytes;
    uint64_t started_ms;
    int dead;     /* replaced or stopped: no more calls, no READ_DONE */
    int refs;     /* the list's, and each work item or call in flight */
    int opened;   /* the snapshot is open: the work reads chunks */
    int working;  /* a threadpool step is in flight */
    int inflight; /* REPL_SNAP calls out (not the last) */
    int eof;      /* the last chunk is read: in @body until sent */
    int fail;     /* fail the copy from the next after-work with this */
    int rc;       /* threadpool result: 1 more, 0 last chunk, < 0 error */
    uint64_t n_chunk, bytes_chunk;
    struct rt_buf body; /* the packed chunk */
    uv_work_t work;
    struct ps__lcopy *next;
};

struct ps_learn
{
    struct ps__lwait *waits;
    struct ps__lrecv *recvs;
    struct ps__lcopy *copies;
    uint64_t copies_done, copy_bytes, received;
    uint64_t keyed_done, keyed_received, keyed_fallbacks;
    int stopped;
};

/* A raw write of a chunk (replica). */
struct ps__lwrite
{
    struct ps_job job;
    struct ps_server *ps;
    uint64_t range_id;
    uint64_t io_id; /* the core's WRITE (the last chunk): its DISK_DONE */
    uint64_t lsn, snap_epoch;
    Rt__ReplSnap *msg;
    struct ps__lwait *w; /* a middle chunk's request */
    struct ps_kv kvs[];
};

/* A persist of the learner's `rs` fields. */
struct ps__lstate
{
    struct ps_job job;
    struct ps_server *ps;
    uint64_t range_id, io_id, lsn;
    int drop_after; /* BEGIN: the span drop comes next */
};

static void ps__lstate_cb(struct ps_job *job);
static void ps__copy_done_submit(struct ps_server *ps,
                                 uint64_t range_id,
                                 uint64_t io_id,
                                 uint64_t snap_lsn,
                                 uint64_t snap_epoch);

static struct ps_learn *ps__learn(struct ps_server *ps)
{
    if (ps->learn == NULL) {
        ps->learn = rt_xcalloc(1, sizeof(*ps->learn));
    }
    return ps->learn;
}

/* Waiting requests */

static struct ps__lwait *ps__wait_park(struct ps_server *ps,
                                       struct rt_rpc_conn *conn,
                                       uint64_t id,
                                       uint32_t method,
                                       uint64_t range_id)
{
    struct ps_learn *l = ps__learn(ps);
    struct ps__lwait *w = rt_xcalloc(1, sizeof(*w)), **pp = &l->waits;
    rt_rpc_conn_ref(conn);
    w->conn = conn;
    w->id = id;
    w->method = method;
    w->range_id = range_id;
    while (*pp != NULL) {
        pp = &(*pp)->next;
    }
    *pp = w;
    return w;
}

/* Takes @w off the list (if there) and answers it: Empty, or @code. */
static void ps__wait_answer(struct ps_server *ps,
                            struct ps__lwait *w,
                            int code,
                            const ProtobufCMessage *body)
{
    struct ps_learn *l = ps__learn(ps);
    for (struct ps__lwait **pp = &l->waits; *pp != NULL; pp = &(*pp)->next) {
        if (*pp == w) {
            *pp = w->next;
            break;
        }
    }
    if (code != 0) {
        rt_rpc_reply_err(w->conn, w->id, w->method, code, NULL);
    } else {
        rt_rpc_reply_pb(w->conn, w->id, w->method, 0, body);
    }
    rt_rpc_conn_unref(w->conn);
    free(w);
}

/* The oldest request of @range_id with one of the methods (0: any). */
static struct ps__lwait *ps__wait_find(struct ps_server *ps,
                                       uint64_t range_id,
                                       uint32_t m1,
                                       uint32_t m2)
{
    for (struct ps__lwait *w = ps__learn(ps)->waits; w != NULL; w = w->next) {
        if (w->range_id == range_id && (w->method == m1 || w->method == m2)) {
            return w;
        }
    }
    return NULL;
}

static int ps__wait_live(struct ps_server *ps, const struct ps__lwait *w)
{
    for (struct ps__lwait *x = ps__learn(ps)->waits; x != NULL; x = x->next) {
        if (x == w) {
            return 1;
        }
    }
    return 0;
}

/* Replica side */

static struct ps__lrecv *ps__recv_find(struct ps_server *ps, uint64_t id)
{
    for (struct ps__lrecv *r = ps__learn(ps)->recvs; r != NULL; r = r->next) {
        if (r->range_id == id) {
            return r;
        }
    }
    return NULL;
}

static void ps__recv_drop(struct ps_server *ps, uint64_t range_id)
{
    for (struct ps__lrecv **pp = &ps__learn(ps)->recvs; *pp != NULL;
         pp = &(*pp)->next) {
        struct ps__lrecv *r = *pp;
        if (r->range_id != range_id) {
            continue;
        }
        *pp = r->next;
        if (r->last != NULL) {
            rt__repl_snap__free_unpacked(r->last, NULL);
        }
        rt_buf_free(&r->klo);
        rt_buf_free(&r->khi);
        rt_buf_free(&r->own);
        free(r->low);
        free(r->high);
        free(r);
        return;
    }
}

static void ps__step(struct ps_server *ps,
                     uint64_t peer,
                     const struct rt_repl_msg *m)
{
    struct rt_repl_event ev = {.kind = RT_REPL_EV_MSG,
                               .now_ms = uv_now(ps->loop),
                               .peer = peer,
                               .msg = m};
    ps_repl_core_step(ps, &ev);
}

void ps_learn_on_probe(struct ps_server *ps,
                       struct rt_rpc_conn *conn,
                       uint64_t id,
                       const uint8_t *body,
                       size_t len)
{
    const uint32_t method = RT__METHOD__REPL_PROBE;
    Rt__ProbeReq *req = rt__probe_req__unpack(NULL, len, body);
    if (req == NULL) {
        rt_rpc_reply_err(conn, id, method, RT_EINVAL, "bad ProbeReq");
        return;
    }
    struct ps__lwait *w = ps__wait_park(ps, conn, id, method, req->range_id);
    struct rt_repl_msg m = {.kind = RT_REPL_MSG_PROBE};
    m.u.probe =
        (struct rt_repl_probe){.range_id = req->range_id, .epoch = req->epoch};
    ps__step(ps, PS_LEARN_TOKEN(req->range_id), &m);
    if (ps__wait_live(ps, w)) {
        /* No core, or it does not replicate the range here. */
        ps__wait_answer(ps, w, RT_ESTALE, NULL);
    }
    rt__probe_req__free_unpacked(req, NULL);
}

/* The core's answer to a probe: the ReplicaState of the request. */
static void ps__probe_answer(struct ps_server *ps,
                             const struct rt_repl_replica_state *rs)
{
    struct ps__lwait *w =
        ps__wait_find(ps, rs->range_id, RT__METHOD__REPL_PROBE, 0);
    if (w == NULL) {
        return;
    }
    Rt__ReplicaState st = RT__REPLICA_STATE__INIT;
    Rt__EpochStart hs[RT_REPL_MAX_HISTORY], *hp[RT_REPL_MAX_HISTORY];
    st.range_id = rs->range_id;
    st.epoch = rs->epoch;
    st.state = (uint32_t)rs->state;
    st.applied_epoch = rs->applied_epoch;
    st.applied_lsn = rs->applied_lsn;
    for (size_t i = 0; i < rs->n_history && i < RT_REPL_MAX_HISTORY; i++) {
        rt__epoch_start__init(&hs[i]);
        hs[i].epoch = rs->history[i].epoch;
        hs[i].first_lsn = rs->history[i].first_lsn;
        hp[i] = &hs[i];
    }
    st.history = hp;
    st.n_history = rs->n_history;
    ps__wait_answer(ps, w, rs->code, &st.base);
}

/* A KEYED BEGIN from @from below my applied LSN of range @range_id: the
 * keys my LSNs in (from, applied] changed, from my key log, into @out
 * (their bytes, each preceded by a u32le length) and *@n. 0 (none when
 * from is my applied LSN), RT_ENOTFOUND (the log does not reach back:
 * the sender copies in full), RT_EINVAL (from above my applied LSN: the
 * core refuses it). */
static int ps__own_keys(struct ps_server *ps,
                        uint64_t range_id,
                        uint64_t from,
                        struct rt_buf *out,
                        size_t *n)
{
    struct ps_rcore_range_info info;
    const struct ps_keylog *kl = ps_repl_keylog(ps);
    struct ps_keylog_keys k = {0};
    *n = 0;
    if (ps_repl_range_info(ps, range_id, &info) != 0 ||
        from >= info.applied_lsn) {
        return 0; /* the core decides */
    }
    if (kl == NULL ||
        ps_keylog_changed(kl, range_id, from, info.applied_lsn, &k) < 0) {
        ps_keylog_keys_close(&k);
        return RT_ENOTFOUND;
    }
    for (size_t i = 0; i < k.n; i++) {
        uint8_t len[4];
        rt_put_u32le(len, (uint32_t)k.v[i].len);
        rt_buf_append(out, len, 4);
        rt_buf_append(out, k.v[i].p, k.v[i].len);
    }
    *n = k.n;
    ps_keylog_keys_close(&k);
    return 0;
}

void ps_learn_on_begin(struct ps_server *ps,
                       struct rt_rpc_conn *conn,
                       uint64_t id,
                       const uint8_t *body,
                       size_t len)
{
    const uint32_t method = RT__METHOD__REPL_BEGIN;
    Rt__ReplBegin *b = rt__repl_begin__unpack(NULL, len, body);
    const struct ps_range *rg;
    if (b == NULL ||
        (b->mode != RT_REPL_BEGIN_FULL && b->mode != RT_REPL_BEGIN_KEYED) ||
        b->n_history > RT_REPL_MAX_HISTORY) {
        rt_rpc_reply_err(conn, id, method, RT_EINVAL,
                         b == NULL ? "bad ReplBegin"
                                   : "mode FULL (1) or KEYED (2), at most "
                                     "16 history entries");
        goto out;
    }
    if ((rg = ps_ranges_find(&ps->ranges, b->range_id)) == NULL) {
        rt_rpc_reply_err(conn, id, method, RT_ESTALE,
                         "range not assigned here");
        goto out;
    }
    if (ps__wait_find(ps, b->range_id, RT__METHOD__REPL_BEGIN,
                      RT__METHOD__REPL_SNAP) != NULL) {
        rt_rpc_reply_err(conn, id, method, RT_EBUSY, "a copy step is running");
        goto out;
    }
    struct rt_buf own = RT_BUF_INIT;
    size_t n_own = 0;
    if (b->mode == RT_REPL_BEGIN_KEYED) {
        int rc = ps__own_keys(ps, b->range_id, b->from_lsn, &own, &n_own);
        if (rc != 0) {
            rt_rpc_reply_err(conn, id, method, rc,
                             "my key log does not name my LSNs above "
                             "from_lsn");
            goto out;
        }
    }
    ps__recv_drop(ps, b->range_id);
    struct ps__lrecv *r = rt_xcalloc(1, sizeof(*r));
    r->own = own;
    r->n_own = n_own;
    struct ps_span sp = {rg->table_id, rg->low, rg->high};
    r->range_id = b->range_id;
    r->table_id = rg->table_id;
    r->epoch = b->epoch;
    r->snap_lsn = b->snap_lsn;
    r->snap_epoch = b->snap_epoch;
    for (size_t i = 0; i < b->n_history; i++) {
        r->hist[i].epoch = b->history[i]->epoch;
        r->hist[i].first_lsn = b->history[i]->first_lsn;
    }
    r->n_hist = b->n_history;
    r->keyed = b->mode == RT_REPL_BEGIN_KEYED;
    r->low = rt_xstrdup(rg->low);
    r->high = rg->high ? rt_xstrdup(rg->high) : NULL;
    rt_buf_init(&r->klo);
    rt_buf_init(&r->khi);
    ps_span_keys(&sp, &r->klo, &r->khi);
    r->next = ps__learn(ps)->recvs;
    ps__learn(ps)->recvs = r;

    struct ps__lwait *w = ps__wait_park(ps, conn, id, method, b->range_id);
    struct rt_repl_msg m = {.kind = RT_REPL_MSG_BEGIN};
    m.u.begin = (struct rt_repl_begin){.range_id = b->range_id,
                                       .epoch = b->epoch,
                                       .mode = b->mode,
                                       .from_lsn = b->from_lsn,
                                       .snap_lsn = b->snap_lsn,
                                       .snap_epoch = b->snap_epoch,
                                       .n_history = r->n_hist};
    memcpy(m.u.begin.history, r->hist, r->n_hist * sizeof(*r->hist));
    ps__step(ps, PS_LEARN_TOKEN(b->range_id), &m);
    if (ps__wait_live(ps, w) && ps->writer == NULL) {
        ps__wait_answer(ps, w, RT_EBUSY, NULL);
    }
    rt_log(RT_LOG_INFO,
           "range %" PRIu64 ": %s copy from %s begins (from LSN %" PRIu64
           ", snapshot LSN %" PRIu64 ", epoch %" PRIu64 ")",
           b->range_id, r->keyed ? "keyed" : "full", rt_rpc_conn_peer(conn),
           b->from_lsn, b->snap_lsn, b->epoch);
out:
    if (b != NULL) {
        rt__repl_begin__free_unpacked(b, NULL);
    }
}

void ps_learn_on_abort(struct ps_server *ps,
                       struct rt_rpc_conn *conn,
                       uint64_t id,
                       const uint8_t *body,
                       size_t len)
{
    const uint32_t method = RT__METHOD__REPL_ABORT;
    Rt__ReplAbort *a = rt__repl_abort__unpack(NULL, len, body);
    struct ps__lrecv *r = a ? ps__recv_find(ps, a->range_id) : NULL;
    if (a == NULL) {
        rt_rpc_reply_err(conn, id, method, RT_EINVAL, "bad ReplAbort");
        return;
    }
    if (ps_fence_admit(ps, conn, id, method, a->master_term) != 0) {
        rt__repl_abort__free_unpacked(a, NULL);
        return;
    }
    if (r != NULL && r->epoch <= a->epoch) {
        /* Its chunks are refused from now on; a new REPL_BEGIN starts
         * over (the copy's state stays LEARNING: no copy). */
        struct ps__lwait *w;
        while ((w = ps__wait_find(ps, a->range_id, RT__METHOD__REPL_BEGIN,
                                  RT__METHOD__REPL_SNAP)) != NULL &&
               w->method == RT__METHOD__REPL_SNAP) {
            ps__wait_answer(ps, w, RT_ECANCELED, NULL);
        }
        ps__recv_drop(ps, a->range_id);
        rt_log(RT_LOG_INFO, "range %" PRIu64 ": copy aborted by %s",
               a->range_id, rt_rpc_conn_peer(conn));
    }
    ps_jobs_reply_empty(conn, id, method);
    rt__repl_abort__free_unpacked(a, NULL);
}

static uint32_t ps__snap_crc(Rt__ReplSnap *s)
{
    uint32_t saved = s->crc32c, crc;
    size_t n;
    uint8_t *buf;
    s->crc32c = 0;
    n = rt__repl_snap__get_packed_size(s);
    buf = rt_xmalloc(n ? n : 1);
    rt__repl_snap__pack(s, buf);
    crc = rt_crc32c(0, buf, n);
    free(buf);
    s->crc32c = saved;
    return crc;
}

static int ps__key_in(const struct ps__lrecv *r, const ProtobufCBinaryData *k)
{
    if (k->len == 0 || r->klo.len == 0) {
        return 0; /* every storage key of a range has its table prefix */
    }
    size_t lo = r->klo.len < k->len ? r->klo.len : k->len;
    int c = memcmp(k->data, r->klo.data, lo);
    if (c < 0 || (c == 0 && k->len < r->klo.len)) {
        return 0;
    }
    size_t hi = r->khi.len < k->len ? r->khi.len : k->len;
    c = memcmp(k->data, r->khi.data, hi);
    return c < 0 || (c == 0 && k->len < r->khi.len);
}

static void ps__lwrite_cb(struct ps_job *job)
{
    struct ps__lwrite *lw = container_of(job, struct ps__lwrite, job);
    struct ps_server *ps = lw->ps;
    int status = job->u.write.status;
    if (ps->learn == NULL || ps->learn->stopped) {
        /* ps_learn_stop answered the request */
    } else if (lw->w != NULL && ps__wait_live(ps, lw->w)) {
        if (status != 0) {
            rt_log(RT_LOG_ERROR,
                   "range %" PRIu64 ": copy chunk not written: %s",
                   lw->range_id, rt_strerror(status));
            ps__recv_drop(ps, lw->range_id);
        }
        ps__wait_answer(ps, lw->w, status, NULL);
    } else if (lw->io_id != 0 && status == 0 && !ps->stopping &&
               ps->writer != NULL) {
        ps__copy_done_submit(ps, lw->range_id, lw->io_id, lw->lsn,
                             lw->snap_epoch);
    } else if (lw->io_id != 0 && status != 0) {
        rt_log(RT_LOG_ERROR,
               "range %" PRIu64 ": copy's last chunk not written: %s",
               lw->range_id, rt_strerror(status));
        struct ps__lwait *w =
            ps__wait_find(ps, lw->range_id, RT__METHOD__REPL_SNAP, 0);
        if (w != NULL) {
            ps__wait_answer(ps, w, status, NULL);
        }
        ps__recv_drop(ps, lw->range_id);
    }
    if (lw->msg != NULL) {
        rt__repl_snap__free_unpacked(lw->msg, NULL);
    }
    free(lw);
}

/* A raw write (no LSN) of @msg's entries; @msg is taken. */
static struct ps__lwrite *ps__lwrite_new(struct ps_server *ps,
                                         uint64_t range_id,
                                         Rt__ReplSnap *msg)
{
    struct ps__lwrite *lw =
        rt_xcalloc(1, sizeof(*lw) + (msg->n_kvs + 1) * sizeof(struct ps_kv));
    lw->ps = ps;
    lw->range_id = range_id;
    lw->msg = msg;
    for (size_t i = 0; i < msg->n_kvs; i++) {
        const Rt__KeyValue *kv = msg->kvs[i];
        lw->kvs[i] = (struct ps_kv){kv->key.data, kv->key.len, kv->value.data,
                                    kv->value.len, kv->deleted};
    }
    lw->job.kind = PS_JOB_WRITE;
    lw->job.cb = ps__lwrite_cb;
    lw->job.u.write.kvs = lw->kvs;
    lw->job.u.write.n_kvs = msg->n_kvs;
    lw->job.u.write.failed_index = -1;
    return lw;
}

void ps_learn_on_snap(struct ps_server *ps,
                      struct rt_rpc_conn *conn,
                      uint64_t id,
                      const uint8_t *body,
                      size_t len)
{
    const uint32_t method = RT__METHOD__REPL_SNAP;
    Rt__ReplSnap *s = rt__repl_snap__unpack(NULL, len, body);
    struct ps__lrecv *r = s ? ps__recv_find(ps, s->range_id) : NULL;
    struct ps_rcore_range_info info;
    int code = 0;
    const char *why = NULL;

    if (s == NULL) {
        code = RT_EINVAL, why = "bad ReplSnap";
    } else if (r == NULL) {
        code = RT_EINVAL, why = "no copy begun here for the range";
    } else if (s->epoch != r->epoch) {
        code = s->epoch < r->epoch ? RT_ESTALE : RT_EINVAL;
        why = "another copy's epoch";
    } else if (ps_repl_range_info(ps, s->range_id, &info) != 0 ||
               info.role != PS_RCORE_LEARNER || info.state != PS_RLRN_COPYING) {
        code = RT_EINVAL, why = "the range is not being copied here";
    } else if (s->seq != r->next_seq) {
        code = RT_EINVAL, why = "chunk out of sequence";
    } else if (ps__snap_crc(s) != s->crc32c) {
        code = RT_ECORRUPT, why = "chunk checksum mismatch";
    } else if (ps->writer == NULL) {
        code = RT_EBUSY, why = "stopping";
    }
    for (size_t i = 0; code == 0 && i < s->n_kvs; i++) {
        if (!ps__key_in(r, &s->kvs[i]->key)) {
            code = RT_EINVAL, why = "a key outside the range";
        }
    }
    if (code == 0 && s->last && r->count + s->n_kvs != s->count) {
        code = RT_EINVAL, why = "entry count mismatch";
    }
    if (code != 0) {
        /* Nothing written; the copy is over here (a retry starts with a
         * new REPL_BEGIN). */
        rt_rpc_reply_err(conn, id, method, code, why);
        if (r != NULL && code != RT_ESTALE) {
            rt_log(RT_LOG_WARN, "range %" PRIu64 ": copy chunk %u refused: %s",
                   r->range_id, s->seq, why);
            ps__recv_drop(ps, r->range_id);
        }
        if (s != NULL) {
            rt__repl_snap__free_unpacked(s, NULL);
        }
        return;
    }
    r->next_seq++;
    r->count += s->n_kvs;
    if (!s->last) {
        struct ps__lwrite *lw = ps__lwrite_new(ps, s->range_id, s);
        lw->w = ps__wait_park(ps, conn, id, method, s->range_id);
        ps_writer_submit(ps->writer, &lw->job);
        return;
    }
    /* The last chunk goes with the core's WRITE (SNAP_END). */
    r->last = s;
    struct ps__lwait *w = ps__wait_park(ps, conn, id, method, s->range_id);
    struct rt_repl_msg m = {.kind = RT_REPL_MSG_SNAP_END};
    m.u.begin = (struct rt_repl_begin){.range_id = r->range_id,
                                       .epoch = r->epoch,
                                       .snap_lsn = r->snap_lsn,
                                       .snap_epoch = r->snap_epoch,
                                       .n_history = r->n_hist};
    memcpy(m.u.begin.history, r->hist, r->n_hist * sizeof(*r->hist));
    uint64_t range_id = r->range_id;
    ps__step(ps, PS_LEARN_TOKEN(range_id), &m);
    if (ps__wait_live(ps, w) && ps__recv_find(ps, range_id) == NULL) {
        ps__wait_answer(ps, w, RT_EIO, NULL);
    }
}

/* Persists the learner's rs fields; then (BEGIN) drops the span, or
 * feeds the core the DISK_DONE of its WRITE @io_id. */
static void ps__lstate_submit(struct ps_server *ps,
                              uint64_t range_id,
                              uint64_t io_id,
                              uint64_t lsn,
                              unsigned set,
                              const struct ps_rstate *rs,
                              int drop_after)
{
    struct ps__lstate *j = rt_xcalloc(1, sizeof(*j));
    j->ps = ps;
    j->range_id = range_id;
    j->io_id = io_id;
    j->lsn = lsn;
    j->drop_after = drop_after;
    j->job.kind = PS_JOB_REPL_STATE;
    j->job.cb = ps__lstate_cb;
    j->job.u.rstate.range_id = range_id;
    j->job.u.rstate.set = set;
    j->job.u.rstate.rs = *rs;
    ps_writer_submit(ps->writer, &j->job);
}

static void ps__written(struct ps_server *ps,
                        uint64_t range_id,
                        uint64_t io_id,
                        uint64_t lsn,
                        int status,
                        const char *what)
{
    if (status != 0) {
        rt_log(RT_LOG_ERROR, "range %" PRIu64 ": %s failed: %s", range_id, what,
               rt_strerror(status));
        struct ps__lwait *w = ps__wait_find(
            ps, range_id, RT__METHOD__REPL_BEGIN, RT__METHOD__REPL_SNAP);
        if (w != NULL) {
            ps__wait_answer(ps, w, RT_EIO, NULL);
        }
        ps__recv_drop(ps, range_id);
        return;
    }
    struct rt_repl_event ev = {.kind = RT_REPL_EV_DISK_DONE,
                               .now_ms = uv_now(ps->loop),
                               .io_id = io_id,
                               .range_id = range_id,
                               .lsn = lsn};
    ps_repl_core_step(ps, &ev);
}

struct ps__ldrop
{
    uint64_t range_id, io_id;
};

static void ps__cleared_cb(struct ps_sjob *sj, int status)
{
    struct ps__ldrop *d = sj->arg;
    if (!sj->ps->stopping && sj->ps->learn != NULL && !sj->ps->learn->stopped) {
        ps__written(sj->ps, d->range_id, d->io_id, 0, status,
                    "clearing the range for a copy");
    }
    free(d);
}

static void ps__lstate_cb(struct ps_job *job)
{
    struct ps__lstate *j = container_of(job, struct ps__lstate, job);
    struct ps_server *ps = j->ps;
    if (ps->stopping || ps->writer == NULL || ps->learn == NULL ||
        ps->learn->stopped) {
        free(j);
        return;
    }
    const struct ps__lrecv *r = ps__recv_find(ps, j->range_id);
    if (j->drop_after && job->status == 0 && r != NULL) {
        struct ps_span sp = {r->table_id, r->low, r->high};
        struct ps__ldrop *d = rt_xcalloc(1, sizeof(*d));
        struct ps_sjob *sj = ps__span_drop(ps, ps->span_seq++, &sp);
        d->range_id = j->range_id;
        d->io_id = j->io_id;
        sj->done = ps__cleared_cb;
        sj->arg = d;
        ps_writer_submit(ps->writer, &sj->job);
    } else {
        /* The finished copy's record counts even if the copy was
         * aborted meanwhile: its data was complete. */
        ps__written(ps, j->range_id, j->io_id, j->lsn,
                    r == NULL && job->status == 0 && j->drop_after
                        ? RT_ECANCELED
                        : job->status,
                    j->drop_after ? "persisting LEARNING"
                                  : "recording the finished copy");
    }
    free(j);
}

/* The copy is durable: rs applied = (snap_epoch, s), state OK, in one
 * transaction after the data. */
static void ps__copy_done_submit(struct ps_server *ps,
                                 uint64_t range_id,
                                 uint64_t io_id,
                                 uint64_t snap_lsn,
                                 uint64_t snap_epoch)
{
    struct ps_rstate rs = {.state = PS_RS_OK,
                           .role = PS_RS_ROLE_SECONDARY,
                           .applied_lsn = snap_lsn,
                           .applied_epoch = snap_epoch};
    /* The sender's history up to s becomes mine (§3.3), with the data. */
    const struct ps__lrecv *r = ps__recv_find(ps, range_id);
    for (size_t i = 0; r != NULL && i < r->n_hist && i < PS_RS_MAX_HISTORY;
         i++) {
        rs.hist[i] = (struct ps_rs_gen){r->hist[i].epoch, r->hist[i].first_lsn};
        rs.n_hist = i + 1;
    }
    ps__lstate_submit(ps, range_id, io_id, snap_lsn,
                      PS_RS_SET_STATE | PS_RS_SET_APPLIED | PS_RS_SET_ROLE, &rs,
                      0);
}

/* The core's WRITE of a learner: BEGIN (LEARNING, then clear) or
 * SNAP_END (the last chunk, then rs applied = s, state OK). */
static void ps__learn_write(struct ps_server *ps,
                            const struct rt_repl_action *a)
{
    struct ps__lrecv *r = ps__recv_find(ps, a->range_id);
    if (ps->writer == NULL || r == NULL) {
        return;
    }
    if (a->msg.kind == RT_REPL_MSG_BEGIN) {
        /* LEARNING is durable first: a restart in the middle finds no
         * copy (§3.3), and its next catch-up is a full one, which clears
         * what a keyed one left half-done. */
        struct ps_rstate rs = {.state = PS_RS_LEARNING,
                               .role = PS_RS_ROLE_LEARNER};
        /* The copy replaces what my key log describes: a full one all of
         * it, a keyed one the LSNs after from_lsn. */
        ps_repl_keylog_forget(ps, a->range_id);
        ps__lstate_submit(ps, a->range_id, a->io_id, 0,
                          PS_RS_SET_STATE | PS_RS_SET_APPLIED | PS_RS_SET_ROLE,
                          &rs, a->msg.u.begin.mode != RT_REPL_BEGIN_KEYED);
        return;
    }
    if (r->last != NULL) {
        /* The record follows once the chunk is durable (ps__lwrite_cb). */
        struct ps__lwrite *lw = ps__lwrite_new(ps, a->range_id, r->last);
        lw->io_id = a->io_id;
        lw->lsn = a->msg.u.begin.snap_lsn;
        lw->snap_epoch = a->msg.u.begin.snap_epoch;
        r->last = NULL;
        ps_writer_submit(ps->writer, &lw->job);
        return;
    }
    ps__copy_done_submit(ps, a->range_id, a->io_id, a->msg.u.begin.snap_lsn,
                         a->msg.u.begin.snap_epoch);
}

/* The core's COPY_RESP: the answer to the BEGIN or the last SNAP. */
static void ps__copy_answer(struct ps_server *ps,
                            const struct rt_repl_copy_resp *c)
{
    struct ps__lwait *w = ps__wait_find(ps, c->range_id, RT__METHOD__REPL_BEGIN,
                                        RT__METHOD__REPL_SNAP);
    if (w == NULL) {
        return;
    }
    if (w->method == RT__METHOD__REPL_SNAP && c->code == 0) {
        const struct ps__lrecv *r = ps__recv_find(ps, c->range_id);
        int keyed = r != NULL && r->keyed;
        if (keyed) {
            ps__learn(ps)->keyed_received++;
        } else {
            ps__learn(ps)->received++;
        }
        rt_log(RT_LOG_INFO,
               "range %" PRIu64 ": %s copy received at LSN %" PRIu64,
               c->range_id, keyed ? "keyed" : "full", c->lsn);
    }
    const struct ps__lrecv *r = ps__recv_find(ps, c->range_id);
    if (w->method == RT__METHOD__REPL_BEGIN && c->code == 0 && r != NULL &&
        r->n_own > 0) {
        /* A keyed copy from below my applied LSN: my keys above it. */
        Rt__ReplicaState st = RT__REPLICA_STATE__INIT;
        ProtobufCBinaryData *keys = rt_xcalloc(r->n_own, sizeof(*keys));
        size_t off = 0;
        for (size_t i = 0; i < r->n_own; i++) {
            keys[i].len = rt_get_u32le(r->own.data + off);
            keys[i].data = r->own.data + off + 4;
            off += 4 + keys[i].len;
        }
        st.range_id = c->range_id;
        st.pending_keys = keys;
        st.n_pending_keys = r->n_own;
        ps__wait_answer(ps, w, 0, &st.base);
        free(keys);
        return;
    }
    if (w->method == RT__METHOD__REPL_SNAP || c->code != 0) {
        ps__recv_drop(ps, c->range_id);
    }
    ps__wait_answer(ps, w, c->code, NULL);
}

/* Primary side: full copies */

static void ps__copy_unref(struct ps__lcopy *c)
{
    if (--c->refs > 0) {
        return;
    }
    if (c->snap != NULL) {
        ps_store_snap_close(c->snap);
    }
    rt_buf_free(&c->body);
    rt_buf_free(&c->keybuf);
    rt_buf_free(&c->own);
    free(c->keys);
    free((char *)c->span.low);
    free((char *)c->span.high);
    free(c);
}

/* Takes @c off the list: no more calls, no READ_DONE. */
static void ps__copy_kill(struct ps_server *ps, struct ps__lcopy *c)
{
    struct ps_learn *l = ps__learn(ps);
    for (struct ps__lcopy **pp = &l->copies; *pp != NULL; pp = &(*pp)->next) {
        if (*pp == c) {
            *pp = c->next;
            c->dead = 1;
            ps__copy_unref(c);
            return;
        }
    }
}

/* Ends @c: READ_DONE to the core with s or @code. */
static void ps__copy_end(struct ps__lcopy *c, int code)
{
    struct ps_server *ps = c->ps;
    struct rt_repl_event ev = {.kind = RT_REPL_EV_READ_DONE,
                               .now_ms = uv_now(ps->loop),
                               .io_id = c->io,
                               .range_id = c->range_id,
                               .lsn = c->s,
                               .code = code};
    if (code == 0 && c->keyed) {
        ps__learn(ps)->keyed_done++;
        rt_log(RT_LOG_INFO,
               "range %" PRIu64 ": server %" PRIu64
               ": keyed catch-up from LSN %" PRIu64 " done at LSN %" PRIu64
               ": %" PRIu64 " keys, %" PRIu64 " bytes in %" PRIu64 " ms",
               c->range_id, c->peer, c->from, c->s, c->count, c->bytes,
               uv_now(ps->loop) - c->started_ms);
    } else if (code == 0) {
        ps__learn(ps)->copies_done++;
        rt_log(RT_LOG_INFO,
               "range %" PRIu64 ": full copy to server %" PRIu64
               " done at LSN %" PRIu64 ": %" PRIu64 " entries, %" PRIu64
               " bytes in %" PRIu64 " ms",
               c->range_id, c->peer, c->s, c->count, c->bytes,
               uv_now(ps->loop) - c->started_ms);
    } else {
        rt_log(RT_LOG_WARN,
               "range %" PRIu64 ": %s copy to server %" PRIu64 " failed: %s",
               c->range_id, c->keyed ? "keyed" : "full", c->peer,
               rt_strerror(code));
    }
    c->refs++;
    ps__copy_kill(ps, c);
    if (!ps->stopping) {
        ps_repl_core_step(ps, &ev);
    }
    ps__copy_unref(c);
}

static void ps__copy_next(struct ps__lcopy *c);
static int ps__copy_keys(struct ps__lcopy *c);

/* Threadpool: open the snapshot and read s in it (first), or read the
 * next chunk and pack it (then). */
static void ps__copy_work(uv_work_t *work)
{
    struct ps__lcopy *c = container_of(work, struct ps__lcopy, work);
    struct ps_server *ps = c->ps;
    if (c->fail != 0) {
        c->rc = c->fail;
        return;
    }
    if (c->opened && !c->begun) {
        uv_sleep(PS_LEARN_KEY_WAIT_MS); /* the key log is not at s yet */
        c->rc = 1;
        return;
    }
    if (!c->opened) {
        uint64_t txn_id;
        struct ps_rstate rs;
        c->rc = ps_store_snap_open(ps->store, &c->span, &c->snap, &txn_id);
        if (c->rc == 0) {
            c->rc = ps_store_snap_repl_get(c->snap, c->range_id, &rs);
            if (c->rc == RT_ENOTFOUND) {
                memset(&rs, 0, sizeof(rs));
                c->rc = 0;
            }
            c->s = rs.applied_lsn;
            c->s_epoch = rs.applied_epoch;
        }
        return;
    }
    struct rt_buf recs = RT_BUF_INIT;
    c->n_chunk = c->bytes_chunk = 0;
    if (c->keyed) {
        /* The keys changed since the replica's LSN, at s: values, or
         * tombstones for those deleted since. */
        c->rc = 0;
        while (c->next_key < c->n_keys && c->rc == 0 &&
               c->bytes_chunk < PS_LEARN_CHUNK) {
            c->rc = ps_store_snap_keys(c->snap, &c->keys[c->next_key++], 1,
                                       &recs, &c->bytes_chunk);
            c->n_chunk++;
        }
        if (c->rc == 0 && c->next_key < c->n_keys) {
            c->rc = 1;
        }
    } else {
        c->rc = ps_store_snap_next(c->snap, &recs, PS_LEARN_CHUNK, &c->n_chunk,
                                   &c->bytes_chunk);
    }
    if (c->rc >= 0) {
        Rt__ReplSnap m = RT__REPL_SNAP__INIT;
        struct ps_change ch;
        size_t off = 0, n = 0;
        Rt__KeyValue *kv = rt_xcalloc(c->n_chunk + 1, sizeof(*kv));
        Rt__KeyValue **ptrs = rt_xcalloc(c->n_chunk + 1, sizeof(*ptrs));
        while (n < c->n_chunk &&
               ps_change_next(recs.data, recs.len, &off, &ch) == 1) {
            rt__key_value__init(&kv[n]);
            kv[n].key.data = (uint8_t *)ch.key;
            kv[n].key.len = ch.kn;
            kv[n].value.data = (uint8_t *)ch.val;
            kv[n].value.len = ch.vn;
            kv[n].deleted = ch.deleted;
            ptrs[n] = &kv[n];
            n++;
        }
        m.range_id = c->range_id;
        m.epoch = c->epoch;
        m.seq = c->seq;
        m.last = c->rc == 0;
        m.count = c->count + n;
        m.n_kvs = n;
        m.kvs = ptrs;
        m.crc32c = 0;
        size_t len = rt__repl_snap__get_packed_size(&m);
        uint8_t *buf = rt_xmalloc(len ? len : 1);
        rt__repl_snap__pack(&m, buf);
        m.crc32c = rt_crc32c(0, buf, len);
        free(buf);
        rt_buf_reset(&c->body);
        len = rt__repl_snap__get_packed_size(&m);
        rt__repl_snap__pack(&m, rt_buf_reserve(&c->body, len));
        c->body.len = len;
        c->n_chunk = n;
        free(kv);
        free(ptrs);
    }
    rt_buf_free(&recs);
}

static void ps__last_reply(int status,
                           const uint8_t *body,
                           size_t len,
                           void *arg)
{
    struct ps__lcopy *c = arg;
    (void)body;
    (void)len;
    if (!c->dead) {
        ps__copy_end(c, status); /* 0: the copy is durable there */
    }
    ps__copy_unref(c);
}

/* Sends the last chunk (in @c->body) once every other one was answered
 * ok, so the replica's final record follows all of them; holds a
 * reference for the call. */
static void ps__send_last(struct ps__lcopy *c)
{
    struct rt_rpc_conn *conn = ps_repl_peer_conn(c->ps, c->peer);
    int rc = conn == NULL ? RT_ENOCONN
                          : rt_rpc_call(conn, RT__METHOD__REPL_SNAP,
                                        c->body.data, c->body.len,
                                        PS_LEARN_CALL_MS, ps__last_reply, c);
    if (rc != 0) {
        ps__copy_end(c, rc);
        return;
    }
    c->refs++;
}

static void ps__snap_reply(int status,
                           const uint8_t *body,
                           size_t len,
                           void *arg)
{
    struct ps__lcopy *c = arg;
    (void)body;
    (void)len;
    c->inflight--;
    if (!c->dead) {
        if (status != 0) {
            ps__copy_end(c, status);
        } else if (c->eof && c->inflight == 0) {
            ps__send_last(c);
        } else if (!c->eof && !c->working) {
            ps__copy_next(c);
        }
    }
    ps__copy_unref(c);
}

/* A keyed copy's BEGIN answer may name keys of the replica's own LSNs
 * above from (a suffix I never had, §7.3): they are sent too, at s, so
 * that the replica ends up with exactly my values (or none). Returns 0 or
 * RT_EINVAL (a bad answer: the copy fails, the next one is full). */
static int ps__copy_own_keys(struct ps__lcopy *c,
                             const uint8_t *body,
                             size_t len)
{
    if (!c->keyed || len == 0) {
        return 0;
    }
    Rt__ReplicaState *st = rt__replica_state__unpack(NULL, len, body);
    if (st == NULL || st->range_id != c->range_id) {
        if (st != NULL) {
            rt__replica_state__free_unpacked(st, NULL);
        }
        return RT_EINVAL;
    }
    size_t total = 0;
    for (size_t i = 0; i < st->n_pending_keys; i++) {
        total += st->pending_keys[i].len;
    }
    uint8_t *p = rt_buf_reserve(&c->own, total ? total : 1);
    c->keys = rt_xrealloc(
        c->keys, (c->n_keys + st->n_pending_keys + 1) * sizeof(*c->keys));
    for (size_t i = 0; i < st->n_pending_keys; i++) {
        memcpy(p, st->pending_keys[i].data, st->pending_keys[i].len);
        c->keys[c->n_keys++] =
            (struct ps_fetch_key){p, st->pending_keys[i].len};
        p += st->pending_keys[i].len;
    }
    c->own.len = total;
    rt__replica_state__free_unpacked(st, NULL);
    return 0;
}

static void ps__begin_reply(int status,
                            const uint8_t *body,
                            size_t len,
                            void *arg)
{
    struct ps__lcopy *c = arg;
    if (status == 0 && !c->dead) {
        status = ps__copy_own_keys(c, body, len);
    }
    if (!c->dead) {
        if (status != 0) {
            ps__copy_end(c, status);
        } else {
            ps__copy_next(c);
        }
    }
    ps__copy_unref(c);
}

static void ps__copy_after(uv_work_t *work, int status)
{
    struct ps__lcopy *c = container_of(work, struct ps__lcopy, work);
    struct ps_server *ps = c->ps;
    struct rt_rpc_conn *conn = ps_repl_peer_conn(ps, c->peer);
    ps->work_inflight--;
    c->working = 0;
    if (c->dead) {
        ps__copy_unref(c);
        return;
    }
    if (status != 0 || c->rc < 0 || conn == NULL) {
        ps__copy_end(c, status != 0 ? RT_ECANCELED
                        : c->rc < 0 ? c->rc
                                    : RT_ENOCONN);
        ps__copy_unref(c);
        return;
    }
    int rc;
    if (!c->begun) {
        /* Snapshot open: s is known. */
        c->opened = 1;
        if (c->keyed && ps__copy_keys(c) == 1) {
            ps__copy_next(c); /* polls the key log again */
            ps__copy_unref(c);
            return;
        }
        c->begun = 1;
        Rt__ReplBegin b = RT__REPL_BEGIN__INIT;
        Rt__EpochStart hs[RT_REPL_MAX_HISTORY], *hp[RT_REPL_MAX_HISTORY];
        for (size_t i = 0; i < c->n_hist; i++) {
            rt__epoch_start__init(&hs[i]);
            hs[i].epoch = c->hist[i].epoch;
            hs[i].first_lsn = c->hist[i].first_lsn;
            hp[i] = &hs[i];
        }
        b.range_id = c->range_id;
        b.epoch = c->epoch;
        b.mode = c->keyed ? RT_REPL_BEGIN_KEYED : RT_REPL_BEGIN_FULL;
        b.from_lsn = c->keyed ? c->from : 0;
        b.snap_lsn = c->s;
        b.snap_epoch = c->s_epoch;
        b.history = hp;
        b.n_history = c->n_hist;
        c->rc = 1; /* chunks follow */
        rc = rt_rpc_call_pb(conn, RT__METHOD__REPL_BEGIN, &b.base,
                            PS_LEARN_CALL_MS, ps__begin_reply, c);
    } else {
        c->count += c->n_chunk;
        c->bytes += c->bytes_chunk;
        ps__learn(ps)->copy_bytes += c->bytes_chunk;
        c->seq++;
        if (c->rc == 0) {
            /* The last one waits for the others' answers. */
            c->eof = 1;
            if (c->inflight == 0) {
                ps__send_last(c);
            }
            ps__copy_unref(c);
            return;
        }
        rc = rt_rpc_call(conn, RT__METHOD__REPL_SNAP, c->body.data, c->body.len,
                         PS_LEARN_CALL_MS, ps__snap_reply, c);
        if (rc == 0) {
            /* The call holds the work's reference; the next chunk is
             * read while at most PS_LEARN_WINDOW are out. */
            c->inflight++;
            if (c->inflight < PS_LEARN_WINDOW) {
                ps__copy_next(c);
            }
            return;
        }
    }
    if (rc != 0) {
        ps__copy_end(c, rc);
        ps__copy_unref(c);
    }
    /* else the call holds the work's reference */
}

/* A keyed copy whose snapshot is open at s: takes the keys changed in
 * (from, s] out of the key log. Returns 0 (taken, or the copy is a full
 * one now: the log holds nothing of the range or does not reach back to
 * from, or did not reach s within PS_LEARN_KEY_WAITS polls) or 1 (the
 * log is not at s yet: poll again; the writer's callbacks for the groups
 * up to s are on their way to the loop). */
static int ps__copy_keys(struct ps__lcopy *c)
{
    struct ps_learn *l = ps__learn(c->ps);
    const struct ps_keylog *kl = ps_repl_keylog(c->ps);
    struct ps_keylog_range_info ki;
    struct ps_keylog_keys k = {0};
    const char *why = "no key log";
    int n;
    int known = kl != NULL && ps_keylog_range_get(kl, c->range_id, &ki) == 0;
    if (known && ki.base > c->from) {
        why = "the key log does not reach back";
    } else if (known && c->s >= c->from && ki.last < c->s) {
        if (++c->waits < PS_LEARN_KEY_WAITS) {
            return 1;
        }
        why = "the key log did not reach the snapshot";
    } else if (known && c->s >= c->from) {
        n = ps_keylog_changed(kl, c->range_id, c->from, c->s, &k);
        if (n >= 0) {
            size_t total = 0;
            for (size_t i = 0; i < k.n; i++) {
                total += k.v[i].len;
            }
            uint8_t *p = rt_buf_reserve(&c->keybuf, total ? total : 1);
            c->keys = rt_xcalloc(k.n ? k.n : 1, sizeof(*c->keys));
            for (size_t i = 0; i < k.n; i++) {
                memcpy(p, k.v[i].p, k.v[i].len);
                c->keys[i] = (struct ps_fetch_key){p, k.v[i].len};
                p += k.v[i].len;
            }
            c->keybuf.len = total;
            c->n_keys = k.n;
            ps_keylog_keys_close(&k);
            return 0;
        }
        why = n == RT_ENOTFOUND ? "the key log does not reach back"
                                : rt_strerror(n);
    }
    l->keyed_fallbacks++;
    c->keyed = 0;
    rt_log(RT_LOG_INFO,
           "range %" PRIu64 ": server %" PRIu64
           ": no keyed catch-up from LSN %" PRIu64 " to %" PRIu64
           " (%s): full copy",
           c->range_id, c->peer, c->from, c->s, why);
    return 0;
}

/* Queues the next threadpool step of @c (holding a reference). */
static void ps__copy_next(struct ps__lcopy *c)
{
    struct ps_server *ps = c->ps;
    c->refs++;
    if (ps->stopping ||
        uv_queue_work(ps->loop, &c->work, ps__copy_work, ps__copy_after) != 0) {
        /* The copy stays in the list, silent; the core gives up on it
         * past its window and probes again. */
        c->refs--;
        rt_log(RT_LOG_ERROR, "range %" PRIu64 ": copy work not queued",
               c->range_id);
        return;
    }
    ps->work_inflight++;
    c->working = 1;
}

/* The core's READ: a full copy of range @a->range_id to @a->peer. */
static void ps__copy_start(struct ps_server *ps, const struct rt_repl_action *a)
{
    struct ps_learn *l = ps__learn(ps);
    const struct ps_range *rg = ps_ranges_find(&ps->ranges, a->range_id);
    for (struct ps__lcopy *o = l->copies; o != NULL; o = o->next) {
        if (o->range_id == a->range_id && o->peer == a->peer) {
            ps__copy_kill(ps, o); /* replaced */
            break;
        }
    }
    struct ps__lcopy *c = rt_xcalloc(1, sizeof(*c));
    c->ps = ps;
    c->range_id = a->range_id;
    c->peer = a->peer;
    c->io = a->io_id;
    c->epoch = a->msg.u.begin.epoch;
    c->keyed = a->msg.u.begin.mode == RT_REPL_BEGIN_KEYED;
    c->from = a->msg.u.begin.from_lsn;
    rt_buf_init(&c->keybuf);
    c->n_hist = a->msg.u.begin.n_history;
    memcpy(c->hist, a->msg.u.begin.history, c->n_hist * sizeof(*c->hist));
    c->started_ms = uv_now(ps->loop);
    c->refs = 1;
    rt_buf_init(&c->body);
    c->next = l->copies;
    l->copies = c;
    /* Failures are reported from the after-work: this runs inside the
     * core's dispatch, which must not be stepped again from here. */
    if (rg == NULL) {
        c->fail = RT_ENOTFOUND;
    } else {
        c->span.table_id = rg->table_id;
        c->span.low = rt_xstrdup(rg->low);
        c->span.high = rg->high ? rt_xstrdup(rg->high) : NULL;
    }
    rt_log(RT_LOG_INFO,
           "range %" PRIu64 ": %s copy to server %" PRIu64 " starts",
           a->range_id, c->keyed ? "keyed" : "full", a->peer);
    ps__copy_next(c);
}

/* Primary side: probes */

struct ps__pcall
{
    struct ps_server *ps;
    uint64_t range_id, peer;
};

static void ps__probe_reply(int status,
                            const uint8_t *body,
                            size_t len,
                            void *arg)
{
    struct ps__pcall *pc = arg;
    struct ps_server *ps = pc->ps;
    struct rt_repl_msg m = {.kind = RT_REPL_MSG_PROBE_RESP};
    struct rt_repl_replica_state *rs = &m.u.probe_resp;
    rs->range_id = pc->range_id;
    rs->code = status;
    if (status == 0) {
        Rt__ReplicaState *st = rt__replica_state__unpack(NULL, len, body);
        if (st == NULL || st->n_history > RT_REPL_MAX_HISTORY) {
            rs->code = RT_EINVAL;
        } else {
            rs->epoch = st->epoch;
            rs->state = (enum rt_repl_copy_state)st->state;
            rs->applied_epoch = st->applied_epoch;
            rs->applied_lsn = st->applied_lsn;
            for (size_t i = 0; i < st->n_history; i++) {
                rs->history[i].epoch = st->history[i]->epoch;
                rs->history[i].first_lsn = st->history[i]->first_lsn;
            }
            rs->n_history = st->n_history;
        }
        if (st != NULL) {
            rt__replica_state__free_unpacked(st, NULL);
        }
    }
    if (status != RT_ECANCELED && !ps->stopping) {
        ps__step(ps, pc->peer, &m);
    }
    free(pc);
}

static void ps__probe_send(struct ps_server *ps, const struct rt_repl_action *a)
{
    struct rt_rpc_conn *conn = ps_repl_peer_conn(ps, a->peer);
    Rt__ProbeReq req = RT__PROBE_REQ__INIT;
    struct ps__pcall *pc;
    if (conn == NULL) {
        return; /* probed again later */
    }
    req.range_id = a->msg.u.probe.range_id;
    req.epoch = a->msg.u.probe.epoch;
    pc = rt_xcalloc(1, sizeof(*pc));
    pc->ps = ps;
    pc->range_id = req.range_id;
    pc->peer = a->peer;
    if (rt_rpc_call_pb(conn, RT__METHOD__REPL_PROBE, &req.base,
                       PS_LEARN_CALL_MS, ps__probe_reply, pc) != 0) {
        free(pc);
    }
}

/* Actions */

int ps_learn_action(struct ps_server *ps, const struct rt_repl_action *a)
{
    if (a->kind == RT_REPL_ACT_READ) {
        if (!ps->stopping) {
            ps__copy_start(ps, a);
        }
        return 1;
    }
    if (a->kind == RT_REPL_ACT_WRITE && (a->msg.kind == RT_REPL_MSG_BEGIN ||
                                         a->msg.kind == RT_REPL_MSG_SNAP_END)) {
        ps__learn_write(ps, a);
        return 1;
    }
    if (a->kind != RT_REPL_ACT_SEND) {
        return 0;
    }
    switch (a->msg.kind) {
        case RT_REPL_MSG_PROBE:
            ps__probe_send(ps, a);
            return 1;
        case RT_REPL_MSG_PROBE_RESP:
            ps__probe_answer(ps, &a->msg.u.probe_resp);
            return 1;
        case RT_REPL_MSG_COPY_RESP:
            ps__copy_answer(ps, &a->msg.u.copy_resp);
            return 1;
        default:
            return 0;
    }
}

void ps_learn_stop(struct ps_server *ps)
{
    struct ps_learn *l = ps->learn;
    if (l == NULL || l->stopped) {
        return;
    }
    l->stopped = 1;
    while (l->waits != NULL) {
        ps__wait_answer(ps, l->waits, RT_EBUSY, NULL);
    }
    while (l->copies != NULL) {
        struct ps__lcopy *c = l->copies;
        if (!c->working && c->snap != NULL) {
            /* Closed before the store; a call in flight only frees it. */
            ps_store_snap_close(c->snap);
            c->snap = NULL;
        }
        ps__copy_kill(ps, c);
    }
    while (l->recvs != NULL) {
        ps__recv_drop(ps, l->recvs->range_id);
    }
}

void ps_learn_free(struct ps_server *ps)
{
    ps_learn_stop(ps);
    free(ps->learn);
    ps->learn = NULL;
}

uint64_t ps_learn_received(const struct ps_server *ps)
{
    return ps->learn ? ps->learn->received : 0;
}

uint64_t ps_learn_copies_done(const struct ps_server *ps)
{
    return ps->learn ? ps->learn->copies_done : 0;
}

void ps_learn_metrics(struct ps_server *ps, struct rt_buf *b)
{
    struct ps_learn *l = ps->learn;
    size_t running = 0;
    for (struct ps__lcopy *c = l ? l->copies : NULL; c != NULL; c = c->next) {
        running++;
    }
    rt_buf_printf(b,
                  "# HELP rt_repl_catchups_total Catch-ups of replicas "
                  "outside the ISR finished here, by mode.\n"
                  "# TYPE rt_repl_catchups_total counter\n"
                  "rt_repl_catchups_total{mode=\"full\"} %" PRIu64
                  "\n"
                  "rt_repl_catchups_total{mode=\"keyed\"} %" PRIu64
                  "\n"
                  "# HELP rt_repl_keyed_fallbacks_total Keyed catch-ups "
                  "sent as full copies (the key log did not reach).\n"
                  "# TYPE rt_repl_keyed_fallbacks_total counter\n"
                  "rt_repl_keyed_fallbacks_total %" PRIu64
                  "\n"
                  "# HELP rt_repl_copy_bytes_total Key and value bytes sent "
                  "in full copies.\n"
                  "# TYPE rt_repl_copy_bytes_total counter\n"
                  "rt_repl_copy_bytes_total %" PRIu64
                  "\n"
                  "# HELP rt_repl_copies_running Full copies being sent.\n"
                  "# TYPE rt_repl_copies_running gauge\n"
                  "rt_repl_copies_running %zu\n"
                  "# HELP rt_repl_copies_received_total Full copies "
                  "received and applied here.\n"
                  "# TYPE rt_repl_copies_received_total counter\n"
                  "rt_repl_copies_received_total %" PRIu64 "\n",
                  l ? l->copies_done : 0, l ? l->keyed_done : 0,
                  l ? l->keyed_fallbacks : 0, l ? l->copy_bytes : 0, running,
                  l ? l->received : 0);
}
