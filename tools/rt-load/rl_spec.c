#include "rl_spec.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static const char *const rl__op_names[RL_OP__NR] = {
    [RL_OP_INSERT] = "insert",    [RL_OP_GET] = "get",
    [RL_OP_UPSERT] = "upsert",    [RL_OP_UPSERT_MERGE] = "upsert-merge",
    [RL_OP_UPDATE] = "update",    [RL_OP_MERGE] = "merge",
    [RL_OP_DELETE] = "delete",    [RL_OP_QPOINT] = "query-point",
    [RL_OP_QROWS] = "query-rows", [RL_OP_QPARTS] = "query-parts",
    [RL_OP_SCAN] = "scan",        [RL_OP_PAGE] = "page",
    [RL_OP_BATCH] = "batch",      [RL_OP_RMW] = "rmw",
};

static void rl__err(char *err, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void rl__err(char *err, const char *fmt, ...)
{
    va_list ap;
    if (!err) {
        return;
    }
    va_start(ap, fmt);
    vsnprintf(err, RL_ERR_SIZE, fmt, ap);
    va_end(ap);
}

const char *rl_op_name(enum rl_op op)
{
    return op < RL_OP__NR ? rl__op_names[op] : "?";
}

int rl_op_parse(const char *s, size_t n)
{
    for (int i = 0; i < RL_OP__NR; i++) {
        if (strlen(rl__op_names[i]) == n &&
            strncasecmp(rl__op_names[i], s, n) == 0) {
            return i;
        }
    }
    /* Aliases */
    if (n == 4 && strncasecmp(s, "read", 4) == 0) {
        return RL_OP_GET;
    }
    if (n == 7 && strncasecmp(s, "replace", 7) == 0) {
        return RL_OP_UPDATE;
    }
    return -1;
}

int rl_op_is_insert(enum rl_op op)
{
    return op == RL_OP_INSERT || op == RL_OP_BATCH;
}

int rl_mix_parse(const char *s, struct rl_mix *mix, char *err)
{
    const char *p = s;
    double w[RL_OP__NR] = {0};
    double scale = 1;
    memset(mix, 0, sizeof(*mix));
    if (!s || !*s) {
        rl__err(err, "empty mix");
        return -1;
    }
    while (*p) {
        const char *name = p, *e;
        size_t n;
        int op;
        double v = 1;
        while (*p && *p != ',' && *p != '=' && *p != ':') {
            p++;
        }
        e = p;
        while (name < e && isspace((unsigned char)*name)) {
            name++;
        }
        while (e > name && isspace((unsigned char)e[-1])) {
            e--;
        }
        n = (size_t)(e - name);
        op = rl_op_parse(name, n);
        if (op < 0) {
            rl__err(err, "unknown operation '%.*s' in mix", (int)n, name);
            return -1;
        }
        if (*p == '=' || *p == ':') {
            char *end;
            p++;
            errno = 0;
            v = strtod(p, &end);
            if (end == p || errno || v < 0 || !isfinite(v)) {
                rl__err(err, "bad weight for '%s' in mix", rl__op_names[op]);
                return -1;
            }
            p = end;
            while (isspace((unsigned char)*p)) {
                p++;
            }
        }
        if (*p == ',') {
            p++;
        } else if (*p) {
            rl__err(err, "unexpected '%c' in mix", *p);
            return -1;
        }
        w[op] += v;
    }
    /* Scale decimals to integers (weights keep 3 decimals). */
    for (int i = 0; i < RL_OP__NR; i++) {
        if (w[i] != floor(w[i])) {
            scale = 1000;
        }
    }
    for (int i = 0; i < RL_OP__NR; i++) {
        double x = w[i] * scale + 0.5;
        if (x > 1e9) {
            rl__err(err, "weight too large in mix");
            return -1;
        }
        mix->w[i] = (unsigned)x;
        mix->total += mix->w[i];
    }
    if (mix->total == 0) {
        rl__err(err, "mix has no operation with a weight above 0");
        return -1;
    }
    return 0;
}

enum rl_op rl_mix_pick(const struct rl_mix *mix, unsigned u)
{
    for (int i = 0; i < RL_OP__NR; i++) {
        if (u < mix->w[i]) {
            return (enum rl_op)i;
        }
        u -= mix->w[i];
    }
    for (int i = RL_OP__NR - 1; i >= 0; i--) {
        if (mix->w[i]) {
            return (enum rl_op)i;
        }
    }
    return RL_OP_GET;
}

void rl_mix_format(const struct rl_mix *mix, char *out, size_t n)
{
    size_t len = 0;
    out[0] = '\0';
    for (int i = 0; i < RL_OP__NR && len < n; i++) {
        if (mix->w[i]) {
            int k = snprintf(out + len, n - len, "%s%s=%u", len ? "," : "",
                             rl__op_names[i], mix->w[i]);
            if (k < 0) {
                break;
            }
            len += (size_t)k;
        }
    }
}

int rl_ycsb_preset(const char *name,
                   struct rl_mix *mix,
                   struct rl_dist_cfg *dist,
                   char *err)
{
    const char *n = name;
    const char *m;
    if (strncasecmp(n, "ycsb-", 5) == 0 || strncasecmp(n, "ycsb_", 5) == 0) {
        n += 5;
    }
    if (strlen(n) != 1) {
        rl__err(err, "unknown workload '%s' (ycsb-a .. ycsb-f)", name);
        return -1;
    }
    memset(dist, 0, sizeof(*dist));
    dist->kind = RL_DIST_ZIPFIAN;
    dist->theta = 0.99;
    switch (tolower((unsigned char)*n)) {
        case 'a':
            m = "get=50,merge=50";
            break;
        case 'b':
            m = "get=95,merge=5";
            break;
        case 'c':
            m = "get=100";
            break;
        case 'd':
            m = "get=95,insert=5";
            dist->kind = RL_DIST_LATEST;
            break;
        case 'e':
            m = "query-rows=95,insert=5";
            break;
        case 'f':
            m = "get=50,rmw=50";
            break;
        default:
            rl__err(err, "unknown workload '%s' (ycsb-a .. ycsb-f)", name);
            return -1;
    }
    return rl_mix_parse(m, mix, err);
}

static const char *const rl__dist_names[RL_DIST__NR] = {
    "uniform", "zipfian", "latest", "seq-asc", "seq-desc", "hotset",
};

const char *rl_dist_name(enum rl_dist_kind k)
{
    return k < RL_DIST__NR ? rl__dist_names[k] : "?";
}

/* Parses up to @max ":"-separated numbers after the name. */
static int rl__dist_args(const char *p, double *v, int max, char *err)
{
    int n = 0;
    while (*p == ':') {
        char *end;
        if (n == max) {
            rl__err(err, "too many parameters in distribution");
            return -1;
        }
        p++;
        errno = 0;
        v[n] = strtod(p, &end);
        if (end == p || errno || !isfinite(v[n])) {
            rl__err(err, "bad number in distribution parameters");
            return -1;
        }
        /* Allow a trailing "s" on the hot set period. */
        if (*end == 's' && n == 2) {
            end++;
        }
        p = end;
        n++;
    }
    if (*p) {
        rl__err(err, "unexpected '%s' in distribution", p);
        return -1;
    }
    return n;
}

int rl_dist_parse(const char *s, struct rl_dist_cfg *d, char *err)
{
    const char *colon = strchr(s, ':');
    size_t n = colon ? (size_t)(colon - s) : strlen(s);
    double v[3];
    int k;
    memset(d, 0, sizeof(*d));
    d->theta = 0.99;
    d->hot_fraction = 0.01;
    d->hot_prob = 0.9;
    d->hot_period_s = 10;
#define IS(lit) (n == strlen(lit) && strncasecmp(s, lit, n) == 0)
    if (IS("uniform")) {
        d->kind = RL_DIST_UNIFORM;
    } else if (IS("zipfian") || IS("zipf")) {
        d->kind = RL_DIST_ZIPFIAN;
    } else if (IS("latest")) {
        d->kind = RL_DIST_LATEST;
    } else if (IS("seq-asc") || IS("sequential") || IS("seq") || IS("append")) {
        d->kind = RL_DIST_SEQ_ASC;
    } else if (IS("seq-desc") || IS("prepend")) {
        d->kind = RL_DIST_SEQ_DESC;
    } else if (IS("hotset") || IS("hot")) {
        d->kind = RL_DIST_HOTSET;
    } else {
        rl__err(err,
                "unknown distribution '%.*s' (uniform, zipfian[:theta], "
                "latest[:theta], seq-asc, seq-desc, "
                "hotset[:fraction[:prob[:period]]])",
                (int)n, s);
        return -1;
    }
#undef IS
    k = rl__dist_args(s + n, v, 3, err);
    if (k < 0) {
        return -1;
    }
    switch (d->kind) {
        case RL_DIST_ZIPFIAN:
        case RL_DIST_LATEST:
            if (k > 1) {
                rl__err(err, "%s takes one parameter (theta)",
                        rl_dist_name(d->kind));
                return -1;
            }
            if (k == 1) {
                d->theta = v[0];
            }
            if (!(d->theta > 0 && d->theta < 1)) {
                rl__err(err, "zipfian theta must be in (0, 1), got %g",
                        d->theta);
                return -1;
            }
            break;
        case RL_DIST_HOTSET:
            if (k >= 1) {
                d->hot_fraction = v[0];
            }
            if (k >= 2) {
                d->hot_prob = v[1];
            }
            if (k >= 3) {
                d->hot_period_s = v[2];
            }
            if (!(d->hot_fraction > 0 && d->hot_fraction <= 1) ||
                !(d->hot_prob >= 0 && d->hot_prob <= 1) ||
                d->hot_period_s < 0) {
                rl__err(err,
                        "hotset: fraction in (0,1], probability in [0,1], "
                        "period >= 0");
                return -1;
            }
            break;
        default:
            if (k) {
                rl__err(err, "%s takes no parameter", rl_dist_name(d->kind));
                return -1;
            }
    }
    return 0;
}

int rl_scheme_parse(const char *s,
                    int allow_rev,
                    enum rl_key_scheme *out,
                    char *err)
{
    if (!strcasecmp(s, "seq") || !strcasecmp(s, "sequential")) {
        *out = RL_KEY_SEQ;
    } else if (!strcasecmp(s, "hash") || !strcasecmp(s, "random")) {
        *out = RL_KEY_HASH;
    } else if (allow_rev &&
               (!strcasecmp(s, "rev") || !strcasecmp(s, "reverse"))) {
        *out = RL_KEY_REV;
    } else {
        rl__err(err, "unknown key scheme '%s' (seq, hash%s)", s,
                allow_rev ? ", rev" : "");
        return -1;
    }
    return 0;
}

int rl_duration_parse(const char *s, uint64_t *us, char *err)
{
    char *end;
    double v;
    double mul = 1e6;
    errno = 0;
    v = strtod(s, &end);
    if (end == s || errno || v < 0 || !isfinite(v)) {
        rl__err(err, "bad duration '%s'", s);
        return -1;
    }
    if (!strcmp(end, "") || !strcmp(end, "s")) {
        mul = 1e6;
    } else if (!strcmp(end, "ms")) {
        mul = 1e3;
    } else if (!strcmp(end, "us")) {
        mul = 1;
    } else if (!strcmp(end, "m") || !strcmp(end, "min")) {
        mul = 60e6;
    } else if (!strcmp(end, "h")) {
        mul = 3600e6;
    } else {
        rl__err(err, "bad duration unit in '%s' (us, ms, s, m, h)", s);
        return -1;
    }
    *us = (uint64_t)(v * mul + 0.5);
    return 0;
}

int rl_size_parse(const char *s, uint64_t *bytes, char *err)
{
    char *end;
    double v;
    double mul = 1;
    errno = 0;
    v = strtod(s, &end);
    if (end == s || errno || v < 0 || !isfinite(v)) {
        rl__err(err, "bad size '%s'", s);
        return -1;
    }
    if (!*end || !strcasecmp(end, "b")) {
        mul = 1;
    } else if (!strcasecmp(end, "k") || !strcasecmp(end, "kb") ||
               !strcasecmp(end, "kib")) {
        mul = 1024;
    } else if (!strcasecmp(end, "m") || !strcasecmp(end, "mb") ||
               !strcasecmp(end, "mib")) {
        mul = 1048576;
    } else {
        rl__err(err, "bad size unit in '%s' (k, m)", s);
        return -1;
    }
    *bytes = (uint64_t)(v * mul + 0.5);
    return 0;
}

int rl_intlist_parse(const char *s, long *v, int max, char *err)
{
    int n = 0;
    const char *p = s;
    while (*p) {
        char *end;
        long x;
        errno = 0;
        x = strtol(p, &end, 10);
        if (end == p || errno) {
            rl__err(err, "bad number list '%s'", s);
            return -1;
        }
        if (n == max) {
            rl__err(err, "too many values in '%s' (max %d)", s, max);
            return -1;
        }
        v[n++] = x;
        p = end;
        if (*p == ',') {
            p++;
        } else if (*p) {
            rl__err(err, "bad number list '%s'", s);
            return -1;
        }
    }
    return n;
}
