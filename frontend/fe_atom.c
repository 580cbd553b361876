/* AtomPub codec: see fe_atom.h.
 *
 * Reading: fe_xml builds the tree; fe__atom_props finds <m:properties>;
 * each d: property becomes a member of a jansson object in the form a
 * JSON body would have ("Name": "text", "Name@odata.type": "Edm.X",
 * null for m:null), and fe_odata_entity_from_json applies every rule of
 * the JSON path to it. Writing: straight text into the caller's buffer,
 * every value through fe_xml_escape. */
#include "fe_atom.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fe_b64.h"
#include "fe_xml.h"
#include "rt_alloc.h"
#include "rt_entity.h"
#include "rt_err.h"
#include "rt_time.h"

#define FE__ATOM_DECL \
    "<?xml version=\"1.0\" encoding=\"utf-8\" standalone=\"yes\"?>"
#define FE__ATOM_XMLNS                                      \
    " xmlns:d=\"" FE_ATOM_NS_D "\" xmlns:m=\"" FE_ATOM_NS_M \
    "\" xmlns=\"" FE_ATOM_NS "\""

/* ---- reading ---------------------------------------------------------- */

static int fe__aerr(char *errmsg, const char *fmt, const char *name)
{
    if (errmsg) {
        snprintf(errmsg, RT_ERRMSG_SIZE, fmt, name ? name : "");
    }
    return RT_EINVAL;
}

static int fe__is(const struct fe_xml_node *n, const char *ns, const char *name)
{
    return n->ns && strcmp(n->ns, ns) == 0 && strcmp(n->name, name) == 0;
}

/* The <m:properties> of entry @root: under <content>, or (media-link
 * entries) directly in the entry. 0 with *props (NULL = none), or -1. */
static int fe__atom_props(const struct fe_xml_node *root,
                          const struct fe_xml_node **props,
                          char *errmsg)
{
    const struct fe_xml_node *found = NULL;
    int count = 0;
    *props = NULL;
    if (!fe__is(root, FE_ATOM_NS, "entry")) {
        fe__aerr(errmsg, "the body is not an Atom entry%s", "");
        return -1;
    }
    for (const struct fe_xml_node *c = root->child; c; c = c->next) {
        if (fe__is(c, FE_ATOM_NS, "content")) {
            for (const struct fe_xml_node *k = c->child; k; k = k->next) {
                if (fe__is(k, FE_ATOM_NS_M, "properties")) {
                    found = k;
                    count++;
                }
            }
        } else if (fe__is(c, FE_ATOM_NS_M, "properties")) {
            found = c;
            count++;
        }
    }
    if (count > 1) {
        fe__aerr(errmsg, "more than one m:properties%s", "");
        return -1;
    }
    *props = found;
    return 0;
}

/* Trimmed copy of @s into a jansson string. */
static json_t *fe__trimmed(const char *s)
{
    size_t n;
    while (fe_xml_is_space(*s)) {
        s++;
    }
    n = strlen(s);
    while (n && fe_xml_is_space(s[n - 1])) {
        n--;
    }
    return json_stringn(s, n);
}

/* The value of typed property @type as the string a JSON body would carry:
 * XML Schema spellings mapped to OData JSON ones. */
static json_t *fe__typed_value(const char *type, const char *text)
{
    json_t *v = fe__trimmed(text);
    const char *s = json_string_value(v);
    const char *map = NULL;
    if (strcmp(type, "Edm.Double") == 0) {
        map = strcmp(s, "INF") == 0    ? "Infinity"
              : strcmp(s, "-INF") == 0 ? "-Infinity"
                                       : NULL;
    } else if (strcmp(type, "Edm.Boolean") == 0) {
        map = strcmp(s, "1") == 0   ? "true"
              : strcmp(s, "0") == 0 ? "false"
                                    : NULL;
    }
    if (map) {
        json_decref(v);
        v = json_string(map);
    }
    return v;
}

