/* Entity binary codec (see rt_entity.h for the formats). Decoders check
 * every length against the end of the input: a corrupt blob gives
 * RT_ECORRUPT, never an out-of-bounds read. */
#include "rt_entity.h"

#include <string.h>

#include "rt_crc32c.h"
#include "rt_err.h"
#include "rt_utf8.h"

void rt_props_begin(struct rt_props_writer *w, struct rt_buf *out)
{
    w->out = out;
    w->start = out->len;
    w->count = 0;
    rt_buf_reserve(out, 2);
    out->data[out->len++] = 0;
    out->data[out->len++] = 0;
}

void rt_props_add(struct rt_props_writer *w, const struct rt_prop *p)
{
    struct rt_buf *out = w->out;
    uint8_t *q;
    size_t vn;

    RT_PRE(p->name_len >= 1 && p->name_len <= RT_MAX_PROP_NAME);
    RT_PRE(w->count < 0xFFFF);
    switch (p->type) {
        case RT_EDM_STRING:
        case RT_EDM_BINARY:
            RT_PRE(p->v.bytes.n <= 0xFFFFFFFFu);
            vn = 4 + p->v.bytes.n;
            break;
        case RT_EDM_BOOL:
            vn = 1;
            break;
        case RT_EDM_INT32:
            vn = 4;
            break;
        case RT_EDM_INT64:
        case RT_EDM_DATETIME:
        case RT_EDM_DOUBLE:
            vn = 8;
            break;
        case RT_EDM_GUID:
            vn = 16;
            break;
        default:
            RT_PRE(0 && "unknown property type");
            return;
    }
    q = rt_buf_reserve(out, 2 + p->name_len + vn);
    *q++ = (uint8_t)p->type;
    *q++ = (uint8_t)p->name_len;
    memcpy(q, p->name, p->name_len);
    q += p->name_len;
    switch (p->type) {
        case RT_EDM_STRING:
        case RT_EDM_BINARY:
            rt_put_u32le(q, (uint32_t)p->v.bytes.n);
            if (p->v.bytes.n) {
                memcpy(q + 4, p->v.bytes.p, p->v.bytes.n);
            }
            break;
        case RT_EDM_BOOL:
            *q = p->v.b ? 1 : 0;
            break;
        case RT_EDM_INT32:
            rt_put_u32le(q, (uint32_t)p->v.i32);
            break;
        case RT_EDM_INT64:
            rt_put_u64le(q, (uint64_t)p->v.i64);
            break;
        case RT_EDM_DATETIME:
            rt_put_u64le(q, p->v.ticks);
            break;
        case RT_EDM_DOUBLE: {
            uint64_t bits;
            memcpy(&bits, &p->v.d, 8);
            rt_put_u64le(q, bits);
            break;
        }
        case RT_EDM_GUID:
            memcpy(q, p->v.guid, 16);
            break;
    }
    out->len += 2 + p->name_len + vn;
    w->count++;
}

void rt_props_end(struct rt_props_writer *w)
{
    rt_put_u16le(w->out->data + w->start, (uint16_t)w->count);
}

int rt_props_iter_init(struct rt_props_iter *it, const uint8_t *blob, size_t n)
{
    if (n < 2) {
        it->p = it->end = NULL;
        it->remaining = 0;
        return RT_ECORRUPT;
    }
    it->remaining = rt_get_u16le(blob);
    it->p = blob + 2;
    it->end = blob + n;
    return 0;
}

int rt_props_next(struct rt_props_iter *it, struct rt_prop *out)
{
    const uint8_t *p = it->p;
    size_t left = (size_t)(it->end - p);
    size_t nl;

    if (it->remaining == 0) {
        return 0;
    }
    if (left < 2) {
        return RT_ECORRUPT;
    }
    out->type = (enum rt_edm)p[0];
    nl = p[1];
    if (nl == 0 || left - 2 < nl) {
        return RT_ECORRUPT;
    }
    out->name = (const char *)p + 2;
    out->name_len = nl;
    p += 2 + nl;
    left -= 2 + nl;
    switch (out->type) {
        case RT_EDM_STRING:
        case RT_EDM_BINARY: {
            if (left < 4) {
                return RT_ECORRUPT;
            }
            uint32_t len = rt_get_u32le(p);
            if (left - 4 < len) {
                return RT_ECORRUPT;
            }
            out->v.bytes.p = p + 4;
            out->v.bytes.n = len;
            p += 4 + (size_t)len;
            break;
        }
        case RT_EDM_BOOL:
            if (left < 1 || p[0] > 1) {
                return RT_ECORRUPT;
            }
            out->v.b = p[0];
            p += 1;
            break;
        case RT_EDM_INT32:
            if (left < 4) {
                return RT_ECORRUPT;
            }
            out->v.i32 = (int32_t)rt_get_u32le(p);
            p += 4;
            break;
        case RT_EDM_INT64:
            if (left < 8) {
                return RT_ECORRUPT;
            }
            out->v.i64 = (int64_t)rt_get_u64le(p);
            p += 8;
            break;
        case RT_EDM_DATETIME:
            if (left < 8) {
                return RT_ECORRUPT;
            }
            out->v.ticks = rt_get_u64le(p);
            p += 8;
            break;
        case RT_EDM_DOUBLE: {
            if (left < 8) {
                return RT_ECORRUPT;
            }
            uint64_t bits = rt_get_u64le(p);
            memcpy(&out->v.d, &bits, 8);
            p += 8;
            break;
        }
        case RT_EDM_GUID:
            if (left < 16) {
                return RT_ECORRUPT;
            }
            memcpy(out->v.guid, p, 16);
            p += 16;
            break;
        default:
            return RT_ECORRUPT;
    }
    it->p = p;
    it->remaining--;
    return 1;
}

