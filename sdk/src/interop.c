/* interop.c — ordering dlop's CUDA work with other libraries' streams (DLPack's stream argument,
 * __cuda_array_interface__'s "stream"): one event recorded on one side, waited for on the other,
 * so neither the host nor the other library's stream ever blocks; and stream markers, which let
 * a caller hand borrowed memory back once the work that read it is done, without waiting. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

#include "cuda_driver.h"
#include "internal.h"

#define DLOP__CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL 9

/* Two driver entry points the rest of libdlop does not need, resolved here from the libcuda
 * that dlop__cuda_ensure already loaded (RTLD_NOLOAD: never a second copy). */
static struct {
  pthread_once_t once;
  CUresult (*cuStreamWaitEvent)(CUstream stream, CUevent event, unsigned int flags);
  CUresult (*cuPointerGetAttribute)(void *data, int attribute, CUdeviceptr pointer);
} interop = {PTHREAD_ONCE_INIT, NULL, NULL};

static void resolve_interop(void) {
  void *library = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  if (library == NULL) return;
  *(void **)&interop.cuStreamWaitEvent = dlsym(library, "cuStreamWaitEvent");
  *(void **)&interop.cuPointerGetAttribute = dlsym(library, "cuPointerGetAttribute");
  /* The handle keeps a reference the library already holds; nothing to close. */
}

static int ensure_interop(const char *what) {
  int status = dlop__cuda_ensure();
  if (status != DLOP_OK) return status;
  pthread_once(&interop.once, resolve_interop);
  if (interop.cuStreamWaitEvent == NULL || interop.cuPointerGetAttribute == NULL)
    return dlop__error(DLOP_NO_DEVICE,
                       "%s: libcuda.so.1 lacks cuStreamWaitEvent or cuPointerGetAttribute "
                       "(expected in every CUDA driver since 4.0)", what);
  return DLOP_OK;
}

/* Record an event on `from` and make `to` wait for it, in the current context. The event is
 * destroyed at once: the driver keeps it alive until the wait has been satisfied. */
static int chain_streams(CUstream from, CUstream to, const char *what) {
  CUevent event = NULL;
  CUresult result = dlop__cuda.cuEventCreate(&event, DLOP_CU_EVENT_DISABLE_TIMING);
  if (result != DLOP_CUDA_SUCCESS) return dlop__cuda_fail(result, "cuEventCreate");
  int status = DLOP_OK;
  result = dlop__cuda.cuEventRecord(event, from);
  if (result != DLOP_CUDA_SUCCESS) {
    status = dlop__cuda_fail(result, what);
  } else {
    result = interop.cuStreamWaitEvent(to, event, 0);
    if (result != DLOP_CUDA_SUCCESS) status = dlop__cuda_fail(result, "cuStreamWaitEvent");
  }
  result = dlop__cuda.cuEventDestroy(event);
  if (result != DLOP_CUDA_SUCCESS && status == DLOP_OK)
    status = dlop__cuda_fail(result, "cuEventDestroy");
  return status;
}

int dlop_array_wait_on_stream(const dlop_array *array, void *consumer_stream) {
  if (array == NULL)
    return dlop__error(DLOP_INVALID_ARGUMENT, "dlop_array_wait_on_stream: array is NULL");
  if (consumer_stream == NULL)
    return dlop__error(DLOP_INVALID_ARGUMENT,
                       "dlop_array_wait_on_stream: consumer stream is NULL (expected a CUstream, "
                       "1 for the legacy default stream or 2 for the per-thread default stream)");
  dlop_device device = dlop_array_device(array);
  if (device.type != DLOP_DEVICE_CUDA) return DLOP_OK;
  dlop_stream *pending = dlop_array_stream(array);
  void *producer = pending ? dlop_stream_handle(pending) : NULL;
  if (producer == NULL || producer == consumer_stream) return DLOP_OK;
  int status = ensure_interop("dlop_array_wait_on_stream");
  if (status != DLOP_OK) return status;
  dlop__cuda_scope scope;
  status = dlop__cuda_use_device(device.id, &scope);
  if (status != DLOP_OK) return status;
  status = chain_streams((CUstream)producer, (CUstream)consumer_stream,
                         "cuEventRecord on the array's stream");
  return dlop__cuda_restore_after(&scope, status);
}

int dlop_array_record_write(dlop_array *array, dlop_stream *stream) {
  if (array == NULL || stream == NULL)
    return dlop__error(DLOP_INVALID_ARGUMENT, "dlop_array_record_write: %s is NULL",
                       array == NULL ? "array" : "stream");
  dlop_device device = dlop_array_device(array), on = dlop_stream_device(stream);
  if (device.type != on.type || device.id != on.id) {
    char array_on[32], stream_on[32];
    return dlop__error(DLOP_INVALID_ARGUMENT,
                       "dlop_array_record_write: the array is on %s but the stream on %s "
                       "(expected a stream of the array's device)",
                       dlop_device_format(device, array_on, sizeof array_on),
                       dlop_device_format(on, stream_on, sizeof stream_on));
  }
  if (device.type == DLOP_DEVICE_CUDA) dlop__array_set_stream(array, stream);
  return DLOP_OK;
}

