/* memory_pool.c — caching allocators: one for host memory and one per CUDA device, so that in
 * steady state a repeated call makes no cuMemAlloc / malloc. Sizes are rounded to classes and
 * freed blocks are kept up to a cap on cached bytes; on CUDA a block freed with one user stream
 * is reused at once on that stream, and another stream gets it only after an event on every
 * stream that used it has completed. Those events are recorded lazily: not at the free (the hot
 * path of every run) but when another stream first asks for the block. */
#include <ctype.h>
#include <stdatomic.h>
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cuda_driver.h"
#include "internal.h"

#define DLOP_POOL_BUCKETS 4096
#define DLOP_POOL_MAX_CUDA_DEVICES 64
#define DLOP_POOL_SMALL_LIMIT ((size_t)1 << 20)   /* up to 1 MiB: 512-byte granularity */
#define DLOP_POOL_SMALL_GRANULE ((size_t)512)
#define DLOP_POOL_LARGE_GRANULE ((size_t)2 << 20) /* above: whole 2 MiB chunks */

/* A freed CUDA block may still be used by work on every stream that read or wrote it. Identity
 * is the dlop_stream id, never the raw CUstream value (a destroyed stream's handle can come back
 * for a new stream); 0 is "unknown" (a plugin's raw CUstream, the default stream).
 * A user that is a dlop stream is kept LAZY at the free: the block holds a reference to the
 * stream (so its CUstream stays valid) and records no event. Reuse on that same stream needs
 * nothing (stream order). Only when another stream wants the block, or the block goes back to
 * the driver, is the event recorded on the user's stream: an event recorded later completes
 * after all earlier work on that stream, so waiting for it is conservative and correct. An
 * unknown user (no reference can be held on its stream) gets its event at the free, as before. */
enum { USER_DONE = 0, USER_LAZY = 1, USER_PENDING = 2 };

typedef struct pool_user {
  uint64_t stream_id;  /* 0: unknown */
  CUstream handle;
  dlop_stream *stream; /* LAZY: a reference, dropped once the event is recorded */
  int state;           /* USER_DONE, USER_LAZY or USER_PENDING (event recorded, not seen done) */
} pool_user;

typedef struct pool_block {
  void *pointer;
  size_t size;                            /* rounded size, what the driver allocated */
  int num_users;                          /* users at the last free (CUDA) */
  pool_user users[DLOP__MEMORY_MAX_USERS];
  CUevent events[DLOP__MEMORY_MAX_USERS]; /* created when first needed, kept for reuse */
  struct pool_block *next;
} pool_block;

typedef struct memory_pool {
  pthread_mutex_t lock;
  dlop_device device;
  pool_block *cached;                       /* free blocks kept for reuse */
  pool_block *in_use[DLOP_POOL_BUCKETS];    /* handed-out blocks, hashed by pointer */
  /* Atomic: the host pool's per-thread caches hand blocks out and take them back without the
   * lock. bytes_cached counts the shared list (under the lock); a host thread's parked blocks
   * are counted in its cache and added by dlop_memory_stats_get. */
  _Atomic uint64_t bytes_in_use, peak_bytes_in_use;
  uint64_t bytes_cached, driver_allocations, driver_frees;
  uint64_t max_cached; /* cap on bytes_cached (UINT64_MAX: none); set when the pool is made */
} memory_pool;

static memory_pool cpu_pool = {.lock = PTHREAD_MUTEX_INITIALIZER,
                               .device = {DLOP_DEVICE_CPU, 0}};
static pthread_once_t cpu_pool_once = PTHREAD_ONCE_INIT;
/* Written once under cuda_pools_lock; read without it by frees, which need no context. */
static _Atomic(memory_pool *) cuda_pools[DLOP_POOL_MAX_CUDA_DEVICES];
static pthread_mutex_t cuda_pools_lock = PTHREAD_MUTEX_INITIALIZER;

static size_t round_size(size_t bytes) {
  if (bytes == 0) bytes = 1; /* a zero-byte request still gets a unique, freeable pointer */
  size_t granule = bytes <= DLOP_POOL_SMALL_LIMIT ? DLOP_POOL_SMALL_GRANULE : DLOP_POOL_LARGE_GRANULE;
  if (bytes > SIZE_MAX - granule) return 0;
  return (bytes + granule - 1) / granule * granule;
}

/* ---- the cap on cached bytes ------------------------------------------------------------ */

/* Without a cap, freed blocks of ever-new sizes pile up: the cache was only released when an
 * allocation failed, which on the host practically never happens (100 growing allocations left
 * 20 GB cached). The host pool keeps at most 1 GiB, or 1/8 of physical memory if smaller. */
#define DLOP_POOL_CPU_DEFAULT_MAX_CACHED ((uint64_t)1 << 30)

