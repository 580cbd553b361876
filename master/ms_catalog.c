/* Catalog: LMDB persistence plus the in-memory mirror (see ms_catalog.h).
 *
 * Every mutation follows the same path: validate against the mirror,
 * compute the new counters, write everything in one LMDB write transaction,
 * commit (LMDB syncs the data and meta pages before mdb_txn_commit
 * returns; the environment is opened without MDB_NOSYNC/MDB_NOMETASYNC),
 * and only then change the mirror. A failed put aborts the transaction;
 * the mirror is untouched, so it always equals what is on disk. */
#include "ms_catalog.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <lmdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ms_catalog_int.h"
#include "ms_util.h"
#include "rt.pb-c.h"
#include "rt_alloc.h"
#include "rt_buf.h"
#include "rt_err.h"
#include "rt_lmdb.h"
#include "rt_log.h"
#include "rt_utf8.h"

#define MS__MAPSIZE (1ull << 30) /* sparse file; grows on demand */

/* A deleted table's name in its grace period. */
struct ms__tomb
{
    char *account;
    char *lname;
    uint64_t until_ms; /* wall clock */
};

static const char *const ms__counter_keys[MS__NCOUNTERS] = {
    "next_table_id", "next_range_id", "next_server_id",
    "map_version",   "next_move_id",  "master_term"};

/* ---- helpers ---- */

/* LMDB codes -> RT_E* through the common table (rt_lmdb.h), with one
 * difference: MDB_TXN_FULL there means "the client's request is too large"
 * (413). No catalog transaction carries client-sized data (names, ACLs and
 * CORS rules are bounded, see the limits in ms_catalog.h), so here it is a
 * storage fault and answers 500 like a full map. */
static int ms__catalog_err(int rc)
{
    int err = rt_lmdb_err(rc);
    return err == RT_ETOOLARGE ? RT_ENOSPACE : err;
}

static void ms__lower(char *dst, const char *src, size_t cap)
{
    size_t i = 0;
    for (; src[i] && i + 1 < cap; i++) {
        dst[i] = (char)tolower((unsigned char)src[i]);
    }
    dst[i] = '\0';
}

int ms_table_name_check(const char *name)
{
    size_t n = strlen(name);
    if (n < 3 || n > MS_TABLE_NAME_MAX || !isalpha((unsigned char)name[0])) {
        return RT_EBADNAME;
    }
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)name[i];
        if (c >= 0x80 || !isalnum(c)) {
            return RT_EBADNAME;
        }
    }
    if (strcasecmp(name, "tables") == 0) {
        return RT_EBADNAME;
    }
    return 0;
}

static int ms__table_cmp(const char *acct_a,
                         const char *lname_a,
                         const char *acct_b,
                         const char *lname_b)
{
    int c = strcmp(acct_a, acct_b);
    return c ? c : strcmp(lname_a, lname_b);
}

/* The key of the tables and the tombstones: (account, lower-case name). */
struct ms__name_key
{
    const char *account;
    const char *lname;
};

static int ms__table_vs_key(const void *item, const void *key)
{
    const struct ms_table *t = item;
    const struct ms__name_key *k = key;
    return ms__table_cmp(t->account, t->lname, k->account, k->lname);
}

/* First index whose (account, lname) >= the key. */
static size_t ms__tables_lower_bound(const struct ms_catalog *cat,
                                     const char *account,
                                     const char *lname)
{
    const struct ms__name_key k = {account, lname};
    return ms_vec_lower_bound_by(&cat->tables, ms__table_vs_key, &k);
}

#define MS__TABLE_ID offsetof(struct ms_table, id)
#define MS__RANGE_ID offsetof(struct ms_range, id)
#define MS__SERVER_ID offsetof(struct ms_server_rec, id)
#define MS__MOVE_ID offsetof(Rt__MoveReq, move_id)

static void ms__acl_free(struct ms_acl_entry *acl, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(acl[i].id);
        free(acl[i].start);
        free(acl[i].expiry);
        free(acl[i].permission);
    }
    free(acl);
}

/* Deep copy; NULL strings become "". */
static struct ms_acl_entry *ms__acl_copy(const struct ms_acl_entry *src,
                                         size_t n)
{
    struct ms_acl_entry *acl;
    if (n == 0) {
        return NULL;
    }
    acl = rt_xcalloc(n, sizeof(*acl));
    for (size_t i = 0; i < n; i++) {
        acl[i].id = rt_xstrdup(src[i].id ? src[i].id : "");
        acl[i].has_policy = src[i].has_policy;
        acl[i].start = rt_xstrdup(src[i].start ? src[i].start : "");
        acl[i].expiry = rt_xstrdup(src[i].expiry ? src[i].expiry : "");
        acl[i].permission =
            rt_xstrdup(src[i].permission ? src[i].permission : "");
    }
    return acl;
}

static void ms__table_free(struct ms_table *t)
{
    if (t) {
        ms__acl_free(t->acl, t->nacl);
        free(t->account);
        free(t->name);
        free(t->lname);
        free(t);
    }
}

static void ms__range_free(struct ms_range *r)
{
    if (r) {
        free(r->low);
        free(r->high);
        free(r);
    }
}

static void ms__server_free(struct ms_server_rec *s)
{
    if (s) {
        free(s->addr);
        free(s->zone);
        free(s->identity);
        free(s);
    }
}

static void ms__props_free(struct ms_props *p)
{
    if (p) {
        if (p->props) {
            rt__service_props__free_unpacked(p->props, NULL);
        }
        free(p->account);
        free(p);
    }
}

static void ms__tomb_free(struct ms__tomb *t)
{
    if (t) {
        free(t->account);
        free(t->lname);
        free(t);
    }
}

static struct ms_table *ms__table_new(uint64_t id,
                                      const char *account,
                                      const char *name)
{
    struct ms_table *t = rt_xcalloc(1, sizeof(*t));
    size_t n = strlen(name) + 1;
    t->id = id;
    t->account = rt_xstrdup(account);
    t->name = rt_xstrdup(name);
    t->lname = rt_xmalloc(n);
    ms__lower(t->lname, name, n);
    return t;
}

/* The one place a range's owner is set: @server_id becomes the primary at
 * @epoch with the RF 1 replica set (a new table's placed set is laid over
 * it by ms__range_set_replicas). Every owner change is a new primary
 * generation, so primary_epoch = epoch; no seal intent survives it. */
static void ms__range_set_primary(struct ms_range *r,
                                  uint64_t server_id,
                                  uint64_t epoch)
{
    r->server_id = server_id;
    r->epoch = epoch;
    r->nreplicas = 1;
    r->replicas[0].server_id = server_id;
    r->replicas[0].role = RT__REPL_ROLE__ROLE_PRIMARY;
    r->nisr = 1;
    r->isr[0] = server_id;
    r->primary_epoch = epoch;
    r->rf = 1;
    r->min_insync = 1;
    r->seal_epoch = 0;
    r->seal_kind = 0;
    r->seal_to = 0;
}

/* A new range's replica set as placed (docs/DESIGN-replication.md §8.3):
 * @rs->servers[0] is the primary (already set by ms__range_set_primary),
 * the others secondaries, all of them in sync. */
static void ms__range_set_replicas(struct ms_range *r,
                                   const struct ms_replica_spec *rs)
{
    r->nreplicas = rs->n;
    for (size_t i = 0; i < rs->n; i++) {
        r->replicas[i].server_id = rs->servers[i];
        r->replicas[i].role = i == 0 ? RT__REPL_ROLE__ROLE_PRIMARY
                                     : RT__REPL_ROLE__ROLE_SECONDARY;
        r->isr[i] = rs->servers[i];
    }
    r->nisr = rs->n;
    r->rf = rs->rf;
    r->min_insync = rs->min_insync;
}

static struct ms_range *ms__range_new(const struct ms_range_put *p, uint64_t id)
{
    struct ms_range *r = rt_xcalloc(1, sizeof(*r));
    r->id = id;
    r->table_id = p->table_id;
    r->low = rt_xstrdup(p->low ? p->low : "");
    r->high = rt_xstrdup(p->high_inf || !p->high ? "" : p->high);
    r->high_inf = p->high_inf;
    for (size_t i = 0; i < MS_REPLICAS_MAX; i++) {
        rt__replica__init(&r->replicas[i]);
        r->replica_v[i] = &r->replicas[i];
    }
    ms__range_set_primary(r, p->server_id, p->epoch);
    return r;
}

/* Mirror insertions keep each vector sorted. */
static void ms__mirror_add_table(struct ms_catalog *cat, struct ms_table *t)
{
    ms_vec_insert(&cat->tables,
                  ms__tables_lower_bound(cat, t->account, t->lname), t);
    ms_vec_insert(&cat->tables_by_id,
                  ms_vec_lower_bound(&cat->tables_by_id, MS__TABLE_ID, t->id),
                  t);
}

static void ms__mirror_put_range(struct ms_catalog *cat, struct ms_range *r)
{
    size_t i;
    if (ms_vec_find(&cat->ranges, MS__RANGE_ID, r->id, &i)) {
        ms__range_free(cat->ranges.v[i]);
        cat->ranges.v[i] = r;
        return;
    }
    ms_vec_insert(&cat->ranges, i, r);
}

static void ms__mirror_put_server(struct ms_catalog *cat,
                                  struct ms_server_rec *s)
{
    size_t i;
    if (ms_vec_find(&cat->servers, MS__SERVER_ID, s->id, &i)) {
        ms__server_free(cat->servers.v[i]);
        cat->servers.v[i] = s;
        return;
    }
    ms_vec_insert(&cat->servers, i, s);
}

/* ---- tombstones (mirror) ---- */

uint64_t ms_cat_now_ms(const struct ms_catalog *cat)
{
    return cat->clock ? cat->clock(cat->clock_arg) : ms_unix_ms();
}

