/* Unit tests: shared access signatures (frontend/fe_sas.h) and the pure
 * parts of the storage-XML operations: the XML reader (fe_xml.h), table
 * ACLs and stored policies (fe_acl.h), service properties (fe_svc.h) and
 * CORS rules (fe_cors.h).
 *
 * The SAS tokens below were generated offline with the Python SDK
 * (azure-data-tables 12.4.2, /usr/bin/python3) for the development account
 * (devstoreaccount1, the emulator key) with fixed times, e.g.
 *   generate_table_sas(AzureNamedKeyCredential("devstoreaccount1", KEY),
 *       "People", permission=TableSasPermissions(read=True),
 *       start=datetime(2030,1,1), expiry=datetime(2030,1,2))
 * Tokens I and J (sv 2020-12-06 account SAS with the "ses" line, legacy
 * sv 2013-08-15 service SAS) are signed by hand in Python with hmac over
 * the string-to-sign of spec §7.3/§7.4, since the SDK only emits sv
 * 2019-02-02. Each token's inputs are in the comment above it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <cmocka.h>

#include "fe_acl.h"
#include "fe_cors.h"
#include "fe_sas.h"
#include "fe_svc.h"
#include "fe_url.h"
#include "fe_xml.h"
#include "rt.pb-c.h"
#include "rt_err.h"
#include "rt_log.h"

/* ---- Fixture ---- */

/* 2030-01-01T00:00:00Z and 2030-01-02T00:00:00Z in Unix seconds. */
#define T_START 1893456000
#define T_EXPIRY 1893542400
#define T_INSIDE 1893500000

#define KEY2_B64                                                           \
    "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8gISIjJCUmJygpKissLS4vMDEy" \
    "MzQ1Njc4OTo7PD0+Pw=="

/* A: tn=People, sp=r, st=2030-01-01, se=2030-01-02 */
#define TOK_A                                                               \
    "st=2030-01-01T00%3A00%3A00Z&se=2030-01-02T00%3A00%3A00Z&sp=r&sv=2019-" \
    "02-02&tn=People&sig=2VIs4knbkMNgoSwi9YAfupi25c48opFd4RikpBSV4f8%3D"
/* B: tn=people, sp=raud, st/se as A, protocol="https,http", start_pk=b
 * start_rk=2 end_pk=d end_rk=5 (ip_address_or_range was passed too, but
 * generate_table_sas of 12.4.2 drops it: no sip in the token) */
#define TOK_B                                                              \
    "st=2030-01-01T00%3A00%3A00Z&se=2030-01-02T00%3A00%3A00Z&sp=raud&spr=" \
    "https%2Chttp&sv=2019-02-02&tn=people&spk=b&srk=2&epk=d&erk=5&sig="    \
    "tGsUcj6yAbHW%2BVMum3O4t/sbueTLU8kMkdw33Yt1qsc%3D"
/* C: tn=people, policy_id=pol1 (no sp/st/se) */
#define TOK_C                                                               \
    "sv=2019-02-02&si=pol1&tn=people&sig=tBOaWkxDFKVLrVtMLz1oM5%2BGW765eAo" \
    "vWR30%2Bp1aYSI%3D"
/* D: signed with key2 (KEY2_B64): tn=people, sp=raud, se=2030-01-02 */
#define TOK_D                                                          \
    "se=2030-01-02T00%3A00%3A00Z&sp=raud&sv=2019-02-02&tn=people&sig=" \
    "x0Tmwj9ae9uzHScK1efgV5vaZLKoinlLT5ogQrzT8UM%3D"
/* E: tn=people, sp=r, se=2030-01-02, protocol=https */
#define TOK_E                                                             \
    "se=2030-01-02T00%3A00%3A00Z&sp=r&spr=https&sv=2019-02-02&tn=people&" \
    "sig=8TTR4KkbROYb0zYV7Fjgv7TT77PE2dWvvRWk8qQOCiY%3D"
/* F: tn=people, sp=r, se=2030-01-02, start_pk="a b'c" (percent-encoded) */
#define TOK_F                                                               \
    "se=2030-01-02T00%3A00%3A00Z&sp=r&sv=2019-02-02&tn=people&spk=a%20b%27" \
    "c&sig=OyHVFeM88K/xl%2BQSDi7UiCZas2YGoQ31tLGxFI7ypjo%3D"
/* G2: account SAS, srt=sco (ResourceTypes.from_string), sp=rl, st/se as A */
#define TOK_G2                                                               \
    "st=2030-01-01T00%3A00%3A00Z&se=2030-01-02T00%3A00%3A00Z&sp=rl&sv=2019-" \
    "02-02&ss=t&srt=sco&sig=sCjQWl7fYVT9iRevsABvMheA/%2Bkx4jltlmH20j29eBo%3D"
/* H2: account SAS, srt=c, sp=wdlc (create, write, delete, list), se */
#define TOK_H2                                                              \
    "se=2030-01-02T00%3A00%3A00Z&sp=wdlc&sv=2019-02-02&ss=t&srt=c&sig=LCD%" \
    "2B/3eb5MDrLJDgqQP%2B55ivRj1jzwE5olvNFbQN7Pw%3D"
/* I: account SAS sv=2020-12-06 (ses line), ss=t srt=o sp=r se, by hand */
#define TOK_I                                                               \
    "sv=2020-12-06&ss=t&srt=o&sp=r&se=2030-01-02T00%3A00%3A00Z&sig=b1x7Zb%" \
    "2BD06WwPkuYvTrDSfpYiPQLXA16btL6a8KO2C0%3D"
/* J: legacy service SAS sv=2013-08-15, tn=people sp=r se, by hand */
#define TOK_J                                                               \
    "sv=2013-08-15&tn=people&sp=r&se=2030-01-02T00%3A00%3A00Z&sig=woUH6Lbz" \
    "HmbTAYEFMIFlh6YwGv1%2FL49Fqk2h1Au9mIw%3D"
/* K: account SAS srt=o, sp=raud, se, ip_address_or_range=10.0.0.1 */
#define TOK_K                                                              \
    "se=2030-01-02T00%3A00%3A00Z&sp=raud&sip=10.0.0.1&sv=2019-02-02&ss=t&" \
    "srt=o&sig=UnNKHqGkPCKOB5JJXoIhktsU2EAUAGZyndWUorgLSKs%3D"
/* M: tn=people, policy_id=pol1 AND permission=r */
#define TOK_M                                                               \
    "sp=r&sv=2019-02-02&si=pol1&tn=people&sig=QN/uVJB60TmmYYXpf1qyBbmkCowe" \
    "KJXpdvXKRHJAoV4%3D"
/* N: tn=people, permission="rw" (w is not a table SAS letter), se */
#define TOK_N                                                               \
    "se=2030-01-02T00%3A00%3A00Z&sp=rw&sv=2019-02-02&tn=people&sig=yXy3EHK" \
    "eVEMZENFH5ji%2BLJ01gH/fFX4V2lW%2B0noTCLE%3D"
/* O: tn=people, sp=r, start="2030-01-01" (date only),
 * expiry="2030-01-02T00:00:00.1234567Z" (strings passed to the SDK) */
#define TOK_O                                                               \
    "st=2030-01-01&se=2030-01-02T00%3A00%3A00.1234567Z&sp=r&sv=2019-02-02&" \
    "tn=people&sig=EB/NkdksxOzUzx0CTgKK6i00UEP8DiOE9X5IooPxi2k%3D"
/* P: tn=people, policy_id=pol1 AND expiry=2030-01-02 */
#define TOK_P                                                               \
    "se=2030-01-02T00%3A00%3A00Z&sv=2019-02-02&si=pol1&tn=people&sig=hAC86" \
    "hevvTNHhJYGGckZDXuNOVGKuY86xPQCU72kw88%3D"

struct fx
{
    struct fe_accounts accts;
    struct fe_query q;
    struct fe_sas sas;
};

