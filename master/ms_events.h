/* Events: every load-balancing decision and its outcome, and every server
 * state change, as one JSON object per event, so that every
 * decision can be explained after the fact. The master adds them on its loop
 * thread; the HTTP thread reads them (GET /api/events).
 *
 * Each event gets a sequence number (`seq`, strictly increasing across
 * restarts), `unix_ms` (wall clock) and `time` (ISO 8601 UTC). The last
 * @cap events are kept in memory (a ring); every event is also appended
 * to `events.jsonl` in the master's data directory (one JSON object per
 * line, written before ms_events_add returns but not synced: it survives
 * a crash of the process, not always a power cut) so a run can be
 * replayed offline. Opening loads the tail of that file back into the
 * ring and continues its sequence; a file over 64 MiB is rotated to
 * `events.jsonl.1` at open.
 *
 * Thread: ms_events_add() from one thread at a time (the loop);
 * ms_events_json() and ms_events_last_seq() from any thread (a mutex
 * guards the ring). */
#ifndef MS_EVENTS_H
#define MS_EVENTS_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#define MS_EVENTS_DEFAULT_CAP 10000
#define MS_EVENTS_FILE "events.jsonl"

struct ms_events;

/* Opens (creating) @dir/events.jsonl; @dir NULL = memory only. @cap 0 =
 * MS_EVENTS_DEFAULT_CAP. Errors: RT_EIO (@errmsg, RT_ERRMSG_SIZE bytes,
 * says why). */
int ms_events_open(const char *dir,
                   size_t cap,
                   struct ms_events **out,
                   char *errmsg);
void ms_events_close(struct ms_events *ev);

/* Adds @e (taken on every path; a JSON object): sets "seq", "unix_ms" and
 * "time" (first in the object), keeps it and appends it to the file (a
 * write error is logged once and the event is still kept in memory).
 * Returns the event's seq. */
uint64_t ms_events_add(struct ms_events *ev, json_t *e);
/* The same, returning a new reference to the event as stored (with seq,
 * unix_ms and time); the caller decrefs it. */
json_t *ms_events_add_get(struct ms_events *ev, json_t *e);

/* A JSON array (malloc'd text, caller frees) of the kept events with seq
 * > @since_seq and unix_ms >= @since_ms, oldest first, at most @limit (0
 * = all; when more match, the newest @limit). */
char *ms_events_json(struct ms_events *ev,
                     uint64_t since_seq,
                     uint64_t since_ms,
                     size_t limit);
uint64_t ms_events_last_seq(struct ms_events *ev);
/* Called by ms_events_add() with every event once it is stored: its
 * seq, "kind" ("" when none) and JSON text (borrowed for the call). The
 * sink must not add events itself. */
typedef void (*ms_events_sink_cb)(void *arg,
                                  uint64_t seq,
                                  const char *kind,
                                  const char *json);
/* Sets the sink (NULL: none). Thread: the adding thread (the loop). */
void ms_events_set_sink(struct ms_events *ev, ms_events_sink_cb cb, void *arg);
/* Events added since open (not counting those loaded from the file). */
uint64_t ms_events_added(struct ms_events *ev);

#endif
