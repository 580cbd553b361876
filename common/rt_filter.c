/* OData $filter: parser, binary codec, evaluator, key bounds (see
 * rt_filter.h for the grammar, the semantics and the binary format).
 *
 * Representation: up to 15 comparisons in a fixed array, each with its
 * literal pre-converted (numeric literals carry both an int64 and a double
 * view, strings/binary own their bytes), plus a tree of nodes in a flat
 * array (leaf = comparison index, not, binary and/or). Properties other
 * than PartitionKey/RowKey/Timestamp get a "slot": eval fills the slots in
 * one pass over the blob, lazily (only if the tree reaches a comparison on
 * a blob property), then evaluates the tree with short-circuiting.
 *
 * Failure modes: parse errors return RT_EINVAL with errmsg filled and free
 * everything built so far; decode returns RT_ECORRUPT on any inconsistency;
 * eval returns RT_ECORRUPT only when the blob is malformed. */
#include "rt_filter.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt_entity.h"
#include "rt_err.h"
#include "rt_text.h"
#include "rt_time.h"
#include "rt_utf8.h"

/* ------------------------------------------------------------------ */
/* Representation */

enum rt__fkind {
    RT__FN_CMP = 0,
    RT__FN_NOT = 1,
    RT__FN_AND = 2,
    RT__FN_OR = 3,
};

struct rt__fnode
{
    uint8_t kind;
    uint8_t cmp; /* RT__FN_CMP: comparison index */
    uint16_t l;  /* NOT: operand; AND/OR: left */
    uint16_t r;  /* AND/OR: right */
};

enum rt__fprop {
    RT__FP_USER = 0,
    RT__FP_PK = 1,
    RT__FP_RK = 2,
    RT__FP_TS = 3,
};

enum rt__fnum {
    RT__NUM_NONE = 0,
    RT__NUM_INT = 1, /* literal value in .i */
    RT__NUM_DBL = 2, /* literal value in .d */
};

/* A literal (also the parser's operand/token payload). */
struct rt__flit
{
    enum rt_edm type;
    int64_t i;      /* INT32, INT64 */
    double d;       /* DOUBLE */
    uint64_t ticks; /* DATETIME */
    int b;          /* BOOL */
    uint8_t guid[16];
    uint8_t *bytes; /* STRING/BINARY, owned (may be NULL when nbytes 0) */
    size_t nbytes;
};

struct rt__fcmp
{
    uint8_t op;   /* enum rt_filter_op */
    uint8_t prop; /* enum rt__fprop */
    uint8_t slot; /* RT__FP_USER: index into the slot table */
    uint8_t num;  /* enum rt__fnum */
    char *name;   /* owned, NUL-terminated for convenience */
    size_t name_len;
    struct rt__flit lit;
};

struct rt_filter
{
    unsigned ncmp;
    unsigned nslots;
    unsigned nnodes;
    unsigned root;
    struct rt__fcmp cmp[RT_FILTER_MAX_COMPARISONS];
    /* slot -> name (borrowed from the first comparison using it) */
    const char *slot_name[RT_FILTER_MAX_COMPARISONS];
    size_t slot_len[RT_FILTER_MAX_COMPARISONS];
    struct rt__fnode *nodes; /* owned */
    unsigned nodes_cap;
};

/* A boolean literal used as a term (`$filter=true`, `X and false`) is
 * folded away while parsing: these two node indexes stand for the constant
 * and never reach f->nodes, so the tree, its binary form and the
 * partition servers only ever see comparisons. */
#define RT__K_FALSE (RT_FILTER_MAX_NODES + 1u)
#define RT__K_TRUE (RT_FILTER_MAX_NODES + 2u)
#define RT__IS_K(n) ((n) >= RT__K_FALSE)

/* Comparison outcomes besides -1/0/1. */
#define RT__UNORD 2    /* NaN involved */
#define RT__MISMATCH 3 /* incomparable types */

static void rt__flit_free(struct rt__flit *l)
{
    free(l->bytes);
    l->bytes = NULL;
    l->nbytes = 0;
}

void rt_filter_free(struct rt_filter *f)
{
    if (f == NULL) {
        return;
    }
    for (unsigned i = 0; i < f->ncmp; i++) {
        free(f->cmp[i].name);
        rt__flit_free(&f->cmp[i].lit);
    }
    free(f->nodes);
    free(f);
}

static int rt__node_add(struct rt_filter *f,
                        uint8_t kind,
                        unsigned cmp,
                        unsigned l,
                        unsigned r,
                        unsigned *idx)
{
    if (f->nnodes >= RT_FILTER_MAX_NODES) {
        return RT_EINVAL;
    }
    if (f->nnodes == f->nodes_cap) {
        unsigned cap = f->nodes_cap ? f->nodes_cap * 2 : 16;
        struct rt__fnode *n = realloc(f->nodes, cap * sizeof(*n));
        if (n == NULL) {
            return RT_ENOMEM;
        }
        f->nodes = n;
        f->nodes_cap = cap;
    }
    struct rt__fnode *n = &f->nodes[f->nnodes];
    n->kind = kind;
    n->cmp = (uint8_t)cmp;
    n->l = (uint16_t)l;
    n->r = (uint16_t)r;
    *idx = f->nnodes++;
    return 0;
}

/* Resolves key properties, slots and numeric classes of comparison @i
 * (shared by parse and decode). */
static void rt__cmp_finish(struct rt_filter *f, unsigned i)
{
    struct rt__fcmp *c = &f->cmp[i];

    c->prop = RT__FP_USER;
    if (c->name_len == 12 && memcmp(c->name, "PartitionKey", 12) == 0) {
        c->prop = RT__FP_PK;
    } else if (c->name_len == 6 && memcmp(c->name, "RowKey", 6) == 0) {
        c->prop = RT__FP_RK;
    } else if (c->name_len == 9 && memcmp(c->name, "Timestamp", 9) == 0) {
        c->prop = RT__FP_TS;
    }
    if (c->prop == RT__FP_USER) {
        unsigned s;
        for (s = 0; s < f->nslots; s++) {
            if (f->slot_len[s] == c->name_len &&
                memcmp(f->slot_name[s], c->name, c->name_len) == 0) {
                break;
            }
        }
        if (s == f->nslots) {
            f->slot_name[s] = c->name;
            f->slot_len[s] = c->name_len;
            f->nslots++;
        }
        c->slot = (uint8_t)s;
    }
    switch (c->lit.type) {
        case RT_EDM_INT32:
        case RT_EDM_INT64:
            c->num = RT__NUM_INT;
            c->lit.d = (double)c->lit.i;
            break;
        case RT_EDM_DOUBLE:
            c->num = RT__NUM_DBL;
            break;
        default:
            c->num = RT__NUM_NONE;
            break;
    }
}

/* ------------------------------------------------------------------ */
/* Lexer */

enum rt__ftok {
    RT__T_END,
    RT__T_LPAREN,
    RT__T_RPAREN,
    RT__T_IDENT,
    RT__T_LIT,
    RT__T_AND,
    RT__T_OR,
    RT__T_NOT,
    RT__T_OP,
};

struct rt__fparser
{
    const char *s;
    size_t n;
    size_t pos; /* next unread byte */
    char *errmsg;
    struct rt_filter *f;
    unsigned nesting;
    /* current token */
    enum rt__ftok tok;
    size_t tpos, tlen;
    enum rt_filter_op top; /* RT__T_OP */
    struct rt__flit lit;   /* RT__T_LIT; bytes owned by the token */
};

