/* file_io_test.c - bounded reads (file_map.h) and the temporary-file writer (file_write.h):
 * what is not a regular file is refused without blocking, limits and NUL bytes are
 * refused with one line, a commit replaces the target by rename (its mode kept, through
 * symbolic links), and a failed or abandoned write leaves the target and the folder as
 * they were. */
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <sys/stat.h>

#include "base/file_map.h"
#include "base/file_write.h"
#include "test.h"

static const char *path_in(const char *name) {
    static char buf[16][512]; /* distinct names per test: no slot is reused */
    static int slot;
    char *b = buf[slot++ & 15];
    snprintf(b, sizeof buf[0], "%s/%s", test_tmpdir(), name);
    return b;
}

static void put(const char *path, const char *s, size_t n) {
    FILE *f = fopen(path, "wb");
    if (f) fwrite(s, 1, n, f), fclose(f);
}

/* Files in the test folder whose name starts with '.' (temporary files left behind). */
static int hidden_files(void) {
    DIR *d = opendir(test_tmpdir());
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d));)
        if (e->d_name[0] == '.' && strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) n++;
    if (d) closedir(d);
    return n;
}

static bool has_text(const char *path, const char *want) {
    char *s = NULL;
    size_t n = 0;
    bool ok = pl_file_read_all(path, &s, &n) == PL_OK && n == strlen(want) && !memcmp(s, want, n);
    free(s);
    return ok;
}

static void test_read(void) {
    char *s = NULL;
    size_t n = 0;
    const char *fifo = path_in("fifo");
    CHECK(mkfifo(fifo, 0600) == 0, "%s", strerror(errno));
    alarm(20); /* a blocking open would hang here */
    CHECK(pl_file_read(fifo, 100, 0, &s, &n) == PL_ERR_IO && !s, "FIFO read");
    CHECK(strstr(pl_last_error(), "not a regular file (a FIFO)"), "%s", pl_last_error());
    pl_file_map m;
    CHECK(pl_file_map_open(&m, fifo) == PL_ERR_IO, "FIFO mapped");
    alarm(0);
    CHECK(pl_file_read("/dev/zero", 100, 0, &s, &n) == PL_ERR_IO, "device read");
    CHECK(strstr(pl_last_error(), "a character device"), "%s", pl_last_error());
    CHECK(pl_file_read(test_tmpdir(), 100, 0, &s, &n) == PL_ERR_IO, "folder read");
    CHECK(strstr(pl_last_error(), "a directory"), "%s", pl_last_error());

    const char *f = path_in("text");
    put(f, "0123456789", 10);
    CHECK(pl_file_read(f, 10, PL_READ_TEXT, &s, &n) == PL_OK && n == 10 && s[10] == 0, "at limit");
    free(s);
    s = NULL;
    CHECK(pl_file_read(f, 9, 0, &s, &n) == PL_ERR_ARG && !s, "over the limit");
    CHECK(strstr(pl_last_error(), "larger than the limit of 9 bytes"), "%s", pl_last_error());
    put(f, "ab\0cd", 5);
    CHECK(pl_file_read(f, 100, PL_READ_TEXT, &s, &n) == PL_ERR_FORMAT && !s, "NUL in text");
    CHECK(strstr(pl_last_error(), "NUL byte at offset 2"), "%s", pl_last_error());
    CHECK(pl_file_read(f, 100, 0, &s, &n) == PL_OK && n == 5 && s[3] == 'c', "binary read");
    free(s);
    /* a regular file whose size says 0 (procfs) is read to its end, limit included */
    CHECK(pl_file_read("/proc/self/status", 1 << 20, PL_READ_TEXT, &s, &n) == PL_OK && n > 0, "%s",
          pl_last_error());
    free(s);
    s = NULL;
    CHECK(pl_file_read("/proc/self/status", 16, 0, &s, &n) == PL_ERR_ARG && !s, "procfs limit");
    char b[32];
    CHECK(!strcmp(pl_size_name((size_t)64 << 20, b, sizeof b), "64 MiB"), "%s", b);
    CHECK(!strcmp(pl_size_name(1025, b, sizeof b), "1025 bytes"), "%s", b);
}

