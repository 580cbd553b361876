/* Shared access signatures: see fe_sas.h.
 *
 * Happy path of a service SAS request: fe_sas_authenticate (token parsed,
 * signature and time checked, stored policy merged, sv becomes the
 * version) -> fe_sas_authorize (the operation needs a permission the token
 * has) -> the operation's prepare builds the job -> fe_sas_check_job (every
 * op's keys are inside spk..erk; a query starts at the range) -> the job
 * runs -> fe_sas_filter_scan (a query page stops at the range end).
 *
 * Failure modes and what the client sees (spec §7.3, §7.4, §8.2), all 403:
 * bad or missing fields, signature, table name, time window, unknown or
 * conflicting stored policy -> AuthenticationFailed; sip ->
 * AuthorizationSourceIPMismatch; spr -> AuthorizationProtocolMismatch;
 * account SAS without ss=t -> AuthorizationServiceMismatch; an operation on
 * a resource type the token does not cover ->
 * AuthorizationResourceTypeMismatch; a missing permission ->
 * AuthorizationPermissionMismatch; keys outside the token's range, and
 * table ACLs (Shared Key only) -> AuthorizationFailure. */
#include "fe_sas.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

#include "fe_auth.h"
#include "fe_op.h"
#include "fe_req.h"
#include "rt.pb-c.h"
#include "rt_alloc.h"
#include "rt_err.h"
#include "rt_log.h"
#include "rt_time.h"
#include "rt_utf8.h"

/* sip/spr lines and the "/table" resource prefix (spec §7.3). */
#define FE_SAS_SV_MODERN "2015-04-05"
/* Account SAS "ses" line (spec §7.4, §11). */
#define FE_SAS_SV_SES "2020-12-06"
/* Table SAS exist since 2012-02-12. */
#define FE_SAS_SV_MIN "2012-02-12"

/* ---- Parsing ---------------------------------------------------------- */

int fe_sas_parse(const void *query, fe_sas_get_fn get, struct fe_sas_params *p)
{
    memset(p, 0, sizeof(*p));
    p->sv = get(query, "sv");
    p->sig = get(query, "sig");
    p->sp = get(query, "sp");
    p->st = get(query, "st");
    p->se = get(query, "se");
    p->sip = get(query, "sip");
    p->spr = get(query, "spr");
    p->tn = get(query, "tn");
    p->si = get(query, "si");
    p->spk = get(query, "spk");
    p->srk = get(query, "srk");
    p->epk = get(query, "epk");
    p->erk = get(query, "erk");
    p->ss = get(query, "ss");
    p->srt = get(query, "srt");
    p->ses = get(query, "ses");
    if (!p->sig || !p->sv) {
        return RT_EAUTH;
    }
    if (p->ss || p->srt) {
        return FE_SAS_ACCOUNT;
    }
    if (p->tn) {
        return FE_SAS_SERVICE;
    }
    return RT_EAUTH; /* a blob/queue style token (sr=...) */
}

void fe_sas_string_to_sign(struct rt_buf *out,
                           enum fe_sas_kind kind,
                           const struct fe_sas_params *p,
                           const char *account)
{
    int modern = p->sv && strcmp(p->sv, FE_SAS_SV_MODERN) >= 0;
    if (kind == FE_SAS_ACCOUNT) {
        fe_auth_sts_line(out, account);
        fe_auth_sts_line(out, p->sp);
        fe_auth_sts_line(out, p->ss);
        fe_auth_sts_line(out, p->srt);
        fe_auth_sts_line(out, p->st);
        fe_auth_sts_line(out, p->se);
        fe_auth_sts_line(out, p->sip);
        fe_auth_sts_line(out, p->spr);
        fe_auth_sts_line(out, p->sv);
        if (p->sv && strcmp(p->sv, FE_SAS_SV_SES) >= 0) {
            fe_auth_sts_line(out, p->ses);
        }
        return;
    }
    fe_auth_sts_line(out, p->sp);
    fe_auth_sts_line(out, p->st);
    fe_auth_sts_line(out, p->se);
    /* The account once, also for path-style emulator URLs; the table name
     * lower-cased (the SDKs sign it so). */
    rt_buf_append_str(out, modern ? "/table/" : "/");
    rt_buf_append_str(out, account);
    rt_buf_append_u8(out, '/');
    for (const char *c = p->tn ? p->tn : ""; *c; c++) {
        rt_buf_append_u8(out, (uint8_t)tolower((unsigned char)*c));
    }
    rt_buf_append_u8(out, '\n');
    fe_auth_sts_line(out, p->si);
    if (modern) {
        fe_auth_sts_line(out, p->sip);
        fe_auth_sts_line(out, p->spr);
    }
    fe_auth_sts_line(out, p->sv);
    fe_auth_sts_line(out, p->spk);
    fe_auth_sts_line(out, p->srk);
    fe_auth_sts_line(out, p->epk);
    rt_buf_append_str(out, p->erk ? p->erk : ""); /* no trailing newline */
}

