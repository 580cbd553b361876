/* rtctl: the operator's command line. Talks to the master's HTTP API
 * (plain blocking HTTP/1.0: it is a CLI, a few requests per run).
 *
 *   rtctl [--master-http HOST:PORT[,HOST:PORT...]] status [--json]
 *   rtctl split RANGE [KEY] | merge RANGE | move RANGE SERVER [--json]
 *   rtctl transfer RANGE SERVER [--json]
 *   rtctl handover SERVER
 *   rtctl drain SERVER [--cancel] [--no-wait] [--json]
 *   rtctl events [--json] [--follow] [--since SEQ] [--limit N]
 *   rtctl trace start [NAME] | stop | status [--json]
 *   rtctl trace dump FILE              (offline: rtctl_trace.c)
 *   rtctl cluster init|add-node ...   (offline: rtctl_cluster.c)
 *
 * The master is found without flags: --master-http, else $RT_MASTER_HTTP,
 * else 127.0.0.1:10101 (rt-master's default --http). Either may list
 * several masters, comma-separated (docs/DESIGN-master-ha.md §5.1-§5.2):
 * a request goes to the first; a follower's 307 is followed (up to
 * RTCTL_MAX_REDIRECTS, same method and path) to the leader; a connection
 * error or a 503 (no leader known) moves on to the next address; when all
 * fail the error names each address tried and what it answered.
 * The admin token (rt-master --admin-token-file) is sent as
 * "Authorization: Bearer TOKEN" on every request: from --token-file FILE,
 * else $RT_ADMIN_TOKEN_FILE, else $RT_ADMIN_TOKEN, else
 * ./rt-data/admin.token when it exists (deploy/run-local.sh writes it);
 * a 401 or 403 says how to give it.
 * Exit: 0 ok, 1 master unreachable, refused or failed, 2 usage. */
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <netdb.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "rtctl_cluster.h"
#include "rtctl_trace.h"

#define RTCTL_DEFAULT_MASTER "127.0.0.1:10101"
#define RTCTL_TIMEOUT_S 5
#define RTCTL_ACTION_TIMEOUT_S 3600 /* a move copies the whole range */
#define RTCTL_MAX_BODY (64u * 1024u * 1024u)
#define RTCTL_MAX_REDIRECTS 3
#define RTCTL_DEFAULT_TOKEN_FILE "./rt-data/admin.token"
#define RTCTL_TOKEN_MAX 4096

/* The admin token ("" = none sent). Never printed. */
static char rtctl_token[RTCTL_TOKEN_MAX];

static void rtctl_usage(FILE *out)
{
    fprintf(
        out,
        "Usage: rtctl [--master-http HOST:PORT[,...]] [--token-file FILE]\n"
        "             COMMAND [options]\n"
        "\n"
        "Commands:\n"
        "  status [--json]         servers and ranges of the cluster with\n"
        "                          their load, from GET /api/status\n"
        "                          (--json: the master's document)\n"
        "  split RANGE [KEY]       split range RANGE at PartitionKey KEY\n"
        "                          (low < KEY < high); without KEY at the\n"
        "                          load-median key of its recent samples\n"
        "  merge RANGE             merge RANGE with the next range of its\n"
        "                          table (both on one server)\n"
        "  move RANGE SERVER       move RANGE to partition server SERVER;\n"
        "                          waits for the outcome and prints the\n"
        "                          copy figures and the ServerBusy window\n"
        "  transfer RANGE SERVER   hand the primary role of replicated\n"
        "                          RANGE to SERVER, an in-sync replica (no\n"
        "                          copy); prints the ServerBusy window\n"
        "  handover SERVER         hand the primary role of every\n"
        "                          replicated range SERVER leads to another\n"
        "                          live in-sync replica (before stopping\n"
        "                          it: a rolling restart)\n"
        "  drain SERVER            move every range off SERVER and keep new\n"
        "                          ones away; waits until it is empty\n"
        "      --cancel            stop draining SERVER\n"
        "      --no-wait           return once draining has started\n"
        "  master add ID RAFT_ADDR add master ID (started with --join on\n"
        "                          RAFT_ADDR) to the masters' Raft group\n"
        "  master remove ID        take master ID out of the group (not\n"
        "                          the leader: transfer first)\n"
        "  master transfer [ID]    hand the masters' leadership to ID (or\n"
        "                          the most up-to-date other master)\n"
        "  cluster init OUT_DIR --masters N,.. --partition-servers N,..\n"
        "          --frontends N,.. [--admin NAME] [--days N]\n"
        "                          create the cluster CA and each node's\n"
        "                          --cluster-tls directory (offline)\n"
        "  cluster add-node OUT_DIR ROLE NAME\n"
        "                          issue one more node from that CA\n"
        "  trace start [NAME]      record a load trace (docs/TRACE.md) into\n"
        "                          the master's DATA/traces/NAME.rttrace\n"
        "                          (default NAME: trace-DATE-TIME)\n"
        "  trace stop              stop recording it\n"
        "  trace status            file, bytes, records, since when\n"
        "  trace dump FILE         print a trace file as JSON lines\n"
        "                          (offline)\n"
        "  events                  the master's events (decisions, their\n"
        "                          outcomes, servers up/down), oldest first\n"
        "      --follow            keep printing new events (Ctrl-C stops)\n"
        "      --since SEQ         only events after sequence number SEQ\n"
        "      --limit N           at most the last N (default 100; 0 =\n"
        "                          all kept)\n"
        "\n"
        "Options:\n"
        "  --json                   print the master's JSON answer\n"
        "  --timeout S              give up waiting after S seconds\n"
        "                           (split/merge/move/drain; default 3600)\n"
        "  --token-file FILE        the master's admin token (rt-master\n"
        "                           --admin-token-file); default:\n"
        "                           $RT_ADMIN_TOKEN_FILE, else\n"
        "                           $RT_ADMIN_TOKEN (the token itself),\n"
        "                           else " RTCTL_DEFAULT_TOKEN_FILE
        "\n"
        "                           when it exists\n"
        "  --master-http HOST:PORT[,HOST:PORT...]\n"
        "                           master status API, or those of\n"
        "                           several masters (the leader is found;\n"
        "                           default: $RT_MASTER_HTTP, "
        "else " RTCTL_DEFAULT_MASTER
        ")\n"
        "  --help                   print this help and exit\n"
        "\n"
        "RANGE and SERVER are the ids shown by 'rtctl status'. Exit "
        "status: 0 done,\n"
        "1 master unreachable or the request refused or failed, 2 "
        "usage.\n");
}

/* ---- HTTP ---- */

/* Splits "host:port" / "[v6]:port" into @host and @port (strings). */
static int rtctl_split(const char *addr,
                       char *host,
                       size_t hostlen,
                       char *port,
                       size_t portlen)
{
    const char *c = strrchr(addr, ':');
    const char *h = addr;
    size_t hl;
    if (!c || c == addr || !c[1] || strlen(c + 1) >= portlen) {
        return -1;
    }
    hl = (size_t)(c - addr);
    if (hl >= 2 && addr[0] == '[' && addr[hl - 1] == ']') {
        h++;
        hl -= 2;
    }
    if (hl == 0 || hl >= hostlen) {
        return -1;
    }
    memcpy(host, h, hl);
    host[hl] = '\0';
    strcpy(port, c + 1);
    return 0;
}

