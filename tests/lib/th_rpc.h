/* Test helpers for RPC over a real loop: turning the loop until a flag
 * is set, a client that records whether it is connected, calls whose
 * reply is captured (one at a time, or many counted by outcome).
 *
 * Thread: the test's loop thread only. Nothing here asserts: every
 * function returns a status for the test to check, so any test framework
 * (or none) can use it. */
#ifndef TH_RPC_H
#define TH_RPC_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "rt_buf.h"
#include "rt_rpc.h"

/* Runs @loop (UV_RUN_ONCE at a time) until *@flag is non-zero. Returns 0,
 * or RT_ETIMEDOUT once @timeout_ms of loop time have passed first. */
int th_run_until(uv_loop_t *loop, const int *flag, uint64_t timeout_ms);

/* Connection state of a client: th_rpc_conn_cb is an rt_rpc_conn_cb
 * whose @ud is an int, set to @up on every change. */
void th_rpc_conn_cb(struct rt_rpc_conn *conn, int up, void *ud);

/* Starts an rt_rpc_client to @addr (no request handler; *@up follows its
 * connection through th_rpc_conn_cb) and runs @loop until it is up.
 * Returns 0 with *@out set (close it with rt_rpc_client_close), the
 * error of rt_rpc_client_start, or RT_ETIMEDOUT (*@out is still set). */
int th_rpc_connect(uv_loop_t *loop,
                   const char *addr,
                   int *up,
                   uint64_t timeout_ms,
                   struct rt_rpc_client **out);

/* One call's reply: status and a copy of the body. */
struct th_reply
{
    int done; /* set by th_rpc_reply_cb */
    int status;
    struct rt_buf body;
};
/* Initializes @r for a new call (an uninitialized struct is fine; a
 * body left from an earlier call must have been freed). */
void th_reply_init(struct th_reply *r);
/* Frees the body; @r may then be initialized again. */
void th_reply_free(struct th_reply *r);
/* An rt_rpc_reply_cb; @arg is a struct th_reply. */
void th_rpc_reply_cb(int status, const uint8_t *body, size_t len, void *arg);

/* Sends @msg (NULL = empty body) and returns at once: th_reply_init(@r),
 * then @r is filled when the reply (or the timeout) comes. Returns 0 or
 * the error of rt_rpc_call_pb (then nothing will be filled). */
int th_rpc_call_async(struct rt_rpc_conn *conn,
                      uint32_t method,
                      const ProtobufCMessage *msg,
                      uint32_t timeout_ms,
                      struct th_reply *r);
/* Sends @msg, runs @loop until the reply is in @r and returns its status
 * (the reply body stays in r->body), or the error of sending, or
 * RT_ETIMEDOUT when no reply came within @timeout_ms. */
int th_rpc_call(uv_loop_t *loop,
                struct rt_rpc_conn *conn,
                uint32_t method,
                const ProtobufCMessage *msg,
                uint32_t timeout_ms,
                struct th_reply *r);

/* Many calls out at once: count one in @outstanding per call sent with
 * th_rpc_multi_cb as callback (@arg a struct th_multi); each reply
 * counts its outcome and all_done is set when the last is back. */
struct th_multi
{
    int outstanding;
    int ok;    /* status 0 */
    int busy;  /* RT_EBUSY */
    int other; /* any other status */
    int all_done;
};
void th_rpc_multi_cb(int status, const uint8_t *body, size_t len, void *arg);

#endif