static void rt__perr(struct rt__fparser *p, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void rt__perr(struct rt__fparser *p, const char *fmt, ...)
{
    va_list ap;
    if (p->errmsg == NULL) {
        return;
    }
    va_start(ap, fmt);
    vsnprintf(p->errmsg, RT_ERRMSG_SIZE, fmt, ap);
    va_end(ap);
}

/* Quoted token text for messages, at most 40 bytes of it. */
#define RT__TOKFMT "'%.*s'"
#define RT__TOKARG(p) (int)((p)->tlen > 40 ? 40 : (p)->tlen), (p)->s + (p)->tpos

static int rt__is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

static int rt__is_digit(char c)
{
    return c >= '0' && c <= '9';
}

static int rt__is_ident_start(char c)
{
    unsigned char u = (unsigned char)c;
    return (u >= 'A' && u <= 'Z') || (u >= 'a' && u <= 'z') || u == '_' ||
           u >= 0x80;
}

static int rt__is_ident(char c)
{
    return rt__is_ident_start(c) || rt__is_digit(c);
}

static int rt__word_is(const char *s, size_t n, const char *kw)
{
    size_t k = strlen(kw);
    if (n != k) {
        return 0;
    }
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (c >= 'A' && c <= 'Z') {
            c = (char)(c - 'A' + 'a');
        }
        if (c != kw[i]) {
            return 0;
        }
    }
    return 1;
}

/* Reads a quoted body starting at the opening quote p->pos; returns the
 * index of the closing quote or (size_t)-1. Quotes inside are doubled. */
static size_t rt__quote_end(const struct rt__fparser *p, size_t open)
{
    size_t i = open + 1;
    while (i < p->n) {
        if (p->s[i] == '\'') {
            if (i + 1 < p->n && p->s[i + 1] == '\'') {
                i += 2;
                continue;
            }
            return i;
        }
        i++;
    }
    return (size_t)-1;
}

static int rt__lex_string(struct rt__fparser *p)
{
    size_t open = p->pos;
    size_t close = rt__quote_end(p, open);
    if (close == (size_t)-1) {
        rt__perr(p, "unterminated string literal at position %zu", open);
        return RT_EINVAL;
    }
    size_t cap = close - open; /* >= body length */
    uint8_t *b = malloc(cap ? cap : 1);
    if (b == NULL) {
        return RT_ENOMEM;
    }
    size_t k = 0;
    for (size_t i = open + 1; i < close; i++) {
        b[k++] = (uint8_t)p->s[i];
        if (p->s[i] == '\'') {
            i++; /* skip the doubled quote */
        }
    }
    p->lit.type = RT_EDM_STRING;
    p->lit.bytes = b;
    p->lit.nbytes = k;
    p->pos = close + 1;
    return 0;
}

/* Typed literal prefix'body' with the prefix at [start, start+plen) and
 * the quote at p->pos. */
static int rt__lex_typed(struct rt__fparser *p, size_t start, size_t plen)
{
    const char *pre = p->s + start;
    size_t open = p->pos;
    size_t close = rt__quote_end(p, open);
    if (close == (size_t)-1) {
        rt__perr(p, "unterminated literal at position %zu", start);
        return RT_EINVAL;
    }
    const char *body = p->s + open + 1;
    size_t bn = close - open - 1;
    int bl = bn > 64 ? 64 : (int)bn;

    if (rt__word_is(pre, plen, "datetime")) {
        uint64_t t;
        int rv = rt_time_parse_iso(body, bn, &t);
        if (rv != 0) {
            rt__perr(p,
                     "Unrecognized 'Edm.DateTime' literal '%.*s' at "
                     "position %zu%s",
                     bl, body, start,
                     rv == RT_EOUTOFRANGE ? " (out of range)" : "");
            return RT_EINVAL;
        }
        p->lit.type = RT_EDM_DATETIME;
        p->lit.ticks = t;
    } else if (rt__word_is(pre, plen, "guid")) {
        static const uint8_t dash[4] = {8, 13, 18, 23};
        unsigned k = 0, di = 0;
        if (bn != 36) {
            goto bad_guid;
        }
        for (size_t i = 0; i < 36; i++) {
            if (di < 4 && i == dash[di]) {
                if (body[i] != '-') {
                    goto bad_guid;
                }
                di++;
                continue;
            }
            int hv = rt_hexval(body[i]);
            if (hv < 0) {
                goto bad_guid;
            }
            if (k % 2 == 0) {
                p->lit.guid[k / 2] = (uint8_t)(hv << 4);
            } else {
                p->lit.guid[k / 2] |= (uint8_t)hv;
            }
            k++;
        }
        p->lit.type = RT_EDM_GUID;
    } else if (rt__word_is(pre, plen, "x") ||
               rt__word_is(pre, plen, "binary")) {
        if (bn % 2 != 0) {
            rt__perr(p,
                     "Unrecognized 'Edm.Binary' literal '%.*s' at position "
                     "%zu (odd number of hex digits)",
                     bl, body, start);
            return RT_EINVAL;
        }
        uint8_t *b = malloc(bn / 2 ? bn / 2 : 1);
        if (b == NULL) {
            return RT_ENOMEM;
        }
        for (size_t i = 0; i < bn; i += 2) {
            int hi = rt_hexval(body[i]), lo = rt_hexval(body[i + 1]);
            if (hi < 0 || lo < 0) {
                free(b);
                rt__perr(p,
                         "Unrecognized 'Edm.Binary' literal '%.*s' at "
                         "position %zu (not hex)",
                         bl, body, start);
                return RT_EINVAL;
            }
            b[i / 2] = (uint8_t)(hi << 4 | lo);
        }
        p->lit.type = RT_EDM_BINARY;
        p->lit.bytes = b;
        p->lit.nbytes = bn / 2;
    } else {
        rt__perr(p, "unsupported literal type '%.*s' at position %zu",
                 (int)(plen > 40 ? 40 : plen), pre, start);
        return RT_EINVAL;
    }
    p->pos = close + 1;
    return 0;

bad_guid:
    rt__perr(p, "Unrecognized 'Edm.Guid' literal '%.*s' at position %zu", bl,
             body, start);
    return RT_EINVAL;
}

