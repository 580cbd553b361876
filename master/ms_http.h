/* Status and admin HTTP API of rt-master on libmicrohttpd (internal polling
 * thread, poll mode):
 *   GET  /               the dashboard (self-contained HTML + JS)
 *   GET  /health, /api/status, /api/history, /metrics   published documents
 *   GET  /api/events?since=SEQ&since_ms=MS&limit=N      the event log
 *   POST /api/split?range=ID[&key=PK], /api/merge?range=ID,
 *        /api/move?range=ID&server=ID, /api/drain?server=ID[&cancel=1]
 *        (arguments also as a JSON object body) -> the master's loop via
 *        ms_admin; the connection is suspended until the answer.
 * Access (ms_auth.h), checked on the first call of a request, before a
 * follower's 307 to the leader: /health and the page are open; the
 * documents need "Authorization: Bearer TOKEN" unless --status-open; the
 * POSTs always need it and refuse another Origin or Sec-Fetch-Site:
 * cross-site (401 without a token, 403 otherwise). No CORS: OPTIONS is
 * 405 and no Access-Control-Allow-* header is ever sent.
 * Anything else is 404, other methods 405. GET handlers only copy
 * documents (ms_status, ms_events), never touching loop-thread state.
 *
 * Thread: start/stop from the main thread; handlers run on MHD's thread. */
#ifndef MS_HTTP_H
#define MS_HTTP_H

struct ms_admin;
struct ms_auth;
struct ms_events;
struct ms_http;
struct ms_status;

/* Listens on @host:@port (port 0 = ephemeral). @st, @events, @admin
 * (those two may be NULL) and @auth (who may ask what, see ms_auth.h) are
 * borrowed and must outlive the server. Returns
 * 0 or RT_EINVAL (bad host) / RT_EIO (bind or start failed); @errmsg
 * (RT_ERRMSG_SIZE bytes) says why. */
int ms_http_start(const char *host,
                  int port,
                  struct ms_status *st,
                  struct ms_events *events,
                  struct ms_admin *admin,
                  struct ms_auth *auth,
                  struct ms_http **out,
                  char *errmsg);
int ms_http_port(const struct ms_http *h);
/* GET /api/trace and the trace metrics read @rec (borrowed; set before
 * requests come, it must outlive ms_http_stop; NULL: 404 / none). */
struct ms_trace_rec;
void ms_http_set_trace(struct ms_http *h, struct ms_trace_rec *rec);
/* Stops the thread and frees. Safe with NULL. */
void ms_http_stop(struct ms_http *h);

#endif
