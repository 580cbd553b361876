#include "rl_http.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

void rl_resp_begin(struct rl_resp *r, enum rl_body_mode mode)
{
    r->status = 0;
    r->content_length = -1;
    r->chunked = 0;
    r->conn_close = 0;
    r->body_bytes = 0;
    r->entities = 0;
    r->parts = 0;
    r->part_fail = 0;
    r->etag[0] = '\0';
    r->next_pk[0] = '\0';
    r->next_rk[0] = '\0';
    r->error_code[0] = '\0';
    r->body_head_len = 0;
    r->body_head[0] = '\0';
    r->state = RL_RESP_STATUS;
    r->mode = mode;
    r->head_request = 0; /* callers parsing a HEAD answer set it after */
    r->line_len = 0;
    r->remaining = 0;
    r->match = 0;
    r->capture = 0;
    r->cap_val = 0;
}

static void rl__copy_val(char *dst, size_t cap, const char *v, size_t n)
{
    if (n >= cap) {
        n = cap - 1;
    }
    memcpy(dst, v, n);
    dst[n] = '\0';
}

/* One header line (no CR/LF). */
static void rl__header(struct rl_resp *r, const char *l, size_t n)
{
    const char *colon = memchr(l, ':', n);
    const char *v, *e;
    size_t kn;
    if (!colon) {
        return;
    }
    kn = (size_t)(colon - l);
    v = colon + 1;
    e = l + n;
    while (v < e && (*v == ' ' || *v == '\t')) {
        v++;
    }
    while (e > v && (e[-1] == ' ' || e[-1] == '\t')) {
        e--;
    }
#define KEY(lit) (kn == sizeof(lit) - 1 && strncasecmp(l, lit, kn) == 0)
    if (KEY("content-length")) {
        r->content_length = strtoll(v, NULL, 10);
    } else if (KEY("transfer-encoding")) {
        /* "chunked" is the last coding when present. */
        if ((size_t)(e - v) >= 7 && strncasecmp(e - 7, "chunked", 7) == 0) {
            r->chunked = 1;
        }
    } else if (KEY("connection")) {
        if ((size_t)(e - v) == 5 && strncasecmp(v, "close", 5) == 0) {
            r->conn_close = 1;
        }
    } else if (KEY("etag")) {
        rl__copy_val(r->etag, sizeof(r->etag), v, (size_t)(e - v));
    } else if (KEY("x-ms-error-code")) {
        rl__copy_val(r->error_code, sizeof(r->error_code), v, (size_t)(e - v));
    } else if (KEY("x-ms-continuation-nextpartitionkey")) {
        rl__copy_val(r->next_pk, sizeof(r->next_pk), v, (size_t)(e - v));
    } else if (KEY("x-ms-continuation-nextrowkey")) {
        rl__copy_val(r->next_rk, sizeof(r->next_rk), v, (size_t)(e - v));
    }
#undef KEY
}

/* Body bytes: counted, scanned, first bytes kept. */
static void rl__body(struct rl_resp *r, const char *p, size_t n)
{
    static const char ent[] = "\"RowKey\":";
    static const char part[] = "HTTP/1.1 ";
    const char *needle;
    size_t nl;
    r->body_bytes += n;
    if (r->body_head_len + 1 < sizeof(r->body_head)) {
        size_t k = sizeof(r->body_head) - 1 - r->body_head_len;
        if (k > n) {
            k = n;
        }
        memcpy(r->body_head + r->body_head_len, p, k);
        r->body_head_len += k;
        r->body_head[r->body_head_len] = '\0';
    }
    if (r->mode == RL_BODY_IGNORE) {
        return;
    }
    needle = r->mode == RL_BODY_ENTITIES ? ent : part;
    nl = r->mode == RL_BODY_ENTITIES ? sizeof(ent) - 1 : sizeof(part) - 1;
    for (size_t i = 0; i < n; i++) {
        char c = p[i];
        if (r->capture) {
            if (c >= '0' && c <= '9') {
                r->cap_val = r->cap_val * 10 + (c - '0');
                if (--r->capture == 0) {
                    r->parts++;
                    if (r->cap_val >= 300 && !r->part_fail) {
                        r->part_fail = r->cap_val;
                    }
                }
            } else {
                r->capture = 0;
            }
            continue;
        }
        if (c == needle[r->match]) {
            if (++r->match == nl) {
                r->match = 0;
                if (r->mode == RL_BODY_ENTITIES) {
                    r->entities++;
                } else {
                    r->capture = 3;
                    r->cap_val = 0;
                }
            }
        } else {
            /* Neither needle repeats its first character inside a
             * partial match except at the start ('"' / 'H'). */
            r->match = c == needle[0] ? 1 : 0;
        }
    }
}