static int ms__tomb_vs_key(const void *item, const void *key)
{
    const struct ms__tomb *t = item;
    const struct ms__name_key *k = key;
    return ms__table_cmp(t->account, t->lname, k->account, k->lname);
}

static size_t ms__tombs_lower_bound(const struct ms_catalog *cat,
                                    const char *account,
                                    const char *lname)
{
    const struct ms__name_key k = {account, lname};
    return ms_vec_lower_bound_by(&cat->tombs, ms__tomb_vs_key, &k);
}

static struct ms__tomb *ms__tomb_find(const struct ms_catalog *cat,
                                      const char *account,
                                      const char *lname,
                                      size_t *idx)
{
    size_t i = ms__tombs_lower_bound(cat, account, lname);
    if (i < cat->tombs.n) {
        struct ms__tomb *t = cat->tombs.v[i];
        if (ms__table_cmp(t->account, t->lname, account, lname) == 0) {
            if (idx) {
                *idx = i;
            }
            return t;
        }
    }
    return NULL;
}

/* ---- LMDB encoding ---- */

static void ms__table_key(struct rt_buf *k,
                          const char *account,
                          const char *lname)
{
    rt_buf_reset(k);
    rt_buf_append_str(k, account);
    rt_buf_append_u8(k, 0);
    rt_buf_append_str(k, lname);
}

static int ms__put_msg(MDB_txn *txn,
                       MDB_dbi dbi,
                       const void *key,
                       size_t klen,
                       const ProtobufCMessage *msg)
{
    MDB_val k = {klen, (void *)key};
    MDB_val v = {protobuf_c_message_get_packed_size(msg), NULL};
    int rc = mdb_put(txn, dbi, &k, &v, MDB_RESERVE);
    if (rc == 0) {
        protobuf_c_message_pack(msg, v.mv_data);
    }
    return rc;
}

static int ms__put_u64key_msg(MDB_txn *txn,
                              MDB_dbi dbi,
                              uint64_t id,
                              const ProtobufCMessage *msg)
{
    uint8_t key[8];
    rt_put_u64be(key, id);
    return ms__put_msg(txn, dbi, key, sizeof(key), msg);
}

static int ms__put_tomb(MDB_txn *txn,
                        struct ms_catalog *cat,
                        const char *account,
                        const char *lname,
                        uint64_t until_ms)
{
    struct rt_buf key = RT_BUF_INIT;
    uint8_t buf[8];
    MDB_val k, v = {sizeof(buf), buf};
    int rc;
    ms__table_key(&key, account, lname);
    k.mv_size = key.len;
    k.mv_data = key.data;
    rt_put_u64be(buf, until_ms);
    rc = mdb_put(txn, cat->db_deleted, &k, &v, 0);
    rt_buf_free(&key);
    return rc;
}

static int ms__del_tomb(MDB_txn *txn,
                        struct ms_catalog *cat,
                        const char *account,
                        const char *lname)
{
    struct rt_buf key = RT_BUF_INIT;
    MDB_val k;
    int rc;
    ms__table_key(&key, account, lname);
    k.mv_size = key.len;
    k.mv_data = key.data;
    rc = mdb_del(txn, cat->db_deleted, &k, NULL);
    rt_buf_free(&key);
    return rc;
}

static int ms__del_u64key(MDB_txn *txn, MDB_dbi dbi, uint64_t id)
{
    uint8_t key[8];
    MDB_val k = {sizeof(key), key};
    rt_put_u64be(key, id);
    return mdb_del(txn, dbi, &k, NULL);
}

static int ms__put_table(MDB_txn *txn,
                         struct ms_catalog *cat,
                         const struct ms_table *t)
{
    Rt__Table msg = RT__TABLE__INIT;
    Rt__SignedIdentifier sv[MS_ACL_MAX], *svp[MS_ACL_MAX];
    struct rt_buf key = RT_BUF_INIT;
    int rc;
    RT_PRE(t->nacl <= MS_ACL_MAX);
    msg.account = t->account;
    msg.name = t->name;
    msg.id = t->id;
    for (size_t i = 0; i < t->nacl; i++) {
        ms_acl_to_pb(&t->acl[i], &sv[i]);
        svp[i] = &sv[i];
    }
    msg.n_acl = t->nacl;
    msg.acl = svp;
    ms__table_key(&key, t->account, t->lname);
    rc = ms__put_msg(txn, cat->db_tables, key.data, key.len, &msg.base);
    rt_buf_free(&key);
    return rc;
}

void ms_range_to_pb(const struct ms_range *r, Rt__Range *out)
{
    rt__range__init(out);
    out->id = r->id;
    out->table_id = r->table_id;
    out->low = r->low;
    out->high = r->high;
    out->high_inf = r->high_inf;
    out->server_id = r->server_id;
    out->epoch = r->epoch;
    /* Borrowed like the strings: the message is packed, never changed. */
    out->n_replicas = r->nreplicas;
    out->replicas = (Rt__Replica **)r->replica_v;
    out->n_isr = r->nisr;
    out->isr = (uint64_t *)r->isr;
    out->primary_epoch = r->primary_epoch;
    out->rf = r->rf;
    out->min_insync = r->min_insync;
    out->seal_epoch = r->seal_epoch;
    out->seal_kind = r->seal_kind;
    out->seal_to = r->seal_to;
}

static bool ms__ids_distinct(const uint64_t *ids, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        for (size_t j = 0; j < i; j++) {
            if (ids[i] == ids[j]) {
                return false;
            }
        }
    }
    return true;
}

bool ms_range_replicas_valid(const struct ms_range *r)
{
    uint64_t ids[MS_REPLICAS_MAX];
    size_t nprimary = 0;
    bool isr_has_primary = false;

    if (r->nreplicas < 1 || r->nreplicas > MS_REPLICAS_MAX || r->nisr < 1 ||
        r->nisr > r->nreplicas || r->primary_epoch > r->epoch ||
        r->min_insync < 1 || r->min_insync > r->rf) {
        return false;
    }
    for (size_t i = 0; i < r->nreplicas; i++) {
        const Rt__Replica *rep = &r->replicas[i];
        ids[i] = rep->server_id;
        if (rep->role < RT__REPL_ROLE__ROLE_PRIMARY ||
            rep->role > RT__REPL_ROLE__ROLE_LEARNER) {
            return false;
        }
        if (rep->role == RT__REPL_ROLE__ROLE_PRIMARY) {
            nprimary++;
            if (rep->server_id != r->server_id) {
                return false;
            }
        }
    }
    if (nprimary != 1 || !ms__ids_distinct(ids, r->nreplicas) ||
        !ms__ids_distinct(r->isr, r->nisr)) {
        return false;
    }
    for (size_t i = 0; i < r->nisr; i++) {
        size_t j = 0;
        while (j < r->nreplicas && r->replicas[j].server_id != r->isr[i]) {
            j++;
        }
        if (j == r->nreplicas ||
            r->replicas[j].role == RT__REPL_ROLE__ROLE_LEARNER) {
            return false;
        }
        isr_has_primary = isr_has_primary || r->isr[i] == r->server_id;
    }
    return isr_has_primary;
}

static int ms__put_range(MDB_txn *txn,
                         struct ms_catalog *cat,
                         const struct ms_range *r)
{
    Rt__Range msg;
    ms_range_to_pb(r, &msg);
    return ms__put_u64key_msg(txn, cat->db_ranges, r->id, &msg.base);
}

static int ms__put_server(MDB_txn *txn,
                          struct ms_catalog *cat,
                          const struct ms_server_rec *s)
{
    Rt__Server msg = RT__SERVER__INIT;
    msg.id = s->id;
    msg.addr = s->addr;
    /* The map carries the runtime up/down state; the stored field only
     * says whether the server is being drained. */
    msg.state = s->draining ? MS_SERVER_REC_DRAINING : 0;
    msg.zone = s->zone;
    if (s->has_incarnation) {
        msg.incarnation.data = (uint8_t *)s->incarnation;
        msg.incarnation.len = MS_INCARNATION_SIZE;
    }
    msg.identity = s->identity;
    return ms__put_u64key_msg(txn, cat->db_servers, s->id, &msg.base);
}

static int ms__put_counters(MDB_txn *txn,
                            struct ms_catalog *cat,
                            const struct ms_counters *c)
{
    const uint64_t vals[MS__NCOUNTERS] = {c->next_table_id,  c->next_range_id,
                                          c->next_server_id, c->map_version,
                                          c->next_move_id,   c->master_term};
    for (int i = 0; i < MS__NCOUNTERS; i++) {
        uint8_t buf[8];
        MDB_val k = {strlen(ms__counter_keys[i]), (void *)ms__counter_keys[i]};
        MDB_val v = {sizeof(buf), buf};
        int rc;
        rt_put_u64be(buf, vals[i]);
        rc = mdb_put(txn, cat->db_counters, &k, &v, 0);
        if (rc) {
            return rc;
        }
    }
    return 0;
}

int ms_cat_txn_begin(struct ms_catalog *cat, MDB_txn **txn)
{
    int rc = mdb_txn_begin(cat->env, NULL, 0, txn);
    if (rc) {
        rt_log(RT_LOG_ERROR, "catalog: begin txn: %s", mdb_strerror(rc));
        cat->local_err = ms__catalog_err(rc);
    }
    return rc;
}

/* Commits with @ctr as the new counters; aborts on any earlier error
 * (@rc != 0). Returns 0 or an RT_E* code. */
int ms_cat_txn_finish(struct ms_catalog *cat,
                      MDB_txn *txn,
                      int rc,
                      const struct ms_counters *ctr,
                      const char *what)
{
    if (rc == 0) {
        rc = ms__put_counters(txn, cat, ctr);
    }
    if (rc == 0) {
        rc = mdb_txn_commit(txn);
    } else {
        mdb_txn_abort(txn);
    }
    if (rc) {
        rt_log(RT_LOG_ERROR, "catalog: %s: lmdb: %s", what, mdb_strerror(rc));
        /* A failed write is this member's fault, never the command's: the
         * caller (ms_fsm) must not treat it as a result. */
        cat->local_err = ms__catalog_err(rc);
        return cat->local_err;
    }
    cat->ctr = *ctr;
    return 0;
}

