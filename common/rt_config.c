#include "rt_config.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rt_err.h"

static struct rt_opt *rt__opt_find(struct rt_opt *opts,
                                   const char *name,
                                   size_t n)
{
    for (struct rt_opt *o = opts; o->name; o++) {
        if (strlen(o->name) == n && strncmp(o->name, name, n) == 0) {
            return o;
        }
    }
    return NULL;
}

static int rt__opt_set(struct rt_opt *o, const char *val)
{
    char *end;
    switch (o->type) {
        case RT_OPT_STR: {
            char **p = o->ptr;
            free(*p);
            *p = strdup(val ? val : "");
            return *p ? 0 : -1;
        }
        case RT_OPT_INT: {
            long v;
            if (!val || !*val) {
                return -1;
            }
            errno = 0;
            v = strtol(val, &end, 10);
            if (errno || *end) {
                return -1;
            }
            *(long *)o->ptr = v;
            return 0;
        }
        case RT_OPT_BOOL:
            if (!val || !strcmp(val, "true") || !strcmp(val, "1") ||
                !strcmp(val, "yes") || !strcmp(val, "on")) {
                *(int *)o->ptr = 1;
            } else if (!strcmp(val, "false") || !strcmp(val, "0") ||
                       !strcmp(val, "no") || !strcmp(val, "off")) {
                *(int *)o->ptr = 0;
            } else {
                return -1;
            }
            return 0;
    }
    return -1;
}

void rt_config_usage(const char *prog,
                     const char *summary,
                     const struct rt_opt *opts,
                     FILE *out)
{
    fprintf(out, "Usage: %s [options]\n%s\n\nOptions:\n", prog, summary);
    fprintf(out, "  %-28s %s\n", "--help", "print this help and exit");
    fprintf(out, "  %-28s %s\n", "--config FILE",
            "read 'key = value' lines (keys are the long option names)");
    for (const struct rt_opt *o = opts; o->name; o++) {
        char left[64];
        snprintf(left, sizeof(left), "--%s %s", o->name,
                 o->type == RT_OPT_INT    ? "N"
                 : o->type == RT_OPT_BOOL ? "[true|false]"
                                          : "VALUE");
        fprintf(out, "  %-28s %s", left, o->help);
        if (o->def && *o->def) {
            fprintf(out, " (default: %s)", o->def);
        }
        fputc('\n', out);
    }
}

