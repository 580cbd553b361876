/* rt-inspect: what a stopped partition server's data directory holds, per
 * range, so replicas can be compared from outside (tests, operators).
 *
 *   rt-inspect [--json] [--live] DIR
 *
 * For every range of the server's persisted assignment (the meta "ranges"
 * record, ps_range.h): id, table id, bounds, role, epoch, the replica
 * state record (applied LSN and epoch, commit LSN, primary epoch, state;
 * ps_store.h), the number of entities and a digest: CRC32C (rt_crc32c)
 * over u32le key_len ‖ storage key ‖ u32le value_len ‖ stored value of
 * every entity of the range, in storage key order (long keys flattened
 * out of their buckets). Replicas holding the same data have the same
 * digest; the stored values, Timestamps included, are byte-identical on
 * every replica because secondaries store their primary's values as
 * given.
 *
 * --json adds the assignment's primary and ISR as the server last saw
 * them.
 *
 * The directory is opened read-only (ps_store_open_ro): nothing is ever
 * written. A directory some process holds open (a running server: it
 * keeps a shared lock on lock.mdb's first byte) is refused with exit 3,
 * because a live server's figures move while they are read; --live reads
 * it anyway: LMDB readers are safe next to the writer, each range's data
 * is then one committed snapshot, but its state record is read in
 * another transaction and ranges are read one after the other.
 *
 * Exit status: 0 printed; 1 the directory could not be read (no data.mdb,
 * corrupt metadata, I/O); 2 usage; 3 the directory is in use (no --live);
 * 4 printed, but some range's data failed its checksum (its digest is
 * shown as "corrupt"). */
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ps_range.h"
#include "ps_store.h"
#include "rt.pb-c.h"
#include "rt_buf.h"
#include "rt_crc32c.h"
#include "rt_err.h"

#define RI_EXIT_OK 0
#define RI_EXIT_READ 1
#define RI_EXIT_USAGE 2
#define RI_EXIT_IN_USE 3
#define RI_EXIT_CORRUPT 4

/* Entities copied out of the snapshot per call. */
#define RI_CHUNK_BYTES (1u << 20)

struct ri_range
{
    const Rt__Range *d; /* borrowed from the unpacked assignment */
    const char *role;
    int has_rs;
    struct ps_rstate rs;
    uint64_t keys;
    uint64_t bytes;
    uint32_t digest;
    int rc; /* 0, or why keys and digest are unknown */
};

static void ri_usage(FILE *f)
{
    fprintf(f,
            "usage: rt-inspect [--json] [--live] DIR\n"
            "Prints the ranges a stopped partition server's data "
            "directory DIR holds:\nid, table, bounds, role, epoch, "
            "applied and commit LSN, entities, digest.\n"
            "  --json  one JSON document instead of a table\n"
            "  --live  read a directory a running server holds\n"
            "Exit: 0 ok, 1 unreadable, 2 usage, 3 in use, 4 corrupt "
            "data.\n");
}

/* Pid of a process holding DIR/lock.mdb (LMDB's lock file: every process
 * with the environment open has a shared lock on its first byte), 0 when
 * none or no lock file. */
static long ri_lock_holder(const char *dir)
{
    char path[4096];
    struct flock fl;
    int fd;
    long pid = 0;

    snprintf(path, sizeof(path), "%s/lock.mdb", dir);
    fd = open(path, O_RDONLY);
    if (fd < 0) {
        return 0;
    }
    memset(&fl, 0, sizeof(fl));
    fl.l_type = F_WRLCK;
    fl.l_whence = SEEK_SET;
    fl.l_start = 0;
    fl.l_len = 1;
    if (fcntl(fd, F_GETLK, &fl) == 0 && fl.l_type != F_UNLCK) {
        pid = fl.l_pid > 0 ? (long)fl.l_pid : -1;
    }
    close(fd);
    return pid;
}

static const char *ri_role_name(int role)
{
    switch (role) {
        case PS_RS_ROLE_PRIMARY:
            return "primary";
        case PS_RS_ROLE_SECONDARY:
            return "secondary";
        case PS_RS_ROLE_LEARNER:
            return "learner";
        default:
            return "none";
    }
}

static const char *ri_state_name(int state)
{
    switch (state) {
        case PS_RS_OK:
            return "ok";
        case PS_RS_LEARNING:
            return "learning";
        case PS_RS_DIVERGED:
            return "diverged";
        default:
            return "none";
    }
}

/* The role: the replica state record's, else what the assignment names
 * for @server_id; a range without replicas is RF 1, served as primary. */
static const char *ri_role(const struct ri_range *r, uint64_t server_id)
{
    if (r->has_rs && r->rs.role != PS_RS_ROLE_NONE) {
        return ri_role_name(r->rs.role);
    }
    if (r->d->n_replicas == 0) {
        /* RF 1; a record saved before primaries were persisted has 0. */
        return r->d->server_id == 0 || r->d->server_id == server_id ? "primary"
                                                                    : "none";
    }
    for (size_t i = 0; i < r->d->n_replicas; i++) {
        if (r->d->replicas[i]->server_id == server_id) {
            return ri_role_name(r->d->replicas[i]->role);
        }
    }
    return "none";
}

