/* rtctl trace dump FILE (rtctl_trace.c): a load trace as JSON lines.
 * Offline; never contacts a master. */
#ifndef RTCTL_TRACE_H
#define RTCTL_TRACE_H

/* Prints every record of the trace at @path, then an "eof" line. Returns
 * the process exit status (0 read, 1 refused or corrupt). */
int rtctl_trace_dump(const char *path);

#endif