/* ISO 8601 UTC as SAS and stored policies carry it: YYYY-MM-DD,
 * YYYY-MM-DDThh:mm[:ss[.f]]Z (spec §7.3). */
static int fe__sas_time(const char *s, uint64_t *ticks)
{
    size_t n = strlen(s);
    if (n == 10) {
        char buf[32];
        snprintf(buf, sizeof(buf), "%sT00:00:00Z", s);
        return rt_time_parse_iso(buf, strlen(buf), ticks);
    }
    if (n < 16 || n > 40) {
        return RT_EINVAL;
    }
    return rt_time_parse_iso(s, n, ticks);
}

/* Permission letters -> bits; every letter must be one of @letters
 * (bit i = letter i). Returns 0 or RT_EAUTH. */
static int fe__perms(const char *s, const char *letters, unsigned *out)
{
    *out = 0;
    for (; *s; s++) {
        const char *at = strchr(letters, *s);
        if (!at) {
            return RT_EAUTH;
        }
        *out |= 1u << (at - letters);
    }
    return 0;
}

static int fe__has_service_t(const char *ss)
{
    return strchr(ss, 't') != NULL;
}

/* ---- Source IP -------------------------------------------------------- */

/* Parses @s as IPv4 (host order in *v4, *is4 = 1) or IPv6 (@v6). An
 * IPv4-mapped IPv6 address counts as IPv4. Returns 0 or -1. */
static int fe__ip(const char *s, int *is4, uint32_t *v4, uint8_t v6[16])
{
    struct in_addr a4;
    struct in6_addr a6;
    if (inet_pton(AF_INET, s, &a4) == 1) {
        *is4 = 1;
        *v4 = ntohl(a4.s_addr);
        return 0;
    }
    if (inet_pton(AF_INET6, s, &a6) == 1) {
        static const uint8_t mapped[12] = {0, 0, 0, 0, 0,    0,
                                           0, 0, 0, 0, 0xff, 0xff};
        if (memcmp(a6.s6_addr, mapped, 12) == 0) {
            *is4 = 1;
            *v4 = ((uint32_t)a6.s6_addr[12] << 24) |
                  ((uint32_t)a6.s6_addr[13] << 16) |
                  ((uint32_t)a6.s6_addr[14] << 8) | a6.s6_addr[15];
            return 0;
        }
        *is4 = 0;
        memcpy(v6, a6.s6_addr, 16);
        return 0;
    }
    return -1;
}

/* 1: @client is allowed by @sip ("a" or "a-b"); 0: not; -1: @sip is
 * malformed. */
static int fe__sip_allows(const char *sip, const char *client)
{
    char lo[64], hi[64];
    const char *dash = strchr(sip, '-');
    int c4, l4, h4;
    uint32_t cv, lv, hv;
    uint8_t c6[16], l6[16], h6[16];
    size_t n;

    if (dash) {
        n = (size_t)(dash - sip);
        if (n == 0 || n >= sizeof(lo) || strlen(dash + 1) >= sizeof(hi)) {
            return -1;
        }
        memcpy(lo, sip, n);
        lo[n] = '\0';
        snprintf(hi, sizeof(hi), "%s", dash + 1);
    } else {
        if (strlen(sip) >= sizeof(lo)) {
            return -1;
        }
        snprintf(lo, sizeof(lo), "%s", sip);
        snprintf(hi, sizeof(hi), "%s", sip);
    }
    if (fe__ip(lo, &l4, &lv, l6) != 0 || fe__ip(hi, &h4, &hv, h6) != 0 ||
        l4 != h4) {
        return -1;
    }
    if (!client || fe__ip(client, &c4, &cv, c6) != 0 || c4 != l4) {
        return 0;
    }
    if (c4) {
        return cv >= lv && cv <= hv;
    }
    return memcmp(c6, l6, 16) >= 0 && memcmp(c6, h6, 16) <= 0;
}