int rt_props_check(const uint8_t *blob, size_t n)
{
    struct rt_props_iter it;
    struct rt_prop p;
    int rv;

    if (rt_props_iter_init(&it, blob, n) != 0) {
        return RT_ECORRUPT;
    }
    while ((rv = rt_props_next(&it, &p)) == 1) {
    }
    if (rv != 0 || it.p != it.end) {
        return RT_ECORRUPT;
    }
    return 0;
}

int rt_props_find(const uint8_t *blob,
                  size_t n,
                  const char *name,
                  size_t name_len,
                  struct rt_prop *out)
{
    struct rt_props_iter it;
    int rv;

    if (rt_props_iter_init(&it, blob, n) != 0) {
        return RT_ECORRUPT;
    }
    while ((rv = rt_props_next(&it, out)) == 1) {
        if (out->name_len == name_len &&
            memcmp(out->name, name, name_len) == 0) {
            return 1;
        }
    }
    return rv;
}

struct rt__name_ref
{
    const char *p;
    size_t n;
};

static int rt__name_in(const struct rt__name_ref *names,
                       unsigned count,
                       const struct rt_prop *p)
{
    for (unsigned i = 0; i < count; i++) {
        if (names[i].n == p->name_len &&
            memcmp(names[i].p, p->name, p->name_len) == 0) {
            return 1;
        }
    }
    return 0;
}

int rt_props_merge(struct rt_buf *out,
                   const uint8_t *old,
                   size_t old_n,
                   const uint8_t *upd,
                   size_t upd_n)
{
    struct rt__name_ref names[RT_MAX_USER_PROPS];
    struct rt_props_writer w;
    struct rt_props_iter it;
    struct rt_prop p;
    unsigned nupd = 0, total;

    if (rt_props_check(old, old_n) != 0 || rt_props_check(upd, upd_n) != 0) {
        return RT_ECORRUPT;
    }
    /* Names of the update (Azure Merge Entity: its values win). */
    rt_props_iter_init(&it, upd, upd_n);
    while (rt_props_next(&it, &p) == 1) {
        if (nupd == RT_MAX_USER_PROPS) {
            return RT_ETOOMANYPROPS;
        }
        names[nupd].p = p.name;
        names[nupd].n = p.name_len;
        nupd++;
    }
    total = nupd;
    rt_props_iter_init(&it, old, old_n);
    while (rt_props_next(&it, &p) == 1) {
        if (!rt__name_in(names, nupd, &p) && ++total > RT_MAX_USER_PROPS) {
            return RT_ETOOMANYPROPS;
        }
    }
    rt_props_begin(&w, out);
    /* The updated properties first, in their order ... */
    rt_props_iter_init(&it, upd, upd_n);
    while (rt_props_next(&it, &p) == 1) {
        rt_props_add(&w, &p);
    }
    /* ... then every old property the update does not name. */
    rt_props_iter_init(&it, old, old_n);
    while (rt_props_next(&it, &p) == 1) {
        if (!rt__name_in(names, nupd, &p)) {
            rt_props_add(&w, &p);
        }
    }
    rt_props_end(&w);
    return 0;
}

void rt_value_encode(struct rt_buf *out,
                     uint64_t ticks,
                     uint8_t flags,
                     const uint8_t *blob,
                     size_t blob_n)
{
    uint8_t *q = rt_buf_reserve(out, RT_VALUE_HDR_SIZE + blob_n);
    q[0] = RT_VALUE_VERSION;
    q[1] = flags;
    memset(q + 2, 0, 6);
    rt_put_u64le(q + 8, ticks);
    if (blob_n) {
        memcpy(q + RT_VALUE_HDR_SIZE, blob, blob_n);
    }
    out->len += RT_VALUE_HDR_SIZE + blob_n;
}

/* CRC32C of @key ‖ the header with its crc field zero ‖ the blob. */
static uint32_t rt__value_crc(const uint8_t *value,
                              size_t n,
                              const uint8_t *key,
                              size_t kn)
{
    uint8_t hdr[RT_VALUE_HDR_SIZE];
    uint32_t c;

    memcpy(hdr, value, RT_VALUE_HDR_SIZE);
    memset(hdr + 4, 0, 4);
    c = rt_crc32c(0, key, kn);
    c = rt_crc32c(c, hdr, RT_VALUE_HDR_SIZE);
    return rt_crc32c(c, value + RT_VALUE_HDR_SIZE, n - RT_VALUE_HDR_SIZE);
}

