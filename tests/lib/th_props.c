#include "th_props.h"

#include <string.h>

struct rt_prop th_prop(const char *name, enum rt_edm t)
{
    struct rt_prop p;
    memset(&p, 0, sizeof(p));
    p.name = name;
    p.name_len = strlen(name);
    p.type = t;
    return p;
}

struct rt_prop th_prop_str(const char *name, const char *v)
{
    struct rt_prop p = th_prop(name, RT_EDM_STRING);
    p.v.bytes.p = (const uint8_t *)v;
    p.v.bytes.n = strlen(v);
    return p;
}

struct rt_prop th_prop_i32(const char *name, int32_t v)
{
    struct rt_prop p = th_prop(name, RT_EDM_INT32);
    p.v.i32 = v;
    return p;
}

struct rt_prop th_prop_i64(const char *name, int64_t v)
{
    struct rt_prop p = th_prop(name, RT_EDM_INT64);
    p.v.i64 = v;
    return p;
}

void th_props(struct rt_buf *out, const struct rt_prop *props, size_t n)
{
    struct rt_props_writer w;
    rt_props_begin(&w, out);
    for (size_t i = 0; i < n; i++) {
        rt_props_add(&w, &props[i]);
    }
    rt_props_end(&w);
}

void th_props1(struct rt_buf *out, const char *name, const char *value)
{
    struct rt_prop p = th_prop_str(name, value);
    th_props(out, &p, 1);
}