static pthread_once_t environment_once = PTHREAD_ONCE_INIT;
static int environment_cap_set;     /* DLOP_POOL_MAX_CACHED_BYTES was given and valid */
static uint64_t environment_cap;

/* "1048576", "512K", "512M", "2G", "1T" (binary units; an optional trailing B or iB). */
static int parse_byte_count(const char *text, uint64_t *value) {
  const char *p = text;
  while (isspace((unsigned char)*p)) p++;
  if (!isdigit((unsigned char)*p)) return 0;
  errno = 0;
  char *end;
  unsigned long long number = strtoull(p, &end, 10);
  if (errno == ERANGE) return 0;
  unsigned shift = 0;
  switch (toupper((unsigned char)*end)) {
    case 'K': shift = 10; end++; break;
    case 'M': shift = 20; end++; break;
    case 'G': shift = 30; end++; break;
    case 'T': shift = 40; end++; break;
    default: break;
  }
  if (shift && *end == 'i') end++;
  if (toupper((unsigned char)*end) == 'B') end++;
  while (isspace((unsigned char)*end)) end++;
  if (*end != '\0') return 0;
  if (shift && number > (UINT64_MAX >> shift)) return 0;
  *value = (uint64_t)number << shift;
  return 1;
}

static void read_environment(void) {
  const char *text = getenv("DLOP_POOL_MAX_CACHED_BYTES");
  if (text == NULL || *text == '\0') return;
  if (parse_byte_count(text, &environment_cap)) {
    environment_cap_set = 1;
  } else {
    dlop__warn("DLOP_POOL_MAX_CACHED_BYTES='%s' is not a byte count (expected e.g. 1073741824, "
               "512M or 2G); using the default caps",
               text);
  }
}

/* The cap of a new pool: the environment's for every pool, else 1 GiB (or 1/8 of physical
 * memory) for the host and none for GPUs (their cache is released when cuMemAlloc fails). */
static uint64_t cap_for(dlop_device device) {
  pthread_once(&environment_once, read_environment);
  if (environment_cap_set) return environment_cap;
  if (device.type != DLOP_DEVICE_CPU) return UINT64_MAX;
  uint64_t cap = DLOP_POOL_CPU_DEFAULT_MAX_CACHED;
  long pages = sysconf(_SC_PHYS_PAGES), page_size = sysconf(_SC_PAGESIZE);
  if (pages > 0 && page_size > 0 && (uint64_t)pages / 8 * (uint64_t)page_size < cap)
    cap = (uint64_t)pages / 8 * (uint64_t)page_size;
  return cap;
}

static void init_cpu_pool(void) {
  cpu_pool.max_cached = cap_for(cpu_pool.device);
}

static size_t bucket_of(const void *pointer) {
  uintptr_t key = (uintptr_t)pointer >> 6;
  key ^= key >> 17;
  key *= (uintptr_t)0x9E3779B97F4A7C15ull;
  return (size_t)(key >> 20) % DLOP_POOL_BUCKETS;
}

static void format_device(dlop_device device, char *text, size_t size) {
  if (device.type == DLOP_DEVICE_CUDA) snprintf(text, size, "cuda:%d", (int)device.id);
  else snprintf(text, size, "cpu");
}

/* Find the pool of a device; for CUDA, also check the device and make its context current. */
/* The device's pool. On CUDA the device's context is made current for the caller's scope
 * (nothing changes when it already is, as inside a function run). Whatever the status, the
 * caller ends with dlop__cuda_restore_after(scope, ...), so its own context comes back. */
static int get_pool(dlop_device device, memory_pool **pool, dlop__cuda_scope *scope) {
  *pool = NULL;
  scope->previous = NULL;
  scope->changed = 0;
  if (device.type == DLOP_DEVICE_CPU) {
    pthread_once(&cpu_pool_once, init_cpu_pool);
    *pool = &cpu_pool;
    return DLOP_OK;
  }
  if (device.type != DLOP_DEVICE_CUDA)
    return dlop__error(DLOP_INVALID_ARGUMENT,
                       "memory: unknown device type %d (expected 1 = cpu or 2 = cuda)",
                       (int)device.type);
  int status = dlop__cuda_use_device(device.id, scope); /* also checks the device exists */
  if (status != DLOP_OK) return status;
  if (device.id >= DLOP_POOL_MAX_CUDA_DEVICES)
    return dlop__error(DLOP_NO_DEVICE, "memory: CUDA device %d is beyond the %d dlop supports",
                       (int)device.id, DLOP_POOL_MAX_CUDA_DEVICES);
  pthread_mutex_lock(&cuda_pools_lock);
  memory_pool *found = atomic_load(&cuda_pools[device.id]);
  if (found == NULL) {
    found = calloc(1, sizeof *found);
    if (found != NULL) {
      pthread_mutex_init(&found->lock, NULL);
      found->device = device;
      found->max_cached = cap_for(device);
      atomic_store(&cuda_pools[device.id], found);
    }
  }
  pthread_mutex_unlock(&cuda_pools_lock);
  if (found == NULL)
    return dlop__error(DLOP_OUT_OF_MEMORY, "memory: no host memory for the pool of cuda:%d",
                       (int)device.id);
  *pool = found;
  return DLOP_OK;
}

