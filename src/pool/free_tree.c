/*
 * free_tree.c: a treap of free chunks keyed by (size, address). Priorities come from a hash of the
 * address, so the shape is deterministic for a given history. Recursion depth is the tree height,
 * O(log n) expected.
 */
#include <stdio.h>

#include "pool/free_tree.h"

static int chunk_less(const pool_chunk *a, const pool_chunk *b) {
    return a->size < b->size || (a->size == b->size && a->addr < b->addr);
}

static uint32_t address_priority(uint64_t addr) {
    uint64_t z = addr + 0x9e3779b97f4a7c15ull;   /* splitmix64 finaliser */
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return (uint32_t)(z ^ (z >> 31));
}

static pool_chunk *rotate_right(pool_chunk *n) {
    pool_chunk *l = n->left;
    n->left = l->right;
    l->right = n;
    return l;
}

static pool_chunk *rotate_left(pool_chunk *n) {
    pool_chunk *r = n->right;
    n->right = r->left;
    r->left = n;
    return r;
}

static pool_chunk *insert_at(pool_chunk *root, pool_chunk *c) {
    if (root == NULL) return c;
    if (chunk_less(c, root)) {
        root->left = insert_at(root->left, c);
        if (root->left->priority > root->priority) root = rotate_right(root);
    } else {
        root->right = insert_at(root->right, c);
        if (root->right->priority > root->priority) root = rotate_left(root);
    }
    return root;
}

static pool_chunk *merge_children(pool_chunk *l, pool_chunk *r) {
    if (l == NULL) return r;
    if (r == NULL) return l;
    if (l->priority > r->priority) {
        l->right = merge_children(l->right, r);
        return l;
    }
    r->left = merge_children(l, r->left);
    return r;
}

static pool_chunk *remove_at(pool_chunk *root, pool_chunk *c) {
    if (root == c) return merge_children(c->left, c->right);
    if (chunk_less(c, root)) {
        root->left = remove_at(root->left, c);
    } else {
        root->right = remove_at(root->right, c);
    }
    return root;
}

void free_tree_insert(free_tree *t, pool_chunk *c) {
    c->left = c->right = NULL;
    c->priority = address_priority(c->addr);
    t->root = insert_at(t->root, c);
    t->count++;
    t->bytes += c->size;
}

void free_tree_remove(free_tree *t, pool_chunk *c) {
    t->root = remove_at(t->root, c);
    c->left = c->right = NULL;
    t->count--;
    t->bytes -= c->size;
}

pool_chunk *free_tree_best_fit(const free_tree *t, size_t size) {
    pool_chunk *best = NULL;
    for (pool_chunk *n = t->root; n != NULL;) {
        if (n->size >= size) {
            best = n;
            n = n->left;
        } else {
            n = n->right;
        }
    }
    return best;
}

pool_chunk *free_tree_largest(const free_tree *t) {
    pool_chunk *n = t->root;
    while (n != NULL && n->right != NULL) n = n->right;
    return n;
}

typedef struct tree_walk {
    size_t            count, bytes;
    const pool_chunk *last;
    const char       *error;
} tree_walk;

static void walk_in_order(const pool_chunk *n, tree_walk *w) {
    if (n == NULL || w->error != NULL) return;
    if ((n->left && n->left->priority > n->priority) || (n->right && n->right->priority > n->priority)) {
        w->error = "heap property broken";
    }
    walk_in_order(n->left, w);
    if (w->last != NULL && !chunk_less(w->last, n)) w->error = "chunks out of (size, address) order";
    if (n->state != CHUNK_FREE) w->error = "a chunk in the free tree is not free";
    w->last = n;
    w->count++;
    w->bytes += n->size;
    walk_in_order(n->right, w);
}

int free_tree_check(const free_tree *t, char *msg, size_t len) {
    tree_walk w = {0, 0, NULL, NULL};
    walk_in_order(t->root, &w);
    if (w.error == NULL && (w.count != t->count || w.bytes != t->bytes)) {
        w.error = "count or bytes differ from the chunks in the tree";
    }
    if (w.error != NULL) {
        snprintf(msg, len, "free tree: %s (%zu chunks, %zu bytes walked; %zu, %zu recorded)", w.error,
                 w.count, w.bytes, t->count, t->bytes);
        return -1;
    }
    return 0;
}
