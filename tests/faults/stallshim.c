/* stallshim: an LD_PRELOAD library for the fault harness's stall-primary
 * scenario (docs/DESIGN-replication.md §6.4, F11). fdatasync() and
 * fsync() of a process block while the file $RT_STALL_DIR/<its pid>
 * exists, as on a disk that stopped answering; everything else is
 * untouched. Without RT_STALL_DIR it only forwards the calls. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static void stall_while_flagged(void)
{
    const char *dir = getenv("RT_STALL_DIR");
    char path[4096];
    if (dir == NULL || *dir == '\0') {
        return;
    }
    snprintf(path, sizeof(path), "%s/%ld", dir, (long)getpid());
    while (access(path, F_OK) == 0) {
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
}

int fdatasync(int fd)
{
    static int (*real)(int);
    if (real == NULL) {
        real = (int (*)(int))dlsym(RTLD_NEXT, "fdatasync");
    }
    stall_while_flagged();
    return real(fd);
}

int fsync(int fd)
{
    static int (*real)(int);
    if (real == NULL) {
        real = (int (*)(int))dlsym(RTLD_NEXT, "fsync");
    }
    stall_while_flagged();
    return real(fd);
}
