/* Request building for rt-load: every request is written into the
 * caller's buffer from templates prepared once (the constant header block,
 * the entity body and the $batch part with fixed-width key slots), then the
 * keys are patched in and the request is signed. No allocation per request.
 * With rl_reqcfg.etcd set, the same entity ids become etcd v3 JSON gateway
 * calls instead (put: POST /v3/kv/put, get: POST /v3/kv/range, base64 key
 * and value), so one client measures both systems.
 * Thread: a prepared struct rl_reqcfg is read-only (any thread). */
#ifndef RL_REQ_H
#define RL_REQ_H

#include <stddef.h>
#include <stdint.h>

#include "rl_auth.h"
#include "rl_keys.h"

enum rl_auth_kind {
    RL_AUTH_SHAREDKEY,
    RL_AUTH_SHAREDKEYLITE,
    RL_AUTH_SAS,
    RL_AUTH_NONE,
};

struct rl_target
{
    char host[256]; /* TCP destination */
    int port;
    char host_header[300]; /* Host: */
    char origin[400];      /* "http://host[:port]" for $batch inner URLs */
    char base_path[128];   /* "/account" (path-style) or "" (host-style) */
    char account[RL_ACCOUNT_MAX];
    int path_style;
    enum rl_auth_kind auth;
    struct rl_signer signer;
    int have_key;
    char sas[1024]; /* query string, no '?' */
    char table[80];
};

/* Parses an endpoint URL "http://host[:port][/account]" into @t (account
 * from the first path segment for IP/localhost/dotless hosts, else from the
 * first DNS label; @account non-empty overrides). Returns 0 or -1. */
int rl_target_parse(struct rl_target *t,
                    const char *url,
                    const char *account,
                    char *err);

enum rl_slot_kind { RL_SLOT_PK, RL_SLOT_RK, RL_SLOT_BUCKET, RL_SLOT_TAG };

struct rl_tmpl
{
    char *p;
    size_t n;
    int nslots;
    struct
    {
        uint32_t off;
        uint8_t kind;
    } slot[8];
};

struct rl_reqcfg
{
    struct rl_target t;
    struct rl_keymap km;
    uint64_t entity_size;
    unsigned props;
    unsigned page_size;    /* $top of page/scan/partition queries */
    unsigned range_len;    /* $top of row-range queries */
    char scan_filter[512]; /* URL-encoded $filter of the scan op */
    int etcd;              /* talk to etcd's v3 JSON gateway, not Azure */
    /* Prepared */
    char common[1024]; /* constant headers */
    size_t common_len;
    struct rl_tmpl body;        /* entity JSON */
    struct rl_tmpl part_insert; /* $batch changeset part: POST /t */
    struct rl_tmpl part_upsert; /* $batch changeset part: PUT /t(PK,RK) */
    char *etcd_value;   /* base64 of the entity_size-byte value (etcd) */
    size_t max_request; /* buffer size that fits any request */
    unsigned max_batch;
};

/* Prepares the templates; @max_batch is the largest batch to fit.
 * Returns 0 or -1. rl_reqcfg_free releases them. */
int rl_reqcfg_prepare(struct rl_reqcfg *c, unsigned max_batch, char *err);
void rl_reqcfg_free(struct rl_reqcfg *c);

enum rl_rq {
    RL_RQ_CREATE_TABLE,
    RL_RQ_INSERT,
    RL_RQ_GET,
    RL_RQ_UPSERT,
    RL_RQ_UPSERT_MERGE,
    RL_RQ_UPDATE,
    RL_RQ_MERGE, /* If-Match: * unless args->etag */
    RL_RQ_DELETE,
    RL_RQ_QPOINT,
    RL_RQ_QROWS,
    RL_RQ_QPARTS,
    RL_RQ_SCAN, /* with args->next_pk/next_rk when continuing */
    RL_RQ_PAGE,
    RL_RQ_BATCH_INSERT, /* n parts: pk index, batch rows brow0.. */
    RL_RQ_BATCH_UPSERT, /* n parts: ids id0 + k * id_step */
};

struct rl_reqargs
{
    enum rl_rq rq;
    int64_t id;          /* entity ops, queries */
    const char *etag;    /* MERGE with a condition */
    const char *next_pk; /* SCAN continuation (raw header values) */
    const char *next_rk;
    unsigned n;           /* batch parts */
    uint64_t pk_index;    /* BATCH_INSERT */
    uint64_t brow0;       /* BATCH_INSERT: first batch row */
    int64_t id0, id_step; /* BATCH_UPSERT */
};

/* Writes the request into @buf (rl_reqcfg.max_request bytes) signed with
 * @date (RFC 1123). Returns its length. With rl_reqcfg.etcd, INSERT,
 * UPSERT, UPDATE and MERGE write a put of the entity's key, GET a range read
 * of it; other kinds are refused by the option checks (0 is returned). */
size_t rl_req_build(const struct rl_reqcfg *c,
                    const struct rl_reqargs *a,
                    const char *date,
                    char *buf);

#endif
