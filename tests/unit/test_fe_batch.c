/* Entity group transactions (docs/table-api-spec.md §5): the multipart
 * parser and validator against batches captured byte for byte from the
 * Python (azure-data-tables 12.4.2) and JavaScript (@azure/data-tables
 * 13.3.2) SDKs, their LF-only and quoted-boundary variants, every batch rule
 * with its error code and index, truncated, mutated and random inputs
 * (run under ASan: nothing is read out of bounds), and the multipart
 * response writer byte for byte (§5.3, §5.4). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "fe_batch.h"
#include "rt.pb-c.h"
#include "rt_err.h"

/* ---- Fixtures ------------------------------------------------------- */

#define ACCT "devstoreaccount1"
#define PY_CT \
    "multipart/mixed; boundary=batch_523753bd-b4e0-4c4c-b567-89fd5ad1a200"
#define JS_CT \
    "multipart/mixed; boundary=batch_0306b9b4-6cf9-4bdb-8a1c-799ddf148a1f"
#define ETAG_S "W/\"datetime'2024-05-01T10%3A11%3A12.3456789Z'\""

/* TableClient.submit_transaction([create p/1, update p/2 merge, update p/3
 * replace with an ETag, upsert merge p/"o'k x", upsert replace p/5,
 * delete p/6]) as the Python SDK sent it. */
static const char py_batch[] =
    "--batch_523753bd-b4e0-4c4c-b567-89fd5ad1a200\r\n"
    "Content-Type: multipart/mixed; boundary=changeset_8697bf27-d020-45d0-a"
    "aa9-9945df7c10e0\r\n"
    "\r\n"
    "--changeset_8697bf27-d020-45d0-aaa9-9945df7c10e0\r\n"
    "Content-Type: application/http\r\n"
    "Content-Transfer-Encoding: binary\r\n"
    "Content-ID: 0\r\n"
    "\r\n"
    "POST http://127.0.0.1:34675/devstoreaccount1/people HTTP/1.1\r\n"
    "x-ms-version: 2019-02-02\r\n"
    "DataServiceVersion: 3.0\r\n"
    "Prefer: return-no-content\r\n"
    "Content-Type: application/json;odata=nometadata\r\n"
    "Accept: application/json;odata=minimalmetadata\r\n"
    "Content-Length: 171\r\n"
    "x-ms-date: Sat, 21 Nov 2026 10:24:38 GMT\r\n"
    "Date: Sat, 21 Nov 2026 10:24:38 GMT\r\n"
    "\r\n"
    "{\"PartitionKey\": \"p\", \"PartitionKey@odata.type\": \"Edm.String\","
    " \"RowKey\": \"1\", \"RowKey@odata.type\": \"Edm.String\", \"Name\": "
    "\"Ann\", \"Name@odata.type\": \"Edm.String\", \"Age\": 23}\r\n"
    "--changeset_8697bf27-d020-45d0-aaa9-9945df7c10e0\r\n"
    "Content-Type: application/http\r\n"
    "Content-Transfer-Encoding: binary\r\n"
    "Content-ID: 1\r\n"
    "\r\n"
    "PATCH http://127.0.0.1:34675/devstoreaccount1/people(PartitionKey='p',"
    "RowKey='2') HTTP/1.1\r\n"
    "x-ms-version: 2019-02-02\r\n"
    "DataServiceVersion: 3.0\r\n"
    "If-Match: *\r\n"
    "Content-Type: application/json\r\n"
    "Accept: application/json\r\n"
    "Content-Length: 160\r\n"
    "x-ms-date: Sat, 21 Nov 2026 10:24:38 GMT\r\n"
    "Date: Sat, 21 Nov 2026 10:24:38 GMT\r\n"
    "\r\n"
    "{\"PartitionKey\": \"p\", \"PartitionKey@odata.type\": \"Edm.String\","
    " \"RowKey\": \"2\", \"RowKey@odata.type\": \"Edm.String\", \"Name\": "
    "\"Bob\", \"Name@odata.type\": \"Edm.String\"}\r\n"
    "--changeset_8697bf27-d020-45d0-aaa9-9945df7c10e0\r\n"
    "Content-Type: application/http\r\n"
    "Content-Transfer-Encoding: binary\r\n"
    "Content-ID: 2\r\n"
    "\r\n"
    "PUT http://127.0.0.1:34675/devstoreaccount1/people(PartitionKey='p',Ro"
    "wKey='3') HTTP/1.1\r\n"
    "x-ms-version: 2019-02-02\r\n"
    "DataServiceVersion: 3.0\r\n"
    "If-Match: W/\"datetime'2024-05-01T10%3A11%3A12.3456789Z'\"\r\n"
    "Content-Type: application/json\r\n"
    "Accept: application/json\r\n"
    "Content-Length: 158\r\n"
    "x-ms-date: Sat, 21 Nov 2026 10:24:38 GMT\r\n"
    "Date: Sat, 21 Nov 2026 10:24:38 GMT\r\n"
    "\r\n"
    "{\"PartitionKey\": \"p\", \"PartitionKey@odata.type\": \"Edm.String\","
    " \"RowKey\": \"3\", \"RowKey@odata.type\": \"Edm.String\", \"Name\": "
    "\"C\", \"Name@odata.type\": \"Edm.String\"}\r\n"
    "--changeset_8697bf27-d020-45d0-aaa9-9945df7c10e0\r\n"
    "Content-Type: application/http\r\n"
    "Content-Transfer-Encoding: binary\r\n"
    "Content-ID: 3\r\n"
    "\r\n"
    "PATCH http://127.0.0.1:34675/devstoreaccount1/people(PartitionKey='p',"
    "RowKey='o%27%27k%20x') HTTP/1.1\r\n"
    "x-ms-version: 2019-02-02\r\n"
    "DataServiceVersion: 3.0\r\n"
    "Content-Type: application/json\r\n"
    "Accept: application/json\r\n"
    "Content-Length: 156\r\n"
    "x-ms-date: Sat, 21 Nov 2026 10:24:38 GMT\r\n"
    "Date: Sat, 21 Nov 2026 10:24:38 GMT\r\n"
    "\r\n"
    "{\"PartitionKey\": \"p\", \"PartitionKey@odata.type\": \"Edm.String\","
    " \"RowKey\": \"o'k x\", \"RowKey@odata.type\": \"Edm.String\", \"V\": "
    "1.5, \"V@odata.type\": \"Edm.Double\"}\r\n"
    "--changeset_8697bf27-d020-45d0-aaa9-9945df7c10e0\r\n"
    "Content-Type: application/http\r\n"
    "Content-Transfer-Encoding: binary\r\n"
    "Content-ID: 4\r\n"
    "\r\n"
    "PUT http://127.0.0.1:34675/devstoreaccount1/people(PartitionKey='p',Ro"
    "wKey='5') HTTP/1.1\r\n"
    "x-ms-version: 2019-02-02\r\n"
    "DataServiceVersion: 3.0\r\n"
    "Content-Type: application/json\r\n"
    "Accept: application/json\r\n"
    "Content-Length: 112\r\n"
    "x-ms-date: Sat, 21 Nov 2026 10:24:38 GMT\r\n"
    "Date: Sat, 21 Nov 2026 10:24:38 GMT\r\n"
    "\r\n"
    "{\"PartitionKey\": \"p\", \"PartitionKey@odata.type\": \"Edm.String\","
    " \"RowKey\": \"5\", \"RowKey@odata.type\": \"Edm.String\"}\r\n"
    "--changeset_8697bf27-d020-45d0-aaa9-9945df7c10e0\r\n"
    "Content-Type: application/http\r\n"
    "Content-Transfer-Encoding: binary\r\n"
    "Content-ID: 5\r\n"
    "\r\n"
    "DELETE http://127.0.0.1:34675/devstoreaccount1/people(PartitionKey='p'"
    ",RowKey='6') HTTP/1.1\r\n"
    "x-ms-version: 2019-02-02\r\n"
    "DataServiceVersion: 3.0\r\n"
    "If-Match: *\r\n"
    "Accept: application/json;odata=minimalmetadata\r\n"
    "x-ms-date: Sat, 21 Nov 2026 10:24:38 GMT\r\n"
    "Date: Sat, 21 Nov 2026 10:24:38 GMT\r\n"
    "\r\n"
    "\r\n"
    "--changeset_8697bf27-d020-45d0-aaa9-9945df7c10e0--\r\n"
    "\r\n"
    "--batch_523753bd-b4e0-4c4c-b567-89fd5ad1a200--\r\n";