/* ---- Verification ----------------------------------------------------- */

/* A copy of @s, or NULL when @s is NULL. */
static char *fe__dup(const char *s)
{
    return s ? rt_xstrdup(s) : NULL;
}

void fe_sas_clear(struct fe_sas *s)
{
    free(s->tn);
    free(s->spk);
    free(s->srk);
    free(s->epk);
    free(s->erk);
    memset(s, 0, sizeof(*s));
}

/* Time window, sip, spr: shared by both kinds. */
static int fe__sas_common(const char *st,
                          const char *se,
                          const char *sip,
                          const char *spr,
                          const struct fe_sas_ctx *ctx,
                          char *why)
{
    uint64_t now = ctx->now_ticks ? ctx->now_ticks
                                  : RT_TICKS_UNIX_EPOCH +
                                        (uint64_t)ctx->now * RT_TICKS_PER_SEC;
    uint64_t t;
    int ok;

    if (!se || !*se) {
        rt_errmsg_printf(why, "SAS has no expiry (se)");
        return RT_EAUTH;
    }
    if (fe__sas_time(se, &t) != 0) {
        rt_errmsg_printf(why, "SAS expiry not a valid time");
        return RT_EAUTH;
    }
    if (now > t) {
        rt_errmsg_printf(why,
                         "Signature not valid in the specified time "
                         "frame (expired)");
        return RT_EAUTH;
    }
    if (st && *st) {
        if (fe__sas_time(st, &t) != 0) {
            rt_errmsg_printf(why, "SAS start not a valid time");
            return RT_EAUTH;
        }
        if (now < t) {
            rt_errmsg_printf(why,
                             "Signature not valid in the specified "
                             "time frame (not yet valid)");
            return RT_EAUTH;
        }
    }
    if (sip && *sip) {
        ok = fe__sip_allows(sip, ctx->client_ip);
        if (ok < 0) {
            rt_errmsg_printf(why, "SAS sip malformed");
            return RT_EAUTH;
        }
        if (!ok) {
            rt_errmsg_printf(why, "source IP %s outside sip",
                             ctx->client_ip ? ctx->client_ip : "?");
            return RT_ESOURCEIP;
        }
    }
    if (spr && *spr) {
        if (strcmp(spr, "https") == 0) {
            if (!ctx->https) {
                rt_errmsg_printf(why, "SAS requires https");
                return RT_EPROTOCOL;
            }
        } else if (strcmp(spr, "https,http") != 0 &&
                   strcmp(spr, "http,https") != 0) {
            rt_errmsg_printf(why, "SAS spr malformed");
            return RT_EAUTH;
        }
    }
    return 0;
}

/* Merges the stored policy @si of the token's table into sp/st/se
 * (spec §7.3: a field in both the token and the policy is an error). */
static int fe__sas_merge(const struct fe_sas_params *p,
                         const struct fe_sas_ctx *ctx,
                         struct fe_sas_policy *pol,
                         const char **sp,
                         const char **st,
                         const char **se,
                         char *why)
{
    *sp = p->sp;
    *st = p->st;
    *se = p->se;
    if (!p->si) {
        return 0;
    }
    if (strlen(p->si) > 64 || !ctx->policy ||
        ctx->policy(ctx->account, p->tn, p->si, pol) != 0) {
        rt_errmsg_printf(why, "unknown stored access policy (si)");
        return RT_EAUTH;
    }
    if ((p->sp && pol->permission[0]) || (p->st && pol->start[0]) ||
        (p->se && pol->expiry[0])) {
        rt_errmsg_printf(why,
                         "a field is in both the SAS and its stored "
                         "access policy");
        return RT_EAUTH;
    }
    if (pol->permission[0]) {
        *sp = pol->permission;
    }
    if (pol->start[0]) {
        *st = pol->start;
    }
    if (pol->expiry[0]) {
        *se = pol->expiry;
    }
    return 0;
}