static int setup(void **state)
{
    struct fx *f = calloc(1, sizeof(*f));
    rt_log_init("test", RT_LOG_ERROR);
    fe_accounts_init(&f->accts);
    assert_int_equal(
        fe_accounts_add(&f->accts, FE_DEV_ACCOUNT, FE_DEV_KEY, KEY2_B64), 0);
    fe_query_init(&f->q);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fx *f = *state;
    fe_sas_clear(&f->sas);
    fe_query_free(&f->q);
    fe_accounts_free(&f->accts);
    fe_acl_reset();
    fe_cors_reset();
    free(f);
    return 0;
}

/* ---- Helpers ---- */

static const char *qget(const void *q, const char *key)
{
    return fe_query_get(q, key);
}

/* A stored policy table for "si": pol1 = {perm ra, expiry 2030-01-02},
 * old = {perm r, expiry 2020-01-01}. */
static int fake_policy(const char *account,
                       const char *table,
                       const char *id,
                       struct fe_sas_policy *out)
{
    memset(out, 0, sizeof(*out));
    if (strcmp(account, FE_DEV_ACCOUNT) != 0 ||
        strcasecmp(table, "people") != 0) {
        return RT_ENOTFOUND;
    }
    if (strcmp(id, "pol1") == 0) {
        strcpy(out->permission, "ra");
        strcpy(out->expiry, "2030-01-02T00:00:00.0000000Z");
        return 0;
    }
    if (strcmp(id, "old") == 0) {
        strcpy(out->permission, "r");
        strcpy(out->expiry, "2020-01-01T00:00:00.0000000Z");
        return 0;
    }
    return RT_ENOTFOUND;
}

struct opts
{
    const char *table;
    int64_t now;
    const char *ip;
    int https;
    const char *account;
};

/* Parses @tok into f->q and verifies it; returns fe_sas_verify's code (or
 * fe_sas_parse's error). */
static int verify_o(struct fx *f, const char *tok, const struct opts *o)
{
    struct fe_sas_params p;
    struct fe_sas_ctx ctx;
    char why[RT_ERRMSG_SIZE] = "";
    int kind;
    fe_query_free(&f->q);
    fe_query_init(&f->q);
    fe_sas_clear(&f->sas);
    fe_query_parse(&f->q, tok, strlen(tok));
    kind = fe_sas_parse(&f->q, qget, &p);
    if (kind < 0) {
        return kind;
    }
    memset(&ctx, 0, sizeof(ctx));
    ctx.accounts = &f->accts;
    ctx.account = o->account ? o->account : FE_DEV_ACCOUNT;
    ctx.table = o->table;
    ctx.now = o->now ? o->now : T_INSIDE;
    ctx.client_ip = o->ip ? o->ip : "127.0.0.1";
    ctx.https = o->https;
    ctx.policy = fake_policy;
    return fe_sas_verify(&p, (enum fe_sas_kind)kind, &ctx, &f->sas, why);
}

static int verify(struct fx *f, const char *tok, const char *table)
{
    struct opts o = {table, 0, NULL, 0, NULL};
    return verify_o(f, tok, &o);
}

static int verify_at(struct fx *f, const char *tok, int64_t now)
{
    struct opts o = {"people", now, NULL, 0, NULL};
    return verify_o(f, tok, &o);
}

/* ---- Tests: string-to-sign ---- */

/* The service SAS string-to-sign is the documented 12 lines, the table
 * lower-cased, the account once, no trailing newline (spec §7.3). */
static void test_sts_service(void **state)
{
    struct fx *f = *state;
    struct fe_sas_params p;
    struct rt_buf b = RT_BUF_INIT;
    fe_query_parse(&f->q, TOK_A, strlen(TOK_A));
    assert_int_equal(fe_sas_parse(&f->q, qget, &p), FE_SAS_SERVICE);
    fe_sas_string_to_sign(&b, FE_SAS_SERVICE, &p, FE_DEV_ACCOUNT);
    assert_string_equal(rt_buf_cstr(&b),
                        "r\n2030-01-01T00:00:00Z\n2030-01-02T00:00:00Z\n"
                        "/table/devstoreaccount1/people\n\n\n\n2019-02-02\n"
                        "\n\n\n");
    rt_buf_free(&b);
}

/* The account SAS string-to-sign ends in a newline, with the ses line from
 * sv 2020-12-06 on (spec §7.4). */
static void test_sts_account(void **state)
{
    struct fx *f = *state;
    struct fe_sas_params p;
    struct rt_buf b = RT_BUF_INIT;
    fe_query_parse(&f->q, TOK_G2, strlen(TOK_G2));
    assert_int_equal(fe_sas_parse(&f->q, qget, &p), FE_SAS_ACCOUNT);
    fe_sas_string_to_sign(&b, FE_SAS_ACCOUNT, &p, FE_DEV_ACCOUNT);
    assert_string_equal(rt_buf_cstr(&b),
                        "devstoreaccount1\nrl\nt\nsco\n2030-01-01T00:00:00Z\n"
                        "2030-01-02T00:00:00Z\n\n\n2019-02-02\n");
    rt_buf_reset(&b);
    fe_query_free(&f->q);
    fe_query_init(&f->q);
    fe_query_parse(&f->q, TOK_I, strlen(TOK_I));
    assert_int_equal(fe_sas_parse(&f->q, qget, &p), FE_SAS_ACCOUNT);
    fe_sas_string_to_sign(&b, FE_SAS_ACCOUNT, &p, FE_DEV_ACCOUNT);
    assert_string_equal(rt_buf_cstr(&b),
                        "devstoreaccount1\nr\nt\no\n\n2030-01-02T00:00:00Z\n"
                        "\n\n2020-12-06\n\n");
    rt_buf_free(&b);
}

/* Tokens that are not table/account SAS are refused by the parser. */
static void test_parse_kinds(void **state)
{
    struct fx *f = *state;
    assert_int_equal(verify(f, "sig=abc&tn=people", NULL), RT_EAUTH);
    assert_int_equal(verify(f, "sv=2019-02-02&sr=b&sp=r&sig=abc", NULL),
                     RT_EAUTH);
    assert_int_equal(verify(f, "sv=2019-02-02&tn=people", NULL), RT_EAUTH);
    assert_int_equal(verify(f, "sv=bogus&tn=people&sp=r&sig=x", NULL),
                     RT_EAUTH);
    assert_int_equal(verify(f, "sv=2011-08-18&tn=people&sp=r&sig=x", NULL),
                     RT_EAUTH);
}

/* ---- Tests: service SAS ---- */

/* An SDK token verifies for its table in any case, runs under sv and
 * grants exactly r. */
static void test_service_ok(void **state)
{
    struct fx *f = *state;
    assert_int_equal(verify(f, TOK_A, "people"), 0);
    assert_int_equal(f->sas.kind, FE_SAS_SERVICE);
    assert_string_equal(f->sas.sv, "2019-02-02");
    assert_string_equal(f->sas.tn, "People");
    assert_int_equal(f->sas.perms, FE_SAS_P_READ);
    assert_null(f->sas.spk);
    assert_int_equal(verify(f, TOK_A, "PEOPLE"), 0);
    assert_int_equal(verify(f, TOK_A, NULL), 0); /* table known later */
}

/* Any change to a signed field, the signature, the account or the table
 * is AuthenticationFailed. */
static void test_service_tampered(void **state)
{
    struct fx *f = *state;
    char tok[512];
    struct opts o = {"people", 0, NULL, 0, "otheraccount"};
    assert_int_equal(verify(f, TOK_A, "other"), RT_EAUTH);
    /* sp=r -> sp=ra */
    snprintf(tok, sizeof(tok), "%s", TOK_A);
    memcpy(strstr(tok, "sp=r&"), "sp=a&", 5);
    assert_int_equal(verify(f, tok, "people"), RT_EAUTH);
    /* expiry moved a year */
    snprintf(tok, sizeof(tok), "%s", TOK_A);
    memcpy(strstr(tok, "se=2030"), "se=2031", 7);
    assert_int_equal(verify(f, tok, "people"), RT_EAUTH);
    /* one signature character */
    snprintf(tok, sizeof(tok), "%s", TOK_A);
    strstr(tok, "sig=")[4] = 'X';
    assert_int_equal(verify(f, tok, "people"), RT_EAUTH);
    /* a truncated signature */
    snprintf(tok, sizeof(tok), "%s", TOK_A);
    strstr(tok, "sig=")[10] = '\0';
    assert_int_equal(verify(f, tok, "people"), RT_EAUTH);
    /* unknown account */
    assert_int_equal(verify_o(f, TOK_A, &o), RT_EAUTH);
    /* a field the signature does not cover cannot be added: tn */
    snprintf(tok, sizeof(tok), "%s", TOK_A);
    memcpy(strstr(tok, "tn=People"), "tn=Peoplf", 9);
    assert_int_equal(verify(f, tok, "peoplf"), RT_EAUTH);
}