/* The same six operations from TableClient.submitTransaction (JS). */
static const char js_batch[] =
    "--batch_0306b9b4-6cf9-4bdb-8a1c-799ddf148a1f\r\n"
    "content-type: multipart/mixed; boundary=changeset_219aecab-e595-4541-b"
    "b90-743b1569f02f\r\n"
    "\r\n"
    "\r\n"
    "--changeset_219aecab-e595-4541-bb90-743b1569f02f\r\n"
    "content-type: application/http\r\n"
    "content-transfer-encoding: binary\r\n"
    "\r\n"
    "POST http://127.0.0.1:43279/devstoreaccount1/people HTTP/1.1\r\n"
    "Content-Type: application/json;odata=nometadata\r\n"
    "Accept: application/json;odata=minimalmetadata\r\n"
    "DataServiceVersion: 3.0\r\n"
    "Prefer: return-no-content\r\n"
    "\r\n"
    "\r\n"
    "{\"PartitionKey\":\"p\",\"RowKey\":\"1\",\"Name\":\"Ann\",\"Age\":23}"
    "\r\n"
    "--changeset_219aecab-e595-4541-bb90-743b1569f02f\r\n"
    "content-type: application/http\r\n"
    "content-transfer-encoding: binary\r\n"
    "\r\n"
    "PATCH http://127.0.0.1:43279/devstoreaccount1/people(PartitionKey='p',"
    "RowKey='2') HTTP/1.1\r\n"
    "Content-Type: application/json\r\n"
    "DataServiceVersion: 3.0\r\n"
    "Accept: application/json\r\n"
    "If-Match: *\r\n"
    "\r\n"
    "\r\n"
    "{\"PartitionKey\":\"p\",\"RowKey\":\"2\",\"Name\":\"Bob\"}\r\n"
    "--changeset_219aecab-e595-4541-bb90-743b1569f02f\r\n"
    "content-type: application/http\r\n"
    "content-transfer-encoding: binary\r\n"
    "\r\n"
    "PUT http://127.0.0.1:43279/devstoreaccount1/people(PartitionKey='p',Ro"
    "wKey='3') HTTP/1.1\r\n"
    "Content-Type: application/json\r\n"
    "DataServiceVersion: 3.0\r\n"
    "Accept: application/json\r\n"
    "If-Match: W/\"datetime'2024-05-01T10%3A11%3A12.3456789Z'\"\r\n"
    "\r\n"
    "\r\n"
    "{\"PartitionKey\":\"p\",\"RowKey\":\"3\",\"Name\":\"C\"}\r\n"
    "--changeset_219aecab-e595-4541-bb90-743b1569f02f\r\n"
    "content-type: application/http\r\n"
    "content-transfer-encoding: binary\r\n"
    "\r\n"
    "PATCH http://127.0.0.1:43279/devstoreaccount1/people(PartitionKey='p',"
    "RowKey='o''k%20x') HTTP/1.1\r\n"
    "Content-Type: application/json\r\n"
    "DataServiceVersion: 3.0\r\n"
    "Accept: application/json\r\n"
    "\r\n"
    "\r\n"
    "{\"PartitionKey\":\"p\",\"RowKey\":\"o'k x\",\"V\":1.5}\r\n"
    "--changeset_219aecab-e595-4541-bb90-743b1569f02f\r\n"
    "content-type: application/http\r\n"
    "content-transfer-encoding: binary\r\n"
    "\r\n"
    "PUT http://127.0.0.1:43279/devstoreaccount1/people(PartitionKey='p',Ro"
    "wKey='5') HTTP/1.1\r\n"
    "Content-Type: application/json\r\n"
    "DataServiceVersion: 3.0\r\n"
    "Accept: application/json\r\n"
    "\r\n"
    "\r\n"
    "{\"PartitionKey\":\"p\",\"RowKey\":\"5\"}\r\n"
    "--changeset_219aecab-e595-4541-bb90-743b1569f02f\r\n"
    "content-type: application/http\r\n"
    "content-transfer-encoding: binary\r\n"
    "\r\n"
    "DELETE http://127.0.0.1:43279/devstoreaccount1/people(PartitionKey='p'"
    ",RowKey='6') HTTP/1.1\r\n"
    "Accept: application/json;odata=minimalmetadata\r\n"
    "DataServiceVersion: 3.0\r\n"
    "If-Match: *\r\n"
    "\r\n"
    "\r\n"
    "--changeset_219aecab-e595-4541-bb90-743b1569f02f--\r\n"
    "--batch_0306b9b4-6cf9-4bdb-8a1c-799ddf148a1f--\r\n";

/* ---- Helpers -------------------------------------------------------- */

static int parse(const char *ct,
                 const char *body,
                 size_t len,
                 struct fe_batch *b)
{
    fe_batch_init(b);
    return fe_batch_parse(ct, ACCT, NULL, (const uint8_t *)body, len, b);
}

static int parse_str(const char *ct, const char *body, struct fe_batch *b)
{
    return parse(ct, body, strlen(body), b);
}

/* A batch under construction: "--B", one changeset "C", parts. */
#define B_CT "multipart/mixed; boundary=B"

static void batch_begin(struct rt_buf *o)
{
    rt_buf_init(o);
    rt_buf_append_str(o,
                      "--B\r\nContent-Type: multipart/mixed; "
                      "boundary=C\r\n\r\n");
}

/* One changeset part holding @req (request line, headers, blank line,
 * body); @cid NULL = no Content-ID. */
static void batch_part(struct rt_buf *o, const char *cid, const char *req)
{
    rt_buf_append_str(o,
                      "--C\r\nContent-Type: application/http\r\n"
                      "Content-Transfer-Encoding: binary\r\n");
    if (cid) {
        rt_buf_printf(o, "Content-ID: %s\r\n", cid);
    }
    rt_buf_append_str(o, "\r\n");
    rt_buf_append_str(o, req);
    rt_buf_append_str(o, "\r\n");
}

static void batch_end(struct rt_buf *o)
{
    rt_buf_append_str(o, "--C--\r\n--B--\r\n");
}

static void insert_req(char *out, size_t n, const char *pk, const char *rk)
{
    snprintf(out, n,
             "POST http://127.0.0.1:10002/" ACCT
             "/people HTTP/1.1\r\n"
             "Content-Type: application/json\r\n"
             "Prefer: return-no-content\r\n\r\n"
             "{\"PartitionKey\":\"%s\",\"RowKey\":\"%s\",\"v\":1}",
             pk, rk);
}

