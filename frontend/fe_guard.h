/* Guard: the front end's rules against hostile clients, apart from the
 * libmicrohttpd glue (fe_http.c) so that they can be unit-tested.
 *
 *  - Framing (RFC 9112 §6.3): fe_guard_framing_*() judge a request's
 *    Content-Length and Transfer-Encoding headers before its body is read.
 *    A message whose length two parsers could read differently (the
 *    request-smuggling shapes) is refused: 400 and the connection closed.
 *  - Deadlines: fe_guard_deadline() says by when a connection in a given
 *    phase must have moved on (headers arrived, body arrived, next request
 *    started).
 *  - Connection list (struct fe_guard_list): one per worker, oldest first;
 *    the worker's timer sweeps it against the deadlines and, near the
 *    connection cap, it names the connection to shed.
 *  - Counters shared by every worker (struct fe_guard): connections in
 *    total and per client address, requests in flight per account.
 *
 * Threads: fe_guard_framing_*, fe_guard_deadline: pure, any thread. A
 * struct fe_guard_list belongs to one worker's loop thread. struct
 * fe_guard: any thread (one mutex, held for a hash lookup). */
#ifndef FE_GUARD_H
#define FE_GUARD_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

/* Settings (immutable once the server runs). A zero bound or cap means
 * none. */
struct fe_guard_cfg
{
    unsigned max_conns;        /* connections, all workers together */
    unsigned max_conns_per_ip; /* connections from one client address */
    unsigned reserve;          /* above max_conns - reserve, each new connection
                                * sheds one that has not sent a whole request */
    unsigned max_inflight_per_account; /* requests running per account */
    uint64_t header_timeout_ms;        /* request line + headers */
    uint64_t body_timeout_ms; /* body, plus 1 s per body_min_rate bytes */
    uint64_t body_min_rate;   /* bytes/s */
    uint64_t idle_timeout_ms; /* keep-alive, between requests */
};

/* ---- Framing (RFC 9112 §6.3) ---------------------------------------- */

struct fe_guard_framing
{
    unsigned ncl; /* Content-Length fields */
    unsigned nte; /* Transfer-Encoding fields */
    int cl_bad;   /* a Content-Length that is not 1*DIGIT (or overflows) */
    int te_bad;   /* a Transfer-Encoding other than exactly "chunked" */
    int name_ws;  /* a field name with whitespace ("Name : value") */
    uint64_t cl;  /* the last Content-Length value */
};

void fe_guard_framing_init(struct fe_guard_framing *f);
/* Feeds one request header (@name and @value borrowed, not kept; @value
 * as the parser delivers it, surrounding whitespace already removed).
 * Of other headers only the name's whitespace is looked at. */
void fe_guard_framing_add(struct fe_guard_framing *f,
                          const char *name,
                          size_t name_len,
                          const char *value,
                          size_t value_len);
/* 0 when the body length is unambiguous; otherwise RT_EHEADER and *why
 * (when @why is not NULL) a static sentence for the log. Refused:
 * Transfer-Encoding together with Content-Length; more than one
 * Content-Length (equal ones too: "5, 5" or two fields are what a
 * smuggler sends, never an SDK); a Content-Length that is not a plain
 * decimal; a Transfer-Encoding other than one field "chunked" (we
 * implement no other coding, and "chunked, chunked" or "gzip" leave the
 * length to guesswork); any Transfer-Encoding on an HTTP/1.0 request
 * (@http10), which RFC 9112 §6.1 says to treat as faulty framing; a
 * field name with whitespace in it ("Transfer-Encoding : chunked"), which
 * RFC 9112 §5.1 says a server MUST reject: a proxy that trims it frames
 * the message by that field, we (and libmicrohttpd) would not. */
int fe_guard_framing_check(const struct fe_guard_framing *f,
                           int http10,
                           const char **why);

/* ---- Deadlines ------------------------------------------------------ */

enum fe_guard_phase {
    FE_GUARD_FRESH,   /* accepted, no request line yet */
    FE_GUARD_IDLE,    /* between keep-alive requests */
    FE_GUARD_HEADERS, /* request line in, headers arriving */
    FE_GUARD_BODY,    /* headers in, body arriving */
    FE_GUARD_BUSY,    /* request complete: running or answering */
    FE_GUARD__NR
};

/* The monotonic time (ms) by which a connection that entered @phase at
 * @since_ms and has received @body_bytes of its body is over its bound,
 * or UINT64_MAX when it has none. FRESH and HEADERS share
 * header_timeout_ms (a fresh connection's request line counts against
 * its header bound; a keep-alive one's from its request line on), IDLE
 * has idle_timeout_ms, BODY has body_timeout_ms plus one second per
 * body_min_rate bytes received, BUSY none (the response's writes are
 * bounded by libmicrohttpd's own inactivity timeout). */
