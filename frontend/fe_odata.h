/* OData JSON <-> binary entity (common/rt_entity.h), the front end's
 * per-entity CPU cost. Parsing uses jansson (JSON_REJECT_DUPLICATES) and
 * goes straight to the properties blob; writing goes straight from the
 * stored value to JSON text without building a JSON tree.
 * Rules: docs/table-api-spec.md §4 (types, annotations, metadata levels,
 * DateTime, ETag) and §9 (names and limits).
 * Thread: pure functions, callable from any thread. */
#ifndef FE_ODATA_H
#define FE_ODATA_H

#include <stddef.h>
#include <stdint.h>

#include "rt_buf.h"

enum fe_meta {
    FE_META_NONE,
    FE_META_MINIMAL,
    FE_META_FULL,
};

struct fe_entity_in
{
    char *pk; /* malloc'd, NUL-terminated; NULL when absent */
    char *rk;
    struct rt_buf props; /* properties blob */
};

/* Parses an entity JSON object from @body. PartitionKey/RowKey go to
 * in->pk/rk (must be JSON strings when present); "Timestamp", "odata.*"
 * keys and "X@odata.type" annotations are consumed; null values are skipped;
 * every other member becomes a property with the type of §4.2 (annotation
 * before or after the value). Names and limits checked per §9.
 * Returns 0 or: RT_EINVAL (not JSON / not an object / bad value for its
 * type / unknown Edm type), RT_EDUPPROPS, RT_EPROPNAME, RT_EPROPNAMELONG,
 * RT_EPROPTOOLARGE, RT_ETOOMANYPROPS, RT_EENTITYTOOLARGE, RT_EOUTOFRANGE
 * (DateTime outside 1601..9999), with a human message in @errmsg
 * (RT_ERRMSG_SIZE bytes). @in must have been initialised with
 * fe_entity_in_init(); earlier contents are released first, so one @in may
 * be reused. On error @in is left empty (fe_entity_in_free is still safe to
 * call). Does not apply the key rules (rt_entity_key_check): callers do. */
int fe_odata_parse_entity(const char *body,
                          size_t len,
                          struct fe_entity_in *in,
                          char *errmsg);

/* The same rules over an already-built JSON object @root (borrowed; a
 * jansson json_t): each member is a property, "X@odata.type" members give
 * types, values are what a JSON body would carry. AtomPub bodies
 * (fe_atom.h) are turned into such an object so both formats share one
 * validation and the same error codes. */
struct json_t;
int fe_odata_entity_from_json(struct json_t *root,
                              struct fe_entity_in *in,
                              char *errmsg);

/* The key rules of spec §9 for an entity's PartitionKey and RowKey, the
 * same for a single request and a $batch operation. Keys from the URL:
 * bad characters RT_EINVAL (400 InvalidInput), too long RT_EOUTOFRANGE.
 * Keys from a body (@from_body): both RT_EOUTOFRANGE (400
 * OutOfRangeInput), as the service reports them. Returns 0 or the code. */
int fe_odata_check_keys(const char *pk,
                        size_t pklen,
                        const char *rk,
                        size_t rklen,
                        int from_body);
void fe_entity_in_init(struct fe_entity_in *in);
void fe_entity_in_free(struct fe_entity_in *in);

/* Where an entity is written. */
struct fe_odata_ctx
{
    const char *root;    /* "http://127.0.0.1:10002/devstoreaccount1" */
    const char *account; /* "devstoreaccount1" */
    const char *table;   /* table name as created */
    enum fe_meta meta;
    const char *const *select; /* $select names, NULL = all */
    size_t nselect;
};

/* Where property @name (@n bytes, no NUL needed) stands in ctx->select:
 * its index (the first one when named twice), -2 when everything is
 * selected (no $select, or a "*" before it), -1 when not selected. Both
 * entity writers (JSON here, Atom in fe_atom.c) read $select by it. */
int fe_odata_select_index(const struct fe_odata_ctx *ctx,
                          const char *name,
                          size_t n);
/* The text of GUID @g: 36 lower-case hex digits and dashes, NUL ended. */
void fe_odata_guid_text(const uint8_t g[16], char out[37]);

/* Appends one entity as a JSON object to @out. @value is the stored value
 * (rt_value). @element: 1 for a single-entity response (adds
 * "odata.metadata":"{root}/$metadata#{table}/@Element" in minimal/full),
 * 0 inside a query's "value" array. Order: odata.* annotations, PartitionKey,
 * RowKey, Timestamp, then the properties in stored order, each preceded by
 * "Name@odata.type" where §4.1/§4.2 require it. Returns 0 or RT_ECORRUPT. */
int fe_odata_write_entity(struct rt_buf *out,
                          const struct fe_odata_ctx *ctx,
                          const char *pk,
                          size_t pklen,
                          const char *rk,
                          size_t rklen,
                          const uint8_t *value,
                          size_t vlen,
                          int element);
/* Appends stored entity @value (rt_value, @vlen bytes) with keys @pk and
 * @rk (checked keys: no NUL inside) as a single-entity response (one
 * element) and puts its ETag into @etag (>= 64 bytes). Returns 0 or
 * RT_ECORRUPT. */
int fe_odata_write_one(struct rt_buf *out,
                       const struct fe_odata_ctx *ctx,
                       const char *pk,
                       const char *rk,
                       const uint8_t *value,
                       size_t vlen,
                       char *etag);
/* Appends the echo of an inserted entity as one element: what was stored,
 * the ticks header @ticks plus the property blob @props (@len bytes) the
 * insert sent. Returns 0 or RT_ECORRUPT. */
int fe_odata_write_inserted(struct rt_buf *out,
                            const struct fe_odata_ctx *ctx,
                            const char *pk,
                            const char *rk,
                            uint64_t ticks,
                            const uint8_t *props,
                            size_t len);

/* ETag for @ticks: W/"datetime'2017-10-16T23%3A00%3A05.5000867Z'" (7
 * fraction digits, ':' percent-encoded). @out holds >= 64 bytes. */
void fe_odata_etag(uint64_t ticks, char *out);
/* Parses an If-Match value back to ticks. "*" -> *any = 1. Returns 0 or
 * RT_EINVAL (not a weak datetime ETag we could have issued). */
int fe_odata_parse_etag(const char *s, uint64_t *ticks, int *any);

/* Appends @s JSON-escaped (without quotes). */
void fe_json_escape(struct rt_buf *out, const char *s, size_t n);
/* Appends @s percent-encoded for use inside a URL path segment (RFC 3986
 * unreserved kept, everything else %XX). */
void fe_url_escape(struct rt_buf *out, const char *s, size_t n);
/* Appends "{root}/{table}(PartitionKey='p',RowKey='r')" to @out (or
 * without "{root}/" when @root is NULL): quotes in the keys doubled, then
 * percent-encoded. All strings borrowed. The Location / DataServiceId of
 * an entity (single requests and $batch parts alike). */
void fe_odata_entity_path(struct rt_buf *out,
                          const char *root,
                          const char *table,
                          const char *pk,
                          const char *rk);

#endif