/* Parses a batch of @n inserts with the given PKs/RKs. */
static int parse_inserts(const char *const *pks,
                         const char *const *rks,
                         size_t n,
                         struct fe_batch *b)
{
    struct rt_buf o;
    char req[512], cid[24];
    int rc;
    batch_begin(&o);
    for (size_t i = 0; i < n; i++) {
        insert_req(req, sizeof(req), pks[i], rks[i]);
        snprintf(cid, sizeof(cid), "%zu", i);
        batch_part(&o, cid, req);
    }
    batch_end(&o);
    rc = parse(B_CT, (const char *)o.data, o.len, b);
    rt_buf_free(&o);
    return rc;
}

/* A changeset with one part @req. */
static int parse_one(const char *req, struct fe_batch *b)
{
    struct rt_buf o;
    int rc;
    batch_begin(&o);
    batch_part(&o, "7", req);
    batch_end(&o);
    rc = parse(B_CT, (const char *)o.data, o.len, b);
    rt_buf_free(&o);
    return rc;
}

/* The six operations both SDK fixtures carry. */
static void check_six(const struct fe_batch *b, int with_cids)
{
    static const char *const rks[] = {"1", "2", "3", "o'k x", "5", "6"};
    static const int kinds[] = {
        RT__OP_KIND__OP_INSERT,         RT__OP_KIND__OP_MERGE,
        RT__OP_KIND__OP_REPLACE,        RT__OP_KIND__OP_UPSERT_MERGE,
        RT__OP_KIND__OP_UPSERT_REPLACE, RT__OP_KIND__OP_DELETE};
    char etag[64];

    assert_int_equal(b->nops, 6);
    assert_int_equal(b->changeset, 1);
    for (size_t i = 0; i < 6; i++) {
        const struct fe_batch_op *op = &b->ops[i];
        assert_string_equal(op->table, "people");
        assert_string_equal(op->pk, "p");
        assert_string_equal(op->rk, rks[i]);
        assert_int_equal(op->kind, kinds[i]);
        if (with_cids) {
            char want[8];
            snprintf(want, sizeof(want), "%zu", i);
            assert_non_null(op->content_id);
            assert_string_equal(op->content_id, want);
        } else {
            assert_null(op->content_id);
        }
        if (kinds[i] == RT__OP_KIND__OP_DELETE) {
            assert_int_equal(op->props.len, 0);
        } else {
            assert_true(op->props.len > 0);
        }
    }
    assert_int_equal(b->ops[0].prefer, FE_PREFER_NO_CONTENT);
    assert_int_equal(b->ops[0].verb, FE_OP_INSERT);
    assert_int_equal(b->ops[0].has_meta, 1);
    assert_int_equal(b->ops[0].meta, FE_META_MINIMAL);
    assert_int_equal(b->ops[1].verb, FE_OP_MERGE);
    assert_int_equal(b->ops[1].if_match_any, 1);
    assert_int_equal(b->ops[2].verb, FE_OP_PUT);
    assert_int_equal(b->ops[2].if_match_any, 0);
    fe_odata_etag(b->ops[2].if_match, etag);
    assert_string_equal(etag, ETAG_S);
    assert_int_equal(b->ops[3].if_match, 0);
    assert_int_equal(b->ops[3].if_match_any, 0);
    assert_int_equal(b->ops[5].verb, FE_OP_DELETE);
    assert_int_equal(b->ops[5].if_match_any, 1);
}

/* Replaces every CRLF of @s by LF (malloc'd). */
static char *to_lf(const char *s, size_t *len)
{
    char *o = malloc(strlen(s) + 1);
    size_t n = 0;
    for (; *s; s++) {
        if (s[0] == '\r' && s[1] == '\n') {
            continue;
        }
        o[n++] = *s;
    }
    o[n] = '\0';
    *len = n;
    return o;
}

/* ---- Tests: what the SDKs send -------------------------------------- */

/* The Python SDK's batch parses into its six operations, in order, with
 * their Content-IDs, keys (percent-encoded doubled quote decoded), kinds,
 * conditions and Prefer. */
static void test_python_sdk_batch(void **state)
{
    struct fe_batch b;
    (void)state;
    assert_int_equal(parse_str(PY_CT, py_batch, &b), 0);
    check_six(&b, 1);
    fe_batch_free(&b);
}

/* The JS SDK's batch (lower-case part headers, extra blank lines, no
 * Content-ID, literal quote in the key) gives the same operations. */
static void test_js_sdk_batch(void **state)
{
    struct fe_batch b;
    (void)state;
    assert_int_equal(parse_str(JS_CT, js_batch, &b), 0);
    check_six(&b, 0);
    fe_batch_free(&b);
}

/* Bare LF line ends work as well as CRLF. */
static void test_lf_only(void **state)
{
    struct fe_batch b;
    size_t n;
    char *py = to_lf(py_batch, &n);
    char *js;
    (void)state;
    assert_int_equal(parse(PY_CT, py, n, &b), 0);
    check_six(&b, 1);
    fe_batch_free(&b);
    js = to_lf(js_batch, &n);
    assert_int_equal(parse(JS_CT, js, n, &b), 0);
    check_six(&b, 0);
    fe_batch_free(&b);
    free(py);
    free(js);
}

/* Boundaries may be quoted, and other parameters and odd spacing or case
 * are tolerated in both Content-Types. */
static void test_quoted_boundaries(void **state)
{
    struct fe_batch b;
    char req[512];
    struct rt_buf o = RT_BUF_INIT;
    (void)state;
    insert_req(req, sizeof(req), "p", "1");
    rt_buf_append_str(&o,
                      "preamble to ignore\r\n--b a'tch\r\n"
                      "content-type: Multipart/Mixed ;charset=x; "
                      "BOUNDARY=\"c;s\"\r\n\r\n"
                      "--c;s\r\n"
                      "Content-Type: application/http; msgtype=request\r\n"
                      "\r\n");
    rt_buf_append_str(&o, req);
    rt_buf_append_str(&o,
                      "\r\n--c;s--   \r\nepilogue\r\n--b a'tch--\r\n"
                      "trailing epilogue");
    assert_int_equal(parse("multipart/mixed; boundary=\"b a'tch\"; x=y",
                           (const char *)o.data, o.len, &b),
                     0);
    assert_int_equal(b.nops, 1);
    assert_string_equal(b.ops[0].rk, "1");
    fe_batch_free(&b);
    rt_buf_free(&o);
}

/* Inner URLs may be absolute (path- or host-style, http or https),
 * absolute paths with or without the account, or relative to the service
 * root; query strings (SAS) are ignored. */
static void test_inner_url_forms(void **state)
{
    static const char *const urls[] = {
        "http://127.0.0.1:10002/" ACCT "/people(PartitionKey='p',RowKey='1')",
        "https://" ACCT
        ".table.core.windows.net/people(PartitionKey='p',"
        "RowKey='1')",
        "/" ACCT "/people(PartitionKey='p',RowKey='1')",
        "/people(PartitionKey='p',RowKey='1')",
        "people(PartitionKey='p',RowKey='1')",
        "people(PartitionKey='p',RowKey='1')?sv=2019-02-02&sig=abc%2F&se=x",
        "http://h/" ACCT "/people(PartitionKey='p',RowKey='1')?st=1&sp=raud",
        "HTTP://H/people(RowKey='1',PartitionKey='p')",
    };
    (void)state;
    for (size_t i = 0; i < sizeof(urls) / sizeof(urls[0]); i++) {
        struct fe_batch b;
        char req[512];
        snprintf(req, sizeof(req), "DELETE %s HTTP/1.1\r\nIf-Match: *\r\n",
                 urls[i]);
        assert_int_equal(parse_one(req, &b), 0);
        assert_string_equal(b.ops[0].table, "people");
        assert_string_equal(b.ops[0].pk, "p");
        assert_string_equal(b.ops[0].rk, "1");
        fe_batch_free(&b);
    }
}

