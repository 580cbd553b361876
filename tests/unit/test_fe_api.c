/* The Table REST front door (fe_api.h) driven with requests built by hand
 * (fe_req.h, no libmicrohttpd, no cluster): which check answers first when
 * a request breaks several rules at once (the order fe_api_prepare
 * documents), which job each verb / If-Match / x-ms-version combination
 * dispatches to (and fe_op's table underneath), the pre-2011-08-18 upsert
 * rule for single requests and inside a $batch change set, and the
 * response fe_api_finish builds from a finished job. Requests are signed
 * with SharedKey for the development account, as an SDK would. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <cmocka.h>

#include "fe_api.h"
#include "fe_auth.h"
#include "fe_batch.h"
#include "fe_op.h"
#include "fe_req.h"
#include "rt.pb-c.h"
#include "rt_err.h"
#include "rt_time.h"

/* ---- Fixture -------------------------------------------------------- */

#define ACCT FE_DEV_ACCOUNT
#define HOST "127.0.0.1:10002"
#define V_NEW "2019-02-02"
#define V_OLD "2009-09-19" /* before Insert Or Replace/Merge */
#define ENT "/" ACCT "/people(PartitionKey='p',RowKey='r')"

static struct fe_accounts accts;

static int setup(void **state)
{
    (void)state;
    fe_accounts_init(&accts);
    return fe_accounts_add(&accts, ACCT, FE_DEV_KEY, NULL);
}

static int teardown(void **state)
{
    (void)state;
    fe_accounts_free(&accts);
    return 0;
}

/* ---- Helpers -------------------------------------------------------- */

enum { SIGN_NONE, SIGN_GOOD, SIGN_BAD };

/* A request as a transport would fill it; header strings are owned here
 * (fe_req borrows them). */
struct treq
{
    struct fe_req req;
    char *strs[64];
    size_t nstrs;
};

static const char *keep(struct treq *t, const char *s)
{
    char *d = strdup(s);
    assert_non_null(d);
    assert_true(t->nstrs < sizeof(t->strs) / sizeof(t->strs[0]));
    t->strs[t->nstrs++] = d;
    return d;
}

static void hdr(struct treq *t, const char *name, const char *value)
{
    fe_req_add_header(&t->req, keep(t, name), keep(t, value));
}

/* "METHOD path?query" with x-ms-version @version (NULL: none) and a Host
 * header unless @no_host. The query is given raw, as libmicrohttpd hands
 * it over (fe_query decodes). */
static struct treq *treq_new(const char *method,
                             const char *url,
                             const char *version,
                             int no_host)
{
    struct treq *t = calloc(1, sizeof(*t));
    const char *q = strchr(url, '?');
    char path[1024];
    size_t n = q ? (size_t)(q - url) : strlen(url);

    assert_non_null(t);
    assert_true(n < sizeof(path));
    fe_req_reset(&t->req);
    t->req.accounts = &accts;
    t->req.method = keep(t, method);
    memcpy(path, url, n);
    path[n] = '\0';
    fe_req_set_path(&t->req, path);
    while (q && *q) {
        const char *k = q + 1, *end = strchr(k, '&'), *eq;
        if (!end) {
            end = k + strlen(k);
        }
        eq = memchr(k, '=', (size_t)(end - k));
        if (eq) {
            fe_query_add_n(&t->req.query, k, (size_t)(eq - k), eq + 1,
                           (size_t)(end - eq - 1));
        } else {
            fe_query_add_n(&t->req.query, k, (size_t)(end - k), "", 0);
        }
        q = *end ? end : NULL;
    }
    if (!no_host) {
        hdr(t, "Host", HOST);
    }
    if (version) {
        hdr(t, "x-ms-version", version);
    }
    return t;
}

static void body(struct treq *t, const char *s, size_t n)
{
    rt_buf_append(&t->req.body, s, n);
}

/* Adds x-ms-date and, for SIGN_GOOD / SIGN_BAD, a SharedKey Authorization
 * over the headers so far (a good or a wrong signature), then runs
 * fe_api_prepare. */
