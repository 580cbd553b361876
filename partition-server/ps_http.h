/* Metrics HTTP listener of the partition server on libmicrohttpd (its own
 * polling thread, poll mode: DESIGN §8): GET /metrics answers the text the
 * loop thread last published (Prometheus text format 0.0.4), GET /health
 * answers "ok"; other paths 404, other methods 405. The handler only
 * copies the published text under its mutex: it never touches the loop
 * thread's state.
 *
 * Thread: start/stop on the loop thread; handlers on MHD's thread. */
#ifndef PS_HTTP_H
#define PS_HTTP_H

#include <uv.h>

struct ps_http;

/* Listens on @addr ("host:port", port 0 = ephemeral). @mu guards @*text
 * (a NUL-terminated page, or NULL before the first one); both are borrowed
 * and must outlive the listener. On 0, *out is the listener and *port its
 * port. Errors: RT_EINVAL (bad address), RT_EIO (cannot listen), with
 * @errmsg (RT_ERRMSG_SIZE bytes) saying why. */
int ps_http_start(const char *addr,
                  uv_mutex_t *mu,
                  char *const *text,
                  struct ps_http **out,
                  int *port,
                  char *errmsg);
/* Stops the thread (waits for it) and frees. NULL is ignored. */
void ps_http_stop(struct ps_http *h);

#endif
