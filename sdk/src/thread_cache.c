/* thread_cache.c — registers a thread's cache for its flush at the thread's exit: one pthread
 * key per kind of cache, made at the first registration (thread_cache.h says how caches use
 * it). */
#include "thread_cache.h"

/* Guards every kind's key_state and key while the key is made (once per kind). */
static pthread_mutex_t keys_lock = PTHREAD_MUTEX_INITIALIZER;

int dlop__thread_cache_register(dlop__thread_cache_kind *kind, void *cache) {
  pthread_mutex_lock(&keys_lock);
  if (kind->key_state == 0)
    kind->key_state = pthread_key_create(&kind->key, kind->flush) == 0 ? 1 : -1;
  int made = kind->key_state == 1;
  pthread_mutex_unlock(&keys_lock);
  return made && pthread_setspecific(kind->key, cache) == 0;
}
