/* arena.h - bump allocation in blocks, all freed at once; optionally capped, so that a
 * parser or interpreter fed hostile input fails cleanly instead of exhausting memory. */
#ifndef PL_BASE_ARENA_H
#define PL_BASE_ARENA_H

#include <stddef.h>

typedef struct pl_arena_block pl_arena_block;

typedef struct {
    pl_arena_block *blocks;
    size_t total; /* bytes handed out so far */
    size_t max;   /* 0 = no cap; past it pl_arena_alloc returns NULL */
} pl_arena;

/* n bytes aligned to 16 (NULL when out of memory or past the cap). n == 0 is fine. */
void *pl_arena_alloc(pl_arena *a, size_t n);
/* A copy of s[0..n) plus a NUL. */
char *pl_arena_strdup(pl_arena *a, const char *s, size_t n);
void pl_arena_free(pl_arena *a);

#endif
