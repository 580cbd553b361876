/* rl_auth: SharedKey / SharedKeyLite signatures and SAS tokens. The
 * expected values were computed independently with
 * `openssl dgst -sha256 -mac HMAC -macopt hexkey:<dev key> -binary | base64`
 * over the string-to-sign of docs/table-api-spec.md §7.2-7.4. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "rl_auth.h"
#include "rl_req.h"
#include "rl_spec.h"

#define DEV_KEY                                                           \
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZ" \
    "FPTOtr/KBHBeksoGMGw=="
#define DATE "Mon, 14 Oct 2013 18:25:49 GMT"

/* SharedKey: the spec's example (POST, JSON content type, path-style
 * path with the account twice in the canonical resource). */
static void test_sharedkey_post(void **state)
{
    struct rl_signer s;
    char sig[RL_SIG_LEN + 1];
    const char *path = "/devstoreaccount1/people";
    (void)state;
    assert_int_equal(rl_signer_init(&s, "devstoreaccount1", DEV_KEY), 0);
    rl_sign_sharedkey(&s, "POST", "application/json", DATE, path, strlen(path),
                      sig);
    assert_string_equal(sig, "qjZcfDl3bw3yzkBsRTJjKuYiIU6ZMREG4WE4oUdVAxE=");
    rl_signer_wipe(&s);
}

/* SharedKey GET: empty Content-Type line, key predicate kept raw. */
static void test_sharedkey_get(void **state)
{
    struct rl_signer s;
    char sig[RL_SIG_LEN + 1];
    const char *path =
        "/devstoreaccount1/people(PartitionKey='p1',RowKey='r1')";
    (void)state;
    assert_int_equal(rl_signer_init(&s, "devstoreaccount1", DEV_KEY), 0);
    rl_sign_sharedkey(&s, "GET", NULL, DATE, path, strlen(path), sig);
    assert_string_equal(sig, "1/eCUartAcqiozsQqhSM1h7nKve+/iEuZgD+3C9otKQ=");
}

/* SharedKeyLite: Date + canonical resource. */
static void test_sharedkeylite(void **state)
{
    struct rl_signer s;
    char sig[RL_SIG_LEN + 1];
    const char *path = "/devstoreaccount1/Tables";
    (void)state;
    assert_int_equal(rl_signer_init(&s, "devstoreaccount1", DEV_KEY), 0);
    rl_sign_sharedkeylite(&s, "Sun, 11 Oct 2009 19:52:39 GMT", path,
                          strlen(path), sig);
    assert_string_equal(sig, "ErXwXhFUdsOaklxX2/UTRDcWl4T591pmLcUzbBU+SRI=");
}

/* Account and table SAS: signature over the documented string-to-sign,
 * values URL-encoded in the token. */
static void test_sas(void **state)
{
    struct rl_signer s;
    char tok[512];
    time_t st = 1704067200; /* 2024-01-01T00:00:00Z */
    (void)state;
    assert_int_equal(rl_signer_init(&s, "devstoreaccount1", DEV_KEY), 0);
    assert_int_equal(rl_sas_account(&s, st, st + 86400, tok, sizeof(tok)), 0);
    assert_non_null(strstr(tok, "sv=2019-02-02&ss=t&srt=sco&sp=rwdlacu"));
    assert_non_null(strstr(tok, "st=2024-01-01T00%3A00%3A00Z"));
    assert_non_null(
        strstr(tok, "sig=s5Jwv8ar7gX7Ufdig1LYSzBU4SPHwk2PexfKPefwvTg%3D"));
    assert_int_equal(
        rl_sas_table(&s, "People", "raud", st, st + 86400, tok, sizeof(tok)),
        0);
    assert_non_null(strstr(tok, "tn=People&sp=raud"));
    assert_non_null(
        strstr(tok, "sig=%2B1plYatlCxUCZF0muBfPgF8EQNfmFegtV4QNQ%2FUK854%3D"));
    assert_int_equal(rl_sas_account(&s, st, st + 1, tok, 20), -1);
}

/* RFC 1123 dates have a fixed width. */
static void test_date(void **state)
{
    char d[RL_DATE_LEN + 1];
    (void)state;
    rl_http_date(1381775149, d);
    assert_string_equal(d, DATE);
    assert_int_equal(strlen(d), RL_DATE_LEN);
}