/* Builds the JSON-shaped object of the properties in @props. */
static int fe__atom_object(const struct fe_xml_node *props,
                           json_t *obj,
                           char *errmsg)
{
    for (const struct fe_xml_node *c = props ? props->child : NULL; c;
         c = c->next) {
        const char *type = fe_xml_attr(c, FE_ATOM_NS_M, "type");
        const char *null = fe_xml_attr(c, FE_ATOM_NS_M, "null");
        char akey[RT_MAX_PROP_NAME + 16];
        json_t *v;

        if (!c->ns || strcmp(c->ns, FE_ATOM_NS_D) != 0) {
            return fe__aerr(errmsg,
                            "property %.64s is not in the dataservices "
                            "namespace",
                            c->name);
        }
        if (c->child) {
            return fe__aerr(errmsg, "property %.64s has child elements",
                            c->name);
        }
        if (json_object_get(obj, c->name)) {
            if (errmsg) {
                snprintf(errmsg, RT_ERRMSG_SIZE, "duplicate property %.64s",
                         c->name);
            }
            return RT_EDUPPROPS;
        }
        if (strncmp(c->name, "odata.", 6) == 0) {
            /* the JSON path would take it for an annotation */
            if (errmsg) {
                snprintf(errmsg, RT_ERRMSG_SIZE, "invalid property name %.64s",
                         c->name);
            }
            return RT_EPROPNAME;
        }
        if (null && strcmp(null, "true") != 0 && strcmp(null, "false") != 0) {
            return fe__aerr(errmsg, "m:null of %.64s is not a boolean",
                            c->name);
        }
        if (type && strlen(c->name) <= RT_MAX_PROP_NAME) {
            snprintf(akey, sizeof(akey), "%s@odata.type", c->name);
            if (json_object_set_new(obj, akey, json_string(type)) != 0) {
                return fe__aerr(errmsg, "bad m:type on %.64s", c->name);
            }
        }
        if (null && strcmp(null, "true") == 0) {
            v = json_null();
        } else if (!type || strcmp(type, "Edm.String") == 0) {
            v = json_string(c->text);
        } else {
            v = fe__typed_value(type, c->text);
        }
        if (!v || json_object_set_new(obj, c->name, v) != 0) {
            return fe__aerr(errmsg, "bad value of %.64s", c->name);
        }
    }
    return 0;
}

int fe_atom_parse_entity(const char *body,
                         size_t len,
                         struct fe_entity_in *in,
                         char *errmsg)
{
    struct fe_xml_node *root = NULL;
    const struct fe_xml_node *props;
    json_t *obj;
    int rc;

    if (errmsg) {
        errmsg[0] = '\0';
    }
    fe_entity_in_free(in);
    if (fe_xml_parse(body, len, &root) != 0) {
        return fe__aerr(errmsg, "the body is not well-formed XML%s", "");
    }
    if (fe__atom_props(root, &props, errmsg) != 0) {
        fe_xml_free(root);
        return RT_EINVAL;
    }
    obj = json_object();
    rc = fe__atom_object(props, obj, errmsg);
    fe_xml_free(root);
    if (rc == 0) {
        rc = fe_odata_entity_from_json(obj, in, errmsg);
    }
    json_decref(obj);
    return rc;
}

int fe_atom_parse_table(const char *body, size_t len, char **name)
{
    struct fe_xml_node *root = NULL;
    const struct fe_xml_node *props;
    const struct fe_xml_node *tn = NULL;
    int rc = RT_ENEEDVALUE;

    *name = NULL;
    if (fe_xml_parse(body, len, &root) != 0) {
        return RT_EINVAL;
    }
    if (fe__atom_props(root, &props, NULL) != 0) {
        fe_xml_free(root);
        return RT_EINVAL;
    }
    for (const struct fe_xml_node *c = props ? props->child : NULL; c;
         c = c->next) {
        if (!c->ns || strcmp(c->ns, FE_ATOM_NS_D) != 0) {
            rc = RT_EINVAL;
            goto out;
        }
        if (strcmp(c->name, "TableName") == 0) {
            if (tn) {
                rc = RT_EINVAL;
                goto out;
            }
            tn = c;
        }
    }
    if (tn) {
        const char *type = fe_xml_attr(tn, FE_ATOM_NS_M, "type");
        const char *null = fe_xml_attr(tn, FE_ATOM_NS_M, "null");
        if (null && strcmp(null, "true") == 0) {
            rc = RT_ENEEDVALUE;
        } else if ((type && strcmp(type, "Edm.String") != 0) || tn->child) {
            rc = RT_EINVAL;
        } else {
            *name = rt_xstrdup(tn->text);
            rc = 0;
        }
    }
out:
    fe_xml_free(root);
    return rc;
}

