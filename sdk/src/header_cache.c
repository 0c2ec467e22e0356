/* header_cache.c — per-thread free lists of array headers: no lock and no atomic on the call
 * path, because each thread only touches its own list. A thread's list goes back to malloc
 * when the thread exits (thread_cache.h); the main thread's stays until exit. */
#include "header_cache.h"

#include <stdlib.h>

#include "thread_cache.h"

typedef struct cached_header {
  struct cached_header *next;
} cached_header;

typedef struct header_list {
  cached_header *head;
  int count;
  int registered; /* dlop__thread_cache_register succeeded and no flush came since */
} header_list;

static _Thread_local header_list list;

static void free_list(void *argument) {
  header_list *owned = argument;
  cached_header *block = owned->head;
  while (block != NULL) {
    cached_header *next = block->next;
    free(block);
    block = next;
  }
  owned->head = NULL;
  owned->count = 0;
  /* Arrays released by later destructors of this thread register the list again. */
  owned->registered = 0;
}

static dlop__thread_cache_kind header_lists = DLOP__THREAD_CACHE_KIND(free_list);

void *dlop__header_take(size_t size) {
  if (size > DLOP__HEADER_CACHE_BLOCK_BYTES) return malloc(size);
  cached_header *block = list.head;
  if (block != NULL) {
    list.head = block->next;
    list.count--;
    return block;
  }
  /* Every block is the cache's full size, so any cached block fits any request. */
  return malloc(DLOP__HEADER_CACHE_BLOCK_BYTES);
}

void dlop__header_give(void *pointer) {
  if (pointer == NULL) return;
  if (list.count >= DLOP__HEADER_CACHE_MAX) {
    free(pointer);
    return;
  }
  if (!list.registered) {
    /* Without a flush at the thread's exit its list would leak: then cache nothing. */
    if (!dlop__thread_cache_register(&header_lists, &list)) {
      free(pointer);
      return;
    }
    list.registered = 1;
  }
  cached_header *block = pointer;
  block->next = list.head;
  list.head = block;
  list.count++;
}