/* Base64 round trip; a bad key is refused. */
static void test_b64(void **state)
{
    uint8_t raw[64], back[64];
    char enc[100];
    struct rl_signer s;
    (void)state;
    for (int n = 0; n < 40; n++) {
        for (int i = 0; i < n; i++) {
            raw[i] = (uint8_t)(i * 37 + n);
        }
        rl_b64_encode(raw, (size_t)n, enc);
        assert_int_equal(rl_b64_decode(enc, back, sizeof(back)), n);
        assert_memory_equal(raw, back, (size_t)n);
    }
    assert_int_equal(rl_signer_init(&s, "a", "not*base64"), -1);
}

/* test_request_signed's request config and buffer, freed by the teardown
 * even when an assertion ends the test early. */
struct req_fixture
{
    struct rl_reqcfg c;
    char *buf;
};

static int req_setup(void **state)
{
    struct req_fixture *f = calloc(1, sizeof(*f));
    if (!f) {
        return -1;
    }
    *state = f;
    return 0;
}

static int req_teardown(void **state)
{
    struct req_fixture *f = *state;
    if (f) {
        free(f->buf);
        rl_reqcfg_free(&f->c);
        rl_signer_wipe(&f->c.t.signer);
        free(f);
    }
    *state = NULL;
    return 0;
}

/* rl_req_build writes no NUL: terminate the request at its returned
 * length (the buffer has one spare byte) so it can be searched as a
 * string. */
static size_t build(const struct rl_reqcfg *c,
                    const struct rl_reqargs *a,
                    char *buf)
{
    size_t len = rl_req_build(c, a, DATE, buf);
    assert_true(len > 0 && len <= c->max_request);
    buf[len] = '\0';
    return len;
}

/* A built request carries the signature of its own path and date. */
static void test_request_signed(void **state)
{
    struct req_fixture *f = *state;
    struct rl_reqcfg *c = &f->c;
    struct rl_reqargs a;
    char err[RL_ERR_SIZE], sig[RL_SIG_LEN + 1], want[128];
    char *buf;
    const char *p;
    size_t len;
    assert_int_equal(
        rl_target_parse(&c->t, "http://127.0.0.1:10002/devstoreaccount1", "",
                        err),
        0);
    assert_string_equal(c->t.account, "devstoreaccount1");
    assert_string_equal(c->t.base_path, "/devstoreaccount1");
    strcpy(c->t.table, "people");
    c->t.auth = RL_AUTH_SHAREDKEY;
    c->t.have_key = 1;
    assert_int_equal(rl_signer_init(&c->t.signer, c->t.account, DEV_KEY), 0);
    c->km.partitions = 10;
    c->entity_size = 300;
    c->props = 5;
    c->page_size = 1000;
    c->range_len = 10;
    assert_int_equal(rl_reqcfg_prepare(c, 3, err), 0);
    /* Junk, not zeros: the request must not depend on what was there. */
    buf = f->buf = malloc(c->max_request + 1);
    assert_non_null(buf);
    memset(buf, 0xa5, c->max_request + 1);
    memset(&a, 0, sizeof(a));
    a.rq = RL_RQ_INSERT;
    a.id = 7;
    len = build(c, &a, buf);
    assert_int_equal(strlen(buf), len);
    assert_true(
        strncmp(buf, "POST /devstoreaccount1/people HTTP/1.1\r\n", 40) == 0);
    rl_sign_sharedkey(&c->t.signer, "POST", "application/json", DATE,
                      "/devstoreaccount1/people", 24, sig);
    snprintf(want, sizeof(want),
             "Authorization: SharedKey devstoreaccount1:%s\r\n", sig);
    assert_non_null(strstr(buf, want));
    p = strstr(buf, "\r\n\r\n");
    assert_non_null(p);
    assert_non_null(strstr(p, "{\"PartitionKey\":\"p"));
    /* Content-Length matches the body. */
    {
        const char *cl = strstr(buf, "Content-Length: ");
        assert_non_null(cl);
        assert_int_equal(atoi(cl + 16), strlen(p + 4));
    }
    /* A batch: three parts in one partition, lengths consistent. */
    a.rq = RL_RQ_BATCH_INSERT;
    a.n = 3;
    a.pk_index = 4;
    a.brow0 = 100;
    len = build(c, &a, buf);
    assert_int_equal(strlen(buf), len);
    p = strstr(buf, "\r\n\r\n");
    assert_non_null(p);
    {
        const char *cl = strstr(buf, "Content-Length: ");
        assert_non_null(cl);
        assert_int_equal(atoi(cl + 16), strlen(p + 4));
    }
    assert_non_null(strstr(buf, "POST /devstoreaccount1/$batch HTTP/1.1"));
    assert_non_null(strstr(p,
                           "POST http://127.0.0.1:10002/devstoreaccount1/"
                           "people HTTP/1.1"));
    assert_non_null(strstr(p, "\"RowKey\":\"b0000000000102\""));
    /* Host-style: no account in the path. */
    assert_int_equal(
        rl_target_parse(&c->t, "http://acct.table.core.windows.net", "", err),
        0);
    assert_string_equal(c->t.account, "acct");
    assert_string_equal(c->t.base_path, "");
    assert_int_equal(rl_target_parse(&c->t, "https://x", "", err), -1);
}