static int rtctl_connect(const char *addr,
                         int timeout_s,
                         char *err,
                         size_t errlen)
{
    char host[256], port[16];
    struct addrinfo hints, *res, *ai;
    struct timeval tv = {timeout_s, 0};
    int fd = -1, rc;

    if (rtctl_split(addr, host, sizeof(host), port, sizeof(port)) != 0) {
        snprintf(err, errlen, "bad address '%s' (expected HOST:PORT)", addr);
        return -1;
    }
    memset(&hints, 0, sizeof(hints));
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    rc = getaddrinfo(host, port, &hints, &res);
    if (rc != 0) {
        snprintf(err, errlen, "resolve %s: %s", addr, gai_strerror(rc));
        return -1;
    }
    snprintf(err, errlen, "connect %s: no address", addr);
    for (ai = res; ai; ai = ai->ai_next) {
        fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC,
                    ai->ai_protocol);
        if (fd < 0) {
            continue;
        }
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
        if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0) {
            break;
        }
        snprintf(err, errlen, "connect %s: %s", addr, strerror(errno));
        close(fd);
        fd = -1;
    }
    freeaddrinfo(res);
    return fd;
}

/* Copies the value of header @name (with its ':') from the header block
 * @hdrs (ending at the blank line) into @out, or sets "" when absent. */
static void rtctl_header(const char *hdrs,
                         const char *name,
                         char *out,
                         size_t outlen)
{
    size_t nl = strlen(name);
    const char *end = strstr(hdrs, "\r\n\r\n");

    out[0] = '\0';
    for (const char *l = strstr(hdrs, "\r\n"); l && (!end || l < end);
         l = strstr(l + 2, "\r\n")) {
        if (strncasecmp(l + 2, name, nl) == 0) {
            const char *v = l + 2 + nl;
            size_t n = strcspn(v, "\r\n");
            while (n && (*v == ' ' || *v == '\t')) {
                v++;
                n--;
            }
            snprintf(out, outlen, "%.*s", (int)n, v);
            return;
        }
    }
}

/* @method @path on @addr (no body), waiting up to @timeout_s for the
 * answer. On 0, *body (malloc'd, NUL-terminated) holds the response body,
 * *status the HTTP status and @location its Location header ("" if none). */
static int rtctl_http_once(const char *addr,
                           const char *method,
                           const char *path,
                           int timeout_s,
                           int *status,
                           char **body,
                           char *location,
                           size_t loclen,
                           char *err,
                           size_t errlen)
{
    char req[8192 + RTCTL_TOKEN_MAX];
    char *buf = NULL, *p;
    size_t len = 0, cap = 0;
    int fd, n;

    n = snprintf(req, sizeof(req),
                 "%s %s HTTP/1.0\r\nHost: %s\r\nAccept: application/json"
                 "\r\nContent-Length: 0\r\nConnection: close\r\n"
                 "%s%s%s\r\n",
                 method, path, addr,
                 rtctl_token[0] ? "Authorization: Bearer " : "", rtctl_token,
                 rtctl_token[0] ? "\r\n" : "");
    if (n < 0 || (size_t)n >= sizeof(req)) {
        snprintf(err, errlen, "request too long");
        return -1;
    }
    fd = rtctl_connect(addr, timeout_s, err, errlen);
    if (fd < 0) {
        return -1;
    }
    for (int off = 0; off < n;) {
        ssize_t w = send(fd, req + off, (size_t)(n - off), MSG_NOSIGNAL);
        if (w < 0) {
            if (errno == EINTR) {
                continue;
            }
            snprintf(err, errlen, "send to %s: %s", addr, strerror(errno));
            close(fd);
            return -1;
        }
        off += (int)w;
    }
    for (;;) {
        ssize_t r;
        if (cap - len < 4096) {
            cap = cap ? cap * 2 : 16384;
            if (cap > RTCTL_MAX_BODY) {
                snprintf(err, errlen, "answer from %s too large", addr);
                goto err_read;
            }
            p = realloc(buf, cap + 1);
            if (!p) {
                snprintf(err, errlen, "out of memory");
                goto err_read;
            }
            buf = p;
        }
        r = recv(fd, buf + len, cap - len, 0);
        if (r < 0) {
            if (errno == EINTR) {
                continue;
            }
            snprintf(err, errlen, "read from %s: %s", addr,
                     errno == EAGAIN ? "timed out" : strerror(errno));
            goto err_read;
        }
        if (r == 0) {
            break;
        }
        len += (size_t)r;
    }
    close(fd);
    if (!buf) {
        snprintf(err, errlen, "empty answer from %s", addr);
        return -1;
    }
    buf[len] = '\0';
    if (sscanf(buf, "HTTP/%*d.%*d %d", status) != 1) {
        snprintf(err, errlen, "not an HTTP answer from %s", addr);
        free(buf);
        return -1;
    }
    rtctl_header(buf, "Location:", location, loclen);
    p = strstr(buf, "\r\n\r\n");
    p = p ? p + 4 : buf + len;
    memmove(buf, p, strlen(p) + 1);
    *body = buf;
    return 0;

err_read:
    close(fd);
    free(buf);
    return -1;
}

/* Says once how to give the admin token when the master refused a request
 * for the lack of it (401) or refused it (403 and a token was sent). */
static void rtctl_auth_hint(int status, const char *body)
{
    static int said;
    if (said || (status != 401 && status != 403)) {
        return;
    }
    said = 1;
    if (status == 401 || !rtctl_token[0]) {
        fprintf(stderr,
                "rtctl: the master wants an admin token: --token-file FILE "
                "(or RT_ADMIN_TOKEN_FILE=FILE; the file rt-master's "
                "--admin-token-file names)\n");
    } else {
        fprintf(stderr,
                "rtctl: the master refused the request (HTTP 403): %.300s\n"
                "rtctl: is the admin token the one the master reads "
                "(--token-file)?\n",
                body);
    }
}

/* Reads the token from @path into rtctl_token: surrounding whitespace
 * dropped. Returns 0, or -1 after printing why (not the token). */
static int rtctl_read_token(const char *path)
{
    FILE *f = fopen(path, "r");
    size_t n, b = 0;
    if (!f) {
        fprintf(stderr, "rtctl: admin token file %s: %s\n", path,
                strerror(errno));
        return -1;
    }
    n = fread(rtctl_token, 1, sizeof(rtctl_token) - 1, f);
    fclose(f);
    rtctl_token[n] = '\0';
    while (n && strchr(" \t\r\n", rtctl_token[n - 1])) {
        rtctl_token[--n] = '\0';
    }
    while (rtctl_token[b] && strchr(" \t\r\n", rtctl_token[b])) {
        b++;
    }
    memmove(rtctl_token, rtctl_token + b, n - b + 1);
    if (!rtctl_token[0] || strpbrk(rtctl_token, " \t\r\n")) {
        fprintf(stderr, "rtctl: admin token file %s: %s\n", path,
                rtctl_token[0] ? "more than one token" : "empty");
        rtctl_token[0] = '\0';
        return -1;
    }
    return 0;
}

/* The token by precedence: @flag_file, $RT_ADMIN_TOKEN_FILE,
 * $RT_ADMIN_TOKEN, RTCTL_DEFAULT_TOKEN_FILE when it exists. */
static int rtctl_find_token(const char *flag_file)
{
    const char *f = flag_file, *t;
    if (!f || !*f) {
        f = getenv("RT_ADMIN_TOKEN_FILE");
    }
    if (f && *f) {
        return rtctl_read_token(f);
    }
    t = getenv("RT_ADMIN_TOKEN");
    if (t && *t) {
        if (strlen(t) >= sizeof(rtctl_token) || strpbrk(t, " \t\r\n")) {
            fprintf(stderr, "rtctl: RT_ADMIN_TOKEN: not one token\n");
            return -1;
        }
        snprintf(rtctl_token, sizeof(rtctl_token), "%s", t);
        return 0;
    }
    if (access(RTCTL_DEFAULT_TOKEN_FILE, F_OK) == 0) {
        return rtctl_read_token(RTCTL_DEFAULT_TOKEN_FILE);
    }
    return 0;
}