static int rt__lex_number(struct rt__fparser *p)
{
    size_t start = p->pos, i = p->pos;
    int neg = 0, is_dbl = 0, is_i64 = 0;
    size_t dig0, dign;

    if (p->s[i] == '-') {
        neg = 1;
        i++;
    }
    if (i + 3 <= p->n && memcmp(p->s + i, "INF", 3) == 0 &&
        (i + 3 == p->n || !rt__is_ident(p->s[i + 3]))) {
        p->lit.type = RT_EDM_DOUBLE;
        p->lit.d = neg ? -INFINITY : INFINITY;
        p->pos = i + 3;
        return 0;
    }
    dig0 = i;
    while (i < p->n && rt__is_digit(p->s[i])) {
        i++;
    }
    dign = i;
    if (dign == dig0) {
        goto bad;
    }
    if (i < p->n && p->s[i] == '.') {
        is_dbl = 1;
        i++;
        size_t f0 = i;
        while (i < p->n && rt__is_digit(p->s[i])) {
            i++;
        }
        if (i == f0) {
            goto bad;
        }
    }
    if (i < p->n && (p->s[i] == 'e' || p->s[i] == 'E')) {
        is_dbl = 1;
        i++;
        if (i < p->n && (p->s[i] == '+' || p->s[i] == '-')) {
            i++;
        }
        size_t e0 = i;
        while (i < p->n && rt__is_digit(p->s[i])) {
            i++;
        }
        if (i == e0) {
            goto bad;
        }
    }
    size_t numend = i;
    if (i < p->n && (p->s[i] == 'd' || p->s[i] == 'D')) {
        is_dbl = 1;
        i++;
    } else if (!is_dbl && i < p->n && (p->s[i] == 'L' || p->s[i] == 'l')) {
        is_i64 = 1;
        i++;
    }
    if (i < p->n && (rt__is_ident(p->s[i]) || p->s[i] == '.')) {
        while (i < p->n && (rt__is_ident(p->s[i]) || p->s[i] == '.')) {
            i++;
        }
        goto bad_at;
    }

    if (is_dbl) {
        char tmp[400];
        size_t len = numend - start;
        if (len >= sizeof(tmp)) {
            goto bad_dbl;
        }
        memcpy(tmp, p->s + start, len);
        tmp[len] = '\0';
        errno = 0;
        char *end;
        double d = strtod(tmp, &end);
        if (end != tmp + len || (errno == ERANGE && isinf(d))) {
            goto bad_dbl;
        }
        p->lit.type = RT_EDM_DOUBLE;
        p->lit.d = d;
    } else {
        /* Magnitude up to 2^63 (for INT64_MIN). */
        uint64_t v = 0;
        int over = 0;
        for (size_t k = dig0; k < dign; k++) {
            unsigned dv = (unsigned)(p->s[k] - '0');
            if (v > (UINT64_C(9223372036854775808) - dv) / 10) {
                over = 1;
                break;
            }
            v = v * 10 + dv;
        }
        uint64_t lim =
            is_i64 ? UINT64_C(9223372036854775807) : UINT64_C(2147483647);
        if (over || v > lim + (uint64_t)neg) {
            rt__perr(p, "Unrecognized 'Edm.%s' literal '%.*s' at position %zu",
                     is_i64 ? "Int64" : "Int32",
                     (int)(i - start > 40 ? 40 : i - start), p->s + start,
                     start);
            return RT_EINVAL;
        }
        int64_t sv;
        if (neg) {
            sv = v == UINT64_C(9223372036854775808) ? INT64_MIN : -(int64_t)v;
        } else {
            sv = (int64_t)v;
        }
        p->lit.type = is_i64 ? RT_EDM_INT64 : RT_EDM_INT32;
        p->lit.i = sv;
    }
    p->pos = i;
    return 0;

bad:
    while (i < p->n && (rt__is_ident(p->s[i]) || p->s[i] == '.')) {
        i++;
    }
bad_at:
    rt__perr(p, "unrecognized literal '%.*s' at position %zu",
             (int)(i - start > 40 ? 40 : i - start), p->s + start, start);
    return RT_EINVAL;
bad_dbl:
    rt__perr(p, "Unrecognized 'Edm.Double' literal '%.*s' at position %zu",
             (int)(i - start > 40 ? 40 : i - start), p->s + start, start);
    return RT_EINVAL;
}

/* Advances to the next token (frees the previous token's literal). */
static int rt__lex(struct rt__fparser *p)
{
    rt__flit_free(&p->lit);
    memset(&p->lit, 0, sizeof(p->lit));
    while (p->pos < p->n && rt__is_space(p->s[p->pos])) {
        p->pos++;
    }
    p->tpos = p->pos;
    p->tlen = 0;
    if (p->pos >= p->n) {
        p->tok = RT__T_END;
        return 0;
    }
    char c = p->s[p->pos];
    int rv = 0;
    if (c == '(') {
        p->tok = RT__T_LPAREN;
        p->pos++;
    } else if (c == ')') {
        p->tok = RT__T_RPAREN;
        p->pos++;
    } else if (c == '\'') {
        p->tok = RT__T_LIT;
        rv = rt__lex_string(p);
    } else if (rt__is_digit(c) ||
               (c == '-' && p->pos + 1 < p->n &&
                (rt__is_digit(p->s[p->pos + 1]) || p->s[p->pos + 1] == 'I'))) {
        p->tok = RT__T_LIT;
        rv = rt__lex_number(p);
    } else if (rt__is_ident_start(c)) {
        size_t start = p->pos;
        while (p->pos < p->n && rt__is_ident(p->s[p->pos])) {
            p->pos++;
        }
        const char *w = p->s + start;
        size_t wn = p->pos - start;
        int quote = p->pos < p->n && p->s[p->pos] == '\'';
        if (quote &&
            (rt__word_is(w, wn, "datetime") || rt__word_is(w, wn, "guid") ||
             rt__word_is(w, wn, "x") || rt__word_is(w, wn, "binary"))) {
            p->tok = RT__T_LIT;
            rv = rt__lex_typed(p, start, wn);
        } else if (rt__word_is(w, wn, "and")) {
            p->tok = RT__T_AND;
        } else if (rt__word_is(w, wn, "or")) {
            p->tok = RT__T_OR;
        } else if (rt__word_is(w, wn, "not")) {
            p->tok = RT__T_NOT;
        } else if (wn == 2 &&
                   (rt__word_is(w, wn, "eq") || rt__word_is(w, wn, "ne") ||
                    rt__word_is(w, wn, "gt") || rt__word_is(w, wn, "ge") ||
                    rt__word_is(w, wn, "lt") || rt__word_is(w, wn, "le"))) {
            static const char *ops[6] = {"eq", "ne", "gt", "ge", "lt", "le"};
            p->tok = RT__T_OP;
            for (int k = 0; k < 6; k++) {
                if (rt__word_is(w, wn, ops[k])) {
                    p->top = (enum rt_filter_op)k;
                }
            }
        } else if (rt__word_is(w, wn, "true") || rt__word_is(w, wn, "false")) {
            p->tok = RT__T_LIT;
            p->lit.type = RT_EDM_BOOL;
            p->lit.b = wn == 4;
        } else if (wn == 3 && memcmp(w, "NaN", 3) == 0) {
            p->tok = RT__T_LIT;
            p->lit.type = RT_EDM_DOUBLE;
            p->lit.d = NAN;
        } else if (wn == 3 && memcmp(w, "INF", 3) == 0) {
            p->tok = RT__T_LIT;
            p->lit.type = RT_EDM_DOUBLE;
            p->lit.d = INFINITY;
        } else if (quote) {
            rt__perr(p, "unsupported literal type '%.*s' at position %zu",
                     (int)(wn > 40 ? 40 : wn), w, start);
            rv = RT_EINVAL;
        } else if (rt__word_is(w, wn, "null")) {
            rt__perr(p, "the null literal is not supported (position %zu)",
                     start);
            rv = RT_EINVAL;
        } else {
            p->tok = RT__T_IDENT;
        }
    } else {
        if ((unsigned char)c < 0x20 || (unsigned char)c >= 0x7f) {
            rt__perr(p, "unexpected byte 0x%02x at position %zu",
                     (unsigned char)c, p->pos);
        } else {
            rt__perr(p, "unexpected character '%c' at position %zu", c, p->pos);
        }
        rv = RT_EINVAL;
    }
    p->tlen = p->pos - p->tpos;
    if (rv != 0) {
        rt__flit_free(&p->lit);
    }
    return rv;
}

/* ------------------------------------------------------------------ */
/* Parser */

static int rt__parse_or(struct rt__fparser *p, unsigned *node);

static const char *rt__tokname(const struct rt__fparser *p)
{
    switch (p->tok) {
        case RT__T_END:
            return "end of filter";
        case RT__T_LPAREN:
            return "'('";
        case RT__T_RPAREN:
            return "')'";
        default:
            return NULL;
    }
}

static void rt__perr_unexpected(struct rt__fparser *p, const char *expected)
{
    const char *tn = rt__tokname(p);
    if (tn != NULL) {
        rt__perr(p, "unexpected %s at position %zu; expected %s", tn, p->tpos,
                 expected);
    } else {
        rt__perr(p, "unexpected " RT__TOKFMT " at position %zu; expected %s",
                 RT__TOKARG(p), p->tpos, expected);
    }
}

static int rt__is_arith(const struct rt__fparser *p)
{
    const char *w = p->s + p->tpos;
    size_t n = p->tlen;
    return rt__word_is(w, n, "add") || rt__word_is(w, n, "sub") ||
           rt__word_is(w, n, "mul") || rt__word_is(w, n, "div") ||
           rt__word_is(w, n, "mod");
}

