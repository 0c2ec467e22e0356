/* memory_pool.c — caching allocators: one for host memory and one per CUDA device, so that in
 * steady state a repeated call makes no cuMemAlloc / malloc. Sizes are rounded to classes and
 * freed blocks are kept up to a cap on cached bytes; on CUDA a block freed with one user stream
 * is reused at once on that stream, and otherwise only after the events recorded at the free on
 * every stream that used it have completed. */
#include <ctype.h>
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

/* A freed CUDA block may still be used by work on every stream that read or wrote it: one
 * event per such stream, recorded at the free. Identity is the dlop_stream id, never the raw
 * CUstream value (a destroyed stream's handle can come back for a new stream); 0 is "unknown"
 * (a plugin's raw CUstream, the default stream), which always waits for the events. */
typedef struct pool_block {
  void *pointer;
  size_t size;                           /* rounded size, what the driver allocated */
  uint64_t stream_id;                    /* sole user at the last free (CUDA), or 0 */
  int num_events;                        /* events recorded at the last free */
  CUevent events[DLOP__MEMORY_MAX_USERS]; /* created when first needed, kept for reuse */
  int event_pending[DLOP__MEMORY_MAX_USERS]; /* recorded, not yet seen complete */
  struct pool_block *next;
} pool_block;

typedef struct memory_pool {
  pthread_mutex_t lock;
  dlop_device device;
  pool_block *cached;                       /* free blocks kept for reuse */
  pool_block *in_use[DLOP_POOL_BUCKETS];    /* handed-out blocks, hashed by pointer */
  uint64_t bytes_in_use, bytes_cached, peak_bytes_in_use, driver_allocations, driver_frees;
  uint64_t max_cached; /* cap on bytes_cached (UINT64_MAX: none); set when the pool is made */
} memory_pool;

static memory_pool cpu_pool = {.lock = PTHREAD_MUTEX_INITIALIZER,
                               .device = {DLOP_DEVICE_CPU, 0}};
