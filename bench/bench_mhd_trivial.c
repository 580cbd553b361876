/* bench_mhd_trivial: the libmicrohttpd limit on this machine. A trivial
 * handler answers every request with the same 200 and a ~1 KiB JSON body
 * (keep-alive), in libmicrohttpd's fastest simple configuration: its own
 * epoll threads (MHD_USE_EPOLL_INTERNAL_THREAD | MHD_USE_TURBO, a pool of
 * --threads, default 2 = one per core). No libuv, no suspend/resume, no
 * back end: what an HTTP request through libmicrohttpd costs at least.
 * bench/bench-point drives it with wrk and prints rangetable's point GET
 * against it.
 *
 * Contract: listens on --listen (default 127.0.0.1:0), writes "http=PORT"
 * to --port-file once it accepts, serves until SIGTERM or SIGINT, then
 * prints "served N" to stderr and exits 0. Exits 1 when libmicrohttpd does
 * not start. It measures nothing itself and asserts nothing.
 *
 * Every request gets the same response object (created once, body
 * persistent: libmicrohttpd only references it), queued on the handler's
 * second call as rt-frontend does (a response queued on the first call
 * makes libmicrohttpd close the connection). So the handler costs
 * nothing beyond the HTTP parsing and the send. */
#include <arpa/inet.h>
#include <microhttpd.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt_addr.h"
#include "rt_config.h"

static struct
{
    char *listen, *port_file;
    long threads, body_bytes;
} O;

static struct rt_opt opts[] = {
    {"listen", RT_OPT_STR, &O.listen, "127.0.0.1:0", "HOST:PORT to listen on"},
    {"port-file", RT_OPT_STR, &O.port_file, "",
     "write \"http=PORT\" here once listening"},
    {"threads", RT_OPT_INT, &O.threads, "2",
     "libmicrohttpd's epoll threads (MHD_OPTION_THREAD_POOL_SIZE)"},
    {"body-bytes", RT_OPT_INT, &O.body_bytes, "1024",
     "size of the JSON body of every answer"},
    {NULL, 0, NULL, NULL, NULL},
};

static struct MHD_Response *resp;
static atomic_ulong served;

static enum MHD_Result on_request(void *cls,
                                  struct MHD_Connection *conn,
                                  const char *url,
                                  const char *method,
                                  const char *version,
                                  const char *upload_data,
                                  size_t *upload_size,
                                  void **con_cls)
{
    (void)cls;
    (void)url;
    (void)method;
    (void)version;
    (void)upload_data;
    /* The first call only marks the request: libmicrohttpd 0.9.75 closes
     * the connection after a response queued in the first call (the body
     * could still be unread), and a limit without keep-alive would
     * measure connection set-up. A body (none here) is read and dropped;
     * the answer goes out on the call that ends the request. */
    if (!*con_cls) {
        *con_cls = &served;
        return MHD_YES;
    }
    if (*upload_size) {
        *upload_size = 0;
        return MHD_YES;
    }
    atomic_fetch_add_explicit(&served, 1, memory_order_relaxed);
    return MHD_queue_response(conn, MHD_HTTP_OK, resp);
}

/* A JSON object of about @n bytes, shaped like an entity's answer. */
static char *make_body(size_t n)
{
    static const char head[] =
        "{\"odata.metadata\":\"http://127.0.0.1/devstoreaccount1/"
        "$metadata#t/@Element\",\"PartitionKey\":\"p\",\"RowKey\":\"r\","
        "\"Data\":\"";
    static const char tail[] = "\"}";
    size_t fixed = sizeof(head) - 1 + sizeof(tail) - 1;
    size_t pad = n > fixed ? n - fixed : 0;
    char *b = malloc(fixed + pad + 1);
    if (!b) {
        return NULL;
    }
    memcpy(b, head, sizeof(head) - 1);
    memset(b + sizeof(head) - 1, 'x', pad);
    memcpy(b + sizeof(head) - 1 + pad, tail, sizeof(tail));
    return b;
}

int main(int argc, char **argv)
{
    struct sockaddr_storage ss;
    struct MHD_Daemon *d;
    const union MHD_DaemonInfo *info;
    sigset_t set;
    char *body;
    int sig = 0;

    rt_config_parse("bench_mhd_trivial",
                    "The libmicrohttpd limit: a fixed 200 with a ~1 KiB JSON "
                    "body from MHD's own epoll threads.",
                    opts, argc, argv, NULL, 0);
    if (rt_addr_parse(O.listen, &ss, NULL) != 0) {
        fprintf(stderr, "bench_mhd_trivial: bad --listen %s\n", O.listen);
        return 2;
    }
    body = make_body((size_t)(O.body_bytes > 0 ? O.body_bytes : 0));
    if (!body) {
        return 1;
    }
    resp = MHD_create_response_from_buffer(strlen(body), body,
                                           MHD_RESPMEM_PERSISTENT);
    if (!resp) {
        return 1;
    }
    MHD_add_response_header(resp, "Content-Type",
                            "application/json;odata=minimalmetadata");
    /* The workers inherit the mask: only the main thread takes SIGTERM. */
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    d = MHD_start_daemon(MHD_USE_EPOLL_INTERNAL_THREAD | MHD_USE_TURBO |
                             MHD_USE_ERROR_LOG |
                             (ss.ss_family == AF_INET6 ? MHD_USE_IPv6 : 0),
                         0, NULL, NULL, on_request, NULL, MHD_OPTION_SOCK_ADDR,
                         (struct sockaddr *)&ss, MHD_OPTION_THREAD_POOL_SIZE,
                         (unsigned)(O.threads > 1 ? O.threads : 1),
                         MHD_OPTION_CONNECTION_TIMEOUT, 60u, MHD_OPTION_END);
    if (!d) {
        fprintf(stderr, "bench_mhd_trivial: libmicrohttpd did not start\n");
        return 1;
    }
    info = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
    if (O.port_file[0]) {
        const char *k = "http";
        int port = info ? info->port : 0;
        if (rt_write_port_file(O.port_file, &k, &port, 1) != 0) {
            fprintf(stderr, "bench_mhd_trivial: cannot write %s\n",
                    O.port_file);
            MHD_stop_daemon(d);
            return 1;
        }
    }
    sigwait(&set, &sig);
    MHD_stop_daemon(d);
    MHD_destroy_response(resp);
    free(body);
    fprintf(stderr, "bench_mhd_trivial: served %lu\n",
            (unsigned long)atomic_load(&served));
    rt_config_free(opts);
    return 0;
}