/* Valid only within [st, se]: before the start and after the expiry it is
 * AuthenticationFailed; both ends are inclusive. */
static void test_service_time(void **state)
{
    struct fx *f = *state;
    assert_int_equal(verify_at(f, TOK_A, T_START - 1), RT_EAUTH);
    assert_int_equal(verify_at(f, TOK_A, T_START), 0);
    assert_int_equal(verify_at(f, TOK_A, T_EXPIRY), 0);
    assert_int_equal(verify_at(f, TOK_A, T_EXPIRY + 1), RT_EAUTH);
    assert_int_equal(verify_at(f, TOK_A, 1700000000), RT_EAUTH);
    /* Date-only start and a 7-digit fraction in the expiry. */
    assert_int_equal(verify_at(f, TOK_O, T_START - 1), RT_EAUTH);
    assert_int_equal(verify_at(f, TOK_O, T_START), 0);
    assert_int_equal(verify_at(f, TOK_O, T_EXPIRY), 0);
    assert_int_equal(verify_at(f, TOK_O, T_EXPIRY + 1), RT_EAUTH);
}

/* Key ranges, spr=https,http and the decoded range are kept; the range
 * is inclusive at both ends and ordered by (PartitionKey, RowKey). */
static void test_service_range(void **state)
{
    struct fx *f = *state;
    assert_int_equal(verify(f, TOK_B, "people"), 0);
    assert_int_equal(f->sas.perms, FE_SAS_P_READ | FE_SAS_P_ADD |
                                       FE_SAS_P_UPDATE | FE_SAS_P_DELETE);
    assert_string_equal(f->sas.spk, "b");
    assert_string_equal(f->sas.erk, "5");
    assert_true(fe_sas_key_in_range(&f->sas, "b", "2"));
    assert_true(fe_sas_key_in_range(&f->sas, "b", "3"));
    assert_false(fe_sas_key_in_range(&f->sas, "b", "1"));
    assert_false(fe_sas_key_in_range(&f->sas, "a", "9"));
    assert_true(fe_sas_key_in_range(&f->sas, "c", ""));
    assert_true(fe_sas_key_in_range(&f->sas, "c", "zzz"));
    assert_true(fe_sas_key_in_range(&f->sas, "d", "5"));
    assert_false(fe_sas_key_in_range(&f->sas, "d", "6"));
    assert_false(fe_sas_key_in_range(&f->sas, "e", ""));
    /* spk alone: everything from (spk, "") on. */
    assert_int_equal(verify(f, TOK_F, "people"), 0);
    assert_string_equal(f->sas.spk, "a b'c");
    assert_null(f->sas.srk);
    assert_true(fe_sas_key_in_range(&f->sas, "a b'c", ""));
    assert_true(fe_sas_key_in_range(&f->sas, "zz", "a"));
    assert_false(fe_sas_key_in_range(&f->sas, "a b'b", "zzz"));
}

/* Key2 signs as well as key1 (rotation); an account without that key
 * refuses the token. */
static void test_service_key2(void **state)
{
    struct fx *f = *state;
    assert_int_equal(verify(f, TOK_D, "people"), 0);
    fe_accounts_free(&f->accts);
    fe_accounts_init(&f->accts);
    assert_int_equal(
        fe_accounts_add(&f->accts, FE_DEV_ACCOUNT, FE_DEV_KEY, NULL), 0);
    assert_int_equal(verify(f, TOK_D, "people"), RT_EAUTH);
    assert_int_equal(verify(f, TOK_A, "people"), 0);
}

/* spr=https over plain HTTP is AuthorizationProtocolMismatch. */
static void test_service_protocol(void **state)
{
    struct fx *f = *state;
    struct opts o = {"people", 0, NULL, 1, NULL};
    assert_int_equal(verify(f, TOK_E, "people"), RT_EPROTOCOL);
    assert_int_equal(verify_o(f, TOK_E, &o), 0);
}

/* A permission letter outside "raud" makes the token malformed. */
static void test_service_bad_letters(void **state)
{
    struct fx *f = *state;
    assert_int_equal(verify(f, TOK_N, "people"), RT_EAUTH);
}

/* "si" fills sp/st/se from the stored policy; an unknown id, an expired
 * policy and a field present in both are AuthenticationFailed. */
static void test_service_si(void **state)
{
    struct fx *f = *state;
    char tok[512];
    assert_int_equal(verify(f, TOK_C, "people"), 0);
    assert_int_equal(f->sas.perms, FE_SAS_P_READ | FE_SAS_P_ADD);
    assert_int_equal(verify_at(f, TOK_C, T_EXPIRY + 1), RT_EAUTH);
    assert_int_equal(verify(f, TOK_M, "people"), RT_EAUTH); /* sp twice */
    assert_int_equal(verify(f, TOK_P, "people"), RT_EAUTH); /* se twice */
    /* The signature covers si: renaming it breaks the token. */
    snprintf(tok, sizeof(tok), "%s", TOK_C);
    memcpy(strstr(tok, "si=pol1"), "si=pol2", 7);
    assert_int_equal(verify(f, tok, "people"), RT_EAUTH);
}

/* The legacy (sv 2013-08-15) string-to-sign verifies too. */
static void test_service_legacy(void **state)
{
    struct fx *f = *state;
    assert_int_equal(verify(f, TOK_J, "people"), 0);
    assert_string_equal(f->sas.sv, "2013-08-15");
}

/* Service SAS permission mapping (spec §7.3): r read, a insert, u
 * update/merge, a+u upserts, d delete; never tables, service or ACLs. */
static void test_service_allows(void **state)
{
    struct fx *f = *state;
    struct fe_sas *s = &f->sas;
    assert_int_equal(verify(f, TOK_A, "people"), 0);
    assert_int_equal(fe_sas_allows(s, FE_SAS_C_QUERY, 0), 0);
    assert_int_equal(fe_sas_allows(s, FE_SAS_C_ENTITY, FE_SAS_OP_READ), 0);
    assert_int_equal(fe_sas_allows(s, FE_SAS_C_ENTITY, RT__OP_KIND__OP_INSERT),
                     RT_EPERM);
    s->perms = FE_SAS_P_ADD;
    assert_int_equal(fe_sas_allows(s, FE_SAS_C_QUERY, 0), RT_EPERM);
    assert_int_equal(fe_sas_allows(s, FE_SAS_C_ENTITY, RT__OP_KIND__OP_INSERT),
                     0);
    assert_int_equal(
        fe_sas_allows(s, FE_SAS_C_ENTITY, RT__OP_KIND__OP_UPSERT_MERGE),
        RT_EPERM);
    s->perms = FE_SAS_P_UPDATE;
    assert_int_equal(fe_sas_allows(s, FE_SAS_C_ENTITY, RT__OP_KIND__OP_REPLACE),
                     0);
    assert_int_equal(fe_sas_allows(s, FE_SAS_C_ENTITY, RT__OP_KIND__OP_MERGE),
                     0);
    assert_int_equal(
        fe_sas_allows(s, FE_SAS_C_ENTITY, RT__OP_KIND__OP_UPSERT_REPLACE),
        RT_EPERM);
    s->perms = FE_SAS_P_UPDATE | FE_SAS_P_ADD;
    assert_int_equal(
        fe_sas_allows(s, FE_SAS_C_ENTITY, RT__OP_KIND__OP_UPSERT_REPLACE), 0);
    assert_int_equal(fe_sas_allows(s, FE_SAS_C_ENTITY, RT__OP_KIND__OP_DELETE),
                     RT_EPERM);
    s->perms = FE_SAS_P_DELETE;
    assert_int_equal(fe_sas_allows(s, FE_SAS_C_ENTITY, RT__OP_KIND__OP_DELETE),
                     0);
    s->perms = 15;
    assert_int_equal(fe_sas_allows(s, FE_SAS_C_LIST_TABLES, 0), RT_ERESTYPE);
    assert_int_equal(fe_sas_allows(s, FE_SAS_C_CREATE_TABLE, 0), RT_ERESTYPE);
    assert_int_equal(fe_sas_allows(s, FE_SAS_C_DELETE_TABLE, 0), RT_ERESTYPE);
    assert_int_equal(fe_sas_allows(s, FE_SAS_C_SERVICE_READ, 0), RT_ERESTYPE);
    assert_int_equal(fe_sas_allows(s, FE_SAS_C_ACL, 0), RT_EAUTHZ);
}