static int prepare(struct treq *t, int sign)
{
    struct fe_req *req = &t->req;
    char date[64];
    rt_time_http_date(date, sizeof(date));
    hdr(t, "x-ms-date", date);
    if (sign != SIGN_NONE) {
        const struct fe_account *a = fe_accounts_find(&accts, ACCT);
        struct rt_buf res = RT_BUF_INIT, sts = RT_BUF_INIT, az = RT_BUF_INIT;
        char sig[FE_AUTH_SIG_SIZE];
        fe_auth_canon_resource(&res, ACCT, req->raw_path, req->raw_path_len,
                               fe_query_get(&req->query, "comp"));
        fe_auth_string_to_sign(&sts, FE_AUTH_SHAREDKEY, req->method,
                               fe_req_header(req, "Content-MD5"),
                               fe_req_header(req, "Content-Type"), date,
                               rt_buf_cstr(&res));
        fe_auth_sign(a->key[0], a->keylen[0], (const char *)sts.data, sts.len,
                     sig);
        if (sign == SIGN_BAD) {
            sig[0] = sig[0] == 'A' ? 'B' : 'A';
        }
        rt_buf_printf(&az, "SharedKey %s:%s", ACCT, sig);
        hdr(t, "Authorization", rt_buf_cstr(&az));
        rt_buf_free(&res);
        rt_buf_free(&sts);
        rt_buf_free(&az);
    }
    fe_req_headers_done(req);
    return fe_api_prepare(req);
}

static void treq_free(struct treq *t)
{
    fe_api_req_free(&t->req);
    fe_req_clear(&t->req, 0);
    fe_req_fini(&t->req);
    for (size_t i = 0; i < t->nstrs; i++) {
        free(t->strs[i]);
    }
    free(t);
}

/* Response header @name, or NULL. */
static const char *resp_hdr(const struct fe_req *req, const char *name)
{
    for (size_t off = 0; off < req->hdrs.len;) {
        const char *n = (const char *)req->hdrs.data + off;
        const char *v = n + strlen(n) + 1;
        if (strcasecmp(n, name) == 0) {
            return v;
        }
        off = (size_t)(v + strlen(v) + 1 - (const char *)req->hdrs.data);
    }
    return NULL;
}

/* The request was answered at once with @status and x-ms-error-code
 * @code. */
static void expect_error(struct treq *t, int rc, int status, const char *code)
{
    const char *got = resp_hdr(&t->req, "x-ms-error-code");
    if (rc != FE_API_RESPOND || t->req.status != status || !got ||
        strcmp(got, code) != 0) {
        print_error("%s %s: rc %d status %d code %s, want %d %s\n",
                    t->req.method, t->req.raw_path, rc, t->req.status,
                    got ? got : "-", status, code);
    }
    assert_int_equal(rc, FE_API_RESPOND);
    assert_int_equal(t->req.status, status);
    assert_non_null(got);
    assert_string_equal(got, code);
}

/* A small entity body. */
#define ENTITY_JSON "{\"PartitionKey\":\"p\",\"RowKey\":\"r\",\"v\":1}"

/* ---- Tests: the operation table ------------------------------------- */

/* fe_op: the verbs it knows (MERGE and PATCH are one), the kind for each
 * verb with and without If-Match, and the refusals: DELETE without
 * If-Match always, an upsert only before 2011-08-18 (the kind is still
 * reported, for the SAS check). */