static enum rt_filter_op rt__flip(enum rt_filter_op op)
{
    switch (op) {
        case RT_FILTER_GT:
            return RT_FILTER_LT;
        case RT_FILTER_GE:
            return RT_FILTER_LE;
        case RT_FILTER_LT:
            return RT_FILTER_GT;
        case RT_FILTER_LE:
            return RT_FILTER_GE;
        default:
            return op;
    }
}

/* Adds a comparison (takes @lit's bytes on every path) and its leaf. */
static int rt__add_cmp_named(struct rt__fparser *p,
                             const char *name_src,
                             size_t name_pos,
                             size_t name_len,
                             enum rt_filter_op op,
                             struct rt__flit *lit,
                             unsigned *node)
{
    struct rt_filter *f = p->f;
    int rv;

    if (f->ncmp >= RT_FILTER_MAX_COMPARISONS) {
        rt__flit_free(lit);
        rt__perr(p,
                 "too many comparisons in filter (at most %d) at position "
                 "%zu",
                 RT_FILTER_MAX_COMPARISONS, name_pos);
        return RT_EINVAL;
    }
    if (name_len > RT_MAX_PROP_NAME) {
        rt__flit_free(lit);
        rt__perr(p, "property name longer than %d bytes at position %zu",
                 RT_MAX_PROP_NAME, name_pos);
        return RT_EINVAL;
    }
    char *name = malloc(name_len + 1);
    if (name == NULL) {
        rt__flit_free(lit);
        return RT_ENOMEM;
    }
    memcpy(name, name_src, name_len);
    name[name_len] = '\0';
    unsigned ci = f->ncmp++;
    struct rt__fcmp *c = &f->cmp[ci];
    memset(c, 0, sizeof(*c));
    c->op = (uint8_t)op;
    c->name = name;
    c->name_len = name_len;
    c->lit = *lit;
    memset(lit, 0, sizeof(*lit));
    rt__cmp_finish(f, ci);
    rv = rt__node_add(f, RT__FN_CMP, ci, 0, 0, node);
    if (rv == RT_EINVAL) {
        rt__perr(p, "filter is too complex");
    }
    return rv;
}

/* rt__add_cmp_named with the name at @name_pos in the filter text. */
static int rt__add_cmp(struct rt__fparser *p,
                       size_t name_pos,
                       size_t name_len,
                       enum rt_filter_op op,
                       struct rt__flit *lit,
                       unsigned *node)
{
    return rt__add_cmp_named(p, p->s + name_pos, name_pos, name_len, op, lit,
                             node);
}

static int rt__parse_unary(struct rt__fparser *p, unsigned *node);

static int rt__parse_primary(struct rt__fparser *p, unsigned *node)
{
    int rv;

    if (p->tok == RT__T_LPAREN) {
        if (++p->nesting > RT_FILTER_MAX_NESTING) {
            rt__perr(p, "filter nested too deeply (at most %d levels)",
                     RT_FILTER_MAX_NESTING);
            return RT_EINVAL;
        }
        size_t open = p->tpos;
        if ((rv = rt__lex(p)) != 0 || (rv = rt__parse_or(p, node)) != 0) {
            return rv;
        }
        if (p->tok != RT__T_RPAREN) {
            if (p->tok == RT__T_END) {
                rt__perr(p,
                         "unbalanced parentheses: '(' at position %zu is "
                         "never closed",
                         open);
            } else {
                rt__perr_unexpected(p, "')', 'and' or 'or'");
            }
            return RT_EINVAL;
        }
        p->nesting--;
        return rt__lex(p);
    }
    if (p->tok != RT__T_IDENT && p->tok != RT__T_LIT) {
        rt__perr_unexpected(p, "a comparison, 'not' or '('");
        return RT_EINVAL;
    }

    /* First operand. */
    int a_is_prop = p->tok == RT__T_IDENT;
    size_t a_pos = p->tpos, a_len = p->tlen;
    struct rt__flit a_lit = p->lit;
    memset(&p->lit, 0, sizeof(p->lit)); /* taken */
    if ((rv = rt__lex(p)) != 0) {
        goto out_free_a;
    }
    if (a_is_prop && p->tok == RT__T_LPAREN) {
        rt__perr(p, "function '%.*s' is not supported (position %zu)",
                 (int)(a_len > 40 ? 40 : a_len), p->s + a_pos, a_pos);
        rv = RT_EINVAL;
        goto out_free_a;
    }
    if (p->tok != RT__T_OP) {
        if (p->tok == RT__T_IDENT) {
            if (rt__is_arith(p)) {
                rt__perr(p,
                         "arithmetic operator " RT__TOKFMT
                         " is not supported (position %zu)",
                         RT__TOKARG(p), p->tpos);
            } else {
                rt__perr(p, "unknown operator " RT__TOKFMT " at position %zu",
                         RT__TOKARG(p), p->tpos);
            }
            rv = RT_EINVAL;
            goto out_free_a;
        }
        if (!a_is_prop && a_lit.type == RT_EDM_BOOL) {
            /* A boolean literal is a term of its own, as in Azure. */
            *node = a_lit.b ? RT__K_TRUE : RT__K_FALSE;
            return 0;
        }
        if (!a_is_prop) {
            rt__perr(p,
                     "literal at position %zu must be compared with a "
                     "property",
                     a_pos);
            rv = RT_EINVAL;
            goto out_free_a;
        }
        /* Bare boolean property: Prop eq true. */
        struct rt__flit t;
        memset(&t, 0, sizeof(t));
        t.type = RT_EDM_BOOL;
        t.b = 1;
        return rt__add_cmp(p, a_pos, a_len, RT_FILTER_EQ, &t, node);
    }

    enum rt_filter_op op = p->top;
    size_t op_pos = p->tpos;
    if ((rv = rt__lex(p)) != 0) {
        goto out_free_a;
    }
    if (p->tok != RT__T_IDENT && p->tok != RT__T_LIT) {
        rt__perr_unexpected(p, "a property or a literal after the operator");
        rv = RT_EINVAL;
        goto out_free_a;
    }
    int b_is_prop = p->tok == RT__T_IDENT;
    if (a_is_prop && b_is_prop) {
        rt__perr(p, "comparing two properties is not supported (position %zu)",
                 op_pos);
        rv = RT_EINVAL;
        goto out_free_a;
    }
    if (!a_is_prop && !b_is_prop) {
        rt__perr(p, "comparison at position %zu needs a property on one side",
                 op_pos);
        rv = RT_EINVAL;
        goto out_free_a;
    }
    if (a_is_prop) {
        struct rt__flit b_lit = p->lit;
        memset(&p->lit, 0, sizeof(p->lit));
        rv = rt__add_cmp(p, a_pos, a_len, op, &b_lit, node);
    } else {
        rv = rt__add_cmp(p, p->tpos, p->tlen, rt__flip(op), &a_lit, node);
    }
    if (rv != 0) {
        return rv;
    }
    if ((rv = rt__lex(p)) != 0) {
        return rv;
    }
    if (p->tok == RT__T_LPAREN && b_is_prop) {
        rt__perr(p, "functions are not supported (position %zu)", p->tpos);
        return RT_EINVAL;
    }
    if (p->tok == RT__T_IDENT && rt__is_arith(p)) {
        rt__perr(p,
                 "arithmetic operator " RT__TOKFMT
                 " is not supported (position %zu)",
                 RT__TOKARG(p), p->tpos);
        return RT_EINVAL;
    }
    if (p->tok == RT__T_OP) {
        rt__perr(p,
                 "chained comparison at position %zu is not supported; use "
                 "'and'",
                 p->tpos);
        return RT_EINVAL;
    }
    return 0;

out_free_a:
    rt__flit_free(&a_lit);
    return rv;
}

