/* rtctl cluster: the cluster's credentials for mutual TLS on the RPC.
 *
 *   rtctl cluster init OUT_DIR --masters m1,m2,m3 --partition-servers
 *         ps1,ps2,ps3 --frontends fe1,fe2 [--admin operator] [--days N]
 *   rtctl cluster add-node OUT_DIR ROLE NAME [--days N]
 *
 * init creates the cluster CA (OUT_DIR/ca.crt, OUT_DIR/ca.key 0600) and one
 * directory per node, OUT_DIR/NAME/{ca.crt,node.crt,node.key} (directory
 * 0700, key 0600), whose certificate names it ROLE:NAME (common/rt_tls.h):
 * copy that directory to the node's host and pass it as --cluster-tls.
 * It refuses to touch an OUT_DIR that already holds a CA, and checks every
 * node directory is free before writing anything. add-node issues one more
 * node (a new server, or a renewed certificate under a new name) from the
 * CA in OUT_DIR. Nothing here talks to a master; keys are never printed.
 * Exit: 0 done, 1 failed, 2 usage. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "rt_err.h"
#include "rt_pki.h"
#include "rt_tls.h"
#include "rtctl_cluster.h"

#define RTCTL_CLUSTER_MAX_NODES 256
#define RTCTL_CA_DAYS 3650

struct rtctl_node
{
    char cn[RT_TLS_NAME_MAX];
    const char *name; /* inside cn */
};

static void rtctl_cluster_usage(FILE *out)
{
    fprintf(out,
            "Usage: rtctl cluster init OUT_DIR --masters NAMES "
            "--partition-servers NAMES\n"
            "                          --frontends NAMES [--admin NAME] "
            "[--days N]\n"
            "       rtctl cluster add-node OUT_DIR ROLE NAME [--days N]\n"
            "\n"
            "init writes the cluster CA (OUT_DIR/ca.crt, OUT_DIR/ca.key) and, "
            "per node,\n"
            "OUT_DIR/NAME/{ca.crt,node.crt,node.key}: copy that directory "
            "to the node\n"
            "and start it with --cluster-tls DIR. NAMES is comma-separated; "
            "a name is\n"
            "1..63 of [A-Za-z0-9._-] and unique across roles. ROLE is "
            "master, ps, fe\n"
            "or admin. --days: node certificates' validity (default 365; "
            "the CA's is\n"
            "%d days). Keep ca.key off the nodes.\n",
            RTCTL_CA_DAYS);
}

/* Appends "ROLE:NAME" for each name of comma list @list. */
static int rtctl_add_names(const char *role,
                           const char *list,
                           struct rtctl_node *nodes,
                           size_t *n)
{
    const char *p = list;
    while (p && *p) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        char role_out[RT_TLS_ROLE_MAX], name[RT_TLS_NAME_MAX];
        if (*n >= RTCTL_CLUSTER_MAX_NODES) {
            fprintf(stderr, "rtctl: at most %d nodes\n",
                    RTCTL_CLUSTER_MAX_NODES);
            return -1;
        }
        struct rtctl_node *nd = &nodes[*n];
        int w = snprintf(nd->cn, sizeof(nd->cn), "%s:%.*s", role, (int)len, p);
        if (w < 0 || (size_t)w >= sizeof(nd->cn) ||
            rt_tls_name_split(nd->cn, role_out, sizeof(role_out), name,
                              sizeof(name)) != 0) {
            fprintf(stderr,
                    "rtctl: bad %s name '%.*s' (1..63 of [A-Za-z0-9._-])\n",
                    role, (int)len, p);
            return -1;
        }
        nd->name = strchr(nd->cn, ':') + 1;
        for (size_t i = 0; i < *n; i++) {
            if (strcmp(nodes[i].name, nd->name) == 0) {
                fprintf(stderr,
                        "rtctl: node name '%s' given twice (names are "
                        "directories: unique across roles)\n",
                        nd->name);
                return -1;
            }
        }
        (*n)++;
        p = comma ? comma + 1 : NULL;
    }
    return 0;
}

static int rtctl_days(const char *s, int *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || *end || v < 1 || v > 36500) {
        fprintf(stderr, "rtctl: --days: expected 1..36500\n");
        return -1;
    }
    *out = (int)v;
    return 0;
}