static void test_op_table(void **state)
{
    int kind = -1;
    (void)state;
    assert_int_equal(fe_op_verb_of("POST", 4), FE_OP_INSERT);
    assert_int_equal(fe_op_verb_of("PUT", 3), FE_OP_PUT);
    assert_int_equal(fe_op_verb_of("MERGE", 5), FE_OP_MERGE);
    assert_int_equal(fe_op_verb_of("PATCH", 5), FE_OP_MERGE);
    assert_int_equal(fe_op_verb_of("DELETE", 6), FE_OP_DELETE);
    assert_int_equal(fe_op_verb_of("GET", 3), FE_OP_GET);
    assert_int_equal(fe_op_verb_of("HEAD", 4), -1);
    assert_int_equal(fe_op_verb_of("put", 3), -1);
    assert_int_equal(fe_op_verb_of("PUTX", 3), FE_OP_PUT); /* length-bound */

    assert_int_equal(fe_op_kind(FE_OP_INSERT, 0, V_OLD, &kind), 0);
    assert_int_equal(kind, RT__OP_KIND__OP_INSERT);
    assert_int_equal(fe_op_kind(FE_OP_PUT, 1, V_OLD, &kind), 0);
    assert_int_equal(kind, RT__OP_KIND__OP_REPLACE);
    assert_int_equal(fe_op_kind(FE_OP_PUT, 0, V_NEW, &kind), 0);
    assert_int_equal(kind, RT__OP_KIND__OP_UPSERT_REPLACE);
    assert_int_equal(fe_op_kind(FE_OP_PUT, 0, NULL, &kind), 0);
    assert_int_equal(kind, RT__OP_KIND__OP_UPSERT_REPLACE);
    assert_int_equal(fe_op_kind(FE_OP_PUT, 0, "2011-08-17", &kind),
                     RT_EMISSINGHEADER);
    assert_int_equal(kind, RT__OP_KIND__OP_UPSERT_REPLACE);
    assert_int_equal(fe_op_kind(FE_OP_MERGE, 1, V_NEW, &kind), 0);
    assert_int_equal(kind, RT__OP_KIND__OP_MERGE);
    assert_int_equal(fe_op_kind(FE_OP_MERGE, 0, "2011-08-18", &kind), 0);
    assert_int_equal(kind, RT__OP_KIND__OP_UPSERT_MERGE);
    assert_int_equal(fe_op_kind(FE_OP_MERGE, 0, V_OLD, &kind),
                     RT_EMISSINGHEADER);
    assert_int_equal(fe_op_kind(FE_OP_DELETE, 1, V_OLD, &kind), 0);
    assert_int_equal(kind, RT__OP_KIND__OP_DELETE);
    kind = -1;
    assert_int_equal(fe_op_kind(FE_OP_DELETE, 0, V_NEW, &kind),
                     RT_EMISSINGHEADER);
    assert_int_equal(kind, RT__OP_KIND__OP_DELETE);
    assert_int_equal(fe_op_kind(FE_OP_GET, 0, V_OLD, &kind), 0);
    assert_int_equal(kind, FE_OP_KIND_READ);
}

/* ---- Tests: the order of checks ------------------------------------- */

/* One request breaking several rules; the first rule in fe_api_prepare's
 * order answers. Each case breaks its own rule and every later one. */
struct order_case
{
    const char *what;
    const char *method;
    const char *url;
    const char *version; /* NULL: none */
    int no_host;
    int sign;
    const char *xmethod;  /* X-HTTP-Method, NULL: none */
    const char *if_match; /* NULL: none */
    const char *ctype;    /* Content-Type, NULL: none */
    const char *accept;   /* NULL: none */
    int status;
    const char *code;
};

