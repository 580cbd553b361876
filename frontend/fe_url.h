/* URL parsing for the Table REST API: percent-decoding, the path-style
 * resource path (/{account}/{resource}), key predicates, table-name rules
 * and the decoded query string.
 *
 * libmicrohttpd is told not to unescape anything (fe_http installs an
 * identity MHD_OPTION_UNESCAPE_CALLBACK), so the path handed to
 * fe_path_parse() is the raw request-target path exactly as the client sent
 * it; the raw form is what SharedKey signs (docs/table-api-spec.md §7.1).
 * The parser decodes the resource segment itself, then parses it
 * (spec §1.3: percent-decode -> parse Name(PartitionKey='..',RowKey='..')
 * with '' meaning ' inside a literal).
 *
 * Thread: pure functions, callable from any thread. */
#ifndef FE_URL_H
#define FE_URL_H

#include <stddef.h>

#include "rt_buf.h"

/* Appends the percent-decoding of @s[0..n) to @out (NUL-terminated via
 * rt_buf_cstr by the caller if needed). @plus: '+' decodes to a space
 * (query strings). A '%' not followed by two hex digits is kept literally
 * (lenient, as Azure's front end is for stray '%'). */
void fe_url_decode(struct rt_buf *out, const char *s, size_t n, int plus);

/* What the path addresses (spec §1.2). */
enum fe_res_kind {
    FE_RES_SERVICE,   /* "/{account}/" (service properties / stats) */
    FE_RES_TABLES,    /* "/Tables" or "/Tables()" */
    FE_RES_TABLE_ONE, /* "/Tables('name')" */
    FE_RES_TABLE,     /* "/name" or "/name()": the entity collection */
    FE_RES_ENTITY,    /* "/name(PartitionKey='p',RowKey='r')" */
    FE_RES_BATCH,     /* "/$batch" */
    FE_RES__NR
};

struct fe_path
{
    char *account;  /* malloc'd, "-secondary" stripped */
    char *acct_seg; /* malloc'd, the first segment as sent (decoded) */
    int secondary;  /* the account segment ended in "-secondary" */
    int host_style; /* account from the Host header, not the path */
    enum fe_res_kind kind;
    char *table; /* malloc'd decoded table name (TABLE_ONE, TABLE,
                  * ENTITY), else NULL */
    int parens;  /* TABLE: the "name()" form was used */
    char *pk;    /* malloc'd decoded keys (ENTITY), else NULL */
    char *rk;
    size_t pklen;
    size_t rklen;
    /* On error: which part failed. */
    int account_ok;     /* the account segment parsed (auth can proceed) */
    const char *errmsg; /* static client message, NULL = code default */
};

void fe_path_init(struct fe_path *p);
void fe_path_free(struct fe_path *p);

/* Parses the raw path @raw[0..n) (starting with '/', no query string).
 * One trailing '/' after the resource segment is ignored ("/a/Tables/" is
 * "/a/Tables").
 * Fills @p (always free it with fe_path_free, also on error).
 * Returns 0 or:
 *   RT_EURI       no account segment, extra segments, trailing garbage,
 *                 unknown "$" resource;
 *   RT_EINVAL     malformed key predicate, unknown key name, wrong number
 *                 of keys (p->errmsg says which);
 *   RT_EBADNAME / RT_EOUTOFRANGE  from fe_table_name_check().
 * p->account_ok is set as soon as the account segment is known, so a caller
 * can authenticate before reporting a resource error. */
int fe_path_parse(const char *raw, size_t n, struct fe_path *p);

/* Addressing style (spec §1.1, Azurite's rule). @host is the Host header
 * (port allowed). Path-style when it is absent, an IPv4 or bracketed IPv6
 * literal, "localhost", "host.docker.internal" or a name without a dot:
 * returns 0. Otherwise host-style: returns 1 with *label and *label_len
 * set to the first DNS label (borrowed from @host, as sent; "-secondary"
 * not yet stripped). */
int fe_url_host_style(const char *host, const char **label, size_t *label_len);

/* Host-style variant of fe_path_parse(): the account is @label[0..n) (the
 * first DNS label of Host, "-secondary" stripped and noted like a path
 * segment) and the whole raw path @raw is the resource ("/" = service,
 * "/Tables", "/t(PartitionKey='p',RowKey='r')", ...). Same errors;
 * RT_EURI (account_ok 0) for a label that is not a valid account name. */
