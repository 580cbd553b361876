/* Time: the entity clock is .NET ticks (100 ns since 0001-01-01T00:00:00Z),
 * which is both Timestamp and ETag. Thread: all functions thread-safe. */
#ifndef RT_TIME_H
#define RT_TIME_H

#include <stddef.h>
#include <stdint.h>

/* Ticks at the Unix epoch (1970-01-01T00:00:00Z). */
#define RT_TICKS_UNIX_EPOCH 621355968000000000ULL
#define RT_TICKS_PER_SEC 10000000ULL
/* Edm.DateTime range accepted by Azure: 1601-01-01 ..
 * 9999-12-31T23:59:59.9999999Z */
#define RT_TICKS_MIN 504911232000000000ULL
#define RT_TICKS_MAX 3155378975999999999ULL

/* Wall clock now in ticks. */
uint64_t rt_time_now_ticks(void);
/* Monotonic milliseconds, for timeouts. */
uint64_t rt_time_mono_ms(void);
/* Monotonic microseconds on the same clock, for measuring durations. */
uint64_t rt_time_mono_us(void);

/* ISO 8601 UTC with up to 7 fraction digits, trailing zeros removed and no
 * '.' when the fraction is zero (.NET RoundtripKind):
 * "2021-04-07T23:56:22.6754067Z", "2008-07-10T00:00:00Z".
 * @out must hold RT_TIME_ISO_SIZE bytes. Returns the length. */
#define RT_TIME_ISO_SIZE 40
size_t rt_time_format_iso(uint64_t ticks, char *out);
/* The same with exactly 7 fraction digits (Timestamp/ETag form used by the
 * service: "2024-05-01T10:11:12.3456789Z"). */
size_t rt_time_format_iso7(uint64_t ticks, char *out);
/* Parses YYYY-MM-DDTHH:MM[:SS[.f{1,7}]][Z|±hh:mm]; no zone means UTC.
 * Returns 0 or RT_EINVAL (syntax) / RT_EOUTOFRANGE (outside 1601..9999). */
int rt_time_parse_iso(const char *s, size_t n, uint64_t *ticks);

/* RFC 1123 "Mon, 14 Oct 2013 18:25:49 GMT" for now; @out >= 32 bytes. */
void rt_time_http_date(char *out, size_t n);
/* Parses an RFC 1123 date into Unix seconds. Returns 0 or RT_EINVAL. */
int rt_time_parse_http_date(const char *s, int64_t *unix_secs);

#endif
