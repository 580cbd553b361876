/* Test helpers: a fresh temporary directory per test, removed with
 * everything in it afterwards.
 * Thread: tests only; no shared state. */
#ifndef TH_DIR_H
#define TH_DIR_H

#include <stddef.h>

/* Creates a new directory "/tmp/@prefix.XXXXXX" (mkdtemp) and writes its
 * path to @out (@n bytes; 64 fit any short prefix). Returns 0, or -errno
 * (-ENAMETOOLONG when the path does not fit). */
int th_dir_create(const char *prefix, char *out, size_t n);

/* Removes @path and everything under it, depth first, without following
 * symbolic links. Returns 0 or -errno of the first failure (it goes on
 * removing what it can). */
int th_dir_remove(const char *path);

#endif