/* A batch may instead hold exactly one bare GET of one entity. */
static void test_single_get(void **state)
{
    struct fe_batch b;
    const char *body =
        "--batch_x\r\n"
        "Content-Type: application/http\r\n"
        "Content-Transfer-Encoding: binary\r\n"
        "Content-ID: g1\r\n"
        "\r\n"
        "GET http://127.0.0.1:10002/" ACCT
        "/people(PartitionKey='p',"
        "RowKey='r%20x') HTTP/1.1\r\n"
        "Accept: application/json;odata=nometadata\r\n"
        "\r\n"
        "\r\n"
        "--batch_x--\r\n";
    (void)state;
    assert_int_equal(parse_str("multipart/mixed; boundary=batch_x", body, &b),
                     0);
    assert_int_equal(b.changeset, 0);
    assert_int_equal(b.nops, 1);
    assert_int_equal(b.ops[0].verb, FE_OP_GET);
    assert_string_equal(b.ops[0].rk, "r x");
    assert_string_equal(b.ops[0].content_id, "g1");
    assert_int_equal(b.ops[0].meta, FE_META_NONE);
    fe_batch_free(&b);
}

/* POST with X-HTTP-Method tunnels MERGE/PUT/DELETE; MERGE and PATCH are
 * the same operation; Content-ID may also sit in the inner headers. */
static void test_verbs(void **state)
{
    struct fe_batch b;
    const char *ent = "people(PartitionKey='p',RowKey='1')";
    char req[512];
    (void)state;
    snprintf(req, sizeof(req),
             "POST %s HTTP/1.1\r\nX-HTTP-Method: MERGE\r\n"
             "If-Match: *\r\n\r\n{\"a\":1}",
             ent);
    assert_int_equal(parse_one(req, &b), 0);
    assert_int_equal(b.ops[0].kind, RT__OP_KIND__OP_MERGE);
    fe_batch_free(&b);
    snprintf(req, sizeof(req), "MERGE %s HTTP/1.1\r\n\r\n{\"a\":1}", ent);
    assert_int_equal(parse_one(req, &b), 0);
    assert_int_equal(b.ops[0].kind, RT__OP_KIND__OP_UPSERT_MERGE);
    fe_batch_free(&b);
    snprintf(req, sizeof(req),
             "PUT %s HTTP/1.0\r\nPrefer: return-content\r\n"
             "\r\n{}",
             ent);
    assert_int_equal(parse_one(req, &b), 0);
    assert_int_equal(b.ops[0].kind, RT__OP_KIND__OP_UPSERT_REPLACE);
    fe_batch_free(&b);
    /* Content-ID among the inner headers. */
    {
        struct rt_buf o;
        batch_begin(&o);
        rt_buf_append_str(&o,
                          "--C\r\nContent-Type: application/http\r\n\r\n"
                          "DELETE people(PartitionKey='p',RowKey='1') "
                          "HTTP/1.1\r\nContent-ID: 42\r\nIf-Match: *\r\n"
                          "\r\n\r\n");
        batch_end(&o);
        assert_int_equal(parse(B_CT, (const char *)o.data, o.len, &b), 0);
        assert_string_equal(b.ops[0].content_id, "42");
        fe_batch_free(&b);
        rt_buf_free(&o);
    }
    /* Insert: Prefer honoured, keys from the body. */
    insert_req(req, sizeof(req), "a'b", "c d");
    assert_int_equal(parse_one(req, &b), 0);
    assert_int_equal(b.ops[0].kind, RT__OP_KIND__OP_INSERT);
    assert_int_equal(b.ops[0].prefer, FE_PREFER_NO_CONTENT);
    assert_string_equal(b.ops[0].pk, "a'b");
    assert_string_equal(b.ops[0].rk, "c d");
    fe_batch_free(&b);
}

/* ---- Tests: limits and rules ---------------------------------------- */

/* 100 operations are accepted; 101 fail at index 99 with the observed
 * message, echoing that part's Content-ID. */
static void test_op_limit(void **state)
{
    const char *pks[FE_BATCH_MAX_OPS + 1];
    const char *rks[FE_BATCH_MAX_OPS + 1];
    char names[FE_BATCH_MAX_OPS + 1][8];
    struct fe_batch b;
    (void)state;
    for (int i = 0; i <= FE_BATCH_MAX_OPS; i++) {
        snprintf(names[i], sizeof(names[i]), "r%03d", i);
        pks[i] = "p";
        rks[i] = names[i];
    }
    assert_int_equal(parse_inserts(pks, rks, FE_BATCH_MAX_OPS, &b), 0);
    assert_int_equal(b.nops, FE_BATCH_MAX_OPS);
    fe_batch_free(&b);
    assert_int_equal(parse_inserts(pks, rks, FE_BATCH_MAX_OPS + 1, &b),
                     RT_EINVAL);
    assert_int_equal(b.index, 99);
    assert_string_equal(b.msg, FE_BATCH_MSG_TOO_MANY);
    assert_string_equal(b.fail_cid, "99");
    fe_batch_free(&b);
}

/* A body over 4 MiB is 413 RequestBodyTooLarge for the whole request. */
static void test_body_limit(void **state)
{
    struct fe_batch b;
    size_t n = FE_BATCH_MAX_BODY + 1;
    char *big = malloc(n);
    (void)state;
    memset(big, 'x', n);
    assert_int_equal(parse(B_CT, big, n, &b), RT_ETOOLARGE);
    assert_int_equal(b.index, -1);
    assert_int_equal(rt_err_http_status(b.code), 413);
    fe_batch_free(&b);
    free(big);
}

/* Different PartitionKeys fail at the first op naming another one; a
 * different table counts as another entity group. */
static void test_partitions(void **state)
{
    static const char *const pks[] = {"p", "p", "q", "p", "r"};
    static const char *const rks[] = {"1", "2", "3", "4", "5"};
    struct fe_batch b;
    struct rt_buf o;
    char req[512];
    (void)state;
    assert_int_equal(parse_inserts(pks, rks, 5, &b), RT_EDIFFPARTITIONS);
    assert_int_equal(b.index, 2);
    assert_string_equal(b.fail_cid, "2");
    assert_string_equal(rt_err_azure_code(b.code),
                        "CommandsInBatchActOnDifferentPartitions");
    fe_batch_free(&b);

    batch_begin(&o);
    insert_req(req, sizeof(req), "p", "1");
    batch_part(&o, NULL, req);
    batch_part(&o, NULL,
               "DELETE /PEOPLE(PartitionKey='p',RowKey='2') HTTP/1.1\r\n"
               "If-Match: *\r\n");
    batch_part(&o, NULL,
               "DELETE /others(PartitionKey='p',RowKey='3') HTTP/1.1\r\n"
               "If-Match: *\r\n");
    batch_end(&o);
    assert_int_equal(parse(B_CT, (const char *)o.data, o.len, &b),
                     RT_EDIFFPARTITIONS);
    assert_int_equal(b.index, 2);
    assert_null(b.fail_cid);
    fe_batch_free(&b);
    rt_buf_free(&o);
}

