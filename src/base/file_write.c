/* file_write.c - the temporary-file-and-rename writer (see file_write.h). */
#include "file_write.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "file_map.h"

/* The operating system's part, one block per platform. wasm32-wasi (the browser build) has
 * no signals (no handler can interrupt a write there), no owners or permission bits, no
 * absolute paths (realpath) and no mkstemp: its temporary name is made here, its target
 * is the path as given (a symbolic link there is replaced, not followed). */
#ifdef __wasi__
#include <time.h>
typedef int pl_sig_flag;

static char *real_path(const char *path) {
    return strdup(path);
}

/* mkstemp: the trailing XXXXXX replaced until an exclusive create succeeds */
static int make_temp(char *tmpl) {
    static unsigned long seq;
    char *x = tmpl + strlen(tmpl) - 6;
    for (int tries = 0; tries < 100; tries++) {
        unsigned long v = (unsigned long)time(NULL) * 2654435761u + ++seq * 40503u;
        for (int i = 0; i < 6; i++, v /= 36) x[i] = "0123456789abcdefghijklmnopqrstuvwxyz"[v % 36];
        int fd = open(tmpl, O_RDWR | O_CREAT | O_EXCL, 0600);
        if (fd >= 0 || errno != EEXIST) return fd;
    }
    return -1;
}

static void copy_mode(int fd, bool exists, const struct stat *st) {
    (void)fd, (void)exists, (void)st;
}
#else
#include <signal.h>
typedef sig_atomic_t pl_sig_flag;

static char *real_path(const char *path) {
    return realpath(path, NULL);
}

static int make_temp(char *tmpl) {
    return mkstemp(tmpl);
}

/* mkstemp makes it 0600: give it the old file's mode, or what a new file would get */
static void copy_mode(int fd, bool exists, const struct stat *st) {
    mode_t mode;
    if (exists) {
        mode = st->st_mode & 07777;
        /* best effort (only root may give a file away): the file keeps its owner */
        if (fchown(fd, st->st_uid, st->st_gid) != 0) errno = 0;
    } else {
        mode_t mask = umask(0);
        umask(mask);
        mode = 0666 & ~mask;
    }
    fchmod(fd, mode);
}
#endif

/* The temporary file being written, for pl_file_out_remove_pending (a signal handler may
 * read it at any time: the flag is cleared while the name changes). */
static char pending[PATH_MAX + 32];
static volatile pl_sig_flag have_pending;

static void set_pending(const char *tmp) {
    have_pending = 0;
    if (!tmp || strlen(tmp) >= sizeof pending) return;
    memcpy(pending, tmp, strlen(tmp) + 1);
    have_pending = 1;
}

void pl_file_out_remove_pending(void) {
    if (have_pending) unlink(pending);
    have_pending = 0;
}

