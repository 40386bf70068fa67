/* file_write.h - write a file so that readers never see it half-written.
 *
 * Every file pooled writes (quantize, synth, caches) goes through here: the data goes to a
 * temporary file created in the target's folder (".NAME.XXXXXX"), which is renamed over the
 * target only when every write, the flush, fsync and close succeeded. A process that has
 * the old file mapped keeps reading the old bytes; a failure part-way leaves the old file
 * as it was. The only path ever removed is the temporary file this module created.
 *
 * An existing target is resolved through symbolic links (the link stays, its file is
 * replaced) and must be a regular file: devices (/dev/full, /dev/null), FIFOs and folders
 * are refused before anything is written. The new file keeps an existing target's mode. */
#ifndef PL_BASE_FILE_WRITE_H
#define PL_BASE_FILE_WRITE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "status.h"

typedef struct {
    FILE *f;    /* write the content here */
    char *path; /* the target, symbolic links resolved */
    char *tmp;  /* the temporary file; NULL once renamed or removed */
} pl_file_out;

/* Check the target and create the temporary file. On failure nothing was created and
 * o->f is NULL. */
pl_status pl_file_out_open(pl_file_out *o, const char *path);

/* Flush, fsync and close the temporary file and rename it over the target. On any failure
 * the temporary file is removed and the target is untouched. */
pl_status pl_file_out_commit(pl_file_out *o);

/* Give up: close and remove the temporary file (the target is untouched). Safe to call on
 * a zeroed, failed-to-open or committed pl_file_out. */
void pl_file_out_abort(pl_file_out *o);

/* A write to o->f failed just now: the one-line reason, with errno's words. */
pl_status pl_file_out_failed(const pl_file_out *o);

/* Write `len` bytes to `path` as above (a whole small file in one call). */
pl_status pl_file_write_all(const char *path, const void *data, size_t len);

/* Remove the temporary file of the write in progress, if any: for a handler of SIGINT or
 * SIGTERM (async-signal-safe), so that an interrupted `synth` of many GB leaves nothing
 * behind. Tracks the most recent pl_file_out_open only (pooled writes one file at a time). */
void pl_file_out_remove_pending(void);

/* Append `len` bytes to the file at `path` (created if missing) the same way: its old
 * content, at most `limit` bytes, and the new bytes go to a temporary file renamed over it.
 * For small logs and caches: a reader sees the old or the new file, never a cut line. */
pl_status pl_file_append(const char *path, const void *data, size_t len, size_t limit);

/* True when a and b name the same existing file (device and inode, through symbolic links
 * and hard links). */
bool pl_file_same(const char *a, const char *b);

#endif
