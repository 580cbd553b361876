/* Logging: one macro, logfmt lines on stderr carrying time, level,
 * component, request id and source location.
 * Thread: rt_log() is safe from any thread; the request id is thread-local.
 * Never log Authorization headers, keys, signatures or entity bodies. */
#ifndef RT_LOG_H
#define RT_LOG_H

enum rt_log_level {
    RT_LOG_DEBUG,
    RT_LOG_INFO,
    RT_LOG_WARN,
    RT_LOG_ERROR,
    RT_LOG_FATAL,
    RT_LOG__NR
};

/* @component is borrowed and must outlive the process ("fe", "ps", ...). */
void rt_log_init(const char *component, enum rt_log_level min_level);
/* Parses "debug|info|warn|error|fatal"; returns -1 if unknown. */
int rt_log_level_parse(const char *s);
/* rt_log_init from a daemon's --log-level flag: returns 0, or -1 after
 * telling stderr that @prog got a bad level (the caller exits 2). */
int rt_log_init_flag(const char *prog,
                     const char *component,
                     const char *level);
void rt_log_set_level(enum rt_log_level min_level);
int rt_log_enabled(enum rt_log_level level);
/* Sets this thread's request id (copied, up to 63 bytes); NULL clears. */
void rt_log_set_reqid(const char *reqid);
/* This thread's request id, "" when none. Valid until the next
 * rt_log_set_reqid on this thread. rt_rpc_call sends it with each request
 * and the receiving side sets it around its handler, so one id follows a
 * request through every process's log lines. */
const char *rt_log_reqid(void);

void rt_log_write(enum rt_log_level level,
                  const char *file,
                  int line,
                  const char *func,
                  const char *fmt,
                  ...) __attribute__((format(printf, 5, 6)));

#define rt_log(level, ...)                                                    \
    do {                                                                      \
        if (rt_log_enabled(level))                                            \
            rt_log_write((level), __FILE__, __LINE__, __func__, __VA_ARGS__); \
    } while (0)

#endif
