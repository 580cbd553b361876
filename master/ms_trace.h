/* Load traces: the writer and reader of the trace file format
 * (docs/TRACE.md), in which the master records what it saw and decided
 * (heartbeat loads as received, the map, ticks, decisions and their
 * outcomes, events) so that a simulator can replay it against any policy.
 *
 * The file is a gzip stream (zlib) whose content is one or more segments:
 *
 *   "\0RTTRACE" (8 bytes) | u16 LE major | u16 LE minor
 *   then records: varint length | packed rt.TraceRecord
 *
 * A segment's first record is its TraceHeader; each record's t_ms is
 * monotonic milliseconds since its segment began. A record length is
 * never 0, so a 0 byte where a record would start begins a new segment.
 * PartitionKeys of heartbeat samples are interned: a TraceKey record
 * (id, key) comes before the first record naming that id.
 *
 * Versioning: fields and record kinds are only added. A reader refuses a
 * file whose major version is newer than MS_TRACE_MAJOR; minor versions
 * only add (an older reader skips what it does not know, as protobuf
 * does).
 *
 * Pure module: no libuv, no clock (callers pass monotonic ms). The writer
 * buffers in zlib and writes only when its buffer fills or on flush; it
 * never fsyncs. A crash leaves a stream that the reader reads up to the
 * last whole record flushed. Thread: one object per thread, not shared. */
#ifndef MS_TRACE_H
#define MS_TRACE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "rt.pb-c.h"

#define MS_TRACE_MAJOR 1
#define MS_TRACE_MINOR 2 /* 1: TraceOutcome.born_ms; 2: TraceRange.times */
#define MS_TRACE_MAGIC "\0RTTRACE"
#define MS_TRACE_MAGIC_LEN 8
/* Interned keys the writer remembers; when full it forgets them all and
 * later samples get new ids (so a master's memory stays bounded). */
#define MS_TRACE_KEYS_MAX 65536
/* Larger records are refused as corrupt by the reader. */
#define MS_TRACE_RECORD_MAX (64u << 20)

struct ms_trace_stats
{
    uint64_t records;    /* records written (headers included) */
    uint64_t bytes;      /* uncompressed bytes written */
    uint64_t file_bytes; /* compressed bytes handed to the file so far */
    uint32_t segments;
    uint64_t keys; /* TraceKey records written */
};

/* ---- writer ---- */

struct ms_trace_writer;

/* Creates (truncating) @path. Errors: RT_EIO (@errmsg, RT_ERRMSG_SIZE
 * bytes, says why). Nothing is written before the first segment. */
int ms_trace_writer_open(const char *path,
                         struct ms_trace_writer **out,
                         char *errmsg);

/* Starts a segment at @now_ms: the magic, the version and @hdr
 * (borrowed; its segment number is set by the writer). Later records'
 * t_ms count from @now_ms. Errors: RT_EIO. */
int ms_trace_writer_segment(struct ms_trace_writer *w,
                            uint64_t now_ms,
                            Rt__TraceHeader *hdr,
                            char *errmsg);

/* Appends @rec (borrowed; its t_ms is set from @now_ms — raised to the
 * previous record's when @now_ms is older, so t_ms never decreases — and
 * one of its oneof members must be set) to the current segment. Errors:
 * RT_EINVAL (no segment started), RT_EIO. */
int ms_trace_writer_record(struct ms_trace_writer *w,
                           uint64_t now_ms,
                           Rt__TraceRecord *rec,
                           char *errmsg);

/* Appends heartbeat @req (borrowed) received at @now_ms: one
 * TraceHeartbeat, preceded by a TraceKey for every sampled PartitionKey
 * not interned yet. @ignored (may be NULL) has one flag per req->loads
 * entry: loads the master did not fold in. Errors: as _record. */
int ms_trace_writer_heartbeat(struct ms_trace_writer *w,
                              uint64_t now_ms,
                              const Rt__HeartbeatReq *req,
                              const bool *ignored,
                              char *errmsg);

/* @now_ms (monotonic) on the records' t_ms clock (0 before the first
 * segment's start). */
uint64_t ms_trace_writer_rel(const struct ms_trace_writer *w, uint64_t now_ms);

/* Hands what zlib buffered to the file (a sync flush: everything written
 * so far can be read back). Errors: RT_EIO. */
int ms_trace_writer_flush(struct ms_trace_writer *w, char *errmsg);

void ms_trace_writer_stats(const struct ms_trace_writer *w,
                           struct ms_trace_stats *st);

/* Writes a TraceEnd with @reason (unless @reason is NULL or no segment
 * was started), flushes, closes and frees @w on every path. Errors:
 * RT_EIO (the file may lack its end). */
int ms_trace_writer_close(struct ms_trace_writer *w,
                          uint64_t now_ms,
                          const char *reason,
                          char *errmsg);

/* ---- reader ---- */

struct ms_trace_reader;

/* Opens @path and checks its first segment's magic and version (a plain,
 * uncompressed stream is read as well). Errors: RT_EIO (cannot open),
 * RT_ECORRUPT (not a trace), RT_EPROTO (a newer major version: @errmsg
 * names both versions). */
int ms_trace_reader_open(const char *path,
                         struct ms_trace_reader **out,
                         char *errmsg);

/* The next record: 1 and *@out (free it with ms_trace_record_free), or 0
 * at the end of the file: a clean end, or a file cut short (by a crash)
 * whose partial last record is dropped (ms_trace_reader_truncated() then
 * says so). A new segment's magic is checked on the way (its header is
 * the next record returned). TraceKey records are returned and also
 * remembered for ms_trace_reader_key(). Errors: RT_ECORRUPT, RT_EPROTO,
 * RT_EIO. */
int ms_trace_reader_next(struct ms_trace_reader *r,
                         Rt__TraceRecord **out,
                         char *errmsg);

/* True when the file ended inside a record or a gzip stream. */
bool ms_trace_reader_truncated(const struct ms_trace_reader *r);
/* The version of the segment being read. */
void ms_trace_reader_version(const struct ms_trace_reader *r,
                             unsigned *major,
                             unsigned *minor);
/* The key interned as @id by a TraceKey already read, or NULL. Valid
 * until ms_trace_reader_close. */
const char *ms_trace_reader_key(const struct ms_trace_reader *r, uint64_t id);
void ms_trace_reader_close(struct ms_trace_reader *r);

/* A replay's input: @t (a load of a heartbeat just read) as the
 * rt.RangeLoad the master received, for ms_load_report(). @out is
 * initialised here; its sample_pks is @pks (room for t->n_sample_keys
 * pointers, the caller's) pointing at the reader's keys (valid until
 * ms_trace_reader_close). Errors: RT_ECORRUPT (a key id no TraceKey
 * defined). */
int ms_trace_reader_range_load(const struct ms_trace_reader *r,
                               const Rt__TraceLoad *t,
                               Rt__RangeLoad *out,
                               char **pks);

void ms_trace_record_free(Rt__TraceRecord *rec);

/* The name of @rec's oneof member ("header", "key", "map", ...). */
const char *ms_trace_record_kind(const Rt__TraceRecord *rec);

#endif
