/* sd_notify(3) without libsystemd; rt_notify.h says why and what. */
#include "rt_notify.h"

#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "rt_err.h"

int rt_notify_to(const char *path, const char *state)
{
    struct sockaddr_un sa;
    socklen_t salen;
    size_t n = path ? strlen(path) : 0;
    ssize_t sent;
    int fd, saved;

    if (n == 0) {
        return 1;
    }
    if ((path[0] != '/' && path[0] != '@') || n >= sizeof(sa.sun_path)) {
        return RT_EINVAL;
    }
    memset(&sa, 0, sizeof(sa));
    sa.sun_family = AF_UNIX;
    memcpy(sa.sun_path, path, n);
    if (path[0] == '@') {
        sa.sun_path[0] = '\0'; /* Linux abstract namespace: no trailing NUL */
        salen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n);
    } else {
        salen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n + 1);
    }
    fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        return RT_EIO;
    }
    /* MSG_NOSIGNAL: a manager that went away must not kill us. */
    sent = sendto(fd, state, strlen(state), MSG_NOSIGNAL,
                  (const struct sockaddr *)&sa, salen);
    saved = errno;
    close(fd);
    errno = saved;
    return sent == (ssize_t)strlen(state) ? 0 : RT_EIO;
}

int rt_notify(const char *state)
{
    return rt_notify_to(getenv("NOTIFY_SOCKET"), state);
}

int rt_notifyf(const char *fmt, ...)
{
    char buf[1024];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    return rt_notify(buf);
}

int rt_notify_reloading(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return rt_notifyf("RELOADING=1\nMONOTONIC_USEC=%llu",
                      (unsigned long long)ts.tv_sec * 1000000ULL +
                          (unsigned long long)ts.tv_nsec / 1000ULL);
}