bool pl_file_same(const char *a, const char *b) {
    struct stat sa, sb;
    return !stat(a, &sa) && !stat(b, &sb) && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

/* The file a write to `path` should replace: `path` itself, or what its symbolic links lead
 * to. *exists says whether it exists (then *st describes it). NULL on failure. */
static char *resolve_target(const char *path, bool *exists, struct stat *st) {
    struct stat lst;
    *exists = false;
    if (lstat(path, &lst) != 0) {
        if (errno != ENOENT) {
            pl_fail(PL_ERR_IO, "%s: %s", path, strerror(errno));
            return NULL;
        }
        char *p = strdup(path);
        if (!p) pl_fail(PL_ERR_NOMEM, "out of memory");
        return p;
    }
    if (S_ISLNK(lst.st_mode) && stat(path, st) != 0) {
        pl_fail(PL_ERR_IO, "%s: a symbolic link to a missing file (%s)", path, strerror(errno));
        return NULL;
    }
    if (!S_ISLNK(lst.st_mode)) *st = lst;
    if (!S_ISREG(st->st_mode)) {
        pl_fail(PL_ERR_IO, "%s is not a regular file (%s): it will not be replaced", path,
                pl_file_kind(st->st_mode));
        return NULL;
    }
    /* a file its owner made read-only stays as it is, as an open for writing would */
    if (access(path, W_OK) != 0) {
        pl_fail(PL_ERR_IO, "%s: %s", path, strerror(errno));
        return NULL;
    }
    *exists = true;
    char *p = real_path(path);
    if (!p) pl_fail(PL_ERR_IO, "%s: %s", path, strerror(errno));
    return p;
}

pl_status pl_file_out_open(pl_file_out *o, const char *path) {
    *o = (pl_file_out){0};
    bool exists;
    struct stat st;
    char *target = resolve_target(path, &exists, &st);
    if (!target) return PL_ERR_IO;
    /* "DIR/.NAME.XXXXXX" in the target's folder, so that the rename stays on one file
     * system; the name is cut to stay within NAME_MAX */
    const char *slash = strrchr(target, '/');
    int dir_len = slash ? (int)(slash - target) + 1 : 0;
    const char *base = slash ? slash + 1 : target;
    size_t n = strlen(target) + 16;
    char *tmp = malloc(n);
    if (!tmp) {
        free(target);
        return pl_fail(PL_ERR_NOMEM, "out of memory");
    }
    snprintf(tmp, n, "%.*s.%.200s.XXXXXX", dir_len, target, base);
    int fd = make_temp(tmp);
    if (fd < 0) {
        int e = errno;
        /* the folder as the user would name it: "." for none, "/" for the root */
        pl_status s = pl_fail(PL_ERR_IO, "cannot create temporary file in %.*s: %s",
                              dir_len > 1 ? dir_len - 1 : 1, dir_len ? target : ".", strerror(e));
        free(tmp);
        free(target);
        return s;
    }
    copy_mode(fd, exists, &st);
    o->f = fdopen(fd, "wb");
    if (!o->f) {
        int e = errno;
        close(fd);
        unlink(tmp);
        free(tmp);
        free(target);
        return pl_fail(PL_ERR_NOMEM, "%s: %s", path, strerror(e));
    }
    o->path = target;
    o->tmp = tmp;
    set_pending(tmp);
    return PL_OK;
}

pl_status pl_file_out_failed(const pl_file_out *o) {
    return pl_fail(PL_ERR_IO, "%s: write failed: %s", o->path ? o->path : "(file)",
                   strerror(errno ? errno : EIO));
}

void pl_file_out_abort(pl_file_out *o) {
    if (o->f) fclose(o->f);
    if (o->tmp && have_pending && !strcmp(pending, o->tmp)) set_pending(NULL);
    if (o->tmp) unlink(o->tmp);
    free(o->tmp);
    free(o->path);
    *o = (pl_file_out){0};
}

pl_status pl_file_out_commit(pl_file_out *o) {
    if (!o->f) return pl_fail(PL_ERR_ARG, "file_write: nothing open to commit");
    pl_status s = PL_OK;
    errno = 0;
    int bad = fflush(o->f) != 0;
    int e = errno;
    if (bad)
        s = (errno = e, pl_file_out_failed(o));
    else if (ferror(o->f)) /* an earlier write failed; its errno is gone */
        s = pl_fail(PL_ERR_IO, "%s: write failed", o->path);
    if (!s && fsync(fileno(o->f)) != 0) s = pl_file_out_failed(o);
    FILE *f = o->f;
    o->f = NULL;
    if (fclose(f) != 0 && !s) s = pl_file_out_failed(o);
    if (!s && rename(o->tmp, o->path) != 0)
        s = pl_fail(PL_ERR_IO, "cannot rename %s to %s: %s", o->tmp, o->path, strerror(errno));
    if (!s) {
        if (have_pending && !strcmp(pending, o->tmp)) set_pending(NULL);
        free(o->tmp); /* renamed: nothing left to remove */
        o->tmp = NULL;
    }
    pl_file_out_abort(o);
    return s;
}

pl_status pl_file_write_all(const char *path, const void *data, size_t len) {
    pl_file_out o;
    pl_status s = pl_file_out_open(&o, path);
    if (s) return s;
    if (len && fwrite(data, 1, len, o.f) != len) {
        s = pl_file_out_failed(&o);
        pl_file_out_abort(&o);
        return s;
    }
    return pl_file_out_commit(&o);
}

pl_status pl_file_append(const char *path, const void *data, size_t len, size_t limit) {
    char *old = NULL;
    size_t n = 0;
    struct stat st;
    if (stat(path, &st) == 0 || errno != ENOENT) {
        pl_status s = pl_file_read(path, limit, 0, &old, &n);
        if (s) return s;
    }
    pl_file_out o;
    pl_status s = pl_file_out_open(&o, path);
    if (!s && ((n && fwrite(old, 1, n, o.f) != n) || (len && fwrite(data, 1, len, o.f) != len)))
        s = pl_file_out_failed(&o);
    free(old);
    if (!s) return pl_file_out_commit(&o);
    pl_file_out_abort(&o);
    return s;
}
