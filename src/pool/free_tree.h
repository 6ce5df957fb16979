/*
 * free_tree.h: free chunks ordered by (size, address) in a treap, so that the first chunk at
 * least as large as a request is the best fit, lowest address first among equals (TensorFlow's
 * BFC orders its bins the same way). Insert, remove and search are O(log n) expected.
 */
#ifndef VRAM_POOL_FREE_TREE_H
#define VRAM_POOL_FREE_TREE_H

#include "pool/chunk.h"

typedef struct free_tree {
    pool_chunk *root;
    size_t      count;   /* chunks in the tree */
    size_t      bytes;   /* their total size */
} free_tree;

void        free_tree_insert(free_tree *t, pool_chunk *c);
void        free_tree_remove(free_tree *t, pool_chunk *c);
pool_chunk *free_tree_best_fit(const free_tree *t, size_t size);  /* NULL when none is large enough */
pool_chunk *free_tree_largest(const free_tree *t);
/* Verifies order, heap property, count and bytes; 0 when sound, else writes why into msg. */
int         free_tree_check(const free_tree *t, char *msg, size_t len);

#endif /* VRAM_POOL_FREE_TREE_H */
