/* AtomPub for the Table service, as Azure served it for x-ms-version
 * 2009-09-19 .. 2015-04-05 (docs/table-api-spec.md §10): request entries
 * (Create Table, Insert/Update/Merge/Upsert Entity) turned into the same
 * entity the JSON path builds, and the response documents (entry, feed,
 * table entry, the dataservices-metadata error).
 *
 * Parsing goes through fe_xml (libxml2: no DOCTYPE, no entities, no
 * network) and then through fe_odata_entity_from_json, so names, types,
 * sizes, key characters and error codes are those of a JSON body. Writing
 * appends text to the caller's buffer with fe_xml_escape for every value.
 *
 * Thread: pure functions, callable from any thread. All pointers are
 * borrowed; nothing is kept after return. */
#ifndef FE_ATOM_H
#define FE_ATOM_H

#include <stddef.h>
#include <stdint.h>

#include "fe_odata.h"
#include "rt_buf.h"

#define FE_ATOM_NS "http://www.w3.org/2005/Atom"
#define FE_ATOM_NS_D "http://schemas.microsoft.com/ado/2007/08/dataservices"
#define FE_ATOM_NS_M \
    "http://schemas.microsoft.com/ado/2007/08/dataservices/metadata"
#define FE_ATOM_SCHEME \
    "http://schemas.microsoft.com/ado/2007/08/dataservices/scheme"

#define FE_ATOM_CT_ENTRY "application/atom+xml;type=entry;charset=utf-8"
#define FE_ATOM_CT_FEED "application/atom+xml;type=feed;charset=utf-8"
#define FE_ATOM_CT_ERROR "application/xml"

/* ---- reading ---- */

/* Parses an Atom <entry> (Atom namespace) whose <content> holds
 * <m:properties> (or whose <m:properties> stands directly in the entry)
 * into @in, exactly as fe_odata_parse_entity would for the equivalent
 * JSON: each d: child is a property; no m:type = Edm.String; m:null="true"
 * = absent; Edm.Double "INF"/"-INF"/"NaN" and Edm.Boolean "1"/"0" as
 * XML Schema writes them. Returns 0 or: RT_EINVAL (not well-formed XML, a
 * DOCTYPE, not an Atom entry, a property outside the d: namespace or with
 * child elements, an unknown m:type, a value not valid for its type) or
 * any code of fe_odata_entity_from_json; @errmsg (RT_ERRMSG_SIZE) says
 * why. */
int fe_atom_parse_entity(const char *body,
                         size_t len,
                         struct fe_entity_in *in,
                         char *errmsg);

/* Parses a Create Table entry: d:TableName into *name (malloc'd, the
 * caller frees it). Returns 0, RT_EINVAL (as above, or a TableName that is
 * not a string) or RT_ENEEDVALUE (no TableName, or m:null). */
int fe_atom_parse_table(const char *body, size_t len, char **name);

/* ---- writing ---- */

/* One entity (stored @value, rt_value) as an <entry>. @top: a document of
 * its own (XML declaration, xml:base, namespace declarations), else an
 * entry inside a feed. Properties named in ctx->select but absent are
 * written as <d:X m:null="true" />. Returns 0 or RT_ECORRUPT (@out is
 * then as it was). */
int fe_atom_write_entry(struct rt_buf *out,
                        const struct fe_odata_ctx *ctx,
                        const char *pk,
                        size_t pklen,
                        const char *rk,
                        size_t rklen,
                        const uint8_t *value,
                        size_t vlen,
                        int top);
/* The echo of an inserted entity: @ticks plus the properties blob
 * @props (@len bytes) that was sent, as a document of its own. */
int fe_atom_write_inserted(struct rt_buf *out,
                           const struct fe_odata_ctx *ctx,
                           const char *pk,
                           const char *rk,
                           uint64_t ticks,
                           const uint8_t *props,
                           size_t len);
/* A table as an <entry> (Create Table, Query Tables); @top as above. */
void fe_atom_write_table(struct rt_buf *out,
                         const char *root,
                         const char *account,
                         const char *name,
                         int top);
/* Opens a <feed> titled @title ("Tables", or the table's name) whose id
 * is {root}/{title}; entries follow, then fe_atom_feed_end. */
void fe_atom_feed_begin(struct rt_buf *out,
                        const char *root,
                        const char *title);
void fe_atom_feed_end(struct rt_buf *out);
/* The dataservices-metadata error document (spec §8.1). */
void fe_atom_write_error(struct rt_buf *out, const char *code, const char *msg);

#endif