uint64_t fe_guard_deadline(const struct fe_guard_cfg *cfg,
                           enum fe_guard_phase phase,
                           uint64_t since_ms,
                           uint64_t body_bytes);

/* ---- A worker's connections ----------------------------------------- */

/* One connection, embedded by the caller (fe_http's per-connection
 * state) and linked into its worker's list from accept to close. */
struct fe_guard_conn
{
    struct fe_guard_conn *prev, *next;
    enum fe_guard_phase phase;
    uint64_t since_ms;   /* when it entered phase */
    uint64_t body_bytes; /* of the current request */
    unsigned served;     /* requests completed on it */
    int counted;         /* admitted by fe_guard_conn_open() */
    int closing;         /* shut down by the guard, close pending */
    struct sockaddr_storage addr;
};

struct fe_guard_list
{
    struct fe_guard_conn *head, *tail; /* oldest first */
    unsigned n;
};

/* Appends @c (accepted at @now_ms, phase FRESH) / unlinks it. */
void fe_guard_list_add(struct fe_guard_list *l,
                       struct fe_guard_conn *c,
                       uint64_t now_ms);
void fe_guard_list_remove(struct fe_guard_list *l, struct fe_guard_conn *c);
/* Moves @c to @phase as of @now_ms (a connection entering FRESH's
 * successor HEADERS keeps its accept time: the header bound of a first
 * request runs from the accept). */
void fe_guard_conn_phase(struct fe_guard_conn *c,
                         enum fe_guard_phase phase,
                         uint64_t now_ms);
/* Calls @cb for every connection over its deadline at @now_ms that is
 * not closing yet (@cb may mark it closing, not unlink it). Returns how
 * many were reported. */
unsigned fe_guard_list_sweep(struct fe_guard_list *l,
                             const struct fe_guard_cfg *cfg,
                             uint64_t now_ms,
                             void (*cb)(struct fe_guard_conn *c, void *arg),
                             void *arg);
/* The connection to shed for a newcomer: the oldest one, other than
 * @except, that has never completed a request and is still waiting for
 * its request line or headers (FRESH or HEADERS, not closing); else the
 * oldest idle keep-alive one; else NULL. A client that finished a request
 * has shown it is a client; one that only holds a socket has not. */
struct fe_guard_conn *fe_guard_list_victim(struct fe_guard_list *l,
                                           const struct fe_guard_conn *except);

/* ---- Counters shared by the workers --------------------------------- */

enum {
    FE_GUARD_ADMIT = 0,       /* admitted */
    FE_GUARD_ADMIT_SHED = 1,  /* admitted; shed one connection */
    FE_GUARD_REFUSE_ALL = 2,  /* max_conns reached */
    FE_GUARD_REFUSE_ADDR = 3, /* max_conns_per_ip reached */
};

struct fe_guard;
/* Copies @cfg. Returns 0 (*out owned by the caller: fe_guard_destroy). */
int fe_guard_create(const struct fe_guard_cfg *cfg, struct fe_guard **out);
void fe_guard_destroy(struct fe_guard *g);
/* Borrowed, valid until fe_guard_destroy. */
const struct fe_guard_cfg *fe_guard_get_cfg(const struct fe_guard *g);
/* Would a connection from @addr (borrowed; AF_INET or AF_INET6, anything
 * else is counted as one address) be refused now? FE_GUARD_ADMIT or a
 * REFUSE code; counts nothing. */
int fe_guard_conn_check(struct fe_guard *g, const struct sockaddr *addr);
/* Counts a connection from @addr: FE_GUARD_ADMIT or FE_GUARD_ADMIT_SHED
 * (counted: fe_guard_conn_close() later), or a REFUSE code (not counted).
 * Checked and counted under one lock, so concurrent workers never admit
 * past a cap. */
int fe_guard_conn_open(struct fe_guard *g, const struct sockaddr *addr);
void fe_guard_conn_close(struct fe_guard *g, const struct sockaddr *addr);
unsigned fe_guard_conns(struct fe_guard *g);
/* A request of @account (borrowed) starts running: 0 (counted:
 * fe_guard_acct_exit() when it ends) or RT_EBUSY when the account already
 * has max_inflight_per_account requests running (not counted). */
int fe_guard_acct_enter(struct fe_guard *g, const char *account);
void fe_guard_acct_exit(struct fe_guard *g, const char *account);

#endif
