#include "rt_log.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char *rt__log_component = "rt";
static enum rt_log_level rt__log_min = RT_LOG_INFO;
static _Thread_local char rt__log_reqid[64];

static const char *const rt__log_names[RT_LOG__NR] = {"debug", "info", "warn",
                                                      "error", "fatal"};

void rt_log_init(const char *component, enum rt_log_level min_level)
{
    const char *trace = getenv("RT_TRACE");
    rt__log_component = component;
    rt__log_min = min_level;
    if (trace && strcmp(trace, "1") == 0) {
        rt__log_min = RT_LOG_DEBUG;
    }
}

int rt_log_level_parse(const char *s)
{
    for (int i = 0; i < RT_LOG__NR; i++) {
        if (strcmp(s, rt__log_names[i]) == 0) {
            return i;
        }
    }
    return -1;
}

int rt_log_init_flag(const char *prog, const char *component, const char *level)
{
    int l = rt_log_level_parse(level);
    if (l < 0) {
        fprintf(stderr, "%s: bad --log-level '%s' (debug|info|warn|error)\n",
                prog, level);
        return -1;
    }
    rt_log_init(component, (enum rt_log_level)l);
    return 0;
}

void rt_log_set_level(enum rt_log_level min_level)
{
    rt__log_min = min_level;
}

int rt_log_enabled(enum rt_log_level level)
{
    return level >= rt__log_min;
}

void rt_log_set_reqid(const char *reqid)
{
    if (!reqid) {
        rt__log_reqid[0] = '\0';
        return;
    }
    /* Called several times per request on the front end's hot path: a
     * bounded copy, not snprintf (~1% of a point GET's CPU). */
    size_t n = strnlen(reqid, sizeof(rt__log_reqid) - 1);
    memcpy(rt__log_reqid, reqid, n);
    rt__log_reqid[n] = '\0';
}

const char *rt_log_reqid(void)
{
    return rt__log_reqid;
}

void rt_log_write(enum rt_log_level level,
                  const char *file,
                  int line,
                  const char *func,
                  const char *fmt,
                  ...)
{
    char msg[1024];
    char line_buf[1400];
    struct timespec ts;
    struct tm tm;
    const char *base = strrchr(file, '/');
    va_list ap;
    int n;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    /* Keep one record per line: quotes and newlines would break logfmt. */
    for (char *p = msg; *p; p++) {
        if (*p == '"' || *p == '\n' || *p == '\r') {
            *p = *p == '"' ? '\'' : ' ';
        }
    }
    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    n = snprintf(line_buf, sizeof(line_buf),
                 "ts=%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ level=%s comp=%s%s%s "
                 "src=%s:%d func=%s msg=\"%s\"\n",
                 tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
                 tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000L,
                 rt__log_names[level], rt__log_component,
                 rt__log_reqid[0] ? " req=" : "", rt__log_reqid,
                 base ? base + 1 : file, line, func, msg);
    if (n > (int)sizeof(line_buf) - 1) {
        n = (int)sizeof(line_buf) - 1;
        line_buf[n - 1] = '\n';
    }
    /* One write per record so lines from threads do not interleave. */
    fwrite(line_buf, 1, (size_t)n, stderr);
    if (level == RT_LOG_FATAL) {
        fflush(stderr);
        abort();
    }
}
