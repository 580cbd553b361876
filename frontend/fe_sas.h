/* Shared access signatures (docs/table-api-spec.md §7.3 service SAS for
 * tables, §7.4 account SAS): parsing the token out of the query string,
 * the string-to-sign, HMAC-SHA256 against key1/key2 in constant time, the
 * stored-policy merge for "si", the time / IP / protocol checks and the
 * permission, resource-type and PartitionKey/RowKey-range authorization of
 * each operation.
 *
 * Two layers:
 *  - pure (any thread, no fe_req): fe_sas_parse(), fe_sas_string_to_sign(),
 *    fe_sas_verify(), fe_sas_allows(), fe_sas_key_in_range(). The unit
 *    tests drive these with tokens made by the Python SDK.
 *  - request glue (the request's worker thread, called from fe_api.c):
 *    fe_sas_authenticate() -> fe_sas_authorize() -> fe_sas_check_job() ->
 *    (loop runs the job) -> fe_sas_filter_scan(); fe_sas_check_op() is the
 *    per-operation check for entity group transactions. Each returns 0 when
 *    the request may go on (always 0 for a request without SAS) or -1 with
 *    the 403 response already set in @req.
 *
 * Ownership: the verified token lives in req->sas (fe_sas_free() releases
 * it, from fe_api_req_free); nothing here logs a signature or a key. */
#ifndef FE_SAS_H
#define FE_SAS_H

#include <stddef.h>
#include <stdint.h>

#include "fe_auth.h"
#include "fe_op.h"
#include "rt_buf.h"

struct fe_req;

/* Operation kinds of fe_sas_check_op(): the Rt__OpKind values of
 * proto/rt.proto (OP_INSERT .. OP_UPSERT_MERGE) for writes, plus: */
#define FE_SAS_OP_READ FE_OP_KIND_READ /* a GET of one entity or a query */

/* Table SAS permission bits (sp of a service SAS, spec §7.3). */
enum {
    FE_SAS_P_READ = 1,   /* r: query / get entities */
    FE_SAS_P_ADD = 2,    /* a: insert */
    FE_SAS_P_UPDATE = 4, /* u: update / merge */
    FE_SAS_P_DELETE = 8, /* d: delete entity */
};
/* Account SAS permission bits (spec §7.4: r w d l a c u p). */
enum {
    FE_SAS_A_READ = 1,
    FE_SAS_A_WRITE = 2,
    FE_SAS_A_DELETE = 4,
    FE_SAS_A_LIST = 8,
    FE_SAS_A_ADD = 16,
    FE_SAS_A_CREATE = 32,
    FE_SAS_A_UPDATE = 64,
    FE_SAS_A_PROCESS = 128,
};
/* Every letter an account SAS sp may hold, bit i = letter i: the eight
 * above, then the blob/file ones that grant nothing on tables. */
#define FE_SAS_A_LETTERS "rwdlacupxytfi"

/* Account SAS resource types (srt). */
enum {
    FE_SAS_RT_SERVICE = 1,   /* s */
    FE_SAS_RT_CONTAINER = 2, /* c: tables */
    FE_SAS_RT_OBJECT = 4,    /* o: entities */
};

enum fe_sas_kind {
    FE_SAS_NONE = 0,
    FE_SAS_SERVICE, /* tn=...: one table */
    FE_SAS_ACCOUNT, /* ss/srt=...: the account */
};

/* The token's fields, percent-decoded (the query string is decoded once by
 * fe_url), borrowed from the query; NULL = absent. */
struct fe_sas_params
{
    const char *sv, *sig;
    const char *sp, *st, *se, *sip, *spr;
    const char *tn, *si, *spk, *srk, *epk, *erk; /* service SAS */
    const char *ss, *srt, *ses;                  /* account SAS */
};

/* A stored access policy as the front end's map holds it (Set Table ACL,
 * spec §3.5); empty strings mean absent. */
#define FE_SAS_TIME_MAX 40
struct fe_sas_policy
{
    char start[FE_SAS_TIME_MAX];
    char expiry[FE_SAS_TIME_MAX];
    char permission[8];
};

/* Looks up stored policy @id of @account's table @table (any case).
 * Returns 0 (filled @out) or RT_ENOTFOUND. Must be thread-safe. */
typedef int (*fe_sas_policy_fn)(const char *account,
                                const char *table,
                                const char *id,
                                struct fe_sas_policy *out);

/* Everything fe_sas_verify needs besides the token (all borrowed). */
struct fe_sas_ctx
{
    const struct fe_accounts *accounts;
    const char *account;     /* from the URL ("-secondary" stripped) */
    const char *table;       /* the addressed table, NULL when the resource
                              * has none (or it is known only later: batch) */
    int64_t now;             /* Unix seconds */
    uint64_t now_ticks;      /* the same instant in ticks, to the 100 ns
                              * (0 = @now): a token made with st = the
                              * client's "now" in milliseconds is valid at
                              * once, not a second later */
    const char *client_ip;   /* textual IPv4/IPv6, NULL = unknown */
    int https;               /* the request came over TLS */
    fe_sas_policy_fn policy; /* NULL: every "si" is unknown */
};

/* A verified token: what the request may do. */
struct fe_sas
{
    enum fe_sas_kind kind;
    char sv[16];
    unsigned perms; /* FE_SAS_P_* (service) or FE_SAS_A_* (account),
                     * after the "si" merge */
    unsigned srt;   /* account: FE_SAS_RT_* */
    char *tn;       /* service: table name as signed (malloc'd) */
    char *spk, *srk, *epk, *erk; /* service: key range, NULL = open */
};