int fe_sas_verify(const struct fe_sas_params *p,
                  enum fe_sas_kind kind,
                  const struct fe_sas_ctx *ctx,
                  struct fe_sas *out,
                  char *why)
{
    const struct fe_account *acct;
    struct rt_buf sts = RT_BUF_INIT;
    struct fe_sas_policy pol;
    const char *sp, *st, *se;
    int rc;

    memset(out, 0, sizeof(*out));
    if (!p->sv || fe_hdr_version_check(p->sv) != 0 ||
        strcmp(p->sv, FE_SAS_SV_MIN) < 0 || strlen(p->sv) >= sizeof(out->sv)) {
        rt_errmsg_printf(why, "SAS version (sv) missing or not supported");
        return RT_EAUTH;
    }
    acct = fe_accounts_find(ctx->accounts, ctx->account);
    if (!acct) {
        rt_errmsg_printf(why, "unknown account '%s'", ctx->account);
        return RT_EAUTH;
    }
    if (!p->sig || !*p->sig) {
        rt_errmsg_printf(why, "SAS without sig");
        return RT_EAUTH;
    }
    fe_sas_string_to_sign(&sts, kind, p, acct->name);
    rc = fe_auth_check(acct, (const char *)sts.data, sts.len, p->sig,
                       strlen(p->sig));
    rt_buf_free(&sts);
    if (rc != 0) {
        rt_errmsg_printf(why, "SAS signature mismatch (%s SAS)",
                         kind == FE_SAS_ACCOUNT ? "account" : "service");
        return RT_EAUTH;
    }
    snprintf(out->sv, sizeof(out->sv), "%s", p->sv);

    if (kind == FE_SAS_ACCOUNT) {
        if (strcmp(p->sv, FE_SAS_SV_MODERN) < 0) {
            rt_errmsg_printf(why, "account SAS needs sv >= %s",
                             FE_SAS_SV_MODERN);
            return RT_EAUTH;
        }
        /* The letters of the other services (x y t f i: versions, tags,
         * filter, immutability) are valid in an account SAS that also
         * names them; they grant nothing here. */
        rc = fe__perms(p->sp ? p->sp : "", FE_SAS_A_LETTERS, &out->perms);
        if (rc != 0 || !p->sp || !*p->sp) {
            rt_errmsg_printf(why, "account SAS sp missing or malformed");
            return RT_EAUTH;
        }
        if (!p->srt || !*p->srt) {
            /* azure-data-tables before 12.5 has no
             * ResourceTypes(container=True): it drops the keyword and
             * signs srt="" (ResourceTypes.from_string("c") works). */
            rt_errmsg_printf(why,
                             "account SAS with an empty srt (an SDK "
                             "without the container resource type?)");
            return RT_EAUTH;
        }
        if (fe__perms(p->srt, "sco", &out->srt) != 0 ||
            fe__perms(p->ss ? p->ss : "", "bqtf", &(unsigned){0}) != 0 ||
            !p->ss || !*p->ss) {
            rt_errmsg_printf(why, "account SAS srt/ss missing or malformed");
            return RT_EAUTH;
        }
        rc = fe__sas_common(p->st, p->se, p->sip, p->spr, ctx, why);
        if (rc != 0) {
            return rc;
        }
        if (!fe__has_service_t(p->ss)) {
            rt_errmsg_printf(why, "account SAS not for the table service");
            return RT_ESERVICE;
        }
        out->kind = FE_SAS_ACCOUNT;
        return 0;
    }

    /* Service SAS, in the documented order. */
    if (ctx->table && strcasecmp(ctx->table, p->tn) != 0) {
        rt_errmsg_printf(why, "SAS is for table '%s', not '%s'", p->tn,
                         ctx->table);
        return RT_EAUTH;
    }
    rc = fe__sas_merge(p, ctx, &pol, &sp, &st, &se, why);
    if (rc != 0) {
        return rc;
    }
    if (!sp || !*sp || fe__perms(sp, "raud", &out->perms) != 0) {
        rt_errmsg_printf(why, "SAS permissions (sp) missing or malformed");
        return RT_EAUTH;
    }
    rc = fe__sas_common(st, se, p->sip, p->spr, ctx, why);
    if (rc != 0) {
        return rc;
    }
    if ((p->srk && !p->spk) || (p->erk && !p->epk)) {
        rt_errmsg_printf(why, "SAS row key bound without partition key");
        return RT_EAUTH;
    }
    out->kind = FE_SAS_SERVICE;
    out->tn = fe__dup(p->tn);
    out->spk = fe__dup(p->spk);
    out->srk = fe__dup(p->srk);
    out->epk = fe__dup(p->epk);
    out->erk = fe__dup(p->erk);
    return 0;
}

