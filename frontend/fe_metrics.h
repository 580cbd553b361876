/* Front-end metrics: what the Table API served, per account, operation
 * and status, and what the front end asked of the cluster (RPC latency to
 * each partition server, RPC errors, master calls, map version), exposed
 * in the Prometheus text format on a status listener of its own
 * (`--http`: GET /metrics, GET /health), never on the Table API port,
 * where a table may well be called "metrics".
 *
 * Threads: each fe_http worker writes only its own shard
 * (fe_metrics_shard), from its loop thread, with single-writer counters
 * (common/rt_metrics.h): no lock and no shared cache line on the request
 * path. The listener's thread (libmicrohttpd's) sums every shard at each
 * scrape. The label sets are bounded: `account` is one of the accounts
 * configured when the front end started (at most FE_METRICS_ACCOUNTS;
 * a request for any other name, or none, counts as "_other", which no
 * Azure account name can be), `operation` one of FE_METRICS_OPS, `status`
 * one of FE_METRICS_CODES ("other" for the rest), `server` one of the
 * first FE_METRICS_SERVERS partition server ids a worker talked to
 * ("other" after that).
 *
 * Ownership: fe_metrics_create copies the account names; the shards live
 * until fe_metrics_destroy, which must come after every worker stopped. */
#ifndef FE_METRICS_H
#define FE_METRICS_H

#include <stddef.h>
#include <stdint.h>

struct fe_accounts;
struct fe_metrics;
struct fe_metrics_shard;

#define FE_METRICS_ACCOUNTS 64
#define FE_METRICS_SERVERS 64

/* Operation label values: the Table API operation names (fe_api.c), with
 * Insert Or Replace / Insert Or Merge told apart from Update / Merge the
 * way Azure's own metrics (ApiName) do, which also count a request
 * refused by authentication under its operation; "Preflight" for a CORS
 * OPTIONS; "Unknown" for a request refused before its operation was
 * known (malformed, unknown resource). */
#define FE_METRICS_OPS(X)                         \
    X(QUERY_TABLES, "QueryTables")                \
    X(CREATE_TABLE, "CreateTable")                \
    X(DELETE_TABLE, "DeleteTable")                \
    X(GET_TABLE, "GetTable")                      \
    X(QUERY_ENTITIES, "QueryEntities")            \
    X(INSERT_ENTITY, "InsertEntity")              \
    X(GET_ENTITY, "GetEntity")                    \
    X(UPDATE_ENTITY, "UpdateEntity")              \
    X(INSERT_OR_REPLACE, "InsertOrReplaceEntity") \
    X(MERGE_ENTITY, "MergeEntity")                \
    X(INSERT_OR_MERGE, "InsertOrMergeEntity")     \
    X(DELETE_ENTITY, "DeleteEntity")              \
    X(BATCH, "EntityGroupTransaction")            \
    X(GET_ACL, "GetTableAcl")                     \
    X(SET_ACL, "SetTableAcl")                     \
    X(GET_PROPS, "GetServiceProperties")          \
    X(SET_PROPS, "SetServiceProperties")          \
    X(STATS, "GetServiceStats")                   \
    X(PREFLIGHT, "Preflight")                     \
    X(UNKNOWN, "Unknown")

#define FE_METRICS__OP_ENUM(e, s) FE_MOP_##e,
enum fe_metrics_op { FE_METRICS_OPS(FE_METRICS__OP_ENUM) FE_MOP__NR };

/* The status codes the front end answers with, each its own `status`
 * label value. */
#define FE_METRICS_CODES                                                       \
    200, 201, 202, 204, 206, 304, 400, 401, 403, 404, 405, 408, 409, 411, 412, \
        413, 414, 415, 416, 429, 431, 500, 501, 503, 504, 505