void rt_value_seal(uint8_t *value, size_t n, const uint8_t *key, size_t kn)
{
    RT_PRE(n >= RT_VALUE_HDR_SIZE);
    value[1] |= RT_VALUE_F_CRC;
    rt_put_u32le(value + 4, rt__value_crc(value, n, key, kn));
}

int rt_value_check(const uint8_t *value,
                   size_t n,
                   const uint8_t *key,
                   size_t kn)
{
    if (n < RT_VALUE_HDR_SIZE) {
        return RT_ECORRUPT;
    }
    if (!(value[1] & RT_VALUE_F_CRC)) {
        return 0;
    }
    return rt_get_u32le(value + 4) == rt__value_crc(value, n, key, kn)
               ? 0
               : RT_ECORRUPT;
}

void rt_value_unseal(uint8_t *value, size_t n)
{
    RT_PRE(n >= RT_VALUE_HDR_SIZE);
    value[1] &= (uint8_t)~RT_VALUE_F_CRC;
    memset(value + 4, 0, 4);
}

int rt_value_decode(const uint8_t *value,
                    size_t n,
                    uint64_t *ticks,
                    uint8_t *flags,
                    const uint8_t **blob,
                    size_t *blob_n)
{
    if (n < RT_VALUE_HDR_SIZE + 2 || value[0] != RT_VALUE_VERSION) {
        return RT_ECORRUPT;
    }
    *flags = value[1];
    *ticks = rt_get_u64le(value + 8);
    *blob = value + RT_VALUE_HDR_SIZE;
    *blob_n = n - RT_VALUE_HDR_SIZE;
    return 0;
}

/* Validation (table-api-spec.md §9) */

int rt_entity_key_check(const char *s, size_t n, size_t *units)
{
    const uint8_t *p = (const uint8_t *)s, *end = p + n;
    size_t u = 0;

    while (p < end) {
        uint32_t cp;
        size_t len = rt_utf8_decode(p, end, &cp);
        if (len == 0 || cp < 0x20 || (cp >= 0x7F && cp <= 0x9F) || cp == '/' ||
            cp == '\\' || cp == '#' || cp == '?') {
            return RT_EINVAL;
        }
        u += len == 4 ? 2 : 1;
        p += len;
    }
    if (u > RT_MAX_KEY_UTF16) {
        return RT_EOUTOFRANGE;
    }
    if (units) {
        *units = u;
    }
    return 0;
}

size_t rt_prop_azure_size(const struct rt_prop *p)
{
    size_t vs;
    switch (p->type) {
        case RT_EDM_STRING:
            vs = 2 * rt_utf8_utf16_units(p->v.bytes.p, p->v.bytes.n) + 4;
            break;
        case RT_EDM_BINARY:
            vs = p->v.bytes.n + 4;
            break;
        case RT_EDM_BOOL:
            vs = 1;
            break;
        case RT_EDM_INT32:
            vs = 4;
            break;
        case RT_EDM_GUID:
            vs = 16;
            break;
        default:
            vs = 8;
            break;
    }
    return 8 + 2 * rt_utf8_utf16_units(p->name, p->name_len) + vs;
}

int rt_prop_check_limits(const struct rt_prop *p)
{
    /* A string over 3 bytes per unit cannot be within the unit limit;
     * the byte test keeps the count off huge values. */
    if (p->type == RT_EDM_STRING &&
        (p->v.bytes.n > (size_t)RT_MAX_STRING_UTF16 * 3 ||
         rt_utf8_utf16_units(p->v.bytes.p, p->v.bytes.n) >
             RT_MAX_STRING_UTF16)) {
        return RT_EPROPTOOLARGE;
    }
    if (p->type == RT_EDM_BINARY && p->v.bytes.n > RT_MAX_BINARY) {
        return RT_EPROPTOOLARGE;
    }
    return 0;
}

int rt_entity_check(const uint8_t *blob,
                    size_t n,
                    size_t pk_units,
                    size_t rk_units)
{
    struct rt_props_iter it;
    struct rt_prop p;
    size_t size = 4 + 2 * (pk_units + rk_units);
    unsigned count = 0;
    int rv;

    if (rt_props_iter_init(&it, blob, n) != 0) {
        return RT_EINVAL;
    }
    while ((rv = rt_props_next(&it, &p)) == 1) {
        if (++count > RT_MAX_USER_PROPS) {
            return RT_ETOOMANYPROPS;
        }
        if (rt_prop_check_limits(&p) != 0) {
            return RT_EPROPTOOLARGE;
        }
        size += rt_prop_azure_size(&p);
    }
    if (rv != 0 || it.p != it.end) {
        return RT_EINVAL;
    }
    return size > RT_MAX_ENTITY_BYTES ? RT_EENTITYTOOLARGE : 0;
}
