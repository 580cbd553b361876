#include "th_rpc.h"

#include <string.h>

#include "rt_err.h"

int th_run_until(uv_loop_t *loop, const int *flag, uint64_t timeout_ms)
{
    uint64_t end;

    uv_update_time(loop);
    end = uv_now(loop) + timeout_ms;
    while (!*flag) {
        uv_run(loop, UV_RUN_ONCE);
        uv_update_time(loop);
        if (!*flag && uv_now(loop) >= end) {
            return RT_ETIMEDOUT;
        }
    }
    return 0;
}

void th_rpc_conn_cb(struct rt_rpc_conn *conn, int up, void *ud)
{
    int *flag = ud;
    (void)conn;
    *flag = up;
}

int th_rpc_connect(uv_loop_t *loop,
                   const char *addr,
                   int *up,
                   uint64_t timeout_ms,
                   struct rt_rpc_client **out)
{
    int rc;

    *up = 0;
    rc = rt_rpc_client_start(loop, addr, NULL, th_rpc_conn_cb, up, out);
    if (rc != 0) {
        *out = NULL;
        return rc;
    }
    return th_run_until(loop, up, timeout_ms);
}

void th_reply_init(struct th_reply *r)
{
    memset(r, 0, sizeof(*r));
    rt_buf_init(&r->body);
}

void th_reply_free(struct th_reply *r)
{
    rt_buf_free(&r->body);
}

void th_rpc_reply_cb(int status, const uint8_t *body, size_t len, void *arg)
{
    struct th_reply *r = arg;
    r->status = status;
    rt_buf_append(&r->body, body, len);
    r->done = 1;
}

int th_rpc_call_async(struct rt_rpc_conn *conn,
                      uint32_t method,
                      const ProtobufCMessage *msg,
                      uint32_t timeout_ms,
                      struct th_reply *r)
{
    th_reply_init(r);
    return rt_rpc_call_pb(conn, method, msg, timeout_ms, th_rpc_reply_cb, r);
}

int th_rpc_call(uv_loop_t *loop,
                struct rt_rpc_conn *conn,
                uint32_t method,
                const ProtobufCMessage *msg,
                uint32_t timeout_ms,
                struct th_reply *r)
{
    int rc = th_rpc_call_async(conn, method, msg, timeout_ms, r);

    if (rc != 0) {
        return rc;
    }
    /* The call's own timer fires at @timeout_ms; a little more here only
     * guards against a reply that never comes at all. */
    rc = th_run_until(loop, &r->done, (uint64_t)timeout_ms + 1000);
    return rc != 0 ? rc : r->status;
}

void th_rpc_multi_cb(int status, const uint8_t *body, size_t len, void *arg)
{
    struct th_multi *m = arg;
    (void)body;
    (void)len;
    if (status == 0) {
        m->ok++;
    } else if (status == RT_EBUSY) {
        m->busy++;
    } else {
        m->other++;
    }
    if (--m->outstanding == 0) {
        m->all_done = 1;
    }
}
