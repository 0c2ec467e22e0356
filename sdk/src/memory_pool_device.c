/* memory_pool_device.c — the CUDA devices' memory pools (one per device, made at first use)
 * and the streams a freed CUDA block waits for: its users are marked at the free, their events
 * recorded when another stream wants the block, and waited for before the memory goes back to
 * the driver (memory_pool.h says how the pools work). */
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>

#include "memory_pool.h"

#define DLOP_POOL_MAX_CUDA_DEVICES 64

/* Written once under cuda_pools_lock; read without it by frees, which need no context. */
static _Atomic(dlop__memory_pool *) cuda_pools[DLOP_POOL_MAX_CUDA_DEVICES];
static pthread_mutex_t cuda_pools_lock = PTHREAD_MUTEX_INITIALIZER;

int dlop__device_pool_get(dlop_device device, dlop__memory_pool **pool, dlop__cuda_scope *scope) {
  *pool = NULL;
  scope->previous = NULL;
  scope->changed = 0;
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
  dlop__memory_pool *found = atomic_load(&cuda_pools[device.id]);
  if (found == NULL) {
    found = calloc(1, sizeof *found);
    if (found != NULL) {
      pthread_mutex_init(&found->lock, NULL);
      found->device = device;
      found->max_cached = dlop__pool_cap_for(device);
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

/* The pool of a CUDA device that has one, without touching the driver (NULL: none yet). */
static dlop__memory_pool *existing_cuda_pool(dlop_device device) {
  if (device.type != DLOP_DEVICE_CUDA || device.id < 0 || device.id >= DLOP_POOL_MAX_CUDA_DEVICES)
    return NULL;
  return atomic_load(&cuda_pools[device.id]);
}

/* ---- a freed block's user streams ---------------------------------------------------------- */

/* The event completes after everything enqueued on the user's stream so far, the work before
 * the free included. Where no event can be made or recorded, wait for the stream instead,
 * which is always correct. */
void dlop__device_pool_record_user_event(dlop__pool_block *block, int u) {
  dlop__pool_user *user = &block->users[u];
  CUresult result = DLOP_CUDA_SUCCESS;
  if (block->events[u] == NULL)
    result = dlop__cuda.cuEventCreate(&block->events[u], DLOP_CU_EVENT_DISABLE_TIMING);
  if (result == DLOP_CUDA_SUCCESS) result = dlop__cuda.cuEventRecord(block->events[u], user->handle);
  if (result == DLOP_CUDA_SUCCESS) {
    user->state = DLOP__USER_PENDING;
  } else {
    CUresult waited = dlop__cuda.cuStreamSynchronize(user->handle);
    if (waited != DLOP_CUDA_SUCCESS)
      dlop__warn("the pool could neither record an event (%s) nor wait for a stream (%s); the "
                 "block is treated as free", dlop__cuda_result_text(result),
                 dlop__cuda_result_text(waited));
    user->state = DLOP__USER_DONE;
  }
  dlop_stream_destroy(user->stream); /* the event (or the wait) stands for the stream now */
  user->stream = NULL;
}

/* The block's users at this free, taken over from the caller (a LAZY user brings a stream
 * reference). An unknown user (no dlop stream to hold) gets its event now; with no users at
 * all, an event on the default stream. Lock held; for unknown users the context is current. */
static void mark_free_locked(dlop__pool_block *block, const dlop__pool_user *users, int count) {
  static const dlop__pool_user default_stream = {0, NULL, NULL, DLOP__USER_DONE};
  if (count == 0) {
    users = &default_stream;
    count = 1;
  }
  block->num_users = count;
  for (int u = 0; u < count; u++) {
    block->users[u] = users[u];
    block->users[u].state = DLOP__USER_LAZY;
    if (users[u].stream == NULL) dlop__device_pool_record_user_event(block, u);
  }
  /* A sole user whose stream was waited for leaves nothing: the block is free for all. */
  if (count == 1 && block->users[0].state == DLOP__USER_DONE) block->num_users = 0;
}

/* Under the pool lock: this waits only when a block is trimmed or released while work on it is
 * still in flight, which the cap / out-of-memory paths accept as the price of correctness (the
 * memory must not go back to the driver before the work is done). */
void dlop__device_pool_free_memory(dlop__memory_pool *pool, dlop__pool_block *block) {
  for (int u = 0; u < block->num_users; u++) {
    dlop__pool_user *user = &block->users[u];
    if (user->state == DLOP__USER_PENDING) dlop__cuda.cuEventSynchronize(block->events[u]);
    if (user->state == DLOP__USER_LAZY) dlop__cuda.cuStreamSynchronize(user->handle);
    user->state = DLOP__USER_DONE;
    dlop_stream_destroy(user->stream); /* see drop_user_streams (memory_pool.c) on the lock order */
    user->stream = NULL;
  }
  for (int e = 0; e < DLOP__MEMORY_MAX_USERS; e++)
    if (block->events[e]) dlop__cuda.cuEventDestroy(block->events[e]);
  CUresult result = dlop__cuda.cuMemFree((CUdeviceptr)(uintptr_t)block->pointer);
  if (result != DLOP_CUDA_SUCCESS)
    dlop__warn("cuMemFree(%p) on cuda:%d failed: %s", block->pointer, (int)pool->device.id,
               dlop__cuda_result_text(result));
}

/* ---- the free -------------------------------------------------------------------------- */

/* Move a freed block from in-use to the cache. With may_call_driver 0 (a free with only lazy
 * users, which runs without making the device's context current) the cap is not enforced
 * here: *over_cap tells the caller to trim with the context current. */
static int free_to_pool(dlop__memory_pool *pool, dlop_device device, void *pointer,
                        const dlop__pool_user *users, int count, int may_call_driver,
                        int *over_cap) {
  *over_cap = 0;
  pthread_mutex_lock(&pool->lock);
  dlop__pool_block *block = dlop__pool_untrack_locked(pool, pointer);
  if (block == NULL) {
    pthread_mutex_unlock(&pool->lock);
    for (int u = 0; u < count; u++) dlop_stream_destroy(users[u].stream);
    return dlop__pool_not_allocated(device, pointer);
  }
  atomic_fetch_sub_explicit(&pool->bytes_in_use, block->size, memory_order_relaxed);

  /* Mark where the work using the block ends, so other streams can tell when it is free. */
  mark_free_locked(block, users, count);
  dlop__pool_cache_locked(pool, block);
  if (may_call_driver) dlop__pool_trim_locked(pool);
  else *over_cap = pool->bytes_cached > pool->max_cached;
  pthread_mutex_unlock(&pool->lock);
  return DLOP_OK;
}

int dlop__device_pool_free(dlop_device device, void *pointer, const dlop__pool_user *users,
                           int count) {
  int over_cap = 0;
  int lazy = count > 0;
  for (int u = 0; u < count; u++)
    if (users[u].stream == NULL) lazy = 0;
  dlop__memory_pool *pool = existing_cuda_pool(device);
  if (lazy && pool != NULL) {
    /* Only lazy users: no driver call, so no context is needed (steady-state releases). */
    int status = free_to_pool(pool, device, pointer, users, count, 0, &over_cap);
    if (status != DLOP_OK || !over_cap) return status;
    dlop__cuda_scope scope;
    status = dlop__device_pool_get(device, &pool, &scope);
    if (status == DLOP_OK) {
      pthread_mutex_lock(&pool->lock);
      dlop__pool_trim_locked(pool);
      pthread_mutex_unlock(&pool->lock);
    }
    return dlop__cuda_restore_after(&scope, status);
  }
  dlop__cuda_scope scope;
  int status = dlop__device_pool_get(device, &pool, &scope);
  if (status == DLOP_OK)
    status = free_to_pool(pool, device, pointer, users, count, 1, &over_cap);
  else
    for (int u = 0; u < count; u++) dlop_stream_destroy(users[u].stream);
  return dlop__cuda_restore_after(&scope, status);
}