/* ---- Authorization ---------------------------------------------------- */

/* The permission bits of one kind of token for what an entity op does. */
struct fe__letters
{
    unsigned read;
    unsigned add;
    unsigned update;
    unsigned del;
};

/* Service SAS: table letters (spec §7.3). */
static const struct fe__letters fe__table_letters = {
    FE_SAS_P_READ, FE_SAS_P_ADD, FE_SAS_P_UPDATE, FE_SAS_P_DELETE};
/* Account SAS letters (spec §7.4). */
static const struct fe__letters fe__account_letters = {
    FE_SAS_A_READ, FE_SAS_A_ADD, FE_SAS_A_UPDATE, FE_SAS_A_DELETE};

/* Permission bits entity op @op_kind needs, in @l's letters: an upsert
 * needs both add and update. */
static unsigned fe__need(const struct fe__letters *l, int op_kind)
{
    switch (op_kind) {
        case RT__OP_KIND__OP_INSERT:
            return l->add;
        case RT__OP_KIND__OP_REPLACE:
        case RT__OP_KIND__OP_MERGE:
            return l->update;
        case RT__OP_KIND__OP_DELETE:
            return l->del;
        case RT__OP_KIND__OP_UPSERT_REPLACE:
        case RT__OP_KIND__OP_UPSERT_MERGE:
            return l->add | l->update;
        default:
            return l->read;
    }
}

int fe_sas_allows(const struct fe_sas *s, enum fe_sas_opclass cls, int op_kind)
{
    unsigned rt = 0, all = 0, any = 0;

    if (cls == FE_SAS_C_ACL) {
        return RT_EAUTHZ; /* Shared Key only (spec §3.4) */
    }
    if (s->kind == FE_SAS_SERVICE) {
        switch (cls) {
            case FE_SAS_C_QUERY:
                all = FE_SAS_P_READ;
                break;
            case FE_SAS_C_ENTITY:
                all = fe__need(&fe__table_letters, op_kind);
                break;
            default:
                /* Never tables or service properties (spec §7.3). */
                return RT_ERESTYPE;
        }
        return (s->perms & all) == all ? 0 : RT_EPERM;
    }
    /* "Create an account SAS", the Table service's operations: the
     * resource type first (AuthorizationResourceTypeMismatch), then the
     * permission (AuthorizationPermissionMismatch). */
    switch (cls) {
        case FE_SAS_C_SERVICE_READ: /* Get Service Properties / Stats */
            rt = FE_SAS_RT_SERVICE;
            all = FE_SAS_A_READ;
            break;
        case FE_SAS_C_SERVICE_WRITE: /* Set Service Properties */
            rt = FE_SAS_RT_SERVICE;
            all = FE_SAS_A_WRITE;
            break;
        case FE_SAS_C_LIST_TABLES:
        case FE_SAS_C_GET_TABLE: /* Query Tables, one table or all */
            /* The operation table says container (c); the page's own
             * definition of srt=s names "List Tables" as service level, and
             * the Python SDK documents ResourceTypes(service) so: both. */
            rt = FE_SAS_RT_SERVICE | FE_SAS_RT_CONTAINER;
            all = FE_SAS_A_LIST;
            break;
        case FE_SAS_C_CREATE_TABLE:
            rt = FE_SAS_RT_CONTAINER;
            any = FE_SAS_A_ADD | FE_SAS_A_CREATE | FE_SAS_A_WRITE;
            break;
        case FE_SAS_C_DELETE_TABLE:
            rt = FE_SAS_RT_CONTAINER;
            all = FE_SAS_A_DELETE;
            break;
        case FE_SAS_C_QUERY: /* Query Entities */
            rt = FE_SAS_RT_OBJECT;
            all = FE_SAS_A_READ;
            break;
        default: /* one entity: Get, Insert, Update, Merge, upserts, Delete */
            rt = FE_SAS_RT_OBJECT;
            all = fe__need(&fe__account_letters, op_kind);
            break;
    }
    if (!(s->srt & rt)) {
        return RT_ERESTYPE;
    }
    if ((s->perms & all) != all || (any && !(s->perms & any))) {
        return RT_EPERM;
    }
    return 0;
}

