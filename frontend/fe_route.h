/* Routing: the front end's view of the cluster and every RPC it sends.
 *
 * fe_route keeps the partition map (tables, ranges, servers) received from
 * the master (FE_HELLO on every connect, MAP_UPDATE pushes, GET_MAP on
 * demand), one link to the acting master (rt_masters_link: it follows
 * the leader among several) and one rt_rpc_client per partition server
 * (created lazily, keyed by server id; the address follows the map).
 * A struct fe_job describes one client operation; fe_route_submit() runs it
 * to completion: it resolves account+table to a table id and the key to a
 * range, sends the RPC(s) (waiting up to FE_ROUTE_CONNECT_WAIT_MS for a
 * server connection that is not up yet), follows a scan across ranges
 * (docs/DESIGN.md §2), copies the replies into the job and fires
 * job->done_cb exactly once.
 *
 * Retries (DESIGN-replication.md §4, §5.5): only a request the server
 * refused before executing it (RT_ESTALE, RT_ENOTPRIMARY), one that was
 * never sent (RT_ENOTSENT, or no server/connection for its range), or a
 * read whose connection dropped (RT_ENOCONN) is sent again: after
 * FE_ROUTE_WAIT1_MS, then FE_ROUTE_WAIT2_MS, each time with a refreshed
 * map; FE_ROUTE_TRIES sends in all, then RT_EBUSY (503 ServerBusy). A
 * write whose connection dropped after it was sent is RT_ETIMEDOUT (500
 * OperationTimedOut, outcome unknown), never resent; so is a write with
 * no reply in FE_ROUTE_TIMEOUT_MS (a read that timed out is sent again).
 * A server's RT_EBUSY is returned at once (503 ServerBusy, which the SDKs
 * retry after their own back-off).
 *
 * A map that names another server (or none) for the key of a request in
 * flight (failover, move) takes the request off the old server at once,
 * which may be stopped or cut off and never answer: a read or scan hop
 * is sent to the new owner (one of its tries), a write ends RT_ETIMEDOUT
 * (the old primary may have applied it), and the old server's late reply
 * is dropped (DESIGN-replication.md §4).
 *
 * Thread: the thread running @loop only (rt_rpc is loop-thread only).
 * Each fe_http worker has its own loop and its own fe_route; it submits
 * from its libmicrohttpd callbacks on that same thread.
 *
 * Ownership: the job (and its inputs) belong to the caller and must stay
 * valid until done_cb. Outputs are owned by the job (fe_job_free releases
 * them). done_cb may run before fe_route_submit() returns. */
#ifndef FE_ROUTE_H
#define FE_ROUTE_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "rt_buf.h"
#include "rt_err.h"

#define FE_ROUTE_TRIES 3
/* Waits before the second and the third try (loop timers, not sleeps). */
#define FE_ROUTE_WAIT1_MS 100
#define FE_ROUTE_WAIT2_MS 300
/* No reply to an RPC in this long: a read is tried again, a write is 500
 * OperationTimedOut. Three tries and both waits (~15.4 s) stay inside the
 * 30 s an Azure table operation may take, so the client hears from us
 * before it gives up on its own. */
#define FE_ROUTE_TIMEOUT_MS 5000
/* A query page visits at most this many ranges before it answers with a
 * continuation token (keeps one page's latency bounded). */
#define FE_ROUTE_MAX_HOPS 32
#define FE_PAGE_MAX 1000
/* Time one query page may spend across all the ranges it visits (spec
 * §6.4: "~5 s"); when it is used up the page ends with a continuation. */
#define FE_PAGE_BUDGET_MS 5000
/* A job for a server whose connection is not up (new client, reconnect)
 * waits this long for it before counting as a try never sent. */
#define FE_ROUTE_CONNECT_WAIT_MS 300

enum fe_job_kind {
    FE_JOB_CREATE_TABLE, /* master CREATE_TABLE */
    FE_JOB_DELETE_TABLE, /* master DELETE_TABLE */
    FE_JOB_LIST_TABLES,  /* master LIST_TABLES */
    FE_JOB_GET_TABLE,    /* resolve from the map (GET_MAP on a miss) */
    FE_JOB_WRITE,        /* ENTITY_WRITE to the owner of the PK */
    FE_JOB_GET,          /* ENTITY_GET */
    FE_JOB_SCAN,         /* ENTITY_SCAN, following ranges */
    FE_JOB_MASTER_CALL,  /* any master method (fe_svc): call_* -> value */
    FE_JOB__NR
};

/* One entity operation of a write (proto EntityOp). */
struct fe_job_op
{
    int kind; /* Rt__OpKind */
    char *pk; /* malloc'd, NUL-free */
    char *rk;
    struct rt_buf props; /* properties blob (common/rt_entity.h) */
    int if_match_any;
    uint64_t if_match; /* ticks, 0 = no condition */
    /* result */
    int code;
    uint64_t ticks;
    struct rt_buf value; /* stored value if the server echoed it */
};

/* One scanned entity (copied out of the reply). pk, rk and value share
 * one malloc'd block that starts at pk: free(pk) releases all three, and
 * rk and value are never freed on their own. */
