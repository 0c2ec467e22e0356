/* stream.c — dlop_stream: a non-blocking CUstream on a device's primary context, or on the CPU
 * an object that does nothing (CPU work runs synchronously), so callers need no special case;
 * or a wrapper of a CUstream another library owns (dlop_stream_wrap), never destroyed here. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>

#include "cuda_driver.h"
#include "internal.h"

struct dlop_stream {
  _Atomic int references; /* the creator's, plus one per array with work pending on it */
  dlop_device device;
  CUstream handle; /* NULL on the CPU */
  uint64_t id;     /* never reused: see dlop__stream_id */
  int wrapped;     /* dlop_stream_wrap: the CUstream is borrowed, its owner destroys it */
  struct dlop_stream *next_live; /* in live_streams while it exists */
};

/* Live CUDA streams, so a raw CUstream (from a plugin, through the host table) maps back to its
 * id; a handle of no live dlop stream maps to 0 ("unknown"). */
static pthread_mutex_t live_lock = PTHREAD_MUTEX_INITIALIZER;
static struct dlop_stream *live_streams;

uint64_t dlop__stream_id_of_handle(void *handle) {
  uint64_t id = 0;
  if (handle == NULL) return 0;
  pthread_mutex_lock(&live_lock);
  for (struct dlop_stream *s = live_streams; s; s = s->next_live)
    if (s->handle == handle) {
      id = s->id;
      break;
    }
  pthread_mutex_unlock(&live_lock);
  return id;
}

static _Atomic uint64_t next_stream_id = 1;

uint64_t dlop__stream_id(const dlop_stream *stream) { return stream ? stream->id : 0; }

int dlop_stream_create(dlop_device device, dlop_stream **stream) {
  if (stream == NULL)
    return dlop__error(DLOP_INVALID_ARGUMENT, "dlop_stream_create: stream is NULL");
  *stream = NULL;
  int status = dlop_device_check(device);
  if (status != DLOP_OK) return status;
  dlop_stream *created = calloc(1, sizeof *created);
  if (created == NULL)
    return dlop__error(DLOP_OUT_OF_MEMORY, "dlop_stream_create: out of host memory");
  atomic_init(&created->references, 1);
  created->device = device;
  created->id = atomic_fetch_add_explicit(&next_stream_id, 1, memory_order_relaxed);
  if (device.type == DLOP_DEVICE_CUDA) {
    dlop__cuda_scope scope;
    status = dlop__cuda_use_device(device.id, &scope);
    if (status == DLOP_OK) {
      /* Non-blocking: never serialized with the legacy default stream other libraries use. */
      CUresult result = dlop__cuda.cuStreamCreate(&created->handle, DLOP_CU_STREAM_NON_BLOCKING);
      if (result != DLOP_CUDA_SUCCESS) status = dlop__cuda_fail(result, "cuStreamCreate");
      status = dlop__cuda_restore_after(&scope, status);
    }
    if (status != DLOP_OK) {
      free(created);
      return status;
    }
  }
  if (created->handle != NULL) {
    pthread_mutex_lock(&live_lock);
    created->next_live = live_streams;
    live_streams = created;
    pthread_mutex_unlock(&live_lock);
  }
  *stream = created;
  return DLOP_OK;
}

/* CUDA's legacy and per-thread default streams as DLPack numbers them. */
#define LEGACY_DEFAULT_STREAM ((CUstream)(uintptr_t)1)
#define PER_THREAD_DEFAULT_STREAM ((CUstream)(uintptr_t)2)

/* The foreign stream must be one the device's primary context owns: a kernel launched on
 * another context's stream from dlop's modules would fail, or run on the wrong GPU. */
static int check_foreign_stream(dlop_device device, CUstream handle) {
  if (handle == LEGACY_DEFAULT_STREAM || handle == PER_THREAD_DEFAULT_STREAM) return DLOP_OK;
  CUcontext primary, owner = NULL;
  int status = dlop__cuda_primary_context(device.id, &primary);
  if (status != DLOP_OK) return status;
  CUresult result = dlop__cuda.cuStreamGetCtx(handle, &owner);
  if (result != DLOP_CUDA_SUCCESS)
    return dlop__error(DLOP_INVALID_ARGUMENT,
                       "dlop_stream_wrap: the driver does not know CUstream %p (%s): pass a live "
                       "stream of cuda:%d",
                       (void *)handle, dlop__cuda_result_text(result), (int)device.id);
  if (owner != primary)
    return dlop__error(DLOP_INVALID_ARGUMENT,
                       "dlop_stream_wrap: CUstream %p belongs to another CUDA context than "
                       "cuda:%d's primary context, which dlop's kernels run in",
                       (void *)handle, (int)device.id);
  return DLOP_OK;
}