static const struct order_case order_cases[] = {
    {"x-ms-version syntax before the account, auth, verb and keys", "FOO",
     "/?x", "2019-13-45", 0, SIGN_NONE, NULL, NULL, NULL, NULL, 400,
     "InvalidHeaderValue"},
    {"x-ms-version older than the oldest before auth", "GET",
     "/" ACCT "/Tables", "2008-01-01", 0, SIGN_BAD, NULL, NULL, NULL, NULL, 400,
     "InvalidHeaderValue"},
    {"no account segment before auth, verb and keys", "FOO", "/", V_NEW, 0,
     SIGN_NONE, NULL, NULL, NULL, NULL, 400, "InvalidUri"},
    {"OPTIONS preflight needs no auth: no Origin -> 400", "OPTIONS",
     "/" ACCT "/Tables", V_NEW, 0, SIGN_NONE, NULL, NULL, NULL, NULL, 400,
     "InvalidHeaderValue"},
    {"no Authorization before verb, keys and If-Match", "FOO",
     "/" ACCT "/people(PartitionKey='a%2Fb',RowKey='r')", V_NEW, 0, SIGN_NONE,
     NULL, "bad", NULL, NULL, 401, "NoAuthenticationInformation"},
    {"bad signature before a bad resource path", "GET",
     "/" ACCT "/people(RowKey='r')/x", V_NEW, 0, SIGN_BAD, NULL, NULL, NULL,
     NULL, 403, "AuthenticationFailed"},
    {"bad signature before a missing Host", "GET", "/" ACCT "/Tables", V_NEW, 1,
     SIGN_BAD, NULL, NULL, NULL, NULL, 403, "AuthenticationFailed"},
    {"missing Host before query, verb and keys", "FOO",
     "/" ACCT "/people(PartitionKey='a%2Fb',RowKey='r')?timeout=x", V_NEW, 1,
     SIGN_GOOD, NULL, NULL, NULL, NULL, 400, "HostInformationNotPresent"},
    {"a NUL in a query value before timeout and verb", "FOO",
     "/" ACCT "/people()?a=%00&timeout=x", V_NEW, 0, SIGN_GOOD, NULL, NULL,
     NULL, NULL, 400, "InvalidQueryParameterValue"},
    {"a NUL in $filter is InvalidInput", "GET",
     "/" ACCT "/people()?$filter=a%00", V_NEW, 0, SIGN_GOOD, NULL, NULL, NULL,
     NULL, 400, "InvalidInput"},
    {"bad timeout before an unknown verb", "FOO",
     "/" ACCT "/people()?timeout=x", V_NEW, 0, SIGN_GOOD, NULL, NULL, NULL,
     NULL, 400, "InvalidQueryParameterValue"},
    {"unknown verb before X-HTTP-Method and keys", "FOO",
     "/" ACCT "/people(PartitionKey='a%2Fb',RowKey='r')", V_NEW, 0, SIGN_GOOD,
     "MERGE", NULL, NULL, NULL, 405, "UnsupportedHttpVerb"},
    {"X-HTTP-Method on a GET before routing", "GET", "/" ACCT "/Tables", V_NEW,
     0, SIGN_GOOD, "DELETE", NULL, NULL, NULL, 400, "XMethodNotUsingPost"},
    {"X-HTTP-Method value other than MERGE/PUT/DELETE", "POST", ENT, V_NEW, 0,
     SIGN_GOOD, "GET", NULL, NULL, NULL, 400, "XMethodIncorrectValue"},
    {"verb that does not fit the resource before Accept", "PUT",
     "/" ACCT "/Tables", V_NEW, 0, SIGN_GOOD, NULL, NULL, NULL,
     "application/atom+xml", 405, "MethodNotAllowed"},
    {"Accept asking for Atom before the keys", "GET",
     "/" ACCT "/people(PartitionKey='a%2Fb',RowKey='r')", V_NEW, 0, SIGN_GOOD,
     NULL, NULL, NULL, "application/atom+xml", 415, "AtomFormatNotSupported"},
    {"a write on the read-only secondary before the keys", "DELETE",
     "/" ACCT "-secondary/people(PartitionKey='a%2Fb',RowKey='r')", V_NEW, 0,
     SIGN_GOOD, NULL, "*", NULL, NULL, 403, "AuthorizationFailure"},
    {"bad key in the URL before a malformed If-Match", "PUT",
     "/" ACCT "/people(PartitionKey='a%2Fb',RowKey='r')", V_NEW, 0, SIGN_GOOD,
     NULL, "bad", "application/atom+xml", NULL, 400, "InvalidInput"},
    {"malformed If-Match before the body's media type", "PUT", ENT, V_NEW, 0,
     SIGN_GOOD, NULL, "", "application/atom+xml", NULL, 412,
     "UpdateConditionNotSatisfied"},
    {"DELETE without If-Match", "DELETE", ENT, V_NEW, 0, SIGN_GOOD, NULL, NULL,
     NULL, NULL, 400, "MissingRequiredHeader"},
    {"pre-2011-08-18 upsert before the body's media type", "PUT", ENT, V_OLD, 0,
     SIGN_GOOD, NULL, NULL, "application/atom+xml", NULL, 400,
     "MissingRequiredHeader"},
    {"pre-2011-08-18 merge without If-Match (PATCH)", "PATCH", ENT, V_OLD, 0,
     SIGN_GOOD, NULL, NULL, NULL, NULL, 400, "MissingRequiredHeader"},
    {"tunnelled pre-2011-08-18 merge without If-Match", "POST", ENT, V_OLD, 0,
     SIGN_GOOD, "MERGE", NULL, NULL, NULL, 400, "MissingRequiredHeader"},
    {"the body's media type last", "PUT", ENT, V_NEW, 0, SIGN_GOOD, NULL, "*",
     "application/atom+xml", NULL, 415, "AtomFormatNotSupported"},
};

