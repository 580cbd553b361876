/* Storage keys: order-preserving, self-delimiting string encoding
 * (see rt_key.h). */
#include "rt_key.h"

#include <string.h>

#include "rt_err.h"
#include "rt_utf8.h"

void rt_key_enc(struct rt_buf *out, const char *s, size_t n)
{
    const uint8_t *p = (const uint8_t *)s;
    const uint8_t *end = p + n;

    /* Worst case every byte doubles. */
    rt_buf_reserve(out, 2 * n + 2);
    for (; p < end; p++) {
        if (*p == 0) {
            out->data[out->len++] = 0x00;
            out->data[out->len++] = 0xFF;
        } else {
            out->data[out->len++] = rt_utf16_byte(*p);
        }
    }
    out->data[out->len++] = 0x00;
    out->data[out->len++] = 0x01;
}

int rt_key_dec(const uint8_t *in,
               size_t n,
               size_t *consumed,
               struct rt_buf *out)
{
    size_t i = 0;
    size_t start = out->len;

    while (i < n) {
        const uint8_t *z = memchr(in + i, 0, n - i);
        if (!z || (size_t)(z - in) + 1 >= n) {
            break; /* no terminator or a lone trailing 0x00 */
        }
        size_t run = (size_t)(z - (in + i));
        uint8_t *q = rt_buf_reserve(out, run);
        for (size_t j = 0; j < run; j++) {
            q[j] = rt_utf16_unbyte(in[i + j]);
        }
        out->len += run;
        i += run;
        if (in[i + 1] == 0xFF) {
            rt_buf_append_u8(out, 0x00);
            i += 2;
        } else if (in[i + 1] == 0x01) {
            *consumed = i + 2;
            return 0;
        } else {
            break;
        }
    }
    out->len = start;
    return RT_ECORRUPT;
}

static void rt__key_table(struct rt_buf *out, uint64_t table_id)
{
    rt_put_u64be(rt_buf_reserve(out, 8), table_id);
    out->len += 8;
}

void rt_key_entity(struct rt_buf *out,
                   uint64_t table_id,
                   const char *pk,
                   size_t pklen,
                   const char *rk,
                   size_t rklen)
{
    rt__key_table(out, table_id);
    rt_key_enc(out, pk, pklen);
    rt_key_enc(out, rk, rklen);
}

void rt_key_pk_prefix(struct rt_buf *out,
                      uint64_t table_id,
                      const char *pk,
                      size_t pklen)
{
    rt__key_table(out, table_id);
    rt_key_enc(out, pk, pklen);
}

void rt_key_table_end(struct rt_buf *out, uint64_t table_id)
{
    rt__key_table(out, table_id + 1);
}

int rt_key_split(const uint8_t *key,
                 size_t n,
                 uint64_t *table_id,
                 struct rt_buf *pk,
                 struct rt_buf *rk)
{
    size_t pk_start = pk->len, rk_start = rk->len;
    size_t c1, c2;

    if (n < 8) {
        return RT_ECORRUPT;
    }
    if (rt_key_dec(key + 8, n - 8, &c1, pk) != 0) {
        return RT_ECORRUPT;
    }
    if (rt_key_dec(key + 8 + c1, n - 8 - c1, &c2, rk) != 0 ||
        8 + c1 + c2 != n) {
        pk->len = pk_start;
        rk->len = rk_start;
        return RT_ECORRUPT;
    }
    *table_id = rt_get_u64be(key);
    return 0;
}
