/* Master test fixtures, shared by the tests/unit/test_ms_*.c files:
 *
 * - a temporary data directory for a catalog or a whole master, removed
 *   with the files a master leaves there;
 * - an open catalog in such a directory (test_ms_catalog, test_ms_props);
 * - synchronous RPC on a test's own loop: a call whose reply is captured
 *   (body copied) while the loop turns, and waits bounded in time
 *   (test_ms_rpc, test_ms_move).
 *
 * Failures are cmocka assertions: they end the current test. The names
 * carry th_ms_ so that generic helpers (temp dir, RPC capture) can later
 * come to tests/lib without a clash.
 *
 * Thread: the test's thread; the loop is the caller's (borrowed). */
#ifndef TH_MS_H
#define TH_MS_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "ms_catalog.h"
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

#endif