/* Each (PK, RK) at most once: the second occurrence fails, whatever the
 * verbs. */
static void test_duplicate_row(void **state)
{
    static const char *const pks[] = {"p", "p", "p", "p"};
    static const char *const rks[] = {"1", "2", "3", "2"};
    struct fe_batch b;
    struct rt_buf o;
    char req[512];
    (void)state;
    assert_int_equal(parse_inserts(pks, rks, 4, &b), RT_EDUPROW);
    assert_int_equal(b.index, 3);
    assert_string_equal(rt_err_azure_code(b.code), "InvalidDuplicateRow");
    fe_batch_free(&b);

    batch_begin(&o);
    insert_req(req, sizeof(req), "p", "x");
    batch_part(&o, "a", req);
    batch_part(&o, "b",
               "DELETE people(PartitionKey='p',RowKey='x') HTTP/1.1\r\n"
               "If-Match: *\r\n");
    batch_end(&o);
    assert_int_equal(parse(B_CT, (const char *)o.data, o.len, &b), RT_EDUPROW);
    assert_int_equal(b.index, 1);
    assert_string_equal(b.fail_cid, "b");
    fe_batch_free(&b);
    rt_buf_free(&o);
}

/* If-Match in a part follows the standalone rules: a weak ETag this
 * server could not have issued (Azure's W/"0x8D...") is well-formed and
 * matches nothing (412 from the partition server), not a 400. */
static void test_if_match_foreign(void **state)
{
    struct fe_batch b;
    struct rt_buf o;
    (void)state;
    batch_begin(&o);
    batch_part(&o, NULL,
               "DELETE people(PartitionKey='p',RowKey='z') HTTP/1.1\r\n"
               "If-Match: W/\"0x8D4B8F1C2A3B4C5\"\r\n");
    batch_end(&o);
    assert_int_equal(parse(B_CT, (const char *)o.data, o.len, &b), 0);
    assert_int_equal(b.nops, 1);
    assert_int_equal(b.ops[0].if_match_any, 0);
    assert_true(b.ops[0].if_match == FE_ETAG_NEVER);
    fe_batch_free(&b);
    rt_buf_free(&o);
}

/* Per-operation failures carry the standalone codes at their index. */
static void test_op_errors(void **state)
{
    static const struct
    {
        const char *req;
        int code;
    } cases[] = {
        /* bad JSON */
        {"POST people HTTP/1.1\r\n\r\n{\"PartitionKey\":", RT_EINVAL},
        /* insert without RowKey */
        {"POST people HTTP/1.1\r\n\r\n{\"PartitionKey\":\"p\"}", RT_ENEEDVALUE},
        /* insert with no body at all */
        {"POST people HTTP/1.1\r\n\r\n", RT_EINVAL},
        /* a bad property name */
        {"POST people HTTP/1.1\r\n\r\n{\"PartitionKey\":\"p\",\"RowKey\":"
         "\"z\",\"a-b\":1}",
         RT_EPROPNAME},
        /* DELETE needs If-Match */
        {"DELETE people(PartitionKey='p',RowKey='z') HTTP/1.1\r\n",
         RT_EMISSINGHEADER},
        /* empty / malformed If-Match */
        {"DELETE people(PartitionKey='p',RowKey='z') HTTP/1.1\r\n"
         "If-Match:\r\n",
         RT_EPRECOND},
        {"PUT people(PartitionKey='p',RowKey='z') HTTP/1.1\r\n"
         "If-Match: \"abc\"\r\n\r\n{}",
         RT_EINVAL},
        /* unknown verb, GET inside a changeset */
        {"HEAD people(PartitionKey='p',RowKey='z') HTTP/1.1\r\n", RT_EVERB},
        {"GET people(PartitionKey='p',RowKey='z') HTTP/1.1\r\n", RT_EINVAL},
        /* verb / resource mismatch, other resources */
        {"POST people(PartitionKey='p',RowKey='z') HTTP/1.1\r\n\r\n{}",
         RT_EMETHOD},
        {"DELETE people HTTP/1.1\r\nIf-Match: *\r\n", RT_EMETHOD},
        {"POST Tables HTTP/1.1\r\n\r\n{\"TableName\":\"x\"}", RT_EURI},
        {"POST $batch HTTP/1.1\r\n\r\n", RT_EURI},
        /* bad key predicate / key characters / table name */
        {"DELETE people(PartitionKey='p') HTTP/1.1\r\nIf-Match: *\r\n",
         RT_EINVAL},
        {"DELETE people(PartitionKey='p',RowKey='a%2Fb') HTTP/1.1\r\n"
         "If-Match: *\r\n",
         RT_EINVAL},
        /* keys from a body: OutOfRangeInput, as for a single insert */
        {"POST people HTTP/1.1\r\n\r\n{\"PartitionKey\":\"p\",\"RowKey\":"
         "\"a#b\"}",
         RT_EOUTOFRANGE},
        {"POST p-x HTTP/1.1\r\n\r\n{}", RT_EBADNAME},
        /* X-HTTP-Method misuse: the standalone codes */
        {"PUT people(PartitionKey='p',RowKey='z') HTTP/1.1\r\n"
         "X-HTTP-Method: MERGE\r\n\r\n{}",
         RT_EXMETHODPOST},
        {"POST people(PartitionKey='p',RowKey='z') HTTP/1.1\r\n"
         "X-HTTP-Method: GET\r\n\r\n{}",
         RT_EXMETHODVALUE},
        /* Atom body that is not an Atom entry (no version sent: Atom is
         * read, fe_hdr_body_atom) */
        {"POST people HTTP/1.1\r\nContent-Type: application/atom+xml\r\n"
         "\r\n<entry/>",
         RT_EINVAL},
    };
    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct fe_batch b;
        struct rt_buf o;
        char req[512];
        int rc;
        batch_begin(&o);
        insert_req(req, sizeof(req), "p", "first");
        batch_part(&o, "c0", req);
        batch_part(&o, "c1", cases[i].req);
        insert_req(req, sizeof(req), "p", "last");
        batch_part(&o, "c2", req);
        batch_end(&o);
        rc = parse(B_CT, (const char *)o.data, o.len, &b);
        if (rc != cases[i].code || b.index != 1) {
            print_error("case %zu: rc %s index %d (%s)\n", i, rt_err_name(rc),
                        b.index, b.errmsg);
        }
        assert_int_equal(rc, cases[i].code);
        assert_int_equal(b.index, 1);
        assert_string_equal(b.fail_cid, "c1");
        fe_batch_free(&b);
        rt_buf_free(&o);
    }
}

/* Parses [insert, @mid, insert] under x-ms-version @version. */
static int parse_versioned(const char *version,
                           const char *mid,
                           struct fe_batch *b)
{
    struct rt_buf o;
    char req[512];
    int rc;
    batch_begin(&o);
    insert_req(req, sizeof(req), "p", "first");
    batch_part(&o, "c0", req);
    batch_part(&o, "c1", mid);
    insert_req(req, sizeof(req), "p", "last");
    batch_part(&o, "c2", req);
    batch_end(&o);
    fe_batch_init(b);
    rc = fe_batch_parse(B_CT, ACCT, version, o.data, o.len, b);
    rt_buf_free(&o);
    return rc;
}

