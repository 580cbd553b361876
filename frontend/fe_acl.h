/* Table ACLs (docs/table-api-spec.md §3.4, §3.5, §7.3): the
 * SignedIdentifiers document of Get/Set Table ACL, and the front end's
 * copy of every table's stored access policies, which a service SAS
 * naming a policy ("si", fe_sas.h) is checked against.
 *
 * Layers:
 *  - the document (any thread, pure): fe_acl_parse / fe_acl_write.
 *    Malformed or out-of-limit documents are RT_EXML (400
 *    InvalidXmlDocument), never a crash.
 *  - the policy snapshot: fe_acl_map_update() [any worker's loop, after
 *    each map its fe_route installs: fe_http.c makes it part of the
 *    route's map observer] builds a new snapshot and
 *    installs it (fe_snap.h: unless another worker already installed a
 *    newer map); fe_acl_policy_lookup() [any thread] reads it under the
 *    snapshot's read lock and copies the policy out.
 *
 * The Get/Set Table ACL endpoints are in fe_svc.h.
 * Ownership: the snapshot is owned by this module (fe_acl_reset() frees
 * it); nothing else here allocates. */
#ifndef FE_ACL_H
#define FE_ACL_H

#include <stddef.h>

#include "fe_sas.h"
#include "rt.pb-c.h"
#include "rt_buf.h"

/* Limits (spec §3.5). */
#define FE_ACL_MAX 5
#define FE_ACL_ID_MAX 64

/* A table ACL as parsed from / written to XML. Times are normalized to
 * "YYYY-MM-DDThh:mm:ss.fffffffZ"; "" = absent. */
struct fe_acl_id
{
    char id[FE_ACL_ID_MAX + 1];
    int has_policy;
    char start[FE_SAS_TIME_MAX];
    char expiry[FE_SAS_TIME_MAX];
    char permission[8];
};
struct fe_acl
{
    struct fe_acl_id v[FE_ACL_MAX];
    size_t n;
};

/* ---- the document ---- */

/* An empty body (or only whitespace) is the empty ACL. Errors: RT_EXML
 * (malformed, > 5 identifiers, Id missing / empty / > 64 chars / repeated,
 * Permission not a subsequence of "raud", unparseable Start/Expiry); *out
 * is then empty. */
int fe_acl_parse(const char *xml, size_t n, struct fe_acl *out);
/* Appends the Get Table ACL body for @acl to @out. */
void fe_acl_write(struct rt_buf *out, const struct fe_acl *acl);

/* ---- the stored access policies ---- */

/* [any worker's loop] Rebuilds the snapshot from @map (borrowed:
 * everything needed is copied). A map older than the snapshot's (another
 * worker already installed a newer one) is ignored. */
void fe_acl_map_update(const Rt__Map *map);
/* [any thread] fe_sas_policy_fn over the snapshot: the policy @id of
 * @account's table @table (table names compare case-insensitively, ids
 * exactly). Returns 0 with *out filled, or RT_ENOTFOUND. */
int fe_acl_policy_lookup(const char *account,
                         const char *table,
                         const char *id,
                         struct fe_sas_policy *out);
/* Frees the snapshot (shutdown, tests). */
void fe_acl_reset(void);

#endif