/* ---- writing ---------------------------------------------------------- */

#define FE__LIT(out, lit) rt_buf_append((out), (lit), sizeof(lit) - 1)

/* Appends @s (@n bytes, no NUL inside) escaped. */
static void fe__esc_n(struct rt_buf *out, const char *s, size_t n)
{
    char *tmp = rt_xstrndup(s, n);
    fe_xml_escape(out, tmp);
    free(tmp);
}

static void fe__now(struct rt_buf *out)
{
    char when[RT_TIME_ISO_SIZE];
    size_t n = rt_time_format_iso7(rt_time_now_ticks(), when);
    rt_buf_append(out, when, n);
}

/* <d:@name m:type="@edm"> (no m:type when @edm is NULL) */
static void fe__popen(struct rt_buf *out,
                      const char *name,
                      size_t n,
                      const char *edm)
{
    FE__LIT(out, "<d:");
    rt_buf_append(out, name, n);
    if (edm) {
        FE__LIT(out, " m:type=\"");
        rt_buf_append_str(out, edm);
        rt_buf_append_u8(out, '"');
    }
    rt_buf_append_u8(out, '>');
}

static void fe__pclose(struct rt_buf *out, const char *name, size_t n)
{
    FE__LIT(out, "</d:");
    rt_buf_append(out, name, n);
    rt_buf_append_u8(out, '>');
}

/* XML Schema's double: shortest text that reads back, INF/-INF/NaN. */
static void fe__double(struct rt_buf *out, double d)
{
    char buf[40];
    if (isnan(d)) {
        FE__LIT(out, "NaN");
        return;
    }
    if (isinf(d)) {
        rt_buf_append_str(out, d > 0 ? "INF" : "-INF");
        return;
    }
    for (int prec = 15; prec <= 17; prec++) {
        snprintf(buf, sizeof(buf), "%.*g", prec, d);
        if (strtod(buf, NULL) == d) {
            break;
        }
    }
    rt_buf_append_str(out, buf);
}

/* Writes property @p. */
static void fe__prop(struct rt_buf *out, const struct rt_prop *p)
{
    char tmp[64];
    switch (p->type) {
        case RT_EDM_STRING:
            fe__popen(out, p->name, p->name_len, NULL);
            fe__esc_n(out, (const char *)p->v.bytes.p, p->v.bytes.n);
            break;
        case RT_EDM_BINARY: {
            fe__popen(out, p->name, p->name_len, "Edm.Binary");
            char *q =
                (char *)rt_buf_reserve(out, FE_B64_ENCODED_SIZE(p->v.bytes.n));
            out->len += fe_b64_encode(p->v.bytes.p, p->v.bytes.n, q);
            break;
        }
        case RT_EDM_BOOL:
            fe__popen(out, p->name, p->name_len, "Edm.Boolean");
            rt_buf_append_str(out, p->v.b ? "true" : "false");
            break;
        case RT_EDM_DATETIME:
            fe__popen(out, p->name, p->name_len, "Edm.DateTime");
            rt_buf_append(out, tmp, rt_time_format_iso(p->v.ticks, tmp));
            break;
        case RT_EDM_DOUBLE:
            fe__popen(out, p->name, p->name_len, "Edm.Double");
            fe__double(out, p->v.d);
            break;
        case RT_EDM_GUID:
            fe__popen(out, p->name, p->name_len, "Edm.Guid");
            fe_odata_guid_text(p->v.guid, tmp);
            rt_buf_append_str(out, tmp);
            break;
        case RT_EDM_INT32:
            fe__popen(out, p->name, p->name_len, "Edm.Int32");
            rt_buf_printf(out, "%d", (int)p->v.i32);
            break;
        case RT_EDM_INT64:
            fe__popen(out, p->name, p->name_len, "Edm.Int64");
            rt_buf_printf(out, "%lld", (long long)p->v.i64);
            break;
    }
    fe__pclose(out, p->name, p->name_len);
}

