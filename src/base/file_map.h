/* file_map.h - read-only memory mapping of a whole file.
 *
 * Model files are mapped, never copied: tensor data is used straight from the page cache. */
#ifndef PL_BASE_FILE_MAP_H
#define PL_BASE_FILE_MAP_H

#include <stddef.h>

#include "status.h"

typedef struct {
    const unsigned char *data; /* NULL for an empty file */
    size_t size;
} pl_file_map;

pl_status pl_file_map_open(pl_file_map *m, const char *path);
void pl_file_map_close(pl_file_map *m);

/* Read a whole (small) file into a malloc'd, NUL-terminated buffer. */
pl_status pl_file_read_all(const char *path, char **out, size_t *len);

#endif
