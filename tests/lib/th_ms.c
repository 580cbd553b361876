#include "th_ms.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "rt_err.h"
#include "rt_log.h"

#define TH_MS__CALL_MS 5000

/* ---- temporary directory ---- */

int th_ms_dir_create(char *dir, const char *prefix)
{
    snprintf(dir, TH_MS_DIR_SIZE, "/tmp/%s.XXXXXX", prefix);
    return mkdtemp(dir) ? 0 : -1;
}

void th_ms_dir_remove(const char *dir)
{
    static const char *const files[] = {"data.mdb", "lock.mdb", "master.lock",
                                        "events.jsonl"};
    char path[TH_MS_DIR_SIZE + 32];
    for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
        snprintf(path, sizeof(path), "%s/%s", dir, files[i]);
        unlink(path);
    }
    rmdir(dir);
}

/* ---- a catalog in a temporary directory ---- */

int th_ms_cat_setup(struct th_ms_cat *c, const char *prefix)
{
    memset(c, 0, sizeof(*c));
    rt_log_init("test", RT_LOG_WARN);
    if (th_ms_dir_create(c->dir, prefix) != 0) {
        return -1;
    }
    th_ms_cat_reopen(c);
    return 0;
}

void th_ms_cat_reopen(struct th_ms_cat *c)
{
    char errmsg[RT_ERRMSG_SIZE];
    if (c->cat) {
        ms_catalog_close(c->cat);
        c->cat = NULL;
    }
    assert_int_equal(ms_catalog_open(c->dir, &c->cat, errmsg), 0);
}

void th_ms_cat_teardown(struct th_ms_cat *c)
{
    if (c->cat) {
        ms_catalog_close(c->cat);
        c->cat = NULL;
    }
    th_ms_dir_remove(c->dir);
}

/* ---- synchronous RPC on a test loop ---- */

void th_ms_reply_cb(int status, const uint8_t *body, size_t len, void *arg)
{
    struct th_ms_reply *r = arg;
    r->done = 1;
    r->status = status;
    r->len = len;
    r->body = malloc(len ? len : 1);
    assert_non_null(r->body);
    if (len) {
        memcpy(r->body, body, len);
    }
}

void th_ms_spin(uv_loop_t *loop, uint64_t ms)
{
    uint64_t end = uv_now(loop) + ms;
    while (uv_now(loop) < end) {
        uv_run(loop, UV_RUN_ONCE);
    }
}

void th_ms_wait_up(uv_loop_t *loop, struct rt_rpc_client *c)
{
    TH_MS_WAIT_UNTIL(loop, TH_MS__CALL_MS,
                     rt_rpc_conn_is_up(rt_rpc_client_conn(c)));
}

int th_ms_call(uv_loop_t *loop,
               struct rt_rpc_client *c,
               uint32_t method,
               const ProtobufCMessage *msg,
               struct th_ms_reply *r)
{
    memset(r, 0, sizeof(*r));
    assert_int_equal(rt_rpc_call_pb(rt_rpc_client_conn(c), method, msg,
                                    TH_MS__CALL_MS, th_ms_reply_cb, r),
                     0);
    TH_MS_WAIT_UNTIL(loop, TH_MS__CALL_MS, r->done);
    return r->status;
}
