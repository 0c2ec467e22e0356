/* host_api.c — the table of host services libdlop hands every plugin (dlop/host_api.h), and
 * the host-side implementations behind it. They carry dlop__host_ names, never the slot names,
 * so the dynamic linker cannot confuse them with a plugin's symbols. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cuda_driver.h"
#include "cuda_graph.h"
#include "host_services.h"
#include "internal.h"
#include "jit.h"

/* Copy libdlop's last error into a plugin's buffer and pass the status on. */
static int report(int status, char *error, size_t error_size) {
  if (status != DLOP_OK) dlop__format(error, error_size, "%s", dlop_last_error());
  return status;
}

/* ---- logging ------------------------------------------------------------------------------ */

static pthread_once_t log_once = PTHREAD_ONCE_INIT;
static int log_threshold = DLOP_LOG_WARNING;

static void read_log_level(void) {
  static const char *const names[] = {"debug", "info", "warning", "error"};
  const char *text = getenv("DLOP_LOG_LEVEL");
  if (text == NULL || *text == '\0') return;
  for (int i = 0; i < 4; i++)
    if (strcasecmp(text, names[i]) == 0) log_threshold = i;
  if (text[0] >= '0' && text[0] <= '3' && text[1] == '\0') log_threshold = text[0] - '0';
}

static void dlop__host_log(int32_t level, const char *source, const char *message) {
  pthread_once(&log_once, read_log_level);
  if (level < log_threshold) return;
  fprintf(stderr, "dlop[%s]: %s\n", source ? source : "?", message ? message : "");
}

/* ---- memory ------------------------------------------------------------------------------- */

static int dlop__host_memory_alloc(dlop_device device, size_t bytes, void *stream, void **pointer,
                                   char *error, size_t error_size) {
  return report(dlop_memory_alloc(device, bytes, stream, pointer), error, error_size);
}

static int dlop__host_memory_free(dlop_device device, void *pointer, void *stream) {
  return dlop_memory_free(device, pointer, stream);
}

/* ---- CUDA modules: one load per (device, image), reference counted ----------------------- */

typedef struct module_entry {
  int32_t device_id;
  const void *image;
  CUmodule module;
  int references;
  struct module_entry *next;
} module_entry;

static pthread_mutex_t modules_lock = PTHREAD_MUTEX_INITIALIZER;
static module_entry *modules;

static module_entry *find_module_locked(CUmodule module) {
  for (module_entry *entry = modules; entry; entry = entry->next)
    if (entry->module == module) return entry;
  return NULL;
}

/* Take a reference to image's module on device_id when it is loaded; 1 when it was. */
static int reference_loaded_locked(int32_t device_id, const void *image, void **module) {
  for (module_entry *entry = modules; entry; entry = entry->next) {
    if (entry->device_id == device_id && entry->image == image) {
      entry->references++;
      *module = entry->module;
      return 1;
    }
  }
  return 0;
}

static int load_module(int32_t device_id, const void *image, void **module);

static int dlop__host_cuda_module_load(int32_t device_id, const void *image, void **module,
                                       char *error, size_t error_size) {
  if (image == NULL || module == NULL)
    return report(dlop__error(DLOP_INVALID_ARGUMENT, "cuda_module_load: image or module is NULL"),
                  error, error_size);
  *module = NULL;
  /* A module already loaded needs no driver call and no context switch. */
  pthread_mutex_lock(&modules_lock);
  int found = reference_loaded_locked(device_id, image, module);
  pthread_mutex_unlock(&modules_lock);
  if (found) return DLOP_OK;
  dlop__cuda_scope scope;
  int status = dlop__cuda_use_device(device_id, &scope);
  if (status != DLOP_OK) return report(status, error, error_size);
  status = load_module(device_id, image, module);
  return report(dlop__cuda_restore_after(&scope, status), error, error_size);
}

/* Load image on device_id (its context current), or take a reference to an entry another
 * thread added meanwhile. */
static int load_module(int32_t device_id, const void *image, void **module) {
  pthread_mutex_lock(&modules_lock);
  if (reference_loaded_locked(device_id, image, module)) {
    pthread_mutex_unlock(&modules_lock);
    return DLOP_OK;
  }
  module_entry *entry = calloc(1, sizeof *entry);
  if (entry == NULL) {
    pthread_mutex_unlock(&modules_lock);
    return dlop__error(DLOP_OUT_OF_MEMORY, "cuda_module_load: out of host memory");
  }
  CUresult result = dlop__cuda.cuModuleLoadData(&entry->module, image);
  if (result != DLOP_CUDA_SUCCESS) {
    pthread_mutex_unlock(&modules_lock);
    free(entry);
    char what[160];
    snprintf(what, sizeof what,
             "cuModuleLoadData on cuda:%d (is the fatbin built for this GPU's architecture?)",
             (int)device_id);
    return dlop__cuda_fail(result, what);
  }
  entry->device_id = device_id;
  entry->image = image;
  entry->references = 1;
  entry->next = modules;
  modules = entry;
  *module = entry->module;
  pthread_mutex_unlock(&modules_lock);
  return DLOP_OK;
}

