/* Status HTTP API of rt-master on libmicrohttpd (internal polling thread,
 * poll mode): GET /health, GET /api/status, GET /metrics; anything else is
 * 404, other methods 405. Handlers only copy documents out of an ms_status;
 * they never touch the loop thread's state.
 *
 * Thread: start/stop from the main thread; handlers run on MHD's thread. */
#ifndef MS_HTTP_H
#define MS_HTTP_H

struct ms_http;
struct ms_status;

/* Listens on @host:@port (port 0 = ephemeral). @st is borrowed and must
 * outlive the server. Returns 0 or RT_EINVAL (bad host) / RT_EIO (bind or
 * start failed); @errmsg (RT_ERRMSG_SIZE bytes) says why. */
int ms_http_start(const char *host,
                  int port,
                  struct ms_status *st,
                  struct ms_http **out,
                  char *errmsg);
int ms_http_port(const struct ms_http *h);
/* Stops the thread and frees. Safe with NULL. */
void ms_http_stop(struct ms_http *h);

#endif
