/* thread_cache.h — the one way libdlop keeps a cache per thread (array headers in
 * header_cache.c, small host blocks in memory_pool_host.c): each thread's cache lives in its own
 * _Thread_local storage, so its owner uses it without a lock, and a flush gives back what it
 * holds when the thread exits (a pthread key destructor), so nothing leaks. Internal. */
#ifndef DLOP_THREAD_CACHE_H
#define DLOP_THREAD_CACHE_H

#include <pthread.h>

/* One kind of per-thread cache: how a thread's cache is flushed at the thread's exit. One static
 * instance per kind: static dlop__thread_cache_kind kind = DLOP__THREAD_CACHE_KIND(flush); */
typedef struct dlop__thread_cache_kind {
  void (*flush)(void *cache); /* the exiting thread's cache: give back all it holds */
  int key_state;              /* 0: no key yet, 1: key made, -1: none could be made */
  pthread_key_t key;          /* its destructor is flush */
} dlop__thread_cache_kind;

#define DLOP__THREAD_CACHE_KIND(flush_function) {.flush = (flush_function)}

/* Have kind->flush(cache) run when this thread exits; cache is this thread's own. Returns 1, or
 * 0 when that cannot be arranged (no key could be made, or no memory for the thread's value):
 * then the thread must keep nothing in its cache, which would leak at its exit.
 * The caller remembers that its cache is registered: it calls this at the thread's first use of
 * the cache, and its flush forgets the registration, so that a cache used again by a later
 * destructor of the exiting thread registers again (POSIX runs the destructors again while
 * values are set) and is flushed too. Not on the hot path: once per thread and cache. */
int dlop__thread_cache_register(dlop__thread_cache_kind *kind, void *cache);

#endif