/* A property name that is also an XML element name (spec §9's letters,
 * digits, underscore and non-ASCII; not starting with a digit). */
static int fe__xml_name(const char *s)
{
    if (!*s || (*s >= '0' && *s <= '9')) {
        return 0;
    }
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
              (c >= '0' && c <= '9') || c == '_' || c >= 0x80)) {
            return 0;
        }
    }
    return 1;
}

int fe_atom_write_entry(struct rt_buf *out,
                        const struct fe_odata_ctx *ctx,
                        const char *pk,
                        size_t pklen,
                        const char *rk,
                        size_t rklen,
                        const uint8_t *value,
                        size_t vlen,
                        int top)
{
    size_t start = out->len;
    const uint8_t *blob;
    size_t blob_n;
    uint64_t ticks;
    uint8_t flags;
    struct rt_props_iter it;
    struct rt_prop p;
    struct rt_buf path = RT_BUF_INIT;
    char *kp = rt_xstrndup(pk, pklen);
    char *kr = rt_xstrndup(rk, rklen);
    char tmp[64];
    uint8_t seen[256] = {0};
    int rv, k;

    if (rt_value_decode(value, vlen, &ticks, &flags, &blob, &blob_n) != 0 ||
        rt_props_iter_init(&it, blob, blob_n) != 0) {
        free(kp);
        free(kr);
        return RT_ECORRUPT;
    }
    fe_odata_etag(ticks, tmp);
    if (top) {
        FE__LIT(out, FE__ATOM_DECL "<entry xml:base=\"");
        fe_xml_escape(out, ctx->root);
        FE__LIT(out, "/\"" FE__ATOM_XMLNS " m:etag=\"");
    } else {
        FE__LIT(out, "<entry m:etag=\"");
    }
    fe_xml_escape(out, tmp);
    FE__LIT(out, "\"><id>");
    fe_odata_entity_path(&path, ctx->root, ctx->table, kp, kr);
    fe_xml_escape(out, rt_buf_cstr(&path));
    FE__LIT(out, "</id><title type=\"text\"></title><updated>");
    fe__now(out);
    FE__LIT(out,
            "</updated><author><name /></author><link rel=\"edit\" "
            "title=\"");
    fe_xml_escape(out, ctx->table);
    FE__LIT(out, "\" href=\"");
    rt_buf_reset(&path);
    fe_odata_entity_path(&path, NULL, ctx->table, kp, kr);
    fe_xml_escape(out, rt_buf_cstr(&path));
    FE__LIT(out, "\" /><category term=\"");
    fe_xml_escape(out, ctx->account);
    rt_buf_append_u8(out, '.');
    fe_xml_escape(out, ctx->table);
    FE__LIT(out, "\" scheme=\"" FE_ATOM_SCHEME
                 "\" />"
                 "<content type=\"application/xml\"><m:properties>");
    if ((k = fe_odata_select_index(ctx, "PartitionKey", 12)) != -1) {
        FE__LIT(out, "<d:PartitionKey>");
        fe_xml_escape(out, kp);
        FE__LIT(out, "</d:PartitionKey>");
        if (k >= 0) {
            seen[k] = 1;
        }
    }
    if ((k = fe_odata_select_index(ctx, "RowKey", 6)) != -1) {
        FE__LIT(out, "<d:RowKey>");
        fe_xml_escape(out, kr);
        FE__LIT(out, "</d:RowKey>");
        if (k >= 0) {
            seen[k] = 1;
        }
    }
    if ((k = fe_odata_select_index(ctx, "Timestamp", 9)) != -1) {
        FE__LIT(out, "<d:Timestamp m:type=\"Edm.DateTime\">");
        rt_buf_append(out, tmp, rt_time_format_iso7(ticks, tmp));
        FE__LIT(out, "</d:Timestamp>");
        if (k >= 0) {
            seen[k] = 1;
        }
    }
    while ((rv = rt_props_next(&it, &p)) == 1) {
        k = fe_odata_select_index(ctx, p.name, p.name_len);
        if (k == -1) {
            continue;
        }
        if (k >= 0) {
            seen[k] = 1;
        }
        fe__prop(out, &p);
    }
    /* Selected but absent: m:null (the documented Atom behaviour), once
     * per name, and only for a name that can be an element name. */
    for (size_t i = 0; ctx->select && i < ctx->nselect && i < 256; i++) {
        if (!seen[i] &&
            fe_odata_select_index(ctx, ctx->select[i],
                                  strlen(ctx->select[i])) == (int)i &&
            fe__xml_name(ctx->select[i])) {
            FE__LIT(out, "<d:");
            fe_xml_escape(out, ctx->select[i]);
            FE__LIT(out, " m:null=\"true\" />");
        }
    }
    rt_buf_free(&path);
    free(kp);
    free(kr);
    if (rv != 0) {
        out->len = start;
        return RT_ECORRUPT;
    }
    FE__LIT(out, "</m:properties></content></entry>");
    return 0;
}

