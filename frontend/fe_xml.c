/* XML reader and writer helpers: see fe_xml.h.
 *
 * The reader is libxml2 (README: why libxml2). fe_xml_parse makes one
 * parser context per call, refuses a DOCTYPE from the SAX callback that
 * sees it before any declaration in it is read (so no entity is ever
 * defined: no expansion, no amplification, no external entity), lets
 * libxml2 build its DOM with its default (non-huge) limits and no network,
 * then copies that DOM into our own tree, checking our limits (depth,
 * element count) on the way. A linear pre-scan (fe__xprescan) applies the
 * same limits, and one on attributes per tag, before libxml2 runs, where
 * libxml2 2.9.14 is quadratic or builds a DOM of any size. Errors are collected
 * silently in the context: nothing is printed, the caller gets RT_EXML. */
#include "fe_xml.h"

#include <ctype.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <libxml/parser.h>
#include <libxml/parserInternals.h>
#include <libxml/tree.h>
#include <libxml/xmlerror.h>

#include "rt_alloc.h"
#include "rt_buf.h"
#include "rt_err.h"

int fe_xml_is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

/* No document we read names an external resource that should be fetched:
 * every load is refused, whatever asks for it. */
static xmlParserInputPtr fe__xno_load(const char *url,
                                      const char *id,
                                      xmlParserCtxtPtr ctxt)
{
    (void)url;
    (void)id;
    (void)ctxt;
    return NULL;
}

static pthread_once_t fe__xonce = PTHREAD_ONCE_INIT;

static void fe__xinit_once(void)
{
    xmlInitParser();
    xmlSetExternalEntityLoader(fe__xno_load);
}

void fe_xml_init(void)
{
    pthread_once(&fe__xonce, fe__xinit_once);
}

/* Per-context error sink: errors are counted by libxml2 in the context
 * (wellFormed, nsWellFormed); nothing goes to stderr, where a client's
 * body could otherwise end up in our logs. */
static void fe__xerr(void *data, xmlErrorPtr err)
{
    (void)data;
    (void)err;
}

/* <!DOCTYPE: called once the name and external id are read and before the
 * internal subset is, so stopping here means no entity is ever declared. */
static void fe__xdoctype(void *data,
                         const xmlChar *name,
                         const xmlChar *ext_id,
                         const xmlChar *sys_id)
{
    xmlParserCtxtPtr ctxt = data;
    (void)name;
    (void)ext_id;
    (void)sys_id;
    ctxt->wellFormed = 0;
    xmlStopParser(ctxt);
}

void fe_xml_free(struct fe_xml_node *node)
{
    while (node) {
        struct fe_xml_node *next = node->next;
        fe_xml_free(node->child);
        while (node->attr) {
            struct fe_xml_attr *a = node->attr;
            node->attr = a->next;
            free(a->name);
            free(a->ns);
            free(a->value);
            free(a);
        }
        free(node->name);
        free(node->ns);
        free(node->text);
        free(node);
        node = next;
    }
}

struct fe__xcopy
{
    int nodes;
};

static char *fe__xdup(const xmlChar *s)
{
    return s ? rt_xstrdup((const char *)s) : NULL;
}

/* Copies element @e (and its subtree) into *out. */
static int fe__xcopy_el(struct fe__xcopy *c,
                        xmlNodePtr e,
                        int depth,
                        struct fe_xml_node **out)
{
    struct fe_xml_node *n;
    struct fe_xml_node **tail;
    struct fe_xml_attr **atail;
    struct rt_buf text = RT_BUF_INIT;

    if (depth > FE_XML_DEPTH_MAX || ++c->nodes > FE_XML_NODES_MAX) {
        return -1;
    }
    n = rt_xcalloc(1, sizeof(*n));
    *out = n;
    n->name = fe__xdup(e->name);
    n->ns = e->ns && e->ns->href ? fe__xdup(e->ns->href) : NULL;
    atail = &n->attr;
    for (xmlAttrPtr a = e->properties; a; a = a->next) {
        struct fe_xml_attr *fa = rt_xcalloc(1, sizeof(*fa));
        xmlChar *v = xmlNodeListGetString(e->doc, a->children, 1);
        fa->name = fe__xdup(a->name);
        fa->ns = a->ns && a->ns->href ? fe__xdup(a->ns->href) : NULL;
        fa->value = rt_xstrdup(v ? (const char *)v : "");
        xmlFree(v);
        *atail = fa;
        atail = &fa->next;
    }
    tail = &n->child;
    for (xmlNodePtr k = e->children; k; k = k->next) {
        switch (k->type) {
            case XML_ELEMENT_NODE:
                if (fe__xcopy_el(c, k, depth + 1, tail) != 0) {
                    rt_buf_free(&text);
                    return -1;
                }
                tail = &(*tail)->next;
                break;
            case XML_TEXT_NODE:
            case XML_CDATA_SECTION_NODE:
                if (k->content) {
                    rt_buf_append_str(&text, (const char *)k->content);
                }
                break;
            case XML_COMMENT_NODE:
            case XML_PI_NODE:
                break;
            default:
                /* entity references and anything else a document without
                 * a DTD cannot hold */
                rt_buf_free(&text);
                return -1;
        }
    }
    n->text = rt_xstrdup(rt_buf_cstr(&text));
    rt_buf_free(&text);
    return 0;
}

