/* arena.c - the block allocator of arena.h. */
#include "arena.h"

#include <stdlib.h>
#include <string.h>

struct pl_arena_block {
    pl_arena_block *next;
    size_t used, cap;
    _Alignas(16) unsigned char data[];
};

#define BLOCK_BYTES 16384

void *pl_arena_alloc(pl_arena *a, size_t n) {
    if (n > ((size_t)-1) / 2) return NULL;
    n = (n + 15) & ~(size_t)15;
    if (a->max && (n > a->max || a->total > a->max - n)) return NULL;
    pl_arena_block *b = a->blocks;
    if (!b || b->cap - b->used < n) {
        size_t cap = n > BLOCK_BYTES ? n : BLOCK_BYTES;
        b = malloc(sizeof *b + cap);
        if (!b) return NULL;
        b->next = a->blocks, b->used = 0, b->cap = cap;
        a->blocks = b;
    }
    void *p = b->data + b->used;
    b->used += n;
    a->total += n;
    return p;
}

char *pl_arena_strdup(pl_arena *a, const char *s, size_t n) {
    char *p = pl_arena_alloc(a, n + 1);
    if (!p) return NULL;
    if (n) memcpy(p, s, n);
    p[n] = 0;
    return p;
}

void pl_arena_free(pl_arena *a) {
    for (pl_arena_block *b = a->blocks; b;) {
        pl_arena_block *n = b->next;
        free(b);
        b = n;
    }
    a->blocks = NULL;
    a->total = 0;
}