/* Splits a redirect's @location ("http://HOST:PORT/PATH" or "/PATH") into
 * @addr (kept when the location has no host) and @path. Returns 0, or -1
 * for a location that is neither. */
static int rtctl_location(const char *location,
                          char *addr,
                          size_t addrlen,
                          char *path,
                          size_t pathlen)
{
    const char *p = location;
    if (strncasecmp(p, "http://", 7) == 0) {
        size_t n = strcspn(p + 7, "/");
        if (n == 0 || n >= addrlen) {
            return -1;
        }
        snprintf(addr, addrlen, "%.*s", (int)n, p + 7);
        p += 7 + n;
    }
    if (p[0] != '/' || strlen(p) >= pathlen) {
        return -1;
    }
    snprintf(path, pathlen, "%s", p);
    return 0;
}

/* @body says the master does not lead (or knows no leader). */
static bool rtctl_not_leader(const char *body)
{
    return body &&
           (strstr(body, "not the leader") || strstr(body, "no master leader"));
}

/* One pass over @list for rtctl_http: each address in turn, following its
 * 307 redirects (up to RTCTL_MAX_REDIRECTS, method and path kept: the
 * request has no body); a connection error, or a 503 that executed
 * nothing (to a GET, or "not the leader"), moves on to the next
 * address. On 0, as rtctl_http_once (a 503 from the last address is
 * returned as such); on -1, @err names every address tried and why it
 * failed. */
static int rtctl_http_scan(const char *list,
                           const char *method,
                           const char *path,
                           int timeout_s,
                           int *status,
                           char **body,
                           char *err,
                           size_t errlen)
{
    char addr[256], cur[8192], location[512], why[512];
    size_t used = 0;
    const char *next = list;

    err[0] = '\0';
    while (next) {
        const char *comma = strchr(next, ',');
        size_t n = comma ? (size_t)(comma - next) : strlen(next);
        int hops = 0, rc;

        snprintf(addr, sizeof(addr), "%.*s", (int)n, next);
        next = comma ? comma + 1 : NULL;
        snprintf(cur, sizeof(cur), "%s", path);
        for (;;) {
            rc = rtctl_http_once(addr, method, cur, timeout_s, status, body,
                                 location, sizeof(location), why, sizeof(why));
            if (rc != 0 || *status != 307 || hops == RTCTL_MAX_REDIRECTS) {
                break;
            }
            free(*body);
            if (rtctl_location(location, addr, sizeof(addr), cur,
                               sizeof(cur)) != 0) {
                snprintf(why, sizeof(why), "redirect to bad Location '%.200s'",
                         location);
                rc = -1;
                break;
            }
            hops++;
        }
        /* A 503 moves on only when nothing was done: a GET, or a master
         * saying it does not lead. Another 503 to a POST may come after
         * the action began (an election during a membership change), and
         * sending it to the next master would run it twice. */
        if (rc == 0 &&
            (*status != 503 || !next ||
             (strcmp(method, "GET") != 0 && !rtctl_not_leader(*body)))) {
            rtctl_auth_hint(*status, *body);
            return 0;
        }
        if (rc == 0) {
            snprintf(why, sizeof(why), "HTTP 503: %.200s", *body);
            free(*body);
        }
        used +=
            (size_t)snprintf(err + used, used < errlen ? errlen - used : 0,
                             "%s%s (%s)", used ? ", " : "tried ", addr, why);
        if (used >= errlen) {
            used = errlen - 1;
        }
    }
    return -1;
}

/* A master that knows no leader, or does not lead, says so with a 503
 * before doing anything (or, for an add or remove of a master, which are
 * idempotent, after losing the leadership during it), so asking again is
 * safe; an election (a leader killed, removed or handing over) takes a few
 * hundred milliseconds to a few seconds, and an operator's command should
 * ride it out rather than fail on it. */
#define RTCTL_NO_LEADER_WAIT_S 15

/* --timeout shortens it. */
static int rtctl_leader_wait_s = RTCTL_NO_LEADER_WAIT_S;

static bool rtctl_no_leader(int status, const char *body)
{
    return status == 503 && rtctl_not_leader(body);
}

/* @method @path on the master among @list (comma-separated addresses) that
 * leads (rtctl_http_scan), scanning again every 250 ms for up to
 * rtctl_leader_wait_s while every master answers that it knows no
 * leader. Returns as rtctl_http_scan. */
static int rtctl_http(const char *list,
                      const char *method,
                      const char *path,
                      int timeout_s,
                      int *status,
                      char **body,
                      char *err,
                      size_t errlen)
{
    struct timespec now;
    double end;
    int rc;

    clock_gettime(CLOCK_MONOTONIC, &now);
    end = (double)now.tv_sec + (double)now.tv_nsec / 1e9 + rtctl_leader_wait_s;

    for (;;) {
        rc = rtctl_http_scan(list, method, path, timeout_s, status, body, err,
                             errlen);
        if (rc == 0 && !rtctl_no_leader(*status, *body)) {
            return 0;
        }
        if (rc != 0 && !rtctl_not_leader(err)) {
            return rc;
        }
        clock_gettime(CLOCK_MONOTONIC, &now);
        if ((double)now.tv_sec + (double)now.tv_nsec / 1e9 >= end) {
            return rc;
        }
        if (rc == 0) {
            free(*body);
            *body = NULL;
        }
        usleep(250 * 1000);
    }
}

/* ---- status ---- */

static const char *rtctl_str(json_t *o, const char *key, const char *dflt)
{
    json_t *v = json_object_get(o, key);
    return json_is_string(v) ? json_string_value(v) : dflt;
}

/* With --json (@as_json) the answer @root as it came, on stdout; for a
 * @status other than 200 the same on stderr. Returns 1 when it printed,
 * 0 when the caller prints its own summary. */
static int rtctl_print_raw(json_t *root, int as_json, int status)
{
    if (!as_json && status == 200) {
        return 0;
    }
    json_dumpf(root, as_json ? stdout : stderr,
               JSON_COMPACT | JSON_PRESERVE_ORDER);
    fputc('\n', as_json ? stdout : stderr);
    return 1;
}

/* Integer field as text ("-" when absent). */
static void rtctl_int(json_t *o, const char *key, char *out, size_t n)
{
    json_t *v = json_object_get(o, key);
    if (json_is_integer(v)) {
        snprintf(out, n, "%lld", (long long)json_integer_value(v));
    } else {
        snprintf(out, n, "-");
    }
}

/* A range bound for display: "" as '""', null (unbounded) as +inf. */
static char *rtctl_bound(json_t *v)
{
    const char *s;
    char *out;
    if (!json_is_string(v)) {
        return strdup("+inf");
    }
    s = json_string_value(v);
    if (!*s) {
        return strdup("\"\"");
    }
    out = strdup(s);
    /* Keep one row per line whatever the key holds. */
    for (char *p = out; p && *p; p++) {
        if ((unsigned char)*p < 0x20) {
            *p = '?';
        }
    }
    return out;
}

/* A table of text cells printed with aligned columns. */
struct rtctl_tab
{
    size_t ncols;
    size_t nrows;
    char **cells; /* nrows * ncols, row-major, malloc'd */
};

static void rtctl_tab_add(struct rtctl_tab *t, char **row)
{
    t->cells = realloc(t->cells, (t->nrows + 1) * t->ncols * sizeof(char *));
    if (!t->cells) {
        fprintf(stderr, "rtctl: out of memory\n");
        exit(1);
    }
    for (size_t c = 0; c < t->ncols; c++) {
        t->cells[t->nrows * t->ncols + c] = row[c] ? row[c] : strdup("");
    }
    t->nrows++;
}