/* Before 2011-08-18 there is no Insert Or Replace/Merge: a PUT, MERGE or
 * PATCH without If-Match fails its operation with the standalone request's
 * 400 MissingRequiredHeader; with If-Match, or from 2011-08-18 on (or
 * without x-ms-version), it is an update or an upsert. */
static void test_version_gate(void **state)
{
    static const char *const upserts[] = {
        "PUT people(PartitionKey='p',RowKey='z') HTTP/1.1\r\n\r\n{}",
        "MERGE people(PartitionKey='p',RowKey='z') HTTP/1.1\r\n\r\n{}",
        "PATCH people(PartitionKey='p',RowKey='z') HTTP/1.1\r\n\r\n{}",
        "POST people(PartitionKey='p',RowKey='z') HTTP/1.1\r\n"
        "X-HTTP-Method: PUT\r\n\r\n{}",
    };
    static const int kinds[] = {
        RT__OP_KIND__OP_UPSERT_REPLACE,
        RT__OP_KIND__OP_UPSERT_MERGE,
        RT__OP_KIND__OP_UPSERT_MERGE,
        RT__OP_KIND__OP_UPSERT_REPLACE,
    };
    struct fe_batch b;
    (void)state;
    for (size_t i = 0; i < sizeof(upserts) / sizeof(upserts[0]); i++) {
        assert_int_equal(parse_versioned("2009-09-19", upserts[i], &b),
                         RT_EMISSINGHEADER);
        assert_int_equal(b.code, RT_EMISSINGHEADER);
        assert_int_equal(b.index, 1);
        assert_string_equal(b.fail_cid, "c1");
        fe_batch_free(&b);
        assert_int_equal(parse_versioned("2011-08-18", upserts[i], &b), 0);
        assert_int_equal(b.ops[1].kind, kinds[i]);
        fe_batch_free(&b);
        assert_int_equal(parse_versioned(NULL, upserts[i], &b), 0);
        assert_int_equal(b.ops[1].kind, kinds[i]);
        fe_batch_free(&b);
    }
    /* With If-Match the old version updates. */
    assert_int_equal(
        parse_versioned("2009-09-19",
                        "PUT people(PartitionKey='p',RowKey='z') HTTP/1.1\r\n"
                        "If-Match: *\r\n\r\n{}",
                        &b),
        0);
    assert_int_equal(b.ops[1].kind, RT__OP_KIND__OP_REPLACE);
    assert_int_equal(b.ops[0].kind, RT__OP_KIND__OP_INSERT);
    fe_batch_free(&b);
    /* A malformed If-Match still wins over the version rule (order). */
    assert_int_equal(
        parse_versioned("2009-09-19",
                        "MERGE people(PartitionKey='p',RowKey='z') "
                        "HTTP/1.1\r\nIf-Match: \"abc\"\r\n\r\n{}",
                        &b),
        RT_EINVAL);
    assert_int_equal(b.index, 1);
    fe_batch_free(&b);
}

/* ---- Tests: malformed requests -------------------------------------- */

/* Whole-request failures: wrong or missing Content-Type, no boundary,
 * several changesets, a GET mixed with writes, a bare write, an empty
 * changeset or batch, a nested non-http part, a bad request line. */
static void test_malformed(void **state)
{
    static const struct
    {
        const char *ct;
        const char *body;
    } cases[] = {
        {NULL, "--B\r\n--B--\r\n"},
        {"application/json", "{}"},
        {"multipart/mixed", "--B\r\n--B--\r\n"},
        {"multipart/mixed; boundary=", "--\r\n----\r\n"},
        {"multipart/mixed; boundary=\"B", "--B\r\n--B--\r\n"},
        {"multipart/mixed; boundary=\"B\"x", "--B\r\n--B--\r\n"},
        {B_CT, ""},
        {B_CT, "--B--\r\n"},
        {B_CT, "no delimiter at all"},
        {B_CT, "--Bx\r\n--Bx--\r\n"},
        /* two changesets */
        {B_CT,
         "--B\r\nContent-Type: multipart/mixed; boundary=C\r\n\r\n"
         "--C\r\nContent-Type: application/http\r\n\r\n"
         "DELETE t1(PartitionKey='p',RowKey='1') HTTP/1.1\r\n"
         "If-Match: *\r\n\r\n\r\n--C--\r\n"
         "--B\r\nContent-Type: multipart/mixed; boundary=D\r\n\r\n"
         "--D\r\nContent-Type: application/http\r\n\r\n"
         "DELETE t1(PartitionKey='p',RowKey='2') HTTP/1.1\r\n"
         "If-Match: *\r\n\r\n\r\n--D--\r\n--B--\r\n"},
        /* a GET next to a changeset */
        {B_CT,
         "--B\r\nContent-Type: application/http\r\n\r\n"
         "GET t1(PartitionKey='p',RowKey='1') HTTP/1.1\r\n\r\n\r\n"
         "--B\r\nContent-Type: multipart/mixed; boundary=C\r\n\r\n"
         "--C\r\nContent-Type: application/http\r\n\r\n"
         "DELETE t1(PartitionKey='p',RowKey='2') HTTP/1.1\r\n"
         "If-Match: *\r\n\r\n\r\n--C--\r\n--B--\r\n"},
        /* two GETs */
        {B_CT,
         "--B\r\nContent-Type: application/http\r\n\r\n"
         "GET t1(PartitionKey='p',RowKey='1') HTTP/1.1\r\n\r\n\r\n"
         "--B\r\nContent-Type: application/http\r\n\r\n"
         "GET t1(PartitionKey='p',RowKey='2') HTTP/1.1\r\n\r\n\r\n"
         "--B--\r\n"},
        /* a write outside a changeset */
        {B_CT,
         "--B\r\nContent-Type: application/http\r\n\r\n"
         "DELETE t1(PartitionKey='p',RowKey='1') HTTP/1.1\r\n"
         "If-Match: *\r\n\r\n\r\n--B--\r\n"},
        /* empty changeset, changeset without a boundary, unknown type */
        {B_CT,
         "--B\r\nContent-Type: multipart/mixed; boundary=C\r\n\r\n"
         "--C--\r\n--B--\r\n"},
        {B_CT, "--B\r\nContent-Type: multipart/mixed\r\n\r\n--B--\r\n"},
        {B_CT, "--B\r\nContent-Type: text/plain\r\n\r\nhi\r\n--B--\r\n"},
        {B_CT, "--B\r\n\r\nno headers\r\n--B--\r\n"},
        /* nested changeset inside the changeset; non-http part */
        {B_CT,
         "--B\r\nContent-Type: multipart/mixed; boundary=C\r\n\r\n"
         "--C\r\nContent-Type: multipart/mixed; boundary=D\r\n\r\n"
         "--D--\r\n--C--\r\n--B--\r\n"},
        /* bad request lines and headers */
        {B_CT,
         "--B\r\nContent-Type: multipart/mixed; boundary=C\r\n\r\n"
         "--C\r\nContent-Type: application/http\r\n\r\n"
         "DELETE t1(PartitionKey='p',RowKey='1')\r\n\r\n--C--\r\n"
         "--B--\r\n"},
        {B_CT,
         "--B\r\nContent-Type: multipart/mixed; boundary=C\r\n\r\n"
         "--C\r\nContent-Type: application/http\r\n\r\n"
         "DELETE t1 HTTP/2 x\r\n\r\n--C--\r\n--B--\r\n"},
        {B_CT,
         "--B\r\nContent-Type: multipart/mixed; boundary=C\r\n\r\n"
         "--C\r\nContent-Type: application/http\r\n\r\n"
         "DELETE t1(PartitionKey='p',RowKey='1') HTTP/1.1\r\n"
         "this is no header\r\n\r\n--C--\r\n--B--\r\n"},
        {B_CT,
         "--B\r\nContent-Type: multipart/mixed; boundary=C\r\n\r\n"
         "--C\r\nContent-Type: application/http\r\n\r\n\r\n\r\n"
         "--C--\r\n--B--\r\n"},
        /* changeset never closed */
        {B_CT,
         "--B\r\nContent-Type: multipart/mixed; boundary=C\r\n\r\n"
         "--C\r\nContent-Type: application/http\r\n\r\n"
         "DELETE t1(PartitionKey='p',RowKey='1') HTTP/1.1\r\n"
         "If-Match: *\r\n\r\n\r\n--B--\r\n"},
    };
    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct fe_batch b;
        int rc = parse_str(cases[i].ct, cases[i].body, &b);
        if (rc != RT_EINVAL || b.index != -1) {
            print_error("case %zu: rc %s index %d (%s)\n", i, rt_err_name(rc),
                        b.index, b.errmsg);
        }
        assert_int_equal(rc, RT_EINVAL);
        assert_int_equal(b.index, -1);
        fe_batch_free(&b);
    }
}

