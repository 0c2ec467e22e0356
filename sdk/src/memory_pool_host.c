/* memory_pool_host.c — the host memory pool and its per-thread cache: every CPU call allocates
 * and frees its outputs, so small host blocks skip the pool's lock and its in-use table
 * (memory_pool.h says how the pools work; thread_cache.h how per-thread caches live and end). */
#include <stdatomic.h>
#include <stdint.h>

#include "memory_pool.h"
#include "thread_cache.h"

static dlop__memory_pool cpu_pool = {.lock = PTHREAD_MUTEX_INITIALIZER,
                                     .device = {DLOP_DEVICE_CPU, 0}};
static pthread_once_t cpu_pool_once = PTHREAD_ONCE_INIT;

static void init_cpu_pool(void) {
  cpu_pool.max_cached = dlop__pool_cap_for(cpu_pool.device);
}

/* The host pool without a context scope: every CPU call allocates its outputs here. */
dlop__memory_pool *dlop__host_pool(void) {
  pthread_once(&cpu_pool_once, init_cpu_pool);
  return &cpu_pool;
}

/* ---- the per-thread cache ----------------------------------------------------------------
 * Each thread parks a few freed blocks of its own and keeps the blocks it handed out in slots
 * of its own, which only it fills. Another thread freeing such a block claims its slot with a
 * compare-and-swap under the pool lock, then the block is free like any other. A thread's cache
 * goes back to the shared pool when the thread exits (its flush) or calls
 * dlop_memory_release_cached. Used only when the cap on cached bytes is at least 64 MiB, since
 * parked blocks (at most 8 x 64 KiB per thread) are not trimmed by others. */
#define THREAD_CACHE_MAX_BLOCK ((size_t)64 << 10)
#define THREAD_CACHE_PARKED 8
#define THREAD_CACHE_SLOTS 16
#define THREAD_CACHE_MIN_CAP ((uint64_t)64 << 20)

typedef struct host_thread_cache host_thread_cache;
struct host_thread_cache {
  dlop__pool_block *parked[THREAD_CACHE_PARKED]; /* free blocks; only the owner touches these */
  int num_parked;
  _Atomic uint64_t parked_bytes;           /* written by the owner, read by stats (lock held) */
  _Atomic(void *) keys[THREAD_CACHE_SLOTS]; /* keys[i]: the data pointer of slots[i] */
  _Atomic(dlop__pool_block *) slots[THREAD_CACHE_SLOTS]; /* in-use blocks; only the owner fills one */
  int state; /* 0: not registered, 1: in the registry, -1: not used on this thread */
  host_thread_cache *previous, *next; /* the registry, under cpu_pool.lock */
};

static _Thread_local host_thread_cache local_cache;
static host_thread_cache *cache_registry;

/* Published with release order: a thread that claims the slot sees the block's fields. */
static void publish_outstanding(host_thread_cache *cache, int slot, dlop__pool_block *block) {
  atomic_store_explicit(&cache->keys[slot], block->pointer, memory_order_relaxed);
  atomic_store_explicit(&cache->slots[slot], block, memory_order_release);
}

/* The block behind pointer if one of cache's slots holds it, taken out of the slot. */
static dlop__pool_block *claim_outstanding(host_thread_cache *cache, void *pointer) {
  for (int i = 0; i < THREAD_CACHE_SLOTS; i++) {
    if (atomic_load_explicit(&cache->keys[i], memory_order_relaxed) != pointer) continue;
    dlop__pool_block *block = atomic_load_explicit(&cache->slots[i], memory_order_acquire);
    /* The key may be stale: another thread reads it while the owner refills the slot (key,
     * then block) with a block of another pointer, so the block itself must name pointer.
     * Reading block->pointer is safe: the block is in a slot, hence in use, and blocks are only
     * destroyed under the pool's lock, which a thread claiming from another's cache holds (the
     * owner claims only what it holds itself). The swap decides between two claims at once. */
    if (block != NULL && block->pointer == pointer &&
        atomic_compare_exchange_strong_explicit(&cache->slots[i], &block, NULL,
                                                memory_order_acq_rel, memory_order_relaxed))
      return block;
  }
  return NULL;
}

/* The registry does not change meanwhile: the lock is held. */
uint64_t dlop__host_pool_parked_bytes_locked(void) {
  uint64_t total = 0;
  for (host_thread_cache *cache = cache_registry; cache; cache = cache->next)
    total += atomic_load_explicit(&cache->parked_bytes, memory_order_relaxed);
  return total;
}

/* cache's parked blocks to the shared list (lock held; called by the owner thread only). */
static void unpark_locked(host_thread_cache *cache) {
  for (int i = 0; i < cache->num_parked; i++) dlop__pool_cache_locked(&cpu_pool, cache->parked[i]);
  cache->num_parked = 0;
  atomic_store_explicit(&cache->parked_bytes, 0, memory_order_relaxed);
}

void dlop__host_pool_unpark_mine_locked(void) { unpark_locked(&local_cache); }

/* Thread exit: parked blocks to the shared cache, blocks still in use to the shared table
 * (another thread may free them later), and out of the registry. */