int dlop_stream_wrap(dlop_device device, void *cuda_stream, dlop_stream **stream) {
  if (stream == NULL)
    return dlop__error(DLOP_INVALID_ARGUMENT, "dlop_stream_wrap: stream is NULL");
  *stream = NULL;
  if (device.type != DLOP_DEVICE_CUDA)
    return dlop__error(DLOP_INVALID_ARGUMENT,
                       "dlop_stream_wrap: device must be a CUDA device (a CPU stream has no "
                       "CUstream to wrap; use dlop_stream_create)");
  if (cuda_stream == NULL)
    return dlop__error(DLOP_INVALID_ARGUMENT,
                       "dlop_stream_wrap: cuda_stream is NULL; for CUDA's default stream pass 1 "
                       "(legacy) or 2 (per-thread), as DLPack does");
  int status = dlop_device_check(device);
  if (status != DLOP_OK) return status;
  status = check_foreign_stream(device, (CUstream)cuda_stream);
  if (status != DLOP_OK) return status;
  dlop_stream *created = calloc(1, sizeof *created);
  if (created == NULL)
    return dlop__error(DLOP_OUT_OF_MEMORY, "dlop_stream_wrap: out of host memory");
  atomic_init(&created->references, 1);
  created->device = device;
  created->handle = (CUstream)cuda_stream;
  created->wrapped = 1;
  created->id = atomic_fetch_add_explicit(&next_stream_id, 1, memory_order_relaxed);
  pthread_mutex_lock(&live_lock);
  created->next_live = live_streams;
  live_streams = created;
  pthread_mutex_unlock(&live_lock);
  *stream = created;
  return DLOP_OK;
}

int dlop_stream_is_wrapped(const dlop_stream *stream) { return stream ? stream->wrapped : 0; }

void dlop__stream_retain(dlop_stream *stream) {
  if (stream) atomic_fetch_add_explicit(&stream->references, 1, memory_order_relaxed);
}

/* Drops a reference: the stream lives on while an array still records work pending on it, so
 * an output outlives the function that made it. */
void dlop_stream_destroy(dlop_stream *stream) {
  if (stream == NULL) return;
  if (atomic_fetch_sub_explicit(&stream->references, 1, memory_order_acq_rel) != 1) return;
  if (stream->handle != NULL) {
    pthread_mutex_lock(&live_lock);
    struct dlop_stream **link = &live_streams;
    while (*link && *link != stream) link = &(*link)->next_live;
    if (*link) *link = stream->next_live;
    pthread_mutex_unlock(&live_lock);
  }
  dlop__cuda_scope scope;
  if (stream->handle != NULL && !stream->wrapped && dlop__cuda_use_device(stream->device.id, &scope) == DLOP_OK) {
    /* Pending work still completes: the driver defers the release until it has. */
    CUresult result = dlop__cuda.cuStreamDestroy(stream->handle);
    if (result != DLOP_CUDA_SUCCESS)
      dlop__warn("cuStreamDestroy failed: %s", dlop__cuda_result_text(result));
    dlop__cuda_restore_context(&scope);
  }
  free(stream);
}

int dlop_stream_synchronize(dlop_stream *stream) {
  if (stream == NULL)
    return dlop__error(DLOP_INVALID_ARGUMENT, "dlop_stream_synchronize: stream is NULL");
  if (stream->handle == NULL) return DLOP_OK;
  dlop__cuda_scope scope;
  int status = dlop__cuda_use_device(stream->device.id, &scope);
  if (status != DLOP_OK) return status;
  CUresult result = dlop__cuda.cuStreamSynchronize(stream->handle);
  if (result != DLOP_CUDA_SUCCESS) status = dlop__cuda_fail(result, "cuStreamSynchronize");
  return dlop__cuda_restore_after(&scope, status);
}

void *dlop_stream_handle(const dlop_stream *stream) { return stream ? stream->handle : NULL; }

dlop_device dlop_stream_device(const dlop_stream *stream) {
  dlop_device cpu = {DLOP_DEVICE_CPU, 0};
  return stream ? stream->device : cpu;
}