/* Why an RPC to a partition server failed (rt_fe_ps_rpc_errors_total). */
enum fe_metrics_rpc_err {
    FE_MRPC_TIMEOUT,  /* no reply in time (RT_ETIMEDOUT) */
    FE_MRPC_CONN,     /* connection dropped with it out (RT_ENOCONN) */
    FE_MRPC_NOTSENT,  /* never written (RT_ENOTSENT) */
    FE_MRPC_BUSY,     /* the server was throttling (RT_EBUSY) */
    FE_MRPC_STALE,    /* wrong server for the range (ESTALE, ENOTPRIMARY) */
    FE_MRPC_CANCELED, /* the front end was stopping (RT_ECANCELED) */
    FE_MRPC_OTHER,    /* any other error answered */
    FE_MRPC__NR
};

/* What a master call was for (rt_fe_master_calls_total{call}). */
enum fe_metrics_master {
    FE_MMASTER_TABLE,   /* CREATE_TABLE / DELETE_TABLE */
    FE_MMASTER_LIST,    /* LIST_TABLES */
    FE_MMASTER_CALL,    /* a service call (properties, ACLs, stats) */
    FE_MMASTER_GET_MAP, /* GET_MAP (a table missing from the map) */
    FE_MMASTER__NR
};

/* Allocates @nshards shards and the label tables; the account names are
 * copied from @accounts (the first FE_METRICS_ACCOUNTS). Never fails
 * (allocation failure aborts, rt_alloc). */
struct fe_metrics *fe_metrics_create(const struct fe_accounts *accounts,
                                     unsigned nshards);
/* Stops the listener if it runs and frees everything. NULL is a no-op. */
void fe_metrics_destroy(struct fe_metrics *m);
/* Starts the status listener on @addr ("host:port", port 0 ephemeral):
 * GET/HEAD /metrics and /health, 405 for other methods, 404 elsewhere.
 * *@port_out gets the port bound. Returns 0, RT_EINVAL (bad address) or
 * RT_EIO (cannot listen), with a message in @errmsg (RT_ERRMSG_SIZE). */
int fe_metrics_listen(struct fe_metrics *m,
                      const char *addr,
                      int *port_out,
                      char *errmsg);
/* Worker @i's shard (i < nshards); valid until fe_metrics_destroy. */
struct fe_metrics_shard *fe_metrics_shard(struct fe_metrics *m, unsigned i);
/* [any thread] Appends the whole exposition to @b (what /metrics
 * answers; struct rt_buf from rt_buf.h). */
struct rt_buf;
void fe_metrics_write(struct fe_metrics *m, struct rt_buf *b);

/* ---- Writers: the shard's worker thread only. A NULL shard is a no-op
 * (a route or request without metrics, as in the unit tests). ---- */

/* A connection was accepted (@open 1) or closed (0). */
void fe_metrics_conn(struct fe_metrics_shard *s, int open);
/* A request began (its headers arrived) / ended (libmicrohttpd is done
 * with it, answered or not). */
void fe_metrics_req_begin(struct fe_metrics_shard *s);
void fe_metrics_req_end(struct fe_metrics_shard *s);
/* A response with HTTP @status was queued @us microseconds after the
 * request's headers arrived: counts it for @account (the request's
 * account name, NULL when none was parsed), operation @op and @status,
 * with @in request body bytes and @out response body bytes. */
void fe_metrics_req_done(struct fe_metrics_shard *s,
                         const char *account,
                         enum fe_metrics_op op,
                         int status,
                         uint64_t in,
                         uint64_t out,
                         uint64_t us);
/* An RPC to partition server @server_id ended with @status (0 or RT_E*)
 * after @us microseconds (the reply or its failure arrived). */
void fe_metrics_rpc(struct fe_metrics_shard *s,
                    uint64_t server_id,
                    int status,
                    uint64_t us);
/* A master call of @kind ended with @status after @us microseconds. */
void fe_metrics_master(struct fe_metrics_shard *s,
                       enum fe_metrics_master kind,
                       int status,
                       uint64_t us);
/* The worker installed map @version. */
void fe_metrics_map_version(struct fe_metrics_shard *s, uint64_t version);

/* The operation label of a request routed to Table API operation
 * @op_name (fe_api_op_name; NULL: none chosen) with HTTP @method, which
 * sent an If-Match header (@if_match 1) or not. Pure. */
enum fe_metrics_op fe_metrics_op_of(const char *op_name,
                                    const char *method,
                                    int if_match);

#endif
