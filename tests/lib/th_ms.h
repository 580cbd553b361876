/* Master test fixtures, shared by the tests/unit/test_ms_*.c files:
 *
 * - a temporary data directory for a catalog or a whole master, removed
 *   with the files a master leaves there;
 * - an open catalog in such a directory (test_ms_catalog, test_ms_props);
 * - synchronous RPC on a test's own loop: a call whose reply is captured
 *   (body copied) while the loop turns, and waits bounded in time
 *   (test_ms_rpc, test_ms_move);
 * - a whole master on such a loop, in such a directory, with the clients
 *   that play its partition servers (register, heartbeat) and its front
 *   end (test_ms_rpc, test_ms_move, test_ms_repl), and its operator
 *   requests through the admin bridge. The fake servers' answers to the
 *   master's calls stay each test's own: what they record and assert is
 *   what the test is about.
 *
 * Failures are cmocka assertions: they end the current test. The names
 * carry th_ms_ so that generic helpers (temp dir, RPC capture) can later
 * come to tests/lib without a clash.
 *
 * Thread: the test's thread. The loop is the caller's (borrowed), except
 * in struct th_ms_master, which owns its loop from setup to teardown. */
#ifndef TH_MS_H
#define TH_MS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "ms_admin.h"
#include "ms_catalog.h"
#include "ms_master.h"
#include "ms_status.h"
#include "rt.pb-c.h"
#include "rt_log.h"
#include "rt_rpc.h"

/* ---- temporary directory ---- */

#define TH_MS_DIR_SIZE 64

/* Creates a fresh /tmp/<@prefix>.XXXXXX and writes its path to @dir
 * (TH_MS_DIR_SIZE bytes). Returns 0 or -1. */
int th_ms_dir_create(char *dir, const char *prefix);
/* Removes the files a master leaves in @dir (data.mdb, lock.mdb,
 * master.lock, events.jsonl), then @dir. */
void th_ms_dir_remove(const char *dir);

/* ---- a catalog in a temporary directory ---- */

struct th_ms_cat
{
    char dir[TH_MS_DIR_SIZE];
    struct ms_catalog *cat; /* open between setup and teardown */
};

/* Quiet logging, a fresh directory named after @prefix and the catalog
 * opened in it. Returns 0 or -1 (a cmocka setup's result). */
int th_ms_cat_setup(struct th_ms_cat *c, const char *prefix);
/* Closes the catalog (when open) and opens it again from disk. */
void th_ms_cat_reopen(struct th_ms_cat *c);
/* Closes the catalog and removes the directory. */
void th_ms_cat_teardown(struct th_ms_cat *c);

/* ---- synchronous RPC on a test loop ---- */

/* A reply as rt_rpc delivered it; body is a malloc'd copy (free it). */
struct th_ms_reply
{
    int done;
    int status;
    uint8_t *body;
    size_t len;
};

/* rt_rpc_reply_cb filling the struct th_ms_reply at @arg. */
void th_ms_reply_cb(int status, const uint8_t *body, size_t len, void *arg);

/* Turns @loop until @cond holds or @ms milliseconds pass (a timer on the
 * loop, such as the master's tick, keeps UV_RUN_ONCE from blocking for
 * long), then asserts @cond. */
#define TH_MS_WAIT_UNTIL(loop, ms, cond)             \
    do {                                             \
        uint64_t th_end__ = uv_now(loop) + (ms);     \
        while (!(cond) && uv_now(loop) < th_end__) { \
            uv_run((loop), UV_RUN_ONCE);             \
        }                                            \
        assert_true(cond);                           \
    } while (0)

/* Turns @loop for @ms milliseconds. */
void th_ms_spin(uv_loop_t *loop, uint64_t ms);
/* Waits (at most 5 s) until @c's connection is up. */
void th_ms_wait_up(uv_loop_t *loop, struct rt_rpc_client *c);
/* Calls @method with @msg on @c and turns @loop until the reply (at most
 * 5 s, the call's own timeout). Returns the reply status; the reply is in
 * *@r (free r->body). */
int th_ms_call(uv_loop_t *loop,
               struct rt_rpc_client *c,
               uint32_t method,
               const ProtobufCMessage *msg,
               struct th_ms_reply *r);

/* ---- a master on a test loop ---- */

struct th_ms_master
{
    uv_loop_t loop;
    char dir[TH_MS_DIR_SIZE];
    struct ms_master *m;  /* between start and stop */
    struct ms_status *st; /* between setup and teardown */
    struct ms_admin *adm; /* when started with an admin bridge */
    char addr[64];        /* the master's RPC address, once started */
};

/* Logging at @level, the loop, a fresh directory named after @prefix and
 * the status document. Returns 0 or -1 (a cmocka setup's result). */
int th_ms_master_setup(struct th_ms_master *x,
                       const char *prefix,
                       enum rt_log_level level);
/* Starts a master in x->dir on 127.0.0.1, port 0, with the rest of @cfg
 * (borrowed: data_dir, listen_host and listen_port are set here), the
 * status document and, when @admin, an ms_admin bridge; fills x->addr. */
void th_ms_master_start(struct th_ms_master *x,
                        struct ms_master_config *cfg,
                        bool admin);
/* Stops the master and its admin bridge, turning the loop until it runs
 * dry: close the test's clients first. */
void th_ms_master_stop(struct th_ms_master *x);
/* Stops the master if it runs, turns the loop dry, asserts the loop
 * closes, frees the status document and removes the directory: close the
 * test's clients first. */
void th_ms_master_teardown(struct th_ms_master *x);

/* ---- clients playing a partition server or a front end ---- */

/* Starts an rt_rpc client to the master at @x (its calls to the client go
 * to @on_request with @ud; may be NULL) and waits until it is up. */
struct rt_rpc_client *th_ms_client_start(struct th_ms_master *x,
                                         rt_rpc_request_cb on_request,
                                         void *ud);
/* PS_REGISTER on @cli as server @server_id (0: a new one) at @addr in
 * @zone (may be NULL); asserts success. Returns the unpacked reply: the
 * caller frees it with rt__register_resp__free_unpacked(). */
Rt__RegisterResp *th_ms_ps_register(struct th_ms_master *x,
                                    struct rt_rpc_client *cli,
                                    uint64_t server_id,
                                    const char *addr,
                                    const char *zone);
/* PS_HEARTBEAT @req (borrowed) on @cli; asserts success. Returns the
 * unpacked reply (free it with rt__register_resp__free_unpacked()). */
Rt__RegisterResp *th_ms_ps_heartbeat(struct th_ms_master *x,
                                     struct rt_rpc_client *cli,
                                     const Rt__HeartbeatReq *req);

/* ---- operator requests through the admin bridge ---- */

/* The wake_arg of an ms_admin_req submitted by a test: woken turns 1 when
 * the master has answered (th_ms_admin_wake is the request's wake). */
struct th_ms_admin_wait
{
    int woken;
};
void th_ms_admin_wake(struct ms_admin_req *req);

/* Sends the operator request @kind (@range_id, @server_id, @key, which may
 * be NULL) through x->adm as the HTTP thread would, and turns the loop
 * until the answer (at most 5 s). Returns the HTTP status; *body, when
 * @body is not NULL, is the JSON answer (malloc'd: free it). */
int th_ms_admin(struct th_ms_master *x,
                enum ms_admin_kind kind,
                uint64_t range_id,
                uint64_t server_id,
                const char *key,
                char **body);

#endif