static void rtctl_tab_print(struct rtctl_tab *t)
{
    size_t w[16] = {0};
    for (size_t i = 0; i < t->nrows * t->ncols; i++) {
        size_t n = strlen(t->cells[i]);
        if (n > w[i % t->ncols]) {
            w[i % t->ncols] = n;
        }
    }
    for (size_t r = 0; r < t->nrows; r++) {
        for (size_t c = 0; c < t->ncols; c++) {
            const char *s = t->cells[r * t->ncols + c];
            if (c + 1 == t->ncols) {
                printf("%s\n", s);
            } else {
                printf("%-*s  ", (int)w[c], s);
            }
        }
    }
    for (size_t i = 0; i < t->nrows * t->ncols; i++) {
        free(t->cells[i]);
    }
    free(t->cells);
    t->cells = NULL;
    t->nrows = 0;
}

static char *rtctl_dup(const char *s)
{
    char *p = strdup(s);
    if (!p) {
        fprintf(stderr, "rtctl: out of memory\n");
        exit(1);
    }
    return p;
}

/* A number (integer or real) as text ("-" when absent). */
static void rtctl_num(json_t *v, char *out, size_t n)
{
    if (json_is_number(v)) {
        snprintf(out, n, "%.0f", json_number_value(v));
    } else {
        snprintf(out, n, "-");
    }
}

/* The "demand" of an object's "load" ("-" when absent). */
static void rtctl_load(json_t *o, char *out, size_t n)
{
    rtctl_num(json_object_get(json_object_get(o, "load"), "demand"), out, n);
}

/* A JSON array of ids as "1,2,3" (malloc'd; "-" when absent: a master
 * that predates replica sets). */
static char *rtctl_ids(json_t *arr)
{
    char buf[256] = "";
    size_t len = 0, i;
    json_t *v;
    if (!json_is_array(arr)) {
        return rtctl_dup("-");
    }
    json_array_foreach(arr, i, v)
    {
        int n = snprintf(buf + len, sizeof(buf) - len, "%s%lld", i ? "," : "",
                         (long long)json_integer_value(v));
        if (n < 0 || (size_t)n >= sizeof(buf) - len) {
            break;
        }
        len += (size_t)n;
    }
    return rtctl_dup(buf);
}

/* A range's replica set as "1*,2,3": the ids of "replicas", the
 * primary starred, a learner marked "~" (malloc'd; "-" when absent). */
static char *rtctl_replicas(json_t *o)
{
    json_t *ids = json_object_get(o, "replicas");
    json_t *roles = json_object_get(o, "roles");
    char buf[256] = "";
    size_t len = 0, i;
    json_t *v;
    if (!json_is_array(ids)) {
        return rtctl_dup("-");
    }
    json_array_foreach(ids, i, v)
    {
        const char *role = json_string_value(json_array_get(roles, i));
        const char *mark = !role                          ? ""
                           : strcmp(role, "primary") == 0 ? "*"
                           : strcmp(role, "learner") == 0 ? "~"
                                                          : "";
        int n = snprintf(buf + len, sizeof(buf) - len, "%s%lld%s", i ? "," : "",
                         (long long)json_integer_value(v), mark);
        if (n < 0 || (size_t)n >= sizeof(buf) - len) {
            break;
        }
        len += (size_t)n;
    }
    return rtctl_dup(buf);
}

/* A range's "lag" as "SERVER:LSNS,..." (LSNs behind the primary; "?"
 * while unreported), "-" without secondaries. */
static char *rtctl_lag(const json_t *o)
{
    json_t *lag = json_object_get(o, "lag"), *v;
    char buf[256] = "";
    size_t len = 0, i;
    if (!json_is_array(lag) || json_array_size(lag) == 0) {
        return rtctl_dup("-");
    }
    json_array_foreach(lag, i, v)
    {
        json_t *l = json_object_get(v, "lag");
        char n[32] = "?";
        int w;
        if (json_is_integer(l)) {
            snprintf(n, sizeof(n), "%lld", (long long)json_integer_value(l));
        }
        w = snprintf(
            buf + len, sizeof(buf) - len, "%s%lld:%s", i ? "," : "",
            (long long)json_integer_value(json_object_get(v, "server")), n);
        if (w < 0 || (size_t)w >= sizeof(buf) - len) {
            break;
        }
        len += (size_t)w;
    }
    return rtctl_dup(buf);
}

/* A range's primary's lease as it last reported it: "none", "ok NNNms"
 * (left), "-" when nothing was reported (RF 1, or not yet). */
static char *rtctl_lease(const json_t *o)
{
    json_t *l = json_object_get(o, "lease_ms");
    char buf[40];
    if (!json_is_integer(l)) {
        return rtctl_dup("-");
    }
    if (json_integer_value(l) == 0) {
        return rtctl_dup("none");
    }
    snprintf(buf, sizeof(buf), "ok %lldms", (long long)json_integer_value(l));
    return rtctl_dup(buf);
}

/* The replication operations among "ops" (failovers, ISR changes,
 * learners, transfers), one line each; moves, splits and merges are not
 * listed. */
static void rtctl_print_repl_ops(json_t *root)
{
    json_t *o;
    size_t i;
    int first = 1;
    json_array_foreach(json_object_get(root, "ops"), i, o)
    {
        const char *kind = rtctl_str(o, "kind", "?");
        if (!strcmp(kind, "split") || !strcmp(kind, "merge") ||
            !strcmp(kind, "move")) {
            continue;
        }
        if (first) {
            printf("\nREPLICATION OPS\n");
            first = 0;
        }
        if (json_object_get(o, "origin")) {
            /* The executor's transfer (its core op, if any, follows). */
            printf(
                "%s range %lld (primary %lld -> %lld, %s): running for "
                "%lld ms\n",
                kind,
                (long long)json_integer_value(json_object_get(o, "range")),
                (long long)json_integer_value(json_object_get(o, "server")),
                (long long)json_integer_value(json_object_get(o, "to")),
                rtctl_str(o, "origin", "?"),
                (long long)json_integer_value(
                    json_object_get(o, "running_ms")));
            continue;
        }
        printf("%s range %lld (primary %lld): %s for %lld ms\n", kind,
               (long long)json_integer_value(json_object_get(o, "range")),
               (long long)json_integer_value(json_object_get(o, "server")),
               rtctl_str(o, "state", "?"),
               (long long)json_integer_value(json_object_get(o, "running_ms")));
    }
}

static long long rtctl_jint(json_t *o, const char *key);

/* The masters of a replicated master (the status's "masters" array). */
static void rtctl_print_masters(json_t *masters)
{
    size_t i;
    json_t *m;

    if (!json_is_array(masters) || json_array_size(masters) == 0) {
        return;
    }
    printf("MASTERS\n");
    printf("%-4s %-22s %-22s %-8s %-7s %6s %8s %8s\n", "ID", "RPC", "RAFT",
           "ROLE", "LEADER", "TERM", "COMMIT", "APPLIED");
    json_array_foreach(masters, i, m)
    {
        json_t *term = json_object_get(m, "term");
        char t[24] = "-", c[24] = "-", a[24] = "-";
        if (json_is_integer(term)) {
            snprintf(t, sizeof(t), "%lld", (long long)json_integer_value(term));
            snprintf(c, sizeof(c), "%lld", rtctl_jint(m, "commit_index"));
            snprintf(a, sizeof(a), "%lld", rtctl_jint(m, "apply_index"));
        }
        printf("%-4lld %-22s %-22s %-8s %-7s %6s %8s %8s\n",
               rtctl_jint(m, "id"), rtctl_str(m, "addr", "-"),
               rtctl_str(m, "raft_addr", "-"), rtctl_str(m, "role", "-"),
               json_is_true(json_object_get(m, "leader")) ? "yes" : "", t, c,
               a);
    }
    printf("\n");
}