/* Fills @p from a decoded query (@get returns a value or NULL). Returns
 * FE_SAS_SERVICE, FE_SAS_ACCOUNT, or RT_EAUTH when the query has "sig" but
 * no sv, or neither tn nor ss/srt. */
typedef const char *(*fe_sas_get_fn)(const void *q, const char *key);
int fe_sas_parse(const void *query, fe_sas_get_fn get, struct fe_sas_params *p);

/* String-to-sign of @p for @account (spec §7.3 / §7.4), appended to @out:
 *  service, sv >= 2015-04-05: sp\nst\nse\n/table/{account}/{lower(tn)}\n
 *    si\nsip\nspr\nsv\nspk\nsrk\nepk\nerk
 *  service, older sv (legacy, unverified): no sip/spr lines, resource
 *    /{account}/{lower(tn)}
 *  account: account\nsp\nss\nsrt\nst\nse\nsip\nspr\nsv\n (+ ses\n when
 *    sv >= 2020-12-06). */
void fe_sas_string_to_sign(struct rt_buf *out,
                           enum fe_sas_kind kind,
                           const struct fe_sas_params *p,
                           const char *account);

/* Request-level checks, in the documented order (spec §7.3): signature
 * (key1 or key2, constant time) -> tn equals ctx->table (when known) ->
 * "si" merge (unknown id, or a field in both -> AuthenticationFailed) ->
 * start/expiry -> sip -> spr; account SAS: signature -> sv >= 2015-04-05,
 * sp/srt/ss well formed (an empty srt fails) -> times -> sip -> spr -> ss
 * has "t". Times compare to the 100 ns (ctx->now_ticks). On 0, @out is
 * filled (free with fe_sas_clear).
 * Errors: RT_EAUTH, RT_ESOURCEIP, RT_EPROTOCOL, RT_ESERVICE.
 * @why (RT_ERRMSG_SIZE) gets a reason for the log. */
int fe_sas_verify(const struct fe_sas_params *p,
                  enum fe_sas_kind kind,
                  const struct fe_sas_ctx *ctx,
                  struct fe_sas *out,
                  char *why);
void fe_sas_clear(struct fe_sas *s);

/* Operation classes for fe_sas_allows(). */
enum fe_sas_opclass {
    FE_SAS_C_SERVICE_READ,  /* get service properties / stats */
    FE_SAS_C_SERVICE_WRITE, /* set service properties */
    FE_SAS_C_LIST_TABLES,
    FE_SAS_C_CREATE_TABLE,
    FE_SAS_C_DELETE_TABLE,
    FE_SAS_C_GET_TABLE,
    FE_SAS_C_ACL,    /* get/set table ACL: Shared Key only */
    FE_SAS_C_QUERY,  /* query entities */
    FE_SAS_C_ENTITY, /* one entity op: @op_kind says which */
};

/* May @s do @cls (for FE_SAS_C_ENTITY: @op_kind, an Rt__OpKind or
 * FE_SAS_OP_READ)? Returns 0, RT_ERESTYPE, RT_EPERM or RT_EAUTHZ
 * (ACLs). Mapping: spec §7.3 (r; a; u; a+u for upserts; d) and the account
 * SAS matrix of spec §7.4 (resource type checked before permission). */
int fe_sas_allows(const struct fe_sas *s, enum fe_sas_opclass cls, int op_kind);

/* Is (pk, rk) inside the service SAS key range [ (spk,srk), (epk,erk) ]
 * (ordinal, inclusive; a missing srk/erk leaves that end open within its
 * PartitionKey)? 1 or 0. */
int fe_sas_key_in_range(const struct fe_sas *s, const char *pk, const char *rk);

/* ---- request glue (fe_api.c) ---- */

/* The query has "sig": parses and verifies the token (fe_sas_verify with
 * the stored policies @policy looks up (NULL: every "si" is unknown), the
 * client address and the clock), stores it in req->sas and makes sv the
 * request's version. 0 or -1 (response set: 403 with the code of the
 * failed check). */
int fe_sas_authenticate(struct fe_req *req, fe_sas_policy_fn policy);
/* After routing, before the operation's prepare: resource type and
 * permission of the operation @verb (after X-HTTP-Method) addresses. $batch
 * is left to fe_sas_check_job / fe_sas_check_op. 0 or -1. */
int fe_sas_authorize(struct fe_req *req, const char *verb);
/* After a successful prepare: every op of req->job (tn, permission, key
 * range; batches included); a query's start is clamped to the range. 0 or
 * -1 (the job must not be submitted). */
int fe_sas_check_job(struct fe_req *req);
/* One operation of an entity group transaction on @table with keys
 * @pk/@rk: @op_kind is an Rt__OpKind or FE_SAS_OP_READ. 0 or -1. */
int fe_sas_check_op(struct fe_req *req,
                    int op_kind,
                    const char *table,
                    const char *pk,
                    const char *rk);
/* Before a finished query is written: drops entities past the SAS key
 * range and a continuation that points past it. */
void fe_sas_filter_scan(struct fe_req *req);
/* The 403 response for @code (one of the errors above, all rt_err.h
 * codes). Returns -1. */
int fe_sas_respond(struct fe_req *req, int code);
/* Releases req->sas (NULL-safe). */
void fe_sas_free(struct fe_req *req);

#endif