static int rt__parse_unary(struct rt__fparser *p, unsigned *node)
{
    int rv;
    if (p->tok == RT__T_NOT) {
        unsigned child;
        if (++p->nesting > RT_FILTER_MAX_NESTING) {
            rt__perr(p, "filter nested too deeply (at most %d levels)",
                     RT_FILTER_MAX_NESTING);
            return RT_EINVAL;
        }
        if ((rv = rt__lex(p)) != 0 || (rv = rt__parse_unary(p, &child)) != 0) {
            return rv;
        }
        p->nesting--;
        if (RT__IS_K(child)) {
            *node = child == RT__K_TRUE ? RT__K_FALSE : RT__K_TRUE;
            return 0;
        }
        rv = rt__node_add(p->f, RT__FN_NOT, 0, child, 0, node);
        if (rv == RT_EINVAL) {
            rt__perr(p, "filter is too complex");
        }
        return rv;
    }
    return rt__parse_primary(p, node);
}

static int rt__parse_and(struct rt__fparser *p, unsigned *node)
{
    int rv = rt__parse_unary(p, node);
    while (rv == 0 && p->tok == RT__T_AND) {
        unsigned r;
        if ((rv = rt__lex(p)) != 0 || (rv = rt__parse_unary(p, &r)) != 0) {
            break;
        }
        /* true and X = X; false and X = false (X's comparisons stay
         * unreferenced in f->cmp, which is harmless). */
        if (*node == RT__K_FALSE || r == RT__K_TRUE) {
            continue;
        }
        if (*node == RT__K_TRUE || r == RT__K_FALSE) {
            *node = r;
            continue;
        }
        rv = rt__node_add(p->f, RT__FN_AND, 0, *node, r, node);
        if (rv == RT_EINVAL) {
            rt__perr(p, "filter is too complex");
        }
    }
    return rv;
}

static int rt__parse_or(struct rt__fparser *p, unsigned *node)
{
    int rv = rt__parse_and(p, node);
    while (rv == 0 && p->tok == RT__T_OR) {
        unsigned r;
        if ((rv = rt__lex(p)) != 0 || (rv = rt__parse_and(p, &r)) != 0) {
            break;
        }
        /* true or X = true; false or X = X. */
        if (*node == RT__K_TRUE || r == RT__K_FALSE) {
            continue;
        }
        if (*node == RT__K_FALSE || r == RT__K_TRUE) {
            *node = r;
            continue;
        }
        rv = rt__node_add(p->f, RT__FN_OR, 0, *node, r, node);
        if (rv == RT_EINVAL) {
            rt__perr(p, "filter is too complex");
        }
    }
    return rv;
}

int rt_filter_parse(const char *text,
                    size_t n,
                    struct rt_filter **out,
                    char *errmsg)
{
    struct rt__fparser p;
    int rv;

    *out = NULL;
    if (errmsg != NULL) {
        errmsg[0] = '\0';
    }
    size_t i = 0;
    while (i < n && rt__is_space(text[i])) {
        i++;
    }
    if (i == n) {
        return 0;
    }
    memset(&p, 0, sizeof(p));
    p.s = text;
    p.n = n;
    p.errmsg = errmsg;
    p.f = calloc(1, sizeof(*p.f));
    if (p.f == NULL) {
        return RT_ENOMEM;
    }
    if ((rv = rt__lex(&p)) != 0 || (rv = rt__parse_or(&p, &p.f->root)) != 0) {
        goto err;
    }
    if (p.tok != RT__T_END) {
        if (p.tok == RT__T_RPAREN) {
            rt__perr(&p,
                     "unbalanced parentheses: unexpected ')' at position "
                     "%zu",
                     p.tpos);
        } else {
            rt__perr_unexpected(&p, "'and', 'or' or end of filter");
        }
        rv = RT_EINVAL;
        goto err;
    }
    if (p.f->root == RT__K_TRUE) {
        /* Matches every entity: the same as no filter. */
        rt_filter_free(p.f);
        return 0;
    }
    if (p.f->root == RT__K_FALSE) {
        /* Matches nothing: a key compared with a non-string literal is
         * never true, and rt_filter_bounds() reports it empty, so the
         * scan is skipped. */
        struct rt__flit never;
        memset(&never, 0, sizeof(never));
        never.type = RT_EDM_BOOL;
        rv = rt__add_cmp_named(&p, "PartitionKey", 0, 12, RT_FILTER_EQ, &never,
                               &p.f->root);
        if (rv != 0) {
            goto err;
        }
    }
    *out = p.f;
    return 0;

err:
    rt__flit_free(&p.lit);
    rt_filter_free(p.f);
    if (rv == RT_ENOMEM && errmsg != NULL) {
        rt_errmsg_printf(errmsg, "out of memory");
    }
    return rv;
}

/* ------------------------------------------------------------------ */
/* Binary form */

static void rt__enc_tree(const struct rt_filter *f,
                         unsigned idx,
                         struct rt_buf *out)
{
    const struct rt__fnode *nd = &f->nodes[idx];
    rt_buf_append_u8(out, nd->kind);
    switch (nd->kind) {
        case RT__FN_CMP:
            rt_buf_append_u8(out, nd->cmp);
            break;
        case RT__FN_NOT:
            rt__enc_tree(f, nd->l, out);
            break;
        default:
            rt__enc_tree(f, nd->l, out);
            rt__enc_tree(f, nd->r, out);
            break;
    }
}

int rt_filter_encode(const struct rt_filter *f, struct rt_buf *out)
{
    uint8_t tmp[16];

    RT_PRE(f != NULL);
    rt_buf_append_u8(out, RT_FILTER_ENC_VERSION);
    rt_buf_append_u8(out, (uint8_t)f->ncmp);
    for (unsigned i = 0; i < f->ncmp; i++) {
        const struct rt__fcmp *c = &f->cmp[i];
        rt_buf_append_u8(out, c->op);
        rt_buf_append_u8(out, (uint8_t)c->lit.type);
        rt_buf_append_u8(out, (uint8_t)c->name_len);
        rt_buf_append(out, c->name, c->name_len);
        switch (c->lit.type) {
            case RT_EDM_STRING:
            case RT_EDM_BINARY:
                rt_put_u32le(tmp, (uint32_t)c->lit.nbytes);
                rt_buf_append(out, tmp, 4);
                rt_buf_append(out, c->lit.bytes, c->lit.nbytes);
                break;
            case RT_EDM_BOOL:
                rt_buf_append_u8(out, c->lit.b ? 1 : 0);
                break;
            case RT_EDM_INT32:
                rt_put_u32le(tmp, (uint32_t)(int32_t)c->lit.i);
                rt_buf_append(out, tmp, 4);
                break;
            case RT_EDM_INT64:
                rt_put_u64le(tmp, (uint64_t)c->lit.i);
                rt_buf_append(out, tmp, 8);
                break;
            case RT_EDM_DATETIME:
                rt_put_u64le(tmp, c->lit.ticks);
                rt_buf_append(out, tmp, 8);
                break;
            case RT_EDM_DOUBLE: {
                uint64_t bits;
                memcpy(&bits, &c->lit.d, 8);
                rt_put_u64le(tmp, bits);
                rt_buf_append(out, tmp, 8);
                break;
            }
            case RT_EDM_GUID:
                rt_buf_append(out, c->lit.guid, 16);
                break;
        }
    }
    rt__enc_tree(f, f->root, out);
    return 0;
}

struct rt__fdec
{
    const uint8_t *p;
    const uint8_t *end;
    struct rt_filter *f;
};

