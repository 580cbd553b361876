/* Service-manager notifications: the sd_notify(3) protocol, so a daemon run
 * by systemd as Type=notify tells it when it is actually serving
 * ("READY=1"), what it is doing ("STATUS=..."), that it is reloading
 * ("RELOADING=1", then "READY=1" again) and that it is stopping
 * ("STOPPING=1").
 *
 * The protocol is one datagram of newline-separated KEY=VALUE lines sent to
 * the AF_UNIX socket named by $NOTIFY_SOCKET (a path, or an abstract name
 * when it starts with '@'). We send it ourselves instead of linking
 * libsystemd: it is one sendto(), the protocol is a stable documented
 * interface (systemd's "Interface Portability and Stability Promise"), and
 * the daemons then need no libsystemd at run time (README line 1 and the
 * non-systemd hosts). Without $NOTIFY_SOCKET (a shell, a test, run-local.sh)
 * every call does nothing and returns 1.
 *
 * Thread: any; no state is kept (each call opens, sends on and closes its
 * own socket). $NOTIFY_SOCKET is read on each call and left in the
 * environment, so a re-executed master notifies the same manager. */
#ifndef RT_NOTIFY_H
#define RT_NOTIFY_H

/* Sends @state (borrowed; e.g. "READY=1\nSTATUS=serving") to
 * $NOTIFY_SOCKET. Returns 0 when sent, 1 when there is no $NOTIFY_SOCKET,
 * RT_EINVAL for a socket name that is not absolute, not '@' and too long,
 * or RT_EIO when the datagram could not be sent (errno says why; the
 * manager is gone or its queue is full: the caller logs and goes on). */
int rt_notify(const char *state);

/* As rt_notify(), to the socket @path (same syntax as $NOTIFY_SOCKET). */
int rt_notify_to(const char *path, const char *state);

/* rt_notify() of printf(@fmt, ...), cut at 1 KiB. */
int rt_notifyf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* "RELOADING=1" with "MONOTONIC_USEC=<now>", which systemd >= 253 wants
 * with it (Type=notify-reload); send rt_notify("READY=1") once reloaded. */
int rt_notify_reloading(void);

#endif