static int dlop__host_cuda_module_unload(void *module) {
  pthread_mutex_lock(&modules_lock);
  module_entry *entry = find_module_locked((CUmodule)module);
  if (entry == NULL) {
    pthread_mutex_unlock(&modules_lock);
    return dlop__error(DLOP_INVALID_ARGUMENT,
                       "cuda_module_unload: %p is not a module loaded by cuda_module_load", module);
  }
  int status = DLOP_OK;
  if (--entry->references == 0) {
    for (module_entry **link = &modules; *link; link = &(*link)->next) {
      if (*link == entry) {
        *link = entry->next;
        break;
      }
    }
    dlop__cuda_scope scope;
    status = dlop__cuda_use_device(entry->device_id, &scope);
    if (status == DLOP_OK) {
      CUresult result = dlop__cuda.cuModuleUnload(entry->module);
      if (result != DLOP_CUDA_SUCCESS) status = dlop__cuda_fail(result, "cuModuleUnload");
      status = dlop__cuda_restore_after(&scope, status);
    }
    free(entry);
  }
  pthread_mutex_unlock(&modules_lock);
  return status;
}

int dlop__cuda_module_device(void *module, int32_t *device_id) {
  pthread_mutex_lock(&modules_lock);
  module_entry *entry = find_module_locked((CUmodule)module);
  *device_id = entry ? entry->device_id : -1;
  pthread_mutex_unlock(&modules_lock);
  if (entry == NULL)
    return dlop__error(DLOP_INVALID_ARGUMENT, "%p is not a CUDA module loaded by dlop", module);
  return DLOP_OK;
}

static int dlop__host_cuda_module_function(void *module, const char *name, void **function,
                                           char *error, size_t error_size) {
  if (module == NULL || name == NULL || function == NULL)
    return report(dlop__error(DLOP_INVALID_ARGUMENT,
                              "cuda_module_function: module, name or function is NULL"),
                  error, error_size);
  *function = NULL;
  pthread_mutex_lock(&modules_lock);
  module_entry *entry = find_module_locked((CUmodule)module);
  int32_t device_id = entry ? entry->device_id : -1;
  pthread_mutex_unlock(&modules_lock);
  if (entry == NULL)
    return report(dlop__error(DLOP_INVALID_ARGUMENT,
                              "cuda_module_function: %p is not a module loaded by cuda_module_load",
                              module),
                  error, error_size);
  dlop__cuda_scope scope;
  int status = dlop__cuda_use_device(device_id, &scope);
  if (status != DLOP_OK) return report(status, error, error_size);
  CUfunction found = NULL;
  CUresult result = dlop__cuda.cuModuleGetFunction(&found, (CUmodule)module, name);
  if (result != DLOP_CUDA_SUCCESS) {
    char what[256];
    snprintf(what, sizeof what, "cuModuleGetFunction(\"%s\") (is the kernel declared extern \"C\"?)",
             name);
    status = dlop__cuda_fail(result, what);
  } else {
    *function = found;
  }
  return report(dlop__cuda_restore_after(&scope, status), error, error_size);
}

static int dlop__host_cuda_launch(void *function, const uint32_t grid[3], const uint32_t block[3],
                                  uint32_t shared_bytes, void *stream, void **kernel_args,
                                  char *error, size_t error_size) {
  if (function == NULL || grid == NULL || block == NULL)
    return report(dlop__error(DLOP_INVALID_ARGUMENT, "cuda_launch: function, grid or block is NULL"),
                  error, error_size);
  if (block[0] == 0 || block[1] == 0 || block[2] == 0)
    return report(dlop__error(DLOP_INVALID_ARGUMENT, "cuda_launch: block (%u, %u, %u) has a zero size",
                              block[0], block[1], block[2]),
                  error, error_size);
  /* A run captured into a CUDA graph must enqueue all of its work on the capturing stream. */
  if (dlop__graph_capturing) dlop__graph_capture_saw_stream(stream, "launched a kernel");
  /* An empty grid (a tensor of size 0) is nothing to do, not an error. */
  if (grid[0] == 0 || grid[1] == 0 || grid[2] == 0) return DLOP_OK;
  dlop__cuda_scope scope;
  int status = dlop__cuda_use_stream((CUstream)stream, &scope);
  if (status != DLOP_OK) return report(status, error, error_size);
  CUresult result = dlop__cuda.cuLaunchKernel((CUfunction)function, grid[0], grid[1], grid[2],
                                              block[0], block[1], block[2], shared_bytes,
                                              (CUstream)stream, kernel_args, NULL);
  if (result != DLOP_CUDA_SUCCESS) {
    char what[160];
    snprintf(what, sizeof what, "cuLaunchKernel (grid %u x %u x %u, block %u x %u x %u, %u shared bytes)",
             grid[0], grid[1], grid[2], block[0], block[1], block[2], shared_bytes);
    status = dlop__cuda_fail(result, what);
  }
  return report(dlop__cuda_restore_after(&scope, status), error, error_size);
}