/* ---- open / load ---- */

static int ms__load_counters(struct ms_catalog *cat, MDB_txn *txn)
{
    uint64_t *vals[MS__NCOUNTERS] = {
        &cat->ctr.next_table_id,  &cat->ctr.next_range_id,
        &cat->ctr.next_server_id, &cat->ctr.map_version,
        &cat->ctr.next_move_id,   &cat->ctr.master_term};
    for (int i = 0; i < MS__NCOUNTERS; i++) {
        MDB_val k = {strlen(ms__counter_keys[i]), (void *)ms__counter_keys[i]};
        MDB_val v;
        int rc = mdb_get(txn, cat->db_counters, &k, &v);
        if (rc == MDB_NOTFOUND) {
            continue;
        }
        if (rc) {
            return ms__catalog_err(rc);
        }
        if (v.mv_size != 8) {
            return RT_ECORRUPT;
        }
        *vals[i] = rt_get_u64be(v.mv_data);
    }
    return 0;
}

static int ms__load_db(struct ms_catalog *cat,
                       MDB_txn *txn,
                       MDB_dbi dbi,
                       int (*one)(struct ms_catalog *,
                                  const MDB_val *,
                                  const MDB_val *))
{
    MDB_cursor *cur;
    MDB_val k, v;
    int rc = mdb_cursor_open(txn, dbi, &cur);
    if (rc) {
        return ms__catalog_err(rc);
    }
    while ((rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) == 0) {
        int err = one(cat, &k, &v);
        if (err) {
            mdb_cursor_close(cur);
            return err;
        }
    }
    mdb_cursor_close(cur);
    return rc == MDB_NOTFOUND ? 0 : ms__catalog_err(rc);
}

/* A stored record that does not decode or breaks a rule: frees @m (may
 * be NULL) and the catalog does not open. */
static int ms__corrupt(ProtobufCMessage *m)
{
    if (m) {
        protobuf_c_message_free_unpacked(m, NULL);
    }
    return RT_ECORRUPT;
}

static int ms__load_table(struct ms_catalog *cat,
                          const MDB_val *k,
                          const MDB_val *v)
{
    Rt__Table *m = rt__table__unpack(NULL, v->mv_size, v->mv_data);
    struct ms_table *t;
    (void)k;
    if (!m || !m->account || !m->name || m->id == 0) {
        return ms__corrupt((ProtobufCMessage *)m);
    }
    t = ms__table_new(m->id, m->account, m->name);
    if (m->n_acl) {
        struct ms_acl_entry *acl = rt_xcalloc(m->n_acl, sizeof(*acl));
        for (size_t i = 0; i < m->n_acl; i++) {
            ms_acl_from_pb(m->acl[i], &acl[i]);
        }
        t->acl = ms__acl_copy(acl, m->n_acl);
        t->nacl = m->n_acl;
        free(acl);
    }
    rt__table__free_unpacked(m, NULL);
    ms__mirror_add_table(cat, t);
    return 0;
}

static int ms__load_range(struct ms_catalog *cat,
                          const MDB_val *k,
                          const MDB_val *v)
{
    Rt__Range *m = rt__range__unpack(NULL, v->mv_size, v->mv_data);
    struct ms_range_put p;
    struct ms_range *r;
    (void)k;
    if (!m || m->id == 0) {
        return ms__corrupt((ProtobufCMessage *)m);
    }
    p.id = m->id;
    p.table_id = m->table_id;
    p.low = m->low;
    p.high = m->high;
    p.high_inf = m->high_inf;
    p.server_id = m->server_id;
    p.epoch = m->epoch;
    r = ms__range_new(&p, m->id); /* RF 1 defaults: an old record */
    if (m->n_replicas) {
        if (m->n_replicas > MS_REPLICAS_MAX || m->n_isr > MS_REPLICAS_MAX) {
            ms__range_free(r);
            return ms__corrupt((ProtobufCMessage *)m);
        }
        r->nreplicas = m->n_replicas;
        for (size_t i = 0; i < m->n_replicas; i++) {
            r->replicas[i].server_id = m->replicas[i]->server_id;
            r->replicas[i].role = m->replicas[i]->role;
        }
        r->nisr = m->n_isr;
        memcpy(r->isr, m->isr, m->n_isr * sizeof(uint64_t));
        r->primary_epoch = m->primary_epoch;
        r->rf = m->rf;
        r->min_insync = m->min_insync;
        r->seal_epoch = m->seal_epoch;
        r->seal_kind = m->seal_kind;
        r->seal_to = m->seal_to;
    }
    if (!ms_range_replicas_valid(r)) {
        ms__range_free(r);
        return ms__corrupt((ProtobufCMessage *)m);
    }
    ms__mirror_put_range(cat, r);
    rt__range__free_unpacked(m, NULL);
    return 0;
}

static int ms__load_server(struct ms_catalog *cat,
                           const MDB_val *k,
                           const MDB_val *v)
{
    Rt__Server *m = rt__server__unpack(NULL, v->mv_size, v->mv_data);
    struct ms_server_rec *s;
    (void)k;
    if (!m || m->id == 0 ||
        (m->incarnation.len != 0 &&
         m->incarnation.len != MS_INCARNATION_SIZE)) {
        return ms__corrupt((ProtobufCMessage *)m);
    }
    s = rt_xcalloc(1, sizeof(*s));
    s->id = m->id;
    s->addr = rt_xstrdup(m->addr ? m->addr : "");
    s->draining = m->state == MS_SERVER_REC_DRAINING;
    s->zone = rt_xstrdup(m->zone ? m->zone : "");
    s->identity = rt_xstrdup(m->identity ? m->identity : "");
    s->has_incarnation = m->incarnation.len == MS_INCARNATION_SIZE;
    if (s->has_incarnation) {
        memcpy(s->incarnation, m->incarnation.data, MS_INCARNATION_SIZE);
    }
    rt__server__free_unpacked(m, NULL);
    ms__mirror_put_server(cat, s);
    return 0;
}

static int ms__load_props(struct ms_catalog *cat,
                          const MDB_val *k,
                          const MDB_val *v)
{
    Rt__ServiceProps *m =
        rt__service_props__unpack(NULL, v->mv_size, v->mv_data);
    struct ms_props *p;
    if (!m || k->mv_size == 0 || k->mv_size > MS_ACCOUNT_MAX) {
        return ms__corrupt((ProtobufCMessage *)m);
    }
    p = rt_xcalloc(1, sizeof(*p));
    p->account = rt_xmalloc(k->mv_size + 1);
    memcpy(p->account, k->mv_data, k->mv_size);
    p->account[k->mv_size] = '\0';
    p->props = m;
    /* LMDB iterates keys in byte order = strcmp order: stays sorted. */
    ms_vec_push(&cat->props, p);
    return 0;
}

static int ms__load_tomb(struct ms_catalog *cat,
                         const MDB_val *k,
                         const MDB_val *v)
{
    const char *key = k->mv_data;
    const char *nul = memchr(key, 0, k->mv_size);
    struct ms__tomb *t;
    if (!nul || v->mv_size != 8) {
        return RT_ECORRUPT;
    }
    t = rt_xcalloc(1, sizeof(*t));
    t->account = rt_xstrdup(key);
    t->lname = rt_xmalloc(k->mv_size - (size_t)(nul - key));
    memcpy(t->lname, nul + 1, k->mv_size - (size_t)(nul - key) - 1);
    t->lname[k->mv_size - (size_t)(nul - key) - 1] = '\0';
    t->until_ms = rt_get_u64be(v->mv_data);
    ms_vec_push(&cat->tombs, t); /* key order = (account, lname) order */
    return 0;
}

static int ms__load_move(struct ms_catalog *cat,
                         const MDB_val *k,
                         const MDB_val *v)
{
    Rt__MoveReq *m = rt__move_req__unpack(NULL, v->mv_size, v->mv_data);
    (void)k;
    if (!m || m->move_id == 0 || !m->range) {
        return ms__corrupt((ProtobufCMessage *)m);
    }
    ms_vec_push(&cat->moves, m); /* key order = move id order */
    return 0;
}

static int ms__load_leader(struct ms_catalog *cat,
                           const MDB_val *k,
                           const MDB_val *v)
{
    Rt__LeaderStartCmd *m =
        rt__leader_start_cmd__unpack(NULL, v->mv_size, v->mv_data);
    (void)k;
    if (!m || cat->leader) {
        return ms__corrupt((ProtobufCMessage *)m);
    }
    cat->leader = m;
    return 0;
}

/* Every database, and what loads its records into the mirror (the
 * counters are read first, on their own). The order is the snapshot's and
 * the digest's. */
static const struct
{
    const char *name;
    size_t dbi_off;
    int (*load)(struct ms_catalog *, const MDB_val *, const MDB_val *);
} ms__dbs[MS_CAT_NDBS] = {
    {"tables", offsetof(struct ms_catalog, db_tables), ms__load_table},
    {"ranges", offsetof(struct ms_catalog, db_ranges), ms__load_range},
    {"servers", offsetof(struct ms_catalog, db_servers), ms__load_server},
    {"counters", offsetof(struct ms_catalog, db_counters), NULL},
    {"props", offsetof(struct ms_catalog, db_props), ms__load_props},
    {"deleted", offsetof(struct ms_catalog, db_deleted), ms__load_tomb},
    {"moves", offsetof(struct ms_catalog, db_moves), ms__load_move},
    {"leader", offsetof(struct ms_catalog, db_leader), ms__load_leader}};

const char *ms_cat_db_name(size_t i)
{
    RT_PRE(i < MS_CAT_NDBS);
    return ms__dbs[i].name;
}

MDB_dbi *ms_cat_db(struct ms_catalog *cat, size_t i)
{
    RT_PRE(i < MS_CAT_NDBS);
    return (MDB_dbi *)((char *)cat + ms__dbs[i].dbi_off);
}

