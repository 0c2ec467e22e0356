/* cuda_timer.c — dlopen'd CUDA driver entry points for timing with events and for the copy
 * that sets the bandwidth ceiling. Every return code is checked and named in the message. */
#include "cuda_timer.h"

#include <dlfcn.h>
#include <stdio.h>

typedef int cu_result;
typedef unsigned long long cu_deviceptr;

static struct {
  void *library;
  int device;
  int context_retained;
  cu_result (*init)(unsigned);
  cu_result (*device_get)(int *, int);
  cu_result (*primary_retain)(void **, int);
  cu_result (*primary_release)(int);
  cu_result (*context_set_current)(void *);
  cu_result (*event_create)(void **, unsigned);
  cu_result (*event_destroy)(void *);
  cu_result (*event_record)(void *, void *);
  cu_result (*event_synchronize)(void *);
  cu_result (*event_elapsed)(float *, void *, void *);
  cu_result (*memcpy_dtod_async)(cu_deviceptr, cu_deviceptr, size_t, void *);
  cu_result (*memset_d8_async)(cu_deviceptr, unsigned char, size_t, void *);
  cu_result (*stream_synchronize)(void *);
  cu_result (*memory_info)(size_t *, size_t *);
  cu_result (*error_name)(cu_result, const char **);
} cu;

static int fail(cu_result result, const char *what, char *error, size_t error_size) {
  const char *name = "unknown";
  if (cu.error_name == NULL || cu.error_name(result, &name) != 0 || name == NULL) name = "unknown";
  snprintf(error, error_size, "%s failed: %s (%d)", what, name, result);
  return -1;
}

#define CU_CHECK(call, what)                                   \
  do {                                                         \
    cu_result result_ = (call);                                \
    if (result_ != 0) return fail(result_, what, error, error_size); \
  } while (0)

static void *symbol(const char *name, int *missing, char *error, size_t error_size) {
  void *p = dlsym(cu.library, name);
  if (p == NULL && !*missing) {
    snprintf(error, error_size, "libcuda.so.1 has no symbol %s (driver too old?)", name);
    *missing = 1;
  }
  return p;
}

int cuda_timer_init(int device_id, char *error, size_t error_size) {
  int missing = 0, device = 0;
  void *context = NULL;
  if (cu.library == NULL) {
    cu.library = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (cu.library == NULL) {
      snprintf(error, error_size, "cannot load libcuda.so.1 (no NVIDIA driver?): %s", dlerror());
      return -1;
    }
  }
  *(void **)&cu.init = symbol("cuInit", &missing, error, error_size);
  *(void **)&cu.device_get = symbol("cuDeviceGet", &missing, error, error_size);
  *(void **)&cu.primary_retain = symbol("cuDevicePrimaryCtxRetain", &missing, error, error_size);
  *(void **)&cu.primary_release = symbol("cuDevicePrimaryCtxRelease_v2", &missing, error, error_size);
  *(void **)&cu.context_set_current = symbol("cuCtxSetCurrent", &missing, error, error_size);
  *(void **)&cu.event_create = symbol("cuEventCreate", &missing, error, error_size);
  *(void **)&cu.event_destroy = symbol("cuEventDestroy_v2", &missing, error, error_size);
  *(void **)&cu.event_record = symbol("cuEventRecord", &missing, error, error_size);
  *(void **)&cu.event_synchronize = symbol("cuEventSynchronize", &missing, error, error_size);
  *(void **)&cu.event_elapsed = symbol("cuEventElapsedTime", &missing, error, error_size);
  *(void **)&cu.memcpy_dtod_async = symbol("cuMemcpyDtoDAsync_v2", &missing, error, error_size);
  *(void **)&cu.memset_d8_async = symbol("cuMemsetD8Async", &missing, error, error_size);
  *(void **)&cu.stream_synchronize = symbol("cuStreamSynchronize", &missing, error, error_size);
  *(void **)&cu.memory_info = symbol("cuMemGetInfo_v2", &missing, error, error_size);
  *(void **)&cu.error_name = symbol("cuGetErrorName", &missing, error, error_size);
  if (missing) return -1;
  CU_CHECK(cu.init(0), "cuInit");
  CU_CHECK(cu.device_get(&device, device_id), "cuDeviceGet");
  CU_CHECK(cu.primary_retain(&context, device), "cuDevicePrimaryCtxRetain");
  cu.device = device;
  cu.context_retained = 1;
  CU_CHECK(cu.context_set_current(context), "cuCtxSetCurrent");
  return 0;
}

void cuda_timer_shutdown(void) {
  if (cu.context_retained) cu.primary_release(cu.device);
  cu.context_retained = 0;
}

int cuda_event_pair_create(void *events[2], char *error, size_t error_size) {
  events[0] = events[1] = NULL;
  CU_CHECK(cu.event_create(&events[0], 0), "cuEventCreate");
  CU_CHECK(cu.event_create(&events[1], 0), "cuEventCreate");
  return 0;
}

void cuda_event_pair_destroy(void *events[2]) {
  int i;
  for (i = 0; i < 2; i++)
    if (events[i] != NULL) cu.event_destroy(events[i]);
  events[0] = events[1] = NULL;
}

int cuda_event_record(void *event, void *stream, char *error, size_t error_size) {
  CU_CHECK(cu.event_record(event, stream), "cuEventRecord");
  return 0;
}

int cuda_event_elapsed_ms(void *start, void *end, float *ms, char *error, size_t error_size) {
  CU_CHECK(cu.event_synchronize(end), "cuEventSynchronize");
  CU_CHECK(cu.event_elapsed(ms, start, end), "cuEventElapsedTime");
  return 0;
}

int cuda_copy_device_to_device(void *destination, const void *source, size_t bytes, void *stream,
                               char *error, size_t error_size) {
  CU_CHECK(cu.memcpy_dtod_async((cu_deviceptr)(uintptr_t)destination,
                                (cu_deviceptr)(uintptr_t)source, bytes, stream),
           "cuMemcpyDtoDAsync");
  return 0;
}

int cuda_memset_bytes(void *destination, uint8_t value, size_t bytes, void *stream, char *error,
                      size_t error_size) {
  CU_CHECK(cu.memset_d8_async((cu_deviceptr)(uintptr_t)destination, value, bytes, stream),
           "cuMemsetD8Async");
  return 0;
}

int cuda_stream_wait(void *stream, char *error, size_t error_size) {
  CU_CHECK(cu.stream_synchronize(stream), "cuStreamSynchronize");
  return 0;
}

int cuda_memory_info(size_t *free_bytes, size_t *total_bytes, char *error, size_t error_size) {
  CU_CHECK(cu.memory_info(free_bytes, total_bytes), "cuMemGetInfo");
  return 0;
}