static int dlop__host_cuda_device_attribute(int32_t device_id, int32_t attribute, int32_t *value) {
  if (value == NULL)
    return dlop__error(DLOP_INVALID_ARGUMENT, "cuda_device_attribute: value is NULL");
  int status = dlop__cuda_check_device(device_id);
  if (status != DLOP_OK) return status;
  CUdevice device;
  int result_value = 0;
  CUresult result = dlop__cuda.cuDeviceGet(&device, device_id);
  if (result == DLOP_CUDA_SUCCESS)
    result = dlop__cuda.cuDeviceGetAttribute(&result_value, attribute, device);
  if (result != DLOP_CUDA_SUCCESS) return dlop__cuda_fail(result, "cuDeviceGetAttribute");
  *value = result_value;
  return DLOP_OK;
}

static int dlop__host_cuda_memcpy_async(void *destination, const void *source, size_t bytes,
                                        void *stream) {
  if (dlop__graph_capturing) dlop__graph_capture_saw_stream(stream, "copied memory");
  if (bytes == 0) return DLOP_OK;
  dlop__cuda_scope scope;
  int status = dlop__cuda_use_stream((CUstream)stream, &scope);
  if (status != DLOP_OK) return status;
  /* Unified addressing: the driver tells host from device pointers. */
  CUresult result = dlop__cuda.cuMemcpyAsync((CUdeviceptr)(uintptr_t)destination,
                                             (CUdeviceptr)(uintptr_t)source, bytes,
                                             (CUstream)stream);
  if (result != DLOP_CUDA_SUCCESS) status = dlop__cuda_fail(result, "cuMemcpyAsync");
  return dlop__cuda_restore_after(&scope, status);
}

static int dlop__host_cuda_memset_async(void *destination, uint8_t value, size_t bytes,
                                        void *stream) {
  if (dlop__graph_capturing) dlop__graph_capture_saw_stream(stream, "set memory");
  if (bytes == 0) return DLOP_OK;
  dlop__cuda_scope scope;
  int status = dlop__cuda_use_stream((CUstream)stream, &scope);
  if (status != DLOP_OK) return status;
  CUresult result = dlop__cuda.cuMemsetD8Async((CUdeviceptr)(uintptr_t)destination, value, bytes,
                                               (CUstream)stream);
  if (result != DLOP_CUDA_SUCCESS) status = dlop__cuda_fail(result, "cuMemsetD8Async");
  return dlop__cuda_restore_after(&scope, status);
}

static int dlop__host_cuda_stream_synchronize(void *stream) {
  if (dlop__graph_capturing) dlop__graph_capture_saw("synchronized a stream");
  dlop__cuda_scope scope;
  int status = dlop__cuda_use_stream((CUstream)stream, &scope);
  if (status != DLOP_OK) return status;
  CUresult result = dlop__cuda.cuStreamSynchronize((CUstream)stream);
  if (result != DLOP_CUDA_SUCCESS) status = dlop__cuda_fail(result, "cuStreamSynchronize");
  return dlop__cuda_restore_after(&scope, status);
}

/* ---- run-time compilation (ABI 1.2): NVRTC behind the cache, jit.h ------------------------ */

static int dlop__host_cuda_compile(int32_t device_id, const char *source,
                                   const char *const *options, int32_t num_options, void **module,
                                   char *error, size_t error_size) {
  return dlop__cuda_compile_module(device_id, source, options, num_options, module, error,
                                   error_size);
}

/* ---- the table ---------------------------------------------------------------------------- */

static const dlop_host_api host_api = {
    .struct_size = sizeof(dlop_host_api),
    .abi_version = DLOP_ABI_VERSION,
    .log = dlop__host_log,
    .memory_alloc = dlop__host_memory_alloc,
    .memory_free = dlop__host_memory_free,
    .parallel_for = dlop__parallel_for,
    .cpu_threads = dlop__cpu_threads,
    .cuda_module_load = dlop__host_cuda_module_load,
    .cuda_module_unload = dlop__host_cuda_module_unload,
    .cuda_module_function = dlop__host_cuda_module_function,
    .cuda_launch = dlop__host_cuda_launch,
    .cuda_device_attribute = dlop__host_cuda_device_attribute,
    .cuda_memcpy_async = dlop__host_cuda_memcpy_async,
    .cuda_memset_async = dlop__host_cuda_memset_async,
    .cuda_stream_synchronize = dlop__host_cuda_stream_synchronize,
    .cublas_handle = dlop__cublas_handle,
    .cublas_symbol = dlop__cublas_symbol,
    .cuda_compile = dlop__host_cuda_compile,
};

const dlop_host_api *dlop__host_api(void) { return &host_api; }

const dlop_host_api *dlop_host_api_table(void) { return &host_api; }
