/* file_map.h - read-only memory mapping of a whole file, and bounded reads of small files.
 *
 * Model files are mapped, not copied here: tensor data is used straight from the page cache
 * (the CPU backend may copy weights into memory of its own: pl_cpu_opts.anon_weights).
 * Only where mapping is impossible (wasm32, or mmap failing on the file) is the file read
 * into memory instead (copied set), which pl_file_map_close frees.
 * Both refuse what is not a regular file (a FIFO, a device, a directory) before anything
 * could block on it: the file is opened with O_NONBLOCK and checked with fstat. */
#ifndef PL_BASE_FILE_MAP_H
#define PL_BASE_FILE_MAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "status.h"

typedef struct {
    const unsigned char *data; /* NULL for an empty file */
    size_t size;
    bool copied; /* data is a malloc'd copy, not a mapping */
} pl_file_map;

pl_status pl_file_map_open(pl_file_map *m, const char *path);
void pl_file_map_close(pl_file_map *m);

/* Read a whole regular file of at most `limit` bytes into a malloc'd, NUL-terminated
 * buffer; *len (may be NULL) gets its length. A larger file is refused with a line naming
 * the limit. With PL_READ_TEXT a NUL byte in the file is refused too (text would be cut
 * there silently). With PL_READ_STDIN the path "-" reads standard input instead (a pipe,
 * under the same limit: what a user gives as "-" is meant to be streamed). */
enum { PL_READ_TEXT = 1, PL_READ_STDIN = 2 };
pl_status pl_file_read(const char *path, size_t limit, int flags, char **out, size_t *len);

/* pl_file_read with no size limit and no text check (tests, trusted fixtures). */
pl_status pl_file_read_all(const char *path, char **out, size_t *len);

/* MemAvailable of /proc/meminfo in bytes (free memory plus the page cache the kernel can
 * give back), 0 where it cannot be read (not Linux, wasm32). */
uint64_t pl_mem_available(void);

/* "a directory", "a FIFO", ...: what a file that is not regular is, for error lines. */
const char *pl_file_kind(mode_t mode);

/* "64 MiB", "1 KiB", "300 bytes": a limit as error messages state it. */
const char *pl_size_name(size_t n, char *buf, size_t cap);

#endif
