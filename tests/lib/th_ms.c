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

/* ---- a master on a test loop ---- */

int th_ms_master_setup(struct th_ms_master *x,
                       const char *prefix,
                       enum rt_log_level level)
{
    memset(x, 0, sizeof(*x));
    rt_log_init("test", level);
    uv_loop_init(&x->loop);
    if (th_ms_dir_create(x->dir, prefix) != 0) {
        uv_loop_close(&x->loop);
        return -1;
    }
    x->st = ms_status_create();
    return 0;
}

void th_ms_master_start(struct th_ms_master *x,
                        struct ms_master_config *cfg,
                        bool admin)
{
    char errmsg[RT_ERRMSG_SIZE];
    cfg->data_dir = x->dir;
    cfg->listen_host = "127.0.0.1";
    cfg->listen_port = 0;
    assert_int_equal(ms_master_start(&x->loop, cfg, &x->m, errmsg), 0);
    ms_master_set_status(x->m, x->st);
    if (admin) {
        x->adm = ms_admin_create();
        assert_int_equal(ms_master_set_admin(x->m, x->adm), 0);
    }
    snprintf(x->addr, sizeof(x->addr), "127.0.0.1:%d",
             ms_master_rpc_port(x->m));
}

void th_ms_master_stop(struct th_ms_master *x)
{
    ms_master_stop(x->m);
    uv_run(&x->loop, UV_RUN_DEFAULT);
    ms_master_destroy(x->m);
    ms_admin_destroy(x->adm);
    x->m = NULL;
    x->adm = NULL;
}

void th_ms_master_teardown(struct th_ms_master *x)
{
    if (x->m) {
        th_ms_master_stop(x);
    }
    uv_run(&x->loop, UV_RUN_DEFAULT);
    assert_int_equal(uv_loop_close(&x->loop), 0);
    ms_status_destroy(x->st);
    x->st = NULL;
    th_ms_dir_remove(x->dir);
}

/* ---- clients playing a partition server or a front end ---- */

struct rt_rpc_client *th_ms_client_start(struct th_ms_master *x,
                                         rt_rpc_request_cb on_request,
                                         void *ud)
{
    struct rt_rpc_client *cli = NULL;
    assert_int_equal(
        rt_rpc_client_start(&x->loop, x->addr, on_request, NULL, ud, &cli), 0);
    th_ms_wait_up(&x->loop, cli);
    return cli;
}

Rt__RegisterResp *th_ms_ps_register(struct th_ms_master *x,
                                    struct rt_rpc_client *cli,
                                    uint64_t server_id,
                                    const char *addr,
                                    const char *zone)
{
    Rt__RegisterReq req = RT__REGISTER_REQ__INIT;
    Rt__RegisterResp *resp;
    struct th_ms_reply r;
    req.server_id = server_id;
    req.addr = (char *)addr;
    if (zone != NULL) {
        req.zone = (char *)zone;
    }
    assert_int_equal(
        th_ms_call(&x->loop, cli, RT__METHOD__PS_REGISTER, &req.base, &r), 0);
    resp = rt__register_resp__unpack(NULL, r.len, r.body);
    free(r.body);
    assert_non_null(resp);
    return resp;
}

Rt__RegisterResp *th_ms_ps_heartbeat(struct th_ms_master *x,
                                     struct rt_rpc_client *cli,
                                     const Rt__HeartbeatReq *req)
{
    Rt__RegisterResp *resp;
    struct th_ms_reply r;
    assert_int_equal(
        th_ms_call(&x->loop, cli, RT__METHOD__PS_HEARTBEAT, &req->base, &r), 0);
    resp = rt__register_resp__unpack(NULL, r.len, r.body);
    free(r.body);
    assert_non_null(resp);
    return resp;
}

/* ---- operator requests through the admin bridge ---- */

void th_ms_admin_wake(struct ms_admin_req *req)
{
    ((struct th_ms_admin_wait *)req->wake_arg)->woken = 1;
}

int th_ms_admin(struct th_ms_master *x,
                enum ms_admin_kind kind,
                uint64_t range_id,
                uint64_t server_id,
                const char *key,
                char **body)
{
    struct ms_admin_req *req = ms_admin_req_new(kind);
    struct th_ms_admin_wait w = {0};
    const char *b;
    int status = 0;
    req->range_id = range_id;
    req->server_id = server_id;
    req->key = key ? strdup(key) : NULL;
    req->wake = th_ms_admin_wake;
    req->wake_arg = &w;
    ms_admin_submit(x->adm, req);
    TH_MS_WAIT_UNTIL(&x->loop, TH_MS__CALL_MS, w.woken);
    assert_true(ms_admin_result(x->adm, req, &status, &b));
    if (body) {
        *body = strdup(b);
    }
    ms_admin_release(x->adm, req);
    return status;
}