/* (pk, rk) vs (bpk, brk), ordinal; a NULL @brk stands for "" when @low and
 * for +infinity otherwise. */
static int fe__key_cmp(const char *pk,
                       const char *rk,
                       const char *bpk,
                       const char *brk,
                       int low)
{
    int c = rt_utf16_cmpz(pk, bpk);
    if (c != 0) {
        return c;
    }
    if (!brk) {
        return low ? (*rk ? 1 : 0) : -1;
    }
    return rt_utf16_cmpz(rk, brk);
}

int fe_sas_key_in_range(const struct fe_sas *s, const char *pk, const char *rk)
{
    if (s->kind != FE_SAS_SERVICE) {
        return 1;
    }
    if (s->spk && fe__key_cmp(pk, rk, s->spk, s->srk, 1) < 0) {
        return 0;
    }
    if (s->epk && fe__key_cmp(pk, rk, s->epk, s->erk, 0) > 0) {
        return 0;
    }
    return 1;
}

/* ---- Request glue ----------------------------------------------------- */

int fe_sas_respond(struct fe_req *req, int code)
{
    /* RT_ESOURCEIP, RT_EPROTOCOL, RT_ERESTYPE, RT_ESERVICE, RT_EAUTH,
     * RT_EPERM, RT_EAUTHZ: all in the rt_err.h table (spec §8.2). */
    fe_req_resp_error(req, code, NULL);
    return -1;
}

/* Every query field fe_sas_parse reads. */
static const char *const fe__sas_fields[] = {
    "sv", "sig", "sp",  "st",  "se",  "sip", "spr", "tn",
    "si", "spk", "srk", "epk", "erk", "ss",  "srt", "ses",
};

static const char *fe__query_get(const void *q, const char *key)
{
    return fe_query_get(q, key);
}

/* The client's address as text, or NULL. */
static const char *fe__client_ip(struct fe_req *req, char *buf, size_t cap)
{
    const struct sockaddr *sa = req->peer;
    if (!sa) {
        return NULL;
    }
    if (sa->sa_family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)sa;
        return inet_ntop(AF_INET, &in->sin_addr, buf, (socklen_t)cap);
    }
    if (sa->sa_family == AF_INET6) {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)sa;
        return inet_ntop(AF_INET6, &in6->sin6_addr, buf, (socklen_t)cap);
    }
    return NULL;
}