/* Range bounds are compared in UTF-16 code-unit order (rt_utf16_cmpz),
 * Azure's key order. A catalog written before that order compared bounds
 * as UTF-8 bytes; the two disagree only between supplementary characters
 * and U+E000..U+FFFF, so only a table split at bounds from both groups
 * (e.g. at U+E000 and then at U+1F600) can hold a range whose low is not
 * below its high any more. Such a range cannot be reordered into a valid
 * map (its keys overlap its neighbours'), so the catalog is refused,
 * naming the range to merge with the previous release (rtctl merge). The
 * check is a pure function of the records, so a snapshot restored on a
 * follower is refused alike. Returns 0 or RT_ECORRUPT with @errmsg. */
static int ms__key_order_check(const struct ms_catalog *cat, char *errmsg)
{
    for (size_t i = 0; i < cat->ranges.n; i++) {
        const struct ms_range *r = cat->ranges.v[i];
        if (!r->high_inf && rt_utf16_cmpz(r->low, r->high) >= 0) {
            rt_errmsg_printf(errmsg,
                             "range %llu of table %llu has bounds out of "
                             "order in UTF-16 key order (split at keys "
                             "ordered as UTF-8 bytes by an older release): "
                             "with that release, merge it into a "
                             "neighbour (rtctl merge %llu, or rtctl merge "
                             "on the range before it), then upgrade",
                             (unsigned long long)r->id,
                             (unsigned long long)r->table_id,
                             (unsigned long long)r->id);
            return RT_ECORRUPT;
        }
    }
    return 0;
}

int ms_cat_load(struct ms_catalog *cat, MDB_txn *txn)
{
    int err;
    cat->ctr.next_table_id = 1;
    cat->ctr.next_range_id = 1;
    cat->ctr.next_server_id = 1;
    cat->ctr.map_version = 0;
    cat->ctr.next_move_id = 1;
    cat->ctr.master_term = 0;
    err = ms__load_counters(cat, txn);
    for (size_t i = 0; i < MS_CAT_NDBS && !err; i++) {
        if (ms__dbs[i].load) {
            err = ms__load_db(cat, txn, *ms_cat_db(cat, i), ms__dbs[i].load);
        }
    }
    if (!err) {
        char why[RT_ERRMSG_SIZE];
        err = ms__key_order_check(cat, why);
        if (err) {
            rt_log(RT_LOG_ERROR, "catalog: %s", why);
        }
    }
    return err;
}

static int ms__open_dbs(struct ms_catalog *cat, unsigned flags, char *errmsg)
{
    MDB_txn *txn;
    int rc = mdb_txn_begin(cat->env, NULL, 0, &txn);
    int err;
    if (rc) {
        goto err_lmdb;
    }
    for (size_t i = 0; i < MS_CAT_NDBS; i++) {
        rc = mdb_dbi_open(txn, ms__dbs[i].name, MDB_CREATE, ms_cat_db(cat, i));
        if (rc) {
            mdb_txn_abort(txn);
            goto err_lmdb;
        }
    }
    err = ms_cat_load(cat, txn);
    if (err) {
        mdb_txn_abort(txn);
        if (errmsg &&
            (err != RT_ECORRUPT || ms__key_order_check(cat, errmsg) == 0)) {
            rt_errmsg_printf(errmsg, "load catalog: %s", rt_strerror(err));
        }
        return err;
    }
    /* A new term for every start of a master on this catalog, in the
     * commit that also creates the named databases on first open. With
     * Raft the term comes from LEADER_START instead. */
    if (!(flags & MS_CATALOG_NO_TERM_BUMP)) {
        cat->ctr.master_term++;
    }
    rc = ms__put_counters(txn, cat, &cat->ctr);
    if (rc) {
        mdb_txn_abort(txn);
        goto err_lmdb;
    }
    rc = mdb_txn_commit(txn);
    if (rc) {
        goto err_lmdb;
    }
    return 0;

err_lmdb:
    if (errmsg) {
        rt_errmsg_printf(errmsg, "open catalog databases: lmdb: %s",
                         mdb_strerror(rc));
    }
    return ms__catalog_err(rc);
}

int ms_catalog_open(const char *dir, struct ms_catalog **out, char *errmsg)
{
    return ms_catalog_open_flags(dir, 0, out, errmsg);
}

int ms_catalog_open_flags(const char *dir,
                          unsigned flags,
                          struct ms_catalog **out,
                          char *errmsg)
{
    struct ms_catalog *cat = rt_xcalloc(1, sizeof(*cat));
    char path[4096];
    int rc, err;

    if (errmsg) {
        errmsg[0] = '\0';
    }
    cat->lock_fd = -1;
    if (ms_mkdir_p(dir) != 0) {
        if (errmsg) {
            rt_errmsg_printf(errmsg, "mkdir %s: %s", dir, strerror(errno));
        }
        err = RT_EIO;
        goto err_after_alloc;
    }
    snprintf(path, sizeof(path), "%s/master.lock", dir);
    cat->lock_fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (cat->lock_fd < 0 || flock(cat->lock_fd, LOCK_EX | LOCK_NB) != 0) {
        if (errmsg) {
            rt_errmsg_printf(errmsg, "lock %s: %s%s", path, strerror(errno),
                             errno == EWOULDBLOCK
                                 ? " (another master uses this directory)"
                                 : "");
        }
        err = RT_EIO;
        goto err_after_alloc;
    }
    rc = mdb_env_create(&cat->env);
    if (rc == 0) {
        rc = mdb_env_set_maxdbs(cat->env, 16);
    }
    if (rc == 0) {
        rc = mdb_env_set_mapsize(cat->env, MS__MAPSIZE);
    }
    if (rc == 0) {
        /* Alone, every commit is durable (no MDB_NOSYNC); a view of the
         * Raft log asks for MDB_NOSYNC (the log is the durable record). */
        rc = mdb_env_open(cat->env, dir,
                          (flags & MS_CATALOG_NOSYNC) ? MDB_NOSYNC : 0, 0644);
    }
    if (rc) {
        if (errmsg) {
            rt_errmsg_printf(errmsg, "open lmdb env %s: %s", dir,
                             mdb_strerror(rc));
        }
        err = ms__catalog_err(rc);
        goto err_after_alloc;
    }
    err = ms__open_dbs(cat, flags, errmsg);
    if (err) {
        goto err_after_alloc;
    }
    rt_log(RT_LOG_INFO,
           "catalog: loaded %zu tables, %zu ranges, %zu servers, %zu "
           "accounts with properties, %zu tombstones, %zu unsettled moves, "
           "map version %llu, master term %llu from %s",
           cat->tables.n, cat->ranges.n, cat->servers.n, cat->props.n,
           cat->tombs.n, cat->moves.n, (unsigned long long)cat->ctr.map_version,
           (unsigned long long)cat->ctr.master_term, dir);
    *out = cat;
    return 0;

err_after_alloc:
    ms_catalog_close(cat);
    return err;
}

void ms_cat_mirror_free(struct ms_catalog *cat)
{
    for (size_t i = 0; i < cat->tables.n; i++) {
        ms__table_free(cat->tables.v[i]);
    }
    for (size_t i = 0; i < cat->ranges.n; i++) {
        ms__range_free(cat->ranges.v[i]);
    }
    for (size_t i = 0; i < cat->servers.n; i++) {
        ms__server_free(cat->servers.v[i]);
    }
    for (size_t i = 0; i < cat->props.n; i++) {
        ms__props_free(cat->props.v[i]);
    }
    for (size_t i = 0; i < cat->tombs.n; i++) {
        ms__tomb_free(cat->tombs.v[i]);
    }
    for (size_t i = 0; i < cat->moves.n; i++) {
        rt__move_req__free_unpacked(cat->moves.v[i], NULL);
    }
    ms_vec_free(&cat->moves);
    ms_vec_free(&cat->props);
    ms_vec_free(&cat->tombs);
    ms_vec_free(&cat->tables);
    ms_vec_free(&cat->tables_by_id);
    ms_vec_free(&cat->ranges);
    ms_vec_free(&cat->servers);
    if (cat->leader) {
        rt__leader_start_cmd__free_unpacked(cat->leader, NULL);
        cat->leader = NULL;
    }
}

void ms_catalog_close(struct ms_catalog *cat)
{
    if (!cat) {
        return;
    }
    ms_cat_mirror_free(cat);
    if (cat->env) {
        mdb_env_close(cat->env);
    }
    if (cat->lock_fd >= 0) {
        close(cat->lock_fd); /* releases the flock */
    }
    free(cat);
}

/* ---- reads ---- */

uint64_t ms_catalog_master_term(const struct ms_catalog *cat)
{
    return cat->ctr.master_term;
}

uint64_t ms_catalog_map_version(const struct ms_catalog *cat)
{
    return cat->ctr.map_version;
}

size_t ms_catalog_ntables(const struct ms_catalog *cat)
{
    return cat->tables.n;
}

const struct ms_table *ms_catalog_table_at(const struct ms_catalog *cat,
                                           size_t i)
{
    RT_PRE(i < cat->tables.n);
    return cat->tables.v[i];
}

const struct ms_table *ms_catalog_table_find(const struct ms_catalog *cat,
                                             const char *account,
                                             const char *name)
{
    char lname[MS_TABLE_NAME_MAX + 1];
    size_t i;
    if (strlen(name) > MS_TABLE_NAME_MAX) {
        return NULL;
    }
    ms__lower(lname, name, sizeof(lname));
    i = ms__tables_lower_bound(cat, account, lname);
    if (i < cat->tables.n) {
        const struct ms_table *t = cat->tables.v[i];
        if (ms__table_cmp(t->account, t->lname, account, lname) == 0) {
            return t;
        }
    }
    return NULL;
}

