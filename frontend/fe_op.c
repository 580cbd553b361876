/* Entity operations: the verb x If-Match x x-ms-version table (the
 * contract is in fe_op.h). */
#include "fe_op.h"

#include <string.h>

#include "fe_hdr.h"
#include "rt.pb-c.h"
#include "rt_err.h"

/* One row per verb: the kind with and without If-Match, whether the form
 * without If-Match is refused, and the version it needs. */
struct fe__op_row
{
    const char *method;
    int with_if_match;
    int without_if_match;
    int needs_if_match; /* without If-Match: RT_EMISSINGHEADER */
    const char *since;  /* without If-Match: needs this x-ms-version */
};

static const struct fe__op_row fe__ops[FE_OP__NR] = {
    [FE_OP_INSERT] = {"POST", RT__OP_KIND__OP_INSERT, RT__OP_KIND__OP_INSERT, 0,
                      NULL},
    [FE_OP_PUT] = {"PUT", RT__OP_KIND__OP_REPLACE,
                   RT__OP_KIND__OP_UPSERT_REPLACE, 0, FE_VERSION_UPSERT},
    [FE_OP_MERGE] = {"MERGE", RT__OP_KIND__OP_MERGE,
                     RT__OP_KIND__OP_UPSERT_MERGE, 0, FE_VERSION_UPSERT},
    [FE_OP_DELETE] = {"DELETE", RT__OP_KIND__OP_DELETE, RT__OP_KIND__OP_DELETE,
                      1, NULL},
    [FE_OP_GET] = {"GET", FE_OP_KIND_READ, FE_OP_KIND_READ, 0, NULL},
};

int fe_op_verb_of(const char *m, size_t n)
{
    if (n == 5 && memcmp(m, "PATCH", 5) == 0) {
        return FE_OP_MERGE; /* Python and JS merge with PATCH (spec §3.13) */
    }
    for (int v = 0; v < FE_OP__NR; v++) {
        if (strlen(fe__ops[v].method) == n &&
            memcmp(fe__ops[v].method, m, n) == 0) {
            return v;
        }
    }
    return -1;
}

int fe_op_kind(enum fe_op_verb verb,
               int if_match,
               const char *version,
               int *kind)
{
    const struct fe__op_row *row = &fe__ops[verb];
    if (if_match) {
        *kind = row->with_if_match;
        return 0;
    }
    *kind = row->without_if_match;
    if (row->needs_if_match) {
        return RT_EMISSINGHEADER;
    }
    if (row->since && version && strcmp(version, row->since) < 0) {
        return RT_EMISSINGHEADER;
    }
    return 0;
}
