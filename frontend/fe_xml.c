/* XML reader and writer helpers: see fe_xml.h.
 *
 * The reader is a recursive descent over the bytes: fe__xelement reads one
 * element with its attributes, content and end tag, and recurses for child
 * elements; fe__xmisc skips what may stand between top-level items. Every
 * limit (depth, element count, character references) is checked as the
 * bytes are read, and anything malformed ends the parse with RT_EXML. */
#include "fe_xml.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "rt_alloc.h"
#include "rt_err.h"
#include "rt_text.h"
#include "rt_utf8.h"

struct fe__xp
{
    const char *p;
    const char *end;
    int nodes;
};

int fe_xml_is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

static void fe__xskip_ws(struct fe__xp *x)
{
    while (x->p < x->end && fe_xml_is_space(*x->p)) {
        x->p++;
    }
}

static int fe__xstarts(const struct fe__xp *x, const char *s)
{
    size_t n = strlen(s);
    return (size_t)(x->end - x->p) >= n && memcmp(x->p, s, n) == 0;
}

/* Skips to just after @term; -1 when it never comes. */
static int fe__xskip_past(struct fe__xp *x, const char *term)
{
    size_t n = strlen(term);
    while ((size_t)(x->end - x->p) >= n) {
        if (memcmp(x->p, term, n) == 0) {
            x->p += n;
            return 0;
        }
        x->p++;
    }
    return -1;
}

static int fe__xname_char(unsigned char c, int first)
{
    if (isalpha(c) || c == '_' || c == ':' || c >= 0x80) {
        return 1;
    }
    return !first && (isdigit(c) || c == '-' || c == '.');
}

/* Reads a name; returns its length (0 = none). */
static size_t fe__xname(struct fe__xp *x, const char **start)
{
    const char *s = x->p;
    if (s >= x->end || !fe__xname_char((unsigned char)*s, 1)) {
        return 0;
    }
    while (x->p < x->end && fe__xname_char((unsigned char)*x->p, 0)) {
        x->p++;
    }
    *start = s;
    return (size_t)(x->p - s);
}

/* At '&': decodes one reference into @b. */
static int fe__xentity(struct fe__xp *x, struct rt_buf *b)
{
    static const struct
    {
        const char *name;
        char c;
    } named[] = {{"lt;", '<'},
                 {"gt;", '>'},
                 {"amp;", '&'},
                 {"quot;", '"'},
                 {"apos;", '\''}};
    x->p++;
    if (x->p < x->end && *x->p == '#') {
        unsigned long cp = 0;
        int hex = 0, digits = 0;
        x->p++;
        if (x->p < x->end && *x->p == 'x') {
            hex = 1;
            x->p++;
        }
        while (x->p < x->end && *x->p != ';') {
            int d;
            char c = *x->p;
            d = hex ? rt_hexval(c) : isdigit((unsigned char)c) ? c - '0' : -1;
            if (d < 0) {
                return -1;
            }
            cp = cp * (hex ? 16 : 10) + (unsigned long)d;
            if (cp > 0x10ffff || ++digits > 8) {
                return -1;
            }
            x->p++;
        }
        if (x->p >= x->end || digits == 0 || cp == 0 ||
            (cp >= 0xd800 && cp <= 0xdfff)) {
            return -1;
        }
        x->p++;
        {
            uint8_t *q = rt_buf_reserve(b, 4);
            b->len += rt_utf8_encode((uint32_t)cp, q);
        }
        return 0;
    }
    for (size_t i = 0; i < sizeof(named) / sizeof(named[0]); i++) {
        if (fe__xstarts(x, named[i].name)) {
            x->p += strlen(named[i].name);
            rt_buf_append_u8(b, (uint8_t)named[i].c);
            return 0;
        }
    }
    return -1;
}

void fe_xml_free(struct fe_xml_node *node)
{
    while (node) {
        struct fe_xml_node *next = node->next;
        fe_xml_free(node->child);
        free(node->name);
        free(node->text);
        free(node);
        node = next;
    }
}