/* Skips past @term from @p; NULL when it never comes. */
static const char *fe__xpast(const char *p, const char *end, const char *term)
{
    size_t tn = strlen(term);
    for (; (size_t)(end - p) >= tn; p++) {
        if (memcmp(p, term, tn) == 0) {
            return p + tn;
        }
    }
    return NULL;
}

/* A linear look at the bytes before libxml2 sees them, for the limits
 * libxml2 2.9.14 would only reach the expensive way: its duplicate check
 * of attributes (and namespace declarations) in one start tag is
 * quadratic (a 2 MB tag of 200k attributes takes minutes), and it builds
 * the whole DOM before our copy counts elements. Counts start tags,
 * their depth and each tag's '=' outside quoted values; skips comments,
 * CDATA and processing instructions. A DOCTYPE (or anything "<!" that is
 * neither) is refused here too. Anything this cannot follow (an
 * unterminated construct) is left to libxml2, which refuses it.
 * 0 or -1 (over a limit). */
static int fe__xprescan(const char *p, size_t n)
{
    const char *end = p + n;
    int depth = 0, elements = 0;
    while (p && p < end) {
        const char *q;
        int attrs = 0, close;
        if (*p != '<') {
            p++;
            continue;
        }
        if ((size_t)(end - p) >= 4 && memcmp(p, "<!--", 4) == 0) {
            p = fe__xpast(p + 4, end, "-->");
            continue;
        }
        if ((size_t)(end - p) >= 9 && memcmp(p, "<![CDATA[", 9) == 0) {
            p = fe__xpast(p + 9, end, "]]>");
            continue;
        }
        if ((size_t)(end - p) >= 2 && p[1] == '?') {
            p = fe__xpast(p + 2, end, "?>");
            continue;
        }
        if ((size_t)(end - p) >= 2 && p[1] == '!') {
            return -1; /* DOCTYPE */
        }
        close = (size_t)(end - p) >= 2 && p[1] == '/';
        for (q = p + 1; q < end && *q != '>'; q++) {
            if (*q == '"' || *q == '\'') {
                const char *e = memchr(q + 1, *q, (size_t)(end - q - 1));
                if (!e) {
                    return 0;
                }
                q = e;
            } else if (*q == '=' && ++attrs > FE_XML_ATTRS_MAX) {
                return -1;
            }
        }
        if (q >= end) {
            return 0;
        }
        if (close) {
            depth--;
        } else {
            if (++elements > FE_XML_NODES_MAX || depth + 1 > FE_XML_DEPTH_MAX) {
                return -1;
            }
            if (q[-1] != '/') {
                depth++;
            }
        }
        p = q + 1;
    }
    return 0;
}

int fe_xml_parse(const char *buf, size_t n, struct fe_xml_node **root)
{
    xmlParserCtxtPtr ctxt;
    xmlDocPtr doc;
    xmlNodePtr top;
    struct fe__xcopy c = {0};
    int ok;

    *root = NULL;
    if (n == 0 || n > (size_t)INT32_MAX || memchr(buf, '\0', n) ||
        fe__xprescan(buf, n) != 0) {
        return RT_EXML;
    }
    fe_xml_init();
    ctxt = xmlCreateMemoryParserCtxt(buf, (int)n);
    if (!ctxt) {
        return RT_EXML;
    }
    ctxt->sax->internalSubset = fe__xdoctype;
    ctxt->sax->externalSubset = NULL;
    ctxt->sax->serror = fe__xerr;
    ctxt->sax->error = NULL;
    ctxt->sax->warning = NULL;
    ctxt->sax->fatalError = NULL;
    /* No XML_PARSE_NOENT (no substitution), no DTDLOAD/DTDATTR, no HUGE
     * (libxml2's own limits on depth, name and text lengths stay on). */
    xmlCtxtUseOptions(ctxt, XML_PARSE_NONET | XML_PARSE_NOCDATA |
                                XML_PARSE_NOERROR | XML_PARSE_NOWARNING);
    xmlParseDocument(ctxt);
    doc = ctxt->myDoc;
    ok = ctxt->wellFormed && ctxt->nsWellFormed && doc && !doc->intSubset &&
         !doc->extSubset;
    top = ok ? xmlDocGetRootElement(doc) : NULL;
    if (!top || fe__xcopy_el(&c, top, 1, root) != 0) {
        fe_xml_free(*root);
        *root = NULL;
    }
    if (doc) {
        xmlFreeDoc(doc);
    }
    xmlFreeParserCtxt(ctxt);
    return *root ? 0 : RT_EXML;
}

/* ---- helpers over the tree ---- */

