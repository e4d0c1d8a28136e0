#include "base/tmpfile.h"

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#define TMP_SLOTS 16
#define TMP_PATH 4096

// The table a signal handler reads: a slot's path is written before its state
// says it is in use, and cleared only after.
static struct {
    volatile sig_atomic_t state; // 0 free, 1 claiming, 2 a file, 3 a directory
    char path[TMP_PATH];
} g_tmp[TMP_SLOTS];

int tmp_name(char *buf, size_t cap, const char *path) {
    int n = snprintf(buf, cap, "%s.tmp.%ld", path, (long)getpid());
    return n < 0 || (size_t)n >= cap ? -1 : 0;
}

int tmp_track(const char *path, int dir) {
    if (strlen(path) >= TMP_PATH) return -1;
    for (int i = 0; i < TMP_SLOTS; i++) {
        if (!__sync_bool_compare_and_swap(&g_tmp[i].state, 0, 1)) continue;
        memcpy(g_tmp[i].path, path, strlen(path) + 1);
        __sync_synchronize();
        g_tmp[i].state = dir ? 3 : 2;
        return i;
    }
    return -1;
}

void tmp_untrack(int h) {
    if (h < 0 || h >= TMP_SLOTS) return;
    __sync_synchronize();
    g_tmp[h].state = 0;
}

// (raw system calls only: this runs inside signal handlers)
static int remove_dir(const char *dir) {
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return -1;
    char buf[4096];
    for (;;) {
        long n = syscall(SYS_getdents64, fd, buf, sizeof buf);
        if (n <= 0) break;
        int removed = 0;
        for (long off = 0; off < n;) {
            // struct linux_dirent64: u64 ino, s64 off, u16 reclen, u8 type, char name[]
            unsigned short reclen;
            memcpy(&reclen, buf + off + 16, sizeof reclen);
            const char *name = buf + off + 19;
            if (strcmp(name, ".") && strcmp(name, "..") && unlinkat(fd, name, 0) == 0) removed++;
            off += reclen;
        }
        if (!removed) break;
        lseek(fd, 0, SEEK_SET);
    }
    close(fd);
    return rmdir(dir);
}

int tmp_remove_dir(const char *dir) { return remove_dir(dir); }

void tmp_abandon(void) {
    for (int i = 0; i < TMP_SLOTS; i++) {
        sig_atomic_t s = g_tmp[i].state;
        if (s == 2) unlink(g_tmp[i].path);
        else if (s == 3) remove_dir(g_tmp[i].path);
    }
}

int same_file(const char *a, const char *b) {
    struct stat sa, sb;
    return stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}