static void rtctl_print_table(json_t *root)
{
    json_t *servers = json_object_get(root, "servers");
    json_t *ranges = json_object_get(root, "ranges");
    json_t *v = json_object_get(root, "map_version");
    struct rtctl_tab t = {0};
    char num[4][32];
    size_t i;
    json_t *o;

    rtctl_print_masters(json_object_get(root, "masters"));
    if (json_is_integer(v)) {
        printf("map version %lld\n\n", (long long)json_integer_value(v));
    }
    v = json_object_get(json_object_get(root, "replication"),
                        "under_replicated");
    if (json_is_integer(v) && json_integer_value(v) > 0) {
        printf("under-replicated ranges %lld\n\n",
               (long long)json_integer_value(v));
    }
    printf("SERVERS\n");
    t.ncols = 6;
    rtctl_tab_add(&t, (char *[]){rtctl_dup("ID"), rtctl_dup("ADDR"),
                                 rtctl_dup("STATE"), rtctl_dup("RANGES"),
                                 rtctl_dup("REPLICAS"), rtctl_dup("LOAD/S")});
    json_array_foreach(servers, i, o)
    {
        char state[48];
        rtctl_int(o, "id", num[0], sizeof(num[0]));
        rtctl_int(o, "ranges", num[1], sizeof(num[1]));
        rtctl_load(o, num[2], sizeof(num[2]));
        rtctl_int(o, "replicas", num[3], sizeof(num[3]));
        snprintf(
            state, sizeof(state), "%s%s", rtctl_str(o, "state", "?"),
            json_is_true(json_object_get(o, "draining")) ? ",draining" : "");
        rtctl_tab_add(&t, (char *[]){rtctl_dup(num[0]),
                                     rtctl_dup(rtctl_str(o, "addr", "")),
                                     rtctl_dup(state), rtctl_dup(num[1]),
                                     rtctl_dup(num[3]), rtctl_dup(num[2])});
    }
    rtctl_tab_print(&t);

    printf("\nRANGES\n");
    t.ncols = 11;
    rtctl_tab_add(
        &t, (char *[]){rtctl_dup("ID"), rtctl_dup("TABLE"), rtctl_dup("LOW"),
                       rtctl_dup("HIGH"), rtctl_dup("SERVER"),
                       rtctl_dup("REPLICAS"), rtctl_dup("INSYNC"),
                       rtctl_dup("LAG"), rtctl_dup("LEASE"), rtctl_dup("EPOCH"),
                       rtctl_dup("LOAD/S")});
    json_array_foreach(ranges, i, o)
    {
        char load[128]; /* num[3] and every mark at once */
        rtctl_int(o, "id", num[0], sizeof(num[0]));
        rtctl_int(o, "server", num[1], sizeof(num[1]));
        rtctl_int(o, "epoch", num[2], sizeof(num[2]));
        rtctl_load(o, num[3], sizeof(num[3]));
        snprintf(load, sizeof(load), "%s%s%s%s%s", num[3],
                 json_is_true(json_object_get(o, "hot")) ? " hot" : "",
                 json_is_true(json_object_get(o, "busy")) ? " busy" : "",
                 json_is_true(json_object_get(o, "under_replicated"))
                     ? " under-replicated"
                     : "",
                 json_is_true(json_object_get(o, "zone_violation"))
                     ? " zone-violation"
                     : "");
        rtctl_tab_add(
            &t,
            (char *[]){rtctl_dup(num[0]), rtctl_dup(rtctl_str(o, "table", "?")),
                       rtctl_bound(json_object_get(o, "low")),
                       rtctl_bound(json_object_get(o, "high")),
                       rtctl_dup(num[1]), rtctl_replicas(o),
                       rtctl_ids(json_object_get(o, "insync")), rtctl_lag(o),
                       rtctl_lease(o), rtctl_dup(num[2]), rtctl_dup(load)});
    }
    rtctl_tab_print(&t);
    rtctl_print_repl_ops(root);
}

static int rtctl_status(const char *addr, int as_json)
{
    char err[512];
    char *body = NULL;
    json_error_t jerr;
    json_t *root;
    int status = 0;

    if (rtctl_http(addr, "GET", "/api/status", RTCTL_TIMEOUT_S, &status, &body,
                   err, sizeof(err)) != 0) {
        fprintf(stderr, "rtctl: cannot reach the master at %s: %s\n", addr,
                err);
        fprintf(stderr,
                "rtctl: is rt-master running? (--master-http "
                "HOST:PORT or RT_MASTER_HTTP)\n");
        return 1;
    }
    if (status != 200) {
        fprintf(stderr, "rtctl: master at %s answered HTTP %d: %.200s\n", addr,
                status, body);
        free(body);
        return 1;
    }
    root = json_loads(body, 0, &jerr);
    free(body);
    if (!json_is_object(root)) {
        fprintf(stderr, "rtctl: bad JSON from the master at %s: %s\n", addr,
                root ? "not an object" : jerr.text);
        json_decref(root);
        return 1;
    }
    if (!json_is_array(json_object_get(root, "servers"))) {
        json_object_set_new(root, "servers", json_array());
    }
    if (!json_is_array(json_object_get(root, "ranges"))) {
        json_object_set_new(root, "ranges", json_array());
    }
    if (as_json) {
        /* The master's document passes through (servers, ranges and the
         * rest), pretty-printed. */
        json_dumpf(root, stdout, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
        fputc('\n', stdout);
    } else {
        rtctl_print_table(root);
    }
    json_decref(root);
    return fflush(stdout) == 0 ? 0 : 1;
}

/* ---- actions (POST) and events ---- */

/* Percent-encodes @s for a query string. Returns malloc'd text. */
static char *rtctl_urlenc(const char *s)
{
    static const char hex[] = "0123456789ABCDEF";
    char *out = malloc(strlen(s) * 3 + 1), *p = out;
    if (!out) {
        fprintf(stderr, "rtctl: out of memory\n");
        exit(1);
    }
    for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
        if ((*c >= 'A' && *c <= 'Z') || (*c >= 'a' && *c <= 'z') ||
            (*c >= '0' && *c <= '9') || *c == '-' || *c == '_' || *c == '.' ||
            *c == '~') {
            *p++ = (char)*c;
        } else {
            *p++ = '%';
            *p++ = hex[*c >> 4];
            *p++ = hex[*c & 15];
        }
    }
    *p = '\0';
    return out;
}

/* Sends a request and parses the JSON answer. Returns the HTTP status
 * (and *out, caller decrefs) or -1 after printing why. */
static int rtctl_call(const char *addr,
                      const char *method,
                      const char *path,
                      int timeout_s,
                      json_t **out)
{
    char err[512];
    char *body = NULL;
    json_error_t jerr;
    int status = 0;
    if (rtctl_http(addr, method, path, timeout_s, &status, &body, err,
                   sizeof(err)) != 0) {
        fprintf(stderr, "rtctl: cannot reach the master at %s: %s\n", addr,
                err);
        return -1;
    }
    *out = json_loads(body, 0, &jerr);
    if (!*out) {
        fprintf(stderr, "rtctl: master at %s answered HTTP %d: %.300s\n", addr,
                status, body);
        free(body);
        return -1;
    }
    free(body);
    return status;
}

/* GET /api/status into *@root (caller decrefs): 0, or -1 after printing
 * why. */
static int rtctl_get_status(const char *addr, json_t **root)
{
    int status = rtctl_call(addr, "GET", "/api/status", RTCTL_TIMEOUT_S, root);
    if (status != 200) {
        if (status > 0) {
            json_decref(*root);
        }
        return -1;
    }
    return 0;
}

static long long rtctl_jint(json_t *o, const char *key)
{
    json_t *v = json_object_get(o, key);
    return json_is_number(v) ? (long long)json_number_value(v) : -1;
}