/* The driver / system allocator itself. Returns a CUresult-like code: 0 or an error. */
static CUresult driver_alloc(memory_pool *pool, size_t size, void **pointer) {
  if (pool->device.type == DLOP_DEVICE_CPU) {
    *pointer = aligned_alloc(64, size);
    return *pointer ? DLOP_CUDA_SUCCESS : DLOP_CUDA_ERROR_OUT_OF_MEMORY;
  }
  CUdeviceptr address = 0;
  CUresult result = dlop__cuda.cuMemAlloc(&address, size);
  *pointer = (void *)(uintptr_t)address;
  return result;
}

/* Give one cached block back to the driver, after the work that last used it. */
static void driver_free(memory_pool *pool, pool_block *block) {
  if (pool->device.type == DLOP_DEVICE_CPU) {
    free(block->pointer);
  } else {
    /* Under the pool lock: this waits only when a block is trimmed or released while work on
     * it is still in flight, which the cap / out-of-memory paths accept as the price of
     * correctness (the memory must not go back to the driver before the work is done). */
    for (int u = 0; u < block->num_users; u++) {
      pool_user *user = &block->users[u];
      if (user->state == USER_PENDING) dlop__cuda.cuEventSynchronize(block->events[u]);
      if (user->state == USER_LAZY) dlop__cuda.cuStreamSynchronize(user->handle);
      user->state = USER_DONE;
      dlop_stream_destroy(user->stream); /* see drop_user_streams on the lock order */
      user->stream = NULL;
    }
    for (int e = 0; e < DLOP__MEMORY_MAX_USERS; e++)
      if (block->events[e]) dlop__cuda.cuEventDestroy(block->events[e]);
    CUresult result = dlop__cuda.cuMemFree((CUdeviceptr)(uintptr_t)block->pointer);
    if (result != DLOP_CUDA_SUCCESS)
      dlop__warn("cuMemFree(%p) on cuda:%d failed: %s", block->pointer, (int)pool->device.id,
                 dlop__cuda_result_text(result));
  }
  pool->driver_frees++;
  free(block);
}

/* Called with the lock held. */
static void release_cached_locked(memory_pool *pool) {
  pool_block *block = pool->cached;
  pool->cached = NULL;
  while (block) {
    pool_block *next = block->next;
    pool->bytes_cached -= block->size;
    driver_free(pool, block);
    block = next;
  }
}

/* Give the largest cached blocks back until the cache is within the pool's cap (a block larger
 * than the cap, just freed, goes back at once). Largest first: fewest driver calls, and the
 * small blocks that steady-state loops reuse stay. On CUDA, driver_free waits for the work that
 * last used the block. Lock held. */
static void trim_cached_locked(memory_pool *pool) {
  while (pool->bytes_cached > pool->max_cached && pool->cached) {
    pool_block **largest = &pool->cached;
    for (pool_block **link = &pool->cached; *link; link = &(*link)->next)
      if ((*link)->size > (*largest)->size) largest = link;
    pool_block *block = *largest;
    *largest = block->next;
    pool->bytes_cached -= block->size;
    driver_free(pool, block);
  }
}

/* Drop the stream references a block's users still hold. Called with the pool lock held:
 * dlop_stream_destroy takes only the live-stream lock (never a pool lock), so the order is
 * always pool lock -> live-stream lock; at a stream's last reference it also destroys the
 * CUstream, which the driver defers until the stream's work is done. */
static void drop_user_streams(pool_block *block) {
  for (int u = 0; u < block->num_users; u++) {
    dlop_stream_destroy(block->users[u].stream);
    block->users[u].stream = NULL;
  }
  block->num_users = 0;
}

/* Record the event of user u on its stream now (it completes after everything enqueued there
 * so far, the work before the free included). Where no event can be made or recorded, wait for
 * the stream instead, which is always correct. The device's context is current (alloc path). */