int fe_path_parse_host(const char *label,
                       size_t label_len,
                       const char *raw,
                       size_t n,
                       struct fe_path *p);

/* Path-style secondary URLs of azure-data-tables 12.x: the Python SDK
 * sends /{acct}-secondary/{acct}/{rest} (it swaps the "host" netloc + path
 * after building the URL on the primary path) and signs the primary path
 * /{acct}/{rest}. This drops the repeated "/{acct}" segment in place, when
 * the first segment is "{acct}-secondary" and the second is exactly
 * "{acct}" followed by "/", so the path parses as /{acct}-secondary/{rest}
 * and the secondary signature rule (path without "-secondary", fe_auth)
 * accepts the SDK's signature. Call before the path is parsed.
 * Works on the raw path @raw[0..n) (NUL-terminated, kept so); returns the
 * new length (n when nothing changed). */
size_t fe_url_secondary_fix(char *raw, size_t n);

/* Table name rules (spec §9): ^[A-Za-z][A-Za-z0-9]{2,62}$, "tables" (any
 * case) reserved. Returns 0, RT_EBADNAME (bad characters or reserved) or
 * RT_EOUTOFRANGE (bad length); *msg gets the client message (static). */
int fe_table_name_check(const char *s, size_t n, const char **msg);

/* Room for a table name's lookup key: the longest valid name and a NUL. */
#define FE_TABLE_LNAME 64
/* Table names compare case-insensitively (spec §9): @name's lookup key,
 * lower-cased into @dst (NUL-terminated, cut at FE_TABLE_LNAME - 1 bytes,
 * longer than any valid name). */
void fe_table_lname(char dst[FE_TABLE_LNAME], const char *name);

#define FE_MSG_NAME_CHARS \
    "The specified resource name contains invalid characters."
#define FE_MSG_NAME_LENGTH                                              \
    "The specified resource name length is not within the permissible " \
    "limits."
#define FE_MSG_KEY_COUNT                                                \
    "The number of keys specified in the URI does not match number of " \
    "key properties for the resource."

/* Decoded query string. Keys and values are percent-decoded ('+' is a
 * space) with explicit lengths: a "%00" decodes to a real NUL byte, so a
 * value is a C string only up to its first NUL. fe_query_get() matches the
 * whole key and returns values as C strings; fe_query_check() must have
 * passed before a value is used as one (fe_api does it right after
 * authentication; fe_sas checks its own fields with fe_query_get_n()).
 * The first occurrence of a key wins. */
struct fe_query_kv
{
    char *key; /* NUL-terminated after key_len bytes */
    char *val; /* "" when the argument had no '='; NUL-terminated */
    size_t key_len;
    size_t val_len;
    struct rt_buf kb, vb; /* key and val live here (kept by
                           * fe_query_recycle) */
};
struct fe_query
{
    struct fe_query_kv *kv;
    size_t n;
    size_t cap;
};
void fe_query_init(struct fe_query *q);
void fe_query_free(struct fe_query *q);
/* Empties @q for the next request, keeping the blocks of its strings
 * (those up to @keep_max bytes), so a steady stream of requests decodes
 * its arguments without allocating. */
void fe_query_recycle(struct fe_query *q, size_t keep_max);
/* Adds one raw (still percent-encoded) argument (@val may be NULL). Both
 * are decoded into copies. */
void fe_query_add(struct fe_query *q, const char *key, const char *val);
/* The same with explicit lengths (@key and @val need no terminator). */
void fe_query_add_n(struct fe_query *q,
                    const char *key,
                    size_t key_len,
                    const char *val,
                    size_t val_len);
/* Parses a whole raw query string "a=1&b=2" (without '?'). */
void fe_query_parse(struct fe_query *q, const char *s, size_t n);
/* Value of @key (the whole decoded key, exact, case-sensitive) or NULL.
 * Borrowed from @q. */
const char *fe_query_get(const struct fe_query *q, const char *key);
/* The same, with the decoded value's length in *len (may hold NULs). */
const char *fe_query_get_n(const struct fe_query *q,
                           const char *key,
                           size_t *len);

/* Query hygiene (spec §8, §9: bad input is rejected, never truncated):
 * returns 0, or the index + 1 of the first argument whose key or value
 * holds a NUL byte (*why = FE_QUERY_NUL) or whose value is not UTF-8
 * (*why = FE_QUERY_UTF8). */
enum { FE_QUERY_NUL = 1, FE_QUERY_UTF8 = 2 };
size_t fe_query_check(const struct fe_query *q, int *why);

#endif
