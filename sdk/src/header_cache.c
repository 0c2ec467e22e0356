/* header_cache.c — per-thread free lists of array headers: no lock and no atomic on the call
 * path, because each thread only touches its own list. A thread's list goes back to malloc
 * when the thread exits (pthread key destructor); the main thread's stays until exit. */
#include "header_cache.h"

#include <pthread.h>
#include <stdlib.h>

typedef struct cached_header {
  struct cached_header *next;
} cached_header;

typedef struct header_list {
  cached_header *head;
  int count;
  int registered; /* the thread-exit destructor knows this list */
} header_list;

static _Thread_local header_list list;
static pthread_key_t exit_key;
static pthread_once_t key_once = PTHREAD_ONCE_INIT;
static int key_made;

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
  /* Arrays released by later destructors of this thread register the list again (the key's
   * destructors run repeatedly while values are set). */
  owned->registered = 0;
}

static void make_key(void) { key_made = pthread_key_create(&exit_key, free_list) == 0; }

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
    /* Without a destructor a thread's list would leak at its exit: then cache nothing. */
    pthread_once(&key_once, make_key);
    if (!key_made || pthread_setspecific(exit_key, &list) != 0) {
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
