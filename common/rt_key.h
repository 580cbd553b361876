/* Storage keys (DESIGN §3): table_id (8 bytes big endian) ‖ enc(PK) ‖ enc(RK).
 * enc() is order-preserving and self-delimiting: each byte goes through
 * rt_utf16_byte (rt_utf8.h: the UTF-8 lead bytes 0xEE/0xEF of U+E000..U+FFFF
 * become 0xF5/0xF6, above every supplementary character's 0xF0..0xF4), every
 * 0x00 byte becomes 0x00 0xFF and the string ends with 0x00 0x01. So memcmp
 * order of keys equals (table, PartitionKey, RowKey) in Azure's order,
 * ordinal over UTF-16 code units (rt_utf16_cmp), and no key is a prefix of a
 * different key's encoding (0xF5/0xF6 are not 0x00, so the escape and the
 * terminator are untouched). Range bounds use the prefix table_id ‖ enc(PK).
 *
 * Key format 1 (stores written before the byte map) kept the raw bytes;
 * rt_key_dec reads both (0xEE/0xEF never come out of format 2's enc()), so
 * a store being migrated (ps_store.c) can hold both kinds of key.
 * Thread: pure functions. */
#ifndef RT_KEY_H
#define RT_KEY_H

#include <stddef.h>
#include <stdint.h>

#include "rt_buf.h"

/* Longest encoded key we ever build: 8 + 2 * (2 * 1024 * 4 + 2). */
#define RT_KEY_MAX 32800

/* Current key format (kept in the partition server's store meta). */
#define RT_KEY_FORMAT 2

/* Appends enc(@s[0..n)) to @out. */
void rt_key_enc(struct rt_buf *out, const char *s, size_t n);
/* Decodes one enc() string (format 1 or 2) starting at @in (length @n) into
 * @out (appended).
 * Sets *consumed to the bytes read, terminator included.
 * Returns 0 or RT_ECORRUPT (no terminator, bad escape). */
int rt_key_dec(const uint8_t *in,
               size_t n,
               size_t *consumed,
               struct rt_buf *out);

/* Full storage key of an entity. */
void rt_key_entity(struct rt_buf *out,
                   uint64_t table_id,
                   const char *pk,
                   size_t pklen,
                   const char *rk,
                   size_t rklen);
/* Lower bound of all keys with PartitionKey >= @pk in the table:
 * table_id ‖ enc(pk). */
void rt_key_pk_prefix(struct rt_buf *out,
                      uint64_t table_id,
                      const char *pk,
                      size_t pklen);
/* First key after every key of the table: (table_id + 1) as 8 bytes BE. */
void rt_key_table_end(struct rt_buf *out, uint64_t table_id);
/* Splits a storage key into table id, PK and RK (PK and RK are appended to
 * @pk/@rk, which the caller owns). Returns 0 or RT_ECORRUPT. */
int rt_key_split(const uint8_t *key,
                 size_t n,
                 uint64_t *table_id,
                 struct rt_buf *pk,
                 struct rt_buf *rk);

#endif
