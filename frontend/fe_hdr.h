/* Request header and query-parameter rules of the Table REST API that need
 * no network: Accept/$format -> metadata level, x-ms-version syntax,
 * Prefer, client request id echo, $top, $select, request ids and the
 * opaque continuation tokens (docs/table-api-spec.md §2, §6.3, §6.4, §11).
 * Thread: pure functions (fe_hdr_guid keeps a per-thread generator seeded
 * from OpenSSL's RNG). */
#ifndef FE_HDR_H
#define FE_HDR_H

#include <stddef.h>
#include <stdint.h>

#include "fe_odata.h"
#include "rt_buf.h"

/* The version assumed when a request sends none (spec §11: "behave as the
 * oldest"; we still answer JSON, see frontend/DESIGN-api.md). */
#define FE_VERSION_DEFAULT "2009-09-19"
#define FE_VERSION_MIN "2009-04-14"
/* Feature gates (spec §11), compared as strings (YYYY-MM-DD sorts). They
 * apply only to a version the client sent: a request without x-ms-version
 * is served leniently (frontend/DESIGN-api.md). */
#define FE_VERSION_UPSERT "2011-08-18"  /* upserts, $select, DSV 2.0 */
#define FE_VERSION_JSON "2013-08-15"    /* JSON, Prefer, DSV 3.0 */
#define FE_VERSION_NO_ATOM "2015-12-11" /* Atom refused from here on */

/* Metadata level from Accept and $format (the query parameter wins).
 * Missing or wildcard Accept -> minimal; bare application/json -> minimal.
 * Returns 0, RT_EATOMNOTSUPPORTED (only Atom/XML acceptable) or
 * RT_EQUERYPARAM (unknown $format). */
int fe_hdr_meta(const char *accept, const char *format, enum fe_meta *out);
/* fe_hdr_meta() plus the JSON version gate: when @version (the x-ms-version
 * the client sent; NULL = none) is older than FE_VERSION_JSON and JSON is
 * asked for explicitly (Accept names application/json, or $format),
 * returns RT_EJSONNOTSUPPORTED. */
int fe_hdr_meta_v(const char *accept,
                  const char *format,
                  const char *version,
                  enum fe_meta *out);

/* Whether the response is AtomPub (spec §10, §2): never from
 * FE_VERSION_NO_ATOM on; always before FE_VERSION_JSON (JSON cannot be
 * answered there, so even its refusal is an Atom error); in between, an
 * Atom $format or the first Accept item that names JSON or Atom decides,
 * and a missing or wildcard Accept means Atom, as the service did. A
 * request without x-ms-version is served leniently: Atom only when Accept
 * or $format names it, or when the body @content_type is Atom and Accept
 * names nothing. Returns 1 (Atom) or 0. */
int fe_hdr_atom(const char *accept,
                const char *format,
                const char *content_type,
                const char *version);
/* An Atom request body (Content-Type application/atom+xml or
 * application/xml) that the sent @version (NULL = none) still accepts:
 * 1, else 0 (JSON, none, or Atom that fe_hdr_body_type refuses). */
int fe_hdr_body_atom(const char *content_type, const char *version);

/* x-ms-version must be a well-formed YYYY-MM-DD not older than
 * FE_VERSION_MIN. Returns 0 or RT_EHEADER. */
int fe_hdr_version_check(const char *v);

/* x-ms-client-request-id is echoed only when it is at most 1024 visible
 * ASCII characters (spec §2). Returns 1 to echo. */
int fe_hdr_client_id_ok(const char *v);

enum fe_prefer {
    FE_PREFER_NONE,
    FE_PREFER_CONTENT,    /* return-content */
    FE_PREFER_NO_CONTENT, /* return-no-content */
};
enum fe_prefer fe_hdr_prefer(const char *v);
/* The Preference-Applied value that echoes an honoured @p (spec §3.2), or
 * NULL for FE_PREFER_NONE (no header). A static string. */
const char *fe_hdr_prefer_applied(enum fe_prefer p);

/* Request body media type: JSON (or absent) -> 0; Atom/XML ->
 * RT_EATOMNOTSUPPORTED. Other types are read as JSON (lenient). */
int fe_hdr_body_type(const char *content_type);
/* fe_hdr_body_type() plus the JSON version gate: a JSON body with a sent
 * @version older than FE_VERSION_JSON -> RT_EJSONNOTSUPPORTED. */
int fe_hdr_body_type_v(const char *content_type, const char *version);

/* If-Match (spec §3.12, §4.4): "*" -> *any = 1; an ETag we issued ->
 * its ticks; any other weak ETag W/"..." or w/"..." (another datetime
 * form, Azure's W/"0x8D...") is well-formed but matches nothing -> *ticks =
 * FE_ETAG_NEVER (412 later, not 400). Returns 0, RT_EPRECOND for an empty
 * value (412, Azurite) or RT_EINVAL when it is not a weak ETag (400
 * InvalidInput). */
#define FE_ETAG_NEVER UINT64_MAX
int fe_hdr_if_match(const char *v, uint64_t *ticks, int *any);

/* The `timeout` query parameter (seconds, spec §2): a positive integer;
 * values above FE_TIMEOUT_MAX are clamped to it. Returns 0 or
 * RT_EQUERYPARAM. */
#define FE_TIMEOUT_MAX 30
int fe_hdr_timeout(const char *s, unsigned *secs);

/* A fresh random (v4) GUID, lower-case 8-4-4-4-12, NUL-terminated. */
#define FE_GUID_SIZE 37
void fe_hdr_guid(char out[FE_GUID_SIZE]);

/* $top: 0..N; values above @max are clamped to @max (spec §6.3); 0 asks
 * for an empty page. Returns 0 or RT_EQUERYPARAM (not a non-negative
 * integer). */
int fe_hdr_top(const char *s, unsigned max, unsigned *top);

/* $select "a, b ,c": names trimmed; "*" or empty -> *n = 0 (all).
 * *names is one malloc'd block (free() it) holding the pointer array and
 * the strings. Returns 0 or RT_EQUERYPARAM (empty item, > 255 names). */
int fe_hdr_select(const char *s, char ***names, size_t *n);

/* Continuation tokens (spec §6.4: opaque, must round-trip any UTF-8).
 * Form: "1!" <decimal length of the rest> "!" <base64url(key), no '='>,
 * e.g. "1!4!cDE" ... An empty key encodes as "1!0!". */
void fe_token_encode(struct rt_buf *out, const char *key, size_t n);
/* Decodes a token (also tolerating standard base64 characters and '='
 * padding) and appends the key to @out. Returns 0 or RT_EINVAL. */
int fe_token_decode(const char *tok, struct rt_buf *out);

#endif