/* Every truncation of a real batch is rejected (and read in bounds: each
 * prefix is copied to an exactly sized heap block for ASan). */
static void test_truncated(void **state)
{
    const char *srcs[] = {py_batch, js_batch};
    const char *cts[] = {PY_CT, JS_CT};
    (void)state;
    for (int s = 0; s < 2; s++) {
        size_t full = strlen(srcs[s]);
        /* The close delimiter "--batch_...--" ends 2 bytes before. */
        for (size_t n = 0; n + 2 < full; n++) {
            struct fe_batch b;
            char *p = malloc(n ? n : 1);
            memcpy(p, srcs[s], n);
            assert_int_not_equal(parse(cts[s], p, n, &b), 0);
            fe_batch_free(&b);
            free(p);
        }
    }
}

/* Single-byte mutations of a real batch never crash or read out of
 * bounds; a failure is always a code with a sane index. */
static void test_mutations(void **state)
{
    static const char repl[] = {'-', '\r', '\n', ':',  ' ',
                                '"', '{',  '\0', '\'', '%'};
    size_t full = strlen(py_batch);
    char *p = malloc(full);
    (void)state;
    for (size_t i = 0; i < full; i++) {
        for (size_t r = 0; r < sizeof(repl); r++) {
            struct fe_batch b;
            int rc;
            memcpy(p, py_batch, full);
            p[i] = repl[r];
            rc = parse(PY_CT, p, full, &b);
            if (rc != 0) {
                assert_true(rt_err_is_rt(rc));
                assert_true(b.index >= -1 && b.index < 6);
            } else {
                assert_true(b.nops >= 1 && b.nops <= 6);
            }
            fe_batch_free(&b);
        }
    }
    free(p);
}

/* Random bytes, and random lines built from batch fragments, are
 * rejected without crashing. */
static void test_garbage(void **state)
{
    static const char *const frags[] = {
        "--B",
        "--B--",
        "--C",
        "--C--",
        "Content-Type: multipart/mixed; "
        "boundary=C",
        "Content-Type: application/http",
        "",
        "DELETE t1(PartitionKey='p',RowKey='1') HTTP/1.1",
        "If-Match: *",
        "POST t1 HTTP/1.1",
        "{\"PartitionKey\":\"p\",\"RowKey\":\"1\"}",
        "GET t1(PartitionKey='p',RowKey='1') HTTP/1.1",
        "x: y",
        ":",
        "--",
        "\r"};
    uint32_t seed = 12345;
    (void)state;
    for (int round = 0; round < 3000; round++) {
        struct fe_batch b;
        struct rt_buf o = RT_BUF_INIT;
        size_t lines;
        char *p;
        seed = seed * 1103515245u + 12345u;
        lines = (seed >> 16) % 24;
        for (size_t l = 0; l < lines; l++) {
            seed = seed * 1103515245u + 12345u;
            if ((seed >> 8) % 7 == 0) {
                for (int k = 0; k < 9; k++) {
                    seed = seed * 1103515245u + 12345u;
                    rt_buf_append_u8(&o, (uint8_t)(seed >> 16));
                }
            } else {
                rt_buf_append_str(
                    &o,
                    frags[(seed >> 16) % (sizeof(frags) / sizeof(frags[0]))]);
            }
            rt_buf_append_str(&o, (seed >> 4) % 3 ? "\r\n" : "\n");
        }
        p = malloc(o.len ? o.len : 1);
        if (o.len) {
            memcpy(p, o.data, o.len);
        }
        (void)parse(B_CT, p, o.len, &b);
        assert_true(b.index >= -1 && b.index < FE_BATCH_MAX_OPS);
        fe_batch_free(&b);
        free(p);
        rt_buf_free(&o);
    }
}

/* ---- Tests: the response -------------------------------------------- */

#define L1 "http://127.0.0.1:10002/" ACCT "/people(PartitionKey='p',RowKey='1')"
#define E1 "W/\"datetime'2024-05-01T10%3A11%3A12.3456789Z'\""
#define E2 "W/\"datetime'2024-05-01T10%3A11%3A12.3456790Z'\""
#define JSON_CT \
    "application/json;odata=minimalmetadata;streaming=true;charset=utf-8"

/* A successful changeset: one part per op in order, headers in the
 * service's order, ETag spelt "ETag", no body (so no '{') where the op
 * returns none. */
static void test_write_success(void **state)
{
    struct fe_batch_part parts[3];
    struct rt_buf o = RT_BUF_INIT;
    const char *want =
        "--batchresponse_R\r\n"
        "Content-Type: multipart/mixed; boundary=changesetresponse_S\r\n"
        "\r\n"
        "--changesetresponse_S\r\n"
        "Content-Type: application/http\r\n"
        "Content-Transfer-Encoding: binary\r\n"
        "\r\n"
        "HTTP/1.1 204 No Content\r\n"
        "Content-ID: 0\r\n"
        "X-Content-Type-Options: nosniff\r\n"
        "Cache-Control: no-cache\r\n"
        "Preference-Applied: return-no-content\r\n"
        "DataServiceVersion: 3.0;\r\n"
        "Location: " L1
        "\r\n"
        "DataServiceId: " L1
        "\r\n"
        "ETag: " E1
        "\r\n"
        "\r\n"
        "\r\n"
        "--changesetresponse_S\r\n"
        "Content-Type: application/http\r\n"
        "Content-Transfer-Encoding: binary\r\n"
        "\r\n"
        "HTTP/1.1 204 No Content\r\n"
        "Content-ID: 1\r\n"
        "X-Content-Type-Options: nosniff\r\n"
        "Cache-Control: no-cache\r\n"
        "DataServiceVersion: 3.0;\r\n"
        "ETag: " E2
        "\r\n"
        "\r\n"
        "\r\n"
        "--changesetresponse_S\r\n"
        "Content-Type: application/http\r\n"
        "Content-Transfer-Encoding: binary\r\n"
        "\r\n"
        "HTTP/1.1 204 No Content\r\n"
        "X-Content-Type-Options: nosniff\r\n"
        "Cache-Control: no-cache\r\n"
        "DataServiceVersion: 3.0;\r\n"
        "\r\n"
        "\r\n"
        "--changesetresponse_S--\r\n"
        "--batchresponse_R--\r\n";
    (void)state;
    memset(parts, 0, sizeof(parts));
    parts[0].status = 204;
    parts[0].content_id = "0";
    parts[0].preference_applied = "return-no-content";
    parts[0].location = L1;
    parts[0].etag = E1;
    parts[1].status = 204;
    parts[1].content_id = "1";
    parts[1].etag = E2;
    parts[2].status = 204;
    fe_batch_write(&o, "R", "S", parts, 3);
    assert_string_equal(rt_buf_cstr(&o), want);
    assert_null(strchr(rt_buf_cstr(&o), '{'));
    rt_buf_free(&o);
}

