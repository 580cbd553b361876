/* rtctl: the operator's command line. Talks to the master's status HTTP API
 * (plain blocking HTTP/1.0: it is a CLI, one request per run).
 *
 *   rtctl status [--json] [--master-http HOST:PORT]
 *
 * The master is found without flags: --master-http, else $RT_MASTER_HTTP,
 * else 127.0.0.1:10101 (rt-master's default --http).
 * Exit: 0 ok, 1 master unreachable or bad answer, 2 usage. */
#include <errno.h>
#include <jansson.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#define RTCTL_DEFAULT_MASTER "127.0.0.1:10101"
#define RTCTL_TIMEOUT_S 5
#define RTCTL_MAX_BODY (64u * 1024u * 1024u)

static void rtctl_usage(FILE *out)
{
    fprintf(out,
            "Usage: rtctl [--master-http HOST:PORT] COMMAND [options]\n"
            "\n"
            "Commands:\n"
            "  status [--json]   servers and ranges of the cluster, from the\n"
            "                    master's GET /api/status (--json: as JSON)\n"
            "\n"
            "Options:\n"
            "  --master-http HOST:PORT  master status API (default: "
            "$RT_MASTER_HTTP,\n"
            "                           else " RTCTL_DEFAULT_MASTER
            ")\n"
            "  --help                   print this help and exit\n");
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

static int rtctl_connect(const char *addr, char *err, size_t errlen)
{
    char host[256], port[16];
    struct addrinfo hints, *res, *ai;
    struct timeval tv = {RTCTL_TIMEOUT_S, 0};
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

/* GET @path from @addr. On 0, *body (malloc'd, NUL-terminated) holds the
 * response body and *status the HTTP status. */
static int rtctl_http_get(const char *addr,
                          const char *path,
                          int *status,
                          char **body,
                          char *err,
                          size_t errlen)
{
    char req[512];
    char *buf = NULL, *p;
    size_t len = 0, cap = 0;
    int fd, n;

    fd = rtctl_connect(addr, err, errlen);
    if (fd < 0) {
        return -1;
    }
    n = snprintf(req, sizeof(req),
                 "GET %s HTTP/1.0\r\nHost: %s\r\nAccept: application/json"
                 "\r\nConnection: close\r\n\r\n",
                 path, addr);
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

/* ---- status ---- */

static const char *rtctl_str(json_t *o, const char *key, const char *dflt)
{
    json_t *v = json_object_get(o, key);
    return json_is_string(v) ? json_string_value(v) : dflt;
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

static void rtctl_print_table(json_t *root)
{
    json_t *servers = json_object_get(root, "servers");
    json_t *ranges = json_object_get(root, "ranges");
    json_t *v = json_object_get(root, "map_version");
    struct rtctl_tab t = {0};
    char num[4][32];
    size_t i;
    json_t *o;

    if (json_is_integer(v)) {
        printf("map version %lld\n\n", (long long)json_integer_value(v));
    }
    printf("SERVERS\n");
    t.ncols = 4;
    rtctl_tab_add(&t, (char *[]){rtctl_dup("ID"), rtctl_dup("ADDR"),
                                 rtctl_dup("STATE"), rtctl_dup("RANGES")});
    json_array_foreach (servers, i, o) {
        rtctl_int(o, "id", num[0], sizeof(num[0]));
        rtctl_int(o, "ranges", num[1], sizeof(num[1]));
        rtctl_tab_add(&t, (char *[]){rtctl_dup(num[0]),
                                     rtctl_dup(rtctl_str(o, "addr", "")),
                                     rtctl_dup(rtctl_str(o, "state", "?")),
                                     rtctl_dup(num[1])});
    }
    rtctl_tab_print(&t);

    printf("\nRANGES\n");
    t.ncols = 6;
    rtctl_tab_add(&t, (char *[]){rtctl_dup("ID"), rtctl_dup("TABLE"),
                                 rtctl_dup("LOW"), rtctl_dup("HIGH"),
                                 rtctl_dup("SERVER"), rtctl_dup("EPOCH")});
    json_array_foreach (ranges, i, o) {
        rtctl_int(o, "id", num[0], sizeof(num[0]));
        rtctl_int(o, "server", num[1], sizeof(num[1]));
        rtctl_int(o, "epoch", num[2], sizeof(num[2]));
        rtctl_tab_add(&t, (char *[]){rtctl_dup(num[0]),
                                     rtctl_dup(rtctl_str(o, "table", "?")),
                                     rtctl_bound(json_object_get(o, "low")),
                                     rtctl_bound(json_object_get(o, "high")),
                                     rtctl_dup(num[1]), rtctl_dup(num[2])});
    }
    rtctl_tab_print(&t);
}

static int rtctl_status(const char *addr, int as_json)
{
    char err[512];
    char *body = NULL;
    json_error_t jerr;
    json_t *root;
    int status = 0;

    if (rtctl_http_get(addr, "/api/status", &status, &body, err, sizeof(err)) !=
        0) {
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

int main(int argc, char **argv)
{
    const char *addr = getenv("RT_MASTER_HTTP");
    const char *cmd = NULL;
    int as_json = 0;

    if (!addr || !*addr) {
        addr = RTCTL_DEFAULT_MASTER;
    }
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h") || !strcmp(a, "help")) {
            rtctl_usage(stdout);
            return 0;
        } else if (!strcmp(a, "--json")) {
            as_json = 1;
        } else if (!strcmp(a, "--master-http")) {
            if (i + 1 >= argc) {
                fprintf(stderr, "rtctl: --master-http needs HOST:PORT\n");
                return 2;
            }
            addr = argv[++i];
        } else if (!strncmp(a, "--master-http=", 14)) {
            addr = a + 14;
        } else if (a[0] == '-') {
            fprintf(stderr, "rtctl: unknown option '%s' (try --help)\n", a);
            return 2;
        } else if (!cmd) {
            cmd = a;
        } else {
            fprintf(stderr, "rtctl: unexpected argument '%s'\n", a);
            return 2;
        }
    }
    if (!cmd) {
        rtctl_usage(stderr);
        return 2;
    }
    if (!strcmp(cmd, "status")) {
        return rtctl_status(addr, as_json);
    }
    fprintf(stderr, "rtctl: unknown command '%s' (try --help)\n", cmd);
    return 2;
}