/* ---- Tests: account SAS ---- */

/* srt=sco sp=rl: service reads, listing tables, queries and reads; no
 * writes of any kind; ACLs never. */
static void test_account_read_list(void **state)
{
    struct fx *f = *state;
    struct fe_sas *s = &f->sas;
    assert_int_equal(verify(f, TOK_G2, NULL), 0);
    assert_int_equal(s->kind, FE_SAS_ACCOUNT);
    assert_int_equal(
        s->srt, FE_SAS_RT_SERVICE | FE_SAS_RT_CONTAINER | FE_SAS_RT_OBJECT);
    assert_int_equal(fe_sas_allows(s, FE_SAS_C_SERVICE_READ, 0), 0);
    assert_int_equal(fe_sas_allows(s, FE_SAS_C_SERVICE_WRITE, 0), RT_EPERM);
    assert_int_equal(fe_sas_allows(s, FE_SAS_C_LIST_TABLES, 0), 0);
    assert_int_equal(fe_sas_allows(s, FE_SAS_C_GET_TABLE, 0), 0);
    assert_int_equal(fe_sas_allows(s, FE_SAS_C_CREATE_TABLE, 0), RT_EPERM);
    assert_int_equal(fe_sas_allows(s, FE_SAS_C_DELETE_TABLE, 0), RT_EPERM);
    assert_int_equal(fe_sas_allows(s, FE_SAS_C_QUERY, 0), 0);
    assert_int_equal(fe_sas_allows(s, FE_SAS_C_ENTITY, FE_SAS_OP_READ), 0);
    assert_int_equal(fe_sas_allows(s, FE_SAS_C_ENTITY, RT__OP_KIND__OP_INSERT),
                     RT_EPERM);
    assert_int_equal(fe_sas_allows(s, FE_SAS_C_ACL, 0), RT_EAUTHZ);
    assert_int_equal(verify_at(f, TOK_G2, T_START - 1), RT_EAUTH);
    assert_int_equal(verify_at(f, TOK_G2, T_EXPIRY + 1), RT_EAUTH);
}

/* srt=c: tables may be created (c or w), deleted and listed; entities and
 * the service are the wrong resource type. */
static void test_account_container(void **state)
{
    struct fx *f = *state;
    struct fe_sas *s = &f->sas;
    assert_int_equal(verify(f, TOK_H2, NULL), 0);
    assert_int_equal(s->srt, FE_SAS_RT_CONTAINER);
    assert_int_equal(fe_sas_allows(s, FE_SAS_C_CREATE_TABLE, 0), 0);
    assert_int_equal(fe_sas_allows(s, FE_SAS_C_DELETE_TABLE, 0), 0);
    assert_int_equal(fe_sas_allows(s, FE_SAS_C_LIST_TABLES, 0), 0);
    assert_int_equal(fe_sas_allows(s, FE_SAS_C_ENTITY, FE_SAS_OP_READ),
                     RT_ERESTYPE);
    assert_int_equal(fe_sas_allows(s, FE_SAS_C_SERVICE_READ, 0), RT_ERESTYPE);
    s->perms = FE_SAS_A_WRITE;
    assert_int_equal(fe_sas_allows(s, FE_SAS_C_CREATE_TABLE, 0), 0);
    s->perms = FE_SAS_A_READ;
    assert_int_equal(fe_sas_allows(s, FE_SAS_C_CREATE_TABLE, 0), RT_EPERM);
}

/* sip limits the source address (IPv4-mapped IPv6 counts as IPv4);
 * object-level permissions map as documented; ses-era tokens verify. */
static void test_account_ip_objects(void **state)
{
    struct fx *f = *state;
    struct fe_sas *s = &f->sas;
    struct opts o = {NULL, 0, "10.0.0.1", 0, NULL};
    assert_int_equal(verify(f, TOK_K, NULL), RT_ESOURCEIP); /* 127.0.0.1 */
    assert_int_equal(verify_o(f, TOK_K, &o), 0);
    assert_int_equal(
        fe_sas_allows(s, FE_SAS_C_ENTITY, RT__OP_KIND__OP_UPSERT_MERGE), 0);
    assert_int_equal(fe_sas_allows(s, FE_SAS_C_QUERY, 0), 0);
    assert_int_equal(fe_sas_allows(s, FE_SAS_C_LIST_TABLES, 0), RT_ERESTYPE);
    o.ip = "::ffff:10.0.0.1";
    assert_int_equal(verify_o(f, TOK_K, &o), 0);
    o.ip = "10.0.0.2";
    assert_int_equal(verify_o(f, TOK_K, &o), RT_ESOURCEIP);
    o.ip = "::1";
    assert_int_equal(verify_o(f, TOK_K, &o), RT_ESOURCEIP);
    assert_int_equal(verify(f, TOK_I, NULL), 0);
    assert_int_equal(s->srt, FE_SAS_RT_OBJECT);
    /* Removing ss=t breaks the signature before the service check. */
    assert_int_equal(verify(f,
                            "sv=2019-02-02&ss=b&srt=o&sp=r&se=2030-01-"
                            "02&sig=AAAA",
                            NULL),
                     RT_EAUTH);
}

/* ---- Tests: the account SAS matrix ---- */

/* "Create an account SAS", Table service: each operation with the
 * resource types that reach it and the permission it needs. @need is
 * either letters all required ("au") or alternatives joined by '|'
 * ("a|c|w"). Query Tables takes s or c: see fe_sas_allows. */
static const struct
{
    const char *name;
    enum fe_sas_opclass cls;
    int op_kind;
    const char *srt;
    const char *need;
} account_matrix[] = {
    {"Get Service Properties/Stats", FE_SAS_C_SERVICE_READ, 0, "s", "r"},
    {"Set Service Properties", FE_SAS_C_SERVICE_WRITE, 0, "s", "w"},
    {"Query Tables", FE_SAS_C_LIST_TABLES, 0, "sc", "l"},
    {"Query Tables (one)", FE_SAS_C_GET_TABLE, 0, "sc", "l"},
    {"Create Table", FE_SAS_C_CREATE_TABLE, 0, "c", "a|c|w"},
    {"Delete Table", FE_SAS_C_DELETE_TABLE, 0, "c", "d"},
    {"Query Entities", FE_SAS_C_QUERY, 0, "o", "r"},
    {"Get Entity", FE_SAS_C_ENTITY, FE_SAS_OP_READ, "o", "r"},
    {"Insert Entity", FE_SAS_C_ENTITY, RT__OP_KIND__OP_INSERT, "o", "a"},
    {"Update Entity", FE_SAS_C_ENTITY, RT__OP_KIND__OP_REPLACE, "o", "u"},
    {"Merge Entity", FE_SAS_C_ENTITY, RT__OP_KIND__OP_MERGE, "o", "u"},
    {"Insert Or Replace", FE_SAS_C_ENTITY, RT__OP_KIND__OP_UPSERT_REPLACE, "o",
     "au"},
    {"Insert Or Merge", FE_SAS_C_ENTITY, RT__OP_KIND__OP_UPSERT_MERGE, "o",
     "au"},
    {"Delete Entity", FE_SAS_C_ENTITY, RT__OP_KIND__OP_DELETE, "o", "d"},
};

/* Letters -> FE_SAS_A_* / FE_SAS_RT_* bits, for the matrix. */
static unsigned bits_of(const char *s, const char *letters)
{
    unsigned b = 0;
    for (; *s; s++) {
        const char *at = strchr(letters, *s);
        if (at) {
            b |= 1u << (at - letters);
        }
    }
    return b;
}

