/* Test helpers: building properties blobs and rt_prop values in one line.
 * Thread: tests only; no shared state. Strings are borrowed: the rt_prop
 * points at the caller's text, which must outlive it. */
#ifndef TH_PROPS_H
#define TH_PROPS_H

#include <stdint.h>

#include "rt_buf.h"
#include "rt_entity.h"

/* A property of type @t named @name with a zero value. */
struct rt_prop th_prop(const char *name, enum rt_edm t);
/* Typed properties. */
struct rt_prop th_prop_str(const char *name, const char *v);
struct rt_prop th_prop_i32(const char *name, int32_t v);
struct rt_prop th_prop_i64(const char *name, int64_t v);

/* Appends a blob holding the @n properties of @props to @out. */
void th_props(struct rt_buf *out, const struct rt_prop *props, size_t n);
/* Appends a blob with one string property @name = @value to @out. */
void th_props1(struct rt_buf *out, const char *name, const char *value);

#endif