static void test_check_order(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(order_cases) / sizeof(order_cases[0]); i++) {
        const struct order_case *c = &order_cases[i];
        struct treq *t = treq_new(c->method, c->url, c->version, c->no_host);
        int rc;
        if (c->xmethod) {
            hdr(t, "X-HTTP-Method", c->xmethod);
        }
        if (c->if_match) {
            hdr(t, "If-Match", c->if_match);
        }
        if (c->ctype) {
            hdr(t, "Content-Type", c->ctype);
        }
        if (c->accept) {
            hdr(t, "Accept", c->accept);
        }
        body(t, "{}", 2);
        rc = prepare(t, c->sign);
        if (t->req.status != c->status) {
            print_error("case %zu (%s)\n", i, c->what);
        }
        expect_error(t, rc, c->status, c->code);
        treq_free(t);
    }
}

/* A 401 carries WWW-Authenticate; every error echoes the version the
 * request sent when it is well-formed, else the default. */
static void test_error_headers(void **state)
{
    struct treq *t;
    (void)state;
    t = treq_new("GET", "/" ACCT "/Tables", V_NEW, 0);
    expect_error(t, prepare(t, SIGN_NONE), 401, "NoAuthenticationInformation");
    assert_string_equal(resp_hdr(&t->req, "WWW-Authenticate"), "SharedKey");
    assert_string_equal(t->req.version, V_NEW);
    treq_free(t);
    t = treq_new("GET", "/" ACCT "/Tables", "2019-13-45", 0);
    expect_error(t, prepare(t, SIGN_GOOD), 400, "InvalidHeaderValue");
    assert_string_equal(t->req.version, FE_VERSION_DEFAULT);
    treq_free(t);
}

/* A $batch body over 4 MiB: authentication still answers first; once
 * authenticated, 413 RequestBodyTooLarge (spec §5.2). */
static void test_batch_oversize(void **state)
{
    size_t n = FE_BATCH_MAX_BODY + 1;
    char *big = malloc(n);
    struct treq *t;
    (void)state;
    assert_non_null(big);
    memset(big, 'x', n);
    t = treq_new("POST", "/" ACCT "/$batch", V_NEW, 0);
    hdr(t, "Content-Type", "multipart/mixed; boundary=B");
    body(t, big, n);
    expect_error(t, prepare(t, SIGN_BAD), 403, "AuthenticationFailed");
    treq_free(t);
    t = treq_new("POST", "/" ACCT "/$batch", V_NEW, 0);
    hdr(t, "Content-Type", "multipart/mixed; boundary=B");
    body(t, big, n);
    expect_error(t, prepare(t, SIGN_GOOD), 413, "RequestBodyTooLarge");
    treq_free(t);
    free(big);
}

/* ---- Tests: dispatch ------------------------------------------------ */

/* Which job a request fills: verb (after X-HTTP-Method), If-Match and
 * x-ms-version pick the operation kind. */
struct dispatch_case
{
    const char *method;
    const char *url;
    const char *version;
    const char *xmethod;
    const char *if_match;
    const char *body;
    int job;     /* enum fe_job_kind */
    int op_kind; /* Rt__OpKind of ops[0] for FE_JOB_WRITE, else -1 */
    int any;     /* ops[0].if_match_any */
};