int fe_sas_authenticate(struct fe_req *req, fe_sas_policy_fn policy)
{
    struct fe_sas_params p;
    struct fe_sas_ctx ctx;
    struct fe_sas *s;
    char why[RT_ERRMSG_SIZE] = "";
    char ip[64];
    int kind, rc;

    /* The token's fields are signed and compared as C strings: a field
     * holding a decoded NUL would be verified cut short ("tn=t%00x" as
     * "t"), so it fails here, before anything reads it. */
    for (size_t i = 0; i < sizeof(fe__sas_fields) / sizeof(*fe__sas_fields);
         i++) {
        size_t n;
        const char *v = fe_query_get_n(&req->query, fe__sas_fields[i], &n);
        if (v && (memchr(v, 0, n) || !rt_utf8_valid(v, n))) {
            rt_log(RT_LOG_INFO,
                   "SAS rejected for %s %s: field %s holds a "
                   "NUL or is not UTF-8",
                   req->method, req->raw_path, fe__sas_fields[i]);
            return fe_sas_respond(req, RT_EAUTH);
        }
    }
    kind = fe_sas_parse(&req->query, fe__query_get, &p);
    if (kind < 0) {
        rt_log(RT_LOG_INFO,
               "SAS rejected for %s %s: not a table or "
               "account SAS (sv/sig/tn/ss missing)",
               req->method, req->raw_path);
        return fe_sas_respond(req, RT_EAUTH);
    }
    memset(&ctx, 0, sizeof(ctx));
    ctx.accounts = req->accounts;
    ctx.account = req->path.account;
    if ((req->path.kind == FE_RES_TABLE || req->path.kind == FE_RES_ENTITY) &&
        req->path.table) {
        ctx.table = req->path.table;
    }
    ctx.now = fe_req_now(req);
    ctx.now_ticks = rt_time_now_ticks();
    ctx.client_ip = fe__client_ip(req, ip, sizeof(ip));
    ctx.https = req->tls; /* spr=https needs our HTTPS listener */
    ctx.policy = policy;
    s = rt_xcalloc(1, sizeof(*s));
    rc = fe_sas_verify(&p, (enum fe_sas_kind)kind, &ctx, s, why);
    if (rc != 0) {
        free(s);
        rt_log(RT_LOG_INFO, "SAS rejected for %s %s: %s", req->method,
               req->raw_path, why);
        return fe_sas_respond(req, rc);
    }
    req->sas = s;
    /* A SAS request runs under sv; x-ms-version is ignored (Azure,
     * "Versioning for Azure Storage"). */
    snprintf(req->version, sizeof(req->version), "%s", s->sv);
    req->xms_version = s->sv;
    return 0;
}

/* What the routed request is, for fe_sas_allows; -1 for $batch (checked
 * per op later). */
static int fe__opclass(struct fe_req *req, const char *verb, int *op_kind)
{
    const char *comp = fe_query_get(&req->query, "comp");
    int get = strcmp(verb, "GET") == 0 || strcmp(verb, "HEAD") == 0;
    *op_kind = FE_SAS_OP_READ;
    switch (req->path.kind) {
        case FE_RES_SERVICE:
            return get ? FE_SAS_C_SERVICE_READ : FE_SAS_C_SERVICE_WRITE;
        case FE_RES_TABLES:
            return get ? FE_SAS_C_LIST_TABLES : FE_SAS_C_CREATE_TABLE;
        case FE_RES_TABLE_ONE:
            return get ? FE_SAS_C_GET_TABLE : FE_SAS_C_DELETE_TABLE;
        case FE_RES_TABLE:
            if (comp) {
                return FE_SAS_C_ACL;
            }
            if (get) {
                return FE_SAS_C_QUERY;
            }
            *op_kind = RT__OP_KIND__OP_INSERT;
            return FE_SAS_C_ENTITY;
        case FE_RES_ENTITY: {
            /* Routing let only GET, PUT, MERGE/PATCH and DELETE through. No
             * version: a refused form (DELETE or, before 2011-08-18, an
             * upsert without If-Match) is refused by the operation later;
             * the permission is judged on the kind it asks for. */
            int im = fe_req_header(req, "If-Match") != NULL;
            int v = get ? FE_OP_GET : fe_op_verb_of(verb, strlen(verb));
            (void)fe_op_kind(v < 0 ? FE_OP_MERGE : (enum fe_op_verb)v, im, NULL,
                             op_kind);
            return FE_SAS_C_ENTITY;
        }
        default:
            return -1;
    }
}

int fe_sas_authorize(struct fe_req *req, const char *verb)
{
    int op_kind, cls, rc;
    if (!req->sas) {
        return 0;
    }
    cls = fe__opclass(req, verb, &op_kind);
    if (cls < 0) {
        return 0;
    }
    rc = fe_sas_allows(req->sas, (enum fe_sas_opclass)cls, op_kind);
    if (rc != 0) {
        rt_log(RT_LOG_INFO, "SAS does not allow %s %s", verb, req->raw_path);
        return fe_sas_respond(req, rc);
    }
    return 0;
}

