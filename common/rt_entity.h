/* Entity binary codec (DESIGN §3): the form entities keep from the front
 * end's JSON parser, through RPC and LMDB, to the JSON writer and the
 * filter evaluator, so no layer rebuilds JSON.
 *
 * Properties blob (PartitionKey, RowKey and Timestamp are NOT in it):
 *   u16le count, then per property:
 *   u8 type (enum rt_edm) ‖ u8 name_len (1..255) ‖ name (UTF-8) ‖ value
 *   value: STRING/BINARY: u32le length ‖ bytes
 *          BOOL: u8 (0|1); INT32: 4 bytes LE; INT64, DATETIME (ticks): 8 LE;
 *          DOUBLE: 8 bytes LE IEEE-754; GUID: 16 bytes (text order of the
 *          32 hex digits, i.e. "c9da6455-..." -> c9 da 64 55 ...)
 *   Properties keep the order they were given in.
 *
 * Stored value (what LMDB holds and RPC replies carry):
 *   u8 version (1) ‖ u8 flags ‖ u16le reserved (0) ‖ u32le crc ‖
 *   u64le ticks (Timestamp/ETag) ‖ properties blob
 *   With flag RT_VALUE_F_CRC, crc is the CRC32C of
 *   storage key ‖ header with crc 0 ‖ blob (docs/DESIGN-replication.md
 *   §5.6), set once by the store that writes the value; without it (values
 *   written before checksums, values built only to be formatted) crc is 0
 *   and nothing is checked.
 *
 * Thread: pure functions. Pointers in struct rt_prop borrow from the blob
 * they were decoded from. */
#ifndef RT_ENTITY_H
#define RT_ENTITY_H

#include <stddef.h>
#include <stdint.h>

#include "rt_buf.h"

enum rt_edm {
    RT_EDM_STRING = 1,
    RT_EDM_BINARY = 2,
    RT_EDM_BOOL = 3,
    RT_EDM_DATETIME = 4,
    RT_EDM_DOUBLE = 5,
    RT_EDM_GUID = 6,
    RT_EDM_INT32 = 7,
    RT_EDM_INT64 = 8,
};

#define RT_VALUE_HDR_SIZE 16
#define RT_VALUE_VERSION 1
#define RT_VALUE_F_CRC 0x01 /* the crc field is set */

/* Limits (docs/table-api-spec.md §9); one place for all of them. */
#define RT_MAX_USER_PROPS 252 /* 255 including PK, RK, Timestamp */
#define RT_MAX_PROP_NAME 255
#define RT_MAX_STRING_UTF16 32767 /* Azure rejects 32768 UTF-16 units */
#define RT_MAX_BINARY 65536
#define RT_MAX_ENTITY_BYTES (1024 * 1024)
#define RT_MAX_KEY_UTF16 1024 /* PartitionKey / RowKey, §12 item 2 */

struct rt_prop
{
    const char *name; /* not NUL-terminated */
    size_t name_len;
    enum rt_edm type;
    union {
        struct
        {
            const uint8_t *p; /* STRING (UTF-8) or BINARY bytes */
            size_t n;
        } bytes;
        int32_t i32;
        int64_t i64;    /* INT64 */
        uint64_t ticks; /* DATETIME */
        double d;
        int b;
        uint8_t guid[16];
    } v;
};

/* Writing a blob: begin, add each property, end (patches the count). */
struct rt_props_writer
{
    struct rt_buf *out;
    size_t start;
    unsigned count;
};
void rt_props_begin(struct rt_props_writer *w, struct rt_buf *out);
void rt_props_add(struct rt_props_writer *w, const struct rt_prop *p);
void rt_props_end(struct rt_props_writer *w);

/* Reading a blob. rt_props_iter_init returns 0 or RT_ECORRUPT;
 * rt_props_next returns 1 (got one), 0 (end) or RT_ECORRUPT. */
struct rt_props_iter
{
    const uint8_t *p;
    const uint8_t *end;
    unsigned remaining;
};
int rt_props_iter_init(struct rt_props_iter *it, const uint8_t *blob, size_t n);
int rt_props_next(struct rt_props_iter *it, struct rt_prop *out);
/* Full structural check of a blob (types known, lengths in bounds, count
 * matches, no trailing bytes). Returns 0 or RT_ECORRUPT. */
