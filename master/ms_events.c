/* Events: memory ring + JSON-lines file (see ms_events.h). */
#include "ms_events.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "ms_util.h"
#include "rt_alloc.h"
#include "rt_buf.h"
#include "rt_err.h"
#include "rt_log.h"

#define MS__EVENTS_ROTATE (64u << 20)

struct ms__ev
{
    uint64_t seq;
    uint64_t unix_ms;
    char *text; /* compact JSON object */
};

struct ms_events
{
    pthread_mutex_t lock; /* guards ring, head, n, last_seq */
    struct ms__ev *ring;
    size_t cap;
    size_t head; /* oldest */
    size_t n;
    uint64_t last_seq;
    uint64_t added;
    int fd; /* -1: memory only */
    bool write_failed;
    ms_events_sink_cb sink; /* loop thread only */
    void *sink_arg;
};

/* Appends to the ring (lock held); takes @text. */
static void ms__ring_put(struct ms_events *ev,
                         uint64_t seq,
                         uint64_t unix_ms,
                         char *text)
{
    struct ms__ev *slot;
    if (ev->n == ev->cap) {
        slot = &ev->ring[ev->head];
        free(slot->text);
        ev->head = (ev->head + 1) % ev->cap;
    } else {
        slot = &ev->ring[(ev->head + ev->n) % ev->cap];
        ev->n++;
    }
    slot->seq = seq;
    slot->unix_ms = unix_ms;
    slot->text = text;
    if (seq > ev->last_seq) {
        ev->last_seq = seq;
    }
}

/* Loads the file's lines into the ring (the ring keeps the last cap). */
static void ms__load(struct ms_events *ev, const char *path)
{
    FILE *f = fopen(path, "r");
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    size_t bad = 0;
    if (!f) {
        return;
    }
    while ((len = getline(&line, &cap, f)) > 0) {
        json_error_t jerr;
        json_t *o;
        uint64_t seq;
        while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r')) {
            line[--len] = '\0';
        }
        if (len == 0) {
            continue;
        }
        o = json_loadb(line, (size_t)len, 0, &jerr);
        seq = json_is_object(o)
                  ? (uint64_t)json_integer_value(json_object_get(o, "seq"))
                  : 0;
        if (!seq) {
            bad++; /* e.g. a torn last line after a crash */
            json_decref(o);
            continue;
        }
        ms__ring_put(
            ev, seq,
            (uint64_t)json_integer_value(json_object_get(o, "unix_ms")),
            rt_xstrdup(line));
        json_decref(o);
    }
    free(line);
    fclose(f);
    if (bad) {
        rt_log(RT_LOG_WARN, "events: %zu unreadable lines in %s skipped", bad,
               path);
    }
}

int ms_events_open(const char *dir,
                   size_t cap,
                   struct ms_events **out,
                   char *errmsg)
{
    struct ms_events *ev = rt_xcalloc(1, sizeof(*ev));
    char path[4096];
    struct stat st;

    ev->cap = cap ? cap : MS_EVENTS_DEFAULT_CAP;
    ev->ring = rt_xcalloc(ev->cap, sizeof(*ev->ring));
    ev->fd = -1;
    pthread_mutex_init(&ev->lock, NULL);
    if (dir) {
        snprintf(path, sizeof(path), "%s/%s", dir, MS_EVENTS_FILE);
        if (stat(path, &st) == 0 && (uint64_t)st.st_size > MS__EVENTS_ROTATE) {
            char old[4200];
            snprintf(old, sizeof(old), "%s.1", path);
            ms__load(ev, path); /* keep the sequence and the ring */
            if (rename(path, old) != 0) {
                rt_log(RT_LOG_WARN, "events: rotate %s: %s", path,
                       strerror(errno));
            }
        } else {
            ms__load(ev, path);
        }
        ev->fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
        if (ev->fd < 0) {
            if (errmsg) {
                rt_errmsg_printf(errmsg, "open %s: %s", path, strerror(errno));
            }
            ms_events_close(ev);
            return RT_EIO;
        }
    }
    *out = ev;
    return 0;
}

void ms_events_close(struct ms_events *ev)
{
    if (!ev) {
        return;
    }
    for (size_t i = 0; i < ev->n; i++) {
        free(ev->ring[(ev->head + i) % ev->cap].text);
    }
    free(ev->ring);
    if (ev->fd >= 0) {
        close(ev->fd);
    }
    pthread_mutex_destroy(&ev->lock);
    free(ev);
}

uint64_t ms_events_add(struct ms_events *ev, json_t *e)
{
    json_t *o = ms_events_add_get(ev, e);
    uint64_t seq = (uint64_t)json_integer_value(json_object_get(o, "seq"));
    json_decref(o);
    return seq;
}