/* A service SAS covers its own table only (names compare in any case). */
static int fe__other_table(const struct fe_sas *s, const char *table)
{
    return s->kind == FE_SAS_SERVICE && table && strcasecmp(table, s->tn) != 0;
}

int fe_sas_check_op(struct fe_req *req,
                    int op_kind,
                    const char *table,
                    const char *pk,
                    const char *rk)
{
    struct fe_sas *s = req->sas;
    int rc;
    if (!s) {
        return 0;
    }
    if (fe__other_table(s, table)) {
        rt_log(RT_LOG_INFO, "SAS is for table %s, not %s", s->tn, table);
        return fe_sas_respond(req, RT_EAUTH);
    }
    rc = fe_sas_allows(s, FE_SAS_C_ENTITY, op_kind);
    if (rc != 0) {
        return fe_sas_respond(req, rc);
    }
    if (!fe_sas_key_in_range(s, pk ? pk : "", rk ? rk : "")) {
        rt_log(RT_LOG_INFO, "keys outside the SAS range on %s", req->raw_path);
        return fe_sas_respond(req, RT_EAUTHZ);
    }
    return 0;
}

int fe_sas_check_job(struct fe_req *req)
{
    struct fe_sas *s = req->sas;
    struct fe_job *job = &req->job;
    if (!s) {
        return 0;
    }
    switch (job->kind) {
        case FE_JOB_WRITE:
            for (size_t i = 0; i < job->nops; i++) {
                if (fe_sas_check_op(req, job->ops[i].kind, job->table,
                                    job->ops[i].pk, job->ops[i].rk) != 0) {
                    return -1;
                }
            }
            return 0;
        case FE_JOB_GET:
            return fe_sas_check_op(req, FE_SAS_OP_READ, job->table, job->pk,
                                   job->rk);
        case FE_JOB_SCAN:
            if (fe__other_table(s, job->table)) {
                return fe_sas_respond(req, RT_EAUTH);
            }
            if (s->kind == FE_SAS_SERVICE && s->spk) {
                /* The query is intersected with the key range: start at its
                 * lower end (spec §7.3, "unverified": documented choice). */
                const char *srk = s->srk ? s->srk : "";
                if (!job->has_start ||
                    fe__key_cmp(job->pk ? job->pk : "", job->rk ? job->rk : "",
                                s->spk, srk, 1) < 0) {
                    job->has_start = 1;
                    job->pk = s->spk;
                    job->rk = srk;
                }
                if (!job->scan_lo || rt_utf16_cmpz(job->scan_lo, s->spk) < 0) {
                    job->scan_lo = s->spk;
                }
            }
            if (s->kind == FE_SAS_SERVICE && s->epk &&
                (!job->scan_hi || rt_utf16_cmpz(job->scan_hi, s->epk) > 0)) {
                job->scan_hi = s->epk;
            }
            return 0;
        default:
            return 0;
    }
}

void fe_sas_filter_scan(struct fe_req *req)
{
    struct fe_sas *s = req->sas;
    struct fe_job *job = &req->job;
    size_t keep = 0;
    if (!s || s->kind != FE_SAS_SERVICE || job->kind != FE_JOB_SCAN ||
        job->status != 0 || (!s->spk && !s->epk)) {
        return;
    }
    for (size_t i = 0; i < job->nents; i++) {
        struct fe_job_ent *e = &job->ents[i];
        if (fe_sas_key_in_range(s, e->pk, e->rk)) {
            job->ents[keep++] = *e;
        } else {
            free(e->pk); /* and rk and value (fe_route.h) */
        }
    }
    job->nents = keep;
    if (job->has_next && s->epk &&
        fe__key_cmp(rt_buf_cstr(&job->next_pk), rt_buf_cstr(&job->next_rk),
                    s->epk, s->erk, 0) > 0) {
        job->has_next = 0; /* nothing the token may read lies beyond */
    }
}

void fe_sas_free(struct fe_req *req)
{
    if (req->sas) {
        fe_sas_clear(req->sas);
        free(req->sas);
        req->sas = NULL;
    }
}