static void record_user_event(pool_block *block, int u) {
  pool_user *user = &block->users[u];
  CUresult result = DLOP_CUDA_SUCCESS;
  if (block->events[u] == NULL)
    result = dlop__cuda.cuEventCreate(&block->events[u], DLOP_CU_EVENT_DISABLE_TIMING);
  if (result == DLOP_CUDA_SUCCESS) result = dlop__cuda.cuEventRecord(block->events[u], user->handle);
  if (result == DLOP_CUDA_SUCCESS) {
    user->state = USER_PENDING;
  } else {
    CUresult waited = dlop__cuda.cuStreamSynchronize(user->handle);
    if (waited != DLOP_CUDA_SUCCESS)
      dlop__warn("the pool could neither record an event (%s) nor wait for a stream (%s); the "
                 "block is treated as free", dlop__cuda_result_text(result),
                 dlop__cuda_result_text(waited));
    user->state = USER_DONE;
  }
  dlop_stream_destroy(user->stream); /* the event (or the wait) stands for the stream now */
  user->stream = NULL;
}

/* May a cached block be handed out for work on the stream with id stream_id now? At once on
 * the block's sole user stream (stream order covers it); otherwise when every user's event has
 * completed, recording the lazy ones first. An event seen complete is remembered, so a later
 * allocation does not query it again; the query stops at the first incomplete event. */
static int block_ready_for(pool_block *block, uint64_t stream_id, int cuda) {
  if (!cuda) return 1;
  if (stream_id != 0 && block->num_users == 1 && block->users[0].stream_id == stream_id) return 1;
  for (int u = 0; u < block->num_users; u++)
    if (block->users[u].state == USER_LAZY) record_user_event(block, u);
  for (int u = 0; u < block->num_users; u++) {
    if (block->users[u].state != USER_PENDING) continue;
    if (dlop__cuda.cuEventQuery(block->events[u]) != DLOP_CUDA_SUCCESS) return 0;
    block->users[u].state = USER_DONE;
  }
  return 1;
}

/* Best fit among ready cached blocks no larger than twice the request. Lock held. */
static pool_block *take_cached_locked(memory_pool *pool, size_t size, uint64_t stream_id) {
  int cuda = pool->device.type == DLOP_DEVICE_CUDA;
  pool_block **best = NULL;
  for (pool_block **link = &pool->cached; *link; link = &(*link)->next) {
    pool_block *block = *link;
    if (block->size < size || block->size / 2 >= size) continue;
    if (best && (*best)->size <= block->size) continue;
    if (!block_ready_for(block, stream_id, cuda)) continue;
    best = link;
    if (block->size == size) break;
  }
  if (!best) return NULL;
  pool_block *block = *best;
  *best = block->next;
  pool->bytes_cached -= block->size;
  if (cuda) drop_user_streams(block); /* handed out: its old users no longer matter */
  return block;
}

/* In-use bytes up, and the peak with them (exact under concurrency: the peak sees every
 * total that fetch_add produced). */
static void count_in_use(memory_pool *pool, uint64_t size) {
  uint64_t now = atomic_fetch_add_explicit(&pool->bytes_in_use, size, memory_order_relaxed) + size;
  uint64_t peak = atomic_load_explicit(&pool->peak_bytes_in_use, memory_order_relaxed);
  while (now > peak && !atomic_compare_exchange_weak_explicit(&pool->peak_bytes_in_use, &peak, now,
                                                              memory_order_relaxed,
                                                              memory_order_relaxed)) {
  }
}

typedef struct thread_cache thread_cache;
static void publish_outstanding(thread_cache *cache, int slot, pool_block *block);

/* A cached block that fits, or a new one from the driver; registered as in use in the pool's
 * table, or in this thread's cache slot `slot` when cache is not NULL (host pool). */
static int alloc_from_pool(memory_pool *pool, dlop_device device, size_t bytes,
                           uint64_t stream_id, thread_cache *cache, int slot, void **pointer) {
  char where[32];
  format_device(device, where, sizeof where);
  size_t size = round_size(bytes);
  if (size == 0)
    return dlop__error(DLOP_OUT_OF_MEMORY, "out of memory: %zu bytes requested on %s is too large",
                       bytes, where);

  pthread_mutex_lock(&pool->lock);
  pool_block *block = take_cached_locked(pool, size, stream_id);
  if (block == NULL) {
    block = calloc(1, sizeof *block);
    if (block == NULL) {
      pthread_mutex_unlock(&pool->lock);
      return dlop__error(DLOP_OUT_OF_MEMORY, "out of host memory for the bookkeeping of a %zu-byte "
                         "block on %s", size, where);
    }
    void *address = NULL;
    CUresult result = driver_alloc(pool, size, &address);
    if (result == DLOP_CUDA_ERROR_OUT_OF_MEMORY) {
      /* Cached blocks of other sizes may be what stands in the way: give them back, retry. */
      release_cached_locked(pool);
      result = driver_alloc(pool, size, &address);
    }
    if (result != DLOP_CUDA_SUCCESS) {
      uint64_t in_use = atomic_load(&pool->bytes_in_use);
      free(block);
      pthread_mutex_unlock(&pool->lock);
      if (result == DLOP_CUDA_ERROR_OUT_OF_MEMORY)
        return dlop__error(DLOP_OUT_OF_MEMORY,
                           "out of memory: could not allocate %zu bytes (%zu rounded) on %s "
                           "(%llu bytes in use by dlop, cache already released)",
                           bytes, size, where, (unsigned long long)in_use);
      return dlop__error(DLOP_CUDA_ERROR, "cuMemAlloc of %zu bytes on %s failed: %s", size,
                         where, dlop__cuda_result_text(result));
    }
    block->pointer = address;
    block->size = size;
    pool->driver_allocations++;
  }
  if (cache != NULL) {
    publish_outstanding(cache, slot, block);
  } else {
    size_t bucket = bucket_of(block->pointer);
    block->next = pool->in_use[bucket];
    pool->in_use[bucket] = block;
  }
  count_in_use(pool, block->size);
  *pointer = block->pointer;
  pthread_mutex_unlock(&pool->lock);
  return DLOP_OK;
}