/* Does @perms satisfy @need ("au": all; "a|c|w": any)? */
static int satisfies(unsigned perms, const char *need)
{
    if (strchr(need, '|')) {
        return (perms & bits_of(need, "rwdlacup")) != 0;
    }
    unsigned all = bits_of(need, "rwdlacup");
    return (perms & all) == all;
}

/* Every operation x every non-empty srt x every subset of the eight
 * permission letters: resource type first (ResourceTypeMismatch), then
 * the permission (PermissionMismatch), else allowed; ACLs never. */
static void test_account_matrix(void **state)
{
    (void)state;
    struct fe_sas s;
    memset(&s, 0, sizeof(s));
    s.kind = FE_SAS_ACCOUNT;
    for (size_t i = 0; i < sizeof(account_matrix) / sizeof(*account_matrix);
         i++) {
        unsigned want_rt = bits_of(account_matrix[i].srt, "sco");
        for (unsigned srt = 1; srt < 8; srt++) {
            for (unsigned perms = 0; perms < 256; perms++) {
                int want = !(srt & want_rt) ? RT_ERESTYPE
                           : satisfies(perms, account_matrix[i].need)
                               ? 0
                               : RT_EPERM;
                s.srt = srt;
                s.perms = perms;
                int got = fe_sas_allows(&s, account_matrix[i].cls,
                                        account_matrix[i].op_kind);
                if (got != want) {
                    fail_msg("%s srt=%x sp=%x: got %d, want %d",
                             account_matrix[i].name, srt, perms, got, want);
                }
                assert_int_equal(fe_sas_allows(&s, FE_SAS_C_ACL, 0), RT_EAUTHZ);
            }
        }
    }
}

/* Appends "&sig=<percent-encoded signature>" to @q (an unsigned token),
 * signed with the development key over fe_sas_string_to_sign (which
 * test_sts_* pins to the SDK's), into @out. */
static void sign_tok(struct fx *f, const char *q, char *out, size_t cap)
{
    struct fe_query qq;
    struct fe_sas_params p;
    struct rt_buf b = RT_BUF_INIT;
    char sig[FE_AUTH_SIG_SIZE];
    const struct fe_account *a = fe_accounts_find(&f->accts, FE_DEV_ACCOUNT);
    size_t n;
    fe_query_init(&qq);
    fe_query_parse(&qq, q, strlen(q));
    (void)fe_sas_parse(&qq, qget, &p);
    fe_sas_string_to_sign(&b, (p.ss || p.srt) ? FE_SAS_ACCOUNT : FE_SAS_SERVICE,
                          &p, FE_DEV_ACCOUNT);
    fe_auth_sign(a->key[0], a->keylen[0], (const char *)b.data, b.len, sig);
    rt_buf_free(&b);
    fe_query_free(&qq);
    n = (size_t)snprintf(out, cap, "%s&sig=", q);
    for (const char *c = sig; *c && n + 4 < cap; c++) {
        n += (size_t)(*c == '+'   ? snprintf(out + n, cap - n, "%%2B")
                      : *c == '/' ? snprintf(out + n, cap - n, "%%2F")
                      : *c == '=' ? snprintf(out + n, cap - n, "%%3D")
                                  : snprintf(out + n, cap - n, "%c", *c));
    }
}

/* Token-level checks of an account SAS: only sv >= 2015-04-05 (account
 * SAS did not exist before); an empty srt (what azure-data-tables 12.4.2
 * signs for ResourceTypes(container=True)) or unknown srt/ss letters are
 * AuthenticationFailed; the blob-only sp letters are accepted and grant
 * nothing; a service set without t is AuthorizationServiceMismatch. */
static void test_account_fields(void **state)
{
    struct fx *f = *state;
    char tok[512];
    static const struct
    {
        const char *q;
        int want;
    } cases[] = {
        {"sv=2019-02-02&ss=t&srt=c&sp=wac&se=2030-01-02", 0},
        {"sv=2015-04-05&ss=t&srt=c&sp=c&se=2030-01-02", 0},
        {"sv=2013-08-15&ss=t&srt=c&sp=c&se=2030-01-02", RT_EAUTH},
        {"sv=2019-02-02&ss=t&srt=&sp=wac&se=2030-01-02", RT_EAUTH},
        {"sv=2019-02-02&ss=t&sp=wac&se=2030-01-02&srt=", RT_EAUTH},
        {"sv=2019-02-02&ss=t&srt=cx&sp=c&se=2030-01-02", RT_EAUTH},
        {"sv=2019-02-02&ss=tz&srt=c&sp=c&se=2030-01-02", RT_EAUTH},
        {"sv=2019-02-02&ss=t&srt=c&sp=&se=2030-01-02", RT_EAUTH},
        {"sv=2019-02-02&ss=t&srt=c&sp=rz&se=2030-01-02", RT_EAUTH},
        {"sv=2019-02-02&ss=t&srt=c&sp=c", RT_EAUTH}, /* no se */
        {"sv=2021-06-08&ss=bt&srt=o&sp=rxytfi&se=2030-01-02", 0},
        {"sv=2019-02-02&ss=bq&srt=o&sp=r&se=2030-01-02", RT_ESERVICE},
        {"sv=2019-02-02&ss=t&srt=o&sp=r&se=2030-01-02&spr=https", RT_EPROTOCOL},
        {"sv=2019-02-02&ss=t&srt=o&sp=r&se=2030-01-02&spr=http", RT_EAUTH},
        {"sv=2019-02-02&ss=t&srt=o&sp=r&se=2030-01-02&spr=https,http", 0},
        {"sv=2019-02-02&ss=t&srt=o&sp=r&se=2030-01-02&sip=10.0.0.0-10.0.0.9",
         RT_ESOURCEIP},
        {"sv=2019-02-02&ss=t&srt=o&sp=r&se=2030-01-02&sip=127.0.0.0-127.0.0.9",
         0},
        {"sv=2019-02-02&ss=t&srt=o&sp=r&st=2030-01-01T12:13:20.001Z&se=2030-"
         "01-02",
         RT_EAUTH}, /* starts 1 ms after T_INSIDE */
        {"sv=2019-02-02&ss=t&srt=o&sp=r&st=2030-01-01T12:13:20.000Z&se=2030-"
         "01-02",
         0},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(*cases); i++) {
        sign_tok(f, cases[i].q, tok, sizeof(tok));
        int got = verify(f, tok, NULL);
        if (got != cases[i].want) {
            fail_msg("%s: got %d, want %d", cases[i].q, got, cases[i].want);
        }
    }
    /* x y t f i grant nothing on tables. */
    sign_tok(f, "sv=2021-06-08&ss=bt&srt=sco&sp=xytfi&se=2030-01-02", tok,
             sizeof(tok));
    assert_int_equal(verify(f, tok, NULL), 0);
    for (size_t i = 0; i < sizeof(account_matrix) / sizeof(*account_matrix);
         i++) {
        assert_int_equal(fe_sas_allows(&f->sas, account_matrix[i].cls,
                                       account_matrix[i].op_kind),
                         RT_EPERM);
    }
}

/* ---- Tests: stored policies from the map ---- */

/* The snapshot built from a map answers "si" lookups case-insensitively
 * by table, and a token with si verifies through it. */