/* Entities and digest of @r's span, in one snapshot. */
static int ri_digest(struct ps_store *st, struct ri_range *r)
{
    struct ps_span sp;
    struct ps_snap *sn;
    struct rt_buf buf = RT_BUF_INIT;
    uint64_t txn_id, n = 0, bytes = 0;
    uint32_t crc = 0;
    int more, rc;

    sp.table_id = r->d->table_id;
    sp.low = r->d->low;
    sp.high = ps_range_pb_high(r->d);
    rc = ps_store_snap_open(st, &sp, &sn, &txn_id);
    if (rc != 0) {
        return rc;
    }
    do {
        struct ps_change c;
        size_t off = 0;
        uint8_t len[4];

        buf.len = 0;
        more = ps_store_snap_next(sn, &buf, RI_CHUNK_BYTES, &n, &bytes);
        if (more < 0) {
            rc = more;
            break;
        }
        while ((rc = ps_change_next(buf.data, buf.len, &off, &c)) == 1) {
            rt_put_u32le(len, (uint32_t)c.kn);
            crc = rt_crc32c(crc, len, 4);
            crc = rt_crc32c(crc, c.key, c.kn);
            rt_put_u32le(len, (uint32_t)c.vn);
            crc = rt_crc32c(crc, len, 4);
            crc = rt_crc32c(crc, c.val, c.vn);
        }
        if (rc < 0) {
            break;
        }
        rc = 0;
    } while (more == 1);
    ps_store_snap_close(sn);
    rt_buf_free(&buf);
    if (rc == 0) {
        r->keys = n;
        r->bytes = bytes;
        r->digest = crc;
    }
    return rc;
}

static void ri_print_text(const char *dir,
                          uint64_t server_id,
                          const struct ri_range *v,
                          size_t n)
{
    printf("dir %s\nserver %" PRIu64 "\n\n", dir, server_id);
    printf("%-6s %-6s %-20s %-20s %-9s %-6s %-8s %-8s %-9s %s\n", "RANGE",
           "TABLE", "LOW", "HIGH", "ROLE", "EPOCH", "APPLIED", "COMMIT", "KEYS",
           "DIGEST");
    for (size_t i = 0; i < n; i++) {
        const struct ri_range *r = &v[i];
        const char *high = ps_range_pb_high(r->d);
        char lo[64], hi[64], keys[32], dig[32];

        snprintf(lo, sizeof(lo), "\"%s\"", r->d->low ? r->d->low : "");
        snprintf(hi, sizeof(hi), high ? "\"%s\"" : "+inf", high ? high : "");
        if (r->rc == 0) {
            snprintf(keys, sizeof(keys), "%" PRIu64, r->keys);
            snprintf(dig, sizeof(dig), "%08" PRIx32, r->digest);
        } else {
            snprintf(keys, sizeof(keys), "?");
            snprintf(dig, sizeof(dig), "%s",
                     r->rc == RT_ECORRUPT ? "corrupt" : rt_strerror(r->rc));
        }
        printf("%-6" PRIu64 " %-6" PRIu64 " %-20s %-20s %-9s %-6" PRIu64
               " %-8" PRIu64 " %-8" PRIu64 " %-9s %s\n",
               r->d->id, r->d->table_id, lo, hi, r->role, r->d->epoch,
               r->has_rs ? r->rs.applied_lsn : 0,
               r->has_rs ? r->rs.commit_lsn : 0, keys, dig);
    }
}