static void rtctl_human_bytes(double v, char *out, size_t n)
{
    if (v >= 1 << 30) {
        snprintf(out, n, "%.2f GiB", v / (1 << 30));
    } else if (v >= 1 << 20) {
        snprintf(out, n, "%.1f MiB", v / (1 << 20));
    } else if (v >= 1024) {
        snprintf(out, n, "%.1f KiB", v / 1024);
    } else {
        snprintf(out, n, "%.0f B", v);
    }
}

/* One event as one line of text. */
static void rtctl_print_event(json_t *e)
{
    const char *kind = rtctl_str(e, "kind", "?");
    const char *outcome = rtctl_str(e, "outcome", NULL);
    json_t *mv = json_object_get(e, "move");
    char *low = NULL, *high = NULL;
    printf("%s #%lld %s", rtctl_str(e, "time", "?"), rtctl_jint(e, "seq"),
           kind);
    if (json_object_get(e, "range")) {
        printf(" range %lld", rtctl_jint(e, "range"));
    }
    if (json_is_string(json_object_get(e, "table"))) {
        low = rtctl_bound(json_object_get(e, "low"));
        high = rtctl_bound(json_object_get(e, "high"));
        printf(" (%s [%s, %s))", rtctl_str(e, "table", "?"), low, high);
        free(low);
        free(high);
    }
    if (!strcmp(kind, "split")) {
        json_t *nr = json_object_get(e, "new_ranges");
        printf(" at '%s'", rtctl_str(e, "key", "?"));
        if (json_array_size(nr) == 2) {
            printf(" -> %lld, %lld",
                   (long long)json_integer_value(json_array_get(nr, 0)),
                   (long long)json_integer_value(json_array_get(nr, 1)));
        }
    } else if (!strcmp(kind, "merge")) {
        printf(" + %lld -> %lld", rtctl_jint(e, "range2"),
               rtctl_jint(e, "new_range"));
    } else if (!strcmp(kind, "move") || !strcmp(kind, "transfer")) {
        printf(" server %lld -> %lld", rtctl_jint(e, "server"),
               rtctl_jint(e, "to"));
    } else if (json_object_get(e, "server")) {
        printf(" server %lld", rtctl_jint(e, "server"));
    }
    if (outcome) {
        printf(": %s", outcome);
    }
    if (json_object_get(e, "duration_ms")) {
        printf(" in %lld ms", rtctl_jint(e, "duration_ms"));
    }
    if (mv && json_object_get(mv, "frozen_ms")) {
        char b[32];
        rtctl_human_bytes(json_number_value(json_object_get(mv, "bytes")), b,
                          sizeof(b));
        printf(" [%lld entities, %s, frozen %lld ms, busy %lld ms]",
               rtctl_jint(mv, "entities"), b, rtctl_jint(mv, "frozen_ms"),
               rtctl_jint(e, "busy_ms"));
    }
    if (json_object_get(e, "origin")) {
        printf(" (%s)", rtctl_str(e, "origin", ""));
    }
    if (json_is_string(json_object_get(e, "reason"))) {
        printf(" - %s", rtctl_str(e, "reason", ""));
    }
    if (json_is_string(json_object_get(e, "error"))) {
        printf(" - error: %s", rtctl_str(e, "error", ""));
    }
    if (json_is_string(json_object_get(e, "note"))) {
        printf(" - %s", rtctl_str(e, "note", ""));
    }
    printf("\n");
}