const struct ms_table *ms_catalog_table_by_id(const struct ms_catalog *cat,
                                              uint64_t id)
{
    return ms_vec_find(&cat->tables_by_id, MS__TABLE_ID, id, NULL);
}

void ms_catalog_list_tables(const struct ms_catalog *cat,
                            const char *account,
                            const char *start,
                            uint32_t limit,
                            size_t *first,
                            size_t *count,
                            const struct ms_table **next)
{
    size_t n = strlen(start) + 1;
    char *lstart = rt_xmalloc(n);
    size_t i, end;
    if (limit == 0 || limit > 1000) {
        limit = 1000;
    }
    ms__lower(lstart, start, n);
    i = ms__tables_lower_bound(cat, account, lstart);
    free(lstart);
    end = i;
    while (end < cat->tables.n && end - i < limit &&
           strcmp(((struct ms_table *)cat->tables.v[end])->account, account) ==
               0) {
        end++;
    }
    *first = i;
    *count = end - i;
    *next = NULL;
    if (end < cat->tables.n &&
        strcmp(((struct ms_table *)cat->tables.v[end])->account, account) ==
            0) {
        *next = cat->tables.v[end];
    }
}

size_t ms_catalog_nranges(const struct ms_catalog *cat)
{
    return cat->ranges.n;
}

const struct ms_range *ms_catalog_range_at(const struct ms_catalog *cat,
                                           size_t i)
{
    RT_PRE(i < cat->ranges.n);
    return cat->ranges.v[i];
}

const struct ms_range *ms_catalog_range_find(const struct ms_catalog *cat,
                                             uint64_t id)
{
    return ms_vec_find(&cat->ranges, MS__RANGE_ID, id, NULL);
}

size_t ms_catalog_server_nranges(const struct ms_catalog *cat,
                                 uint64_t server_id)
{
    size_t n = 0;
    for (size_t i = 0; i < cat->ranges.n; i++) {
        if (((struct ms_range *)cat->ranges.v[i])->server_id == server_id) {
            n++;
        }
    }
    return n;
}

bool ms_range_names(const struct ms_range *r, uint64_t server_id)
{
    for (size_t i = 0; i < r->nreplicas; i++) {
        if (r->replicas[i].server_id == server_id) {
            return true;
        }
    }
    return false;
}

size_t ms_catalog_server_nreplicas(const struct ms_catalog *cat,
                                   uint64_t server_id)
{
    size_t n = 0;
    for (size_t i = 0; i < cat->ranges.n; i++) {
        if (ms_range_names(cat->ranges.v[i], server_id)) {
            n++;
        }
    }
    return n;
}

size_t ms_catalog_nservers(const struct ms_catalog *cat)
{
    return cat->servers.n;
}

const struct ms_server_rec *ms_catalog_server_at(const struct ms_catalog *cat,
                                                 size_t i)
{
    RT_PRE(i < cat->servers.n);
    return cat->servers.v[i];
}

const struct ms_server_rec *ms_catalog_server_find(const struct ms_catalog *cat,
                                                   uint64_t id)
{
    return ms_vec_find(&cat->servers, MS__SERVER_ID, id, NULL);
}

/* ---- mutations ---- */

int ms_cat_do_create_table(struct ms_catalog *cat,
                           const char *account,
                           const char *name,
                           const struct ms_replica_spec *rs,
                           uint64_t now_ms,
                           const struct ms_table **table_out,
                           const struct ms_range **range_out)
{
    struct ms_counters ctr = cat->ctr;
    struct ms_table *t;
    struct ms_range *r;
    struct ms_range_put p = {0};
    struct ms__tomb *tomb;
    char lname[MS_TABLE_NAME_MAX + 1];
    size_t tomb_i = 0;
    MDB_txn *txn;
    int rc, err;

    err = ms_table_name_check(name);
    if (err) {
        return err;
    }
    if (!*account || strlen(account) > MS_ACCOUNT_MAX) {
        return RT_EINVAL;
    }
    if (rs->n < 1 || rs->n > MS_REPLICAS_MAX || rs->n > rs->rf) {
        return RT_EINVAL;
    }
    if (ms_catalog_table_find(cat, account, name)) {
        return RT_ETABLEEXISTS;
    }
    /* Spec §3.3: the name of a table deleted moments ago stays taken for
     * the grace period; an expired tombstone goes in this transaction. */
    ms__lower(lname, name, sizeof(lname));
    tomb = ms__tomb_find(cat, account, lname, &tomb_i);
    if (tomb && tomb->until_ms > now_ms) {
        return RT_ETABLEBEINGDELETED;
    }
    t = ms__table_new(ctr.next_table_id++, account, name);
    p.table_id = t->id;
    p.low = "";
    p.high_inf = true;
    p.server_id = rs->servers[0];
    p.epoch = 1;
    r = ms__range_new(&p, ctr.next_range_id++);
    ms__range_set_replicas(r, rs);
    ctr.map_version++;
    if (!ms_range_replicas_valid(r)) {
        err = RT_EINVAL; /* a server twice, or min_insync out of 1..rf */
        goto err_after_alloc;
    }

    rc = ms_cat_txn_begin(cat, &txn);
    if (rc) {
        err = ms__catalog_err(rc);
        goto err_after_alloc;
    }
    rc = ms__put_table(txn, cat, t);
    if (rc == 0) {
        rc = ms__put_range(txn, cat, r);
    }
    if (rc == 0 && tomb) {
        rc = ms__del_tomb(txn, cat, account, lname);
    }
    err = ms_cat_txn_finish(cat, txn, rc, &ctr, "create table");
    if (err) {
        goto err_after_alloc;
    }
    if (tomb) {
        ms__tomb_free(ms_vec_remove(&cat->tombs, tomb_i));
    }
    ms__mirror_add_table(cat, t);
    ms__mirror_put_range(cat, r);
    if (table_out) {
        *table_out = t;
    }
    if (range_out) {
        *range_out = r;
    }
    return 0;

err_after_alloc:
    ms__table_free(t);
    ms__range_free(r);
    return err;
}

int ms_cat_do_delete_table(struct ms_catalog *cat,
                           const char *account,
                           const char *name,
                           uint64_t grace_ms,
                           uint64_t now_ms,
                           struct ms_table_drop *drop)
{
    const struct ms_table *found = ms_catalog_table_find(cat, account, name);
    struct ms_counters ctr = cat->ctr;
    struct ms_table *t;
    struct rt_buf key = RT_BUF_INIT;
    uint64_t until_ms = 0;
    MDB_txn *txn;
    MDB_val k;
    size_t ti, tid_i;
    int rc, err;

    if (!found) {
        return RT_ENOTFOUND;
    }
    t = (struct ms_table *)found;
    ctr.map_version++;
    rc = ms_cat_txn_begin(cat, &txn);
    if (rc) {
        return ms__catalog_err(rc);
    }
    ms__table_key(&key, t->account, t->lname);
    k.mv_size = key.len;
    k.mv_data = key.data;
    rc = mdb_del(txn, cat->db_tables, &k, NULL);
    for (size_t i = 0; rc == 0 && i < cat->ranges.n; i++) {
        const struct ms_range *r = cat->ranges.v[i];
        if (r->table_id == t->id) {
            rc = ms__del_u64key(txn, cat->db_ranges, r->id);
        }
    }
    rt_buf_free(&key);
    if (grace_ms) {
        until_ms = now_ms + grace_ms;
        if (rc == 0) {
            rc = ms__put_tomb(txn, cat, t->account, t->lname, until_ms);
        }
    }
    err = ms_cat_txn_finish(cat, txn, rc, &ctr, "delete table");
    if (err) {
        return err;
    }
    if (grace_ms) {
        size_t i;
        struct ms__tomb *old = ms__tomb_find(cat, t->account, t->lname, &i);
        if (old) {
            old->until_ms = until_ms;
        } else {
            struct ms__tomb *nt = rt_xcalloc(1, sizeof(*nt));
            nt->account = rt_xstrdup(t->account);
            nt->lname = rt_xstrdup(t->lname);
            nt->until_ms = until_ms;
            ms_vec_insert(&cat->tombs,
                          ms__tombs_lower_bound(cat, t->account, t->lname), nt);
        }
    }

    /* Committed: update the mirror and report the owners. */
    if (drop) {
        drop->table_id = t->id;
        drop->server_ids = NULL;
        drop->nservers = 0;
    }
    for (size_t i = 0; i < cat->ranges.n;) {
        struct ms_range *r = cat->ranges.v[i];
        if (r->table_id != t->id) {
            i++;
            continue;
        }
        for (size_t x = 0; drop && x < r->nreplicas; x++) {
            uint64_t sid = r->replicas[x].server_id;
            size_t j = 0;
            while (j < drop->nservers && drop->server_ids[j] != sid) {
                j++;
            }
            if (j == drop->nservers) {
                drop->server_ids = rt_xrealloc(
                    drop->server_ids, (drop->nservers + 1) * sizeof(uint64_t));
                drop->server_ids[drop->nservers++] = sid;
            }
        }
        ms__range_free(ms_vec_remove(&cat->ranges, i));
    }
    ti = ms__tables_lower_bound(cat, t->account, t->lname);
    RT_POST(ti < cat->tables.n && cat->tables.v[ti] == t);
    ms_vec_remove(&cat->tables, ti);
    if (ms_vec_find(&cat->tables_by_id, MS__TABLE_ID, t->id, &tid_i)) {
        ms_vec_remove(&cat->tables_by_id, tid_i);
    }
    ms__table_free(t);
    return 0;
}

void ms_table_drop_free(struct ms_table_drop *drop)
{
    if (drop) {
        free(drop->server_ids);
        drop->server_ids = NULL;
        drop->nservers = 0;
    }
}