static const struct dispatch_case dispatch_cases[] = {
    {"POST", "/" ACCT "/people", V_NEW, NULL, NULL, ENTITY_JSON, FE_JOB_WRITE,
     RT__OP_KIND__OP_INSERT, 0},
    {"POST", "/" ACCT "/people", V_NEW, NULL, "*", ENTITY_JSON, FE_JOB_WRITE,
     RT__OP_KIND__OP_INSERT, 0},
    {"PUT", ENT, V_NEW, NULL, "*", "{}", FE_JOB_WRITE, RT__OP_KIND__OP_REPLACE,
     1},
    {"PUT", ENT, V_NEW, NULL, NULL, "{}", FE_JOB_WRITE,
     RT__OP_KIND__OP_UPSERT_REPLACE, 0},
    {"PUT", ENT, NULL, NULL, NULL, "{}", FE_JOB_WRITE,
     RT__OP_KIND__OP_UPSERT_REPLACE, 0},
    {"PUT", ENT, "2011-08-18", NULL, NULL, "{}", FE_JOB_WRITE,
     RT__OP_KIND__OP_UPSERT_REPLACE, 0},
    {"PUT", ENT, V_OLD, NULL, "*", "{}", FE_JOB_WRITE, RT__OP_KIND__OP_REPLACE,
     1},
    {"MERGE", ENT, V_NEW, NULL, "*", "{}", FE_JOB_WRITE, RT__OP_KIND__OP_MERGE,
     1},
    {"PATCH", ENT, V_NEW, NULL, "*", "{}", FE_JOB_WRITE, RT__OP_KIND__OP_MERGE,
     1},
    {"MERGE", ENT, V_NEW, NULL, NULL, "{}", FE_JOB_WRITE,
     RT__OP_KIND__OP_UPSERT_MERGE, 0},
    {"PATCH", ENT, V_NEW, NULL, NULL, "{}", FE_JOB_WRITE,
     RT__OP_KIND__OP_UPSERT_MERGE, 0},
    {"MERGE", ENT, V_OLD, NULL, "*", "{}", FE_JOB_WRITE, RT__OP_KIND__OP_MERGE,
     1},
    {"POST", ENT, V_NEW, "MERGE", "*", "{}", FE_JOB_WRITE,
     RT__OP_KIND__OP_MERGE, 1},
    {"POST", ENT, V_NEW, "MERGE", NULL, "{}", FE_JOB_WRITE,
     RT__OP_KIND__OP_UPSERT_MERGE, 0},
    {"POST", ENT, V_NEW, "PUT", NULL, "{}", FE_JOB_WRITE,
     RT__OP_KIND__OP_UPSERT_REPLACE, 0},
    {"POST", ENT, V_NEW, "DELETE", "*", NULL, FE_JOB_WRITE,
     RT__OP_KIND__OP_DELETE, 1},
    {"DELETE", ENT, V_NEW, NULL, "*", NULL, FE_JOB_WRITE,
     RT__OP_KIND__OP_DELETE, 1},
    {"DELETE", ENT, V_OLD, NULL, "*", NULL, FE_JOB_WRITE,
     RT__OP_KIND__OP_DELETE, 1},
    {"GET", ENT, V_NEW, NULL, NULL, NULL, FE_JOB_GET, -1, 0},
    {"GET", "/" ACCT "/people()", V_NEW, NULL, NULL, NULL, FE_JOB_SCAN, -1, 0},
    {"GET", "/" ACCT "/people", V_NEW, NULL, NULL, NULL, FE_JOB_SCAN, -1, 0},
    {"GET", "/" ACCT "/Tables", V_NEW, NULL, NULL, NULL, FE_JOB_LIST_TABLES, -1,
     0},
    {"POST", "/" ACCT "/Tables", V_NEW, NULL, NULL,
     "{\"TableName\":\"people\"}", FE_JOB_CREATE_TABLE, -1, 0},
    {"GET", "/" ACCT "/Tables('people')", V_NEW, NULL, NULL, NULL,
     FE_JOB_GET_TABLE, -1, 0},
    {"DELETE", "/" ACCT "/Tables('people')", V_NEW, NULL, NULL, NULL,
     FE_JOB_DELETE_TABLE, -1, 0},
};