json_t *ms_events_add_get(struct ms_events *ev, json_t *e)
{
    json_t *o = json_object();
    char iso[64];
    uint64_t now = ms_unix_ms(), seq;
    time_t secs = (time_t)(now / 1000);
    struct tm tm;
    const char *k;
    json_t *v;
    char *text;

    pthread_mutex_lock(&ev->lock);
    seq = ev->last_seq + 1;
    pthread_mutex_unlock(&ev->lock);

    gmtime_r(&secs, &tm);
    snprintf(iso, sizeof(iso), "%04d-%02d-%02dT%02d:%02d:%02d.%03uZ",
             tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
             tm.tm_min, tm.tm_sec, (unsigned)(now % 1000));
    /* seq, unix_ms and time first, then the caller's fields in order. */
    json_object_set_new(o, "seq", json_integer((json_int_t)seq));
    json_object_set_new(o, "unix_ms", json_integer((json_int_t)now));
    json_object_set_new(o, "time", json_string(iso));
    if (json_is_object(e)) {
        json_object_foreach(e, k, v)
        {
            if (strcmp(k, "seq") && strcmp(k, "unix_ms") && strcmp(k, "time")) {
                json_object_set(o, k, v);
            }
        }
    }
    json_decref(e);
    text = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER |
                             JSON_REAL_PRECISION(10) | JSON_ENSURE_ASCII);
    if (!text) {
        text = rt_xstrdup("{}");
    }
    if (ev->fd >= 0) {
        size_t n = strlen(text);
        char *line = rt_xmalloc(n + 1);
        ssize_t w;
        memcpy(line, text, n);
        line[n] = '\n';
        /* Written, not synced: a kill of the process loses nothing, a
         * power cut may lose the last events. An fdatasync here stalled
         * the master's loop for up to 1.5 s on a busy disk, which a
         * replicated master takes for a deposing stall. */
        w = write(ev->fd, line, n + 1);
        if (w != (ssize_t)(n + 1)) {
            if (!ev->write_failed) {
                rt_log(RT_LOG_ERROR, "events: append to %s failed: %s",
                       MS_EVENTS_FILE, w < 0 ? strerror(errno) : "short write");
            }
            ev->write_failed = true;
        }
        free(line);
    }
    if (ev->sink) {
        const char *kind = json_string_value(json_object_get(o, "kind"));
        ev->sink(ev->sink_arg, seq, kind ? kind : "", text);
    }
    pthread_mutex_lock(&ev->lock);
    ms__ring_put(ev, seq, now, text);
    ev->added++;
    pthread_mutex_unlock(&ev->lock);
    return o;
}

char *ms_events_json(struct ms_events *ev,
                     uint64_t since_seq,
                     uint64_t since_ms,
                     size_t limit)
{
    struct rt_buf b = RT_BUF_INIT;
    size_t first, count = 0, len;
    bool comma = false;

    pthread_mutex_lock(&ev->lock);
    /* Oldest matching index, then keep at most the newest @limit. */
    first = ev->n;
    for (size_t i = 0; i < ev->n; i++) {
        const struct ms__ev *e = &ev->ring[(ev->head + i) % ev->cap];
        if (e->seq > since_seq && e->unix_ms >= since_ms) {
            if (first == ev->n) {
                first = i;
            }
            count++;
        }
    }
    if (limit && count > limit) {
        size_t skip = count - limit;
        for (size_t i = first; i < ev->n && skip; i++) {
            const struct ms__ev *e = &ev->ring[(ev->head + i) % ev->cap];
            if (e->seq > since_seq && e->unix_ms >= since_ms) {
                skip--;
                first = i + 1;
            }
        }
    }
    rt_buf_append_str(&b, "[");
    for (size_t i = first; i < ev->n; i++) {
        const struct ms__ev *e = &ev->ring[(ev->head + i) % ev->cap];
        if (e->seq > since_seq && e->unix_ms >= since_ms) {
            if (comma) {
                rt_buf_append_str(&b, ",\n");
            }
            rt_buf_append_str(&b, e->text);
            comma = true;
        }
    }
    pthread_mutex_unlock(&ev->lock);
    rt_buf_append_str(&b, "]\n");
    rt_buf_cstr(&b);
    return (char *)rt_buf_steal(&b, &len);
}

/* Reads @field of @ev under its lock. */
static uint64_t ms__locked_read(struct ms_events *ev, const uint64_t *field)
{
    uint64_t v;
    pthread_mutex_lock(&ev->lock);
    v = *field;
    pthread_mutex_unlock(&ev->lock);
    return v;
}

uint64_t ms_events_last_seq(struct ms_events *ev)
{
    return ms__locked_read(ev, &ev->last_seq);
}

void ms_events_set_sink(struct ms_events *ev, ms_events_sink_cb cb, void *arg)
{
    ev->sink = cb;
    ev->sink_arg = arg;
}

uint64_t ms_events_added(struct ms_events *ev)
{
    return ms__locked_read(ev, &ev->added);
}