int ms_cat_do_update_ranges(struct ms_catalog *cat,
                            const struct ms_range_put *puts,
                            size_t nput,
                            const uint64_t *dels,
                            size_t ndel,
                            uint64_t *new_ids)
{
    struct ms_counters ctr = cat->ctr;
    struct ms_range **built;
    MDB_txn *txn;
    int rc = 0, err;

    for (size_t i = 0; i < ndel; i++) {
        const struct ms_range *r = ms_catalog_range_find(cat, dels[i]);
        if (!r) {
            return RT_ENOTFOUND;
        }
        if (r->nreplicas > 1) {
            return RT_ENOTIMPL;
        }
    }
    for (size_t i = 0; i < nput; i++) {
        const struct ms_range *old =
            puts[i].id ? ms_catalog_range_find(cat, puts[i].id) : NULL;
        if (!ms_catalog_table_by_id(cat, puts[i].table_id)) {
            return RT_ENOTFOUND;
        }
        /* A put builds an RF 1 range: it must not flatten a replica set. */
        if (old && old->nreplicas > 1) {
            return RT_ENOTIMPL;
        }
        if (puts[i].id >= ctr.next_range_id ||
            (!puts[i].high_inf && !puts[i].high)) {
            return RT_EINVAL;
        }
    }
    built = rt_xcalloc(nput ? nput : 1, sizeof(*built));
    for (size_t i = 0; i < nput; i++) {
        built[i] = ms__range_new(&puts[i],
                                 puts[i].id ? puts[i].id : ctr.next_range_id++);
    }
    ctr.map_version++;

    rc = ms_cat_txn_begin(cat, &txn);
    if (rc) {
        err = ms__catalog_err(rc);
        goto err_after_build;
    }
    for (size_t i = 0; rc == 0 && i < ndel; i++) {
        rc = ms__del_u64key(txn, cat->db_ranges, dels[i]);
    }
    for (size_t i = 0; rc == 0 && i < nput; i++) {
        rc = ms__put_range(txn, cat, built[i]);
    }
    err = ms_cat_txn_finish(cat, txn, rc, &ctr, "update ranges");
    if (err) {
        goto err_after_build;
    }
    for (size_t i = 0; i < ndel; i++) {
        size_t idx;
        if (ms_vec_find(&cat->ranges, MS__RANGE_ID, dels[i], &idx)) {
            ms__range_free(ms_vec_remove(&cat->ranges, idx));
        }
    }
    for (size_t i = 0; i < nput; i++) {
        if (new_ids) {
            new_ids[i] = built[i]->id;
        }
        ms__mirror_put_range(cat, built[i]);
    }
    free(built);
    return 0;

err_after_build:
    for (size_t i = 0; i < nput; i++) {
        ms__range_free(built[i]);
    }
    free(built);
    return err;
}

void ms_range_to_repl_conf(const struct ms_range *r, struct rt_repl_conf *c)
{
    memset(c, 0, sizeof(*c));
    c->range_id = r->id;
    c->epoch = r->epoch;
    c->primary_id = r->server_id;
    c->primary_epoch = r->primary_epoch;
    c->n_members = r->nreplicas;
    for (size_t i = 0; i < r->nreplicas && i < RT_REPL_MAX_REPLICAS; i++) {
        c->members[i].server_id = r->replicas[i].server_id;
        c->members[i].role = (enum rt_repl_role)r->replicas[i].role;
    }
    c->n_isr = r->nisr;
    memcpy(c->isr, r->isr, r->nisr * sizeof(r->isr[0]));
    c->rf = r->rf;
    c->min_insync = r->min_insync;
    c->seal_epoch = r->seal_epoch;
    c->seal_kind = (enum rt_repl_seal_kind)r->seal_kind;
    c->seal_to = r->seal_to;
}

int ms_cat_do_range_apply_repl(struct ms_catalog *cat,
                               const struct rt_repl_conf *c,
                               uint64_t guard_epoch,
                               uint64_t guard_seal_epoch)
{
    const struct ms_range *r = ms_catalog_range_find(cat, c->range_id);
    struct ms_counters ctr = cat->ctr;
    struct ms_range_put p;
    struct ms_range *nr;
    MDB_txn *txn;
    int rc, err;

    if (!r) {
        return RT_ENOTFOUND;
    }
    if (r->epoch != guard_epoch || r->seal_epoch != guard_seal_epoch) {
        return RT_ESTALE;
    }
    if (c->epoch < r->epoch || c->n_members == 0 ||
        c->n_members > MS_REPLICAS_MAX || c->n_isr > MS_REPLICAS_MAX) {
        return RT_EINVAL;
    }
    p.id = r->id;
    p.table_id = r->table_id;
    p.low = r->low;
    p.high = r->high;
    p.high_inf = r->high_inf;
    p.server_id = c->primary_id;
    p.epoch = c->epoch;
    nr = ms__range_new(&p, r->id);
    nr->nreplicas = c->n_members;
    for (size_t i = 0; i < c->n_members; i++) {
        nr->replicas[i].server_id = c->members[i].server_id;
        nr->replicas[i].role = (Rt__ReplRole)c->members[i].role;
    }
    nr->nisr = c->n_isr;
    memcpy(nr->isr, c->isr, c->n_isr * sizeof(c->isr[0]));
    nr->primary_epoch = c->primary_epoch;
    nr->rf = c->rf;
    nr->min_insync = c->min_insync;
    nr->seal_epoch = c->seal_epoch;
    nr->seal_kind = c->seal_kind;
    nr->seal_to = c->seal_to;
    if (!ms_range_replicas_valid(nr) ||
        (nr->seal_epoch != 0 && nr->seal_epoch <= nr->epoch)) {
        ms__range_free(nr);
        return RT_EINVAL;
    }
    ctr.map_version++;
    rc = ms_cat_txn_begin(cat, &txn);
    if (rc) {
        ms__range_free(nr);
        return ms__catalog_err(rc);
    }
    rc = ms__put_range(txn, cat, nr);
    err = ms_cat_txn_finish(cat, txn, rc, &ctr, "apply replication change");
    if (err) {
        ms__range_free(nr);
        return err;
    }
    ms__mirror_put_range(cat, nr);
    return 0;
}

/* A child of @r for ms_catalog_split_repl: [@low, @high) (@high NULL =
 * +inf) at @r's epoch + 1 with its replica configuration. */
static struct ms_range *ms__range_child(const struct ms_range *r,
                                        uint64_t id,
                                        const char *low,
                                        const char *high)
{
    struct ms_range_put p = {
        0, r->table_id, low, high, high == NULL, r->server_id, r->epoch + 1};
    struct ms_range *c = ms__range_new(&p, id);
    c->nreplicas = r->nreplicas;
    for (size_t i = 0; i < r->nreplicas; i++) {
        c->replicas[i].server_id = r->replicas[i].server_id;
        c->replicas[i].role = r->replicas[i].role;
    }
    c->nisr = r->nisr;
    memcpy(c->isr, r->isr, r->nisr * sizeof(r->isr[0]));
    c->primary_epoch = r->primary_epoch;
    c->rf = r->rf;
    c->min_insync = r->min_insync;
    return c;
}

int ms_cat_do_split_repl(struct ms_catalog *cat,
                         uint64_t range_id,
                         uint64_t guard_epoch,
                         const char *key,
                         uint64_t new_ids[2])
{
    const struct ms_range *r = ms_catalog_range_find(cat, range_id);
    struct ms_counters ctr = cat->ctr;
    struct ms_range *c[2];
    MDB_txn *txn;
    size_t idx;
    int rc, err;

    if (!r) {
        return RT_ENOTFOUND;
    }
    if (r->epoch != guard_epoch || r->seal_epoch != 0) {
        return RT_ESTALE;
    }
    if (!key || rt_utf16_cmpz(key, r->low) <= 0 ||
        (!r->high_inf && rt_utf16_cmpz(key, r->high) >= 0)) {
        return RT_EINVAL;
    }
    c[0] = ms__range_child(r, ctr.next_range_id++, r->low, key);
    c[1] = ms__range_child(r, ctr.next_range_id++, key,
                           r->high_inf ? NULL : r->high);
    if (!ms_range_replicas_valid(c[0]) || !ms_range_replicas_valid(c[1])) {
        err = RT_EINVAL;
        goto err_after_build;
    }
    ctr.map_version++;
    rc = ms_cat_txn_begin(cat, &txn);
    if (rc) {
        err = ms__catalog_err(rc);
        goto err_after_build;
    }
    rc = ms__del_u64key(txn, cat->db_ranges, range_id);
    for (int i = 0; rc == 0 && i < 2; i++) {
        rc = ms__put_range(txn, cat, c[i]);
    }
    err = ms_cat_txn_finish(cat, txn, rc, &ctr, "split replicated range");
    if (err) {
        goto err_after_build;
    }
    /* r is freed here. */
    if (ms_vec_find(&cat->ranges, MS__RANGE_ID, range_id, &idx)) {
        ms__range_free(ms_vec_remove(&cat->ranges, idx));
    }
    for (int i = 0; i < 2; i++) {
        new_ids[i] = c[i]->id;
        ms__mirror_put_range(cat, c[i]);
    }
    return 0;

err_after_build:
    ms__range_free(c[0]);
    ms__range_free(c[1]);
    return err;
}