int dlop_stream_wait_foreign(dlop_stream *stream, void *producer_stream) {
  if (stream == NULL)
    return dlop__error(DLOP_INVALID_ARGUMENT, "dlop_stream_wait_foreign: stream is NULL");
  void *handle = dlop_stream_handle(stream);
  if (handle == NULL || handle == producer_stream) return DLOP_OK; /* CPU: work is synchronous */
  if (producer_stream == NULL)
    return dlop__error(DLOP_INVALID_ARGUMENT,
                       "dlop_stream_wait_foreign: producer stream is NULL (expected a CUstream, "
                       "1 for the legacy default stream or 2 for the per-thread default stream)");
  int status = ensure_interop("dlop_stream_wait_foreign");
  if (status != DLOP_OK) return status;
  dlop__cuda_scope scope;
  status = dlop__cuda_use_device(dlop_stream_device(stream).id, &scope);
  if (status != DLOP_OK) return status;
  status = chain_streams((CUstream)producer_stream, (CUstream)handle,
                         "cuEventRecord on the foreign stream");
  return dlop__cuda_restore_after(&scope, status);
}

int dlop_cuda_pointer_device(const void *pointer, int32_t *device_id) {
  if (device_id == NULL)
    return dlop__error(DLOP_INVALID_ARGUMENT, "dlop_cuda_pointer_device: device_id is NULL");
  *device_id = -1;
  int status = ensure_interop("dlop_cuda_pointer_device");
  if (status != DLOP_OK) return status;
  int ordinal = -1;
  CUresult result = interop.cuPointerGetAttribute(&ordinal, DLOP__CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
                                                  (CUdeviceptr)(uintptr_t)pointer);
  if (result != DLOP_CUDA_SUCCESS)
    return dlop__error(DLOP_INVALID_ARGUMENT,
                       "dlop_cuda_pointer_device: %p is not CUDA device memory the driver knows "
                       "(cuPointerGetAttribute: %s)", pointer, dlop__cuda_result_text(result));
  *device_id = ordinal;
  return DLOP_OK;
}

/* ---- stream markers --------------------------------------------------------------------- */

/* A point in a stream's work: a CUDA event recorded there (NULL event: a CPU stream, whose
 * work is synchronous, so the marker is complete at once). */
struct dlop_stream_marker {
  dlop_device device;
  CUevent event;
  struct dlop_stream_marker *next; /* in the cache of destroyed markers */
};

/* Destroyed markers keep their events for the next record on the same device, so a marker per
 * call (the Python front end records one per foreign CUDA input) costs no cuEventCreate. */
#define MARKER_CACHE_MAX 64
static struct {
  pthread_mutex_t lock;
  dlop_stream_marker *head;
  int count;
} marker_cache = {PTHREAD_MUTEX_INITIALIZER, NULL, 0};

static dlop_stream_marker *take_cached_marker(dlop_device device) {
  pthread_mutex_lock(&marker_cache.lock);
  dlop_stream_marker **link = &marker_cache.head;
  while (*link && ((*link)->device.type != device.type || (*link)->device.id != device.id))
    link = &(*link)->next;
  dlop_stream_marker *found = *link;
  if (found) {
    *link = found->next;
    marker_cache.count--;
  }
  pthread_mutex_unlock(&marker_cache.lock);
  return found;
}

/* Destroy the marker's event in its device's context (for a marker the cache cannot keep). */
static void destroy_marker_event(dlop_stream_marker *marker) {
  if (marker->event == NULL) return;
  dlop__cuda_scope scope;
  if (dlop__cuda_use_device(marker->device.id, &scope) != DLOP_OK) {
    dlop__warn("destroying a stream marker: %s", dlop_last_error());
    return;
  }
  CUresult result = dlop__cuda.cuEventDestroy(marker->event);
  if (result != DLOP_CUDA_SUCCESS)
    dlop__warn("destroying a stream marker: cuEventDestroy: %s", dlop__cuda_result_text(result));
  (void)dlop__cuda_restore_context(&scope);
  marker->event = NULL;
}