static void test_policy_snapshot(void **state)
{
    struct fx *f = *state;
    Rt__Map map = RT__MAP__INIT;
    Rt__Table t = RT__TABLE__INIT, *tp[1] = {&t};
    Rt__SignedIdentifier si = RT__SIGNED_IDENTIFIER__INIT, *sip[1] = {&si};
    struct fe_sas_policy pol;
    struct fe_sas_params p;
    struct fe_sas_ctx ctx;
    char why[RT_ERRMSG_SIZE];
    t.account = FE_DEV_ACCOUNT;
    t.name = "People";
    t.id = 1;
    si.id = "pol1";
    si.has_policy = 1;
    si.permission = "r";
    si.expiry = "2030-01-02T00:00:00.0000000Z";
    t.acl = sip;
    t.n_acl = 1;
    map.tables = tp;
    map.n_tables = 1;
    assert_int_equal(
        fe_acl_policy_lookup(FE_DEV_ACCOUNT, "people", "pol1", &pol),
        RT_ENOTFOUND);
    fe_acl_map_update(&map);
    fe_cors_map_update(&map);
    assert_int_equal(
        fe_acl_policy_lookup(FE_DEV_ACCOUNT, "PEOPLE", "pol1", &pol), 0);
    assert_string_equal(pol.permission, "r");
    assert_string_equal(pol.start, "");
    assert_int_equal(
        fe_acl_policy_lookup(FE_DEV_ACCOUNT, "people", "POL1", &pol),
        RT_ENOTFOUND);
    assert_int_equal(fe_acl_policy_lookup("other", "people", "pol1", &pol),
                     RT_ENOTFOUND);
    fe_query_parse(&f->q, TOK_C, strlen(TOK_C));
    assert_int_equal(fe_sas_parse(&f->q, qget, &p), FE_SAS_SERVICE);
    memset(&ctx, 0, sizeof(ctx));
    ctx.accounts = &f->accts;
    ctx.account = FE_DEV_ACCOUNT;
    ctx.table = "people";
    ctx.now = T_INSIDE;
    ctx.policy = fe_acl_policy_lookup;
    assert_int_equal(fe_sas_verify(&p, FE_SAS_SERVICE, &ctx, &f->sas, why), 0);
    assert_int_equal(f->sas.perms, FE_SAS_P_READ);
    fe_sas_clear(&f->sas);
    /* A new map without the ACL withdraws the policy. */
    t.n_acl = 0;
    fe_acl_map_update(&map);
    fe_cors_map_update(&map);
    assert_int_equal(fe_sas_verify(&p, FE_SAS_SERVICE, &ctx, &f->sas, why),
                     RT_EAUTH);
}

/* ---- Tests: XML ---- */

/* The exact body the Python SDK sends for set_table_access_policy. */
#define PY_ACL                                                            \
    "<?xml version='1.0' encoding='utf-8'?>\n<SignedIdentifiers><Signed"  \
    "Identifier><Id>p1</Id><AccessPolicy><Start>2024-01-01T00:00:00Z</"   \
    "Start><Expiry>2024-02-01T00:00:00Z</Expiry><Permission>raud</"       \
    "Permission></AccessPolicy></SignedIdentifier><SignedIdentifier><Id>" \
    "p2</Id><AccessPolicy><Permission>r</Permission></AccessPolicy></"    \
    "SignedIdentifier><SignedIdentifier><Id>p3</Id></SignedIdentifier></" \
    "SignedIdentifiers>"

/* The SDK's ACL document parses with times normalized and the absent
 * AccessPolicy remembered, and is written back in the documented form. */
static void test_acl_roundtrip(void **state)
{
    struct fe_acl acl;
    struct rt_buf b = RT_BUF_INIT;
    (void)state;
    assert_int_equal(fe_acl_parse(PY_ACL, strlen(PY_ACL), &acl), 0);
    assert_int_equal(acl.n, 3);
    assert_string_equal(acl.v[0].id, "p1");
    assert_true(acl.v[0].has_policy);
    assert_string_equal(acl.v[0].start, "2024-01-01T00:00:00.0000000Z");
    assert_string_equal(acl.v[0].expiry, "2024-02-01T00:00:00.0000000Z");
    assert_string_equal(acl.v[0].permission, "raud");
    assert_string_equal(acl.v[1].start, "");
    assert_string_equal(acl.v[1].permission, "r");
    assert_false(acl.v[2].has_policy);
    fe_acl_write(&b, &acl);
    assert_string_equal(
        rt_buf_cstr(&b),
        "<?xml version=\"1.0\" encoding=\"utf-8\"?><SignedIdentifiers>"
        "<SignedIdentifier><Id>p1</Id><AccessPolicy><Start>2024-01-01T00:00:"
        "00.0000000Z</Start><Expiry>2024-02-01T00:00:00.0000000Z</Expiry>"
        "<Permission>raud</Permission></AccessPolicy></SignedIdentifier>"
        "<SignedIdentifier><Id>p2</Id><AccessPolicy><Permission>r</"
        "Permission></AccessPolicy></SignedIdentifier><SignedIdentifier><Id>"
        "p3</Id></SignedIdentifier></SignedIdentifiers>");
    /* Empty bodies clear; the empty ACL is written self-closed. */
    assert_int_equal(fe_acl_parse("", 0, &acl), 0);
    assert_int_equal(acl.n, 0);
    assert_int_equal(fe_acl_parse(" \r\n", 3, &acl), 0);
    rt_buf_reset(&b);
    fe_acl_write(&b, &acl);
    assert_string_equal(rt_buf_cstr(&b),
                        "<?xml version=\"1.0\" encoding=\"utf-8\"?>"
                        "<SignedIdentifiers />");
    rt_buf_free(&b);
    const char *selfclosed = "<SignedIdentifiers/>";
    assert_int_equal(fe_acl_parse(selfclosed, strlen(selfclosed), &acl), 0);
    assert_int_equal(acl.n, 0);
}

static int acl_rc(const char *doc)
{
    struct fe_acl acl;
    return fe_acl_parse(doc, strlen(doc), &acl);
}

/* Limits and malformed identifiers are InvalidXmlDocument (spec §3.5). */
static void test_acl_limits(void **state)
{
    char doc[4096];
    struct rt_buf b = RT_BUF_INIT;
    (void)state;
    rt_buf_append_str(&b, "<SignedIdentifiers>");
    for (int i = 0; i < 6; i++) {
        rt_buf_printf(&b, "<SignedIdentifier><Id>id%d</Id></SignedIdentifier>",
                      i);
        if (i == 4) {
            snprintf(doc, sizeof(doc), "%s</SignedIdentifiers>",
                     rt_buf_cstr(&b));
            assert_int_equal(acl_rc(doc), 0);
        }
    }
    rt_buf_append_str(&b, "</SignedIdentifiers>");
    assert_int_equal(acl_rc(rt_buf_cstr(&b)), RT_EXML);
    rt_buf_free(&b);
    snprintf(doc, sizeof(doc),
             "<SignedIdentifiers><SignedIdentifier><Id>%065d</Id>"
             "</SignedIdentifier></SignedIdentifiers>",
             7);
    assert_int_equal(acl_rc(doc), RT_EXML);
    snprintf(doc, sizeof(doc),
             "<SignedIdentifiers><SignedIdentifier><Id>%064d</Id>"
             "</SignedIdentifier></SignedIdentifiers>",
             7);
    assert_int_equal(acl_rc(doc), 0);
    static const char *bad[] = {
        "<SignedIdentifiers><SignedIdentifier></SignedIdentifier>"
        "</SignedIdentifiers>",
        "<SignedIdentifiers><SignedIdentifier><Id> </Id></SignedIdentifier>"
        "</SignedIdentifiers>",
        "<SignedIdentifiers><SignedIdentifier><Id>a</Id><Id>b</Id>"
        "</SignedIdentifier></SignedIdentifiers>",
        "<SignedIdentifiers><SignedIdentifier><Id>a</Id></SignedIdentifier>"
        "<SignedIdentifier><Id>a</Id></SignedIdentifier></SignedIdentifiers>",
        "<SignedIdentifiers><SignedIdentifier><Id>a</Id><AccessPolicy>"
        "<Permission>rw</Permission></AccessPolicy></SignedIdentifier>"
        "</SignedIdentifiers>",
        "<SignedIdentifiers><SignedIdentifier><Id>a</Id><AccessPolicy>"
        "<Permission>dr</Permission></AccessPolicy></SignedIdentifier>"
        "</SignedIdentifiers>",
        "<SignedIdentifiers><SignedIdentifier><Id>a</Id><AccessPolicy>"
        "<Start>yesterday</Start></AccessPolicy></SignedIdentifier>"
        "</SignedIdentifiers>",
        "<SignedIdentifiers><SignedIdentifier><Id>a</Id><AccessPolicy>"
        "<Expiry>2024-13-01T00:00:00Z</Expiry></AccessPolicy>"
        "</SignedIdentifier></SignedIdentifiers>",
        "<Other/>",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_int_equal(acl_rc(bad[i]), RT_EXML);
    }
    /* Dates alone and entities in ids are fine. */
    assert_int_equal(acl_rc("<SignedIdentifiers><SignedIdentifier><Id>a&amp;"
                            "b</Id><AccessPolicy><Start>2024-01-01</Start>"
                            "</AccessPolicy></SignedIdentifier>"
                            "</SignedIdentifiers>"),
                     0);
}