static void test_dispatch(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(dispatch_cases) / sizeof(dispatch_cases[0]);
         i++) {
        const struct dispatch_case *c = &dispatch_cases[i];
        struct treq *t = treq_new(c->method, c->url, c->version, 0);
        const struct fe_job *job = &t->req.job;
        int rc;
        if (c->xmethod) {
            hdr(t, "X-HTTP-Method", c->xmethod);
        }
        if (c->if_match) {
            hdr(t, "If-Match", c->if_match);
        }
        if (c->body) {
            body(t, c->body, strlen(c->body));
        }
        rc = prepare(t, SIGN_GOOD);
        if (rc != FE_API_SUBMIT || (int)job->kind != c->job ||
            (c->op_kind >= 0 &&
             (job->nops != 1 || job->ops[0].kind != c->op_kind))) {
            print_error("case %zu: %s %s: rc %d status %d job %d\n", i,
                        c->method, c->url, rc, t->req.status, (int)job->kind);
        }
        assert_int_equal(rc, FE_API_SUBMIT);
        assert_int_equal(job->kind, c->job);
        assert_string_equal(job->account, ACCT);
        if (c->op_kind >= 0) {
            assert_int_equal(job->nops, 1);
            assert_int_equal(job->ops[0].kind, c->op_kind);
            assert_int_equal(job->ops[0].if_match_any, c->any);
            assert_string_equal(job->ops[0].pk, "p");
            assert_string_equal(job->ops[0].rk, "r");
            assert_string_equal(job->table, "people");
        }
        if (c->job == FE_JOB_GET) {
            assert_string_equal(job->pk, "p");
            assert_string_equal(job->rk, "r");
        }
        treq_free(t);
    }
}

/* An If-Match ETag we issued becomes the op's condition (ticks). */
static void test_dispatch_etag(void **state)
{
    struct treq *t = treq_new("MERGE", ENT, V_NEW, 0);
    char etag[64];
    (void)state;
    fe_odata_etag(638500000000000000ull, etag);
    hdr(t, "If-Match", etag);
    body(t, "{}", 2);
    assert_int_equal(prepare(t, SIGN_GOOD), FE_API_SUBMIT);
    assert_int_equal(t->req.job.ops[0].kind, RT__OP_KIND__OP_MERGE);
    assert_int_equal(t->req.job.ops[0].if_match_any, 0);
    assert_true(t->req.job.ops[0].if_match == 638500000000000000ull);
    treq_free(t);
}

/* ---- Tests: $batch and the version rule ----------------------------- */

#define BATCH_CT "multipart/mixed; boundary=B"

/* [insert p/1, PUT p/2 without If-Match] as one change set. */
static const char batch_upsert[] =
    "--B\r\nContent-Type: multipart/mixed; boundary=C\r\n\r\n"
    "--C\r\nContent-Type: application/http\r\nContent-ID: 0\r\n\r\n"
    "POST http://" HOST "/" ACCT
    "/people HTTP/1.1\r\n"
    "Content-Type: application/json\r\n\r\n"
    "{\"PartitionKey\":\"p\",\"RowKey\":\"1\"}\r\n"
    "--C\r\nContent-Type: application/http\r\nContent-ID: 1\r\n\r\n"
    "PUT http://" HOST "/" ACCT
    "/people(PartitionKey='p',RowKey='2') "
    "HTTP/1.1\r\nContent-Type: application/json\r\n\r\n{\"a\":1}\r\n"
    "--C--\r\n--B--\r\n";

static struct treq *batch_req(const char *version)
{
    struct treq *t = treq_new("POST", "/" ACCT "/$batch", version, 0);
    hdr(t, "Content-Type", BATCH_CT);
    body(t, batch_upsert, sizeof(batch_upsert) - 1);
    return t;
}

/* From 2011-08-18 on the change set's PUT without If-Match is an upsert,
 * and the whole change set is one atomic write. */
static void test_batch_upsert(void **state)
{
    struct treq *t = batch_req(V_NEW);
    const struct fe_job *job = &t->req.job;
    (void)state;
    assert_int_equal(prepare(t, SIGN_GOOD), FE_API_SUBMIT);
    assert_int_equal(job->kind, FE_JOB_WRITE);
    assert_int_equal(job->atomic, 1);
    assert_int_equal(job->nops, 2);
    assert_int_equal(job->ops[0].kind, RT__OP_KIND__OP_INSERT);
    assert_int_equal(job->ops[1].kind, RT__OP_KIND__OP_UPSERT_REPLACE);
    treq_free(t);
}

/* Before 2011-08-18 the same change set fails at operation 1 with the
 * single request's 400 MissingRequiredHeader, reported the §5.4 way: 202
 * with one failure part "1:..." echoing its Content-ID; no job. */
