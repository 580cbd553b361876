/* Growable byte buffer. Owned by whoever embeds it; rt_buf_free() releases.
 * Thread: not shared. Allocation failure aborts (rt_alloc policy): a table
 * server that cannot allocate small buffers cannot serve anyway. */
#ifndef RT_BUF_H
#define RT_BUF_H

#include <stddef.h>
#include <stdint.h>

struct rt_buf
{
    uint8_t *data;
    size_t len;
    size_t cap;
};

#define RT_BUF_INIT \
    {               \
        NULL, 0, 0  \
    }

void rt_buf_init(struct rt_buf *b);
void rt_buf_free(struct rt_buf *b);
void rt_buf_reset(struct rt_buf *b); /* len = 0, keeps memory */
/* Empties @b for reuse: its memory is kept unless it grew past
 * @keep_max bytes (then freed, so one huge request does not pin it). */
void rt_buf_recycle(struct rt_buf *b, size_t keep_max);
/* Ensures room for @extra more bytes; returns pointer to the free tail. */
uint8_t *rt_buf_reserve(struct rt_buf *b, size_t extra);
void rt_buf_append(struct rt_buf *b, const void *p, size_t n);
void rt_buf_append_str(struct rt_buf *b, const char *s);
void rt_buf_append_u8(struct rt_buf *b, uint8_t v);
void rt_buf_printf(struct rt_buf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Appends a NUL without counting it in len, so data can be used as a C string.
 */
const char *rt_buf_cstr(struct rt_buf *b);
/* Hands the memory to the caller (free with free()); b becomes empty. */
uint8_t *rt_buf_steal(struct rt_buf *b, size_t *len);

/* Little- and big-endian helpers for codecs. */
static inline void rt_put_u16le(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}
static inline uint16_t rt_get_u16le(const uint8_t *p)
{
    return (uint16_t)(p[0] | (p[1] << 8));
}
static inline void rt_put_u32le(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}
static inline uint32_t rt_get_u32le(const uint8_t *p)
{
    uint32_t v = 0;
    for (int i = 3; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}
static inline void rt_put_u64le(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}
static inline uint64_t rt_get_u64le(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}
static inline void rt_put_u32be(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (24 - 8 * i));
}
static inline uint32_t rt_get_u32be(const uint8_t *p)
{
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) |
           ((uint32_t)p[2] << 8) | p[3];
}
static inline void rt_put_u64be(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (56 - 8 * i));
}
static inline uint64_t rt_get_u64be(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = (v << 8) | p[i];
    return v;
}

#endif
