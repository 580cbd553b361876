/* OData $filter (docs/table-api-spec.md §6.1-6.2): parse the text the
 * front end receives, ship it to partition servers in a compact binary form
 * (ScanReq.filter), evaluate it directly on the entity properties blob
 * (rt_entity.h; no JSON is ever built), and derive the key range a scan can
 * be narrowed to.
 *
 * Grammar (§6.1): or / and / not (keywords and operators accepted in any
 * case), parentheses, comparisons eq ne gt ge lt le with a property on one
 * side and a literal on the other (either order: "literal op Prop" is stored
 * as "Prop flipped-op literal"), a bare property (`IsActive` is
 * `IsActive eq true`), a bare boolean literal as a term (`true`,
 * `RowKey eq '1' and false`: folded while parsing; a filter that folds to
 * true parses to NULL, like an empty one, and one that folds to false to a
 * filter matching nothing whose bounds are empty). Literals: 'string' (''
 * escapes a quote), Int32
 * (`42`, `-7`), Int64 (`42L`), Double (`1.5`, `-2.0e10`, `1.5d`, `1e3`,
 * `NaN`, `INF`, `-INF`), true/false, datetime'ISO-8601', guid'8-4-4-4-12',
 * X'hex' / binary'hex'. Property names are case-sensitive; a bare `NaN` or
 * `INF` is the Double literal, never a property. Not supported (RT_EINVAL
 * with a precise message): functions, arithmetic, null, property-to-property
 * and literal-to-literal comparisons, more than RT_FILTER_MAX_COMPARISONS
 * comparisons, nesting deeper than RT_FILTER_MAX_NESTING.
 *
 * Evaluation (§6.2), decided here:
 *  - PartitionKey and RowKey are Edm.String, Timestamp is Edm.DateTime; they
 *    come from the eval arguments, never from the blob.
 *  - A comparison happens in the property's stored type. Int32, Int64 and
 *    Double compare by exact mathematical value with each other (Int64 vs
 *    Double never loses precision). Strings (UTF-8: PartitionKey, RowKey
 *    and String properties alike) compare as Azure's do, ordinal over
 *    UTF-16 code units (rt_utf16_cmp: supplementary characters before
 *    U+E000..U+FFFF), the order of storage keys, so bounds and scans
 *    agree; a proper prefix sorts first. Binary compares bytewise
 *    (memcmp); Guid compares its 16 bytes in text order; Boolean
 *    false < true; DateTime by ticks.
 *  - Any other type pairing (string literal vs Int32 property, guid vs
 *    string, datetime vs string, ...) makes the comparison false, for every
 *    operator including ne. A property the entity lacks makes it false too
 *    (also for ne).
 *  - NaN (literal or stored): every operator is false except ne (true).
 *  - `not` is plain boolean negation of its operand's result: `not (X eq 1)`
 *    is true for an entity without X or whose X is a string. This is the
 *    simple rule; Azure's behaviour here is unverified.
 *
 * Thread: parse/encode/decode/bounds are pure. A struct rt_filter is
 * immutable once returned, so any number of threads may evaluate one
 * filter concurrently; rt_filter_free() must not race with them. */
#ifndef RT_FILTER_H
#define RT_FILTER_H

#include <stddef.h>
#include <stdint.h>

#include "rt_buf.h"

/* Azure documents "at most 15 discrete comparisons" per filter (§6.1). A
 * bare boolean property counts as one comparison. */
#define RT_FILTER_MAX_COMPARISONS 15
/* Parentheses plus `not` nesting accepted by the parser. */
#define RT_FILTER_MAX_NESTING 64
/* Limits checked by the decoder (and guaranteed by the parser): tree nodes
 * and tree depth. */
#define RT_FILTER_MAX_NODES 1024
#define RT_FILTER_MAX_DEPTH 160
/* First byte of the binary form; bump on any incompatible change. */
#define RT_FILTER_ENC_VERSION 1

enum rt_filter_op {
    RT_FILTER_EQ = 0,
    RT_FILTER_NE = 1,
    RT_FILTER_GT = 2,
    RT_FILTER_GE = 3,
    RT_FILTER_LT = 4,
    RT_FILTER_LE = 5,
};

/* Opaque; created by rt_filter_parse() or rt_filter_decode(). */
struct rt_filter;

/* Parses @text[0..n), the already percent-decoded $filter value (a '+' in
 * the URL must already be a space). @text is borrowed: nothing is kept.
 * Returns 0 and *out = a new filter owned by the caller (free with
 * rt_filter_free()), or 0 and *out = NULL when @text is empty or only
 * spaces/tabs, or folds to the constant true ("no filter": every entity
 * matches).
 * Errors: RT_EINVAL (syntax or unsupported construct; @errmsg, if not NULL,
 * receives a message of at most RT_ERRMSG_SIZE bytes such as
 * "Unrecognized 'Edm.Int32' literal '2147483648' at position 8"),
 * RT_ENOMEM. *out is NULL on error. */
