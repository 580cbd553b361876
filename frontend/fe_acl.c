/* Table ACLs: see fe_acl.h.
 *
 * The snapshot is rebuilt whole from each map and installed as an
 * fe_snap; lookups hold its read lock only while they copy one policy out,
 * so a SAS check never waits for more than one swap. */
#include "fe_acl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fe_snap.h"
#include "fe_url.h"
#include "fe_xml.h"
#include "rt_alloc.h"
#include "rt_err.h"
#include "rt_time.h"

/* ==== The stored access policies ======================================= */

struct fe__tacl
{
    char *account;
    char lname[FE_TABLE_LNAME];
    size_t n;
    char ids[FE_ACL_MAX][FE_ACL_ID_MAX + 1];
    struct fe_sas_policy pol[FE_ACL_MAX];
};

struct fe__acl_snap
{
    struct fe__tacl *acls; /* by (account, lname) */
    size_t nacls;
};

static struct fe_snap fe__acls = FE_SNAP_INIT;

static void fe__acl_snap_free(struct fe__acl_snap *s)
{
    if (!s) {
        return;
    }
    for (size_t i = 0; i < s->nacls; i++) {
        free(s->acls[i].account);
    }
    free(s->acls);
    free(s);
}

static int fe__tacl_cmp(const void *a, const void *b)
{
    const struct fe__tacl *x = a, *y = b;
    int c = strcmp(x->account, y->account);
    return c ? c : strcmp(x->lname, y->lname);
}

void fe_acl_map_update(const Rt__Map *map)
{
    struct fe__acl_snap *s = rt_xcalloc(1, sizeof(*s));
    size_t nacl = 0;
    for (size_t i = 0; i < map->n_tables; i++) {
        nacl += map->tables[i]->n_acl ? 1 : 0;
    }
    s->acls = rt_xcalloc(nacl, sizeof(*s->acls));
    for (size_t i = 0; i < map->n_tables; i++) {
        const Rt__Table *t = map->tables[i];
        struct fe__tacl *a;
        if (!t->n_acl || strlen(t->name) >= sizeof(a->lname)) {
            continue;
        }
        a = &s->acls[s->nacls++];
        a->account = rt_xstrdup(t->account);
        fe_table_lname(a->lname, t->name);
        for (size_t j = 0; j < t->n_acl && a->n < FE_ACL_MAX; j++) {
            const Rt__SignedIdentifier *si = t->acl[j];
            snprintf(a->ids[a->n], sizeof(a->ids[a->n]), "%s",
                     si->id ? si->id : "");
            snprintf(a->pol[a->n].start, sizeof(a->pol[a->n].start), "%s",
                     si->start ? si->start : "");
            snprintf(a->pol[a->n].expiry, sizeof(a->pol[a->n].expiry), "%s",
                     si->expiry ? si->expiry : "");
            snprintf(a->pol[a->n].permission, sizeof(a->pol[a->n].permission),
                     "%s", si->permission ? si->permission : "");
            a->n++;
        }
    }
    qsort(s->acls, s->nacls, sizeof(*s->acls), fe__tacl_cmp);
    fe__acl_snap_free(fe_snap_install(&fe__acls, s, map->version));
}

void fe_acl_reset(void)
{
    fe__acl_snap_free(fe_snap_take(&fe__acls));
}

int fe_acl_policy_lookup(const char *account,
                         const char *table,
                         const char *id,
                         struct fe_sas_policy *out)
{
    struct fe__tacl key;
    const struct fe__acl_snap *s;
    const struct fe__tacl *a = NULL;
    int rc = RT_ENOTFOUND;
    if (!account || !table || !id || strlen(table) >= sizeof(key.lname)) {
        return RT_ENOTFOUND;
    }
    key.account = (char *)account;
    fe_table_lname(key.lname, table);
    s = fe_snap_read(&fe__acls);
    if (s) {
        a = bsearch(&key, s->acls, s->nacls, sizeof(key), fe__tacl_cmp);
    }
    for (size_t i = 0; a && i < a->n; i++) {
        if (strcmp(a->ids[i], id) == 0) {
            *out = a->pol[i];
            rc = 0;
            break;
        }
    }
    fe_snap_read_end(&fe__acls);
    return rc;
}

/* ==== The ACL document (spec §3.4, §3.5) ============================== */

