// Files we write appear whole or not at all: a writer makes its output under
// a temporary name beside the target (tmp_name), renames it into place on
// success, and tracks the temporary path meanwhile so that a process stopped
// by a signal can remove what it had half-written (tmp_abandon, safe inside a
// signal handler). A staging directory (a vindex being extracted) is tracked
// the same way: abandoning it removes the files in it, then it.
#ifndef INFER_BASE_TMPFILE_H
#define INFER_BASE_TMPFILE_H

#include <stddef.h>
#include <sys/types.h>

// "<path>.tmp.<pid>" into buf; 0, or -1 when it does not fit.
int tmp_name(char *buf, size_t cap, const char *path);
// Tracks a temporary file (dir 0) or staging directory (dir 1): a handle for
// tmp_untrack, or -1 when the table is full (the write goes on untracked).
int tmp_track(const char *path, int dir);
void tmp_untrack(int handle);
// Removes every tracked path (async-signal-safe).
void tmp_abandon(void);
// Removes the files of a directory and then the directory (not recursive:
// staging directories hold files only); 0 when it is gone.
int tmp_remove_dir(const char *dir);
// a and b name the same file (both exist, same device and inode)
int same_file(const char *a, const char *b);

#endif