static char *rt__trim(char *s)
{
    char *e;
    while (*s == ' ' || *s == '\t') {
        s++;
    }
    e = s + strlen(s);
    while (e > s &&
           (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\n' || e[-1] == '\r')) {
        *--e = '\0';
    }
    return s;
}

static int rt__config_file(const char *prog,
                           struct rt_opt *opts,
                           const char *path)
{
    FILE *f = fopen(path, "r");
    char line[4096];
    int lineno = 0;
    if (!f) {
        fprintf(stderr, "%s: cannot open config %s: %s\n", prog, path,
                strerror(errno));
        return -1;
    }
    while (fgets(line, sizeof(line), f)) {
        char *s = rt__trim(line);
        char *eq, *key, *val;
        struct rt_opt *o;
        lineno++;
        if (!*s || *s == '#') {
            continue;
        }
        eq = strchr(s, '=');
        if (!eq) {
            fprintf(stderr, "%s: %s:%d: expected 'key = value'\n", prog, path,
                    lineno);
            fclose(f);
            return -1;
        }
        *eq = '\0';
        key = rt__trim(s);
        val = rt__trim(eq + 1);
        o = rt__opt_find(opts, key, strlen(key));
        if (!o || rt__opt_set(o, val) != 0) {
            fprintf(stderr, "%s: %s:%d: %s option '%s'\n", prog, path, lineno,
                    o ? "bad value for" : "unknown", key);
            fclose(f);
            return -1;
        }
    }
    fclose(f);
    return 0;
}

int rt_config_parse(const char *prog,
                    const char *summary,
                    struct rt_opt *opts,
                    int argc,
                    char **argv,
                    char **pos,
                    int max_pos)
{
    int npos = 0;
    for (struct rt_opt *o = opts; o->name; o++) {
        if (o->type == RT_OPT_STR) {
            *(char **)o->ptr = NULL;
        }
        if (rt__opt_set(o, o->def                  ? o->def
                           : o->type == RT_OPT_STR ? ""
                                                   : "0") != 0) {
            fprintf(stderr, "%s: bad default for %s\n", prog, o->name);
            exit(2);
        }
    }
    /* The config file first, so flags given with it override it. */
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            rt_config_usage(prog, summary, opts, stdout);
            exit(0);
        }
        if (!strncmp(argv[i], "--config", 8) &&
            (argv[i][8] == '=' || argv[i][8] == '\0')) {
            const char *path = argv[i][8] == '=' ? argv[i] + 9
                               : i + 1 < argc    ? argv[i + 1]
                                                 : NULL;
            if (!path || rt__config_file(prog, opts, path) != 0) {
                if (!path) {
                    fprintf(stderr, "%s: --config needs a file\n", prog);
                }
                exit(2);
            }
        }
    }
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *eq;
        struct rt_opt *o;
        size_t n;
        if (strncmp(a, "--", 2) != 0) {
            if (npos >= max_pos) {
                fprintf(stderr, "%s: unexpected argument '%s'\n", prog, a);
                exit(2);
            }
            pos[npos++] = argv[i];
            continue;
        }
        a += 2;
        eq = strchr(a, '=');
        n = eq ? (size_t)(eq - a) : strlen(a);
        if (n == 6 && !strncmp(a, "config", 6)) {
            if (!eq) {
                i++;
            }
            continue;
        }
        o = rt__opt_find(opts, a, n);
        if (!o) {
            fprintf(stderr, "%s: unknown option '--%.*s' (try --help)\n", prog,
                    (int)n, a);
            exit(2);
        }
        const char *val = NULL;
        if (eq) {
            val = eq + 1;
        } else if (o->type != RT_OPT_BOOL) {
            if (i + 1 >= argc) {
                fprintf(stderr, "%s: --%s needs a value\n", prog, o->name);
                exit(2);
            }
            val = argv[++i];
        } else if (i + 1 < argc && (!strcmp(argv[i + 1], "true") ||
                                    !strcmp(argv[i + 1], "false"))) {
            val = argv[++i];
        }
        if (rt__opt_set(o, val) != 0) {
            fprintf(stderr, "%s: bad value for --%s\n", prog, o->name);
            exit(2);
        }
    }
    return npos;
}

void rt_config_free(struct rt_opt *opts)
{
    for (struct rt_opt *o = opts; o->name; o++) {
        if (o->type == RT_OPT_STR) {
            free(*(char **)o->ptr);
            *(char **)o->ptr = NULL;
        }
    }
}

int rt_write_port_file(const char *path,
                       const char *const *keys,
                       const int *values,
                       int n)
{
    char tmp[4096];
    FILE *f;
    snprintf(tmp, sizeof(tmp), "%s.tmp.%d", path, (int)getpid());
    f = fopen(tmp, "w");
    if (!f) {
        return -errno;
    }
    for (int i = 0; i < n; i++) {
        fprintf(f, "%s=%d\n", keys[i], values[i]);
    }
    if (fclose(f) != 0 || rename(tmp, path) != 0) {
        int e = -errno;
        unlink(tmp);
        return e;
    }
    return 0;
}

bool rt_zone_valid(const char *zone)
{
    for (size_t n = 0; zone && zone[n]; n++) {
        unsigned char c = (unsigned char)zone[n];
        if (n == RT_ZONE_MAX ||
            !(isalnum(c) || c == '.' || c == '_' || c == '-')) {
            return false;
        }
    }
    return true;
}