int ms_cat_do_merge_repl(struct ms_catalog *cat,
                         uint64_t a_id,
                         uint64_t a_epoch,
                         uint64_t b_id,
                         uint64_t b_epoch,
                         uint64_t *new_id)
{
    const struct ms_range *a = ms_catalog_range_find(cat, a_id);
    const struct ms_range *b = ms_catalog_range_find(cat, b_id);
    struct ms_counters ctr = cat->ctr;
    struct ms_range *m;
    MDB_txn *txn;
    size_t idx;
    int rc, err;

    if (!a || !b) {
        return RT_ENOTFOUND;
    }
    if (a->epoch != a_epoch || b->epoch != b_epoch || a->seal_epoch != 0 ||
        b->seal_epoch != 0) {
        return RT_ESTALE;
    }
    if (a->table_id != b->table_id || a->high_inf ||
        strcmp(a->high, b->low) != 0) {
        return RT_EINVAL;
    }
    m = ms__range_child(a, ctr.next_range_id++, a->low,
                        b->high_inf ? NULL : b->high);
    m->epoch = (a->epoch > b->epoch ? a->epoch : b->epoch) + 1;
    m->primary_epoch = a->primary_epoch > b->primary_epoch ? a->primary_epoch
                                                           : b->primary_epoch;
    if (!ms_range_replicas_valid(m)) {
        ms__range_free(m);
        return RT_EINVAL;
    }
    ctr.map_version++;
    rc = ms_cat_txn_begin(cat, &txn);
    if (rc) {
        ms__range_free(m);
        return ms__catalog_err(rc);
    }
    rc = ms__del_u64key(txn, cat->db_ranges, a_id);
    if (rc == 0) {
        rc = ms__del_u64key(txn, cat->db_ranges, b_id);
    }
    if (rc == 0) {
        rc = ms__put_range(txn, cat, m);
    }
    err = ms_cat_txn_finish(cat, txn, rc, &ctr, "merge replicated ranges");
    if (err) {
        ms__range_free(m);
        return err;
    }
    /* a and b are freed here. */
    if (ms_vec_find(&cat->ranges, MS__RANGE_ID, a_id, &idx)) {
        ms__range_free(ms_vec_remove(&cat->ranges, idx));
    }
    if (ms_vec_find(&cat->ranges, MS__RANGE_ID, b_id, &idx)) {
        ms__range_free(ms_vec_remove(&cat->ranges, idx));
    }
    *new_id = m->id;
    ms__mirror_put_range(cat, m);
    return 0;
}

int ms_cat_do_register_server(struct ms_catalog *cat,
                              uint64_t want_id,
                              const char *addr,
                              const char *zone,
                              const uint8_t *incarnation,
                              const char *identity,
                              uint64_t *id_out,
                              bool *changed)
{
    struct ms_counters ctr = cat->ctr;
    const struct ms_server_rec *old;
    struct ms_server_rec *s;
    MDB_txn *txn;
    int rc, err;

    if (changed) {
        *changed = false;
    }
    if (!addr || !*addr) {
        return RT_EINVAL;
    }
    if (!zone) {
        zone = "";
    }
    if (!identity) {
        identity = "";
    }
    old = want_id ? ms_catalog_server_find(cat, want_id) : NULL;
    /* An id is bound to the certificate that first registered it: another
     * one claiming it is an impostor (or a misissued certificate), and
     * must not move the id's address (docs/SECURITY.md). */
    if (old && old->identity[0] && identity[0] &&
        strcmp(old->identity, identity) != 0) {
        return RT_EPERM;
    }
    if (old && strcmp(old->addr, addr) == 0 && strcmp(old->zone, zone) == 0 &&
        (!identity[0] || strcmp(old->identity, identity) == 0) &&
        (!incarnation ||
         (old->has_incarnation &&
          memcmp(old->incarnation, incarnation, MS_INCARNATION_SIZE) == 0))) {
        *id_out = old->id;
        return 0;
    }
    s = rt_xcalloc(1, sizeof(*s));
    s->id = want_id ? want_id : ctr.next_server_id++;
    s->addr = rt_xstrdup(addr);
    s->draining = old ? old->draining : false;
    s->zone = rt_xstrdup(zone);
    s->identity = rt_xstrdup(identity[0] ? identity : old ? old->identity : "");
    if (incarnation) {
        s->has_incarnation = true;
        memcpy(s->incarnation, incarnation, MS_INCARNATION_SIZE);
    } else if (old) {
        s->has_incarnation = old->has_incarnation;
        memcpy(s->incarnation, old->incarnation, MS_INCARNATION_SIZE);
    }
    if (s->id >= ctr.next_server_id) {
        ctr.next_server_id = s->id + 1;
    }
    ctr.map_version++;
    rc = ms_cat_txn_begin(cat, &txn);
    if (rc) {
        ms__server_free(s);
        return ms__catalog_err(rc);
    }
    rc = ms__put_server(txn, cat, s);
    err = ms_cat_txn_finish(cat, txn, rc, &ctr, "register server");
    if (err) {
        ms__server_free(s);
        return err;
    }
    ms__mirror_put_server(cat, s);
    *id_out = s->id;
    if (changed) {
        *changed = true;
    }
    return 0;
}

int ms_cat_do_bump_version(struct ms_catalog *cat)
{
    struct ms_counters ctr = cat->ctr;
    MDB_txn *txn;
    int rc;
    ctr.map_version++;
    rc = ms_cat_txn_begin(cat, &txn);
    if (rc) {
        return ms__catalog_err(rc);
    }
    return ms_cat_txn_finish(cat, txn, 0, &ctr, "bump map version");
}

/* ---- table ACLs ---- */

void ms_acl_to_pb(const struct ms_acl_entry *e, Rt__SignedIdentifier *out)
{
    rt__signed_identifier__init(out);
    out->id = e->id;
    out->has_policy = e->has_policy;
    out->start = e->start;
    out->expiry = e->expiry;
    out->permission = e->permission;
}

void ms_acl_from_pb(const Rt__SignedIdentifier *si, struct ms_acl_entry *out)
{
    out->id = si->id;
    out->has_policy = si->has_policy;
    out->start = si->start;
    out->expiry = si->expiry;
    out->permission = si->permission;
}

int ms_acl_check(const struct ms_acl_entry *acl, size_t n)
{
    static const char order[] = "raud";
    if (n > MS_ACL_MAX) {
        return RT_EXML;
    }
    for (size_t i = 0; i < n; i++) {
        const char *id = acl[i].id ? acl[i].id : "";
        const char *perm = acl[i].permission ? acl[i].permission : "";
        size_t pos = 0;
        if (!*id || strlen(id) > MS_ACL_ID_MAX) {
            return RT_EXML;
        }
        for (size_t j = 0; j < i; j++) {
            if (strcmp(acl[j].id ? acl[j].id : "", id) == 0) {
                return RT_EXML;
            }
        }
        /* Each permission character once, in the order r, a, u, d. */
        for (const char *p = perm; *p; p++) {
            const char *at = memchr(order + pos, *p, sizeof(order) - 1 - pos);
            if (!at) {
                return RT_EXML;
            }
            pos = (size_t)(at - order) + 1;
        }
    }
    return 0;
}

int ms_cat_do_set_acl(struct ms_catalog *cat,
                      const char *account,
                      const char *name,
                      const struct ms_acl_entry *acl,
                      size_t n)
{
    const struct ms_table *found = ms_catalog_table_find(cat, account, name);
    struct ms_counters ctr = cat->ctr;
    struct ms_table tmp, *t;
    MDB_txn *txn;
    int rc, err;

    if (!found) {
        return RT_ETABLENOTFOUND;
    }
    err = ms_acl_check(acl, n);
    if (err) {
        return err;
    }
    t = (struct ms_table *)found;
    tmp = *t;
    tmp.acl = ms__acl_copy(acl, n);
    tmp.nacl = n;
    ctr.map_version++;
    rc = ms_cat_txn_begin(cat, &txn);
    if (rc) {
        ms__acl_free(tmp.acl, tmp.nacl);
        return ms__catalog_err(rc);
    }
    rc = ms__put_table(txn, cat, &tmp);
    err = ms_cat_txn_finish(cat, txn, rc, &ctr, "set table acl");
    if (err) {
        ms__acl_free(tmp.acl, tmp.nacl);
        return err;
    }
    ms__acl_free(t->acl, t->nacl);
    t->acl = tmp.acl;
    t->nacl = tmp.nacl;
    return 0;
}

/* ---- service properties ---- */

static int ms__props_vs_account(const void *item, const void *account)
{
    return strcmp(((const struct ms_props *)item)->account, account);
}

static size_t ms__props_lower_bound(const struct ms_catalog *cat,
                                    const char *account)
{
    return ms_vec_lower_bound_by(&cat->props, ms__props_vs_account, account);
}

size_t ms_catalog_nprops(const struct ms_catalog *cat)
{
    return cat->props.n;
}

const struct ms_props *ms_catalog_props_at(const struct ms_catalog *cat,
                                           size_t i)
{
    RT_PRE(i < cat->props.n);
    return cat->props.v[i];
}

const Rt__ServiceProps *ms_catalog_props(const struct ms_catalog *cat,
                                         const char *account)
{
    size_t i = ms__props_lower_bound(cat, account);
    if (i < cat->props.n) {
        const struct ms_props *p = cat->props.v[i];
        if (strcmp(p->account, account) == 0) {
            return p->props;
        }
    }
    return NULL;
}