struct fe_job_ent
{
    char *pk;
    char *rk;
    uint8_t *value; /* vlen bytes, not terminated */
    size_t vlen;
};

/* One listed table. */
struct fe_job_table
{
    char *name; /* as created */
    uint64_t id;
};

struct fe_job;
typedef void (*fe_job_cb)(struct fe_job *job);

struct fe_job
{
    enum fe_job_kind kind;
    /* Inputs (borrowed until done_cb). */
    const char *reqid; /* the client's request id, sent with every RPC the
                        * job makes, retries included; NULL = none */
    const char *account;
    const char *table; /* any case */
    /* WRITE: ops (owned by the job, see fe_job_add_op) */
    struct fe_job_op *ops;
    size_t nops;
    int atomic;
    /* GET: key; SCAN: start key when has_start */
    const char *pk;
    const char *rk;
    int has_start;
    unsigned limit;            /* SCAN, LIST_TABLES */
    const char *const *select; /* SCAN */
    size_t nselect;
    /* SCAN: the $filter and the PartitionKey bounds derived from it
     * (rt_filter_bounds). The scan starts at max(start key, scan_lo) and
     * does not follow ranges that begin after scan_hi. */
    const uint8_t *filter; /* rt_filter_encode() form; NULL = none */
    size_t filter_len;
    const char *scan_lo;    /* NULL = unbounded */
    const char *scan_hi;    /* inclusive; NULL = unbounded */
    int scan_empty;         /* nothing can match: resolve the table only */
    unsigned budget_ms;     /* page budget; 0 = FE_PAGE_BUDGET_MS */
    const char *list_start; /* LIST_TABLES: lower-case name, "" = first */
    /* MASTER_CALL (fe_svc.c): method and packed request body (borrowed);
     * the reply body lands in value. */
    uint32_t call_method;
    const uint8_t *call_body;
    size_t call_len;

    /* Outputs. */
    int status; /* 0 or RT_E* */
    int fail_index;
    char *table_name; /* resolved name as created (malloc'd) */
    uint64_t table_id;
    struct rt_buf value;     /* GET: stored value */
    struct fe_job_ent *ents; /* SCAN */
    size_t nents;
    size_t ents_cap;
    int has_next; /* SCAN: continuation */
    struct rt_buf next_pk;
    struct rt_buf next_rk;
    struct fe_job_table *tables; /* LIST_TABLES, CREATE_TABLE */
    size_t ntables;
    char *next_table; /* LIST_TABLES: lower-case next name, NULL = done */

    fe_job_cb done_cb;
    void *data; /* the caller's */

    /* Private to fe_route. */
    struct fe_route *route_;
    struct fe_job *wait_next_;
    int tries_;
    int refreshed_;
    int hops_;
    int finished_;
    struct rt_buf cur_pk_; /* SCAN cursor */
    struct rt_buf cur_rk_;
    int cur_has_;
    uint64_t park_until_; /* loop ms: waiting for a connection until */
    uint64_t retry_at_;   /* loop ms: the next try is due */
    uint64_t deadline_;   /* SCAN: loop ms when the page budget ends */
    uint64_t sent_us_;    /* master call: when it was sent (metrics) */
};

void fe_job_init(struct fe_job *job, enum fe_job_kind kind);
/* Frees ops and outputs (not the borrowed inputs). */
void fe_job_free(struct fe_job *job);
/* Appends an op (pk/rk copied; the caller fills props etc.). */
struct fe_job_op *fe_job_add_op(struct fe_job *job,
                                int kind,
                                const char *pk,
                                const char *rk);

struct fe_route;

/* Starts connecting to the master at @master_addr ("host:port", or the
 * comma-separated addresses of several masters: the route follows their
 * leader, rt_masters.h). Returns 0 or RT_EINVAL (bad address). */
int fe_route_create(uv_loop_t *loop,
                    const char *master_addr,
                    struct fe_route **out);
/* Closes every RPC client: jobs in flight finish with RT_ECANCELED (their
 * done_cb fires), later submits finish with RT_ECANCELED at once. */
void fe_route_close(struct fe_route *r);
/* Frees the router. Call after fe_route_close() once the loop has run to
 * completion (uv_run returned: no callback can reach the router again). */
void fe_route_destroy(struct fe_route *r);
/* Runs @job (see the module comment). */
void fe_route_submit(struct fe_route *r, struct fe_job *job);
/* Called on the loop after each map @r installs (@map borrowed for the
 * call), with the @data given to fe_route_on_map. */
struct Rt__Map;
typedef void (*fe_route_map_cb)(const struct Rt__Map *map, void *data);
/* Registers the one map observer (NULL: none). Call before the loop runs,
 * so that no map is missed. The front end feeds its stored-policy and CORS
 * snapshots this way (fe_http.c), so the router knows nothing of them. */
void fe_route_on_map(struct fe_route *r, fe_route_map_cb cb, void *data);
/* Records this route's RPC latencies, errors and master calls in @s
 * (borrowed; it must outlive the route). NULL (the default): none. */
struct fe_metrics_shard;
void fe_route_set_metrics(struct fe_route *r, struct fe_metrics_shard *s);
/* Current map version (0 = no map yet). */
uint64_t fe_route_map_version(const struct fe_route *r);

#endif