/* The host pool without get_pool's context scope: every CPU call allocates its outputs here. */
static memory_pool *host_pool(void) {
  pthread_once(&cpu_pool_once, init_cpu_pool);
  return &cpu_pool;
}

/* ---- the host pool's per-thread cache -------------------------------------------------------
 * Every CPU call allocates and frees its outputs, so small host blocks skip the pool's lock
 * and its in-use table: each thread parks a few freed blocks of its own and keeps the blocks it
 * handed out in slots of its own, which only it fills. Another thread freeing such a block
 * claims its slot with a compare-and-swap under the pool lock, then the block is free like any
 * other. A thread's cache goes back to the shared pool when the thread exits (pthread key
 * destructor) or calls dlop_memory_release_cached. Used only when the cap on cached bytes is at
 * least 64 MiB, since parked blocks (at most 8 x 64 KiB per thread) are not trimmed by others. */
#define THREAD_CACHE_MAX_BLOCK ((size_t)64 << 10)
#define THREAD_CACHE_PARKED 8
#define THREAD_CACHE_SLOTS 16
#define THREAD_CACHE_MIN_CAP ((uint64_t)64 << 20)

struct thread_cache {
  pool_block *parked[THREAD_CACHE_PARKED]; /* free blocks; only the owner touches these */
  int num_parked;
  _Atomic uint64_t parked_bytes;           /* written by the owner, read by stats (lock held) */
  _Atomic(void *) keys[THREAD_CACHE_SLOTS]; /* keys[i]: the data pointer of slots[i] */
  _Atomic(pool_block *) slots[THREAD_CACHE_SLOTS]; /* in-use blocks; only the owner fills one */
  int state; /* 0: not registered, 1: in the registry, -1: not used on this thread */
  thread_cache *previous, *next; /* the registry, under cpu_pool.lock */
};

static _Thread_local thread_cache local_cache;
static thread_cache *cache_registry;
static pthread_key_t cache_key;
static pthread_once_t cache_key_once = PTHREAD_ONCE_INIT;
static int cache_key_made;

/* Published with release order: a thread that claims the slot sees the block's fields. */
static void publish_outstanding(thread_cache *cache, int slot, pool_block *block) {
  atomic_store_explicit(&cache->keys[slot], block->pointer, memory_order_relaxed);
  atomic_store_explicit(&cache->slots[slot], block, memory_order_release);
}

/* The block behind pointer if one of cache's slots holds it, taken out of the slot. */
static pool_block *claim_outstanding(thread_cache *cache, void *pointer) {
  for (int i = 0; i < THREAD_CACHE_SLOTS; i++) {
    if (atomic_load_explicit(&cache->keys[i], memory_order_relaxed) != pointer) continue;
    pool_block *block = atomic_load_explicit(&cache->slots[i], memory_order_acquire);
    /* Only the owner fills a slot, and it writes the key first: a non-NULL block here is the
     * one the key names. The swap decides between two threads freeing it at once. */
    if (block != NULL &&
        atomic_compare_exchange_strong_explicit(&cache->slots[i], &block, NULL,
                                                memory_order_acq_rel, memory_order_relaxed))
      return block;
  }
  return NULL;
}

/* Every thread's parked bytes (lock held: the registry does not change meanwhile). */
static uint64_t parked_bytes_locked(void) {
  uint64_t total = 0;
  for (thread_cache *cache = cache_registry; cache; cache = cache->next)
    total += atomic_load_explicit(&cache->parked_bytes, memory_order_relaxed);
  return total;
}

