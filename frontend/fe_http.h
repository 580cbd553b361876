/* HTTP server: the libmicrohttpd glue and the share-nothing workers. The
 * only file that knows libmicrohttpd: it turns each connection's request
 * into a struct fe_req (fe_req.h), runs it through fe_api.h and the
 * worker's fe_route, and turns the response back into libmicrohttpd's.
 *
 * Threads: share-nothing workers. Each worker thread runs one libuv loop
 * that owns one libmicrohttpd daemon (external epoll mode, no MHD thread),
 * one fe_route (its own master subscription and partition-server
 * connections) and every request accepted by that daemon, from the first
 * byte to the last. A request never changes threads.
 *
 * Life of a request, all on the worker's loop thread:
 *  0. the connection was admitted under the caps and is timed by phase
 *     (fe_guard.h): request line and headers, body, idle in between.
 *  1. first access-handler call (inside MHD_run): an fe_req taken from the
 *     worker's free list; raw path, decoded query and the header list
 *     captured once; ambiguous Content-Length / Transfer-Encoding -> 400
 *     and close; URL or headers over the limits -> 414 / 400,
 *     Content-Length above --max-body -> 413, at once.
 *  2. body chunks accumulate in req->body (over the limit: discarded,
 *     413 at the end).
 *  3. final call: fe_api_prepare() validates, authenticates and either
 *     fills the response (FE_API_RESPOND) or fills req->job
 *     (FE_API_SUBMIT); an account over its requests in flight gets 503
 *     ServerBusy instead. To submit, the connection is suspended and the job
 *     handed to fe_route_submit() right there: no queue, no wake-up.
 *  4. fe_route runs the job; its done_cb (an RPC reply callback on the
 *     same loop, or synchronously inside the submit) resumes the
 *     connection and asks for an MHD_run at the end of the loop iteration.
 *  5. the handler runs again: fe_api_finish() turns the job into the
 *     response, which is queued.
 *  6. MHD_OPTION_NOTIFY_COMPLETED returns the fe_req to the free list.
 * MHD never completes a suspended connection while the daemon runs, and a
 * worker stops its daemon only after every job has finished (fe_route_close
 * cancels them, 503) and every resumed connection was processed, so no job
 * outlives its request. */
#ifndef FE_HTTP_H
#define FE_HTTP_H

#include <stddef.h>

#include "fe_guard.h"

struct fe_accounts_pub;
struct fe_metrics;
struct fe_tls;

/* Settings the workers read (immutable after start). */
struct fe_http_cfg
{
    const char *listen;       /* "host:port"; NULL or "": no plain HTTP */
    const char *https_listen; /* "host:port"; NULL or "": no HTTPS */
    struct fe_tls *tls;       /* HTTPS certificate at start (borrowed) */
    const char *master; /* rt-master RPC "host:port" (one fe_route each) */
    unsigned threads;   /* workers */
    size_t max_body;
    /* libmicrohttpd's per-connection pool (bytes; 0: FE_HTTP_POOL). A
     * request head that does not fit gets libmicrohttpd's bare 414/431
     * instead of our errors; libmicrohttpd zeroes the whole pool after
     * every keep-alive request (frontend/README.md "the memory pool"). */
    size_t http_pool;
    /* The account table each request takes a reference to when it
     * starts (the main thread may publish a new one at any time). */
    struct fe_accounts_pub *accounts;
    /* Hostile-client bounds and caps (fe_guard.h): connections in total
     * and per address (refused at accept), the reserve shed for new
     * clients, header/body/idle deadlines (over one: 408 when a request
     * was started, else closed), requests in flight per account (503). */
    struct fe_guard_cfg guard;
    /* Worker i records into fe_metrics_shard(metrics, i) (fe_metrics.h;
     * created with cfg->threads shards); NULL: no metrics. */
    struct fe_metrics *metrics;
};

/* Request limits (spec §9 gives none; HTTP.sys, in front of Azure, answers
 * 414 for a long URL and 400 for large headers). The request line and the
 * header block must fit libmicrohttpd's per-connection memory pool to reach
 * our handler at all: what does not fit gets libmicrohttpd's bare 414/431
 * page. The pool holds both limits plus 16 KiB for libmicrohttpd's own
 * needs (header bookkeeping, the response header); it is no larger because
 * libmicrohttpd zeroes the whole pool after every keep-alive request
 * (measured: ~20% of a worker's CPU on point GETs at 112-128 KiB, and the
 * cost grows once the pools of all connections outgrow the L3 cache; see
 * frontend/README.md, "Design notes"). */
#define FE_URL_MAX (32 * 1024)     /* path + query -> 414 InvalidUri */
#define FE_HEADERS_MAX (64 * 1024) /* all header lines -> 400 */
#ifndef FE_HTTP_POOL
#define FE_HTTP_POOL (FE_URL_MAX + FE_HEADERS_MAX + 16 * 1024)
#endif

struct fe_http;
/* Binds cfg->listen and cfg->https_listen (one socket each, shared by
 * every worker), then starts cfg->threads workers, each with its own
 * libuv loop, fe_route (connecting to cfg->master) and one libmicrohttpd
 * daemon per listener in external epoll mode (the HTTPS one does TLS 1.2+
 * with cfg->tls). Both listeners behave the same; a request knows which
 * one it came on (fe_req.tls). @cfg is borrowed for the server's life.
 * Returns 0, RT_ECONFIG (no listener, cannot listen, HTTPS without a
 * certificate or without TLS in libmicrohttpd: message logged) or
 * RT_EINVAL (bad --master address); on error nothing is left running and
 * *out is NULL. */
int fe_http_start(const struct fe_http_cfg *cfg, struct fe_http **out);
/* The bound ports (0: that listener is off). */
int fe_http_port(const struct fe_http *h);
int fe_http_tls_port(const struct fe_http *h);
/* [the thread that started it] Puts certificate @tls (taken) in service
 * for new HTTPS connections, without dropping any: each worker starts a
 * new daemon with it on the same listen socket and retires the old one,
 * which serves the connections it has until they end. A worker whose
 * libmicrohttpd refuses @tls logs it and keeps the old certificate.
 * Returns 0, 1 when @tls holds the same certificate and key as before
 * (workers already serving it change nothing), or RT_ECONFIG when HTTPS
 * is off or the server is stopping. */
int fe_http_reload_tls(struct fe_http *h, struct fe_tls *tls);

/* True once every worker has installed a partition map from the master
 * (the first GET_MAP or subscription answer): the front end can route.
 * Any thread. */
int fe_http_maps_ready(const struct fe_http *h);
/* [any thread] Asks every worker to stop: it stops accepting, cancels the
 * jobs in flight (503 ServerBusy), answers new requests 503, flushes
 * (bounded by FE_HTTP_DRAIN_MS) and ends its loop. Idempotent. */
#define FE_HTTP_DRAIN_MS 2000
void fe_http_stop(struct fe_http *h);
/* [the thread that started it] Waits for the workers (call fe_http_stop
 * first, or this waits until they stop), stops libmicrohttpd and frees. */
void fe_http_destroy(struct fe_http *h);

#endif
