/* Configuration: one option table per binary fills typed variables from
 * defaults, then a config file (--config FILE, lines "key = value", '#'
 * comments), then command-line flags (--key value | --key=value | --flag).
 * --help prints the table. Positional arguments are returned in order.
 * Thread: call once from main() before starting threads. */
#ifndef RT_CONFIG_H
#define RT_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

enum rt_opt_type {
    RT_OPT_STR,  /* ptr: char ** (malloc'd; rt_config_free releases) */
    RT_OPT_INT,  /* ptr: long * */
    RT_OPT_BOOL, /* ptr: int *; "--flag" alone means true */
};

struct rt_opt
{
    const char *name; /* long name without "--" */
    enum rt_opt_type type;
    void *ptr;
    const char *def; /* default as text; NULL = "" / 0 / false */
    const char *help;
};

/* Parses argv against @opts (terminated by a zero entry). On success returns
 * the number of positional arguments, stored in @pos (up to @max_pos,
 * borrowed from argv). --help prints usage to stdout and exits 0; bad input
 * prints a message to stderr and exits 2. */
int rt_config_parse(const char *prog,
                    const char *summary,
                    struct rt_opt *opts,
                    int argc,
                    char **argv,
                    char **pos,
                    int max_pos);
void rt_config_usage(const char *prog,
                     const char *summary,
                     const struct rt_opt *opts,
                     FILE *out);
void rt_config_free(struct rt_opt *opts);

/* Writes "key=value\n" lines to @path atomically (tmp file + rename).
 * keys/values are parallel arrays of @n entries. Returns 0 or -errno. */
int rt_write_port_file(const char *path,
                       const char *const *keys,
                       const int *values,
                       int n);

/* A failure-domain name (--zone): "" (none), or at most RT_ZONE_MAX bytes
 * of [A-Za-z0-9._-]. The partition server checks its flag with it and the
 * master every registration, since the name is stored, shown and compared
 * for placement. NULL counts as "". */
#define RT_ZONE_MAX 64
bool rt_zone_valid(const char *zone);

#endif