static void flush_thread_cache(void *argument) {
  host_thread_cache *cache = argument;
  pthread_mutex_lock(&cpu_pool.lock);
  unpark_locked(cache);
  for (int i = 0; i < THREAD_CACHE_SLOTS; i++) {
    dlop__pool_block *block = atomic_exchange(&cache->slots[i], NULL);
    if (block != NULL) dlop__pool_track_locked(&cpu_pool, block);
  }
  if (cache->previous) cache->previous->next = cache->next;
  else cache_registry = cache->next;
  if (cache->next) cache->next->previous = cache->previous;
  cache->previous = cache->next = NULL;
  dlop__pool_trim_locked(&cpu_pool);
  pthread_mutex_unlock(&cpu_pool.lock);
  /* Arrays released by later destructors of this thread register the cache again. */
  cache->state = 0;
}

static dlop__thread_cache_kind host_caches = DLOP__THREAD_CACHE_KIND(flush_thread_cache);

/* This thread's cache, registered at its first use; NULL when the cap is too small for it or
 * no exit flush could be arranged (then its blocks would leak at the thread's exit). */
static host_thread_cache *my_cache(dlop__memory_pool *pool) {
  host_thread_cache *cache = &local_cache;
  if (cache->state == 1) return cache;
  if (cache->state < 0 || pool->max_cached < THREAD_CACHE_MIN_CAP) return NULL;
  if (!dlop__thread_cache_register(&host_caches, cache)) {
    cache->state = -1;
    return NULL;
  }
  pthread_mutex_lock(&pool->lock);
  cache->previous = NULL;
  cache->next = cache_registry;
  if (cache_registry) cache_registry->previous = cache;
  cache_registry = cache;
  pthread_mutex_unlock(&pool->lock);
  cache->state = 1;
  return cache;
}

/* A parked block of this rounded size, taken out of cache (NULL: none). Owner thread only. */
static dlop__pool_block *take_parked(host_thread_cache *cache, size_t size) {
  for (int i = cache->num_parked - 1; i >= 0; i--) {
    dlop__pool_block *block = cache->parked[i];
    if (block->size != size) continue;
    cache->parked[i] = cache->parked[--cache->num_parked];
    atomic_store_explicit(&cache->parked_bytes,
                          atomic_load_explicit(&cache->parked_bytes, memory_order_relaxed) - size,
                          memory_order_relaxed);
    return block;
  }
  return NULL;
}

int dlop__host_pool_alloc(dlop_device device, size_t bytes, void **pointer) {
  dlop__memory_pool *pool = dlop__host_pool();
  size_t size = dlop__pool_round_size(bytes);
  host_thread_cache *cache =
      size != 0 && size <= THREAD_CACHE_MAX_BLOCK ? my_cache(pool) : NULL;
  int slot = -1;
  for (int i = 0; cache != NULL && i < THREAD_CACHE_SLOTS; i++)
    if (atomic_load_explicit(&cache->slots[i], memory_order_relaxed) == NULL) {
      slot = i;
      break;
    }
  if (slot >= 0) {
    dlop__pool_block *parked = take_parked(cache, size);
    if (parked != NULL) {
      publish_outstanding(cache, slot, parked);
      dlop__pool_count_in_use(pool, size);
      *pointer = parked->pointer;
      return DLOP_OK;
    }
  }
  /* From the shared pool: kept in this thread's free slot if it has one (no other thread can
   * free the block before this call returns it, so the slot is filled after the pool's lock is
   * released), else in the pool's in-use table. */
  dlop__pool_block *block;
  int status = dlop__pool_take(pool, device, bytes, 0, slot < 0, &block);
  if (status != DLOP_OK) return status;
  if (slot >= 0) publish_outstanding(cache, slot, block);
  *pointer = block->pointer;
  return DLOP_OK;
}

int dlop__host_pool_free(dlop_device device, void *pointer) {
  dlop__memory_pool *pool = dlop__host_pool();
  host_thread_cache *cache = local_cache.state == 1 ? &local_cache : NULL;
  dlop__pool_block *block = cache ? claim_outstanding(cache, pointer) : NULL;
  int locked = 0;
  if (block == NULL) {
    /* Not handed out by this thread's cache: the shared table, then the other threads'. */
    pthread_mutex_lock(&pool->lock);
    locked = 1;
    block = dlop__pool_untrack_locked(pool, pointer);
    for (host_thread_cache *other = cache_registry; block == NULL && other; other = other->next)
      block = claim_outstanding(other, pointer);
    if (block == NULL) {
      pthread_mutex_unlock(&pool->lock);
      return dlop__pool_not_allocated(device, pointer);
    }
  }
  atomic_fetch_sub_explicit(&pool->bytes_in_use, block->size, memory_order_relaxed);
  if (cache != NULL && block->size <= THREAD_CACHE_MAX_BLOCK &&
      cache->num_parked < THREAD_CACHE_PARKED) {
    cache->parked[cache->num_parked++] = block;
    atomic_store_explicit(&cache->parked_bytes,
                          atomic_load_explicit(&cache->parked_bytes, memory_order_relaxed) +
                              block->size,
                          memory_order_relaxed);
    if (locked) pthread_mutex_unlock(&pool->lock);
    return DLOP_OK;
  }
  if (!locked) pthread_mutex_lock(&pool->lock);
  dlop__pool_cache_locked(pool, block);
  dlop__pool_trim_locked(pool);
  pthread_mutex_unlock(&pool->lock);
  return DLOP_OK;
}