/* At '<' of a start tag. */
static int fe__xelement(struct fe__xp *x, int depth, struct fe_xml_node **out)
{
    struct fe_xml_node *n;
    struct fe_xml_node **tail;
    struct rt_buf text = RT_BUF_INIT;
    const char *name, *local;
    size_t nlen;

    if (depth > FE_XML_DEPTH_MAX || ++x->nodes > FE_XML_NODES_MAX) {
        return -1;
    }
    x->p++;
    nlen = fe__xname(x, &name);
    if (!nlen) {
        return -1;
    }
    n = rt_xcalloc(1, sizeof(*n));
    local = memchr(name, ':', nlen);
    local = local ? local + 1 : name;
    n->name = rt_xmalloc(nlen - (size_t)(local - name) + 1);
    memcpy(n->name, local, nlen - (size_t)(local - name));
    n->name[nlen - (size_t)(local - name)] = '\0';
    tail = &n->child;
    /* Attributes: checked, ignored. */
    for (;;) {
        const char *an;
        int had_ws = x->p < x->end && fe_xml_is_space(*x->p);
        char q;
        fe__xskip_ws(x);
        if (x->p >= x->end) {
            goto err;
        }
        if (*x->p == '/' || *x->p == '>') {
            break;
        }
        if (!had_ws || !fe__xname(x, &an)) {
            goto err;
        }
        fe__xskip_ws(x);
        if (x->p >= x->end || *x->p != '=') {
            goto err;
        }
        x->p++;
        fe__xskip_ws(x);
        if (x->p >= x->end || (*x->p != '"' && *x->p != '\'')) {
            goto err;
        }
        q = *x->p++;
        while (x->p < x->end && *x->p != q) {
            if (*x->p == '<') {
                goto err;
            }
            x->p++;
        }
        if (x->p >= x->end) {
            goto err;
        }
        x->p++;
    }
    if (*x->p == '/') {
        x->p++;
        if (x->p >= x->end || *x->p != '>') {
            goto err;
        }
        x->p++;
        n->text = rt_xstrdup("");
        *out = n;
        return 0;
    }
    x->p++; /* '>' */
    for (;;) {
        if (x->p >= x->end) {
            goto err;
        }
        if (fe__xstarts(x, "</")) {
            const char *en;
            size_t elen;
            x->p += 2;
            elen = fe__xname(x, &en);
            if (elen != nlen || memcmp(en, name, nlen) != 0) {
                goto err;
            }
            fe__xskip_ws(x);
            if (x->p >= x->end || *x->p != '>') {
                goto err;
            }
            x->p++;
            break;
        }
        if (fe__xstarts(x, "<!--")) {
            if (fe__xskip_past(x, "-->") != 0) {
                goto err;
            }
            continue;
        }
        if (fe__xstarts(x, "<![CDATA[")) {
            const char *s;
            x->p += 9;
            s = x->p;
            if (fe__xskip_past(x, "]]>") != 0) {
                goto err;
            }
            rt_buf_append(&text, s, (size_t)(x->p - 3 - s));
            continue;
        }
        if (fe__xstarts(x, "<?")) {
            if (fe__xskip_past(x, "?>") != 0) {
                goto err;
            }
            continue;
        }
        if (*x->p == '<') {
            struct fe_xml_node *c = NULL;
            if (fe__xelement(x, depth + 1, &c) != 0) {
                fe_xml_free(c);
                goto err;
            }
            *tail = c;
            tail = &c->next;
            continue;
        }
        if (*x->p == '&') {
            if (fe__xentity(x, &text) != 0) {
                goto err;
            }
            continue;
        }
        if ((unsigned char)*x->p < 0x20 && !fe_xml_is_space(*x->p)) {
            goto err;
        }
        rt_buf_append_u8(&text, (uint8_t)*x->p++);
    }
    n->text = rt_xstrdup(rt_buf_cstr(&text));
    if (strlen(n->text) != text.len) {
        goto err; /* NUL via CDATA */
    }
    rt_buf_free(&text);
    *out = n;
    return 0;

err:
    rt_buf_free(&text);
    fe_xml_free(n);
    return -1;
}

/* Whitespace, comments and processing instructions between top-level
 * items. DOCTYPE is refused (no entity definitions, no expansion). */
static int fe__xmisc(struct fe__xp *x)
{
    for (;;) {
        fe__xskip_ws(x);
        if (fe__xstarts(x, "<?")) {
            if (fe__xskip_past(x, "?>") != 0) {
                return -1;
            }
        } else if (fe__xstarts(x, "<!--")) {
            if (fe__xskip_past(x, "-->") != 0) {
                return -1;
            }
        } else if (fe__xstarts(x, "<!")) {
            return -1;
        } else {
            return 0;
        }
    }
}

int fe_xml_parse(const char *buf, size_t n, struct fe_xml_node **root)
{
    struct fe__xp x = {buf, buf + n, 0};
    *root = NULL;
    if (n >= 3 && memcmp(buf, "\xef\xbb\xbf", 3) == 0) {
        x.p += 3;
    }
    if (memchr(buf, '\0', n)) {
        return RT_EXML;
    }
    if (fe__xmisc(&x) != 0 || x.p >= x.end || *x.p != '<' ||
        fe__xelement(&x, 1, root) != 0) {
        fe_xml_free(*root);
        *root = NULL;
        return RT_EXML;
    }
    if (fe__xmisc(&x) != 0 || x.p != x.end) {
        fe_xml_free(*root);
        *root = NULL;
        return RT_EXML;
    }
    return 0;
}

/* ---- helpers over the tree ---- */

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
                rt_buf_append_u8(out, (uint8_t)*s);
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
