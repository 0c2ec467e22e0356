/* header_cache.h — a per-thread free list for the fixed-size headers that every call allocates
 * and frees (dlop_array), so that a steady-state call makes no malloc/free for them. Internal. */
#ifndef DLOP_HEADER_CACHE_H
#define DLOP_HEADER_CACHE_H

#include <stddef.h>

/* Headers kept per thread; more are given back to malloc. Enough for the arrays one call of a
 * mid-sized graph releases before the next call takes them again. */
#define DLOP__HEADER_CACHE_MAX 64

/* An uninitialized block of at least size bytes (size must be the same on every call, at most
 * DLOP__HEADER_CACHE_BLOCK_BYTES), or NULL when out of memory. */
void *dlop__header_take(size_t size);
/* Give a block from dlop__header_take back (NULL ignored). Any thread may give back a block
 * another thread took: it goes to the giver's list. */
void dlop__header_give(void *block);

/* The largest size dlop__header_take serves from the cache (bigger: plain malloc every time). */
#define DLOP__HEADER_CACHE_BLOCK_BYTES 1024

#endif
