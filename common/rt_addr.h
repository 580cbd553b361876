/* Network addresses as rangetable's flags write them: "host:port" or
 * "[v6]:port". A listener's host is a numeric IPv4 or IPv6 address or
 * "localhost". An address others dial (--master, --advertise, the
 * addresses a master publishes) may also be a DNS name
 * (rt_addr_name_valid): the RPC client resolves it asynchronously before
 * each connection attempt, so a daemon never hangs on DNS at start and
 * follows a name that moves to another host.
 * One rule for every listener and client: the RPC layer, the front end's
 * HTTP socket, the status and metrics listeners and the tools.
 * Thread: any; no state. */
#ifndef RT_ADDR_H
#define RT_ADDR_H

#include <stdbool.h>
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

/* True when @host is a DNS host name as RFC 1123 §2.1 allows it: at most
 * 253 bytes of dot-separated labels, each 1..63 bytes of [A-Za-z0-9-] not
 * starting or ending with '-', and not all digits and dots (that is an
 * IPv4 address, numeric or malformed). A trailing dot is accepted. */
bool rt_addr_name_valid(const char *host);

/* An address to dial: "host:port" with a port of 1..65535 and a host that
 * is numeric (rt_addr_ip) or a valid name. *@numeric (optional) says which;
 * when numeric, *@ss (optional) gets the address. Returns 0 or RT_EINVAL. */
int rt_addr_dial_check(const char *addr,
                       struct sockaddr_storage *ss,
                       int *numeric);

#endif
