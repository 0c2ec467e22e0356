/* memory_pool.h — the caching allocators' shared parts: blocks, pools, size classes and the
 * in-use table, for the pool's files (memory_pool.c: entry points and what every pool does;
 * memory_pool_host.c: the host pool's per-thread cache; memory_pool_device.c: the CUDA pools
 * and the streams their freed blocks wait for; memory_pool_cap.c: the cap on cached bytes).
 *
 * One pool for host memory and one per CUDA device, so that in steady state a repeated call
 * makes no cuMemAlloc / malloc. Sizes are rounded to classes and freed blocks are kept up to a
 * cap on cached bytes; on CUDA a block freed with one user stream is reused at once on that
 * stream, and another stream gets it only after an event on every stream that used it has
 * completed. Those events are recorded lazily: not at the free (the hot path of every run) but
 * when another stream first asks for the block. Internal. */
#ifndef DLOP_MEMORY_POOL_H
#define DLOP_MEMORY_POOL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "cuda_driver.h"
#include "internal.h"

#define DLOP__POOL_BUCKETS 4096
#define DLOP__POOL_SMALL_LIMIT ((size_t)1 << 20)   /* up to 1 MiB: 512-byte granularity */
#define DLOP__POOL_SMALL_GRANULE ((size_t)512)
#define DLOP__POOL_LARGE_GRANULE ((size_t)2 << 20) /* above: whole 2 MiB chunks */

/* A freed CUDA block may still be used by work on every stream that read or wrote it. Identity
 * is the dlop_stream id, never the raw CUstream value (a destroyed stream's handle can come back
 * for a new stream); 0 is "unknown" (a plugin's raw CUstream, the default stream).
 * A user that is a dlop stream is kept LAZY at the free: the block holds a reference to the
 * stream (so its CUstream stays valid) and records no event. Reuse on that same stream needs
 * nothing (stream order). Only when another stream wants the block, or the block goes back to
 * the driver, is the event recorded on the user's stream: an event recorded later completes
 * after all earlier work on that stream, so waiting for it is conservative and correct. An
 * unknown user (no reference can be held on its stream) gets its event at the free, as before. */
enum { DLOP__USER_DONE = 0, DLOP__USER_LAZY = 1, DLOP__USER_PENDING = 2 };

typedef struct dlop__pool_user {
  uint64_t stream_id;  /* 0: unknown */
  CUstream handle;
  dlop_stream *stream; /* LAZY: a reference, dropped once the event is recorded */
  int state;           /* DLOP__USER_DONE, _LAZY or _PENDING (event recorded, not seen done) */
} dlop__pool_user;

typedef struct dlop__pool_block {
  void *pointer;
  size_t size;                            /* rounded size, what the driver allocated */
  int num_users;                          /* users at the last free (CUDA) */
  dlop__pool_user users[DLOP__MEMORY_MAX_USERS];
  CUevent events[DLOP__MEMORY_MAX_USERS]; /* created when first needed, kept for reuse */
  struct dlop__pool_block *next;
} dlop__pool_block;

typedef struct dlop__memory_pool {
  pthread_mutex_t lock;
  dlop_device device;
  dlop__pool_block *cached;                  /* free blocks kept for reuse */
  dlop__pool_block *in_use[DLOP__POOL_BUCKETS]; /* handed-out blocks, hashed by pointer */
  /* Atomic: the host pool's per-thread caches hand blocks out and take them back without the
   * lock. bytes_cached counts the shared list (under the lock); a host thread's parked blocks
   * are counted in its cache and added by dlop_memory_stats_get. */
  _Atomic uint64_t bytes_in_use, peak_bytes_in_use;
  uint64_t bytes_cached, driver_allocations, driver_frees;
  uint64_t max_cached; /* cap on bytes_cached (UINT64_MAX: none); set when the pool is made */
} dlop__memory_pool;

/* ---- small steps of every pool's hot path (static inline: called on every alloc or free) -- */

/* The size class of a request: what the driver is asked for (0: too large). */
static inline size_t dlop__pool_round_size(size_t bytes) {
  if (bytes == 0) bytes = 1; /* a zero-byte request still gets a unique, freeable pointer */
  size_t granule =
      bytes <= DLOP__POOL_SMALL_LIMIT ? DLOP__POOL_SMALL_GRANULE : DLOP__POOL_LARGE_GRANULE;
  if (bytes > SIZE_MAX - granule) return 0;
  return (bytes + granule - 1) / granule * granule;
}

static inline size_t dlop__pool_bucket_of(const void *pointer) {
  uintptr_t key = (uintptr_t)pointer >> 6;
  key ^= key >> 17;
  key *= (uintptr_t)0x9E3779B97F4A7C15ull;
  return (size_t)(key >> 20) % DLOP__POOL_BUCKETS;
}

/* In-use bytes up, and the peak with them (exact under concurrency: the peak sees every
 * total that fetch_add produced). */