/* An insert without Prefer: 201 with Content-Type and the entity. */
static void test_write_created(void **state)
{
    struct fe_batch_part part;
    struct rt_buf o = RT_BUF_INIT;
    const char *body = "{\"PartitionKey\":\"p\",\"RowKey\":\"1\"}";
    const char *want =
        "--batchresponse_R\r\n"
        "Content-Type: multipart/mixed; boundary=changesetresponse_S\r\n"
        "\r\n"
        "--changesetresponse_S\r\n"
        "Content-Type: application/http\r\n"
        "Content-Transfer-Encoding: binary\r\n"
        "\r\n"
        "HTTP/1.1 201 Created\r\n"
        "X-Content-Type-Options: nosniff\r\n"
        "Cache-Control: no-cache\r\n"
        "DataServiceVersion: 3.0;\r\n"
        "Content-Type: " JSON_CT
        "\r\n"
        "Location: " L1
        "\r\n"
        "DataServiceId: " L1
        "\r\n"
        "ETag: " E1
        "\r\n"
        "\r\n"
        "{\"PartitionKey\":\"p\",\"RowKey\":\"1\"}\r\n"
        "--changesetresponse_S--\r\n"
        "--batchresponse_R--\r\n";
    (void)state;
    memset(&part, 0, sizeof(part));
    part.status = 201;
    part.location = L1;
    part.etag = E1;
    part.content_type = JSON_CT;
    part.body = (const uint8_t *)body;
    part.body_len = strlen(body);
    fe_batch_write(&o, "R", "S", &part, 1);
    assert_string_equal(rt_buf_cstr(&o), want);
    rt_buf_free(&o);
}

/* The failure response: one part with the real status, the failing
 * part's Content-ID and "<index>:<message>\nRequestId:..\nTime:.." (the
 * line feeds JSON-escaped as fe_json_escape does everywhere). */
static void test_write_failure(void **state)
{
    struct fe_batch_part part;
    struct rt_buf json = RT_BUF_INIT;
    struct rt_buf o = RT_BUF_INIT;
    const char *want_json =
        "{\"odata.error\":{\"code\":\"EntityAlreadyExists\",\"message\":{"
        "\"lang\":\"en-US\",\"value\":\"1:The specified entity already "
        "exists.\\u000ARequestId:rid\\u000ATime:2024-05-01T10:11:12.3456789Z"
        "\"}}}";
    const char *want =
        "--batchresponse_R\r\n"
        "Content-Type: multipart/mixed; boundary=changesetresponse_S\r\n"
        "\r\n"
        "--changesetresponse_S\r\n"
        "Content-Type: application/http\r\n"
        "Content-Transfer-Encoding: binary\r\n"
        "\r\n"
        "HTTP/1.1 409 Conflict\r\n"
        "Content-ID: 1\r\n"
        "X-Content-Type-Options: nosniff\r\n"
        "Cache-Control: no-cache\r\n"
        "DataServiceVersion: 3.0;\r\n"
        "Content-Type: " JSON_CT
        "\r\n"
        "\r\n";
    (void)state;
    fe_batch_error_json(&json, 0, RT_EEXIST, 1, NULL, "rid",
                        "2024-05-01T10:11:12.3456789Z");
    assert_string_equal(rt_buf_cstr(&json), want_json);
    memset(&part, 0, sizeof(part));
    part.status = 409;
    part.content_id = "1";
    part.content_type = JSON_CT;
    part.body = json.data;
    part.body_len = json.len;
    fe_batch_write(&o, "R", "S", &part, 1);
    assert_int_equal(strncmp(rt_buf_cstr(&o), want, strlen(want)), 0);
    assert_string_equal(rt_buf_cstr(&o) + strlen(want) + json.len,
                        "\r\n--changesetresponse_S--\r\n"
                        "--batchresponse_R--\r\n");
    rt_buf_reset(&json);
    fe_batch_error_json(&json, 0, RT_EINVAL, 99, FE_BATCH_MSG_TOO_MANY, "r",
                        "t");
    assert_string_equal(
        rt_buf_cstr(&json),
        "{\"odata.error\":{\"code\":\"InvalidInput\",\"message\":{\"lang\":"
        "\"en-US\",\"value\":\"99:The batch request operation exceeds the "
        "maximum 100 changes per change set.\\u000ARequestId:r\\u000ATime:t"
        "\"}}}");
    rt_buf_free(&json);
    rt_buf_free(&o);
}

/* A single-GET response: the part sits directly in the batch. */
static void test_write_get(void **state)
{
    struct fe_batch_part part;
    struct rt_buf o = RT_BUF_INIT;
    const char *want =
        "--batchresponse_R\r\n"
        "Content-Type: application/http\r\n"
        "Content-Transfer-Encoding: binary\r\n"
        "\r\n"
        "HTTP/1.1 200 OK\r\n"
        "X-Content-Type-Options: nosniff\r\n"
        "Cache-Control: no-cache\r\n"
        "DataServiceVersion: 3.0;\r\n"
        "Content-Type: " JSON_CT
        "\r\n"
        "ETag: " E1
        "\r\n"
        "\r\n"
        "{}\r\n"
        "--batchresponse_R--\r\n";
    (void)state;
    memset(&part, 0, sizeof(part));
    part.status = 200;
    part.etag = E1;
    part.content_type = JSON_CT;
    part.body = (const uint8_t *)"{}";
    part.body_len = 2;
    fe_batch_write(&o, "R", NULL, &part, 1);
    assert_string_equal(rt_buf_cstr(&o), want);
    rt_buf_free(&o);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_python_sdk_batch),
        cmocka_unit_test(test_js_sdk_batch),
        cmocka_unit_test(test_lf_only),
        cmocka_unit_test(test_quoted_boundaries),
        cmocka_unit_test(test_inner_url_forms),
        cmocka_unit_test(test_single_get),
        cmocka_unit_test(test_verbs),
        cmocka_unit_test(test_op_limit),
        cmocka_unit_test(test_body_limit),
        cmocka_unit_test(test_partitions),
        cmocka_unit_test(test_duplicate_row),
        cmocka_unit_test(test_if_match_foreign),
        cmocka_unit_test(test_op_errors),
        cmocka_unit_test(test_version_gate),
        cmocka_unit_test(test_malformed),
        cmocka_unit_test(test_truncated),
        cmocka_unit_test(test_mutations),
        cmocka_unit_test(test_garbage),
        cmocka_unit_test(test_write_success),
        cmocka_unit_test(test_write_created),
        cmocka_unit_test(test_write_failure),
        cmocka_unit_test(test_write_get),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
