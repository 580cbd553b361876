#include "rt_buf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt_log.h"

void rt_buf_init(struct rt_buf *b)
{
    b->data = NULL;
    b->len = 0;
    b->cap = 0;
}

void rt_buf_free(struct rt_buf *b)
{
    free(b->data);
    rt_buf_init(b);
}

void rt_buf_reset(struct rt_buf *b)
{
    b->len = 0;
}

void rt_buf_recycle(struct rt_buf *b, size_t keep_max)
{
    if (b->cap > keep_max) {
        rt_buf_free(b);
    } else {
        rt_buf_reset(b);
    }
}

uint8_t *rt_buf_reserve(struct rt_buf *b, size_t extra)
{
    if (b->cap - b->len < extra + 1) {
        size_t cap = b->cap ? b->cap : 64;
        while (cap - b->len < extra + 1) {
            cap *= 2;
        }
        uint8_t *p = realloc(b->data, cap);
        if (!p) {
            rt_log(RT_LOG_FATAL, "out of memory (%zu bytes)", cap);
        }
        b->data = p;
        b->cap = cap;
    }
    return b->data + b->len;
}

void rt_buf_append(struct rt_buf *b, const void *p, size_t n)
{
    if (n == 0) {
        return;
    }
    memcpy(rt_buf_reserve(b, n), p, n);
    b->len += n;
}

void rt_buf_append_str(struct rt_buf *b, const char *s)
{
    rt_buf_append(b, s, strlen(s));
}

void rt_buf_append_u8(struct rt_buf *b, uint8_t v)
{
    *rt_buf_reserve(b, 1) = v;
    b->len++;
}

void rt_buf_printf(struct rt_buf *b, const char *fmt, ...)
{
    va_list ap;
    int n;
    va_start(ap, fmt);
    n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n <= 0) {
        return;
    }
    rt_buf_reserve(b, (size_t)n + 1);
    va_start(ap, fmt);
    vsnprintf((char *)b->data + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

const char *rt_buf_cstr(struct rt_buf *b)
{
    rt_buf_reserve(b, 1);
    b->data[b->len] = '\0';
    return (const char *)b->data;
}

uint8_t *rt_buf_steal(struct rt_buf *b, size_t *len)
{
    uint8_t *p;
    rt_buf_cstr(b);
    p = b->data;
    if (len) {
        *len = b->len;
    }
    rt_buf_init(b);
    return p;
}