int rt_filter_parse(const char *text,
                    size_t n,
                    struct rt_filter **out,
                    char *errmsg);

/* Releases @f (NULL is fine). Pointers from rt_filter_bounds() die too. */
void rt_filter_free(struct rt_filter *f);

/* Appends the binary form of @f to @out (for ScanReq.filter). Format v1:
 *   u8 version (1) ‖ u8 ncmp (1..15) ‖ ncmp × comparison ‖ tree
 *   comparison: u8 op (enum rt_filter_op) ‖ u8 literal type (enum rt_edm) ‖
 *               u8 name_len (1..255) ‖ name ‖ value
 *     value: STRING/BINARY u32le len ‖ bytes; BOOL u8 0|1; INT32 4 LE;
 *            INT64, DATETIME, DOUBLE (IEEE bits) 8 LE; GUID 16
 *   tree (prefix order): 0 ‖ u8 cmp_index | 1 (not) ‖ tree |
 *                        2 (and) ‖ tree ‖ tree | 3 (or) ‖ tree ‖ tree
 * Returns 0 (always; allocation failure aborts per rt_buf policy). */
int rt_filter_encode(const struct rt_filter *f, struct rt_buf *out);

/* Rebuilds a filter from @p[0..n) (borrowed; nothing kept). Defensive:
 * every length, type, index and the trailing byte count are checked, depth
 * and node count are bounded, so hostile input gives RT_ECORRUPT, never a
 * crash. Returns 0 with *out owned by the caller, RT_ECORRUPT (also for an
 * unknown version), or RT_ENOMEM. n == 0 is corrupt: callers treat an
 * empty ScanReq.filter as "no filter" themselves. */
int rt_filter_decode(const uint8_t *p, size_t n, struct rt_filter **out);

/* Evaluates @f against one entity: @pk/@rk are PartitionKey/RowKey (UTF-8,
 * borrowed), @ticks its Timestamp, @blob[0..blob_n) its properties blob
 * (rt_entity.h). The blob is read only when the filter names a property
 * other than PartitionKey/RowKey/Timestamp, in a single pass that stops once
 * every referenced property was seen. f == NULL matches everything.
 * Returns 1 (match), 0 (no match) or RT_ECORRUPT (blob malformed before all
 * referenced properties were found). No allocation; thread-safe. */
int rt_filter_eval(const struct rt_filter *f,
                   const char *pk,
                   size_t pklen,
                   const char *rk,
                   size_t rklen,
                   uint64_t ticks,
                   const uint8_t *blob,
                   size_t blob_n);

/* One side of a key range. When !set the side is unbounded. */
struct rt_filter_bound
{
    int set;
    int inclusive;
    const char *s; /* points into the filter; valid until rt_filter_free() */
    size_t n;
};

/* Key range implied by the top-level conjunction of the filter (every
 * comparison reachable from the root through `and` nodes only; anything
 * under or/not is ignored). Only string literals compared with eq/gt/ge/lt/
 * le count; ne never narrows.
 *  - empty: no entity can match (contradictory bounds such as
 *    PartitionKey eq 'a' and PartitionKey eq 'b', or a key compared with a
 *    non-string literal, which is always false): the scan can be skipped.
 *  - pk_lo/pk_hi: PartitionKey range.
 *  - pk_eq: pk_lo and pk_hi are the same inclusive value.
 *  - rk_lo/rk_hi: RowKey range, filled only when pk_eq (otherwise RowKey
 *    does not bound the (PK, RK)-ordered scan); never set otherwise.
 * The bounds are safe, not exact: the filter must still be evaluated per
 * entity. An exclusive bound may be treated as inclusive by the scanner.
 * Strings point into @f (no copies). Returns 0; f == NULL gives an
 * unbounded, non-empty range. */
struct rt_filter_bounds
{
    int empty;
    int pk_eq;
    struct rt_filter_bound pk_lo, pk_hi, rk_lo, rk_hi;
};
int rt_filter_bounds(const struct rt_filter *f, struct rt_filter_bounds *b);

/* 1 when some comparison of @f names property @name[0..n) (case-sensitive,
 * "PartitionKey"/"RowKey"/"Timestamp" included), else 0. */
int rt_filter_references(const struct rt_filter *f, const char *name, size_t n);

/* Number of comparisons in @f (0 for NULL). */
int rt_filter_comparisons(const struct rt_filter *f);

/* Appends a canonical, fully parenthesised rendering of @f to @out (for
 * logs and tests), e.g. "((A eq 1) and (not (B gt 'x')))". Literals are
 * printed in filter syntax, so the output parses back to an equal filter.
 * f == NULL appends "true". */
void rt_filter_format(const struct rt_filter *f, struct rt_buf *out);

#endif