static void test_batch_old_version(void **state)
{
    struct treq *t = batch_req(V_OLD);
    const char *b;
    (void)state;
    assert_int_equal(prepare(t, SIGN_GOOD), FE_API_RESPOND);
    assert_int_equal(t->req.status, 202);
    b = rt_buf_cstr(&t->req.rbody);
    assert_non_null(strstr(b, "HTTP/1.1 400 "));
    assert_non_null(strstr(b, "Content-ID: 1\r\n"));
    /* 2009-09-19 answers AtomPub: the failure part is the Atom error. */
    assert_non_null(strstr(b, "Content-Type: application/xml\r\n"));
    assert_non_null(strstr(b, "<code>MissingRequiredHeader</code>"));
    assert_non_null(strstr(b, "<message xml:lang=\"en-US\">1:"));
    assert_null(strstr(b, "HTTP/1.1 201"));
    treq_free(t);
}

/* ---- Tests: finishing ----------------------------------------------- */

/* The job's outcome becomes the response: a refused insert is 409
 * EntityAlreadyExists; a job cancelled by shutdown is 503 ServerBusy; so
 * is one the route gave up on (not executed: RT_EBUSY after its tries);
 * a write of unknown outcome is 500 OperationTimedOut; a delete is 204
 * without ETag. */
static void test_finish(void **state)
{
    struct treq *t;
    (void)state;
    t = treq_new("POST", "/" ACCT "/people", V_NEW, 0);
    body(t, ENTITY_JSON, strlen(ENTITY_JSON));
    assert_int_equal(prepare(t, SIGN_GOOD), FE_API_SUBMIT);
    t->req.job.status = RT_EEXIST;
    fe_api_finish(&t->req);
    assert_int_equal(t->req.status, 409);
    assert_string_equal(resp_hdr(&t->req, "x-ms-error-code"),
                        "EntityAlreadyExists");
    treq_free(t);

    t = treq_new("GET", ENT, V_NEW, 0);
    assert_int_equal(prepare(t, SIGN_GOOD), FE_API_SUBMIT);
    t->req.job.status = RT_ECANCELED;
    fe_api_finish(&t->req);
    assert_int_equal(t->req.status, 503);
    assert_string_equal(resp_hdr(&t->req, "x-ms-error-code"), "ServerBusy");
    treq_free(t);

    t = treq_new("GET", ENT, V_NEW, 0);
    assert_int_equal(prepare(t, SIGN_GOOD), FE_API_SUBMIT);
    t->req.job.status = RT_EBUSY;
    fe_api_finish(&t->req);
    assert_int_equal(t->req.status, 503);
    assert_string_equal(resp_hdr(&t->req, "x-ms-error-code"), "ServerBusy");
    treq_free(t);

    t = treq_new("POST", "/" ACCT "/people", V_NEW, 0);
    body(t, ENTITY_JSON, strlen(ENTITY_JSON));
    assert_int_equal(prepare(t, SIGN_GOOD), FE_API_SUBMIT);
    t->req.job.status = RT_ETIMEDOUT;
    fe_api_finish(&t->req);
    assert_int_equal(t->req.status, 500);
    assert_string_equal(resp_hdr(&t->req, "x-ms-error-code"),
                        "OperationTimedOut");
    treq_free(t);

    t = treq_new("DELETE", ENT, V_NEW, 0);
    hdr(t, "If-Match", "*");
    assert_int_equal(prepare(t, SIGN_GOOD), FE_API_SUBMIT);
    t->req.job.status = 0;
    fe_api_finish(&t->req);
    assert_int_equal(t->req.status, 204);
    assert_null(resp_hdr(&t->req, "ETag"));
    treq_free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_op_table),
        cmocka_unit_test(test_check_order),
        cmocka_unit_test(test_error_headers),
        cmocka_unit_test(test_batch_oversize),
        cmocka_unit_test(test_dispatch),
        cmocka_unit_test(test_dispatch_etag),
        cmocka_unit_test(test_batch_upsert),
        cmocka_unit_test(test_batch_old_version),
        cmocka_unit_test(test_finish),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
