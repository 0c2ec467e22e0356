/* memory_pool.c — the memory pools' entry points (dlop_memory_*, dlop__memory_alloc_on and
 * dlop__memory_free_after) and what every pool does with its blocks: take a cached one or a new
 * one from the driver, keep freed ones up to the cap, give them back. memory_pool.h says how the
 * pools work; the host's and the CUDA devices' own parts are in memory_pool_host.c and
 * memory_pool_device.c. While this thread captures a run into a CUDA graph, CUDA requests go to
 * the recording's arena instead (cuda_graph_arena.c). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_graph.h"
#include "memory_pool.h"

static void format_device(dlop_device device, char *text, size_t size) {
  if (device.type == DLOP_DEVICE_CUDA) snprintf(text, size, "cuda:%d", (int)device.id);
  else snprintf(text, size, "cpu");
}

/* The device's pool; see dlop__device_pool_get on the scope (nothing to restore on the CPU). */
static int get_pool(dlop_device device, dlop__memory_pool **pool, dlop__cuda_scope *scope) {
  if (device.type != DLOP_DEVICE_CPU) return dlop__device_pool_get(device, pool, scope);
  scope->previous = NULL;
  scope->changed = 0;
  *pool = dlop__host_pool(); /* every CPU id is served from this pool */
  return DLOP_OK;
}

/* ---- blocks from and back to the driver ---------------------------------------------------- */

/* Host blocks of at least this size start half a page into a page of their own. The system
 * allocator puts large blocks 16 bytes past a page boundary (NumPy's arrays too) and 64-byte
 * alignment then put dlop's outputs 48 bytes past their inputs modulo 4 KiB: each vector load
 * then matched the page offset of a store still in flight ("4K aliasing"), which cost a one-
 * thread `-x` over 2^20 float64 22 % on an AMD EPYC (bench/RESULTS.md). Half a page is far from
 * every page offset that common inputs have (0, 16, 64 and this one). */
#define HOST_HALF_PAGE_MIN ((size_t)64 << 10)
#define HOST_PAGE ((size_t)4096)

/* Whether a host block of this (rounded) size starts half a page in: what it was allocated as
 * follows from its size, so freeing it needs nothing else. */
static int host_half_page(size_t size) {
  return size >= HOST_HALF_PAGE_MIN && size <= SIZE_MAX - 2 * HOST_PAGE;
}

/* The driver / system allocator itself. Returns a CUresult-like code: 0 or an error. */
static CUresult driver_alloc(dlop__memory_pool *pool, size_t size, void **pointer) {
  if (pool->device.type == DLOP_DEVICE_CPU) {
    if (!host_half_page(size)) {
      *pointer = aligned_alloc(64, size);
    } else { /* aligned_alloc's size a multiple of its alignment, with room for the half page */
      char *allocation =
          aligned_alloc(HOST_PAGE, (size + HOST_PAGE / 2 + HOST_PAGE - 1) / HOST_PAGE * HOST_PAGE);
      *pointer = allocation ? allocation + HOST_PAGE / 2 : NULL;
    }
    return *pointer ? DLOP_CUDA_SUCCESS : DLOP_CUDA_ERROR_OUT_OF_MEMORY;
  }
  CUdeviceptr address = 0;
  CUresult result = dlop__cuda.cuMemAlloc(&address, size);
  *pointer = (void *)(uintptr_t)address;
  return result;
}

/* Give one cached block back to the driver, after the work that last used it. */
static void driver_free(dlop__memory_pool *pool, dlop__pool_block *block) {
  if (pool->device.type == DLOP_DEVICE_CPU)
    free(host_half_page(block->size) ? (char *)block->pointer - HOST_PAGE / 2 : block->pointer);
  else dlop__device_pool_free_memory(pool, block);
  pool->driver_frees++;
  free(block);
}

/* Called with the lock held. */
static void release_cached_locked(dlop__memory_pool *pool) {
  dlop__pool_block *block = pool->cached;
  pool->cached = NULL;
  while (block) {
    dlop__pool_block *next = block->next;
    pool->bytes_cached -= block->size;
    driver_free(pool, block);
    block = next;
  }
}

/* A block larger than the cap, just freed, goes back at once. Largest first: fewest driver
 * calls, and the small blocks that steady-state loops reuse stay. On CUDA, driver_free waits
 * for the work that last used the block. */