/* Malformed documents of every kind are RT_EXML and never crash (run
 * under ASan/UBSan): truncations of a valid document at every length,
 * and a list of classic breakages. */
static void test_xml_malformed(void **state)
{
    struct fe_xml_node *root;
    char deep[4096];
    size_t n = strlen(PY_ACL);
    (void)state;
    for (size_t i = 0; i < n; i++) {
        int rc = fe_xml_parse(PY_ACL, i, &root);
        assert_int_equal(rc, RT_EXML);
        assert_null(root);
    }
    static const char *bad[] = {
        "",
        "   ",
        "text",
        "<a>",
        "<a></b>",
        "<a><b></a></b>",
        "<a/><b/>",
        "<a>&bogus;</a>",
        "<a>&#0;</a>",
        "<a>&#xD800;</a>",
        "<a>&#x110000;</a>",
        "<a>&#12</a>",
        "<!DOCTYPE a [<!ENTITY x \"y\">]><a>&x;</a>",
        "<a x=1/>",
        "<a x=\"1/>",
        "<a x=\"<\"/>",
        "<a\x01/>",
        "<a>\x01</a>",
        "<1a/>",
        "<a><!-- unterminated </a>",
        "<a><![CDATA[ unterminated </a>",
        "<?xml version='1.0'",
        "<a></a>trailing",
        "<a>< b/></a>",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_int_equal(fe_xml_parse(bad[i], strlen(bad[i]), &root), RT_EXML);
        assert_null(root);
    }
    /* Embedded NUL. */
    assert_int_equal(fe_xml_parse("<a>\0</a>", 8, &root), RT_EXML);
    /* Nesting beyond the limit. */
    deep[0] = '\0';
    for (int i = 0; i < FE_XML_DEPTH_MAX + 1; i++) {
        strcat(deep, "<a>");
    }
    for (int i = 0; i < FE_XML_DEPTH_MAX + 1; i++) {
        strcat(deep, "</a>");
    }
    assert_int_equal(fe_xml_parse(deep, strlen(deep), &root), RT_EXML);
    /* Accepted: BOM, comments, PIs, attributes, CDATA, entities,
     * namespace prefixes. */
    const char *ok =
        "\xef\xbb\xbf<?xml version=\"1.0\"?><!-- c --><ns:a "
        "xmlns:ns='u' k=\"v\"><b>x&lt;&#65;&#x42;<![CDATA[<c>]]>"
        "</b><?pi?><c/></ns:a>\n";
    assert_int_equal(fe_xml_parse(ok, strlen(ok), &root), 0);
    assert_string_equal(root->name, "a");
    assert_string_equal(root->child->name, "b");
    assert_string_equal(root->child->text, "x<AB<c>");
    assert_string_equal(root->child->next->name, "c");
    fe_xml_free(root);
}

/* The exact body the Python SDK sends for set_service_properties. */
#define PY_PROPS                                                            \
    "<?xml version='1.0' encoding='utf-8'?>\n<StorageServiceProperties><"   \
    "Logging><Version>1.0</Version><Delete>false</Delete><Read>true</Read>" \
    "<Write>false</Write><RetentionPolicy><Enabled>true</Enabled><Days>5</" \
    "Days></RetentionPolicy></Logging><HourMetrics><Version>1.0</Version><" \
    "Enabled>true</Enabled><IncludeAPIs>true</IncludeAPIs><RetentionPolicy" \
    "><Enabled>true</Enabled><Days>5</Days></RetentionPolicy></HourMetrics" \
    "><MinuteMetrics><Version>1.0</Version><Enabled>false</Enabled><"       \
    "RetentionPolicy><Enabled>false</Enabled></RetentionPolicy></"          \
    "MinuteMetrics><Cors><CorsRule><AllowedOrigins>http://a.com,http://b."  \
    "com</AllowedOrigins><AllowedMethods>GET,PUT</AllowedMethods><"         \
    "AllowedHeaders>x-ms-meta-abc,x-ms-meta-data*</AllowedHeaders><"        \
    "ExposedHeaders>x-ms-meta-*</ExposedHeaders><MaxAgeInSeconds>500</"     \
    "MaxAgeInSeconds></CorsRule></Cors></StorageServiceProperties>"

/* The SDK's properties parse into every section; written back and parsed
 * again they are the same; absent sections stay absent. */
static void test_props_roundtrip(void **state)
{
    struct fe_svc_props p, q;
    struct rt_buf b = RT_BUF_INIT;
    (void)state;
    assert_int_equal(fe_svc_props_parse(PY_PROPS, strlen(PY_PROPS), &p), 0);
    assert_non_null(p.msg.logging);
    assert_true(p.msg.logging->log_read);
    assert_false(p.msg.logging->log_write);
    assert_int_equal(p.msg.logging->retention->days, 5);
    assert_true(p.msg.hour_metrics->enabled);
    assert_true(p.msg.hour_metrics->include_apis);
    assert_false(p.msg.minute_metrics->enabled);
    assert_false(p.msg.minute_metrics->retention->enabled);
    assert_int_equal(p.msg.cors->n_rules, 1);
    assert_string_equal(p.msg.cors->rules[0]->allowed_origins,
                        "http://a.com,http://b.com");
    assert_string_equal(p.msg.cors->rules[0]->allowed_headers,
                        "x-ms-meta-abc,x-ms-meta-data*");
    assert_int_equal(p.msg.cors->rules[0]->max_age, 500);
    fe_svc_props_write(&b, &p.msg);
    assert_int_equal(fe_svc_props_parse((const char *)b.data, b.len, &q), 0);
    assert_int_equal(q.msg.logging->retention->days, 5);
    assert_true(q.msg.hour_metrics->include_apis);
    assert_int_equal(q.msg.cors->n_rules, 1);
    assert_string_equal(q.msg.cors->rules[0]->exposed_headers, "x-ms-meta-*");
    fe_svc_props_free(&q);
    fe_svc_props_free(&p);
    rt_buf_free(&b);

    const char *only_cors =
        "<?xml version='1.0' encoding='utf-8'?>\n"
        "<StorageServiceProperties><Cors /></"
        "StorageServiceProperties>";
    assert_int_equal(fe_svc_props_parse(only_cors, strlen(only_cors), &p), 0);
    assert_null(p.msg.logging);
    assert_null(p.msg.hour_metrics);
    assert_non_null(p.msg.cors);
    assert_int_equal(p.msg.cors->n_rules, 0);
    fe_svc_props_free(&p);
}

/* Never-set properties are written with the defaults, always with every
 * section (the Python SDK iterates Cors). */
static void test_props_defaults(void **state)
{
    struct rt_buf b = RT_BUF_INIT;
    (void)state;
    fe_svc_props_write(&b, NULL);
    assert_string_equal(
        rt_buf_cstr(&b),
        "<?xml version=\"1.0\" encoding=\"utf-8\"?><StorageServiceProperties>"
        "<Logging><Version>1.0</Version><Delete>false</Delete><Read>false"
        "</Read><Write>false</Write><RetentionPolicy><Enabled>false</Enabled>"
        "</RetentionPolicy></Logging><HourMetrics><Version>1.0</Version>"
        "<Enabled>false</Enabled><RetentionPolicy><Enabled>false</Enabled>"
        "</RetentionPolicy></HourMetrics><MinuteMetrics><Version>1.0"
        "</Version><Enabled>false</Enabled><RetentionPolicy><Enabled>false"
        "</Enabled></RetentionPolicy></MinuteMetrics><Cors /></"
        "StorageServiceProperties>");
    rt_buf_reset(&b);
    fe_svc_stats_write(&b, 1611095323); /* 2021-01-19T22:28:43Z */
    assert_string_equal(rt_buf_cstr(&b),
                        "<?xml version=\"1.0\" encoding=\"utf-8\"?>"
                        "<StorageServiceStats><GeoReplication><Status>live"
                        "</Status><LastSyncTime>Tue, 19 Jan 2021 22:28:43 "
                        "GMT</LastSyncTime></GeoReplication>"
                        "</StorageServiceStats>");
    rt_buf_free(&b);
}