static pthread_once_t cpu_pool_once = PTHREAD_ONCE_INIT;
static memory_pool *cuda_pools[DLOP_POOL_MAX_CUDA_DEVICES];
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
  memory_pool *found = cuda_pools[device.id];
  if (found == NULL) {
    found = calloc(1, sizeof *found);
    if (found != NULL) {
      pthread_mutex_init(&found->lock, NULL);
      found->device = device;
      found->max_cached = cap_for(device);
      cuda_pools[device.id] = found;
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
    for (int e = 0; e < DLOP__MEMORY_MAX_USERS; e++) {
      if (block->event_pending[e]) dlop__cuda.cuEventSynchronize(block->events[e]);
      if (block->events[e]) dlop__cuda.cuEventDestroy(block->events[e]);
    }
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

/* May a cached block be handed out for work on the stream with id stream_id now? At once on
 * the block's sole user stream (stream order covers it); otherwise when every event recorded
 * at the free has completed. An event seen complete is remembered, so a later allocation does
 * not query it again; the query stops at the first incomplete event. */
static int block_ready_for(pool_block *block, uint64_t stream_id, int cuda) {
  if (!cuda) return 1;
  if (stream_id != 0 && block->num_events == 1 && block->stream_id == stream_id) return 1;
  for (int e = 0; e < block->num_events; e++) {
    if (!block->event_pending[e]) continue;
    if (dlop__cuda.cuEventQuery(block->events[e]) != DLOP_CUDA_SUCCESS) return 0;
    block->event_pending[e] = 0;
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
  return block;
}

static int alloc_from_pool(memory_pool *pool, dlop_device device, size_t bytes,
                           uint64_t stream_id, void **pointer) {
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
      uint64_t in_use = pool->bytes_in_use;
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
  size_t bucket = bucket_of(block->pointer);
  block->next = pool->in_use[bucket];
  pool->in_use[bucket] = block;
  pool->bytes_in_use += block->size;
  if (pool->bytes_in_use > pool->peak_bytes_in_use) pool->peak_bytes_in_use = pool->bytes_in_use;
  *pointer = block->pointer;
  pthread_mutex_unlock(&pool->lock);
  return DLOP_OK;
}

/* The host pool without get_pool's context scope: every CPU call allocates its outputs here. */
static memory_pool *host_pool(void) {
  pthread_once(&cpu_pool_once, init_cpu_pool);
  return &cpu_pool;
}

static int memory_alloc(dlop_device device, size_t bytes, uint64_t stream_id, void **pointer) {
  if (pointer == NULL)
    return dlop__error(DLOP_INVALID_ARGUMENT, "dlop_memory_alloc: pointer is NULL");
  *pointer = NULL;
  if (device.type == DLOP_DEVICE_CPU) /* get_pool also serves every CPU id from this pool */
    return alloc_from_pool(host_pool(), device, bytes, stream_id, pointer);
  memory_pool *pool;
  dlop__cuda_scope scope;
  int status = get_pool(device, &pool, &scope);
  if (status == DLOP_OK) status = alloc_from_pool(pool, device, bytes, stream_id, pointer);
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

/* Record one event per user stream (handles[i], ids[i]); with none, on the default stream.
 * Where an event cannot be made, wait for that stream instead, which is always correct. */
static void mark_free_locked(pool_block *block, const CUstream *handles, const uint64_t *ids,
                             int count) {
  CUstream none = NULL;
  uint64_t unknown = 0;
  if (count == 0) {
    handles = &none;
    ids = &unknown;
    count = 1;
  }
  block->num_events = 0;
  block->stream_id = count == 1 ? ids[0] : 0;
  for (int e = 0; e < DLOP__MEMORY_MAX_USERS; e++) block->event_pending[e] = 0;
  for (int i = 0; i < count; i++) {
    int e = block->num_events;
    CUresult result = DLOP_CUDA_ERROR_OUT_OF_MEMORY;
    if (e < DLOP__MEMORY_MAX_USERS) {
      result = DLOP_CUDA_SUCCESS;
      if (block->events[e] == NULL)
        result = dlop__cuda.cuEventCreate(&block->events[e], DLOP_CU_EVENT_DISABLE_TIMING);
      if (result == DLOP_CUDA_SUCCESS) result = dlop__cuda.cuEventRecord(block->events[e], handles[i]);
    }
    if (result == DLOP_CUDA_SUCCESS) {
      block->event_pending[e] = 1;
      block->num_events++;
    } else {
      dlop__cuda.cuStreamSynchronize(handles[i]);
    }
  }
  /* A waited-for sole stream leaves no event: the block is free for every stream. */
  if (block->num_events == 0) block->stream_id = 0;
}

static int free_to_pool(memory_pool *pool, dlop_device device, void *pointer,
                        const CUstream *handles, const uint64_t *ids, int count) {
  pthread_mutex_lock(&pool->lock);
  pool_block **link = &pool->in_use[bucket_of(pointer)];
  while (*link && (*link)->pointer != pointer) link = &(*link)->next;
  pool_block *block = *link;
  if (block == NULL) {
    pthread_mutex_unlock(&pool->lock);
    char where[32];
    format_device(device, where, sizeof where);
    return dlop__error(DLOP_INVALID_ARGUMENT,
                       "dlop_memory_free: %p was not allocated by the dlop pool of %s (or was "
                       "freed already)",
                       pointer, where);
  }
  *link = block->next;
  pool->bytes_in_use -= block->size;

  /* Mark where the work using the block ends, so other streams can tell when it is free. */
  if (device.type == DLOP_DEVICE_CUDA) mark_free_locked(block, handles, ids, count);
  block->next = pool->cached;
  pool->cached = block;
  pool->bytes_cached += block->size;
  trim_cached_locked(pool);
  pthread_mutex_unlock(&pool->lock);
  return DLOP_OK;
}

static int memory_free(dlop_device device, void *pointer, const CUstream *handles,
                       const uint64_t *ids, int count) {
  if (pointer == NULL) return DLOP_OK;
  if (device.type == DLOP_DEVICE_CPU) /* get_pool also serves every CPU id from this pool */
    return free_to_pool(host_pool(), device, pointer, handles, ids, count);
  memory_pool *pool;
  dlop__cuda_scope scope;
  int status = get_pool(device, &pool, &scope);
  if (status == DLOP_OK) status = free_to_pool(pool, device, pointer, handles, ids, count);
  return dlop__cuda_restore_after(&scope, status);
}

int dlop_memory_free(dlop_device device, void *pointer, void *stream) {
  CUstream handle = (CUstream)stream;
  uint64_t id = device.type == DLOP_DEVICE_CUDA ? dlop__stream_id_of_handle(stream) : 0;
  return memory_free(device, pointer, &handle, &id, 1);
}

int dlop__memory_free_after(dlop_device device, void *pointer, dlop_stream *const *users,
                            int count) {
  CUstream handles[DLOP__MEMORY_MAX_USERS];
  uint64_t ids[DLOP__MEMORY_MAX_USERS];
  int n = 0;
  for (int i = 0; i < count; i++) {
    if (users[i] == NULL) continue;
    if (n == DLOP__MEMORY_MAX_USERS) {
      /* More users than events: wait for this one now (correct, and rare). */
      if (dlop_stream_synchronize(users[i]) != DLOP_OK)
        dlop__warn("freeing %p: waiting for a user stream failed: %s", pointer, dlop_last_error());
      continue;
    }
    handles[n] = (CUstream)dlop_stream_handle(users[i]);
    ids[n] = dlop__stream_id(users[i]);
    n++;
  }
  return memory_free(device, pointer, handles, ids, n);
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
  result.bytes_in_use = pool->bytes_in_use;
  result.bytes_cached = pool->bytes_cached;
  result.peak_bytes_in_use = pool->peak_bytes_in_use;
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
    release_cached_locked(pool);
    pthread_mutex_unlock(&pool->lock);
  }
  return dlop__cuda_restore_after(&scope, status);
}
