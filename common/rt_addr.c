#include "rt_addr.h"

#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "rt_err.h"

int rt_addr_split(const char *addr, char *host, size_t hostlen, int *port)
{
    const char *c = addr ? strrchr(addr, ':') : NULL;
    const char *h = addr;
    size_t hl;
    char *end;
    long p;

    if (!c || c == addr || c[1] == '\0') {
        return RT_EINVAL;
    }
    hl = (size_t)(c - addr);
    if (hl >= 2 && addr[0] == '[' && addr[hl - 1] == ']') {
        h = addr + 1;
        hl -= 2;
    }
    p = strtol(c + 1, &end, 10);
    if (*end || c[1] < '0' || c[1] > '9' || p < 0 || p > 65535 ||
        hl >= hostlen) {
        return RT_EINVAL;
    }
    memcpy(host, h, hl);
    host[hl] = '\0';
    *port = (int)p;
    return 0;
}

int rt_addr_ip(const char *host,
               int port,
               struct sockaddr_storage *ss,
               socklen_t *len)
{
    memset(ss, 0, sizeof(*ss));
    if (port < 0 || port > 65535) {
        return RT_EINVAL;
    }
    if (host[0] == '\0' || strcmp(host, "localhost") == 0) {
        host = "127.0.0.1";
    }
    /* libuv's parsers: inet_pton, plus "%scope" on IPv6 link-local. */
    if (uv_ip4_addr(host, port, (struct sockaddr_in *)ss) == 0) {
        if (len) {
            *len = sizeof(struct sockaddr_in);
        }
        return 0;
    }
    if (uv_ip6_addr(host, port, (struct sockaddr_in6 *)ss) == 0) {
        if (len) {
            *len = sizeof(struct sockaddr_in6);
        }
        return 0;
    }
    memset(ss, 0, sizeof(*ss));
    return RT_EINVAL;
}

int rt_addr_parse(const char *addr, struct sockaddr_storage *ss, socklen_t *len)
{
    char host[256];
    int port;
    if (rt_addr_split(addr, host, sizeof(host), &port) != 0) {
        return RT_EINVAL;
    }
    return rt_addr_ip(host, port, ss, len);
}

bool rt_addr_name_valid(const char *host)
{
    size_t n = host ? strlen(host) : 0, label = 0;
    bool alpha = false;

    if (n > 0 && host[n - 1] == '.') {
        n--; /* fully qualified: "rt-m1.internal." */
    }
    if (n == 0 || n > 253) {
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        char c = host[i];
        if (c == '.') {
            if (label == 0 || host[i - 1] == '-') {
                return false;
            }
            label = 0;
            continue;
        }
        if (c == '-') {
            if (label == 0) {
                return false;
            }
        } else if ((c < 'a' || c > 'z') && (c < 'A' || c > 'Z') &&
                   (c < '0' || c > '9')) {
            return false;
        }
        alpha = alpha || (c < '0' || c > '9');
        if (++label > 63) {
            return false;
        }
    }
    return label > 0 && host[n - 1] != '-' && alpha;
}

int rt_addr_dial_check(const char *addr,
                       struct sockaddr_storage *ss,
                       int *numeric)
{
    struct sockaddr_storage tmp;
    char host[256];
    int port;

    if (rt_addr_split(addr, host, sizeof(host), &port) != 0 || port == 0) {
        return RT_EINVAL;
    }
    if (rt_addr_ip(host, port, ss ? ss : &tmp, NULL) == 0) {
        if (numeric) {
            *numeric = 1;
        }
        return 0;
    }
    if (!rt_addr_name_valid(host)) {
        return RT_EINVAL;
    }
    if (numeric) {
        *numeric = 0;
    }
    return 0;
}