static int rt__dec_tree(struct rt__fdec *d, unsigned depth, unsigned *node)
{
    unsigned l = 0, r = 0;
    int rv;

    if (depth > RT_FILTER_MAX_DEPTH || d->p >= d->end) {
        return RT_ECORRUPT;
    }
    uint8_t kind = *d->p++;
    switch (kind) {
        case RT__FN_CMP:
            if (d->p >= d->end || *d->p >= d->f->ncmp) {
                return RT_ECORRUPT;
            }
            l = *d->p++;
            rv = rt__node_add(d->f, RT__FN_CMP, l, 0, 0, node);
            break;
        case RT__FN_NOT:
            if ((rv = rt__dec_tree(d, depth + 1, &l)) != 0) {
                return rv;
            }
            rv = rt__node_add(d->f, RT__FN_NOT, 0, l, 0, node);
            break;
        case RT__FN_AND:
        case RT__FN_OR:
            if ((rv = rt__dec_tree(d, depth + 1, &l)) != 0 ||
                (rv = rt__dec_tree(d, depth + 1, &r)) != 0) {
                return rv;
            }
            rv = rt__node_add(d->f, kind, 0, l, r, node);
            break;
        default:
            return RT_ECORRUPT;
    }
    return rv == RT_EINVAL ? RT_ECORRUPT : rv;
}

int rt_filter_decode(const uint8_t *p, size_t n, struct rt_filter **out)
{
    struct rt__fdec d;
    struct rt_filter *f;
    int rv = RT_ECORRUPT;

    *out = NULL;
    if (n < 2 || p[0] != RT_FILTER_ENC_VERSION || p[1] == 0 ||
        p[1] > RT_FILTER_MAX_COMPARISONS) {
        return RT_ECORRUPT;
    }
    f = calloc(1, sizeof(*f));
    if (f == NULL) {
        return RT_ENOMEM;
    }
    d.p = p + 2;
    d.end = p + n;
    d.f = f;
    unsigned ncmp = p[1];
    for (unsigned i = 0; i < ncmp; i++) {
        struct rt__fcmp *c = &f->cmp[i];
        size_t left = (size_t)(d.end - d.p);
        if (left < 3) {
            goto err;
        }
        uint8_t op = d.p[0], type = d.p[1], nl = d.p[2];
        d.p += 3;
        left -= 3;
        if (op > RT_FILTER_LE || nl == 0 || left < nl) {
            goto err;
        }
        c->name = malloc((size_t)nl + 1);
        if (c->name == NULL) {
            rv = RT_ENOMEM;
            goto err;
        }
        f->ncmp = i + 1; /* from here on, rt_filter_free releases c */
        memcpy(c->name, d.p, nl);
        c->name[nl] = '\0';
        c->name_len = nl;
        c->op = op;
        d.p += nl;
        left -= nl;
        c->lit.type = (enum rt_edm)type;
        switch (type) {
            case RT_EDM_STRING:
            case RT_EDM_BINARY: {
                if (left < 4) {
                    goto err;
                }
                uint32_t len = rt_get_u32le(d.p);
                if (left - 4 < len) {
                    goto err;
                }
                c->lit.bytes = malloc(len ? len : 1);
                if (c->lit.bytes == NULL) {
                    rv = RT_ENOMEM;
                    goto err;
                }
                if (len) {
                    memcpy(c->lit.bytes, d.p + 4, len);
                }
                c->lit.nbytes = len;
                d.p += 4 + (size_t)len;
                break;
            }
            case RT_EDM_BOOL:
                if (left < 1 || d.p[0] > 1) {
                    goto err;
                }
                c->lit.b = d.p[0];
                d.p += 1;
                break;
            case RT_EDM_INT32:
                if (left < 4) {
                    goto err;
                }
                c->lit.i = (int32_t)rt_get_u32le(d.p);
                d.p += 4;
                break;
            case RT_EDM_INT64:
                if (left < 8) {
                    goto err;
                }
                c->lit.i = (int64_t)rt_get_u64le(d.p);
                d.p += 8;
                break;
            case RT_EDM_DATETIME:
                if (left < 8) {
                    goto err;
                }
                c->lit.ticks = rt_get_u64le(d.p);
                d.p += 8;
                break;
            case RT_EDM_DOUBLE: {
                if (left < 8) {
                    goto err;
                }
                uint64_t bits = rt_get_u64le(d.p);
                memcpy(&c->lit.d, &bits, 8);
                d.p += 8;
                break;
            }
            case RT_EDM_GUID:
                if (left < 16) {
                    goto err;
                }
                memcpy(c->lit.guid, d.p, 16);
                d.p += 16;
                break;
            default:
                goto err;
        }
        rt__cmp_finish(f, i);
    }
    if ((rv = rt__dec_tree(&d, 0, &f->root)) != 0) {
        goto err;
    }
    if (d.p != d.end) {
        rv = RT_ECORRUPT;
        goto err;
    }
    *out = f;
    return 0;

err:
    rt_filter_free(f);
    return rv == 0 ? RT_ECORRUPT : rv;
}

/* ------------------------------------------------------------------ */
/* Evaluation */

struct rt__fctx
{
    const struct rt_filter *f;
    const char *pk, *rk;
    size_t pklen, rklen;
    uint64_t ticks;
    const uint8_t *blob;
    size_t blob_n;
    int loaded;     /* 0 not yet, 1 done, <0 error */
    unsigned found; /* slot bitmask */
    struct rt_prop vals[RT_FILTER_MAX_COMPARISONS];
};

/* Fixed value sizes by type (0: length-prefixed, -1: unknown type). */
static const int8_t rt__vsize[9] = {-1, 0, 0, 1, 8, 8, 16, 4, 8};

/* One pass over the blob: names are compared first and only a referenced
 * property's value is decoded (through rt_props_next, which validates it);
 * others are skipped by size. Stops once every slot is filled. */
static int rt__load(struct rt__fctx *x)
{
    const struct rt_filter *f = x->f;
    unsigned all = (1u << f->nslots) - 1;
    const uint8_t *p, *end;
    unsigned remaining;

    x->loaded = RT_ECORRUPT;
    if (x->blob_n < 2) {
        return RT_ECORRUPT;
    }
    remaining = rt_get_u16le(x->blob);
    p = x->blob + 2;
    end = x->blob + x->blob_n;
    for (; remaining > 0; remaining--) {
        size_t left = (size_t)(end - p);
        if (left < 2) {
            return RT_ECORRUPT;
        }
        unsigned type = p[0];
        size_t nl = p[1];
        if (nl == 0 || left - 2 < nl || type > 8 || rt__vsize[type] < 0) {
            return RT_ECORRUPT;
        }
        const uint8_t *name = p + 2;
        for (unsigned s = 0; s < f->nslots; s++) {
            if (f->slot_len[s] == nl &&
                (uint8_t)f->slot_name[s][nl - 1] == name[nl - 1] &&
                memcmp(f->slot_name[s], name, nl) == 0) {
                if (!(x->found & (1u << s))) {
                    struct rt_props_iter it = {p, end, 1};
                    if (rt_props_next(&it, &x->vals[s]) != 1) {
                        return RT_ECORRUPT;
                    }
                    x->found |= 1u << s;
                    if (x->found == all) {
                        x->loaded = 1;
                        return 0;
                    }
                }
                break;
            }
        }
        p += 2 + nl;
        left -= 2 + nl;
        size_t vs = (size_t)rt__vsize[type];
        if (vs == 0) {
            if (left < 4) {
                return RT_ECORRUPT;
            }
            vs = 4 + (size_t)rt_get_u32le(p);
            if (vs < 4) {
                return RT_ECORRUPT;
            }
        }
        if (left < vs) {
            return RT_ECORRUPT;
        }
        p += vs;
    }
    x->loaded = 1;
    return 0;
}

static int rt__cmp_bytes(const uint8_t *a,
                         size_t an,
                         const uint8_t *b,
                         size_t bn)
{
    size_t m = an < bn ? an : bn;
    int c = m ? memcmp(a, b, m) : 0;
    if (c != 0) {
        return c < 0 ? -1 : 1;
    }
    return an < bn ? -1 : an > bn ? 1 : 0;
}