int dlop_stream_marker_record(dlop_stream *stream, dlop_stream_marker **marker) {
  if (marker == NULL)
    return dlop__error(DLOP_INVALID_ARGUMENT, "dlop_stream_marker_record: marker is NULL");
  *marker = NULL;
  if (stream == NULL)
    return dlop__error(DLOP_INVALID_ARGUMENT, "dlop_stream_marker_record: stream is NULL");
  dlop_device device = dlop_stream_device(stream);
  void *handle = dlop_stream_handle(stream);
  dlop_stream_marker *created = handle ? take_cached_marker(device) : NULL;
  if (created == NULL) {
    created = calloc(1, sizeof *created);
    if (created == NULL)
      return dlop__error(DLOP_OUT_OF_MEMORY, "dlop_stream_marker_record: no memory for a marker");
    created->device = device;
  }
  if (handle == NULL) { /* the CPU: nothing is ever pending */
    *marker = created;
    return DLOP_OK;
  }
  int status = dlop__cuda_ensure();
  if (status != DLOP_OK) {
    dlop_stream_marker_destroy(created);
    return status;
  }
  dlop__cuda_scope scope;
  status = dlop__cuda_use_device(device.id, &scope);
  if (status != DLOP_OK) {
    dlop_stream_marker_destroy(created);
    return status;
  }
  CUresult result = DLOP_CUDA_SUCCESS;
  if (created->event == NULL) {
    result = dlop__cuda.cuEventCreate(&created->event, DLOP_CU_EVENT_DISABLE_TIMING);
    if (result != DLOP_CUDA_SUCCESS) {
      created->event = NULL;
      status = dlop__cuda_fail(result, "dlop_stream_marker_record: cuEventCreate");
    }
  }
  if (status == DLOP_OK) {
    result = dlop__cuda.cuEventRecord(created->event, (CUstream)handle);
    if (result != DLOP_CUDA_SUCCESS)
      status = dlop__cuda_fail(result, "dlop_stream_marker_record: cuEventRecord");
  }
  status = dlop__cuda_restore_after(&scope, status);
  if (status != DLOP_OK) {
    /* An event whose record failed may be in any state: never cache it. */
    destroy_marker_event(created);
    free(created);
    return status;
  }
  *marker = created;
  return DLOP_OK;
}

int dlop_stream_marker_query(const dlop_stream_marker *marker, int *done) {
  if (done == NULL)
    return dlop__error(DLOP_INVALID_ARGUMENT, "dlop_stream_marker_query: done is NULL");
  *done = 0;
  if (marker == NULL)
    return dlop__error(DLOP_INVALID_ARGUMENT, "dlop_stream_marker_query: marker is NULL");
  if (marker->event == NULL) {
    *done = 1;
    return DLOP_OK;
  }
  dlop__cuda_scope scope;
  int status = dlop__cuda_use_device(marker->device.id, &scope);
  if (status != DLOP_OK) return status;
  CUresult result = dlop__cuda.cuEventQuery(marker->event);
  if (result == DLOP_CUDA_SUCCESS) *done = 1;
  else if (result != DLOP_CUDA_ERROR_NOT_READY)
    status = dlop__cuda_fail(result, "dlop_stream_marker_query: cuEventQuery");
  return dlop__cuda_restore_after(&scope, status);
}

int dlop_stream_marker_wait(const dlop_stream_marker *marker) {
  if (marker == NULL)
    return dlop__error(DLOP_INVALID_ARGUMENT, "dlop_stream_marker_wait: marker is NULL");
  if (marker->event == NULL) return DLOP_OK;
  dlop__cuda_scope scope;
  int status = dlop__cuda_use_device(marker->device.id, &scope);
  if (status != DLOP_OK) return status;
  CUresult result = dlop__cuda.cuEventSynchronize(marker->event);
  if (result != DLOP_CUDA_SUCCESS)
    status = dlop__cuda_fail(result, "dlop_stream_marker_wait: cuEventSynchronize");
  return dlop__cuda_restore_after(&scope, status);
}

dlop_device dlop_stream_marker_device(const dlop_stream_marker *marker) {
  dlop_device none = {DLOP_DEVICE_CPU, 0};
  return marker ? marker->device : none;
}

void dlop_stream_marker_destroy(dlop_stream_marker *marker) {
  if (marker == NULL) return;
  if (marker->event != NULL) {
    /* Re-recording a cached event later is fine even if this record is still pending. */
    pthread_mutex_lock(&marker_cache.lock);
    int kept = marker_cache.count < MARKER_CACHE_MAX;
    if (kept) {
      marker->next = marker_cache.head;
      marker_cache.head = marker;
      marker_cache.count++;
    }
    pthread_mutex_unlock(&marker_cache.lock);
    if (kept) return;
    destroy_marker_event(marker);
  }
  free(marker);
}

int dlop_cuda_stream_wait_stream(int32_t device_id, void *consumer_stream, void *producer_stream) {
  if (consumer_stream == NULL || producer_stream == NULL)
    return dlop__error(DLOP_INVALID_ARGUMENT,
                       "dlop_cuda_stream_wait_stream: the %s stream is NULL (expected a CUstream, "
                       "1 for the legacy default stream or 2 for the per-thread default stream)",
                       consumer_stream == NULL ? "consumer" : "producer");
  if (consumer_stream == producer_stream) return DLOP_OK; /* one queue: already in order */
  int status = ensure_interop("dlop_cuda_stream_wait_stream");
  if (status != DLOP_OK) return status;
  dlop__cuda_scope scope;
  status = dlop__cuda_use_device(device_id, &scope);
  if (status != DLOP_OK) return status;
  status = chain_streams((CUstream)producer_stream, (CUstream)consumer_stream,
                         "cuEventRecord on the producer stream");
  return dlop__cuda_restore_after(&scope, status);
}