/* "raud" in order, each at most once. */
static int fe__perm_ok(const char *s)
{
    static const char order[] = "raud";
    size_t pos = 0;
    for (; *s; s++) {
        const char *at = memchr(order + pos, *s, sizeof(order) - 1 - pos);
        if (!at) {
            return 0;
        }
        pos = (size_t)(at - order) + 1;
    }
    return 1;
}

/* Normalizes an ACL time ("" stays ""). */
static int fe__acl_time(const struct fe_xml_node *n, char *out)
{
    char buf[64];
    uint64_t ticks;
    size_t len;
    if (fe_xml_text(n, buf, sizeof(buf)) != 0) {
        return -1;
    }
    len = strlen(buf);
    if (!len) {
        out[0] = '\0';
        return 0;
    }
    if (len == 10) {
        strcat(buf, "T00:00:00Z");
        len = strlen(buf);
    }
    if (rt_time_parse_iso(buf, len, &ticks) != 0) {
        return -1;
    }
    rt_time_format_iso7(ticks, out);
    return 0;
}

int fe_acl_parse(const char *xml, size_t n, struct fe_acl *out)
{
    struct fe_xml_node *root;
    size_t i;
    memset(out, 0, sizeof(*out));
    for (i = 0; i < n && fe_xml_is_space(xml[i]); i++) {
    }
    if (i == n) {
        return 0; /* spec §3.5: an empty body clears the ACL */
    }
    if (fe_xml_parse(xml, n, &root) != 0) {
        return RT_EXML;
    }
    if (strcmp(root->name, "SignedIdentifiers") != 0) {
        goto err;
    }
    for (const struct fe_xml_node *c = root->child; c; c = c->next) {
        const struct fe_xml_node *id, *ap, *f;
        struct fe_acl_id *e;
        if (strcmp(c->name, "SignedIdentifier") != 0) {
            continue;
        }
        if (out->n == FE_ACL_MAX) {
            goto err;
        }
        e = &out->v[out->n];
        if (fe_xml_child(c, "Id", &id) != 1 ||
            fe_xml_text(id, e->id, sizeof(e->id)) != 0 || !e->id[0]) {
            goto err;
        }
        for (size_t j = 0; j < out->n; j++) {
            if (strcmp(out->v[j].id, e->id) == 0) {
                goto err;
            }
        }
        switch (fe_xml_child(c, "AccessPolicy", &ap)) {
            case 0:
                break;
            case 1:
                e->has_policy = 1;
                if (fe_xml_child(ap, "Start", &f) < 0 ||
                    (f && fe__acl_time(f, e->start) != 0)) {
                    goto err;
                }
                if (fe_xml_child(ap, "Expiry", &f) < 0 ||
                    (f && fe__acl_time(f, e->expiry) != 0)) {
                    goto err;
                }
                if (fe_xml_child(ap, "Permission", &f) < 0 ||
                    (f && (fe_xml_text(f, e->permission,
                                       sizeof(e->permission)) != 0 ||
                           !fe__perm_ok(e->permission)))) {
                    goto err;
                }
                break;
            default:
                goto err;
        }
        out->n++;
    }
    fe_xml_free(root);
    return 0;

err:
    fe_xml_free(root);
    memset(out, 0, sizeof(*out));
    return RT_EXML;
}

void fe_acl_write(struct rt_buf *out, const struct fe_acl *acl)
{
    rt_buf_append_str(out, FE_XML_DECL);
    if (acl->n == 0) {
        rt_buf_append_str(out, "<SignedIdentifiers />");
        return;
    }
    rt_buf_append_str(out, "<SignedIdentifiers>");
    for (size_t i = 0; i < acl->n; i++) {
        const struct fe_acl_id *e = &acl->v[i];
        rt_buf_append_str(out, "<SignedIdentifier><Id>");
        fe_xml_escape(out, e->id);
        rt_buf_append_str(out, "</Id>");
        if (e->has_policy) {
            rt_buf_append_str(out, "<AccessPolicy>");
            if (e->start[0]) {
                rt_buf_printf(out, "<Start>%s</Start>", e->start);
            }
            if (e->expiry[0]) {
                rt_buf_printf(out, "<Expiry>%s</Expiry>", e->expiry);
            }
            if (e->permission[0]) {
                rt_buf_printf(out, "<Permission>%s</Permission>",
                              e->permission);
            }
            rt_buf_append_str(out, "</AccessPolicy>");
        }
        rt_buf_append_str(out, "</SignedIdentifier>");
    }
    rt_buf_append_str(out, "</SignedIdentifiers>");
}
