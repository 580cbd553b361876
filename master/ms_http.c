/* Status HTTP API on libmicrohttpd. Poll mode, not epoll: DESIGN §8 notes
 * an epoll stall in 0.9.75. Every handler answers on its first call from a
 * copy of a published document, so nothing here blocks or touches the
 * master's loop state. */
#include "ms_http.h"

#include <arpa/inet.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "ms_status.h"
#include "ms_util.h"
#include "rt_err.h"
#include "rt_log.h"

struct ms_http
{
    struct MHD_Daemon *d;
    struct ms_status *st;
    int port;
};

static enum MHD_Result ms__http_send(struct MHD_Connection *c,
                                     unsigned int status,
                                     const char *ctype,
                                     const char *body,
                                     bool take)
{
    struct MHD_Response *r = MHD_create_response_from_buffer(
        strlen(body), (void *)body,
        take ? MHD_RESPMEM_MUST_FREE : MHD_RESPMEM_PERSISTENT);
    enum MHD_Result ret;
    if (!r) {
        if (take) {
            free((void *)body);
        }
        return MHD_NO;
    }
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, ctype);
    MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
    ret = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    return ret;
}

static enum MHD_Result ms__http_handler(void *cls,
                                        struct MHD_Connection *c,
                                        const char *url,
                                        const char *method,
                                        const char *version,
                                        const char *upload_data,
                                        size_t *upload_data_size,
                                        void **con_cls)
{
    struct ms_http *h = cls;
    enum ms_status_doc doc;
    const char *ctype;
    char *body;
    (void)version;
    (void)upload_data;
    (void)upload_data_size;
    (void)con_cls;

    if (strcmp(method, MHD_HTTP_METHOD_GET) != 0 &&
        strcmp(method, MHD_HTTP_METHOD_HEAD) != 0) {
        return ms__http_send(c, MHD_HTTP_METHOD_NOT_ALLOWED, "text/plain",
                             "method not allowed\n", false);
    }
    if (strcmp(url, "/health") == 0) {
        return ms__http_send(c, MHD_HTTP_OK, "text/plain", "ok", false);
    }
    if (strcmp(url, "/api/status") == 0) {
        doc = MS_STATUS_JSON;
        ctype = "application/json";
    } else if (strcmp(url, "/metrics") == 0) {
        doc = MS_STATUS_METRICS;
        ctype = "text/plain; version=0.0.4";
    } else {
        return ms__http_send(c, MHD_HTTP_NOT_FOUND, "text/plain", "not found\n",
                             false);
    }
    body = ms_status_copy(h->st, doc);
    if (!body) {
        return ms__http_send(c, MHD_HTTP_SERVICE_UNAVAILABLE, "text/plain",
                             "starting\n", false);
    }
    return ms__http_send(c, MHD_HTTP_OK, ctype, body, true);
}

int ms_http_start(const char *host,
                  int port,
                  struct ms_status *st,
                  struct ms_http **out,
                  char *errmsg)
{
    struct sockaddr_storage ss;
    unsigned int flags =
        MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL | MHD_USE_ERROR_LOG;
    const union MHD_DaemonInfo *info;
    struct ms_http *h;

    memset(&ss, 0, sizeof(ss));
    if (!host || !*host || strcmp(host, "localhost") == 0) {
        host = "127.0.0.1";
    }
    if (port < 0 || port > 65535) {
        goto err_addr;
    }
    if (inet_pton(AF_INET, host, &((struct sockaddr_in *)&ss)->sin_addr) == 1) {
        struct sockaddr_in *a = (struct sockaddr_in *)&ss;
        a->sin_family = AF_INET;
        a->sin_port = htons((uint16_t)port);
    } else if (inet_pton(AF_INET6, host,
                         &((struct sockaddr_in6 *)&ss)->sin6_addr) == 1) {
        struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
        a->sin6_family = AF_INET6;
        a->sin6_port = htons((uint16_t)port);
        flags |= MHD_USE_IPv6;
    } else {
        goto err_addr;
    }

    h = ms_xcalloc(1, sizeof(*h));
    h->st = st;
    h->d = MHD_start_daemon(flags, (uint16_t)port, NULL, NULL, ms__http_handler,
                            h, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&ss,
                            MHD_OPTION_CONNECTION_TIMEOUT, (unsigned int)30,
                            MHD_OPTION_END);
    if (!h->d) {
        if (errmsg) {
            rt_errmsg_printf(errmsg, "http: cannot listen on %s:%d", host,
                             port);
        }
        free(h);
        return RT_EIO;
    }
    info = MHD_get_daemon_info(h->d, MHD_DAEMON_INFO_BIND_PORT);
    h->port = info ? info->port : port;
    rt_log(RT_LOG_INFO, "http: status API on %s:%d", host, h->port);
    *out = h;
    return 0;

err_addr:
    if (errmsg) {
        rt_errmsg_printf(errmsg, "http: bad listen address %s:%d", host, port);
    }
    return RT_EINVAL;
}

int ms_http_port(const struct ms_http *h)
{
    return h->port;
}

void ms_http_stop(struct ms_http *h)
{
    if (!h) {
        return;
    }
    MHD_stop_daemon(h->d);
    free(h);
}