int ms_cat_do_set_props(struct ms_catalog *cat,
                        const char *account,
                        const Rt__ServiceProps *update)
{
    const Rt__ServiceProps *old;
    Rt__ServiceProps merged = RT__SERVICE_PROPS__INIT;
    Rt__ServiceProps *fresh;
    struct ms_counters ctr = cat->ctr;
    MDB_txn *txn;
    MDB_val k, v;
    uint8_t *buf;
    size_t len, i;
    int rc, err;

    if (!account || !*account || strlen(account) > MS_ACCOUNT_MAX) {
        return RT_EINVAL;
    }
    if (update->cors && update->cors->n_rules > MS_CORS_MAX) {
        return RT_EXML;
    }
    /* Sections present in @update replace, absent ones are kept
     * (docs/table-api-spec.md §3.6). The merged message borrows from both;
     * packing and unpacking it again gives the catalog its own copy. */
    old = ms_catalog_props(cat, account);
    merged.logging =
        update->logging ? update->logging : (old ? old->logging : NULL);
    merged.hour_metrics = update->hour_metrics
                              ? update->hour_metrics
                              : (old ? old->hour_metrics : NULL);
    merged.minute_metrics = update->minute_metrics
                                ? update->minute_metrics
                                : (old ? old->minute_metrics : NULL);
    merged.cors = update->cors ? update->cors : (old ? old->cors : NULL);
    len = rt__service_props__get_packed_size(&merged);
    buf = rt_xmalloc(len ? len : 1);
    rt__service_props__pack(&merged, buf);
    fresh = rt__service_props__unpack(NULL, len, buf);
    if (!fresh) {
        free(buf);
        cat->local_err = RT_ENOMEM;
        return RT_ENOMEM;
    }
    ctr.map_version++;
    rc = ms_cat_txn_begin(cat, &txn);
    if (rc) {
        err = ms__catalog_err(rc);
        goto err_after_pack;
    }
    k.mv_size = strlen(account);
    k.mv_data = (void *)account;
    v.mv_size = len;
    v.mv_data = buf;
    rc = mdb_put(txn, cat->db_props, &k, &v, 0);
    err = ms_cat_txn_finish(cat, txn, rc, &ctr, "set service properties");
    if (err) {
        goto err_after_pack;
    }
    free(buf);
    i = ms__props_lower_bound(cat, account);
    if (i < cat->props.n &&
        strcmp(((struct ms_props *)cat->props.v[i])->account, account) == 0) {
        struct ms_props *p = cat->props.v[i];
        rt__service_props__free_unpacked(p->props, NULL);
        p->props = fresh;
    } else {
        struct ms_props *p = rt_xcalloc(1, sizeof(*p));
        p->account = rt_xstrdup(account);
        p->props = fresh;
        ms_vec_insert(&cat->props, i, p);
    }
    return 0;

err_after_pack:
    rt__service_props__free_unpacked(fresh, NULL);
    free(buf);
    return err;
}

/* ---- deletion grace period ---- */

void ms_catalog_set_delete_grace(struct ms_catalog *cat, uint64_t grace_ms)
{
    cat->grace_ms = grace_ms;
}

void ms_catalog_set_clock(struct ms_catalog *cat,
                          uint64_t (*now_ms)(void *arg),
                          void *arg)
{
    cat->clock = now_ms;
    cat->clock_arg = arg;
}

bool ms_catalog_table_deleting(const struct ms_catalog *cat,
                               const char *account,
                               const char *name)
{
    char lname[MS_TABLE_NAME_MAX + 1];
    const struct ms__tomb *t;
    if (strlen(name) > MS_TABLE_NAME_MAX) {
        return false;
    }
    ms__lower(lname, name, sizeof(lname));
    t = ms__tomb_find(cat, account, lname, NULL);
    return t && t->until_ms > ms_cat_now_ms(cat);
}

size_t ms_catalog_ntombstones(const struct ms_catalog *cat)
{
    return cat->tombs.n;
}

int ms_cat_do_purge_tombstones(struct ms_catalog *cat, uint64_t now)
{
    size_t expired = 0;
    MDB_txn *txn;
    int rc = 0, err;

    for (size_t i = 0; i < cat->tombs.n; i++) {
        if (((struct ms__tomb *)cat->tombs.v[i])->until_ms <= now) {
            expired++;
        }
    }
    if (!expired) {
        return 0;
    }
    rc = ms_cat_txn_begin(cat, &txn);
    if (rc) {
        return ms__catalog_err(rc);
    }
    for (size_t i = 0; rc == 0 && i < cat->tombs.n; i++) {
        const struct ms__tomb *t = cat->tombs.v[i];
        if (t->until_ms <= now) {
            rc = ms__del_tomb(txn, cat, t->account, t->lname);
        }
    }
    /* Not a map change: the counters are written back unchanged. */
    err = ms_cat_txn_finish(cat, txn, rc, &cat->ctr, "purge tombstones");
    if (err) {
        return err;
    }
    for (size_t i = 0; i < cat->tombs.n;) {
        struct ms__tomb *t = cat->tombs.v[i];
        if (t->until_ms <= now) {
            ms__tomb_free(ms_vec_remove(&cat->tombs, i));
        } else {
            i++;
        }
    }
    return (int)expired;
}

/* ---- draining ---- */

int ms_cat_do_set_draining(struct ms_catalog *cat,
                           uint64_t server_id,
                           bool draining,
                           bool *changed)
{
    struct ms_server_rec *s =
        (struct ms_server_rec *)ms_catalog_server_find(cat, server_id);
    struct ms_server_rec tmp;
    MDB_txn *txn;
    int rc;
    if (!s) {
        return RT_ENOTFOUND;
    }
    *changed = false;
    if (s->draining == draining) {
        return 0;
    }
    tmp = *s;
    tmp.draining = draining;
    rc = ms_cat_txn_begin(cat, &txn);
    if (rc) {
        return ms__catalog_err(rc);
    }
    rc = ms__put_server(txn, cat, &tmp);
    /* Not a map change: counters written back unchanged. */
    rc = ms_cat_txn_finish(cat, txn, rc, &cat->ctr, "set draining");
    if (rc) {
        return rc;
    }
    s->draining = draining;
    *changed = true;
    return 0;
}

/* ---- moves ---- */

size_t ms_catalog_nmoves(const struct ms_catalog *cat)
{
    return cat->moves.n;
}

const Rt__MoveReq *ms_catalog_move_at(const struct ms_catalog *cat, size_t i)
{
    RT_PRE(i < cat->moves.n);
    return cat->moves.v[i];
}

const Rt__MoveReq *ms_catalog_move_find(const struct ms_catalog *cat,
                                        uint64_t move_id)
{
    return ms_vec_find(&cat->moves, MS__MOVE_ID, move_id, NULL);
}

int ms_cat_do_move_begin(struct ms_catalog *cat,
                         uint64_t range_id,
                         uint64_t target_id,
                         const char *target_addr,
                         const Rt__MoveReq **out)
{
    const struct ms_range *r = ms_catalog_range_find(cat, range_id);
    struct ms_counters ctr = cat->ctr;
    Rt__MoveReq msg = RT__MOVE_REQ__INIT, *copy;
    Rt__Range rng;
    uint8_t *buf;
    size_t len;
    MDB_txn *txn;
    int rc, err;

    if (!r) {
        return RT_ENOTFOUND;
    }
    if (!target_addr || !*target_addr || target_id == r->server_id) {
        return RT_EINVAL;
    }
    if (r->nreplicas > 1) {
        return RT_ENOTIMPL; /* the commit would make it RF 1 */
    }
    ms_range_to_pb(r, &rng);
    msg.move_id = ctr.next_move_id++;
    msg.range = &rng;
    msg.target_server_id = target_id;
    msg.target_addr = (char *)target_addr;
    msg.new_epoch = r->epoch + 1;
    msg.master_term = ctr.master_term;
    len = rt__move_req__get_packed_size(&msg);
    buf = rt_xmalloc(len);
    rt__move_req__pack(&msg, buf);
    copy = rt__move_req__unpack(NULL, len, buf);
    if (!copy) {
        free(buf);
        cat->local_err = RT_ENOMEM;
        return RT_ENOMEM;
    }
    rc = ms_cat_txn_begin(cat, &txn);
    if (rc) {
        err = ms__catalog_err(rc);
        goto err_after_copy;
    }
    rc = ms__put_u64key_msg(txn, cat->db_moves, msg.move_id, &msg.base);
    err = ms_cat_txn_finish(cat, txn, rc, &ctr, "record move");
    if (err) {
        goto err_after_copy;
    }
    free(buf);
    ms_vec_insert(&cat->moves,
                  ms_vec_lower_bound(&cat->moves, MS__MOVE_ID, copy->move_id),
                  copy);
    *out = copy;
    return 0;

err_after_copy:
    rt__move_req__free_unpacked(copy, NULL);
    free(buf);
    return err;
}

int ms_cat_do_move_commit(struct ms_catalog *cat, uint64_t move_id)
{
    const Rt__MoveReq *mv = ms_catalog_move_find(cat, move_id);
    const struct ms_range *r;
    struct ms_counters ctr = cat->ctr;
    struct ms_range_put p;
    struct ms_range *nr;
    MDB_txn *txn;
    size_t idx;
    int rc, err;

    if (!mv) {
        return RT_ENOTFOUND;
    }
    r = ms_catalog_range_find(cat, mv->range->id);
    if (!r || r->epoch != mv->range->epoch ||
        r->server_id != mv->range->server_id) {
        return RT_ESTALE;
    }
    p.id = r->id;
    p.table_id = r->table_id;
    p.low = r->low;
    p.high = r->high;
    p.high_inf = r->high_inf;
    p.server_id = mv->target_server_id;
    p.epoch = mv->new_epoch;
    nr = ms__range_new(&p, r->id);
    ctr.map_version++;
    rc = ms_cat_txn_begin(cat, &txn);
    if (rc) {
        ms__range_free(nr);
        return ms__catalog_err(rc);
    }
    rc = ms__put_range(txn, cat, nr);
    if (rc == 0) {
        rc = ms__del_u64key(txn, cat->db_moves, move_id);
    }
    err = ms_cat_txn_finish(cat, txn, rc, &ctr, "commit move");
    if (err) {
        ms__range_free(nr);
        return err;
    }
    ms__mirror_put_range(cat, nr);
    idx = ms_vec_lower_bound(&cat->moves, MS__MOVE_ID, move_id);
    rt__move_req__free_unpacked(ms_vec_remove(&cat->moves, idx), NULL);
    return 0;
}

int ms_cat_do_move_forget(struct ms_catalog *cat, uint64_t move_id)
{
    size_t idx;
    MDB_txn *txn;
    int rc, err;
    if (!ms_vec_find(&cat->moves, MS__MOVE_ID, move_id, &idx)) {
        return RT_ENOTFOUND;
    }
    rc = ms_cat_txn_begin(cat, &txn);
    if (rc) {
        return ms__catalog_err(rc);
    }
    rc = ms__del_u64key(txn, cat->db_moves, move_id);
    err = ms_cat_txn_finish(cat, txn, rc, &cat->ctr, "forget move");
    if (err) {
        return err;
    }
    rt__move_req__free_unpacked(ms_vec_remove(&cat->moves, idx), NULL);
    return 0;
}