void dlop__pool_trim_locked(dlop__memory_pool *pool) {
  while (pool->bytes_cached > pool->max_cached && pool->cached) {
    dlop__pool_block **largest = &pool->cached;
    for (dlop__pool_block **link = &pool->cached; *link; link = &(*link)->next)
      if ((*link)->size > (*largest)->size) largest = link;
    dlop__pool_block *block = *largest;
    *largest = block->next;
    pool->bytes_cached -= block->size;
    driver_free(pool, block);
  }
}

/* ---- reuse of cached blocks -------------------------------------------------------------- */

/* Drop the stream references a block's users still hold. Called with the pool lock held:
 * dlop_stream_destroy takes only the live-stream lock (never a pool lock), so the order is
 * always pool lock -> live-stream lock; at a stream's last reference it also destroys the
 * CUstream, which the driver defers until the stream's work is done. */
static void drop_user_streams(dlop__pool_block *block) {
  for (int u = 0; u < block->num_users; u++) {
    dlop_stream_destroy(block->users[u].stream);
    block->users[u].stream = NULL;
  }
  block->num_users = 0;
}

/* May a cached block be handed out for work on the stream with id stream_id now? At once on
 * the block's sole user stream (stream order covers it); otherwise when every user's event has
 * completed, recording the lazy ones first. An event seen complete is remembered, so a later
 * allocation does not query it again; the query stops at the first incomplete event. */
static int block_ready_for(dlop__pool_block *block, uint64_t stream_id, int cuda) {
  if (!cuda) return 1;
  if (stream_id != 0 && block->num_users == 1 && block->users[0].stream_id == stream_id) return 1;
  for (int u = 0; u < block->num_users; u++)
    if (block->users[u].state == DLOP__USER_LAZY) dlop__device_pool_record_user_event(block, u);
  for (int u = 0; u < block->num_users; u++) {
    if (block->users[u].state != DLOP__USER_PENDING) continue;
    if (dlop__cuda.cuEventQuery(block->events[u]) != DLOP_CUDA_SUCCESS) return 0;
    block->users[u].state = DLOP__USER_DONE;
  }
  return 1;
}

/* Best fit among ready cached blocks no larger than twice the request. Lock held. */
static dlop__pool_block *take_cached_locked(dlop__memory_pool *pool, size_t size,
                                            uint64_t stream_id) {
  int cuda = pool->device.type == DLOP_DEVICE_CUDA;
  dlop__pool_block **best = NULL;
  for (dlop__pool_block **link = &pool->cached; *link; link = &(*link)->next) {
    dlop__pool_block *block = *link;
    if (block->size < size || block->size / 2 >= size) continue;
    if (best && (*best)->size <= block->size) continue;
    if (!block_ready_for(block, stream_id, cuda)) continue;
    best = link;
    if (block->size == size) break;
  }
  if (!best) return NULL;
  dlop__pool_block *block = *best;
  *best = block->next;
  pool->bytes_cached -= block->size;
  if (cuda) drop_user_streams(block); /* handed out: its old users no longer matter */
  return block;
}

int dlop__pool_take(dlop__memory_pool *pool, dlop_device device, size_t bytes, uint64_t stream_id,
                    int track, dlop__pool_block **taken) {
  char where[32];
  format_device(device, where, sizeof where);
  size_t size = dlop__pool_round_size(bytes);
  if (size == 0)
    return dlop__error(DLOP_OUT_OF_MEMORY, "out of memory: %zu bytes requested on %s is too large",
                       bytes, where);

  pthread_mutex_lock(&pool->lock);
  dlop__pool_block *block = take_cached_locked(pool, size, stream_id);
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
  if (track) dlop__pool_track_locked(pool, block);
  dlop__pool_count_in_use(pool, block->size);
  pthread_mutex_unlock(&pool->lock);
  *taken = block;
  return DLOP_OK;
}

int dlop__pool_not_allocated(dlop_device device, const void *pointer) {
  char where[32];
  format_device(device, where, sizeof where);
  return dlop__error(DLOP_INVALID_ARGUMENT,
                     "dlop_memory_free: %p was not allocated by the dlop pool of %s (or was "
                     "freed already)",
                     pointer, where);
}

/* ---- entry points ---------------------------------------------------------------------- */

/* memory_alloc and memory_free are inline so that each entry point calls the host or the CUDA
 * pool directly: the pool is on the path of every run, and the split into files adds no call. */