/* etcd mode: a put of the entity's key with the prepared value, a range
 * read for a get; Content-Length matches; kinds etcd has no call for
 * build nothing. */
static void test_request_etcd(void **state)
{
    struct req_fixture *f = *state;
    struct rl_reqcfg *c = &f->c;
    struct rl_reqargs a;
    char err[RL_ERR_SIZE], key[64], k64[100];
    uint8_t val[2000];
    char *buf;
    const char *p;
    assert_int_equal(rl_target_parse(&c->t, "http://127.0.0.1:2379", "", err),
                     0);
    c->etcd = 1;
    c->km.partitions = 10;
    c->entity_size = 1024;
    assert_int_equal(rl_reqcfg_prepare(c, 1, err), 0);
    assert_int_equal(rl_b64_decode(c->etcd_value, val, sizeof(val)), 1024);
    buf = f->buf = malloc(c->max_request + 1);
    assert_non_null(buf);
    memset(&a, 0, sizeof(a));
    a.rq = RL_RQ_INSERT;
    a.id = 7;
    build(c, &a, buf);
    assert_true(strncmp(buf, "POST /v3/kv/put HTTP/1.1\r\n", 26) == 0);
    assert_non_null(strstr(buf, "Host: 127.0.0.1:2379\r\n"));
    assert_null(strstr(buf, "Authorization"));
    p = strstr(buf, "\r\n\r\n");
    assert_non_null(p);
    assert_int_equal(atoi(strstr(buf, "Content-Length: ") + 16), strlen(p + 4));
    {
        char pk[RL_KEY_MAX], rk[RL_KEY_MAX];
        rl_key_of(&c->km, 7, pk, rk);
        snprintf(key, sizeof(key), "%s/%s", pk, rk);
        rl_b64_encode((const uint8_t *)key, strlen(key), k64);
    }
    assert_non_null(strstr(p, k64));
    assert_non_null(strstr(p, c->etcd_value));
    a.rq = RL_RQ_GET;
    build(c, &a, buf);
    assert_true(strncmp(buf, "POST /v3/kv/range HTTP/1.1\r\n", 28) == 0);
    p = strstr(buf, "\r\n\r\n");
    assert_non_null(p);
    assert_int_equal(atoi(strstr(buf, "Content-Length: ") + 16), strlen(p + 4));
    assert_null(strstr(p, "value"));
    a.rq = RL_RQ_SCAN;
    assert_int_equal(rl_req_build(c, &a, DATE, buf), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sharedkey_post),
        cmocka_unit_test(test_sharedkey_get),
        cmocka_unit_test(test_sharedkeylite),
        cmocka_unit_test(test_sas),
        cmocka_unit_test(test_date),
        cmocka_unit_test(test_b64),
        cmocka_unit_test_setup_teardown(test_request_signed, req_setup,
                                        req_teardown),
        cmocka_unit_test_setup_teardown(test_request_etcd, req_setup,
                                        req_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
