/* file_map_test.c - files written by file_write.h and read back by pl_file_map_open, on
 * every platform the library builds for (make wasm-test runs it as wasm32-wasi too, where
 * the temporary name is made by the library itself and the map is a copy read into memory):
 * a new file, the same file replaced and appended to, an empty file, a missing one; the
 * bytes come back exactly and no temporary file is left in the folder. */
#include <dirent.h>

#include "base/file_map.h"
#include "base/file_write.h"
#include "test.h"

/* Entries of the test folder other than . and .. */
static int entries(void) {
    DIR *d = opendir(test_tmpdir());
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d));)
        n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
    if (d) closedir(d);
    return n;
}

/* Whether path maps to exactly the n bytes at want (and as a copy only without mmap). */
static bool maps_to(const char *path, const unsigned char *want, size_t n) {
    pl_file_map m;
    if (pl_file_map_open(&m, path) != PL_OK) return false;
#ifdef __wasi__
    bool how = n == 0 || m.copied;
#else
    bool how = !m.copied;
#endif
    bool ok = how && m.size == n && (n == 0 ? m.data == NULL : !memcmp(m.data, want, n));
    pl_file_map_close(&m);
    return ok && !m.data && !m.size;
}

static void run_tests(void) {
    enum { N = 300000 }; /* several reads' worth */
    unsigned char *a = malloc(2 * N);
    for (int i = 0; i < 2 * N; i++) a[i] = (unsigned char)(i * 7 + i / 251);
    char path[512];
    snprintf(path, sizeof path, "%s/data.bin", test_tmpdir());
    CHECK(pl_file_write_all(path, a, N) == PL_OK, "%s", pl_last_error());
    CHECK(maps_to(path, a, N), "a new file reads back");
    CHECK(pl_file_write_all(path, a + 1, N - 1) == PL_OK, "%s", pl_last_error());
    CHECK(maps_to(path, a + 1, N - 1), "a replaced file reads back");
    CHECK(pl_file_write_all(path, a, N / 2) == PL_OK &&
              pl_file_append(path, a + N / 2, N + N / 2, 4 * (size_t)N) == PL_OK,
          "%s", pl_last_error());
    CHECK(maps_to(path, a, 2 * N), "an appended file reads back");
    snprintf(path, sizeof path, "%s/empty.bin", test_tmpdir());
    CHECK(pl_file_write_all(path, "", 0) == PL_OK, "%s", pl_last_error());
    CHECK(maps_to(path, NULL, 0), "an empty file maps to nothing");
    CHECK(entries() == 2, "%d entries in the folder: temporary files left behind", entries());
    pl_file_map m;
    snprintf(path, sizeof path, "%s/missing.bin", test_tmpdir());
    CHECK(pl_file_map_open(&m, path) == PL_ERR_IO && !m.data, "a missing file is refused");
    free(a);
}