const char *fe_xml_attr(const struct fe_xml_node *n,
                        const char *ns,
                        const char *name)
{
    for (const struct fe_xml_attr *a = n->attr; a; a = a->next) {
        if (strcmp(a->name, name) == 0 &&
            (ns ? a->ns && strcmp(a->ns, ns) == 0 : !a->ns)) {
            return a->value;
        }
    }
    return NULL;
}

/* The only child called @name: 0 (none, *out NULL), 1 (found), -1 (more
 * than one: malformed). */
int fe_xml_child(const struct fe_xml_node *n,
                 const char *name,
                 const struct fe_xml_node **out)
{
    int count = 0;
    *out = NULL;
    for (const struct fe_xml_node *c = n->child; c; c = c->next) {
        if (strcmp(c->name, name) == 0) {
            *out = c;
            count++;
        }
    }
    return count > 1 ? -1 : count;
}

int fe_xml_child_req(const struct fe_xml_node *n,
                     const char *name,
                     int req,
                     const struct fe_xml_node **out)
{
    int k = fe_xml_child(n, name, out);
    return k < 0 || (k == 0 && req) ? -1 : k;
}

/* Trimmed text of @n into @buf (cap bytes). -1 when it does not fit. */
int fe_xml_text(const struct fe_xml_node *n, char *buf, size_t cap)
{
    const char *s = n->text;
    size_t len;
    while (fe_xml_is_space(*s)) {
        s++;
    }
    len = strlen(s);
    while (len && fe_xml_is_space(s[len - 1])) {
        len--;
    }
    if (len >= cap) {
        return -1;
    }
    memcpy(buf, s, len);
    buf[len] = '\0';
    return 0;
}

/* Trimmed text, malloc'd. */
char *fe_xml_text_dup(const struct fe_xml_node *n)
{
    size_t cap = strlen(n->text) + 1;
    char *buf = rt_xmalloc(cap);
    fe_xml_text(n, buf, cap);
    return buf;
}

/* Required (@req) boolean child: -1 malformed/missing, else 0 with *v. */
int fe_xml_bool(const struct fe_xml_node *n, const char *name, int req, int *v)
{
    const struct fe_xml_node *c;
    char buf[8];
    int k = fe_xml_child_req(n, name, req, &c);
    if (k < 0) {
        return -1;
    }
    if (k == 0) {
        *v = 0;
        return 0;
    }
    if (fe_xml_text(c, buf, sizeof(buf)) != 0) {
        return -1;
    }
    if (strcasecmp(buf, "true") == 0) {
        *v = 1;
    } else if (strcasecmp(buf, "false") == 0) {
        *v = 0;
    } else {
        return -1;
    }
    return 0;
}

/* Unsigned integer child: 0 (absent, *present 0), 1 (*v set), -1. */
int fe_xml_uint(const struct fe_xml_node *n,
                const char *name,
                uint32_t max,
                uint32_t *v)
{
    const struct fe_xml_node *c;
    char buf[16];
    unsigned long x = 0;
    int k = fe_xml_child(n, name, &c);
    if (k <= 0) {
        return k;
    }
    if (fe_xml_text(c, buf, sizeof(buf)) != 0 || !buf[0]) {
        return -1;
    }
    for (const char *p = buf; *p; p++) {
        if (!isdigit((unsigned char)*p)) {
            return -1;
        }
        x = x * 10 + (unsigned long)(*p - '0');
        if (x > max) {
            return -1;
        }
    }
    *v = (uint32_t)x;
    return 1;
}

/* ---- writing ---- */

void fe_xml_escape(struct rt_buf *out, const char *s)
{
    for (; *s; s++) {
        switch (*s) {
            case '<':
                rt_buf_append_str(out, "&lt;");
                break;
            case '>':
                rt_buf_append_str(out, "&gt;");
                break;
            case '&':
                rt_buf_append_str(out, "&amp;");
                break;
            case '"':
                rt_buf_append_str(out, "&quot;");
                break;
            case '\'':
                rt_buf_append_str(out, "&apos;");
                break;
            default:
                /* Control characters as references, so CR, LF and tab
                 * survive a parser's end-of-line and attribute-value
                 * normalisation; the other C0 controls cannot be carried
                 * by XML 1.0 at all (frontend/README.md, AtomPub). */
                if ((unsigned char)*s < 0x20) {
                    rt_buf_printf(out, "&#x%X;", (unsigned)(unsigned char)*s);
                } else {
                    rt_buf_append_u8(out, (uint8_t)*s);
                }
        }
    }
}

void fe_xml_write_bool(struct rt_buf *out, const char *name, int v)
{
    rt_buf_printf(out, "<%s>%s</%s>", name, v ? "true" : "false", name);
}

void fe_xml_write_str(struct rt_buf *out, const char *name, const char *v)
{
    rt_buf_printf(out, "<%s>", name);
    fe_xml_escape(out, v ? v : "");
    rt_buf_printf(out, "</%s>", name);
}
