/* Admin requests: the bridge that carries an operator's action (POST
 * /api/split, /api/merge, /api/move, /api/drain) from the HTTP thread to
 * the master's loop thread and its answer back.
 *
 * The HTTP thread fills an ms_admin_req, suspends its connection and calls
 * ms_admin_submit(); the loop takes requests from the queue (an uv_async
 * wakes it, sends coalesce so it drains the whole queue), carries them out
 * — a move can take minutes — and calls ms_admin_complete() with an HTTP
 * status and a JSON body, which calls the request's wake() hook (the HTTP
 * side resumes its connection there). The HTTP side calls
 * ms_admin_release() when it no longer needs the request (response sent,
 * or connection gone).
 *
 * Ownership: a request is shared by the two sides, each holding a
 * reference; the last ms_admin_release() / ms_admin_complete() frees it.
 * Everything in a request is guarded by the bridge's mutex.
 *
 * Thread: submit/release/result from the HTTP thread; attach/detach/
 * complete from the loop thread; create/destroy from main when neither
 * runs. */
#ifndef MS_ADMIN_H
#define MS_ADMIN_H

#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "rt_rpc.h"

enum ms_admin_kind {
    MS_ADMIN_SPLIT,
    MS_ADMIN_MERGE,
    MS_ADMIN_MOVE,
    MS_ADMIN_DRAIN,
    MS_ADMIN_TRANSFER, /* primaryship of a replicated range */
    /* Masters (ms_node.c): server_id is the master's id; key the new
     * member's raft address (add); transfer with id 0 lets Raft pick. */
    MS_ADMIN_MASTER_ADD,
    MS_ADMIN_MASTER_REMOVE,
    MS_ADMIN_MASTER_TRANSFER,
    /* Load traces (ms_trace_rec.h): key is the trace name (may be NULL). */
    MS_ADMIN_TRACE_START,
    MS_ADMIN_TRACE_STOP,
    MS_ADMIN__NR
};

struct ms_admin_req
{
    /* Filled by the HTTP side before submit, read-only afterwards. */
    enum ms_admin_kind kind;
    uint64_t range_id;
    uint64_t server_id; /* move / transfer target, drain server */
    char *key;          /* split key, NULL = load median (freed with req) */
    bool cancel;        /* drain: stop draining */
    void (*wake)(struct ms_admin_req *req); /* called by complete(), from
                                             * the loop thread, lock not
                                             * held */
    void *wake_arg;

    /* Private (bridge mutex). */
    unsigned refs;
    bool done;
    int http_status;
    char *body; /* JSON text, malloc'd */
    struct ms_admin_req *next;
};

struct ms_admin;

/* Called on the loop thread for each request taken from the queue; it
 * must end, now or later, in ms_admin_complete(). */
typedef void (*ms_admin_cb)(struct ms_admin_req *req, void *arg);

struct ms_admin *ms_admin_create(void);
/* After detach and once the HTTP side is stopped. Frees queued requests. */
void ms_admin_destroy(struct ms_admin *adm);

/* Loop side: starts taking requests on @loop. Returns 0 or a libuv error. */
int ms_admin_attach(struct ms_admin *adm,
                    uv_loop_t *loop,
                    ms_admin_cb cb,
                    void *arg);
/* Loop side: stops taking requests (queued and later ones are completed
 * with 503 "master is stopping") and closes the async handle. */
void ms_admin_detach(struct ms_admin *adm);

/* HTTP side: a new request with one reference (the HTTP side's). */
struct ms_admin_req *ms_admin_req_new(enum ms_admin_kind kind);
/* HTTP side: queues @req (takes a second reference for the loop side).
 * When no loop is attached it is completed at once with 503 (and wake
 * runs on this thread). */
void ms_admin_submit(struct ms_admin *adm, struct ms_admin_req *req);
/* HTTP side: true when completed; then *status and *body (borrowed,
 * valid until release) hold the answer. */
bool ms_admin_result(struct ms_admin *adm,
                     struct ms_admin_req *req,
                     int *status,
                     const char **body);
/* Drops a reference (either side's). */
void ms_admin_release(struct ms_admin *adm, struct ms_admin_req *req);

/* Loop side: the answer (@body taken, may be NULL). Drops the loop's
 * reference; call exactly once per request handed to the callback. With
 * a gate set, the answer is held (in order) until the gate's have()
 * reaches its need() at this call: an operator never sees the outcome
 * of a catalog change the master's Raft log has not committed
 * (docs/DESIGN-master-ha.md §2.7). */
void ms_admin_complete(struct ms_admin *adm,
                       struct ms_admin_req *req,
                       int http_status,
                       char *body);

/* Loop side: sets (or with NULL removes, releasing what is held) the
 * output gate of ms_admin_complete(). */
void ms_admin_set_gate(struct ms_admin *adm, const struct rt_rpc_gate *g);
/* Loop side: completes the held answers the gate now lets through. */
void ms_admin_gate_release(struct ms_admin *adm);

#endif
