/* HTTP glue shared by the master's status API (master/ms_http.c), the
 * partition server's metrics listener (partition-server/ps_http.c) and the
 * front end's (frontend/fe_metrics.c), all plain libmicrohttpd daemons.
 * Thread: any; the functions keep no state. The front end's Table API
 * (frontend/fe_http.c) has its own response path and does not use this
 * module. */
#ifndef RT_HTTP_H
#define RT_HTTP_H

#include <microhttpd.h>
#include <stdbool.h>
#include <sys/socket.h>

/* rt_addr_ip (common/rt_addr.h: numeric address or "localhost"), and
 * MHD_USE_IPv6 ORed into *@flags for an IPv6 address. Returns 0 or
 * RT_EINVAL. */
int rt_http_sockaddr(const char *host,
                     int port,
                     struct sockaddr_storage *ss,
                     unsigned int *flags);

/* Queues a complete response on @c: @body (NUL-terminated) with
 * Content-Type @ctype and Cache-Control: no-store. With @take, @body is
 * heap memory that becomes libmicrohttpd's (or is freed here on failure);
 * without it, @body must outlive the response (a literal). Returns the
 * MHD_Result to hand back from the access handler: MHD_NO on failure. */
enum MHD_Result rt_http_send(struct MHD_Connection *c,
                             unsigned int status,
                             const char *ctype,
                             const char *body,
                             bool take);

/* What every read-only listener answers the same way: a method other
 * than GET or HEAD gets 405, GET /health gets 200 "ok". Returns true when
 * it queued the answer (*@ret is then the handler's result), false when
 * the request is the caller's to serve. */
bool rt_http_basic(struct MHD_Connection *c,
                   const char *method,
                   const char *url,
                   enum MHD_Result *ret);

#endif
