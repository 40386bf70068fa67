/* file_map.c - mmap a file read-only (POSIX), plus a bounded read-everything helper.
 * Where mmap is missing (wasm32-wasi: PL_NO_MMAP) or fails on a file (a file system that
 * cannot map), the file is read into memory instead: the same bytes, only copied. */
#include "file_map.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* wasm32-wasi has no mmap and no dup (standard input cannot be read as a file there) */
#ifdef __wasi__
#define PL_NO_MMAP 1
static int dup_stdin(void) {
    errno = ENOTSUP;
    return -1;
}
#else
#include <sys/mman.h>
static int dup_stdin(void) {
    return dup(0);
}
#endif

const char *pl_file_kind(mode_t m) {
    return S_ISDIR(m)    ? "a directory"
           : S_ISFIFO(m) ? "a FIFO"
           : S_ISCHR(m)  ? "a character device"
           : S_ISBLK(m)  ? "a block device"
           : S_ISSOCK(m) ? "a socket"
                         : "a special file";
}

/* Open `path` for reading if it is a regular file. O_NONBLOCK: opening a FIFO with no
 * writer would otherwise wait forever, before fstat could tell what it is. */
static pl_status open_regular(const char *path, int *fd_out, struct stat *st) {
    *fd_out = -1;
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd < 0) return pl_fail(PL_ERR_IO, "%s: %s", path, strerror(errno));
    if (fstat(fd, st) != 0) {
        int e = errno;
        close(fd);
        return pl_fail(PL_ERR_IO, "%s: %s", path, strerror(e));
    }
    if (!S_ISREG(st->st_mode)) {
        close(fd);
        return pl_fail(PL_ERR_IO, "%s: not a regular file (%s)", path, pl_file_kind(st->st_mode));
    }
    *fd_out = fd;
    return PL_OK;
}

/* The file's size bytes read into a malloc'd copy (the mapping's stand-in). */
static pl_status read_copy(pl_file_map *m, int fd, size_t size, const char *path) {
    unsigned char *buf = malloc(size);
    if (!buf) return pl_fail(PL_ERR_NOMEM, "%s: out of memory for a copy of the file", path);
    size_t n = 0;
    while (n < size) {
        ssize_t r = pread(fd, buf + n, size - n, (off_t)n);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            int e = r < 0 ? errno : 0;
            free(buf);
            return e ? pl_fail(PL_ERR_IO, "%s: %s", path, strerror(e))
                     : pl_fail(PL_ERR_IO, "%s: the file shrank while it was read", path);
        }
        n += (size_t)r;
    }
    m->data = buf;
    m->size = size;
    m->copied = true;
    return PL_OK;
}

pl_status pl_file_map_open(pl_file_map *m, const char *path) {
    *m = (pl_file_map){0};
    int fd;
    struct stat st;
    pl_status s = open_regular(path, &fd, &st);
    if (s) return s;
    if (st.st_size > 0) {
        if ((uint64_t)st.st_size > SIZE_MAX) {
            close(fd);
            return pl_fail(PL_ERR_NOMEM, "%s: too large for this machine's address space", path);
        }
#ifndef PL_NO_MMAP
        void *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (p != MAP_FAILED) {
            m->data = p;
            m->size = (size_t)st.st_size;
        }
#endif
        if (!m->data) s = read_copy(m, fd, (size_t)st.st_size, path);
    }
    close(fd); /* the mapping keeps the file alive */
    return s;
}

void pl_file_map_close(pl_file_map *m) {
    if (m->copied) free((void *)m->data);
#ifndef PL_NO_MMAP
    else if (m->data)
        munmap((void *)m->data, m->size);
#endif
    *m = (pl_file_map){0};
}

uint64_t pl_mem_available(void) {
    FILE *f = fopen("/proc/meminfo", "r");
    char line[256];
    unsigned long long kb = 0;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1) break;
    if (f) fclose(f);
    return (uint64_t)kb * 1024;
}

const char *pl_size_name(size_t n, char *buf, size_t cap) {
    if (n >= (1u << 20) && n % (1u << 20) == 0)
        snprintf(buf, cap, "%zu MiB", n >> 20);
    else if (n >= 1024 && n % 1024 == 0)
        snprintf(buf, cap, "%zu KiB", n >> 10);
    else
        snprintf(buf, cap, "%zu bytes", n);
    return buf;
}

static pl_status too_big(const char *path, size_t limit) {
    char lim[32];
    return pl_fail(PL_ERR_ARG, "%s: larger than the limit of %s", path,
                   pl_size_name(limit, lim, sizeof lim));
}

pl_status pl_file_read(const char *path, size_t limit, int flags, char **out, size_t *len) {
    *out = NULL;
    if (len) *len = 0;
    if (limit > SIZE_MAX / 2) limit = SIZE_MAX / 2;
    int fd;
    struct stat st;
    if ((flags & PL_READ_STDIN) && !strcmp(path, "-")) {
        path = "standard input";
        fd = dup_stdin();
        if (fd < 0) return pl_fail(PL_ERR_IO, "standard input: %s", strerror(errno));
        memset(&st, 0, sizeof st);
    } else {
        pl_status s = open_regular(path, &fd, &st);
        if (s) return s;
    }
    if ((uint64_t)st.st_size > limit) {
        close(fd);
        return too_big(path, limit);
    }
    /* st_size is a hint (files in /proc say 0, a file may grow): read to the end, but never
     * past the limit */
    size_t cap = (size_t)st.st_size + 1 > 4096 ? (size_t)st.st_size + 1 : 4096, n = 0;
    char *buf = malloc(cap);
    for (;;) {
        if (!buf) {
            close(fd);
            return pl_fail(PL_ERR_NOMEM, "out of memory reading %s", path);
        }
        if (n + 1 >= cap) {
            size_t nc = cap > limit / 2 ? limit + 2 : cap * 2;
            char *nb = nc > cap ? realloc(buf, nc) : NULL;
            if (!nb) free(buf);
            buf = nb;
            cap = nc;
            continue;
        }
        ssize_t r = read(fd, buf + n, cap - n - 1);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) {
            int e = errno;
            free(buf);
            close(fd);
            return pl_fail(PL_ERR_IO, "%s: %s", path, strerror(e));
        }
        if (r == 0) break;
        n += (size_t)r;
        if (n > limit) {
            free(buf);
            close(fd);
            return too_big(path, limit);
        }
    }
    close(fd);
    buf[n] = 0;
    const char *nul = (flags & PL_READ_TEXT) ? memchr(buf, 0, n) : NULL;
    if (nul) {
        size_t at = (size_t)(nul - buf);
        free(buf);
        return pl_fail(PL_ERR_FORMAT, "%s: a NUL byte at offset %zu: not a text file", path, at);
    }
    *out = buf;
    if (len) *len = n;
    return PL_OK;
}

pl_status pl_file_read_all(const char *path, char **out, size_t *len) {
    return pl_file_read(path, SIZE_MAX, 0, out, len);
}
