/* XML for the storage-XML operations of the Table service (Table ACL,
 * service properties and stats, docs/table-api-spec.md §3.4-§3.7), for
 * the storage-XML error body (§8.1) and for AtomPub (fe_atom.h): a strict
 * reader (libxml2) that builds our own small tree with namespaces and
 * attributes, helpers that read typed children from it, and writer helpers.
 *
 * The reader refuses any DOCTYPE before its declarations are read, so no
 * entity is ever declared, expanded or loaded; the network and every
 * external load are off. Anything malformed, namespace errors included,
 * is RT_EXML; nothing is printed.
 *
 * Thread: pure functions, callable from any thread. A tree belongs to the
 * caller of fe_xml_parse (fe_xml_free); the helpers borrow it and return
 * pointers into it that live as long as the tree. */
#ifndef FE_XML_H
#define FE_XML_H

#include <stddef.h>
#include <stdint.h>

#include "rt_buf.h"

/* Limits of a document (spec §9: bad input is rejected, never a crash). */
#define FE_XML_DEPTH_MAX 16
#define FE_XML_NODES_MAX 1024
/* Attributes (namespace declarations included) of one element: an Atom
 * entry uses a handful; libxml2 2.9.14 checks duplicates quadratically. */
#define FE_XML_ATTRS_MAX 64

#define FE_XML_DECL "<?xml version=\"1.0\" encoding=\"utf-8\"?>"

struct fe_xml_attr
{
    char *name;  /* local name */
    char *ns;    /* namespace URI, NULL for an unprefixed attribute */
    char *value; /* references decoded */
    struct fe_xml_attr *next;
};

struct fe_xml_node
{
    char *name; /* local name (any "prefix:" dropped) */
    char *ns;   /* namespace URI, NULL when in no namespace */
    char *text; /* concatenated character data, entities decoded */
    struct fe_xml_attr *attr;  /* attributes in document order */
    struct fe_xml_node *child; /* first child */
    struct fe_xml_node *next;  /* next sibling */
};

/* ---- reading ---- */

/* Initialises libxml2 once per process (thread-safe; fe_xml_parse calls
 * it too) and installs a loader that refuses every external resource. */
void fe_xml_init(void);

/* Parses one well-formed, namespace-well-formed document (XML 1.0 with
 * namespaces; any encoding libxml2 knows, text returned as UTF-8): one
 * root element; comments and processing instructions are skipped; the
 * five predefined entities, character references and CDATA are decoded.
 * A DOCTYPE, a NUL byte, mismatched tags, bad characters, more than
 * FE_XML_DEPTH_MAX levels, FE_XML_NODES_MAX elements or FE_XML_ATTRS_MAX
 * attributes on one element -> RT_EXML. On 0 *root is the caller's
 * (fe_xml_free); on error *root is NULL. */
int fe_xml_parse(const char *buf, size_t n, struct fe_xml_node **root);
/* Frees @node, its children and its following siblings. NULL is fine. */
void fe_xml_free(struct fe_xml_node *node);

/* The value of attribute @name in namespace @ns (NULL: no namespace) of
 * @n, or NULL. Borrowed from the tree. */
const char *fe_xml_attr(const struct fe_xml_node *n,
                        const char *ns,
                        const char *name);

/* XML white space (space, tab, CR, LF)? 1 or 0. */
int fe_xml_is_space(char c);

/* The only child of @n called @name: 0 (none, *out NULL), 1 (found), -1
 * (more than one: malformed). */
int fe_xml_child(const struct fe_xml_node *n,
                 const char *name,
                 const struct fe_xml_node **out);
/* The same for a child that is required when @req: 0 (absent and not
 * required, *out NULL), 1 (found), -1 (repeated, or absent and required). */
int fe_xml_child_req(const struct fe_xml_node *n,
                     const char *name,
                     int req,
                     const struct fe_xml_node **out);
/* The text of @n without leading and trailing white space, into @buf (@cap
 * bytes, NUL-terminated). 0, or -1 when it does not fit. */
int fe_xml_text(const struct fe_xml_node *n, char *buf, size_t cap);
/* The same text, malloc'd (the caller frees it). */
char *fe_xml_text_dup(const struct fe_xml_node *n);
/* A boolean child "true"/"false" (any case) of @n called @name, required
 * when @req: 0 with *v set (0 when absent and not required), or -1
 * (missing, repeated or not a boolean). */
int fe_xml_bool(const struct fe_xml_node *n, const char *name, int req, int *v);
/* An unsigned decimal child of @n called @name, at most @max: 0 (absent),
 * 1 (*v set), -1 (repeated, empty, not digits or above @max). */
int fe_xml_uint(const struct fe_xml_node *n,
                const char *name,
                uint32_t max,
                uint32_t *v);

/* ---- writing ---- */

/* Appends the NUL-terminated @s with the five XML special characters
 * escaped and control characters as &#xN; (element content and attribute
 * values alike). */
void fe_xml_escape(struct rt_buf *out, const char *s);
/* Appends <@name>true</@name> or false. */
void fe_xml_write_bool(struct rt_buf *out, const char *name, int v);
/* Appends <@name>@v escaped</@name>; NULL @v is written as "". */
void fe_xml_write_str(struct rt_buf *out, const char *name, const char *v);

#endif
