/* Incremental HTTP/1.1 response parser for rt-load: status line, headers
 * (Content-Length, Transfer-Encoding: chunked, Connection: close, ETag,
 * x-ms-error-code, x-ms-continuation-NextPartitionKey/NextRowKey), and the
 * body by Content-Length, by chunks, or up to the end of the connection.
 * The body is not stored: it is scanned on the fly to count entities
 * ("RowKey": occurrences) or, for $batch, to read each part's status line;
 * its first bytes are kept for error messages. Bytes may arrive split at
 * any point. No allocation.
 * Thread: a parser belongs to one connection. */
#ifndef RL_HTTP_H
#define RL_HTTP_H

#include <stddef.h>
#include <stdint.h>

enum rl_body_mode {
    RL_BODY_IGNORE,
    RL_BODY_ENTITIES, /* count "RowKey": */
    RL_BODY_BATCH,    /* status of each "HTTP/1.1 NNN" part */
};

enum rl_resp_state {
    RL_RESP_STATUS,
    RL_RESP_HEADERS,
    RL_RESP_BODY_CL,
    RL_RESP_CHUNK_SIZE,
    RL_RESP_CHUNK_DATA,
    RL_RESP_CHUNK_CRLF,
    RL_RESP_TRAILER,
    RL_RESP_BODY_EOF,
    RL_RESP_DONE,
};

#define RL_HDR_LINE_MAX 2048
#define RL_CONT_MAX 512

struct rl_resp
{
    /* Results */
    int status;
    int64_t content_length; /* -1 = none */
    int chunked;
    int conn_close;
    uint64_t body_bytes;
    uint64_t entities; /* RL_BODY_ENTITIES */
    unsigned parts;    /* RL_BODY_BATCH: part status lines seen */
    int part_fail;     /* first part status >= 300, 0 if none */
    char etag[128];
    char next_pk[RL_CONT_MAX];
    char next_rk[RL_CONT_MAX];
    char error_code[64];
    char body_head[160];
    size_t body_head_len;
    /* Parser state */
    enum rl_resp_state state;
    enum rl_body_mode mode;
    int head_request;
    char line[RL_HDR_LINE_MAX];
    size_t line_len;
    uint64_t remaining; /* body or chunk bytes left */
    unsigned match;     /* needle matcher position */
    int capture;        /* status digits still to read after the needle */
    int cap_val;
};

/* Resets for a new response: initialises every result and parser field
 * (@r may be uninitialised memory). For the answer to a HEAD request, set
 * head_request = 1 after this call. */
void rl_resp_begin(struct rl_resp *r, enum rl_body_mode mode);
/* Feeds @n bytes. Returns 1 when the response is complete (*@used = bytes
 * consumed; the rest belongs to the next response), 0 when more is needed
 * (all consumed), -1 on a protocol error. */
int rl_resp_feed(struct rl_resp *r, const char *p, size_t n, size_t *used);
/* The connection closed: returns 1 if that completes the response (body
 * delimited by the close), else 0. */
int rl_resp_eof(struct rl_resp *r);

#endif