static int rl__status_line(struct rl_resp *r, const char *l, size_t n)
{
    /* HTTP/1.x SP 3DIGIT ... */
    if (n < 12 || strncmp(l, "HTTP/1.", 7) != 0 || l[8] != ' ' ||
        !isdigit((unsigned char)l[9]) || !isdigit((unsigned char)l[10]) ||
        !isdigit((unsigned char)l[11])) {
        return -1;
    }
    r->status = (l[9] - '0') * 100 + (l[10] - '0') * 10 + (l[11] - '0');
    if (l[7] == '0') {
        r->conn_close = 1; /* HTTP/1.0: close unless told otherwise */
    }
    return 0;
}

/* After the blank line ending the headers: choose how the body ends. */
static void rl__headers_done(struct rl_resp *r)
{
    if (r->status >= 100 && r->status < 200) {
        /* Interim response (100 Continue): the real one follows. */
        r->state = RL_RESP_STATUS;
        return;
    }
    if (r->head_request || r->status == 204 || r->status == 304) {
        r->state = RL_RESP_DONE;
    } else if (r->chunked) {
        r->state = RL_RESP_CHUNK_SIZE;
    } else if (r->content_length >= 0) {
        r->remaining = (uint64_t)r->content_length;
        r->state = r->remaining ? RL_RESP_BODY_CL : RL_RESP_DONE;
    } else {
        r->state = RL_RESP_BODY_EOF;
    }
}

int rl_resp_feed(struct rl_resp *r, const char *p, size_t n, size_t *used)
{
    size_t i = 0;
    while (i < n && r->state != RL_RESP_DONE) {
        switch (r->state) {
            case RL_RESP_STATUS:
            case RL_RESP_HEADERS:
            case RL_RESP_CHUNK_SIZE:
            case RL_RESP_CHUNK_CRLF:
            case RL_RESP_TRAILER: {
                /* Line-oriented states: gather one line. */
                const char *nl = memchr(p + i, '\n', n - i);
                size_t k = nl ? (size_t)(nl - (p + i)) : n - i;
                size_t room = sizeof(r->line) - r->line_len;
                size_t len;
                if (k < room) {
                    memcpy(r->line + r->line_len, p + i, k);
                    r->line_len += k;
                } else {
                    memcpy(r->line + r->line_len, p + i, room);
                    r->line_len += room; /* truncated: long lines are ignored */
                }
                i += k;
                if (!nl) {
                    break;
                }
                i++; /* the LF */
                len = r->line_len;
                if (len && r->line[len - 1] == '\r') {
                    len--;
                }
                r->line_len = 0;
                if (r->state == RL_RESP_STATUS) {
                    if (len == 0) {
                        continue; /* stray CRLF between responses */
                    }
                    if (rl__status_line(r, r->line, len) != 0) {
                        return -1;
                    }
                    r->state = RL_RESP_HEADERS;
                } else if (r->state == RL_RESP_HEADERS) {
                    if (len == 0) {
                        rl__headers_done(r);
                    } else {
                        rl__header(r, r->line, len);
                    }
                } else if (r->state == RL_RESP_CHUNK_SIZE) {
                    char *end;
                    unsigned long long sz;
                    if (len >= sizeof(r->line)) {
                        len = sizeof(r->line) - 1;
                    }
                    r->line[len] = '\0';
                    sz = strtoull(r->line, &end, 16);
                    if (end == r->line) {
                        return -1;
                    }
                    if (sz == 0) {
                        r->state = RL_RESP_TRAILER;
                    } else {
                        r->remaining = sz;
                        r->state = RL_RESP_CHUNK_DATA;
                    }
                } else if (r->state == RL_RESP_CHUNK_CRLF) {
                    if (len != 0) {
                        return -1;
                    }
                    r->state = RL_RESP_CHUNK_SIZE;
                } else { /* trailer */
                    if (len == 0) {
                        r->state = RL_RESP_DONE;
                    }
                }
                break;
            }
            case RL_RESP_BODY_CL:
            case RL_RESP_CHUNK_DATA: {
                size_t k = n - i;
                if ((uint64_t)k > r->remaining) {
                    k = (size_t)r->remaining;
                }
                rl__body(r, p + i, k);
                i += k;
                r->remaining -= k;
                if (r->remaining == 0) {
                    r->state = r->state == RL_RESP_BODY_CL ? RL_RESP_DONE
                                                           : RL_RESP_CHUNK_CRLF;
                }
                break;
            }
            case RL_RESP_BODY_EOF:
                rl__body(r, p + i, n - i);
                i = n;
                break;
            case RL_RESP_DONE:
                break;
        }
    }
    *used = i;
    return r->state == RL_RESP_DONE ? 1 : 0;
}

int rl_resp_eof(struct rl_resp *r)
{
    if (r->state == RL_RESP_BODY_EOF) {
        r->state = RL_RESP_DONE;
        return 1;
    }
    return r->state == RL_RESP_DONE;
}