static int rtctl_action_result(int status, json_t *root, int as_json)
{
    if (status < 0) {
        return 1;
    }
    if (as_json) {
        json_dumpf(root, stdout, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
        fputc('\n', stdout);
    } else if (json_object_get(root, "kind")) {
        rtctl_print_event(root);
    }
    if (status != 200) {
        if (!json_object_get(root, "kind") || as_json) {
            fprintf(stderr, "rtctl: refused (HTTP %d): %s\n", status,
                    rtctl_str(root, "error", "?"));
        } else {
            fprintf(stderr, "rtctl: failed (HTTP %d): %s\n", status,
                    rtctl_str(root, "error", "?"));
        }
        json_decref(root);
        return 1;
    }
    if (!as_json && !strcmp(rtctl_str(root, "kind", ""), "move")) {
        json_t *mv = json_object_get(root, "move");
        char b[32];
        rtctl_human_bytes(json_number_value(json_object_get(mv, "bytes")), b,
                          sizeof(b));
        printf(
            "copied %lld entities (%s): snapshot %lld ms, %lld tail "
            "rounds\n"
            "ServerBusy window: %lld ms frozen at the source + %lld ms "
            "commit and assignment = %lld ms\n",
            rtctl_jint(mv, "entities"), b, rtctl_jint(mv, "snapshot_ms"),
            rtctl_jint(mv, "tail_rounds"), rtctl_jint(mv, "frozen_ms"),
            rtctl_jint(root, "commit_assign_ms"), rtctl_jint(root, "busy_ms"));
    }
    if (!as_json && !strcmp(rtctl_str(root, "kind", ""), "transfer")) {
        printf(
            "new primary: server %lld at LSN %lld\n"
            "ServerBusy window: %lld ms frozen at the old primary + %lld "
            "ms seal, commit and assignment = %lld ms\n",
            rtctl_jint(root, "new_primary"), rtctl_jint(root, "lsn"),
            rtctl_jint(root, "frozen_ms"),
            rtctl_jint(root, "window_ms") - rtctl_jint(root, "frozen_ms"),
            rtctl_jint(root, "window_ms"));
    }
    json_decref(root);
    return fflush(stdout) == 0 ? 0 : 1;
}

static int rtctl_parse_id(const char *what, const char *s, uint64_t *out)
{
    char *end;
    unsigned long long v;
    errno = 0;
    v = s ? strtoull(s, &end, 10) : 0;
    if (!s || !*s || *s == '-' || errno || *end || v == 0) {
        fprintf(stderr, "rtctl: %s: expected a numeric id, got '%s'\n", what,
                s ? s : "");
        return -1;
    }
    *out = v;
    return 0;
}

/* Before a partition server is stopped (a rolling restart): hands the
 * primary role of every replicated range it leads to another in-sync
 * replica on a live server, one range at a time (each a transfer, a
 * ServerBusy window of milliseconds, rather than the failover its stop
 * would cause: seconds, and a write in flight answered with an unknown
 * outcome). Targets are spread: the live in-sync replica whose server
 * leads the fewest ranges; a range busy with another operation (409) is
 * tried again until --timeout. Prints each transfer; 0 when the server
 * leads no replicated range any more, 1 otherwise (an RF 1 range or one
 * without another in-sync copy is named and left). */
static int rtctl_handover(const char *addr, uint64_t server, int timeout_s)
{
    int rc = 0, done = 0;
    time_t end = time(NULL) + timeout_s;

    for (int round = 0; round < 10000; round++) {
        json_t *root = NULL, *o, *v;
        size_t i, j;
        long long range = -1, target = -1, best = -1;
        if (rtctl_get_status(addr, &root) != 0) {
            return 1;
        }
        json_array_foreach(json_object_get(root, "ranges"), i, o)
        {
            if (rtctl_jint(o, "server") != (long long)server ||
                rtctl_jint(o, "rf") <= 1) {
                continue;
            }
            json_array_foreach(json_object_get(o, "insync"), j, v)
            {
                long long cand = (long long)json_number_value(v);
                long long leads = -1;
                size_t k;
                json_t *s2;
                int up = 0;
                if (cand == (long long)server) {
                    continue;
                }
                json_array_foreach(json_object_get(root, "servers"), k, s2)
                {
                    if (rtctl_jint(s2, "id") == cand) {
                        up = !strncmp(rtctl_str(s2, "state", ""), "up", 2);
                        leads = rtctl_jint(s2, "ranges");
                    }
                }
                if (up && (best < 0 || leads < best)) {
                    best = leads;
                    target = cand;
                }
            }
            range = rtctl_jint(o, "id");
            if (target >= 0) {
                break;
            }
            fprintf(stderr,
                    "rtctl: range %lld: no other live in-sync replica; "
                    "left on server %" PRIu64 "\n",
                    range, server);
            rc = 1;
            range = -1;
        }
        json_decref(root);
        if (range < 0 || target < 0) {
            if (rc == 0) {
                printf("server %" PRIu64
                       " leads no replicated range (%d handed over)\n",
                       server, done);
            }
            return rc;
        }
        {
            char path[128];
            snprintf(path, sizeof(path), "/api/transfer?range=%lld&server=%lld",
                     range, target);
            printf("range %lld: server %" PRIu64 " -> %lld\n", range, server,
                   target);
            fflush(stdout);
            int status = rtctl_call(addr, "POST", path, timeout_s, &root);
            if (status == 409 &&
                strstr(rtctl_str(root, "error", ""), "busy") != NULL &&
                time(NULL) < end) {
                /* Another operation holds the range (an assignment after
                 * a restart, a move): wait and look again. */
                printf("range %lld: %s; retrying\n", range,
                       rtctl_str(root, "error", "busy"));
                json_decref(root);
                usleep(500 * 1000);
                continue;
            }
            if (rtctl_action_result(status, root, 0) != 0) {
                return 1;
            }
            done++;
            /* The status is republished shortly after (coalesced): wait
             * for it, so the next round does not see this range again. */
            for (int w = 0; w < 50; w++) {
                json_t *st = NULL, *r;
                size_t k;
                int moved = 0;
                if (rtctl_call(addr, "GET", "/api/status", RTCTL_TIMEOUT_S,
                               &st) == 200) {
                    json_array_foreach(json_object_get(st, "ranges"), k, r)
                    {
                        if (rtctl_jint(r, "id") == range &&
                            rtctl_jint(r, "server") != (long long)server) {
                            moved = 1;
                        }
                    }
                }
                json_decref(st);
                if (moved) {
                    break;
                }
                usleep(100 * 1000);
            }
        }
    }
    return 1;
}

/* Polls the status until @server holds no range and no move involves it. */
static int rtctl_drain_wait(const char *addr, uint64_t server, int timeout_s)
{
    time_t end = time(NULL) + timeout_s;
    long long last = -1;
    for (;;) {
        json_t *root = NULL, *o;
        size_t i;
        long long left = -1, moving = 0;
        if (rtctl_get_status(addr, &root) != 0) {
            return 1;
        }
        json_array_foreach(json_object_get(root, "servers"), i, o)
        {
            if (rtctl_jint(o, "id") == (long long)server) {
                left = rtctl_jint(o, "ranges");
            }
        }
        json_array_foreach(json_object_get(root, "ops"), i, o)
        {
            if (rtctl_jint(o, "server") == (long long)server ||
                rtctl_jint(o, "to") == (long long)server) {
                moving++;
            }
        }
        json_decref(root);
        if (left != last) {
            printf("server %" PRIu64 ": %lld ranges left\n", server, left);
            fflush(stdout);
            last = left;
        }
        if (left == 0 && moving == 0) {
            printf("server %" PRIu64 " drained\n", server);
            return 0;
        }
        if (time(NULL) >= end) {
            fprintf(stderr,
                    "rtctl: server %" PRIu64
                    " not drained after %d s "
                    "(is another server up? see 'rtctl events')\n",
                    server, timeout_s);
            return 1;
        }
        usleep(500 * 1000);
    }
}

static volatile sig_atomic_t rtctl_stop;

static void rtctl_on_signal(int sig)
{
    (void)sig;
    rtctl_stop = 1;
}

static int rtctl_events(const char *addr,
                        int as_json,
                        int follow,
                        unsigned long long since,
                        long limit)
{
    char path[128];
    int first = 1;
    if (follow) {
        signal(SIGINT, rtctl_on_signal);
        signal(SIGTERM, rtctl_on_signal);
    }
    while (!rtctl_stop) {
        json_t *root = NULL, *e;
        size_t i;
        int status;
        if (first && limit > 0) {
            snprintf(path, sizeof(path), "/api/events?since=%llu&limit=%ld",
                     since, limit);
        } else {
            snprintf(path, sizeof(path), "/api/events?since=%llu", since);
        }
        status = rtctl_call(addr, "GET", path, RTCTL_TIMEOUT_S, &root);
        if (status < 0) {
            return 1;
        }
        if (status != 200 || !json_is_array(root)) {
            fprintf(stderr, "rtctl: master answered HTTP %d to %s\n", status,
                    path);
            json_decref(root);
            return 1;
        }
        json_array_foreach(root, i, e)
        {
            if (as_json) {
                json_dumpf(e, stdout, JSON_COMPACT | JSON_PRESERVE_ORDER);
                fputc('\n', stdout);
            } else {
                rtctl_print_event(e);
            }
            if (rtctl_jint(e, "seq") > 0) {
                since = (unsigned long long)rtctl_jint(e, "seq");
            }
        }
        json_decref(root);
        fflush(stdout);
        first = 0;
        if (!follow) {
            break;
        }
        for (int k = 0; k < 10 && !rtctl_stop; k++) {
            usleep(100 * 1000);
        }
    }
    return 0;
}

int main(int argc, char **argv)
{
    const char *addr = getenv("RT_MASTER_HTTP");
    const char *token_file = NULL;
    const char *cmd = NULL;
    const char *args[4] = {0};
    int nargs = 0, as_json = 0, follow = 0, cancel = 0, no_wait = 0;
    int timeout_s = RTCTL_ACTION_TIMEOUT_S;
    unsigned long long since = 0;
    long limit = 100;

    if (!addr || !*addr) {
        addr = RTCTL_DEFAULT_MASTER;
    }
    if (argc > 1 && !strcmp(argv[1], "cluster")) {
        return rtctl_cluster_main(argc - 2, argv + 2);
    }
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h") ||
            (!cmd && !strcmp(a, "help"))) {
            rtctl_usage(stdout);
            return 0;
        } else if (!strcmp(a, "--json")) {
            as_json = 1;
        } else if (!strcmp(a, "--follow") || !strcmp(a, "-f")) {
            follow = 1;
        } else if (!strcmp(a, "--cancel")) {
            cancel = 1;
        } else if (!strcmp(a, "--no-wait")) {
            no_wait = 1;
        } else if (!strcmp(a, "--since") || !strcmp(a, "--limit") ||
                   !strcmp(a, "--timeout") || !strcmp(a, "--master-http") ||
                   !strcmp(a, "--token-file")) {
            char *end;
            if (i + 1 >= argc) {
                fprintf(stderr, "rtctl: %s needs a value\n", a);
                return 2;
            }
            if (!strcmp(a, "--master-http")) {
                addr = argv[++i];
                continue;
            }
            if (!strcmp(a, "--token-file")) {
                token_file = argv[++i];
                continue;
            }
            errno = 0;
            unsigned long long v = strtoull(argv[++i], &end, 10);
            if (errno || *end || argv[i][0] == '-' || !argv[i][0]) {
                fprintf(stderr, "rtctl: %s: expected a number\n", a);
                return 2;
            }
            if (!strcmp(a, "--since")) {
                since = v;
            } else if (!strcmp(a, "--limit")) {
                limit = (long)v;
            } else {
                timeout_s = v > 0 && v < 86400 * 7 ? (int)v : timeout_s;
                if (timeout_s < rtctl_leader_wait_s) {
                    rtctl_leader_wait_s = timeout_s;
                }
            }
        } else if (!strncmp(a, "--master-http=", 14)) {
            addr = a + 14;
        } else if (!strncmp(a, "--token-file=", 13)) {
            token_file = a + 13;
        } else if (a[0] == '-' && a[1]) {
            fprintf(stderr, "rtctl: unknown option '%s' (try --help)\n", a);
            return 2;
        } else if (!cmd) {
            cmd = a;
        } else if (nargs < 3) {
            args[nargs++] = a;
        } else {
            fprintf(stderr, "rtctl: unexpected argument '%s'\n", a);
            return 2;
        }
    }
    if (!cmd) {
        rtctl_usage(stderr);
        return 2;
    }
    if (!strcmp(cmd, "trace") && nargs && !strcmp(args[0], "dump")) {
        /* Offline: a file, no master, no token. */
        if (nargs != 2) {
            fprintf(stderr, "rtctl: usage: rtctl trace dump FILE\n");
            return 2;
        }
        return rtctl_trace_dump(args[1]);
    }
    if (rtctl_find_token(token_file) != 0) {
        return 2;
    }
    if (!strcmp(cmd, "status")) {
        if (nargs) {
            fprintf(stderr, "rtctl: status takes no argument\n");
            return 2;
        }
        return rtctl_status(addr, as_json);
    }
    if (!strcmp(cmd, "events")) {
        if (nargs) {
            fprintf(stderr, "rtctl: events takes no argument\n");
            return 2;
        }
        return rtctl_events(addr, as_json, follow, since, limit);
    }
    if (!strcmp(cmd, "split") || !strcmp(cmd, "merge") ||
        !strcmp(cmd, "move") || !strcmp(cmd, "drain") ||
        !strcmp(cmd, "transfer")) {
        int want = !strcmp(cmd, "move") || !strcmp(cmd, "transfer") ? 2 : 1;
        int maxargs = !strcmp(cmd, "split") ? 2 : want;
        char path[8192];
        uint64_t id = 0, id2 = 0;
        json_t *root = NULL;
        int status, rc;
        if (nargs < want || nargs > maxargs) {
            fprintf(stderr, "rtctl: usage: rtctl %s %s\n", cmd,
                    !strcmp(cmd, "split")   ? "RANGE [KEY]"
                    : want == 2             ? "RANGE SERVER"
                    : !strcmp(cmd, "drain") ? "SERVER [--cancel] [--no-wait]"
                                            : "RANGE");
            return 2;
        }
        if (rtctl_parse_id(!strcmp(cmd, "drain") ? "SERVER" : "RANGE", args[0],
                           &id) != 0 ||
            (want == 2 && rtctl_parse_id("SERVER", args[1], &id2) != 0)) {
            return 2;
        }
        if (!strcmp(cmd, "split")) {
            if (nargs == 2) {
                char *k = rtctl_urlenc(args[1]);
                if (strlen(k) > 6000) {
                    fprintf(stderr, "rtctl: KEY too long\n");
                    free(k);
                    return 2;
                }
                snprintf(path, sizeof(path),
                         "/api/split?range=%" PRIu64 "&key=%s", id, k);
                free(k);
            } else {
                snprintf(path, sizeof(path), "/api/split?range=%" PRIu64, id);
            }
        } else if (!strcmp(cmd, "merge")) {
            snprintf(path, sizeof(path), "/api/merge?range=%" PRIu64, id);
        } else if (want == 2) {
            snprintf(path, sizeof(path),
                     "/api/%s?range=%" PRIu64 "&server=%" PRIu64, cmd, id, id2);
        } else {
            snprintf(path, sizeof(path), "/api/drain?server=%" PRIu64 "%s", id,
                     cancel ? "&cancel=1" : "");
        }
        status = rtctl_call(addr, "POST", path, timeout_s, &root);
        rc = rtctl_action_result(status, root, as_json);
        if (rc == 0 && !strcmp(cmd, "drain") && !cancel && !no_wait &&
            !as_json) {
            rc = rtctl_drain_wait(addr, id, timeout_s);
        }
        return rc;
    }
    if (!strcmp(cmd, "trace")) {
        const char *sub = nargs ? args[0] : "";
        char path[512];
        json_t *root = NULL;
        int status;
        if (!((!strcmp(sub, "start") && nargs <= 2) ||
              ((!strcmp(sub, "stop") || !strcmp(sub, "status")) &&
               nargs == 1))) {
            fprintf(stderr,
                    "rtctl: usage: rtctl trace start [NAME] | stop | status "
                    "| dump FILE\n");
            return 2;
        }
        if (!strcmp(sub, "start") && nargs == 2) {
            char *n = rtctl_urlenc(args[1]);
            snprintf(path, sizeof(path), "/api/trace/start?name=%.300s", n);
            free(n);
        } else {
            snprintf(path, sizeof(path), "%s",
                     !strcmp(sub, "start")  ? "/api/trace/start"
                     : !strcmp(sub, "stop") ? "/api/trace/stop"
                                            : "/api/trace");
        }
        status = rtctl_call(addr, strcmp(sub, "status") ? "POST" : "GET", path,
                            RTCTL_TIMEOUT_S, &root);
        if (status < 0) {
            return 1;
        }
        if (!rtctl_print_raw(root, as_json, status)) {
            printf(
                "%s %s: %lld records, %lld bytes%s%s\n",
                json_is_true(json_object_get(root, "recording")) ? "recording"
                                                                 : "stopped",
                rtctl_str(root, "file", "-"), rtctl_jint(root, "records"),
                rtctl_jint(root, "bytes"),
                json_is_string(json_object_get(root, "since_time")) ? ", since "
                                                                    : "",
                rtctl_str(root, "since_time", ""));
        }
        json_decref(root);
        return status == 200 ? 0 : 1;
    }
    if (!strcmp(cmd, "handover")) {
        uint64_t id = 0;
        if (nargs != 1 || rtctl_parse_id("SERVER", args[0], &id) != 0) {
            fprintf(stderr, "rtctl: usage: rtctl handover SERVER\n");
            return 2;
        }
        return rtctl_handover(addr, id, timeout_s);
    }
    if (!strcmp(cmd, "master")) {
        const char *sub = nargs ? args[0] : "";
        char path[512];
        uint64_t id = 0;
        json_t *root = NULL;
        int status, ok;
        ok = (!strcmp(sub, "add") && nargs == 3) ||
             (!strcmp(sub, "remove") && nargs == 2) ||
             (!strcmp(sub, "transfer") && nargs <= 2 && nargs >= 1);
        if (!ok || (nargs >= 2 && rtctl_parse_id("ID", args[1], &id) != 0)) {
            fprintf(stderr,
                    "rtctl: usage: rtctl master add ID RAFT_ADDR | "
                    "remove ID | transfer [ID]\n");
            return 2;
        }
        if (!strcmp(sub, "add")) {
            char *a = rtctl_urlenc(args[2]);
            snprintf(path, sizeof(path),
                     "/api/masters/add?id=%" PRIu64 "&addr=%.300s", id, a);
            free(a);
        } else if (nargs == 2) {
            snprintf(path, sizeof(path), "/api/masters/%s?id=%" PRIu64, sub,
                     id);
        } else {
            snprintf(path, sizeof(path), "/api/masters/%s", sub);
        }
        status = rtctl_call(addr, "POST", path, timeout_s, &root);
        if (status < 0) {
            return 1;
        }
        if (!rtctl_print_raw(root, as_json, status)) {
            printf("%s\n", rtctl_str(root, "outcome", "done"));
        }
        json_decref(root);
        return status == 200 ? 0 : 1;
    }
    fprintf(stderr, "rtctl: unknown command '%s' (try --help)\n", cmd);
    return 2;
}