static inline int memory_alloc(dlop_device device, size_t bytes, uint64_t stream_id, void **pointer) {
  if (pointer == NULL)
    return dlop__error(DLOP_INVALID_ARGUMENT, "dlop_memory_alloc: pointer is NULL");
  *pointer = NULL;
  if (device.type == DLOP_DEVICE_CPU) return dlop__host_pool_alloc(device, bytes, pointer);
  /* A run being captured into a CUDA graph allocates from the recording's arena. */
  dlop__graph_capture *capture = dlop__graph_capturing;
  if (capture != NULL && !capture->suspended && device.type == DLOP_DEVICE_CUDA &&
      device.id == capture->arena->device.id)
    return dlop__graph_arena_alloc(capture->arena, bytes, stream_id, pointer);
  dlop__memory_pool *pool;
  dlop__pool_block *block;
  dlop__cuda_scope scope;
  int status = get_pool(device, &pool, &scope);
  if (status == DLOP_OK) status = dlop__pool_take(pool, device, bytes, stream_id, 1, &block);
  if (status == DLOP_OK) *pointer = block->pointer;
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

/* Takes over users' stream references whatever the outcome. */
static inline int memory_free(dlop_device device, void *pointer, const dlop__pool_user *users,
                       int count) {
  if (pointer == NULL) {
    for (int u = 0; u < count; u++) dlop_stream_destroy(users[u].stream);
    return DLOP_OK;
  }
  if (device.type == DLOP_DEVICE_CPU) return dlop__host_pool_free(device, pointer);
  dlop__graph_capture *capture = dlop__graph_capturing;
  if (capture != NULL && device.id == capture->arena->device.id &&
      dlop__graph_arena_take_back(capture->arena, pointer)) {
    for (int u = 0; u < count; u++) dlop_stream_destroy(users[u].stream);
    return DLOP_OK;
  }
  return dlop__device_pool_free(device, pointer, users, count);
}

int dlop_memory_free(dlop_device device, void *pointer, void *stream) {
  /* A raw CUstream: the pool cannot hold its stream, so the event is recorded at once. */
  dlop__pool_user user = {0, (CUstream)stream, NULL, DLOP__USER_DONE};
  if (device.type == DLOP_DEVICE_CUDA) user.stream_id = dlop__stream_id_of_handle(stream);
  return memory_free(device, pointer, &user, 1);
}

int dlop__memory_free_after(dlop_device device, void *pointer, dlop_stream *const *users,
                            int count) {
  dlop__pool_user kept[DLOP__MEMORY_MAX_USERS];
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
    kept[n].state = DLOP__USER_LAZY;
    /* A CPU "stream" has no work to wait for; a CUDA one is held until its event is recorded.
     * A wrapped stream cannot be held (its owner may destroy the CUstream at any time): its
     * event is recorded at the free, as for a raw CUstream; its id still allows reuse at once. */
    kept[n].stream = NULL;
    if (device.type == DLOP_DEVICE_CUDA && kept[n].handle != NULL &&
        !dlop_stream_is_wrapped(users[i])) {
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
  dlop__memory_pool *pool;
  dlop__cuda_scope scope;
  int status = dlop__cuda_restore_after(&scope, get_pool(device, &pool, &scope));
  if (status != DLOP_OK) return status; /* reading counters needs no context */
  int host = pool->device.type == DLOP_DEVICE_CPU;
  dlop_memory_stats result;
  memset(&result, 0, sizeof result);
  result.struct_size = sizeof result;
  pthread_mutex_lock(&pool->lock);
  result.bytes_in_use = atomic_load(&pool->bytes_in_use);
  result.bytes_cached = pool->bytes_cached + (host ? dlop__host_pool_parked_bytes_locked() : 0);
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
  dlop__memory_pool *pool;
  dlop__cuda_scope scope;
  int status = get_pool(device, &pool, &scope);
  if (status == DLOP_OK) {
    pthread_mutex_lock(&pool->lock);
    /* The calling thread's parked blocks go too; other threads' stay with them (only the
     * owner touches its parked list without the lock) and come back at those threads' exit. */
    if (pool->device.type == DLOP_DEVICE_CPU) dlop__host_pool_unpark_mine_locked();
    release_cached_locked(pool);
    pthread_mutex_unlock(&pool->lock);
  }
  return dlop__cuda_restore_after(&scope, status);
}
