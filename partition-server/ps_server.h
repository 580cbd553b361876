/* Server: one partition server process — the libuv loop thread with its
 * RPC listener (front ends) and master link, the writer thread, the store
 * and the set of owned ranges (struct ps_server, ps_state.h). ps_main.c
 * only parses flags and runs it.
 *
 * Thread: everything here runs on the loop thread, except the writer
 * thread's work inside ps_writer/ps_store.
 *
 * Lifecycle: ps_server_start(); uv_run(); on a signal ps_server_stop(),
 * which lets the loop run dry; after uv_run returns, ps_server_close(). */
#ifndef PS_SERVER_H
#define PS_SERVER_H

#include <uv.h>

#include "ps_state.h"

/* Opens the store, restores server id and ranges from its meta, starts the
 * writer, listens, writes the port file and starts the master link.
 * Returns 0, or an error with ps->errmsg set; on error call
 * ps_server_stop(), run the loop, then ps_server_close(). */
int ps_server_start(struct ps_server *ps,
                    uv_loop_t *loop,
                    const struct ps_config *cfg);
/* Stops everything: the master link, then the writer (queued writes finish
 * and are answered), then the listener. Idempotent. */
void ps_server_stop(struct ps_server *ps);
/* After the loop has run dry (or once the handles are closed: it runs the
 * loop until every threadpool request is back): frees ranges and closes
 * the store. */
void ps_server_close(struct ps_server *ps);

#endif
