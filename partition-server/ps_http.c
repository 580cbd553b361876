/* Metrics HTTP listener (see ps_http.h). Modelled on master/ms_http.c. */
#include "ps_http.h"

#include <microhttpd.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "rt_addr.h"
#include "rt_err.h"
#include "rt_http.h"
#include "rt_log.h"

struct ps_http
{
    struct MHD_Daemon *d;
    uv_mutex_t *mu;
    char *const *text;
};

static enum MHD_Result ps__http_handler(void *cls,
                                        struct MHD_Connection *c,
                                        const char *url,
                                        const char *method,
                                        const char *version,
                                        const char *upload_data,
                                        size_t *upload_data_size,
                                        void **con_cls)
{
    struct ps_http *h = cls;
    char *body = NULL;
    enum MHD_Result ret;
    (void)version;
    (void)upload_data;
    (void)upload_data_size;
    (void)con_cls;

    if (rt_http_basic(c, method, url, &ret)) {
        return ret;
    }
    if (strcmp(url, "/metrics") != 0) {
        return rt_http_send(c, MHD_HTTP_NOT_FOUND, "text/plain",
                            (char *)"not found\n", false);
    }
    uv_mutex_lock(h->mu);
    if (*h->text) {
        body = strdup(*h->text);
    }
    uv_mutex_unlock(h->mu);
    if (!body) {
        return rt_http_send(c, MHD_HTTP_SERVICE_UNAVAILABLE, "text/plain",
                            (char *)"starting\n", false);
    }
    return rt_http_send(c, MHD_HTTP_OK, "text/plain; version=0.0.4", body,
                        true);
}

int ps_http_start(const char *addr,
                  uv_mutex_t *mu,
                  char *const *text,
                  struct ps_http **out,
                  int *port_out,
                  char *errmsg)
{
    struct sockaddr_storage ss;
    unsigned int flags =
        MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL | MHD_USE_ERROR_LOG;
    const union MHD_DaemonInfo *info;
    struct ps_http *h;
    char host[256];
    int port;

    if (rt_addr_split(addr, host, sizeof(host), &port) != 0) {
        rt_errmsg_printf(errmsg, "bad --http address '%s'", addr);
        return RT_EINVAL;
    }
    if (rt_http_sockaddr(host, port, &ss, &flags) != 0) {
        rt_errmsg_printf(errmsg, "bad --http host '%s'", host);
        return RT_EINVAL;
    }
    h = calloc(1, sizeof(*h));
    if (!h) {
        rt_errmsg_printf(errmsg, "out of memory");
        return RT_ENOMEM;
    }
    h->mu = mu;
    h->text = text;
    h->d = MHD_start_daemon(flags, (uint16_t)port, NULL, NULL, ps__http_handler,
                            h, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&ss,
                            MHD_OPTION_CONNECTION_TIMEOUT, (unsigned int)30,
                            MHD_OPTION_END);
    if (!h->d) {
        rt_errmsg_printf(errmsg, "http: cannot listen on %s", addr);
        free(h);
        return RT_EIO;
    }
    info = MHD_get_daemon_info(h->d, MHD_DAEMON_INFO_BIND_PORT);
    *port_out = info ? info->port : port;
    rt_log(RT_LOG_INFO, "http: metrics on %s:%d", host, *port_out);
    *out = h;
    return 0;
}

void ps_http_stop(struct ps_http *h)
{
    if (!h) {
        return;
    }
    MHD_stop_daemon(h->d);
    free(h);
}