static inline void dlop__pool_count_in_use(dlop__memory_pool *pool, uint64_t size) {
  uint64_t now = atomic_fetch_add_explicit(&pool->bytes_in_use, size, memory_order_relaxed) + size;
  uint64_t peak = atomic_load_explicit(&pool->peak_bytes_in_use, memory_order_relaxed);
  while (now > peak && !atomic_compare_exchange_weak_explicit(&pool->peak_bytes_in_use, &peak, now,
                                                              memory_order_relaxed,
                                                              memory_order_relaxed)) {
  }
}

/* Enter a handed-out block in the in-use table. Lock held. */
static inline void dlop__pool_track_locked(dlop__memory_pool *pool, dlop__pool_block *block) {
  size_t bucket = dlop__pool_bucket_of(block->pointer);
  block->next = pool->in_use[bucket];
  pool->in_use[bucket] = block;
}

/* The in-use table's block behind pointer, taken out of the table (NULL: not there). Lock held. */
static inline dlop__pool_block *dlop__pool_untrack_locked(dlop__memory_pool *pool,
                                                          const void *pointer) {
  dlop__pool_block **link = &pool->in_use[dlop__pool_bucket_of(pointer)];
  while (*link && (*link)->pointer != pointer) link = &(*link)->next;
  dlop__pool_block *block = *link;
  if (block != NULL) *link = block->next;
  return block;
}

/* A free block onto the shared cached list (the caller trims it to the cap). Lock held. */
static inline void dlop__pool_cache_locked(dlop__memory_pool *pool, dlop__pool_block *block) {
  block->next = pool->cached;
  pool->cached = block;
  pool->bytes_cached += block->size;
}

/* The functions below are hidden (internal to libdlop): the pool's files call each other on
 * every alloc and free, and hidden calls are direct, not through the PLT, and may be inlined,
 * as when all of this was one file's static functions. */
#pragma GCC visibility push(hidden)

/* ---- every pool (memory_pool.c) -------------------------------------------------------- */

/* A block of at least bytes for work on the stream with id stream_id (0 on the host): a cached
 * one that fits and is ready for that stream, or a new one from the driver. Counted in use, and
 * entered in the in-use table when track is set (the host pool's per-thread cache keeps the
 * blocks it hands out itself). On CUDA the device's context is current. */
int dlop__pool_take(dlop__memory_pool *pool, dlop_device device, size_t bytes, uint64_t stream_id,
                    int track, dlop__pool_block **block);
/* Give the largest cached blocks back until the cache is within the pool's cap. Lock held; on
 * CUDA the device's context is current. */
void dlop__pool_trim_locked(dlop__memory_pool *pool);
/* The error of a free whose pointer no pool of device handed out (DLOP_INVALID_ARGUMENT). */
int dlop__pool_not_allocated(dlop_device device, const void *pointer);

/* ---- the host pool (memory_pool_host.c) ------------------------------------------------- */

dlop__memory_pool *dlop__host_pool(void);
int dlop__host_pool_alloc(dlop_device device, size_t bytes, void **pointer);
int dlop__host_pool_free(dlop_device device, void *pointer);
/* Every thread's parked (freed, kept per thread) bytes. Host pool lock held. */
uint64_t dlop__host_pool_parked_bytes_locked(void);
/* The calling thread's parked blocks to the shared cached list. Host pool lock held. */
void dlop__host_pool_unpark_mine_locked(void);

/* ---- the CUDA pools (memory_pool_device.c) ---------------------------------------------- */

/* The pool of a CUDA device (any device type but the CPU: others are refused with a message).
 * The device's context is made current for the caller's scope (nothing changes when it already
 * is, as inside a function run). Whatever the status, the caller ends with
 * dlop__cuda_restore_after(scope, ...), so its own context comes back. */
int dlop__device_pool_get(dlop_device device, dlop__memory_pool **pool, dlop__cuda_scope *scope);
/* Free a CUDA block that users[0..count) may still use; takes over their stream references
 * whatever the outcome. */
int dlop__device_pool_free(dlop_device device, void *pointer, const dlop__pool_user *users,
                           int count);
/* Record user u's event on its stream now (or, where that fails, wait for the stream). The
 * device's context is current; the pool lock is held. */
void dlop__device_pool_record_user_event(dlop__pool_block *block, int u);
/* Give a CUDA block's memory back to the driver once the work that last used it is done (its
 * events destroyed); the block itself stays for the caller to free. Lock held, context current. */
void dlop__device_pool_free_memory(dlop__memory_pool *pool, dlop__pool_block *block);

/* ---- the cap on cached bytes (memory_pool_cap.c) ---------------------------------------- */

/* The cap of a new pool of device: DLOP_POOL_MAX_CACHED_BYTES when set, else its default. */
uint64_t dlop__pool_cap_for(dlop_device device);

#pragma GCC visibility pop

#endif
