/* HTTP glue for the libmicrohttpd listeners (see rt_http.h). */
#include "rt_http.h"

#include <netinet/in.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "rt_addr.h"
#include "rt_err.h"

int rt_http_sockaddr(const char *host,
                     int port,
                     struct sockaddr_storage *ss,
                     unsigned int *flags)
{
    int rc = rt_addr_ip(host, port, ss, NULL);
    if (rc == 0 && ss->ss_family == AF_INET6) {
        *flags |= MHD_USE_IPv6;
    }
    return rc;
}

enum MHD_Result rt_http_send(struct MHD_Connection *c,
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

bool rt_http_basic(struct MHD_Connection *c,
                   const char *method,
                   const char *url,
                   enum MHD_Result *ret)
{
    if (strcmp(method, MHD_HTTP_METHOD_GET) != 0 &&
        strcmp(method, MHD_HTTP_METHOD_HEAD) != 0) {
        *ret = rt_http_send(c, MHD_HTTP_METHOD_NOT_ALLOWED, "text/plain",
                            "method not allowed\n", false);
        return true;
    }
    if (strcmp(url, "/health") == 0) {
        *ret = rt_http_send(c, MHD_HTTP_OK, "text/plain", "ok", false);
        return true;
    }
    return false;
}