static int rtctl_cluster_init(int argc, char **argv)
{
    const char *out = NULL, *masters = NULL, *pss = NULL, *fes = NULL;
    const char *admin = NULL;
    int days = 365;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        const char **dst = !strcmp(a, "--masters")             ? &masters
                           : !strcmp(a, "--partition-servers") ? &pss
                           : !strcmp(a, "--frontends")         ? &fes
                           : !strcmp(a, "--admin")             ? &admin
                                                               : NULL;
        if (dst || !strcmp(a, "--days")) {
            if (i + 1 >= argc) {
                fprintf(stderr, "rtctl: %s needs a value\n", a);
                return 2;
            }
            if (dst) {
                *dst = argv[++i];
            } else if (rtctl_days(argv[++i], &days) != 0) {
                return 2;
            }
        } else if (a[0] == '-') {
            fprintf(stderr, "rtctl: cluster init: unknown option '%s'\n", a);
            return 2;
        } else if (!out) {
            out = a;
        } else {
            fprintf(stderr, "rtctl: unexpected argument '%s'\n", a);
            return 2;
        }
    }
    if (!out || !masters || !pss || !fes) {
        rtctl_cluster_usage(stderr);
        return 2;
    }
    static struct rtctl_node nodes[RTCTL_CLUSTER_MAX_NODES];
    size_t n = 0;
    if (rtctl_add_names("master", masters, nodes, &n) != 0 ||
        rtctl_add_names("ps", pss, nodes, &n) != 0 ||
        rtctl_add_names("fe", fes, nodes, &n) != 0 ||
        (admin && rtctl_add_names("admin", admin, nodes, &n) != 0)) {
        return 2;
    }
    char path[2048], err[512];
    struct stat st;
    snprintf(path, sizeof(path), "%s/ca.key", out);
    if (stat(path, &st) == 0) {
        fprintf(stderr,
                "rtctl: %s exists: this directory already holds a cluster "
                "CA (issue more nodes with 'rtctl cluster add-node')\n",
                path);
        return 1;
    }
    for (size_t i = 0; i < n; i++) {
        snprintf(path, sizeof(path), "%s/%s/node.key", out, nodes[i].name);
        if (stat(path, &st) == 0) {
            fprintf(stderr, "rtctl: %s exists; refusing to overwrite\n", path);
            return 1;
        }
    }
    struct rt_pki_ca ca;
    int ca_days = days > RTCTL_CA_DAYS ? days : RTCTL_CA_DAYS;
    if (rt_pki_ca_create("rangetable cluster CA", ca_days, &ca, err,
                         sizeof(err)) != 0 ||
        rt_pki_ca_write(out, &ca, err, sizeof(err)) != 0) {
        fprintf(stderr, "rtctl: %s\n", err);
        rt_pki_ca_free(&ca);
        return 1;
    }
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        snprintf(path, sizeof(path), "%s/%s", out, nodes[i].name);
        if (rt_pki_issue(&ca, nodes[i].cn, days, path, err, sizeof(err)) != 0) {
            fprintf(stderr, "rtctl: %s: %s\n", nodes[i].cn, err);
            rc = 1;
        } else {
            printf("%-24s %s\n", nodes[i].cn, path);
        }
    }
    rt_pki_ca_free(&ca);
    if (rc == 0) {
        printf(
            "cluster CA: %s/ca.crt (key %s/ca.key: keep it off the "
            "nodes)\n",
            out, out);
    }
    return rc;
}

static int rtctl_cluster_add_node(int argc, char **argv)
{
    const char *pos[3] = {0};
    int npos = 0, days = 365;
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "--days")) {
            if (i + 1 >= argc || rtctl_days(argv[++i], &days) != 0) {
                return 2;
            }
        } else if (argv[i][0] == '-' || npos == 3) {
            rtctl_cluster_usage(stderr);
            return 2;
        } else {
            pos[npos++] = argv[i];
        }
    }
    if (npos != 3) {
        rtctl_cluster_usage(stderr);
        return 2;
    }
    struct rtctl_node nd[1];
    size_t n = 0;
    if (rtctl_add_names(pos[1], pos[2], nd, &n) != 0 || n != 1) {
        fprintf(stderr, "rtctl: ROLE is master, ps, fe or admin\n");
        return 2;
    }
    struct rt_pki_ca ca;
    char err[512], path[2048];
    if (rt_pki_ca_read(pos[0], &ca, err, sizeof(err)) != 0) {
        fprintf(stderr, "rtctl: %s\n", err);
        return 1;
    }
    snprintf(path, sizeof(path), "%s/%s", pos[0], nd[0].name);
    int rc = rt_pki_issue(&ca, nd[0].cn, days, path, err, sizeof(err));
    rt_pki_ca_free(&ca);
    if (rc != 0) {
        fprintf(stderr, "rtctl: %s: %s\n", nd[0].cn, err);
        return 1;
    }
    printf("%-24s %s\n", nd[0].cn, path);
    return 0;
}

int rtctl_cluster_main(int argc, char **argv)
{
    if (argc < 1 || !strcmp(argv[0], "--help") || !strcmp(argv[0], "-h")) {
        rtctl_cluster_usage(argc < 1 ? stderr : stdout);
        return argc < 1 ? 2 : 0;
    }
    if (!strcmp(argv[0], "init")) {
        return rtctl_cluster_init(argc - 1, argv + 1);
    }
    if (!strcmp(argv[0], "add-node")) {
        return rtctl_cluster_add_node(argc - 1, argv + 1);
    }
    fprintf(stderr, "rtctl: cluster: unknown command '%s'\n", argv[0]);
    rtctl_cluster_usage(stderr);
    return 2;
}