/* Strings compare as Azure compares them: ordinal over UTF-16 code units
 * (the order of storage keys, rt_key.h), not UTF-8 bytes. */
static int rt__cmp_str(const void *a, size_t an, const void *b, size_t bn)
{
    return rt_utf16_cmp(a, an, b, bn);
}

/* Exact comparison of an integer with a double: -1, 0, 1 or RT__UNORD. */
static int rt__cmp_i64_dbl(int64_t i, double d)
{
    if (isnan(d)) {
        return RT__UNORD;
    }
    if (d >= 9223372036854775808.0) {
        return -1;
    }
    if (d < -9223372036854775808.0) {
        return 1;
    }
    int64_t t = (int64_t)d; /* trunc(d), in range */
    if (i < t) {
        return -1;
    }
    if (i > t) {
        return 1;
    }
    double frac = d - (double)t; /* exact */
    return frac > 0 ? -1 : frac < 0 ? 1 : 0;
}

static int rt__cmp_i64(int64_t a, int64_t b)
{
    return a < b ? -1 : a > b ? 1 : 0;
}

/* Compares stored property @pr with the literal of @c (property first). */
static int rt__cmp_prop(const struct rt__fcmp *c, const struct rt_prop *pr)
{
    const struct rt__flit *l = &c->lit;
    switch (pr->type) {
        case RT_EDM_STRING:
        case RT_EDM_BINARY:
            if (l->type != pr->type) {
                return RT__MISMATCH;
            }
            return pr->type == RT_EDM_STRING
                       ? rt__cmp_str(pr->v.bytes.p, pr->v.bytes.n, l->bytes,
                                     l->nbytes)
                       : rt__cmp_bytes(pr->v.bytes.p, pr->v.bytes.n, l->bytes,
                                       l->nbytes);
        case RT_EDM_BOOL:
            if (l->type != RT_EDM_BOOL) {
                return RT__MISMATCH;
            }
            return rt__cmp_i64(pr->v.b != 0, l->b != 0);
        case RT_EDM_DATETIME:
            if (l->type != RT_EDM_DATETIME) {
                return RT__MISMATCH;
            }
            return pr->v.ticks < l->ticks ? -1 : pr->v.ticks > l->ticks;
        case RT_EDM_GUID:
            if (l->type != RT_EDM_GUID) {
                return RT__MISMATCH;
            }
            return rt__cmp_bytes(pr->v.guid, 16, l->guid, 16);
        case RT_EDM_INT32:
        case RT_EDM_INT64: {
            int64_t v = pr->type == RT_EDM_INT32 ? pr->v.i32 : pr->v.i64;
            if (c->num == RT__NUM_INT) {
                return rt__cmp_i64(v, l->i);
            }
            if (c->num == RT__NUM_DBL) {
                return rt__cmp_i64_dbl(v, l->d);
            }
            return RT__MISMATCH;
        }
        case RT_EDM_DOUBLE: {
            double v = pr->v.d;
            if (c->num == RT__NUM_NONE) {
                return RT__MISMATCH;
            }
            if (isnan(v)) {
                return RT__UNORD;
            }
            if (c->num == RT__NUM_INT) {
                return -rt__cmp_i64_dbl(l->i, v);
            }
            if (isnan(l->d)) {
                return RT__UNORD;
            }
            return v < l->d ? -1 : v > l->d ? 1 : 0;
        }
        default:
            return RT__MISMATCH;
    }
}

static int rt__apply(enum rt_filter_op op, int c)
{
    if (c == RT__MISMATCH) {
        return 0;
    }
    if (c == RT__UNORD) {
        return op == RT_FILTER_NE;
    }
    switch (op) {
        case RT_FILTER_EQ:
            return c == 0;
        case RT_FILTER_NE:
            return c != 0;
        case RT_FILTER_GT:
            return c > 0;
        case RT_FILTER_GE:
            return c >= 0;
        case RT_FILTER_LT:
            return c < 0;
        case RT_FILTER_LE:
            return c <= 0;
    }
    return 0;
}

static int rt__eval_cmp(struct rt__fctx *x, const struct rt__fcmp *c)
{
    int r;
    switch (c->prop) {
        case RT__FP_PK:
        case RT__FP_RK:
            if (c->lit.type != RT_EDM_STRING) {
                return 0;
            }
            r = c->prop == RT__FP_PK
                    ? rt__cmp_str(x->pk, x->pklen, c->lit.bytes, c->lit.nbytes)
                    : rt__cmp_str(x->rk, x->rklen, c->lit.bytes, c->lit.nbytes);
            return rt__apply((enum rt_filter_op)c->op, r);
        case RT__FP_TS:
            if (c->lit.type != RT_EDM_DATETIME) {
                return 0;
            }
            r = x->ticks < c->lit.ticks ? -1 : x->ticks > c->lit.ticks;
            return rt__apply((enum rt_filter_op)c->op, r);
        default:
            if (x->loaded == 0 && rt__load(x) != 0) {
                return RT_ECORRUPT;
            }
            if (x->loaded < 0) {
                return x->loaded;
            }
            if (!(x->found & (1u << c->slot))) {
                return 0; /* missing property: false, also for ne */
            }
            return rt__apply((enum rt_filter_op)c->op,
                             rt__cmp_prop(c, &x->vals[c->slot]));
    }
}

static int rt__eval_node(struct rt__fctx *x, unsigned idx)
{
    const struct rt__fnode *nd = &x->f->nodes[idx];
    int r;
    switch (nd->kind) {
        case RT__FN_CMP:
            return rt__eval_cmp(x, &x->f->cmp[nd->cmp]);
        case RT__FN_NOT:
            r = rt__eval_node(x, nd->l);
            return r < 0 ? r : !r;
        case RT__FN_AND:
            r = rt__eval_node(x, nd->l);
            return r <= 0 ? r : rt__eval_node(x, nd->r);
        default: /* OR */
            r = rt__eval_node(x, nd->l);
            return r != 0 ? r : rt__eval_node(x, nd->r);
    }
}

int rt_filter_eval(const struct rt_filter *f,
                   const char *pk,
                   size_t pklen,
                   const char *rk,
                   size_t rklen,
                   uint64_t ticks,
                   const uint8_t *blob,
                   size_t blob_n)
{
    struct rt__fctx x;

    if (f == NULL) {
        return 1;
    }
    x.f = f;
    x.pk = pk;
    x.pklen = pklen;
    x.rk = rk;
    x.rklen = rklen;
    x.ticks = ticks;
    x.blob = blob;
    x.blob_n = blob_n;
    x.loaded = 0;
    x.found = 0;
    return rt__eval_node(&x, f->root);
}

/* ------------------------------------------------------------------ */
/* Bounds */

static int rt__bcmp(const struct rt_filter_bound *a, const uint8_t *s, size_t n)
{
    return rt__cmp_str(a->s, a->n, s, n);
}

static void rt__tighten_lo(struct rt_filter_bound *b,
                           const uint8_t *s,
                           size_t n,
                           int incl)
{
    int c = b->set ? rt__bcmp(b, s, n) : -1;
    if (c < 0 || (c == 0 && !incl)) {
        b->set = 1;
        b->s = (const char *)s;
        b->n = n;
        b->inclusive = incl;
    }
}

static void rt__tighten_hi(struct rt_filter_bound *b,
                           const uint8_t *s,
                           size_t n,
                           int incl)
{
    int c = b->set ? rt__bcmp(b, s, n) : 1;
    if (c > 0 || (c == 0 && !incl)) {
        b->set = 1;
        b->s = (const char *)s;
        b->n = n;
        b->inclusive = incl;
    }
}