int fe_atom_write_inserted(struct rt_buf *out,
                           const struct fe_odata_ctx *ctx,
                           const char *pk,
                           const char *rk,
                           uint64_t ticks,
                           const uint8_t *props,
                           size_t len)
{
    struct rt_buf value = RT_BUF_INIT;
    int rc;
    rt_value_encode(&value, ticks, 0, props, len);
    rc = fe_atom_write_entry(out, ctx, pk, strlen(pk), rk, strlen(rk),
                             value.data, value.len, 1);
    rt_buf_free(&value);
    return rc;
}

void fe_atom_write_table(struct rt_buf *out,
                         const char *root,
                         const char *account,
                         const char *name,
                         int top)
{
    if (top) {
        FE__LIT(out, FE__ATOM_DECL "<entry xml:base=\"");
        fe_xml_escape(out, root);
        FE__LIT(out, "/\"" FE__ATOM_XMLNS ">");
    } else {
        FE__LIT(out, "<entry>");
    }
    FE__LIT(out, "<id>");
    fe_xml_escape(out, root);
    FE__LIT(out, "/Tables(&apos;");
    fe_xml_escape(out, name);
    FE__LIT(out, "&apos;)</id><title type=\"text\"></title><updated>");
    fe__now(out);
    FE__LIT(out,
            "</updated><author><name /></author><link rel=\"edit\" "
            "title=\"Tables\" href=\"Tables(&apos;");
    fe_xml_escape(out, name);
    FE__LIT(out, "&apos;)\" /><category term=\"");
    fe_xml_escape(out, account);
    FE__LIT(out, ".Tables\" scheme=\"" FE_ATOM_SCHEME
                 "\" />"
                 "<content type=\"application/xml\"><m:properties>"
                 "<d:TableName>");
    fe_xml_escape(out, name);
    FE__LIT(out, "</d:TableName></m:properties></content></entry>");
}

void fe_atom_feed_begin(struct rt_buf *out, const char *root, const char *title)
{
    FE__LIT(out, FE__ATOM_DECL "<feed xml:base=\"");
    fe_xml_escape(out, root);
    FE__LIT(out, "/\"" FE__ATOM_XMLNS "><title type=\"text\">");
    fe_xml_escape(out, title);
    FE__LIT(out, "</title><id>");
    fe_xml_escape(out, root);
    rt_buf_append_u8(out, '/');
    fe_xml_escape(out, title);
    FE__LIT(out, "</id><updated>");
    fe__now(out);
    FE__LIT(out, "</updated><link rel=\"self\" title=\"");
    fe_xml_escape(out, title);
    FE__LIT(out, "\" href=\"");
    fe_xml_escape(out, title);
    FE__LIT(out, "\" />");
}

void fe_atom_feed_end(struct rt_buf *out)
{
    FE__LIT(out, "</feed>");
}

void fe_atom_write_error(struct rt_buf *out, const char *code, const char *msg)
{
    FE__LIT(out, FE__ATOM_DECL "<error xmlns=\"" FE_ATOM_NS_M "\"><code>");
    fe_xml_escape(out, code);
    FE__LIT(out, "</code><message xml:lang=\"en-US\">");
    fe_xml_escape(out, msg);
    FE__LIT(out, "</message></error>");
}
