/* nftw(3) needs _XOPEN_SOURCE for FTW_DEPTH / FTW_PHYS. */
#define _XOPEN_SOURCE 700
#include "th_dir.h"

#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>

static int th__rm_err;

static int th__rm_cb(const char *path,
                     const struct stat *sb,
                     int flag,
                     struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    if (remove(path) != 0 && th__rm_err == 0) {
        th__rm_err = -errno;
    }
    return 0;
}

int th_dir_create(const char *prefix, char *out, size_t n)
{
    int len = snprintf(out, n, "/tmp/%s.XXXXXX", prefix);

    if (len < 0 || (size_t)len >= n) {
        return -ENAMETOOLONG;
    }
    return mkdtemp(out) ? 0 : -errno;
}

int th_dir_remove(const char *path)
{
    th__rm_err = 0;
    if (nftw(path, th__rm_cb, 8, FTW_DEPTH | FTW_PHYS) != 0) {
        return -errno;
    }
    return th__rm_err;
}