static int props_rc(const char *inner)
{
    struct fe_svc_props p;
    char doc[8192];
    int rc;
    snprintf(doc, sizeof(doc),
             "<StorageServiceProperties>%s</StorageServiceProperties>", inner);
    rc = fe_svc_props_parse(doc, strlen(doc), &p);
    fe_svc_props_free(&p);
    return rc;
}

#define RULE(o, m, h)                                                    \
    "<CorsRule><AllowedOrigins>" o "</AllowedOrigins><AllowedMethods>" m \
    "</AllowedMethods><AllowedHeaders>" h                                \
    "</AllowedHeaders>"                                                  \
    "<ExposedHeaders></ExposedHeaders><MaxAgeInSeconds>1</"              \
    "MaxAgeInSeconds></CorsRule>"
#define LOGGING(extra)                                                   \
    "<Logging><Version>1.0</Version><Delete>false</Delete><Read>false</" \
    "Read><Write>false</Write>" extra "</Logging>"

/* Limits and required elements (spec §3.6, §9): InvalidXmlDocument. */
static void test_props_limits(void **state)
{
    (void)state;
    assert_int_equal(props_rc("<Cors>" RULE("*", "GET", "") RULE("*", "GET", "")
                                  RULE("*", "GET", "") RULE("*", "GET", "")
                                      RULE("*", "GET", "") "</Cors>"),
                     0);
    assert_int_equal(
        props_rc("<Cors>" RULE("*", "GET", "") RULE("*", "GET", "")
                     RULE("*", "GET", "") RULE("*", "GET", "")
                         RULE("*", "GET", "") RULE("*", "GET", "") "</Cors>"),
        RT_EXML);
    assert_int_equal(props_rc("<Cors>" RULE("*", "FETCH", "") "</Cors>"),
                     RT_EXML);
    assert_int_equal(props_rc("<Cors>" RULE("", "GET", "") "</Cors>"), RT_EXML);
    assert_int_equal(props_rc("<Cors>" RULE("*", "GET,,PUT", "") "</Cors>"),
                     RT_EXML);
    assert_int_equal(props_rc("<Cors>" RULE("*", "GET", "a*,b*,c*") "</Cors>"),
                     RT_EXML);
    assert_int_equal(props_rc("<Cors>" RULE("*", "GET", "a*,b*,c") "</Cors>"),
                     0);
    assert_int_equal(
        props_rc("<Cors><CorsRule><AllowedOrigins>*</AllowedOrigins>"
                 "<AllowedMethods>GET</AllowedMethods></CorsRule></Cors>"),
        RT_EXML); /* MaxAgeInSeconds required */
    assert_int_equal(props_rc(LOGGING("<RetentionPolicy><Enabled>false"
                                      "</Enabled></RetentionPolicy>")),
                     0);
    assert_int_equal(props_rc(LOGGING("")), RT_EXML);
    assert_int_equal(props_rc(LOGGING("<RetentionPolicy><Enabled>true"
                                      "</Enabled></RetentionPolicy>")),
                     RT_EXML); /* Days required when enabled */
    assert_int_equal(props_rc(LOGGING("<RetentionPolicy><Enabled>true"
                                      "</Enabled><Days>366</Days>"
                                      "</RetentionPolicy>")),
                     RT_EXML);
    assert_int_equal(props_rc(LOGGING("<RetentionPolicy><Enabled>true"
                                      "</Enabled><Days>0</Days>"
                                      "</RetentionPolicy>")),
                     RT_EXML);
    assert_int_equal(props_rc(LOGGING("<RetentionPolicy><Enabled>yes"
                                      "</Enabled></RetentionPolicy>")),
                     RT_EXML);
    assert_int_equal(props_rc("<HourMetrics><Version>1.0</Version>"
                              "</HourMetrics>"),
                     RT_EXML); /* Enabled required */
    assert_int_equal(props_rc("<HourMetrics><Enabled>true</Enabled>"
                              "<Enabled>true</Enabled></HourMetrics>"),
                     RT_EXML);
    assert_int_equal(props_rc("<DefaultServiceVersion>2019-02-02"
                              "</DefaultServiceVersion>"),
                     0); /* unknown sections are ignored */
    struct fe_svc_props p;
    assert_int_equal(fe_svc_props_parse("<Other/>", 8, &p), RT_EXML);
    assert_int_equal(fe_svc_props_parse("<Storage", 8, &p), RT_EXML);
}

/* ---- Tests: CORS ---- */

/* First matching rule wins; origins "*" or exact (any case); methods from
 * the list; every requested header allowed exactly or by prefix. */
static void test_cors_match(void **state)
{
    Rt__CorsRule a = RT__CORS_RULE__INIT, b = RT__CORS_RULE__INIT;
    Rt__CorsRule *rules[2] = {&a, &b};
    (void)state;
    a.allowed_origins = "http://a.com, http://b.com";
    a.allowed_methods = "GET,PUT";
    a.allowed_headers = "x-ms-meta-abc,x-ms-meta-data*";
    b.allowed_origins = "*";
    b.allowed_methods = "GET";
    b.allowed_headers = "";
    assert_int_equal(fe_cors_match(rules, 2, "http://a.com", "PUT", NULL), 0);
    assert_int_equal(fe_cors_match(rules, 2, "HTTP://B.COM", "put",
                                   "x-ms-meta-abc, X-MS-META-DATA-1"),
                     0);
    assert_int_equal(
        fe_cors_match(rules, 2, "http://a.com", "PUT", "x-ms-meta-other"), -1);
    assert_int_equal(
        fe_cors_match(rules, 2, "http://a.com", "GET", "x-ms-meta-other"), -1);
    assert_int_equal(fe_cors_match(rules, 2, "http://c.com", "GET", NULL), 1);
    assert_int_equal(fe_cors_match(rules, 2, "http://c.com", "GET", ""), 1);
    assert_int_equal(fe_cors_match(rules, 2, "http://c.com", "PUT", NULL), -1);
    assert_int_equal(fe_cors_match(rules, 2, "http://a.co", "DELETE", NULL),
                     -1);
    assert_int_equal(fe_cors_match(rules, 0, "http://a.com", "GET", NULL), -1);
    b.allowed_headers = "*";
    assert_int_equal(
        fe_cors_match(rules, 2, "http://z.com", "GET", "anything,else"), 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_sts_service, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sts_account, setup, teardown),
        cmocka_unit_test_setup_teardown(test_parse_kinds, setup, teardown),
        cmocka_unit_test_setup_teardown(test_service_ok, setup, teardown),
        cmocka_unit_test_setup_teardown(test_service_tampered, setup, teardown),
        cmocka_unit_test_setup_teardown(test_service_time, setup, teardown),
        cmocka_unit_test_setup_teardown(test_service_range, setup, teardown),
        cmocka_unit_test_setup_teardown(test_service_key2, setup, teardown),
        cmocka_unit_test_setup_teardown(test_service_protocol, setup, teardown),
        cmocka_unit_test_setup_teardown(test_service_bad_letters, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_service_si, setup, teardown),
        cmocka_unit_test_setup_teardown(test_service_legacy, setup, teardown),
        cmocka_unit_test_setup_teardown(test_service_allows, setup, teardown),
        cmocka_unit_test_setup_teardown(test_account_read_list, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_account_container, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_account_ip_objects, setup,
                                        teardown),
        cmocka_unit_test(test_account_matrix),
        cmocka_unit_test_setup_teardown(test_account_fields, setup, teardown),
        cmocka_unit_test_setup_teardown(test_policy_snapshot, setup, teardown),
        cmocka_unit_test(test_acl_roundtrip),
        cmocka_unit_test(test_acl_limits),
        cmocka_unit_test(test_xml_malformed),
        cmocka_unit_test(test_props_roundtrip),
        cmocka_unit_test(test_props_defaults),
        cmocka_unit_test(test_props_limits),
        cmocka_unit_test(test_cors_match),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