/* cache's parked blocks to the shared list (lock held; called by the owner thread only). */
static void unpark_locked(thread_cache *cache) {
  for (int i = 0; i < cache->num_parked; i++) {
    pool_block *block = cache->parked[i];
    block->next = cpu_pool.cached;
    cpu_pool.cached = block;
    cpu_pool.bytes_cached += block->size;
  }
  cache->num_parked = 0;
  atomic_store_explicit(&cache->parked_bytes, 0, memory_order_relaxed);
}

/* Thread exit: parked blocks to the shared cache, blocks still in use to the shared table
 * (another thread may free them later), and out of the registry. */
static void flush_thread_cache(void *argument) {
  thread_cache *cache = argument;
  pthread_mutex_lock(&cpu_pool.lock);
  unpark_locked(cache);
  for (int i = 0; i < THREAD_CACHE_SLOTS; i++) {
    pool_block *block = atomic_exchange(&cache->slots[i], NULL);
    if (block == NULL) continue;
    size_t bucket = bucket_of(block->pointer);
    block->next = cpu_pool.in_use[bucket];
    cpu_pool.in_use[bucket] = block;
  }
  if (cache->previous) cache->previous->next = cache->next;
  else cache_registry = cache->next;
  if (cache->next) cache->next->previous = cache->previous;
  cache->previous = cache->next = NULL;
  trim_cached_locked(&cpu_pool);
  pthread_mutex_unlock(&cpu_pool.lock);
  /* Arrays released by later destructors of this thread register the cache again (the key's
   * destructors run repeatedly while values are set). */
  cache->state = 0;
}

static void make_cache_key(void) {
  cache_key_made = pthread_key_create(&cache_key, flush_thread_cache) == 0;
}

/* This thread's cache, registered at its first use; NULL when the cap is too small for it or
 * no exit destructor could be set (then its blocks would leak at the thread's exit). */