static void ri_print_json(const char *dir,
                          uint64_t server_id,
                          const struct ri_range *v,
                          size_t n)
{
    json_t *doc = json_object(), *arr = json_array();
    char *text;

    json_object_set_new(doc, "dir", json_string(dir));
    json_object_set_new(doc, "server_id", json_integer((json_int_t)server_id));
    for (size_t i = 0; i < n; i++) {
        const struct ri_range *r = &v[i];
        const char *high = ps_range_pb_high(r->d);
        json_t *o = json_object(), *isr;
        char dig[16];

        json_object_set_new(o, "id", json_integer((json_int_t)r->d->id));
        json_object_set_new(o, "table_id",
                            json_integer((json_int_t)r->d->table_id));
        json_object_set_new(o, "low", json_string(r->d->low ? r->d->low : ""));
        json_object_set_new(o, "high", high ? json_string(high) : json_null());
        json_object_set_new(o, "role", json_string(r->role));
        json_object_set_new(o, "epoch", json_integer((json_int_t)r->d->epoch));
        json_object_set_new(o, "primary",
                            json_integer((json_int_t)r->d->server_id));
        isr = json_array();
        for (size_t k = 0; k < r->d->n_isr; k++) {
            json_array_append_new(isr, json_integer((json_int_t)r->d->isr[k]));
        }
        json_object_set_new(o, "isr", isr);
        json_object_set_new(o, "state_record", json_boolean(r->has_rs));
        json_object_set_new(o, "state",
                            json_string(ri_state_name(r->rs.state)));
        json_object_set_new(o, "primary_epoch",
                            json_integer((json_int_t)r->rs.primary_epoch));
        json_object_set_new(o, "applied_epoch",
                            json_integer((json_int_t)r->rs.applied_epoch));
        json_object_set_new(o, "applied_lsn",
                            json_integer((json_int_t)r->rs.applied_lsn));
        json_object_set_new(o, "commit_lsn",
                            json_integer((json_int_t)r->rs.commit_lsn));
        if (r->rc == 0) {
            snprintf(dig, sizeof(dig), "%08" PRIx32, r->digest);
            json_object_set_new(o, "keys", json_integer((json_int_t)r->keys));
            json_object_set_new(o, "bytes", json_integer((json_int_t)r->bytes));
            json_object_set_new(o, "digest", json_string(dig));
        } else {
            json_object_set_new(o, "keys", json_null());
            json_object_set_new(o, "bytes", json_null());
            json_object_set_new(o, "digest", json_null());
            json_object_set_new(o, "error", json_string(rt_strerror(r->rc)));
        }
        json_array_append_new(arr, o);
    }
    json_object_set_new(doc, "ranges", arr);
    text = json_dumps(doc, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    printf("%s\n", text ? text : "{}");
    free(text);
    json_decref(doc);
}

static int ri_cmp(const void *a, const void *b)
{
    const struct ri_range *x = a, *y = b;
    return x->d->id < y->d->id ? -1 : x->d->id > y->d->id;
}

int main(int argc, char **argv)
{
    const char *dir = NULL;
    int json = 0, live = 0, ex = RI_EXIT_OK, rc;
    char errmsg[RT_ERRMSG_SIZE];
    struct ps_store *st;
    struct rt_buf blob = RT_BUF_INIT;
    uint64_t server_id = 0;
    Rt__Assignment *a = NULL;
    struct ri_range *v = NULL;
    size_t n = 0;
    long holder;

    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--json")) {
            json = 1;
        } else if (!strcmp(argv[i], "--live")) {
            live = 1;
        } else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            ri_usage(stdout);
            return RI_EXIT_OK;
        } else if (argv[i][0] == '-' || dir) {
            ri_usage(stderr);
            return RI_EXIT_USAGE;
        } else {
            dir = argv[i];
        }
    }
    if (!dir) {
        ri_usage(stderr);
        return RI_EXIT_USAGE;
    }
    holder = ri_lock_holder(dir);
    if (holder != 0 && !live) {
        fprintf(stderr,
                "rt-inspect: %s is in use (pid %ld holds its LMDB lock): "
                "stop the server first, or pass --live to read it anyway\n",
                dir, holder);
        return RI_EXIT_IN_USE;
    }
    rc = ps_store_open_ro(dir, &st, errmsg);
    if (rc != 0) {
        fprintf(stderr, "rt-inspect: %s\n", errmsg);
        return RI_EXIT_READ;
    }
    rc = ps_store_meta_load(st, &server_id, &blob);
    if (rc == 0 && blob.len > 0) {
        a = rt__assignment__unpack(NULL, blob.len, blob.data);
        if (!a) {
            rc = RT_ECORRUPT;
        }
    }
    if (rc != 0) {
        fprintf(stderr, "rt-inspect: %s: reading the ranges record: %s\n", dir,
                rt_strerror(rc));
        ex = RI_EXIT_READ;
        goto out;
    }
    n = a ? a->n_ranges : 0;
    v = calloc(n ? n : 1, sizeof(*v));
    if (!v) {
        fprintf(stderr, "rt-inspect: out of memory\n");
        ex = RI_EXIT_READ;
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        struct ri_range *r = &v[i];

        r->d = a->ranges[i];
        rc = ps_store_repl_get(st, r->d->id, &r->rs);
        if (rc == 0) {
            r->has_rs = 1;
        } else if (rc != RT_ENOTFOUND) {
            fprintf(stderr, "rt-inspect: range %" PRIu64 ": state: %s\n",
                    r->d->id, rt_strerror(rc));
            ex = RI_EXIT_READ;
            goto out;
        }
        r->role = ri_role(r, server_id);
        r->rc = ri_digest(st, r);
        if (r->rc == RT_ECORRUPT) {
            ex = RI_EXIT_CORRUPT;
        } else if (r->rc != 0) {
            fprintf(stderr, "rt-inspect: range %" PRIu64 ": %s\n", r->d->id,
                    rt_strerror(r->rc));
            ex = RI_EXIT_READ;
            goto out;
        }
    }
    qsort(v, n, sizeof(*v), ri_cmp);
    if (json) {
        ri_print_json(dir, server_id, v, n);
    } else {
        ri_print_text(dir, server_id, v, n);
    }

out:
    free(v);
    if (a) {
        rt__assignment__free_unpacked(a, NULL);
    }
    rt_buf_free(&blob);
    ps_store_close(st);
    return ex;
}