static int rt__range_empty(const struct rt_filter_bound *lo,
                           const struct rt_filter_bound *hi)
{
    if (!lo->set || !hi->set) {
        return 0;
    }
    int c = rt__cmp_str(lo->s, lo->n, hi->s, hi->n);
    return c > 0 || (c == 0 && !(lo->inclusive && hi->inclusive));
}

static void rt__bounds_walk(const struct rt_filter *f,
                            unsigned idx,
                            struct rt_filter_bounds *b,
                            struct rt_filter_bound *rk_lo,
                            struct rt_filter_bound *rk_hi)
{
    const struct rt__fnode *nd = &f->nodes[idx];
    if (nd->kind == RT__FN_AND) {
        rt__bounds_walk(f, nd->l, b, rk_lo, rk_hi);
        rt__bounds_walk(f, nd->r, b, rk_lo, rk_hi);
        return;
    }
    if (nd->kind != RT__FN_CMP) {
        return;
    }
    const struct rt__fcmp *c = &f->cmp[nd->cmp];
    if (c->prop != RT__FP_PK && c->prop != RT__FP_RK) {
        return;
    }
    if (c->lit.type != RT_EDM_STRING) {
        b->empty = 1; /* a key is a string: this comparison is never true */
        return;
    }
    struct rt_filter_bound *lo = c->prop == RT__FP_PK ? &b->pk_lo : rk_lo;
    struct rt_filter_bound *hi = c->prop == RT__FP_PK ? &b->pk_hi : rk_hi;
    const uint8_t *s = c->lit.bytes ? c->lit.bytes : (const uint8_t *)"";
    size_t n = c->lit.nbytes;
    switch ((enum rt_filter_op)c->op) {
        case RT_FILTER_EQ:
            rt__tighten_lo(lo, s, n, 1);
            rt__tighten_hi(hi, s, n, 1);
            break;
        case RT_FILTER_GT:
            rt__tighten_lo(lo, s, n, 0);
            break;
        case RT_FILTER_GE:
            rt__tighten_lo(lo, s, n, 1);
            break;
        case RT_FILTER_LT:
            rt__tighten_hi(hi, s, n, 0);
            break;
        case RT_FILTER_LE:
            rt__tighten_hi(hi, s, n, 1);
            break;
        case RT_FILTER_NE:
            break;
    }
}

int rt_filter_bounds(const struct rt_filter *f, struct rt_filter_bounds *b)
{
    struct rt_filter_bound rk_lo, rk_hi;

    memset(b, 0, sizeof(*b));
    if (f == NULL) {
        return 0;
    }
    memset(&rk_lo, 0, sizeof(rk_lo));
    memset(&rk_hi, 0, sizeof(rk_hi));
    rt__bounds_walk(f, f->root, b, &rk_lo, &rk_hi);
    if (rt__range_empty(&b->pk_lo, &b->pk_hi) ||
        rt__range_empty(&rk_lo, &rk_hi)) {
        b->empty = 1;
    }
    if (b->pk_lo.set && b->pk_hi.set && b->pk_lo.inclusive &&
        b->pk_hi.inclusive &&
        rt__cmp_str(b->pk_lo.s, b->pk_lo.n, b->pk_hi.s, b->pk_hi.n) == 0) {
        b->pk_eq = 1;
        b->rk_lo = rk_lo;
        b->rk_hi = rk_hi;
    }
    return 0;
}

/* ------------------------------------------------------------------ */
/* Introspection */

int rt_filter_references(const struct rt_filter *f, const char *name, size_t n)
{
    if (f == NULL) {
        return 0;
    }
    for (unsigned i = 0; i < f->ncmp; i++) {
        if (f->cmp[i].name_len == n && memcmp(f->cmp[i].name, name, n) == 0) {
            return 1;
        }
    }
    return 0;
}

int rt_filter_comparisons(const struct rt_filter *f)
{
    return f ? (int)f->ncmp : 0;
}

static void rt__fmt_lit(const struct rt__flit *l, struct rt_buf *out)
{
    static const char hex[] = "0123456789abcdef";
    char iso[RT_TIME_ISO_SIZE];
    switch (l->type) {
        case RT_EDM_STRING:
            rt_buf_append_u8(out, '\'');
            for (size_t i = 0; i < l->nbytes; i++) {
                if (l->bytes[i] == '\'') {
                    rt_buf_append_u8(out, '\'');
                }
                rt_buf_append_u8(out, l->bytes[i]);
            }
            rt_buf_append_u8(out, '\'');
            break;
        case RT_EDM_BINARY:
            rt_buf_append_str(out, "X'");
            for (size_t i = 0; i < l->nbytes; i++) {
                rt_buf_append_u8(out, (uint8_t)hex[l->bytes[i] >> 4]);
                rt_buf_append_u8(out, (uint8_t)hex[l->bytes[i] & 15]);
            }
            rt_buf_append_u8(out, '\'');
            break;
        case RT_EDM_BOOL:
            rt_buf_append_str(out, l->b ? "true" : "false");
            break;
        case RT_EDM_INT32:
            rt_buf_printf(out, "%lld", (long long)l->i);
            break;
        case RT_EDM_INT64:
            rt_buf_printf(out, "%lldL", (long long)l->i);
            break;
        case RT_EDM_DOUBLE:
            if (isnan(l->d)) {
                rt_buf_append_str(out, "NaN");
            } else if (isinf(l->d)) {
                rt_buf_append_str(out, l->d < 0 ? "-INF" : "INF");
            } else {
                rt_buf_printf(out, "%.17gd", l->d);
            }
            break;
        case RT_EDM_DATETIME:
            if (l->ticks >= RT_TICKS_MIN && l->ticks <= RT_TICKS_MAX) {
                rt_time_format_iso(l->ticks, iso);
                rt_buf_printf(out, "datetime'%s'", iso);
            } else {
                rt_buf_printf(out, "datetime'?%llu'",
                              (unsigned long long)l->ticks);
            }
            break;
        case RT_EDM_GUID:
            rt_buf_append_str(out, "guid'");
            for (int i = 0; i < 16; i++) {
                if (i == 4 || i == 6 || i == 8 || i == 10) {
                    rt_buf_append_u8(out, '-');
                }
                rt_buf_append_u8(out, (uint8_t)hex[l->guid[i] >> 4]);
                rt_buf_append_u8(out, (uint8_t)hex[l->guid[i] & 15]);
            }
            rt_buf_append_u8(out, '\'');
            break;
    }
}

static void rt__fmt_node(const struct rt_filter *f,
                         unsigned idx,
                         struct rt_buf *out)
{
    static const char *ops[6] = {"eq", "ne", "gt", "ge", "lt", "le"};
    const struct rt__fnode *nd = &f->nodes[idx];
    switch (nd->kind) {
        case RT__FN_CMP: {
            const struct rt__fcmp *c = &f->cmp[nd->cmp];
            rt_buf_append_u8(out, '(');
            rt_buf_append(out, c->name, c->name_len);
            rt_buf_printf(out, " %s ", ops[c->op]);
            rt__fmt_lit(&c->lit, out);
            rt_buf_append_u8(out, ')');
            break;
        }
        case RT__FN_NOT:
            rt_buf_append_str(out, "(not ");
            rt__fmt_node(f, nd->l, out);
            rt_buf_append_u8(out, ')');
            break;
        default:
            rt_buf_append_u8(out, '(');
            rt__fmt_node(f, nd->l, out);
            rt_buf_append_str(out, nd->kind == RT__FN_AND ? " and " : " or ");
            rt__fmt_node(f, nd->r, out);
            rt_buf_append_u8(out, ')');
            break;
    }
}

void rt_filter_format(const struct rt_filter *f, struct rt_buf *out)
{
    if (f == NULL) {
        rt_buf_append_str(out, "true");
        return;
    }
    rt__fmt_node(f, f->root, out);
}