static thread_cache *my_cache(memory_pool *pool) {
  thread_cache *cache = &local_cache;
  if (cache->state == 1) return cache;
  if (cache->state < 0 || pool->max_cached < THREAD_CACHE_MIN_CAP) return NULL;
  pthread_once(&cache_key_once, make_cache_key);
  if (!cache_key_made || pthread_setspecific(cache_key, cache) != 0) {
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

static int host_alloc(dlop_device device, size_t bytes, void **pointer) {
  memory_pool *pool = host_pool();
  size_t size = round_size(bytes);
  thread_cache *cache = size != 0 && size <= THREAD_CACHE_MAX_BLOCK ? my_cache(pool) : NULL;
  int slot = -1;
  for (int i = 0; cache != NULL && i < THREAD_CACHE_SLOTS; i++)
    if (atomic_load_explicit(&cache->slots[i], memory_order_relaxed) == NULL) {
      slot = i;
      break;
    }
  if (slot < 0) return alloc_from_pool(pool, device, bytes, 0, NULL, 0, pointer);
  for (int i = cache->num_parked - 1; i >= 0; i--) {
    pool_block *block = cache->parked[i];
    if (block->size != size) continue;
    cache->parked[i] = cache->parked[--cache->num_parked];
    atomic_store_explicit(&cache->parked_bytes,
                          atomic_load_explicit(&cache->parked_bytes, memory_order_relaxed) - size,
                          memory_order_relaxed);
    publish_outstanding(cache, slot, block);
    count_in_use(pool, size);
    *pointer = block->pointer;
    return DLOP_OK;
  }
  return alloc_from_pool(pool, device, bytes, 0, cache, slot, pointer);
}

static int host_free(dlop_device device, void *pointer) {
  memory_pool *pool = host_pool();
  thread_cache *cache = local_cache.state == 1 ? &local_cache : NULL;
  pool_block *block = cache ? claim_outstanding(cache, pointer) : NULL;
  int locked = 0;
  if (block == NULL) {
    /* Not handed out by this thread's cache: the shared table, then the other threads'. */
    pthread_mutex_lock(&pool->lock);
    locked = 1;
    pool_block **link = &pool->in_use[bucket_of(pointer)];
    while (*link && (*link)->pointer != pointer) link = &(*link)->next;
    block = *link;
    if (block != NULL) *link = block->next;
    for (thread_cache *other = cache_registry; block == NULL && other; other = other->next)
      block = claim_outstanding(other, pointer);
    if (block == NULL) {
      pthread_mutex_unlock(&pool->lock);
      char where[32];
      format_device(device, where, sizeof where);
      return dlop__error(DLOP_INVALID_ARGUMENT,
                         "dlop_memory_free: %p was not allocated by the dlop pool of %s (or was "
                         "freed already)",
                         pointer, where);
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
  block->next = pool->cached;
  pool->cached = block;
  pool->bytes_cached += block->size;
  trim_cached_locked(pool);
  pthread_mutex_unlock(&pool->lock);
  return DLOP_OK;
}

static int memory_alloc(dlop_device device, size_t bytes, uint64_t stream_id, void **pointer) {
  if (pointer == NULL)
    return dlop__error(DLOP_INVALID_ARGUMENT, "dlop_memory_alloc: pointer is NULL");
  *pointer = NULL;
  if (device.type == DLOP_DEVICE_CPU) /* get_pool also serves every CPU id from this pool */
    return host_alloc(device, bytes, pointer);
  memory_pool *pool;
  dlop__cuda_scope scope;
  int status = get_pool(device, &pool, &scope);
  if (status == DLOP_OK) status = alloc_from_pool(pool, device, bytes, stream_id, NULL, 0, pointer);
  return dlop__cuda_restore_after(&scope, status);
}

int dlop_memory_alloc(dlop_device device, size_t bytes, void *stream, void **pointer) {
  if (device.type != DLOP_DEVICE_CUDA) return memory_alloc(device, bytes, 0, pointer);
  /* A raw CUstream (a plugin's, through the host table) maps back to its live dlop stream;
   * one dlop did not create is "unknown", and reuse waits for the free's events. */
  return memory_alloc(device, bytes, dlop__stream_id_of_handle(stream), pointer);
}

int dlop__memory_alloc_on(dlop_device device, size_t bytes, dlop_stream *stream, void **pointer) {
  return memory_alloc(device, bytes, dlop__stream_id(stream), pointer);
}

/* The block's users at this free, taken over from the caller (a LAZY user brings a stream
 * reference). An unknown user (no dlop stream to hold) gets its event now; with no users at
 * all, an event on the default stream. Lock held; for unknown users the context is current. */
static void mark_free_locked(pool_block *block, const pool_user *users, int count) {
  static const pool_user default_stream = {0, NULL, NULL, USER_DONE};
  if (count == 0) {
    users = &default_stream;
    count = 1;
  }
  block->num_users = count;
  for (int u = 0; u < count; u++) {
    block->users[u] = users[u];
    block->users[u].state = USER_LAZY;
    if (users[u].stream == NULL) record_user_event(block, u);
  }
  /* A sole user whose stream was waited for leaves nothing: the block is free for all. */
  if (count == 1 && block->users[0].state == USER_DONE) block->num_users = 0;
}

/* Move a freed block from in-use to the cache. With may_call_driver 0 (a free with only lazy
 * users, which runs without making the device's context current) the cap is not enforced
 * here: *over_cap tells the caller to trim with the context current. */
static int free_to_pool(memory_pool *pool, dlop_device device, void *pointer,
                        const pool_user *users, int count, int may_call_driver, int *over_cap) {
  *over_cap = 0;
  pthread_mutex_lock(&pool->lock);
  pool_block **link = &pool->in_use[bucket_of(pointer)];
  while (*link && (*link)->pointer != pointer) link = &(*link)->next;
  pool_block *block = *link;
  if (block == NULL) {
    pthread_mutex_unlock(&pool->lock);
    for (int u = 0; u < count; u++) dlop_stream_destroy(users[u].stream);
    char where[32];
    format_device(device, where, sizeof where);
    return dlop__error(DLOP_INVALID_ARGUMENT,
                       "dlop_memory_free: %p was not allocated by the dlop pool of %s (or was "
                       "freed already)",
                       pointer, where);
  }
  *link = block->next;
  atomic_fetch_sub_explicit(&pool->bytes_in_use, block->size, memory_order_relaxed);

  /* Mark where the work using the block ends, so other streams can tell when it is free. */
  if (device.type == DLOP_DEVICE_CUDA) mark_free_locked(block, users, count);
  block->next = pool->cached;
  pool->cached = block;
  pool->bytes_cached += block->size;
  if (may_call_driver) trim_cached_locked(pool);
  else *over_cap = pool->bytes_cached > pool->max_cached;
  pthread_mutex_unlock(&pool->lock);
  return DLOP_OK;
}

/* The pool of a CUDA device that has one, without touching the driver (NULL: none yet). */
static memory_pool *existing_cuda_pool(dlop_device device) {
  if (device.type != DLOP_DEVICE_CUDA || device.id < 0 || device.id >= DLOP_POOL_MAX_CUDA_DEVICES)
    return NULL;
  return atomic_load(&cuda_pools[device.id]);
}

/* Takes over users' stream references whatever the outcome. */
static int memory_free(dlop_device device, void *pointer, const pool_user *users, int count) {
  int over_cap = 0;
  if (pointer == NULL) {
    for (int u = 0; u < count; u++) dlop_stream_destroy(users[u].stream);
    return DLOP_OK;
  }
  if (device.type == DLOP_DEVICE_CPU) /* get_pool also serves every CPU id from this pool */
    return host_free(device, pointer);
  int lazy = count > 0;
  for (int u = 0; u < count; u++)
    if (users[u].stream == NULL) lazy = 0;
  memory_pool *pool = existing_cuda_pool(device);
  if (lazy && pool != NULL) {
    /* Only lazy users: no driver call, so no context is needed (steady-state releases). */
    int status = free_to_pool(pool, device, pointer, users, count, 0, &over_cap);
    if (status != DLOP_OK || !over_cap) return status;
    dlop__cuda_scope scope;
    status = get_pool(device, &pool, &scope);
    if (status == DLOP_OK) {
      pthread_mutex_lock(&pool->lock);
      trim_cached_locked(pool);
      pthread_mutex_unlock(&pool->lock);
    }
    return dlop__cuda_restore_after(&scope, status);
  }
  dlop__cuda_scope scope;
  int status = get_pool(device, &pool, &scope);
  if (status == DLOP_OK)
    status = free_to_pool(pool, device, pointer, users, count, 1, &over_cap);
  else
    for (int u = 0; u < count; u++) dlop_stream_destroy(users[u].stream);
  return dlop__cuda_restore_after(&scope, status);
}

int dlop_memory_free(dlop_device device, void *pointer, void *stream) {
  /* A raw CUstream: the pool cannot hold its stream, so the event is recorded at once. */
  pool_user user = {0, (CUstream)stream, NULL, USER_DONE};
  if (device.type == DLOP_DEVICE_CUDA) user.stream_id = dlop__stream_id_of_handle(stream);
  return memory_free(device, pointer, &user, 1);
}

int dlop__memory_free_after(dlop_device device, void *pointer, dlop_stream *const *users,
                            int count) {
  pool_user kept[DLOP__MEMORY_MAX_USERS];
  int n = 0;
  for (int i = 0; i < count; i++) {
    if (users[i] == NULL) continue;
    if (n == DLOP__MEMORY_MAX_USERS) {
      /* More users than events: wait for this one now (correct, and rare). */
      if (dlop_stream_synchronize(users[i]) != DLOP_OK)
        dlop__warn("freeing %p: waiting for a user stream failed: %s", pointer, dlop_last_error());
      continue;
    }
    kept[n].stream_id = dlop__stream_id(users[i]);
    kept[n].handle = (CUstream)dlop_stream_handle(users[i]);
    kept[n].state = USER_LAZY;
    /* A CPU "stream" has no work to wait for; a CUDA one is held until its event is recorded. */
    kept[n].stream = NULL;
    if (device.type == DLOP_DEVICE_CUDA && kept[n].handle != NULL) {
      dlop__stream_retain(users[i]);
      kept[n].stream = users[i];
    }
    n++;
  }
  return memory_free(device, pointer, kept, n);
}

int dlop_memory_stats_get(dlop_device device, dlop_memory_stats *stats) {
  if (stats == NULL)
    return dlop__error(DLOP_INVALID_ARGUMENT, "dlop_memory_stats_get: stats is NULL");
  uint32_t wanted = stats->struct_size;
  memory_pool *pool;
  dlop__cuda_scope scope;
  int status = dlop__cuda_restore_after(&scope, get_pool(device, &pool, &scope));
  if (status != DLOP_OK) return status; /* reading counters needs no context */
  dlop_memory_stats result;
  memset(&result, 0, sizeof result);
  result.struct_size = sizeof result;
  pthread_mutex_lock(&pool->lock);
  result.bytes_in_use = atomic_load(&pool->bytes_in_use);
  result.bytes_cached = pool->bytes_cached + (pool == &cpu_pool ? parked_bytes_locked() : 0);
  result.peak_bytes_in_use = atomic_load(&pool->peak_bytes_in_use);
  result.driver_allocations = pool->driver_allocations;
  result.driver_frees = pool->driver_frees;
  pthread_mutex_unlock(&pool->lock);
  /* A caller compiled against an older, shorter struct gets only the fields it knows. */
  size_t size = (wanted >= 8 && wanted < sizeof result) ? wanted : sizeof result;
  result.struct_size = (uint32_t)size;
  memcpy(stats, &result, size);
  return DLOP_OK;
}

int dlop_memory_release_cached(dlop_device device) {
  memory_pool *pool;
  dlop__cuda_scope scope;
  int status = get_pool(device, &pool, &scope);
  if (status == DLOP_OK) {
    pthread_mutex_lock(&pool->lock);
    /* The calling thread's parked blocks go too; other threads' stay with them (only the
     * owner touches its parked list without the lock) and come back at those threads' exit. */
    if (pool == &cpu_pool) unpark_locked(&local_cache);
    release_cached_locked(pool);
    pthread_mutex_unlock(&pool->lock);
  }
  return dlop__cuda_restore_after(&scope, status);
}