static void test_write(void) {
    const char *t = path_in("target"), *link = path_in("link");
    put(t, "old", 3);
    chmod(t, 0640);
    struct stat a, b;
    stat(t, &a);
    pl_file_out o;
    /* abandoned part-way: the target keeps its bytes, nothing is left behind */
    CHECK(pl_file_out_open(&o, t) == PL_OK && o.f, "%s", pl_last_error());
    fputs("half of a new file", o.f);
    pl_file_out_abort(&o);
    CHECK(has_text(t, "old"), "target changed by an abandoned write");
    CHECK(hidden_files() == 0, "temporary file left");
    /* committed: a new file (another inode) with the old mode */
    CHECK(pl_file_write_all(t, "new", 3) == PL_OK, "%s", pl_last_error());
    stat(t, &b);
    CHECK(has_text(t, "new") && a.st_ino != b.st_ino && (b.st_mode & 0777) == 0640,
          "ino %lu -> %lu, mode %o", (unsigned long)a.st_ino, (unsigned long)b.st_ino,
          (unsigned)(b.st_mode & 0777));
    CHECK(hidden_files() == 0, "temporary file left");
    /* through a symbolic link: the link stays, its file is replaced */
    CHECK(symlink("target", link) == 0, "%s", strerror(errno));
    CHECK(pl_file_write_all(link, "linked", 6) == PL_OK, "%s", pl_last_error());
    struct stat l;
    CHECK(lstat(link, &l) == 0 && S_ISLNK(l.st_mode) && has_text(t, "linked"), "link replaced");
    CHECK(pl_file_same(link, t) && !pl_file_same(t, path_in("missing")), "same file");
    /* a write that fails part-way (its descriptor closed under it) is reported by the commit
     * and leaves the target alone */
    CHECK(pl_file_out_open(&o, t) == PL_OK, "%s", pl_last_error());
    static char big[1 << 16];
    memset(big, 'x', sizeof big);
    close(fileno(o.f));
    fwrite(big, 1, sizeof big, o.f);
    CHECK(pl_file_out_commit(&o) != PL_OK, "commit after a failed write");
    CHECK(strstr(pl_last_error(), "write failed"), "%s", pl_last_error());
    CHECK(has_text(t, "linked") && hidden_files() == 0, "after a failed write");
    /* what is not a regular file is never opened for writing, nor removed */
    const char *fifo = path_in("wfifo");
    mkfifo(fifo, 0600);
    alarm(20);
    CHECK(pl_file_out_open(&o, fifo) == PL_ERR_IO && !o.f, "FIFO target");
    alarm(0);
    CHECK(strstr(pl_last_error(), "is not a regular file (a FIFO)"), "%s", pl_last_error());
    CHECK(pl_file_write_all("/dev/null", "x", 1) == PL_ERR_IO, "device target");
    CHECK(pl_file_write_all(test_tmpdir(), "x", 1) == PL_ERR_IO, "folder target");
    struct stat fs;
    CHECK(stat(fifo, &fs) == 0 && S_ISFIFO(fs.st_mode), "FIFO removed");
    CHECK(symlink("nowhere", path_in("dangling")) == 0, "symlink");
    CHECK(pl_file_write_all(path_in("dangling"), "x", 1) == PL_ERR_IO, "dangling link target");
    CHECK(pl_file_write_all(path_in("no/such/dir"), "x", 1) == PL_ERR_IO, "missing folder");
    CHECK(strstr(pl_last_error(), "cannot create temporary file in ") &&
              strstr(pl_last_error(), "/no/such: No such file or directory"),
          "%s", pl_last_error());
    pl_file_out_abort(&o); /* safe on a failed open */
    /* append: old content kept, new added; limits and odd files refused */
    const char *log = path_in("log");
    CHECK(pl_file_append(log, "a\n", 2, 100) == PL_OK &&
              pl_file_append(log, "b\n", 2, 100) == PL_OK,
          "%s", pl_last_error());
    CHECK(has_text(log, "a\nb\n"), "appended");
    CHECK(pl_file_append(log, "c\n", 2, 3) == PL_ERR_ARG && has_text(log, "a\nb\n"),
          "append limit");
    alarm(20);
    pl_status st = pl_file_append(fifo, "c\n", 2, 100);
    CHECK(st == PL_ERR_IO, "append to a FIFO: %d %s", st, pl_last_error());
    alarm(0);
    CHECK(hidden_files() == 0, "temporary file left");
}

static void run_tests(void) {
    test_read();
    test_write();
}