int rt_props_check(const uint8_t *blob, size_t n);
/* Finds property @name; returns 1 and fills @out, 0 if absent, or
 * RT_ECORRUPT. */
int rt_props_find(const uint8_t *blob,
                  size_t n,
                  const char *name,
                  size_t name_len,
                  struct rt_prop *out);
/* Merge (Azure Merge Entity): every property of @upd, then every property of
 * @old whose name @upd does not have. Result appended to @out as a blob.
 * Returns 0, RT_ECORRUPT (either blob), or RT_ETOOMANYPROPS when the result
 * would hold more than RT_MAX_USER_PROPS properties (nothing appended). */
int rt_props_merge(struct rt_buf *out,
                   const uint8_t *old,
                   size_t old_n,
                   const uint8_t *upd,
                   size_t upd_n);

/* Azure's key rules (table-api-spec.md §9), one implementation for the
 * front end and the store: @s (@n bytes, not NUL-terminated) must be valid
 * UTF-8 without / \ # ?, control characters U+0000-U+001F or
 * U+007F-U+009F, and at most RT_MAX_KEY_UTF16 UTF-16 units. Returns 0,
 * RT_EINVAL (bad character or encoding) or RT_EOUTOFRANGE (too long); on 0
 * and @units non-NULL, *units is the length in UTF-16 units. */
int rt_entity_key_check(const char *s, size_t n, size_t *units);

/* Azure's size of one property (table-api-spec.md §9): 8 + 2 * UTF-16
 * units of the name + the value's size (strings 4 + 2 * units, binary
 * 4 + bytes, Bool 1, Int32 4, Guid 16, the rest 8). The name and a
 * string value must be valid UTF-8. */
size_t rt_prop_azure_size(const struct rt_prop *p);

/* The limits of one property value: a string of at most
 * RT_MAX_STRING_UTF16 units, a binary of at most RT_MAX_BINARY bytes.
 * Returns 0 or RT_EPROPTOOLARGE. */
int rt_prop_check_limits(const struct rt_prop *p);

/* Checks a properties blob as it would be stored, for keys of @pk_units
 * and @rk_units UTF-16 units: structure, at most RT_MAX_USER_PROPS
 * properties, every value within rt_prop_check_limits, and Azure's entity
 * size 4 + 2 * (pk_units + rk_units) + the sum of rt_prop_azure_size at
 * most RT_MAX_ENTITY_BYTES. Returns 0, RT_EINVAL (malformed blob),
 * RT_ETOOMANYPROPS, RT_EPROPTOOLARGE or RT_EENTITYTOOLARGE. */
int rt_entity_check(const uint8_t *blob,
                    size_t n,
                    size_t pk_units,
                    size_t rk_units);

/* Stored value: header + blob. */
void rt_value_encode(struct rt_buf *out,
                     uint64_t ticks,
                     uint8_t flags,
                     const uint8_t *blob,
                     size_t blob_n);
/* Seals the encoded value @value[0..n) (n >= RT_VALUE_HDR_SIZE) stored
 * under storage key @key[0..kn): sets RT_VALUE_F_CRC and the crc field. */
void rt_value_seal(uint8_t *value, size_t n, const uint8_t *key, size_t kn);
/* Checks the value @value[0..n) read under storage key @key[0..kn)
 * (both borrowed): 0 when it is sealed and the crc matches, or when it is
 * not sealed; RT_ECORRUPT on a mismatch or a header too short to hold a
 * crc. */
int rt_value_check(const uint8_t *value,
                   size_t n,
                   const uint8_t *key,
                   size_t kn);
/* Clears RT_VALUE_F_CRC and the crc field of @value[0..n): for a value
 * derived from a stored one (a projection), which the crc no longer
 * covers. */
void rt_value_unseal(uint8_t *value, size_t n);
/* Returns 0 or RT_ECORRUPT; *blob points into @value. Checks the header's
 * shape only, never the crc (rt_value_check does). */
int rt_value_decode(const uint8_t *value,
                    size_t n,
                    uint64_t *ticks,
                    uint8_t *flags,
                    const uint8_t **blob,
                    size_t *blob_n);

#endif
