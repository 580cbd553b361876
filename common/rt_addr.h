/* Network addresses as rangetable's flags write them: "host:port" or
 * "[v6]:port", where host is a numeric IPv4 or IPv6 address or
 * "localhost" (no name lookup: a daemon must not hang on DNS at start).
 * One rule for every listener and client: the RPC layer, the front end's
 * HTTP socket, the status and metrics listeners and the tools.
 * Thread: any; no state. */
#ifndef RT_ADDR_H
#define RT_ADDR_H

#include <stddef.h>
#include <sys/socket.h>

/* Splits @addr at its last ':' into @host (size @hostlen; the brackets of
 * "[v6]" removed) and @port (decimal, 0..65535). Returns 0, or RT_EINVAL
 * for no ':', an empty host or port, or a host that does not fit. */
int rt_addr_split(const char *addr, char *host, size_t hostlen, int *port);

/* Fills *@ss (zeroed first) with @host and @port; "localhost" and "" mean
 * 127.0.0.1. *@len (optional) gets the size of the filled address.
 * Returns 0, or RT_EINVAL when @host is not numeric or @port is outside
 * 0..65535. */
int rt_addr_ip(const char *host,
               int port,
               struct sockaddr_storage *ss,
               socklen_t *len);

/* rt_addr_split then rt_addr_ip. */
int rt_addr_parse(const char *addr,
                  struct sockaddr_storage *ss,
                  socklen_t *len);

#endif
